/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_reset.c - reset storms on idle timers (connection idle timeouts).
 *
 * Workload: T threads (12, 24, 6 and 16 in the four rounds, on 2 cores) each
 * own 128 idle timers and keep pushing their deadlines out, as a server does
 * on every request: an armed timer is reset to a new idle timeout (3-12
 * ticks) most of the time, to 0-2 ticks now and then (so it expires in the
 * middle of the storm, racing the next reset), or cancelled (cancel or
 * cancel_sync); a timer that ended is started again - spoke_start_on a
 * random shard, spoke_start, or spoke_start_ttl (a reset of a Lawn timer
 * moves it to the queue of its new TTL) - and a quarter of the restarts are
 * reset to 0-2 ticks at once, while the start's own message is likely still
 * queued. Besides, 64 shared timers are reset by every thread at once
 * (concurrent resets of one timer) and restarted by their owner thread when
 * they expire. The rounds differ in shards (1-4), tick (1 us - 1 ms: at
 * 1-10 us a deadline of "now" is due in the owner's very next turn) and
 * where callbacks run (pool, inline, pool of 1). The fourth round is all
 * bursts, as a server accepting connections: start a batch of 20-50 ms
 * timers, reset each at once to 0-2 ticks, wait for all to end. (It found
 * the race fixed in f6a345c: a reset that lost its race to the owner
 * taking the start's message had its deadline applied, and returned
 * -ENOENT after the timer fired at it, 20-50 ms early.)
 *
 * Invariants (stress_util.h says how each is caught):
 *   - exactly one outcome per started timer (callback once, or one winning
 *     cancel), also while resets race its expiry;
 *   - never early, exactly: an owned timer has one resetter, so its callback
 *     must not run before the deadline (now + delay, taken before the call)
 *     of the last start/reset that returned 0, even if a later reset that
 *     raced the expiry returned -ENOENT (a reset that failed must not have
 *     moved the deadline). Shared timers: not before the earliest deadline
 *     any start/reset asked for;
 *   - reset returns 0 or -ENOENT only; cancel_sync never returns while the
 *     callback runs;
 *   - afterwards spoke_stats agrees (started, fired, cancelled; pending 0;
 *     started == fired + cancelled + pending per shard).
 */
#include "stress_util.h"

#define OWN    128 /* idle timers per thread */
#define SHARED 64  /* reset by every thread */

/* A round's context: the round, and whether it is the accept round. */
struct storm {
	const struct round *rd;
	bool burst; /* the accept round: start, reset at once, wait */
};

/* A new idle timeout: 3-12 ticks. */
static uint64_t idle_timeout(struct rng *r, const void *ctx)
{
	uint64_t tick = ((const struct storm *)ctx)->rd->shape.tick_ns;

	return 3 * tick + rng_below(r, 9 * tick);
}

/* Mostly an idle timeout; one reset in eight 0-2 ticks (expires mid-storm). */
static uint64_t reset_delay(struct rng *r, const void *ctx)
{
	uint64_t tick = ((const struct storm *)ctx)->rd->shape.tick_ns;

	return rng_pct(r, 88) ? idle_timeout(r, ctx) : rng_below(r, 2 * tick + 1);
}

/*
 * The accept round: start a batch of long timers (20-50 ms) on random
 * shards, reset each at once to 0-2 ticks (its start message likely still
 * queued), wait until all have fired or been cancelled, again.
 */
static void burst_worker(const struct round *rd, struct rng *r, size_t lo)
{
	while (!budget_over()) {
		for (size_t i = 0; i < OWN / 2; i++) {
			(void)rec_start(rd->s, lo + i, HOW_ON,
					(unsigned)rng_below(r, rd->shape.shards),
					20 * MS + rng_below(r, 30 * MS), REC_STRICT);
			(void)rec_reset(rd->s, lo + i, rng_below(r, 2 * rd->shape.tick_ns + 1));
		}
		for (size_t i = 0; i < OWN / 2; i++) {
			if (rng_pct(r, 10))
				(void)rec_cancel(rd->s, lo + i, rng_pct(r, 50));
			if (!rec_wait_settled(lo + i))
				return;
		}
	}
}

static void storm_worker(unsigned t, void *ctx)
{
	const struct storm *c = ctx;
	const struct round *rd = c->rd;
	struct rng r = rng_make(rd->seed, t, 2);
	size_t own_lo = SHARED + (size_t)t * OWN;
	/* Owned: one resetter (strict). Shared: reset by all, restarted by one. */
	const struct step_mix own = {
		.cancel_pct = 4,
		.sync_pct = 50,
		.reset_pct = 96,
		.on_pct = 50,
		.home_pct = 30,
		.nshards = rd->shape.shards,
		.tag = REC_STRICT,
		.start_delay = idle_timeout,
		.reset_delay = reset_delay,
		.ctx = c,
	};
	struct step_mix shared = own;

	shared.cancel_pct = 0;
	shared.reset_pct = 100;
	shared.tag = 0;
	if (c->burst) {
		burst_worker(rd, &r, own_lo);
		return;
	}
	while (!budget_over()) {
		if (rng_pct(&r, 25)) {
			size_t idx = rng_below(&r, SHARED);

			if (idx % rd->threads == t ||
			    rec_status(atomic_load(&g_recs[idx].word)) == REC_ARMED)
				(void)rec_step(rd->s, idx, &r, &shared);
		} else {
			size_t idx = own_lo + rng_below(&r, OWN);
			bool fresh = rec_settled(atomic_load(&g_recs[idx].word));

			/* A reset right after the start, its message likely still queued. */
			if (rec_step(rd->s, idx, &r, &own) == 0 && fresh && rng_pct(&r, 25))
				(void)rec_reset(rd->s, idx,
						rng_below(&r, 2 * rd->shape.tick_ns + 1));
		}
	}
}

int main(int argc, char **argv)
{
	static const struct {
		struct round_cfg cfg;
		bool burst;
	} rounds[] = {
		{{{.shards = 4, .tick_ns = MS, .pool = 2}, 12}, false},
		{{{.shards = 2, .tick_ns = 200 * US, .pool = 0}, 24}, false},
		{{{.shards = 3, .tick_ns = 10 * US, .pool = 1}, 6}, false},
		{{{.shards = 1, .tick_ns = US, .pool = 0}, 16}, true},
	};

	stress_init(argc, argv, "stress.reset", "reset storms on idle timers", 8000000, 120);
	for (struct round rd = {0}; round_next(&rd, ARRAY_SIZE(rounds));) {
		struct storm c = {.rd = &rd, .burst = rounds[rd.cfg].burst};

		round_begin(&rd, &rounds[rd.cfg].cfg, c.burst ? ", start + reset bursts" : NULL);
		recs_alloc(SHARED + (size_t)rd.threads * OWN);
		round_run(&rd, "reset storm", storm_worker, &c);
		round_settle_recs(&rd);
		round_report(&rd, "reset storm");
		round_end(&rd);
	}
	return stress_finish();
}
