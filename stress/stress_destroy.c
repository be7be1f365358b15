/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_destroy.c - spoke_destroy while everything else is in flight.
 *
 * Each round creates a service of random shape (1-4 shards, tick 100 us -
 * 1 ms, callbacks inline or on a pool of 1-3, and on half the rounds with 2+
 * shards the last shard attached to a poller thread), runs a mix of all the
 * other workloads on 4-16 threads for the round's share of the ops, and then
 * destroys the service without stopping any of it first:
 *   churn     threads start/cancel/cancel_sync/reset their own timers on all
 *             shards and cancel other threads' timers;
 *   periodic  threads keep periodic timers that die by their own callback's
 *             cancel or by the owner's, and cancel_sync them before reuse;
 *   chains    timers whose callbacks start children on random shards and
 *             cancel random timers;
 *   poller    the attached shard's thread polls and starts, cancels and resets
 *             its own timers.
 * Every caller keeps calling until a call returns -ESHUTDOWN, then stops
 * calling (it must not call into a freed service) and waits. To make sure
 * spoke_destroy cannot return (and free the service) before every caller has
 * seen -ESHUTDOWN, a "gate" callback, started on managed shard 0 just before
 * destroy, waits until they all have: spoke_destroy must wait for running
 * callbacks, so it is held until then.
 *
 * Invariants:
 *   - spoke_destroy returns (no hang) and no callback begins after it
 *     returned (each callback checks a flag set when it returned; the
 *     gate callback must have finished);
 *   - calls return 0/-ENOENT as usual or -ESHUTDOWN, nothing else
 *     (check_rc); every caller gets -ESHUTDOWN, and once it has, every entry
 *     point (start_on, start, start_periodic, start_ttl, reset, cancel,
 *     cancel_sync) gives it -ESHUTDOWN and leaves *id alone;
 *   - at most one outcome per timer (a run or a winning cancel, never both,
 *     never two), never early, cancel_sync never returns while the callback
 *     runs, periodic timers never overlap (records and ptimers of
 *     stress_util.h; timers pending at destroy simply never run);
 *   - everything is freed: ASan/LeakSanitizer (the address,undefined build)
 *     reports no leak at exit and no use after free.
 */
#include <unistd.h>

#include "stress_util.h"

#define OWN	   64	/* records per churn thread */
#define SPAWN	   8192 /* records for callback-started children, per round */
#define PER_SLOTS  4	/* periodic slots per periodic thread */
#define POLLER_OWN 128

#define TAG_CHAIN (1u << REC_TAG_SHIFT)

/* The round in progress, shared by its callers, callbacks and main. */
struct dround {
	const struct round *rd;		       /* its service, shape, workers and seed */
	struct step_mix churn_mix, poller_mix; /* what churn threads and the poller do */
	size_t spawn_lo, poller_lo;
	atomic_size_t spawned;
	atomic_uint stopped; /* callers that saw -ESHUTDOWN and stopped calling */
	unsigned callers;    /* threads + poller */
	atomic_int gate_running, gate_done, destroyed, release;
	atomic_uint after_destroy; /* callbacks that began after destroy returned */
	struct poller poller;
	bool polled;
};

static struct dround g_d;

/* Has this thread seen -ESHUTDOWN (check_rc sets tl_saw_shutdown)? Then it stops calling. */
static bool shut(int rc)
{
	(void)rc;
	return tl_saw_shutdown;
}

/*
 * A call every caller makes each turn (a cancel of an id that is never
 * valid: -ENOENT, or -ESHUTDOWN), so that it sees the shutdown even when
 * nothing else of its own is due (say its timers wait for a pool the gate
 * occupies).
 */
static void poke(void)
{
	int rc = spoke_cancel(g_d.rd->s, 0);

	tally(TK_PROBE);
	if (rc != -ENOENT)
		check_rc("spoke_cancel(0)", rc, false);
}

static uint64_t short_delay(struct rng *r, const void *ctx)
{
	(void)ctx;
	return rng_below(r, 3 * g_d.rd->shape.tick_ns + 1);
}

static void note_callback(void)
{
	if (atomic_load(&g_d.destroyed))
		atomic_fetch_add(&g_d.after_destroy, 1);
}

static void chain_hook(struct rec *r, size_t idx, uint64_t gen)
{
	struct rng *rg = tl_rng();
	size_t child;

	(void)idx, (void)gen;
	note_callback();
	if (!(atomic_load(&r->tag) & TAG_CHAIN))
		return;
	if (rng_pct(rg, 70) && (child = atomic_fetch_add(&g_d.spawned, 1)) < SPAWN)
		(void)rec_start(g_d.rd->s, g_d.spawn_lo + child, HOW_ON,
				(unsigned)rng_below(rg, g_d.rd->shape.shards),
				short_delay(rg, NULL), TAG_CHAIN);
	if (rng_pct(rg, 20))
		(void)rec_cancel(g_d.rd->s, rng_below(rg, g_nrecs), false);
}

static void per_hook(struct ptimer *p, size_t idx, uint64_t gen, unsigned n)
{
	(void)idx;
	note_callback();
	if (n == atomic_load(&p->plan_arg) && atomic_load(&p->plan) == 1)
		per_cancel_own(g_d.rd->s, p, gen, n, rng_pct(tl_rng(), 50), true);
}

/* Holds spoke_destroy until every caller has seen -ESHUTDOWN. */
static void gate_fn(void *arg)
{
	uint64_t end = now_ns() + EVENTUALLY_NS;

	(void)arg;
	atomic_store(&g_d.gate_running, 1);
	while (atomic_load(&g_d.stopped) < g_d.callers && now_ns() < end)
		sleep_ns(100 * US);
	if (atomic_load(&g_d.stopped) < g_d.callers) {
		VIOLATION("%u of %u callers never got -ESHUTDOWN while destroy ran",
			  g_d.callers - atomic_load(&g_d.stopped), g_d.callers);
		/* Letting destroy go on would free the service under them. */
		fprintf(stderr, "%s: FAIL: stopping here (seed %" PRIu64 ")\n", g_name, g_seed);
		fflush(stderr);
		_exit(1);
	}
	atomic_store(&g_d.gate_done, 1);
}

static void churn_thread(unsigned t, struct rng *r)
{
	size_t lo = (size_t)t * OWN;

	while (!shut(rec_step(g_d.rd->s, lo + rng_below(r, OWN), r, &g_d.churn_mix))) {
		poke();
		if (rng_pct(r, 10))
			(void)shut(rec_cancel(g_d.rd->s, rng_below(r, g_nrecs), rng_pct(r, 30)));
		if (rng_pct(r, 5))
			sched_yield();
	}
}

static void periodic_thread(unsigned t, struct rng *r)
{
	size_t lo = (size_t)(t / 3) * PER_SLOTS;
	uint64_t kill_at[PER_SLOTS] = {0};
	bool live[PER_SLOTS] = {false};

	while (!tl_saw_shutdown) {
		for (unsigned i = 0; i < PER_SLOTS && !tl_saw_shutdown; i++) {
			struct ptimer *p = &g_pers[lo + i];
			uint64_t period = (1 + rng_below(r, 3)) * g_d.rd->shape.tick_ns;

			if (!live[i]) {
				/* plan 1: its own callback cancels it in run plan_arg; 0: the
				 * owner. */
				unsigned plan = (unsigned)rng_below(r, 2);

				kill_at[i] = now_ns() + rng_below(r, 8 * period);
				live[i] = !shut(per_start(g_d.rd->s, lo + i, period, plan,
							  1 + (unsigned)rng_below(r, 5)));
			} else if (atomic_load(&p->stops)) {
				if (per_settle(g_d.rd->s, lo + i))
					live[i] = false;
			} else if (atomic_load(&p->plan) == 0 && now_ns() >= kill_at[i]) {
				(void)shut(per_cancel(g_d.rd->s, lo + i, rng_pct(r, 50)));
			}
		}
		poke();
		sleep_ns(20 * US);
	}
}

static void chain_thread(unsigned t, struct rng *r)
{
	size_t lo = (size_t)t * OWN;

	while (!tl_saw_shutdown) {
		size_t idx = lo + rng_below(r, OWN);

		if (rec_settled(atomic_load(&g_recs[idx].word)))
			(void)shut(rec_start(g_d.rd->s, idx, HOW_ON,
					     (unsigned)rng_below(r, g_d.rd->shape.shards),
					     short_delay(r, NULL), TAG_CHAIN));
		else if (rng_pct(r, 30))
			(void)shut(rec_cancel(g_d.rd->s, idx, rng_pct(r, 50)));
		poke();
		sleep_ns(10 * US);
	}
}

static void expect_shutdown(const char *call, int rc)
{
	if (rc != -ESHUTDOWN)
		VIOLATION("%s after a call got -ESHUTDOWN returned %d", call, rc);
}

/*
 * A caller that saw -ESHUTDOWN: every entry point must say -ESHUTDOWN too
 * (destroy cannot have returned: the gate waits for this caller). Then it
 * stops calling and waits, alive, until destroy has returned.
 */
static void caller_done(void)
{
	spoke_id id = 0x5eed;

	if (tl_saw_shutdown) {
		expect_shutdown("spoke_start_on",
				spoke_start_on(g_d.rd->s, 0, 0, rec_fire, NULL, &id));
		expect_shutdown("spoke_start", spoke_start(g_d.rd->s, MS, rec_fire, NULL, &id));
		expect_shutdown("spoke_start_periodic",
				spoke_start_periodic(g_d.rd->s, MS, rec_fire, NULL, &id));
		expect_shutdown("spoke_start_ttl",
				spoke_start_ttl(g_d.rd->s, MS, rec_fire, NULL, &id));
		expect_shutdown("spoke_reset",
				spoke_reset(g_d.rd->s, atomic_load(&g_recs[0].id), 0));
		expect_shutdown("spoke_cancel",
				spoke_cancel(g_d.rd->s, atomic_load(&g_recs[0].id)));
		expect_shutdown("spoke_cancel_sync",
				spoke_cancel_sync(g_d.rd->s, atomic_load(&g_recs[0].id)));
		if (id != 0x5eed)
			VIOLATION("a start refused with -ESHUTDOWN wrote the id");
	} else {
		VIOLATION("a caller stopped without seeing -ESHUTDOWN");
	}
	tally_flush();
	atomic_fetch_add(&g_d.stopped, 1);
	while (!atomic_load(&g_d.release))
		sleep_ns(100 * US);
}

static void d_worker(unsigned t, void *ctx)
{
	struct rng r = rng_make(g_d.rd->seed, t, 9);

	(void)ctx;
	tl_saw_shutdown = false;
	switch (t % 3) {
	case 0:
		churn_thread(t, &r);
		break;
	case 1:
		periodic_thread(t, &r);
		break;
	default:
		chain_thread(t, &r);
		break;
	}
	caller_done();
}

static void d_poller_work(struct poller *p, struct rng *r)
{
	(void)p;
	for (int i = 0; i < 4 && !tl_saw_shutdown; i++)
		(void)shut(rec_step(g_d.rd->s, g_d.poller_lo + rng_below(r, POLLER_OWN), r,
				    &g_d.poller_mix));
	if (!tl_saw_shutdown)
		poke();
}

/* Runs the poller loop (in stress_util.h) and then counts it as a stopped caller. */
static void *d_poller_main(void *arg)
{
	(void)poller_main(arg);
	caller_done();
	return NULL;
}

/* What the churn threads and the poller (mostly on its own shard) do with their records. */
static void set_mixes(unsigned nshards)
{
	g_d.churn_mix = step_mix_strict(50, 30, 60, nshards, short_delay);
	g_d.poller_mix = step_mix_poller(step_mix_strict(40, 20, 60, nshards, short_delay));
}

static void one_round(struct round *rd)
{
	struct rng r = rng_make(g_seed, rd->i, 10);
	static const uint64_t ticks[] = {100 * US, 250 * US, MS};
	static const unsigned nthreads[] = {4, 8, 16};
	struct round_cfg cfg = {
		.shape = {.shards = 1 + (unsigned)rng_below(&r, 4),
			  .pool = (unsigned)rng_below(&r, 4)},
	};
	pthread_t pt = 0;
	uint64_t fired;
	unsigned threads;

	cfg.shape.tick_ns = ticks[rng_below(&r, ARRAY_SIZE(ticks))];
	cfg.threads = nthreads[rng_below(&r, ARRAY_SIZE(nthreads))];
	memset(&g_d, 0, sizeof(g_d));
	g_d.rd = rd;
	g_d.polled = cfg.shape.shards >= 2 && rng_pct(&r, 50);
	atomic_store(&g_attached_mask, 0);
	rd->quiet = rd->i >= 8 && !g_opt.soak;
	round_begin(rd, &cfg, g_d.polled ? ", last shard attached" : NULL);
	threads = rd->threads;
	set_mixes(cfg.shape.shards);
	g_d.callers = threads + (g_d.polled ? 1 : 0);
	g_d.spawn_lo = (size_t)threads * OWN;
	g_d.poller_lo = g_d.spawn_lo + SPAWN;
	recs_alloc(g_d.poller_lo + POLLER_OWN);
	pers_alloc((size_t)threads * PER_SLOTS);

	/* Everything in flight ... */
	round_budget(rd, "workload before destroy");
	if (g_d.polled) {
		memset(&g_d.poller, 0, sizeof(g_d.poller));
		g_d.poller.s = rd->s;
		g_d.poller.shard = cfg.shape.shards - 1;
		g_d.poller.seed = rd->seed;
		atomic_init(&g_d.poller.work, d_poller_work);
		pt = thread_spawn(d_poller_main, &g_d.poller);
	}
	{
		struct crew crew;

		crew_start(&crew, threads, d_worker, NULL);
		crew_release(&crew);
		while (!budget_over() || now_ns() < rd->t0_ns + 10 * MS)
			sleep_ns(200 * US);

		/* ... then the gate, then destroy. */
		stress_phase("destroy in flight");
		atomic_store(&g_shutdown_ok, 1);
		if (spoke_start_on(rd->s, 0, 0, gate_fn, NULL, NULL) != 0)
			VIOLATION("could not start the gate callback");
		while (!atomic_load(&g_d.gate_running))
			sleep_ns(50 * US);
		spoke_destroy(rd->s);
		rd->s = NULL;
		atomic_store(&g_d.destroyed, 1);
		if (!atomic_load(&g_d.gate_done))
			VIOLATION("spoke_destroy returned while a callback (the gate) was running");
		fired = atomic_load(&g_tally[TK_FIRED]);
		sleep_ns(5 * MS);
		if (atomic_load(&g_d.after_destroy))
			VIOLATION("%u callbacks began after spoke_destroy returned",
				  atomic_load(&g_d.after_destroy));
		if (atomic_load(&g_tally[TK_FIRED]) != fired)
			VIOLATION("callbacks ran after spoke_destroy returned");
		atomic_store(&g_d.release, 1);
		crew_wait(&crew);
		crew_stop(&crew);
	}
	if (g_d.polled)
		pthread_join(pt, NULL);
	atomic_store(&g_shutdown_ok, 0);
	round_report(rd, "round");
	round_end(rd);
}

int main(int argc, char **argv)
{
	stress_init(argc, argv, "stress.destroy", "spoke_destroy while everything is in flight",
		    1500000, 120);
	g_fire_hook = chain_hook;
	g_per_hook = per_hook;
	g_fire_spin_ns = 10 * US;
	for (struct round rd = {0}; round_next(&rd, 24);)
		one_round(&rd);
	return stress_finish();
}
