/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_heap.c - scheme 3 of Varghese & Lauck: a tree-based priority
 * queue, here an implicit 4-ary min-heap keyed by deadline.
 *
 * The heap is one array of {deadline, timer} entries. The key is copied
 * into the entry so that sifting compares entries in the array and never
 * loads a timer; a timer is touched only to store its new index when it
 * moves. Node i has the children 4i+1 .. 4i+4 and the parent (i-1)/4: a
 * 4-ary heap is half as deep as a binary one, so sift-up (start) moves half
 * as many entries, and sift-down (stop, collect) scans four adjacent
 * 16-byte entries per level instead of two.
 *
 * Costs, n timers in the heap: start O(log n) (append, sift up); stop
 * O(log n) (move the last entry into the hole, sift it up or down);
 * next_event() O(1) (the root); collect() O(log n) per timer it fires.
 * Equal deadlines fire in no particular order, but always in deadline order.
 *
 * Memory: the array starts at params->initial_capacity entries (default 64,
 * at most 2^32) and doubles with realloc when full, never shrinks. Growth
 * happens in admit(), before a start changes anything, so a start that
 * cannot grow fails with -ENOMEM and leaves the timer as it was, and
 * insert() itself never fails.
 *
 * Fields of struct spoke_timer while the timer is in the heap:
 *   sp_link      its index in the array plus one, as an integer (the "heap
 *                position" of engine.h): never NULL, so the timer reads as
 *                pending; remove() sets it to NULL
 *   sp_deadline  the key (set by engine.c; the entry holds a copy)
 *   sp_next      unused here; the due list uses it and sp_link once collected
 */
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>

#define HEAP_ARITY		  4
#define HEAP_DEFAULT_CAPACITY	  64
#define HEAP_MAX_INITIAL_CAPACITY (UINT64_C(1) << 32)

struct heap_entry {
	uint64_t deadline_ticks;
	struct spoke_timer *t;
};

struct heap_engine {
	struct spoke_engine base;
	struct heap_entry *entries;
	size_t size;	 /* timers in the heap (the due list not included) */
	size_t capacity; /* entries allocated */
};

static struct heap_engine *to_heap(struct spoke_engine *e)
{
	return (struct heap_engine *)e;
}

static size_t parent_of(size_t i)
{
	return (i - 1) / HEAP_ARITY;
}

static size_t first_child_of(size_t i)
{
	return i * HEAP_ARITY + 1;
}

/* Store ent at index i and tell its timer where it now lives (i + 1: never NULL). */
static void place(struct heap_engine *h, size_t i, struct heap_entry ent)
{
	h->entries[i] = ent;
	ent.t->sp_link = (void *)(uintptr_t)(i + 1);
}

/* Put ent into the hole at i, moving it up past later parents. */
static void sift_up(struct heap_engine *h, size_t i, struct heap_entry ent)
{
	while (i > 0) {
		size_t p = parent_of(i);

		if (h->entries[p].deadline_ticks <= ent.deadline_ticks)
			break;
		place(h, i, h->entries[p]);
		i = p;
	}
	place(h, i, ent);
}

/* Index of the earliest child of i; i has at least one child. */
static size_t min_child(const struct heap_engine *h, size_t i)
{
	size_t c = first_child_of(i);
	size_t end = c + HEAP_ARITY < h->size ? c + HEAP_ARITY : h->size;
	size_t min = c;

	for (c++; c < end; c++)
		if (h->entries[c].deadline_ticks < h->entries[min].deadline_ticks)
			min = c;
	return min;
}

/* Put ent into the hole at i, moving it down past earlier children. */
static void sift_down(struct heap_engine *h, size_t i, struct heap_entry ent)
{
	while (first_child_of(i) < h->size) {
		size_t c = min_child(h, i);

		if (h->entries[c].deadline_ticks >= ent.deadline_ticks)
			break;
		place(h, i, h->entries[c]);
		i = c;
	}
	place(h, i, ent);
}

/* Take the entry at i out: fill the hole with the last entry. */
static void delete_at(struct heap_engine *h, size_t i)
{
	struct heap_entry last = h->entries[--h->size];

	if (i == h->size)
		return;
	if (i > 0 && h->entries[parent_of(i)].deadline_ticks > last.deadline_ticks)
		sift_up(h, i, last);
	else
		sift_down(h, i, last);
}

/* Double the array until it holds at least `need` entries. 0 or -ENOMEM. */
static int grow(struct heap_engine *h, size_t need)
{
	size_t cap = h->capacity;
	struct heap_entry *entries;

	while (cap < need) {
		if (cap > SIZE_MAX / 2 / sizeof(*entries))
			return -ENOMEM;
		cap *= 2;
	}
	entries = realloc(h->entries, cap * sizeof(*entries));
	if (!entries)
		return -ENOMEM;
	h->entries = entries;
	h->capacity = cap;
	return 0;
}

static int heap_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct heap_engine *h = to_heap(e);
	size_t cap = p->initial_capacity ? p->initial_capacity : HEAP_DEFAULT_CAPACITY;

	if ((uint64_t)cap > HEAP_MAX_INITIAL_CAPACITY)
		return -EINVAL;
	if (cap > SIZE_MAX / sizeof(*h->entries))
		return -ENOMEM;
	h->entries = malloc(cap * sizeof(*h->entries));
	if (!h->entries)
		return -ENOMEM;
	h->capacity = cap;
	h->size = 0;
	return 0;
}

static void heap_fini(struct spoke_engine *e)
{
	struct heap_engine *h = to_heap(e);

	free(h->entries);
	h->entries = NULL;
}

/*
 * Make room for one more entry. A re-armed timer is still in the heap at
 * this point, so this may grow one entry early; insert() can never fail.
 */
static int heap_admit(struct spoke_engine *e, uint64_t delay_ticks)
{
	struct heap_engine *h = to_heap(e);

	(void)delay_ticks;
	if (h->size < h->capacity)
		return 0;
	return grow(h, h->size + 1);
}

static void heap_insert(struct spoke_engine *e, struct spoke_timer *t)
{
	struct heap_engine *h = to_heap(e);
	struct heap_entry ent = {.deadline_ticks = t->sp_deadline, .t = t};

	sift_up(h, h->size++, ent);
}

static void heap_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	delete_at(to_heap(e), (size_t)(uintptr_t)t->sp_link - 1);
	t->sp_link = NULL;
}

static uint64_t heap_next_event(struct spoke_engine *e)
{
	struct heap_engine *h = to_heap(e);

	return h->size ? h->entries[0].deadline_ticks : UINT64_MAX;
}

static void heap_collect(struct spoke_engine *e)
{
	struct heap_engine *h = to_heap(e);

	while (h->size && h->entries[0].deadline_ticks <= e->now) {
		struct spoke_timer *t = h->entries[0].t;

		delete_at(h, 0);
		spoke_due_push(e, t);
	}
}

const struct spoke_engine_ops spoke_heap_ops = {
	.name = "heap",
	.size = sizeof(struct heap_engine),
	.init = heap_init,
	.fini = heap_fini,
	.admit = heap_admit,
	.insert = heap_insert,
	.remove = heap_remove,
	.next_event = heap_next_event,
	.collect = heap_collect,
};
