/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the master table (mc_table.c, mc_table_seg.c): structures and
 * cross-file helpers. Not installed, not for the server.
 */
#ifndef TIDE_MC_TABLE_INT_H
#define TIDE_MC_TABLE_INT_H

#include <pthread.h>

#include "tide_mc_table.h"
#include "tide_seg.h"

/* Object flags. */
#define MCT_OF_PROCESSING 0x01 /* replicas PROCESSING; aux indexes t->proc */
#define MCT_OF_HARD_PIN   0x02 /* never evicted */
#define MCT_OF_SOFT_PIN   0x04 /* soft_ms = pin deadline */
#define MCT_OF_HAS_CSUM   0x08 /* csum valid */
#define MCT_OF_READ       0x10 /* replicas handed to a reader since the last write (pin_unread) */

/* How mct_obj_erase() treats the buffers. */
#define MCT_FREE_NOW   0
#define MCT_FREE_LATER 1

/* One replica: 24 bytes. seg indexes t->segs (never stale: unmount drops replicas). */
struct mct_rep {
	uint64_t id;
	uint64_t off;
	uint32_t seg;
	uint32_t spare;
};

/* One object: 48-byte header, then nrep replicas, then key_len bytes and a NUL. */
struct mct_obj {
	uint64_t size;     /* value length */
	uint64_t lease_ms; /* read lease deadline */
	uint64_t soft_ms;  /* soft pin deadline (MCT_OF_SOFT_PIN) */
	uint64_t csum;     /* object_checksum (MCT_OF_HAS_CSUM) */
	uint32_t hash;     /* low 32 bits of the key hash: home slot */
	uint32_t aux;      /* PROCESSING: index in t->proc; else hash of the writer's UUID */
	uint32_t key_len;
	uint8_t nrep;     /* live replicas (drops when a segment goes away) */
	uint8_t nrep_cap; /* replicas allocated: the key follows rep[nrep_cap] */
	uint8_t flags;
	uint8_t spare;
	struct mct_rep rep[];
};

static inline char *
mct_key(struct mct_obj *o)
{
	return (char *)&o->rep[o->nrep_cap];
}

static inline const char *
mct_key_c(const struct mct_obj *o)
{
	return (const char *)&o->rep[o->nrep_cap];
}

/* An in-flight put (object PROCESSING). */
struct mct_proc {
	struct mct_obj *obj;
	struct tide_mc_uuid client; /* the PutStart/UpsertStart caller */
	uint64_t start_ms;
	uint64_t pin_ttl;   /* soft pin TTL to commit at PutEnd (ENABLE) */
	uint8_t pin_action; /* enum tide_mc_soft_pin_action requested */
};

/* A buffer kept allocated until release_ms (a writer or reader may still use it). */
struct mct_discard {
	uint64_t off;
	uint64_t len;
	uint64_t release_ms;
	uint32_t seg;
	uint8_t kind; /* enum mct_disc_kind */
};

/* What a discarded buffer was. */
enum mct_disc_kind {
	MCT_DISC_LEASE,    /* an ended lease's unused space (counted in t->lease_disc_bytes) */
	MCT_DISC_PUT,      /* an object's buffer (counted in t->put_discard_bytes) */
	MCT_DISC_PUT_HEAD, /* ... its first one: its release counts the object released */
};

struct mct_seg {
	struct tide_mc_uuid id;
	struct tide_mc_uuid client;
	char *name, *endpoint, *protocol;
	size_t name_len, endpoint_len, protocol_len;
	uint64_t base;
	uint64_t size;       /* as mounted */
	uint64_t managed;    /* size rounded down to the granule: what the allocator has */
	uint64_t used;       /* granule-rounded bytes allocated (replicas, discards, leases) */
	uint64_t nrep;       /* allocations in it: an unmount scans objects only if > 0 */
	uint64_t unmount_at; /* graceful unmount deadline (draining) */
	struct tide_seg *alloc;
	uint32_t name_id; /* equal for equal names: replicas need distinct ones */
	bool draining;
};

/* An unused part of an allocation lease: one allocator allocation [off, off + len). */
struct mct_piece {
	uint64_t off; /* allocator offset */
	uint64_t len; /* granule multiple */
};

/* An allocation lease (mc_table_lease.c): pieces sorted by off, never adjacent. */
struct mct_lease {
	uint64_t id;
	uint64_t deadline_ms; /* ends when now >= this */
	struct tide_mc_uuid client;
	uint64_t start; /* allocator offset of the lease's start */
	uint64_t size;  /* granule-rounded length */
	uint32_t seg;   /* indexes t->segs (never stale: unmount drops leases) */
	uint32_t npiece;
	struct mct_piece piece[TIDE_MC_TABLE_LEASE_PIECES];
};

struct mct_client {
	struct tide_mc_uuid id;
	uint64_t expiry_ms;
	bool ok; /* remounted: Ping answers OK */
};

struct tide_mc_table {
	pthread_mutex_t lock;
	pthread_mutex_t re_lock; /* one regex scan at a time (bounds its key copy); taken
				    before lock, never while holding it */
	struct tide_mc_table_opts o;
	uint64_t hk0, hk1, rng;

	/* Hash table of objects. */
	uint8_t *ctrl;
	struct mct_obj **slot;
	uint64_t mask;
	uint64_t nobj;

	struct mct_proc *proc;
	size_t nproc, proc_cap;
	struct mct_discard *disc;
	size_t ndisc, disc_cap;

	struct mct_seg **segs; /* slots; NULL = free */
	uint32_t nseg_slots, nsegs;
	uint32_t next_name_id;
	struct mct_client *clients;
	size_t nclients, client_cap;

	uint64_t next_rep_id;
	uint64_t capacity, alloc_bytes, value_bytes;
	uint64_t soft_pinned, hard_pinned;
	bool need_evict;
	uint64_t eviction_rounds, evicted_keys, evicted_bytes, expired_clients, reclaimed_puts;
	uint64_t evict_skipped_unread;
	uint64_t eviction_attempts;
	uint64_t requests[TIDE_MC_TABLE_OP_COUNT];
	uint64_t failures[TIDE_MC_TABLE_OP_COUNT];
	uint64_t batch_calls[TIDE_MC_TABLE_OP_COUNT];
	uint64_t batch_failed_calls[TIDE_MC_TABLE_OP_COUNT];
	uint64_t batch_partial_calls[TIDE_MC_TABLE_OP_COUNT];
	uint64_t alloc_failures, partial_allocations;
	uint64_t put_discards, put_releases, put_discard_bytes; /* MCT_DISC_PUT* buffers */
	uint64_t gets, gets_found, gets_found_bytes;
	uint64_t vsize_bucket[TIDE_MC_TABLE_VSIZE_BOUNDS + 1];
	uint64_t vsize_sum;

	/* Journal (mc_table_journal.c): records of committed changes, numbered. */
	tide_mc_table_journal_fn jfn; /* NULL: no journal */
	void *jctx;
	uint64_t jseq;      /* last record number; written under lock, read with __atomic */
	uint64_t jseq_free; /* last record that released space (an erase, an unmount) */
	uint8_t *jbuf;      /* encoding scratch, grows to the largest record */
	size_t jcap;

	/* Allocation leases (mc_table_lease.c), sorted by id (ids only grow). */
	struct mct_lease **leases;
	size_t nleases, lease_cap;
	uint64_t next_lease_id;
	uint64_t leased_bytes;     /* sum of their pieces' lengths */
	uint64_t lease_disc_bytes; /* of the discarded buffers, ended leases' unused pieces */
};

static inline void
mct_lock(struct tide_mc_table *t)
{
	pthread_mutex_lock(&t->lock);
}

static inline void
mct_unlock(struct tide_mc_table *t)
{
	pthread_mutex_unlock(&t->lock);
}

/* Count a request of op, and a failure when rc is nonzero; returns rc (lock held). */
static inline int
mct_count(struct tide_mc_table *t, enum tide_mc_table_op op, int rc)
{
	t->requests[op]++;
	if (rc)
		t->failures[op]++;
	return rc;
}

/*
 * Count a batch call of op over n keys, failures_before being t->failures[op]
 * before its keys were counted (lock held). As stock's master: every key
 * failed (an empty batch included: 0 of 0) is a failed call, some a partial
 * success.
 */
static inline void
mct_count_batch(struct tide_mc_table *t, enum tide_mc_table_op op, size_t n,
		uint64_t failures_before)
{
	uint64_t failed = t->failures[op] - failures_before;

	t->batch_calls[op]++;
	if (failed == n)
		t->batch_failed_calls[op]++;
	else if (failed)
		t->batch_partial_calls[op]++;
}

static inline bool
mct_uuid_eq(const struct tide_mc_uuid *a, const struct tide_mc_uuid *b)
{
	return a->first == b->first && a->second == b->second;
}

/* len rounded up to the granule: what an allocation of len takes (len below a
 * segment's size, < 2^62: no overflow). */
static inline uint64_t
mct_extent(const struct tide_mc_table *t, uint64_t len)
{
	uint64_t g = t->o.seg_granule;

	return (len + g - 1) & ~(g - 1);
}

/* An eviction candidate: its read-lease deadline and the object. */
struct mct_cand {
	uint64_t lease;
	struct mct_obj *obj;
};

/* mc_table.c */
/* Partition v[0..n) so that v[0..k) hold the k smallest leases (k <= n). */
void mct_select_oldest(struct mct_cand *v, size_t n, size_t k);
uint64_t mct_hash(const struct tide_mc_table *t, const void *data, size_t len);
uint32_t mct_uuid_hash32(const struct tide_mc_uuid *u);
int mct_ht_init(struct tide_mc_table *t);
void mct_ht_fini(struct tide_mc_table *t);
void mct_obj_erase(struct tide_mc_table *t, struct mct_obj *o, int how, uint64_t release_at);
int mct_drop_seg_replicas(struct tide_mc_table *t, uint32_t idx);
void mct_reclaim_puts(struct tide_mc_table *t, const struct tide_mc_uuid *dead, uint64_t now);
void mct_evict(struct tide_mc_table *t, uint64_t now);

/* A soft-pin request of a ReplicateConfig (PutStart's rules). */
struct mct_pin_req {
	uint8_t action; /* enum tide_mc_soft_pin_action */
	uint64_t ttl;
};

/* mc_table.c: for allocation leases (lock held). Whether an existing object o makes its
 * key taken for a new put (spec 3.3), and taking over one that does not. */
bool mct_key_taken(const struct tide_mc_table *t, const struct mct_obj *o, uint64_t now);
void mct_take_over(struct tide_mc_table *t, struct mct_obj *o, const struct tide_mc_str *key,
		   const char *by, uint64_t now);
int mct_pin_parse(const struct tide_mc_table *t, const struct tide_mc_replicate_config *cfg,
		  struct mct_pin_req *pin);
/*
 * Place one extent as PutStart places a replica (accounted); false: no room. Its length is
 * *len, or less in a segment where share > 0 and *len exceeds 1/share of the segment's
 * managed size (then that share rounded down to the granule, at least one granule): *len
 * says what was placed.
 */
bool mct_place_one(struct tide_mc_table *t, uint64_t *len, uint32_t share,
		   const struct tide_mc_replicate_config *cfg, struct mct_rep *out);

/* mc_table.c: for the journal's replay (lock held). */
struct mct_obj *mct_obj_new(const struct tide_mc_str *key, uint64_t len, unsigned nrep);
struct mct_obj *mct_obj_find(struct tide_mc_table *t, const char *key, size_t len);
/* Insert a new COMPLETE object (hash set here); pins and value bytes accounted. */
int mct_obj_insert(struct tide_mc_table *t, struct mct_obj *o);

/* mc_table_seg.c */
int mct_seg_add(struct tide_mc_table *t, const struct tide_mc_segment *g,
		const struct tide_mc_uuid *client);
int32_t mct_seg_find(const struct tide_mc_table *t, const struct tide_mc_uuid *id);
void mct_seg_unmount(struct tide_mc_table *t, uint32_t idx);
int mct_client_add(struct tide_mc_table *t, const struct tide_mc_uuid *id, uint64_t now);

/* mc_table_journal.c: emit a record when a journal is set (lock held). */
void mct_j_obj_set(struct tide_mc_table *t, const struct mct_obj *o, uint64_t now);
void mct_j_obj_del(struct tide_mc_table *t, const struct mct_obj *o);
void mct_j_seg_add(struct tide_mc_table *t, const struct mct_seg *s);
void mct_j_seg_del(struct tide_mc_table *t, const struct mct_seg *s);

/* mc_table_seg.c */
uint64_t mct_rand(struct tide_mc_table *t);
void mct_rep_account(struct tide_mc_table *t, struct mct_seg *s, uint64_t len, int dir);
void mct_rep_free(struct tide_mc_table *t, const struct mct_rep *r, uint64_t len);
/* Keep [r, len) allocated until release_ms (a writer may still be writing there); kind:
 * enum mct_disc_kind (a lease's space is not data: outside the eviction watermark). */
void mct_discard(struct tide_mc_table *t, const struct mct_rep *r, uint64_t len,
		 uint64_t release_ms, enum mct_disc_kind kind);
void *mct_arena_alloc(struct tide_mc_table_arena *a, size_t n);
int mct_arena_str(struct tide_mc_table_arena *a, const char *s, size_t len,
		  struct tide_mc_str *out);

/* mc_table_lease.c (lock held, except mct_leases_free: destroy) */
void mct_lease_drop_seg(struct tide_mc_table *t, uint32_t idx);
void mct_lease_drop_client(struct tide_mc_table *t, const struct tide_mc_uuid *client);
void mct_leases_expire(struct tide_mc_table *t, uint64_t now);
void mct_leases_free(struct tide_mc_table *t);

#endif
