/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_util.h - what the stress programs (stress/stress_*.c) share: the
 * declarations of the stress library, built once from the util_*.c files
 * beside this header (stress/CMakeLists.txt) and linked into every program.
 *
 * Each program hammers the service of include/spoke/spoke.h with many
 * threads (4-32 on a 2-core machine: oversubscription reorders threads more)
 * and checks invariants as it goes and at the end, not just "no crash". The
 * pieces, in the order they appear below, each with (in parentheses) the
 * util_<name>.c that holds it:
 *
 *   options     --ops N       timer operations in all (start, cancel,
 *   (harness)                 cancel_sync, reset calls; 1e6 and 1000000 both
 *                             work); 0 = until --seconds
 *               --seconds S   wall-clock cap of the workload (the settle
 *                             phases after it are not counted)
 *               --seed N      printed at start; reruns the same choices (the
 *                             interleaving is the scheduler's)
 *               --threads N   worker threads (default: each round's own)
 *               --soak        long run: no op limit, 600 s unless --seconds,
 *                             the program's rounds repeat until time is up
 *   violations  VIOLATION(...) from any thread: counted, the first 20 printed
 *   (harness)   at once with the phase; the program exits 1 if there was any.
 *   watchdog    a hang ends the program (exit 3) with the phase it hung in.
 *   (harness)
 *   budget      the workers of a round take ops from one budget and stop when
 *   (harness)   the ops are done or the round's time is up, whichever first.
 *   tallies     per-thread counts of every call and its result, flushed to
 *   (harness)   shared counters in batches (no shared cache line per op).
 *   memory      resident set size from /proc/self/statm.
 *   (harness)
 *   threads     a team released together (run_threads), or a crew kept for
 *   (threads)   several phases of one round.
 *   rounds      a program's rounds, one fixed configuration (service shape,
 *   (rounds)    worker threads) each: round_next schedules one (its share of
 *               --ops and --seconds), round_begin creates its service,
 *               round_run runs its workers on the budget, round_settle_recs
 *               waits for every outcome and for spoke_stats, round_report
 *               and round_end print its counts and destroy the service. What the
 *               workers do and what the program checks besides the common
 *               invariants stay in the program.
 *   pollers     a thread that attaches to a shard and polls it; callbacks of
 *   (pollers)   timers started on an attached shard must run inside that
 *               thread's spoke_poll (unless the poller handed the shard
 *               back with spoke_detach after the start: g_handovers), and
 *               no callback of another shard may; while the shard is attached
 *               (g_attached_mask) none of its callbacks runs anywhere else.
 *   records     one `struct rec` per one-shot timer. Its state word
 *   (records)   (generation << 8 | status) is moved by compare-and-swap: the
 *               callback ARMED -> RUNNING -> FIRED, a cancel that returned 0
 *               ARMED -> CANCELLED. A second outcome (two runs, a run after a
 *               cancel won, two winning cancels, a winning cancel of a stale
 *               id) fails its CAS and is reported at once; a timer with no
 *               outcome is found by the final sweep (still ARMED). The
 *               callback's argument carries the record's index and
 *               generation, so a run that belongs to an earlier use of the
 *               record is caught too. Never early: the callback compares its
 *               start time with `earliest_ns` (its start's now + delay,
 *               lowered by every reset tried on it). REC_STRICT records have
 *               one resetter, so the exact rule holds: a run is never before
 *               the deadline of the last start/reset that returned 0, even
 *               when a later reset returned -ENOENT. cancel_sync: once it
 *               returned (0 or -ENOENT), the callback's record is not RUNNING.
 *   periodic    one `struct ptimer` per periodic timer: run n begins no
 *   (ptimers)   earlier than start + n * period (never early, no drift); a run
 *               never begins while another is inside (no overlap); exactly one
 *               cancel stops it; after an outside cancel returned 0 at most the
 *               run in progress is still to come, after cancel_sync none; after
 *               a cancel from its own callback none.
 *   settle      wait until every record has an outcome, then until
 *   (settle)    spoke_stats agrees with the tallies: started, fired and
 *               cancelled equal what the program counted, pending is 0 on
 *               every shard, and (one-shot rounds) each shard's started ==
 *               fired + cancelled + pending. And the pacer: backpressure for
 *               phases that measure memory.
 *
 * Thread-safety: everything may be called from any thread (workers,
 * callbacks on pool or shard threads, pollers) unless its comment names a
 * thread. A record is armed only by its owner (the thread that owns its
 * index range, or, in programs that never reuse records, the one that
 * claimed it) and only once it is settled.
 *
 * Inline here: only the clock, the PRNG helpers and the decoding of a
 * record's state word and callback argument, a few instructions each that
 * the programs and the library call on every step.
 */
#ifndef SPOKE_STRESS_UTIL_H
#define SPOKE_STRESS_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spoke/spoke.h>

#include "splitmix.h"
#include "test_prelude.h"

/* ---- build flavour (TEST_TSAN, TEST_ASAN: test_prelude.h) --------------------- */

/* How long "eventually" may take before the program calls it a hang. */
#define EVENTUALLY_NS ((TEST_TSAN ? 120 : 60) * SEC)

/* ---- time ---------------------------------------------------------------------- */

static inline uint64_t now_ns(void)
{
	return spoke_now_ns();
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Busy-wait until t (yielding while it is far): lands close to a deadline. */
void spin_until(uint64_t t);

/* ---- a PRNG per thread (splitmix64, tests/splitmix.h) ---------------------------- */

/* True with probability pct / 100. */
static inline bool rng_pct(struct rng *r, unsigned pct)
{
	return rng_below(r, 100) < pct;
}

static inline struct rng rng_make(uint64_t seed, uint64_t a, uint64_t b)
{
	struct rng r = {seed ^ (a * 0xd1342543de82ef95ull) ^ (b * 0x9e3779b97f4a7c15ull)};

	(void)rng_next(&r);
	return r;
}

/* ---- options, violations, phase, watchdog (util_harness.c) ------------------------ */

struct stress_opts {
	uint64_t ops;	  /* timer operations in all; 0 = until `seconds` */
	double seconds;	  /* wall-clock cap of the workload */
	unsigned threads; /* 0 = each round's own */
	bool soak;
};

extern const char *g_name;	 /* the program's name in every message */
extern uint64_t g_seed;		 /* --seed, or drawn at start */
extern uint64_t g_t0_ns;	 /* when stress_init ran */
extern struct stress_opts g_opt; /* the parsed options */

/*
 * Parse the common options, print the seed, start the watchdog; def_ops is
 * the program's default op count (what CI runs in a plain build; a quarter
 * of it in a TSan build), def_seconds its default time cap.
 */
void stress_init(int argc, char **argv, const char *name, const char *what, uint64_t def_ops,
		 double def_seconds);

/* Name the phase the program is in (violations and the watchdog print it). */
void stress_phase(const char *p);

__attribute__((format(printf, 3, 4))) void stress_violation(const char *file, int line,
							    const char *fmt, ...);

#define VIOLATION(...) stress_violation(__FILE__, __LINE__, __VA_ARGS__)

/* The exit status: 0 if every invariant held. Prints the summary line. */
int stress_finish(void);

/* A zeroed, 64-byte aligned array of n elements of `size` bytes (exits if out of memory). */
void *stress_table_alloc(size_t n, size_t size, const char *what);

/* Resident set size in bytes (/proc/self/statm). */
uint64_t rss_bytes(void);

/* ---- tallies and the op budget (util_harness.c) ------------------------------------ */

enum tally_kind {
	TK_START,
	TK_CANCEL_OK,
	TK_CANCEL_NOENT,
	TK_SYNC_OK,
	TK_SYNC_NOENT,
	TK_SYNC_DEADLK,
	TK_RESET_OK,
	TK_RESET_NOENT,
	TK_START_REFUSED, /* starts refused with -ENOBUFS: the shard's inbox at its limit */
	TK_TIMER_OPS,	  /* kinds above are timer operations (what --ops counts) */
	TK_SHUTDOWN = TK_TIMER_OPS, /* calls that returned -ESHUTDOWN */
	TK_POLL,
	TK_PROBE,	/* calls made only to learn of a shutdown (not operations) */
	TK_FIRED,	/* callback runs (not an operation) */
	TK_EARLY_CATCH, /* cancels that won within a tick of the deadline */
	TK_COUNT
};

/* The shared counts; a thread's own reach them in batches (tally_flush). */
extern _Atomic uint64_t g_tally[TK_COUNT];

/* Count one call of kind k on this thread. */
void tally(enum tally_kind k);
/* Move this thread's counts to the shared ones (and the budget). */
void tally_flush(void);
void tally_snapshot(uint64_t out[TK_COUNT]);
/* Print the counts since `before` (a tally_snapshot) under a label. */
void tally_report(const char *label, const uint64_t before[TK_COUNT], double secs);

/* Main thread, before a round's workers start: ops (0 = no limit) within seconds. */
void budget_begin(uint64_t ops, double seconds);
/* Is the round's budget spent (ops done or time up)? Cheap: reads the clock every 32nd call. */
bool budget_over(void);

/* -ESHUTDOWN is a valid answer only while the destroy program tears a service down. */
extern atomic_int g_shutdown_ok;
/* This thread got -ESHUTDOWN: it must not call into that service again. */
extern _Thread_local bool tl_saw_shutdown;

/* Check a call's return code against what the contract allows for it. */
void check_rc(const char *call, int rc, bool enoent_ok);
/* check_rc for a start, which may also be refused (-ENOBUFS: counted, not a violation). */
void check_start_rc(const char *call, int rc);

/* ---- threads (util_threads.c) -------------------------------------------------------- */

#define MAX_THREADS 200

/* Run fn(0..n-1, ctx) on n new threads released together; return when all are done. */
void run_threads(unsigned n, void (*fn)(unsigned idx, void *ctx), void *ctx);

pthread_t thread_spawn(void *(*fn)(void *), void *arg);

/*
 * A crew: n threads kept for several phases of one round (so a later phase
 * runs on the same threads and arenas as the first, and a sanitizer's
 * per-thread memory does not count as growth). The main thread runs each
 * phase with crew_phase(), which releases the threads into fn(idx, ctx) and
 * returns when all have come back.
 */
struct crew {
	unsigned n;
	void (*fn)(unsigned idx, void *ctx);
	void *ctx;
	atomic_int quit;
	pthread_barrier_t go, done;
	pthread_t t[MAX_THREADS];
	struct crew_member {
		struct crew *c;
		unsigned idx;
	} m[MAX_THREADS];
};

void crew_start(struct crew *c, unsigned n, void (*fn)(unsigned, void *), void *ctx);
/* Let the crew into fn ... */
void crew_release(struct crew *c);
/* ... and wait until all have come back. */
void crew_wait(struct crew *c);
void crew_phase(struct crew *c);
void crew_stop(struct crew *c);

/* A PRNG for whatever thread runs a callback (pool, shard, poller), seeded once per thread. */
struct rng *tl_rng(void);

/* ---- the service and the rounds (util_rounds.c) ------------------------------------------ */

struct svc_shape {
	unsigned shards;
	uint64_t tick_ns;
	unsigned pool;	      /* callback threads; 0 = inline on the shard threads */
	uint64_t lawn_shards; /* 0 = all */
	unsigned inbox_limit; /* 0 = spoke_config_init's */
};

/* One configuration of a program's rounds: the service, and its worker threads. */
struct round_cfg {
	struct svc_shape shape;
	unsigned threads; /* --threads overrides */
};

/*
 * The round in progress: its schedule (round_next), then its setting-up
 * (round_begin). Main thread; workers read it (through their context) while
 * the round runs, and nothing in it changes then.
 */
struct round {
	unsigned i;		    /* its index: 0, 1, ... */
	unsigned cfg;		    /* its configuration: i % n */
	unsigned begun;		    /* rounds scheduled so far */
	uint64_t ops;		    /* its share of --ops; 0 = until secs */
	double secs;		    /* its share of --seconds */
	uint64_t t0_ns;		    /* when it was scheduled */
	uint64_t seed;		    /* g_seed + i: its workers' PRNGs start from it */
	struct svc_shape shape;	    /* of its service */
	unsigned threads;	    /* its workers: the configuration's, or --threads */
	bool quiet;		    /* the program's: round_begin and round_report print nothing */
	struct spoke *s;	    /* its service (NULL once destroyed) */
	uint64_t created[TK_COUNT]; /* the tallies when the service was created */
};

/*
 * Schedule the next of a program's n configurations: round i gets ops/n and
 * seconds/n. With --soak the configurations repeat until the time is used
 * up, each round a slice of seconds/n, at most 60 s. False when done.
 */
bool round_next(struct round *rd, unsigned n);

/*
 * Set it up: its workers, its service, its starting tallies; print "round
 * i: <shape>, <threads>" and the program's note (NULL: none). The program
 * then allocates its records or periodic slots (sized by rd->threads).
 */
void round_begin(struct round *rd, const struct round_cfg *c, const char *note);

/* Enter phase `phase` with the round's budget. */
void round_budget(struct round *rd, const char *phase);

/* round_budget, then fn(0..threads-1, ctx) on the round's workers until they return. */
void round_run(struct round *rd, const char *phase, void (*fn)(unsigned idx, void *ctx), void *ctx);

/* One-shot rounds, workers joined: every record gets its outcome and spoke_stats agrees. */
void round_settle_recs(struct round *rd);

/* Print the round's counts so far under a label (unless quiet). */
void round_report(const struct round *rd, const char *label);

/* Destroy its service (unless the program did: rd->s NULL) and free records and slots. */
void round_end(struct round *rd);

/* ---- pollers: attached shards (util_pollers.c) -------------------------------------------- */

struct poller;
typedef void poller_work_fn(struct poller *p, struct rng *r);

struct poller {
	struct spoke *s;
	unsigned shard;
	uint64_t seed;
	/* Optional work on the poller's own thread between polls (main may clear it). */
	_Atomic(poller_work_fn *) work;
	atomic_int attached;	      /* spoke_attach returned 0 */
	atomic_int handover;	      /* main: now and then detach and re-attach between polls */
	uint64_t handovers;	      /* detach + attach cycles done */
	atomic_int stop;	      /* main: stop polling */
	atomic_int stopped;	      /* it has stopped calling in */
	atomic_uint loops;	      /* turns of its loop so far */
	uint64_t polls, over_reports; /* polls; polls that reported more callbacks than ran */
	pthread_t tid;
};

extern _Thread_local struct poller *tl_poller; /* set on a poller thread */
/* Shards whose spoke_attach has returned (set by the pollers; main clears it per service). */
extern _Atomic uint64_t g_attached_mask;
/*
 * Per shard: how many times its poller gave it back (spoke_detach) so far.
 * A poller clears its shard's g_attached_mask bit, then counts the handover,
 * then detaches; rec_start reads the count, then the mask. So a record
 * tagged REC_ON_POLLER whose callback runs off the poller (on the pool, after
 * a detach) finds the count moved on since its start - that is allowed - and
 * one that runs off the poller with the count unchanged is a violation.
 */
extern _Atomic uint16_t g_handovers[64];

/* Called by every callback: attached-shard rules (see records). */
void poller_note_run(void);

/* The poller's thread (arg: its struct poller): attach, poll until stopped. */
void *poller_main(void *arg);

/* Start a poller on shard k; waits until it is attached unless wait is false. */
void poller_start(struct poller *p, struct spoke *s, unsigned k, poller_work_fn *work, bool wait);

/*
 * Main: take the poller's work away and wait until it has finished a whole
 * turn without it (the turn in progress may still be inside the old work,
 * preempted for milliseconds on a busy machine).
 */
void poller_quiesce(struct poller *p);
void poller_stop(struct poller *p);

/* ---- records: one per one-shot timer (util_records.c) -------------------------------------- */

enum rec_status {
	REC_IDLE,      /* never started, or checked by a sweep */
	REC_ARMED,     /* started, no outcome yet */
	REC_RUNNING,   /* its callback is inside */
	REC_FIRED,     /* its callback ran (and returned) */
	REC_CANCELLED, /* a cancel returned 0 */
};

#define REC_SHARD_ANY UINT32_MAX
#define REC_STRICT    1u /* one resetter: runs are checked against its last successful deadline */
#define REC_ON_POLLER 2u /* started on a shard already attached: must run inside its poll */
#define REC_TAG_SHIFT 8	 /* bits above: the program's own */
#define REC_IDX_BITS  24
#define REC_MAX	      (1u << REC_IDX_BITS)

struct rec {
	_Atomic uint64_t word;	 /* generation << 8 | enum rec_status */
	_Atomic uint64_t id;	 /* the service's id of generation id_gen */
	_Atomic uint64_t id_gen; /* published after the start returned */
	_Atomic uint64_t
		earliest_ns;	/* no run before: start's now + delay, lowered by resets tried */
	_Atomic uint64_t ok_ns; /* REC_STRICT: deadline of the last start/reset that returned 0 */
	_Atomic uint64_t fired_ns; /* when its callback began */
	_Atomic uint32_t shard;	   /* shard it was started on, or REC_SHARD_ANY */
	_Atomic uint32_t tag;	   /* REC_* | program bits << REC_TAG_SHIFT */
	_Atomic uint16_t how;	   /* enum start_how of its start (for messages) */
	_Atomic uint16_t handover; /* REC_ON_POLLER: g_handovers[shard] when it was started */
	_Atomic uint32_t resets;   /* resets of this generation that returned 0 */
} __attribute__((aligned(64)));

extern struct rec *g_recs;
extern size_t g_nrecs;

/* Optional, set by a program: what its record callbacks do besides the checks. */
extern void (*g_fire_hook)(struct rec *r, size_t idx, uint64_t gen);
extern uint64_t g_fire_spin_ns; /* callbacks spin up to this long (random), widening races */
/* The callback of (idx, gen) is running on this thread (cancel_sync gets -EDEADLK). */
extern _Thread_local void *tl_running_arg;

void recs_alloc(size_t n); /* round_end frees it */

static inline uint64_t rec_word(uint64_t gen, unsigned st)
{
	return gen << 8 | st;
}

static inline uint64_t rec_gen(uint64_t w)
{
	return w >> 8;
}

static inline unsigned rec_status(uint64_t w)
{
	return (unsigned)(w & 0xff);
}

static inline bool rec_settled(uint64_t w)
{
	unsigned st = rec_status(w);

	return st == REC_IDLE || st == REC_FIRED || st == REC_CANCELLED;
}

/* Callback argument: index and generation (a run of an earlier use is told apart). */
static inline void *arg_encode(size_t idx, uint64_t gen)
{
	return (void *)(uintptr_t)(gen << REC_IDX_BITS | idx);
}

static inline size_t arg_idx(void *a)
{
	return (size_t)((uintptr_t)a & (REC_MAX - 1));
}

static inline uint64_t arg_gen(void *a)
{
	return (uint64_t)(uintptr_t)a >> REC_IDX_BITS;
}

enum start_how {
	HOW_ON,	  /* spoke_start_on(shard) */
	HOW_HOME, /* spoke_start: the caller's attached shard, else its CPU's */
	HOW_TTL,  /* spoke_start_ttl: the Lawn shard of the TTL */
};

/* The record callback: checks, optional spin, the program's hook. */
void rec_fire(void *arg);

/*
 * Owner: start a one-shot timer (callback rec_fire) for record idx, which
 * must be settled. shard: for HOW_ON. tag: REC_* | program bits. Returns
 * the start's result.
 */
int rec_start(struct spoke *s, size_t idx, enum start_how how, unsigned shard, uint64_t delay_ns,
	      uint32_t tag);

/*
 * Cancel (sync: cancel_sync) the timer of record idx if it is armed or
 * running. Returns the call's result, or 1 if there was nothing to cancel.
 */
int rec_cancel(struct spoke *s, size_t idx, bool sync);

/*
 * Reset the timer of record idx (if armed) to now + delay. If the record is
 * REC_STRICT (the caller is its only resetter), a 0 moves the exact bound.
 * Returns the call's result, or 1 if it was not armed.
 */
int rec_reset(struct spoke *s, size_t idx, uint64_t delay_ns);

/*
 * One step of a thread on a record it owns, the loop most workloads are
 * made of: an armed timer is cancelled (cancel_sync sync_pct% of those),
 * reset, or left alone; a settled record gets a new timer - spoke_start_on a
 * random shard, spoke_start, or spoke_start_ttl. Percentages out of 100.
 */
struct step_mix {
	unsigned cancel_pct, sync_pct, reset_pct; /* armed */
	unsigned on_pct, home_pct;		  /* settled; the rest: spoke_start_ttl */
	unsigned nshards;
	uint32_t tag; /* REC_STRICT when the caller is the timer's only resetter */
	uint64_t (*start_delay)(struct rng *r, const void *ctx);
	uint64_t (*reset_delay)(struct rng *r, const void *ctx);
	const void *ctx;
};

/* Returns what the call returned, or 1 if it made none (running, or left alone). */
int rec_step(struct spoke *s, size_t idx, struct rng *r, const struct step_mix *m);

/*
 * The mix of a thread that is the only resetter of its records (REC_STRICT):
 * cancel_pct% of the armed ones cancelled (sync_pct% of those with
 * cancel_sync), 25% reset; a settled one started on_pct% on a random one
 * of nshards, 25% on the thread's home shard, the rest as TTL timers; every
 * start and reset for delay(). step_mix_poller: the same for a thread that
 * polls its own attached shard, whose starts go 70% to that shard.
 */
struct step_mix step_mix_strict(unsigned cancel_pct, unsigned sync_pct, unsigned on_pct,
				unsigned nshards,
				uint64_t (*delay)(struct rng *r, const void *ctx));
struct step_mix step_mix_poller(struct step_mix m);

/* Spin for a random time up to g_fire_spin_ns (a callback that takes a while). */
void fire_spin(void);

/* Owner: wait (bounded) until record idx is settled; false (reported) if it never is. */
bool rec_wait_settled(size_t idx);

/* Main thread, workers joined: cancel what is still armed in [lo, hi). */
void recs_cancel_remaining(struct spoke *s, size_t lo, size_t hi);

/*
 * Main thread, workers joined: wait until every record in [lo, hi) has an
 * outcome, check the strict rule, and mark them checked (IDLE). Returns
 * the number that never got one (each reported, the first few by name).
 */
size_t recs_sweep(size_t lo, size_t hi);

/* ---- periodic timers (util_ptimers.c) ------------------------------------------------------ */

struct ptimer {
	_Atomic uint64_t gen;	     /* current use of the slot */
	_Atomic uint64_t id, id_gen; /* as for records */
	_Atomic uint64_t start_ns;   /* taken before the start call */
	_Atomic uint64_t period_ns;
	atomic_uint entered;  /* runs begun */
	atomic_uint inside;   /* a run is in progress */
	atomic_uint stops;    /* cancels that stopped it (exactly one) */
	atomic_uint max_runs; /* runs it may still have had, once stopped */
	atomic_uint plan;     /* the program's: how it dies */
	atomic_uint plan_arg;
	atomic_uint pins; /* threads inside per_cancel: the owner waits before reuse */
} __attribute__((aligned(64)));

extern struct ptimer *g_pers;
extern size_t g_npers;
/* Optional: what a periodic callback does after the checks (run n of slot idx). */
extern void (*g_per_hook)(struct ptimer *p, size_t idx, uint64_t gen, unsigned n);

void pers_alloc(size_t n); /* round_end frees it */

/*
 * Owner: start a periodic timer in slot idx (settled: never used, or stopped
 * and fenced by per_settle). The new generation is published first, so a
 * per_cancel that has not taken its snapshot yet finds the slot changing and
 * skips it; one that has (pinned) is waited for before the fields are reset.
 */
int per_start(struct spoke *s, size_t idx, uint64_t period_ns, unsigned plan, unsigned plan_arg);

/* The slot's current (generation, id), or false if its id is not published yet. */
bool per_snapshot(struct ptimer *p, uint64_t *gen, spoke_id *id);

/*
 * Cancel (sync: cancel_sync) the periodic timer in slot idx, from outside
 * its callback; only if the low byte of its plan is only_plan (per_cancel:
 * any plan). Returns the call's result, or 1 if the slot has no published
 * timer (of that plan).
 */
int per_cancel_plan(struct spoke *s, size_t idx, bool sync, int only_plan);
int per_cancel(struct spoke *s, size_t idx, bool sync);

/*
 * From run n of p's own callback: cancel it (sync: cancel_sync, which must
 * give -EDEADLK and still stop it). counts: this call is known to be the only
 * canceller, so its effect is the stop. No run may follow this one.
 */
void per_cancel_own(struct spoke *s, struct ptimer *p, uint64_t gen, unsigned n, bool sync,
		    bool counts);

/*
 * Owner, after the timer of slot idx was stopped: cancel_sync its id (which
 * must not find it live) so that no run is in progress, then check its runs.
 * Returns true when the slot may be reused.
 */
bool per_settle(struct spoke *s, size_t idx);

/* ---- settling and spoke_stats (util_settle.c) ------------------------------------------------ */

struct expect {
	uint64_t started, fired, cancelled, refused;
	bool oneshot_only; /* per shard: started == fired + cancelled + pending */
};

/* What the tallies since `before` say the service must report. */
struct expect expect_since(const uint64_t before[TK_COUNT], bool oneshot_only);

/* Main thread: wait until the service's counts agree with e (or report why they never do). */
void settle_stats(struct spoke *s, const struct expect *e);

/* settle_stats for a one-shot workload: what the tallies since `since` say. */
void settle_oneshot_stats(struct spoke *s, const uint64_t since[TK_COUNT]);

/*
 * Main thread, workers joined: cancel what is still armed, sweep every
 * record for its one outcome, then settle_oneshot_stats.
 */
void recs_settle(struct spoke *s, const uint64_t since[TK_COUNT]);

/*
 * Backpressure for phases that measure memory (util_settle.c says why):
 * while a pacer is on, pace() makes a worker wait whenever the owners are
 * far behind.
 */
struct pacer {
	struct spoke *s;
	const uint64_t *since; /* tallies when the service was created */
	_Atomic uint64_t max_backlog, pauses;
};

void pacer_start(struct pacer *p, struct spoke *s, const uint64_t *since);
void pacer_stop(struct pacer *p);
/* Workers: wait while the owners are behind (only while a pacer is on). */
void pace(void);

#endif /* SPOKE_STRESS_UTIL_H */
