/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api_stats.c - reading every shard from any thread: spoke_stats and the
 * debug dump (spoke_dump).
 */
#define _GNU_SOURCE
#include "api.h"
#include "guard.h"
#include "service.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>

/* --- statistics ------------------------------------------------------------------ */

static uint64_t counter(struct shard *sh, enum shard_counter c)
{
	return atomic_load_explicit(&sh->ctr.own[c], memory_order_relaxed) +
	       atomic_load_explicit(&sh->ctr.remote[c], memory_order_relaxed);
}

/*
 * The percentiles of a lateness histogram (copied: the counts move while
 * runs land) into o: the top of the bucket holding the q-th run.
 */
static void late_percentiles(const uint64_t *counts, struct spoke_shard_stats *o)
{
	static const struct {
		uint64_t per_mille;
		size_t field;
	} q[] = {{500, offsetof(struct spoke_shard_stats, late_p50_ns)},
		 {990, offsetof(struct spoke_shard_stats, late_p99_ns)},
		 {999, offsetof(struct spoke_shard_stats, late_p999_ns)}};
	uint64_t total = 0, seen = 0;
	unsigned b = 0;

	for (unsigned i = 0; i < SPOKE_LATE_BUCKETS; i++)
		total += counts[i];
	o->late_runs = total;
	for (size_t k = 0; k < sizeof(q) / sizeof(q[0]); k++) {
		/* The rank of the run at this percentile, 1-based, rounded up. */
		uint64_t rank = (total * q[k].per_mille + 999) / 1000;

		while (total && seen < rank && b < SPOKE_LATE_BUCKETS)
			seen += counts[b++];
		*(uint64_t *)((char *)o + q[k].field) =
			total ? spoke_late_bucket_top(b ? b - 1 : 0) : 0;
	}
}

/*
 * The messages queued to sh and not handled yet: its count, less the places
 * threads have taken in it and not used (spoke_any_admit). Read while both
 * move, it can be off by a few; 0 rather than below.
 */
static uint64_t inbox_backlog(struct shard *sh)
{
	uint64_t counted = atomic_load_explicit(&sh->inbox_queued, memory_order_relaxed),
		 places = spoke_arenas_places(sh->s, sh->index);

	return counted > places ? counted - places : 0;
}

static void shard_stats(struct shard *sh, struct spoke_shard_stats *o, uint64_t *sum)
{
	uint64_t counts[SPOKE_LATE_BUCKETS], cur;

	o->started = counter(sh, CTR_STARTED);
	o->cancelled = counter(sh, CTR_CANCELLED);
	o->reset = counter(sh, CTR_RESET);
	o->pending = atomic_load_explicit(&sh->pending, memory_order_relaxed);
	o->inbox_hwm = atomic_load_explicit(&sh->ctr.inbox_hwm, memory_order_relaxed);
	o->max_late_ns = atomic_load_explicit(&sh->ctr.max_late_ns, memory_order_relaxed);
	cur = atomic_load_explicit(&sh->ctr.max_late_moved_ns, memory_order_relaxed);
	if (cur > o->max_late_ns)
		o->max_late_ns = cur;
	o->rescues = atomic_load_explicit(&sh->ctr.rescues, memory_order_relaxed);
	o->max_absence_ns = atomic_load_explicit(&sh->ctr.max_absence_ns, memory_order_relaxed);
	o->tick_ns = sh->tick_ns;
	o->slack_ns = sh->stage.width_ns;
	o->attached = atomic_load_explicit(&sh->mode, memory_order_relaxed) == SHARD_ATTACHED;
	o->inbox_queued = inbox_backlog(sh);
	o->refused = counter(sh, CTR_REFUSED);
	for (unsigned i = 0; i < SPOKE_LATE_BUCKETS; i++) {
		counts[i] =
			atomic_load_explicit(&sh->ctr.late.bucket[i], memory_order_relaxed) +
			atomic_load_explicit(&sh->ctr.late_moved.bucket[i], memory_order_relaxed);
		sum[i] += counts[i];
	}
	late_percentiles(counts, o);
	/* Every run is counted once, in the histogram (run.c note_lateness). */
	o->fired = o->late_runs;
}

void spoke_stats(struct spoke *s, struct spoke_stats *out)
{
	uint64_t sum[SPOKE_LATE_BUCKETS] = {0};
	struct spoke_shard_stats *t;
	struct arena *a;

	if (!out)
		abort_misuse("spoke_stats called with a NULL out",
			     "it returns nothing, so it cannot report the error");
	t = &out->total;
	memset(out, 0, sizeof(*out));
	if (!s || spoke_call_enter(s, &a) != 0)
		return; /* all zero: no service, or it is being destroyed */
	out->shards = s->nshards;
	for (unsigned k = 0; k < s->nshards; k++) {
		struct spoke_shard_stats *o = &out->shard[k];

		shard_stats(&s->shards[k], o, sum);
		t->started += o->started;
		t->cancelled += o->cancelled;
		t->reset += o->reset;
		t->fired += o->fired;
		t->pending += o->pending;
		t->inbox_queued += o->inbox_queued;
		t->refused += o->refused;
		if (o->inbox_hwm > t->inbox_hwm)
			t->inbox_hwm = o->inbox_hwm;
		if (o->max_late_ns > t->max_late_ns)
			t->max_late_ns = o->max_late_ns;
		t->rescues += o->rescues;
		if (o->max_absence_ns > t->max_absence_ns)
			t->max_absence_ns = o->max_absence_ns;
	}
	late_percentiles(sum, t);
	out->spares = atomic_load_explicit(&s->spares, memory_order_relaxed);
	out->spares_started = atomic_load_explicit(&s->spares_started, memory_order_relaxed);
	spoke_call_leave(a, 0);
}

/* --- the debug dump ------------------------------------------------------------- */

/* One pending timer as the dump shows it. */
struct dump_entry {
	uint64_t due_ns;
	spoke_id id;
	spoke_fn *fn;
	unsigned kind;
};

/* What the walk over the handles collects: per shard, the `keep` earliest. */
struct dump_walk {
	struct dump_entry *earliest; /* nshards rows of keep entries, by deadline */
	unsigned *held;		     /* entries in each row */
	uint64_t *pending;	     /* timers seen pending, per shard */
	unsigned keep, nshards;
};

/* Insert e into shard k's row if it is among the `keep` earliest (a row is short). */
static void dump_keep(struct dump_walk *w, unsigned k, struct dump_entry e)
{
	struct dump_entry *row = w->earliest + (size_t)k * w->keep;
	unsigned n = w->held[k], i;

	if (n == w->keep && (n == 0 || e.due_ns >= row[n - 1].due_ns))
		return;
	if (n < w->keep)
		n = ++w->held[k];
	for (i = n - 1; i > 0 && row[i - 1].due_ns > e.due_ns; i--)
		row[i] = row[i - 1];
	row[i] = e;
}

static void dump_visit(struct spoke_handle *h, uint64_t st, void *ctx)
{
	struct dump_walk *w = ctx;
	unsigned k = spoke_st_shard(st);
	struct dump_entry e;
	void *arg;

	if (!pending_word(st) || k >= w->nshards)
		return;
	e.due_ns = next_run_ns(h, st);
	if (e.due_ns == 0 || !spoke_handle_peek(h, spoke_st_gen(st), &e.fn, &arg))
		return; /* it ended while we looked */
	e.id = spoke_make_id(spoke_st_gen(st), spoke_handle_slot_id(h));
	e.kind = spoke_st_kind(st);
	w->pending[k]++;
	dump_keep(w, k, e);
}

/* "on_idle+0x10 (/usr/bin/server)", or the bare address without symbols. */
static void dump_symbol(FILE *out, spoke_fn *fn)
{
	Dl_info info;

	if (dladdr((void *)(uintptr_t)fn, &info) && info.dli_sname)
		fprintf(out, "%s+0x%zx", info.dli_sname,
			(size_t)((uintptr_t)fn - (uintptr_t)info.dli_saddr));
	else if (dladdr((void *)(uintptr_t)fn, &info) && info.dli_fname)
		fprintf(out, "%s+0x%zx", info.dli_fname,
			(size_t)((uintptr_t)fn - (uintptr_t)info.dli_fbase));
	else
		fprintf(out, "%p", (void *)(uintptr_t)fn);
}

static void dump_shard(FILE *out, struct shard *sh, const struct dump_walk *w, uint64_t now)
{
	static const char *const kind[] = {"one-shot", "periodic", "ttl"};
	struct spoke_shard_stats o;
	uint64_t ignore[SPOKE_LATE_BUCKETS] = {0};
	const struct dump_entry *row = w->earliest + (size_t)sh->index * w->keep;

	shard_stats(sh, &o, ignore);
	fprintf(out,
		"shard %u: %s, cpu %d, tick %" PRIu64 " ns, pending %" PRIu64 " (engines), %" PRIu64
		" (handles), started %" PRIu64 ", fired %" PRIu64 ", cancelled %" PRIu64
		", late p50/p99/p99.9/max %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 " us\n",
		sh->index, o.attached ? "attached" : "managed", sh->cpu, sh->tick_ns, o.pending,
		w->pending[sh->index], o.started, o.fired, o.cancelled, o.late_p50_ns / 1000,
		o.late_p99_ns / 1000, o.late_p999_ns / 1000, o.max_late_ns / 1000);
	for (unsigned i = 0; i < w->held[sh->index]; i++) {
		int64_t in = row[i].due_ns > now ? (int64_t)(row[i].due_ns - now) : 0;

		fprintf(out, "  in %" PRId64 ".%06" PRId64 " s  %-8s id %#" PRIx64 "  ",
			in / 1000000000, (in % 1000000000) / 1000,
			kind[row[i].kind < 3 ? row[i].kind : 0], row[i].id);
		dump_symbol(out, row[i].fn);
		fputc('\n', out);
	}
}

int spoke_dump(struct spoke *s, FILE *out, unsigned earliest)
{
	struct dump_walk w = {.keep = earliest};
	struct arena *a;
	uint64_t now;
	int err;

	if (!s || !out)
		return -EINVAL;
	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	w.nshards = s->nshards;
	w.held = calloc(w.nshards, sizeof(*w.held));
	w.pending = calloc(w.nshards, sizeof(*w.pending));
	w.earliest = earliest ? calloc((size_t)w.nshards * earliest, sizeof(*w.earliest)) : NULL;
	if (!w.held || !w.pending || (earliest && !w.earliest)) {
		err = -ENOMEM;
		goto out;
	}
	spoke_arenas_each(s, dump_visit, &w);
	now = spoke_clock_ns();
	fprintf(out, "spoke %s: %u shards, %u callback threads (+%u spares), at %" PRIu64 " ns\n",
		spoke_version(), s->nshards, s->nworkers,
		atomic_load_explicit(&s->spares, memory_order_relaxed), now);
	for (unsigned k = 0; k < s->nshards; k++)
		dump_shard(out, &s->shards[k], &w, now);
	if (fflush(out) != 0)
		err = -errno;
out:
	free(w.held);
	free(w.pending);
	free(w.earliest);
	return spoke_call_leave(a, err);
}
