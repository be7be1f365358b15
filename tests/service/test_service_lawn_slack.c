/* SPDX-License-Identifier: MIT */
/*
 * test_service_lawn_slack.c - Lawn TTL timers and the stage (the slack) of the timer
 * service of include/spoke/spoke.h (docs/contract.md, The service):
 *
 *   lawn_ttl_few_distinct                Lawn: many timers, 3 TTLs
 *   lawn_ttl_many_distinct               Lawn: thousands of distinct TTLs
 *   lawn_ttl_fifo_per_ttl                Lawn: one TTL's timers fire in start order
 *   slack_default_runs_within_slack      the stage: a timer runs within tick/4 of its
 *                                        deadline; a staged timer cancelled, reset
 *   slack_custom_width                   ... slack 60 us: 17 slots of 58 824 ns
 *   slack_one_slot_per_tick              ... slack >= tick: one slot, the tick's end
 *
 * Usage: test_service_lawn_slack [test name...]   (no name: all)
 */
#include "service_util.h"

/* ==== Lawn TTL timers ==========================================================================
 */

#define LW_THREADS 6

struct lw_ctx {
	struct spoke *s;
	unsigned per;
	bool distinct;
	struct trec *rec;
};

static struct lw_ctx lw;

static void lw_worker(unsigned idx, void *p)
{
	struct lw_ctx *c = p;
	struct rng rng = {0x1a00 + idx};
	static const uint64_t few[] = {1 * MS, 2500 * US, 4 * MS};

	for (unsigned j = 0; j < c->per; j++) {
		unsigned i = idx * c->per + j;
		struct trec *r = &c->rec[i];
		uint64_t ttl =
			c->distinct ? 500 * US + (uint64_t)i * 1013 : few[rng_below(&rng, 3)];
		spoke_id id;

		if (c->distinct && j < 5)
			ttl = j * 37; /* a few below a tick, and 0 */
		atomic_store(&r->earliest, spoke_now_ns() + ttl);
		BG_CHECK_INT(spoke_start_ttl(c->s, ttl, trec_fire, r, &id), ==, 0);
		if (rng_below(&rng, 4) == 0)
			trec_cancel(c->s, id, r);
	}
}

static void lw_run(bool distinct, unsigned per, unsigned threads)
{
	unsigned total = threads * per;

	memset(&lw, 0, sizeof(lw));
	trec_reset_globals();
	lw.per = per;
	lw.distinct = distinct;
	lw.rec = calloc(total, sizeof(*lw.rec));
	assert_non_null(lw.rec);
	lw.s = svc_new(3, 250 * US, 2);
	run_workers(threads, lw_worker, &lw);
	assert_trecs_end_once(lw.s, lw.rec, total, NULL, NULL);
	svc_destroy(lw.s);
	free(lw.rec);
}

/*
 * Lawn TTL timers, few distinct TTLs (1, 2.5, 4 ms) and many timers each
 * (12 000 from 6 threads; a quarter cancelled at once): each ends exactly
 * once, never early; the stats add up on every shard.
 */
static void lawn_ttl_few_distinct(void **state)
{
	(void)state;
	lw_run(false, SCALE(2000), LW_THREADS);
}

/*
 * Lawn TTL timers, all TTLs distinct (0.5 ms + i * 1013 ns for 6000 timers
 * from 4 threads, plus TTLs of 0 to 148 ns): each ends exactly once, never
 * early; the stats add up.
 */
static void lawn_ttl_many_distinct(void **state)
{
	(void)state;
	lw_run(true, SCALE(1500), 4);
}

/*
 * Lawn TTL timers fire in start order per TTL (the paper's FIFO queues): an
 * attached thread starts 32 timers of one TTL, with 8 of another TTL in
 * between, before it polls; the 32 run in the order they were started.
 * (The engine's collect once pushed each queue's due run onto the due list
 * one by one at its front, so a burst fired newest first.)
 */
static struct {
	unsigned n, order[40];
} lf;

static void lf_fire(void *arg)
{
	if (lf.n < ARRAY_SIZE(lf.order))
		lf.order[lf.n] = (unsigned)(uintptr_t)arg;
	lf.n++;
}

static void lawn_ttl_fifo_per_ttl(void **state)
{
	struct spoke *s = svc_new(1, 1 * MS, 0);
	unsigned next = 0;

	(void)state;
	memset(&lf, 0, sizeof(lf));
	assert_int_equal(spoke_attach(s, 0), 0);
	for (uintptr_t i = 0; i < 32; i++) {
		assert_int_equal(spoke_start_ttl(s, 3 * MS, lf_fire, (void *)i, NULL), 0);
		if (i % 4 == 1)
			assert_int_equal(
				spoke_start_ttl(s, 2 * MS, lf_fire, (void *)(100 + i), NULL), 0);
	}
	ASSERT_EVENTUALLY(spoke_poll(s) >= 0 && lf.n >= ARRAY_SIZE(lf.order), "all 40 to run");
	assert_int_equal(lf.n, ARRAY_SIZE(lf.order));
	for (unsigned k = 0; k < lf.n; k++) {
		if (lf.order[k] >= 100)
			continue;
		if (lf.order[k] != next)
			fail_msg("run %u was TTL timer %u, expected %u", k, lf.order[k], next);
		next++;
	}
	assert_int_equal(next, 32);
	svc_destroy(s);
}

/* ==== the stage: a timer runs within the slack of its deadline ================================
 *
 * Driven from an attached thread, so that every turn of the shard is a
 * spoke_poll of the test and spoke_next_deadline_ns shows when the shard plans
 * to look next. Planned wake-ups are bounded without trusting the clock:
 * the service reads its clock after the test's `ta`, so ta + next_deadline
 * is at most its planned wake, and the timer's deadline is at most the
 * test's clock after the start returned plus the delay.
 */

struct slack_ctx {
	struct spoke *s;
	uint64_t tick;	    /* the shards' tick */
	uint64_t slack;	    /* the slot width in effect (stats) */
	uint64_t ahead_max; /* worst planned wake past deadline + slack (ns) */
	struct trec rec[8];
	struct trec late[8];
	struct trec staged[32];
	atomic_int done;
};

static struct slack_ctx slk;

/* Sleep until the clock is past t (at once if it is). */
static void slack_sleep_past(uint64_t t)
{
	uint64_t now = spoke_now_ns();

	if (now < t)
		sleep_ns(t - now);
}

/*
 * Poll at each wake the shard plans until r ran; each plan is "now" (0) or at
 * most deadline + slack.
 */
static void slack_run_one(struct slack_ctx *c, struct trec *r, uint64_t latest_deadline)
{
	for (unsigned n = 0; n < 1000 && atomic_load(&r->fired) == 0; n++) {
		uint64_t ta = spoke_now_ns(), nd;
		int rc = spoke_next_deadline_ns(c->s, &nd);

		BG_CHECK_INT(rc, ==, 0);
		if (rc != 0)
			return;
		if (nd > 0 && ta + nd > latest_deadline + c->slack &&
		    ta + nd - latest_deadline - c->slack > c->ahead_max)
			c->ahead_max = ta + nd - latest_deadline - c->slack;
		sleep_ns(nd);
		BG_CHECK_INT(spoke_poll(c->s), >=, 0);
	}
	BG_CHECK_INT(atomic_load(&r->fired), ==, 1);
}

/*
 * Start r with `delay` and poll once, at the shard's first planned wake,
 * where it takes the timer from its wheel. true: r is now on the stage (not
 * run, its deadline still ahead); false: it ran there (its deadline was in
 * the first slot of its tick).
 */
static bool slack_stage_one(struct slack_ctx *c, struct trec *r, uint64_t delay, spoke_id *id)
{
	uint64_t nd = 0;

	atomic_store(&r->earliest, spoke_now_ns() + delay);
	BG_CHECK_INT(spoke_start(c->s, delay, trec_fire, r, id), ==, 0);
	BG_CHECK_INT(spoke_next_deadline_ns(c->s, &nd), ==, 0);
	sleep_ns(nd == UINT64_MAX ? 0 : nd);
	BG_CHECK_INT(spoke_poll(c->s), >=, 0);
	return atomic_load(&r->fired) == 0 && spoke_now_ns() < atomic_load(&r->earliest);
}

/*
 * Stage a timer from staged[], trying other places in the tick while one runs
 * at once (its deadline was in the first slot, or the poll came late: a
 * loaded machine under a sanitizer), for at most EVENTUALLY_NS. A try that
 * failed is polled until its timer ran, so that no later poll of the test
 * meets it; then its record can be used again.
 */
static struct trec *slack_stage_any(struct slack_ctx *c, unsigned *next, spoke_id *id)
{
	uint64_t end = spoke_now_ns() + EVENTUALLY_NS;

	while (spoke_now_ns() < end) {
		unsigned k = (*next)++;
		struct trec *r = &c->staged[k % ARRAY_SIZE(c->staged)];

		atomic_store(&r->fired, 0);
		if (slack_stage_one(c, r, c->tick + ((k + 1) % 7) * (c->tick / 7) + c->tick / 3,
				    id))
			return r;
		while (atomic_load(&r->fired) == 0 && spoke_now_ns() < end) {
			BG_CHECK_INT(spoke_poll(c->s), >=, 0);
			sleep_ns(c->tick / 8);
		}
	}
	BG_CHECK(!"no timer stayed on the stage");
	return NULL;
}

struct slack_foreign {
	struct spoke *s;
	struct trec *r;
};

/* Another thread's start on the attached shard: a message, 1 us ahead. */
static void *slack_foreign_main(void *p)
{
	struct slack_foreign *f = p;

	atomic_store(&f->r->earliest, spoke_now_ns() + US);
	BG_CHECK_INT(spoke_start_on(f->s, 0, US, trec_fire, f->r, NULL), ==, 0);
	return NULL;
}

static void *slack_thread(void *p)
{
	struct slack_ctx *c = p;
	unsigned next = 0;
	spoke_id a, b, x;
	struct trec *r;
	uint64_t nd;

	BG_CHECK_INT(spoke_attach(c->s, 0), ==, 0);
	/* Eight deadlines spread over a tick: each runs within the slack. */
	for (unsigned i = 0; i < ARRAY_SIZE(c->rec); i++) {
		uint64_t delay = c->tick + i * (c->tick / 8) + c->tick / 16, t1;

		atomic_store(&c->rec[i].earliest, spoke_now_ns() + delay);
		BG_CHECK_INT(spoke_start(c->s, delay, trec_fire, &c->rec[i], NULL), ==, 0);
		t1 = spoke_now_ns();
		slack_run_one(c, &c->rec[i], t1 + delay);
	}
	/*
	 * A start whose message is taken after its deadline runs within the
	 * slack of it, not at the end of the tick (as if it had asked for the
	 * next tick, like a start with delay 0).
	 */
	for (unsigned i = 0; i < ARRAY_SIZE(c->late); i++) {
		struct slack_foreign f = {c->s, &c->late[i]};
		uint64_t t1;

		BG_CHECK_INT(spoke_poll(c->s), >=, 0);
		pthread_join(thread_start(slack_foreign_main, &f), NULL);
		t1 = spoke_now_ns();
		sleep_ns(300 * US);
		slack_run_one(c, &c->late[i], t1 + US);
	}
	/* With one slot a tick, a timer is taken from the wheel when it is due. */
	if (c->slack >= c->tick) {
		atomic_store(&c->done, 1);
		return NULL;
	}
	/* A cancelled timer leaves the stage: no run, no count, no planned wake-up. */
	r = slack_stage_any(c, &next, &a);
	if (r) {
		BG_CHECK_U64(stats_of(c->s, 0).pending, ==, 1);
		BG_CHECK_INT(spoke_cancel(c->s, a), ==, 0);
		BG_CHECK_INT(spoke_poll(c->s), ==, 0);
		BG_CHECK_U64(stats_of(c->s, 0).pending, ==, 0);
		BG_CHECK_INT(spoke_next_deadline_ns(c->s, &(uint64_t){0}), ==, 1);
		/* Its handle goes to the next start; past the old deadline nothing runs. */
		BG_CHECK_INT(spoke_start(c->s, 3600 * SEC, never_fn, NULL, &x), ==, 0);
		slack_sleep_past(atomic_load(&r->earliest) + 2 * c->tick);
		BG_CHECK_INT(spoke_poll(c->s), ==, 0);
		BG_CHECK_U64(stats_of(c->s, 0).pending, ==, 1);
		BG_CHECK_INT(atomic_load(&r->fired), ==, 0);
		BG_CHECK_INT(spoke_cancel(c->s, x), ==, 0);
	}
	/* A reset moves a staged timer off the stage, and back on. */
	r = slack_stage_any(c, &next, &b);
	if (r) {
		uint64_t t1;

		BG_CHECK_INT(spoke_reset(c->s, b, 3600 * SEC), ==, 0);
		BG_CHECK_INT(spoke_next_deadline_ns(c->s, &nd), ==, 0);
		BG_CHECK_U64(nd, >, 10 * SEC);
		slack_sleep_past(atomic_load(&r->earliest) + 2 * c->tick);
		BG_CHECK_INT(spoke_poll(c->s), ==, 0);
		BG_CHECK_INT(atomic_load(&r->fired), ==, 0);
		atomic_store(&r->earliest, spoke_now_ns() + c->tick / 3);
		BG_CHECK_INT(spoke_reset(c->s, b, c->tick / 3), ==, 0);
		t1 = spoke_now_ns();
		slack_run_one(c, r, t1 + c->tick / 3);
	}
	atomic_store(&c->done, 1);
	return NULL;
}

/* tick_ns and slack_ns as given; `width`: the slot width the shard must report. */
static void slack_case(uint64_t tick_ns, uint64_t slack_ns, uint64_t width)
{
	struct spoke_config cfg;
	struct spoke_stats *st = stats_new();
	pthread_t t;

	memset(&slk, 0, sizeof(slk));
	trec_reset_globals();
	atomic_store(&never_ran, 0);
	svc_config(&cfg, 2, tick_ns, 1);
	cfg.slack_ns = slack_ns;
	slk.s = svc_create_cfg(&cfg);
	spoke_stats(slk.s, st);
	assert_int_equal(st->shard[0].slack_ns, width);
	assert_int_equal(st->shard[1].slack_ns, width);
	free(st);
	slk.tick = tick_ns;
	slk.slack = width;
	t = thread_start(slack_thread, &slk);
	ASSERT_EVENTUALLY_MSG(atomic_load(&slk.done), "the attached thread did not finish");
	pthread_join(t, NULL);
	assert_no_bg_failures();
	assert_never_early();
	assert_int_equal(atomic_load(&never_ran), 0);
	if (slk.ahead_max)
		fail_msg("the shard planned to look at a timer %" PRIu64
			 " ns after its deadline + slack (%" PRIu64 " ns)",
			 slk.ahead_max, width);
	svc_destroy(slk.s);
}

/*
 * Default slack (tick / 4, 10 ms ticks, so that a timer stays staged for a
 * while even on a loaded machine): deadlines all over the tick each run at the end
 * of their slot, not of their tick, also when the message of another
 * thread's start waited past the deadline; a staged timer can be cancelled (no run,
 * pending 0, no wake-up left behind, its handle reused) and reset (off the
 * stage and back).
 */
static void slack_default_runs_within_slack(void **state)
{
	(void)state;
	slack_case(10 * MS, 0, 10 * MS / 4);
}

/* A slack of 60 us: 17 slots of 58 824 ns (the tick over whole slots, rounded up). */
static void slack_custom_width(void **state)
{
	(void)state;
	slack_case(MS, 60 * US, 58824);
}

/* A slack of a tick or more (50 ms on 10 ms): one slot, every timer at the end of its tick. */
static void slack_one_slot_per_tick(void **state)
{
	(void)state;
	slack_case(10 * MS, 50 * MS, 10 * MS);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(lawn_ttl_few_distinct), SVC_TEST(lawn_ttl_many_distinct),
		SVC_TEST(lawn_ttl_fifo_per_ttl), SVC_TEST(slack_default_runs_within_slack),
		SVC_TEST(slack_custom_width),	 SVC_TEST(slack_one_slot_per_tick),
	};

	return svc_main(argc, argv, "service lawn and slack", tests, ARRAY_SIZE(tests));
}
