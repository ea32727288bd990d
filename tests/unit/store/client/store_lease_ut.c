/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_lease.c: a lease's free list (first fit, granule
 * rounding, merging, the bound), and placement and commit against the real
 * master server (store/master/server) in this process: objects land where
 * they were placed, an existing key gives its range back, a lease the master
 * no longer has sends the put the plain way, a master that serves no leases
 * (configured as a stock one) is asked once, and fini gives the space back.
 * No bytes move: commits name ranges nobody wrote, which the master cannot tell.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_lease.h"
#include "store_mc_fixture.h"
#include "tide_ut.h"

#define SEG_BASE 0x7f0000000000ull
#define SEG_SIZE (64ull << 20)

static void
lease_init(struct store_lease *l, uint64_t size, uint64_t granule)
{
	memset(l, 0, sizeof(*l));
	l->size = size;
	l->granule = granule;
	l->fr[0].len = size;
	l->nfree = 1;
}

static void
test_carve_and_free(void)
{
	struct store_lease l;
	uint64_t a, b, c, d;

	lease_init(&l, 4096, 64);
	TIDE_UT_OK(store_lease_carve(&l, 100, &a)); /* 128 */
	TIDE_UT_OK(store_lease_carve(&l, 64, &b));  /* 64 */
	TIDE_UT_OK(store_lease_carve(&l, 1, &c));   /* 64 */
	CU_ASSERT_EQUAL(a, 0);
	CU_ASSERT_EQUAL(b, 128);
	CU_ASSERT_EQUAL(c, 192);
	CU_ASSERT_EQUAL(l.nfree, 1);
	CU_ASSERT_EQUAL(l.fr[0].off, 256);
	CU_ASSERT_EQUAL(store_lease_carve(&l, 4096, &d), -ENOSPC);
	/* b back: a hole; the first fit takes it again. */
	CU_ASSERT_TRUE(store_lease_free(&l, b, 64));
	CU_ASSERT_EQUAL(l.nfree, 2);
	TIDE_UT_OK(store_lease_carve(&l, 60, &d));
	CU_ASSERT_EQUAL(d, 128);
	/* a and c back, then d: all merged into one run from 0. */
	CU_ASSERT_TRUE(store_lease_free(&l, a, 100));
	CU_ASSERT_TRUE(store_lease_free(&l, c, 1));
	CU_ASSERT_EQUAL(l.nfree, 2);
	CU_ASSERT_TRUE(store_lease_free(&l, d, 60));
	CU_ASSERT_EQUAL(l.nfree, 1);
	CU_ASSERT_EQUAL(l.fr[0].off, 0);
	CU_ASSERT_EQUAL(l.fr[0].len, 4096);
	/* Whole lease in one piece, then nothing. */
	TIDE_UT_OK(store_lease_carve(&l, 4096, &a));
	CU_ASSERT_EQUAL(l.nfree, 0);
	CU_ASSERT_EQUAL(store_lease_carve(&l, 1, &b), -ENOSPC);
}

static void
test_free_list_bound(void)
{
	struct store_lease l;
	uint64_t off;

	lease_init(&l, 64ull * 2 * (STORE_LEASE_MAX_FREE + 2), 64);
	for (unsigned i = 0; i < 2 * (STORE_LEASE_MAX_FREE + 2); i++)
		TIDE_UT_OK(store_lease_carve(&l, 64, &off));
	/* Every other granule back: separate runs, up to the bound. */
	for (unsigned i = 0; i < STORE_LEASE_MAX_FREE; i++)
		CU_ASSERT_TRUE(store_lease_free(&l, 128ull * i, 64));
	CU_ASSERT_EQUAL(l.nfree, STORE_LEASE_MAX_FREE);
	CU_ASSERT_FALSE(store_lease_free(&l, 128ull * STORE_LEASE_MAX_FREE, 64));
	CU_ASSERT_EQUAL(l.nfree, STORE_LEASE_MAX_FREE);
	/* A range that merges with a neighbour still fits. */
	CU_ASSERT_TRUE(store_lease_free(&l, 64, 64));
	CU_ASSERT_EQUAL(l.nfree, STORE_LEASE_MAX_FREE - 1);
	CU_ASSERT_EQUAL(l.fr[0].len, 192);
}

/* ------------------------------------------------------------------- against a master */

/* 16 MiB leases in the 64 MiB segment of most cases: a lease may take a whole segment. */
static struct tide_mc_server *
server(bool leases)
{
	return store_mc_fixture_server(leases, 1);
}

static void
mc_open_size(struct store_mc *mc, struct tide_mc_server *srv, uint64_t seg_size)
{
	char addr[64];

	memset(mc, 0, sizeof(*mc));
	tide_mc_pool_init(&mc->pool);
	mc->client_id.first = 0x1234;
	mc->client_id.second = 0x5678;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", tide_mc_server_rpc_port(srv));
	TIDE_UT_OK(store_mc_set_master(mc, addr));
	store_mc_fixture_mount(mc, SEG_BASE, seg_size);
}

static void
mc_open(struct store_mc *mc, struct tide_mc_server *srv)
{
	mc_open_size(mc, srv, SEG_SIZE);
}

static void
mc_close(struct store_mc *mc)
{
	store_mc_reset(mc);
	tide_mc_pool_fini(&mc->pool);
}

/* The end of a case against a master: the leases (released), the calls, the server. */
static void
done(struct store_leases *L, struct store_mc *mc, struct tide_mc_server *srv)
{
	store_leases_fini(L, mc);
	pthread_mutex_destroy(&L->mu);
	mc_close(mc);
	tide_mc_server_stop(srv);
	tide_mc_server_destroy(srv);
}

/* The one replica of key: its address and size (0 when it has none). */
static uint64_t
replica_at(struct store_mc *mc, const char *key, uint64_t *size)
{
	struct tide_mc_resp r;
	uint64_t addr = 0;

	*size = 0;
	if (store_mc_replica_list(mc, key, &r) != 0)
		return 0;
	if (r.u.replica_list.val.replicas.n == 1) {
		addr = r.u.replica_list.val.replicas.v[0].u.memory.buffer_address;
		*size = r.u.replica_list.val.replicas.v[0].u.memory.size;
	}
	tide_mc_resp_free(&r);
	return addr;
}

static void
test_place_commit(void)
{
	struct tide_mc_server *srv = server(true);
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct store_lease *l1, *l2, *l3, *l4;
	struct store_leases L;
	struct store_mc mc;
	uint64_t o1, o2, o3, o4, sz;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	mc_open(&mc, srv);
	store_leases_init(&L, true);
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 100, &l1, &o1));
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 5000, &l2, &o2));
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 64, &l3, &o3));
	CU_ASSERT_EQUAL(L.mode, 1);
	CU_ASSERT(l1 == l2 && l2 == l3);
	CU_ASSERT_EQUAL(l1->size, STORE_LEASE_BYTES);
	CU_ASSERT_EQUAL(l1->inflight, 3);
	CU_ASSERT_STRING_EQUAL(l1->ep, "127.0.0.1:9");
	CU_ASSERT(l1->addr >= SEG_BASE && l1->addr + l1->size <= SEG_BASE + SEG_SIZE);
	CU_ASSERT_EQUAL(o1, 0);
	CU_ASSERT_EQUAL(o2, (100 + l1->granule - 1) / l1->granule * l1->granule);
	CU_ASSERT(o3 >= o2 + 5000);
	/* Committed out of order: each object where it was placed, of its size. */
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l3, "k3", o3, 64, &cfg, NULL),
			STORE_PUT_STORED);
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l1, "k1", o1, 100, &cfg, NULL),
			STORE_PUT_STORED);
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l2, "k2", o2, 5000, &cfg, NULL),
			STORE_PUT_STORED);
	CU_ASSERT_EQUAL(replica_at(&mc, "k1", &sz), l1->addr + o1);
	CU_ASSERT_EQUAL(sz, 100);
	CU_ASSERT_EQUAL(replica_at(&mc, "k2", &sz), l1->addr + o2);
	CU_ASSERT_EQUAL(sz, 5000);
	CU_ASSERT_EQUAL(replica_at(&mc, "k3", &sz), l1->addr + o3);
	CU_ASSERT_EQUAL(l1->inflight, 0);
	/* An existing key: a successful put, nothing changes, the range comes back. */
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 200, &l4, &o4));
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l4, "k1", o4, 200, &cfg, NULL),
			STORE_PUT_EXISTS);
	CU_ASSERT_EQUAL(replica_at(&mc, "k1", &sz), l1->addr + o1);
	CU_ASSERT_EQUAL(sz, 100);
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 200, &l4, &o4));
	CU_ASSERT_EQUAL(o4, o3 + 64); /* the same range again */
	/* A failed write gives it back and retires the lease: the next put gets another. */
	store_lease_giveback(&L, &mc, l4, o4, 200, true);
	CU_ASSERT_PTR_NULL(L.slot[0].cur);
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 200, &l4, &o4));
	CU_ASSERT(l4 != NULL && L.slot[0].cur == l4);
	CU_ASSERT_EQUAL(o4, 0);
	store_lease_giveback(&L, &mc, l4, o4, 200, false);
	/* Too large for a lease, or nothing: the plain way. */
	CU_ASSERT_EQUAL(store_lease_place(&L, &mc, NULL, STORE_LEASE_MAX_OBJ + 1, &l4, &o4),
			-EOPNOTSUPP);
	CU_ASSERT_EQUAL(store_lease_place(&L, &mc, NULL, 0, &l4, &o4), -EOPNOTSUPP);
	done(&L, &mc, srv);
}

/* The master's default share of a 16 MiB segment is 2 MiB: the client takes the smaller lease
 * it is given and asks for the next when it is used up. */
static void
test_segment_share(void)
{
	struct tide_mc_server *srv = store_mc_fixture_server(true, 0);
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	const uint64_t mib = 1ull << 20;
	struct store_leases L;
	struct store_lease *l;
	struct store_mc mc;
	uint64_t off[3], addr[3], sz;
	char key[16];

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	mc_open_size(&mc, srv, 16 * mib);
	store_leases_init(&L, true);
	for (unsigned i = 0; i < 3; i++) {
		TIDE_UT_OK(store_lease_place(&L, &mc, NULL, mib, &l, &off[i]));
		CU_ASSERT_EQUAL(l->size, 2 * mib);
		addr[i] = l->addr;
		snprintf(key, sizeof(key), "share-%u", i);
		CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l, key, off[i], mib, &cfg, NULL),
				STORE_PUT_STORED);
		CU_ASSERT_EQUAL(replica_at(&mc, key, &sz), addr[i] + off[i]);
		CU_ASSERT_EQUAL(sz, mib);
	}
	CU_ASSERT_EQUAL(addr[0], addr[1]);
	CU_ASSERT_EQUAL(off[1], mib);
	CU_ASSERT_NOT_EQUAL(addr[2], addr[0]);
	CU_ASSERT_EQUAL(off[2], 0);
	CU_ASSERT_EQUAL(store_lease_room(&L, NULL), 2 * mib);
	done(&L, &mc, srv);
}

/* A 4 MiB segment gives 512 KiB leases: a 1 MiB object cannot go through one. Once the
 * client knows (the first grant), it does not retire its lease and ask for another
 * one of the same size for each such object: they take the plain put at once. */
static void
test_segment_share_small(void)
{
	struct tide_mc_server *srv = store_mc_fixture_server(true, 0);
	const uint64_t mib = 1ull << 20;
	struct store_leases L;
	struct store_lease *l, *l2;
	struct store_mc mc;
	uint64_t off, id;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	mc_open_size(&mc, srv, 4 * mib);
	store_leases_init(&L, true);
	CU_ASSERT_EQUAL(store_lease_room(&L, NULL), STORE_LEASE_BYTES); /* none granted yet */
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 4096, &l, &off));
	CU_ASSERT_EQUAL(l->size, mib / 2);
	id = l->id;
	store_lease_giveback(&L, &mc, l, off, 4096, false);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(store_lease_place(&L, &mc, NULL, mib, &l2, &off), -EOPNOTSUPP);
	/* The lease is still the current one. */
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 4096, &l2, &off));
	CU_ASSERT_EQUAL(l2->id, id);
	store_lease_giveback(&L, &mc, l2, off, 4096, false);
	CU_ASSERT_EQUAL(store_lease_room(&L, NULL), mib / 2);
	CU_ASSERT_EQUAL(store_lease_room(&L, "elsewhere:1"), STORE_LEASE_BYTES);
	done(&L, &mc, srv);
}

static void
test_lease_gone(void)
{
	struct tide_mc_server *srv = server(true);
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct store_lease *l, *l2;
	struct store_leases L;
	struct store_mc mc;
	uint64_t off, off2, id, sz;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	mc_open(&mc, srv);
	store_leases_init(&L, true);
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 4096, &l, &off));
	id = l->id;
	/* The master lets it go behind our back (expiry, a new leader): the commit
	 * says so, nothing was stored, and the next placement asks for a new one. */
	TIDE_UT_OK(store_mc_lease_release(&mc, id));
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l, "gone", off, 4096, &cfg, NULL),
			STORE_PUT_FALLBACK);
	CU_ASSERT_EQUAL(replica_at(&mc, "gone", &sz), 0);
	CU_ASSERT_PTR_NULL(L.slot[0].cur);
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 4096, &l2, &off2));
	CU_ASSERT_NOT_EQUAL(l2->id, id);
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l2, "gone", off2, 4096, &cfg, NULL),
			STORE_PUT_STORED);
	CU_ASSERT_EQUAL(replica_at(&mc, "gone", &sz), l2->addr + off2);
	/* The master moved (a new leader): the lease is not used again, and released
	 * (here the master that granted it stands for a new leader that granted it
	 * while the move happened): releasing it again finds nothing. */
	id = l2->id;
	store_leases_moved(&L);
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 4096, &l2, &off2));
	CU_ASSERT_NOT_EQUAL(l2->id, id);
	CU_ASSERT_EQUAL(off2, 0);
	CU_ASSERT_NOT_EQUAL(store_mc_lease_release(&mc, id), 0);
	store_lease_giveback(&L, &mc, l2, off2, 4096, false);
	done(&L, &mc, srv);
}

/* fini gives the unused space back: a PutStart of what would not fit beside a lease fits. */
static void
test_fini_releases(void)
{
	struct tide_mc_server *srv = server(true);
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct tide_mc_resp resp;
	struct store_lease *l;
	struct store_leases L;
	struct store_mc mc;
	uint64_t off;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	mc_open(&mc, srv);
	store_leases_init(&L, true);
	TIDE_UT_OK(store_lease_place(&L, &mc, NULL, 4096, &l, &off));
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l, "kept", off, 4096, &cfg, NULL),
			STORE_PUT_STORED);
	CU_ASSERT_EQUAL(store_mc_put_start(&mc, "big", SEG_SIZE - (8ull << 20), &cfg, false, &resp),
			-ENOSPC);
	store_leases_fini(&L, &mc);
	pthread_mutex_destroy(&L.mu);
	TIDE_UT_OK(store_mc_put_start(&mc, "big", SEG_SIZE - (8ull << 20), &cfg, false, &resp));
	tide_mc_resp_free(&resp);
	TIDE_UT_OK(store_mc_put_end(&mc, "big", false, 0));
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "kept"), 1);
	mc_close(&mc);
	tide_mc_server_stop(srv);
	tide_mc_server_destroy(srv);
}

/* A master that registers no lease function (stock's behaviour): asked once, then
 * never again; and leases switched off: never asked. */
static void
test_stock_master_and_off(void)
{
	struct tide_mc_server *srv = server(false);
	struct store_lease *l;
	struct store_leases L;
	struct store_mc mc;
	struct tide_mc_resp resp;
	uint64_t off;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	mc_open(&mc, srv);
	CU_ASSERT_EQUAL(store_mc_lease_grant(&mc, 4096, NULL, &resp), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(store_mc_lease_release(&mc, 1), -EOPNOTSUPP);
	store_leases_init(&L, true);
	CU_ASSERT_EQUAL(store_lease_place(&L, &mc, NULL, 4096, &l, &off), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(L.mode, -1);
	/* The connection the refusal came on still works. */
	CU_ASSERT_EQUAL(store_mc_exist_key(&mc, "x"), 0);
	store_mc_reset(&mc); /* no master at all now: a second placement must not call */
	CU_ASSERT_EQUAL(store_lease_place(&L, &mc, NULL, 4096, &l, &off), -EOPNOTSUPP);
	store_leases_fini(&L, &mc);
	pthread_mutex_destroy(&L.mu);
	store_leases_init(&L, false);
	CU_ASSERT_EQUAL(store_lease_place(&L, &mc, NULL, 4096, &l, &off), -EOPNOTSUPP);
	store_leases_fini(&L, &mc);
	pthread_mutex_destroy(&L.mu);
	tide_mc_pool_fini(&mc.pool);
	tide_mc_server_stop(srv);
	tide_mc_server_destroy(srv);
}

/* One lease per preferred segment asked for; a fifth preference retires the least
 * recently used one's lease (released once idle). */
static void
test_preferences(void)
{
	struct tide_mc_server *srv = server(true);
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct store_lease *l[STORE_LEASE_SLOTS + 1], *again;
	struct store_leases L;
	struct store_mc mc;
	char pref[STORE_LEASE_PREF_MAX + 8];
	uint64_t off, sz;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	mc_open_size(&mc, srv, (STORE_LEASE_SLOTS + 2) * STORE_LEASE_BYTES);
	store_leases_init(&L, true);
	/* The mounted segment's name: the master honours it. */
	TIDE_UT_OK(store_lease_place(&L, &mc, "127.0.0.1:9", 100, &l[0], &off));
	CU_ASSERT_EQUAL(store_lease_commit(&L, &mc, l[0], "pref-0", off, 100, &cfg, NULL),
			STORE_PUT_STORED);
	CU_ASSERT_EQUAL(replica_at(&mc, "pref-0", &sz), l[0]->addr + off);
	for (unsigned i = 1; i <= STORE_LEASE_SLOTS; i++) {
		snprintf(pref, sizeof(pref), "nowhere-%u:1", i);
		/* No such segment: placed elsewhere, as PutStart does with a preference. */
		CU_ASSERT_EQUAL_FATAL(store_lease_place(&L, &mc, pref, 100, &l[i], &off), 0);
		CU_ASSERT(l[i] != l[i - 1]);
		store_lease_giveback(&L, &mc, l[i], off, 100, false);
	}
	/* The first preference was the least recently used: its lease went. */
	CU_ASSERT_EQUAL_FATAL(store_lease_place(&L, &mc, "127.0.0.1:9", 100, &again, &off), 0);
	CU_ASSERT_EQUAL(off, 0);
	store_lease_giveback(&L, &mc, again, off, 100, false);
	memset(pref, 'x', sizeof(pref) - 1);
	pref[sizeof(pref) - 1] = '\0';
	CU_ASSERT_EQUAL(store_lease_place(&L, &mc, pref, 100, &again, &off), -EOPNOTSUPP);
	done(&L, &mc, srv);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_lease", NULL, NULL);

	CU_add_test(s, "carve_and_free", test_carve_and_free);
	CU_add_test(s, "free_list_bound", test_free_list_bound);
	CU_add_test(s, "place_commit", test_place_commit);
	CU_add_test(s, "segment_share", test_segment_share);
	CU_add_test(s, "segment_share_small", test_segment_share_small);
	CU_add_test(s, "lease_gone", test_lease_gone);
	CU_add_test(s, "fini_releases", test_fini_releases);
	CU_add_test(s, "stock_master_and_off", test_stock_master_and_off);
	CU_add_test(s, "preferences", test_preferences);
}

TIDE_UT_MAIN(register_tests)
