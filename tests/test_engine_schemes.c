/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_engine_schemes.c - the edge cases particular to one scheme, each
 * checked against the oracle of engine_oracle.h (every timer fires exactly
 * once, exactly at its deadline, in order; count, pending and next() agree).
 *
 * What it proves:
 *   hierarchical   for level_bits 4, 6 and 8, with levels covering 64 bits and
 *                  fewer (the overflow path), delays of exactly 2^(k*bits) - 1,
 *                  2^(k*bits) and 2^(k*bits) + 1 for every level k, deadlines on
 *                  and next to absolute level boundaries, and delays UINT64_MAX
 *                  and UINT64_MAX - now, started at odd `now` offsets, fire at
 *                  their deadline whether reached by one jump past it, by a jump
 *                  to the tick before and one step, or by the tickless loop
 *                  (in a bounded number of steps);
 *   hashed,        with 1, 2, 16 and 4096 buckets, thousands of timers whose
 *   hashed-sorted  deadlines are congruent modulo the table size (one bucket),
 *                  many equal, many revolutions apart, started in random order,
 *                  some stopped or re-armed, fire in order at the right ticks;
 *   lawn           5000 distinct TTLs plus thousands of timers sharing a few
 *                  TTLs, started at different ticks, stopped in the middle of
 *                  their queues, re-armed into other queues, queues emptying
 *                  (by firing and by stops) and being created again; the
 *                  timers of one TTL due at one tick fire in start order
 *                  (FIFO), also when only the head of a queue is due, and
 *                  after stops of a queue's head, tail or only timer; in one
 *                  advance, expiry functions that stop and start timers
 *                  around a key fired alone, a slot emptied at its first
 *                  tick and ties of one queue, or stop a timer of another
 *                  TTL due at the same tick, see each timer fire once, at
 *                  its deadline, in order; next() is a lone key's deadline.
 *
 * Usage: test_engine_schemes [hierarchical | hashed | hashed-sorted | lawn].
 */
#include "engine_oracle.h"

/* ---- hierarchical: level boundaries ------------------------------------------ */

struct hier_case {
	struct engine_cfg cfg;
	unsigned bits, levels;
};

#define HIER(b, l)                                                                                 \
	{                                                                                          \
		.cfg = {.scheme = "hierarchical",                                                  \
			.label = "hierarchical bits=" #b " levels=" #l,                            \
			.use_params = true,                                                        \
			.params = {.level_bits = b, .levels = l}},                                 \
		.bits = b, .levels = l                                                             \
	}

static struct hier_case hier_cases[] = {
	HIER(4, 16), HIER(4, 3), HIER(4, 1), HIER(6, 11), HIER(6, 4),
	HIER(6, 2),  HIER(8, 8), HIER(8, 3), HIER(8, 1),
};

/* Where the clock stands before the boundary delays are started. */
static size_t boundary_offsets(unsigned bits, uint64_t *out)
{
	struct rng r = {.s = bits};
	size_t n = 0;

	out[n++] = 0;
	out[n++] = 1;
	out[n++] = 3;
	out[n++] = POW2(bits) - 1;
	out[n++] = POW2(bits) + 1;
	out[n++] = POW2(2 * bits) - 3;
	out[n++] = 12345;
	out[n++] = POW2(33) + 7;
	out[n++] = POW2(50) + 11;
	out[n++] = POW2(63) - 5;
	for (int k = 0; k < 6; k++) /* odd, anywhere below 2^62 */
		out[n++] = (rng_next(&r) >> (2 + rng_below(&r, 60))) | 1;
	return n;
}

/*
 * Delays around every level boundary from `now`: 2^(k*bits) - 1, 2^(k*bits),
 * 2^(k*bits) + 1 for each k with k*bits < 64; the delays that reach the next
 * absolute multiple of 2^(k*bits), minus one, exactly, plus one; and
 * UINT64_MAX, UINT64_MAX - now.
 */
static size_t boundary_delays(unsigned bits, uint64_t now, uint64_t *out)
{
	size_t n = 0;

	for (unsigned kb = 0; kb < 64; kb += bits) {
		uint64_t mask = POW2(kb) - 1;

		out[n++] = POW2(kb) - 1;
		out[n++] = POW2(kb);
		out[n++] = POW2(kb) + 1;
		if ((now | mask) != UINT64_MAX) {
			uint64_t to_boundary = (now | mask) + 1 - now;

			out[n++] = to_boundary - 1;
			out[n++] = to_boundary;
			out[n++] = to_boundary + 1;
		}
	}
	out[n++] = UINT64_MAX;
	out[n++] = UINT64_MAX - now;
	return n;
}

#define MAX_BOUNDARY_DELAYS (6 * 64 + 2)

/* One timer alone: jump to the tick before its deadline, then step onto it. */
static void fire_by_step(struct engine_cfg *cfg, uint64_t offset, uint64_t delay)
{
	struct oracle *o;
	uint64_t left;

	o = oracle_new(cfg, 1, offset);
	o->step = delay;
	assert_int_equal(oracle_advance(o, offset), 0);
	oracle_start(o, 0, delay);
	left = o->tm[0].deadline - offset;
	if (left > 1)
		O_EQ(o, oracle_advance(o, left - 1), 0);
	O_EQ(o, spoke_engine_next(o->e), 1);
	O_EQ(o, oracle_advance(o, 1), 1);
	oracle_check(o);
	oracle_free(o);
}

/* One timer alone: a single jump far past its deadline fires it on time. */
static void fire_by_jump(struct engine_cfg *cfg, uint64_t offset, uint64_t delay)
{
	struct oracle *o;

	o = oracle_new(cfg, 1, offset);
	o->step = delay;
	assert_int_equal(oracle_advance(o, offset), 0);
	oracle_start(o, 0, delay);
	O_EQ(o, oracle_advance(o, sat_add(o->tm[0].deadline - offset, 1000)), 1);
	oracle_check(o);
	oracle_free(o);
}

/* All boundary delays together, drained by the tickless loop. */
static void fire_all_tickless(struct engine_cfg *cfg, uint64_t offset, const uint64_t *delays,
			      size_t n)
{
	struct oracle *o;

	o = oracle_new(cfg, n, offset);
	assert_int_equal(oracle_advance(o, offset), 0);
	for (size_t i = 0; i < n; i++)
		oracle_start(o, i, delays[i]);
	oracle_check(o);
	oracle_tickless(o, oracle_tickless_bound(o, n));
	for (size_t i = 0; i < n; i++)
		O_EQ(o, o->tm[i].fired, 1);
	oracle_free(o);
}

/*
 * All boundary delays together, driven by random advances, with some timers
 * stopped and re-armed to other boundary delays on the way (then drained).
 */
static void fire_all_random(struct engine_cfg *cfg, uint64_t offset, const uint64_t *delays,
			    size_t n)
{
	struct oracle *o;

	o = oracle_new(cfg, n, offset ^ 0x5eed);
	assert_int_equal(oracle_advance(o, offset), 0);
	for (size_t i = 0; i < n; i++)
		oracle_start(o, i, delays[i]);
	for (o->step = 0; o->step < 300; o->step++) {
		size_t i = (size_t)rng_below(&o->rng, n);

		switch (rng_below(&o->rng, 6)) {
		case 0:
			oracle_stop(o, i);
			break;
		case 1:
			oracle_start(o, i, delays[rng_below(&o->rng, n)]);
			break;
		default:
			oracle_advance(o, draw_advance(o));
			break;
		}
		oracle_check(o);
	}
	oracle_tickless(o, oracle_tickless_bound(o, n));
	oracle_free(o);
}

static void test_hierarchical_level_boundaries(void **state)
{
	struct hier_case *hc = *state;
	uint64_t offsets[32], delays[MAX_BOUNDARY_DELAYS];
	size_t noffsets = boundary_offsets(hc->bits, offsets);

	for (size_t i = 0; i < noffsets; i++) {
		size_t n = boundary_delays(hc->bits, offsets[i], delays);

		for (size_t j = 0; j < n; j++) {
			fire_by_step(&hc->cfg, offsets[i], delays[j]);
			fire_by_jump(&hc->cfg, offsets[i], delays[j]);
		}
		fire_all_tickless(&hc->cfg, offsets[i], delays, n);
		fire_all_random(&hc->cfg, offsets[i], delays, n);
	}
}

/* ---- hashed and hashed-sorted: one crowded bucket ------------------------------ */

struct hashed_case {
	struct engine_cfg cfg;
	uint64_t table_size;
};

#define HASHED(s, size)                                                                            \
	{                                                                                          \
		.cfg = {.scheme = s,                                                               \
			.label = s " table_size=" #size,                                           \
			.use_params = true,                                                        \
			.params = {.table_size = size}},                                           \
		.table_size = size                                                                 \
	}

static struct hashed_case hashed_cases[] = {
	HASHED("hashed", 1),	     HASHED("hashed", 2),	    HASHED("hashed", 16),
	HASHED("hashed", 4096),	     HASHED("hashed-sorted", 1),    HASHED("hashed-sorted", 2),
	HASHED("hashed-sorted", 16), HASHED("hashed-sorted", 4096),
};

/*
 * A delay whose deadline is congruent to `residue` modulo `size`: the first
 * such deadline after now, plus `revolutions` whole turns of the table.
 */
static uint64_t congruent_delay(uint64_t now, uint64_t size, uint64_t residue, uint64_t revolutions)
{
	uint64_t first = ((residue - now - 1) & (size - 1)) + 1; /* in [1, size] */

	return first + size * revolutions;
}

static uint64_t draw_revolutions(struct rng *r)
{
	switch (rng_below(r, 10)) {
	case 0:
		return rng_below(r, POW2(20));
	case 1:
		return POW2(rng_below(r, 31));
	default:
		return rng_below(r, 100); /* many equal deadlines */
	}
}

static void test_hashed_one_bucket(void **state)
{
	struct hashed_case *hc = *state;
	const size_t n = 3000;
	const uint64_t residue = 5;
	struct oracle *o = oracle_new(&hc->cfg, n, hc->table_size);
	size_t *order = oracle_scratch(o, n * sizeof(*order));

	assert_int_equal(oracle_advance(o, 777), 0);
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	rng_shuffle(&o->rng, order, n);
	for (size_t i = 0; i < n; i++)
		oracle_start(o, order[i],
			     congruent_delay(oracle_now(o), hc->table_size, residue,
					     draw_revolutions(&o->rng)));
	/* Stop some and re-arm some, all over the bucket. */
	for (size_t k = 0; k < n / 3; k++) {
		size_t i = (size_t)rng_below(&o->rng, n);

		if (k % 2)
			oracle_stop(o, i);
		else
			oracle_start(o, i,
				     congruent_delay(oracle_now(o), hc->table_size, residue,
						     draw_revolutions(&o->rng)));
	}
	oracle_check(o);
	/* Tick by tick through the first revolutions, then larger steps. */
	for (o->step = 0; o->step < 300; o->step++)
		oracle_advance(o, 1);
	oracle_check(o);
	for (o->step = 0; o->step < 300; o->step++) {
		oracle_advance(o, rng_percent(&o->rng, 50)
					  ? spoke_engine_next(o->e)
					  : rng_between(&o->rng, 1, 3 * hc->table_size));
		oracle_check(o);
	}
	oracle_tickless(o, oracle_tickless_bound(o, n));
	for (size_t i = 0; i < n; i++)
		O_TRUE(o, o->tm[i].fired <= 1);
	oracle_free(o);
}

/* Timers in one bucket, 2^k revolutions apart: the tickless loop skips the turns. */
static void test_hashed_revolutions(void **state)
{
	struct hashed_case *hc = *state;
	const size_t n = 48;
	struct oracle *o;

	o = oracle_new(&hc->cfg, n, 77);
	assert_int_equal(oracle_advance(o, 3), 0);
	for (size_t k = 0; k < n; k++)
		oracle_start(o, k, congruent_delay(3, hc->table_size, 1, POW2(k) - 1 + k % 3));
	oracle_tickless(o, oracle_tickless_bound(o, n));
	for (size_t k = 0; k < n; k++)
		O_EQ(o, o->tm[k].fired, 1);
	oracle_free(o);
}

/* ---- lawn: many TTLs, shared TTLs, queues coming and going ---------------------- */

static struct engine_cfg lawn_cfg = {.scheme = "lawn", .label = "lawn"};

static const uint64_t shared_ttls[] = {1, 7, 100, 1000, 65536, POW2(33)};

static void test_lawn_distinct_ttls(void **state)
{
	const size_t n = 5000;
	struct oracle *o = oracle_new(&lawn_cfg, n, 5000);
	size_t *ttl = oracle_scratch(o, n * sizeof(*ttl));

	(void)state;
	for (size_t i = 0; i < n; i++)
		ttl[i] = i + 1;
	rng_shuffle(&o->rng, ttl, n);
	for (size_t i = 0; i < n; i++)
		oracle_start(o, i, ttl[i]); /* 5000 queues of one timer */
	oracle_check(o);
	for (o->step = 0; o->step < 2000; o->step++) {
		size_t i = (size_t)rng_below(&o->rng, n);

		switch (rng_below(&o->rng, 4)) {
		case 0:
			oracle_stop(o, i);
			break;
		case 1: /* into another queue, existing or new */
			oracle_start(o, i,
				     rng_percent(&o->rng, 50) ? ttl[rng_below(&o->rng, n)]
							      : rng_between(&o->rng, 1, POW2(40)));
			break;
		default:
			oracle_advance(o, rng_percent(&o->rng, 80) ? 1 : spoke_engine_next(o->e));
			break;
		}
		oracle_check(o);
	}
	oracle_tickless(o, oracle_tickless_bound(o, n));
	oracle_free(o);
}

static void test_lawn_shared_ttls(void **state)
{
	const size_t n = 3000;
	struct oracle *o;

	(void)state;
	o = oracle_new(&lawn_cfg, n, 3000);
	for (int round = 0; round < 2; round++) { /* round 1 re-creates emptied queues */
		/* Start over time, so each queue holds many deadlines in FIFO order. */
		for (size_t i = 0; i < n; i++) {
			o->step = i;
			oracle_start(o, i,
				     shared_ttls[rng_below(&o->rng, ARRAY_SIZE(shared_ttls))]);
			if (rng_percent(&o->rng, 30))
				oracle_advance(o, rng_between(&o->rng, 1, 3));
			if (rng_percent(&o->rng, 5)) /* usually the middle of a queue */
				oracle_stop(o, (size_t)rng_below(&o->rng, i + 1));
			if (rng_percent(&o->rng, 3))
				oracle_start(
					o, (size_t)rng_below(&o->rng, i + 1),
					shared_ttls[rng_below(&o->rng, ARRAY_SIZE(shared_ttls))]);
		}
		oracle_check(o);
		/* The TTL-1 and TTL-7 queues empty and refill while others stay busy. */
		for (size_t i = 0; i < 50; i++)
			oracle_start(o, i, 7);
		for (size_t i = 0; i < 50; i++)
			oracle_stop(o, i); /* the TTL-7 queue emptied by stops */
		for (size_t i = 0; i < 50; i++)
			oracle_start(o, i, i % 2 ? 7 : 1);
		oracle_advance(o, 8); /* ... and by firing */
		oracle_check(o);
		for (size_t i = 0; i < 50; i++)
			oracle_start(o, i, 7);
		oracle_advance(o, 7);
		oracle_check(o);
		/* Drain with mixed steps, then the tickless loop. */
		for (o->step = 0; o->step < 500; o->step++) {
			oracle_advance(o, rng_percent(&o->rng, 50) ? spoke_engine_next(o->e)
								   : rng_between(&o->rng, 1, 2000));
			oracle_check(o);
		}
		oracle_tickless(o, oracle_tickless_bound(o, n));
		assert_int_equal(spoke_engine_count(o->e), 0);
	}
	oracle_free(o);
}

/* Distinct and shared TTLs in one lawn, with random operations. */
static void test_lawn_mixed(void **state)
{
	const size_t n = 8000;
	struct oracle *o;

	(void)state;
	o = oracle_new(&lawn_cfg, n, 8000);
	for (size_t i = 0; i < n; i++)
		oracle_start(o, i, i < 5000 ? 1 + i * 3 : shared_ttls[i % ARRAY_SIZE(shared_ttls)]);
	for (o->step = 0; o->step < 3000; o->step++) {
		size_t i = (size_t)rng_below(&o->rng, n);

		switch (rng_below(&o->rng, 5)) {
		case 0:
			oracle_stop(o, i);
			break;
		case 1:
			oracle_start(o, i, draw_delay(o));
			break;
		case 2:
			oracle_start(o, i,
				     shared_ttls[rng_below(&o->rng, ARRAY_SIZE(shared_ttls))]);
			break;
		default:
			oracle_advance(o, draw_advance(o));
			break;
		}
		if (o->step % 8 == 0)
			oracle_check(o);
	}
	oracle_check(o);
	oracle_tickless(o, oracle_tickless_bound(o, n));
	oracle_free(o);
}

/* ---- main ------------------------------------------------------------------------- */

static int run_hierarchical(void)
{
	int failed = 0;

	for (size_t i = 0; i < ARRAY_SIZE(hier_cases); i++) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test_prestate_setup_teardown(test_hierarchical_level_boundaries,
								 NULL, oracle_teardown,
								 &hier_cases[i]),
		};

		print_message("[ GROUP    ] %s\n", hier_cases[i].cfg.label);
		failed += cmocka_run_group_tests_name(hier_cases[i].cfg.label, tests, NULL, NULL);
	}
	return failed;
}

static int run_hashed(const char *scheme)
{
	int failed = 0;

	for (size_t i = 0; i < ARRAY_SIZE(hashed_cases); i++) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test_prestate_setup_teardown(test_hashed_one_bucket, NULL,
								 oracle_teardown, &hashed_cases[i]),
			cmocka_unit_test_prestate_setup_teardown(test_hashed_revolutions, NULL,
								 oracle_teardown, &hashed_cases[i]),
		};

		if (strcmp(hashed_cases[i].cfg.scheme, scheme) != 0)
			continue;
		print_message("[ GROUP    ] %s\n", hashed_cases[i].cfg.label);
		failed += cmocka_run_group_tests_name(hashed_cases[i].cfg.label, tests, NULL, NULL);
	}
	return failed;
}

/* The order in which the timers of one array fired, as indices. */
struct fire_order {
	struct spoke_timer *base;
	size_t n, idx[64];
};

static void note_fire_order(void *ctx, struct spoke_timer *t)
{
	struct fire_order *f = ctx;

	if (f->n < ARRAY_SIZE(f->idx))
		f->idx[f->n] = (size_t)(t - f->base);
	f->n++;
}

/*
 * The Lawn is FIFO per TTL (the paper's queues): timers of one TTL due at one
 * tick fire in the order they were started, with another TTL's timers due at
 * the same tick in between and a later part of the queue not yet due.
 */
static void test_lawn_fifo_within_tick(void **state)
{
	struct spoke_timer t[24];
	struct fire_order f = {.base = t};
	struct spoke_engine *e;
	size_t ttl5 = 0;

	(void)state;
	assert_int_equal(spoke_engine_new(&e, "lawn", NULL), 0);
	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		spoke_timer_init(&t[i]);
	/* Tick 0: 0..7 with TTL 5, 8..11 with TTL 4 after one advance (also due at 5). */
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(spoke_engine_start(e, &t[i], 5), 0);
	assert_int_equal(spoke_engine_advance(e, 1, note_fire_order, &f), 0);
	for (size_t i = 8; i < 12; i++)
		assert_int_equal(spoke_engine_start(e, &t[i], 4), 0);
	/* Tick 1: 12..23 with TTL 5, due at 6: the queue of 0..7 is due only in part at 5. */
	for (size_t i = 12; i < ARRAY_SIZE(t); i++)
		assert_int_equal(spoke_engine_start(e, &t[i], 5), 0);
	assert_int_equal(spoke_engine_advance(e, 4, note_fire_order, &f), 12);
	assert_int_equal(spoke_engine_advance(e, 1, note_fire_order, &f), 12);
	assert_int_equal(f.n, ARRAY_SIZE(t));
	for (size_t k = 0; k < f.n; k++) {
		if (f.idx[k] >= 8 && f.idx[k] < 12)
			continue; /* the other TTL: any place among them */
		if (f.idx[k] != (ttl5 < 8 ? ttl5 : ttl5 + 4))
			fail_msg("fired %zu as TTL-5 timer number %zu", f.idx[k], ttl5);
		ttl5++;
	}
	assert_int_equal(ttl5, 20);
	spoke_engine_free(e);
}

/*
 * Stops at the ends of a Lawn queue. A stop finds the queue only through
 * the timer's neighbours (the queue's sentinel at either end), so stop the
 * head, the tail, the head and the tail of two, and the only timer, then
 * start more of the same TTL: what is left fires in start order, and a
 * queue emptied by a stop is closed and opened afresh.
 */
static void test_lawn_stop_queue_ends(void **state)
{
	struct spoke_timer t[8];
	struct fire_order f = {.base = t};
	struct spoke_engine *e;

	(void)state;
	assert_int_equal(spoke_engine_new(&e, "lawn", NULL), 0);
	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		spoke_timer_init(&t[i]);
	/* One TTL-10 queue of t0..t3, deadlines 10..13; stop its head, then its tail. */
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(spoke_engine_start(e, &t[i], 10), 0);
		assert_int_equal(spoke_engine_advance(e, 1, note_fire_order, &f), 0);
	}
	assert_int_equal(spoke_engine_stop(e, &t[0]), 0);
	assert_int_equal(spoke_engine_stop(e, &t[3]), 0);
	assert_false(spoke_timer_pending(&t[0]));
	assert_false(spoke_timer_pending(&t[3]));
	assert_int_equal(spoke_engine_start(e, &t[4], 10), 0); /* deadline 14 */
	assert_int_equal(spoke_engine_count(e), 3);
	assert_int_equal(spoke_engine_next(e), 11 - 4);
	assert_int_equal(spoke_engine_advance(e, 10, note_fire_order, &f), 3);
	assert_int_equal(f.n, 3);
	assert_int_equal(f.idx[0], 1);
	assert_int_equal(f.idx[1], 2);
	assert_int_equal(f.idx[2], 4);

	/*
	 * The only timer of a queue, stopped: the queue closes (an empty one
	 * left open would spoil next()); another TTL, then the same one again.
	 */
	assert_int_equal(spoke_engine_start(e, &t[5], 10), 0);
	assert_int_equal(spoke_engine_stop(e, &t[5]), 0);
	assert_int_equal(spoke_engine_count(e), 0);
	assert_int_equal(spoke_engine_start(e, &t[7], 5), 0);
	assert_int_equal(spoke_engine_next(e), 5);
	assert_int_equal(spoke_engine_start(e, &t[6], 10), 0);
	assert_int_equal(spoke_engine_advance(e, 10, note_fire_order, &f), 2);
	assert_int_equal(f.idx[3], 7);
	assert_int_equal(f.idx[4], 6);

	/* Two timers: stop the head, refill, stop the tail, refill. */
	assert_int_equal(spoke_engine_start(e, &t[5], 10), 0);
	assert_int_equal(spoke_engine_start(e, &t[6], 10), 0);
	assert_int_equal(spoke_engine_stop(e, &t[5]), 0);
	assert_int_equal(spoke_engine_start(e, &t[7], 10), 0);
	assert_int_equal(spoke_engine_stop(e, &t[7]), 0);
	assert_int_equal(spoke_engine_start(e, &t[5], 10), 0);
	assert_int_equal(spoke_engine_count(e), 2);
	assert_int_equal(spoke_engine_next(e), 10);
	assert_int_equal(spoke_engine_advance(e, 10, note_fire_order, &f), 2);
	assert_int_equal(f.n, 7);
	assert_int_equal(f.idx[5], 6);
	assert_int_equal(f.idx[6], 5);
	assert_int_equal(spoke_engine_count(e), 0);
	assert_int_equal(spoke_engine_next(e), UINT64_MAX);
	spoke_engine_free(e);
}

/* ---- hierarchical: sorted runs ------------------------------------------------ */

/*
 * One advance over several level-1 slots of a few timers each fires them as
 * sorted runs (engine_hierarchical.c). What an expiry function does there:
 * stop a later member of the run (of its slot or of a later one), start a
 * timer due between two members (on level 0), in a slot of the run already
 * taken, or in an empty slot between two of the run's, re-arm a later member
 * to an earlier tick. Each timer must fire once, at its deadline, in order,
 * with now() equal to it, and next() from inside never later than the
 * earliest pending deadline.
 */
#define RUN_TIMERS  32
#define RUN_SLOT(k) ((uint64_t)(k) << 10) /* first tick of level-1 slot k (B = 10) */

struct run_act {
	size_t timer;	   /* the timer acted on */
	uint64_t deadline; /* 0: stop it; else (re)start it due at this tick */
};

struct run_probe {
	struct spoke_engine *e;
	struct spoke_timer t[RUN_TIMERS];
	struct run_act act[RUN_TIMERS][4]; /* what timer i's first expiry does */
	size_t nact[RUN_TIMERS], fired[RUN_TIMERS];
	size_t n, idx[2 * RUN_TIMERS];
};

static void run_probe_fire(void *ctx, struct spoke_timer *t)
{
	struct run_probe *p = ctx;
	size_t i = (size_t)(t - p->t);
	uint64_t now = spoke_engine_now(p->e), earliest = UINT64_MAX;

	assert_false(spoke_timer_pending(t));
	assert_int_equal(now, t->sp_deadline);
	assert_true(p->n < ARRAY_SIZE(p->idx));
	p->idx[p->n++] = i;
	for (size_t k = 0; p->fired[i] == 0 && k < p->nact[i]; k++) {
		const struct run_act *a = &p->act[i][k];

		if (a->deadline == 0)
			assert_int_equal(spoke_engine_stop(p->e, &p->t[a->timer]), 0);
		else
			assert_int_equal(
				spoke_engine_start(p->e, &p->t[a->timer], a->deadline - now), 0);
	}
	p->fired[i]++;
	for (size_t k = 0; k < RUN_TIMERS; k++)
		if (spoke_timer_pending(&p->t[k]) && p->t[k].sp_deadline < earliest)
			earliest = p->t[k].sp_deadline;
	if (earliest != UINT64_MAX)
		assert_true(spoke_engine_next(p->e) <= (earliest > now ? earliest - now : 1));
}

/* Start timer i due at `deadline` (> now). */
static void run_arm(struct run_probe *p, size_t i, uint64_t deadline)
{
	assert_int_equal(spoke_engine_start(p->e, &p->t[i], deadline - spoke_engine_now(p->e)), 0);
}

static void run_on(struct run_probe *p, size_t i, size_t timer, uint64_t deadline)
{
	p->act[i][p->nact[i]++] = (struct run_act){timer, deadline};
}

/* Advance once over everything (2^20 ticks), then check the order fired against want. */
static void run_check(struct run_probe *p, const size_t *want, size_t nwant)
{
	size_t fired = spoke_engine_advance(p->e, (uint64_t)1 << 20, run_probe_fire, p);

	assert_int_equal(fired, nwant);
	assert_int_equal(p->n, nwant);
	for (size_t k = 0; k < nwant; k++) {
		if (p->idx[k] != want[k])
			fail_msg("fire %zu: timer %zu, wanted timer %zu", k, p->idx[k], want[k]);
	}
	assert_int_equal(spoke_engine_count(p->e), 0);
	assert_int_equal(spoke_engine_next(p->e), UINT64_MAX);
	spoke_engine_free(p->e);
}

static struct run_probe *run_probe_new(const char *scheme)
{
	struct run_probe *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	assert_int_equal(spoke_engine_new(&p->e, scheme, NULL), 0);
	return p;
}

/* Slot 2: deadlines +5, +900, +50 (timers 0-2); slot 3: +7, +1 (3, 4); slot 5: +3 (5). */
static void run_arm_common(struct run_probe *p)
{
	run_arm(p, 0, RUN_SLOT(2) + 5);
	run_arm(p, 1, RUN_SLOT(2) + 900);
	run_arm(p, 2, RUN_SLOT(2) + 50);
	run_arm(p, 3, RUN_SLOT(3) + 7);
	run_arm(p, 4, RUN_SLOT(3) + 1);
	run_arm(p, 5, RUN_SLOT(5) + 3);
}

static void test_hierarchical_run_stops(void **state)
{
	struct run_probe *p = run_probe_new("hierarchical");
	static const size_t want[] = {0, 1, 4, 5};

	(void)state;
	run_arm_common(p);
	run_on(p, 0, 2, 0); /* a later member of its own slot */
	run_on(p, 0, 3, 0); /* a member of a later slot of the run */
	run_check(p, want, ARRAY_SIZE(want));
	free(p);
}

static void test_hierarchical_run_starts(void **state)
{
	struct run_probe *p = run_probe_new("hierarchical");
	static const size_t want[] = {0, 7, 2, 1, 8, 4, 3, 9, 5, 10, 6, 11, 12};

	(void)state;
	run_arm_common(p);
	run_arm(p, 6, RUN_SLOT(5) + 900);
	run_arm(p, 11, RUN_SLOT(8) + 900);
	run_arm(p, 12, RUN_SLOT(8) + 5);
	run_on(p, 0, 7, RUN_SLOT(2) + 15);   /* level 0, between two members */
	run_on(p, 0, 8, RUN_SLOT(3));	     /* a taken slot, before its members */
	run_on(p, 0, 9, RUN_SLOT(4) + 3);    /* the empty slot between two of the run's */
	run_on(p, 0, 10, RUN_SLOT(5) + 500); /* a taken slot, alone, between its members */
	run_on(p, 1, 11, RUN_SLOT(8) + 1);   /* a later member, re-armed earlier */
	run_check(p, want, ARRAY_SIZE(want));
	free(p);
}

/*
 * A run ends at a slot of more than HIER_RUN_MAX (16) timers, which is
 * cascaded at its tick; a stale bit (a slot emptied by a stop) inside the
 * run's word is taken as an empty slot; slots of one timer; every timer in
 * deadline order.
 */
static void test_hierarchical_run_big_slot(void **state)
{
	struct run_probe *p = run_probe_new("hierarchical");
	size_t want[RUN_TIMERS], n = 0;

	(void)state;
	run_arm(p, 0, RUN_SLOT(2) + 700);
	run_arm(p, 1, RUN_SLOT(2) + 9);
	run_arm(p, 2, RUN_SLOT(4) + 1); /* stopped: a stale bit */
	run_arm(p, 3, RUN_SLOT(6) + 1000);
	for (size_t i = 4; i < 24; i++) /* 20 in slot 7, deadlines falling */
		run_arm(p, i, RUN_SLOT(7) + 1000 - 40 * i);
	run_arm(p, 24, RUN_SLOT(8) + 2);
	run_arm(p, 25, RUN_SLOT(8) + 1);
	assert_int_equal(spoke_engine_stop(p->e, &p->t[2]), 0);
	want[n++] = 1;
	want[n++] = 0;
	want[n++] = 3;
	for (size_t i = 23; i >= 4; i--)
		want[n++] = i;
	want[n++] = 25;
	want[n++] = 24;
	run_check(p, want, n);
	free(p);
}

static int run_hierarchical_runs(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hierarchical_run_stops),
		cmocka_unit_test(test_hierarchical_run_starts),
		cmocka_unit_test(test_hierarchical_run_big_slot),
	};

	print_message("[ GROUP    ] hierarchical sorted runs\n");
	return cmocka_run_group_tests_name("hierarchical sorted runs", tests, NULL, NULL);
}

/* ---- lawn: the paths of its advance ------------------------------------------- */

/*
 * The Lawn's advance (engine_lawn.c) fires a key alone in the first
 * occupied slot of its wheel of heads straight from its queue, and empties
 * a slot of more keys at the earliest of their deadlines, those due then
 * collected first. Its digits are 8 bits: from now = 0, a deadline in
 * [256, 65536) has its key on level 1, in slot d >> 8, one in [65536, 2^24)
 * on level 2. What expiry functions do there, in one advance: stop a timer
 * of a slot still to come, start a timer due before the rest of a slot
 * being emptied, stop a tie of its own queue (on the due list by then),
 * re-arm itself into its own queue, closed as it fired, and into a new one.
 */
static void test_lawn_advance_paths(void **state)
{
	struct run_probe *p = run_probe_new("lawn");
	static const size_t want[] = {0, 9, 1, 10, 3, 4, 3, 6, 11, 12, 6};

	(void)state;
	run_arm(p, 0, 300);	   /* level-1 slot 1, alone */
	run_arm(p, 1, 520);	   /* level-1 slot 2: three keys */
	run_arm(p, 2, 600);	   /*   stopped by 0 */
	run_arm(p, 3, 700);	   /*   re-arms itself */
	run_arm(p, 4, 1000);	   /* level-1 slot 3: one key, */
	run_arm(p, 5, 1000);	   /*   its queue two timers due at once */
	run_arm(p, 6, 70000);	   /* level 2, alone: fired with no cascade */
	run_on(p, 0, 2, 0);	   /* a key of a slot to come */
	run_on(p, 0, 9, 310);	   /* level 0, next */
	run_on(p, 1, 10, 650);	   /* before 3, left in the emptied slot */
	run_on(p, 3, 3, 1100);	   /* its own TTL again, the queue closed */
	run_on(p, 4, 5, 0);	   /* its tie, collected with it */
	run_on(p, 6, 11, 70001);   /* a new queue, next tick */
	run_on(p, 6, 6, 140000);   /* its own TTL, 70000 */
	run_on(p, 11, 12, 139999); /* TTL 69998: due before 6 again */
	run_check(p, want, ARRAY_SIZE(want));
	free(p);
}

/*
 * Keys of two TTLs due at one tick share a slot; everything due at that
 * tick is collected before anything fires, so the expiry function of one
 * may stop the other (0, and it never fires). On level 0 (both started
 * within the tick's 256-tick block) and on level 1.
 */
static void test_lawn_same_tick_stop(void **state)
{
	static const uint64_t block_start[] = {1290, 10};

	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(block_start); k++) {
		struct run_probe *p = run_probe_new("lawn");

		assert_int_equal(spoke_engine_advance(p->e, block_start[k], run_probe_fire, p), 0);
		run_arm(p, 0, 1500); /* TTL 1500 - start */
		assert_int_equal(spoke_engine_advance(p->e, 1, run_probe_fire, p), 0);
		run_arm(p, 1, 1500); /* one tick later: another TTL, the same deadline */
		run_on(p, 0, 1, 0);
		run_on(p, 1, 0, 0); /* whichever fires first stops the other */
		assert_int_equal(spoke_engine_advance(p->e, 2000, run_probe_fire, p), 1);
		assert_int_equal(p->n, 1);
		assert_int_equal(spoke_engine_count(p->e), 0);
		spoke_engine_free(p->e);
		free(p);
	}
}

/*
 * A key alone in the first slot: next() answers its deadline, so a
 * tickless caller reaches it in one step. But an advance that stops
 * between the slot's first tick and that deadline must still empty the
 * slot at its first tick: a timer started then, due after the lone one,
 * goes to level 0, and would otherwise be found first.
 */
static void test_lawn_lone_key_steps(void **state)
{
	struct run_probe *p = run_probe_new("lawn");
	static const size_t want[] = {0, 1, 2};

	(void)state;
	run_arm(p, 0, 300); /* alone in level-1 slot 1, first tick 256 */
	assert_int_equal(spoke_engine_next(p->e), 300);
	assert_int_equal(spoke_engine_advance(p->e, 270, run_probe_fire, p), 0);
	assert_int_equal(spoke_engine_next(p->e), 30);
	run_arm(p, 1, 370); /* level 0 from 270 */
	run_arm(p, 2, 70000);
	assert_int_equal(spoke_engine_next(p->e), 30);
	run_check(p, want, ARRAY_SIZE(want));
	free(p);
}

static int run_lawn(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_lawn_distinct_ttls, oracle_teardown),
		cmocka_unit_test_teardown(test_lawn_shared_ttls, oracle_teardown),
		cmocka_unit_test_teardown(test_lawn_mixed, oracle_teardown),
		cmocka_unit_test(test_lawn_fifo_within_tick),
		cmocka_unit_test(test_lawn_stop_queue_ends),
		cmocka_unit_test(test_lawn_advance_paths),
		cmocka_unit_test(test_lawn_same_tick_stop),
		cmocka_unit_test(test_lawn_lone_key_steps),
	};

	print_message("[ GROUP    ] lawn\n");
	return cmocka_run_group_tests_name("lawn", tests, NULL, NULL);
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	bool matched = false;
	int failed = 0;

	if (!only || strcmp(only, "hierarchical") == 0) {
		failed += run_hierarchical();
		failed += run_hierarchical_runs();
		matched = true;
	}
	if (!only || strcmp(only, "hashed") == 0 || strcmp(only, "hashed-sorted") == 0) {
		if (!only || strcmp(only, "hashed") == 0)
			failed += run_hashed("hashed");
		if (!only || strcmp(only, "hashed-sorted") == 0)
			failed += run_hashed("hashed-sorted");
		matched = true;
	}
	if (!only || strcmp(only, "lawn") == 0) {
		failed += run_lawn();
		matched = true;
	}
	if (!matched) {
		fprintf(stderr, "%s: unknown group \"%s\"\n", argv[0], only);
		return 2;
	}
	return failed ? 1 : 0;
}
