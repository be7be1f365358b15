/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_team.h - the harness every multithreaded workload of spoke-bench
 * runs in: T threads started, pinned, prepared, let go together through one
 * gate, stopped by a flag (a window) or by their counts, joined, and their
 * counts and times summed.
 *
 * Each thread runs: pin (if tm->pin, to CPU index % CPUs), prepare
 * (untimed), wait at the gate; once main opens it, the body, timed on
 * CLOCK_MONOTONIC and the thread's CPU clock, and finish (untimed: what
 * the thread must still do once the window is over). A body that runs for a window
 * is bench_window_loop(): its operation in batches, a look at the stop flag
 * after each. Main's side is bench_team_run(), or step by step:
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
 *
 * Synchronization: the gate's fields under `mu`; `stop` is written by main
 * and read by every team thread (relaxed: it only ends a window, the join
 * orders everything else); a thread's struct is its own until the join.
 */
#ifndef SPOKE_BENCH_TEAM_H
#define SPOKE_BENCH_TEAM_H

#include "bench_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define BENCH_STOP_EVERY  64   /* a window's ops between looks at the stop flag */
#define BENCH_EVERY_BATCH 4096 /* ops between a window's `every` calls (a poll) */

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
	bench_thread_fn *finish;  /* after the body, untimed (skipped with the body); NULL: none */
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

/*
 * Main, between everyone's prepare and the window (a wait until the
 * service took the setup, say): 0, or a negative errno with out->error set.
 */
typedef int bench_between_fn(void *ctx, struct bench_sample *out);

/*
 * The whole of a team's run: start, wait until all prepared, `between`
 * (NULL: none), open the gate, then window_ns > 0: raise the stop flag after
 * that long; 0: the bodies end by their own counts. Join and sum into *r.
 * 0, or a negative errno with out->error set (a thread's failure names the
 * thread and what failed; no operation done at all is one too).
 */
int bench_team_run(struct bench_team *tm, uint64_t window_ns, bench_between_fn *between, void *ctx,
		   struct bench_team_result *r, struct bench_sample *out);

/* Team thread: has main raised the stop flag? */
static inline bool bench_team_stopping(const struct bench_thread *t)
{
	return atomic_load_explicit(&t->team->stop, memory_order_relaxed) != 0;
}

/* Team thread: record its first failure (err 0 counts as -EPROTO). */
void bench_thread_fail(struct bench_thread *t, int err, const char *what);

/* One op of a windowed body (a pair, a reset, ...): 0 or an error. Team thread. */
typedef int bench_op_fn(struct bench_thread *t);

/*
 * Team thread: a windowed body. op in batches of BENCH_STOP_EVERY until the
 * window is over, and every BENCH_EVERY_BATCH ops `every` (NULL: none; an
 * attached shard's spoke_poll, say). The stop flag is tested at the bottom
 * (do-while), so a thread the scheduler kept off the CPU for the whole
 * (short, --quick) window still does one batch instead of turning the run
 * into an error. t->ops gets the count; an op's or `every`'s error fails
 * the thread with `what`. Always inlined into each body with constant
 * functions, which are then inlined too: no call per op.
 */
static inline __attribute__((always_inline)) void
bench_window_loop(struct bench_thread *t, bench_op_fn *op, bench_op_fn *every, const char *what)
{
	uint64_t ops = 0;
	int err = 0;

	do {
		for (int k = 0; k < BENCH_STOP_EVERY; k++)
			err |= op(t);
		ops += BENCH_STOP_EVERY;
		if (every && ops % BENCH_EVERY_BATCH == 0)
			err |= every(t);
	} while (!bench_team_stopping(t));
	t->ops = ops;
	if (err)
		bench_thread_fail(t, -EPROTO, what);
}

/* ns per op (0 when there were none). */
static inline double bench_per_op(double ns, uint64_t ops)
{
	return ops ? ns / (double)ops : 0;
}

#endif /* SPOKE_BENCH_TEAM_H */
