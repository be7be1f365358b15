/* SPDX-License-Identifier: MIT */
/*
 * splitmix.h - the fixed-seed PRNG of the tests, stress programs and
 * fuzzers (splitmix64): one 64-bit state, a different stream per seed, so a
 * printed seed replays every choice. Not for the benchmark, which has its
 * own xorshift64* (bench/bench_util.h) tuned for the cost per number.
 *
 * One struct rng per thread: nothing here is shared or atomic.
 */
#ifndef SPOKE_TESTS_SPLITMIX_H
#define SPOKE_TESTS_SPLITMIX_H

#include <stdint.h>

struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform enough in [0, n) (modulo bias below 2^-40 for n < 2^24); 0 if n == 0. */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n ? rng_next(r) % n : 0;
}

#endif /* SPOKE_TESTS_SPLITMIX_H */
