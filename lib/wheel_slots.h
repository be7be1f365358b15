/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * wheel_slots.h - the ring of slots that `wheel`, `hashed-sorted` and
 * `hashed` share: a power-of-two array of one-pointer list heads plus an
 * occupancy bitmap, and the arithmetic that maps a slot back to time.
 *
 * Geometry: nslots = 2^k, mask = nslots - 1, a deadline d lives in slot
 * d & mask. The clock visits slot j at every tick t with t & mask == j; the
 * next visit after `now` is
 *
 *   visit(j) = now + 1 + ((j - (now + 1)) & mask)      in (now, now + nslots]
 *
 * computed in unsigned arithmetic; a sum past UINT64_MAX means "no visit
 * left before the end of time" and saturates to UINT64_MAX. No pending
 * timer can sit in such a slot (its deadline d > now, d & mask == j, is
 * itself a visit), so the saturation only guards against misuse.
 *
 * Bit j of `occupied` is set exactly when slot j is non-empty, so the next
 * occupied slot is a bit scan (bitmap.h: 8 word loads for 2^20 slots), never
 * a walk over empty ones. A timer stores no slot: all three schemes put a
 * timer with deadline d into slot d & mask, and d does not change while the
 * slot holds it. Whether an unlink empties the slot needs no load of the
 * slot either: it does iff the timer was first (its back link is the head's
 * `first`) and last (no sp_next).
 *
 * Costs: push, unlink and visit() are O(1); one revolution of
 * spoke_slots_earliest() is O(occupied slots looked at), each found by a
 * bit scan. Memory: 8 bytes per slot plus ~1/8 byte of bitmap.
 *
 * Single-threaded, like the engines that include it.
 */
#ifndef SPOKE_LIB_WHEEL_SLOTS_H
#define SPOKE_LIB_WHEEL_SLOTS_H

#include "bitmap.h"
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>

struct spoke_wheel_slots {
	struct spoke_tlist *slot;     /* nslots list heads */
	struct spoke_bitmap occupied; /* bit j set iff slot[j] is non-empty */
	uint64_t mask;		      /* nslots - 1 */
};

/* Allocate nslots (a power of two) empty slots. 0 or -ENOMEM. */
static inline int spoke_slots_init(struct spoke_wheel_slots *s, size_t nslots)
{
	int err;

	/* calloc's all-zero heads are NULL, i.e. spoke_tlist_init()ed. */
	s->slot = calloc(nslots, sizeof(*s->slot));
	if (!s->slot)
		return -ENOMEM;
	err = spoke_bitmap_init(&s->occupied, nslots);
	if (err) {
		free(s->slot);
		s->slot = NULL;
		return err;
	}
	s->mask = (uint64_t)nslots - 1;
	return 0;
}

static inline void spoke_slots_fini(struct spoke_wheel_slots *s)
{
	spoke_bitmap_fini(&s->occupied);
	free(s->slot);
	s->slot = NULL;
}

static inline size_t spoke_slots_index(const struct spoke_wheel_slots *s, uint64_t tick)
{
	return (size_t)(tick & s->mask);
}

/* Push t at the head of slot j. Returns true if the slot was empty before. */
static inline bool spoke_slots_push(struct spoke_wheel_slots *s, size_t j, struct spoke_timer *t)
{
	bool was_empty = spoke_tlist_empty(&s->slot[j]);

	spoke_tlist_push(&s->slot[j], t);
	if (was_empty)
		spoke_bitmap_set(&s->occupied, j);
	return was_empty;
}

/* Take t out of its slot (d & mask); clear the slot's bit if that emptied it. */
static inline void spoke_slots_unlink(struct spoke_wheel_slots *s, struct spoke_timer *t)
{
	size_t j = spoke_slots_index(s, t->sp_deadline);
	bool emptied = (t->sp_link == &s->slot[j].first) & (t->sp_next == NULL);

	spoke_tlist_del(t);
	if (emptied)
		spoke_bitmap_clear(&s->occupied, j);
}

/* Move t from its slot onto e's due list (the scheme side of collect()). */
static inline void spoke_slots_to_due(struct spoke_wheel_slots *s, struct spoke_engine *e,
				      struct spoke_timer *t)
{
	spoke_slots_unlink(s, t);
	spoke_due_push(e, t);
}

/* The tick of the next visit of slot j after now (see above), saturated. */
static inline uint64_t spoke_slots_visit_tick(const struct spoke_wheel_slots *s, uint64_t now,
					      size_t j)
{
	uint64_t first_tick, ahead_ticks, tick;

	if (now == UINT64_MAX)
		return UINT64_MAX;
	first_tick = now + 1;
	ahead_ticks = ((uint64_t)j - first_tick) & s->mask;
	if (__builtin_add_overflow(first_tick, ahead_ticks, &tick))
		return UINT64_MAX;
	return tick;
}

/* The first occupied slot visited after now, or SPOKE_BITMAP_NONE. */
static inline size_t spoke_slots_first_after(const struct spoke_wheel_slots *s, uint64_t now)
{
	return spoke_bitmap_next_circular(&s->occupied, spoke_slots_index(s, now + 1));
}

/*
 * The occupied slot visited after j in the revolution that starts at
 * now + 1, or SPOKE_BITMAP_NONE once the scan would come round again.
 */
static inline size_t spoke_slots_following(const struct spoke_wheel_slots *s, uint64_t now,
					   size_t j)
{
	size_t start = spoke_slots_index(s, now + 1);
	size_t n = spoke_bitmap_next_circular(&s->occupied, spoke_slots_index(s, (uint64_t)j + 1));

	if (n == SPOKE_BITMAP_NONE)
		return n;
	/* Positions in the revolution: a scan that did not move on has wrapped. */
	if (((n - start) & s->mask) <= ((j - start) & s->mask))
		return SPOKE_BITMAP_NONE;
	return n;
}

/* A lower bound of the deadlines in occupied slot j (the scheme knows how). */
typedef uint64_t spoke_slot_bound_fn(const void *ctx, size_t j);

/*
 * Earliest tick > now at which a hashed wheel may have a timer to fire:
 * never later than the earliest deadline, UINT64_MAX when empty.
 *
 * Walk the occupied slots in visit order for at most one revolution. A slot
 * whose bound is <= its visit tick may fire at that visit, and every slot
 * visited before it holds only deadlines > its own visit, so >= that visit
 * + nslots: stop and return the visit. Otherwise each slot's bound (an
 * absolute deadline a whole number of revolutions later) is a candidate and
 * the answer is their minimum - so a lone timer 2^40 ticks away costs one
 * revolution of bit scans, not 2^40 / nslots. The walk also stops early as
 * soon as the best candidate is no later than the next visit.
 */
static inline uint64_t spoke_slots_earliest(const struct spoke_wheel_slots *s, uint64_t now,
					    spoke_slot_bound_fn *bound, const void *ctx)
{
	uint64_t best_tick = UINT64_MAX;

	for (size_t j = spoke_slots_first_after(s, now); j != SPOKE_BITMAP_NONE;
	     j = spoke_slots_following(s, now, j)) {
		uint64_t visit_tick = spoke_slots_visit_tick(s, now, j);
		uint64_t bound_tick;

		if (best_tick <= visit_tick)
			break;
		bound_tick = bound(ctx, j);
		if (bound_tick <= visit_tick)
			return visit_tick;
		if (bound_tick < best_tick)
			best_tick = bound_tick;
	}
	return best_tick;
}

/*
 * The answer of spoke_slots_earliest(), kept between calls so that advance
 * tick by tick does not repeat the walk. While `known`, `tick` is never later
 * than the earliest deadline: an insert lowers it, removing the timer it
 * names or collecting forgets it, and any other remove leaves it a valid,
 * if early, bound. It is used only while it is still ahead of the clock:
 * when the last timer is stopped the engine runs the clock on without a
 * collect, possibly past a bound a stop left behind.
 */
struct spoke_next_cache {
	uint64_t tick;
	bool known;
};

static inline void spoke_next_cache_insert(struct spoke_next_cache *c, uint64_t deadline)
{
	if (c->known && deadline < c->tick)
		c->tick = deadline;
}

static inline void spoke_next_cache_remove(struct spoke_next_cache *c, uint64_t deadline)
{
	if (deadline == c->tick)
		c->known = false;
}

static inline void spoke_next_cache_forget(struct spoke_next_cache *c)
{
	c->known = false;
}

/* next_event() of a hashed wheel: the cached answer, or a fresh walk. */
static inline uint64_t spoke_slots_earliest_cached(const struct spoke_wheel_slots *s,
						   struct spoke_next_cache *c, uint64_t now,
						   spoke_slot_bound_fn *bound, const void *ctx)
{
	if (!c->known || c->tick <= now) {
		c->tick = spoke_slots_earliest(s, now, bound, ctx);
		c->known = true;
	}
	return c->tick;
}

/*
 * A hashed wheel, what `hashed` and `hashed-sorted` share: table_size
 * buckets of the ring above (a power of two, at most 2^24, default 4096 =
 * 32 KiB of list heads), a timer with deadline d in bucket d & (table_size
 * - 1), and the cached answer of its next_event().
 */
#define SPOKE_HASHED_DEFAULT_TABLE_SIZE 4096u
#define SPOKE_HASHED_LIMIT_TABLE_SIZE	((size_t)1 << 24)

struct spoke_hashed_wheel {
	struct spoke_wheel_slots buckets;
	struct spoke_next_cache next;
};

/* Allocate table_size buckets (0: the default). 0, -EINVAL or -ENOMEM. */
static inline int spoke_hashed_init(struct spoke_hashed_wheel *w, size_t table_size)
{
	if (table_size == 0)
		table_size = SPOKE_HASHED_DEFAULT_TABLE_SIZE;
	if (table_size > SPOKE_HASHED_LIMIT_TABLE_SIZE || (table_size & (table_size - 1)) != 0)
		return -EINVAL;
	return spoke_slots_init(&w->buckets, table_size);
}

static inline void spoke_hashed_fini(struct spoke_hashed_wheel *w)
{
	spoke_slots_fini(&w->buckets);
}

/* remove(): take t out of its bucket, and forget the answer if it was t's deadline. */
static inline void spoke_hashed_remove(struct spoke_hashed_wheel *w, struct spoke_timer *t)
{
	spoke_slots_unlink(&w->buckets, t);
	spoke_next_cache_remove(&w->next, t->sp_deadline);
}

/* next_event(): the cached answer, or a fresh walk with the scheme's bucket bound. */
static inline uint64_t spoke_hashed_next_event(struct spoke_hashed_wheel *w, uint64_t now,
					       spoke_slot_bound_fn *bound, const void *ctx)
{
	return spoke_slots_earliest_cached(&w->buckets, &w->next, now, bound, ctx);
}

#endif /* SPOKE_LIB_WHEEL_SLOTS_H */
