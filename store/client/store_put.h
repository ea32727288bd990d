/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the one sequence every in-process put follows,
 * for one key (tide_store_put()) or n (tide_store_batch_put_from(),
 * tide_store_batch_put_parts(), whose values come in pieces and which also
 * upserts):
 *
 *     place the n objects  ->  move the bytes (one engine batch)  ->  commit n
 *
 * Placement is a strategy, tried in order on the keys the previous one left:
 *   - lease: the client places small objects in space the master leased to it
 *     ahead of time (store_lease.h) and one TideLeaseCommit makes them visible:
 *     one master round trip for the whole put;
 *   - PutStart: the master places them (PutStart, or BatchPutStart for a
 *     batch), PutEnd / BatchPutEnd make them visible and PutRevoke /
 *     BatchPutRevoke take back whatever failed: two round trips.
 * A lease that cannot take a key (none to be had, full, too small, ended
 * before the commit) leaves it to PutStart within the same call; nothing of
 * such a key was stored. Every key ends with exactly one explicit result.
 *
 * An upsert (Mooncake's Upsert RPCs: an existing key gets the new value) never
 * takes a lease, whose commit only creates keys; the PutStart placement sends
 * UpsertStart / BatchUpsertStart, End and Revoke instead.
 *
 * A value in pieces is written piece by piece, each at its offset in every
 * replica: no gather copy, and one engine batch still carries the round.
 *
 * Thread: any; a put's state lives on its caller's stack (and one heap block
 * for large batches).
 */
#ifndef TIDE_STORE_PUT_H
#define TIDE_STORE_PUT_H

#include <stdbool.h>
#include <stddef.h>

#include "store_mc.h"
#include "store_xfer.h"
#include "tide_store.h"

struct store_leases;

/* What became of one key of a put. */
enum store_put_result {
	/* Written and committed by this put: the object is visible. */
	STORE_PUT_STORED,
	/* The key existed already: kept unchanged, nothing written. A successful
	 * put, as Mooncake's (spec 5.3 step 1). */
	STORE_PUT_EXISTS,
	/* This placement could not take the key and nothing of it is stored or
	 * visible: the next placement does. Never a final result of store_put_run(). */
	STORE_PUT_FALLBACK,
	/* Not stored: err says why. Whatever was written is not visible (revoked,
	 * or never committed). */
	STORE_PUT_FAILED,
};

/* One key's outcome. */
struct store_put_key {
	enum store_put_result result;
	int err;             /* STORE_PUT_FAILED: -errno; else 0 */
	const char *settled; /* the placement that settled it: "lease", "put-start" (NULL: none) */
};

/* What a put runs against. */
struct store_put_ctx {
	struct store_mc *mc;
	/* The lease placement's state; NULL: none (every key takes PutStart). */
	struct store_leases *leases;
	struct store_xfer_eng eng;
	/* Moves a put's writes: store_xfer_run() (tests substitute a fake). */
	int (*move)(const struct store_xfer_eng *e, enum tide_te_op op, struct store_xfer *x,
		    size_t n);
};

/* One put call: n valid keys (checked by the caller, as tide_store.h asks). */
struct store_put_req {
	const char *const *keys;
	/*
	 * The values, in one of two forms. parts NULL: key i is bufs[i], lens[i]
	 * bytes. Else key i is the concatenation of nparts[i] consecutive entries of
	 * parts (key 0's first; the caller checked that no piece has a NULL buf and
	 * a non-zero len) and bufs and lens are not read. A key of 0 bytes in all is
	 * FAILED -EINVAL without asking the master.
	 */
	const void *const *bufs;
	const size_t *lens;
	const struct tide_store_part *parts;
	const size_t *nparts;
	size_t n; /* 1 .. UINT32_MAX */
	/* The caller's replicate config (NULL: defaults), checked with
	 * store_repl_check(repl, n). */
	const struct tide_store_rc *repl;
	/* tide_store_put(): PutStart uses Mooncake's single-key RPCs (n is 1); else
	 * the batch RPCs, whatever n is. */
	bool single;
	/* Upsert: an existing key gets the new value (no lease; the Upsert RPCs). */
	bool upsert;
};

/*
 * Store r's keys through c. 0: out[i] (n entries) holds each key's outcome,
 * STORED, EXISTS (never for an upsert) or FAILED. -errno: the call failed
 * before any key was settled by a placement (-ENOMEM; the master's answer to
 * PutStart / UpsertStart for a single put; the master connection's error for
 * a batch), and out is untouched.
 */
int store_put_run(const struct store_put_ctx *c, const struct store_put_req *r,
		  struct store_put_key *out);

/* The public result of out: 0 stored or existed, else the error. Thread: any. */
static inline int
store_put_errno(const struct store_put_key *out)
{
	return out->result == STORE_PUT_FAILED ? out->err : 0;
}

#endif /* TIDE_STORE_PUT_H */
