/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool_ab.c - fired callbacks per second through the callback pool, and the
 * context switches they cost, using only the public API, so that the same
 * source builds against two versions of the library and runs interleaved
 * (scripts/pool-ab.sh: docs/service.md, "Callback pools per shard").
 *
 * usage: spoke-pool-ab SHARDS WORKERS [N]
 *
 * A service with SHARDS shards and WORKERS callback threads (the default
 * spread); N timers (default 1e6) started from this thread on the shards in
 * turn, all due at one deadline D well after the last start; the callback
 * bumps a per-thread counter. Prints one line: callbacks/s (N / time from
 * the first callback to the last), and the voluntary and involuntary
 * context switches of the whole process (getrusage, RUSAGE_SELF) from just
 * before D to the last callback, per 1000 callbacks.
 */
#define _GNU_SOURCE
#include <spoke/spoke.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define SLOTS 1024

static struct slot {
	_Atomic uint64_t n;
	_Atomic uint64_t last_ns;
} __attribute__((aligned(64))) slots[SLOTS];
static _Atomic unsigned nslots;
static _Atomic uint64_t first_ns;
static _Thread_local struct slot *mine;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cb(void *arg)
{
	struct slot *m = mine;
	uint64_t zero = 0, t = now_ns();

	(void)arg;
	if (!m)
		m = mine = &slots[atomic_fetch_add(&nslots, 1) % SLOTS];
	if (atomic_load_explicit(&first_ns, memory_order_relaxed) == 0)
		atomic_compare_exchange_strong(&first_ns, &zero, t);
	atomic_store_explicit(&m->last_ns, t, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->n, 1, memory_order_release);
}

static uint64_t fired(uint64_t *last)
{
	uint64_t sum = 0;

	*last = 0;
	for (unsigned i = 0; i < SLOTS; i++) {
		uint64_t l = atomic_load_explicit(&slots[i].last_ns, memory_order_relaxed);

		sum += atomic_load_explicit(&slots[i].n, memory_order_acquire);
		if (l > *last)
			*last = l;
	}
	return sum;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
			      .tv_nsec = (long)(t % 1000000000u)};

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

int main(int argc, char **argv)
{
	struct spoke_config cfg;
	struct spoke *s;
	struct rusage r0, r1;
	uint64_t n = 1000000, D, got, last, t_start;
	unsigned shards, workers;
	int err;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: spoke-pool-ab SHARDS WORKERS [N]\n");
		return 2;
	}
	shards = (unsigned)atoi(argv[1]);
	workers = (unsigned)atoi(argv[2]);
	if (argc == 4)
		n = strtoull(argv[3], NULL, 10);
	spoke_config_init(&cfg);
	cfg.shards = shards;
	cfg.callback_threads = workers;
	err = spoke_create(&s, &cfg);
	if (err) {
		fprintf(stderr, "spoke_create: %d\n", err);
		return 1;
	}
	t_start = now_ns();
	D = t_start + 200000000 + n * 1000; /* 0.2 s + 1 us per start */
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t = now_ns();

		if (t >= D || spoke_start_on(s, (unsigned)(i % shards), D - t, cb, NULL, NULL)) {
			fprintf(stderr, "start %llu failed or too late\n", (unsigned long long)i);
			return 1;
		}
	}
	sleep_until(D - 5000000);
	getrusage(RUSAGE_SELF, &r0);
	while ((got = fired(&last)) < n) {
		if (now_ns() > D + 60000000000ull) {
			fprintf(stderr, "%llu of %llu fired in 60 s\n", (unsigned long long)got,
				(unsigned long long)n);
			return 1;
		}
		sleep_until(now_ns() + 1000000);
	}
	getrusage(RUSAGE_SELF, &r1);
	spoke_destroy(s);
	if (got != n || last <= first_ns) {
		fprintf(stderr, "%llu callbacks for %llu timers\n", (unsigned long long)got,
			(unsigned long long)n);
		return 1;
	}
	printf("shards %u workers %u n %llu cb_per_s %.0f vcsw_per_1k %.2f ivcsw_per_1k %.2f\n",
	       shards, workers, (unsigned long long)n, (double)n * 1e9 / (double)(last - first_ns),
	       (double)(r1.ru_nvcsw - r0.ru_nvcsw) * 1000.0 / (double)n,
	       (double)(r1.ru_nivcsw - r0.ru_nivcsw) * 1000.0 / (double)n);
	return 0;
}
