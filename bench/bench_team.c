/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_team.c - the threads of a multithreaded workload (bench_team.h):
 * the gate, the stop flag, the join, and a team's whole run.
 */
#define _GNU_SOURCE
#include "bench_team.h"

#include <string.h>

void bench_thread_fail(struct bench_thread *t, int err, const char *what)
{
	if (!t->err) {
		t->err = err ? err : -EPROTO;
		t->what = what;
	}
}

/* Team thread: prepared; wait for the gate. Whether to run the body. */
static bool team_wait_gate(struct bench_team *tm)
{
	bool run;

	pthread_mutex_lock(&tm->mu);
	tm->ready++;
	pthread_cond_broadcast(&tm->cv);
	while (!tm->open)
		pthread_cond_wait(&tm->cv, &tm->mu);
	run = tm->run;
	pthread_mutex_unlock(&tm->mu);
	return run;
}

static void *team_thread_main(void *arg)
{
	struct bench_thread *t = arg;
	struct bench_team *tm = t->team;
	bool run;

	if (tm->pin)
		bench_pin_self(t->index);
	if (tm->prepare && !t->err)
		tm->prepare(t);
	run = team_wait_gate(tm);
	t->cpu0 = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	t->t0 = bench_now_ns();
	if (!t->err && run)
		tm->body(t);
	t->t1 = bench_now_ns();
	t->cpu1 = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (!t->err && run && tm->finish)
		tm->finish(t);
	return NULL;
}

int bench_team_start(struct bench_team *tm)
{
	int err;

	pthread_mutex_init(&tm->mu, NULL);
	pthread_cond_init(&tm->cv, NULL);
	tm->started = tm->ready = 0;
	tm->open = tm->run = false;
	atomic_store(&tm->stop, 0);
	for (; tm->started < tm->T; tm->started++) {
		struct bench_thread *t = bench_team_thread(tm, tm->started);

		t->team = tm;
		t->index = tm->started;
		err = pthread_create(&t->th, NULL, team_thread_main, t);
		if (err) {
			struct bench_team_result r;

			bench_team_go(tm, false);
			bench_team_join(tm, &r);
			return -err;
		}
	}
	return 0;
}

void bench_team_ready(struct bench_team *tm)
{
	pthread_mutex_lock(&tm->mu);
	while (tm->ready < tm->started)
		pthread_cond_wait(&tm->cv, &tm->mu);
	pthread_mutex_unlock(&tm->mu);
}

void bench_team_go(struct bench_team *tm, bool run)
{
	pthread_mutex_lock(&tm->mu);
	tm->open = true;
	tm->run = run;
	pthread_cond_broadcast(&tm->cv);
	pthread_mutex_unlock(&tm->mu);
}

void bench_team_stop(struct bench_team *tm)
{
	atomic_store(&tm->stop, 1);
}

void bench_team_join(struct bench_team *tm, struct bench_team_result *r)
{
	uint64_t last_t1 = 0;

	memset(r, 0, sizeof(*r));
	r->first_t0 = UINT64_MAX;
	for (unsigned i = 0; i < tm->started; i++) {
		struct bench_thread *t = bench_team_thread(tm, i);

		pthread_join(t->th, NULL);
		if (t->err && !r->err) {
			r->err = t->err;
			r->err_index = i;
			r->what = t->what;
		}
		r->ops += t->ops;
		r->thread_ns += (double)(t->t1 - t->t0);
		r->cpu_ns += (double)(t->cpu1 - t->cpu0);
		if (t->t0 < r->first_t0)
			r->first_t0 = t->t0;
		if (t->t1 > last_t1)
			last_t1 = t->t1;
	}
	r->window_ns = tm->started ? (double)(last_t1 - r->first_t0) : 0;
	pthread_cond_destroy(&tm->cv);
	pthread_mutex_destroy(&tm->mu);
}

int bench_team_run(struct bench_team *tm, uint64_t window_ns, bench_between_fn *between, void *ctx,
		   struct bench_team_result *r, struct bench_sample *out)
{
	int err = bench_team_start(tm);

	memset(r, 0, sizeof(*r));
	if (err)
		return bench_fail(out, err, "pthread_create: %s", strerror(-err));
	bench_team_ready(tm);
	if (between)
		err = between(ctx, out);
	bench_team_go(tm, err == 0);
	if (window_ns && !err)
		bench_sleep_ns(window_ns);
	bench_team_stop(tm);
	bench_team_join(tm, r);
	if (r->err && !err)
		err = bench_fail(out, r->err, "thread %u: %s: %s", r->err_index, r->what,
				 strerror(-r->err));
	if (!err && r->ops == 0)
		err = bench_fail(out, -EPROTO, "no operation done in the window");
	return err;
}
