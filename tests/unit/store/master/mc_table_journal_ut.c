/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the object table's journal (store/master/mc_table_journal.c):
 * a table driven through mounts, puts, upserts, removes, evictions and
 * unmounts is rebuilt from its records, from a snapshot, and from a
 * snapshot plus the records after it; unacknowledged puts stay out; a
 * rebuilt table allocates around the restored objects; its clients must
 * remount; every malformed record is refused with the table unchanged.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_table_fixture.h"
#include "tide_mc_table.h"
#include "tide_ut.h"

#define MIB   (1024u * 1024u)
#define NKEYS 64

static const struct tide_mc_uuid C1 = {1, 1}, C2 = {2, 2};
/* key/000 .. key/063, put by C1; odd ones carry checksum 0x1000 + i. */
static const struct mc_fixture_objects K = {
	.prefix = "key/", .digits = 3, .owner = &C1, .csum_base = 0x1000};

/* A growable list of records, as a journal or a snapshot hands them over. */
struct reclog {
	uint8_t **rec;
	size_t *len;
	uint64_t *seq;
	size_t n, cap;
	bool lost; /* a NULL record (out of memory) arrived */
};

static void
reclog_add(struct reclog *l, uint64_t seq, const void *rec, size_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->rec = realloc(l->rec, l->cap * sizeof(*l->rec));
		l->len = realloc(l->len, l->cap * sizeof(*l->len));
		l->seq = realloc(l->seq, l->cap * sizeof(*l->seq));
		CU_ASSERT_FATAL(l->rec && l->len && l->seq);
	}
	l->rec[l->n] = malloc(len);
	CU_ASSERT_FATAL(l->rec[l->n] != NULL);
	memcpy(l->rec[l->n], rec, len);
	l->len[l->n] = len;
	l->seq[l->n] = seq;
	l->n++;
}

static void
reclog_free(struct reclog *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->rec[i]);
	free(l->rec);
	free(l->len);
	free(l->seq);
	memset(l, 0, sizeof(*l));
}

static void
on_record(void *ctx, uint64_t seq, const void *rec, size_t len)
{
	struct reclog *l = ctx;

	if (!rec) {
		l->lost = true;
		return;
	}
	reclog_add(l, seq, rec, len);
}

static int
on_snap(void *ctx, const void *rec, size_t len)
{
	reclog_add(ctx, 0, rec, len);
	return 0;
}

static struct tide_mc_table *
mk(void)
{
	return mc_fixture_table(4096);
}

static void
mount(struct tide_mc_table *t, uint64_t id, const char *name, uint64_t base, uint64_t size,
      const struct tide_mc_uuid *c)
{
	mc_fixture_mount(t, (struct tide_mc_uuid){id, id}, name, base, size, c);
}

static void
replay(struct tide_mc_table *t, const struct reclog *l, uint64_t after)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->seq[i] == 0 || l->seq[i] > after)
			CU_ASSERT_EQUAL(tide_mc_table_journal_apply(t, l->rec[i], l->len[i], 0), 0);
}

/* An upsert of key by C1 (two replicas, len bytes): started, then ended or revoked. */
static void
upsert(struct tide_mc_table *t, const char *key, uint64_t len, bool end)
{
	struct tide_mc_table_arena a = {0};
	struct tide_mc_replicate_config cfg;
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_str k = mc_fixture_str(key);

	memset(&cfg, 0, sizeof(cfg));
	cfg.replica_num = 2;
	CU_ASSERT_EQUAL(tide_mc_table_upsert_start(t, &C1, &k, len, &cfg, 0, &a, &d), 0);
	if (end) {
		CU_ASSERT_EQUAL(tide_mc_table_upsert_end(t, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0),
				0);
	} else {
		CU_ASSERT_EQUAL(tide_mc_table_upsert_revoke(t, &C1, &k, TIDE_MC_REPLICA_ALL, 0), 0);
	}
	tide_mc_table_arena_release(&a);
}

/* Drive a table through every journaled change; two segments of C1, one of C2. */
static void
workload(struct tide_mc_table *t)
{
	mount(t, 11, "node-a", 0x10000000, 64 * MIB, &C1);
	mount(t, 12, "node-b", 0x20000000, 64 * MIB, &C1);
	mount(t, 13, "node-c", 0x30000000, 64 * MIB, &C2);
	for (int i = 0; i < 40; i++)
		CU_ASSERT_EQUAL(mc_fixture_put(t, &K, i, 1000u + 4096u * (unsigned)i, 1 + i % 3,
					       i % 7 == 0, true),
				0);
	for (int i = 0; i < 40; i += 5)
		CU_ASSERT_EQUAL(mc_fixture_remove(t, &K, i), 0);
	/* An upsert replaces key 3 (journaled as an erase, then a set). */
	upsert(t, "key/003", 5 * MIB, true);
	/* Same size: in place (an erase when it starts, a set at its end); another
	 * in place that is revoked leaves the key erased, with no more records. */
	upsert(t, "key/004", 1000u + 4096u * 4, true);
	upsert(t, "key/006", 1000u + 4096u * 6, false);
	/* Unmounting node-c drops its replicas: objects keep the others or go. */
	{
		struct tide_mc_uuid id = {13, 13};

		CU_ASSERT_EQUAL(tide_mc_table_unmount_segment(t, &id, &C2, 0), 0);
	}
	/* BatchReplicaClear: key 2 keeps its node-a replica (an erase, then a set), key 7
	 * goes whole. */
	{
		struct tide_mc_table_arena a = {0};
		struct tide_mc_str ks[2] = {mc_fixture_str("key/002"), mc_fixture_str("key/007")};
		struct tide_mc_str seg = mc_fixture_str("node-b"), all = mc_fixture_str("");
		struct tide_mc_str_vec out;

		CU_ASSERT_EQUAL(tide_mc_table_batch_replica_clear(t, &C1, ks, 1, &seg, 0, &a, &out),
				0);
		CU_ASSERT_EQUAL(out.n, 1);
		CU_ASSERT_EQUAL(
			tide_mc_table_batch_replica_clear(t, &C1, ks + 1, 1, &all, 0, &a, &out), 0);
		CU_ASSERT_EQUAL(out.n, 1);
		tide_mc_table_arena_release(&a);
	}
	for (int i = 40; i < 48; i++)
		CU_ASSERT_EQUAL(mc_fixture_put(t, &K, i, 777, 2, false, true), 0);
	/* In flight, never acknowledged: not journaled. */
	for (int i = 48; i < 52; i++)
		CU_ASSERT_EQUAL(mc_fixture_put(t, &K, i, 4096, 1, false, false), 0);
}

static void
test_replay_log(void)
{
	struct tide_mc_table *t = mk(), *r = mk();
	struct reclog l = {0};

	CU_ASSERT_EQUAL(tide_mc_table_journal_set(t, on_record, &l, 100), 0);
	CU_ASSERT_EQUAL(tide_mc_table_journal_seq(t), 100);
	workload(t);
	CU_ASSERT_FALSE(l.lost);
	CU_ASSERT_FATAL(l.n > 40);
	for (size_t i = 0; i < l.n; i++)
		CU_ASSERT_EQUAL(l.seq[i], 101 + i);
	CU_ASSERT_EQUAL(tide_mc_table_journal_seq(t), 100 + l.n);
	/* The last release of space: the last erase (4) or unmount (2); the workload
	 * ends with puts, so it is behind the last record. */
	{
		uint64_t last_free = 100;

		for (size_t i = 0; i < l.n; i++)
			if (l.rec[i][0] == 2 || l.rec[i][0] == 4)
				last_free = l.seq[i];
		CU_ASSERT_EQUAL(tide_mc_table_journal_free_seq(t), last_free);
		CU_ASSERT(last_free > 100 && last_free < 100 + l.n);
	}
	replay(r, &l, 0);
	mc_fixture_assert_same(t, r, &K, NKEYS);
	/* Replaying into a journaled table is refused: it would journal again. */
	CU_ASSERT_EQUAL(tide_mc_table_journal_set(r, on_record, &l, 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[0], l.len[0], 0), -EBUSY);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
	reclog_free(&l);
}

static void
test_snapshot_then_log(void)
{
	struct tide_mc_table *t = mk(), *r = mk(), *r2 = mk();
	struct reclog l = {0}, s = {0};
	uint64_t seq = 0;

	CU_ASSERT_EQUAL(tide_mc_table_journal_set(t, on_record, &l, 0), 0);
	workload(t);
	CU_ASSERT_EQUAL(tide_mc_table_journal_snapshot(t, on_snap, &s, 0, &seq), 0);
	CU_ASSERT_EQUAL(seq, l.n);
	replay(r2, &s, 0);
	mc_fixture_assert_same(t, r2, &K, NKEYS);
	/* More changes after the snapshot: snapshot + the records after seq rebuild it. */
	for (int i = 0; i < 20; i += 2) {
		/* Some are gone already: removed by workload(), or with node-c. */
		int rc = mc_fixture_remove(t, &K, i + 1);

		CU_ASSERT(rc == 0 || rc == TIDE_MC_EC_OBJECT_NOT_FOUND);
	}
	for (int i = 52; i < 60; i++)
		CU_ASSERT_EQUAL(mc_fixture_put(t, &K, i, 64 * 1024, 1, false, true), 0);
	replay(r, &s, 0);
	replay(r, &l, seq);
	mc_fixture_assert_same(t, r, &K, NKEYS);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
	tide_mc_table_destroy(r2);
	reclog_free(&l);
	reclog_free(&s);
}

/* The rebuilt table allocates around what it restored, and its clients must remount. */
static void
test_rebuilt_table_serves(void)
{
	struct tide_mc_table *t = mk(), *r = mk();
	struct tide_mc_table_arena a = {0};
	struct tide_mc_table_metrics mt, mr;
	struct tide_mc_ping_info pi;
	struct reclog l = {0};
	int i;

	CU_ASSERT_EQUAL(tide_mc_table_journal_set(t, on_record, &l, 0), 0);
	mount(t, 21, "only", 0x40000000, 4 * MIB, &C1);
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(mc_fixture_put(t, &K, i, MIB, 1, false, true), 0);
	replay(r, &l, 0);
	tide_mc_table_metrics_get(t, &mt);
	tide_mc_table_metrics_get(r, &mr);
	CU_ASSERT_EQUAL(mt.allocated_bytes, mr.allocated_bytes);
	/* One MiB left: one more fits, a second does not. */
	CU_ASSERT_EQUAL(mc_fixture_put(r, &K, 10, MIB, 1, false, true), 0);
	CU_ASSERT_EQUAL(mc_fixture_put(r, &K, 11, MIB, 1, false, true),
			TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	/* A late PutEnd of another writer is refused as on the old leader. */
	{
		struct tide_mc_str k = mc_fixture_str("key/001");

		CU_ASSERT_EQUAL(tide_mc_table_put_end(r, &C2, &k, NULL, TIDE_MC_REPLICA_ALL, 0),
				TIDE_MC_EC_ILLEGAL_CLIENT);
		CU_ASSERT_EQUAL(tide_mc_table_put_end(r, &C1, &k, NULL, TIDE_MC_REPLICA_ALL, 0), 0);
	}
	CU_ASSERT_EQUAL(tide_mc_table_ping(r, &C1, 1, &pi), 0);
	CU_ASSERT_EQUAL(pi.client_status, TIDE_MC_CLIENT_NEED_REMOUNT);
	{
		struct tide_mc_segment g = mc_fixture_segment((struct tide_mc_uuid){21, 21}, "only",
							      0x40000000, 4 * MIB, "only");

		CU_ASSERT_EQUAL(tide_mc_table_remount_segments(r, &g, 1, &C1, 2), 0);
	}
	CU_ASSERT_EQUAL(tide_mc_table_ping(r, &C1, 3, &pi), 0);
	CU_ASSERT_EQUAL(pi.client_status, TIDE_MC_CLIENT_OK);
	/* A client that never comes back loses its segment at its TTL (10 s default). */
	tide_mc_table_tick(r, 20000);
	tide_mc_table_metrics_get(r, &mr);
	CU_ASSERT_EQUAL(mr.segments, 0);
	CU_ASSERT_EQUAL(mr.keys, 0);
	tide_mc_table_arena_release(&a);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
	reclog_free(&l);
}

/* Every truncation and a corrupted byte of every record leave the table as it was. */
static void
test_malformed_records(void)
{
	struct tide_mc_table *t = mk(), *r = mk();
	struct tide_mc_table_metrics m0, m1;
	struct reclog l = {0};
	uint8_t bad[256];

	CU_ASSERT_EQUAL(tide_mc_table_journal_set(t, on_record, &l, 0), 0);
	mount(t, 31, "seg", 0x50000000, 8 * MIB, &C1);
	CU_ASSERT_EQUAL(mc_fixture_put(t, &K, 1, 4096, 1, true, true), 0);
	CU_ASSERT_EQUAL(mc_fixture_remove(t, &K, 1), 0);
	CU_ASSERT_EQUAL(mc_fixture_put(t, &K, 2, 4096, 1, false, true), 0);
	CU_ASSERT_EQUAL_FATAL(l.n, 4); /* SEG_ADD, OBJ_SET, OBJ_DEL, OBJ_SET */
	tide_mc_table_metrics_get(r, &m0);
	for (size_t i = 0; i < l.n; i++)
		for (size_t cut = 0; cut < l.len[i]; cut++)
			CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[i], cut, 0), -EBADMSG);
	tide_mc_table_metrics_get(r, &m1);
	CU_ASSERT_EQUAL(m1.segments, m0.segments);
	CU_ASSERT_EQUAL(m1.keys, m0.keys);
	/* Unknown type; a trailing byte. */
	bad[0] = 9;
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, bad, 1, 0), -EBADMSG);
	CU_ASSERT_FATAL(l.len[0] < sizeof(bad));
	memcpy(bad, l.rec[0], l.len[0]);
	bad[l.len[0]] = 0;
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, bad, l.len[0] + 1, 0), -EBADMSG);
	/* An object whose segment was never mounted. */
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[3], l.len[3], 0), -ENOENT);
	/* Now in order; then the object again (set twice), and an overlap under another key. */
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[0], l.len[0], 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[0], l.len[0], 0), 0); /* idempotent */
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[3], l.len[3], 0), 0);
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[3], l.len[3], 0), -EEXIST);
	tide_mc_table_metrics_get(r, &m0);
	CU_ASSERT_EQUAL(m0.keys, 1);
	/* key/001 (removed later in the log) sat where the allocator then put key/002: applied
	 * out of order it overlaps, and is refused with the table unchanged. */
	CU_ASSERT_EQUAL(tide_mc_table_journal_apply(r, l.rec[1], l.len[1], 0), -EEXIST);
	tide_mc_table_metrics_get(r, &m1);
	CU_ASSERT_EQUAL(m1.keys, 1);
	CU_ASSERT_EQUAL(m1.allocated_bytes, m0.allocated_bytes);
	tide_mc_table_destroy(t);
	tide_mc_table_destroy(r);
	reclog_free(&l);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_table_journal", NULL, NULL);

	CU_add_test(s, "test_replay_log", test_replay_log);
	CU_add_test(s, "test_snapshot_then_log", test_snapshot_then_log);
	CU_add_test(s, "test_rebuilt_table_serves", test_rebuilt_table_serves);
	CU_add_test(s, "test_malformed_records", test_malformed_records);
}

TIDE_UT_MAIN(register_tests)
