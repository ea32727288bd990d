/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_mc.c: the ErrorCode -> errno table, the failover retry
 * policy (which errors are sent again, the deadline, nothing retried without
 * etcd), the master address forms, and every wrapper against the real master
 * server (store/master/server) running in this process on loopback.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_mc.h"
#include "store_mc_fixture.h"
#include "tide_clock.h"
#include "tide_etcd.h"
#include "tide_mc_server.h"
#include "tide_store.h"
#include "tide_ut.h"

#define SEG_BASE 0x7f0000000000ull
#define SEG_SIZE (64ull << 20)

static void
test_errno_table(void)
{
	static const struct {
		int32_t ec;
		int err;
	} t[] = {
		{TIDE_MC_EC_OK, 0},
		{TIDE_MC_EC_OBJECT_NOT_FOUND, -ENOENT},
		{TIDE_MC_EC_OBJECT_ALREADY_EXISTS, -EEXIST},
		{TIDE_MC_EC_NO_AVAILABLE_HANDLE, -ENOSPC},
		{TIDE_MC_EC_REPLICA_IS_NOT_READY, -EAGAIN},
		{TIDE_MC_EC_INVALID_REPLICA, -EAGAIN},
		{TIDE_MC_EC_OBJECT_HAS_LEASE, -EBUSY},
		{TIDE_MC_EC_OBJECT_HAS_REPLICATION_TASK, -EBUSY},
		{TIDE_MC_EC_INVALID_KEY, -EINVAL},
		{TIDE_MC_EC_INVALID_PARAMS, -EINVAL},
		{TIDE_MC_EC_INVALID_VERSION, -EPROTO},
		{TIDE_MC_EC_SEGMENT_NOT_FOUND, -ENODEV},
		{TIDE_MC_EC_CLIENT_NOT_FOUND, -ENODEV},
		{TIDE_MC_EC_ILLEGAL_CLIENT, -ENODEV},
		/* Everything else is the master's own trouble. */
		{TIDE_MC_EC_INTERNAL_ERROR, -EREMOTEIO},
		{TIDE_MC_EC_SEGMENT_ALREADY_EXISTS, -EREMOTEIO},
		{TIDE_MC_EC_LEASE_EXPIRED, -EREMOTEIO},
		{TIDE_MC_EC_TRANSFER_FAIL, -EREMOTEIO},
		{TIDE_MC_EC_RPC_FAIL, -EREMOTEIO},
		{TIDE_MC_EC_NOT_SUPPORTED, -EREMOTEIO},
		{-12345, -EREMOTEIO},
		{7, -EREMOTEIO},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CU_ASSERT_EQUAL(store_mc_errno(t[i].ec), t[i].err);
		/* A call that went through: its business code; one that failed: its own. */
		CU_ASSERT_EQUAL(store_mc_result(0, t[i].ec), t[i].err);
		CU_ASSERT_EQUAL(store_mc_result(-ETIMEDOUT, t[i].ec), -ETIMEDOUT);
		/* Each mapped error has its own words, not the engine's fallback. */
		CU_ASSERT_PTR_NOT_NULL(tide_store_strerror(t[i].err));
	}
	CU_ASSERT_STRING_EQUAL(tide_store_strerror(-EREMOTEIO), "master reported an error");
	CU_ASSERT_STRING_EQUAL(tide_store_strerror(1), "unknown error");
}

static void
test_vec_status(void)
{
	struct tide_mc_exp_void v[] = {{.ok = true},
				       {.ok = false, .err = TIDE_MC_EC_OBJECT_HAS_LEASE}};
	struct tide_mc_resp r;

	memset(&r, 0, sizeof(r));
	r.u.batch_status.v = v;
	r.u.batch_status.n = 2;
	CU_ASSERT_EQUAL(store_mc_vec_status(&r, 0), 0);
	CU_ASSERT_EQUAL(store_mc_vec_status(&r, 1), -EBUSY);
	CU_ASSERT_EQUAL(store_mc_vec_status(&r, 2), -EBADMSG);
}

/* The errors a leader that died or stepped down leaves behind. */
static const int conn_errs[] = {-ECONNRESET, -EPIPE, -ECONNREFUSED, -ENOTCONN, -ECONNABORTED};
/* Errors that say nothing about the leader: never sent again. */
static const int other_errs[] = {-ETIMEDOUT, -EIO, -ENOENT, -EREMOTEIO, -EPROTO, -EBADMSG, -EINVAL};

/* A master server in this process (NULL when it cannot start). */
static struct tide_mc_server *
server(void)
{
	return store_mc_fixture_server(true, 0);
}

/* "127.0.0.1:<port>" where nothing listens now (a server's, stopped). */
static void
dead_addr(char *buf, size_t len)
{
	struct tide_mc_server *srv = server();

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	snprintf(buf, len, "127.0.0.1:%u", tide_mc_server_rpc_port(srv));
	tide_mc_server_stop(srv);
	tide_mc_server_destroy(srv);
}

static int moves;

static void
count_move(void *arg)
{
	(void)arg;
	moves++;
}

static void
mc_init(struct store_mc *mc)
{
	memset(mc, 0, sizeof(*mc));
	tide_mc_pool_init(&mc->pool);
	mc->client_id.first = 0x1234;
	mc->client_id.second = 0x5678;
	mc->moved = count_move;
}

static void
mc_fini(struct store_mc *mc)
{
	store_mc_reset(mc);
	tide_mc_pool_fini(&mc->pool);
}

/* A store given host:port (no etcd) never retries: it reports the error at once. */
static void
test_failover_without_etcd(void)
{
	struct store_mc mc;
	uint64_t until = 0, t0 = tide_mono_ns();

	mc_init(&mc);
	for (size_t i = 0; i < sizeof(conn_errs) / sizeof(conn_errs[0]); i++)
		CU_ASSERT_FALSE(store_mc_failover_retry(&mc, conn_errs[i], &until));
	CU_ASSERT_EQUAL(until, 0);
	CU_ASSERT(tide_mono_ns() - t0 < 50000000ull); /* no step slept */
	mc_fini(&mc);
}

/* Through etcd: lost connections are retried, a step apart, until the deadline. */
static void
test_failover_policy(void)
{
	struct store_mc mc;
	char dead[64], ep[80];
	uint64_t until, now;
	int n = 0;

	mc_init(&mc);
	dead_addr(dead, sizeof(dead));
	snprintf(ep, sizeof(ep), "etcd://%s", dead);
	TIDE_UT_OK(tide_etcd_open(ep, 1000, &mc.etcd));
	snprintf(mc.etcd_key, sizeof(mc.etcd_key), "mooncake-store/mooncake_cluster/master_view");
	for (size_t i = 0; i < sizeof(other_errs) / sizeof(other_errs[0]); i++) {
		until = 0;
		CU_ASSERT_FALSE(store_mc_failover_retry(&mc, other_errs[i], &until));
		CU_ASSERT_EQUAL(until, 0);
	}
	for (size_t i = 0; i < sizeof(conn_errs) / sizeof(conn_errs[0]); i++) {
		until = 0;
		now = tide_mono_ns();
		CU_ASSERT_TRUE(store_mc_failover_retry(&mc, conn_errs[i], &until));
		/* The first failure starts an 8 s deadline; the step is 100 ms. */
		CU_ASSERT(until >= now + 8000000000ull && until < now + 8100000000ull);
		CU_ASSERT(tide_mono_ns() - now >= 100000000ull);
	}
	/* 350 ms left: a few more steps, then the error stands. */
	until = tide_mono_ns() + 350000000ull;
	while (store_mc_failover_retry(&mc, -ECONNREFUSED, &until) && n < 100)
		n++;
	CU_ASSERT(n >= 2 && n <= 4);
	CU_ASSERT(tide_mono_ns() >= until);
	CU_ASSERT_FALSE(store_mc_failover_retry(&mc, -ECONNRESET, &until));
	/* etcd did not answer: the pool still has no master, nobody was told. */
	CU_ASSERT_EQUAL(moves, 0);
	mc_fini(&mc);
	CU_ASSERT_PTR_NULL(mc.etcd);
}

/* The address forms: host:port directly; etcd:// that is malformed or has no leader. */
static void
test_set_master(void)
{
	struct store_mc mc;
	char dead[64], ep[80], cur[TIDE_MC_POOL_ADDR_MAX];

	unsetenv("MC_STORE_CLUSTER_ID");
	mc_init(&mc);
	TIDE_UT_OK(store_mc_set_master(&mc, "10.1.2.3:50051"));
	tide_mc_pool_master(&mc.pool, cur, sizeof(cur));
	CU_ASSERT_STRING_EQUAL(cur, "10.1.2.3:50051");
	CU_ASSERT_PTR_NULL(mc.etcd);
	CU_ASSERT_PTR_NULL(mc.pool.relocate);
	store_mc_reset(&mc);
	tide_mc_pool_master(&mc.pool, cur, sizeof(cur));
	CU_ASSERT_STRING_EQUAL(cur, "");
	CU_ASSERT_EQUAL(store_mc_set_master(&mc, "etcd://"), -EINVAL);
	CU_ASSERT_PTR_NULL(mc.etcd);
	dead_addr(dead, sizeof(dead));
	snprintf(ep, sizeof(ep), "etcd://%s", dead);
	/* etcd unreachable: no leader, said as -ENOTCONN; the lookup stays wired for later. */
	CU_ASSERT_EQUAL(store_mc_set_master(&mc, ep), -ENOTCONN);
	CU_ASSERT_PTR_NOT_NULL(mc.etcd);
	CU_ASSERT_PTR_NOT_NULL(mc.pool.relocate);
	CU_ASSERT_STRING_EQUAL(mc.etcd_key, "mooncake-store/mooncake_cluster/master_view");
	CU_ASSERT(store_mc_locate(&mc) < 0);
	CU_ASSERT_EQUAL(moves, 0);
	mc_fini(&mc);
	CU_ASSERT_PTR_NULL(mc.etcd);
	CU_ASSERT_PTR_NULL(mc.pool.relocate);
}

/* A master nobody runs, no etcd: every call fails once with the connect's error. */
static void
test_calls_without_master(void)
{
	struct store_mc mc;
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct tide_mc_resp resp;
	char dead[64];
	uint64_t t0 = tide_mono_ns();

	mc_init(&mc);
	dead_addr(dead, sizeof(dead));
	TIDE_UT_OK(store_mc_set_master(&mc, dead));
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "k"), -ECONNREFUSED);
	CU_ASSERT_EQUAL(store_mc_replica_list(&mc, "k", &resp), -ECONNREFUSED);
	CU_ASSERT_EQUAL(store_mc_put_start(&mc, "k", 8, &cfg, false, &resp), -ECONNREFUSED);
	CU_ASSERT_EQUAL(store_mc_put_end(&mc, "k", false, 0), -ECONNREFUSED);
	/* A put that failed keeps its own error. */
	CU_ASSERT_EQUAL(store_mc_put_end(&mc, "k", false, -EIO), -EIO);
	CU_ASSERT_EQUAL(store_mc_remove(&mc, "k", false), -ECONNREFUSED);
	CU_ASSERT_EQUAL(store_mc_remove_all(&mc, false), -ECONNREFUSED);
	CU_ASSERT_EQUAL(store_mc_remove_by_regex(&mc, "k.*", false), -ECONNREFUSED);
	CU_ASSERT(tide_mono_ns() - t0 < 2000000000ull); /* nothing waited for a failover */
	mc_fini(&mc);
}

/* Mount a segment for mc's client, as a store's setup does. */
static void
mount(struct store_mc *mc)
{
	store_mc_fixture_mount(mc, SEG_BASE, SEG_SIZE);
}

/* PutStart of key (len bytes) whose one replica lies in the mounted segment. */
static void
put_start_ok(struct store_mc *mc, const char *key, uint64_t len)
{
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct tide_mc_resp resp;
	const struct tide_mc_replica_desc *d;

	TIDE_UT_OK(store_mc_put_start(mc, key, len, &cfg, false, &resp));
	CU_ASSERT_EQUAL_FATAL(resp.u.put_start.val.n, 1);
	d = &resp.u.put_start.val.v[0];
	CU_ASSERT_EQUAL(d->kind, TIDE_MC_RK_MEMORY);
	CU_ASSERT(d->u.memory.size >= len);
	CU_ASSERT(d->u.memory.buffer_address >= SEG_BASE &&
		  d->u.memory.buffer_address + len <= SEG_BASE + SEG_SIZE);
	tide_mc_resp_free(&resp);
}

static void
test_single_key_calls(void)
{
	struct tide_mc_server *srv = server();
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct tide_mc_resp resp;
	struct store_mc mc;
	char addr[64];

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", tide_mc_server_rpc_port(srv));
	mc_init(&mc);
	TIDE_UT_OK(store_mc_set_master(&mc, addr));
	/* No segment anywhere: the master has no room (NO_AVAILABLE_HANDLE). */
	CU_ASSERT_EQUAL(store_mc_put_start(&mc, "a", 100, &cfg, false, &resp), -ENOSPC);
	mount(&mc);
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "a"), 0);
	CU_ASSERT_EQUAL(store_mc_replica_list(&mc, "a", &resp), -ENOENT);
	CU_ASSERT_EQUAL(store_mc_remove(&mc, "a", false), -ENOENT);
	/* Start and end: visible, one COMPLETE replica of the size put. */
	put_start_ok(&mc, "a", 100);
	TIDE_UT_OK(store_mc_put_end(&mc, "a", false, 0));
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "a"), 1);
	TIDE_UT_OK(store_mc_replica_list(&mc, "a", &resp));
	CU_ASSERT_EQUAL_FATAL(resp.u.replica_list.val.replicas.n, 1);
	CU_ASSERT_EQUAL(resp.u.replica_list.val.replicas.v[0].status, TIDE_MC_RS_COMPLETE);
	CU_ASSERT_EQUAL(resp.u.replica_list.val.replicas.v[0].u.memory.size, 100);
	tide_mc_resp_free(&resp);
	/* Put again: the key exists (-EEXIST, a successful put with nothing to write). */
	CU_ASSERT_EQUAL(store_mc_put_start(&mc, "a", 100, &cfg, false, &resp), -EEXIST);
	/* A put whose transfer failed is revoked: its error, and the key never shows. */
	put_start_ok(&mc, "b", 10);
	CU_ASSERT_EQUAL(store_mc_put_end(&mc, "b", false, -EIO), -EIO);
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "b"), 0);
	/* PutEnd of a put nobody started: the master's error, mapped. */
	CU_ASSERT_EQUAL(store_mc_put_end(&mc, "nobody", false, 0), -ENOENT);
	/* Removes: by name, by pattern (a count), all. */
	put_start_ok(&mc, "r1", 10);
	TIDE_UT_OK(store_mc_put_end(&mc, "r1", false, 0));
	put_start_ok(&mc, "r2", 10);
	TIDE_UT_OK(store_mc_put_end(&mc, "r2", false, 0));
	CU_ASSERT_EQUAL(store_mc_remove_by_regex(&mc, "^r[0-9]$", true), 2);
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "r1"), 0);
	TIDE_UT_OK(store_mc_remove(&mc, "a", true));
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "a"), 0);
	put_start_ok(&mc, "c", 10);
	TIDE_UT_OK(store_mc_put_end(&mc, "c", false, 0));
	CU_ASSERT_EQUAL(store_mc_remove_all(&mc, true), 1);
	mc_fini(&mc);
	tide_mc_server_stop(srv);
	tide_mc_server_destroy(srv);
}

static void
test_batch_calls(void)
{
	struct tide_mc_server *srv = server();
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	const char *keys[3] = {"k0", "k1", "k2"};
	struct tide_mc_str ks[3];
	struct tide_mc_object_meta metas[3];
	struct tide_mc_resp resp;
	struct store_mc mc;
	uint64_t slens[3] = {10, 20, 30};
	bool pending[3] = {true, true, true};
	int rcs[3] = {0, -EIO, 0};
	size_t idx[3];
	char addr[64];

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", tide_mc_server_rpc_port(srv));
	mc_init(&mc);
	TIDE_UT_OK(store_mc_set_master(&mc, addr));
	mount(&mc);
	for (int i = 0; i < 3; i++)
		ks[i] = (struct tide_mc_str){(char *)keys[i], 2};
	TIDE_UT_OK(store_mc_batch_put_start(&mc, ks, slens, 3, &cfg, false, &resp));
	CU_ASSERT_EQUAL_FATAL(resp.u.batch_put_start.n, 3);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_TRUE(resp.u.batch_put_start.v[i].ok);
	tide_mc_resp_free(&resp);
	/* Key 1's transfer failed: ended are 0 and 2, revoked is 1. */
	store_mc_batch_finish(&mc, keys, 3, false, pending, rcs, ks, metas, idx);
	CU_ASSERT(rcs[0] == 0 && rcs[1] == -EIO && rcs[2] == 0);
	TIDE_UT_OK(store_mc_batch_keys(&mc, TIDE_MC_FN_BATCH_EXIST_KEY, keys, 3, false, ks, &resp));
	CU_ASSERT_EQUAL_FATAL(resp.u.batch_exist.n, 3);
	CU_ASSERT(resp.u.batch_exist.v[0].ok && resp.u.batch_exist.v[0].val);
	CU_ASSERT(!(resp.u.batch_exist.v[1].ok && resp.u.batch_exist.v[1].val));
	CU_ASSERT(resp.u.batch_exist.v[2].ok && resp.u.batch_exist.v[2].val);
	tide_mc_resp_free(&resp);
	TIDE_UT_OK(store_mc_batch_replica_list(&mc, keys, 3, ks, &resp));
	CU_ASSERT_EQUAL_FATAL(resp.u.batch_replica_list.n, 3);
	CU_ASSERT_TRUE(resp.u.batch_replica_list.v[2].ok);
	CU_ASSERT_EQUAL(resp.u.batch_replica_list.v[2].val.replicas.v[0].u.memory.size, 30);
	CU_ASSERT_FALSE(resp.u.batch_replica_list.v[1].ok);
	CU_ASSERT_EQUAL(store_mc_errno(resp.u.batch_replica_list.v[1].err), -ENOENT);
	tide_mc_resp_free(&resp);
	/* An End the master refuses (the put was never started) fails that key. */
	rcs[0] = rcs[1] = rcs[2] = 0;
	pending[0] = pending[2] = false;
	store_mc_batch_finish(&mc, keys, 3, false, pending, rcs, ks, metas, idx);
	CU_ASSERT(rcs[0] == 0 && rcs[1] == -ENOENT && rcs[2] == 0);
	TIDE_UT_OK(store_mc_batch_keys(&mc, TIDE_MC_FN_BATCH_REMOVE, keys, 3, true, ks, &resp));
	CU_ASSERT_EQUAL(store_mc_vec_status(&resp, 0), 0);
	CU_ASSERT_EQUAL(store_mc_vec_status(&resp, 1), -ENOENT);
	CU_ASSERT_EQUAL(store_mc_vec_status(&resp, 2), 0);
	tide_mc_resp_free(&resp);
	mc_fini(&mc);
	tide_mc_server_stop(srv);
	tide_mc_server_destroy(srv);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_mc", NULL, NULL);

	CU_add_test(s, "errno_table", test_errno_table);
	CU_add_test(s, "vec_status", test_vec_status);
	CU_add_test(s, "failover_without_etcd", test_failover_without_etcd);
	CU_add_test(s, "failover_policy", test_failover_policy);
	CU_add_test(s, "set_master", test_set_master);
	CU_add_test(s, "calls_without_master", test_calls_without_master);
	CU_add_test(s, "single_key_calls", test_single_key_calls);
	CU_add_test(s, "batch_calls", test_batch_calls);
}

TIDE_UT_MAIN(register_tests)
