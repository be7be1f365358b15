/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * managed.c - who drives a shard: its managed thread, which turns it and
 * sleeps between turns; an attach, by which another thread takes the shard
 * over from it; a detach, which hands the shard back to a new one.
 *
 * The managed thread holds its shard against rescuers (rescue.c) around
 * everything it does but sleep, turns it (shard.c spoke_owner_turn), says
 * when it next has work (spoke_owner_turned), looks after the next shard
 * around the ring (spoke_watcher_look_ring), and sleeps until its next
 * deadline or a message that needs it (shard.c announces the sleep to the
 * producers, spoke_any_nudge wakes it), and starts a spare pool worker when
 * its pool queue is starved (pool.c). It leaves at destroy, or once an
 * attach may take the shard (spoke_owner_may_leave).
 */
#define _GNU_SOURCE
#include "probes.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>
#include <sys/prctl.h>

/*
 * The calling thread owns sh from now on (spoke_tls_owner, run.c); managed:
 * the shard's own thread (shard_main), else an attached thread.
 */
static void become_owner(struct shard *sh, bool managed)
{
	spoke_tls_owner.serial = sh->s->serial;
	spoke_tls_owner.sh = sh;
	spoke_tls_owner.managed = managed;
}

static void drop_owner(void)
{
	spoke_tls_owner.serial = 0;
	spoke_tls_owner.sh = NULL;
	spoke_tls_owner.managed = false;
}

/* --- the managed thread --------------------------------------------------- */

/*
 * While an attach waits for the pool, the managed thread looks again at
 * least this often: a worker's wake-up at the end of its run can be missed
 * (pool.c worker_run).
 */
#define POOL_RECHECK_NS 1000000

/*
 * Managed thread, holding its shard (rescue.c): sleep until its next
 * deadline (-1: none) or a message that needs it. It lets the shard go for
 * the sleep itself, and holds it again before it returns. It looked at the
 * shard it watches at `looked` and planned to look again at `look_at`: if
 * that shard's work was made earlier since, it does not sleep
 * (spoke_watcher_ring_moved).
 */
static void shard_sleep(struct shard *sh, int64_t wait_ns, uint64_t looked, uint64_t look_at)
{
	uint32_t v = atomic_load_explicit(&sh->wake_seq, memory_order_acquire);

	if (wait_ns == 0 || !spoke_owner_announce_sleep(sh, wait_ns))
		return;
	if (spoke_watcher_ring_moved(sh, looked, look_at)) {
		atomic_store_explicit(&sh->sleep_until_ns, 0, memory_order_relaxed);
		return;
	}
	SPOKE_PROBE2(shard_sleep, sh->index, wait_ns);
	spoke_owner_unhold(sh);
	spoke_ec_wait_word(&sh->wake_seq, v, wait_ns);
	spoke_owner_hold(sh);
	atomic_store_explicit(&sh->sleep_until_ns, 0, memory_order_relaxed);
	SPOKE_PROBE1(shard_wake, sh->index);
}

/*
 * A thread that spoke_detach started: no turn before the detach is done
 * (MANAGED). While DETACHING the pool hands the shard's callbacks back (the
 * thread could still have failed to start), so a turn here would run them
 * inline, and a callback that waits for a later timer of its own shard, as
 * pool callbacks may, would hold the shard. The detach stores MANAGED right
 * after pthread_create returns: a short wait.
 */
static void wait_detach_done(struct shard *sh)
{
	for (unsigned i = 0;
	     atomic_load_explicit(&sh->mode, memory_order_acquire) == SHARD_DETACHING; i++)
		spoke_yield_to_other_thread(i);
}

static void *shard_main(void *arg)
{
	struct shard *sh = arg;

	spoke_thread_name("shard", sh->index);
	if (sh->s->cfg.pin_threads)
		spoke_thread_pin(sh->cpu);
	/* Wake at the tick, not up to 50 us later (Linux's default timer slack). */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	spoke_thread_adopt_sched(sh->s);
	spoke_runner_watch_exit();
	wait_detach_done(sh);
	become_owner(sh, true);
	spoke_owner_hold(sh);
	while (!spoke_owner_may_leave(sh)) {
		int64_t wait_ns, ring_ns;
		uint64_t looked;

		spoke_owner_turn(sh, false);
		wait_ns = spoke_owner_next_ns(sh);
		spoke_owner_turned(sh, sh->clock_ns, wait_ns);
		/* The shard it watches (rescue.c): rescued now, or looked at again in time. */
		looked = spoke_clock_ns();
		ring_ns = spoke_watcher_look_ring(sh, looked);
		SPOKE_HOOK(SPOKE_HOOK_WATCHER_LOOKED);
		wait_ns = spoke_sooner_ns(wait_ns, ring_ns);
		/* Its pool queue: a spare worker if it is starved (pool.c). */
		wait_ns = spoke_sooner_ns(wait_ns, spoke_owner_watch_pool(sh, sh->clock_ns));
		/* Messages are flowing: look again in two ticks (see spoke_any_nudge). */
		if (sh->took_messages)
			wait_ns = spoke_sooner_ns(wait_ns, (int64_t)(2 * sh->tick_ns));
		if (atomic_load_explicit(&sh->mode, memory_order_relaxed) == SHARD_ATTACHING)
			wait_ns = spoke_sooner_ns(wait_ns, POOL_RECHECK_NS);
		shard_sleep(sh, wait_ns, looked,
			    ring_ns < 0 ? UINT64_MAX : looked + (uint64_t)ring_ns);
	}
	spoke_owner_unhold(sh);
	drop_owner();
	return NULL;
}

/* --- start and stop -------------------------------------------------------- */

int spoke_shard_launch(struct shard *sh)
{
	int err = spoke_thread_start(sh->s, &sh->thread, shard_main, sh);

	if (err)
		return err;
	sh->thread_running = true;
	return 0;
}

/* Stop the managed thread (if any) and wait for it. */
static void join_thread(struct shard *sh)
{
	spoke_ec_kick(&sh->wake_seq);
	if (sh->thread_running) {
		pthread_join(sh->thread, NULL);
		sh->thread_running = false;
	}
}

void spoke_shard_stop(struct shard *sh)
{
	atomic_store_explicit(&sh->mode, SHARD_STOPPING, memory_order_release);
	join_thread(sh);
}

/* --- attach and detach ---------------------------------------------------- */

/*
 * Calling thread takes the shard over from its managed thread. After the
 * CAS, the heavy fence makes every worker either see ATTACHING (and hand
 * the shard's callbacks back, pool.c) or show the run it began in its
 * busy_shard; then attach_fenced lets the managed thread look. It drives
 * the shard on (callbacks inline) while any of the shard's callbacks runs
 * on the pool, and exits; the join orders its engine writes before ours.
 * So once the join returns none runs on the pool, and none runs in this
 * thread outside its spoke_poll. from_pool: the caller is a pool callback,
 * which does not wait for the others (ATTACHING_NOWAIT). An UNOWNED shard
 * has no thread to join, and none of its callbacks on the pool: the
 * workers have been handing them back since it was attached.
 */
int spoke_any_attach(struct shard *sh, bool from_pool, struct arena *home)
{
	int to = from_pool ? SHARD_ATTACHING_NOWAIT : SHARD_ATTACHING;
	int expect = SHARD_MANAGED;

	if (!atomic_compare_exchange_strong_explicit(&sh->mode, &expect, to, memory_order_acq_rel,
						     memory_order_acquire) &&
	    (expect != SHARD_UNOWNED ||
	     !atomic_compare_exchange_strong_explicit(&sh->mode, &expect, to, memory_order_acq_rel,
						      memory_order_acquire)))
		return -EBUSY;
	if (!from_pool) {
		spoke_heavy_fence(sh->s);
		atomic_store_explicit(&sh->attach_fenced, 1, memory_order_release);
	}
	join_thread(sh);
	atomic_store_explicit(&sh->attach_fenced, 0, memory_order_relaxed);
	/* Before ATTACHED: a rescuer that sees the mode sees whose calls to look at. */
	atomic_store_explicit(&sh->owner_arena, home, memory_order_release);
	atomic_store_explicit(&sh->mode, SHARD_ATTACHED, memory_order_release);
	become_owner(sh, false);
	spoke_runner_watch_exit(); /* its spoke_poll runs callbacks */
	return 0;
}

/*
 * Attached thread, outside its own turn: hand the shard back to a new
 * managed thread. The calling thread stops being the owner before the new
 * thread exists (pthread_create orders everything it did to the engines
 * before the new thread's first look), and attach is refused until the
 * thread is recorded (DETACHING), so the shard never has two owners. Other
 * threads' messages stop making the wake fd readable; it stays open for a
 * later owner. -EAGAIN: no thread could be started; still attached.
 */
int spoke_owner_detach(struct shard *sh)
{
	int fd = atomic_load_explicit(&sh->wake_fd, memory_order_relaxed), err;
	struct arena *home;

	atomic_store_explicit(&sh->wake_fd, -1, memory_order_relaxed);
	atomic_store_explicit(&sh->sleep_until_ns, 0, memory_order_relaxed);
	drop_owner();
	atomic_store_explicit(&sh->mode, SHARD_DETACHING, memory_order_relaxed);
	home = atomic_exchange_explicit(&sh->owner_arena, NULL, memory_order_relaxed);
	err = spoke_shard_launch(sh);
	SPOKE_HOOK(SPOKE_HOOK_DETACH_LAUNCHED);
	if (err) {
		atomic_store_explicit(&sh->owner_arena, home, memory_order_relaxed);
		atomic_store_explicit(&sh->mode, SHARD_ATTACHED, memory_order_relaxed);
		atomic_store_explicit(&sh->wake_fd, fd, memory_order_relaxed);
		become_owner(sh, false);
		return err;
	}
	atomic_store_explicit(&sh->mode, SHARD_MANAGED, memory_order_release);
	return 0;
}

/*
 * Attached thread, exiting, when spoke_owner_detach could start no thread:
 * let go of the shard without a driver. It is UNOWNED with no thread, so the
 * next spoke_attach takes it (there is nothing to join); until then its
 * timers wait, and so do its callbacks the pool hands back.
 */
void spoke_owner_abandon(struct shard *sh)
{
	atomic_store_explicit(&sh->wake_fd, -1, memory_order_relaxed);
	atomic_store_explicit(&sh->owner_arena, NULL, memory_order_relaxed);
	drop_owner();
	atomic_store_explicit(&sh->mode, SHARD_UNOWNED, memory_order_release);
}
