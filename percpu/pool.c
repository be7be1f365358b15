/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool.c - the callback pool: its queues and the workers that take expired
 * handles off them and run them (through run.c), and watch for stalled
 * shards while idle (rescue.c).
 *
 * Pool: callback_threads workers in pool queues (struct pool_queue), one per
 * shard (with fewer workers than shards, one per worker, shard k using queue
 * k mod queues): a shard hands its expired handles to its own queue, and its
 * own workers take them; no queue, lock or wake-up word is shared by all
 * shards. A worker whose queue is empty steals from its neighbours' (the
 * next POOL_NEIGHBOURS queues below its own around the ring) before it
 * sleeps; a producer that finds no worker of the queue asleep wakes one of
 * the neighbours that steal from it (pool_wake_helper), so an idle worker
 * nearby takes a callback that would otherwise wait behind a long one. A
 * stolen handle is run exactly as one of the worker's own (worker_run): the
 * attach handshake looks at every worker's busy_shard, whichever queue it
 * took the handle from.
 *
 * A handle is on a pool queue only while DISPATCHED; a cancel that wins in that window
 * (DISPATCHED -> CANCELLED) prevents the run, and the worker then just frees
 * it. So a callback that cancel_syncs a timer still queued does not wait:
 * that timer is not running, and the cancel wins. A reset that wins there
 * (RESET) moves the run: the worker hands the handle back to its owner,
 * armed for the reset's deadline. A timer is pending until its callback
 * starts, for cancel and reset alike. A worker runs a callback
 * only if its shard is managed; else (attached, being attached or detached,
 * unowned: spoke_any_takes_back_runs) it hands the handle back to the
 * shard (shard.c spoke_runner_recall), whose owner runs it inline.
 *
 * Spares. A callback blocked until a later timer fires (a condition that
 * timer's callback signals) holds its worker; if every worker that could
 * run that later timer is held so, it would wait until one of them gave
 * up. So the pool grows: a shard's managed thread, after each turn, looks
 * at its queue (spoke_owner_watch_pool); if a handle has stayed on it for
 * rescue_after_ns while no worker took any (the queue's `taken` mark did
 * not move) and none of its workers is asleep, it starts a spare worker
 * homed on that queue, up to callback_spares in the pool, at most one per
 * shard per rescue_after_ns. A spare is a worker like the others (it
 * steals, watches, shows busy_shard to an attach) and leaves after
 * SPARE_IDLE_NS without a callback. Its slot (the nspares after the pool's
 * own workers) goes
 *
 *   FREE --(spawner: CAS)--> STARTING --(spawner: thread started)--> RUNNING
 *   RUNNING --(the spare, idle: CAS)--> LEFT --(a spawner: CAS, join)--> STARTING
 *   STARTING --(spawner: no thread could start)--> FREE
 *
 *   word            written by                       read by
 *   spare_state     spawners (CAS from FREE, LEFT;   spawners, the spare,
 *                   release of RUNNING), the spare   destroy (after the shard
 *                   (RUNNING -> LEFT)                threads are joined)
 *   thread, home    the spawner holding STARTING     the spare (pthread_create
 *                                                    orders it), whoever takes
 *                                                    LEFT (acquire) and joins
 *   taken           takers, under the consumer lock  the managed threads
 *   spares,         spawner (+1 before the thread    spoke_stats
 *   spares_started  starts, -1 if it cannot), leaving
 *                   spare (spares -1)
 *
 * A spare leaves only from RUNNING, which its spawner stores after
 * pthread_create wrote `thread`: whoever joins it has seen that write.
 * Destroy joins the RUNNING and LEFT ones once no spawner is left (the
 * managed threads are joined first: api_lifecycle.c stop_threads).
 *
 * The queues' producer is a shard's holder (shard.c owner_dispatch); the
 * wake-up of a worker, which producer and workers share, is inline in
 * pool.h; running a callback is run.c's.
 */
#define _GNU_SOURCE
#include "pool.h"
#include "probes.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local const struct spoke *tls_pool_of; /* this thread is a worker of its pool */

/* A spare that ran no callback for this long leaves. */
#define SPARE_IDLE_NS 2000000000ull

/*
 * Is the caller a pool worker, of any instance? A callback on one
 * instance's pool that waited for another instance's pool (an attach) could
 * be waited for by a callback there doing the same: the two never return.
 */
bool spoke_on_pool_thread(void)
{
	return tls_pool_of != NULL;
}

/* The instance whose pool worker the calling thread is, or NULL. */
const struct spoke *spoke_pool_of_thread(void)
{
	return tls_pool_of;
}

/* --- workers ---------------------------------------------------------------- */

/*
 * Consumers look at the queue only under its consumer lock: a dequeue that
 * empties the queue re-initializes the head node with a plain store, which
 * a lock-free cds_wfcq_empty() in another consumer would race with.
 */
static bool pool_nonempty_locked(struct pool_queue *q)
{
	bool r;

	cds_wfcq_dequeue_lock(&q->head, &q->tail);
	r = !cds_wfcq_empty(&q->head, &q->tail);
	cds_wfcq_dequeue_unlock(&q->head, &q->tail);
	return r;
}

/*
 * A look at a neighbour's queue without its lock (and without writing its
 * lock's line): only the tail pointer, which every writer changes
 * atomically (enqueue's exchange, the emptying dequeue's compare-and-swap).
 * true also while a producer still links its node, or a dequeue empties it.
 */
static bool pool_peek(struct pool_queue *q)
{
	return uatomic_read(&q->tail.p) != &q->head.node;
}

/* The queues w steals from. */
static struct pool_queue *pool_victim(struct pool_worker *w, unsigned j)
{
	struct spoke *s = w->s;

	return &s->pools[(w->home + s->npools - j) % s->npools];
}

/* A worker's nap while a producer links its node: only destroy ends it early. */
static bool pool_stopping(void *arg)
{
	const struct pool_worker *w = arg;

	return atomic_load_explicit(&w->s->pool_stop, memory_order_acquire);
}

static bool pool_has_work(void *arg)
{
	struct pool_worker *w = arg;
	struct spoke *s = w->s;
	unsigned n = pool_neighbours(s);

	if (atomic_load_explicit(&s->pool_stop, memory_order_acquire) ||
	    pool_nonempty_locked(&s->pools[w->home]))
		return true;
	for (unsigned j = 1; j <= n; j++)
		if (pool_peek(pool_victim(w, j)))
			return true;
	/* A shard it watches made earlier since its look (rescue.c spoke_watcher_look_moved). */
	for (unsigned k = w->home; k < s->nshards; k += s->npools)
		if (spoke_watcher_look_moved(&s->shards[k], w->looked_ns, w->look_at_ns))
			return true;
	return false;
}

/*
 * One handle off queue q, or NULL (empty, or a producer still linking);
 * neighbours: pool_neighbours. Inline: it is the whole of a worker's step
 * between runs.
 */
static inline __attribute__((always_inline)) struct spoke_handle *
pool_take(struct spoke *s, struct pool_queue *q, unsigned neighbours, bool *linking)
{
	struct cds_wfcq_node *n;
	bool more;

	cds_wfcq_dequeue_lock(&q->head, &q->tail);
	n = __cds_wfcq_dequeue_nonblocking(&q->head, &q->tail);
	more = !cds_wfcq_empty(&q->head, &q->tail);
	if (n && n != CDS_WFCQ_WOULDBLOCK)
		atomic_store_explicit(&q->taken,
				      atomic_load_explicit(&q->taken, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	cds_wfcq_dequeue_unlock(&q->head, &q->tail);
	*linking |= n == CDS_WFCQ_WOULDBLOCK;
	if (!n || n == CDS_WFCQ_WOULDBLOCK)
		return NULL;
	/* More waiting: wake a helper before this callback perhaps runs long. */
	if (more)
		pool_wake_helper(s, q, neighbours);
	return caa_container_of(n, struct spoke_handle, qnode);
}

/* w's next handle: its own queue's first, else a neighbour's; NULL: none. */
static struct spoke_handle *pool_next(struct pool_worker *w, bool *linking)
{
	struct spoke *s = w->s;
	unsigned n = pool_neighbours(s);
	struct spoke_handle *h = pool_take(s, &s->pools[w->home], n, linking);

	for (unsigned j = 1; !h && j <= n; j++) {
		struct pool_queue *v = pool_victim(w, j);

		if (pool_peek(v))
			h = pool_take(s, v, n, linking);
	}
	return h;
}

/*
 * Worker: may h's callback run here? The worker shows which shard it is
 * about to run (busy_shard) and looks at the shard's mode second; the
 * attach does the mirror image (mode first, then the heavy fence, then its
 * managed thread looks at busy_shard): so either the managed thread sees
 * this run and waits for it, or this worker sees the attach and hands h
 * back to the shard (spoke_runner_recall). No callback of an attached shard
 * starts on the pool. Once destroy has stopped the shards, a callback that
 * has not started never runs (spoke_destroy): h is left as it is, and
 * freed with its arena. At the end, a waiting managed thread is woken; if
 * that wake-up is missed (the mode read before busy_shard is seen clear),
 * it looks again within POOL_RECHECK_NS (managed.c).
 */
static void worker_run(struct pool_worker *w, struct spoke_handle *h)
{
	struct spoke *s = w->s;
	/* The owner shard is fixed for h's generation, which the run may end. */
	struct shard *sh =
		&s->shards[spoke_st_shard(atomic_load_explicit(&h->state, memory_order_acquire))];
	int mode;

	atomic_store_explicit(&w->busy_shard, sh->index + 1, memory_order_release);
	spoke_light_fence(s);
	mode = atomic_load_explicit(&sh->mode, memory_order_acquire);
	/* A movable timer may run here whoever drives its shard (rescue.c). */
	if (spoke_any_takes_back_runs(mode) &&
	    !(atomic_load_explicit(&h->state, memory_order_relaxed) & SPOKE_ST_MOVABLE))
		spoke_runner_recall(sh, h);
	else if (mode != SHARD_STOPPING)
		spoke_runner_run(sh, h);
	atomic_store_explicit(&w->busy_shard, 0, memory_order_release);
	if (atomic_load_explicit(&sh->mode, memory_order_relaxed) == SHARD_ATTACHING)
		spoke_any_nudge(sh, 0);
}

/*
 * Worker, idle: look at the shards whose callbacks come to its queue, and
 * rescue one that is stalled (rescue.c); the ns until it should look again
 * (-1: never), which its queue records for whoever lowers a shard's due.
 */
static int64_t worker_watch(struct pool_worker *w)
{
	struct spoke *s = w->s;
	uint64_t now = spoke_clock_ns();
	int64_t next = -1;

	for (unsigned k = w->home; k < s->nshards; k += s->npools)
		next = spoke_sooner_ns(next, spoke_watcher_look(&s->shards[k], now));
	w->looked_ns = now;
	w->look_at_ns = next < 0 ? UINT64_MAX : now + (uint64_t)next;
	SPOKE_HOOK(SPOKE_HOOK_WATCHER_LOOKED);
	atomic_store_explicit(&s->pools[w->home].watch_until_ns, w->look_at_ns,
			      memory_order_release);
	return next;
}

/*
 * A spare, idle since idle_since: leave if it has been SPARE_IDLE_NS (true),
 * else lower *wait_ns to when it would be.
 */
static bool spare_idle(struct pool_worker *w, uint64_t idle_since, int64_t *wait_ns)
{
	uint64_t now = spoke_clock_ns();
	int running = SPARE_RUNNING;

	if (now - idle_since < SPARE_IDLE_NS) {
		*wait_ns = spoke_sooner_ns(*wait_ns, (int64_t)(idle_since + SPARE_IDLE_NS - now));
		return false;
	}
	/* Still STARTING: its spawner has not recorded the thread yet; stay a while. */
	if (!atomic_compare_exchange_strong_explicit(&w->spare_state, &running, SPARE_LEFT,
						     memory_order_acq_rel, memory_order_acquire)) {
		*wait_ns = spoke_sooner_ns(*wait_ns, (int64_t)SPARE_IDLE_NS);
		return false;
	}
	atomic_fetch_sub_explicit(&w->s->spares, 1, memory_order_relaxed);
	return true;
}

static void *worker_main(void *arg)
{
	struct pool_worker *w = arg;
	struct spoke *s = w->s;
	bool spare = w - s->workers >= s->nworkers; /* a slot after the pool's own */
	uint64_t idle_since = spare ? spoke_clock_ns() : 0;

	tls_pool_of = s;
	spoke_runner_watch_exit();
	if (spare)
		spoke_thread_name("spare", (unsigned)(w - s->workers) - s->nworkers);
	else
		spoke_thread_name("pool", (unsigned)(w - s->workers));
	spoke_thread_adopt_sched(s);
	while (!atomic_load_explicit(&s->pool_stop, memory_order_acquire)) {
		bool linking = false;
		struct spoke_handle *h = pool_next(w, &linking);
		int64_t wait_ns;

		if (h) {
			worker_run(w, h);
			if (spare)
				idle_since = spoke_clock_ns();
			continue;
		}
		/*
		 * Asleep until work, or until a shard it watches would count as
		 * stalled; 50 us when a producer is still linking its node (only a
		 * new enqueue or destroy wakes it sooner: the queue it is stuck on
		 * counts as work to pool_has_work, which would let it spin on it
		 * instead).
		 */
		wait_ns = spoke_sooner_ns(linking ? 50000 : -1, worker_watch(w));
		if (spare && spare_idle(w, idle_since, &wait_ns))
			break;
		if (linking)
			SPOKE_HOOK(SPOKE_HOOK_POOL_LINK_NAP);
		spoke_ec_sleep(&s->pools[w->home].wake_seq, &s->pools[w->home].sleepers,
			       linking ? pool_stopping : pool_has_work, w, wait_ns);
	}
	return NULL;
}

/*
 * Queues and workers: with callback_threads_per_shard, that many workers
 * per shard, each shard its own queue; else callback_threads workers dealt
 * round-robin over min(shards, workers) queues, shard k on queue k mod
 * queues (spoke_create has set s->nworkers to the total).
 */
int spoke_pool_start(struct spoke *s)
{
	if (s->nworkers == 0)
		return 0;
	s->npools = s->nworkers < s->nshards ? s->nworkers : s->nshards;
	s->nspares = s->cfg.callback_spares;
	s->pools = spoke_zalloc_lines(s->npools, sizeof(*s->pools));
	s->workers = spoke_zalloc_lines(s->nworkers + s->nspares, sizeof(*s->workers));
	if (!s->pools || !s->workers) {
		free(s->pools);
		free(s->workers);
		s->pools = NULL;
		s->workers = NULL;
		return -ENOMEM;
	}
	for (unsigned k = 0; k < s->npools; k++) {
		cds_wfcq_init(&s->pools[k].head, &s->pools[k].tail);
		s->pools[k].index = k;
		atomic_init(&s->pools[k].watch_until_ns, UINT64_MAX);
	}
	for (unsigned k = 0; k < s->nshards; k++)
		s->shards[k].pool = &s->pools[k % s->npools];
	for (unsigned i = s->nworkers; i < s->nworkers + s->nspares; i++) {
		s->workers[i].s = s;
		atomic_init(&s->workers[i].spare_state, SPARE_FREE);
	}
	for (unsigned i = 0; i < s->nworkers; i++) {
		struct pool_worker *w = &s->workers[i];
		int err;

		w->s = s;
		w->home = i % s->npools;
		err = spoke_thread_start(s, &w->thread, worker_main, w);
		if (err) {
			spoke_pool_stop(s);
			return err;
		}
		w->running = true;
	}
	return 0;
}

/* Stop and join the workers; callbacks queued but not started never run. */
void spoke_pool_stop(struct spoke *s)
{
	if (!s->workers)
		return;
	atomic_store_explicit(&s->pool_stop, 1, memory_order_release);
	for (unsigned k = 0; k < s->npools; k++)
		spoke_ec_kick(&s->pools[k].wake_seq);
	for (unsigned i = 0; i < s->nworkers; i++) {
		if (s->workers[i].running)
			pthread_join(s->workers[i].thread, NULL);
		s->workers[i].running = false;
	}
	for (unsigned i = s->nworkers; i < s->nworkers + s->nspares; i++) {
		int st = atomic_load_explicit(&s->workers[i].spare_state, memory_order_acquire);

		if (st == SPARE_RUNNING || st == SPARE_LEFT)
			pthread_join(s->workers[i].thread, NULL);
		atomic_store_explicit(&s->workers[i].spare_state, SPARE_FREE, memory_order_relaxed);
	}
	spoke_pool_forget(s);
}

/* --- spares ------------------------------------------------------------------ */

/*
 * A managed thread: take a free (or left) spare slot and start a spare
 * homed on q. Nothing when every slot is in use, or no thread could be
 * started (the watch tries again after rescue_after_ns).
 */
static void pool_add_spare(struct spoke *s, struct pool_queue *q)
{
	for (unsigned i = s->nworkers; i < s->nworkers + s->nspares; i++) {
		struct pool_worker *w = &s->workers[i];
		int st = atomic_load_explicit(&w->spare_state, memory_order_relaxed);

		if ((st != SPARE_FREE && st != SPARE_LEFT) ||
		    !atomic_compare_exchange_strong_explicit(&w->spare_state, &st, SPARE_STARTING,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		if (st == SPARE_LEFT)
			pthread_join(w->thread, NULL); /* it has returned, or is about to */
		w->home = q->index;
		/*
		 * Counted before the thread exists: what the spare does then
		 * happens after the counts, so whoever saw its work sees them.
		 */
		atomic_fetch_add_explicit(&s->spares, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->spares_started, 1, memory_order_relaxed);
		if (spoke_thread_start(s, &w->thread, worker_main, w)) {
			atomic_fetch_sub_explicit(&s->spares, 1, memory_order_relaxed);
			atomic_fetch_sub_explicit(&s->spares_started, 1, memory_order_relaxed);
			atomic_store_explicit(&w->spare_state, SPARE_FREE, memory_order_release);
			return;
		}
		SPOKE_HOOK(SPOKE_HOOK_SPARE_STARTED);
		atomic_store_explicit(&w->spare_state, SPARE_RUNNING, memory_order_release);
		SPOKE_PROBE2(pool_spare, q->index,
			     atomic_load_explicit(&s->spares, memory_order_relaxed));
		return;
	}
}

int64_t spoke_owner_watch_pool(struct shard *sh, uint64_t now)
{
	struct pool_queue *q = sh->pool;
	uint64_t taken;

	if (!q || !sh->s->nspares || !sh->rescue_on)
		return -1;
	if (!pool_peek(q)) {
		sh->pool_seen_ns = 0;
		return -1;
	}
	taken = atomic_load_explicit(&q->taken, memory_order_relaxed);
	if (sh->pool_seen_ns == 0 || taken != sh->pool_taken_seen) {
		/* Newly queued, or the workers moved on: the wait starts now. */
		sh->pool_taken_seen = taken;
		sh->pool_seen_ns = now;
		return (int64_t)sh->rescue_after_ns;
	}
	if (now - sh->pool_seen_ns < sh->rescue_after_ns)
		return (int64_t)(sh->pool_seen_ns + sh->rescue_after_ns - now);
	/* A worker asleep beside work is napping behind a producer still linking. */
	if (atomic_load_explicit(&q->sleepers, memory_order_relaxed) == 0)
		pool_add_spare(sh->s, q);
	sh->pool_seen_ns = now;
	return (int64_t)sh->rescue_after_ns;
}

/* Free the pool's memory; its threads are joined, or do not exist (a fork child). */
void spoke_pool_forget(struct spoke *s)
{
	if (!s->workers)
		return;
	for (unsigned k = 0; k < s->npools; k++)
		spoke_queue_fini(s, &s->pools[k].head, &s->pools[k].tail);
	free(s->pools);
	free(s->workers);
	s->pools = NULL;
	s->workers = NULL;
}
