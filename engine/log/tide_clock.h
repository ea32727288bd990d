/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The one monotonic clock reading the engine, the store and the tools share
 * (timers, deadlines, rates), so each file does not carry its own copy.
 */
#ifndef TIDE_CLOCK_H
#define TIDE_CLOCK_H

#include <stdint.h>
#include <time.h>

/** CLOCK_MONOTONIC in nanoseconds. Thread: any; async-signal-safe. */
static inline uint64_t
tide_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* TIDE_CLOCK_H */
