/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * latency_run.c - one run of `spoke-bench latency` (bench_late_run, also the
 * `lateness` workload of `spoke-bench service`), and the parts of it the
 * stolen-CPU scenario shares (latency.h). What a run does and how lateness
 * is defined is said at the top of bench_latency.c.
 *
 * Every timer a run starts ends one way, and the run checks it: a measured
 * (stream) timer runs once; a load timer is cancelled (it has 1 h to go);
 * a held-pending timer (5 s .. 600 s) is cancelled at the end of the run,
 * or, in a run that a loaded machine stretched past its delay, its cancel
 * finds it fired and its callback counted it (never early). A callback
 * that runs before its deadline fails the run.
 */
#define _GNU_SOURCE
#include "bench_team.h"
#include "latency.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define STREAM_MIN_NS	 NS_PER_MS	   /* stream delays ... */
#define STREAM_SPAN_NS	 (4 * NS_PER_MS)   /* ... uniform in [1 ms, 5 ms) */
#define LOAD_DELAY_NS	 (3600 * NS_PER_S) /* load timers: cancelled long before */
#define LOAD_BATCH	 64		   /* load pairs between looks at the stop flag */
#define MAX_LOAD_THREADS 64
#define LATE_SEED	 UINT64_C(0x1a7e1a7e5eed0001)

/* ---- callbacks and what they count ---------------------------------------- */

static _Atomic uint64_t late_done, load_fires, pending_ran;

/* Callbacks that ran before their deadline: measured timers, pending timers. */
struct early {
	_Atomic uint64_t count, worst_ns;
};
static struct early stream_early, pending_early;

static _Atomic uint64_t stream_worst_late_ns;

void late_counters_reset(void)
{
	atomic_store(&late_done, 0);
	atomic_store(&load_fires, 0);
	atomic_store(&pending_ran, 0);
	atomic_store(&stream_worst_late_ns, 0);
	memset(&stream_early, 0, sizeof(stream_early));
	memset(&pending_early, 0, sizeof(pending_early));
}

/* Any thread: *v = max(*v, x). */
static void atomic_max_u64(_Atomic uint64_t *v, uint64_t x)
{
	uint64_t old = atomic_load_explicit(v, memory_order_relaxed);

	while (x > old && !atomic_compare_exchange_weak_explicit(v, &old, x, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

/* Any thread: a callback ran by_ns before its deadline. */
static void note_early(struct early *e, uint64_t by_ns)
{
	atomic_max_u64(&e->worst_ns, by_ns);
	atomic_fetch_add_explicit(&e->count, 1, memory_order_relaxed);
}

void late_cb(void *arg)
{
	uint64_t now = spoke_now_ns();
	struct late_sample *x = arg;

	x->ran_at = now;
	if (now < x->expected) {
		note_early(&stream_early, x->expected - now);
		x->late = 0;
	} else {
		x->late = now - x->expected;
		atomic_max_u64(&stream_worst_late_ns, x->late);
	}
	atomic_fetch_add_explicit(&late_done, 1, memory_order_release);
}

/*
 * Pool thread: a held-pending timer (5 s .. 600 s) ran: a run stretched past
 * its delay. arg is its expected deadline (as for the stream).
 */
static void cb_pending(void *arg)
{
	uint64_t now = spoke_now_ns(), expected = (uint64_t)(uintptr_t)arg;

	if (now < expected)
		note_early(&pending_early, expected - now);
	atomic_fetch_add_explicit(&pending_ran, 1, memory_order_relaxed);
}

/* ---- the load: start + cancel pairs from other threads ------------------------ */

/* A load thread (a team thread, bench_team.h): its header first, then its job. */
struct load_thread {
	struct bench_thread t;
	struct spoke *s;
	unsigned nshards;
	double batch_ns; /* pacing: one batch of LOAD_BATCH pairs per batch_ns (0 = none) */
};

/*
 * A load thread's body: start + cancel pairs on the shards in turn until
 * the team stops, in batches of LOAD_BATCH; paced, the n-th batch starts at
 * t0 + n * batch_ns (one that falls behind does not sleep until it caught
 * up). t->ops counts the pairs.
 */
static void load_main(struct bench_thread *t)
{
	struct load_thread *l = (struct load_thread *)t;
	unsigned shard = t->index % l->nshards;
	uint64_t pairs = 0, batches = 0;
	int err = 0;

	do {
		if (l->batch_ns > 0)
			bench_sleep_until_ns(t->t0 + (uint64_t)((double)batches * l->batch_ns));
		batches++;
		for (int k = 0; !err && k < LOAD_BATCH; k++) {
			spoke_id id;

			err = spoke_start_on(l->s, shard, LOAD_DELAY_NS, bench_cb_count,
					     &load_fires, &id);
			if (!err)
				err = spoke_cancel(l->s, id);
			shard = shard + 1 == l->nshards ? 0 : shard + 1;
		}
		pairs += LOAD_BATCH;
	} while (!err && !bench_team_stopping(t));
	t->ops = pairs;
	if (err)
		bench_thread_fail(t, err, "spoke_start_on or spoke_cancel");
}

/*
 * Start j->load_threads load threads on s (none: nothing to start). 0, or
 * a negative errno with out->error set.
 */
static int load_start(struct bench_team *team, struct load_thread *load,
		      const struct bench_late_job *j, struct spoke *s, struct bench_sample *out)
{
	int err;

	*team = (struct bench_team){.T = j->load_threads,
				    .pin = true,
				    .body = load_main,
				    .threads = load,
				    .stride = sizeof(load[0])};
	for (unsigned i = 0; i < j->load_threads; i++) {
		load[i] = (struct load_thread){.s = s, .nshards = spoke_shards(s)};
		if (j->load_rate > 0)
			load[i].batch_ns = 1e9 * LOAD_BATCH * j->load_threads / j->load_rate;
	}
	err = bench_team_start(team);
	if (err)
		return bench_fail(out, err, "pthread_create: %s", strerror(-err));
	bench_team_ready(team);
	bench_team_go(team, true);
	return 0;
}

/* Stop and join the load threads; the pairs they did, or a negative errno. */
static int64_t load_stop(struct bench_team *team, double *load_ns)
{
	struct bench_team_result r;

	bench_team_stop(team);
	bench_team_join(team, &r);
	*load_ns = r.window_ns;
	return r.err ? r.err : (int64_t)r.ops;
}

/* ---- the process's CPU over a stretch of the run -------------------------------- */

struct cpu_mark {
	uint64_t wall_ns, cpu_ns, csw;
};

static struct cpu_mark cpu_mark_now(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return (struct cpu_mark){
		.wall_ns = spoke_now_ns(),
		.cpu_ns = (uint64_t)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * NS_PER_S +
			  (uint64_t)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * NS_PER_US,
		.csw = (uint64_t)(u.ru_nvcsw + u.ru_nivcsw)};
}

static void cpu_mark_since(const struct cpu_mark *m0, struct bench_late_result *r)
{
	struct cpu_mark m1 = cpu_mark_now();
	double wall = (double)(m1.wall_ns - m0->wall_ns);

	r->cpu_pct = wall > 0 ? 100.0 * (double)(m1.cpu_ns - m0->cpu_ns) / wall : 0;
	r->csw_per_s = wall > 0 ? (double)(m1.csw - m0->csw) * 1e9 / wall : 0;
}

/* ---- fill, stream, finish ---------------------------------------------------- */

int late_fill(struct spoke *s, struct late_pending *p, uint64_t n, uint64_t min_ns,
	      struct bench_rng *rng, struct bench_sample *out)
{
	unsigned nshards = spoke_shards(s);
	char sb[160];
	int err = 0;

	p->n = 0;
	p->ids = n ? malloc(n * sizeof(*p->ids)) : NULL;
	if (n && !p->ids)
		return bench_fail(out, -ENOMEM, "fill: no memory for %llu ids",
				  (unsigned long long)n);
	for (; !err && p->n < n; p->n++) {
		uint64_t d = min_ns + bench_rng_next(rng) % (119 * min_ns);

		err = spoke_start_on(s, (unsigned)(p->n % nshards), d, cb_pending,
				     (void *)(uintptr_t)(spoke_now_ns() + d), &p->ids[p->n]);
	}
	if (err) {
		p->n--; /* the last one did not start */
		return bench_fail(out, err, "fill: spoke_start_on: %s", strerror(-err));
	}
	/* All taken in (started; a short --pending-min may have fired some already). */
	if (bench_svc_wait(
		    s, &(struct bench_svc_counts){n, BENCH_ANY, BENCH_ANY, BENCH_ANY, BENCH_ANY},
		    NULL) != 0)
		return bench_fail(out, -ETIME, "fill: %llu timers did not reach the wheels: %s",
				  (unsigned long long)n,
				  bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(s)));
	return 0;
}

/* Stream: timers with short delays until the window ends; how many, or -errno. */
static int64_t stream(struct spoke *s, const struct bench_late_job *j, struct late_sample *smp,
		      struct bench_rng *rng, struct bench_sample *out)
{
	unsigned nshards = spoke_shards(s), shard = 0;
	uint64_t k = 0, end = spoke_now_ns() + j->window_ns;

	while (k + LATE_STREAM_BATCH <= j->max_samples && spoke_now_ns() < end) {
		for (int b = 0; b < LATE_STREAM_BATCH; b++) {
			uint64_t d = STREAM_MIN_NS + bench_rng_next(rng) % STREAM_SPAN_NS;
			struct late_sample *x = &smp[k];
			int err;

			x->expected = spoke_now_ns() + d;
			err = spoke_start_on(s, shard, d, late_cb, x, NULL);
			if (err)
				return bench_fail(out, err, "stream: spoke_start_on: %s",
						  strerror(-err));
			k++;
			shard = shard + 1 == nshards ? 0 : shard + 1;
		}
		bench_sleep_ns(LATE_STREAM_PACE_NS);
	}
	if (k == 0)
		return bench_fail(out, -EPROTO, "no stream timer started in the window");
	return (int64_t)k;
}

int late_wait_stream(uint64_t k, struct bench_sample *out)
{
	uint64_t limit = spoke_now_ns() + BENCH_WAIT_LIMIT_NS;

	while (atomic_load_explicit(&late_done, memory_order_acquire) < k) {
		if (spoke_now_ns() > limit)
			return bench_fail(out, -ETIME, "%llu of %llu measured timers ran in %llu s",
					  (unsigned long long)atomic_load(&late_done),
					  (unsigned long long)k,
					  (unsigned long long)(BENCH_WAIT_LIMIT_NS / NS_PER_S));
		bench_sleep_ns(BENCH_WAIT_STEP_NS);
	}
	return 0;
}

/* Every callback that ran early: the first thing a run reports. 0 or -EPROTO. */
static int check_early(uint64_t k, uint64_t pending, struct bench_sample *out)
{
	uint64_t se = atomic_load(&stream_early.count), pe = atomic_load(&pending_early.count);

	if (se || pe)
		return bench_fail(
			out, -EPROTO,
			"EARLY FIRE: %llu of %llu measured timers ran before their "
			"deadline (worst by %.3f us), %llu of %llu pending (worst by %.3f "
			"s)",
			(unsigned long long)se, (unsigned long long)k,
			(double)atomic_load(&stream_early.worst_ns) / 1e3, (unsigned long long)pe,
			(unsigned long long)pending,
			(double)atomic_load(&pending_early.worst_ns) / 1e9);
	return 0;
}

/* Cancel the held-pending timers; those whose cancel finds them fired, into *ran. */
static int cancel_pending(struct spoke *s, const struct late_pending *p, uint64_t *ran,
			  struct bench_sample *out)
{
	*ran = 0;
	for (uint64_t i = 0; i < p->n; i++) {
		int c = spoke_cancel(s, p->ids[i]);

		if (c == -ENOENT)
			(*ran)++;
		else if (c)
			return bench_fail(out, c, "spoke_cancel of a pending timer: %s",
					  strerror(-c));
	}
	return 0;
}

int late_finish(struct spoke *s, const struct late_pending *p, uint64_t k, uint64_t pairs,
		uint64_t *ran, struct bench_sample *out)
{
	struct bench_svc_counts want;
	char sb[160];
	int err = cancel_pending(s, p, ran, out);

	want = (struct bench_svc_counts){p->n + k + pairs, pairs + p->n - *ran, BENCH_ANY, k + *ran,
					 0};
	if (!err && bench_svc_wait(s, &want, NULL) != 0)
		err = bench_fail(
			out, -ETIME,
			"%llu measured timers, %llu load pairs, %llu pending of which %llu "
			"ran: the counters read %s",
			(unsigned long long)k, (unsigned long long)pairs, (unsigned long long)p->n,
			(unsigned long long)*ran,
			bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(s)));
	if (check_early(k, p->n, out) != 0)
		return -EPROTO; /* whatever else went wrong, an early run is reported */
	return err;
}

int late_check_callbacks(uint64_t ran, struct bench_sample *out)
{
	if (atomic_load(&load_fires))
		return bench_fail(out, -EPROTO, "%llu load timers (1 h, cancelled) ran",
				  (unsigned long long)atomic_load(&load_fires));
	if (atomic_load(&pending_ran) != ran)
		return bench_fail(
			out, -EPROTO, "%llu pending timers ran, but %llu cancels found them gone",
			(unsigned long long)atomic_load(&pending_ran), (unsigned long long)ran);
	return 0;
}

void late_summarize(const struct late_sample *smp, uint64_t k, uint64_t *late_ns,
		    struct bench_late_result *r)
{
	for (uint64_t i = 0; i < k; i++)
		late_ns[i] = smp[i].late;
	bench_sort_u64(late_ns, k);
	r->samples = k;
	r->pct = bench_pcts_us(late_ns, k);
}

/* ---- one run ------------------------------------------------------------------- */

/* The service of a run: the default config but the job's tick, slack and pinning. */
static int late_create(struct spoke **s, const struct bench_late_job *j, struct bench_sample *out)
{
	struct spoke_config cfg;

	spoke_config_init(&cfg);
	cfg.tick_ns = j->tick_ns;
	cfg.slack_ns = j->slack_ns;
	cfg.pin_threads = !j->no_pin;
	return bench_svc_create(s, &cfg, out);
}

/* Stream with the load on, and wait for every measured callback: how many, or -errno. */
static int64_t measure(struct spoke *s, const struct bench_late_job *j, struct late_sample *smp,
		       struct bench_rng *rng, struct bench_late_result *r, struct bench_sample *out)
{
	struct cpu_mark m0 = cpu_mark_now();
	int64_t k = stream(s, j, smp, rng, out);
	int err = k < 0 ? (int)k : late_wait_stream((uint64_t)k, out);

	cpu_mark_since(&m0, r);
	return err ? err : k;
}

int bench_late_run(const struct bench_late_job *j, unsigned run, uint64_t *late_ns,
		   struct bench_late_result *r, struct bench_sample *out)
{
	struct load_thread load[MAX_LOAD_THREADS];
	struct late_pending pend = {0};
	struct bench_team team;
	struct late_sample *smp;
	struct bench_rng rng;
	int64_t k = 0, pairs = 0;
	bool loaded = false;
	struct spoke *s;
	int err;

	memset(r, 0, sizeof(*r));
	late_counters_reset();
	if (j->load_threads > MAX_LOAD_THREADS)
		return bench_fail(out, -EINVAL, "at most %d load threads", MAX_LOAD_THREADS);
	bench_rng_seed(&rng, LATE_SEED + run);
	smp = calloc(j->max_samples, sizeof(*smp));
	if (!smp)
		return bench_fail(out, -ENOMEM, "no memory for %zu samples", j->max_samples);
	err = late_create(&s, j, out);
	if (err) {
		free(smp);
		return err;
	}
	err = late_fill(s, &pend, j->pending,
			j->pending_min_ns ? j->pending_min_ns : LATE_PENDING_MIN_NS, &rng, out);
	if (!err) {
		err = load_start(&team, load, j, s, out);
		loaded = err == 0;
	}
	if (!err) {
		k = measure(s, j, smp, &rng, r, out);
		err = k < 0 ? (int)k : 0;
	}
	if (loaded)
		pairs = load_stop(&team, &r->load_ns);
	if (pairs < 0 && !err)
		err = bench_fail(out, (int)pairs, "load: spoke_start_on or spoke_cancel: %s",
				 strerror((int)-pairs));
	if (!err)
		err = late_finish(s, &pend, (uint64_t)k, (uint64_t)pairs, &r->pending_ran, out);
	if (!err) {
		const struct spoke_stats *st = bench_svc_stats(s);

		r->service_max_late_us = (double)st->total.max_late_ns / 1000.0;
		r->slack_us = (double)st->shard[0].slack_ns / 1000.0;
	}
	spoke_destroy(s); /* every callback has run when it returns */
	if (!err)
		err = late_check_callbacks(r->pending_ran, out);
	if (!err) {
		late_summarize(smp, (uint64_t)k, late_ns, r);
		r->load_pairs = (uint64_t)pairs;
	}
	free(pend.ids);
	free(smp);
	return err;
}
