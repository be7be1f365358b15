/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bitmap.c - allocation of the summary bitmaps described in bitmap.h. */
#include "bitmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t words_for(size_t bits)
{
	return (bits + 63) / 64;
}

/* Each level's words and one more, always zero: see spoke_bitmap_next. */
static size_t words_kept(size_t bits)
{
	return words_for(bits) + 1;
}

int spoke_bitmap_init(struct spoke_bitmap *b, size_t nbits)
{
	size_t bits = nbits;

	memset(b, 0, sizeof(*b));
	if (nbits == 0 || nbits > ((size_t)1 << 36))
		return -EINVAL;
	b->nbits = nbits;
	do {
		b->word[b->depth] = calloc(words_kept(bits), sizeof(uint64_t));
		if (!b->word[b->depth]) {
			spoke_bitmap_fini(b);
			return -ENOMEM;
		}
		b->depth++;
		bits = words_for(bits);
	} while (bits > 1);
	return 0;
}

void spoke_bitmap_fini(struct spoke_bitmap *b)
{
	for (unsigned l = 0; l < SPOKE_BITMAP_MAX_DEPTH; l++) {
		free(b->word[l]);
		b->word[l] = NULL;
	}
	b->depth = 0;
}

void spoke_bitmap_zero(struct spoke_bitmap *b)
{
	size_t bits = b->nbits;

	for (unsigned l = 0; l < b->depth; l++) {
		memset(b->word[l], 0, words_kept(bits) * sizeof(uint64_t));
		bits = words_for(bits);
	}
}
