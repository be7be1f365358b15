/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_peers.c - `spoke-bench peers`: spoke beside the timers a server
 * would otherwise use, under the workloads of `spoke-bench schemes`, in one
 * invocation, with each figure's ratio to spoke's best engine.
 *
 * Subjects (peers.h has the table of operations; one file per family):
 *   hierarchical, hashed, lawn   spoke's engines (peers_spoke.c)
 *   service                      spoke's service, one shard attached to the
 *                                bench thread (peers_spoke.c)
 *   binheap                      a binary heap written for the bench
 *                                (peers_heap.c)
 *   libevent, libuv              the two event loops (peers_loops.c)
 *   timerfd, posix-timer         the kernel's timers (peers_kernel.c)
 *   memory-floor                 not a timer: the physical limit (below)
 *
 * Workloads, for N = 1e3 .. 1e6 outstanding timers (--max-n 1e7 adds 1e7),
 * delays uniform in [1, 2^20) ticks, seed BENCH_SEED + run, so every
 * subject gets the same delays and victims in the same order:
 *
 *   W1          start N timers (untimed), then time max(N, 1e5) pairs of
 *               (start the spare timer, stop a random outstanding one).
 *               ns per pair. The stepped clocks stand still; the real-time
 *               peers run with 1 ms ticks, so only the few timers with a
 *               delay shorter than the run can fire (a stop that finds its
 *               timer gone, -ENOENT, is accepted from them alone).
 *   W2-advance  start N timers, time one advance by 2^20 ticks that fires
 *               all of them. ns per fired timer.
 *   W2-tick     start N timers, time 2^20 advances by one tick. ns per
 *               fired timer, the empty ticks included.
 *   W3          RSS growth from before the subject exists to after the N
 *               starts, per timer; kernel peers add the Slab growth of
 *               /proc/meminfo (unit "B/timer RSS+slab"), a system-wide
 *               figure that every other process moves too: noisy (even
 *               negative) at small N, look at the median.
 *
 * Ticks. Engines and binheap count abstract ticks. libevent and libuv
 * count 1 ms ticks; their W2 runs on a clock the bench feeds (clock_gettime
 * is interposed, see peers_loops.c): advance(k) moves it by k ms and runs
 * one non-blocking loop turn, so W2-tick is 2^20 loop turns, and each turn
 * of either loop makes one epoll_wait(timeout 0) system call (libuv 1.44
 * polls even with no fd to watch): the price of ticking an event loop.
 *
 * The service, timerfd and POSIX timers run on the real clock, which no one
 * can feed. W1 and W3 use 1 ms ticks (nothing fires). W2 uses short ticks
 * (1 us; 100 ns with --quick), so 2^20 ticks last about 1 s:
 *   W2-advance  sleep (untimed) until every deadline has passed, then time
 *               draining all N notifications (epoll_wait + read, signalfd
 *               reads, spoke_poll);
 *   W2-tick     drain in real time as they fall due: the loop sleeps until
 *               the next one (epoll_wait, poll on the signalfd,
 *               spoke_next_deadline), wakes and handles what is due. The
 *               figure is the process CPU time (CLOCK_PROCESS_CPUTIME_ID,
 *               user + system) per fired timer, unit "CPU ns/op": the loop
 *               wakes as the kernel batches expiries, not 2^20 times, and
 *               the kernel's own hrtimer interrupt work is charged to
 *               whatever it interrupts. Comparable in spirit (work per timer
 *               as time passes), not in mechanism.
 *
 * Caps. The kernel peers stop where process limits stop them: a timerfd
 * is an open file (RLIMIT_NOFILE), a POSIX timer holds a queued signal
 * (RLIMIT_SIGPENDING, per user). The bench first raises both soft limits to
 * the hard ones; a run that still hits one reports a "cap" row with the
 * limit and how many timers it got, and the larger sizes are "cap" rows.
 *
 * Memory floor. Per N, the latency of a dependent random load over a buffer
 * as large as the best spoke engine's working set at that N (its W3 bytes
 * per timer x N; sizeof(struct spoke_timer) x N (24 B) when W3 was not
 * measured): one pointer per 64-byte line, the lines in one random cycle
 * (Sattolo), ns per load. A random stop must touch at least one random
 * timer, so no single stop at that N can take less; its ratio is floor /
 * best W1. The W1 loop is a throughput figure, though: its victims come
 * from the PRNG, not from the previous load, so the CPU overlaps the cache
 * misses of consecutive pairs, and once the timers fall out of cache a W1
 * pair can cost less than one dependent miss (ratio > 1).
 *
 * Ratio: a figure's median / the smallest median among hierarchical, hashed
 * and lawn for the same workload and N ("ratio" in JSON, "1.00x" in the
 * table).
 *
 * Runs: every run is a forked child (bench_repeat), K = 5 (--runs): median,
 * min, max. Every subject is driven through the same function-pointer
 * table, so each operation pays one indirect call (~1 ns) whoever it is:
 * spoke's engines read a little slower here than in `schemes`. Budget as
 * in `schemes`, simplified: a cell whose K runs would take more than
 * --budget seconds (default 30), extrapolated from the size before, is
 * skipped; one that overruns is stopped, and so are its larger sizes.
 */
#include "peers.h"

#include <spoke/engine.h>

#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_PEERS	  16
#define MAX_SIZES	  5 /* 1e3 .. 1e7 */
#define DEFAULT_BUDGET_S  30.0
#define QUICK_BUDGET_S	  1.0
#define RT_TICK_NS	  1000u /* real-time W2: 2^20 ticks ~ 1 s */
#define QUICK_RT_TICK_NS  100u
#define RT_MARGIN_NS	  (2 * NS_PER_MS)	      /* W2-advance sleeps this past the span */
#define RT_LIMIT_NS	  (10 * UINT64_C(1000000000)) /* "never": a run gives up */
#define FLOOR_LINE	  64u
#define FLOOR_MIN_LOADS	  (UINT64_C(1) << 20)
#define QUICK_FLOOR_LOADS (UINT64_C(1) << 16)
#define FLOOR_WORKLOAD	  "dep-load"
#define FALLBACK_BYTES	  ((double)sizeof(struct spoke_timer))
#define EST_GROWTH	  1.2 /* per 10x: allowance for falling out of cache */

/* libevent and libuv only if bench/CMakeLists.txt found them. */
static const struct peer_ops *const all_peers[] = {
	&peer_hierarchical, &peer_hashed,      &peer_lawn, &peer_service, &peer_binheap,
#if SPOKE_BENCH_LIBEVENT
	&peer_libevent,
#endif
#if SPOKE_BENCH_LIBUV
	&peer_libuv,
#endif
	&peer_timerfd,	    &peer_posix_timer,
};
#define NALL_PEERS (sizeof(all_peers) / sizeof(all_peers[0]))

enum workload_id { W1, W2_ADVANCE, W2_TICK, W3, NWORKLOADS };

static const char *const workload_names[NWORKLOADS] = {"W1", "W2-advance", "W2-tick", "W3"};

/* One run's subject. */
struct cell {
	const struct peer_ops *ops;
	uint64_t n;
	uint64_t rt_tick_ns;  /* real-time peers' W2 tick */
	double floor_bytes;   /* memory floor: buffer size */
	uint64_t floor_loads; /* memory floor: at least this many loads */
	enum workload_id w;
};

/* ---- the workloads (each run in a forked child) ------------------------ */

static bool real_time(const struct peer_ops *ops)
{
	return ops->clock == PEER_REAL_TIME;
}

/* Open the peer with ps and start its first nstart timers. */
static int open_started(const struct cell *c, unsigned run, const struct peer_setup *ps,
			size_t nstart, struct peer **pp, struct bench_rng *rng,
			struct bench_sample *out)
{
	int err;

	bench_rng_seed(rng, BENCH_SEED + run);
	err = c->ops->open(pp, c->ops, ps, out);
	if (err)
		return err;
	for (size_t i = 0; i < nstart; i++) {
		err = c->ops->start(*pp, i, bench_random_delay(bench_rng_next(rng)));
		if (err) {
			c->ops->close(*pp);
			return bench_fail(out, err < 0 ? err : -EIO, "start of timer %zu: %s", i,
					  strerror(err < 0 ? -err : EIO));
		}
	}
	return 0;
}

static int run_w1(void *arg, unsigned run, struct bench_sample *out)
{
	const struct cell *c = arg;
	const struct peer_ops *ops = c->ops;
	const uint32_t n = (uint32_t)c->n;
	const uint64_t pairs = bench_w1_pairs(c->n);
	const struct peer_setup ps = {.ntimers = (size_t)n + 1, .tick_ns = NS_PER_MS};
	const int fired_ok = real_time(ops) ? -ENOENT : 0; /* a stop that came too late */
	uint32_t spare = n;				   /* the one timer not pending */
	struct bench_rng rng;
	uint64_t t0, t1, t2;
	struct peer *p;
	int err, bad = 0;

	t0 = peers_real_now_ns();
	err = open_started(c, run, &ps, n, &p, &rng, out);
	if (err)
		return err;
	t1 = peers_real_now_ns();
	for (uint64_t i = 0; i < pairs; i++) {
		uint64_t x = bench_rng_next(&rng);
		uint32_t victim = bench_w1_victim(x, n, spare);
		int r;

		bad |= ops->start(p, spare, bench_random_delay(x));
		r = ops->stop(p, victim);
		bad |= r == fired_ok ? 0 : r;
		spare = victim;
	}
	t2 = peers_real_now_ns();
	if (bad)
		err = bench_fail(out, -EPROTO, "a start or stop failed");
	else if (!real_time(ops) && p->fired)
		err = bench_fail(out, -EPROTO, "%zu timers fired with the clock stopped", p->fired);
	ops->close(p);
	out->setup_ns = (double)(t1 - t0);
	out->timed_ns = (double)(t2 - t1);
	out->value = out->timed_ns / (double)pairs;
	return err;
}

static uint64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* W2 on a clock the bench steps: one advance(span) or span advance(1). */
static int w2_stepped(struct peer *p, bool tick_by_tick)
{
	int err = 0;

	if (!tick_by_tick)
		return p->ops->advance(p, BENCH_DELAY_SPAN_TICKS);
	for (uint64_t i = 0; i < BENCH_DELAY_SPAN_TICKS; i++)
		err |= p->ops->advance(p, 1);
	return err;
}

/*
 * W2 in real time, armed at armed_ns: either sleep past every deadline and
 * time draining all, or drain as they come and take the CPU time. Returns
 * the figure's total (ns) in *total_ns.
 */
static int w2_real_time(struct peer *p, const struct cell *c, uint64_t armed_ns, bool tick_by_tick,
			double *total_ns)
{
	uint64_t due = armed_ns + BENCH_DELAY_SPAN_TICKS * c->rt_tick_ns + RT_MARGIN_NS;
	uint64_t limit = due + RT_LIMIT_NS, now = peers_real_now_ns(), t1;
	int err = 0;

	if (tick_by_tick) {
		t1 = process_cpu_ns();
		while (!err && p->fired < c->n && peers_real_now_ns() < limit)
			err = p->ops->drain(p, true);
		*total_ns = (double)(process_cpu_ns() - t1);
		return err;
	}
	if (now < due)
		bench_sleep_ns(due - now);
	t1 = peers_real_now_ns();
	while (!err && p->fired < c->n) {
		size_t before = p->fired;

		err = p->ops->drain(p, false);
		if (!err && p->fired == before) /* not delivered yet: rare */
			err = peers_real_now_ns() < limit ? p->ops->drain(p, true) : -ETIME;
	}
	*total_ns = (double)(peers_real_now_ns() - t1);
	return err;
}

static int run_w2(const struct cell *c, unsigned run, struct bench_sample *out, bool tick_by_tick)
{
	const struct peer_ops *ops = c->ops;
	const struct peer_setup ps = {
		.ntimers = c->n,
		.tick_ns = real_time(ops) ? c->rt_tick_ns : NS_PER_MS,
		.fed_clock = !real_time(ops),
	};
	struct bench_rng rng;
	uint64_t t0, t1, t2;
	double total_ns = 0;
	struct peer *p;
	int err;

	t0 = peers_real_now_ns();
	err = open_started(c, run, &ps, c->n, &p, &rng, out);
	if (err)
		return err;
	t1 = peers_real_now_ns();
	if (real_time(ops)) {
		err = w2_real_time(p, c, t1, tick_by_tick, &total_ns);
	} else {
		err = w2_stepped(p, tick_by_tick);
		total_ns = (double)(peers_real_now_ns() - t1);
	}
	t2 = peers_real_now_ns();
	if (err)
		err = bench_fail(out, err < 0 ? err : -EIO, "%s failed: %s",
				 real_time(ops) ? "drain" : "advance",
				 strerror(err < 0 ? -err : EIO));
	else if (p->fired != c->n)
		err = bench_fail(out, -EPROTO, "%zu expiries handled, of %llu timers", p->fired,
				 (unsigned long long)c->n);
	ops->close(p);
	out->setup_ns = (double)(t1 - t0);
	out->timed_ns = (double)(t2 - t1);
	out->value = total_ns / (double)c->n;
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

/* System-wide slab memory (/proc/meminfo "Slab:"), bytes; -1 on error. */
static long slab_bytes(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Slab: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

/* What W3 counts: anonymous RSS, plus the slab for kernel timers. */
static long footprint(const struct peer_ops *ops)
{
	long rss = bench_rss_bytes(), slab = ops->kernel ? slab_bytes() : 0;

	return rss < 0 || slab < 0 ? -1 : rss + slab;
}

static int run_w3(void *arg, unsigned run, struct bench_sample *out)
{
	const struct cell *c = arg;
	const struct peer_setup ps = {.ntimers = c->n, .tick_ns = NS_PER_MS};
	struct bench_rng rng;
	long before, after;
	uint64_t t0, t1;
	struct peer *p;
	int err;

	malloc_trim(0); /* resident free heap would hide growth */
	before = footprint(c->ops);
	t0 = peers_real_now_ns();
	err = open_started(c, run, &ps, c->n, &p, &rng, out);
	if (err)
		return err;
	t1 = peers_real_now_ns();
	after = footprint(c->ops);
	c->ops->close(p);
	if (before < 0 || after < 0)
		return bench_fail(out, -EIO, "cannot read /proc/self/statm or /proc/meminfo");
	out->setup_ns = (double)(t1 - t0);
	out->value = (double)(after - before) / (double)c->n;
	return 0;
}

/* The memory floor: ns per dependent load along one random cycle of lines. */
static int run_floor(void *arg, unsigned run, struct bench_sample *out)
{
	const struct cell *c = arg;
	size_t lines = (size_t)(c->floor_bytes / FLOOR_LINE);
	uint64_t loads, t0, t1, t2;
	struct bench_rng rng;
	uint32_t *cycle;
	void **buf, **q;

	if (lines < 2)
		lines = 2;
	loads = lines > c->floor_loads ? lines : c->floor_loads;
	t0 = peers_real_now_ns();
	buf = aligned_alloc(FLOOR_LINE, lines * FLOOR_LINE);
	cycle = malloc(lines * sizeof(*cycle));
	if (!buf || !cycle) {
		free(buf);
		free(cycle);
		return bench_fail(out, -ENOMEM, "no memory for %zu lines", lines);
	}
	bench_rng_seed(&rng, BENCH_SEED + run);
	for (size_t i = 0; i < lines; i++)
		cycle[i] = (uint32_t)i;
	for (size_t i = lines - 1; i > 0; i--) { /* Sattolo: one cycle through all */
		size_t j = bench_below((uint32_t)bench_rng_next(&rng), (uint32_t)i);
		uint32_t tmp = cycle[i];

		cycle[i] = cycle[j];
		cycle[j] = tmp;
	}
	for (size_t i = 0; i < lines; i++)
		buf[i * (FLOOR_LINE / sizeof(void *))] =
			&buf[(size_t)cycle[i] * (FLOOR_LINE / sizeof(void *))];
	free(cycle);
	q = buf;
	for (size_t i = 0; i < lines; i++) /* once round, untimed */
		q = *q;
	t1 = peers_real_now_ns();
	for (uint64_t i = 0; i < loads; i++)
		q = *q;
	t2 = peers_real_now_ns();
	__asm__ volatile("" : : "r"(q)); /* the chase has a use */
	free(buf);
	out->setup_ns = (double)(t1 - t0);
	out->timed_ns = (double)(t2 - t1);
	out->value = out->timed_ns / (double)loads;
	return 0;
}

static bench_run_fn *const workload_runs[NWORKLOADS] = {
	[W1] = run_w1,
	[W2_ADVANCE] = run_w2_advance,
	[W2_TICK] = run_w2_tick,
	[W3] = run_w3,
};

static const char *unit_of(const struct peer_ops *ops, enum workload_id w)
{
	if (w == W3)
		return ops->kernel ? "B/timer RSS+slab" : "B/timer";
	if (w == W2_TICK && real_time(ops))
		return "CPU ns/op";
	return "ns/op";
}

/* ---- the plan, the caps, the results ----------------------------------- */

enum cell_state { CELL_NOT_RUN, CELL_DONE, CELL_SKIPPED, CELL_STOPPED, CELL_CAPPED, CELL_FAILED };

struct cell_result {
	enum cell_state state;
	struct bench_summary sum;
	char why[320]; /* when not done */
};

struct plan {
	unsigned runs;
	double budget_s;
	uint64_t rt_tick_ns;
	uint64_t floor_loads;
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	const struct peer_ops *peers[MAX_PEERS];
	size_t npeers;
	struct cell_result res[MAX_PEERS][NWORKLOADS][MAX_SIZES];
	struct cell_result floor[MAX_SIZES];
	struct bench_out out;
	bool failed;
};

/* Timed operations of w at n, for scaling the timed part of a run. */
static double timed_ops(enum workload_id w, uint64_t n)
{
	return (double)(w == W1 ? bench_w1_pairs(n) : n);
}

/* The part of a run that does not grow with n: real-time W2 waits out the span. */
static double fixed_ns(const struct plan *p, const struct peer_ops *ops, enum workload_id w)
{
	if (!real_time(ops) || (w != W2_ADVANCE && w != W2_TICK))
		return 0;
	return (double)(BENCH_DELAY_SPAN_TICKS * p->rt_tick_ns + RT_MARGIN_NS);
}

/* Estimated ns of one run at sizes[i] from the last size j < i that ran, or -1. */
static double estimate_run_ns(const struct plan *p, size_t s, enum workload_id w, size_t i)
{
	double fixed = fixed_ns(p, p->peers[s], w);

	for (long j = (long)i - 1; j >= 0; j--) {
		const struct cell_result *r = &p->res[s][w][j];
		double grow, timed;

		if (r->state != CELL_DONE)
			continue;
		grow = pow(EST_GROWTH, log10((double)p->sizes[i] / (double)p->sizes[j]));
		timed = r->sum.timed_ns > fixed ? r->sum.timed_ns - fixed : 0;
		return fixed +
		       grow * (r->sum.setup_ns * (double)p->sizes[i] / (double)p->sizes[j] +
			       timed * timed_ops(w, p->sizes[i]) / timed_ops(w, p->sizes[j]));
	}
	return -1;
}

/* Run (or skip) one cell; the row is printed by print_cell. */
static void run_cell(struct plan *p, size_t s, enum workload_id w, size_t i)
{
	struct cell_result *r = &p->res[s][w][i];
	const struct peer_ops *ops = p->peers[s];
	struct cell c = {.ops = ops, .n = p->sizes[i], .rt_tick_ns = p->rt_tick_ns, .w = w};
	char err[200], nb[32], nb0[32];
	double est;
	int rc;

	bench_fmt_count(nb, sizeof(nb), c.n);
	for (size_t j = 0; j < i; j++) {
		const struct cell_result *was = &p->res[s][w][j];

		bench_fmt_count(nb0, sizeof(nb0), p->sizes[j]);
		if (was->state == CELL_CAPPED) {
			r->state = CELL_CAPPED;
			snprintf(r->why, sizeof(r->why),
				 "%s at n=%s %s not run: its cap was reached at n=%s", ops->name,
				 nb, workload_names[w], nb0);
			return;
		}
		if (was->state == CELL_FAILED || was->state == CELL_STOPPED) {
			r->state = CELL_SKIPPED;
			snprintf(r->why, sizeof(r->why), "%s at n=%s %s not run: it %s at n=%s",
				 ops->name, nb, workload_names[w],
				 was->state == CELL_FAILED ? "failed"
							   : "was stopped over the budget",
				 nb0);
			return;
		}
	}
	est = estimate_run_ns(p, s, w, i);
	if (est > 0 && p->runs * est / 1e9 > p->budget_s) {
		r->state = CELL_SKIPPED;
		snprintf(r->why, sizeof(r->why),
			 "%s at n=%s %s would take ~%.0f s for %u runs (budget %g s)", ops->name,
			 nb, workload_names[w], p->runs * est / 1e9, p->runs, p->budget_s);
		return;
	}
	rc = bench_repeat(workload_runs[w], &c, p->runs, p->budget_s, &r->sum, err, sizeof(err));
	if (rc == 0) {
		r->state = CELL_DONE;
		return;
	}
	r->state = rc == PEER_CAP ? CELL_CAPPED : rc == -ETIMEDOUT ? CELL_STOPPED : CELL_FAILED;
	if (rc == PEER_CAP)
		snprintf(r->why, sizeof(r->why), "%s", err);
	else
		snprintf(r->why, sizeof(r->why), "%s at n=%s %s %s", ops->name, nb,
			 workload_names[w], err);
	if (r->state == CELL_FAILED)
		p->failed = true;
}

/* The smallest median of spoke's engines for w at sizes[i]; 0 if none ran. */
static double best_engine(const struct plan *p, enum workload_id w, size_t i)
{
	double best = 0;

	for (size_t s = 0; s < p->npeers; s++) {
		const struct cell_result *r = &p->res[s][w][i];

		if (p->peers[s]->spoke_engine && r->state == CELL_DONE &&
		    (best == 0 || r->sum.median < best))
			best = r->sum.median;
	}
	return best;
}

static double ratio_of(double v, double best)
{
	return best > 0 ? v / best : 0;
}

static void print_result(struct plan *p, const char *subject, const char *workload, size_t i,
			 const struct cell_result *r, const char *unit, double best)
{
	const char *kind = r->state == CELL_CAPPED   ? "cap"
			   : r->state == CELL_FAILED ? "error"
						     : "skipped";

	if (r->state == CELL_DONE)
		bench_out_result_ratio(&p->out, subject, workload, p->sizes[i], &r->sum, unit,
				       ratio_of(r->sum.median, best));
	else
		bench_out_note(&p->out, kind, subject, workload, p->sizes[i], r->why);
}

static void run_peer(struct plan *p, size_t s, size_t i, bool print)
{
	for (int w = 0; w < NWORKLOADS; w++) {
		run_cell(p, s, (enum workload_id)w, i);
		if (print)
			print_result(p, p->peers[s]->name, workload_names[w], i, &p->res[s][w][i],
				     unit_of(p->peers[s], (enum workload_id)w),
				     best_engine(p, (enum workload_id)w, i));
	}
}

/* The memory floor at sizes[i], sized by the best engine's W3 there. */
static void run_floor_cell(struct plan *p, size_t i)
{
	double bytes = best_engine(p, W3, i);
	struct cell c = {.n = p->sizes[i], .floor_loads = p->floor_loads};
	struct cell_result *r = &p->floor[i];
	char err[200], unit[64];
	int rc;

	if (bytes <= 0) /* no engine's W3 here */
		bytes = FALLBACK_BYTES;
	c.floor_bytes = bytes * (double)c.n;
	rc = bench_repeat(run_floor, &c, p->runs, p->budget_s, &r->sum, err, sizeof(err));
	r->state = rc == 0 ? CELL_DONE : rc == -ETIMEDOUT ? CELL_STOPPED : CELL_FAILED;
	if (rc) {
		snprintf(r->why, sizeof(r->why), "memory floor at n=%llu: %s",
			 (unsigned long long)c.n, err);
		p->failed |= r->state == CELL_FAILED;
	}
	snprintf(unit, sizeof(unit), "ns/load over N x %.0f B", bytes);
	print_result(p, "memory-floor", FLOOR_WORKLOAD, i, r, unit, best_engine(p, W1, i));
}

/* ---- reporting --------------------------------------------------------- */

static void summary_cell(FILE *f, const struct cell_result *r, double best)
{
	char buf[40];

	if (r->state != CELL_DONE) {
		fprintf(f, " %16s |",
			r->state == CELL_CAPPED	   ? "cap"
			: r->state == CELL_FAILED  ? "ERROR"
			: r->state == CELL_NOT_RUN ? "n/a"
						   : "skipped");
		return;
	}
	snprintf(buf, sizeof(buf), r->sum.median < 100 ? "%.1f" : "%.0f", r->sum.median);
	if (best > 0)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), " (%.2fx)",
			 r->sum.median / best);
	fprintf(f, " %16s |", buf);
}

/* Medians (ratio to the best engine) as one markdown table per workload. */
static void print_summary(const struct plan *p)
{
	FILE *f = p->out.f;

	for (int w = 0; w < NWORKLOADS; w++) {
		fprintf(f, "\n%s, median of %u runs (ratio to the best spoke engine)\n\n",
			workload_names[w], p->runs);
		bench_md_sizes_head(f, "peer", 12, p->sizes, p->nsizes, 16);
		for (size_t s = 0; s < p->npeers; s++) {
			fprintf(f, "| %-12s |", p->peers[s]->name);
			for (size_t i = 0; i < p->nsizes; i++)
				summary_cell(f, &p->res[s][w][i],
					     best_engine(p, (enum workload_id)w, i));
			fputc('\n', f);
		}
		if (w != W1)
			continue;
		fprintf(f, "| %-12s |", "memory-floor");
		for (size_t i = 0; i < p->nsizes; i++)
			summary_cell(f, &p->floor[i], best_engine(p, W1, i));
		fputc('\n', f);
	}
}

/* Raise a soft limit to its hard limit; the soft limit in effect. */
static unsigned long raise_limit(int resource)
{
	struct rlimit rl;

	if (getrlimit(resource, &rl) != 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(resource, &rl);
		(void)getrlimit(resource, &rl);
	}
	return (unsigned long)rl.rlim_cur;
}

static void print_header(struct plan *p, unsigned long nofile, unsigned long sigpending)
{
	char machine[256], nb0[32], nb1[32];

	bench_machine(machine, sizeof(machine));
	if (p->out.format == BENCH_JSON) {
		for (size_t s = 0; s < p->npeers; s++)
			bench_out_note(&p->out, "note", p->peers[s]->name, "setup", 0,
				       p->peers[s]->how);
		return;
	}
	printf("spoke-bench peers: N = %s .. %s outstanding timers, delays uniform in [1, 2^20) "
	       "ticks (seed %#llx),\n"
	       "median, min, max of %u runs; ratio = median / best spoke engine's median (same "
	       "workload and N).\n"
	       "Ticks: engines and binheap count ticks; libevent and libuv 1 ms on a fed clock; "
	       "service,\ntimerfd, posix-timer 1 ms in W1/W3 and %llu ns in W2, which runs in "
	       "real time.\n"
	       "Limits (soft raised to hard): RLIMIT_NOFILE %lu, RLIMIT_SIGPENDING %lu.\n"
	       "machine: %s\n\n",
	       bench_fmt_count(nb0, sizeof(nb0), p->sizes[0]),
	       bench_fmt_count(nb1, sizeof(nb1), p->sizes[p->nsizes - 1]),
	       (unsigned long long)BENCH_SEED, p->runs, (unsigned long long)p->rt_tick_ns, nofile,
	       sigpending, machine);
	for (size_t s = 0; s < p->npeers; s++)
		printf("  %-12s %s\n", p->peers[s]->name, p->peers[s]->how);
	printf("  %-12s dependent random loads over N x (best engine's W3 bytes per timer)\n\n",
	       "memory-floor");
	fprintf(p->out.f, "%-14s %-11s %5s %10s %10s %10s  %s\n", "peer", "workload", "n", "median",
		"min", "max", "unit  ratio");
	p->out.header_done = true;
}

/* ---- options ----------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: spoke-bench peers [options]\n"
		   "  spoke's engines and service beside a binary heap, libevent, libuv, timerfd\n"
		   "  and POSIX timers: W1 ns per (start, stop random) pair, W2 ns per fired\n"
		   "  timer (one advance, tick by tick), W3 bytes per timer, and a memory floor.\n"
		   "  --json          one JSON object per line instead of the table\n"
		   "  --runs K        runs per cell, median/min/max (default 5)\n"
		   "  --max-n N       largest N, a power of ten 1e3..1e7 (default 1e6)\n"
		   "  --quick         N = 1e3 only, 3 runs, budget 1 s, W2 real-time tick 100 ns,\n"
		   "                  2^16 floor loads (smoke test)\n"
		   "  --peer NAME     only this subject (repeatable; ratios need an engine)\n"
		   "  --budget SEC    skip a cell whose runs would take longer (default 30)\n");
}

static const struct peer_ops *find_peer(const char *name)
{
	for (size_t s = 0; s < NALL_PEERS; s++)
		if (strcmp(all_peers[s]->name, name) == 0)
			return all_peers[s];
	return NULL;
}

/* A peers option (bench_option_fn); ctx is the plan. */
static int peers_option(void *ctx, int opt, const char *arg)
{
	struct plan *p = ctx;
	const struct peer_ops *ops = find_peer(arg);

	(void)opt; /* --peer, its only option */
	if (!ops) {
		fprintf(stderr, "--peer: unknown peer '%s'\n", arg);
		return -1;
	}
	if (p->npeers < MAX_PEERS)
		p->peers[p->npeers++] = ops;
	return 0;
}

/* Fill the plan from argv. -1 to go on, or the exit status for main (usage or error). */
static int parse_options(struct plan *p, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"peer", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	struct bench_opts o;
	int rc = bench_parse_options(argc, argv, true, longopts, peers_option, p, usage, &o);

	if (rc >= 0)
		return rc;
	p->out = (struct bench_out){
		.f = stdout, .format = o.json ? BENCH_JSON : BENCH_TABLE, .subject_key = "peer"};
	p->runs = bench_opts_runs(&o, 3, 5);
	p->budget_s = o.budget_s > 0 ? o.budget_s : o.quick ? QUICK_BUDGET_S : DEFAULT_BUDGET_S;
	p->rt_tick_ns = o.quick ? QUICK_RT_TICK_NS : RT_TICK_NS;
	p->floor_loads = o.quick ? QUICK_FLOOR_LOADS : FLOOR_MIN_LOADS;
	p->nsizes = bench_grid_sizes(p->sizes, MAX_SIZES,
				     o.max_n   ? o.max_n
				     : o.quick ? 1000
					       : 1000000);
	if (p->nsizes == 0)
		return 2;
	for (size_t s = 0; p->npeers == 0 && s < NALL_PEERS; s++)
		p->peers[s] = all_peers[s];
	if (p->npeers == 0)
		p->npeers = NALL_PEERS;
	return -1;
}

/* ---- main -------------------------------------------------------------- */

static void peer_step(struct bench_progress *pr, const char *who, const char *n)
{
	char what[96];

	snprintf(what, sizeof(what), "%s n=%s", who, n);
	bench_progress_step(pr, what, peers_real_now_ns());
}

int bench_peers_main(int argc, char **argv)
{
	static struct plan plan;
	struct bench_progress progress;
	struct plan *p = &plan;
	uint64_t t0 = peers_real_now_ns();
	unsigned long nofile, sigpending;
	int rc;

	rc = parse_options(p, argc, argv);
	if (rc >= 0)
		return rc;
	nofile = raise_limit(RLIMIT_NOFILE);
	sigpending = raise_limit(RLIMIT_SIGPENDING);
	print_header(p, nofile, sigpending);

	/* a step: one peer's workloads at one size, or the memory floor at one */
	bench_progress_start(&progress, "spoke-bench peers", p->nsizes * (p->npeers + 1), t0);
	for (size_t i = 0; i < p->nsizes; i++) {
		char nb[32];

		bench_fmt_count(nb, sizeof(nb), p->sizes[i]);
		/* spoke's engines first: every other row's ratio needs their best */
		for (size_t s = 0; s < p->npeers; s++)
			if (p->peers[s]->spoke_engine) {
				run_peer(p, s, i, false);
				peer_step(&progress, p->peers[s]->name, nb);
			}
		for (size_t s = 0; s < p->npeers; s++)
			for (int w = 0; w < NWORKLOADS && p->peers[s]->spoke_engine; w++)
				print_result(p, p->peers[s]->name, workload_names[w], i,
					     &p->res[s][w][i],
					     unit_of(p->peers[s], (enum workload_id)w),
					     best_engine(p, (enum workload_id)w, i));
		run_floor_cell(p, i);
		peer_step(&progress, "memory floor", nb);
		for (size_t s = 0; s < p->npeers; s++)
			if (!p->peers[s]->spoke_engine) {
				run_peer(p, s, i, true);
				peer_step(&progress, p->peers[s]->name, nb);
			}
	}
	bench_progress_end(&progress);

	if (p->out.format == BENCH_TABLE)
		print_summary(p);
	fprintf(p->out.format == BENCH_TABLE ? stdout : stderr,
		"\nspoke-bench peers: wall time %.1f s\n",
		(double)(peers_real_now_ns() - t0) / 1e9);
	return p->failed ? 1 : 0;
}
