/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * event_attached.c - a spoke shard embedded in a libevent event_base.
 *
 * The pattern to copy: the loop thread takes shard K over (spoke_attach),
 * watches spoke_wake_fd() with an EV_READ | EV_PERSIST event and keeps one
 * evtimer armed for spoke_next_deadline_ns(); both callbacks call loop_turn(),
 * which runs what is due (spoke_poll: the timers' callbacks run right
 * there, on the loop thread) and re-arms the evtimer:
 *
 *     static void loop_turn(struct app *a)
 *     {
 *             spoke_poll(a->s);                       callbacks run here
 *             uint64_t ns;
 *             if (spoke_next_deadline_ns(a->s, &ns) == 1) evtimer_del(a->deadline);
 *                                                     1: nothing pending
 *             else { event_base_update_cache_time(base);
 *                    evtimer_add(a->deadline, &(struct timeval){ceil(ns / 1 us)}); }
 *     }
 *
 * libevent counts timeouts from a cached time and may wake a little early
 * or late: an early turn runs nothing and re-arms for the rest, and spoke
 * never runs a callback before its deadline whatever wakes the loop.
 * Starts and cancels from other threads (spoke_start_on(s, K, ...)) reach
 * the shard through its inbox; when one matters before the armed deadline,
 * the wake fd turns readable. No evthread_use_pthreads() is needed: only
 * the loop thread touches the event_base.
 *
 * The timers it starts and the checks on them are in attached_check.h,
 * shared with uv_attached.c. Exit status: 0 if every check passed, 1 if one
 * failed, 2 on a setup error.
 */
#define _GNU_SOURCE
#include "attached_check.h"

#include <event2/event.h>
#include <spoke/spoke.h>

#include <stdint.h>
#include <sys/time.h>

/* The loop's events, touched by the loop thread only, beside the checks' state. */
struct app {
	struct check c; /* the timers and checks (attached_check.h) */
	struct event_base *base;
	struct event *wake;	/* readable: another thread's call needs the loop sooner */
	struct event *deadline; /* armed for spoke_next_deadline_ns() */
};

/* --- the libevent side -------------------------------------------------------------- */

static void loop_turn(struct app *a)
{
	uint64_t ns;
	int next;

	a->c.in_poll = true;
	if (spoke_poll(a->c.s) < 0)
		check_fail(&a->c, "spoke_poll failed");
	a->c.in_poll = false;
	if (check_all_ended(&a->c)) {
		/* Everything ended: with no event left, event_base_dispatch returns. */
		event_del(a->wake);
		event_del(a->deadline);
		return;
	}
	next = spoke_next_deadline_ns(a->c.s, &ns);
	if (next < 0) {
		check_fail(&a->c, "spoke_next_deadline_ns failed");
		event_base_loopbreak(a->base);
	} else if (next == 1) {
		evtimer_del(a->deadline); /* nothing pending: only the wake fd can wake us */
	} else {
		uint64_t us = (ns + 999) / 1000;
		struct timeval tv = {.tv_sec = (time_t)(us / 1000000),
				     .tv_usec = (suseconds_t)(us % 1000000)};

		event_base_update_cache_time(a->base); /* libevent counts from its cached time */
		evtimer_add(a->deadline, &tv);
	}
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct app *a = arg;

	(void)fd, (void)what;
	a->c.turns_timed++;
	loop_turn(a);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct app *a = arg;

	(void)fd, (void)what;
	a->c.turns_woken++;
	loop_turn(a); /* spoke_poll also empties the fd */
}

static void *loop_main(void *arg)
{
	struct app *a = arg;
	int fd, err = spoke_attach(a->c.s, SHARD);

	if (err || (fd = spoke_wake_fd(a->c.s)) < 0 || !(a->base = event_base_new()) ||
	    !(a->wake = event_new(a->base, fd, EV_READ | EV_PERSIST, on_wake, a)) ||
	    !(a->deadline = evtimer_new(a->base, on_deadline, a)) || event_add(a->wake, NULL)) {
		check_fail(&a->c, "spoke_attach, spoke_wake_fd or libevent setup failed");
		check_loop_ready(&a->c);
		return NULL;
	}
	check_loop_ready(&a->c);

	check_start_local(&a->c);
	loop_turn(a); /* arm the evtimer */
	if (event_base_dispatch(a->base) < 0)
		check_fail(&a->c, "event_base_dispatch failed");
	event_free(a->wake);
	event_free(a->deadline);
	event_base_free(a->base);
	if (spoke_detach(a->c.s) != 0) /* the shard goes back to a managed thread */
		check_fail(&a->c, "spoke_detach failed");
	return NULL;
}

int main(void)
{
	static struct app a = {.c = {.name = "event-attached", .lib = "libevent"}};

	return check_main(&a.c, event_get_version(), loop_main, &a);
}
