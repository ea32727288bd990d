/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine with its metadata on a real etcd: two engines find each
 * other through Mooncake's keys and move bytes over kernel TCP; the values
 * are what a stock engine writes and reads (JSON and a newline); a
 * descriptor written in stock's own layout is used; MC_METADATA_CLUSTER_ID
 * separates clusters; closing withdraws the keys; etcd gone fails an open
 * with an error instead of hanging.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_fixture.h"
#include "tide_etcd.h"
#include "te_ut.h"
#include "tide_te.h"
#include "tide_ut.h"

#define MIB (1024u * 1024u)

static struct etcd_fixture fx;
static char conn[96];

static int
suite_init(void)
{
	if (etcd_fixture_start(&fx) != 0)
		return -1;
	snprintf(conn, sizeof(conn), "etcd://%s", fx.endpoint);
	return 0;
}

static int
suite_clean(void)
{
	etcd_fixture_destroy(&fx);
	return 0;
}

static struct tide_te *
mk(const char *name)
{
	struct tide_te_opts o;
	struct tide_te *te = NULL;

	tide_te_opts_init(&o, sizeof(o));
	o.metadata = conn;
	o.local_server_name = name;
	o.host = "127.0.0.1";
	CU_ASSERT_EQUAL_FATAL(tide_te_create(&o, &te), 0);
	CU_ASSERT_EQUAL_FATAL(tide_te_install_transport(te, "tcp"), 0);
	return te;
}

static int
etcd_value(const char *key, struct tide_etcd_kv *kv)
{
	struct tide_etcd *e = NULL;
	int rc = tide_etcd_open(fx.endpoint, 2000, &e);

	if (rc == 0)
		rc = tide_etcd_get(e, key, strlen(key), kv, NULL);
	tide_etcd_close(e);
	return rc;
}

static void
test_two_engines(void)
{
	struct tide_te *a = mk("node-a"), *b = mk("node-b");
	uint8_t *seg = calloc(1, 4 * MIB), *src = malloc(MIB), *back = calloc(1, MIB);
	struct tide_etcd_kv kv;
	struct tide_te_status st;
	tide_te_seg_t s;
	char want[128], host[64];
	uint16_t rp, dp;

	for (size_t i = 0; i < MIB; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	TIDE_UT_OK(tide_te_register(a, seg, 4 * MIB, "cpu:0"));
	/* Mooncake's keys, Mooncake's values (JSON and a newline). */
	TIDE_UT_OK(etcd_value("mooncake/ram/node-a", &kv));
	CU_ASSERT(kv.value_len > 2 && kv.value[kv.value_len - 1] == '\n' &&
		  kv.value[kv.value_len - 2] == '}');
	CU_ASSERT_PTR_NOT_NULL(strstr(kv.value, "\"name\":\"node-a\""));
	tide_etcd_kv_clear(&kv);
	tide_te_local_addr(a, host, sizeof(host), &rp, &dp);
	snprintf(want, sizeof(want), "{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":%u}\n", rp);
	TIDE_UT_OK(etcd_value("mooncake/rpc_meta/node-a", &kv));
	CU_ASSERT_STRING_EQUAL(kv.value, want);
	tide_etcd_kv_clear(&kv);
	/* b finds a by name through etcd and moves bytes both ways. */
	TIDE_UT_OK(tide_te_open_segment(b, "node-a", &s));
	st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg + 4096, MIB);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED && st.transferred == MIB);
	CU_ASSERT(memcmp(seg + 4096, src, MIB) == 0);
	st = te_ut_one(b, TIDE_TE_READ, back, s, (uintptr_t)seg + 4096, MIB);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	CU_ASSERT(memcmp(back, src, MIB) == 0);
	/* An unknown name is -ENOENT-like failure, not a hang. */
	CU_ASSERT(tide_te_open_segment(b, "node-nobody", &s) != 0);
	/* Closing a withdraws its keys. */
	tide_te_destroy(a);
	CU_ASSERT_EQUAL(etcd_value("mooncake/ram/node-a", &kv), -ENOENT);
	CU_ASSERT_EQUAL(etcd_value("mooncake/rpc_meta/node-a", &kv), -ENOENT);
	tide_te_destroy(b);
	free(seg);
	free(src);
	free(back);
}

/* A descriptor in a stock engine's own layout and key order, with its newline. */
static void
test_stock_written_descriptor(void)
{
	struct tide_te *a = mk("node-a2"), *b = mk("node-b2");
	uint8_t *seg = calloc(1, MIB), *src = malloc(65536), *back = calloc(1, 65536);
	struct tide_etcd *e = NULL;
	char desc[1024], rpc[128], host[64];
	tide_te_seg_t s;
	uint16_t rp, dp;
	struct tide_te_status st;

	memset(src, 0x5a, 65536);
	TIDE_UT_OK(tide_te_register(a, seg, MIB, "cpu:0"));
	tide_te_local_addr(a, host, sizeof(host), &rp, &dp);
	snprintf(desc, sizeof(desc),
		 "{\"buffers\":[{\"addr\":%" PRIuPTR ",\"length\":%u,\"name\":\"cpu:0\"}],"
		 "\"devices\":[],\"name\":\"stock-node\",\"priority_matrix\":{},\"protocol\":"
		 "\"tcp\",\"tcp_data_port\":%u,\"timestamp\":\"2026-12-04 15:00:00.000001\"}\n",
		 (uintptr_t)seg, MIB, dp);
	snprintf(rpc, sizeof(rpc), "{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":%u}\n", rp);
	TIDE_UT_OK(tide_etcd_open(fx.endpoint, 2000, &e));
	TIDE_UT_OK(tide_etcd_put(e, "mooncake/ram/stock-node", 23, desc, strlen(desc), 0, NULL));
	TIDE_UT_OK(tide_etcd_put(e, "mooncake/rpc_meta/stock-node", 28, rpc, strlen(rpc), 0, NULL));
	TIDE_UT_OK(tide_te_open_segment(b, "stock-node", &s));
	st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg + 100, 65536);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	/* No tcp_proto_version: framing v1, whose WRITE completes once sent (no reply),
	 * so the bytes are checked after a READ on the same connection. */
	st = te_ut_one(b, TIDE_TE_READ, back, s, (uintptr_t)seg + 100, 65536);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	CU_ASSERT(memcmp(back, src, 65536) == 0);
	CU_ASSERT(memcmp(seg + 100, src, 65536) == 0);
	TIDE_UT_OK(tide_etcd_delete(e, "mooncake/ram/stock-node", 23));
	TIDE_UT_OK(tide_etcd_delete(e, "mooncake/rpc_meta/stock-node", 28));
	tide_etcd_close(e);
	tide_te_destroy(b);
	tide_te_destroy(a);
	free(seg);
	free(src);
	free(back);
}

static void
test_cluster_id_and_etcd_down(void)
{
	struct tide_te *a, *b = mk("node-b3");
	uint8_t *seg = calloc(1, MIB);
	struct tide_etcd_kv kv;
	tide_te_seg_t s;
	double t0;

	setenv("MC_METADATA_CLUSTER_ID", "tide-it", 1);
	a = mk("node-a3");
	unsetenv("MC_METADATA_CLUSTER_ID");
	TIDE_UT_OK(tide_te_register(a, seg, MIB, "cpu:0"));
	TIDE_UT_OK(etcd_value("mooncake/tide-it/ram/node-a3", &kv));
	tide_etcd_kv_clear(&kv);
	CU_ASSERT_EQUAL(etcd_value("mooncake/ram/node-a3", &kv), -ENOENT);
	/* b is in the default cluster: it does not see a. */
	CU_ASSERT(tide_te_open_segment(b, "node-a3", &s) != 0);
	tide_te_destroy(a);
	/* etcd down: an open fails within the metadata timeout. */
	etcd_fixture_stop(&fx);
	t0 = tide_ut_now_s();
	CU_ASSERT(tide_te_open_segment(b, "node-a3", &s) != 0);
	CU_ASSERT(tide_ut_now_s() - t0 < 10.0);
	CU_ASSERT_EQUAL_FATAL(etcd_fixture_restart(&fx), 0);
	tide_te_destroy(b);
	free(seg);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_etcd_it", suite_init, suite_clean);

	CU_add_test(s, "two_engines", test_two_engines);
	CU_add_test(s, "stock_written_descriptor", test_stock_written_descriptor);
	CU_add_test(s, "cluster_id_and_etcd_down", test_cluster_id_and_etcd_down);
}

TIDE_UT_MAIN(register_tests)
