/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_hashed.c - scheme 6 of Varghese & Lauck: a hashed timing wheel with
 * an UNSORTED list per bucket.
 *
 * table_size buckets (a power of two, default 4096 = 32 KiB of list heads
 * plus 32 KiB of bounds); a timer with deadline d goes into bucket
 * d & (table_size - 1), pushed at the head: start and stop are O(1). The
 * paper stores a round counter per timer and decrements it on every visit;
 * here the timer keeps its absolute deadline, which stands for that counter
 * (rounds = (deadline - now) / table_size) without being touched per visit.
 *
 * Per bucket j we also keep bucket_min[j], a lower bound of its deadlines:
 * set when the bucket fills, lowered by an insert, exact after every visit
 * of the bucket, and never behind the bucket's next visit (the clock never
 * passes a bound without visiting its bucket). A stop of the minimum leaves
 * it stale-low, which costs at most one vain visit (the bucket is rescanned
 * there and the bound made exact), never a late or missed timer.
 *
 * next_event() walks the occupied buckets (bit scans, wheel_slots.h) in
 * visit order from now + 1 for at most one revolution: the first bucket
 * whose bound is its visit tick holds the earliest deadline; if none does,
 * the answer is the smallest bound seen - whole revolutions in which nothing
 * can fire are skipped, so a lone timer 2^40 ticks ahead costs one walk, not
 * 2^40 / table_size steps. The answer is cached until an insert lowers it or
 * a stop/collect forgets it, so advance(1) tick by tick is O(1) per empty
 * tick. collect(now) is the paper's per-tick work: scan bucket now & mask,
 * O(bucket length), move the timers due now to the due list (ties fire in
 * start order) and make the bucket's bound exact.
 *
 * Costs: start O(1), stop O(1), a visit O(bucket length) (n / table_size on
 * average), a fresh next_event() O(occupied buckets up to the next event,
 * one revolution at most) - never more buckets than the paper's tick-by-tick
 * visits over the same stretch. The worst case is many occupied buckets
 * whose timers all lie revolutions ahead: each event then pays one full
 * walk (measured: 4096 buckets, 20000 timers 2^30..2^36 ticks ahead, about
 * 35 us per event).
 */
#include "wheel_slots.h"

#include <errno.h>

struct hashed_engine {
	struct spoke_engine base;
	struct spoke_hashed_wheel w;
	uint64_t *bucket_min; /* per occupied bucket: <= each of its deadlines */
};

static struct hashed_engine *to_hashed(struct spoke_engine *e)
{
	return (struct hashed_engine *)e;
}

static int hashed_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct hashed_engine *h = to_hashed(e);
	int err = spoke_hashed_init(&h->w, p->table_size);

	if (err)
		return err;
	h->bucket_min = malloc((h->w.buckets.mask + 1) * sizeof(*h->bucket_min));
	if (!h->bucket_min) {
		spoke_hashed_fini(&h->w);
		return -ENOMEM;
	}
	return 0;
}

static void hashed_fini(struct spoke_engine *e)
{
	struct hashed_engine *h = to_hashed(e);

	spoke_hashed_fini(&h->w);
	free(h->bucket_min);
	h->bucket_min = NULL;
}

static void hashed_insert(struct spoke_engine *e, struct spoke_timer *t)
{
	struct hashed_engine *h = to_hashed(e);
	size_t j = spoke_slots_index(&h->w.buckets, t->sp_deadline);

	if (spoke_slots_push(&h->w.buckets, j, t) || t->sp_deadline < h->bucket_min[j])
		h->bucket_min[j] = t->sp_deadline;
	spoke_next_cache_insert(&h->w.next, t->sp_deadline);
}

/* bucket_min may go stale-low here: see the top of the file. */
static void hashed_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	spoke_hashed_remove(&to_hashed(e)->w, t);
}

static uint64_t bucket_bound(const void *ctx, size_t j)
{
	return ((const struct hashed_engine *)ctx)->bucket_min[j];
}

static uint64_t hashed_next_event(struct spoke_engine *e)
{
	struct hashed_engine *h = to_hashed(e);

	return spoke_hashed_next_event(&h->w, e->now, bucket_bound, h);
}

static void hashed_collect(struct spoke_engine *e)
{
	struct hashed_engine *h = to_hashed(e);
	size_t j = spoke_slots_index(&h->w.buckets, e->now);
	struct spoke_timer *t = h->w.buckets.slot[j].first;
	uint64_t min_deadline = UINT64_MAX;

	/* Newest first, so the due list ends oldest first. */
	while (t) {
		struct spoke_timer *next = t->sp_next;

		if (t->sp_deadline <= e->now)
			spoke_slots_to_due(&h->w.buckets, e, t);
		else if (t->sp_deadline < min_deadline)
			min_deadline = t->sp_deadline;
		t = next;
	}
	h->bucket_min[j] = min_deadline;
	spoke_next_cache_forget(&h->w.next);
}

const struct spoke_engine_ops spoke_hashed_ops = {
	.name = "hashed",
	.size = sizeof(struct hashed_engine),
	.init = hashed_init,
	.fini = hashed_fini,
	.insert = hashed_insert,
	.remove = hashed_remove,
	.next_event = hashed_next_event,
	.collect = hashed_collect,
};
