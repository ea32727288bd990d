/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP client (tide_http.c) against a scripted server thread on 127.0.0.1:
 * what the metadata client's suite (te_http_ut: statuses, chunked / sized /
 * close-delimited bodies, malformed replies, URLs) does not reach: the body
 * sink (pieces in order, an early stop, an error), a POST's headers and body,
 * the reply bound, the status of a stream that times out after its headers,
 * and a peer that closes before answering.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tide_clock.h"
#include "tide_http.h"
#include "tide_sock.h"
#include "tide_ut.h"

/* One connection: read the request (headers and a Content-Length body), send
 * `reply` in two halves 20 ms apart, then hold the connection `hold_ms`. */
struct script {
	int lfd;
	const char *reply;
	int hold_ms;
	char request[4096];
};

static void *
serve(void *arg)
{
	struct script *sc = arg;
	size_t got = 0, need = 0;
	int fd;

	if (tide_sock_wait(sc->lfd, POLLIN, tide_mono_ms() + 5000) != 0)
		return NULL;
	fd = accept(sc->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	for (;;) {
		ssize_t n =
			tide_sock_read_some(fd, sc->request + got, sizeof(sc->request) - 1 - got,
					    tide_mono_ms() + 5000);
		char *end, *cl;

		if (n <= 0)
			break;
		got += (size_t)n;
		sc->request[got] = '\0';
		end = strstr(sc->request, "\r\n\r\n");
		if (end == NULL)
			continue;
		cl = strstr(sc->request, "Content-Length: ");
		need = (size_t)(end + 4 - sc->request) + (cl ? strtoul(cl + 16, NULL, 10) : 0);
		if (got >= need)
			break;
	}
	if (sc->reply != NULL) {
		size_t half = strlen(sc->reply) / 2;

		(void)tide_sock_write_all(fd, sc->reply, half, tide_mono_ms() + 5000);
		usleep(20000);
		(void)tide_sock_write_all(fd, sc->reply + half, strlen(sc->reply) - half,
					  tide_mono_ms() + 5000);
	}
	if (sc->hold_ms > 0)
		usleep((useconds_t)sc->hold_ms * 1000);
	close(fd);
	return NULL;
}

/*
 * Serve sc on a fresh loopback port (u: its URL, "/base?x=1") and send q there; the
 * server thread has ended on return. Returns tide_http_request()'s result.
 */
static int
exchange(struct script *sc, struct tide_http_url *u, const struct tide_http_req *q, int *status,
	 char **body, size_t *len)
{
	uint16_t port = 0;
	char url[64];
	pthread_t th;
	int rc;

	CU_ASSERT_FATAL(tide_sock_listen("127.0.0.1", 0, 4, &sc->lfd, &port) == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/base?x=1", port);
	CU_ASSERT_FATAL(tide_http_url_parse(url, u, NULL, 0) == 0);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, serve, sc) == 0);
	rc = tide_http_request(u, q, status, body, len);
	pthread_join(th, NULL);
	close(sc->lfd);
	return rc;
}

struct pieces {
	char text[256];
	size_t len;
	int calls, stop_at, fail_at;
};

static int
sink(void *arg, const char *p, size_t n)
{
	struct pieces *pc = arg;

	pc->calls++;
	if (pc->len + n < sizeof(pc->text)) {
		memcpy(pc->text + pc->len, p, n);
		pc->len += n;
		pc->text[pc->len] = '\0';
	}
	if (pc->fail_at != 0 && strstr(pc->text, "two") != NULL)
		return -EBADMSG;
	return pc->stop_at != 0 && strstr(pc->text, "two") != NULL ? 1 : 0;
}

static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			      "4\r\none\n\r\n4\r\ntwo\n\r\n6\r\nthree\n\r\n0\r\n\r\n";

/* A POST with its headers and body; the chunked body reaches the sink whole. */
static void
test_post_and_sink(void)
{
	struct script sc = {.reply = chunked};
	struct tide_http_url u;
	struct pieces pc = {0};
	struct tide_http_req q = {.method = "POST",
				  .target = "/v3/kv/range",
				  .content_type = "application/json",
				  .body = "{\"k\":1}",
				  .body_len = 7,
				  .deadline_ms = tide_mono_ms() + 5000,
				  .sink = sink,
				  .arg = &pc};
	int status = -1;

	CU_ASSERT_EQUAL(exchange(&sc, &u, &q, &status, NULL, NULL), 0);
	CU_ASSERT_EQUAL(status, 200);
	CU_ASSERT_STRING_EQUAL(pc.text, "one\ntwo\nthree\n");
	CU_ASSERT(strncmp(sc.request, "POST /v3/kv/range HTTP/1.1\r\n", 28) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(sc.request, "Content-Type: application/json\r\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(sc.request, "Content-Length: 7\r\n\r\n{\"k\":1}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(sc.request, "Connection: close\r\n"));
}

/* The sink ends a stream early (1: success with what was seen) or fails it. */
static void
test_sink_stop_and_error(void)
{
	for (int fail = 0; fail < 2; fail++) {
		struct script sc = {.reply = chunked, .hold_ms = 0};
		struct tide_http_url u;
		struct pieces pc = {.stop_at = !fail, .fail_at = fail};
		struct tide_http_req q = {.method = "GET",
					  .deadline_ms = tide_mono_ms() + 5000,
					  .sink = sink,
					  .arg = &pc};
		int status = -1;

		CU_ASSERT_EQUAL(exchange(&sc, &u, &q, &status, NULL, NULL), fail ? -EBADMSG : 0);
		CU_ASSERT_EQUAL(status, 200);
		CU_ASSERT_STRING_EQUAL(pc.text, "one\ntwo\n");
		CU_ASSERT(strncmp(sc.request, "GET /base?x=1 HTTP/1.1\r\n", 24) == 0);
	}
}

/* A collected body beyond max_body is -EMSGSIZE, whether sized or chunked. */
static void
test_bound(void)
{
	static const char *const replies[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", chunked};

	for (int i = 0; i < 2; i++) {
		struct script sc = {.reply = replies[i]};
		struct tide_http_url u;
		struct tide_http_req q = {
			.method = "GET", .deadline_ms = tide_mono_ms() + 5000, .max_body = 10};
		char *body = NULL;
		int status = -1;

		CU_ASSERT_EQUAL(exchange(&sc, &u, &q, &status, &body, NULL), -EMSGSIZE);
		CU_ASSERT_PTR_NULL(body);
	}
}

/* A stream whose headers came but whose body stays quiet: -ETIMEDOUT with the
 * status known (etcd's quiet watch); a server that says nothing: status 0. */
static void
test_timeout_after_headers(void)
{
	static const char *const replies[] = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\none\n\r\n", NULL};

	for (int i = 0; i < 2; i++) {
		struct script sc = {.reply = replies[i], .hold_ms = 600};
		struct tide_http_url u;
		struct pieces pc = {0};
		struct tide_http_req q = {.method = "POST",
					  .target = "/v3/watch",
					  .content_type = "application/json",
					  .body = "{}",
					  .body_len = 2,
					  .deadline_ms = tide_mono_ms() + 300,
					  .sink = sink,
					  .arg = &pc};
		int status = -1;

		CU_ASSERT_EQUAL(exchange(&sc, &u, &q, &status, NULL, NULL), -ETIMEDOUT);
		CU_ASSERT_EQUAL(status, i == 0 ? 200 : 0);
		CU_ASSERT_STRING_EQUAL(pc.text, i == 0 ? "one\n" : "");
	}
}

/* A peer that reads the request and closes without a byte: a broken
 * connection (-ECONNRESET), which callers with several endpoints try elsewhere;
 * an empty 204 and a collected empty body are "". */
static void
test_closed_and_empty(void)
{
	struct script sc = {.reply = NULL};
	struct tide_http_url u;
	struct tide_http_req q = {.method = "GET", .deadline_ms = tide_mono_ms() + 5000};
	char *body = NULL;
	size_t len = 1;
	int status = -1;

	CU_ASSERT_EQUAL(exchange(&sc, &u, &q, &status, &body, &len), -ECONNRESET);
	CU_ASSERT_EQUAL(status, 0);
	sc = (struct script){.reply = "HTTP/1.1 204 No Content\r\n\r\n"};
	CU_ASSERT_EQUAL(exchange(&sc, &u, &q, &status, &body, &len), 0);
	CU_ASSERT_EQUAL(status, 204);
	CU_ASSERT_PTR_NOT_NULL_FATAL(body);
	CU_ASSERT_STRING_EQUAL(body, "");
	CU_ASSERT_EQUAL(len, 0);
	free(body);
	CU_ASSERT_EQUAL(
		tide_http_request(&u, &(struct tide_http_req){.body_len = 1}, &status, NULL, NULL),
		-EINVAL);
}

static void
test_encode(void)
{
	char *e = tide_http_encode("a b/c~d");

	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_STRING_EQUAL(e, "a%20b%2Fc~d");
	free(e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tide_http", NULL, NULL);

	CU_add_test(s, "post_and_sink", test_post_and_sink);
	CU_add_test(s, "sink_stop_and_error", test_sink_stop_and_error);
	CU_add_test(s, "bound", test_bound);
	CU_add_test(s, "timeout_after_headers", test_timeout_after_headers);
	CU_add_test(s, "closed_and_empty", test_closed_and_empty);
	CU_add_test(s, "encode", test_encode);
}

TIDE_UT_MAIN(register_tests)
