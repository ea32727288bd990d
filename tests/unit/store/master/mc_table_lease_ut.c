/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the master table's allocation leases (Tide extension,
 * store/master/mc_table_lease.c): grant, commit, release, expiry, unmount,
 * bounds, pins, the journal, and the segment accounting after each step
 * (checked against the allocators themselves through the table's internals).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_table_fixture.h"
#include "mc_table_int.h"
#include "tide_mc_table.h"
#include "tide_seg.h"
#include "tide_ut.h"

#define KIB  1024u
#define MIB  (1024u * 1024u)
#define BASE UINT64_C(0x10000000)

static struct tide_mc_table *T;
static struct tide_mc_table_arena A;
static const struct tide_mc_uuid C1 = {1, 1}, C2 = {2, 2}, C3 = {3, 3};

static struct tide_mc_str
S(const char *s) {
	return mc_fixture_str(s);
}

/* A table of up to max_blocks allocator blocks per segment; share: its lease_seg_share
 * (0 keeps the default). */
static void
mk_opts(uint32_t max_blocks, uint32_t share)
{
	struct tide_mc_table_opts o;

	tide_mc_table_opts_init(&o, sizeof(o));
	o.seed = 11;
	o.seg_max_blocks = max_blocks;
	CU_ASSERT_EQUAL(o.lease_ttl_ms, 30000);
	CU_ASSERT_EQUAL(o.lease_seg_share, 8);
	if (share != 0)
		o.lease_seg_share = share;
	CU_ASSERT_FATAL(tide_mc_table_create(&o, &T) == 0);
	memset(&A, 0, sizeof(A));
}

/* Most cases lease most of a 1 MiB segment: a lease may take a whole segment
 * (grant_share has the default's). */
static void
mk_blocks(uint32_t max_blocks)
{
	mk_opts(max_blocks, 1);
}

/* A table with one 1 MiB segment "node1" at BASE, owned by C1, and lease_seg_share share. */
static void
mk_share(uint32_t share)
{
	mk_opts(1024, share);
	mc_fixture_mount(T, (struct tide_mc_uuid){1, 1}, "node1", BASE, MIB, &C1);
}

static void
mk(void)
{
	mk_share(1);
}

static void
rm(void)
{
	mc_fixture_destroy(&T, &A);
}

static struct tide_mc_table_metrics
metrics(void)
{
	return mc_fixture_metrics(T);
}

/* Bytes in use in the segment with this base, as the segment listing says. */
static uint64_t
seg_used(uint64_t base)
{
	struct tide_mc_table_segment_info *v = NULL;
	uint64_t used = UINT64_MAX;
	size_t n = 0;

	TIDE_UT_OK(tide_mc_table_segments_list(T, &A, &v, &n));
	for (size_t i = 0; i < n; i++)
		if (v[i].base == base)
			used = v[i].used;
	return used;
}

/*
 * Every segment's accounting against its allocator (the allocator is
 * consistent, its live bytes and allocations are the segment's used and
 * nrep), the table's totals, and every lease's pieces (sorted, inside the
 * lease, never adjacent, summing to leased_bytes), and the discarded buffers
 * that were leases' summing to lease_disc_bytes.
 */
static void
check_consistent(void)
{
	uint64_t sum = 0, leased = 0, disc = 0;

	for (uint32_t i = 0; i < T->nseg_slots; i++) {
		const struct mct_seg *s = T->segs[i];
		struct tide_seg_stats st;

		if (!s)
			continue;
		CU_ASSERT_EQUAL(tide_seg_check(s->alloc), 0);
		tide_seg_stats_get(s->alloc, &st);
		CU_ASSERT_EQUAL(st.used, s->used);
		CU_ASSERT_EQUAL(st.live_allocs, s->nrep);
		sum += s->used;
	}
	CU_ASSERT_EQUAL(sum, T->alloc_bytes);
	for (size_t i = 0; i < T->nleases; i++) {
		const struct mct_lease *l = T->leases[i];

		CU_ASSERT(l->npiece >= 1 && l->npiece <= TIDE_MC_TABLE_LEASE_PIECES);
		CU_ASSERT(i == 0 || T->leases[i - 1]->id < l->id);
		for (uint32_t k = 0; k < l->npiece; k++) {
			const struct mct_piece *p = &l->piece[k];

			CU_ASSERT(p->len > 0);
			CU_ASSERT(p->off >= l->start && p->off + p->len <= l->start + l->size);
			CU_ASSERT(k == 0 || l->piece[k - 1].off + l->piece[k - 1].len < p->off);
			leased += p->len;
		}
	}
	CU_ASSERT_EQUAL(leased, T->leased_bytes);
	CU_ASSERT_EQUAL(metrics().leased_bytes, leased);
	CU_ASSERT_EQUAL(metrics().leases, T->nleases);
	for (size_t i = 0; i < T->ndisc; i++)
		disc += T->disc[i].kind == MCT_DISC_LEASE ? T->disc[i].len : 0;
	CU_ASSERT_EQUAL(disc, T->lease_disc_bytes);
}

static int
grant_cfg(const struct tide_mc_uuid *c, uint64_t size, const struct tide_mc_replicate_config *cfg,
	  uint64_t now, struct tide_mc_lease *l)
{
	return tide_mc_table_lease_grant(T, c, size, cfg, now, &A, l);
}

static int
grant(uint64_t size, uint64_t now, struct tide_mc_lease *l)
{
	return grant_cfg(&C1, size, NULL, now, l);
}

/* Commit one key; the call's code if it failed as a whole, else the key's. */
static int
commit1_cfg(const struct tide_mc_uuid *c, uint64_t id, const char *key, uint64_t off, uint64_t size,
	    const struct tide_mc_replicate_config *cfg, uint64_t now)
{
	struct tide_mc_str k = S(key);
	struct tide_mc_exp_void out = {true, 12345};
	int rc = tide_mc_table_lease_commit(T, c, id, &k, &off, &size, 1, cfg, now, &out);

	if (rc) {
		CU_ASSERT_FALSE(out.ok);
		CU_ASSERT_EQUAL(out.err, rc);
		return rc;
	}
	CU_ASSERT_EQUAL(out.ok, out.err == 0);
	return out.err;
}

static int
commit1(uint64_t id, const char *key, uint64_t off, uint64_t size, uint64_t now)
{
	return commit1_cfg(&C1, id, key, off, size, NULL, now);
}

/* The key's one COMPLETE replica: its address and size (asserts there is one). */
static void
read_key(const char *key, uint64_t *addr, uint64_t *size)
{
	struct tide_mc_replica_list rl;
	struct tide_mc_str k = S(key);

	*addr = *size = 0;
	CU_ASSERT_EQUAL_FATAL(tide_mc_table_get_replica_list(T, &k, 0, &A, &rl), 0);
	CU_ASSERT_EQUAL_FATAL(rl.replicas.n, 1);
	CU_ASSERT_EQUAL(rl.replicas.v[0].kind, TIDE_MC_RK_MEMORY);
	CU_ASSERT_EQUAL(rl.replicas.v[0].status, TIDE_MC_RS_COMPLETE);
	CU_ASSERT_FALSE(rl.object_checksum.has);
	*addr = rl.replicas.v[0].u.memory.buffer_address;
	*size = rl.replicas.v[0].u.memory.size;
}

static void
expect_at(const char *key, uint64_t addr, uint64_t size)
{
	uint64_t a, s;

	read_key(key, &a, &s);
	CU_ASSERT_EQUAL(a, addr);
	CU_ASSERT_EQUAL(s, size);
}

static bool
has_key(const char *key)
{
	struct tide_mc_replica_list rl;
	struct tide_mc_str k = S(key);

	return tide_mc_table_query_key(T, &k, 0, &A, &rl) == 0;
}

/* Tick with the segment owner C1 kept alive. */
static void
tick_alive(uint64_t now)
{
	mc_fixture_tick_alive(T, &C1, now);
}

/* ------------------------------------------------------------------------------------------ */

static void
test_opts(void)
{
	struct tide_mc_table_opts o;
	struct tide_mc_table *t = NULL;

	tide_mc_table_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(o.lease_ttl_ms, 30000);
	o.lease_ttl_ms = 0;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &t), -EINVAL);
	CU_ASSERT_PTR_NULL(t);
	CU_ASSERT_STRING_EQUAL(tide_mc_table_op_name(TIDE_MC_TABLE_OP_LEASE_GRANT), "lease_grant");
	CU_ASSERT_STRING_EQUAL(tide_mc_table_op_name(TIDE_MC_TABLE_OP_LEASE_COMMIT),
			       "lease_commit");
	CU_ASSERT_STRING_EQUAL(tide_mc_table_op_name(TIDE_MC_TABLE_OP_LEASE_RELEASE),
			       "lease_release");
	for (unsigned op = 0; op < TIDE_MC_TABLE_OP_COUNT; op++)
		CU_ASSERT_STRING_NOT_EQUAL(tide_mc_table_op_name(op), "unknown");
}

/* Several objects at different offsets, committed out of order in one call. */
static void
test_grant_commit(void)
{
	struct tide_mc_lease l;
	struct tide_mc_str keys[3] = {S("k8192"), S("k0"), S("k4096")};
	uint64_t offs[3] = {8192, 0, 4096}, sizes[3] = {1000, 100, 64};
	struct tide_mc_exp_void out[3];
	struct tide_mc_table_metrics m;

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(64 * KIB - 10, 5, &l), 0);
	CU_ASSERT(l.id != 0);
	CU_ASSERT_EQUAL(l.ttl_ms, 30000);
	CU_ASSERT_EQUAL(l.granule, 64);
	CU_ASSERT_EQUAL(l.buf.size, 64 * KIB); /* rounded up to the granule */
	CU_ASSERT(l.buf.buffer_address >= BASE);
	CU_ASSERT(l.buf.buffer_address + l.buf.size <= BASE + MIB);
	CU_ASSERT_EQUAL((l.buf.buffer_address - BASE) % 64, 0);
	CU_ASSERT_EQUAL(l.buf.transport_endpoint.len, 5);
	CU_ASSERT(memcmp(l.buf.transport_endpoint.ptr, "node1", 5) == 0);
	CU_ASSERT_EQUAL(l.buf.protocol.len, 3);
	CU_ASSERT(memcmp(l.buf.protocol.ptr, "tcp", 3) == 0);
	m = metrics();
	CU_ASSERT_EQUAL(m.allocated_bytes, 64 * KIB);
	CU_ASSERT_EQUAL(m.leases, 1);
	CU_ASSERT_EQUAL(m.leased_bytes, 64 * KIB);
	CU_ASSERT_EQUAL(m.keys, 0);
	CU_ASSERT_EQUAL(seg_used(BASE), 64 * KIB);
	check_consistent();

	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, keys, offs, sizes, 3, NULL, 10, out), 0);
	/* A read lease of 0 ms, as PutEnd grants: removable at once without force. */
	CU_ASSERT_EQUAL(mct_obj_find(T, "k0", 2)->lease_ms, 10);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT(out[i].ok);
		CU_ASSERT_EQUAL(out[i].err, 0);
		expect_at(keys[i].ptr, l.buf.buffer_address + offs[i], sizes[i]);
	}
	m = metrics();
	CU_ASSERT_EQUAL(m.keys, 3);
	CU_ASSERT_EQUAL(m.processing_keys, 0);
	CU_ASSERT_EQUAL(m.value_bytes, 1164);
	CU_ASSERT_EQUAL(m.allocated_bytes, 64 * KIB); /* the same bytes, now partly objects */
	CU_ASSERT_EQUAL(m.leased_bytes, 64 * KIB - 1024 - 128 - 64);
	CU_ASSERT_EQUAL(m.requests[TIDE_MC_TABLE_OP_LEASE_GRANT], 1);
	CU_ASSERT_EQUAL(m.requests[TIDE_MC_TABLE_OP_LEASE_COMMIT], 3);
	CU_ASSERT_EQUAL(m.failures[TIDE_MC_TABLE_OP_LEASE_COMMIT], 0);
	CU_ASSERT_EQUAL(T->leases[0]->npiece, 3); /* [128,4096) [4160,8192) [9216,64K) */
	check_consistent();
	/* A committed object behaves as a put one: PutEnd by its writer is an idempotent retry,
	 * by another client ILLEGAL_CLIENT (the writer hash is kept). */
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C1, &keys[1], NULL, TIDE_MC_REPLICA_ALL, 20), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C2, &keys[1], NULL, TIDE_MC_REPLICA_ALL, 20),
			TIDE_MC_EC_ILLEGAL_CLIENT);
	CU_ASSERT_EQUAL(tide_mc_table_remove(T, &keys[2], true, 10), 0);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 30), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024 + 128);
	check_consistent();
	rm();
}

/* Ranges outside the unused part of the lease: INVALID_PARAMS, nothing changes. */
static void
test_commit_bad_ranges(void)
{
	struct tide_mc_lease l;
	struct tide_mc_table_metrics before, after;
	struct tide_mc_str empty = {NULL, 0};
	struct tide_mc_exp_void out;
	uint64_t off = 0, size = 10;

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(4 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "mid", 1024, 1024, 1), 0);
	before = metrics();
	CU_ASSERT_EQUAL(commit1(l.id, "a", 4 * KIB, 64, 1), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(commit1(l.id, "a", 4 * KIB - 64, 65, 1), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(commit1(l.id, "a", 3 * KIB, UINT64_MAX, 1), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(commit1(l.id, "a", UINT64_MAX - 63, 64, 1), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(commit1(l.id, "a", 1024, 64, 1), TIDE_MC_EC_INVALID_PARAMS); /* on mid */
	CU_ASSERT_EQUAL(commit1(l.id, "a", 960, 128, 1), TIDE_MC_EC_INVALID_PARAMS); /* into it */
	CU_ASSERT_EQUAL(commit1(l.id, "a", 1984, 128, 1), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(commit1(l.id, "a", 0, 2 * KIB, 1), TIDE_MC_EC_INVALID_PARAMS); /* over */
	CU_ASSERT_EQUAL(commit1(l.id, "a", 32, 16, 1), TIDE_MC_EC_INVALID_PARAMS); /* misaligned */
	CU_ASSERT_EQUAL(commit1(l.id, "a", 0, 0, 1), TIDE_MC_EC_INVALID_PARAMS);   /* size 0 */
	CU_ASSERT_EQUAL(commit1(l.id, "", 0, 64, 1), TIDE_MC_EC_INVALID_PARAMS);   /* empty key */
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, &empty, &off, &size, 1, NULL, 1, &out), 0);
	CU_ASSERT_EQUAL(out.err, TIDE_MC_EC_INVALID_PARAMS);
	/* NULL arguments: the call fails, out untouched. */
	out.ok = true;
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, NULL, &off, &size, 1, NULL, 1, &out),
		TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT(out.ok);
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, NULL, l.id, &empty, &off, &size, 1, NULL, 1, &out),
		TIDE_MC_EC_INVALID_PARAMS);
	after = metrics();
	CU_ASSERT_EQUAL(after.keys, before.keys);
	CU_ASSERT_EQUAL(after.allocated_bytes, before.allocated_bytes);
	CU_ASSERT_EQUAL(after.leased_bytes, before.leased_bytes);
	CU_ASSERT_EQUAL(after.failures[TIDE_MC_TABLE_OP_LEASE_COMMIT], 12);
	CU_ASSERT_FALSE(has_key("a"));
	/* Right next to mid on both sides is fine. */
	CU_ASSERT_EQUAL(commit1(l.id, "left", 960, 64, 1), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "right", 2048, 1, 1), 0);
	expect_at("right", l.buf.buffer_address + 2048, 1);
	check_consistent();
	rm();
}

/* An existing key (COMPLETE or PROCESSING) keeps its range unused for another key. */
static void
test_commit_existing_key(void)
{
	struct tide_mc_replicate_config cfg;
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str dup = S("dup"), proc = S("proc");
	struct tide_mc_lease l;
	uint64_t leased;

	mk();
	memset(&cfg, 0, sizeof(cfg));
	cfg.replica_num = 1;
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &dup, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C2, &dup, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &proc, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL_FATAL(grant(4 * KIB, 0, &l), 0);
	leased = metrics().leased_bytes;
	CU_ASSERT_EQUAL(commit1(l.id, "dup", 0, 64, 1), TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT_EQUAL(commit1(l.id, "proc", 0, 64, 1), TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT_EQUAL(metrics().leased_bytes, leased);
	CU_ASSERT_EQUAL(metrics().keys, 2);
	CU_ASSERT_EQUAL(commit1(l.id, "fresh", 0, 64, 1), 0);
	expect_at("fresh", l.buf.buffer_address, 64);
	/* The PROCESSING put is untouched and can still end. */
	CU_ASSERT_EQUAL(tide_mc_table_put_end(T, &C2, &proc, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	check_consistent();
	rm();
}

/*
 * A put abandoned past the discard timeout (PutStart, no PutEnd) is taken over by a commit
 * of its key, as a PutStart would take it over: the commit must not answer "exists" for a
 * key nobody can read. Its buffer stays reserved until the release timeout.
 */
static void
test_commit_takes_over_stale_put(void)
{
	struct tide_mc_replicate_config cfg;
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k = S("stale");
	struct tide_mc_lease l;
	const uint64_t late = 30001; /* put_start_discard_timeout_ms + 1 */

	mk();
	memset(&cfg, 0, sizeof(cfg));
	cfg.replica_num = 1;
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C2, &k, 100, &cfg, 0, &A, &d), 0);
	CU_ASSERT_EQUAL_FATAL(grant(4 * KIB, late - 1000, &l), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "stale", 0, 64, late - 1), TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT_EQUAL(commit1(l.id, "stale", 0, 64, late), 0);
	expect_at("stale", l.buf.buffer_address, 64);
	CU_ASSERT_EQUAL(metrics().keys, 1);
	/* The old writer's buffer is kept (it may still be writing), not yet free. */
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 4 * KIB + 128);
	/* Its PutEnd now finds a COMPLETE object of another writer. */
	CU_ASSERT_NOT_EQUAL(tide_mc_table_put_end(T, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, late), 0);
	expect_at("stale", l.buf.buffer_address, 64);
	check_consistent();
	rm();
}

/* Another client, an unknown id, a released lease: LEASE_EXPIRED, for the call and every key. */
static void
test_commit_wrong_lease(void)
{
	struct tide_mc_lease l;
	struct tide_mc_str keys[2] = {S("x"), S("y")};
	uint64_t offs[2] = {0, 64}, sizes[2] = {64, 64};
	struct tide_mc_exp_void out[2] = {{true, 0}, {true, 0}};

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(4 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C3, l.id, keys, offs, sizes, 2, NULL, 1, out),
		TIDE_MC_EC_LEASE_EXPIRED);
	for (int i = 0; i < 2; i++) {
		CU_ASSERT_FALSE(out[i].ok);
		CU_ASSERT_EQUAL(out[i].err, TIDE_MC_EC_LEASE_EXPIRED);
	}
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C3, l.id, 1), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(commit1(l.id + 1, "x", 0, 64, 1), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(commit1(0, "x", 0, 64, 1), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id + 1, 1), TIDE_MC_EC_LEASE_EXPIRED);
	/* Still the owner's. */
	CU_ASSERT_EQUAL(metrics().leases, 1);
	CU_ASSERT_EQUAL(commit1(l.id, "x", 0, 64, 1), 0);
	/* n == 0 checks the lease only. */
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, NULL, NULL, NULL, 0, NULL, 1, NULL), 0);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 2), 0);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 2), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(commit1(l.id, "y", 64, 64, 3), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_LEASE_COMMIT], 5);
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_LEASE_RELEASE], 4);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_LEASE_RELEASE], 3);
	CU_ASSERT(has_key("x"));
	CU_ASSERT_FALSE(has_key("y"));
	check_consistent();
	rm();
}

/* Release frees the unused parts: usage is the objects' extents, and a big put fits again. */
static void
test_release_frees(void)
{
	struct tide_mc_replicate_config cfg;
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str big = S("big");
	struct tide_mc_lease l;

	mk();
	memset(&cfg, 0, sizeof(cfg));
	cfg.replica_num = 1;
	CU_ASSERT_EQUAL_FATAL(grant(900 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(l.buf.buffer_address, BASE); /* the first extent of an empty segment */
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &big, 512 * KIB, &cfg, 0, &A, &d),
			TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(commit1(l.id, "a", 0, 100, 1), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "b", 128, 64, 1), 0);
	CU_ASSERT_EQUAL(seg_used(BASE), 900 * KIB);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 2), 0);
	CU_ASSERT_EQUAL(seg_used(BASE), 128 + 64);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 128 + 64);
	CU_ASSERT_EQUAL(metrics().leases, 0);
	CU_ASSERT_EQUAL(metrics().leased_bytes, 0);
	check_consistent();
	CU_ASSERT_EQUAL(tide_mc_table_put_start(T, &C1, &big, MIB - 64 * KIB, &cfg, 3, &A, &d), 0);
	CU_ASSERT(has_key("a") && has_key("b"));
	check_consistent();
	rm();
}

/* The tick ends a lease at its deadline; its unused space stays reserved (a write its
 * client placed may still be moving) for TIDE_MC_TABLE_LEASE_GRACE_MS more, then is free.
 * A call after the deadline finds it ended. */
static void
test_expiry(void)
{
	struct tide_mc_lease l, l2;

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(8 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "kept", 0, 64, 0), 0);
	tick_alive(29999);
	CU_ASSERT_EQUAL(metrics().leases, 1);
	tick_alive(30000);
	CU_ASSERT_EQUAL(metrics().leases, 0);
	CU_ASSERT_EQUAL(metrics().leased_bytes, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 8 * KIB); /* the object + the reserve */
	CU_ASSERT_EQUAL(metrics().discarded_bytes, 8 * KIB - 64);
	CU_ASSERT(has_key("kept"));
	CU_ASSERT_EQUAL(commit1(l.id, "late", 64, 64, 30001), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 30001), TIDE_MC_EC_LEASE_EXPIRED);
	check_consistent();
	tick_alive(30000 + TIDE_MC_TABLE_LEASE_GRACE_MS - 1);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 8 * KIB);
	tick_alive(30000 + TIDE_MC_TABLE_LEASE_GRACE_MS);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 64); /* the object stays */
	check_consistent();
	/* Past the deadline without a tick: ended by the call itself. */
	CU_ASSERT_EQUAL_FATAL(grant(8 * KIB, 100000, &l2), 0);
	CU_ASSERT(l2.id > l.id);
	CU_ASSERT_EQUAL(commit1(l2.id, "late", 0, 64, 130000), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(metrics().leases, 0);
	tick_alive(130000 + TIDE_MC_TABLE_LEASE_GRACE_MS);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 64);
	check_consistent();
	rm();
}

/* A commit that commits something moves the deadline; one that commits nothing does not. */
static void
test_commit_extends(void)
{
	struct tide_mc_lease l;

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(8 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "a", 0, 64, 20000), 0); /* deadline 50000 */
	tick_alive(40000);
	CU_ASSERT_EQUAL(metrics().leases, 1);
	CU_ASSERT_EQUAL(commit1(l.id, "b", 64, 64, 45000), 0); /* deadline 75000 */
	CU_ASSERT_EQUAL(commit1(l.id, "c", 32, 64, 70000), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(commit1(l.id, "a", 128, 64, 70000), TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	tick_alive(74999);
	CU_ASSERT_EQUAL(metrics().leases, 1);
	tick_alive(75000);
	CU_ASSERT_EQUAL(metrics().leases, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 8 * KIB); /* reserved for the grace period */
	tick_alive(75000 + TIDE_MC_TABLE_LEASE_GRACE_MS);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 128);
	check_consistent();
	rm();
}

/* Unmounting the segment drops its leases (and only its); a graceful unmount ends them. */
static void
test_unmount(void)
{
	struct tide_mc_uuid s2 = {2, 2}, s3 = {3, 3};
	struct tide_mc_replicate_config cfg;
	struct tide_mc_lease la, lb, lc;

	mk();
	mc_fixture_mount(T, s2, "node2", BASE + 16 * MIB, MIB, &C1);
	mc_fixture_mount(T, s3, "node3", BASE + 32 * MIB, MIB, &C1);
	memset(&cfg, 0, sizeof(cfg));
	cfg.replica_num = 1;
	cfg.preferred_segment = S("node1");
	CU_ASSERT_EQUAL_FATAL(grant_cfg(&C1, 64 * KIB, &cfg, 0, &la), 0);
	cfg.preferred_segment = S("node2");
	CU_ASSERT_EQUAL_FATAL(grant_cfg(&C1, 64 * KIB, &cfg, 0, &lb), 0);
	cfg.preferred_segment = S("node3");
	CU_ASSERT_EQUAL_FATAL(grant_cfg(&C1, 64 * KIB, &cfg, 0, &lc), 0);
	CU_ASSERT(la.buf.buffer_address < BASE + MIB);
	CU_ASSERT(lb.buf.buffer_address >= BASE + 16 * MIB &&
		  lb.buf.buffer_address < BASE + 17 * MIB);
	CU_ASSERT(lc.buf.buffer_address >= BASE + 32 * MIB);
	CU_ASSERT_EQUAL(commit1(la.id, "in1", 0, 64, 1), 0);
	CU_ASSERT_EQUAL(commit1(lb.id, "in2", 0, 64, 1), 0);
	check_consistent();
	CU_ASSERT_EQUAL(tide_mc_table_unmount_segment(T, &(struct tide_mc_uuid){1, 1}, &C1, 2), 0);
	CU_ASSERT_EQUAL(metrics().leases, 2);
	CU_ASSERT_FALSE(has_key("in1"));
	CU_ASSERT_EQUAL(commit1(la.id, "x", 64, 64, 3), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, la.id, 3), TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(commit1(lb.id, "x", 64, 64, 3), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 2 * 64 * KIB);
	check_consistent();
	/* Graceful: the lease ends at once for its client, its space at the next tick. */
	CU_ASSERT_EQUAL(tide_mc_table_graceful_unmount_segment(T, &s3, &C1, 60000, 4), 0);
	CU_ASSERT_EQUAL(metrics().leases, 2);
	tick_alive(5);
	CU_ASSERT_EQUAL(metrics().leases, 1);
	CU_ASSERT_EQUAL(seg_used(BASE + 32 * MIB), 0);
	CU_ASSERT_EQUAL(commit1(lc.id, "y", 0, 64, 6), TIDE_MC_EC_LEASE_EXPIRED);
	check_consistent();
	CU_ASSERT_EQUAL(tide_mc_table_unmount_segment(T, &s2, &C1, 7), 0);
	CU_ASSERT_EQUAL(metrics().leases, 0);
	CU_ASSERT_EQUAL(metrics().leased_bytes, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	check_consistent();
	rm();
}

/* A client that misses its pings loses its leases with its puts. */
static void
test_client_expiry(void)
{
	struct tide_mc_ping_info pi;
	struct tide_mc_lease l1, l3;

	mk();
	CU_ASSERT_EQUAL(tide_mc_table_ping(T, &C3, 0, &pi), 0);
	CU_ASSERT_EQUAL_FATAL(grant(8 * KIB, 0, &l1), 0);
	CU_ASSERT_EQUAL_FATAL(grant_cfg(&C3, 8 * KIB, NULL, 0, &l3), 0);
	CU_ASSERT_EQUAL(commit1_cfg(&C3, l3.id, "c3", 0, 64, NULL, 1), 0);
	tick_alive(10001); /* C3's TTL (10 s) has passed, C1 pinged */
	CU_ASSERT_EQUAL(metrics().leases, 1);
	/* C3 may be alive and cut off from the master only: its lease's space stays
	 * reserved until the grace period past its deadline (30 s) is over. */
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 16 * KIB);
	CU_ASSERT_EQUAL(metrics().leased_bytes, 8 * KIB);
	CU_ASSERT_EQUAL(commit1_cfg(&C3, l3.id, "c3b", 64, 64, NULL, 10002),
			TIDE_MC_EC_LEASE_EXPIRED);
	CU_ASSERT_EQUAL(commit1(l1.id, "c1", 0, 64, 10002), 0);
	check_consistent();
	rm();
}

/*
 * With the default lease_seg_share (8) a lease takes at most an eighth of its segment, so
 * eight clients asking for a whole 1 MiB segment get 128 KiB each, the ninth nothing; a
 * smaller request is not raised; the share is rounded down to the granule, and is at least
 * one granule.
 */
static void
test_grant_share(void)
{
	struct tide_mc_table_opts o;
	struct tide_mc_lease l;

	mk_share(0);
	for (unsigned i = 0; i < 8; i++) {
		const struct tide_mc_uuid c = {100 + i, 1};

		CU_ASSERT_EQUAL(grant_cfg(&c, MIB, NULL, 0, &l), 0);
		CU_ASSERT_EQUAL(l.buf.size, MIB / 8);
		CU_ASSERT_EQUAL(commit1_cfg(&c, l.id, "k", 0, 64, NULL, 1),
				i ? TIDE_MC_EC_OBJECT_ALREADY_EXISTS : 0);
	}
	CU_ASSERT_EQUAL(grant(MIB, 0, &l), TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(metrics().leased_bytes, MIB - 64);
	check_consistent();
	rm();

	/* 64 KiB asked: 64 KiB given (below the share). */
	mk_share(3);
	CU_ASSERT_EQUAL(grant(64 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(l.buf.size, 64 * KIB);
	/* A third of 1 MiB, rounded down to the 64-byte granule. */
	CU_ASSERT_EQUAL(grant(MIB, 0, &l), 0);
	CU_ASSERT_EQUAL(l.buf.size, MIB / 3 / 64 * 64);
	CU_ASSERT_EQUAL(l.buf.size % l.granule, 0);
	check_consistent();
	rm();

	/* A share below one granule: one granule. */
	mk_share(UINT32_MAX);
	CU_ASSERT_EQUAL(grant(MIB, 0, &l), 0);
	CU_ASSERT_EQUAL(l.buf.size, 64);
	check_consistent();
	rm();

	/* 0 is refused. */
	tide_mc_table_opts_init(&o, sizeof(o));
	o.lease_seg_share = 0;
	CU_ASSERT_EQUAL(tide_mc_table_create(&o, &T), -EINVAL);
	T = NULL;
}

/* No room, or the table's bound of live leases: NO_AVAILABLE_HANDLE. */
static void
test_grant_no_room(void)
{
	struct tide_mc_lease l;

	mk_blocks(1024);
	CU_ASSERT_EQUAL(grant(64, 0, &l), TIDE_MC_EC_NO_AVAILABLE_HANDLE); /* no segment */
	mc_fixture_mount(T, (struct tide_mc_uuid){1, 1}, "node1", BASE, MIB, &C1);
	/* More than the segment: its share, all of it here (lease_seg_share 1). */
	CU_ASSERT_EQUAL(grant(2 * MIB, 0, &l), 0);
	CU_ASSERT_EQUAL(l.buf.size, MIB);
	CU_ASSERT_EQUAL(grant(64, 0, &l), TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(metrics().failures[TIDE_MC_TABLE_OP_LEASE_GRANT], 2);
	CU_ASSERT_EQUAL(metrics().requests[TIDE_MC_TABLE_OP_LEASE_GRANT], 3);
	CU_ASSERT_FALSE(T->need_evict); /* a lease wants a long run: the put falls back */
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, T->leases[0]->id, 1), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	rm();

	/* The bound of live leases. */
	mk_blocks(16384);
	mc_fixture_mount(T, (struct tide_mc_uuid){1, 1}, "node1", BASE, 64 * MIB, &C1);
	for (unsigned i = 0; i < TIDE_MC_TABLE_LEASE_MAX; i++)
		CU_ASSERT_EQUAL(grant(64, 0, &l), 0);
	CU_ASSERT_EQUAL(grant(64, 0, &l), TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(metrics().leases, TIDE_MC_TABLE_LEASE_MAX);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 0), 0);
	CU_ASSERT_EQUAL(grant(64, 0, &l), 0);
	check_consistent();
	tick_alive(30000); /* all expire; their space after the grace period */
	CU_ASSERT_EQUAL(metrics().leases, 0);
	tick_alive(30000 + TIDE_MC_TABLE_LEASE_GRACE_MS);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	check_consistent();
	rm();
}

static void
test_grant_params(void)
{
	struct tide_mc_replicate_config cfg;
	struct tide_mc_str g2[2] = {S("g1"), S("g2")};
	struct tide_mc_lease l;

	mk();
	mc_fixture_mount(T, (struct tide_mc_uuid){2, 2}, "node2", BASE + 16 * MIB, MIB, &C1);
	memset(&cfg, 0, sizeof(cfg));
	cfg.replica_num = 2;
	CU_ASSERT_EQUAL(grant_cfg(&C1, 64, &cfg, 0, &l), TIDE_MC_EC_INVALID_PARAMS);
	cfg.replica_num = 0;
	CU_ASSERT_EQUAL(grant_cfg(&C1, 64, &cfg, 0, &l), TIDE_MC_EC_INVALID_PARAMS);
	cfg.replica_num = 1;
	cfg.nof_replica_num = 1;
	CU_ASSERT_EQUAL(grant_cfg(&C1, 64, &cfg, 0, &l), TIDE_MC_EC_INVALID_PARAMS);
	cfg.nof_replica_num = 0;
	cfg.dfs_replica_num = 1;
	CU_ASSERT_EQUAL(grant_cfg(&C1, 64, &cfg, 0, &l), TIDE_MC_EC_INVALID_PARAMS);
	cfg.dfs_replica_num = 0;
	cfg.group_ids.has = true;
	cfg.group_ids.val.v = g2;
	cfg.group_ids.val.n = 2;
	CU_ASSERT_EQUAL(grant_cfg(&C1, 64, &cfg, 0, &l), TIDE_MC_EC_INVALID_PARAMS);
	cfg.group_ids.val.n = 1;
	CU_ASSERT_EQUAL(grant_cfg(&C1, 0, &cfg, 0, &l), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_lease_grant(NULL, &C1, 64, NULL, 0, &A, &l),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_lease_grant(T, NULL, 64, NULL, 0, &A, &l),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_lease_grant(T, &C1, 64, NULL, 0, NULL, &l),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_lease_grant(T, &C1, 64, NULL, 0, &A, NULL),
			TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(NULL, &C1, 1, 0), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(metrics().leases, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	/* preferred_segment / preferred_segments choose the segment. */
	for (int i = 0; i < 8; i++) {
		CU_ASSERT_EQUAL(grant_cfg(&C1, 64, &cfg, 0, &l), 0); /* group_ids of 1: fine */
		cfg.preferred_segment = S(i % 2 ? "node1" : "node2");
		CU_ASSERT_EQUAL_FATAL(grant_cfg(&C1, 64, &cfg, 0, &l), 0);
		CU_ASSERT_EQUAL(l.buf.buffer_address >= BASE + 16 * MIB, i % 2 == 0);
		CU_ASSERT_EQUAL(l.buf.transport_endpoint.ptr[4], i % 2 ? '1' : '2');
		cfg.preferred_segment = S("");
		cfg.preferred_segments.v = &g2[0];
		cfg.preferred_segments.n = 1;
		g2[0] = S(i % 2 ? "node2" : "node1");
		CU_ASSERT_EQUAL_FATAL(grant_cfg(&C1, 64, &cfg, 0, &l), 0);
		CU_ASSERT_EQUAL(l.buf.buffer_address >= BASE + 16 * MIB, i % 2 == 1);
		cfg.preferred_segments.n = 0;
		g2[0] = S("g1");
	}
	check_consistent();
	rm();
}

/* Hard and soft pins as PutStart + PutEnd set them; bad pin or group settings fail the call. */
static void
test_pins(void)
{
	struct tide_mc_replicate_config cfg;
	struct tide_mc_str gids[2] = {S("g1"), S("g2")}, keys[2] = {S("x"), S("y")};
	uint64_t offs[2] = {1024, 2048}, sizes[2] = {64, 64};
	struct tide_mc_exp_void out[2];
	struct tide_mc_lease l;

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(8 * KIB, 0, &l), 0);
	memset(&cfg, 0, sizeof(cfg));
	cfg.with_hard_pin = true;
	CU_ASSERT_EQUAL(commit1_cfg(&C1, l.id, "hard", 0, 64, &cfg, 0), 0);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 1);
	CU_ASSERT_EQUAL(metrics().soft_pinned_keys, 0);
	memset(&cfg, 0, sizeof(cfg));
	cfg.soft_pin_action = TIDE_MC_SOFT_PIN_ENABLE;
	cfg.soft_pin_ttl_ms = (struct tide_mc_opt_u64){true, 5000};
	CU_ASSERT_EQUAL(commit1_cfg(&C1, l.id, "soft", 64, 64, &cfg, 0), 0);
	CU_ASSERT_EQUAL(metrics().soft_pinned_keys, 1);
	memset(&cfg, 0, sizeof(cfg));
	cfg.with_soft_pin = true; /* V0312 layout: default TTL */
	CU_ASSERT_EQUAL(commit1_cfg(&C1, l.id, "soft2", 128, 64, &cfg, 0), 0);
	CU_ASSERT_EQUAL(metrics().soft_pinned_keys, 2);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 1);
	/* The soft pin deadline is now + TTL. */
	{
		struct mct_obj *o = mct_obj_find(T, "soft", 4);

		CU_ASSERT_FATAL(o != NULL);
		CU_ASSERT(o->flags & MCT_OF_SOFT_PIN);
		CU_ASSERT_EQUAL(o->soft_ms, 5000);
		CU_ASSERT_EQUAL(o->lease_ms, 0);
		CU_ASSERT_EQUAL(o->aux, mct_uuid_hash32(&C1));
	}
	/* Bad settings: the whole call fails, every key says so, nothing changes. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.soft_pin_ttl_ms = (struct tide_mc_opt_u64){true, 1000}; /* TTL without ENABLE */
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, keys, offs, sizes, 2, &cfg, 0, out),
		TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT(!out[0].ok && out[0].err == TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT(!out[1].ok && out[1].err == TIDE_MC_EC_INVALID_PARAMS);
	memset(&cfg, 0, sizeof(cfg));
	cfg.group_ids.has = true;
	cfg.group_ids.val.v = gids;
	cfg.group_ids.val.n = 1; /* must be n */
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, keys, offs, sizes, 2, &cfg, 0, out),
		TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(metrics().keys, 3);
	cfg.group_ids.val.n = 2;
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, keys, offs, sizes, 2, &cfg, 0, out), 0);
	CU_ASSERT(out[0].ok && out[1].ok);
	CU_ASSERT_EQUAL(metrics().keys, 5);
	check_consistent();
	rm();
}

/* Journal records of committed objects; a replay puts them at the same addresses. */
struct rec {
	uint8_t *p[64];
	size_t len[64];
	size_t n;
};

static void
on_record(void *ctx, uint64_t seq, const void *rec, size_t len)
{
	struct rec *r = ctx;

	(void)seq;
	CU_ASSERT_FATAL(rec != NULL && r->n < 64);
	r->p[r->n] = malloc(len);
	CU_ASSERT_FATAL(r->p[r->n] != NULL);
	memcpy(r->p[r->n], rec, len);
	r->len[r->n++] = len;
}

static void
test_journal(void)
{
	struct rec r = {0};
	struct tide_mc_replicate_config cfg;
	struct tide_mc_lease l;
	struct tide_mc_table *y = NULL, *x;
	struct tide_mc_table_opts o;
	uint64_t a1, s1, a2, s2, seq;
	size_t n_set = 0;

	mk_blocks(1024);
	TIDE_UT_OK(tide_mc_table_journal_set(T, on_record, &r, 0));
	mc_fixture_mount(T, (struct tide_mc_uuid){1, 1}, "node1", BASE, MIB, &C1);
	CU_ASSERT_EQUAL(r.n, 1); /* SEG_ADD */
	CU_ASSERT_EQUAL_FATAL(grant(64 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(r.n, 1); /* a grant is not journaled */
	seq = tide_mc_table_journal_seq(T);
	memset(&cfg, 0, sizeof(cfg));
	cfg.with_hard_pin = true;
	CU_ASSERT_EQUAL(commit1_cfg(&C1, l.id, "j1", 4096, 1000, &cfg, 0), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "j2", 0, 64, 0), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "j2", 128, 64, 0), TIDE_MC_EC_OBJECT_ALREADY_EXISTS);
	CU_ASSERT_EQUAL(tide_mc_table_journal_seq(T), seq + 2);
	for (size_t i = 0; i < r.n; i++)
		n_set += r.p[i][0] == 3; /* OBJ_SET */
	CU_ASSERT_EQUAL(n_set, 2);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 1), 0);
	CU_ASSERT_EQUAL(r.n, 3); /* nor is a release */

	tide_mc_table_opts_init(&o, sizeof(o));
	o.seg_max_blocks = 1024;
	TIDE_UT_OK(tide_mc_table_create(&o, &y));
	for (size_t i = 0; i < r.n; i++)
		CU_ASSERT_EQUAL(tide_mc_table_journal_apply(y, r.p[i], r.len[i], 0), 0);
	read_key("j1", &a1, &s1);
	read_key("j2", &a2, &s2);
	CU_ASSERT_EQUAL(a1, l.buf.buffer_address + 4096);
	CU_ASSERT_EQUAL(s1, 1000);
	CU_ASSERT_EQUAL(a2, l.buf.buffer_address);
	x = T;
	T = y;
	expect_at("j1", a1, s1);
	expect_at("j2", a2, s2);
	CU_ASSERT_EQUAL(metrics().hard_pinned_keys, 1);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024 + 64);
	check_consistent();
	T = x;
	mc_fixture_assert_same_segments(T, y, true);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 1024 + 64);
	tide_mc_table_destroy(y);
	for (size_t i = 0; i < r.n; i++)
		free(r.p[i]);
	rm();
}

/* The bound on pieces per lease; consuming a whole piece or a piece's start needs no new one. */
static void
test_piece_bound(void)
{
	struct tide_mc_lease l;
	char key[32];
	uint64_t leased;

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(16 * KIB, 0, &l), 0);
	for (unsigned i = 0; i < TIDE_MC_TABLE_LEASE_PIECES - 1; i++) {
		snprintf(key, sizeof(key), "p%u", i);
		CU_ASSERT_EQUAL(commit1(l.id, key, 64 + 128 * i, 64, 1), 0);
	}
	CU_ASSERT_EQUAL(T->leases[0]->npiece, TIDE_MC_TABLE_LEASE_PIECES);
	leased = metrics().leased_bytes;
	/* Inside the tail piece, not at its start: would need one more piece. */
	CU_ASSERT_EQUAL(commit1(l.id, "over", 64 + 128 * 63, 64, 1),
			TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	CU_ASSERT_EQUAL(metrics().leased_bytes, leased);
	CU_ASSERT_FALSE(has_key("over"));
	/* At the tail's start: the same count. */
	CU_ASSERT_EQUAL(commit1(l.id, "tail", 64 * 126, 64, 1), 0);
	CU_ASSERT_EQUAL(T->leases[0]->npiece, TIDE_MC_TABLE_LEASE_PIECES);
	/* A whole piece: one fewer; then the split fits. */
	CU_ASSERT_EQUAL(commit1(l.id, "first", 0, 64, 1), 0);
	CU_ASSERT_EQUAL(T->leases[0]->npiece, TIDE_MC_TABLE_LEASE_PIECES - 1);
	CU_ASSERT_EQUAL(commit1(l.id, "over", 64 * 130, 64, 1), 0);
	CU_ASSERT_EQUAL(T->leases[0]->npiece, TIDE_MC_TABLE_LEASE_PIECES);
	check_consistent();
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 2), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 64 * (TIDE_MC_TABLE_LEASE_PIECES + 2));
	check_consistent();
	rm();
}

/* A committed object is its own allocation: removing it frees exactly its extent. */
static void
test_remove_frees_extent(void)
{
	struct tide_mc_lease l;
	struct tide_mc_str k = S("obj");

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(64 * KIB, 0, &l), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "obj", 4096, 1000, 1), 0);
	CU_ASSERT_EQUAL(tide_mc_table_remove(T, &k, true, 1), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 64 * KIB - 1024);
	CU_ASSERT_EQUAL(seg_used(BASE), 64 * KIB - 1024);
	check_consistent();
	/* Its range is not the lease's any more. */
	CU_ASSERT_EQUAL(commit1(l.id, "again", 4096, 64, 2), TIDE_MC_EC_INVALID_PARAMS);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 2), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 0);
	CU_ASSERT_EQUAL(seg_used(BASE), 0);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	check_consistent();
	rm();
}

/* A lease used to its last byte ends with the commit that used it. */
static void
test_used_up(void)
{
	struct tide_mc_lease l;
	struct tide_mc_str keys[2] = {S("hi"), S("lo")};
	uint64_t offs[2] = {64, 0}, sizes[2] = {64, 10};
	struct tide_mc_exp_void out[2];

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(100, 0, &l), 0);
	CU_ASSERT_EQUAL(l.buf.size, 128);
	CU_ASSERT_EQUAL(
		tide_mc_table_lease_commit(T, &C1, l.id, keys, offs, sizes, 2, NULL, 1, out), 0);
	CU_ASSERT(out[0].ok && out[1].ok);
	CU_ASSERT_EQUAL(metrics().leases, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 128);
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 2), TIDE_MC_EC_LEASE_EXPIRED);
	check_consistent();
	rm();
}

/* The segment's block table full during a split: INTERNAL_ERROR, the lease as it was. */
static void
test_block_table_full(void)
{
	struct tide_mc_lease l;
	struct tide_mc_table_metrics before;

	mk_blocks(3);
	mc_fixture_mount(T, (struct tide_mc_uuid){1, 1}, "node1", BASE, MIB, &C1);
	CU_ASSERT_EQUAL_FATAL(grant(64 * KIB, 0, &l), 0); /* lease + free tail: 2 blocks */
	before = metrics();
	/* Middle of the lease: needs lease-left, object, lease-right and the free tail. */
	CU_ASSERT_EQUAL(commit1(l.id, "mid", 4096, 64, 1), TIDE_MC_EC_INTERNAL_ERROR);
	CU_ASSERT_EQUAL(metrics().leased_bytes, before.leased_bytes);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, before.allocated_bytes);
	CU_ASSERT_EQUAL(metrics().keys, 0);
	CU_ASSERT_EQUAL(T->leases[0]->npiece, 1);
	check_consistent();
	/* At the start: object + the rest + the free tail fit in 3 blocks. */
	CU_ASSERT_EQUAL(commit1(l.id, "first", 0, 64, 1), 0);
	expect_at("first", BASE, 64);
	check_consistent();
	CU_ASSERT_EQUAL(tide_mc_table_lease_release(T, &C1, l.id, 2), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 64);
	check_consistent();
	rm();
}

/*
 * Unused lease space is not data: a lease of the whole segment evicts none of
 * the objects committed into it (it evicted each at the next tick, as master_ha_it
 * showed with a 16 MiB segment and a 16 MiB lease). Objects above the
 * watermark still are.
 */
static void
test_eviction_ignores_leases(void)
{
	struct tide_mc_lease l;

	mk();
	CU_ASSERT_EQUAL_FATAL(grant(MIB, 0, &l), 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, MIB);
	CU_ASSERT_EQUAL(commit1(l.id, "small", 0, 64, 1), 0);
	tick_alive(1000);
	tick_alive(2000);
	CU_ASSERT(has_key("small"));
	CU_ASSERT_EQUAL(metrics().evicted_keys, 0);
	/* 950 KiB of objects: 0.93 of the segment, above the 0.90 watermark. */
	CU_ASSERT_EQUAL(commit1(l.id, "big", 64 * KIB, 950 * KIB, 3000), 0);
	tick_alive(4000);
	CU_ASSERT_EQUAL(metrics().evicted_keys, 1);
	CU_ASSERT_EQUAL(metrics().keys, 1);
	check_consistent();
	rm();

	/* Once an idle lease ends, its unused space waits out the grace period as
	 * discarded buffers: still a reservation, still not data to evict for. */
	mk();
	CU_ASSERT_EQUAL_FATAL(grant(MIB, 0, &l), 0);
	CU_ASSERT_EQUAL(commit1(l.id, "small", 0, 64, 1), 0);
	tick_alive(40000); /* the lease ended at 30001 */
	CU_ASSERT_EQUAL(metrics().leases, 0);
	CU_ASSERT_EQUAL(metrics().discarded_bytes, MIB - 64);
	check_consistent();
	tick_alive(41000);
	CU_ASSERT(has_key("small"));
	CU_ASSERT_EQUAL(metrics().evicted_keys, 0);
	tick_alive(30001 + TIDE_MC_TABLE_LEASE_GRACE_MS); /* released */
	CU_ASSERT_EQUAL(metrics().discarded_bytes, 0);
	CU_ASSERT_EQUAL(metrics().allocated_bytes, 64);
	CU_ASSERT(has_key("small"));
	check_consistent();
	rm();
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_table_lease", NULL, NULL);

	CU_add_test(s, "opts", test_opts);
	CU_add_test(s, "eviction_ignores_leases", test_eviction_ignores_leases);
	CU_add_test(s, "grant_commit", test_grant_commit);
	CU_add_test(s, "commit_bad_ranges", test_commit_bad_ranges);
	CU_add_test(s, "commit_existing_key", test_commit_existing_key);
	CU_add_test(s, "commit_takes_over_stale_put", test_commit_takes_over_stale_put);
	CU_add_test(s, "commit_wrong_lease", test_commit_wrong_lease);
	CU_add_test(s, "release_frees", test_release_frees);
	CU_add_test(s, "expiry", test_expiry);
	CU_add_test(s, "commit_extends", test_commit_extends);
	CU_add_test(s, "unmount", test_unmount);
	CU_add_test(s, "client_expiry", test_client_expiry);
	CU_add_test(s, "grant_no_room", test_grant_no_room);
	CU_add_test(s, "grant_share", test_grant_share);
	CU_add_test(s, "grant_params", test_grant_params);
	CU_add_test(s, "pins", test_pins);
	CU_add_test(s, "journal", test_journal);
	CU_add_test(s, "piece_bound", test_piece_bound);
	CU_add_test(s, "remove_frees_extent", test_remove_frees_extent);
	CU_add_test(s, "used_up", test_used_up);
	CU_add_test(s, "block_table_full", test_block_table_full);
}

TIDE_UT_MAIN(register_tests)
