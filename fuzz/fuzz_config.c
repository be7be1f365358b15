/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_config.c - libFuzzer target: bytes become a struct spoke_config
 * (global fields and per-shard overrides, in and out of range) for
 * spoke_create(). A model written from the comments of spoke.h and
 * engine.h says whether the configuration is valid:
 *
 *   invalid  spoke_create() must return -EINVAL, leave *out alone and keep
 *            nothing allocated (LeakSanitizer checks every input);
 *   valid    it must create the service, whose spoke_shards() is the
 *            configured number; then the rest of the input runs a few
 *            starts (one-shot, on a shard in or out of range, TTL,
 *            periodic with period 0 or not), resets and cancels, and
 *            spoke_destroy(). Each one-shot timer ran at most once, and
 *            not at all if a cancel of it returned 0.
 *
 * A valid input creates threads, so valid configurations stay small: at
 * most 3 shards (or the default, one per online CPU), 0..3 callback
 * threads, geometries of a few MB at most. Out-of-range values are drawn
 * from every side of each limit.
 *
 * Input layout (a missing byte reads as 0), one byte per field:
 *   0 shards  1 tick_ns (b / 10: slack_ns)  2 engine  3 level_bits  4 levels
 *   5 table_size
 *   6 callback_threads (bit 7: pin_threads)  7 inbox_batch  8 lawn_shards
 *   9 overrides: count = b % 5 (bit 7: pass a NULL array)
 *   then per override: cpu, tick_ns (b / 6: slack_ns), engine, level_bits, levels,
 *   table_size
 *   then operations, two bytes each (see run_ops()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spoke/spoke.h>

#include "test_prelude.h"

#define PICK(a, b) ((a)[(b) % ARRAY_SIZE(a)])

#define MAX_OVERRIDES 4
#define MAX_TIMERS    16

/* A broken promise: print it and abort, so that libFuzzer keeps the input. */
static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

struct input {
	const uint8_t *p, *end;
};

static uint8_t in_u8(struct input *in)
{
	return in->p < in->end ? *in->p++ : 0;
}

/* ---- field values, from every side of each limit ---------------------------- */

static const unsigned shard_counts[] = {0, 1, 2, 3, 1, 257, 1000, UINT_MAX};
static const uint64_t tick_values[] = {
	1000, 1000000, 3600000000000ull, 999, 0, 3600000000001ull, UINT64_MAX, 1, 250000, 10000};
/* NULL means "default" (global) or "keep the global one" (override). */
static const char *const engine_names[] = {
	NULL,	"hierarchical", "hashed", "hashed-sorted", "list",	    "sorted-list", "wheel",
	"heap", "lawn",		"",	  "Hierarchical",  "hashed_sorted",
};
static const unsigned callback_counts[] = {0, 1, 2, 3, 1025, 4096, UINT_MAX, 1};
static const uint64_t lawn_masks[] = {0, 1, 2, 3, 4, 8, (uint64_t)1 << 63, UINT64_MAX};
static const int cpus[] = {-1, 0, 1, CPU_SETSIZE - 1, -2, CPU_SETSIZE, INT_MIN, INT_MAX};
static const uint64_t override_ticks[] = {0, 1000, 1000000, 999, UINT64_MAX, 3600000000001ull};
/* 0 (default) twice, so that most inputs keep it; then around tick/64 of 1 ms and 1 h. */
static const uint64_t slack_values[] = {
	0, 0, 1, 15624, 15625, 250000, 1000000, UINT64_MAX, 56250000000ull, 56249999999ull};

/* 0 (default), 1..16 valid, 17..19 and UINT_MAX not. */
static unsigned level_bits_of(uint8_t b)
{
	return b % 21 == 20 ? UINT_MAX : b % 21;
}

/* 0 (default), 1..64 valid, 65..69 and UINT_MAX not. */
static unsigned levels_of(uint8_t b)
{
	return b % 71 == 70 ? UINT_MAX : b % 71;
}

/* 0 (default), 2^0..2^16 valid; 3, 2^25, SIZE_MAX not. */
static size_t table_size_of(uint8_t b)
{
	unsigned k = b % 21;

	if (k == 0)
		return 0;
	if (k <= 17)
		return (size_t)1 << (k - 1);
	return k == 18 ? 3 : k == 19 ? (size_t)1 << 25 : SIZE_MAX;
}

/* ---- the model: what spoke.h and engine.h promise ------------------------------ */

static bool tick_valid(uint64_t t)
{
	return t >= 1000 && t <= 3600000000000ull;
}

/* A shard's engine must take any delay and never fail a start (spoke.h). */
static bool engine_valid(const char *name)
{
	static const char *const ok[] = {"hierarchical", "hashed", "hashed-sorted", "list",
					 "sorted-list"};

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		if (strcmp(name, ok[i]) == 0)
			return true;
	return false;
}

/* engine.h: the fields a scheme has are checked, the others ignored. */
static bool geometry_valid(const char *engine, unsigned bits, unsigned levels, size_t table)
{
	if (strcmp(engine, "hierarchical") == 0)
		return bits <= 16 && levels <= 64;
	if (strcmp(engine, "hashed") == 0 || strcmp(engine, "hashed-sorted") == 0)
		return table <= ((size_t)1 << 24) && (table & (table - 1)) == 0;
	return true;
}

static unsigned online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > SPOKE_MAX_SHARDS ? SPOKE_MAX_SHARDS : (unsigned)n;
}

/* spoke.h: slack 0 is the default; else at most 64 slots of it in the tick. */
static bool slack_valid(uint64_t tick, uint64_t slack)
{
	return slack == 0 || slack >= tick || (tick + slack - 1) / slack <= 64;
}

static bool config_valid(const struct spoke_config *c, unsigned shards)
{
	const char *engine = c->engine ? c->engine : "hierarchical";

	if (shards > SPOKE_MAX_SHARDS || !tick_valid(c->tick_ns) || c->callback_threads > 1024)
		return false;
	if (shards < 64 && (c->lawn_shards >> shards) != 0)
		return false;
	if (c->n_shard_overrides > shards || (c->n_shard_overrides && !c->shard_overrides))
		return false;
	if (!engine_valid(engine))
		return false;
	for (unsigned k = 0; k < shards; k++) {
		const struct spoke_shard_config *o =
			k < c->n_shard_overrides ? &c->shard_overrides[k] : NULL;
		const char *e = o && o->engine ? o->engine : engine;

		if (o && (o->cpu < -1 || o->cpu >= CPU_SETSIZE ||
			  (o->tick_ns && !tick_valid(o->tick_ns)) || !engine_valid(e)))
			return false;
		if (!slack_valid(o && o->tick_ns ? o->tick_ns : c->tick_ns,
				 o && o->slack_ns ? o->slack_ns : c->slack_ns))
			return false;
		if (!geometry_valid(e, o && o->level_bits ? o->level_bits : c->level_bits,
				    o && o->levels ? o->levels : c->levels,
				    o && o->table_size ? o->table_size : c->table_size))
			return false;
	}
	return true;
}

/* ---- bytes to a configuration --------------------------------------------------- */

static void read_config(struct input *in, struct spoke_config *c,
			struct spoke_shard_config ov[MAX_OVERRIDES])
{
	uint8_t b;

	spoke_config_init(c);
	c->shards = PICK(shard_counts, in_u8(in));
	b = in_u8(in);
	c->tick_ns = PICK(tick_values, b);
	c->slack_ns = PICK(slack_values, b / ARRAY_SIZE(tick_values));
	c->engine = PICK(engine_names, in_u8(in));
	c->level_bits = level_bits_of(in_u8(in));
	c->levels = levels_of(in_u8(in));
	c->table_size = table_size_of(in_u8(in));
	b = in_u8(in);
	c->callback_threads = PICK(callback_counts, b);
	c->pin_threads = b & 0x80;
	c->inbox_batch = in_u8(in) * 37u;
	c->lawn_shards = PICK(lawn_masks, in_u8(in));
	b = in_u8(in);
	c->n_shard_overrides = b % (MAX_OVERRIDES + 1);
	c->shard_overrides = b & 0x80 ? NULL : ov;
	for (unsigned k = 0; k < c->n_shard_overrides; k++) {
		ov[k].cpu = PICK(cpus, in_u8(in));
		b = in_u8(in);
		ov[k].tick_ns = PICK(override_ticks, b);
		ov[k].slack_ns = PICK(slack_values, b / ARRAY_SIZE(override_ticks));
		ov[k].engine = PICK(engine_names, in_u8(in));
		ov[k].level_bits = level_bits_of(in_u8(in));
		ov[k].levels = levels_of(in_u8(in));
		ov[k].table_size = table_size_of(in_u8(in));
	}
}

/* ---- a short life for a valid service -------------------------------------------- */

struct ftimer {
	atomic_uint runs;
	spoke_id id;
	bool periodic;
	unsigned cancels_won;
};

static void count_run(void *arg)
{
	struct ftimer *t = arg;

	atomic_fetch_add_explicit(&t->runs, 1, memory_order_relaxed);
}

static void expect_rc(const char *what, int rc, bool ok, int bad_rc)
{
	if (ok ? rc != 0 : rc != bad_rc)
		fail("%s = %d, expected %d", what, rc, ok ? 0 : bad_rc);
}

/*
 * Two bytes per operation: op % 8 picks it, the next byte its argument
 * (a delay in us, a shard, a timer). At most MAX_TIMERS starts.
 */
static void run_ops(struct spoke *s, unsigned shards, struct input *in)
{
	struct ftimer tm[MAX_TIMERS];
	unsigned n = 0;

	memset(tm, 0, sizeof(tm));
	for (unsigned step = 0; step < 2 * MAX_TIMERS && in->p < in->end; step++) {
		uint8_t op = in_u8(in), a = in_u8(in);
		uint64_t delay_ns = (uint64_t)a * 1000;
		struct ftimer *t = n < MAX_TIMERS ? &tm[n] : NULL;
		struct ftimer *old = n ? &tm[a % n] : NULL;
		int rc;

		switch (op % 8) {
		case 0:
		case 1:
			if (!t)
				break;
			expect_rc("spoke_start", spoke_start(s, delay_ns, count_run, t, &t->id),
				  true, 0);
			n++;
			break;
		case 2:
			if (!t)
				break;
			rc = spoke_start_on(s, op / 8 % (shards + 1), delay_ns, count_run, t,
					    &t->id);
			expect_rc("spoke_start_on", rc, op / 8 % (shards + 1) < shards, -EINVAL);
			n += rc == 0;
			break;
		case 3:
			if (!t)
				break;
			expect_rc("spoke_start_ttl",
				  spoke_start_ttl(s, delay_ns, count_run, t, &t->id), true, 0);
			n++;
			break;
		case 4:
			if (!t)
				break;
			/* 0 is -EINVAL; else at least 1 ms, so destroy comes first. */
			rc = spoke_start_periodic(s, op / 8 ? 1000000 + delay_ns : 0, count_run, t,
						  &t->id);
			expect_rc("spoke_start_periodic", rc, op / 8 != 0, -EINVAL);
			t->periodic = true;
			n += rc == 0;
			break;
		case 5:
			if (!old)
				break;
			rc = spoke_reset(s, old->id, delay_ns);
			if (rc != 0 && rc != -ENOENT)
				fail("spoke_reset = %d", rc);
			break;
		case 6:
		case 7:
			if (!old)
				break;
			rc = op % 8 == 6 ? spoke_cancel(s, old->id) : spoke_cancel_sync(s, old->id);
			if (rc != 0 && rc != -ENOENT)
				fail("spoke_cancel%s = %d", op % 8 == 6 ? "" : "_sync", rc);
			old->cancels_won += rc == 0;
			break;
		}
	}
	spoke_destroy(s);
	/* Exactly once: a one-shot ends in at most one way (destroy may drop it). */
	for (unsigned i = 0; i < n; i++) {
		unsigned runs = atomic_load(&tm[i].runs);

		if (tm[i].cancels_won > 1 || (!tm[i].periodic && runs + tm[i].cancels_won > 1))
			fail("timer %u: %u runs, %u cancels returned 0", i, runs,
			     tm[i].cancels_won);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t sentinel_storage;
	struct spoke *const sentinel = (struct spoke *)(void *)&sentinel_storage;
	struct input in = {data, data + size};
	struct spoke_shard_config ov[MAX_OVERRIDES];
	struct spoke_config cfg;
	struct spoke *s = sentinel;
	unsigned shards;
	bool valid;
	int rc;

	memset(ov, 0, sizeof(ov));
	read_config(&in, &cfg, ov);
	shards = cfg.shards ? cfg.shards : online_cpus();
	valid = config_valid(&cfg, shards);
	rc = spoke_create(&s, &cfg);
	if (!valid) {
		if (rc != -EINVAL || s != sentinel)
			fail("invalid config: spoke_create = %d (expected -EINVAL), *out %s", rc,
			     s == sentinel ? "untouched" : "written");
		return 0;
	}
	if (rc != 0)
		fail("valid config (%u shards): spoke_create = %d", shards, rc);
	if (spoke_shards(s) != shards)
		fail("spoke_shards = %u, configured %u", spoke_shards(s), shards);
	run_ops(s, shards, &in);
	return 0;
}
