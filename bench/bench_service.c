/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_service.c - `spoke-bench service`: the multicore timer service
 * (include/spoke/spoke.h) under load, beside what it replaces: the same
 * `hierarchical` engine bare (one thread, no service), and the same engine
 * behind one global pthread mutex.
 *
 * T is each --threads value (default 1, 2, 4). On a 2-CPU machine T = 4
 * oversubscribes the CPUs (two busy threads per CPU): that is on purpose,
 * and its rows say what a service costs when it has more threads than cores.
 * Every thread the bench creates is pinned to CPU index % CPUs; the service
 * pins its own shard threads (shard k on CPU k % CPUs, its default).
 *
 * The workloads (each row is one workload at one T):
 *
 *   own-start-cancel    (a) T threads, service with T shards, thread i
 *                       spoke_attach()es shard i and times start (delay 1 s,
 *                       so nothing fires) + cancel pairs on it - the direct
 *                       path, no message - calling spoke_poll every 4096
 *                       pairs. Callbacks 0 (attached shards run them inline).
 *   engine-start-stop   (a) in the same forked run, before the above: the
 *                       bare `hierarchical` engine, one per thread, timing
 *                       spoke_engine_start(1000 ticks = 1 s at the 1 ms tick)
 *                       + spoke_engine_stop of one intrusive timer. The
 *                       own-start-cancel row's ratio is service / bare,
 *                       taken per run, median of the runs.
 *   engine-clock-start-stop (a) the same run, between the two: the bare
 *                       engine plus one spoke_now_ns() per pair, the least
 *                       a start must add (contract line 2 needs the time of
 *                       each start). The own-start-cancel note and the goal
 *                       line also give service / this.
 *   cross-start-cancel  (b) service with one managed shard per CPU. T
 *                       producer threads (not attached) do spoke_start_on(
 *                       the shard of the other CPU, 1 s) + spoke_cancel
 *                       pairs: the producer pays a CAS-published start, the
 *                       inbox enqueue and the cancel CAS; the shard threads
 *                       unlink and free. After the window the bench waits
 *                       until the shards drained (started == cancelled ==
 *                       pairs, none pending), untimed.
 *   mutex-start-stop    (b) baseline: one `hierarchical` engine behind one
 *                       global pthread mutex (default type), a ticker thread
 *                       that locks it and advances it every 1 ms tick, and T
 *                       producers doing lock; engine_start(own timer, 1 s);
 *                       unlock; lock; engine_stop; unlock. No clock read on
 *                       the producer (the service reads it on every start).
 *   cross-start         (b) start only: N starts in all (1e6, split over the
 *                       T producers) with a 1 h delay on the other CPU's
 *                       shard, timed on each producer; the timers are left
 *                       pending (spoke_destroy frees them). Before the
 *                       window each producer starts and cancels as many, so
 *                       the timed starts reuse handles, as in a steady
 *                       state. The note gives when the shards had them all
 *                       in their wheels.
 *   mutex-start         (b) baseline: the same N starts into the mutex
 *                       engine (intrusive timers, pre-touched).
 *   reset-own           (c) idle timeouts, the keep-alive server's reset per
 *                       request: T threads, service with T shards, thread i
 *                       attaches shard i, starts N / T timers on it (N =
 *                       1e5, delay 1 s, ids kept) and times spoke_reset(a
 *                       random one of them, 1 s), calling spoke_poll every
 *                       4096 resets. Callbacks inline.
 *   engine-clock-reset  (c) in the same forked run, before the above: the
 *                       bare `hierarchical` engine, one per thread, N / T
 *                       timers pending (1000 ticks): spoke_now_ns() +
 *                       spoke_engine_stop + spoke_engine_start(1000 ticks)
 *                       of a random one, what a reset is at its least. The
 *                       reset-own row's ratio is service / this, per run.
 *   reset-foreign       (c) the same timers reset by other threads: a shard
 *                       per CPU, each attached by an owner thread that runs
 *                       a server's loop (sleep on spoke_wake_fd until the
 *                       next deadline, spoke_poll; bench_svc.c), N timers
 *                       started from the main thread on the shards in turn;
 *                       T threads (no shard of their own) spoke_reset(a
 *                       random one, 1 s).
 *   mutex-reset         (c) baseline: the same with engine_start (re-arm) of
 *                       a random pending timer of the mutex engine.
 *   fire-inline         (d) T shards (managed), N = 1e6 timers started from
 *                       one thread with the same absolute deadline (the
 *                       middle of a 10 ms tick, so each shard fires its share
 *                       in one turn), callback_threads = 0: the shard threads
 *                       run the callbacks. ns/op is wall time from the first
 *                       callback to the last per callback (of the whole
 *                       service, not per thread); ops/s its inverse. The
 *                       callback bumps a per-thread counter.
 *   fire-pool           (d) the same through a pool of 2 callback threads.
 *   lateness            bench_late_run() (bench_latency.c, where the run
 *                       and lateness are defined), no load: default config
 *                       (a shard per CPU, a pool of one callback thread per
 *                       shard), tick 1 ms and 100 us; P = 1e3, 1e5, 1e6
 *                       pending timers (delays 5 s .. 600 s, all in the
 *                       wheels before the window) and, for 0.5 s, a stream
 *                       from the main thread of timers on the shards in turn
 *                       with delays 1 ms .. 5 ms (4 per ~100 us sleep), whose
 *                       callback records its time - (time read just before
 *                       spoke_start_on + delay). p50/p99/p99.9/max in us of
 *                       all samples of a run, median of the runs. A negative
 *                       lateness (a callback before its deadline) fails the
 *                       run. `spoke-bench latency` has the whole grid.
 *   memory              RSS growth / N for N = 1e6 timers pending (1 h),
 *                       started from one thread on the shards in turn; RSS
 *                       is read after spoke_create and one start + cancel
 *                       (so the thread's arena exists), and once all N are
 *                       in the wheels.
 *
 * Numbers: for the throughput rows, ns/op is thread-time per op, the sum
 * over threads of each one's timed wall time divided by the ops of all of
 * them: at T <= CPUs it is the latency of one op as one thread sees it.
 * cpu-ns/op is the same with each thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
 * it leaves out time spent descheduled (oversubscription, a mutex sleep).
 * ops/s is all ops over the window (first thread's start to last thread's
 * end). An op is a pair for the *-start-cancel/-stop rows, one start,
 * reset or fired callback otherwise. n is the ops timed per run (median),
 * the pending timers for reset, the timers fired for fire-*. Windows are
 * fixed durations (0.2 s; threads look at a stop flag every 64 ops), except
 * for cross-start / mutex-start (fixed counts).
 *
 * Each measurement runs in a freshly forked child (bench_repeat): median,
 * min and max of 5 runs (3 with --quick). What a run reports beside its main
 * figure travels back through a shared anonymous mapping, one slot per run.
 * A run checks the service's counters (spoke_stats) against what it did
 * and fails with the difference, so a lost or duplicated timer shows up as
 * an error row, and the exit status is 1.
 *
 * Other load: every row also records the share of all CPUs that other
 * processes used while its runs went on (/proc/stat busy time minus this
 * process and its children); the table flags rows above 5%, JSON rows carry
 * other_load_pct. On a 2-CPU machine a neighbour's build moves every figure.
 *
 * Stalls. A thread the machine keeps off its CPU for longer than a delay
 * (1 s for the pairs and the resets) lets the timer fire: the cancel that
 * comes too late returns -ENOENT, the reset too. That is counted (JSON
 * "lost", "enoent"), never an error: every run accounts for each timer it
 * started - it ended in one way, a cancel that won or a callback (counted)
 * - and fails only when that does not add up. Resets are checked the same
 * way: after the window every timer is cancelled, and a cancel that finds
 * its timer gone must match a callback.
 *
 * --quick: N = 1e4 (5e3 fired), 10 ms windows, pending 1e3 and 1e4, 3 runs:
 * a smoke test (ctest bench.service.quick) that also runs under the
 * sanitizers (~15 s under TSan on 2 CPUs).
 */
#define _GNU_SOURCE
#include "service_plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

struct extra *extras;
struct team team;
_Atomic uint64_t stall_fires;

/* ---- what the families share (service.h) --------------------------------- */

void team_init(struct team *tm, const struct job *j, unsigned run)
{
	memset(tm, 0, sizeof(*tm));
	tm->base.T = j->T;
	tm->base.pin = true;
	tm->base.threads = tm->w;
	tm->base.stride = sizeof(tm->w[0]);
	for (unsigned i = 0; i < j->T; i++) {
		bench_rng_seed(&tm->w[i].rng, SERVICE_SEED + 1000 * run + i);
		tm->w[i].stall_ns = j->stall_ns;
	}
	atomic_store(&stall_fires, 0);
}

int team_run(struct team *tm, uint64_t window_ns, bench_between_fn *between, struct team_result *r,
	     struct bench_sample *out)
{
	struct bench_team_result br;
	int err = bench_team_run(&tm->base, window_ns, between, tm, &br, out);

	memset(r, 0, sizeof(*r));
	for (unsigned i = 0; i < tm->base.T; i++) {
		r->enoent += tm->w[i].enoent;
		r->lost += tm->w[i].lost;
	}
	r->ops = br.ops;
	r->window_ns = br.window_ns;
	r->thread_ns = br.thread_ns;
	r->cpu_ns = br.cpu_ns;
	r->first_t0 = br.first_t0;
	return err;
}

void set_counts(struct team *tm, uint64_t n)
{
	unsigned T = tm->base.T;

	for (unsigned i = 0; i < T; i++)
		tm->w[i].count = n / T + (i == 0 ? n % T : 0);
}

void report_ops(struct bench_sample *out, struct extra *x, const struct team_result *r)
{
	out->value = bench_per_op(r->thread_ns, r->ops);
	out->timed_ns = r->window_ns;
	x->v[X_OPS] = (double)r->ops;
	x->v[X_OPS_PER_S] = r->window_ns > 0 ? (double)r->ops * 1e9 / r->window_ns : 0;
	x->v[X_CPU_NS] = bench_per_op(r->cpu_ns, r->ops);
	x->v[X_ENOENT] = (double)r->enoent;
	x->v[X_LOST] = (double)r->lost;
}

void report_baseline(struct extra *x, enum extra_id first, const struct team_result *r)
{
	x->v[first] = bench_per_op(r->thread_ns, r->ops);
	x->v[first + 1] = r->window_ns > 0 ? (double)r->ops * 1e9 / r->window_ns : 0;
	x->v[first + 2] = bench_per_op(r->cpu_ns, r->ops);
	x->v[first + 3] = (double)r->ops;
}

int create_service(struct spoke **s, unsigned shards, unsigned callbacks, unsigned per_shard,
		   uint64_t tick_ns, struct bench_sample *out)
{
	struct spoke_config cfg;

	spoke_config_init(&cfg);
	if (shards)
		cfg.shards = shards;
	cfg.callback_threads = callbacks;
	cfg.callback_threads_per_shard = per_shard;
	cfg.tick_ns = tick_ns;
	/*
	 * No backpressure: a producer that outruns its shard for a whole window
	 * (a loaded machine, or T above the CPUs) would meet the default limit
	 * and see -ENOBUFS. Its check costs the same with any limit.
	 */
	cfg.inbox_limit = 0;
	return bench_svc_create(s, &cfg, out);
}

/* ---- how busy the machine was with other work ---------------------------- */

/*
 * CPU seconds: all CPUs busy (/proc/stat: everything but idle and iowait,
 * steal included: a vCPU the hypervisor ran something else on), and this
 * process with its reaped children (every forked run). Their difference
 * over a measurement is what other processes took meanwhile.
 */
struct load_mark {
	double busy_s, own_s, wall_s;
};

static void load_mark(struct load_mark *m)
{
	unsigned long long v[8] = {0};
	struct rusage self, kids;
	double hz = (double)sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");

	m->busy_s = -1;
	if (f) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
			m->busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
		fclose(f);
	}
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	m->own_s = (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
			    kids.ru_stime.tv_sec) +
		   (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec +
			    kids.ru_stime.tv_usec) /
			   1e6;
	m->wall_s = (double)bench_now_ns() / 1e9;
}

/* Share of all CPUs other processes used since `a` (0..1), or -1 if unknown. */
static double other_load(const struct load_mark *a)
{
	struct load_mark b;
	double other;

	load_mark(&b);
	if (a->busy_s < 0 || b.busy_s < 0 || b.wall_s <= a->wall_s)
		return -1;
	other = (b.busy_s - a->busy_s) - (b.own_s - a->own_s);
	other /= (b.wall_s - a->wall_s) * bench_ncpus();
	return other < 0 ? 0 : other > 1 ? 1 : other;
}

/* ---- the plan and its rows ----------------------------------------------- */

static bench_run_fn *const wl_run[NWL] = {
	[W_OWN] = run_own,
	[W_CROSS_PAIR] = run_cross_pair,
	[W_MUTEX_PAIR] = run_mutex,
	[W_CROSS_START] = run_cross_start,
	[W_MUTEX_START] = run_mutex,
	[W_RESET_OWN] = run_reset_own,
	[W_RESET_FOREIGN] = run_reset_foreign,
	[W_MUTEX_RESET] = run_mutex,
	[W_FIRE_INLINE] = run_fire,
	[W_FIRE_POOL] = run_fire,
	[W_LATENESS] = run_lateness,
	[W_MEMORY] = run_memory,
};

const char *const wl_name[NWL] = {
	[W_OWN] = "own-start-cancel",	     [W_CROSS_PAIR] = "cross-start-cancel",
	[W_MUTEX_PAIR] = "mutex-start-stop", [W_CROSS_START] = "cross-start",
	[W_MUTEX_START] = "mutex-start",     [W_RESET_OWN] = "reset-own",
	[W_RESET_FOREIGN] = "reset-foreign", [W_MUTEX_RESET] = "mutex-reset",
	[W_FIRE_INLINE] = "fire-inline",     [W_FIRE_POOL] = "fire-pool",
	[W_LATENESS] = "lateness",	     [W_MEMORY] = "memory",
};

static const struct scale scales[2] = {
	{
		.limit_s = 90,
		.window_ns = 200 * NS_PER_MS,
		.start_n = 1000000,
		.reset_n = 100000,
		.fire_n = 1000000,
		.mem_n = 1000000,
		.late_window_ns = 500 * NS_PER_MS,
		.late_pending = {1000, 100000, 1000000},
		.nlate = 3,
	},
	{
		.limit_s = 15,
		.window_ns = 10 * NS_PER_MS,
		.start_n = 10000,
		.reset_n = 10000,
		.fire_n = 5000,
		.mem_n = 10000,
		.late_window_ns = 40 * NS_PER_MS,
		.late_pending = {1000, 10000},
		.nlate = 2,
	},
};

static struct stat3 extra_stat(unsigned runs, int id)
{
	double v[BENCH_MAX_RUNS];

	for (unsigned r = 0; r < runs; r++)
		v[r] = extras[r].v[id];
	bench_median(v, runs); /* sorts */
	return (struct stat3){bench_median(v, runs), v[0], v[runs - 1]};
}

static struct row *new_row(struct plan *p, enum row_kind kind, const char *name, unsigned T)
{
	struct row *r = &p->rows[p->nrows++];

	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->workload = name;
	r->T = T;
	r->runs = p->runs;
	return r;
}

/* Run one series of forked runs into a new row. */
static struct row *run_series(struct plan *p, const struct job *job, enum row_kind kind)
{
	struct job jj = *job, *j = &jj;
	struct row *r = new_row(p, kind, wl_name[j->w], j->T);
	struct bench_summary sum;
	struct load_mark m;
	char err[240];
	int rc;

	jj.stall_ns = p->stall_test_ns;
	memset(extras, 0, BENCH_MAX_RUNS * sizeof(*extras));
	load_mark(&m);
	rc = bench_repeat(wl_run[j->w], j, p->runs,
			  p->sc.limit_s + (double)p->runs * j->stall_ns / 1e9, &sum, err,
			  sizeof(err));
	r->other = other_load(&m);
	if (rc) {
		snprintf(r->error, sizeof(r->error), "%s", err);
		/* Too slow for its budget on this machine now: skipped, not failed. */
		r->skipped = rc == BENCH_OVER_BUDGET;
		p->failed |= !r->skipped;
		return r;
	}
	r->ok = true;
	r->v = (struct stat3){sum.median, sum.min, sum.max};
	for (int i = 0; i < NX; i++)
		r->x[i] = extra_stat(p->runs, i);
	r->n = (uint64_t)llround(r->x[X_OPS].med);
	return r;
}

/* Append to a row's note. */
static void note_add(struct row *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_add(struct row *r, const char *fmt, ...)
{
	size_t len = strlen(r->note);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->note + len, sizeof(r->note) - len, fmt, ap);
	va_end(ap);
}

/* The note of a row whose thread stalled past a delay: what it counted. */
static void note_stalls(struct row *r)
{
	if (r->x[X_LOST].max > 0)
		note_add(r, "; cancels lost to a fire (a stall) %.0f", r->x[X_LOST].med);
	if (r->x[X_ENOENT].max > 0)
		note_add(r, "; resets that found it fired %.0f", r->x[X_ENOENT].med);
}

static void set_ratio(struct row *r, const struct row *base)
{
	if (!r->ok || !base->ok)
		return;
	r->baseline = base->workload;
	r->ratio = r->v.med / base->v.med;
	snprintf(r->note, sizeof(r->note), "%.2fx %s", r->ratio, base->workload);
}

/* ---- the workloads in order ---------------------------------------------- */

/*
 * A row of a baseline measured inside the own-start-cancel runs: its extras
 * start at `first` (ns, ops/s, CPU ns, ops, in that order).
 */
static struct row *own_baseline_row(struct plan *p, const struct row *r, const char *name,
				    enum extra_id first, const char *note)
{
	struct row *b = new_row(p, ROW_OPS, name, r->T);

	b->ok = r->ok;
	b->other = r->other;
	if (!r->ok) {
		snprintf(b->error, sizeof(b->error), "see %s", r->workload);
		return b;
	}
	b->v = r->x[first];
	b->x[X_OPS_PER_S] = r->x[first + 1];
	b->x[X_CPU_NS] = r->x[first + 2];
	b->n = (uint64_t)llround(r->x[first + 3].med);
	snprintf(b->note, sizeof(b->note), "%s", note);
	return b;
}

static void do_own(struct plan *p, unsigned T)
{
	struct job j = {.w = W_OWN, .T = T, .window_ns = p->sc.window_ns};
	struct row *r = run_series(p, &j, ROW_OPS), *b, *c;

	r->shards = T;
	b = own_baseline_row(p, r, BARE_NAME, X_BASE_NS, "bare engine, one per thread");
	c = own_baseline_row(p, r, CLOCK_NAME, X_CLK_NS, "the same + spoke_now_ns() per pair");
	if (r->ok) {
		r->baseline = BARE_NAME;
		r->ratio = r->x[X_RATIO].med; /* of the per-run ratios */
		snprintf(r->note, sizeof(r->note), "%.2fx %s (same runs; %.2f .. %.2f); %.2fx %s",
			 r->ratio, BARE_NAME, r->x[X_RATIO].min, r->x[X_RATIO].max,
			 r->x[X_CLK_RATIO].med, CLOCK_NAME);
	}
	print_row(p, r);
	print_row(p, b);
	print_row(p, c);
}

/* reset-own, and the bare engine's clock + stop + start measured in the same runs. */
static void do_reset_own(struct plan *p, unsigned T)
{
	struct job j = {.w = W_RESET_OWN, .T = T, .n = p->sc.reset_n, .window_ns = p->sc.window_ns};
	struct row *r = run_series(p, &j, ROW_OPS), *c;

	r->shards = T;
	c = own_baseline_row(p, r, CLOCK_RESET_NAME, X_CLK_NS,
			     "bare engine: spoke_now_ns() + stop + start of a random pending one");
	if (r->ok) {
		r->n = c->n = p->sc.reset_n;
		r->baseline = CLOCK_RESET_NAME;
		r->ratio = r->x[X_CLK_RATIO].med; /* of the per-run ratios */
		snprintf(r->note, sizeof(r->note),
			 "%.2fx %s (same runs; %.2f .. %.2f); %llu pending", r->ratio,
			 CLOCK_RESET_NAME, r->x[X_CLK_RATIO].min, r->x[X_CLK_RATIO].max,
			 (unsigned long long)p->sc.reset_n);
		note_stalls(r);
	}
	print_row(p, r);
	print_row(p, c);
}

/* A service workload and its mutex baseline at one T, printed together. */
static void do_pair(struct plan *p, enum wl svc, enum wl base, unsigned T, uint64_t n)
{
	struct job js = {.w = svc, .T = T, .n = n, .window_ns = p->sc.window_ns};
	struct job jb = {.w = base, .T = T, .n = n, .window_ns = p->sc.window_ns};
	struct row *rs = run_series(p, &js, ROW_OPS), *rb = run_series(p, &jb, ROW_OPS);

	rs->shards = bench_ncpus();
	rs->callbacks = 0;
	set_ratio(rs, rb);
	if (rb->ok)
		snprintf(rb->note, sizeof(rb->note), "one global mutex + ticker thread");
	if (rs->ok && svc == W_RESET_FOREIGN) {
		rs->n = n;
		rb->n = n;
		note_add(rs, "; %llu pending, owners attached", (unsigned long long)n);
	}
	if (rs->ok && svc == W_CROSS_START)
		note_add(rs, "; all in the wheels after %.1f ms", rs->x[X_DRAIN_NS].med / 1e6);
	if (rs->ok)
		note_stalls(rs);
	if (rb->ok)
		note_stalls(rb);
	print_row(p, rs);
	print_row(p, rb);
}

static void do_fire(struct plan *p, enum wl w, unsigned T)
{
	/* scaling: a worker per shard, T in all; service: a pool of 2. */
	struct job j = {.w = w, .T = T, .n = p->sc.fire_n, .per_shard = p->scaling ? 1 : 0};
	struct row *r = run_series(p, &j, ROW_OPS);
	char pool[32];

	r->shards = T;
	r->callbacks = w == W_FIRE_POOL ? (p->scaling ? T : FIRE_POOL_THREADS) : 0;
	r->n = p->sc.fire_n;
	if (p->scaling)
		snprintf(pool, sizeof(pool), "a worker per shard");
	else
		snprintf(pool, sizeof(pool), "pool of %u", FIRE_POOL_THREADS);
	if (r->ok)
		snprintf(r->note, sizeof(r->note),
			 "%u shards, %s; ns/op = wall per callback; %.1f csw/1k", T,
			 w == W_FIRE_POOL ? pool : "inline", r->x[X_CSW].med);
	print_row(p, r);
}

static void do_lateness(struct plan *p, uint64_t pending, uint64_t tick_ns)
{
	struct job j = {.w = W_LATENESS,
			.T = 1,
			.n = pending,
			.window_ns = p->sc.late_window_ns,
			.tick_ns = tick_ns};
	struct row *r = run_series(p, &j, ROW_LATE);

	r->pending = pending;
	r->tick_ns = tick_ns;
	r->shards = bench_ncpus();
	r->callbacks = bench_ncpus();
	r->n = (uint64_t)llround(r->x[X_SAMPLES].med);
	print_row(p, r);
}

static void do_memory(struct plan *p)
{
	struct job j = {.w = W_MEMORY, .T = 1, .n = p->sc.mem_n};
	struct row *r = run_series(p, &j, ROW_MEM);

	r->n = p->sc.mem_n;
	r->shards = bench_ncpus();
	print_row(p, r);
}

/* ---- options ------------------------------------------------------------- */

/* The workloads of spoke-bench scaling (their baselines come with them). */
static bool scaling_workload(int w)
{
	return w == W_OWN || w == W_CROSS_PAIR || w == W_FIRE_POOL;
}

bool selected(const struct plan *p, enum wl w)
{
	if (p->scaling && !scaling_workload(w))
		return false;
	if (p->nonly == 0)
		return true;
	for (size_t i = 0; i < p->nonly; i++)
		if (strcmp(p->only[i], wl_name[w]) == 0)
			return true;
	return false;
}

/* The workload named name, or -1. */
static int find_workload(const struct plan *p, const char *name)
{
	for (int w = 0; w < NWL; w++)
		if (strcmp(wl_name[w], name) == 0 && (!p->scaling || scaling_workload(w)))
			return w;
	return -1;
}

/* "one of own-start-cancel, cross-start-cancel, ..." */
static const char *workload_list(const struct plan *p)
{
	char buf[400];
	size_t len = 0;

	for (int w = 0; w < NWL && len < sizeof(buf); w++)
		if (!p->scaling || scaling_workload(w))
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
						len ? ", " : "one of ", wl_name[w]);
	return bench_opts_why("%s", buf);
}

static struct plan plan;
static struct bench_opts common;

/* A service or scaling option (bench_option_fn); ctx is the plan. */
static const char *service_option(void *ctx, int key, const char *arg)
{
	struct plan *p = ctx;
	int n;

	switch (key) {
	case 't':
		n = bench_parse_threads(arg, p->threads, MAX_T, MAX_T);
		if (n < 0)
			return bench_opts_why("a list like 1,2,4 of counts 1..%d", MAX_T);
		p->nthreads = (size_t)n;
		return NULL;
	case 'o':
		if (find_workload(p, arg) < 0 || p->nonly >= NWL)
			return workload_list(p);
		p->only[p->nonly++] = arg;
		return NULL;
	case 'x':
		if (bench_parse_count(arg, &p->stall_test_ns) == 0 && p->stall_test_ns <= 60000) {
			p->stall_test_ns *= NS_PER_MS;
			return NULL;
		}
		return "ms, 1..60000";
	default:
		return "an option this subcommand does not take";
	}
}

static const struct bench_option service_options[] = {
	BENCH_OPT_JSON,
	BENCH_OPT_QUICK("N = 1e4 (5e3 fired), 10 ms windows, pending 1e3 and 1e4, 3 runs\n"
			"(the smoke test, < 30 s)"),
	BENCH_OPT_RUNS("5; 3 with --quick"),
	{"threads", 't', "LIST", "thread counts T, e.g. 1,2,4 (each 1..256)", "1,2,4"},
	{"only", 'o', "NAME",
	 "just this workload and its baseline (repeatable): own-start-cancel\n"
	 "cross-start-cancel mutex-start-stop cross-start mutex-start reset-own\n"
	 "reset-foreign mutex-reset fire-inline fire-pool lateness memory",
	 "all"},
	{"stall-test", 'x', "MS",
	 "a check of the bench: every thread of the pair and reset rows sleeps MS\n"
	 "once, between a start and its cancel or after a reset; over 1000 its\n"
	 "timer fires first, which the row counts (lost, enoent) and accounts for",
	 "no sleep"},
	BENCH_OPT_END,
};

static const struct bench_option scaling_options[] = {
	BENCH_OPT_JSON,
	BENCH_OPT_QUICK("small N, 10 ms windows, 3 runs (the smoke test)"),
	BENCH_OPT_RUNS("5; 3 with --quick"),
	{"threads", 't', "LIST", "thread counts T instead (each 1..256)",
	 "1, 2, 4 .. 4 x the CPUs (at most 256)"},
	{"only", 'o', "NAME",
	 "just this workload (repeatable): own-start-cancel cross-start-cancel\nfire-pool",
	 "all three"},
	{"stall-test", 'x', "MS",
	 "a check of the bench: every thread of cross-start-cancel sleeps MS once\n"
	 "between a start and its cancel (over 1000: counted as lost)",
	 "no sleep"},
	BENCH_OPT_END,
};

const struct bench_cmd bench_service_cmd = {
	.name = "spoke-bench service",
	.about = "The timer service under load (see the top of bench/bench_service.c):\n"
		 "attached and cross-shard start/cancel, resets by the owner and by other\n"
		 "threads, fired callbacks per second, expiry lateness, bytes per timer;\n"
		 "beside the bare engine and the same engine behind one global mutex.",
	.options = service_options,
	.handle = service_option,
	.ctx = &plan,
	.common = &common,
};

const struct bench_cmd bench_scaling_cmd = {
	.name = "spoke-bench scaling",
	.about = "How the service scales with threads (see bench_scaling_main in\n"
		 "bench/bench_service.c): own-shard and cross-shard start+cancel ops/s\n"
		 "(beside the bare engine and the global-mutex engine) and fired callbacks/s\n"
		 "through pools of a worker per shard, with context switches, for\n"
		 "T = 1, 2, 4, ... up to 4 x the CPUs.",
	.options = scaling_options,
	.handle = service_option,
	.ctx = &plan,
	.common = &common,
};

/* Fill the plan from argv. -1 to go on, or the exit status for main (usage or error). */
static int parse_options(struct plan *p, int argc, char **argv)
{
	int rc;

	if (p->scaling) {
		p->nthreads = bench_threads_doubling(
			p->threads, MAX_T, 4 * bench_ncpus() < MAX_T ? 4 * bench_ncpus() : MAX_T);
	} else {
		p->threads[0] = 1;
		p->threads[1] = 2;
		p->threads[2] = 4;
		p->nthreads = 3;
	}
	rc = bench_cmd_parse(p->scaling ? &bench_scaling_cmd : &bench_service_cmd, argc, argv);
	if (rc >= 0)
		return rc;
	p->json = common.json;
	p->quick = common.quick;
	p->runs = bench_opts_runs(&common, 3, 5);
	p->late_tick[0] = NS_PER_MS;
	p->late_tick[1] = 100 * NS_PER_US;
	p->nticks = 2;
	p->sc = scales[p->quick];
	return -1;
}

/* ---- main ---------------------------------------------------------------- */

static int service_main(int argc, char **argv, bool scaling)
{
	const char *bench_name = scaling ? "scaling" : "service";
	struct plan *p = &plan;
	uint64_t t0 = bench_now_ns();
	struct load_mark whole;
	char machine[256];
	double other;
	int rc;

	p->scaling = scaling;
	rc = parse_options(p, argc, argv);
	if (rc >= 0)
		return rc;
	load_mark(&whole);
	extras = mmap(NULL, BENCH_MAX_RUNS * sizeof(*extras), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (extras == MAP_FAILED) {
		perror("spoke-bench: mmap");
		return 1;
	}
	bench_machine(machine, sizeof(machine));
	if (!p->json) {
		printf("spoke-bench %s: median, min, max of %u runs, each in a fresh process;"
		       " windows %.0f ms.\nmachine: %s\n",
		       bench_name, p->runs, (double)p->sc.window_ns / 1e6, machine);
		for (size_t i = 0; i < p->nthreads; i++)
			if (p->threads[i] > bench_ncpus()) {
				printf("T = %u > %u CPUs: those rows are oversubscribed (more busy "
				       "threads than CPUs).\n",
				       p->threads[i], bench_ncpus());
				break;
			}
		printf("ns/op: thread-time per op (sum of the threads' wall time / all ops); "
		       "fire-*: wall time per callback.\n\n");
	}

	for (size_t i = 0; i < p->nthreads && selected(p, W_OWN); i++)
		do_own(p, p->threads[i]);
	for (size_t i = 0; i < p->nthreads && selected(p, W_CROSS_PAIR); i++)
		do_pair(p, W_CROSS_PAIR, W_MUTEX_PAIR, p->threads[i], 0);
	for (size_t i = 0; i < p->nthreads && selected(p, W_CROSS_START); i++)
		do_pair(p, W_CROSS_START, W_MUTEX_START, p->threads[i], p->sc.start_n);
	for (size_t i = 0; i < p->nthreads && selected(p, W_RESET_OWN); i++)
		do_reset_own(p, p->threads[i]);
	for (size_t i = 0; i < p->nthreads && selected(p, W_RESET_FOREIGN); i++)
		do_pair(p, W_RESET_FOREIGN, W_MUTEX_RESET, p->threads[i], p->sc.reset_n);
	for (size_t i = 0; i < p->nthreads; i++) {
		if (selected(p, W_FIRE_INLINE))
			do_fire(p, W_FIRE_INLINE, p->threads[i]);
		if (selected(p, W_FIRE_POOL))
			do_fire(p, W_FIRE_POOL, p->threads[i]);
	}
	for (size_t t = 0; t < p->nticks && selected(p, W_LATENESS); t++)
		for (size_t i = 0; i < p->sc.nlate; i++)
			do_lateness(p, p->sc.late_pending[i], p->late_tick[t]);
	if (selected(p, W_MEMORY))
		do_memory(p);

	if (!p->json) {
		print_summary(p, machine);
		if (!p->scaling)
			print_goals(p);
	}
	other = other_load(&whole);
	fprintf(p->json ? stderr : stdout, "\nspoke-bench %s: wall time %.1f s", bench_name,
		(double)(bench_now_ns() - t0) / 1e9);
	if (other >= 0)
		fprintf(p->json ? stderr : stdout,
			"; other processes used %.0f%% of the CPUs meanwhile", 100 * other);
	fputc('\n', p->json ? stderr : stdout);
	munmap(extras, BENCH_MAX_RUNS * sizeof(*extras));
	return p->failed ? 1 : 0;
}

int bench_service_main(int argc, char **argv)
{
	return service_main(argc, argv, false);
}

/*
 * `spoke-bench scaling`: the same machinery as `service` (forked runs, rows,
 * JSON, the global-mutex baseline), on three workloads and a thread list
 * that grows with the machine, T = 1, 2, 4, ... up to 4 x the CPUs (at most
 * MAX_T), so it runs unchanged on a many-core machine:
 *   own-start-cancel    T attached shards, start + cancel on one's own shard
 *                       (with the bare engine in the same run);
 *   cross-start-cancel  T producers, one managed shard per CPU, start on the
 *                       next CPU's shard + cancel, beside mutex-start-stop
 *                       (one engine behind one global mutex);
 *   fire-pool           T shards with one callback worker each
 *                       (callback_threads_per_shard = 1), 1e6 timers due at
 *                       once: fired callbacks/s through the pools, and the
 *                       process's context switches per 1000 callbacks.
 * Beyond the CPUs the rows are oversubscribed on purpose: what the pools
 * and the inboxes cost when threads outnumber cores.
 */
int bench_scaling_main(int argc, char **argv)
{
	return service_main(argc, argv, true);
}
