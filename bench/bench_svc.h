/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_svc.h - what the workloads that drive the service (include/spoke/
 * spoke.h) share:
 *
 *   create    bench_svc_create(): spoke_create, its failure said in a run's
 *             error.
 *   counters  bench_svc_totals(): spoke_stats' totals; bench_svc_wait_*():
 *             wait (polling, bounded by BENCH_WAIT_LIMIT_NS, which only a
 *             bug runs out) until they read as the run made them; the
 *             shards publish their counters at the end of a turn, so a run
 *             waits for them rather than reading them once.
 *   callbacks bench_cb_count(): adds one to the counter its arg points to,
 *             from any thread: every timer a workload may see fire is
 *             counted, so that exactly-once is checked, not assumed.
 *   owners    struct bench_owner: a thread that attaches a shard and runs
 *             the event loop of a server that owns it: sleep on the
 *             shard's wake fd until its next deadline, spoke_poll, again.
 *             The rows where other threads reset or cancel "an attached
 *             shard's timers" have such owners.
 *
 * Threading: the main thread of a run, except bench_cb_count (any thread)
 * and the owner's own loop.
 */
#ifndef SPOKE_BENCH_SVC_H
#define SPOKE_BENCH_SVC_H

#include "bench_util.h"

#include <spoke/spoke.h>

#include <pthread.h>
#include <stdatomic.h>

#define BENCH_WAIT_STEP_NS  (100 * NS_PER_US) /* the main thread's polling step */
#define BENCH_WAIT_LIMIT_NS (30 * NS_PER_S)   /* "eventually": only a bug runs out */

/* spoke_create(cfg); 0, or its error with out->error set. */
int bench_svc_create(struct spoke **s, const struct spoke_config *cfg, struct bench_sample *out);

/* spoke_stats, into one buffer per process (main thread only). */
const struct spoke_stats *bench_svc_stats(struct spoke *s);
/* ... and its totals. */
const struct spoke_shard_stats *bench_svc_totals(struct spoke *s);

/* "started 5, cancelled 5, reset 0, fired 0, pending 0" */
const char *bench_svc_stats_str(char *buf, size_t len, const struct spoke_shard_stats *t);

#define BENCH_ANY UINT64_MAX /* a count a wait does not look at */

/* What a wait wants the totals to read (BENCH_ANY: any value). */
struct bench_svc_counts {
	uint64_t started, cancelled, reset, fired, pending;
};

/*
 * Wait until the totals read as *want; *when_ns (if not NULL) gets the time
 * it saw them. 0 or -ETIME.
 */
int bench_svc_wait(struct spoke *s, const struct bench_svc_counts *want, uint64_t *when_ns);

/* Wait until n timers are pending (the rest: any). */
int bench_svc_wait_pending(struct spoke *s, uint64_t n, uint64_t *when_ns);

/* Callback: arg is an _Atomic uint64_t, counted up by one. Any thread. */
void bench_cb_count(void *arg);

/* A thread that owns one shard of s and runs its event loop. */
struct bench_owner {
	struct spoke *s;
	unsigned shard;
	int cpu; /* pinned to it; -1: not pinned */
	pthread_t th;
	int stop_fd; /* an eventfd: main's way to end the loop */
	/* under mu: set by the owner once it attached or failed to, read by main */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool up;
	int up_err; /* err at that moment */
	/* the owner's own; main reads them after the join */
	int err;	  /* its first failure, 0 if none */
	const char *what; /* ... and what failed */
};

/*
 * Start the owner of shard `shard` (pinned to cpu, -1 for none) and return
 * once it attached it: 0, or a negative errno with out->error set (then no
 * thread is left running).
 */
int bench_owner_start(struct bench_owner *o, struct spoke *s, unsigned shard, int cpu,
		      struct bench_sample *out);

/*
 * End the owner's loop; it detaches (the shard goes back to a managed
 * thread) and is joined. 0, or its first failure with out->error set.
 */
int bench_owner_stop(struct bench_owner *o, struct bench_sample *out);

#endif /* SPOKE_BENCH_SVC_H */
