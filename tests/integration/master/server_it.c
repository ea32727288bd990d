/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master server over real loopback sockets, driven by the client
 * library: the reference capture's client sequence (semantics, then a
 * byte-level replay of the captured request frames compared with the
 * captured answers), pipelining, many connections, hostile frames, the
 * admin HTTP port and the HTTP metadata server; hostile peers of issue 20:
 * regexes over the bounds, floods of idle HTTP connections, slow heads and
 * bodies, oversized bodies and a metadata store filled up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tide_mc_client.h"
#include "tide_mc_server.h"
#include "tide_mc_table.h"
#include "tide_ut.h"

#ifndef MC_VECTORS_DIR
#error "MC_VECTORS_DIR must name tests/unit/store/master/vectors"
#endif

static const struct tide_mc_uuid client_a = {0x1111, 0x2222};
static const struct tide_mc_uuid seg_a = {0xaaaa, 0xbbbb};
#define SEG_BASE 0x7f0000000000ull
#define SEG_SIZE (512ull << 20)

/* Set up HTTP bounds of the next start_server() (0: defaults). */
static struct {
	uint32_t admin_conns, meta_conns, max_body, head_ms, body_ms, idle_ms;
	uint64_t meta_bytes;
	const char *allow;       /* allow_networks */
	bool defer_rpc;          /* the RPC port opens at tide_mc_server_start_rpc() */
	const char *rpc_address; /* NULL: 127.0.0.1 */
} http_lim;

static struct tide_mc_server *
start_server(void)
{
	struct tide_mc_server_opts o;
	struct tide_mc_server *s = NULL;

	tide_mc_server_opts_init(&o, sizeof(o));
	if (http_lim.admin_conns)
		o.http_admin_max_conns = http_lim.admin_conns;
	if (http_lim.meta_conns)
		o.http_metadata_max_conns = http_lim.meta_conns;
	if (http_lim.max_body)
		o.http_max_body = http_lim.max_body;
	if (http_lim.meta_bytes)
		o.http_metadata_max_bytes = http_lim.meta_bytes;
	if (http_lim.head_ms)
		o.http_header_timeout_ms = http_lim.head_ms;
	if (http_lim.body_ms)
		o.http_body_timeout_ms = http_lim.body_ms;
	if (http_lim.idle_ms)
		o.http_idle_timeout_ms = http_lim.idle_ms;
	o.allow_networks = http_lim.allow;
	o.defer_rpc = http_lim.defer_rpc;
	o.rpc_address = http_lim.rpc_address != NULL ? http_lim.rpc_address : "127.0.0.1";
	memset(&http_lim, 0, sizeof(http_lim));
	o.rpc_port = 0;
	o.metrics_host = "127.0.0.1";
	o.metrics_port = 0;
	o.enable_http_metadata = true;
	o.http_metadata_host = "127.0.0.1";
	o.http_metadata_port = 0;
	o.rpc_thread_num = 2;
	o.tick_ms = 10;
	o.max_frame_body = 1u << 20;
	CU_ASSERT_EQUAL_FATAL(tide_mc_server_create(&o, &s), 0);
	CU_ASSERT(o.defer_rpc || tide_mc_server_rpc_port(s) != 0);
	CU_ASSERT_NOT_EQUAL(tide_mc_server_metrics_port(s), 0);
	CU_ASSERT_NOT_EQUAL(tide_mc_server_metadata_port(s), 0);
	return s;
}

static struct tide_mc_client *
connect_to(struct tide_mc_server *s)
{
	struct tide_mc_client *c = NULL;

	CU_ASSERT_EQUAL_FATAL(
		tide_mc_client_connect("127.0.0.1", tide_mc_server_rpc_port(s), 5000, &c), 0);
	return c;
}

static struct tide_mc_segment
segment(void)
{
	struct tide_mc_segment g;

	memset(&g, 0, sizeof(g));
	g.id = seg_a;
	g.name.ptr = (char *)"127.0.0.1:13333";
	g.name.len = strlen(g.name.ptr);
	g.base = SEG_BASE;
	g.size = SEG_SIZE;
	g.te_endpoint.ptr = (char *)"127.0.0.1:15366";
	g.te_endpoint.len = strlen(g.te_endpoint.ptr);
	g.protocol.ptr = (char *)"tcp";
	g.protocol.len = 3;
	return g;
}

static void
mount_ok(struct tide_mc_client *c)
{
	struct tide_mc_segment g = segment();
	int32_t ec = 1, st = 0;

	TIDE_UT_OK(tide_mc_client_mount(c, &g, &client_a, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	TIDE_UT_OK(tide_mc_client_remount(c, &g, 1, &client_a, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	TIDE_UT_OK(tide_mc_client_ping(c, &client_a, &st, &ec));
	CU_ASSERT_EQUAL(st, TIDE_MC_CLIENT_OK);
}

/* ------------------------------------------------------------------------------------------ */

static void
test_client_sequence(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c = connect_to(s);
	struct tide_mc_segment g = segment();
	struct tide_mc_resp resp;
	struct tide_mc_req req;
	const struct tide_mc_replica_desc *d;
	char ver[16];
	int32_t ec = 1, st = 0;
	bool ex = false;

	TIDE_UT_OK(tide_mc_client_service_ready(c, ver, sizeof(ver), &ec));
	CU_ASSERT_STRING_EQUAL(ver, "2.0.0");

	memset(&req, 0, sizeof(req));
	req.fn = TIDE_MC_FN_GET_STORAGE_CONFIG;
	TIDE_UT_OK(tide_mc_client_call(c, &req, &resp, NULL));
	CU_ASSERT(resp.u.storage_config.ok);
	CU_ASSERT_EQUAL(resp.u.storage_config.val.fsdir.len, 0);
	CU_ASSERT(resp.u.storage_config.val.enable_disk_eviction);
	tide_mc_resp_free(&resp);

	TIDE_UT_OK(tide_mc_client_mount(c, &g, &client_a, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	TIDE_UT_OK(tide_mc_client_ping(c, &client_a, &st, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT_EQUAL(st, TIDE_MC_CLIENT_NEED_REMOUNT);
	TIDE_UT_OK(tide_mc_client_remount(c, &g, 1, &client_a, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	TIDE_UT_OK(tide_mc_client_ping(c, &client_a, &st, &ec));
	CU_ASSERT_EQUAL(st, TIDE_MC_CLIENT_OK);

	/* FetchTasks with the task manager off: ok, empty. */
	memset(&req, 0, sizeof(req));
	req.fn = TIDE_MC_FN_FETCH_TASKS;
	req.u.fetch_tasks.client_id = client_a;
	req.u.fetch_tasks.batch_size = 16;
	TIDE_UT_OK(tide_mc_client_call(c, &req, &resp, NULL));
	CU_ASSERT(resp.u.tasks.ok);
	CU_ASSERT_EQUAL(resp.u.tasks.val.n, 0);
	tide_mc_resp_free(&resp);

	TIDE_UT_OK(tide_mc_client_put_start(c, &client_a, "smoke_key", 140, NULL, &resp, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT_EQUAL_FATAL(resp.u.put_start.val.n, 1);
	d = &resp.u.put_start.val.v[0];
	CU_ASSERT_EQUAL(d->kind, TIDE_MC_RK_MEMORY);
	CU_ASSERT_EQUAL(d->status, TIDE_MC_RS_PROCESSING);
	CU_ASSERT_EQUAL(d->u.memory.size, 140);
	CU_ASSERT(d->u.memory.buffer_address >= SEG_BASE &&
		  d->u.memory.buffer_address + 140 <= SEG_BASE + SEG_SIZE);
	CU_ASSERT_EQUAL(d->u.memory.transport_endpoint.len, strlen("127.0.0.1:15366"));
	CU_ASSERT_NSTRING_EQUAL(d->u.memory.transport_endpoint.ptr, "127.0.0.1:15366", 15);
	tide_mc_resp_free(&resp);

	/* Not readable until PutEnd. */
	TIDE_UT_OK(tide_mc_client_get_replica_list(c, "smoke_key", NULL, &ec));
	CU_ASSERT_EQUAL(ec, TIDE_MC_EC_REPLICA_IS_NOT_READY);
	TIDE_UT_OK(tide_mc_client_put_end(c, &client_a, "smoke_key", &ec));
	CU_ASSERT_EQUAL(ec, 0);
	/* A duplicate put is refused. */
	TIDE_UT_OK(tide_mc_client_put_start(c, &client_a, "smoke_key", 140, NULL, NULL, &ec));
	CU_ASSERT_EQUAL(ec, TIDE_MC_EC_OBJECT_ALREADY_EXISTS);

	TIDE_UT_OK(tide_mc_client_get_replica_list(c, "smoke_key", &resp, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT_EQUAL_FATAL(resp.u.replica_list.val.replicas.n, 1);
	CU_ASSERT_EQUAL(resp.u.replica_list.val.replicas.v[0].status, TIDE_MC_RS_COMPLETE);
	CU_ASSERT_EQUAL(resp.u.replica_list.val.lease_ttl_ms, 10000);
	tide_mc_resp_free(&resp);

	TIDE_UT_OK(tide_mc_client_exist_key(c, "smoke_key", &ex, &ec));
	CU_ASSERT(ex);
	TIDE_UT_OK(tide_mc_client_remove(c, "smoke_key", false, &ec));
	CU_ASSERT_EQUAL(ec, TIDE_MC_EC_OBJECT_HAS_LEASE);
	TIDE_UT_OK(tide_mc_client_remove(c, "smoke_key", true, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	TIDE_UT_OK(tide_mc_client_exist_key(c, "smoke_key", &ex, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT(!ex);
	TIDE_UT_OK(tide_mc_client_remove(c, "smoke_key", true, &ec));
	CU_ASSERT_EQUAL(ec, TIDE_MC_EC_OBJECT_NOT_FOUND);

	/* Revoke path. */
	TIDE_UT_OK(tide_mc_client_put_start(c, &client_a, "k2", 64, NULL, NULL, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	TIDE_UT_OK(tide_mc_client_put_revoke(c, &client_a, "k2", &ec));
	CU_ASSERT_EQUAL(ec, 0);
	TIDE_UT_OK(tide_mc_client_exist_key(c, "k2", &ex, &ec));
	CU_ASSERT(!ex);

	TIDE_UT_OK(tide_mc_client_unmount(c, &seg_a, &client_a, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	/* Nothing left to allocate in. */
	TIDE_UT_OK(tide_mc_client_put_start(c, &client_a, "k3", 64, NULL, NULL, &ec));
	CU_ASSERT_NOT_EQUAL(ec, 0);

	tide_mc_client_close(c);
	tide_mc_server_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Byte-level replay of the capture                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Decoded comparison for the results carrying a replica id (assigned by the master). */
static void
same_replicas(const struct tide_mc_replica_desc_vec *a, const struct tide_mc_replica_desc_vec *b)
{
	size_t i;

	CU_ASSERT_EQUAL_FATAL(a->n, b->n);
	for (i = 0; i < a->n; i++) {
		CU_ASSERT_EQUAL(a->v[i].kind, b->v[i].kind);
		CU_ASSERT_EQUAL(a->v[i].status, b->v[i].status);
		CU_ASSERT_EQUAL(a->v[i].u.memory.size, b->v[i].u.memory.size);
		CU_ASSERT_EQUAL(a->v[i].u.memory.buffer_address, b->v[i].u.memory.buffer_address);
		CU_ASSERT_EQUAL(a->v[i].u.memory.protocol.len, b->v[i].u.memory.protocol.len);
		CU_ASSERT_EQUAL(a->v[i].u.memory.transport_endpoint.len,
				b->v[i].u.memory.transport_endpoint.len);
		CU_ASSERT(memcmp(a->v[i].u.memory.transport_endpoint.ptr,
				 b->v[i].u.memory.transport_endpoint.ptr,
				 a->v[i].u.memory.transport_endpoint.len) == 0);
	}
}

static void
test_capture_replay(void)
{
	/* Chronological order of the capture (three client connections A, B, C). */
	static const struct {
		char conn;
		const char *req, *resp;
		enum tide_mc_fn fn;
	} steps[] = {
		{'A', "00_req_38228_s0_ServiceReady.bin", "09_resp_38228_s0_ServiceReady.bin",
		 TIDE_MC_FN_SERVICE_READY},
		{'A', "01_req_38228_s1_GetStorageConfig.bin",
		 "10_resp_38228_s1_GetStorageConfig.bin", TIDE_MC_FN_GET_STORAGE_CONFIG},
		{'A', "02_req_38228_s2_MountSegment.bin", "11_resp_38228_s2_MountSegment.bin",
		 TIDE_MC_FN_MOUNT_SEGMENT},
		{'A', "03_req_38228_s3_Ping.bin", "12_resp_38228_s3_Ping.bin", TIDE_MC_FN_PING},
		{'C', "20_req_38244_s0_FetchTasks.bin", "25_resp_38244_s0_FetchTasks.bin",
		 TIDE_MC_FN_FETCH_TASKS},
		{'B', "18_req_38238_s0_PutStart.bin", "19_resp_38238_s0_PutStart.bin",
		 TIDE_MC_FN_PUT_START},
		{'A', "04_req_38228_s4_ReMountSegment.bin", "13_resp_38228_s4_ReMountSegment.bin",
		 TIDE_MC_FN_REMOUNT_SEGMENT},
		{'C', "21_req_38244_s1_PutEnd.bin", "26_resp_38244_s1_PutEnd.bin",
		 TIDE_MC_FN_PUT_END},
		{'A', "05_req_38228_s5_GetReplicaList.bin", "14_resp_38228_s5_GetReplicaList.bin",
		 TIDE_MC_FN_GET_REPLICA_LIST},
		{'C', "22_req_38244_s2_ExistKey.bin", "27_resp_38244_s2_ExistKey.bin",
		 TIDE_MC_FN_EXIST_KEY},
		{'A', "06_req_38228_s6_Remove.bin", "15_resp_38228_s6_Remove.bin",
		 TIDE_MC_FN_REMOVE},
		{'C', "23_req_38244_s3_Remove.bin", "28_resp_38244_s3_Remove.bin",
		 TIDE_MC_FN_REMOVE},
		{'A', "07_req_38228_s7_ExistKey.bin", "16_resp_38228_s7_ExistKey.bin",
		 TIDE_MC_FN_EXIST_KEY},
		{'C', "24_req_38244_s4_Ping.bin", "29_resp_38244_s4_Ping.bin", TIDE_MC_FN_PING},
		{'A', "08_req_38228_s8_UnmountSegment.bin", "17_resp_38228_s8_UnmountSegment.bin",
		 TIDE_MC_FN_UNMOUNT_SEGMENT},
	};
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *conn[3];
	unsigned i, identical = 0;

	for (i = 0; i < 3; i++) {
		conn[i] = connect_to(s);
	}
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct tide_mc_client *c = conn[steps[i].conn - 'A'];
		struct tide_mc_buf got = {0};
		size_t qlen, alen;
		uint8_t *q = tide_ut_read_file(MC_VECTORS_DIR, steps[i].req, &qlen);
		uint8_t *a = tide_ut_read_file(MC_VECTORS_DIR, steps[i].resp, &alen);

		CU_ASSERT_PTR_NOT_NULL_FATAL(q);
		CU_ASSERT_PTR_NOT_NULL_FATAL(a);
		TIDE_UT_OK(tide_mc_client_send_raw(c, q, qlen));
		TIDE_UT_OK(tide_mc_client_recv_raw(c, &got));
		if (got.len == alen && memcmp(got.data, a, alen) == 0) {
			identical++;
		} else {
			/*
			 * Only the replica id may differ: the stock master numbers replicas
			 * from a global counter (1 in the capture), ours from its own. Same
			 * framing, same header, same result otherwise (decoded compare).
			 */
			struct tide_mc_resp_hdr h1, h2;
			struct tide_mc_resp r1, r2;
			size_t u1, u2;

			CU_ASSERT(steps[i].fn == TIDE_MC_FN_PUT_START ||
				  steps[i].fn == TIDE_MC_FN_GET_REPLICA_LIST);
			CU_ASSERT_EQUAL(got.len, alen);
			CU_ASSERT(memcmp(got.data, a, TIDE_MC_RESP_HDR_LEN) == 0);
			TIDE_UT_OK(tide_mc_resp_frame_decode(steps[i].fn, got.data, got.len, &h1,
							     &r1, &u1, NULL));
			TIDE_UT_OK(tide_mc_resp_frame_decode(steps[i].fn, a, alen, &h2, &r2, &u2,
							     NULL));
			if (steps[i].fn == TIDE_MC_FN_PUT_START) {
				CU_ASSERT(r1.u.put_start.ok && r2.u.put_start.ok);
				same_replicas(&r1.u.put_start.val, &r2.u.put_start.val);
			} else if (steps[i].fn == TIDE_MC_FN_GET_REPLICA_LIST) {
				CU_ASSERT(r1.u.replica_list.ok && r2.u.replica_list.ok);
				same_replicas(&r1.u.replica_list.val.replicas,
					      &r2.u.replica_list.val.replicas);
				CU_ASSERT_EQUAL(r1.u.replica_list.val.lease_ttl_ms,
						r2.u.replica_list.val.lease_ttl_ms);
			}
			tide_mc_resp_free(&r1);
			tide_mc_resp_free(&r2);
		}
		tide_mc_buf_release(&got);
		free(q);
		free(a);
	}
	fprintf(stderr, "capture replay: %u of %zu answers byte-identical\n", identical,
		sizeof(steps) / sizeof(steps[0]));
	/* Everything but (at most) the two replica-carrying answers is byte-identical. */
	CU_ASSERT(identical >= sizeof(steps) / sizeof(steps[0]) - 2);
	for (i = 0; i < 3; i++) {
		tide_mc_client_close(conn[i]);
	}
	tide_mc_server_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Pipelining and many connections                                                             */
/* ------------------------------------------------------------------------------------------ */

#define PIPE_N 200

static void
test_pipelined(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c = connect_to(s);
	static struct tide_mc_req reqs[PIPE_N];
	static struct tide_mc_resp resps[PIPE_N];
	static char keys[PIPE_N][32];
	static int rcs[PIPE_N];
	unsigned i;

	/* Polling for answers (TIDE_MASTER_POLL_US) before sleeping: the single calls of
	 * mount_ok and the pipelined ones below behave the same, only sooner. 1 ms is longer
	 * than most answers take here, so both the answer-in-time and the sleep-after paths run. */
	tide_mc_client_set_poll_us(c, 1000);
	mount_ok(c);
	/* PutStart, PutEnd, ExistKey for each key, all in one write. */
	memset(reqs, 0, sizeof(reqs));
	for (i = 0; i < PIPE_N; i += 3) {
		snprintf(keys[i], sizeof(keys[i]), "pipe-%u", i);
		reqs[i].fn = TIDE_MC_FN_PUT_START;
		reqs[i].u.put_start.client_id = client_a;
		reqs[i].u.put_start.key.ptr = keys[i];
		reqs[i].u.put_start.key.len = strlen(keys[i]);
		reqs[i].u.put_start.slice_length = 100 + i;
		reqs[i].u.put_start.config.replica_num = 1;
		if (i + 1 < PIPE_N) {
			reqs[i + 1].fn = TIDE_MC_FN_PUT_END;
			reqs[i + 1].u.put_end.client_id = client_a;
			reqs[i + 1].u.put_end.meta.key = reqs[i].u.put_start.key;
			reqs[i + 1].u.put_end.replica_type = TIDE_MC_REPLICA_ALL;
		}
		if (i + 2 < PIPE_N) {
			reqs[i + 2].fn = TIDE_MC_FN_EXIST_KEY;
			reqs[i + 2].u.key.key = reqs[i].u.put_start.key;
		}
	}
	TIDE_UT_OK(tide_mc_client_call_batch(c, reqs, PIPE_N, resps, rcs));
	for (i = 0; i < PIPE_N; i++) {
		CU_ASSERT_EQUAL(rcs[i], 0);
		if (rcs[i] != 0) {
			continue;
		}
		CU_ASSERT_EQUAL(resps[i].fn, reqs[i].fn);
		switch (i % 3) {
		case 0:
			CU_ASSERT(resps[i].u.put_start.ok);
			CU_ASSERT_EQUAL(resps[i].u.put_start.val.n, 1);
			if (resps[i].u.put_start.val.n == 1) {
				CU_ASSERT_EQUAL(resps[i].u.put_start.val.v[0].u.memory.size,
						100 + i);
			}
			break;
		case 1:
			CU_ASSERT(resps[i].u.status.ok);
			break;
		default:
			/* Answered in order: the PutEnd before it has completed the key. */
			CU_ASSERT(resps[i].u.exist.ok && resps[i].u.exist.val);
			break;
		}
		tide_mc_resp_free(&resps[i]);
	}
	CU_ASSERT(tide_mc_client_connected(c));
	tide_mc_client_close(c);
	tide_mc_server_destroy(s);
}

#define FLOOD_N 40000

/*
 * More answers than the server buffers per connection (4 MiB): it stops
 * reading until the client drains, and the client sends and receives at once.
 */
static void
test_pipelined_backpressure(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c = connect_to(s);
	struct tide_mc_req *reqs = calloc(FLOOD_N, sizeof(*reqs));
	struct tide_mc_resp *resps = calloc(FLOOD_N, sizeof(*resps));
	int *rcs = calloc(FLOOD_N, sizeof(*rcs));
	unsigned i, ok = 0;
	int32_t ec;

	CU_ASSERT_FATAL(reqs != NULL && resps != NULL && rcs != NULL);
	mount_ok(c);
	TIDE_UT_OK(tide_mc_client_put_start(c, &client_a, "flood", 1000, NULL, NULL, &ec));
	TIDE_UT_OK(tide_mc_client_put_end(c, &client_a, "flood", &ec));
	for (i = 0; i < FLOOD_N; i++) {
		reqs[i].fn = TIDE_MC_FN_GET_REPLICA_LIST;
		reqs[i].u.key.key.ptr = (char *)"flood";
		reqs[i].u.key.key.len = 5;
	}
	TIDE_UT_OK(tide_mc_client_call_batch(c, reqs, FLOOD_N, resps, rcs));
	for (i = 0; i < FLOOD_N; i++) {
		if (rcs[i] == 0 && resps[i].u.replica_list.ok &&
		    resps[i].u.replica_list.val.replicas.n == 1) {
			ok++;
		}
		if (rcs[i] == 0) {
			tide_mc_resp_free(&resps[i]);
		}
	}
	CU_ASSERT_EQUAL(ok, FLOOD_N);
	/* The connection is still in sync afterwards. */
	TIDE_UT_OK(tide_mc_client_remove(c, "flood", true, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	free(reqs);
	free(resps);
	free(rcs);
	tide_mc_client_close(c);
	tide_mc_server_destroy(s);
}

#define MANY 64

static void
test_many_connections(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c[MANY];
	struct tide_mc_server_stats *st = calloc(1, sizeof(*st));
	char ver[16];
	int32_t ec;
	unsigned i, round;

	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	for (i = 0; i < MANY; i++) {
		c[i] = connect_to(s);
	}
	for (round = 0; round < 3; round++) {
		for (i = 0; i < MANY; i++) {
			ver[0] = '\0';
			TIDE_UT_OK(tide_mc_client_service_ready(c[i], ver, sizeof(ver), &ec));
			CU_ASSERT_STRING_EQUAL(ver, "2.0.0");
		}
	}
	tide_mc_server_stats_get(s, st);
	CU_ASSERT_EQUAL(st->accepted, MANY);
	CU_ASSERT_EQUAL(st->open, MANY);
	CU_ASSERT_EQUAL(st->fn[TIDE_MC_FN_SERVICE_READY].calls, 3 * MANY);
	for (i = 0; i < MANY / 2; i++) {
		tide_mc_client_close(c[i]);
	}
	/* The rest still work after half the connections went away. */
	for (i = MANY / 2; i < MANY; i++) {
		TIDE_UT_OK(tide_mc_client_service_ready(c[i], NULL, 0, &ec));
		CU_ASSERT_EQUAL(ec, 0);
	}
	/* Destroy with live connections: everything is closed and freed. */
	tide_mc_server_destroy(s);
	for (i = MANY / 2; i < MANY; i++) {
		CU_ASSERT_NOT_EQUAL(tide_mc_client_service_ready(c[i], NULL, 0, &ec), 0);
		tide_mc_client_close(c[i]);
	}
	free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* Hostile frames                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void
hdr_bytes(uint8_t out[TIDE_MC_REQ_HDR_LEN], uint8_t magic, uint32_t seq, uint32_t fn_id,
	  uint32_t len)
{
	struct tide_mc_req_hdr h = {
		.magic = magic, .seq_num = seq, .function_id = fn_id, .length = len};

	tide_mc_req_hdr_build(&h, out);
}

/* Read one answer; expect a transport error errc with the same seq. */
static void
expect_err(struct tide_mc_client *c, uint32_t seq, uint8_t errc)
{
	struct tide_mc_buf got = {0};
	struct tide_mc_resp_hdr h;

	TIDE_UT_OK(tide_mc_client_recv_raw(c, &got));
	if (got.len >= TIDE_MC_RESP_HDR_LEN) {
		TIDE_UT_OK(tide_mc_resp_hdr_parse(got.data, got.len, &h, NULL));
		CU_ASSERT_EQUAL(h.err_code, errc);
		CU_ASSERT_EQUAL(h.seq_num, seq);
	}
	tide_mc_buf_release(&got);
}

static void
test_malformed(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c;
	struct tide_mc_server_stats *st = calloc(1, sizeof(*st));
	struct tide_mc_buf got = {0};
	uint8_t frame[TIDE_MC_REQ_HDR_LEN + 8];
	uint32_t exist_id, copy_id;
	int32_t ec = 1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	TIDE_UT_OK(tide_mc_fn_id_of_name("ExistKey", &exist_id));
	TIDE_UT_OK(tide_mc_fn_id_of_name("CopyStart", &copy_id));

	/* Bad body: errc 4 "invalid rpc arg", and the connection keeps working. */
	c = connect_to(s);
	hdr_bytes(frame, TIDE_MC_MAGIC, 7, exist_id, 8);
	memcpy(frame + TIDE_MC_REQ_HDR_LEN, "\x01\x02\x03\x04garb", 8);
	TIDE_UT_OK(tide_mc_client_send_raw(c, frame, sizeof(frame)));
	expect_err(c, 7, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS);
	TIDE_UT_OK(tide_mc_client_service_ready(c, NULL, 0, &ec));
	CU_ASSERT_EQUAL(ec, 0);

	/* Unknown function id: errc 11; a registered one without a codec: errc 11 too. */
	hdr_bytes(frame, TIDE_MC_MAGIC, 8, 0xdeadbeef, 0);
	TIDE_UT_OK(tide_mc_client_send_raw(c, frame, TIDE_MC_REQ_HDR_LEN));
	expect_err(c, 8, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED);
	hdr_bytes(frame, TIDE_MC_MAGIC, 9, copy_id, 0);
	TIDE_UT_OK(tide_mc_client_send_raw(c, frame, TIDE_MC_REQ_HDR_LEN));
	expect_err(c, 9, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED);
	TIDE_UT_OK(tide_mc_client_service_ready(c, NULL, 0, &ec));
	tide_mc_client_close(c);

	/* Bad magic: closed without an answer. */
	c = connect_to(s);
	hdr_bytes(frame, 0x16, 1, exist_id, 0);
	TIDE_UT_OK(tide_mc_client_send_raw(c, frame, TIDE_MC_REQ_HDR_LEN));
	CU_ASSERT_EQUAL(tide_mc_client_recv_raw(c, &got), -ECONNRESET);
	tide_mc_client_close(c);

	/* Oversized (limit 1 MiB here): refused from the header, errc 14, then closed. */
	c = connect_to(s);
	hdr_bytes(frame, TIDE_MC_MAGIC, 3, exist_id, 100u << 20);
	TIDE_UT_OK(tide_mc_client_send_raw(c, frame, TIDE_MC_REQ_HDR_LEN));
	expect_err(c, 3, TIDE_MC_ERRC_MESSAGE_TOO_LARGE);
	CU_ASSERT_EQUAL(tide_mc_client_recv_raw(c, &got), -ECONNRESET);
	tide_mc_client_close(c);

	/* Other connections were never disturbed. */
	c = connect_to(s);
	TIDE_UT_OK(tide_mc_client_service_ready(c, NULL, 0, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	tide_mc_client_close(c);

	tide_mc_server_stats_get(s, st);
	CU_ASSERT_EQUAL(st->bad_body, 1);
	CU_ASSERT_EQUAL(st->unknown_fn, 2);
	CU_ASSERT_EQUAL(st->closed_proto, 1);
	CU_ASSERT_EQUAL(st->refused_large, 1);
	tide_mc_buf_release(&got);
	free(st);
	tide_mc_server_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */
/* HTTP                                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* One HTTP request; returns the status code and the body (malloc'd, NUL-terminated). */
static int
http(uint16_t port, const char *method, const char *target, const char *body, char **out)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	char req[1024], *buf = NULL, *p;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd, code = -1;

	*out = NULL;
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
		 method, target, body != NULL ? strlen(body) : 0, body != NULL ? body : "");
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		close(fd);
		return -1;
	}
	for (;;) {
		if (len + 4096 > cap) {
			cap = (cap + 4096) * 2;
			buf = realloc(buf, cap);
			if (buf == NULL) {
				close(fd);
				return -1;
			}
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0) {
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	if (buf == NULL) {
		return -1;
	}
	buf[len] = '\0';
	if (sscanf(buf, "HTTP/1.1 %d", &code) != 1) {
		code = -1;
	}
	p = strstr(buf, "\r\n\r\n");
	*out = strdup(p != NULL ? p + 4 : "");
	free(buf);
	return code;
}

static void
test_http_admin(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c = connect_to(s);
	uint16_t port = tide_mc_server_metrics_port(s);
	char *body;
	int32_t ec;

	CU_ASSERT_EQUAL(http(port, "GET", "/health", NULL, &body), 200);
	CU_ASSERT_STRING_EQUAL(body, "OK");
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/get_all_segments", NULL, &body), 200);
	CU_ASSERT_STRING_EQUAL(body, "");
	free(body);

	mount_ok(c);
	TIDE_UT_OK(tide_mc_client_put_start(c, &client_a, "hkey", 4096, NULL, NULL, &ec));
	TIDE_UT_OK(tide_mc_client_put_end(c, &client_a, "hkey", &ec));
	CU_ASSERT_EQUAL(ec, 0);

	CU_ASSERT_EQUAL(http(port, "GET", "/get_all_segments", NULL, &body), 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "127.0.0.1:13333"));
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/metrics", NULL, &body), 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "\nmaster_key_count 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "\nmaster_total_capacity_bytes 536870912\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "\ntide_master_segment_count 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "master_put_start_requests_total 1\n"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(body, "tide_master_rpc_latency_microseconds_count{rpc=\"PutStart\"} 1\n"));
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/query_key?key=hkey", NULL, &body), 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "127.0.0.1:15366"));
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "size 4096"));
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/query_key?key=nope", NULL, &body), 404);
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/query_key", NULL, &body), 400);
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/nothing", NULL, &body), 404);
	free(body);
	/* /query_key grants no lease: a plain remove succeeds. */
	TIDE_UT_OK(tide_mc_client_remove(c, "hkey", false, &ec));
	CU_ASSERT_EQUAL(ec, 0);

	tide_mc_client_close(c);
	tide_mc_server_destroy(s);
}

static void
test_http_metadata(void)
{
	struct tide_mc_server *s = start_server();
	uint16_t port = tide_mc_server_metadata_port(s);
	const char *json = "{\"name\":\"seg\",\"protocol\":\"tcp\"}";
	char *body;

	CU_ASSERT_EQUAL(http(port, "GET", "/metadata?key=mooncake%2Fram%2Fseg", NULL, &body), 404);
	CU_ASSERT_STRING_EQUAL(body, "metadata not found");
	free(body);
	CU_ASSERT_EQUAL(http(port, "PUT", "/metadata?key=mooncake%2Fram%2Fseg", json, &body), 200);
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/metadata?key=mooncake%2Fram%2Fseg", NULL, &body), 200);
	CU_ASSERT_STRING_EQUAL(body, json);
	free(body);
	/* Exact match on the key as sent: the decoded spelling is another key. */
	CU_ASSERT_EQUAL(http(port, "GET", "/metadata?key=mooncake/ram/seg", NULL, &body), 404);
	free(body);
	/* Overwrite of a segment descriptor is fine. */
	CU_ASSERT_EQUAL(http(port, "PUT", "/metadata?key=mooncake%2Fram%2Fseg", "{}", &body), 200);
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/metadata?key=mooncake%2Fram%2Fseg", NULL, &body), 200);
	CU_ASSERT_STRING_EQUAL(body, "{}");
	free(body);
	/* A different rpc_meta for the same key is refused; the same one is accepted. */
	CU_ASSERT_EQUAL(
		http(port, "PUT", "/metadata?key=mooncake/rpc_meta/seg", "{\"a\":1}", &body), 200);
	free(body);
	CU_ASSERT_EQUAL(
		http(port, "PUT", "/metadata?key=mooncake/rpc_meta/seg", "{\"a\":1}", &body), 200);
	free(body);
	CU_ASSERT_EQUAL(
		http(port, "PUT", "/metadata?key=mooncake/rpc_meta/seg", "{\"a\":2}", &body), 400);
	free(body);
	CU_ASSERT_EQUAL(http(port, "DELETE", "/metadata?key=mooncake%2Fram%2Fseg", NULL, &body),
			200);
	free(body);
	CU_ASSERT_EQUAL(http(port, "DELETE", "/metadata?key=mooncake%2Fram%2Fseg", NULL, &body),
			404);
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/metadata?key=mooncake%2Fram%2Fseg", NULL, &body), 404);
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/metadata", NULL, &body), 400);
	free(body);
	CU_ASSERT_EQUAL(http(port, "GET", "/health", NULL, &body), 200);
	free(body);
	tide_mc_server_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Hostile peers (issue 20)                                                                    */
/* ------------------------------------------------------------------------------------------ */

static int
regex_call(struct tide_mc_client *c, bool remove, const char *re, struct tide_mc_resp *resp)
{
	struct tide_mc_req req;

	memset(&req, 0, sizeof(req));
	if (remove) {
		req.fn = TIDE_MC_FN_REMOVE_BY_REGEX;
		req.u.remove.key.ptr = (char *)re;
		req.u.remove.key.len = strlen(re);
		req.u.remove.force = true;
	} else {
		req.fn = TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX;
		req.u.key.key.ptr = (char *)re;
		req.u.key.key.len = strlen(re);
	}
	return tide_mc_client_call(c, &req, resp, NULL);
}

/* ECMAScript patterns as stock; a pattern over a bound is INVALID_PARAMS, fast. */
static void
test_regex_rpc(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c = connect_to(s);
	struct tide_mc_resp resp;
	char key[32];
	int32_t ec;
	bool ex;
	double t0;

	mount_ok(c);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), i < 10 ? "key%d" : "other/%d", i);
		TIDE_UT_OK(tide_mc_client_put_start(c, &client_a, key, 64, NULL, NULL, &ec));
		TIDE_UT_OK(tide_mc_client_put_end(c, &client_a, key, &ec));
	}
	TIDE_UT_OK(regex_call(c, false, "key\\d+", &resp));
	CU_ASSERT(resp.u.regex.ok);
	CU_ASSERT_EQUAL(resp.u.regex.val.n, 10);
	tide_mc_resp_free(&resp);
	t0 = tide_ut_now_s();
	TIDE_UT_OK(regex_call(c, false, "((a{1,100}){1,100}){1,100}", &resp));
	CU_ASSERT_FALSE(resp.u.regex.ok);
	CU_ASSERT_EQUAL(resp.u.regex.err, TIDE_MC_EC_INVALID_PARAMS);
	tide_mc_resp_free(&resp);
	TIDE_UT_OK(regex_call(c, true, "((a{1,100}){1,100}){1,100}", &resp));
	CU_ASSERT_FALSE(resp.u.count.ok);
	CU_ASSERT_EQUAL(resp.u.count.err, TIDE_MC_EC_INVALID_PARAMS);
	tide_mc_resp_free(&resp);
	CU_ASSERT(tide_ut_now_s() - t0 < 1.0);
	/* The master still answers, and nothing went. */
	TIDE_UT_OK(tide_mc_client_exist_key(c, "key3", &ex, &ec));
	CU_ASSERT_TRUE(ex);
	TIDE_UT_OK(regex_call(c, true, "^other/\\d{2}$", &resp));
	CU_ASSERT(resp.u.count.ok);
	CU_ASSERT_EQUAL(resp.u.count.val, 10);
	tide_mc_resp_free(&resp);
	tide_mc_client_close(c);
	tide_mc_server_destroy(s);
}

static int
tcp_connect(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Raw request bytes on a new connection: the status code, or -1 (EOF without an answer). */
static int
http_raw(uint16_t port, const void *req, size_t len)
{
	char buf[512];
	ssize_t n;
	int fd = tcp_connect(port), code = -1;

	if (fd < 0)
		return -1;
	if (write(fd, req, len) == (ssize_t)len) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0';
			if (sscanf(buf, "HTTP/1.1 %d", &code) != 1)
				code = -1;
		}
	}
	close(fd);
	return code;
}

static struct tide_mc_server_stats *
stats(struct tide_mc_server *s)
{
	static struct tide_mc_server_stats st;

	tide_mc_server_stats_get(s, &st);
	return &st;
}

/* Wait (deadline) until the server has n HTTP connections open on port p. */
static bool
wait_open(struct tide_mc_server *s, unsigned p, uint64_t n, double secs)
{
	double end = tide_ut_now_s() + secs;

	while (tide_ut_now_s() < end) {
		if (stats(s)->http_open[p] == n)
			return true;
		usleep(5000);
	}
	return false;
}

/*
 * Issue 20 item 4: 256 idle connections shut out the HTTP side (/health
 * refused, metadata lookups got EOF). Each port has its own cap now, and at
 * the cap the least recently active connection gives way to the new one.
 */
static void
test_http_idle_flood(void)
{
	enum { N = 100 };
	struct tide_mc_server *s;
	uint16_t ap, mp;
	int fds[2][N];
	char *body;

	http_lim.admin_conns = 16;
	http_lim.meta_conns = 32;
	s = start_server();
	ap = tide_mc_server_metrics_port(s);
	mp = tide_mc_server_metadata_port(s);
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < N; i++) {
			fds[p][i] = tcp_connect(p ? mp : ap);
			CU_ASSERT_TRUE_FATAL(fds[p][i] >= 0);
		}
	CU_ASSERT_TRUE(wait_open(s, 0, 16, 5.0));
	CU_ASSERT_TRUE(wait_open(s, 1, 32, 5.0));
	/* Both ports answer, each within its own cap. */
	CU_ASSERT_EQUAL(http(ap, "GET", "/health", NULL, &body), 200);
	free(body);
	CU_ASSERT_EQUAL(http(mp, "GET", "/health", NULL, &body), 200);
	free(body);
	CU_ASSERT_EQUAL(http(mp, "PUT", "/metadata?key=k", "{\"v\":1}", &body), 200);
	free(body);
	CU_ASSERT_EQUAL(http(mp, "GET", "/metadata?key=k", NULL, &body), 200);
	CU_ASSERT_STRING_EQUAL(body, "{\"v\":1}");
	free(body);
	CU_ASSERT_EQUAL(http(ap, "GET", "/metrics", NULL, &body), 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "tide_master_http_evicted_connections_total"));
	free(body);
	CU_ASSERT(stats(s)->http_open[0] <= 16);
	CU_ASSERT(stats(s)->http_open[1] <= 32);
	CU_ASSERT(stats(s)->http_evicted >= 2 * N - 48);
	printf("\n    %d idle connections per port: /health and /metadata answered, %" PRIu64
	       " evicted\n",
	       N, stats(s)->http_evicted);
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < N; i++)
			close(fds[p][i]);
	tide_mc_server_destroy(s);
}

/* Seconds until the server closes fd (read returns 0), sending `trickle` every 50 ms. */
static double
closed_after(int fd, const char *trickle, double max)
{
	double t0 = tide_ut_now_s();
	char b[256];

	for (;;) {
		struct timeval tv = {0, 50000};
		ssize_t n;

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		n = read(fd, b, sizeof(b));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return tide_ut_now_s() - t0;
		if (n > 0)
			return -1; /* answered: not what a deadline does */
		if (tide_ut_now_s() - t0 > max)
			return -2;
		if (trickle != NULL && write(fd, trickle, strlen(trickle)) < 0)
			return tide_ut_now_s() - t0;
	}
}

/* Header, body and idle deadlines close slow peers. */
static void
test_http_deadlines(void)
{
	static const char head[] =
		"PUT /metadata?key=slow HTTP/1.1\r\nContent-Length: 100000\r\n\r\n";
	struct tide_mc_server *s;
	uint16_t mp;
	double t;
	int fd;

	http_lim.head_ms = 400;
	http_lim.body_ms = 600;
	http_lim.idle_ms = 200;
	s = start_server();
	mp = tide_mc_server_metadata_port(s);
	/* Silent: the idle deadline. */
	fd = tcp_connect(mp);
	t = closed_after(fd, NULL, 5.0);
	close(fd);
	printf("\n    silent connection closed after %.2f s (idle 0.2 s)", t);
	CU_ASSERT(t >= 0.15 && t < 3.0);
	/* A head that never ends, one byte at a time: the header deadline. */
	fd = tcp_connect(mp);
	CU_ASSERT_EQUAL(write(fd, "GET /metadata?key=", 18), 18);
	t = closed_after(fd, "a", 5.0);
	close(fd);
	printf("\n    endless head closed after %.2f s (header 0.4 s)", t);
	CU_ASSERT(t >= 0.3 && t < 3.0);
	/* A body that trickles: the body deadline. */
	fd = tcp_connect(mp);
	CU_ASSERT_EQUAL(write(fd, head, strlen(head)), (ssize_t)strlen(head));
	t = closed_after(fd, "x", 5.0);
	close(fd);
	printf("\n    trickled body closed after %.2f s (body 0.6 s)\n", t);
	CU_ASSERT(t >= 0.5 && t < 3.0);
	CU_ASSERT(stats(s)->http_timed_out >= 3);
	CU_ASSERT(wait_open(s, 1, 0, 2.0));
	tide_mc_server_destroy(s);
}

/* Bodies over the cap are refused from their Content-Length; the store has a total cap. */
static void
test_http_body_limits(void)
{
	char req[2048], val[1001], *body;
	struct tide_mc_server *s;
	uint16_t ap, mp;
	int n, i;

	http_lim.max_body = 1000;
	http_lim.meta_bytes = 3500;
	s = start_server();
	ap = tide_mc_server_metrics_port(s);
	mp = tide_mc_server_metadata_port(s);
	/* Refused before any of the body is sent. */
	n = snprintf(req, sizeof(req),
		     "PUT /metadata?key=big HTTP/1.1\r\nContent-Length: 1001\r\n\r\n");
	CU_ASSERT_EQUAL(http_raw(mp, req, (size_t)n), 413);
	n = snprintf(req, sizeof(req),
		     "PUT /metadata?key=big HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n");
	CU_ASSERT_EQUAL(http_raw(mp, req, (size_t)n), 413);
	n = snprintf(req, sizeof(req), "GET /health HTTP/1.1\r\nContent-Length: 5000\r\n\r\n");
	CU_ASSERT_EQUAL(http_raw(ap, req, (size_t)n), 413);
	/* A head past 16 KiB (by one byte: the server reads no further, so it
	   closes with nothing unread, and no RST races the answer). */
	{
		size_t hl = (16u << 10) + 1;
		char *h = malloc(hl);

		memset(h, 'a', hl);
		memcpy(h, "GET /", 5);
		CU_ASSERT_EQUAL(http_raw(mp, h, hl), 413);
		free(h);
	}
	/* Exactly the cap is fine; the store fills up at 3500 bytes. */
	memset(val, 'v', 1000);
	val[1000] = '\0';
	for (i = 0; i < 3; i++) {
		char target[64];

		snprintf(target, sizeof(target), "/metadata?key=k%d", i);
		n = snprintf(req, sizeof(req), "PUT %s HTTP/1.1\r\nContent-Length: 1000\r\n\r\n%s",
			     target, val);
		CU_ASSERT_EQUAL(http_raw(mp, req, (size_t)n), 200);
	}
	n = snprintf(req, sizeof(req),
		     "PUT /metadata?key=k3 HTTP/1.1\r\nContent-Length: 1000\r\n\r\n%s", val);
	CU_ASSERT_EQUAL(http_raw(mp, req, (size_t)n), 507);
	CU_ASSERT_EQUAL(stats(s)->metadata_bytes, 3 * (2 + 1000));
	/* Overwriting with a smaller value and deleting give room back. */
	CU_ASSERT_EQUAL(http(mp, "PUT", "/metadata?key=k0", "{}", &body), 200);
	free(body);
	CU_ASSERT_EQUAL(http(mp, "DELETE", "/metadata?key=k1", NULL, &body), 200);
	free(body);
	CU_ASSERT_EQUAL(stats(s)->metadata_bytes, 2 + 2 + 2 + 1000);
	CU_ASSERT_EQUAL(http_raw(mp, req, (size_t)n), 200);
	tide_mc_server_destroy(s);
}

/*
 * allow_networks: a peer outside it is closed at accept on each of the three
 * ports, even after sending a valid request, and counted; an allowed peer is
 * served as before. 127.0.0.2 is local on Linux (all of 127/8).
 */
static void
test_allow_networks(void)
{
	static const char health[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	struct tide_mc_server_opts o;
	struct tide_mc_server_stats st;
	struct tide_mc_server *s, *bad = NULL;
	struct tide_mc_client *c;
	uint16_t ports[3];
	char buf[256], *body;

	http_lim.allow = "10.0.0.0/8, 127.0.0.1/32";
	s = start_server();
	ports[0] = tide_mc_server_rpc_port(s);
	ports[1] = tide_mc_server_metrics_port(s);
	ports[2] = tide_mc_server_metadata_port(s);
	for (int i = 0; i < 3; i++) {
		int fd = tide_ut_connect_from("127.0.0.2", "127.0.0.1", ports[i], 2000);
		ssize_t n;

		CU_ASSERT_FATAL(fd >= 0);
		(void)!write(fd, health, sizeof(health) - 1);
		n = recv(fd, buf, sizeof(buf), 0);
		/* EOF or reset, not the receive timeout. */
		CU_ASSERT(n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK));
		close(fd);
	}
	tide_mc_server_stats_get(s, &st);
	CU_ASSERT_EQUAL(st.refused_net, 3);
	CU_ASSERT_EQUAL(st.accepted, 0);

	/* From the allowed network: RPC and HTTP as usual, and /metrics shows the count. */
	c = connect_to(s);
	mount_ok(c);
	tide_mc_client_close(c);
	CU_ASSERT_EQUAL(http(ports[1], "GET", "/metrics", NULL, &body), 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "\ntide_master_refused_connections_total 3\n"));
	free(body);
	tide_mc_server_destroy(s);

	/* A list that does not parse refuses to start. */
	tide_mc_server_opts_init(&o, sizeof(o));
	o.rpc_address = o.metrics_host = "127.0.0.1";
	o.rpc_port = o.metrics_port = 0;
	o.allow_networks = "127.0.0.1/8";
	CU_ASSERT_EQUAL(tide_mc_server_create(&o, &bad), -EINVAL);
	CU_ASSERT_PTR_NULL(bad);
}

/* The master listens on an IPv6 address and the master client reaches it by the
 * "[v6]:port" form (engine/lib/addr's one deadline socket on both ends). */
static void
test_ipv6_rpc(void)
{
	struct tide_mc_server *s;
	struct tide_mc_client *c = NULL;
	char addr[64];

	http_lim.rpc_address = "::1";
	s = start_server();
	snprintf(addr, sizeof(addr), "[::1]:%u", tide_mc_server_rpc_port(s));
	CU_ASSERT_EQUAL_FATAL(tide_mc_client_connect_addr(addr, 5000, &c), 0);
	mount_ok(c);
	tide_mc_client_close(c);
	/* An IPv4 client does not reach an IPv6-only listener. */
	CU_ASSERT_EQUAL(tide_mc_client_connect("127.0.0.1", tide_mc_server_rpc_port(s), 2000, &c),
			-ECONNREFUSED);
	tide_mc_server_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Replies held until the journal is durable (HA)                                              */
/* ------------------------------------------------------------------------------------------ */

/* The test is the journal: it counts records and says when they are durable. */
static void
count_record(void *ctx, uint64_t seq, const void *rec, size_t len)
{
	(void)rec;
	(void)len;
	__atomic_store_n((uint64_t *)ctx, seq, __ATOMIC_RELEASE);
}

/* One blocking call on its own thread: which, and whether it has returned. */
struct held_call {
	struct tide_mc_client *c;
	const char *key;
	int what; /* 0 PutEnd, 1 Remove, 2 PutStart */
	int rc;
	int32_t ec;
	pthread_t th;
	int done; /* __atomic */
};

static void *
held_call_main(void *arg)
{
	struct held_call *h = arg;

	if (h->what == 0)
		h->rc = tide_mc_client_put_end(h->c, &client_a, h->key, &h->ec);
	else if (h->what == 1)
		h->rc = tide_mc_client_remove(h->c, h->key, true, &h->ec);
	else
		h->rc = tide_mc_client_put_start(h->c, &client_a, h->key, 4096, NULL, NULL, &h->ec);
	__atomic_store_n(&h->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void
held_start(struct held_call *h, struct tide_mc_client *c, const char *key, int what)
{
	memset(h, 0, sizeof(*h));
	h->c = c;
	h->key = key;
	h->what = what;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&h->th, NULL, held_call_main, h), 0);
}

static bool
held_done(struct held_call *h)
{
	return __atomic_load_n(&h->done, __ATOMIC_ACQUIRE) != 0;
}

static void
wait_seq(const uint64_t *seq, uint64_t want)
{
	double t0 = tide_ut_now_s();

	while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) < want && tide_ut_now_s() - t0 < 10)
		usleep(1000);
	CU_ASSERT_EQUAL(__atomic_load_n(seq, __ATOMIC_ACQUIRE), want);
}

/*
 * A reply waits for the journal records made before it: a PutEnd until its
 * record is durable, a Ping never, a PutStart that placed only until the
 * last release of space is durable (not other objects' completions), and
 * then until that release when one is pending.
 */
static void
test_held_replies(void)
{
	struct tide_mc_server *s;
	struct tide_mc_client *c1, *c2;
	struct tide_mc_segment g = segment();
	struct held_call end_a, rm_a, start_c;
	uint64_t seq = 0;
	int32_t ec = 1, st = 0;

	http_lim.defer_rpc = true;
	s = start_server();
	CU_ASSERT_EQUAL(tide_mc_table_journal_set(tide_mc_server_table(s), count_record, &seq, 0),
			0);
	CU_ASSERT_EQUAL(tide_mc_server_hold_replies(s, 0), 0);
	CU_ASSERT_EQUAL_FATAL(tide_mc_server_start_rpc(s), 0);
	CU_ASSERT_EQUAL(tide_mc_server_hold_replies(s, 0), -EINVAL); /* too late: RPC is open */
	c1 = connect_to(s);
	c2 = connect_to(s);

	/* A Ping makes no record: answered with nothing durable. Mount makes record 1,
	 * reported durable ahead here so its reply goes at once. */
	TIDE_UT_OK(tide_mc_client_ping(c1, &client_a, &st, &ec));
	tide_mc_server_set_durable(s, 1);
	TIDE_UT_OK(tide_mc_client_mount(c1, &g, &client_a, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT_EQUAL(seq, 1);

	/* PutEnd of a: held until record 2 is durable. */
	TIDE_UT_OK(tide_mc_client_put_start(c1, &client_a, "a", 4096, NULL, NULL, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	held_start(&end_a, c1, "a", 0);
	wait_seq(&seq, 2);
	usleep(200 * 1000);
	CU_ASSERT(!held_done(&end_a));
	/* Meanwhile: a Ping and a PutStart that places answer at once. */
	TIDE_UT_OK(tide_mc_client_ping(c2, &client_a, &st, &ec));
	TIDE_UT_OK(tide_mc_client_put_start(c2, &client_a, "b", 4096, NULL, NULL, &ec));
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT(!held_done(&end_a));
	tide_mc_server_set_durable(s, 2);
	pthread_join(end_a.th, NULL);
	TIDE_UT_OK(end_a.rc);
	CU_ASSERT_EQUAL(end_a.ec, 0);

	/* Remove of a releases space (record 3): a PutStart now waits for it. */
	held_start(&rm_a, c1, "a", 1);
	wait_seq(&seq, 3);
	held_start(&start_c, c2, "c", 2);
	usleep(200 * 1000);
	CU_ASSERT(!held_done(&rm_a));
	CU_ASSERT(!held_done(&start_c));
	tide_mc_server_set_durable(s, 3);
	pthread_join(rm_a.th, NULL);
	pthread_join(start_c.th, NULL);
	TIDE_UT_OK(rm_a.rc);
	CU_ASSERT_EQUAL(rm_a.ec, 0);
	TIDE_UT_OK(start_c.rc);
	CU_ASSERT_EQUAL(start_c.ec, 0);

	tide_mc_client_close(c1);
	tide_mc_client_close(c2);
	/* The table stops calling into this test's counter before it goes. */
	tide_mc_server_stop(s);
	tide_mc_server_destroy(s);
}

/* Past the HA lease deadline a request is not answered: its connection closes. */
static void
test_lease_deadline(void)
{
	struct tide_mc_server *s = start_server();
	struct tide_mc_client *c = connect_to(s);
	int32_t ec = 1, st = 0;
	int rc;

	TIDE_UT_OK(tide_mc_client_ping(c, &client_a, &st, &ec));
	tide_mc_server_set_lease_deadline(s, (uint64_t)(tide_ut_now_s() * 1e6) + 60000000u);
	TIDE_UT_OK(tide_mc_client_ping(c, &client_a, &st, &ec));
	tide_mc_server_set_lease_deadline(s, 1); /* long past */
	rc = tide_mc_client_ping(c, &client_a, &st, &ec);
	CU_ASSERT(rc == -ECONNRESET || rc == -EPIPE);
	tide_mc_client_close(c);
	tide_mc_server_set_lease_deadline(s, 0); /* no bound */
	c = connect_to(s);
	TIDE_UT_OK(tide_mc_client_ping(c, &client_a, &st, &ec));
	tide_mc_client_close(c);
	tide_mc_server_destroy(s);
}

/*
 * A client pipelines more requests than the master buffers answers for (4 MiB), then
 * half-closes without reading. The master must not spin on the half-close while it
 * cannot read (it watched it on every wait: about a CPU per such connection), and must
 * still answer every request it got before closing (it answered what fit in one send).
 */
static void
test_half_close_backpressure(void)
{
	enum { N = 300000 };
	struct tide_mc_server *s = start_server();
	uint8_t *reqs = malloc((size_t)N * TIDE_MC_REQ_HDR_LEN), *in = malloc(1 << 20);
	size_t sent = 0, have = 0, total = (size_t)N * TIDE_MC_REQ_HDR_LEN, frames = 0;
	int fd = tcp_connect(tide_mc_server_rpc_port(s));
	double t0, c0, used;
	bool eof = false;

	CU_ASSERT_FATAL(reqs != NULL && in != NULL && fd >= 0);
	/* Unknown function ids: each is answered with a small error frame. */
	for (unsigned i = 0; i < N; i++)
		hdr_bytes(reqs + (size_t)i * TIDE_MC_REQ_HDR_LEN, TIDE_MC_MAGIC, i, 0x7e7e0000u + i,
			  0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	t0 = tide_ut_now_s();
	while (sent < total && tide_ut_now_s() - t0 < 3) {
		ssize_t n = send(fd, reqs + sent, total - sent, MSG_NOSIGNAL);

		if (n > 0)
			sent += (size_t)n;
		else
			usleep(1000);
	}
	CU_ASSERT(sent >= 2000000); /* far past the 4 MiB of answers (about 40 B each) */
	shutdown(fd, SHUT_WR);
	usleep(100000);
	c0 = tide_ut_cpu_s();
	usleep(400000);
	used = tide_ut_cpu_s() - c0;
	CU_ASSERT(used < 0.15);
	if (used >= 0.15)
		fprintf(stderr, "half-closed, unread: %.2f s of CPU in 0.4 s\n", used);
	/* Every whole request is answered, then the master closes. */
	t0 = tide_ut_now_s();
	while (!eof && tide_ut_now_s() - t0 < 20) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 1000) <= 0)
			continue;
		n = recv(fd, in + have, (1 << 20) - have, 0);
		if (n == 0) {
			eof = true;
			break;
		}
		if (n < 0)
			continue;
		have += (size_t)n;
		/* Whole frames from the front, then one move of the rest (a move per frame
		 * made this loop quadratic: too slow under ASan). */
		size_t off = 0;

		for (;;) {
			struct tide_mc_resp_hdr h;
			size_t len;

			if (have - off < TIDE_MC_RESP_HDR_LEN ||
			    tide_mc_resp_hdr_parse(in + off, have - off, &h, NULL) != 0)
				break;
			len = TIDE_MC_RESP_HDR_LEN + h.length;
			if (have - off < len)
				break;
			if (h.seq_num != (uint32_t)frames ||
			    h.err_code != TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED)
				CU_FAIL("answer out of order or not the expected error");
			frames++;
			off += len;
		}
		memmove(in, in + off, have - off);
		have -= off;
	}
	CU_ASSERT_TRUE(eof);
	CU_ASSERT_EQUAL(frames, sent / TIDE_MC_REQ_HDR_LEN);
	close(fd);
	free(reqs);
	free(in);
	tide_mc_server_destroy(s);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("master_server", NULL, NULL);

	CU_add_test(s, "ipv6_rpc", test_ipv6_rpc);
	CU_add_test(s, "client_sequence", test_client_sequence);
	CU_add_test(s, "capture_replay", test_capture_replay);
	CU_add_test(s, "pipelined", test_pipelined);
	CU_add_test(s, "pipelined_backpressure", test_pipelined_backpressure);
	CU_add_test(s, "half_close_backpressure", test_half_close_backpressure);
	CU_add_test(s, "many_connections", test_many_connections);
	CU_add_test(s, "malformed", test_malformed);
	CU_add_test(s, "http_admin", test_http_admin);
	CU_add_test(s, "http_metadata", test_http_metadata);
	CU_add_test(s, "regex_rpc", test_regex_rpc);
	CU_add_test(s, "http_idle_flood", test_http_idle_flood);
	CU_add_test(s, "http_deadlines", test_http_deadlines);
	CU_add_test(s, "http_body_limits", test_http_body_limits);
	CU_add_test(s, "allow_networks", test_allow_networks);
	CU_add_test(s, "held_replies", test_held_replies);
	CU_add_test(s, "lease_deadline", test_lease_deadline);
}

TIDE_UT_MAIN(register_tests)
