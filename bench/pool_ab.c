/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool_ab.c - fired callbacks per second through the callback pool, and the
 * context switches they cost, using only the public API, so that the same
 * source builds against two versions of the library and runs interleaved
 * (scripts/pool-ab.sh: docs/design/service.md, "Callback pools per shard").
 *
 * usage: spoke-pool-ab SHARDS WORKERS [N]    (spoke-pool-ab --help: this, on stdout)
 *
 * A service with SHARDS shards and WORKERS callback threads (the default
 * spread); N timers (default 1e6) started from this thread on the shards in
 * turn, all due at one deadline D well after the last start; the callback
 * bumps a per-thread counter (fire_slots.h). Prints one line: callbacks/s (N
 * / time from the first callback to the last), and the voluntary and involuntary
 * context switches of the whole process (getrusage, RUSAGE_SELF) from just
 * before D to the last callback, per 1000 callbacks.
 */
#define _GNU_SOURCE
#include "fire_slots.h" /* header only: scripts/pool-ab.sh compiles this file alone */

#include <spoke/spoke.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spoke-pool-ab SHARDS WORKERS [N]\n"
		"  fired callbacks/s through the callback pool (see the top of bench/pool_ab.c)\n"
		"  SHARDS   shards (at least 1)\n"
		"  WORKERS  callback threads (0: callbacks inline on the shard threads)\n"
		"  N        timers, all due at once (default: 1000000)\n");
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / NS_PER_S), .tv_nsec = (long)(t % NS_PER_S)};

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

int main(int argc, char **argv)
{
	struct spoke_config cfg;
	struct spoke *s;
	struct rusage r0, r1;
	uint64_t n = 1000000, D, got, t_start, done, span;
	unsigned shards, workers;
	int err;

	if (argc == 2 && strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	if (argc < 3 || argc > 4 || atoi(argv[1]) < 1 || atoi(argv[2]) < 0) {
		fprintf(stderr, "spoke-pool-ab: want SHARDS WORKERS [N], not '%s%s'\n",
			argc > 1 ? argv[1] : "", argc > 2 ? " ..." : "");
		usage(stderr);
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
	t_start = bench_now_ns();
	D = t_start + 200 * NS_PER_MS + n * NS_PER_US; /* 0.2 s + 1 us per start */
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t = bench_now_ns();

		if (t >= D ||
		    spoke_start_on(s, (unsigned)(i % shards), D - t, fire_slots_cb, NULL, NULL)) {
			fprintf(stderr, "start %llu failed or too late\n", (unsigned long long)i);
			return 1;
		}
	}
	sleep_until(D - 5 * NS_PER_MS);
	getrusage(RUSAGE_SELF, &r0);
	while ((got = fire_slots_count(fire_slots_used())) < n) {
		if (bench_now_ns() > D + 60 * NS_PER_S) {
			fprintf(stderr, "%llu of %llu fired in 60 s\n", (unsigned long long)got,
				(unsigned long long)n);
			return 1;
		}
		sleep_until(bench_now_ns() + NS_PER_MS);
	}
	done = bench_now_ns();
	getrusage(RUSAGE_SELF, &r1);
	spoke_destroy(s);
	got = fire_slots_count(FIRE_SLOTS);
	span = fire_slots_span_ns(done);
	if (got != n || span == 0) {
		fprintf(stderr, "%llu callbacks for %llu timers\n", (unsigned long long)got,
			(unsigned long long)n);
		return 1;
	}
	printf("shards %u workers %u n %llu cb_per_s %.0f vcsw_per_1k %.2f ivcsw_per_1k %.2f\n",
	       shards, workers, (unsigned long long)n, (double)n * 1e9 / (double)span,
	       (double)(r1.ru_nvcsw - r0.ru_nvcsw) * 1000.0 / (double)n,
	       (double)(r1.ru_nivcsw - r0.ru_nivcsw) * 1000.0 / (double)n);
	return 0;
}
