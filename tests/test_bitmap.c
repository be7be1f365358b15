/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_bitmap.c - lib/bitmap.h, the hierarchical "which slots are occupied"
 * bitmap the wheels scan, agrees with a plain array of booleans.
 *
 * What it proves: for sizes 1, 63, 64, 65, 4096 and 2^20 + 3 (one, two and
 * four summary levels, partial last words), after random sets and clears in
 * sparse, dense and emptying phases, spoke_bitmap_test, spoke_bitmap_next and
 * spoke_bitmap_next_circular give the brute-force answer at every position
 * (small sizes) or at word and summary boundaries, next to set bits and at
 * random positions (large sizes); next() past the end and on an empty bitmap
 * is SPOKE_BITMAP_NONE; setting twice is idempotent; spoke_bitmap_zero
 * empties it; init refuses 0 and more than 2^36 bits.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bitmap.h"

/* splitmix64, as in engine_oracle.h (which this test does not need) */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t rng_below(uint64_t *s, size_t n)
{
	return (size_t)(rng_next(s) % n);
}

/* The model: one bool per bit, and next_set[i] = first set index >= i. */
struct model {
	size_t nbits;
	bool *bit;
	size_t *next_set; /* nbits + 1 entries, next_set[nbits] = NONE */
};

static void model_init(struct model *m, size_t nbits)
{
	m->nbits = nbits;
	m->bit = calloc(nbits, sizeof(*m->bit));
	m->next_set = calloc(nbits + 1, sizeof(*m->next_set));
	assert_non_null(m->bit);
	assert_non_null(m->next_set);
}

static void model_fini(struct model *m)
{
	free(m->bit);
	free(m->next_set);
}

static void model_index(struct model *m)
{
	m->next_set[m->nbits] = SPOKE_BITMAP_NONE;
	for (size_t i = m->nbits; i-- > 0;)
		m->next_set[i] = m->bit[i] ? i : m->next_set[i + 1];
}

static size_t model_next_circular(const struct model *m, size_t i)
{
	size_t n = m->next_set[i];

	return n != SPOKE_BITMAP_NONE ? n : m->next_set[0];
}

/* Compare the bitmap with the (indexed) model at position i. */
static void check_at(const struct spoke_bitmap *b, const struct model *m, size_t i)
{
	size_t got = spoke_bitmap_next(b, i);
	size_t want = m->next_set[i];

	if (got != want)
		fail_msg("nbits=%zu: next(%zu) = %zu, expected %zu", m->nbits, i, got, want);
	got = spoke_bitmap_next_circular(b, i);
	want = model_next_circular(m, i);
	if (got != want)
		fail_msg("nbits=%zu: next_circular(%zu) = %zu, expected %zu", m->nbits, i, got,
			 want);
	if (spoke_bitmap_test(b, i) != (int)m->bit[i])
		fail_msg("nbits=%zu: test(%zu) = %d, expected %d", m->nbits, i,
			 spoke_bitmap_test(b, i), (int)m->bit[i]);
}

static void check_near(const struct spoke_bitmap *b, const struct model *m, size_t i)
{
	for (size_t d = 0; d < 3; d++) {
		if (i >= d)
			check_at(b, m, i - d);
		if (i + d < m->nbits)
			check_at(b, m, i + d);
	}
}

/* Every position for small bitmaps; boundaries, set bits and samples for big ones. */
static void check_all(const struct spoke_bitmap *b, struct model *m, uint64_t *seed)
{
	model_index(m);
	assert_int_equal(spoke_bitmap_next(b, m->nbits), SPOKE_BITMAP_NONE);
	assert_int_equal(spoke_bitmap_next(b, m->nbits + 64), SPOKE_BITMAP_NONE);
	if (m->nbits <= 8192) {
		for (size_t i = 0; i < m->nbits; i++)
			check_at(b, m, i);
		return;
	}
	/* word boundaries of every level: multiples of 64, 4096, 262144 */
	for (size_t step = 64; step < m->nbits; step *= 64)
		for (size_t i = 0; i < m->nbits; i += step * (step == 64 ? 37 : 1))
			check_near(b, m, i);
	check_near(b, m, m->nbits - 1);
	/* around the set bits (a bounded number of them) and at random places */
	for (size_t i = m->next_set[0], k = 0; i != SPOKE_BITMAP_NONE && k < 2000;
	     i = m->next_set[i + 1], k++)
		check_near(b, m, i);
	for (int k = 0; k < 2000; k++)
		check_at(b, m, rng_below(seed, m->nbits));
}

static void set_bit(struct spoke_bitmap *b, struct model *m, size_t i)
{
	spoke_bitmap_set(b, i);
	m->bit[i] = true;
}

static void clear_bit(struct spoke_bitmap *b, struct model *m, size_t i)
{
	spoke_bitmap_clear(b, i);
	m->bit[i] = false;
}

static void test_against_model(void **state)
{
	const size_t nbits = *(const size_t *)*state;
	uint64_t seed = nbits * 7919u + 1;
	struct spoke_bitmap b;
	struct model m;
	/* rounds: mutations per round, share of sets in percent */
	static const struct {
		size_t ops;
		unsigned set_pct;
	} phases[] = {
		{1, 100}, {3, 100},  {8, 60},  {40, 80}, {200, 70},
		{50, 10}, {400, 50}, {100, 0}, {30, 50},
	};

	model_init(&m, nbits);
	assert_int_equal(spoke_bitmap_init(&b, nbits), 0);
	check_all(&b, &m, &seed);
	for (int round = 0; round < 3; round++) {
		for (size_t p = 0; p < sizeof(phases) / sizeof(phases[0]); p++) {
			for (size_t k = 0; k < phases[p].ops; k++) {
				size_t i = rng_below(&seed, nbits);

				if (rng_below(&seed, 100) < phases[p].set_pct)
					set_bit(&b, &m, i);
				else
					clear_bit(&b, &m, i);
			}
			check_all(&b, &m, &seed);
		}
		/* the first and last bit, each alone */
		spoke_bitmap_zero(&b);
		memset(m.bit, 0, nbits * sizeof(*m.bit));
		check_all(&b, &m, &seed);
		set_bit(&b, &m, nbits - 1);
		check_all(&b, &m, &seed);
		clear_bit(&b, &m, nbits - 1);
		set_bit(&b, &m, 0);
		set_bit(&b, &m, 0); /* idempotent */
		check_all(&b, &m, &seed);
		clear_bit(&b, &m, 0);
		check_all(&b, &m, &seed);
		assert_int_equal(spoke_bitmap_next(&b, 0), SPOKE_BITMAP_NONE);
		assert_int_equal(spoke_bitmap_next_circular(&b, nbits / 2), SPOKE_BITMAP_NONE);
	}
	/* dense: everything set, then cleared from the front */
	for (size_t i = 0; i < nbits; i++)
		set_bit(&b, &m, i);
	check_all(&b, &m, &seed);
	for (size_t i = 0; i < nbits; i += 1 + nbits / 50) {
		for (size_t j = i; j < nbits && j < i + 1 + nbits / 50; j++)
			clear_bit(&b, &m, j);
		check_all(&b, &m, &seed);
	}
	spoke_bitmap_fini(&b);
	model_fini(&m);
}

static void test_init_bounds(void **state)
{
	struct spoke_bitmap b;

	(void)state;
	assert_int_equal(spoke_bitmap_init(&b, 0), -EINVAL);
	assert_int_equal(spoke_bitmap_init(&b, ((size_t)1 << 36) + 1), -EINVAL);
	assert_int_equal(spoke_bitmap_init(&b, 1), 0);
	assert_int_equal(b.nbits, 1);
	assert_int_equal(spoke_bitmap_next(&b, 0), SPOKE_BITMAP_NONE);
	spoke_bitmap_set(&b, 0);
	assert_int_equal(spoke_bitmap_next(&b, 0), 0);
	assert_int_equal(spoke_bitmap_next_circular(&b, 0), 0);
	spoke_bitmap_fini(&b);
	spoke_bitmap_fini(&b); /* twice is harmless */
}

static const size_t sizes[] = {1, 63, 64, 65, 4096, ((size_t)1 << 20) + 3};

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_bounds),
		{"model nbits=1", test_against_model, NULL, NULL, (void *)&sizes[0]},
		{"model nbits=63", test_against_model, NULL, NULL, (void *)&sizes[1]},
		{"model nbits=64", test_against_model, NULL, NULL, (void *)&sizes[2]},
		{"model nbits=65", test_against_model, NULL, NULL, (void *)&sizes[3]},
		{"model nbits=4096", test_against_model, NULL, NULL, (void *)&sizes[4]},
		{"model nbits=2^20+3", test_against_model, NULL, NULL, (void *)&sizes[5]},
	};

	return cmocka_run_group_tests_name("bitmap", tests, NULL, NULL);
}
