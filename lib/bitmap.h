/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bitmap.h - "which slots are occupied", answered with a few bit scans.
 *
 * A wheel must find its next non-empty slot without walking empty ones. The
 * bitmap keeps one bit per slot (level 0) and above it summary levels where
 * bit w of level j+1 says "word w of level j is non-zero", until one word
 * covers everything. With 2^20 slots that is 16384 + 256 + 4 + 1 words, and
 * spoke_bitmap_next() reads at most two words per level: 8 loads to cross a
 * million empty slots. Set and clear touch upper levels only when a word
 * turns from zero to non-zero or back.
 *
 * Single-threaded, like the engines that use it.
 */
#ifndef SPOKE_LIB_BITMAP_H
#define SPOKE_LIB_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPOKE_BITMAP_MAX_DEPTH 6 /* 64^6 = 2^36 bits */
#define SPOKE_BITMAP_NONE      ((size_t)-1)

struct spoke_bitmap {
	unsigned depth;
	size_t nbits;
	uint64_t *word[SPOKE_BITMAP_MAX_DEPTH]; /* word[0] = one bit per slot */
};

/* Allocate an all-clear bitmap of nbits (1..2^36). 0, -EINVAL or -ENOMEM. */
int spoke_bitmap_init(struct spoke_bitmap *b, size_t nbits);
void spoke_bitmap_fini(struct spoke_bitmap *b);
/* Clear every bit in O(nbits / 64). */
void spoke_bitmap_zero(struct spoke_bitmap *b);

/* Set bit i of level l, and upwards while the word was zero before. */
static inline void spoke_bitmap_set_from(struct spoke_bitmap *b, unsigned l, size_t i)
{
	for (; l < b->depth; l++) {
		uint64_t *w = &b->word[l][i >> 6];
		uint64_t was = *w;

		*w = was | (1ull << (i & 63));
		if (was)
			return;
		i >>= 6;
	}
}

static inline void spoke_bitmap_set(struct spoke_bitmap *b, size_t i)
{
	spoke_bitmap_set_from(b, 0, i);
}

/* Clear bit i of level l, and upwards while that empties a word. */
static inline void spoke_bitmap_clear_from(struct spoke_bitmap *b, unsigned l, size_t i)
{
	for (; l < b->depth; l++) {
		uint64_t *w = &b->word[l][i >> 6];

		*w &= ~(1ull << (i & 63));
		if (*w)
			return;
		i >>= 6;
	}
}

static inline void spoke_bitmap_clear(struct spoke_bitmap *b, size_t i)
{
	spoke_bitmap_clear_from(b, 0, i);
}

static inline int spoke_bitmap_test(const struct spoke_bitmap *b, size_t i)
{
	return (b->word[0][i >> 6] >> (i & 63)) & 1;
}

/*
 * First set bit at index >= i, or SPOKE_BITMAP_NONE. The word of i first
 * (a hit there is one load); then up, one word per level, to the first
 * word with a set bit after the position, and down its first set bits.
 * The climb reads at most one word past a level's last (when the level
 * below has a multiple of 64 words): bitmap.c allocates that word and
 * keeps it zero, so the climb needs no bound but the depth.
 */
static inline size_t spoke_bitmap_next(const struct spoke_bitmap *b, size_t i)
{
	unsigned l = 0;
	uint64_t w;

	if (i >= b->nbits)
		return SPOKE_BITMAP_NONE;
	w = b->word[0][i >> 6] & (~0ull << (i & 63));
	while (w == 0) {
		if (++l == b->depth)
			return SPOKE_BITMAP_NONE;
		i = (i >> 6) + 1;
		w = b->word[l][i >> 6] & (~0ull << (i & 63));
	}
	i = (i & ~(size_t)63) | (size_t)__builtin_ctzll(w);
	while (l-- > 0)
		i = (i << 6) | (size_t)__builtin_ctzll(b->word[l][i]);
	return i;
}

/* First set bit at or after i going round (i, i+1, .., nbits-1, 0, .., i-1). */
static inline size_t spoke_bitmap_next_circular(const struct spoke_bitmap *b, size_t i)
{
	size_t n = spoke_bitmap_next(b, i);

	if (n == SPOKE_BITMAP_NONE && i > 0)
		n = spoke_bitmap_next(b, 0);
	return n;
}

#endif /* SPOKE_LIB_BITMAP_H */
