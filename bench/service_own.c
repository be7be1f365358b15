/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service_own.c - the owner's thread of an attached shard (service.h):
 *
 *   own-start-cancel   spoke_start + spoke_cancel on the caller's own shard,
 *                      after the bare engine (engine-start-stop) and the
 *                      bare engine with one clock read per pair
 *                      (engine-clock-start-stop) in the same run;
 *   reset-own          spoke_reset of a random one of the thread's own
 *                      pending timers, after the bare engine's clock read +
 *                      stop + start of a random pending timer
 *                      (engine-clock-reset) in the same run.
 *
 * bench_service.c says what each row measures.
 */
#include "service.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the bare engine, one per thread --------------------------------------- */

/* A bare engine of its own, and w->count pending timers when it has a count. */
static void bare_prepare(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	int err = spoke_engine_new(&w->eng, "hierarchical", NULL);

	if (err) {
		bench_thread_fail(t, err, "spoke_engine_new");
		return;
	}
	spoke_timer_init(&w->timer);
	if (!w->count)
		return;
	w->timers = calloc(w->count, sizeof(*w->timers));
	if (!w->timers) {
		bench_thread_fail(t, -ENOMEM, "no memory for the engine's timers");
		return;
	}
	for (uint64_t i = 0; i < w->count; i++) {
		spoke_timer_init(&w->timers[i]);
		err |= spoke_engine_start(w->eng, &w->timers[i], PAIR_DELAY_TICKS);
	}
	if (err)
		bench_thread_fail(t, -EPROTO, "spoke_engine_start of the pending timers");
}

static inline int bare_op(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	int err = spoke_engine_start(w->eng, &w->timer, PAIR_DELAY_TICKS);

	return err | spoke_engine_stop(w->eng, &w->timer);
}

/* The same with the clock read a start needs (what no service can go below). */
static inline int bare_clock_op(struct bench_thread *t)
{
	worker_of(t)->clock_sum += spoke_now_ns();
	return bare_op(t);
}

/* What a reset is at its least: read the clock, stop a pending timer, start it again. */
static inline int bare_clock_reset_op(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke_timer *victim = &w->timers[random_victim(w, w->count)];
	int err;

	w->clock_sum += spoke_now_ns();
	err = spoke_engine_stop(w->eng, victim);
	return err | spoke_engine_start(w->eng, victim, PAIR_DELAY_TICKS);
}

static void bare_body(struct bench_thread *t)
{
	bench_window_loop(t, bare_op, NULL, "spoke_engine_start/stop failed");
}

static void bare_clock_body(struct bench_thread *t)
{
	bench_window_loop(t, bare_clock_op, NULL, "spoke_engine_start/stop failed");
}

static void bare_clock_reset_body(struct bench_thread *t)
{
	bench_window_loop(t, bare_clock_reset_op, NULL, "spoke_engine_stop/start failed");
}

/*
 * One bare-engine team: body is one of the bodies above; pending timers per
 * thread n / T (0: none). Its figures go into the extras from `first` on.
 */
static int run_bare(const struct job *j, unsigned run, bench_thread_fn *body, uint64_t pending,
		    enum extra_id first, struct team_result *res, struct bench_sample *out)
{
	int err;

	team_init(&team, j, run);
	set_counts(&team, pending);
	team.base.prepare = bare_prepare;
	team.base.body = body;
	err = team_run(&team, j->window_ns, NULL, res, out);
	for (unsigned i = 0; i < j->T; i++) {
		spoke_engine_free(team.w[i].eng);
		free(team.w[i].timers);
	}
	if (!err)
		report_baseline(&extras[run], first, res);
	return err;
}

/* ---- the attached shards: one per thread ----------------------------------- */

static void attach_prepare(struct bench_thread *t)
{
	int err = spoke_attach(team_of(worker_of(t))->s, t->index);

	if (err)
		bench_thread_fail(t, err, "spoke_attach");
}

/* The service's team: T attached shards, callbacks inline; 0 or an error. */
static int own_init(const struct job *j, unsigned run, struct bench_sample *out)
{
	team_init(&team, j, run);
	return create_service(&team.s, j->T, 0, 0, NS_PER_MS, out);
}

/* ---- own-start-cancel ------------------------------------------------------- */

static inline int own_op(struct bench_thread *t)
{
	struct spoke *s = team_of(worker_of(t))->s;
	spoke_id id;
	int err = spoke_start(s, PAIR_DELAY_NS, bench_cb_count, &stall_fires, &id);

	return err | spoke_cancel(s, id);
}

/* Every 4096 pairs, as a loop would: nothing is due (each start was cancelled at once). */
static inline int own_poll(struct bench_thread *t)
{
	return spoke_poll(team_of(worker_of(t))->s) != 0;
}

static void own_body(struct bench_thread *t)
{
	bench_window_loop(t, own_op, own_poll, "spoke_start, spoke_cancel or spoke_poll");
}

int run_own(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	struct extra *x = &extras[run];
	struct team_result bare, clk, svc;
	const struct spoke_shard_stats *t;
	char sb[160];
	int err;

	err = run_bare(j, run, bare_body, 0, X_BASE_NS, &bare, out);
	if (!err)
		err = run_bare(j, run, bare_clock_body, 0, X_CLK_NS, &clk, out);
	if (!err)
		err = own_init(j, run, out);
	if (err)
		return err;
	team.base.prepare = attach_prepare;
	team.base.body = own_body;
	err = team_run(&team, j->window_ns, NULL, &svc, out);
	t = bench_svc_totals(team.s);
	if (!err && (t->started != svc.ops || t->cancelled != svc.ops || t->pending != 0 ||
		     t->fired != 0 || atomic_load(&stall_fires) != 0))
		err = bench_fail(out, -EPROTO, "after %llu pairs the service counts %s",
				 (unsigned long long)svc.ops,
				 bench_svc_stats_str(sb, sizeof(sb), t));
	spoke_destroy(team.s);
	if (err)
		return err;
	report_ops(out, x, &svc);
	x->v[X_RATIO] = out->value / x->v[X_BASE_NS];
	x->v[X_CLK_RATIO] = out->value / x->v[X_CLK_NS];
	return 0;
}

/* ---- reset-own ---------------------------------------------------------------- */

/* Attach, then start its count timers on its own shard (the direct path). */
static void reset_own_prepare(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke *s = team_of(w)->s;
	int err = 0;

	attach_prepare(t);
	if (t->err)
		return;
	w->ids = calloc(w->count, sizeof(*w->ids));
	if (!w->ids) {
		bench_thread_fail(t, -ENOMEM, "no memory for the ids");
		return;
	}
	for (uint64_t i = 0; i < w->count; i++)
		err |= spoke_start(s, PAIR_DELAY_NS, bench_cb_count, &stall_fires, &w->ids[i]);
	if (err)
		bench_thread_fail(t, -EPROTO, "spoke_start of the pending timers");
}

static inline int reset_own_op(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	int r = spoke_reset(team_of(w)->s, w->ids[random_victim(w, w->count)], PAIR_DELAY_NS);

	maybe_stall(w);
	if (r != -ENOENT)
		return r;
	w->enoent++; /* it fired in a poll: the thread stalled past the delay */
	return 0;
}

/* Every 4096 resets, as a loop would; a timer runs here only after a stall (counted). */
static inline int reset_own_poll(struct bench_thread *t)
{
	return spoke_poll(team_of(worker_of(t))->s) < 0;
}

static void reset_own_body(struct bench_thread *t)
{
	bench_window_loop(t, reset_own_op, reset_own_poll, "spoke_reset or spoke_poll");
}

/* After the window, still the owner: cancel every timer; w->lost counts those that had fired. */
static void own_cancel_all(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct spoke *s = team_of(w)->s;

	for (uint64_t i = 0; i < w->count; i++) {
		int r = spoke_cancel(s, w->ids[i]);

		if (r == -ENOENT)
			w->lost++;
		else if (r)
			bench_thread_fail(t, r, "spoke_cancel after the window");
	}
}

/*
 * Every timer ended one way: a cancel after the window won, or it fired
 * (after a stall) and its callback counted; every reset that returned 0 was
 * applied. Callbacks have all run (their threads were joined, or they ran
 * inline on the caller). 0 or an error with out->error set.
 */
int check_resets(struct spoke *s, uint64_t n, const struct team_result *r, struct bench_sample *out)
{
	const struct bench_svc_counts want = {n, n - r->lost, r->ops - r->enoent, r->lost, 0};
	char sb[160];

	if (bench_svc_wait(s, &want, NULL) != 0 || atomic_load(&stall_fires) != r->lost)
		return bench_fail(out, -EPROTO,
				  "%llu timers, %llu resets returned 0, %llu cancels after the "
				  "window lost and %llu callbacks ran: the service counts %s",
				  (unsigned long long)n, (unsigned long long)(r->ops - r->enoent),
				  (unsigned long long)r->lost,
				  (unsigned long long)atomic_load(&stall_fires),
				  bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(s)));
	return 0;
}

int run_reset_own(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	struct extra *x = &extras[run];
	struct team_result clk, svc;
	int err;

	err = run_bare(j, run, bare_clock_reset_body, j->n, X_CLK_NS, &clk, out);
	if (!err)
		err = own_init(j, run, out);
	if (err)
		return err;
	set_counts(&team, j->n);
	team.base.prepare = reset_own_prepare;
	team.base.body = reset_own_body;
	team.base.finish = own_cancel_all;
	err = team_run(&team, j->window_ns, NULL, &svc, out);
	if (!err)
		err = check_resets(team.s, j->n, &svc, out);
	spoke_destroy(team.s);
	for (unsigned i = 0; i < j->T; i++)
		free(team.w[i].ids);
	if (err)
		return err;
	report_ops(out, x, &svc);
	x->v[X_CLK_RATIO] = out->value / x->v[X_CLK_NS];
	return 0;
}
