/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_lawn.c - Timer Lawn (Lev-Libfeld, Algorithm 1): one FIFO queue per
 * distinct TTL, found through a hash table keyed by the TTL.
 *
 * A timer started at tick N with delay D has the TTL max(D, 1) and the
 * deadline N + TTL. The clock never goes back, so the timers of one TTL
 * reach their queue in deadline order: appending at the tail keeps each
 * queue sorted and its head is its earliest timer. Near the end of time the
 * deadline saturates at UINT64_MAX; the key is then deadline - N, not D,
 * so that deadline = N + key holds for every timer and the argument stands.
 *
 * Finding the next queue to expire. The paper keeps the earliest head
 * deadline and recomputes it over every queue (O(number of TTLs) per due
 * tick): with a different TTL per timer that is an unsorted list. Here each
 * live queue carries a key timer, armed in a private `hierarchical` engine
 * (`heads`) at the deadline of the queue's head, so the next queue to expire
 * is that engine's next event, found by a bit scan, and collect() visits
 * only the queues whose key fires at this tick: O(1) per fired timer and
 * per cascade, whatever the number of TTLs (docs/engines.md measures it).
 * A start into an existing queue leaves its key alone (the head does not
 * change); a start that opens a queue arms its key (O(1)). A stop of a head
 * that leaves the queue non-empty re-arms the key at the new head (O(1), a
 * wheel re-arm), so next() stays exact; the node before t is a sentinel
 * (deadline 0: no queued timer has deadline 0) iff t was the head. A stop
 * that empties the queue stops its key and closes the queue. So start and
 * stop stay O(1). A key that fires early anyway finds nothing due and is
 * re-armed at its head.
 *
 * The heads engine has its own clock, which follows ours: collect()
 * advances it to now, and next_event() first brings it up to now (the
 * engine may have run on to an advance's target without a collect; no key
 * is due in between, since the clock never passes the earliest deadline),
 * then answers its next event: never later than the earliest key, hence
 * than the earliest head, and each key moves at most once per wheel level
 * before it fires (bounded advance(next()) steps).
 *
 * Costs, n timers over q distinct TTLs: start and stop O(1) expected (one
 * hash lookup, an append or unlink, and a key armed or stopped when a queue
 * opens or closes); next_event() O(1) (a bit scan); collect() O(1 + timers
 * fired) plus the key cascades of the wheel. Memory: 64 bytes per live
 * queue, the heads engine's 56 KiB of slots.
 *
 * Each queue is circular around a sentinel timer in its struct, as in
 * engine_sorted_list.c: no link of a queued timer is NULL, so it reads as
 * pending, and a stop unlinks it without a branch on head or tail. A stop
 * needs the timer's queue only when it empties the queue (to close it), and
 * then both neighbours of the timer are that queue's sentinel (in a longer
 * queue they are two different nodes), so the queue is found from the
 * sentinel's address: nothing per timer names it.
 *
 * Memory: queue structs (64 bytes on LP64, one cache line each) come from
 * a pool grown 64 at a time (a directory of chunks that never move, since
 * timers point at the sentinels in them) and recycled through a free list;
 * the hash table (chained through the queue structs, power-of-two size, 64
 * buckets at first) doubles before the live queues would outnumber half its
 * buckets. Both grow only in lawn_start() before it changes anything, once
 * its lookup says the start needs a new queue, so a start that cannot grow
 * returns -ENOMEM with nothing changed. Nothing shrinks before fini.
 *
 * Fields of struct spoke_timer while the timer is in a queue:
 *   sp_next      next (later) timer of the queue, or the queue's sentinel
 *                after the tail
 *   sp_link      previous (earlier) timer, a struct spoke_timer *, or the
 *                queue's sentinel before the head
 *   sp_deadline  set by engine.c
 * Unlinking sets both to NULL. Once collected the timer is unlinked first:
 * the due list (tlist.h) reuses sp_next and sp_link with its own meaning.
 */
#include "clist.h"
#include "engine_hierarchical.h"
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>

#define LAWN_CHUNK_QUEUES 64
#define LAWN_MIN_BUCKETS  64

/*
 * The timers of one TTL, its key and its hash link: 64 bytes on LP64, and
 * the pool aligns them to 64, so a queue is one cache line (a start that
 * opens a queue and arms its key, or a stop that closes it, touches one
 * line of it, not two or three as the 88-byte struct of a87f923 did). No
 * back link in the hash chain: a close walks its bucket from the head (the
 * table is at most half full, so the chain is short, and the write goes to
 * the same line the back link would have named). No list of live queues:
 * rehash walks the pool, where a free queue has ttl_ticks 0.
 */
struct lawn_queue {
	struct spoke_timer key; /* in `heads` at the head's deadline, while live */
	/* sp_next = head (earliest), sp_link = tail (latest); itself both ways when empty */
	struct spoke_timer sentinel;
	uint64_t ttl_ticks;	      /* the hash key; 0 while the queue is free */
	struct lawn_queue *hash_next; /* bucket chain, or the free list */
} __attribute__((aligned(64)));

_Static_assert(sizeof(void *) != 8 || sizeof(struct lawn_queue) == 64,
	       "a TTL queue is one cache line on LP64");

/* A block of the queue pool, freed only by fini. */
struct lawn_chunk {
	struct lawn_queue queues[LAWN_CHUNK_QUEUES];
};

struct lawn_engine {
	struct spoke_engine base;
	struct lawn_queue **buckets;	/* nbuckets chain heads */
	size_t nbuckets;		/* a power of two */
	unsigned bucket_shift;		/* 64 - log2(nbuckets) */
	size_t nqueues;			/* live queues: non-empty, in the table */
	struct lawn_queue *free_queues; /* recycled queue structs */
	struct lawn_chunk **chunks;	/* the pool, by chunk number */
	size_t nchunks, chunks_cap;
	/*
	 * `hierarchical`, one key per live queue. Its keys are armed and
	 * stopped through the inline insert and remove of
	 * engine_hierarchical.h (no call, no admit or pending test of the
	 * public API); only advance and next go through engine.c.
	 */
	struct spoke_engine *heads;
	/*
	 * next_event()'s last answer, while next_known: never later than the
	 * earliest key (arming a key lowers it; moving or stopping the key it
	 * names forgets it), so empty ticks do not ask the heads engine.
	 */
	uint64_t next_tick;
	bool next_known;
};

static struct lawn_engine *to_lawn(struct spoke_engine *e)
{
	return (struct lawn_engine *)e;
}

static struct lawn_queue *queue_of_sentinel(struct spoke_timer *sentinel)
{
	return (struct lawn_queue *)(void *)((char *)sentinel -
					     offsetof(struct lawn_queue, sentinel));
}

static struct lawn_queue *queue_of_key(struct spoke_timer *key)
{
	return (struct lawn_queue *)(void *)((char *)key - offsetof(struct lawn_queue, key));
}

static struct spoke_timer *queue_head(const struct lawn_queue *q)
{
	return q->sentinel.sp_next;
}

static bool queue_empty(const struct lawn_queue *q)
{
	return spoke_clist_empty(&q->sentinel);
}

/* TTL of a timer started now with delay_ticks: its deadline minus now. */
static uint64_t ttl_of_delay(uint64_t now, uint64_t delay_ticks)
{
	uint64_t ttl = delay_ticks ? delay_ticks : 1;

	return ttl > UINT64_MAX - now ? UINT64_MAX - now : ttl;
}

/* Fibonacci hashing: the top bits of ttl * 2^64/phi. */
static size_t bucket_of(const struct lawn_engine *l, uint64_t ttl_ticks)
{
	return (size_t)((ttl_ticks * UINT64_C(0x9e3779b97f4a7c15)) >> l->bucket_shift);
}

/* ---- hash table ---- */

/* The queue of ttl_ticks in bucket b (its bucket_of), or NULL. */
static struct lawn_queue *lookup(const struct lawn_engine *l, size_t b, uint64_t ttl_ticks)
{
	struct lawn_queue *q = l->buckets[b];

	while (q && q->ttl_ticks != ttl_ticks)
		q = q->hash_next;
	return q;
}

/* Add q to bucket b (its bucket_of). */
static void hash_add(struct lawn_engine *l, size_t b, struct lawn_queue *q)
{
	struct lawn_queue **head = &l->buckets[b];

	q->hash_next = *head;
	*head = q;
}

/* q is in the table: unlink it from its bucket's chain. */
static void hash_del(struct lawn_engine *l, struct lawn_queue *q)
{
	struct lawn_queue **pp = &l->buckets[bucket_of(l, q->ttl_ticks)];

	while (*pp != q)
		pp = &(*pp)->hash_next;
	*pp = q->hash_next;
}

static unsigned log2_of(size_t pow2)
{
	return (unsigned)__builtin_ctzll((unsigned long long)pow2);
}

/*
 * Switch to a table of nbuckets (a power of two); rehash the live queues,
 * found in the pool (O(pool), at most twice the most queues ever live).
 */
static int rehash(struct lawn_engine *l, size_t nbuckets)
{
	struct lawn_queue **buckets = calloc(nbuckets, sizeof(*buckets));

	if (!buckets)
		return -ENOMEM;
	free(l->buckets);
	l->buckets = buckets;
	l->nbuckets = nbuckets;
	l->bucket_shift = 64 - log2_of(nbuckets);
	for (size_t c = 0; c < l->nchunks; c++)
		for (size_t i = 0; i < LAWN_CHUNK_QUEUES; i++)
			if (l->chunks[c]->queues[i].ttl_ticks != 0)
				hash_add(l, bucket_of(l, l->chunks[c]->queues[i].ttl_ticks),
					 &l->chunks[c]->queues[i]);
	return 0;
}

/* ---- queue pool ---- */

/* Room for one more chunk pointer in the pool's directory. 0 or -ENOMEM. */
static int pool_reserve(struct lawn_engine *l)
{
	size_t cap = l->chunks_cap ? l->chunks_cap * 2 : 4;
	struct lawn_chunk **chunks;

	if (l->nchunks < l->chunks_cap)
		return 0;
	if (cap > SIZE_MAX / sizeof(*chunks))
		return -ENOMEM;
	chunks = realloc(l->chunks, cap * sizeof(*chunks));
	if (!chunks)
		return -ENOMEM;
	l->chunks = chunks;
	l->chunks_cap = cap;
	return 0;
}

static int pool_grow(struct lawn_engine *l)
{
	struct lawn_chunk *c;
	int err = pool_reserve(l);

	if (err)
		return err;
	c = aligned_alloc(_Alignof(struct lawn_chunk), sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = LAWN_CHUNK_QUEUES; i-- > 0;) {
		c->queues[i].ttl_ticks = 0;
		c->queues[i].sentinel.sp_deadline = 0; /* tells it from a timer (lawn_remove) */
		c->queues[i].key.sp_link = NULL;       /* a free queue's key is never pending */
		c->queues[i].hash_next = l->free_queues;
		l->free_queues = &c->queues[i];
	}
	l->chunks[l->nchunks++] = c;
	return 0;
}

/* Take a queue from the free list (queue_reserve saw to it that there is one). */
static struct lawn_queue *queue_open(struct lawn_engine *l, size_t b, uint64_t ttl_ticks)
{
	struct lawn_queue *q = l->free_queues;

	l->free_queues = q->hash_next;
	q->ttl_ticks = ttl_ticks;
	spoke_clist_init(&q->sentinel);
	hash_add(l, b, q);
	l->nqueues++;
	return q;
}

/*
 * Take a pending key out of the heads engine, inline. A pending key is
 * always on a wheel slot, never on the heads' due list: its deadline is a
 * queued timer's, > our clock >= the heads' clock, whenever code outside
 * the heads' advance runs, and inside it (key_fired) only the key that
 * fired, no longer pending, is touched. So spoke_hier_remove's "deadline >
 * now" holds. Forgets next_tick if this key defined it.
 */
static void key_unlink(struct lawn_engine *l, struct lawn_queue *q)
{
	struct hier_engine *h = spoke_to_hier(l->heads);

	if (q->key.sp_deadline == l->next_tick)
		l->next_known = false;
	spoke_hier_remove(h, &q->key);
	h->base.count--;
}

/* Drop an empty queue from the table, back to the pool. */
static void queue_close(struct lawn_engine *l, struct lawn_queue *q)
{
	if (spoke_timer_pending(&q->key)) /* not if it just fired */
		key_unlink(l, q);
	hash_del(l, q);
	q->ttl_ticks = 0;
	q->hash_next = l->free_queues;
	l->free_queues = q;
	l->nqueues--;
}

/* ---- the operations ---- */

static int lawn_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct lawn_engine *l = to_lawn(e);

	int err;

	(void)p;
	err = spoke_engine_new(&l->heads, "hierarchical", NULL);
	if (err)
		return err;
	err = rehash(l, LAWN_MIN_BUCKETS);
	if (err)
		spoke_engine_free(l->heads);
	return err;
}

static void lawn_fini(struct spoke_engine *e)
{
	struct lawn_engine *l = to_lawn(e);

	while (l->nchunks > 0)
		free(l->chunks[--l->nchunks]);
	free(l->chunks);
	l->chunks = NULL;
	l->chunks_cap = 0;
	free(l->buckets);
	l->buckets = NULL;
	l->free_queues = NULL;
	spoke_engine_free(l->heads);
	l->heads = NULL;
}

/*
 * Arm q's key at its head's deadline, inline (see key_unlink): the
 * deadline is > our clock >= the heads' clock, as spoke_hier_insert wants,
 * and is exact (what engine.c would compute from a delay of deadline -
 * heads' now, without the saturation, which cannot happen here).
 */
static void key_arm(struct lawn_engine *l, struct lawn_queue *q)
{
	struct hier_engine *h = spoke_to_hier(l->heads);
	uint64_t d = queue_head(q)->sp_deadline;

	if (spoke_timer_pending(&q->key))
		key_unlink(l, q);
	h->base.count++;
	q->key.sp_deadline = d;
	spoke_hier_insert(h, &q->key);
	if (d < l->next_tick)
		l->next_tick = d;
}

/*
 * Room for one more queue: a free one in the pool, and the table at most
 * half full after it. Before anything changes, so that a start that cannot
 * grow returns -ENOMEM with t as it was. 0 or -ENOMEM.
 */
static int queue_reserve(struct lawn_engine *l)
{
	int err;

	if (!l->free_queues) {
		err = pool_grow(l);
		if (err)
			return err;
	}
	if (l->nqueues + 1 > l->nbuckets / 2) {
		if (l->nbuckets > SIZE_MAX / 2 / sizeof(*l->buckets))
			return -ENOMEM;
		err = rehash(l, l->nbuckets * 2);
		if (err)
			return err;
	}
	return 0;
}

/*
 * The whole start, in place of engine.c's admit + insert (engine_impl.h):
 * one lookup of the TTL, room reserved for a new queue before a pending t
 * is unlinked, and the key armed only when the start opens a queue (a
 * start into a live queue does not change its head). A re-arm's unlink
 * may close q itself (t was its only timer); its ttl_ticks is 0 then, and
 * the queue it freed is the one this start reopens.
 */
static int lawn_start(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks)
{
	struct lawn_engine *l = to_lawn(e);
	uint64_t ttl_ticks = ttl_of_delay(e->now, delay_ticks);
	struct lawn_queue *q;
	size_t b;

	if (__builtin_expect(ttl_ticks == 0, 0)) {
		/* the end of time: due at once, as engine.c's start does */
		if (spoke_timer_pending(t))
			(void)spoke_engine_stop(e, t);
		t->sp_deadline = e->now;
		e->count++;
		spoke_due_push(e, t);
		return 0;
	}
	b = bucket_of(l, ttl_ticks);
	q = lookup(l, b, ttl_ticks);
	if (!q) {
		size_t nbuckets = l->nbuckets;
		int err = queue_reserve(l);

		if (err)
			return err;
		if (l->nbuckets != nbuckets) /* rehashed */
			b = bucket_of(l, ttl_ticks);
	}
	if (__builtin_expect(spoke_timer_pending(t), 0)) {
		(void)spoke_engine_stop(e, t);
		if (q && q->ttl_ticks != ttl_ticks)
			q = NULL;
	}
	t->sp_deadline = e->now + ttl_ticks;
	e->count++;
	if (q) {
		spoke_clist_append(&q->sentinel, t);
		return 0;
	}
	q = queue_open(l, b, ttl_ticks);
	spoke_clist_append(&q->sentinel, t);
	key_arm(l, q);
	return 0;
}

static void lawn_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	struct lawn_engine *l = to_lawn(e);
	struct spoke_timer *prev = spoke_clist_prev(t);
	struct spoke_timer *emptied =
		spoke_clist_del(t); /* the sentinel if that emptied the queue */

	if (emptied)
		queue_close(l, queue_of_sentinel(emptied));
	else if (prev->sp_deadline == 0) /* a sentinel: t was the head */
		key_arm(l, queue_of_sentinel(prev));
}

/*
 * Move the due run at the head of q to the due list, keeping its FIFO
 * order: the due list is pushed at its front and fired from there, so the
 * run goes on from its last timer back to its head.
 */
static void queue_collect(struct spoke_engine *e, struct lawn_queue *q)
{
	struct spoke_timer *last = &q->sentinel;

	while (last->sp_next != &q->sentinel && last->sp_next->sp_deadline <= e->now)
		last = last->sp_next;
	while (last != &q->sentinel) {
		struct spoke_timer *t = last;

		last = t->sp_link;
		(void)spoke_clist_del(t);
		spoke_due_push(e, t);
	}
}

/*
 * A key fired: its queue's head may be due (or the key was early: a stop
 * of the head since). Move the due run, then re-arm or close the queue.
 */
static void key_fired(void *ctx, struct spoke_timer *key)
{
	struct lawn_engine *l = ctx;
	struct lawn_queue *q = queue_of_key(key);

	queue_collect(&l->base, q);
	if (queue_empty(q))
		queue_close(l, q);
	else
		key_arm(l, q);
}

/* Bring the heads engine's clock up to ours, firing the keys due on the way. */
static void heads_catch_up(struct lawn_engine *l)
{
	uint64_t behind = l->base.now - spoke_engine_now(l->heads);

	if (behind)
		(void)spoke_engine_advance(l->heads, behind, key_fired, l);
}

static uint64_t lawn_next_event(struct spoke_engine *e)
{
	struct lawn_engine *l = to_lawn(e);
	uint64_t next;

	if (l->next_known && l->next_tick > e->now)
		return l->next_tick;
	heads_catch_up(l); /* fires nothing: no key is due before a collect */
	next = spoke_engine_next(l->heads);
	/* the heads' clock is ours now; no key is past UINT64_MAX */
	l->next_tick = next == UINT64_MAX ? UINT64_MAX : e->now + next;
	l->next_known = true;
	return l->next_tick;
}

/* PerTickBookkeeping: the queues whose key is due now, and no other. */
static void lawn_collect(struct spoke_engine *e)
{
	heads_catch_up(to_lawn(e));
}

const struct spoke_engine_ops spoke_lawn_ops = {
	.name = "lawn",
	.size = sizeof(struct lawn_engine),
	.init = lawn_init,
	.fini = lawn_fini,
	.start = lawn_start,
	.remove = lawn_remove,
	.next_event = lawn_next_event,
	.collect = lawn_collect,
};
