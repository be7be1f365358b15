/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_threads.c - the stress library's threads: a team released together
 * (run_threads), one thread (thread_spawn), a crew kept for several phases,
 * and a PRNG for threads the program did not start.
 */
#include "stress_util.h"

/* One thread of run_threads: its index, what it runs, the barrier that releases the team. */
struct worker_arg {
	unsigned idx;
	void (*fn)(unsigned idx, void *ctx);
	void *ctx;
	pthread_barrier_t *bar;
};

static void *worker_main(void *p)
{
	struct worker_arg *w = p;

	pthread_barrier_wait(w->bar);
	w->fn(w->idx, w->ctx);
	tally_flush();
	return NULL;
}

void run_threads(unsigned n, void (*fn)(unsigned idx, void *ctx), void *ctx)
{
	pthread_t t[MAX_THREADS];
	struct worker_arg w[MAX_THREADS];
	pthread_barrier_t bar;

	if (n == 0 || n > MAX_THREADS)
		abort();
	pthread_barrier_init(&bar, NULL, n);
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct worker_arg){.idx = i, .fn = fn, .ctx = ctx, .bar = &bar};
		t[i] = thread_spawn(worker_main, &w[i]);
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
}

pthread_t thread_spawn(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, arg) != 0) {
		fprintf(stderr, "%s: pthread_create failed\n", g_name);
		exit(2);
	}
	return t;
}

static void *crew_main(void *p)
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

void crew_start(struct crew *c, unsigned n, void (*fn)(unsigned, void *), void *ctx)
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

void crew_release(struct crew *c)
{
	pthread_barrier_wait(&c->go);
}

void crew_wait(struct crew *c)
{
	pthread_barrier_wait(&c->done);
}

void crew_phase(struct crew *c)
{
	crew_release(c);
	crew_wait(c);
}

void crew_stop(struct crew *c)
{
	atomic_store(&c->quit, 1);
	pthread_barrier_wait(&c->go);
	for (unsigned i = 0; i < c->n; i++)
		pthread_join(c->t[i], NULL);
	pthread_barrier_destroy(&c->go);
	pthread_barrier_destroy(&c->done);
}

struct rng *tl_rng(void)
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
