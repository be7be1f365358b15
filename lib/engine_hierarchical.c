/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_hierarchical.c - scheme 7 of Varghese & Lauck: a hierarchy of
 * timing wheels, tickless, exact, for any 64-bit deadline.
 *
 * Layout. A deadline d is read as a number in base 2^B (B = level_bits,
 * default 10): digit k is bits [kB, kB+B). Level k is a wheel of 2^B slots
 * whose slot j holds timers with digit k of d equal to j. With the default
 * B = 10 and 7 levels (70 bits, so every 64-bit deadline has a level):
 *
 *   level  digit bits  one slot spans   the level spans     (1 tick = 1 ms)
 *     0      0..9        1 tick          1024 ticks          ~1 s
 *     1     10..19       1024 ticks      2^20 ticks          ~17 min
 *     2     20..29       2^20 ticks      2^30 ticks          ~12 days
 *     ...
 *     6     60..63       2^60 ticks      2^64 ticks (4 useful bits)
 *
 * Placement. A timer goes to the level of the highest digit in which d and
 * `now` differ: k = (63 - clz(d ^ now)) / B, slot = digit k of d. So d and
 * now agree on every digit above k, and digit k of d is greater than that of
 * now. Invariant: every timer on level k shares now's digits above k and
 * sits in a slot beyond now's digit k.
 *
 * Why nothing fires early, and nothing late. The clock reaches slot j of
 * level k at the tick T = (now's digits above k, j, zeros below), the first
 * tick whose digit k is j; T <= d because d has the same upper digits and j
 * with anything below. At T the slot is cascaded: each timer is placed
 * again relative to T (a lower level, since it now shares digit k as well),
 * or, if d == T, put on the due list. Level 0 slots hold timers whose
 * deadline is exactly their slot's tick. So a timer fires at d exactly,
 * after moving down at most once per level; with B = 10, a delay below 2^20
 * moves at most once (unless it crosses a 2^20 boundary: then twice).
 *
 * Tickless. By the invariant, all timers of level k lie before the next
 * boundary of level k+1, so the lowest non-empty level always holds the
 * earliest event, and within a level the lowest slot. Slot indices are
 * level * 2^B + j in one occupancy bitmap, so the next event is the first
 * set bit of that bitmap at or after now's level-0 digit: one scan, never
 * a walk over empty slots, and advance(next()) steps at most once per level
 * per deadline. When that first slot is whole (a level-0 slot, or one
 * timer alone: hier_slot_whole()) its deadline is the next event itself,
 * and it is fired with no cascade.
 *
 * Fewer levels than 64 bits need (levels * B < 64): a timer beyond the top
 * level waits on an unordered overflow list, keeping its absolute deadline.
 * The overflow list is re-examined when the clock enters the top-level span
 * that holds the earliest of them (cached, stale-low after a stop: one vain
 * visit at worst), and its timers that now fit are placed on the wheels.
 *
 * Memory: levels * 2^B list heads of 8 bytes (56 KiB by default), the
 * bitmap (1/64 of that), and nothing per timer beyond struct spoke_timer.
 * Fields used: sp_next/sp_link (slot list, tlist.h), sp_deadline. A timer
 * does not store its slot (where it was placed depended on `now` back
 * then), so a stop only unlinks it and leaves the slot's bit to the next
 * scan:
 *
 * The occupancy bitmap is an upper bound: a clear bit means an empty slot,
 * a set bit a slot that holds timers or that a stop emptied since. The
 * first scan that meets such a stale bit clears it (hier_first_slot). Each
 * stop leaves at most one stale bit and each is cleared at most once, so
 * the scans stay O(1) amortized, and a slot that is emptied and filled
 * again before the clock reaches it (a timeout cancelled, another armed)
 * costs no bitmap work at all.
 *
 * Placement in one table load: for the highest bit b in which a deadline
 * and `now` differ, place_of_bit[b] holds the shift of the level's digit
 * (level * B, bits 0..7; the mask to 6 bits costs nothing on x86, whose
 * shifts apply it themselves) and the level's first slot index (level <<
 * B, bits 8..31), or HIER_OVERFLOW when b is above the top level. The slot
 * is then base | ((d >> shift) & mask): no division, no multiply, one clz.
 *
 * The hot paths (start, stop, one step of the advance) are small static
 * inline helpers with no call on their common path, so that they need no
 * stack frame; the rare halves are out of line (noinline, cold).
 */
#include "bitmap.h"
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LEVEL_BITS 10
#define MAX_LEVEL_BITS	   16

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

static struct hier_engine *to_hier(struct spoke_engine *e)
{
	return (struct hier_engine *)e;
}

/* Bits covered by levels 0..k-1: the shift of level k's digit. */
static unsigned level_shift(const struct hier_engine *h, unsigned k)
{
	return k * h->bits;
}

/* now with every digit below level k cleared (k * B may reach 64). */
static uint64_t clear_below(const struct hier_engine *h, uint64_t now, unsigned k)
{
	unsigned s = level_shift(h, k);

	return s >= 64 ? 0 : now & ~((1ull << s) - 1);
}

/* First tick of the top-level span that holds d: when d stops overflowing. */
static uint64_t overflow_entry_tick(const struct hier_engine *h, uint64_t d)
{
	return clear_below(h, d, h->levels);
}

static __attribute__((noinline, cold)) int hier_overflow_push(struct hier_engine *h,
							      struct spoke_timer *t)
{
	uint64_t visit = overflow_entry_tick(h, t->sp_deadline);

	spoke_tlist_push(&h->overflow, t);
	if (visit < h->overflow_visit)
		h->overflow_visit = visit;
	return 0;
}

static __attribute__((noinline, cold)) int hier_mark_word(struct hier_engine *h, size_t word)
{
	spoke_bitmap_set_from(&h->occupied, 1, word);
	return 0;
}

/* The place_of_bit entry for x = deadline ^ now, which is not 0. */
static inline uint32_t hier_place_of(const struct hier_engine *h, uint64_t x)
{
	return h->place_of_bit[63 - (size_t)__builtin_clzll(x)];
}

/*
 * Push t on the slot that p (not HIER_OVERFLOW) gives its deadline, and
 * set the slot's bit unconditionally (setting a set bit is harmless: "was
 * the slot empty" is a coin flip). Returns the bit's word if that was zero,
 * whose summary bits are then the caller's to set, or SPOKE_BITMAP_NONE.
 */
static inline size_t hier_push(struct hier_engine *h, struct spoke_timer *t, uint32_t p)
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
static inline int hier_place_x(struct hier_engine *h, struct spoke_timer *t, uint64_t x)
{
	uint32_t p = hier_place_of(h, x);
	size_t word;

	if (__builtin_expect(p == HIER_OVERFLOW, 0))
		return hier_overflow_push(h, t);
	word = hier_push(h, t, p);
	if (__builtin_expect(word != SPOKE_BITMAP_NONE, 0))
		return hier_mark_word(h, word);
	return 0;
}

/*
 * start(): the common case, t not pending and a delay in [1, UINT64_MAX -
 * now], with no call on its path (so no stack frame): there the deadline
 * is now + delay with no max() and no saturation, and the one test that it
 * lies after now (a sum that does not wrap) tells the case. Everything
 * else, a delay of 0 included, is start_slow's.
 */
static __attribute__((noinline)) int hier_start_slow(struct spoke_engine *e, struct spoke_timer *t,
						     uint64_t delay_ticks);

static int hier_start(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks)
{
	if (__builtin_expect(!spoke_timer_pending(t), 1)) {
		uint64_t now = e->now, d = now + delay_ticks;

		if (__builtin_expect(d > now, 1)) {
			t->sp_deadline = d;
			e->count++;
			return hier_place_x(to_hier(e), t, d ^ now);
		}
	}
	return hier_start_slow(e, t, delay_ticks);
}

/*
 * stop(): unlink t from its slot, the overflow list, the run or the due
 * list, all lists of tlist.h. The slot's bit stays set if this empties it
 * (see the top), and overflow_visit stays as it is if t was the earliest
 * or the last overflow timer: stale-low, one vain visit at worst.
 */
static int hier_stop(struct spoke_engine *e, struct spoke_timer *t)
{
	spoke_tlist_del(t);
	e->count--;
	return 0;
}

/* The rest of start(): a re-arm, a delay of 0, the end of time. */
static int hier_start_slow(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks)
{
	if (spoke_timer_pending(t))
		(void)hier_stop(e, t);
	if (spoke_arm(e, t, spoke_deadline_after(e->now, delay_ticks)))
		(void)hier_place_x(to_hier(e), t, t->sp_deadline ^ e->now);
	return 0;
}

/*
 * Put t where the clock will meet it, relative to now (see the top). For
 * a cascade, where the slots below were just emptied and a zero word is the
 * rule, not the exception, so the summary bits are set inline.
 */
static void place(struct hier_engine *h, struct spoke_timer *t)
{
	uint64_t x = t->sp_deadline ^ h->base.now;
	uint32_t p;
	size_t word;

	if (x == 0) { /* only while cascading: due at this very tick */
		spoke_due_push(&h->base, t);
		return;
	}
	p = hier_place_of(h, x);
	if (p == HIER_OVERFLOW) {
		hier_overflow_push(h, t);
		return;
	}
	word = hier_push(h, t, p);
	if (word != SPOKE_BITMAP_NONE)
		spoke_bitmap_set_from(&h->occupied, 1, word);
}

static __attribute__((noinline)) void hier_visit_overflow(struct hier_engine *h)
{
	struct spoke_timer *t = h->overflow.first;
	uint64_t visit = UINT64_MAX;

	while (t) {
		struct spoke_timer *next = t->sp_next;
		uint64_t entry = overflow_entry_tick(h, t->sp_deadline);

		if (entry <= h->base.now) {
			spoke_tlist_del(t);
			place(h, t);
		} else if (entry < visit) {
			visit = entry;
		}
		t = next;
	}
	h->overflow_visit = visit;
}

/* Place each timer of the list from t again (a cascade: see place()). */
static void place_list(struct hier_engine *h, struct spoke_timer *t)
{
	while (t) {
		struct spoke_timer *next = t->sp_next;

		place(h, t);
		t = next;
	}
}

/*
 * Empty one slot and place each of its timers again relative to now (its
 * first tick): on a lower level, or on the due list if due now. place()
 * rewrites both links, so the timers are not unlinked one by one.
 */
static __attribute__((noinline)) void hier_cascade(struct hier_engine *h, size_t slot)
{
	struct spoke_timer *t = h->slots[slot].first;

	h->slots[slot].first = NULL;
	spoke_bitmap_clear(&h->occupied, slot);
	place_list(h, t);
}

static __attribute__((noinline)) size_t hier_skip_stale(struct hier_engine *h, size_t slot)
{
	do {
		spoke_bitmap_clear(&h->occupied, slot);
		slot = spoke_bitmap_next(&h->occupied, slot + 1);
	} while (slot != SPOKE_BITMAP_NONE && spoke_tlist_empty(&h->slots[slot]));
	return slot;
}

/*
 * The first slot that holds timers, or SPOKE_BITMAP_NONE: the earliest
 * event, as the lowest level comes first and a level's slots in tick order
 * (the top of the .c). Level 0 holds nothing at or below now's digit, so
 * the scan starts there; stale bits on the way are cleared.
 */
static inline size_t hier_first_slot(struct hier_engine *h)
{
	size_t slot = spoke_bitmap_next(&h->occupied, h->base.now & h->slot_mask);

	if (__builtin_expect(slot != SPOKE_BITMAP_NONE && spoke_tlist_empty(&h->slots[slot]), 0))
		slot = hier_skip_stale(h, slot);
	return slot;
}

/* The first tick of a slot: now's digits above its level, its digit, zeros. */
static inline uint64_t hier_slot_tick(const struct hier_engine *h, size_t slot)
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
static inline bool hier_slot_whole(const struct hier_engine *h, size_t slot)
{
	/* one branch, not two: which of the two it is is a coin flip */
	return (slot <= h->slot_mask) | (h->slots[slot].first->sp_next == NULL);
}

/*
 * Move a whole slot (above) onto dst, which is empty (the engine's firing
 * list: collected and fired at once, as nothing else is due at its tick).
 */
static inline void hier_take_whole(struct hier_engine *h, size_t slot, struct spoke_tlist *dst)
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
 * deadline and appended to h->run, slot after slot, and fire_run (below)
 * fires them from there in order, with no level-0 placement, bit or scan
 * per timer, and one bitmap store for all the slots.
 *
 * While the run lasts it holds the earliest timers of the wheels but for
 * what an expiry function starts (or re-arms) meanwhile: a timer due within
 * the run's slots lands on level 0 or on a level-1 slot of the run's range
 * (it shares now's digits above 1). So before each member fire_run looks at
 * level 0 and at the range's bits (hier_run_alone, two words), and
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

/* Whether the first slot, not whole, with first tick ev may start a run. */
static inline bool hier_run_fits(const struct hier_engine *h, size_t slot, uint64_t ev,
				 uint64_t target)
{
	/* ev is a multiple of 2^B: the span's last tick does not wrap */
	return (slot >> h->bits) == 1 && ev + h->slot_mask <= target;
}

/* Whether nothing on the wheels may come before the run's next member (above). */
static inline bool hier_run_alone(const struct hier_engine *h)
{
	return ((*h->low_word & h->low_mask) | (*h->run_word & h->run_mask)) == 0;
}

/* Four keys of a run (vector compares where the target has them). */
typedef int32_t run_keys __attribute__((vector_size(16)));

/*
 * order[r] = the index of the r-th smallest of the first n keys. A key's
 * rank is the number of keys below it; four keys get theirs at once, one
 * broadcast compare per key of the first m (m a constant: a fixed sequence
 * with no branch; keys n to m - 1 are INT32_MAX, below no key). Lanes past
 * n rank n, hence order[n] to spare.
 */
static inline __attribute__((always_inline)) void rank_keys(const int32_t *key, unsigned n,
							    unsigned m, uint8_t *order)
{
	for (unsigned b = 0; b < n; b += 4) {
		run_keys x, rank = {0, 0, 0, 0};

		memcpy(&x, &key[b], sizeof(x));

#pragma GCC unroll 16
		for (unsigned j = 0; j < m; j++) {
			int32_t k = key[j];

			rank -= (run_keys){k, k, k, k} < x; /* -1 where key j is below */
		}
#pragma GCC unroll 4
		for (unsigned l = 0; l < 4; l++)
			order[rank[l]] = (uint8_t)(b + l);
	}
}

/* A run's key: digit 0 (B <= 16 bits) and the index, distinct, below INT32_MAX. */
static inline int32_t run_key(const struct hier_engine *h, const struct spoke_timer *t, unsigned i)
{
	return (int32_t)((t->sp_deadline & h->slot_mask) << HIER_RUN_INDEX_BITS | i);
}

/* a if mask is all ones, else b (mask all ones or zero): no branch */
static inline uintptr_t pick(uintptr_t mask, const void *a, const void *b)
{
	return ((uintptr_t)a & mask) | ((uintptr_t)b & ~mask);
}

/*
 * Rank the first n of m keys (rank_keys), then link the gathered timers in
 * rank order after *back; returns the new last link. The link loop runs m
 * times, a constant, with selects past n (scratch as in pair_append), so
 * that its end is no branch to mispredict.
 */
static inline __attribute__((always_inline)) void **
rank_link(const int32_t *key, unsigned n, unsigned m, uint8_t *order,
	  struct spoke_timer *const *gathered, void **back, struct spoke_timer *scratch)
{
	rank_keys(key, n, m, order);
#pragma GCC unroll 16
	for (unsigned r = 0; r < m; r++) {
		uintptr_t in = -(uintptr_t)(r < n);
		struct spoke_timer *x =
			(struct spoke_timer *)pick(in, gathered[order[r] & in], scratch);

		*back = x;
		x->sp_link = back;
		back = (void **)pick(in, &x->sp_next, back);
	}
	return back;
}

/*
 * Append a slot's list from t, if it holds one or two timers (the most
 * common in a sparse wheel), sorted, to the run whose last link is **back,
 * and move *back on; false (nothing done) if it holds more. With selects,
 * not branches: which of the three a slot is, and which of two timers is
 * due first, are coin flips to a branch predictor. One timer: its would-be
 * second link goes to scratch, and *back to it is written over by the next
 * link appended or the run's end.
 */
static inline bool pair_append(struct spoke_timer *t, void ***back, struct spoke_timer *scratch)
{
	struct spoke_timer *u = t->sp_next;
	uintptr_t two = -(uintptr_t)(u != NULL);
	struct spoke_timer *v = (struct spoke_timer *)pick(two, u, t); /* u, or t again */
	uintptr_t swap;
	struct spoke_timer *a, *b;
	void **link = *back;

	if (v->sp_next != NULL)
		return false;
	swap = -(uintptr_t)(v->sp_deadline < t->sp_deadline);
	a = (struct spoke_timer *)pick(swap, v, t);
	b = (struct spoke_timer *)pick(two, (void *)pick(swap, t, v), scratch);
	*link = a;
	a->sp_link = link;
	link = (void **)&a->sp_next;
	*link = b;
	b->sp_link = link;
	*back = (void **)pick(two, &b->sp_next, link);
	return true;
}

/*
 * Append the timers of level-1 slot `slot` to the run whose last link is
 * *back, sorted; returns the new last link, or NULL (nothing done) if the
 * slot holds more than HIER_RUN_MAX. One walk of the slot gathers them (its
 * list is a chain of loads from memory, walked once); each step of it also
 * takes one step down the list of slot `next`, so that the two
 * chains of cache misses overlap and the next walk finds its timers cached. The timers of a
 * level-1 slot share every digit but digit 0, so digit 0 orders them; with
 * the timer's index below it every key is distinct, and ranks need no
 * branch, where an insertion sort of random deadlines mispredicts about
 * once a timer. A slot of one timer, the most common in a sparse wheel,
 * needs neither.
 */
static void **run_append(struct hier_engine *h, size_t slot, void **back,
			 struct spoke_timer *scratch, size_t next)
{
	const struct spoke_timer *ahead;
	struct spoke_timer *gathered[HIER_RUN_MAX], *t = h->slots[slot].first;
	int32_t key[HIER_RUN_MAX] __attribute__((aligned(16)));
	uint8_t order[HIER_RUN_MAX + 1];
	unsigned n = 0;

	if (__builtin_expect(t == NULL, 0)) /* a stale bit's slot */
		return back;
	if (__builtin_expect(pair_append(t, &back, scratch), 1)) {
		h->slots[slot].first = NULL;
		return back;
	}
	for (unsigned i = 0; i < HIER_RUN_MAX; i++)
		key[i] = INT32_MAX;
	ahead = h->slots[next].first;
	for (; t; t = t->sp_next) {
		if (n == HIER_RUN_MAX)
			return NULL;
		/* a step down the next slot's chain, to be kept, not used */
		ahead = (ahead ? ahead : scratch)->sp_next;
		__asm__ volatile("" : : "r"(ahead));
		gathered[n] = t;
		key[n] = run_key(h, t, n);
		n++;
	}
	memset(order, 0, sizeof(order));
	if (n <= 4)
		back = rank_link(key, n, 4, order, gathered, back, scratch);
	else if (n <= 8)
		back = rank_link(key, n, 8, order, gathered, back, scratch);
	else if (n <= 12)
		back = rank_link(key, n, 12, order, gathered, back, scratch);
	else
		back = rank_link(key, n, HIER_RUN_MAX, order, gathered, back, scratch);
	h->slots[slot].first = NULL;
	return back;
}

/*
 * A run (see "Sorted runs"): `slot` and the occupied slots after it in
 * its bitmap word, up to the last level-1 slot, the last whose span ends by
 * target, or the first of more than HIER_RUN_MAX timers; their bits are
 * cleared with one store (a stale bit's slot is taken empty).
 */
static __attribute__((noinline)) bool hier_take_run(struct hier_engine *h, size_t slot,
						    uint64_t target)
{
	size_t word = slot >> 6, level1 = h->slot_mask + 1;
	uint64_t base = h->base.now & h->above[1];
	/* the last slot index whose span ends by target, and the level's last */
	uint64_t fit = (target - base - h->slot_mask) >> h->bits;
	size_t last = fit < h->slot_mask ? level1 + (size_t)fit : 2 * level1 - 1;
	uint64_t *w = &h->occupied0[word], bits, taken = 0;
	void **back = (void **)&h->run.first;
	struct spoke_timer scratch;

	if (last > word * 64 + 63)
		last = word * 64 + 63;
	bits = *w & (~0ull << (slot & 63)) & (~0ull >> (63 - (last & 63)));
	while (bits) {
		size_t s = word * 64 + (size_t)__builtin_ctzll(bits);
		/* the next slot to take, or this one again if none (no branch) */
		size_t next =
			word * 64 + (size_t)__builtin_ctzll((bits & (bits - 1)) | (bits & -bits));
		void **end;

		scratch.sp_next = NULL; /* read as `ahead` once the next chain ends */
		end = run_append(h, s, back, &scratch, next);

		if (!end)
			break;
		back = end;
		taken |= bits & -bits;
		bits &= bits - 1;
	}
	if (!taken)
		return false;
	*back = NULL;
	*w &= ~taken;
	if (*w == 0)
		spoke_bitmap_clear_from(&h->occupied, 1, word);
	h->run_word = w;
	/* from the first slot to the last taken: the range a new timer may reach */
	h->run_mask = (~0ull << (slot & 63)) & (~0ull >> __builtin_clzll(taken));
	return true;
}

static size_t fire_run(struct spoke_engine *e, spoke_expire_fn *fn, void *ctx);

/*
 * One step of `hierarchical`'s advance: the first occupied slot, the
 * earliest event (see the top), with the clock allowed up to
 * limit. A whole slot due by then is fired at its deadline, straight from
 * the slot; any other whose first tick is due is emptied at that tick (a
 * whole one too, when its deadline is past the limit: the clock may not
 * pass a slot's first tick with the slot still in place): into a sorted
 * run when it is a level-1 slot within the limit and no run is under way,
 * else by a cascade, after which what that makes due is fired. False if
 * the slot's first tick is past the limit.
 */
static inline __attribute__((always_inline)) bool hier_step(struct spoke_engine *e, size_t slot,
							    uint64_t limit, spoke_expire_fn *fn,
							    void *ctx, size_t *fired)
{
	struct hier_engine *h = to_hier(e);
	struct spoke_timer *first = h->slots[slot].first;
	uint64_t ev;

	if (hier_slot_whole(h, slot) && first->sp_deadline <= limit) {
		e->now = first->sp_deadline;
		hier_take_whole(h, slot, &e->firing);
		*fired += spoke_fire_firing(e, fn, ctx);
		return true;
	}
	ev = hier_slot_tick(h, slot);
	if (ev > limit)
		return false;
	e->now = ev;
	if (spoke_tlist_empty(&h->run) && hier_run_fits(h, slot, ev, limit) &&
	    hier_take_run(h, slot, limit)) {
		*fired += fire_run(e, fn, ctx);
		return true;
	}
	hier_cascade(h, slot);
	*fired += spoke_fire_due(e, fn, ctx);
	return true;
}

/*
 * Fire h->run member by member, each at its deadline (see
 * "Sorted runs"). A slot that an expiry function filled meanwhile is
 * stepped first if its first tick comes no later than the next member (so
 * the clock never passes a slot's first tick with the slot in place).
 * Out of line: once per run, and hier_step, which it calls, calls it.
 */
static __attribute__((noinline)) size_t fire_run(struct spoke_engine *e, spoke_expire_fn *fn,
						 void *ctx)
{
	struct hier_engine *h = to_hier(e);
	struct spoke_timer *t;
	size_t fired = 0;

	while ((t = h->run.first) != NULL) {
		if (__builtin_expect(!hier_run_alone(h), 0)) {
			size_t slot = hier_first_slot(h);

			if (slot != SPOKE_BITMAP_NONE &&
			    hier_step(e, slot, t->sp_deadline, fn, ctx, &fired))
				continue;
		}
		e->now = t->sp_deadline;
		spoke_tlist_del(t);
		fired += spoke_fire_one(e, t, fn, ctx);
	}
	return fired;
}

/*
 * The loop of advance(): step the first slot (hier_step) until its event
 * lies past the target. With the wheels empty, the overflow list is
 * visited at its tick.
 */
static inline size_t hier_advance_to(struct spoke_engine *e, uint64_t target, spoke_expire_fn *fn,
				     void *ctx)
{
	struct hier_engine *h = to_hier(e);
	size_t fired = 0;

	while (e->count > 0) {
		size_t slot = hier_first_slot(h);

		if (__builtin_expect(slot == SPOKE_BITMAP_NONE, 0)) {
			uint64_t ev = h->overflow_visit;

			/* nothing ahead, or the end of time: no tick left to collect */
			if (ev > target || ev == UINT64_MAX || e->now == UINT64_MAX)
				break;
			if (ev > e->now) /* else stale-low: visit at now */
				e->now = ev;
			hier_visit_overflow(h);
			fired += spoke_fire_due(e, fn, ctx);
			continue;
		}
		if (!hier_step(e, slot, target, fn, ctx, &fired))
			break;
	}
	return fired;
}

static size_t hier_advance(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx)
{
	return spoke_advance_with(e, ticks, fn, ctx, hier_advance_to);
}

/*
 * The next event: a whole slot's deadline, another slot's first tick, or
 * (wheels empty) the overflow visit, which outside an advance is always
 * ahead of the clock.
 */
static uint64_t hier_next_event(struct spoke_engine *e)
{
	struct hier_engine *h = to_hier(e);
	size_t slot = hier_first_slot(h);
	uint64_t ev;

	if (slot == SPOKE_BITMAP_NONE)
		ev = h->overflow_visit;
	else if (hier_slot_whole(h, slot))
		ev = h->slots[slot].first->sp_deadline;
	else
		ev = hier_slot_tick(h, slot);
	/* asked from an expiry function while a run is fired: its next member */
	if (!spoke_tlist_empty(&h->run) && h->run.first->sp_deadline < ev)
		ev = h->run.first->sp_deadline;
	return ev;
}

/*
 * Level 0 is bits [0, 2^B) of the bitmap: the first word of the first
 * summary level at which they fit in one word (hier_run_alone). That level exists: the bitmap
 * climbs until one word covers all levels, and level 0 is at most all of them.
 */
static void set_low_word(struct hier_engine *h)
{
	size_t n = (size_t)1 << h->bits; /* level 0's bits at bitmap level l */
	unsigned l = 0;

	while (n > 64) {
		n = (n + 63) / 64;
		l++;
	}
	h->low_word = h->occupied.word[l];
	h->low_mask = n == 64 ? UINT64_MAX : (1ull << n) - 1;
}

static int hier_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct hier_engine *h = to_hier(e);
	unsigned bits = p->level_bits ? p->level_bits : DEFAULT_LEVEL_BITS;
	unsigned levels, needed;
	size_t nslots;

	if (bits > MAX_LEVEL_BITS || p->levels > 64)
		return -EINVAL;
	needed = (64 + bits - 1) / bits;
	levels = p->levels ? p->levels : needed;
	if (levels > needed)
		levels = needed; /* a level past bit 63 could never hold a timer */
	h->bits = bits;
	h->levels = levels;
	h->slot_mask = (1ull << bits) - 1;
	for (unsigned b = 0; b < 64; b++) {
		unsigned k = b / bits;

		h->place_of_bit[b] = k < levels ? (uint32_t)k << (bits + HIER_BASE_SHIFT) | k * bits
						: HIER_OVERFLOW;
	}
	for (unsigned k = 0; k < levels; k++)
		h->above[k] = clear_below(h, UINT64_MAX, k + 1);
	nslots = (size_t)levels << bits;
	h->slots = calloc(nslots, sizeof(*h->slots));
	if (!h->slots)
		return -ENOMEM;
	if (spoke_bitmap_init(&h->occupied, nslots)) {
		free(h->slots);
		return -ENOMEM;
	}
	h->occupied0 = h->occupied.word[0];
	set_low_word(h);
	spoke_tlist_init(&h->overflow);
	spoke_tlist_init(&h->run);
	h->run_word = h->occupied0;
	h->overflow_visit = UINT64_MAX;
	return 0;
}

static void hier_fini(struct spoke_engine *e)
{
	struct hier_engine *h = to_hier(e);

	spoke_bitmap_fini(&h->occupied);
	free(h->slots);
}

/*
 * No collect() and no remove(): this scheme has its own advance (a whole
 * slot's deadline, which next_event() answers, may lie after the target
 * while its first tick does not, and then the slot is cascaded at that
 * tick instead) and its own stop.
 */
const struct spoke_engine_ops spoke_hierarchical_ops = {
	.name = "hierarchical",
	.size = sizeof(struct hier_engine),
	.init = hier_init,
	.fini = hier_fini,
	.next_event = hier_next_event,
	.start = hier_start,
	.stop = hier_stop,
	.advance = hier_advance,
};
