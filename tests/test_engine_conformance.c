/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_engine_conformance.c - every scheme named by spoke_engine_schemes()
 * keeps the engine contract (docs/contract.md, E1-E10) and include/spoke/engine.h.
 *
 * What it proves, for each scheme with its default parameters and, where the
 * scheme has any, with non-default geometries (tiny and deep hierarchies
 * whose levels do not cover 64 bits, hashed tables of 1 and 2 buckets, tiny
 * wheels, a heap that must grow):
 *   - seeded random sequences of start / re-arm / stop / advance, with
 *     callbacks that start and stop timers (themselves included), agree with
 *     the oracle of engine_oracle.h: each timer fires exactly once, exactly
 *     at its deadline, in order; stop is 0 iff pending; count, pending and
 *     deadlines match; next() is never later than the earliest deadline,
 *     never 0 while pending, UINT64_MAX when empty;
 *   - advance(1) fires exactly what is due at the next tick, advance(0) fires
 *     nothing, and a delay-0 re-arm from a callback waits for the next tick;
 *   - callbacks may stop timers due at the same tick (which then never fire),
 *     re-arm them, and start chains of new timers;
 *   - the tickless loop advance(next()) empties the engine in a bounded
 *     number of steps, hitting every deadline exactly;
 *   - 1000 jumps of 2^40 ticks over far-future timers finish (a scheme that
 *     walked revolutions or empty slots would not);
 *   - deadlines saturate at UINT64_MAX and the end of time still works;
 *   - `wheel` refuses delays past max_interval with -ERANGE and leaves the
 *     timer as it was; every other scheme takes any 64-bit delay;
 *   - bad parameters and unknown names give -EINVAL and leave *out alone;
 *     fields a scheme does not have are ignored.
 *
 * Usage: test_engine_conformance [api | SCHEME]; no argument runs everything.
 */
#include "engine_main.h"
#include "engine_oracle.h"

static struct engine_cfg *cfg_of(void **state)
{
	return *state;
}

/* A per-configuration seed, so every scheme and geometry gets other sequences. */
static uint64_t seed_for(const struct engine_cfg *cfg, uint64_t salt)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *p = cfg->label; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return h ^ (salt * 0x9e3779b97f4a7c15ull);
}

/* Wheels with a tiny max_interval cannot run the tests that use fixed delays. */
static void skip_unless_delays_up_to(void **state, uint64_t delay_ticks)
{
	if (cfg_max_interval(cfg_of(state)) < delay_ticks)
		skip();
}

/*
 * An oracle of n timers whose expiries run hook(o, ot) with o->user = user,
 * for a test whose delays reach max_delay ticks (skipped where they cannot).
 */
static struct oracle *oracle_hooked(void **state, uint64_t max_delay, size_t n, uint64_t seed,
				    oracle_hook_fn *hook, void *user)
{
	struct oracle *o;

	skip_unless_delays_up_to(state, max_delay);
	o = oracle_new(cfg_of(state), n, seed);
	o->on_fire = hook;
	o->user = user;
	return o;
}

/* How many pending timers the oracle expects to fire exactly at `tick`. */
static size_t oracle_due_at(const struct oracle *o, uint64_t tick)
{
	size_t n = 0;

	for (size_t i = 0; i < o->n; i++)
		if (o->tm[i].pending && o->tm[i].deadline == tick)
			n++;
	return n;
}

/* An address *out must still hold after a failed spoke_engine_new(). */
static uint64_t sentinel_storage;
#define SENTINEL_ENGINE ((struct spoke_engine *)(void *)&sentinel_storage)

/* The expiry function for advances that must not fire anything. */
static void must_not_fire(void *ctx, struct spoke_timer *t)
{
	(void)ctx;
	fail_msg("timer %p fired, nothing was due", (void *)t);
}

/* ---- the scheme list and names --------------------------------------------- */

static void test_scheme_names(void **state)
{
	static const char *const expected[] = {
		"list",		 "sorted-list", "heap",		"wheel",
		"hashed-sorted", "hashed",	"hierarchical", "lawn",
	};
	const char *const *names = spoke_engine_schemes();
	size_t i;

	(void)state;
	assert_non_null(names);
	for (i = 0; i < ARRAY_SIZE(expected); i++) {
		assert_non_null(names[i]);
		assert_string_equal(names[i], expected[i]);
	}
	assert_null(names[i]);
}

static void test_unknown_names(void **state)
{
	static const char *const bad[] = {
		"",
		"LIST",
		"List",
		" list",
		"list ",
		"lists",
		"sorted_list",
		"sortedlist",
		"hashed_sorted",
		"hash",
		"hierarchical\n",
		"wheel2",
		"lawn-",
		"timer",
	};
	struct spoke_engine *const sentinel = SENTINEL_ENGINE;
	struct spoke_engine *e;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		e = sentinel;
		if (spoke_engine_new(&e, bad[i], NULL) != -EINVAL)
			fail_msg("spoke_engine_new(\"%s\") did not give -EINVAL", bad[i]);
		assert_ptr_equal(e, sentinel);
	}
	e = sentinel;
	assert_int_equal(spoke_engine_new(&e, NULL, NULL), -EINVAL);
	assert_ptr_equal(e, sentinel);
	for (const char *const *s = spoke_engine_schemes(); *s; s++)
		assert_int_equal(spoke_engine_new(NULL, *s, NULL), -EINVAL);
	spoke_engine_free(NULL); /* a no-op, like free(NULL) */
}

/* ---- parameters -------------------------------------------------------------- */

struct param_case {
	const char *what;
	struct spoke_engine_params p;
	const char *invalid_for; /* schemes that must refuse it, space separated */
};

static const struct param_case param_cases[] = {
	{"level_bits=17", {.level_bits = 17}, "hierarchical"},
	{"level_bits=UINT_MAX", {.level_bits = UINT_MAX}, "hierarchical"},
	{"levels=65", {.levels = 65}, "hierarchical"},
	{"levels=UINT_MAX", {.levels = UINT_MAX}, "hierarchical"},
	{"level_bits=17 levels=1", {.level_bits = 17, .levels = 1}, "hierarchical"},
	{"table_size=3", {.table_size = 3}, "hashed hashed-sorted"},
	{"table_size=12", {.table_size = 12}, "hashed hashed-sorted"},
	{"table_size=2^24+1", {.table_size = ((size_t)1 << 24) + 1}, "hashed hashed-sorted"},
	{"table_size=2^25", {.table_size = (size_t)1 << 25}, "hashed hashed-sorted"},
	{"table_size=SIZE_MAX", {.table_size = SIZE_MAX}, "hashed hashed-sorted"},
	{"max_interval=2^28+1", {.max_interval = POW2(28) + 1}, "wheel"},
	{"max_interval=UINT64_MAX", {.max_interval = UINT64_MAX}, "wheel"},
	{"everything out of range",
	 {.level_bits = 17, .levels = 65, .table_size = 3, .max_interval = UINT64_MAX},
	 "hierarchical hashed hashed-sorted wheel"},
	/* valid everywhere */
	{"all zero (defaults)", {0}, ""},
	{"level_bits=16 levels=1", {.level_bits = 16, .levels = 1}, ""},
	{"level_bits=1 levels=64", {.level_bits = 1, .levels = 64}, ""},
	{"level_bits=1 levels=1", {.level_bits = 1, .levels = 1}, ""},
	{"level_bits=16 levels=4", {.level_bits = 16, .levels = 4}, ""},
	{"level_bits=5 (levels default)", {.level_bits = 5}, ""},
	{"levels=3 (level_bits default)", {.levels = 3}, ""},
	{"table_size=1", {.table_size = 1}, ""},
	{"table_size=2^20", {.table_size = (size_t)1 << 20}, ""},
	{"max_interval=1", {.max_interval = 1}, ""},
	{"max_interval=2^20+7", {.max_interval = POW2(20) + 7}, ""},
	{"initial_capacity=1", {.initial_capacity = 1}, ""},
	{"initial_capacity=100000", {.initial_capacity = 100000}, ""},
};

static bool word_in(const char *word, const char *list)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
	return false;
}

static void test_params(void **state)
{
	const char *scheme = cfg_of(state)->scheme;
	struct spoke_engine *const sentinel = SENTINEL_ENGINE;

	for (size_t i = 0; i < ARRAY_SIZE(param_cases); i++) {
		const struct param_case *pc = &param_cases[i];
		struct spoke_engine *e = sentinel;
		int rc = spoke_engine_new(&e, scheme, &pc->p);

		if (word_in(scheme, pc->invalid_for)) {
			if (rc != -EINVAL)
				fail_msg("%s with %s: %d, expected -EINVAL", scheme, pc->what, rc);
			assert_ptr_equal(e, sentinel);
			continue;
		}
		if (rc != 0)
			fail_msg("%s with %s: %d, expected 0 (valid or ignored)", scheme, pc->what,
				 rc);
		assert_ptr_not_equal(e, sentinel);
		assert_non_null(e);
		assert_string_equal(spoke_engine_scheme(e), scheme);
		assert_int_equal(spoke_engine_now(e), 0);
		assert_int_equal(spoke_engine_count(e), 0);
		spoke_engine_free(e);
	}
}

/* ---- basics -------------------------------------------------------------------- */

static void test_new_engine(void **state)
{
	struct engine_cfg *cfg = cfg_of(state);
	struct spoke_engine *e = cfg_new_engine(cfg);
	struct spoke_timer t;

	assert_string_equal(spoke_engine_scheme(e), cfg->scheme);
	assert_int_equal(spoke_engine_now(e), 0);
	assert_int_equal(spoke_engine_count(e), 0);
	assert_int_equal(spoke_engine_next(e), UINT64_MAX);
	spoke_timer_init(&t);
	assert_false(spoke_timer_pending(&t));
	assert_int_equal(spoke_engine_stop(e, &t), -ENOENT);
	assert_int_equal(spoke_engine_advance(e, 1000, must_not_fire, NULL), 0);
	assert_int_equal(spoke_engine_now(e), 1000);
	assert_int_equal(spoke_engine_next(e), UINT64_MAX);
	spoke_engine_free(e);
}

static void test_start_stop_rearm(void **state)
{
	struct oracle *o;

	skip_unless_delays_up_to(state, 10);
	o = oracle_new(cfg_of(state), 3, 1);
	oracle_stop(o, 0);     /* never started: -ENOENT */
	oracle_start(o, 0, 0); /* deadline now + 1 */
	oracle_check(o);
	oracle_start(o, 0, 10); /* re-arm later */
	oracle_start(o, 0, 5);	/* re-arm earlier */
	oracle_check(o);
	assert_int_equal(oracle_stop(o, 0), 0);
	assert_int_equal(oracle_stop(o, 0), -ENOENT);
	assert_int_equal(oracle_advance(o, 20), 0); /* stopped: never fires */
	oracle_start(o, 0, 5);
	oracle_start(o, 1, 5);
	oracle_start(o, 2, 3);
	assert_int_equal(oracle_advance(o, 2), 0);
	assert_int_equal(oracle_advance(o, 1), 1); /* timer 2 */
	assert_int_equal(oracle_stop(o, 2), -ENOENT);
	oracle_start(o, 1, 1); /* pull timer 1 in: fires once, at the new deadline */
	assert_int_equal(oracle_advance(o, 1), 1);
	assert_int_equal(oracle_advance(o, 10), 1); /* timer 0 */
	oracle_check(o);
	assert_int_equal(o->tm[0].fired, 1);
	assert_int_equal(o->tm[1].fired, 1);
	assert_int_equal(o->tm[2].fired, 1);
	assert_int_equal(spoke_engine_count(o->e), 0);
	oracle_start(o, 2, 2); /* a fired timer can be started again */
	assert_int_equal(oracle_advance(o, 2), 1);
	assert_int_equal(o->tm[2].fired, 2);
	oracle_free(o);
}

/* advance(1) fires exactly the timers due at the next tick, nothing else. */
static void test_fire_each_tick(void **state)
{
	struct oracle *o;
	const size_t n = 300;

	o = oracle_new(cfg_of(state), n, seed_for(cfg_of(state), 2));
	for (size_t i = 0; i < n; i++)
		oracle_start(o, i, i % (o->max_interval == UINT64_MAX ? n : o->max_interval + 1));
	for (size_t tick = 0; tick < n + 2; tick++) {
		size_t due = oracle_due_at(o, oracle_now(o) + 1);

		assert_int_equal(oracle_advance(o, 1), due);
		oracle_check(o);
	}
	assert_int_equal(o->total_fired, n);
	oracle_free(o);
}

static void test_advance_zero(void **state)
{
	struct oracle *o;

	o = oracle_new(cfg_of(state), 2, 3);
	oracle_start(o, 0, 0);
	oracle_start(o, 1, 1);
	assert_int_equal(oracle_advance(o, 0), 0);
	assert_int_equal(oracle_now(o), 0);
	oracle_check(o);
	assert_int_equal(oracle_advance(o, 1), 2);
	assert_int_equal(oracle_advance(o, 0), 0);
	oracle_check(o);
	oracle_free(o);
}

/* Thousands of timers on two adjacent ticks, started in random order. */
static void test_many_same_deadline(void **state)
{
	struct oracle *o;
	const size_t n = 2000;
	size_t *order;

	skip_unless_delays_up_to(state, 51);
	o = oracle_new(cfg_of(state), n, seed_for(cfg_of(state), 4));
	order = oracle_scratch(o, n * sizeof(*order));
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	rng_shuffle(&o->rng, order, n);
	for (size_t i = 0; i < n; i++)
		oracle_start(o, order[i], order[i] < n / 2 ? 50 : 51);
	oracle_check(o);
	assert_int_equal(oracle_advance(o, 49), 0);
	assert_int_equal(oracle_advance(o, 1000000), n);
	oracle_check(o);
	oracle_free(o);
}

/* ---- randomized sequences ------------------------------------------------------ */

/* Inside an expiry: sometimes re-arm itself, stop or start another timer. */
static void random_hook(struct oracle *o, struct otimer *ot)
{
	unsigned x = (unsigned)rng_below(&o->rng, 100);

	if (x < 25)
		oracle_start(o, oracle_index(o, ot), draw_delay(o));
	else if (x < 35)
		oracle_stop(o, (size_t)rng_below(&o->rng, o->n));
	else if (x < 45)
		oracle_start(o, (size_t)rng_below(&o->rng, o->n), draw_delay(o));
}

static void run_random_ops(struct engine_cfg *cfg, uint64_t seed, size_t ntimers, size_t nops,
			   uint64_t start_at)
{
	struct oracle *o;

	o = oracle_new(cfg, ntimers, seed);
	oracle_advance(o, start_at);
	o->on_fire = random_hook;
	for (o->step = 0; o->step < nops; o->step++) {
		unsigned op = (unsigned)rng_below(&o->rng, 100);
		size_t i = (size_t)rng_below(&o->rng, ntimers);

		if (op < 40)
			oracle_start(o, i, draw_delay(o));
		else if (op < 55)
			oracle_stop(o, i);
		else
			oracle_advance(o, draw_advance(o));
		oracle_check(o);
	}
	/* Drain whatever is left, far deadlines included, without the hook. */
	o->on_fire = NULL;
	oracle_tickless(o, oracle_tickless_bound(o, o->npending));
	oracle_free(o);
}

static void test_random_ops(void **state)
{
	static const struct {
		size_t seeds, ntimers, nops;
		uint64_t start_at;
	} regimes[] = {
		{32, 4, 3000, 0},  /* often empty: caches left stale across idle stretches */
		{24, 48, 4000, 0}, /* each timer hit often */
		{4, 500, 6000, 0}, /* crowded */
		/* the last 2^14 ticks: saturated deadlines, small steps to the end of time */
		{8, 48, 3000, UINT64_MAX - POW2(14)},
	};
	uint64_t salt = 0;

	for (size_t r = 0; r < ARRAY_SIZE(regimes); r++)
		for (size_t s = 0; s < regimes[r].seeds; s++)
			run_random_ops(cfg_of(state), seed_for(cfg_of(state), ++salt),
				       regimes[r].ntimers, regimes[r].nops, regimes[r].start_at);
}

/* ---- callbacks that start and stop timers --------------------------------------- */

struct rearm_plan {
	size_t budget; /* re-arms left */
	uint64_t delay_ticks;
};

static void rearm_self_hook(struct oracle *o, struct otimer *ot)
{
	struct rearm_plan *plan = o->user;

	if (plan->budget == 0)
		return;
	plan->budget--;
	oracle_start(o, oracle_index(o, ot), plan->delay_ticks);
}

static void test_rearm_self(void **state)
{
	struct rearm_plan plan = {.budget = 1000, .delay_ticks = 0};
	struct oracle *o = oracle_hooked(state, 7, 1, 5, rearm_self_hook, &plan);

	oracle_start(o, 0, 0);
	/* delay 0 from the callback: next tick, never the same pass */
	for (int i = 0; i < 50; i++)
		assert_int_equal(oracle_advance(o, 1), 1);
	assert_int_equal(oracle_advance(o, 10), 10);
	/* a period of 7: fires every 7th tick inside one long advance */
	plan.delay_ticks = 7;
	assert_int_equal(oracle_advance(o, 1), 1);
	assert_int_equal(oracle_advance(o, 70), 10);
	assert_int_equal(oracle_advance(o, 6), 0);
	assert_int_equal(oracle_advance(o, 1), 1);
	/* stop re-arming: the last run leaves nothing pending */
	plan.budget = 0;
	assert_int_equal(oracle_advance(o, 1000), 1);
	assert_int_equal(spoke_engine_count(o->e), 0);
	assert_int_equal(o->tm[0].fired, 50 + 10 + 1 + 10 + 1 + 1);
	oracle_check(o);
	oracle_free(o);
}

struct stop_plan {
	bool done;
	size_t first, last; /* timers the first expiry acts on */
	bool rearm;	    /* re-arm them by rearm_delay instead of stopping */
	uint64_t rearm_delay;
};

static void stop_others_hook(struct oracle *o, struct otimer *ot)
{
	struct stop_plan *plan = o->user;

	(void)ot;
	if (plan->done)
		return;
	plan->done = true;
	for (size_t i = plan->first; i <= plan->last; i++) {
		if (plan->rearm)
			oracle_start(o, i, plan->rearm_delay);
		else
			oracle_stop(o, i);
	}
}

static void test_stop_from_callback(void **state)
{
	struct stop_plan plan = {.first = 0, .last = 14};
	struct oracle *o = oracle_hooked(state, 100, 20, 6, stop_others_hook, &plan);

	for (size_t i = 0; i < 10; i++)
		oracle_start(o, i, 5); /* due together */
	for (size_t i = 10; i < 15; i++)
		oracle_start(o, i, 6); /* due one tick later, same advance call */
	for (size_t i = 15; i < 20; i++)
		oracle_start(o, i, 100);
	/* The first of the ten stops the other nine (already collected) and 10..14. */
	assert_int_equal(oracle_advance(o, 20), 1);
	oracle_check(o);
	assert_int_equal(spoke_engine_count(o->e), 5);
	assert_int_equal(oracle_advance(o, 100), 5);

	/* Same again, but the first expiry re-arms the others 3 ticks later. */
	plan = (struct stop_plan){.first = 0, .last = 9, .rearm = true, .rearm_delay = 3};
	for (size_t i = 0; i < 10; i++)
		oracle_start(o, i, 5);
	assert_int_equal(oracle_advance(o, 5), 1);
	oracle_check(o);
	assert_int_equal(oracle_advance(o, 2), 0);
	assert_int_equal(oracle_advance(o, 1), 10); /* the first re-armed itself too */
	oracle_check(o);

	/* Re-armed with delay 0 while due at this tick: the next tick, not this pass. */
	plan = (struct stop_plan){.first = 0, .last = 9, .rearm = true, .rearm_delay = 0};
	for (size_t i = 0; i < 10; i++)
		oracle_start(o, i, 5);
	assert_int_equal(oracle_advance(o, 5), 1);
	assert_int_equal(oracle_advance(o, 1), 10);
	oracle_check(o);
	oracle_free(o);
}

struct chain_plan {
	size_t fanout_from; /* the timer whose expiry fans out */
};

/* Timer i starts timer i + 1 with delay 0 (a chain), up to the fan-out timer. */
static void chain_hook(struct oracle *o, struct otimer *ot)
{
	static const uint64_t fan_delays[] = {0, 1, 2, 3, 50, UINT64_MAX};
	struct chain_plan *plan = o->user;
	size_t i = oracle_index(o, ot);

	if (i + 1 < plan->fanout_from) {
		oracle_start(o, i + 1, 0);
	} else if (i + 1 == plan->fanout_from) {
		for (size_t k = 0; k < ARRAY_SIZE(fan_delays); k++)
			oracle_start(o, i + 1 + k, fan_delays[k]);
	}
}

static void test_start_from_callback(void **state)
{
	struct chain_plan plan = {.fanout_from = 50};
	struct oracle *o = oracle_hooked(state, 50, 56, 7, chain_hook, &plan);

	oracle_start(o, 0, 1);
	/* 50 chained timers on ticks 1..50, then 0,1,2,3,50 ticks after tick 50 */
	assert_int_equal(oracle_advance(o, 99), 50 + 4);
	assert_int_equal(oracle_now(o), 99);
	assert_int_equal(oracle_advance(o, 1), 1); /* the one 50 ticks later */
	oracle_check(o);
	for (size_t i = 0; i < 55; i++)
		assert_int_equal(o->tm[i].fired, 1);
	assert_true(o->tm[55].pending == (o->max_interval == UINT64_MAX));
	oracle_free(o);
}

/* ---- tickless use, far future, end of time -------------------------------------- */

/* rearm_self_hook, except at the end of time (test_end_of_time covers that). */
static void rearm_before_end_hook(struct oracle *o, struct otimer *ot)
{
	if (oracle_now(o) != UINT64_MAX)
		rearm_self_hook(o, ot);
}

static void run_tickless(struct engine_cfg *cfg, uint64_t seed, size_t n, bool rearm)
{
	struct rearm_plan plan = {.budget = rearm ? n : 0, .delay_ticks = 1};
	struct oracle *o;
	uint64_t arms = 0;

	o = oracle_new(cfg, n, seed);
	for (size_t i = 0; i < n; i++, arms++)
		oracle_start(o, i, draw_accepted_delay(o));
	for (size_t k = 0; k < n / 4; k++) {
		size_t i = (size_t)rng_below(&o->rng, n);

		if (rng_percent(&o->rng, 50)) {
			oracle_stop(o, i);
		} else {
			oracle_start(o, i, draw_accepted_delay(o));
			arms++;
		}
	}
	oracle_check(o);
	o->on_fire = rearm_before_end_hook;
	o->user = &plan;
	plan.delay_ticks = rearm ? draw_accepted_delay(o) : 1;
	arms += plan.budget;
	oracle_tickless(o, oracle_tickless_bound(o, arms));
	for (size_t i = 0; i < n; i++)
		assert_false(o->tm[i].pending);
	assert_int_equal(spoke_engine_next(o->e), UINT64_MAX);
	oracle_free(o);
}

static void test_tickless(void **state)
{
	for (uint64_t s = 1; s <= 6; s++)
		run_tickless(cfg_of(state), seed_for(cfg_of(state), 100 + s), 300, false);
	for (uint64_t s = 1; s <= 4; s++)
		run_tickless(cfg_of(state), seed_for(cfg_of(state), 200 + s), 100, true);
}

/*
 * 1000 jumps of 2^40 ticks. Far-future timers sit through them (one fires
 * during them, one is always just past the end of the jump); a near timer is
 * started before every other jump. A scheme whose advance cost grew with the
 * ticks jumped (walking revolutions or empty slots) would never finish.
 */
static void test_far_jumps(void **state)
{
	enum { FAR_MAX, FAR_62, FAR_49, NEAR, STRADDLE, NTIMERS };
	struct oracle *o;
	const uint64_t jump = POW2(40);
	bool bounded;
	uint64_t near_fired = 0;

	o = oracle_new(cfg_of(state), NTIMERS, seed_for(cfg_of(state), 8));
	bounded = o->max_interval != UINT64_MAX;
	if (!bounded) {
		oracle_start(o, FAR_MAX, UINT64_MAX);
		oracle_start(o, FAR_62, POW2(62));
		oracle_start(o, FAR_49, POW2(49) + 12345); /* fires in jump 512 */
	}
	for (o->step = 0; o->step < 1000; o->step++) {
		if (o->step % 2 == 0) {
			oracle_start(o, NEAR,
				     1 + rng_below(&o->rng, o->max_interval < jump ? o->max_interval
										   : jump));
			near_fired++;
		}
		if (!bounded && !o->tm[STRADDLE].pending)
			oracle_start(o, STRADDLE, jump + 1 + rng_below(&o->rng, 1000));
		oracle_advance(o, jump);
		oracle_check(o);
	}
	assert_int_equal(o->tm[NEAR].fired, near_fired);
	if (!bounded) {
		assert_int_equal(o->tm[FAR_49].fired, 1);
		assert_true(o->tm[FAR_MAX].pending);
		assert_true(o->tm[FAR_62].pending);
		assert_true(o->tm[STRADDLE].fired >= 499);
	}
	/* One call over the rest of time fires the far ones, each at its tick. */
	oracle_advance(o, UINT64_MAX);
	oracle_check(o);
	assert_int_equal(spoke_engine_count(o->e), 0);
	if (!bounded) {
		assert_int_equal(o->tm[FAR_62].fired, 1);
		assert_int_equal(o->tm[FAR_MAX].fired, 1);
	}
	oracle_free(o);
}

/* At the end of time a re-arming callback still fires once per advance call. */
static void test_end_of_time(void **state)
{
	static const uint64_t delays[] = {1, 5, 9, 10, 11, 1000, POW2(40), UINT64_MAX};
	struct rearm_plan plan = {.budget = 0, .delay_ticks = 0};
	const size_t n = ARRAY_SIZE(delays) + 3;
	struct oracle *o;

	o = oracle_new(cfg_of(state), n, 9);
	assert_int_equal(oracle_advance(o, UINT64_MAX - 10), 0);
	for (size_t i = 0; i < ARRAY_SIZE(delays); i++)
		oracle_start(o, i, delays[i]); /* 10 and beyond saturate at UINT64_MAX */
	oracle_check(o);
	oracle_tickless(o, oracle_tickless_bound(o, ARRAY_SIZE(delays)));
	assert_int_equal(oracle_advance(o, UINT64_MAX), 0);
	assert_int_equal(oracle_now(o), UINT64_MAX);

	/* Started at the end of time: due at once, fired by the next advance. */
	oracle_start(o, n - 3, 0);
	oracle_start(o, n - 2, 7 <= o->max_interval ? 7 : 1);
	oracle_check(o);
	assert_int_equal(spoke_engine_next(o->e), 1);
	assert_int_equal(oracle_advance(o, 0), 0);
	assert_int_equal(oracle_advance(o, 1), 2);
	assert_int_equal(oracle_now(o), UINT64_MAX);

	/* A callback re-arming itself with delay 0: once per pass, never looping. */
	o->on_fire = rearm_self_hook;
	o->user = &plan;
	plan.budget = 3;
	oracle_start(o, n - 1, 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(oracle_advance(o, 1), 1);
		assert_int_equal(spoke_engine_count(o->e), i < 3 ? 1 : 0);
	}
	oracle_check(o);
	oracle_free(o);
}

/* `wheel`: -ERANGE past max_interval, timer unchanged. Others: any delay. */
static void test_delay_range(void **state)
{
	struct oracle *o;
	uint64_t max;

	o = oracle_new(cfg_of(state), 3, 10);
	max = o->max_interval;
	assert_int_equal(oracle_advance(o, 12345), 0);
	if (max == UINT64_MAX) {
		static const uint64_t delays[] = {
			0, 1, POW2(32), POW2(63), UINT64_MAX - 12345, UINT64_MAX};

		for (size_t i = 0; i < ARRAY_SIZE(delays); i++)
			assert_int_equal(oracle_start(o, i % 3, delays[i]), 0);
		assert_int_equal(spoke_timer_deadline(&o->tm[0].t), 12345 + POW2(63));
		assert_int_equal(spoke_timer_deadline(&o->tm[1].t), UINT64_MAX);
		assert_int_equal(spoke_timer_deadline(&o->tm[2].t), UINT64_MAX);
		oracle_free(o);
		return;
	}
	assert_int_equal(oracle_start(o, 0, max), 0);
	assert_int_equal(oracle_start(o, 1, max + 1), -ERANGE); /* not pending: stays so */
	assert_false(spoke_timer_pending(&o->tm[1].t));
	assert_int_equal(oracle_start(o, 0, max + 1), -ERANGE); /* pending: old deadline */
	assert_int_equal(oracle_start(o, 0, UINT64_MAX), -ERANGE);
	assert_int_equal(spoke_timer_deadline(&o->tm[0].t), 12345 + max);
	assert_int_equal(oracle_start(o, 2, 0), 0);
	oracle_check(o);
	if (max > 1)
		assert_int_equal(oracle_advance(o, max - 1), 1); /* timer 2 */
	assert_int_equal(oracle_advance(o, 1), max > 1 ? 1 : 2);
	assert_int_equal(o->tm[0].fired, 1);
	oracle_check(o);
	oracle_free(o);
}

/* Freeing an engine with pending timers forgets them; they stay marked pending. */
static void test_free_pending(void **state)
{
	struct oracle *o;
	const size_t n = 64;
	struct spoke_engine *e;
	struct spoke_timer due;

	o = oracle_new(cfg_of(state), n, seed_for(cfg_of(state), 11));
	for (size_t i = 0; i < n; i++)
		oracle_start(o, i, draw_accepted_delay(o));
	oracle_advance(o, 100);
	spoke_engine_free(o->e);
	o->e = NULL;
	for (size_t i = 0; i < n; i++)
		assert_true(spoke_timer_pending(&o->tm[i].t) == o->tm[i].pending);
	oracle_free(o); /* the engine is gone already */

	/* ... also one on the due list (started at the end of time) */
	e = cfg_new_engine(cfg_of(state));
	spoke_engine_advance(e, UINT64_MAX, must_not_fire, NULL);
	spoke_timer_init(&due);
	assert_int_equal(spoke_engine_start(e, &due, 0), 0);
	assert_int_equal(spoke_engine_count(e), 1);
	spoke_engine_free(e);
	assert_true(spoke_timer_pending(&due));
}

/* ---- configurations and main ----------------------------------------------------- */

#define GEOMETRY(s, l, ...)                                                                        \
	{                                                                                          \
		.scheme = s, .label = l, .use_params = true, .params = { __VA_ARGS__ }             \
	}

static struct engine_cfg geometries[] = {
	GEOMETRY("heap", "heap initial_capacity=1", .initial_capacity = 1),
	GEOMETRY("heap", "heap initial_capacity=2", .initial_capacity = 2),
	GEOMETRY("wheel", "wheel max_interval=1", .max_interval = 1),
	GEOMETRY("wheel", "wheel max_interval=2", .max_interval = 2),
	GEOMETRY("wheel", "wheel max_interval=100", .max_interval = 100),
	GEOMETRY("wheel", "wheel max_interval=100003", .max_interval = 100003),
	GEOMETRY("hashed-sorted", "hashed-sorted table_size=1", .table_size = 1),
	GEOMETRY("hashed-sorted", "hashed-sorted table_size=2", .table_size = 2),
	GEOMETRY("hashed-sorted", "hashed-sorted table_size=16", .table_size = 16),
	GEOMETRY("hashed", "hashed table_size=1", .table_size = 1),
	GEOMETRY("hashed", "hashed table_size=2", .table_size = 2),
	GEOMETRY("hashed", "hashed table_size=16", .table_size = 16),
	GEOMETRY("hierarchical", "hierarchical bits=1 levels=64", .level_bits = 1, .levels = 64),
	GEOMETRY("hierarchical", "hierarchical bits=1 levels=1", .level_bits = 1, .levels = 1),
	GEOMETRY("hierarchical", "hierarchical bits=1 levels=2", .level_bits = 1, .levels = 2),
	GEOMETRY("hierarchical", "hierarchical bits=2 levels=3", .level_bits = 2, .levels = 3),
	GEOMETRY("hierarchical", "hierarchical bits=3 levels=3", .level_bits = 3, .levels = 3),
	GEOMETRY("hierarchical", "hierarchical bits=6 levels=1", .level_bits = 6, .levels = 1),
	GEOMETRY("hierarchical", "hierarchical bits=6 levels=2", .level_bits = 6, .levels = 2),
	GEOMETRY("hierarchical", "hierarchical bits=6 levels=3", .level_bits = 6, .levels = 3),
	GEOMETRY("hierarchical", "hierarchical bits=6 levels=11", .level_bits = 6, .levels = 11),
	GEOMETRY("hierarchical", "hierarchical bits=4 levels=16", .level_bits = 4, .levels = 16),
	GEOMETRY("hierarchical", "hierarchical bits=16 levels=1", .level_bits = 16, .levels = 1),
	GEOMETRY("hierarchical", "hierarchical bits=16 levels=4", .level_bits = 16, .levels = 4),
};

#define SCHEME_TEST(f) cmocka_unit_test_prestate_setup_teardown(f, NULL, oracle_teardown, cfg)

static int run_cfg(struct engine_cfg *cfg, bool with_api_checks)
{
	const struct CMUnitTest with_params[] = {
		SCHEME_TEST(test_params),
	};
	const struct CMUnitTest tests[] = {
		SCHEME_TEST(test_new_engine),	       SCHEME_TEST(test_start_stop_rearm),
		SCHEME_TEST(test_fire_each_tick),      SCHEME_TEST(test_advance_zero),
		SCHEME_TEST(test_many_same_deadline),  SCHEME_TEST(test_random_ops),
		SCHEME_TEST(test_rearm_self),	       SCHEME_TEST(test_stop_from_callback),
		SCHEME_TEST(test_start_from_callback), SCHEME_TEST(test_tickless),
		SCHEME_TEST(test_far_jumps),	       SCHEME_TEST(test_end_of_time),
		SCHEME_TEST(test_delay_range),	       SCHEME_TEST(test_free_pending),
	};
	int failed = 0;

	print_message("[ GROUP    ] %s\n", cfg->label);
	if (with_api_checks)
		failed += cmocka_run_group_tests_name(cfg->label, with_params, NULL, NULL);
	failed += cmocka_run_group_tests_name(cfg->label, tests, NULL, NULL);
	return failed;
}

static int run_scheme(const char *scheme)
{
	struct engine_cfg defaults = {.scheme = scheme, .label = scheme};
	int failed = run_cfg(&defaults, true);

	for (size_t i = 0; i < ARRAY_SIZE(geometries); i++)
		if (strcmp(geometries[i].scheme, scheme) == 0)
			failed += run_cfg(&geometries[i], false);
	return failed;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest api_tests[] = {
		cmocka_unit_test(test_scheme_names),
		cmocka_unit_test(test_unknown_names),
	};

	return engine_main(argc, argv, api_tests, ARRAY_SIZE(api_tests), run_scheme);
}
