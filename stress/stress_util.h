/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stress_util.h - what the stress programs (stress/stress_*.c) share.
 *
 * Each program hammers the service of include/spoke/spoke.h with many
 * threads (4-32 on a 2-core machine: oversubscription reorders threads more)
 * and checks invariants as it goes and at the end, not just "no crash". The
 * pieces, in the order they appear below:
 *
 *   options     --ops N       timer operations in all (start, cancel,
 *                             cancel_sync, reset calls; 1e6 and 1000000 both
 *                             work); 0 = until --seconds
 *               --seconds S   wall-clock cap of the workload (the settle
 *                             phases after it are not counted)
 *               --seed N      printed at start; reruns the same choices (the
 *                             interleaving is the scheduler's)
 *               --threads N   worker threads (default: each round's own)
 *               --soak        long run: no op limit, 600 s unless --seconds,
 *                             the program's rounds repeat until time is up
 *   budget      the workers of a round take ops from one budget and stop when
 *               the ops are done or the round's time is up, whichever first.
 *   tallies     per-thread counts of every call and its result, flushed to
 *               shared counters in batches (no shared cache line per op).
 *   violations  VIOLATION(...) from any thread: counted, the first 20 printed
 *               at once with the phase; the program exits 1 if there was any.
 *   records     one `struct rec` per one-shot timer. Its state word
 *               (generation << 8 | status) is moved by compare-and-swap: the
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
 *               earlier than start + n * period (never early, no drift); a run
 *               never begins while another is inside (no overlap); exactly one
 *               cancel stops it; after an outside cancel returned 0 at most the
 *               run in progress is still to come, after cancel_sync none; after
 *               a cancel from its own callback none.
 *   pollers     a thread that attaches to a shard and polls it; callbacks of
 *               timers started on an attached shard must run inside that
 *               thread's spoke_poll (unless the poller handed the shard
 *               back with spoke_detach after the start: g_handovers), and
 *               no callback of another shard may; while the shard is attached
 *               (g_attached_mask) none of its callbacks runs anywhere else.
 *   settle      wait until every record has an outcome, then until
 *               spoke_stats agrees with the tallies: started, fired and
 *               cancelled equal what the program counted, pending is 0 on
 *               every shard, and (one-shot rounds) each shard's started ==
 *               fired + cancelled + pending.
 *   memory      resident set size from /proc/self/statm.
 *   watchdog    a hang ends the program (exit 3) with the phase it hung in.
 *
 * Thread-safety: everything may be called from any thread (workers,
 * callbacks on pool or shard threads, pollers) unless its comment names a
 * thread. A record is armed only by its owner (the thread that owns its
 * index range, or, in programs that never reuse records, the one that
 * claimed it) and only once it is settled.
 *
 * Header only, everything static; each program includes it once.
 */
#ifndef SPOKE_STRESS_UTIL_H
#define SPOKE_STRESS_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
static inline void spin_until(uint64_t t)
{
	uint64_t n;

	while ((n = now_ns()) < t)
		if (t - n > 50 * US)
			sched_yield();
}

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

/* ---- violations, phase, watchdog ------------------------------------------------- */

static const char *g_name = "stress";
static _Atomic(const char *) g_phase = "start";
static atomic_uint g_violations;
static uint64_t g_seed;
static uint64_t g_t0_ns;

static inline void stress_phase(const char *p)
{
	atomic_store(&g_phase, p);
}

__attribute__((format(printf, 3, 4))) static inline void
stress_violation(const char *file, int line, const char *fmt, ...)
{
	unsigned n = atomic_fetch_add(&g_violations, 1) + 1;
	char msg[512];
	va_list ap;

	if (n > 20)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: VIOLATION #%u [%s, seed %" PRIu64 ", %.3f s] %s:%d: %s\n", g_name, n,
		atomic_load(&g_phase), g_seed, (double)(now_ns() - g_t0_ns) / 1e9, file, line, msg);
}

#define VIOLATION(...) stress_violation(__FILE__, __LINE__, __VA_ARGS__)

static _Atomic uint64_t g_watchdog_ns; /* 0 = off */

static inline void *watchdog_main(void *p)
{
	(void)p;
	for (;;) {
		uint64_t d = atomic_load(&g_watchdog_ns);

		if (d && now_ns() > d) {
			fprintf(stderr,
				"%s: HANG: still in phase '%s' %.1f s after start (seed %" PRIu64
				"); giving up\n",
				g_name, atomic_load(&g_phase), (double)(now_ns() - g_t0_ns) / 1e9,
				g_seed);
			fflush(stderr);
			_exit(3);
		}
		sleep_ns(200 * MS);
	}
	return NULL;
}

/* The program must be done within `s` seconds from now, or it is hung. */
static inline void watchdog_arm(double s)
{
	atomic_store(&g_watchdog_ns, now_ns() + (uint64_t)(s * 1e9));
}

/* ---- options ---------------------------------------------------------------------- */

struct stress_opts {
	uint64_t ops;	  /* timer operations in all; 0 = until `seconds` */
	double seconds;	  /* wall-clock cap of the workload */
	unsigned threads; /* 0 = each round's own */
	bool soak;
};

static struct stress_opts g_opt;

static inline uint64_t parse_count(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v < 0 || v > 1e15) {
		fprintf(stderr, "%s: bad %s '%s'\n", g_name, what, s);
		exit(2);
	}
	return (uint64_t)v;
}

static inline void usage(const char *what)
{
	fprintf(stderr,
		"usage: %s [--ops N] [--seconds S] [--seed N] [--threads N] [--soak]\n"
		"  %s\n"
		"  --ops N      timer operations (start/cancel/cancel_sync/reset) in all; 0 = "
		"until --seconds\n"
		"  --seconds S  wall-clock cap of the workload\n"
		"  --seed N     seed of the random choices (printed at start)\n"
		"  --threads N  worker threads (default: per round)\n"
		"  --soak       long run: no op limit, 600 s unless --seconds, rounds repeat\n",
		g_name, what);
}

/*
 * Parse the common options; def_ops is the program's default op count
 * (what CI runs in a plain build; a quarter of it in a TSan build),
 * def_seconds its default time cap.
 */
static inline void stress_init(int argc, char **argv, const char *name, const char *what,
			       uint64_t def_ops, double def_seconds)
{
	bool seed_given = false, seconds_given = false, ops_given = false;
	pthread_t wd;

	g_name = name;
	g_t0_ns = now_ns();
	g_opt.ops = TEST_TSAN ? def_ops / 4 : def_ops;
	g_opt.seconds = def_seconds;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--soak")) {
			g_opt.soak = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(what);
			exit(0);
		} else if (v && !strcmp(a, "--ops")) {
			g_opt.ops = parse_count(v, "--ops");
			ops_given = true;
			i++;
		} else if (v && !strcmp(a, "--seconds")) {
			g_opt.seconds = (double)parse_count(v, "--seconds");
			seconds_given = true;
			i++;
		} else if (v && !strcmp(a, "--seed")) {
			g_seed = strtoull(v, NULL, 0);
			seed_given = true;
			i++;
		} else if (v && !strcmp(a, "--threads")) {
			g_opt.threads = (unsigned)parse_count(v, "--threads");
			if (g_opt.threads < 1 || g_opt.threads > 200) {
				fprintf(stderr, "%s: --threads must be 1..200\n", name);
				exit(2);
			}
			i++;
		} else {
			usage(what);
			exit(2);
		}
	}
	if (g_opt.soak) {
		if (!ops_given)
			g_opt.ops = 0;
		if (!seconds_given)
			g_opt.seconds = 600;
	}
	if (g_opt.ops == 0 && g_opt.seconds <= 0) {
		fprintf(stderr, "%s: --ops 0 needs --seconds\n", name);
		exit(2);
	}
	if (!seed_given)
		g_seed = (now_ns() ^ ((uint64_t)getpid() << 32)) & 0xffffffffffffull;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("%s: seed %" PRIu64 " ops %" PRIu64 " seconds %.0f%s%s (%s)\n", name, g_seed,
	       g_opt.ops, g_opt.seconds, g_opt.soak ? " soak" : "",
	       TEST_TSAN   ? " tsan"
	       : TEST_ASAN ? " asan"
			   : "",
	       what);
	/* Workload cap + settling (at most EVENTUALLY_NS a wait) + a margin. */
	watchdog_arm(g_opt.seconds + 2.0 * (double)EVENTUALLY_NS / 1e9 + 60);
	if (pthread_create(&wd, NULL, watchdog_main, NULL) == 0)
		pthread_detach(wd);
}

/* ---- tallies and the op budget ---------------------------------------------------- */

enum tally_kind {
	TK_START,
	TK_CANCEL_OK,
	TK_CANCEL_NOENT,
	TK_SYNC_OK,
	TK_SYNC_NOENT,
	TK_SYNC_DEADLK,
	TK_RESET_OK,
	TK_RESET_NOENT,
	TK_TIMER_OPS,		    /* kinds above are timer operations (what --ops counts) */
	TK_SHUTDOWN = TK_TIMER_OPS, /* calls that returned -ESHUTDOWN */
	TK_POLL,
	TK_PROBE,	/* calls made only to learn of a shutdown (not operations) */
	TK_FIRED,	/* callback runs (not an operation) */
	TK_EARLY_CATCH, /* cancels that won within a tick of the deadline */
	TK_COUNT
};

static const char *const tally_name[TK_COUNT] = {
	"start",
	"cancel=0",
	"cancel=ENOENT",
	"cancel_sync=0",
	"cancel_sync=ENOENT",
	"cancel_sync=EDEADLK",
	"reset=0",
	"reset=ENOENT",
	"ESHUTDOWN",
	"poll",
	"probe",
	"fired",
	"late-cancel-won",
};

static _Atomic uint64_t g_tally[TK_COUNT];
static _Thread_local uint64_t tl_tally[TK_COUNT];
static _Thread_local unsigned tl_unflushed;

struct budget {
	uint64_t ops;	 /* 0 = no limit */
	uint64_t end_ns; /* time cap */
	_Atomic uint64_t done;
	atomic_int over;
	int by_time; /* the time cap ended it */
};

static struct budget g_budget;

/* Main thread, before a round's workers start. */
static inline void budget_begin(uint64_t ops, double seconds)
{
	g_budget.ops = ops;
	g_budget.end_ns = seconds > 0 ? now_ns() + (uint64_t)(seconds * 1e9) : UINT64_MAX;
	atomic_store(&g_budget.done, 0);
	atomic_store(&g_budget.over, 0);
	g_budget.by_time = 0;
}

static inline void budget_charge(uint64_t n)
{
	uint64_t d = atomic_fetch_add_explicit(&g_budget.done, n, memory_order_relaxed) + n;

	if (g_budget.ops && d >= g_budget.ops)
		atomic_store_explicit(&g_budget.over, 1, memory_order_relaxed);
}

/* Is the round's budget spent (ops done or time up)? Cheap: reads the clock every 32nd call. */
static inline bool budget_over(void)
{
	static _Thread_local unsigned calls;

	if (atomic_load_explicit(&g_budget.over, memory_order_relaxed))
		return true;
	if ((++calls & 31) == 0 && now_ns() >= g_budget.end_ns) {
		g_budget.by_time = 1;
		atomic_store_explicit(&g_budget.over, 1, memory_order_relaxed);
		return true;
	}
	return false;
}

/* Move this thread's counts to the shared ones (and the budget). */
static inline void tally_flush(void)
{
	for (int k = 0; k < TK_COUNT; k++) {
		if (tl_tally[k]) {
			atomic_fetch_add_explicit(&g_tally[k], tl_tally[k], memory_order_relaxed);
			tl_tally[k] = 0;
		}
	}
	if (tl_unflushed) {
		budget_charge(tl_unflushed);
		tl_unflushed = 0;
	}
}

static inline void tally(enum tally_kind k)
{
	tl_tally[k]++;
	if (k < TK_TIMER_OPS && ++tl_unflushed >= 256)
		tally_flush();
}

static inline void tally_snapshot(uint64_t out[TK_COUNT])
{
	for (int k = 0; k < TK_COUNT; k++)
		out[k] = atomic_load(&g_tally[k]);
}

static inline uint64_t tally_ops(const uint64_t t[TK_COUNT])
{
	uint64_t n = 0;

	for (int k = 0; k < TK_TIMER_OPS; k++)
		n += t[k];
	return n;
}

/* Print the counts since `before` (a tally_snapshot) under a label. */
static inline void tally_report(const char *label, const uint64_t before[TK_COUNT], double secs)
{
	uint64_t now[TK_COUNT], d[TK_COUNT];

	tally_snapshot(now);
	for (int k = 0; k < TK_COUNT; k++)
		d[k] = now[k] - before[k];
	printf("  %s: %" PRIu64 " ops in %.2f s%s;", label, tally_ops(d), secs,
	       g_budget.by_time ? " (time cap)" : "");
	for (int k = 0; k < TK_COUNT; k++)
		if (d[k])
			printf(" %s %" PRIu64, tally_name[k], d[k]);
	printf("\n");
}

/* -ESHUTDOWN is a valid answer only while the destroy program tears a service down. */
static atomic_int g_shutdown_ok;
/* This thread got -ESHUTDOWN: it must not call into that service again. */
static _Thread_local bool tl_saw_shutdown;

/* Check a call's return code against what the contract allows for it. */
static inline void check_rc(const char *call, int rc, bool enoent_ok)
{
	if (rc == 0 || (enoent_ok && rc == -ENOENT))
		return;
	if (rc == -ESHUTDOWN && atomic_load_explicit(&g_shutdown_ok, memory_order_relaxed)) {
		tally(TK_SHUTDOWN);
		tl_saw_shutdown = true;
		return;
	}
	VIOLATION("%s returned %d (%s)", call, rc, strerror(-rc));
}

/* ---- threads ------------------------------------------------------------------------ */

#define MAX_THREADS 200

struct worker_arg {
	unsigned idx;
	void (*fn)(unsigned idx, void *ctx);
	void *ctx;
	pthread_barrier_t *bar;
};

static inline void *worker_main(void *p)
{
	struct worker_arg *w = p;

	pthread_barrier_wait(w->bar);
	w->fn(w->idx, w->ctx);
	tally_flush();
	return NULL;
}

/* Run fn(0..n-1, ctx) on n new threads released together; return when all are done. */
static inline void run_threads(unsigned n, void (*fn)(unsigned idx, void *ctx), void *ctx)
{
	pthread_t t[MAX_THREADS];
	struct worker_arg w[MAX_THREADS];
	pthread_barrier_t bar;

	if (n == 0 || n > MAX_THREADS)
		abort();
	pthread_barrier_init(&bar, NULL, n);
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct worker_arg){.idx = i, .fn = fn, .ctx = ctx, .bar = &bar};
		if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "%s: pthread_create failed\n", g_name);
			exit(2);
		}
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
}

static inline pthread_t thread_spawn(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, arg) != 0) {
		fprintf(stderr, "%s: pthread_create failed\n", g_name);
		exit(2);
	}
	return t;
}

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

static inline void *crew_main(void *p)
{
	struct crew_member *m = p;
	struct crew *c = m->c;

	for (;;) {
		pthread_barrier_wait(&c->go);
		if (atomic_load(&c->quit))
			break;
		c->fn(m->idx, c->ctx);
		tally_flush();
		pthread_barrier_wait(&c->done);
	}
	return NULL;
}

static inline void crew_start(struct crew *c, unsigned n, void (*fn)(unsigned, void *), void *ctx)
{
	if (n == 0 || n > MAX_THREADS)
		abort();
	c->n = n;
	c->fn = fn;
	c->ctx = ctx;
	atomic_store(&c->quit, 0);
	pthread_barrier_init(&c->go, NULL, n + 1);
	pthread_barrier_init(&c->done, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		c->m[i] = (struct crew_member){.c = c, .idx = i};
		c->t[i] = thread_spawn(crew_main, &c->m[i]);
	}
}

/* Let the crew into fn ... */
static inline void crew_release(struct crew *c)
{
	pthread_barrier_wait(&c->go);
}

/* ... and wait until all have come back. */
static inline void crew_wait(struct crew *c)
{
	pthread_barrier_wait(&c->done);
}

static inline void crew_phase(struct crew *c)
{
	crew_release(c);
	crew_wait(c);
}

static inline void crew_stop(struct crew *c)
{
	atomic_store(&c->quit, 1);
	pthread_barrier_wait(&c->go);
	for (unsigned i = 0; i < c->n; i++)
		pthread_join(c->t[i], NULL);
	pthread_barrier_destroy(&c->go);
	pthread_barrier_destroy(&c->done);
}

/* A PRNG for whatever thread runs a callback (pool, shard, poller), seeded once per thread. */
static inline struct rng *tl_rng(void)
{
	static _Thread_local struct rng r;
	static _Thread_local bool seeded;
	static atomic_uint next;

	if (!seeded) {
		r = rng_make(g_seed, 0xcb, atomic_fetch_add(&next, 1));
		seeded = true;
	}
	return &r;
}

/* ---- the service --------------------------------------------------------------------- */

struct svc_shape {
	unsigned shards;
	uint64_t tick_ns;
	unsigned pool;	      /* callback threads; 0 = inline on the shard threads */
	uint64_t lawn_shards; /* 0 = all */
};

static inline struct spoke *svc_make(const struct svc_shape *sh)
{
	struct spoke_config c;
	struct spoke *s = NULL;
	int rc;

	spoke_config_init(&c);
	c.shards = sh->shards;
	c.tick_ns = sh->tick_ns;
	c.callback_threads = sh->pool;
	c.lawn_shards = sh->lawn_shards;
	rc = spoke_create(&s, &c);
	if (rc != 0) {
		fprintf(stderr, "%s: spoke_create: %d (%s)\n", g_name, rc, strerror(-rc));
		exit(2);
	}
	return s;
}

static inline void svc_describe(char *buf, size_t len, const struct svc_shape *sh, unsigned threads)
{
	snprintf(buf, len, "%u shards, tick %" PRIu64 " us, %s, %u threads", sh->shards,
		 sh->tick_ns / US,
		 sh->pool ? (sh->pool == 1 ? "pool of 1" : "pool") : "callbacks inline", threads);
	if (sh->pool > 1)
		snprintf(buf + strlen(buf), len - strlen(buf), " (%u)", sh->pool);
}

/* ---- memory -------------------------------------------------------------------------- */

/* Resident set size in bytes (/proc/self/statm). */
static inline uint64_t rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* ---- pollers (attached shards) ---------------------------------------------------------- */

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

static _Thread_local struct poller *tl_poller; /* set on a poller thread */
/* Shards whose spoke_attach has returned (set by the pollers; main clears it per service). */
static _Atomic uint64_t g_attached_mask;
/*
 * Per shard: how many times its poller gave it back (spoke_detach) so far.
 * A poller clears its shard's g_attached_mask bit, then counts the handover,
 * then detaches; rec_start reads the count, then the mask. So a record
 * tagged REC_ON_POLLER whose callback runs off the poller (on the pool, after
 * a detach) finds the count moved on since its start - that is allowed - and
 * one that runs off the poller with the count unchanged is a violation.
 */
static _Atomic uint16_t g_handovers[64];
static _Thread_local uint64_t tl_inline_runs; /* callbacks run on this thread */

/* Called by every callback: attached-shard rules (see records). */
static inline void poller_note_run(void)
{
	if (tl_poller)
		tl_inline_runs++;
}

/*
 * Poller: give the shard back to a managed thread (spoke_detach), let it
 * drive the shard for up to 500 us, then take it over again. Its timers run
 * on the pool meanwhile. False (reported) if a call did not do its part.
 */
static inline bool poller_handover(struct poller *p, struct rng *r)
{
	int rc;

	if (p->shard < 64) {
		atomic_fetch_and(&g_attached_mask, ~(1ull << p->shard));
		atomic_fetch_add(&g_handovers[p->shard], 1);
	}
	rc = spoke_detach(p->s);
	if (rc != 0) {
		VIOLATION("spoke_detach of attached shard %u returned %d", p->shard, rc);
		return false;
	}
	rc = spoke_poll(p->s);
	if (rc != -EPERM)
		VIOLATION("spoke_poll after spoke_detach returned %d, not -EPERM", rc);
	sleep_ns(rng_below(r, 500 * US));
	rc = spoke_attach(p->s, p->shard);
	if (rc != 0) {
		VIOLATION("spoke_attach(%u) after its own detach returned %d", p->shard, rc);
		return false;
	}
	if (p->shard < 64)
		atomic_fetch_or(&g_attached_mask, 1ull << p->shard);
	p->handovers++;
	return true;
}

static inline void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct rng r = rng_make(p->seed, 0xa77, p->shard);
	unsigned nsh;
	int rc;

	tl_poller = p;
	rc = spoke_attach(p->s, p->shard);
	if (rc == -ESHUTDOWN && atomic_load(&g_shutdown_ok)) {
		tl_saw_shutdown = true;
		atomic_store(&p->stopped, 1);
		return NULL;
	}
	if (rc != 0) {
		VIOLATION("spoke_attach(%u) returned %d", p->shard, rc);
		atomic_store(&p->stopped, 1);
		return NULL;
	}
	if (p->shard < 64)
		atomic_fetch_or(&g_attached_mask, 1ull << p->shard);
	atomic_store(&p->attached, 1);
	/* The thread that owns a shard cannot take a second one (0 shards: destroy began). */
	nsh = spoke_shards(p->s);
	rc = nsh ? spoke_attach(p->s, (p->shard + 1) % nsh) : -ESHUTDOWN;
	if (rc != -EBUSY && !(rc == -ESHUTDOWN && atomic_load(&g_shutdown_ok)))
		VIOLATION("a second spoke_attach from an attached thread returned %d, not -EBUSY",
			  rc);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		poller_work_fn *work = atomic_load(&p->work);

		uint64_t before;
		int64_t next;
		int n;

		if (work)
			work(p, &r);
		tally_flush(); /* a poller runs until after the settle: keep its counts current */
		before = tl_inline_runs;
		n = spoke_poll(p->s);
		tally(TK_POLL);
		p->polls++;
		if (n == -ESHUTDOWN && atomic_load(&g_shutdown_ok)) {
			tl_saw_shutdown = true;
			break;
		}
		if (n < 0) {
			VIOLATION("spoke_poll on attached shard %u returned %d", p->shard, n);
			break;
		}
		/* It reports at least the callbacks it ran here (a cancel that wins between
		 * dispatch and run may make it report one more). */
		if ((uint64_t)n < tl_inline_runs - before)
			VIOLATION("spoke_poll returned %d but ran %" PRIu64 " callbacks", n,
				  tl_inline_runs - before);
		else if ((uint64_t)n > tl_inline_runs - before)
			p->over_reports++;
		atomic_fetch_add(&p->loops, 1);
		next = spoke_next_deadline(p->s);
		if (next == -ESHUTDOWN && atomic_load(&g_shutdown_ok)) {
			tl_saw_shutdown = true;
			break;
		}
		if (next < -1)
			VIOLATION("spoke_next_deadline returned %" PRId64, next);
		if (next != 0)
			sleep_ns(next < 0 || next > (int64_t)(100 * US) ? 100 * US
									: (uint64_t)next);
		/* Only while it has work: after poller_quiesce it stays attached. */
		if (work && atomic_load(&p->handover) && rng_below(&r, 32) == 0 &&
		    !poller_handover(p, &r))
			break;
	}
	/* Its exit hands the shard to a managed thread: attached no more. */
	if (p->shard < 64)
		atomic_fetch_and(&g_attached_mask, ~(1ull << p->shard));
	tally_flush();
	atomic_store(&p->stopped, 1);
	return NULL;
}

/* Start a poller on shard k; waits until it is attached unless wait is false. */
static inline void poller_start(struct poller *p, struct spoke *s, unsigned k, poller_work_fn *work,
				bool wait)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	p->shard = k;
	atomic_init(&p->work, work);
	p->seed = g_seed ^ (0x51ull << 40) ^ k;
	p->tid = thread_spawn(poller_main, p);
	while (wait && !atomic_load(&p->attached) && !atomic_load(&p->stopped))
		sleep_ns(100 * US);
}

/*
 * Main: take the poller's work away and wait until it has finished a whole
 * turn without it (the turn in progress may still be inside the old work,
 * preempted for milliseconds on a busy machine).
 */
static inline void poller_quiesce(struct poller *p)
{
	unsigned l;

	atomic_store(&p->work, NULL);
	l = atomic_load(&p->loops);
	while (atomic_load(&p->loops) - l < 2 && !atomic_load(&p->stopped))
		sleep_ns(50 * US);
}

static inline void poller_stop(struct poller *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->tid, NULL);
}

/* ---- records: one per one-shot timer ------------------------------------------------------ */

enum rec_status {
	REC_IDLE,      /* never started, or checked by a sweep */
	REC_ARMED,     /* started, no outcome yet */
	REC_RUNNING,   /* its callback is inside */
	REC_FIRED,     /* its callback ran (and returned) */
	REC_CANCELLED, /* a cancel returned 0 */
};

static const char *const rec_status_name[] = {"IDLE", "ARMED", "RUNNING", "FIRED", "CANCELLED"};

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

static struct rec *g_recs;
static size_t g_nrecs;

/* Optional, set by a program: what its record callbacks do besides the checks. */
static void (*g_fire_hook)(struct rec *r, size_t idx, uint64_t gen);
static uint64_t g_fire_spin_ns; /* callbacks spin up to this long (random), widening races */

static inline void recs_alloc(size_t n)
{
	if (n == 0 || n > REC_MAX)
		abort();
	g_recs = aligned_alloc(64, n * sizeof(*g_recs));
	if (!g_recs) {
		fprintf(stderr, "%s: out of memory for %zu records\n", g_name, n);
		exit(2);
	}
	memset(g_recs, 0, n * sizeof(*g_recs));
	g_nrecs = n;
}

static inline void recs_free(void)
{
	free(g_recs);
	g_recs = NULL;
	g_nrecs = 0;
}

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

/* A settled REC_STRICT record that fired: not before its last successful deadline. */
static inline void rec_check_strict(struct rec *r, uint64_t w)
{
	uint64_t f, ok;

	if (rec_status(w) != REC_FIRED || !(atomic_load(&r->tag) & REC_STRICT))
		return;
	f = atomic_load(&r->fired_ns);
	ok = atomic_load(&r->ok_ns);
	if (f < ok)
		VIOLATION("timer (record %zu gen %" PRIu64 ") ran %" PRIu64
			  " ns before the deadline of its last start/reset that returned 0",
			  (size_t)(r - g_recs), rec_gen(w), ok - f);
}

/* Owner: a new generation of a settled record, armed for a timer due no earlier than earliest. */
static inline uint64_t rec_arm(struct rec *r, uint64_t earliest, uint32_t shard, uint32_t tag)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire), gen;

	if (!rec_settled(w)) {
		fprintf(stderr, "%s: internal error: arming record %zu in state %s\n", g_name,
			(size_t)(r - g_recs), rec_status_name[rec_status(w)]);
		abort();
	}
	rec_check_strict(r, w);
	gen = rec_gen(w) + 1;
	atomic_store_explicit(&r->earliest_ns, earliest, memory_order_relaxed);
	atomic_store_explicit(&r->ok_ns, earliest, memory_order_relaxed);
	atomic_store_explicit(&r->fired_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&r->shard, shard, memory_order_relaxed);
	atomic_store_explicit(&r->tag, tag, memory_order_relaxed);
	atomic_store_explicit(&r->resets, 0, memory_order_relaxed);
	atomic_store_explicit(&r->word, rec_word(gen, REC_ARMED), memory_order_release);
	return gen;
}

static inline void rec_publish(struct rec *r, uint64_t gen, spoke_id id)
{
	atomic_store_explicit(&r->id, id, memory_order_release);
	atomic_store_explicit(&r->id_gen, gen, memory_order_release);
}

/*
 * A consistent (generation, id, status) of r, or -1 if its current
 * generation has not published its id yet. Any thread.
 */
static inline int rec_snapshot(struct rec *r, uint64_t *gen, spoke_id *id)
{
	uint64_t g = atomic_load_explicit(&r->id_gen, memory_order_acquire);
	spoke_id i = atomic_load_explicit(&r->id, memory_order_acquire);
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);

	/* id is stored after the word of its generation: a newer id means a newer word. */
	if (g == 0 || rec_gen(w) != g)
		return -1;
	*gen = g;
	*id = i;
	return (int)rec_status(w);
}

enum start_how {
	HOW_ON,	  /* spoke_start_on(shard) */
	HOW_HOME, /* spoke_start: the caller's attached shard, else its CPU's */
	HOW_TTL,  /* spoke_start_ttl: the Lawn shard of the TTL */
};

static void rec_fire(void *arg);

static inline const char *how_name(unsigned how)
{
	return how == HOW_ON	 ? "spoke_start_on"
	       : how == HOW_HOME ? "spoke_start"
				 : "spoke_start_ttl";
}

/*
 * Owner: start a one-shot timer (callback rec_fire) for record idx, which
 * must be settled. shard: for HOW_ON. tag: REC_* | program bits. Returns
 * the start's result.
 */
static inline int rec_start(struct spoke *s, size_t idx, enum start_how how, unsigned shard,
			    uint64_t delay_ns, uint32_t tag)
{
	struct rec *r = &g_recs[idx];
	uint32_t rshard = REC_SHARD_ANY;
	uint64_t gen;
	spoke_id id = 0;
	int rc;

	if (how == HOW_ON)
		rshard = shard;
	else if (how == HOW_HOME && tl_poller)
		rshard = tl_poller->shard;
	/*
	 * Its shard was attached before this start: the callback must run in
	 * that poll, unless the shard is handed over before then (g_handovers).
	 */
	if (rshard < 64) {
		atomic_store_explicit(&r->handover, atomic_load(&g_handovers[rshard]),
				      memory_order_relaxed);
		if ((atomic_load(&g_attached_mask) >> rshard) & 1)
			tag |= REC_ON_POLLER;
	}
	atomic_store_explicit(&r->how, (uint16_t)how, memory_order_relaxed);
	gen = rec_arm(r, sat_add(now_ns(), delay_ns), rshard, tag);
	switch (how) {
	case HOW_ON:
		rc = spoke_start_on(s, shard, delay_ns, rec_fire, arg_encode(idx, gen), &id);
		break;
	case HOW_HOME:
		rc = spoke_start(s, delay_ns, rec_fire, arg_encode(idx, gen), &id);
		break;
	default:
		rc = spoke_start_ttl(s, delay_ns, rec_fire, arg_encode(idx, gen), &id);
		break;
	}
	if (rc == 0) {
		if (id == 0)
			VIOLATION("a start returned 0 with id 0");
		rec_publish(r, gen, id);
		tally(TK_START);
	} else {
		atomic_store_explicit(&r->word, rec_word(gen, REC_IDLE), memory_order_release);
		check_rc(how_name(how), rc, false);
	}
	return rc;
}

/* The callback of (idx, gen) is running on this thread (cancel_sync gets -EDEADLK). */
static _Thread_local void *tl_running_arg;

/* A cancel of generation gen returned 0: it is the one outcome of that timer. */
static inline void rec_cancel_won(struct rec *r, uint64_t gen, const char *how)
{
	uint64_t exp = rec_word(gen, REC_ARMED);

	if (atomic_compare_exchange_strong(&r->word, &exp, rec_word(gen, REC_CANCELLED)))
		return;
	if (rec_gen(exp) != gen)
		VIOLATION(
			"%s returned 0 for a timer that had already ended (record %zu gen %" PRIu64
			", now gen %" PRIu64 " %s): a stale id took effect",
			how, (size_t)(r - g_recs), gen, rec_gen(exp),
			rec_status_name[rec_status(exp)]);
	else if (rec_status(exp) == REC_CANCELLED)
		VIOLATION("two cancels of one timer returned 0 (record %zu gen %" PRIu64 ")",
			  (size_t)(r - g_recs), gen);
	else
		VIOLATION("%s returned 0 but the callback ran (record %zu gen %" PRIu64
			  ", callback %s)",
			  how, (size_t)(r - g_recs), gen, rec_status_name[rec_status(exp)]);
}

/*
 * Cancel (sync: cancel_sync) the timer of record idx if it is armed or
 * running. Returns the call's result, or 1 if there was nothing to cancel.
 */
static inline int rec_cancel(struct spoke *s, size_t idx, bool sync)
{
	struct rec *r = &g_recs[idx];
	uint64_t gen, w;
	spoke_id id;
	int st = rec_snapshot(r, &gen, &id), rc;
	bool own;

	if (st != REC_ARMED && st != REC_RUNNING)
		return 1;
	own = tl_running_arg == arg_encode(idx, gen);
	rc = sync ? spoke_cancel_sync(s, id) : spoke_cancel(s, id);
	if (sync && rc != -EDEADLK && rc != -ESHUTDOWN) {
		/* cancel_sync returned: no run of this timer is in progress. */
		w = atomic_load(&r->word);
		if (rec_gen(w) == gen && rec_status(w) == REC_RUNNING && !own)
			VIOLATION("spoke_cancel_sync returned %d while the callback was running "
				  "(record %zu gen %" PRIu64 ")",
				  rc, idx, gen);
	}
	if (sync && own && rc != -EDEADLK && rc != -ESHUTDOWN)
		VIOLATION(
			"spoke_cancel_sync from the timer's own callback returned %d, not -EDEADLK",
			rc);
	switch (rc) {
	case 0:
		tally(sync ? TK_SYNC_OK : TK_CANCEL_OK);
		rec_cancel_won(r, gen, sync ? "spoke_cancel_sync" : "spoke_cancel");
		break;
	case -ENOENT:
		tally(sync ? TK_SYNC_NOENT : TK_CANCEL_NOENT);
		break;
	case -EDEADLK:
		tally(TK_SYNC_DEADLK);
		if (!sync || !own)
			VIOLATION("%s returned -EDEADLK outside the timer's own callback",
				  sync ? "spoke_cancel_sync" : "spoke_cancel");
		break;
	default:
		check_rc(sync ? "spoke_cancel_sync" : "spoke_cancel", rc, true);
		break;
	}
	return rc;
}

/*
 * Reset the timer of record idx (if armed) to now + delay. strict: the
 * caller is its only resetter (REC_STRICT), so a 0 moves the exact bound.
 * Returns the call's result, or 1 if it was not armed.
 */
static inline int rec_reset(struct spoke *s, size_t idx, uint64_t delay_ns)
{
	struct rec *r = &g_recs[idx];
	uint64_t gen, d, e;
	spoke_id id;
	int rc;

	if (rec_snapshot(r, &gen, &id) != REC_ARMED)
		return 1;
	d = sat_add(now_ns(), delay_ns);
	/* Lower the bound before the call: the timer may run at d right after it. */
	e = atomic_load(&r->earliest_ns);
	while (d < e && !atomic_compare_exchange_weak(&r->earliest_ns, &e, d))
		;
	rc = spoke_reset(s, id, delay_ns);
	if (rc == 0) {
		tally(TK_RESET_OK);
		atomic_fetch_add_explicit(&r->resets, 1, memory_order_relaxed);
		if (atomic_load_explicit(&r->tag, memory_order_relaxed) & REC_STRICT)
			atomic_store(&r->ok_ns, d);
	} else if (rc == -ENOENT) {
		tally(TK_RESET_NOENT);
	} else {
		check_rc("spoke_reset", rc, true);
	}
	return rc;
}

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
static inline int rec_step(struct spoke *s, size_t idx, struct rng *r, const struct step_mix *m)
{
	uint64_t w = atomic_load_explicit(&g_recs[idx].word, memory_order_acquire);
	unsigned pick = (unsigned)rng_below(r, 100), how;

	if (rec_status(w) == REC_ARMED) {
		if (pick < m->cancel_pct)
			return rec_cancel(s, idx, rng_pct(r, m->sync_pct));
		if (pick < m->cancel_pct + m->reset_pct)
			return rec_reset(s, idx, m->reset_delay(r, m->ctx));
		return 1;
	}
	if (!rec_settled(w))
		return 1;
	how = (unsigned)rng_below(r, 100);
	return rec_start(s, idx,
			 how < m->on_pct		 ? HOW_ON
			 : how < m->on_pct + m->home_pct ? HOW_HOME
							 : HOW_TTL,
			 (unsigned)rng_below(r, m->nshards), m->start_delay(r, m->ctx), m->tag);
}

/*
 * Callback side: claim the run of (idx, gen), checking that it is the first
 * and only outcome, not early, and on the right thread. Returns the record,
 * or NULL if the run must not happen (reported).
 */
static inline struct rec *rec_fire_begin(void *arg, uint64_t *gen_out)
{
	uint64_t t = now_ns(), gen = arg_gen(arg), exp, e;
	size_t idx = arg_idx(arg);
	struct rec *r;
	uint32_t tag, shard;

	poller_note_run();
	if (idx >= g_nrecs || gen == 0) {
		VIOLATION("callback with a bad argument %p", arg);
		return NULL;
	}
	r = &g_recs[idx];
	exp = rec_word(gen, REC_ARMED);
	if (!atomic_compare_exchange_strong(&r->word, &exp, rec_word(gen, REC_RUNNING))) {
		if (rec_gen(exp) != gen)
			VIOLATION("callback of record %zu gen %" PRIu64
				  " ran after that timer had ended (record now gen %" PRIu64 " %s)",
				  idx, gen, rec_gen(exp), rec_status_name[rec_status(exp)]);
		else if (rec_status(exp) == REC_CANCELLED)
			VIOLATION("callback ran after a cancel returned 0 (record %zu gen %" PRIu64
				  ")",
				  idx, gen);
		else
			VIOLATION("callback ran twice or overlapped itself (record %zu gen %" PRIu64
				  ", %s)",
				  idx, gen, rec_status_name[rec_status(exp)]);
		return NULL;
	}
	e = atomic_load(&r->earliest_ns);
	if (t < e)
		VIOLATION("callback ran %" PRIu64 " ns early (record %zu gen %" PRIu64
			  ", started by %s on shard %d, %u resets returned 0, ran %s)",
			  e - t, idx, gen, how_name(atomic_load(&r->how)),
			  (int)atomic_load(&r->shard), atomic_load(&r->resets),
			  tl_poller ? "in a poll" : "on a pool or shard thread");
	atomic_store_explicit(&r->fired_ns, t, memory_order_relaxed);
	tag = atomic_load_explicit(&r->tag, memory_order_relaxed);
	shard = atomic_load_explicit(&r->shard, memory_order_relaxed);
	if (tl_poller && shard != REC_SHARD_ANY && shard != tl_poller->shard)
		VIOLATION("callback of a timer on shard %u ran inside spoke_poll of shard %u",
			  shard, tl_poller->shard);
	if ((tag & REC_ON_POLLER) && (!tl_poller || tl_poller->shard != shard) &&
	    atomic_load(&g_handovers[shard]) == atomic_load(&r->handover))
		VIOLATION("callback of a timer on attached shard %u ran off its polling thread",
			  shard);
	/*
	 * Whenever it was started: between an attach's return and the detach,
	 * nothing of the shard runs off its poller (not even a run that was on
	 * the pool queue before the attach; one already running then ended
	 * before the attach returned).
	 */
	if (shard < 64 && (!tl_poller || tl_poller->shard != shard) &&
	    ((atomic_load(&g_attached_mask) >> shard) & 1))
		VIOLATION("callback of a timer on shard %u ran off its poller while attached",
			  shard);
	tally(TK_FIRED);
	*gen_out = gen;
	return r;
}

/* Callback side, last touch of the record: the run is over. */
static inline void rec_fire_end(struct rec *r, uint64_t gen)
{
	tally_flush();
	atomic_store_explicit(&r->word, rec_word(gen, REC_FIRED), memory_order_release);
}

/* Spin for a random time up to g_fire_spin_ns (a callback that takes a while). */
static inline void fire_spin(void)
{
	uint64_t d;

	if (!g_fire_spin_ns)
		return;
	d = rng_below(tl_rng(), g_fire_spin_ns + 1);
	if (d) {
		uint64_t end = now_ns() + d;

		while (now_ns() < end)
			;
	}
}

/* The record callback: checks, optional spin, the program's hook. */
static inline void rec_fire(void *arg)
{
	uint64_t gen;
	struct rec *r = rec_fire_begin(arg, &gen);
	void *outer = tl_running_arg;

	if (!r)
		return;
	tl_running_arg = arg;
	fire_spin();
	if (g_fire_hook)
		g_fire_hook(r, (size_t)(r - g_recs), gen);
	tl_running_arg = outer;
	rec_fire_end(r, gen);
}

/* Owner: wait (bounded) until record idx is settled; false (reported) if it never is. */
static inline bool rec_wait_settled(size_t idx)
{
	struct rec *r = &g_recs[idx];
	uint64_t end = 0;

	while (!rec_settled(atomic_load_explicit(&r->word, memory_order_acquire))) {
		if (!end)
			end = now_ns() + EVENTUALLY_NS;
		if (now_ns() > end) {
			uint64_t w = atomic_load(&r->word);

			VIOLATION("timer of record %zu gen %" PRIu64
				  " has no outcome (%s) long after its deadline",
				  idx, rec_gen(w), rec_status_name[rec_status(w)]);
			return false;
		}
		sched_yield();
	}
	return true;
}

/* Main thread, workers joined: cancel what is still armed in [lo, hi). */
static inline void recs_cancel_remaining(struct spoke *s, size_t lo, size_t hi)
{
	for (size_t i = lo; i < hi; i++)
		(void)rec_cancel(s, i, false);
	tally_flush();
}

/*
 * Main thread, workers joined: wait until every record in [lo, hi) has an
 * outcome, check the strict rule, and mark them checked (IDLE). Returns
 * the number that never got one (each reported, the first few by name).
 */
static inline size_t recs_sweep(size_t lo, size_t hi)
{
	uint64_t end = now_ns() + EVENTUALLY_NS;
	size_t lost = 0;

	for (size_t i = lo; i < hi; i++) {
		struct rec *r = &g_recs[i];
		uint64_t w;

		while (!rec_settled(w = atomic_load_explicit(&r->word, memory_order_acquire)) &&
		       now_ns() < end)
			sleep_ns(100 * US);
		if (!rec_settled(w)) {
			if (++lost <= 5)
				VIOLATION("timer of record %zu gen %" PRIu64 " id %#" PRIx64
					  " has no outcome: neither ran nor was cancelled (%s)",
					  i, rec_gen(w), (uint64_t)atomic_load(&r->id),
					  rec_status_name[rec_status(w)]);
			continue;
		}
		rec_check_strict(r, w);
		atomic_store(&r->word, rec_word(rec_gen(w), REC_IDLE));
	}
	if (lost > 5)
		VIOLATION("%zu timers in all had no outcome", lost);
	return lost;
}

/* ---- periodic timers ---------------------------------------------------------------------- */

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

static struct ptimer *g_pers;
static size_t g_npers;
/* Optional: what a periodic callback does after the checks (run n of slot idx). */
static void (*g_per_hook)(struct ptimer *p, size_t idx, uint64_t gen, unsigned n);

static inline void pers_alloc(size_t n)
{
	if (n == 0 || n > REC_MAX)
		abort();
	g_pers = aligned_alloc(64, n * sizeof(*g_pers));
	if (!g_pers) {
		fprintf(stderr, "%s: out of memory for %zu periodic slots\n", g_name, n);
		exit(2);
	}
	memset(g_pers, 0, n * sizeof(*g_pers));
	g_npers = n;
}

static inline void pers_free(void)
{
	free(g_pers);
	g_pers = NULL;
	g_npers = 0;
}

static inline void atomic_min_u(atomic_uint *a, unsigned v)
{
	unsigned cur = atomic_load(a);

	while (v < cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

/* A stop of generation gen (a cancel returned 0): count it; it must be the only one. */
static inline void per_stopped(struct ptimer *p, uint64_t gen, const char *how)
{
	if (atomic_load(&p->gen) != gen) {
		VIOLATION("%s of a stale periodic id returned 0 (slot %zu gen %" PRIu64 ")", how,
			  (size_t)(p - g_pers), gen);
		return;
	}
	if (atomic_fetch_add(&p->stops, 1) != 0)
		VIOLATION("two cancels of one periodic timer returned 0 (slot %zu gen %" PRIu64 ")",
			  (size_t)(p - g_pers), gen);
}

static void per_fire(void *arg);

/*
 * Owner: start a periodic timer in slot idx (settled: never used, or stopped
 * and fenced by per_settle). The new generation is published first, so a
 * per_cancel that has not taken its snapshot yet finds the slot changing and
 * skips it; one that has (pinned) is waited for before the fields are reset.
 */
static inline int per_start(struct spoke *s, size_t idx, uint64_t period_ns, unsigned plan,
			    unsigned plan_arg)
{
	struct ptimer *p = &g_pers[idx];
	uint64_t gen = atomic_load(&p->gen) + 1;
	spoke_id id = 0;
	int rc;

	atomic_store(&p->gen, gen);
	while (atomic_load(&p->pins))
		sched_yield();
	atomic_store(&p->entered, 0);
	atomic_store(&p->inside, 0);
	atomic_store(&p->stops, 0);
	atomic_store(&p->max_runs, UINT_MAX);
	atomic_store(&p->plan, plan);
	atomic_store(&p->plan_arg, plan_arg);
	atomic_store(&p->period_ns, period_ns);
	atomic_store(&p->start_ns, now_ns());
	rc = spoke_start_periodic(s, period_ns, per_fire, arg_encode(idx, gen), &id);
	if (rc == 0) {
		atomic_store_explicit(&p->id, id, memory_order_release);
		atomic_store_explicit(&p->id_gen, gen, memory_order_release);
		tally(TK_START);
	} else {
		atomic_store(&p->stops, 1); /* never ran: settled */
		atomic_store(&p->max_runs, 0);
		check_rc("spoke_start_periodic", rc, false);
	}
	return rc;
}

static inline bool per_snapshot(struct ptimer *p, uint64_t *gen, spoke_id *id)
{
	uint64_t g = atomic_load_explicit(&p->id_gen, memory_order_acquire);
	spoke_id i = atomic_load_explicit(&p->id, memory_order_acquire);

	if (g == 0 || atomic_load_explicit(&p->gen, memory_order_acquire) != g)
		return false;
	*gen = g;
	*id = i;
	return true;
}

/*
 * Cancel (sync: cancel_sync) the periodic timer in slot idx, from outside
 * its callback; per_cancel_plan only if the low byte of its plan is
 * only_plan. Returns the call's result, or 1 if the slot has no published
 * timer (of that plan).
 */
static inline int per_cancel_pinned(struct spoke *s, size_t idx, bool sync, int only_plan)
{
	struct ptimer *p = &g_pers[idx];
	uint64_t gen;
	spoke_id id;
	int rc;

	if (!per_snapshot(p, &gen, &id))
		return 1;
	/* The plan was stored before the id was published: it is this timer's. */
	if (only_plan >= 0 && (atomic_load(&p->plan) & 0xff) != (unsigned)only_plan)
		return 1;
	rc = sync ? spoke_cancel_sync(s, id) : spoke_cancel(s, id);
	if (rc == -ESHUTDOWN) {
		check_rc("periodic cancel", rc, true);
		return rc;
	}
	if (rc != 0 && rc != -ENOENT) {
		VIOLATION("%s of a periodic timer from outside its callback returned %d",
			  sync ? "spoke_cancel_sync" : "spoke_cancel", rc);
		return rc;
	}
	tally(rc == 0 ? (sync ? TK_SYNC_OK : TK_CANCEL_OK)
		      : (sync ? TK_SYNC_NOENT : TK_CANCEL_NOENT));
	/* Bounds first, then the stop count: the owner reuses the slot only after it. */
	if (sync && (rc == 0 || atomic_load(&p->stops))) {
		/* Stopped (by this call or an earlier one) and no run in progress: no more runs. */
		if (atomic_load(&p->inside))
			VIOLATION("spoke_cancel_sync of a periodic timer returned %d during a run "
				  "(slot %zu)",
				  rc, idx);
		atomic_min_u(&p->max_runs, atomic_load(&p->entered));
	} else if (rc == 0) {
		/* At most the run in progress (maybe not counted yet) is still to come. */
		atomic_min_u(&p->max_runs, atomic_load(&p->entered) + 1);
	}
	if (rc == 0)
		per_stopped(p, gen, sync ? "spoke_cancel_sync" : "spoke_cancel");
	return rc;
}

static inline int per_cancel_plan(struct spoke *s, size_t idx, bool sync, int only_plan)
{
	struct ptimer *p = &g_pers[idx];
	int rc;

	atomic_fetch_add(&p->pins, 1); /* before the snapshot: see per_start */
	rc = per_cancel_pinned(s, idx, sync, only_plan);
	atomic_fetch_sub(&p->pins, 1);
	return rc;
}

static inline int per_cancel(struct spoke *s, size_t idx, bool sync)
{
	return per_cancel_plan(s, idx, sync, -1);
}

/*
 * From run n of p's own callback: cancel it (sync: cancel_sync, which must
 * give -EDEADLK and still stop it). counts: this call is known to be the only
 * canceller, so its effect is the stop. No run may follow this one.
 */
static inline void per_cancel_own(struct spoke *s, struct ptimer *p, uint64_t gen, unsigned n,
				  bool sync, bool counts)
{
	spoke_id id;
	int rc;

	/*
	 * The first run may begin before the starter (a worker, never a callback)
	 * has stored the id its start returned: a preempted starter is not a
	 * service bug. It stores it without waiting on anything, so wait for it.
	 */
	while (atomic_load_explicit(&p->id_gen, memory_order_acquire) != gen)
		sched_yield();
	id = atomic_load(&p->id);
	rc = sync ? spoke_cancel_sync(s, id) : spoke_cancel(s, id);
	if (sync) {
		tally(rc == -EDEADLK ? TK_SYNC_DEADLK : rc == 0 ? TK_SYNC_OK : TK_SYNC_NOENT);
		if (rc == -ESHUTDOWN)
			check_rc("spoke_cancel_sync", rc, false);
		else if (rc != -EDEADLK)
			VIOLATION("spoke_cancel_sync from a periodic timer's own callback returned "
				  "%d, not -EDEADLK",
				  rc);
		else if (counts)
			per_stopped(p, gen, "own spoke_cancel_sync");
	} else if (rc == 0) {
		tally(TK_CANCEL_OK);
		per_stopped(p, gen, "own spoke_cancel");
	} else if (rc == -ENOENT) {
		tally(TK_CANCEL_NOENT);
		if (counts)
			VIOLATION("spoke_cancel from a periodic timer's own callback returned "
				  "-ENOENT though nothing else cancelled it (slot %zu)",
				  (size_t)(p - g_pers));
	} else {
		check_rc("spoke_cancel", rc, true);
	}
	if (rc != -ESHUTDOWN)
		atomic_min_u(&p->max_runs, n);
}

static inline void per_fire(void *arg)
{
	uint64_t t = now_ns(), gen = arg_gen(arg), due;
	size_t idx = arg_idx(arg);
	struct ptimer *p;
	void *outer = tl_running_arg;
	unsigned n;

	poller_note_run();
	if (idx >= g_npers || gen == 0) {
		VIOLATION("periodic callback with a bad argument %p", arg);
		return;
	}
	p = &g_pers[idx];
	if (atomic_load(&p->gen) != gen) {
		VIOLATION("run of periodic slot %zu gen %" PRIu64
			  " after it was stopped and settled (now gen %" PRIu64 ")",
			  idx, gen, (uint64_t)atomic_load(&p->gen));
		return;
	}
	if (atomic_exchange(&p->inside, 1) != 0)
		VIOLATION("periodic timer overlapped itself (slot %zu gen %" PRIu64 ")", idx, gen);
	n = atomic_fetch_add(&p->entered, 1) + 1;
	due = sat_add(atomic_load(&p->start_ns), (uint64_t)n * atomic_load(&p->period_ns));
	if (t < due)
		VIOLATION("periodic run %u began %" PRIu64
			  " ns before start + %u periods (slot %zu)",
			  n, due - t, n, idx);
	if (n > atomic_load(&p->max_runs))
		VIOLATION(
			"periodic run %u began after the timer was stopped (at most %u runs; slot "
			"%zu)",
			n, atomic_load(&p->max_runs), idx);
	tally(TK_FIRED);
	tl_running_arg = arg;
	fire_spin();
	if (g_per_hook)
		g_per_hook(p, idx, gen, n);
	tl_running_arg = outer;
	tally_flush();
	atomic_store(&p->inside, 0);
}

/*
 * Owner, after the timer of slot idx was stopped: cancel_sync its id (which
 * must not find it live) so that no run is in progress, then check its runs.
 * Returns true when the slot may be reused.
 */
static inline bool per_settle(struct spoke *s, size_t idx)
{
	struct ptimer *p = &g_pers[idx];
	uint64_t gen;
	spoke_id id;
	int rc;

	if (!per_snapshot(p, &gen, &id))
		return true;
	if (atomic_load(&p->stops) == 0)
		return false;
	rc = spoke_cancel_sync(s, id);
	if (rc == -ESHUTDOWN) {
		check_rc("spoke_cancel_sync", rc, true);
		return false;
	}
	tally(rc == 0 ? TK_SYNC_OK : TK_SYNC_NOENT);
	if (rc != -ENOENT)
		VIOLATION("spoke_cancel_sync of a stopped periodic timer returned %d (slot %zu)",
			  rc, idx);
	if (atomic_load(&p->inside))
		VIOLATION("periodic run in progress after cancel_sync returned (slot %zu)", idx);
	if (atomic_load(&p->entered) > atomic_load(&p->max_runs))
		VIOLATION("periodic slot %zu ran %u times, at most %u allowed by its cancel", idx,
			  atomic_load(&p->entered), atomic_load(&p->max_runs));
	return true;
}

/* ---- settling and spoke_stats --------------------------------------------------------------- */

struct expect {
	uint64_t started, fired, cancelled;
	bool oneshot_only; /* per shard: started == fired + cancelled + pending */
};

/* What the tallies since `before` say the service must report. */
static inline struct expect expect_since(const uint64_t before[TK_COUNT], bool oneshot_only)
{
	uint64_t now[TK_COUNT];
	struct expect e;

	tally_snapshot(now);
	e.started = now[TK_START] - before[TK_START];
	e.fired = now[TK_FIRED] - before[TK_FIRED];
	e.cancelled =
		(now[TK_CANCEL_OK] - before[TK_CANCEL_OK]) + (now[TK_SYNC_OK] - before[TK_SYNC_OK]);
	e.oneshot_only = oneshot_only;
	return e;
}

/* NULL if spoke_stats agrees with e, else why not (in buf). */
static inline const char *stats_disagree(struct spoke *s, const struct expect *e, char *buf,
					 size_t len)
{
	struct spoke_stats *st = calloc(1, sizeof(*st));
	const char *why = NULL;

	if (!st)
		abort();
	spoke_stats(s, st);
	for (unsigned k = 0; k < st->shards && !why; k++) {
		const struct spoke_shard_stats *h = &st->shard[k];

		if (h->pending != 0) {
			snprintf(buf, len, "shard %u pending %" PRIu64, k, h->pending);
			why = buf;
		} else if (e->oneshot_only && h->started != h->fired + h->cancelled + h->pending) {
			snprintf(buf, len,
				 "shard %u: started %" PRIu64 " != fired %" PRIu64
				 " + cancelled %" PRIu64 " + pending %" PRIu64,
				 k, h->started, h->fired, h->cancelled, h->pending);
			why = buf;
		}
	}
	if (!why && (st->total.started != e->started || st->total.fired != e->fired ||
		     st->total.cancelled != e->cancelled)) {
		snprintf(buf, len,
			 "stats say started %" PRIu64 " fired %" PRIu64 " cancelled %" PRIu64
			 ", the program counted %" PRIu64 " / %" PRIu64 " / %" PRIu64,
			 st->total.started, st->total.fired, st->total.cancelled, e->started,
			 e->fired, e->cancelled);
		why = buf;
	}
	free(st);
	return why;
}

/* Main thread: wait until the service's counts agree with e (or report why they never do). */
static inline void settle_stats(struct spoke *s, const struct expect *e)
{
	uint64_t end = now_ns() + EVENTUALLY_NS;
	char buf[256];
	const char *why;

	while ((why = stats_disagree(s, e, buf, sizeof(buf))) != NULL && now_ns() < end)
		sleep_ns(MS);
	if (why) {
		uint64_t t[TK_COUNT];

		tally_snapshot(t);
		VIOLATION("service counts never settled: %s (program's counts now: %" PRIu64
			  " starts, %" PRIu64 " runs, %" PRIu64 " winning cancels in all)",
			  why, t[TK_START], t[TK_FIRED], t[TK_CANCEL_OK] + t[TK_SYNC_OK]);
	}
}

/*
 * Backpressure for phases that measure memory. Starts the owners have not
 * taken yet plus winning cancels they have not retired yet are messages
 * waiting in inboxes, each holding a handle: the program's counts minus
 * spoke_stats. Every 64th call of pace() a worker computes that backlog;
 * above PACE_HIGH it sleeps until the owners have brought it under
 * PACE_LOW. Without it, 32 CPU-bound workers on 2 cores starve the shard
 * threads (the scheduler gives each runnable thread an equal share) and the
 * backlog, and the arenas with it, grow with the length of the phase. (A
 * pacer thread of its own would be starved the same way.) The cap is low
 * because arena memory is the sum over threads of each one's peak of live
 * handles, and one thread running a whole time slice while its owners
 * wait holds a large share of the backlog: with a cap of 16384 those
 * per-thread peaks reached 3-10k handles and a second identical phase added
 * up to 8 MiB of handles; with 2048 it adds under 1 MiB, at the same speed.
 */
#define PACE_HIGH 2048
#define PACE_LOW  512

struct pacer {
	struct spoke *s;
	const uint64_t *since; /* tallies when the service was created */
	_Atomic uint64_t max_backlog, pauses;
};

static struct pacer *g_pacer;

static inline void pacer_start(struct pacer *p, struct spoke *s, const uint64_t *since)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	p->since = since;
	g_pacer = p;
}

static inline void pacer_stop(struct pacer *p)
{
	(void)p;
	g_pacer = NULL;
}

static inline uint64_t pacer_backlog(struct pacer *p)
{
	struct spoke_stats st_buf, *st = &st_buf; /* ~20 KiB on the stack: workers only */
	uint64_t t[TK_COUNT], ours, theirs, m;

	tally_snapshot(t);
	spoke_stats(p->s, st);
	ours = (t[TK_START] - p->since[TK_START]) + (t[TK_CANCEL_OK] - p->since[TK_CANCEL_OK]) +
	       (t[TK_SYNC_OK] - p->since[TK_SYNC_OK]);
	theirs = st->total.started + st->total.cancelled;
	m = atomic_load(&p->max_backlog);
	while (ours > theirs && ours - theirs > m &&
	       !atomic_compare_exchange_weak(&p->max_backlog, &m, ours - theirs))
		;
	return ours > theirs ? ours - theirs : 0;
}

/* Workers: wait while the owners are behind (only while a pacer is on). */
static inline void pace(void)
{
	static _Thread_local unsigned calls;
	struct pacer *p = g_pacer;

	if (!p || (++calls & 63) != 0)
		return;
	tally_flush();
	if (pacer_backlog(p) <= PACE_HIGH)
		return;
	atomic_fetch_add(&p->pauses, 1);
	while (!budget_over() && pacer_backlog(p) >= PACE_LOW)
		sleep_ns(50 * US);
}

/* The exit status: 0 if every invariant held. Prints the summary line. */
static inline int stress_finish(void)
{
	uint64_t t[TK_COUNT];
	unsigned v = atomic_load(&g_violations);

	tally_snapshot(t);
	printf("%s: %s: %" PRIu64 " timer ops, %" PRIu64 " callbacks, %u violations, %.1f s "
	       "(seed %" PRIu64 ")\n",
	       g_name, v ? "FAIL" : "PASS", tally_ops(t), t[TK_FIRED], v,
	       (double)(now_ns() - g_t0_ns) / 1e9, g_seed);
	atomic_store(&g_watchdog_ns, 0);
	return v ? 1 : 0;
}

/*
 * Round scheduling: round r of n fixed configurations gets ops/n and
 * seconds/n. With --soak the configurations repeat until the time is
 * used up, each round a slice of seconds/n, at most 60 s. Returns false
 * when done.
 */
static inline bool next_round(unsigned r, unsigned n, uint64_t *ops, double *seconds)
{
	double elapsed = (double)(now_ns() - g_t0_ns) / 1e9;

	if (!g_opt.soak) {
		if (r >= n)
			return false;
		*ops = g_opt.ops ? (g_opt.ops + n - 1) / n : 0;
		*seconds = g_opt.seconds / n;
		return true;
	}
	if (elapsed >= g_opt.seconds)
		return false;
	*ops = g_opt.ops ? (g_opt.ops + n - 1) / n : 0;
	*seconds = g_opt.seconds / n < 60 ? g_opt.seconds / n : 60;
	if (*seconds > g_opt.seconds - elapsed)
		*seconds = g_opt.seconds - elapsed;
	return true;
}

#endif /* SPOKE_STRESS_UTIL_H */
