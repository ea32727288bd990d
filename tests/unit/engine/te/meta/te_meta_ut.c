/* SPDX-License-Identifier: Apache-2.0 */
/* Metadata layer: P2PHANDSHAKE between two instances, HTTP mode against the in-test server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_te.h"
#include "tide_ut.h"
#include "ut_http_srv.h"

static char err[256];

static struct te_desc *
mk(const char *name, uint64_t instance, uint64_t base)
{
	struct te_desc *d = calloc(1, sizeof(*d));

	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->protocol, sizeof(d->protocol), "tcp");
	snprintf(d->timestamp, sizeof(d->timestamp), "2026-12-02 12:00:00");
	d->tcp_data_port = 40000;
	d->tcp_proto_version = TE_PROTO_NATIVE;
	d->instance = instance;
	d->nbufs = 2;
	d->bufs = calloc(2, sizeof(*d->bufs));
	d->bufs[0] = (struct te_desc_buf){"buf0", base, 1 << 20};
	d->bufs[1] = (struct te_desc_buf){"buf1", base + (2 << 20), 4096};
	return d;
}

/* Whether srv holds key. */
static bool
kv_has(struct ut_http_srv *srv, const char *key)
{
	char *v = ut_http_srv_kv_get(srv, key);
	bool has = v != NULL;

	free(v);
	return has;
}

/* A P2PHANDSHAKE metadata, its daemon on 127.0.0.1 (an ephemeral port); returns the port. */
static uint16_t
open_p2p(struct te_meta **m)
{
	TIDE_UT_OK(te_meta_open("P2PHANDSHAKE", "127.0.0.1", 0, 1000, m, err, sizeof(err)));
	return te_meta_rpc_port(*m);
}

static void
test_p2p(void)
{
	struct te_meta *a = NULL, *b = NULL;
	struct te_desc *da, *db, *got = NULL;
	char na[64], nb[64], host[64];

	open_p2p(&a);
	open_p2p(&b);
	CU_ASSERT_TRUE(te_meta_is_p2p(a));
	snprintf(na, sizeof(na), "127.0.0.1:%u", te_meta_rpc_port(a));
	snprintf(nb, sizeof(nb), "127.0.0.1:%u", te_meta_rpc_port(b));
	/* Nothing published yet. */
	CU_ASSERT_EQUAL(te_meta_fetch(a, nb, &got, host, sizeof(host), err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not published"));
	da = mk(na, 0x1111, 0x10000000);
	db = mk(nb, 0x2222, 0x20000000);
	/* Invalid descriptors are refused and leave nothing served. */
	da->bufs[1].addr = da->bufs[0].addr + 10; /* overlap */
	CU_ASSERT_EQUAL(te_meta_publish(a, da, NULL), -EINVAL);
	da->bufs[1].addr = da->bufs[0].addr + (2 << 20);
	da->tcp_data_port = 0;
	CU_ASSERT_EQUAL(te_meta_publish(a, da, NULL), -EINVAL);
	da->tcp_data_port = 40000;
	CU_ASSERT_EQUAL(te_meta_fetch(b, na, &got, host, sizeof(host), err, sizeof(err)), -ENOENT);
	/* Unsorted buffers are published sorted. */
	{
		struct te_desc_buf t = da->bufs[0];

		da->bufs[0] = da->bufs[1];
		da->bufs[1] = t;
	}
	TIDE_UT_OK(te_meta_publish(a, da, NULL));
	TIDE_UT_OK(te_meta_publish(b, db, NULL));
	TIDE_UT_OK(te_meta_fetch(a, nb, &got, host, sizeof(host), err, sizeof(err)));
	CU_ASSERT_TRUE(got != NULL && te_desc_equal(got, db));
	CU_ASSERT_STRING_EQUAL(host, "127.0.0.1");
	te_desc_free(got);
	got = NULL;
	TIDE_UT_OK(te_meta_fetch(b, na, &got, host, sizeof(host), err, sizeof(err)));
	CU_ASSERT_FALSE(got != NULL && te_desc_equal(got, da)); /* da is still unsorted */
	CU_ASSERT_TRUE(got != NULL && got->bufs[0].addr < got->bufs[1].addr);
	TIDE_UT_OK(te_desc_normalize(da, NULL, 0));
	CU_ASSERT_TRUE(got != NULL && te_desc_equal(got, da));
	te_desc_free(got);
	got = NULL;
	/* A restart (new instance) is visible on the next fetch. */
	db->instance = 0x3333;
	TIDE_UT_OK(te_meta_publish(b, db, NULL));
	TIDE_UT_OK(te_meta_fetch(a, nb, &got, host, sizeof(host), err, sizeof(err)));
	CU_ASSERT_TRUE(got != NULL && got->instance == 0x3333);
	te_desc_free(got);
	got = NULL;
	/* Bad names. */
	CU_ASSERT_EQUAL(
		te_meta_fetch(a, "node-without-port", &got, host, sizeof(host), err, sizeof(err)),
		-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "host:port"));
	CU_ASSERT_EQUAL(te_meta_fetch(a, "h:0", &got, host, sizeof(host), NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(te_meta_fetch(a, "", &got, host, sizeof(host), NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(te_meta_fetch(a, nb, &got, host, 4, NULL, 0), -ENAMETOOLONG);
	CU_ASSERT_PTR_NULL(got);
	te_meta_close(b);
	CU_ASSERT_EQUAL(te_meta_fetch(a, nb, &got, host, sizeof(host), err, sizeof(err)),
			-ECONNREFUSED);
	te_meta_close(a);
	te_meta_close(NULL);
	te_desc_free(da);
	te_desc_free(db);
}

/*
 * Ask the handshake daemon on 127.0.0.1:p (type, json) and check its reply: equal to
 * want (exact) or containing it; want NULL: only that it answered.
 */
static void
expect_reply(uint16_t p, uint8_t type, const char *json, const char *want, bool exact)
{
	char *r = NULL;
	size_t rl = 0;

	TIDE_UT_OK(te_hs_request("127.0.0.1", p, type, json, strlen(json), 1000, &r, &rl));
	if (want != NULL && exact) {
		CU_ASSERT_STRING_EQUAL(r, want);
	} else if (want != NULL) {
		CU_ASSERT_PTR_NOT_NULL(strstr(r, want));
	}
	free(r);
}

static void
test_daemon_replies(void)
{
	struct te_meta *m = NULL;
	uint16_t p = open_p2p(&m);

	expect_reply(p, TE_HS_PROBE, "{}", "{\"status\":\"success\"}", true);
	/* Notify: kept and answered as stock's receivePeerNotify does; a body that is
	 * not a JSON object is refused (an empty notify_msg, which senders read so). */
	expect_reply(p, TE_HS_NOTIFY, "{\"x\":1}", "{\"name\":\"\",\"notify_msg\":\"success\"}",
		     true);
	expect_reply(p, TE_HS_NOTIFY, "[1]", "{\"name\":\"\",\"notify_msg\":\"\"}", true);
	{
		struct tide_te_notify *v = NULL;
		size_t n = 0;

		TIDE_UT_OK(te_meta_notifies_take(m, &v, &n));
		CU_ASSERT_EQUAL_FATAL(n, 1);
		CU_ASSERT_STRING_EQUAL(v[0].name, ""); /* absent members read as "" */
		CU_ASSERT_STRING_EQUAL(v[0].msg, "");
		te_meta_notifies_free(v, n);
	}
	expect_reply(p, TE_HS_CONNECTION, "{}", "\"reply_msg\":\"tide: RDMA", false);
	expect_reply(p, TE_HS_METADATA, "{}", "{}", true);
	te_meta_close(m);
}

/* P2P descriptors published lazily: marked stale, rebuilt by the daemon when a peer
 * asks, once per change. */
static int refreshes;
static struct te_meta *refresh_meta;

static int
count_refresh(void *arg)
{
	struct te_desc d = {0};

	(void)arg;
	refreshes++;
	snprintf(d.name, sizeof(d.name), "lazy");
	snprintf(d.protocol, sizeof(d.protocol), "tcp");
	d.tcp_data_port = 1234;
	return te_meta_publish(refresh_meta, &d, "127.0.0.1");
}

static void
test_lazy_publish(void)
{
	struct te_meta *m = NULL;
	uint16_t p = open_p2p(&m);

	refresh_meta = m;
	refreshes = 0;
	CU_ASSERT_FALSE(te_meta_publish_later(m)); /* no refresh function: publish now */
	te_meta_set_refresh(m, count_refresh, NULL);
	CU_ASSERT_TRUE(te_meta_publish_later(m));
	CU_ASSERT_TRUE(te_meta_publish_later(m)); /* two changes, one rebuild */
	CU_ASSERT_EQUAL(refreshes, 0);
	expect_reply(p, TE_HS_METADATA, "{}", "\"lazy\"", false);
	CU_ASSERT_EQUAL(refreshes, 1);
	expect_reply(p, TE_HS_METADATA, "{}", NULL, false);
	CU_ASSERT_EQUAL(refreshes, 1); /* nothing changed since */
	te_meta_set_refresh(m, NULL, NULL);
	CU_ASSERT_FALSE(te_meta_publish_later(m));
	te_meta_close(m);
}

static void
test_modes(void)
{
	static const struct {
		const char *conn;
		int rc;
		const char *msg;
	} cases[] = {
		{"etcd://", -EINVAL, "expected host:port"},
		{"etcd://h:1;h:x", -EINVAL, "expected host:port"},
		{"redis://127.0.0.1:6379", -EPROTONOSUPPORT, "\"redis\" is not supported"},
		{"https://meta/x", -EPROTONOSUPPORT, "\"https\" is not supported"},
		{"meta.example", -EPROTONOSUPPORT, "is not supported"},
		{"p2phandshake", -EPROTONOSUPPORT, "P2PHANDSHAKE"},
		{"", -EINVAL, "empty"},
		{"http://:80/", -EINVAL, "url: empty host"},
	};
	struct te_meta *m = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(
			te_meta_open(cases[i].conn, "127.0.0.1", 0, 500, &m, err, sizeof(err)),
			cases[i].rc);
		if (strstr(err, cases[i].msg) == NULL)
			printf("\n  %s: err '%s'\n", cases[i].conn, err);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].msg));
		if (cases[i].rc == -EPROTONOSUPPORT)
			CU_ASSERT_PTR_NOT_NULL(
				strstr(err, "supported: \"P2PHANDSHAKE\", \"http://"));
	}
	CU_ASSERT_EQUAL(te_meta_open(NULL, NULL, 0, 500, &m, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(te_meta_open("P2PHANDSHAKE", "bogus", 0, 500, &m, err, sizeof(err)),
			-EINVAL);
}

static void
test_http(void)
{
	struct ut_http_srv *srv = NULL;
	struct te_meta *a = NULL, *b = NULL;
	struct te_desc *da, *dother, *got = NULL;
	char url[96], host[64], *v, want[96];

	TIDE_UT_OK(ut_http_srv_start(&srv));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", ut_http_srv_port(srv));
	TIDE_UT_OK(te_meta_open(url, "127.0.0.1", 0, 1000, &a, err, sizeof(err)));
	TIDE_UT_OK(te_meta_open(url, "127.0.0.1", 0, 1000, &b, err, sizeof(err)));
	CU_ASSERT_FALSE(te_meta_is_p2p(a));
	da = mk("node-a", 0xaaaa, 0x7f0000000000);
	CU_ASSERT_EQUAL(te_meta_publish(a, da, NULL), -EINVAL);
	CU_ASSERT_EQUAL(te_meta_fetch(b, "node-a", &got, host, sizeof(host), err, sizeof(err)),
			-ENOENT);
	TIDE_UT_OK(te_meta_publish(a, da, "10.0.0.9"));
	v = ut_http_srv_kv_get(srv, "mooncake/rpc_meta/node-a");
	snprintf(want, sizeof(want), "{\"ip_or_host_name\":\"10.0.0.9\",\"rpc_port\":%u}",
		 te_meta_rpc_port(a));
	CU_ASSERT_TRUE(v != NULL && strcmp(v, want) == 0);
	free(v);
	v = ut_http_srv_kv_get(srv, "mooncake/ram/node-a");
	CU_ASSERT_TRUE(v != NULL && strstr(v, "\"tide_instance\":\"000000000000aaaa\"") != NULL);
	free(v);
	TIDE_UT_OK(te_meta_fetch(b, "node-a", &got, host, sizeof(host), err, sizeof(err)));
	CU_ASSERT_TRUE(got != NULL && te_desc_equal(got, da));
	CU_ASSERT_STRING_EQUAL(host, "10.0.0.9");
	te_desc_free(got);
	got = NULL;
	/* Republishing the same rpc_meta is fine; another instance claiming the name is not,
	 * and does not overwrite the owner's descriptor. */
	TIDE_UT_OK(te_meta_publish(a, da, "10.0.0.9"));
	dother = mk("node-a", 0xbbbb, 0x1000);
	CU_ASSERT_EQUAL(te_meta_publish(b, dother, "10.0.0.10"), -EEXIST);
	TIDE_UT_OK(te_meta_fetch(b, "node-a", &got, host, sizeof(host), err, sizeof(err)));
	CU_ASSERT_TRUE(got != NULL && got->instance == 0xaaaa);
	te_desc_free(got);
	got = NULL;
	/* The daemon also serves the descriptor in HTTP mode. */
	{
		char *r = NULL;
		size_t rl = 0;

		TIDE_UT_OK(te_hs_request("127.0.0.1", te_meta_rpc_port(a), TE_HS_METADATA, "{}", 2,
					 1000, &r, &rl));
		TIDE_UT_OK(te_desc_decode(r, rl, &got, err, sizeof(err)));
		CU_ASSERT_TRUE(got != NULL && te_desc_equal(got, da));
		te_desc_free(got);
		got = NULL;
		free(r);
	}
	/* A corrupt descriptor on the server: -EPROTO naming the field. */
	{
		const char *bad = "HTTP/1.1 200 OK\r\nContent-Length: 27\r\n\r\n"
				  "{\"name\":\"x\",\"protocol\":\"t\"}";

		ut_http_srv_set(srv, UT_HTTP_CANNED, bad, strlen(bad));
		CU_ASSERT_EQUAL(
			te_meta_fetch(b, "node-a", &got, host, sizeof(host), err, sizeof(err)),
			-EPROTO);
		CU_ASSERT_PTR_NULL(got);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "tcp_data_port: missing"));
	}
	ut_http_srv_set(srv, UT_HTTP_KV, NULL, 0);
	/* b's refused publish claimed nothing: closing b must leave a's keys alone. */
	te_meta_close(b);
	CU_ASSERT_TRUE(kv_has(srv, "mooncake/ram/node-a"));
	TIDE_UT_OK(te_meta_open(url, "127.0.0.1", 0, 1000, &b, err, sizeof(err)));
	/* Close removes a's keys. */
	te_meta_close(a);
	CU_ASSERT_FALSE(kv_has(srv, "mooncake/ram/node-a"));
	CU_ASSERT_FALSE(kv_has(srv, "mooncake/rpc_meta/node-a"));
	CU_ASSERT_EQUAL(te_meta_fetch(b, "node-a", &got, host, sizeof(host), err, sizeof(err)),
			-ENOENT);
	te_meta_close(b);
	te_desc_free(da);
	te_desc_free(dother);
	ut_http_srv_stop(srv);
}

static void
test_http_cluster_and_slash(void)
{
	struct ut_http_srv *srv = NULL;
	struct te_meta *a = NULL;
	struct te_desc *d, *got = NULL;
	char url[96], host[64];

	TIDE_UT_OK(ut_http_srv_start(&srv));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", ut_http_srv_port(srv));
	setenv("MC_METADATA_CLUSTER_ID", "c1", 1);
	TIDE_UT_OK(te_meta_open(url, NULL, 0, 1000, &a, err, sizeof(err)));
	unsetenv("MC_METADATA_CLUSTER_ID");
	d = mk("node-b", 1, 0x4000);
	TIDE_UT_OK(te_meta_publish(a, d, "h1"));
	CU_ASSERT_TRUE(kv_has(srv, "mooncake/c1/ram/node-b"));
	CU_ASSERT_TRUE(kv_has(srv, "mooncake/c1/rpc_meta/node-b"));
	CU_ASSERT_PTR_NULL(ut_http_srv_kv_get(srv, "mooncake/ram/node-b"));
	/* A name with '/' is used as is under the prefix (Mooncake's getFullMetadataKey). */
	snprintf(d->name, sizeof(d->name), "cpu/seg0");
	TIDE_UT_OK(te_meta_publish(a, d, "h1"));
	CU_ASSERT_TRUE(kv_has(srv, "mooncake/c1/cpu/seg0"));
	/* The rename withdrew the old name's keys. */
	CU_ASSERT_PTR_NULL(ut_http_srv_kv_get(srv, "mooncake/c1/ram/node-b"));
	CU_ASSERT_PTR_NULL(ut_http_srv_kv_get(srv, "mooncake/c1/rpc_meta/node-b"));
	TIDE_UT_OK(te_meta_fetch(a, "cpu/seg0", &got, host, sizeof(host), err, sizeof(err)));
	CU_ASSERT_TRUE(got != NULL && te_desc_equal(got, d));
	te_desc_free(got);
	te_meta_close(a);
	CU_ASSERT_PTR_NULL(ut_http_srv_kv_get(srv, "mooncake/c1/cpu/seg0"));
	te_desc_free(d);
	ut_http_srv_stop(srv);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_meta", NULL, NULL);

	CU_add_test(s, "p2p_two_instances", test_p2p);
	CU_add_test(s, "daemon_replies", test_daemon_replies);
	CU_add_test(s, "lazy_publish", test_lazy_publish);
	CU_add_test(s, "modes", test_modes);
	CU_add_test(s, "http_publish_fetch_close", test_http);
	CU_add_test(s, "http_cluster_id_and_slash", test_http_cluster_and_slash);
}

TIDE_UT_MAIN(register_tests)
