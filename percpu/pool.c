/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool.c - running expiry callbacks: the callback pool, and the one routine
 * every callback runs through, wherever it runs.
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
 * unowned: spoke_shard_takes_back_runs) it hands the handle back to the
 * shard (spoke_runner_recall), whose owner runs it inline.
 *
 * Run (spoke_runner_run): DISPATCHED -> RUNNING, call fn(arg), then a
 * one-shot ends as FREE with a new generation; a periodic timer without STOP
 * goes back to ARMED and to its owner for re-arming at previous deadline +
 * period, only after its run returned, so it never overlaps itself. Threads
 * waiting in cancel_sync (WAITERS) are woken when RUNNING ends.
 */
#define _GNU_SOURCE
#include "probes.h"
#include "protocol.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The run in progress on this thread, innermost first (spoke_runner_run). */
static _Thread_local struct spoke_run *tls_run;
static _Thread_local const struct spoke *tls_pool_of; /* this thread is a worker of its pool */

struct spoke_run *spoke_current_run(void)
{
	return tls_run;
}

/*
 * A callback that never returns to its run (pthread_exit inside it, or a
 * cancellation acted on there) leaves the service waiting for that run for
 * ever: a spoke_poll's call never ends, so destroy hangs; a shard or pool
 * thread is gone, so its timers never run again. No error can be returned
 * to anyone, so it stops the process, naming the misuse. Seen at the
 * thread's exit, at no cost to the runs: every thread that runs callbacks
 * holds a value under this key (set once, as it begins to), whose
 * destructor finds the thread still inside a run.
 */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool exit_key_once_failed; /* no key (EAGAIN): such an exit goes unseen */

static void abort_if_exit_in_run(void *unused)
{
	(void)unused;
	if (!tls_run)
		return;
	fprintf(stderr, "spoke: a thread exited inside a timer callback (pthread_exit, or a "
			"cancellation acted on in it; misuse: a callback must return, or spoke "
			"would wait for that run for ever); aborting\n");
	abort();
}

static void exit_key_create(void)
{
	if (pthread_key_create(&exit_key, abort_if_exit_in_run) != 0)
		exit_key_once_failed = true;
}

/* The calling thread runs callbacks from now on (a shard or pool thread, an attached one). */
void spoke_runner_watch_exit(void)
{
	(void)pthread_once(&exit_key_once, exit_key_create);
	if (!exit_key_once_failed)
		(void)pthread_setspecific(exit_key, &exit_key);
}

bool spoke_running_in_callback(const struct spoke_handle *h)
{
	return tls_run && tls_run->h == h;
}

bool spoke_in_callback_of(const struct spoke *s)
{
	for (const struct spoke_run *r = tls_run; r; r = r->outer)
		if (r->s == s)
			return true;
	return false;
}

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

/*
 * How late a run of sh due at deadline_ns starts: counted in the histogram
 * and the maximum, and returned. sole: no other thread records sh's runs
 * meanwhile (lateness.h), so neither needs a locked instruction. In a burst
 * every run is later than the last, so the maximum moves on every run.
 */
static uint64_t note_lateness(struct shard *sh, uint64_t deadline_ns, bool sole)
{
	uint64_t now = spoke_clock_ns(), late, cur;

	late = now > deadline_ns ? now - deadline_ns : 0;
	spoke_late_record(&sh->ctr.late, late, sole);
	cur = atomic_load_explicit(&sh->ctr.max_late_ns, memory_order_relaxed);
	if (late <= cur)
		return late;
	if (sole)
		atomic_store_explicit(&sh->ctr.max_late_ns, late, memory_order_relaxed);
	else
		while (late > cur && !atomic_compare_exchange_weak_explicit(
					     &sh->ctr.max_late_ns, &cur, late, memory_order_relaxed,
					     memory_order_relaxed))
			;
	return late;
}

/*
 * Next deadline of a periodic timer after a run: base + period, skipping
 * periods that already passed (it runs once, then keeps its phase).
 */
static uint64_t periodic_next_ns(uint64_t base, uint64_t period, uint64_t now)
{
	uint64_t next, k;

	if (__builtin_add_overflow(base, period, &next))
		return UINT64_MAX;
	if (next > now)
		return next;
	k = (now - base) / period + 1;
	if (__builtin_mul_overflow(k, period, &next) || __builtin_add_overflow(next, base, &next))
		return UINT64_MAX;
	return next;
}

/*
 * After the run: free a one-shot (or a stopped periodic), re-arm a periodic.
 * Which periods were missed is decided here, on the clock of the run's end:
 * an owner that takes the re-arm message late then runs the next period
 * late instead of skipping it. While RUNNING, base_ns stays the deadline of
 * this run, so that spoke_remaining (api.c next_run_ns) can add a period to
 * it; the next one is stored only once the CAS has ended the run, before the
 * re-arm (this thread is the owner) or its message (the owner reads base_ns
 * after taking it): until then a reader sees this run's deadline, which is
 * past (due), never a period too far. sh: h's shard (fixed for
 * the generation); direct: the runner owned it when the run began. A
 * callback cannot give its own shard up (spoke_detach refuses inside the
 * turn); a pool callback that attaches its own shard ends its run as any
 * non-owner does, through the inbox.
 */
static void finish_run(struct shard *sh, struct spoke_handle *h, bool direct)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire), next_ns = 0;
	struct spoke *s = sh->s;
	enum runner_end end;

	if (spoke_st_kind(st) == SPOKE_KIND_PERIODIC && !(st & SPOKE_ST_STOP)) {
		struct spoke_periodic *per = spoke_periodic_of(h);

		next_ns = periodic_next_ns(
			spoke_periodic_base(per),
			atomic_load_explicit(&per->period_ns, memory_order_relaxed),
			spoke_clock_ns());
	}
	SPOKE_HOOK(SPOKE_HOOK_RUN_FINISHING);
	/*
	 * Once destroy has begun nothing is re-armed; a periodic timer that
	 * would run again is parked ARMED in no engine (protocol.h runner_finish).
	 */
	end = runner_finish(h, &st, &s->stopping, direct);
	if (st & SPOKE_ST_WAITERS)
		spoke_ec_wake_word(spoke_state_futex(h));
	switch (end) {
	case RUNNER_END_PARKED:
		break;
	case RUNNER_END_RETIRED:
		if (st & SPOKE_ST_STOP)
			spoke_count(sh, CTR_CANCELLED, direct);
		spoke_handle_retired(s, h, st);
		break;
	case RUNNER_END_REARM:
		spoke_periodic_set_base(spoke_periodic_of(h), next_ns);
		spoke_owner_rearm_periodic(sh, h, (st & SPOKE_ST_RESET) != 0);
		break;
	case RUNNER_END_POST:
		spoke_periodic_set_base(spoke_periodic_of(h), next_ns);
		spoke_any_post(sh, h, 0); /* next run: let the owner see it now */
		break;
	}
}

/*
 * Claim h's run (st: its word, just read): DISPATCHED -> RUNNING. false if
 * a cancel won first (h retired here), or a reset (the timer is pending
 * again, at the reset's deadline: h goes back to its owner as a start
 * travels, ARMED | INBOX). protocol.h runner_claim_run decides.
 */
static bool claim_run(struct shard *sh, struct spoke_handle *h, uint64_t st)
{
	SPOKE_HOOK(SPOKE_HOOK_RUN_LOADED);
	switch (runner_claim_run(h, &st)) {
	case RUNNER_RUNS:
		return true;
	case RUNNER_RETIRED:
		spoke_handle_retired(sh->s, h, st);
		spoke_count(sh, CTR_CANCELLED, spoke_shard_owned_by_me(sh));
		return false;
	case RUNNER_UNDISPATCHED:
		spoke_any_post(sh, h, atomic_load_explicit(&h->deadline_ns, memory_order_relaxed));
		return false;
	}
	return false;
}

/*
 * Run h's callback on this thread (h is DISPATCHED, taken off any queue); true if it ran.
 * Without a pool (nworkers 0) the runner is always the shard's owner, the
 * only thread that records its runs: the counters take plain adds.
 */
bool spoke_runner_run(struct spoke *s, struct spoke_handle *h)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire), due, late;
	struct shard *sh = &s->shards[spoke_st_shard(st)];
	struct spoke_run run;
	bool owner;
	void *arg;

	if (!claim_run(sh, h, st))
		return false;
	owner = spoke_shard_owned_by_me(sh);
	if (spoke_st_kind(st) == SPOKE_KIND_PERIODIC) {
		const struct spoke_periodic *per = spoke_periodic_of(h);

		due = spoke_periodic_base(per);
		arg = per->arg;
	} else {
		due = atomic_load_explicit(&h->deadline_ns, memory_order_relaxed);
		arg = h->arg;
	}
	/*
	 * The run's one count: spoke_stats' `fired` is the histogram's total.
	 * Outside the probe: without <sys/sdt.h> its arguments are not evaluated.
	 */
	late = note_lateness(sh, due, owner && s->nworkers == 0);
	run.s = s;
	run.h = h;
	run.id = spoke_make_id(spoke_st_gen(st), spoke_handle_slot_id(h));
	run.due_ns = due;
	run.outer = tls_run;
	SPOKE_PROBE3(fire, run.id, sh->index, late);
	tls_run = &run;
	h->fn(arg);
	tls_run = run.outer;
	finish_run(sh, h, owner);
	return true;
}

/* --- workers ---------------------------------------------------------------- */

/*
 * How many queues a worker steals from, and a producer wakes a sleeper of,
 * besides its own: the next ones around the ring (a worker of queue q
 * steals from q-1 .. q-n, a producer on q wakes in q+1 .. q+n, so whoever
 * it wakes steals from q). Bounded, so that an idle worker on a machine
 * with many shards does not look at every queue before it sleeps.
 */
#define POOL_NEIGHBOURS 8

static unsigned pool_neighbours(const struct spoke *s)
{
	return s->npools - 1 < POOL_NEIGHBOURS ? s->npools - 1 : POOL_NEIGHBOURS;
}

/*
 * Wake a worker for q's new or remaining work: one of q's own sleepers, or
 * else one of its neighbours' (which then steals from q). No sleeper
 * anywhere near: q's workers are awake and will take it. The full fence
 * pairs with the sleeper's (eventcount.c), whose has_work looks at q.
 */
static void pool_wake_helper(struct spoke *s, struct pool_queue *q, unsigned n)
{
	unsigned k = q->index;

	spoke_full_fence();
	if (spoke_ec_wake_if_sleeping(&q->wake_seq, &q->sleepers))
		return;
	/* n < npools: the ring wraps at most once, without a division. */
	for (unsigned j = 1; j <= n; j++) {
		k = k + 1 < s->npools ? k + 1 : 0;
		if (spoke_ec_wake_if_sleeping(&s->pools[k].wake_seq, &s->pools[k].sleepers))
			return;
	}
}

void spoke_owner_dispatch(struct shard *sh, struct spoke_handle *h)
{
	struct pool_queue *q = sh->pool;

	cds_wfcq_node_init(&h->qnode);
	if (!cds_wfcq_enqueue(&q->head, &q->tail, &h->qnode))
		pool_wake_helper(sh->s, q, pool_neighbours(sh->s));
}

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
 * it looks again within POOL_RECHECK_NS (shard.c).
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
	if (spoke_shard_takes_back_runs(mode) &&
	    !(atomic_load_explicit(&h->state, memory_order_relaxed) & SPOKE_ST_MOVABLE))
		spoke_runner_recall(sh, h);
	else if (mode != SHARD_STOPPING)
		spoke_runner_run(s, h);
	atomic_store_explicit(&w->busy_shard, 0, memory_order_release);
	if (atomic_load_explicit(&sh->mode, memory_order_relaxed) == SHARD_ATTACHING)
		spoke_any_nudge(sh, 0);
}

/* Managed thread of sh, while an attach waits: is one of sh's callbacks on the pool? */
bool spoke_owner_pool_busy_with(const struct shard *sh)
{
	const struct spoke *s = sh->s;

	for (unsigned i = 0; i < s->nworkers; i++)
		if (atomic_load_explicit(&s->workers[i].busy_shard, memory_order_acquire) ==
		    sh->index + 1)
			return true;
	return false;
}

/*
 * Worker, idle: look at the shards whose callbacks come to its queue, and
 * rescue one that is stalled (rescue.c); the ns until it should look again
 * (-1: never), which its queue records for whoever lowers a shard's due_ns.
 */
static int64_t worker_watch(struct pool_worker *w)
{
	struct spoke *s = w->s;
	uint64_t now = spoke_clock_ns();
	int64_t next = -1;

	for (unsigned k = w->home; k < s->nshards; k += s->npools) {
		int64_t ns = spoke_watcher_look(&s->shards[k], now);

		if (ns >= 0 && (next < 0 || ns < next))
			next = ns;
	}
	atomic_store_explicit(&s->pools[w->home].watch_until_ns,
			      next < 0 ? UINT64_MAX : now + (uint64_t)next, memory_order_release);
	return next;
}

static void *worker_main(void *arg)
{
	struct pool_worker *w = arg;
	struct spoke *s = w->s;

	tls_pool_of = s;
	spoke_runner_watch_exit();
	spoke_thread_name("pool", (unsigned)(w - s->workers));
	spoke_thread_adopt_sched(s);
	while (!atomic_load_explicit(&s->pool_stop, memory_order_acquire)) {
		bool linking = false;
		struct spoke_handle *h = pool_next(w, &linking);
		int64_t wait_ns, watch_ns;

		if (h) {
			worker_run(w, h);
			continue;
		}
		/*
		 * Asleep until work, or until a shard it watches would count as
		 * stalled; 50 us when a producer is still linking its node (only a
		 * new enqueue or destroy wakes it sooner: the queue it is stuck on
		 * counts as work to pool_has_work, which would let it spin on it
		 * instead).
		 */
		wait_ns = linking ? 50000 : -1;
		watch_ns = worker_watch(w);
		if (watch_ns >= 0 && (wait_ns < 0 || watch_ns < wait_ns))
			wait_ns = watch_ns;
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
	s->pools = spoke_zalloc_lines(s->npools, sizeof(*s->pools));
	s->workers = spoke_zalloc_lines(s->nworkers, sizeof(*s->workers));
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
	spoke_pool_forget(s);
}

/* Free the pool's memory; its threads are joined, or do not exist (a fork child). */
void spoke_pool_forget(struct spoke *s)
{
	if (!s->workers)
		return;
	for (unsigned k = 0; k < s->npools; k++)
		cds_wfcq_destroy(&s->pools[k].head, &s->pools[k].tail);
	free(s->pools);
	free(s->workers);
	s->pools = NULL;
	s->workers = NULL;
}
