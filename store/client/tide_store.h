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
 * thread concurrently (calls to the master share a small pool of connections,
 * each carrying one call at a time and never held across a transfer; the
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
	 * (no segment is mounted and no heartbeat runs, as Mooncake). Ignored with an agent:
	 * the agent contributes the node's segment (MOONCAKE_GLOBAL_SEGMENT_SIZE of its node
	 * file), which outlives the client processes. */
	uint64_t global_segment_size;
	/** Bytes of the local buffer (tide_store_local_buffer()): staging memory for the
	 * caller's pools; 0 = none. With an agent it is shared memory the agent maps. */
	uint64_t local_buffer_size;
	/** Transport: "tcp" (NULL = "tcp") or "rdma". */
	const char *protocol;
	/** Master RPC address "host:port", or "etcd://h:p[;h:p...]": the HA leader named in
	 * etcd (mooncake-store/<MC_STORE_CLUSTER_ID or mooncake_cluster>/master_view), re-read
	 * when the master stops answering; setup fails (-ENOTCONN) when none is elected. */
	const char *master_server_addr;
	/** Whether to attach to the node's agent (tide-node) instead of running the
	 * transfer engine and the segment in this process; see enum tide_store_agent. */
	int agent;
	/** The agent's UNIX socket; NULL or "": TIDE_AGENT_SOCKET of the node file. */
	const char *agent_socket;
};

/** Values of tide_store_cfg.agent. */
enum tide_store_agent {
	/** Take the node file's TIDE_AGENT ("required", "auto" or "off"). */
	TIDE_STORE_AGENT_NODEENV = 0,
	/** Attach to the agent; setup fails (-ECONNREFUSED, with a message
	 * naming the socket and how to start the agent) when none answers. */
	TIDE_STORE_AGENT_REQUIRED = 1,
	/** Attach when an agent answers, else run embedded (logged). */
	TIDE_STORE_AGENT_AUTO = 2,
	/** Run embedded: own engine, own segment of global_segment_size. */
	TIDE_STORE_AGENT_OFF = 3,
};

/**
 * Mooncake's ReplicateConfig: where and how replicas of an object are placed.
 * A NULL config pointer means the defaults (1 replica, no pin, no preference).
 * Strings are only read during the call.
 */
struct tide_store_rc {
	/** Replicas on distinct segments; 0 means 1. */
	unsigned replica_num;
	/** Never evicted (the master's hard pin). */
	bool with_hard_pin;
	/** Preferred segment name ("host:port"); NULL or "" none. */
	const char *preferred_segment;
	/** Further preferred segments, in order; n_preferred_segments entries. */
	const char *const *preferred_segments;
	size_t n_preferred_segments;
	/** Prefer a segment on this node (Mooncake's prefer_alloc_in_same_node). */
	bool prefer_alloc_in_same_node;
	/** Group ids, one per key of the call ("" = ungrouped), or NULL. In a batch it
	 * must have exactly as many entries as keys (1 for tide_store_put()). C cannot
	 * see the array's length: only the first n entries are read, and a NULL among
	 * them (a shorter, NULL-terminated array) is the count mismatch that gives
	 * every key -EINVAL. */
	const char *const *group_ids;
	/* Fields below were appended in ABI 4; a zero-initialised struct (or a NULL config)
	 * asks for stock's defaults. */
	/** Soft pin of the objects (Mooncake's soft_pin_action): a value of enum
	 * tide_store_soft_pin; 0 (PRESERVE, stock's default) leaves the pin as it is (a new
	 * object is not pinned). Other values: -EINVAL for every key. */
	unsigned soft_pin_action;
	/** Lifetime of an ENABLE soft pin in ms (Mooncake's soft_pin_ttl_ms); 0 means unset
	 * (stock's default): the master's --default_kv_soft_pin_ttl. Above the master's
	 * --max_kv_soft_pin_ttl, or non-zero with another action, the master refuses the
	 * keys (-EINVAL). */
	uint64_t soft_pin_ttl_ms;
};

/** Values of tide_store_rc.soft_pin_action: Mooncake's SoftPinAction, same values. */
enum tide_store_soft_pin {
	/** Keep the object's soft pin as it is; a new object has none. */
	TIDE_STORE_SOFT_PIN_PRESERVE = 0,
	/** Soft-pin the object for soft_pin_ttl_ms (eviction takes it last). */
	TIDE_STORE_SOFT_PIN_ENABLE = 1,
	/** Clear the object's soft pin. */
	TIDE_STORE_SOFT_PIN_DISABLE = 2,
};

/**
 * One fragment of tide_store_get_into_ranges(): copy len bytes of object
 * keys[key] starting at byte src_off into dst.
 */
struct tide_store_frag {
	size_t key;       /**< index into the keys array */
	uint64_t src_off; /**< offset in the object */
	void *dst;        /**< destination, len bytes */
	uint64_t len;     /**< bytes; 0 is allowed and reads nothing */
	int64_t result;   /**< out: len on success, else negative errno */
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
 * Mooncake's rdma_devices for the next tide_store_setup() (kept out of struct
 * tide_store_cfg, which has no size field to grow by; the Python binding's
 * setup() calls it): a comma list of this node's RDMA device names, "" every
 * device with an active port, NULL (the default) MOONCAKE_DEVICE of the node
 * environment. Ignored with an agent (its node file names the devices) and for
 * protocol tcp. The string is copied.
 * \return 0; -EINVAL s NULL or already set up; -ENOMEM.
 * Thread: the thread that calls tide_store_setup(), before it.
 */
int tide_store_set_rdma_devices(struct tide_store *s, const char *devices);

struct tide_te;
/**
 * Run the next tide_store_setup() on the caller's transfer engine instead of one of
 * its own (Mooncake's setup(..., engine=te.get_engine())): the store's segment and
 * buffers are registered with it, its protocol installed on it (a no-op when it has
 * it), and its name is the segment's endpoint (a local_hostname without a port takes
 * that name). The store never attaches to an agent then (the node file's TIDE_AGENT does
 * not apply). At close the store unregisters what it registered and leaves the engine
 * running. NULL: own engine again.
 * \return 0; -EINVAL s NULL or already set up. tide_store_setup() then fails with
 *         -EINVAL when cfg->agent is TIDE_STORE_AGENT_REQUIRED.
 * Ownership: te stays the caller's; it must outlive tide_store_close().
 * Thread: the thread that calls tide_store_setup(), before it.
 */
int tide_store_set_engine(struct tide_store *s, struct tide_te *te);

/**
 * Store an object: PutStart (with the config's placement, pin and group),
 * write every replica with the transfer engine, PutEnd. If any write fails
 * the object is revoked (PutRevoke), so nothing partly written becomes
 * visible. Mooncake's put and put_from are both this call: buf may be any
 * memory; registered memory (tide_store_register_buffer(), the local buffer)
 * is not copied on the way. In process, an object of at most 1 MiB with one
 * replica and no preference beyond preferred_segment is first placed in space
 * a Tide master leased to this client (one master round trip instead of two;
 * TIDE_PUT_LEASE=0 of the node environment turns that off); where no lease can
 * take it, it is put as above within the same call, with the same results.
 * \param key  NUL-terminated key (non-empty).
 * \param buf  len bytes; only read.
 * \param len  Object size; 0 is refused by the master (-EINVAL), as in Mooncake.
 * \param rc   Replication config, or NULL for the defaults; group_ids, if set, has 1 entry.
 * \return 0 stored, or the key already existed (kept unchanged, as Mooncake);
 *         -EINVAL bad args / not set up; -ENOSPC no segment has room; transfer
 *         errors (object revoked); master errors as mapped above.
 * Thread: any.
 */
int tide_store_put(struct tide_store *s, const char *key, const void *buf, size_t len,
		   const struct tide_store_rc *rc);

/**
 * Mooncake's put_from: the same call as tide_store_put() (buf is normally
 * registered memory or inside the local buffer, which is then not copied).
 * \return as tide_store_put(). Thread: any.
 */
int tide_store_put_from(struct tide_store *s, const char *key, const void *buf, size_t len,
			const struct tide_store_rc *rc);

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
 * Read an object into a new allocation (Mooncake's allocating get, in C). In
 * process: one GetReplicaList gives size and location, then one read (one
 * master round trip for any size). Through an agent: its size, then
 * tide_store_get_into() (again, up to 3 times, if the object was replaced by a
 * larger one in between).
 * \param[out] out  The bytes (malloc'd, at least 1 byte even for an empty
 *                  object); the caller frees it with free(). NULL on error.
 * \param[out] len  The object's size.
 * \return 0; -EINVAL bad args / not set up; -ENOMEM; -EAGAIN no complete
 *         replica, or (agent) the object kept growing; otherwise what
 *         tide_store_get_size()/get_into() return (-ENOENT no such key, ...).
 * Thread: any.
 */
int tide_store_get(struct tide_store *s, const char *key, void **out, size_t *len);

/** Memory for tide_store_get_with(): size bytes (size may be 0), or NULL (-ENOMEM). */
typedef void *(*tide_store_alloc_fn)(void *arg, size_t size);
/** Give back a block tide_store_get_with() obtained but does not return. */
typedef void (*tide_store_release_fn)(void *arg, void *p);

/**
 * tide_store_get() into memory the caller allocates: once the size is known, alloc
 * gives the destination and the bytes are received into it, with no copy in
 * between (a language binding allocates its own object, e.g. a Python bytes, and
 * the socket fills it). Through an agent alloc may be called up to 3 times (the
 * object was replaced by a larger one in between); every block not returned in
 * *out goes to release (NULL: the caller tracks them itself).
 * \param[out] out  The block holding the object (from alloc); NULL on error.
 * \param[out] len  The object's size.
 * \return as tide_store_get(); -EINVAL also for a NULL alloc.
 * Ownership: every block alloc returned is the caller's. Thread: any; alloc and
 * release run on the calling thread.
 */
int tide_store_get_with(struct tide_store *s, const char *key, tide_store_alloc_fn alloc,
			tide_store_release_fn release, void *arg, void **out, size_t *len);

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
 * In process, a batch that tide_store_put() would put through a lease, key by
 * key, and that takes at most half a lease in all, is placed in one lease,
 * written in one batch and committed with one call; keys the lease cannot take
 * go through BatchPutStart within the same call.
 * \param keys, bufs, lens  n keys (non-empty), sources and sizes (as tide_store_put()).
 * \param rc               Config for every key (NULL: defaults); group_ids, if set, has
 *                         n entries, else every key gets -EINVAL.
 * \param rcs              Out: per key, what tide_store_put() would return (0 also for
 *                         an existing key).
 * \return 0 every key stored; else the first non-zero rcs[i]; -EINVAL bad args (rcs
 *         untouched); a master connection error before any key started (rcs untouched).
 * Thread: any.
 */
int tide_store_batch_put_from(struct tide_store *s, const char *const *keys,
			      const void *const *bufs, const size_t *lens, size_t n,
			      const struct tide_store_rc *rc, int *rcs);

/** One piece of an object's value (tide_store_batch_put_parts()). */
struct tide_store_part {
	const void *buf; /**< len bytes; only read; NULL only when len is 0 */
	size_t len;      /**< bytes; 0 is allowed and adds nothing */
};

/** Flag of tide_store_batch_put_parts(): replace an existing key's value (Mooncake's
 * Upsert RPCs). */
#define TIDE_STORE_PUT_UPSERT 0x1u

/**
 * Store n objects whose values are given in pieces (Mooncake's put_parts,
 * batch_put_from_multi_buffers and upsert*): key i's value is the concatenation
 * of nparts[i] consecutive entries of parts (key 0's first, then key 1's, ...);
 * its length is the sum of their lens (0: that key gets -EINVAL). The pieces are
 * written straight from where they are, each to its offset in every replica (no
 * gather copy in this process; through an agent, pieces outside the shared
 * buffers are staged as tide_store_batch_put_from() stages them), in one engine
 * batch for the call.
 * \param keys    n keys (non-empty).
 * \param parts   The pieces of every key, in key order (sum of nparts[] entries).
 * \param nparts  n counts; 0 makes that key's value empty (-EINVAL for it).
 * \param repl    Config for every key (NULL: defaults); group_ids, if set, has n entries,
 *                else every key gets -EINVAL.
 * \param flags   0: a put (an existing key is kept unchanged and reported 0, as
 *                tide_store_batch_put_from(); small objects may go through a lease as
 *                there). TIDE_STORE_PUT_UPSERT: an upsert (UpsertStart or
 *                BatchUpsertStart, UpsertEnd/BatchUpsertEnd, and UpsertRevoke/
 *                BatchUpsertRevoke for what failed): an existing key gets the new value,
 *                whatever its old size, and a missing one is created; never through a
 *                lease. Other bits: -EINVAL.
 * \param rcs     Out: per key, 0 (stored, or for a put kept as it was) or the key's
 *                -errno, with the errors of tide_store_put(); a key whose writes (or
 *                End) failed is revoked, so nothing partly written becomes visible (an
 *                upsert whose writes failed leaves the key absent: its old value was
 *                being replaced).
 * \return 0 when the call ran (look at rcs); -errno when it failed as a whole before any
 *         key was settled (rcs untouched): -EINVAL bad args (a NULL array, an empty
 *         key, a piece with a NULL buf and a non-zero len, n 0, an unknown flag;
 *         through an agent also a key over 4096 bytes, more than 65536 keys or
 *         524288 pieces) or not set up, -ENOMEM, a master (or agent) connection
 *         error; with n == 1 also the master's answer to PutStart / UpsertStart.
 *         n == 1 uses the single-key RPCs (PutStart / UpsertStart), as tide_store_put()
 *         does; n > 1 the batch ones.
 * Ownership: every array and piece stays the caller's; they are only read during the
 * call. Thread: any, after setup.
 */
int tide_store_batch_put_parts(struct tide_store *s, const char *const *keys,
			       const struct tide_store_part *parts, const size_t *nparts, size_t n,
			       const struct tide_store_rc *repl, unsigned flags, int *rcs);

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
 * Read n objects, each into pieces (Mooncake's batch_get_into_multi_buffers): key i's
 * object is read into its nparts[i] consecutive entries of parts (key 0's first, then
 * key 1's, ...), in order, each piece filled before the next; pieces past the object's
 * end are left as they were. One BatchGetReplicaList, then one engine batch of reads
 * from each key's first COMPLETE replica straight into the pieces (no staging in this
 * process; through an agent, pieces outside the shared buffers are bounced through the
 * staging area as tide_store_batch_get_into() bounces buffers); a transfer that fails
 * is read again from the key's next replica, a batch per replica rank.
 * \param keys    n keys (non-empty).
 * \param parts   The destinations, in key order (sum of nparts[] entries): here buf is
 *                written, len bytes at most (the struct is the one puts read from).
 *                NULL only when len is 0; pieces must not overlap.
 * \param nparts  n counts; 0 is allowed (room for an empty object only).
 * \param sizes   Out: per key, the object's size (the bytes read, >= 0); -ENOBUFS the
 *                pieces together are smaller than the object (nothing of it read); else
 *                the key's error as tide_store_get_into() gives it (-ENOENT, -EAGAIN,
 *                -ESTALE, transfer errors; pieces may then hold part of the object).
 * \return 0 every key read; else the first negative sizes[i]; -EINVAL bad args (a NULL
 *         array, an empty key, a piece with a NULL buf and a non-zero len, n 0; through
 *         an agent also a key over 4096 bytes, more than 65536 keys or 524288 pieces) or
 *         not set up; -ENOMEM; a master (or agent) connection error (sizes untouched in
 *         these cases).
 * Ownership: every array and piece stays the caller's; the pieces are written during the
 * call only. Thread: any, after setup.
 */
int tide_store_batch_get_into_parts(struct tide_store *s, const char *const *keys,
				    const struct tide_store_part *parts, const size_t *nparts,
				    size_t n, int64_t *sizes);

/**
 * Read fragments of objects (Mooncake's get_into_ranges, flattened): one
 * BatchGetReplicaList for the keys, then one transfer-engine read per fragment
 * straight from the replica (a replica that fails is replaced by the next one).
 * Partial success is allowed: each fragment reports its own result.
 * \param keys    nkeys keys; fragments refer to them by index.
 * \param frags   nfrags fragments; result is set in every one.
 * \return 0 every fragment read; else the first negative result; -EINVAL bad args
 *         (results untouched); a master connection error (results untouched).
 *         Per fragment: -ENOENT no such key, -EINVAL key index out of range or
 *         [src_off, src_off+len) not inside the object, transfer errors.
 * Thread: any.
 */
int tide_store_get_into_ranges(struct tide_store *s, const char *const *keys, size_t nkeys,
			       struct tide_store_frag *frags, size_t nfrags);

/*
 * Sessions (Mooncake's batch_put_session_* and batch_get_session_*): the master is
 * asked once at the start, the bytes then move in any number of ranged transfers,
 * and the end makes the objects readable (put) or drops the cached replica (get).
 *
 * State: the store keeps one table of put sessions and one of get sessions, each keyed
 * by object key, at most TIDE_STORE_SESSIONS_MAX entries each (the same key may be in
 * both). A session outlives the call that started it and ends with its end (or revoke),
 * or tide_store_close(), which revokes the put sessions still open. Through an agent the
 * sessions live in the agent's store (its bound shared by the node's clients) and belong
 * to the connection that started them: another client's calls on the key answer -ESRCH
 * as for a key never started (a get session is the store's per key: a client's get end
 * drops the cached replica for every client that started one), and when the connection
 * goes (the client exits or crashes, or the agent restarts) the agent revokes its open
 * put sessions and ends its get sessions. A process that dies with
 * sessions open in process leaves its reserved objects PROCESSING at the master until
 * another put of the key takes them over after the master's put_start_discard_timeout
 * (30 s by default; their space is released after put_start_release_timeout, 10 min).
 *
 * Per-key codes (the Python binding returns Mooncake's INVALID_PARAMS, -600, for -ESRCH,
 * -EBUSY, -ERANGE and -EMFILE, as stock does for the first three):
 *   -ESRCH   the key has no session of that kind (never started, ended, revoked, or
 *            being ended), or, through an agent, another connection's;
 *   -EBUSY   put start: the key has a put session already; end / revoke: another end
 *            or revoke of the key is finishing it;
 *   -ERANGE  a range reaches past the session's bytes (the reserved size; for a get
 *            session the replica's size);
 *   -EMFILE  TIDE_STORE_SESSIONS_MAX sessions of that kind are open.
 *
 * Thread: every call may run on any thread at once, also on the same keys: ranged
 * transfers of one key run concurrently (ranges that overlap land in an unspecified
 * order); an end or revoke first stops new transfers of its keys (they get -ESRCH), then
 * waits for those in flight, then asks the master. A second start of a key already in a
 * put session is refused (-EBUSY); a get start replaces the key's get session (transfers
 * in flight finish on the old replica).
 */

/** Open put sessions, and open get sessions, one store keeps at most (each). */
#define TIDE_STORE_SESSIONS_MAX 65536

/**
 * Start put sessions (Mooncake's batch_put_session_start): reserve n objects at the
 * master (one BatchPutStart) and remember their replicas; no byte moves.
 * \param sizes  n object sizes (the bytes the ranged writes may fill).
 * \param repl   Config for every key (NULL: defaults); group_ids, if set, has n entries,
 *               else every key gets -EINVAL; a soft pin is forwarded as by the puts.
 * \param rcs    Out: per key 0 (reserved: the session is open), -EBUSY (a put session
 *               of the key is open; nothing asked), -EMFILE, -EINVAL (size 0), -EEXIST
 *               (the object exists already: nothing reserved), -EREMOTEIO (the master
 *               gave no memory replica: revoked), or the master's error (-ENOSPC ...).
 * \return 0 when the call ran (look at rcs); -EINVAL bad args (a NULL array, an empty
 *         key, n 0; through an agent also a key over 4096 bytes or more than 65536 keys)
 *         or not set up; -ENOMEM; a master (or agent) connection error (rcs untouched,
 *         nothing reserved).
 * Thread: any, after setup (see above).
 */
int tide_store_batch_put_session_start(struct tide_store *s, const char *const *keys,
				       const size_t *sizes, size_t n,
				       const struct tide_store_rc *repl, int *rcs);

/**
 * Ranged writes into open put sessions (Mooncake's batch_put_from_multi_buffer_ranges):
 * piece j of key i (parts, nparts[i] consecutive entries per key, as in
 * tide_store_batch_put_parts()) is written at offs[j] (one offset per piece, same order)
 * of every replica the key's session reserved; one engine batch for the call.
 * \param out  Out: per key the bytes its pieces hold (each counted once, whatever the
 *             replicas), or -ESRCH (no open put session), -ERANGE (a piece past the
 *             reserved size: nothing of the key written), -EREMOTEIO (no piece to write:
 *             Mooncake's INVALID_REPLICA), or the first transfer error (replicas may
 *             then hold part of the pieces: write them again, or revoke).
 * \return 0 when the call ran (look at out); -EINVAL bad args (a NULL array, an empty
 *         key, a piece with a NULL buf and a non-zero len, n 0; through an agent also a
 *         key over 4096 bytes, more than 65536 keys or 524288 pieces) or not set up (out
 *         untouched); -ENOMEM or an agent connection error (nothing moved; out's entries
 *         mean nothing).
 * Ownership: the arrays and pieces stay the caller's, read during the call only.
 * Thread: any, after setup (see above).
 */
int tide_store_batch_put_ranges(struct tide_store *s, const char *const *keys,
				const struct tide_store_part *parts, const uint64_t *offs,
				const size_t *nparts, size_t n, int64_t *out);

/**
 * End put sessions (Mooncake's batch_put_session_end): one BatchPutEnd; the objects
 * become readable with whatever their replicas hold (bytes never written are whatever
 * the segment held).
 * \param rcs  Out: per key 0 (ended: the object is visible), -ESRCH, -EBUSY, or the
 *             master's error for the End (the key is then revoked: nothing half
 *             visible), and the session is gone unless -ESRCH/-EBUSY.
 * \return 0 when the call ran; -EINVAL bad args (as above) or not set up; -ENOMEM;
 *         an agent connection error (rcs untouched).
 * Thread: any, after setup (see above).
 */
int tide_store_batch_put_session_end(struct tide_store *s, const char *const *keys, size_t n,
				     int *rcs);

/**
 * Revoke put sessions (Mooncake's batch_put_session_revoke): one BatchPutRevoke; the
 * reserved objects are dropped.
 * \param rcs  Out: per key 0 (revoked; the session is gone), -ESRCH or -EBUSY.
 * \return as tide_store_batch_put_session_end().
 * Thread: any, after setup (see above).
 */
int tide_store_batch_put_session_revoke(struct tide_store *s, const char *const *keys, size_t n,
					int *rcs);

/**
 * Start get sessions (Mooncake's batch_get_session_start): one BatchGetReplicaList;
 * each key's first COMPLETE memory replica and the read lease's end are remembered,
 * replacing the key's get session if it had one.
 * \param rcs  Out: per key 0, -EMFILE, or the key's lookup error (-ENOENT, -EAGAIN no
 *             COMPLETE memory replica, master errors); a failed key's old get session
 *             is dropped.
 * \return 0 when the call ran; -EINVAL bad args (as above) or not set up; -ENOMEM; a
 *         master (or agent) connection error (rcs untouched).
 * Thread: any, after setup (see above).
 */
int tide_store_batch_get_session_start(struct tide_store *s, const char *const *keys, size_t n,
				       int *rcs);

/**
 * Ranged reads through get sessions (Mooncake's batch_get_into_multi_buffer_ranges):
 * piece j of key i (as tide_store_batch_put_ranges() lays them out; here buf is written)
 * gets len bytes from offs[j] of the replica the key's session remembered; one engine
 * batch for the call, no master call.
 * \param out  Out: per key the bytes read (the sum of its pieces' lens), or -ESRCH (no
 *             get session), -ERANGE (a piece past the replica's size: nothing read),
 *             -ESTALE (the read lease ended, before or during the read: the session is
 *             dropped; start it again), or the first transfer error.
 * \return as tide_store_batch_put_ranges().
 * Thread: any, after setup (see above).
 */
int tide_store_batch_get_ranges(struct tide_store *s, const char *const *keys,
				const struct tide_store_part *parts, const uint64_t *offs,
				const size_t *nparts, size_t n, int64_t *out);

/**
 * End get sessions (Mooncake's batch_get_session_end): forget the keys' cached replicas
 * (keys without one are fine). No master call.
 * \return 0; -EINVAL bad args (as above) or not set up; an agent connection error.
 * Thread: any, after setup (see above).
 */
int tide_store_batch_get_session_end(struct tide_store *s, const char *const *keys, size_t n);

/** Kind of a replica (the alternatives of Mooncake's Replica::Descriptor, in its order). */
enum tide_store_replica_type {
	TIDE_STORE_REPLICA_MEMORY = 0,     /**< in a client's mounted segment */
	TIDE_STORE_REPLICA_NOF = 1,        /**< NVMe-oF SSD segment (same fields as memory) */
	TIDE_STORE_REPLICA_DISK = 2,       /**< a file (file_path) */
	TIDE_STORE_REPLICA_LOCAL_DISK = 3, /**< a client's local disk, served by that client */
	TIDE_STORE_REPLICA_DFS = 4,        /**< a distributed file system's file (file_path) */
};

/** Mooncake's ReplicaStatus, same values. */
enum tide_store_replica_status {
	TIDE_STORE_REPLICA_UNDEFINED = 0,
	TIDE_STORE_REPLICA_INITIALIZED = 1,
	TIDE_STORE_REPLICA_PROCESSING = 2,
	TIDE_STORE_REPLICA_COMPLETE = 3,
	TIDE_STORE_REPLICA_REMOVED = 4,
	TIDE_STORE_REPLICA_FAILED = 5,
};

/** One replica of an object, as the master describes it (tide_store_batch_get_replicas()). */
struct tide_store_replica {
	uint64_t id;   /**< the master's replica id */
	int type;      /**< enum tide_store_replica_type */
	int status;    /**< enum tide_store_replica_status, as the master sent it */
	uint64_t size; /**< the object's bytes */
	/** Memory and NoF: the object's address in the holder's segment; else 0. */
	uint64_t buffer_address;
	/** Memory, NoF and local disk: the holder's transfer-engine segment name ("host:port");
	 * else "". Never NULL. */
	const char *transport_endpoint;
	/** Memory and NoF: the holder's transport ("tcp", "rdma"); else "". Never NULL. */
	const char *protocol;
	/** Disk and DFS: the file; else "". Never NULL. */
	const char *file_path;
};

/** One key's answer of tide_store_batch_get_replicas(). */
struct tide_store_replicas {
	/** 0, or the key's error: -ENOENT no such key, -EAGAIN no replica complete yet (the
	 * master's REPLICA_IS_NOT_READY), other master errors as mapped above. */
	int err;
	size_t n;                           /**< replicas in v; 0 when err */
	const struct tide_store_replica *v; /**< in the master's order; NULL when n is 0 */
};

/**
 * Where each of n objects is (Mooncake's get_replica_desc / batch_get_replica_desc): one
 * BatchGetReplicaList, its answer per key. Like any lookup it starts the master's read
 * lease on the objects (a remove without force waits it out).
 *
 * The result is allocated by the library, in one block, because its size (replicas per
 * key, string lengths) is known only from the master's answer: caller-provided arrays
 * would need a sizing call and a second, racing lookup, or truncate.
 * \param keys  n keys (non-empty).
 * \param[out] out  n entries, one per key in order, with every replica and string they
 *                  point to in the same block; NULL on error.
 * \return 0 (per-key errors in (*out)[i].err); -EINVAL bad args (NULL array, empty key,
 *         n 0; through an agent also a key over 4096 bytes or more than 65536 keys) or
 *         not set up; -ENOMEM; -E2BIG (agent) the answer exceeds one reply (16 MiB); a
 *         master (or agent) connection error.
 * Ownership: *out is the caller's; free it with tide_store_replicas_free() (not free():
 * the library's allocator). Thread: any, after setup.
 */
int tide_store_batch_get_replicas(struct tide_store *s, const char *const *keys, size_t n,
				  struct tide_store_replicas **out);

/**
 * Free a result of tide_store_batch_get_replicas() (everything it points to). NULL-safe.
 * Thread: any.
 */
void tide_store_replicas_free(struct tide_store_replicas *r);

/**
 * Whether each of n keys exists (BatchExistKey).
 * \param out  Per key: 1 exists, 0 does not, negative errno.
 * \return 0; -EINVAL bad args; a master connection error (out untouched).
 * Thread: any.
 */
int tide_store_batch_is_exist(struct tide_store *s, const char *const *keys, size_t n, int *out);

/**
 * Remove n objects (BatchRemove).
 * \param rcs  Per key: what tide_store_remove() would return.
 * \return 0 every key removed; else the first non-zero rcs[i]; -EINVAL bad args;
 *         a master connection error (rcs untouched).
 * Thread: any.
 */
int tide_store_batch_remove(struct tide_store *s, const char *const *keys, size_t n, bool force,
			    int *rcs);

/**
 * Clear replicas of n objects this client wrote (BatchReplicaClear, Mooncake's
 * batch_replica_clear): those on the segments mounted under `segment_name`
 * (a client's local_hostname), or whole objects when segment_name is NULL or "".
 * The master skips, without an error, a key that is absent, written by another
 * client, under a read lease, still being written, or (with a segment name)
 * without a replica there; an object left without replicas is removed.
 * \param cleared  n entries (caller-owned): 1 the key was cleared, 0 skipped;
 *                 unspecified when the call fails.
 * \return the number of keys cleared (>= 0); -EINVAL bad args (NULL key or
 *         arrays; through an agent also more than 65,536 keys or a key or name
 *         over 4 KiB); -EBADMSG the master answered a key not asked; -ENOMEM;
 *         master errors as mapped above. Attached to a node agent the agent
 *         makes the call (it is the writer the master knows); an agent older
 *         than the call closes the connection (-ECONNRESET or -EPROTO).
 * Thread: any.
 */
int64_t tide_store_batch_replica_clear(struct tide_store *s, const char *const *keys, size_t n,
				       const char *segment_name, int *cleared);

/**
 * Remove every object whose key matches an ECMAScript regular expression
 * (RemoveByRegex, evaluated by the master).
 * \return the number removed (>= 0); -EINVAL bad pattern; master errors as mapped above.
 * Thread: any.
 */
int64_t tide_store_remove_by_regex(struct tide_store *s, const char *pattern, bool force);

/**
 * Declare [ptr, ptr+len) as a buffer that puts read from and gets write into.
 * Cheap: bookkeeping, plus, for buffers of 1 MiB and more, one registration
 * with the transfer engine (tide_te_register_local: with RDMA an MR per
 * device, so the NIC uses it in place; smaller buffers go through the
 * engine's registered staging area, cheaper than a NIC registration per GET).
 * The local buffer and tide_store_map_buffer() regions are registered already.
 * With an agent, memory inside the local buffer or a mapped region is the
 * agent's own and moves without a copy; other memory is bounced through a
 * shared staging area.
 * \return 0; -EEXIST ptr already registered (Mooncake's -600 on a duplicate);
 *         -EINVAL ptr NULL, len 0 or not set up; -ENOMEM; verbs errors from the
 *         engine registration (-EPERM / -ENOMEM: raise the memlock limit).
 * Thread: any.
 */
int tide_store_register_buffer(struct tide_store *s, void *ptr, size_t len);

/**
 * Undo tide_store_register_buffer() for the buffer starting at ptr.
 * \return 0; -ENOENT ptr was not registered; -EINVAL not set up.
 * Thread: any.
 */
int tide_store_unregister_buffer(struct tide_store *s, void *ptr);

/**
 * The local buffer: local_buffer_size bytes reserved at setup for the caller's
 * staging (what Mooncake's BufferPool carves leases from). With an agent it is
 * shared memory the agent maps, so transfers into and out of it are not copied.
 * \param[out] base, len  The region (len 0 and base NULL when local_buffer_size was 0).
 * \return 0; -EINVAL not set up.
 * Thread: any. Ownership: the store's; valid until tide_store_close().
 */
int tide_store_local_buffer(struct tide_store *s, void **base, size_t *len);

/**
 * Map an extra buffer of len bytes with the same properties as the local buffer
 * (shared with the agent, registered); for pools that outgrow the local buffer.
 * \return 0 and *out; -EINVAL len 0 or not set up; -ENOMEM; agent errors.
 * Thread: any. Ownership: the store's; free with tide_store_unmap_buffer() or close.
 */
int tide_store_map_buffer(struct tide_store *s, size_t len, void **out);

/**
 * Unmap a buffer from tide_store_map_buffer().
 * \return 0; -ENOENT ptr is not such a buffer.
 * Thread: any, with no transfer into or out of it in progress.
 */
int tide_store_unmap_buffer(struct tide_store *s, void *ptr);

/**
 * Mooncake's health_check().
 * \return 0 healthy; 1 not set up (or closed); 2 the master (or the agent) does not answer.
 * Thread: any.
 */
int tide_store_health_check(struct tide_store *s);

/**
 * This client's metrics as Prometheus text (exposition format 0.0.4), under stock
 * Mooncake's client names: mooncake_client_rpc_count (counter) and
 * mooncake_client_rpc_latency (histogram, microseconds, stock's buckets), labelled
 * client_mode ("real"; "dummy" when attached to the node's agent), cluster_id (when
 * MC_STORE_CLUSTER_ID is set) and rpc_name (the master function: "PutStart", ...).
 * Only the master RPCs this process made are counted: attached to the agent, the
 * agent makes them and this text has no samples (""). What stock's /metrics serves.
 * \param buf     Receives the text and a NUL when len is enough; may be NULL with len 0.
 * \param needed  Receives the size the text and its NUL need (on 0 and on -ENOBUFS).
 * \return 0; -ENOBUFS buf too small (ask again with *needed bytes: counters move, so
 *         allow some more); -EOPNOTSUPP metrics turned off (MC_STORE_CLIENT_METRIC=0);
 *         -EINVAL not set up, or needed NULL.
 * Thread: any, between set-up and tide_store_close(). Ownership: buf stays the caller's.
 */
int tide_store_metrics_text(struct tide_store *s, char *buf, size_t len, size_t *needed);

/**
 * Transport this store's data moves with: "tcp" or "rdma" (with an agent, the
 * agent's); "" before setup. Valid until tide_store_close(). Thread: any.
 */
const char *tide_store_protocol(const struct tide_store *s);

/**
 * Whether this store runs through the node's agent (1) or embedded (0).
 * Thread: any.
 */
int tide_store_attached(const struct tide_store *s);

/**
 * Transfer-engine segment name of this store ("host:rpc_port" in P2P mode),
 * as mounted at the master; with an agent, the agent's (the node's) segment;
 * "" before setup. Valid until tide_store_close().
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

/**
 * Version of this library's binary interface: bumped whenever a function's arguments
 * or a public struct's layout change. Bindings that mirror the structs (the Python
 * package) refuse a library whose version they were not written for.
 */
#define TIDE_STORE_ABI_VERSION 5

/** TIDE_STORE_ABI_VERSION of the library as built. Thread: any. */
unsigned tide_store_abi_version(void);

/**
 * sizeof() of a public struct of this library, by its name: any struct that
 * tide_store.h or tide_te.h defines ("tide_store_cfg", "tide_te_opts", ...); 0 for any
 * other name. Bindings compare it with their declaration's size at load (the Python
 * package's come from store/python/gen_abi.py, which reads these headers). Thread: any.
 */
size_t tide_store_abi_sizeof(const char *type);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_STORE_H */
