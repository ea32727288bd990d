/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: one-round-trip puts through Tide's lease
 * extension (TideLeaseGrant / TideLeaseCommit / TideLeaseRelease).
 *
 * A put normally costs PutStart (the master places it) + the write + PutEnd.
 * With a lease the master hands this client a run of free space in one
 * segment ahead of time; the client places small objects there itself, writes
 * them, and one TideLeaseCommit makes each visible: one master round trip per
 * put instead of two. A master that does not register the extension (stock
 * Mooncake) answers a coro_rpc error once and the store keeps to PutStart /
 * PutEnd from then on.
 *
 * Safety: bytes go only into space of a lease the master still holds for us.
 * A lease is used only while its deadline (the send time of its grant or last
 * successful commit, plus the master's ttl) is more than STORE_LEASE_MARGIN_MS
 * away, which is longer than a write plus a commit may take (the engine fails
 * a transfer after io_timeout_ms, 10 s by default). A range whose commit had
 * no answer (connection lost) is never placed again: the object may exist.
 *
 * Thread: every function may run on any thread at once (one mutex).
 */
#ifndef TIDE_STORE_LEASE_H
#define TIDE_STORE_LEASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store_mc.h"
#include "store_put.h"

/* Lease size asked for, and the largest object placed in a lease: above it the
 * transfer dwarfs a master round trip and the plain put is used. */
#define STORE_LEASE_BYTES   (16ull << 20)
#define STORE_LEASE_MAX_OBJ (1ull << 20)
/* Stop placing in a lease this long before its deadline. */
#define STORE_LEASE_MARGIN_MS 15000u
/* Free ranges remembered per lease; a range given back beyond that is left
 * unused until the lease is released (the master frees it then). */
#define STORE_LEASE_MAX_FREE 32
/* Current leases at once, one per preferred segment asked for ("" = anywhere);
 * a further preference retires the least recently used. */
#define STORE_LEASE_SLOTS    4
#define STORE_LEASE_PREF_MAX 128

struct store_lease {
	uint64_t id;
	uint64_t addr;    /* absolute address of the lease's first byte in its segment */
	uint64_t size;    /* bytes */
	uint64_t granule; /* placement unit */
	uint64_t ttl_ms;
	uint64_t base_ms;  /* send time of the grant or of the last successful commit */
	char ep[256];      /* the segment's transport endpoint */
	unsigned inflight; /* ranges handed out and not yet committed or given back */
	bool retired;      /* no more placements; released once inflight is 0 */
	bool gone;         /* the master no longer has it: never released */
	unsigned nfree;
	struct {
		uint64_t off, len;
	} fr[STORE_LEASE_MAX_FREE]; /* sorted by off, never adjacent */
};

struct store_leases {
	pthread_mutex_t mu;
	atomic_uint gen;   /* bumped by store_leases_moved() (any thread, no lock) */
	unsigned seen_gen; /* gen the current leases were granted under */
	int mode;          /* 0 not tried yet, 1 the master grants leases, -1 off */
	uint64_t retry_ms; /* after a refused grant (no room): plain puts until then */
	struct {
		char pref[STORE_LEASE_PREF_MAX]; /* preferred segment asked for, "" none */
		struct store_lease *cur;         /* where its placements come from; NULL none */
		uint64_t used_ms;                /* last placement */
		uint64_t granted; /* size of its last lease (the master may give less than
				     asked: a share of the segment); 0 none yet */
	} slot[STORE_LEASE_SLOTS];
};

/* Initialise; enabled false (TIDE_PUT_LEASE=0) keeps every put on PutStart/PutEnd.
 * Thread: the owner, before any other call. */
void store_leases_init(struct store_leases *L, bool enabled);

/* The master moved (a new HA leader, found by the pool): every current lease is
 * retired before the next placement, and released once idle (to the new leader:
 * a lease granted during the move may be its own; one of the old leader's it
 * answers as unknown, ids being random per table and checked against the client).
 * Takes no lock, so the pool's relocate hook may call it from inside a grant.
 * Thread: any. */
void store_leases_moved(struct store_leases *L);

/* Release the current leases (each once nothing is in flight from it).
 * Thread: the owner, after the last put. */
void store_leases_fini(struct store_leases *L, struct store_mc *mc);

/*
 * Place len bytes (1 .. STORE_LEASE_MAX_OBJ) in a lease granted with the
 * preferred segment pref (NULL or "" none; the master places the lease as it
 * places a PutStart with that preference), granting a new one when the
 * current is full, close to its deadline or absent. 0: *lease and *off (from
 * the lease's start) hold the place, to end with exactly one of
 * store_lease_commit_n() / store_lease_giveback(). -EOPNOTSUPP: use a plain put
 * (the master has no leases, none is free now, leases are off, pref too long,
 * len larger than the last lease granted for pref: its segment is small).
 */
int store_lease_place(struct store_leases *L, struct store_mc *mc, const char *pref, uint64_t len,
		      struct store_lease **lease, uint64_t *off);

/* Bytes a lease for pref holds at most: the size of the last one granted for it, or
 * STORE_LEASE_BYTES before any (a batch larger than about half of it takes the plain
 * path). Thread: any. */
uint64_t store_lease_room(struct store_leases *L, const char *pref);

/* The write into a placed range failed: the range is free again; retire: place
 * nothing more in l (its segment may be gone). */
void store_lease_giveback(struct store_leases *L, struct store_mc *mc, struct store_lease *l,
			  uint64_t off, uint64_t len, bool retire);

/*
 * TideLeaseCommit of n keys placed in the same lease l and written (ks[i],
 * lens[i] bytes at offs[i] from the lease's start; cfg's pins and group ids,
 * n of them if any), in one call. res[i] and err[i] for key i:
 *   STORE_PUT_STORED   committed: the object is visible;
 *   STORE_PUT_EXISTS   the key existed already (its range is free again);
 *   STORE_PUT_FALLBACK the lease is gone (expired, a new leader) or refused the
 *                      range, or the master serves no leases: nothing was
 *                      stored, put the key with PutStart;
 *   STORE_PUT_FAILED   err[i]: the call had no answer (connection lost); the
 *                      commit may have happened, so the range is never placed
 *                      again.
 * err[i] is 0 for the first three.
 */
void store_lease_commit_n(struct store_leases *L, struct store_mc *mc, struct store_lease *l,
			  struct tide_mc_str *ks, uint64_t *offs, uint64_t *lens, size_t n,
			  const struct tide_mc_replicate_config *cfg, enum store_put_result *res,
			  int *err);

/* store_lease_commit_n() of one key; *err (may be NULL) as err[0] there. */
enum store_put_result store_lease_commit(struct store_leases *L, struct store_mc *mc,
					 struct store_lease *l, const char *key, uint64_t off,
					 uint64_t len, const struct tide_mc_replicate_config *cfg,
					 int *err);

/* Pure helpers over one lease's free list (store_lease_ut.c tests them). */
/* First fit of len (rounded up to the granule): 0 and *off, or -ENOSPC. */
int store_lease_carve(struct store_lease *l, uint64_t len, uint64_t *off);
/* Give [off, off + len rounded) back, merged with its neighbours. False when the
 * list is full (the range is then left unused). */
bool store_lease_free(struct store_lease *l, uint64_t off, uint64_t len);

#endif /* TIDE_STORE_LEASE_H */
