/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service.h - inside `spoke-bench service` and `scaling`: what the files of
 * its workload families share. bench_service.c holds the plan, the rows and
 * their output and says what every workload measures; each family runs in
 * a file of its own:
 *
 *   service_own.c     the owner's thread of an attached shard: start +
 *                     cancel (own-start-cancel), reset (reset-own), and the
 *                     bare engine beside each in the same run
 *   service_cross.c   other threads than the owner: cross-start-cancel,
 *                     cross-start, reset-foreign
 *   service_mutex.c   the baseline: one engine behind one global mutex
 *   service_expiry.c  fired callbacks per second (fire-inline, fire-pool)
 *                     and lateness
 *   service_memory.c  bytes per pending timer
 *
 * A run is one forked child (bench_repeat): a function `run_<name>` of
 * type bench_run_fn whose arg is the struct job. Beside its main figure a
 * run reports extras (enum extra_id) through a shared mapping, one slot per
 * run.
 */
#ifndef SPOKE_BENCH_SERVICE_H
#define SPOKE_BENCH_SERVICE_H

#include "bench_svc.h"
#include "bench_team.h"

#include <spoke/engine.h>

#define MAX_T		  256		    /* scaling: 4 x 64 CPUs */
#define PAIR_DELAY_NS	  NS_PER_S	    /* 1 s: pairs and resets (a stall is counted) */
#define PAIR_DELAY_TICKS  1000		    /* the same in 1 ms ticks */
#define LONG_DELAY_NS	  (3600 * NS_PER_S) /* 1 h: never fires inside a run */
#define LONG_DELAY_TICKS  UINT64_C(3600000) /* the same in 1 ms ticks */
#define SERVICE_SEED	  UINT64_C(0x5e121ce0b3ec4a11)
#define FIRE_POOL_THREADS 2 /* fire-pool in `service`: the pool */

/* ---- what one run reports beside its main figure -------------------------- */

enum extra_id {
	X_OPS,	     /* ops timed */
	X_OPS_PER_S, /* all threads */
	X_CPU_NS,    /* CPU ns per op */
	X_BASE_NS,   /* own-start-cancel: the bare engine in the same run */
	X_BASE_OPS_PER_S,
	X_BASE_CPU_NS,
	X_BASE_OPS,
	X_RATIO,  /* own-start-cancel: service / bare, this run */
	X_CLK_NS, /* own-*: the bare engine + a clock read, same run */
	X_CLK_OPS_PER_S,
	X_CLK_CPU_NS,
	X_CLK_OPS,
	X_CLK_RATIO, /* own-*: service / (bare + clock), this run */
	X_ENOENT,    /* resets that found nothing pending (the timer fired: a stall) */
	X_LOST,	     /* pairs whose cancel lost to the fire (a stall), counted as fired */
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
extern struct extra *extras;

/* ---- one run's job ---------------------------------------------------------- */

enum wl {
	W_OWN, /* also engine-start-stop and engine-clock-start-stop, in the same run */
	W_CROSS_PAIR,
	W_MUTEX_PAIR,
	W_CROSS_START,
	W_MUTEX_START,
	W_RESET_OWN, /* also engine-clock-reset, in the same run */
	W_RESET_FOREIGN,
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
	uint64_t stall_ns;  /* --stall-test: each thread sleeps this long once (maybe_stall) */
};

bench_run_fn run_own, run_reset_own;				 /* service_own.c */
bench_run_fn run_cross_pair, run_cross_start, run_reset_foreign; /* service_cross.c */
bench_run_fn run_mutex;						 /* service_mutex.c */
bench_run_fn run_fire, run_lateness;				 /* service_expiry.c */
bench_run_fn run_memory;					 /* service_memory.c */

/* ---- the team of a run: bench_team.h's, and the subject its workers share ---- */

/* One bench thread: the team's header, then what the workloads need. */
struct worker {
	struct bench_thread t; /* first: the team finds it there */
	unsigned target;       /* cross-*: the shard it starts on */
	uint64_t count;	       /* fixed-count workloads: ops to do */
	uint64_t enoent;       /* resets that found nothing pending */
	uint64_t lost;	       /* pairs whose cancel or stop lost to the fire */
	struct bench_rng rng;
	struct spoke_engine *eng;   /* engine-*: its own engine */
	uint64_t clock_sum;	    /* engine-clock-*: keeps the reads */
	struct spoke_timer timer;   /* its one intrusive timer */
	struct spoke_timer *timers; /* mutex-start, engine-clock-reset: count timers */
	spoke_id *ids;		    /* reset-own: its count pending timers */
	uint64_t stall_ns;	    /* --stall-test: still to sleep, once (0: done, or none) */
} __attribute__((aligned(64)));

struct team {
	struct bench_team base; /* first: a worker's t.team points here */
	/* the subject (read-only during the window, except the lock) */
	struct spoke *s __attribute__((aligned(64)));
	struct spoke_engine *e;	    /* mutex-*: the engine ... */
	struct spoke_timer *shared; /* mutex-reset: n pending timers */
	spoke_id *ids;		    /* reset-foreign: n pending timers */
	uint64_t n;
	pthread_mutex_t mu __attribute__((aligned(64))); /* ... and its global lock */
	struct worker w[MAX_T];
};

/* What a team's run adds up to. */
struct team_result {
	uint64_t ops, enoent, lost;
	double window_ns, thread_ns, cpu_ns;
	uint64_t first_t0;
};

extern struct team team; /* one per run (a forked child) */

/* Callbacks of the timers a workload may see fire only after a stall: counted. */
extern _Atomic uint64_t stall_fires;

static inline struct worker *worker_of(struct bench_thread *t)
{
	return (struct worker *)t;
}

static inline struct team *team_of(const struct worker *w)
{
	return (struct team *)w->t.team;
}

/* A random one of the n timers of the team (or of a worker's own n). */
static inline uint32_t random_victim(struct worker *w, uint64_t n)
{
	return bench_below((uint32_t)bench_rng_next(&w->rng), (uint32_t)n);
}

/*
 * Reset the team for j->T threads, every thread pinned, its PRNG seeded
 * from run, its --stall-test sleep from j.
 */
void team_init(struct team *tm, const struct job *j, unsigned run);

/*
 * --stall-test: the thread sleeps once, where a stall hurts most (between
 * a start and its cancel, or right after a reset), so that the run shows a
 * stall past the delay counted, not failed. A not-taken branch otherwise.
 */
static inline void maybe_stall(struct worker *w)
{
	if (__builtin_expect(w->stall_ns != 0, 0)) {
		bench_sleep_ns(w->stall_ns);
		w->stall_ns = 0;
	}
}
/* bench_team_run, and the workers' enoent and lost summed. */
int team_run(struct team *tm, uint64_t window_ns, bench_between_fn *between, struct team_result *r,
	     struct bench_sample *out);
/* Split n ops over the team (worker 0 takes the remainder). */
void set_counts(struct team *tm, uint64_t n);

/*
 * reset-*: after the window every timer was cancelled (r->lost of them had
 * fired): check that each ended one way and each reset was applied.
 */
int check_resets(struct spoke *s, uint64_t n, const struct team_result *r,
		 struct bench_sample *out);

/* The figures every throughput run reports. */
void report_ops(struct bench_sample *out, struct extra *x, const struct team_result *r);
/* A baseline team's figures, as extras from `first` on (ns, ops/s, CPU ns, ops). */
void report_baseline(struct extra *x, enum extra_id first, const struct team_result *r);

/*
 * A service of `shards` shards (0: one per CPU), callbacks threads as
 * given (per_shard: callback_threads_per_shard), tick tick_ns. 0 or an
 * error with out->error set.
 */
int create_service(struct spoke **s, unsigned shards, unsigned callbacks, unsigned per_shard,
		   uint64_t tick_ns, struct bench_sample *out);

#endif /* SPOKE_BENCH_SERVICE_H */
