/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Network server of the Mooncake-compatible master (spec:
 * /work/shared/spec/mooncake-master.md, sections 1, 4, 6.2).
 *
 * Kernel TCP sockets and epoll. One control thread accepts RPC connections
 * (handing each to a worker round-robin), serves the admin HTTP port
 * (/health, /metrics, /get_all_segments, /query_key) and the optional
 * transfer-engine HTTP metadata server, and ticks the object table every
 * `tick_ms`. `rpc_thread_num` worker threads each own an epoll set of RPC
 * connections: non-blocking reads into a per-connection buffer, every
 * complete frame (pipelined ones too) decoded with the codec, executed on the
 * table (which locks internally; no lock is held across I/O) and answered in
 * arrival order, echoing the request's seq_num.
 *
 * Hostile input: a bad header (magic, version, serialize type) closes the
 * connection without an answer, as coro_rpc does; a body that does not
 * decode is answered with errc 4 and the connection keeps going; an
 * unregistered function id, or a registered one this master has no codec
 * for, with errc 11. A frame whose body + attachment exceeds
 * `max_frame_body` is refused from its header alone (errc 14 then close),
 * before anything of its body is buffered.
 *
 * HTTP (admin port, metadata server): one request per connection. Each port
 * has its own connection cap; at the cap, a new connection closes the least
 * recently active one of its port instead of being refused, so a flood of
 * idle connections cannot keep /health from answering. A connection is
 * closed when its request head is not complete within
 * http_header_timeout_ms of accept, its body within http_body_timeout_ms of
 * the head, or nothing moved for http_idle_timeout_ms (checked every tick).
 * A body over http_max_body is refused (413) from its Content-Length alone,
 * and a metadata PUT that would take the store past
 * http_metadata_max_bytes is refused (507). So the HTTP side holds at most
 * about conns x (16 KiB + max body) of request buffers.
 *
 * Who may connect: every port binds the address it is given (default
 * 0.0.0.0, as stock). With allow_networks set, a connection from an address
 * outside it is closed as soon as it is accepted, on every port, before a
 * byte is read; it is counted (refused_net) and logged, rate limited.
 * Nothing authenticates a peer that is allowed (stock has no authentication).
 *
 * Life cycle: tide_mc_server_create() binds every listening socket (so the
 * chosen ports are known at once; readiness = the RPC port accepts), starts
 * the threads and returns. tide_mc_server_stop() stops accepting, closes
 * every connection and joins the threads; tide_mc_server_destroy() frees.
 */
#ifndef TIDE_MC_SERVER_H
#define TIDE_MC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_mc_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Store version string ServiceReady answers; clients refuse any other (spec 5.2). */
#define TIDE_MC_SERVER_VERSION "2.0.0"
/** Default bound on a request body + attachment (64 MiB). */
#define TIDE_MC_SERVER_MAX_FRAME_BODY (64u << 20)
/** Most RPC worker threads. */
#define TIDE_MC_SERVER_MAX_THREADS 64u

/** Server options; fill with tide_mc_server_opts_init() first. */
struct tide_mc_server_opts {
	size_t opts_size;               /**< sizeof(struct tide_mc_server_opts) */
	const char *rpc_address;        /**< IPv4 address to bind; default "0.0.0.0" */
	uint16_t rpc_port;              /**< 0 = ephemeral; default 50051 */
	unsigned rpc_thread_num;        /**< workers, 1..TIDE_MC_SERVER_MAX_THREADS; default 2 */
	bool enable_metrics;            /**< serve the admin HTTP port; default true */
	const char *metrics_host;       /**< default "0.0.0.0" */
	uint16_t metrics_port;          /**< 0 = ephemeral; default 9003 */
	bool enable_http_metadata;      /**< built-in TE metadata server; default false */
	const char *http_metadata_host; /**< default "0.0.0.0" */
	uint16_t http_metadata_port;    /**< 0 = ephemeral; default 8080 */
	uint32_t max_frame_body;        /**< request body + attachment bound; default 64 MiB */
	uint32_t tick_ms;               /**< table tick period, 1..1000; default 100 */
	const char *fsdir;              /**< GetFsdir / GetStorageConfig fsdir; default "" */
	bool enable_disk_eviction;      /**< GetStorageConfig; default true */
	uint64_t quota_bytes;           /**< GetStorageConfig; default 0 */
	/* HTTP bounds (admin port and metadata server; Tide, stock has none). 0 = default. */
	uint32_t http_admin_max_conns;    /**< connections on the admin port; default 64 */
	uint32_t http_metadata_max_conns; /**< connections on the metadata port; default 256 */
	uint32_t http_max_body;           /**< request body (a metadata value), bytes; 413 beyond;
					       default 4 MiB (the admin port: at most 64 KiB) */
	uint64_t http_metadata_max_bytes; /**< metadata store, keys + values; 507 beyond; default
					       256 MiB */
	uint32_t http_header_timeout_ms;  /**< request head complete within this from accept;
					       default 10000 */
	uint32_t http_body_timeout_ms;    /**< body complete within this from the end of the head;
					       default 30000 */
	uint32_t http_idle_timeout_ms;    /**< no byte received or sent for this long; default
					       10000 */
	struct tide_mc_table_opts table;  /**< object table options (stock defaults) */
	/** Peers allowed on every port: comma list of networks (tide_cidr.h: 10.0.0.0/8,
	    192.168.1.7, fd00::/8); NULL or "" = any (stock). Tide; default "". */
	const char *allow_networks;
	/** Tide, for HA standbys: bind the admin and metadata ports but not the RPC port
	    until tide_mc_server_start_rpc() (a standby refuses RPC connections, as stock's).
	    Default false. */
	bool defer_rpc;
	/** Tide: answer Tide's own functions (TideLease*: one-round-trip puts) as a stock
	    master does, "function not registered", so clients use PutStart/PutEnd.
	    Default false (served). */
	bool no_tide_ext;
};

/** What /health, /role, /ha_status and /leader say of an HA master (see
 *  tide_mc_server_set_ha). Strings are copied. */
struct tide_mc_ha_view {
	const char *role;           /**< "leader" or "standby" */
	const char *state;          /**< "standby", "candidate", "serving", ... */
	const char *leader_address; /**< "ip:port" of the known leader, NULL/"" if none */
	int64_t view_version;       /**< master_view's create_revision; 0 if none */
};

/** Defaults of the HTTP bounds (struct tide_mc_server_opts). */
#define TIDE_MC_HTTP_ADMIN_MAX_CONNS    64u
#define TIDE_MC_HTTP_METADATA_MAX_CONNS 256u
#define TIDE_MC_HTTP_MAX_BODY           (4u << 20)
#define TIDE_MC_HTTP_ADMIN_MAX_BODY     (64u << 10)
#define TIDE_MC_HTTP_METADATA_MAX_BYTES (256ull << 20)
#define TIDE_MC_HTTP_HEADER_TIMEOUT_MS  10000u
#define TIDE_MC_HTTP_BODY_TIMEOUT_MS    30000u
#define TIDE_MC_HTTP_IDLE_TIMEOUT_MS    10000u

/** Per-RPC statistics summed over the workers, for /metrics and tests. */
struct tide_mc_server_fn_stats {
	uint64_t calls;    /**< frames of this function answered */
	uint64_t failures; /**< of which answered with a non-ok result (any element for batches) */
	uint64_t lat_sum_us;
	/** Latency histogram: bucket i counts calls <= TIDE_MC_SERVER_LAT_BOUNDS_US[i] microseconds
	    (not cumulative); the last bucket is +Inf. */
	uint64_t lat_bucket[12];
};

/** Upper bounds (us) of the first 11 latency buckets. */
extern const uint32_t TIDE_MC_SERVER_LAT_BOUNDS_US[11];

/** Connection-level counters. */
struct tide_mc_server_stats {
	uint64_t accepted;       /**< RPC connections accepted */
	uint64_t open;           /**< RPC connections open now */
	uint64_t closed_proto;   /**< closed for a bad header */
	uint64_t refused_large;  /**< frames refused for size */
	uint64_t bad_body;       /**< errc 4 answers */
	uint64_t unknown_fn;     /**< errc 11 answers */
	uint64_t http_open[2];   /**< HTTP connections open: [0] admin port, [1] metadata port */
	uint64_t http_evicted;   /**< HTTP connections closed at a port's cap for a new one */
	uint64_t http_timed_out; /**< HTTP connections closed by a deadline */
	uint64_t metadata_bytes; /**< metadata store size (keys + values) */
	uint64_t refused_net;    /**< connections closed at accept, any port: peer outside
				      allow_networks */
	struct tide_mc_server_fn_stats fn[TIDE_MC_FN_COUNT];
};

/** The server; opaque. */
struct tide_mc_server;

/**
 * Fill opts with the stock master's defaults (and the table's).
 * \param opts_size  sizeof(*opts) as the caller compiled it.
 * Thread: any.
 */
void tide_mc_server_opts_init(struct tide_mc_server_opts *opts, size_t opts_size);

/**
 * Create the table, bind and listen on every enabled port, start the
 * control thread and the workers.
 * \param opts      Options; strings are copied.
 * \param[out] out  The running server.
 * \return 0; -EINVAL bad option (thread count, tick, address not IPv4,
 *         opts_size too small, bad table option, allow_networks not a list of
 *         networks: logged naming the entry); -EADDRINUSE / other
 *         -errno from socket/bind/listen; -ENOMEM; -EAGAIN thread creation.
 *         Nothing is left running on failure.
 * Thread: any. Ownership: stop and destroy with tide_mc_server_destroy().
 */
int tide_mc_server_create(const struct tide_mc_server_opts *opts, struct tide_mc_server **out);

/**
 * Stop accepting, close every connection (pending answers are dropped),
 * join every thread. Idempotent.
 * Thread: any thread but the server's own; not concurrently with destroy.
 */
void tide_mc_server_stop(struct tide_mc_server *s);

/**
 * Stop (if running) and free the server and its table. NULL-safe.
 * Thread: the owner, once.
 */
void tide_mc_server_destroy(struct tide_mc_server *s);

/**
 * Bind and listen on the RPC port now (a server created with defer_rpc).
 * Until then the table's periodic work (expiry, eviction, delayed releases)
 * does not run, so a table being rebuilt is not changed under the rebuild;
 * at the start every client's TTL starts again from now.
 * \return 0; -EALREADY it listens already; -errno from socket/bind/listen/epoll
 *         (logged). Thread: any but the server's own; not concurrently with stop.
 */
int tide_mc_server_start_rpc(struct tide_mc_server *s);

/**
 * Hold every RPC reply until the table's journal has stored the changes
 * made before it (HA with a replicated table): a reply built when the
 * journal's number was N (tide_mc_table_journal_seq() after the call) is
 * sent once tide_mc_server_set_durable() has reported a number >= N (a Ping
 * waits for nothing, a PutStart that placed every key for
 * tide_mc_table_journal_free_seq()). Replies on one connection stay in
 * order. Call before tide_mc_server_start_rpc().
 * \param durable  the last record already stored (the log a new leader
 *                 replayed); records made after it wait for set_durable().
 * \return 0; -EINVAL s NULL or RPC already started.
 * Thread: any but the server's own.
 */
int tide_mc_server_hold_replies(struct tide_mc_server *s, uint64_t durable);

/**
 * An HA leader is certain of its leadership only until deadline_us
 * (CLOCK_MONOTONIC microseconds; 0: no deadline): a request taken after it is
 * not answered and its connection is closed (the client looks the leader up
 * again). Moved forward at each lease renewal. Thread: any.
 */
void tide_mc_server_set_lease_deadline(struct tide_mc_server *s, uint64_t deadline_us);

/**
 * The journal has stored every record up to seq: send the replies that were
 * waiting for it. Numbers only grow (a smaller one is ignored).
 * Thread: any (the journal's writer); wakes the workers.
 */
void tide_mc_server_set_durable(struct tide_mc_server *s, uint64_t seq);

/**
 * Report HA role and state on the admin port: /health answers stock's JSON
 * ({"status":"ok","role":...,"ha_state":...,"service_ready":bool,
 * "leader_address":...,"view_version":N}, the last two when a leader is
 * known), /role and /ha_status the plain role and state, /leader
 * {"present":bool,"leader_address":...,"view_version":N}. Before the first
 * call (no HA) /health answers "OK" as before. NULL v is -EINVAL.
 * \return 0; -ENOMEM; -EINVAL. Thread: any.
 */
int tide_mc_server_set_ha(struct tide_mc_server *s, const struct tide_mc_ha_view *v);

/** Bound RPC port (the ephemeral one if 0 was asked). Thread: any. */
uint16_t tide_mc_server_rpc_port(const struct tide_mc_server *s);

/** Bound admin HTTP port; 0 when disabled. Thread: any. */
uint16_t tide_mc_server_metrics_port(const struct tide_mc_server *s);

/** Bound metadata HTTP port; 0 when disabled. Thread: any. */
uint16_t tide_mc_server_metadata_port(const struct tide_mc_server *s);

/**
 * The object table the server serves (for in-process inspection by tests).
 * Owned by the server; valid until destroy. Thread: any (internal lock).
 */
struct tide_mc_table *tide_mc_server_table(struct tide_mc_server *s);

/**
 * Sum the workers' counters (relaxed reads: consistent per counter, not
 * across counters).
 * Thread: any.
 */
void tide_mc_server_stats_get(struct tide_mc_server *s, struct tide_mc_server_stats *out);

/**
 * Milliseconds of the monotonic clock the server passes to the table.
 * Thread: any.
 */
uint64_t tide_mc_server_now_ms(void);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_MC_SERVER_H */
