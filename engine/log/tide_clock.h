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

/** CLOCK_MONOTONIC in microseconds. Thread: any; async-signal-safe. */
static inline uint64_t
tide_mono_us(void)
{
	return tide_mono_ns() / 1000u;
}

/** CLOCK_MONOTONIC in milliseconds (deadlines, timeouts). Thread: any; async-signal-safe. */
static inline uint64_t
tide_mono_ms(void)
{
	return tide_mono_ns() / 1000000u;
}

/** CLOCK_MONOTONIC in seconds, as a double (benchmark rates). Thread: any. */
static inline double
tide_mono_s(void)
{
	return (double)tide_mono_ns() / 1e9;
}

#endif /* TIDE_CLOCK_H */
