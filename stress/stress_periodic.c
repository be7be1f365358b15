/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_periodic.c - periodic timers cancelled from their own callback and
 * from other threads.
 *
 * Workload: T threads (8, 12 and 4 in the three rounds, on 2 cores) each keep
 * 16 periodic timers going (periods of 1-4 ticks, not always whole ticks) and
 * replace each one when it has died. A timer dies one of five ways, its plan:
 *   SELF       its own callback calls spoke_cancel in run k (must return 0);
 *   SELF_SYNC  its own callback calls spoke_cancel_sync in run k (must return
 *              -EDEADLK, and still stop it);
 *   OUTSIDE    its owner thread cancels it (cancel or cancel_sync) after a
 *              random lifetime of up to 10 periods;
 *   RACE       the owner, other threads (cancel or cancel_sync) and its own
 *              callback (in run k) all try: exactly one must win;
 *   RESET      its owner resets it a few times (to 1-3 periods from now:
 *              the next run moves, the phase follows), then cancels it.
 * One timer in eight is SLOW: its callback spins up to 1.5 periods, so runs
 * overrun the next due time (missed periods are skipped; never overlap).
 * Before a slot is reused its owner cancel_syncs the dead timer's id (must
 * give -ENOENT) so that no run is in progress. Rounds differ in shards (2-4),
 * tick (100 - 500 us) and where callbacks run (pool of 2, inline on the
 * shard threads, pool of 1).
 *
 * Invariants (stress_util.h, "periodic", says how each is caught):
 *   - a periodic timer never overlaps itself;
 *   - run n never begins before start + n periods (never early, no drift;
 *     a reset to at least one period keeps that bound);
 *   - exactly one cancel stops it (two winners, or a winning cancel of a
 *     stale id, are violations); SELF's cancel returns 0, SELF_SYNC's
 *     -EDEADLK;
 *   - after an outside cancel returned 0, at most the run in progress
 *     follows; after cancel_sync returned (0 or -ENOENT), no run is in
 *     progress and none follows; after a cancel from its own run n, no run
 *     n+1;
 *   - afterwards spoke_stats agrees: started = periodic timers started,
 *     fired = runs the callbacks counted, cancelled = timers started (each
 *     dies once), pending 0.
 */
#include "stress_util.h"

#define SLOTS 16 /* per thread */

enum plan { SELF, SELF_SYNC, OUTSIDE, RACE, RESET, NPLANS };
#define PLAN_SLOW 0x100u

/* The round in progress (main's): its service, tick, workers and seed, for workers and hooks. */
static const struct round *g_pr;

/* Owner-private schedule of a slot. */
struct slot_plan {
	uint64_t kill_at, next_reset;
	unsigned resets_left;
	bool live;
};

static void per_hook(struct ptimer *p, size_t idx, uint64_t gen, unsigned n)
{
	unsigned plan = atomic_load(&p->plan), k = atomic_load(&p->plan_arg);

	(void)idx;
	if (plan & PLAN_SLOW) {
		uint64_t end = now_ns() + rng_below(tl_rng(), atomic_load(&p->period_ns) * 3 / 2);

		while (now_ns() < end)
			;
	}
	if (n != k)
		return;
	switch (plan & 0xff) {
	case SELF:
		per_cancel_own(g_pr->s, p, gen, n, false, true);
		break;
	case SELF_SYNC:
		per_cancel_own(g_pr->s, p, gen, n, true, true);
		break;
	case RACE:
		per_cancel_own(g_pr->s, p, gen, n, false, false);
		break;
	default:
		break;
	}
}

static void start_slot(struct rng *r, size_t idx, struct slot_plan *sp)
{
	uint64_t period = (1 + rng_below(r, 4)) * g_pr->shape.tick_ns;
	unsigned plan = (unsigned)rng_below(r, NPLANS), k = 1 + (unsigned)rng_below(r, 8);

	if (rng_pct(r, 30))
		period += rng_below(r, g_pr->shape.tick_ns);
	if (rng_pct(r, 12))
		plan |= PLAN_SLOW;
	sp->kill_at = now_ns() + rng_below(r, 10 * period);
	sp->next_reset = now_ns() + rng_below(r, 2 * period);
	sp->resets_left = (plan & 0xff) == RESET ? 1 + (unsigned)rng_below(r, 4) : 0;
	sp->live = per_start(g_pr->s, idx, period, plan, k) == 0;
}

/* Owner: the planned outside action on a live slot, if it is due. */
static void drive_slot(struct rng *r, size_t idx, struct slot_plan *sp)
{
	struct ptimer *p = &g_pers[idx];
	unsigned plan = atomic_load(&p->plan) & 0xff;
	uint64_t t = now_ns(), period = atomic_load(&p->period_ns);

	if (plan == RESET && sp->resets_left && t >= sp->next_reset) {
		uint64_t gen;
		spoke_id id;

		if (per_snapshot(p, &gen, &id)) {
			int rc = spoke_reset(g_pr->s, id, period + rng_below(r, 2 * period));

			tally(rc == 0 ? TK_RESET_OK : TK_RESET_NOENT);
			if (rc != 0)
				VIOLATION("spoke_reset of a live periodic timer returned %d", rc);
		}
		sp->resets_left--;
		sp->next_reset = t + rng_below(r, 2 * period);
		return;
	}
	if ((plan == OUTSIDE || plan == RACE || plan == RESET) && t >= sp->kill_at &&
	    !sp->resets_left) {
		int rc = per_cancel(g_pr->s, idx, rng_pct(r, 40));

		/* Nobody else cancels OUTSIDE and RESET timers: this call is the stop. */
		if (plan != RACE && rc != 0)
			VIOLATION("cancel of a live periodic timer (plan %u, slot %zu) returned %d",
				  plan, idx, rc);
	}
	if ((plan == SELF || plan == SELF_SYNC) && t > atomic_load(&p->start_ns) + EVENTUALLY_NS &&
	    !atomic_load(&p->stops)) {
		VIOLATION("periodic timer (slot %zu) never reached its run %u in %u runs", idx,
			  atomic_load(&p->plan_arg), atomic_load(&p->entered));
		atomic_store(&p->plan, OUTSIDE);
	}
}

static void per_worker(unsigned t, void *ctx)
{
	struct rng r = rng_make(g_pr->seed, t, 5);
	size_t lo = (size_t)t * SLOTS;
	struct slot_plan sp[SLOTS];
	uint64_t end;

	(void)ctx;
	memset(sp, 0, sizeof(sp));
	while (!budget_over()) {
		for (unsigned i = 0; i < SLOTS; i++) {
			size_t idx = lo + i;

			if (!sp[i].live)
				start_slot(&r, idx, &sp[i]);
			else if (atomic_load(&g_pers[idx].stops) && per_settle(g_pr->s, idx))
				sp[i].live = false;
			else
				drive_slot(&r, idx, &sp[i]);
		}
		if (g_pr->threads > 1 && rng_pct(&r, 30)) {
			size_t idx = rng_below(&r, (size_t)g_pr->threads * SLOTS);

			(void)per_cancel_plan(g_pr->s, idx, rng_pct(&r, 50), RACE);
		}
		sleep_ns(20 * US);
	}
	/* Wind down: the outside plans are cancelled now, the own-callback ones reach their run. */
	end = now_ns() + EVENTUALLY_NS;
	for (unsigned i = 0; i < SLOTS; i++) {
		size_t idx = lo + i;
		unsigned plan = atomic_load(&g_pers[idx].plan) & 0xff;

		if (!sp[i].live)
			continue;
		if (plan != SELF && plan != SELF_SYNC)
			(void)per_cancel(g_pr->s, idx, rng_pct(&r, 50));
		while (!atomic_load(&g_pers[idx].stops) && now_ns() < end)
			sleep_ns(100 * US);
		if (!atomic_load(&g_pers[idx].stops))
			VIOLATION("periodic timer (slot %zu, plan %u) never stopped", idx, plan);
		else
			(void)per_settle(g_pr->s, idx);
	}
}

int main(int argc, char **argv)
{
	static const struct round_cfg rounds[] = {
		{{.shards = 2, .tick_ns = 200 * US, .pool = 2}, 8},
		{{.shards = 4, .tick_ns = 100 * US, .pool = 0}, 12},
		{{.shards = 2, .tick_ns = 500 * US, .pool = 1}, 4},
	};

	stress_init(argc, argv, "stress.periodic",
		    "periodic timers cancelled from their own and other threads", 200000, 120);
	g_per_hook = per_hook;
	for (struct round rd = {0}; round_next(&rd, ARRAY_SIZE(rounds));) {
		uint64_t now[TK_COUNT];
		struct expect e;

		g_pr = &rd;
		round_begin(&rd, &rounds[rd.cfg], NULL);
		pers_alloc((size_t)rd.threads * SLOTS);
		round_run(&rd, "periodic timers", per_worker, NULL);
		stress_phase("settle");
		/* Every periodic timer died once: the service counts each as cancelled. */
		e = expect_since(rd.created, false);
		tally_snapshot(now);
		e.cancelled = now[TK_START] - rd.created[TK_START];
		settle_stats(rd.s, &e);
		round_report(&rd, "periodic");
		round_end(&rd);
	}
	return stress_finish();
}
