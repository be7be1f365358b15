/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rescue.c - a stalled shard's timers still run: while its owner is away, a
 * peer takes its expiry over for a turn, and hands it back (rescue_after_ns).
 *
 * A timer is only as punctual as the thread that drives its shard: a
 * managed thread the kernel keeps off its CPU, or an attached loop stuck in
 * a slow handler, holds every timer of the shard. So each shard publishes
 * when it next has work (the due in due_word: set by the turn that handles
 * it, lowered by any start, reset or message that makes it earlier), and
 * other spoke threads watch it: a watcher that finds the due +
 * rescue_after_ns passed takes the shard (the word's SPOKE_DUE_RESCUED bit,
 * 0 -> 1), runs one turn of it (stage, engines,
 * messages) exactly as its owner would, and lets go. Linux (6.9) does the
 * same for an idle CPU's global timers, pulled by a "migrator" CPU
 * (kernel/time/timer_migration.c); here the pull is for a CPU that is
 * busy, or taken away.
 *
 * Who watches whom: the managed thread of shard k watches shard k + 1 (mod
 * shards) after each of its turns; the pool workers of queue q watch the
 * shards whose callbacks go to q. Each caps its sleep at the moment the
 * shards it watches would count as stalled, and whoever lowers a shard's
 * due wakes the watchers that planned to sleep past the new moment
 * (spoke_any_lower_due). A lowering that comes between a watcher's look and
 * the announcement of its sleep finds it awake and wakes nobody, so a
 * watcher looks at the dues once more after it announced its sleep
 * (spoke_watcher_look_moved) and does not sleep if one moved earlier.
 * Nobody wakes for a shard that has nothing due.
 *
 * Exclusion, owner against rescuer: a store-load handshake (guard.h has the
 * same shape). The owner counts itself busy, runs a light fence, then looks
 * at the rescue bit; a rescuer sets it by a locked or, runs the heavy fence
 * (membarrier), then looks at the owner's counts. Either the owner sees the
 * rescue and keeps off its engines (a turn waits for the hand-back on the
 * futex rescue_gen; a start, cancel or reset goes the way another thread's
 * would, through the inbox), or the rescuer sees the owner busy and lets go
 * at once. The owner's counts: a managed thread sets `turning`
 * around everything it does but sleep (it calls the API only from inline
 * callbacks, inside its turn); an attached thread touches the shard only
 * inside a call, which counts itself in the thread's arena (guard.h), whose
 * address the shard keeps in owner_arena while it is attached. The bit and
 * the due share one word so that the owner's start, cancel and reset pay
 * one plain load for the chance of a rescue: the load that tells a start
 * whether it holds the shard also tells it whether its deadline lowers the
 * due (api_timers.c owner_holds_due). The price: every write of the due is
 * a compare-and-swap that carries the bit over, never a store, and a due
 * lies below 2^63 ns (SPOKE_DUE_NONE: nothing due; 292 years of uptime).
 *
 * What a rescuer runs where (shard.c rescuer_place): a claimed run whose
 * callback would go to the pool anyway goes there; one that would run
 * inline on the owner's thread (no pool, or an attached shard) stays the
 * owner's, on the shard's owner_runs list, which the owner's next turn runs
 * first, unless it was started SPOKE_MOVABLE: then it goes to the pool if
 * there is one, else the rescuer runs it itself, after it has let the shard
 * go (a callback run while holding the shard could wait for its owner:
 * cancel_sync, attach). owner_runs is not the inbox, so that what waits for
 * the owner does not count as work a rescuer could do, and the shard is not
 * rescued again and again for it.
 * Modes other than MANAGED and ATTACHED are not rescued (an attach or a
 * detach in progress, an unowned shard, destroy).
 *
 * Synchronization table (protocol.h's manner), on one shard; a mark: the two
 * never run at once. The Promela model (state_rescue.pml, docs/design/model.md)
 * checks rows 1-3, 6 and 7 under these names; the due (rows 4 and 5) only
 * decides when a watcher looks, which the model leaves free, and its
 * writes keep the bit (the model's mutants DUE_STORE_DROPS_RESCUE and
 * DUE_WRITE_NOT_ATOMIC write it the wrong ways).
 *
 *                                1 2 3 4 5 6 7
 *   1 spoke_owner_hold                     x
 *   2 spoke_owner_rescued                  x
 *   3 spoke_owner_await_rescue
 *   4 spoke_any_lower_due
 *   5 spoke_holder_publish_due           h h
 *   6 rescue: from rescuer_take  x x     h h
 *     (won) to rescuer_release,
 *     rescuer_place within
 *   7 spoke_owner_unhold
 *
 *   x  the handshake above: the owner holding (or inside a call that saw
 *      the bit clear) and a rescuer holding exclude each other
 *   h  one holder at a time: the locked or admits one rescuer (the one
 *      that found the bit clear), and a rescuer's turn (which publishes
 *      the due) runs only while it holds
 *
 * A blank: both are atomic on their own (a lowering is a CAS loop that only
 * ever lowers, a publish a CAS loop by the holder, each keeping the bit; a
 * lowering that a later publish overwrote was handled by that turn, or is
 * in its messages).
 */
#define _GNU_SOURCE
#include "probes.h"
#include "protocol.h"
#include "service.h"
#include "test_hooks.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* --- the owner's side -------------------------------------------------------- */

/* Owner, not counted busy: wait until no rescuer holds sh. */
void spoke_owner_await_rescue(struct shard *sh)
{
	for (;;) {
		/* The generation first: a hand-back after the look below changes it. */
		uint32_t gen = atomic_load_explicit(&sh->rescue_gen, memory_order_acquire);

		if (!spoke_owner_rescued(sh))
			return;
		spoke_ec_wait_word(&sh->rescue_gen, gen, -1);
	}
}

/*
 * Managed thread: count itself busy on its shard (turning), and come back
 * only once no rescuer holds it; every touch of its engines, stage and
 * queues happens between this and spoke_owner_unhold.
 */
void spoke_owner_hold(struct shard *sh)
{
	for (;;) {
		atomic_store_explicit(&sh->turning, 1, memory_order_relaxed);
		spoke_light_fence(sh->s);
		if (!spoke_owner_rescued(sh))
			return;
		spoke_owner_unhold(sh);
		spoke_owner_await_rescue(sh);
	}
}

/* Managed thread: busy no more (release: a rescuer that sees 0 sees what it did). */
void spoke_owner_unhold(struct shard *sh)
{
	atomic_store_explicit(&sh->turning, 0, memory_order_release);
}

/* --- the rescuer ----------------------------------------------------------------- */

static bool rescuable_mode(const struct shard *sh)
{
	int mode = atomic_load_explicit(&sh->mode, memory_order_acquire);

	return mode == SHARD_MANAGED || mode == SHARD_ATTACHED;
}

/* Is sh's owner inside something that touches the shard? (After the heavy fence.) */
static bool owner_busy(const struct shard *sh)
{
	struct arena *a = atomic_load_explicit(&sh->owner_arena, memory_order_acquire);

	return atomic_load_explicit(&sh->turning, memory_order_acquire) ||
	       (a && atomic_load_explicit(&a->in_call, memory_order_acquire));
}

/* The bit cleared (release: the owner that sees it clear sees the turn), then the wake. */
static void rescuer_release(struct shard *sh)
{
	atomic_fetch_and_explicit(&sh->due_word, ~SPOKE_DUE_RESCUED, memory_order_release);
	atomic_fetch_add_explicit(&sh->rescue_gen, 1, memory_order_release);
	spoke_ec_wake_word(&sh->rescue_gen);
}

/*
 * Take sh for a turn: true if this thread now holds it (it must release it).
 * A locked or of the bit, whatever the due beside it: only the thread that
 * found it clear goes on.
 */
static bool rescuer_take(struct shard *sh)
{
	if (!rescuable_mode(sh) ||
	    (atomic_fetch_or_explicit(&sh->due_word, SPOKE_DUE_RESCUED, memory_order_seq_cst) &
	     SPOKE_DUE_RESCUED))
		return false;
	spoke_heavy_fence(sh->s);
	if (!owner_busy(sh) && rescuable_mode(sh))
		return true;
	rescuer_release(sh);
	return false;
}

/* A rescue of sh, taken at now: one turn, let go, then the runs it kept. */
static void rescue(struct shard *sh, uint64_t now)
{
	uint64_t absence = now - atomic_load_explicit(&sh->owner_turn_ns, memory_order_relaxed),
		 cur, due;
	struct spoke_handle *runs;
	int64_t next;

	SPOKE_HOOK(SPOKE_HOOK_RESCUE_HELD);
	sh->rescued_runs = NULL;
	sh->rescuing = true;
	spoke_owner_turn(sh, false);
	next = spoke_holder_next_ns(sh, false); /* owner_runs: the owner's, not work for a rescue */
	sh->rescuing = false;
	runs = sh->rescued_runs;
	due = next < 0 ? UINT64_MAX : sh->clock_ns + (uint64_t)next;
	atomic_store_explicit(&sh->rescued_ns, now, memory_order_relaxed);
	spoke_holder_publish_due(sh, due);
	atomic_fetch_add_explicit(&sh->ctr.rescues, 1, memory_order_relaxed);
	cur = atomic_load_explicit(&sh->ctr.max_absence_ns, memory_order_relaxed);
	while (absence > cur &&
	       !atomic_compare_exchange_weak_explicit(&sh->ctr.max_absence_ns, &cur, absence,
						      memory_order_relaxed, memory_order_relaxed))
		;
	SPOKE_PROBE2(rescue, sh->index, absence);
	/*
	 * The owner planned its sleep (or its loop's) before this turn, and runs
	 * may wait for it too. Woken while the shard is held, so that the
	 * wake-up lands before a detach, which waits for the hand-back: a
	 * detached loop's wake fd is signalled no more.
	 */
	spoke_any_wake_owner(sh);
	rescuer_release(sh);
	while (runs) {
		struct spoke_handle *h = runs;

		runs = (struct spoke_handle *)h->qnode.next;
		spoke_runner_run(sh, h);
	}
}

/*
 * A watcher (a managed thread, a pool worker) looks at sh at now: rescues it
 * if its work has been due for rescue_after_ns, and returns the ns until it
 * next should look (-1: nothing due).
 */
int64_t spoke_watcher_look(struct shard *sh, uint64_t now)
{
	uint64_t at;

	if (!sh->rescue_on)
		return -1;
	at = spoke_stalled_at(sh, spoke_any_due_ns(sh));
	if (at > now)
		return at == UINT64_MAX ? -1 : (int64_t)(at - now);
	if (rescuer_take(sh))
		rescue(sh, now);
	/* Taken or not (its owner is back, or another rescuer has it): look again later. */
	at = spoke_stalled_at(sh, spoke_any_due_ns(sh));
	if (at <= now)
		return (int64_t)sh->rescue_after_ns;
	return at == UINT64_MAX ? -1 : (int64_t)(at - now);
}

/*
 * A watcher that looked at sh at `looked` and planned its next look for
 * `planned` (absolute; UINT64_MAX: none), and has since announced its sleep
 * (sleep_until_ns, watch_until_ns) and run a full fence: has sh become due
 * for a look before `planned`? A lowering that landed between the look and
 * the announcement found the watcher awake, so it woke nobody; this look
 * after the fence sees it (the lowering's compare-and-swap, then its load
 * of the announcement, pair with the announcement, the fence, then this
 * load: one of the two sees the other). A shard already stalled at the
 * look (its moment at or before `looked`) is looked at again on the plan.
 */
bool spoke_watcher_look_moved(const struct shard *sh, uint64_t looked, uint64_t planned)
{
	uint64_t at;

	if (!sh->rescue_on)
		return false;
	at = spoke_stalled_at(sh, spoke_any_due_ns(sh));
	return at > looked && at < planned;
}

/* The shard mine's managed thread watches (the next around the ring), or NULL. */
static struct shard *ring_watched(const struct shard *mine)
{
	struct spoke *s = mine->s;

	return s->nshards < 2 ? NULL : &s->shards[(mine->index + 1) % s->nshards];
}

/* A shard's managed thread: spoke_watcher_look_moved for the shard it watches. */
bool spoke_watcher_ring_moved(const struct shard *mine, uint64_t looked, uint64_t planned)
{
	const struct shard *w = ring_watched(mine);

	return w && spoke_watcher_look_moved(w, looked, planned);
}

/* A shard's managed thread: look at the shard it watches; ns until it should look again. */
int64_t spoke_watcher_look_ring(struct shard *mine, uint64_t now)
{
	struct shard *w = ring_watched(mine);

	return w ? spoke_watcher_look(w, now) : -1;
}
