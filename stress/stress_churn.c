/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_churn.c - start/cancel churn across all shards, and memory that
 * stays flat under it.
 *
 * Workload: T threads (16, 32 and 4 in the three rounds, on 2 cores) each own
 * 512 records and cycle through them: a record whose timer is still armed is
 * cancelled (cancel, or cancel_sync one time in six), a settled one gets a
 * new timer - spoke_start_on a random shard, spoke_start (the caller's CPU's
 * shard) or spoke_start_ttl (a Lawn shard) - with a long delay (10 ms - 1 s:
 * the cancel usually wins) or one of 0-3 ticks (it usually fires, or the
 * cancel races the expiry). One step in ten also cancels a random record of
 * any thread (cross-thread cancels, stale ids once the record moved on).
 * Rounds differ in shards (2-4), tick (100 us - 1 ms) and where callbacks
 * run (pool of 2, inline on the shard threads, pool of 1).
 *
 * Invariants (stress_util.h says how each is caught):
 *   - every started timer has exactly one outcome: its callback ran once, or
 *     exactly one cancel/cancel_sync returned 0 (record CAS, final sweep);
 *   - no callback before start + delay (the callback compares the clock);
 *   - cancel_sync never returns while the callback runs, or before it ended;
 *   - a stale id (record reused) never cancels the new timer;
 *   - afterwards spoke_stats agrees: started / fired / cancelled equal the
 *     program's counts, pending is 0 on every shard, and each shard's
 *     started == fired + cancelled + pending;
 *   - memory: each round runs the same churn phase twice on the same threads
 *     (a crew: fresh threads would add a sanitizer's per-thread memory), with
 *     the program's backpressure on (pace() in stress_util.h: workers wait
 *     while more than 2048 messages wait for the owners). Resident memory is
 *     read after the first (warm-up) phase has settled and again after the
 *     second; the second may add at most 2 MiB + 96 KiB per thread (5x that
 *     under TSan, whose shadow memory is several times the application's).
 *     Why that slack: the warm-up grows each thread's handle arena (handles
 *     of 64 bytes, resident page by page as slots are first used, never
 *     returned before destroy) to the peak of its timers live or not yet
 *     unlinked; an identical phase reaches about the same peaks, but each
 *     arena keeps the larger of the two, so a second phase may add the
 *     difference: 1536 handles (96 KiB) per arena (= per thread) allowed;
 *     2 MiB covers malloc and sanitizer bookkeeping. A leak of one handle
 *     per start adds 64 bytes x starts (printed; ~47 MiB per plain CI
 *     phase), far beyond
 *     the slack. A third phase runs without the program's backpressure: its
 *     growth is printed, not checked (32 CPU-bound workers starve the shard
 *     threads, so cancelled handles wait in the inboxes and the arenas grow
 *     with that backlog, up to each shard's inbox_limit: in the second round
 *     a limit of 8192 refuses starts, -ENOBUFS, which the final counts must
 *     show: spoke_stats' refused equals the starts the program saw refused,
 *     and none of them was started).
 */
#include "stress_util.h"

#define SLOTS	     512		      /* records per thread */
#define SLACK_FIXED  (2ull << 20)	      /* malloc and sanitizer bookkeeping */
#define HANDLE_BYTES 64			      /* docs/design/service.md */
#define PEAK_BYTES   (1536ull * HANDLE_BYTES) /* per arena: a peak a little higher */
/* The second round's inbox limit: its unpaced phase has its starts refused (-ENOBUFS). */
#define CHURN_INBOX_LIMIT 8192
/* TSan maps shadow and metadata for every new application byte (several times its size). */
#define MEM_SCALE (TEST_TSAN ? 5 : 1)

/* A round's context: the round, the seed of the phase in progress, and the crew that runs it. */
struct churn {
	const struct round *rd;
	uint64_t phase_seed;
	struct crew crew;
};

/* Long (the cancel usually wins) or 0-3 ticks (it usually fires). */
static uint64_t churn_delay(struct rng *r, const void *ctx)
{
	const struct churn *c = ctx;

	if (rng_pct(r, 75))
		return 10 * MS + rng_below(r, 990 * MS);
	return rng_below(r, 3 * c->rd->shape.tick_ns + 1);
}

static void churn_worker(unsigned t, void *ctx)
{
	struct churn *c = ctx;
	struct rng r = rng_make(c->phase_seed, t, 1);
	size_t lo = (size_t)t * SLOTS, cursor = rng_below(&r, SLOTS);
	const struct step_mix mix = {
		.cancel_pct = 100,
		.sync_pct = 16,
		.on_pct = 45,
		.home_pct = 35,
		.nshards = c->rd->shape.shards,
		.tag = REC_STRICT,
		.start_delay = churn_delay,
		.ctx = c,
	};

	while (!budget_over()) {
		pace();
		(void)rec_step(c->rd->s, lo + cursor, &r, &mix);
		cursor = (cursor + 1) % SLOTS;
		if (rng_pct(&r, 10))
			(void)rec_cancel(c->rd->s, rng_below(&r, g_nrecs), rng_pct(&r, 20));
	}
}

/* One churn phase: workers until the budget is spent, then everything settles. */
static void churn_phase(struct churn *c, uint64_t ops, double secs, const char *label, bool paced)
{
	uint64_t before[TK_COUNT], t0 = now_ns();
	struct pacer pacer;

	tally_snapshot(before);
	stress_phase(label);
	budget_begin(ops, secs);
	c->phase_seed = rng_next(&(struct rng){g_seed ^ t0});
	if (paced)
		pacer_start(&pacer, c->rd->s, c->rd->created);
	crew_phase(&c->crew);
	if (paced) {
		pacer_stop(&pacer);
		printf("  %s: backlog of owner messages peaked at %" PRIu64
		       ", workers paused %" PRIu64 " times\n",
		       label, (uint64_t)atomic_load(&pacer.max_backlog),
		       (uint64_t)atomic_load(&pacer.pauses));
	}
	stress_phase("settle");
	recs_settle(c->rd->s, c->rd->created);
	tally_report(label, before, (double)(now_ns() - t0) / 1e9);
}

/* The second phase (starts: its starts) may grow RSS by the slack, no more. */
static void memory_check(uint64_t rss0, uint64_t rss1, uint64_t rss2, uint64_t starts,
			 unsigned threads)
{
	double mib = 1 << 20, leak = (double)starts * HANDLE_BYTES * MEM_SCALE / mib;
	uint64_t slack = MEM_SCALE * (SLACK_FIXED + threads * PEAK_BYTES);

	printf("  memory: RSS %.1f MiB at start, %.1f after warm-up, %.1f after the second "
	       "phase (%+.2f, slack %.1f; a leak of every start would add %.0f)\n",
	       rss0 / mib, rss1 / mib, rss2 / mib, ((double)rss2 - (double)rss1) / mib, slack / mib,
	       leak);
	if (rss2 > rss1 + slack)
		VIOLATION("memory grew by %.2f MiB in a second identical churn phase (slack %.1f "
			  "MiB): churn is not bounded",
			  ((double)rss2 - (double)rss1) / mib, slack / mib);
}

int main(int argc, char **argv)
{
	static const struct round_cfg rounds[] = {
		{{.shards = 4, .tick_ns = MS, .pool = 2}, 16},
		{{.shards = 2, .tick_ns = 250 * US, .pool = 0, .inbox_limit = CHURN_INBOX_LIMIT},
		 32},
		{{.shards = 3, .tick_ns = 100 * US, .pool = 1}, 4},
	};

	stress_init(argc, argv, "stress.churn", "start/cancel churn across all shards; memory flat",
		    12000000, 120);
	for (struct round rd = {0}; round_next(&rd, ARRAY_SIZE(rounds));) {
		struct churn c = {.rd = &rd};
		uint64_t ops = rd.ops / 3, rss0, rss1, rss2, mark[TK_COUNT];
		double secs = rd.secs / 3;

		round_begin(&rd, &rounds[rd.cfg], NULL);
		recs_alloc((size_t)rd.threads * SLOTS);
		crew_start(&c.crew, rd.threads, churn_worker, &c);
		rss0 = rss_bytes();
		churn_phase(&c, ops, secs, "warm-up churn", true);
		rss1 = rss_bytes();
		tally_snapshot(mark);
		churn_phase(&c, ops, secs, "second churn", true);
		rss2 = rss_bytes();
		memory_check(rss0, rss1, rss2, atomic_load(&g_tally[TK_START]) - mark[TK_START],
			     rd.threads);
		churn_phase(&c, ops, secs, "unpaced churn", false);
		printf("  memory: RSS %+.1f MiB after churn without backpressure (not checked); "
		       "%" PRIu64 " starts refused in the round\n",
		       ((double)rss_bytes() - (double)rss2) / (1 << 20),
		       atomic_load(&g_tally[TK_START_REFUSED]) - rd.created[TK_START_REFUSED]);
		crew_stop(&c.crew);
		round_end(&rd);
	}
	return stress_finish();
}
