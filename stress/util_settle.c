/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_settle.c - the stress library's end of a phase: waiting until
 * spoke_stats agrees with the program's own counts, and the pacer that
 * keeps the owners' backlog bounded while memory is measured.
 */
#include "stress_util.h"

struct expect expect_since(const uint64_t before[TK_COUNT], bool oneshot_only)
{
	uint64_t now[TK_COUNT];
	struct expect e;

	tally_snapshot(now);
	e.started = now[TK_START] - before[TK_START];
	e.fired = now[TK_FIRED] - before[TK_FIRED];
	e.cancelled =
		(now[TK_CANCEL_OK] - before[TK_CANCEL_OK]) + (now[TK_SYNC_OK] - before[TK_SYNC_OK]);
	e.refused = now[TK_START_REFUSED] - before[TK_START_REFUSED];
	e.oneshot_only = oneshot_only;
	return e;
}

/* NULL if spoke_stats agrees with e, else why not (in buf). */
static const char *stats_disagree(struct spoke *s, const struct expect *e, char *buf, size_t len)
{
	struct spoke_stats *st = calloc(1, sizeof(*st));
	const char *why = NULL;

	if (!st)
		abort();
	spoke_stats(s, st);
	for (unsigned k = 0; k < st->shards && !why; k++) {
		const struct spoke_shard_stats *h = &st->shard[k];

		if (h->pending != 0) {
			snprintf(buf, len, "shard %u pending %" PRIu64, k, h->pending);
			why = buf;
		} else if (e->oneshot_only && h->started != h->fired + h->cancelled + h->pending) {
			snprintf(buf, len,
				 "shard %u: started %" PRIu64 " != fired %" PRIu64
				 " + cancelled %" PRIu64 " + pending %" PRIu64,
				 k, h->started, h->fired, h->cancelled, h->pending);
			why = buf;
		}
	}
	if (!why && (st->total.started != e->started || st->total.fired != e->fired ||
		     st->total.cancelled != e->cancelled || st->total.refused != e->refused ||
		     st->total.inbox_queued != 0)) {
		snprintf(buf, len,
			 "stats say started %" PRIu64 " fired %" PRIu64 " cancelled %" PRIu64
			 " refused %" PRIu64 " queued %" PRIu64 ", the program counted %" PRIu64
			 " / %" PRIu64 " / %" PRIu64 " / %" PRIu64 " / 0",
			 st->total.started, st->total.fired, st->total.cancelled, st->total.refused,
			 st->total.inbox_queued, e->started, e->fired, e->cancelled, e->refused);
		why = buf;
	}
	free(st);
	return why;
}

void settle_stats(struct spoke *s, const struct expect *e)
{
	uint64_t end = now_ns() + EVENTUALLY_NS;
	char buf[256];
	const char *why;

	while ((why = stats_disagree(s, e, buf, sizeof(buf))) != NULL && now_ns() < end)
		sleep_ns(MS);
	if (why) {
		uint64_t t[TK_COUNT];

		tally_snapshot(t);
		VIOLATION("service counts never settled: %s (program's counts now: %" PRIu64
			  " starts, %" PRIu64 " runs, %" PRIu64 " winning cancels in all)",
			  why, t[TK_START], t[TK_FIRED], t[TK_CANCEL_OK] + t[TK_SYNC_OK]);
	}
}

void settle_oneshot_stats(struct spoke *s, const uint64_t since[TK_COUNT])
{
	struct expect e = expect_since(since, true);

	settle_stats(s, &e);
}

void recs_settle(struct spoke *s, const uint64_t since[TK_COUNT])
{
	recs_cancel_remaining(s, 0, g_nrecs);
	recs_sweep(0, g_nrecs);
	settle_oneshot_stats(s, since);
}

/*
 * Backpressure for phases that measure memory. Starts the owners have not
 * taken yet plus winning cancels they have not retired yet are messages
 * waiting in inboxes, each holding a handle: the program's counts minus
 * spoke_stats. Every 64th call of pace() a worker computes that backlog;
 * above PACE_HIGH it sleeps until the owners have brought it under
 * PACE_LOW. Without it, 32 CPU-bound workers on 2 cores starve the shard
 * threads (the scheduler gives each runnable thread an equal share) and the
 * backlog, and the arenas with it, grow with the length of the phase. (A
 * pacer thread of its own would be starved the same way.) The cap is low
 * because arena memory is the sum over threads of each one's peak of live
 * handles, and one thread running a whole time slice while its owners
 * wait holds a large share of the backlog: with a cap of 16384 those
 * per-thread peaks reached 3-10k handles and a second identical phase added
 * up to 8 MiB of handles; with 2048 it adds under 1 MiB, at the same speed.
 */
#define PACE_HIGH 2048
#define PACE_LOW  512

static struct pacer *g_pacer;

void pacer_start(struct pacer *p, struct spoke *s, const uint64_t *since)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	p->since = since;
	g_pacer = p;
}

void pacer_stop(struct pacer *p)
{
	(void)p;
	g_pacer = NULL;
}

static uint64_t pacer_backlog(struct pacer *p)
{
	struct spoke_stats st_buf, *st = &st_buf; /* ~20 KiB on the stack: workers only */
	struct expect e = expect_since(p->since, false);
	uint64_t ours, theirs, m;

	spoke_stats(p->s, st);
	ours = e.started + e.cancelled;
	theirs = st->total.started + st->total.cancelled;
	m = atomic_load(&p->max_backlog);
	while (ours > theirs && ours - theirs > m &&
	       !atomic_compare_exchange_weak(&p->max_backlog, &m, ours - theirs))
		;
	return ours > theirs ? ours - theirs : 0;
}

void pace(void)
{
	static _Thread_local unsigned calls;
	struct pacer *p = g_pacer;

	if (!p || (++calls & 63) != 0)
		return;
	tally_flush();
	if (pacer_backlog(p) <= PACE_HIGH)
		return;
	atomic_fetch_add(&p->pauses, 1);
	while (!budget_over() && pacer_backlog(p) >= PACE_LOW)
		sleep_ns(50 * US);
}
