/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_oracle_core.h - the model the engine tests hold every scheme to.
 *
 * An oracle owns an array of timers and knows, for each, what the contract
 * in include/spoke/engine.h says must be true of it: pending or not, and if
 * pending its deadline now + max(delay, 1), saturating at UINT64_MAX. Every
 * start, stop and advance of a test goes through the oracle, which runs it
 * on the engine and checks the engine's answer:
 *
 *   start    0 and the new deadline; `wheel`: -ERANGE past max_interval with
 *            the timer unchanged;
 *   stop     0 iff pending, else -ENOENT;
 *   advance  returns the number of callbacks run and moves now by exactly
 *            `ticks` (saturating); nothing whose deadline was reached is
 *            still pending afterwards;
 *   expiry   (oracle_expire) the timer was pending, spoke_engine_now() is
 *            exactly its deadline, firings come in non-decreasing order, the
 *            timer is no longer pending and stop gives -ENOENT, and it was
 *            not armed in this same pass at this same tick;
 *   check    (oracle_check) count, every pending flag and deadline, and
 *            next(): UINT64_MAX when empty, else 1 <= next <= the earliest
 *            deadline minus now.
 *
 * A test may hang a hook on expiry (o->on_fire) to start and stop timers
 * from inside callbacks; the hook goes through the oracle too.
 *
 * Shared by the cmocka tests (through engine_oracle.h) and the fuzz target
 * fuzz/fuzz_engine.c; header only, everything static inline, no test
 * framework. A broken promise goes to ORACLE_FAIL(fmt, ...), which must not
 * return, after ORACLE_PRINT(fmt, ...) has printed where it happened; the
 * includer may define both first (engine_oracle.h maps them to cmocka), the
 * defaults print to stderr and abort().
 */
#ifndef SPOKE_TESTS_ENGINE_ORACLE_CORE_H
#define SPOKE_TESTS_ENGINE_ORACLE_CORE_H

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spoke/engine.h>

#include "splitmix.h"
#include "test_prelude.h"

#ifndef ORACLE_PRINT
#define ORACLE_PRINT(...) fprintf(stderr, __VA_ARGS__)
#endif
#ifndef ORACLE_FAIL
#define ORACLE_FAIL(...)                                                                           \
	do {                                                                                       \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		abort();                                                                           \
	} while (0)
#endif

#define CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))
#define POW2(k)			      ((uint64_t)1 << (k))

/* ---- a fixed-seed PRNG (splitmix64, splitmix.h) ---------------------------- */

/* In [lo, hi], both included. */
static inline uint64_t rng_between(struct rng *r, uint64_t lo, uint64_t hi)
{
	if (lo == 0 && hi == UINT64_MAX)
		return rng_next(r);
	return lo + rng_below(r, hi - lo + 1);
}

static inline bool rng_percent(struct rng *r, unsigned percent)
{
	return rng_below(r, 100) < percent;
}

/* Fisher-Yates over an array of size_t. */
static inline void rng_shuffle(struct rng *r, size_t *a, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)rng_below(r, i);
		size_t tmp = a[i - 1];

		a[i - 1] = a[j];
		a[j] = tmp;
	}
}

/* ---- tick arithmetic, written independently of lib/engine.c --------------- */

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t expected_deadline(uint64_t now, uint64_t delay_ticks)
{
	return sat_add(now, delay_ticks ? delay_ticks : 1);
}

/* ---- which engine a test runs on ------------------------------------------ */

struct engine_cfg {
	const char *scheme;
	const char *label; /* printed with failures, e.g. "hierarchical bits=6 levels=3" */
	bool use_params;   /* false: spoke_engine_new(..., NULL) */
	struct spoke_engine_params params;
};

static inline bool cfg_is(const struct engine_cfg *c, const char *scheme)
{
	return strcmp(c->scheme, scheme) == 0;
}

/* The longest delay the engine accepts (only `wheel` has a bound). */
static inline uint64_t cfg_max_interval(const struct engine_cfg *c)
{
	if (!cfg_is(c, "wheel"))
		return UINT64_MAX;
	return c->use_params && c->params.max_interval ? c->params.max_interval : 65535;
}

/*
 * Tickless steps allowed per deadline: the contract allows one per wheel level
 * it cascades through; 10 covers every default geometry, a deep hierarchy
 * (1-bit levels) gets its level count plus a few. Levels beyond what 64 bits
 * need (default: just enough, with 10-bit levels) never hold a timer.
 */
static inline uint64_t cfg_steps_per_deadline(const struct engine_cfg *c)
{
	unsigned bits = c->use_params && c->params.level_bits ? c->params.level_bits : 10;
	unsigned needed = (64 + bits - 1) / bits;
	unsigned levels = c->use_params && c->params.levels ? c->params.levels : needed;

	if (!cfg_is(c, "hierarchical"))
		return 10;
	if (levels > needed)
		levels = needed;
	return levels + 3 > 10 ? levels + 3 : 10;
}

static inline struct spoke_engine *cfg_new_engine(const struct engine_cfg *c)
{
	struct spoke_engine *e = NULL;
	int rc = spoke_engine_new(&e, c->scheme, c->use_params ? &c->params : NULL);

	if (rc != 0 || e == NULL)
		ORACLE_FAIL("spoke_engine_new(\"%s\") [%s] = %d", c->scheme, c->label, rc);
	return e;
}

/* ---- the oracle ------------------------------------------------------------ */

struct otimer {
	struct spoke_timer t;
	uint64_t deadline;   /* expected deadline while pending */
	uint64_t armed_at;   /* now when last armed */
	uint64_t armed_pass; /* oracle pass it was armed in, 0 = between passes */
	uint64_t fired;	     /* callbacks run so far */
	bool pending;	     /* expected pending */
};

struct oracle;
typedef void oracle_hook_fn(struct oracle *o, struct otimer *ot);

struct oracle {
	struct spoke_engine *e;
	const struct engine_cfg *cfg;
	struct otimer *tm;
	size_t n;
	size_t npending;
	uint64_t max_interval;
	uint64_t pass; /* serial of the current (or last) advance call */
	bool in_advance;
	size_t fired_in_pass;
	uint64_t last_fire_now; /* now at the previous expiry of this pass */
	uint64_t total_fired;
	oracle_hook_fn *on_fire; /* optional: runs inside each expiry */
	void *user;
	struct rng rng;
	uint64_t seed;
	uint64_t step;
	void *scratch;		  /* oracle_scratch(), freed with the oracle */
	struct oracle *live_next; /* on oracle_live until oracle_free() */
};

/* Oracles not yet freed: a failed assertion leaves its test by longjmp. */
static struct oracle *oracle_live;

/* Print where a failure happened (scheme, seed, step, now), then fail. */
#define O_FAIL(o, ...)                                                                             \
	do {                                                                                       \
		oracle_where(o);                                                                   \
		ORACLE_FAIL(__VA_ARGS__);                                                          \
	} while (0)

#define O_EQ(o, a, b)                                                                              \
	do {                                                                                       \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                   \
		if (a_ != b_)                                                                      \
			O_FAIL(o,                                                                  \
			       "%s = %" PRIu64 " (%#" PRIx64 "), expected %s = %" PRIu64           \
			       " (%#" PRIx64 ")",                                                  \
			       #a, a_, a_, #b, b_, b_);                                            \
	} while (0)

#define O_RC(o, a, b)                                                                              \
	do {                                                                                       \
		int a_ = (a), b_ = (b);                                                            \
		if (a_ != b_)                                                                      \
			O_FAIL(o, "%s = %d, expected %s = %d", #a, a_, #b, b_);                    \
	} while (0)

#define O_TRUE(o, c)                                                                               \
	do {                                                                                       \
		if (!(c))                                                                          \
			O_FAIL(o, "expected: %s", #c);                                             \
	} while (0)

static inline void oracle_where(const struct oracle *o)
{
	if (!o || !o->e)
		return;
	ORACLE_PRINT("[%s] seed=%" PRIu64 " step=%" PRIu64 " now=%" PRIu64 " pass=%" PRIu64
		     " in_advance=%d\n",
		     o->cfg ? o->cfg->label : "?", o->seed, o->step, spoke_engine_now(o->e),
		     o->pass, (int)o->in_advance);
}

static inline size_t oracle_index(const struct oracle *o, const struct otimer *ot)
{
	return (size_t)(ot - o->tm);
}

/* A new oracle with n timers (not started) and a fresh engine for cfg. */
static inline struct oracle *oracle_new(const struct engine_cfg *cfg, size_t n, uint64_t seed)
{
	struct oracle *o = calloc(1, sizeof(*o));

	if (!o)
		ORACLE_FAIL("oracle_new: out of memory");
	o->live_next = oracle_live;
	oracle_live = o;
	o->cfg = cfg;
	o->seed = seed;
	o->rng.s = seed;
	o->n = n;
	o->max_interval = cfg_max_interval(cfg);
	o->tm = calloc(n ? n : 1, sizeof(*o->tm));
	if (!o->tm)
		ORACLE_FAIL("oracle_new: out of memory");
	for (size_t i = 0; i < n; i++)
		spoke_timer_init(&o->tm[i].t);
	o->e = cfg_new_engine(cfg);
	return o;
}

static inline void oracle_free(struct oracle *o)
{
	struct oracle **pp = &oracle_live;

	while (*pp != o)
		pp = &(*pp)->live_next;
	*pp = o->live_next;
	spoke_engine_free(o->e);
	free(o->tm);
	free(o->scratch);
	free(o);
}

/* Zeroed memory that lives as long as the oracle (one block per oracle). */
static inline void *oracle_scratch(struct oracle *o, size_t bytes)
{
	if (o->scratch)
		ORACLE_FAIL("oracle_scratch: one block per oracle");
	o->scratch = calloc(1, bytes);
	if (!o->scratch)
		ORACLE_FAIL("oracle_scratch: out of memory");
	return o->scratch;
}

static inline uint64_t oracle_now(const struct oracle *o)
{
	return spoke_engine_now(o->e);
}

/* Earliest expected deadline, UINT64_MAX if nothing is pending. */
static inline uint64_t oracle_earliest(const struct oracle *o)
{
	uint64_t min = UINT64_MAX;

	for (size_t i = 0; i < o->n; i++)
		if (o->tm[i].pending && o->tm[i].deadline < min)
			min = o->tm[i].deadline;
	return min;
}

/* Start (or re-arm) timer i; checks the result. Returns what start returned. */
static inline int oracle_start(struct oracle *o, size_t i, uint64_t delay_ticks)
{
	struct otimer *ot = &o->tm[i];
	uint64_t now = oracle_now(o);
	bool was_pending = spoke_timer_pending(&ot->t);
	uint64_t old_deadline = spoke_timer_deadline(&ot->t);
	size_t count = spoke_engine_count(o->e);
	int rc = spoke_engine_start(o->e, &ot->t, delay_ticks);

	if (delay_ticks > o->max_interval) {
		O_RC(o, rc, -ERANGE);
		O_EQ(o, spoke_timer_pending(&ot->t), was_pending);
		O_EQ(o, was_pending, ot->pending);
		if (was_pending)
			O_EQ(o, spoke_timer_deadline(&ot->t), old_deadline);
		O_EQ(o, spoke_engine_count(o->e), count);
		return rc;
	}
	O_RC(o, rc, 0);
	if (!ot->pending) {
		ot->pending = true;
		o->npending++;
	}
	ot->deadline = expected_deadline(now, delay_ticks);
	ot->armed_at = now;
	ot->armed_pass = o->in_advance ? o->pass : 0;
	O_TRUE(o, spoke_timer_pending(&ot->t));
	O_EQ(o, spoke_timer_deadline(&ot->t), ot->deadline);
	O_EQ(o, spoke_engine_now(o->e), now);
	O_EQ(o, spoke_engine_count(o->e), o->npending);
	return rc;
}

/* Stop timer i: 0 iff the oracle has it pending, else -ENOENT. */
static inline int oracle_stop(struct oracle *o, size_t i)
{
	struct otimer *ot = &o->tm[i];
	int rc = spoke_engine_stop(o->e, &ot->t);

	O_RC(o, rc, ot->pending ? 0 : -ENOENT);
	if (ot->pending) {
		ot->pending = false;
		o->npending--;
	}
	O_TRUE(o, !spoke_timer_pending(&ot->t));
	O_EQ(o, spoke_engine_count(o->e), o->npending);
	return rc;
}

/* next(): UINT64_MAX when empty, else in [1, max(earliest - now, 1)]. */
static inline void oracle_next_within(struct oracle *o, uint64_t earliest)
{
	uint64_t now = oracle_now(o);
	uint64_t next = spoke_engine_next(o->e);

	if (o->npending == 0) {
		O_EQ(o, next, UINT64_MAX);
		return;
	}
	O_TRUE(o, next >= 1);
	if (next > (earliest > now ? earliest - now : 1))
		O_FAIL(o,
		       "next() = %" PRIu64 " is later than the earliest deadline %" PRIu64
		       " (now %" PRIu64 ")",
		       next, earliest, now);
}

/* next() is also checked inside callbacks when the oracle is this small. */
#define ORACLE_NEXT_IN_CALLBACK_MAX 64

static inline void oracle_check_next(struct oracle *o)
{
	oracle_next_within(o, oracle_earliest(o));
}

/* The expiry function every oracle-driven advance passes to the engine. */
static inline void oracle_expire(void *ctx, struct spoke_timer *t)
{
	struct oracle *o = ctx;
	struct otimer *ot = CONTAINER_OF(t, struct otimer, t);
	uint64_t now = spoke_engine_now(o->e);

	O_TRUE(o, o->in_advance);
	O_TRUE(o, ot >= o->tm && ot < o->tm + o->n);
	if (!ot->pending)
		O_FAIL(o, "timer %zu fired but is not pending (fired %" PRIu64 " times before)",
		       oracle_index(o, ot), ot->fired);
	if (now != ot->deadline)
		O_FAIL(o,
		       "timer %zu fired at now=%" PRIu64 ", its deadline is %" PRIu64
		       " (armed at %" PRIu64 ")",
		       oracle_index(o, ot), now, ot->deadline, ot->armed_at);
	if (ot->armed_pass == o->pass && ot->armed_at == now)
		O_FAIL(o,
		       "timer %zu armed inside this pass at tick %" PRIu64
		       " fired in the same pass",
		       oracle_index(o, ot), now);
	O_TRUE(o, now >= o->last_fire_now);
	O_TRUE(o, !spoke_timer_pending(t));
	o->last_fire_now = now;
	ot->pending = false;
	ot->fired++;
	o->npending--;
	o->fired_in_pass++;
	o->total_fired++;
	O_EQ(o, spoke_engine_count(o->e), o->npending);
	O_RC(o, spoke_engine_stop(o->e, t), -ENOENT);
	O_EQ(o, spoke_engine_count(o->e), o->npending);
	if (o->n <= ORACLE_NEXT_IN_CALLBACK_MAX)
		oracle_check_next(o);
	if (o->on_fire)
		o->on_fire(o, ot);
}

/*
 * Compare the whole engine with the model: count, each timer's pending flag
 * and deadline, and next().
 */
static inline void oracle_check(struct oracle *o)
{
	uint64_t earliest = UINT64_MAX;
	size_t pending = 0;

	for (size_t i = 0; i < o->n; i++) {
		struct otimer *ot = &o->tm[i];

		if (spoke_timer_pending(&ot->t) != ot->pending)
			O_FAIL(o, "timer %zu: pending=%d, expected %d", i,
			       (int)spoke_timer_pending(&ot->t), (int)ot->pending);
		if (!ot->pending)
			continue;
		pending++;
		O_EQ(o, spoke_timer_deadline(&ot->t), ot->deadline);
		if (ot->deadline < earliest)
			earliest = ot->deadline;
	}
	O_EQ(o, pending, o->npending);
	O_EQ(o, spoke_engine_count(o->e), o->npending);
	oracle_next_within(o, earliest);
}

/* Advance by `ticks` with oracle_expire; checks return value, clock, leftovers. */
static inline size_t oracle_advance(struct oracle *o, uint64_t ticks)
{
	uint64_t before = oracle_now(o);
	uint64_t now;
	size_t fired;

	o->pass++;
	o->in_advance = true;
	o->fired_in_pass = 0;
	o->last_fire_now = before;
	fired = spoke_engine_advance(o->e, ticks, oracle_expire, o);
	o->in_advance = false;
	now = oracle_now(o);
	O_EQ(o, fired, o->fired_in_pass);
	O_EQ(o, now, sat_add(before, ticks));
	for (size_t i = 0; i < o->n && ticks > 0; i++) {
		const struct otimer *ot = &o->tm[i];

		/* Only a timer armed at the end of time in this very pass may wait. */
		if (ot->pending && ot->deadline <= now &&
		    !(ot->armed_pass == o->pass && ot->armed_at == now))
			O_FAIL(o,
			       "timer %zu with deadline %" PRIu64 " still pending after "
			       "advance(%" PRIu64 ") from %" PRIu64,
			       i, ot->deadline, ticks, before);
	}
	return fired;
}

/* The contract's bound on advance(next()) steps for `deadlines` deadlines. */
static inline uint64_t oracle_tickless_bound(const struct oracle *o, uint64_t deadlines)
{
	return cfg_steps_per_deadline(o->cfg) * deadlines + 10;
}

/*
 * Tickless loop: advance(next()) until nothing is pending, at most max_steps
 * calls. Returns the number of calls.
 */
static inline uint64_t oracle_tickless(struct oracle *o, uint64_t max_steps)
{
	uint64_t steps = 0;

	while (spoke_engine_count(o->e) > 0) {
		uint64_t next = spoke_engine_next(o->e);

		if (steps >= max_steps)
			O_FAIL(o,
			       "tickless loop needs more than %" PRIu64 " advance(next()) "
			       "steps (%zu pending, next()=%" PRIu64 ")",
			       max_steps, spoke_engine_count(o->e), next);
		oracle_advance(o, next);
		steps++;
	}
	oracle_check(o);
	return steps;
}

/* ---- delays drawn from several distributions ------------------------------ */

/* A delay from 2^k - 1, 2^k or 2^k + 1, k in [kmin, kmax]. */
static inline uint64_t draw_pow2_delay(struct rng *r, unsigned kmin, unsigned kmax)
{
	unsigned k = (unsigned)rng_between(r, kmin, kmax);

	return POW2(k) - 1 + rng_below(r, 3);
}

/* A delay that lands on (or next to) the next multiple of 2^k after now. */
static inline uint64_t draw_aligned_delay(struct rng *r, uint64_t now)
{
	unsigned k = (unsigned)rng_between(r, 1, 63);
	uint64_t mask = POW2(k) - 1;
	uint64_t boundary;

	if ((now | mask) == UINT64_MAX)
		return 1;
	boundary = (now | mask) + 1;
	return boundary - now - 1 + rng_below(r, 3);
}

/*
 * A delay for start: 0, 1, 2, small, medium, around powers of two (all 64
 * bits), on level boundaries, huge up to UINT64_MAX, onto the deadline of
 * another pending timer. With a bounded engine
 * (`wheel`) half of the draws are folded into the accepted range, the rest
 * test -ERANGE.
 */
static inline uint64_t draw_delay(struct oracle *o)
{
	struct rng *r = &o->rng;
	uint64_t d;

	switch (rng_below(r, 17)) {
	case 16: /* the deadline of another pending timer: a tie started later */
		d = 5;
		for (int tries = 0; tries < 4; tries++) {
			const struct otimer *other = &o->tm[rng_below(r, o->n)];

			if (other->pending && other->deadline > oracle_now(o)) {
				d = other->deadline - oracle_now(o);
				break;
			}
		}
		break;
	case 0:
		d = 0;
		break;
	case 1:
		d = 1;
		break;
	case 2:
		d = 2;
		break;
	case 3:
	case 4:
	case 5:
	case 6:
		d = rng_between(r, 3, 64);
		break;
	case 7:
	case 8:
		d = rng_between(r, 65, 5000);
		break;
	case 9:
		d = draw_pow2_delay(r, 0, 20);
		break;
	case 10:
		d = draw_pow2_delay(r, 0, 63);
		break;
	case 11:
		d = draw_aligned_delay(r, oracle_now(o));
		break;
	case 12:
		d = UINT64_MAX - rng_below(r, 3);
		break;
	case 13:
		d = rng_next(r) >> rng_below(r, 64);
		break;
	default:
		d = rng_between(r, 3, 300);
		break;
	}
	if (o->max_interval != UINT64_MAX && d > o->max_interval && rng_percent(r, 50))
		d %= o->max_interval + 1;
	return d;
}

/* A delay the engine accepts (folded into [0, max_interval] for `wheel`). */
static inline uint64_t draw_accepted_delay(struct oracle *o)
{
	uint64_t d = draw_delay(o);

	if (d > o->max_interval)
		d %= o->max_interval + 1;
	return d;
}

/* Random sequences stay below this tick; test_end_of_time covers the rest. */
#define ORACLE_RANDOM_HORIZON POW2(61)

static inline uint64_t draw_advance_raw(struct oracle *o)
{
	struct rng *r = &o->rng;
	uint64_t now = oracle_now(o);
	uint64_t next = spoke_engine_next(o->e);
	uint64_t earliest;

	switch (rng_below(r, 20)) {
	case 0:
	case 1:
	case 2:
	case 3:
	case 4:
	case 5:
		return 1;
	case 6:
	case 7:
	case 8:
	case 9:
		return rng_between(r, 2, 64);
	case 10:
	case 11:
		return rng_between(r, 65, 5000);
	case 12:
	case 13:
	case 14:
		return next == UINT64_MAX ? 1000 : next;
	case 15:
		return next > 1 && next != UINT64_MAX ? next - 1 : 1;
	case 16:
		earliest = oracle_earliest(o);
		return earliest != UINT64_MAX && earliest > now ? earliest - now : 7;
	case 17:
		return POW2(40);
	case 18:
		return POW2(rng_between(r, 10, 40));
	default:
		if (rng_percent(r, 25))
			return rng_between(r, POW2(41), POW2(56));
		return rng_between(r, 1, POW2(20));
	}
}

/*
 * How far to advance: 1, small, medium, exactly next(), next() - 1, exactly
 * onto the earliest deadline, 2^40, other powers of two, rare huge jumps;
 * never past ORACLE_RANDOM_HORIZON (a jump there becomes a small step).
 */
static inline uint64_t draw_advance(struct oracle *o)
{
	uint64_t now = oracle_now(o);
	uint64_t ticks = draw_advance_raw(o);

	if (now >= ORACLE_RANDOM_HORIZON || ticks > ORACLE_RANDOM_HORIZON - now)
		return rng_between(&o->rng, 1, 64);
	return ticks;
}

#endif /* SPOKE_TESTS_ENGINE_ORACLE_CORE_H */
