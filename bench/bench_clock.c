/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_clock.c - `spoke-bench clocks`: what the "now" of a start costs.
 *
 * Contract line 2 (docs/contract.md) needs a fresh time per start that is
 * never behind CLOCK_MONOTONIC: a start that read an older time would fire
 * early. These are the sources that can give one, each measured alone and
 * inside the attached start + cancel pair a server loop does:
 *
 *   monotonic     clock_gettime(CLOCK_MONOTONIC) (the vDSO): what
 *                 spoke_start reads inside the call, the library's clock.
 *   tsc           rdtsc scaled to ns by a multiplier calibrated against
 *                 CLOCK_MONOTONIC over 20 ms and raised by 1000 ppm (twice
 *                 the most NTP may slew CLOCK_MONOTONIC, so the TSC time
 *                 runs ahead, never behind), re-anchored to a fresh
 *                 CLOCK_MONOTONIC read once its anchor is 1 ms old (or the
 *                 counter went backwards), plus a 1 us margin for rdtsc's
 *                 reordering and skew between CPUs. Only where the CPU says
 *                 its TSC is invariant (CPUID 0x80000007 EDX bit 8, or both
 *                 constant_tsc and nonstop_tsc in /proc/cpuinfo); elsewhere
 *                 its cells are "skipped".
 *   coarse-jiffy  clock_gettime(CLOCK_MONOTONIC_COARSE) plus its resolution
 *                 (clock_getres: one jiffy): the coarse clock is the time
 *                 of the last timekeeping tick, so it lags by up to a jiffy.
 *   caller        the loop's own time: read (CLOCK_MONOTONIC) once per
 *                 batch of 64 operations, as an event loop reads it once per
 *                 turn; the library reads nothing. Never behind the time the
 *                 caller measures from, but behind the true time by the
 *                 batch's age.
 *
 * Workloads, each at n operations a run:
 *
 *   read               one read of the source (summed, so none is dropped).
 *   engine-start-stop  the bare `hierarchical` engine, spoke_engine_start
 *                      (1000 ticks) + spoke_engine_stop of one intrusive
 *                      timer, plus one read of the source per pair; source
 *                      "none" reads nothing. `monotonic` here is the
 *                      engine-clock-start-stop row of `spoke-bench service`.
 *   start-cancel       a one-shard service (callbacks inline) whose shard
 *                      the bench thread attaches: spoke_start (1 s) +
 *                      spoke_cancel for `monotonic`, the clock the library
 *                      reads inside the call; spoke_start_at(the source's
 *                      now + 1 s) + spoke_cancel for the others, the time a
 *                      server loop would bring (start_at on the owner reads
 *                      no clock). spoke_poll every 4096 pairs. The ratio is
 *                      to this run's monotonic engine-start-stop (the
 *                      1.3x goal of issue 17); JSON also gives it to "none".
 *   never-behind       n reads, each right after a CLOCK_MONOTONIC read m:
 *                      "behind" counts reads below m (an early fire if a
 *                      start used it), "max_lead_ns" is the most a read was
 *                      ahead (lateness it adds). Between quarters the thread
 *                      moves to another CPU, and every 4096 reads it sleeps
 *                      100 us, so anchors age and ticks pass.
 *
 * Every timed cell is bench_repeat's median (min .. max) of --runs runs (5;
 * 3 with --quick), each in a forked child pinned to CPU 0. spoke-bench
 * interposes clock_gettime (peers_loops.c), so each read through it costs
 * about 1 ns more than in an application; tsc reads pay it only on their
 * re-anchor. For instruction counts run one cell under cachegrind:
 * `--only tsc/start-cancel --runs 1 --ops 200000` against `--ops 100000`.
 */
#define _GNU_SOURCE
#include "bench_svc.h"

#include <errno.h>
#include <pthread.h>
#include <spoke/engine.h>
#include <spoke/spoke.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define CLK_HAVE_TSC 1
#else
#define CLK_HAVE_TSC 0
#endif

#define CLK_DELAY_NS	  NS_PER_S /* start-cancel: 1 s, never fires in a run */
#define CLK_DELAY_TICKS	  1000u	   /* engine-start-stop: the same in 1 ms ticks */
#define CLK_BATCH	  64u	   /* ops per batch: the caller's time is re-read per batch */
#define CLK_POLL_EVERY	  4096u	   /* attached: pairs between spoke_poll */
#define CLK_PAIRS	  2000000u /* ops per run by default */
#define CLK_PAIRS_QUICK	  20000u   /* ... with --quick */
#define TSC_CALIBRATE_NS  (20 * NS_PER_MS)
#define TSC_ANCHOR_NS	  NS_PER_MS /* re-anchor when the anchor is 1 ms old */
#define TSC_MARGIN_NS	  1000u	    /* reordering and skew between CPUs */
#define TSC_RAISE_PPM	  1000u	    /* 2 x NTP's 500 ppm slew limit */
#define CHECK_SLEEP_EVERY 4096u	    /* never-behind: reads between 100 us sleeps */

enum source { SRC_NONE, SRC_MONOTONIC, SRC_TSC, SRC_COARSE, SRC_CALLER, NSRC };
enum workload { W_READ, W_ENGINE, W_PAIR, W_CHECK, NWORK };

static const char *const source_name[NSRC] = {"none", "monotonic", "tsc", "coarse-jiffy", "caller"};
static const char *const workload_name[NWORK] = {"read", "engine-start-stop", "start-cancel",
						 "never-behind"};

/*
 * The sources' state, set up by the main thread before any run (a forked
 * run inherits it) and then used by one thread: tsc's multiplier and its
 * anchor, the coarse clock's jiffy, the caller's loop time.
 */
static struct clocks {
	bool tsc_ok;
	uint64_t tsc_mult;	    /* ns per tick, 32.32 fixed point, raised by TSC_RAISE_PPM */
	uint64_t tsc_anchor_ticks;  /* TSC_ANCHOR_NS in ticks */
	uint64_t tsc_base, base_ns; /* the anchor: a TSC read, then a CLOCK_MONOTONIC read */
	uint64_t coarse_res_ns;	    /* one jiffy */
	uint64_t loop_ns;	    /* caller: the time of this batch */
	volatile uint64_t sink;	    /* keeps the reads */
	char tsc_why[96];	    /* why tsc is unavailable */
} clk;

static inline uint64_t mono_ns(void)
{
	return bench_now_ns();
}

static inline uint64_t coarse_ns(void)
{
	return bench_clock_ns(CLOCK_MONOTONIC_COARSE) + clk.coarse_res_ns;
}

#if CLK_HAVE_TSC
/* Invariant TSC: the CPUID bit, or the two flags Linux derives from it and the model. */
static bool tsc_invariant(void)
{
	unsigned a, b, c, d;
	char line[4096];
	bool constant = false, nonstop = false;
	FILE *f;

	if (__get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)))
		return true;
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f) && strncmp(line, "flags", 5) != 0)
		;
	if (f && strncmp(line, "flags", 5) == 0) {
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
	}
	if (f)
		fclose(f);
	return constant && nonstop;
}

/* The TSC first, then the clock: the anchor's time is never behind its count. */
static void tsc_anchor(void)
{
	clk.tsc_base = __rdtsc();
	clk.base_ns = mono_ns();
}

static inline uint64_t tsc_ns(void)
{
	uint64_t d = __rdtsc() - clk.tsc_base;

	if (__builtin_expect(d >= clk.tsc_anchor_ticks, 0)) { /* also a TSC that went back */
		tsc_anchor();
		d = 0;
	}
	return clk.base_ns + ((d * clk.tsc_mult) >> 32) + TSC_MARGIN_NS;
}

static void tsc_calibrate(void)
{
	uint64_t t0, n0, t1, n1;
	double ns_per_tick;

	if (!tsc_invariant()) {
		snprintf(clk.tsc_why, sizeof(clk.tsc_why), "the CPU reports no invariant TSC");
		return;
	}
	n0 = mono_ns();
	t0 = __rdtsc();
	bench_sleep_ns(TSC_CALIBRATE_NS);
	t1 = __rdtsc();
	n1 = mono_ns();
	if (t1 <= t0) {
		snprintf(clk.tsc_why, sizeof(clk.tsc_why), "the TSC did not advance");
		return;
	}
	ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
	clk.tsc_mult = (uint64_t)(ns_per_tick * 4294967296.0 * (1.0 + TSC_RAISE_PPM * 1e-6));
	clk.tsc_anchor_ticks = (uint64_t)(TSC_ANCHOR_NS / ns_per_tick);
	clk.tsc_ok = true;
	tsc_anchor();
}
#else
static void tsc_anchor(void)
{
}

static inline uint64_t tsc_ns(void)
{
	return mono_ns();
}

static void tsc_calibrate(void)
{
	snprintf(clk.tsc_why, sizeof(clk.tsc_why), "no TSC on this architecture");
}
#endif

/* One "now" of src (SRC_NONE: 0). Inlined with a constant src, so each loop reads one way. */
static inline __attribute__((always_inline)) uint64_t src_now(enum source src)
{
	switch (src) {
	case SRC_MONOTONIC:
		return mono_ns();
	case SRC_TSC:
		return tsc_ns();
	case SRC_COARSE:
		return coarse_ns();
	case SRC_CALLER:
		return clk.loop_ns;
	default:
		return 0;
	}
}

/* Once per batch: the caller's loop reads its time. */
static inline __attribute__((always_inline)) void src_batch(enum source src)
{
	if (src == SRC_CALLER)
		clk.loop_ns = mono_ns();
}

/* ---- the timed loops, each specialized per source ------------------------ */

static inline __attribute__((always_inline)) void read_loop(enum source src, uint64_t n)
{
	uint64_t sum = 0;

	for (uint64_t i = 0; i < n; i += CLK_BATCH) {
		src_batch(src);
		for (unsigned k = 0; k < CLK_BATCH; k++)
			sum += src_now(src);
	}
	clk.sink = sum;
}

static inline __attribute__((always_inline)) int
engine_loop(enum source src, uint64_t n, struct spoke_engine *e, struct spoke_timer *t)
{
	uint64_t sum = 0;
	int err = 0;

	for (uint64_t i = 0; i < n; i += CLK_BATCH) {
		src_batch(src);
		for (unsigned k = 0; k < CLK_BATCH; k++) {
			if (src != SRC_NONE)
				sum += src_now(src);
			err |= spoke_engine_start(e, t, CLK_DELAY_TICKS);
			err |= spoke_engine_stop(e, t);
		}
	}
	clk.sink = sum;
	return err;
}

/* Callbacks that ran: none may (each start is cancelled before the next poll). */
static _Atomic uint64_t fires;

static inline __attribute__((always_inline)) int pair_loop(enum source src, uint64_t n,
							   struct spoke *s)
{
	int err = 0;

	for (uint64_t i = 0; i < n; i += CLK_BATCH) {
		src_batch(src);
		for (unsigned k = 0; k < CLK_BATCH; k++) {
			spoke_id id;

			if (src == SRC_MONOTONIC)
				err |= spoke_start(s, CLK_DELAY_NS, bench_cb_count, &fires, &id);
			else
				err |= spoke_start_at(s, src_now(src) + CLK_DELAY_NS,
						      bench_cb_count, &fires, &id);
			err |= spoke_cancel(s, id);
		}
		if ((i + CLK_BATCH) % CLK_POLL_EVERY == 0)
			err |= spoke_poll(s);
	}
	return err;
}

/* The loop of workload w with source src, n ops; 0 or a negative errno. */
static int run_loop(enum workload w, enum source src, uint64_t n, struct spoke_engine *e,
		    struct spoke_timer *t, struct spoke *s)
{
#define CLK_DISPATCH(S)                                                                            \
	case S:                                                                                    \
		if (w == W_READ)                                                                   \
			read_loop(S, n);                                                           \
		else if (w == W_ENGINE)                                                            \
			return engine_loop(S, n, e, t);                                            \
		else                                                                               \
			return pair_loop(S, n, s);                                                 \
		return 0;
	switch (src) {
		CLK_DISPATCH(SRC_NONE)
		CLK_DISPATCH(SRC_MONOTONIC)
		CLK_DISPATCH(SRC_TSC)
		CLK_DISPATCH(SRC_COARSE)
		CLK_DISPATCH(SRC_CALLER)
	default:
		return -EINVAL;
	}
#undef CLK_DISPATCH
}

/* ---- one run: a forked child ---------------------------------------------- */

struct cell {
	enum source src;
	enum workload w;
	uint64_t n;
};

/* The subject of w: a bare engine, or a one-shard service this thread attaches. */
static int subject_open(const struct cell *c, struct spoke_engine **e, struct spoke **s,
			struct bench_sample *out)
{
	struct spoke_config cfg;
	int err;

	if (c->w == W_ENGINE) {
		err = spoke_engine_new(e, "hierarchical", NULL);
		return err ? bench_fail(out, err, "spoke_engine_new: %s", strerror(-err)) : 0;
	}
	if (c->w != W_PAIR)
		return 0;
	spoke_config_init(&cfg);
	cfg.shards = 1;
	cfg.callback_threads = 0;
	cfg.pin_threads = false;
	err = spoke_create(s, &cfg);
	if (err)
		return bench_fail(out, err, "spoke_create: %s", strerror(-err));
	err = spoke_attach(*s, 0);
	if (err) {
		spoke_destroy(*s);
		return bench_fail(out, err, "spoke_attach: %s", strerror(-err));
	}
	return 0;
}

/* The pair's verdicts: every start counted, every cancel won, nothing pending or fired. */
static int pair_check(struct spoke *s, uint64_t pairs, struct bench_sample *out)
{
	const struct spoke_shard_stats *t = bench_svc_totals(s);
	char sb[160];

	if (t->started != pairs || t->cancelled != pairs || t->pending || t->fired ||
	    atomic_load(&fires))
		return bench_fail(out, -EPROTO, "after %llu pairs: %s", (unsigned long long)pairs,
				  bench_svc_stats_str(sb, sizeof(sb), t));
	return 0;
}

static int run_cell(void *arg, unsigned run, struct bench_sample *out)
{
	const struct cell *c = arg;
	struct spoke_engine *e = NULL;
	struct spoke *s = NULL;
	struct spoke_timer t;
	uint64_t warm = (c->n / 10 / CLK_BATCH + 1) * CLK_BATCH, t0, t1;
	int err;

	(void)run;
	bench_pin_self(0);
	spoke_timer_init(&t);
	err = subject_open(c, &e, &s, out);
	if (err)
		return err;
	if (c->src == SRC_TSC)
		tsc_anchor(); /* the parent's anchor is as old as the bench */
	err = run_loop(c->w, c->src, warm, e, &t, s);
	t0 = bench_now_ns();
	err |= run_loop(c->w, c->src, c->n, e, &t, s);
	t1 = bench_now_ns();
	if (err)
		err = bench_fail(out, -EPROTO, "a start, stop, cancel or poll failed");
	else if (s)
		err = pair_check(s, warm + c->n, out);
	if (s)
		spoke_destroy(s);
	if (e)
		spoke_engine_free(e);
	out->value = (double)(t1 - t0) / (double)c->n;
	out->timed_ns = (double)(t1 - t0);
	return err;
}

/* ---- never behind: a thread of its own, moved between the CPUs ---------- */

struct check {
	enum source src;
	uint64_t n;
	uint64_t behind, max_lead_ns;
};

static void *check_thread(void *arg)
{
	struct check *c = arg;
	uint64_t quarter = c->n / 4 ? c->n / 4 : 1;

	for (uint64_t i = 0; i < c->n; i++) {
		uint64_t m, v;

		if (i % quarter == 0)
			bench_pin_self((unsigned)(i / quarter));
		if (i % CHECK_SLEEP_EVERY == CHECK_SLEEP_EVERY - 1)
			bench_sleep_ns(100000);
		m = mono_ns();
		v = src_now(c->src);
		if (v < m)
			c->behind++;
		else if (v - m > c->max_lead_ns)
			c->max_lead_ns = v - m;
	}
	return NULL;
}

static int check_run(struct check *c)
{
	pthread_t th;
	int err = pthread_create(&th, NULL, check_thread, c);

	if (err)
		return -err;
	pthread_join(th, NULL);
	return 0;
}

/* ---- the command ----------------------------------------------------------- */

#define MAX_ONLY 16

struct plan {
	struct bench_out out;
	unsigned runs;
	uint64_t n;
	unsigned nonly;
	struct cell only[MAX_ONLY];
	double engine_clock_ns, engine_ns; /* engine-start-stop: monotonic, none (0: not run) */
	int status;
};

static bool wanted(const struct plan *p, enum source src, enum workload w)
{
	if (!p->nonly)
		return true;
	for (unsigned i = 0; i < p->nonly; i++)
		if (p->only[i].src == src && p->only[i].w == w)
			return true;
	return false;
}

/* Why src cannot run w, or NULL. */
static const char *unavailable(enum source src, enum workload w)
{
	if (src == SRC_TSC && !clk.tsc_ok)
		return clk.tsc_why;
	if (src == SRC_NONE && w != W_ENGINE)
		return "no source";
	if (src == SRC_CALLER && w == W_CHECK)
		return "behind by design: the caller's deadlines count from its loop's time";
	return NULL;
}

static void out_check(struct plan *p, const struct check *c)
{
	FILE *f = p->out.f;
	char nb[32];

	if (p->out.format == BENCH_JSON)
		fprintf(f,
			"{\"source\":\"%s\",\"workload\":\"%s\",\"n\":%llu,\"behind\":%llu,"
			"\"max_lead_ns\":%llu}\n",
			source_name[c->src], workload_name[W_CHECK], (unsigned long long)c->n,
			(unsigned long long)c->behind, (unsigned long long)c->max_lead_ns);
	else
		fprintf(f, "%-14s %-11s %5s  behind %llu times, at most %llu ns ahead\n",
			source_name[c->src], workload_name[W_CHECK],
			bench_fmt_count(nb, sizeof(nb), c->n), (unsigned long long)c->behind,
			(unsigned long long)c->max_lead_ns);
	fflush(f);
}

/* The ratio printed beside a row: start-cancel over this run's engine + monotonic. */
static double row_ratio(const struct plan *p, enum workload w)
{
	return w == W_PAIR ? p->engine_clock_ns : 0;
}

static void do_cell(struct plan *p, enum source src, enum workload w)
{
	const char *why = unavailable(src, w);
	struct cell c = {src, w, p->n};
	struct bench_summary sum;
	char err[200];
	double base;

	if (!wanted(p, src, w))
		return;
	if (why) {
		if (src != SRC_NONE)
			bench_out_note(&p->out, "skipped", source_name[src], workload_name[w], p->n,
				       why);
		return;
	}
	if (w == W_CHECK) {
		struct check chk = {.src = src, .n = p->n};
		int r = check_run(&chk);

		if (r)
			bench_out_note(&p->out, "error", source_name[src], workload_name[w], p->n,
				       strerror(-r));
		else
			out_check(p, &chk);
		p->status |= r != 0; /* a source that falls behind is a finding, not a failure */
		return;
	}
	if (bench_repeat(run_cell, &c, p->runs, 60, &sum, err, sizeof(err)) != 0) {
		bench_out_note(&p->out, "error", source_name[src], workload_name[w], p->n, err);
		p->status = 1;
		return;
	}
	if (w == W_ENGINE && src == SRC_MONOTONIC)
		p->engine_clock_ns = sum.median;
	if (w == W_ENGINE && src == SRC_NONE)
		p->engine_ns = sum.median;
	base = row_ratio(p, w);
	bench_out_result_ratio(&p->out, source_name[src], workload_name[w], p->n, &sum,
			       w == W_READ ? "ns/read" : "ns/pair",
			       base > 0 ? sum.median / base : 0, NULL);
	if (w == W_PAIR && p->engine_ns > 0 && p->out.format == BENCH_TABLE)
		fprintf(p->out.f, "%-14s %-11s %5s  (%.2fx the bare engine)\n", "", "", "",
			sum.median / p->engine_ns);
}

static int find_name(const char *const *names, int k, const char *s, size_t len)
{
	for (int i = 0; i < k; i++)
		if (strlen(names[i]) == len && strncmp(names[i], s, len) == 0)
			return i;
	return -1;
}

/* "SOURCE/WORKLOAD" into p->only; -1 if unknown (said). */
static int parse_only(struct plan *p, const char *arg)
{
	const char *slash = strchr(arg, '/');
	int src = slash ? find_name(source_name, NSRC, arg, (size_t)(slash - arg)) : -1;
	int w = slash ? find_name(workload_name, NWORK, slash + 1, strlen(slash + 1)) : -1;

	if (src < 0 || w < 0 || p->nonly == MAX_ONLY)
		return -1;
	p->only[p->nonly++] = (struct cell){(enum source)src, (enum workload)w, 0};
	return 0;
}

static struct plan plan;
static struct bench_opts common;

/* The options only clocks takes (bench_option_fn); ctx is the plan. */
static const char *clocks_option(void *ctx, int key, const char *arg)
{
	struct plan *p = ctx;

	if (key == 'o')
		return bench_parse_count(arg, &p->n) == 0 ? NULL : "a count, e.g. 1e6";
	if (key == 's' && parse_only(p, arg) == 0)
		return NULL;
	return bench_opts_why("SOURCE/WORKLOAD (at most %d); SOURCE: none monotonic tsc "
			      "coarse-jiffy caller; WORKLOAD: read engine-start-stop start-cancel "
			      "never-behind",
			      MAX_ONLY);
}

static const struct bench_option clocks_options[] = {
	BENCH_OPT_JSON,
	BENCH_OPT_QUICK("2e4 ops a run, 3 runs (the smoke test)"),
	BENCH_OPT_RUNS("5; 3 with --quick"),
	{"ops", 'o', "OPS", "ops per run (rounded up to 64)", "2e6; 2e4 with --quick"},
	{"only", 's', "S/W",
	 "just this cell (repeatable); S: none monotonic tsc coarse-jiffy caller;\n"
	 "W: read engine-start-stop start-cancel never-behind",
	 "every cell"},
	BENCH_OPT_END,
};

const struct bench_cmd bench_clocks_cmd = {
	.name = "spoke-bench clocks",
	.about = "What a start's \"now\" costs: each never-early source read alone, in the bare\n"
		 "engine's start+stop, and in the attached start+cancel (bench/bench_clock.c).",
	.options = clocks_options,
	.handle = clocks_option,
	.ctx = &plan,
	.common = &common,
};

/* Options into *p; -1: run, else the exit status for main (help, bad usage). */
static int parse(struct plan *p, int argc, char **argv)
{
	const struct bench_opts *o = &common;
	int rc = bench_cmd_parse(&bench_clocks_cmd, argc, argv);

	if (rc >= 0)
		return rc;
	p->out = (struct bench_out){
		.f = stdout, .format = o->json ? BENCH_JSON : BENCH_TABLE, .subject_key = "source"};
	p->runs = bench_opts_runs(o, 3, 5);
	if (!p->n)
		p->n = o->quick ? CLK_PAIRS_QUICK : CLK_PAIRS;
	p->n = (p->n + CLK_BATCH - 1) / CLK_BATCH * CLK_BATCH;
	return -1;
}

int bench_clocks_main(int argc, char **argv)
{
	struct plan *p = &plan;
	struct timespec res;
	int r = parse(p, argc, argv);

	if (r >= 0)
		return r;
	clock_getres(CLOCK_MONOTONIC_COARSE, &res);
	clk.coarse_res_ns = bench_ts_ns(&res);
	tsc_calibrate();
	if (p->out.format == BENCH_TABLE) {
		char m[256];

		bench_machine(m, sizeof(m));
		printf("# %s; coarse clock: one jiffy = %llu ns; tsc: %s\n", m,
		       (unsigned long long)clk.coarse_res_ns,
		       clk.tsc_ok ? "invariant, calibrated" : clk.tsc_why);
	}
	for (int w = 0; w < NWORK; w++)
		for (int src = 0; src < NSRC; src++)
			do_cell(p, (enum source)src, (enum workload)w);
	return p->status ? 1 : 0;
}
