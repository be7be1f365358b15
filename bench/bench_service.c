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
 *   reset               (c) idle timeouts: N = 1e5 pending timers (delay 1 s,
 *                       started from the main thread on the shards in turn),
 *                       T threads spoke_reset(random one, 1 s). enoent
 *                       counts resets that found their timer gone (none
 *                       expected: the window is well inside the second).
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
 * --quick: N = 1e4 (5e3 fired), 10 ms windows, pending 1e3 and 1e4, 3 runs:
 * a smoke test (ctest bench.service.quick) that also runs under the
 * sanitizers (~15 s under TSan on 2 CPUs).
 */
#define _GNU_SOURCE
#include "bench_util.h"

#include <spoke/engine.h>
#include <spoke/spoke.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_T		  256 /* scaling: 4 x 64 CPUs */
#define MAX_ROWS	  320
#define MAX_PENDING_SIZES 4
#define MAX_TICKS	  2
#define NS_PER_S	  UINT64_C(1000000000)
#define NS_PER_MS	  UINT64_C(1000000)
#define TICK_NS		  NS_PER_MS	    /* the service's default tick */
#define PAIR_DELAY_NS	  NS_PER_S	    /* 1 s: never fires inside a window */
#define PAIR_DELAY_TICKS  1000		    /* the same in 1 ms ticks */
#define LONG_DELAY_NS	  (3600 * NS_PER_S) /* 1 h */
#define LONG_DELAY_TICKS  UINT64_C(3600000) /* the same in 1 ms ticks */
#define STOP_EVERY	  64		    /* ops between looks at the stop flag */
#define POLL_EVERY	  4096		    /* attached: pairs between spoke_poll */
#define WAIT_STEP_NS	  100000	    /* the main thread's polling step */
#define WAIT_LIMIT_NS	  (30 * NS_PER_S)   /* "eventually": only a bug runs out */
#define LATE_MAX_SAMPLES  200000
#define FIRE_POOL_THREADS 2
#define FIRE_SLOTS	  1024
#define FIRE_STAMP_EVERY  16
#define FIRE_ATTEMPTS	  5
#define FIRE_TICK_NS	  (10 * NS_PER_MS) /* see fire_once */
#define SERVICE_SEED	  UINT64_C(0x5e121ce0b3ec4a11)

/* ---- what one run reports beside its main figure ------------------------ */

enum extra_id {
	X_OPS,	     /* ops timed */
	X_OPS_PER_S, /* all threads */
	X_CPU_NS,    /* CPU ns per op */
	X_BASE_NS,   /* own-start-cancel: the bare engine in the same run */
	X_BASE_OPS_PER_S,
	X_BASE_CPU_NS,
	X_BASE_OPS,
	X_RATIO,  /* own-start-cancel: service / bare, this run */
	X_CLK_NS, /* own-start-cancel: the bare engine + a clock read, same run */
	X_CLK_OPS_PER_S,
	X_CLK_CPU_NS,
	X_CLK_OPS,
	X_CLK_RATIO, /* own-start-cancel: service / (bare + clock), this run */
	X_ENOENT,    /* reset: resets that found nothing pending */
	X_DRAIN_NS,  /* cross-start: window start to all timers in the wheels */
	X_P50,	     /* lateness, us */
	X_P99,
	X_P999,
	X_MAX,
	X_SAMPLES,
	X_SVC_LATE, /* lateness: the service's own max_late_ns, us */
	X_ATTEMPTS, /* fire: setups needed */
	X_CSW,	    /* fire: context switches (voluntary + not) per 1000 callbacks */
	NX
};

struct extra {
	double v[NX];
};

/* A MAP_SHARED mapping: the child of run r writes extras[r]. */
static struct extra *extras;

static int fail(struct bench_sample *out, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct bench_sample *out, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->error, sizeof(out->error), fmt, ap);
	va_end(ap);
	return err ? err : -EPROTO;
}

/* ---- small helpers ------------------------------------------------------- */

/*
 * Runs report their own timeouts as -ETIME: bench_repeat reads -ETIMEDOUT
 * from a run as its own time limit and rewrites the message.
 */
static struct spoke_stats stats_buf; /* 18 KB: one per child, main thread only */

static const struct spoke_shard_stats *totals(struct spoke *s)
{
	spoke_stats(s, &stats_buf);
	return &stats_buf.total;
}

/* Wait until the service's totals satisfy want(); -ETIMEDOUT after WAIT_LIMIT_NS. */
static int wait_totals(struct spoke *s, bool (*want)(const struct spoke_shard_stats *, uint64_t),
		       uint64_t arg, uint64_t *when_ns)
{
	uint64_t limit = bench_now_ns() + WAIT_LIMIT_NS;

	for (;;) {
		bool ok = want(totals(s), arg);
		uint64_t now = bench_now_ns();

		if (ok) {
			if (when_ns)
				*when_ns = now;
			return 0;
		}
		if (now > limit)
			return -ETIMEDOUT;
		bench_sleep_ns(WAIT_STEP_NS);
	}
}

static bool pending_is(const struct spoke_shard_stats *t, uint64_t n)
{
	return t->pending == n;
}

/* All n pairs (or warm-up timers) were taken by their owners, and unlinked. */
static bool drained(const struct spoke_shard_stats *t, uint64_t n)
{
	return t->pending == 0 && t->started == n && t->cancelled == n;
}

static const char *stats_str(char *buf, size_t len, const struct spoke_shard_stats *t)
{
	snprintf(buf, len, "started %llu, cancelled %llu, reset %llu, fired %llu, pending %llu",
		 (unsigned long long)t->started, (unsigned long long)t->cancelled,
		 (unsigned long long)t->reset, (unsigned long long)t->fired,
		 (unsigned long long)t->pending);
	return buf;
}

/* Callback of timers that must never fire in their workload. */
static _Atomic uint64_t unexpected_fires;

static void cb_never(void *arg)
{
	(void)arg;
	atomic_fetch_add_explicit(&unexpected_fires, 1, memory_order_relaxed);
}

/* ---- threads: a team released together, stopped by a flag or a count ---- */

/* One bench thread: the team's header (struct bench_thread) and what the workloads need. */
struct worker {
	struct bench_thread t; /* first: the team finds it there */
	unsigned target;       /* cross-*: the shard it starts on */
	uint64_t count;	       /* fixed-count workloads: ops to do */
	uint64_t enoent;       /* reset: resets that found nothing pending */
	struct bench_rng rng;
	struct spoke_engine *eng;   /* engine-*start-stop: its own engine */
	uint64_t clock_sum;	    /* engine-clock-start-stop: keeps the reads */
	struct spoke_timer timer;   /* its one intrusive timer */
	struct spoke_timer *timers; /* mutex-start: count timers */
} __attribute__((aligned(64)));

/*
 * The team (bench_util.h's, every thread pinned) and the subject its
 * workers share.
 */
struct team {
	struct bench_team base; /* first: a worker's t.team points here */
	/* main, between everyone's prepare and the window; 0 or an error */
	int (*between)(struct team *tm, struct bench_sample *out);
	/* the subject (read-only during the window, except the lock) */
	struct spoke *s __attribute__((aligned(64)));
	struct spoke_engine *e;	    /* mutex-*: the engine ... */
	struct spoke_timer *shared; /* mutex-reset: n pending timers */
	spoke_id *ids;		    /* reset: n pending timers */
	uint64_t n;
	pthread_mutex_t mu __attribute__((aligned(64))); /* ... and its global lock */
	struct worker w[MAX_T];
};

struct team_result {
	uint64_t ops, enoent;
	double window_ns, thread_ns, cpu_ns;
	uint64_t first_t0;
};

static struct worker *worker_of(struct bench_thread *t)
{
	return (struct worker *)t;
}

static struct team *team_of(const struct worker *w)
{
	return (struct team *)w->t.team;
}

static void wfail(struct worker *w, int err, const char *what)
{
	bench_thread_fail(&w->t, err, what);
}

static void team_init(struct team *tm, unsigned T, unsigned run)
{
	memset(tm, 0, sizeof(*tm));
	tm->base.T = T;
	tm->base.pin = true;
	tm->base.threads = tm->w;
	tm->base.stride = sizeof(tm->w[0]);
	for (unsigned i = 0; i < T; i++)
		bench_rng_seed(&tm->w[i].rng, SERVICE_SEED + 1000 * run + i);
}

/*
 * Run the team: everyone prepares, main runs `between`, then the window:
 * window_ns > 0 = until main raises the stop flag after that long, 0 = until
 * each worker did its count. 0 or a negative errno with out->error set.
 */
static int team_run(struct team *tm, uint64_t window_ns, struct team_result *r,
		    struct bench_sample *out)
{
	struct bench_team_result br;
	int err = bench_team_start(&tm->base);

	memset(r, 0, sizeof(*r));
	if (err)
		return fail(out, err, "pthread_create: %s", strerror(-err));
	bench_team_ready(&tm->base);
	if (tm->between)
		err = tm->between(tm, out);
	bench_team_go(&tm->base, err == 0);
	if (window_ns && !err)
		bench_sleep_ns(window_ns);
	bench_team_stop(&tm->base);
	bench_team_join(&tm->base, &br);
	if (br.err && !err)
		err = fail(out, br.err, "thread %u: %s: %s", br.err_index, br.what,
			   strerror(-br.err));
	for (unsigned i = 0; i < tm->base.T; i++)
		r->enoent += tm->w[i].enoent;
	r->ops = br.ops;
	r->window_ns = br.window_ns;
	r->thread_ns = br.thread_ns;
	r->cpu_ns = br.cpu_ns;
	r->first_t0 = br.first_t0;
	if (!err && r->ops == 0)
		err = fail(out, -EPROTO, "no operation done in the window");
	return err;
}

/*
 * One op of a windowed workload (a pair, a reset, ...): 0 or an error,
 * OR-ed together over the window.
 */
typedef int op_fn(struct worker *w, struct team *tm);

/*
 * A windowed body: op in batches of STOP_EVERY until the window is over;
 * with `poll` (attached shards), spoke_poll every POLL_EVERY ops. The stop
 * flag is tested at the bottom (do-while), so a thread the scheduler kept
 * off the CPU for the whole (short, --quick) window still does one batch
 * instead of turning the run into an error. Always inlined into each body
 * with a constant op, which is then inlined too: no call per op.
 */
static inline __attribute__((always_inline)) void window_loop(struct worker *w, op_fn *op,
							      bool poll, const char *what)
{
	struct team *tm = team_of(w);
	uint64_t ops = 0;
	int err = 0;

	do {
		for (int k = 0; k < STOP_EVERY; k++)
			err |= op(w, tm);
		ops += STOP_EVERY;
		if (poll && ops % POLL_EVERY == 0 && spoke_poll(tm->s) != 0)
			wfail(w, -EPROTO, "spoke_poll ran callbacks or failed");
	} while (!bench_team_stopping(&w->t));
	w->t.ops = ops;
	if (err)
		wfail(w, -EPROTO, what);
}

static double per_op(double ns, uint64_t ops)
{
	return ops ? ns / (double)ops : 0;
}

/* The figures every throughput run reports. */
static void report_ops(struct bench_sample *out, struct extra *x, const struct team_result *r)
{
	out->value = per_op(r->thread_ns, r->ops);
	out->timed_ns = r->window_ns;
	x->v[X_OPS] = (double)r->ops;
	x->v[X_OPS_PER_S] = r->window_ns > 0 ? (double)r->ops * 1e9 / r->window_ns : 0;
	x->v[X_CPU_NS] = per_op(r->cpu_ns, r->ops);
	x->v[X_ENOENT] = (double)r->enoent;
}

/* ---- one run's job ------------------------------------------------------- */

enum wl {
	W_OWN, /* also engine-start-stop, in the same run */
	W_CROSS_PAIR,
	W_MUTEX_PAIR,
	W_CROSS_START,
	W_MUTEX_START,
	W_RESET,
	W_MUTEX_RESET,
	W_FIRE_INLINE,
	W_FIRE_POOL,
	W_LATENESS,
	W_MEMORY,
	NWL
};

struct job {
	enum wl w;
	unsigned T;
	uint64_t n; /* start-only: starts; reset: pending; fire/memory: timers; lateness: pending */
	uint64_t window_ns;
	uint64_t tick_ns;
	unsigned per_shard; /* fire-pool: callback_threads_per_shard (0: a pool of 2) */
};

static struct team team; /* one per child */

static int create_service_spread(struct spoke **s, unsigned shards, unsigned callbacks,
				 unsigned per_shard, uint64_t tick_ns, struct bench_sample *out)
{
	struct spoke_config cfg;
	int err;

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
	err = spoke_create(s, &cfg);
	if (err)
		return fail(out, err, "spoke_create(%u shards, %u callback threads): %s",
			    cfg.shards, callbacks, strerror(-err));
	return 0;
}

static int create_service(struct spoke **s, unsigned shards, unsigned callbacks, uint64_t tick_ns,
			  struct bench_sample *out)
{
	return create_service_spread(s, shards, callbacks, 0, tick_ns, out);
}

/*
 * The team of a cross-* run: a service with a managed shard per CPU, and
 * the producer on CPU c aimed at the shard of the next CPU (shard k is on
 * CPU k). 0 or an error (said).
 */
static int cross_init(const struct job *j, unsigned run, struct bench_sample *out)
{
	unsigned nshards;
	int err;

	team_init(&team, j->T, run);
	err = create_service(&team.s, 0, 0, TICK_NS, out);
	if (err)
		return err;
	nshards = spoke_shards(team.s);
	for (unsigned i = 0; i < j->T; i++)
		team.w[i].target = (i % bench_ncpus() + 1) % nshards;
	return 0;
}

/* ---- (a) attached start + cancel, and the bare engine -------------------- */

static void bare_prepare(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	int err = spoke_engine_new(&w->eng, "hierarchical", NULL);

	if (err)
		wfail(w, err, "spoke_engine_new");
	spoke_timer_init(&w->timer);
}

static inline int bare_op(struct worker *w, struct team *tm)
{
	int err = spoke_engine_start(w->eng, &w->timer, PAIR_DELAY_TICKS);

	(void)tm;
	return err | spoke_engine_stop(w->eng, &w->timer);
}

/* The same with the clock read a start needs (what no service can go below). */
static inline int bare_clock_op(struct worker *w, struct team *tm)
{
	w->clock_sum += spoke_now_ns();
	return bare_op(w, tm);
}

static void bare_body(struct bench_thread *t)
{
	window_loop(worker_of(t), bare_op, false, "spoke_engine_start/stop failed");
}

static void bare_clock_body(struct bench_thread *t)
{
	window_loop(worker_of(t), bare_clock_op, false, "spoke_engine_start/stop failed");
}

/* A baseline team's figures, as extras from `first` on (ns, ops/s, CPU ns, ops). */
static void report_baseline(struct extra *x, enum extra_id first, const struct team_result *r)
{
	x->v[first] = per_op(r->thread_ns, r->ops);
	x->v[first + 1] = (double)r->ops * 1e9 / r->window_ns;
	x->v[first + 2] = per_op(r->cpu_ns, r->ops);
	x->v[first + 3] = (double)r->ops;
}

/* One bare-engine team of run_own: body is bare_body or bare_clock_body. */
static int run_bare(const struct job *j, unsigned run, bench_thread_fn *body,
		    struct team_result *res, struct bench_sample *out)
{
	int err;

	team_init(&team, j->T, run);
	team.base.prepare = bare_prepare;
	team.base.body = body;
	err = team_run(&team, j->window_ns, res, out);
	for (unsigned i = 0; i < j->T; i++)
		spoke_engine_free(team.w[i].eng);
	return err;
}

static void own_prepare(struct bench_thread *t)
{
	int err = spoke_attach(team_of(worker_of(t))->s, t->index);

	if (err)
		bench_thread_fail(t, err, "spoke_attach");
}

static inline int own_op(struct worker *w, struct team *tm)
{
	spoke_id id;
	int err = spoke_start(tm->s, PAIR_DELAY_NS, cb_never, NULL, &id);

	(void)w;
	return err | spoke_cancel(tm->s, id);
}

static void own_body(struct bench_thread *t)
{
	window_loop(worker_of(t), own_op, true, "spoke_start or spoke_cancel failed");
}

static int run_own(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	struct extra *x = &extras[run];
	struct team_result bare, clk, svc;
	const struct spoke_shard_stats *t;
	char sb[160];
	int err;

	err = run_bare(j, run, bare_body, &bare, out);
	if (!err)
		err = run_bare(j, run, bare_clock_body, &clk, out);
	if (err)
		return err;

	team_init(&team, j->T, run);
	err = create_service(&team.s, j->T, 0, TICK_NS, out);
	if (err)
		return err;
	team.base.prepare = own_prepare;
	team.base.body = own_body;
	err = team_run(&team, j->window_ns, &svc, out);
	t = totals(team.s);
	if (!err && (t->started != svc.ops || t->cancelled != svc.ops || t->pending != 0 ||
		     t->fired != 0 || atomic_load(&unexpected_fires) != 0))
		err = fail(out, -EPROTO, "after %llu pairs the service counts %s",
			   (unsigned long long)svc.ops, stats_str(sb, sizeof(sb), t));
	spoke_destroy(team.s);
	if (err)
		return err;
	report_ops(out, x, &svc);
	report_baseline(x, X_BASE_NS, &bare);
	report_baseline(x, X_CLK_NS, &clk);
	x->v[X_RATIO] = out->value / x->v[X_BASE_NS];
	x->v[X_CLK_RATIO] = out->value / x->v[X_CLK_NS];
	return 0;
}

/* ---- (b) cross-shard start (+ cancel) ------------------------------------ */

static inline int cross_pair_op(struct worker *w, struct team *tm)
{
	spoke_id id;
	int err = spoke_start_on(tm->s, w->target, PAIR_DELAY_NS, cb_never, NULL, &id);

	return err | spoke_cancel(tm->s, id);
}

static void cross_pair_body(struct bench_thread *t)
{
	window_loop(worker_of(t), cross_pair_op, false, "spoke_start_on or spoke_cancel failed");
}

static int run_cross_pair(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	struct team_result r;
	char sb[160];
	int err;

	err = cross_init(j, run, out);
	if (err)
		return err;
	team.base.body = cross_pair_body;
	err = team_run(&team, j->window_ns, &r, out);
	if (!err && wait_totals(team.s, drained, r.ops, NULL) != 0)
		err = fail(out, -ETIME, "shards did not drain %llu pairs in %llu s: %s",
			   (unsigned long long)r.ops,
			   (unsigned long long)(WAIT_LIMIT_NS / NS_PER_S),
			   stats_str(sb, sizeof(sb), totals(team.s)));
	if (!err && (totals(team.s)->fired || atomic_load(&unexpected_fires)))
		err = fail(out, -EPROTO, "a cancelled timer fired");
	spoke_destroy(team.s);
	if (!err)
		report_ops(out, &extras[run], &r);
	return err;
}

/* Warm the producer's arena: start and cancel as many timers as it will start. */
static void cross_start_warm(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke *s = team_of(w)->s;
	spoke_id *ids = malloc(w->count * sizeof(*ids));
	int err = 0;

	if (!ids) {
		wfail(w, -ENOMEM, "malloc");
		return;
	}
	for (uint64_t i = 0; i < w->count; i++)
		err |= spoke_start_on(s, w->target, LONG_DELAY_NS, cb_never, NULL, &ids[i]);
	for (uint64_t i = 0; !err && i < w->count; i++)
		err |= spoke_cancel(s, ids[i]);
	free(ids);
	if (err)
		wfail(w, -EPROTO, "warm-up start or cancel failed");
}

/* Main, before the window: the warm-up handles are back in their arenas. */
static int cross_start_between(struct team *tm, struct bench_sample *out)
{
	char sb[160];

	if (wait_totals(tm->s, drained, tm->n, NULL) != 0)
		return fail(out, -ETIME, "warm-up: shards did not drain %llu timers: %s",
			    (unsigned long long)tm->n, stats_str(sb, sizeof(sb), totals(tm->s)));
	return 0;
}

static void cross_start_body(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke *s = team_of(w)->s;
	unsigned target = w->target;
	int err = 0;

	for (uint64_t i = 0; i < w->count; i++)
		err |= spoke_start_on(s, target, LONG_DELAY_NS, cb_never, NULL, NULL);
	t->ops = w->count;
	if (err)
		wfail(w, -EPROTO, "spoke_start_on failed");
}

/* Split n ops over the team (worker 0 takes the remainder). */
static void set_counts(struct team *tm, uint64_t n)
{
	unsigned T = tm->base.T;

	for (unsigned i = 0; i < T; i++)
		tm->w[i].count = n / T + (i == 0 ? n % T : 0);
}

static int run_cross_start(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	const struct spoke_shard_stats *t;
	struct team_result r;
	uint64_t all_in = 0;
	char sb[160];
	int err;

	err = cross_init(j, run, out);
	if (err)
		return err;
	set_counts(&team, j->n);
	team.n = j->n;
	team.base.prepare = cross_start_warm;
	team.between = cross_start_between;
	team.base.body = cross_start_body;
	err = team_run(&team, 0, &r, out);
	if (!err && wait_totals(team.s, pending_is, j->n, &all_in) != 0)
		err = fail(out, -ETIME, "%llu starts did not all reach the wheels: %s",
			   (unsigned long long)j->n, stats_str(sb, sizeof(sb), totals(team.s)));
	t = totals(team.s);
	if (!err && (t->started != 2 * j->n || t->cancelled != j->n || t->fired))
		err = fail(out, -EPROTO, "after %llu warm-up and %llu timed starts: %s",
			   (unsigned long long)j->n, (unsigned long long)j->n,
			   stats_str(sb, sizeof(sb), t));
	spoke_destroy(team.s);
	if (err)
		return err;
	report_ops(out, &extras[run], &r);
	extras[run].v[X_DRAIN_NS] = (double)(all_in - r.first_t0);
	return 0;
}

/* ---- (b), (c) baseline: one engine behind one global mutex --------------- */

struct ticker {
	pthread_t th;
	_Atomic int stop;
	struct team *tm;
	uint64_t fired;
};

static void ticker_expire(void *ctx, struct spoke_timer *t)
{
	(void)t;
	++*(uint64_t *)ctx;
}

/* Advance the engine to the current 1 ms tick, every tick, under the lock. */
static void *ticker_main(void *arg)
{
	struct ticker *tk = arg;
	struct team *tm = tk->tm;
	uint64_t epoch = bench_now_ns(), next = epoch;

	while (!atomic_load_explicit(&tk->stop, memory_order_relaxed)) {
		struct timespec ts;
		uint64_t tick, now;

		next += TICK_NS;
		ts.tv_sec = (time_t)(next / NS_PER_S);
		ts.tv_nsec = (long)(next % NS_PER_S);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		tick = (bench_now_ns() - epoch) / TICK_NS;
		pthread_mutex_lock(&tm->mu);
		now = spoke_engine_now(tm->e);
		if (tick > now)
			spoke_engine_advance(tm->e, tick - now, ticker_expire, &tk->fired);
		pthread_mutex_unlock(&tm->mu);
	}
	return NULL;
}

static void mutex_pair_prepare(struct bench_thread *t)
{
	spoke_timer_init(&worker_of(t)->timer);
}

static inline int mutex_pair_op(struct worker *w, struct team *tm)
{
	int err;

	pthread_mutex_lock(&tm->mu);
	err = spoke_engine_start(tm->e, &w->timer, PAIR_DELAY_TICKS);
	pthread_mutex_unlock(&tm->mu);
	pthread_mutex_lock(&tm->mu);
	err |= spoke_engine_stop(tm->e, &w->timer);
	pthread_mutex_unlock(&tm->mu);
	return err;
}

static void mutex_pair_body(struct bench_thread *t)
{
	window_loop(worker_of(t), mutex_pair_op, false, "engine start/stop failed");
}

static void mutex_start_prepare(struct bench_thread *t)
{
	struct worker *w = worker_of(t);

	w->timers = malloc(w->count * sizeof(*w->timers));
	if (!w->timers) {
		wfail(w, -ENOMEM, "malloc");
		return;
	}
	for (uint64_t i = 0; i < w->count; i++)
		spoke_timer_init(&w->timers[i]);
}

static void mutex_start_body(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct team *tm = team_of(w);
	int err = 0;

	for (uint64_t i = 0; i < w->count; i++) {
		pthread_mutex_lock(&tm->mu);
		err |= spoke_engine_start(tm->e, &w->timers[i], LONG_DELAY_TICKS);
		pthread_mutex_unlock(&tm->mu);
	}
	t->ops = w->count;
	if (err)
		wfail(w, -EPROTO, "engine start failed");
}

/* A random one of the n shared timers. */
static inline uint32_t random_victim(struct worker *w, struct team *tm)
{
	return bench_below((uint32_t)bench_rng_next(&w->rng), (uint32_t)tm->n);
}

static inline int mutex_reset_op(struct worker *w, struct team *tm)
{
	uint32_t victim = random_victim(w, tm);
	int err;

	pthread_mutex_lock(&tm->mu);
	err = spoke_engine_start(tm->e, &tm->shared[victim], PAIR_DELAY_TICKS);
	pthread_mutex_unlock(&tm->mu);
	return err;
}

static void mutex_reset_body(struct bench_thread *t)
{
	window_loop(worker_of(t), mutex_reset_op, false, "engine re-arm failed");
}

static int run_mutex(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	struct ticker tk = {.tm = &team};
	struct team_result r;
	size_t want = 0;
	int err;

	team_init(&team, j->T, run);
	pthread_mutex_init(&team.mu, NULL);
	err = spoke_engine_new(&team.e, "hierarchical", NULL);
	if (err)
		return fail(out, err, "spoke_engine_new: %s", strerror(-err));
	if (j->w == W_MUTEX_RESET) {
		team.n = j->n;
		team.shared = malloc(j->n * sizeof(*team.shared));
		if (!team.shared) {
			spoke_engine_free(team.e);
			return fail(out, -ENOMEM, "no memory for %llu timers",
				    (unsigned long long)j->n);
		}
		for (uint64_t i = 0; i < j->n; i++) {
			spoke_timer_init(&team.shared[i]);
			err |= spoke_engine_start(team.e, &team.shared[i], PAIR_DELAY_TICKS);
		}
		want = j->n;
	}
	atomic_init(&tk.stop, 0);
	if (pthread_create(&tk.th, NULL, ticker_main, &tk) != 0) {
		spoke_engine_free(team.e);
		free(team.shared);
		return fail(out, -EAGAIN, "cannot start the ticker thread");
	}
	switch (j->w) {
	case W_MUTEX_PAIR:
		team.base.prepare = mutex_pair_prepare;
		team.base.body = mutex_pair_body;
		break;
	case W_MUTEX_START:
		set_counts(&team, j->n);
		team.base.prepare = mutex_start_prepare;
		team.base.body = mutex_start_body;
		want = j->n;
		break;
	default:
		team.base.body = mutex_reset_body;
		break;
	}
	if (!err)
		err = team_run(&team, j->w == W_MUTEX_START ? 0 : j->window_ns, &r, out);
	atomic_store(&tk.stop, 1);
	pthread_join(tk.th, NULL);
	if (!err && (spoke_engine_count(team.e) != want || tk.fired))
		err = fail(out, -EPROTO, "mutex engine: %zu pending (want %zu), %llu fired",
			   spoke_engine_count(team.e), want, (unsigned long long)tk.fired);
	spoke_engine_free(team.e);
	pthread_mutex_destroy(&team.mu);
	free(team.shared);
	for (unsigned i = 0; i < j->T; i++)
		free(team.w[i].timers);
	if (!err)
		report_ops(out, &extras[run], &r);
	return err;
}

/* ---- (c) reset of pending timers ----------------------------------------- */

static inline int reset_op(struct worker *w, struct team *tm)
{
	int r = spoke_reset(tm->s, tm->ids[random_victim(w, tm)], PAIR_DELAY_NS);

	if (r != -ENOENT)
		return r;
	w->enoent++;
	return 0;
}

static void reset_body(struct bench_thread *t)
{
	window_loop(worker_of(t), reset_op, false, "spoke_reset failed");
}

static int run_reset(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	const struct spoke_shard_stats *t;
	struct team_result r;
	unsigned nshards;
	char sb[160];
	int err;

	team_init(&team, j->T, run);
	team.n = j->n;
	team.ids = malloc(j->n * sizeof(*team.ids));
	if (!team.ids)
		return fail(out, -ENOMEM, "no memory for %llu ids", (unsigned long long)j->n);
	err = create_service(&team.s, 0, 0, TICK_NS, out);
	if (err) {
		free(team.ids);
		return err;
	}
	nshards = spoke_shards(team.s);
	for (uint64_t i = 0; i < j->n; i++)
		err |= spoke_start_on(team.s, (unsigned)(i % nshards), PAIR_DELAY_NS, cb_never,
				      NULL, &team.ids[i]);
	if (err)
		err = fail(out, -EPROTO, "setup: spoke_start_on failed");
	else if (wait_totals(team.s, pending_is, j->n, NULL) != 0)
		err = fail(out, -ETIME, "setup: %llu timers did not reach the wheels: %s",
			   (unsigned long long)j->n, stats_str(sb, sizeof(sb), totals(team.s)));
	team.base.body = reset_body;
	if (!err)
		err = team_run(&team, j->window_ns, &r, out);
	t = totals(team.s);
	if (!err && t->reset != r.ops - r.enoent)
		err = fail(out, -EPROTO, "%llu resets returned 0 but the service counts %s",
			   (unsigned long long)(r.ops - r.enoent), stats_str(sb, sizeof(sb), t));
	spoke_destroy(team.s);
	free(team.ids);
	if (!err)
		report_ops(out, &extras[run], &r);
	return err;
}

/* ---- (d) fired callbacks per second -------------------------------------- */

/* One line per callback thread: its count and, every 16th run, the time. */
static struct fire_slot {
	_Atomic uint64_t n;
	_Atomic uint64_t last_ns;
} __attribute__((aligned(64))) fire_slots[FIRE_SLOTS];
static _Atomic unsigned fire_nslots;
static _Atomic uint64_t fire_first_ns;
static _Thread_local struct fire_slot *fire_mine;

static void cb_fire(void *arg)
{
	struct fire_slot *m = fire_mine;
	uint64_t c;

	(void)arg;
	if (!m) {
		unsigned i = atomic_fetch_add_explicit(&fire_nslots, 1, memory_order_relaxed);

		if (i >= FIRE_SLOTS)
			abort(); /* more callback threads than --threads allows */
		m = fire_mine = &fire_slots[i];
	}
	if (atomic_load_explicit(&fire_first_ns, memory_order_relaxed) == 0) {
		uint64_t zero = 0;

		atomic_compare_exchange_strong_explicit(&fire_first_ns, &zero, bench_now_ns(),
							memory_order_relaxed, memory_order_relaxed);
	}
	c = atomic_load_explicit(&m->n, memory_order_relaxed) + 1;
	if (c % FIRE_STAMP_EVERY == 0)
		atomic_store_explicit(&m->last_ns, bench_now_ns(), memory_order_relaxed);
	atomic_store_explicit(&m->n, c, memory_order_release);
}

/*
 * The slots taken so far. The main thread polls only these: summing all
 * FIRE_SLOTS lines on every poll cost the poller ~67 cache misses a
 * callback, on a CPU that the shard threads need at T = 2. A slot whose
 * taking is not yet visible is counted at a later poll.
 */
static unsigned fire_slots_used(void)
{
	unsigned n = atomic_load_explicit(&fire_nslots, memory_order_acquire);

	return n < FIRE_SLOTS ? n : FIRE_SLOTS;
}

/* The callbacks counted in the first `slots` slots. */
static uint64_t fire_count(unsigned slots)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < slots; i++)
		sum += atomic_load_explicit(&fire_slots[i].n, memory_order_acquire);
	return sum;
}

/*
 * One attempt: n timers due at the middle of one tick, margin_ns after now.
 * 1 = spoke_create took over half a tick, or the starts did not all reach
 * the wheels a quarter tick before the deadline (retry with a longer tick
 * and margin), 0 = done (*ns = first to last callback), or an error.
 */
static long csw_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

static int fire_once(const struct job *j, unsigned callbacks, uint64_t margin_ns, uint64_t tick_ns,
		     uint64_t *ns, long *csw, struct bench_sample *out)
{
	struct spoke *s;
	uint64_t t_create, t_mid, w, D, k, limit, got, last = 0, done_at = 0;
	const struct spoke_shard_stats *t;
	char sb[160];
	int err = 0;

	memset(fire_slots, 0, sizeof(fire_slots));
	atomic_store(&fire_nslots, 0);
	atomic_store(&fire_first_ns, 0);
	/*
	 * A shard's tick 0 is read inside spoke_create, in the window of w ns
	 * around t_mid. D in the middle of "tick k after t_mid" is then within
	 * a quarter tick of the middle of one tick of every shard, if w is
	 * under half a tick, so each shard fires its share in one turn (the
	 * tick length plays no part in the dispatch rate).
	 */
	t_create = spoke_now_ns();
	err = create_service_spread(&s, j->T, callbacks, j->per_shard, tick_ns, out);
	if (err)
		return err;
	w = spoke_now_ns() - t_create;
	if (w > tick_ns / 2) {
		spoke_destroy(s);
		return 1; /* a slow spoke_create (sanitizers): a longer tick */
	}
	t_mid = t_create + w / 2;
	k = (t_create + w + margin_ns - t_mid) / tick_ns + 1;
	D = t_mid + k * tick_ns + tick_ns / 2;
	for (uint64_t i = 0; !err && i < j->n; i++) {
		uint64_t now = spoke_now_ns();

		if (now + tick_ns / 4 >= D)
			err = 1;
		else
			err = spoke_start_on(s, (unsigned)(i % j->T), D - now, cb_fire, NULL, NULL);
	}
	if (err < 0)
		err = fail(out, err, "spoke_start_on: %s", strerror(-err));
	/* All in the wheels a quarter tick before the deadline, none run yet. */
	while (!err && totals(s)->pending != j->n)
		if (spoke_now_ns() + tick_ns / 4 >= D)
			err = 1;
		else
			bench_sleep_ns(WAIT_STEP_NS);
	if (!err && fire_count(FIRE_SLOTS) != 0) /* all: an early run's slot may not show yet */
		err = fail(out, -EPROTO, "a callback ran before its deadline");
	*csw = csw_now(); /* the whole process, from here to the last callback */
	limit = D + WAIT_LIMIT_NS;
	while (!err && (got = fire_count(fire_slots_used())) < j->n) {
		if (spoke_now_ns() > limit)
			err = fail(out, -ETIME, "%llu of %llu callbacks ran in %llu s",
				   (unsigned long long)got, (unsigned long long)j->n,
				   (unsigned long long)(WAIT_LIMIT_NS / NS_PER_S));
		else
			bench_sleep_ns(WAIT_STEP_NS);
	}
	done_at = bench_now_ns();
	*csw = csw_now() - *csw;
	if (!err) {
		bench_sleep_ns(10 * NS_PER_MS);		   /* a duplicate run would show up now */
		(void)wait_totals(s, pending_is, 0, NULL); /* published after the turn */
		t = totals(s);
		got = fire_count(FIRE_SLOTS);
		if (got != j->n || t->fired != j->n || t->pending != 0)
			err = fail(out, -EPROTO, "%llu callbacks ran for %llu timers; %s",
				   (unsigned long long)got, (unsigned long long)j->n,
				   stats_str(sb, sizeof(sb), t));
	}
	spoke_destroy(s);
	if (err)
		return err;
	for (unsigned i = 0, used = fire_slots_used(); i < used; i++) {
		uint64_t l = atomic_load_explicit(&fire_slots[i].last_ns, memory_order_relaxed);

		if (l > last)
			last = l;
	}
	if (last <= atomic_load(&fire_first_ns))
		last = done_at; /* too few callbacks per thread to have a stamp */
	*ns = last - atomic_load(&fire_first_ns);
	return 0;
}

static int run_fire(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	unsigned callbacks = j->w == W_FIRE_POOL ? FIRE_POOL_THREADS : 0;
	uint64_t margin = 20 * NS_PER_MS + j->n * 300, tick = FIRE_TICK_NS, ns = 0;
	long csw = 0;
	int err = 1;
	unsigned a;

	for (a = 1; err == 1 && a <= FIRE_ATTEMPTS; a++, margin *= 4, tick *= 4)
		err = fire_once(j, callbacks, margin, tick, &ns, &csw, out);
	if (err == 1)
		return fail(out, -ETIME,
			    "could not get %llu timers into the wheels %llu ms ahead of time",
			    (unsigned long long)j->n, (unsigned long long)(margin / 4 / NS_PER_MS));
	if (err)
		return err;
	if (ns == 0)
		ns = 1;
	out->value = (double)ns / (double)j->n;
	out->timed_ns = (double)ns;
	extras[run].v[X_OPS] = (double)j->n;
	extras[run].v[X_OPS_PER_S] = (double)j->n * 1e9 / (double)ns;
	extras[run].v[X_ATTEMPTS] = a - 1;
	extras[run].v[X_CSW] = (double)csw * 1000.0 / (double)j->n;
	return 0;
}

/* ---- lateness (bench_late_run, bench_latency.c) -------------------------- */

static int run_lateness(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	const struct bench_late_job lj = {.pending = j->n,
					  .tick_ns = j->tick_ns,
					  .window_ns = j->window_ns,
					  .max_samples = LATE_MAX_SAMPLES};
	struct extra *x = &extras[run];
	struct bench_late_result r;
	uint64_t *late = malloc(LATE_MAX_SAMPLES * sizeof(*late));
	int err;

	if (!late)
		return fail(out, -ENOMEM, "no memory for samples");
	err = bench_late_run(&lj, run, late, &r, out);
	free(late);
	if (err)
		return err;
	x->v[X_P50] = r.p50_us;
	x->v[X_P99] = r.p99_us;
	x->v[X_P999] = r.p999_us;
	x->v[X_MAX] = r.max_us;
	x->v[X_SAMPLES] = (double)r.samples;
	x->v[X_SVC_LATE] = r.service_max_late_us;
	out->value = r.p99_us;
	out->timed_ns = (double)j->window_ns;
	return 0;
}

/* ---- bytes per timer ----------------------------------------------------- */

static int run_memory(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	const struct spoke_shard_stats *t;
	struct spoke *s;
	long before, after;
	unsigned nshards;
	spoke_id id;
	char sb[160];
	int err;

	(void)run;
	err = create_service(&s, 0, bench_ncpus(), TICK_NS, out);
	if (err)
		return err;
	nshards = spoke_shards(s);
	/* This thread's arena exists from its first call on. */
	err = spoke_start_on(s, 0, LONG_DELAY_NS, cb_never, NULL, &id);
	if (!err)
		err = spoke_cancel(s, id);
	if (!err && wait_totals(s, drained, 1, NULL) != 0)
		err = -ETIME;
	if (err) {
		spoke_destroy(s);
		return fail(out, err, "warm-up start + cancel: %s", strerror(-err));
	}
	malloc_trim(0);
	before = bench_rss_bytes();
	for (uint64_t i = 0; !err && i < j->n; i++)
		err = spoke_start_on(s, (unsigned)(i % nshards), LONG_DELAY_NS, cb_never, NULL,
				     NULL);
	if (err)
		err = fail(out, err, "spoke_start_on: %s", strerror(-err));
	else if (wait_totals(s, pending_is, j->n, NULL) != 0)
		err = fail(out, -ETIME, "%llu timers did not reach the wheels: %s",
			   (unsigned long long)j->n, stats_str(sb, sizeof(sb), totals(s)));
	after = bench_rss_bytes();
	t = totals(s);
	if (!err && t->started != j->n + 1)
		err = fail(out, -EPROTO, "%s", stats_str(sb, sizeof(sb), t));
	spoke_destroy(s);
	if (err)
		return err;
	if (before < 0 || after < 0)
		return fail(out, -EIO, "cannot read /proc/self/statm");
	out->value = (double)(after - before) / (double)j->n;
	return 0;
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

#define LOAD_NOTE_ABOVE 0.05 /* the table flags rows measured beside more than this */

/* ---- the plan and its rows ----------------------------------------------- */

static bench_run_fn *const wl_run[NWL] = {
	[W_OWN] = run_own,	     [W_CROSS_PAIR] = run_cross_pair,
	[W_MUTEX_PAIR] = run_mutex,  [W_CROSS_START] = run_cross_start,
	[W_MUTEX_START] = run_mutex, [W_RESET] = run_reset,
	[W_MUTEX_RESET] = run_mutex, [W_FIRE_INLINE] = run_fire,
	[W_FIRE_POOL] = run_fire,    [W_LATENESS] = run_lateness,
	[W_MEMORY] = run_memory,
};

static const char *const wl_name[NWL] = {
	[W_OWN] = "own-start-cancel",
	[W_CROSS_PAIR] = "cross-start-cancel",
	[W_MUTEX_PAIR] = "mutex-start-stop",
	[W_CROSS_START] = "cross-start",
	[W_MUTEX_START] = "mutex-start",
	[W_RESET] = "reset",
	[W_MUTEX_RESET] = "mutex-reset",
	[W_FIRE_INLINE] = "fire-inline",
	[W_FIRE_POOL] = "fire-pool",
	[W_LATENESS] = "lateness",
	[W_MEMORY] = "memory",
};

#define BARE_NAME  "engine-start-stop"
#define CLOCK_NAME "engine-clock-start-stop"

enum row_kind { ROW_OPS, ROW_LATE, ROW_MEM };

struct stat3 {
	double med, min, max;
};

struct row {
	enum row_kind kind;
	const char *workload;
	unsigned T, shards, callbacks;
	uint64_t n; /* see the comment at the top */
	uint64_t pending, tick_ns;
	unsigned runs;
	bool ok;
	char error[320];
	struct stat3 v; /* ns/op, B/timer, or p99 us */
	struct stat3 x[NX];
	double other;	      /* other_load() over its runs */
	const char *baseline; /* ratio = this row's ns/op / the baseline's */
	double ratio;
	char note[120];
};

/* How big a run is: the full measurement, or --quick (a smoke test). */
struct scale {
	double limit_s;		 /* bench_repeat's limit for a series */
	uint64_t window_ns;	 /* windowed workloads */
	uint64_t start_n;	 /* cross-start, mutex-start: starts */
	uint64_t reset_n;	 /* reset: pending timers */
	uint64_t fire_n;	 /* fire-*: timers */
	uint64_t mem_n;		 /* memory: timers */
	uint64_t late_window_ns; /* lateness: the stream */
	uint64_t late_pending[MAX_PENDING_SIZES];
	size_t nlate;
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

struct plan {
	unsigned runs;
	bool quick;
	struct scale sc; /* scales[quick] */
	uint64_t late_tick[MAX_TICKS];
	size_t nticks;
	unsigned threads[MAX_T];
	size_t nthreads;
	bool json;
	bool scaling;		   /* spoke-bench scaling: see bench_scaling_main */
	const char *only[NWL + 1]; /* --only: run just these workloads (NULL = all) */
	size_t nonly;
	struct row rows[MAX_ROWS];
	size_t nrows;
	bool failed;
	bool header_done;
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
static struct row *run_series(struct plan *p, const struct job *j, enum row_kind kind)
{
	struct row *r = new_row(p, kind, wl_name[j->w], j->T);
	struct bench_summary sum;
	struct load_mark m;
	char err[240];
	int rc;

	memset(extras, 0, BENCH_MAX_RUNS * sizeof(*extras));
	load_mark(&m);
	rc = bench_repeat(wl_run[j->w], (void *)j, p->runs, p->sc.limit_s, &sum, err, sizeof(err));
	r->other = other_load(&m);
	if (rc) {
		snprintf(r->error, sizeof(r->error), "%s", err);
		p->failed = true;
		return r;
	}
	r->ok = true;
	r->v = (struct stat3){sum.median, sum.min, sum.max};
	for (int i = 0; i < NX; i++)
		r->x[i] = extra_stat(p->runs, i);
	r->n = (uint64_t)llround(r->x[X_OPS].med);
	return r;
}

/* ---- output -------------------------------------------------------------- */

static void json_num(const char *key, double v)
{
	if (isfinite(v))
		printf(",\"%s\":%.2f", key, v);
	else
		printf(",\"%s\":null", key);
}

static void json_str(const char *key, const char *s)
{
	printf(",\"%s\":\"", key);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static const char *bench_name = "service"; /* or "scaling" */

static void print_json(const struct row *r)
{
	printf("{\"bench\":\"%s\",\"workload\":\"%s\",\"threads\":%u", bench_name, r->workload,
	       r->T);
	if (r->kind == ROW_LATE)
		printf(",\"pending\":%llu,\"tick_us\":%.0f", (unsigned long long)r->pending,
		       (double)r->tick_ns / 1000.0);
	if (!r->ok) {
		if (r->kind == ROW_OPS && r->n)
			printf(",\"n\":%llu", (unsigned long long)r->n);
		json_str("error", r->error);
		printf("}\n");
		return;
	}
	printf(",\"n\":%llu", (unsigned long long)r->n);
	switch (r->kind) {
	case ROW_OPS:
		json_num("ns_per_op", r->v.med);
		json_num("min", r->v.min);
		json_num("max", r->v.max);
		json_num("ops_per_s", r->x[X_OPS_PER_S].med);
		json_num("cpu_ns_per_op", r->x[X_CPU_NS].med);
		printf(",\"shards\":%u,\"callback_threads\":%u", r->shards, r->callbacks);
		if (r->baseline) {
			json_str("baseline", r->baseline);
			json_num("ratio", r->ratio);
		}
		if (strcmp(r->workload, wl_name[W_OWN]) == 0)
			json_num("ratio_engine_clock", r->x[X_CLK_RATIO].med);
		if (strcmp(r->workload, wl_name[W_RESET]) == 0)
			json_num("enoent", r->x[X_ENOENT].med);
		if (strcmp(r->workload, wl_name[W_CROSS_START]) == 0)
			json_num("all_in_wheels_ms", r->x[X_DRAIN_NS].med / 1e6);
		if (strncmp(r->workload, "fire-", 5) == 0)
			json_num("csw_per_1k", r->x[X_CSW].med);
		break;
	case ROW_LATE:
		json_num("p50_us", r->x[X_P50].med);
		json_num("p99_us", r->x[X_P99].med);
		json_num("p999_us", r->x[X_P999].med);
		json_num("max_us", r->x[X_MAX].med);
		json_num("p99_min_us", r->x[X_P99].min);
		json_num("p99_max_us", r->x[X_P99].max);
		json_num("max_max_us", r->x[X_MAX].max);
		json_num("service_max_late_us", r->x[X_SVC_LATE].med);

		break;
	case ROW_MEM:
		json_num("bytes_per_timer", r->v.med);
		json_num("min", r->v.min);
		json_num("max", r->v.max);
		break;
	}
	if (r->other >= 0)
		json_num("other_load_pct", 100 * r->other);
	printf(",\"runs\":%u}\n", r->runs);
}

static void print_load_note(const struct row *r)
{
	if (r->other > LOAD_NOTE_ABOVE)
		printf("  [other processes: %.0f%% of the CPUs]", 100 * r->other);
	putchar('\n');
}

static void print_table_row(struct plan *p, const struct row *r)
{
	char nb[32];

	if (!p->header_done) {
		printf("%-23s %2s %9s %9s %9s %9s %9s %8s  %s\n", "workload", "T", "n", "ns/op",
		       "min", "max", "cpu-ns/op", "Mops/s", "note");
		p->header_done = true;
	}
	if (r->kind == ROW_LATE) {
		printf("%-23s %2u pending %s, tick %.0f us: ", r->workload, r->T,
		       bench_fmt_count(nb, sizeof(nb), r->pending), (double)r->tick_ns / 1000.0);
		if (!r->ok) {
			printf("error: %s\n", r->error);
			return;
		}
		printf("p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f us  (%llu samples; p99 of the "
		       "runs %.1f .. %.1f)",
		       r->x[X_P50].med, r->x[X_P99].med, r->x[X_P999].med, r->x[X_MAX].med,
		       (unsigned long long)r->x[X_SAMPLES].med, r->x[X_P99].min, r->x[X_P99].max);
		print_load_note(r);
		return;
	}
	printf("%-23s %2u %9s", r->workload, r->T,
	       r->ok || r->n ? bench_fmt_count(nb, sizeof(nb), r->n) : "-");
	if (!r->ok) {
		printf("  error: %s\n", r->error);
		return;
	}
	if (r->kind == ROW_MEM) {
		printf(" %9.1f %9.1f %9.1f %9s %8s  bytes per pending timer", r->v.med, r->v.min,
		       r->v.max, "", "");
		print_load_note(r);
		return;
	}
	printf(" %9.1f %9.1f %9.1f", r->v.med, r->v.min, r->v.max);
	if (r->x[X_CPU_NS].med > 0)
		printf(" %9.1f", r->x[X_CPU_NS].med);
	else
		printf(" %9s", "-");
	printf(" %8.2f  %s", r->x[X_OPS_PER_S].med / 1e6, r->note);
	print_load_note(r);
}

static void print_row(struct plan *p, const struct row *r)
{
	if (p->json)
		print_json(r);
	else
		print_table_row(p, r);
	fflush(stdout);
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
	if (rs->ok && svc == W_RESET) {
		rs->n = n;
		rb->n = n;
		snprintf(rs->note + strlen(rs->note), sizeof(rs->note) - strlen(rs->note),
			 "; %llu pending, enoent %.0f", (unsigned long long)n, rs->x[X_ENOENT].med);
	}
	if (rs->ok && svc == W_CROSS_START)
		snprintf(rs->note + strlen(rs->note), sizeof(rs->note) - strlen(rs->note),
			 "; all in the wheels after %.1f ms", rs->x[X_DRAIN_NS].med / 1e6);
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

/* ---- summary (table mode) ------------------------------------------------ */

static const struct row *find_row(const struct plan *p, const char *name, unsigned T,
				  uint64_t pending, uint64_t tick_ns)
{
	for (size_t i = 0; i < p->nrows; i++) {
		const struct row *r = &p->rows[i];

		if (strcmp(r->workload, name) == 0 && r->T == T && r->pending == pending &&
		    r->tick_ns == tick_ns)
			return r;
	}
	return NULL;
}

static bool find_kind(const struct plan *p, enum row_kind kind)
{
	for (size_t i = 0; i < p->nrows; i++)
		if (p->rows[i].kind == kind)
			return true;
	return false;
}

/* A throughput row of the summary. */
static void summary_ops_row(const struct row *r)
{
	char vs[64], cpu[32];

	if (!r->ok) {
		printf("| %s | %u | error | | | | %s |\n", r->workload, r->T, r->error);
		return;
	}
	vs[0] = '\0';
	if (r->baseline)
		snprintf(vs, sizeof(vs), "%.2fx %s", r->ratio, r->baseline);
	if (r->x[X_CPU_NS].med > 0)
		snprintf(cpu, sizeof(cpu), "%.1f", r->x[X_CPU_NS].med);
	else
		snprintf(cpu, sizeof(cpu), "-");
	printf("| %s | %u | %.1f | %.1f .. %.1f | %s | %.2f | %s |\n", r->workload, r->T, r->v.med,
	       r->v.min, r->v.max, cpu, r->x[X_OPS_PER_S].med / 1e6, vs);
}

/* A lateness row of the summary. */
static void summary_late_row(const struct row *r)
{
	char nb[32];

	if (!r->ok) {
		printf("| %s | %.0f us | error: %s | | | | |\n",
		       bench_fmt_count(nb, sizeof(nb), r->pending), (double)r->tick_ns / 1000.0,
		       r->error);
		return;
	}
	printf("| %s | %.0f us | %.1f | %.1f | %.1f | %.1f | %.0f |\n",
	       bench_fmt_count(nb, sizeof(nb), r->pending), (double)r->tick_ns / 1000.0,
	       r->x[X_P50].med, r->x[X_P99].med, r->x[X_P999].med, r->x[X_MAX].med,
	       r->x[X_SAMPLES].med);
}

/* The memory line of the summary. */
static void summary_mem_row(const struct row *r)
{
	char nb[32];

	if (r->ok)
		printf("\nMemory: %.1f bytes per pending timer (N = %s; min %.1f, max %.1f)\n",
		       r->v.med, bench_fmt_count(nb, sizeof(nb), r->n), r->v.min, r->v.max);
}

/* One part of the summary: the rows of one kind under their head (if any). */
struct summary_part {
	enum row_kind kind;
	const char *head; /* the column names and the rule; NULL: no table */
	void (*row)(const struct row *r);
};

static const struct summary_part summary_parts[] = {
	{ROW_OPS,
	 "| workload | T | ns/op | min .. max | CPU ns/op | Mops/s | vs |\n"
	 "|---|--:|--:|--:|--:|--:|---|\n",
	 summary_ops_row},
	{ROW_LATE,
	 "| pending | tick | p50 | p99 | p99.9 | max | samples/run |\n"
	 "|--:|--:|--:|--:|--:|--:|--:|\n",
	 summary_late_row},
	{ROW_MEM, NULL, summary_mem_row},
};

static void summary_title(const struct plan *p, enum row_kind kind, const char *machine)
{
	if (kind == ROW_OPS)
		printf("\n### Throughput (median of %u runs; %s)\n\n", p->runs, machine);
	else if (kind == ROW_LATE)
		printf("\n### Expiry lateness (us; median of %u runs)\n\n", p->runs);
}

static void print_summary(const struct plan *p, const char *machine)
{
	for (size_t k = 0; k < sizeof(summary_parts) / sizeof(summary_parts[0]); k++) {
		const struct summary_part *sp = &summary_parts[k];

		if (!find_kind(p, sp->kind))
			continue;
		summary_title(p, sp->kind, machine);
		if (sp->head)
			fputs(sp->head, stdout);
		for (size_t i = 0; i < p->nrows; i++)
			if (p->rows[i].kind == sp->kind)
				sp->row(&p->rows[i]);
	}
}

static bool selected(const struct plan *p, enum wl w);

/* The goals, against the rows measured. */
static void print_goals(const struct plan *p)
{
	const struct row *r;

	if (!selected(p, W_OWN) && !selected(p, W_CROSS_START) && !selected(p, W_LATENESS) &&
	    !selected(p, W_MEMORY))
		return;
	printf("\n### Goals\n\n");
	for (size_t i = 0; i < p->nthreads; i++) {
		r = find_row(p, wl_name[W_OWN], p->threads[i], 0, 0);
		if (r && r->ok)
			printf("- attached start+cancel within 1.5x of the bare engine, T=%u: "
			       "%.2fx (%.1f vs %.1f ns) - %s; against the engine + one clock "
			       "read (%.1f ns): %.2fx\n",
			       r->T, r->ratio, r->v.med, r->v.med / r->ratio,
			       r->ratio <= 1.5 ? "met" : "NOT met", r->x[X_CLK_NS].med,
			       r->x[X_CLK_RATIO].med);
	}
	/*
	 * What a start costs its producer is the CPU time it spends in the
	 * call. The thread's wall time per start also counts the time it
	 * waited for a CPU, which is all of the difference once the producers
	 * and the shard threads outnumber the CPUs.
	 */
	for (size_t i = 0; i < p->nthreads; i++) {
		r = find_row(p, wl_name[W_CROSS_START], p->threads[i], 0, 0);
		if (r && r->ok)
			printf("- cross-shard start under 100 ns on the producer, T=%u: CPU %.1f "
			       "ns "
			       "(wall %.1f ns, %u producer and %u shard threads on %u CPUs) - %s\n",
			       r->T, r->x[X_CPU_NS].med, r->v.med, r->T, r->shards, bench_ncpus(),
			       r->x[X_CPU_NS].med < 100 ? "met" : "NOT met");
	}
	for (size_t t = 0; t < p->nticks; t++) {
		uint64_t most = p->sc.late_pending[p->sc.nlate - 1];
		char nb[32];

		r = find_row(p, wl_name[W_LATENESS], 1, most, p->late_tick[t]);
		if (r && r->ok)
			printf("- p99 lateness within one tick with %s pending, tick %.0f us: p99 "
			       "%.1f us - %s\n",
			       bench_fmt_count(nb, sizeof(nb), most), (double)r->tick_ns / 1000.0,
			       r->x[X_P99].med,
			       r->x[X_P99].med * 1000.0 <= (double)r->tick_ns ? "met" : "NOT met");
	}
	r = find_row(p, wl_name[W_MEMORY], 1, 0, 0);
	if (r && r->ok)
		printf("- at most 64 bytes per timer: %.1f B - %s\n", r->v.med,
		       r->v.med <= 64 ? "met" : "NOT met");
}

/* ---- options ------------------------------------------------------------- */

static void usage(FILE *f, bool scaling)
{
	if (scaling) {
		fprintf(f,
			"usage: spoke-bench scaling [options]\n"
			"  How the service scales with threads (see bench_scaling_main in\n"
			"  bench/bench_service.c): own-shard and cross-shard start+cancel ops/s\n"
			"  (beside the bare engine and the global-mutex engine) and fired\n"
			"  callbacks/s through pools of a worker per shard, with context "
			"switches,\n"
			"  for T = 1, 2, 4, ... up to 4 x the CPUs.\n"
			"  --json          one JSON object per line instead of the table\n"
			"  --quick         small N, 10 ms windows, 3 runs (smoke test)\n"
			"  --threads LIST  thread counts T instead (1..%d each)\n"
			"  --runs K        runs per measurement, median/min/max (default 5, quick "
			"3)\n"
			"  --only NAME     just this workload (repeatable): own-start-cancel\n"
			"                  cross-start-cancel fire-pool\n",
			MAX_T);
		return;
	}
	fprintf(f,
		"usage: spoke-bench service [options]\n"
		"  The timer service under load (see the top of bench/bench_service.c):\n"
		"  attached and cross-shard start/cancel, reset, fired callbacks per second,\n"
		"  expiry lateness, bytes per timer; beside the bare engine and the same\n"
		"  engine behind one global mutex.\n"
		"  --json          one JSON object per line instead of the table\n"
		"  --quick         small N, 10 ms windows, 3 runs (smoke test, < 30 s)\n"
		"  --threads LIST  thread counts T, e.g. 1,2,4 (default; 1..%d each)\n"
		"  --runs K        runs per measurement, median/min/max (default 5, quick 3)\n"
		"  --only NAME     just this workload and its baseline (repeatable): one of\n"
		"                  own-start-cancel cross-start-cancel cross-start reset\n"
		"                  fire-inline fire-pool lateness memory\n",
		MAX_T);
}

static int parse_threads(struct plan *p, const char *arg)
{
	int n = bench_parse_threads(arg, p->threads, MAX_T, MAX_T);

	if (n < 0)
		return n;
	p->nthreads = (size_t)n;
	return 0;
}

/* The workloads of spoke-bench scaling (their baselines come with them). */
static bool scaling_workload(int w)
{
	return w == W_OWN || w == W_CROSS_PAIR || w == W_FIRE_POOL;
}

static bool known_workload(const struct plan *p, const char *name)
{
	for (int w = 0; w < NWL; w++)
		if (strcmp(wl_name[w], name) == 0)
			return !p->scaling || scaling_workload(w);
	return false;
}

/* Is workload w (or its baseline's service row) selected by --only? */
static bool selected(const struct plan *p, enum wl w)
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

/* A service or scaling option (bench_option_fn); ctx is the plan. */
static int service_option(void *ctx, int opt, const char *arg)
{
	struct plan *p = ctx;

	switch (opt) {
	case 't':
		if (parse_threads(p, arg) == 0)
			return 0;
		fprintf(stderr, "--threads: a list like 1,2,4 of counts 1..%d\n", MAX_T);
		return -1;
	case 'o':
		if (known_workload(p, arg) && p->nonly < NWL) {
			p->only[p->nonly++] = arg;
			return 0;
		}
		fprintf(stderr, "--only: unknown workload '%s'\n", arg);
		return -1;
	default:
		return -1;
	}
}

static void usage_service(FILE *f)
{
	usage(f, false);
}

static void usage_scaling(FILE *f)
{
	usage(f, true);
}

/* Fill the plan from argv. -1 to go on, or the exit status for main (usage or error). */
static int parse_options(struct plan *p, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"threads", required_argument, NULL, 't'},
		{"only", required_argument, NULL, 'o'},
		{NULL, 0, NULL, 0},
	};
	struct bench_opts o;
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
	rc = bench_parse_options(argc, argv, false, longopts, service_option, p,
				 p->scaling ? usage_scaling : usage_service, &o);
	if (rc >= 0)
		return rc;
	p->json = o.json;
	p->quick = o.quick;
	p->runs = bench_opts_runs(&o, 3, 5);
	p->late_tick[0] = NS_PER_MS;
	p->late_tick[1] = 100000;
	p->nticks = 2;
	p->sc = scales[p->quick];
	return -1;
}

/* ---- main ---------------------------------------------------------------- */

static int service_main(int argc, char **argv, bool scaling)
{
	static struct plan plan;
	struct plan *p = &plan;
	uint64_t t0 = bench_now_ns();
	struct load_mark whole;
	char machine[256];
	double other;
	int rc;

	p->scaling = scaling;
	bench_name = scaling ? "scaling" : "service";
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
	for (size_t i = 0; i < p->nthreads && selected(p, W_RESET); i++)
		do_pair(p, W_RESET, W_MUTEX_RESET, p->threads[i], p->sc.reset_n);
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
