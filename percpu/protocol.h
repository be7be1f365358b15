/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * protocol.h - every transition of a timer's state word (state.h), one
 * small function each, named for the thread that may make it:
 *
 *   starter_  the thread starting the timer, before anyone else has its id
 *   any_      any thread holding an id (API calls; also the owner and runners),
 *             and a reset that does not go straight to the engine (any thread,
 *             the owner too when the timer is not ARMED in its engine)
 *   writer_   the thread whose any_reset_claim won (it holds WRITING)
 *   waiter_   a spoke_cancel_sync waiting for a run to end
 *   owner_    the owner thread of the timer's shard (shard.c, or api_timers.c's
 *             direct paths on that thread)
 *   runner_   the one thread holding a DISPATCHED or RUNNING handle: the pool
 *             worker that dequeued it, a rescuer, or the owner running it inline
 *   retirer_  the thread that ended a periodic timer's generation, returning
 *             its second slot (arena.c spoke_handle_release)
 *
 * Nothing else in percpu/ compare-and-swaps, fetch_ands, fetch_ors or
 * stores a handle's state word: api_timers.c, shard.c, run.c, pool.c and arena.c call
 * these and keep only what follows a transition that won (queue the
 * message, touch the engine, count, free). Loads of the word are everywhere.
 * Memory orders: a publishing store and a winning CAS are release
 * (acq_rel), the load or failed CAS that decides is acquire (docs/design/service.md,
 * "Memory ordering"); the Promela model (state.pml) names these functions.
 *
 * Status transitions, with the function that makes each:
 *
 *   FREE --starter_publish--> ARMED --owner_cancel_direct--> FREE (next generation)
 *                             |  ^   \
 *         owner_claim_expiry  |  |    any_try_cancel
 *                             |  |     \
 *                             v  |      v
 *                      DISPATCHED --any_try_cancel--> CANCELLED --> FREE (next generation)
 *   up: owner_give_back,      |                 owner_retire_cancelled,
 *       runner_undispatch     | runner_claim_run  runner_retire_cancelled,
 *                             v                   writer_publish (ORPHAN)
 *   ARMED <--runner_finish-- RUNNING --runner_finish--> FREE (next generation)
 *             (periodic)                (one-shot, or STOP)
 *
 * A recalled run stays DISPATCHED (runner_recall adds INBOX); a running
 * periodic timer's cancel only adds STOP (any_try_cancel). Every arrow into
 * FREE becomes CANCELLED | ORPHAN instead while a writer holds WRITING
 * (spoke_st_retired), and that writer frees it (writer_publish).
 *
 * Flags, and who sets and clears them:
 *
 *   INBOX    set by the thread that posts the handle (starter_publish,
 *            any_try_cancel on ARMED, writer_publish, runner_undispatch,
 *            runner_recall, runner_finish); cleared by owner_take_message
 *   RESET    set by starter_publish, writer_publish, owner_ask_reset_message;
 *            cleared by owner_take_message (not on a recalled run),
 *            runner_finish
 *   WRITING  set by any_reset_claim, owner_reset_claim; cleared by
 *            writer_publish, owner_reset_release
 *   ORPHAN   set by whoever ends a generation while WRITING is held
 *            (spoke_st_retired); the writer frees the handle
 *   STOP     set by any_try_cancel on a RUNNING periodic timer
 *   WAITERS  set by waiter_set_waiters; cleared by runner_finish, which wakes
 *   FRESH    set by starter_publish (foreign); cleared by owner_take_message
 *   kind     owner_make_oneshot (the lawn refused a TTL timer)
 *
 * Synchronization table, in the manner of liburcu's wfcqueue.h: one row and
 * one column per transition, on one handle. A mark means the two never run
 * at the same time on the same handle, and the functions rely on it (a
 * decision taken on a plain read, a plain store instead of a CAS, a CAS
 * that must not fail); the letter says why. A blank means they may race:
 * each is one atomic read-modify-write, the loser's CAS fails, and its
 * caller reads the word again and decides anew (or gives up, -ENOENT).
 *
 *   p  not published: until starter_publish, no thread holds the new
 *      generation's id, and an older id fails the generation compare
 *   o  both are owner_ functions: one thread, the shard's owner
 *   r  both are runner_ functions: one handle has one runner at a time (it
 *      dequeued the handle, or it is the owner running it inline)
 *   h  handed over: the owner's transitions happen before the handle is
 *      queued to a runner (pool queue), the runner's before it is queued
 *      back to the owner (inbox); the queue orders them
 *   w  one WRITING holder at a time: only the thread holding WRITING
 *      clears it
 *
 *                                 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9
 *    1 starter_publish            p p p p p p p p p p p p p p p p p p p
 *    2 any_try_cancel             p
 *    3 any_reset_claim        p
 *    4 writer_publish             p     w       w
 *    5 waiter_set_waiters         p
 *    6 owner_cancel_direct        p         o o o o o o o o o h h h h h
 *    7 owner_reset_claim          p         o o o o o o o o o h h h h h
 *    8 owner_reset_release        p     w   o o o o o o o o o h h h h h
 *    9 owner_make_oneshot         p         o o o o o o o o o h h h h h
 *   10 owner_take_message         p         o o o o o o o o o h h h h h
 *   11 owner_retire_cancelled     p         o o o o o o o o o h h h h h
 *   12 owner_claim_expiry         p         o o o o o o o o o h h h h h
 *   13 owner_ask_reset_message    p         o o o o o o o o o h h h h h
 *   14 owner_give_back            p         o o o o o o o o o h h h h h
 *   15 runner_claim_run           p         h h h h h h h h h r r r r r
 *   16 runner_undispatch          p         h h h h h h h h h r r r r r
 *   17 runner_retire_cancelled    p         h h h h h h h h h r r r r r
 *   18 runner_recall              p         h h h h h h h h h r r r r r
 *   19 runner_finish              p         h h h h h h h h h r r r r r
 *
 * The races that matter are in the blanks: a cancel against the owner's
 * claim (2 x 12) or the runner's (2 x 15), where the CAS that wins decides
 * whether the callback runs; a reset against the same claims (3, 4 x 12,
 * 15), which the owner settles by giving the claim back and the runner by
 * undispatching; a reset on the owner thread against a foreign one (7 x 3);
 * the owner's cancel against a foreign cancel or reset (6 x 2, 3: one CAS
 * wins, and a loser finds the next generation); the end of a run against a
 * cancel_sync going to sleep (5 x 19) and a cancel setting STOP (2 x 19). The owner (o) and the
 * runners (r) are one thread at a time by construction, so every rule of the protocol is about a
 * foreign thread racing one of them, or two foreign threads.
 */
#ifndef SPOKE_PERCPU_PROTOCOL_H
#define SPOKE_PERCPU_PROTOCOL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "service.h"

/* --- helpers: one CAS of the word, with the protocol's orders ----------- */

static inline bool st_cas_strong(struct spoke_handle *h, uint64_t *st, uint64_t next)
{
	return atomic_compare_exchange_strong_explicit(&h->state, st, next, memory_order_acq_rel,
						       memory_order_acquire);
}

static inline bool st_cas_weak(struct spoke_handle *h, uint64_t *st, uint64_t next)
{
	return atomic_compare_exchange_weak_explicit(&h->state, st, next, memory_order_acq_rel,
						     memory_order_acquire);
}

/* The 32-bit futex word inside the state word: its low half (x86-64 is little endian). */
static inline _Atomic uint32_t *spoke_state_futex(struct spoke_handle *h)
{
	return (_Atomic uint32_t *)(void *)&h->state;
}

/* --- starter -------------------------------------------------------------- */

/*
 * Starter (api_timers.c start_timer): publish the filled-in handle as `armed`
 * (spoke_st_armed). On the owner thread (owned) it goes into the engine
 * straight after; from any other thread it travels as a message (INBOX |
 * RESET, and FRESH so that the owner counts the start once), which the
 * caller posts. Release: fn, arg, deadline_ns and the periodic part were
 * stored before.
 */
static inline void starter_publish(struct spoke_handle *h, uint64_t armed, bool owned)
{
	if (owned)
		atomic_store_explicit(&h->state, armed, memory_order_release);
	else
		atomic_store_explicit(&h->state,
				      armed | SPOKE_ST_INBOX | SPOKE_ST_RESET | SPOKE_ST_FRESH,
				      memory_order_release);
}

/* --- any thread ----------------------------------------------------------- */

/*
 * Any thread (api_timers.c cancel_once), one attempt at cancelling word st when
 * the owner's direct path (owner_cancel_direct) does not apply: ARMED ->
 * CANCELLED | INBOX (the owner unlinks and frees it; the caller posts if
 * *post), DISPATCHED -> CANCELLED (the runner frees it), a running
 * periodic timer -> STOP (no further run). 0: won; -EAGAIN: the word
 * changed under us; -ENOENT: nothing to cancel.
 */
static inline int any_try_cancel(struct spoke_handle *h, uint64_t st, bool *post)
{
	uint64_t next;

	switch (spoke_st_status(st)) {
	case SPOKE_ST_ARMED:
		next = spoke_st_with_status(st, SPOKE_ST_CANCELLED) | SPOKE_ST_INBOX;
		break;
	case SPOKE_ST_DISPATCHED:
		next = spoke_st_with_status(st, SPOKE_ST_CANCELLED);
		break;
	case SPOKE_ST_RUNNING:
		if (spoke_st_kind(st) != SPOKE_KIND_PERIODIC || (st & SPOKE_ST_STOP))
			return -ENOENT;
		next = st | SPOKE_ST_STOP;
		break;
	default:
		return -ENOENT;
	}
	if (!st_cas_strong(h, &st, next))
		return -EAGAIN;
	*post = spoke_st_status(st) == SPOKE_ST_ARMED && !(st & SPOKE_ST_INBOX);
	return 0;
}

/*
 * Any thread (api_timers.c reset_once), for a word st the caller has checked
 * (ARMED, DISPATCHED or a running periodic timer, no WRITING): claim the
 * right to store deadline_ns (WRITING) and bump the sequence. false: the
 * word changed. The winner is the writer: it stores deadline_ns, then
 * writer_publish.
 */
static inline bool any_reset_claim(struct spoke_handle *h, uint64_t st)
{
	return st_cas_strong(h, &st, spoke_st_bump_seq(st) | SPOKE_ST_WRITING);
}

/*
 * Writer (api_timers.c reset_publish), holding WRITING, deadline_ns stored:
 * publish it whatever else changed meanwhile. ARMED: RESET | INBOX (a
 * message), unless `later` (a one-shot moved later with no message queued:
 * nothing, the owner finds the deadline when the old one comes) and the
 * owner has not asked for one (RESET); DISPATCHED or RUNNING: RESET (the
 * runner undispatches, or re-arms at it); CANCELLED: nothing; ORPHAN (the
 * generation ended while we wrote): FREE with the next generation, and the
 * caller frees the handle. Returns the word it replaced; *next, the word
 * it wrote. The caller posts if it set INBOX.
 */
static inline uint64_t writer_publish(struct spoke_handle *h, bool later, uint64_t *next)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire), n;

	do {
		/* WRITING is ours: the generation cannot have ended without us. */
		n = st & ~SPOKE_ST_WRITING;
		if (st & SPOKE_ST_ORPHAN)
			n = spoke_st_freed(st); /* it ended while we wrote: we free it */
		else if (spoke_st_status(st) == SPOKE_ST_ARMED && (!later || (st & SPOKE_ST_RESET)))
			n |= SPOKE_ST_RESET | SPOKE_ST_INBOX;
		else if (spoke_st_status(st) != SPOKE_ST_CANCELLED &&
			 spoke_st_status(st) != SPOKE_ST_ARMED)
			n |= SPOKE_ST_RESET; /* dispatched: undispatch; running: its re-arm */
	} while (!st_cas_weak(h, &st, n));
	*next = n;
	return st;
}

/*
 * Waiter (api_timers.c wait_not_running), on a RUNNING word *st: ask the runner to
 * wake it (WAITERS) as the run ends. false: the word changed (*st reloaded).
 */
static inline bool waiter_set_waiters(struct spoke_handle *h, uint64_t *st)
{
	return st_cas_strong(h, st, *st | SPOKE_ST_WAITERS);
}

/* --- owner ---------------------------------------------------------------- */

/*
 * Owner (api_timers.c cancel_direct): cancel its own ARMED word st with no message
 * queued and no WRITING, ending its generation in the same step: ARMED ->
 * FREE with the next generation. The owner then unlinks the timer and frees
 * the handle. Nobody else can act on the handle in between: an id of the
 * ended generation fails the generation compare (a racing cancel or reset
 * loses its CAS and then finds the next generation), and no id of the next
 * one exists until this thread hands the handle out again. false: the word
 * changed.
 */
static inline bool owner_cancel_direct(struct spoke_handle *h, uint64_t st)
{
	return st_cas_strong(h, &st, spoke_st_freed(st));
}

/*
 * Owner (api_timers.c reset_direct): its own ARMED word st, no message queued, no
 * WRITING: bump the sequence and hold WRITING while it stores deadline_ns
 * and moves the timer, so that a foreign reset meeting it returns 0,
 * ordered before it. false: the word changed.
 */
static inline bool owner_reset_claim(struct spoke_handle *h, uint64_t st)
{
	return st_cas_strong(h, &st, spoke_st_bump_seq(st) | SPOKE_ST_WRITING);
}

/* Owner, after owner_reset_claim, deadline stored and timer moved: let go of WRITING. */
static inline void owner_reset_release(struct spoke_handle *h)
{
	atomic_fetch_and_explicit(&h->state, ~SPOKE_ST_WRITING, memory_order_release);
}

/*
 * Owner (shard.c spoke_owner_arm): the lawn refused a TTL timer, which goes
 * to the wheel as a one-shot from now on: the kind names the engine.
 */
static inline void owner_make_oneshot(struct spoke_handle *h)
{
	atomic_fetch_and_explicit(&h->state, ~SPOKE_ST_KIND_MASK, memory_order_relaxed);
}

/*
 * Owner (shard.c handle_message): take the message h carried: clear INBOX,
 * and RESET and FRESH too unless h is a recalled run (DISPATCHED keeps
 * RESET: a reset won before the run started, and its runner undispatches
 * it). Returns the word before; *after, the word as this left it. The owner
 * acts on that word, not on what the message said.
 */
static inline uint64_t owner_take_message(struct spoke_handle *h, uint64_t *after)
{
	uint64_t clear = SPOKE_ST_INBOX | SPOKE_ST_RESET | SPOKE_ST_FRESH, s;

	if (spoke_st_status(atomic_load_explicit(&h->state, memory_order_relaxed)) ==
	    SPOKE_ST_DISPATCHED)
		clear = SPOKE_ST_INBOX;
	s = atomic_fetch_and_explicit(&h->state, ~clear, memory_order_acq_rel);
	*after = s & ~clear;
	return s;
}

/* Both retires: end the generation of CANCELLED word *st (false: *st reloaded). */
static inline bool st_try_retire(struct spoke_handle *h, uint64_t *st)
{
	return st_cas_weak(h, st, spoke_st_retired(*st));
}

/*
 * Owner (shard.c retire_cancelled): a CANCELLED word *st taken off the
 * inbox, its timer unlinked: FREE (next generation), or CANCELLED | ORPHAN
 * while a writer holds WRITING (spoke_st_retired). false: *st reloaded;
 * only a writer clearing WRITING changes such a word, so the owner retries.
 * Then spoke_handle_retired.
 */
static inline bool owner_retire_cancelled(struct spoke_handle *h, uint64_t *st)
{
	return st_try_retire(h, st);
}

/*
 * Owner (shard.c claim_expiry), h met leaving its engine or the stage, ARMED
 * word *st with no INBOX or WRITING, its deadline found passed: claim its
 * run, ARMED -> DISPATCHED. false: *st reloaded, decide again.
 */
static inline bool owner_claim_expiry(struct spoke_handle *h, uint64_t *st)
{
	return st_cas_weak(h, st, spoke_st_with_status(*st, SPOKE_ST_DISPATCHED));
}

/*
 * Owner (shard.c claim_expiry), h met leaving its engine while a foreign reset
 * holds WRITING (word *st, no RESET): ask the writer for a message (RESET),
 * since h is in no engine now. false: *st reloaded.
 */
static inline bool owner_ask_reset_message(struct spoke_handle *h, uint64_t *st)
{
	return st_cas_weak(h, st, *st | SPOKE_ST_RESET);
}

/*
 * Owner (shard.c claim_expiry): undo owner_claim_expiry (from `armed`) for a
 * timer whose deadline turned out to be later: back to exactly `armed`.
 * Only a foreign cancel (CANCELLED) or reset (WRITING, then a sticky RESET)
 * can have changed a DISPATCHED word, so an unchanged word is the one this
 * owner wrote. false: one of them came first; the runner settles it then
 * (runner_claim_run retires the cancelled word, undispatches the reset one).
 */
static inline bool owner_give_back(struct spoke_handle *h, uint64_t armed)
{
	uint64_t claimed = spoke_st_with_status(armed, SPOKE_ST_DISPATCHED);

	return atomic_compare_exchange_strong_explicit(&h->state, &claimed, armed,
						       memory_order_acq_rel, memory_order_relaxed);
}

/* --- runner --------------------------------------------------------------- */

/* What runner_claim_run did. */
enum runner_claim {
	RUNNER_RUNS,	     /* DISPATCHED -> RUNNING: call the callback */
	RUNNER_RETIRED,	     /* a cancel won: generation ended; spoke_handle_retired */
	RUNNER_UNDISPATCHED, /* a reset won: ARMED | INBOX; post it to the owner */
};

/*
 * Runner (run.c claim_run), h DISPATCHED and taken off any queue, *st its
 * word just read: claim the run, DISPATCHED -> RUNNING; or, if a cancel won
 * first, retire the CANCELLED word (runner_retire_cancelled); or, if a
 * reset won (RESET, or WRITING while it stores), hand it back to the owner
 * as a start travels (runner_undispatch: ARMED | INBOX, RESET kept; a
 * writer still writing sees INBOX and rides on this message). Every failed
 * CAS reloads the word and decides again: a cancelled word may still change
 * (the writer clears WRITING), and must never be taken for a runnable one.
 * *st: the word before the transition that won.
 */
static inline bool runner_undispatch(struct spoke_handle *h, uint64_t *st)
{
	return st_cas_weak(h, st, spoke_st_with_status(*st, SPOKE_ST_ARMED) | SPOKE_ST_INBOX);
}

static inline bool runner_retire_cancelled(struct spoke_handle *h, uint64_t *st)
{
	return st_try_retire(h, st);
}

static inline enum runner_claim runner_claim_run(struct spoke_handle *h, uint64_t *st)
{
	for (;;) {
		/* The plain DISPATCHED word first: it is the one every run meets. */
		if (__builtin_expect(spoke_st_status(*st) == SPOKE_ST_DISPATCHED &&
					     !(*st & (SPOKE_ST_RESET | SPOKE_ST_WRITING)),
				     1)) {
			if (st_cas_weak(h, st, spoke_st_with_status(*st, SPOKE_ST_RUNNING)))
				return RUNNER_RUNS;
		} else if (spoke_st_status(*st) == SPOKE_ST_CANCELLED) {
			if (runner_retire_cancelled(h, st))
				return RUNNER_RETIRED;
		} else if (runner_undispatch(h, st)) {
			return RUNNER_UNDISPATCHED;
		}
	}
}

/*
 * Runner (shard.c spoke_runner_recall; a pool worker, or the owner while a
 * pool callback attaches): h's shard takes back its runs, so give the
 * claimed run back to the owner, DISPATCHED -> DISPATCHED | INBOX, which
 * the caller posts. false: the word is no longer DISPATCHED (a cancel won):
 * the caller settles it through spoke_runner_run, which retires it.
 */
static inline bool runner_recall(struct spoke_handle *h)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire);

	do {
		if (spoke_st_status(st) != SPOKE_ST_DISPATCHED)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
		&h->state, &st, st | SPOKE_ST_INBOX, memory_order_acq_rel, memory_order_acquire));
	return true;
}

/* How a run ended (runner_finish). */
enum runner_end {
	RUNNER_END_PARKED,  /* destroy has begun: a periodic timer left ARMED in no engine */
	RUNNER_END_RETIRED, /* one-shot, or STOP: the generation ended; spoke_handle_retired */
	RUNNER_END_REARM,   /* periodic, on its owner thread: ARMED, re-arm it now */
	RUNNER_END_POST,    /* periodic, elsewhere: ARMED | INBOX, post it to the owner */
};

/*
 * Runner (run.c finish_run), the callback returned, *st the RUNNING word
 * just read; owned: the runner is the shard's owner; stopping: the
 * instance's flag. Ends the run: a one-shot (or a periodic timer with STOP)
 * retires (spoke_st_retired); a periodic timer goes back to ARMED, and to
 * its owner as a message unless the runner is the owner (RESET cleared
 * there: the caller applies it); once destroy has begun it is parked ARMED
 * in no engine, still pending, so that spoke_destroy_release hands its arg
 * back. WAITERS is cleared: the caller wakes them if *st had it. *st: the
 * word replaced.
 */
static inline enum runner_end runner_finish(struct spoke_handle *h, uint64_t *st,
					    const _Atomic int *stopping, bool owned)
{
	bool rearm, parked;
	uint64_t next;

	do {
		parked = spoke_st_kind(*st) == SPOKE_KIND_PERIODIC && !(*st & SPOKE_ST_STOP) &&
			 atomic_load_explicit(stopping, memory_order_relaxed);
		rearm = spoke_st_kind(*st) == SPOKE_KIND_PERIODIC && !(*st & SPOKE_ST_STOP) &&
			!parked;
		if (parked)
			next = spoke_st_with_status(*st, SPOKE_ST_ARMED) &
			       ~(SPOKE_ST_WAITERS | SPOKE_ST_RESET | SPOKE_ST_INBOX);
		else if (!rearm)
			next = spoke_st_retired(*st);
		else if (owned)
			next = spoke_st_with_status(*st, SPOKE_ST_ARMED) &
			       ~(SPOKE_ST_WAITERS | SPOKE_ST_RESET);
		else
			next = (spoke_st_with_status(*st, SPOKE_ST_ARMED) | SPOKE_ST_INBOX) &
			       ~SPOKE_ST_WAITERS;
	} while (!st_cas_weak(h, st, next));
	if (parked)
		return RUNNER_END_PARKED;
	if (!rearm)
		return RUNNER_END_RETIRED;
	return owned ? RUNNER_END_REARM : RUNNER_END_POST;
}

/* --- words no id names: a fresh slot, a periodic timer's second slot ------ */

/*
 * Starter (arena.c arena_take): a slot handed out for the first time, or
 * for the first time since its step was given back to the kernel: FREE,
 * generation gen (1 for a new slot; a given-back step's slots start past
 * every generation they had, arena.c arena_trim).
 */
static inline void starter_init_fresh(struct spoke_handle *h, uint32_t gen)
{
	/* A lookup may read the word meanwhile (the slot is below `ready`). */
	atomic_store_explicit(&h->state, (uint64_t)gen << SPOKE_ST_GEN_SHIFT, memory_order_relaxed);
}

/* Starter (arena.c spoke_handle_alloc_aux): the slot is a periodic timer's second (AUX). */
static inline void starter_mark_aux(struct spoke_handle *aux)
{
	atomic_store_explicit(
		&aux->state,
		spoke_st_with_status(atomic_load_explicit(&aux->state, memory_order_relaxed),
				     SPOKE_ST_AUX),
		memory_order_relaxed);
}

/*
 * Whoever ended a periodic timer (arena.c spoke_handle_release): its second
 * slot takes the next generation before it is returned, as AUX_FREE: it
 * goes back on its arena's list of second slots and is never handed out as
 * a timer (service.h, struct spoke_periodic, says why).
 */
static inline void retirer_free_aux(struct spoke_handle *aux)
{
	atomic_store_explicit(&aux->state,
			      spoke_st_with_status(spoke_st_freed(atomic_load_explicit(
							   &aux->state, memory_order_relaxed)),
						   SPOKE_ST_AUX_FREE),
			      memory_order_release);
}

#endif /* SPOKE_PERCPU_PROTOCOL_H */
