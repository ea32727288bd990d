/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/lib/etcd against a real etcd (Debian's etcd-server, started here on
 * loopback ports with its own data directory): round trips with binary
 * values read back by etcdctl, create-if-absent as Mooncake's election uses
 * it, leases (keepalive, revoke, expiry deleting the key), watches, range
 * reads paged by a limit and range deletes over binary keys, writes fenced on
 * a key's create_revision, compaction, an endpoint list with a dead member,
 * and etcd stopped and started again.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
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

/* Key i of the paging test: prefix "pg\xff", then i big-endian in two bytes,
 * so the keys hold 0x00 and 0xff bytes and sort in the order of i. */
static const char page_prefix[] = {'p', 'g', (char)0xff};

static void
page_key(int i, char key[5])
{
	memcpy(key, page_prefix, sizeof(page_prefix));
	key[3] = (char)(i >> 8);
	key[4] = (char)(i & 0xff);
}

static void
page_value(int i, char v[4])
{
	v[0] = 0;
	v[1] = (char)0xff;
	v[2] = (char)(i & 0xff);
	v[3] = 'v';
}

static bool
is_page_kv(const struct tide_etcd_kv *kv, int i)
{
	char key[5], v[4];

	page_key(i, key);
	page_value(i, v);
	return kv->key_len == sizeof(key) && memcmp(kv->key, key, sizeof(key)) == 0 &&
	       kv->value_len == sizeof(v) && memcmp(kv->value, v, sizeof(v)) == 0 &&
	       kv->create_revision > 0;
}

static void
test_range_pages_and_delete_range(void)
{
	struct tide_etcd *e = open_etcd();
	struct tide_etcd_kv *kvs = NULL, kv;
	char key[5], v[4], end[sizeof(page_prefix)], from[8];
	size_t n = 0, end_len, from_len = sizeof(page_prefix);
	int64_t hrev = 0, hrev0 = 0, deleted = 0;
	bool more = true;
	int seen = 0, pages = 0;

	/* "pg\xff" ends before "ph": the trailing 0xff is dropped. */
	end_len = tide_etcd_prefix_end(page_prefix, sizeof(page_prefix), end);
	CU_ASSERT_EQUAL_FATAL(end_len, 2);
	CU_ASSERT(memcmp(end, "ph", 2) == 0);
	for (int i = 0; i < 300; i++) {
		page_key(i, key);
		page_value(i, v);
		TIDE_UT_OK(tide_etcd_put(e, key, sizeof(key), v, sizeof(v), 0, NULL));
	}
	/* Neighbours outside the prefix: just below it, and its range_end itself. */
	TIDE_UT_OK(tide_etcd_put(e, "pg\xfe\xff", 4, "below", 5, 0, NULL));
	TIDE_UT_OK(tide_etcd_put(e, "ph", 2, "end", 3, 0, NULL));
	/* Pages of 100; the next starts just past the last key (last key + 0x00). */
	memcpy(from, page_prefix, from_len);
	while (more && pages < 5) {
		TIDE_UT_OK(tide_etcd_range(e, from, from_len, end, end_len, 100, &kvs, &n, &more,
					   &hrev));
		CU_ASSERT_EQUAL(n, 100);
		CU_ASSERT_EQUAL(more, pages < 2);
		if (pages++ == 0)
			hrev0 = hrev;
		CU_ASSERT_EQUAL(hrev, hrev0); /* nothing written in between */
		for (size_t i = 0; i < n; i++)
			CU_ASSERT(is_page_kv(&kvs[i], seen++));
		if (n > 0 && kvs[n - 1].key_len < sizeof(from)) {
			memcpy(from, kvs[n - 1].key, kvs[n - 1].key_len);
			from[kvs[n - 1].key_len] = '\0';
			from_len = kvs[n - 1].key_len + 1;
		}
		tide_etcd_kvs_free(kvs, n);
	}
	CU_ASSERT_EQUAL(pages, 3);
	CU_ASSERT_EQUAL(seen, 300);
	/* No limit: all of them in one reply, nothing more. */
	TIDE_UT_OK(tide_etcd_range(e, page_prefix, sizeof(page_prefix), end, end_len, 0, &kvs, &n,
				   &more, NULL));
	CU_ASSERT_EQUAL_FATAL(n, 300);
	CU_ASSERT(!more);
	CU_ASSERT(is_page_kv(&kvs[0], 0) && is_page_kv(&kvs[255], 255) &&
		  is_page_kv(&kvs[299], 299));
	tide_etcd_kvs_free(kvs, n);
	/* range_end "\0": every key from "pg\xff\x01\x2b" (299) on, "ph" included. */
	page_key(299, key);
	TIDE_UT_OK(tide_etcd_range(e, key, sizeof(key), "", 1, 0, &kvs, &n, NULL, NULL));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(is_page_kv(&kvs[0], 299));
	CU_ASSERT(kvs[1].key_len == 2 && memcmp(kvs[1].key, "ph", 2) == 0);
	tide_etcd_kvs_free(kvs, n);
	/* Delete the prefix: all 300, and only them. */
	TIDE_UT_OK(tide_etcd_delete_range(e, page_prefix, sizeof(page_prefix), end, end_len,
					  &deleted));
	CU_ASSERT_EQUAL(deleted, 300);
	TIDE_UT_OK(tide_etcd_range(e, page_prefix, sizeof(page_prefix), end, end_len, 0, &kvs, &n,
				   &more, NULL));
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NULL(kvs);
	TIDE_UT_OK(tide_etcd_delete_range(e, page_prefix, sizeof(page_prefix), end, end_len,
					  &deleted));
	CU_ASSERT_EQUAL(deleted, 0);
	TIDE_UT_OK(tide_etcd_get(e, "pg\xfe\xff", 4, &kv, NULL));
	CU_ASSERT_STRING_EQUAL(kv.value, "below");
	tide_etcd_kv_clear(&kv);
	TIDE_UT_OK(tide_etcd_get(e, "ph", 2, &kv, NULL));
	tide_etcd_kv_clear(&kv);
	/* Just key (range_end NULL). */
	TIDE_UT_OK(tide_etcd_delete_range(e, "ph", 2, NULL, 0, &deleted));
	CU_ASSERT_EQUAL(deleted, 1);
	TIDE_UT_OK(tide_etcd_delete(e, "pg\xfe\xff", 4));
	tide_etcd_close(e);
}

static int64_t
create_rev_of(struct tide_etcd *e, const char *key)
{
	struct tide_etcd_kv kv;
	int64_t rev = -1;

	if (tide_etcd_get(e, key, strlen(key), &kv, NULL) == 0)
		rev = kv.create_revision;
	tide_etcd_kv_clear(&kv);
	return rev;
}

static bool
exists(struct tide_etcd *e, const char *key)
{
	struct tide_etcd_kv kv;
	int rc = tide_etcd_get(e, key, strlen(key), &kv, NULL);

	tide_etcd_kv_clear(&kv);
	CU_ASSERT(rc == 0 || rc == -ENOENT);
	return rc == 0;
}

static void
test_txn_fenced_on_create_revision(void)
{
	struct tide_etcd *e = open_etcd();
	const char *fence = "fence/leader";
	struct tide_etcd_kv kv;
	int64_t lease = 0, rev = 0, r1, r2, deleted = 0;
	double deadline;
	const struct tide_etcd_op ops[] = {
		{.type = TIDE_ETCD_OP_PUT,
		 .key = "st/a",
		 .key_len = 4,
		 .value = "1",
		 .value_len = 1,
		 .lease = 0 /* set below */},
		{.type = TIDE_ETCD_OP_PUT,
		 .key = "st/b",
		 .key_len = 4,
		 .value = "\0\xff",
		 .value_len = 2},
		{.type = TIDE_ETCD_OP_DELETE,
		 .key = "st/old/",
		 .key_len = 7,
		 .range_end = "st/old0",
		 .range_end_len = 7},
	};
	struct tide_etcd_op mine[3];
	const struct tide_etcd_op late[] = {
		{.type = TIDE_ETCD_OP_PUT,
		 .key = "st/c",
		 .key_len = 4,
		 .value = "x",
		 .value_len = 1},
		{.type = TIDE_ETCD_OP_DELETE, .key = "st/b", .key_len = 4},
	};

	TIDE_UT_OK(tide_etcd_put(e, fence, strlen(fence), "a", 1, 0, NULL));
	r1 = create_rev_of(e, fence);
	CU_ASSERT_FATAL(r1 > 0);
	TIDE_UT_OK(tide_etcd_put(e, "st/old/1", 8, "o", 1, 0, NULL));
	TIDE_UT_OK(tide_etcd_put(e, "st/old/2", 8, "o", 1, 0, NULL));
	TIDE_UT_OK(tide_etcd_lease_grant(e, 30, &lease));
	memcpy(mine, ops, sizeof(mine));
	mine[0].lease = lease;
	/* The compare holds: all three, in one revision. */
	TIDE_UT_OK(tide_etcd_txn_if_created(e, fence, strlen(fence), r1, mine, 3, &rev));
	CU_ASSERT(rev > r1);
	TIDE_UT_OK(tide_etcd_get(e, "st/a", 4, &kv, NULL));
	CU_ASSERT_EQUAL(kv.mod_revision, rev);
	CU_ASSERT_EQUAL(kv.lease, lease);
	CU_ASSERT_STRING_EQUAL(kv.value, "1");
	tide_etcd_kv_clear(&kv);
	TIDE_UT_OK(tide_etcd_get(e, "st/b", 4, &kv, NULL));
	CU_ASSERT(kv.value_len == 2 && memcmp(kv.value, "\0\xff", 2) == 0);
	CU_ASSERT_EQUAL(kv.mod_revision, rev);
	tide_etcd_kv_clear(&kv);
	CU_ASSERT(!exists(e, "st/old/1") && !exists(e, "st/old/2"));
	/* The key re-created (another create_revision): the old holder writes nothing. */
	TIDE_UT_OK(tide_etcd_delete(e, fence, strlen(fence)));
	TIDE_UT_OK(tide_etcd_put(e, fence, strlen(fence), "b", 1, 0, NULL));
	r2 = create_rev_of(e, fence);
	CU_ASSERT(r2 > r1);
	rev = -1;
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, fence, strlen(fence), r1, late, 2, &rev),
			-ESTALE);
	CU_ASSERT_EQUAL(rev, -1);
	CU_ASSERT(!exists(e, "st/c"));
	CU_ASSERT(exists(e, "st/b"));
	/* ... nor when it no longer exists. */
	TIDE_UT_OK(tide_etcd_delete(e, fence, strlen(fence)));
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, fence, strlen(fence), r2, late, 2, NULL),
			-ESTALE);
	CU_ASSERT(!exists(e, "st/c"));
	CU_ASSERT(exists(e, "st/b"));
	/* create_rev 0: only while the key does not exist (as tide_etcd_create). */
	TIDE_UT_OK(tide_etcd_txn_if_created(e, fence, strlen(fence), 0, late, 2, NULL));
	CU_ASSERT(exists(e, "st/c"));
	CU_ASSERT(!exists(e, "st/b"));
	TIDE_UT_OK(tide_etcd_put(e, fence, strlen(fence), "c", 1, 0, NULL));
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, fence, strlen(fence), 0, ops, 1, NULL),
			-ESTALE);
	/* One key written twice: etcd refuses the whole transaction. */
	r2 = create_rev_of(e, fence);
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, fence, strlen(fence), r2,
						 (const struct tide_etcd_op[]){ops[1], late[1]}, 2,
						 NULL),
			-EINVAL);
	/* Revoking the lease takes the put attached to it (and only it). */
	TIDE_UT_OK(tide_etcd_lease_revoke(e, lease));
	deadline = tide_ut_now_s() + 5;
	while (exists(e, "st/a") && tide_ut_now_s() < deadline)
		usleep(50 * 1000);
	CU_ASSERT(!exists(e, "st/a"));
	CU_ASSERT(exists(e, "st/c"));
	/* A put on the revoked lease: -ENOENT, nothing written. */
	CU_ASSERT_EQUAL(tide_etcd_txn_if_created(e, fence, strlen(fence), r2, mine, 3, NULL),
			-ENOENT);
	CU_ASSERT(!exists(e, "st/b"));
	TIDE_UT_OK(tide_etcd_delete_range(e, "st/", 3, "st0", 3, &deleted));
	CU_ASSERT_EQUAL(deleted, 1); /* st/c */
	TIDE_UT_OK(tide_etcd_delete(e, fence, strlen(fence)));
	tide_etcd_close(e);
}

/* Whether etcdctl can read key at revision rev (fails once it is compacted). */
static bool
etcdctl_reads_at(const char *key, int64_t rev)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "ETCDCTL_API=3 etcdctl --endpoints=%s get --rev=%" PRId64 " '%s' >/dev/null 2>&1",
		 endpoint, rev, key);
	return system(cmd) == 0;
}

static void
test_compaction(void)
{
	struct tide_etcd *e = open_etcd();
	struct tide_etcd_kv kv, *kvs = NULL;
	size_t n = 0;
	int64_t r1 = 0, r2 = 0, hrev = 0;

	TIDE_UT_OK(tide_etcd_put(e, "hist", 4, "1", 1, 0, &r1));
	TIDE_UT_OK(tide_etcd_put(e, "hist", 4, "2", 1, 0, &r2));
	CU_ASSERT(etcdctl_reads_at("hist", r1));
	TIDE_UT_OK(tide_etcd_compact(e, r2));
	CU_ASSERT(!etcdctl_reads_at("hist", r1)); /* the old revision is gone */
	/* Reading the present still works. */
	TIDE_UT_OK(tide_etcd_get(e, "hist", 4, &kv, &hrev));
	CU_ASSERT_STRING_EQUAL(kv.value, "2");
	CU_ASSERT_EQUAL(kv.mod_revision, r2);
	tide_etcd_kv_clear(&kv);
	TIDE_UT_OK(tide_etcd_range(e, "hist", 4, "hisu", 4, 10, &kvs, &n, NULL, NULL));
	CU_ASSERT_EQUAL(n, 1);
	tide_etcd_kvs_free(kvs, n);
	/* Again, or an older revision: already compacted, still 0. */
	TIDE_UT_OK(tide_etcd_compact(e, r2));
	TIDE_UT_OK(tide_etcd_compact(e, r1));
	/* Past the head: -EINVAL; not a revision: -EINVAL. */
	CU_ASSERT_EQUAL(tide_etcd_compact(e, hrev + 1000), -EINVAL);
	CU_ASSERT_EQUAL(tide_etcd_compact(e, 0), -EINVAL);
	TIDE_UT_OK(tide_etcd_delete(e, "hist", 4));
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
	CU_add_test(s, "range_pages_and_delete_range", test_range_pages_and_delete_range);
	CU_add_test(s, "txn_fenced_on_create_revision", test_txn_fenced_on_create_revision);
	CU_add_test(s, "compaction", test_compaction);
	CU_add_test(s, "dead_member_and_restart", test_dead_member_and_restart);
}

TIDE_UT_MAIN(register_tests)
