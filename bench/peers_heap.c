/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers_heap.c - the textbook baseline written for the benchmark: a binary
 * min-heap of (deadline, slot) pairs, 16 bytes each, kept in one array so a
 * sift compares deadlines without following a pointer; each slot remembers
 * its position (pos[slot] = heap index + 1, 0 when idle) so a stop removes
 * from the middle in O(log n), and a reset changes the key in place and
 * sifts it up or down. Sifts move a hole instead of swapping.
 * Clock: an integer tick count that advance() moves, like the engines'.
 */
#include "peers.h"

#include <stdlib.h>

struct heap_entry {
	uint64_t deadline; /* absolute tick */
	uint64_t slot;
};

struct heap_peer {
	struct peer p;		 /* slots: uint32_t, heap index + 1, 0 = idle */
	struct heap_entry *heap; /* heap[0] holds the earliest deadline */
	size_t len;
	uint64_t now; /* ticks */
};

static struct heap_peer *to_heap(struct peer *p)
{
	return (struct heap_peer *)p;
}

/* Per slot: its heap index + 1, 0 when idle. */
static uint32_t *heap_pos(struct heap_peer *h)
{
	return h->p.slots;
}

static void heap_place(struct heap_peer *h, size_t k, struct heap_entry e)
{
	h->heap[k] = e;
	heap_pos(h)[e.slot] = (uint32_t)k + 1;
}

/* Put e at hole k, moving it toward the root as far as it goes. */
static void heap_sift_up(struct heap_peer *h, size_t k, struct heap_entry e)
{
	while (k > 0) {
		size_t parent = (k - 1) / 2;

		if (h->heap[parent].deadline <= e.deadline)
			break;
		heap_place(h, k, h->heap[parent]);
		k = parent;
	}
	heap_place(h, k, e);
}

/* Put e at hole k, moving it toward the leaves as far as it goes. */
static void heap_sift_down(struct heap_peer *h, size_t k, struct heap_entry e)
{
	for (;;) {
		size_t child = 2 * k + 1;

		if (child >= h->len)
			break;
		if (child + 1 < h->len && h->heap[child + 1].deadline < h->heap[child].deadline)
			child++;
		if (e.deadline <= h->heap[child].deadline)
			break;
		heap_place(h, k, h->heap[child]);
		k = child;
	}
	heap_place(h, k, e);
}

/* Put e at hole k (whose old entry is gone), moving it whichever way it belongs. */
static void heap_place_moving(struct heap_peer *h, size_t k, struct heap_entry e)
{
	if (k > 0 && h->heap[(k - 1) / 2].deadline > e.deadline)
		heap_sift_up(h, k, e);
	else
		heap_sift_down(h, k, e);
}

/* Take heap[k] out: the last entry fills the hole. */
static void heap_remove_at(struct heap_peer *h, size_t k)
{
	struct heap_entry last = h->heap[--h->len];

	heap_pos(h)[h->heap[k].slot] = 0;
	if (k == h->len)
		return;
	heap_place_moving(h, k, last);
}

static void heap_close(struct peer *p)
{
	free(to_heap(p)->heap);
	peer_free(p);
}

static int heap_open(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
		     struct bench_sample *out)
{
	struct heap_peer *h = peer_new(sizeof(*h), sizeof(uint32_t), ops, ps, out);

	if (!h)
		return -ENOMEM;
	h->heap = malloc(ps->ntimers * sizeof(*h->heap));
	if (!h->heap) {
		peer_free(&h->p);
		return bench_fail(out, -ENOMEM, "no memory for %zu timers", ps->ntimers);
	}
	*pp = &h->p;
	return 0;
}

static int heap_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	struct heap_peer *h = to_heap(p);

	if (heap_pos(h)[i])
		heap_remove_at(h, heap_pos(h)[i] - 1);
	h->len++;
	heap_sift_up(h, h->len - 1, (struct heap_entry){h->now + delay_ticks, i});
	return 0;
}

static int heap_stop(struct peer *p, size_t i)
{
	struct heap_peer *h = to_heap(p);

	if (!heap_pos(h)[i])
		return -ENOENT;
	heap_remove_at(h, heap_pos(h)[i] - 1);
	return 0;
}

static int heap_reset(struct peer *p, size_t i, uint64_t delay_ticks)
{
	struct heap_peer *h = to_heap(p);

	if (!heap_pos(h)[i])
		return -ENOENT;
	heap_place_moving(h, heap_pos(h)[i] - 1, (struct heap_entry){h->now + delay_ticks, i});
	return 0;
}

static int heap_advance(struct peer *p, uint64_t ticks)
{
	struct heap_peer *h = to_heap(p);

	h->now += ticks;
	while (h->len > 0 && h->heap[0].deadline <= h->now) {
		heap_remove_at(h, 0);
		p->fired++;
	}
	return 0;
}

const struct peer_ops peer_binheap = {
	.name = "binheap",
	.clock = PEER_TICKS,
	.how = "binary min-heap of (deadline, slot) written for the bench, tick count",
	.open = heap_open,
	.close = heap_close,
	.start = heap_start,
	.stop = heap_stop,
	.reset = heap_reset,
	.advance = heap_advance,
};
