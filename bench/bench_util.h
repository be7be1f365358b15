/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_util.h - what every spoke-bench subcommand shares.
 *
 *   units    NS_PER_S, NS_PER_MS, NS_PER_US: defined here, and only here.
 *   clock    bench_now_ns(): CLOCK_MONOTONIC, read around whole loops only
 *            (one read costs ~20 ns, as much as the operations we measure);
 *            bench_cpu_ns(): a CPU clock (the thread's, the process's).
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
 *   plot     bench_plot_png() (bench_plot.c): panels of log-log lines drawn
 *            by gnuplot (fed through a pipe) into one PNG.
 *   options  bench_opts.h: one table per subcommand gives its parser and its
 *            --help; the common options (--json, --quick, --runs; a grid's
 *            --max-n and --budget) are parsed there once.
 *   threads  bench_team.h: the harness every multithreaded workload runs in.
 *   service  bench_svc.h: the service's counters, waits and owner loops.
 *
 * A subcommand lives in bench_<name>.c (its workload families in files of
 * their own), exports bench_<name>_main(argc, argv) (argv[0] is the
 * subcommand name) and its struct bench_cmd, and is listed in
 * bench_commands.c.
 *
 * Threading: everything here is for the bench's main thread, except where a
 * comment says "any thread".
 */
#ifndef SPOKE_BENCH_UTIL_H
#define SPOKE_BENCH_UTIL_H

#include "bench_opts.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* ---- units ------------------------------------------------------------- */

#define NS_PER_S  UINT64_C(1000000000)
#define NS_PER_MS UINT64_C(1000000)
#define NS_PER_US UINT64_C(1000)

/* ---- subcommands (bench_commands.c) ------------------------------------ */

struct bench_subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const struct bench_cmd *cmd; /* its options and help */
	const char *summary;	     /* one line for spoke-bench --help */
};

extern const struct bench_subcommand bench_subcommands[];
extern const size_t bench_nsubcommands;

int bench_schemes_main(int argc, char **argv);
int bench_scaling_main(int argc, char **argv);
int bench_service_main(int argc, char **argv);
int bench_peers_main(int argc, char **argv);
int bench_latency_main(int argc, char **argv);
int bench_clocks_main(int argc, char **argv);
extern const struct bench_cmd bench_schemes_cmd, bench_scaling_cmd, bench_service_cmd,
	bench_peers_cmd, bench_latency_cmd, bench_clocks_cmd;

/* ---- clock ------------------------------------------------------------- */

static inline uint64_t bench_ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * NS_PER_S + (uint64_t)ts->tv_nsec;
}

/* A clock in ns (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...). Any thread. */
static inline uint64_t bench_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return bench_ts_ns(&ts);
}

/* CLOCK_MONOTONIC in ns. Any thread. */
static inline uint64_t bench_now_ns(void)
{
	return bench_clock_ns(CLOCK_MONOTONIC);
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

/* What one run reports. */
struct bench_sample {
	double value;	  /* the figure reported: ns per op, bytes per timer, ... */
	double cpu_value; /* the same figure in CPU time, where the run took it (else 0) */
	double setup_ns;  /* untimed preparation (for cost estimates) */
	double timed_ns;  /* the measured window (for cost estimates) */
	char error[160];  /* why, when the run returns a negative errno */
};

/* K runs of one workload. */
struct bench_summary {
	unsigned runs;		 /* completed; the rest is meaningless when 0 */
	double median, min, max; /* of bench_sample.value */
	double cpu_median;	 /* of bench_sample.cpu_value */
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
 * past it, BENCH_OVER_BUDGET is returned (the runs were sound, the machine or
 * the cell too slow: a caller reports the cell as stopped or skipped, not as
 * failed); a child still running at twice the limit is killed and gives
 * -ETIMEDOUT (it may hang: an error). err says which. On error, err gets the
 * reason, and *sum still summarizes the runs that completed (sum->runs may
 * be 0). Main thread only.
 */
#define BENCH_OVER_BUDGET (-ECANCELED)
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
 * bench_out_result): JSON gets "ratio", the table a column after the unit;
 * basis (NULL: none) names what the ratio compares ("CPU ns/op"): JSON
 * "ratio_basis", and the table's column says "of <basis>".
 */
void bench_out_result_ratio(struct bench_out *o, const char *subject, const char *workload,
			    uint64_t n, const struct bench_summary *s, const char *unit,
			    double ratio, const char *basis);
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

/* Fill out->error from fmt and return err, or -EPROTO for 0 (a run's failure). */
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

/* ---- threads and sleeping ---------------------------------------------- */

/* Online CPUs (at least 1). Any thread. */
unsigned bench_ncpus(void);
/* Pin the calling thread to CPU index % CPUs; best effort (a CPU outside the allowed set
 * leaves it unpinned). Any thread. */
void bench_pin_self(unsigned index);
/* Sleep ns on CLOCK_MONOTONIC, resumed after signals. Any thread. */
void bench_sleep_ns(uint64_t ns);
/* Sleep until CLOCK_MONOTONIC reads t_ns. Any thread. */
void bench_sleep_until_ns(uint64_t t_ns);

/* Runs per measurement: --runs if given, else `quick` with --quick, else `normal`. */
static inline unsigned bench_opts_runs(const struct bench_opts *o, unsigned quick, unsigned normal)
{
	return o->runs ? (unsigned)o->runs : o->quick ? quick : normal;
}

/* T = 1, 2, 4, ... up to `upto` (and `upto` itself if not a power of two): the count. */
size_t bench_threads_doubling(unsigned *out, size_t cap, unsigned upto);

/* Nearest-rank quantile q (0 < q <= 1) of sorted[0..k-1] (k > 0), in us. */
double bench_pct_us(const uint64_t *sorted, size_t k, double q);

/* What a lateness row reports of its samples, in us. */
struct bench_pcts {
	double p50_us, p99_us, p999_us, max_us;
};

/* p50, p99, p99.9 and max of sorted[0..k-1] (k > 0, ns), in us. */
struct bench_pcts bench_pcts_us(const uint64_t *sorted, size_t k);
/* Sort v[0..k-1] ascending. */
void bench_sort_u64(uint64_t *v, size_t k);

#endif /* SPOKE_BENCH_UTIL_H */
