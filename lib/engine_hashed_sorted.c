/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_hashed_sorted.c - scheme 5 of Varghese & Lauck: a hashed timing
 * wheel with a list per bucket SORTED by deadline.
 *
 * table_size buckets (a power of two, default 4096 = 32 KiB of list heads);
 * a timer with absolute deadline d goes into bucket d & (table_size - 1), at
 * its place in deadline order (after the timers with the same deadline, so
 * ties fire in start order). Start walks the bucket: O(bucket length),
 * n / table_size on average, as the paper says; stop is O(1) (unlink, clear
 * the bucket's bitmap bit if it emptied).
 *
 * A bucket's head is its exact minimum. next_event() walks the occupied
 * buckets (bit scans, wheel_slots.h) in visit order from now + 1 for at most
 * one revolution: the first bucket whose head is due at that visit holds the
 * earliest deadline; if none is, the answer is the smallest head seen, so
 * whole revolutions in which nothing can fire are skipped (a lone timer 2^40
 * ticks ahead costs one walk, not 2^40 / table_size steps). The answer is
 * cached until an insert lowers it or a stop/collect forgets it, so advance(1)
 * tick by tick is O(1) per empty tick. collect(now) is the paper's per-tick
 * work made O(1 + timers fired): pop the heads of bucket now & mask while
 * they are due.
 *
 * Costs: start O(bucket length), stop O(1), a visit O(1 + fired), a fresh
 * next_event() O(occupied buckets up to the next event, one revolution at
 * most; see engine_hashed.c for the worst case).
 */
#include "wheel_slots.h"

#include <errno.h>

struct hashed_sorted_engine {
	struct spoke_engine base;
	struct spoke_hashed_wheel w;
};

static struct hashed_sorted_engine *to_hashed_sorted(struct spoke_engine *e)
{
	return (struct hashed_sorted_engine *)e;
}

static int hashed_sorted_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	return spoke_hashed_init(&to_hashed_sorted(e)->w, p->table_size);
}

static void hashed_sorted_fini(struct spoke_engine *e)
{
	spoke_hashed_fini(&to_hashed_sorted(e)->w);
}

/* The last timer of the bucket list with a deadline <= d, NULL if none. */
static struct spoke_timer *last_not_after(const struct spoke_tlist *bucket, uint64_t d)
{
	struct spoke_timer *prev = NULL;

	for (struct spoke_timer *t = bucket->first; t && t->sp_deadline <= d; t = t->sp_next)
		prev = t;
	return prev;
}

static void hashed_sorted_insert(struct spoke_engine *e, struct spoke_timer *t)
{
	struct hashed_sorted_engine *h = to_hashed_sorted(e);
	size_t j = spoke_slots_index(&h->w.buckets, t->sp_deadline);
	struct spoke_timer *prev = last_not_after(&h->w.buckets.slot[j], t->sp_deadline);

	if (prev)
		spoke_tlist_add_after(prev, t);
	else
		spoke_slots_push(&h->w.buckets, j, t);
	spoke_next_cache_insert(&h->w.next, t->sp_deadline);
}

static void hashed_sorted_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	spoke_hashed_remove(&to_hashed_sorted(e)->w, t);
}

static uint64_t bucket_head_deadline(const void *ctx, size_t j)
{
	return ((const struct hashed_sorted_engine *)ctx)->w.buckets.slot[j].first->sp_deadline;
}

static uint64_t hashed_sorted_next_event(struct spoke_engine *e)
{
	struct hashed_sorted_engine *h = to_hashed_sorted(e);

	return spoke_hashed_next_event(&h->w, e->now, bucket_head_deadline, h);
}

static void hashed_sorted_collect(struct spoke_engine *e)
{
	struct hashed_sorted_engine *h = to_hashed_sorted(e);
	struct spoke_tlist *bucket = &h->w.buckets.slot[spoke_slots_index(&h->w.buckets, e->now)];
	struct spoke_tlist run;
	struct spoke_timer *t;

	/*
	 * Pop the due run (oldest first) onto a local stack, then push it onto
	 * the due list from there: two reversals, so ties fire in start order.
	 */
	spoke_tlist_init(&run);
	while ((t = bucket->first) != NULL && t->sp_deadline <= e->now) {
		spoke_slots_unlink(&h->w.buckets, t);
		spoke_tlist_push(&run, t);
	}
	while ((t = spoke_tlist_pop(&run)) != NULL)
		spoke_due_push(e, t);
	spoke_next_cache_forget(&h->w.next);
}

const struct spoke_engine_ops spoke_hashed_sorted_ops = {
	.name = "hashed-sorted",
	.size = sizeof(struct hashed_sorted_engine),
	.init = hashed_sorted_init,
	.fini = hashed_sorted_fini,
	.insert = hashed_sorted_insert,
	.remove = hashed_sorted_remove,
	.next_event = hashed_sorted_next_event,
	.collect = hashed_sorted_collect,
};
