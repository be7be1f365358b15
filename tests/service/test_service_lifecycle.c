/* SPDX-License-Identifier: MIT */
/*
 * test_service_lifecycle.c - docs/contract.md lines 7-10 of the timer
 * service (include/spoke/spoke.h): what callbacks may call, destroy, bad
 * input, huge delays.
 *
 *   line7_callbacks_call_everything_inline     7  callback_threads = 0
 *   line7_callbacks_call_everything_pool       7  callback_threads = 2
 *   line7_callbacks_call_everything_attached   7  inline in an attached poll
 *   line7_cancel_sync_of_queued_timer          7  same tick, same thread: no deadlock
 *   line8_destroy_waits_nothing_after          8  (+ pitfall) waits, nothing runs after
 *   line8_destroy_shutdown_during_destroy      8, 9  (+ pitfall) -ESHUTDOWN once begun
 *   line8_destroy_after_caller_threads_exit    8  threads that called in have exited
 *   line8_destroy_waits_only_for_its_own_calls 8  not for a call waiting on another
 *                                              instance (cancel_sync of a running timer)
 *   line9_inbox_flood_never_drops              9  a full inbox drops nothing
 *   line9_inbox_limit_refuses_starts           9  backpressure: starts past inbox_limit
 *                                              get -ENOBUFS, cancels and resets never
 *                                              (bad input: test_service_errors.c)
 *   line10_huge_delays_never_fire              10 up to UINT64_MAX, every engine
 *
 * Usage: test_service_lifecycle [test name...]   (no name: all)
 */
#include "service_util.h"

#define SENTINEL_ID ((spoke_id)0x5eed5eed5eed5eedull)

/* ==== line 7: callbacks may call every function ======================================== */

struct everything_ctx {
	struct spoke *s;
	unsigned nsh;
	bool attached;	    /* the driver runs inline in an attached thread's poll */
	pthread_t poll_tid; /* that thread */
	spoke_id long_reset, long_cancel, long_cancel_sync;
	_Atomic uint64_t self_id, per_id;
	atomic_uint children, per_runs;
	atomic_int step, done, done2;
	/* a slow callback running on another thread while the driver runs */
	atomic_int other_running, other_done;
	_Atomic uint64_t other_id;
	atomic_int stop_polling, poller_done;
};

static struct everything_ctx l7;

static void everything_child(void *arg)
{
	struct everything_ctx *c = arg;

	atomic_fetch_add(&c->children, 1);
}

static void everything_per(void *arg)
{
	atomic_fetch_add(&((struct everything_ctx *)arg)->per_runs, 1);
}

static void everything_other(void *arg)
{
	struct everything_ctx *c = arg;

	atomic_store(&c->other_running, 1);
	sleep_ns(300 * MS);
	atomic_store(&c->other_running, 0);
	atomic_store(&c->other_done, 1);
}

static void everything_driver2(void *arg)
{
	struct everything_ctx *c = arg;
	uint64_t pid = atomic_load(&c->per_id);

	atomic_store(&c->step, 100);
	BG_CHECK_INT(spoke_cancel(c->s, pid), ==, 0);
	atomic_store(&c->step, 101);
	BG_CHECK_INT(spoke_cancel_sync(c->s, pid), ==, -ENOENT);
	atomic_store(&c->done2, 1);
}

static void everything_driver(void *arg)
{
	struct everything_ctx *c = arg;
	struct spoke *s = c->s;
	struct spoke_stats *st = stats_new();
	uint64_t end = spoke_now_ns() + HOLD_LIMIT_NS, t1, t2, self, ns;
	spoke_id id = 0;
	int rc;

	while (atomic_load(&c->self_id) == 0 && spoke_now_ns() < end)
		sleep_ns(100 * US);
	self = atomic_load(&c->self_id);
	if (c->attached)
		BG_CHECK(pthread_equal(pthread_self(), c->poll_tid));

	atomic_store(&c->step, 1);
	BG_CHECK_INT(spoke_shards(s), ==, c->nsh);
	atomic_store(&c->step, 2);
	t1 = spoke_now_ns();
	t2 = spoke_now_ns();
	BG_CHECK_U64(t2, >=, t1);
	atomic_store(&c->step, 3);
	spoke_stats(s, st);
	BG_CHECK_INT(st->shards, ==, c->nsh);
	atomic_store(&c->step, 4);
	BG_CHECK_INT(spoke_start(s, 0, everything_child, c, &id), ==, 0);
	atomic_store(&c->step, 5);
	BG_CHECK_INT(spoke_start_on(s, c->nsh - 1, MS, everything_child, c, &id), ==, 0);
	atomic_store(&c->step, 6);
	BG_CHECK_INT(spoke_start_periodic(s, MS, everything_per, c, &id), ==, 0);
	atomic_store(&c->per_id, id);
	atomic_store(&c->step, 7);
	BG_CHECK_INT(spoke_start_ttl(s, 2 * MS, everything_child, c, &id), ==, 0);
	atomic_store(&c->step, 8);
	BG_CHECK_INT(spoke_reset(s, c->long_reset, MS), ==, 0);
	atomic_store(&c->step, 9);
	BG_CHECK_INT(spoke_cancel(s, c->long_cancel), ==, 0);
	atomic_store(&c->step, 10);
	BG_CHECK_INT(spoke_cancel_sync(s, c->long_cancel_sync), ==, 0);
	atomic_store(&c->step, 11);
	/* a callback running on another thread: wait for it, without deadlock */
	rc = spoke_cancel_sync(s, atomic_load(&c->other_id));
	BG_CHECK_INT(rc, ==, -ENOENT);
	BG_CHECK_INT(atomic_load(&c->other_running), ==, 0);
	atomic_store(&c->step, 12);
	rc = spoke_poll(s);
	if (!c->attached)
		BG_CHECK_INT(rc, ==, -EPERM);
	atomic_store(&c->step, 13);
	(void)spoke_next_deadline_ns(s, &ns);
	atomic_store(&c->step, 14);
	BG_CHECK_INT(spoke_attach(s, c->nsh), ==, -EINVAL);
	atomic_store(&c->step, 15);
	BG_CHECK_INT(spoke_cancel_sync(s, self), ==, -EDEADLK);
	BG_CHECK_INT(spoke_cancel(s, self), ==, -ENOENT);
	BG_CHECK_INT(spoke_reset(s, self, MS), ==, -ENOENT);
	atomic_store(&c->step, 16);
	BG_CHECK_INT(spoke_start(s, 3 * MS, everything_driver2, c, &id), ==, 0);
	atomic_store(&c->step, 17);
	free(st);
	atomic_store(&c->done, 1);
}

static void *everything_poller(void *p)
{
	struct everything_ctx *c = p;
	spoke_id id;

	c->poll_tid = pthread_self(); /* read by the driver after self_id is published */
	BG_CHECK_INT(spoke_attach(c->s, 0), ==, 0);
	/* the driver is started from the attached thread: it lands on shard 0 */
	BG_CHECK_INT(spoke_start(c->s, MS, everything_driver, c, &id), ==, 0);
	atomic_store(&c->self_id, id);
	while (!atomic_load(&c->stop_polling)) {
		uint64_t nd;

		BG_CHECK_INT(spoke_poll(c->s), >=, 0);
		BG_CHECK_INT(spoke_next_deadline_ns(c->s, &nd), >=, 0);
		sleep_ns(nd > MS ? MS : nd);
	}
	atomic_store(&c->poller_done, 1);
	return NULL;
}

/*
 * One callback calls every function of spoke.h but spoke_destroy: shards,
 * now, stats, start (delay 0), start_on another shard, start_periodic,
 * start_ttl, reset and cancel and cancel_sync of pending timers,
 * cancel_sync of a callback running on another thread (waits for it),
 * poll and next_deadline, attach out of range, cancel_sync / cancel /
 * reset of itself; then a timer it started cancels the periodic one. No
 * deadlock (a hang is reported with the step it stopped at), every
 * verdict as the contract says, every started child runs.
 */
static void everything_run(unsigned pool, bool attached)
{
	pthread_t poller;
	spoke_id id;

	memset(&l7, 0, sizeof(l7));
	atomic_store(&never_ran, 0);
	l7.s = svc_new(2, 250 * US, pool);
	l7.nsh = spoke_shards(l7.s);
	l7.attached = attached;
	/* pending timers for the driver to reset and cancel */
	assert_int_equal(spoke_start_on(l7.s, 1, 3600 * SEC, everything_child, &l7, &l7.long_reset),
			 0);
	assert_int_equal(spoke_start_on(l7.s, 0, 3600 * SEC, never_fn, NULL, &l7.long_cancel), 0);
	assert_int_equal(spoke_start_on(l7.s, 1, 3600 * SEC, never_fn, NULL, &l7.long_cancel_sync),
			 0);
	/* a slow callback on shard 1 (another thread than the driver's) */
	assert_int_equal(spoke_start_on(l7.s, 1, 0, everything_other, &l7, &id), 0);
	atomic_store(&l7.other_id, id);
	ASSERT_EVENTUALLY(atomic_load(&l7.other_running) == 1, "the slow callback to run");
	if (attached) {
		poller = thread_start(everything_poller, &l7);
	} else {
		assert_int_equal(spoke_start_on(l7.s, 0, 0, everything_driver, &l7, &id), 0);
		atomic_store(&l7.self_id, id);
	}
	ASSERT_EVENTUALLY_MSG(atomic_load(&l7.done) && atomic_load(&l7.done2),
			      "callback hung at step %d (see everything_driver)",
			      atomic_load(&l7.step));
	ASSERT_EVENTUALLY(atomic_load(&l7.children) == 4, "the 4 children to run");
	if (attached) {
		atomic_store(&l7.stop_polling, 1);
		pthread_join(poller, NULL);
	}
	sleep_ms(10);
	assert_int_equal(atomic_load(&l7.children), 4);
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_no_bg_failures();
	svc_destroy(l7.s);
}

/* Contract line 7, callbacks inline on the shard threads (callback_threads = 0). */
static void line7_callbacks_call_everything_inline(void **state)
{
	(void)state;
	everything_run(0, false);
}

/* Contract line 7, callbacks on a pool of 2 threads. */
static void line7_callbacks_call_everything_pool(void **state)
{
	(void)state;
	everything_run(2, false);
}

/*
 * Contract line 7, the driver runs inline in the poll of a thread attached
 * to shard 0 (it checks pthread_self()); poll and next_deadline from inside
 * a callback return instead of recursing forever or deadlocking.
 */
static void line7_callbacks_call_everything_attached(void **state)
{
	(void)state;
	everything_run(2, true);
}

#define QUEUED_PAIRS 40

struct queued_pair {
	struct spoke *s;
	_Atomic uint64_t id[2];
	atomic_uint runs[2];
	atomic_int rc[2];
	atomic_int rc_set[2];
	struct queued_pair *self;
};

struct queued_arg {
	struct queued_pair *pair;
	int which;
};

static struct queued_pair l7q[QUEUED_PAIRS];
static struct queued_arg queued_args[QUEUED_PAIRS][2];

static void queued_fn(void *arg)
{
	struct queued_arg *a = arg;
	struct queued_pair *p = a->pair;
	uint64_t end = spoke_now_ns() + HOLD_LIMIT_NS, other;

	atomic_fetch_add(&p->runs[a->which], 1);
	while ((other = atomic_load(&p->id[!a->which])) == 0 && spoke_now_ns() < end)
		sleep_ns(100 * US);
	/* the partner is due in the same tick on the same shard: queued behind us */
	atomic_store(&p->rc[a->which], spoke_cancel_sync(p->s, other));
	atomic_store(&p->rc_set[a->which], 1);
}

/*
 * Contract line 7 (cancel_sync from a callback, no deadlock): pairs of
 * timers due at the same tick on the same shard each cancel_sync the other
 * from their callback, inline and with a single pool thread, so the partner
 * is queued behind the caller on the very thread that would have to run it.
 * Every call returns; per pair, a partner either ran once or was cancelled
 * (0) and never ran.
 */
static void line7_cancel_sync_of_queued_timer(void **state)
{
	(void)state;
	static const unsigned pools[] = {0, 1};

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 500 * US, pools[v]);

		memset(l7q, 0, sizeof(l7q));
		for (unsigned i = 0; i < QUEUED_PAIRS; i++) {
			l7q[i].s = s;
			for (int w = 0; w < 2; w++) {
				queued_args[i][w] =
					(struct queued_arg){.pair = &l7q[i], .which = w};
			}
		}
		for (unsigned i = 0; i < QUEUED_PAIRS; i++) {
			spoke_id a, b;

			/* both due 2 ms from now, one right after the other */
			assert_int_equal(
				spoke_start_on(s, 0, 2 * MS, queued_fn, &queued_args[i][0], &a), 0);
			assert_int_equal(
				spoke_start_on(s, 0, 2 * MS, queued_fn, &queued_args[i][1], &b), 0);
			atomic_store(&l7q[i].id[0], a);
			atomic_store(&l7q[i].id[1], b);
			if (i % 8 == 7)
				sleep_ms(3);
		}
		for (unsigned i = 0; i < QUEUED_PAIRS; i++)
			ASSERT_EVENTUALLY_MSG(
				atomic_load(&l7q[i].rc_set[0]) || atomic_load(&l7q[i].rc_set[1]),
				"pair %u: no callback returned from cancel_sync (deadlock)", i);
		sleep_ms(20);
		for (unsigned i = 0; i < QUEUED_PAIRS; i++) {
			for (int w = 0; w < 2; w++) {
				unsigned partner_runs = atomic_load(&l7q[i].runs[!w]);

				if (!atomic_load(&l7q[i].rc_set[w]))
					continue; /* this one was cancelled by its partner */
				if (atomic_load(&l7q[i].rc[w]) == 0) {
					if (partner_runs != 0)
						fail_msg("pair %u: cancel_sync won, yet the "
							 "partner ran",
							 i);
				} else {
					assert_int_equal(atomic_load(&l7q[i].rc[w]), -ENOENT);
					ASSERT_EVENTUALLY(
						atomic_load(&l7q[i].runs[!w]) == 1,
						"the partner cancel_sync could not stop to run");
				}
			}
			for (int w = 0; w < 2; w++)
				assert_in_range(atomic_load(&l7q[i].runs[w]), 0, 1);
		}
		svc_destroy(s);
	}
}

/* ==== line 8: destroy ===================================================================== */

struct nothing_after_ctx {
	atomic_int destroyed; /* set by the test once spoke_destroy has returned */
	atomic_int sleepers_running, sleepers_started;
	atomic_uint entries;
	atomic_int after; /* callbacks that started or ended after destroy returned */
};

static struct nothing_after_ctx l8;

static void nothing_after_cb(void *arg)
{
	(void)arg;
	if (atomic_load(&l8.destroyed))
		atomic_fetch_add(&l8.after, 1);
	atomic_fetch_add(&l8.entries, 1);
	if (atomic_load(&l8.destroyed))
		atomic_fetch_add(&l8.after, 1);
}

static void nothing_after_sleeper(void *arg)
{
	(void)arg;
	if (atomic_load(&l8.destroyed))
		atomic_fetch_add(&l8.after, 1);
	atomic_fetch_add(&l8.sleepers_running, 1);
	atomic_fetch_add(&l8.sleepers_started, 1);
	sleep_ns(60 * MS);
	atomic_fetch_sub(&l8.sleepers_running, 1);
	if (atomic_load(&l8.destroyed))
		atomic_fetch_add(&l8.after, 1);
}

/*
 * Contract line 8 and the destroy pitfall (no callback starts after destroy
 * returns; it waits for running ones): with 3 callbacks sleeping 60 ms (one
 * per shard), 50 periodic 1 ms timers, 500 one-shots due within 5 ms and
 * 200 due in an hour, destroy returns only once the sleepers are done, and
 * no callback starts or is still running after it returns (a flag set
 * after destroy returns is never seen set by a callback; the run count
 * does not move afterwards). The ASan build checks it frees everything.
 */
static void line8_destroy_waits_nothing_after(void **state)
{
	(void)state;
	static const unsigned pools[] = {0, 3};

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(3, 200 * US, pools[v]);
		struct rng rng = {0x8000 + v};
		unsigned entries;

		memset(&l8, 0, sizeof(l8));
		atomic_store(&never_ran, 0);
		for (unsigned i = 0; i < 200; i++)
			assert_int_equal(spoke_start_on(s, i % 3, 3600 * SEC, never_fn, NULL, NULL),
					 0);
		for (unsigned i = 0; i < 50; i++)
			assert_int_equal(spoke_start_periodic(s, MS, nothing_after_cb, NULL, NULL),
					 0);
		for (unsigned i = 0; i < 500; i++)
			assert_int_equal(spoke_start_on(s, i % 3, rng_below(&rng, 5 * MS),
							nothing_after_cb, NULL, NULL),
					 0);
		for (unsigned k = 0; k < 3; k++)
			assert_int_equal(
				spoke_start_on(s, k, MS, nothing_after_sleeper, NULL, NULL), 0);
		/* inline: each shard thread runs its own sleeper; pool of 3: all at once */
		ASSERT_EVENTUALLY(atomic_load(&l8.sleepers_started) == 3, "the sleepers to run");
		svc_destroy(s);
		atomic_store(&l8.destroyed, 1);
		assert_int_equal(atomic_load(&l8.sleepers_running), 0);
		entries = atomic_load(&l8.entries);
		sleep_ms(30);
		assert_int_equal(atomic_load(&l8.entries), entries);
		assert_int_equal(atomic_load(&l8.after), 0);
		assert_int_equal(atomic_load(&never_ran), 0);
	}
}

struct shutdown_ctx {
	struct spoke *s;
	spoke_id valid_id; /* an hour-long timer, pending when destroy begins */
	atomic_int c_running, y_running, y_started;
	atomic_int got_shutdown; /* the callback saw -ESHUTDOWN */
	atomic_int t2_shutdown;	 /* the other thread saw -ESHUTDOWN */
	atomic_int destroy_begun, destroyed, after;
	atomic_int wrong;	    /* calls that did not give -ESHUTDOWN after the first did */
	atomic_int release_threads; /* T2, T3 exit only after destroy (see line8_destroy_*_exit) */
	atomic_int id_touched;
	atomic_uint started_before;
	_Atomic uint64_t y_id;
	atomic_int t3_calling, t3_returned;
	int t3_rc, t3_y_running;
};

static struct shutdown_ctx l8s;

static void shutdown_expect_shutdown(int rc, spoke_id id)
{
	if (rc != -ESHUTDOWN)
		atomic_fetch_add(&l8s.wrong, 1);
	if (id != SENTINEL_ID)
		atomic_fetch_add(&l8s.id_touched, 1);
}

/* Runs while destroy begins: keeps calling in until told -ESHUTDOWN, then everything. */
static void shutdown_caller(void *arg)
{
	struct spoke *s = arg;
	uint64_t end = spoke_now_ns() + HOLD_LIMIT_NS;
	spoke_id id;
	int rc = 0;

	atomic_store(&l8s.c_running, 1);
	while (spoke_now_ns() < end) {
		rc = spoke_start(s, 3600 * SEC, never_fn, NULL, NULL);
		if (rc == -ESHUTDOWN)
			break;
		BG_CHECK_INT(rc, ==, 0);
		atomic_fetch_add(&l8s.started_before, 1);
		sleep_ns(50 * US);
	}
	if (rc == -ESHUTDOWN) {
		atomic_store(&l8s.got_shutdown, 1);
		id = SENTINEL_ID;
		shutdown_expect_shutdown(spoke_start(s, 0, never_fn, NULL, &id), id);
		shutdown_expect_shutdown(spoke_start_on(s, 0, 0, never_fn, NULL, &id), id);
		shutdown_expect_shutdown(spoke_start_on(s, 1, MS, never_fn, NULL, &id), id);
		shutdown_expect_shutdown(spoke_start_periodic(s, MS, never_fn, NULL, &id), id);
		shutdown_expect_shutdown(spoke_start_ttl(s, MS, never_fn, NULL, &id), id);
		shutdown_expect_shutdown(spoke_reset(s, l8s.valid_id, 0), id);
		shutdown_expect_shutdown(spoke_cancel(s, l8s.valid_id), id);
		shutdown_expect_shutdown(spoke_cancel_sync(s, l8s.valid_id), id);
		/*
		 * destroy must not return before the other thread has seen
		 * -ESHUTDOWN too, nor before t3's cancel_sync has returned: a t3
		 * stalled before its call would otherwise call into a freed service
		 */
		while (!(atomic_load(&l8s.t2_shutdown) && atomic_load(&l8s.t3_returned)) &&
		       spoke_now_ns() < end)
			sleep_ns(100 * US);
	}
	if (atomic_load(&l8s.destroyed))
		atomic_fetch_add(&l8s.after, 1);
	atomic_store(&l8s.c_running, 0);
}

static void shutdown_slow(void *arg)
{
	(void)arg;
	atomic_store(&l8s.y_running, 1);
	atomic_store(&l8s.y_started, 1);
	sleep_ns(150 * MS);
	atomic_store(&l8s.y_running, 0);
	if (atomic_load(&l8s.destroyed))
		atomic_fetch_add(&l8s.after, 1);
}

/* Another thread: calls in while destroy runs, stops at the first -ESHUTDOWN. */
static void *shutdown_t2(void *p)
{
	struct spoke *s = p;

	for (;;) {
		spoke_id id = 0;
		int rc = spoke_start(s, 3600 * SEC, never_fn, NULL, &id);

		if (rc == -ESHUTDOWN)
			break;
		BG_CHECK_INT(rc, ==, 0);
		rc = spoke_cancel(s, id);
		if (rc == -ESHUTDOWN)
			break;
		BG_CHECK_INT(rc, ==, 0);
	}
	atomic_store(&l8s.t2_shutdown, 1);
	while (!atomic_load(&l8s.release_threads))
		sleep_ns(100 * US);
	return NULL;
}

/* A third thread: inside cancel_sync (waiting for a slow callback) when destroy begins. */
static void *shutdown_t3(void *p)
{
	struct spoke *s = p;

	atomic_store(&l8s.t3_calling, 1);
	l8s.t3_rc = spoke_cancel_sync(s, atomic_load(&l8s.y_id));
	l8s.t3_y_running = atomic_load(&l8s.y_running);
	atomic_store(&l8s.t3_returned, 1);
	while (!atomic_load(&l8s.release_threads))
		sleep_ns(100 * US);
	return NULL;
}

/*
 * Contract lines 8 and 9 and the destroy pitfall (terminal: -ESHUTDOWN for
 * calls that begin after destroy began): while destroy runs, a callback
 * keeps calling spoke_start until it gets -ESHUTDOWN, then every entry
 * point (start, start_on, periodic, ttl, reset, cancel, cancel_sync) gives
 * -ESHUTDOWN and leaves *id alone; another thread calling in also ends on
 * -ESHUTDOWN; a third thread inside cancel_sync of a running callback when
 * destroy begins returns with that callback finished (the callback holds
 * destroy until both have returned, so neither calls into a freed
 * service). Nothing runs after destroy returns; the timers started before
 * it are freed (ASan).
 */
static void line8_destroy_shutdown_during_destroy(void **state)
{
	(void)state;
	static const unsigned pools[] = {0, 2};

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 250 * US, pools[v]);
		pthread_t t2, t3;
		spoke_id id;

		memset(&l8s, 0, sizeof(l8s));
		atomic_store(&never_ran, 0);
		l8s.s = s;
		assert_int_equal(spoke_start_on(s, 1, 3600 * SEC, never_fn, NULL, &l8s.valid_id),
				 0);
		assert_int_equal(spoke_start_on(s, 1, 0, shutdown_slow, NULL, &id), 0);
		atomic_store(&l8s.y_id, id);
		/* inline, each shard thread runs one of them; on the pool, either will do */
		assert_int_equal(spoke_start_on(s, pools[v] ? 1 : 0, 0, shutdown_caller, s, NULL),
				 0);
		ASSERT_EVENTUALLY_MSG(atomic_load(&l8s.c_running) && atomic_load(&l8s.y_started),
				      "callbacks did not run (pool %u): caller %d, slow %d",
				      pools[v], atomic_load(&l8s.c_running),
				      atomic_load(&l8s.y_started));
		t2 = thread_start(shutdown_t2, s);
		t3 = thread_start(shutdown_t3, s);
		ASSERT_EVENTUALLY(atomic_load(&l8s.t3_calling), "t3 to call cancel_sync");
		sleep_ms(10); /* t3 is now (almost surely) waiting in cancel_sync */
		atomic_store(&l8s.destroy_begun, 1);
		svc_destroy(s);
		atomic_store(&l8s.destroyed, 1);
		atomic_store(&l8s.release_threads, 1);
		pthread_join(t2, NULL);
		pthread_join(t3, NULL);

		assert_int_equal(atomic_load(&l8s.got_shutdown), 1);
		assert_int_equal(atomic_load(&l8s.t2_shutdown), 1);
		assert_int_equal(atomic_load(&l8s.wrong), 0);
		assert_int_equal(atomic_load(&l8s.id_touched), 0);
		assert_int_equal(atomic_load(&l8s.c_running), 0);
		assert_int_equal(atomic_load(&l8s.y_running), 0);
		/* -ESHUTDOWN: t3 was slow and called only after destroy began (no wait owed) */
		if (l8s.t3_rc != -ENOENT && l8s.t3_rc != -ESHUTDOWN)
			fail_msg("cancel_sync in progress when destroy began returned %d",
				 l8s.t3_rc);
		if (l8s.t3_rc == -ENOENT && l8s.t3_y_running)
			fail_msg("cancel_sync returned -ENOENT while the callback still ran");
		sleep_ms(20);
		assert_int_equal(atomic_load(&l8s.after), 0);
		assert_int_equal(atomic_load(&never_ran), 0);
		assert_no_bg_failures();
	}
}

#define EXITED_THREADS 8

struct exited_ctx {
	struct spoke *s;
	atomic_int done;
	spoke_id ids[EXITED_THREADS];
};

static struct exited_ctx l8x;

static void *exited_caller(void *p)
{
	struct exited_ctx *c = p;
	spoke_id id;

	BG_CHECK_INT(spoke_start(c->s, 3600 * SEC, never_fn, NULL, &id), ==, 0);
	BG_CHECK_INT(spoke_cancel(c->s, id), ==, 0);
	BG_CHECK_INT(spoke_start(c->s, 3600 * SEC, never_fn, NULL, NULL), ==, 0);
	atomic_fetch_add(&c->done, 1);
	return NULL; /* and the thread exits, without anyone joining it yet */
}

/*
 * Contract line 8 (destroy frees everything, TSan/ASan clean) with the
 * ordinary shutdown order of a server: 8 worker threads call the service
 * (start, cancel, and leave a timer pending), then exit; the main thread
 * sees their work done (a flag, not a join) and destroys the service; it
 * joins the threads afterwards. Whatever the service does when a calling
 * thread exits must not race with destroy freeing it (the TSan build sees
 * any unsynchronised access; the ASan build a use after free).
 */
static void line8_destroy_after_caller_threads_exit(void **state)
{
	(void)state;
	pthread_t t[EXITED_THREADS];

	memset(&l8x, 0, sizeof(l8x));
	atomic_store(&never_ran, 0);
	l8x.s = svc_new(2, 500 * US, 1);
	for (unsigned i = 0; i < EXITED_THREADS; i++)
		t[i] = thread_start(exited_caller, &l8x);
	ASSERT_EVENTUALLY(atomic_load(&l8x.done) == EXITED_THREADS, "the threads to finish");
	sleep_ms(20); /* they have exited by now */
	svc_destroy(l8x.s);
	for (unsigned i = 0; i < EXITED_THREADS; i++)
		pthread_join(t[i], NULL);
	assert_no_bg_failures();
	assert_int_equal(atomic_load(&never_ran), 0);
}

/* ==== line 9: bad input ====================================================================== */

/*
 * Bad input (NULL fn, shard out of range, zero period, invalid config, NULL
 * service): test_service_errors.c, one test per (function, error).
 */

#define FLOOD_THREADS 8

struct flood_ctx {
	struct spoke *s;
	unsigned per;
	struct trec *rec;
	struct {
		atomic_int blocking, release;
	} blk;
};

static struct flood_ctx l9f;

static void flood_blocker(void *arg)
{
	struct flood_ctx *c = arg;
	uint64_t end = spoke_now_ns() + 30 * SEC;

	atomic_store(&c->blk.blocking, 1);
	while (!atomic_load(&c->blk.release) && spoke_now_ns() < end)
		sleep_ns(200 * US);
	atomic_store(&c->blk.blocking, 0);
}

static void flood_worker(unsigned idx, void *p)
{
	struct flood_ctx *c = p;
	struct rng rng = {0x9000 + idx};

	for (unsigned j = 0; j < c->per; j++) {
		struct trec *r = &c->rec[idx * c->per + j];

		if (spoke_start_on(c->s, 0, rng_below(&rng, MS), trec_fire, r, NULL) != 0)
			svc_bg_fail(__FILE__, __LINE__, "start %u of thread %u refused", j, idx);
	}
}

/*
 * Contract line 9 (a full inbox never drops a message): shard 0 (inline
 * callbacks, inbox_batch 16) is stuck in a callback while 8 threads post
 * 160 000 starts to it (40 000 under TSan); once released, every timer
 * runs exactly once, started counts them all, and no turn took more than
 * inbox_batch messages.
 */
static void line9_inbox_flood_never_drops(void **state)
{
	(void)state;
	struct spoke_config c;
	struct spoke_stats *st = stats_new();
	unsigned total;

	memset(&l9f, 0, sizeof(l9f));
	l9f.per = SCALE(20000);
	total = FLOOD_THREADS * l9f.per;
	l9f.rec = calloc(total, sizeof(*l9f.rec));
	assert_non_null(l9f.rec);
	svc_config(&c, 2, 500 * US, 0);
	c.inbox_batch = 16;
	l9f.s = svc_create_cfg(&c);
	assert_int_equal(spoke_start_on(l9f.s, 0, 0, flood_blocker, &l9f, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&l9f.blk.blocking), "shard 0 to be stuck");
	run_workers(FLOOD_THREADS, flood_worker, &l9f);
	assert_int_equal(atomic_load(&l9f.blk.blocking), 1);
	atomic_store(&l9f.blk.release, 1);
	assert_no_bg_failures();
	for (unsigned i = 0; i < total; i++)
		ASSERT_EVENTUALLY(atomic_load(&l9f.rec[i].fired) >= 1, "every timer to run");
	ASSERT_EVENTUALLY(stats_settled(l9f.s, total + 1, 0), "the stats to settle");
	sleep_ms(10);
	for (unsigned i = 0; i < total; i++)
		assert_int_equal(atomic_load(&l9f.rec[i].fired), 1);
	spoke_stats(l9f.s, st);
	assert_int_equal(st->shard[0].started, total + 1);
	assert_int_equal(st->shard[0].fired, total + 1);
	assert_in_range(st->shard[0].inbox_hwm, 1, 16);
	free(st);
	svc_destroy(l9f.s);
	free(l9f.rec);
}

/*
 * Line 9 with backpressure: a shard whose owner takes no message (attached,
 * not polling) and an inbox_limit of BP_LIMIT. Other threads' starts fill
 * the inbox to the limit, and spoke_stats shows the backlog while the owner
 * is stalled; the next start of every kind is refused with -ENOBUFS, with
 * *id untouched, and counted in `refused`. Cancels and resets are never
 * refused, also past the limit, and neither is the owner's own start. Once
 * a poll has taken the backlog, starts go through again, and the stats add
 * up: nothing refused was started. Then threads race for the places: at
 * most the limit's worth get in. A per-shard override limits only its
 * shard.
 */
#define BP_LIMIT   1000u
#define BP_ARMED   100u /* the owner's own timers, in its wheel: a cancel of one is a message */
#define BP_THREADS 4

static struct {
	struct spoke *s;
	spoke_id armed[BP_ARMED], queued[BP_LIMIT];
	atomic_uint admitted, refused;
} bp;

/* Another thread: fill shard 0's inbox with BP_LIMIT starts, then try each start kind past it. */
static void *bp_fill(void *arg)
{
	spoke_id id = SENTINEL_ID;

	(void)arg;
	for (unsigned i = 0; i < BP_LIMIT; i++)
		BG_CHECK_INT(spoke_start_on(bp.s, 0, 10 * SEC, never_fn, NULL, &bp.queued[i]), ==,
			     0);
	BG_CHECK_INT(spoke_start_on(bp.s, 0, 10 * SEC, never_fn, NULL, &id), ==, -ENOBUFS);
	BG_CHECK_INT(spoke_start(bp.s, 10 * SEC, never_fn, NULL, &id), ==, -ENOBUFS);
	BG_CHECK_INT(spoke_start_at(bp.s, spoke_now_ns() + SEC, never_fn, NULL, &id), ==, -ENOBUFS);
	BG_CHECK_INT(spoke_start_periodic(bp.s, 10 * SEC, never_fn, NULL, &id), ==, -ENOBUFS);
	BG_CHECK_INT(spoke_start_ttl(bp.s, 10 * SEC, never_fn, NULL, &id), ==, -ENOBUFS);
	BG_CHECK(id == SENTINEL_ID);
	return NULL;
}

/* Another thread: cancel and reset past the limit. */
static void *bp_cancel_reset(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < BP_ARMED; i++) {
		BG_CHECK_INT(spoke_reset(bp.s, bp.armed[i], 20 * SEC), ==, 0);
		BG_CHECK_INT(spoke_cancel(bp.s, bp.armed[i]), ==, 0);
	}
	for (unsigned i = 0; i < BP_LIMIT; i++) {
		BG_CHECK_INT(spoke_reset(bp.s, bp.queued[i], 20 * SEC), ==, 0);
		BG_CHECK_INT(spoke_cancel(bp.s, bp.queued[i]), ==, 0);
	}
	return NULL;
}

static void bp_race(unsigned idx, void *ctx)
{
	(void)idx;
	(void)ctx;
	for (unsigned i = 0; i < BP_LIMIT; i++) {
		int rc = spoke_start_on(bp.s, 0, 10 * SEC, never_fn, NULL, NULL);

		if (rc == 0)
			atomic_fetch_add(&bp.admitted, 1);
		else if (rc == -ENOBUFS)
			atomic_fetch_add(&bp.refused, 1);
		else
			BG_CHECK_INT(rc, ==, -ENOBUFS);
	}
}

/* Another thread: shard 1 (limit 10, stalled) takes 10; shard 0 (global limit) more. */
static void *bp_override(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < 10; i++)
		BG_CHECK_INT(spoke_start_on(bp.s, 1, 10 * SEC, never_fn, NULL, NULL), ==, 0);
	BG_CHECK_INT(spoke_start_on(bp.s, 1, 10 * SEC, never_fn, NULL, NULL), ==, -ENOBUFS);
	for (unsigned i = 0; i < 20; i++)
		BG_CHECK_INT(spoke_start_on(bp.s, 0, 10 * SEC, never_fn, NULL, NULL), ==, 0);
	return NULL;
}

static struct spoke_shard_stats bp_shard0(void)
{
	return stats_of(bp.s, 0);
}

static void line9_inbox_limit_refuses_starts(void **state)
{
	struct spoke_shard_config o[2] = {{.cpu = -1}, {.cpu = -1, .inbox_limit = 10}};
	struct spoke_shard_stats t;
	struct spoke_config c;
	spoke_id own;

	(void)state;
	memset(&bp, 0, sizeof(bp));
	svc_config(&c, 1, 1 * MS, 0);
	c.inbox_limit = BP_LIMIT;
	bp.s = svc_create_cfg(&c);
	assert_int_equal(spoke_attach(bp.s, 0), 0);
	for (unsigned i = 0; i < BP_ARMED; i++)
		assert_int_equal(spoke_start(bp.s, 10 * SEC, never_fn, NULL, &bp.armed[i]), 0);
	pthread_join(thread_start(bp_fill, NULL), NULL);
	assert_no_bg_failures();
	t = bp_shard0();
	assert_int_equal(t.inbox_queued, BP_LIMIT);
	assert_int_equal(t.refused, 5);
	assert_int_equal(t.started, BP_ARMED); /* the queued starts are not taken yet */
	pthread_join(thread_start(bp_cancel_reset, NULL), NULL);
	assert_no_bg_failures();
	assert_true(bp_shard0().inbox_queued >= BP_LIMIT + BP_ARMED);
	assert_int_equal(spoke_start(bp.s, 10 * SEC, never_fn, NULL, &own), 0); /* the owner's */
	spoke_poll(bp.s);
	t = bp_shard0();
	assert_int_equal(t.inbox_queued, 0);
	assert_int_equal(t.started, BP_ARMED + BP_LIMIT + 1);
	assert_int_equal(t.cancelled, BP_ARMED + BP_LIMIT);
	assert_int_equal(t.pending, 1);
	assert_int_equal(spoke_cancel(bp.s, own), 0);
	/*
	 * Threads racing for the places: never more than the limit's worth get
	 * in, and no fewer than that less the places a thread took for starts
	 * it then did not make (up to 63 each: docs/api.md, Backpressure).
	 */
	run_workers(BP_THREADS, bp_race, NULL);
	assert_no_bg_failures();
	assert_in_range(atomic_load(&bp.admitted), BP_LIMIT - BP_THREADS * 63, BP_LIMIT);
	assert_int_equal(atomic_load(&bp.admitted) + atomic_load(&bp.refused),
			 BP_THREADS * BP_LIMIT);
	t = bp_shard0();
	assert_int_equal(t.refused, 5 + atomic_load(&bp.refused));
	assert_int_equal(t.inbox_queued, atomic_load(&bp.admitted));
	spoke_poll(bp.s);
	assert_int_equal(bp_shard0().pending, atomic_load(&bp.admitted));
	assert_int_equal(spoke_detach(bp.s), 0);
	svc_destroy(bp.s);
	/* An override: shard 1 takes 10, shard 0 the global limit. */
	svc_config(&c, 2, 1 * MS, 0);
	c.inbox_limit = BP_LIMIT;
	c.shard_overrides = o;
	c.n_shard_overrides = 2;
	bp.s = svc_create_cfg(&c);
	assert_int_equal(spoke_attach(bp.s, 1), 0); /* shard 1 stalls */
	pthread_join(thread_start(bp_override, NULL), NULL);
	assert_no_bg_failures();
	assert_int_equal(stats_of(bp.s, 1).refused, 1);
	assert_int_equal(stats_of(bp.s, 0).refused, 0);
	assert_int_equal(spoke_detach(bp.s), 0);
	svc_destroy(bp.s);
}

/* ==== line 10: delays up to UINT64_MAX
 * ============================================================ */

/*
 * Contract line 10 (delays up to UINT64_MAX ns are accepted, never fire
 * early, never wrap): on 6 shards with different engines (hierarchical,
 * hierarchical with 3 levels of 4 bits, i.e. an overflow list, list,
 * sorted-list, hashed with 16 buckets, hashed-sorted) with ticks
 * from 1 us to 1 ms, one-shot timers with delays from 2^40 ns to UINT64_MAX
 * (including UINT64_MAX - now, and values whose tick count rounds up past
 * 2^64 / tick), plus start, start_ttl, start_periodic and a reset to
 * UINT64_MAX: all accepted, none runs while short control timers on every
 * shard do, all still pending (stats) and each cancels with 0.
 */
static struct trec huge_ctl[8];

static void line10_huge_delays_never_fire(void **state)
{
	(void)state;
	static const char *engines[] = {"hierarchical", "hierarchical", "list",
					"sorted-list",	"hashed",	"hashed-sorted"};
	static const uint64_t ticks[] = {100 * US, 1000, MS, 250 * US, 1000, 100 * US};
	struct spoke_shard_config ov[6];
	struct spoke_config c;
	struct spoke *s;
	uint64_t now = spoke_now_ns();
	const uint64_t delays[] = {
		UINT64_MAX,	      UINT64_MAX - 1,	UINT64_MAX - now,    UINT64_MAX - now + 1,
		UINT64_MAX - now - 1, UINT64_MAX - 999, UINT64_MAX - MS + 1, 1ull << 63,
		(1ull << 63) - 1,     (1ull << 63) + 1, 1ull << 62,	     1ull << 40,
	};
	spoke_id ids[6 * ARRAY_SIZE(delays) + 64];
	unsigned n = 0, nsh;

	memset(huge_ctl, 0, sizeof(huge_ctl));
	atomic_store(&never_ran, 0);
	svc_config(&c, 6, 100 * US, 1);
	memset(ov, 0, sizeof(ov));
	for (unsigned k = 0; k < 6; k++) {
		ov[k].cpu = -1;
		ov[k].engine = engines[k];
		ov[k].tick_ns = ticks[k];
	}
	ov[1].level_bits = 4; /* 3 levels of 4 bits: most of these sit on the overflow list */
	ov[1].levels = 3;
	ov[4].table_size = 16;
	c.shard_overrides = ov;
	c.n_shard_overrides = 6;
	s = svc_create_cfg(&c);
	nsh = spoke_shards(s);
	assert_int_equal(nsh, 6);

	for (unsigned k = 0; k < nsh; k++)
		for (unsigned i = 0; i < ARRAY_SIZE(delays); i++)
			assert_int_equal(spoke_start_on(s, k, delays[i], never_fn, NULL, &ids[n++]),
					 0);
	assert_int_equal(spoke_start(s, UINT64_MAX, never_fn, NULL, &ids[n++]), 0);
	assert_int_equal(spoke_start_ttl(s, UINT64_MAX, never_fn, NULL, &ids[n++]), 0);
	assert_int_equal(spoke_start_ttl(s, UINT64_MAX - 1, never_fn, NULL, &ids[n++]), 0);
	assert_int_equal(spoke_start_ttl(s, 1ull << 63, never_fn, NULL, &ids[n++]), 0);
	assert_int_equal(spoke_start_periodic(s, UINT64_MAX, never_fn, NULL, &ids[n++]), 0);
	assert_int_equal(spoke_start_periodic(s, 1ull << 63, never_fn, NULL, &ids[n++]), 0);
	assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &ids[n]), 0);
	assert_int_equal(spoke_reset(s, ids[n++], UINT64_MAX), 0);
	assert_int_equal(spoke_start_ttl(s, 3600 * SEC, never_fn, NULL, &ids[n]), 0);
	assert_int_equal(spoke_reset(s, ids[n++], UINT64_MAX), 0);

	/* control timers: the shards are running */
	for (unsigned k = 0; k < nsh; k++) {
		atomic_store(&huge_ctl[k].earliest, spoke_now_ns() + 2 * MS);
		assert_int_equal(spoke_start_on(s, k, 2 * MS, trec_fire, &huge_ctl[k], NULL), 0);
	}
	for (unsigned k = 0; k < nsh; k++)
		ASSERT_EVENTUALLY(atomic_load(&huge_ctl[k].fired) == 1, "control timers to run");
	sleep_ms(30);
	assert_int_equal(atomic_load(&never_ran), 0);
	ASSERT_EVENTUALLY(stats_pending(s) == n, "every huge timer to be pending");
	for (unsigned i = 0; i < n; i++)
		if (spoke_cancel(s, ids[i]) != 0)
			fail_msg("huge timer %u (of %u) was no longer pending", i, n);
	assert_int_equal(atomic_load(&never_ran), 0);
	svc_destroy(s);
}

/* ==== line 8: destroy waits for its own calls only =============================== */

struct own_calls_ctx {
	struct spoke *s1;
	spoke_id id;
	atomic_int cb_running, cb_done, gate, sync_returned;
	int sync_rc;
};

static struct own_calls_ctx l8o;

/* Holds its pool worker until the test opens the gate (HOLD_LIMIT_NS at most). */
static void own_calls_held_cb(void *arg)
{
	uint64_t end = mono_ns() + HOLD_LIMIT_NS;

	(void)arg;
	atomic_store(&l8o.cb_running, 1);
	while (!atomic_load(&l8o.gate) && mono_ns() < end)
		sleep_ms(1);
	atomic_store(&l8o.cb_done, 1);
}

static void *own_calls_sync_main(void *arg)
{
	(void)arg;
	l8o.sync_rc = spoke_cancel_sync(l8o.s1, l8o.id);
	atomic_store(&l8o.sync_returned, 1);
	return NULL;
}

/*
 * A thread is inside spoke_cancel_sync on instance 1, waiting for a callback
 * that the test holds; meanwhile the main thread destroys instance 2.
 * Contract line 8 makes destroy wait for the calls on its own instance, not
 * for a call on another one: destroy(2) returns while the callback is still
 * held and the cancel_sync still waits. The call guard holds a process-wide
 * urcu-bp read-side section for the whole of a call that never waits (a
 * start, a cancel), and every destroy waits for all such sections: a
 * waiting call inside one would keep destroy(2) until the callback ended,
 * and a callback that destroyed another instance would wait for itself.
 */
static void line8_destroy_waits_only_for_its_own_calls(void **state)
{
	struct spoke *s2;
	uint64_t t0;
	pthread_t t;

	(void)state;
	memset(&l8o, 0, sizeof(l8o));
	l8o.s1 = svc_new(1, 1 * MS, 1);
	s2 = svc_new(1, 1 * MS, 1);
	assert_int_equal(spoke_start_on(s2, 0, 3600 * SEC, never_fn, NULL, NULL), 0);
	assert_int_equal(spoke_start_on(l8o.s1, 0, 1 * MS, own_calls_held_cb, NULL, &l8o.id), 0);
	ASSERT_EVENTUALLY(atomic_load(&l8o.cb_running), "the held callback to run");
	t = thread_start(own_calls_sync_main, NULL);
	sleep_ms(50); /* room for the cancel_sync to begin its wait */
	t0 = mono_ns();
	svc_destroy(s2);
	if (atomic_load(&l8o.cb_done))
		fail_msg("spoke_destroy of one instance waited for a spoke_cancel_sync on another "
			 "(it returned after %" PRIu64 " ms, once that call's callback had ended)",
			 (mono_ns() - t0) / MS);
	assert_int_equal(atomic_load(&l8o.sync_returned), 0);
	atomic_store(&l8o.gate, 1);
	pthread_join(t, NULL);
	assert_int_equal(l8o.sync_rc, -ENOENT); /* its callback had started: nothing to prevent */
	assert_int_equal(atomic_load(&l8o.cb_done), 1);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(line7_callbacks_call_everything_inline),
		SVC_TEST(line7_callbacks_call_everything_pool),
		SVC_TEST(line7_callbacks_call_everything_attached),
		SVC_TEST(line7_cancel_sync_of_queued_timer),
		SVC_TEST(line8_destroy_waits_nothing_after),
		SVC_TEST(line8_destroy_shutdown_during_destroy),
		SVC_TEST(line8_destroy_after_caller_threads_exit),
		SVC_TEST(line8_destroy_waits_only_for_its_own_calls),
		SVC_TEST(line9_inbox_flood_never_drops),
		SVC_TEST(line9_inbox_limit_refuses_starts),
		SVC_TEST(line10_huge_delays_never_fire),
	};

	return svc_main(argc, argv, "service contract 7-10", tests, ARRAY_SIZE(tests));
}
