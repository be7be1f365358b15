/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_hierarchical.h - the hot half of engine_hierarchical.c (scheme 7):
 * its engine struct and the insert and remove of one timer, inline, so that
 * engine.c's start and stop reach them without a call through the ops
 * table (the most common scheme pays for no indirection; see
 * docs/engines.md, "hierarchical against timeout.c").
 *
 * Placement in one table load: for the highest bit b in which a deadline
 * and `now` differ, place_of_bit[b] holds the level's first slot index
 * (level << B, bits 0..23) and the shift of its digit (level * B, bits
 * 24..31), or HIER_OVERFLOW when b is above the top level. The slot is then
 * base | ((d >> shift) & mask): no division, no multiply, one clz.
 */
#ifndef SPOKE_LIB_ENGINE_HIERARCHICAL_H
#define SPOKE_LIB_ENGINE_HIERARCHICAL_H

#include "bitmap.h"
#include "engine_impl.h"

#define HIER_OVERFLOW	 UINT32_MAX
#define HIER_BASE_MASK	 0xffffffu
#define HIER_SHIFT_SHIFT 24

struct hier_engine {
	struct spoke_engine base;
	uint64_t slot_mask;	   /* 2^B - 1 */
	struct spoke_tlist *slots; /* levels * 2^B heads */
	size_t slots_bytes;	   /* their size: a back link below is a slot head */
	uint64_t *occupied0;	   /* occupied.word[0], one bit per slot */
	uint64_t overflow_visit;   /* tick to re-examine overflow (<= the true one) */
	struct spoke_tlist overflow;
	unsigned bits;		   /* B */
	unsigned levels;	   /* levels actually kept: at most ceil(64 / B) */
	uint32_t place_of_bit[64]; /* highest differing bit -> base | shift << 24 */
	struct spoke_bitmap occupied;
};

static inline struct hier_engine *spoke_to_hier(struct spoke_engine *e)
{
	return (struct hier_engine *)e;
}

/* Out of line: a deadline beyond the top level (levels * B < 64 only). */
void spoke_hier_overflow_push(struct hier_engine *h, struct spoke_timer *t);

/*
 * Put t on its slot, given x = deadline ^ now, which is not 0. The bitmap
 * bit is set unconditionally (setting a set bit is harmless: "was the slot
 * empty" is a coin flip); its summary levels only when the word was zero.
 */
static inline void spoke_hier_place_x(struct hier_engine *h, struct spoke_timer *t, uint64_t x)
{
	uint32_t p = h->place_of_bit[63 - __builtin_clzll(x)];
	size_t slot;
	uint64_t *w, was;

	if (__builtin_expect(p == HIER_OVERFLOW, 0)) {
		spoke_hier_overflow_push(h, t);
		return;
	}
	slot = (p & HIER_BASE_MASK) | ((t->sp_deadline >> (p >> HIER_SHIFT_SHIFT)) & h->slot_mask);
	w = &h->occupied0[slot >> 6];
	was = *w;
	*w = was | (1ull << (slot & 63));
	if (__builtin_expect(was == 0, 0))
		spoke_bitmap_set_from(&h->occupied, 1, slot >> 6);
	spoke_tlist_push(&h->slots[slot], t);
}

/* insert(): t->sp_deadline > now, so the deadline differs from now. */
static inline void spoke_hier_insert(struct hier_engine *h, struct spoke_timer *t)
{
	spoke_hier_place_x(h, t, t->sp_deadline ^ h->base.now);
}

/*
 * remove(). A timer does not store its slot: where it was placed depended
 * on `now` back then. The slot matters only when a stop empties it, and then
 * the timer was the first of its list, so its back link is the address of
 * that slot's head: (back link - slots) / 8 is the slot. A back link outside
 * the slot array (a previous timer's sp_next, so the slot keeps that timer,
 * or the overflow head) leaves the bitmap alone: slot 0 with `emptied`
 * false (no timer is ever in a slot 0: its digit on its level is above
 * now's), which clear_if leaves alone. One subtraction and one compare, and
 * no branch on which case it is.
 */
static inline void spoke_hier_remove(struct hier_engine *h, struct spoke_timer *t)
{
	uintptr_t offset = (uintptr_t)t->sp_link - (uintptr_t)h->slots;
	bool first = offset < h->slots_bytes;
	bool emptied = first & (t->sp_next == NULL);
	size_t slot = (size_t)(offset / sizeof(*h->slots)) & -(size_t)first;
	uint64_t *w = &h->occupied0[slot >> 6];
	uint64_t left;

	spoke_tlist_del(t);
	left = *w & ~((uint64_t)emptied << (slot & 63));
	*w = left;
	if (__builtin_expect((left | (uint64_t)!emptied) == 0, 0))
		spoke_bitmap_clear_from(&h->occupied, 1, slot >> 6);
	/*
	 * An empty overflow list has overflow_visit UINT64_MAX (this and
	 * visit_overflow keep it so), so this acts only when t was the last
	 * overflow timer, and is one predictable test when nothing overflows.
	 * A stop that leaves overflow timers may leave overflow_visit early:
	 * one vain visit at worst.
	 */
	if (__builtin_expect(h->overflow_visit != UINT64_MAX, 0) && spoke_tlist_empty(&h->overflow))
		h->overflow_visit = UINT64_MAX;
}

#endif /* SPOKE_LIB_ENGINE_HIERARCHICAL_H */
