/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/lib/etcd without an etcd: endpoint lists, and every call against a
 * loopback HTTP server that answers with canned gateway replies, including
 * the ones a confused or hostile endpoint could send (errors, junk, missing
 * fields, bad base64, ranges out of order or past their limit). The same
 * calls against a real etcd are etcd_it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tide_etcd.h"
#include "tide_ut.h"

/* --- a one-request-per-connection HTTP server with canned replies -------- */

struct fake {
	int lfd;
	uint16_t port;
	pthread_t thr;
	pthread_mutex_t lock;
	/* what to answer next (copied per connection) */
	int status;
	char body[4096];
	unsigned hold_ms; /* keep the connection open this long after the body */
	/* what the last request was */
	char path[256];
	char req[4096];
	int requests;
	bool stop;
};

static void
fake_reply(struct fake *f, int status, const char *body)
{
	pthread_mutex_lock(&f->lock);
	f->status = status;
	snprintf(f->body, sizeof(f->body), "%s", body);
	f->hold_ms = 0;
	pthread_mutex_unlock(&f->lock);
}

static void
serve_one(struct fake *f, int c)
{
	char in[8192], out[8192];
	size_t n = 0;
	ssize_t r;
	char *hend = NULL;
	long clen = 0;
	int status;
	unsigned hold;

	while (n < sizeof(in) - 1 && (r = read(c, in + n, sizeof(in) - 1 - n)) > 0) {
		n += (size_t)r;
		in[n] = '\0';
		if (hend == NULL && (hend = strstr(in, "\r\n\r\n")) != NULL) {
			const char *cl = strcasestr(in, "Content-Length:");

			clen = cl != NULL && cl < hend ? atol(cl + 15) : 0;
		}
		if (hend != NULL && n >= (size_t)(hend + 4 - in) + (size_t)clen)
			break;
	}
	if (hend == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	sscanf(in, "POST %255s", f->path);
	snprintf(f->req, sizeof(f->req), "%.*s", (int)clen, hend + 4);
	f->requests++;
	status = f->status;
	hold = f->hold_ms;
	if (hold) /* a stream: no length, the body ends when the connection does */
		n = (size_t)snprintf(out, sizeof(out),
				     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
				     "Connection: close\r\n\r\n%s",
				     status, f->body);
	else
		n = (size_t)snprintf(out, sizeof(out),
				     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
				     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
				     status, strlen(f->body), f->body);
	pthread_mutex_unlock(&f->lock);
	(void)!write(c, out, n);
	if (hold)
		usleep(hold * 1000);
}

static void *
fake_main(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		int c = accept(f->lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		pthread_mutex_lock(&f->lock);
		bool stop = f->stop;
		pthread_mutex_unlock(&f->lock);
		if (stop) {
			close(c);
			return NULL;
		}
		serve_one(f, c);
		close(c);
	}
}

static int
listen_loopback(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 8) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static struct fake *
fake_start(void)
{
	struct fake *f = calloc(1, sizeof(*f));

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	pthread_mutex_init(&f->lock, NULL);
	f->lfd = listen_loopback(&f->port);
	CU_ASSERT_FATAL(f->lfd >= 0);
	f->status = 200;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&f->thr, NULL, fake_main, f), 0);
	return f;
}

static void
fake_stop(struct fake *f)
{
	int c;

	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_mutex_unlock(&f->lock);
	c = tide_ut_connect_from("127.0.0.1", "127.0.0.1", f->port, 1000);
	if (c >= 0)
		close(c);
	pthread_join(f->thr, NULL);
	close(f->lfd);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* A loopback port nothing listens on (bound, then closed). */
static uint16_t
dead_port(void)
{
	uint16_t p = 0;
	int fd = listen_loopback(&p);

	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	return p;
}

static struct tide_etcd *
open_fake(const struct fake *f)
{
	char ep[64];
	struct tide_etcd *e = NULL;

	snprintf(ep, sizeof(ep), "127.0.0.1:%u", f->port);
	CU_ASSERT_EQUAL_FATAL(tide_etcd_open(ep, 2000, &e), 0);
	return e;
}

/* --- tests ------------------------------------------------------------------ */

static void
test_parse_endpoints(void)
{
	char *u[TIDE_ETCD_MAX_ENDPOINTS];
	char many[1024] = "";
	int n;

	n = tide_etcd_parse_endpoints("etcd://10.0.0.1:2379;10.0.0.2:2380", u, 4);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(u[0], "http://10.0.0.1:2379");
	CU_ASSERT_STRING_EQUAL(u[1], "http://10.0.0.2:2380");
	free(u[0]);
	free(u[1]);
	n = tide_etcd_parse_endpoints(" http://h:1 , ;;x.example:3; ", u, 4);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(u[0], "http://h:1");
	CU_ASSERT_STRING_EQUAL(u[1], "http://x.example:3");
	free(u[0]);
	free(u[1]);
	/* Refused: empty, no port, empty host or port, non-digits, another scheme. */
	const char *bad[] = {"",     "etcd://",     " ; , ",         "h", "h:", ":1",
			     "h:1x", "https://h:1", "h:1;grpc://g:2"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(tide_etcd_parse_endpoints(bad[i], u, 4), -EINVAL);
	/* More than the caller's room. */
	for (int i = 0; i < 5; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "h%d:1;", i);
	CU_ASSERT_EQUAL(tide_etcd_parse_endpoints(many, u, 4), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_parse_endpoints(NULL, u, 4), -EINVAL);
}

static void
test_open_refuses_bad_list(void)
{
	struct tide_etcd *e = (struct tide_etcd *)1;

	CU_ASSERT_EQUAL(tide_etcd_open("nope", 0, &e), -EINVAL);
	CU_ASSERT_PTR_NULL(e);
	CU_ASSERT_EQUAL(tide_etcd_open("h:1", 0, NULL), -EINVAL);
	tide_etcd_close(NULL);
}

static void
test_unreachable(void)
{
	char ep[64];
	struct tide_etcd *e = NULL;
	struct tide_etcd_kv kv;
	int64_t id = 5;
	double t0 = tide_ut_now_s();

	snprintf(ep, sizeof(ep), "127.0.0.1:%u;127.0.0.1:%u", dead_port(), dead_port());
	TIDE_UT_OK(tide_etcd_open(ep, 2000, &e));
	CU_ASSERT_EQUAL(tide_etcd_get(e, "k", 1, &kv, NULL), -ECONNREFUSED);
	CU_ASSERT_PTR_NULL(kv.key);
	CU_ASSERT_EQUAL(tide_etcd_lease_grant(e, 5, &id), -ECONNREFUSED);
	CU_ASSERT_EQUAL(id, 0);
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "k", 1, 0, 500, NULL), -ECONNREFUSED);
	CU_ASSERT(tide_ut_now_s() - t0 < 2.0); /* refused at once, not timed out */
	tide_etcd_close(e);
}

static void
test_get_decodes_kv(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	struct tide_etcd_kv kv;
	int64_t hrev = 0;

	/* key "a/b", value "x\0y" (binary), revisions as strings and a number. */
	fake_reply(
		f, 200,
		"{\"header\":{\"revision\":\"42\"},\"kvs\":[{\"key\":\"YS9i\",\"value\":\"eAB5\","
		"\"create_revision\":\"7\",\"mod_revision\":9,\"version\":\"2\",\"lease\":"
		"\"123456789012345\"}],\"count\":\"1\"}");
	TIDE_UT_OK(tide_etcd_get(e, "a/b", 3, &kv, &hrev));
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/kv/range");
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"key\":\"YS9i\""));
	CU_ASSERT_EQUAL(hrev, 42);
	CU_ASSERT_EQUAL(kv.key_len, 3);
	CU_ASSERT_STRING_EQUAL(kv.key, "a/b");
	CU_ASSERT_EQUAL(kv.value_len, 3);
	CU_ASSERT(memcmp(kv.value, "x\0y", 3) == 0);
	CU_ASSERT_EQUAL(kv.create_revision, 7);
	CU_ASSERT_EQUAL(kv.mod_revision, 9);
	CU_ASSERT_EQUAL(kv.version, 2);
	CU_ASSERT_EQUAL(kv.lease, 123456789012345LL);
	tide_etcd_kv_clear(&kv);
	CU_ASSERT_PTR_NULL(kv.key);
	/* An empty value is left out by the gateway. */
	fake_reply(f, 200,
		   "{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"key\":\"aw==\","
		   "\"create_revision\":\"2\",\"mod_revision\":\"2\",\"version\":\"1\"}]}");
	TIDE_UT_OK(tide_etcd_get(e, "k", 1, &kv, NULL));
	CU_ASSERT_EQUAL(kv.value_len, 0);
	CU_ASSERT_STRING_EQUAL(kv.value, "");
	CU_ASSERT_EQUAL(kv.lease, 0);
	tide_etcd_kv_clear(&kv);
	/* Absent: no "kvs"; the header revision is still reported. */
	fake_reply(f, 200, "{\"header\":{\"revision\":\"8\"}}");
	CU_ASSERT_EQUAL(tide_etcd_get(e, "k", 1, &kv, &hrev), -ENOENT);
	CU_ASSERT_EQUAL(hrev, 8);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_hostile_replies(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	struct tide_etcd_kv kv;
	int64_t v;
	const char *junk[] = {
		"not json",
		"{\"kvs\":[]}",                       /* no header */
		"{\"header\":{\"revision\":\"x1\"}}", /* not an integer */
		"{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"%%%\"}]}", /* bad base64 */
		"{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"aw==\",\"value\":5}]}",
		"{\"header\":{\"revision\":\"1\"},\"kvs\":{}}",
		"[]",
		/* Numbers that are no int64 (found by etcd_fuzz: converting them was UB). */
		"{\"header\":{\"revision\":1e300}}",
		"{\"header\":{\"revision\":-1e19}}",
		"{\"header\":{\"revision\":1.5}}",
	};

	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		fake_reply(f, 200, junk[i]);
		CU_ASSERT_EQUAL(tide_etcd_get(e, "k", 1, &kv, NULL), -EBADMSG);
		CU_ASSERT_PTR_NULL(kv.key);
	}
	/* An error status is etcd's answer: -EPROTO, not retried as a transport error. */
	fake_reply(f, 500, "{\"error\":\"etcdserver: request timed out\",\"code\":14}");
	CU_ASSERT_EQUAL(tide_etcd_put(e, "k", 1, "v", 1, 0, NULL), -EPROTO);
	fake_reply(f, 503, "");
	CU_ASSERT_EQUAL(tide_etcd_put(e, "k", 1, "v", 1, 0, NULL), -EPROTO);
	/* A lease id that is not positive is junk. */
	fake_reply(f, 200, "{\"header\":{\"revision\":\"1\"},\"ID\":\"0\",\"TTL\":\"5\"}");
	CU_ASSERT_EQUAL(tide_etcd_lease_grant(e, 5, &v), -EBADMSG);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_create_and_leases(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	int64_t rev = 0, id = 0, ttl = 0;

	fake_reply(f, 200, "{\"header\":{\"revision\":\"17\"},\"succeeded\":true}");
	TIDE_UT_OK(tide_etcd_create(e, "mv", 2, "1.2.3.4:5", 9, 99, &rev));
	CU_ASSERT_EQUAL(rev, 17);
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/kv/txn");
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"target\":\"CREATE\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"create_revision\":\"0\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"request_put\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"lease\":\"99\""));
	/* A failed txn leaves "succeeded" out. */
	fake_reply(f, 200, "{\"header\":{\"revision\":\"18\"}}");
	CU_ASSERT_EQUAL(tide_etcd_create(e, "mv", 2, "x", 1, 0, NULL), -EEXIST);

	fake_reply(f, 200, "{\"header\":{\"revision\":\"1\"},\"ID\":\"7587\",\"TTL\":\"5\"}");
	TIDE_UT_OK(tide_etcd_lease_grant(e, 5, &id));
	CU_ASSERT_EQUAL(id, 7587);
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"TTL\":\"5\""));
	fake_reply(f, 200,
		   "{\"result\":{\"header\":{\"revision\":\"1\"},\"ID\":\"7587\",\"TTL\":\"4\"}}");
	TIDE_UT_OK(tide_etcd_lease_keepalive(e, id, &ttl));
	CU_ASSERT_EQUAL(ttl, 4);
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/lease/keepalive");
	/* Expired: the reply has no TTL. */
	fake_reply(f, 200, "{\"result\":{\"header\":{\"revision\":\"1\"},\"ID\":\"7587\"}}");
	CU_ASSERT_EQUAL(tide_etcd_lease_keepalive(e, id, &ttl), -ENOENT);
	/* Revoking a lease etcd no longer has is success; keepalive of it is -ENOENT. */
	fake_reply(f, 404,
		   "{\"error\":\"etcdserver: requested lease not found\",\"code\":5,"
		   "\"message\":\"etcdserver: requested lease not found\"}");
	TIDE_UT_OK(tide_etcd_lease_revoke(e, id));
	CU_ASSERT_EQUAL(tide_etcd_lease_keepalive(e, id, &ttl), -ENOENT);
	/* Delete: "deleted" left out when 0. */
	fake_reply(f, 200, "{\"header\":{\"revision\":\"20\"}}");
	CU_ASSERT_EQUAL(tide_etcd_delete(e, "mv", 2), -ENOENT);
	fake_reply(f, 200, "{\"header\":{\"revision\":\"21\"},\"deleted\":\"1\"}");
	TIDE_UT_OK(tide_etcd_delete(e, "mv", 2));
	/* Arguments. */
	CU_ASSERT_EQUAL(tide_etcd_lease_grant(e, 0, &id), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_lease_keepalive(e, 0, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_put(e, "", 0, "v", 1, 0, NULL), -EINVAL);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_failover_to_next_endpoint(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = NULL;
	char ep[64], want[64];
	int64_t rev = 0;

	snprintf(ep, sizeof(ep), "127.0.0.1:%u,127.0.0.1:%u", dead_port(), f->port);
	snprintf(want, sizeof(want), "http://127.0.0.1:%u", f->port);
	TIDE_UT_OK(tide_etcd_open(ep, 2000, &e));
	fake_reply(f, 200, "{\"header\":{\"revision\":\"5\"}}");
	TIDE_UT_OK(tide_etcd_put(e, "k", 1, "v", 1, 0, &rev));
	CU_ASSERT_EQUAL(rev, 5);
	CU_ASSERT_STRING_EQUAL(tide_etcd_endpoint(e), want);
	/* The endpoint that answered is asked first next time. */
	TIDE_UT_OK(tide_etcd_put(e, "k", 1, "v", 1, 0, NULL));
	CU_ASSERT_EQUAL(f->requests, 2);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_watch(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	int64_t rev = 0;
	double t0;

	/* created, then an event: returns at once with the event's revision. */
	fake_reply(f, 200,
		   "{\"result\":{\"header\":{\"revision\":\"9\"},\"created\":true}}\n"
		   "{\"result\":{\"header\":{\"revision\":\"10\"},\"events\":[{\"type\":\"DELETE\","
		   "\"kv\":{\"key\":\"aw==\",\"mod_revision\":\"10\"}}]}}\n");
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "k", 1, 9, 2000, &rev), 1);
	CU_ASSERT_EQUAL(rev, 10);
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/watch");
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"start_revision\":\"10\""));
	/* Junk on the stream. */
	fake_reply(f, 200, "{\"result\":{\"created\":true}}\n{oops}\n");
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "k", 1, 9, 1000, NULL), -EBADMSG);
	/* A cancel (compacted start revision) counts as a change: re-read. */
	fake_reply(f, 200,
		   "{\"result\":{\"created\":true}}\n{\"result\":{\"canceled\":true,"
		   "\"compact_revision\":\"50\"}}\n");
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "k", 1, 9, 1000, NULL), 1);
	/* created, then etcd ends the stream (shutting down): no change seen, at once. */
	fake_reply(f, 200, "{\"result\":{\"header\":{\"revision\":\"9\"},\"created\":true}}\n");
	t0 = tide_ut_now_s();
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "k", 1, 9, 1000, NULL), 0);
	CU_ASSERT(tide_ut_now_s() - t0 < 0.9);
	/* created, then silence: 0 after the timeout. */
	fake_reply(f, 200, "{\"result\":{\"header\":{\"revision\":\"9\"},\"created\":true}}\n");
	pthread_mutex_lock(&f->lock);
	f->hold_ms = 1500;
	pthread_mutex_unlock(&f->lock);
	t0 = tide_ut_now_s();
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "k", 1, 9, 300, &rev), 0);
	CU_ASSERT(tide_ut_now_s() - t0 < 1.2);
	usleep(1600 * 1000); /* let the held connection end before stopping */
	tide_etcd_close(e);
	fake_stop(f);
}

/* A reply's kvs entry for a base64 key (value "dg==", "v"). */
#define KV(k64) "{\"key\":\"" k64 "\",\"value\":\"dg==\",\"create_revision\":\"2\"}"
#define HDR     "{\"header\":{\"revision\":\"40\"}"

static int
requests(struct fake *f)
{
	int n;

	pthread_mutex_lock(&f->lock);
	n = f->requests;
	pthread_mutex_unlock(&f->lock);
	return n;
}

static void
test_range_decodes_page(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	struct tide_etcd_kv *kvs = NULL;
	size_t n = 9;
	bool more = false;
	int64_t hrev = 0;

	/* "p/a", "p/b" of [p/, p0) with limit 2 and more behind them. */
	fake_reply(f, 200,
		   HDR ",\"kvs\":[" KV("cC9h") "," KV("cC9i") "],\"more\":true,\"count\":\"3\"}");
	TIDE_UT_OK(tide_etcd_range(e, "p/", 2, "p0", 2, 2, &kvs, &n, &more, &hrev));
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/kv/range");
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"key\":\"cC8=\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"range_end\":\"cDA=\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"limit\":\"2\""));
	/* No sort order: etcd 3.4 would read the whole range for every page. */
	CU_ASSERT_PTR_NULL(strstr(f->req, "sort"));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(more);
	CU_ASSERT_EQUAL(hrev, 40);
	CU_ASSERT_STRING_EQUAL(kvs[0].key, "p/a");
	CU_ASSERT_STRING_EQUAL(kvs[1].key, "p/b");
	CU_ASSERT_STRING_EQUAL(kvs[1].value, "v");
	CU_ASSERT_EQUAL(kvs[1].create_revision, 2);
	tide_etcd_kvs_free(kvs, n);
	/* Nothing in range: no "kvs", no "more". */
	fake_reply(f, 200, HDR "}");
	more = true;
	TIDE_UT_OK(tide_etcd_range(e, "p/", 2, "p0", 2, 2, &kvs, &n, &more, &hrev));
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NULL(kvs);
	CU_ASSERT(!more);
	/* No limit: none sent; range_end NULL is just key, whatever its length says. */
	fake_reply(f, 200, HDR ",\"kvs\":[" KV("cC8=") "]}");
	TIDE_UT_OK(tide_etcd_range(e, "p/", 2, NULL, 5, 0, &kvs, &n, NULL, NULL));
	CU_ASSERT_PTR_NULL(strstr(f->req, "limit"));
	CU_ASSERT_PTR_NULL(strstr(f->req, "range_end"));
	CU_ASSERT_EQUAL(n, 1);
	tide_etcd_kvs_free(kvs, n);
	/* A huge limit travels as a string; range_end "\0" has no upper bound. */
	fake_reply(f, 200, HDR ",\"kvs\":[" KV("cC9h") "," KV("eno=") "]}");
	TIDE_UT_OK(tide_etcd_range(e, "p/", 2, "", 1, INT64_MAX, &kvs, &n, &more, NULL));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"limit\":\"9223372036854775807\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"range_end\":\"AA==\""));
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(!more);
	tide_etcd_kvs_free(kvs, n);
	tide_etcd_kvs_free(NULL, 3);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_range_hostile_replies(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	struct tide_etcd_kv *kvs = (struct tide_etcd_kv *)1, kv;
	size_t n = 9;
	bool more = true;
	int before;
	/* Each answers [p/, p0) with limit 2 (0 where said): every one is -EBADMSG. */
	static const struct {
		int64_t limit;
		const char *reply;
	} junk[] = {
		{2, HDR ",\"kvs\":{}}"},                                 /* kvs not an array */
		{2, HDR ",\"kvs\":[5]}"},                                /* not an object */
		{2, HDR ",\"kvs\":[{\"value\":\"dg==\"}]}"},             /* a kv without key */
		{2, HDR ",\"kvs\":[" KV("cC9h") ",{\"key\":\"%%%\"}]}"}, /* bad base64, 2nd */
		{2, HDR ",\"kvs\":[" KV("cC9h") "," KV("cC9i") "],\"more\":\"true\"}"},
		{2, HDR ",\"kvs\":[" KV("cC9h") "," KV("cC9i") "],\"more\":1}"},
		{0, HDR ",\"kvs\":[" KV("cC9h") "],\"more\":true}"},  /* more with no limit */
		{2, HDR ",\"kvs\":[" KV("cC9h") "],\"more\":true}"},  /* more short of it */
		{1, HDR ",\"kvs\":[" KV("cC9h") "," KV("cC9i") "]}"}, /* past the limit */
		{2, HDR ",\"kvs\":[" KV("cC4=") "]}"},                /* "p." below the range */
		{2, HDR ",\"kvs\":[" KV("cDA=") "]}"},                /* "p0" is its end */
		{2, HDR ",\"kvs\":[" KV("cC9i") "," KV("cC9h") "]}"}, /* out of order */
		{2, HDR ",\"kvs\":[" KV("cC9h") "," KV("cC9h") "]}"}, /* the same key twice */
		{2, "{\"kvs\":[]}"},                                  /* no header */
		{2, "[]"},
	};

	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		fake_reply(f, 200, junk[i].reply);
		CU_ASSERT_EQUAL(
			tide_etcd_range(e, "p/", 2, "p0", 2, junk[i].limit, &kvs, &n, &more, NULL),
			-EBADMSG);
		CU_ASSERT_PTR_NULL(kvs);
		CU_ASSERT_EQUAL(n, 0);
		CU_ASSERT(!more);
	}
	/* A get is a range of one key: another key, or the key twice, is junk. */
	fake_reply(f, 200, HDR ",\"kvs\":[" KV("cC9h") "]}");
	CU_ASSERT_EQUAL(tide_etcd_get(e, "p/b", 3, &kv, NULL), -EBADMSG);
	fake_reply(f, 200, HDR ",\"kvs\":[" KV("cC9i") "," KV("cC9i") "]}");
	CU_ASSERT_EQUAL(tide_etcd_get(e, "p/b", 3, &kv, NULL), -EBADMSG);
	CU_ASSERT_PTR_NULL(kv.key);
	/* Arguments: refused before any request. */
	before = requests(f);
	CU_ASSERT_EQUAL(tide_etcd_range(NULL, "p", 1, NULL, 0, 0, &kvs, &n, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_range(e, NULL, 1, NULL, 0, 0, &kvs, &n, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_range(e, "p", 0, NULL, 0, 0, &kvs, &n, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_range(e, "p", 1, NULL, 0, -1, &kvs, &n, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_range(e, "p", 1, NULL, 0, 0, NULL, &n, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_range(e, "p", 1, NULL, 0, 0, &kvs, NULL, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_get(e, "p", 1, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(requests(f), before);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_prefix_end(void)
{
	static const struct {
		const char *prefix, *end;
		size_t prefix_len, end_len;
	} cases[] = {
		{"a/", "a0", 2, 2},
		{"a\xff", "b", 2, 1}, /* trailing 0xff dropped */
		{"a\xff\xff", "b", 3, 1},
		{"a\xfe\xff", "a\xff", 3, 2}, /* 0xfe + 1 = 0xff stays */
		{"a\x00", "a\x01", 2, 2},
		{"\x00", "\x01", 1, 1},
		{"\xff", "\x00", 1, 1}, /* only 0xff: "\0", no upper bound */
		{"\xff\xff\xff", "\x00", 3, 1},
	};
	char out[8], in_place[4] = "ab\xff";

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(out, '#', sizeof(out));
		CU_ASSERT_EQUAL(tide_etcd_prefix_end(cases[i].prefix, cases[i].prefix_len, out),
				cases[i].end_len);
		CU_ASSERT(memcmp(out, cases[i].end, cases[i].end_len) == 0);
		/* Nothing written past the end's length (out need hold prefix_len only). */
		CU_ASSERT_EQUAL(out[cases[i].prefix_len], '#');
	}
	/* An empty prefix: nothing written. */
	memset(out, '#', sizeof(out));
	CU_ASSERT_EQUAL(tide_etcd_prefix_end("", 0, out), 0);
	CU_ASSERT_EQUAL(out[0], '#');
	/* In place. */
	CU_ASSERT_EQUAL(tide_etcd_prefix_end(in_place, 3, in_place), 2);
	CU_ASSERT(memcmp(in_place, "ac", 2) == 0);
}

static void
test_delete_range(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	int64_t deleted = -1;
	int before;
	const char *junk[] = {
		HDR ",\"deleted\":\"x\"}", HDR ",\"deleted\":\"-1\"}", HDR ",\"deleted\":true}",
		"{\"deleted\":\"3\"}", /* no header */
	};

	fake_reply(f, 200, HDR ",\"deleted\":\"300\"}");
	TIDE_UT_OK(tide_etcd_delete_range(e, "p/", 2, "p0", 2, &deleted));
	CU_ASSERT_EQUAL(deleted, 300);
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/kv/deleterange");
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"key\":\"cC8=\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"range_end\":\"cDA=\""));
	/* None: "deleted" left out. Just key: no range_end. */
	fake_reply(f, 200, HDR "}");
	TIDE_UT_OK(tide_etcd_delete_range(e, "p/", 2, NULL, 0, &deleted));
	CU_ASSERT_EQUAL(deleted, 0);
	CU_ASSERT_PTR_NULL(strstr(f->req, "range_end"));
	TIDE_UT_OK(tide_etcd_delete_range(e, "p/", 2, "p0", 2, NULL));
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		fake_reply(f, 200, junk[i]);
		deleted = -1;
		CU_ASSERT_EQUAL(tide_etcd_delete_range(e, "p/", 2, "p0", 2, &deleted), -EBADMSG);
		CU_ASSERT_EQUAL(deleted, 0);
	}
	fake_reply(f, 500, "{\"error\":\"etcdserver: request timed out\",\"code\":14}");
	CU_ASSERT_EQUAL(tide_etcd_delete_range(e, "p/", 2, "p0", 2, &deleted), -EPROTO);
	before = requests(f);
	CU_ASSERT_EQUAL(tide_etcd_delete_range(e, NULL, 2, NULL, 0, &deleted), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_delete_range(e, "p", 0, NULL, 0, &deleted), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_delete_range(NULL, "p", 1, NULL, 0, &deleted), -EINVAL);
	CU_ASSERT_EQUAL(requests(f), before);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_txn_if_created(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	struct tide_etcd_op ops[TIDE_ETCD_TXN_MAX_OPS + 1] = {
		{.type = TIDE_ETCD_OP_PUT,
		 .key = "s/a",
		 .key_len = 3,
		 .value = "1",
		 .value_len = 1,
		 .lease = 5},
		{.type = TIDE_ETCD_OP_DELETE,
		 .key = "s/o/",
		 .key_len = 4,
		 .range_end = "s/o0",
		 .range_end_len = 4},
		{.type = TIDE_ETCD_OP_PUT, .key = "s/b", .key_len = 3}, /* empty value */
	};
	int64_t rev = -1;
	int before;
	const char *put, *del;

	fake_reply(f, 200,
		   "{\"header\":{\"revision\":\"31\"},\"succeeded\":true,\"responses\":[]}");
	TIDE_UT_OK(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, &rev));
	CU_ASSERT_EQUAL(rev, 31);
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/kv/txn");
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req,
				      "\"compare\":[{\"key\":\"bGVhZA==\",\"target\":\"CREATE\","
				      "\"result\":\"EQUAL\",\"create_revision\":\"17\"}]"));
	put = strstr(f->req,
		     "{\"request_put\":{\"key\":\"cy9h\",\"value\":\"MQ==\",\"lease\":\"5\"}}");
	del = strstr(
		f->req,
		"{\"request_delete_range\":{\"key\":\"cy9vLw==\",\"range_end\":\"cy9vMA==\"}}");
	CU_ASSERT(put != NULL && del != NULL && put < del); /* in order */
	CU_ASSERT_PTR_NOT_NULL(
		strstr(f->req, "{\"request_put\":{\"key\":\"cy9i\",\"value\":\"\"}}"));
	/* The comparison failed: "succeeded" left out, or false; rev untouched. */
	rev = -1;
	fake_reply(f, 200, "{\"header\":{\"revision\":\"32\"}}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, &rev), -ESTALE);
	CU_ASSERT_EQUAL(rev, -1);
	fake_reply(f, 200, "{\"header\":{\"revision\":\"32\"},\"succeeded\":false}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, NULL), -ESTALE);
	/* Junk: "succeeded" not a bool, no header. */
	fake_reply(f, 200, "{\"header\":{\"revision\":\"32\"},\"succeeded\":\"true\"}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, NULL), -EBADMSG);
	fake_reply(f, 200, "{\"header\":{\"revision\":\"32\"},\"succeeded\":1}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, NULL), -EBADMSG);
	fake_reply(f, 200, "{\"succeeded\":true}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, NULL), -EBADMSG);
	/* etcd's refusals, as etcd 3.4 words them. */
	fake_reply(f, 404,
		   "{\"error\":\"etcdserver: requested lease not found\",\"message\":\"etcdserver: "
		   "requested lease not found\",\"code\":5}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, NULL), -ENOENT);
	fake_reply(f, 400,
		   "{\"error\":\"etcdserver: duplicate key given in txn request\",\"message\":"
		   "\"etcdserver: duplicate key given in txn request\",\"code\":3}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, NULL), -EINVAL);
	fake_reply(f, 500, "{\"error\":\"etcdserver: request timed out\",\"code\":14}");
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 3, NULL), -EPROTO);
	/* The most operations: all sent. */
	for (size_t i = 3; i < TIDE_ETCD_TXN_MAX_OPS + 1; i++)
		ops[i] = (struct tide_etcd_op){
			.type = TIDE_ETCD_OP_DELETE, .key = "k", .key_len = 1};
	fake_reply(f, 200, "{\"header\":{\"revision\":\"33\"},\"succeeded\":true}");
	TIDE_UT_OK(tide_etcd_txn_if_created(e, "lead", 4, 0, ops, TIDE_ETCD_TXN_MAX_OPS, NULL));
	CU_ASSERT_PTR_NOT_NULL(strstr(f->req, "\"create_revision\":\"0\""));
	/* Arguments: refused before any request. */
	before = requests(f);
	CU_ASSERT_EQUAL(
		tide_etcd_txn_if_created(e, "lead", 4, 17, ops, TIDE_ETCD_TXN_MAX_OPS + 1, NULL),
		-EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, ops, 0, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, NULL, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, NULL, 4, 17, ops, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 0, 17, ops, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, -1, ops, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(NULL, "lead", 4, 17, ops, 1, NULL), -EINVAL);
	const struct tide_etcd_op bad_ops[] = {
		{.type = TIDE_ETCD_OP_PUT, .key = NULL, .key_len = 1},
		{.type = TIDE_ETCD_OP_PUT, .key = "k", .key_len = 0},
		{.type = TIDE_ETCD_OP_PUT, .key = "k", .key_len = 1, .value = NULL, .value_len = 3},
		{.type = TIDE_ETCD_OP_PUT, .key = "k", .key_len = 1, .lease = -1},
		{.type = (enum tide_etcd_op_type)7, .key = "k", .key_len = 1},
		{.type = TIDE_ETCD_OP_DELETE, .key = NULL, .key_len = 0},
	};
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		/* The bad one last: every operation is checked. */
		struct tide_etcd_op two[2] = {ops[0], bad_ops[i]};

		CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, "lead", 4, 17, two, 2, NULL), -EINVAL);
	}
	CU_ASSERT_EQUAL(tide_etcd_create(e, "lead", 4, "v", 1, -5, NULL), -EINVAL);
	CU_ASSERT_EQUAL(requests(f), before);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
test_compact(void)
{
	struct fake *f = fake_start();
	struct tide_etcd *e = open_fake(f);
	int before;

	fake_reply(f, 200, "{\"header\":{\"revision\":\"50\"}}");
	TIDE_UT_OK(tide_etcd_compact(e, 42));
	CU_ASSERT_STRING_EQUAL(f->path, "/v3/kv/compaction");
	CU_ASSERT_STRING_EQUAL(f->req, "{\"revision\":\"42\"}");
	/* Compacted already (etcd 3.4's answer, HTTP 400, gRPC code 11): done. */
	fake_reply(f, 400,
		   "{\"error\":\"etcdserver: mvcc: required revision has been compacted\","
		   "\"message\":\"etcdserver: mvcc: required revision has been compacted\","
		   "\"code\":11}");
	TIDE_UT_OK(tide_etcd_compact(e, 42));
	/* Past the head (same status and code, another message): the caller's mistake. */
	fake_reply(f, 400,
		   "{\"error\":\"etcdserver: mvcc: required revision is a future revision\","
		   "\"message\":\"etcdserver: mvcc: required revision is a future revision\","
		   "\"code\":11}");
	CU_ASSERT_EQUAL(tide_etcd_compact(e, 4200), -EINVAL);
	/* Other errors and junk. */
	fake_reply(f, 400, "{\"error\":\"etcdserver: something else\",\"code\":11}");
	CU_ASSERT_EQUAL(tide_etcd_compact(e, 42), -EPROTO);
	fake_reply(f, 200, "[]");
	CU_ASSERT_EQUAL(tide_etcd_compact(e, 42), -EBADMSG);
	fake_reply(f, 200, "{}");
	CU_ASSERT_EQUAL(tide_etcd_compact(e, 42), -EBADMSG);
	before = requests(f);
	CU_ASSERT_EQUAL(tide_etcd_compact(e, 0), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_compact(e, -3), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_compact(NULL, 3), -EINVAL);
	CU_ASSERT_EQUAL(requests(f), before);
	tide_etcd_close(e);
	fake_stop(f);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("etcd", NULL, NULL);

	CU_add_test(s, "parse_endpoints", test_parse_endpoints);
	CU_add_test(s, "open_refuses_bad_list", test_open_refuses_bad_list);
	CU_add_test(s, "unreachable", test_unreachable);
	CU_add_test(s, "get_decodes_kv", test_get_decodes_kv);
	CU_add_test(s, "hostile_replies", test_hostile_replies);
	CU_add_test(s, "create_and_leases", test_create_and_leases);
	CU_add_test(s, "failover_to_next_endpoint", test_failover_to_next_endpoint);
	CU_add_test(s, "watch", test_watch);
	CU_add_test(s, "range_decodes_page", test_range_decodes_page);
	CU_add_test(s, "range_hostile_replies", test_range_hostile_replies);
	CU_add_test(s, "prefix_end", test_prefix_end);
	CU_add_test(s, "delete_range", test_delete_range);
	CU_add_test(s, "txn_if_created", test_txn_if_created);
	CU_add_test(s, "compact", test_compact);
}

TIDE_UT_MAIN(register_tests)
