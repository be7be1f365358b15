/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_hooks.h - points inside the service where a test can stall a thread,
 * to open a race window on purpose and check what happens inside it.
 *
 * The library proper is compiled without SPOKE_TEST_HOOKS: SPOKE_HOOK()
 * is then nothing at all. tests/hooks builds a second copy of the library
 * with it, whose SPOKE_HOOK(p) calls spoke_test_hook(p) when a test has set
 * it; the test decides from its own thread-local state whether to stall.
 *
 *   SPOKE_HOOK_CALL_GUARDED   a call has counted itself in its arena and
 *                             found `stopping` clear (guard.h
 *                             spoke_call_enter)
 *   SPOKE_HOOK_DIRECT_RESET_CLAIMED  a reset on the owner thread has set
 *                             WRITING and not yet stored its deadline
 *                             (api_timers.c reset_direct)
 *   SPOKE_HOOK_RESET_STORED   a foreign reset has stored its deadline and
 *                             not yet published it (api_timers.c reset_once)
 *   SPOKE_HOOK_RESET_CLAIMED  a reset from a thread that does not own the
 *                             timer has set WRITING and not yet stored its
 *                             deadline (api_timers.c reset_once)
 *   SPOKE_HOOK_THREAD_EXIT_BEGIN  a thread that called the service is
 *                             exiting: its key destructor has been called
 *                             and has not yet taken the instance list's lock
 *                             (arena.c arena_thread_exit)
 *   SPOKE_HOOK_THREAD_EXIT    a thread that called the service is exiting:
 *                             its key destructor has found its instance
 *                             alive and is about to hand its arena (and
 *                             attached shard) on (arena.c arena_thread_exit)
 *   SPOKE_HOOK_EXPIRY_CHECKED an owner has found an armed timer due and not
 *                             yet claimed its run (shard.c claim_expiry)
 *   SPOKE_HOOK_EXPIRY_CLAIMED an owner has claimed an expiring timer's run
 *                             (ARMED -> DISPATCHED) and not yet decided
 *                             where it runs (shard.c on_expire)
 *   SPOKE_HOOK_RUN_LOADED     a thread about to run a claimed callback has
 *                             read the state word and not yet moved it to
 *                             RUNNING (run.c claim_run)
 *   SPOKE_HOOK_DETACH_LAUNCHED spoke_detach has tried to start the new
 *                             managed thread and not yet recorded the
 *                             outcome (managed.c spoke_owner_detach)
 *   SPOKE_HOOK_RESCUE_HELD    a rescuer has taken a stalled shard and not
 *                             yet run its turn (rescue.c rescue)
 *   SPOKE_HOOK_SHARDS_STOPPED spoke_destroy has stopped every shard (all
 *                             STOPPING) and not yet the pool (api_lifecycle.c
 *                             stop_threads)
 *   SPOKE_HOOK_RUN_FINISHING  a callback has returned, and its runner has
 *                             computed a periodic timer's next deadline and
 *                             not yet ended the run (run.c finish_run)
 *   SPOKE_HOOK_POLL_WAITS_FOR_LINK  a spoke_poll found a message it must
 *                             take behind a producer that has swapped the
 *                             inbox tail and not yet linked its node, and
 *                             is about to yield to it (shard.c
 *                             wait_for_producer)
 *   SPOKE_HOOK_POOL_LINK_NAP  a pool worker found nothing to take but a
 *                             node a producer has not linked yet, and is
 *                             about to nap (pool.c worker_main)
 *   SPOKE_HOOK_RUN_NOTING     a runner is about to read the clock to note
 *                             a run's lateness (run.c note_lateness)
 *   SPOKE_HOOK_LATE_SOLE_LOADED  a sole writer of a lateness bucket has
 *                             loaded it and not yet stored it plus one
 *                             (lateness.h spoke_late_record)
 *   SPOKE_HOOK_WAKE_FD_LOADED a waker has kicked the owner's futex and
 *                             loaded its wake fd, not yet written it
 *                             (shard.c spoke_any_wake_owner)
 *   SPOKE_HOOK_WATCHER_LOOKED a watcher (a managed thread, a pool worker)
 *                             has looked at the shards it watches and not
 *                             yet announced its sleep (managed.c
 *                             shard_main, pool.c worker_watch)
 *   SPOKE_HOOK_SPARE_STARTED  a managed thread has started a spare pool
 *                             worker and not yet marked its slot RUNNING
 *                             (pool.c pool_add_spare)
 */
#ifndef SPOKE_PERCPU_TEST_HOOKS_H
#define SPOKE_PERCPU_TEST_HOOKS_H

enum spoke_hook {
	SPOKE_HOOK_CALL_GUARDED,
	SPOKE_HOOK_RESET_CLAIMED,
	SPOKE_HOOK_DIRECT_RESET_CLAIMED,
	SPOKE_HOOK_RESET_STORED,
	SPOKE_HOOK_THREAD_EXIT,
	SPOKE_HOOK_THREAD_EXIT_BEGIN,
	SPOKE_HOOK_SHARDS_STOPPED,
	SPOKE_HOOK_EXPIRY_CHECKED,
	SPOKE_HOOK_EXPIRY_CLAIMED,
	SPOKE_HOOK_RUN_LOADED,
	SPOKE_HOOK_DETACH_LAUNCHED,
	SPOKE_HOOK_RUN_FINISHING,
	SPOKE_HOOK_POLL_WAITS_FOR_LINK,
	SPOKE_HOOK_POOL_LINK_NAP,
	SPOKE_HOOK_RESCUE_HELD,
	SPOKE_HOOK_RUN_NOTING,
	SPOKE_HOOK_LATE_SOLE_LOADED,
	SPOKE_HOOK_WAKE_FD_LOADED,
	SPOKE_HOOK_SPARE_STARTED,
	SPOKE_HOOK_WATCHER_LOOKED,
};

#ifdef SPOKE_TEST_HOOKS
extern void (*_Atomic spoke_test_hook)(enum spoke_hook point);
#define SPOKE_HOOK(point)                                                                          \
	do {                                                                                       \
		void (*hook_)(enum spoke_hook) = spoke_test_hook;                                  \
		if (hook_)                                                                         \
			hook_(point);                                                              \
	} while (0)
#else
#define SPOKE_HOOK(point)                                                                          \
	do {                                                                                       \
	} while (0)
#endif

#endif /* SPOKE_PERCPU_TEST_HOOKS_H */
