/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service_cross.c - threads that do not own the shard they work on
 * (service.h):
 *
 *   cross-start-cancel  spoke_start_on(another CPU's shard) + spoke_cancel;
 *   cross-start         spoke_start_on only, a fixed count;
 *   reset-foreign       spoke_reset of a random pending timer of shards
 *                       that owner threads attached.
 *
 * bench_service.c says what each row measures.
 */
#include "service.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * The team of a cross-* run: a service with a managed shard per CPU, and
 * the producer on CPU c aimed at the shard of the next CPU (shard k is on
 * CPU k). 0 or an error (said).
 */
static int cross_init(const struct job *j, unsigned run, struct bench_sample *out)
{
	unsigned nshards;
	int err;

	team_init(&team, j, run);
	err = create_service(&team.s, 0, 0, 0, NS_PER_MS, out);
	if (err)
		return err;
	nshards = spoke_shards(team.s);
	for (unsigned i = 0; i < j->T; i++)
		team.w[i].target = (i % bench_ncpus() + 1) % nshards;
	return 0;
}

/* ---- cross-start-cancel ------------------------------------------------------ */

static inline int cross_pair_op(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke *s = team_of(w)->s;
	spoke_id id;
	int err = spoke_start_on(s, w->target, PAIR_DELAY_NS, bench_cb_count, &stall_fires, &id);

	if (err)
		return err;
	maybe_stall(w);
	err = spoke_cancel(s, id);
	if (err != -ENOENT)
		return err;
	w->lost++; /* the thread stalled past the delay: the timer fired (counted) */
	return 0;
}

static void cross_pair_body(struct bench_thread *t)
{
	bench_window_loop(t, cross_pair_op, NULL, "spoke_start_on or spoke_cancel failed");
}

int run_cross_pair(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	struct bench_svc_counts want;
	struct team_result r;
	char sb[160];
	int err;

	err = cross_init(j, run, out);
	if (err)
		return err;
	team.base.body = cross_pair_body;
	err = team_run(&team, j->window_ns, NULL, &r, out);
	want = (struct bench_svc_counts){r.ops, r.ops - r.lost, BENCH_ANY, r.lost, 0};
	if (!err && bench_svc_wait(team.s, &want, NULL) != 0)
		err = bench_fail(
			out, -ETIME,
			"%llu pairs (%llu cancels lost to a fire) did not drain in %llu s: "
			"%s",
			(unsigned long long)r.ops, (unsigned long long)r.lost,
			(unsigned long long)(BENCH_WAIT_LIMIT_NS / NS_PER_S),
			bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(team.s)));
	spoke_destroy(team.s); /* every callback has run when it returns */
	if (!err && atomic_load(&stall_fires) != r.lost)
		err = bench_fail(out, -EPROTO, "%llu callbacks ran for %llu cancels that lost",
				 (unsigned long long)atomic_load(&stall_fires),
				 (unsigned long long)r.lost);
	if (!err)
		report_ops(out, &extras[run], &r);
	return err;
}

/* ---- cross-start ---------------------------------------------------------------- */

/* Warm the producer's arena: start and cancel as many timers as it will start. */
static void cross_start_warm(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke *s = team_of(w)->s;
	spoke_id *ids = malloc(w->count * sizeof(*ids));
	int err = 0;

	if (!ids) {
		bench_thread_fail(t, -ENOMEM, "malloc");
		return;
	}
	for (uint64_t i = 0; i < w->count; i++)
		err |= spoke_start_on(s, w->target, LONG_DELAY_NS, bench_cb_count, &stall_fires,
				      &ids[i]);
	for (uint64_t i = 0; !err && i < w->count; i++)
		err |= spoke_cancel(s, ids[i]);
	free(ids);
	if (err)
		bench_thread_fail(t, -EPROTO, "warm-up start or cancel failed");
}

/* Main, before the window: the warm-up handles are back in their arenas. */
static int cross_start_between(void *ctx, struct bench_sample *out)
{
	struct team *tm = ctx;
	const struct bench_svc_counts want = {tm->n, tm->n, BENCH_ANY, BENCH_ANY, 0};
	char sb[160];

	if (bench_svc_wait(tm->s, &want, NULL) != 0)
		return bench_fail(out, -ETIME, "warm-up: shards did not drain %llu timers: %s",
				  (unsigned long long)tm->n,
				  bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(tm->s)));
	return 0;
}

static void cross_start_body(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke *s = team_of(w)->s;
	unsigned target = w->target;
	int err = 0;

	for (uint64_t i = 0; i < w->count; i++)
		err |= spoke_start_on(s, target, LONG_DELAY_NS, bench_cb_count, &stall_fires, NULL);
	t->ops = w->count;
	if (err)
		bench_thread_fail(t, -EPROTO, "spoke_start_on failed");
}

int run_cross_start(void *arg, unsigned run, struct bench_sample *out)
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
	team.base.body = cross_start_body;
	err = team_run(&team, 0, cross_start_between, &r, out);
	if (!err && bench_svc_wait_pending(team.s, j->n, &all_in) != 0)
		err = bench_fail(out, -ETIME, "%llu starts did not all reach the wheels: %s",
				 (unsigned long long)j->n,
				 bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(team.s)));
	t = bench_svc_totals(team.s);
	if (!err && (t->started != 2 * j->n || t->cancelled != j->n || t->fired))
		err = bench_fail(out, -EPROTO, "after %llu warm-up and %llu timed starts: %s",
				 (unsigned long long)j->n, (unsigned long long)j->n,
				 bench_svc_stats_str(sb, sizeof(sb), t));
	spoke_destroy(team.s);
	if (err)
		return err;
	report_ops(out, &extras[run], &r);
	extras[run].v[X_DRAIN_NS] = (double)(all_in - r.first_t0);
	return 0;
}

/* ---- reset-foreign -------------------------------------------------------------- */

static inline int reset_foreign_op(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct team *tm = team_of(w);
	int r = spoke_reset(tm->s, tm->ids[random_victim(w, tm->n)], PAIR_DELAY_NS);

	maybe_stall(w);
	if (r != -ENOENT)
		return r;
	w->enoent++; /* it fired: the setup or the window outlasted the delay (a stall) */
	return 0;
}

static void reset_foreign_body(struct bench_thread *t)
{
	bench_window_loop(t, reset_foreign_op, NULL, "spoke_reset failed");
}

/* Main: n timers on the shards in turn (foreign starts), all in the wheels. */
static int start_pending(struct team *tm, struct bench_sample *out)
{
	unsigned nshards = spoke_shards(tm->s);
	char sb[160];
	int err = 0;

	for (uint64_t i = 0; i < tm->n; i++)
		err |= spoke_start_on(tm->s, (unsigned)(i % nshards), PAIR_DELAY_NS, bench_cb_count,
				      &stall_fires, &tm->ids[i]);
	if (err)
		return bench_fail(out, -EPROTO, "setup: spoke_start_on failed");
	if (bench_svc_wait_pending(tm->s, tm->n, NULL) != 0)
		return bench_fail(out, -ETIME, "setup: %llu timers did not reach the wheels: %s",
				  (unsigned long long)tm->n,
				  bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(tm->s)));
	return 0;
}

/*
 * Main, after the window: once the owners applied every reset that
 * returned 0, cancel every timer; r->lost counts those that had fired.
 */
static int cancel_all(struct team *tm, struct team_result *r, struct bench_sample *out)
{
	const struct bench_svc_counts applied = {BENCH_ANY, BENCH_ANY, r->ops - r->enoent,
						 BENCH_ANY, BENCH_ANY};
	char sb[160];

	if (bench_svc_wait(tm->s, &applied, NULL) != 0)
		return bench_fail(out, -ETIME, "%llu resets returned 0: the owners applied %s",
				  (unsigned long long)(r->ops - r->enoent),
				  bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(tm->s)));
	for (uint64_t i = 0; i < tm->n; i++) {
		int c = spoke_cancel(tm->s, tm->ids[i]);

		if (c == -ENOENT)
			r->lost++;
		else if (c)
			return bench_fail(out, c, "spoke_cancel after the window: %s",
					  strerror(-c));
	}
	return 0;
}

/* Start an owner for each shard; how many started (err says whether all did). */
static unsigned start_owners(struct bench_owner *owners, unsigned n, int *err,
			     struct bench_sample *out)
{
	unsigned k;

	for (k = 0; k < n && !*err; k++) {
		*err = bench_owner_start(&owners[k], team.s, k, (int)(k % bench_ncpus()), out);
		if (*err)
			break;
	}
	return k;
}

/* Stop the first n owners; the first failure goes into err and out unless err was set. */
static void stop_owners(struct bench_owner *owners, unsigned n, int *err, struct bench_sample *out)
{
	struct bench_sample spare;

	while (n > 0) {
		int e = bench_owner_stop(&owners[--n], *err ? &spare : out);

		if (!*err)
			*err = e;
	}
}

int run_reset_foreign(void *arg, unsigned run, struct bench_sample *out)
{
	static struct bench_owner owners[MAX_T];
	const struct job *j = arg;
	struct team_result r = {0};
	unsigned nowners;
	int err;

	team_init(&team, j, run);
	team.n = j->n;
	team.ids = malloc(j->n * sizeof(*team.ids));
	if (!team.ids)
		return bench_fail(out, -ENOMEM, "no memory for %llu ids", (unsigned long long)j->n);
	err = create_service(&team.s, 0, 0, 0, NS_PER_MS, out);
	if (err) {
		free(team.ids);
		return err;
	}
	nowners = start_owners(owners, spoke_shards(team.s) < MAX_T ? spoke_shards(team.s) : MAX_T,
			       &err, out);
	if (!err)
		err = start_pending(&team, out);
	team.base.body = reset_foreign_body;
	if (!err)
		err = team_run(&team, j->window_ns, NULL, &r, out);
	if (!err)
		err = cancel_all(&team, &r, out);
	stop_owners(owners, nowners, &err, out);
	if (!err)
		err = check_resets(team.s, j->n, &r, out);
	spoke_destroy(team.s);
	free(team.ids);
	if (!err)
		report_ops(out, &extras[run], &r);
	return err;
}
