/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_xfer.c: replica descriptors built by hand -> transfer
 * lists (which replica, how many bytes, where, for which key or fragment),
 * with the descriptors a master should not send (too small, not memory, not
 * complete, missing elements, ranges past the end). Then the transfers
 * themselves between two engines in this process on loopback: the copy into
 * our own segment, a real transfer, a peer that does not exist, and the read
 * of a replica list with its fallback and its lease.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_xfer.h"
#include "tide_ut.h"

#define EP_A "10.0.0.1:1000"
#define EP_B "10.0.0.2:2000"

/* A replica descriptor: kind, status, endpoint, address, size. */
static struct tide_mc_replica_desc
rep(uint8_t kind, int32_t status, const char *ep, uint64_t addr, uint64_t size)
{
	struct tide_mc_replica_desc d;

	memset(&d, 0, sizeof(d));
	d.kind = kind;
	d.status = status;
	d.u.memory.transport_endpoint.ptr = (char *)ep;
	d.u.memory.transport_endpoint.len = strlen(ep);
	d.u.memory.buffer_address = addr;
	d.u.memory.size = size;
	return d;
}

#define MEM(st, ep, addr, size) rep(TIDE_MC_RK_MEMORY, TIDE_MC_RS_##st, ep, addr, size)
#define VEC(a)                  ((struct tide_mc_replica_desc_vec){a, sizeof(a) / sizeof(a[0])})

static void
test_complete_picks_complete_memory(void)
{
	struct tide_mc_replica_desc d = MEM(COMPLETE, EP_A, 64, 8);

	CU_ASSERT_PTR_EQUAL(store_xfer_complete(&d), &d.u.memory);
	d = rep(TIDE_MC_RK_NOF, TIDE_MC_RS_COMPLETE, EP_A, 64, 8);
	CU_ASSERT_PTR_NOT_NULL(store_xfer_complete(&d));
	d = MEM(PROCESSING, EP_A, 64, 8);
	CU_ASSERT_PTR_NULL(store_xfer_complete(&d));
	d = MEM(FAILED, EP_A, 64, 8);
	CU_ASSERT_PTR_NULL(store_xfer_complete(&d));
	d = rep(TIDE_MC_RK_DISK, TIDE_MC_RS_COMPLETE, EP_A, 64, 8);
	CU_ASSERT_PTR_NULL(store_xfer_complete(&d));
}

static void
test_replica_writes_one_per_replica(void)
{
	struct tide_mc_replica_desc two[] = {MEM(PROCESSING, EP_A, 0x1000, 100),
					     MEM(PROCESSING, EP_B, 0x2000, 128)};
	struct tide_mc_replica_desc small[] = {MEM(PROCESSING, EP_A, 0x1000, 100),
					       MEM(PROCESSING, EP_B, 0x2000, 99)};
	struct tide_mc_replica_desc disk[] = {
		rep(TIDE_MC_RK_DISK, TIDE_MC_RS_PROCESSING, EP_A, 0, 100)};
	struct tide_mc_replica_desc_vec none = {NULL, 0};
	char buf[100] = "";
	struct tide_store_part whole = {buf, sizeof(buf)};
	struct store_xfer_src src = {&whole, 1};
	struct store_xfer x[4];
	size_t nx = 1; /* appends after what is there */

	TIDE_UT_OK(store_xfer_replica_writes(&VEC(two), &src, sizeof(buf), x, 4, &nx));
	CU_ASSERT_EQUAL_FATAL(nx, 3);
	CU_ASSERT_STRING_EQUAL(x[1].ep, EP_A);
	CU_ASSERT_EQUAL(x[1].raddr, 0x1000);
	CU_ASSERT_STRING_EQUAL(x[2].ep, EP_B);
	CU_ASSERT_EQUAL(x[2].raddr, 0x2000);
	/* Each replica gets the object's length, not the buffer the master gave. */
	CU_ASSERT(x[1].len == 100 && x[2].len == 100);
	CU_ASSERT(x[1].local == buf && x[2].local == buf);
	/* A replica smaller than the object, one not in memory, none at all. */
	nx = 0;
	CU_ASSERT_EQUAL(store_xfer_replica_writes(&VEC(small), &src, sizeof(buf), x, 4, &nx),
			-EREMOTEIO);
	nx = 0;
	CU_ASSERT_EQUAL(store_xfer_replica_writes(&VEC(disk), &src, sizeof(buf), x, 4, &nx),
			-EREMOTEIO);
	CU_ASSERT_EQUAL(nx, 0);
	CU_ASSERT_EQUAL(store_xfer_replica_writes(&none, &src, sizeof(buf), x, 4, &nx), -EREMOTEIO);
	/* More writes than the list has room for: refused, never written past it. */
	nx = 0;
	CU_ASSERT_EQUAL(store_xfer_replica_writes(&VEC(two), &src, sizeof(buf), x, 1, &nx),
			-EREMOTEIO);
	CU_ASSERT_EQUAL(nx, 1);
}

/* A value in pieces: each non-empty piece at its offset in every replica, from
 * where it is; one replica and two. */
static void
test_replica_writes_pieces(void)
{
	struct tide_mc_replica_desc one[] = {MEM(PROCESSING, EP_A, 0x1000, 100)};
	struct tide_mc_replica_desc two[] = {MEM(PROCESSING, EP_A, 0x1000, 100),
					     MEM(PROCESSING, EP_B, 0x8000, 100)};
	char a[30], b[50], c[20];
	struct tide_store_part p[4] = {{a, 30}, {NULL, 0}, {b, 50}, {c, 20}};
	struct store_xfer_src src = {p, 4};
	struct store_xfer x[8];
	size_t nx = 0;

	TIDE_UT_OK(store_xfer_replica_writes(&VEC(one), &src, 100, x, 8, &nx));
	CU_ASSERT_EQUAL_FATAL(nx, 3); /* the empty piece moves nothing */
	CU_ASSERT(x[0].raddr == 0x1000 && x[0].local == a && x[0].len == 30);
	CU_ASSERT(x[1].raddr == 0x1000 + 30 && x[1].local == b && x[1].len == 50);
	CU_ASSERT(x[2].raddr == 0x1000 + 80 && x[2].local == c && x[2].len == 20);
	nx = 0;
	TIDE_UT_OK(store_xfer_replica_writes(&VEC(two), &src, 100, x, 8, &nx));
	CU_ASSERT_EQUAL_FATAL(nx, 6);
	for (int r = 0; r < 2; r++) {
		uint64_t base = r == 0 ? 0x1000 : 0x8000;

		CU_ASSERT_STRING_EQUAL(x[3 * r].ep, r == 0 ? EP_A : EP_B);
		CU_ASSERT(x[3 * r].raddr == base && x[3 * r].local == a);
		CU_ASSERT(x[3 * r + 1].raddr == base + 30 && x[3 * r + 1].local == b);
		CU_ASSERT(x[3 * r + 2].raddr == base + 80 && x[3 * r + 2].local == c);
		CU_ASSERT_EQUAL(x[3 * r + 2].len, 20);
	}
	/* Pieces summing past the length the master placed: refused, not written past. */
	nx = 0;
	CU_ASSERT_EQUAL(store_xfer_replica_writes(&VEC(one), &src, 90, x, 8, &nx), -EREMOTEIO);
}

static void
test_replica_size_first_complete(void)
{
	struct tide_mc_replica_desc r[] = {MEM(PROCESSING, EP_A, 0, 7), MEM(COMPLETE, EP_B, 0, 42),
					   MEM(COMPLETE, EP_A, 0, 43)};
	struct tide_mc_replica_list l = {.replicas = VEC(r)};

	CU_ASSERT_EQUAL(store_xfer_replica_size(&l), 42);
	l.replicas.n = 1;
	CU_ASSERT_EQUAL(store_xfer_replica_size(&l), -EAGAIN);
	l.replicas.n = 0;
	CU_ASSERT_EQUAL(store_xfer_replica_size(&l), -EAGAIN);
}

static void
test_self_copy_bounds(void)
{
	unsigned char seg[64], local[16];
	struct store_xfer_eng e = {.seg_base = seg, .seg_size = sizeof(seg)};
	uint64_t base = (uint64_t)(uintptr_t)seg;
	struct store_xfer x = {.ep = EP_A, .raddr = base + 48, .local = local, .len = 16};

	memset(seg, 0, sizeof(seg));
	memset(local, 0xab, sizeof(local));
	/* The last 16 bytes of the segment: written here, then read back. */
	CU_ASSERT_TRUE(store_xfer_self_copy(&e, TIDE_TE_WRITE, &x, EP_A));
	CU_ASSERT_EQUAL(seg[48], 0xab);
	CU_ASSERT_EQUAL(seg[63], 0xab);
	CU_ASSERT_EQUAL(seg[47], 0);
	seg[50] = 7;
	CU_ASSERT_TRUE(store_xfer_self_copy(&e, TIDE_TE_READ, &x, EP_A));
	CU_ASSERT_EQUAL(local[2], 7);
	/* Another endpoint, one byte past the end, below the base, longer than the
	 * segment, no segment: the engine's. */
	CU_ASSERT_FALSE(store_xfer_self_copy(&e, TIDE_TE_READ, &x, EP_B));
	x.raddr = base + 49;
	CU_ASSERT_FALSE(store_xfer_self_copy(&e, TIDE_TE_READ, &x, EP_A));
	x.raddr = base - 1;
	CU_ASSERT_FALSE(store_xfer_self_copy(&e, TIDE_TE_READ, &x, EP_A));
	x.raddr = base;
	x.len = sizeof(seg) + 1;
	CU_ASSERT_FALSE(store_xfer_self_copy(&e, TIDE_TE_READ, &x, EP_A));
	x.len = 16;
	e.seg_base = NULL;
	CU_ASSERT_FALSE(store_xfer_self_copy(&e, TIDE_TE_READ, &x, EP_A));
}

/* BatchPutStart: which keys are written, which are settled, how much room. */
static void
test_put_plan(void)
{
	struct tide_mc_replica_desc k0[] = {MEM(PROCESSING, EP_A, 0x100, 10),
					    MEM(PROCESSING, EP_B, 0x200, 10)};
	struct tide_mc_replica_desc k2[] = {MEM(PROCESSING, EP_A, 0x300, 9)}; /* too small */
	struct tide_mc_replica_desc k4[] = {MEM(PROCESSING, EP_B, 0x400, 10)};
	struct tide_mc_exp_replicas e[] = {
		{.ok = true, .val = VEC(k0)},
		{.ok = false, .err = TIDE_MC_EC_OBJECT_ALREADY_EXISTS},
		{.ok = true, .val = VEC(k2)},
		{.ok = false, .err = TIDE_MC_EC_NO_AVAILABLE_HANDLE},
		{.ok = true, .val = VEC(k4)},
	};
	/* Six keys, five answers: the sixth is missing. */
	struct tide_mc_exp_replicas_vec r = {e, 5};
	char b0[10], b2[10], b4[10];
	struct tide_store_part pt[6] = {{b0, 10}, {"x", 1}, {b2, 10}, {"x", 1}, {b4, 10}, {"x", 1}};
	struct store_xfer_src src[6];
	size_t lens[6] = {10, 1, 10, 1, 10, 1}, owner[4], cap, nx;
	bool pending[6] = {false};
	int rcs[6];
	struct store_xfer x[4];

	for (int i = 0; i < 6; i++)
		src[i] = (struct store_xfer_src){&pt[i], 1};
	cap = store_xfer_put_replicas(&r, src, 6, false, rcs, pending);
	CU_ASSERT_EQUAL(cap, 4);
	CU_ASSERT(pending[0] && !pending[1] && pending[2] && !pending[3] && pending[4] &&
		  !pending[5]);
	CU_ASSERT(rcs[0] == 0 && rcs[1] == 0 && rcs[2] == 0 && rcs[4] == 0);
	CU_ASSERT_EQUAL(rcs[3], -ENOSPC);
	CU_ASSERT_EQUAL(rcs[5], -EBADMSG);
	nx = store_xfer_plan_puts(&r, src, lens, 6, pending, rcs, x, cap, owner);
	/* Key 2's replica cannot hold it: refused, and none of its writes planned. */
	CU_ASSERT_EQUAL_FATAL(nx, 3);
	CU_ASSERT_EQUAL(rcs[2], -EREMOTEIO);
	CU_ASSERT(owner[0] == 0 && owner[1] == 0 && owner[2] == 4);
	CU_ASSERT(x[0].raddr == 0x100 && x[1].raddr == 0x200 && x[2].raddr == 0x400);
	CU_ASSERT(x[2].local == b4 && x[2].len == 10);
	CU_ASSERT_EQUAL(rcs[0], 0);
	/* No room for the list: the pending keys fail (-ENOMEM; -EREMOTEIO when the
	 * master gave no replica at all). */
	nx = store_xfer_plan_puts(&r, src, lens, 6, pending, rcs, NULL, cap, owner);
	CU_ASSERT_EQUAL(nx, 0);
	CU_ASSERT(rcs[0] == -ENOMEM && rcs[2] == -ENOMEM && rcs[4] == -ENOMEM);
	CU_ASSERT_EQUAL(rcs[3], -ENOSPC);
	store_xfer_plan_puts(&r, src, lens, 6, pending, rcs, NULL, 0, owner);
	CU_ASSERT_EQUAL(rcs[0], -EREMOTEIO);
	/* An upsert: an existing key is the master's refusal, not a success. */
	memset(pending, 0, sizeof(pending));
	store_xfer_put_replicas(&r, src, 6, true, rcs, pending);
	CU_ASSERT(!pending[1] && rcs[1] == -EEXIST);
	/* Pieces: the room is replicas times pieces. */
	src[0] = (struct store_xfer_src){pt, 3};
	memset(pending, 0, sizeof(pending));
	CU_ASSERT_EQUAL(store_xfer_put_replicas(&r, src, 6, false, rcs, pending), 2 * 3 + 1 + 1);
}

/* BatchGetReplicaList into the caller's buffers. */
static void
test_get_plan(void)
{
	struct tide_mc_replica_desc k0[] = {MEM(PROCESSING, EP_A, 0x100, 50),
					    MEM(COMPLETE, EP_B, 0x200, 60)};
	struct tide_mc_replica_desc k1[] = {MEM(COMPLETE, EP_A, 0x300, 65)};
	struct tide_mc_replica_desc k3[] = {MEM(PROCESSING, EP_A, 0x400, 10)};
	struct tide_mc_exp_replica_list e[] = {
		{.ok = true, .val.replicas = VEC(k0)},
		{.ok = true, .val.replicas = VEC(k1)},
		{.ok = false, .err = TIDE_MC_EC_OBJECT_NOT_FOUND},
		{.ok = true, .val.replicas = VEC(k3)},
	};
	struct tide_mc_exp_replica_list_vec r = {e, 4};
	char b[5][64];
	void *const bufs[5] = {b[0], b[1], b[2], b[3], b[4]};
	size_t lens[5] = {64, 64, 64, 64, 64}, owner[5], nx;
	int64_t sizes[5];
	struct store_xfer x[5];

	nx = store_xfer_plan_gets(&r, bufs, lens, 5, sizes, x, owner);
	CU_ASSERT_EQUAL_FATAL(nx, 1);
	/* Key 0 from its first COMPLETE replica, whole. */
	CU_ASSERT_EQUAL(sizes[0], 60);
	CU_ASSERT(owner[0] == 0 && x[0].raddr == 0x200 && x[0].len == 60 && x[0].local == b[0]);
	CU_ASSERT_STRING_EQUAL(x[0].ep, EP_B);
	CU_ASSERT_EQUAL(sizes[1], -ENOBUFS); /* 65 bytes into 64 */
	CU_ASSERT_EQUAL(sizes[2], -ENOENT);
	CU_ASSERT_EQUAL(sizes[3], -EAGAIN);  /* nothing COMPLETE */
	CU_ASSERT_EQUAL(sizes[4], -EBADMSG); /* no answer for it */
}

/* get_into_ranges: key info, fragments settled, rounds over the replicas, lease. */
static void
test_ranges_plan(void)
{
	struct tide_mc_replica_desc k0[] = {MEM(COMPLETE, EP_A, 0x1000, 100),
					    MEM(PROCESSING, EP_B, 0x5000, 100),
					    MEM(COMPLETE, EP_B, 0x2000, 100)};
	struct tide_mc_replica_desc k2[] = {MEM(FAILED, EP_A, 0x3000, 100)};
	struct tide_mc_exp_replica_list e[] = {
		{.ok = true, .val = {.replicas = VEC(k0), .lease_ttl_ms = 5000}},
		{.ok = false, .err = TIDE_MC_EC_REPLICA_IS_NOT_READY},
		{.ok = true, .val.replicas = VEC(k2)},
	};
	struct tide_mc_exp_replica_list_vec r = {e, 3};
	char d[8][16];
	struct tide_store_frag fr[8] = {
		{.key = 0, .src_off = 10, .dst = d[0], .len = 16}, /* read */
		{.key = 0, .src_off = 84, .dst = d[1], .len = 16}, /* ends at the end: read */
		{.key = 0, .src_off = 85, .dst = d[2], .len = 16}, /* one byte past */
		{.key = 0, .src_off = 101, .dst = d[3], .len = 0}, /* starts past */
		{.key = 0, .src_off = 100, .dst = d[4], .len = 0}, /* empty at the end */
		{.key = 1, .src_off = 0, .dst = d[5], .len = 1},   /* key's error */
		{.key = 2, .src_off = 0, .dst = d[6], .len = 1},   /* nothing COMPLETE */
		{.key = 4, .src_off = 0, .dst = d[7], .len = 1},   /* past the keys */
	};
	struct store_rkey ki[4];
	struct store_xfer x[8];
	uint32_t next[8], from = 0;
	bool todo[8];
	size_t owner[8], nx;

	store_xfer_rkeys(&r, 4, ki);
	CU_ASSERT(ki[0].err == 0 && ki[0].size == 100 && ki[0].lease_ms == 5000);
	CU_ASSERT(ki[1].err == -EAGAIN && ki[1].reps == NULL);
	CU_ASSERT(ki[2].err == -EAGAIN && ki[2].reps == NULL);
	CU_ASSERT_EQUAL(ki[3].err, -EBADMSG);
	/* The COMPLETE replicas of key 0 in order, skipping the others. */
	CU_ASSERT_EQUAL(store_xfer_next_replica(&ki[0], &from)->buffer_address, 0x1000);
	CU_ASSERT_EQUAL(store_xfer_next_replica(&ki[0], &from)->buffer_address, 0x2000);
	CU_ASSERT_PTR_NULL(store_xfer_next_replica(&ki[0], &from));
	CU_ASSERT_EQUAL(from, 3);

	store_xfer_frags_settle(ki, 4, fr, 8, next, todo);
	CU_ASSERT(todo[0] && todo[1]);
	for (int f = 2; f < 8; f++)
		CU_ASSERT_FALSE(todo[f]);
	CU_ASSERT_EQUAL(fr[2].result, -EINVAL);
	CU_ASSERT_EQUAL(fr[3].result, -EINVAL);
	CU_ASSERT_EQUAL(fr[4].result, 0);
	CU_ASSERT_EQUAL(fr[5].result, -EAGAIN);
	CU_ASSERT_EQUAL(fr[6].result, -EAGAIN);
	CU_ASSERT_EQUAL(fr[7].result, -EINVAL);

	/* Round 1: both from the first COMPLETE replica, at their offsets. */
	nx = store_xfer_frags_round(ki, fr, 8, next, todo, x, owner);
	CU_ASSERT_EQUAL_FATAL(nx, 2);
	CU_ASSERT(owner[0] == 0 && x[0].raddr == 0x1000 + 10 && x[0].len == 16);
	CU_ASSERT(owner[1] == 1 && x[1].raddr == 0x1000 + 84 && x[1].local == d[1]);
	x[0].rc = 0;
	x[1].rc = -ECONNRESET;
	store_xfer_frags_done(x, owner, nx, fr, todo);
	CU_ASSERT(fr[0].result == 16 && !todo[0]);
	CU_ASSERT(fr[1].result == -ECONNRESET && todo[1]);
	/* Round 2: the failed one from the next COMPLETE replica. */
	nx = store_xfer_frags_round(ki, fr, 8, next, todo, x, owner);
	CU_ASSERT_EQUAL_FATAL(nx, 1);
	CU_ASSERT(owner[0] == 1 && x[0].raddr == 0x2000 + 84);
	CU_ASSERT_STRING_EQUAL(x[0].ep, EP_B);
	x[0].rc = -EIO;
	store_xfer_frags_done(x, owner, nx, fr, todo);
	/* Round 3: no replica left: done, with the last error. */
	CU_ASSERT_EQUAL(store_xfer_frags_round(ki, fr, 8, next, todo, x, owner), 0);
	CU_ASSERT_FALSE(todo[1]);
	CU_ASSERT_EQUAL(fr[1].result, -EIO);

	/* Read within the lease: kept; past it (t0 long ago): stale. Errors stay. */
	store_xfer_frags_lease(ki, 4, fr, 8, store_xfer_now_ms());
	CU_ASSERT_EQUAL(fr[0].result, 16);
	store_xfer_frags_lease(ki, 4, fr, 8, store_xfer_now_ms() - 6000);
	CU_ASSERT_EQUAL(fr[0].result, -ESTALE);
	CU_ASSERT_EQUAL(fr[1].result, -EIO);
	CU_ASSERT_EQUAL(fr[4].result, 0);
}

/* ------------------------------------------------------------ transfers between two engines */

/* An engine on loopback kernel sockets; *out is NULL when it could not start. */
static void
engine(struct tide_te **out)
{
	struct tide_te_opts o;

	*out = NULL;
	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	o.connect_timeout_ms = 1000;
	if (tide_te_create(&o, out) != 0)
		return;
	if (tide_te_install_transport(*out, "tcp") != 0) {
		tide_te_destroy(*out);
		*out = NULL;
	}
}

static void
test_run_and_read(void)
{
	enum { SEG = 4096 };
	unsigned char *ours = calloc(1, SEG), *theirs = calloc(1, SEG), local[256], in[256];
	struct tide_te *a, *b;
	struct store_xfer_eng e;
	struct store_xfer x[4];
	uint64_t oa = (uint64_t)(uintptr_t)ours, ta = (uint64_t)(uintptr_t)theirs;
	const char *na, *nb;

	setenv("MC_FORCE_TCP", "1", 1);
	unsetenv("TIDE_DPDK_DEVICE");
	unsetenv("TIDE_NODE_ENV");
	CU_ASSERT_FATAL(ours != NULL && theirs != NULL);
	engine(&a);
	engine(&b);
	CU_ASSERT_FATAL(a != NULL && b != NULL);
	TIDE_UT_OK(tide_te_register(b, theirs, SEG, "cpu:0"));
	na = tide_te_local_name(a);
	nb = tide_te_local_name(b);
	e = (struct store_xfer_eng){.te = a, .seg_base = ours, .seg_size = SEG};
	for (size_t i = 0; i < sizeof(local); i++)
		local[i] = (unsigned char)(i * 7 + 1);

	/* Our own segment (copied here), the peer's (through the engine), an empty
	 * one, and a peer nobody runs: that one fails, the others land. */
	x[0] = (struct store_xfer){.ep = na, .raddr = oa + 100, .local = local, .len = 200};
	x[1] = (struct store_xfer){.ep = nb, .raddr = ta + 1000, .local = local, .len = 256};
	x[2] = (struct store_xfer){.ep = "127.0.0.1:1", .raddr = 0, .local = local, .len = 0};
	x[3] = (struct store_xfer){.ep = "127.0.0.1:1", .raddr = 4096, .local = local, .len = 8};
	CU_ASSERT(store_xfer_run(&e, TIDE_TE_WRITE, x, 4) < 0);
	CU_ASSERT(x[0].rc == 0 && x[1].rc == 0 && x[2].rc == 0);
	CU_ASSERT(x[3].rc < 0);
	CU_ASSERT(memcmp(ours + 100, local, 200) == 0);
	CU_ASSERT(memcmp(theirs + 1000, local, 256) == 0);
	/* Nothing to do at all. */
	CU_ASSERT_EQUAL(store_xfer_run(&e, TIDE_TE_READ, x + 2, 1), 0);

	/* A list: not ready, then a COMPLETE one nobody serves, then the peer's. */
	struct tide_mc_replica_desc r[] = {MEM(PROCESSING, nb, ta, 256),
					   MEM(COMPLETE, "127.0.0.1:1", 4096, 256),
					   MEM(COMPLETE, nb, ta + 1000, 256)};
	struct tide_mc_replica_list l = {.replicas = VEC(r)};

	memset(in, 0, sizeof(in));
	CU_ASSERT_EQUAL(store_xfer_read_replica(&e, &l, in, sizeof(in), store_xfer_now_ms()), 256);
	CU_ASSERT(memcmp(in, local, 256) == 0);
	/* A buffer one byte short of the first COMPLETE replica: refused before any read. */
	CU_ASSERT_EQUAL(store_xfer_read_replica(&e, &l, in, 255, store_xfer_now_ms()), -ENOBUFS);
	/* Read after the lease ran out. */
	l.lease_ttl_ms = 1000;
	CU_ASSERT_EQUAL(store_xfer_read_replica(&e, &l, in, sizeof(in), store_xfer_now_ms() - 5000),
			-ESTALE);
	/* Only the dead one: its error. None COMPLETE: -EAGAIN. */
	l.replicas.n = 2;
	CU_ASSERT(store_xfer_read_replica(&e, &l, in, sizeof(in), store_xfer_now_ms()) < 0);
	l.replicas.n = 1;
	CU_ASSERT_EQUAL(store_xfer_read_replica(&e, &l, in, sizeof(in), store_xfer_now_ms()),
			-EAGAIN);
	tide_te_destroy(a);
	tide_te_destroy(b);
	free(ours);
	free(theirs);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_xfer", NULL, NULL);

	CU_add_test(s, "complete_picks_complete_memory", test_complete_picks_complete_memory);
	CU_add_test(s, "replica_writes_one_per_replica", test_replica_writes_one_per_replica);
	CU_add_test(s, "replica_writes_pieces", test_replica_writes_pieces);
	CU_add_test(s, "replica_size_first_complete", test_replica_size_first_complete);
	CU_add_test(s, "self_copy_bounds", test_self_copy_bounds);
	CU_add_test(s, "put_plan", test_put_plan);
	CU_add_test(s, "get_plan", test_get_plan);
	CU_add_test(s, "ranges_plan", test_ranges_plan);
	CU_add_test(s, "run_and_read", test_run_and_read);
}

TIDE_UT_MAIN(register_tests)
