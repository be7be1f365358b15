/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_hierarchical.h - the hot half of engine_hierarchical.c (scheme 7):
 * its engine struct, the insert and remove of one timer, and the steps of
 * its advance, inline, so that engine.c's start, stop and advance reach
 * them without a call through the ops table (the most common scheme pays
 * for no indirection; see docs/engines.md, "hierarchical against
 * timeout.c").
 *
 * Placement in one table load: for the highest bit b in which a deadline
 * and `now` differ, place_of_bit[b] holds the shift of the level's digit
 * (level * B, bits 0..7; the mask to 6 bits costs nothing on x86, whose
 * shifts apply it themselves) and the level's first slot index (level <<
 * B, bits 8..31), or
 * HIER_OVERFLOW when b is above the top level. The slot is then
 * base | ((d >> shift) & mask): no division, no multiply, one clz.
 *
 * The occupancy bitmap is an upper bound: a clear bit means an empty slot,
 * a set bit a slot that holds timers or that a stop emptied since. Stop
 * only unlinks (a timer does not know its slot; see the top of the .c), and
 * the first scan that meets such a stale bit clears it
 * (spoke_hier_first_slot). Each stop leaves at most one stale bit and each
 * is cleared at most once, so the scans stay O(1) amortized, and a slot
 * that is emptied and filled again before the clock reaches it (a timeout
 * cancelled, another armed) costs no bitmap work at all.
 */
#ifndef SPOKE_LIB_ENGINE_HIERARCHICAL_H
#define SPOKE_LIB_ENGINE_HIERARCHICAL_H

#include "bitmap.h"
#include "engine_impl.h"

#define HIER_OVERFLOW	UINT32_MAX
#define HIER_SHIFT_MASK 63u
#define HIER_BASE_SHIFT 8
#define HIER_MAX_LEVELS 64 /* with B = 1 */

struct hier_engine {
	struct spoke_engine base;
	uint64_t slot_mask;	   /* 2^B - 1 */
	struct spoke_tlist *slots; /* levels * 2^B heads */
	uint64_t *occupied0;	   /* occupied.word[0], one bit per slot */
	uint64_t overflow_visit;   /* tick to re-examine overflow (<= the true one) */
	struct spoke_tlist overflow;
	struct spoke_tlist run;	  /* level-1 slots being fired in order, see below */
	uint64_t *run_word;	  /* the bitmap word of the run's slots, */
	uint64_t run_mask;	  /* and the bits of their range */
	const uint64_t *low_word; /* the bitmap word whose low_mask bits cover level 0 */
	uint64_t low_mask;
	unsigned bits;		   /* B */
	unsigned levels;	   /* levels actually kept: at most ceil(64 / B) */
	uint32_t place_of_bit[64]; /* highest differing bit -> base << 8 | shift */
	/* level k -> the bits of a tick above digit k (0 if there are none) */
	uint64_t above[HIER_MAX_LEVELS];
	struct spoke_bitmap occupied; /* an upper bound, see the top */
};

static inline struct hier_engine *spoke_to_hier(struct spoke_engine *e)
{
	return (struct hier_engine *)e;
}

/*
 * Out of line, the rare halves of an insert: a deadline beyond the top
 * level (levels * B < 64 only), and the summary bits of a bitmap word that
 * was zero. Both return 0, the value of the start whose fast path ends in
 * them, so that the call is a jump and that path needs no stack frame.
 */
__attribute__((cold)) int spoke_hier_overflow_push(struct hier_engine *h, struct spoke_timer *t);
__attribute__((cold)) int spoke_hier_mark_word(struct hier_engine *h, size_t word);
/* Out of line: scan on past the stale bits from `slot` (see the top). */
size_t spoke_hier_skip_stale(struct hier_engine *h, size_t slot);
/* Out of line: place each timer of `slot` again relative to now. */
void spoke_hier_cascade(struct hier_engine *h, size_t slot);
/* Out of line: put the overflow timers that now fit on the wheels. */
void spoke_hier_visit_overflow(struct hier_engine *h);

/* The place_of_bit entry for x = deadline ^ now, which is not 0. */
static inline uint32_t spoke_hier_place_of(const struct hier_engine *h, uint64_t x)
{
	return h->place_of_bit[63 - (size_t)__builtin_clzll(x)];
}

/*
 * Push t on the slot that p (not HIER_OVERFLOW) gives its deadline, and
 * set the slot's bit unconditionally (setting a set bit is harmless: "was
 * the slot empty" is a coin flip). Returns the bit's word if that was zero,
 * whose summary bits are then the caller's to set, or SPOKE_BITMAP_NONE.
 */
static inline size_t spoke_hier_push(struct hier_engine *h, struct spoke_timer *t, uint32_t p)
{
	size_t slot =
		(p >> HIER_BASE_SHIFT) | ((t->sp_deadline >> (p & HIER_SHIFT_MASK)) & h->slot_mask);
	uint64_t *w, was;

	spoke_tlist_push(&h->slots[slot], t);
	w = &h->occupied0[slot >> 6];
	was = *w;
	*w = was | (1ull << (slot & 63));
	return was == 0 ? slot >> 6 : SPOKE_BITMAP_NONE;
}

/*
 * Put t on its slot, given x = deadline ^ now, which is not 0; returns 0
 * (see above): the summary bits, when the word was zero, out of line.
 */
static inline int spoke_hier_place_x(struct hier_engine *h, struct spoke_timer *t, uint64_t x)
{
	uint32_t p = spoke_hier_place_of(h, x);
	size_t word;

	if (__builtin_expect(p == HIER_OVERFLOW, 0))
		return spoke_hier_overflow_push(h, t);
	word = spoke_hier_push(h, t, p);
	if (__builtin_expect(word != SPOKE_BITMAP_NONE, 0))
		return spoke_hier_mark_word(h, word);
	return 0;
}

/* insert(): t->sp_deadline > now, so the deadline differs from now. */
static inline void spoke_hier_insert(struct hier_engine *h, struct spoke_timer *t)
{
	(void)spoke_hier_place_x(h, t, t->sp_deadline ^ h->base.now);
}

/*
 * remove(): unlink t from its slot or the overflow list. The slot's bit
 * stays set if this empties it (see the top), and overflow_visit stays as
 * it is if t was the earliest or the last overflow timer: stale-low, one
 * vain visit at worst. So this is exactly how a timer leaves the due list.
 */
static inline void spoke_hier_remove(struct hier_engine *h, struct spoke_timer *t)
{
	(void)h;
	spoke_tlist_del(t);
}

/*
 * The first slot that holds timers, or SPOKE_BITMAP_NONE: the earliest
 * event, as the lowest level comes first and a level's slots in tick order
 * (the top of the .c). Level 0 holds nothing at or below now's digit, so
 * the scan starts there; stale bits on the way are cleared.
 */
static inline size_t spoke_hier_first_slot(struct hier_engine *h)
{
	size_t slot = spoke_bitmap_next(&h->occupied, h->base.now & h->slot_mask);

	if (__builtin_expect(slot != SPOKE_BITMAP_NONE && spoke_tlist_empty(&h->slots[slot]), 0))
		slot = spoke_hier_skip_stale(h, slot);
	return slot;
}

/* The first tick of a slot: now's digits above its level, its digit, zeros. */
static inline uint64_t spoke_hier_slot_tick(const struct hier_engine *h, size_t slot)
{
	unsigned k = (unsigned)(slot >> h->bits);

	return (h->base.now & h->above[k]) | (uint64_t)(slot & h->slot_mask) << (k * h->bits);
}

/*
 * Whether every timer of a non-empty slot falls due at the deadline of its
 * first: a level-0 slot (one tick), or a slot of one timer. Such a slot,
 * when it is the first one, is fired whole at that deadline with no
 * cascade: nothing else is due before it (levels below are empty, later
 * slots and levels start after it).
 */
static inline bool spoke_hier_slot_whole(const struct hier_engine *h, size_t slot)
{
	/* one branch, not two: which of the two it is is a coin flip */
	return (slot <= h->slot_mask) | (h->slots[slot].first->sp_next == NULL);
}

/*
 * Move a whole slot (above) onto dst, which is empty (the engine's firing
 * list: collected and fired at once, as nothing else is due at its tick).
 */
static inline void spoke_hier_take_whole(struct hier_engine *h, size_t slot,
					 struct spoke_tlist *dst)
{
	spoke_tlist_move(dst, &h->slots[slot]);
	spoke_bitmap_clear(&h->occupied, slot);
}

/*
 * Sorted runs. When the first slot is a level-1 slot whose whole span (2^B
 * ticks from its first tick) lies within the advance, it is not cascaded,
 * and neither are the next occupied level-1 slots of its bitmap word that
 * also lie within it: each one's timers (at most HIER_RUN_MAX; a slot of
 * more ends the run, and is cascaded when its turn comes) are sorted by
 * deadline and appended to h->run, slot after slot, and fire_run (engine.c)
 * fires them from there in order, with no level-0 placement, bit or scan
 * per timer, and one bitmap store for all the slots.
 *
 * While the run lasts it holds the earliest timers of the wheels but for
 * what an expiry function starts (or re-arms) meanwhile: a timer due within
 * the run's slots lands on level 0 or on a level-1 slot of the run's range
 * (it shares now's digits above 1). So before each member fire_run looks at
 * level 0 and at the range's bits (spoke_hier_run_alone, two words), and
 * when either is set steps the first slot first if its first tick comes no
 * later than the member: the clock must not pass a slot's first tick with
 * the slot in place, even one whose lone timer is due after the member (it
 * is cascaded at that tick). A stale bit there costs one scan, which clears
 * it. Every other slot and level comes after the range, and the overflow
 * list after every level.
 *
 * A member is a pending timer on an ordinary list: a stop or re-arm unlinks
 * it like any other (remove() is the unlink, whichever list holds it), and
 * a member due at the tick of the one firing (a tie) waits on the run with
 * its deadline equal to now. A run never outlives its advance (its slots
 * lie within the target); next() answers its first member when that is
 * earliest.
 */
#define HIER_RUN_INDEX_BITS 4
#define HIER_RUN_MAX	    (1u << HIER_RUN_INDEX_BITS)

/*
 * With h->run empty and the clock at the first tick of level-1 slot `slot`,
 * the first slot, whose span lies within target: fill h->run (true), or,
 * if that slot holds more than HIER_RUN_MAX timers, do nothing (false).
 */
bool spoke_hier_take_run(struct hier_engine *h, size_t slot, uint64_t target);

/* Whether the first slot, not whole, with first tick ev may start a run. */
static inline bool spoke_hier_run_fits(const struct hier_engine *h, size_t slot, uint64_t ev,
				       uint64_t target)
{
	/* ev is a multiple of 2^B: the span's last tick does not wrap */
	return (slot >> h->bits) == 1 && ev + h->slot_mask <= target;
}

/* Whether nothing on the wheels may come before the run's next member (above). */
static inline bool spoke_hier_run_alone(const struct hier_engine *h)
{
	return ((*h->low_word & h->low_mask) | (*h->run_word & h->run_mask)) == 0;
}

#endif /* SPOKE_LIB_ENGINE_HIERARCHICAL_H */
