/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * urcu_bp.h - the one way the project includes liburcu's "bulletproof" RCU
 * flavour, which guards the entry of every call against spoke_destroy
 * (api.c call_enter).
 *
 * Why urcu-bp: a library cannot ask its users to register their threads, and
 * an unregistered reader of the other flavours reads garbage; urcu-bp
 * registers a thread at its first read lock and unregisters it at its exit.
 * With membarrier (Linux 4.3+) its read lock and unlock are a thread-local
 * load and store each, with no fence. It also ships the fork handlers that
 * let a child use RCU again (registered by arena.c).
 *
 * ThreadSanitizer: the readers' side is inline (and made visible by
 * urcu_tsan.h), but the grace period is computed inside liburcu-bp.so,
 * which is not instrumented, so TSan cannot see that a read-side section
 * ended before synchronize returned. The guard states that edge itself:
 * each read unlock is a release, and every synchronize is followed by an
 * acquire, of one token (__tsan_release/__tsan_acquire, the annotations
 * TSan offers for synchronization it cannot see). Nothing else is hidden
 * from it; in other builds the two are empty.
 */
#ifndef SPOKE_PERCPU_URCU_BP_H
#define SPOKE_PERCPU_URCU_BP_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif

#include "urcu_tsan.h"

/*
 * liburcu 0.13 declares struct urcu_bp_reader 128-byte aligned (a member is
 * cache-line aligned) but its registry puts readers 32 bytes into a chunk:
 * every reader access in its inline read lock is misaligned for that type,
 * and UBSan stops there. The loads and stores themselves are of 8-byte
 * fields at 8-byte aligned addresses, which is all x86-64 (or any target
 * Debian builds liburcu for) needs. So the alignment check alone is off,
 * for the functions of liburcu's own headers only.
 */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_sanitize("alignment"))), apply_to = function)
#endif
#include <urcu/urcu-bp.h>
#if defined(__clang__)
#pragma clang attribute pop
#endif

#ifdef SPOKE_URCU_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char spoke_rcu_tsan_token;
#define spoke_rcu_tsan_release() __tsan_release(&spoke_rcu_tsan_token)
#define spoke_rcu_tsan_acquire() __tsan_acquire(&spoke_rcu_tsan_token)
#else
#define spoke_rcu_tsan_release()                                                                   \
	do {                                                                                       \
	} while (0)
#define spoke_rcu_tsan_acquire()                                                                   \
	do {                                                                                       \
	} while (0)
#endif

/* Any thread: begin a read-side section (nests). */
static inline void spoke_rcu_read_lock(void)
{
	urcu_bp_read_lock();
}

/* Any thread: end it; what it read happens before the next grace period's end. */
static inline void spoke_rcu_read_unlock(void)
{
	spoke_rcu_tsan_release();
	urcu_bp_read_unlock();
}

/* Not from a read-side section: wait until every section begun before this call has ended. */
static inline void spoke_rcu_synchronize(void)
{
	urcu_bp_synchronize_rcu();
	spoke_rcu_tsan_acquire();
}

#endif /* SPOKE_PERCPU_URCU_BP_H */
