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
 *   5. The run waits for every stream callback, stops the load, cancels the
 *      P pending timers, waits until the shards' counters settle and checks
 *      them: started = P + stream + load pairs, cancelled = load pairs + the
 *      pending cancels that won, fired = stream + the pending timers whose
 *      cancel found them fired, pending = 0; no load timer ran, and each
 *      pending timer that ran (only a run a loaded machine stretched past
 *      5 s has one) is one whose cancel lost. Any difference fails the run.
 *      (Pending timers carry their expected deadline too: one that ran
 *      early is reported as an early fire.)
 *
 * Lateness. The service's deadline of a one-shot timer is start time + delay
 * on CLOCK_MONOTONIC (docs/contract.md line 2: never before start time +
 * delay), where start time is the clock the service reads inside
 * spoke_start_on; it then runs the timer at the end of the deadline's slot
 * (docs/design/service.md, "Expiry: the stage and the slack"), so up to the slack
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
 * Stolen CPU (latency_stolen.c has the scenario): after the grid, shard 0's
 * thread is held off its CPU for --stall ms (default 200) by a SCHED_FIFO
 * busy thread pinned there, while 1000 timers on shard 0 fall due during
 * the stall (pool callbacks), with the first --pending count held pending
 * and the first --tick: p50, p99, p99.9 and max lateness, the samples of
 * the K runs pooled, one column per configuration of the service
 * (stolen_cpu_columns[]). Without the privilege for SCHED_FIFO (root) the
 * row says so and is skipped. --quick runs it too (2 runs of ~0.5 s).
 *
 * Output: a Markdown table row per cell, then the stolen-CPU table; or with
 * --json one JSON object per line with the percentiles and the histogram
 * (non-empty buckets as [lo_us, hi_us, count]), and per stolen-CPU column
 * {"workload":"stolen-cpu","rescue":...}; scripts/plot.sh draws the grid.
 */
#define _GNU_SOURCE
#include "latency.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_LOAD_THREADS  64
#define DEFAULT_LOAD_RATE UINT64_C(1000000)
#define STOLEN_TIMERS	  1000 /* stolen-cpu: timers due during the stall */
#define DEFAULT_STALL_MS  200

/* Histogram: [0, 1 us), 10 buckets per decade from 1 us to 1 s, [1 s, ...). */
#define HIST_PER_DECADE 10
#define HIST_DECADES	6
#define HIST_BUCKETS	(HIST_PER_DECADE * HIST_DECADES + 2)

/* ---- the plan ------------------------------------------------------------- */

#define MAX_PENDING 3
#define MAX_TICKS   3

struct plan {
	bool json, quick, failed;
	unsigned runs, load_threads;
	double duration_s, load_rate;
	uint64_t slack_ns;	 /* --slack (0: the default) */
	uint64_t pending_min_ns; /* --pending-min (0: the default) */
	bool no_pin;		 /* --no-pin */
	uint64_t pending[MAX_PENDING], tick_ns[MAX_TICKS];
	size_t npending, nticks, nloads; /* nloads 1: no load only, 2: both */
	uint64_t stall_ns;		 /* stolen-cpu: 0 leaves it out */
	bool stolen_only;		 /* ... and the grid out */
	size_t max_samples;		 /* per run */
	/* shared with the forked runs: run r writes res[r] and samples[r * max_samples ...] */
	struct bench_late_result *res;
	uint64_t *samples;
	size_t map_bytes;
};

/* What one cell reports: the runs' samples pooled. */
struct cell_result {
	uint64_t n;
	struct bench_pcts pct;	       /* of all the runs' samples */
	double p99_min_us, p99_max_us; /* of the runs' own p99 */
	double service_max_late_us;    /* median of the runs */
	double load_pairs_per_s;       /* median of the runs */
	double slack_us;	       /* the slack in effect */
	double cpu_pct, csw_per_s;     /* medians of the runs */
	uint64_t in_stall;	       /* stolen-cpu: callbacks during the stall, all runs */
	uint64_t pending_ran;	       /* held-pending timers that ran, all runs */
	double stall_ms;	       /* stolen-cpu: the stall, median of the runs */
	double steal_ms;	       /* stolen-cpu: host steal on the other CPUs, all runs
					  (-1: not known) */
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

/* The medians over the runs of one field of their results. */
static double median_of(const struct plan *p, double (*field)(const struct bench_late_result *x))
{
	double v[BENCH_MAX_RUNS];

	for (unsigned r = 0; r < p->runs; r++)
		v[r] = field(&p->res[r]);
	return bench_median(v, p->runs);
}

static double f_service_late(const struct bench_late_result *x)
{
	return x->service_max_late_us;
}

static double f_load_rate(const struct bench_late_result *x)
{
	return x->load_ns > 0 ? (double)x->load_pairs * 1e9 / x->load_ns : 0;
}

static double f_cpu(const struct bench_late_result *x)
{
	return x->cpu_pct;
}

static double f_csw(const struct bench_late_result *x)
{
	return x->csw_per_s;
}

static double f_stall(const struct bench_late_result *x)
{
	return x->stall_ms;
}

/* Pool the samples of the runs into *cr (percentiles, histogram, medians). */
static int pool_runs(const struct plan *p, struct cell_result *cr)
{
	double p99[BENCH_MAX_RUNS];
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
		p99[r] = x->pct.p99_us;
		cr->in_stall += x->in_stall;
		cr->pending_ran += x->pending_ran;
		cr->steal_ms =
			cr->steal_ms < 0 || x->steal_ms < 0 ? -1 : cr->steal_ms + x->steal_ms;
	}
	cr->slack_us = p->res[0].slack_us;
	bench_sort_u64(all, n);
	cr->n = n;
	cr->pct = bench_pcts_us(all, n);
	for (uint64_t i = 0; i < n; i++)
		cr->hist[hist_bucket(all[i])]++;
	free(all);
	bench_median(p99, p->runs); /* sorts */
	cr->p99_min_us = p99[0];
	cr->p99_max_us = p99[p->runs - 1];
	cr->service_max_late_us = median_of(p, f_service_late);
	cr->load_pairs_per_s = median_of(p, f_load_rate);
	cr->cpu_pct = median_of(p, f_cpu);
	cr->csw_per_s = median_of(p, f_csw);
	cr->stall_ms = median_of(p, f_stall);
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

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static void json_head(const struct plan *p, const struct bench_late_job *j)
{
	printf("{\"bench\":\"latency\",\"workload\":\"lateness\",\"pending\":%llu,\"tick_us\":%.0f,"
	       "\"load\":\"%s\",\"load_threads\":%u,\"load_rate\":%.0f,\"duration_s\":%g",
	       (unsigned long long)j->pending, (double)j->tick_ns / 1000.0,
	       load_name(j->load_threads), j->load_threads, j->load_threads ? j->load_rate : 0,
	       p->duration_s);
}

/* The percentiles every row has (JSON). */
static void json_percentiles(const struct cell_result *cr)
{
	printf(",\"n\":%llu,\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f",
	       (unsigned long long)cr->n, cr->pct.p50_us, cr->pct.p99_us, cr->pct.p999_us,
	       cr->pct.max_us);
}

static void print_json(const struct plan *p, const struct bench_late_job *j,
		       const struct cell_result *cr)
{
	bool first = true;

	json_head(p, j);
	json_percentiles(cr);
	printf(",\"p99_min_us\":%.2f,\"p99_max_us\":%.2f,\"service_max_late_us\":%.2f,"
	       "\"load_pairs_per_s\":%.0f,\"slack_us\":%.3f,\"cpu_pct\":%.1f,"
	       "\"csw_per_s\":%.0f,\"pending_ran\":%llu,\"shards\":%u,\"runs\":%u,"
	       "\"hist_per_decade\":%d,\"hist\":[",
	       cr->p99_min_us, cr->p99_max_us, cr->service_max_late_us, cr->load_pairs_per_s,
	       cr->slack_us, cr->cpu_pct, cr->csw_per_s, (unsigned long long)cr->pending_ran,
	       bench_ncpus(), p->runs, HIST_PER_DECADE);
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		double hi = b + 1 < HIST_BUCKETS ? hist_lo_us(b + 1) : cr->pct.max_us;

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
		       (unsigned long long)cr->n, cr->pct.p50_us, cr->pct.p99_us, cr->pct.p999_us,
		       cr->pct.max_us, cr->p99_min_us, cr->p99_max_us, cr->service_max_late_us,
		       cr->slack_us, cr->cpu_pct, cr->csw_per_s);
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
		printf(",\"error\":");
		json_string(err);
		printf("}\n");
	} else {
		table_head(j);
		printf(" error: %s | | | | | | | | | | |\n", err);
	}
	fflush(stdout);
}

/* ---- the grid's cells ------------------------------------------------------- */

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

	out->value = p->res[run].pct.p99_us;
	out->timed_ns = (double)c->job.window_ns;
	return err;
}

/* Run the plan's runs of fn(arg) and pool them; 0, or the error with err set. */
static int run_pooled(struct plan *p, bench_run_fn *fn, void *arg, double limit_s,
		      struct cell_result *cr, char *err, size_t errlen)
{
	struct bench_summary sum;
	int rc;

	memset(p->res, 0, BENCH_MAX_RUNS * sizeof(*p->res));
	rc = bench_repeat(fn, arg, p->runs, limit_s, &sum, err, errlen);
	if (!rc && pool_runs(p, cr) != 0) {
		rc = -ENOMEM;
		snprintf(err, errlen, "no memory to pool the samples");
	}
	return rc;
}

static void do_cell(struct plan *p, uint64_t pending, uint64_t tick_ns, unsigned load_threads)
{
	struct cell c = {.p = p,
			 .job = {.pending = pending,
				 .tick_ns = tick_ns,
				 .slack_ns = p->slack_ns,
				 .pending_min_ns = p->pending_min_ns,
				 .no_pin = p->no_pin,
				 .window_ns = (uint64_t)(p->duration_s * 1e9),
				 .load_threads = load_threads,
				 .load_rate = p->load_rate,
				 .max_samples = p->max_samples}};
	struct cell_result cr;
	char err[240];

	if (run_pooled(p, run_cell, &c, p->runs * (p->duration_s + 30), &cr, err, sizeof(err))) {
		p->failed = true;
		print_error(p, &c.job, err);
		return;
	}
	print_cell(p, &c.job, &cr);
}

/* ---- stolen CPU ------------------------------------------------------------------ */

struct stolen_cell {
	const struct plan *p;
	struct stolen_cpu_job job;
};

static int run_stolen_cell(void *arg, unsigned run, struct bench_sample *out)
{
	const struct stolen_cell *c = arg;
	const struct plan *p = c->p;
	int err =
		stolen_cpu_run(&c->job, run, p->samples + run * p->max_samples, &p->res[run], out);

	out->value = p->res[run].pct.p99_us;
	out->timed_ns = (double)c->job.stall_ns;
	return err;
}

/* One column's outcome. */
struct stolen_result {
	int rc; /* 0 measured; -EPERM, -EXDEV skipped; else failed */
	char why[240];
	struct cell_result cr;
};

static void stolen_json(const struct plan *p, const struct stolen_cell *c,
			const struct stolen_result *sr)
{
	printf("{\"bench\":\"latency\",\"workload\":\"stolen-cpu\",\"rescue\":\"%s\",\"pending\":%"
	       "llu,"
	       "\"tick_us\":%.0f,\"stall_ms\":%.0f,\"timers\":%zu",
	       stolen_cpu_columns[c->job.column].key, (unsigned long long)c->job.pending,
	       (double)c->job.tick_ns / 1000.0, (double)c->job.stall_ns / 1e6, c->job.timers);
	if (sr->rc) {
		printf(",\"%s\":", sr->rc == -EPERM || sr->rc == -EXDEV ? "skipped" : "error");
		json_string(sr->why);
		printf("}\n");
		return;
	}
	json_percentiles(&sr->cr);
	printf(",\"in_stall\":%llu,\"stall_measured_ms\":%.1f", (unsigned long long)sr->cr.in_stall,
	       sr->cr.stall_ms);
	if (sr->cr.steal_ms >= 0)
		printf(",\"steal_ms\":%.0f", sr->cr.steal_ms);
	printf(",\"runs\":%u}\n", p->runs);
}

/* The stolen-CPU table: a row per figure, a column per configuration. */
static void stolen_table(const struct plan *p, const struct stolen_cell *c,
			 const struct stolen_result *sr, size_t ncols)
{
	static const char *const rows[] = {"p50", "p99", "p99.9", "max"};
	char nb[32], tb[32];

	printf("\nStolen CPU: shard 0's thread held off CPU 0 for %.0f ms by a SCHED_FIFO busy "
	       "thread, %zu timers on shard 0 due during it (pool callbacks), %s pending, tick "
	       "%s; lateness in us, the samples of %u runs pooled.\n\n| lateness (us) |",
	       (double)c->job.stall_ns / 1e6, c->job.timers,
	       bench_fmt_count(nb, sizeof(nb), c->job.pending),
	       tick_str(tb, sizeof(tb), c->job.tick_ns), p->runs);
	for (size_t k = 0; k < ncols; k++)
		printf(" %s |", stolen_cpu_columns[k].name);
	printf("\n|---|");
	for (size_t k = 0; k < ncols; k++)
		printf("--:|");
	printf("\n");
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		printf("| %s |", rows[r]);
		for (size_t k = 0; k < ncols; k++) {
			const struct bench_pcts *x = &sr[k].cr.pct;
			double v[] = {x->p50_us, x->p99_us, x->p999_us, x->max_us};

			if (sr[k].rc)
				printf(" %s |", sr[k].rc == -EPERM || sr[k].rc == -EXDEV ? "skipped"
											 : "error");
			else
				printf(" %.1f |", v[r]);
		}
		printf("\n");
	}
	printf("| ran during the stall |");
	for (size_t k = 0; k < ncols; k++)
		if (sr[k].rc)
			printf(" - |");
		else
			printf(" %llu of %llu |", (unsigned long long)sr[k].cr.in_stall,
			       (unsigned long long)sr[k].cr.n);
	printf("\n| host steal on the other CPUs, all runs (ms) |");
	for (size_t k = 0; k < ncols; k++)
		if (sr[k].rc || sr[k].cr.steal_ms < 0)
			printf(" - |");
		else
			printf(" %.0f |", sr[k].cr.steal_ms);
	printf("\n");
	for (size_t k = 0; k < ncols; k++)
		if (sr[k].rc)
			printf("\n%s: %s: %s\n", stolen_cpu_columns[k].name,
			       sr[k].rc == -EPERM || sr[k].rc == -EXDEV ? "skipped" : "error",
			       sr[k].why);
}

static void do_stolen(struct plan *p)
{
	static struct stolen_result sr[8];
	struct stolen_cell c = {.p = p,
				.job = {.pending = p->pending[0],
					.tick_ns = p->tick_ns[0],
					.stall_ns = p->stall_ns,
					.timers = STOLEN_TIMERS}};
	size_t ncols = stolen_cpu_ncolumns < 8 ? stolen_cpu_ncolumns : 8;

	for (size_t k = 0; k < ncols; k++) {
		c.job.column = (unsigned)k;
		sr[k].rc = run_pooled(p, run_stolen_cell, &c, p->runs * 30.0, &sr[k].cr, sr[k].why,
				      sizeof(sr[k].why));
		if (sr[k].rc && sr[k].rc != -EPERM && sr[k].rc != -EXDEV) {
			p->failed = true;
			fprintf(stderr, "spoke-bench latency: stolen-cpu, %s: %s\n",
				stolen_cpu_columns[k].name, sr[k].why);
		}
		if (p->json)
			stolen_json(p, &c, &sr[k]);
		fflush(stdout);
	}
	if (!p->json)
		stolen_table(p, &c, sr, ncols);
}

/* ---- options and main ---------------------------------------------------- */

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
	uint64_t load, rate, slack_us, stall_ms, pending_min_ms;
	double duration;
	uint64_t pending[MAX_PENDING], tick_us[MAX_TICKS];
	int npending, nticks;
	bool no_load, no_pin, stall_given, stolen_only;
};

static struct latency_opts lopts;
static struct bench_opts common;

/* A latency option (bench_option_fn); ctx is struct latency_opts. */
static const char *latency_option(void *ctx, int key, const char *arg)
{
	struct latency_opts *l = ctx;

	switch (key) {
	case 'd':
		if (bench_parse_seconds(arg, &l->duration) == 0 && l->duration <= 3600)
			return NULL;
		return "seconds, above 0, at most 3600";
	case 'l':
		if (bench_parse_count(arg, &l->load) == 0 && l->load <= MAX_LOAD_THREADS)
			return NULL;
		return bench_opts_why("1..%d", MAX_LOAD_THREADS);
	case 'a':
		if (parse_count_or_zero(arg, &l->rate))
			return NULL;
		return "pairs per second, e.g. 1e6; 0 = unthrottled";
	case 'n':
		l->no_load = true;
		return NULL;
	case 'p':
		l->npending = parse_counts(arg, l->pending, MAX_PENDING);
		return l->npending > 0
			       ? NULL
			       : bench_opts_why("up to %d counts, e.g. 1e3,1e5", MAX_PENDING);
	case 't':
		l->nticks = parse_counts(arg, l->tick_us, MAX_TICKS);
		return l->nticks > 0 ? NULL
				     : bench_opts_why("up to %d tick lengths in us, e.g. 100,1000",
						      MAX_TICKS);
	case 's':
		return parse_count_or_zero(arg, &l->slack_us)
			       ? NULL
			       : "us, e.g. 250; 0 = the service's default";
	case 'u':
		l->no_pin = true;
		return NULL;
	case 'S':
		l->stall_given = true;
		if (parse_count_or_zero(arg, &l->stall_ms) &&
		    (l->stall_ms == 0 || (l->stall_ms > 20 && l->stall_ms <= 900)))
			return NULL;
		return "ms, 21..900 (the kernel lets a SCHED_FIFO thread have 950 ms a second); 0 "
		       "= no stolen-CPU row";
	case 'O':
		l->stolen_only = true;
		return NULL;
	case 'm':
		if (bench_parse_count(arg, &l->pending_min_ms) == 0 && l->pending_min_ms <= 3600000)
			return NULL;
		return "ms, 1..3600000";
	default:
		return "an option latency does not take";
	}
}

static const struct bench_option latency_options[] = {
	BENCH_OPT_JSON,
	BENCH_OPT_QUICK("1e3 pending, tick 1 ms, 0.1 s of stream, 2 runs (the smoke test)"),
	BENCH_OPT_RUNS("3; 2 with --quick"),
	{"duration", 'd', "S", "seconds of measured stream per run", "2; 0.1 with --quick"},
	{"load-threads", 'l', "L", "start/cancel load threads, thread i pinned to CPU i % CPUs",
	 "one per CPU"},
	{"load-rate", 'a', "R",
	 "their start+cancel pairs per second, all together (0 = as fast\n"
	 "as they can)",
	 "1e6"},
	{"no-load", 'n', NULL, "only the cells without load", "both"},
	{"pending", 'p', "LIST", "pending counts (at most 3); the first is stolen-cpu's too",
	 "1e3,1e5,1e6; 1e3 with --quick"},
	{"tick", 't', "LIST", "tick lengths in us (at most 3); the first is stolen-cpu's too",
	 "100,1000,10000; 1000 with --quick"},
	{"slack", 's', "US", "the service's slack_ns in us (0: its default, tick/4)", "0"},
	{"no-pin", 'u', NULL, "shard threads not pinned to their CPUs (pin_threads false)",
	 "pinned"},
	{"pending-min", 'm', "MS",
	 "the held-pending timers' shortest delay: theirs are uniform in [MS,\n"
	 "120 x MS); a short one lets them run during the measurement (counted)",
	 "5000"},
	{"stall", 'S', "MS", "stolen-cpu: how long shard 0's CPU is taken; 0 leaves the row out",
	 "200"},
	{"stolen-only", 'O', NULL, "only the stolen-cpu row, not the grid", "the grid too"},
	BENCH_OPT_END,
};

const struct bench_cmd bench_latency_cmd = {
	.name = "spoke-bench latency",
	.about = "Lateness of expiry callbacks (callback entry - start time - delay), p50, p99,\n"
		 "p99.9, max in us, at 1e3, 1e5, 1e6 pending timers, tick 100 us, 1 ms, 10 ms,\n"
		 "without and with a start/cancel load; then the same while shard 0's CPU is\n"
		 "taken for --stall ms (stolen-cpu). See the top of bench/bench_latency.c.",
	.options = latency_options,
	.handle = latency_option,
	.ctx = &lopts,
	.common = &common,
};

/* Fill the plan from argv. -1 to go on, or the exit status for main (usage or error). */
static int parse_options(struct plan *p, int argc, char **argv)
{
	const struct bench_opts *o = &common;
	struct latency_opts *l = &lopts;
	int rc;

	*l = (struct latency_opts){.load = bench_ncpus(), .rate = DEFAULT_LOAD_RATE};
	rc = bench_cmd_parse(&bench_latency_cmd, argc, argv);
	if (rc >= 0)
		return rc;
	p->json = o->json;
	p->quick = o->quick;
	p->runs = bench_opts_runs(o, 2, 3);
	p->duration_s = l->duration > 0 ? l->duration : p->quick ? 0.1 : 2;
	p->load_threads = (unsigned)l->load;
	p->load_rate = (double)l->rate;
	p->slack_ns = l->slack_us * NS_PER_US;
	p->pending_min_ns = l->pending_min_ms * NS_PER_MS;
	p->no_pin = l->no_pin;
	p->nloads = l->no_load ? 1 : 2;
	p->stall_ns = (l->stall_given ? l->stall_ms : DEFAULT_STALL_MS) * NS_PER_MS;
	p->stolen_only = l->stolen_only;
	if (p->stolen_only && !p->stall_ns) {
		fprintf(stderr, "spoke-bench latency: --stolen-only with --stall 0 runs nothing\n");
		return 2;
	}
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
		p->tick_ns[0] = 100 * NS_PER_US;
		p->tick_ns[1] = NS_PER_MS;
		p->tick_ns[2] = 10 * NS_PER_MS;
		p->nticks = 3;
	}
	if (l->npending > 0) {
		memcpy(p->pending, l->pending, sizeof(l->pending));
		p->npending = (size_t)l->npending;
	}
	for (int i = 0; i < l->nticks; i++)
		p->tick_ns[i] = l->tick_us[i] * NS_PER_US;
	if (l->nticks > 0)
		p->nticks = (size_t)l->nticks;
	/* The stream starts at most LATE_STREAM_BATCH timers per LATE_STREAM_PACE_NS. */
	p->max_samples =
		((size_t)(p->duration_s * 1e9 / LATE_STREAM_PACE_NS) + 2) * LATE_STREAM_BATCH;
	if (p->max_samples < STOLEN_TIMERS)
		p->max_samples = STOLEN_TIMERS;
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
	for (size_t t = 0; t < p->nticks && !p->stolen_only; t++)
		for (size_t i = 0; i < p->npending; i++)
			for (size_t l = 0; l < p->nloads; l++)
				do_cell(p, p->pending[i], p->tick_ns[t], l ? p->load_threads : 0);
	if (p->stall_ns)
		do_stolen(p);
	fprintf(p->json ? stderr : stdout, "\nspoke-bench latency: wall time %.1f s\n",
		(double)(bench_now_ns() - t0) / 1e9);
	munmap(map, p->map_bytes);
	return p->failed ? 1 : 0;
}
