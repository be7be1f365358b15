/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_expiry.c - cancels racing the expiry at the exact deadline.
 *
 * Workload: T threads (8, 16 and 32 in the three rounds, on 2 cores) each
 * start a batch of 8 timers due in 0, 1 or 2 ticks (half of them exactly a
 * whole number of ticks, the others with up to a quarter tick of jitter),
 * then go through the batch in deadline order, busy-wait until the deadline
 * plus an offset in [-tick/2, +tick/2] and then: cancel (50%), cancel_sync
 * (30%), or reset to 0-2 ticks (20%, leaving the timer to fire or to a
 * cancel of another thread). One batch in six, the thread also picks a
 * timer of another thread, waits for that one's deadline and cancels it
 * (cancel_sync half the time). Callbacks spin 0-20 us, so cancel_sync often
 * finds the callback running and must wait for it. Rounds differ in shards
 * (2-4), tick (100 us - 1 ms) and where callbacks run (pool of 2, inline on
 * the shard threads, pool of 1).
 *
 * Invariants (stress_util.h says how each is caught):
 *   - exactly one outcome: the callback ran once, or exactly one
 *     cancel/cancel_sync returned 0 - whichever side of the deadline the
 *     cancel landed on;
 *   - never early (each timer has one resetter: the exact rule, also when a
 *     reset racing the expiry returned -ENOENT);
 *   - cancel_sync never returns while the callback runs (nor before it
 *     ended, when it returns -ENOENT);
 *   - afterwards spoke_stats agrees (started, fired, cancelled; pending 0).
 * The report counts "late-cancel-won": cancels that returned 0 although
 * they began after the deadline (the owner had not expired it yet) - proof
 * that the races at the deadline happen.
 */
#include "stress_util.h"

#define RING  64 /* records per thread */
#define BATCH 8

static uint64_t race_delay(struct rng *r, uint64_t tick)
{
	uint64_t d = rng_below(r, 3) * tick;

	if (rng_pct(r, 50)) {
		uint64_t j = rng_below(r, tick / 2 + 1);

		d = d + j >= tick / 4 ? d + j - tick / 4 : 0;
	}
	return d;
}

/* Act on record idx at its deadline + an offset in [-tick/2, +tick/2]. */
static void act_at_deadline(const struct round *rd, struct rng *r, size_t idx, bool foreign)
{
	struct rec *rc = &g_recs[idx];
	uint64_t tick = rd->shape.tick_ns, due = atomic_load(&rc->earliest_ns);
	uint64_t off = rng_below(r, tick + 1), t0;
	unsigned pick = (unsigned)rng_below(r, 100);
	int res;

	spin_until(due + off >= tick / 2 ? due + off - tick / 2 : 0);
	t0 = now_ns();
	if (!foreign && pick >= 80) {
		(void)rec_reset(rd->s, idx, rng_below(r, 2 * tick + 1));
		return;
	}
	res = rec_cancel(rd->s, idx, foreign ? rng_pct(r, 50) : pick >= 50);
	if (res == 0 && t0 > due)
		tally(TK_EARLY_CATCH);
}

static void race_worker(unsigned t, void *ctx)
{
	const struct round *rd = ctx;
	uint64_t tick = rd->shape.tick_ns;
	struct rng r = rng_make(rd->seed, t, 3);
	size_t lo = (size_t)t * RING, cursor = 0;

	while (!budget_over()) {
		size_t batch[BATCH];

		for (unsigned b = 0; b < BATCH; b++) {
			size_t idx = lo + cursor;

			cursor = (cursor + 1) % RING;
			if (!rec_wait_settled(idx))
				return;
			batch[b] = idx;
			(void)rec_start(rd->s, idx, rng_pct(&r, 60) ? HOW_ON : HOW_HOME,
					(unsigned)rng_below(&r, rd->shape.shards),
					race_delay(&r, tick), REC_STRICT);
		}
		/* Deadline order (insertion sort of 8). */
		for (unsigned i = 1; i < BATCH; i++)
			for (unsigned j = i;
			     j > 0 && atomic_load(&g_recs[batch[j]].earliest_ns) <
					      atomic_load(&g_recs[batch[j - 1]].earliest_ns);
			     j--) {
				size_t x = batch[j];

				batch[j] = batch[j - 1];
				batch[j - 1] = x;
			}
		for (unsigned b = 0; b < BATCH; b++)
			act_at_deadline(rd, &r, batch[b], false);
		if (rd->threads > 1 && rng_pct(&r, 16)) {
			unsigned other =
				(t + 1 + (unsigned)rng_below(&r, rd->threads - 1)) % rd->threads;
			size_t idx = (size_t)other * RING + rng_below(&r, RING);

			if (rec_status(atomic_load(&g_recs[idx].word)) == REC_ARMED &&
			    atomic_load(&g_recs[idx].earliest_ns) < now_ns() + 2 * tick)
				act_at_deadline(rd, &r, idx, true);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct round_cfg rounds[] = {
		{{.shards = 2, .tick_ns = 100 * US, .pool = 2}, 8},
		{{.shards = 4, .tick_ns = MS, .pool = 0}, 16},
		{{.shards = 2, .tick_ns = 250 * US, .pool = 1}, 32},
	};

	stress_init(argc, argv, "stress.expiry", "cancels racing the expiry at the exact deadline",
		    1500000, 120);
	g_fire_spin_ns = 20 * US;
	for (struct round rd = {0}; round_next(&rd, ARRAY_SIZE(rounds));) {
		round_begin(&rd, &rounds[rd.cfg], NULL);
		recs_alloc((size_t)rd.threads * RING);
		round_run(&rd, "cancels at the deadline", race_worker, &rd);
		round_settle_recs(&rd);
		round_report(&rd, "deadline races");
		round_end(&rd);
	}
	return stress_finish();
}
