/* SPDX-License-Identifier: MIT */
/*
 * test_service_calls.c - the calls users of libuv, libevent, timerfd and
 * timeout.c look for (docs/api.md): absolute deadlines, the time left on a
 * timer, the running timer from inside its callback, a periodic timer's new
 * period, and the args of pending timers handed back at destroy.
 *
 *   start_at_never_early               an absolute deadline: the callback
 *                                      never starts before it (pool, inline,
 *                                      attached, foreign thread)
 *   start_at_past_runs_next_tick       a deadline already past (and 0) runs
 *                                      at the shard's next tick, once
 *   remaining_counts_down              ns until due, 0 once due, -ENOENT once
 *                                      fired or cancelled; periodic: to the
 *                                      next run, also from inside its run
 *   remaining_sees_unapplied_reset     a periodic timer's reset that its
 *                                      owner has not applied yet (from its own
 *                                      run, pool and inline; from another
 *                                      thread, owner not polling): the time
 *                                      left never passes the next run
 *   remaining_stale_periodic_reused    spoke_remaining on the id of a
 *                                      periodic timer that ended, from another
 *                                      thread, while its slots are taken by
 *                                      new timers: -ENOENT, and (under TSan)
 *                                      no read of a slot an engine writes
 *   self_names_running_timer           spoke_self() in a callback: its id and
 *                                      the deadline it was due at (lateness
 *                                      >= 0); a callback cancels itself
 *                                      through it; 0 outside a callback
 *   set_period_from_own_callback       the runs after the change are the new
 *                                      period apart; -EPERM from another
 *                                      thread, -EINVAL for a one-shot or 0
 *   set_period_from_attached_owner     the owner of the shard may change it
 *                                      while it is armed
 *   stats_lateness_percentiles         spoke_stats' p50/p99/p99.9 lateness:
 *                                      in order, at least the lateness every
 *                                      run had, within a bucket of the worst
 *   stats_lateness_counts_every_run    inline (no pool: plain adds) and on a
 *                                      pool, with a reader meanwhile: every
 *                                      run counted once, in late_runs and
 *                                      fired
 *   dump_lists_earliest                spoke_dump: a line per shard and its
 *                                      earliest timers, in order, by name
 *   threads_carry_their_names          the service's threads are named
 *                                      spoke-shard-N and spoke-pool-N in
 *                                      /proc (what top and ps -L show)
 *   pool_per_shard_spread_and_steal    callback_threads_per_shard = 2 starts
 *                                      two workers per shard; with one worker
 *                                      per shard (per-shard and round-robin
 *                                      spreads), a callback that waits for a
 *                                      later one of its own shard is not held
 *                                      behind: an idle neighbour takes it
 *   destroy_release_hands_back_args    every pending timer's arg exactly
 *                                      once (one-shot, periodic, TTL, started
 *                                      from other threads, and a periodic
 *                                      timer whose run spans the start of
 *                                      destroy); none of a timer that ran or
 *                                      was cancelled
 */
#include "service_util.h"

#include <dirent.h>

/* ---- spoke_start_at ------------------------------------------------------------------ */

struct at_rec {
	uint64_t deadline;
	_Atomic uint64_t ran_ns;
	atomic_uint runs;
};

static void at_fn(void *arg)
{
	struct at_rec *r = arg;

	atomic_store(&r->ran_ns, spoke_now_ns());
	atomic_fetch_add(&r->runs, 1);
}

#define AT_N 64

static void check_at_recs(struct at_rec *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(atomic_load(&r[i].runs), 1);
		if (atomic_load(&r[i].ran_ns) < r[i].deadline)
			fail_msg("timer %u ran %" PRIu64 " ns before its absolute deadline", i,
				 r[i].deadline - atomic_load(&r[i].ran_ns));
	}
}

static unsigned at_runs(struct at_rec *r, unsigned n)
{
	unsigned c = 0;

	for (unsigned i = 0; i < n; i++)
		c += atomic_load(&r[i].runs);
	return c;
}

static void start_at_batch(struct spoke *s, struct at_rec *r, unsigned n)
{
	uint64_t now = spoke_now_ns();

	for (unsigned i = 0; i < n; i++) {
		r[i].deadline = now + (uint64_t)(i % 16) * 250 * US + 1 * MS;
		assert_int_equal(spoke_start_at(s, r[i].deadline, at_fn, &r[i], NULL), 0);
	}
}

static void start_at_never_early(void **state)
{
	static struct at_rec r[AT_N];
	struct spoke *s;

	(void)state;
	for (unsigned threads = 0; threads <= 1; threads++) { /* inline, then the pool */
		memset(r, 0, sizeof(r));
		s = svc_new(2, 100 * US, threads);
		start_at_batch(s, r, AT_N);
		ASSERT_EVENTUALLY(at_runs(r, AT_N) == AT_N, "every absolute timer to run");
		check_at_recs(r, AT_N);
		svc_destroy(s);
	}
	/* Attached: the loop's own starts run inline in its polls. */
	memset(r, 0, sizeof(r));
	s = svc_new(1, 100 * US, 1);
	assert_int_equal(spoke_attach(s, 0), 0);
	start_at_batch(s, r, AT_N);
	ASSERT_EVENTUALLY((spoke_poll(s), at_runs(r, AT_N) == AT_N), "the polls to run them");
	check_at_recs(r, AT_N);
	svc_destroy(s);
}

/* A callback that starts another timer at "now": never in the pass that ran it. */
static struct spoke *at_s;
static struct at_rec at_inner;

static void at_outer_fn(void *arg)
{
	at_fn(arg);
	BG_CHECK_INT(spoke_start_at(at_s, spoke_now_ns(), at_fn, &at_inner, NULL), ==, 0);
}

static void start_at_past_runs_next_tick(void **state)
{
	struct spoke *s = svc_new(1, 1 * MS, 0);
	struct at_rec past = {0}, zero = {0}, outer = {0};
	uint64_t now, ns;

	(void)state;
	assert_int_equal(spoke_attach(s, 0), 0);
	spoke_poll(s);
	now = spoke_now_ns();
	assert_int_equal(spoke_start_at(s, now - 5 * MS, at_fn, &past, NULL), 0);
	assert_int_equal(spoke_start_at(s, 0, at_fn, &zero, NULL), 0);
	/* Past deadlines are the next tick's: not this pass, and due within a tick. */
	assert_int_equal(spoke_next_deadline_ns(s, &ns), 0);
	assert_true(ns <= 1 * MS);
	ASSERT_EVENTUALLY((spoke_poll(s), atomic_load(&past.runs) + atomic_load(&zero.runs) == 2),
			  "both to run");
	assert_true(atomic_load(&past.ran_ns) >= now);
	spoke_poll(s);
	assert_int_equal(atomic_load(&past.runs), 1);
	assert_int_equal(atomic_load(&zero.runs), 1);
	/* From a callback: a deadline of "now" is past, but not for the pass running it. */
	at_s = s;
	memset(&at_inner, 0, sizeof(at_inner));
	assert_int_equal(spoke_start_at(s, spoke_now_ns(), at_outer_fn, &outer, NULL), 0);
	ASSERT_EVENTUALLY(spoke_poll(s) == 1, "the outer callback's poll");
	assert_int_equal(atomic_load(&at_inner.runs), 0);
	ASSERT_EVENTUALLY((spoke_poll(s), atomic_load(&at_inner.runs) == 1), "the inner one");
	assert_no_bg_failures();
	svc_destroy(s);
}

/* ---- spoke_remaining --------------------------------------------------------------- */

static atomic_int per_remaining_ok;
static struct spoke *per_s;
static spoke_id per_id;

/*
 * Does `left`, read by a call made between the times before and after, say
 * "due at d"? Exactly: d - after <= left <= d - before (0 once passed), so
 * a thread stalled anywhere around the call cannot flip the verdict.
 */
static bool left_says_due_at(int64_t left, uint64_t d, uint64_t before, uint64_t after)
{
	uint64_t most = d > before ? d - before : 0, least = d > after ? d - after : 0;

	return left >= 0 && (uint64_t)left >= least && (uint64_t)left <= most;
}

static void remaining_in_run_fn(void *arg)
{
	uint64_t due = 0, before, after;
	int64_t left;

	(void)arg;
	(void)spoke_self(&due);
	before = spoke_now_ns();
	left = spoke_remaining(per_s, per_id);
	after = spoke_now_ns();
	/* Inside its run: the time to the next run, a period (1 s) after this one's deadline. */
	if (left_says_due_at(left, due + SEC, before, after))
		atomic_store(&per_remaining_ok, 1);
	else if (!atomic_load(&per_remaining_ok))
		atomic_store(&per_remaining_ok, -1);
}

static void remaining_counts_down(void **state)
{
	struct spoke *s = svc_new(1, 1 * MS, 1);
	atomic_uint runs = 0;
	uint64_t t0, t1;
	int64_t left, again;
	spoke_id id;

	(void)state;
	t0 = spoke_now_ns();
	assert_int_equal(spoke_start(s, 10 * SEC, count_fn, &runs, &id), 0);
	left = spoke_remaining(s, id);
	t1 = spoke_now_ns();
	/* Due at 10 s after a time between t0 and t1. */
	assert_true(left <= (int64_t)(10 * SEC) && left >= (int64_t)(t0 + 10 * SEC - t1));
	sleep_ms(5);
	again = spoke_remaining(s, id);
	assert_true(again < left);
	t0 = spoke_now_ns();
	assert_int_equal(spoke_reset(s, id, 20 * SEC), 0);
	left = spoke_remaining(s, id);
	t1 = spoke_now_ns();
	assert_true(left <= (int64_t)(20 * SEC) && left >= (int64_t)(t0 + 20 * SEC - t1));
	assert_int_equal(spoke_cancel(s, id), 0);
	assert_int_equal(spoke_remaining(s, id), -ENOENT);
	/* Fired: nothing left. */
	assert_int_equal(spoke_start(s, 1 * MS, count_fn, &runs, &id), 0);
	ASSERT_EVENTUALLY(atomic_load(&runs) == 1, "the short timer");
	assert_int_equal(spoke_remaining(s, id), -ENOENT);
	assert_int_equal(spoke_remaining(s, 0), -ENOENT);
	assert_int_equal(spoke_remaining(NULL, id), -EINVAL);
	/* Periodic: a period from its start, and from inside each run, to the next. */
	per_s = s;
	atomic_store(&per_remaining_ok, 0);
	t0 = spoke_now_ns();
	assert_int_equal(spoke_start_periodic(s, 1 * SEC, remaining_in_run_fn, NULL, &per_id), 0);
	left = spoke_remaining(s, per_id);
	t1 = spoke_now_ns();
	assert_true(left <= (int64_t)SEC && (left >= (int64_t)(t0 + SEC - t1) || t1 - t0 > SEC));
	ASSERT_EVENTUALLY(atomic_load(&per_remaining_ok) != 0, "the periodic run");
	assert_int_equal(atomic_load(&per_remaining_ok), 1);
	left = spoke_remaining(s, per_id);
	assert_true(left >= 0 && left <= (int64_t)SEC);
	assert_int_equal(spoke_cancel_sync(s, per_id), 0);
	assert_int_equal(spoke_remaining(s, per_id), -ENOENT);
	svc_destroy(s);
}

/*
 * A reset of a periodic timer moves its next run before its owner has
 * applied it, and spoke_remaining must say so: from inside the timer's own
 * run (the runner applies it as the run ends), on the pool and inline, and
 * from another thread while the owner (attached, not polling) has not
 * taken the reset's message. Each answer, added to the time it was asked,
 * must not pass the deadline the next run then had (its spoke_self).
 */
static struct {
	struct spoke *s;
	spoke_id id;
	bool reset_in_run; /* the first run resets itself to UR_DELAY */
	struct due_log log;
	_Atomic uint64_t asked_ns;
	_Atomic int64_t left;
} ur;

#define UR_DELAY (1 * MS)

static void ur_fn(void *arg)
{
	(void)arg;
	if (due_log_run(&ur.log) == 0 && ur.reset_in_run) {
		BG_CHECK_INT(spoke_reset(ur.s, ur.id, UR_DELAY), ==, 0);
		atomic_store(&ur.asked_ns, spoke_now_ns());
		atomic_store(&ur.left, spoke_remaining(ur.s, ur.id));
	}
}

static void ur_begin(unsigned callback_threads, bool reset_in_run)
{
	memset(&ur, 0, sizeof(ur));
	ur.reset_in_run = reset_in_run;
	ur.s = svc_new(1, 1 * MS, callback_threads);
}

/*
 * The answer of a call made at asked_ns or later did not pass the deadline of the
 * run that came next (0 if that was due already).
 */
static void assert_left_within(int64_t left, uint64_t asked_ns, uint64_t next_due, const char *who)
{
	if (left < 0 || (left > 0 && asked_ns + (uint64_t)left > next_due))
		fail_msg("%s: spoke_remaining said %" PRId64 " ns; the next run was due %" PRId64
			 " ns after it was asked",
			 who, left, (int64_t)(next_due - asked_ns));
}

static void *ur_foreign_reset(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)spoke_reset(ur.s, ur.id, UR_DELAY);
}

static void remaining_sees_unapplied_reset(void **state)
{
	static const unsigned pools[] = {1, 0};
	uint64_t asked;
	int64_t left;
	void *rc;

	(void)state;
	for (unsigned i = 0; i < ARRAY_SIZE(pools); i++) {
		ur_begin(pools[i], true);
		assert_int_equal(spoke_start_periodic(ur.s, 1 * SEC, ur_fn, NULL, &ur.id), 0);
		ASSERT_EVENTUALLY(atomic_load(&ur.log.runs) >= 2, "the reset run");
		assert_no_bg_failures();
		assert_left_within(atomic_load(&ur.left), atomic_load(&ur.asked_ns),
				   atomic_load(&ur.log.due[1]),
				   pools[i] ? "pool run" : "inline run");
		assert_int_equal(spoke_cancel_sync(ur.s, ur.id), 0);
		svc_destroy(ur.s);
	}
	/* Another thread's reset, queued to an owner that takes no message meanwhile. */
	ur_begin(0, false);
	assert_int_equal(spoke_attach(ur.s, 0), 0);
	assert_int_equal(spoke_start_periodic(ur.s, 5 * SEC, ur_fn, NULL, &ur.id), 0);
	pthread_join(thread_start(ur_foreign_reset, NULL), &rc);
	assert_int_equal((intptr_t)rc, 0);
	asked = spoke_now_ns();
	left = spoke_remaining(ur.s, ur.id);
	ASSERT_EVENTUALLY((spoke_poll(ur.s), atomic_load(&ur.log.runs) >= 1), "the reset's run");
	assert_left_within(left, asked, atomic_load(&ur.log.due[0]), "foreign reset");
	assert_int_equal(spoke_cancel(ur.s, ur.id), 0);
	assert_int_equal(spoke_detach(ur.s), 0);
	svc_destroy(ur.s);
}

/*
 * A reader asks for the time left on the id of the last periodic timer the
 * owner started, over and over, while the owner (attached) ends each such
 * timer and starts one-shots that take the freed slots. A periodic timer
 * keeps its period in a second slot: a reader holding a stale id may look
 * there after the timer ended, so a slot that was a second slot must never
 * become a timer that an engine links with plain stores (TSan reported that
 * race before second slots were kept apart). Both sides go on until each
 * has done its share, so the reader's calls overlap the owner's reuse
 * however the two threads are scheduled.
 */
#define STALE_ROUNDS   20000
#define STALE_ONESHOTS 4

static struct {
	struct spoke *s;
	_Atomic spoke_id periodic;
	atomic_uint reads, bad;
	atomic_bool done;
} stale;

static void *stale_reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stale.done)) {
		spoke_id id = atomic_load(&stale.periodic);
		int64_t left;

		if (!id)
			continue;
		left = spoke_remaining(stale.s, id);
		/* Live: at most its period (1 h) away; ended: -ENOENT. Nothing else. */
		if (left != -ENOENT && (left < 0 || left > (int64_t)(3600 * SEC)))
			atomic_fetch_add(&stale.bad, 1);
		atomic_fetch_add(&stale.reads, 1);
	}
	return NULL;
}

static void remaining_stale_periodic_reused(void **state)
{
	pthread_t reader;
	spoke_id p, q[STALE_ONESHOTS];

	(void)state;
	stale.s = svc_new(1, 1 * MS, 0);
	atomic_store(&stale.periodic, 0);
	atomic_store(&stale.reads, 0);
	atomic_store(&stale.bad, 0);
	atomic_store(&stale.done, false);
	assert_int_equal(spoke_attach(stale.s, 0), 0);
	assert_int_equal(pthread_create(&reader, NULL, stale_reader, NULL), 0);
	for (unsigned i = 0; i < STALE_ROUNDS || atomic_load(&stale.reads) < STALE_ROUNDS; i++) {
		assert_int_equal(spoke_start_periodic(stale.s, 3600 * SEC, never_fn, NULL, &p), 0);
		atomic_store(&stale.periodic, p);
		assert_int_equal(spoke_cancel(stale.s, p), 0);
		assert_true(spoke_poll(stale.s) >= 0);
		for (unsigned k = 0; k < STALE_ONESHOTS; k++)
			assert_int_equal(
				spoke_start(stale.s, 3600 * SEC + k, never_fn, NULL, &q[k]), 0);
		for (unsigned k = 0; k < STALE_ONESHOTS; k++)
			assert_int_equal(spoke_cancel(stale.s, q[k]), 0);
		assert_true(spoke_poll(stale.s) >= 0);
	}
	atomic_store(&stale.done, true);
	assert_int_equal(pthread_join(reader, NULL), 0);
	assert_int_equal(atomic_load(&stale.bad), 0);
	svc_destroy(stale.s);
}

/* ---- spoke_self --------------------------------------------------------------------- */

static struct {
	struct spoke *s;
	spoke_id expect;
	_Atomic spoke_id seen;
	_Atomic uint64_t due, ran;
	atomic_uint runs;
	atomic_int cancel_rc;
} me;

static void self_fn(void *arg)
{
	uint64_t due = 0;
	spoke_id id = spoke_self(&due);

	(void)arg;
	atomic_store(&me.ran, spoke_now_ns());
	atomic_store(&me.due, due);
	atomic_store(&me.seen, id);
	if (atomic_fetch_add(&me.runs, 1) == 2) /* a periodic timer stops itself on its third run */
		atomic_store(&me.cancel_rc, spoke_cancel(me.s, id));
}

static void self_names_running_timer(void **state)
{
	uint64_t due = 12345, t0;

	(void)state;
	memset(&me, 0, sizeof(me));
	assert_int_equal(spoke_self(&due), 0);
	assert_int_equal(due, 12345);
	for (unsigned threads = 0; threads <= 1; threads++) {
		me.s = svc_new(1, 100 * US, threads);
		atomic_store(&me.runs, 0);
		t0 = spoke_now_ns();
		assert_int_equal(spoke_start(me.s, 2 * MS, self_fn, NULL, &me.expect), 0);
		ASSERT_EVENTUALLY(atomic_load(&me.runs) == 1, "the one-shot's run");
		assert_true(atomic_load(&me.seen) == me.expect);
		assert_true(atomic_load(&me.due) >= t0 + 2 * MS);
		assert_true(atomic_load(&me.ran) >= atomic_load(&me.due));
		/* Periodic: each run is due a period after the last; the third cancels itself. */
		atomic_store(&me.runs, 0);
		atomic_store(&me.cancel_rc, 1);
		assert_int_equal(spoke_start_periodic(me.s, 2 * MS, self_fn, NULL, &me.expect), 0);
		ASSERT_EVENTUALLY(atomic_load(&me.cancel_rc) != 1, "the third periodic run");
		assert_int_equal(atomic_load(&me.cancel_rc), 0);
		assert_true(atomic_load(&me.seen) == me.expect);
		assert_int_equal(spoke_cancel(me.s, me.expect), -ENOENT);
		svc_destroy(me.s);
		assert_int_equal(atomic_load(&me.runs), 3);
	}
}

/* ---- spoke_set_period --------------------------------------------------------------- */

#define SP_RUNS 6

static struct {
	struct spoke *s;
	spoke_id id;
	_Atomic uint64_t at[SP_RUNS];
	atomic_uint runs;
	atomic_int rc;
} sp;

static void set_period_fn(void *arg)
{
	unsigned n = atomic_fetch_add(&sp.runs, 1);
	uint64_t due;

	(void)arg;
	(void)spoke_self(&due);
	if (n < SP_RUNS)
		atomic_store(&sp.at[n], due);
	if (n == 1) /* from the third run on, 40 ms apart */
		atomic_store(&sp.rc, spoke_set_period(sp.s, spoke_self(NULL), 40 * MS));
}

/* Due times b - a apart by a whole number of periods (a run that ends late skips some). */
static void assert_periods_apart(uint64_t a, uint64_t b, uint64_t period)
{
	if (b <= a || (b - a) % period != 0)
		fail_msg("runs due %" PRIu64 " ns apart, not a multiple of %" PRIu64, b - a,
			 period);
}

static void set_period_from_own_callback(void **state)
{
	spoke_id one;

	(void)state;
	memset(&sp, 0, sizeof(sp));
	atomic_store(&sp.rc, 1);
	sp.s = svc_new(1, 100 * US, 1);
	assert_int_equal(spoke_start_periodic(sp.s, 5 * MS, set_period_fn, NULL, &sp.id), 0);
	/* Another thread may not: the runner or the armed timer's owner may. */
	assert_int_equal(spoke_set_period(sp.s, sp.id, 1 * MS), -EPERM);
	assert_int_equal(spoke_set_period(sp.s, sp.id, 0), -EINVAL);
	assert_int_equal(spoke_start(sp.s, 60 * SEC, never_fn, NULL, &one), 0);
	assert_int_equal(spoke_set_period(sp.s, one, 1 * MS), -EINVAL);
	assert_int_equal(spoke_cancel(sp.s, one), 0);
	assert_int_equal(spoke_set_period(sp.s, one, 1 * MS), -ENOENT);
	ASSERT_EVENTUALLY(atomic_load(&sp.runs) >= 4, "four runs");
	assert_int_equal(atomic_load(&sp.rc), 0);
	/* The first runs 5 ms apart; from the one after the change on, 40 ms apart. */
	assert_periods_apart(atomic_load(&sp.at[0]), atomic_load(&sp.at[1]), 5 * MS);
	assert_periods_apart(atomic_load(&sp.at[1]), atomic_load(&sp.at[2]), 40 * MS);
	assert_periods_apart(atomic_load(&sp.at[2]), atomic_load(&sp.at[3]), 40 * MS);
	assert_int_equal(spoke_cancel_sync(sp.s, sp.id), 0);
	svc_destroy(sp.s);
}

static void set_period_from_attached_owner(void **state)
{
	atomic_uint runs = 0;
	uint64_t t0;
	spoke_id id;

	(void)state;
	sp.s = svc_new(1, 100 * US, 0);
	assert_int_equal(spoke_attach(sp.s, 0), 0);
	t0 = spoke_now_ns();
	assert_int_equal(spoke_start_periodic(sp.s, 2 * MS, count_fn, &runs, &id), 0);
	assert_int_equal(spoke_set_period(sp.s, id, 50 * MS), 0);
	/* The first run keeps its deadline (2 ms); the next is 50 ms after it. */
	ASSERT_EVENTUALLY((spoke_poll(sp.s), atomic_load(&runs) == 1), "the first run");
	ASSERT_EVENTUALLY((spoke_poll(sp.s), atomic_load(&runs) == 2), "the second run");
	assert_true(spoke_now_ns() >= t0 + 52 * MS);
	assert_int_equal(spoke_cancel(sp.s, id), 0);
	svc_destroy(sp.s);
}

/* ---- spoke_destroy_release ---------------------------------------------------------- */

#define REL_N 32

static atomic_uint rel_count[4 * REL_N + 1];

static void release_fn(void *arg)
{
	atomic_fetch_add(&rel_count[(uintptr_t)arg], 1);
}

static void rel_never(void *arg)
{
	(void)arg;
}

static struct spoke *rel_s;
static atomic_int rel_running;

/* A periodic run in progress when destroy begins: it ends only once calls say so. */
static void rel_running_fn(void *arg)
{
	uint64_t end = spoke_now_ns() + HOLD_LIMIT_NS;

	(void)arg;
	if (atomic_exchange(&rel_running, 1) != 0)
		return;
	while (spoke_remaining(rel_s, spoke_self(NULL)) != -ESHUTDOWN && spoke_now_ns() < end)
		sleep_ms(1);
}

static void *rel_foreign_main(void *arg)
{
	(void)arg;
	for (uintptr_t i = 3 * REL_N; i < 4 * REL_N; i++)
		BG_CHECK_INT(spoke_start_on(rel_s, 1, 60 * SEC, rel_never, (void *)i, NULL), ==, 0);
	return NULL;
}

static void destroy_release_hands_back_args(void **state)
{
	spoke_id ids[REL_N];
	atomic_uint ran = 0;

	(void)state;
	memset(rel_count, 0, sizeof(rel_count));
	rel_s = svc_new(2, 1 * MS, 1);
	for (uintptr_t i = 0; i < REL_N; i++) {
		assert_int_equal(spoke_start(rel_s, 60 * SEC, rel_never, (void *)i, &ids[i]), 0);
		assert_int_equal(
			spoke_start_periodic(rel_s, 60 * SEC, rel_never, (void *)(REL_N + i), NULL),
			0);
		assert_int_equal(
			spoke_start_ttl(rel_s, 60 * SEC, rel_never, (void *)(2 * REL_N + i), NULL),
			0);
	}
	pthread_join(thread_start(rel_foreign_main, NULL), NULL);
	assert_no_bg_failures();
	/* Cancelled ones and ones that ran are not handed back. */
	for (unsigned i = 0; i < REL_N; i += 2)
		assert_int_equal(spoke_cancel(rel_s, ids[i]), 0);
	assert_int_equal(spoke_start(rel_s, 1 * MS, count_fn, &ran, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&ran) == 1, "the short timer");
	/* The last arg: a periodic timer whose run (on the one worker) spans the start of destroy.
	 */
	atomic_store(&rel_running, 0);
	assert_int_equal(spoke_start_periodic(rel_s, 1 * MS, rel_running_fn,
					      (void *)(uintptr_t)(4 * REL_N), NULL),
			 0);
	ASSERT_EVENTUALLY(atomic_load(&rel_running) == 1, "the periodic run");
	svc_abandon_all();
	spoke_destroy_release(rel_s, release_fn);
	for (unsigned i = 0; i <= 4 * REL_N; i++)
		if (atomic_load(&rel_count[i]) != (i < REL_N && i % 2 == 0 ? 0u : 1u))
			fail_msg("arg %u was handed back %u times", i, atomic_load(&rel_count[i]));
}

/* ---- lateness percentiles ------------------------------------------------------------ */

/*
 * An attached loop that polls 30 ms after its timers were due: every run is
 * at least 29 ms late, so every percentile is; they are in order, and none
 * is above the bucket of the worst.
 */
static void stats_lateness_percentiles(void **state)
{
	struct spoke *s = svc_new(1, 100 * US, 0);
	struct spoke_stats *st = stats_new();
	struct spoke_shard_stats *o = &st->shard[0];
	atomic_uint runs = 0;
	uint64_t t0;

	(void)state;
	assert_int_equal(spoke_attach(s, 0), 0);
	spoke_stats(s, st);
	assert_int_equal(o->late_runs, 0);
	assert_int_equal(o->late_p50_ns, 0);
	for (unsigned i = 0; i < 100; i++)
		assert_int_equal(spoke_start(s, 1 * MS, count_fn, &runs, NULL), 0);
	t0 = spoke_now_ns(); /* after the last start: every deadline is before t0 + 1 ms */
	while (spoke_now_ns() < t0 + 31 * MS)
		sleep_ms(1);
	assert_int_equal(spoke_poll(s), 100);
	spoke_stats(s, st);
	assert_int_equal(o->late_runs, 100);
	assert_int_equal(st->total.late_runs, 100);
	assert_true(o->late_p50_ns >= 29 * MS);
	assert_true(o->late_p50_ns <= o->late_p99_ns && o->late_p99_ns <= o->late_p999_ns);
	assert_true(o->late_p999_ns >= o->max_late_ns);
	assert_true(o->late_p999_ns - o->max_late_ns <= o->max_late_ns / 8);
	assert_true(st->total.late_p99_ns == o->late_p99_ns);
	svc_destroy(s);
	free(st);
}

/*
 * Every run is counted once, whoever records it: a managed shard with no
 * pool (its owner is the histogram's only writer and adds without a locked
 * instruction, lateness.h) and one with a pool of two (atomic adds), each
 * while another thread reads spoke_stats in a loop (under TSan: the plain
 * adds race with no reader). Once every callback has run, late_runs and
 * fired are the number of timers, and the worst lateness lies in or above
 * the p99.9 bucket.
 */
#define LATE_N 3000

static atomic_bool late_reading;

static void *late_reader(void *arg)
{
	struct spoke_stats *st = stats_new();

	while (atomic_load(&late_reading))
		spoke_stats(arg, st);
	free(st);
	return NULL;
}

static void stats_lateness_counts_every_run(void **state)
{
	(void)state;
	for (unsigned callbacks = 0; callbacks <= 2; callbacks += 2) {
		struct spoke *s = svc_new(1, 1 * MS, callbacks);
		struct spoke_stats *st = stats_new();
		struct spoke_shard_stats *o = &st->shard[0];
		atomic_uint runs = 0;
		pthread_t reader;

		atomic_store(&late_reading, true);
		reader = thread_start(late_reader, s);
		for (unsigned i = 0; i < LATE_N; i++)
			assert_int_equal(spoke_start(s, 2 * MS, count_fn, &runs, NULL), 0);
		ASSERT_EVENTUALLY(atomic_load(&runs) == LATE_N, "every callback to run");
		atomic_store(&late_reading, false);
		pthread_join(reader, NULL);
		/* Counted before the callback ran. */
		spoke_stats(s, st);
		assert_int_equal(o->late_runs, LATE_N);
		assert_int_equal(o->fired, LATE_N);
		assert_true(o->late_p50_ns <= o->late_p99_ns && o->late_p99_ns <= o->late_p999_ns);
		/* A bucket is at most 1/8 of its bottom wide: the worst is at least that bottom. */
		assert_true(o->max_late_ns + o->max_late_ns / 8 >= o->late_p999_ns);
		svc_destroy(s);
		free(st);
	}
}

/* ---- spoke_dump ----------------------------------------------------------------------- */

/* Not static, and the program is linked with -rdynamic: the dump names it. */
void spoke_test_dump_marker(void *arg);
void spoke_test_dump_marker(void *arg)
{
	(void)arg;
}

static unsigned count_lines(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void dump_lists_earliest(void **state)
{
	struct spoke *s = svc_new(2, 1 * MS, 1);
	char *text = NULL;
	size_t len = 0;
	spoke_id first;
	char idtxt[40];
	FILE *f;

	(void)state;
	for (unsigned k = 0; k < 2; k++)
		for (unsigned i = 0; i < 6; i++)
			assert_int_equal(spoke_start_on(s, k, (60 + i + 10 * k) * SEC,
							spoke_test_dump_marker, NULL,
							k == 0 && i == 0 ? &first : NULL),
					 0);
	assert_int_equal(spoke_start_periodic(s, 3600 * SEC, spoke_test_dump_marker, NULL, NULL),
			 0);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(spoke_dump(s, f, 3), 0);
	fclose(f);
	assert_true(strstr(text, "shard 0:") && strstr(text, "shard 1:"));
	/* Three per shard, each named. */
	assert_int_equal(count_lines(text, "\n  in "), 6);
	assert_int_equal(count_lines(text, "spoke_test_dump_marker+0x0"), 6);
	/* The earliest of shard 0 comes first, with its id. */
	snprintf(idtxt, sizeof(idtxt), "id %#" PRIx64 " ", first);
	assert_non_null(strstr(text, idtxt));
	assert_true(strstr(text, idtxt) < strstr(text, "shard 1:"));
	assert_true(strstr(strstr(text, "shard 0:"), "\n  in 59.") == strstr(text, "\n  in "));
	free(text);
	assert_int_equal(spoke_dump(s, NULL, 3), -EINVAL);
	assert_int_equal(spoke_dump(NULL, stderr, 3), -EINVAL);
	svc_destroy(s);
}

/* ---- thread names ------------------------------------------------------------------- */

/* How many of this process's threads are named `name` (/proc/self/task/N/comm). */
static unsigned threads_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* the thread has just exited */
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		n += strcmp(comm, name) == 0;
	}
	closedir(d);
	return n;
}

static void threads_carry_their_names(void **state)
{
	static const char *const names[] = {"spoke-shard-0", "spoke-shard-1", "spoke-pool-0",
					    "spoke-pool-1", "spoke-pool-2"};
	struct spoke *s = svc_new(2, 1 * MS, 3);

	(void)state;
	for (unsigned i = 0; i < ARRAY_SIZE(names); i++)
		ASSERT_EVENTUALLY(threads_named(names[i]) == 1, names[i]);
	/* A managed thread spoke_detach starts is named like the one it replaces. */
	assert_int_equal(spoke_attach(s, 1), 0);
	assert_int_equal(threads_named("spoke-shard-1"), 0);
	assert_int_equal(spoke_detach(s), 0);
	ASSERT_EVENTUALLY(threads_named("spoke-shard-1") == 1, "the new shard thread's name");
	svc_destroy(s);
}

/* ---- pools per shard ------------------------------------------------------------------- */

static atomic_int steal_b_ran;
static atomic_int steal_a_saw_b;

/* A: waits (bounded) for B, a later timer of its own shard, holding its worker. */
static void steal_a_fn(void *arg)
{
	uint64_t end = mono_ns() + HOLD_LIMIT_NS;

	(void)arg;
	while (!atomic_load(&steal_b_ran) && mono_ns() < end)
		sleep_ns(100 * US);
	atomic_store(&steal_a_saw_b, atomic_load(&steal_b_ran));
}

static void steal_b_fn(void *arg)
{
	(void)arg;
	atomic_store(&steal_b_ran, 1);
}

/* Shard 0's one worker held by A: B (shard 0) must run on shard 1's idle worker. */
static void held_shard_runs_on_neighbour(unsigned callback_threads, unsigned per_shard)
{
	struct spoke_config c;
	struct spoke *s;
	spoke_id a, b;

	svc_config(&c, 2, 1 * MS, callback_threads);
	c.callback_threads_per_shard = per_shard;
	s = svc_create_cfg(&c);
	atomic_store(&steal_b_ran, 0);
	atomic_store(&steal_a_saw_b, 0);
	assert_int_equal(spoke_start_on(s, 0, 1 * MS, steal_a_fn, NULL, &a), 0);
	sleep_ns(20 * MS);
	assert_int_equal(spoke_start_on(s, 0, 5 * MS, steal_b_fn, NULL, &b), 0);
	ASSERT_EVENTUALLY(stats_total(s).fired == 2 && atomic_load(&steal_b_ran), "A and B fired");
	svc_destroy(s);
	assert_true(atomic_load(&steal_a_saw_b));
}

static void pool_per_shard_spread_and_steal(void **state)
{
	static const char *const names[] = {"spoke-pool-0", "spoke-pool-1", "spoke-pool-2",
					    "spoke-pool-3"};
	struct spoke_config c;
	struct spoke *s;
	unsigned fired = 0;

	(void)state;
	/* Two per shard: 4 workers (callback_threads, 1, is superseded). */
	svc_config(&c, 2, 1 * MS, 1);
	c.callback_threads_per_shard = 2;
	s = svc_create_cfg(&c);
	for (unsigned i = 0; i < ARRAY_SIZE(names); i++)
		ASSERT_EVENTUALLY(threads_named(names[i]) == 1, names[i]);
	assert_int_equal(threads_named("spoke-pool-4"), 0);
	for (unsigned i = 0; i < 64; i++) {
		spoke_id id;

		assert_int_equal(spoke_start_on(s, i % 2, (1 + i % 5) * MS, steal_b_fn, NULL, &id),
				 0);
	}
	ASSERT_EVENTUALLY((fired = stats_total(s).fired) == 64, "every callback fired");
	svc_destroy(s);
	/* One worker per shard, per shard and dealt round-robin (2 of 2; 3 of 2). */
	held_shard_runs_on_neighbour(2, 1);
	held_shard_runs_on_neighbour(2, 0);
	held_shard_runs_on_neighbour(3, 0);
}

/* ---- spare workers ---------------------------------------------------------------- */

/* A chain: link i's callback waits until link i+1's (a later timer) has returned. */
struct chain_link {
	atomic_int ran, saw_next, done;
	atomic_int *release; /* non-NULL: also wait for this, not bounded */
	struct chain_link *next;
};

static void chain_fn(void *arg)
{
	struct chain_link *l = arg;

	atomic_store(&l->ran, 1);
	if (l->release)
		while (!atomic_load(l->release))
			sleep_ns(100 * US);
	if (l->next)
		atomic_store(&l->saw_next, WAIT_UNTIL(atomic_load(&l->next->done), HOLD_LIMIT_NS));
	atomic_store(&l->done, 1);
}

/*
 * One worker, three callbacks of one shard each waiting until the next,
 * later one has returned: with a fixed pool the first would hold the only
 * worker until it gave up. The pool adds a spare for each blocked one (two),
 * every link sees the next, and the spares leave once idle.
 */
static void pool_adds_spares_for_blocked_callbacks(void **state)
{
	struct chain_link l[3] = {{.next = &l[1]}, {.next = &l[2]}, {0}};
	struct chain_link again[2] = {{.next = &again[1]}, {0}};
	struct spoke_config c;
	struct spoke_stats st;
	struct spoke *s;

	(void)state;
	svc_config(&c, 1, 1 * MS, 1);
	c.callback_spares = 2; /* the two the chain needs */
	s = svc_create_cfg(&c);
	for (unsigned i = 0; i < ARRAY_SIZE(l); i++)
		assert_int_equal(spoke_start(s, (1 + 5 * i) * MS, chain_fn, &l[i], NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&l[0].done) && atomic_load(&l[1].done), "the chain to end");
	assert_true(atomic_load(&l[0].saw_next) && atomic_load(&l[1].saw_next));
	spoke_stats(s, &st);
	assert_true(st.spares_started >= 2);
	assert_true(st.spares <= c.callback_spares);
	ASSERT_EVENTUALLY((spoke_stats(s, &st), st.spares == 0), "the spares to leave once idle");
	ASSERT_EVENTUALLY(threads_named("spoke-spare-0") + threads_named("spoke-spare-1") == 0,
			  "spare threads to exit");
	/* A slot a spare left is used again. */
	assert_int_equal(spoke_start(s, 1 * MS, chain_fn, &again[0], NULL), 0);
	assert_int_equal(spoke_start(s, 6 * MS, chain_fn, &again[1], NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&again[0].saw_next),
			  "a blocked callback to see the next again");
	spoke_stats(s, &st);
	assert_true(st.spares_started >= 3);
	svc_destroy(s);
}

/*
 * callback_spares 0, or rescue_after_ns 0: the pool stays at its size. The
 * later timer cannot run while the only worker is held, however long the
 * test looks (the check is of an absence the fixed pool guarantees); it
 * runs once the worker is let go.
 */
static void pool_stays_fixed(uint64_t rescue_after_ns, unsigned spares)
{
	atomic_int release = 0;
	struct chain_link l[2] = {{.release = &release}, {0}};
	struct spoke_config c;
	struct spoke_stats st;
	struct spoke *s;
	int later_ran;

	svc_config(&c, 1, 1 * MS, 1);
	c.rescue_after_ns = rescue_after_ns;
	c.callback_spares = spares;
	s = svc_create_cfg(&c);
	assert_int_equal(spoke_start(s, 1 * MS, chain_fn, &l[0], NULL), 0);
	assert_int_equal(spoke_start(s, 2 * MS, chain_fn, &l[1], NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&l[0].ran), "the holding callback to start");
	sleep_ns(50 * MS); /* five times the default rescue_after_ns */
	spoke_stats(s, &st);
	later_ran = atomic_load(&l[1].ran);
	atomic_store(&release, 1); /* before any check: a failed one must not leave it held */
	assert_int_equal(st.spares_started, 0);
	assert_int_equal(later_ran, 0);
	ASSERT_EVENTUALLY(atomic_load(&l[1].ran), "the later timer once the worker is free");
	svc_destroy(s);
	assert_int_equal(threads_named("spoke-spare-0"), 0);
}

static void pool_without_spares_stays_fixed(void **state)
{
	(void)state;
	pool_stays_fixed(10 * MS, 0);
	pool_stays_fixed(0, 16);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest all[] = {
		SVC_TEST(start_at_never_early),
		SVC_TEST(start_at_past_runs_next_tick),
		SVC_TEST(remaining_counts_down),
		SVC_TEST(remaining_stale_periodic_reused),
		SVC_TEST(remaining_sees_unapplied_reset),
		SVC_TEST(self_names_running_timer),
		SVC_TEST(set_period_from_own_callback),
		SVC_TEST(set_period_from_attached_owner),
		SVC_TEST(stats_lateness_percentiles),
		SVC_TEST(stats_lateness_counts_every_run),
		SVC_TEST(dump_lists_earliest),
		SVC_TEST(threads_carry_their_names),
		SVC_TEST(destroy_release_hands_back_args),
		SVC_TEST(pool_per_shard_spread_and_steal),
		SVC_TEST(pool_adds_spares_for_blocked_callbacks),
		SVC_TEST(pool_without_spares_stays_fixed),
	};

	return svc_main(argc, argv, "calls", all, ARRAY_SIZE(all));
}
