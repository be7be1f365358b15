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
 * fired) plus the key cascades of the wheel. Memory: 88 bytes per live
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
 * Memory: queue structs (88 bytes on LP64) come from a pool grown 64 at a
 * time (a directory of chunks that never move, since timers point at the
 * sentinels in them) and recycled through a free list; the hash table
 * (chained through the queue structs, power-of-two size, 64 buckets at
 * first) doubles before the live queues would outnumber half its buckets.
 * Both grow only in admit(), which looks the TTL up to know whether a start
 * will need a new queue, so insert() never fails and a start that cannot
 * grow returns -ENOMEM with nothing changed. Nothing shrinks before fini.
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
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>

#define LAWN_CHUNK_QUEUES 64
#define LAWN_MIN_BUCKETS  64

/*
 * The timers of one TTL, and the links that find it. The field order is
 * measured, not arbitrary: with live_next next to the sentinel's head link,
 * collect's walk over the queues was 9 % slower (commit 43034e4 says why).
 */
struct lawn_queue {
	uint64_t ttl_ticks; /* the hash key */
	/* sp_next = head (earliest), sp_link = tail (latest); itself both ways when empty */
	struct spoke_timer sentinel;
	struct lawn_queue *hash_next;		  /* bucket chain */
	struct lawn_queue **hash_pprev;		  /* what points at us in the chain */
	struct lawn_queue *live_next, *live_prev; /* live list; live_next links the free list */
	struct spoke_timer key; /* in `heads` at (or before) the head's deadline */
};

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
	struct lawn_queue *live_queues; /* every live queue */
	struct lawn_queue *free_queues; /* recycled queue structs */
	struct lawn_chunk **chunks;	/* the pool, by chunk number */
	size_t nchunks, chunks_cap;
	struct spoke_engine *heads; /* `hierarchical`: one key per live queue */
	/*
	 * next_event()'s last answer, while next_known: never later than the
	 * earliest key (arming a key lowers it; moving or stopping the key it
	 * names forgets it), so empty ticks do not ask the heads engine.
	 */
	uint64_t next_tick;
	bool next_known;
	/* admit()'s lookup, for the insert() that follows it (see lawn_insert) */
	struct lawn_queue *hint_queue;
	uint64_t hint_ttl;
	bool hint_valid;
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

static struct lawn_queue *lookup(const struct lawn_engine *l, uint64_t ttl_ticks)
{
	struct lawn_queue *q = l->buckets[bucket_of(l, ttl_ticks)];

	while (q && q->ttl_ticks != ttl_ticks)
		q = q->hash_next;
	return q;
}

static void hash_add(struct lawn_engine *l, struct lawn_queue *q)
{
	struct lawn_queue **head = &l->buckets[bucket_of(l, q->ttl_ticks)];

	q->hash_next = *head;
	if (*head)
		(*head)->hash_pprev = &q->hash_next;
	*head = q;
	q->hash_pprev = head;
}

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

/* Switch to a table of nbuckets (a power of two); rehash from the live list. */
static int rehash(struct lawn_engine *l, size_t nbuckets)
{
	struct lawn_queue **buckets = calloc(nbuckets, sizeof(*buckets));

	if (!buckets)
		return -ENOMEM;
	free(l->buckets);
	l->buckets = buckets;
	l->nbuckets = nbuckets;
	l->bucket_shift = 64 - log2_of(nbuckets);
	for (struct lawn_queue *q = l->live_queues; q; q = q->live_next)
		hash_add(l, q);
	return 0;
}

/* ---- queue pool and live list ---- */

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
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = LAWN_CHUNK_QUEUES; i-- > 0;) {
		c->queues[i].live_next = l->free_queues;
		l->free_queues = &c->queues[i];
	}
	l->chunks[l->nchunks++] = c;
	return 0;
}

/* Take a queue from the free list (admit saw to it that there is one). */
static struct lawn_queue *queue_open(struct lawn_engine *l, uint64_t ttl_ticks)
{
	struct lawn_queue *q = l->free_queues;

	l->free_queues = q->live_next;
	q->ttl_ticks = ttl_ticks;
	spoke_clist_init(&q->sentinel);
	q->sentinel.sp_deadline = 0; /* tells the sentinel from a timer (lawn_remove) */
	spoke_timer_init(&q->key);
	hash_add(l, q);
	q->live_prev = NULL;
	q->live_next = l->live_queues;
	if (l->live_queues)
		l->live_queues->live_prev = q;
	l->live_queues = q;
	l->nqueues++;
	return q;
}

/* The key is about to move or stop: forget next_tick if the key defined it. */
static void key_leaving(struct lawn_engine *l, struct lawn_queue *q)
{
	if (spoke_timer_pending(&q->key) && spoke_timer_deadline(&q->key) == l->next_tick)
		l->next_known = false;
}

/* Drop an empty queue from the table and the live list, back to the pool. */
static void queue_close(struct lawn_engine *l, struct lawn_queue *q)
{
	key_leaving(l, q);
	(void)spoke_engine_stop(l->heads, &q->key); /* -ENOENT if it just fired */
	l->hint_valid = false;
	hash_del(q);
	if (q->live_prev)
		q->live_prev->live_next = q->live_next;
	else
		l->live_queues = q->live_next;
	if (q->live_next)
		q->live_next->live_prev = q->live_prev;
	q->live_next = l->free_queues;
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
	l->live_queues = l->free_queues = NULL;
	spoke_engine_free(l->heads);
	l->heads = NULL;
}

/*
 * A start needs a new queue only for a TTL not in the table; then make
 * sure the pool has a free queue and the table stays at most half full.
 * If the timer is re-armed its old queue may empty and be recycled before
 * insert(), which only adds to the free list.
 */
static int lawn_admit(struct spoke_engine *e, uint64_t delay_ticks)
{
	struct lawn_engine *l = to_lawn(e);
	uint64_t ttl_ticks = ttl_of_delay(e->now, delay_ticks);
	struct lawn_queue *q;
	int err;

	if (ttl_ticks == 0) /* end of time: the timer goes to the due list */
		return 0;
	q = lookup(l, ttl_ticks);
	l->hint_queue = q;
	l->hint_ttl = ttl_ticks;
	l->hint_valid = true;
	if (q) /* a known TTL */
		return 0;
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

/* Arm q's key at its head's deadline (after the heads engine's clock). */
static void key_arm(struct lawn_engine *l, struct lawn_queue *q)
{
	key_leaving(l, q);
	(void)spoke_engine_start(l->heads, &q->key,
				 queue_head(q)->sp_deadline - spoke_engine_now(l->heads));
	if (spoke_timer_deadline(&q->key) < l->next_tick)
		l->next_tick = spoke_timer_deadline(&q->key);
}

/*
 * The queue of t's TTL: admit() looked it up just before (a re-arm's
 * unlink in between may only close a queue, and queue_close forgets the
 * hint), so the hint saves the second lookup.
 */
static void lawn_insert(struct spoke_engine *e, struct spoke_timer *t)
{
	struct lawn_engine *l = to_lawn(e);
	uint64_t ttl_ticks = t->sp_deadline - e->now;
	struct lawn_queue *q;

	if (l->hint_valid && l->hint_ttl == ttl_ticks)
		q = l->hint_queue;
	else
		q = lookup(l, ttl_ticks);
	l->hint_valid = false;
	if (q) {
		spoke_clist_append(&q->sentinel, t);
		return;
	}
	q = queue_open(l, ttl_ticks);
	spoke_clist_append(&q->sentinel, t);
	key_arm(l, q);
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
	.admit = lawn_admit,
	.insert = lawn_insert,
	.remove = lawn_remove,
	.next_event = lawn_next_event,
	.collect = lawn_collect,
};
