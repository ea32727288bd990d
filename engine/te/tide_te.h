/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Tide's transfer engine: moves bytes between registered memory on different
 * nodes, with Mooncake Transfer Engine's model (segments, batches, READ/WRITE
 * requests, per-request status) and wire formats (segment descriptors,
 * P2PHANDSHAKE or HTTP metadata, TCP framing v1/v2), so a stock Mooncake node
 * can read and write a Tide node's buffers and the other way round.
 *
 * Model:
 * - An engine is created with a metadata connection string ("P2PHANDSHAKE",
 *   or "http://host:port/metadata"), a local server name and a host. It runs
 *   a handshake daemon (RPC port) and, once a transport is installed, a data
 *   server.
 * - Local memory is registered once; remote peers may READ/WRITE only inside
 *   registered buffers (checked on every request, both ends).
 * - A remote segment is opened by name (in P2P mode the name is
 *   "host:rpc_port") and addressed by absolute remote addresses, as in
 *   Mooncake (target_offset is the peer's virtual address).
 * - Requests are submitted in batches; each request has its own status.
 *
 * Threading: every function may be called from any application thread,
 * concurrently, unless stated otherwise. Transfers run on the engine's own
 * threads (kernel-socket I/O threads, or the DPDK lcores); callers poll or
 * wait. No function blocks on the network for longer than the timeouts in
 * tide_te_opts, and no request waits forever: a peer that dies fails its
 * requests within io_timeout_ms.
 */
#ifndef TIDE_TE_H
#define TIDE_TE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tide_te;

/** Segment handle, as Mooncake's SegmentID. */
typedef int64_t tide_te_seg_t;
/** Batch handle, as Mooncake's BatchID. */
typedef uint64_t tide_te_batch_t;

/** The local segment (this engine's own registered memory), as Mooncake's LOCAL_SEGMENT_ID. */
#define TIDE_TE_LOCAL_SEG 0

/** Request opcodes, numbered as Mooncake's TransferRequest::OpCode. */
enum tide_te_op {
	TIDE_TE_READ = 0,  /**< remote -> local */
	TIDE_TE_WRITE = 1, /**< local -> remote */
};

/** Request states, numbered as Mooncake's TransferStatusEnum. */
enum tide_te_state {
	TIDE_TE_WAITING = 0,   /**< submitted, nothing sent yet */
	TIDE_TE_PENDING = 1,   /**< in flight */
	TIDE_TE_INVALID = 2,   /**< no such request */
	TIDE_TE_CANCELED = 3,  /**< not used (no cancellation) */
	TIDE_TE_COMPLETED = 4, /**< every byte moved */
	TIDE_TE_TIMEOUT = 5,   /**< no progress within io_timeout_ms */
	TIDE_TE_FAILED = 6,    /**< see tide_te_status.error */
};

/** One transfer request. */
struct tide_te_req {
	enum tide_te_op op;
	void *local;          /**< local address (need not be registered) */
	tide_te_seg_t seg;    /**< from tide_te_open_segment(), or TIDE_TE_LOCAL_SEG */
	uint64_t remote_addr; /**< absolute address in the segment owner's process */
	uint64_t len;         /**< bytes; 0 completes at once */
};

/** Status of one request. */
struct tide_te_status {
	enum tide_te_state state;
	int error;            /**< 0, or -errno for FAILED/TIMEOUT (see tide_te_strerror) */
	uint64_t transferred; /**< bytes moved so far */
};

/** Engine options. Initialise with tide_te_opts_init(). */
struct tide_te_opts {
	size_t opts_size;
	/** "P2PHANDSHAKE", "http://host:port/path" or "etcd://h:p[;h:p...]" (no scheme: etcd);
	 *  redis and others answer -EPROTONOSUPPORT. */
	const char *metadata;
	/** Local server (segment) name. NULL or "": in P2P mode "host:rpc_port"; else host. */
	const char *local_server_name;
	/** Address peers reach us at (IPv4 literal or resolvable name). NULL: first non-loopback
	 * IPv4, else 127.0.0.1. The handshake and kernel-TCP data ports listen on this address
	 * only (a name: its first IPv4 address), unless the node file's MC_TCP_BIND_ADDRESS
	 * names another (0.0.0.0: every address). */
	const char *host;
	/** Handshake daemon port. 0: ephemeral. Default 0. */
	uint16_t rpc_port;
	/** Data server port. 0: ephemeral. Default 0. */
	uint16_t data_port;
	/** Bytes per slice; a request is split into slices spread over connections. Default
	 * 1 MiB (MC_SLICE_SIZE overrides). */
	uint32_t slice_size;
	/** Data connections per peer. Default 4. */
	uint32_t conns_per_peer;
	/** Kernel-socket I/O threads. Default 2. */
	uint32_t io_threads;
	/** Framing spoken to peers: 0 = best the peer advertises; 1 or 2 = force Mooncake v1/v2
	 * (MC_TCP_PROTO overrides). */
	uint32_t force_proto;
	/** A request with no progress for this long fails with TIMEOUT. Default 10000. */
	uint32_t io_timeout_ms;
	/** Connect and metadata round-trip timeout. Default 3000. */
	uint32_t connect_timeout_ms;
	/** Node environment file for the user-space TCP path and the RDMA workers (NULL:
	 * $TIDE_NODE_ENV, else kernel sockets only). */
	const char *node_env;
	/** RDMA devices to use, comma list ("mlx5_0,mlx5_1"); NULL: MOONCAKE_DEVICE from the
	 * node environment; "" there too: every device with an active port. Names are this
	 * node's own (they may differ from the peers'). Copied at create time. */
	const char *rdma_devices;
};

/**
 * Fill opts with defaults (documented on each field). Thread: any.
 */
void tide_te_opts_init(struct tide_te_opts *opts, size_t opts_size);

/**
 * Create an engine: resolve the local address, start the handshake daemon
 * and publish the (empty) segment descriptor. Reads the node environment
 * (opts->node_env) for the listen address and TIDE_ALLOW_NETS (peers from
 * other addresses are closed at accept on every port of the engine).
 * With rpc_port 0 the handshake port is picked from MC_MIN_RPC_PORT..MC_MAX_RPC_PORT of
 * the node environment (15000..17000), as stock picks it, and so is the kernel-TCP data
 * port at install; -EADDRINUSE when no port of the range is free.
 * \return 0 and *out set; -EINVAL bad option (logged with what was wrong), an
 *         invalid node file, or a host with no IPv4 address; -ENOENT/-EIO the
 *         node file named cannot be read; -EADDRNOTAVAIL the host is not an
 *         address of this machine (logged, naming MC_TCP_BIND_ADDRESS);
 *         -EPROTONOSUPPORT unsupported metadata scheme; -EADDRINUSE rpc_port taken;
 *         -EHOSTUNREACH/-ETIMEDOUT/-ECONNREFUSED metadata server unreachable; -ENOMEM.
 * Thread: any. Ownership: tide_te_destroy().
 */
int tide_te_create(const struct tide_te_opts *opts, struct tide_te **out);

/**
 * Install a transport: "tcp" (user-space TCP when a DPDK device is configured in
 * the node file and MC_FORCE_TCP is not 1, kernel sockets otherwise) or "rdma".
 * Starts the data server and republishes the descriptor. Installing a protocol twice is a
 * no-op (the descriptor is republished).
 *
 * "tcp" never touches verbs: libibverbs is not loaded and no device is probed.
 * "rdma" loads libibverbs.so.1 (dlopen), opens the devices (tide_te_opts.rdma_devices or
 * MOONCAKE_DEVICE; MC_IB_PORT, MC_GID_INDEX, MC_NUM_QP_PER_EP, MC_MTU as in Mooncake),
 * registers every buffer registered so far, and also installs "tcp", so the descriptor
 * advertises both: a peer with RDMA devices is then reached over RDMA, any other over TCP.
 * On a node without libibverbs or without an RDMA device, "rdma" fails unless the node
 * environment sets TIDE_RDMA_AS_TCP=1: then it installs "tcp" alone (logged once, naming
 * the key), so callers that hard-code "rdma" run over TCP on such nodes.
 * \return 0; -EPROTONOSUPPORT unknown protocol, or rdma on a node without libibverbs or
 *         without an RDMA device (logged: what is missing, and MOONCAKE_PROTOCOL=tcp);
 *         -ENETDOWN a listed device's port is down; -EINVAL a bad MC_* value or device list;
 *         -EADDRINUSE data_port taken; -ENOMEM; another -errno of a verbs call (logged).
 * Thread: any, before transfers start.
 */
int tide_te_install_transport(struct tide_te *te, const char *proto);

/** Name of the preferred data path: "rdma" (TCP kept for peers without RDMA), "tcp-kernel",
 * "tcp-dpdk", or "" before install. Thread: any. */
const char *tide_te_transport_name(const struct tide_te *te);

/**
 * Register [addr, addr+len) for remote access and republish the descriptor.
 * \param location  Mooncake's location tag ("*", "cpu:0"); kept, not interpreted.
 * \return 0; -EINVAL addr NULL, len 0 or wrap-around; -EFAULT part of the range is not
 *         mapped in this process (a device pointer, a freed buffer: the engine could
 *         not read or write it); -EEXIST overlaps a registered buffer; -ENOMEM; a
 *         metadata error (the buffer stays registered locally).
 * Ownership: the memory stays the caller's; keep it valid until unregistered.
 */
int tide_te_register(struct tide_te *te, void *addr, size_t len, const char *location);

/**
 * tide_te_register() for memory that is the mapping of a memory file: [addr, addr+len)
 * maps bytes [offset, offset+len) of fd (a memfd sealed with F_SEAL_SHRINK, so no
 * peer's copy can fault past its end). The descriptor then names the file, and a peer
 * engine on the same host, in the same PID namespace, of the same user, with the
 * kernel-socket transport and TIDE_SHM_PEERS not 0, maps the file and copies with
 * memcpy instead of sending the bytes through loopback TCP (engine/te/te_shm.h); any
 * other peer, stock Mooncake's included, reaches the buffer over the network as usual.
 * What such a peer writes after tide_te_unregister() lands in the file, never in
 * whatever this process maps at addr next.
 * \return as tide_te_register(); also -EINVAL fd not a regular file sealed against
 *         shrinking that holds [offset, offset+len) (logged).
 * Ownership: fd stays the caller's (the engine keeps a duplicate until the buffer is
 * unregistered or the engine destroyed); the memory as for tide_te_register().
 * Thread: any.
 */
int tide_te_register_shared(struct tide_te *te, void *addr, size_t len, const char *location,
			    int fd, uint64_t offset);

/**
 * Unregister the buffer that starts at addr. Requests from peers that arrive
 * afterwards are refused; a request already copying finishes first.
 * \return 0; -ENOENT not a registered start address.
 */
int tide_te_unregister(struct tide_te *te, void *addr);

/**
 * Register [addr, addr+len) as a local source/destination of transfers, without
 * publishing it (peers cannot address it). Cheap for TCP (bookkeeping only). With RDMA
 * the buffer is registered once with every device here (or when "rdma" is installed
 * later), so transfers from and into it go straight to the NIC; a transfer whose local
 * range is not inside a registered buffer (tide_te_register or this) is copied through
 * a registered staging area instead. Never registers per transfer. A range inside a
 * tide_te_register()ed buffer is accepted and needs nothing new.
 * \return 0; -EINVAL addr NULL, len 0 or wrap-around; -EFAULT part of the range is not
 *         mapped in this process; -EEXIST overlaps another local
 *         registration or straddles a registered buffer's edge; -ENOMEM; a verbs error
 *         (-ENOMEM / -EPERM / -EFAULT: raise the memlock limit, logged).
 * Ownership: the memory stays the caller's; keep it valid and do not pass it to
 * tide_te_submit() after tide_te_unregister_local().
 * Thread: any; not concurrently with transfers that use the same range.
 */
int tide_te_register_local(struct tide_te *te, void *addr, size_t len);

/**
 * Undo tide_te_register_local() for the buffer that starts at addr. Transfers using it
 * must have ended. \return 0; -ENOENT not a start address registered that way.
 * Thread: any.
 */
int tide_te_unregister_local(struct tide_te *te, void *addr);

/**
 * Open a remote segment by name (fetching its descriptor through the metadata
 * service). Opening the local server name returns TIDE_TE_LOCAL_SEG.
 * \return 0 and *seg set; -ENOENT unknown segment, or a peer that has published
 *         no registered buffer yet (still starting; retry until a deadline);
 *         -EPROTO malformed descriptor (logged); -ETIMEDOUT/-ECONNREFUSED metadata
 *         or handshake failure.
 */
int tide_te_open_segment(struct tide_te *te, const char *name, tide_te_seg_t *seg);

/**
 * Buffer idx of an open segment's descriptor (sorted by address), as
 * Mooncake's getSegmentDescByID()->buffers[idx].
 * \return 0 and addr/len set; -ENOENT unknown handle or idx past the last buffer.
 */
int tide_te_segment_buffer(struct tide_te *te, tide_te_seg_t seg, uint32_t idx, uint64_t *addr,
			   uint64_t *len);

/** Close a segment handle. \return 0; -ENOENT unknown handle. */
int tide_te_close_segment(struct tide_te *te, tide_te_seg_t seg);

/**
 * Fetch the descriptor of every open segment again (Mooncake's syncSegmentCache).
 * \return 0, or the first error (other segments are still refreshed).
 */
int tide_te_sync_segments(struct tide_te *te);

/**
 * Allocate a batch of up to max_reqs requests.
 * \return 0; -EINVAL max_reqs 0 or above 1<<20; -ENOMEM.
 */
int tide_te_batch_alloc(struct tide_te *te, uint32_t max_reqs, tide_te_batch_t *batch);

/**
 * Free a batch. \return 0; -EBUSY a request is still WAITING/PENDING; -ENOENT unknown.
 */
int tide_te_batch_free(struct tide_te *te, tide_te_batch_t batch);

/**
 * Submit n requests into the batch (appended after earlier ones; task ids
 * are consecutive from the batch's count before the call). Requests whose
 * remote range is not inside a buffer of the peer's descriptor fail at once
 * with -EFAULT; the others start. One small request (at most 64 KiB) submitted
 * alone into a fresh batch, to a peer with an idle kernel-TCP connection, runs
 * on the calling thread: the call returns with it ended (at most io_timeout_ms
 * without progress later), sparing the hand-offs to the engine's threads. A
 * request inside a same-host peer's shared buffer (tide_te_register_shared) is
 * copied by the calling thread too, whatever its size: the call returns with it
 * ended, as for the local segment.
 * \return 0; -ENOSPC more requests than the batch holds; -EINVAL bad segment handle
 *         or opcode; -ENOENT unknown batch.
 * Thread: any, but one submitter per batch at a time.
 */
int tide_te_submit(struct tide_te *te, tide_te_batch_t batch, const struct tide_te_req *reqs,
		   uint32_t n);

/**
 * Status of request task_id of the batch.
 * \return 0 (status filled; INVALID for an unknown task); -ENOENT unknown batch.
 */
int tide_te_status(struct tide_te *te, tide_te_batch_t batch, uint32_t task_id,
		   struct tide_te_status *st);

/**
 * Wait, without spinning, until every submitted request of the batch has ended
 * (COMPLETED, FAILED or TIMEOUT) or timeout_ms passes (-1: no limit; requests
 * end on their own within io_timeout_ms).
 * \return 0 all ended (check each status); -ETIMEDOUT; -ENOENT unknown batch.
 */
int tide_te_wait(struct tide_te *te, tide_te_batch_t batch, int timeout_ms);

/**
 * Submit n requests of one opcode to one segment, given as three parallel arrays
 * (local[i] -> remote[i], len[i] bytes): what tide_te_submit() does with a request
 * array, without the caller building one (language bindings pass arrays).
 * Every argument is checked before the first request starts (-EINVAL for any slice
 * with len > 0 and local 0), so a refused call started nothing, except when another
 * thread closes the segment midway: then the requests submitted before end -ECANCELED.
 * \return as tide_te_submit(); -EINVAL also for NULL arrays with n > 0.
 * Thread: any, but one submitter per batch at a time.
 */
int tide_te_submit_v(struct tide_te *te, tide_te_batch_t batch, tide_te_seg_t seg,
		     enum tide_te_op op, const uint64_t *local, const uint64_t *remote,
		     const uint64_t *len, uint32_t n);

/**
 * Outcome of a batch, from its requests' states.
 * \return 0 every request COMPLETED (a batch with none counts as completed);
 *         -EINPROGRESS some request is still WAITING or PENDING; otherwise the error of
 *         the first request that ended FAILED or TIMEOUT (-ETIMEDOUT for TIMEOUT);
 *         -ENOENT unknown batch.
 * Thread: any.
 */
int tide_te_batch_result(struct tide_te *te, tide_te_batch_t batch);

/**
 * Give a batch back: freed now when no request is open, else by the first
 * tide_te_batch_alloc() after its last open request ended (requests end on their own
 * within io_timeout_ms; until destroy when no batch is allocated again). For a caller
 * that stops waiting at its own deadline: the batch id is invalid after this call
 * either way. Releasing does not cancel: until its open requests end, the engine
 * still reads and writes their local memory, which the caller keeps valid (at the
 * latest until tide_te_destroy() returns).
 * \return 0; -ENOENT unknown batch.
 * Thread: any, once per batch, not concurrently with a submit to it.
 */
int tide_te_batch_release(struct tide_te *te, tide_te_batch_t batch);

/**
 * One synchronous batch: allocate, submit the n requests (as tide_te_submit_v), wait
 * until they end or timeout_ms passes (-1: no limit), then release the batch.
 * \return 0 every request completed; -ETIMEDOUT the deadline passed first (the
 *         requests go on and the batch is freed when they end); the first failed
 *         request's error (see tide_te_batch_result); -EINVAL bad arguments (n 0 or
 *         above 1<<20, bad segment or opcode); -ENOMEM; -ENOSPC too many live batches.
 * Thread: any; many threads may transfer at once, to the same segment or others.
 */
int tide_te_transfer_sync(struct tide_te *te, tide_te_seg_t seg, enum tide_te_op op,
			  const uint64_t *local, const uint64_t *remote, const uint64_t *len,
			  uint32_t n, int timeout_ms);

/** A notification a peer sent (Mooncake's TransferMetadata::NotifyDesc). */
struct tide_te_notify {
	char *name; /**< the sender's text, NUL-terminated */
	char *msg;  /**< the message, NUL-terminated (JSON strings cannot hold NUL) */
};

/**
 * Send a notification to the engine named segment_name through its handshake daemon
 * (Mooncake's Notify message: {"name": name, "notify_msg": msg}); the peer keeps it for
 * its next tide_te_get_notifies(). Stock and Tide engines accept it alike.
 * \return 0 the peer accepted it; -EINVAL a NULL or over-long argument; -ECONNREFUSED
 *         the peer refused it (its queue is full); -EPROTO a reply that is not a notify
 *         reply; a handshake or metadata error (-ETIMEDOUT, -ECONNREFUSED,
 *         -EHOSTUNREACH, -ENOENT no such segment); -ENOMEM.
 * Thread: any.
 */
int tide_te_notify(struct tide_te *te, const char *segment_name, const char *name, const char *msg);

/**
 * Take every notification received since the last call, oldest first (the engine
 * keeps at most 65536 of them, 64 MiB in all; a peer sending past that is refused
 * and told so). *out is NULL when n is 0.
 * \return 0; -EINVAL out or n NULL.
 * Ownership: *out is the caller's; free it with tide_te_notifies_free(*out, *n).
 * Thread: any.
 */
int tide_te_get_notifies(struct tide_te *te, struct tide_te_notify **out, size_t *n);

/** Free what tide_te_get_notifies() returned. NULL is ignored. Thread: any. */
void tide_te_notifies_free(struct tide_te_notify *v, size_t n);

/**
 * Ask the engine named segment_name whether it answers (Mooncake's Probe message).
 * \return 0 it answered; -EINVAL bad name; a handshake or metadata error
 *         (-ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ENOENT no such segment).
 * Thread: any.
 */
int tide_te_probe(struct tide_te *te, const char *segment_name);

/** Name (segment name) peers use to reach this engine. Thread: any. */
const char *tide_te_local_name(const struct tide_te *te);

/** "host:rpc_port" of the handshake daemon and the data port. Thread: any. */
void tide_te_local_addr(const struct tide_te *te, char *host, size_t host_len, uint16_t *rpc_port,
			uint16_t *data_port);

/** Engine counters (racy reads). */
struct tide_te_stats {
	uint64_t reqs_submitted, reqs_completed, reqs_failed, reqs_timeout;
	uint64_t bytes_read, bytes_written; /**< by this engine as initiator */
	uint64_t srv_reads, srv_writes;     /**< requests served for peers */
	uint64_t srv_bytes;
	uint64_t srv_rejected;   /**< peer requests outside registered memory */
	uint64_t desc_refreshes; /**< descriptors fetched again (peer restarted) */
	uint64_t conn_failures;  /**< data connections lost or refused */
	uint64_t conns_refused;  /**< connections to our handshake or data port closed at accept
				      because the peer is outside TIDE_ALLOW_NETS */
};
void tide_te_stats_get(const struct tide_te *te, struct tide_te_stats *st);

/**
 * Stop every thread, close connections (in-flight requests end FAILED with
 * -ECANCELED), remove our metadata entries and free the engine. NULL is ignored.
 * Thread: any thread not inside another tide_te_* call on this engine.
 */
void tide_te_destroy(struct tide_te *te);

/** Message for an error this API returned (strerror plus engine-specific texts). */
const char *tide_te_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_TE_H */
