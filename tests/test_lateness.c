/* SPDX-License-Identifier: MIT */
/*
 * test_lateness.c - percpu/lateness.h, the log-linear lateness buckets,
 * against their definition: every value falls in a bucket whose top is at or
 * above it, buckets are in value order, and no bucket is wider than 1/8 of
 * its values (plus the exact buckets below 8).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lateness.h"

static void bucket_holds_value(uint64_t v)
{
	unsigned b = spoke_late_bucket(v);

	assert_true(b < SPOKE_LATE_BUCKETS);
	assert_true(spoke_late_bucket_top(b) >= v);
	if (b > 0)
		assert_true(spoke_late_bucket_top(b - 1) < v);
}

static void small_values_exact(void **state)
{
	(void)state;
	for (uint64_t v = 0; v < 4096; v++)
		bucket_holds_value(v);
	for (uint64_t v = 0; v < SPOKE_LATE_SUB; v++)
		assert_int_equal(spoke_late_bucket_top(spoke_late_bucket(v)), v);
}

static void every_scale(void **state)
{
	(void)state;
	for (unsigned e = 3; e < 64; e++) {
		uint64_t p = UINT64_C(1) << e;

		bucket_holds_value(p);
		bucket_holds_value(p - 1);
		bucket_holds_value(p + 1);
		bucket_holds_value(p + p / 3);
		bucket_holds_value(p | (p - 1)); /* the largest value of this power */
	}
	assert_int_equal(spoke_late_bucket(UINT64_MAX), SPOKE_LATE_BUCKETS - 1);
	assert_true(spoke_late_bucket_top(SPOKE_LATE_BUCKETS - 1) == UINT64_MAX);
}

static void width_at_most_an_eighth(void **state)
{
	(void)state;
	for (unsigned b = SPOKE_LATE_SUB; b < SPOKE_LATE_BUCKETS; b++) {
		uint64_t lo = spoke_late_bucket_top(b - 1) + 1, hi = spoke_late_bucket_top(b);

		assert_true(spoke_late_bucket(lo) == b && spoke_late_bucket(hi) == b);
		assert_true(hi - lo <= lo / SPOKE_LATE_SUB);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(small_values_exact),
		cmocka_unit_test(every_scale),
		cmocka_unit_test(width_at_most_an_eighth),
	};

	return cmocka_run_group_tests_name("lateness", tests, NULL, NULL);
}
