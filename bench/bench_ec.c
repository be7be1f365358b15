/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_ec.c - spoke-bench-ec: Concurrency Kit's ck_ec against spoke's own
 * eventcount (percpu/eventcount.c), for docs/design/service.md's "Decisions measured".
 *
 * Both are used the way the service uses an eventcount: a consumer sleeps
 * until a predicate on its queue (here an atomic counter of posted items)
 * holds; a producer posts, then signals.
 *
 *   spoke    spoke_ec_sleep / spoke_ec_wake_one (a sleeper count, a fence, a
 *            futex word bumped only when someone sleeps)
 *   ck-mp    ck_ec32_wait / ck_ec32_inc, multi-producer mode (lock incl;
 *            the futex is woken when the counter's waiter bit was set)
 *   ck-sp    ck_ec32_inc in single-producer mode (a plain incl): producer
 *            cost only, for reference; the service's producers are many
 *
 * Measures, runs interleaved (spoke, ck-mp, ck-sp, spoke, ...) and each
 * figure the median of the runs' results:
 *   signal   ns per producer signal when nobody sleeps (one thread, CPU 0)
 *   wake     wake-up latency: producer's signal -> the sleeper runs again
 *            (sleeper on CPU 1, producer on CPU 0; the producer signals only
 *            once the sleeper has announced itself and a further 50 us have
 *            passed, so the sleeper is in futex_wait): median and p99 of each
 *            run's samples, then the median over runs
 *   publish  TSan check: a producer writes a plain payload and signals; the
 *            consumer reads it once the eventcount says so. For ck-mp the
 *            ck_ec counter is the only edge (its documented use); for spoke
 *            the posted counter is (as in the service). Under TSan a hidden
 *            edge is reported as a data race on the payload.
 *
 * Usage: spoke-bench-ec [--runs R] [--quick] [--only publish] (--help lists them)
 * Exits 0 if every check passed (publish read what was written; no wake-up
 * was lost), 1 otherwise. Not a scaling benchmark: 2 threads, 2 CPUs.
 */
#define _GNU_SOURCE
#include "ck_pr_tsan.h" /* before <ck_ec.h>; nothing outside TSan builds */

#include <ck_ec.h>

#include "bench_util.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* percpu/service.h's prototypes of percpu/eventcount.c (linked from libspoke.a). */
void spoke_ec_wake_one(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping);
void spoke_ec_sleep(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping, bool (*has_work)(void *),
		    void *arg, int64_t timeout_ns);

enum impl { SPOKE, CK_MP, CK_SP, N_IMPL };
static const char *const impl_name[N_IMPL] = {"spoke", "ck-mp", "ck-sp"};

/* --- ck_ec's platform ops: futex and CLOCK_MONOTONIC ------------------------------------ */

static int ck_gettime(const struct ck_ec_ops *ops, struct timespec *out)
{
	(void)ops;
	return clock_gettime(CLOCK_MONOTONIC, out);
}

static void ck_wait32(const struct ck_ec_wait_state *st, const uint32_t *addr, uint32_t expect,
		      const struct timespec *deadline)
{
	(void)st;
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline, as ck_ec gives. */
	syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, expect, deadline, NULL,
		FUTEX_BITSET_MATCH_ANY);
}

static void ck_wake32(const struct ck_ec_ops *ops, const uint32_t *addr)
{
	(void)ops;
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static const struct ck_ec_ops ck_ops = {
	.gettime = ck_gettime, .wait32 = ck_wait32, .wake32 = ck_wake32};
static const struct ck_ec_mode ck_mode_mp = {.ops = &ck_ops, .single_producer = false};
#ifndef SPOKE_CK_TSAN
static const struct ck_ec_mode ck_mode_sp = {.ops = &ck_ops, .single_producer = true};
#endif

/* --- one eventcount of either kind, and its queue --------------------------------------- */

struct ec {
	enum impl impl;
	_Atomic uint32_t seq, sleeping; /* spoke */
	struct ck_ec32 ck;		/* ck */
	_Atomic uint32_t posted;	/* the "queue": items posted ... */
	uint32_t taken;			/* ... and taken (consumer only) */
	_Atomic uint32_t acked;		/* consumer -> producer: item taken */
	uint64_t t_signal;		/* producer's clock at the signal (published by posted) */
};

static bool has_work(void *arg)
{
	struct ec *e = arg;

	return atomic_load_explicit(&e->posted, memory_order_acquire) != e->taken;
}

static void ec_signal(struct ec *e)
{
	switch (e->impl) {
	case SPOKE:
		spoke_ec_wake_one(&e->seq, &e->sleeping);
		break;
	case CK_MP:
		SPOKE_CK_INC(&e->ck, &ck_mode_mp);
		break;
	case CK_SP:
#ifdef SPOKE_CK_TSAN
		SPOKE_CK_INC(&e->ck, &ck_mode_mp); /* the sp path is assembly only */
#else
		ck_ec32_inc(&e->ck, &ck_mode_sp);
#endif
		break;
	default:
		break;
	}
}

/* Sleep until has_work(). */
static void ec_wait(struct ec *e)
{
	while (!has_work(e)) {
		if (e->impl == SPOKE) {
			spoke_ec_sleep(&e->seq, &e->sleeping, has_work, e, -1);
		} else {
			uint32_t v = ck_ec32_value(&e->ck);

			if (has_work(e))
				break;
			ck_ec32_wait(&e->ck, &ck_mode_mp, v, NULL);
		}
	}
}

/* Has the consumer gone (or is it about to go) to sleep? */
static bool ec_sleeper(struct ec *e)
{
	if (e->impl == SPOKE)
		return atomic_load_explicit(&e->sleeping, memory_order_relaxed) != 0;
	return ck_ec32_has_waiters(&e->ck);
}

/* --- helpers ------------------------------------------------------------------------------ */

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % CPU_SETSIZE, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t pct(uint64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[(size_t)(p * (double)(n - 1))];
}

static double median_d(double *v, size_t n)
{
	for (size_t i = 1; i < n; i++) /* insertion sort: n is small */
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static unsigned failures;

/* --- signal: producer cost when nobody sleeps --------------------------------------------- */

static double bench_signal(enum impl impl, unsigned n)
{
	static struct ec e;
	uint64_t t0;

	memset(&e, 0, sizeof(e));
	e.impl = impl;
	ck_ec32_init(&e.ck, 0);
	pin(0);
	t0 = bench_now_ns();
	for (unsigned i = 0; i < n; i++) {
		atomic_store_explicit(&e.posted, i + 1, memory_order_release); /* the enqueue */
		ec_signal(&e);
	}
	return (double)(bench_now_ns() - t0) / n;
}

/* --- a producer on CPU 0 and a consumer thread -------------------------------------------- */

/* One run of wake or publish: the eventcount, and what the consumer records. */
struct pair_run {
	struct ec e;
	unsigned n;	  /* items */
	uint64_t *lat;	  /* wake: per item, signal -> consumer running */
	uint64_t payload; /* publish: plain, written by the producer, read by the consumer */
};

/* A fresh eventcount of impl for n items, and its consumer started (r's other fields are the
 * caller's). */
static void pair_start(struct pair_run *r, enum impl impl, unsigned n, void *(*consumer)(void *),
		       pthread_t *th)
{
	memset(&r->e, 0, sizeof(r->e));
	r->e.impl = impl;
	ck_ec32_init(&r->e.ck, 0);
	r->n = n;
	if (pthread_create(th, NULL, consumer, r) != 0) {
		fprintf(stderr, "spoke-bench-ec: cannot start the consumer thread\n");
		exit(2);
	}
}

/* Producer: wait until the consumer took item i (0-based). */
static void pair_wait_acked(struct pair_run *r, unsigned i)
{
	while (atomic_load_explicit(&r->e.acked, memory_order_acquire) != i + 1)
		sched_yield();
}

/* --- wake: latency from signal to the sleeper running ------------------------------------- */

static void *wake_consumer(void *arg)
{
	struct pair_run *r = arg;

	pin(1);
	for (unsigned i = 0; i < r->n; i++) {
		ec_wait(&r->e);
		r->lat[i] = bench_now_ns() - r->e.t_signal; /* t_signal published by posted */
		r->e.taken++;
		atomic_store_explicit(&r->e.acked, i + 1, memory_order_release);
	}
	return NULL;
}

static void bench_wake(enum impl impl, unsigned n, uint64_t *p50, uint64_t *p99)
{
	static struct pair_run r;
	pthread_t th;

	r.lat = calloc(n, sizeof(*r.lat));
	if (!r.lat) {
		fprintf(stderr, "spoke-bench-ec: out of memory\n");
		exit(2);
	}
	pair_start(&r, impl, n, wake_consumer, &th);
	pin(0);
	for (unsigned i = 0; i < n; i++) {
		uint64_t t;

		while (!ec_sleeper(&r.e)) /* wait for the consumer to announce its sleep */
			sched_yield();
		for (t = bench_now_ns();
		     bench_now_ns() - t < 50000;) /* ... and to get into futex_wait */
			;
		r.e.t_signal = bench_now_ns();
		atomic_store_explicit(&r.e.posted, i + 1, memory_order_release);
		ec_signal(&r.e);
		pair_wait_acked(&r, i);
	}
	pthread_join(th, NULL);
	*p50 = pct(r.lat, n, 0.5);
	*p99 = pct(r.lat, n, 0.99);
	free(r.lat);
}

/* --- publish: is the eventcount's edge visible (TSan)? ------------------------------------ */

static void *pub_consumer(void *arg)
{
	struct pair_run *r = arg;
	uint32_t seen = 0;

	for (unsigned i = 0; i < r->n; i++) {
		if (r->e.impl == SPOKE) {
			ec_wait(&r->e); /* the posted counter is the edge */
			r->e.taken++;
		} else {
			uint32_t v;

			/* ck_ec's own use: the counter is the edge, nothing else is read. */
			while ((v = ck_ec32_value(&r->e.ck)) == seen)
				ck_ec32_wait(&r->e.ck, &ck_mode_mp, v, NULL);
			seen = v;
		}
		if (r->payload != 1000u + i)
			failures++;
		atomic_store_explicit(&r->e.acked, i + 1, memory_order_release);
	}
	return NULL;
}

static void bench_publish(enum impl impl, unsigned n)
{
	static struct pair_run r;
	pthread_t th;

	pair_start(&r, impl, n, pub_consumer, &th);
	for (unsigned i = 0; i < n; i++) {
		r.payload = 1000u + i;
		if (impl == SPOKE)
			atomic_store_explicit(&r.e.posted, i + 1, memory_order_release);
		ec_signal(&r.e);
		pair_wait_acked(&r, i);
	}
	pthread_join(th, NULL);
}

/* The options: --runs K (at most 32), --quick, --only publish. */
struct ec_opts {
	uint64_t runs;
	bool only_publish;
};

static const char *ec_option(void *ctx, int key, const char *arg)
{
	struct ec_opts *o = ctx;

	if (key == 'r')
		return bench_parse_count(arg, &o->runs) == 0 && o->runs <= 32 ? NULL : "1..32";
	if (key == 'o' && strcmp(arg, "publish") == 0) {
		o->only_publish = true;
		return NULL;
	}
	return "publish (the only check that can be run alone)";
}

static struct ec_opts ec_opts;
static struct bench_opts ec_common;

static const struct bench_option ec_options[] = {
	BENCH_OPT_QUICK("3 runs of 2e5 signals, 100 wake-ups, 500 published items (the smoke\n"
			"test)"),
	{"runs", 'r', "K", "runs, interleaved (1..32)", "7; 3 with --quick"},
	{"only", 'o', "publish", "only the publish check (TSan)", "every measurement"},
	BENCH_OPT_END,
};

static const struct bench_cmd ec_cmd = {
	.name = "spoke-bench-ec",
	.about = "Concurrency Kit's ck_ec beside spoke's eventcount (percpu/eventcount.c):\n"
		 "signal cost, wake-up latency, and the publish check (bench/bench_ec.c).",
	.options = ec_options,
	.handle = ec_option,
	.ctx = &ec_opts,
	.common = &ec_common,
};

int main(int argc, char **argv)
{
	unsigned runs = 7, n_signal = 20000000, n_wake = 2000, n_pub = 2000;
	double sig[N_IMPL][32], w50[N_IMPL][32], w99[N_IMPL][32];
	int rc = bench_cmd_parse(&ec_cmd, argc, argv);
	bool only_publish = ec_opts.only_publish;

	if (rc >= 0)
		return rc;
	if (ec_common.quick)
		runs = 3, n_signal = 200000, n_wake = 100, n_pub = 500;
	if (ec_opts.runs)
		runs = (unsigned)ec_opts.runs;
#ifdef SPOKE_CK_TSAN
	printf("spoke-bench-ec: TSan build, ck_pr as __atomic builtins (ck_pr_tsan.h)\n");
#elif defined(SPOKE_CK_ASM)
	printf("spoke-bench-ec-asm: CK's own ck_pr (x86_64 inline assembly)\n");
#endif
	for (enum impl k = SPOKE; k <= CK_MP; k++)
		bench_publish(k, n_pub);
	printf("publish: %u items through each of spoke and ck-mp, %s\n", n_pub,
	       failures ? "WRONG PAYLOAD READ" : "every payload read as written");
	if (only_publish)
		return failures ? 1 : 0;

	for (unsigned r = 0; r < runs; r++)
		for (enum impl k = SPOKE; k < N_IMPL; k++) {
			uint64_t p50, p99;

			sig[k][r] = bench_signal(k, n_signal);
			if (k == CK_SP)
				continue; /* one consumer, one producer: ck-mp's wait is the same */
			bench_wake(k, n_wake, &p50, &p99);
			w50[k][r] = (double)p50, w99[k][r] = (double)p99;
		}
	printf("%u runs interleaved, medians over runs; signal: %u signals, nobody asleep, "
	       "CPU 0; wake: %u wake-ups, sleeper CPU 1, producer CPU 0\n",
	       runs, n_signal, n_wake);
	printf("%-6s %14s %14s %14s\n", "impl", "signal ns", "wake p50 us", "wake p99 us");
	for (enum impl k = SPOKE; k < N_IMPL; k++) {
		printf("%-6s %14.2f", impl_name[k], median_d(sig[k], runs));
		if (k == CK_SP)
			printf(" %14s %14s\n", "-", "-");
		else
			printf(" %14.1f %14.1f\n", median_d(w50[k], runs) / 1e3,
			       median_d(w99[k], runs) / 1e3);
	}
	return failures ? 1 : 0;
}
