/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to engine/te: the seam between the engine core (te_engine.c:
 * batches, segments, registered memory) and a data transport (kernel sockets,
 * user-space TCP on DPDK lcores, RDMA verbs).
 *
 * The core splits each request into slices (at most slice_size bytes, never
 * crossing a registered-buffer boundary on the remote side) and hands them to
 * the transport of the segment's peer. The transport moves them over one of
 * its connections and reports each slice exactly once through te_slice_done(),
 * from any of its threads. The core never blocks inside the transport and the
 * transport never calls back into the core other than te_slice_done() and the
 * te_srv_ctx hooks.
 */
#ifndef TE_XPORT_H
#define TE_XPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "te_meta.h" /* meta/ */

struct te_task;          /* core-private */
struct tide_lcore_group; /* engine/lcore */

/* One contiguous piece of a request. */
struct te_slice {
	struct te_slice *next; /* free for the transport's queues while it owns the slice */
	struct te_task *task;  /* core-private */
	uint8_t op;            /* TIDE_TE_READ / TIDE_TE_WRITE */
	uint8_t *local;        /* local address */
	uint64_t remote;       /* absolute remote address */
	uint32_t len;          /* 1..slice_size */
	uint64_t submitted_ns; /* CLOCK_MONOTONIC at hand-over */
	/* Free for the transport while it owns the slice (e.g. a completion held
	 * back until the device released the slice's zero-copy frames). */
	uint64_t xport_mark;
	int xport_err;
	uint32_t xport_key; /* free for the transport (rdma: the remote key) */
};

/*
 * Locking rule for the core: peer_close and destroy wait for the transport's
 * threads, so they must never be called from inside te_slice_done() or while
 * holding a lock that te_slice_done() takes.
 *
 * Report a slice: err 0, or -errno: -ECONNRESET / -EPIPE peer vanished,
 * -EFAULT the peer refused the address, -ETIMEDOUT no progress within
 * io_timeout_ms, -ECONNREFUSED / -EHOSTUNREACH could not connect, -ESTALE the
 * peer restarted (instance changed), -ECANCELED transport stopping.
 * Thread: any; exactly once per slice; the slice must not be touched afterwards.
 */
void te_slice_done(struct te_slice *s, int err);

/*
 * What the data server needs from the core. check() decides whether a peer's
 * request may touch [addr, addr+len) of our memory; it takes a read reference
 * that release() drops once nothing reads or writes that memory any more, so
 * an unregister waits for transfers in progress and memory is never touched
 * after it is unregistered. For a copying transport that is after the copy;
 * for a zero-copy one (tcp-dpdk sends READ replies as frames referencing the
 * memory) after the peer acknowledged the bytes and the device released every
 * frame carrying them, retransmissions included. release() is called on the
 * thread that called check(), except at transport destroy, where references
 * still held once the polling threads stopped are dropped by the destroying
 * thread (te_engine.c's read lock allows that).
 */
struct te_srv_ctx {
	bool (*check)(void *arg, uint64_t addr, uint64_t len);
	void (*release)(void *arg);
	void (*count)(void *arg, uint8_t op, uint64_t bytes, bool rejected);
	void *arg;
	uint64_t instance; /* our tide_instance (native framing hello) */
};

/* Where and how to reach a peer; built by the core from the descriptor. */
struct te_peer_addr {
	char host[TE_NAME_MAX]; /* IPv4 literal or resolvable host */
	uint16_t data_port;
	uint32_t proto;             /* framing to speak: TE_PROTO_V1, V2 or NATIVE */
	uint64_t instance;          /* peer's tide_instance (NATIVE only) */
	char name[TE_NAME_MAX];     /* the peer's segment name (rdma: handshake target) */
	const struct te_desc *desc; /* the peer's descriptor; valid during peer_open only */
};

/* Meta services a transport may need (rdma: the Connection handshake). */
struct te_meta_hooks {
	/* One Connection request to segment peer's handshake daemon; reply malloc'd. */
	int (*conn_request)(void *arg, const char *peer, const char *json, size_t len, char **reply,
			    size_t *reply_len);
	/* The descriptor of segment peer (free with te_desc_free). */
	int (*fetch_desc)(void *arg, const char *peer, struct te_desc **out);
	void *arg;
};

struct te_xport_cfg {
	const char *bind_ip; /* kernel data port: IPv4 literal or name; NULL: any */
	uint16_t data_port;  /* 0: ephemeral */
	/*
	 * Peers that may connect to the data port (TIDE_ALLOW_NETS); NULL or empty:
	 * any. A connection from elsewhere is closed at accept, before a byte is
	 * read, and counted in *refused (when not NULL). Both owned by the core,
	 * valid until destroy; the list is not written while a transport runs.
	 */
	const struct tide_cidr_list *allow;
	_Atomic uint64_t *refused;
	uint32_t conns_per_peer; /* >= 1 */
	uint32_t io_threads;     /* >= 1 */
	uint32_t io_timeout_ms;
	uint32_t connect_timeout_ms;
	/* Microseconds a caller waiting for a small request's answer polls before it
	 * sleeps (TIDE_DATA_POLL_US; tcp-kernel's inline requests); 0: sleep at once. */
	uint32_t poll_us;
	uint32_t slice_size;
	struct te_srv_ctx srv;
	const char *node_env;     /* node environment file (tcp-dpdk); NULL: $TIDE_NODE_ENV */
	const char *local_name;   /* our segment name (rdma NIC paths "<name>@<device>") */
	const char *rdma_devices; /* rdma: device list; NULL: MOONCAKE_DEVICE of the node env */
	struct te_meta_hooks meta;
	/*
	 * rdma: poll the CQs on these workers (another transport's, see ops->lcores)
	 * instead of starting its own; NULL: own workers. The group must be running
	 * with a CLOCK_MONOTONIC clock, and keep running until the borrowing
	 * transport's destroy returned (destroy the borrower first).
	 */
	struct tide_lcore_group *shared_lcores;
	/*
	 * rdma: a node without verbs or without a device is expected (the core serves
	 * rdma over TCP there, TIDE_RDMA_AS_TCP): say why at INFO, not ERR, and still
	 * fail with -EPROTONOSUPPORT.
	 */
	bool absent_ok;
};

struct te_xport;
struct te_xpeer; /* transport-private per-peer state */

struct te_xport_ops {
	const char *name; /* "tcp-kernel", "tcp-dpdk", ... */
	/* Start threads and the data server. -EADDRINUSE; -ENOMEM. */
	int (*create)(const struct te_xport_cfg *cfg, struct te_xport **out);
	/* Port the data server listens on. */
	uint16_t (*data_port)(const struct te_xport *x);
	/* Optional: the address peers must connect to when it is not the engine's host
	 * (the user-space stack has its own IP, TIDE_DATA_IP). NULL: the engine's host. */
	void (*data_host)(const struct te_xport *x, char *host, size_t len);
	/* Per-peer state (no I/O yet: connections are opened lazily, non-blocking). */
	int (*peer_open)(struct te_xport *x, const struct te_peer_addr *addr,
			 struct te_xpeer **out);
	/* Fail every queued and in-flight slice of the peer with err, close its
	 * connections and free it. Called when a segment closes or its descriptor changes. */
	void (*peer_close)(struct te_xport *x, struct te_xpeer *p, int err);
	/* Queue slices (linked through ->next) for the peer. Never blocks; 0 or -errno
	 * (then none were taken). */
	int (*submit)(struct te_xport *x, struct te_xpeer *p, struct te_slice *head);
	/* Stop: every slice still owned ends with -ECANCELED; then free. */
	void (*destroy)(struct te_xport *x);
	/*
	 * Optional (rdma), NULL for TCP transports. Local memory: mem_reg gives
	 * [addr, addr+len) keys on every device, once (segment buffers and local
	 * buffers alike; never per transfer); mem_dereg drops the region starting at
	 * addr. describe adds the transport's part to our descriptor (protocol, devices,
	 * every buffer's keys). on_connection answers a peer's Connection handshake
	 * (daemon thread; may block up to the metadata timeout).
	 */
	int (*mem_reg)(struct te_xport *x, uint64_t addr, uint64_t len);
	int (*mem_dereg)(struct te_xport *x, uint64_t addr);
	int (*describe)(struct te_xport *x, struct te_desc *d);
	int (*on_connection)(struct te_xport *x, const char *json, size_t len, char **reply,
			     size_t *reply_len);
	/*
	 * Optional (tcp-dpdk): the running polling workers this transport owns, so
	 * another transport can add its pollers there (te_xport_cfg.shared_lcores)
	 * instead of burning CPUs of its own. NULL op or NULL result: none. Valid
	 * until destroy; the engine destroys borrowers first.
	 */
	struct tide_lcore_group *(*lcores)(struct te_xport *x);
	/*
	 * Optional (tcp-kernel), both or neither: run one small request on the
	 * calling thread instead of the transport's threads. inline_begin, called
	 * where submit would be (the core's segment lock held), takes slice s
	 * (s->next NULL) only if it can start at once on an idle connection, and
	 * then returns a handle; NULL: not taken, submit it. The core must then
	 * call inline_run(handle) exactly once, on the same thread, holding no core
	 * lock; it moves the request and returns once the connection is back with
	 * the transport, normally with s reported through te_slice_done() (on the
	 * calling thread). It blocks at most io_timeout_ms without progress, and
	 * returns early, s still in flight, when the peer is being closed. s is
	 * reported exactly once either way; the peer stays open until it returned.
	 */
	void *(*inline_begin)(struct te_xport *x, struct te_xpeer *p, struct te_slice *s);
	void (*inline_run)(struct te_xport *x, void *handle);
};

/*
 * Tests only: the engine installs ops as its TCP transport instead of choosing
 * kernel sockets or user-space TCP from the node file (e.g. kernel sockets that
 * also lend a test's lcore group through ->lcores). NULL restores the choice.
 * Process-wide; set before installing a transport. Thread: any.
 */
void te_engine_tcp_ops_override(const struct te_xport_ops *ops);

extern const struct te_xport_ops te_tcp_kernel_ops;
extern const struct te_xport_ops te_tcp_dpdk_ops;
extern const struct te_xport_ops te_rdma_ops;

#endif /* TE_XPORT_H */
