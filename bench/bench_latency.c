/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_latency.c - `spoke-bench latency`: how late the service (include/
 * spoke/spoke.h) runs expiry callbacks, against the number of timers
 * pending, the tick length, and a concurrent start/cancel load. Its run,
 * bench_late_run(), is also the `lateness` workload of `spoke-bench service`.
 *
 * The grid: pending P = 1e3, 1e5, 1e6 x tick 100 us, 1 ms, 10 ms x load
 * none / start-cancel: 18 cells. Each cell is K runs (--runs, default 3),
 * each in a freshly forked process (bench_repeat). One run:
 *
 *   1. spoke_create with the default config except tick_ns (and slack_ns,
 *      --slack; pin_threads, --no-pin): one managed shard per CPU, pinned,
 *      a pool of one callback thread per shard.
 *   2. Fill: P timers started from the main thread on the shards in turn,
 *      delays uniform in [5 s, 600 s), so none fires during the run; the run
 *      waits until the shards report all P pending (in their wheels).
 *   3. Load (start-cancel cells): L threads (--load-threads, default one per
 *      CPU, thread i pinned to CPU i % CPUs) each loop spoke_start_on(next
 *      shard in turn, 1 h) + spoke_cancel of that id (which must return 0),
 *      R pairs a second all together (--load-rate, default 1e6; 0 = as fast
 *      as they can), paced in batches of 64. Each start is a message to the
 *      owner shard; the cancel adds one when the owner took the start first
 *      (to unlink). They run from before the stream starts until its last
 *      callback ran. Unthrottled, the producers outrun the shards on a
 *      2-CPU machine (the inbox has no backpressure) and lateness grows
 *      with the backlog: an overload figure, not a service one.
 *   4. Stream: for D seconds (--duration, default 2 s), the main thread
 *      starts 4 timers on the shards in turn, then sleeps 100 us, and again
 *      (~25k timers a second). Delays are uniform in [1 ms, 5 ms). Each
 *      callback records its lateness (below).
 *   5. The run waits for every stream callback, stops the load, waits until
 *      the shards' counters settle and checks them: started = P + stream +
 *      load pairs, cancelled = load pairs, fired = stream, pending = P, and
 *      no pending or load timer ran. Any difference fails the run. (Pending
 *      timers carry their expected deadline too: one that ran early is
 *      reported as an early fire; one that ran on time means the run took
 *      over 5 s, i.e. a stream timer was seconds late.)
 *
 * Lateness. The service's deadline of a one-shot timer is start time + delay
 * on CLOCK_MONOTONIC (docs/contract.md line 2: never before start time +
 * delay), where start time is the clock the service reads inside
 * spoke_start_on; it then runs the timer at the end of the deadline's slot
 * (docs/service.md, "Expiry: the stage and the slack"), so up to the slack
 * (--slack; default a quarter tick) of lateness is by design. CPU % is the
 * process's CPU time (every thread: the service's, the stream's, the load's)
 * over the stream and the wait for its callbacks, in % of one CPU; switches/s
 * its context switches meanwhile. The bench cannot see the
 * service's own reading, so it reads spoke_now_ns() just before calling
 * spoke_start_on: expected = that time + delay <= the service's deadline.
 * The callback's first statement reads spoke_now_ns(): lateness = that -
 * expected. It includes the wait for a pool thread, and it over-states the
 * service's own lateness by the time between the bench's clock read and the
 * service's (well under a microsecond, unless the thread is preempted in
 * between). A callback that reads a time before `expected` ran before its
 * deadline under any reading: a contract violation. The run counts such
 * callbacks and fails with the count and the worst one, and the cell is an
 * error row (the exit status is 1).
 *
 * Distribution: the samples of all K runs of a cell, pooled: p50, p99,
 * p99.9 (nearest rank) and max in us, the range of the runs' own p99, and a
 * histogram with 10 log-spaced buckets per decade from 1 us to 1 s (plus
 * [0, 1 us) and one from 1 s up, whose upper edge is the largest sample).
 * "service max" is the largest max_late_ns of spoke_stats (the service's
 * own measure, from its deadline to the callback's start), median of the
 * runs; "load pairs/s" is the load's start+cancel pairs per second, median.
 *
 * Time: a run takes D plus the fill (~0.5 s at P = 1e6) plus the delays of
 * the last stream timers; the default grid takes ~2.5 min on 2 CPUs (18
 * cells x 3 runs x ~2.5 s). --pending and --tick pick other rows of the
 * grid, --no-load leaves out the load. --quick (ctest bench.latency.quick):
 * P = 1e3, tick 1 ms, with and without load, D = 0.1 s, 2 runs (~1 s, also
 * under the sanitizers).
 *
 * Output: a Markdown table row per cell, or with --json one JSON object per
 * line with the percentiles and the histogram (non-empty buckets as [lo_us,
 * hi_us, count]); scripts/plot.sh draws them.
 */
#define _GNU_SOURCE
#include "bench_util.h"

#include <spoke/spoke.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define NS_PER_S	  UINT64_C(1000000000)
#define NS_PER_MS	  UINT64_C(1000000)
#define PEND_MIN_NS	  (5 * NS_PER_S)    /* pending delays ... */
#define PEND_SPAN_NS	  (595 * NS_PER_S)  /* ... uniform in [5 s, 600 s) */
#define STREAM_MIN_NS	  NS_PER_MS	    /* stream delays ... */
#define STREAM_SPAN_NS	  (4 * NS_PER_MS)   /* ... uniform in [1 ms, 5 ms) */
#define STREAM_BATCH	  4		    /* stream timers per pause */
#define STREAM_PACE_NS	  UINT64_C(100000)  /* the pause */
#define LOAD_DELAY_NS	  (3600 * NS_PER_S) /* load timers: cancelled long before */
#define LOAD_BATCH	  64		    /* load pairs between looks at the stop flag */
#define MAX_LOAD_THREADS  64
#define DEFAULT_LOAD_RATE UINT64_C(1000000)
#define WAIT_STEP_NS	  UINT64_C(100000) /* the main thread's polling step */
#define WAIT_LIMIT_NS	  (30 * NS_PER_S)  /* "eventually": only a bug runs out */
#define LATE_SEED	  UINT64_C(0x1a7e1a7e5eed0001)

/* Histogram: [0, 1 us), 10 buckets per decade from 1 us to 1 s, [1 s, ...). */
#define HIST_PER_DECADE 10
#define HIST_DECADES	6
#define HIST_BUCKETS	(HIST_PER_DECADE * HIST_DECADES + 2)

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

double bench_late_pct_us(const uint64_t *sorted, size_t k, double q)
{
	size_t i = (size_t)ceil(q * (double)k);

	i = i == 0 ? 0 : i - 1;
	return (double)sorted[i < k ? i : k - 1] / 1000.0;
}

/* ---- one run (a forked child) -------------------------------------------- */

struct late_sample {
	uint64_t expected; /* written before spoke_start_on */
	uint64_t late;	   /* written by the callback */
};

static _Atomic uint64_t late_done, unexpected_fires;

/* Callbacks that ran before their deadline: stream timers, pending timers. */
struct early {
	_Atomic uint64_t count, worst_ns;
};
static struct early stream_early, pending_early;

static _Atomic uint64_t stream_worst_late_ns;

/* Any thread: *v = max(*v, x). */
static void atomic_max_u64(_Atomic uint64_t *v, uint64_t x)
{
	uint64_t old = atomic_load_explicit(v, memory_order_relaxed);

	while (x > old && !atomic_compare_exchange_weak_explicit(v, &old, x, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

/* Any thread: a callback ran by_ns before its deadline. */
static void note_early(struct early *e, uint64_t by_ns)
{
	atomic_max_u64(&e->worst_ns, by_ns);
	atomic_fetch_add_explicit(&e->count, 1, memory_order_relaxed);
}

/* Pool thread: the lateness of one stream timer. */
static void cb_late(void *arg)
{
	uint64_t now = spoke_now_ns();
	struct late_sample *x = arg;

	if (now < x->expected) {
		note_early(&stream_early, x->expected - now);
		x->late = 0;
	} else {
		x->late = now - x->expected;
		atomic_max_u64(&stream_worst_late_ns, x->late);
	}
	atomic_fetch_add_explicit(&late_done, 1, memory_order_release);
}

/* Pool thread: a load timer (cancelled long before its 1 h), which must never run. */
static void cb_never(void *arg)
{
	(void)arg;
	atomic_fetch_add_explicit(&unexpected_fires, 1, memory_order_relaxed);
}

/*
 * Pool thread: a pending timer (5 s .. 600 s), which should not run during
 * the run; arg is its expected deadline (as for the stream).
 */
static void cb_pending(void *arg)
{
	uint64_t now = spoke_now_ns(), expected = (uint64_t)(uintptr_t)arg;

	if (now < expected)
		note_early(&pending_early, expected - now);
	atomic_fetch_add_explicit(&unexpected_fires, 1, memory_order_relaxed);
}

/* A load thread (a team thread, bench_util.h): its header first, then its job. */
struct load_thread {
	struct bench_thread t;
	struct spoke *s;
	unsigned nshards;
	double batch_ns; /* pacing: one batch of LOAD_BATCH pairs per batch_ns (0 = none) */
};

/*
 * A load thread's body: start + cancel pairs on the shards in turn until
 * the team stops, in batches of LOAD_BATCH; paced, the n-th batch starts at
 * t0 + n * batch_ns (one that falls behind does not sleep until it caught
 * up). t->ops counts the pairs.
 */
static void load_main(struct bench_thread *t)
{
	struct load_thread *l = (struct load_thread *)t;
	unsigned shard = t->index % l->nshards;
	uint64_t pairs = 0, batches = 0;
	int err = 0;

	do {
		if (l->batch_ns > 0) {
			uint64_t due = t->t0 + (uint64_t)((double)batches * l->batch_ns),
				 now = bench_now_ns();

			if (due > now)
				bench_sleep_ns(due - now);
		}
		batches++;
		for (int k = 0; !err && k < LOAD_BATCH; k++) {
			spoke_id id;

			err = spoke_start_on(l->s, shard, LOAD_DELAY_NS, cb_never, NULL, &id);
			if (!err)
				err = spoke_cancel(l->s, id);
			shard = shard + 1 == l->nshards ? 0 : shard + 1;
		}
		pairs += LOAD_BATCH;
	} while (!err && !bench_team_stopping(t));
	t->ops = pairs;
	if (err)
		bench_thread_fail(t, err, "spoke_start_on or spoke_cancel");
}

static struct spoke_stats stats_buf; /* 18 KB: one per child, main thread only */

static const struct spoke_shard_stats *totals(struct spoke *s)
{
	spoke_stats(s, &stats_buf);
	return &stats_buf.total;
}

static const struct spoke_shard_stats *shard_stats_of(struct spoke *s, unsigned k)
{
	spoke_stats(s, &stats_buf);
	return &stats_buf.shard[k];
}

/* The process's CPU time and context switches at a moment, to price a stretch of a run. */
struct cpu_mark {
	uint64_t wall_ns, cpu_ns, csw;
};

static struct cpu_mark cpu_mark_now(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return (struct cpu_mark){
		.wall_ns = spoke_now_ns(),
		.cpu_ns = (uint64_t)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * NS_PER_S +
			  (uint64_t)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1000,
		.csw = (uint64_t)(u.ru_nvcsw + u.ru_nivcsw)};
}

static void cpu_mark_since(const struct cpu_mark *m0, struct bench_late_result *r)
{
	struct cpu_mark m1 = cpu_mark_now();
	double wall = (double)(m1.wall_ns - m0->wall_ns);

	r->cpu_pct = wall > 0 ? 100.0 * (double)(m1.cpu_ns - m0->cpu_ns) / wall : 0;
	r->csw_per_s = wall > 0 ? (double)(m1.csw - m0->csw) * 1e9 / wall : 0;
}

static const char *stats_str(char *buf, size_t len, const struct spoke_shard_stats *t)
{
	snprintf(buf, len, "started %llu, cancelled %llu, fired %llu, pending %llu",
		 (unsigned long long)t->started, (unsigned long long)t->cancelled,
		 (unsigned long long)t->fired, (unsigned long long)t->pending);
	return buf;
}

/*
 * Wait until the shards took every message: started and cancelled as given,
 * `pending` in their wheels (published at the end of a turn, which may come
 * after a pool thread ran the turn's last callback). 0 or -ETIME.
 */
static int wait_settled(struct spoke *s, uint64_t started, uint64_t cancelled, uint64_t pending)
{
	uint64_t limit = bench_now_ns() + WAIT_LIMIT_NS;

	for (;;) {
		const struct spoke_shard_stats *t = totals(s);

		if (t->started == started && t->cancelled == cancelled && t->pending == pending)
			return 0;
		if (bench_now_ns() > limit)
			return -ETIME;
		bench_sleep_ns(WAIT_STEP_NS);
	}
}

/*
 * Start j->load_threads load threads on s (none: nothing to start). 0, or
 * a negative errno with out->error set.
 */
static int load_start(struct bench_team *team, struct load_thread *load,
		      const struct bench_late_job *j, struct spoke *s, struct bench_sample *out)
{
	int err;

	*team = (struct bench_team){.T = j->load_threads,
				    .pin = true,
				    .body = load_main,
				    .threads = load,
				    .stride = sizeof(load[0])};
	for (unsigned i = 0; i < j->load_threads; i++) {
		load[i] = (struct load_thread){.s = s, .nshards = spoke_shards(s)};
		if (j->load_rate > 0)
			load[i].batch_ns = 1e9 * LOAD_BATCH * j->load_threads / j->load_rate;
	}
	err = bench_team_start(team);
	if (err)
		return bench_fail(out, err, "pthread_create: %s", strerror(-err));
	bench_team_ready(team);
	bench_team_go(team, true);
	return 0;
}

/* Stop and join the load threads; the pairs they did, or a negative errno. */
static int64_t load_stop(struct bench_team *team, double *load_ns)
{
	struct bench_team_result r;

	bench_team_stop(team);
	bench_team_join(team, &r);
	*load_ns = r.window_ns;
	return r.err ? r.err : (int64_t)r.ops;
}

/* Fill: n timers that stay pending, on the shards in turn, all in the wheels. */
static int fill_pending(struct spoke *s, uint64_t n, struct bench_rng *rng,
			struct bench_sample *out)
{
	unsigned nshards = spoke_shards(s);
	char sb[160];
	int err = 0;

	for (uint64_t i = 0; !err && i < n; i++) {
		uint64_t d = PEND_MIN_NS + bench_rng_next(rng) % PEND_SPAN_NS;

		err = spoke_start_on(s, (unsigned)(i % nshards), d, cb_pending,
				     (void *)(uintptr_t)(spoke_now_ns() + d), NULL);
	}
	if (err)
		return bench_fail(out, err, "fill: spoke_start_on: %s", strerror(-err));
	if (wait_settled(s, n, 0, n) != 0)
		return bench_fail(out, -ETIME, "fill: %llu timers did not reach the wheels: %s",
				  (unsigned long long)n, stats_str(sb, sizeof(sb), totals(s)));
	return 0;
}

/* Stream: timers with short delays until the window ends; how many, or -errno. */
static int64_t stream(struct spoke *s, const struct bench_late_job *j, struct late_sample *smp,
		      struct bench_rng *rng, struct bench_sample *out)
{
	unsigned nshards = spoke_shards(s), shard = 0;
	uint64_t k = 0, end = spoke_now_ns() + j->window_ns;

	while (k + STREAM_BATCH <= j->max_samples && spoke_now_ns() < end) {
		for (int b = 0; b < STREAM_BATCH; b++) {
			uint64_t d = STREAM_MIN_NS + bench_rng_next(rng) % STREAM_SPAN_NS;
			struct late_sample *x = &smp[k];
			int err;

			x->expected = spoke_now_ns() + d;
			err = spoke_start_on(s, shard, d, cb_late, x, NULL);
			if (err)
				return bench_fail(out, err, "stream: spoke_start_on: %s",
						  strerror(-err));
			k++;
			shard = shard + 1 == nshards ? 0 : shard + 1;
		}
		bench_sleep_ns(STREAM_PACE_NS);
	}
	if (k == 0)
		return bench_fail(out, -EPROTO, "no stream timer started in the window");
	return (int64_t)k;
}

/* Wait for k stream callbacks. */
static int wait_stream(uint64_t k, struct bench_sample *out)
{
	uint64_t limit = spoke_now_ns() + WAIT_LIMIT_NS;

	while (atomic_load_explicit(&late_done, memory_order_acquire) < k) {
		if (spoke_now_ns() > limit)
			return bench_fail(out, -ETIME, "%llu of %llu stream timers ran in %llu s",
					  (unsigned long long)atomic_load(&late_done),
					  (unsigned long long)k,
					  (unsigned long long)(WAIT_LIMIT_NS / NS_PER_S));
		bench_sleep_ns(WAIT_STEP_NS);
	}
	return 0;
}

/*
 * Every callback that ran early, or ran at all but should not have: the
 * first thing a run reports, whatever else went wrong. 0 or -EPROTO.
 */
static int check_early(uint64_t k, uint64_t pending, struct bench_sample *out)
{
	uint64_t se = atomic_load(&stream_early.count), pe = atomic_load(&pending_early.count);

	if (se || pe)
		return bench_fail(
			out, -EPROTO,
			"EARLY FIRE: %llu of %llu stream timers ran before their "
			"deadline (worst by %.3f us), %llu of %llu pending (worst by %.3f "
			"s)",
			(unsigned long long)se, (unsigned long long)k,
			(double)atomic_load(&stream_early.worst_ns) / 1e3, (unsigned long long)pe,
			(unsigned long long)pending,
			(double)atomic_load(&pending_early.worst_ns) / 1e9);
	if (atomic_load(&unexpected_fires))
		return bench_fail(
			out, -EPROTO,
			"%llu callbacks of pending or cancelled timers ran, not early (the "
			"run took over 5 s? a stream timer was %.1f ms late)",
			(unsigned long long)atomic_load(&unexpected_fires),
			(double)atomic_load(&stream_worst_late_ns) / 1e6);
	return 0;
}

/* After the stream and the load: every counter as the run made it. */
static int check_service(struct spoke *s, const struct bench_late_job *j, uint64_t k,
			 uint64_t pairs, struct bench_sample *out)
{
	const struct spoke_shard_stats *t;
	char sb[160];

	if (wait_settled(s, j->pending + k + pairs, pairs, j->pending) != 0)
		return bench_fail(out, -ETIME, "counters did not settle (want started %llu): %s",
				  (unsigned long long)(j->pending + k + pairs),
				  stats_str(sb, sizeof(sb), totals(s)));
	t = totals(s);
	if (t->fired != k)
		return bench_fail(out, -EPROTO, "%llu stream timers: %s", (unsigned long long)k,
				  stats_str(sb, sizeof(sb), t));
	return 0;
}

int bench_late_run(const struct bench_late_job *j, unsigned run, uint64_t *late_ns,
		   struct bench_late_result *r, struct bench_sample *out)
{
	struct load_thread load[MAX_LOAD_THREADS];
	struct bench_team team;
	bool loaded = false;
	struct late_sample *smp;
	struct spoke_config cfg;
	struct bench_rng rng;
	int64_t k = 0, pairs = 0;
	struct spoke *s;
	int err;

	memset(r, 0, sizeof(*r));
	atomic_store(&late_done, 0);
	atomic_store(&stream_worst_late_ns, 0);
	memset(&stream_early, 0, sizeof(stream_early));
	memset(&pending_early, 0, sizeof(pending_early));
	atomic_store(&unexpected_fires, 0);
	if (j->load_threads > MAX_LOAD_THREADS)
		return bench_fail(out, -EINVAL, "at most %d load threads", MAX_LOAD_THREADS);
	bench_rng_seed(&rng, LATE_SEED + run);
	smp = calloc(j->max_samples, sizeof(*smp));
	if (!smp)
		return bench_fail(out, -ENOMEM, "no memory for %zu samples", j->max_samples);
	spoke_config_init(&cfg);
	cfg.tick_ns = j->tick_ns;
	cfg.slack_ns = j->slack_ns;
	cfg.pin_threads = !j->no_pin;
	err = spoke_create(&s, &cfg);
	if (err) {
		free(smp);
		return bench_fail(out, err, "spoke_create(tick %llu ns): %s",
				  (unsigned long long)j->tick_ns, strerror(-err));
	}
	err = fill_pending(s, j->pending, &rng, out);
	if (!err) {
		err = load_start(&team, load, j, s, out);
		loaded = err == 0;
	}
	if (!err) {
		struct cpu_mark m0 = cpu_mark_now();

		k = stream(s, j, smp, &rng, out);
		if (k < 0)
			err = (int)k;
		if (!err)
			err = wait_stream((uint64_t)k, out);
		cpu_mark_since(&m0, r);
	}
	if (loaded)
		pairs = load_stop(&team, &r->load_ns);
	if (pairs < 0 && !err)
		err = bench_fail(out, (int)pairs, "load: spoke_start_on or spoke_cancel: %s",
				 strerror((int)-pairs));
	if (check_early(k > 0 ? (uint64_t)k : 0, j->pending, out) != 0)
		err = -EPROTO;
	if (!err)
		err = check_service(s, j, (uint64_t)k, (uint64_t)pairs, out);
	if (!err) {
		r->service_max_late_us = (double)totals(s)->max_late_ns / 1000.0;
		r->slack_us = (double)shard_stats_of(s, 0)->slack_ns / 1000.0;
	}
	spoke_destroy(s);
	if (!err) {
		for (int64_t i = 0; i < k; i++)
			late_ns[i] = smp[i].late;
		qsort(late_ns, (size_t)k, sizeof(*late_ns), cmp_u64);
		r->samples = (uint64_t)k;
		r->p50_us = bench_late_pct_us(late_ns, (size_t)k, 0.50);
		r->p99_us = bench_late_pct_us(late_ns, (size_t)k, 0.99);
		r->p999_us = bench_late_pct_us(late_ns, (size_t)k, 0.999);
		r->max_us = (double)late_ns[k - 1] / 1000.0;
		r->load_pairs = (uint64_t)pairs;
	}
	free(smp);
	return err;
}

/* ---- the grid (parent) --------------------------------------------------- */

#define MAX_PENDING 3
#define MAX_TICKS   3

struct plan {
	bool json, quick, failed;
	unsigned runs, load_threads;
	double duration_s, load_rate;
	uint64_t slack_ns; /* --slack (0: the default) */
	bool no_pin;	   /* --no-pin */
	uint64_t pending[MAX_PENDING], tick_ns[MAX_TICKS];
	size_t npending, nticks, nloads; /* nloads 1: no load only, 2: both */
	size_t max_samples;		 /* per run */
	/* shared with the forked runs: run r writes res[r] and samples[r * max_samples ...] */
	struct bench_late_result *res;
	uint64_t *samples;
	size_t map_bytes;
};

struct cell {
	const struct plan *p;
	struct bench_late_job job;
};

static int run_cell(void *arg, unsigned run, struct bench_sample *out)
{
	const struct cell *c = arg;
	const struct plan *p = c->p;
	int err =
		bench_late_run(&c->job, run, p->samples + run * p->max_samples, &p->res[run], out);

	out->value = p->res[run].p99_us;
	out->timed_ns = (double)c->job.window_ns;
	return err;
}

/* What one cell reports: the runs' samples pooled. */
struct cell_result {
	uint64_t n;
	double p50_us, p99_us, p999_us, max_us;
	double p99_min_us, p99_max_us; /* of the runs' own p99 */
	double service_max_late_us;    /* median of the runs */
	double load_pairs_per_s;       /* median of the runs */
	double slack_us;	       /* the slack in effect */
	double cpu_pct, csw_per_s;     /* medians of the runs */
	uint64_t hist[HIST_BUCKETS];
};

static unsigned hist_bucket(uint64_t late_ns)
{
	double b;

	if (late_ns < 1000)
		return 0;
	b = floor(log10((double)late_ns / 1000.0) * HIST_PER_DECADE) + 1;
	return b >= HIST_BUCKETS - 1 ? HIST_BUCKETS - 1 : (unsigned)b;
}

/* Lower edge of bucket b in us. */
static double hist_lo_us(unsigned b)
{
	return b == 0 ? 0 : pow(10, (double)(b - 1) / HIST_PER_DECADE);
}

static int pool_runs(const struct plan *p, struct cell_result *cr)
{
	double p99[BENCH_MAX_RUNS], svc[BENCH_MAX_RUNS], rate[BENCH_MAX_RUNS];
	double cpu[BENCH_MAX_RUNS], csw[BENCH_MAX_RUNS];
	uint64_t *all, n = 0;

	memset(cr, 0, sizeof(*cr));
	for (unsigned r = 0; r < p->runs; r++)
		n += p->res[r].samples;
	all = malloc(n * sizeof(*all));
	if (!all)
		return -ENOMEM;
	n = 0;
	for (unsigned r = 0; r < p->runs; r++) {
		const struct bench_late_result *x = &p->res[r];

		memcpy(all + n, p->samples + r * p->max_samples, x->samples * sizeof(*all));
		n += x->samples;
		p99[r] = x->p99_us;
		svc[r] = x->service_max_late_us;
		rate[r] = x->load_ns > 0 ? (double)x->load_pairs * 1e9 / x->load_ns : 0;
		cpu[r] = x->cpu_pct;
		csw[r] = x->csw_per_s;
	}
	cr->slack_us = p->res[0].slack_us;
	qsort(all, n, sizeof(*all), cmp_u64);
	cr->n = n;
	cr->p50_us = bench_late_pct_us(all, n, 0.50);
	cr->p99_us = bench_late_pct_us(all, n, 0.99);
	cr->p999_us = bench_late_pct_us(all, n, 0.999);
	cr->max_us = (double)all[n - 1] / 1000.0;
	for (uint64_t i = 0; i < n; i++)
		cr->hist[hist_bucket(all[i])]++;
	free(all);
	bench_median(p99, p->runs); /* sorts */
	cr->p99_min_us = p99[0];
	cr->p99_max_us = p99[p->runs - 1];
	cr->service_max_late_us = bench_median(svc, p->runs);
	cr->load_pairs_per_s = bench_median(rate, p->runs);
	cr->cpu_pct = bench_median(cpu, p->runs);
	cr->csw_per_s = bench_median(csw, p->runs);
	return 0;
}

/* ---- output -------------------------------------------------------------- */

static const char *load_name(unsigned load_threads)
{
	return load_threads ? "start-cancel" : "none";
}

static const char *tick_str(char *buf, size_t len, uint64_t tick_ns)
{
	if (tick_ns % NS_PER_MS == 0)
		snprintf(buf, len, "%llu ms", (unsigned long long)(tick_ns / NS_PER_MS));
	else
		snprintf(buf, len, "%.0f us", (double)tick_ns / 1000.0);
	return buf;
}

static void json_head(const struct plan *p, const struct bench_late_job *j)
{
	printf("{\"bench\":\"latency\",\"workload\":\"lateness\",\"pending\":%llu,\"tick_us\":%.0f,"
	       "\"load\":\"%s\",\"load_threads\":%u,\"load_rate\":%.0f,\"duration_s\":%g",
	       (unsigned long long)j->pending, (double)j->tick_ns / 1000.0,
	       load_name(j->load_threads), j->load_threads, j->load_threads ? j->load_rate : 0,
	       p->duration_s);
}

static void print_json(const struct plan *p, const struct bench_late_job *j,
		       const struct cell_result *cr)
{
	bool first = true;

	json_head(p, j);
	printf(",\"n\":%llu,\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f,"
	       "\"p99_min_us\":%.2f,\"p99_max_us\":%.2f,\"service_max_late_us\":%.2f,"
	       "\"load_pairs_per_s\":%.0f,\"slack_us\":%.3f,\"cpu_pct\":%.1f,"
	       "\"csw_per_s\":%.0f,\"shards\":%u,\"runs\":%u,\"hist_per_decade\":%d,"
	       "\"hist\":[",
	       (unsigned long long)cr->n, cr->p50_us, cr->p99_us, cr->p999_us, cr->max_us,
	       cr->p99_min_us, cr->p99_max_us, cr->service_max_late_us, cr->load_pairs_per_s,
	       cr->slack_us, cr->cpu_pct, cr->csw_per_s, bench_ncpus(), p->runs, HIST_PER_DECADE);
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		double hi = b + 1 < HIST_BUCKETS ? hist_lo_us(b + 1) : cr->max_us;

		if (!cr->hist[b])
			continue;
		printf("%s[%.4g,%.4g,%llu]", first ? "" : ",", hist_lo_us(b), hi,
		       (unsigned long long)cr->hist[b]);
		first = false;
	}
	printf("]}\n");
}

static void table_head(const struct bench_late_job *j)
{
	static bool header_done;
	char nb[32], tb[32];

	if (!header_done) {
		printf("| pending | tick | load | samples | p50 | p99 | p99.9 | max | p99 of runs "
		       "| service max | slack | CPU %% | switches/s | load pairs/s |\n");
		printf("|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
		header_done = true;
	}
	printf("| %s | %s | %s |", bench_fmt_count(nb, sizeof(nb), j->pending),
	       tick_str(tb, sizeof(tb), j->tick_ns), load_name(j->load_threads));
}

static void print_cell(const struct plan *p, const struct bench_late_job *j,
		       const struct cell_result *cr)
{
	if (p->json) {
		print_json(p, j, cr);
	} else {
		table_head(j);
		printf(" %llu | %.1f | %.1f | %.1f | %.1f | %.1f .. %.1f | %.1f | %.1f | %.0f | "
		       "%.0f |",
		       (unsigned long long)cr->n, cr->p50_us, cr->p99_us, cr->p999_us, cr->max_us,
		       cr->p99_min_us, cr->p99_max_us, cr->service_max_late_us, cr->slack_us,
		       cr->cpu_pct, cr->csw_per_s);
		if (j->load_threads)
			printf(" %.2fM |\n", cr->load_pairs_per_s / 1e6);
		else
			printf(" - |\n");
	}
	fflush(stdout);
}

/* An error row, also on stderr: a failed cell (an early fire above all) must not pass unseen. */
static void print_error(const struct plan *p, const struct bench_late_job *j, const char *err)
{
	char nb[32], tb[32];

	fprintf(stderr, "spoke-bench latency: pending %s, tick %s, load %s: %s\n",
		bench_fmt_count(nb, sizeof(nb), j->pending), tick_str(tb, sizeof(tb), j->tick_ns),
		load_name(j->load_threads), err);
	if (p->json) {
		json_head(p, j);
		printf(",\"error\":\"");
		for (const char *c = err; *c; c++) {
			if (*c == '"' || *c == '\\')
				putchar('\\');
			putchar(*c);
		}
		printf("\"}\n");
	} else {
		table_head(j);
		printf(" error: %s | | | | | | | | | | |\n", err);
	}
	fflush(stdout);
}

static void do_cell(struct plan *p, uint64_t pending, uint64_t tick_ns, unsigned load_threads)
{
	struct cell c = {.p = p,
			 .job = {.pending = pending,
				 .tick_ns = tick_ns,
				 .slack_ns = p->slack_ns,
				 .no_pin = p->no_pin,
				 .window_ns = (uint64_t)(p->duration_s * 1e9),
				 .load_threads = load_threads,
				 .load_rate = p->load_rate,
				 .max_samples = p->max_samples}};
	double limit_s = p->runs * (p->duration_s + 30);
	struct bench_summary sum;
	struct cell_result cr;
	char err[240];
	int rc;

	memset(p->res, 0, BENCH_MAX_RUNS * sizeof(*p->res));
	rc = bench_repeat(run_cell, &c, p->runs, limit_s, &sum, err, sizeof(err));
	if (!rc && pool_runs(p, &cr) != 0) {
		rc = -ENOMEM;
		snprintf(err, sizeof(err), "no memory to pool the samples");
	}
	if (rc) {
		p->failed = true;
		print_error(p, &c.job, err);
		return;
	}
	print_cell(p, &c.job, &cr);
}

/* ---- options and main ---------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spoke-bench latency [options]\n"
		"  Lateness of expiry callbacks (callback entry - start time - delay), p50, p99,\n"
		"  p99.9, max in us, at 1e3, 1e5, 1e6 pending timers, tick 100 us, 1 ms, 10 ms,\n"
		"  without and with a start/cancel load (see the top of bench/bench_latency.c).\n"
		"  --json             one JSON object per cell, with a histogram\n"
		"  --quick            1e3 pending, tick 1 ms, 0.1 s, 2 runs (smoke test)\n"
		"  --duration S       seconds of measured stream per run (default 2)\n"
		"  --runs K           runs per cell, each in a fresh process (default 3)\n"
		"  --load-threads L   start/cancel load threads (default one per CPU)\n"
		"  --load-rate R      their start+cancel pairs per second, all together\n"
		"                     (default %.0e; 0 = as fast as they can)\n"
		"  --no-load          only the cells without load\n"
		"  --pending LIST     pending counts instead of 1e3,1e5,1e6 (at most 3)\n"
		"  --tick LIST        tick lengths in us instead of 100,1000,10000 (at most 3)\n"
		"  --slack US         the service's slack_ns in us (default 0: tick/4)\n"
		"  --no-pin           shard threads not pinned to their CPUs (pin_threads)\n",
		(double)DEFAULT_LOAD_RATE);
}

/* "1e3,1e5": up to max counts, each 1..1e12, into v[]; how many, or -EINVAL. */
static int parse_counts(const char *arg, uint64_t *v, size_t max)
{
	char buf[256], *save = NULL, *tok;
	size_t n = 0;

	if (snprintf(buf, sizeof(buf), "%s", arg) >= (int)sizeof(buf))
		return -EINVAL;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (n >= max || bench_parse_count(tok, &v[n++]))
			return -EINVAL;
	return n ? (int)n : -EINVAL;
}

/* A count (bench_parse_count), or 0 for the option's "none" or "default". */
static bool parse_count_or_zero(const char *arg, uint64_t *v)
{
	if (strcmp(arg, "0") == 0) {
		*v = 0;
		return true;
	}
	return bench_parse_count(arg, v) == 0;
}

/* What latency's own options gave (zero or false: not given). */
struct latency_opts {
	uint64_t load, rate, slack_us;
	double duration;
	uint64_t pending[MAX_PENDING], tick_us[MAX_TICKS];
	int npending, nticks;
	bool no_load, no_pin;
};

/* A latency option (bench_option_fn); ctx is struct latency_opts. */
static int latency_option(void *ctx, int opt, const char *arg)
{
	struct latency_opts *l = ctx;

	switch (opt) {
	case 'd':
		if (bench_parse_seconds(arg, &l->duration) == 0 && l->duration <= 3600)
			return 0;
		fprintf(stderr, "--duration: seconds, above 0, at most 3600\n");
		return -1;
	case 'l':
		if (bench_parse_count(arg, &l->load) == 0 && l->load <= MAX_LOAD_THREADS)
			return 0;
		fprintf(stderr, "--load-threads: 1..%d\n", MAX_LOAD_THREADS);
		return -1;
	case 'a':
		if (parse_count_or_zero(arg, &l->rate))
			return 0;
		fprintf(stderr, "--load-rate: pairs per second, e.g. 1e6; 0 = unthrottled\n");
		return -1;
	case 'n':
		l->no_load = true;
		return 0;
	case 'p':
		l->npending = parse_counts(arg, l->pending, MAX_PENDING);
		if (l->npending > 0)
			return 0;
		fprintf(stderr, "--pending: up to %d counts, e.g. 1e3,1e5\n", MAX_PENDING);
		return -1;
	case 't':
		l->nticks = parse_counts(arg, l->tick_us, MAX_TICKS);
		if (l->nticks > 0)
			return 0;
		fprintf(stderr, "--tick: up to %d tick lengths in us, e.g. 100,1000\n", MAX_TICKS);
		return -1;
	case 's':
		if (parse_count_or_zero(arg, &l->slack_us))
			return 0;
		fprintf(stderr, "--slack: us, e.g. 250; 0 = the service's default\n");
		return -1;
	case 'u':
		l->no_pin = true;
		return 0;
	default:
		return -1;
	}
}

/* Fill the plan from argv. -1 to go on, or the exit status for main (usage or error). */
static int parse_options(struct plan *p, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"duration", required_argument, NULL, 'd'},
		{"load-threads", required_argument, NULL, 'l'},
		{"load-rate", required_argument, NULL, 'a'},
		{"no-load", no_argument, NULL, 'n'},
		{"pending", required_argument, NULL, 'p'},
		{"tick", required_argument, NULL, 't'},
		{"slack", required_argument, NULL, 's'},
		{"no-pin", no_argument, NULL, 'u'},
		{NULL, 0, NULL, 0},
	};
	struct latency_opts l = {.load = bench_ncpus(), .rate = DEFAULT_LOAD_RATE};
	struct bench_opts o;
	int rc = bench_parse_options(argc, argv, false, longopts, latency_option, &l, usage, &o);

	if (rc >= 0)
		return rc;
	p->json = o.json;
	p->quick = o.quick;
	p->runs = bench_opts_runs(&o, 2, 3);
	p->duration_s = l.duration > 0 ? l.duration : p->quick ? 0.1 : 2;
	p->load_threads = (unsigned)l.load;
	p->load_rate = (double)l.rate;
	p->slack_ns = l.slack_us * 1000;
	p->no_pin = l.no_pin;
	p->nloads = l.no_load ? 1 : 2;
	if (p->quick) {
		p->pending[0] = 1000;
		p->npending = 1;
		p->tick_ns[0] = NS_PER_MS;
		p->nticks = 1;
	} else {
		p->pending[0] = 1000;
		p->pending[1] = 100000;
		p->pending[2] = 1000000;
		p->npending = 3;
		p->tick_ns[0] = 100000;
		p->tick_ns[1] = NS_PER_MS;
		p->tick_ns[2] = 10 * NS_PER_MS;
		p->nticks = 3;
	}
	if (l.npending > 0) {
		memcpy(p->pending, l.pending, sizeof(l.pending));
		p->npending = (size_t)l.npending;
	}
	for (int i = 0; i < l.nticks; i++)
		p->tick_ns[i] = l.tick_us[i] * 1000;
	if (l.nticks > 0)
		p->nticks = (size_t)l.nticks;
	/* The stream starts at most STREAM_BATCH timers per STREAM_PACE_NS. */
	p->max_samples = ((size_t)(p->duration_s * 1e9 / STREAM_PACE_NS) + 2) * STREAM_BATCH;
	return -1;
}

int bench_latency_main(int argc, char **argv)
{
	static struct plan plan;
	struct plan *p = &plan;
	uint64_t t0 = bench_now_ns();
	char machine[256], rate[32];
	void *map;
	int rc;

	rc = parse_options(p, argc, argv);
	if (rc >= 0)
		return rc;
	p->map_bytes = BENCH_MAX_RUNS * sizeof(*p->res) +
		       (size_t)p->runs * p->max_samples * sizeof(*p->samples);
	map = mmap(NULL, p->map_bytes, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED) {
		perror("spoke-bench latency: mmap (try fewer --runs or a shorter --duration)");
		return 1;
	}
	p->res = map;
	p->samples = (uint64_t *)(p->res + BENCH_MAX_RUNS);
	bench_machine(machine, sizeof(machine));
	if (p->load_rate > 0)
		bench_fmt_count(rate, sizeof(rate), (uint64_t)p->load_rate);
	else
		snprintf(rate, sizeof(rate), "unthrottled");
	if (!p->json)
		printf("spoke-bench latency: lateness in us of expiry callbacks (callback entry - "
		       "(start + delay)), the samples of %u runs pooled, each run a fresh process "
		       "with %.3g s of stream; load: %u start/cancel threads, %s pairs/s.\n"
		       "machine: %s\n\n",
		       p->runs, p->duration_s, p->load_threads, rate, machine);
	for (size_t t = 0; t < p->nticks; t++)
		for (size_t i = 0; i < p->npending; i++)
			for (size_t l = 0; l < p->nloads; l++)
				do_cell(p, p->pending[i], p->tick_ns[t], l ? p->load_threads : 0);
	fprintf(p->json ? stderr : stdout, "\nspoke-bench latency: wall time %.1f s\n",
		(double)(bench_now_ns() - t0) / 1e9);
	munmap(map, p->map_bytes);
	return p->failed ? 1 : 0;
}
