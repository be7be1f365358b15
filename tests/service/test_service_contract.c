/* SPDX-License-Identifier: MIT */
/*
 * test_service_contract.c - docs/contract.md lines 1-4 of the timer
 * service (include/spoke/spoke.h), one or more tests per line, each with
 * several threads on short ticks:
 *
 *   line1_exactly_once_many_threads          1  exactly once
 *   line2_never_early_many_threads           2  never early
 *   line2_not_held_behind_running_callback   2  not late behind another callback
 *   line3_cancel_verdicts                    3  0 / -ENOENT semantics
 *   line3_cancel_one_winner_many_threads     3  any thread, one winner
 *   line3_cancel_at_once_while_owner_busy    3  decides without the owner
 *   line3_cancel_from_300_live_threads       3  from any thread (300 alive)
 *   line4_cancel_sync_waits_for_running      4  waits for a running callback
 *   line4_cancel_sync_own_callback_edeadlk   4  -EDEADLK from its own callback
 *
 * Lines 5-6 are in test_service_reset.c, 7-10 in test_service_lifecycle.c.
 *
 * Usage: test_service_contract [test name...]   (no name: all)
 */
#include "service_util.h"

/*
 * Starts r's one-shot timer of `delay` the way `how` (0..3) says: spoke_start,
 * spoke_start_on a random one of the nsh shards, spoke_start_ttl, or
 * spoke_start of an hour reset to `delay` before anyone else knows the id.
 * r->earliest is set before each call to the time the callback must not run
 * before. Returns the start's code.
 */
static int start_kind(struct spoke *s, unsigned nsh, struct rng *rng, unsigned how, uint64_t delay,
		      struct trec *r, spoke_id *id)
{
	uint64_t t = spoke_now_ns();
	int rc;

	switch (how) {
	case 0:
		atomic_store(&r->earliest, t + delay);
		return spoke_start(s, delay, trec_fire, r, id);
	case 1:
		atomic_store(&r->earliest, t + delay);
		return spoke_start_on(s, (unsigned)rng_below(rng, nsh), delay, trec_fire, r, id);
	case 2:
		atomic_store(&r->earliest, t + delay);
		return spoke_start_ttl(s, delay, trec_fire, r, id);
	default:
		atomic_store(&r->earliest, t + 3600 * SEC);
		rc = spoke_start(s, 3600 * SEC, trec_fire, r, id);
		if (rc == 0) {
			t = spoke_now_ns();
			atomic_store(&r->earliest, t + delay);
			BG_CHECK_INT(spoke_reset(s, *id, delay), ==, 0);
		}
		return rc;
	}
}

/* ==== line 1: exactly once ===================================================== */

#define ONCE_STARTERS	6
#define ONCE_CANCELLERS 2

struct once_ctx {
	struct spoke *s;
	unsigned nsh, per;
	struct trec *rec; /* ONCE_STARTERS * per */
	atomic_uint starters_done;
	atomic_uint bad_rc;
};

static struct once_ctx l1;

static int once_cancel(struct spoke *s, struct trec *r, bool sync)
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

static void once_worker(unsigned idx, void *p)
{
	struct once_ctx *c = p;
	struct rng rng = {0x1000 + idx};

	if (idx >= ONCE_STARTERS) {
		/* Canceller: races cancels of everyone's timers with their start and expiry. */
		unsigned total = ONCE_STARTERS * c->per;

		while (atomic_load(&c->starters_done) < ONCE_STARTERS) {
			once_cancel(c->s, &c->rec[rng_below(&rng, total)], rng_below(&rng, 4) == 0);
			if (rng_below(&rng, 64) == 0)
				sched_yield();
		}
		return;
	}
	for (unsigned j = 0; j < c->per; j++) {
		struct trec *r = &c->rec[idx * c->per + j];
		uint64_t delay = rng_below(&rng, 3 * MS + 1);
		unsigned how = (unsigned)rng_below(&rng, 4);
		spoke_id id = 0;
		int rc;

		if (how == 2)
			delay = (1 + rng_below(&rng, 3)) * 700 * US; /* a few distinct TTLs */
		rc = start_kind(c->s, c->nsh, &rng, how, delay, r, &id);
		if (rc != 0 || id == 0) {
			atomic_fetch_add(&c->bad_rc, 1);
			continue;
		}
		atomic_store(&r->id, id);
		switch (rng_below(&rng, 3)) {
		case 0: /* cancel at once: usually overtakes the start at the owner */
			once_cancel(c->s, r, rng_below(&rng, 2) == 0);
			break;
		case 1: /* cancel one of our earlier timers: fired, pending or cancelled */
			once_cancel(c->s, &c->rec[idx * c->per + rng_below(&rng, j + 1)],
				    rng_below(&rng, 3) == 0);
			break;
		default:
			break;
		}
	}
	atomic_fetch_add(&c->starters_done, 1);
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
	total = ONCE_STARTERS * l1.per;
	l1.rec = calloc(total, sizeof(*l1.rec));
	assert_non_null(l1.rec);
	l1.s = svc_new(4, 200 * US, 2);
	l1.nsh = spoke_shards(l1.s);
	assert_int_equal(l1.nsh, 4);

	run_workers(ONCE_STARTERS + ONCE_CANCELLERS, once_worker, &l1);
	assert_int_equal(atomic_load(&l1.bad_rc), 0);
	assert_trecs_end_once(l1.s, l1.rec, total, &fired, &cancelled);
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

#define EARLY_THREADS  6
#define EARLY_PERIODIC 4

struct early_periodic {
	uint64_t t0, period;
	atomic_uint runs;
	spoke_id id;
};

struct early_ctx {
	struct spoke *s;
	unsigned nsh, per;
	uint64_t tick;
	struct trec *rec;
	atomic_uint bad_rc;
	struct early_periodic per_t[EARLY_PERIODIC];
};

static struct early_ctx l2;

static void early_periodic_fn(void *arg)
{
	struct early_periodic *p = arg;
	unsigned k = atomic_fetch_add(&p->runs, 1) + 1;
	uint64_t now = spoke_now_ns();

	/* run k is due at t0 + k * period at the earliest (skipped periods only push it later) */
	BG_CHECK_U64(now, >=, p->t0 + k * p->period);
}

static void early_worker(unsigned idx, void *p)
{
	struct early_ctx *c = p;
	struct rng rng = {0x2000 + idx};

	for (unsigned j = 0; j < c->per; j++) {
		struct trec *r = &c->rec[idx * c->per + j];
		uint64_t delay;
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
			delay = (1 + rng_below(&rng, 8)) * c->tick +
				(rng_below(&rng, 2) ? 1 : -1ull);
			break;
		default:
			delay = rng_below(&rng, 4 * MS);
			break;
		}
		rc = start_kind(c->s, c->nsh, &rng, (unsigned)rng_below(&rng, 4), delay, r, &id);
		if (rc != 0)
			atomic_fetch_add(&c->bad_rc, 1);
		if (rng_below(&rng, 16) == 0)
			sleep_ns(rng_below(&rng, 300 * US));
	}
}

static bool early_all_fired(struct early_ctx *c, unsigned total)
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
	static const uint64_t periods[EARLY_PERIODIC] = {700 * US, 250 * US, 1300 * US, 2 * MS};
	static const unsigned pools[] = {0, 3};

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		unsigned total;

		memset(&l2, 0, sizeof(l2));
		trec_reset_globals();
		l2.per = SCALE(1500);
		l2.tick = 250 * US;
		total = EARLY_THREADS * l2.per;
		l2.rec = calloc(total, sizeof(*l2.rec));
		assert_non_null(l2.rec);
		l2.s = svc_new(3, l2.tick, pools[v]);
		l2.nsh = spoke_shards(l2.s);
		for (unsigned i = 0; i < EARLY_PERIODIC; i++) {
			l2.per_t[i].period = periods[i];
			l2.per_t[i].t0 = spoke_now_ns();
			assert_int_equal(spoke_start_periodic(l2.s, periods[i], early_periodic_fn,
							      &l2.per_t[i], &l2.per_t[i].id),
					 0);
		}
		run_workers(EARLY_THREADS, early_worker, &l2);
		assert_int_equal(atomic_load(&l2.bad_rc), 0);
		ASSERT_EVENTUALLY(early_all_fired(&l2, total), "every timer to fire");
		for (unsigned i = 0; i < EARLY_PERIODIC; i++) {
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

/* Blocks its thread (the shard thread when inline) until released, or EVENTUALLY_NS. */
static void blocker_fn(void *arg)
{
	struct blocker *b = arg;
	uint64_t end = spoke_now_ns() + EVENTUALLY_NS;

	atomic_store(&b->blocking, 1);
	while (!atomic_load(&b->release) && spoke_now_ns() < end)
		sleep_ns(200 * US);
	atomic_store(&b->blocking, 0);
	atomic_store(&b->done, 1);
}

static struct blocker held_blk;
static struct trec held_rec[2];

/*
 * Contract line 2, second sentence ("late by at most one tick plus
 * scheduling delay when the machine is not overloaded"), as a functional
 * check, not a speed check: with a pool of 2 threads, one held by a callback
 * that blocks until released, 1 ms timers on either shard run on the other,
 * idle pool thread while the first is still held (the test gives them 20 s,
 * room for a stalled VM, then releases it; queued behind it they would not
 * run before). A callback must not queue behind an unrelated running
 * callback while a pool thread idles. Blocker on each shard in turn.
 */
static void line2_not_held_behind_running_callback(void **state)
{
	(void)state;
	struct spoke *s = svc_new(2, 250 * US, 2);

	for (unsigned k = 0; k < 2; k++) {
		bool ran;

		memset(&held_blk, 0, sizeof(held_blk));
		memset(held_rec, 0, sizeof(held_rec));
		assert_int_equal(spoke_start_on(s, k, 0, blocker_fn, &held_blk, NULL), 0);
		ASSERT_EVENTUALLY(atomic_load(&held_blk.blocking), "the blocker to run");
		for (unsigned j = 0; j < 2; j++)
			assert_int_equal(spoke_start_on(s, j, MS, trec_fire, &held_rec[j], NULL),
					 0);
		ran = WAIT_UNTIL(atomic_load(&held_rec[0].fired) && atomic_load(&held_rec[1].fired),
				 20 * SEC);
		atomic_store(&held_blk.release, 1);
		ASSERT_EVENTUALLY(atomic_load(&held_blk.done), "the blocker to return");
		if (!ran)
			fail_msg("blocker on shard %u: 1 ms timers on shard 0: %s, shard 1: %s "
				 "after 20 s, "
				 "with one of the 2 pool threads idle",
				 k, atomic_load(&held_rec[0].fired) ? "ran" : "NOT run",
				 atomic_load(&held_rec[1].fired) ? "ran" : "NOT run");
		ASSERT_EVENTUALLY(atomic_load(&held_rec[0].fired) &&
					  atomic_load(&held_rec[1].fired),
				  "the timers to run at all");
	}
	svc_destroy(s);
}

/*
 * Contract line 3 (cancel verdicts), one thread at a time: 0 when the call
 * prevented the run; -ENOENT for a second cancel, after cancel_sync, after
 * the callback ran, while it runs, for id 0 and for garbage ids (with and
 * without live timers, which garbage ids leave alone); a periodic cancel
 * gives 0 once. reset and cancel_sync agree. The stats count the winners.
 */
static struct trec cancel_rec[128];
static struct blocker cancel_blk;

static void line3_cancel_verdicts(void **state)
{
	(void)state;
	struct spoke *s = svc_new(2, 500 * US, 2);
	struct rng rng = {0x3000};
	static const uint64_t garbage[] = {1,
					   2,
					   3,
					   0xff,
					   0x100,
					   0xffffffffull,
					   1ull << 32,
					   (1ull << 32) + 1,
					   1ull << 63,
					   UINT64_MAX,
					   UINT64_MAX - 1,
					   0x5555555555555555ull};
	spoke_id a, b, c, d, p, live[100];
	unsigned wins = 0;
	static atomic_uint pruns;

	memset(cancel_rec, 0, sizeof(cancel_rec));
	memset(&cancel_blk, 0, sizeof(cancel_blk));
	atomic_store(&never_ran, 0);
	atomic_store(&pruns, 0);

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
	assert_int_equal(spoke_start(s, 1 * MS, trec_fire, &cancel_rec[0], &c), 0);
	ASSERT_EVENTUALLY(atomic_load(&cancel_rec[0].fired) == 1, "a 1 ms timer to fire");
	assert_int_equal(spoke_cancel(s, c), -ENOENT);
	assert_int_equal(spoke_cancel_sync(s, c), -ENOENT);
	assert_int_equal(spoke_reset(s, c, MS), -ENOENT);

	/* running (one-shot): nothing left to prevent */
	assert_int_equal(spoke_start(s, 0, blocker_fn, &cancel_blk, &d), 0);
	ASSERT_EVENTUALLY(atomic_load(&cancel_blk.blocking) == 1, "the callback to run");
	assert_int_equal(spoke_cancel(s, d), -ENOENT);
	assert_int_equal(spoke_reset(s, d, MS), -ENOENT);
	atomic_store(&cancel_blk.release, 1);
	ASSERT_EVENTUALLY(atomic_load(&cancel_blk.done) == 1, "the callback to return");

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

		/* a cancel that stopped a running periodic timer counts when that run ends */
		WAIT_UNTIL(
			(spoke_stats(s, st), st->total.pending == 0 && st->total.cancelled == wins),
			EVENTUALLY_NS);
		assert_int_equal(st->total.pending, 0);
		assert_int_equal(st->total.cancelled, wins);
		free(st);
	}
	svc_destroy(s);
}

#define CANCEL_THREADS 8

struct winner_ctx {
	struct spoke *s;
	unsigned n;
	spoke_id *ids;
	atomic_uint *wins;
};

static struct winner_ctx l3m;

static void winner_worker(unsigned idx, void *p)
{
	struct winner_ctx *c = p;
	struct rng rng = {0x3100 + idx};
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
	run_workers(CANCEL_THREADS, winner_worker, &l3m);
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

#define BUSY_THREADS 4
#define BUSY_NEW     50

struct busy_ctx {
	struct spoke *s;
	unsigned n;
	spoke_id *ids;
	struct blocker blk;
	struct trec fresh[BUSY_THREADS][BUSY_NEW];
	struct trec kept[BUSY_THREADS];
};

static struct busy_ctx l3b;

static void busy_worker(unsigned idx, void *p)
{
	struct busy_ctx *c = p;

	/* timers already in the owner's wheel */
	for (unsigned i = idx; i < c->n; i += BUSY_THREADS)
		BG_CHECK_INT(spoke_cancel(c->s, c->ids[i]), ==, 0);
	/* timers whose start the owner has not even seen */
	for (unsigned j = 0; j < BUSY_NEW; j++) {
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

	run_workers(BUSY_THREADS, busy_worker, &l3b);
	assert_int_equal(atomic_load(&l3b.blk.blocking), 1);
	atomic_store(&l3b.blk.release, 1);
	assert_no_bg_failures();

	for (unsigned t = 0; t < BUSY_THREADS; t++)
		ASSERT_EVENTUALLY(atomic_load(&l3b.kept[t].fired) == 1,
				  "uncancelled timers to run");
	ASSERT_EVENTUALLY(stats_settled(s, l3b.n + 1 + BUSY_THREADS * (BUSY_NEW + 1), 0),
			  "the stats to settle");
	assert_stats_settled(s, l3b.n + 1 + BUSY_THREADS * (BUSY_NEW + 1), 0);
	sleep_ms(10);
	for (unsigned t = 0; t < BUSY_THREADS; t++)
		for (unsigned j = 0; j < BUSY_NEW; j++)
			assert_int_equal(atomic_load(&l3b.fresh[t][j].fired), 0);
	assert_int_equal(atomic_load(&never_ran), 0);
	spoke_stats(s, st);
	assert_int_equal(st->shard[0].cancelled, l3b.n + BUSY_THREADS * BUSY_NEW);
	assert_int_equal(st->shard[0].fired, 1 + BUSY_THREADS);
	free(st);
	svc_destroy(s);
	free(l3b.ids);
}

#define LIVE_THREADS 300

struct live_ctx {
	struct spoke *s;
	spoke_id ids[LIVE_THREADS];
	pthread_barrier_t bar;
	atomic_int bad_cancel, bad_start, last_bad_rc;
};

static struct live_ctx l3t;

static void *live_thread(void *p)
{
	unsigned i = (unsigned)(uintptr_t)p;
	spoke_id id;
	int rc;

	pthread_barrier_wait(&l3t.bar); /* all 300 threads alive at once */
	rc = spoke_cancel(l3t.s, l3t.ids[i]);
	if (rc != 0) {
		atomic_fetch_add(&l3t.bad_cancel, 1);
		atomic_store(&l3t.last_bad_rc, rc);
	}
	rc = spoke_start(l3t.s, 3600 * SEC, never_fn, NULL, &id);
	if (rc == 0)
		rc = spoke_cancel(l3t.s, id);
	if (rc != 0) {
		atomic_fetch_add(&l3t.bad_start, 1);
		atomic_store(&l3t.last_bad_rc, rc);
	}
	pthread_barrier_wait(&l3t.bar); /* and still alive until all are done */
	return NULL;
}

/*
 * Contract line 3 ("from any thread"): a server with 300 threads alive at
 * once, each cancelling one pending timer (0 expected: nothing else
 * touches it) and starting and cancelling one of its own: every call gets
 * its verdict; none fails for want of per-thread resources.
 */
static void line3_cancel_from_300_live_threads(void **state)
{
	(void)state;
	pthread_t t[LIVE_THREADS];
	pthread_attr_t attr;

	memset(&l3t, 0, sizeof(l3t));
	atomic_store(&never_ran, 0);
	l3t.s = svc_new(2, 500 * US, 1);
	for (unsigned i = 0; i < LIVE_THREADS; i++)
		assert_int_equal(
			spoke_start_on(l3t.s, i % 2, 3600 * SEC, never_fn, NULL, &l3t.ids[i]), 0);
	assert_int_equal(pthread_barrier_init(&l3t.bar, NULL, LIVE_THREADS), 0);
	assert_int_equal(pthread_attr_init(&attr), 0);
	assert_int_equal(pthread_attr_setstacksize(&attr, 256 * 1024), 0);
	for (unsigned i = 0; i < LIVE_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], &attr, live_thread, (void *)(uintptr_t)i),
				 0);
	for (unsigned i = 0; i < LIVE_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_attr_destroy(&attr);
	pthread_barrier_destroy(&l3t.bar);
	if (atomic_load(&l3t.bad_cancel) || atomic_load(&l3t.bad_start))
		fail_msg("with %u threads alive: %d cancels of a pending timer and %d start+cancel "
			 "pairs failed (last error %d)",
			 LIVE_THREADS, atomic_load(&l3t.bad_cancel), atomic_load(&l3t.bad_start),
			 atomic_load(&l3t.last_bad_rc));
	ASSERT_EVENTUALLY(stats_settled(l3t.s, 2 * LIVE_THREADS, 0), "the stats to settle");
	assert_int_equal(atomic_load(&never_ran), 0);
	svc_destroy(l3t.s);
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

struct sync_call {
	struct spoke *s;
	spoke_id id;
	struct slow *w;
	int rc, running_at_return, runs_at_return;
};

static void *sync_cancel_sync_thread(void *p)
{
	struct sync_call *c = p;

	c->rc = spoke_cancel_sync(c->s, c->id);
	c->running_at_return = atomic_load(&c->w->running);
	c->runs_at_return = atomic_load(&c->w->runs);
	return NULL;
}

static struct slow sync_one, sync_per;

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
	static const unsigned pools[] = {0, 2};

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 500 * US, pools[v]);
		struct sync_call calls[4];
		pthread_t t[4];
		spoke_id id;
		int wins = 0;

		memset(&sync_one, 0, sizeof(sync_one));
		memset(&sync_per, 0, sizeof(sync_per));
		sync_one.sleep_ns = 50 * MS;
		sync_per.sleep_ns = 30 * MS;

		assert_int_equal(spoke_start(s, MS, slow_fn, &sync_one, &id), 0);
		ASSERT_EVENTUALLY(atomic_load(&sync_one.running) == 1, "the one-shot to run");
		for (unsigned i = 0; i < 2; i++) {
			calls[i] = (struct sync_call){.s = s, .id = id, .w = &sync_one};
			t[i] = thread_start(sync_cancel_sync_thread, &calls[i]);
		}
		for (unsigned i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			assert_int_equal(calls[i].rc, -ENOENT);
			assert_int_equal(calls[i].running_at_return, 0);
			assert_int_equal(calls[i].runs_at_return, 1);
		}

		assert_int_equal(spoke_start_periodic(s, 5 * MS, slow_fn, &sync_per, &id), 0);
		ASSERT_EVENTUALLY(atomic_load(&sync_per.runs) >= 2 &&
					  atomic_load(&sync_per.running),
				  "the periodic callback to run");
		for (unsigned i = 0; i < 4; i++) {
			calls[i] = (struct sync_call){.s = s, .id = id, .w = &sync_per};
			t[i] = thread_start(sync_cancel_sync_thread, &calls[i]);
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
			int runs = atomic_load(&sync_per.runs);

			sleep_ms(50);
			assert_int_equal(atomic_load(&sync_per.runs), runs);
		}
		assert_int_equal(atomic_load(&sync_per.overlap), 0);
		assert_int_equal(atomic_load(&sync_one.runs), 1);
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
	uint64_t end = spoke_now_ns() + HOLD_LIMIT_NS;

	while (atomic_load(&c->id) == 0 && spoke_now_ns() < end)
		sleep_ns(100 * US);
	if (n == c->stop_at) {
		uint64_t id = atomic_load(&c->id);

		atomic_store(&c->rc,
			     c->use_sync ? spoke_cancel_sync(c->s, id) : spoke_cancel(c->s, id));
		atomic_store(&c->rc_set, 1);
	}
}

static struct self_cancel sync_self[2];

/*
 * Contract line 4 (-EDEADLK): cancel_sync of a timer from inside its own
 * callback returns -EDEADLK instead of waiting for itself: a one-shot runs
 * once; a periodic one (cancelled at its 2nd run) runs no more (the cancel
 * takes effect), so a later cancel finds nothing. Inline and on the pool.
 */
static void line4_cancel_sync_own_callback_edeadlk(void **state)
{
	(void)state;
	static const unsigned pools[] = {0, 2};

	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 250 * US, pools[v]);
		spoke_id id;

		memset(sync_self, 0, sizeof(sync_self));
		for (unsigned i = 0; i < 2; i++) {
			sync_self[i].s = s;
			sync_self[i].use_sync = true;
		}
		sync_self[0].stop_at = 1;
		assert_int_equal(spoke_start(s, 2 * MS, self_cancel_fn, &sync_self[0], &id), 0);
		atomic_store(&sync_self[0].id, id);
		sync_self[1].stop_at = 2;
		assert_int_equal(spoke_start_periodic(s, MS, self_cancel_fn, &sync_self[1], &id),
				 0);
		atomic_store(&sync_self[1].id, id);

		ASSERT_EVENTUALLY(atomic_load(&sync_self[0].rc_set) &&
					  atomic_load(&sync_self[1].rc_set),
				  "the callbacks to call cancel_sync on themselves");
		assert_int_equal(atomic_load(&sync_self[0].rc), -EDEADLK);
		assert_int_equal(atomic_load(&sync_self[1].rc), -EDEADLK);
		sleep_ms(20);
		assert_int_equal(atomic_load(&sync_self[0].runs), 1);
		assert_int_equal(atomic_load(&sync_self[1].runs), 2);
		assert_int_equal(spoke_cancel(s, atomic_load(&sync_self[1].id)), -ENOENT);
		svc_destroy(s);
	}
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(line1_exactly_once_many_threads),
		SVC_TEST(line2_never_early_many_threads),
		SVC_TEST(line2_not_held_behind_running_callback),
		SVC_TEST(line3_cancel_verdicts),
		SVC_TEST(line3_cancel_one_winner_many_threads),
		SVC_TEST(line3_cancel_at_once_while_owner_busy),
		SVC_TEST(line3_cancel_from_300_live_threads),
		SVC_TEST(line4_cancel_sync_waits_for_running),
		SVC_TEST(line4_cancel_sync_own_callback_edeadlk),
	};

	return svc_main(argc, argv, "service contract 1-4", tests, ARRAY_SIZE(tests));
}
