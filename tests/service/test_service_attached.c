/* SPDX-License-Identifier: MIT */
/*
 * test_service_attached.c - attached mode of include/spoke/spoke.h (spoke_attach, spoke_poll,
 * spoke_detach, the wake fd; docs/contract.md, The service):
 *
 *   attached_mode_runs_inline_in_poll    attached: inline in poll, other threads' starts,
 *                                        own starts, managed thread stops, next_deadline
 *   attached_wake_fd_cross_thread_start  wake fd: another thread's start wakes the loop
 *   attached_wake_fd_destroy_wakes_loop  wake fd: destroy beginning wakes the loop
 *   attached_detach_hands_shard_back     spoke_detach: managed again, nothing lost, re-attach
 *   attached_thread_exit_detaches        an attached thread's exit detaches its shard
 *   attached_detach_attach_race          attach/detach/exit races: one owner at a time
 *   attached_poll_not_a_cancellation_point  a pending cancel acts after spoke_poll
 *   attached_attach_waits_for_pool_runs  attach waits for the shard's running pool callbacks
 *   attached_attach_recalls_queued_runs  ... but not for queued ones: they run in its poll
 *   attached_attach_from_pool_callback   a pool callback attaches its own shard: no deadlock
 *   attached_attach_cross_from_pool_callbacks  two pool callbacks attach each other's shard
 *   attached_attach_cross_instances_from_pool  ... and so do two of two instances
 *   attached_attach_from_dying_instance_callback  an inline callback of an instance being
 *                                        destroyed cannot attach another's shard (-EBUSY)
 *
 * Usage: test_service_attached [test name...]   (no name: all)
 */
#include "service_util.h"

#include <poll.h>

/* ==== attached mode ============================================================================
 */

#define ATT_OWN	    50
#define ATT_THREADS 4
#define ATT_REMOTE  200

static _Thread_local int att_in_poll;

struct att_ctx {
	struct spoke *s;
	pthread_t tid;
	atomic_int attached, hold, stop, phase2, phase2_done;
	_Atomic uint64_t attached_at;
	struct trec pre, x1, own[ATT_OWN], remote[ATT_THREADS * ATT_REMOTE], nd_rec;
	uint64_t nd_empty, nd_started, nd_due;	   /* spoke_next_deadline_ns: the ns */
	int nd_empty_rc, nd_started_rc, nd_due_rc; /* and what it returned */
	int poll_due;
	atomic_int busy_rc, busy_self_rc;
};

static struct att_ctx att;

static void att_fn(void *arg)
{
	uint64_t at = atomic_load(&att.attached_at);

	/* `pre` may still have run on the managed side if the attach took 20 ms */
	if (!(arg == &att.pre && (at == 0 || spoke_now_ns() < at))) {
		BG_CHECK(pthread_equal(pthread_self(), att.tid));
		BG_CHECK(att_in_poll == 1);
	}
	trec_fire(arg);
}

static int att_poll(struct spoke *s)
{
	int r;

	att_in_poll = 1;
	r = spoke_poll(s);
	att_in_poll = 0;
	BG_CHECK_INT(r, >=, 0);
	return r;
}

static void *att_thread(void *p)
{
	struct att_ctx *c = p;
	struct rng rng = {0xa77};

	c->tid = pthread_self();
	BG_CHECK_INT(spoke_attach(c->s, 1), ==, 0);
	atomic_store(&c->attached_at, spoke_now_ns());
	atomic_store(&c->busy_self_rc, spoke_attach(c->s, 0)); /* already owns shard 1 */
	atomic_store(&c->attached, 1);
	while (atomic_load(&c->hold))
		sleep_ns(200 * US);
	for (unsigned i = 0; i < ATT_OWN; i++) {
		uint64_t d = rng_below(&rng, 2 * MS);

		atomic_store(&c->own[i].earliest, spoke_now_ns() + d);
		BG_CHECK_INT(spoke_start(c->s, d, att_fn, &c->own[i], NULL), ==, 0);
	}
	while (!atomic_load(&c->phase2)) {
		uint64_t nd;

		att_poll(c->s);
		BG_CHECK_INT(spoke_next_deadline_ns(c->s, &nd), >=, 0);
		sleep_ns(nd > 500 * US ? 500 * US : nd);
	}
	/* phase 2: everything on shard 1 has run; next_deadline follows this thread's timers */
	att_poll(c->s);
	c->nd_empty_rc = spoke_next_deadline_ns(c->s, &c->nd_empty);
	atomic_store(&c->nd_rec.earliest, spoke_now_ns() + 50 * MS);
	BG_CHECK_INT(spoke_start(c->s, 50 * MS, att_fn, &c->nd_rec, NULL), ==, 0);
	c->nd_started_rc = spoke_next_deadline_ns(c->s, &c->nd_started);
	sleep_ns(52 * MS + MS); /* past the deadline and its tick */
	c->nd_due_rc = spoke_next_deadline_ns(c->s, &c->nd_due);
	c->poll_due = att_poll(c->s);
	atomic_store(&c->phase2_done, 1);
	while (!atomic_load(&c->stop))
		sleep_ns(MS);
	return NULL;
}

static void att_remote_worker(unsigned idx, void *p)
{
	struct att_ctx *c = p;
	struct rng rng = {0xa700 + idx};

	for (unsigned j = 0; j < ATT_REMOTE; j++) {
		struct trec *r = &c->remote[idx * ATT_REMOTE + j];
		uint64_t d = rng_below(&rng, 3 * MS);

		atomic_store(&r->earliest, spoke_now_ns() + d);
		BG_CHECK_INT(spoke_start_on(c->s, 1, d, att_fn, r, NULL), ==, 0);
	}
}

static void *att_busy_thread(void *p)
{
	struct att_ctx *c = p;

	atomic_store(&c->busy_rc, spoke_attach(c->s, 1));
	return NULL;
}

static bool att_all_fired(void)
{
	if (!atomic_load(&att.pre.fired) || !atomic_load(&att.x1.fired))
		return false;
	for (unsigned i = 0; i < ATT_OWN; i++)
		if (!atomic_load(&att.own[i].fired))
			return false;
	for (unsigned i = 0; i < ATT_THREADS * ATT_REMOTE; i++)
		if (!atomic_load(&att.remote[i].fired))
			return false;
	return true;
}

/*
 * Attached mode (docs/contract.md): a thread attaches to shard 1 (spoke_attach) and loops
 * spoke_poll / spoke_next_deadline_ns. Its managed thread stops driving it at
 * once: a timer started after the attach (and one pending before it, if
 * the attach was done before it was due) does not run while the attached
 * thread holds off polling. Then every callback of
 * shard 1 runs inline in that thread's poll (pthread_self, a thread-local
 * "in poll" flag): timers started before the attach, by 4 other threads
 * with spoke_start_on, and by the attached thread itself with spoke_start
 * (its own shard: shard 1's started count takes them all, shard 0's none);
 * each exactly once, never early. stats report shard 1 attached.
 * next_deadline: -1 with nothing pending, at most 50 ms + a tick right after
 * a 50 ms start, 0 once it is due, and that poll runs it.
 */
static void attached_mode_runs_inline_in_poll(void **state)
{
	(void)state;
	struct spoke_stats *st = stats_new();
	pthread_t t, b;
	unsigned expect1;

	memset(&att, 0, sizeof(att));
	trec_reset_globals();
	att.s = svc_new(2, 250 * US, 2);
	atomic_store(&att.hold, 1);
	atomic_store(&att.pre.earliest, spoke_now_ns() + 20 * MS);
	assert_int_equal(spoke_start_on(att.s, 1, 20 * MS, att_fn, &att.pre, NULL), 0);
	ASSERT_EVENTUALLY((spoke_stats(att.s, st), st->shard[1].pending == 1) ||
				  atomic_load(&att.pre.fired),
			  "shard 1 to take the timer");
	t = thread_start(att_thread, &att);
	ASSERT_EVENTUALLY(atomic_load(&att.attached), "the attach");
	assert_int_equal(atomic_load(&att.busy_self_rc), -EBUSY);
	b = thread_start(att_busy_thread, &att);
	pthread_join(b, NULL);
	assert_int_equal(atomic_load(&att.busy_rc), -EBUSY);
	spoke_stats(att.s, st);
	assert_true(st->shard[1].attached);
	assert_false(st->shard[0].attached);
	assert_int_equal(spoke_poll(att.s), -EPERM);

	atomic_store(&att.x1.earliest, spoke_now_ns() + MS);
	assert_int_equal(spoke_start_on(att.s, 1, MS, att_fn, &att.x1, NULL), 0);
	sleep_ms(60);
	/* nobody polls shard 1 yet, and its managed thread has stopped driving it */
	assert_int_equal(atomic_load(&att.x1.fired), 0);
	if (atomic_load(&att.attached_at) < atomic_load(&att.pre.earliest))
		assert_int_equal(atomic_load(&att.pre.fired), 0);
	atomic_store(&att.hold, 0);

	run_workers(ATT_THREADS, att_remote_worker, &att);
	ASSERT_EVENTUALLY(att_all_fired(), "shard 1's timers to run in the attached poll");
	expect1 = 2 + ATT_OWN + ATT_THREADS * ATT_REMOTE;
	ASSERT_EVENTUALLY((spoke_stats(att.s, st),
			   st->shard[1].pending == 0 && st->shard[1].started == expect1),
			  "shard 1's stats");
	assert_int_equal(st->shard[0].started, 0);
	assert_int_equal(st->shard[1].fired, expect1);

	atomic_store(&att.phase2, 1);
	ASSERT_EVENTUALLY(atomic_load(&att.phase2_done), "the next_deadline phase");
	atomic_store(&att.stop, 1);
	pthread_join(t, NULL);
	assert_no_bg_failures();
	assert_never_early();
	assert_int_equal(att.nd_empty_rc, 1); /* nothing pending */
	assert_true(att.nd_empty == UINT64_MAX);
	assert_int_equal(att.nd_started_rc, 0);
	assert_true(att.nd_started <= 50 * MS + 250 * US);
	assert_int_equal(att.nd_due_rc, 0);
	assert_true(att.nd_due == 0);
	assert_int_equal(att.poll_due, 1);
	assert_int_equal(atomic_load(&att.nd_rec.fired), 1);
	sleep_ms(5);
	assert_int_equal(atomic_load(&att.pre.fired), 1);
	assert_int_equal(atomic_load(&att.x1.fired), 1);
	free(st);
	svc_destroy(att.s);
}

/* Attached mode errors (-EINVAL, -EBUSY, -EPERM): test_service_errors.c. */

/* ==== attached loop woken by its wake fd =======================================================
 */

/* Wait for fd to be readable: true if it is within timeout_ms. */
static bool fd_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n;

	while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	return n == 1 && (p.revents & POLLIN);
}

struct wake_start {
	struct spoke *s;
	atomic_uint fired;
	int rc;
};

static void *wake_start_thread(void *arg)
{
	struct wake_start *w = arg;

	w->rc = spoke_start_on(w->s, 0, 5 * MS, count_fn, &w->fired, NULL);
	return NULL;
}

/*
 * An attached loop that sleeps on its wake fd with no timer pending (it
 * would sleep forever) is woken by another thread's start on its shard; the
 * poll that follows empties the fd; the timer then runs in a later poll.
 */
static void attached_wake_fd_cross_thread_start(void **state)
{
	struct wake_start w = {.s = svc_new(2, MS, 1)};
	pthread_t t;
	int fd;

	(void)state;
	assert_int_equal(spoke_attach(w.s, 0), 0);
	fd = spoke_wake_fd(w.s);
	assert_true(fd >= 0);
	assert_int_equal(spoke_wake_fd(w.s), fd);
	assert_int_equal(spoke_next_deadline_ns(w.s, &(uint64_t){0}), 1);
	assert_false(fd_readable(fd, 0));
	t = thread_start(wake_start_thread, &w);
	/* Only a missing wake-up runs into this bound. */
	assert_true(fd_readable(fd, (int)(EVENTUALLY_NS / MS)));
	pthread_join(t, NULL);
	assert_int_equal(w.rc, 0);
	assert_true(spoke_poll(w.s) >= 0);
	assert_false(fd_readable(fd, 0));
	while (atomic_load(&w.fired) == 0) {
		uint64_t ns;

		assert_int_equal(spoke_next_deadline_ns(w.s, &ns), 0);
		fd_readable(fd, (int)(ns / MS) + 1);
		assert_true(spoke_poll(w.s) >= 0);
	}
	assert_int_equal(atomic_load(&w.fired), 1);
	svc_destroy(w.s);
}

static void *destroy_thread(void *s)
{
	sleep_ms(20);
	spoke_destroy(s);
	return NULL;
}

/*
 * A callback on a managed shard that holds spoke_destroy (which waits for
 * running callbacks) until the loop has seen its wake-up: only then may
 * destroy go on to close the fd and free the service.
 */
struct destroy_gate {
	atomic_int running, release;
};

static void destroy_gate_fn(void *arg)
{
	struct destroy_gate *g = arg;

	atomic_store(&g->running, 1);
	WAIT_UNTIL(atomic_load(&g->release), EVENTUALLY_NS);
}

/*
 * spoke_destroy beginning wakes an attached loop asleep on its wake fd (no
 * timer pending: it would sleep forever), and the loop's next calls give
 * -ESHUTDOWN. spoke.h asks callers to stop using s before destroy can
 * return; the gate makes that so here, as a server's shutdown would.
 */
static void attached_wake_fd_destroy_wakes_loop(void **state)
{
	struct destroy_gate gate = {0};
	struct spoke_config c;
	struct spoke *s;
	pthread_t t;
	bool woken;
	int fd;

	(void)state;
	svc_config(&c, 2, MS, 1);
	assert_int_equal(spoke_create(&s, &c), 0); /* destroyed by destroy_thread */
	assert_int_equal(spoke_start_on(s, 0, MS, destroy_gate_fn, &gate, NULL), 0);
	assert_int_equal(spoke_attach(s, 1), 0);
	fd = spoke_wake_fd(s);
	assert_true(fd >= 0);
	assert_int_equal(spoke_next_deadline_ns(s, &(uint64_t){0}), 1);
	ASSERT_EVENTUALLY(atomic_load(&gate.running), "the gate callback to run");
	t = thread_start(destroy_thread, s);
	woken = fd_readable(fd, (int)(EVENTUALLY_NS / MS));
	assert_int_equal(spoke_next_deadline_ns(s, &(uint64_t){0}), -ESHUTDOWN);
	assert_int_equal(spoke_poll(s), -ESHUTDOWN);
	/* From here on the loop must not touch s: destroy frees it. */
	atomic_store(&gate.release, 1);
	pthread_join(t, NULL);
	assert_true(woken);
}

/* ==== detach: the shard goes back to a managed thread ========================================
 */

#define DT_OWN	  64
#define DT_TTL	  32
#define DT_REMOTE 64 /* per batch: one before the detach, one after */

struct dt_periodic {
	uint64_t start_ns;
	atomic_uint runs, inside, overlaps, early;
};

struct dt_ctx {
	struct spoke *s;
	pthread_t owner;
	unsigned batch;
	struct trec own[DT_OWN], ttl[DT_TTL], remote[2][DT_REMOTE], again;
	struct dt_periodic per;
	atomic_uint again_off_owner; /* `again` ran on another thread than the owner */
};

static struct dt_ctx dt;

#define DT_PERIOD (5 * MS)

static void dt_again_fn(void *arg)
{
	if (!pthread_equal(pthread_self(), dt.owner))
		atomic_fetch_add(&dt.again_off_owner, 1);
	trec_fire(arg);
}

/* Run k (from 1) not before start + k periods; never two runs at once. */
static void dt_periodic_fn(void *arg)
{
	struct dt_periodic *p = arg;
	unsigned k = atomic_load(&p->runs) + 1;

	if (atomic_fetch_add(&p->inside, 1) != 0)
		atomic_fetch_add(&p->overlaps, 1);
	if (spoke_now_ns() < p->start_ns + k * DT_PERIOD)
		atomic_fetch_add(&p->early, 1);
	atomic_store(&p->runs, k);
	atomic_fetch_sub(&p->inside, 1);
}

static void dt_remote_worker(unsigned idx, void *p)
{
	struct dt_ctx *c = p;
	struct rng rng = {0xd7 + idx + 16 * c->batch};

	for (unsigned i = idx; i < DT_REMOTE; i += 2) {
		struct trec *r = &c->remote[c->batch][i];
		uint64_t d = 20 * MS + rng_below(&rng, 20 * MS);

		atomic_store(&r->earliest, spoke_now_ns() + d);
		BG_CHECK_INT(spoke_start_on(c->s, 1, d, trec_fire, r, NULL), ==, 0);
	}
}

/* Until `again` ran in this thread's polls (bounded). */
static void dt_poll_until_again(void)
{
	for (uint64_t end = spoke_now_ns() + EVENTUALLY_NS;
	     atomic_load(&dt.again.fired) == 0 && spoke_now_ns() < end;) {
		uint64_t ns;

		assert_true(spoke_next_deadline_ns(dt.s, &ns) >= 0);
		sleep_ns(ns > MS ? MS : ns);
		assert_true(spoke_poll(dt.s) >= 0);
	}
}

/*
 * The stats once everything started is taken on: `started` timers, all on
 * shard 1, none pending, the two cancelled (the hour-long one and the
 * periodic one). Periodic runs count in `fired`, so fired + cancelled is
 * not started here.
 */
static bool dt_stats_are(struct spoke_stats *st, uint64_t started)
{
	spoke_stats(dt.s, st);
	return st->total.started == started && st->shard[1].started == started &&
	       st->total.pending == 0 && st->total.cancelled == 2;
}

/* Each record of recs ran (waiting for it); dt_none_twice checks "exactly once" later. */
static void dt_all_fired_once(struct trec *recs, unsigned n, const char *what)
{
	for (unsigned i = 0; i < n; i++)
		ASSERT_EVENTUALLY(atomic_load(&recs[i].fired) >= 1, what);
}

static void dt_none_twice(struct trec *recs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(atomic_load(&recs[i].fired), 1);
}

/*
 * spoke_detach hands an attached shard back to a managed thread, right
 * after its loop announced a sleep on the wake fd: one-shot and Lawn TTL
 * timers the owner started straight into its engines, timers other threads
 * sent before the detach (some still in the inbox) and after it, all run
 * exactly once and not early with nobody polling; a periodic timer that ran
 * in the polls keeps its phase on the other side, never overlapping; a
 * cancel after the detach still wins; the wake fd stays quiet; the thread
 * is an ordinary caller again, and when it attaches again it gets the same
 * fd and its callbacks run in its polls. With a pool and with callbacks
 * inline on the shard thread.
 */
static void attached_detach_hands_shard_back(void **state)
{
	static const unsigned pools[] = {1, 0};

	(void)state;
	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke_stats *st = stats_new();
		struct rng rng = {0xde7 + v};
		struct spoke_config c;
		spoke_id keep, per_id;
		unsigned runs_at_detach;
		uint64_t drain;
		int fd;

		memset(&dt, 0, sizeof(dt));
		trec_reset_globals();
		atomic_store(&never_ran, 0);
		svc_config(&c, 2, 250 * US, pools[v]);
		c.lawn_shards = 0x2; /* every TTL queue on shard 1 */
		dt.s = svc_create_cfg(&c);
		dt.owner = pthread_self();
		assert_int_equal(spoke_attach(dt.s, 1), 0);
		fd = spoke_wake_fd(dt.s);
		assert_true(fd >= 0);
		for (unsigned i = 0; i < DT_OWN; i++) {
			uint64_t d = 20 * MS + rng_below(&rng, 20 * MS);

			atomic_store(&dt.own[i].earliest, spoke_now_ns() + d);
			assert_int_equal(spoke_start(dt.s, d, trec_fire, &dt.own[i], NULL), 0);
		}
		for (unsigned i = 0; i < DT_TTL; i++) {
			uint64_t ttl = 20 * MS + (i % 4) * 5 * MS;

			atomic_store(&dt.ttl[i].earliest, spoke_now_ns() + ttl);
			assert_int_equal(spoke_start_ttl(dt.s, ttl, trec_fire, &dt.ttl[i], NULL),
					 0);
		}
		assert_int_equal(spoke_start(dt.s, 3600 * SEC, never_fn, NULL, &keep), 0);
		dt.per.start_ns = spoke_now_ns();
		assert_int_equal(
			spoke_start_periodic(dt.s, DT_PERIOD, dt_periodic_fn, &dt.per, &per_id), 0);
		ASSERT_EVENTUALLY((spoke_poll(dt.s), atomic_load(&dt.per.runs) >= 2),
				  "the periodic timer to run in the polls");
		run_workers(2, dt_remote_worker, &dt); /* batch 0: waits in the inbox */
		assert_true(spoke_next_deadline_ns(dt.s, &(uint64_t){0}) >=
			    0); /* a sleep announced on the fd */

		runs_at_detach = atomic_load(&dt.per.runs);
		assert_int_equal(spoke_detach(dt.s), 0);
		assert_int_equal(spoke_poll(dt.s), -EPERM);
		assert_int_equal(spoke_next_deadline_ns(dt.s, &(uint64_t){0}), -EPERM);
		assert_int_equal(spoke_wake_fd(dt.s), -EPERM);
		assert_int_equal(spoke_detach(dt.s), -EPERM);
		spoke_stats(dt.s, st);
		assert_false(st->shard[1].attached);
		assert_int_equal(spoke_cancel(dt.s, keep), 0);
		/* The fd is no longer signalled: drain what batch 0 wrote, send batch 1. */
		while (read(fd, &drain, sizeof(drain)) > 0)
			;
		dt.batch = 1;
		run_workers(2, dt_remote_worker, &dt);
		assert_false(fd_readable(fd, 20));

		dt_all_fired_once(dt.own, DT_OWN, "the owner's one-shot timers to run");
		dt_all_fired_once(dt.ttl, DT_TTL, "the owner's TTL timers to run");
		dt_all_fired_once(dt.remote[0], DT_REMOTE, "the timers sent before to run");
		dt_all_fired_once(dt.remote[1], DT_REMOTE, "the timers sent after to run");
		ASSERT_EVENTUALLY(atomic_load(&dt.per.runs) >= runs_at_detach + 3,
				  "the periodic timer to run on the managed side");
		assert_int_equal(spoke_cancel_sync(dt.s, per_id), 0);
		ASSERT_EVENTUALLY(dt_stats_are(st, DT_OWN + DT_TTL + 2 * DT_REMOTE + 2),
				  "the shard to take the cancels");

		/* Attach again: same fd; callbacks run in this thread's poll again. */
		assert_int_equal(spoke_attach(dt.s, 1), 0);
		assert_int_equal(spoke_wake_fd(dt.s), fd);
		atomic_store(&dt.again.earliest, spoke_now_ns() + MS);
		assert_int_equal(spoke_start(dt.s, MS, dt_again_fn, &dt.again, NULL), 0);
		dt_poll_until_again();
		assert_int_equal(atomic_load(&dt.again.fired), 1);
		assert_int_equal(atomic_load(&dt.again_off_owner), 0);
		assert_int_equal(spoke_detach(dt.s), 0);

		sleep_ms(10);
		dt_none_twice(dt.own, DT_OWN);
		dt_none_twice(dt.ttl, DT_TTL);
		dt_none_twice(dt.remote[0], DT_REMOTE);
		dt_none_twice(dt.remote[1], DT_REMOTE);
		assert_int_equal(atomic_load(&dt.again.fired), 1);
		assert_int_equal(atomic_load(&dt.per.overlaps), 0);
		assert_int_equal(atomic_load(&dt.per.early), 0);
		assert_int_equal(atomic_load(&never_ran), 0);
		assert_never_early();
		assert_no_bg_failures();
		assert_true(dt_stats_are(st, DT_OWN + DT_TTL + 2 * DT_REMOTE + 3));
		/* every one-shot once, and each periodic run */
		assert_int_equal(st->total.fired,
				 DT_OWN + DT_TTL + 2 * DT_REMOTE + 1 + atomic_load(&dt.per.runs));
		assert_false(st->shard[1].attached);
		free(st);
		svc_destroy(dt.s);
	}
}

#define DX_TIMERS 128

struct dx_ctx {
	struct spoke *s;
	struct trec rec[DX_TIMERS];
	int attach_rc;
};

static struct dx_ctx dx;

/* Attaches shard 0, starts timers straight into its wheel, and exits without detaching. */
static void *dx_thread(void *p)
{
	struct dx_ctx *c = p;
	struct rng rng = {0xd8};

	c->attach_rc = spoke_attach(c->s, 0);
	for (unsigned i = 0; i < DX_TIMERS; i++) {
		uint64_t d = 5 * MS + rng_below(&rng, 20 * MS);

		atomic_store(&c->rec[i].earliest, spoke_now_ns() + d);
		BG_CHECK_INT(spoke_start(c->s, d, trec_fire, &c->rec[i], NULL), ==, 0);
	}
	return NULL;
}

/*
 * A thread that exits while attached is detached at its exit: the timers it
 * left in its shard run (on the pool), exactly once and not early, and the
 * shard can be attached again.
 */
static void attached_thread_exit_detaches(void **state)
{
	struct spoke_stats *st = stats_new();

	(void)state;
	memset(&dx, 0, sizeof(dx));
	trec_reset_globals();
	dx.s = svc_new(2, 250 * US, 1);
	pthread_join(thread_start(dx_thread, &dx), NULL);
	assert_int_equal(dx.attach_rc, 0);
	for (unsigned i = 0; i < DX_TIMERS; i++)
		ASSERT_EVENTUALLY(atomic_load(&dx.rec[i].fired) == 1,
				  "the exited owner's timers to run");
	spoke_stats(dx.s, st);
	assert_false(st->shard[0].attached);
	assert_int_equal(spoke_attach(dx.s, 0), 0);
	assert_int_equal(spoke_detach(dx.s), 0);
	sleep_ms(10);
	for (unsigned i = 0; i < DX_TIMERS; i++)
		assert_int_equal(atomic_load(&dx.rec[i].fired), 1);
	assert_never_early();
	assert_no_bg_failures();
	assert_stats_settled(dx.s, DX_TIMERS, 0);
	free(st);
	svc_destroy(dx.s);
}

#define DR_LOOPS     4
#define DR_ROUNDS    SCALE(60)
#define DR_PER_ROUND 4
#define DR_PRODUCERS 2
#define DR_SENT	     SCALE(400)

struct dr_ctx {
	struct spoke *s;
	atomic_int owners;	 /* threads that hold shard 1 right now: at most 1 */
	atomic_uint overlaps;	 /* times two did */
	atomic_uint inline_runs; /* callbacks run inside a loop thread's poll */
	atomic_uint stray_runs;	 /* callbacks run on a loop thread outside its polls */
	atomic_uint busy;	 /* attaches refused with -EBUSY */
	atomic_uint loops_done;
	struct trec *owned; /* DR_LOOPS x DR_ROUNDS x DR_PER_ROUND */
	struct trec *sent;  /* DR_PRODUCERS x DR_SENT */
};

static struct dr_ctx dr;
static _Thread_local bool tl_dr_loop;	 /* a loop thread (takes shard 1 in turns) */
static _Thread_local bool tl_dr_polling; /* ... inside its spoke_poll, holding shard 1 */

/*
 * The callback of every timer on shard 1: on a loop thread it may only run
 * inside that thread's own poll while it holds the shard (else the shard had
 * another driver than its one owner); elsewhere it runs on the pool or the
 * managed thread.
 */
static void dr_fn(void *arg)
{
	if (tl_dr_loop)
		atomic_fetch_add(tl_dr_polling ? &dr.inline_runs : &dr.stray_runs, 1);
	trec_fire(arg);
}

/* Holds shard 1 for a round: timers straight into its wheel, a few polls. */
static void dr_round(struct dr_ctx *c, unsigned idx, unsigned round, struct rng *rng)
{
	if (atomic_fetch_add(&c->owners, 1) != 0)
		atomic_fetch_add(&c->overlaps, 1);
	for (unsigned j = 0; j < DR_PER_ROUND; j++) {
		struct trec *r = &c->owned[(idx * DR_ROUNDS + round) * DR_PER_ROUND + j];
		uint64_t d = j == 0 ? 0 : rng_below(rng, 2 * MS); /* the first is due next tick */

		atomic_store(&r->earliest, spoke_now_ns() + d);
		BG_CHECK_INT(spoke_start(c->s, d, dr_fn, r, NULL), ==, 0);
	}
	/* One poll past a tick at least, so the first timer runs inline here. */
	for (unsigned j = 1 + rng_below(rng, 3); j > 0; j--) {
		sleep_ns(300 * US);
		tl_dr_polling = true;
		BG_CHECK_INT(spoke_poll(c->s), >=, 0);
		tl_dr_polling = false;
	}
	atomic_fetch_sub(&c->owners, 1);
}

/*
 * Loop threads take shard 1 in turn (attach, a round, detach); the last
 * round of every other thread ends by exiting while attached. Producers
 * send timers to shard 1 meanwhile.
 */
static void dr_worker(unsigned idx, void *p)
{
	struct dr_ctx *c = p;
	struct rng rng = {0xd9 + idx};

	if (idx >= DR_LOOPS) {
		unsigned k = idx - DR_LOOPS;

		for (unsigned i = 0; i < DR_SENT; i++) {
			struct trec *r = &c->sent[k * DR_SENT + i];
			uint64_t d = rng_below(&rng, 2 * MS);

			atomic_store(&r->earliest, spoke_now_ns() + d);
			BG_CHECK_INT(spoke_start_on(c->s, 1, d, dr_fn, r, NULL), ==, 0);
			if (i % 16 == 0)
				sleep_ns(200 * US);
		}
		return;
	}
	tl_dr_loop = true;
	for (unsigned round = 0; round < DR_ROUNDS; round++) {
		int rc;

		uint64_t give_up = spoke_now_ns() + EVENTUALLY_NS;

		/* An owner that exited and was never detached would hold it forever. */
		while ((rc = spoke_attach(c->s, 1)) == -EBUSY && spoke_now_ns() < give_up) {
			atomic_fetch_add(&c->busy, 1);
			sleep_ns(50 * US);
		}
		BG_CHECK_INT(rc, ==, 0);
		if (rc != 0)
			return;
		dr_round(c, idx, round, &rng);
		if (round + 1 == DR_ROUNDS && idx % 2 == 1)
			break; /* exits attached: detached by its exit */
		BG_CHECK_INT(spoke_detach(c->s), ==, 0);
	}
	atomic_fetch_add(&c->loops_done, 1);
}

static void *dr_thread(void *p)
{
	unsigned idx = (unsigned)(uintptr_t)p;

	dr_worker(idx, &dr);
	return NULL;
}

/*
 * Attach, detach and thread exits race for one shard while other threads
 * send it timers: never two owners at once, every timer runs exactly once
 * and not early, and the shard ends up managed.
 */
static void attached_detach_attach_race(void **state)
{
	const unsigned owned = DR_LOOPS * DR_ROUNDS * DR_PER_ROUND, sent = DR_PRODUCERS * DR_SENT;
	pthread_t t[DR_LOOPS + DR_PRODUCERS];
	struct spoke_stats *st = stats_new();

	(void)state;
	memset(&dr, 0, sizeof(dr));
	trec_reset_globals();
	dr.owned = calloc(owned, sizeof(*dr.owned));
	dr.sent = calloc(sent, sizeof(*dr.sent));
	assert_non_null(dr.owned);
	assert_non_null(dr.sent);
	dr.s = svc_new(2, 250 * US, 1);
	/* Own threads, not run_workers: half of them must exit while attached. */
	for (unsigned i = 0; i < DR_LOOPS + DR_PRODUCERS; i++)
		t[i] = thread_start(dr_thread, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < DR_LOOPS + DR_PRODUCERS; i++)
		pthread_join(t[i], NULL);
	assert_no_bg_failures();
	assert_int_equal(atomic_load(&dr.loops_done), DR_LOOPS);
	assert_int_equal(atomic_load(&dr.overlaps), 0);
	assert_int_equal(atomic_load(&dr.stray_runs), 0);
	assert_true(atomic_load(&dr.inline_runs) > 0);
	for (unsigned i = 0; i < owned; i++)
		ASSERT_EVENTUALLY(atomic_load(&dr.owned[i].fired) >= 1,
				  "the owners' timers to run");
	for (unsigned i = 0; i < sent; i++)
		ASSERT_EVENTUALLY(atomic_load(&dr.sent[i].fired) >= 1, "the sent timers to run");
	ASSERT_EVENTUALLY(stats_settled(dr.s, owned + sent, 0), "the stats to settle");
	sleep_ms(10);
	for (unsigned i = 0; i < owned; i++)
		assert_int_equal(atomic_load(&dr.owned[i].fired), 1);
	for (unsigned i = 0; i < sent; i++)
		assert_int_equal(atomic_load(&dr.sent[i].fired), 1);
	assert_never_early();
	spoke_stats(dr.s, st);
	assert_false(st->shard[1].attached);
	printf("attach/detach race: %u rounds, %u attaches refused (-EBUSY), %u callbacks inline\n",
	       DR_LOOPS * DR_ROUNDS, atomic_load(&dr.busy), atomic_load(&dr.inline_runs));
	free(st);
	svc_destroy(dr.s);
	free(dr.owned);
	free(dr.sent);
}

/* ==== spoke_poll is not a cancellation point ===================================================
 */

struct cx {
	struct spoke *s;
	atomic_int ready, go, cb_ran;
	int poll_rc;
	atomic_int poll_returned;
};

static struct cx cx;

/* Sleeps a little: nanosleep is a cancellation point. */
static void cx_fn(void *arg)
{
	(void)arg;
	sleep_ns(10 * US);
	atomic_store(&cx.cb_ran, 1);
}

static void cx_loop(struct cx *c)
{
	uint64_t due;

	BG_CHECK_INT(spoke_attach(c->s, 1), ==, 0);
	BG_CHECK_INT(spoke_wake_fd(c->s), >=, 0); /* so spoke_poll reads the eventfd */
	BG_CHECK_INT(spoke_start(c->s, 0, cx_fn, NULL, NULL), ==, 0);
	due = spoke_now_ns() + 2 * MS; /* past its tick */
	atomic_store(&c->ready, 1);
	/* No cancellation point until spoke_poll: spin (clock reads and yields only). */
	while (!atomic_load(&c->go) || spoke_now_ns() < due)
		sched_yield();
	c->poll_rc = spoke_poll(c->s);
	atomic_store(&c->poll_returned, 1);
}

/*
 * The cancel unwinds this frame only: one without locals of its own. ASan
 * does not clear the redzones of frames a cancellation unwinds, and its
 * thread teardown then trips over them (a false stack-buffer-underflow in
 * sigaltstack, seen at -O0), so every frame with locals returns normally.
 */
static void *cx_thread(void *p)
{
	cx_loop(p);
	pthread_testcancel(); /* the pending cancel acts here */
	return NULL;
}

/*
 * A cancel that is pending when the attached thread calls spoke_poll acts
 * only after the call: not at the eventfd read inside it, not at a
 * cancellation point in a callback it runs inline. Cut short inside, the
 * call would stay counted and spoke_destroy would wait for ever.
 */
static void attached_poll_not_a_cancellation_point(void **state)
{
	pthread_t t;
	void *ret;

	(void)state;
	memset(&cx, 0, sizeof(cx));
	cx.s = svc_new(2, 250 * US, 1);
	t = thread_start(cx_thread, &cx);
	ASSERT_EVENTUALLY(atomic_load(&cx.ready), "the thread to attach");
	assert_int_equal(pthread_cancel(t), 0);
	atomic_store(&cx.go, 1);
	pthread_join(t, &ret);
	assert_true(ret == PTHREAD_CANCELED);
	if (!atomic_load(&cx.poll_returned)) {
		svc_abandon_all(); /* a call cut short: destroy would wait for ever */
		fail_msg("the thread was cancelled inside spoke_poll");
	}
	assert_int_equal(cx.poll_rc, 1);
	assert_int_equal(atomic_load(&cx.cb_ran), 1);
	assert_no_bg_failures();
	svc_destroy(cx.s); /* returns: no call of the cancelled thread is left counted */
}

/* ==== attach while the shard's callbacks are on the pool =======================================
 */

#define AP_QUEUED 8

struct ap_ctx {
	struct spoke *s;
	pthread_t main;
	atomic_int in_attach, attach_returned, ran_in_attach, off_main_after_attach;
	atomic_int gate_running, gate_saw_late, gate_done, late_ran, late_on_main;
	atomic_int queued_ran[AP_QUEUED];
	atomic_int blocker_running, blocker_timed_out, victim_ran;
	atomic_int from_pool_attach_rc, from_pool_detach_rc, from_pool_done, other_ran;
};

static struct ap_ctx ap;

/* Every callback of the attached shard: never in spoke_attach, never off the loop after it. */
static void ap_check_thread(void)
{
	bool on_main = pthread_equal(pthread_self(), ap.main);

	if (on_main && atomic_load(&ap.in_attach))
		atomic_fetch_add(&ap.ran_in_attach, 1);
	if (!on_main && atomic_load(&ap.attach_returned))
		atomic_fetch_add(&ap.off_main_after_attach, 1);
}

/* On the pool: holds the only worker until `late` (a later timer of the same shard) ran. */
static void ap_gate_fn(void *arg)
{
	(void)arg;
	ap_check_thread();
	atomic_store(&ap.gate_running, 1);
	WAIT_UNTIL(atomic_load(&ap.late_ran), HOLD_LIMIT_NS);
	atomic_store(&ap.gate_saw_late, atomic_load(&ap.late_ran));
	atomic_store(&ap.gate_done, 1);
}

static void ap_late_fn(void *arg)
{
	(void)arg;
	ap_check_thread();
	atomic_store(&ap.late_on_main, pthread_equal(pthread_self(), ap.main));
	atomic_store(&ap.late_ran, 1);
}

static void ap_queued_fn(void *arg)
{
	ap_check_thread();
	atomic_fetch_add(&ap.queued_ran[(uintptr_t)arg], 1);
}

static unsigned ap_queued_done(void)
{
	unsigned done = 0;

	for (unsigned i = 0; i < AP_QUEUED; i++)
		done += atomic_load(&ap.queued_ran[i]) == 1;
	return done;
}

/* Two shards, one pool worker: a callback on the pool holds back the ones queued behind it. */
static void ap_setup(void)
{
	memset(&ap, 0, sizeof(ap));
	ap.main = pthread_self();
	ap.s = svc_new(2, 250 * US, 1);
}

static int ap_attach(unsigned shard)
{
	int rc;

	atomic_store(&ap.in_attach, 1);
	rc = spoke_attach(ap.s, shard);
	atomic_store(&ap.in_attach, 0);
	atomic_store(&ap.attach_returned, 1);
	return rc;
}

/*
 * Attached (docs/contract.md): once spoke_attach returns, the shard's callbacks run inline
 * on the attached thread, only inside its spoke_poll, never on the pool:
 * also those its managed thread had already handed to the pool. One pool
 * worker: `gate` runs on it and waits for `late`, a later timer of the same
 * shard; the `queued` timers expire meanwhile and wait on the pool queue
 * behind it. The attach must wait for the running `gate`, and keep the
 * shard turning meanwhile without running anything in the attaching thread
 * (`late` runs on the managed thread, else `gate` never ends); the queued
 * runs come back to the shard and run in its poll, or on the managed thread
 * before the attach returns.
 */
static void attached_attach_waits_for_pool_runs(void **state)
{
	int gate_done_at_attach;
	uint64_t late_due, attach_at;

	(void)state;
	ap_setup();
	assert_int_equal(spoke_start_on(ap.s, 1, 0, ap_gate_fn, NULL, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&ap.gate_running), "the gate callback on the pool");
	for (unsigned i = 0; i < AP_QUEUED; i++)
		assert_int_equal(
			spoke_start_on(ap.s, 1, 0, ap_queued_fn, (void *)(uintptr_t)i, NULL), 0);
	/* Far enough out that the attach has begun when it comes due. */
	late_due = spoke_now_ns() + 300 * MS;
	assert_int_equal(spoke_start_on(ap.s, 1, 300 * MS, ap_late_fn, NULL, NULL), 0);
	sleep_ms(5); /* the queued timers expire, and wait on the pool behind the gate */
	attach_at = spoke_now_ns();
	assert_int_equal(ap_attach(1), 0);
	gate_done_at_attach = atomic_load(&ap.gate_done);
	ASSERT_EVENTUALLY((spoke_poll(ap.s), ap_queued_done() == AP_QUEUED), "the queued runs");
	assert_true(gate_done_at_attach); /* no run of the shard left on the pool */
	assert_int_equal(atomic_load(&ap.off_main_after_attach), 0);
	assert_int_equal(atomic_load(&ap.ran_in_attach), 0);
	/*
	 * Unless this thread was held up for the best part of 300 ms (then
	 * `late` went to the pool queue behind the gate, which gave up on it):
	 * it ran on the managed thread, before the attach returned.
	 */
	if (attach_at + 200 * MS < late_due) {
		assert_true(atomic_load(&ap.gate_saw_late));
		assert_false(atomic_load(&ap.late_on_main));
	}
	assert_int_equal(spoke_detach(ap.s), 0);
	svc_destroy(ap.s);
}

/* On the pool, for shard 0: holds the only worker until the attach of shard 1 returned. */
static void ap_blocker_fn(void *arg)
{
	(void)arg;
	atomic_store(&ap.blocker_running, 1);
	atomic_store(&ap.blocker_timed_out,
		     !WAIT_UNTIL(atomic_load(&ap.attach_returned), HOLD_LIMIT_NS));
}

static void ap_victim_fn(void *arg)
{
	(void)arg;
	ap_check_thread();
	atomic_store(&ap.victim_ran, 1);
}

/*
 * The pool is one queue for every shard: a callback of shard 1 queued
 * behind a long one of shard 0 is not running, so the attach of shard 1
 * does not wait for it (nor for shard 0's), and once the attach returned
 * it runs in shard 1's poll, not on the pool.
 */
static void attached_attach_recalls_queued_runs(void **state)
{
	(void)state;
	ap_setup();
	assert_int_equal(spoke_start_on(ap.s, 0, 0, ap_blocker_fn, NULL, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&ap.blocker_running), "the blocker on the pool");
	assert_int_equal(spoke_start_on(ap.s, 1, 0, ap_victim_fn, NULL, NULL), 0);
	sleep_ms(5); /* the victim expires, and waits on the pool behind the blocker */
	assert_int_equal(ap_attach(1), 0);
	ASSERT_EVENTUALLY((spoke_poll(ap.s), atomic_load(&ap.victim_ran)), "the victim");
	assert_false(atomic_load(&ap.blocker_timed_out)); /* the attach did not wait for it */
	/* In this poll (or inline on the managed thread, had it not expired before the attach). */
	assert_int_equal(atomic_load(&ap.off_main_after_attach), 0);
	assert_int_equal(spoke_detach(ap.s), 0);
	svc_destroy(ap.s);
}

static void ap_other_fn(void *arg)
{
	(void)arg;
	atomic_store(&ap.other_ran, 1);
}

/*
 * A callback on the pool attaches its own shard (contract 7: no deadlock).
 * It is itself one of the shard's runs on the pool, so an attach from the
 * pool does not wait for the pool. It polls and detaches again, and the
 * timer queued behind it still runs.
 */
static void ap_attacher_fn(void *arg)
{
	(void)arg;
	WAIT_UNTIL(atomic_load(&ap.gate_running), HOLD_LIMIT_NS);
	atomic_store(&ap.from_pool_attach_rc, spoke_attach(ap.s, 1));
	if (atomic_load(&ap.from_pool_attach_rc) == 0) {
		spoke_poll(ap.s);
		atomic_store(&ap.from_pool_detach_rc, spoke_detach(ap.s));
	}
	atomic_store(&ap.from_pool_done, 1);
}

static void attached_attach_from_pool_callback(void **state)
{
	(void)state;
	ap_setup();
	atomic_store(&ap.from_pool_attach_rc, 1);
	atomic_store(&ap.from_pool_detach_rc, 1);
	assert_int_equal(spoke_start_on(ap.s, 1, 0, ap_attacher_fn, NULL, NULL), 0);
	assert_int_equal(spoke_start_on(ap.s, 1, 0, ap_other_fn, NULL, NULL), 0);
	sleep_ms(3); /* both expire: the second one waits on the pool behind the first */
	atomic_store(&ap.gate_running, 1);
	ASSERT_EVENTUALLY(atomic_load(&ap.from_pool_done), "the attaching callback");
	assert_int_equal(atomic_load(&ap.from_pool_attach_rc), 0);
	assert_int_equal(atomic_load(&ap.from_pool_detach_rc), 0);
	ASSERT_EVENTUALLY(atomic_load(&ap.other_ran), "the timer queued behind it");
	svc_destroy(ap.s);
}

struct ap_cross {
	struct spoke *s; /* the callback's own shard: s, shard; it attaches the other one */
	unsigned shard;
	atomic_int running, attach_rc, detach_rc, done;
};

static struct ap_cross ap_cross[2];

/* Waits until the other callback runs too, then attaches its shard. */
static void ap_cross_fn(void *arg)
{
	struct ap_cross *me = arg, *other = &ap_cross[me == &ap_cross[0]];

	atomic_store(&me->running, 1);
	WAIT_UNTIL(atomic_load(&other->running), HOLD_LIMIT_NS);
	atomic_store(&me->attach_rc, spoke_attach(other->s, other->shard));
	if (atomic_load(&me->attach_rc) == 0) {
		spoke_poll(other->s);
		atomic_store(&me->detach_rc, spoke_detach(other->s));
	}
	atomic_store(&me->done, 1);
}

/* A callback on shard k of s[k] (k = 0, 1) attaches the other's shard; both return. */
static void ap_cross_run(struct spoke *s0, unsigned shard0, struct spoke *s1, unsigned shard1)
{
	memset(ap_cross, 0, sizeof(ap_cross));
	ap_cross[0].s = s0;
	ap_cross[0].shard = shard0;
	ap_cross[1].s = s1;
	ap_cross[1].shard = shard1;
	for (unsigned k = 0; k < 2; k++) {
		atomic_store(&ap_cross[k].attach_rc, 1);
		atomic_store(&ap_cross[k].detach_rc, 1);
		assert_int_equal(spoke_start_on(ap_cross[k].s, ap_cross[k].shard, 0, ap_cross_fn,
						&ap_cross[k], NULL),
				 0);
	}
	ASSERT_EVENTUALLY(atomic_load(&ap_cross[0].done) && atomic_load(&ap_cross[1].done),
			  "both attaching callbacks");
	for (unsigned k = 0; k < 2; k++) {
		assert_true(atomic_load(&ap_cross[k].running));
		assert_int_equal(atomic_load(&ap_cross[k].attach_rc), 0);
		assert_int_equal(atomic_load(&ap_cross[k].detach_rc), 0);
	}
}

/*
 * Two callbacks on the pool, one of each shard, attach each other's shard
 * at the same time (contract 7: no deadlock). Were each attach to wait for
 * its shard's runs on the pool, each would wait for the other.
 */
static void attached_attach_cross_from_pool_callbacks(void **state)
{
	(void)state;
	memset(&ap, 0, sizeof(ap));
	ap.s = svc_new(2, 250 * US, 2);
	ap_cross_run(ap.s, 0, ap.s, 1);
	svc_destroy(ap.s);
}

/*
 * The same across two instances: a callback on A's pool attaches B's shard
 * while one on B's pool attaches A's. The attach only skipped the wait for
 * the pool when the caller was a worker of the same instance, so the two
 * waited for each other for ever (found by a black-box run, 10 of 10).
 */
static void attached_attach_cross_instances_from_pool(void **state)
{
	struct spoke *a = svc_new(1, 250 * US, 2), *b = svc_new(1, 250 * US, 2);

	(void)state;
	ap_cross_run(a, 0, b, 0);
	svc_destroy(a);
	svc_destroy(b);
}

static struct {
	struct spoke *a, *b;
	atomic_int running, rc;
} dy;

/* Inline on A's managed thread: wait until A's destroy has begun and passed, then attach B's shard.
 */
static void dy_fn(void *arg)
{
	spoke_id id;

	(void)arg;
	atomic_store(&dy.running, 1);
	for (int i = 0; i < 10000 && spoke_start(dy.a, 10 * SEC, never_fn, NULL, &id) == 0; i++) {
		spoke_cancel(dy.a, id);
		sleep_ms(1);
	}
	sleep_ms(50); /* destroy takes A off the live list, then waits to join this thread */
	atomic_store(&dy.rc, spoke_attach(dy.b, 0));
}

static void *dy_destroyer(void *arg)
{
	(void)arg;
	spoke_destroy(dy.a);
	return NULL;
}

/*
 * A callback running inline on instance A's managed thread while A is being
 * destroyed attaches B's shard. A managed thread owns its shard until it
 * ends, so that is -EBUSY, as at any other time; the check used to ask
 * whether A was still live, and A is off that list before destroy joins the
 * thread. The attach then succeeded, the thread's exit dropped it, and B's
 * shard stayed attached to nobody (a reviewer's program): B's timers never
 * ran again.
 */
static void attached_attach_from_dying_instance_callback(void **state)
{
	struct spoke_config c;
	atomic_uint runs = 0;
	pthread_t d;

	(void)state;
	memset(&dy, 0, sizeof(dy));
	svc_config(&c, 1, 1 * MS, 0);
	assert_int_equal(spoke_create(&dy.a, &c), 0); /* destroyed by dy_destroyer */
	dy.b = svc_new(1, 1 * MS, 1);
	atomic_store(&dy.rc, 1);
	assert_int_equal(spoke_start(dy.a, 0, dy_fn, NULL, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&dy.running), "the callback on A");
	d = thread_start(dy_destroyer, NULL);
	pthread_join(d, NULL);
	assert_int_equal(atomic_load(&dy.rc), -EBUSY);
	assert_int_equal(spoke_start(dy.b, 1 * MS, count_fn, &runs, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&runs) == 1, "a timer of B");
	svc_destroy(dy.b);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(attached_mode_runs_inline_in_poll),
		SVC_TEST(attached_wake_fd_cross_thread_start),
		SVC_TEST(attached_wake_fd_destroy_wakes_loop),
		SVC_TEST(attached_detach_hands_shard_back),
		SVC_TEST(attached_thread_exit_detaches),
		SVC_TEST(attached_detach_attach_race),
		SVC_TEST(attached_poll_not_a_cancellation_point),
		SVC_TEST(attached_attach_waits_for_pool_runs),
		SVC_TEST(attached_attach_recalls_queued_runs),
		SVC_TEST(attached_attach_from_pool_callback),
		SVC_TEST(attached_attach_cross_from_pool_callbacks),
		SVC_TEST(attached_attach_cross_instances_from_pool),
		SVC_TEST(attached_attach_from_dying_instance_callback),
	};

	return svc_main(argc, argv, "service attached", tests, ARRAY_SIZE(tests));
}
