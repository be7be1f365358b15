/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service_mutex.c - the baseline of the cross-thread rows (service.h): one
 * `hierarchical` engine behind one global pthread mutex (default type), a
 * ticker thread that locks it and advances it every 1 ms tick, and T
 * threads that take the lock for each operation:
 *
 *   mutex-start-stop  lock; engine_start(own timer, 1 s); unlock; lock;
 *                     engine_stop; unlock (beside cross-start-cancel);
 *   mutex-start       lock; engine_start(1 h); unlock, a fixed count
 *                     (beside cross-start);
 *   mutex-reset       lock; engine_start(a random one of n pending, 1 s):
 *                     a re-arm; unlock (beside reset-foreign).
 *
 * No clock read on the producer (the service reads it on every start). A
 * thread stalled past the 1 s delay lets the ticker fire its timer: a stop
 * that finds it gone is counted as lost, not failed, and every fire is
 * accounted for.
 */
#include "service.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ticker {
	pthread_t th;
	_Atomic int stop;
	struct team *tm;
	uint64_t fired; /* under tm->mu */
	uint8_t *marks; /* mutex-reset: shared timer i fired at least once (under tm->mu) */
};

/* Ticker, under the lock: count the fire, and mark a shared timer. */
static void ticker_expire(void *ctx, struct spoke_timer *t)
{
	struct ticker *tk = ctx;
	struct team *tm = tk->tm;

	tk->fired++;
	if (tk->marks && t >= tm->shared && t < tm->shared + tm->n)
		tk->marks[t - tm->shared] = 1;
}

/* Advance the engine to the current 1 ms tick, every tick, under the lock. */
static void *ticker_main(void *arg)
{
	struct ticker *tk = arg;
	struct team *tm = tk->tm;
	uint64_t epoch = bench_now_ns(), next = epoch;

	while (!atomic_load_explicit(&tk->stop, memory_order_relaxed)) {
		uint64_t tick, now;

		next += NS_PER_MS;
		bench_sleep_until_ns(next);
		tick = (bench_now_ns() - epoch) / NS_PER_MS;
		pthread_mutex_lock(&tm->mu);
		now = spoke_engine_now(tm->e);
		if (tick > now)
			spoke_engine_advance(tm->e, tick - now, ticker_expire, tk);
		pthread_mutex_unlock(&tm->mu);
	}
	return NULL;
}

static void mutex_pair_prepare(struct bench_thread *t)
{
	spoke_timer_init(&worker_of(t)->timer);
}

static inline int mutex_pair_op(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct team *tm = team_of(w);
	int err, r;

	pthread_mutex_lock(&tm->mu);
	err = spoke_engine_start(tm->e, &w->timer, PAIR_DELAY_TICKS);
	pthread_mutex_unlock(&tm->mu);
	maybe_stall(w);
	pthread_mutex_lock(&tm->mu);
	r = spoke_engine_stop(tm->e, &w->timer);
	pthread_mutex_unlock(&tm->mu);
	if (r == -ENOENT)
		w->lost++; /* the ticker fired it: this thread stalled past the delay */
	else
		err |= r;
	return err;
}

static void mutex_pair_body(struct bench_thread *t)
{
	bench_window_loop(t, mutex_pair_op, NULL, "engine start/stop failed");
}

static void mutex_start_prepare(struct bench_thread *t)
{
	struct worker *w = worker_of(t);

	w->timers = malloc(w->count * sizeof(*w->timers));
	if (!w->timers) {
		bench_thread_fail(t, -ENOMEM, "malloc");
		return;
	}
	for (uint64_t i = 0; i < w->count; i++)
		spoke_timer_init(&w->timers[i]);
}

static void mutex_start_body(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct team *tm = team_of(w);
	int err = 0;

	for (uint64_t i = 0; i < w->count; i++) {
		pthread_mutex_lock(&tm->mu);
		err |= spoke_engine_start(tm->e, &w->timers[i], LONG_DELAY_TICKS);
		pthread_mutex_unlock(&tm->mu);
	}
	t->ops = w->count;
	if (err)
		bench_thread_fail(t, -EPROTO, "engine start failed");
}

static inline int mutex_reset_op(struct bench_thread *t)
{
	struct worker *w = worker_of(t);
	struct team *tm = team_of(w);
	uint32_t victim = random_victim(w, tm->n);
	int err;

	pthread_mutex_lock(&tm->mu);
	err = spoke_engine_start(tm->e, &tm->shared[victim], PAIR_DELAY_TICKS);
	pthread_mutex_unlock(&tm->mu);
	maybe_stall(w);
	return err;
}

static void mutex_reset_body(struct bench_thread *t)
{
	bench_window_loop(t, mutex_reset_op, NULL, "engine re-arm failed");
}

/* mutex-reset: the n shared timers, pending, and their marks. 0 or -ENOMEM. */
static int shared_timers(struct ticker *tk, uint64_t n)
{
	int err = 0;

	team.n = n;
	team.shared = malloc(n * sizeof(*team.shared));
	tk->marks = calloc(n, 1);
	if (!team.shared || !tk->marks)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		spoke_timer_init(&team.shared[i]);
		err |= spoke_engine_start(team.e, &team.shared[i], PAIR_DELAY_TICKS);
	}
	return err ? -EPROTO : 0;
}

/*
 * After the window, every timer is accounted for: the pairs' timers are
 * idle, their stops that lost each matched by a fire; the starts' timers
 * are pending; of the shared ones, every one not pending fired. 0 or an
 * error with out->error set.
 */
static int check_engine(const struct job *j, const struct ticker *tk, const struct team_result *r,
			struct bench_sample *out)
{
	size_t pending = spoke_engine_count(team.e);

	switch (j->w) {
	case W_MUTEX_PAIR:
		if (pending == 0 && tk->fired == r->lost)
			return 0;
		break;
	case W_MUTEX_START:
		if (pending == j->n && tk->fired == 0)
			return 0;
		break;
	default:
		for (uint64_t i = 0; i < j->n; i++)
			if (!spoke_timer_pending(&team.shared[i]) && !tk->marks[i])
				return bench_fail(out, -EPROTO,
						  "mutex engine: shared timer %llu neither pending "
						  "nor fired",
						  (unsigned long long)i);
		return 0;
	}
	return bench_fail(out, -EPROTO, "mutex engine: %zu pending, %llu fired, %llu stops lost",
			  pending, (unsigned long long)tk->fired, (unsigned long long)r->lost);
}

int run_mutex(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	struct ticker tk = {.tm = &team};
	struct team_result r;
	int err;

	team_init(&team, j, run);
	pthread_mutex_init(&team.mu, NULL);
	err = spoke_engine_new(&team.e, "hierarchical", NULL);
	if (err)
		return bench_fail(out, err, "spoke_engine_new: %s", strerror(-err));
	if (j->w == W_MUTEX_RESET)
		err = shared_timers(&tk, j->n);
	atomic_init(&tk.stop, 0);
	if (!err && pthread_create(&tk.th, NULL, ticker_main, &tk) != 0)
		err = bench_fail(out, -EAGAIN, "cannot start the ticker thread");
	else if (err)
		err = bench_fail(out, err, "setting up %llu shared timers: %s",
				 (unsigned long long)j->n, strerror(-err));
	if (!err) {
		switch (j->w) {
		case W_MUTEX_PAIR:
			team.base.prepare = mutex_pair_prepare;
			team.base.body = mutex_pair_body;
			break;
		case W_MUTEX_START:
			set_counts(&team, j->n);
			team.base.prepare = mutex_start_prepare;
			team.base.body = mutex_start_body;
			break;
		default:
			team.base.body = mutex_reset_body;
			break;
		}
		err = team_run(&team, j->w == W_MUTEX_START ? 0 : j->window_ns, NULL, &r, out);
		atomic_store(&tk.stop, 1);
		pthread_join(tk.th, NULL);
	}
	if (!err)
		err = check_engine(j, &tk, &r, out);
	spoke_engine_free(team.e);
	pthread_mutex_destroy(&team.mu);
	free(team.shared);
	free(tk.marks);
	for (unsigned i = 0; i < j->T; i++)
		free(team.w[i].timers);
	if (!err)
		report_ops(out, &extras[run], &r);
	return err;
}
