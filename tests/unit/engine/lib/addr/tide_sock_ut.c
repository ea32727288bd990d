/* SPDX-License-Identifier: Apache-2.0 */
/* engine/lib/addr/tide_sock.c: the one TCP socket with deadlines, IPv4 and IPv6. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tide_clock.h"
#include "tide_sock.h"
#include "tide_ut.h"

static void
round_trip(const char *listen_host, const char *connect_host)
{
	int l = -1, c = -1, a;
	uint16_t port = 0;
	char b = 0;

	TIDE_UT_OK(tide_sock_listen(listen_host, 0, 8, &l, &port));
	CU_ASSERT(port != 0);
	TIDE_UT_OK(tide_sock_connect(connect_host, port, tide_mono_ms() + 2000, &c));
	TIDE_UT_OK(tide_sock_wait(l, POLLIN, tide_mono_ms() + 2000));
	a = accept(l, NULL, NULL);
	CU_ASSERT_FATAL(a >= 0);
	CU_ASSERT_EQUAL(send(c, "x", 1, 0), 1);
	TIDE_UT_OK(tide_sock_wait(a, POLLIN, tide_mono_ms() + 2000));
	CU_ASSERT_EQUAL(recv(a, &b, 1, 0), 1);
	CU_ASSERT_EQUAL(b, 'x');
	close(a);
	close(c);
	close(l);
}

static void
test_ipv4_and_ipv6(void)
{
	round_trip("127.0.0.1", "127.0.0.1");
	round_trip("::1", "::1");
	round_trip("127.0.0.1", "localhost"); /* a name: each address in turn */
}

static void
test_refusals(void)
{
	int l = -1, fd = -1;
	uint16_t port = 0;

	CU_ASSERT_EQUAL(tide_sock_listen("not-an-address", 0, 8, &fd, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_sock_listen("[::1]", 0, 8, &fd, NULL), -EINVAL); /* no brackets */
	/* A port nothing listens on (just closed): refused, on both families. */
	TIDE_UT_OK(tide_sock_listen("127.0.0.1", 0, 8, &l, &port));
	close(l);
	CU_ASSERT_EQUAL(tide_sock_connect("127.0.0.1", port, tide_mono_ms() + 2000, &fd),
			-ECONNREFUSED);
	TIDE_UT_OK(tide_sock_listen("::1", 0, 8, &l, &port));
	close(l);
	CU_ASSERT_EQUAL(tide_sock_connect("::1", port, tide_mono_ms() + 2000, &fd), -ECONNREFUSED);
	CU_ASSERT_EQUAL(tide_sock_connect("no-such-host.invalid", 80, tide_mono_ms() + 2000, &fd),
			-EHOSTUNREACH);
	CU_ASSERT_EQUAL(tide_sock_connect("127.0.0.1", 0, tide_mono_ms() + 2000, &fd), -EINVAL);
}

static void
test_wait_deadline(void)
{
	int l = -1;
	uint16_t port;
	uint64_t t0 = tide_mono_ms();

	TIDE_UT_OK(tide_sock_listen("127.0.0.1", 0, 8, &l, &port));
	/* Nothing connects: the wait ends at its deadline, not before, not much after. */
	CU_ASSERT_EQUAL(tide_sock_wait(l, POLLIN, t0 + 100), -ETIMEDOUT);
	CU_ASSERT(tide_mono_ms() - t0 >= 100);
	CU_ASSERT_EQUAL(tide_sock_wait(l, POLLIN, 0), -ETIMEDOUT); /* already past */
	close(l);
}

/* Poll-before-sleep: false after its budget on a quiet socket, true at once
 * when data is waiting, false at once with a zero budget. */
static void
test_poll_briefly(void)
{
	int sv[2];
	uint64_t t0;

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	t0 = tide_mono_us();
	CU_ASSERT_FALSE(tide_sock_poll_briefly(sv[0], POLLIN, 2000));
	CU_ASSERT(tide_mono_us() - t0 >= 2000);
	CU_ASSERT_FALSE(tide_sock_poll_briefly(sv[0], POLLIN, 0));
	CU_ASSERT_EQUAL(write(sv[1], "x", 1), 1);
	t0 = tide_mono_us();
	CU_ASSERT_TRUE(tide_sock_poll_briefly(sv[0], POLLIN, 1000000));
	CU_ASSERT(tide_mono_us() - t0 < 1000000);
	CU_ASSERT_TRUE(tide_sock_poll_briefly(sv[1], POLLOUT, 10));
	close(sv[0]);
	close(sv[1]);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tide_sock", NULL, NULL);

	CU_add_test(s, "ipv4_and_ipv6", test_ipv4_and_ipv6);
	CU_add_test(s, "refusals", test_refusals);
	CU_add_test(s, "wait_deadline", test_wait_deadline);
	CU_add_test(s, "poll_briefly", test_poll_briefly);
}

TIDE_UT_MAIN(register_tests)
