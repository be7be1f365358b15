/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_callbacks.c - callbacks that start, reset and cancel other timers
 * (on other shards too) and cancel_sync others.
 *
 * Workload: each round goes in waves over a table of 2^17 records, each
 * used once per wave (claimed with an atomic counter by whoever starts a
 * timer: a worker or a callback); between waves everything settles and is
 * checked, and the next wave reuses the records with a new generation.
 * T worker threads (8, 4 and 16, on 2 cores) seed timers due in 0-3 ticks
 * and act on random timers of the table (cancel, cancel_sync, reset). Every
 * callback, besides its checks, does up to three things: start one or two
 * children (spoke_start_on a random shard, spoke_start, spoke_start_ttl),
 * reset a random timer, cancel one, cancel_sync one; now and then it also
 * turns to its own timer: cancel_sync must give -EDEADLK, cancel and reset
 * -ENOENT (a one-shot that is running is no longer pending). Timers have a
 * level (a worker's are 0, a child is its parent's + 1, at most 7) and a
 * callback cancel_syncs only timers of a higher level than its own: the
 * wait-for graph has no cycle (two callbacks that cancel_sync each other
 * would deadlock in any timer library). Rounds differ in shards (2-4),
 * tick (250 us - 1 ms) and where callbacks run (pool of 3, inline on the
 * shard threads, pool of 1): with inline callbacks a callback on one shard
 * thread waits in cancel_sync for a callback on another.
 *
 * Invariants (stress_util.h says how each is caught):
 *   - exactly one outcome per started timer, never early (loose bound: a
 *     timer is reset by anyone, so not before the earliest deadline any
 *     start/reset asked for);
 *   - cancel_sync (from workers and from callbacks) never returns while the
 *     callback runs; from the timer's own callback it returns -EDEADLK;
 *   - no deadlock: callbacks calling every function (the watchdog ends a
 *     hang with the phase it hung in);
 *   - afterwards spoke_stats agrees (started, fired, cancelled; pending 0).
 */
#include "stress_util.h"

#define TABLE	   (1u << 17)
#define MAX_LEVEL  7
#define LEVEL(tag) (((tag) >> REC_TAG_SHIFT) & 0xf)

/* The wave in progress, shared by workers and callbacks. */
struct web {
	const struct round *rd; /* its service, shape, workers and seed */
	atomic_size_t claimed;	/* records handed out (each used once) */
	atomic_int stop;	/* the round is over: callbacks stop spawning */
	/* Records whose callback is (probably) running now: cancel_sync targets that wait. */
	atomic_size_t running[16];
};

static struct web g_web;

static uint64_t web_delay(struct rng *r)
{
	return rng_below(r, 3 * g_web.rd->shape.tick_ns + 1);
}

/* A fresh record, or SIZE_MAX when the table is used up. */
static size_t claim(void)
{
	size_t i = atomic_fetch_add(&g_web.claimed, 1);

	return i < g_nrecs ? i : SIZE_MAX;
}

/* Records handed out so far in this wave (the counter runs past the table once it is used up). */
static size_t claimed_so_far(void)
{
	size_t n = atomic_load(&g_web.claimed);

	return n < g_nrecs ? n : g_nrecs;
}

/* A random record handed out so far in this wave, a recent one (likely live) 3 times in 4. */
static size_t any_claimed(struct rng *r)
{
	size_t n = claimed_so_far();

	if (n > 1024 && rng_pct(r, 75))
		return n - 1 - rng_below(r, 1024);
	return rng_below(r, n);
}

static void start_one(struct rng *r, unsigned level)
{
	size_t idx = claim();
	unsigned how = (unsigned)rng_below(r, 100);

	if (idx == SIZE_MAX)
		return;
	(void)rec_start(g_web.rd->s, idx,
			how < 60   ? HOW_ON
			: how < 85 ? HOW_HOME
				   : HOW_TTL,
			(unsigned)rng_below(r, g_web.rd->shape.shards), web_delay(r),
			(uint32_t)level << REC_TAG_SHIFT);
}

/* A record whose callback may be running now (or a recent one). */
static size_t maybe_running(struct rng *r)
{
	size_t idx = atomic_load(&g_web.running[rng_below(r, ARRAY_SIZE(g_web.running))]);

	return idx < g_nrecs && rng_pct(r, 75) ? idx : any_claimed(r);
}

/* A callback cancel_syncs only a timer of a higher level (no cycle of waits). */
static void cancel_sync_deeper(struct rng *r, unsigned level)
{
	for (int tries = 0; tries < 4; tries++) {
		size_t idx = maybe_running(r);

		if (LEVEL(atomic_load(&g_recs[idx].tag)) > level) {
			(void)rec_cancel(g_web.rd->s, idx, true);
			return;
		}
	}
}

/* A cancel or reset of a one-shot from its own callback: it is no longer pending. */
static void own_noent(const char *call, int rc, enum tally_kind ok, enum tally_kind noent)
{
	tally(rc == 0 ? ok : noent);
	if (rc != -ENOENT)
		VIOLATION("%s of a one-shot from its own callback returned %d, not -ENOENT", call,
			  rc);
}

/* Calls on the callback's own (running) timer. */
static void own_calls(struct rec *self, size_t idx, uint64_t gen, struct rng *r)
{
	spoke_id id = atomic_load(&self->id);

	if (atomic_load(&self->id_gen) != gen)
		return; /* ran before its starter published the id: nothing to call with */
	switch (rng_below(r, 3)) {
	case 0:
		(void)rec_cancel(g_web.rd->s, idx, true); /* checks -EDEADLK */
		break;
	case 1:
		own_noent("spoke_cancel", spoke_cancel(g_web.rd->s, id), TK_CANCEL_OK,
			  TK_CANCEL_NOENT);
		break;
	default:
		own_noent("spoke_reset", spoke_reset(g_web.rd->s, id, g_web.rd->shape.tick_ns),
			  TK_RESET_OK, TK_RESET_NOENT);
		break;
	}
}

static void web_hook(struct rec *r, size_t idx, uint64_t gen)
{
	unsigned level = LEVEL(atomic_load(&r->tag)), child = level < MAX_LEVEL ? level + 1 : level;
	struct rng *rg = tl_rng();
	unsigned pick = (unsigned)rng_below(rg, 100);

	atomic_store(&g_web.running[(uintptr_t)rg / 64 % ARRAY_SIZE(g_web.running)], idx);
	fire_spin();
	if (atomic_load_explicit(&g_web.stop, memory_order_relaxed) || budget_over())
		return;
	if (pick < 60)
		start_one(rg, child);
	if (pick < 15)
		start_one(rg, child);
	if (rng_pct(rg, 30))
		(void)rec_reset(g_web.rd->s, any_claimed(rg), web_delay(rg));
	if (rng_pct(rg, 25))
		(void)rec_cancel(g_web.rd->s, any_claimed(rg), false);
	if (rng_pct(rg, 15))
		cancel_sync_deeper(rg, level);
	if (rng_pct(rg, 5))
		own_calls(r, idx, gen, rg);
}

static void web_worker(unsigned t, void *ctx)
{
	struct rng r = rng_make(g_web.rd->seed, t, 4);

	(void)ctx;
	while (!budget_over() && atomic_load(&g_web.claimed) < g_nrecs) {
		unsigned pick = (unsigned)rng_below(&r, 100);

		if (pick < 40)
			start_one(&r, 0);
		else if (pick < 65)
			(void)rec_cancel(g_web.rd->s, any_claimed(&r), false);
		else if (pick < 80)
			(void)rec_cancel(g_web.rd->s, maybe_running(&r), true);
		else
			(void)rec_reset(g_web.rd->s, any_claimed(&r), web_delay(&r));
		if ((pick & 7) == 0)
			sched_yield(); /* leave the callbacks some CPU */
	}
}

/* Main: wait until the callbacks have stopped spawning and every timer has an outcome. */
static void web_settle(void)
{
	size_t n;

	atomic_store(&g_web.stop, 1);
	do {
		n = claimed_so_far();
		recs_cancel_remaining(g_web.rd->s, 0, n);
		recs_sweep(0, n);
	} while (n != claimed_so_far());
}

int main(int argc, char **argv)
{
	static const struct round_cfg rounds[] = {
		{{.shards = 4, .tick_ns = 500 * US, .pool = 3}, 8},
		{{.shards = 2, .tick_ns = 250 * US, .pool = 0}, 4},
		{{.shards = 3, .tick_ns = MS, .pool = 1}, 16},
	};

	stress_init(argc, argv, "stress.callbacks",
		    "callbacks that start, reset, cancel and cancel_sync other timers", 3000000,
		    120);
	g_fire_hook = web_hook;
	g_fire_spin_ns = 10 * US;
	for (struct round rd = {0}; round_next(&rd, ARRAY_SIZE(rounds));) {
		unsigned waves;

		g_web.rd = &rd;
		for (unsigned k = 0; k < ARRAY_SIZE(g_web.running); k++)
			atomic_store(&g_web.running[k], SIZE_MAX);
		round_begin(&rd, &rounds[rd.cfg], NULL);
		recs_alloc(TABLE);
		round_budget(&rd, "callbacks calling in");
		for (waves = 0; waves == 0 || !budget_over(); waves++) {
			atomic_store(&g_web.claimed, 0);
			atomic_store(&g_web.stop, 0);
			stress_phase("callbacks calling in");
			run_threads(rd.threads, web_worker, NULL);
			stress_phase("settle");
			web_settle();
			settle_oneshot_stats(rd.s, rd.created);
		}
		round_report(&rd, "callbacks");
		printf("  %u waves over a table of %u timers\n", waves, TABLE);
		round_end(&rd);
	}
	return stress_finish();
}
