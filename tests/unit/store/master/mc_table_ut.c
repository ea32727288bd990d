/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the master object table and segment manager
 * (store/master/mc_table.c, mc_table_seg.c), driven by a fake clock.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_table_fixture.h"
#include "mc_table_int.h"
#include "tide_mc_table.h"
#include "tide_ut.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

static struct tide_mc_table *T;
static struct tide_mc_table_arena A;
static const struct tide_mc_uuid C1 = {1, 1}, C2 = {2, 2}, C3 = {3, 3};

static struct tide_mc_str
S(const char *s) {
	return mc_fixture_str(s);
}

static struct tide_mc_segment
SEG(uint64_t id, const char *name, uint64_t base, uint64_t size, const char *ep) {
	return mc_fixture_segment((struct tide_mc_uuid){id, id}, name, base, size, ep);
}

static struct tide_mc_replicate_config
CFG(uint64_t replicas) {
	struct tide_mc_replicate_config c;

	memset(&c, 0, sizeof(c));
	c.replica_num = replicas;
	return c;
}

static void
mk_opts(uint64_t lease, uint32_t max_blocks, bool pin_unread)
{
	struct tide_mc_table_opts o;

	tide_mc_table_opts_init(&o, sizeof(o));
	o.seed = 42;
	o.seg_max_blocks = max_blocks;
	o.pin_unread = pin_unread;
	if (lease)
		o.default_kv_lease_ttl_ms = lease;
	CU_ASSERT_FATAL(tide_mc_table_create(&o, &T) == 0);
	memset(&A, 0, sizeof(A));
}

static void
mk(uint64_t lease, uint32_t max_blocks)
{
	mk_opts(lease, max_blocks, false);
}

static void
rm(void)
{
	mc_fixture_destroy(&T, &A);
}

static void
mount(uint64_t id, const char *name, uint64_t base, uint64_t size, const struct tide_mc_uuid *c)
{
	mc_fixture_mount(T, (struct tide_mc_uuid){id, id}, name, base, size, c);
}

/* PutStart + PutEnd of len bytes; returns the PutStart code. */
static int
put(const char *key, uint64_t len, uint64_t replicas, uint64_t now)
{
	struct tide_mc_replicate_config cfg = CFG(replicas);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k = S(key);
	int rc = tide_mc_table_put_start(T, &C1, &k, len, &cfg, now, &A, &d);

	if (rc == 0)
		CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, now),
				0);
	return rc;
}

static int
get(const char *key, uint64_t now, struct tide_mc_replica_list *rl)
{
	struct tide_mc_replica_list tmp;
	struct tide_mc_str k = S(key);

	return tide_mc_table_get_replica_list(T, &k, now, &A, rl ? rl : &tmp);
}

static int
remove_key(const char *key, bool force, uint64_t now)
{
	struct tide_mc_str k = S(key);

	return tide_mc_table_remove(T, &k, force, now);
}

/* Tick with the segment owner C1 kept alive (its Ping at the same time). */
static void
tick_alive(uint64_t now)
{
	mc_fixture_tick_alive(T, &C1, now);
}

static struct tide_mc_table_metrics
metrics(void)
{
	return mc_fixture_metrics(T);
}

/* ------------------------------------------------------------------------------------------ */

static void
test_mount_remount_ping(void)
{
	struct tide_mc_segment g0 = SEG(7, "h1", 0, MIB, "h1:1"), gz = SEG(7, "h1", 4096, 0, "x");
	struct tide_mc_segment g = SEG(7, "h1", 0x10000, MIB, "10.0.0.1:1234");
	struct tide_mc_segment g2 = SEG(8, "h1b", 0x900000, MIB, "10.0.0.1:1235");
	struct tide_mc_segment bad = g;
	struct tide_mc_segment both[2];
	struct tide_mc_ping_info pi;

	mk(0, 1024);
	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(T, &g0, &C1, 0), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(T, &gz, &C1, 0), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(T, &g, &C1, 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(T, &g, &C1, 0), 0); /* idempotent */
	CU_ASSERT_EQUAL(metrics().segments, 1);
	CU_ASSERT_EQUAL(metrics().capacity_bytes, MIB);
	/* First Ping after a mount: NEED_REMOUNT (capture), until ReMountSegment. */
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C1, 1000, &pi), 0);
	CU_ASSERT_EQUAL(pi.client_status, TIDE_MC_CLIENT_NEED_REMOUNT);
	CU_ASSERT_EQUAL(pi.view_version_id, 0);
	bad.size = 2 * MIB; /* same id, other attributes */
	CU_ASSERT_EQUAL(tide_mc_table_remount_segments(T, &bad, 1, &C1, 1000),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_remount_segments(T, &g, 1, &C2, 1000),
			TIDE_MC_EC_INVALID_PARAMS); /* another client's segment */
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C1, 1000, &pi), 0);
	CU_ASSERT_EQUAL(pi.client_status, TIDE_MC_CLIENT_NEED_REMOUNT);
	both[0] = g;
	both[1] = g2;
	CU_ASSERT_EQUAL(tide_mc_table_remount_segments(T, both, 2, &C1, 1000), 0);
	CU_ASSERT_EQUAL(metrics().segments, 2); /* the new one was mounted */
	CU_ASSERT_EQUAL(tide_mc_table_remount_segments(T, both, 2, &C1, 1000), 0);
	CU_ASSERT_EQUAL(metrics().segments, 2);
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C1, 1500, &pi), 0);
	CU_ASSERT_EQUAL(pi.client_status, TIDE_MC_CLIENT_OK);
	CU_ASSERT_EQUAL(metrics().ok_clients, 1);
	/* An unknown client pinging is told to remount. */
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C3, 1500, &pi), 0);
	CU_ASSERT_EQUAL(pi.client_status, TIDE_MC_CLIENT_NEED_REMOUNT);
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_PING], 4);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_MOUNT], 2);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_REMOUNT], 2);
	rm();
}

static void
test_put_get_basics(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_replica_list rl;
	struct tide_mc_str k = S("k1");
	struct tide_mc_opt_u64 cs = {true, 0xabcdef};
	bool ex;

	mk(0, 1024);
	mount(1, "node1", 0x7f0000000000, MIB, &C1);
	CU_ASSERT_EQUAL(get("k1", 0, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 1000, &cfg, 10, &A, &d), 0);
	CU_ASSERT_EQUAL_FATAL(d.n, 1);
	CU_ASSERT_EQUAL(d.v[0].kind, TIDE_MC_RK_MEMORY);
	CU_ASSERT_EQUAL(d.v[0].status, TIDE_MC_RS_PROCESSING);
	CU_ASSERT_EQUAL(d.v[0].u.memory.size, 1000);
	CU_ASSERT(d.v[0].u.memory.buffer_address >= 0x7f0000000000);
	CU_ASSERT(d.v[0].u.memory.buffer_address + 1000 <= 0x7f0000000000 + MIB);
	CU_ASSERT_EQUAL(d.v[0].u.memory.protocol.len, 3);
	CU_ASSERT(memcmp(d.v[0].u.memory.protocol.ptr, "tcp", 3) == 0);
	CU_ASSERT_EQUAL(d.v[0].u.memory.transport_endpoint.len, 5);
	CU_ASSERT(memcmp(d.v[0].u.memory.transport_endpoint.ptr, "node1", 5) == 0);
	CU_ASSERT(d.v[0].id > 0);
	/* Still being written: not readable, not existing. */
	CU_ASSERT_EQUAL(get("k1", 20, NULL), TIDE_MC_EC_REPLICA_IS_NOT_READY);
	CU_ASSERT_EQUAL(tide_mc_table_exist_key(T, &k, 20, &ex), 0);
	CU_ASSERT_FALSE(ex);
	CU_ASSERT_EQUAL(remove_key("k1", true, 20), TIDE_MC_EC_REPLICA_IS_NOT_READY);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &k, 1000, &cfg, 20, &A, &d),
			TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, 30),
			TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, &cs, TIDE_MC_REPLICA_NOF_SSD, 30),
			TIDE_MC_EC_INVALID_WRITE);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, &cs, TIDE_MC_REPLICA_MEMORY, 30), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, &cs, TIDE_MC_REPLICA_ALL, 31), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, 31),
			TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(get("k1", 40, &rl), 0);
	CU_ASSERT_EQUAL_FATAL(rl.replicas.n, 1);
	CU_ASSERT_EQUAL(rl.replicas.v[0].status, TIDE_MC_RS_COMPLETE);
	CU_ASSERT_EQUAL(rl.lease_ttl_ms, 10000); /* stock default_kv_lease_ttl */
	CU_ASSERT(rl.object_checksum.has);
	CU_ASSERT_EQUAL(rl.object_checksum.val, 0xabcdef);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 10, &cfg, 50, &A, &d),
			TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT_EQUAL(tide_mc_table_put_revoke(T, &C1, &k, TIDE_MC_REPLICA_ALL, 50),
			TIDE_MC_EC_INVALID_WRITE);
	CU_ASSERT_EQUAL(tide_mc_table_put_revoke(T, &C2, &k, TIDE_MC_REPLICA_ALL, 50),
			TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(metrics().keys, 1);
	CU_ASSERT_EQUAL(metrics().value_bytes, 1000);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024);
	/* Missing keys. */
	k = S("nope");
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 60),
			TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(tide_mc_table_put_revoke(T, &C1, &k, TIDE_MC_REPLICA_ALL, 60),
			TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(remove_key("nope", false, 60), TIDE_MC_EC_OBJECT_NOT_FOUND);
	/* Revoke of a PROCESSING put frees at once. */
	k = S("k2");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 5000, &cfg, 70, &A, &d), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024 + 5056);
	CU_ASSERT_EQUAL(metrics().processing_keys, 1);
	CU_ASSERT_EQUAL(tide_mc_table_put_revoke(T, &C1, &k, TIDE_MC_REPLICA_ALL, 70), 0);
	CU_ASSERT_EQUAL(get("k2", 70, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024);
	CU_ASSERT_EQUAL(metrics().processing_keys, 0);
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_PUT_START], 4);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_PUT_START], 2);
	rm();
}

static void
test_put_validation(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k = S("k"), e = S(""), gid[2] = {S("g1"), S("g2")};

	mk(0, 1024);
	mount(1, "n", 4096, MIB, &C1);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &e, 10, &cfg, 0, &A, &d),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 0, &cfg, 0, &A, &d),
			TIDE_MC_EC_INVALID_PARAMS);
	cfg.replica_num = 0;
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 10, &cfg, 0, &A, &d),
			TIDE_MC_EC_INVALID_PARAMS);
	cfg = CFG(1);
	cfg.nof_replica_num = 1;
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 10, &cfg, 0, &A, &d),
			TIDE_MC_EC_INVALID_PARAMS);
	cfg = CFG(1);
	cfg.soft_pin_action = TIDE_MC_SOFT_PIN_ENABLE;
	cfg.soft_pin_ttl_ms = (struct tide_mc_opt_u64){true, 25ull * 3600 * 1000}; /* > 24 h */
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 10, &cfg, 0, &A, &d),
			TIDE_MC_EC_INVALID_PARAMS);
	cfg.soft_pin_action = TIDE_MC_SOFT_PIN_PRESERVE;
	cfg.soft_pin_ttl_ms = (struct tide_mc_opt_u64){true, 1000}; /* TTL without ENABLE */
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 10, &cfg, 0, &A, &d),
			TIDE_MC_EC_INVALID_PARAMS);
	cfg = CFG(1);
	cfg.group_ids.has = true;
	cfg.group_ids.val.v = gid;
	cfg.group_ids.val.n = 2;
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 10, &cfg, 0, &A, &d),
			TIDE_MC_EC_INVALID_PARAMS);
	cfg.group_ids.val.n = 1; /* accepted */
	cfg.host_id = S("somehost");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 10, &cfg, 0, &A, &d), 0);
	/* Bigger than any segment. */
	k = S("big");
	cfg = CFG(1);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 2 * MIB, &cfg, 0, &A, &d),
			TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	rm();
}

static void
test_placement(void)
{
	struct tide_mc_replicate_config cfg = CFG(3);
	struct tide_mc_replica_desc_vec d;
	char key[32];
	struct tide_mc_str k, pref[2] = {S("B"), S("C")};

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	mount(2, "B", 0x200000, MIB, &C1);
	mount(3, "B", 0x300000, MIB, &C2); /* same name: same target as 2 */
	mount(4, "C", 0x400000, MIB, &C2);
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		k = S(key);
		cfg = CFG(5); /* more than there are names: best effort */
		CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 100, &cfg, 0, &A, &d), 0);
		CU_ASSERT_EQUAL_FATAL(d.n, 3);
		/* Distinct names: the endpoint is the name here. */
		for (unsigned a = 0; a < d.n; a++)
			for (unsigned b = a + 1; b < d.n; b++)
				CU_ASSERT(memcmp(d.v[a].u.memory.transport_endpoint.ptr,
						 d.v[b].u.memory.transport_endpoint.ptr, 1) != 0);
		CU_ASSERT(d.v[0].id != d.v[1].id && d.v[1].id != d.v[2].id);
	}
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "q%d", i);
		k = S(key);
		cfg = CFG(1);
		cfg.preferred_segment = S("C");
		CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 100, &cfg, 0, &A, &d), 0);
		CU_ASSERT_EQUAL_FATAL(d.n, 1);
		CU_ASSERT(memcmp(d.v[0].u.memory.transport_endpoint.ptr, "C", 1) == 0);
		CU_ASSERT(d.v[0].u.memory.buffer_address >= 0x400000);
	}
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "r%d", i);
		k = S(key);
		cfg = CFG(2);
		cfg.preferred_segments.v = pref;
		cfg.preferred_segments.n = 2;
		CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 100, &cfg, 0, &A, &d), 0);
		CU_ASSERT_EQUAL_FATAL(d.n, 2);
		CU_ASSERT(memcmp(d.v[0].u.memory.transport_endpoint.ptr, "B", 1) == 0);
		CU_ASSERT(memcmp(d.v[1].u.memory.transport_endpoint.ptr, "C", 1) == 0);
	}
	rm();
}

static void
test_capacity(void)
{
	struct tide_mc_replicate_config cfg = CFG(2);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k;
	char key[32];
	int ok = 0;

	mk(0, 1024);
	mount(1, "A", 0x100000, 64 * KIB, &C1);
	mount(2, "B", 0x200000, 32 * KIB, &C1);
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		k = S(key);
		if (tide_mc_table_put_start(T, &C1, &k, 4 * KIB, &cfg, 0, &A, &d) == 0) {
			ok++;
			CU_ASSERT(d.n >= 1 && d.n <= 2);
		}
	}
	/* 16 + 8 buffers of 4 KiB; objects take 2 while both have room, then 1. */
	CU_ASSERT_EQUAL(ok, 16);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 96 * KIB);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_PUT_START], 84);
	rm();
}

static void
test_leases(void)
{
	struct tide_mc_str k = S("L");
	bool ex;

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	CU_ASSERT_EQUAL(put("L", 100, 1, 1000), 0);
	/* PutEnd grants a 0 ms lease: removable at once. */
	CU_ASSERT_EQUAL(put("M", 100, 1, 1000), 0);
	CU_ASSERT_EQUAL(remove_key("M", false, 1000), 0);
	/* A get leases for 10 s (capture: remove right after get -> -706). */
	CU_ASSERT_EQUAL(get("L", 2000, NULL), 0);
	CU_ASSERT_EQUAL(remove_key("L", false, 2001), TIDE_MC_EC_OBJECT_HAS_LEASE);
	CU_ASSERT_EQUAL(remove_key("L", false, 11999), TIDE_MC_EC_OBJECT_HAS_LEASE);
	/* Each read extends it. */
	CU_ASSERT_EQUAL(tide_mc_table_exist_key(T, &k, 5000, &ex), 0);
	CU_ASSERT(ex);
	CU_ASSERT_EQUAL(remove_key("L", false, 14999), TIDE_MC_EC_OBJECT_HAS_LEASE);
	CU_ASSERT_EQUAL(remove_key("L", false, 15000), 0);
	CU_ASSERT_EQUAL(put("L", 100, 1, 20000), 0);
	CU_ASSERT_EQUAL(get("L", 20000, NULL), 0);
	CU_ASSERT_EQUAL(remove_key("L", false, 20001), TIDE_MC_EC_OBJECT_HAS_LEASE);
	CU_ASSERT_EQUAL(remove_key("L", true, 20001), 0); /* forced */
	CU_ASSERT_EQUAL(get("L", 20002, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_REMOVE], 4);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	rm();
}

static void
test_stale_put_takeover(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k = S("s");

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 1000, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &k, 1000, &cfg, 30000, &A, &d),
			TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &k, 1000, &cfg, 30001, &A, &d), 0);
	/* The old buffer waits for put_start_release_timeout (600 s). */
	CU_ASSERT_EQUAL(metrics().discarded_buffers, 1);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 2048);
	CU_ASSERT_EQUAL(metrics().put_discards, 1);
	CU_ASSERT_EQUAL(metrics().put_releases, 0);
	CU_ASSERT_EQUAL(metrics().put_discard_bytes, 1000);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 30002),
			TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, 30002), 0);
	tick_alive(30001 + 599999);
	CU_ASSERT_EQUAL(metrics().discarded_buffers, 1);
	tick_alive(30001 + 600000);
	CU_ASSERT_EQUAL(metrics().discarded_buffers, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024);
	CU_ASSERT_EQUAL(metrics().put_discards, 1);
	CU_ASSERT_EQUAL(metrics().put_releases, 1);
	CU_ASSERT_EQUAL(metrics().put_discard_bytes, 0);
	CU_ASSERT_EQUAL(get("s", 700000, NULL), 0);
	rm();
}

static void
test_upsert(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d1, d2;
	struct tide_mc_replica_list rl;
	struct tide_mc_str k = S("u");

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	/* Absent: as PutStart. */
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C1, &k, 1000, &cfg, 0, &A, &d1), 0);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	/* Same length: in place, same addresses and ids, unreadable until the end. */
	CU_ASSERT_EQUAL(get("u", 10, NULL), 0); /* a lease does not block upsert */
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C2, &k, 1000, &cfg, 20, &A, &d2), 0);
	CU_ASSERT_EQUAL_FATAL(d2.n, 1);
	CU_ASSERT_EQUAL(d2.v[0].u.memory.buffer_address, d1.v[0].u.memory.buffer_address);
	CU_ASSERT_EQUAL(d2.v[0].id, d1.v[0].id);
	CU_ASSERT_EQUAL(d2.v[0].status, TIDE_MC_RS_PROCESSING);
	CU_ASSERT_EQUAL(get("u", 30, NULL), TIDE_MC_EC_REPLICA_IS_NOT_READY);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 40),
			TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_end(T, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, 40), 0);
	CU_ASSERT_EQUAL(get("u", 50, &rl), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024);
	/* Another length: new buffer, the old one released later; hard pin kept. */
	CU_ASSERT_EQUAL(tide_mc_table_remove(T, &k, true, 60), 0);
	cfg.with_hard_pin = true;
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C1, &k, 1000, &cfg, 60, &A, &d1), 0);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 60), 0);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 1);
	cfg.with_hard_pin = false;
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C1, &k, 3000, &cfg, 70, &A, &d2), 0);
	CU_ASSERT_EQUAL_FATAL(d2.n, 1);
	CU_ASSERT(d2.v[0].u.memory.buffer_address != d1.v[0].u.memory.buffer_address);
	CU_ASSERT_EQUAL(d2.v[0].u.memory.size, 3000);
	CU_ASSERT_EQUAL(metrics().discarded_buffers, 1);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 1);
	/* Upsert of a PROCESSING key preempts it at once. */
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C2, &k, 3000, &cfg, 80, &A, &d1), 0);
	CU_ASSERT_EQUAL(metrics().discarded_buffers, 2);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 90),
			TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_end(T, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, 90), 0);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 1);
	/* Revoke of an in-place upsert drops the (overwritten) object. */
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C2, &k, 3000, &cfg, 100, &A, &d1), 0);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_revoke(T, &C2, &k, TIDE_MC_REPLICA_ALL, 110), 0);
	CU_ASSERT_EQUAL(get("u", 120, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 0);
	tick_alive(1000000);
	CU_ASSERT_EQUAL(metrics().segments, 1);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	rm();
}

static void
test_batches(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_str keys[3] = {S("b0"), S("b1"), S("b2")};
	uint64_t lens[3] = {100, 200, 0};
	struct tide_mc_exp_replicas sr[3];
	struct tide_mc_exp_void vr[3];
	struct tide_mc_exp_bool br[3];
	struct tide_mc_exp_replica_list gr[3];
	struct tide_mc_object_meta metas[3];

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	/* Vector sizes differ: every key INVALID_PARAMS. */
	CU_ASSERT_EQUAL(
		tide_mc_table_batch_put_start(T, false, &C1, keys, 3, lens, 2, &cfg, 0, &A, sr), 0);
	for (int i = 0; i < 3; i++)
		CU_ASSERT(!sr[i].ok && sr[i].err == TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(put("b1", 10, 1, 0), 0); /* b1 exists already */
	CU_ASSERT_EQUAL(
		tide_mc_table_batch_put_start(T, false, &C1, keys, 3, lens, 3, &cfg, 0, &A, sr), 0);
	CU_ASSERT(sr[0].ok && sr[0].val.n == 1 && sr[0].val.v[0].u.memory.size == 100);
	CU_ASSERT(!sr[1].ok && sr[1].err == TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT(!sr[2].ok && sr[2].err == TIDE_MC_EC_INVALID_PARAMS);
	for (int i = 0; i < 3; i++)
		metas[i] = (struct tide_mc_object_meta){keys[i], {false, 0}};
	CU_ASSERT_EQUAL(
		tide_mc_table_batch_put_end(T, false, &C1, metas, 3, TIDE_MC_REPLICA_ALL, 0, vr),
		0);
	CU_ASSERT(vr[0].ok && vr[1].ok); /* b1: already COMPLETE, same writer */
	CU_ASSERT(!vr[2].ok && vr[2].err == TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(tide_mc_table_batch_exist_key(T, keys, 3, 0, br), 0);
	CU_ASSERT(br[0].ok && br[0].val && br[1].val && !br[2].val);
	CU_ASSERT_EQUAL(tide_mc_table_batch_get_replica_list(T, keys, 3, 0, &A, gr), 0);
	CU_ASSERT(gr[0].ok && gr[0].val.replicas.n == 1 && gr[1].ok);
	CU_ASSERT(!gr[2].ok && gr[2].err == TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(tide_mc_table_batch_remove(T, keys, 3, false, 1, vr), 0);
	CU_ASSERT(!vr[0].ok && vr[0].err == TIDE_MC_EC_OBJECT_HAS_LEASE);
	CU_ASSERT(!vr[2].ok && vr[2].err == TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(tide_mc_table_batch_remove(T, keys, 2, true, 1, vr), 0);
	CU_ASSERT(vr[0].ok && vr[1].ok);
	/* Batch revoke and upsert batch with group_ids. */
	lens[2] = 300;
	cfg.group_ids.has = true;
	cfg.group_ids.val.v = keys;
	cfg.group_ids.val.n = 3;
	CU_ASSERT_EQUAL(
		tide_mc_table_batch_put_start(T, true, &C1, keys, 3, lens, 3, &cfg, 2, &A, sr), 0);
	CU_ASSERT(sr[0].ok && sr[1].ok && sr[2].ok);
	CU_ASSERT_EQUAL(
		tide_mc_table_batch_put_revoke(T, true, &C2, keys, 3, TIDE_MC_REPLICA_ALL, 3, vr),
		0);
	CU_ASSERT(!vr[0].ok && vr[0].err == TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(
		tide_mc_table_batch_put_revoke(T, true, &C1, keys, 3, TIDE_MC_REPLICA_ALL, 3, vr),
		0);
	CU_ASSERT(vr[0].ok && vr[1].ok && vr[2].ok);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_BATCH_PUT_START], 6);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_BATCH_PUT_START], 5);
	/* Calls as stock counts them: every key failed, or some. */
	CU_ASSERT_EQUAL(metrics().batch_calls[TIDE_MC_TABLE_OP_BATCH_PUT_START], 2);
	CU_ASSERT_EQUAL(metrics().batch_failed_calls[TIDE_MC_TABLE_OP_BATCH_PUT_START], 1);
	CU_ASSERT_EQUAL(metrics().batch_partial_calls[TIDE_MC_TABLE_OP_BATCH_PUT_START], 1);
	CU_ASSERT_EQUAL(metrics().batch_calls[TIDE_MC_TABLE_OP_BATCH_UPSERT_START], 1);
	CU_ASSERT_EQUAL(metrics().batch_failed_calls[TIDE_MC_TABLE_OP_BATCH_UPSERT_START], 0);
	CU_ASSERT_EQUAL(metrics().batch_partial_calls[TIDE_MC_TABLE_OP_BATCH_UPSERT_START], 0);
	CU_ASSERT_EQUAL(metrics().batch_partial_calls[TIDE_MC_TABLE_OP_BATCH_PUT_END], 1);
	CU_ASSERT_EQUAL(metrics().batch_calls[TIDE_MC_TABLE_OP_BATCH_UPSERT_REVOKE], 2);
	CU_ASSERT_EQUAL(metrics().batch_failed_calls[TIDE_MC_TABLE_OP_BATCH_UPSERT_REVOKE], 1);
	CU_ASSERT_EQUAL(metrics().batch_partial_calls[TIDE_MC_TABLE_OP_BATCH_GET_REPLICA_LIST], 1);
	CU_ASSERT_EQUAL(metrics().batch_calls[TIDE_MC_TABLE_OP_BATCH_REMOVE], 2);
	CU_ASSERT_EQUAL(metrics().batch_failed_calls[TIDE_MC_TABLE_OP_BATCH_EXIST_KEY], 0);
	/* An empty batch is a failed call (0 of 0 keys answered), as stock counts it. */
	CU_ASSERT_EQUAL(tide_mc_table_batch_exist_key(T, NULL, 0, 4, NULL), 0);
	CU_ASSERT_EQUAL(metrics().batch_calls[TIDE_MC_TABLE_OP_BATCH_EXIST_KEY], 2);
	CU_ASSERT_EQUAL(metrics().batch_failed_calls[TIDE_MC_TABLE_OP_BATCH_EXIST_KEY], 1);
	/* Reads: the batch get's three lookups, two found (b0: 100 bytes, b1: 10). */
	CU_ASSERT_EQUAL(metrics().gets, 3);
	CU_ASSERT_EQUAL(metrics().gets_found, 2);
	CU_ASSERT_EQUAL(metrics().gets_found_bytes, 110);
	/* Objects created: b1, b0, then b0 b1 b2 by the upsert batch, all <= 4096 bytes. */
	CU_ASSERT_EQUAL(metrics().vsize_bucket[0], 5);
	CU_ASSERT_EQUAL(metrics().vsize_bucket[1], 0);
	CU_ASSERT_EQUAL(metrics().vsize_sum, 10 + 100 + 100 + 200 + 300);
	rm();
}

/* BatchReplicaClear: what is cleared (whole objects, or the replicas on one segment name)
 * and what is kept (absent, another writer's, leased, in flight), with stock's counting. */
static struct tide_mc_str_vec
clear(const char *const *keys, size_t n, const char *seg, uint64_t now)
{
	struct tide_mc_str ks[8], sg = S(seg);
	struct tide_mc_str_vec out;

	CU_ASSERT_FATAL(n <= 8);
	for (size_t i = 0; i < n; i++)
		ks[i] = S(keys[i]);
	CU_ASSERT_EQUAL(tide_mc_table_batch_replica_clear(T, &C1, ks, n, &sg, now, &A, &out), 0);
	return out;
}

static void
test_batch_replica_clear(void)
{
	static const char *const first[] = {"two", "nokey", "", "leased", "other", "proc"};
	static const char *const again[] = {"two"};
	static const char *const whole[] = {"one", "two", "pinned", "leased"};
	static const char *const later[] = {"leased", "proc"};
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_replica_list rl;
	struct tide_mc_str k;
	struct tide_mc_str_vec out;
	struct tide_mc_table_metrics m;
	const enum tide_mc_table_op op = TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR;
	uint64_t vb;

	mk(0, 1024); /* 10 s read leases */
	mount(1, "A", 0x100000, MIB, &C1);
	mount(2, "B", 0x200000, MIB, &C1);
	CU_ASSERT_EQUAL(put("two", 100, 2, 0), 0);
	CU_ASSERT_EQUAL(put("one", 100, 1, 0), 0);
	CU_ASSERT_EQUAL(put("leased", 100, 1, 0), 0);
	CU_ASSERT_EQUAL(get("leased", 0, NULL), 0); /* leased until 10000 */
	k = S("other");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &k, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	cfg.preferred_segment = S("A");
	k = S("proc");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 100, &cfg, 0, &A, &d), 0);
	cfg.with_hard_pin = true;
	k = S("pinned");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	vb = metrics().value_bytes;

	/* On segment B: only "two" (its replica there); the rest is skipped. */
	out = clear(first, 6, "B", 1);
	CU_ASSERT_EQUAL_FATAL(out.n, 1);
	CU_ASSERT(out.v[0].len == 3 && memcmp(out.v[0].ptr, "two", 3) == 0);
	CU_ASSERT_EQUAL(get("two", 1, &rl), 0);
	CU_ASSERT_EQUAL_FATAL(rl.replicas.n, 1);
	CU_ASSERT(rl.replicas.v[0].u.memory.buffer_address < 0x200000); /* the one on A */
	CU_ASSERT_EQUAL(metrics().value_bytes, vb - 100);
	/* No replica on B any more; "two" was just read (leased too). */
	out = clear(again, 1, "B", 20000);
	CU_ASSERT_EQUAL(out.n, 0);
	CU_ASSERT_PTR_NULL(out.v);
	out = clear(whole, 4, "", 20000);
	CU_ASSERT_EQUAL(out.n, 4);
	for (size_t i = 0; i < 4; i++)
		CU_ASSERT(out.n == 4 && out.v[i].ptr == whole[i]); /* borrowed, in order */
	CU_ASSERT_EQUAL(get("one", 20000, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(get("pinned", 20000, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	/* "proc" is still PROCESSING; "leased" is gone already. */
	out = clear(later, 2, "", 20000);
	CU_ASSERT_EQUAL(out.n, 0);
	k = S("proc");
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 20000), 0);
	out = clear(later, 2, "A", 20000);
	CU_ASSERT_EQUAL(out.n, 1); /* on A, its only replica: the object goes */
	CU_ASSERT_EQUAL(get("proc", 20000, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	out = clear(NULL, 0, "", 20000); /* stock counts an empty batch as a failed call */
	CU_ASSERT_EQUAL(out.n, 0);

	m = metrics();
	CU_ASSERT_EQUAL(m.keys, 1); /* "other" */
	CU_ASSERT_EQUAL(m.value_bytes, 100);
	CU_ASSERT_EQUAL(m.hard_pinned_keys, 0);
	CU_ASSERT_EQUAL(m.requests[op], 6 + 1 + 4 + 2 + 2 + 0);
	CU_ASSERT_EQUAL(m.failures[op], 5 + 1 + 0 + 2 + 1);
	CU_ASSERT_EQUAL(m.batch_calls[op], 6);
	CU_ASSERT_EQUAL(m.batch_failed_calls[op], 3);
	CU_ASSERT_EQUAL(m.batch_partial_calls[op], 2);
	CU_ASSERT_STRING_EQUAL(tide_mc_table_op_name(op), "batch_replica_clear");
	k = S("other");
	CU_ASSERT_EQUAL(tide_mc_table_batch_replica_clear(T, NULL, &k, 1, NULL, 0, &A, &out),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_batch_replica_clear(T, &C1, NULL, 1, NULL, 0, &A, &out),
			TIDE_MC_EC_INVALID_PARAMS);
	/* Another writer's object stays whoever asks, but its writer may clear it. */
	CU_ASSERT_EQUAL(tide_mc_table_batch_replica_clear(T, &C2, &k, 1, NULL, 20000, &A, &out), 0);
	CU_ASSERT_EQUAL(out.n, 1);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	rm();
}

static void
test_regex_and_remove_all(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_regex_entry_vec rv;
	struct tide_mc_str re = S("^user/[0-9]+$"), bad = S("(unclosed"), k = S("user/99");
	char key[32];
	int64_t cnt;

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "user/%d", i);
		CU_ASSERT_EQUAL(put(key, 64, 1, 0), 0);
		snprintf(key, sizeof(key), "sys/%d", i);
		CU_ASSERT_EQUAL(put(key, 64, 1, 0), 0);
	}
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 64, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &bad, 0, &A, &rv),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 100, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 10); /* not the PROCESSING user/99 */
	for (size_t i = 0; i < rv.n; i++) {
		CU_ASSERT(rv.v[i].key.len >= 6 && memcmp(rv.v[i].key.ptr, "user/", 5) == 0);
		CU_ASSERT_EQUAL(rv.v[i].replicas.n, 1);
	}
	/* They are leased now: non-forced removal skips them. */
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &re, false, 200, &cnt), 0);
	CU_ASSERT_EQUAL(cnt, 0);
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &bad, false, 200, &cnt),
			TIDE_MC_EC_INVALID_PARAMS);
	re = S("/[0-4]$");
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &re, false, 200, &cnt), 0);
	CU_ASSERT_EQUAL(cnt, 5); /* sys/0..4 */
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &re, true, 200, &cnt), 0);
	CU_ASSERT_EQUAL(cnt, 5); /* user/0..4 */
	/* RemoveAll: unleased COMPLETE only, unless forced (never PROCESSING). */
	CU_ASSERT_EQUAL(tide_mc_table_remove_all(T, false, 300), 5); /* sys/5..9 */
	CU_ASSERT_EQUAL(tide_mc_table_remove_all(T, true, 300), 5);  /* user/5..9 */
	CU_ASSERT_EQUAL(metrics().keys, 1);
	CU_ASSERT_EQUAL(tide_mc_table_remove_all(T, true, 300), 0);
	rm();
}

static void
test_unmount(void)
{
	struct tide_mc_replicate_config cfg = CFG(2);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_replica_list rl;
	struct tide_mc_str k = S("x"), p = S("proc"), na = S("A"), nz = S("Z");
	struct tide_mc_uuid s1 = {1, 1}, s2 = {2, 2}, s9 = {9, 9};
	int32_t st;

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	mount(2, "B", 0x200000, MIB, &C2);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(d.n, 2);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	cfg = CFG(1);
	cfg.preferred_segment = S("A");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &p, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_unmount_segment(T, &s9, &C1, 0), 0); /* unknown: OK */
	CU_ASSERT_EQUAL(tide_mc_table_unmount_segment(T, &s1, &C1, 0), 0);
	CU_ASSERT_EQUAL(metrics().segments, 1);
	CU_ASSERT_EQUAL(get("x", 1, &rl), 0);
	CU_ASSERT_EQUAL_FATAL(rl.replicas.n, 1);
	CU_ASSERT(rl.replicas.v[0].u.memory.buffer_address >= 0x200000);
	/* A PROCESSING object whose only buffer went with the segment disappears. */
	CU_ASSERT_EQUAL(get("proc", 1, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(metrics().processing_keys, 0);
	CU_ASSERT_EQUAL(metrics().value_bytes, 100);
	CU_ASSERT_EQUAL(tide_mc_table_query_segment_status(T, &na, &st),
			TIDE_MC_EC_SEGMENT_NOT_FOUND);
	/* Graceful: no new allocation there, still readable, gone after the grace. */
	CU_ASSERT_EQUAL(tide_mc_table_graceful_unmount_segment(T, &s2, &C2, 5000, 100), 0);
	na = S("B");
	CU_ASSERT_EQUAL(tide_mc_table_query_segment_status(T, &na, &st), 0);
	CU_ASSERT_EQUAL(st, TIDE_MC_SEGMENT_UNMOUNTING);
	CU_ASSERT_EQUAL(tide_mc_table_query_segment_status(T, &nz, &st),
			TIDE_MC_EC_SEGMENT_NOT_FOUND);
	k = S("y");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 100, &cfg, 200, &A, &d),
			TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(get("x", 200, NULL), 0);
	tide_mc_table_tick(T, 5099);
	CU_ASSERT_EQUAL(metrics().segments, 1);
	tide_mc_table_tick(T, 5100);
	CU_ASSERT_EQUAL(metrics().segments, 0);
	CU_ASSERT_EQUAL(get("x", 5100, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	CU_ASSERT_EQUAL(metrics().capacity_bytes, 0);
	CU_ASSERT_EQUAL(metrics().value_bytes, 0);
	rm();
}

static void
test_client_liveness(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_ping_info pi;
	struct tide_mc_str k = S("orphan"), k2 = S("slow");

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1); /* C1 known at t=0 */
	CU_ASSERT_EQUAL(put("kept", 100, 1, 0), 0);
	/* C2 has no segment but writes into A, then dies. */
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C2, 0, &pi), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &k, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k2, 100, &cfg, 0, &A, &d), 0);
	for (uint64_t now = 1000; now <= 15000; now += 1000) {
		CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C1, now, &pi), 0);
		tide_mc_table_tick(T, now);
	}
	/* C2's TTL (10 s) passed: its in-flight put is reclaimed; C1 is alive. */
	CU_ASSERT_EQUAL(get("orphan", 15000, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(get("slow", 15000, NULL), TIDE_MC_EC_REPLICA_IS_NOT_READY);
	CU_ASSERT_EQUAL(metrics().segments, 1);
	CU_ASSERT_EQUAL(metrics().clients, 1);
	CU_ASSERT_EQUAL(metrics().expired_clients, 1);
	CU_ASSERT_EQUAL(metrics().reclaimed_puts, 1);
	/* A put PROCESSING for put_start_release_timeout is reclaimed too. */
	for (uint64_t now = 16000; now <= 600000; now += 5000)
		CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C1, now, &pi), 0);
	tick_alive(599999);
	CU_ASSERT_EQUAL(get("slow", 599999, NULL), TIDE_MC_EC_REPLICA_IS_NOT_READY);
	tick_alive(600000);
	CU_ASSERT_EQUAL(get("slow", 600000, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(metrics().reclaimed_puts, 2);
	/* C1 stops pinging: after client_ttl its segment is unmounted, its data gone. */
	tide_mc_table_tick(T, 600000 + 9999);
	CU_ASSERT_EQUAL(metrics().segments, 1);
	tide_mc_table_tick(T, 600000 + 10000);
	CU_ASSERT_EQUAL(metrics().segments, 0);
	CU_ASSERT_EQUAL(get("kept", 610000, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
	CU_ASSERT_EQUAL(metrics().clients, 0);
	/* Coming back: a Ping says NEED_REMOUNT. */
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C1, 620000, &pi), 0);
	CU_ASSERT_EQUAL(pi.client_status, TIDE_MC_CLIENT_NEED_REMOUNT);
	rm();
}

/* 100 objects of 1 KiB fill a 100 KiB segment to the given count. */
static void
fill(int n, uint64_t now)
{
	char key[32];

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "e%02d", i);
		CU_ASSERT_EQUAL(put(key, KIB, 1, now), 0);
	}
}

static bool
present(int i)
{
	char key[32];
	struct tide_mc_str k;

	snprintf(key, sizeof(key), "e%02d", i);
	k = S(key);
	return tide_mc_table_query_key(T, &k, 0, &A, &(struct tide_mc_replica_list){0}) !=
	       TIDE_MC_EC_OBJECT_NOT_FOUND;
}

static void
test_eviction(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k;
	char key[32];
	int gone = 0;

	mk(1000, 4096);
	mount(1, "A", 0x100000, 100 * KIB, &C1);
	fill(89, 0);
	tide_mc_table_tick(T, 1);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 0); /* 0.89 <= 0.90 */
	/* Hard-pin e89, soft-pin e90 and e91, processing e92, then 93..94. */
	cfg.with_hard_pin = true;
	k = S("e89");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, KIB, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	cfg = CFG(1);
	cfg.soft_pin_action = TIDE_MC_SOFT_PIN_ENABLE;
	for (int i = 90; i <= 91; i++) {
		snprintf(key, sizeof(key), "e%02d", i);
		k = S(key);
		CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, KIB, &cfg, 0, &A, &d), 0);
		CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	}
	CU_ASSERT_EQUAL(metrics().soft_pinned_keys, 2);
	cfg = CFG(1);
	k = S("e92");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, KIB, &cfg, 0, &A, &d), 0);
	/* Leases: e00..e09 read at t=100 (expire 1100), others read later in order, so the
	   oldest leases are e10.. upward; e80..e88 are still leased at the tick. */
	for (int i = 0; i < 89; i++) {
		snprintf(key, sizeof(key), "e%02d", i);
		k = S(key);
		CU_ASSERT_EQUAL(tide_mc_table_get_replica_list(T, &k,
							       i < 10 ? 100 : 10 + (uint64_t)i, &A,
							       &(struct tide_mc_replica_list){0}),
				0);
	}
	for (int i = 80; i < 89; i++) {
		snprintf(key, sizeof(key), "e%02d", i);
		k = S(key);
		CU_ASSERT_EQUAL(tide_mc_table_get_replica_list(T, &k, 1050, &A,
							       &(struct tide_mc_replica_list){0}),
				0);
	}
	/* used = 93/100 > 0.9: target max(.05, .93-.9+.05) = .08 of the base. The base is
	   the 91 unpinned COMPLETE objects (hard pin and PROCESSING excluded): ceil(7.28) =
	   8 evicted, the oldest leases first: e10..e17. */
	tide_mc_table_tick(T, 1060);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 8);
	CU_ASSERT_EQUAL(metrics().eviction_rounds, 1);
	for (int i = 0; i < 93; i++)
		gone += !present(i);
	CU_ASSERT_EQUAL(gone, 8);
	for (int i = 10; i < 18; i++)
		CU_ASSERT_FALSE(present(i));
	CU_ASSERT(present(0) && present(18) && present(80) && present(89) && present(90) &&
		  present(92));
	/* 85/100 now: no round. */
	tide_mc_table_tick(T, 1070);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 8);
	rm();
}

static void
test_eviction_soft_pin_last(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k;
	char key[32];

	mk(1000, 4096);
	mount(1, "A", 0x100000, 100 * KIB, &C1);
	/* 3 unpinned objects, 92 soft-pinned, 3 leased. used = .98: target .13, lower .08,
	   base 98: pass 1 takes the 3 unpinned (ceil(12.74) = 13 > 3), pass 2 the oldest
	   ceil(7.84) - 3 = 5 soft-pinned. */
	fill(3, 0);
	cfg.soft_pin_action = TIDE_MC_SOFT_PIN_ENABLE;
	cfg.soft_pin_ttl_ms = (struct tide_mc_opt_u64){true, 3600 * 1000};
	for (int i = 3; i < 98; i++) {
		snprintf(key, sizeof(key), "e%02d", i);
		k = S(key);
		CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, KIB, &cfg, (uint64_t)i, &A, &d),
				0);
		CU_ASSERT_EQUAL(
			tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, (uint64_t)i),
			0);
	}
	for (int i = 95; i < 98; i++) {
		snprintf(key, sizeof(key), "e%02d", i);
		k = S(key);
		CU_ASSERT_EQUAL(tide_mc_table_get_replica_list(T, &k, 500, &A,
							       &(struct tide_mc_replica_list){0}),
				0);
	}
	tide_mc_table_tick(T, 1000);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 8);
	for (int i = 0; i < 8; i++)
		CU_ASSERT_FALSE(present(i)); /* leases = PutEnd times: e03..e07 oldest */
	for (int i = 8; i < 98; i++)
		CU_ASSERT(present(i));
	rm();
}

static void
test_eviction_after_put_failure(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k = S("huge");

	mk(1000, 4096);
	mount(1, "A", 0x100000, 100 * KIB, &C1);
	fill(50, 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, 60 * KIB, &cfg, 10, &A, &d),
			TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(metrics().alloc_failures, 1);
	CU_ASSERT_EQUAL(metrics().eviction_attempts, 0);
	/* Below the watermark, but the failure asks for a round: ceil(50 * .05) = 3. */
	tide_mc_table_tick(T, 20);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 3);
	CU_ASSERT_EQUAL(metrics().eviction_attempts, 1);
	CU_ASSERT_EQUAL(metrics().eviction_rounds, 1);
	tide_mc_table_tick(T, 30);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 3);
	CU_ASSERT_EQUAL(metrics().eviction_attempts, 1); /* no new round asked for */
	rm();
}

/* A writer that dies mid-put leaves nothing visible and nothing allocated after client_ttl. */
static void
test_dead_writer_leaves_nothing(void)
{
	static const char *const dead_keys[] = {"p1", "p2", "p3", "p4", "p5", "q1"};
	struct tide_mc_replicate_config cfg2 = CFG(2), cfg1 = CFG(1);
	struct tide_mc_str bkeys[3] = {S("p2"), S("p3"), S("p4")}, k;
	uint64_t lens[3] = {3000, 100, 70000};
	struct tide_mc_exp_replicas sr[3];
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_regex_entry_vec rv;
	struct tide_mc_table_segment_info *si;
	struct tide_mc_ping_info pi;
	struct tide_mc_str re = S("^(p|q)[0-9]$");
	uint64_t base_alloc, base_keys, base_used_a = 0;
	size_t n;
	bool ex;

	mk(0, 1024);
	cfg1.preferred_segment = S("A");   /* every dead put keeps a replica in A */
	mount(1, "A", 0x100000, MIB, &C1); /* C1: alive throughout */
	mount(2, "B", 0x800000, MIB, &C2); /* C2: has a segment, dies */
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C3, 0, &pi), 0); /* C3: pure client, dies */
	CU_ASSERT_EQUAL(put("kept", 5000, 1, 0), 0);
	base_alloc = metrics().allocated_bytes;
	base_keys = metrics().keys;
	CU_ASSERT_EQUAL(tide_mc_table_segments_list(T, &A, &si, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (si[i].name.len == 1 && si[i].name.ptr[0] == 'A')
			base_used_a = si[i].used;

	/* Every start path, none ended: PutStart (2 replicas, on A and B), BatchPutStart,
	   UpsertStart of an absent key; C2 also writes 2 replicas, one in its own B. */
	k = S("p1");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C3, &k, 4096, &cfg2, 10, &A, &d), 0);
	CU_ASSERT_EQUAL(d.n, 2);
	CU_ASSERT_EQUAL(
		tide_mc_table_batch_put_start(T, false, &C3, bkeys, 3, lens, 3, &cfg1, 10, &A, sr),
		0);
	CU_ASSERT(sr[0].ok && sr[1].ok && sr[2].ok);
	k = S("p5");
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C3, &k, 999, &cfg1, 10, &A, &d), 0);
	k = S("q1");
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &k, 8192, &cfg2, 10, &A, &d), 0);
	CU_ASSERT_EQUAL(metrics().processing_keys, 6);
	CU_ASSERT(metrics().allocated_bytes > base_alloc);
	for (size_t i = 0; i < 6; i++) {
		k = S(dead_keys[i]);
		CU_ASSERT_EQUAL(get(dead_keys[i], 20, NULL), TIDE_MC_EC_REPLICA_IS_NOT_READY);
		CU_ASSERT_EQUAL(tide_mc_table_exist_key(T, &k, 20, &ex), 0);
		CU_ASSERT_FALSE(ex);
	}

	/* Heartbeats stop at t=0; the TTL is 10 s. Just before it nothing is reclaimed. */
	for (uint64_t now = 1000; now < 10000; now += 1000)
		tick_alive(now);
	tick_alive(9999);
	CU_ASSERT_EQUAL(metrics().processing_keys, 6);
	CU_ASSERT_EQUAL(metrics().reclaimed_puts, 0);
	tick_alive(10000);

	CU_ASSERT_EQUAL(metrics().expired_clients, 2);
	CU_ASSERT_EQUAL(metrics().reclaimed_puts, 6);
	CU_ASSERT_EQUAL(metrics().processing_keys, 0);
	CU_ASSERT_EQUAL(metrics().keys, base_keys);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, base_alloc);
	CU_ASSERT_EQUAL(metrics().discarded_buffers, 0);
	CU_ASSERT_EQUAL(metrics().segments, 1); /* B went with C2 */
	tide_mc_table_arena_reset(&A);
	CU_ASSERT_EQUAL(tide_mc_table_segments_list(T, &A, &si, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(si[0].used, base_used_a);
	for (size_t i = 0; i < 6; i++) {
		k = S(dead_keys[i]);
		CU_ASSERT_EQUAL(get(dead_keys[i], 10001, NULL), TIDE_MC_EC_OBJECT_NOT_FOUND);
		CU_ASSERT_EQUAL(tide_mc_table_exist_key(T, &k, 10001, &ex), 0);
		CU_ASSERT_FALSE(ex);
	}
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 10001, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 0);
	CU_ASSERT_EQUAL(get("kept", 10001, NULL), 0);
	/* The keys are free again: nothing stuck PROCESSING, no takeover wait. */
	CU_ASSERT_EQUAL(put("p1", 4096, 2, 10002), 0);
	CU_ASSERT_EQUAL(get("p1", 10003, NULL), 0);
	rm();
}

static void
read_key(const char *key, uint64_t now)
{
	CU_ASSERT_EQUAL(get(key, now, NULL), 0);
}

static int
count_present(int from, int to)
{
	int n = 0;

	for (int i = from; i < to; i++)
		n += present(i);
	return n;
}

/*
 * 95 objects in a 100-object segment: e00..e49 read (GetReplicaList,
 * BatchGetReplicaList, GetReplicaListByRegex), e50..e59 only ExistKey'd,
 * e60..e69 only QueryKey'd, e70..e92 untouched, e93 hard-pinned and read,
 * e94 hard-pinned and unread.
 */
static void
fill_rl(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_exp_replica_list gr[20];
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_regex_entry_vec rv;
	struct tide_mc_str keys[20], k, re = S("^e4[0-9]$");
	char names[20][8];
	bool ex;

	fill(93, 0);
	cfg.with_hard_pin = true;
	for (int i = 93; i < 95; i++) {
		snprintf(names[0], sizeof(names[0]), "e%02d", i);
		k = S(names[0]);
		CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &k, KIB, &cfg, 0, &A, &d), 0);
		CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	}
	for (int i = 0; i < 20; i++) {
		snprintf(names[0], sizeof(names[0]), "e%02d", i);
		read_key(names[0], 0);
	}
	for (int i = 0; i < 20; i++) {
		snprintf(names[i], sizeof(names[i]), "e%02d", 20 + i);
		keys[i] = S(names[i]);
	}
	CU_ASSERT_EQUAL(tide_mc_table_batch_get_replica_list(T, keys, 20, 0, &A, gr), 0);
	for (int i = 0; i < 20; i++)
		CU_ASSERT(gr[i].ok);
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 10);
	for (int i = 50; i < 60; i++) {
		snprintf(names[0], sizeof(names[0]), "e%02d", i);
		k = S(names[0]);
		CU_ASSERT_EQUAL(tide_mc_table_exist_key(T, &k, 0, &ex), 0);
		CU_ASSERT_TRUE(ex);
	}
	for (int i = 60; i < 70; i++)
		CU_ASSERT(present(i)); /* present() is the admin QueryKey */
	read_key("e93", 0);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 2);
	tide_mc_table_arena_reset(&A);
}

static void
test_eviction_pin_unread(void)
{
	uint64_t now = 2000;
	int rc = 0, fails = 0;
	char key[32];

	/* Stock: the oldest leases go first, and the unread objects have the oldest
	   (PutEnd's 0 ms lease): used .95, target .10 of a base of 93 = 10 evicted. */
	mk_opts(1000, 4096, false);
	mount(1, "A", 0x100000, 100 * KIB, &C1);
	fill_rl();
	tide_mc_table_tick(T, now);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 10);
	CU_ASSERT_EQUAL(count_present(60, 93), 33 - 10);
	CU_ASSERT_EQUAL(metrics().evict_skipped_unread, 0);
	rm();

	/* RL mode: only read objects are candidates. Base = the 50 read unpinned ones
	   (e00..e49): ceil(50 * .10) = 5 evicted, all read; the 43 unread kept. */
	mk_opts(1000, 4096, true);
	mount(1, "A", 0x100000, 100 * KIB, &C1);
	fill_rl();
	tide_mc_table_tick(T, now);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 5);
	CU_ASSERT_EQUAL(count_present(0, 50), 45);
	CU_ASSERT_EQUAL(count_present(50, 95), 45);
	CU_ASSERT_EQUAL(metrics().evict_skipped_unread, 43);
	CU_ASSERT_EQUAL(metrics().eviction_rounds, 1);

	/* Keep putting (new objects are unread too): each failure asks for a round,
	   which takes read objects only, until nothing evictable is left. */
	for (int i = 0; i < 200 && fails < 3; i++) {
		snprintf(key, sizeof(key), "n%03d", i);
		rc = put(key, KIB, 1, now);
		fails = rc == 0 ? 0 : fails + 1;
		if (rc != 0)
			CU_ASSERT_EQUAL(rc, TIDE_MC_EC_NO_AVAILABLE_HANDLE);
		tide_mc_table_tick(T, ++now);
	}
	CU_ASSERT_EQUAL(rc, TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(count_present(0, 50), 0);   /* every read object went */
	CU_ASSERT_EQUAL(count_present(50, 95), 45); /* every unread and hard-pinned one stayed */
	CU_ASSERT_EQUAL(metrics().evicted_keys, 50);
	CU_ASSERT_EQUAL(metrics().keys, 100);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, metrics().capacity_bytes);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 2);
	CU_ASSERT(metrics().evict_skipped_unread > 43);

	/* Backpressure lifts when a reader catches up: e70 read, its lease expires,
	   the next failed put's round evicts it, and the put after that fits. */
	read_key("e70", now);
	now += 1001;
	CU_ASSERT_EQUAL(put("late", KIB, 1, now), TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	tide_mc_table_tick(T, now);
	CU_ASSERT_FALSE(present(70));
	CU_ASSERT_EQUAL(metrics().evicted_keys, 51);
	CU_ASSERT_EQUAL(put("late", KIB, 1, now), 0);
	rm();
}

/* An upsert in place is new content: unread again, so pinned again. */
static void
test_eviction_pin_unread_upsert(void)
{
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k = S("e00");
	char key[32];

	mk_opts(1000, 4096, true);
	mount(1, "A", 0x100000, 10 * KIB, &C1);
	fill(10, 0);
	read_key("e00", 0); /* the oldest lease: first to go if it stayed read */
	for (int i = 1; i < 10; i++) {
		snprintf(key, sizeof(key), "e%02d", i);
		read_key(key, 100);
	}
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(T, &C1, &k, KIB, &cfg, 200, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_upsert_end(T, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 200), 0);
	/* used 1.0: target .15 of the 9 read objects = 2, the oldest leases e01, e02 (all
	   at 1100; order among equals is unspecified, so count only). */
	tide_mc_table_tick(T, 2000);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 2);
	CU_ASSERT(present(0));
	CU_ASSERT_EQUAL(metrics().evict_skipped_unread, 1);
	rm();
}

static void
test_query_ip_and_segments(void)
{
	struct tide_mc_segment g1 = SEG(1, "h1", 0x100000, MIB, "10.0.0.1:1000");
	struct tide_mc_segment g2 = SEG(2, "h1b", 0x200000, MIB, "10.0.0.1:1001");
	struct tide_mc_segment g3 = SEG(3, "h1c", 0x300000, MIB, "10.0.0.2");
	struct tide_mc_uuid ids[3] = {C1, C2, C1};
	struct tide_mc_ip_entry_vec iv;
	struct tide_mc_table_segment_info *si;
	size_t n;

	mk(0, 1024);
	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(T, &g1, &C1, 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(T, &g2, &C1, 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(T, &g3, &C1, 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_batch_query_ip(T, ids, 3, &A, &iv), 0);
	CU_ASSERT_EQUAL_FATAL(iv.n, 1); /* C2 has no segment; C1 once */
	CU_ASSERT_EQUAL(iv.v[0].client_id.first, 1);
	CU_ASSERT_EQUAL_FATAL(iv.v[0].ips.n, 2);
	CU_ASSERT(iv.v[0].ips.v[0].len == 8 && memcmp(iv.v[0].ips.v[0].ptr, "10.0.0.1", 8) == 0);
	CU_ASSERT(iv.v[0].ips.v[1].len == 8 && memcmp(iv.v[0].ips.v[1].ptr, "10.0.0.2", 8) == 0);
	/* Counted per client id, as stock: C2 not found. */
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_BATCH_QUERY_IP], 3);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_BATCH_QUERY_IP], 1);
	CU_ASSERT_EQUAL(metrics().batch_calls[TIDE_MC_TABLE_OP_BATCH_QUERY_IP], 1);
	CU_ASSERT_EQUAL(metrics().batch_partial_calls[TIDE_MC_TABLE_OP_BATCH_QUERY_IP], 1);
	CU_ASSERT_EQUAL(put("k", 100, 1, 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_segments_list(T, &A, &si, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(si[0].used + si[1].used + si[2].used, 128);
	CU_ASSERT_EQUAL(si[2].status, TIDE_MC_SEGMENT_OK);
	CU_ASSERT_STRING_EQUAL(tide_mc_table_op_name(TIDE_MC_TABLE_OP_PUT_START), "put_start");
	CU_ASSERT_STRING_EQUAL(tide_mc_table_op_name(TIDE_MC_TABLE_OP_COUNT), "unknown");
	tide_mc_table_arena_reset(&A);
	CU_ASSERT_EQUAL(tide_mc_table_segments_list(T, &A, &si, &n), 0);
	CU_ASSERT_EQUAL(n, 3);
	rm();
}

static void
test_create_rejects(void)
{
	struct tide_mc_table_opts o;
	struct tide_mc_table *t = NULL;

	tide_mc_table_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(o.default_kv_lease_ttl_ms, 10000);
	CU_ASSERT_EQUAL(o.client_ttl_ms, 10000);
	CU_ASSERT_FALSE(o.pin_unread); /* stock eviction unless asked */
	o.eviction_ratio = 1.5;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &t), -EINVAL);
	tide_mc_table_opts_init(&o, sizeof(o));
	o.seg_granule = 100;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &t), -EINVAL);
	tide_mc_table_opts_init(&o, sizeof(o));
	o.put_start_release_timeout_ms = o.put_start_discard_timeout_ms;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &t), -EINVAL);
	tide_mc_table_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(o.regex_match_limit, TIDE_MC_TABLE_REGEX_MATCH_LIMIT);
	o.regex_match_limit = 0;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &t), -EINVAL);
	tide_mc_table_opts_init(&o, sizeof(o));
	o.regex_memory_limit = TIDE_MC_TABLE_REGEX_MEMORY_MIN - 1;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &t), -EINVAL);
	tide_mc_table_opts_init(&o, sizeof(o));
	o.regex_timeout_ms = 0;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &t), -EINVAL);
	CU_ASSERT_PTR_NULL(t);
	tide_mc_table_destroy(NULL);
}

/* Many keys through grow, shrink and backward-shift deletion, against a model. */
static void
test_hash_stress(void)
{
	enum { N = 20000 };
	static bool live[N];
	char key[32];
	uint64_t x = 7;
	size_t nlive = 0;

	mk(0, 1u << 16);
	mount(1, "A", 0x100000, 64ull * MIB, &C1);
	memset(live, 0, sizeof(live));
	for (int round = 0; round < 6 * N; round++) {
		int i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (int)(x % N);
		snprintf(key, sizeof(key), "stress-%d", i);
		if (!live[i]) {
			CU_ASSERT_EQUAL(put(key, 64, 1, 0), 0);
			live[i] = true;
			nlive++;
		} else if (round % 3) {
			CU_ASSERT_EQUAL(remove_key(key, true, 0), 0);
			live[i] = false;
			nlive--;
		}
		if (round % 997 == 0)
			tide_mc_table_arena_reset(&A);
	}
	CU_ASSERT_EQUAL(metrics().keys, nlive);
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "stress-%d", i);
		CU_ASSERT_EQUAL(get(key, 0, NULL) == 0, live[i]);
	}
	tide_mc_table_arena_reset(&A);
	CU_ASSERT_EQUAL(tide_mc_table_remove_all(T, true, 100000), (int64_t)nlive);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	rm();
}

/* Threads hammering one table: the internal lock keeps the counters exact. */
enum { THR = 4, THR_OPS = 5000 };

static void *
worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	struct tide_mc_table_arena a = {0};
	struct tide_mc_replicate_config cfg = CFG(1);
	struct tide_mc_uuid c = {id + 10, id};
	char key[32];
	unsigned fails = 0;

	for (unsigned i = 0; i < THR_OPS; i++) {
		struct tide_mc_replica_desc_vec d;
		struct tide_mc_replica_list rl;
		struct tide_mc_str k;

		snprintf(key, sizeof(key), "t%u-%u", id, i % 64);
		k = S(key);
		if (tide_mc_table_put_start(T, &c, &k, 256, &cfg, i, &a, &d) == 0) {
			fails +=
				tide_mc_table_put_end(T, &c, &k, NULL, TIDE_MC_REPLICA_ALL, i) != 0;
			fails += tide_mc_table_get_replica_list(T, &k, i, &a, &rl) != 0;
			fails += tide_mc_table_remove(T, &k, true, i) != 0;
		} else {
			fails++;
		}
		tide_mc_table_arena_reset(&a);
	}
	tide_mc_table_arena_release(&a);
	return (void *)(uintptr_t)fails;
}

static void
test_threads(void)
{
	pthread_t th[THR];

	mk(0, 1u << 16);
	mount(1, "A", 0x100000, 16ull * MIB, &C1);
	for (unsigned i = 0; i < THR; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i),
				      0);
	for (unsigned i = 0; i < THR; i++) {
		void *r;

		CU_ASSERT_EQUAL(pthread_join(th[i], &r), 0);
		CU_ASSERT_PTR_NULL(r); /* no failed call */
	}
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_PUT_START], THR * THR_OPS);
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_REMOVE], THR * THR_OPS);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	rm();
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MCT_UT_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MCT_UT_SANITIZED 1
#endif

#if defined(MCT_UT_SANITIZED)
#define MEM_OBJECTS 100000u
#else
#define MEM_OBJECTS 1000000u
#endif

static double
rss_bytes(void)
{
	unsigned long size = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return (double)rss * 4096.0;
}

/*
 * Bytes per live object: keys "obj-%07u" (11 bytes), 64-byte values, 1 replica.
 * "table heap" = malloc'd bytes of the table (objects + hash slots); "RSS" also counts
 * the segment allocator's block node of each buffer (store/seg, 72 bytes). Set
 * TIDE_MC_TABLE_MEM_N to change the count. Under a sanitizer the heap figures are not
 * glibc's, so only the count is checked there.
 */
static void
test_memory_per_object(void)
{
	const char *env = getenv("TIDE_MC_TABLE_MEM_N");
	unsigned n = env ? (unsigned)strtoul(env, NULL, 10) : MEM_OBJECTS;
	struct mallinfo2 before, after;
	double rss0, rss1, per;
	char key[32];

	mk(0, 1u << 22);
	mount(1, "A", 0x100000, 1ull << 32, &C1);
	before = mallinfo2();
	rss0 = rss_bytes();
	for (unsigned i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "obj-%07u", i);
		CU_ASSERT_EQUAL_FATAL(put(key, 64, 1, 0), 0);
		if ((i & 4095) == 0)
			tide_mc_table_arena_reset(&A);
	}
	after = mallinfo2();
	rss1 = rss_bytes();
	CU_ASSERT_EQUAL(metrics().keys, n);
	per = ((double)(after.uordblks + after.hblkhd) -
	       (double)(before.uordblks + before.hblkhd)) /
	      n;
	printf("\n  mc_table: %u objects: table heap %.1f B/object, process RSS %.1f B/object\n", n,
	       per, (rss1 - rss0) / n);
#if !defined(MCT_UT_SANITIZED)
	CU_ASSERT(per > 50 && per < 160);
#endif
	rm();
}

/* Stock compiles the pattern as std::regex ECMAScript: \d, \w, \s work (issue 20). */
static void
test_regex_ecmascript(void)
{
	struct tide_mc_regex_entry_vec rv;
	struct tide_mc_str re;
	char key[32];
	int64_t cnt;

	mk(0, 1024);
	mount(1, "A", 0x100000, MIB, &C1);
	for (int i = 0; i < 12; i++) {
		snprintf(key, sizeof(key), "key%d", i);
		CU_ASSERT_EQUAL(put(key, 64, 1, 0), 0);
	}
	CU_ASSERT_EQUAL(put("keyX", 64, 1, 0), 0);
	CU_ASSERT_EQUAL(put("my key\n", 64, 1, 0), 0);
	re = S("key\\d+");
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 12);
	re = S("^key\\d$");
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 10);
	re = S("^\\w+$");
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 13);
	re = S("\\s");
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 1);
	re = S("key$"); /* '$' is the very end: not before the final '\n' */
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 0);
	re = S("^key1\\d$");
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &re, true, 0, &cnt), 0);
	CU_ASSERT_EQUAL(cnt, 2); /* key10, key11 */
	CU_ASSERT_EQUAL(metrics().keys, 12);
	rm();
}

/* A table of n keys "<prefix>aaa...a" (len a's). */
static void
mk_keys(unsigned n, unsigned len, uint32_t match_limit, uint64_t timeout_ms)
{
	struct tide_mc_table_opts o;
	char key[128];

	tide_mc_table_opts_init(&o, sizeof(o));
	o.seed = 42;
	o.regex_match_limit = match_limit;
	o.regex_timeout_ms = timeout_ms;
	CU_ASSERT_FATAL(tide_mc_table_create(&o, &T) == 0);
	memset(&A, 0, sizeof(A));
	mount(1, "A", 0x100000, 64 * MIB, &C1);
	for (unsigned i = 0; i < n; i++) {
		int k = snprintf(key, sizeof(key), "%06u/", i);

		memset(key + k, 'a', len);
		key[k + len] = '\0';
		CU_ASSERT_EQUAL(put(key, 64, 1, 0), 0);
	}
}

/*
 * Issue 20: one request could take the master's memory and hold the table
 * lock (((a{1,100}){1,100}){1,100}: 1.17 GB in 2.8 s). Every kind of
 * pattern that goes over a bound is now INVALID_PARAMS, fast, small, and
 * removes nothing.
 */
static void
test_regex_bounds(void)
{
	struct tide_mc_regex_entry_vec rv;
	struct tide_mc_str re;
	long rss0;
	double t0;
	int64_t cnt;
	char *big;

	mk_keys(100, 30, TIDE_MC_TABLE_REGEX_MATCH_LIMIT, 5000);
	rss0 = tide_ut_rss_kib();
	t0 = tide_ut_now_s();
	re = S("((a{1,100}){1,100}){1,100}");
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &re, true, 0, &cnt),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT(tide_ut_now_s() - t0 < 1.0);
	CU_ASSERT(tide_ut_rss_kib() - rss0 < 32 * 1024);
	/* Catastrophic backtracking on every key: the match limit. */
	re = S("^\\d+/(a+)+[bc]"); /* a class: no required byte to rule keys out early */
	t0 = tide_ut_now_s();
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &re, true, 0, &cnt),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(cnt, 0);
	CU_ASSERT(tide_ut_now_s() - t0 < 5.0);
	printf("\n    nested repetition and backtracking refused; %.3f s, RSS +%ld KiB\n",
	       tide_ut_now_s() - t0, tide_ut_rss_kib() - rss0);
	/* Too long a pattern. */
	big = malloc((64u << 10) + 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	memset(big, 'a', (64u << 10) + 1);
	re = (struct tide_mc_str){big, (64u << 10) + 1};
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv),
			TIDE_MC_EC_INVALID_PARAMS);
	free(big);
	/* Nothing went: the valid patterns still see all keys. */
	re = S("^\\d{6}/a{30}$");
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 100);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_GET_REPLICA_LIST_BY_REGEX], 2);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_REMOVE_BY_REGEX], 2);
	rm();
}

struct prober {
	volatile bool stop;
	double worst;
	unsigned ops;
};

static void *
probe_main(void *arg)
{
	struct prober *p = arg;
	struct tide_mc_str k = S("000001/aaaaaaaaaaaaaaaaaa");
	bool ex;

	while (!p->stop) {
		double t0 = tide_ut_now_s(), dt;

		CU_ASSERT_EQUAL(tide_mc_table_exist_key(T, &k, 0, &ex), 0);
		dt = tide_ut_now_s() - t0;
		if (dt > p->worst)
			p->worst = dt;
		p->ops++;
		usleep(200);
	}
	return NULL;
}

/*
 * A slow pattern under the match limit over many keys: the table lock is not
 * held while matching (other requests go on), and the request gives up at
 * regex_timeout_ms.
 */
static void
test_regex_timeout_and_lock(void)
{
	struct tide_mc_regex_entry_vec rv;
	struct tide_mc_str re = S("^\\d+/(a+)+[bc]");
	struct prober p = {0};
	pthread_t th;
	double t0, dt;

	/* 18 a's: 2^18 steps per key, under the limit; 3000 keys: many seconds. */
	mk_keys(3000, 18, TIDE_MC_TABLE_REGEX_MATCH_LIMIT, 300);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, probe_main, &p), 0);
	t0 = tide_ut_now_s();
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv),
			TIDE_MC_EC_INVALID_PARAMS);
	dt = tide_ut_now_s() - t0;
	p.stop = true;
	pthread_join(th, NULL);
	printf("\n    slow pattern: refused after %.3f s; meanwhile %u lookups, worst %.1f ms\n",
	       dt, p.ops, p.worst * 1e3);
	CU_ASSERT(dt >= 0.29 && dt < 3.0);
	CU_ASSERT(p.ops > 10);
	/* Had the lock been held while matching, one lookup would have waited the whole 0.3 s. */
	CU_ASSERT(p.worst < 0.2);
	rm();
}

/* Objects written or removed between the copy of the keys and the answer. */
static void
test_regex_concurrent_change(void)
{
	struct tide_mc_regex_entry_vec rv;
	struct tide_mc_str re = S("^k");
	char key[16];
	int64_t cnt;

	mk(0, 1u << 16);
	mount(1, "A", 0x100000, 16 * MIB, &C1);
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CU_ASSERT_EQUAL(put(key, 64, 1, 0), 0);
	}
	/* Chunks of RE_APPLY_CHUNK: more than one here. */
	CU_ASSERT_EQUAL(tide_mc_table_get_replica_list_by_regex(T, &re, 0, &A, &rv), 0);
	CU_ASSERT_EQUAL(rv.n, 5000);
	CU_ASSERT_EQUAL(tide_mc_table_remove_by_regex(T, &re, true, 0, &cnt), 0);
	CU_ASSERT_EQUAL(cnt, 5000);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	rm();
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Eviction's selection of the oldest leases, on every array of up to 7
 * leases drawn from {1, 2, 3} (duplicates, sorted, reversed, all equal) and
 * every k: it ends (a pivot that was its range's maximum once made it loop for
 * ever, holding the table lock), keeps the multiset, and puts the k smallest
 * first.
 */
static void
test_select_oldest(void)
{
	struct mct_cand v[7];
	uint64_t want[7], got[7];
	unsigned cases = 0;

	for (size_t n = 0; n <= 7; n++) {
		size_t combos = 1;

		for (size_t i = 0; i < n; i++)
			combos *= 3;
		for (size_t c = 0; c < combos; c++) {
			for (size_t k = 0; k <= n; k++) {
				size_t x = c;

				for (size_t i = 0; i < n; i++, x /= 3) {
					v[i] = (struct mct_cand){1 + x % 3, NULL};
					want[i] = v[i].lease;
				}
				mct_select_oldest(v, n, k);
				for (size_t i = 0; i < k; i++)
					for (size_t j = k; j < n; j++)
						CU_ASSERT_FATAL(v[i].lease <= v[j].lease);
				for (size_t i = 0; i < n; i++)
					got[i] = v[i].lease;
				qsort(want, n, sizeof(want[0]), cmp_u64);
				qsort(got, n, sizeof(got[0]), cmp_u64);
				CU_ASSERT_FATAL(memcmp(got, want, n * sizeof(got[0])) == 0);
				cases++;
			}
		}
	}
	CU_ASSERT(cases > 10000);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_table", NULL, NULL);

	CU_add_test(s, "create_rejects", test_create_rejects);
	CU_add_test(s, "mount_remount_ping", test_mount_remount_ping);
	CU_add_test(s, "put_get_basics", test_put_get_basics);
	CU_add_test(s, "put_validation", test_put_validation);
	CU_add_test(s, "placement", test_placement);
	CU_add_test(s, "capacity", test_capacity);
	CU_add_test(s, "leases", test_leases);
	CU_add_test(s, "stale_put_takeover", test_stale_put_takeover);
	CU_add_test(s, "upsert", test_upsert);
	CU_add_test(s, "batches", test_batches);
	CU_add_test(s, "batch_replica_clear", test_batch_replica_clear);
	CU_add_test(s, "regex_and_remove_all", test_regex_and_remove_all);
	CU_add_test(s, "regex_ecmascript", test_regex_ecmascript);
	CU_add_test(s, "regex_bounds", test_regex_bounds);
	CU_add_test(s, "regex_timeout_and_lock", test_regex_timeout_and_lock);
	CU_add_test(s, "regex_concurrent_change", test_regex_concurrent_change);
	CU_add_test(s, "unmount", test_unmount);
	CU_add_test(s, "client_liveness", test_client_liveness);
	CU_add_test(s, "eviction", test_eviction);
	CU_add_test(s, "eviction_soft_pin_last", test_eviction_soft_pin_last);
	CU_add_test(s, "eviction_after_put_failure", test_eviction_after_put_failure);
	CU_add_test(s, "eviction_pin_unread", test_eviction_pin_unread);
	CU_add_test(s, "eviction_pin_unread_upsert", test_eviction_pin_unread_upsert);
	CU_add_test(s, "dead_writer_leaves_nothing", test_dead_writer_leaves_nothing);
	CU_add_test(s, "query_ip_and_segments", test_query_ip_and_segments);
	CU_add_test(s, "hash_stress", test_hash_stress);
	CU_add_test(s, "threads", test_threads);
	CU_add_test(s, "memory_per_object", test_memory_per_object);
	CU_add_test(s, "select_oldest", test_select_oldest);
}

TIDE_UT_MAIN(register_tests)
