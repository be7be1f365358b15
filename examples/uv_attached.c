/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * uv_attached.c - a spoke shard embedded in a libuv loop.
 *
 * The pattern to copy: the loop thread takes shard K over (spoke_attach),
 * watches spoke_wake_fd() with a uv_poll_t and keeps one uv_timer_t armed
 * for spoke_next_deadline_ns(); both callbacks call loop_turn(), which runs
 * what is due (spoke_poll: the timers' callbacks run right there, on the
 * loop thread) and re-arms the uv_timer_t:
 *
 *     static void loop_turn(struct app *a)
 *     {
 *             spoke_poll(a->s);                       callbacks run here
 *             uint64_t ns;
 *             if (spoke_next_deadline_ns(a->s, &ns) == 1) uv_timer_stop(&a->deadline);
 *                                                     1: nothing pending
 *             else { uv_update_time(loop); uv_timer_start(&a->deadline, on_deadline,
 *                                                          ceil(ns / 1 ms), 0); }
 *     }
 *
 * libuv's timers count whole milliseconds from a cached loop time, so the
 * uv_timer_t may go off a little early or late: an early turn runs nothing
 * and re-arms for the rest, and spoke never runs a callback before its
 * deadline whatever wakes the loop. Starts and cancels from other threads
 * (spoke_start_on(s, K, ...)) reach the shard through its inbox; when one
 * matters before the armed deadline, the wake fd turns readable.
 *
 * The timers it starts and the checks on them are in attached_check.h,
 * shared with event_attached.c. Exit status: 0 if every check passed, 1 if
 * one failed, 2 on a setup error.
 */
#define _GNU_SOURCE
#include "attached_check.h"

#include <spoke/spoke.h>
#include <uv.h>

#include <stdint.h>

/* The loop's handles, touched by the loop thread only, beside the checks' state. */
struct app {
	struct check c; /* the timers and checks (attached_check.h) */
	uv_loop_t loop;
	uv_poll_t wake;	     /* readable: another thread's call needs the loop sooner */
	uv_timer_t deadline; /* armed for spoke_next_deadline_ns() */
};

/* --- the libuv side ------------------------------------------------------------------ */

static void on_deadline(uv_timer_t *h);

static void on_closed(uv_handle_t *h)
{
	(void)h;
}

static void loop_turn(struct app *a)
{
	uint64_t ns;
	int next;

	a->c.in_poll = true;
	if (spoke_poll(a->c.s) < 0)
		check_fail(&a->c, "spoke_poll failed");
	a->c.in_poll = false;
	if (check_all_ended(&a->c)) {
		/* Everything ended: leave the loop (uv_run returns once the handles are closed). */
		uv_close((uv_handle_t *)&a->wake, on_closed);
		uv_close((uv_handle_t *)&a->deadline, on_closed);
		return;
	}
	next = spoke_next_deadline_ns(a->c.s, &ns);
	if (next < 0) {
		check_fail(&a->c, "spoke_next_deadline_ns failed");
		uv_stop(&a->loop);
	} else if (next == 1) {
		uv_timer_stop(&a->deadline); /* nothing pending: only the wake fd can wake us */
	} else {
		uv_update_time(&a->loop); /* uv counts from its cached time */
		uv_timer_start(&a->deadline, on_deadline, (ns + MS - 1) / MS, 0);
	}
}

static void on_deadline(uv_timer_t *h)
{
	struct app *a = h->data;

	a->c.turns_timed++;
	loop_turn(a);
}

static void on_wake(uv_poll_t *h, int status, int events)
{
	struct app *a = h->data;

	(void)events;
	if (status < 0)
		check_fail(&a->c, "uv_poll error on the wake fd");
	a->c.turns_woken++;
	loop_turn(a); /* spoke_poll also empties the fd */
}

static void *loop_main(void *arg)
{
	struct app *a = arg;
	int fd, err = spoke_attach(a->c.s, SHARD);

	if (err || (fd = spoke_wake_fd(a->c.s)) < 0 || uv_loop_init(&a->loop) != 0) {
		check_fail(&a->c, "spoke_attach, spoke_wake_fd or uv_loop_init failed");
		check_loop_ready(&a->c);
		return NULL;
	}
	uv_poll_init(&a->loop, &a->wake, fd);
	uv_timer_init(&a->loop, &a->deadline);
	a->wake.data = a->deadline.data = a;
	uv_poll_start(&a->wake, UV_READABLE, on_wake);
	check_loop_ready(&a->c);

	check_start_local(&a->c);
	loop_turn(a); /* arm the uv_timer_t */
	uv_run(&a->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&a->loop) != 0)
		check_fail(&a->c, "uv_loop_close: handles left open");
	if (spoke_detach(a->c.s) != 0) /* the shard goes back to a managed thread */
		check_fail(&a->c, "spoke_detach failed");
	return NULL;
}

int main(void)
{
	static struct app a = {.c = {.name = "uv-attached", .lib = "libuv"}};

	return check_main(&a.c, uv_version_string(), loop_main, &a);
}
