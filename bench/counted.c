/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * counted.c - spoke-bench-counted: one row's operations, and nothing else,
 * inside one function, so that an instruction counter can take exactly
 * them. scripts/bench-instructions.sh runs it under valgrind's callgrind
 * with --toggle-collect=bench_counted_ops (collection only while that
 * function runs, on whichever thread runs it: the caller's) and subtracts a
 * run of the same row with --ops 0, which leaves the cost of the
 * operations alone, per operation. Setup (the service, the pending timers,
 * the warm-up), the checks and the teardown are outside the function.
 *
 *   spoke-bench-counted --row ROW [--ops K] [--pending N]
 *
 * Rows (all on the public API; the service's delays are in 1 ms ticks):
 *
 *   own-pair           an attached shard (1 shard, callbacks inline), N
 *                      timers pending; K x (spoke_start of the spare id +
 *                      spoke_cancel of a random pending one): `peers` W1 of
 *                      the service, the owner's path, ids kept by the
 *                      caller. Delays uniform in [1, 2^20) ms as in W1.
 *                      N = 0: spoke_start + spoke_cancel of the same id
 *                      (`service` own-start-cancel).
 *   engine-pair        the same on the bare `hierarchical` engine (ticks).
 *   engine-clock-pair  ... plus one spoke_now_ns() per pair.
 *   reset-own          the attached shard, N pending: K x spoke_reset of a
 *                      random one to a random delay.
 *   engine-clock-reset the bare engine: K x (spoke_now_ns + stop + start).
 *   reset-foreign      shard 0 attached by an owner thread running a
 *                      server's loop (bench_svc.c), N pending started from
 *                      this thread: K x spoke_reset from this thread (the
 *                      producer's cost; the owner's work is not counted).
 *   cross-start        2 managed shards; K x spoke_start_on(shard 1, 1 h)
 *                      from this thread, after a warm-up of K starts and
 *                      cancels (the arena's handles are reused, as in
 *                      `service` cross-start).
 *   cross-cancel       K timers started on shard 1 and taken into its wheel
 *                      (untimed); K x spoke_cancel from this thread.
 *   fire-inline        an attached shard, K timers due at one moment, all
 *                      in its wheel; once that moment passed: one
 *                      spoke_poll that runs the K callbacks inline (the
 *                      expiry path of `service` fire-inline, without a
 *                      managed thread's sleep and wake-up); the callback
 *                      adds one to a counter.
 *   harness            the loop of the pair rows with its PRNG and no timer
 *                      call: what the harness itself adds per operation.
 *
 * Every row checks what it did (each cancel won, each reset found its
 * timer, K callbacks ran once, the service's counters) and exits 1 if not.
 * Outside valgrind it prints the wall time per operation too (a rough
 * figure: one run, no repetition; use spoke-bench for timings).
 * main() is counted_main.c's, so that the options check links this file.
 */
#define _GNU_SOURCE
#include "counted.h"
#include "bench_svc.h"

#include <spoke/engine.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define COUNTED_SEED	  UINT64_C(0xc0a7ed5eed000001)
#define LONG_DELAY_NS	  (3600 * NS_PER_S)
#define FIRE_LEAD_NS	  (50 * NS_PER_MS) /* fire-inline: due this long after the setup began ... */
#define FIRE_PER_START_NS (200 * NS_PER_US) /* ... and this much more per start (valgrind) */

enum row {
	OWN_PAIR,
	ENGINE_PAIR,
	ENGINE_CLOCK_PAIR,
	RESET_OWN,
	ENGINE_CLOCK_RESET,
	RESET_FOREIGN,
	CROSS_START,
	CROSS_CANCEL,
	FIRE_INLINE,
	HARNESS,
	NROWS
};

static const char *const row_name[NROWS] = {
	"own-pair",	 "engine-pair", "engine-clock-pair", "reset-own",   "engine-clock-reset",
	"reset-foreign", "cross-start", "cross-cancel",	     "fire-inline", "harness",
};

/* What a run has: the subject, the ids or timers, and what the operations need. */
struct counted {
	enum row row;
	uint64_t k, n;		    /* operations; timers pending (pair and reset rows) */
	struct spoke *s;	    /* the service rows */
	struct spoke_engine *e;	    /* the engine rows */
	struct spoke_timer *timers; /* the engine rows: n + 1 */
	spoke_id *ids;		    /* the service rows: n + 1 (pairs), n (resets), k (cross) */
	struct bench_rng rng;
	uint32_t spare;	 /* pairs: the one slot not pending */
	uint64_t sink;	 /* keeps the clock reads and the harness's numbers */
	int err;	 /* the operations' results, OR-ed */
	uint64_t enoent; /* resets that found their timer fired (reset-foreign only) */
	int polled;	 /* fire-inline: what spoke_poll returned */
};

static _Atomic uint64_t fired; /* callbacks that ran */

/* ---- the operations: what is counted --------------------------------------- */

/* A pair: start the spare, stop a random pending one (which becomes the spare). */
static inline __attribute__((always_inline)) void pair_ops(struct counted *c, bool engine,
							   bool clock)
{
	for (uint64_t i = 0; i < c->k; i++) {
		uint64_t x = bench_rng_next(&c->rng);
		uint32_t victim = c->n ? bench_w1_victim(x, (uint32_t)c->n, c->spare) : c->spare;
		uint64_t delay = bench_random_delay(x);

		if (engine) {
			if (clock)
				c->sink += spoke_now_ns();
			c->err |= spoke_engine_start(c->e, &c->timers[c->spare], delay);
			c->err |= spoke_engine_stop(c->e, &c->timers[victim]);
		} else {
			c->err |= spoke_start(c->s, delay * NS_PER_MS, bench_cb_count, &fired,
					      &c->ids[c->spare]);
			c->err |= spoke_cancel(c->s, c->ids[victim]);
		}
		c->spare = victim;
	}
}

/* A reset of a random pending one to a random delay. */
static inline __attribute__((always_inline)) void reset_ops(struct counted *c, bool engine)
{
	for (uint64_t i = 0; i < c->k; i++) {
		uint64_t x = bench_rng_next(&c->rng);
		uint32_t victim = bench_below((uint32_t)(x >> 32), (uint32_t)c->n);
		uint64_t delay = bench_random_delay(x);

		if (engine) {
			c->sink += spoke_now_ns();
			c->err |= spoke_engine_stop(c->e, &c->timers[victim]);
			c->err |= spoke_engine_start(c->e, &c->timers[victim], delay);
		} else {
			int r = spoke_reset(c->s, c->ids[victim], delay * NS_PER_MS);

			if (r == -ENOENT)
				c->enoent++; /* the owner ran it: its delay was that short */
			else
				c->err |= r;
		}
	}
}

/* The function the instruction counter takes (--toggle-collect=bench_counted_ops). */
__attribute__((noinline)) void bench_counted_ops(struct counted *c);

__attribute__((noinline)) void bench_counted_ops(struct counted *c)
{
	switch (c->row) {
	case OWN_PAIR:
		pair_ops(c, false, false);
		break;
	case ENGINE_PAIR:
		pair_ops(c, true, false);
		break;
	case ENGINE_CLOCK_PAIR:
		pair_ops(c, true, true);
		break;
	case RESET_OWN:
	case RESET_FOREIGN:
		reset_ops(c, false);
		break;
	case ENGINE_CLOCK_RESET:
		reset_ops(c, true);
		break;
	case CROSS_START:
		for (uint64_t i = 0; i < c->k; i++)
			c->err |= spoke_start_on(c->s, 1, LONG_DELAY_NS, bench_cb_count, &fired,
						 &c->ids[i]);
		break;
	case CROSS_CANCEL:
		for (uint64_t i = 0; i < c->k; i++)
			c->err |= spoke_cancel(c->s, c->ids[i]);
		break;
	case FIRE_INLINE:
		c->polled = spoke_poll(c->s);
		break;
	case HARNESS:
		for (uint64_t i = 0; i < c->k; i++) {
			uint64_t x = bench_rng_next(&c->rng);

			c->sink += bench_w1_victim(x, (uint32_t)c->n + 1, c->spare) +
				   bench_random_delay(x);
		}
		break;
	default:
		break;
	}
}

/* ---- setup, checks, teardown: not counted ------------------------------------ */

static int fail(const char *what, int err)
{
	fprintf(stderr, "spoke-bench-counted: %s: %s\n", what, strerror(err < 0 ? -err : EPROTO));
	return 1;
}

static bool is_engine_row(enum row r)
{
	return r == ENGINE_PAIR || r == ENGINE_CLOCK_PAIR || r == ENGINE_CLOCK_RESET;
}

/* The bare engine with n timers pending (random delays); timers n + 1 in all. */
static int engine_setup(struct counted *c)
{
	int err;

	c->timers = calloc(c->n + 1, sizeof(*c->timers));
	if (!c->timers)
		return -ENOMEM;
	for (uint64_t i = 0; i <= c->n; i++)
		spoke_timer_init(&c->timers[i]);
	err = spoke_engine_new(&c->e, "hierarchical", NULL);
	for (uint64_t i = 0; !err && i < c->n; i++)
		err = spoke_engine_start(c->e, &c->timers[i],
					 bench_random_delay(bench_rng_next(&c->rng)));
	return err;
}

/* A service of `shards` shards, callbacks inline, unpinned. */
static int service_create(struct counted *c, unsigned shards)
{
	struct spoke_config cfg;

	spoke_config_init(&cfg);
	cfg.shards = shards;
	cfg.callback_threads = 0;
	cfg.pin_threads = false;
	return spoke_create(&c->s, &cfg);
}

/* n pending timers on shard 0 (random delays): spoke_start when attached, else spoke_start_on. */
static int start_pending(struct counted *c, bool attached)
{
	int err = 0;

	for (uint64_t i = 0; !err && i < c->n; i++) {
		uint64_t d = bench_random_delay(bench_rng_next(&c->rng)) * NS_PER_MS;

		err = attached ? spoke_start(c->s, d, bench_cb_count, &fired, &c->ids[i])
			       : spoke_start_on(c->s, 0, d, bench_cb_count, &fired, &c->ids[i]);
	}
	return err;
}

/* Everything the row needs before the counted function; 0 or -errno (said). */
static int setup(struct counted *c, struct bench_owner *owner, bool *owned)
{
	uint64_t nids = c->n + 1 > c->k ? c->n + 1 : c->k;
	struct bench_sample out;
	int err = 0;

	c->spare = (uint32_t)c->n;
	if (c->row == HARNESS)
		return 0;
	if (is_engine_row(c->row))
		return engine_setup(c);
	c->ids = calloc(nids ? nids : 1, sizeof(*c->ids));
	if (!c->ids)
		return -ENOMEM;
	err = service_create(c, c->row == CROSS_START || c->row == CROSS_CANCEL ? 2 : 1);
	if (err)
		return err;
	switch (c->row) {
	case OWN_PAIR:
	case RESET_OWN:
		err = spoke_attach(c->s, 0);
		return err ? err : start_pending(c, true);
	case RESET_FOREIGN:
		err = bench_owner_start(owner, c->s, 0, -1, &out);
		*owned = err == 0;
		if (!err)
			err = start_pending(c, false);
		return err ? err : bench_svc_wait_pending(c->s, c->n, NULL);
	case CROSS_START: /* warm: the arena's handles are reused */
		for (uint64_t i = 0; !err && i < c->k; i++)
			err = spoke_start_on(c->s, 1, LONG_DELAY_NS, bench_cb_count, &fired,
					     &c->ids[i]);
		for (uint64_t i = 0; !err && i < c->k; i++)
			err = spoke_cancel(c->s, c->ids[i]);
		return err ? err
			   : bench_svc_wait(c->s, &(struct bench_svc_counts){c->k, c->k, 0, 0, 0},
					    NULL);
	case CROSS_CANCEL:
		for (uint64_t i = 0; !err && i < c->k; i++)
			err = spoke_start_on(c->s, 1, LONG_DELAY_NS, bench_cb_count, &fired,
					     &c->ids[i]);
		return err ? err : bench_svc_wait_pending(c->s, c->k, NULL);
	case FIRE_INLINE: {
		uint64_t due;

		err = spoke_attach(c->s, 0);
		due = spoke_now_ns() + FIRE_LEAD_NS + c->k * FIRE_PER_START_NS;
		/*
		 * At `due` itself (not after a delay from a clock read of the
		 * harness's: a preemption between that read and the start's
		 * own would put a timer past the poll), so that the one poll
		 * finds all of them due. The setup is not counted.
		 */
		for (uint64_t i = 0; !err && i < c->k; i++)
			err = spoke_now_ns() < due
				      ? spoke_start_at(c->s, due, bench_cb_count, &fired, NULL)
				      : -ETIME;		   /* the starts took past their deadline */
		bench_sleep_until_ns(due + 2 * NS_PER_MS); /* past it, and its tick */
		return err;
	}
	default:
		return -EINVAL;
	}
}

/* After the counted function: did every operation do what it should? 0 or an error (said). */
static int check(struct counted *c)
{
	const struct spoke_shard_stats *t;
	char sb[160];

	if (c->err)
		return fail("an operation failed", c->err);
	if (c->row == RESET_OWN && c->enoent)
		return fail("reset-own: a reset found its timer fired (only a poll runs them)",
			    -ENOENT);
	if (c->row == FIRE_INLINE && (c->polled != (int)c->k || atomic_load(&fired) != c->k)) {
		fprintf(stderr,
			"spoke-bench-counted: fire-inline: spoke_poll ran %d, %llu counted, "
			"of %llu\n",
			c->polled, (unsigned long long)atomic_load(&fired),
			(unsigned long long)c->k);
		return 1;
	}
	if (!c->s || c->row == RESET_FOREIGN || c->row == FIRE_INLINE)
		return 0;
	t = bench_svc_totals(c->s);
	if ((c->row == OWN_PAIR && (t->started != c->n + c->k || t->cancelled != c->k)) ||
	    (c->row == RESET_OWN && t->reset != c->k) || atomic_load(&fired) != 0) {
		fprintf(stderr, "spoke-bench-counted: %s: %s, %llu callbacks\n", row_name[c->row],
			bench_svc_stats_str(sb, sizeof(sb), t),
			(unsigned long long)atomic_load(&fired));
		return 1;
	}
	return 0;
}

/* ---- options and main ---------------------------------------------------------- */

struct counted_opts {
	int row;
	uint64_t k, n;
	bool n_given;
};

static struct counted_opts copts = {.row = -1, .k = 1000};

static const char *counted_option(void *ctx, int key, const char *arg)
{
	struct counted_opts *o = ctx;

	switch (key) {
	case 'r':
		for (int r = 0; r < NROWS; r++)
			if (strcmp(arg, row_name[r]) == 0) {
				o->row = r;
				return NULL;
			}
		return "one of own-pair engine-pair engine-clock-pair reset-own "
		       "engine-clock-reset reset-foreign cross-start cross-cancel fire-inline "
		       "harness";
	case 'k':
		if (strcmp(arg, "0") == 0) {
			o->k = 0;
			return NULL;
		}
		return bench_parse_count(arg, &o->k) == 0 && o->k <= 100000000 ? NULL : "0..1e8";
	case 'n':
		o->n_given = true;
		if (strcmp(arg, "0") == 0) {
			o->n = 0;
			return NULL;
		}
		return bench_parse_count(arg, &o->n) == 0 && o->n < UINT32_MAX ? NULL : "0..4e9";
	default:
		return "an option spoke-bench-counted does not take";
	}
}

static const struct bench_option counted_options[] = {
	{"row", 'r', "ROW",
	 "the operations to count: own-pair engine-pair engine-clock-pair\n"
	 "reset-own engine-clock-reset reset-foreign cross-start cross-cancel\n"
	 "fire-inline harness (see the top of bench/counted.c)",
	 "none: it must be given"},
	{"ops", 'k', "K", "operations in the counted function (0: the baseline run)", "1000"},
	{"pending", 'n', "N", "timers pending beside them (pair and reset rows)",
	 "0 for the pair rows, 1000 for the reset rows"},
	BENCH_OPT_END,
};

const struct bench_cmd bench_counted_cmd = {
	.name = "spoke-bench-counted",
	.synopsis = "--row ROW [--ops K] [--pending N]",
	.about = "One row's operations alone in one function, bench_counted_ops, for an\n"
		 "instruction counter (scripts/bench-instructions.sh runs it under callgrind\n"
		 "with --toggle-collect=bench_counted_ops, against a run with --ops 0).",
	.options = counted_options,
	.handle = counted_option,
	.ctx = &copts,
};

int counted_main(int argc, char **argv)
{
	struct counted c = {0};
	struct bench_owner owner;
	bool owned = false;
	uint64_t t0, t1;
	int rc = bench_cmd_parse(&bench_counted_cmd, argc, argv), err;

	if (rc >= 0)
		return rc;
	rc = 0;
	if (copts.row < 0) {
		fprintf(stderr, "spoke-bench-counted: --row ROW, please (--help lists them)\n");
		return 2;
	}
	c.row = (enum row)copts.row;
	c.k = copts.k;
	c.n = copts.n_given || (c.row != RESET_OWN && c.row != RESET_FOREIGN &&
				c.row != ENGINE_CLOCK_RESET)
		      ? copts.n
		      : 1000;
	if (c.n == 0 &&
	    (c.row == RESET_OWN || c.row == RESET_FOREIGN || c.row == ENGINE_CLOCK_RESET)) {
		fprintf(stderr, "spoke-bench-counted: a reset row needs --pending 1 or more\n");
		return 2;
	}
	bench_rng_seed(&c.rng, COUNTED_SEED);
	err = setup(&c, &owner, &owned);
	if (err)
		rc = fail("setup", err);
	if (!rc) {
		t0 = bench_now_ns();
		bench_counted_ops(&c);
		t1 = bench_now_ns();
		rc = check(&c);
		if (!rc)
			printf("%s ops %llu pending %llu ns_per_op %.1f enoent %llu\n",
			       row_name[c.row], (unsigned long long)c.k, (unsigned long long)c.n,
			       c.k ? (double)(t1 - t0) / (double)c.k : 0.0,
			       (unsigned long long)c.enoent);
	}
	if (owned) {
		struct bench_sample out;

		if (bench_owner_stop(&owner, &out) != 0 && !rc)
			rc = fail(out.error, -EPROTO);
	}
	if (c.s)
		spoke_destroy(c.s);
	if (c.e)
		spoke_engine_free(c.e);
	free(c.timers);
	free(c.ids);
	return rc;
}
