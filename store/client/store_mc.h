/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the store's calls to the master.
 *
 * A struct store_mc is the pool of master connections (mc_pool.h), the client
 * id the calls are made for and, when the master is found through etcd, the
 * etcd handle and the leader's key. The calls below return 0 or a negative
 * errno: the master client's own (-ECONNREFUSED, -ECONNRESET, -ETIMEDOUT, ...)
 * or the master's ErrorCode mapped by store_mc_errno() (the table documented in
 * tide_store.h). Idempotent calls (reads, PutEnd, BatchPutEnd and their Upsert
 * twins) are sent again
 * while an HA master fails over (store_mc_failover_retry()); the others are
 * sent once.
 *
 * Thread: every call may run on any thread at once (the pool locks each
 * connection for one RPC), except store_mc_set_master() and store_mc_reset(),
 * which the owner calls with no call in flight.
 */
#ifndef TIDE_STORE_MC_H
#define TIDE_STORE_MC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mc_pool.h"
#include "tide_mc_client.h"

struct tide_etcd;

/* A borrowed C string as a codec string (NULL: empty). Thread: any. */
static inline struct tide_mc_str
store_mc_str(const char *p)
{
	struct tide_mc_str r = {(char *)p, p ? strlen(p) : 0};

	return r;
}

struct store_mc {
	struct tide_mc_pool pool;      /* master connections (mc_pool.h) */
	struct tide_mc_uuid client_id; /* the client the calls are made for */
	/* Master found through etcd ("etcd://..." as the master address): the leader's
	 * master_view key, re-read when the master stops answering. NULL otherwise. */
	struct tide_etcd *etcd;
	char etcd_key[256];
	/* Optional: told when store_mc_locate() moved the pool to another leader (the
	 * heartbeat pings at once: the new leader wants a remount). Runs on the thread
	 * that looked the leader up. */
	void (*moved)(void *arg);
	void *moved_arg;
};

/* Mooncake ErrorCode -> negative errno (0 for OK; unknown codes: -EREMOTEIO). Thread: any. */
int store_mc_errno(int32_t ec);

/* rc when the call itself failed (nonzero), else store_mc_errno(ec). Thread: any. */
int store_mc_result(int rc, int32_t ec);

/* A zeroed request for fn in the HEAD layout. Thread: any. */
void store_mc_req_init(struct tide_mc_req *r, enum tide_mc_fn fn);

/* Business result of element i of an expected<void> vector; -EBADMSG when the
 * master answered fewer elements. Thread: any. */
int store_mc_vec_status(const struct tide_mc_resp *r, size_t i);

/*
 * Point mc at master: "host:port", or "etcd://ep[;ep...]" to follow the HA
 * leader named in etcd (key from $MC_STORE_CLUSTER_ID, as stock's client).
 * 0; -EINVAL bad etcd endpoints; -ENOTCONN no leader in etcd now;
 * -ENAMETOOLONG; -ENOMEM. Errors are logged. Thread: the owner.
 */
int store_mc_set_master(struct store_mc *mc, const char *master);

/* Close every connection, drop the etcd handle, forget the address. Thread: the owner. */
void store_mc_reset(struct store_mc *mc);

/*
 * The leader's address from etcd's master_view into the pool (mc->moved runs
 * when it changed). 0; -ENOENT no leader now (none elected, or a value that
 * is not host:port); etcd's errors. Thread: any.
 */
int store_mc_locate(struct store_mc *mc);

/*
 * Whether an idempotent call that failed with rc may be sent again: mc follows
 * etcd, rc is a broken or refused connection (-ECONNRESET, -EPIPE,
 * -ECONNREFUSED, -ENOTCONN, -ECONNABORTED) and the failover deadline (8 s from
 * the first failure) has not passed. Then it sleeps a step (100 ms), looks the
 * leader up again and returns true. *until starts at 0. Thread: any.
 */
bool store_mc_failover_retry(struct store_mc *mc, int rc, uint64_t *until);

/*
 * PutStart of key (len bytes), or UpsertStart when upsert (an existing key gets
 * buffers for the new value: its own when len is its size, else new ones).
 * 0: *resp (free it) holds the replicas to write, in resp->u.put_start;
 * -EEXIST: the key exists already (OBJECT_ALREADY_EXISTS; spec 5.3 step 1 makes
 * that a put that succeeded, with nothing to write); else -errno. Sent once.
 * Thread: any.
 */
int store_mc_put_start(struct store_mc *mc, const char *key, uint64_t len,
		       const struct tide_mc_replicate_config *cfg, bool upsert,
		       struct tide_mc_resp *resp);

/*
 * End the put (upsert: UpsertEnd, UpsertRevoke) of key whose transfers gave ret:
 * PutEnd when ret is 0 (retried over a failover), PutRevoke when ret or the
 * PutEnd failed, so nothing partly written stays visible. Returns the put's
 * result: ret, the PutEnd's error, or the error of the connection the PutEnd
 * needed. Thread: any.
 */
int store_mc_put_end(struct store_mc *mc, const char *key, bool upsert, int ret);

/* GetReplicaList (retried over a failover). 0: *resp valid (free it); -errno. Thread: any. */
int store_mc_replica_list(struct store_mc *mc, const char *key, struct tide_mc_resp *resp);

/* ExistKey (retried over a failover). 1 exists; 0 not (OBJECT_NOT_FOUND too); -errno.
 * Thread: any. */
int store_mc_exist_key(struct store_mc *mc, const char *key);

/* Remove (sent once). 0; -errno. Thread: any. */
int store_mc_remove(struct store_mc *mc, const char *key, bool force);

/* RemoveAll (sent once). Objects removed (>= 0); -errno. Thread: any. */
int64_t store_mc_remove_all(struct store_mc *mc, bool force);

/* RemoveByRegex (sent once). Objects removed; -errno. Thread: any. */
int64_t store_mc_remove_by_regex(struct store_mc *mc, const char *pattern, bool force);

/*
 * BatchPutStart (upsert: BatchUpsertStart) of n keys (ks, slens: n entries)
 * with cfg (sent once). 0: *resp valid (free it), one element per key in
 * resp->u.batch_put_start; -errno. Thread: any.
 */
int store_mc_batch_put_start(struct store_mc *mc, struct tide_mc_str *ks, uint64_t *slens, size_t n,
			     const struct tide_mc_replicate_config *cfg, bool upsert,
			     struct tide_mc_resp *resp);

/*
 * BatchPutEnd (upsert: BatchUpsertEnd; retried over a failover) for the keys
 * with rcs[i] == 0 and pending[i], then BatchPutRevoke (BatchUpsertRevoke) for
 * the pending ones that failed; an End that fails turns rcs[i] into its error
 * and is revoked too. ks, metas and idx are n-entry scratch arrays. Thread: any.
 */
void store_mc_batch_finish(struct store_mc *mc, const char *const *keys, size_t n, bool upsert,
			   const bool *pending, int *rcs, struct tide_mc_str *ks,
			   struct tide_mc_object_meta *metas, size_t *idx);

/* BatchGetReplicaList of n keys (retried over a failover); ks: n-entry scratch.
 * 0: *resp valid (free it); -errno. Thread: any. */
int store_mc_batch_replica_list(struct store_mc *mc, const char *const *keys, size_t n,
				struct tide_mc_str *ks, struct tide_mc_resp *resp);

/* BatchExistKey or BatchRemove (fn) of n valid keys (sent once); ks: n-entry
 * scratch. 0: *resp valid (free it); -errno. Thread: any. */
int store_mc_batch_keys(struct store_mc *mc, enum tide_mc_fn fn, const char *const *keys, size_t n,
			bool force, struct tide_mc_str *ks, struct tide_mc_resp *resp);

/*
 * BatchReplicaClear of n keys for mc's client (sent once): the replicas on the
 * segments named `segment`, or whole objects when segment is NULL or "". ks:
 * n-entry scratch. 0: *resp valid (free it), resp->u.cleared the master's
 * answer (the keys cleared, or an ErrorCode when !ok); -errno. Thread: any.
 */
int store_mc_batch_replica_clear(struct store_mc *mc, const char *const *keys, size_t n,
				 const char *segment, struct tide_mc_str *ks,
				 struct tide_mc_resp *resp);

/*
 * Tide's lease extension (one-round-trip puts; a stock master registers none of
 * these and answers "function not registered", which comes back as -EOPNOTSUPP;
 * any other error frame is -EREMOTEIO, an unknown outcome). Sent
 * once, never retried over a failover: a lease belongs to the master that gave
 * it (a new leader answers LEASE_EXPIRED).
 *
 * store_mc_lease_grant: a lease of size bytes placed with cfg (one replica).
 *   0: resp->u.lease.val holds it (free resp); -EOPNOTSUPP; -ENOSPC no segment
 *   has room; other -errno.
 * store_mc_lease_commit: keys ks[i] of sizes[i] bytes written at offs[i] from
 *   the lease's start become objects (cfg: pins, group ids, one per key).
 *   0: *resp valid (free it), element i the key's result in
 *   resp->u.batch_status (ErrorCodes: OBJECT_ALREADY_EXISTS, that part of the
 *   lease is still ours; LEASE_EXPIRED, the lease is gone; INVALID_PARAMS);
 *   -EOPNOTSUPP; -errno.
 * store_mc_lease_release: give the lease's unused space back. 0; -errno.
 * Thread: any.
 */
int store_mc_lease_grant(struct store_mc *mc, uint64_t size,
			 const struct tide_mc_replicate_config *cfg, struct tide_mc_resp *resp);
int store_mc_lease_commit(struct store_mc *mc, uint64_t lease_id, struct tide_mc_str *ks,
			  uint64_t *offs, uint64_t *sizes, size_t n,
			  const struct tide_mc_replicate_config *cfg, struct tide_mc_resp *resp);
int store_mc_lease_release(struct store_mc *mc, uint64_t lease_id);

#endif /* TIDE_STORE_MC_H */
