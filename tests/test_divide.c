/* SPDX-License-Identifier: MIT */
/*
 * test_divide.c - percpu/divide.h, division by a constant as a
 * multiplication, against the hardware divide: every divisor class (1,
 * powers of two and their neighbours, the tick and slot widths a shard can
 * have, divisors above 2^63) at the numerators where a reciprocal would
 * round wrong first (multiples of d and their neighbours, 0, UINT64_MAX),
 * and at random numerators.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "divide.h"
#include "splitmix.h"

static void check(uint64_t x, uint64_t d)
{
	struct spoke_divisor dv = spoke_divisor_of(d);
	uint64_t q = spoke_divide(x, &dv);

	if (q != x / d)
		fail_msg("%llu / %llu: %llu, not %llu", (unsigned long long)x,
			 (unsigned long long)d, (unsigned long long)q, (unsigned long long)(x / d));
}

/* x = 0, UINT64_MAX, and each multiple k d near the bottom and the top, +-1. */
static void check_edges(uint64_t d)
{
	check(0, d);
	check(UINT64_MAX, d);
	check(UINT64_MAX - 1, d);
	for (uint64_t k = 1; k < 64; k++) {
		uint64_t lo, hi = (UINT64_MAX / d - k + 1) * d;

		if (!__builtin_mul_overflow(k, d, &lo)) {
			check(lo - 1, d);
			check(lo, d);
			if (lo < UINT64_MAX)
				check(lo + 1, d);
		}
		if (UINT64_MAX / d >= k) {
			check(hi, d);
			check(hi - 1, d);
			if (hi < UINT64_MAX)
				check(hi + 1, d);
		}
	}
}

static void divisor_classes(void **state)
{
	static const uint64_t some[] = {
		1,
		3,
		5,
		7,
		10,
		1000,
		1001,
		4096 - 1,
		15625,
		250000,
		1000000,
		1000000007,
		3600000000000ull,
		56250,
		UINT64_MAX,
		UINT64_MAX - 1,
		(1ull << 63) + 1,
		0x9e3779b97f4a7c15ull,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(some) / sizeof(some[0]); i++)
		check_edges(some[i]);
	for (unsigned e = 1; e < 64; e++) {
		check_edges(1ull << e);
		check_edges((1ull << e) + 1);
		check_edges((1ull << e) - 1);
	}
}

/* The tick (1 us .. 1 h) and a slot width (tick / n, n <= 64, rounded up). */
static void shard_divisors_random(void **state)
{
	struct rng r = {0x5eed};

	(void)state;
	for (unsigned i = 0; i < 20000; i++) {
		uint64_t tick = 1000 + rng_below(&r, 3600000000000ull);
		uint64_t width = (tick + (i % 64)) / (i % 64 + 1);

		for (unsigned j = 0; j < 32; j++) {
			uint64_t x = rng_next(&r) >> rng_below(&r, 64);

			check(x, tick);
			check(x, width);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(divisor_classes),
		cmocka_unit_test(shard_divisors_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
