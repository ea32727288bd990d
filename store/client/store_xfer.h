/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the bytes of a store call. The master's replica
 * descriptors become transfer lists (struct store_xfer), which one engine
 * batch moves; a range in this process's own segment is copied in place.
 *
 * The planning functions are pure: descriptors and the caller's buffers in,
 * transfer lists and per-key results out, no I/O, no allocation, and they
 * trust nothing in a descriptor (sizes are checked against the caller's
 * buffers and ranges). Only store_xfer_run() and store_xfer_read_replica()
 * move bytes. Thread: any; nothing here keeps state between calls.
 */
#ifndef TIDE_STORE_XFER_H
#define TIDE_STORE_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_clock.h"
#include "tide_mc_codec.h"
#include "tide_store.h"
#include "tide_te.h"

/* Transfer requests (and per-call strings) kept on the stack; more go to the heap. */
#define STORE_XFER_INLINE 16

/* One transfer of a call: in ep/raddr/local/len, out rc. */
struct store_xfer {
	const char *ep;
	uint64_t raddr;
	void *local;
	uint64_t len;
	int rc;
};

struct store_metrics;

/* Where a call's transfers run: the engine, and our own mounted segment. */
struct store_xfer_eng {
	struct tide_te *te;
	void *seg_base; /* NULL: nothing mounted */
	size_t seg_size;
	struct store_metrics *met; /* the call's bytes and latency go here; NULL: not counted */
};

/* What a ranged read knows about one key (store_xfer_rkeys()). */
struct store_rkey {
	const struct tide_mc_replica_desc_vec *reps; /* NULL: err */
	uint64_t size;
	uint64_t lease_ms;
	int err;
};

/* CLOCK_MONOTONIC in ms: the read lease runs on it. Thread: any. */
static inline uint64_t
store_xfer_now_ms(void)
{
	return tide_mono_ns() / 1000000u;
}

/*
 * A put's source for one key: its value is the concatenation of np pieces
 * (tide_store_put() and batch_put_from(): one piece). The pieces are written
 * where they are, each at its offset in the replica: no gather copy.
 */
struct store_xfer_src {
	const struct tide_store_part *parts;
	size_t np;
};

/* d's buffer when d is a COMPLETE memory (or NoF) replica, else NULL. */
const struct tide_mc_buffer_desc *store_xfer_complete(const struct tide_mc_replica_desc *d);

/*
 * Append to x[*nx..cap) the writes of src (len bytes in all) into every replica
 * of v: one per non-empty piece per replica, at the piece's offset (a replica
 * is one contiguous buffer). 0; -EREMOTEIO the master gave no replica, or one
 * we cannot write (not memory, smaller than len), or more than x has room for;
 * x[*nx..] may then hold part of the list.
 */
int store_xfer_replica_writes(const struct tide_mc_replica_desc_vec *v,
			      const struct store_xfer_src *src, uint64_t len, struct store_xfer *x,
			      size_t cap, size_t *nx);

/* Size of the first COMPLETE memory replica of l, or -EAGAIN if none. */
int64_t store_xfer_replica_size(const struct tide_mc_replica_list *l);

/*
 * Copy x here when its range lies in e's own segment (endpoint self, the
 * engine's name): true when copied, false for the engine to move it.
 */
bool store_xfer_self_copy(const struct store_xfer_eng *e, enum tide_te_op op,
			  const struct store_xfer *x, const char *self);

/*
 * Move n ranges in one engine batch (ranges in our own segment are copied
 * directly). x[i].rc gets 0 or the request's error. Returns 0 when every
 * range moved, else the first error (-ENOMEM, the engine's). Waits at most
 * 60 s, then for the engine to fail what is still in flight. The bytes of the
 * ranges that moved are added to e->met's transfer counters: every call's
 * bytes pass here, so none is counted twice or missed.
 */
int store_xfer_run(const struct store_xfer_eng *e, enum tide_te_op op, struct store_xfer *x,
		   size_t n);

/*
 * Read the first COMPLETE memory replica of l into buf (len bytes there); a
 * replica that fails to transfer falls back to the next. t0: when the list
 * was asked for (store_xfer_now_ms(); the lease runs from then). Returns the
 * size read; -ENOBUFS buf too small; -EAGAIN no COMPLETE replica; -ESTALE the
 * lease ran out during the read; the last transfer error.
 */
int64_t store_xfer_read_replica(const struct store_xfer_eng *e,
				const struct tide_mc_replica_list *l, void *buf, size_t len,
				uint64_t t0);

/*
 * BatchPutStart's (upsert: BatchUpsertStart's) answer r for n keys written from
 * src (n entries): rcs[i] 0 and pending[i] for a key to write; for a put, 0 and
 * not pending for a key that exists already (a successful put; an upsert has no
 * such answer: -EEXIST); else the error (-EBADMSG: no element for it). Returns
 * the writes the pending keys need, replicas times pieces (the room
 * store_xfer_plan_puts() needs), at most STORE_XFER_MAX_WRITES.
 */
size_t store_xfer_put_replicas(const struct tide_mc_exp_replicas_vec *r,
			       const struct store_xfer_src *src, size_t n, bool upsert, int *rcs,
			       bool *pending);

/* Bound of store_xfer_put_replicas(): room for more cannot be allocated anyway. */
#define STORE_XFER_MAX_WRITES (SIZE_MAX / 64)

/*
 * The writes of the pending keys (sources src, sizes lens) into x (cap entries;
 * NULL: no room, then every pending key fails with -ENOMEM, or -EREMOTEIO when
 * cap is 0), and owner[k] = the key of x[k]. A key whose replicas cannot be
 * written gets -EREMOTEIO and none of its writes. Returns the number of writes.
 */
size_t store_xfer_plan_puts(const struct tide_mc_exp_replicas_vec *r,
			    const struct store_xfer_src *src, const size_t *lens, size_t n,
			    const bool *pending, int *rcs, struct store_xfer *x, size_t cap,
			    size_t *owner);

/*
 * BatchGetReplicaList's answer r for n keys read into bufs (lens bytes): one
 * read of each key's first COMPLETE memory replica into x (n entries), with
 * owner[k] its key. sizes[i] gets the size to be read, or the key's error
 * (-EBADMSG no element, the master's mapped, -EAGAIN no COMPLETE replica,
 * -ENOBUFS buffer too small). Returns the number of reads.
 */
size_t store_xfer_plan_gets(const struct tide_mc_exp_replica_list_vec *r, void *const *bufs,
			    const size_t *lens, size_t n, int64_t *sizes, struct store_xfer *x,
			    size_t *owner);

/* ki[i] for each of nkeys keys from BatchGetReplicaList's answer r: its replicas and
 * the size of the first COMPLETE one, or err (-EBADMSG, the master's, -EAGAIN). */
void store_xfer_rkeys(const struct tide_mc_exp_replica_list_vec *r, size_t nkeys,
		      struct store_rkey *ki);

/* The next COMPLETE memory replica of k at or after *from (advanced past it), or NULL. */
const struct tide_mc_buffer_desc *store_xfer_next_replica(const struct store_rkey *k,
							  uint32_t *from);

/*
 * Settle the fragments that cannot be read (result -EINVAL: a key out of
 * range, or bytes past the object's end; the key's error; 0 for an empty
 * one) and mark the others todo, from their key's first replica (next = 0).
 */
void store_xfer_frags_settle(const struct store_rkey *ki, size_t nkeys,
			     struct tide_store_frag *frags, size_t nfrags, uint32_t *next,
			     bool *todo);

/*
 * One round: each todo fragment from its key's next COMPLETE replica into x
 * (nfrags entries), owner[k] its fragment; a fragment with no replica left
 * stops (todo false, keeping its last error). Returns the number of reads (0: done).
 */
size_t store_xfer_frags_round(const struct store_rkey *ki, const struct tide_store_frag *frags,
			      size_t nfrags, uint32_t *next, bool *todo, struct store_xfer *x,
			      size_t *owner);

/* After a round's transfer: each fragment's result (its length, or the error; a
 * failed one stays todo for the next replica). */
void store_xfer_frags_done(const struct store_xfer *x, const size_t *owner, size_t nx,
			   struct tide_store_frag *frags, bool *todo);

/* Fragments read after their key's lease ran out (from t0) become -ESTALE. */
void store_xfer_frags_lease(const struct store_rkey *ki, size_t nkeys,
			    struct tide_store_frag *frags, size_t nfrags, uint64_t t0);

#endif /* TIDE_STORE_XFER_H */
