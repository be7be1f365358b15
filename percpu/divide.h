/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * divide.h - division by a shard's constants (its tick, its stage's slot
 * width) as a multiplication.
 *
 * Every start on a shard turns its deadline into a tick, x / tick_ns, and a
 * start near enough for the stage into a slot, x / width_ns. Both divisors
 * are fixed when the shard is made, and a 64-bit divide costs 15-90 cycles
 * depending on the CPU, where a multiplication costs 3: so each shard keeps
 * the divisor's reciprocal, computed once, and divides by multiplying
 * (Granlund and Montgomery, "Division by invariant integers using
 * multiplication", PLDI 1994, figure 4.1). For a divisor d >= 1 let
 * l = ceil(log2 d); then for every 64-bit x
 *
 *   m  = floor(2^64 (2^l - d) / d) + 1          (fits in 64 bits)
 *   t  = floor(m x / 2^64)                      (the high half of m x)
 *   x / d = (t + ((x - t) >> min(l, 1))) >> max(l - 1, 0)
 *
 * exactly, with no intermediate above 2^64: x - t never underflows (t <= x)
 * and t + (x - t) / 2 <= x. tests/test_divide.c checks it against the
 * hardware divide for the edge cases of every divisor class and random x.
 */
#ifndef SPOKE_PERCPU_DIVIDE_H
#define SPOKE_PERCPU_DIVIDE_H

#include <stdint.h>

struct spoke_divisor {
	uint64_t magic;
	unsigned char shift1, shift2;
};

/* Any thread, once per divisor: the reciprocal of d (d >= 1). */
static inline struct spoke_divisor spoke_divisor_of(uint64_t d)
{
	unsigned l = d <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(d - 1);
	unsigned __int128 m = ((((unsigned __int128)1 << l) - d) << 64) / d + 1;

	return (struct spoke_divisor){
		.magic = (uint64_t)m,
		.shift1 = l ? 1 : 0,
		.shift2 = l ? (unsigned char)(l - 1) : 0,
	};
}

/* x / d for the d that dv was made of. */
static inline uint64_t spoke_divide(uint64_t x, const struct spoke_divisor *dv)
{
	uint64_t t = (uint64_t)(((unsigned __int128)dv->magic * x) >> 64);

	return (t + ((x - t) >> dv->shift1)) >> dv->shift2;
}

#endif /* SPOKE_PERCPU_DIVIDE_H */
