/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Store client core: Mooncake's store client (store_c.h / real_client) in C.
 * Talks to a Mooncake-compatible master for placement and moves the bytes
 * with Tide's transfer engine.
 *
 * A store, once set up, contributes a global segment (mmap'd, registered
 * with the transfer engine and mounted at the master) that other clients'
 * objects may be placed in, and reads/writes objects held by any client.
 *
 * Errors: every function returns 0 (or a size) or a negative errno. Master
 * business errors (Mooncake ErrorCode, spec section 3) are mapped to errno:
 *   OBJECT_NOT_FOUND -> -ENOENT, OBJECT_ALREADY_EXISTS -> -EEXIST,
 *   NO_AVAILABLE_HANDLE (-200, no space) -> -ENOSPC,
 *   REPLICA_IS_NOT_READY / INVALID_REPLICA -> -EAGAIN,
 *   OBJECT_HAS_LEASE / OBJECT_HAS_REPLICATION_TASK -> -EBUSY,
 *   INVALID_KEY / INVALID_PARAMS -> -EINVAL, INVALID_VERSION -> -EPROTO,
 *   SEGMENT/CLIENT_NOT_FOUND, ILLEGAL_CLIENT -> -ENODEV, any other -> -EREMOTEIO.
 * Connection errors with the master come through as the master client
 * returns them (-ETIMEDOUT, -ECONNRESET, -ENOTCONN, ...); transfer errors as
 * the transfer engine reports them (-ETIMEDOUT, -ECONNREFUSED, -EFAULT, ...,
 * -EIO when a request ended without a code). A caller buffer too small for
 * an object is -ENOBUFS; a read that outlived its lease is -ESTALE. tide_store_strerror() names any
 * of them.
 *
 * Threading: after setup, put/get/exist/remove may be called from any
 * thread concurrently (calls to the master are serialised by a mutex; the
 * heartbeat uses its own connection). create/setup/close belong to one thread.
 */
#ifndef TIDE_STORE_H
#define TIDE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The store client; opaque. */
struct tide_store;

/** Setup parameters, Mooncake's setup() keys (spec 5.1). */
struct tide_store_cfg {
	/** "host" or "host:port": the address peers reach us at; a port becomes the transfer
	 * engine's handshake (RPC) port. The mounted segment's name is "host:port"; without a
	 * port one is chosen as Mooncake does (P2P: the engine's ephemeral rpc port; http: a
	 * free port), because the master never puts two replicas on segments of one name. */
	const char *local_hostname;
	/** Transfer-engine metadata connection string: "P2PHANDSHAKE" or "http://host:port/path".
	 */
	const char *metadata_server;
	/** Bytes contributed to the cluster (mmap'd, registered, mounted); 0 = contribute nothing
	 * (no segment is mounted and no heartbeat runs, as Mooncake). */
	uint64_t global_segment_size;
	/** Accepted for compatibility and ignored: the engine moves bytes from and to the
	 * caller's buffers directly, so no staging buffer is needed. */
	uint64_t local_buffer_size;
	/** Transport: "tcp" (NULL = "tcp") or "rdma". */
	const char *protocol;
	/** Master RPC address "host:port". */
	const char *master_server_addr;
};

/**
 * Allocate an unset store.
 * \param[out] out  The store.
 * \return 0; -EINVAL out NULL; -ENOMEM.
 * Thread: any. Ownership: free with tide_store_close().
 */
int tide_store_create(struct tide_store **out);

/**
 * Connect and join: connect to the master and check ServiceReady, create the
 * transfer engine (P2P: its name is "host:rpc_port"; http: local_hostname),
 * install the transport, mmap + register + MountSegment the global segment
 * (random segment and client UUIDs), and start the heartbeat thread (Ping
 * every second, ReMountSegment on NEED_REMOUNT).
 * \param s    Store from tide_store_create(), not yet set up.
 * \param cfg  Parameters; strings are copied where kept.
 * \return 0; -EINVAL bad/missing parameter or s already set up; -EPROTO the master's
 *         version string is not "2.0.0" (other ServiceReady errors mapped as above);
 *         master connection errors; transfer-engine errors from create/install/register;
 *         -ENOMEM; mapped MountSegment errors. On failure s is left unset (setup may be
 *         retried) and everything it started is undone.
 * Thread: the owner.
 */
int tide_store_setup(struct tide_store *s, const struct tide_store_cfg *cfg);

/**
 * Store an object: PutStart, write every replica with the transfer engine,
 * PutEnd. If any write fails the object is revoked (PutRevoke), so nothing
 * partly written becomes visible.
 * \param key          NUL-terminated key (non-empty).
 * \param buf          len bytes; only read.
 * \param len          Object size; 0 is refused by the master (-EINVAL), as in Mooncake.
 * \param replica_num  Replicas on distinct segments (>= 1).
 * \return 0 stored, or the key already existed (kept unchanged, as Mooncake);
 *         -EINVAL bad args / not set up; -ENOSPC no segment has room; transfer
 *         errors (object revoked); master errors as mapped above.
 * Thread: any.
 */
int tide_store_put(struct tide_store *s, const char *key, const void *buf, size_t len,
		   unsigned replica_num);

/**
 * Read an object into buf: GetReplicaList, then read the first COMPLETE memory
 * replica; on a transfer failure the next replica is tried.
 * \param buf  Destination; len bytes available.
 * \return the object size (>= 0); -ENOENT no such key; -ENOBUFS object larger than
 *         len (nothing read); -EAGAIN not complete yet; -ESTALE the read finished after
 *         the master's read lease ran out (Mooncake's LEASE_EXPIRED: the bytes in buf may
 *         be stale); the last transfer error when every replica failed; master errors as
 *         mapped above.
 * Thread: any.
 */
int64_t tide_store_get_into(struct tide_store *s, const char *key, void *buf, size_t len);

/**
 * Size of an object (GetReplicaList).
 * \return the size (>= 0); -ENOENT; master errors as mapped above.
 * Thread: any.
 */
int64_t tide_store_get_size(struct tide_store *s, const char *key);

/**
 * Whether a key exists (ExistKey).
 * \return 1 exists; 0 does not; negative errno on error.
 * Thread: any.
 */
int tide_store_is_exist(struct tide_store *s, const char *key);

/**
 * Remove an object (Remove).
 * \param force  Remove even while a read lease is held.
 * \return 0; -ENOENT; -EBUSY lease held (force false); master errors as mapped above.
 * Thread: any.
 */
int tide_store_remove(struct tide_store *s, const char *key, bool force);

/**
 * Remove every object (RemoveAll).
 * \return the number of objects removed (>= 0); negative errno on a connection error.
 * Thread: any.
 */
int64_t tide_store_remove_all(struct tide_store *s, bool force);

/**
 * Store n objects with one BatchPutStart, one batch of transfer-engine writes and
 * one BatchPutEnd; keys whose writes (or End) failed are revoked with one
 * BatchPutRevoke, so none of them stays partly visible.
 * \param keys, bufs, lens  n keys (non-empty), sources and sizes (as tide_store_put()).
 * \param rcs              Out: per key, what tide_store_put() would return (0 also for
 *                         an existing key).
 * \return 0 every key stored; else the first non-zero rcs[i]; -EINVAL bad args (rcs
 *         untouched); a master connection error before any key started (rcs untouched).
 * Thread: any.
 */
int tide_store_batch_put_from(struct tide_store *s, const char *const *keys,
			      const void *const *bufs, const size_t *lens, size_t n,
			      unsigned replica_num, int *rcs);

/**
 * Read n objects with one BatchGetReplicaList and one batch of transfer-engine
 * reads; a key whose first COMPLETE replica fails is read again through
 * tide_store_get_into() (which tries the other replicas).
 * \param bufs, lens  n destinations and their sizes.
 * \param sizes       Out: per key, what tide_store_get_into() would return (size or
 *                    negative errno; the lease check is not applied).
 * \return 0 every key read; else the first negative sizes[i]; -EINVAL bad args; a master
 *         connection error (sizes untouched).
 * Thread: any.
 */
int tide_store_batch_get_into(struct tide_store *s, const char *const *keys, void *const *bufs,
			      const size_t *lens, size_t n, int64_t *sizes);

/**
 * Transfer-engine segment name of this store ("host:rpc_port" in P2P mode),
 * as mounted at the master; "" before setup. Valid until tide_store_close().
 * Thread: any.
 */
const char *tide_store_endpoint(const struct tide_store *s);

/**
 * Leave and free: stop the heartbeat, UnmountSegment (objects held here vanish
 * from the master), destroy the transfer engine, unmap the segment, close the
 * master connections. NULL-safe; works on a store never set up.
 * Thread: the owner, with no other call on s in progress.
 */
void tide_store_close(struct tide_store *s);

/**
 * Text for an error this API returned (errno text, with the store meaning where
 * one is specific, e.g. -ENOSPC "no space in any segment"). Never NULL.
 * Thread: any.
 */
const char *tide_store_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_STORE_H */
