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
#include <stddef.h>
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

/** CPU time (user and system) this process has used, in seconds. */
double tide_ut_cpu_s(void);

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

/**
 * The whole of the file dir/name (name alone when dir is NULL), NUL-terminated.
 * \param len  set to the file's size when it was opened (may be NULL).
 * \return the bytes (the caller frees them), or NULL when the file cannot be read.
 */
void *tide_ut_read_file(const char *dir, const char *name, size_t *len);

/**
 * Fill p[0..n) with pseudo-random bytes: x steps as x = x * a + c and each byte
 * is x >> shift, so a test regenerates the same bytes from the same arguments.
 */
void tide_ut_fill_lcg(uint8_t *p, size_t n, uint32_t x, uint32_t a, uint32_t c, unsigned shift);

/**
 * Run fn with stderr (where the engine logs) captured into buf, NUL-terminated
 * (at most len - 1 bytes of it).
 */
void tide_ut_capture_stderr(void (*fn)(void), char *buf, size_t len);

/** The little-endian 64-bit value at p (wire formats). */
uint64_t tide_ut_get_le64(const uint8_t *p);

/** Store v at p little-endian (wire formats). */
void tide_ut_put_le64(uint8_t *p, uint64_t v);

/** Assert a tide call returned 0, printing the errno it returned otherwise. */
#define TIDE_UT_OK(expr) CU_ASSERT_EQUAL((expr), 0)

#endif /* TIDE_UT_H */
