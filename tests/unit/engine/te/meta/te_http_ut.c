/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP metadata client against an in-test server on 127.0.0.1. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_ut.h"
#include "ut_http_srv.h"

static struct ut_http_srv *srv;
static struct te_http *cli;
static char url[128];

static int
suite_init(void)
{
	if (ut_http_srv_start(&srv) != 0)
		return -1;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", ut_http_srv_port(srv));
	return te_http_open(url, 2000, &cli, NULL, 0) == 0 ? 0 : -1;
}

static int
suite_fini(void)
{
	te_http_close(cli);
	ut_http_srv_stop(srv);
	return 0;
}

static void
canned(const char *raw)
{
	ut_http_srv_set(srv, UT_HTTP_CANNED, raw, strlen(raw));
}

static void
test_kv(void)
{
	char *body = NULL, line[512];
	size_t len = 0;

	ut_http_srv_set(srv, UT_HTTP_KV, NULL, 0);
	CU_ASSERT_EQUAL(te_http_get(cli, "mooncake/ram/a b", &body, &len), -ENOENT);
	TIDE_UT_OK(te_http_put(cli, "mooncake/ram/a b", "{\"x\":1}", 7));
	ut_http_srv_last_line(srv, line, sizeof(line));
	CU_ASSERT_STRING_EQUAL(line, "PUT /metadata?key=mooncake%2Fram%2Fa%20b HTTP/1.1");
	TIDE_UT_OK(te_http_get(cli, "mooncake/ram/a b", &body, &len));
	CU_ASSERT_EQUAL(len, 7);
	CU_ASSERT_STRING_EQUAL(body, "{\"x\":1}");
	free(body);
	ut_http_srv_last_line(srv, line, sizeof(line));
	CU_ASSERT_STRING_EQUAL(line, "GET /metadata?key=mooncake%2Fram%2Fa%20b HTTP/1.1");
	/* Same rpc_meta again is fine; a different one is a conflict (400). */
	TIDE_UT_OK(te_http_put(cli, "mooncake/rpc_meta/n", "{\"p\":1}", 7));
	TIDE_UT_OK(te_http_put(cli, "mooncake/rpc_meta/n", "{\"p\":1}", 7));
	CU_ASSERT_EQUAL(te_http_put(cli, "mooncake/rpc_meta/n", "{\"p\":2}", 7), -EEXIST);
	/* Empty body PUT. */
	TIDE_UT_OK(te_http_put(cli, "k/empty", "", 0));
	TIDE_UT_OK(te_http_get(cli, "k/empty", &body, &len));
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_STRING_EQUAL(body, "");
	free(body);
	TIDE_UT_OK(te_http_del(cli, "mooncake/ram/a b"));
	TIDE_UT_OK(te_http_del(cli, "mooncake/ram/a b")); /* 404 counts as done */
	CU_ASSERT_EQUAL(te_http_get(cli, "mooncake/ram/a b", &body, &len), -ENOENT);
	/* Unreserved characters stay; others are escaped. */
	TIDE_UT_OK(te_http_del(cli, "A-z_0.9~/?&=%"));
	ut_http_srv_last_line(srv, line, sizeof(line));
	CU_ASSERT_STRING_EQUAL(line, "DELETE /metadata?key=A-z_0.9~%2F%3F%26%3D%25 HTTP/1.1");
}

static void
test_status(void)
{
	char *body = NULL;
	size_t len;

	canned("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 3\r\n\r\nbad");
	CU_ASSERT_EQUAL(te_http_get(cli, "k", &body, &len), -EPROTO);
	CU_ASSERT_EQUAL(te_http_put(cli, "k", "v", 1), -EPROTO);
	CU_ASSERT_EQUAL(te_http_del(cli, "k"), -EPROTO);
	canned("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
	CU_ASSERT_EQUAL(te_http_get(cli, "k", &body, &len), -EPROTO);
	CU_ASSERT_EQUAL(te_http_put(cli, "k", "v", 1), -EEXIST);
	CU_ASSERT_EQUAL(te_http_del(cli, "k"), -EPROTO);
	canned("HTTP/1.0 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found");
	CU_ASSERT_EQUAL(te_http_get(cli, "k", &body, &len), -ENOENT);
	TIDE_UT_OK(te_http_del(cli, "k"));
	CU_ASSERT_EQUAL(te_http_put(cli, "k", "v", 1), -EPROTO);
	canned("HTTP/1.1 200 OK\r\ncontent-length: 5\r\nX-Other: 1\r\n\r\nhello");
	TIDE_UT_OK(te_http_get(cli, "k", &body, &len));
	CU_ASSERT_TRUE(len == 5 && strcmp(body, "hello") == 0);
	free(body);
	TIDE_UT_OK(te_http_put(cli, "k", "v", 1));
	TIDE_UT_OK(te_http_del(cli, "k"));
	/* Interim 100 Continue is skipped; bare LF line ends are tolerated. */
	canned("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\nContent-Length: 2\n\nok");
	TIDE_UT_OK(te_http_get(cli, "k", &body, &len));
	CU_ASSERT_TRUE(len == 2 && strcmp(body, "ok") == 0);
	free(body);
}

static void
test_bodies(void)
{
	char *body = NULL, *big;
	size_t len = 0, n = 1 << 20, hl;

	canned("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "4\r\n{\"a\"\r\n3;ext=1\r\n:12\r\nA\r\n,\"b\":\"xyz\"\r\n1\r\n}\r\n0\r\n"
	       "X-Trailer: t\r\n\r\n");
	TIDE_UT_OK(te_http_get(cli, "k", &body, &len));
	CU_ASSERT_EQUAL(len, 18);
	CU_ASSERT_STRING_EQUAL(body, "{\"a\":12,\"b\":\"xyz\"}");
	free(body);
	/* Close-delimited body. */
	canned("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil-eof");
	TIDE_UT_OK(te_http_get(cli, "k", &body, &len));
	CU_ASSERT_TRUE(len == 9 && strcmp(body, "until-eof") == 0);
	free(body);
	/* 1 MiB Content-Length body arrives intact. */
	big = malloc(n + 100);
	hl = (size_t)snprintf(big, 100, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);
	for (size_t i = 0; i < n; i++)
		big[hl + i] = (char)('a' + i % 26);
	ut_http_srv_set(srv, UT_HTTP_CANNED, big, hl + n);
	TIDE_UT_OK(te_http_get(cli, "k", &body, &len));
	CU_ASSERT_EQUAL(len, n);
	CU_ASSERT_TRUE(body != NULL && memcmp(body, big + hl, n) == 0 && body[n] == '\0');
	free(body);
	free(big);
}

static void
test_malformed(void)
{
	static const char *bad[] = {
		"",                                                    /* closed at once */
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  /* truncated body */
		"HTTP/1.1 200 OK\r\nContent-Length: 67108865\r\n\r\n", /* over 64 MiB */
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nab",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5000000\r\n", /* > 64 MiB */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", /* no last */
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"SMTP ready\r\n\r\n",
		"HTTP/1.1 200 OK\r\nNoColonHere\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2", /* headers never end */
	};
	char *body = NULL, *longline;
	size_t len;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;

		canned(bad[i]);
		body = NULL;
		rc = te_http_get(cli, "k", &body, &len);
		if (rc != -EPROTO)
			printf("\n  case %zu: rc %d\n", i, rc);
		CU_ASSERT_EQUAL(rc, -EPROTO);
		CU_ASSERT_PTR_NULL(body);
	}
	/* A header line over 8 KiB. */
	longline = malloc(20000);
	strcpy(longline, "HTTP/1.1 200 OK\r\nX: ");
	memset(longline + strlen(longline), 'a', 10000);
	strcpy(longline + 20 + 10000, "\r\nContent-Length: 0\r\n\r\n");
	canned(longline);
	CU_ASSERT_EQUAL(te_http_get(cli, "k", &body, &len), -EPROTO);
	free(longline);
}

static void
test_timeout(void)
{
	struct te_http *h = NULL;
	char *body = NULL;
	size_t len;
	int64_t t0, dt;

	TIDE_UT_OK(te_http_open(url, 300, &h, NULL, 0));
	ut_http_srv_set(srv, UT_HTTP_SILENT, NULL, 0);
	t0 = meta_now_ms();
	CU_ASSERT_EQUAL(te_http_get(h, "k", &body, &len), -ETIMEDOUT);
	dt = meta_now_ms() - t0;
	CU_ASSERT_TRUE(dt >= 280 && dt < 3000);
	t0 = meta_now_ms();
	CU_ASSERT_EQUAL(te_http_put(h, "k", "v", 1), -ETIMEDOUT);
	CU_ASSERT_TRUE(meta_now_ms() - t0 < 3000);
	/* A server that sends headers and then stalls mid-body also times out. */
	canned("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
	/* Canned mode closes after sending: that is a truncated body, not a stall. */
	CU_ASSERT_EQUAL(te_http_get(h, "k", &body, &len), -EPROTO);
	te_http_close(h);
	ut_http_srv_set(srv, UT_HTTP_KV, NULL, 0);
	/* The server is still usable after the stalled clients went away. */
	TIDE_UT_OK(te_http_put(cli, "after", "1", 1));
}

static void
test_refused(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t sl = sizeof(a);
	struct te_http *h = NULL;
	char u[64], *body = NULL;
	size_t len;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* Take a free port, then release it: nothing listens there. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CU_ASSERT_EQUAL_FATAL(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
	close(fd);
	snprintf(u, sizeof(u), "http://127.0.0.1:%u/", ntohs(a.sin_port));
	TIDE_UT_OK(te_http_open(u, 1000, &h, NULL, 0));
	CU_ASSERT_EQUAL(te_http_get(h, "k", &body, &len), -ECONNREFUSED);
	CU_ASSERT_EQUAL(te_http_put(h, "k", "v", 1), -ECONNREFUSED);
	CU_ASSERT_EQUAL(te_http_del(h, "k"), -ECONNREFUSED);
	te_http_close(h);
}

static void
test_url(void)
{
	static const struct {
		const char *url;
		int rc;
	} cases[] = {
		{"https://h/x", -EPROTONOSUPPORT},
		{"HTTPS://h", -EPROTONOSUPPORT},
		{"ftp://h", -EINVAL},
		{"h:80", -EINVAL},
		{"http://", -EINVAL},
		{"http:///path", -EINVAL},
		{"http://:80/", -EINVAL},
		{"http://h:0/", -EINVAL},
		{"http://h:65536/", -EINVAL},
		{"http://h:/", -EINVAL},
		{"http://h:8x/", -EINVAL},
		{"http://h x/", -EINVAL},
		{"http://h/a b", -EINVAL},
		{"http://h/#frag", -EINVAL},
		{"http://u@h/", -EINVAL},
		{"http://[::1/", -EINVAL},
		{"http://[::1]x/", -EINVAL},
		{"http://h", 0},
		{"http://h:8080", 0},
		{"http://h:8080/metadata", 0},
		{"HTTP://h/", 0},
		{"http://[::1]:80/m", 0},
		{"http://h?x=1", 0},
	};
	char e[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct te_http *h = NULL;
		int rc;

		e[0] = '\0';
		rc = te_http_open(cases[i].url, 100, &h, e, sizeof(e));
		if (rc != cases[i].rc)
			printf("\n  %s: rc %d (%s)\n", cases[i].url, rc, e);
		CU_ASSERT_EQUAL(rc, cases[i].rc);
		CU_ASSERT_TRUE(rc == 0 || (e[0] != '\0' && h == NULL));
		te_http_close(h);
	}
	CU_ASSERT_EQUAL(te_http_open(NULL, 100, &cli, NULL, 0), -EINVAL);
	te_http_close(NULL);
}

/* A base URL with a query gets "&key=" and default port 80 goes in the Host header. */
static void
test_query_url(void)
{
	struct te_http *h = NULL;
	char u[96], line[512], *body = NULL;
	size_t len;

	snprintf(u, sizeof(u), "http://127.0.0.1:%u?tenant=a", ut_http_srv_port(srv));
	TIDE_UT_OK(te_http_open(u, 2000, &h, NULL, 0));
	canned("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1");
	TIDE_UT_OK(te_http_get(h, "x", &body, &len));
	free(body);
	ut_http_srv_last_line(srv, line, sizeof(line));
	CU_ASSERT_STRING_EQUAL(line, "GET /?tenant=a&key=x HTTP/1.1");
	te_http_close(h);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_http", suite_init, suite_fini);

	CU_add_test(s, "kv_get_put_del", test_kv);
	CU_add_test(s, "status_mapping", test_status);
	CU_add_test(s, "chunked_length_eof", test_bodies);
	CU_add_test(s, "malformed_replies", test_malformed);
	CU_add_test(s, "timeout", test_timeout);
	CU_add_test(s, "refused", test_refused);
	CU_add_test(s, "url_parsing", test_url);
	CU_add_test(s, "query_url", test_query_url);
}

TIDE_UT_MAIN(register_tests)
