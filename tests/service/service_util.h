/* SPDX-License-Identifier: MIT */
/*
 * service_util.h - helpers shared by the service tests (test_service_*.c),
 * which hold the timer service of include/spoke/spoke.h to docs/contract.md.
 *
 *   checks off the main thread   cmocka's assert_* may only run on the test's
 *                                own thread; callbacks and worker threads use
 *                                BG_CHECK*, which count failures and keep the
 *                                first message; the test then calls
 *                                assert_no_bg_failures().
 *   time                         spoke_now_ns() (proved to be CLOCK_MONOTONIC
 *                                by config_now_is_monotonic_clock), sleeps,
 *                                WAIT_UNTIL(cond, timeout) for "eventually".
 *   services                     svc_new()/svc_create_cfg() register what they
 *                                create; svc_destroy() destroys it; a test that
 *                                fails half way leaves its service to the
 *                                teardown, which destroys it (unless the test
 *                                marked it hung with svc_abandon_all()).
 *   threads                      run_workers(n, fn, ctx): n threads released
 *                                together by a barrier, then joined.
 *   stats                        stats_add_up() checks started == fired +
 *                                cancelled + pending on every shard and that
 *                                the totals are the sums.
 *   main                         svc_main(): no argument runs every test; a
 *                                test name runs that one (ctest runs each in
 *                                its own process); --expect NAME... checks
 *                                that the CMake list and the program agree.
 *
 * Timing: tests use short ticks and delays and never assert speed; the only
 * wall-clock bound is the generous functional wake-up check of
 * pitfall_cross_core_start_wakes_owner. "Eventually" waits are 30 s (60 s
 * under TSan) and only run out when something is broken.
 *
 * Header only, everything static; each test program includes it once.
 */
#ifndef SPOKE_TESTS_SERVICE_UTIL_H
#define SPOKE_TESTS_SERVICE_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <spoke/spoke.h>

#include "splitmix.h"
#include "test_prelude.h"

/* ---- build flavour (TEST_TSAN, TEST_ASAN: test_prelude.h) -------------------- */

/* Workload sizes: full in plain and ASan builds, a quarter under TSan. */
#define SCALE(n) ((unsigned)(TEST_TSAN ? ((n) / 4 > 0 ? (n) / 4 : 1) : (n)))
/* How long "eventually" may take before a test calls it a hang. */
#define EVENTUALLY_NS ((TEST_TSAN ? 60 : 30) * SEC)
/*
 * How long a callback that waits for the test (or for another thread) holds
 * its thread before it gives up and lets the test fail: far past any stall
 * of a loaded machine, and short of EVENTUALLY_NS, so that the test's own
 * wait for the callback outlasts it.
 */
#define HOLD_LIMIT_NS (20 * SEC)

/* ---- checks off the main thread ---------------------------------------------- */

static atomic_int svc_bg_fails;
static atomic_int svc_bg_msg_claimed;
static atomic_int svc_bg_msg_ready;
static char svc_bg_msg[512];

__attribute__((format(printf, 3, 4))) static inline void svc_bg_fail(const char *file, int line,
								     const char *fmt, ...)
{
	atomic_fetch_add(&svc_bg_fails, 1);
	if (atomic_exchange(&svc_bg_msg_claimed, 1) == 0) {
		va_list ap;
		int n = snprintf(svc_bg_msg, sizeof(svc_bg_msg), "%s:%d: ", file, line);

		va_start(ap, fmt);
		if (n > 0 && (size_t)n < sizeof(svc_bg_msg))
			vsnprintf(svc_bg_msg + n, sizeof(svc_bg_msg) - (size_t)n, fmt, ap);
		va_end(ap);
		atomic_store(&svc_bg_msg_ready, 1);
	}
}

#define BG_CHECK(c)                                                                                \
	do {                                                                                       \
		if (!(c))                                                                          \
			svc_bg_fail(__FILE__, __LINE__, "check failed: %s", #c);                   \
	} while (0)

/* Integer comparison with both values in the message. */
#define BG_CHECK_INT(a, op, b)                                                                     \
	do {                                                                                       \
		long long a_ = (long long)(a), b_ = (long long)(b);                                \
		if (!(a_ op b_))                                                                   \
			svc_bg_fail(__FILE__, __LINE__, "check failed: %s %s %s (%lld vs %lld)",   \
				    #a, #op, #b, a_, b_);                                          \
	} while (0)

#define BG_CHECK_U64(a, op, b)                                                                     \
	do {                                                                                       \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                   \
		if (!(a_ op b_))                                                                   \
			svc_bg_fail(__FILE__, __LINE__,                                            \
				    "check failed: %s %s %s (%" PRIu64 " vs %" PRIu64 ")", #a,     \
				    #op, #b, a_, b_);                                              \
	} while (0)

#define assert_no_bg_failures()                                                                    \
	do {                                                                                       \
		int n_ = atomic_load(&svc_bg_fails);                                               \
		if (n_ != 0)                                                                       \
			fail_msg("%d check(s) failed off the main thread; first: %s", n_,          \
				 atomic_load(&svc_bg_msg_ready) ? svc_bg_msg : "(being written)"); \
	} while (0)

/* ---- time -------------------------------------------------------------------- */

static inline void sleep_ms(unsigned ms)
{
	sleep_ns((uint64_t)ms * MS);
}

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* The process's address space in bytes (VmSize), or 0. */
static inline uint64_t vm_size_bytes(void)
{
	char line[256];
	uint64_t kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %" SCNu64 " kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* Evaluates cond every 100 us until it holds or timeout_ns passes; gives its last value. */
#define WAIT_UNTIL(cond, timeout_ns)                                                               \
	({                                                                                         \
		uint64_t end_ = spoke_now_ns() + (uint64_t)(timeout_ns);                           \
		bool ok_;                                                                          \
		while (!(ok_ = (cond)) && spoke_now_ns() < end_)                                   \
			sleep_ns(100 * US);                                                        \
		ok_;                                                                               \
	})

/* A fixed-seed PRNG per thread: splitmix.h. */

/* ---- services ------------------------------------------------------------------ */

#define SVC_MAX_LIVE 8
static struct spoke *svc_live[SVC_MAX_LIVE];

static inline void svc_register(struct spoke *s)
{
	for (unsigned i = 0; i < SVC_MAX_LIVE; i++) {
		if (!svc_live[i]) {
			svc_live[i] = s;
			return;
		}
	}
	fail_msg("too many live services in one test");
}

/*
 * The defaults, but a fixed pool (callback_spares 0): many cases hold the
 * pool's workers on purpose (a callback queued behind a blocker, in its
 * DISPATCHED window), which a spare would end after rescue_after_ns. The
 * cases about spares set callback_spares themselves; the stress programs
 * run with the default.
 */
static inline void svc_config(struct spoke_config *c, unsigned shards, uint64_t tick_ns,
			      unsigned callback_threads)
{
	spoke_config_init(c);
	c->shards = shards;
	c->tick_ns = tick_ns;
	c->callback_threads = callback_threads;
	c->callback_spares = 0;
}

static inline struct spoke *svc_create_cfg(const struct spoke_config *c)
{
	struct spoke *s = NULL;
	int rc = spoke_create(&s, c);

	if (rc != 0)
		fail_msg("spoke_create: %d (%s)", rc, strerror(-rc));
	assert_non_null(s);
	svc_register(s);
	return s;
}

static inline struct spoke *svc_new(unsigned shards, uint64_t tick_ns, unsigned callback_threads)
{
	struct spoke_config c;

	svc_config(&c, shards, tick_ns, callback_threads);
	return svc_create_cfg(&c);
}

static inline void svc_destroy(struct spoke *s)
{
	for (unsigned i = 0; i < SVC_MAX_LIVE; i++)
		if (svc_live[i] == s)
			svc_live[i] = NULL;
	spoke_destroy(s);
}

/* The test found a hang: never touch its services again (the test fails anyway). */
static inline void svc_abandon_all(void)
{
	memset(svc_live, 0, sizeof(svc_live));
}

/* Waits for cond; on timeout abandons the services (they may be hung) and fails with msg. */
#define ASSERT_EVENTUALLY_MSG(cond, ...)                                                           \
	do {                                                                                       \
		if (!WAIT_UNTIL(cond, EVENTUALLY_NS)) {                                            \
			svc_abandon_all();                                                         \
			fail_msg(__VA_ARGS__);                                                     \
		}                                                                                  \
	} while (0)

#define ASSERT_EVENTUALLY(cond, what)                                                              \
	ASSERT_EVENTUALLY_MSG(cond, "timed out waiting for %s (%s)", what, #cond)

static inline int svc_test_setup(void **state)
{
	(void)state;
	atomic_store(&svc_bg_fails, 0);
	atomic_store(&svc_bg_msg_claimed, 0);
	atomic_store(&svc_bg_msg_ready, 0);
	memset(svc_live, 0, sizeof(svc_live));
	return 0;
}

static inline int svc_test_teardown(void **state)
{
	(void)state;
	for (unsigned i = 0; i < SVC_MAX_LIVE; i++) {
		if (svc_live[i]) {
			struct spoke *s = svc_live[i];

			svc_live[i] = NULL;
			spoke_destroy(s);
		}
	}
	return 0;
}

#define SVC_TEST(f) cmocka_unit_test_setup_teardown(f, svc_test_setup, svc_test_teardown)

/* ---- stats ----------------------------------------------------------------------- */

/* Big (SPOKE_MAX_SHARDS entries): heap-allocated so callbacks on small stacks may use it. */
static inline struct spoke_stats *stats_new(void)
{
	struct spoke_stats *st = calloc(1, sizeof(*st));

	if (!st)
		abort();
	return st;
}

/* Shard k's stats (SPOKE_MAX_SHARDS: the totals), now. */
static inline struct spoke_shard_stats stats_of(struct spoke *s, unsigned k)
{
	struct spoke_stats *st = stats_new();
	struct spoke_shard_stats t;

	spoke_stats(s, st);
	t = k == SPOKE_MAX_SHARDS ? st->total : st->shard[k];
	free(st);
	return t;
}

/* The instance's totals, now. */
static inline struct spoke_shard_stats stats_total(struct spoke *s)
{
	return stats_of(s, SPOKE_MAX_SHARDS);
}

static inline uint64_t stats_started(struct spoke *s)
{
	return stats_total(s).started;
}

static inline uint64_t stats_pending(struct spoke *s)
{
	return stats_total(s).pending;
}

/*
 * At quiescence (no message in flight, no one-shot callback due): every
 * shard's started == fired + cancelled + pending, and the totals are the sums
 * (max for inbox_hwm and max_late_ns). Only for workloads without periodic
 * timers (each periodic run counts in `fired`). Returns a description of the
 * first mismatch, or NULL.
 */
static inline const char *stats_add_up(const struct spoke_stats *st, char *buf, size_t len)
{
	struct spoke_shard_stats sum;

	memset(&sum, 0, sizeof(sum));
	if (st->shards == 0 || st->shards > SPOKE_MAX_SHARDS) {
		snprintf(buf, len, "stats.shards = %u", st->shards);
		return buf;
	}
	for (unsigned k = 0; k < st->shards; k++) {
		const struct spoke_shard_stats *h = &st->shard[k];

		if (h->started != h->fired + h->cancelled + h->pending) {
			snprintf(buf, len,
				 "shard %u: started %" PRIu64 " != fired %" PRIu64
				 " + cancelled %" PRIu64 " + pending %" PRIu64,
				 k, h->started, h->fired, h->cancelled, h->pending);
			return buf;
		}
		sum.started += h->started;
		sum.cancelled += h->cancelled;
		sum.reset += h->reset;
		sum.fired += h->fired;
		sum.pending += h->pending;
		if (h->inbox_hwm > sum.inbox_hwm)
			sum.inbox_hwm = h->inbox_hwm;
		if (h->max_late_ns > sum.max_late_ns)
			sum.max_late_ns = h->max_late_ns;
	}
#define SUM_FIELD(f)                                                                               \
	if (st->total.f != sum.f) {                                                                \
		snprintf(buf, len, "total." #f " %" PRIu64 " != %" PRIu64 " (over the shards)",    \
			 st->total.f, sum.f);                                                      \
		return buf;                                                                        \
	}
	SUM_FIELD(started)
	SUM_FIELD(cancelled)
	SUM_FIELD(reset)
	SUM_FIELD(fired)
	SUM_FIELD(pending)
	SUM_FIELD(inbox_hwm)
	SUM_FIELD(max_late_ns)
#undef SUM_FIELD
	return NULL;
}

/* True once the stats add up with `pending` timers left and `started` taken on in total. */
static inline bool stats_settled(struct spoke *s, uint64_t started, uint64_t pending)
{
	struct spoke_stats *st = stats_new();
	char buf[256];
	bool ok;

	spoke_stats(s, st);
	ok = st->total.started == started && st->total.pending == pending &&
	     stats_add_up(st, buf, sizeof(buf)) == NULL;
	free(st);
	return ok;
}

/* Fails the test with what does not add up (after a WAIT_UNTIL(stats_settled(...))). */
static inline void assert_stats_settled(struct spoke *s, uint64_t started, uint64_t pending)
{
	struct spoke_stats *st = stats_new();
	char buf[256];
	const char *why;

	spoke_stats(s, st);
	why = stats_add_up(st, buf, sizeof(buf));
	if (!why && st->total.started != started) {
		snprintf(buf, sizeof(buf), "total.started %" PRIu64 ", expected %" PRIu64,
			 st->total.started, started);
		why = buf;
	}
	if (!why && st->total.pending != pending) {
		snprintf(buf, sizeof(buf), "total.pending %" PRIu64 ", expected %" PRIu64,
			 st->total.pending, pending);
		why = buf;
	}
	free(st);
	if (why)
		fail_msg("stats: %s", why);
}

/* ---- threads ---------------------------------------------------------------------- */

#define SVC_MAX_WORKERS 32

struct svc_worker {
	unsigned idx, n;
	void (*fn)(unsigned idx, void *ctx);
	void *ctx;
	pthread_barrier_t *bar;
};

static inline void *svc_worker_main(void *p)
{
	struct svc_worker *w = p;

	pthread_barrier_wait(w->bar);
	w->fn(w->idx, w->ctx);
	return NULL;
}

/* Runs fn(0..n-1, ctx) on n threads that start together; returns when all are done. */
static inline void run_workers(unsigned n, void (*fn)(unsigned idx, void *ctx), void *ctx)
{
	pthread_t t[SVC_MAX_WORKERS];
	struct svc_worker w[SVC_MAX_WORKERS];
	pthread_barrier_t bar;

	assert_true(n > 0 && n <= SVC_MAX_WORKERS);
	assert_int_equal(pthread_barrier_init(&bar, NULL, n), 0);
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct svc_worker){.idx = i, .n = n, .fn = fn, .ctx = ctx, .bar = &bar};
		assert_int_equal(pthread_create(&t[i], NULL, svc_worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
}

/* A thread of its own (for a test that must keep the main thread free). */
static inline pthread_t thread_start(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
	return t;
}

/* Reap the child pid: it must have exited with status 0 (else the test fails, saying how). */
static inline void assert_child_exited_0(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the child %s %d", WIFEXITED(status) ? "exited with" : "died of signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* ---- a callback held on the pool, one queued behind it ------------------------------------ */

/*
 * With one pool worker: `blocker` (a callback of shard bk) holds the worker
 * until the test sets `release` (EVENTUALLY_NS at most), and `victim` (shard vk)
 * expires meanwhile and waits on the pool queue behind it, until a worker
 * takes it. The victim records whether it ran off the test's thread.
 */
static struct held_pool {
	pthread_t main;
	atomic_int blocker_running, release, victim_ran, victim_off_main;
} held;

static inline void held_blocker_fn(void *arg)
{
	(void)arg;
	atomic_store(&held.blocker_running, 1);
	/* Let go by the test; the cap only ends a failed test (a blocker that let go by itself
	 * under load let the victim run early). */
	WAIT_UNTIL(atomic_load(&held.release), EVENTUALLY_NS);
}

static inline void held_victim_fn(void *arg)
{
	(void)arg;
	atomic_store(&held.victim_off_main, !pthread_equal(pthread_self(), held.main));
	atomic_store(&held.victim_ran, 1);
}

/* Just the blocker, on shard bk, running when this returns. */
static inline void held_blocker_begin(struct spoke *s, unsigned bk)
{
	memset(&held, 0, sizeof(held));
	held.main = pthread_self();
	assert_int_equal(spoke_start_on(s, bk, 0, held_blocker_fn, NULL, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&held.blocker_running), "the blocker on the pool");
}

static inline void held_pool_begin(struct spoke *s, unsigned bk, unsigned vk)
{
	held_blocker_begin(s, bk);
	assert_int_equal(spoke_start_on(s, vk, 0, held_victim_fn, NULL, NULL), 0);
	sleep_ms(5); /* the victim expires, and waits on the pool behind the blocker */
}

/* ---- per-timer records ------------------------------------------------------------- */

/*
 * One record per timer a test starts: the callback's argument. `earliest` is
 * written (before the start/reset call) as the time before which the
 * callback must not run; the counters say how the timer ended.
 */
struct trec {
	_Atomic uint64_t earliest;
	_Atomic uint64_t id;
	atomic_uint fired;
	atomic_uint cancelled;
	atomic_uint running;
	_Atomic uint64_t fired_at;
};

static atomic_uint trec_early;		  /* callbacks that ran before `earliest` */
static _Atomic uint64_t trec_worst_early; /* by how much, at worst (ns) */

static inline void trec_reset_globals(void)
{
	atomic_store(&trec_early, 0);
	atomic_store(&trec_worst_early, 0);
}

/* The plain callback: never early, count the run. */
static inline void trec_fire(void *arg)
{
	struct trec *r = arg;
	uint64_t now = spoke_now_ns();
	uint64_t e = atomic_load(&r->earliest);

	if (now < e) {
		uint64_t by = e - now, w = atomic_load(&trec_worst_early);

		atomic_fetch_add(&trec_early, 1);
		while (by > w && !atomic_compare_exchange_weak(&trec_worst_early, &w, by))
			;
	}
	atomic_store(&r->fired_at, now);
	atomic_fetch_add(&r->fired, 1);
}

/* Cancel r's timer from any thread: a win is counted in r, a loss must be -ENOENT. */
static inline void trec_cancel(struct spoke *s, spoke_id id, struct trec *r)
{
	int rc = spoke_cancel(s, id);

	if (rc == 0)
		atomic_fetch_add(&r->cancelled, 1);
	else
		BG_CHECK_INT(rc, ==, -ENOENT);
}

/* Callback that must never run (a cancelled, huge or refused timer). */
static atomic_uint never_ran;
static inline void never_fn(void *arg)
{
	(void)arg;
	atomic_fetch_add(&never_ran, 1);
}

/* Counts runs into the atomic_uint it is given. */
static inline void count_fn(void *arg)
{
	atomic_fetch_add((atomic_uint *)arg, 1);
}

/* A periodic timer's first runs, as its callback records them: the deadline each was due at. */
#define DUE_LOG_RUNS 2
struct due_log {
	_Atomic uint64_t due[DUE_LOG_RUNS];
	atomic_uint runs;
};

/* From inside the timer's callback: count this run and keep its deadline; returns its index. */
static inline unsigned due_log_run(struct due_log *l)
{
	unsigned k = atomic_fetch_add(&l->runs, 1);
	uint64_t due = 0;

	(void)spoke_self(&due);
	if (k < DUE_LOG_RUNS)
		atomic_store(&l->due[k], due);
	return k;
}

#define assert_never_early()                                                                       \
	do {                                                                                       \
		unsigned e_ = atomic_load(&trec_early);                                            \
		if (e_)                                                                            \
			fail_msg("%u callback(s) ran early, worst by %" PRIu64 " ns", e_,          \
				 (uint64_t)atomic_load(&trec_worst_early));                        \
	} while (0)

/* True once every record of rec[0, n) has an outcome: a run or a winning cancel. */
static inline bool trecs_ended(struct trec *rec, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (atomic_load(&rec[i].fired) + atomic_load(&rec[i].cancelled) == 0)
			return false;
	return true;
}

/*
 * Fails the test unless every record of rec[0, n) ended exactly once: one
 * run or one winning cancel. Adds up the runs in *fired and the winning
 * cancels in *cancelled, when they are not NULL.
 */
static inline void assert_trecs_once(struct trec *rec, unsigned n, unsigned *fired,
				     unsigned *cancelled)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned f = atomic_load(&rec[i].fired), k = atomic_load(&rec[i].cancelled);

		if (f + k != 1)
			fail_msg("timer %u: %u callback run(s) and %u winning cancel(s)", i, f, k);
		if (fired)
			*fired += f;
		if (cancelled)
			*cancelled += k;
	}
}

/*
 * The end of a run of s whose n one-shot timers were all its timers, each
 * with a record in rec (trec_fire as callback, winning cancels counted):
 * waits until each has an outcome, leaves room for a second (wrong) run,
 * then fails the test unless each ended exactly once, no background check
 * failed, none ran early and s's stats settle with n started, none pending.
 * fired and cancelled: as assert_trecs_once.
 */
static inline void assert_trecs_end_once(struct spoke *s, struct trec *rec, unsigned n,
					 unsigned *fired, unsigned *cancelled)
{
	ASSERT_EVENTUALLY(trecs_ended(rec, n), "every timer to fire or be cancelled");
	sleep_ms(20);
	assert_trecs_once(rec, n, fired, cancelled);
	assert_no_bg_failures();
	assert_never_early();
	ASSERT_EVENTUALLY(stats_settled(s, n, 0), "the stats to settle");
	assert_stats_settled(s, n, 0);
}

/* ---- main --------------------------------------------------------------------------- */

static inline int svc_main(int argc, char **argv, const char *group, const struct CMUnitTest *all,
			   size_t n_all)
{
	struct CMUnitTest *sel;
	size_t n_sel = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "--expect") == 0) {
		/* The names CMake registers (argv[2..]) are exactly the program's tests. */
		int bad = 0;

		for (size_t i = 0; i < n_all; i++) {
			int seen = 0;

			for (int a = 2; a < argc; a++)
				seen += strcmp(argv[a], all[i].name) == 0;
			if (seen != 1) {
				fprintf(stderr, "%s: test %s is registered %d times in CMake\n",
					argv[0], all[i].name, seen);
				bad = 1;
			}
		}
		if ((size_t)(argc - 2) != n_all) {
			fprintf(stderr, "%s: CMake lists %d names, the program has %zu tests\n",
				argv[0], argc - 2, n_all);
			bad = 1;
		}
		return bad;
	}
	sel = calloc(n_all, sizeof(*sel));
	if (!sel)
		return 1;
	if (argc <= 1) {
		memcpy(sel, all, n_all * sizeof(*sel));
		n_sel = n_all;
	}
	for (int a = 1; a < argc; a++) {
		size_t i;

		for (i = 0; i < n_all; i++)
			if (strcmp(argv[a], all[i].name) == 0)
				break;
		if (i == n_all) {
			fprintf(stderr, "%s: no test named %s\n", argv[0], argv[a]);
			free(sel);
			return 2;
		}
		sel[n_sel++] = all[i];
	}
	int failed = _cmocka_run_group_tests(group, sel, n_sel, NULL, NULL);

	free(sel);
	return failed;
}

#endif /* SPOKE_TESTS_SERVICE_UTIL_H */
