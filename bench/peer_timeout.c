/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peer_timeout.c - one measurement of `spoke-bench schemes`' W1 or W2 for a
 * spoke engine or for William Ahern's timeout.c (github.com/wahern/timeout),
 * side by side. scripts/peer_timeout.sh builds it against a timeout.c
 * checkout whose path it is given (nothing of timeout.c is in this
 * repository) and runs it interleaved, pinned, one measurement per process.
 *
 *   peer_timeout IMPL WORKLOAD N RUN [PAIRS]
 *     IMPL      timeout | spoke:SCHEME
 *     WORKLOAD  w1 | w2-advance | w2-tick | setup
 *     N         outstanding timers
 *     RUN       run number (seeds the delays as spoke-bench does)
 *     PAIRS     W1 pairs (default max(N, 1e5), as spoke-bench); `setup` runs
 *               only the N starts, so that perf stat can subtract them
 *
 * PEER_TTLS=K in the environment draws every delay from K distinct TTLs
 * (as `spoke-bench schemes --ttls K`, same seed), for the Lawn's own ground.
 *
 * Prints one line: ns per op (per pair for W1, per fired timer for W2).
 * The workloads are those of bench_schemes.c: delays uniform in [1, 2^20)
 * ticks from the same seed; W1 starts a fresh timer with a random delay and
 * stops a random outstanding one; W2-advance fires all N by one advance of
 * 2^20 ticks (timeout.c: timeouts_update then timeouts_get until empty),
 * W2-tick by 2^20 steps of one tick. timeout.c is built with its defaults
 * (4 wheels of 64 slots, 72-byte struct timeout), its clock at 0 like
 * spoke's.
 */
#include "bench_util.h"

#include <spoke/engine.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeout.h"

#define SPAN BENCH_DELAY_SPAN_TICKS

static unsigned ttl_count;
static uint64_t ttl_table[65536];

static uint64_t delay_of(uint64_t x)
{
	if (ttl_count)
		return ttl_table[bench_below((uint32_t)x, ttl_count)];
	return bench_random_delay(x);
}

static void count_expired(void *ctx, struct spoke_timer *t)
{
	(void)t;
	++*(size_t *)ctx;
}

static const struct spoke_engine_params params = {.max_interval = SPAN};

static double run_spoke(const char *scheme, const char *w, uint32_t n, uint64_t pairs,
			struct bench_rng *rng)
{
	struct spoke_timer *timers = calloc((size_t)n + 1, sizeof(*timers));
	struct spoke_engine *e;
	uint32_t spare = n;
	size_t fired = 0, calls = 0;
	uint64_t t0, t1;
	double ops;
	int err = 0;

	if (!timers || spoke_engine_new(&e, scheme, &params))
		exit(2);
	for (uint32_t i = 0; i < n; i++)
		err |= spoke_engine_start(e, &timers[i], delay_of(bench_rng_next(rng)));
	t0 = bench_now_ns();
	if (strcmp(w, "w1") == 0) {
		for (uint64_t i = 0; i < pairs; i++) {
			uint64_t x = bench_rng_next(rng);
			uint32_t victim = bench_w1_victim(x, n, spare);

			err |= spoke_engine_start(e, &timers[spare], delay_of(x));
			err |= spoke_engine_stop(e, &timers[victim]);
			spare = victim;
		}
		ops = (double)pairs;
	} else if (strcmp(w, "w2-advance") == 0) {
		fired = spoke_engine_advance(e, SPAN, count_expired, &calls);
		ops = n;
	} else if (strcmp(w, "w2-tick") == 0) {
		for (uint64_t i = 0; i < SPAN; i++)
			fired += spoke_engine_advance(e, 1, count_expired, &calls);
		ops = n;
	} else {
		ops = 1;
	}
	t1 = bench_now_ns();
	if (err || (w[1] == '2' && fired != n)) {
		fprintf(stderr, "peer_timeout: spoke:%s %s failed\n", scheme, w);
		exit(1);
	}
	spoke_engine_free(e);
	free(timers);
	return (double)(t1 - t0) / ops;
}

static size_t drain(struct timeouts *T)
{
	size_t k = 0;

	while (timeouts_get(T))
		k++;
	return k;
}

static double run_timeout(const char *w, uint32_t n, uint64_t pairs, struct bench_rng *rng)
{
	struct timeout *to = calloc((size_t)n + 1, sizeof(*to));
	struct timeouts *T;
	uint32_t spare = n;
	size_t fired = 0;
	uint64_t t0, t1;
	double ops;
	int error;

	T = timeouts_open(0, &error);
	if (!to || !T)
		exit(2);
	for (uint32_t i = 0; i <= n; i++)
		timeout_init(&to[i], 0);
	for (uint32_t i = 0; i < n; i++)
		timeouts_add(T, &to[i], delay_of(bench_rng_next(rng)));
	t0 = bench_now_ns();
	if (strcmp(w, "w1") == 0) {
		for (uint64_t i = 0; i < pairs; i++) {
			uint64_t x = bench_rng_next(rng);
			uint32_t victim = bench_w1_victim(x, n, spare);

			timeouts_add(T, &to[spare], delay_of(x));
			timeouts_del(T, &to[victim]);
			spare = victim;
		}
		ops = (double)pairs;
	} else if (strcmp(w, "w2-advance") == 0) {
		timeouts_update(T, SPAN);
		fired = drain(T);
		ops = n;
	} else if (strcmp(w, "w2-tick") == 0) {
		for (uint64_t i = 0; i < SPAN; i++) {
			timeouts_step(T, 1);
			fired += drain(T);
		}
		ops = n;
	} else {
		ops = 1;
	}
	t1 = bench_now_ns();
	if (w[1] == '2' && fired != n) {
		fprintf(stderr, "peer_timeout: timeout.c %s fired %zu of %u\n", w, fired, n);
		exit(1);
	}
	timeouts_close(T);
	free(to);
	return (double)(t1 - t0) / ops;
}

int main(int argc, char **argv)
{
	struct bench_rng rng;
	uint64_t n, run, pairs;
	double v;

	if (argc < 5 || bench_parse_count(argv[3], &n) || n > UINT32_MAX - 1) {
		fprintf(stderr,
			"usage: %s timeout|spoke:SCHEME w1|w2-advance|w2-tick|setup N RUN "
			"[PAIRS]\n",
			argv[0]);
		return 2;
	}
	run = strtoull(argv[4], NULL, 10);
	pairs = bench_w1_pairs(n);
	if (argc > 5 && bench_parse_count(argv[5], &pairs))
		return 2;
	if (getenv("PEER_TTLS")) {
		struct bench_rng r;

		bench_rng_seed(&r, BENCH_SEED ^ 0x77);
		ttl_count = (unsigned)strtoul(getenv("PEER_TTLS"), NULL, 10);
		if (ttl_count > 65536)
			return 2;
		for (unsigned i = 0; i < ttl_count; i++)
			ttl_table[i] = bench_random_delay(bench_rng_next(&r));
	}
	bench_rng_seed(&rng, BENCH_SEED + run);
	if (strcmp(argv[1], "timeout") == 0)
		v = run_timeout(argv[2], (uint32_t)n, pairs, &rng);
	else if (strncmp(argv[1], "spoke:", 6) == 0)
		v = run_spoke(argv[1] + 6, argv[2], (uint32_t)n, pairs, &rng);
	else
		return 2;
	printf("%.2f\n", v);
	return 0;
}
