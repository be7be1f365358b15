/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_peers.c - `spoke-bench peers`: spoke beside the timers a server
 * would otherwise use, under the workloads of `spoke-bench schemes`, in one
 * invocation, with each figure's ratio to spoke's best engine.
 *
 * Subjects (peers.h has the table of operations; one file per family; the
 * runs of the workloads are in peers_run.c):
 *   hierarchical, hashed, lawn   spoke's engines (peers_spoke.c)
 *   hierarchical+clock           `hierarchical` plus one clock read per start
 *                                and per reset (W1 and reset-own only): the
 *                                least a service start must add
 *   service                      spoke's service, one shard attached to the
 *                                bench thread (peers_spoke.c): W1 is the
 *                                owner's path, spoke_start + spoke_cancel
 *                                with the ids kept by the caller
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
 *   reset-own   the idle-timeout pattern, a reset per request: start N
 *               timers (untimed), then time max(N, 1e5) resets of a random
 *               one to a random delay, on the owner's thread. ns per reset.
 *               Each peer resets its own way (peers.h): the engines stop +
 *               start, hierarchical+clock also reads the clock, libuv
 *               uv_timer_set_repeat + uv_timer_again, libevent evtimer_add,
 *               the kernel timers settime, the service spoke_reset. As in
 *               W1 the clocks stand still or the tick is 1 ms; a reset that
 *               finds its timer fired (-ENOENT) is accepted from the
 *               real-time peers alone.
 *   reset-foreign  the same resets from a thread that does not own the
 *               timers: only the service has such a path (an owner thread
 *               attaches its shard and runs a server's loop; the bench
 *               thread starts the N timers with spoke_start_on, waits until
 *               the owner has them, and resets). The single-threaded peers
 *               would need a lock or a queue of the caller's own: n/a.
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
 * and lawn for the same workload and N, in the same unit ("ratio" in JSON
 * with "ratio_basis" naming the unit, "1.00x" in the table): a row in ns/op
 * against the engines' ns/op; a row in CPU ns/op (the real-time peers'
 * W2-tick) against the engines' CPU time per op, which every run also
 * takes (CLOCK_PROCESS_CPUTIME_ID over its timed part); B/timer against
 * B/timer. The memory floor's row alone compares across units: ns per
 * dependent load / the best engine's W1 ns per pair, which is its point.
 * The table's goals at the end compare the service with what the owner's
 * path is measured against: hierarchical+clock, hierarchical, libuv.
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
#define FLOOR_MIN_LOADS	  (UINT64_C(1) << 20)
#define QUICK_FLOOR_LOADS (UINT64_C(1) << 16)
#define FLOOR_WORKLOAD	  "dep-load"
#define FALLBACK_BYTES	  ((double)sizeof(struct spoke_timer))
#define EST_GROWTH	  1.2 /* per 10x: allowance for falling out of cache */

/* libevent and libuv only if bench/CMakeLists.txt found them. */
static const struct peer_ops *const all_peers[] = {
	&peer_hierarchical, &peer_hashed,      &peer_lawn,
	&peer_engine_clock, &peer_service,     &peer_binheap,
#if SPOKE_BENCH_LIBEVENT
	&peer_libevent,
#endif
#if SPOKE_BENCH_LIBUV
	&peer_libuv,
#endif
	&peer_timerfd,	    &peer_posix_timer,
};
#define NALL_PEERS (sizeof(all_peers) / sizeof(all_peers[0]))

static const char *const workload_names[NWORKLOADS] = {"W1", "W2-advance", "W2-tick",
						       "W3", "reset-own",  "reset-foreign"};

/* Does this peer run w? */
static bool runs(const struct peer_ops *ops, workload_id w)
{
	return (ops->workloads ? ops->workloads : PEER_WL_DEFAULT) & PEER_WL(w);
}

/* A row's figure is CPU time (its ratio then compares CPU times). */
static bool cpu_figure(const struct peer_ops *ops, workload_id w)
{
	return w == W2_TICK && real_time(ops);
}

static const char *unit_of(const struct peer_ops *ops, workload_id w)
{
	if (w == W3)
		return ops->kernel ? "B/timer RSS+slab" : "B/timer";
	return cpu_figure(ops, w) ? "CPU ns/op" : "ns/op";
}

/* What a row's ratio compares: its unit, the engines' figure in it. */
static const char *basis_of(const struct peer_ops *ops, workload_id w)
{
	if (w == W3)
		return "B/timer";
	return cpu_figure(ops, w) ? "CPU ns/op" : "ns/op";
}

/* ---- the plan, the caps, the results ----------------------------------- */

enum cell_state { CELL_NOT_RUN, CELL_DONE, CELL_SKIPPED, CELL_STOPPED, CELL_CAPPED, CELL_FAILED };
/* (CELL_NOT_RUN stays for the workloads a peer does not have: "n/a".) */

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
static double timed_ops(workload_id w, uint64_t n)
{
	return (double)(w == W1 || w == RESET_OWN || w == RESET_FOREIGN ? bench_w1_pairs(n) : n);
}

/* The part of a run that does not grow with n: real-time W2 waits out the span. */
static double fixed_ns(const struct plan *p, const struct peer_ops *ops, workload_id w)
{
	if (!real_time(ops) || (w != W2_ADVANCE && w != W2_TICK))
		return 0;
	return (double)(BENCH_DELAY_SPAN_TICKS * p->rt_tick_ns + RT_MARGIN_NS);
}

/* Estimated ns of one run at sizes[i] from the last size j < i that ran, or -1. */
static double estimate_run_ns(const struct plan *p, size_t s, workload_id w, size_t i)
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
static void run_cell(struct plan *p, size_t s, workload_id w, size_t i)
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
	rc = bench_repeat(peers_workload_runs[w], &c, p->runs, p->budget_s, &r->sum, err,
			  sizeof(err));
	if (rc == 0) {
		r->state = CELL_DONE;
		return;
	}
	r->state = rc == PEER_CAP				 ? CELL_CAPPED
		   : rc == -ETIMEDOUT || rc == BENCH_OVER_BUDGET ? CELL_STOPPED
								 : CELL_FAILED;
	if (rc == PEER_CAP)
		snprintf(r->why, sizeof(r->why), "%s", err);
	else
		snprintf(r->why, sizeof(r->why), "%s at n=%s %s %s", ops->name, nb,
			 workload_names[w], err);
	if (r->state == CELL_FAILED)
		p->failed = true;
}

/*
 * The smallest median of spoke's engines for w at sizes[i] (their CPU
 * medians with `cpu`); 0 if none ran.
 */
static double best_engine_in(const struct plan *p, workload_id w, size_t i, bool cpu)
{
	double best = 0;

	for (size_t s = 0; s < p->npeers; s++) {
		const struct cell_result *r = &p->res[s][w][i];
		double v = cpu ? r->sum.cpu_median : r->sum.median;

		if (p->peers[s]->spoke_engine && r->state == CELL_DONE && v > 0 &&
		    (best == 0 || v < best))
			best = v;
	}
	return best;
}

static double best_engine(const struct plan *p, workload_id w, size_t i)
{
	return best_engine_in(p, w, i, false);
}

/* A row's ratio: to the best engine's figure in the row's own unit. */
static double ratio_like(const struct plan *p, const struct peer_ops *ops, workload_id w, size_t i,
			 double v)
{
	double best = best_engine_in(p, w, i, cpu_figure(ops, w));

	return best > 0 ? v / best : 0;
}

/* A row: its figure and ratio (ratio 0: none), or the note of a cell that did not run. */
static void print_row(struct plan *p, const char *subject, const char *workload, size_t i,
		      const struct cell_result *r, const char *unit, double ratio,
		      const char *basis)
{
	const char *kind = r->state == CELL_CAPPED   ? "cap"
			   : r->state == CELL_FAILED ? "error"
						     : "skipped";

	if (r->state == CELL_DONE)
		bench_out_result_ratio(&p->out, subject, workload, p->sizes[i], &r->sum, unit,
				       ratio, basis);
	else if (r->state != CELL_NOT_RUN)
		bench_out_note(&p->out, kind, subject, workload, p->sizes[i], r->why);
}

/* Peer s's row of w at sizes[i]. */
static void print_result(struct plan *p, size_t s, workload_id w, size_t i)
{
	const struct peer_ops *ops = p->peers[s];
	const struct cell_result *r = &p->res[s][w][i];

	print_row(p, ops->name, workload_names[w], i, r, unit_of(ops, w),
		  ratio_like(p, ops, w, i, r->sum.median), basis_of(ops, w));
}

static void run_peer(struct plan *p, size_t s, size_t i, bool print)
{
	for (int w = 0; w < NWORKLOADS; w++) {
		if (!runs(p->peers[s], (workload_id)w))
			continue;
		run_cell(p, s, (workload_id)w, i);
		if (print)
			print_result(p, s, (workload_id)w, i);
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
	rc = bench_repeat(peers_run_floor, &c, p->runs, p->budget_s, &r->sum, err, sizeof(err));
	r->state = rc == 0					 ? CELL_DONE
		   : rc == -ETIMEDOUT || rc == BENCH_OVER_BUDGET ? CELL_STOPPED
								 : CELL_FAILED;
	if (rc) {
		snprintf(r->why, sizeof(r->why), "memory floor at n=%llu: %s",
			 (unsigned long long)c.n, err);
		p->failed |= r->state == CELL_FAILED;
	}
	snprintf(unit, sizeof(unit), "ns/load over N x %.0f B", bytes);
	print_row(p, "memory-floor", FLOOR_WORKLOAD, i, r, unit,
		  best_engine(p, W1, i) > 0 ? r->sum.median / best_engine(p, W1, i) : 0,
		  "W1 ns/op");
}

/* ---- reporting --------------------------------------------------------- */

static void summary_cell(FILE *f, const struct cell_result *r, double ratio)
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
	if (ratio > 0)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), " (%.2fx)", ratio);
	fprintf(f, " %16s |", buf);
}

/* Medians (ratio to the best engine) as one markdown table per workload. */
static void print_summary(const struct plan *p)
{
	FILE *f = p->out.f;

	for (int w = 0; w < NWORKLOADS; w++) {
		fprintf(f,
			"\n%s, median of %u runs (ratio to the best spoke engine, same unit)\n\n",
			workload_names[w], p->runs);
		bench_md_sizes_head(f, "peer", 18, p->sizes, p->nsizes, 16);
		for (size_t s = 0; s < p->npeers; s++) {
			if (!runs(p->peers[s], (workload_id)w))
				continue;
			fprintf(f, "| %-18s |", p->peers[s]->name);
			for (size_t i = 0; i < p->nsizes; i++) {
				const struct cell_result *r = &p->res[s][w][i];

				summary_cell(f, r,
					     ratio_like(p, p->peers[s], (workload_id)w, i,
							r->sum.median));
			}
			fputc('\n', f);
		}
		if (w != W1)
			continue;
		fprintf(f, "| %-18s |", "memory-floor");
		for (size_t i = 0; i < p->nsizes; i++)
			summary_cell(f, &p->floor[i],
				     best_engine(p, W1, i) > 0
					     ? p->floor[i].sum.median / best_engine(p, W1, i)
					     : 0);
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
	       "median, min, max of %u runs; ratio = median / best spoke engine's median, same "
	       "workload, N and unit:\n"
	       "ns/op rows against the engines' ns/op, CPU ns/op rows against the engines' CPU "
	       "time per op\n(taken in the same runs), B/timer against B/timer; memory-floor: "
	       "ns/load against the best W1 ns/op.\n"
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
		"min", "max", "unit  ratio (same unit)");
	p->out.header_done = true;
}

/* ---- the owner's path: its goals ---------------------------------------- */

/* The index of the peer named name in the plan, or -1. */
static long plan_peer(const struct plan *p, const char *name)
{
	for (size_t s = 0; s < p->npeers; s++)
		if (strcmp(p->peers[s]->name, name) == 0)
			return (long)s;
	return -1;
}

/* Median of peer `name`'s w at sizes[i], 0 if it did not run there. */
static double median_of(const struct plan *p, const char *name, workload_id w, size_t i)
{
	long s = plan_peer(p, name);

	return s >= 0 && p->res[s][w][i].state == CELL_DONE ? p->res[s][w][i].sum.median : 0;
}

/* A goal: "- <what> at n=1e3: 1.23x (a vs b ns) - met" when both ran. */
static void goal_line(const struct plan *p, const char *what, size_t i, double a, double b,
		      double limit)
{
	char nb[32];

	if (a <= 0 || b <= 0)
		return;
	fprintf(p->out.f, "- %s at n=%s: %.2fx (%.1f vs %.1f ns) - %s\n", what,
		bench_fmt_count(nb, sizeof(nb), p->sizes[i]), a / b, a, b,
		a / b <= limit ? "met" : "NOT met");
}

/*
 * The goals of the owner's path (an attached shard's own thread: plain
 * spoke_start + spoke_cancel with the ids kept by the caller, W1; and
 * spoke_reset, reset-own), against the rows they are stated on.
 */
static void print_goals(const struct plan *p)
{
	fprintf(p->out.f,
		"\nThe owner's path (service: an attached shard's own thread), goals\n\n");
	for (size_t i = 0; i < p->nsizes; i++) {
		double svc = median_of(p, "service", W1, i);

		if (i == 0)
			goal_line(p, "W1 at most 1.3x hierarchical+clock", i, svc,
				  median_of(p, "hierarchical+clock", W1, i), 1.3);
		goal_line(p, "W1 at most 0.5x libuv", i, svc, median_of(p, "libuv", W1, i), 0.5);
		if (p->sizes[i] == 1000000)
			goal_line(p, "W1 at most 2.5x hierarchical", i, svc,
				  median_of(p, "hierarchical", W1, i), 2.5);
		goal_line(p, "reset-own at most 1.3x hierarchical+clock", i,
			  median_of(p, "service", RESET_OWN, i),
			  median_of(p, "hierarchical+clock", RESET_OWN, i), 1.3);
	}
}

/* ---- options ----------------------------------------------------------- */

static const struct peer_ops *find_peer(const char *name)
{
	for (size_t s = 0; s < NALL_PEERS; s++)
		if (strcmp(all_peers[s]->name, name) == 0)
			return all_peers[s];
	return NULL;
}

/* "one of hierarchical, hashed, ..." (the peers built into this binary) */
static const char *peer_list(void)
{
	char buf[256];
	size_t len = 0;

	for (size_t s = 0; s < NALL_PEERS && len < sizeof(buf); s++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
					len ? ", " : "one of ", all_peers[s]->name);
	return bench_opts_why("%s", buf);
}

static struct plan plan;
static struct bench_opts common;

/* A peers option (bench_option_fn); ctx is the plan. */
static const char *peers_option(void *ctx, int key, const char *arg)
{
	struct plan *p = ctx;
	const struct peer_ops *ops = find_peer(arg);

	(void)key; /* --peer, its only option */
	if (!ops)
		return peer_list();
	if (p->npeers < MAX_PEERS)
		p->peers[p->npeers++] = ops;
	return NULL;
}

static const struct bench_option peers_options[] = {
	BENCH_OPT_JSON,
	BENCH_OPT_QUICK("N = 1e3 only, 3 runs, budget 1 s, W2 real-time tick 100 ns, 2^16\n"
			"floor loads (the smoke test)"),
	BENCH_OPT_RUNS("5; 3 with --quick"),
	BENCH_OPT_MAX_N("1e6; 1e3 with --quick"),
	BENCH_OPT_BUDGET("30 s; 1 s with --quick"),
	{"peer", 's', "NAME",
	 "only this subject (repeatable; ratios need an engine): hierarchical\n"
	 "hashed lawn hierarchical+clock service binheap libevent libuv timerfd\n"
	 "posix-timer (libevent, libuv: where they were found at build time)",
	 "all"},
	BENCH_OPT_END,
};

const struct bench_cmd bench_peers_cmd = {
	.name = "spoke-bench peers",
	.about = "spoke's engines and service beside a binary heap, libevent, libuv, timerfd\n"
		 "and POSIX timers: W1 ns per (start, stop random) pair, W2 ns per fired\n"
		 "timer (one advance, tick by tick), W3 bytes per timer, reset-own and\n"
		 "reset-foreign ns per reset, and a memory floor (bench/bench_peers.c).",
	.options = peers_options,
	.handle = peers_option,
	.ctx = &plan,
	.common = &common,
};

/* Fill the plan from argv. -1 to go on, or the exit status for main (usage or error). */
static int parse_options(struct plan *p, int argc, char **argv)
{
	const struct bench_opts *o = &common;
	int rc = bench_cmd_parse(&bench_peers_cmd, argc, argv);

	if (rc >= 0)
		return rc;
	p->out = (struct bench_out){
		.f = stdout, .format = o->json ? BENCH_JSON : BENCH_TABLE, .subject_key = "peer"};
	p->runs = bench_opts_runs(o, 3, 5);
	p->budget_s = o->budget_s > 0 ? o->budget_s : o->quick ? QUICK_BUDGET_S : DEFAULT_BUDGET_S;
	p->rt_tick_ns = o->quick ? QUICK_RT_TICK_NS : RT_TICK_NS;
	p->floor_loads = o->quick ? QUICK_FLOOR_LOADS : FLOOR_MIN_LOADS;
	p->nsizes = bench_grid_sizes(p->sizes, MAX_SIZES,
				     o->max_n	? o->max_n
				     : o->quick ? 1000
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
				if (runs(p->peers[s], (workload_id)w))
					print_result(p, s, (workload_id)w, i);
		run_floor_cell(p, i);
		peer_step(&progress, "memory floor", nb);
		for (size_t s = 0; s < p->npeers; s++)
			if (!p->peers[s]->spoke_engine) {
				run_peer(p, s, i, true);
				peer_step(&progress, p->peers[s]->name, nb);
			}
	}
	bench_progress_end(&progress);

	if (p->out.format == BENCH_TABLE) {
		print_summary(p);
		print_goals(p);
	}
	fprintf(p->out.format == BENCH_TABLE ? stdout : stderr,
		"\nspoke-bench peers: wall time %.1f s\n",
		(double)(peers_real_now_ns() - t0) / 1e9);
	return p->failed ? 1 : 0;
}
