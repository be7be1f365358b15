/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_schemes.c - `spoke-bench schemes`: the comparison of Varghese &
 * Lauck's timer schemes (and the Timer Lawn) that the paper argues on paper,
 * measured through the public engine API (include/spoke/engine.h) only.
 *
 * For every scheme and N = 1e3, 1e4, 1e5, 1e6 outstanding timers (--max-n
 * 1e7 adds 1e7), delays uniform in [1, 2^20) ticks from a fixed seed:
 *
 *   W1          start N timers (not timed), then time P = max(N, 1e5) pairs
 *               of (start a fresh timer with a random delay, stop a random
 *               outstanding one), so N stay outstanding. ns per pair.
 *   W2-advance  start N timers, time one advance(2^20) that fires all of
 *               them. ns per fired timer.
 *   W2-tick     start N timers, time 2^20 calls of advance(1). ns per fired
 *               timer (total / N): the cost of the empty ticks is included.
 *   W3          RSS just before the timer array and the engine exist, and
 *               after the N starts; (after - before) / N bytes per timer. The
 *               24-byte struct spoke_timer is part of it.
 *
 * --ttls K draws every delay from K distinct values instead (fixed by the
 * seed, uniform in the same range; each start picks one of the K at
 * random): the Timer Lawn's own ground, one FIFO per TTL, against the
 * default where nearly every timer has a TTL of its own.
 *
 * Each run is a freshly forked child (bench_repeat), so every run, and W3's
 * RSS in particular, starts from the same small heap; K runs (--runs,
 * default 5) give the median, min and max. The engine clock starts at 0 in
 * each run; W1 never advances it.
 *
 * What the harness adds per operation: one xorshift64* (~1 ns) gives both
 * the delay (low 32 bits) and the victim (high 32 bits). Timers live in one
 * array of N + 1; exactly one of them (the spare) is not pending, so "a
 * random outstanding timer" is a random index other than the spare's - no
 * bookkeeping array at all - and the stopped victim becomes the next spare.
 * The expiry callback increments a counter. The clock is read around whole
 * loops only.
 *
 * Caps. Some schemes cost O(n) per operation (list expiry, sorted-list
 * insertion, ...), so a run costs O(n^2). Before a cell (scheme, workload, n)
 * runs, its cost is extrapolated from the same scheme and workload at the
 * last two sizes that ran: per-op cost c(n) = c(n1) * (n / n1)^g with g
 * fitted from c(n0) and c(n1), clamped to [0, 1.5] (O(n) per op is the
 * worst any scheme has, and such a walk also falls out of cache as n
 * grows), for the untimed starts and the timed part separately. Every
 * workload begins with the same n starts (W3 is nothing else), so once one
 * of them ran at n its measured starts replace the extrapolated ones. W2-tick
 * does W2-advance's setup and expiry work plus 2^20 tick steps, so it is
 * estimated as W2-advance at the same n plus the tick overhead seen at the
 * previous n. A cell whose K runs would take longer than --budget seconds
 * (default 30) is reported as skipped, with the estimate. With no trend yet
 * (the first two sizes) a cell just runs. Estimates miss cache cliffs, so
 * the budget is also enforced as the runs go: a cell whose runs so far
 * project past it, or whose run is still going at twice it, is stopped and
 * reported as skipped, and so are the larger sizes of that workload. No
 * scheme is special-cased.
 */
#include "bench_util.h"

#include <spoke/engine.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DELAY_SPAN_TICKS BENCH_DELAY_SPAN_TICKS /* delays in [1, DELAY_SPAN_TICKS) */
#define MAX_SCHEMES	 16
#define MAX_SIZES	 5 /* 1e3 .. 1e7 */
#define DEFAULT_BUDGET_S 30.0
#define QUICK_BUDGET_S	 0.2
#define MAX_GROWTH	 1.5 /* per-op cost exponent: O(n), and a walk falling out of cache */

/* `wheel` is bounded: give it room for every delay. The others ignore it. */
static const struct spoke_engine_params engine_params = {
	.max_interval = DELAY_SPAN_TICKS,
};

/* --ttls: 0 = every delay uniform in [1, 2^20); else one of ttl_table[0..ttl_count) */
#define MAX_TTLS 65536
static unsigned ttl_count;
static uint64_t ttl_table[MAX_TTLS];

static void ttls_init(unsigned k)
{
	struct bench_rng r;

	bench_rng_seed(&r, BENCH_SEED ^ 0x77);
	ttl_count = k;
	for (unsigned i = 0; i < k; i++)
		ttl_table[i] = bench_random_delay(bench_rng_next(&r));
}

/* The delay of a start, from the low 32 bits of x (W1 takes its victim from the high ones). */
static uint64_t delay_of(uint64_t x)
{
	if (ttl_count)
		return ttl_table[bench_below((uint32_t)x, ttl_count)];
	return bench_random_delay(x);
}

/* One run's subject: a scheme at a size. */
struct cell {
	const char *scheme;
	uint64_t n;
};

/* ---- the workloads (each runs in a forked child) ----------------------- */

struct fixture {
	struct spoke_engine *e;
	struct spoke_timer *timers;
	struct bench_rng rng;
};

static void count_expired(void *ctx, struct spoke_timer *t)
{
	(void)t;
	++*(size_t *)ctx;
}

static void fixture_close(struct fixture *f)
{
	spoke_engine_free(f->e);
	free(f->timers);
}

/* Allocate and touch ntimers timers, create the engine, start the first nstart. */
static int fixture_open(struct fixture *f, const struct cell *c, unsigned run, size_t ntimers,
			size_t nstart, struct bench_sample *out)
{
	int err;

	memset(f, 0, sizeof(*f));
	bench_rng_seed(&f->rng, BENCH_SEED + run);
	f->timers = malloc(ntimers * sizeof(*f->timers));
	if (!f->timers)
		return bench_fail(out, -ENOMEM, "no memory for %zu timers", ntimers);
	for (size_t i = 0; i < ntimers; i++)
		spoke_timer_init(&f->timers[i]);
	err = spoke_engine_new(&f->e, c->scheme, &engine_params);
	if (err) {
		free(f->timers);
		return bench_fail(out, err, "spoke_engine_new: %s", strerror(-err));
	}
	for (size_t i = 0; i < nstart; i++) {
		err = spoke_engine_start(f->e, &f->timers[i], delay_of(bench_rng_next(&f->rng)));
		if (err) {
			fixture_close(f);
			return bench_fail(out, err, "start of timer %zu: %s", i, strerror(-err));
		}
	}
	return 0;
}

static int run_w1(void *arg, unsigned run, struct bench_sample *out)
{
	const struct cell *c = arg;
	const uint32_t n = (uint32_t)c->n;
	const uint64_t pairs = bench_w1_pairs(c->n);
	uint32_t spare = n; /* the one timer not pending */
	uint64_t t0, t1, t2;
	struct fixture f;
	int err;

	t0 = bench_now_ns();
	err = fixture_open(&f, c, run, (size_t)n + 1, n, out);
	if (err)
		return err;
	t1 = bench_now_ns();
	for (uint64_t i = 0; i < pairs; i++) {
		uint64_t x = bench_rng_next(&f.rng);
		uint32_t victim = bench_w1_victim(x, n, spare);

		err |= spoke_engine_start(f.e, &f.timers[spare], delay_of(x));
		err |= spoke_engine_stop(f.e, &f.timers[victim]);
		spare = victim;
	}
	t2 = bench_now_ns();
	if (err || spoke_engine_count(f.e) != n)
		err = bench_fail(out, -EPROTO, "start/stop failed or %zu pending instead of %u",
				 spoke_engine_count(f.e), n);
	fixture_close(&f);
	out->setup_ns = (double)(t1 - t0);
	out->timed_ns = (double)(t2 - t1);
	out->value = out->timed_ns / (double)pairs;
	return err;
}

static int run_w2(const struct cell *c, unsigned run, struct bench_sample *out, bool tick_by_tick)
{
	size_t fired = 0, callbacks = 0;
	uint64_t t0, t1, t2;
	struct fixture f;
	int err;

	t0 = bench_now_ns();
	err = fixture_open(&f, c, run, c->n, c->n, out);
	if (err)
		return err;
	t1 = bench_now_ns();
	if (tick_by_tick) {
		for (uint64_t i = 0; i < DELAY_SPAN_TICKS; i++)
			fired += spoke_engine_advance(f.e, 1, count_expired, &callbacks);
	} else {
		fired = spoke_engine_advance(f.e, DELAY_SPAN_TICKS, count_expired, &callbacks);
	}
	t2 = bench_now_ns();
	if (fired != c->n || callbacks != c->n || spoke_engine_count(f.e) != 0)
		err = bench_fail(out, -EPROTO,
				 "fired %zu, callbacks %zu, %zu still pending, of %llu", fired,
				 callbacks, spoke_engine_count(f.e), (unsigned long long)c->n);
	fixture_close(&f);
	out->setup_ns = (double)(t1 - t0);
	out->timed_ns = (double)(t2 - t1);
	out->value = out->timed_ns / (double)c->n;
	return err;
}

static int run_w2_advance(void *arg, unsigned run, struct bench_sample *out)
{
	return run_w2(arg, run, out, false);
}

static int run_w2_tick(void *arg, unsigned run, struct bench_sample *out)
{
	return run_w2(arg, run, out, true);
}

static int run_w3(void *arg, unsigned run, struct bench_sample *out)
{
	const struct cell *c = arg;
	long before, after;
	uint64_t t0, t1;
	struct fixture f;
	int err;

	malloc_trim(0); /* resident free heap would hide growth */
	before = bench_rss_bytes();
	t0 = bench_now_ns();
	err = fixture_open(&f, c, run, c->n, c->n, out);
	if (err)
		return err;
	t1 = bench_now_ns();
	after = bench_rss_bytes();
	fixture_close(&f);
	if (before < 0 || after < 0)
		return bench_fail(out, -EIO, "cannot read /proc/self/statm");
	out->timed_ns = (double)(t1 - t0);
	out->value = (double)(after - before) / (double)c->n;
	return 0;
}

static uint64_t ops_n(uint64_t n)
{
	return n;
}

enum workload_id { W1, W2_ADVANCE, W2_TICK, W3, NWORKLOADS };

static const struct workload_desc {
	const char *name;
	const char *unit;
	const char *op; /* what one timed op is, in skip messages */
	const char *plot_title;
	bench_run_fn *run;
	uint64_t (*timed_ops)(uint64_t n); /* ops in the timed window */
} workloads[NWORKLOADS] = {
	[W1] = {"W1", "ns/op", "pair", "W1: start + stop of a random outstanding timer", run_w1,
		bench_w1_pairs},
	[W2_ADVANCE] = {"W2-advance", "ns/op", "fired timer",
			"W2: drain N timers by one advance(2^{20})", run_w2_advance, ops_n},
	[W2_TICK] = {"W2-tick", "ns/op", "fired timer",
		     "W2: drain N timers by 2^{20} advance(1) calls", run_w2_tick, ops_n},
	[W3] = {"W3", "B/timer", "timer", "W3: RSS growth per outstanding timer", run_w3, ops_n},
};

/* ---- the plan, the caps, the results ----------------------------------- */

enum cell_state { CELL_NOT_RUN, CELL_DONE, CELL_SKIPPED, CELL_STOPPED, CELL_FAILED };

struct cell_result {
	enum cell_state state;
	struct bench_summary sum;
};

struct plan {
	unsigned runs;
	double budget_s;
	const char *plot;
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	const char *schemes[MAX_SCHEMES];
	size_t nschemes;
	struct cell_result res[MAX_SCHEMES][NWORKLOADS][MAX_SIZES];
	struct bench_out out;
	bool failed;
};

/* One run's estimated cost at sizes[i]. */
struct estimate {
	double setup_ns, timed_ns;
	long from; /* the size it is extrapolated from, -1 if only the setup is known */
};

static double part_ns(const struct bench_summary *s, bool timed)
{
	return timed ? s->timed_ns : s->setup_ns;
}

static double part_ops(enum workload_id w, bool timed, uint64_t n)
{
	return (double)(timed ? workloads[w].timed_ops(n) : n);
}

/* Growth exponent of a per-op cost from (n0, c0) to (n1, c1), clamped to [0, MAX_GROWTH]. */
static double growth(uint64_t n0, double c0, uint64_t n1, double c1)
{
	double g;

	if (c0 <= 0 || c1 <= 0 || n1 <= n0)
		return 1;
	g = log(c1 / c0) / log((double)n1 / (double)n0);
	return g < 0 ? 0 : g > MAX_GROWTH ? MAX_GROWTH : g;
}

/* Last size index below i at which hist ran, or -1. */
static long last_done(const struct cell_result *hist, size_t i)
{
	for (long j = (long)i - 1; j >= 0; j--)
		if (hist[j].state == CELL_DONE)
			return j;
	return -1;
}

/* One part (setup or timed) of one run of w at sizes[i], from the last two sizes that ran. */
static double extrapolate(const struct plan *p, const struct cell_result *hist, enum workload_id w,
			  size_t i, bool timed)
{
	long j = last_done(hist, i), k = j > 0 ? last_done(hist, (size_t)j) : -1;
	double cj, g;

	if (k < 0)
		return 0;
	cj = part_ns(&hist[j].sum, timed) / part_ops(w, timed, p->sizes[j]);
	g = growth(p->sizes[k], part_ns(&hist[k].sum, timed) / part_ops(w, timed, p->sizes[k]),
		   p->sizes[j], cj);
	return part_ops(w, timed, p->sizes[i]) * cj * pow((double)p->sizes[i] / p->sizes[j], g);
}

/*
 * What n starts cost at sizes[i], as measured there by another workload (a
 * stopped cell's completed runs count): every workload begins with the same
 * n starts (W3 consists of nothing else). 0 if none ran yet.
 */
static double known_setup_ns(const struct plan *p, size_t s, size_t i)
{
	double most = 0;

	for (int w = 0; w < NWORKLOADS; w++) {
		const struct bench_summary *sum = &p->res[s][w][i].sum;
		double ns = w == W3 ? sum->timed_ns : sum->setup_ns;

		if (sum->runs > 0 && ns > most)
			most = ns;
	}
	return most;
}

/*
 * Estimate one run of w at sizes[i] for scheme s. False when there is
 * nothing to go by (no trend of this workload yet, no setup measured at this
 * n): the cell just runs, under the time limit of bench_repeat.
 */
static bool estimate_cell(const struct plan *p, size_t s, enum workload_id w, size_t i,
			  struct estimate *est)
{
	const struct cell_result *hist = p->res[s][w], *adv = p->res[s][W2_ADVANCE];
	long j = last_done(hist, i), k = j > 0 ? last_done(hist, (size_t)j) : -1;
	double setup_ns = known_setup_ns(p, s, i);
	bool known = false;
	struct estimate a;

	*est = (struct estimate){0, 0, j};
	/* W2-tick: W2-advance's setup and expiry work at n, plus the ticks seen at n_j */
	if (w == W2_TICK && j >= 0 && adv[j].state == CELL_DONE &&
	    (adv[i].sum.runs > 0 || estimate_cell(p, s, W2_ADVANCE, i, &a))) {
		double ticks_ns = hist[j].sum.timed_ns - adv[j].sum.timed_ns;

		if (adv[i].sum.runs > 0)
			a = (struct estimate){adv[i].sum.setup_ns, adv[i].sum.timed_ns, j};
		est->setup_ns = a.setup_ns;
		est->timed_ns = a.timed_ns + (ticks_ns > 0 ? ticks_ns : 0);
		known = true;
	} else if (k >= 0) {
		est->setup_ns = extrapolate(p, hist, w, i, false);
		est->timed_ns = extrapolate(p, hist, w, i, true);
		known = true;
	}
	if (setup_ns > 0) {
		if (w == W3)
			est->timed_ns = setup_ns;
		else
			est->setup_ns = setup_ns;
		known = true;
	}
	return known;
}

static const char *order_name(double g)
{
	return g < 0.25 ? "O(1)" : g < 0.75 ? "~O(sqrt n)" : "O(n)";
}

/* "list at n=1e5 W2-tick would take ~52 s for 5 runs (O(n) per fired timer, ...)" */
static void skip_reason(char *buf, size_t len, const struct plan *p, size_t s, enum workload_id w,
			size_t i, const struct estimate *est)
{
	uint64_t n = p->sizes[i], n0 = est->from >= 0 ? p->sizes[est->from] : 0;
	double run = est->setup_ns + est->timed_ns, total_s = p->runs * run / 1e9;
	const struct bench_summary *last;
	bool timed = est->timed_ns >= est->setup_ns;
	int len0;
	char nb[32];

	len0 = snprintf(buf, len, "%s at n=%s %s would take ~%.*f s for %u runs", p->schemes[s],
			bench_fmt_count(nb, sizeof(nb), n), workloads[w].name, total_s < 10 ? 1 : 0,
			total_s, p->runs);
	if (len0 < 0 || (size_t)len0 >= len)
		return;
	if (est->from < 0) { /* only the starts are known */
		snprintf(buf + len0, len - (size_t)len0, " (its %s starts alone, as measured)", nb);
		return;
	}
	last = &p->res[s][w][est->from].sum;
	snprintf(
		buf + len0, len - (size_t)len0, " (%s per %s; a run grows as ~n^%.1f)",
		order_name(growth(n0, part_ns(last, timed) / part_ops(w, timed, n0), n,
				  (timed ? est->timed_ns : est->setup_ns) / part_ops(w, timed, n))),
		timed ? workloads[w].op : "start",
		log(run / (last->setup_ns + last->timed_ns)) / log((double)n / (double)n0));
}

/* Record a cell that did not produce a result, and print why. */
static void record_note(struct plan *p, size_t s, enum workload_id w, size_t i,
			enum cell_state state, const char *why)
{
	p->res[s][w][i].state = state;
	if (state == CELL_FAILED)
		p->failed = true;
	bench_out_note(&p->out, state == CELL_FAILED ? "error" : "skipped", p->schemes[s],
		       workloads[w].name, p->sizes[i], why);
}

/* Run (or skip) one cell and record it. */
static void run_cell(struct plan *p, size_t s, enum workload_id w, size_t i)
{
	struct cell_result *r = &p->res[s][w][i];
	struct cell c = {.scheme = p->schemes[s], .n = p->sizes[i]};
	char why[320], err[200], nb[32], nb0[32];
	struct estimate est;
	int rc;

	bench_fmt_count(nb, sizeof(nb), c.n);
	for (size_t j = 0; j < i; j++) {
		enum cell_state was = p->res[s][w][j].state;

		if (was == CELL_FAILED || was == CELL_STOPPED) {
			snprintf(why, sizeof(why), "%s at n=%s %s not run: it %s at n=%s", c.scheme,
				 nb, workloads[w].name,
				 was == CELL_FAILED ? "failed" : "was stopped over the budget",
				 bench_fmt_count(nb0, sizeof(nb0), p->sizes[j]));
			record_note(p, s, w, i, CELL_SKIPPED, why);
			return;
		}
	}
	if (estimate_cell(p, s, w, i, &est) &&
	    p->runs * (est.setup_ns + est.timed_ns) / 1e9 > p->budget_s) {
		skip_reason(why, sizeof(why), p, s, w, i, &est);
		record_note(p, s, w, i, CELL_SKIPPED, why);
		return;
	}
	rc = bench_repeat(workloads[w].run, &c, p->runs, p->budget_s, &r->sum, err, sizeof(err));
	if (rc == 0) {
		r->state = CELL_DONE;
		bench_out_result(&p->out, c.scheme, workloads[w].name, c.n, &r->sum,
				 workloads[w].unit);
		return;
	}
	snprintf(why, sizeof(why), "%s at n=%s %s %s", c.scheme, nb, workloads[w].name, err);
	record_note(p, s, w, i,
		    rc == -ETIMEDOUT || rc == BENCH_OVER_BUDGET ? CELL_STOPPED : CELL_FAILED, why);
}

/* Can this scheme be created here? (Placeholders refuse with -EINVAL.) */
static int probe_scheme(const char *scheme)
{
	struct spoke_engine *e;
	int err = spoke_engine_new(&e, scheme, &engine_params);

	if (err == 0)
		spoke_engine_free(e);
	return err;
}

/* ---- reporting --------------------------------------------------------- */

/* Medians as one markdown table per workload: schemes down, sizes across. */
static void print_summary(const struct plan *p)
{
	FILE *f = p->out.f;

	for (int w = 0; w < NWORKLOADS; w++) {
		fprintf(f, "\n%s (%s), median of %u runs\n\n", workloads[w].name, workloads[w].unit,
			p->runs);
		bench_md_sizes_head(f, "scheme", 13, p->sizes, p->nsizes, 8);
		for (size_t s = 0; s < p->nschemes; s++) {
			fprintf(f, "| %-13s |", p->schemes[s]);
			for (size_t i = 0; i < p->nsizes; i++) {
				const struct cell_result *r = &p->res[s][w][i];
				double v = r->sum.median;

				if (r->state == CELL_DONE)
					fprintf(f, v < 100 ? " %8.1f |" : " %8.0f |", v);
				else
					fprintf(f, " %8s |",
						r->state == CELL_FAILED	   ? "ERROR"
						: r->state == CELL_NOT_RUN ? "n/a"
									   : "skipped");
			}
			fputc('\n', f);
		}
	}
}

static int plot(const struct plan *p)
{
	static struct bench_point pts[NWORKLOADS][MAX_SCHEMES][MAX_SIZES];
	struct bench_series series[NWORKLOADS][MAX_SCHEMES];
	struct bench_panel panels[NWORKLOADS];
	char title[256];

	for (int w = 0; w < NWORKLOADS; w++) {
		for (size_t s = 0; s < p->nschemes; s++) {
			size_t k = 0;

			for (size_t i = 0; i < p->nsizes; i++)
				if (p->res[s][w][i].state == CELL_DONE)
					pts[w][s][k++] = (struct bench_point){
						(double)p->sizes[i], p->res[s][w][i].sum.median};
			series[w][s] = (struct bench_series){p->schemes[s], pts[w][s], k};
		}
		panels[w] = (struct bench_panel){
			.title = workloads[w].plot_title,
			.xlabel = "N outstanding timers",
			.ylabel = w == W3 ? "bytes per timer" : "ns per op (median)",
			.logy = true,
			.series = series[w],
			.nseries = p->nschemes,
		};
	}
	if (ttl_count)
		snprintf(title, sizeof(title),
			 "Timer engines, N outstanding timers, delays drawn from %u distinct TTLs "
			 "in [1, 2^{20}) ticks; median of %u runs (a missing point was skipped: "
			 "too slow)",
			 ttl_count, p->runs);
	else
		snprintf(title, sizeof(title),
			 "Timer engines, N outstanding timers, delays uniform in [1, 2^{20}) ticks "
			 "(nearly every TTL distinct); median of %u runs (a missing point was "
			 "skipped: too slow)",
			 p->runs);
	return bench_plot_png(p->plot, title, panels, NWORKLOADS);
}

/* ---- options ----------------------------------------------------------- */

static bool known_scheme(const char *name)
{
	for (const char *const *s = spoke_engine_schemes(); *s; s++)
		if (strcmp(*s, name) == 0)
			return true;
	return false;
}

/* "one of list, sorted-list, ..." */
static const char *scheme_list(void)
{
	char buf[256];
	size_t len = 0;

	for (const char *const *s = spoke_engine_schemes(); *s && len < sizeof(buf); s++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
					len ? ", " : "one of ", *s);
	return bench_opts_why("%s", buf);
}

static struct plan plan;
static struct bench_opts common;

/* A schemes option (bench_option_fn); ctx is the plan. */
static const char *schemes_option(void *ctx, int key, const char *arg)
{
	struct plan *p = ctx;
	unsigned long k;
	char *end;

	switch (key) {
	case 'p':
		p->plot = arg;
		return NULL;
	case 's':
		if (!known_scheme(arg))
			return scheme_list();
		if (p->nschemes < MAX_SCHEMES)
			p->schemes[p->nschemes++] = arg;
		return NULL;
	case 't':
		k = strtoul(arg, &end, 10);
		if (*end || k < 1 || k > MAX_TTLS)
			return bench_opts_why("1..%d distinct TTLs", MAX_TTLS);
		ttls_init((unsigned)k);
		return NULL;
	default:
		return "an option schemes does not take";
	}
}

static const struct bench_option schemes_options[] = {
	BENCH_OPT_JSON,
	BENCH_OPT_QUICK("N = 1e3 and 1e4, 3 runs, budget 0.2 s (the smoke test)"),
	BENCH_OPT_RUNS("5; 3 with --quick"),
	BENCH_OPT_MAX_N("1e6; 1e4 with --quick"),
	BENCH_OPT_BUDGET("30 s; 0.2 s with --quick"),
	{"plot", 'p', "FILE", "also draw FILE (PNG, 2x2 panels: W1, W2-advance, W2-tick, W3)",
	 "no plot"},
	{"scheme", 's', "NAME", "only this scheme (repeatable)", "every scheme"},
	{"ttls", 't', "K", "draw every delay from K distinct TTLs (1..65536)",
	 "all uniform in [1, 2^20)"},
	BENCH_OPT_END,
};

const struct bench_cmd bench_schemes_cmd = {
	.name = "spoke-bench schemes",
	.about = "The paper's comparison of the engine schemes: W1 ns per (start, stop random)\n"
		 "pair; W2 ns per fired timer when N drain by one advance(2^20) and tick by\n"
		 "tick; W3 bytes of RSS per timer (see the top of bench/bench_schemes.c).",
	.options = schemes_options,
	.handle = schemes_option,
	.ctx = &plan,
	.common = &common,
};

/* Fill the plan from argv. -1 to go on, or the exit status for main (usage or error). */
static int parse_options(struct plan *p, int argc, char **argv)
{
	const struct bench_opts *o = &common;
	int rc = bench_cmd_parse(&bench_schemes_cmd, argc, argv);

	if (rc >= 0)
		return rc;
	p->out = (struct bench_out){
		.f = stdout, .format = o->json ? BENCH_JSON : BENCH_TABLE, .subject_key = "scheme"};
	p->runs = bench_opts_runs(o, 3, 5);
	p->budget_s = o->budget_s > 0 ? o->budget_s : o->quick ? QUICK_BUDGET_S : DEFAULT_BUDGET_S;
	p->nsizes = bench_grid_sizes(p->sizes, MAX_SIZES,
				     o->max_n	? o->max_n
				     : o->quick ? 10000
						: 1000000);
	if (p->nsizes == 0)
		return 2;
	if (p->nschemes == 0)
		for (const char *const *s = spoke_engine_schemes(); *s && p->nschemes < MAX_SCHEMES;
		     s++)
			p->schemes[p->nschemes++] = *s;
	return -1;
}

/* ---- main -------------------------------------------------------------- */

int bench_schemes_main(int argc, char **argv)
{
	struct plan *p = &plan;
	uint64_t t0 = bench_now_ns();
	char machine[256], nb0[32], nb1[32];
	struct bench_progress progress;
	char ttls_words[64];
	double wall_s;
	int rc;

	rc = parse_options(p, argc, argv);
	if (rc >= 0)
		return rc;
	bench_machine(machine, sizeof(machine));
	if (ttl_count)
		snprintf(ttls_words, sizeof(ttls_words), "drawn from %u distinct TTLs uniform",
			 ttl_count);
	else
		snprintf(ttls_words, sizeof(ttls_words), "uniform");
	bench_progress_start(&progress, "spoke-bench schemes", p->nschemes * p->nsizes * NWORKLOADS,
			     t0);
	if (p->out.format == BENCH_TABLE)
		printf("spoke-bench schemes: N = %s .. %s outstanding timers, delays %s in "
		       "[1, 2^20) ticks (seed %#llx),\n"
		       "median, min, max of %u runs; a cell estimated over %g s is skipped.\n"
		       "machine: %s\n\n",
		       bench_fmt_count(nb0, sizeof(nb0), p->sizes[0]),
		       bench_fmt_count(nb1, sizeof(nb1), p->sizes[p->nsizes - 1]), ttls_words,
		       (unsigned long long)BENCH_SEED, p->runs, p->budget_s, machine);

	for (size_t s = 0; s < p->nschemes; s++) {
		int err = probe_scheme(p->schemes[s]);

		if (err) {
			char why[160];

			snprintf(why, sizeof(why),
				 "%s cannot be created here (spoke_engine_new: %s)", p->schemes[s],
				 strerror(-err));
			bench_out_note(&p->out, "skipped", p->schemes[s], "all", 0, why);
			for (int w = 0; w < NWORKLOADS; w++)
				for (size_t i = 0; i < p->nsizes; i++) {
					p->res[s][w][i].state = CELL_SKIPPED;
					bench_progress_step(&progress, why, bench_now_ns());
				}
			continue;
		}
		for (size_t i = 0; i < p->nsizes; i++)
			for (int w = 0; w < NWORKLOADS; w++) {
				char what[96], nb[32];

				run_cell(p, s, (enum workload_id)w, i);
				snprintf(what, sizeof(what), "%s %s n=%s", p->schemes[s],
					 workloads[w].name,
					 bench_fmt_count(nb, sizeof(nb), p->sizes[i]));
				bench_progress_step(&progress, what, bench_now_ns());
			}
	}
	bench_progress_end(&progress);

	rc = 0;
	if (p->out.format == BENCH_TABLE)
		print_summary(p);
	if (p->plot) {
		rc = plot(p);
		if (rc)
			fprintf(stderr, "spoke-bench schemes: drawing %s with gnuplot failed\n",
				p->plot);
	}
	wall_s = (double)(bench_now_ns() - t0) / 1e9;
	fprintf(p->out.format == BENCH_TABLE ? stdout : stderr,
		"\nspoke-bench schemes: wall time %.1f s\n", wall_s);
	return p->failed || rc ? 1 : 0;
}
