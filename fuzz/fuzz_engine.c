/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_engine.c - libFuzzer target: bytes become an engine, its parameters
 * and a sequence of operations, each checked by the oracle of
 * tests/engine_oracle_core.h (the one the cmocka conformance suite uses).
 *
 * Input layout (a missing byte reads as 0):
 *
 *   byte 0   scheme = b % 8 (spoke_engine_schemes() order);
 *            mode = (b / 8) % 4: 0 defaults (params NULL), 1 and 3 a small
 *            valid geometry from bytes 1-2 with junk in the fields the
 *            scheme does not have, 2 bad parameters from bytes 1-2, which
 *            must give -EINVAL (schemes without parameters must accept any)
 *            and leave *out alone, then the engine runs with defaults;
 *            timers = {2, 3, 4, 8, 16, 16, 32, 32}[b / 32]
 *   byte 1-2 geometry (see engine_config())
 *   then operations, one opcode byte each: kind = op % 8, arg = op / 8
 *     0, 1  start timer arg % timers, delay from read_delay()
 *     2     stop timer arg % timers (pending or not)
 *     3     advance by read_advance() ticks
 *     4     advance(next()) once
 *     5     tickless loop: advance(next()) up to arg + 1 times
 *     6     arm timers arg % timers .. + (next byte % 8) with one delay (ties)
 *     7     advance(1), arg + 1 times
 *
 * Every expiry reads one more byte from the same stream, the action its
 * callback takes (see on_fire()): nothing, re-arm itself (delay 0 too),
 * start or stop another timer, stop every other timer due at this tick,
 * re-enter advance (refused), or a full oracle check from inside the
 * callback. Since each such action eats input, callbacks cannot re-arm
 * forever: at the end of the input the engine drains in a bounded tickless
 * loop, so every armed timer has fired exactly once or was stopped, and
 * spoke_engine_free() must leave nothing behind (LeakSanitizer).
 *
 * After every operation the oracle compares count, pending flags, deadlines
 * and next() with its model; at every expiry it checks that the timer was
 * pending, fires at exactly its deadline tick, in order, not in the pass
 * that armed it at this tick. The tickless loops check the bound of
 * docs/contract.md line E8: advance(next()) steps that fire nothing are at most
 * cfg_steps_per_deadline() per deadline involved.
 */
#include "engine_oracle_core.h"

struct input {
	const uint8_t *p, *end;
};

static bool in_left(const struct input *in)
{
	return in->p < in->end;
}

static uint8_t in_u8(struct input *in)
{
	return in_left(in) ? *in->p++ : 0;
}

/* n bytes, little endian (n <= 8). */
static uint64_t in_uint(struct input *in, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)in_u8(in) << (8 * i);
	return v;
}

struct fuzz {
	struct engine_cfg cfg;
	char label[96];
	struct oracle *o;
	struct input in;
	uint64_t arms; /* successful starts, from anywhere */
};

/* ---- the engine and its parameters ----------------------------------------- */

static unsigned scheme_count(void)
{
	unsigned n = 0;

	for (const char *const *s = spoke_engine_schemes(); *s; s++)
		n++;
	return n;
}

/* Values each field must refuse, whatever the other fields hold. */
static const unsigned bad_level_bits[] = {17, 18, 31, 32, 64, 100, UINT_MAX};
static const unsigned bad_levels[] = {65, 66, 100, 128, UINT_MAX};
static const size_t bad_table_sizes[] = {
	3, 5, 6, 7, 100, 1000, 4095, 4097, (1u << 24) + 1, 1u << 25, SIZE_MAX};
static const uint64_t bad_max_intervals[] = {(1u << 28) + 1, 1u << 29, UINT32_MAX, UINT64_MAX};
static const uint64_t bad_initial_capacities[] = {((uint64_t)1 << 32) + 1, (uint64_t)1 << 33,
						  UINT64_MAX};

#define PICK(a, b) ((a)[(b) % ARRAY_SIZE(a)])

/* Junk in the fields a scheme does not have: they must be ignored. */
static void junk_foreign_fields(struct spoke_engine_params *p, const char *scheme, uint8_t g)
{
	if (strcmp(scheme, "hierarchical") != 0) {
		p->level_bits = PICK(bad_level_bits, g);
		p->levels = PICK(bad_levels, g);
	}
	if (strcmp(scheme, "hashed") != 0 && strcmp(scheme, "hashed-sorted") != 0)
		p->table_size = PICK(bad_table_sizes, g);
	if (strcmp(scheme, "wheel") != 0)
		p->max_interval = PICK(bad_max_intervals, g);
	if (strcmp(scheme, "heap") != 0)
		p->initial_capacity = (size_t)PICK(bad_initial_capacities, g);
}

/*
 * A valid geometry, kept small so each input stays fast: hierarchical 1..12
 * bits and 0..64 levels (fewer than 64 bits need keep far timers on the
 * overflow list), 1..2^16 buckets, max_interval 1..2^16, heap capacity 1..64.
 */
static void valid_params(struct spoke_engine_params *p, const char *scheme, uint8_t g1, uint8_t g2)
{
	if (strcmp(scheme, "hierarchical") == 0) {
		p->level_bits = 1 + g1 % 12;
		p->levels = g2 % 65;
	} else if (strcmp(scheme, "hashed") == 0 || strcmp(scheme, "hashed-sorted") == 0) {
		p->table_size = (size_t)1 << (g1 % 17);
	} else if (strcmp(scheme, "wheel") == 0) {
		p->max_interval = 1 + ((uint64_t)g1 << 8 | g2);
	} else if (strcmp(scheme, "heap") == 0) {
		p->initial_capacity = 1 + g1 % 64;
	}
}

/* Bad parameters for the scheme; false if it has none (then junk is ignored). */
static bool bad_params(struct spoke_engine_params *p, const char *scheme, uint8_t g1, uint8_t g2)
{
	if (strcmp(scheme, "hierarchical") == 0) {
		/* One field bad, the other one default or valid. */
		if (g1 & 1) {
			p->level_bits = PICK(bad_level_bits, g2);
			p->levels = g1 & 2 ? 1 + g2 % 64 : 0;
		} else {
			p->levels = PICK(bad_levels, g2);
			p->level_bits = g1 & 2 ? 1 + g2 % 16 : 0;
		}
		return true;
	}
	if (strcmp(scheme, "hashed") == 0 || strcmp(scheme, "hashed-sorted") == 0) {
		p->table_size = PICK(bad_table_sizes, g2);
		return true;
	}
	if (strcmp(scheme, "wheel") == 0) {
		p->max_interval = PICK(bad_max_intervals, g2);
		return true;
	}
	if (strcmp(scheme, "heap") == 0) {
		p->initial_capacity = (size_t)PICK(bad_initial_capacities, g2);
		return true;
	}
	return false;
}

/* An address *out must still hold after a refused spoke_engine_new(). */
static uint64_t sentinel_storage;
#define SENTINEL_ENGINE ((struct spoke_engine *)(void *)&sentinel_storage)

static void expect_new(const char *scheme, const struct spoke_engine_params *p, int want)
{
	struct spoke_engine *e = SENTINEL_ENGINE;
	int rc = spoke_engine_new(&e, scheme, p);

	if (rc != want)
		ORACLE_FAIL("spoke_engine_new(\"%s\", {bits %u levels %u table %zu max %" PRIu64
			    " cap %zu}) = %d, expected %d",
			    scheme, p ? p->level_bits : 0, p ? p->levels : 0, p ? p->table_size : 0,
			    p ? p->max_interval : 0, p ? p->initial_capacity : 0, rc, want);
	if (want != 0 && e != SENTINEL_ENGINE)
		ORACLE_FAIL("spoke_engine_new(\"%s\") failed but wrote *out", scheme);
	if (want == 0)
		spoke_engine_free(e);
}

/* Unknown names, near misses of real ones included. */
static const char *const bad_names[] = {
	"",	 "List",	"heap ",       "hashed_sorted", "wheel\n", "hierarchica",
	"lawns", "sorted list", "HIERARCHICAL"};

/* Byte 0-2: the engine configuration (see the top of the file). */
static void engine_config(struct fuzz *f)
{
	static const size_t ntimers[] = {2, 3, 4, 8, 16, 16, 32, 32};
	uint8_t b = in_u8(&f->in), g1 = in_u8(&f->in), g2 = in_u8(&f->in);
	const char *scheme = spoke_engine_schemes()[b % scheme_count()];
	unsigned mode = (b / 8) % 4;
	struct engine_cfg *c = &f->cfg;

	memset(c, 0, sizeof(*c));
	c->scheme = scheme;
	if (mode == 2) {
		struct spoke_engine_params bad = {0};
		bool has = bad_params(&bad, scheme, g1, g2);

		if (!has)
			junk_foreign_fields(&bad, scheme, g2);
		expect_new(scheme, &bad, has ? -EINVAL : 0);
		expect_new(PICK(bad_names, g1), NULL, -EINVAL);
	} else if (mode != 0) {
		c->use_params = true;
		junk_foreign_fields(&c->params, scheme, g2);
		valid_params(&c->params, scheme, g1, g2);
	}
	snprintf(f->label, sizeof(f->label),
		 "%s mode=%u bits=%u levels=%u table=%zu max=%" PRIu64 " cap=%zu", scheme, mode,
		 c->params.level_bits, c->params.levels, c->params.table_size,
		 c->params.max_interval, c->params.initial_capacity);
	c->label = f->label;
	f->o = oracle_new(c, ntimers[b / 32], b);
	f->o->user = f;
}

/* ---- delays and advances --------------------------------------------------- */

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Ticks from now to the next multiple of 2^k (or 1 at the end of time). */
static uint64_t to_boundary(uint64_t now, unsigned k)
{
	uint64_t mask = k >= 64 ? UINT64_MAX : POW2(k) - 1;

	return (now | mask) == UINT64_MAX ? 1 : (now | mask) + 1 - now;
}

/* A start delay: 0, 1, small, medium, 2^k +- 1, near UINT64_MAX, around
 * max_interval (-ERANGE for `wheel` past it), onto another timer's deadline,
 * onto a level boundary, raw 64-bit values. */
static uint64_t read_delay(struct fuzz *f)
{
	struct oracle *o = f->o;
	uint8_t s = in_u8(&f->in);
	unsigned hi = s >> 4;
	uint64_t now = oracle_now(o), max = o->max_interval == UINT64_MAX ? 65535 : o->max_interval;
	const struct otimer *other;

	switch (s % 16) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return 2 + hi;
	case 3:
		return in_u8(&f->in);
	case 4:
		return in_uint(&f->in, 2);
	case 5:
		return POW2(in_u8(&f->in) % 64) - 1 + hi % 3;
	case 6:
		return UINT64_MAX - in_u8(&f->in);
	case 7:
		return sat_sub(max + hi % 5, 2);
	case 8:
		other = &o->tm[in_u8(&f->in) % o->n];
		return other->pending ? sat_sub(other->deadline + hi % 3, now + 1) : hi;
	case 9:
		return sat_sub(to_boundary(now, in_u8(&f->in) % 65) + hi % 3, 1);
	case 10:
		return in_uint(&f->in, 8);
	case 11:
		return in_uint(&f->in, 4) << (hi * 4 % 64);
	default:
		return hi + 1;
	}
}

/* An advance: 0, 1, small, medium, next() and next() - 1 and a little
 * past it, onto the earliest deadline +- 1, 2^40, 2^k, raw, to the end of
 * time. */
static uint64_t read_advance(struct fuzz *f)
{
	struct oracle *o = f->o;
	uint8_t s = in_u8(&f->in);
	unsigned hi = s >> 4;
	uint64_t now = oracle_now(o), next = spoke_engine_next(o->e);
	uint64_t earliest = oracle_earliest(o);
	uint64_t to_earliest = earliest == UINT64_MAX ? 1 + hi : sat_sub(earliest, now);

	switch (s % 16) {
	case 0:
		return 1;
	case 1:
		return 1 + hi;
	case 2:
		return 1 + (uint64_t)in_u8(&f->in);
	case 3:
		return in_uint(&f->in, 2);
	case 4:
		return next;
	case 5:
		return next > 1 ? next - 1 : 1;
	case 6:
		return to_earliest;
	case 7:
		return POW2(40);
	case 8:
		return POW2(in_u8(&f->in) % 64);
	case 9:
		return in_uint(&f->in, 8) >> hi * 4;
	case 10:
		return sat_add(next, hi);
	case 11:
		return sat_sub(sat_add(to_earliest, hi % 3), 1);
	case 12:
		return 0;
	case 13:
		return UINT64_MAX;
	default:
		return hi + 1;
	}
}

/* ---- operations -------------------------------------------------------------- */

static void fuzz_start(struct fuzz *f, size_t i, uint64_t delay_ticks)
{
	if (oracle_start(f->o, i, delay_ticks) == 0)
		f->arms++;
}

/*
 * advance(next()) up to max_steps times (or until nothing is pending): the
 * steps that fire nothing are bounded by cfg_steps_per_deadline() for each
 * deadline that was pending or got armed meanwhile.
 */
static void fuzz_tickless(struct fuzz *f, uint64_t max_steps)
{
	struct oracle *o = f->o;
	uint64_t deadlines = o->npending, arms = f->arms, empty = 0;

	for (uint64_t step = 0; step < max_steps && spoke_engine_count(o->e) > 0; step++) {
		if (oracle_advance(o, spoke_engine_next(o->e)) == 0)
			empty++;
		deadlines += f->arms - arms;
		arms = f->arms;
		if (empty > cfg_steps_per_deadline(o->cfg) * deadlines)
			O_FAIL(o,
			       "advance(next()) fired nothing %" PRIu64 " times for %" PRIu64
			       " deadlines",
			       empty, deadlines);
	}
}

/* Inside an expiry: the action the next input byte asks for. */
static void on_fire(struct oracle *o, struct otimer *ot)
{
	struct fuzz *f = o->user;
	size_t self = oracle_index(o, ot);
	uint8_t a;
	uint64_t now;

	if (!in_left(&f->in))
		return;
	a = in_u8(&f->in);
	switch (a % 8) {
	case 0:
		break;
	case 1:
		fuzz_start(f, self, read_delay(f));
		break;
	case 2:
		fuzz_start(f, (a / 8) % o->n, read_delay(f));
		break;
	case 3:
		oracle_stop(o, (a / 8) % o->n);
		break;
	case 4:
		fuzz_start(f, self, 0); /* fires at the next tick, never in this pass */
		break;
	case 5:
		/* Stop the others due at this tick: they must never fire. */
		now = oracle_now(o);
		for (size_t i = 0; i < o->n; i++)
			if (o->tm[i].pending && o->tm[i].deadline == now)
				oracle_stop(o, i);
		break;
	case 6:
		/* advance() re-entered from a callback does nothing. */
		now = oracle_now(o);
		O_EQ(o, spoke_engine_advance(o->e, 1 + a / 8, oracle_expire, o), 0);
		O_EQ(o, oracle_now(o), now);
		break;
	default:
		oracle_check(o);
		break;
	}
}

static void run_op(struct fuzz *f)
{
	struct oracle *o = f->o;
	uint8_t op = in_u8(&f->in);
	unsigned arg = op / 8;
	size_t i = arg % o->n;

	switch (op % 8) {
	case 0:
	case 1:
		fuzz_start(f, i, read_delay(f));
		break;
	case 2:
		oracle_stop(o, i);
		break;
	case 3:
		oracle_advance(o, read_advance(f));
		break;
	case 4:
		fuzz_tickless(f, 1);
		break;
	case 5:
		fuzz_tickless(f, arg + 1);
		break;
	case 6: {
		size_t k = 1 + in_u8(&f->in) % 8;
		uint64_t d = read_delay(f);

		for (size_t j = 0; j < k; j++)
			fuzz_start(f, (i + j) % o->n, d);
		break;
	}
	default:
		for (unsigned j = 0; j <= arg; j++)
			oracle_advance(o, 1);
		break;
	}
	oracle_check(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz f = {.in = {data, data + size}};

	engine_config(&f);
	f.o->on_fire = on_fire;
	while (in_left(&f.in)) {
		f.o->step++;
		run_op(&f);
	}
	/* Input used up: callbacks act no more, so the engine drains. */
	oracle_tickless(f.o, oracle_tickless_bound(f.o, f.o->npending));
	oracle_free(f.o);
	return 0;
}
