/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * attached_check.h - the checking half of uv_attached.c and event_attached.c.
 *
 * Not part of the pattern to copy: each example's own file holds the loop
 * integration (spoke_attach, the wake fd watched by the loop, loop_turn with
 * spoke_poll and spoke_next_deadline_ns); this header holds the timers both
 * start to exercise it and the checks on them, so the two loops are driven
 * and judged alike.
 *
 * What it does: the loop thread starts LOCAL timers on its shard and
 * cancels every fifth (check_start_local); another thread starts REMOTE
 * timers on the same shard and cancels every fourth, then starts one last
 * timer that tells the loop it is done (check_remote_main). The callbacks
 * count their runs in plain loop state (no locks: they run only inside
 * spoke_poll on the loop thread). The loop stops by itself once every timer
 * has ended (check_all_ended). check_main's exit status: 0 if every timer
 * ran exactly once unless a cancel returned 0 (then never), never before its
 * deadline, always on the loop thread inside spoke_poll; 1 if a check
 * failed; 2 on a setup error.
 */
#ifndef SPOKE_EXAMPLES_ATTACHED_CHECK_H
#define SPOKE_EXAMPLES_ATTACHED_CHECK_H

#include <spoke/spoke.h>

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#define MS	UINT64_C(1000000)
#define SHARD	0 /* the shard the loop attaches */
#define LOCAL	24
#define REMOTE	24
#define N_TIMER (LOCAL + REMOTE)

struct check;

struct check_timer {
	struct check *check;
	spoke_id id;
	uint64_t deadline_ns; /* the callback must not run before this */
	bool cancelled;	      /* a spoke_cancel of it returned 0 */
	unsigned runs;	      /* written by its callback (the loop thread) only */
};

/*
 * The checks' state, first member of each example's struct app. The loop
 * thread touches it (callbacks included), but for the remote thread's starts
 * and cancels of t[LOCAL, N_TIMER), which the callback of its "done" timer
 * reads only after they are decided. name and lib are set by the example.
 */
struct check {
	struct spoke *s;
	const char *name; /* the program's, first word of its messages */
	const char *lib;  /* the loop library's, for the summary line */
	pthread_t loop_thread;
	bool in_poll;	   /* inside spoke_poll, the only place callbacks may run */
	bool remote_done;  /* the remote thread's last timer ran */
	unsigned ended;	   /* timers that ran or were cancelled (local) / ran (remote) */
	unsigned expected; /* timers to end before stopping */
	unsigned turns_woken, turns_timed; /* loop turns the wake fd / the timer started */
	unsigned failures;
	const char *first_failure;
	struct check_timer t[N_TIMER]; /* [0, LOCAL): the loop's; [LOCAL, N_TIMER): the remote's */
	struct check_timer done;       /* the remote thread's "I am done" */
	sem_t attached;		       /* posted once the loop owns the shard */
};

static void check_fail(struct check *c, const char *what)
{
	if (!c->failures++)
		c->first_failure = what;
}

/* A timer's callback: inline in spoke_poll, on the loop thread. */
static void on_timer(void *arg)
{
	struct check_timer *t = arg;
	struct check *c = t->check;

	if (!pthread_equal(pthread_self(), c->loop_thread) || !c->in_poll)
		check_fail(c, "callback outside the loop thread's spoke_poll");
	if (spoke_now_ns() < t->deadline_ns)
		check_fail(c, "callback before its deadline");
	if (t->runs++)
		check_fail(c, "callback ran twice");
	c->ended++;
}

/* The remote thread's last timer: its cancels are decided, now count the rest. */
static void on_remote_done(void *arg)
{
	struct check_timer *t = arg;
	struct check *c = t->check;

	on_timer(t);
	for (unsigned i = LOCAL; i < N_TIMER; i++)
		if (!c->t[i].cancelled)
			c->expected++;
	c->remote_done = true;
}

static int check_start(struct check *c, struct check_timer *t, uint64_t delay_ns, spoke_fn *fn)
{
	t->check = c;
	t->deadline_ns = spoke_now_ns() + delay_ns; /* spoke reads the clock later */
	return spoke_start_on(c->s, SHARD, delay_ns, fn, t, &t->id);
}

/* Every timer has ended: the loop may stop. */
static bool check_all_ended(const struct check *c)
{
	return c->remote_done && c->ended == c->expected;
}

/* The loop thread owns the shard, or gave up trying: let the remote thread start. */
static void check_loop_ready(struct check *c)
{
	c->loop_thread = pthread_self();
	sem_post(&c->attached); /* from now on spoke_start_on(SHARD) lands on this loop */
}

/* On the loop thread, once it owns the shard, before it first turns. */
static void check_start_local(struct check *c)
{
	/* Timers started from the loop thread go straight into the shard's wheel. */
	for (unsigned i = 0; i < LOCAL; i++)
		if (check_start(c, &c->t[i], (5 + 7 * i) * MS, on_timer) != 0)
			check_fail(c, "spoke_start_on failed");
	for (unsigned i = 0; i < LOCAL; i += 5) {
		/* Not run yet: its callback could only run inside our spoke_poll. */
		if (spoke_cancel(c->s, c->t[i].id) != 0)
			check_fail(c, "loop-thread cancel of a pending timer did not return 0");
		c->t[i].cancelled = true;
		c->ended++;
	}
	c->expected = LOCAL + 1; /* + the remote "done" timer; its callback adds the rest */
}

/* Another thread: cross-thread starts and cancels. */
static void *check_remote_main(void *arg)
{
	struct check *c = arg;

	sem_wait(&c->attached);
	for (unsigned i = LOCAL; i < N_TIMER; i++)
		if (check_start(c, &c->t[i], (3 + 5 * (i - LOCAL)) * MS, on_timer) != 0)
			goto failed;
	/* A cancel from another thread is decided at once: 0 means the callback will never
	 * run, -ENOENT that it has run or is running (if this thread was held up). */
	for (unsigned i = LOCAL; i < N_TIMER; i += 4)
		c->t[i].cancelled = spoke_cancel(c->s, c->t[i].id) == 0;
	if (check_start(c, &c->done, 0, on_remote_done) == 0) /* its callback reads the verdicts */
		return NULL;
failed: /* the loop cannot know it is done: report and end the process */
	fprintf(stderr, "%s: spoke_start_on from another thread failed\n", c->name);
	_exit(2);
}

/* The whole run: a service of two shards, loop_main(loop_arg) on one thread
 * and check_remote_main on another, then the verdict. Returns the exit status. */
static int check_main(struct check *c, const char *lib_version, void *(*loop_main)(void *),
		      void *loop_arg)
{
	struct spoke_config cfg;
	pthread_t loop, remote;
	unsigned ran = 0, cancelled = 0, bad = 0;

	spoke_config_init(&cfg);
	cfg.shards = 2;
	if (spoke_create(&c->s, &cfg) != 0 || sem_init(&c->attached, 0, 0) != 0) {
		fprintf(stderr, "%s: setup failed\n", c->name);
		return 2;
	}
	if (pthread_create(&loop, NULL, loop_main, loop_arg) != 0 ||
	    pthread_create(&remote, NULL, check_remote_main, c) != 0) {
		fprintf(stderr, "%s: pthread_create failed\n", c->name);
		return 2;
	}
	pthread_join(remote, NULL);
	pthread_join(loop, NULL);
	spoke_destroy(c->s);

	for (unsigned i = 0; i < N_TIMER; i++) {
		ran += c->t[i].runs;
		cancelled += c->t[i].cancelled;
		bad += c->t[i].runs + c->t[i].cancelled != 1;
	}
	if (bad || c->done.runs != 1)
		check_fail(c, "a timer did not end exactly once");
	printf("%s: %s %s, shard %u: %u timers started on the loop thread, %u from another "
	       "thread; %u ran, %u cancelled; loop turns: %u woken by the wake fd, %u by the "
	       "timer\n",
	       c->name, c->lib, lib_version, SHARD, LOCAL, REMOTE, ran, cancelled, c->turns_woken,
	       c->turns_timed);
	if (c->failures) {
		printf("%s: FAIL: %u failed checks, first: %s\n", c->name, c->failures,
		       c->first_failure);
		return 1;
	}
	printf("%s: PASS (every timer ran exactly once or was cancelled, never early, on the loop "
	       "thread)\n",
	       c->name);
	return 0;
}

#endif
