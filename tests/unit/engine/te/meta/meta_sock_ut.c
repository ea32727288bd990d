/* SPDX-License-Identifier: Apache-2.0 */
/* Socket helpers: deadlines, connect errors, short reads, host:port parsing. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "meta_internal.h"
#include "tide_ut.h"

/* Listener on 127.0.0.1 with an ephemeral port. */
static int
listener(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t sl = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(listen(fd, 4) == 0);
	CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&a, &sl) == 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void
test_connect(void)
{
	uint16_t port;
	int lfd = listener(&port), fd = -1, afd;
	char buf[16];
	int64_t t0;

	TIDE_UT_OK(meta_sock_connect("127.0.0.1", port, meta_deadline(1000), &fd));
	afd = accept(lfd, NULL, NULL);
	CU_ASSERT_FATAL(afd >= 0);
	/* Nothing to read: the deadline holds. */
	t0 = meta_now_ms();
	CU_ASSERT_EQUAL(meta_sock_read_some(fd, buf, sizeof(buf), meta_deadline(150)), -ETIMEDOUT);
	CU_ASSERT_TRUE(meta_now_ms() - t0 >= 140);
	/* An expired deadline fails at once. */
	CU_ASSERT_EQUAL(meta_sock_read_full(fd, buf, 1, meta_deadline(0)), -ETIMEDOUT);
	/* Data then EOF: read_full of more than was sent is a reset. */
	CU_ASSERT_EQUAL(send(afd, "abc", 3, 0), 3);
	CU_ASSERT_EQUAL(meta_sock_read_full(fd, buf, 2, meta_deadline(1000)), 0);
	CU_ASSERT_EQUAL(memcmp(buf, "ab", 2), 0);
	close(afd);
	CU_ASSERT_EQUAL(meta_sock_read_full(fd, buf, 4, meta_deadline(1000)), -ECONNRESET);
	CU_ASSERT_EQUAL(meta_sock_read_some(fd, buf, 4, meta_deadline(1000)), 0);
	/* Writing to a closed peer eventually fails without SIGPIPE. */
	{
		char big[65536] = {0};
		int rc = 0;

		for (int i = 0; i < 64 && rc == 0; i++)
			rc = meta_sock_write_all(fd, big, sizeof(big), meta_deadline(500));
		CU_ASSERT_TRUE(rc == -EPIPE || rc == -ECONNRESET);
	}
	close(fd);
	close(lfd);
	/* Nothing listens any more. */
	CU_ASSERT_EQUAL(meta_sock_connect("127.0.0.1", port, meta_deadline(1000), &fd),
			-ECONNREFUSED);
}

static void
test_write_timeout(void)
{
	uint16_t port;
	int lfd = listener(&port), fd = -1, afd, rc = 0;
	char *big = calloc(1, 1 << 20);
	int64_t t0;

	TIDE_UT_OK(meta_sock_connect("127.0.0.1", port, meta_deadline(1000), &fd));
	afd = accept(lfd, NULL, NULL);
	/* The peer never reads: the socket buffers fill and the deadline ends the write. */
	t0 = meta_now_ms();
	for (int i = 0; i < 64 && rc == 0; i++)
		rc = meta_sock_write_all(fd, big, 1 << 20, t0 + 300);
	CU_ASSERT_EQUAL(rc, -ETIMEDOUT);
	CU_ASSERT_TRUE(meta_now_ms() - t0 < 2000);
	free(big);
	close(afd);
	close(fd);
	close(lfd);
}

static void
test_names(void)
{
	char h[64], small[4];
	uint16_t p = 0;

	TIDE_UT_OK(meta_split_hostport("10.0.0.1:12345", h, sizeof(h), &p));
	CU_ASSERT_STRING_EQUAL(h, "10.0.0.1");
	CU_ASSERT_EQUAL(p, 12345);
	TIDE_UT_OK(meta_split_hostport("[::1]:80", h, sizeof(h), &p));
	CU_ASSERT_STRING_EQUAL(h, "::1");
	TIDE_UT_OK(meta_split_hostport("node-a:1", h, sizeof(h), &p));
	CU_ASSERT_STRING_EQUAL(h, "node-a");
	CU_ASSERT_EQUAL(p, 1);
	CU_ASSERT_EQUAL(meta_split_hostport("10.0.0.1", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport(":80", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("h:", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("h:0", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("h:65536", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("h:-1", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("h:8x", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("::1:80", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("[::1]80", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("[]:80", h, sizeof(h), &p), -EINVAL);
	CU_ASSERT_EQUAL(meta_split_hostport("abcdef:1", h, 4, &p), -EINVAL);
	TIDE_UT_OK(meta_strlcpy(small, "abc", sizeof(small)));
	CU_ASSERT_STRING_EQUAL(small, "abc");
	CU_ASSERT_EQUAL(meta_strlcpy(small, "abcd", sizeof(small)), -ENAMETOOLONG);
	CU_ASSERT_EQUAL(meta_strlcpy(small, "", 0), -ENAMETOOLONG);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("meta_sock", NULL, NULL);

	CU_add_test(s, "connect_read_deadlines", test_connect);
	CU_add_test(s, "write_timeout", test_write_timeout);
	CU_add_test(s, "hostport_strlcpy", test_names);
}

TIDE_UT_MAIN(register_tests)
