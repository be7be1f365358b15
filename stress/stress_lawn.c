/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_lawn.c - Timer Lawn (spoke_start_ttl) with few and with many
 * distinct TTLs.
 *
 * Workload: T threads each own 256 records and cycle through them, pausing
 * a tick after each pass: a settled record gets a TTL timer
 * (spoke_start_ttl with a TTL drawn from the round's set), an armed one is
 * cancelled (12%; cancel_sync one time in four), reset to another TTL of the
 * set (18%: the timer moves to that TTL's queue) or left to expire; one step
 * in twenty cancels a random timer of any thread.
 * The rounds:
 *   few    3 TTLs (3, 7, 20 ticks), every shard takes Lawn buckets;
 *   many   1500 TTLs 3.7 us apart from 2 ticks up, only shards 1 and 3 take
 *          Lawn buckets (lawn_shards = 0xa);
 *   mixed  300 random TTLs (0.5-20 ms, not tick multiples), only shard 0
 *          takes Lawn buckets, and a quarter of the starts are plain one-shots
 *          on random shards beside them.
 *
 * Invariants (stress_util.h says how each is caught):
 *   - exactly one outcome per timer; never early, exactly (one resetter per
 *     timer: not before the deadline of its last start/reset that returned
 *     0); cancel_sync never returns while the callback runs;
 *   - TTL timers live only on the shards that take Lawn buckets: in the
 *     rounds with TTL timers only, spoke_stats shows started == 0 on every
 *     other shard;
 *   - afterwards spoke_stats agrees (started, fired, cancelled; pending 0;
 *     started == fired + cancelled + pending per shard).
 */
#include "stress_util.h"

#define OWN 256 /* records per thread */

/* A round's context: the round and its set of TTLs. */
struct lawn_round {
	const struct round *rd;
	uint64_t *ttl;
	size_t nttl;
	unsigned plain_pct; /* starts that are plain one-shots */
};

/* A TTL of the round's set (for starts and resets alike). */
static uint64_t any_ttl(struct rng *r, const void *ctx)
{
	const struct lawn_round *c = ctx;

	return c->ttl[rng_below(r, c->nttl)];
}

static void lawn_worker(unsigned t, void *ctx)
{
	const struct lawn_round *c = ctx;
	const struct round *rd = c->rd;
	struct rng r = rng_make(rd->seed, t, 6);
	size_t lo = (size_t)t * OWN, cursor = 0;
	const struct step_mix mix = {
		.cancel_pct = 12,
		.sync_pct = 25,
		.reset_pct = 18,
		.on_pct = c->plain_pct,
		.nshards = rd->shape.shards,
		.tag = REC_STRICT,
		.start_delay = any_ttl,
		.reset_delay = any_ttl,
		.ctx = c,
	};

	while (!budget_over()) {
		(void)rec_step(rd->s, lo + cursor, &r, &mix);
		cursor = (cursor + 1) % OWN;
		if (cursor == 0)
			sleep_ns(rd->shape.tick_ns);
		if (rng_pct(&r, 5))
			(void)rec_cancel(rd->s, rng_below(&r, g_nrecs), rng_pct(&r, 20));
	}
}

/* TTL-only rounds: shards without Lawn buckets never took a timer. */
static void check_lawn_placement(struct spoke *s, uint64_t lawn_mask)
{
	struct spoke_stats *st = calloc(1, sizeof(*st));

	if (!st)
		abort();
	spoke_stats(s, st);
	for (unsigned k = 0; k < st->shards; k++)
		if (lawn_mask && !((lawn_mask >> k) & 1) && st->shard[k].started)
			VIOLATION("shard %u takes no Lawn buckets but took %" PRIu64 " TTL timers",
				  k, st->shard[k].started);
	free(st);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		struct round_cfg cfg;
		unsigned plain_pct;
	} rounds[] = {
		{"few", {{.shards = 4, .tick_ns = 250 * US, .pool = 2}, 8}, 0},
		{"many",
		 {{.shards = 4, .tick_ns = 100 * US, .pool = 0, .lawn_shards = 0xa}, 16},
		 0},
		{"mixed", {{.shards = 3, .tick_ns = MS, .pool = 1, .lawn_shards = 0x1}, 6}, 25},
	};

	stress_init(argc, argv, "stress.lawn", "Lawn timers with few and many distinct TTLs",
		    3000000, 120);
	for (struct round rd = {0}; round_next(&rd, ARRAY_SIZE(rounds));) {
		unsigned ri = rd.cfg;
		const struct svc_shape *sh = &rounds[ri].cfg.shape;
		struct lawn_round c = {.rd = &rd, .plain_pct = rounds[ri].plain_pct};
		struct rng r = rng_make(g_seed, rd.i, 7);
		char note[96];

		c.nttl = ri == 0 ? 3 : ri == 1 ? 1500 : 300;
		c.ttl = calloc(c.nttl, sizeof(*c.ttl));
		if (!c.ttl)
			abort();
		for (size_t k = 0; k < c.nttl; k++) {
			if (ri == 0)
				c.ttl[k] = (k == 0 ? 3 : k == 1 ? 7 : 20) * sh->tick_ns;
			else if (ri == 1)
				c.ttl[k] = 2 * sh->tick_ns + k * 3700;
			else
				c.ttl[k] = 500 * US + rng_below(&r, 19500 * US);
		}
		snprintf(note, sizeof(note), "; %s, %zu TTLs, lawn shards %#" PRIx64,
			 rounds[ri].name, c.nttl, sh->lawn_shards);
		round_begin(&rd, &rounds[ri].cfg, note);
		recs_alloc((size_t)rd.threads * OWN);
		round_run(&rd, "TTL timers", lawn_worker, &c);
		round_settle_recs(&rd);
		if (!c.plain_pct)
			check_lawn_placement(rd.s, sh->lawn_shards);
		round_report(&rd, rounds[ri].name);
		round_end(&rd);
		free(c.ttl);
	}
	return stress_finish();
}
