/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_attached.c - attached shards polled by their own threads while
 * other threads start, reset and cancel timers on them.
 *
 * Workload: worker threads own 128 records each and churn timers on every
 * shard (spoke_start_on a random shard, attached ones included, or
 * spoke_start), cancel (cancel_sync one time in five) and reset them, and
 * cancel random timers of others. 20 ms after the traffic has begun (or a
 * fifth of the round's time, if shorter), poller threads take shards over with
 * spoke_attach - a shard's managed thread must stop driving it while
 * messages for it are in flight - and then loop: poll, sleep until
 * spoke_next_deadline_ns (at most 100 us), and between polls do what an event
 * loop does: start timers on their own shard (spoke_start: straight into
 * the wheel, no message), cancel and reset them (the owner's direct paths),
 * start timers on other shards. Callbacks that run inline on a poller start
 * a timer of their own now and then (into the wheel while it is being
 * advanced). Once their attach has been checked, the pollers now and then
 * (one loop in 32) hand their shard back with spoke_detach, let its new
 * managed thread drive it for up to 500 us, and attach it again. The
 * rounds: shards 0-1 of 4 attached (pool of 2 for the rest), shard 2 of 3
 * attached (the rest run callbacks inline), both shards of 2 attached
 * (nothing managed left).
 *
 * Invariants (stress_util.h says how each is caught):
 *   - exactly one outcome per timer; never early (exactly for records with
 *     one resetter); cancel_sync never returns while the callback runs;
 *   - a timer started on an attached shard (after the attach returned) runs
 *     its callback inside spoke_poll on that shard's thread, unless the shard
 *     was handed back (spoke_detach) after the start, and no callback of
 *     another shard ever runs inside a poll;
 *   - spoke_detach of its own shard returns 0, spoke_poll after it -EPERM,
 *     and the attach that follows 0;
 *   - spoke_poll returns at least the number of callbacks it ran (never
 *     negative); spoke_next_deadline_ns returns 0 or 1;
 *   - spoke_attach of an attached shard gives -EBUSY (from another thread),
 *     and a second attach from an attached thread gives -EBUSY;
 *   - spoke_stats marks exactly the polled shards attached; afterwards it
 *     agrees (started, fired, cancelled; pending 0; per shard started ==
 *     fired + cancelled + pending).
 */
#include "stress_util.h"

#define OWN	   128 /* records per worker */
#define POLLER_OWN 256 /* records per poller (its work and its inline callbacks) */

/* The round in progress, shared by workers, pollers and callbacks. */
struct att {
	const struct round *rd; /* its service, shape, workers and seed */
	uint64_t polled_mask;
	atomic_int quiesce; /* settling: callbacks start nothing more */
	struct poller pollers[SPOKE_MAX_SHARDS];
	size_t poller_lo[SPOKE_MAX_SHARDS]; /* first record of each poller's range */
};

static struct att g_att;

static uint64_t att_delay(struct rng *r, const void *ctx)
{
	(void)ctx;
	return rng_below(r, 4 * g_att.rd->shape.tick_ns + 1);
}

/*
 * Workers start on any shard (rec_start tags the record when its shard is
 * attached already); pollers mostly on their own shard (spoke_start).
 */
static struct step_mix worker_mix, poller_mix;

static void att_worker(unsigned t, void *ctx)
{
	struct rng r = rng_make(g_att.rd->seed, t, 8);
	size_t lo = (size_t)t * OWN;

	(void)ctx;
	while (!budget_over()) {
		(void)rec_step(g_att.rd->s, lo + rng_below(&r, OWN), &r, &worker_mix);
		if (rng_pct(&r, 10))
			(void)rec_cancel(g_att.rd->s, rng_below(&r, g_nrecs), rng_pct(&r, 20));
		if (rng_pct(&r, 2))
			sched_yield();
	}
}

/* Between polls: what an event loop does with its own timers. */
static void poller_work(struct poller *p, struct rng *r)
{
	size_t lo = g_att.poller_lo[p->shard];

	for (int i = 0; i < 8; i++)
		(void)rec_step(g_att.rd->s, lo + rng_below(r, POLLER_OWN / 2), r, &poller_mix);
	if (rng_pct(r, 20))
		(void)rec_cancel(g_att.rd->s, rng_below(r, g_nrecs), false);
}

/* Callbacks inline on a poller now and then start one more timer on its own shard. */
static void att_hook(struct rec *r, size_t idx, uint64_t gen)
{
	struct poller *p = tl_poller;
	struct rng *rg = tl_rng();
	size_t lo, j;

	(void)r, (void)idx, (void)gen;
	if (!p || atomic_load(&g_att.quiesce) || !rng_pct(rg, 20))
		return;
	lo = g_att.poller_lo[p->shard] + POLLER_OWN / 2;
	j = lo + rng_below(rg, POLLER_OWN / 2);
	if (rec_settled(atomic_load_explicit(&g_recs[j].word, memory_order_acquire)))
		(void)rec_start(g_att.rd->s, j, HOW_HOME, 0,
				rng_below(rg, 2 * g_att.rd->shape.tick_ns + 1), REC_STRICT);
}

static void check_attached_flags(struct spoke *s)
{
	struct spoke_stats *st = calloc(1, sizeof(*st));

	if (!st)
		abort();
	spoke_stats(s, st);
	for (unsigned k = 0; k < st->shards; k++)
		if (st->shard[k].attached != (((g_att.polled_mask >> k) & 1) != 0))
			VIOLATION("spoke_stats says shard %u is %sattached", k,
				  st->shard[k].attached ? "" : "not ");
	free(st);
}

struct attach_later {
	double delay_s;
};

static void *attach_later(void *arg)
{
	struct attach_later *a = arg;

	sleep_ns((uint64_t)(a->delay_s * 1e9));
	stress_phase("attach while traffic flows");
	for (unsigned k = 0; k < g_att.rd->shape.shards; k++)
		if ((g_att.polled_mask >> k) & 1)
			poller_start(&g_att.pollers[k], g_att.rd->s, k, poller_work, true);
	/* Another thread cannot take an attached shard. */
	for (unsigned k = 0; k < g_att.rd->shape.shards; k++) {
		if (!((g_att.polled_mask >> k) & 1))
			continue;
		int rc = spoke_attach(g_att.rd->s, k);

		if (rc != -EBUSY)
			VIOLATION(
				"spoke_attach of attached shard %u from another thread returned %d",
				k, rc);
	}
	/* From now on the pollers hand their shards back now and then (spoke_detach). */
	for (unsigned k = 0; k < g_att.rd->shape.shards; k++)
		if ((g_att.polled_mask >> k) & 1)
			atomic_store(&g_att.pollers[k].handover, 1);
	stress_phase("attached shards polled");
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct {
		struct round_cfg cfg;
		uint64_t polled;
	} rounds[] = {
		{{{.shards = 4, .tick_ns = 250 * US, .pool = 2}, 10}, 0x3},
		{{{.shards = 3, .tick_ns = 100 * US, .pool = 0}, 6}, 0x4},
		{{{.shards = 2, .tick_ns = MS, .pool = 1}, 16}, 0x3},
	};

	stress_init(argc, argv, "stress.attached",
		    "attached shards polled by their own threads while others start timers on them",
		    3000000, 120);
	g_fire_hook = att_hook;
	worker_mix = step_mix_strict(40, 20, 75, 0, att_delay); /* nshards: each round's */
	poller_mix = step_mix_poller(worker_mix);
	for (struct round rd = {0}; round_next(&rd, ARRAY_SIZE(rounds));) {
		unsigned nsh = rounds[rd.cfg].cfg.shape.shards;
		uint64_t polls = 0, over = 0, handovers = 0;
		struct attach_later al;
		pthread_t at;
		char note[48];
		size_t n;

		memset(&g_att, 0, sizeof(g_att));
		atomic_store(&g_attached_mask, 0);
		g_att.rd = &rd;
		g_att.polled_mask = rounds[rd.cfg].polled;
		worker_mix.nshards = poller_mix.nshards = nsh;
		snprintf(note, sizeof(note), ", polled shards %#" PRIx64, g_att.polled_mask);
		round_begin(&rd, &rounds[rd.cfg].cfg, note);
		n = (size_t)rd.threads * OWN;
		for (unsigned k = 0; k < nsh; k++) {
			g_att.poller_lo[k] = n;
			n += POLLER_OWN;
		}
		recs_alloc(n);
		round_budget(&rd, "traffic before attach");
		al.delay_s = rd.secs / 5 > 0.02 ? 0.02 : rd.secs / 5;
		at = thread_spawn(attach_later, &al);
		run_threads(rd.threads, att_worker, NULL);
		pthread_join(at, NULL);
		/* The pollers go on polling (and their callbacks run) until everything settled. */
		stress_phase("settle");
		/* No more work on the pollers, no more starts from their callbacks. */
		atomic_store(&g_att.quiesce, 1);
		for (unsigned k = 0; k < nsh; k++)
			if ((g_att.polled_mask >> k) & 1)
				poller_quiesce(&g_att.pollers[k]);
		round_settle_recs(&rd);
		check_attached_flags(rd.s);
		for (unsigned k = 0; k < nsh; k++) {
			if (!((g_att.polled_mask >> k) & 1))
				continue;
			poller_stop(&g_att.pollers[k]);
			polls += g_att.pollers[k].polls;
			over += g_att.pollers[k].over_reports;
			handovers += g_att.pollers[k].handovers;
		}
		round_report(&rd, "attached");
		printf("  %" PRIu64 " polls; %" PRIu64 " reported one more callback than ran "
		       "(a cancel won between dispatch and run); %" PRIu64 " detach/attach "
		       "hand-overs\n",
		       polls, over, handovers);
		round_end(&rd);
	}
	return stress_finish();
}
