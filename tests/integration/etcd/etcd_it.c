/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/etcd against a real etcd (Debian's etcd-server, started here on
 * loopback ports with its own data directory): round trips with binary
 * values read back by etcdctl, create-if-absent as Mooncake's election uses
 * it, leases (keepalive, revoke, expiry deleting the key), watches, an
 * endpoint list with a dead member, and etcd stopped and started again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd_fixture.h"
#include "tide_etcd.h"
#include "tide_ut.h"

static struct etcd_fixture fx;
static const char *endpoint = fx.endpoint;

static int
suite_init(void)
{
	return etcd_fixture_start(&fx) == 0 ? 0 : -1;
}

static int
suite_clean(void)
{
	etcd_fixture_destroy(&fx);
	return 0;
}

static struct tide_etcd *
open_etcd(void)
{
	struct tide_etcd *e = NULL;

	CU_ASSERT_EQUAL_FATAL(tide_etcd_open(endpoint, 2000, &e), 0);
	return e;
}

/* etcdctl's view of a key's value (another client reading what we wrote). */
static int
etcdctl_get(const char *key, char *out, size_t n)
{
	char cmd[256];
	FILE *p;
	size_t got;

	snprintf(cmd, sizeof(cmd),
		 "ETCDCTL_API=3 etcdctl --endpoints=%s get --print-value-only '%s'", endpoint, key);
	p = popen(cmd, "r");
	if (p == NULL)
		return -errno;
	got = fread(out, 1, n - 1, p);
	out[got] = '\0';
	if (got > 0 && out[got - 1] == '\n')
		out[got - 1] = '\0';
	return pclose(p) == 0 ? 0 : -EIO;
}

static void
test_put_get_round_trip(void)
{
	struct tide_etcd *e = open_etcd();
	struct tide_etcd_kv kv;
	const char bin[] = {'a', 0, (char)0xff, '\n', 'z'};
	char seen[256];
	int64_t rev = 0, hrev = 0;

	TIDE_UT_OK(tide_etcd_put(e, "mooncake/rpc_meta/10.0.0.1:1234", 31,
				 "{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":1234}\n", 47, 0,
				 &rev));
	CU_ASSERT(rev > 0);
	TIDE_UT_OK(etcdctl_get("mooncake/rpc_meta/10.0.0.1:1234", seen, sizeof(seen)));
	/* etcdctl adds a newline after the value, which ends in Mooncake's own. */
	CU_ASSERT_STRING_EQUAL(seen, "{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":1234}\n");
	TIDE_UT_OK(tide_etcd_put(e, "bin", 3, bin, sizeof(bin), 0, NULL));
	TIDE_UT_OK(tide_etcd_get(e, "bin", 3, &kv, &hrev));
	CU_ASSERT_EQUAL(kv.value_len, sizeof(bin));
	CU_ASSERT(memcmp(kv.value, bin, sizeof(bin)) == 0);
	CU_ASSERT(kv.mod_revision > rev);
	CU_ASSERT(hrev >= kv.mod_revision);
	CU_ASSERT_EQUAL(kv.version, 1);
	tide_etcd_kv_clear(&kv);
	TIDE_UT_OK(tide_etcd_delete(e, "bin", 3));
	CU_ASSERT_EQUAL(tide_etcd_delete(e, "bin", 3), -ENOENT);
	CU_ASSERT_EQUAL(tide_etcd_get(e, "bin", 3, &kv, NULL), -ENOENT);
	tide_etcd_close(e);
}

static void
test_create_is_an_election(void)
{
	struct tide_etcd *a = open_etcd(), *b = open_etcd();
	const char *key = "mooncake-store/mooncake_cluster/master_view";
	struct tide_etcd_kv kv;
	int64_t la = 0, lb = 0, rev = 0;
	char seen[64];

	TIDE_UT_OK(tide_etcd_lease_grant(a, 5, &la));
	TIDE_UT_OK(tide_etcd_lease_grant(b, 5, &lb));
	TIDE_UT_OK(tide_etcd_create(a, key, strlen(key), "127.0.0.1:50051", 15, la, &rev));
	CU_ASSERT_EQUAL(tide_etcd_create(b, key, strlen(key), "127.0.0.1:50052", 15, lb, NULL),
			-EEXIST);
	TIDE_UT_OK(tide_etcd_get(b, key, strlen(key), &kv, NULL));
	CU_ASSERT_STRING_EQUAL(kv.value, "127.0.0.1:50051");
	CU_ASSERT_EQUAL(kv.create_revision, rev); /* Mooncake's view_version */
	CU_ASSERT_EQUAL(kv.lease, la);
	tide_etcd_kv_clear(&kv);
	TIDE_UT_OK(etcdctl_get(key, seen, sizeof(seen)));
	CU_ASSERT_STRING_EQUAL(seen, "127.0.0.1:50051");
	/* The leader steps down: revoking its lease deletes the key; b wins. */
	TIDE_UT_OK(tide_etcd_lease_revoke(a, la));
	CU_ASSERT_EQUAL(tide_etcd_get(b, key, strlen(key), &kv, NULL), -ENOENT);
	TIDE_UT_OK(tide_etcd_create(b, key, strlen(key), "127.0.0.1:50052", 15, lb, NULL));
	TIDE_UT_OK(tide_etcd_lease_revoke(b, lb));
	TIDE_UT_OK(tide_etcd_lease_revoke(b, lb)); /* gone already: still 0 */
	tide_etcd_close(a);
	tide_etcd_close(b);
}

static void
test_lease_keepalive_and_expiry(void)
{
	struct tide_etcd *e = open_etcd();
	struct tide_etcd_kv kv;
	int64_t id = 0, ttl = 0;
	double t0, deadline;
	int rc;

	TIDE_UT_OK(tide_etcd_lease_grant(e, 2, &id));
	TIDE_UT_OK(tide_etcd_put(e, "leased", 6, "v", 1, id, NULL));
	/* Kept alive past its TTL, the key stays. */
	for (int i = 0; i < 5; i++) {
		usleep(600 * 1000);
		TIDE_UT_OK(tide_etcd_lease_keepalive(e, id, &ttl));
		CU_ASSERT(ttl >= 2);
	}
	TIDE_UT_OK(tide_etcd_get(e, "leased", 6, &kv, NULL));
	tide_etcd_kv_clear(&kv);
	/* Left alone, it expires and takes the key with it. */
	t0 = tide_ut_now_s();
	deadline = t0 + 15;
	while ((rc = tide_etcd_get(e, "leased", 6, &kv, NULL)) == 0 && tide_ut_now_s() < deadline) {
		tide_etcd_kv_clear(&kv);
		usleep(100 * 1000);
	}
	CU_ASSERT_EQUAL(rc, -ENOENT);
	CU_ASSERT(tide_ut_now_s() - t0 > 1.0);
	CU_ASSERT_EQUAL(tide_etcd_lease_keepalive(e, id, &ttl), -ENOENT);
	/* A put on a lease etcd does not have. */
	CU_ASSERT_EQUAL(tide_etcd_put(e, "leased", 6, "v", 1, id, NULL), -ENOENT);
	tide_etcd_close(e);
}

struct waiter {
	int64_t after, rev;
	int rc;
};

static void *
wait_main(void *arg)
{
	struct waiter *w = arg;
	struct tide_etcd *e = NULL;

	if (tide_etcd_open(endpoint, 2000, &e) != 0) {
		w->rc = -ENOMEM;
		return NULL;
	}
	w->rc = tide_etcd_wait_change(e, "watched", 7, w->after, 10000, &w->rev);
	tide_etcd_close(e);
	return NULL;
}

static void
test_watch(void)
{
	struct tide_etcd *e = open_etcd();
	struct waiter w = {0};
	pthread_t t;
	int64_t rev = 0, hrev = 0;
	struct tide_etcd_kv kv;

	TIDE_UT_OK(tide_etcd_put(e, "watched", 7, "1", 1, 0, &rev));
	/* Nothing after rev: quiet. */
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "watched", 7, rev, 300, NULL), 0);
	/* A change that happened before the wait began is still seen. */
	TIDE_UT_OK(tide_etcd_put(e, "watched", 7, "2", 1, 0, &hrev));
	CU_ASSERT_EQUAL(tide_etcd_wait_change(e, "watched", 7, rev, 2000, &w.rev), 1);
	CU_ASSERT_EQUAL(w.rev, hrev);
	/* A delete wakes a waiter in another thread. */
	w.after = hrev;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, wait_main, &w), 0);
	usleep(300 * 1000);
	TIDE_UT_OK(tide_etcd_delete(e, "watched", 7));
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(w.rc, 1);
	CU_ASSERT(w.rev > hrev);
	CU_ASSERT_EQUAL(tide_etcd_get(e, "watched", 7, &kv, NULL), -ENOENT);
	tide_etcd_close(e);
}

static void
test_dead_member_and_restart(void)
{
	struct tide_etcd *e = NULL;
	struct tide_etcd_kv kv;
	char eps[128];
	int64_t id = 0;
	double t0;

	/* Nothing listens on port 1: a dead member first in the list. */
	snprintf(eps, sizeof(eps), "etcd://127.0.0.1:1;%s", endpoint);
	TIDE_UT_OK(tide_etcd_open(eps, 2000, &e));
	TIDE_UT_OK(tide_etcd_put(e, "durable", 7, "kept", 4, 0, NULL));
	/* etcd stopped: calls fail at once with -ECONNREFUSED, nothing hangs. */
	etcd_fixture_stop(&fx);
	t0 = tide_ut_now_s();
	CU_ASSERT_EQUAL(tide_etcd_get(e, "durable", 7, &kv, NULL), -ECONNREFUSED);
	CU_ASSERT_EQUAL(tide_etcd_lease_grant(e, 5, &id), -ECONNREFUSED);
	CU_ASSERT(tide_ut_now_s() - t0 < 2.0);
	/* Back (same data directory): the same handle works and the data is there. */
	CU_ASSERT_EQUAL_FATAL(etcd_fixture_restart(&fx), 0);
	TIDE_UT_OK(tide_etcd_get(e, "durable", 7, &kv, NULL));
	CU_ASSERT_STRING_EQUAL(kv.value, "kept");
	tide_etcd_kv_clear(&kv);
	tide_etcd_close(e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("etcd_it", suite_init, suite_clean);

	CU_add_test(s, "put_get_round_trip", test_put_get_round_trip);
	CU_add_test(s, "create_is_an_election", test_create_is_an_election);
	CU_add_test(s, "lease_keepalive_and_expiry", test_lease_keepalive_and_expiry);
	CU_add_test(s, "watch", test_watch);
	CU_add_test(s, "dead_member_and_restart", test_dead_member_and_restart);
}

TIDE_UT_MAIN(register_tests)
