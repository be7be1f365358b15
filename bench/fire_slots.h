/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fire_slots.h - counting fired callbacks without a shared counter: each
 * callback thread takes a slot (a cache line) of its own the first time it
 * runs one, and counts there; the first callback's time is kept once, and
 * each slot's time every FIRE_STAMP_EVERY callbacks, so that the first to
 * the last callback can be timed without a clock read per callback. Used
 * by the fire rows of `spoke-bench service` (service_expiry.c) and by
 * spoke-pool-ab (pool_ab.c, which scripts/pool-ab.sh compiles alone
 * against other versions of the library: hence a header of static
 * functions).
 *
 * Synchronization: a slot's n and last_ns are written by its thread only
 * (n with release, after last_ns), read by the main thread (n with
 * acquire); nslots and first_ns are taken with atomic RMW by any callback
 * thread. The main thread resets them when no callback can run.
 */
#ifndef SPOKE_BENCH_FIRE_SLOTS_H
#define SPOKE_BENCH_FIRE_SLOTS_H

#include "bench_util.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FIRE_SLOTS	 1024
#define FIRE_STAMP_EVERY 16

/* One line per callback thread: its count and, every 16th run, the time. */
static struct fire_slot {
	_Atomic uint64_t n;
	_Atomic uint64_t last_ns;
} __attribute__((aligned(64))) fire_slots[FIRE_SLOTS];
static _Atomic unsigned fire_nslots;
static _Atomic uint64_t fire_first_ns;
static _Thread_local struct fire_slot *fire_mine;

/* Main thread, no callback running: every count back to 0. */
static inline void fire_slots_reset(void)
{
	memset(fire_slots, 0, sizeof(fire_slots));
	atomic_store(&fire_nslots, 0);
	atomic_store(&fire_first_ns, 0);
}

/* The callback (any callback thread): count one. */
static inline void fire_slots_cb(void *arg)
{
	struct fire_slot *m = fire_mine;
	uint64_t c;

	(void)arg;
	if (!m) {
		unsigned i = atomic_fetch_add_explicit(&fire_nslots, 1, memory_order_relaxed);

		if (i >= FIRE_SLOTS)
			abort(); /* more callback threads than slots: raise FIRE_SLOTS */
		m = fire_mine = &fire_slots[i];
	}
	if (atomic_load_explicit(&fire_first_ns, memory_order_relaxed) == 0) {
		uint64_t zero = 0;

		atomic_compare_exchange_strong_explicit(&fire_first_ns, &zero, bench_now_ns(),
							memory_order_relaxed, memory_order_relaxed);
	}
	c = atomic_load_explicit(&m->n, memory_order_relaxed) + 1;
	if (c % FIRE_STAMP_EVERY == 0)
		atomic_store_explicit(&m->last_ns, bench_now_ns(), memory_order_relaxed);
	atomic_store_explicit(&m->n, c, memory_order_release);
}

/*
 * The slots taken so far. The main thread polls only these: summing all
 * FIRE_SLOTS lines on every poll cost the poller ~67 cache misses a
 * callback, on a CPU that the shard threads need at T = 2. A slot whose
 * taking is not yet visible is counted at a later poll.
 */
static inline unsigned fire_slots_used(void)
{
	unsigned n = atomic_load_explicit(&fire_nslots, memory_order_acquire);

	return n < FIRE_SLOTS ? n : FIRE_SLOTS;
}

/* The callbacks counted in the first `slots` slots. */
static inline uint64_t fire_slots_count(unsigned slots)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < slots; i++)
		sum += atomic_load_explicit(&fire_slots[i].n, memory_order_acquire);
	return sum;
}

/*
 * First callback to last, in ns, once all ran: the last stamp, or done_ns
 * (when the main thread saw the count complete) if no thread ran enough
 * callbacks to stamp one after the first.
 */
static inline uint64_t fire_slots_span_ns(uint64_t done_ns)
{
	uint64_t first = atomic_load(&fire_first_ns), last = 0;

	for (unsigned i = 0, used = fire_slots_used(); i < used; i++) {
		uint64_t l = atomic_load_explicit(&fire_slots[i].last_ns, memory_order_relaxed);

		if (l > last)
			last = l;
	}
	if (last <= first)
		last = done_ns;
	return last - first;
}

#endif /* SPOKE_BENCH_FIRE_SLOTS_H */
