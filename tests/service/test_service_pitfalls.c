/* SPDX-License-Identifier: MIT */
/*
 * test_service_pitfalls.c - the pitfalls the service issue names, each
 * proved by its own test with several threads (docs/contract.md,
 * include/spoke/spoke.h):
 *
 *   pitfall_cancel_overtakes_start       insertion of a cancelled timer dropped; counters once
 *   pitfall_state_word_arbitration       start/cancel/reset/expire races, stale ids, waves
 *   pitfall_cross_core_start_wakes_owner an earlier start/reset/TTL wakes a sleeping shard
 *   pitfall_churn_memory_bounded         cancelled timers unlinked (pending 0), RSS flat
 *   pitfall_delay0_rearm_inline          delay 0 from a callback: next tick, not same pass
 *   pitfall_delay0_rearm_pool
 *   pitfall_delay0_rearm_attached        ... one run per poll
 *
 * The periodic pitfalls are in test_service_reset.c (line5_periodic_*), the
 * destroy pitfall in test_service_lifecycle.c (line8_*).
 *
 * Usage: test_service_pitfalls [test name...]   (no name: all)
 */
#include "service_util.h"

struct blocker {
	atomic_int blocking, release;
};

/* Blocks the thread it runs on until released (or 30 s). */
static void blocker_fn(void *arg)
{
	struct blocker *b = arg;
	uint64_t end = spoke_now_ns() + 30 * SEC;

	atomic_store(&b->blocking, 1);
	while (!atomic_load(&b->release) && spoke_now_ns() < end)
		sleep_ns(200 * US);
	atomic_store(&b->blocking, 0);
}

/* ==== pitfall: cancel can overtake start ============================================ */

#define OV_THREADS	4
#define OV_BLOCKED	500
#define OV_RACE_THREADS 8

struct ov_ctx {
	struct spoke *s;
	struct blocker blk;
	unsigned per;
	struct trec *rec;
};

static struct ov_ctx ov;

static void ov_blocked_worker(unsigned idx, void *p)
{
	struct ov_ctx *c = p;

	for (unsigned j = 0; j < OV_BLOCKED; j++) {
		spoke_id id;

		BG_CHECK_INT(spoke_start_on(c->s, 1, j % 2 ? 0 : 3600 * SEC, never_fn, NULL, &id),
			     ==, 0);
		BG_CHECK_INT(spoke_cancel(c->s, id), ==, 0);
	}
	(void)idx;
}

static void ov_race_worker(unsigned idx, void *p)
{
	struct ov_ctx *c = p;
	struct rng rng = {0x0a00 + idx};

	for (unsigned j = 0; j < c->per; j++) {
		struct trec *r = &c->rec[idx * c->per + j];
		uint64_t d = rng_below(&rng, 4) ? 0 : rng_below(&rng, 2 * MS);
		spoke_id id;
		int rc;

		atomic_store(&r->earliest, spoke_now_ns() + d);
		BG_CHECK_INT(
			spoke_start_on(c->s, (unsigned)rng_below(&rng, 3), d, trec_fire, r, &id),
			==, 0);
		rc = rng_below(&rng, 4) ? spoke_cancel(c->s, id) : spoke_cancel_sync(c->s, id);
		if (rc == 0)
			atomic_fetch_add(&r->cancelled, 1);
		else
			BG_CHECK_INT(rc, ==, -ENOENT);
	}
}

/*
 * Pitfall "cancel can overtake start": (a) shard 1 is stuck in an inline
 * callback, so its owner sees neither starts nor cancels; 4 threads start
 * 2000 timers on it (delay 0 or an hour) and cancel each at once: every
 * cancel gives 0; once released, none runs, and each counter moved exactly
 * once per timer: started 2001, cancelled 2000, fired 1, pending 0. (b) 8
 * threads start timers (mostly delay 0) on 3 shards and cancel each at once
 * while the owners run: per timer exactly one of run / winning cancel, and
 * the stats agree.
 */
static void pitfall_cancel_overtakes_start(void **state)
{
	(void)state;
	struct spoke_stats *st = stats_new();
	unsigned total, fired = 0, cancelled = 0;

	memset(&ov, 0, sizeof(ov));
	atomic_store(&never_ran, 0);
	trec_reset_globals();
	ov.s = svc_new(2, 250 * US, 0);
	assert_int_equal(spoke_start_on(ov.s, 1, 0, blocker_fn, &ov.blk, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&ov.blk.blocking), "shard 1 to be stuck");
	run_workers(OV_THREADS, ov_blocked_worker, &ov);
	atomic_store(&ov.blk.release, 1);
	assert_no_bg_failures();
	ASSERT_EVENTUALLY(stats_settled(ov.s, OV_THREADS * OV_BLOCKED + 1, 0), "stats to settle");
	assert_stats_settled(ov.s, OV_THREADS * OV_BLOCKED + 1, 0);
	spoke_stats(ov.s, st);
	assert_int_equal(st->shard[1].started, OV_THREADS * OV_BLOCKED + 1);
	assert_int_equal(st->shard[1].cancelled, OV_THREADS * OV_BLOCKED);
	assert_int_equal(st->shard[1].fired, 1);
	sleep_ms(5);
	assert_int_equal(atomic_load(&never_ran), 0);
	svc_destroy(ov.s);

	ov.s = svc_new(3, 200 * US, 2);
	ov.per = SCALE(5000);
	total = OV_RACE_THREADS * ov.per;
	ov.rec = calloc(total, sizeof(*ov.rec));
	assert_non_null(ov.rec);
	run_workers(OV_RACE_THREADS, ov_race_worker, &ov);
	assert_trecs_end_once(ov.s, ov.rec, total, &fired, &cancelled);
	spoke_stats(ov.s, st);
	assert_int_equal(st->total.fired, fired);
	assert_int_equal(st->total.cancelled, cancelled);
	svc_destroy(ov.s);
	free(ov.rec);
	free(st);
}

/* ==== pitfall: one state word arbitrates ============================================= */

#define SW_THREADS 8
#define SW_WAVE	   128
#define SW_OPS	   24

struct sw_ctx {
	struct spoke *s;
	unsigned waves;
	struct trec *rec; /* waves * SW_WAVE */
	pthread_barrier_t bar;
};

static struct sw_ctx sw;

static void sw_fn(void *arg)
{
	struct trec *r = arg;
	uint64_t end;

	atomic_store(&r->running, 1);
	trec_fire(r);
	end = spoke_now_ns() + 20 * US;
	while (spoke_now_ns() < end)
		;
	atomic_store(&r->running, 0);
}

static void sw_worker(unsigned idx, void *p)
{
	struct sw_ctx *c = p;
	struct rng rng = {0x5a00 + idx};

	for (unsigned w = 0; w < c->waves; w++) {
		struct trec *wave = &c->rec[w * SW_WAVE];

		for (unsigned i = idx; i < SW_WAVE; i += SW_THREADS) {
			uint64_t d = rng_below(&rng, 3) * 100 * US;
			spoke_id id;

			atomic_store(&wave[i].earliest, spoke_now_ns() + d);
			BG_CHECK_INT(spoke_start_on(c->s, (unsigned)rng_below(&rng, 2), d, sw_fn,
						    &wave[i], &id),
				     ==, 0);
			atomic_store(&wave[i].id, id);
		}
		pthread_barrier_wait(&c->bar);
		for (unsigned k = 0; k < SW_OPS; k++) {
			/* this wave's timers, or the previous wave's: mostly stale ids by now */
			struct trec *r =
				(w > 0 && rng_below(&rng, 3) == 0 ? wave - SW_WAVE : wave) +
				rng_below(&rng, SW_WAVE);
			uint64_t id = atomic_load(&r->id);
			int rc;

			switch (rng_below(&rng, 3)) {
			case 0:
				rc = spoke_cancel(c->s, id);
				if (rc == 0) {
					atomic_fetch_add(&r->cancelled, 1);
					/* decided: nothing may bring it back or cancel it again */
					BG_CHECK_INT(spoke_reset(c->s, id, 0), ==, -ENOENT);
					BG_CHECK_INT(spoke_cancel(c->s, id), ==, -ENOENT);
				} else {
					BG_CHECK_INT(rc, ==, -ENOENT);
				}
				break;
			case 1:
				rc = spoke_cancel_sync(c->s, id);
				if (rc == 0)
					atomic_fetch_add(&r->cancelled, 1);
				else
					BG_CHECK_INT(rc, ==, -ENOENT);
				BG_CHECK_INT(atomic_load(&r->running), ==, 0);
				break;
			default: {
				uint64_t d = rng_below(&rng, 3) * 100 * US;
				uint64_t bound = spoke_now_ns() + d, e = atomic_load(&r->earliest);

				/* never early: not before the smallest deadline it may be given */
				while (bound < e &&
				       !atomic_compare_exchange_weak(&r->earliest, &e, bound))
					;
				rc = spoke_reset(c->s, id, d);
				if (rc != 0)
					BG_CHECK_INT(rc, ==, -ENOENT);
				break;
			}
			}
		}
		pthread_barrier_wait(&c->bar);
	}
}

/*
 * Pitfall "one atomic state word arbitrates start/cancel/expire/reset, with a
 * generation": in waves of 128 timers due within 0-200 us on 2 shards, 8
 * threads race cancel, cancel_sync and reset (to 0-200 us) on this wave's
 * timers while they expire, and on the previous wave's (stale ids, their
 * slots being reused by this wave). Per timer exactly one of run / winning
 * cancel; after a winning cancel the same thread's reset and cancel give
 * -ENOENT at once; after cancel_sync the callback is not running; nothing
 * runs before its start time + the smaller of its delays.
 */
static void pitfall_state_word_arbitration(void **state)
{
	(void)state;
	unsigned total;

	memset(&sw, 0, sizeof(sw));
	trec_reset_globals();
	sw.waves = SCALE(60);
	total = sw.waves * SW_WAVE;
	sw.rec = calloc(total, sizeof(*sw.rec));
	assert_non_null(sw.rec);
	assert_int_equal(pthread_barrier_init(&sw.bar, NULL, SW_THREADS), 0);
	sw.s = svc_new(2, 100 * US, 2);
	run_workers(SW_THREADS, sw_worker, &sw);
	assert_trecs_end_once(sw.s, sw.rec, total, NULL, NULL);
	svc_destroy(sw.s);
	pthread_barrier_destroy(&sw.bar);
	free(sw.rec);
}

/* ==== pitfall: an earlier cross-core start wakes the owner ============================== */

/*
 * Functional bounds only: the sleeper aims at an hour, so a lost wake-up
 * shows as an hour; a woken owner under valgrind on an overloaded machine
 * took 535 ms once, and a stalled VM adds seconds, so the bound is 15 s.
 */
#define WK_HOLD_NS    (3600 * SEC)
#define WAKE_BOUND_NS (15 * SEC)
#define WK_WAIT_NS    (20 * SEC)

struct wk_ctx {
	struct spoke *s;
	unsigned nsh;
	struct trec rec[64];
	atomic_uint next;
};

static struct wk_ctx wk;

/* Starts a 1 ms timer (on shard k, or TTL) from this thread; returns how long it took to run. */
static uint64_t wk_start_and_wait(struct wk_ctx *c, int how, unsigned k)
{
	unsigned i = atomic_fetch_add(&c->next, 1);
	struct trec *r = &c->rec[i];
	uint64_t t0 = spoke_now_ns();
	int rc;

	atomic_store(&r->earliest, t0 + MS);
	if (how == 0)
		rc = spoke_start_on(c->s, k, MS, trec_fire, r, NULL);
	else
		rc = spoke_start_ttl(c->s, MS, trec_fire, r, NULL);
	if (rc != 0) {
		svc_bg_fail(__FILE__, __LINE__, "start gave %d", rc);
		return 0;
	}
	if (!WAIT_UNTIL(atomic_load(&r->fired) == 1, WK_WAIT_NS))
		return UINT64_MAX;
	return atomic_load(&r->fired_at) - t0;
}

static struct trec wk_reset_rec[8];

static void wk_worker(unsigned idx, void *p)
{
	struct wk_ctx *c = p;
	struct rng rng = {0xbb00 + idx};

	for (int round = 0; round < 3; round++) {
		uint64_t lat;

		sleep_ns(20 * MS + rng_below(&rng, 20 * MS));
		lat = wk_start_and_wait(c, 0, (unsigned)rng_below(&rng, c->nsh));
		if (lat >= WAKE_BOUND_NS)
			svc_bg_fail(__FILE__, __LINE__,
				    "thread %u: a 1 ms timer on a shard asleep toward an hour ran "
				    "after "
				    "%" PRIu64 " ms",
				    idx, lat == UINT64_MAX ? WK_WAIT_NS / MS : lat / MS);
	}
}

/*
 * Pitfall "a cross-core start earlier than the owner's planned sleep must wake
 * the owner": every shard sleeps toward a timer an hour away (and a TTL
 * timer); then a 1 ms timer started on it from another thread (start_on), a
 * timer an hour away reset to 1 ms, and a 1 ms TTL timer each run within
 * 15 s (a functional bound for the wake-up, not a speed check: without it
 * they run after an hour). Repeated, and from 4 threads at random moments.
 */
static void pitfall_cross_core_start_wakes_owner(void **state)
{
	(void)state;
	spoke_id hold[8], ttl_hold, rid;

	memset(&wk, 0, sizeof(wk));
	memset(wk_reset_rec, 0, sizeof(wk_reset_rec));
	trec_reset_globals();
	wk.s = svc_new(2, MS, 1);
	wk.nsh = spoke_shards(wk.s);
	for (unsigned k = 0; k < wk.nsh; k++)
		assert_int_equal(spoke_start_on(wk.s, k, WK_HOLD_NS, never_fn, NULL, &hold[k]), 0);
	assert_int_equal(spoke_start_ttl(wk.s, WK_HOLD_NS, never_fn, NULL, &ttl_hold), 0);
	sleep_ms(50);
	for (int round = 0; round < 3; round++) {
		for (unsigned k = 0; k < wk.nsh; k++) {
			uint64_t lat = wk_start_and_wait(&wk, 0, k);

			if (lat >= WAKE_BOUND_NS)
				fail_msg("start_on(%u, 1 ms) on a shard asleep toward an hour ran "
					 "after %s "
					 "%" PRIu64 " ms",
					 k, lat == UINT64_MAX ? "more than" : "",
					 lat == UINT64_MAX ? WK_WAIT_NS / MS : lat / MS);
			sleep_ms(30);
		}
	}
	for (unsigned k = 0; k < wk.nsh; k++) {
		uint64_t t0;

		assert_int_equal(
			spoke_start_on(wk.s, k, WK_HOLD_NS, trec_fire, &wk_reset_rec[k], &rid), 0);
		sleep_ms(30);
		t0 = spoke_now_ns();
		assert_int_equal(spoke_reset(wk.s, rid, MS), 0);
		if (!WAIT_UNTIL(atomic_load(&wk_reset_rec[k].fired) == 1, WK_WAIT_NS))
			fail_msg("shard %u: a timer an hour away reset to 1 ms did not run within "
				 "%" PRIu64 " s",
				 k, WK_WAIT_NS / SEC);
		if (atomic_load(&wk_reset_rec[k].fired_at) - t0 >= WAKE_BOUND_NS)
			fail_msg("shard %u: a timer an hour away reset to 1 ms ran after %" PRIu64
				 " ms",
				 k, (atomic_load(&wk_reset_rec[k].fired_at) - t0) / MS);
		sleep_ms(30);
	}
	for (int round = 0; round < 3; round++) {
		uint64_t lat = wk_start_and_wait(&wk, 1, 0);

		if (lat >= WAKE_BOUND_NS)
			fail_msg("a 1 ms TTL timer with every shard asleep toward an hour ran "
				 "after "
				 "%" PRIu64 " ms",
				 lat == UINT64_MAX ? WK_WAIT_NS / MS : lat / MS);
		sleep_ms(30);
	}
	run_workers(4, wk_worker, &wk);
	assert_no_bg_failures();
	assert_never_early();
	for (unsigned k = 0; k < wk.nsh; k++)
		assert_int_equal(spoke_cancel(wk.s, hold[k]), 0);
	assert_int_equal(spoke_cancel(wk.s, ttl_hold), 0);
	svc_destroy(wk.s);
}

/* ==== pitfall: memory stays bounded under churn ===================================== */

#define CH_THREADS 8
#define CH_ROUNDS  20

struct ch_ctx {
	struct spoke *s;
	unsigned per;
};

static struct ch_ctx ch;

static void ch_worker(unsigned idx, void *p)
{
	struct ch_ctx *c = p;
	struct rng rng = {0xcc00 + idx};

	for (unsigned j = 0; j < c->per; j++) {
		spoke_id id;
		int rc;

		switch (rng_below(&rng, 3)) {
		case 0:
			rc = spoke_start(c->s, 3600 * SEC, never_fn, NULL, &id);
			break;
		case 1:
			rc = spoke_start_on(c->s, (unsigned)rng_below(&rng, 2), 3600 * SEC,
					    never_fn, NULL, &id);
			break;
		default:
			rc = spoke_start_ttl(c->s, 3600 * SEC + rng_below(&rng, 4) * SEC, never_fn,
					     NULL, &id);
			break;
		}
		BG_CHECK_INT(rc, ==, 0);
		BG_CHECK_INT(spoke_cancel(c->s, id), ==, 0);
	}
}

static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * Pitfall "memory stays bounded under start/cancel churn": 8 threads start
 * hour-long timers (one-shot on their shard or another, and TTL) and cancel
 * each at once, 1000 each per round, 20 rounds a phase (160 000 timers);
 * after each round pending drops to 0 (cancelled timers are unlinked, not
 * left until their deadline an hour away) and every counter adds up; a
 * second identical phase does not grow the resident set by more than 8 MB,
 * half of what keeping its 160 000 handles would take (plain builds only:
 * sanitizers keep freed memory). Each round's threads are new (they take
 * over the arenas of the last round's), and the round ends when the shards
 * have taken every cancel: how many handles are in flight at once then
 * depends on the round's size, not on how far 8 producers on 2 CPUs happen
 * to outrun the shard threads (which, in one 160 000-timer round, made the
 * second phase grow by 9 MB now and then with nothing kept).
 */
static void pitfall_churn_memory_bounded(void **state)
{
	(void)state;
	struct spoke_stats *st = stats_new();
	size_t rss1 = 0, rss2;
	unsigned round_total, done = 0;

	memset(&ch, 0, sizeof(ch));
	atomic_store(&never_ran, 0);
	ch.per = SCALE(1000);
	round_total = CH_THREADS * ch.per;
	ch.s = svc_new(2, 500 * US, 1);
	for (int phase = 1; phase <= 2; phase++) {
		for (unsigned round = 0; round < CH_ROUNDS; round++) {
			run_workers(CH_THREADS, ch_worker, &ch);
			assert_no_bg_failures();
			done += round_total;
			ASSERT_EVENTUALLY(stats_settled(ch.s, done, 0),
					  "pending to drop to 0 after the churn");
			spoke_stats(ch.s, st);
			assert_int_equal(st->total.cancelled, done);
			assert_int_equal(st->total.fired, 0);
		}
		if (phase == 1)
			rss1 = rss_bytes();
	}
	rss2 = rss_bytes();
	if (!TEST_TSAN && !TEST_ASAN && rss1 && rss2 > rss1 + 8 * 1024 * 1024)
		fail_msg("resident set grew from %zu kB to %zu kB over an identical second churn",
			 rss1 / 1024, rss2 / 1024);
	assert_int_equal(atomic_load(&never_ran), 0);
	free(st);
	svc_destroy(ch.s);
}

/* ==== pitfall: delay 0 from a callback runs at the next tick ============================== */

struct chain {
	struct spoke *s;
	unsigned shard;
	atomic_uint runs;
	atomic_int stop;
};

static struct chain chains[4];

static void chain_fn(void *arg)
{
	struct chain *c = arg;

	atomic_fetch_add(&c->runs, 1);
	if (!atomic_load(&c->stop))
		BG_CHECK_INT(spoke_start_on(c->s, c->shard, 0, chain_fn, c, NULL), ==, 0);
}

/* Each chain re-arms itself with delay 0 on its own shard: at most ~1 run per tick. */
static void delay0_managed(unsigned pool)
{
	const uint64_t tick = MS;
	struct spoke *s = svc_new(2, tick, pool);
	uint64_t ta, tb;
	unsigned ra[2], rb[2];

	memset(chains, 0, sizeof(chains));
	for (unsigned k = 0; k < 2; k++) {
		chains[k].s = s;
		chains[k].shard = k;
		assert_int_equal(spoke_start_on(s, k, 0, chain_fn, &chains[k], NULL), 0);
	}
	for (unsigned k = 0; k < 2; k++)
		ASSERT_EVENTUALLY(atomic_load(&chains[k].runs) >= 3, "the chain to go on");
	ta = spoke_now_ns();
	for (unsigned k = 0; k < 2; k++)
		ra[k] = atomic_load(&chains[k].runs);
	sleep_ms(100);
	for (unsigned k = 0; k < 2; k++)
		rb[k] = atomic_load(&chains[k].runs);
	tb = spoke_now_ns();
	for (unsigned k = 0; k < 2; k++) /* and it is not lost either */
		ASSERT_EVENTUALLY(atomic_load(&chains[k].runs) > ra[k], "the chain to go on");
	for (unsigned k = 0; k < 2; k++)
		atomic_store(&chains[k].stop, 1);
	for (unsigned k = 0; k < 2; k++) {
		uint64_t ticks = (tb - ta) / tick + 1;

		if (rb[k] - ra[k] > 2 * ticks + 10)
			fail_msg("shard %u: a callback re-arming itself with delay 0 ran %u times "
				 "in "
				 "%" PRIu64 " ticks (at most one per tick expected)",
				 k, rb[k] - ra[k], ticks);
	}
	sleep_ms(10);
	assert_no_bg_failures();
	svc_destroy(s);
}

/*
 * Pitfall "timers armed from a callback with delay 0 run at the next tick,
 * never in the same pass" (callbacks inline on the shard thread, which owns
 * the wheel): a callback re-arming itself with delay 0 on its own shard
 * (1 ms tick) runs a bounded number of times per tick, and keeps running.
 */
static void pitfall_delay0_rearm_inline(void **state)
{
	(void)state;
	delay0_managed(0);
}

/* The same with callbacks on a pool of 2 threads (the re-arm goes through the inbox). */
static void pitfall_delay0_rearm_pool(void **state)
{
	(void)state;
	delay0_managed(2);
}

struct d0a_ctx {
	struct spoke *s;
	atomic_uint runs;
	atomic_int stop;
	int results[32];
	atomic_int done;
};

static struct d0a_ctx d0a;

static void d0a_fn(void *arg)
{
	struct d0a_ctx *c = arg;

	atomic_fetch_add(&c->runs, 1);
	if (!atomic_load(&c->stop))
		BG_CHECK_INT(spoke_start(c->s, 0, d0a_fn, c, NULL), ==,
			     0); /* own (attached) shard */
}

static void *d0a_thread(void *p)
{
	struct d0a_ctx *c = p;

	BG_CHECK_INT(spoke_attach(c->s, 0), ==, 0);
	BG_CHECK_INT(spoke_start(c->s, 0, d0a_fn, c, NULL), ==, 0);
	for (unsigned i = 0; i < 20; i++) {
		sleep_ns(2500 * US); /* more than two ticks: what is armed is due */
		c->results[i] = spoke_poll(c->s);
	}
	atomic_store(&c->stop, 1);
	sleep_ns(2500 * US);
	(void)spoke_poll(c->s);
	atomic_store(&c->done, 1);
	return NULL;
}

/*
 * Pitfall "delay 0 from a callback: next tick, never the same pass" in
 * attached mode: the callback re-arms itself with delay 0 (spoke_start from
 * the attached thread: its own shard); each spoke_poll, 2.5 ticks apart,
 * returns (no endless loop) having run it exactly once.
 */
static void pitfall_delay0_rearm_attached(void **state)
{
	(void)state;
	pthread_t t;

	memset(&d0a, 0, sizeof(d0a));
	d0a.s = svc_new(2, MS, 1);
	t = thread_start(d0a_thread, &d0a);
	ASSERT_EVENTUALLY_MSG(atomic_load(&d0a.done),
			      "spoke_poll never returned (a delay-0 re-arm ran in the same pass?)");
	pthread_join(t, NULL);
	assert_no_bg_failures();
	for (unsigned i = 0; i < 20; i++)
		if (d0a.results[i] != 1)
			fail_msg("poll %u ran %d callbacks (expected exactly 1)", i,
				 d0a.results[i]);
	svc_destroy(d0a.s);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(pitfall_cancel_overtakes_start),
		SVC_TEST(pitfall_state_word_arbitration),
		SVC_TEST(pitfall_cross_core_start_wakes_owner),
		SVC_TEST(pitfall_churn_memory_bounded),
		SVC_TEST(pitfall_delay0_rearm_inline),
		SVC_TEST(pitfall_delay0_rearm_pool),
		SVC_TEST(pitfall_delay0_rearm_attached),
	};

	return svc_main(argc, argv, "service pitfalls", tests, ARRAY_SIZE(tests));
}
