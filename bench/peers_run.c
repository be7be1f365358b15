/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers_run.c - the workloads of `spoke-bench peers` (bench_peers.c says
 * what each measures): one run each, in a forked child, driving a peer
 * through its table of operations (peers.h); and the memory floor.
 */
#include "peers.h"

#include <malloc.h>
#include <string.h>
#include <time.h>

#define RT_LIMIT_NS (10 * NS_PER_S) /* "never": a real-time W2 run gives up */
#define FLOOR_LINE  64u

/* ---- the workloads (each run in a forked child) ------------------------ */

/* The CPU time of the whole process (the timed part of a run: its CPU figure). */
static uint64_t process_cpu_ns(void)
{
	return bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
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

/*
 * A stop's or reset's result, where the timer fired first accepted (0) from
 * the real-time peers alone: only their clocks run during W1 and the resets.
 */
static int late_ok(const struct peer_ops *ops, int r)
{
	return real_time(ops) && r == -ENOENT ? 0 : r;
}

/* Where the timed part of W1 and the resets began: after a setup from t0, at t1 and cpu1. */
struct timed {
	uint64_t t0, t1, cpu1;
};

/*
 * The start of W1 and the resets: open the peer, start nstart timers, let a
 * foreign peer's owner take them (settle), and stamp the timed part's
 * start. 0 or an error (then the peer is closed).
 */
static int timed_begin(const struct cell *c, unsigned run, const struct peer_setup *ps,
		       size_t nstart, struct peer **pp, struct bench_rng *rng, struct timed *tm,
		       struct bench_sample *out)
{
	int err;

	tm->t0 = peers_real_now_ns();
	err = open_started(c, run, ps, nstart, pp, rng, out);
	if (err)
		return err;
	err = ps->foreign && c->ops->settle ? c->ops->settle(*pp) : 0;
	if (err) {
		c->ops->close(*pp);
		return bench_fail(out, err, "the owner did not take the %zu starts: %s", nstart,
				  strerror(-err));
	}
	tm->t1 = peers_real_now_ns();
	tm->cpu1 = process_cpu_ns();
	return 0;
}

/*
 * The end of W1 and the resets, whose `ops` operations ran since tm: check
 * what they did (bad: an operation failed; a stepped clock that stood still
 * let nothing fire), close the peer, and fill *out. 0 or an error.
 */
static int timed_end(struct peer *p, int bad, const char *what, const struct timed *tm,
		     uint64_t ops, struct bench_sample *out)
{
	uint64_t cpu2 = process_cpu_ns(), t2 = peers_real_now_ns();
	int err = 0;

	if (bad)
		err = bench_fail(out, -EPROTO, "%s", what);
	else if (!real_time(p->ops) && p->fired)
		err = bench_fail(out, -EPROTO, "%zu timers fired with the clock stopped", p->fired);
	p->ops->close(p);
	out->setup_ns = (double)(tm->t1 - tm->t0);
	out->timed_ns = (double)(t2 - tm->t1);
	out->value = out->timed_ns / (double)ops;
	out->cpu_value = (double)(cpu2 - tm->cpu1) / (double)ops;
	return err;
}

/*
 * One operation of W1 or of the resets, drawn from x: what it returned (0,
 * or -errno; a late -ENOENT of a real-time peer is 0). *spare is W1's
 * timer that is not pending.
 */
typedef int timed_op_fn(struct peer *p, uint64_t x, uint32_t n, uint32_t *spare);

/* W1: start the spare timer, stop a random pending one (the next spare). */
static inline int w1_op(struct peer *p, uint64_t x, uint32_t n, uint32_t *spare)
{
	uint32_t victim = bench_w1_victim(x, n, *spare);
	int err = p->ops->start(p, *spare, bench_random_delay(x));

	*spare = victim;
	return err | late_ok(p->ops, p->ops->stop(p, victim));
}

/* A reset of a random one of the n pending timers to a random delay. */
static inline int reset_op(struct peer *p, uint64_t x, uint32_t n, uint32_t *spare)
{
	(void)spare;
	return late_ok(p->ops, p->ops->reset(p, bench_below((uint32_t)(x >> 32), n),
					     bench_random_delay(x)));
}

/*
 * W1 and the resets: n timers pending (W1 has one more, the spare), then
 * max(n, 1e5) ops timed, one xorshift64* each. Inlined with a constant op.
 */
static inline __attribute__((always_inline)) int run_timed(const struct cell *c, unsigned run,
							   bool foreign, timed_op_fn *op,
							   const char *what,
							   struct bench_sample *out)
{
	const uint32_t n = (uint32_t)c->n;
	const uint64_t nops = bench_w1_pairs(c->n);
	const struct peer_setup ps = {
		.ntimers = (size_t)n + (op == w1_op), .tick_ns = NS_PER_MS, .foreign = foreign};
	uint32_t spare = n;
	struct bench_rng rng;
	struct timed tm;
	struct peer *p;
	int err, bad = 0;

	err = timed_begin(c, run, &ps, n, &p, &rng, &tm, out);
	if (err)
		return err;
	for (uint64_t i = 0; i < nops; i++)
		bad |= op(p, bench_rng_next(&rng), n, &spare);
	return timed_end(p, bad, what, &tm, nops, out);
}

/* W1: start the spare timer, stop a random outstanding one. */
static int run_w1(void *arg, unsigned run, struct bench_sample *out)
{
	return run_timed(arg, run, false, w1_op, "a start or stop failed", out);
}

/* reset-own, reset-foreign: resets of a random pending timer to a random delay. */
static int run_reset_own(void *arg, unsigned run, struct bench_sample *out)
{
	return run_timed(arg, run, false, reset_op, "a reset failed", out);
}

static int run_reset_foreign(void *arg, unsigned run, struct bench_sample *out)
{
	return run_timed(arg, run, true, reset_op, "a reset failed", out);
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
	uint64_t t0, t1, t2, cpu1;
	double total_ns = 0;
	struct peer *p;
	int err;

	t0 = peers_real_now_ns();
	err = open_started(c, run, &ps, c->n, &p, &rng, out);
	if (err)
		return err;
	t1 = peers_real_now_ns();
	cpu1 = process_cpu_ns();
	if (real_time(ops)) {
		err = w2_real_time(p, c, t1, tick_by_tick, &total_ns);
	} else {
		err = w2_stepped(p, tick_by_tick);
		total_ns = (double)(peers_real_now_ns() - t1);
	}
	out->cpu_value = (double)(process_cpu_ns() - cpu1) / (double)c->n;
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
int peers_run_floor(void *arg, unsigned run, struct bench_sample *out)
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

bench_run_fn *const peers_workload_runs[NWORKLOADS] = {
	[W1] = run_w1, [W2_ADVANCE] = run_w2_advance, [W2_TICK] = run_w2_tick,
	[W3] = run_w3, [RESET_OWN] = run_reset_own,   [RESET_FOREIGN] = run_reset_foreign,
};
