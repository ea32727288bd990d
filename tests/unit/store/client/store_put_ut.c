/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_put.c: the put sequence's decisions against the real
 * master server (store/master/server) in this process, with a fake mover in
 * place of the transfer engine (it records the writes, fails the ones asked
 * to, and can end a lease behind the client's back between place and commit):
 *   - a small put is placed in a lease and committed there;
 *   - a lease that cannot place (a master without leases, a lease too small,
 *     a batch that does not fit one lease, too large a batch) leaves the keys
 *     to PutStart in the same call;
 *   - a lease gone before its commit: the keys go to PutStart, nothing lost;
 *   - an existing key is EXISTS, through either placement;
 *   - a batch whose writes partly fail: those keys FAILED and not visible, the
 *     others STORED;
 *   - a single put with no master fails as a whole, out untouched;
 *   - values in pieces: each piece at its offset in every replica (1 and 2
 *     replicas, lease and PutStart), an empty value refused before the master;
 *   - upserts: a missing key created, an existing one replaced in place (same
 *     size) or elsewhere (another size), never through a lease; a batch whose
 *     writes partly fail revokes only those keys.
 * No bytes move: the master cannot tell.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_lease.h"
#include "store_mc_fixture.h"
#include "store_put.h"
#include "tide_ut.h"

#define SEG_BASE 0x7f0000000000ull
#define SEG_SIZE (64ull << 20)
#define MIB      (1ull << 20)

/* ------------------------------------------------------------------------------ the mover */

/* What the fake mover saw and what it is told to do (one test at a time). */
static struct {
	unsigned calls;
	size_t writes;
	uint64_t raddr[64];
	const void *local[64];
	uint64_t len[64];
	const void *fail_local; /* a write from here fails with fail_rc */
	int fail_rc;
	/* End the current lease at the master before the writes "move". */
	struct store_leases *end_lease;
	struct store_mc *end_mc;
} mv;

static int
fake_move(const struct store_xfer_eng *e, enum tide_te_op op, struct store_xfer *x, size_t n)
{
	int first = 0;

	(void)e;
	CU_ASSERT_EQUAL(op, TIDE_TE_WRITE);
	mv.calls++;
	if (mv.end_lease != NULL && mv.end_lease->slot[0].cur != NULL) {
		TIDE_UT_OK(store_mc_lease_release(mv.end_mc, mv.end_lease->slot[0].cur->id));
		mv.end_lease = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		x[i].rc = x[i].local == mv.fail_local ? mv.fail_rc : 0;
		if (x[i].rc != 0 && first == 0)
			first = x[i].rc;
		if (mv.writes < sizeof(mv.raddr) / sizeof(mv.raddr[0])) {
			mv.raddr[mv.writes] = x[i].raddr;
			mv.local[mv.writes] = x[i].local;
			mv.len[mv.writes] = x[i].len;
		}
		mv.writes++;
	}
	return first;
}

/* ----------------------------------------------------------------------------- the set-up */

struct env {
	struct tide_mc_server *srv;
	struct store_mc mc;
	struct store_leases leases;
	struct store_put_ctx c;
};

/* A master (leases served or not; lease_share as store_mc_fixture_server()), a mounted
 * segment of seg_size bytes, leases on, the fake mover. */
static void
env_open(struct env *v, bool leases, uint32_t lease_share, uint64_t seg_size)
{
	char addr[64];

	memset(v, 0, sizeof(*v));
	memset(&mv, 0, sizeof(mv));
	v->srv = store_mc_fixture_server(leases, lease_share);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v->srv);
	tide_mc_pool_init(&v->mc.pool);
	v->mc.client_id.first = 0x1234;
	v->mc.client_id.second = 0x5678;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", tide_mc_server_rpc_port(v->srv));
	TIDE_UT_OK(store_mc_set_master(&v->mc, addr));
	store_mc_fixture_mount(&v->mc, SEG_BASE, seg_size);
	store_leases_init(&v->leases, true);
	v->c.mc = &v->mc;
	v->c.leases = &v->leases;
	v->c.move = fake_move;
}

static void
env_close(struct env *v)
{
	store_leases_fini(&v->leases, &v->mc);
	pthread_mutex_destroy(&v->leases.mu);
	store_mc_reset(&v->mc);
	tide_mc_pool_fini(&v->mc.pool);
	tide_mc_server_stop(v->srv);
	tide_mc_server_destroy(v->srv);
}

/* One key through the sequence, as tide_store_put() runs it. */
static int
put_one(struct env *v, const char *key, const void *buf, size_t len, struct store_put_key *out)
{
	struct store_put_req r = {.keys = &key, .bufs = &buf, .lens = &len, .n = 1, .single = true};

	return store_put_run(&v->c, &r, out);
}

/* n keys as tide_store_batch_put_from() runs them. */
static int
put_batch(struct env *v, const char *const *keys, const void *const *bufs, const size_t *lens,
	  size_t n, const struct tide_store_rc *repl, struct store_put_key *out)
{
	struct store_put_req r = {
		.keys = keys, .bufs = bufs, .lens = lens, .n = n, .repl = repl, .single = false};

	return store_put_run(&v->c, &r, out);
}

/* The address of key's one replica, 0 when it has none (not visible). */
static uint64_t
replica_addr(struct env *v, const char *key)
{
	struct tide_mc_resp r;
	uint64_t addr = 0;

	if (store_mc_replica_list(&v->mc, key, &r) != 0)
		return 0;
	if (r.u.replica_list.val.replicas.n == 1)
		addr = r.u.replica_list.val.replicas.v[0].u.memory.buffer_address;
	tide_mc_resp_free(&r);
	return addr;
}

static void
assert_key(const struct store_put_key *k, enum store_put_result res, int err, const char *by)
{
	CU_ASSERT_EQUAL(k->result, res);
	CU_ASSERT_EQUAL(k->err, err);
	CU_ASSERT_TRUE(k->settled != NULL && strcmp(k->settled, by) == 0);
}

static char src[3][2 * MIB];

/* ------------------------------------------------------------------------------- the cases */

/* A small put: placed in a lease, written there, committed with one call. */
static void
test_lease_placed(void)
{
	const char *keys[3] = {"b0", "b1", "b2"};
	const void *bufs[3] = {src[0], src[1], src[2]};
	size_t lens[3] = {100, 5000, 64};
	struct store_put_key out, bout[3];
	struct store_lease *l;
	struct env v;

	env_open(&v, true, 1, SEG_SIZE);
	TIDE_UT_OK(put_one(&v, "a", src[0], 100, &out));
	assert_key(&out, STORE_PUT_STORED, 0, "lease");
	l = v.leases.slot[0].cur;
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(mv.writes, 1);
	CU_ASSERT_TRUE(mv.raddr[0] >= l->addr && mv.raddr[0] + 100 <= l->addr + l->size);
	CU_ASSERT_EQUAL(replica_addr(&v, "a"), mv.raddr[0]);
	/* A batch: the same lease, one engine batch, one commit. */
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 3, NULL, bout));
	CU_ASSERT_EQUAL(mv.calls, 2);
	for (int i = 0; i < 3; i++) {
		assert_key(&bout[i], STORE_PUT_STORED, 0, "lease");
		CU_ASSERT_EQUAL(replica_addr(&v, keys[i]), mv.raddr[1 + i]);
	}
	CU_ASSERT_PTR_EQUAL(v.leases.slot[0].cur, l);
	CU_ASSERT_EQUAL(l->inflight, 0);
	env_close(&v);
}

/* Where a lease cannot take the keys, PutStart does, in the same call. */
static void
test_lease_cannot_place(void)
{
	const char *keys[2] = {"x0", "x1"};
	const void *bufs[2] = {src[0], src[1]};
	size_t lens[2] = {600 << 10, 600 << 10}, big[2] = {MIB, 0};
	struct tide_store_rc two = {.replica_num = 2};
	struct store_put_key out, bout[2];
	struct env v;
	char key[32];

	/* A master that serves no leases (stock's). */
	env_open(&v, false, 0, SEG_SIZE);
	TIDE_UT_OK(put_one(&v, "stock", src[0], 100, &out));
	assert_key(&out, STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replica_addr(&v, "stock"), mv.raddr[0]);
	CU_ASSERT_EQUAL(v.leases.mode, -1);
	env_close(&v);

	/* A 4 MiB segment leases 512 KiB at a time: a 1 MiB object does not fit one. */
	env_open(&v, true, 0, 4 * MIB);
	TIDE_UT_OK(put_one(&v, "big", src[0], MIB, &out));
	assert_key(&out, STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replica_addr(&v, "big"), mv.raddr[0]);
	/* Two replicas: no lease gives that. An empty object in a batch: not a lease's. */
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 2, &two, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&bout[1], STORE_PUT_STORED, 0, "put-start");
	keys[0] = "e0";
	keys[1] = "e1";
	TIDE_UT_OK(put_batch(&v, keys, bufs, big, 2, NULL, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "put-start");
	/* The master would refuse it (INVALID_PARAMS): refused before asking, by no placement. */
	CU_ASSERT(bout[1].result == STORE_PUT_FAILED && bout[1].err == -EINVAL);
	CU_ASSERT_PTR_NULL(bout[1].settled);
	env_close(&v);

	/* 16 MiB leases: 15 MiB in the current one, then a batch that needs 1.2 MiB.
	 * The first key fits, the second lands in a new lease: not one lease, so
	 * both go to PutStart (and the first key's range comes back). */
	env_open(&v, true, 1, SEG_SIZE);
	for (int i = 0; i < 15; i++) {
		snprintf(key, sizeof(key), "fill-%d", i);
		TIDE_UT_OK(put_one(&v, key, src[0], MIB, &out));
		assert_key(&out, STORE_PUT_STORED, 0, "lease");
	}
	keys[0] = "x0";
	keys[1] = "x1";
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 2, NULL, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&bout[1], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_NOT_EQUAL(replica_addr(&v, "x0"), 0);
	CU_ASSERT_NOT_EQUAL(replica_addr(&v, "x1"), 0);
	/* More than half a lease in one batch: PutStart without asking a lease. */
	lens[0] = lens[1] = 5 * MIB;
	keys[0] = "h0";
	keys[1] = "h1";
	mv.calls = 0;
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 2, NULL, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&bout[1], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(mv.calls, 1);
	env_close(&v);
}

/* The master let the lease go between place and commit: the commit says so, and
 * the keys are put with PutStart in the same call. */
static void
test_lease_gone_then_put_start(void)
{
	const char *keys[2] = {"g1", "g2"};
	const void *bufs[2] = {src[0], src[1]};
	size_t lens[2] = {100, 200};
	const char *groups[2] = {"grp-a", "grp-b"};
	struct tide_store_rc repl = {.group_ids = groups};
	struct store_put_key out, bout[2];
	struct env v;

	env_open(&v, true, 1, SEG_SIZE);
	mv.end_lease = &v.leases;
	mv.end_mc = &v.mc;
	TIDE_UT_OK(put_one(&v, "g0", src[0], 100, &out));
	assert_key(&out, STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(mv.calls, 2); /* the lease's write, then PutStart's */
	CU_ASSERT_EQUAL(replica_addr(&v, "g0"), mv.raddr[1]);
	mv.end_lease = &v.leases;
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 2, &repl, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&bout[1], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replica_addr(&v, "g1"), mv.raddr[4]);
	CU_ASSERT_EQUAL(replica_addr(&v, "g2"), mv.raddr[5]);
	env_close(&v);
}

/* An existing key is kept and the put succeeds, through either placement. */
static void
test_exists(void)
{
	const char *keys[3] = {"k-new", "k-old", "k-new2"};
	const void *bufs[3] = {src[0], src[1], src[2]};
	size_t lens[3] = {100, 100, 100};
	struct store_put_key out, bout[3];
	uint64_t at;
	struct env v;

	env_open(&v, true, 1, SEG_SIZE);
	TIDE_UT_OK(put_one(&v, "k-old", src[0], 100, &out));
	at = replica_addr(&v, "k-old");
	TIDE_UT_OK(put_one(&v, "k-old", src[1], 300, &out));
	assert_key(&out, STORE_PUT_EXISTS, 0, "lease");
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 3, NULL, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "lease");
	assert_key(&bout[1], STORE_PUT_EXISTS, 0, "lease");
	assert_key(&bout[2], STORE_PUT_STORED, 0, "lease");
	CU_ASSERT_EQUAL(replica_addr(&v, "k-old"), at);
	env_close(&v);

	env_open(&v, false, 0, SEG_SIZE);
	TIDE_UT_OK(put_one(&v, "k-old", src[0], 100, &out));
	at = replica_addr(&v, "k-old");
	TIDE_UT_OK(put_one(&v, "k-old", src[1], 300, &out));
	assert_key(&out, STORE_PUT_EXISTS, 0, "put-start");
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 3, NULL, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&bout[1], STORE_PUT_EXISTS, 0, "put-start");
	assert_key(&bout[2], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replica_addr(&v, "k-old"), at);
	CU_ASSERT_EQUAL(mv.writes, 3); /* none for the existing key */
	env_close(&v);
}

/* Some writes of a batch fail: those keys fail and stay invisible, the others are
 * stored; through a lease and through PutStart. */
static void
test_partial_batch_failure(void)
{
	const char *keys[3] = {"p0", "p1", "p2"};
	const void *bufs[3] = {src[0], src[1], src[2]};
	size_t lens[3] = {100, 200, 300};
	struct store_put_key out, bout[3];
	struct env v;

	env_open(&v, true, 1, SEG_SIZE);
	mv.fail_local = src[1];
	mv.fail_rc = -EAGAIN; /* the engine's; the put reports -EIO */
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 3, NULL, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "lease");
	assert_key(&bout[1], STORE_PUT_FAILED, -EIO, "lease");
	assert_key(&bout[2], STORE_PUT_STORED, 0, "lease");
	CU_ASSERT_NOT_EQUAL(replica_addr(&v, "p0"), 0);
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "p1"), 0);
	CU_ASSERT_NOT_EQUAL(replica_addr(&v, "p2"), 0);
	/* The failed write retired the lease (its segment may be gone). */
	CU_ASSERT_PTR_NULL(v.leases.slot[0].cur);
	env_close(&v);

	env_open(&v, false, 0, SEG_SIZE);
	mv.fail_local = src[1];
	mv.fail_rc = -ECONNRESET;
	TIDE_UT_OK(put_batch(&v, keys, bufs, lens, 3, NULL, bout));
	assert_key(&bout[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&bout[1], STORE_PUT_FAILED, -ECONNRESET, "put-start");
	assert_key(&bout[2], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "p1"), 0);
	/* Revoked, not left half put: the key can be put again. */
	mv.fail_local = NULL;
	TIDE_UT_OK(put_one(&v, "p1", src[1], 200, &out));
	assert_key(&out, STORE_PUT_STORED, 0, "put-start");
	/* A single put whose write fails: revoked too. */
	mv.fail_local = src[2];
	TIDE_UT_OK(put_one(&v, "single", src[2], 100, &out));
	assert_key(&out, STORE_PUT_FAILED, -ECONNRESET, "put-start");
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "single"), 0);
	env_close(&v);
}

/* No master: a single put fails as a whole and leaves out alone; so does a batch. */
static void
test_no_master(void)
{
	const char *keys[2] = {"n0", "n1"};
	const void *bufs[2] = {src[0], src[1]};
	size_t lens[2] = {100, 100};
	struct store_put_key out = {.result = STORE_PUT_FALLBACK, .err = 12345};
	struct store_put_key bout[2] = {out, out};
	struct env v;

	env_open(&v, true, 1, SEG_SIZE);
	tide_mc_server_stop(v.srv);
	tide_mc_pool_close_all(&v.mc.pool);
	CU_ASSERT_TRUE(put_one(&v, "n", src[0], 100, &out) < 0);
	CU_ASSERT_EQUAL(out.err, 12345);
	CU_ASSERT_TRUE(put_batch(&v, keys, bufs, lens, 2, NULL, bout) < 0);
	CU_ASSERT_EQUAL(bout[0].err, 12345);
	CU_ASSERT_EQUAL(bout[1].err, 12345);
	CU_ASSERT_EQUAL(mv.calls, 0);
	env_close(&v);
}

/* n keys in pieces (parts/nparts), put or upserted, single RPCs when single. */
static int
put_parts(struct env *v, const char *const *keys, const struct tide_store_part *parts,
	  const size_t *nparts, size_t n, const struct tide_store_rc *repl, bool single,
	  bool upsert, struct store_put_key *out)
{
	struct store_put_req r = {.keys = keys,
				  .parts = parts,
				  .nparts = nparts,
				  .n = n,
				  .repl = repl,
				  .single = single,
				  .upsert = upsert};

	return store_put_run(&v->c, &r, out);
}

/* key's replicas: their addresses (up to max) and the object's size; how many. */
static size_t
replicas_of(struct env *v, const char *key, uint64_t *addrs, size_t max, uint64_t *size)
{
	struct tide_mc_resp r;
	size_t n;

	*size = 0;
	if (store_mc_replica_list(&v->mc, key, &r) != 0)
		return 0;
	n = r.u.replica_list.val.replicas.n;
	for (size_t i = 0; i < n && i < max; i++) {
		addrs[i] = r.u.replica_list.val.replicas.v[i].u.memory.buffer_address;
		*size = r.u.replica_list.val.replicas.v[i].u.memory.size;
	}
	tide_mc_resp_free(&r);
	return n;
}

/* Writes w0.. (count of them) are the pieces p (np, empty ones skipped) at their
 * offsets from base. */
static void
assert_pieces_at(size_t w0, uint64_t base, const struct tide_store_part *p, size_t np)
{
	uint64_t off = 0;
	size_t w = w0;

	for (size_t k = 0; k < np; k++) {
		if (p[k].len == 0)
			continue;
		CU_ASSERT_EQUAL(mv.raddr[w], base + off);
		CU_ASSERT_PTR_EQUAL(mv.local[w], p[k].buf);
		CU_ASSERT_EQUAL(mv.len[w], p[k].len);
		off += p[k].len;
		w++;
	}
}

/* A second segment of another name (the master puts two replicas of an object on two
 * segments of different names only), seg_size bytes from base. */
static void
mount_second(struct store_mc *mc, uint64_t base, uint64_t size)
{
	store_mc_fixture_mount_as(mc, "127.0.0.1:10", 0xabd, base, size);
}

/* Pieces land at their offsets: in a lease, through PutStart with one replica and with
 * two, single and batch; the writes of a round are one engine batch. */
static void
test_parts_offsets(void)
{
	const char *keys[2] = {"pa", "pb"};
	struct tide_store_part parts[5] = {
		{src[0], 100}, {NULL, 0}, {src[1], 4000}, {src[2], 7}, {src[0] + 100, 900}};
	size_t nparts[2] = {4, 1}; /* pa: 100 + 0 + 4000 + 7; pb: 900 */
	struct tide_store_rc two = {.replica_num = 2};
	struct store_put_key out[2];
	uint64_t a[2], b[2], size;
	struct env v;

	/* A lease: each key's pieces one after the other in its range. */
	env_open(&v, true, 1, SEG_SIZE);
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 2, NULL, false, false, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "lease");
	assert_key(&out[1], STORE_PUT_STORED, 0, "lease");
	CU_ASSERT_EQUAL(mv.calls, 1);
	CU_ASSERT_EQUAL_FATAL(mv.writes, 4);
	CU_ASSERT_EQUAL(replicas_of(&v, "pa", a, 2, &size), 1);
	CU_ASSERT_EQUAL(size, 4107);
	assert_pieces_at(0, a[0], parts, 4);
	CU_ASSERT_EQUAL(replicas_of(&v, "pb", b, 2, &size), 1);
	CU_ASSERT_EQUAL(size, 900);
	assert_pieces_at(3, b[0], &parts[4], 1);
	env_close(&v);

	/* PutStart, one replica: a single key, then a batch. */
	env_open(&v, false, 0, SEG_SIZE);
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 1, NULL, true, false, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replicas_of(&v, "pa", a, 2, &size), 1);
	CU_ASSERT_EQUAL(size, 4107);
	CU_ASSERT_EQUAL_FATAL(mv.writes, 3);
	assert_pieces_at(0, a[0], parts, 4);
	keys[0] = "pc";
	keys[1] = "pd";
	mv.writes = 0;
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 2, NULL, false, false, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&out[1], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL_FATAL(mv.writes, 4);
	CU_ASSERT_EQUAL(replicas_of(&v, "pc", a, 2, &size), 1);
	assert_pieces_at(0, a[0], parts, 4);
	CU_ASSERT_EQUAL(replicas_of(&v, "pd", b, 2, &size), 1);
	assert_pieces_at(3, b[0], &parts[4], 1);
	env_close(&v);

	/* Two replicas (two segments): every piece in each, at the same offsets. */
	env_open(&v, false, 0, SEG_SIZE);
	mount_second(&v.mc, SEG_BASE + SEG_SIZE, SEG_SIZE);
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 1, &two, true, false, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL_FATAL(replicas_of(&v, "pc", a, 2, &size), 2);
	CU_ASSERT_NOT_EQUAL(a[0], a[1]);
	CU_ASSERT_EQUAL_FATAL(mv.writes, 6);
	assert_pieces_at(0, a[0], parts, 4);
	assert_pieces_at(3, a[1], parts, 4);
	keys[0] = "pe";
	keys[1] = "pf";
	mv.writes = 0;
	mv.calls = 0;
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 2, &two, false, false, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&out[1], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(mv.calls, 1);
	CU_ASSERT_EQUAL_FATAL(mv.writes, 8);
	CU_ASSERT_EQUAL_FATAL(replicas_of(&v, "pe", a, 2, &size), 2);
	CU_ASSERT_EQUAL_FATAL(replicas_of(&v, "pf", b, 2, &size), 2);
	assert_pieces_at(0, a[0], parts, 4);
	assert_pieces_at(3, a[1], parts, 4);
	assert_pieces_at(6, b[0], &parts[4], 1);
	assert_pieces_at(7, b[1], &parts[4], 1);
	env_close(&v);
}

/* A value of 0 bytes (no pieces, or only empty ones) is that key's -EINVAL, refused
 * before the master; the others are stored; a single such key too. */
static void
test_parts_zero_length(void)
{
	const char *keys[3] = {"z0", "z1", "z2"};
	struct tide_store_part parts[3] = {{src[0], 0}, {NULL, 0}, {src[1], 64}};
	size_t nparts[3] = {2, 0, 1};
	struct store_put_key out[3];
	struct env v;

	env_open(&v, true, 1, SEG_SIZE);
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 3, NULL, false, false, out));
	CU_ASSERT(out[0].result == STORE_PUT_FAILED && out[0].err == -EINVAL);
	CU_ASSERT(out[1].result == STORE_PUT_FAILED && out[1].err == -EINVAL);
	CU_ASSERT_PTR_NULL(out[0].settled);
	assert_key(&out[2], STORE_PUT_STORED, 0, "lease"); /* the empty keys do not stop it */
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "z0"), 0);
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "z1"), 0);
	CU_ASSERT_EQUAL(mv.writes, 1);
	/* Alone, and upserted: the same. */
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 1, NULL, true, true, out));
	CU_ASSERT(out[0].result == STORE_PUT_FAILED && out[0].err == -EINVAL);
	CU_ASSERT_EQUAL(mv.calls, 1);
	env_close(&v);
}

/* Upsert: a missing key is created, an existing one replaced (same size: in place;
 * another size: the master reallocates), through UpsertStart and BatchUpsertStart,
 * never a lease even where a put would take one. A put of the same key keeps it. */
static void
test_upsert(void)
{
	const char *keys[2] = {"u0", "u1"};
	struct tide_store_part p100 = {src[0], 100}, p300[2] = {{src[1], 200}, {src[2], 100}};
	struct tide_store_part p100b[2] = {{src[1], 60}, {src[2], 40}};
	struct tide_store_part batch[3] = {{src[2], 50}, {src[0], 50}, {src[1], 4096}};
	size_t one = 1, two = 2, nb[2] = {2, 1};
	struct store_put_key out[2];
	uint64_t a = 0, a2 = 0, size = 0; /* set by replicas_of(); zeroed for gcc -O3, which cannot
					     see CU_ASSERT_FATAL end a test */
	struct env v;

	/* Missing: created, through UpsertStart although a lease would take a put of it. */
	env_open(&v, true, 1, SEG_SIZE);
	TIDE_UT_OK(put_parts(&v, keys, &p100, &one, 1, NULL, true, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_PTR_NULL(v.leases.slot[0].cur); /* no lease asked for */
	CU_ASSERT_EQUAL(replicas_of(&v, "u0", &a, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 100);
	/* Same size (100 = 60 + 40 in pieces): in place. */
	mv.writes = 0;
	TIDE_UT_OK(put_parts(&v, keys, p100b, &two, 1, NULL, true, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replicas_of(&v, "u0", &a2, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 100);
	CU_ASSERT_EQUAL(a2, a);
	CU_ASSERT_EQUAL_FATAL(mv.writes, 2);
	assert_pieces_at(0, a, p100b, 2);
	/* Another size: new buffers of the new size, the pieces there. */
	mv.writes = 0;
	TIDE_UT_OK(put_parts(&v, keys, p300, &two, 1, NULL, true, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replicas_of(&v, "u0", &a2, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 300);
	assert_pieces_at(0, a2, p300, 2);
	/* A put of the existing key keeps it (the put's EXISTS), whatever its size. */
	TIDE_UT_OK(put_parts(&v, keys, &p100, &one, 1, NULL, true, false, out));
	CU_ASSERT_EQUAL(out[0].result, STORE_PUT_EXISTS);
	CU_ASSERT_EQUAL(replicas_of(&v, "u0", &a, 1, &size), 1);
	CU_ASSERT(size == 300 && a == a2);
	/* A batch: u0 (exists, 300 -> 100 bytes) and u1 (missing, 4096). */
	mv.writes = 0;
	TIDE_UT_OK(put_parts(&v, keys, batch, nb, 2, NULL, false, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&out[1], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replicas_of(&v, "u0", &a, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 100);
	assert_pieces_at(0, a, batch, 2);
	CU_ASSERT_EQUAL(replicas_of(&v, "u1", &a2, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 4096);
	assert_pieces_at(2, a2, &batch[2], 1);
	env_close(&v);
}

/* Writes of some keys fail mid-batch: only those are revoked (BatchUpsertRevoke,
 * BatchPutRevoke: absent after), the others committed; a single upsert too. */
static void
test_parts_partial_failure(void)
{
	const char *keys[3] = {"f0", "f1", "f2"};
	/* f1's second piece is the one whose write fails. */
	struct tide_store_part parts[5] = {{src[0], 64},
					   {src[1], 64},
					   {src[2] + 8, 64},
					   {src[0] + 64, 64},
					   {src[0] + 128, 64}};
	size_t nparts[3] = {2, 2, 1};
	struct store_put_key out[3];
	uint64_t a, size;
	struct env v;

	env_open(&v, false, 0, SEG_SIZE);
	mv.fail_local = src[2] + 8;
	mv.fail_rc = -ECONNRESET;
	/* Upsert of three missing keys. */
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 3, NULL, false, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&out[1], STORE_PUT_FAILED, -ECONNRESET, "put-start");
	assert_key(&out[2], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "f1"), 0);
	/* Upsert of three existing keys (f1 exists now too), each to another size: f1's
	 * write fails again and only it is revoked. */
	mv.fail_local = NULL;
	TIDE_UT_OK(put_parts(&v, &keys[1], &parts[2], &nparts[1], 1, NULL, true, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	nparts[0] = 1;
	nparts[1] = 3; /* f0: 64, f1: 64 + 64 + 64 (the failing piece in the middle), f2: 64 */
	parts[1] = (struct tide_store_part){src[1], 64};
	parts[2] = (struct tide_store_part){src[2] + 8, 64};
	parts[3] = (struct tide_store_part){src[0] + 64, 64};
	parts[4] = (struct tide_store_part){src[1] + 64, 64};
	nparts[2] = 1;
	mv.fail_local = src[2] + 8;
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 3, NULL, false, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&out[1], STORE_PUT_FAILED, -ECONNRESET, "put-start");
	assert_key(&out[2], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replicas_of(&v, "f0", &a, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 64);
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "f1"), 0);
	CU_ASSERT_EQUAL(replicas_of(&v, "f2", &a, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 64);
	/* A single upsert whose write fails: revoked (UpsertRevoke), the key absent. */
	TIDE_UT_OK(put_parts(&v, &keys[1], &parts[1], &nparts[1], 1, NULL, true, true, out));
	assert_key(&out[0], STORE_PUT_FAILED, -ECONNRESET, "put-start");
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "f1"), 0);
	/* The same pieces as a put with new keys beside f1: f1 revoked (BatchPutRevoke). */
	keys[0] = "g0";
	keys[2] = "g2";
	TIDE_UT_OK(put_parts(&v, keys, parts, nparts, 3, NULL, false, false, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	assert_key(&out[1], STORE_PUT_FAILED, -ECONNRESET, "put-start");
	assert_key(&out[2], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(store_mc_exist_key(&v.mc, "f1"), 0);
	/* Revoked, not left half written: it can be upserted again. */
	mv.fail_local = NULL;
	TIDE_UT_OK(put_parts(&v, &keys[1], &parts[1], &nparts[1], 1, NULL, true, true, out));
	assert_key(&out[0], STORE_PUT_STORED, 0, "put-start");
	CU_ASSERT_EQUAL(replicas_of(&v, "f1", &a, 1, &size), 1);
	CU_ASSERT_EQUAL(size, 192);
	env_close(&v);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_put", NULL, NULL);

	CU_add_test(s, "lease_placed", test_lease_placed);
	CU_add_test(s, "lease_cannot_place", test_lease_cannot_place);
	CU_add_test(s, "lease_gone_then_put_start", test_lease_gone_then_put_start);
	CU_add_test(s, "exists", test_exists);
	CU_add_test(s, "partial_batch_failure", test_partial_batch_failure);
	CU_add_test(s, "no_master", test_no_master);
	CU_add_test(s, "parts_offsets", test_parts_offsets);
	CU_add_test(s, "parts_zero_length", test_parts_zero_length);
	CU_add_test(s, "upsert", test_upsert);
	CU_add_test(s, "parts_partial_failure", test_parts_partial_failure);
}

TIDE_UT_MAIN(register_tests)
