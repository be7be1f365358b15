/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_util.h - what every spoke-bench subcommand shares.
 *
 *   clock    bench_now_ns(): CLOCK_MONOTONIC, read around whole loops only
 *            (one read costs ~20 ns, as much as the operations we measure).
 *   PRNG     xorshift64*, seeded through splitmix64 from a fixed seed: every
 *            run is reproducible and every subject sees the same numbers.
 *            ~1 ns per number, cheaper than loading a precomputed array that
 *            would not stay in cache at N = 1e6.
 *   repeat   bench_repeat(): run one workload K times, each run in its own
 *            forked child - a fresh heap (RSS growth is not hidden by memory
 *            an earlier run freed; allocator state does not leak between
 *            runs or subjects), and a crash or a runaway run is contained and
 *            stopped at a time limit - then summarize: median, min, max.
 *   memory   bench_rss_bytes(): anonymous resident memory (/proc/self/statm).
 *   output   one row per result or skipped cell: an aligned table, or JSON
 *            lines {"<subject>","workload","n","ns_per_op","min","max",...}.
 *   plot     bench_plot_png(): panels of log-log lines drawn by gnuplot
 *            (fed through a pipe) into one PNG.
 *   options  bench_parse_options(): the options every subcommand takes
 *            (--json, --quick, --runs, --help; a grid's --max-n, --budget)
 *            and the operand check, in one getopt_long loop with the
 *            subcommand's own; counts written as 1e6 or 1000000.
 *   team     struct bench_team: T threads started, pinned, prepared, let go
 *            together through one gate, stopped by a flag, joined, their
 *            counts and times summed.
 *
 * A subcommand lives in bench_<name>.c, exports bench_<name>_main(argc, argv)
 * (argv[0] is the subcommand name) and is listed in spoke-bench.c.
 *
 * Threading: everything here is for the bench's main thread, except where a
 * comment says "any thread" or "team thread".
 */
#ifndef SPOKE_BENCH_UTIL_H
#define SPOKE_BENCH_UTIL_H

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Subcommand entry points (one per bench_<name>.c). */
int bench_schemes_main(int argc, char **argv);
int bench_scaling_main(int argc, char **argv);
int bench_service_main(int argc, char **argv);
int bench_peers_main(int argc, char **argv);
int bench_latency_main(int argc, char **argv);
int bench_clocks_main(int argc, char **argv);

/* ---- clock ------------------------------------------------------------- */

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- PRNG: xorshift64* ------------------------------------------------- */

struct bench_rng {
	uint64_t state; /* never 0 */
};

static inline void bench_rng_seed(struct bench_rng *r, uint64_t seed)
{
	uint64_t z = seed + UINT64_C(0x9e3779b97f4a7c15); /* splitmix64 */

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	z ^= z >> 31;
	r->state = z ? z : 1;
}

static inline uint64_t bench_rng_next(struct bench_rng *r)
{
	uint64_t x = r->state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->state = x;
	return x * UINT64_C(0x2545f4914f6cdd1d);
}

/* Map 32 random bits uniformly onto [0, n) with one multiply (Lemire). */
static inline uint32_t bench_below(uint32_t bits, uint32_t n)
{
	return (uint32_t)(((uint64_t)bits * n) >> 32);
}

/* ---- repeat and summarize ---------------------------------------------- */

#define BENCH_MAX_RUNS 100

/* What one run reports. */
struct bench_sample {
	double value;	 /* the figure reported: ns per op, bytes per timer, ... */
	double setup_ns; /* untimed preparation (for cost estimates) */
	double timed_ns; /* the measured window (for cost estimates) */
	char error[160]; /* why, when the run returns a negative errno */
};

/* K runs of one workload. */
struct bench_summary {
	unsigned runs;		 /* completed; the rest is meaningless when 0 */
	double median, min, max; /* of bench_sample.value */
	double setup_ns;	 /* median */
	double timed_ns;	 /* median */
};

/*
 * One run: fill *out, return 0 or a negative errno with out->error set.
 * Called in a forked child; `run` (0..K-1) selects the seed.
 */
typedef int bench_run_fn(void *arg, unsigned run, struct bench_sample *out);

/*
 * Run fn `runs` times, each in a fresh forked child, and summarize into *sum.
 * limit_s > 0 bounds the whole series: once the runs done so far project
 * past it, or a child is still running at twice the limit (then killed),
 * -ETIMEDOUT is returned with err saying which. On error, err gets the
 * reason, and *sum still summarizes the runs that completed (sum->runs may
 * be 0). Main thread only.
 */
int bench_repeat(bench_run_fn *fn, void *arg, unsigned runs, double limit_s,
		 struct bench_summary *sum, char *err, size_t errlen);

/* Median of v[0..k-1] (sorts v in place); k > 0. */
double bench_median(double *v, unsigned k);

/* ---- memory ------------------------------------------------------------ */

/*
 * Anonymous resident memory in bytes: resident - shared of /proc/self/statm,
 * i.e. heap, stacks and anonymous mappings, without the file-backed pages
 * (code, libraries) that a freshly forked child faults in as it runs.
 * Allocates nothing. -1 on error.
 */
long bench_rss_bytes(void);

/* ---- output ------------------------------------------------------------ */

enum bench_format { BENCH_TABLE, BENCH_JSON };

struct bench_out {
	FILE *f;
	enum bench_format format;
	const char *subject_key; /* name of the first column, e.g. "scheme" */
	bool header_done;
};

/* A result row. unit: "ns/op", "B/timer", ... */
void bench_out_result(struct bench_out *o, const char *subject, const char *workload, uint64_t n,
		      const struct bench_summary *s, const char *unit);
/*
 * A result row with its ratio to a reference figure (ratio > 0; else as
 * bench_out_result): JSON gets "ratio", the table a column after the unit.
 */
void bench_out_result_ratio(struct bench_out *o, const char *subject, const char *workload,
			    uint64_t n, const struct bench_summary *s, const char *unit,
			    double ratio);
/* A cell that did not run (kind "skipped") or failed (kind "error"). */
void bench_out_note(struct bench_out *o, const char *kind, const char *subject,
		    const char *workload, uint64_t n, const char *reason);

/*
 * The head of a markdown table with one column per size: "| <first> |  1e3 |
 * ..." and the rule under it (sizes right-aligned), first_w and col_w wide.
 */
void bench_md_sizes_head(FILE *f, const char *first, int first_w, const uint64_t *sizes,
			 size_t nsizes, int col_w);

/* "1e6" for powers of ten from 1000 up, else the decimal number. */
const char *bench_fmt_count(char *buf, size_t len, uint64_t n);

/* "CPU model, N CPUs, Linux release" of this machine. */
void bench_machine(char *buf, size_t len);

/* ---- the paper's workloads (schemes, peers) ----------------------------- */

/*
 * What `schemes` and `peers` share, so both run the same numbers: delays
 * uniform in [1, BENCH_DELAY_SPAN_TICKS) ticks from BENCH_SEED + run; W1
 * times max(N, BENCH_W1_MIN_PAIRS) pairs of (start the one spare timer,
 * stop a random outstanding one), one xorshift64* per pair: the delay from
 * its low 32 bits, the victim from its high 32 bits.
 */
#define BENCH_DELAY_SPAN_TICKS (UINT64_C(1) << 20)
#define BENCH_SEED	       UINT64_C(0x5b0ce7139e1d5eed)
#define BENCH_W1_MIN_PAIRS     100000u

static inline uint64_t bench_random_delay(uint64_t bits)
{
	return 1 + bench_below((uint32_t)bits, (uint32_t)BENCH_DELAY_SPAN_TICKS - 1);
}

static inline uint64_t bench_w1_pairs(uint64_t n)
{
	return n > BENCH_W1_MIN_PAIRS ? n : BENCH_W1_MIN_PAIRS;
}

/* W1's victim among timers 0..n (n + 1 of them): any index but the spare's. */
static inline uint32_t bench_w1_victim(uint64_t bits, uint32_t n, uint32_t spare)
{
	uint32_t victim = bench_below((uint32_t)(bits >> 32), n);

	return victim + (victim >= spare);
}

/* Fill out->error from fmt and return err (a run's failure). */
int bench_fail(struct bench_sample *out, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* sizes[] = 1e3, 1e4, .. max_n: how many; 0 when max_n is not a power of ten 1e3..1e7 (said). */
size_t bench_grid_sizes(uint64_t *sizes, size_t max, uint64_t max_n);

/* ---- progress ---------------------------------------------------------- */

/*
 * Progress of a long run on stderr: on a terminal one line rewritten in
 * place ("37/128 cells, heap W1 n=1e5, 1m12s elapsed, about 2m40s left"),
 * the time left extrapolated from the mean time per cell so far; otherwise
 * (a log, a pipe) one plain line per cell, the same words. Times are the
 * caller's (peers interposes clock_gettime, so it passes its own clock).
 */
struct bench_progress {
	const char *cmd; /* "spoke-bench schemes" */
	size_t done, total;
	uint64_t t0_ns;
	bool tty;
};

void bench_progress_start(struct bench_progress *pr, const char *cmd, size_t total,
			  uint64_t now_ns);
/* One more cell done; `what` names it. */
void bench_progress_step(struct bench_progress *pr, const char *what, uint64_t now_ns);
/* Clear the terminal line (nothing otherwise). */
void bench_progress_end(struct bench_progress *pr);

/* ---- plot -------------------------------------------------------------- */

struct bench_point {
	double x, y;
};

struct bench_series {
	const char *title;
	const struct bench_point *pts;
	size_t npts; /* 0: left out */
};

struct bench_panel {
	const char *title, *xlabel, *ylabel;
	bool logy;
	const struct bench_series *series;
	size_t nseries;
};

/* Draw the panels (log x; log y where asked) side by side into one PNG. */
int bench_plot_png(const char *file, const char *title, const struct bench_panel *panels,
		   size_t npanels);

/* ---- options ----------------------------------------------------------- */

/*
 * What every subcommand takes: --json, --quick, --runs K (1..BENCH_MAX_RUNS)
 * and --help; and a grid of cells (schemes, peers) also --max-n N and
 * --budget SEC. A subcommand's own options use other getopt_long values
 * than 'j', 'q', 'r' and 'h' (and, in a grid, 'n' and 'b'). Zero fields
 * were not given.
 */
struct bench_opts {
	bool json, quick;
	uint64_t runs;
	uint64_t max_n;	 /* grid */
	double budget_s; /* grid */
};

/*
 * A subcommand's own option: 0 taken, anything else a bad value (the
 * handler said why on stderr).
 */
typedef int bench_option_fn(void *ctx, int opt, const char *arg);

/*
 * Parse argv (argv[0] = the subcommand's name): the common options (with
 * `grid`, the grid's too) into *o, the subcommand's own (`own`, a
 * getopt_long table ending in a zero entry; NULL for none) through fn(ctx,
 * ...). -1: go on; otherwise the exit status for main: 0 after --help
 * (usage(stdout)), 2 after an unknown option (usage(stderr)), a bad value,
 * or an operand left over (said).
 */
int bench_parse_options(int argc, char **argv, bool grid, const struct option *own,
			bench_option_fn *fn, void *ctx, void (*usage)(FILE *f),
			struct bench_opts *o);

/* Runs per measurement: --runs if given, else `quick` with --quick, else `normal`. */
static inline unsigned bench_opts_runs(const struct bench_opts *o, unsigned quick, unsigned normal)
{
	return o->runs ? (unsigned)o->runs : o->quick ? quick : normal;
}

/* Parse a count written "1e6" or "1000000" (integer, 1..1e12). 0 or -EINVAL. */
int bench_parse_count(const char *s, uint64_t *out);
/* Parse a positive number of seconds. 0 or -EINVAL. */
int bench_parse_seconds(const char *s, double *out);
/*
 * Parse a thread-count list "1,2,4" (each 1..max, at most cap of them) into
 * out; the count, or -EINVAL.
 */
int bench_parse_threads(const char *s, unsigned *out, size_t cap, unsigned max);
/* T = 1, 2, 4, ... up to `upto` (and `upto` itself if not a power of two): the count. */
size_t bench_threads_doubling(unsigned *out, size_t cap, unsigned upto);

/* ---- threads and sleeping (service benches) ---------------------------- */

/* Online CPUs (at least 1). Any thread. */
unsigned bench_ncpus(void);
/* Pin the calling thread to CPU index % CPUs; best effort (a CPU outside the allowed set
 * leaves it unpinned). Any thread. */
void bench_pin_self(unsigned index);
/* Sleep ns on CLOCK_MONOTONIC, resumed after signals. Any thread. */
void bench_sleep_ns(uint64_t ns);

/* ---- a team of threads ------------------------------------------------- */

/*
 * T threads that measure together. Each runs: pin (if tm->pin, to CPU
 * index % CPUs), prepare (untimed), wait at the gate; once main opens it,
 * the body, timed on CLOCK_MONOTONIC and the thread's CPU clock. A body
 * that runs for a window looks at bench_team_stopping() now and then; main
 * raises that flag with bench_team_stop(). Main's order:
 *
 *   bench_team_start   create the threads (they prepare, then wait)
 *   bench_team_ready   wait until all of them prepared (main may then set
 *                      up what the window needs)
 *   bench_team_go      open the gate (with run false the bodies are skipped)
 *   bench_team_stop    raise the stop flag (windowed bodies)
 *   bench_team_join    join them and sum their counts and times
 *
 * The gate is a mutex and a condition variable rather than a barrier, so
 * that a thread that could not be created leaves no one waiting for it.
 *
 * Per-thread state: the caller's struct for one thread begins with a
 * struct bench_thread; the team finds thread i at threads + i * stride.
 * Written by its own thread while it runs, read by main after the join.
 */
struct bench_team;

struct bench_thread {
	struct bench_team *team;
	pthread_t th;
	unsigned index;	     /* 0 .. T-1 */
	int err;	     /* the first failure (bench_thread_fail), 0 if none */
	const char *what;    /* ... and what failed */
	uint64_t ops;	     /* operations the body did (summed by the join) */
	uint64_t t0, t1;     /* the body's start and end, CLOCK_MONOTONIC */
	uint64_t cpu0, cpu1; /* the same on CLOCK_THREAD_CPUTIME_ID */
};

typedef void bench_thread_fn(struct bench_thread *t);

struct bench_team {
	unsigned T;		  /* threads to run */
	bool pin;		  /* pin thread i to CPU i % CPUs */
	bench_thread_fn *prepare; /* before the gate, untimed; NULL: none */
	bench_thread_fn *body;	  /* after the gate, timed */
	void *threads;		  /* thread i: (char *)threads + i * stride */
	size_t stride;
	/* the gate (under mu): threads that prepared, and whether and how it opened */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned started, ready;
	bool open, run;
	/* Read by every thread of a windowed body now and then: a line of its own. */
	_Atomic int stop __attribute__((aligned(64)));
};

/* What the join sums. */
struct bench_team_result {
	uint64_t ops;
	double window_ns; /* the first body's start to the last body's end */
	double thread_ns; /* sum of the bodies' wall times */
	double cpu_ns;	  /* sum of the bodies' CPU times */
	uint64_t first_t0;
	int err;	    /* the first failed thread's err, 0 if none ... */
	unsigned err_index; /* ... its index ... */
	const char *what;   /* ... and what failed */
};

/* Thread i of the team. */
static inline struct bench_thread *bench_team_thread(const struct bench_team *tm, unsigned i)
{
	return (struct bench_thread *)((char *)tm->threads + (size_t)i * tm->stride);
}

/*
 * Set up the threads' headers (team, index; the rest zeroed by the caller)
 * and create them. 0, or a negative errno from pthread_create: then no
 * thread of the team is left running.
 */
int bench_team_start(struct bench_team *tm);
/* Wait until every thread ran its prepare. */
void bench_team_ready(struct bench_team *tm);
/* Open the gate: the bodies run (run true) or are skipped. */
void bench_team_go(struct bench_team *tm, bool run);
/* Raise the stop flag. */
void bench_team_stop(struct bench_team *tm);
/* Join every thread and sum into *r. */
void bench_team_join(struct bench_team *tm, struct bench_team_result *r);

/* Team thread: has main raised the stop flag? */
static inline bool bench_team_stopping(const struct bench_thread *t)
{
	return atomic_load_explicit(&t->team->stop, memory_order_relaxed) != 0;
}

/* Team thread: record its first failure (err 0 counts as -EPROTO). */
void bench_thread_fail(struct bench_thread *t, int err, const char *what);

/* ---- lateness of the service (bench_latency.c) ------------------------- */

/*
 * One lateness measurement of the service, shared by `spoke-bench latency`
 * and the `lateness` workload of `spoke-bench service`; what it does and how
 * lateness is defined is said at the top of bench_latency.c.
 */
struct bench_late_job {
	uint64_t pending;      /* timers held pending (delays 5 s .. 600 s) */
	uint64_t tick_ns;      /* the service's tick; the rest of its config is the default */
	uint64_t slack_ns;     /* ... but this slack_ns (0: the default) */
	bool no_pin;	       /* ... and pin_threads false when set */
	uint64_t window_ns;    /* how long the stream of measured timers is started */
	unsigned load_threads; /* start+cancel churn threads meanwhile (0 = no load) */
	double load_rate;      /* their pairs per second, all together (0 = unthrottled) */
	size_t max_samples;    /* the stream stops early at this many timers */
};

/* What one run measured (lateness in us). */
struct bench_late_result {
	uint64_t samples; /* stream timers measured */
	double p50_us, p99_us, p999_us, max_us;
	double service_max_late_us; /* the service's own max_late_ns (spoke_stats) */
	uint64_t load_pairs;	    /* start+cancel pairs by the load threads */
	double load_ns;		    /* how long the load ran */
	double slack_us;	    /* the slack in effect (spoke_stats) */
	double cpu_pct;		    /* CPU of the whole process over stream + wait, % of one CPU */
	double csw_per_s;	    /* its context switches per second meanwhile */
};

/*
 * One run, in a forked child's main thread: create the service, fill, stream,
 * check the service's counters. late_ns (max_samples entries) receives the
 * samples, sorted ascending. 0, or a negative errno with out->error set; a
 * callback that ran before its deadline always fails the run.
 */
int bench_late_run(const struct bench_late_job *j, unsigned run, uint64_t *late_ns,
		   struct bench_late_result *r, struct bench_sample *out);

/* Nearest-rank quantile q (0 < q <= 1) of sorted[0..k-1] (k > 0), in us. */
double bench_late_pct_us(const uint64_t *sorted, size_t k, double q);

#endif /* SPOKE_BENCH_UTIL_H */
