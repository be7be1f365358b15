/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shard.c - the owner side of a shard: its engines, its inbox, its turn,
 * and the wake-ups of its owner and its watchers.
 *
 * A shard's engines and its stage (stage.h) are touched only by its owner
 * thread (its managed thread, managed.c, or the server thread that
 * attached) or a rescuer holding it (rescue.c). One
 * turn of the owner (spoke_owner_turn) reads the clock once, then:
 *
 *   1. runs what is due on the stage, and moves the stage's window on to the
 *      tick now lies in once now is past the window's end;
 *   2. advances each engine to that tick. A timer an engine expires whose
 *      deadline is still ahead goes on the stage (or back into its engine if
 *      a reset moved it later without a message). A due timer is moved from
 *      ARMED to DISPATCHED by compare-and-swap (protocol.h; losing to a
 *      cancel is fine: the cancel's message frees it) and its callback is
 *      run inline (run.c, through spoke_runner_run) or handed to its
 *      shard's pool queue (pool.h);
 *   3. takes messages: splices the inbox (wait-free MPSC, liburcu wfcqueue)
 *      onto the private `taken` queue without blocking and handles up to
 *      inbox_batch of them (spoke_poll: every one queued before the
 *      splice). A message is a handle; the owner acts on the handle's state
 *      word as it reads it when it clears SPOKE_ST_INBOX: ARMED+RESET =
 *      insert or move to deadline_ns, ARMED without RESET = re-arm a
 *      periodic timer after its run, CANCELLED = unlink and free,
 *      DISPATCHED = a run handed back to the owner (spoke_runner_recall).
 *      A start that a cancel overtook is thus dropped, counted once each;
 *   4. runs the stage again, for what the messages made due (a start whose
 *      message was taken after its deadline).
 *
 * Between turns the managed thread sleeps on the shard's wake word until its
 * next deadline (an attached thread's loop sleeps as spoke_next_deadline
 * says). A producer wakes it only if it planned to sleep past the message's
 * due time, or longer than two ticks (spoke_any_nudge). Both sides store,
 * run a full fence, then load: the owner announces sleep_until_ns, then
 * looks at the inbox (spoke_owner_announce_sleep); the producer enqueues, then reads
 * sleep_until_ns. So a start earlier than the planned wake-up is never
 * missed, and an idle shard never wakes.
 *
 * Time: tick T of a shard is epoch_ns + T * tick_ns. A deadline becomes the
 * first tick at or after it (rounded up). The engines run one tick ahead, to
 * the first tick at or after now, and what they expire early waits on the
 * stage (stage.h) until its own deadline, give or take the slack: nothing
 * runs early, and nothing waits for the end of its tick.
 */
#define _GNU_SOURCE
#include "../lib/clist.h"
#include "pool.h"
#include "probes.h"
#include "protocol.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* --- time ----------------------------------------------------------------- */

/* The first tick at or after deadline_ns: rounded up, a multiplication (divide.h). */
static uint64_t deadline_tick(const struct shard *sh, uint64_t deadline_ns)
{
	uint64_t x, t;

	if (deadline_ns <= sh->epoch_ns)
		return 0;
	x = deadline_ns - sh->epoch_ns;
	t = spoke_divide(x, &sh->tick_div);
	return t + (t * sh->tick_ns != x);
}

/* The time of tick t, saturating. */
static uint64_t tick_time_ns(const struct shard *sh, uint64_t t)
{
	uint64_t x;

	if (__builtin_mul_overflow(t, sh->tick_ns, &x) ||
	    __builtin_add_overflow(x, sh->epoch_ns, &x))
		return UINT64_MAX;
	return x;
}

/* Any thread (epoch and tick never change): the first tick after now_ns. */
uint64_t spoke_any_next_tick_ns(const struct shard *sh, uint64_t now_ns)
{
	uint64_t t =
		now_ns <= sh->epoch_ns ? 0 : spoke_divide(now_ns - sh->epoch_ns, &sh->tick_div);

	return tick_time_ns(sh, t + 1);
}

/* --- owner: engines and messages ------------------------------------------ */

static void publish_pending(struct shard *sh)
{
	uint64_t n = spoke_engine_count(sh->wheel) + (sh->lawn ? spoke_engine_count(sh->lawn) : 0) +
		     sh->stage.count;

	atomic_store_explicit(&sh->pending, n, memory_order_relaxed);
}

/*
 * Which engine holds h: a TTL timer lives in the lawn. The rare start the
 * lawn refuses (-ENOMEM) goes to the wheel and its kind becomes one-shot, so
 * the kind in the state word always names the engine and the handle needs
 * no flag of its own.
 */
static struct spoke_engine *engine_of(const struct shard *sh, uint64_t s)
{
	return spoke_st_kind(s) == SPOKE_KIND_TTL && sh->lawn ? sh->lawn : sh->wheel;
}

/*
 * Owner: take h out of its engine or off the stage, wherever it is pending;
 * st: a word of h's generation (its kind names the engine), read before a
 * cancel that ends the generation (owner_cancel_direct) clears the kind.
 */
void spoke_owner_disarm_word(struct shard *sh, struct spoke_handle *h, uint64_t st)
{
	if (spoke_stage_holds(&h->node))
		spoke_stage_remove(&sh->stage, &h->node);
	else if (spoke_timer_pending(&h->node))
		(void)spoke_engine_stop(engine_of(sh, st), &h->node);
}

/* Owner: the same, for h's generation as its word says now. */
void spoke_owner_disarm(struct shard *sh, struct spoke_handle *h)
{
	spoke_owner_disarm_word(sh, h, atomic_load_explicit(&h->state, memory_order_relaxed));
}

/*
 * Owner: put h, a new timer pending nowhere yet, on the stage or in its
 * engine for deadline_ns. The stage takes deadlines up to its window's end
 * (spoke_stage_takes): a compare, not the division deadline_tick costs, for
 * what every expiry stages.
 */
void spoke_owner_arm_new(struct shard *sh, struct spoke_handle *h, uint64_t deadline_ns)
{
	struct spoke_engine *e;
	uint64_t t;

	if (spoke_stage_takes(&sh->stage, deadline_ns)) {
		spoke_stage_put(&sh->stage, &h->node, deadline_ns);
		return;
	}
	t = deadline_tick(sh, deadline_ns);
	e = engine_of(sh, atomic_load_explicit(&h->state, memory_order_relaxed));
	if (spoke_engine_start(e, &h->node, t - spoke_engine_now(e)) == 0)
		return;
	/* Only the lawn can refuse: the wheel takes it, as a one-shot from now on. */
	owner_make_oneshot(h);
	(void)spoke_engine_start(sh->wheel, &h->node, t - spoke_engine_now(sh->wheel));
}

/* Owner: the same for h wherever it is (moved if pending). */
void spoke_owner_arm(struct shard *sh, struct spoke_handle *h, uint64_t deadline_ns)
{
	spoke_owner_disarm(sh, h);
	spoke_owner_arm_new(sh, h, deadline_ns);
}

/*
 * Owner: put a periodic timer back for its next run, at base_ns (the runner
 * set it as the run ended, run.c finish_run) or, after a reset that came
 * during the run, at the reset's deadline.
 */
void spoke_owner_rearm_periodic(struct shard *sh, struct spoke_handle *h, bool reset)
{
	struct spoke_periodic *per = spoke_periodic_of(h);

	if (reset)
		spoke_periodic_set_base(
			per, atomic_load_explicit(&h->deadline_ns, memory_order_relaxed));
	spoke_owner_arm(sh, h, spoke_periodic_base(per));
}

/* Owner: end a cancelled handle's life (unlinked, counted, freed). */
static void retire_cancelled(struct shard *sh, struct spoke_handle *h, uint64_t s)
{
	spoke_owner_disarm(sh, h);
	spoke_count(sh, CTR_CANCELLED, true);
	while (!owner_retire_cancelled(h, &s))
		; /* only a reset clearing WRITING changes a CANCELLED word */
	spoke_handle_retired(sh->s, h, s);
}

/*
 * The holder of sh (its owner, or a rescuer): h's run is claimed
 * (DISPATCHED): to its shard's pool queue, waking a worker (pool.h; a
 * rescuer wakes a neighbour's first). Out of line: inlined, its wake-up loop
 * would make run_or_dispatch save registers on every run it makes inline.
 */
static __attribute__((noinline)) void owner_dispatch(struct shard *sh, struct spoke_handle *h)
{
	struct pool_queue *q = sh->pool;

	cds_wfcq_node_init(&h->qnode);
	if (cds_wfcq_enqueue(&q->head, &q->tail, &h->qnode))
		return; /* not the first: a worker was woken for it */
	if (sh->rescuing)
		pool_wake_for_rescue(sh->s, q, pool_neighbours(sh->s));
	else
		pool_wake_helper(sh->s, q, pool_neighbours(sh->s));
}

/*
 * The rescuer (rescue.c), holding sh, in place of run_or_dispatch: h is
 * DISPATCHED. To the pool what may run there; to the owner (owner_runs,
 * which its next turn runs) what must run on its thread; on the rescuer's
 * list what moves but has no pool to go to.
 */
static void rescuer_place(struct shard *sh, struct spoke_handle *h)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_relaxed);
	bool movable = (st & SPOKE_ST_MOVABLE) != 0;
	bool to_pool =
		sh->pool &&
		(movable || atomic_load_explicit(&sh->mode, memory_order_relaxed) == SHARD_MANAGED);

	if (to_pool) {
		owner_dispatch(sh, h);
	} else if (movable) {
		h->qnode.next = (struct cds_wfcq_node *)sh->rescued_runs;
		sh->rescued_runs = h;
	} else {
		h->qnode.next = (struct cds_wfcq_node *)sh->owner_runs;
		sh->owner_runs = h;
	}
}

/*
 * Owner: h is DISPATCHED (its run claimed): run it here, without a pool and
 * whenever the pool would hand it back (attached, being attached or
 * detached), else hand it to the pool. While a pool callback attaches the
 * shard (ATTACHING_NOWAIT) the managed thread runs nothing: that callback
 * waits for it to exit, and a callback run here could be waiting for that
 * one (cancel_sync); the run goes to the inbox, for the new owner. In a
 * rescuer's turn, rescue.c decides.
 */
static void run_or_dispatch(struct shard *sh, struct spoke_handle *h)
{
	int mode = atomic_load_explicit(&sh->mode, memory_order_relaxed);

	/* sh->pool: NULL without a pool, set before the shard's threads start. */
	if (!sh->rescuing && mode != SHARD_ATTACHING_NOWAIT &&
	    (!sh->pool || spoke_any_takes_back_runs(mode))) {
		if (spoke_runner_run(sh, h))
			sh->fired_inline++;
	} else if (sh->rescuing) {
		rescuer_place(sh, h); /* a rescuer's turn: rescue.c */
	} else if (mode == SHARD_ATTACHING_NOWAIT) {
		spoke_runner_recall(sh, h);
	} else {
		owner_dispatch(sh, h);
	}
}

/*
 * A recalled run (DISPATCHED) keeps RESET: a reset won before the run
 * started, and its runner hands it back armed for the reset's deadline
 * (protocol.h runner_undispatch) instead of running it.
 */
static inline __attribute__((always_inline)) void handle_message(struct shard *sh,
								 struct spoke_handle *h)
{
	uint64_t after, s = owner_take_message(h, &after);

	if (s & SPOKE_ST_FRESH)
		spoke_count(sh, CTR_STARTED, true);
	switch (spoke_st_status(s)) {
	case SPOKE_ST_ARMED:
		if (s & SPOKE_ST_RESET) {
			uint64_t d = atomic_load_explicit(&h->deadline_ns, memory_order_relaxed);

			spoke_handle_set_base(h, s, d);
			if (s & SPOKE_ST_FRESH) /* its start: in no engine yet */
				spoke_owner_arm_new(sh, h, d);
			else
				spoke_owner_arm(sh, h, d);
		} else if (spoke_st_kind(s) == SPOKE_KIND_PERIODIC &&
			   !spoke_timer_pending(&h->node)) {
			spoke_owner_rearm_periodic(sh, h, false);
		}
		break;
	case SPOKE_ST_CANCELLED:
		retire_cancelled(sh, h, after); /* the word as the take left it */
		break;
	case SPOKE_ST_DISPATCHED:
		run_or_dispatch(sh, h); /* recalled from the pool (spoke_runner_recall) */
		break;
	default:
		break; /* INBOX is set only on ARMED, CANCELLED and recalled DISPATCHED handles */
	}
}

/* The last node of the inbox (its tail), or NULL if it is empty. */
static struct cds_wfcq_node *inbox_last(struct shard *sh)
{
	struct cds_wfcq_node *tail = uatomic_read(&sh->inbox_tail.p);

	return tail == &sh->inbox_head.node ? NULL : tail;
}

/* spoke_poll, waiting for a message queued before it behind a missing link. */
static void wait_for_producer(unsigned *attempt)
{
	SPOKE_HOOK(SPOKE_HOOK_POLL_WAITS_FOR_LINK);
	spoke_yield_to_other_thread((*attempt)++);
}

/*
 * Owner: move the inbox onto the private `taken` queue. The splice cannot
 * take a queue whose first node a producer has swapped in and not yet
 * linked; must_take (spoke_poll) waits for that producer, else the inbox
 * stays for a later turn.
 */
static void splice_inbox(struct shard *sh, bool must_take)
{
	unsigned attempt = 0;

	while (!cds_wfcq_empty(&sh->inbox_head, &sh->inbox_tail) &&
	       __cds_wfcq_splice_nonblocking(&sh->taken_head, &sh->taken_tail, &sh->inbox_head,
					     &sh->inbox_tail) == CDS_WFCQ_RET_WOULDBLOCK &&
	       must_take)
		wait_for_producer(&attempt);
}

/*
 * spoke_poll: handle the messages on `taken` up to and including last (the
 * inbox's tail when the poll began to take), waiting for the producer of a
 * missing link on the way. Returns how many.
 */
static unsigned take_through(struct shard *sh, struct cds_wfcq_node *last)
{
	struct cds_wfcq_node *node;
	unsigned n = 0, attempt = 0;

	do {
		node = __cds_wfcq_dequeue_nonblocking(&sh->taken_head, &sh->taken_tail);
		if (node == CDS_WFCQ_WOULDBLOCK) {
			wait_for_producer(&attempt);
			continue;
		}
		if (!node) /* cannot be: last was spliced onto `taken` */
			break;
		handle_message(sh, caa_container_of(node, struct spoke_handle, qnode));
		n++;
	} while (node != last);
	return n;
}

/*
 * Owner: handle the queued messages: at most inbox_batch of them, or, with
 * all (spoke_poll), every message queued before the splice, so that a poll
 * runs what was queued before it began, and producers cannot keep it
 * running. A producer preempted between its tail swap and its link hides
 * the messages queued behind it (look_at_queue): the managed thread leaves
 * them for its next turn, but a poll waits for that producer to link until
 * it has taken the inbox's last message as it was when the poll began to
 * take them, since the starts queued behind it have returned to their
 * callers before the poll and are due to it. The producer runs nothing but
 * the one store it has left, so that wait waits for no one else.
 */
static void take_messages(struct shard *sh, bool all)
{
	unsigned limit = all ? 0 : sh->s->cfg.inbox_batch, n = 0;
	struct cds_wfcq_node *node, *last = all ? inbox_last(sh) : NULL;

	splice_inbox(sh, last != NULL);
	if (last)
		n = take_through(sh, last);
	while ((limit == 0 || n < limit) &&
	       (node = __cds_wfcq_dequeue_nonblocking(&sh->taken_head, &sh->taken_tail)) != NULL &&
	       node != CDS_WFCQ_WOULDBLOCK) {
		handle_message(sh, caa_container_of(node, struct spoke_handle, qnode));
		n++;
	}
	if (n)
		atomic_fetch_sub_explicit(&sh->inbox_queued, n, memory_order_relaxed);
	sh->took_messages = n;
	if (n > atomic_load_explicit(&sh->ctr.inbox_hwm, memory_order_relaxed))
		atomic_store_explicit(&sh->ctr.inbox_hwm, n, memory_order_relaxed);
}

/*
 * Owner: can a take make progress? liburcu's enqueue swaps the tail, then
 * links the previous node to the new one; until a preempted producer stores
 * that link, the queue is BLOCKED at the node before its own: the node it
 * swapped in, and every message behind it, cannot be taken yet.
 */
enum queue_look {
	QUEUE_EMPTY,
	QUEUE_READY,
	QUEUE_BLOCKED,
};

static enum queue_look look_at_queue(struct cds_wfcq_head *head, struct cds_wfcq_tail *tail)
{
	struct cds_wfcq_node *first = __cds_wfcq_first_nonblocking(head, tail);

	if (!first)
		return QUEUE_EMPTY;
	if (first == CDS_WFCQ_WOULDBLOCK ||
	    __cds_wfcq_next_nonblocking(head, tail, first) == CDS_WFCQ_WOULDBLOCK)
		return QUEUE_BLOCKED;
	return QUEUE_READY;
}

/* The private queue is taken first, and the inbox is spliced behind it. */
static enum queue_look look_at_messages(struct shard *sh)
{
	enum queue_look taken = look_at_queue(&sh->taken_head, &sh->taken_tail);

	return taken != QUEUE_EMPTY ? taken : look_at_queue(&sh->inbox_head, &sh->inbox_tail);
}

/* --- sleeping and waking: the owner, and any thread's nudge --------------- */

/* Managed thread of sh, while an attach waits: is one of sh's callbacks on the pool? */
static bool pool_busy_with(const struct shard *sh)
{
	const struct spoke *s = sh->s;

	/* Spares' slots too: one started during the attach is seen, or sees the attach. */
	for (unsigned i = 0; i < s->nworkers + s->nspares; i++)
		if (atomic_load_explicit(&s->workers[i].busy_shard, memory_order_acquire) ==
		    sh->index + 1)
			return true;
	return false;
}

/*
 * Owner (the managed thread): may it stop driving the shard? At destroy; at an attach,
 * once its fence is done and none of the shard's callbacks runs on the pool
 * (pool.c worker_run): until then it keeps the shard turning, callbacks
 * inline, since such a callback may be waiting for a later timer of the
 * shard. An attach from a pool callback does not wait: that callback, or
 * the one it waits for, could be a run of this shard, or attaching another
 * shard the same way.
 */
bool spoke_owner_may_leave(struct shard *sh)
{
	int mode = atomic_load_explicit(&sh->mode, memory_order_acquire);

	return mode == SHARD_STOPPING || mode == SHARD_ATTACHING_NOWAIT ||
	       (mode == SHARD_ATTACHING &&
		atomic_load_explicit(&sh->attach_fenced, memory_order_acquire) &&
		!pool_busy_with(sh));
}

/*
 * Owner: a message can be taken, or the managed thread may stop. A BLOCKED
 * queue is not work yet: the owner's sleep is capped (spoke_owner_next_ns),
 * and the producer looks at it once it has linked.
 */
static bool shard_has_work(struct shard *sh)
{
	return spoke_owner_may_leave(sh) || look_at_messages(sh) == QUEUE_READY;
}

/*
 * Write (signal) or read (drain) the wake eventfd. read() and write() are
 * cancellation points, and a thread cancelled inside a spoke call would never
 * leave it (spoke_destroy would wait for it forever), so cancellation is off
 * around them: no spoke call is a cancellation point.
 */
static void wake_fd_io(int fd, bool drain)
{
	static const uint64_t one = 1;
	uint64_t n;
	int old;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	/* EAGAIN: writing, the counter is full (readable already); reading, it was empty. */
	if (drain)
		while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR)
			;
	else
		while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	pthread_setcancelstate(old, NULL);
}

/* Any thread: the owner must look at its shard (futex, and the wake fd if any). */
void spoke_any_wake_owner(struct shard *sh)
{
	int fd = atomic_load_explicit(&sh->wake_fd, memory_order_acquire);

	spoke_ec_kick(&sh->wake_seq);
	SPOKE_HOOK(SPOKE_HOOK_WAKE_FD_LOADED);
	if (fd >= 0)
		wake_fd_io(fd, false);
}

/*
 * Any thread: hand h (its INBOX bit just set by the caller) to the owner:
 * enqueue it on the inbox, then spoke_any_nudge. due_ns is the earliest
 * time the message matters: the deadline of a start or reset, 0 for "as
 * soon as possible", UINT64_MAX for a cancel. The message is counted in the
 * inbox's backlog first (a start was counted by spoke_any_admit), so that
 * the owner, which subtracts what it handled, never counts below zero.
 */
void spoke_any_post_admitted(struct shard *sh, struct spoke_handle *h, uint64_t due_ns)
{
	cds_wfcq_node_init(&h->qnode);
	cds_wfcq_enqueue(&sh->inbox_head, &sh->inbox_tail, &h->qnode);
	spoke_any_nudge(sh, due_ns);
}

void spoke_any_post(struct shard *sh, struct spoke_handle *h, uint64_t due_ns)
{
	atomic_fetch_add_explicit(&sh->inbox_queued, 1, memory_order_relaxed);
	spoke_any_post_admitted(sh, h, due_ns);
}

/*
 * spoke_any_admit, the thread's places in sh's inbox used up: take
 * SPOKE_INBOX_PLACES more (this start uses one) while they fit under the
 * limit, else the one this start needs, else refuse it (counted). A CAS,
 * so that threads racing near the limit refuse nothing that fits.
 */
bool spoke_any_admit_slow(struct shard *sh, _Atomic uint16_t *places)
{
	uint64_t had = atomic_load_explicit(&sh->inbox_queued, memory_order_relaxed), take;

	do {
		if (had >= sh->inbox_limit) {
			spoke_count(sh, CTR_REFUSED, false);
			return false;
		}
		take = sh->inbox_limit - had >= SPOKE_INBOX_PLACES ? SPOKE_INBOX_PLACES : 1;
	} while (!atomic_compare_exchange_weak_explicit(
		&sh->inbox_queued, &had, had + take, memory_order_relaxed, memory_order_relaxed));
	atomic_store_explicit(places, (uint16_t)(take - 1), memory_order_relaxed);
	return true;
}

/*
 * Any thread: a message already queued (by this thread or another) now
 * matters at due_ns. The second half of spoke_any_post, also used alone by
 * a reset that rides on a message queued earlier for a later deadline.
 *
 * A sleeping owner is woken if it planned to sleep past due_ns, or longer
 * than two ticks. While messages keep coming the owner never plans a longer
 * sleep (see managed.c shard_main), so it takes them in batches every two ticks
 * instead of waking for each; an idle owner sleeps until its next deadline,
 * and the first message wakes it. Either way a cancelled handle is unlinked
 * and reused within two ticks, and no deadline is missed: the owner takes
 * its messages first thing when it wakes. The exchange lets one of the
 * producers that race here wake it, not each.
 */
void spoke_any_nudge(struct shard *sh, uint64_t due_ns)
{
	uint64_t until;

	spoke_note_due(sh, due_ns);
	spoke_full_fence(); /* pairs with the one in spoke_owner_announce_sleep */
	until = atomic_load_explicit(&sh->sleep_until_ns, memory_order_acquire);
	if (until == 0)
		return; /* awake, or already being woken */
	if (due_ns >= until && !atomic_load_explicit(&sh->long_sleep, memory_order_relaxed))
		return;
	if (atomic_exchange_explicit(&sh->sleep_until_ns, 0, memory_order_acq_rel) != 0)
		spoke_any_wake_owner(sh);
}

/* --- the due: when the shard next has work, for its watchers (rescue.c) ---- */

/* The managed thread that watches shard k (k - 1 around the ring), or NULL. */
static struct shard *ring_watcher(struct spoke *s, const struct shard *sh)
{
	if (s->nshards < 2)
		return NULL;
	return &s->shards[sh->index ? sh->index - 1 : s->nshards - 1];
}

/*
 * sh's work is now due at `due`, earlier than its watchers planned for:
 * wake each that planned to sleep past the moment sh would be stalled.
 */
static void wake_watchers(struct shard *sh, uint64_t due)
{
	struct spoke *s = sh->s;
	uint64_t at = spoke_stalled_at(sh, due);
	struct shard *w = ring_watcher(s, sh);

	if (w && atomic_load_explicit(&w->mode, memory_order_relaxed) == SHARD_MANAGED &&
	    atomic_load_explicit(&w->sleep_until_ns, memory_order_acquire) > at)
		spoke_ec_kick(&w->wake_seq);
	if (sh->pool && atomic_load_explicit(&sh->pool->watch_until_ns, memory_order_acquire) > at)
		spoke_ec_kick(&sh->pool->wake_seq);
}

/*
 * Any thread: sh has work due at `due` (a start, a reset, a message): lower
 * its due to it if it is earlier. The caller found it earlier (spoke_note_due,
 * inline, stores nothing in the common case). Out of line: the rare case,
 * kept out of spoke_any_nudge's registers.
 */
__attribute__((noinline)) void spoke_any_lower_due(struct shard *sh, uint64_t due)
{
	uint64_t seen = atomic_load_explicit(&sh->due_word, memory_order_relaxed);

	/* A compare-and-swap, never a store: the rescue bit beside it is kept. */
	while (due < (seen & ~SPOKE_DUE_RESCUED)) {
		if (atomic_compare_exchange_weak_explicit(
			    &sh->due_word, &seen, due | (seen & SPOKE_DUE_RESCUED),
			    memory_order_release, memory_order_relaxed)) {
			wake_watchers(sh, due);
			return;
		}
	}
}

/*
 * The shard's holder, at the end of its turn: the shard next has work at due
 * (UINT64_MAX: nothing). The rescue bit is kept: the holder's own, or one a
 * rescuer set for the moment it takes to see the owner busy.
 */
void spoke_holder_publish_due(struct shard *sh, uint64_t due)
{
	uint64_t d = due < SPOKE_DUE_NONE ? due : SPOKE_DUE_NONE,
		 old = atomic_load_explicit(&sh->due_word, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(&sh->due_word, &old,
						      d | (old & SPOKE_DUE_RESCUED),
						      memory_order_release, memory_order_relaxed))
		;
	if (d < (old & ~SPOKE_DUE_RESCUED))
		wake_watchers(sh, d);
}

/*
 * The owner of sh, at the end of a turn that began at now: publish when it
 * next has work (next_ns from spoke_owner_next_ns: -1 none, else ns from now)
 * and that it was here.
 */
void spoke_owner_turned(struct shard *sh, uint64_t now, int64_t next_ns)
{
	atomic_store_explicit(&sh->owner_turn_ns, now, memory_order_relaxed);
	if (sh->rescue_on)
		spoke_holder_publish_due(sh, next_ns < 0 ? UINT64_MAX : now + (uint64_t)next_ns);
}

/*
 * Owner, about to sleep for wait_ns (-1: no deadline): say until when, so
 * that spoke_any_nudge knows which messages must wake it. The fence pairs
 * with the one in spoke_any_nudge, which a producer runs after its enqueue:
 * either the producer sees the announced sleep, or the owner sees its
 * message here. false: do not sleep.
 */
bool spoke_owner_announce_sleep(struct shard *sh, int64_t wait_ns)
{
	uint64_t until = wait_ns < 0 ? UINT64_MAX : spoke_clock_ns() + (uint64_t)wait_ns;

	atomic_store_explicit(&sh->long_sleep, wait_ns < 0 || (uint64_t)wait_ns > 2 * sh->tick_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&sh->sleep_until_ns, until ? until : 1, memory_order_release);
	spoke_full_fence();
	if (!shard_has_work(sh))
		return true;
	atomic_store_explicit(&sh->sleep_until_ns, 0, memory_order_relaxed);
	return false;
}

/*
 * Attached thread, from spoke_next_deadline: its loop is about to sleep for
 * wait_ns. With a wake fd, announce it as a managed thread does, so that a
 * message that matters before then makes the fd readable; 0 if one came in
 * already (poll now). Without a wake fd nobody could be woken: no announcement.
 */
int64_t spoke_owner_attached_sleep(struct shard *sh, int64_t wait_ns)
{
	if (wait_ns == 0 || atomic_load_explicit(&sh->wake_fd, memory_order_relaxed) < 0)
		return wait_ns;
	return spoke_owner_announce_sleep(sh, wait_ns) ? wait_ns : 0;
}

/* Attached thread, from spoke_poll: awake, so no signal is needed; empty the fd. */
void spoke_owner_attached_awake(struct shard *sh)
{
	int fd = atomic_load_explicit(&sh->wake_fd, memory_order_relaxed);

	if (fd < 0)
		return;
	atomic_store_explicit(&sh->sleep_until_ns, 0, memory_order_relaxed);
	wake_fd_io(fd, true);
}

/*
 * Attached thread: the eventfd its loop waits on beside its own fds. Made
 * once per shard (a later owner after a detach gets the same one back),
 * closed by spoke_destroy; non-blocking, close-on-exec.
 */
int spoke_owner_wake_fd(struct shard *sh)
{
	int fd = atomic_load_explicit(&sh->wake_fd, memory_order_relaxed);

	if (fd >= 0)
		return fd;
	fd = sh->wake_fd_made;
	if (fd < 0) {
		fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fd < 0)
			return -errno;
		sh->wake_fd_made = fd;
	}
	atomic_store_explicit(&sh->wake_fd, fd, memory_order_release);
	return fd;
}

/* spoke_destroy has begun: wake the owner, so an attached loop sees -ESHUTDOWN. */
void spoke_shard_signal_stop(struct shard *sh)
{
	atomic_store_explicit(&sh->sleep_until_ns, 0, memory_order_relaxed);
	spoke_any_wake_owner(sh);
}

/* --- the runner's end of a run, and its recall --------------------------- */

/*
 * The runner, after spoke_runner_call (service.h spoke_runner_run): give
 * the timer back to sh as the run's end says: a periodic timer re-armed
 * here if this thread owned the shard when the run began, else posted to
 * its owner; a run a reset overtook, posted for the reset's deadline. true
 * if the callback ran.
 */
bool spoke_runner_settle(struct shard *sh, struct spoke_handle *h, enum runner_next next)
{
	switch (next) {
	case RUNNER_NEXT_NOT_RUN:
		return false;
	case RUNNER_NEXT_UNDISPATCHED:
		spoke_any_post(sh, h, atomic_load_explicit(&h->deadline_ns, memory_order_relaxed));
		return false;
	case RUNNER_NEXT_DONE:
		break;
	case RUNNER_NEXT_REARM:
		spoke_owner_rearm_periodic(sh, h, false);
		break;
	case RUNNER_NEXT_REARM_RESET:
		spoke_owner_rearm_periodic(sh, h, true);
		break;
	case RUNNER_NEXT_POST:
		spoke_any_post(sh, h, 0); /* next run: let the owner see it now */
		break;
	}
	return true;
}

/*
 * Pool worker (or the owner, run_or_dispatch): h was handed to the pool
 * before its shard was attached (pool.c worker_run), and must not run there
 * now. Give the claimed run back to the owner (DISPATCHED | INBOX), which
 * runs it inline when it takes its messages. A cancel that won meanwhile
 * ends it here instead, as on the pool (spoke_runner_run drops a
 * CANCELLED handle).
 */
void spoke_runner_recall(struct shard *sh, struct spoke_handle *h)
{
	if (runner_recall(h))
		spoke_any_post(sh, h, 0);
	else
		spoke_runner_run(sh, h);
}

/* --- owner: expiry and the turn ------------------------------------------- */

/* The deadline h was armed for: a periodic timer's next run, else the last start or reset. */
static uint64_t armed_deadline(struct spoke_handle *h)
{
	if (spoke_st_kind(atomic_load_explicit(&h->state, memory_order_relaxed)) ==
	    SPOKE_KIND_PERIODIC)
		return spoke_periodic_base(spoke_periodic_of(h));
	return atomic_load_explicit(&h->deadline_ns, memory_order_relaxed);
}

/*
 * Owner: h has left its engine or the stage. If its deadline is still ahead
 * (the engines run a tick ahead; or a foreign reset moved it later without a
 * message, api_timers.c reset_is_later) it goes back, on the stage or into its
 * engine; else claim its run (ARMED -> DISPATCHED) and run or dispatch it. A
 * queued message (start, reset, cancel) decides instead. A reset still
 * storing its deadline (WRITING) is asked for a message (RESET), since h is
 * in no engine now.
 *
 * The claim's compare-and-swap alone cannot tell whether a later reset
 * published between the deadline check and the swap: such a reset only bumps
 * the word's 11-bit sequence, and 2048 of them leave the word bit-identical.
 * So the deadline is read again once the claim has won (the swap read the
 * last publish, so it sees that reset's deadline), and a timer that was moved
 * later is given back (owner_give_back).
 */
static void claim_expiry(struct shard *sh, struct spoke_handle *h)
{
	uint64_t s = atomic_load_explicit(&h->state, memory_order_acquire), d;

	for (;;) {
		if ((s & SPOKE_ST_INBOX) || spoke_st_status(s) != SPOKE_ST_ARMED)
			return;
		if (s & SPOKE_ST_WRITING) {
			if ((s & SPOKE_ST_RESET) || owner_ask_reset_message(h, &s))
				return;
			continue;
		}
		d = armed_deadline(h);
		if (d > sh->clock_ns) {
			spoke_owner_arm(sh, h, d);
			return;
		}
		SPOKE_HOOK(SPOKE_HOOK_EXPIRY_CHECKED);
		if (owner_claim_expiry(h, &s))
			break;
	}
	d = armed_deadline(h);
	if (d > sh->clock_ns && owner_give_back(h, s)) {
		spoke_owner_arm(sh, h, d);
		return;
	}
	SPOKE_HOOK(SPOKE_HOOK_EXPIRY_CLAIMED);
	run_or_dispatch(sh, h);
}

/*
 * Engine expiry action (owner): the engines run a tick ahead, so most timers
 * they expire have their deadline still ahead, and claim_expiry stages them.
 */
static void on_expire(void *ctx, struct spoke_timer *t)
{
	claim_expiry(ctx, caa_container_of(t, struct spoke_handle, node));
}

/* The deadline of a staged timer (its node holds 0, stage.h). */
static uint64_t staged_deadline(struct spoke_timer *t)
{
	return armed_deadline(caa_container_of(t, struct spoke_handle, node));
}

/* Move the stage's window to (tick - 1, tick]: the stage keeps its times. */
static void stage_move(struct shard *sh, uint64_t tick)
{
	spoke_stage_move(&sh->stage, tick, tick ? tick_time_ns(sh, tick - 1) : 0,
			 tick_time_ns(sh, tick));
}

/*
 * Owner: run the staged timers that are due at now (spoke_stage_take_due).
 * window is the first tick at or after now; once it is past the window's
 * tick, now is past the window's end, so the take emptied every slot (none
 * ends later), and the window moves on to it. They all leave the stage
 * before any runs, so what their callbacks stage waits for a later turn.
 */
static void stage_run_due(struct shard *sh, uint64_t now, uint64_t window)
{
	struct spoke_timer run;

	spoke_clist_init(&run);
	spoke_stage_take_due(&sh->stage, now, &run, staged_deadline);
	if (window > sh->stage.tick)
		stage_move(sh, window);
	while (!spoke_clist_empty(&run)) {
		struct spoke_timer *t = run.sp_next;

		spoke_stage_remove(&sh->stage, t);
		claim_expiry(sh, caa_container_of(t, struct spoke_handle, node));
	}
}

static void advance_engine(struct shard *sh, struct spoke_engine *e, uint64_t tick)
{
	uint64_t now = spoke_engine_now(e);

	if (tick > now)
		spoke_engine_advance(e, tick - now, on_expire, sh);
}

/*
 * Owner: the runs a rescuer claimed and left to this thread (rescue.c), in
 * the order it claimed them, first thing in its next turn: they are due.
 */
static void run_left_by_rescue(struct shard *sh)
{
	struct spoke_handle *h = sh->owner_runs, *in_order = NULL;

	if (!h)
		return;
	sh->owner_runs = NULL;
	while (h) { /* the list is last-claimed first */
		struct spoke_handle *next = (struct spoke_handle *)h->qnode.next;

		h->qnode.next = (struct cds_wfcq_node *)in_order;
		in_order = h;
		h = next;
	}
	while (in_order) {
		h = in_order;
		in_order = (struct spoke_handle *)h->qnode.next;
		run_or_dispatch(sh, h);
	}
}

/*
 * The shard's holder (its owner, or a rescuer: rescue.c): one turn (top of
 * file): the stage, the engines, the messages, then
 * the stage again for what the messages made due (a start queued past its
 * deadline). all_messages: take every message queued so far (spoke_poll),
 * not only a batch. Returns callbacks run inline.
 */
int spoke_owner_turn(struct shard *sh, bool all_messages)
{
	uint64_t tick;

	/* From a callback of this very turn (spoke_poll in a callback): nothing. */
	if (sh->in_turn)
		return 0;
	sh->in_turn = true;
	sh->fired_inline = 0;
	/*
	 * Stage, then engines, then messages, then the stage again: the staged
	 * deadlines are the earliest; the engines' clocks are current when a
	 * message arms a timer, so the delay handed to the lawn is the timer's
	 * TTL and equal TTLs share one queue; a start whose message came after
	 * its deadline is staged and runs in this turn. A timer whose
	 * reset or cancel is still queued does not fire meanwhile (claim_expiry
	 * sees INBOX). The clock is read before the runs a rescuer left for
	 * the owner: a callback among them that re-arms with delay 0 (the
	 * next tick) and runs past that tick must not find its timer due in
	 * this same turn.
	 */
	sh->clock_ns = spoke_clock_ns();
	if (!sh->rescuing)
		run_left_by_rescue(sh);
	tick = deadline_tick(sh, sh->clock_ns);
	stage_run_due(sh, sh->clock_ns, tick);
	advance_engine(sh, sh->wheel, tick);
	if (sh->lawn)
		advance_engine(sh, sh->lawn, tick);
	take_messages(sh, all_messages);
	stage_run_due(sh, sh->clock_ns, tick);
	publish_pending(sh);
	sh->in_turn = false;
	return sh->fired_inline;
}

/*
 * When the turn that stages e's next expiries is due: the end of the first
 * slot of their window, when the turn advances e to their tick (and runs
 * the first slot's share at once).
 */
static uint64_t engine_wake_ns(const struct shard *sh, const struct spoke_engine *e)
{
	uint64_t next = spoke_engine_next(e), t, x;

	if (next == UINT64_MAX || __builtin_add_overflow(spoke_engine_now(e), next, &t))
		return UINT64_MAX;
	x = tick_time_ns(sh, t - 1);
	return __builtin_add_overflow(x, sh->stage.width_ns, &x) ? UINT64_MAX : x;
}

/*
 * While the messages are BLOCKED by a preempted producer (look_at_queue),
 * the owner looks again after this long rather than spinning. The messages
 * stuck behind the missing link may matter sooner, and their producers
 * found the owner awake, so it must not sleep longer than that meanwhile.
 */
#define BLOCKED_RECHECK_NS 50000

/*
 * The shard's holder: ns until the shard has work (0 = now), -1 if none;
 * owner_runs: count the runs a rescue left to the owner (the owner does; a
 * rescuer, for whom they are no work, does not).
 */
int64_t spoke_holder_next_ns(struct shard *sh, bool owner_runs)
{
	uint64_t wake = engine_wake_ns(sh, sh->wheel), now, w;
	enum queue_look look = look_at_messages(sh);

	if (look == QUEUE_READY || (owner_runs && sh->owner_runs))
		return 0;
	w = spoke_stage_wake_ns(&sh->stage);
	if (w < wake)
		wake = w;
	if (sh->lawn) {
		w = engine_wake_ns(sh, sh->lawn);
		if (w < wake)
			wake = w;
	}
	if (wake == UINT64_MAX && look == QUEUE_EMPTY)
		return -1;
	now = spoke_clock_ns();
	if (look == QUEUE_BLOCKED && wake > now + BLOCKED_RECHECK_NS)
		wake = now + BLOCKED_RECHECK_NS;
	if (wake <= now)
		return 0;
	return wake - now > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(wake - now);
}

/* Owner: ns until the shard has work (0 = now), -1 if none. */
int64_t spoke_owner_next_ns(struct shard *sh)
{
	return spoke_holder_next_ns(sh, true);
}

/* --- create and destroy --------------------------------------------------- */

int spoke_shard_init(struct spoke *s, struct shard *sh, unsigned index)
{
	const struct spoke_config *cfg = &s->cfg;
	const struct spoke_shard_config *o =
		index < cfg->n_shard_overrides ? &cfg->shard_overrides[index] : NULL;
	struct spoke_engine_params p = {
		.level_bits = o && o->level_bits ? o->level_bits : cfg->level_bits,
		.levels = o && o->levels ? o->levels : cfg->levels,
		.table_size = o && o->table_size ? o->table_size : cfg->table_size,
	};
	const char *engine = o && o->engine ? o->engine : cfg->engine;
	int err;

	atomic_init(&sh->wake_fd, -1);
	sh->wake_fd_made = -1;
	sh->s = s;
	sh->index = index;
	sh->cpu = o && o->cpu >= 0 ? o->cpu : (int)(index % s->ncpus);
	sh->tick_ns = o && o->tick_ns ? o->tick_ns : cfg->tick_ns;
	sh->inbox_limit = o && o->inbox_limit ? o->inbox_limit : cfg->inbox_limit;
	if (sh->inbox_limit == 0)
		sh->inbox_limit = UINT64_MAX;
	sh->tick_div = spoke_divisor_of(sh->tick_ns);
	sh->epoch_ns = spoke_clock_ns();
	/* A healthy owner turns within two ticks: a rescue never waits less. */
	sh->rescue_after_ns = cfg->rescue_after_ns && cfg->rescue_after_ns / 2 < sh->tick_ns
				      ? 2 * sh->tick_ns
				      : cfg->rescue_after_ns;
	sh->rescue_on = sh->rescue_after_ns != 0;
	/*
	 * Nothing due yet; with rescue off, 0 for good: nothing is ever lower
	 * (spoke_note_due), and no rescuer sets the bit.
	 */
	atomic_init(&sh->due_word, sh->rescue_on ? SPOKE_DUE_NONE : 0);
	atomic_init(&sh->rescue_gen, 0);
	atomic_init(&sh->owner_turn_ns, sh->epoch_ns);
	atomic_init(&sh->rescued_ns, 0);
	spoke_stage_init(&sh->stage, sh->tick_ns, o && o->slack_ns ? o->slack_ns : cfg->slack_ns,
			 sh->epoch_ns);
	cds_wfcq_init(&sh->inbox_head, &sh->inbox_tail);
	cds_wfcq_init(&sh->taken_head, &sh->taken_tail);
	err = spoke_engine_new(&sh->wheel, engine, &p);
	if (err)
		return err;
	if (cfg->lawn_shards == 0 || (index < 64 && (cfg->lawn_shards >> index) & 1)) {
		err = spoke_engine_new(&sh->lawn, "lawn", NULL);
		if (err) {
			spoke_engine_free(sh->wheel);
			sh->wheel = NULL;
			return err;
		}
	}
	return 0;
}

void spoke_shard_fini(struct shard *sh)
{
	if (sh->wake_fd_made >= 0)
		close(sh->wake_fd_made);
	spoke_engine_free(sh->wheel);
	spoke_engine_free(sh->lawn);
	spoke_queue_fini(sh->s, &sh->inbox_head, &sh->inbox_tail);
	spoke_queue_fini(sh->s, &sh->taken_head, &sh->taken_tail);
}
