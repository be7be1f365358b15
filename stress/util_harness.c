/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_harness.c - the stress library's frame around every program: the
 * options, violations and the phase they are reported in, the watchdog, the
 * tallies and the op budget, memory, and the exit status (stress_util.h
 * describes each).
 */
#include <stdarg.h>
#include <unistd.h>

#include "stress_util.h"

/* ---- time ---------------------------------------------------------------------- */

void spin_until(uint64_t t)
{
	uint64_t n;

	while ((n = now_ns()) < t)
		if (t - n > 50 * US)
			sched_yield();
}

/* ---- violations, phase, watchdog ------------------------------------------------- */

const char *g_name = "stress";
static _Atomic(const char *) g_phase = "start";
static atomic_uint g_violations;
uint64_t g_seed;
uint64_t g_t0_ns;

void stress_phase(const char *p)
{
	atomic_store(&g_phase, p);
}

void stress_violation(const char *file, int line, const char *fmt, ...)
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

static _Atomic uint64_t g_watchdog_ns; /* 0 = off */

static void *watchdog_main(void *p)
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
static void watchdog_arm(double s)
{
	atomic_store(&g_watchdog_ns, now_ns() + (uint64_t)(s * 1e9));
}

/* ---- options ---------------------------------------------------------------------- */

struct stress_opts g_opt;

static uint64_t parse_count(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v < 0 || v > 1e15) {
		fprintf(stderr, "%s: bad %s '%s'\n", g_name, what, s);
		exit(2);
	}
	return (uint64_t)v;
}

static void usage(const char *what)
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
void stress_init(int argc, char **argv, const char *name, const char *what, uint64_t def_ops,
		 double def_seconds)
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

static const char *const tally_name[TK_COUNT] = {
	"start",
	"cancel=0",
	"cancel=ENOENT",
	"cancel_sync=0",
	"cancel_sync=ENOENT",
	"cancel_sync=EDEADLK",
	"reset=0",
	"reset=ENOENT",
	"start=ENOBUFS",
	"ESHUTDOWN",
	"poll",
	"probe",
	"fired",
	"late-cancel-won",
};

_Atomic uint64_t g_tally[TK_COUNT];
static _Thread_local uint64_t tl_tally[TK_COUNT];
static _Thread_local unsigned tl_unflushed;

/*
 * The op budget of the round in progress (budget_begin): workers charge
 * their ops to `done` in batches (tally_flush); whichever thread sees the
 * ops done or the time up sets `over`, and every worker stops at its next
 * budget_over().
 */
struct budget {
	uint64_t ops;	 /* 0 = no limit */
	uint64_t end_ns; /* time cap */
	_Atomic uint64_t done;
	atomic_int over;
	int by_time; /* the time cap ended it */
};

static struct budget g_budget;

/* Main thread, before a round's workers start. */
void budget_begin(uint64_t ops, double seconds)
{
	g_budget.ops = ops;
	g_budget.end_ns = seconds > 0 ? now_ns() + (uint64_t)(seconds * 1e9) : UINT64_MAX;
	atomic_store(&g_budget.done, 0);
	atomic_store(&g_budget.over, 0);
	g_budget.by_time = 0;
}

static void budget_charge(uint64_t n)
{
	uint64_t d = atomic_fetch_add_explicit(&g_budget.done, n, memory_order_relaxed) + n;

	if (g_budget.ops && d >= g_budget.ops)
		atomic_store_explicit(&g_budget.over, 1, memory_order_relaxed);
}

bool budget_over(void)
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

void tally_flush(void)
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

void tally(enum tally_kind k)
{
	tl_tally[k]++;
	if (k < TK_TIMER_OPS && ++tl_unflushed >= 256)
		tally_flush();
}

void tally_snapshot(uint64_t out[TK_COUNT])
{
	for (int k = 0; k < TK_COUNT; k++)
		out[k] = atomic_load(&g_tally[k]);
}

static uint64_t tally_ops(const uint64_t t[TK_COUNT])
{
	uint64_t n = 0;

	for (int k = 0; k < TK_TIMER_OPS; k++)
		n += t[k];
	return n;
}

void tally_report(const char *label, const uint64_t before[TK_COUNT], double secs)
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

atomic_int g_shutdown_ok;
_Thread_local bool tl_saw_shutdown;

void check_rc(const char *call, int rc, bool enoent_ok)
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

void check_start_rc(const char *call, int rc)
{
	if (rc == -ENOBUFS)
		tally(TK_START_REFUSED);
	else
		check_rc(call, rc, false);
}

/* ---- memory -------------------------------------------------------------------------- */

uint64_t rss_bytes(void)
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

void *stress_table_alloc(size_t n, size_t size, const char *what)
{
	void *t;

	if (n == 0 || n > REC_MAX)
		abort();
	t = aligned_alloc(64, n * size);
	if (!t) {
		fprintf(stderr, "%s: out of memory for %zu %s\n", g_name, n, what);
		exit(2);
	}
	memset(t, 0, n * size);
	return t;
}

/* ---- the end -------------------------------------------------------------------------- */

int stress_finish(void)
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
