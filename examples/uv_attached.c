/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * uv_attached.c - a spoke shard embedded in a libuv loop.
 *
 * The pattern to copy: the loop thread takes shard K over (spoke_attach),
 * watches spoke_wake_fd() with a uv_poll_t and keeps one uv_timer_t armed
 * for spoke_next_deadline(); both callbacks call loop_turn(), which runs
 * what is due (spoke_poll: the timers' callbacks run right there, on the
 * loop thread) and re-arms the uv_timer_t:
 *
 *     static void loop_turn(struct app *a)
 *     {
 *             spoke_poll(a->s);                       callbacks run here
 *             int64_t ns = spoke_next_deadline(a->s); -1: nothing pending
 *             if (ns < 0) uv_timer_stop(&a->deadline);
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
 * What it does: the loop thread starts LOCAL timers on its shard and
 * cancels every fifth; another thread starts REMOTE timers on the same
 * shard and cancels every fourth, then starts one last timer that tells
 * the loop it is done. The callbacks count their runs in plain loop state
 * (no locks: they run only inside spoke_poll on the loop thread). The loop
 * stops by itself once every timer has ended. Exit status: 0 if every timer
 * ran exactly once unless a cancel returned 0 (then never), never before
 * its deadline, always on the loop thread inside spoke_poll; 1 if a check
 * failed; 2 on a setup error.
 */
#define _GNU_SOURCE
#include <spoke/spoke.h>
#include <uv.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MS	UINT64_C(1000000)
#define SHARD	0 /* the shard the loop attaches */
#define LOCAL	24
#define REMOTE	24
#define N_TIMER (LOCAL + REMOTE)

struct app;

struct timer {
	struct app *app;
	spoke_id id;
	uint64_t deadline_ns; /* the callback must not run before this */
	bool cancelled;	      /* a spoke_cancel of it returned 0 */
	unsigned runs;	      /* written by its callback (the loop thread) only */
};

/* Loop state: touched by the loop thread only, callbacks included. */
struct app {
	struct spoke *s;
	uv_loop_t loop;
	uv_poll_t wake;	     /* readable: another thread's call needs the loop sooner */
	uv_timer_t deadline; /* armed for spoke_next_deadline() */
	pthread_t loop_thread;
	bool in_poll;	   /* inside spoke_poll, the only place callbacks may run */
	bool remote_done;  /* the remote thread's last timer ran */
	unsigned ended;	   /* timers that ran or were cancelled (local) / ran (remote) */
	unsigned expected; /* timers to end before stopping */
	unsigned turns_woken, turns_timed; /* loop turns the wake fd / the timer started */
	unsigned failures;
	const char *first_failure;
	struct timer t[N_TIMER]; /* [0, LOCAL): the loop's; [LOCAL, N_TIMER): the remote's */
	struct timer done;	 /* the remote thread's "I am done" */
	sem_t attached;		 /* posted once the loop owns the shard */
};

static void fail(struct app *a, const char *what)
{
	if (!a->failures++)
		a->first_failure = what;
}

/* A timer's callback: inline in spoke_poll, on the loop thread. */
static void on_timer(void *arg)
{
	struct timer *t = arg;
	struct app *a = t->app;

	if (!pthread_equal(pthread_self(), a->loop_thread) || !a->in_poll)
		fail(a, "callback outside the loop thread's spoke_poll");
	if (spoke_now_ns() < t->deadline_ns)
		fail(a, "callback before its deadline");
	if (t->runs++)
		fail(a, "callback ran twice");
	a->ended++;
}

/* The remote thread's last timer: its cancels are decided, now count the rest. */
static void on_remote_done(void *arg)
{
	struct timer *t = arg;
	struct app *a = t->app;

	on_timer(t);
	for (unsigned i = LOCAL; i < N_TIMER; i++)
		if (!a->t[i].cancelled)
			a->expected++;
	a->remote_done = true;
}

static int start(struct app *a, struct timer *t, uint64_t delay_ns, spoke_fn *fn)
{
	t->app = a;
	t->deadline_ns = spoke_now_ns() + delay_ns; /* spoke reads the clock later */
	return spoke_start_on(a->s, SHARD, delay_ns, fn, t, &t->id);
}

/* --- the libuv side ------------------------------------------------------------------ */

static void on_deadline(uv_timer_t *h);

static void on_closed(uv_handle_t *h)
{
	(void)h;
}

static void loop_turn(struct app *a)
{
	int64_t ns;

	a->in_poll = true;
	if (spoke_poll(a->s) < 0)
		fail(a, "spoke_poll failed");
	a->in_poll = false;
	if (a->remote_done && a->ended == a->expected) {
		/* Everything ended: leave the loop (uv_run returns once the handles are closed). */
		uv_close((uv_handle_t *)&a->wake, on_closed);
		uv_close((uv_handle_t *)&a->deadline, on_closed);
		return;
	}
	ns = spoke_next_deadline(a->s);
	if (ns < -1) {
		fail(a, "spoke_next_deadline failed");
		uv_stop(&a->loop);
	} else if (ns == -1) {
		uv_timer_stop(&a->deadline); /* nothing pending: only the wake fd can wake us */
	} else {
		uv_update_time(&a->loop); /* uv counts from its cached time */
		uv_timer_start(&a->deadline, on_deadline, ((uint64_t)ns + MS - 1) / MS, 0);
	}
}

static void on_deadline(uv_timer_t *h)
{
	((struct app *)h->data)->turns_timed++;
	loop_turn(h->data);
}

static void on_wake(uv_poll_t *h, int status, int events)
{
	(void)events;
	if (status < 0)
		fail(h->data, "uv_poll error on the wake fd");
	((struct app *)h->data)->turns_woken++;
	loop_turn(h->data); /* spoke_poll also empties the fd */
}

static void *loop_main(void *arg)
{
	struct app *a = arg;
	int fd, err = spoke_attach(a->s, SHARD);

	a->loop_thread = pthread_self();
	if (err || (fd = spoke_wake_fd(a->s)) < 0 || uv_loop_init(&a->loop) != 0) {
		fail(a, "spoke_attach, spoke_wake_fd or uv_loop_init failed");
		sem_post(&a->attached);
		return NULL;
	}
	uv_poll_init(&a->loop, &a->wake, fd);
	uv_timer_init(&a->loop, &a->deadline);
	a->wake.data = a->deadline.data = a;
	uv_poll_start(&a->wake, UV_READABLE, on_wake);
	sem_post(&a->attached); /* from now on spoke_start_on(SHARD) lands on this loop */

	/* Timers started from the loop thread go straight into the shard's wheel. */
	for (unsigned i = 0; i < LOCAL; i++)
		if (start(a, &a->t[i], (5 + 7 * i) * MS, on_timer) != 0)
			fail(a, "spoke_start_on failed");
	for (unsigned i = 0; i < LOCAL; i += 5) {
		/* Not run yet: its callback could only run inside our spoke_poll. */
		if (spoke_cancel(a->s, a->t[i].id) != 0)
			fail(a, "loop-thread cancel of a pending timer did not return 0");
		a->t[i].cancelled = true;
		a->ended++;
	}
	a->expected = LOCAL + 1; /* + the remote "done" timer; its callback adds the rest */
	loop_turn(a);		 /* arm the uv_timer_t */
	uv_run(&a->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&a->loop) != 0)
		fail(a, "uv_loop_close: handles left open");
	if (spoke_detach(a->s) != 0) /* the shard goes back to a managed thread */
		fail(a, "spoke_detach failed");
	return NULL;
}

/* --- another thread: cross-thread starts and cancels ------------------------------------ */

static void *remote_main(void *arg)
{
	struct app *a = arg;

	sem_wait(&a->attached);
	for (unsigned i = LOCAL; i < N_TIMER; i++)
		if (start(a, &a->t[i], (3 + 5 * (i - LOCAL)) * MS, on_timer) != 0)
			goto failed;
	/* A cancel from another thread is decided at once: 0 means the callback will never
	 * run, -ENOENT that it has run or is running (if this thread was held up). */
	for (unsigned i = LOCAL; i < N_TIMER; i += 4)
		a->t[i].cancelled = spoke_cancel(a->s, a->t[i].id) == 0;
	if (start(a, &a->done, 0, on_remote_done) == 0) /* its callback reads the verdicts */
		return NULL;
failed: /* the loop cannot know it is done: report and end the process */
	fprintf(stderr, "uv-attached: spoke_start_on from another thread failed\n");
	_exit(2);
}

int main(void)
{
	static struct app a;
	struct spoke_config cfg;
	pthread_t loop, remote;
	unsigned ran = 0, cancelled = 0, bad = 0;

	spoke_config_init(&cfg);
	cfg.shards = 2;
	if (spoke_create(&a.s, &cfg) != 0 || sem_init(&a.attached, 0, 0) != 0) {
		fprintf(stderr, "uv-attached: setup failed\n");
		return 2;
	}
	if (pthread_create(&loop, NULL, loop_main, &a) != 0 ||
	    pthread_create(&remote, NULL, remote_main, &a) != 0) {
		fprintf(stderr, "uv-attached: pthread_create failed\n");
		return 2;
	}
	pthread_join(remote, NULL);
	pthread_join(loop, NULL);
	spoke_destroy(a.s);

	for (unsigned i = 0; i < N_TIMER; i++) {
		ran += a.t[i].runs;
		cancelled += a.t[i].cancelled;
		bad += a.t[i].runs + a.t[i].cancelled != 1;
	}
	if (bad || a.done.runs != 1)
		fail(&a, "a timer did not end exactly once");
	printf("uv-attached: libuv %s, shard %u: %u timers started on the loop thread, %u from "
	       "another thread; %u ran, %u cancelled; loop turns: %u woken by the wake fd, %u by "
	       "the timer\n",
	       uv_version_string(), SHARD, LOCAL, REMOTE, ran, cancelled, a.turns_woken,
	       a.turns_timed);
	if (a.failures) {
		printf("uv-attached: FAIL: %u failed checks, first: %s\n", a.failures,
		       a.first_failure);
		return 1;
	}
	printf("uv-attached: PASS (every timer ran exactly once or was cancelled, never early, "
	       "on the loop thread)\n");
	return 0;
}
