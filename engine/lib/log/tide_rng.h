/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The one seeded pseudo-random generator of the tree (splitmix64): workloads,
 * fault injection and table keys that a seed must reproduce. Not for secrets.
 */
#ifndef TIDE_RNG_H
#define TIDE_RNG_H

#include <stdint.h>

/**
 * The next value of the sequence whose state is *s (any value is a valid state;
 * equal states give equal sequences). Thread: the state's owner; async-signal-safe.
 */
static inline uint64_t
tide_rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

#endif /* TIDE_RNG_H */
