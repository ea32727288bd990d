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

/**
 * The time ms milliseconds from now on clock clk, as a timespec: the absolute
 * deadline pthread_cond_timedwait() takes, on the clock of its condition
 * variable (CLOCK_REALTIME unless the variable was made with another).
 * Thread: any; async-signal-safe.
 */
static inline struct timespec
tide_clock_deadline(clockid_t clk, uint64_t ms)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	ts.tv_sec += (time_t)(ms / 1000u);
	ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif /* TIDE_CLOCK_H */
