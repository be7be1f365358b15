/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * latency.h - how late the service runs callbacks: the run of `spoke-bench
 * latency` (latency_run.c), also the `lateness` workload of `spoke-bench
 * service`, and the stolen-CPU scenario (latency_stolen.c). What a run
 * does and how lateness is defined is said at the top of bench_latency.c.
 */
#ifndef SPOKE_BENCH_LATENCY_H
#define SPOKE_BENCH_LATENCY_H

#include "bench_svc.h"

/* A run's stream starts at most LATE_STREAM_BATCH timers per LATE_STREAM_PACE_NS. */
#define LATE_STREAM_BATCH   4
#define LATE_STREAM_PACE_NS (100 * NS_PER_US)

/* One lateness measurement of the service. */
struct bench_late_job {
	uint64_t pending;	 /* timers held pending, delays [pending_min, 120 x that) ... */
	uint64_t pending_min_ns; /* ... 0: 5 s, so [5 s, 600 s) */
	uint64_t tick_ns;	 /* the service's tick; the rest of its config is the default */
	uint64_t slack_ns;	 /* ... but this slack_ns (0: the default) */
	bool no_pin;		 /* ... and pin_threads false when set */
	uint64_t window_ns;	 /* how long the stream of measured timers is started */
	unsigned load_threads;	 /* start+cancel churn threads meanwhile (0 = no load) */
	double load_rate;	 /* their pairs per second, all together (0 = unthrottled) */
	size_t max_samples;	 /* the stream stops early at this many timers */
};

/* What one run measured (lateness in us). */
struct bench_late_result {
	uint64_t samples;	    /* stream timers measured */
	struct bench_pcts pct;	    /* of their lateness */
	double service_max_late_us; /* the service's own max_late_ns (spoke_stats) */
	uint64_t load_pairs;	    /* start+cancel pairs by the load threads */
	double load_ns;		    /* how long the load ran */
	double slack_us;	    /* the slack in effect (spoke_stats) */
	double cpu_pct;		    /* CPU of the whole process over stream + wait, % of one CPU */
	double csw_per_s;	    /* its context switches per second meanwhile */
	uint64_t pending_ran;	    /* held-pending timers that ran (not early) in a run that
				       outlasted their delay: counted, not failed */
	uint64_t in_stall;	    /* stolen-cpu: callbacks that ran while the CPU was taken */
	double stall_ms;	    /* stolen-cpu: how long the CPU was taken */
	double steal_ms;	    /* stolen-cpu: the host's steal time on the other CPUs
				       meanwhile (/proc/stat; -1: not known) */
};

/*
 * One run, in a forked child's main thread: create the service, fill, stream,
 * check the service's counters. late_ns (max_samples entries) receives the
 * samples, sorted ascending. 0, or a negative errno with out->error set; a
 * callback that ran before its deadline always fails the run.
 */
int bench_late_run(const struct bench_late_job *j, unsigned run, uint64_t *late_ns,
		   struct bench_late_result *r, struct bench_sample *out);

/* ---- the parts of a run that the stolen-CPU scenario shares (latency_run.c) ---- */

/* A measured timer: its expected deadline, and how late its callback came. */
struct late_sample {
	uint64_t expected; /* written before spoke_start_on */
	uint64_t late;	   /* written by the callback */
	uint64_t ran_at;   /* written by the callback: spoke_now_ns() at its entry */
};

/* The run's counters (early runs, callbacks done) back to zero. */
void late_counters_reset(void);

/* Callback of a measured timer: arg is its struct late_sample. Any thread. */
void late_cb(void *arg);

/* The held-pending timers of a run: their ids, to cancel them at its end. */
struct late_pending {
	spoke_id *ids;
	uint64_t n;
};

#define LATE_PENDING_MIN_NS (5 * NS_PER_S) /* the held-pending timers' shortest delay */

/*
 * Fill: n timers held pending, delays uniform in [min_ns, 120 x min_ns),
 * on the shards in turn, all in the wheels. 0 or an error with out->error
 * set.
 */
int late_fill(struct spoke *s, struct late_pending *p, uint64_t n, uint64_t min_ns,
	      struct bench_rng *rng, struct bench_sample *out);

/* Wait for k measured callbacks. 0 or -ETIME with out->error set. */
int late_wait_stream(uint64_t k, struct bench_sample *out);

/*
 * The end of a run: cancel the held-pending timers (each cancel that finds
 * its timer fired is counted in *pending_ran), wait until the counters
 * settle as the run made them (k measured timers, `pairs` load pairs) and
 * check them, and that no callback ran early. 0 or an error.
 */
int late_finish(struct spoke *s, const struct late_pending *p, uint64_t k, uint64_t pairs,
		uint64_t *pending_ran, struct bench_sample *out);

/*
 * After spoke_destroy (every callback has run): no load timer ran, and the
 * held-pending timers that ran are the `ran` whose cancel found them gone.
 * 0 or -EPROTO with out->error set.
 */
int late_check_callbacks(uint64_t ran, struct bench_sample *out);

/* Percentiles of smp[0..k-1] (k > 0) into r; late_ns receives the samples, sorted. */
void late_summarize(const struct late_sample *smp, uint64_t k, uint64_t *late_ns,
		    struct bench_late_result *r);

/* ---- the stolen-CPU scenario (latency_stolen.c) ---------------------------------- */

/*
 * One run: shard 0's thread held off its CPU for stall_ns by a SCHED_FIFO
 * busy thread pinned to that CPU, while `timers` timers on shard 0 fall due
 * during the stall and run on the pool; the rest as in bench_late_run
 * (`pending` held-pending timers, tick_ns). column: which configuration
 * (stolen_cpu_columns[]). late_ns (timers entries) receives the samples,
 * sorted. 0, -EPERM when the busy thread cannot get SCHED_FIFO, -EXDEV
 * when this machine has no CPU to stall (out->error says why), or another
 * error.
 */
struct stolen_cpu_job {
	uint64_t pending, tick_ns, stall_ns;
	size_t timers;
	unsigned column;
};

/* A column of the scenario: one configuration of the service. */
struct stolen_cpu_column {
	const char *name;	  /* "rescue off", "rescue 10 ms" */
	const char *key;	  /* its JSON value of "rescue": "off" */
	uint64_t rescue_after_ns; /* struct spoke_config's (0: off) */
};

extern const struct stolen_cpu_column stolen_cpu_columns[];
extern const size_t stolen_cpu_ncolumns;

int stolen_cpu_run(const struct stolen_cpu_job *j, unsigned run, uint64_t *late_ns,
		   struct bench_late_result *r, struct bench_sample *out);

#endif /* SPOKE_BENCH_LATENCY_H */
