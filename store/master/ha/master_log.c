/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table journal in etcd (see tide_master_log.h): a writer thread that
 * group-commits records as fenced transactions and snapshots the table every
 * so many records, and the replay a new leader runs before it serves.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tide_buf.h"
#include "tide_clock.h"
#include "tide_etcd.h"
#include "tide_log.h"
#include "tide_master_ha.h"
#include "tide_master_log.h"

#define ETCD_CALL_MS 3000u /* per call: a snapshot chunk is up to 1 MiB */
#define RETRY_MS     100u  /* between attempts of a failed write */
#define PAGE         16    /* values per range read: 16 MiB at most, under the reply cap */
#define BATCH_HDR    16u   /* "TJL1" + first seq + count */
#define SNAP_HDR     8u    /* "TJS1" + count */
#define KEY_MAX      384u

/* A growing byte buffer of length-prefixed records. */
struct rbuf {
	uint8_t *p;
	size_t len, cap;
	uint32_t count;
};

/*
 * Writers: each takes what is pending and writes it as its own transaction,
 * so one commit's latency does not queue the next (with one writer a change
 * that arrives during a commit waits for it and then for its own). Takes are
 * numbered in order under the lock; a range becomes durable once it and every
 * range before it are in etcd. A leader that dies with a later range written
 * and an earlier one not leaves a gap: the replay stops there (only ranges
 * before it were ever acknowledged) and heals the log.
 */
#define NWRITERS 2

struct writer {
	struct tide_master_log *l;
	struct tide_etcd *e;
	pthread_t th;
	bool started;
};

/* A written range not yet durable (an earlier one is still in flight). */
struct done_range {
	uint64_t first, last;
};

struct tide_master_log {
	struct tide_master_log_opts o;
	char *fence_key, *endpoints;
	char prefix[KEY_MAX / 2];
	struct tide_mc_table *t;
	struct writer w[NWRITERS];

	pthread_mutex_t lock; /* guards pend, pend_first, stop, broken, done, snapping */
	pthread_cond_t cond;
	struct rbuf pend;
	uint64_t pend_first; /* number of pend's first record */
	bool stop;
	bool broken;        /* a record was lost: nothing more may be acknowledged */
	atomic_bool failed; /* failed() called */
	struct done_range done[NWRITERS * 4];
	unsigned ndone;
	bool snapping; /* one snapshot at a time */

	uint64_t since_snap;
	_Atomic uint64_t records, batches, snapshots, durable;
};

static void
put_le32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void
put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint32_t
get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t
get_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static int
rbuf_reserve(struct rbuf *b, size_t more)
{
	void *p = b->p;
	int rc = tide_grow(&p, &b->cap, b->len, more, 64 * 1024, 0);

	b->p = p;
	return rc == 0 ? 0 : -ENOMEM;
}

static int
rbuf_add(struct rbuf *b, const void *rec, size_t len)
{
	if (rbuf_reserve(b, 4 + len) != 0)
		return -ENOMEM;
	put_le32(b->p + b->len, (uint32_t)len);
	memcpy(b->p + b->len + 4, rec, len);
	b->len += 4 + len;
	b->count++;
	return 0;
}

/* "tide-store/<cluster>/": the same cluster name rules as master_view's key. */
static int
make_prefix(const char *cluster, char *buf, size_t n)
{
	return tide_master_ha_cluster_path("tide-store", cluster, "", buf, n);
}

static void
fail(struct tide_master_log *l, int err)
{
	bool was = atomic_exchange(&l->failed, true);

	if (!was && l->o.failed)
		l->o.failed(l->o.arg, err);
}

/* ---- the journal callback (table lock held: copy and go) ---------------------------------- */

static void
on_record(void *ctx, uint64_t seq, const void *rec, size_t len)
{
	struct tide_master_log *l = ctx;
	bool lost = false;

	pthread_mutex_lock(&l->lock);
	if (!rec || 4 + len + BATCH_HDR > TIDE_MASTER_LOG_VALUE_MAX || l->broken) {
		if (rec)
			TIDE_LOG(ERR, "HA log: record %" PRIu64 " of %zu bytes exceeds %u", seq,
				 len, TIDE_MASTER_LOG_VALUE_MAX);
		lost = !l->broken;
		l->broken = true;
	} else {
		if (l->pend.count == 0)
			l->pend_first = seq;
		if (rbuf_add(&l->pend, rec, len) != 0) {
			TIDE_LOG(ERR, "HA log: out of memory keeping record %" PRIu64, seq);
			lost = true;
			l->broken = true;
		}
		pthread_cond_signal(&l->cond);
	}
	pthread_mutex_unlock(&l->lock);
	if (lost)
		fail(l, -ENOMEM);
}

/* ---- etcd writes ---------------------------------------------------------------------------- */

/* "<prefix>log/<seq>", or the log's prefix with seq 0. */
static size_t
key_log(const char *prefix, char *buf, uint64_t seq)
{
	int n = seq ? snprintf(buf, KEY_MAX, "%slog/%020" PRIu64, prefix, seq)
		    : snprintf(buf, KEY_MAX, "%slog/", prefix);

	return (size_t)n;
}

/*
 * "<prefix>snap/<seq>-<view>/<chunk>", or that snapshot's prefix with chunk < 0.
 * The writer's view is in the name so that a snapshot at the same record by
 * another leader (a heal of a log that ends at the snapshot) never overwrites
 * the chunks snap_head still names.
 */
static size_t
key_snap(const char *prefix, char *buf, uint64_t seq, int64_t view, int chunk)
{
	int n = chunk >= 0 ? snprintf(buf, KEY_MAX, "%ssnap/%020" PRIu64 "-%020" PRId64 "/%06d",
				      prefix, seq, view, chunk)
			   : snprintf(buf, KEY_MAX, "%ssnap/%020" PRIu64 "-%020" PRId64 "/", prefix,
				      seq, view);

	return (size_t)n;
}

static bool
stopping(struct tide_master_log *l)
{
	bool s;

	pthread_mutex_lock(&l->lock);
	s = l->stop;
	pthread_mutex_unlock(&l->lock);
	return s;
}

/*
 * One fenced transaction, retried on transport errors until it is applied,
 * fenced out or the log stops. 0 applied; -ESTALE fenced; -ECANCELED stopped;
 * another error etcd answered with (-EPROTO, -EBADMSG, ...).
 */
static int
fenced(struct tide_master_log *l, struct tide_etcd *e, const struct tide_etcd_op *ops, size_t n,
       int64_t *rev)
{
	for (;;) {
		int rc = tide_etcd_txn_if_created(e, l->fence_key, strlen(l->fence_key),
						  l->o.fence_rev, ops, n, rev);

		/* etcd refused it (an answer, not a lost connection): retrying would
		 * hold every reply forever; the master steps down instead. */
		if (rc == 0 || rc == -ESTALE ||
		    (rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -ECONNRESET))
			return rc;
		TIDE_LOG_RATELIMIT(WARN, 5, "HA log: etcd write failed (%s): retrying",
				   strerror(-rc));
		if (stopping(l))
			return -ECANCELED;
		usleep(RETRY_MS * 1000u);
	}
}

/* Records [first, last] are in etcd: move the durable mark over every range now contiguous. */
static int
range_done(struct tide_master_log *l, uint64_t first, uint64_t last)
{
	uint64_t d, was;
	bool moved = true;

	pthread_mutex_lock(&l->lock);
	was = d = atomic_load(&l->durable);
	if (first != d + 1) {
		/* Behind a range still in flight. A stalled writer lets the other write
		 * many ranges meanwhile, each following the one before: they merge, so
		 * the table holds at most one entry per gap (one per writer). */
		for (unsigned i = 0; i < l->ndone; i++) {
			if (l->done[i].last + 1 == first) {
				l->done[i].last = last;
				pthread_mutex_unlock(&l->lock);
				return 0;
			}
			if (last + 1 == l->done[i].first) {
				l->done[i].first = first;
				pthread_mutex_unlock(&l->lock);
				return 0;
			}
		}
		if (l->ndone == sizeof(l->done) / sizeof(l->done[0])) {
			pthread_mutex_unlock(&l->lock);
			return -EOVERFLOW;
		}
		l->done[l->ndone++] = (struct done_range){first, last};
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	d = last;
	while (moved) {
		moved = false;
		for (unsigned i = 0; i < l->ndone; i++) {
			if (l->done[i].first == d + 1) {
				d = l->done[i].last;
				l->done[i] = l->done[--l->ndone];
				moved = true;
				break;
			}
		}
	}
	atomic_store(&l->durable, d);
	pthread_mutex_unlock(&l->lock);
	if (d > was && l->o.durable)
		l->o.durable(l->o.arg, d);
	return 0;
}

/* Write records [first, first + b->count) of b as batches of at most VALUE_MAX. */
static int
write_batches(struct tide_master_log *l, struct tide_etcd *e, const struct rbuf *b, uint64_t first)
{
	size_t off = 0;

	while (off < b->len) {
		size_t end = off, vlen;
		uint32_t n = 0;
		uint8_t *val;
		char key[KEY_MAX];
		struct tide_etcd_op op;
		int rc;

		while (end < b->len) {
			size_t r = 4 + (size_t)get_le32(b->p + end);

			if (n > 0 && BATCH_HDR + (end - off) + r > TIDE_MASTER_LOG_VALUE_MAX)
				break;
			end += r;
			n++;
		}
		vlen = BATCH_HDR + (end - off);
		val = malloc(vlen);
		if (!val)
			return -ENOMEM;
		memcpy(val, "TJL1", 4);
		put_le64(val + 4, first);
		put_le32(val + 12, n);
		memcpy(val + BATCH_HDR, b->p + off, end - off);
		memset(&op, 0, sizeof(op));
		op.type = TIDE_ETCD_OP_PUT;
		op.key = key;
		op.key_len = key_log(l->prefix, key, first);
		op.value = val;
		op.value_len = vlen;
		rc = fenced(l, e, &op, 1, NULL);
		free(val);
		if (rc != 0)
			return rc;
		rc = range_done(l, first, first + n - 1);
		if (rc != 0)
			return rc;
		first += n;
		off = end;
		atomic_fetch_add(&l->records, n);
		atomic_fetch_add(&l->batches, 1);
	}
	return 0;
}

/* Snapshot chunks being built. */
struct snap {
	struct rbuf *c;
	size_t n, cap;
};

static int
snap_add(void *ctx, const void *rec, size_t len)
{
	struct snap *s = ctx;
	struct rbuf *cur = s->n ? &s->c[s->n - 1] : NULL;

	if (!cur || SNAP_HDR + cur->len + 4 + len > TIDE_MASTER_LOG_VALUE_MAX) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 8;
			struct rbuf *c = realloc(s->c, cap * sizeof(*c));

			if (!c)
				return -ENOMEM;
			s->c = c;
			s->cap = cap;
		}
		cur = &s->c[s->n++];
		memset(cur, 0, sizeof(*cur));
		if (rbuf_reserve(cur, SNAP_HDR) != 0)
			return -ENOMEM;
		cur->len = SNAP_HDR;
	}
	if (SNAP_HDR + 4 + len > TIDE_MASTER_LOG_VALUE_MAX)
		return -EMSGSIZE;
	return rbuf_add(cur, rec, len);
}

static void
snap_free(struct snap *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->c[i].p);
	free(s->c);
}

/*
 * Write the table as of now, point snap_head at it, and drop what it makes
 * useless: log batches up to the last durable record (the whole log with
 * whole_log), every other snapshot's chunks and etcd's history before it.
 */
static int
snapshot(struct tide_master_log *l, struct tide_etcd *e, bool whole_log)
{
	uint64_t durable = atomic_load(&l->durable), seq = 0, t0 = tide_mono_ns();
	struct snap s = {0};
	struct tide_etcd_op ops[4];
	char key[KEY_MAX], lo[KEY_MAX], hi[KEY_MAX];
	uint8_t head[24];
	int64_t rev = 0;
	int rc;

	rc = tide_mc_table_journal_snapshot(l->t, snap_add, &s, tide_mono_ns() / 1000000u, &seq);
	for (size_t i = 0; rc == 0 && i < s.n; i++) {
		if (stopping(l)) {
			rc = -ECANCELED; /* a stop is not held up by a large snapshot */
			break;
		}
		memcpy(s.c[i].p, "TJS1", 4);
		put_le32(s.c[i].p + 4, s.c[i].count);
		memset(ops, 0, sizeof(ops));
		ops[0].type = TIDE_ETCD_OP_PUT;
		ops[0].key = key;
		ops[0].key_len = key_snap(l->prefix, key, seq, l->o.fence_rev, (int)i);
		ops[0].value = s.c[i].p;
		ops[0].value_len = s.c[i].len;
		rc = fenced(l, e, ops, 1, NULL);
	}
	if (rc == 0) {
		char s0[KEY_MAX], s1[KEY_MAX], s2[KEY_MAX], s3[KEY_MAX];
		size_t n0, n1, n2, n3;

		memcpy(head, "TJH1", 4);
		put_le64(head + 4, seq);
		put_le32(head + 12, (uint32_t)s.n);
		put_le64(head + 16, (uint64_t)l->o.fence_rev);
		memset(ops, 0, sizeof(ops));
		ops[0].type = TIDE_ETCD_OP_PUT;
		ops[0].key = key;
		ops[0].key_len = (size_t)snprintf(key, sizeof(key), "%ssnap_head", l->prefix);
		ops[0].value = head;
		ops[0].value_len = sizeof(head);
		/* Batches that start at or before the durable mark end there (batches are
		 * written in order), so the snapshot holds all of them. A first snapshot
		 * that heals a damaged log drops the whole log: every readable record in
		 * it is older than this snapshot, and what could not be read (a key
		 * beyond the last record) must not damage the next replay too. */
		ops[1].type = TIDE_ETCD_OP_DELETE;
		ops[1].key = lo;
		ops[1].key_len = key_log(l->prefix, lo, 0);
		ops[1].range_end = hi;
		ops[1].range_end_len = whole_log ? tide_etcd_prefix_end(lo, ops[1].key_len, hi)
						 : key_log(l->prefix, hi, durable + 1);
		/* Every other snapshot's chunks: older ones, chunks past this one's count
		 * (an earlier snapshot at the same record), and those of a writer that
		 * stopped between its chunks and its head. snap_head sorts after them. */
		n0 = (size_t)snprintf(s0, sizeof(s0), "%ssnap/", l->prefix);
		n1 = key_snap(l->prefix, s1, seq, l->o.fence_rev, -1);
		n2 = key_snap(l->prefix, s2, seq, l->o.fence_rev, (int)s.n);
		n3 = tide_etcd_prefix_end(s0, n0, s3);
		ops[2].type = TIDE_ETCD_OP_DELETE;
		ops[2].key = s0;
		ops[2].key_len = n0;
		ops[2].range_end = s1;
		ops[2].range_end_len = n1;
		ops[3].type = TIDE_ETCD_OP_DELETE;
		ops[3].key = s2;
		ops[3].key_len = n2;
		ops[3].range_end = s3;
		ops[3].range_end_len = n3;
		rc = fenced(l, e, ops, 4, &rev);
	}
	if (rc == 0) {
		atomic_fetch_add(&l->snapshots, 1);
		/* etcd keeps every revision until compacted: the log would grow without it. */
		if (rev > 0 && tide_etcd_compact(e, rev) != 0)
			TIDE_LOG(WARN, "HA log: etcd compaction at %" PRId64 " failed", rev);
		TIDE_LOG(INFO, "HA log: snapshot at record %" PRIu64 ": %zu chunk(s), %.1f ms", seq,
			 s.n, (double)(tide_mono_ns() - t0) / 1e6);
	}
	snap_free(&s);
	return rc;
}

static void *
writer_main(void *arg)
{
	struct writer *w = arg;
	struct tide_master_log *l = w->l;
	uint64_t threshold =
		l->o.snapshot_records ? l->o.snapshot_records : TIDE_MASTER_LOG_SNAPSHOT_RECORDS;
	struct rbuf mine = {0};
	int rc = 0;

	while (rc == 0) {
		uint64_t first;
		bool snap = false;

		pthread_mutex_lock(&l->lock);
		while (l->pend.count == 0 && !l->stop && !l->broken)
			pthread_cond_wait(&l->cond, &l->lock);
		if (l->stop || l->broken) {
			pthread_mutex_unlock(&l->lock);
			break;
		}
		/* Take everything that arrived: one group commit. */
		mine.len = 0;
		mine.count = 0;
		{
			struct rbuf t = l->pend;

			l->pend = mine;
			mine = t;
		}
		first = l->pend_first;
		l->since_snap += mine.count;
		if (l->since_snap >= threshold && !l->snapping) {
			l->since_snap = 0;
			l->snapping = snap = true;
		}
		pthread_mutex_unlock(&l->lock);
		rc = write_batches(l, w->e, &mine, first);
		if (rc == 0 && snap)
			rc = snapshot(l, w->e, false);
		if (snap) {
			pthread_mutex_lock(&l->lock);
			l->snapping = false;
			pthread_mutex_unlock(&l->lock);
		}
	}
	free(mine.p);
	if (rc != 0 && rc != -ECANCELED) {
		/* Nothing more will be written: stop keeping records, stop the other writers. */
		pthread_mutex_lock(&l->lock);
		l->broken = true;
		free(l->pend.p);
		memset(&l->pend, 0, sizeof(l->pend));
		pthread_cond_broadcast(&l->cond);
		pthread_mutex_unlock(&l->lock);
	}
	if (rc == -ESTALE) {
		TIDE_LOG(ERR,
			 "HA log: master_view is no longer ours (view %" PRId64
			 "): another master leads; not writing",
			 l->o.fence_rev);
		fail(l, rc);
	} else if (rc != 0 && rc != -ECANCELED) {
		TIDE_LOG(ERR, "HA log: writer stopped: %s", strerror(-rc));
		fail(l, rc);
	}
	return NULL;
}

int
tide_master_log_start(const struct tide_master_log_opts *o, struct tide_mc_table *t,
		      uint64_t last_seq, bool snapshot_now, struct tide_master_log **out)
{
	struct tide_master_log *l;
	int rc;

	if (!o || !t || !out || !o->endpoints || !o->fence_key || o->fence_rev <= 0)
		return -EINVAL;
	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->o = *o;
	l->t = t;
	atomic_store(&l->durable, last_seq);
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->fence_key = strdup(o->fence_key);
	l->endpoints = strdup(o->endpoints);
	l->o.fence_key = l->fence_key;
	l->o.endpoints = l->endpoints;
	rc = !l->fence_key || !l->endpoints
		     ? -ENOMEM
		     : make_prefix(o->cluster_id, l->prefix, sizeof(l->prefix));
	for (int i = 0; rc == 0 && i < NWRITERS; i++) {
		l->w[i].l = l;
		rc = tide_etcd_open(l->endpoints, ETCD_CALL_MS, &l->w[i].e);
	}
	if (rc == 0)
		rc = tide_mc_table_journal_set(t, on_record, l, last_seq);
	/* Heal a damaged log before any writer adds to it (the heal drops the whole
	 * log; records made meanwhile wait in pend). */
	if (rc == 0 && snapshot_now) {
		rc = snapshot(l, l->w[0].e, true);
		if (rc != 0)
			TIDE_LOG(ERR, "HA log: cannot rewrite the damaged log: %s", strerror(-rc));
	}
	for (int i = 0; rc == 0 && i < NWRITERS; i++) {
		rc = -pthread_create(&l->w[i].th, NULL, writer_main, &l->w[i]);
		l->w[i].started = rc == 0;
	}
	if (rc != 0) {
		tide_master_log_stop(l);
		return rc;
	}
	*out = l;
	return 0;
}

void
tide_master_log_stop(struct tide_master_log *l)
{
	if (!l)
		return;
	/* No record reaches this log after this returns (the table's lock orders it). */
	(void)tide_mc_table_journal_set(l->t, NULL, NULL, tide_mc_table_journal_seq(l->t));
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	for (int i = 0; i < NWRITERS; i++) {
		if (l->w[i].started)
			pthread_join(l->w[i].th, NULL);
		tide_etcd_close(l->w[i].e);
	}
	free(l->pend.p);
	free(l->fence_key);
	free(l->endpoints);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	free(l);
}

void
tide_master_log_stats_get(struct tide_master_log *l, struct tide_master_log_stats *st)
{
	st->records = atomic_load(&l->records);
	st->batches = atomic_load(&l->batches);
	st->snapshots = atomic_load(&l->snapshots);
	st->durable = atomic_load(&l->durable);
}

/* ---- replay ------------------------------------------------------------------------------- */

struct replay {
	struct tide_mc_table *t;
	uint64_t snap_seq;
	uint64_t expect; /* next record number to apply */
	uint64_t last;   /* highest record number seen */
	uint64_t applied;
	uint32_t chunks; /* snapshot chunks read */
	bool damaged;
	uint64_t now_ms;
};

/* Apply count length-prefixed records at p..end; numbered from first (0: snapshot). */
static void
apply_records(struct replay *r, const uint8_t *p, const uint8_t *end, uint32_t count,
	      uint64_t first, const char *where)
{
	for (uint32_t i = 0; i < count; i++) {
		uint64_t seq = first ? first + i : 0;
		uint32_t len;
		int rc;

		if (end - p < 4 || (size_t)(end - p - 4) < (len = get_le32(p))) {
			TIDE_LOG(ERR, "HA log: %s: record %u of %u truncated", where, i, count);
			r->damaged = true;
			return;
		}
		if (first && seq > r->last)
			r->last = seq;
		if (first && seq <= r->snap_seq) {
			p += 4 + len;
			continue;
		}
		if (!r->damaged && first && seq != r->expect) {
			TIDE_LOG(ERR, "HA log: %s: record %" PRIu64 " where %" PRIu64 " was next",
				 where, seq, r->expect);
			r->damaged = true;
		}
		if (!r->damaged) {
			rc = tide_mc_table_journal_apply(r->t, p + 4, len, r->now_ms);
			if (rc != 0) {
				TIDE_LOG(ERR, "HA log: %s: record %u does not apply: %s", where, i,
					 strerror(-rc));
				r->damaged = true;
			} else {
				r->applied++;
				if (first)
					r->expect = seq + 1;
			}
		}
		p += 4 + len;
	}
}

/* Read every key under prefix in order, PAGE values at a time, calling fn on each. */
static int
scan(struct tide_etcd *e, const char *prefix, struct replay *r,
     void (*fn)(struct replay *r, const struct tide_etcd_kv *kv))
{
	char start[KEY_MAX + 1], end[KEY_MAX];
	size_t slen = strlen(prefix), elen = tide_etcd_prefix_end(prefix, slen, end);
	bool more = true;

	memcpy(start, prefix, slen);
	while (more) {
		struct tide_etcd_kv *kvs = NULL;
		size_t n = 0;
		int rc = tide_etcd_range(e, start, slen, end, elen, PAGE, &kvs, &n, &more, NULL);

		if (rc != 0)
			return rc;
		for (size_t i = 0; i < n; i++)
			fn(r, &kvs[i]);
		if (n > 0 && kvs[n - 1].key_len < KEY_MAX) {
			/* Next page: just after the last key. */
			memcpy(start, kvs[n - 1].key, kvs[n - 1].key_len);
			start[kvs[n - 1].key_len] = '\0';
			slen = kvs[n - 1].key_len + 1;
		} else {
			more = false;
		}
		tide_etcd_kvs_free(kvs, n);
	}
	return 0;
}

static void
on_snap_chunk(struct replay *r, const struct tide_etcd_kv *kv)
{
	const uint8_t *p = (const uint8_t *)kv->value;

	if (kv->value_len < SNAP_HDR || memcmp(p, "TJS1", 4) != 0) {
		TIDE_LOG(ERR, "HA log: %s is not a snapshot chunk", kv->key);
		r->damaged = true;
		return;
	}
	r->chunks++;
	apply_records(r, p + SNAP_HDR, p + kv->value_len, get_le32(p + 4), 0, kv->key);
}

static void
on_batch(struct replay *r, const struct tide_etcd_kv *kv)
{
	const uint8_t *p = (const uint8_t *)kv->value;

	if (kv->value_len < BATCH_HDR || memcmp(p, "TJL1", 4) != 0 || get_le64(p + 4) == 0) {
		TIDE_LOG(ERR, "HA log: %s is not a log batch", kv->key);
		r->damaged = true;
		return;
	}
	apply_records(r, p + BATCH_HDR, p + kv->value_len, get_le32(p + 12), get_le64(p + 4),
		      kv->key);
}

int
tide_master_log_replay(const struct tide_master_log_opts *o, struct tide_mc_table *t,
		       uint64_t *last_seq, bool *damaged)
{
	struct replay r = {.t = t, .now_ms = tide_mono_ns() / 1000000u};
	char prefix[KEY_MAX / 2], key[KEY_MAX];
	struct tide_etcd *e = NULL;
	struct tide_etcd_kv kv;
	uint32_t chunks = 0;
	int64_t snap_view = 0;
	uint64_t t0 = tide_mono_ns();
	int rc;

	if (!o || !t || !last_seq || !damaged || !o->endpoints)
		return -EINVAL;
	rc = make_prefix(o->cluster_id, prefix, sizeof(prefix));
	if (rc == 0)
		rc = tide_etcd_open(o->endpoints, ETCD_CALL_MS, &e);
	if (rc != 0)
		return rc;
	/* Ours to rebuild only while master_view is still the one we won. */
	if (o->fence_key != NULL) {
		rc = tide_etcd_get(e, o->fence_key, strlen(o->fence_key), &kv, NULL);
		if (rc == 0) {
			rc = kv.create_revision == o->fence_rev ? 0 : -ESTALE;
			tide_etcd_kv_clear(&kv);
		} else if (rc == -ENOENT) {
			rc = -ESTALE;
		}
		if (rc != 0)
			goto out;
	}
	snprintf(key, sizeof(key), "%ssnap_head", prefix);
	rc = tide_etcd_get(e, key, strlen(key), &kv, NULL);
	if (rc == 0) {
		if (kv.value_len == 24 && memcmp(kv.value, "TJH1", 4) == 0) {
			r.snap_seq = get_le64((const uint8_t *)kv.value + 4);
			chunks = get_le32((const uint8_t *)kv.value + 12);
			snap_view = (int64_t)get_le64((const uint8_t *)kv.value + 16);
		} else {
			TIDE_LOG(ERR, "HA log: %s is not a snapshot head", key);
			r.damaged = true;
		}
		tide_etcd_kv_clear(&kv);
	} else if (rc != -ENOENT) {
		goto out;
	}
	rc = 0;
	if (!r.damaged && r.snap_seq) {
		key_snap(prefix, key, r.snap_seq, snap_view, -1);
		rc = scan(e, key, &r, on_snap_chunk);
	}
	if (rc == 0 && r.chunks != chunks) {
		TIDE_LOG(ERR, "HA log: snapshot %" PRIu64 " has %u of its %u chunks", r.snap_seq,
			 r.chunks, chunks);
		r.damaged = true;
	}
	r.expect = r.snap_seq + 1;
	r.last = r.snap_seq;
	if (rc == 0) {
		key_log(prefix, key, 0);
		rc = scan(e, key, &r, on_batch);
	}
	if (rc == 0) {
		*last_seq = r.last;
		*damaged = r.damaged;
		TIDE_LOG(NOTICE,
			 "HA log: table rebuilt from etcd: snapshot at %" PRIu64
			 ", records up to %" PRIu64 ", %" PRIu64 " applied, %.1f ms%s",
			 r.snap_seq, r.last, r.applied, (double)(tide_mono_ns() - t0) / 1e6,
			 r.damaged ? " (DAMAGED: replay ended early, see above)" : "");
	}
out:
	tide_etcd_close(e);
	return rc;
}
