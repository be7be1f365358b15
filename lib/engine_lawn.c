/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_lawn.c - Timer Lawn (Lev-Libfeld, Algorithm 1): one FIFO queue per
 * distinct TTL, found through a hash table keyed by the TTL.
 *
 * A timer started at tick N with delay D has the TTL max(D, 1) and the
 * deadline N + TTL. The clock never goes back, so the timers of one TTL
 * reach their queue in deadline order: appending at the tail keeps each
 * queue sorted and its head is its earliest timer. Near the end of time the
 * deadline saturates at UINT64_MAX; the TTL is then deadline - N, not D,
 * so that deadline = N + TTL holds for every timer and the argument stands.
 *
 * Finding the next queue to expire. The paper keeps the earliest head
 * deadline and recomputes it over every queue (O(number of TTLs) per due
 * tick): with a different TTL per timer that is an unsorted list. Here each
 * live queue carries a key timer at the deadline of its head, in the Lawn's
 * own wheel of heads (below), so the next queue to expire is found by a bit
 * scan, whatever the number of TTLs. A start into an existing queue leaves
 * its key alone (the head does not change); a start that opens a queue
 * places its key (O(1)). A stop of a head that leaves the queue non-empty
 * moves the key to the new head (O(1)), so next() stays exact; t's own
 * back link carries clist.h's first mark iff t was the head (see the queue
 * list below). A stop that empties the queue unlinks its key and closes
 * the queue. So start and stop stay O(1).
 *
 * The wheel of heads. A key's deadline d is read in base 256: digit k is
 * bits [8k, 8k + 8). Level k is a ring of 256 slots whose slot j holds the
 * keys with digit k of d equal to j; 8 levels cover all 64 bits, so any key
 * has a level and nothing overflows:
 *
 *   level  digit bits  one slot spans   the level spans    (1 tick = 1 ms)
 *     0       0..7       1 tick          256 ticks           0.26 s
 *     1       8..15      256 ticks       65536 ticks         66 s
 *     2      16..23      65536 ticks     2^24 ticks          4.7 hours
 *     3      24..31      2^24 ticks      2^32 ticks          50 days
 *     ...
 *     7      56..63      2^56 ticks      2^64 ticks
 *
 * A key sits on the level of the highest digit in which d differs from
 * now: k = (63 - clz(d ^ now)) / 8, slot k * 256 + digit k of d. So d
 * shares now's digits above k, and its digit k is above now's. The clock
 * reaches slot j of level k at its first tick, T = (now's digits above k,
 * j, zeros below) <= d; the keys there are then placed again relative to
 * T (a lower level), or are due if d is T: each key moves down at most
 * once per level, and is due at d exactly (a TTL below 2^16 ticks moves at
 * most twice). A level's keys all come before the next boundary of the
 * level above, so the first occupied slot of the lowest occupied level
 * holds the earliest keys. Occupancy is one bit per slot in slot order,
 * 2048 bits in 32 words, and one summary word with a bit per word: the
 * first occupied slot is two bit scans, its first tick the next event
 * (bounded advance(next()) steps). Memory: 2048 sentinels of 24 bytes,
 * 48 KiB.
 *
 * The advance (lawn_advance_to) takes the first occupied slot. A key alone
 * there is the next event itself: the clock jumps to its deadline, the key
 * comes off and its queue's head fires (key_fire), with no cascade (no
 * other slot's first tick comes before that deadline). Any other slot is
 * emptied at its first tick as above, and what is due then is moved to the
 * due list and fired. With a TTL per timer the keys of a level-2 slot move
 * once, to level 1, in the order they were placed, and most of them are
 * alone there: 1e4 timers started at tick 0 with TTLs in [1, 2^20) fill 15
 * level-2 slots with about 625 keys each, and those fill the 4096 level-1
 * slots with about 2.4.
 *
 * Why its own wheel, not a `hierarchical` engine: with random TTLs every
 * start opens a queue and every stop closes one, so the key's insert and
 * remove are a third of a start+stop pair. Here the level is the top bit
 * over 8 (no table), the slot lists are circular around sentinel heads
 * (clist.h: an unlink finds its emptied slot from the neighbour's address,
 * with no back-link arithmetic), the summary is one word with no levels to
 * climb, and nothing is counted, cached or overflowed.
 *
 * Costs, n timers over q distinct TTLs: start and stop O(1) expected (one
 * hash lookup, an append or unlink, and a key placed or unlinked when a
 * queue opens or closes); next_event() O(1) (two bit scans); an advance
 * O(1) per timer fired and per key move, and it never walks an empty slot.
 * Memory: 64 bytes per live queue, 48 KiB of slot heads.
 *
 * Each queue is circular around a sentinel timer in its struct, as in
 * engine_sorted_list.c: no link of a queued timer is NULL, so it reads as
 * pending, and a stop unlinks it without a branch on head or tail. A stop
 * needs the timer's queue only when it empties the queue (to close it), and
 * then both neighbours of the timer are that queue's sentinel (in a longer
 * queue they are two different nodes), or when t was the head (to move the
 * key), and then its back link names the sentinel with the first mark:
 * the queue is found from the sentinel's address, nothing per timer names
 * it.
 *
 * Memory: queue structs (64 bytes on LP64, one cache line each) come from
 * a pool grown 64 at a time (a directory of chunks that never move, since
 * timers point at the sentinels in them) and recycled through a free list;
 * the hash table (chained through the queue structs, power-of-two size, 64
 * buckets at first) doubles before the live queues would outnumber half its
 * buckets. Both grow only in a start before it changes anything, once its
 * lookup says it needs a new queue, so a start that cannot grow returns
 * -ENOMEM with nothing changed. Nothing shrinks before fini, and a queue is
 * back in the pool the moment it empties.
 *
 * Fields of struct spoke_timer while the timer is in a queue:
 *   sp_next      next (later) timer of the queue, or the queue's sentinel
 *                after the tail
 *   sp_link      previous (earlier) timer, a struct spoke_timer *, or the
 *                queue's sentinel before the head, with the first mark
 *                (clist.h: spoke_clist_init_marked)
 *   sp_deadline  set by this file's start (engine.c's arithmetic)
 * Unlinking sets both to NULL. Once collected the timer is unlinked first:
 * the due list (tlist.h) reuses sp_next and sp_link with its own meaning.
 */
#include "clist.h"
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>

#define LAWN_CHUNK_QUEUES 64
#define LAWN_MIN_BUCKETS  64

#define HEADS_BITS   8
#define HEADS_LEVELS 8 /* HEADS_LEVELS * HEADS_BITS == 64 */
#define HEADS_SLOTS  (HEADS_LEVELS << HEADS_BITS)
#define HEADS_WORDS  (HEADS_SLOTS / 64)
#define HEADS_MASK   ((1u << HEADS_BITS) - 1)

_Static_assert(HEADS_LEVELS *HEADS_BITS == 64, "the wheel of heads covers every deadline");
_Static_assert(HEADS_WORDS <= 64, "one summary word");

/*
 * The timers of one TTL, its key and its hash links: 64 bytes on LP64, and
 * the pool aligns them to 64, so a queue is one cache line (a start that
 * opens a queue and places its key, or a stop that closes it, touches one
 * line of it). The TTL is kept in the sentinel's deadline field, which no
 * code reads as a deadline (the first mark on the head's back link, not a
 * deadline of 0, tells the sentinel): that word pays for the hash chain's
 * back link, so a close unlinks its queue with stores only, without
 * reading its bucket (a cache miss at 1e5 queues, whose table is 2 MiB). No list of live queues:
 * rehash walks the pool, where a free queue has ttl_ticks 0.
 */
struct lawn_queue {
	/* in a heads slot at the head's deadline while live; its links stale while not */
	struct spoke_timer key;
	union {
		/*
		 * a marked clist: sp_next = head (earliest), sp_link = tail
		 * (latest); when empty, itself both ways, sp_link marked
		 */
		struct spoke_timer sentinel;
		struct {
			void *sentinel_links[2];
			uint64_t ttl_ticks; /* the hash key; 0 while the queue is free */
		};
	};
	struct lawn_queue *hash_next;	/* bucket chain, or the free list */
	struct lawn_queue **hash_pprev; /* what points at this one in the chain */
} __attribute__((aligned(64)));

_Static_assert(sizeof(void *) != 8 || sizeof(struct lawn_queue) == 64,
	       "a TTL queue is one cache line on LP64");

/* A block of the queue pool, freed only by fini. */
struct lawn_chunk {
	struct lawn_queue queues[LAWN_CHUNK_QUEUES];
};

struct lawn_engine {
	struct spoke_engine base;
	struct lawn_queue **buckets; /* nbuckets chain heads */
	size_t nbuckets;	     /* a power of two */
	unsigned bucket_shift;	     /* 64 - log2(nbuckets) */
	size_t nqueues;		     /* live queues: non-empty, in the table */
	/*
	 * min(queues in the pool, nbuckets / 2), recomputed when either
	 * grows: while nqueues is below it a start opens a queue with nothing
	 * to grow (every pool queue not live is on the free list).
	 */
	size_t open_limit;
	struct lawn_queue *free_queues; /* recycled queue structs */
	struct lawn_chunk **chunks;	/* the pool, by chunk number */
	size_t nchunks, chunks_cap;
	/* The wheel of heads (see the top): slot level * 256 + digit. */
	struct spoke_timer *heads;	/* HEADS_SLOTS sentinels, circular (clist.h) */
	uint64_t occupied[HEADS_WORDS]; /* bit s: slot s holds a key */
	uint64_t occupied_words;	/* bit w: occupied[w] != 0 */
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
	return q->sentinel.sp_next == &q->sentinel;
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
	struct lawn_queue **head = &l->buckets[b], *first = *head;

	q->hash_next = first;
	q->hash_pprev = head;
	if (first)
		first->hash_pprev = &q->hash_next;
	*head = q;
}

/* q is in the table: unlink it from its bucket's chain. */
static void hash_del(struct lawn_queue *q)
{
	*q->hash_pprev = q->hash_next;
	if (q->hash_next)
		q->hash_next->hash_pprev = q->hash_pprev;
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
		c->queues[i].hash_next = l->free_queues;
		l->free_queues = &c->queues[i];
	}
	l->chunks[l->nchunks++] = c;
	return 0;
}

/* ---- the wheel of heads ---- */

/* Slot s is empty now: clear its bit, and its word's summary bit if that was the last. */
static void heads_clear(struct lawn_engine *l, size_t s)
{
	uint64_t left = l->occupied[s / 64] & ~(1ull << (s % 64));

	l->occupied[s / 64] = left;
	l->occupied_words &= ~((uint64_t)(left == 0) << (s / 64));
}

/*
 * Put key, whose sp_deadline is > now, on the slot of the highest digit in
 * which its deadline differs from now (see the top). Setting bits that are
 * set already is harmless, so neither is tested first.
 */
static inline __attribute__((always_inline)) void heads_place(struct lawn_engine *l,
							      struct spoke_timer *key)
{
	uint64_t d = key->sp_deadline;
	unsigned shift = (unsigned)(63 - __builtin_clzll(d ^ l->base.now)) & -HEADS_BITS;
	size_t s =
		((size_t)(shift / HEADS_BITS) << HEADS_BITS) | (size_t)((d >> shift) & HEADS_MASK);

	l->occupied[s / 64] |= 1ull << (s % 64);
	l->occupied_words |= 1ull << (s / 64);
	spoke_clist_append(&l->heads[s], key);
}

/* Take a key off its slot; the neighbours tell whether that emptied it. */
static void heads_unlink(struct lawn_engine *l, struct spoke_timer *key)
{
	struct spoke_timer *emptied = spoke_clist_del(key); /* the slot's sentinel, if so */

	if (emptied)
		heads_clear(l, (size_t)(emptied - l->heads));
}

/* Move q's key, pending or not, to the deadline of its head. */
static void key_place(struct lawn_engine *l, struct lawn_queue *q)
{
	q->key.sp_deadline = queue_head(q)->sp_deadline;
	heads_place(l, &q->key);
}

/* ---- the queues ---- */

/* What lets a start open a queue with nothing to grow (see open_limit). */
static void set_open_limit(struct lawn_engine *l)
{
	size_t pooled = l->nchunks * LAWN_CHUNK_QUEUES, half = l->nbuckets / 2;

	l->open_limit = pooled < half ? pooled : half;
}

/* Take a queue from the free list (nqueues < open_limit: there is one). */
static struct lawn_queue *queue_open(struct lawn_engine *l, size_t b, uint64_t ttl_ticks)
{
	struct lawn_queue *q = l->free_queues;

	l->free_queues = q->hash_next;
	spoke_clist_init_marked(&q->sentinel);
	q->ttl_ticks = ttl_ticks;
	hash_add(l, b, q);
	l->nqueues++;
	return q;
}

/* Drop a queue, empty and with its key on no slot, from the table, back to the pool. */
static void queue_close(struct lawn_engine *l, struct lawn_queue *q)
{
	hash_del(q);
	q->ttl_ticks = 0;
	q->hash_next = l->free_queues;
	l->free_queues = q;
	l->nqueues--;
}

/*
 * Room for one more queue: a free one in the pool, and the table at most
 * half full after it. Before anything changes, so that a start that cannot
 * grow returns -ENOMEM with t as it was. 0 or -ENOMEM.
 */
static int queue_reserve(struct lawn_engine *l)
{
	int err = 0;

	if (!l->free_queues)
		err = pool_grow(l);
	if (!err && l->nqueues + 1 > l->nbuckets / 2) {
		if (l->nbuckets > SIZE_MAX / 2 / sizeof(*l->buckets))
			err = -ENOMEM;
		else
			err = rehash(l, l->nbuckets * 2);
	}
	set_open_limit(l);
	return err;
}

/* q's key, off its slot, is due now: move the due run, then re-place the key or close q. */
static void key_due(struct lawn_engine *l, struct lawn_queue *q)
{
	spoke_clist_move_due(&q->sentinel, l->base.now, &l->base.due);
	if (queue_empty(q))
		queue_close(l, q);
	else
		key_place(l, q);
}

/*
 * Empty slot s, the first occupied one, at now, a tick no later than the
 * deadline of any of its keys: each key due now has its due run moved to
 * the due list, every other one goes to a lower level (see the top). No
 * key returns to s: a key placed at s's level has a digit there above
 * now's, which is s's. So the slot is emptied first and its list walked
 * as it was, each placement rewriting the key's links.
 */
static void heads_cascade(struct lawn_engine *l, size_t s)
{
	struct spoke_timer *head = &l->heads[s], *key = head->sp_next;

	spoke_clist_init(head);
	heads_clear(l, s);
	while (key != head) {
		struct spoke_timer *next = key->sp_next;

		if (key->sp_deadline == l->base.now)
			key_due(l, queue_of_key(key));
		else
			heads_place(l, key);
		key = next;
	}
}

/* The first occupied slot: the earliest keys (see the top). occupied_words != 0. */
static size_t heads_first(const struct lawn_engine *l)
{
	unsigned w = (unsigned)__builtin_ctzll(l->occupied_words);

	return (size_t)w * 64 + (size_t)__builtin_ctzll(l->occupied[w]);
}

/* The first tick of slot s: now's digits above its level, its digit, zeros below. */
static uint64_t heads_slot_tick(const struct lawn_engine *l, size_t s)
{
	unsigned shift = (unsigned)(s >> HEADS_BITS) * HEADS_BITS;
	/* 2 << 63 is 0: the top level has no digits above it */
	uint64_t upper = l->base.now & ~((2ull << (shift + HEADS_BITS - 1)) - 1);

	return upper | (uint64_t)(s & HEADS_MASK) << shift;
}

/*
 * q's key, off its slot, is due now: fire its head, alone due (the next
 * timer of q is due later, or there is none) with no due list: q's key is
 * placed again or q closed first, so that fn finds the engine as after any
 * stop. Ties (timers of one TTL started at one tick) go through the due
 * list (key_due).
 */
static size_t key_fire(struct lawn_engine *l, struct lawn_queue *q, spoke_expire_fn *fn, void *ctx)
{
	struct spoke_timer *t = queue_head(q), *next = t->sp_next;

	if (next != &q->sentinel && next->sp_deadline <= l->base.now) {
		key_due(l, q);
		return spoke_fire_due(&l->base, fn, ctx);
	}
	(void)spoke_clist_del(t);
	if (next == &q->sentinel)
		queue_close(l, q);
	else
		key_place(l, q);
	return spoke_fire_one(&l->base, t, fn, ctx);
}

/* ---- the operations ---- */

static int lawn_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct lawn_engine *l = to_lawn(e);
	int err;

	(void)p;
	l->heads = malloc(HEADS_SLOTS * sizeof(*l->heads));
	if (!l->heads)
		return -ENOMEM;
	for (size_t s = 0; s < HEADS_SLOTS; s++)
		spoke_clist_init(&l->heads[s]);
	err = rehash(l, LAWN_MIN_BUCKETS);
	if (err)
		free(l->heads);
	set_open_limit(l);
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
	free(l->heads);
	l->heads = NULL;
}

/*
 * The end of the start of t, not pending, with ttl_ticks > 0, into q (the
 * live queue of ttl_ticks) or, when q is NULL, into a new queue in bucket
 * b (nqueues < open_limit), whose key it places (a start into a live queue
 * does not change its head).
 */
static inline __attribute__((always_inline)) int start_into(struct lawn_engine *l,
							    struct spoke_timer *t,
							    struct lawn_queue *q, size_t b,
							    uint64_t ttl_ticks)
{
	uint64_t d = l->base.now + ttl_ticks;

	t->sp_deadline = d;
	l->base.count++;
	if (q) {
		spoke_clist_append(&q->sentinel, t);
		return 0;
	}
	q = queue_open(l, b, ttl_ticks);
	spoke_clist_append(&q->sentinel, t);
	q->key.sp_deadline = d; /* key_place, inline: t is the head */
	heads_place(l, &q->key);
	return 0;
}

/*
 * Every start lawn_start leaves: the end of time, a re-arm, a new queue
 * that needs the pool or the table to grow. Room is reserved for a new
 * queue before a pending t is unlinked; that unlink may close q itself (t
 * was its only timer); its ttl_ticks is 0 then, and the queue it freed is
 * the one this start reopens.
 */
static __attribute__((noinline)) int start_slow(struct spoke_engine *e, struct spoke_timer *t,
						uint64_t ttl_ticks)
{
	struct lawn_engine *l = to_lawn(e);
	struct lawn_queue *q;
	size_t b;

	if (ttl_ticks == 0) { /* the end of time: due at once */
		if (spoke_timer_pending(t))
			spoke_unlink_pending(e, t);
		(void)spoke_arm(e, t, e->now);
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
	if (spoke_timer_pending(t)) {
		spoke_unlink_pending(e, t);
		if (q && q->ttl_ticks != ttl_ticks)
			q = NULL;
	}
	return start_into(l, t, q, b, ttl_ticks);
}

/*
 * The whole start, in place of engine.c's admit + insert (engine_impl.h):
 * one lookup of the TTL, and the common case (t not pending, a live queue
 * or room for a new one) with no call, so with no stack frame.
 */
static int lawn_start(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks)
{
	struct lawn_engine *l = to_lawn(e);
	uint64_t ttl_ticks = ttl_of_delay(e->now, delay_ticks);
	struct lawn_queue *q;
	size_t b;

	if (__builtin_expect(ttl_ticks == 0 || spoke_timer_pending(t), 0))
		return start_slow(e, t, ttl_ticks);
	b = bucket_of(l, ttl_ticks);
	q = lookup(l, b, ttl_ticks);
	if (__builtin_expect(!q && l->nqueues >= l->open_limit, 0))
		return start_slow(e, t, ttl_ticks);
	return start_into(l, t, q, b, ttl_ticks);
}

static void lawn_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	struct lawn_engine *l = to_lawn(e);
	void *link = t->sp_link;
	struct spoke_timer *emptied = spoke_clist_del(t);

	if (emptied) {
		struct lawn_queue *q = queue_of_sentinel(emptied);

		heads_unlink(l, &q->key);
		queue_close(l, q);
	} else if (spoke_clist_first(link)) {
		struct lawn_queue *q = queue_of_sentinel(spoke_clist_node(link));

		heads_unlink(l, &q->key);
		key_place(l, q);
	}
}

/*
 * The first occupied slot's first tick, or UINT64_MAX with no key: the
 * clock may not pass it with the slot in place (see the top).
 */
static uint64_t heads_first_tick(const struct lawn_engine *l)
{
	return l->occupied_words ? heads_slot_tick(l, heads_first(l)) : UINT64_MAX;
}

/*
 * The first occupied slot's first tick, or the deadline of a key alone
 * there, which advance() fires with no cascade: a tickless caller reaches
 * each such key in one step.
 */
static uint64_t lawn_next_event(struct spoke_engine *e)
{
	struct lawn_engine *l = to_lawn(e);
	struct spoke_timer *head, *key;
	size_t s;

	if (!l->occupied_words)
		return UINT64_MAX;
	s = heads_first(l);
	head = &l->heads[s];
	key = head->sp_next;
	return key->sp_next == head ? key->sp_deadline : heads_slot_tick(l, s);
}

/*
 * The loop of advance(). The first occupied slot holds the earliest keys
 * (see the top). A key alone there is the next event itself: when it is
 * due by the target the clock jumps to its deadline and it is taken off
 * and fired (key_fire), with no cascade (no other slot's first tick comes
 * before it). Any other first slot is cascaded at its first tick, and what
 * that makes due is fired: a slot of several keys due at one tick is
 * collected whole before anything fires, since a timer due now but still
 * in its queue would not be found by a stop (engine_impl.h). Like this, the
 * clock never passes a slot's first tick with the slot in place.
 */
static inline size_t lawn_advance_to(struct spoke_engine *e, uint64_t target, spoke_expire_fn *fn,
				     void *ctx)
{
	struct lawn_engine *l = to_lawn(e);
	size_t fired = 0;

	while (l->occupied_words) {
		size_t s = heads_first(l);
		struct spoke_timer *head = &l->heads[s], *key = head->sp_next;
		uint64_t tick;

		if (key->sp_next == head && key->sp_deadline <= target) {
			e->now = key->sp_deadline;
			spoke_clist_init(head);
			heads_clear(l, s);
			fired += key_fire(l, queue_of_key(key), fn, ctx);
			continue;
		}
		tick = heads_slot_tick(l, s);
		if (tick > target)
			break;
		e->now = tick;
		heads_cascade(l, s);
		fired += spoke_fire_due(e, fn, ctx);
	}
	return fired;
}

static __attribute__((noinline)) size_t lawn_advance_busy(struct spoke_engine *e, uint64_t ticks,
							  spoke_expire_fn *fn, void *ctx)
{
	return spoke_advance_with(e, ticks, fn, ctx, lawn_advance_to);
}

/*
 * advance(): one that finds nothing to do (the first slot's first tick
 * past the target) only moves the clock, with no call and no stack frame:
 * the tick-by-tick caller's common case.
 */
static size_t lawn_advance(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx)
{
	if (spoke_advance_idle(e, ticks, heads_first_tick(to_lawn(e))))
		return 0;
	return lawn_advance_busy(e, ticks, fn, ctx);
}

const struct spoke_engine_ops spoke_lawn_ops = {
	.name = "lawn",
	.size = sizeof(struct lawn_engine),
	.init = lawn_init,
	.fini = lawn_fini,
	.start = lawn_start,
	.remove = lawn_remove,
	.next_event = lawn_next_event,
	.advance = lawn_advance,
};
