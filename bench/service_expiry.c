/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service_expiry.c - how fast and how late the service runs callbacks
 * (service.h):
 *
 *   fire-inline, fire-pool  n timers due at one deadline: wall time from the
 *                           first callback to the last, per callback;
 *   lateness                bench_late_run() (latency_run.c), no load.
 *
 * bench_service.c says what each row measures.
 */
#define _GNU_SOURCE
#include "fire_slots.h"
#include "latency.h"
#include "service.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define LATE_MAX_SAMPLES 200000
#define FIRE_SLOTS	 1024
#define FIRE_STAMP_EVERY 16
#define FIRE_ATTEMPTS	 5
#define FIRE_TICK_NS	 (10 * NS_PER_MS) /* see fire_once */

/* ---- fired callbacks per second ------------------------------------------ */

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
	uint64_t t_create, t_mid, w, D, k, limit, got, done_at = 0;
	const struct spoke_shard_stats *t;
	char sb[160];
	int err = 0;

	fire_slots_reset();
	/*
	 * A shard's tick 0 is read inside spoke_create, in the window of w ns
	 * around t_mid. D in the middle of "tick k after t_mid" is then within
	 * a quarter tick of the middle of one tick of every shard, if w is
	 * under half a tick, so each shard fires its share in one turn (the
	 * tick length plays no part in the dispatch rate).
	 */
	t_create = spoke_now_ns();
	err = create_service(&s, j->T, callbacks, j->per_shard, tick_ns, out);
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
			err = spoke_start_on(s, (unsigned)(i % j->T), D - now, fire_slots_cb, NULL,
					     NULL);
	}
	if (err < 0)
		err = bench_fail(out, err, "spoke_start_on: %s", strerror(-err));
	/* All in the wheels a quarter tick before the deadline, none run yet. */
	while (!err && bench_svc_totals(s)->pending != j->n)
		if (spoke_now_ns() + tick_ns / 4 >= D)
			err = 1;
		else
			bench_sleep_ns(BENCH_WAIT_STEP_NS);
	if (!err &&
	    fire_slots_count(FIRE_SLOTS) != 0) /* all: an early run's slot may not show yet */
		err = bench_fail(out, -EPROTO, "a callback ran before its deadline");
	*csw = csw_now(); /* the whole process, from here to the last callback */
	limit = D + BENCH_WAIT_LIMIT_NS;
	while (!err && (got = fire_slots_count(fire_slots_used())) < j->n) {
		if (spoke_now_ns() > limit)
			err = bench_fail(out, -ETIME, "%llu of %llu callbacks ran in %llu s",
					 (unsigned long long)got, (unsigned long long)j->n,
					 (unsigned long long)(BENCH_WAIT_LIMIT_NS / NS_PER_S));
		else
			bench_sleep_ns(BENCH_WAIT_STEP_NS);
	}
	done_at = bench_now_ns();
	*csw = csw_now() - *csw;
	if (!err) {
		bench_sleep_ns(10 * NS_PER_MS);		  /* a duplicate run would show up now */
		(void)bench_svc_wait_pending(s, 0, NULL); /* published after the turn */
		t = bench_svc_totals(s);
		got = fire_slots_count(FIRE_SLOTS);
		if (got != j->n || t->fired != j->n || t->pending != 0)
			err = bench_fail(out, -EPROTO, "%llu callbacks ran for %llu timers; %s",
					 (unsigned long long)got, (unsigned long long)j->n,
					 bench_svc_stats_str(sb, sizeof(sb), t));
	}
	spoke_destroy(s);
	if (err)
		return err;
	*ns = fire_slots_span_ns(done_at);
	return 0;
}

int run_fire(void *arg, unsigned run, struct bench_sample *out)
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
		return bench_fail(out, -ETIME,
				  "could not get %llu timers into the wheels %llu ms ahead of time",
				  (unsigned long long)j->n,
				  (unsigned long long)(margin / 4 / NS_PER_MS));
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

/* ---- lateness (bench_late_run, latency_run.c) ------------------------------ */

int run_lateness(void *arg, unsigned run, struct bench_sample *out)
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
		return bench_fail(out, -ENOMEM, "no memory for samples");
	err = bench_late_run(&lj, run, late, &r, out);
	free(late);
	if (err)
		return err;
	x->v[X_P50] = r.pct.p50_us;
	x->v[X_P99] = r.pct.p99_us;
	x->v[X_P999] = r.pct.p999_us;
	x->v[X_MAX] = r.pct.max_us;
	x->v[X_SAMPLES] = (double)r.samples;
	x->v[X_SVC_LATE] = r.service_max_late_us;
	out->value = r.pct.p99_us;
	out->timed_ns = (double)j->window_ns;
	return 0;
}
