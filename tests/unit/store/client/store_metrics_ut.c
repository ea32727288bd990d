/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_metrics.c: stock's bucket bounds and RPC names, the parsing of
 * MC_STORE_CLIENT_METRIC, what begin/end count and observe (answered or not, off),
 * exact counts from threads at once, and the Prometheus text: layout, labels and
 * their escapes, cumulative buckets, sizing with -ENOBUFS.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_metrics.h"
#include "tide_ut.h"

static void
test_bounds_are_stocks(void)
{
	/* kLatencyBucket of stock's client_metric.h. */
	static const uint32_t stock[] = {
		50,    75,     125,    150,    200,     250,     300,     400,      500,
		750,   1000,   1500,   2000,   3000,    5000,    7000,    15000,    20000,
		50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000, 20000000};

	CU_ASSERT_EQUAL_FATAL(sizeof(stock) / sizeof(stock[0]), STORE_METRICS_NBOUNDS);
	for (size_t i = 0; i < STORE_METRICS_NBOUNDS; i++)
		CU_ASSERT_EQUAL(store_metrics_bounds_us[i], stock[i]);
	CU_ASSERT_EQUAL(store_metrics_bucket(0), 0);
	CU_ASSERT_EQUAL(store_metrics_bucket(50), 0); /* le: a value on a bound is in it */
	CU_ASSERT_EQUAL(store_metrics_bucket(51), 1);
	CU_ASSERT_EQUAL(store_metrics_bucket(1000), 10);
	CU_ASSERT_EQUAL(store_metrics_bucket(1001), 11);
	CU_ASSERT_EQUAL(store_metrics_bucket(20000000), STORE_METRICS_NBOUNDS - 1);
	CU_ASSERT_EQUAL(store_metrics_bucket(20000001), STORE_METRICS_NBOUNDS);
	CU_ASSERT_EQUAL(store_metrics_bucket(UINT64_MAX), STORE_METRICS_NBOUNDS);
	for (size_t i = 0; i < STORE_METRICS_NBOUNDS; i++) {
		CU_ASSERT_EQUAL(store_metrics_bucket(stock[i]), i);
		CU_ASSERT_EQUAL(store_metrics_bucket(stock[i] + 1ull), i + 1);
	}
}

static void
test_env_parsing(void)
{
	static const char *on[] = {"1", "true", "TRUE", " yes\n", "On", "enable"};
	static const char *off[] = {"0", "false", "off", "no", "disable", "", "2", "maybe"};

	CU_ASSERT_TRUE(store_metrics_env_on(NULL)); /* unset: on, as stock */
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++)
		CU_ASSERT_TRUE(store_metrics_env_on(on[i]));
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		CU_ASSERT_FALSE(store_metrics_env_on(off[i]));
}

static void
test_names(void)
{
	CU_ASSERT_STRING_EQUAL(store_metrics_rpc_name(TIDE_MC_FN_PUT_START), "PutStart");
	CU_ASSERT_STRING_EQUAL(store_metrics_rpc_name(TIDE_MC_FN_GET_REPLICA_LIST),
			       "GetReplicaList");
	CU_ASSERT_STRING_EQUAL(store_metrics_rpc_name(TIDE_MC_FN_BATCH_GET_REPLICA_LIST),
			       "BatchGetReplicaList");
	CU_ASSERT_STRING_EQUAL(store_metrics_rpc_name(TIDE_MC_FN_REMOUNT_SEGMENT),
			       "ReMountSegment");
	CU_ASSERT_STRING_EQUAL(store_metrics_rpc_name(TIDE_MC_FN_COUNT), "Unknown");
}

static uint64_t
hist_total(const struct store_metrics *m, enum tide_mc_fn f)
{
	uint64_t t = 0;

	for (size_t i = 0; i <= STORE_METRICS_NBOUNDS; i++)
		t += m->rpc_latency[f].n[i];
	return t;
}

static void
test_begin_end(void)
{
	static struct store_metrics m;
	uint64_t t0;

	unsetenv("MC_STORE_CLIENT_METRIC");
	store_metrics_init(&m);
	CU_ASSERT_TRUE(m.on);
	/* Answered: counted and observed. */
	t0 = store_metrics_rpc_begin(&m, TIDE_MC_FN_PUT_START);
	CU_ASSERT_NOT_EQUAL(t0, 0);
	store_metrics_rpc_end(&m, TIDE_MC_FN_PUT_START, t0, 0);
	/* Not answered (refused, a coro_rpc error frame): counted, no latency. */
	t0 = store_metrics_rpc_begin(&m, TIDE_MC_FN_PUT_START);
	store_metrics_rpc_end(&m, TIDE_MC_FN_PUT_START, t0, -ECONNREFUSED);
	t0 = store_metrics_rpc_begin(&m, TIDE_MC_FN_PUT_START);
	store_metrics_rpc_end(&m, TIDE_MC_FN_PUT_START, t0, -EREMOTEIO);
	CU_ASSERT_EQUAL(m.rpc_count[TIDE_MC_FN_PUT_START], 3);
	CU_ASSERT_EQUAL(hist_total(&m, TIDE_MC_FN_PUT_START), 1);
	/* A start 2.5 ms ago lands in the 3000 us bucket (unless this thread slept 0.5 ms). */
	t0 = store_metrics_rpc_begin(&m, TIDE_MC_FN_EXIST_KEY) - 2500000u;
	store_metrics_rpc_end(&m, TIDE_MC_FN_EXIST_KEY, t0, 0);
	CU_ASSERT_EQUAL(m.rpc_latency[TIDE_MC_FN_EXIST_KEY].n[13] +
				m.rpc_latency[TIDE_MC_FN_EXIST_KEY].n[14],
			1);
	CU_ASSERT_TRUE(m.rpc_latency[TIDE_MC_FN_EXIST_KEY].sum >= 2500);
	/* Out-of-range ids and a NULL set are ignored. */
	CU_ASSERT_EQUAL(store_metrics_rpc_begin(&m, TIDE_MC_FN_COUNT), 0);
	store_metrics_rpc_end(&m, TIDE_MC_FN_COUNT, 1, 0);
	CU_ASSERT_EQUAL(store_metrics_rpc_begin(NULL, TIDE_MC_FN_PING), 0);
	store_metrics_rpc_end(NULL, TIDE_MC_FN_PING, 1, 0);
}

static void
test_off(void)
{
	static struct store_metrics m;
	char buf[64];
	size_t need = 99;

	setenv("MC_STORE_CLIENT_METRIC", "0", 1);
	store_metrics_init(&m);
	unsetenv("MC_STORE_CLIENT_METRIC");
	CU_ASSERT_FALSE(m.on);
	CU_ASSERT_EQUAL(store_metrics_rpc_begin(&m, TIDE_MC_FN_PUT_START), 0);
	store_metrics_rpc_end(&m, TIDE_MC_FN_PUT_START, 1, 0);
	CU_ASSERT_EQUAL(m.rpc_count[TIDE_MC_FN_PUT_START], 0);
	CU_ASSERT_EQUAL(hist_total(&m, TIDE_MC_FN_PUT_START), 0);
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", buf, sizeof(buf), &need), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(need, 0);
}

struct worker {
	struct store_metrics *m;
	int n;
};

static void *
work(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < w->n; i++) {
		uint64_t t0 = store_metrics_rpc_begin(w->m, TIDE_MC_FN_BATCH_PUT_START);

		store_metrics_rpc_end(w->m, TIDE_MC_FN_BATCH_PUT_START, t0,
				      i % 2 == 0 ? 0 : -EPIPE);
	}
	return NULL;
}

static void
test_threads_count_exactly(void)
{
	static struct store_metrics m;
	pthread_t th[4];
	struct worker w = {.m = &m, .n = 20000};

	unsetenv("MC_STORE_CLIENT_METRIC");
	store_metrics_init(&m);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, work, &w), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CU_ASSERT_EQUAL(m.rpc_count[TIDE_MC_FN_BATCH_PUT_START], 4 * 20000);
	CU_ASSERT_EQUAL(hist_total(&m, TIDE_MC_FN_BATCH_PUT_START), 4 * 10000);
}

/* Number of lines of text starting with prefix. */
static int
lines_with(const char *text, const char *prefix)
{
	int n = 0;

	for (const char *p = text; p != NULL && *p != '\0';) {
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			n++;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return n;
}

static void
test_text(void)
{
	static struct store_metrics m;
	static char buf[64 << 10];
	size_t need = 0, full;
	uint64_t t0;

	unsetenv("MC_STORE_CLIENT_METRIC");
	unsetenv("MC_STORE_CLUSTER_ID");
	store_metrics_init(&m);
	/* Nothing recorded: no metric at all, as stock's (empty maps serialise nothing). */
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", buf, sizeof(buf), &need), 0);
	CU_ASSERT_STRING_EQUAL(buf, "");
	CU_ASSERT_EQUAL(need, 1);
	CU_ASSERT_EQUAL(store_metrics_text(NULL, "dummy", buf, sizeof(buf), &need), 0);
	CU_ASSERT_STRING_EQUAL(buf, "");
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", buf, sizeof(buf), NULL), -EINVAL);
	CU_ASSERT_EQUAL(store_metrics_text(&m, NULL, buf, sizeof(buf), &need), -EINVAL);

	for (int i = 0; i < 2; i++) {
		t0 = store_metrics_rpc_begin(&m, TIDE_MC_FN_PUT_START);
		store_metrics_rpc_end(&m, TIDE_MC_FN_PUT_START, t0, 0);
	}
	t0 = store_metrics_rpc_begin(&m, TIDE_MC_FN_GET_REPLICA_LIST);
	store_metrics_rpc_end(&m, TIDE_MC_FN_GET_REPLICA_LIST, t0, -ECONNRESET);
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", buf, sizeof(buf), &need), 0);
	CU_ASSERT_EQUAL(need, strlen(buf) + 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "# HELP mooncake_client_rpc_count Total number of RPC "
					   "calls made by the client\n"
					   "# TYPE mooncake_client_rpc_count counter\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf,
				      "# HELP mooncake_client_rpc_latency Latency of RPC calls "
				      "made by the client (in us)\n"
				      "# TYPE mooncake_client_rpc_latency histogram\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(
		buf,
		"\nmooncake_client_rpc_count{client_mode=\"real\",rpc_name=\"PutStart\"} 2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\nmooncake_client_rpc_count{client_mode=\"real\",rpc_"
					   "name=\"GetReplicaList\"} 1\n"));
	/* Only answered RPCs have a latency: PutStart's, 28 buckets, none for GetReplicaList. */
	CU_ASSERT_EQUAL(lines_with(buf, "mooncake_client_rpc_latency_bucket{"),
			STORE_METRICS_NBOUNDS + 1);
	CU_ASSERT_EQUAL(lines_with(buf, "mooncake_client_rpc_latency_bucket{client_mode=\"real\","
					"rpc_name=\"GetReplicaList\""),
			0);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf,
				      "mooncake_client_rpc_latency_bucket{client_mode=\"real\","
				      "rpc_name=\"PutStart\",le=\"50.000000\"} "));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf,
				      "mooncake_client_rpc_latency_bucket{client_mode=\"real\","
				      "rpc_name=\"PutStart\",le=\"20000000.000000\"} 2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf,
				      "mooncake_client_rpc_latency_bucket{client_mode=\"real\","
				      "rpc_name=\"PutStart\",le=\"+Inf\"} 2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\nmooncake_client_rpc_latency_sum{client_mode=\"real\","
					   "rpc_name=\"PutStart\"} "));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf,
				      "\nmooncake_client_rpc_latency_count{client_mode=\"real\","
				      "rpc_name=\"PutStart\"} 2\n"));
	CU_ASSERT_EQUAL(lines_with(buf, "# TYPE"), 2);

	/* Sizing: a short buffer gets a NUL-terminated prefix and the full size. */
	full = need;
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", NULL, 0, &need), -ENOBUFS);
	CU_ASSERT_EQUAL(need, full);
	{
		char small[40];

		CU_ASSERT_EQUAL(store_metrics_text(&m, "real", small, sizeof(small), &need),
				-ENOBUFS);
		CU_ASSERT_EQUAL(need, full);
		CU_ASSERT_EQUAL(strlen(small), sizeof(small) - 1);
		CU_ASSERT_EQUAL(strncmp(small, buf, sizeof(small) - 1), 0);
	}
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", buf, full - 1, &need), -ENOBUFS);
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", buf, full, &need), 0);

	/* Stock's static labels: client_mode, then cluster_id; values escaped. */
	setenv("MC_STORE_CLUSTER_ID", "c\"1\\x\ny", 1);
	CU_ASSERT_EQUAL(store_metrics_text(&m, "real", buf, sizeof(buf), &need), 0);
	unsetenv("MC_STORE_CLUSTER_ID");
	CU_ASSERT_PTR_NOT_NULL(strstr(buf,
				      "mooncake_client_rpc_count{client_mode=\"real\","
				      "cluster_id=\"c\\\"1\\\\x\\ny\",rpc_name=\"PutStart\"} 2\n"));
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_metrics", NULL, NULL);

	CU_add_test(s, "bounds_are_stocks", test_bounds_are_stocks);
	CU_add_test(s, "env_parsing", test_env_parsing);
	CU_add_test(s, "names", test_names);
	CU_add_test(s, "begin_end", test_begin_end);
	CU_add_test(s, "off", test_off);
	CU_add_test(s, "threads_count_exactly", test_threads_count_exactly);
	CU_add_test(s, "text", test_text);
}

TIDE_UT_MAIN(register_tests)
