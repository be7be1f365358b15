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
 *   options  counts written as 1e6 or 1000000.
 *
 * A subcommand lives in bench_<name>.c, exports bench_<name>_main(argc, argv)
 * (argv[0] is the subcommand name) and is listed in spoke-bench.c.
 *
 * Threading: everything here is for the bench's single main thread.
 */
#ifndef SPOKE_BENCH_UTIL_H
#define SPOKE_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Subcommand entry points (one per bench_<name>.c). */
int bench_schemes_main(int argc, char **argv);
int bench_service_main(int argc, char **argv);

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
/* A cell that did not run (kind "skipped") or failed (kind "error"). */
void bench_out_note(struct bench_out *o, const char *kind, const char *subject,
		    const char *workload, uint64_t n, const char *reason);

/* "1e6" for powers of ten from 1000 up, else the decimal number. */
const char *bench_fmt_count(char *buf, size_t len, uint64_t n);

/* "CPU model, N CPUs, Linux release" of this machine. */
void bench_machine(char *buf, size_t len);

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

/* Parse a count written "1e6" or "1000000" (integer, 1..1e12). 0 or -EINVAL. */
int bench_parse_count(const char *s, uint64_t *out);
/* Parse a positive number of seconds. 0 or -EINVAL. */
int bench_parse_seconds(const char *s, double *out);

#endif /* SPOKE_BENCH_UTIL_H */
