/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Shared CUnit runner for Tide unit tests.
 *
 * A test file builds its suites with CU_add_suite/CU_add_test inside a
 * `static void register_tests(void)` and ends with TIDE_UT_MAIN(register_tests).
 * The runner prints CUnit's summary (CI greps it) and exits non-zero when
 * any assertion failed, so meson sees the failure.
 */
#ifndef TIDE_UT_H
#define TIDE_UT_H

#include <CUnit/Basic.h>
#include <stdint.h>

/** Run every registered suite; returns the process exit code. */
int tide_ut_run(void (*register_fn)(void));

#define TIDE_UT_MAIN(register_fn)                \
	int main(void)                           \
	{                                        \
		return tide_ut_run(register_fn); \
	}

/** This process's resident set (VmRSS) in KiB, from /proc/self/statm; 0 if unreadable. */
long tide_ut_rss_kib(void);

/** CLOCK_MONOTONIC in seconds. */
double tide_ut_now_s(void);

/**
 * A blocking TCP connection to dst:port from the source address src (IPv4
 * literals). All of 127/8 is local on Linux, so loopback tests connect from
 * 127.0.0.2 to stand for "another host" (allowlists, bind addresses).
 * \param timeout_ms  receive timeout set on the socket (0: none).
 * \return the socket (the caller closes it), or -errno (-ECONNREFUSED: nothing
 *         listens there; -EINVAL: src or dst is not an IPv4 literal).
 */
int tide_ut_connect_from(const char *src, const char *dst, uint16_t port, int timeout_ms);

/**
 * The first of n consecutive TCP ports (n <= 16) free on 127.0.0.1, below the
 * kernel's ephemeral range (ip_local_port_range), so that no connection another
 * test opens meanwhile takes one of them: a run inside the ephemeral range can
 * lose a port to a concurrent test's connect() between this call and the caller's
 * bind. Each port is checked by binding it (SO_REUSEADDR, as the engine binds).
 * \return the first port of the run, or 0 when none was found below the range.
 */
uint16_t tide_ut_free_port_run(unsigned n);

/** Assert a tide call returned 0, printing the errno it returned otherwise. */
#define TIDE_UT_OK(expr) CU_ASSERT_EQUAL((expr), 0)

#endif /* TIDE_UT_H */
