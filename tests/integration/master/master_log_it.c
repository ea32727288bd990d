/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HA master's table journal in etcd (store/master/ha/master_log.c), driven
 * directly against a real etcd: a source table journals into tide-store/<cluster>/
 * under a fence key the test owns (a leader's master_view), and a fresh table
 * rebuilt by tide_master_log_replay() must read the same: every object's
 * replicas, the segments, the counts. Cases: a plain log; snapshots every N
 * records that drop old batches and the previous snapshot; snapshots of
 * several chunks; a log continued on a rebuilt table under a new fence; a
 * moved fence stopping the writer with -ESTALE; a gap, a garbage batch and a
 * garbage snapshot chunk ending a replay early, healed by the next leader's
 * snapshot; tide_master_log_stop() bounded with etcd frozen or down (last:
 * etcd stays down). Each case has its own cluster id; every wait has a deadline.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd_fixture.h"
#include "mc_table_fixture.h"
#include "tide_etcd.h"
#include "tide_master_log.h"
#include "tide_mc_table.h"
#include "tide_ut.h"

#define MIB    (1024u * 1024u)
#define WAIT_S 30.0 /* bound of a wait for the log to put what was journaled in etcd */

static const struct tide_mc_uuid C1 = {1, 1}, C2 = {2, 2};
static struct etcd_fixture fx;
static struct tide_etcd *ec; /* the test's own handle: fences and inspection */

/* One case: its cluster, its fence, and what the log's callbacks reported. */
struct lcase {
	char cluster[48];
	char fence[96];
	struct mc_fixture_objects objs; /* "<cluster>/<i, 6 digits>/", padded; put by C1 */
	struct tide_master_log_opts o;
	_Atomic uint64_t durable; /* last number durable() reported */
	atomic_bool regressed;    /* durable() reported a number not above the previous one */
	atomic_int failed_calls;
	atomic_int failed_err;
};

static void
on_durable(void *arg, uint64_t seq)
{
	struct lcase *c = arg;
	uint64_t prev = atomic_exchange(&c->durable, seq);

	if (seq <= prev)
		atomic_store(&c->regressed, true);
}

static void
on_failed(void *arg, int err)
{
	struct lcase *c = arg;

	atomic_store(&c->failed_err, err);
	atomic_fetch_add(&c->failed_calls, 1);
}

/* (Re)create the fence key: a new create_revision, as a new leader's master_view. */
static void
fence_new(struct lcase *c)
{
	int64_t rev = 0;
	int rc = tide_etcd_delete(ec, c->fence, strlen(c->fence));

	CU_ASSERT(rc == 0 || rc == -ENOENT);
	TIDE_UT_OK(tide_etcd_create(ec, c->fence, strlen(c->fence), "me", 2, 0, &rev));
	CU_ASSERT(rev > c->o.fence_rev);
	c->o.fence_rev = rev;
}

static void
case_init(struct lcase *c, const char *name, uint64_t snapshot_records, size_t key_len)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->cluster, sizeof(c->cluster), "logit-%s", name);
	snprintf(c->fence, sizeof(c->fence), "logit-fence/%s/master_view", name);
	snprintf(c->objs.prefix, sizeof(c->objs.prefix), "%s/", c->cluster);
	c->objs.suffix = "/";
	c->objs.digits = 6;
	c->objs.pad_to = key_len;
	c->objs.owner = &C1;
	c->objs.csum_base = 0xc0de0000u;
	c->o.endpoints = fx.endpoint;
	c->o.cluster_id = c->cluster;
	c->o.fence_key = c->fence;
	c->o.snapshot_records = snapshot_records;
	c->o.durable = on_durable;
	c->o.failed = on_failed;
	c->o.arg = c;
	fence_new(c);
}

/* Journal t into etcd after record last; what the callbacks reported starts over. */
static struct tide_master_log *
log_start(struct lcase *c, struct tide_mc_table *t, uint64_t last, bool snapshot_now)
{
	struct tide_master_log *l = NULL;

	atomic_store(&c->durable, last);
	atomic_store(&c->regressed, false);
	atomic_store(&c->failed_calls, 0);
	atomic_store(&c->failed_err, 0);
	TIDE_UT_OK(tide_master_log_start(&c->o, t, last, snapshot_now, &l));
	CU_ASSERT_PTR_NOT_NULL_FATAL(l);
	CU_ASSERT_EQUAL(tide_mc_table_journal_seq(t), last);
	return l;
}

/* Wait until durable() has reported seq; false after WAIT_S or a failure. */
static bool
wait_durable(struct lcase *c, uint64_t seq)
{
	double deadline = tide_ut_now_s() + WAIT_S;

	while (atomic_load(&c->durable) < seq) {
		if (tide_ut_now_s() > deadline || atomic_load(&c->failed_calls) > 0)
			return false;
		usleep(1000);
	}
	return true;
}

/* Wait until everything t journaled so far is in etcd (a client waiting for its reply). */
static void
sync_log(struct lcase *c, struct tide_mc_table *t)
{
	CU_ASSERT(wait_durable(c, tide_mc_table_journal_seq(t)));
}

/* Wait until the log has written n snapshots; false after WAIT_S. */
static bool
wait_snapshots(struct tide_master_log *l, uint64_t n)
{
	double deadline = tide_ut_now_s() + WAIT_S;
	struct tide_master_log_stats st;

	for (;;) {
		tide_master_log_stats_get(l, &st);
		if (st.snapshots >= n)
			return true;
		if (tide_ut_now_s() > deadline)
			return false;
		usleep(1000);
	}
}

static struct tide_mc_table *
mk(void)
{
	return mc_fixture_table(1u << 16);
}

/* Two segments of two clients: objects of 1 or 2 replicas (a third is best effort). */
static void
mount2(struct tide_mc_table *t)
{
	mc_fixture_mount(t, (struct tide_mc_uuid){11, 111}, "node-a", 0x100000000ull, 512 * MIB,
			 &C1);
	mc_fixture_mount(t, (struct tide_mc_uuid){12, 112}, "node-b", 0x200000000ull, 512 * MIB,
			 &C2);
}

/* Object sizes from 512 B to about 30 KiB. */
static uint64_t
obj_len(int i)
{
	return 512u + 1021u * (unsigned)(i % 31);
}

/* PutStart of object i, and PutEnd when end; returns PutStart's code. Every 7th is
 * hard-pinned, odd ones carry a checksum. */
static int
put(struct tide_mc_table *t, const struct lcase *c, int i, uint64_t len, uint64_t replicas,
    bool end)
{
	return mc_fixture_put(t, &c->objs, i, len, replicas, i % 7 == 0, end);
}

static uint64_t
keys_of(struct tide_mc_table *t)
{
	struct tide_mc_table_metrics m;

	tide_mc_table_metrics_get(t, &m);
	return m.keys - m.processing_keys;
}

/* Rebuild a fresh table from the case's cluster. */
static struct tide_mc_table *
rebuild(struct lcase *c, uint64_t *last, bool *damaged)
{
	struct tide_mc_table *r = mk();

	*last = UINT64_MAX;
	*damaged = true;
	TIDE_UT_OK(tide_master_log_replay(&c->o, r, last, damaged));
	return r;
}

/* Every key (and value) under tide-store/<cluster>/<sub>; free with tide_etcd_kvs_free(). */
static size_t
list_keys(const struct lcase *c, const char *sub, struct tide_etcd_kv **kvs)
{
	char p[160], end[160];
	size_t pl = (size_t)snprintf(p, sizeof(p), "tide-store/%s/%s", c->cluster, sub);
	size_t el = tide_etcd_prefix_end(p, pl, end), n = 0;

	*kvs = NULL;
	TIDE_UT_OK(tide_etcd_range(ec, p, pl, end, el, 0, kvs, &n, NULL, NULL));
	return n;
}

/* The record number in a "<...>/log/<seq>" or "<...>/snap/<seq>-<view>/<chunk>" key. */
static uint64_t
key_seq(const char *key, const char *sub)
{
	const char *s = strstr(key, sub);

	return s != NULL ? strtoull(s + strlen(sub), NULL, 10) : 0;
}

/* What snap_head names: the snapshot's record number and its chunks; false if none. */
static bool
snap_head(const struct lcase *c, uint64_t *seq, uint32_t *chunks)
{
	struct tide_etcd_kv kv;
	char k[160];
	bool ok;

	snprintf(k, sizeof(k), "tide-store/%s/snap_head", c->cluster);
	if (tide_etcd_get(ec, k, strlen(k), &kv, NULL) != 0)
		return false;
	ok = kv.value_len == 24 && memcmp(kv.value, "TJH1", 4) == 0;
	if (ok) {
		uint64_t s;
		uint32_t n;

		memcpy(&s, kv.value + 4, 8);
		memcpy(&n, kv.value + 12, 4);
		*seq = le64toh(s);
		*chunks = le32toh(n);
	}
	tide_etcd_kv_clear(&kv);
	return ok;
}

/* Exactly one snapshot is in etcd, the one snap_head names, with all its chunks;
 * returns its number of chunks. */
static uint32_t
assert_one_snapshot(const struct lcase *c, uint64_t *seq_out)
{
	struct tide_etcd_kv *kvs;
	size_t n = list_keys(c, "snap/", &kvs), other = 0;
	uint64_t seq = 0;
	uint32_t chunks = 0;

	CU_ASSERT(snap_head(c, &seq, &chunks));
	for (size_t i = 0; i < n; i++)
		if (key_seq(kvs[i].key, "/snap/") != seq)
			other++;
	CU_ASSERT_EQUAL(other, 0);
	CU_ASSERT_EQUAL(n, chunks);
	tide_etcd_kvs_free(kvs, n);
	if (seq_out)
		*seq_out = seq;
	return chunks;
}

/* ---- cases ---------------------------------------------------------------------------------- */

static void
test_basic(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r;
	struct tide_master_log *l;
	struct tide_master_log_stats st;
	uint64_t seq, last;
	bool damaged;
	double t0 = tide_ut_now_s(), t1, t2;

	case_init(&c, "basic", 0, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 500; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1 + i % 3, true), 0);
	for (int i = 0; i < 500; i += 5)
		CU_ASSERT_EQUAL(mc_fixture_remove(t, &c.objs, i), 0);
	/* Started, never ended: never acknowledged, so not journaled. */
	for (int i = 505; i < 509; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, 4096, 1, false), 0);
	seq = tide_mc_table_journal_seq(t);
	CU_ASSERT_EQUAL(seq, 2 + 500 + 100);
	CU_ASSERT(wait_durable(&c, seq));
	t1 = tide_ut_now_s();
	tide_master_log_stats_get(l, &st);
	tide_master_log_stop(l);
	CU_ASSERT_EQUAL(atomic_load(&c.durable), seq);
	CU_ASSERT(!atomic_load(&c.regressed));
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 0);
	CU_ASSERT_EQUAL(st.records, seq);
	CU_ASSERT_EQUAL(st.durable, seq);
	CU_ASSERT_EQUAL(st.snapshots, 0);
	CU_ASSERT(st.batches >= 1 && st.batches <= seq);
	r = rebuild(&c, &last, &damaged);
	t2 = tide_ut_now_s();
	CU_ASSERT_EQUAL(last, seq);
	CU_ASSERT(!damaged);
	mc_fixture_assert_same(t, r, &c.objs, 509);
	CU_ASSERT_EQUAL(keys_of(r), 400);
	printf("\n  basic: %" PRIu64 " records in %" PRIu64
	       " batches durable in %.2f s, replay %.3f s",
	       st.records, st.batches, t1 - t0, t2 - t1);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
}

static void
test_snapshots(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r;
	struct tide_master_log *l;
	struct tide_master_log_stats st;
	struct tide_etcd_kv *kvs;
	size_t nlog;
	uint64_t seq, last, snap_seq = 0;
	bool damaged;
	double t0 = tide_ut_now_s();

	case_init(&c, "snap", 200, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 2000; i++) {
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1 + i % 2, true), 0);
		if (i % 4 == 3)
			CU_ASSERT_EQUAL(mc_fixture_remove(t, &c.objs, i - 2), 0);
		/* As clients waiting for their replies would: about 125 records at a
		 * time, so a snapshot follows every other wait. */
		if (i % 100 == 99)
			sync_log(&c, t);
	}
	seq = tide_mc_table_journal_seq(t);
	CU_ASSERT_EQUAL(seq, 2 + 2000 + 500);
	CU_ASSERT(wait_durable(&c, seq));
	tide_master_log_stats_get(l, &st);
	/* A snapshot may still be in flight: the writer finishes it before it stops. */
	tide_master_log_stop(l);
	/* 2500 records at 200: about 12 are due, but a writer does not start one
	 * while another writer's is in flight (then the count starts again). */
	CU_ASSERT(st.snapshots >= 3);
	CU_ASSERT_EQUAL(st.records, seq);
	CU_ASSERT(!atomic_load(&c.regressed));
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 0);
	/* Batches a snapshot covers are gone, and so is every older snapshot. */
	nlog = list_keys(&c, "log/", &kvs);
	CU_ASSERT(nlog < st.batches);
	assert_one_snapshot(&c, &snap_seq);
	CU_ASSERT(snap_seq > 0 && snap_seq <= seq);
	for (size_t i = 0; i < nlog; i++)
		CU_ASSERT(key_seq(kvs[i].key, "/log/") > 0);
	tide_etcd_kvs_free(kvs, nlog);
	r = rebuild(&c, &last, &damaged);
	CU_ASSERT_EQUAL(last, seq);
	CU_ASSERT(!damaged);
	mc_fixture_assert_same(t, r, &c.objs, 2000);
	printf("\n  snapshots: %" PRIu64 " records, %" PRIu64 " batches (%zu left), %" PRIu64
	       " snapshots (last at %" PRIu64 "), %.2f s",
	       st.records, st.batches, nlog, st.snapshots, snap_seq, tide_ut_now_s() - t0);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
}

/* 20000 objects with 100-byte keys: the snapshot is several chunks of at most 1 MiB. */
static void
test_big_snapshot(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r;
	struct tide_master_log *l;
	struct tide_master_log_stats st;
	uint64_t seq, last;
	uint32_t chunks;
	bool damaged;
	double t0 = tide_ut_now_s(), t1, t2;

	/* The first snapshot comes after at least 15000 records: over 2 MiB of table. */
	case_init(&c, "big", 15000, 100);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 20000; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, 64u * (1u + (unsigned)i % 4), 1 + i % 2, true), 0);
	seq = tide_mc_table_journal_seq(t);
	CU_ASSERT(wait_durable(&c, seq));
	t1 = tide_ut_now_s();
	CU_ASSERT(wait_snapshots(l, 1));
	tide_master_log_stats_get(l, &st);
	tide_master_log_stop(l);
	CU_ASSERT(!atomic_load(&c.regressed));
	chunks = assert_one_snapshot(&c, NULL);
	CU_ASSERT(chunks > 1);
	r = rebuild(&c, &last, &damaged);
	t2 = tide_ut_now_s();
	CU_ASSERT_EQUAL(last, seq);
	CU_ASSERT(!damaged);
	mc_fixture_assert_same(t, r, &c.objs, 20000);
	CU_ASSERT_EQUAL(keys_of(r), 20000);
	printf("\n  big: %" PRIu64 " records in %" PRIu64 " batches durable in %.2f s, snapshot"
	       " of %u chunks, replay %.2f s",
	       st.records, st.batches, t1 - t0, chunks, t2 - t1);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
}

/* A new leader goes on from the log it replayed, under its own fence. */
static void
test_continuation(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r2, *r3;
	struct tide_master_log *l;
	struct tide_master_log_stats st;
	struct tide_mc_uuid seg_c = {13, 113};
	uint64_t last1, last2, seq2;
	int64_t rev1;
	bool damaged;

	case_init(&c, "cont", 150, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 400; i++) {
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1 + i % 2, true), 0);
		if (i % 8 == 7)
			CU_ASSERT_EQUAL(mc_fixture_remove(t, &c.objs, i - 7), 0);
		if (i % 50 == 49)
			sync_log(&c, t);
	}
	/* Snapshots are written behind the records: on a loaded machine (ASan, the
	 * other suites) the one due may not be out yet. */
	CU_ASSERT(wait_snapshots(l, 1));
	tide_master_log_stats_get(l, &st);
	tide_master_log_stop(l);
	CU_ASSERT(st.snapshots >= 1);
	r2 = rebuild(&c, &last1, &damaged);
	CU_ASSERT_EQUAL(last1, tide_mc_table_journal_seq(t));
	CU_ASSERT(!damaged);
	mc_fixture_assert_same(t, r2, &c.objs, 400);

	/* The next leader: a new view, numbering on from last1. */
	rev1 = c.o.fence_rev;
	fence_new(&c);
	CU_ASSERT(c.o.fence_rev > rev1);
	l = log_start(&c, r2, last1, false);
	mc_fixture_mount(r2, seg_c, "node-c", 0x300000000ull, 256 * MIB, &C2);
	for (int i = 400; i < 700; i++) {
		CU_ASSERT_EQUAL(put(r2, &c, i, obj_len(i), 1 + i % 3, true), 0);
		if (i % 50 == 49)
			sync_log(&c, r2);
	}
	for (int i = 4; i < 400; i += 8)
		CU_ASSERT_EQUAL(mc_fixture_remove(r2, &c.objs, i), 0);
	/* Replicas on node-c go with it; objects held only there disappear. */
	CU_ASSERT_EQUAL(tide_mc_table_unmount_segment(r2, &seg_c, &C2, 0), 0);
	seq2 = tide_mc_table_journal_seq(r2);
	CU_ASSERT(seq2 > last1 + 300);
	CU_ASSERT(wait_durable(&c, seq2));
	CU_ASSERT(wait_snapshots(l, 1));
	tide_master_log_stats_get(l, &st);
	tide_master_log_stop(l);
	CU_ASSERT(!atomic_load(&c.regressed));
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 0);
	CU_ASSERT_EQUAL(st.records, seq2 - last1);
	CU_ASSERT(st.snapshots >= 1);
	/* The first leader's snapshot went with the second's. */
	assert_one_snapshot(&c, NULL);
	r3 = rebuild(&c, &last2, &damaged);
	CU_ASSERT_EQUAL(last2, seq2);
	CU_ASSERT(!damaged);
	mc_fixture_assert_same(r2, r3, &c.objs, 700);
	printf("\n  continuation: records 1..%" PRIu64 " then %" PRIu64 "..%" PRIu64 ", %" PRIu64
	       " objects",
	       last1, last1 + 1, seq2, keys_of(r3));
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r2);
	tide_mc_table_destroy(r3);
}

/* The fence moves under a running log: its next write fails, nothing more lands. */
static void
test_fencing(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r, *r2;
	struct tide_master_log *l;
	struct tide_master_log_stats st;
	uint64_t seq_x, last;
	bool damaged;
	double t0, dt = -1;
	int err;

	case_init(&c, "fence", 0, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 50; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1 + i % 2, true), 0);
	sync_log(&c, t);
	/* Another master wins the view. */
	fence_new(&c);
	t0 = tide_ut_now_s();
	CU_ASSERT_EQUAL(put(t, &c, 50, 4096, 2, true), 0);
	seq_x = tide_mc_table_journal_seq(t);
	while (atomic_load(&c.failed_calls) == 0 && tide_ut_now_s() < t0 + 10)
		usleep(1000);
	if (atomic_load(&c.failed_calls) > 0)
		dt = tide_ut_now_s() - t0;
	err = atomic_load(&c.failed_err);
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 1);
	CU_ASSERT_EQUAL(err, -ESTALE);
	/* More changes after the failure: failed() is not called again, nothing lands. */
	for (int i = 51; i < 55; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, 4096, 1, true), 0);
	usleep(200 * 1000);
	tide_master_log_stats_get(l, &st);
	tide_master_log_stop(l);
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 1);
	CU_ASSERT(atomic_load(&c.durable) < seq_x);
	CU_ASSERT(st.durable < seq_x);
	CU_ASSERT(!atomic_load(&c.regressed));
	r = rebuild(&c, &last, &damaged);
	CU_ASSERT_EQUAL(last, seq_x - 1);
	CU_ASSERT(!damaged);
	for (int i = 0; i < 50; i++)
		CU_ASSERT(mc_fixture_same_key(t, r, &c.objs, i));
	for (int i = 50; i < 55; i++)
		CU_ASSERT(!mc_fixture_has_key(r, &c.objs, i));
	CU_ASSERT_EQUAL(keys_of(r), 50);
	mc_fixture_assert_same_segments(t, r, false);
	/* The new view's holder journals on. */
	l = log_start(&c, r, last, false);
	CU_ASSERT_EQUAL(put(r, &c, 60, 4096, 1, true), 0);
	sync_log(&c, r);
	tide_master_log_stop(l);
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 0);
	r2 = rebuild(&c, &last, &damaged);
	CU_ASSERT_EQUAL(last, tide_mc_table_journal_seq(r));
	CU_ASSERT(!damaged);
	mc_fixture_assert_same(r, r2, &c.objs, 61);
	printf("\n  fencing: failed(%d) %.3f s after the first put past the fence", err, dt);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
	tide_mc_table_destroy(r2);
}

/* A log batch missing in the middle: the replay keeps the records before the gap. */
static void
test_damage_gap(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r, *r2;
	struct tide_master_log *l;
	struct tide_etcd_kv *kvs;
	uint64_t seq_of[300], gap, seq, last, last2;
	size_t nlog;
	bool damaged;
	int kept = 0, diff = 0;

	case_init(&c, "gap", 0, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 300; i++) {
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1 + i % 2, true), 0);
		seq_of[i] = tide_mc_table_journal_seq(t);
		if (i % 10 == 9)
			sync_log(&c, t);
	}
	seq = tide_mc_table_journal_seq(t);
	tide_master_log_stop(l);
	nlog = list_keys(&c, "log/", &kvs);
	CU_ASSERT_FATAL(nlog >= 3);
	gap = key_seq(kvs[nlog / 2].key, "/log/");
	TIDE_UT_OK(tide_etcd_delete(ec, kvs[nlog / 2].key, kvs[nlog / 2].key_len));
	tide_etcd_kvs_free(kvs, nlog);

	r = rebuild(&c, &last, &damaged);
	CU_ASSERT(damaged);
	CU_ASSERT_EQUAL(last, seq);
	for (int i = 0; i < 300; i++) {
		if (seq_of[i] < gap) {
			kept++;
			diff += !mc_fixture_same_key(t, r, &c.objs, i);
		} else {
			diff += mc_fixture_has_key(r, &c.objs, i);
		}
	}
	CU_ASSERT_EQUAL(diff, 0);
	CU_ASSERT(kept > 0 && kept < 300);
	CU_ASSERT_EQUAL(keys_of(r), (uint64_t)kept);
	mc_fixture_assert_same_segments(t, r, false);

	/* The next leader starts with a snapshot of what it has: the log is whole again. */
	l = log_start(&c, r, last, true);
	CU_ASSERT(wait_snapshots(l, 1));
	for (int i = 300; i < 310; i++)
		CU_ASSERT_EQUAL(put(r, &c, i, obj_len(i), 1, true), 0);
	sync_log(&c, r);
	tide_master_log_stop(l);
	assert_one_snapshot(&c, NULL);
	r2 = rebuild(&c, &last2, &damaged);
	CU_ASSERT(!damaged);
	CU_ASSERT_EQUAL(last2, last + 10);
	mc_fixture_assert_same(r, r2, &c.objs, 310);
	printf("\n  gap: batch at %" PRIu64 " of %zu deleted, %d of 300 objects kept", gap, nlog,
	       kept);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
	tide_mc_table_destroy(r2);
}

/* A garbage value after the last batch: the replay keeps everything before it. */
static void
test_damage_garbage(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r, *r2;
	struct tide_master_log *l;
	char key[160];
	uint64_t seq, last, last2;
	bool damaged;

	case_init(&c, "garbage", 0, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1 + i % 2, true), 0);
	seq = tide_mc_table_journal_seq(t);
	CU_ASSERT(wait_durable(&c, seq));
	tide_master_log_stop(l);
	snprintf(key, sizeof(key), "tide-store/%s/log/00000000000000099999", c.cluster);
	TIDE_UT_OK(tide_etcd_put(ec, key, strlen(key), "not a batch", 11, 0, NULL));

	r = rebuild(&c, &last, &damaged);
	CU_ASSERT(damaged);
	CU_ASSERT_EQUAL(last, seq);
	mc_fixture_assert_same(t, r, &c.objs, 100);

	l = log_start(&c, r, last, true);
	CU_ASSERT(wait_snapshots(l, 1));
	for (int i = 100; i < 110; i++)
		CU_ASSERT_EQUAL(put(r, &c, i, obj_len(i), 1, true), 0);
	sync_log(&c, r);
	tide_master_log_stop(l);
	r2 = rebuild(&c, &last2, &damaged);
	/* The snapshot the damaged replay called for heals the log. */
	CU_ASSERT(!damaged);
	CU_ASSERT_EQUAL(last2, last + 10);
	mc_fixture_assert_same(r, r2, &c.objs, 110);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
	tide_mc_table_destroy(r2);
}

/* A garbage chunk in a snapshot of several: the replay keeps the chunks before it. */
static void
test_damage_snapshot_chunk(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk(), *r0, *r, *r2;
	struct tide_master_log *l;
	struct tide_etcd_kv *kvs;
	char key[160];
	uint64_t seq, snap_seq = 0, last;
	uint32_t chunks;
	size_t nlog;
	bool damaged;
	int kept = 0, diff = 0;

	/* 3000 objects with 1000-byte keys: a snapshot of 3 MiB or more. */
	case_init(&c, "snapdmg", 0, 1000);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 3000; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, 64, 1 + i % 2, true), 0);
	seq = tide_mc_table_journal_seq(t);
	CU_ASSERT(wait_durable(&c, seq));
	tide_master_log_stop(l);
	/* A log started with snapshot_now snapshots at once: no record after it. */
	l = log_start(&c, t, seq, true);
	CU_ASSERT(wait_snapshots(l, 1));
	tide_master_log_stop(l);
	chunks = assert_one_snapshot(&c, &snap_seq);
	CU_ASSERT(chunks >= 3);
	CU_ASSERT_EQUAL(snap_seq, seq);
	nlog = list_keys(&c, "log/", &kvs);
	CU_ASSERT_EQUAL(nlog, 0);
	tide_etcd_kvs_free(kvs, nlog);
	r0 = rebuild(&c, &last, &damaged);
	CU_ASSERT(!damaged);
	CU_ASSERT_EQUAL(last, seq);
	mc_fixture_assert_same(t, r0, &c.objs, 3000);

	/* The second chunk, by its name in etcd (it carries the writer's view). */
	nlog = list_keys(&c, "snap/", &kvs);
	CU_ASSERT_FATAL(nlog >= 2);
	snprintf(key, sizeof(key), "%s", kvs[1].key);
	tide_etcd_kvs_free(kvs, nlog);
	CU_ASSERT(key_seq(key, "/snap/") == seq && strstr(key, "/000001") != NULL);
	TIDE_UT_OK(tide_etcd_put(ec, key, strlen(key), "not a chunk", 11, 0, NULL));
	r = rebuild(&c, &last, &damaged);
	CU_ASSERT(damaged);
	CU_ASSERT_EQUAL(last, seq);
	for (int i = 0; i < 3000; i++) {
		if (mc_fixture_has_key(r, &c.objs, i)) {
			kept++;
			diff += !mc_fixture_same_key(t, r, &c.objs, i);
		}
	}
	CU_ASSERT_EQUAL(diff, 0);
	CU_ASSERT(kept > 0 && kept < 3000);
	mc_fixture_assert_same_segments(t, r, false);

	l = log_start(&c, r, last, true);
	CU_ASSERT(wait_snapshots(l, 1));
	tide_master_log_stop(l);
	r2 = rebuild(&c, &last, &damaged);
	/* The snapshot the damaged replay called for replaces the damaged one. */
	CU_ASSERT(!damaged);
	mc_fixture_assert_same(r, r2, &c.objs, 3000);
	assert_one_snapshot(&c, NULL);
	printf("\n  snapshot chunk: %u chunks, %d of 3000 objects kept before the damaged one",
	       chunks, kept);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r0);
	tide_mc_table_destroy(r);
	tide_mc_table_destroy(r2);
}

/*
 * kill() only queues SIGSTOP: wait (at most 2 s) until every thread of pid is stopped
 * (state T in /proc/PID/stat), so no record the test puts next can still reach etcd.
 */
static bool
wait_stopped(pid_t pid)
{
	char path[64], buf[512];
	double until = tide_ut_now_s() + 2.0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	while (tide_ut_now_s() < until) {
		FILE *f = fopen(path, "r");
		size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		const char *rp;

		if (f != NULL)
			fclose(f);
		buf[n] = '\0';
		rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
		if (rp != NULL && rp[1] == ' ' && (rp[2] == 'T' || rp[2] == 't'))
			return true;
		usleep(1000);
	}
	return false;
}

/* Records pending and etcd frozen (SIGSTOP), then down: stop returns within a bound. */
static void
test_stop_etcd_unreachable(void)
{
	struct lcase c;
	struct tide_mc_table *t = mk();
	struct tide_master_log *l;
	double t0, frozen, down;

	case_init(&c, "frozen", 0, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1, true), 0);
	sync_log(&c, t);
	CU_ASSERT_EQUAL_FATAL(kill(fx.pid, SIGSTOP), 0);
	CU_ASSERT_FATAL(wait_stopped(fx.pid));
	for (int i = 10; i < 20; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1, true), 0);
	usleep(300 * 1000);
	t0 = tide_ut_now_s();
	tide_master_log_stop(l);
	frozen = tide_ut_now_s() - t0;
	kill(fx.pid, SIGCONT);
	/* One etcd call's deadline (3 s) and a margin. */
	CU_ASSERT(frozen < 6.0);
	CU_ASSERT(atomic_load(&c.durable) < tide_mc_table_journal_seq(t));
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 0);
	tide_mc_table_destroy(t);

	t = mk();
	case_init(&c, "down", 0, 0);
	l = log_start(&c, t, 0, false);
	mount2(t);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1, true), 0);
	sync_log(&c, t);
	etcd_fixture_stop(&fx);
	for (int i = 10; i < 20; i++)
		CU_ASSERT_EQUAL(put(t, &c, i, obj_len(i), 1, true), 0);
	usleep(300 * 1000);
	t0 = tide_ut_now_s();
	tide_master_log_stop(l);
	down = tide_ut_now_s() - t0;
	/* Refused at once: the writer sees the stop between two attempts. */
	CU_ASSERT(down < 2.0);
	CU_ASSERT(atomic_load(&c.durable) < tide_mc_table_journal_seq(t));
	CU_ASSERT_EQUAL(atomic_load(&c.failed_calls), 0);
	printf("\n  stop with records pending: %.3f s with etcd frozen, %.3f s with etcd down",
	       frozen, down);
	tide_mc_table_destroy(t);
}

static int
suite_init(void)
{
	if (etcd_fixture_start(&fx) != 0)
		return -1;
	return tide_etcd_open(fx.endpoint, 5000, &ec) == 0 ? 0 : -1;
}

static int
suite_clean(void)
{
	if (fx.pid > 0)
		kill(fx.pid, SIGCONT); /* a frozen etcd could not take its SIGTERM */
	tide_etcd_close(ec);
	etcd_fixture_destroy(&fx);
	return 0;
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("master_log_it", suite_init, suite_clean);

	CU_add_test(s, "basic", test_basic);
	CU_add_test(s, "snapshots", test_snapshots);
	CU_add_test(s, "big_snapshot", test_big_snapshot);
	CU_add_test(s, "continuation", test_continuation);
	CU_add_test(s, "fencing", test_fencing);
	CU_add_test(s, "damage_gap", test_damage_gap);
	CU_add_test(s, "damage_garbage", test_damage_garbage);
	CU_add_test(s, "damage_snapshot_chunk", test_damage_snapshot_chunk);
	/* Last: etcd stays down. */
	CU_add_test(s, "stop_etcd_unreachable", test_stop_etcd_unreachable);
}

TIDE_UT_MAIN(register_tests)
