/* SPDX-License-Identifier: MIT */
/*
 * test_service_contract.c - DESIGN.md §4 contract lines 1-6 of the timer
 * service (include/spoke/spoke.h), one or more tests per line, each with
 * several threads on short ticks:
 *
 *   line1_exactly_once_many_threads          1  exactly once
 *   line2_never_early_many_threads           2  never early
 *   line3_cancel_verdicts                    3  0 / -ENOENT semantics
 *   line3_cancel_one_winner_many_threads     3  any thread, one winner
 *   line3_cancel_at_once_while_owner_busy    3  decides without the owner
 *   line4_cancel_sync_waits_for_running      4  waits for a running callback
 *   line4_cancel_sync_own_callback_edeadlk   4  -EDEADLK from its own callback
 *   line5_reset_idle_timeout                 5  reset moves the deadline
 *   line5_reset_ttl_timer                    5  reset of a Lawn TTL timer
 *   line5_reset_periodic                     5  reset of a periodic timer
 *   line5_periodic_no_overlap_never_early    5  (+ pitfall) pool, no overlap, k*period
 *   line5_periodic_cancel_from_own_callback  5  (+ pitfall) cancel stops further runs
 *   line5_periodic_no_drift_skip_missed      5  (+ pitfall) attached: phase, skip
 *   line6_stale_id_after_cancel              6  generations under slot reuse
 *   line6_stale_id_after_fire                6
 *   line6_stale_ids_many_threads             6  (+ pitfall) stale ids vs new timers
 *
 * Usage: test_service_contract [test name...]   (no name: all)
 */
#include "service_util.h"

/* ==== line 1: exactly once ===================================================== */

#define L1_STARTERS   6
#define L1_CANCELLERS 2

struct l1_ctx {
	struct spoke *s;
	unsigned nsh, per;
	struct trec *rec; /* L1_STARTERS * per */
	atomic_uint starters_done;
	atomic_uint bad_rc;
};

static struct l1_ctx l1;

static int l1_cancel(struct spoke *s, struct trec *r, bool sync)
{
	uint64_t id = atomic_load(&r->id);
	int rc;

	if (!id)
		return -ENOENT;
	rc = sync ? spoke_cancel_sync(s, id) : spoke_cancel(s, id);
	if (rc == 0)
		atomic_fetch_add(&r->cancelled, 1);
	else
		BG_CHECK_INT(rc, ==, -ENOENT);
	return rc;
}

static void l1_worker(unsigned idx, void *p)
{
	struct l1_ctx *c = p;
	struct rng rng = { 0x1000 + idx };

	if (idx >= L1_STARTERS) {
		/* Canceller: races cancels of everyone's timers with their start and expiry. */
		unsigned total = L1_STARTERS * c->per;

		while (atomic_load(&c->starters_done) < L1_STARTERS) {
			l1_cancel(c->s, &c->rec[rng_below(&rng, total)], rng_below(&rng, 4) == 0);
			if (rng_below(&rng, 64) == 0)
				sched_yield();
		}
		return;
	}
	for (unsigned j = 0; j < c->per; j++) {
		struct trec *r = &c->rec[idx * c->per + j];
		uint64_t delay = rng_below(&rng, 3 * MS + 1), t;
		spoke_id id = 0;
		int rc;

		t = spoke_now_ns();
		switch (rng_below(&rng, 4)) {
		case 0:
			atomic_store(&r->earliest, t + delay);
			rc = spoke_start(c->s, delay, trec_fire, r, &id);
			break;
		case 1:
			atomic_store(&r->earliest, t + delay);
			rc = spoke_start_on(c->s, (unsigned)rng_below(&rng, c->nsh), delay, trec_fire,
					    r, &id);
			break;
		case 2:
			delay = (1 + rng_below(&rng, 3)) * 700 * US; /* a few distinct TTLs */
			atomic_store(&r->earliest, t + delay);
			rc = spoke_start_ttl(c->s, delay, trec_fire, r, &id);
			break;
		default:
			/* An hour, then reset to `delay` before anyone else knows the id. */
			atomic_store(&r->earliest, t + 3600 * SEC);
			rc = spoke_start(c->s, 3600 * SEC, trec_fire, r, &id);
			if (rc == 0) {
				t = spoke_now_ns();
				atomic_store(&r->earliest, t + delay);
				BG_CHECK_INT(spoke_reset(c->s, id, delay), ==, 0);
			}
			break;
		}
		if (rc != 0 || id == 0) {
			atomic_fetch_add(&c->bad_rc, 1);
			continue;
		}
		atomic_store(&r->id, id);
		switch (rng_below(&rng, 3)) {
		case 0: /* cancel at once: usually overtakes the start at the owner */
			l1_cancel(c->s, r, rng_below(&rng, 2) == 0);
			break;
		case 1: /* cancel one of our earlier timers: fired, pending or cancelled */
			l1_cancel(c->s, &c->rec[idx * c->per + rng_below(&rng, j + 1)],
				  rng_below(&rng, 3) == 0);
			break;
		default:
			break;
		}
	}
	atomic_fetch_add(&c->starters_done, 1);
}

static bool l1_all_ended(struct l1_ctx *c, unsigned total)
{
	for (unsigned i = 0; i < total; i++)
		if (atomic_load(&c->rec[i].fired) + atomic_load(&c->rec[i].cancelled) == 0)
			return false;
	return true;
}

/*
 * Contract line 1 (exactly once): 6 threads start one-shot timers of every
 * kind (start, start_on, start_ttl, start + reset) with delays of 0-3 ms and
 * cancel some at once, some later; 2 more threads cancel random timers
 * (cancel and cancel_sync) all the while. Per timer (a token passed as arg)
 * callbacks + winning cancels == 1, and the stats count the same: started ==
 * all, fired == callbacks, cancelled == winning cancels, pending 0.
 */
static void line1_exactly_once_many_threads(void **state)
{
	(void)state;
	unsigned total, fired = 0, cancelled = 0;

	memset(&l1, 0, sizeof(l1));
	trec_reset_globals();
	l1.per = SCALE(3000);
	total = L1_STARTERS * l1.per;
	l1.rec = calloc(total, sizeof(*l1.rec));
	assert_non_null(l1.rec);
	l1.s = svc_new(4, 200 * US, 2);
	l1.nsh = spoke_shards(l1.s);
	assert_int_equal(l1.nsh, 4);

	run_workers(L1_STARTERS + L1_CANCELLERS, l1_worker, &l1);
	assert_int_equal(atomic_load(&l1.bad_rc), 0);
	ASSERT_EVENTUALLY(l1_all_ended(&l1, total), "every timer to fire or be cancelled");
	sleep_ms(20); /* room for a second (wrong) run */
	for (unsigned i = 0; i < total; i++) {
		unsigned f = atomic_load(&l1.rec[i].fired), k = atomic_load(&l1.rec[i].cancelled);

		if (f + k != 1)
			fail_msg("timer %u: %u callback run(s) and %u winning cancel(s)", i, f, k);
		fired += f;
		cancelled += k;
	}
	assert_no_bg_failures();
	assert_never_early();
	ASSERT_EVENTUALLY(stats_settled(l1.s, total, 0), "the stats to settle");
	assert_stats_settled(l1.s, total, 0);
	{
		struct spoke_stats *st = stats_new();

		spoke_stats(l1.s, st);
		assert_int_equal(st->total.fired, fired);
		assert_int_equal(st->total.cancelled, cancelled);
		free(st);
	}
	svc_destroy(l1.s);
	free(l1.rec);
}

/* ==== line 2: never early ======================================================== */

#define L2_THREADS 6
#define L2_PERIODIC 4

struct l2_periodic {
	uint64_t t0, period;
	atomic_uint runs;
	spoke_id id;
};

struct l2_ctx {
	struct spoke *s;
	unsigned nsh, per;
	uint64_t tick;
	struct trec *rec;
	atomic_uint bad_rc;
	struct l2_periodic per_t[L2_PERIODIC];
};

static struct l2_ctx l2;

static void l2_periodic_fn(void *arg)
{
	struct l2_periodic *p = arg;
	unsigned k = atomic_fetch_add(&p->runs, 1) + 1;
	uint64_t now = spoke_now_ns();

	/* run k is due at t0 + k * period at the earliest (skipped periods only push it later) */
	BG_CHECK_U64(now, >=, p->t0 + k * p->period);
}

static void l2_worker(unsigned idx, void *p)
{
	struct l2_ctx *c = p;
	struct rng rng = { 0x2000 + idx };

	for (unsigned j = 0; j < c->per; j++) {
		struct trec *r = &c->rec[idx * c->per + j];
		uint64_t delay, t;
		spoke_id id = 0;
		int rc;

		switch (rng_below(&rng, 5)) { /* delays on, next to and between tick boundaries */
		case 0:
			delay = 0;
			break;
		case 1:
			delay = (1 + rng_below(&rng, 8)) * c->tick;
			break;
		case 2:
			delay = (1 + rng_below(&rng, 8)) * c->tick + (rng_below(&rng, 2) ? 1 : -1ull);
			break;
		default:
			delay = rng_below(&rng, 4 * MS);
			break;
		}
		t = spoke_now_ns();
		switch (rng_below(&rng, 4)) {
		case 0:
			atomic_store(&r->earliest, t + delay);
			rc = spoke_start(c->s, delay, trec_fire, r, &id);
			break;
		case 1:
			atomic_store(&r->earliest, t + delay);
			rc = spoke_start_on(c->s, (unsigned)rng_below(&rng, c->nsh), delay, trec_fire,
					    r, &id);
			break;
		case 2:
			atomic_store(&r->earliest, t + delay);
			rc = spoke_start_ttl(c->s, delay, trec_fire, r, &id);
			break;
		default:
			atomic_store(&r->earliest, t + 3600 * SEC);
			rc = spoke_start(c->s, 3600 * SEC, trec_fire, r, &id);
			if (rc == 0) {
				t = spoke_now_ns();
				atomic_store(&r->earliest, t + delay);
				BG_CHECK_INT(spoke_reset(c->s, id, delay), ==, 0);
			}
			break;
		}
		if (rc != 0)
			atomic_fetch_add(&c->bad_rc, 1);
		if (rng_below(&rng, 16) == 0)
			sleep_ns(rng_below(&rng, 300 * US));
	}
}

static bool l2_all_fired(struct l2_ctx *c, unsigned total)
{
	for (unsigned i = 0; i < total; i++)
		if (atomic_load(&c->rec[i].fired) == 0)
			return false;
	return true;
}

/*
 * Contract line 2 (never early): with the pool and inline, 6 threads start
 * one-shot timers (start, start_on, start_ttl, start + reset) with delays
 * of 0, exact tick multiples, one ns either side of them and random ns;
 * each callback compares spoke_now_ns() with the time read before the call
 * plus the delay. Periodic timers with periods below, at and above the tick
 * check run k against start + k * period. Each one-shot runs exactly once.
 */
static void line2_never_early_many_threads(void **state)
{
	(void)state;
	static const uint64_t periods[L2_PERIODIC] = { 700 * US, 250 * US, 1300 * US, 2 * MS };
	static const unsigned pools[] = { 0, 3 };

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		unsigned total;

		memset(&l2, 0, sizeof(l2));
		trec_reset_globals();
		l2.per = SCALE(1500);
		l2.tick = 250 * US;
		total = L2_THREADS * l2.per;
		l2.rec = calloc(total, sizeof(*l2.rec));
		assert_non_null(l2.rec);
		l2.s = svc_new(3, l2.tick, pools[v]);
		l2.nsh = spoke_shards(l2.s);
		for (unsigned i = 0; i < L2_PERIODIC; i++) {
			l2.per_t[i].period = periods[i];
			l2.per_t[i].t0 = spoke_now_ns();
			assert_int_equal(spoke_start_periodic(l2.s, periods[i], l2_periodic_fn,
							      &l2.per_t[i], &l2.per_t[i].id),
					 0);
		}
		run_workers(L2_THREADS, l2_worker, &l2);
		assert_int_equal(atomic_load(&l2.bad_rc), 0);
		ASSERT_EVENTUALLY(l2_all_fired(&l2, total), "every timer to fire");
		for (unsigned i = 0; i < L2_PERIODIC; i++) {
			ASSERT_EVENTUALLY(atomic_load(&l2.per_t[i].runs) >= 3, "periodic runs");
			assert_int_equal(spoke_cancel_sync(l2.s, l2.per_t[i].id), 0);
		}
		sleep_ms(10);
		for (unsigned i = 0; i < total; i++)
			if (atomic_load(&l2.rec[i].fired) != 1)
				fail_msg("timer %u ran %u times", i, atomic_load(&l2.rec[i].fired));
		assert_no_bg_failures();
		assert_never_early();
		svc_destroy(l2.s);
		free(l2.rec);
	}
}

/* ==== line 3: cancel decides at once ============================================== */

struct blocker {
	atomic_int blocking, release, done;
	_Atomic uint64_t thread_marker;
};

/* Blocks the thread it runs on (the shard thread when inline) until released or 10 s. */
static void blocker_fn(void *arg)
{
	struct blocker *b = arg;
	uint64_t end = spoke_now_ns() + 10 * SEC;

	atomic_store(&b->blocking, 1);
	while (!atomic_load(&b->release) && spoke_now_ns() < end)
		sleep_ns(200 * US);
	atomic_store(&b->blocking, 0);
	atomic_store(&b->done, 1);
}

/*
 * Contract line 3 (cancel verdicts), one thread at a time: 0 when the call
 * prevented the run; -ENOENT for a second cancel, after cancel_sync, after
 * the callback ran, while it runs, for id 0 and for garbage ids (with and
 * without live timers, which garbage ids leave alone); a periodic cancel
 * gives 0 once. reset and cancel_sync agree. The stats count the winners.
 */
static struct trec l3_rec[128];
static struct blocker l3_blk;

static void line3_cancel_verdicts(void **state)
{
	(void)state;
	struct spoke *s = svc_new(2, 500 * US, 2);
	struct rng rng = { 0x3000 };
	static const uint64_t garbage[] = { 1, 2, 3, 0xff, 0x100, 0xffffffffull, 1ull << 32,
					     (1ull << 32) + 1, 1ull << 63, UINT64_MAX,
					     UINT64_MAX - 1, 0x5555555555555555ull };
	spoke_id a, b, c, d, p, live[100];
	unsigned wins = 0;
	atomic_uint pruns = 0;

	memset(l3_rec, 0, sizeof(l3_rec));
	memset(&l3_blk, 0, sizeof(l3_blk));
	atomic_store(&never_ran, 0);

	/* never existed: nothing at all started yet */
	assert_int_equal(spoke_cancel(s, 0), -ENOENT);
	assert_int_equal(spoke_cancel_sync(s, 0), -ENOENT);
	assert_int_equal(spoke_reset(s, 0, MS), -ENOENT);
	for (unsigned i = 0; i < ARRAY_SIZE(garbage); i++) {
		assert_int_equal(spoke_cancel(s, garbage[i]), -ENOENT);
		assert_int_equal(spoke_cancel_sync(s, garbage[i]), -ENOENT);
		assert_int_equal(spoke_reset(s, garbage[i], MS), -ENOENT);
	}
	for (unsigned i = 0; i < 1000; i++) {
		uint64_t g = rng_next(&rng);

		assert_int_equal(spoke_cancel(s, g), -ENOENT);
		assert_int_equal(spoke_reset(s, g, MS), -ENOENT);
	}

	/* pending: the first cancel wins, everything after it finds nothing */
	assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &a), 0);
	assert_true(a != 0);
	assert_int_equal(spoke_cancel(s, a), 0);
	wins++;
	assert_int_equal(spoke_cancel(s, a), -ENOENT);
	assert_int_equal(spoke_cancel_sync(s, a), -ENOENT);
	assert_int_equal(spoke_reset(s, a, MS), -ENOENT);

	assert_int_equal(spoke_start_on(s, 1, 3600 * SEC, never_fn, NULL, &b), 0);
	assert_int_equal(spoke_cancel_sync(s, b), 0);
	wins++;
	assert_int_equal(spoke_cancel(s, b), -ENOENT);
	assert_int_equal(spoke_cancel_sync(s, b), -ENOENT);

	/* fired: nothing left to prevent */
	assert_int_equal(spoke_start(s, 1 * MS, trec_fire, &l3_rec[0], &c), 0);
	ASSERT_EVENTUALLY(atomic_load(&l3_rec[0].fired) == 1, "a 1 ms timer to fire");
	assert_int_equal(spoke_cancel(s, c), -ENOENT);
	assert_int_equal(spoke_cancel_sync(s, c), -ENOENT);
	assert_int_equal(spoke_reset(s, c, MS), -ENOENT);

	/* running (one-shot): nothing left to prevent */
	assert_int_equal(spoke_start(s, 0, blocker_fn, &l3_blk, &d), 0);
	ASSERT_EVENTUALLY(atomic_load(&l3_blk.blocking) == 1, "the callback to run");
	assert_int_equal(spoke_cancel(s, d), -ENOENT);
	assert_int_equal(spoke_reset(s, d, MS), -ENOENT);
	atomic_store(&l3_blk.release, 1);
	ASSERT_EVENTUALLY(atomic_load(&l3_blk.done) == 1, "the callback to return");

	/* garbage ids among live timers touch none of them */
	for (unsigned i = 0; i < ARRAY_SIZE(live); i++)
		assert_int_equal(spoke_start_on(s, i % 2, 3600 * SEC, never_fn, NULL, &live[i]), 0);
	for (unsigned i = 0; i < 20000; i++) {
		uint64_t g = i < 10000 ? rng_next(&rng) : (rng_next(&rng) & 0xffffff);
		bool is_live = g == 0;

		for (unsigned j = 0; j < ARRAY_SIZE(live); j++)
			is_live |= g == live[j];
		if (is_live)
			continue;
		assert_int_equal(i % 2 ? spoke_cancel(s, g) : spoke_reset(s, g, MS), -ENOENT);
	}
	for (unsigned i = 0; i < ARRAY_SIZE(live); i++) {
		assert_int_equal(spoke_cancel(s, live[i]), 0);
		wins++;
	}

	/* periodic: one winning cancel */
	assert_int_equal(spoke_start_periodic(s, 1 * MS, count_fn, &pruns, &p), 0);
	ASSERT_EVENTUALLY(atomic_load(&pruns) >= 2, "periodic runs");
	assert_int_equal(spoke_cancel(s, p), 0);
	wins++;
	assert_int_equal(spoke_cancel(s, p), -ENOENT);
	assert_int_equal(spoke_cancel_sync(s, p), -ENOENT);
	assert_int_equal(spoke_reset(s, p, MS), -ENOENT);

	sleep_ms(10);
	assert_int_equal(atomic_load(&never_ran), 0);
	{
		struct spoke_stats *st = stats_new();

		ASSERT_EVENTUALLY((spoke_stats(s, st), st->total.pending == 0), "pending 0");
		assert_int_equal(st->total.cancelled, wins);
		free(st);
	}
	svc_destroy(s);
}

#define L3_THREADS 8

struct l3m_ctx {
	struct spoke *s;
	unsigned n;
	spoke_id *ids;
	atomic_uint *wins;
};

static struct l3m_ctx l3m;

static void l3m_worker(unsigned idx, void *p)
{
	struct l3m_ctx *c = p;
	struct rng rng = { 0x3100 + idx };
	unsigned start = (unsigned)rng_below(&rng, c->n);

	/* every thread cancels every timer, each from a different starting point */
	for (unsigned k = 0; k < c->n; k++) {
		unsigned i = (start + k * (idx % 2 ? 1 : c->n - 1)) % c->n;
		int rc = rng_below(&rng, 3) == 0 ? spoke_cancel_sync(c->s, c->ids[i])
						 : spoke_cancel(c->s, c->ids[i]);

		if (rc == 0)
			atomic_fetch_add(&c->wins[i], 1);
		else
			BG_CHECK_INT(rc, ==, -ENOENT);
	}
}

/*
 * Contract line 3 (from any thread): 8 threads cancel the same pending
 * timers (spread over 3 shards) at once; each timer has exactly one winner,
 * none of them runs, and pending drops to 0 (the slots are unlinked).
 */
static void line3_cancel_one_winner_many_threads(void **state)
{
	(void)state;
	struct spoke *s = svc_new(3, 500 * US, 1);

	memset(&l3m, 0, sizeof(l3m));
	atomic_store(&never_ran, 0);
	l3m.s = s;
	l3m.n = SCALE(4000);
	l3m.ids = calloc(l3m.n, sizeof(*l3m.ids));
	l3m.wins = calloc(l3m.n, sizeof(*l3m.wins));
	assert_non_null(l3m.ids);
	assert_non_null(l3m.wins);
	for (unsigned i = 0; i < l3m.n; i++)
		assert_int_equal(spoke_start_on(s, i % 3, 3600 * SEC, never_fn, NULL, &l3m.ids[i]),
				 0);
	run_workers(L3_THREADS, l3m_worker, &l3m);
	for (unsigned i = 0; i < l3m.n; i++)
		if (atomic_load(&l3m.wins[i]) != 1)
			fail_msg("timer %u: %u winning cancels", i, atomic_load(&l3m.wins[i]));
	assert_no_bg_failures();
	ASSERT_EVENTUALLY(stats_settled(s, l3m.n, 0), "pending to drop to 0");
	assert_stats_settled(s, l3m.n, 0);
	assert_int_equal(atomic_load(&never_ran), 0);
	svc_destroy(s);
	free(l3m.ids);
	free(l3m.wins);
}

#define L3B_THREADS 4
#define L3B_NEW     50

struct l3b_ctx {
	struct spoke *s;
	unsigned n;
	spoke_id *ids;
	struct blocker blk;
	struct trec fresh[L3B_THREADS][L3B_NEW];
	struct trec kept[L3B_THREADS];
};

static struct l3b_ctx l3b;

static void l3b_worker(unsigned idx, void *p)
{
	struct l3b_ctx *c = p;

	/* timers already in the owner's wheel */
	for (unsigned i = idx; i < c->n; i += L3B_THREADS)
		BG_CHECK_INT(spoke_cancel(c->s, c->ids[i]), ==, 0);
	/* timers whose start the owner has not even seen */
	for (unsigned j = 0; j < L3B_NEW; j++) {
		struct trec *r = &c->fresh[idx][j];
		spoke_id id;

		BG_CHECK_INT(spoke_start_on(c->s, 0, j % 2 ? 0 : MS, trec_fire, r, &id), ==, 0);
		BG_CHECK_INT(spoke_reset(c->s, id, 2 * MS), ==, 0);
		BG_CHECK_INT(j % 3 ? spoke_cancel(c->s, id) : spoke_cancel_sync(c->s, id), ==, 0);
		BG_CHECK_INT(spoke_cancel(c->s, id), ==, -ENOENT);
	}
	{
		spoke_id id;

		BG_CHECK_INT(spoke_start_on(c->s, 0, 0, trec_fire, &c->kept[idx], &id), ==, 0);
	}
	/* all of it decided while the owner is still stuck in a callback */
	BG_CHECK_INT(atomic_load(&c->blk.blocking), ==, 1);
}

/*
 * Contract line 3 (at once, without waiting for the owner shard): shard 0
 * (callbacks inline) is stuck in a callback; 4 threads cancel timers that
 * sit in its wheel, and start, reset and cancel new ones on it; every
 * verdict (0, then -ENOENT) comes back while the owner is still stuck. Once
 * it is released, nothing cancelled runs, the uncancelled run once, and the
 * stats add up.
 */
static void line3_cancel_at_once_while_owner_busy(void **state)
{
	(void)state;
	struct spoke *s = svc_new(2, 500 * US, 0);
	struct spoke_stats *st = stats_new();

	memset(&l3b, 0, sizeof(l3b));
	atomic_store(&never_ran, 0);
	trec_reset_globals();
	l3b.s = s;
	l3b.n = 200;
	l3b.ids = calloc(l3b.n, sizeof(*l3b.ids));
	assert_non_null(l3b.ids);
	for (unsigned i = 0; i < l3b.n; i++)
		assert_int_equal(spoke_start_on(s, 0, 3600 * SEC, never_fn, NULL, &l3b.ids[i]), 0);
	ASSERT_EVENTUALLY((spoke_stats(s, st), st->shard[0].pending == l3b.n),
			  "the owner to take the timers");
	assert_int_equal(spoke_start_on(s, 0, 0, blocker_fn, &l3b.blk, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&l3b.blk.blocking) == 1, "the blocker to run");

	run_workers(L3B_THREADS, l3b_worker, &l3b);
	assert_int_equal(atomic_load(&l3b.blk.blocking), 1);
	atomic_store(&l3b.blk.release, 1);
	assert_no_bg_failures();

	for (unsigned t = 0; t < L3B_THREADS; t++)
		ASSERT_EVENTUALLY(atomic_load(&l3b.kept[t].fired) == 1, "uncancelled timers to run");
	ASSERT_EVENTUALLY(stats_settled(s, l3b.n + 1 + L3B_THREADS * (L3B_NEW + 1), 0),
			  "the stats to settle");
	assert_stats_settled(s, l3b.n + 1 + L3B_THREADS * (L3B_NEW + 1), 0);
	sleep_ms(10);
	for (unsigned t = 0; t < L3B_THREADS; t++)
		for (unsigned j = 0; j < L3B_NEW; j++)
			assert_int_equal(atomic_load(&l3b.fresh[t][j].fired), 0);
	assert_int_equal(atomic_load(&never_ran), 0);
	spoke_stats(s, st);
	assert_int_equal(st->shard[0].cancelled, l3b.n + L3B_THREADS * L3B_NEW);
	assert_int_equal(st->shard[0].fired, 1 + L3B_THREADS);
	free(st);
	svc_destroy(s);
	free(l3b.ids);
}

/* ==== line 4: cancel_sync ======================================================== */

struct slow {
	atomic_int running, runs, overlap;
	uint64_t sleep_ns;
};

static void slow_fn(void *arg)
{
	struct slow *w = arg;

	if (atomic_exchange(&w->running, 1) != 0)
		atomic_fetch_add(&w->overlap, 1);
	atomic_fetch_add(&w->runs, 1);
	sleep_ns(w->sleep_ns);
	atomic_store(&w->running, 0);
}

struct l4_call {
	struct spoke *s;
	spoke_id id;
	struct slow *w;
	int rc, running_at_return, runs_at_return;
};

static void *l4_cancel_sync_thread(void *p)
{
	struct l4_call *c = p;

	c->rc = spoke_cancel_sync(c->s, c->id);
	c->running_at_return = atomic_load(&c->w->running);
	c->runs_at_return = atomic_load(&c->w->runs);
	return NULL;
}

static struct slow l4_one, l4_per;

/*
 * Contract line 4 (cancel_sync waits): a one-shot callback that sleeps 50 ms
 * with a 'running' flag set: cancel_sync from other threads returns -ENOENT
 * (nothing left to prevent) and only once the flag is clear. A periodic
 * callback (30 ms, period 5 ms): 4 threads cancel_sync it while it runs;
 * one gets 0, none returns while it runs, no run starts afterwards. Inline
 * (callback_threads 0) and on the pool.
 */
static void line4_cancel_sync_waits_for_running(void **state)
{
	(void)state;
	static const unsigned pools[] = { 0, 2 };

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 500 * US, pools[v]);
		struct l4_call calls[4];
		pthread_t t[4];
		spoke_id id;
		int wins = 0;

		memset(&l4_one, 0, sizeof(l4_one));
		memset(&l4_per, 0, sizeof(l4_per));
		l4_one.sleep_ns = 50 * MS;
		l4_per.sleep_ns = 30 * MS;

		assert_int_equal(spoke_start(s, MS, slow_fn, &l4_one, &id), 0);
		ASSERT_EVENTUALLY(atomic_load(&l4_one.running) == 1, "the one-shot to run");
		for (unsigned i = 0; i < 2; i++) {
			calls[i] = (struct l4_call){ .s = s, .id = id, .w = &l4_one };
			t[i] = thread_start(l4_cancel_sync_thread, &calls[i]);
		}
		for (unsigned i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			assert_int_equal(calls[i].rc, -ENOENT);
			assert_int_equal(calls[i].running_at_return, 0);
			assert_int_equal(calls[i].runs_at_return, 1);
		}

		assert_int_equal(spoke_start_periodic(s, 5 * MS, slow_fn, &l4_per, &id), 0);
		ASSERT_EVENTUALLY(atomic_load(&l4_per.runs) >= 2 && atomic_load(&l4_per.running),
				  "the periodic callback to run");
		for (unsigned i = 0; i < 4; i++) {
			calls[i] = (struct l4_call){ .s = s, .id = id, .w = &l4_per };
			t[i] = thread_start(l4_cancel_sync_thread, &calls[i]);
		}
		for (unsigned i = 0; i < 4; i++) {
			pthread_join(t[i], NULL);
			if (calls[i].rc == 0)
				wins++;
			else
				assert_int_equal(calls[i].rc, -ENOENT);
			assert_int_equal(calls[i].running_at_return, 0);
		}
		assert_int_equal(wins, 1);
		{
			int runs = atomic_load(&l4_per.runs);

			sleep_ms(50);
			assert_int_equal(atomic_load(&l4_per.runs), runs);
		}
		assert_int_equal(atomic_load(&l4_per.overlap), 0);
		assert_int_equal(atomic_load(&l4_one.runs), 1);
		svc_destroy(s);
	}
}

struct self_cancel {
	struct spoke *s;
	_Atomic uint64_t id;
	atomic_int runs, rc_set;
	int stop_at;
	atomic_int rc;
	bool use_sync;
};

static void self_cancel_fn(void *arg)
{
	struct self_cancel *c = arg;
	int n = atomic_fetch_add(&c->runs, 1) + 1;
	uint64_t end = spoke_now_ns() + 5 * SEC;

	while (atomic_load(&c->id) == 0 && spoke_now_ns() < end)
		sleep_ns(100 * US);
	if (n == c->stop_at) {
		uint64_t id = atomic_load(&c->id);

		atomic_store(&c->rc, c->use_sync ? spoke_cancel_sync(c->s, id) : spoke_cancel(c->s, id));
		atomic_store(&c->rc_set, 1);
	}
}

static struct self_cancel l4_self[2];

/*
 * Contract line 4 (-EDEADLK): cancel_sync of a timer from inside its own
 * callback returns -EDEADLK instead of waiting for itself: a one-shot runs
 * once; a periodic one (cancelled at its 2nd run) runs no more (the cancel
 * takes effect), so a later cancel finds nothing. Inline and on the pool.
 */
static void line4_cancel_sync_own_callback_edeadlk(void **state)
{
	(void)state;
	static const unsigned pools[] = { 0, 2 };

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 250 * US, pools[v]);
		spoke_id id;

		memset(l4_self, 0, sizeof(l4_self));
		for (unsigned i = 0; i < 2; i++) {
			l4_self[i].s = s;
			l4_self[i].use_sync = true;
		}
		l4_self[0].stop_at = 1;
		assert_int_equal(spoke_start(s, 2 * MS, self_cancel_fn, &l4_self[0], &id), 0);
		atomic_store(&l4_self[0].id, id);
		l4_self[1].stop_at = 2;
		assert_int_equal(spoke_start_periodic(s, MS, self_cancel_fn, &l4_self[1], &id), 0);
		atomic_store(&l4_self[1].id, id);

		ASSERT_EVENTUALLY(atomic_load(&l4_self[0].rc_set) && atomic_load(&l4_self[1].rc_set),
				  "the callbacks to call cancel_sync on themselves");
		assert_int_equal(atomic_load(&l4_self[0].rc), -EDEADLK);
		assert_int_equal(atomic_load(&l4_self[1].rc), -EDEADLK);
		sleep_ms(20);
		assert_int_equal(atomic_load(&l4_self[0].runs), 1);
		assert_int_equal(atomic_load(&l4_self[1].runs), 2);
		assert_int_equal(spoke_cancel(s, atomic_load(&l4_self[1].id)), -ENOENT);
		svc_destroy(s);
	}
}

/* ==== line 5: reset ============================================================== */

#define L5_THREADS 4

struct l5_ctx {
	struct spoke *s;
	struct trec rec[L5_THREADS];
	uint64_t last_ok[L5_THREADS];
	uint64_t delay;
};

static struct l5_ctx l5;

static void l5_worker(unsigned idx, void *p)
{
	struct l5_ctx *c = p;
	struct trec *r = &c->rec[idx];
	uint64_t t = spoke_now_ns(), end;
	spoke_id id;

	c->last_ok[idx] = t;
	BG_CHECK_INT(spoke_start(c->s, c->delay, trec_fire, r, &id), ==, 0);
	/* the connection stays busy for 3 timeouts: it must not fire meanwhile */
	end = t + 3 * c->delay;
	while (spoke_now_ns() < end) {
		int rc;

		sleep_ns(2 * MS);
		t = spoke_now_ns();
		rc = spoke_reset(c->s, id, c->delay);
		if (rc != 0) {
			/* only possible if this thread slept through a whole timeout */
			BG_CHECK_INT(rc, ==, -ENOENT);
			BG_CHECK_INT(atomic_load(&r->fired), ==, 1);
			break;
		}
		c->last_ok[idx] = t;
	}
	/* then it goes idle: one run, no earlier than the last reset + delay */
	end = spoke_now_ns() + EVENTUALLY_NS;
	while (atomic_load(&r->fired) == 0 && spoke_now_ns() < end)
		sleep_ns(200 * US);
	BG_CHECK_INT(atomic_load(&r->fired), ==, 1);
	BG_CHECK_U64(atomic_load(&r->fired_at), >=, c->last_ok[idx] + c->delay);
	BG_CHECK_INT(spoke_reset(c->s, id, c->delay), ==, -ENOENT);
	BG_CHECK_INT(spoke_cancel(c->s, id), ==, -ENOENT);
}

/*
 * Contract line 5 (reset moves the deadline; idle timeouts): 4 threads each
 * keep a 30 ms idle timer alive by resetting it every 2 ms for 90 ms; each
 * fires once, at or after its last successful reset + 30 ms; reset after
 * the run, and after a cancel, gives -ENOENT.
 */
static void line5_reset_idle_timeout(void **state)
{
	(void)state;
	spoke_id id;

	memset(&l5, 0, sizeof(l5));
	l5.s = svc_new(2, 250 * US, 2);
	l5.delay = 30 * MS;
	run_workers(L5_THREADS, l5_worker, &l5);
	assert_no_bg_failures();
	sleep_ms(40);
	for (unsigned i = 0; i < L5_THREADS; i++)
		assert_int_equal(atomic_load(&l5.rec[i].fired), 1);
	assert_int_equal(spoke_start(l5.s, 3600 * SEC, never_fn, NULL, &id), 0);
	assert_int_equal(spoke_reset(l5.s, id, MS), 0);
	assert_int_equal(spoke_cancel(l5.s, id), 0);
	assert_int_equal(spoke_reset(l5.s, id, MS), -ENOENT);
	svc_destroy(l5.s);
}

#define L5T_THREADS 4

struct l5t_ctx {
	struct spoke *s;
	unsigned per;
	struct trec *rec;
	uint64_t *bound; /* fired_at must be >= bound */
};

static struct l5t_ctx l5t;

static void l5t_worker(unsigned idx, void *p)
{
	struct l5t_ctx *c = p;
	struct rng rng = { 0x5100 + idx };

	for (unsigned j = 0; j < c->per; j++) {
		unsigned i = idx * c->per + j;
		struct trec *r = &c->rec[i];
		uint64_t ttl = 3600 * SEC + rng_below(&rng, 4) * MS, d1, d2, t1, t2;
		spoke_id id;
		int rc;

		/* long TTL first, so nothing can fire before the resets below */
		BG_CHECK_INT(spoke_start_ttl(c->s, ttl, trec_fire, r, &id), ==, 0);
		/* few distinct new TTLs, some distinct ones, longer and shorter */
		d1 = rng_below(&rng, 2) ? (2 + rng_below(&rng, 3)) * MS : 3 * MS + 7919 * j;
		d2 = rng_below(&rng, 2) ? 1 * MS : 6 * MS + 104729 * rng_below(&rng, 8);
		t1 = spoke_now_ns();
		BG_CHECK_INT(spoke_reset(c->s, id, d1), ==, 0);
		c->bound[i] = t1 + d1;
		t2 = spoke_now_ns();
		rc = spoke_reset(c->s, id, d2);
		if (rc == 0)
			c->bound[i] = t2 + d2;
		else
			BG_CHECK_INT(rc, ==, -ENOENT); /* fired at d1 already (thread stalled) */
	}
}

/*
 * Contract line 5 (reset works on every kind: a TTL timer moves to the TTL
 * queue of its new delay): 4 threads start Lawn TTL timers of about an
 * hour, reset each to a short TTL (few distinct and many distinct values),
 * then at once to another, shorter or longer; each fires exactly once, not
 * before its last successful reset + the new TTL, i.e. never at a TTL it
 * was moved away from.
 */
static void line5_reset_ttl_timer(void **state)
{
	(void)state;
	unsigned total;

	memset(&l5t, 0, sizeof(l5t));
	l5t.per = SCALE(600);
	total = L5T_THREADS * l5t.per;
	l5t.rec = calloc(total, sizeof(*l5t.rec));
	l5t.bound = calloc(total, sizeof(*l5t.bound));
	assert_non_null(l5t.rec);
	assert_non_null(l5t.bound);
	l5t.s = svc_new(3, 250 * US, 1);
	run_workers(L5T_THREADS, l5t_worker, &l5t);
	assert_no_bg_failures();
	for (unsigned i = 0; i < total; i++)
		ASSERT_EVENTUALLY(atomic_load(&l5t.rec[i].fired) >= 1, "reset TTL timers to fire");
	sleep_ms(10);
	for (unsigned i = 0; i < total; i++) {
		assert_int_equal(atomic_load(&l5t.rec[i].fired), 1);
		if (atomic_load(&l5t.rec[i].fired_at) < l5t.bound[i])
			fail_msg("TTL timer %u fired %" PRIu64 " ns before its reset deadline", i,
				 l5t.bound[i] - atomic_load(&l5t.rec[i].fired_at));
	}
	ASSERT_EVENTUALLY(stats_settled(l5t.s, total, 0), "stats to settle");
	svc_destroy(l5t.s);
	free(l5t.rec);
	free(l5t.bound);
}

struct l5p_ctx {
	atomic_uint runs;
	_Atomic uint64_t enter[64], leave[64];
};

static void l5p_fn(void *arg)
{
	struct l5p_ctx *c = arg;
	unsigned n = atomic_load(&c->runs);

	if (n < 64)
		atomic_store(&c->enter[n], spoke_now_ns());
	sleep_ns(100 * US);
	if (n < 64)
		atomic_store(&c->leave[n], spoke_now_ns());
	atomic_store(&c->runs, n + 1);
}

static struct l5p_ctx l5p;

/*
 * Contract line 5 (reset of a periodic timer moves its next run): right
 * after a run of a 20 ms periodic timer ends, reset it to 60 ms: the next
 * run comes no earlier than the reset + 60 ms (not at the old phase, 20 ms
 * on). Retried if the test thread was too slow to reset between two runs.
 */
static void line5_reset_periodic(void **state)
{
	(void)state;
	struct spoke *s = svc_new(2, 250 * US, 2);
	const uint64_t period = 20 * MS, delay = 60 * MS;
	bool checked = false;

	for (int attempt = 0; attempt < 5 && !checked; attempt++) {
		spoke_id id;
		uint64_t t_reset;
		unsigned n;

		memset(&l5p, 0, sizeof(l5p));
		assert_int_equal(spoke_start_periodic(s, period, l5p_fn, &l5p, &id), 0);
		ASSERT_EVENTUALLY(atomic_load(&l5p.runs) >= 1, "the first run");
		n = atomic_load(&l5p.runs);
		t_reset = spoke_now_ns();
		assert_int_equal(spoke_reset(s, id, delay), 0);
		if (t_reset > atomic_load(&l5p.leave[n - 1]) + period / 2) {
			assert_int_equal(spoke_cancel_sync(s, id), 0);
			continue; /* too slow: a run may have been due already */
		}
		ASSERT_EVENTUALLY(atomic_load(&l5p.runs) >= n + 1, "the run after the reset");
		if (atomic_load(&l5p.enter[n]) < t_reset + delay)
			fail_msg("the run after reset came %" PRIu64 " ns after the reset, before its "
				 "new delay of %" PRIu64 " ns",
				 atomic_load(&l5p.enter[n]) - t_reset, delay);
		assert_int_equal(spoke_cancel_sync(s, id), 0);
		checked = true;
	}
	assert_true(checked);
	svc_destroy(s);
}

/* ==== line 5 / pitfall: periodic timers =============================================== */

#define L5N_TIMERS 4

struct per_rec {
	struct spoke *s;
	uint64_t t0, period;
	atomic_uint runs;
	atomic_int inflight, overlap, early;
	_Atomic uint64_t id;
	int cancel_at;   /* run at which the callback cancels itself (0 = never) */
	atomic_int self_rc;
	unsigned slow_every; /* every n-th run sleeps 2.5 periods (0 = never) */
};

static void per_fn(void *arg)
{
	struct per_rec *p = arg;
	unsigned k;

	if (atomic_fetch_add(&p->inflight, 1) != 0)
		atomic_fetch_add(&p->overlap, 1);
	k = atomic_fetch_add(&p->runs, 1) + 1;
	if (spoke_now_ns() < p->t0 + (uint64_t)k * p->period)
		atomic_fetch_add(&p->early, 1);
	if (p->slow_every && k % p->slow_every == 0)
		sleep_ns(p->period * 5 / 2);
	if (p->cancel_at && (int)k == p->cancel_at) {
		uint64_t end = spoke_now_ns() + 5 * SEC;

		while (atomic_load(&p->id) == 0 && spoke_now_ns() < end)
			sleep_ns(100 * US);
		atomic_store(&p->self_rc, spoke_cancel(p->s, atomic_load(&p->id)));
	}
	atomic_fetch_sub(&p->inflight, 1);
}

static struct per_rec l5n[L5N_TIMERS];

/*
 * Contract line 5 and the periodic pitfall: 4 periodic timers (0.7-2 ms, tick
 * 100 us) on a pool of 4 threads, every 4th run taking 2.5 periods: no run
 * overlaps another run of the same timer; run k starts no earlier than
 * start + k * period (next deadline = previous + period, never early);
 * cancel_sync gives 0 and no run is in progress or starts afterwards.
 */
static void line5_periodic_no_overlap_never_early(void **state)
{
	(void)state;
	static const uint64_t periods[L5N_TIMERS] = { 1 * MS, 1500 * US, 700 * US, 2 * MS };
	struct spoke *s = svc_new(2, 100 * US, 4);

	memset(l5n, 0, sizeof(l5n));
	for (unsigned i = 0; i < L5N_TIMERS; i++) {
		spoke_id id;

		l5n[i].s = s;
		l5n[i].period = periods[i];
		l5n[i].slow_every = 4;
		l5n[i].t0 = spoke_now_ns();
		assert_int_equal(spoke_start_periodic(s, periods[i], per_fn, &l5n[i], &id), 0);
		atomic_store(&l5n[i].id, id);
	}
	sleep_ms(80);
	for (unsigned i = 0; i < L5N_TIMERS; i++) {
		unsigned runs;

		ASSERT_EVENTUALLY(atomic_load(&l5n[i].runs) >= 5, "periodic runs");
		assert_int_equal(spoke_cancel_sync(s, atomic_load(&l5n[i].id)), 0);
		assert_int_equal(atomic_load(&l5n[i].inflight), 0);
		runs = atomic_load(&l5n[i].runs);
		sleep_ms(10);
		assert_int_equal(atomic_load(&l5n[i].runs), runs);
		assert_int_equal(atomic_load(&l5n[i].overlap), 0);
		assert_int_equal(atomic_load(&l5n[i].early), 0);
	}
	svc_destroy(s);
}

static struct per_rec l5c[2];

/*
 * Contract line 5 and the periodic pitfall (cancel stops further runs, also
 * from its own callback): a 1 ms periodic timer cancels itself at its 3rd
 * run: spoke_cancel gives 0 there and it never runs again; another one is
 * cancelled from the test thread: 0, then at most the run already under way.
 * Inline and on the pool.
 */
static void line5_periodic_cancel_from_own_callback(void **state)
{
	(void)state;
	static const unsigned pools[] = { 0, 2 };

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 250 * US, pools[v]);
		spoke_id id;
		unsigned runs;

		memset(l5c, 0, sizeof(l5c));
		for (unsigned i = 0; i < 2; i++) {
			l5c[i].s = s;
			l5c[i].period = MS;
			l5c[i].cancel_at = i == 0 ? 3 : 0;
			l5c[i].t0 = spoke_now_ns();
			assert_int_equal(spoke_start_periodic(s, MS, per_fn, &l5c[i], &id), 0);
			atomic_store(&l5c[i].id, id);
		}
		ASSERT_EVENTUALLY(atomic_load(&l5c[0].runs) >= 3 && atomic_load(&l5c[1].runs) >= 3,
				  "3 runs each");
		assert_int_equal(spoke_cancel(s, atomic_load(&l5c[1].id)), 0);
		runs = atomic_load(&l5c[1].runs);
		sleep_ms(30);
		assert_int_equal(atomic_load(&l5c[0].self_rc), 0);
		assert_int_equal(atomic_load(&l5c[0].runs), 3);
		assert_in_range(atomic_load(&l5c[1].runs), runs, runs + 1);
		assert_int_equal(spoke_cancel(s, atomic_load(&l5c[0].id)), -ENOENT);
		assert_int_equal(spoke_cancel(s, atomic_load(&l5c[1].id)), -ENOENT);
		for (unsigned i = 0; i < 2; i++) {
			assert_int_equal(atomic_load(&l5c[i].overlap), 0);
			assert_int_equal(atomic_load(&l5c[i].early), 0);
		}
		svc_destroy(s);
	}
}

/*
 * Attached-mode periodic checks. The attached thread decides when its shard's
 * timers can run (only inside spoke_poll), so whether a periodic timer is due
 * at a given poll follows from the contract alone: with deadlines start +
 * k * period, a poll at least a tick (+1 ms) after a due time that a previous
 * poll had not reached runs it exactly once; a poll that ends before the
 * next due time runs nothing.
 */
#define L5D_MAX_POLLS 512

struct poll_rec {
	uint64_t a, b; /* before and after spoke_poll */
	int r;         /* its result */
};

struct l5d_ctx {
	struct spoke *s;
	uint64_t period, tick, margin;
	struct poll_rec polls[L5D_MAX_POLLS];
	unsigned npolls;
	atomic_uint runs;
	uint64_t run_at[L5D_MAX_POLLS];
	uint64_t t0;
	uint64_t long_run_ns; /* the first run sleeps this long (part 3) */
	int checkable;
};

static struct l5d_ctx l5d;

static void l5d_fn(void *arg)
{
	struct l5d_ctx *c = arg;
	unsigned n = atomic_fetch_add(&c->runs, 1);

	if (n < L5D_MAX_POLLS)
		c->run_at[n] = spoke_now_ns();
	if (n == 0 && c->long_run_ns)
		sleep_ns(c->long_run_ns);
}

static void l5d_sleep_until(uint64_t t)
{
	uint64_t now = spoke_now_ns();

	if (t > now)
		sleep_ns(t - now);
}

static struct poll_rec *l5d_poll(struct l5d_ctx *c)
{
	struct poll_rec *p = &c->polls[c->npolls < L5D_MAX_POLLS - 1 ? c->npolls++ : c->npolls];

	p->a = spoke_now_ns();
	p->r = spoke_poll(c->s);
	p->b = spoke_now_ns();
	BG_CHECK_INT(p->r, >=, 0);
	return p;
}

/* Runs reported by the polls that started at or after `from` and ended before `to`. */
static int l5d_runs_between(struct l5d_ctx *c, uint64_t from, uint64_t to)
{
	int n = 0;

	for (unsigned i = 0; i < c->npolls; i++)
		if (c->polls[i].a >= from && c->polls[i].b < to)
			n += c->polls[i].r;
	return n;
}

/* Polls every 2 ms from now until `until`. */
static void l5d_poll_densely(struct l5d_ctx *c, uint64_t until)
{
	while (spoke_now_ns() < until) {
		l5d_poll(c);
		sleep_ns(2 * MS);
	}
}

/*
 * Period m (due at t0 + m * period) after the polls: the first poll at least
 * tick + margin past the due time has run it exactly once (together with any
 * poll between the due time and it), and no poll before the next due time
 * runs anything more. Counts the periods it could check.
 */
static void l5d_check_period(struct l5d_ctx *c, unsigned m, const char *part)
{
	uint64_t due = c->t0 + m * c->period, next = due + c->period;
	unsigned first = c->npolls;

	for (unsigned i = 0; i < c->npolls; i++) {
		if (c->polls[i].a >= due + c->tick + c->margin) {
			first = i;
			break;
		}
	}
	if (first == c->npolls || c->polls[first].b >= next - c->margin)
		return; /* the test thread overslept this period: nothing to conclude */
	c->checkable++;
	if (l5d_runs_between(c, due, c->polls[first].b + 1) != 1)
		svc_bg_fail(__FILE__, __LINE__,
			    "%s: period %u: %d runs by the first poll %" PRIu64
			    " us after its due time (expected 1: next deadline = previous + period)",
			    part, m, l5d_runs_between(c, due, c->polls[first].b + 1),
			    (c->polls[first].a - due) / US);
	if (l5d_runs_between(c, c->polls[first].b + 1, next) != 0)
		svc_bg_fail(__FILE__, __LINE__, "%s: period %u: another run before the next due time",
			    part, m);
}

static void *l5d_thread(void *p)
{
	struct l5d_ctx *c = p;
	spoke_id id;
	const uint64_t P = c->period;

	BG_CHECK_INT(spoke_attach(c->s, 0), ==, 0);

	/*
	 * Part 1, phase: one poll per period, alternately 0.75 and 0.2 periods
	 * after the due time. Every poll runs the timer once; a timer re-armed
	 * at dispatch time + period (drift) would not be due at the 0.2 polls.
	 */
	c->t0 = spoke_now_ns();
	BG_CHECK_INT(spoke_start_periodic(c->s, P, l5d_fn, c, &id), ==, 0);
	for (unsigned k = 1; k <= 10; k++) {
		l5d_sleep_until(c->t0 + k * P + (k % 2 ? P * 3 / 4 : P / 5));
		l5d_poll(c);
	}
	for (unsigned k = 1; k <= 10; k++)
		l5d_check_period(c, k, "phase");
	for (unsigned i = 0; i < atomic_load(&c->runs) && i < L5D_MAX_POLLS; i++)
		BG_CHECK_U64(c->run_at[i], >=, c->t0 + (i + 1) * P);
	BG_CHECK_INT(spoke_cancel(c->s, id), ==, 0);
	l5d_poll(c);

	/*
	 * Part 2, late poll: first poll 3.5 periods after the start (3 due
	 * times passed): one run, not three; polls every 2 ms until 5.5
	 * periods: nothing more before 4 periods (no catch-up burst), then one
	 * run per period, on the original phase.
	 */
	c->npolls = 0;
	atomic_store(&c->runs, 0);
	c->t0 = spoke_now_ns();
	BG_CHECK_INT(spoke_start_periodic(c->s, P, l5d_fn, c, &id), ==, 0);
	l5d_sleep_until(c->t0 + P * 7 / 2);
	{
		struct poll_rec *p = l5d_poll(c);

		if (p->b < c->t0 + 4 * P - c->margin)
			BG_CHECK_INT(p->r, ==, 1);
	}
	l5d_poll_densely(c, c->t0 + P * 11 / 2);
	BG_CHECK_INT(l5d_runs_between(c, c->polls[0].b + 1, c->t0 + 4 * P), ==, 0);
	l5d_check_period(c, 4, "late poll");
	l5d_check_period(c, 5, "late poll");
	BG_CHECK_INT(spoke_cancel(c->s, id), ==, 0);
	l5d_poll(c);

	/*
	 * Part 3, a run that ends after the next due times: the first run
	 * (1.2 periods in) sleeps 2.6 periods. The missed periods are skipped:
	 * at most one run before 4 periods, then one per period on the phase.
	 */
	c->npolls = 0;
	atomic_store(&c->runs, 0);
	c->long_run_ns = P * 13 / 5;
	c->t0 = spoke_now_ns();
	BG_CHECK_INT(spoke_start_periodic(c->s, P, l5d_fn, c, &id), ==, 0);
	l5d_sleep_until(c->t0 + P * 6 / 5);
	l5d_poll(c);
	BG_CHECK_INT(c->polls[0].r, ==, 1);
	l5d_poll_densely(c, c->t0 + P * 13 / 2);
	BG_CHECK_INT(l5d_runs_between(c, c->polls[0].b, c->t0 + 4 * P), <=, 1);
	l5d_check_period(c, 4, "long run");
	l5d_check_period(c, 5, "long run");
	for (unsigned i = 0; i < atomic_load(&c->runs) && i < L5D_MAX_POLLS; i++)
		BG_CHECK_U64(c->run_at[i], >=, c->t0 + (i + 1) * P);
	BG_CHECK_INT(spoke_cancel(c->s, id), ==, 0);
	l5d_poll(c);
	return NULL;
}

/*
 * Contract line 5 and the periodic pitfall (no drift, skipped periods), in
 * attached mode where the test decides when timers may run: next deadline
 * = previous deadline + period whatever the lateness of the poll that ran
 * the previous one; a late poll runs a timer that missed three due times
 * once, not three times, and it keeps its phase; a run that ends after
 * the next due times skips them and keeps its phase too.
 */
static void line5_periodic_no_drift_skip_missed(void **state)
{
	(void)state;
	pthread_t t;

	memset(&l5d, 0, sizeof(l5d));
	l5d.tick = MS;
	l5d.period = 40 * MS;
	l5d.margin = 2 * MS;
	l5d.s = svc_new(2, l5d.tick, 1);
	t = thread_start(l5d_thread, &l5d);
	pthread_join(t, NULL);
	assert_no_bg_failures();
	/* at least some periods must have been checkable for the test to mean anything */
	assert_true(l5d.checkable >= 4);
	svc_destroy(l5d.s);
}

/* ==== line 6: stale ids ========================================================== */

/*
 * Contract line 6 (ids carry a generation), after a cancel: a cancelled id
 * stays dead while 20000 start/cancel pairs reuse its slot (none of them
 * gets the same id back); cancel, cancel_sync and reset of the stale id
 * give -ENOENT and leave the timer now in the slot pending; 2000 timers
 * pending at once all survive the stale id and cancel with 0. One shard,
 * so the slots are reused as fast as possible.
 */
static void line6_stale_id_after_cancel(void **state)
{
	(void)state;
	struct spoke *s = svc_new(1, 500 * US, 1);
	unsigned n = SCALE(20000), m = 2000;
	spoke_id stale, id, *live = calloc(m, sizeof(*live));

	assert_non_null(live);
	atomic_store(&never_ran, 0);
	assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &stale), 0);
	assert_int_equal(spoke_cancel(s, stale), 0);
	ASSERT_EVENTUALLY(stats_pending(s) == 0, "the cancelled timer to be unlinked");
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &id), 0);
		if (id == stale || id == 0)
			fail_msg("start %u got id %#" PRIx64 " (the stale id is %#" PRIx64 ")", i, id,
				 stale);
		assert_int_equal(spoke_cancel(s, stale), -ENOENT);
		assert_int_equal(spoke_cancel(s, id), 0);
		if (i % 64 == 0)
			sleep_ns(50 * US); /* let the owner unlink, so slots come back */
	}
	for (unsigned i = 0; i < m; i++) {
		assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &live[i]), 0);
		assert_true(live[i] != stale);
	}
	assert_int_equal(spoke_cancel(s, stale), -ENOENT);
	assert_int_equal(spoke_cancel_sync(s, stale), -ENOENT);
	assert_int_equal(spoke_reset(s, stale, 0), -ENOENT);
	sleep_ms(5);
	for (unsigned i = 0; i < m; i++)
		assert_int_equal(spoke_cancel(s, live[i]), 0);
	assert_int_equal(atomic_load(&never_ran), 0);
	ASSERT_EVENTUALLY(stats_settled(s, n + m + 1, 0), "stats to settle");
	svc_destroy(s);
	free(live);
}

static struct trec l6f_rec[2];

/*
 * Contract line 6, after a run: the id of a timer that fired stays dead
 * while 5000 new timers take the slots; reset(stale, 0) does not make the
 * new timer in its slot fire, cancel(stale) does not stop it.
 */
static void line6_stale_id_after_fire(void **state)
{
	(void)state;
	struct spoke *s = svc_new(1, 500 * US, 0);
	unsigned m = 5000;
	spoke_id stale, *live = calloc(m, sizeof(*live));

	assert_non_null(live);
	memset(l6f_rec, 0, sizeof(l6f_rec));
	atomic_store(&never_ran, 0);
	assert_int_equal(spoke_start(s, 0, trec_fire, &l6f_rec[0], &stale), 0);
	ASSERT_EVENTUALLY(atomic_load(&l6f_rec[0].fired) == 1, "the timer to fire");
	ASSERT_EVENTUALLY(stats_pending(s) == 0, "pending 0");
	for (unsigned i = 0; i < m; i++) {
		assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &live[i]), 0);
		assert_true(live[i] != stale);
		assert_int_equal(spoke_reset(s, stale, 0), -ENOENT);
		assert_int_equal(spoke_cancel(s, stale), -ENOENT);
	}
	sleep_ms(10);
	assert_int_equal(atomic_load(&never_ran), 0);
	for (unsigned i = 0; i < m; i++)
		assert_int_equal(spoke_cancel(s, live[i]), 0);
	assert_int_equal(atomic_load(&l6f_rec[0].fired), 1);
	svc_destroy(s);
	free(live);
}

#define L6_THREADS  6
#define L6_RING     32
#define L6_SENTRIES 8

struct l6_ctx {
	struct spoke *s;
	unsigned per;
	struct trec *rec; /* L6_THREADS * per */
	spoke_id sentry[L6_THREADS][L6_SENTRIES];
};

static struct l6_ctx l6;

static void l6_worker(unsigned idx, void *p)
{
	struct l6_ctx *c = p;
	struct rng rng = { 0x6000 + idx };
	spoke_id dead[L6_RING] = { 0 };                /* cancelled by us: stale for sure */
	struct { spoke_id id; struct trec *r; } shortr[L6_RING]; /* fired or about to */
	unsigned nd = 0, ns = 0;

	memset(shortr, 0, sizeof(shortr));
	for (unsigned k = 0; k < L6_SENTRIES; k++)
		BG_CHECK_INT(spoke_start_on(c->s, k % 2, 3600 * SEC, never_fn, NULL,
					    &c->sentry[idx][k]),
			     ==, 0);
	for (unsigned j = 0; j < c->per; j++) {
		struct trec *r = &c->rec[idx * c->per + j];
		spoke_id id;
		unsigned shard = (unsigned)rng_below(&rng, 2);

		if (rng_below(&rng, 2)) {
			BG_CHECK_INT(spoke_start_on(c->s, shard, 3600 * SEC, trec_fire, r, &id), ==, 0);
			/* only a stale id could have cancelled it first */
			if (spoke_cancel(c->s, id) == 0)
				atomic_fetch_add(&r->cancelled, 1);
			else
				svc_bg_fail(__FILE__, __LINE__, "a new pending timer was gone");
			dead[nd++ % L6_RING] = id;
		} else {
			BG_CHECK_INT(spoke_start_on(c->s, shard, rng_below(&rng, MS), trec_fire, r, &id),
				     ==, 0);
			shortr[ns % L6_RING].id = id;
			shortr[ns % L6_RING].r = r;
			ns++;
		}
		/* stale ids, aimed at whatever now reuses their slots */
		if (nd) {
			spoke_id d = dead[rng_below(&rng, nd < L6_RING ? nd : L6_RING)];

			switch (rng_below(&rng, 3)) {
			case 0:
				BG_CHECK_INT(spoke_cancel(c->s, d), ==, -ENOENT);
				break;
			case 1:
				BG_CHECK_INT(spoke_reset(c->s, d, 0), ==, -ENOENT);
				break;
			default:
				BG_CHECK_INT(spoke_cancel_sync(c->s, d), ==, -ENOENT);
				break;
			}
		}
		if (ns && rng_below(&rng, 2)) {
			unsigned q = (unsigned)rng_below(&rng, ns < L6_RING ? ns : L6_RING);
			int rc = spoke_cancel(c->s, shortr[q].id);

			if (rc == 0)
				atomic_fetch_add(&shortr[q].r->cancelled, 1);
			else
				BG_CHECK_INT(rc, ==, -ENOENT);
		}
	}
}

static bool l6_all_ended(struct l6_ctx *c, unsigned total)
{
	for (unsigned i = 0; i < total; i++)
		if (atomic_load(&c->rec[i].fired) + atomic_load(&c->rec[i].cancelled) == 0)
			return false;
	return true;
}

/*
 * Contract line 6 and the state-word pitfall (a stale id never touches a new
 * timer in the same slot), with 6 threads on 2 shards: each starts timers
 * (an hour, cancelled at once; or up to 1 ms, left to fire or cancelled
 * later) and keeps aiming cancel, cancel_sync and reset at its own dead ids
 * while the slots are reused by everyone: all of those give -ENOENT, every
 * timer ends exactly once (token per timer), and the sentinel timers each
 * thread left pending survive and cancel with 0.
 */
static void line6_stale_ids_many_threads(void **state)
{
	(void)state;
	unsigned total;

	memset(&l6, 0, sizeof(l6));
	atomic_store(&never_ran, 0);
	trec_reset_globals();
	l6.per = SCALE(6000);
	total = L6_THREADS * l6.per;
	l6.rec = calloc(total, sizeof(*l6.rec));
	assert_non_null(l6.rec);
	l6.s = svc_new(2, 250 * US, 2);
	run_workers(L6_THREADS, l6_worker, &l6);
	ASSERT_EVENTUALLY(l6_all_ended(&l6, total), "every timer to end");
	sleep_ms(10);
	for (unsigned i = 0; i < total; i++) {
		unsigned f = atomic_load(&l6.rec[i].fired), k = atomic_load(&l6.rec[i].cancelled);

		if (f + k != 1)
			fail_msg("timer %u: %u runs and %u winning cancels", i, f, k);
	}
	assert_no_bg_failures();
	for (unsigned t = 0; t < L6_THREADS; t++)
		for (unsigned k = 0; k < L6_SENTRIES; k++)
			assert_int_equal(spoke_cancel(l6.s, l6.sentry[t][k]), 0);
	assert_int_equal(atomic_load(&never_ran), 0);
	ASSERT_EVENTUALLY(stats_settled(l6.s, total + L6_THREADS * L6_SENTRIES, 0),
			  "stats to settle");
	svc_destroy(l6.s);
	free(l6.rec);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(line1_exactly_once_many_threads),
		SVC_TEST(line2_never_early_many_threads),
		SVC_TEST(line3_cancel_verdicts),
		SVC_TEST(line3_cancel_one_winner_many_threads),
		SVC_TEST(line3_cancel_at_once_while_owner_busy),
		SVC_TEST(line4_cancel_sync_waits_for_running),
		SVC_TEST(line4_cancel_sync_own_callback_edeadlk),
		SVC_TEST(line5_reset_idle_timeout),
		SVC_TEST(line5_reset_ttl_timer),
		SVC_TEST(line5_reset_periodic),
		SVC_TEST(line5_periodic_no_overlap_never_early),
		SVC_TEST(line5_periodic_cancel_from_own_callback),
		SVC_TEST(line5_periodic_no_drift_skip_missed),
		SVC_TEST(line6_stale_id_after_cancel),
		SVC_TEST(line6_stale_id_after_fire),
		SVC_TEST(line6_stale_ids_many_threads),
	};

	return svc_main(argc, argv, "service contract 1-6", tests, ARRAY_SIZE(tests));
}
