/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lateness.h - how late callbacks start, per shard, as a histogram whose
 * percentiles spoke_stats reports (p50, p99, p99.9, max).
 *
 * Log-linear buckets, as HdrHistogram keeps them: values below 8 ns have a
 * bucket each; above, each power of two [2^e, 2^(e+1)) is cut into 8
 * equal sub-buckets, so a bucket is at most 1/8 (12.5 %) wide relative to
 * its values, at every scale from nanoseconds to years. The bucket of v is
 * found with one bit scan: e = msb(v), sub = the 3 bits below it; 8 + 61 * 8
 * = 496 buckets cover every uint64_t.
 *
 * Who writes: whichever thread runs a callback (pool worker, managed
 * thread, attached thread) adds one to a bucket of the callback's shard.
 * That add is the run's only count: spoke_stats' `fired` is the total of
 * the buckets, so a run on a pool pays one locked add, not two.
 * Where pool workers may run the shard's callbacks, two runners can record
 * at once, so the add is a relaxed atomic add (a locked instruction). In an
 * instance without a pool the shard's owner runs its callbacks, and
 * successive owners hand the shard over in order (a join, a thread start,
 * the mode's compare-and-swap): one writer at a time, so the runner passes
 * sole and the add is a relaxed load and store, exact, with no locked
 * instruction on the inline run path. The one exception, a rescuer running
 * a movable timer (rescue.c), records in a histogram of its own beside it
 * (shard_counters.late_moved, with atomic adds), which spoke_stats adds
 * in (docs/design/service.md, "What a call costs"). Either way
 * spoke_stats reads the buckets one by one with relaxed loads, so a report
 * may miss the runs that land while it reads (the same as every other
 * counter of spoke_stats).
 */
#ifndef SPOKE_PERCPU_LATENESS_H
#define SPOKE_PERCPU_LATENESS_H

#include "test_hooks.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SPOKE_LATE_SUB_BITS 3
#define SPOKE_LATE_SUB	    (1u << SPOKE_LATE_SUB_BITS)
#define SPOKE_LATE_BUCKETS  (SPOKE_LATE_SUB + (64 - SPOKE_LATE_SUB_BITS) * SPOKE_LATE_SUB)

struct spoke_late_hist {
	_Atomic uint64_t bucket[SPOKE_LATE_BUCKETS];
};

/*
 * With k = msb(v) - 3, v >> k is 8 + sub, so 8 + 8k + sub = 8k + (v >> k). OR-ing
 * 8 into v makes k 0 below 8, where the same sum is v itself: one formula, no
 * branch (it runs once per callback).
 */
static inline unsigned spoke_late_bucket(uint64_t v)
{
	unsigned k = 63u - SPOKE_LATE_SUB_BITS - (unsigned)__builtin_clzll(v | SPOKE_LATE_SUB);

	return k * SPOKE_LATE_SUB + (unsigned)(v >> k);
}

/* The largest value that falls in bucket b: a percentile is reported as its bucket's top. */
static inline uint64_t spoke_late_bucket_top(unsigned b)
{
	unsigned e, sub;

	if (b < SPOKE_LATE_SUB)
		return b;
	e = (b - SPOKE_LATE_SUB) / SPOKE_LATE_SUB + SPOKE_LATE_SUB_BITS;
	sub = (b - SPOKE_LATE_SUB) % SPOKE_LATE_SUB;
	/* [2^e + sub * 2^(e-3), 2^e + (sub + 1) * 2^(e-3) - 1]; saturates at the top. */
	return (UINT64_C(1) << e) + ((uint64_t)(sub + 1) << (e - SPOKE_LATE_SUB_BITS)) - 1;
}

/*
 * Any thread running a callback of the shard: count one lateness. sole:
 * no other thread can record into h meanwhile (see the top of the file).
 */
static inline void spoke_late_record(struct spoke_late_hist *h, uint64_t late_ns, bool sole)
{
	_Atomic uint64_t *b = &h->bucket[spoke_late_bucket(late_ns)];

	if (sole) {
		uint64_t n = atomic_load_explicit(b, memory_order_relaxed);

		SPOKE_HOOK(SPOKE_HOOK_LATE_SOLE_LOADED);
		atomic_store_explicit(b, n + 1, memory_order_relaxed);
	} else
		atomic_fetch_add_explicit(b, 1, memory_order_relaxed);
}

#endif /* SPOKE_PERCPU_LATENESS_H */
