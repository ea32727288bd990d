/* SPDX-License-Identifier: Apache-2.0 */
/* Handshake daemon and client: round trips, legacy frames, hostile clients and servers. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_ut.h"

static struct te_hs_daemon *dmn;
static uint16_t dport;
static unsigned calls;

/* Echo "<type>|<json>"; type 2 with body "fail" refuses. */
static int
echo(void *arg, uint8_t type, const char *json, size_t len, char **reply, size_t *reply_len)
{
	char *r;

	(void)arg;
	__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
	if (strlen(json) != len)
		return -EINVAL;
	if (strcmp(json, "fail") == 0)
		return -EPERM;
	if (asprintf(&r, "%u|%s", (unsigned)type, json) < 0)
		return -ENOMEM;
	*reply = r;
	*reply_len = strlen(r);
	return 0;
}

static int
suite_init(void)
{
	if (te_hs_daemon_start("127.0.0.1", 0, echo, NULL, &dmn) != 0)
		return -1;
	te_hs_daemon_set_timeout(dmn, 400);
	dport = te_hs_daemon_port(dmn);
	return dport != 0 ? 0 : -1;
}

static int
suite_fini(void)
{
	te_hs_daemon_stop(dmn);
	return 0;
}

static int
raw_connect(uint16_t port)
{
	int fd = -1;

	if (meta_sock_connect("127.0.0.1", port, meta_deadline(1000), &fd) != 0)
		return -1;
	return fd;
}

/* Wait until the peer closes fd (EOF or reset); returns ms waited, or -1 on timeout. */
static int64_t
wait_closed(int fd, int max_ms)
{
	int64_t t0 = meta_now_ms();
	char b[256];

	for (;;) {
		ssize_t n = meta_sock_read_some(fd, b, sizeof(b), t0 + max_ms);

		if (n == -ETIMEDOUT)
			return -1;
		if (n <= 0)
			return meta_now_ms() - t0;
	}
}

/* The daemon still answers a normal request. */
static void
assert_alive(void)
{
	char *r = NULL;
	size_t rl = 0;

	TIDE_UT_OK(te_hs_request("127.0.0.1", dport, TE_HS_PROBE, "{}", 2, 1000, &r, &rl));
	CU_ASSERT_TRUE(r != NULL && strcmp(r, "3|{}") == 0);
	free(r);
}

static void
test_roundtrip(void)
{
	for (uint8_t t = TE_HS_CONNECTION; t <= TE_HS_PROBE; t++) {
		char req[64], want[80], *r = NULL;
		size_t rl = 0;

		snprintf(req, sizeof(req), "{\"t\":%u}", (unsigned)t);
		snprintf(want, sizeof(want), "%u|%s", (unsigned)t, req);
		TIDE_UT_OK(te_hs_request("127.0.0.1", dport, t, req, strlen(req), 1000, &r, &rl));
		CU_ASSERT_TRUE(r != NULL && strcmp(r, want) == 0 && rl == strlen(want));
		free(r);
	}
	/* Type-only frame: empty JSON. */
	{
		char *r = NULL;
		size_t rl = 0;

		TIDE_UT_OK(te_hs_request("127.0.0.1", dport, TE_HS_NOTIFY, NULL, 0, 1000, &r, &rl));
		CU_ASSERT_TRUE(r != NULL && strcmp(r, "2|") == 0);
		free(r);
	}
	/* Handler refusal: closed without a reply. */
	{
		char *r = NULL;
		size_t rl = 0;

		CU_ASSERT_EQUAL(
			te_hs_request("127.0.0.1", dport, TE_HS_NOTIFY, "fail", 4, 1000, &r, &rl),
			-EPROTO);
		CU_ASSERT_PTR_NULL(r);
	}
	/* Near-limit request (1 MiB - 1 bytes of JSON). */
	{
		size_t n = TE_HS_MAX_LEN - 1;
		char *big = malloc(n + 1), *r = NULL;
		size_t rl = 0;

		memset(big, 'x', n);
		big[n] = '\0';
		big[0] = 'a';
		/* The echo reply would exceed the limit: the daemon drops it. */
		CU_ASSERT_EQUAL(
			te_hs_request("127.0.0.1", dport, TE_HS_METADATA, big, n, 2000, &r, &rl),
			-EPROTO);
		CU_ASSERT_EQUAL(te_hs_request("127.0.0.1", dport, TE_HS_METADATA, big, n + 1, 2000,
					      &r, &rl),
				-EMSGSIZE);
		n -= 10;
		TIDE_UT_OK(
			te_hs_request("127.0.0.1", dport, TE_HS_METADATA, big, n, 2000, &r, &rl));
		CU_ASSERT_EQUAL(rl, n + 2);
		free(r);
		free(big);
	}
	CU_ASSERT_EQUAL(te_hs_request("127.0.0.1", dport, 4, "{}", 2, 1000, NULL, NULL), -EINVAL);
}

static void
test_legacy(void)
{
	const char *j = "{\"name\":\"legacy\"}";
	uint8_t hdr[8], *rep;
	uint64_t rl;
	int fd = raw_connect(dport);

	CU_ASSERT_FATAL(fd >= 0);
	tide_ut_put_le64(hdr, strlen(j));
	TIDE_UT_OK(meta_sock_write_all(fd, hdr, 8, meta_deadline(1000)));
	TIDE_UT_OK(meta_sock_write_all(fd, j, strlen(j), meta_deadline(1000)));
	TIDE_UT_OK(meta_sock_read_full(fd, hdr, 8, meta_deadline(1000)));
	rl = tide_ut_get_le64(hdr);
	CU_ASSERT_EQUAL_FATAL(rl, strlen(j) + 2); /* untyped reply: "1|" + json */
	rep = calloc(1, rl + 1);
	TIDE_UT_OK(meta_sock_read_full(fd, rep, rl, meta_deadline(1000)));
	CU_ASSERT_EQUAL(memcmp(rep, "1|{\"name\":\"legacy\"}", rl), 0);
	/* The daemon shut its write side: EOF follows. */
	CU_ASSERT_TRUE(wait_closed(fd, 1000) >= 0);
	free(rep);
	close(fd);
}

static void
hostile_len(uint64_t len, bool send_type)
{
	uint8_t hdr[9];
	int fd = raw_connect(dport);
	int64_t ms;

	CU_ASSERT_FATAL(fd >= 0);
	tide_ut_put_le64(hdr, len);
	hdr[8] = TE_HS_METADATA;
	TIDE_UT_OK(meta_sock_write_all(fd, hdr, send_type ? 9 : 8, meta_deadline(1000)));
	/* Refused on the length alone, well before the 400 ms timeout. */
	ms = wait_closed(fd, 2000);
	CU_ASSERT_TRUE(ms >= 0 && ms < 300);
	close(fd);
	assert_alive();
}

static void
test_hostile_lengths(void)
{
	hostile_len(0, false);
	hostile_len(TE_HS_MAX_LEN + 1, true);
	hostile_len(UINT64_MAX, true);
	hostile_len(UINT64_C(1) << 63, false);
}

static void
test_short_frame(void)
{
	uint8_t buf[9 + 10];
	int fd = raw_connect(dport);

	CU_ASSERT_FATAL(fd >= 0);
	tide_ut_put_le64(buf, 100);
	buf[8] = TE_HS_METADATA;
	memset(buf + 9, '{', 10);
	TIDE_UT_OK(meta_sock_write_all(fd, buf, sizeof(buf), meta_deadline(1000)));
	close(fd); /* 90 bytes short */
	/* Half a length field, then close. */
	fd = raw_connect(dport);
	CU_ASSERT_FATAL(fd >= 0);
	TIDE_UT_OK(meta_sock_write_all(fd, buf, 4, meta_deadline(1000)));
	close(fd);
	/* Connect and close at once. */
	fd = raw_connect(dport);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	assert_alive();
}

static void
test_silent_and_slowloris(void)
{
	int silent = raw_connect(dport), slow = raw_connect(dport);
	int64_t t0 = meta_now_ms(), ms;
	uint8_t hdr[9];

	CU_ASSERT_FATAL(silent >= 0 && slow >= 0);
	/* Other clients are served while the silent ones hold connections. */
	assert_alive();
	CU_ASSERT_TRUE(meta_now_ms() - t0 < 300);
	tide_ut_put_le64(hdr, 50);
	hdr[8] = TE_HS_METADATA;
	/* Slowloris: one byte every 50 ms never completes within the 400 ms budget. */
	for (int i = 0; i < 9; i++) {
		if (meta_sock_write_all(slow, hdr + i, 1, meta_deadline(100)) != 0)
			break;
		usleep(50000);
	}
	ms = wait_closed(silent, 2000);
	CU_ASSERT_TRUE(ms >= 0);
	CU_ASSERT_TRUE(meta_now_ms() - t0 >= 350 && meta_now_ms() - t0 < 2000);
	CU_ASSERT_TRUE(wait_closed(slow, 2000) >= 0);
	CU_ASSERT_TRUE(meta_now_ms() - t0 < 2500);
	close(silent);
	close(slow);
	assert_alive();
}

/* Random garbage (random lengths, random bytes, some valid-looking headers) then close. */
static void
test_garbage(void)
{
	uint64_t seed = 99;
	uint8_t buf[600];

	for (int c = 0; c < 40; c++) {
		int fd = raw_connect(dport);
		size_t n;

		CU_ASSERT_FATAL(fd >= 0);
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		n = 1 + (size_t)(seed >> 33) % sizeof(buf);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			buf[i] = (uint8_t)(seed >> 56);
		}
		if (c % 4 == 0 && n >= 9) {
			tide_ut_put_le64(buf,
					 n - 8 + (uint64_t)(c % 8)); /* plausible, maybe long */
			buf[8] = (uint8_t)(c % 5);
		}
		/* The daemon may close first (bad length): ignore write errors. */
		(void)meta_sock_write_all(fd, buf, n, meta_deadline(200));
		close(fd);
	}
	assert_alive();
}

static void
test_eviction(void)
{
	int fds[80];

	for (int i = 0; i < 80; i++) {
		fds[i] = raw_connect(dport);
		CU_ASSERT(fds[i] >= 0);
	}
	/* 80 idle connections exceed the 64-slot table: the oldest are evicted, a new
	 * request is still answered. */
	assert_alive();
	CU_ASSERT_TRUE(wait_closed(fds[0], 1000) >= 0);
	for (int i = 0; i < 80; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	assert_alive();
}

/* A one-shot raw server: reads the 9-byte header and the body, sends `out`, closes. */
struct fake {
	int lfd;
	uint16_t port;
	const uint8_t *out;
	size_t outlen;
	bool silent;
	pthread_t thr;
};

static void *
fake_main(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);
	uint8_t hdr[9], junk[256];
	uint64_t left;

	if (fd < 0)
		return NULL;
	if (meta_sock_read_full(fd, hdr, 9, meta_deadline(2000)) == 0) {
		left = tide_ut_get_le64(hdr) - 1;
		while (left > 0) {
			ssize_t n = recv(fd, junk, left < sizeof(junk) ? left : sizeof(junk), 0);

			if (n <= 0)
				break;
			left -= (uint64_t)n;
		}
		if (f->silent)
			wait_closed(fd, 3000);
		else if (f->outlen > 0 && send(fd, f->out, f->outlen, MSG_NOSIGNAL) < 0)
			perror("fake send");
	}
	close(fd);
	return NULL;
}

static void
fake_start(struct fake *f, const uint8_t *out, size_t outlen, bool silent)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t sl = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(listen(f->lfd, 4) == 0);
	getsockname(f->lfd, (struct sockaddr *)&a, &sl);
	f->port = ntohs(a.sin_port);
	f->out = out;
	f->outlen = outlen;
	f->silent = silent;
	pthread_create(&f->thr, NULL, fake_main, f);
}

static void
fake_join(struct fake *f)
{
	pthread_join(f->thr, NULL);
	close(f->lfd);
}

static int
fake_request(const uint8_t *out, size_t outlen, bool silent, int timeout_ms)
{
	struct fake f;
	char *r = NULL;
	size_t rl = 0;
	int rc;

	fake_start(&f, out, outlen, silent);
	rc = te_hs_request("127.0.0.1", f.port, TE_HS_METADATA, "{}", 2, timeout_ms, &r, &rl);
	fake_join(&f);
	if (rc == 0)
		CU_ASSERT_PTR_NOT_NULL(r);
	free(r);
	return rc;
}

static void
test_client_hostile_server(void)
{
	uint8_t good[12] = {3, 0, 0, 0, 0, 0, 0, 0, TE_HS_METADATA, '{', '}'};
	uint8_t wrongtype[11] = {3, 0, 0, 0, 0, 0, 0, 0, TE_HS_PROBE, '{', '}'};
	uint8_t zero[9] = {0, 0, 0, 0, 0, 0, 0, 0, TE_HS_METADATA};
	uint8_t huge[9] = {1, 0, 0x10, 0, 0, 0, 0, 0, TE_HS_METADATA}; /* 2^20 + 1 */
	uint8_t shortb[11] = {9, 0, 0, 0, 0, 0, 0, 0, TE_HS_METADATA, '{', '}'};
	int64_t t0;

	TIDE_UT_OK(fake_request(good, 11, false, 1000));
	CU_ASSERT_EQUAL(fake_request(wrongtype, sizeof(wrongtype), false, 1000), -EPROTO);
	CU_ASSERT_EQUAL(fake_request(zero, sizeof(zero), false, 1000), -EPROTO);
	CU_ASSERT_EQUAL(fake_request(huge, sizeof(huge), false, 1000), -EPROTO);
	CU_ASSERT_EQUAL(fake_request(shortb, sizeof(shortb), false, 1000), -EPROTO);
	CU_ASSERT_EQUAL(fake_request(good, 5, false, 1000), -EPROTO);
	CU_ASSERT_EQUAL(fake_request(NULL, 0, false, 1000), -EPROTO);
	t0 = meta_now_ms();
	CU_ASSERT_EQUAL(fake_request(NULL, 0, true, 300), -ETIMEDOUT);
	CU_ASSERT_TRUE(meta_now_ms() - t0 >= 280);
}

static void
test_refused_and_bind(void)
{
	struct te_hs_daemon *d2 = NULL;
	uint16_t p;
	char *r = NULL;
	size_t rl;

	/* Second daemon on the same port. */
	CU_ASSERT_EQUAL(te_hs_daemon_start("127.0.0.1", dport, echo, NULL, &d2), -EADDRINUSE);
	CU_ASSERT_EQUAL(te_hs_daemon_start("not-an-ip", 0, echo, NULL, &d2), -EINVAL);
	CU_ASSERT_EQUAL(te_hs_daemon_start(NULL, 0, NULL, NULL, &d2), -EINVAL);
	TIDE_UT_OK(te_hs_daemon_start(NULL, 0, echo, NULL, &d2));
	p = te_hs_daemon_port(d2);
	TIDE_UT_OK(te_hs_request("127.0.0.1", p, TE_HS_PROBE, "x", 1, 1000, &r, &rl));
	free(r);
	te_hs_daemon_stop(d2);
	CU_ASSERT_EQUAL(te_hs_request("127.0.0.1", p, TE_HS_PROBE, "x", 1, 1000, &r, &rl),
			-ECONNREFUSED);
	te_hs_daemon_stop(NULL);
}

static void
test_allowlist(void)
{
	struct te_hs_daemon *d2 = NULL;
	struct tide_cidr_list allow;
	uint8_t frame[9] = {0};
	unsigned before = __atomic_load_n(&calls, __ATOMIC_RELAXED);
	char *r = NULL;
	size_t rl;
	int64_t waited;
	uint16_t p;
	int fd;

	/* 127.0.0.2 is local on Linux (all of 127/8): a second loopback source. */
	TIDE_UT_OK(tide_cidr_parse("127.0.0.1/32", &allow, NULL, 0));
	TIDE_UT_OK(te_hs_daemon_start("127.0.0.1", 0, echo, NULL, &d2));
	te_hs_daemon_set_allow(d2, &allow);
	p = te_hs_daemon_port(d2);
	CU_ASSERT_EQUAL(te_hs_daemon_refused(d2), 0);

	/* From outside: closed at once, a valid request never reaches the handler. */
	fd = tide_ut_connect_from("127.0.0.2", "127.0.0.1", p, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	tide_ut_put_le64(frame, 1);
	frame[8] = TE_HS_PROBE;
	(void)!write(fd, frame, sizeof(frame));
	waited = wait_closed(fd, 2000);
	CU_ASSERT_TRUE(waited >= 0 && waited < 1000);
	close(fd);
	CU_ASSERT_EQUAL(te_hs_daemon_refused(d2), 1);
	CU_ASSERT_EQUAL(__atomic_load_n(&calls, __ATOMIC_RELAXED), before);

	/* From inside: served. */
	fd = tide_ut_connect_from("127.0.0.1", "127.0.0.1", p, 2000);
	CU_ASSERT(fd >= 0);
	close(fd);
	TIDE_UT_OK(te_hs_request("127.0.0.1", p, TE_HS_PROBE, "x", 1, 1000, &r, &rl));
	CU_ASSERT_TRUE(r != NULL && strcmp(r, "3|x") == 0);
	free(r);
	CU_ASSERT_EQUAL(te_hs_daemon_refused(d2), 1);

	/* NULL lifts the list again. */
	te_hs_daemon_set_allow(d2, NULL);
	fd = tide_ut_connect_from("127.0.0.2", "127.0.0.1", p, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	(void)!write(fd, frame, sizeof(frame));
	{
		uint8_t hdr[9];

		CU_ASSERT_EQUAL(meta_sock_read_full(fd, hdr, sizeof(hdr), meta_deadline(1000)), 0);
		CU_ASSERT_EQUAL(tide_ut_get_le64(hdr), 3); /* type byte + "3|" */
	}
	close(fd);
	CU_ASSERT_EQUAL(te_hs_daemon_refused(d2), 1);
	te_hs_daemon_stop(d2);
}

static void
test_prompt_stop(void)
{
	struct te_hs_daemon *d2 = NULL;
	int64_t t0;
	int fd;

	TIDE_UT_OK(te_hs_daemon_start("127.0.0.1", 0, echo, NULL, &d2));
	te_hs_daemon_set_timeout(d2, 10000);
	fd = raw_connect(te_hs_daemon_port(d2));
	CU_ASSERT(fd >= 0);
	usleep(50000); /* let the daemon accept it */
	t0 = meta_now_ms();
	te_hs_daemon_stop(d2);
	CU_ASSERT_TRUE(meta_now_ms() - t0 < 300);
	CU_ASSERT_TRUE(wait_closed(fd, 1000) >= 0); /* cut */
	close(fd);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_handshake", suite_init, suite_fini);

	CU_add_test(s, "roundtrip_each_type", test_roundtrip);
	CU_add_test(s, "legacy_untyped", test_legacy);
	CU_add_test(s, "hostile_lengths", test_hostile_lengths);
	CU_add_test(s, "short_frames", test_short_frame);
	CU_add_test(s, "silent_and_slowloris", test_silent_and_slowloris);
	CU_add_test(s, "random_garbage", test_garbage);
	CU_add_test(s, "eviction", test_eviction);
	CU_add_test(s, "client_vs_hostile_server", test_client_hostile_server);
	CU_add_test(s, "refused_and_bind", test_refused_and_bind);
	CU_add_test(s, "prompt_stop", test_prompt_stop);
	CU_add_test(s, "allowlist", test_allowlist);
}

TIDE_UT_MAIN(register_tests)
