/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool.h - how a worker of the pool is woken for a queue's work, inline: by
 * the producer, a shard's holder handing a claimed run to its shard's pool
 * queue (shard.c owner_dispatch), and by a worker that finds more behind
 * what it took (pool.c). pool.c (the queues, their workers) says how they
 * work. Here, not in pool.c, because the turn that dispatches (shard.c) is
 * a floor below the workers, which run callbacks and rescue shards.
 */
#ifndef SPOKE_PERCPU_POOL_H
#define SPOKE_PERCPU_POOL_H

#include "service.h"

/*
 * How many queues a worker steals from, and a producer wakes a sleeper of,
 * besides its own: the next ones around the ring (a worker of queue q
 * steals from q-1 .. q-n, a producer on q wakes in q+1 .. q+n, so whoever
 * it wakes steals from q). Bounded, so that an idle worker on a machine
 * with many shards does not look at every queue before it sleeps.
 */
#define POOL_NEIGHBOURS 8

static inline unsigned pool_neighbours(const struct spoke *s)
{
	return s->npools - 1 < POOL_NEIGHBOURS ? s->npools - 1 : POOL_NEIGHBOURS;
}

/* Wake a sleeper of one of q's n neighbours (which then steals from q); false: none asleep. */
static inline bool pool_wake_neighbour(struct spoke *s, struct pool_queue *q, unsigned n)
{
	unsigned k = q->index;

	/* n < npools: the ring wraps at most once, without a division. */
	for (unsigned j = 1; j <= n; j++) {
		k = k + 1 < s->npools ? k + 1 : 0;
		if (spoke_ec_wake_if_sleeping(&s->pools[k].wake_seq, &s->pools[k].sleepers))
			return true;
	}
	return false;
}

/*
 * Wake a worker for q's new or remaining work: one of q's own sleepers, or
 * else one of its neighbours' (which then steals from q). No sleeper
 * anywhere near: q's workers are awake and will take it. The full fence
 * pairs with the sleeper's (eventcount.c), whose has_work looks at q.
 */
static inline void pool_wake_helper(struct spoke *s, struct pool_queue *q, unsigned n)
{
	spoke_full_fence();
	if (!spoke_ec_wake_if_sleeping(&q->wake_seq, &q->sleepers))
		(void)pool_wake_neighbour(s, q, n);
}

/*
 * pool_wake_helper for a rescuer's dispatch: a neighbour's sleeper first.
 * q's own workers are woken by the stalled shard's thread, so they tend to
 * run on its CPU, which the stall may be keeping from them too: woken
 * there, they could not run, and nobody else would look at q until a
 * worker woke for its own reasons.
 */
static inline void pool_wake_for_rescue(struct spoke *s, struct pool_queue *q, unsigned n)
{
	spoke_full_fence();
	if (!pool_wake_neighbour(s, q, n))
		(void)spoke_ec_wake_if_sleeping(&q->wake_seq, &q->sleepers);
}

#endif /* SPOKE_PERCPU_POOL_H */
