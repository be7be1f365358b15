/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * eventcount.c - how a pool worker sleeps until its queue has work without
 * a lost wake-up (the eventcount: spoke_ec_sleep), and the plain futex
 * waits and wakes of the other sleepers: a shard's managed thread on its
 * wake_seq (managed.c shard_sleep; its own store-load handshake with the
 * producers is shard.c's spoke_owner_announce_sleep and spoke_any_nudge,
 * and spoke_ec_kick wakes it), a cancel_sync on a timer's state word, an
 * owner on the end of a rescue (rescue.c).
 *
 * Eventcount sleeper: read seq, count itself in `sleeping`, full fence, re-check the
 * queue, then futex-wait on seq unless it changed. Producer: enqueue (a full
 * barrier in wfcqueue), full fence, and if anyone sleeps bump seq and wake
 * one. Several sleepers may share one eventcount (the workers of one pool
 * queue); a pool producer that finds none there looks at the neighbours'
 * eventcounts after the same fence (pool.h pool_wake_helper).
 * Either the sleeper sees the new node, or the producer sees `sleeping` and
 * its bump makes the futex wait return at once. Producers only do this when
 * their enqueue found the queue empty, so a busy consumer costs them nothing.
 */
#define _GNU_SOURCE
#include "service.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void futex_wait(_Atomic uint32_t *word, uint32_t expect, int64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tsp = &ts;
	}
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expect, tsp, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void spoke_ec_wake_one(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping)
{
	spoke_full_fence();
	(void)spoke_ec_wake_if_sleeping(seq, sleeping);
}

/*
 * The producer's second half, for a caller that has run the full fence
 * itself and looks at several eventcounts after it (pool.h): wake one
 * sleeper if there is one; true if there was.
 */
bool spoke_ec_wake_if_sleeping(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping)
{
	if (!atomic_load_explicit(sleeping, memory_order_relaxed))
		return false;
	atomic_fetch_add_explicit(seq, 1, memory_order_release);
	futex_wake(seq, 1);
	return true;
}

/* Wake the sleeper whatever it is doing (mode changes, shutdown). */
void spoke_ec_kick(_Atomic uint32_t *seq)
{
	atomic_fetch_add_explicit(seq, 1, memory_order_release);
	futex_wake(seq, INT_MAX);
}

void spoke_ec_sleep(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping, bool (*has_work)(void *),
		    void *arg, int64_t timeout_ns)
{
	uint32_t v = atomic_load_explicit(seq, memory_order_acquire);

	atomic_fetch_add_explicit(sleeping, 1, memory_order_relaxed);
	spoke_full_fence();
	if (timeout_ns != 0 && !has_work(arg))
		futex_wait(seq, v, timeout_ns);
	atomic_fetch_sub_explicit(sleeping, 1, memory_order_relaxed);
}

void spoke_ec_wait_word(_Atomic uint32_t *word, uint32_t expect, int64_t timeout_ns)
{
	futex_wait(word, expect, timeout_ns);
}

void spoke_ec_wake_word(_Atomic uint32_t *word)
{
	futex_wake(word, INT_MAX);
}
