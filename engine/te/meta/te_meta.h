/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Internal to engine/te: segment descriptors (Mooncake's JSON), the HTTP
 * metadata client, the handshake daemon and client, and the metadata layer
 * that picks P2PHANDSHAKE or HTTP. Formats: ../shared/spec/mooncake-master.md
 * section 6.2-6.4.
 *
 * Every function returns 0 or -errno. Functions that parse peer input take
 * an `err` buffer (may be NULL) that receives a one-line reason naming the
 * offending field ("buffers[2].length: missing"), for logs.
 */
#ifndef TE_META_H
#define TE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_cidr.h"

#define TE_NAME_MAX      256         /* segment and buffer names, bytes incl. NUL */
#define TE_DESC_MAX_BUFS 65536       /* buffers per descriptor accepted from a peer */
#define TE_HS_MAX_LEN    (1 << 20)   /* handshake frame payload limit (MC_HANDSHAKE_MAX_LENGTH) */
#define TE_HTTP_MAX_BODY (64u << 20) /* largest HTTP reply body accepted (64 MiB) */

/** Handshake message types (first byte after the u64 length). */
#define TE_HS_CONNECTION 0
#define TE_HS_METADATA   1
#define TE_HS_NOTIFY     2
#define TE_HS_PROBE      3

/** tcp_proto_version values: 1 and 2 are Mooncake's; 3 is Tide's native pipelined framing. */
#define TE_PROTO_V1     1
#define TE_PROTO_V2     2
#define TE_PROTO_NATIVE 3

#define TE_DESC_MAX_DEVS 16 /* RDMA devices per descriptor (Tide and Mooncake nodes use 1..8) */
#define TE_DEV_NAME_MAX  64 /* RDMA device name, bytes incl. NUL */
#define TE_GID_STR_MAX   48 /* "xx:xx:...:xx" (47) + NUL */

struct te_desc_buf {
	char name[TE_NAME_MAX];
	uint64_t addr;
	uint64_t length;
	/* RDMA only ("protocol":"rdma"): the buffer's keys, one per entry of devices[], in
	 * the same order; nkeys is 0 in a TCP descriptor. */
	uint32_t nkeys;
	uint32_t rkey[TE_DESC_MAX_DEVS];
	uint32_t lkey[TE_DESC_MAX_DEVS];
	/* Tide extension "tide_shm" ({"fd","ino","off"}, absent => shm false): the buffer
	 * is the mapping of a memory file of the owner process, its descriptor shm_fd
	 * there, inode shm_ino, from byte shm_off. A peer on the same host (host_id and
	 * pid below) may map the file instead of using the network (engine/te/te_shm.h). */
	bool shm;
	int32_t shm_fd;
	uint64_t shm_ino;
	uint64_t shm_off;
};

/** An RDMA device of a descriptor, as Mooncake's DeviceDesc. */
struct te_desc_dev {
	char name[TE_DEV_NAME_MAX]; /* "mlx5_0" */
	uint16_t lid;               /* 0 on RoCE */
	char gid[TE_GID_STR_MAX];   /* "00:00:...:ff:ff:0a:00:00:01" */
};

/** A segment descriptor: TCP, or RDMA (which may also carry a TCP data port). */
struct te_desc {
	char name[TE_NAME_MAX];
	char protocol[16];          /* "tcp" or "rdma" (others parsed, kept, not used) */
	uint16_t tcp_data_port;     /* required for "tcp"; "rdma": 0 = no TCP server */
	uint32_t tcp_proto_version; /* absent => 1 */
	char timestamp[32];         /* "YYYY-MM-DD HH:MM:SS", informational */
	/* Tide extension "tide_instance" (hex string, absent => 0): a random value chosen at
	 * engine start; a changed value means the peer restarted and every cached address
	 * is stale. Stock Mooncake ignores unknown keys. */
	uint64_t instance;
	/* Tide extension "tide_data_ip" (IPv4 literal, absent => ""): the address of the
	 * data server when it is not the handshake host, e.g. a user-space TCP stack on a
	 * DPDK port with its own address. Tide initiators connect there; stock Mooncake
	 * ignores it (and reaches the handshake host). */
	char data_ip[16];
	/* Tide extensions "tide_pid" and "tide_host" (absent => 0 and ""): the owner's
	 * process id and host identity ("<boot id>/<PID namespace inode>"); with shared
	 * buffers (te_desc_buf.shm) a peer with the same identity may map them. */
	int32_t pid;
	char host_id[80];
	uint32_t nbufs;
	struct te_desc_buf *bufs; /* malloc'd array of nbufs, sorted by addr on decode */
	/* RDMA only: the devices buffers' keys refer to (ndevs 0 in a TCP descriptor). */
	uint32_t ndevs;
	struct te_desc_dev devs[TE_DESC_MAX_DEVS];
};

/** True when d is an RDMA descriptor with at least one device (keys checked on decode). */
bool te_desc_is_rdma(const struct te_desc *d);

/**
 * Descriptor JSON: {"name","protocol","tcp_data_port","tcp_proto_version","timestamp",
 * "tide_instance":"<16 hex digits>","buffers":[{"name","addr","length"}]}.
 * With protocol "rdma" (Mooncake's RDMA descriptor) also "devices":[{"name","lid","gid"}],
 * per buffer "rkey":[...] and "lkey":[...] (one per device) and "priority_matrix"
 * ({"<location>": [[devices], []]} for every buffer location: every device is preferred).
 * addr/length are written as exact JSON integers when < 2^53 (what Mooncake reads) and as
 * decimal strings otherwise; te_desc_decode accepts both forms (see te_desc_decode).
 * \param desc  Descriptor; bufs are written in array order (not re-sorted).
 * \param[out] json  malloc'd NUL-terminated text; caller frees with free().
 * \return 0; -ENOMEM.
 * Thread: any.
 */
int te_desc_encode(const struct te_desc *desc, char **json);
/**
 * Parse a descriptor. Rules of Mooncake's decoder: name, protocol and
 * tcp_data_port required (tcp_data_port 1..65535); each buffer needs a non-empty
 * name, non-zero addr and length, and addr + length must not wrap (an end of exactly
 * 2^64 counts as a wrap). Buffers that overlap are rejected. Also rejected: malformed
 * JSON, trailing text or embedded NULs, a non-object root, wrong types, names of
 * TE_NAME_MAX bytes or more, protocol of 16 bytes or more, tcp_proto_version 0 or
 * > 2^32-1, a tide_instance that is not 1..16 hex digits, more than TE_DESC_MAX_BUFS
 * buffers. u64 fields: a JSON number must be integral, >= 0 and < 2^53 (larger doubles
 * are inexact); a string of decimal digits is accepted for any u64. Unknown keys are
 * ignored; "buffers" absent or null means no buffers; an over-long timestamp is truncated.
 * protocol "rdma" (Mooncake's rules plus bounds): tcp_data_port may be absent (0);
 * "devices" up to TE_DESC_MAX_DEVS entries (absent = none), each with a non-empty name
 * shorter than TE_DEV_NAME_MAX, a non-empty GID string shorter than TE_GID_STR_MAX and lid
 * 0..65535; every buffer needs "rkey" and "lkey" arrays of u32, as many as devices (so
 * buffers without devices are rejected); priority_matrix is ignored.
 * \param json, len  Text (need not be NUL-terminated).
 * \param[out] out  malloc'd on success, bufs sorted by addr; free with te_desc_free().
 * \param err, errlen  Reason on failure, naming the field (may be NULL).
 * \return 0; -EPROTO with err filled on any violation; -ENOMEM.
 * Thread: any.
 */
int te_desc_decode(const char *json, size_t len, struct te_desc **out, char *err, size_t errlen);
/** Free a descriptor from te_desc_decode() or te_desc_dup(). NULL ignored. Thread: any. */
void te_desc_free(struct te_desc *desc);
/**
 * Check a locally built descriptor with the decoder's buffer rules (non-empty name,
 * non-zero addr and length, no wrap, no overlap, at most TE_DESC_MAX_BUFS) and sort its
 * bufs by addr in place, as te_desc_contains() requires.
 * \return 0; -EINVAL with err naming the buffer; -ENOMEM. Thread: caller owns desc.
 */
int te_desc_normalize(struct te_desc *desc, char *err, size_t errlen);
/**
 * Deep copy. \param[out] out  malloc'd; free with te_desc_free().
 * \return 0; -ENOMEM. Thread: any.
 */
int te_desc_dup(const struct te_desc *desc, struct te_desc **out);
/**
 * True when [addr, addr+len) lies inside one buffer of desc (len 0: addr inside one).
 * Binary search: desc->bufs must be sorted by addr and non-overlapping (te_desc_decode
 * and te_desc_normalize guarantee it). Thread: any (read only).
 */
bool te_desc_contains(const struct te_desc *desc, uint64_t addr, uint64_t len);
/** True when a and b describe the same segment instance (name, port, version, instance,
 * buffers in order with their keys, devices; timestamp is ignored). Thread: any. */
bool te_desc_equal(const struct te_desc *a, const struct te_desc *b);

/**
 * {"ip_or_host_name": "...", "rpc_port": N}.
 * \param[out] json  malloc'd; caller frees. \return 0; -ENOMEM. Thread: any.
 */
int te_rpcmeta_encode(const char *host, uint16_t port, char **json);
/**
 * Parse rpc_meta: ip_or_host_name a non-empty string shorter than host_len, rpc_port an
 * integral number 1..65535.
 * \return 0 with host and *port set; -EPROTO with err naming the field. Thread: any.
 */
int te_rpcmeta_decode(const char *json, size_t len, char *host, size_t host_len, uint16_t *port,
		      char *err, size_t errlen);

/**
 * HTTP metadata client (GET/PUT/DELETE <url>?key=<urlencoded>), HTTP/1.1 over kernel
 * TCP, one request per connection, connect and I/O timeouts. Thread-safe (no shared
 * state beyond the parsed URL).
 * The key is percent-encoded except RFC 3986 unreserved characters ('/' becomes %2F, as
 * curl_easy_escape does). A URL that already has a query gets "&key=". Replies may use
 * Content-Length, chunked encoding or close-delimited bodies; 1xx replies are skipped.
 * Bounds: header lines 8 KiB, 100 headers, body TE_HTTP_MAX_BODY; larger is -EPROTO.
 */
struct te_http;
/**
 * url: "http://host[:port][/path][?query]" (host: name, IPv4, or [IPv6]; port default 80).
 * \param timeout_ms  Budget of each whole request (resolve + connect + send + reply).
 * \param[out] out  Handle; free with te_http_close().
 * \return 0; -EINVAL malformed (err says why); -EPROTONOSUPPORT https; -ENOMEM.
 * Thread: any.
 */
int te_http_open(const char *url, int timeout_ms, struct te_http **out, char *err, size_t errlen);
/** Free the handle. NULL ignored. No request may be in progress. */
void te_http_close(struct te_http *h);
/** 0 and *body (malloc'd, NUL-terminated; *len without the NUL, len may be NULL) on any
 * 2xx; -ENOENT on 404; -EPROTO other status or malformed/oversized reply;
 * -ECONNREFUSED / -ETIMEDOUT / -EHOSTUNREACH network errors (also unresolvable host);
 * -ENOMEM. Thread: any. */
int te_http_get(struct te_http *h, const char *key, char **body, size_t *len);
/** PUT body as application/json. 0 on 2xx; -EEXIST on 400 (the server refused a
 * conflicting value); others as get. Thread: any. */
int te_http_put(struct te_http *h, const char *key, const char *body, size_t len);
/** 0 on 2xx or 404; others as get. Thread: any. */
int te_http_del(struct te_http *h, const char *key);

/**
 * Handshake daemon: a kernel TCP listener; one request per connection: u64 length
 * (little-endian, counts the type byte) + u8 type + JSON; the reply has the same
 * framing and type, then the daemon shuts down its write side. A frame over
 * TE_HS_MAX_LEN, a short read or a timeout closes the connection (logged, rate
 * limited); the daemon keeps serving. Legacy untyped frames (first byte > 3) are
 * treated as Metadata and answered untyped (u64 length + JSON). Runs one thread
 * that multiplexes up to 64 connections with poll(); each connection must complete
 * within the daemon's timeout (default 3000 ms) from accept; when 64 are open the
 * oldest is evicted.
 */
struct te_hs_daemon;
/** Handler for one request; returns 0 and a malloc'd reply (NULL/0 means empty), or
 * -errno (connection closed without a reply). json is NUL-terminated at json[len].
 * Called on the daemon thread; must not block. */
typedef int (*te_hs_handler_fn)(void *arg, uint8_t type, const char *json, size_t len, char **reply,
				size_t *reply_len);
/**
 * \param bind_ip  IPv4 or IPv6 literal; NULL or "" = any IPv4 address.
 * \param port  0 = ephemeral (see te_hs_daemon_port()).
 * \return 0; -EADDRINUSE; -EINVAL bad bind_ip or fn NULL; -ENOMEM; other -errno.
 * Thread: any. Ownership: stop with te_hs_daemon_stop().
 */
int te_hs_daemon_start(const char *bind_ip, uint16_t port, te_hs_handler_fn fn, void *arg,
		       struct te_hs_daemon **out);
/** Bound port. Thread: any. */
uint16_t te_hs_daemon_port(const struct te_hs_daemon *d);
/**
 * Peers that may connect from now on (TIDE_ALLOW_NETS): a connection from any
 * other address is closed as soon as it is accepted, before a byte is read or
 * a connection slot taken, logged (rate limited) and counted. Connections
 * already open are not affected, so set it right after start, before anything
 * worth reading is published.
 * \param allow  Copied; NULL or an empty list allows every peer (the default).
 * Thread: any.
 */
void te_hs_daemon_set_allow(struct te_hs_daemon *d, const struct tide_cidr_list *allow);
/** Connections refused by the allowlist since start. Thread: any. */
uint64_t te_hs_daemon_refused(const struct te_hs_daemon *d);
/** Per-connection budget for connections accepted from now on (<= 0: default 3000 ms).
 * Thread: any. */
void te_hs_daemon_set_timeout(struct te_hs_daemon *d, int timeout_ms);
/** Stop the thread and close the listener; in-progress requests are cut. Returns within
 * about a poll round trip. NULL ignored. Thread: any but the daemon's (handler). */
void te_hs_daemon_stop(struct te_hs_daemon *d);
/**
 * One request/reply, typed framing, whole exchange within timeout_ms. *reply malloc'd
 * and NUL-terminated at (*reply)[*reply_len].
 * \return 0; -ECONNREFUSED/-ETIMEDOUT/-EHOSTUNREACH; -EPROTO bad reply (type mismatch,
 * length 0 or over TE_HS_MAX_LEN, closed early); -EINVAL type > 3; -EMSGSIZE request
 * over TE_HS_MAX_LEN - 1; -ENOMEM. Thread: any.
 */
int te_hs_request(const char *host, uint16_t port, uint8_t type, const char *json, size_t len,
		  int timeout_ms, char **reply, size_t *reply_len);

/**
 * Metadata layer. Mode from the connection string: "P2PHANDSHAKE" (nothing stored;
 * a segment name is "host:rpc_port" and its descriptor comes from that daemon's
 * Metadata reply), "http://..." (descriptor at key "mooncake/ram/<name>", daemon
 * address at "mooncake/rpc_meta/<name>"; MC_METADATA_CLUSTER_ID inserts a
 * "<id>/" after "mooncake/"; a name containing '/' is stored at "mooncake/<name>" as
 * Mooncake does), or "etcd://h1:p1;h2:p2" / "h1:p1,h2:p2" (no scheme means etcd, as in
 * Mooncake): the same two keys on etcd, values as Mooncake writes them (JSON and a
 * newline), no lease. Other schemes (redis, https) fail with -EPROTONOSUPPORT and a
 * message that names the supported ones.
 * The daemon runs in every mode and answers Metadata with the last published
 * descriptor ({} before the first publish), Probe with {"status":"success"}, Notify with
 * {} and Connection (RDMA) through the handler set with te_meta_set_conn_handler(), or
 * with {"reply_msg":"..."} refusing it when none is set. Thread-safe.
 */
struct te_meta;
/**
 * Starts the daemon on bind_ip:rpc_port (0: ephemeral).
 * \param timeout_ms  Budget of each HTTP or etcd request, handshake request and daemon
 *                    connection (<= 0: 3000).
 * \return 0; -EINVAL empty conn, bad URL, bad etcd endpoint list or bind_ip; -EPROTONOSUPPORT
 * unsupported scheme; -EADDRINUSE; -ENOMEM. err says why. Thread: any. Ownership: te_meta_close().
 */
int te_meta_open(const char *conn, const char *bind_ip, uint16_t rpc_port, int timeout_ms,
		 struct te_meta **out, char *err, size_t errlen);
/** True in P2PHANDSHAKE mode. Thread: any. */
bool te_meta_is_p2p(const struct te_meta *m);
/** The daemon's port. Thread: any. */
uint16_t te_meta_rpc_port(const struct te_meta *m);
/** The daemon's allowlist: te_hs_daemon_set_allow(). Thread: any. */
void te_meta_set_allow(struct te_meta *m, const struct tide_cidr_list *allow);
/** te_hs_daemon_refused() of the daemon. Thread: any. */
uint64_t te_meta_refused(const struct te_meta *m);
/**
 * Publish our descriptor (and, in HTTP and etcd mode, rpc_meta {host, rpc_port}). The
 * daemon serves it from then on (also when the PUTs fail). Copies desc; the published copy
 * has its buffers sorted by addr. rpc_meta goes first; Tide's HTTP metadata server refuses
 * it when a name is owned by another live instance (-EEXIST; this includes a stale entry
 * left by a crashed run of the same name on another rpc port); etcd, as with Mooncake,
 * overwrites. A rename withdraws the keys of the previous name.
 * \param host  Address peers reach our daemon and data port at; required in HTTP and etcd
 *              mode, ignored in P2P mode.
 * \return 0; -EINVAL host missing in HTTP or etcd mode, or desc invalid (empty name/protocol,
 * tcp_data_port 0, buffers breaking te_desc_normalize's rules; logged); -EEXIST the server holds a
 * different rpc_meta for the name; HTTP errors as te_http_put, etcd's as tide_etcd_put;
 * -ENOMEM. Thread: any.
 */
int te_meta_publish(struct te_meta *m, const struct te_desc *desc, const char *host);
/**
 * Fetch a peer's descriptor and the host to reach it at (P2P: host part of the name;
 * HTTP, etcd: rpc_meta's ip_or_host_name). P2P sends our own last published descriptor ({}
 * before any) as the Metadata request body, as Mooncake does.
 * \param[out] desc  Decoded, sorted; free with te_desc_free().
 * \return 0; -ENOENT unknown (404, or the peer has published nothing); -EPROTO malformed
 * (err says why); -EINVAL name not "host:port" in P2P mode; -ENAMETOOLONG host does not
 * fit; network errors as te_hs_request / te_http_get / tide_etcd_get. Thread: any.
 */
int te_meta_fetch(struct te_meta *m, const char *name, struct te_desc **desc, char *host,
		  size_t host_len, char *err, size_t errlen);
/**
 * Route Connection (RDMA QP exchange) requests to fn (NULL: refuse them again). fn runs on
 * the daemon thread and may block up to the metadata timeout (it may fetch the caller's
 * descriptor). Setting returns only when no call of the previous handler is running, so
 * after te_meta_set_conn_handler(m, NULL, NULL) the old arg may be freed.
 * Thread: any but the daemon's.
 */
void te_meta_set_conn_handler(struct te_meta *m, te_hs_handler_fn fn, void *arg);
/** Rebuilds and publishes (te_meta_publish) the caller's descriptor; 0 or -errno. */
typedef int (*te_meta_refresh_fn)(void *arg);
/**
 * P2P mode: publish lazily. After this, te_meta_publish_later() only marks the descriptor
 * stale, and the daemon calls fn (on its thread) before it answers the next Metadata
 * request; peers fetch the descriptor only that way in P2P mode, so they see every change
 * made before their request. fn NULL: back to publishing at once. Setting waits for a
 * running fn, so after te_meta_set_refresh(m, NULL, NULL) its arg may be freed.
 * Thread: any but the daemon's.
 */
void te_meta_set_refresh(struct te_meta *m, te_meta_refresh_fn fn, void *arg);
/**
 * Mark the descriptor stale for the daemon's next Metadata request. \return true when
 * that is how it will be published (P2P mode with a refresh function set); false: the
 * caller must publish now (te_meta_publish). Thread: any.
 */
bool te_meta_publish_later(struct te_meta *m);

struct tide_te_notify;
/**
 * Hand over every Notify the daemon has kept, oldest first (*out NULL when *n is 0);
 * the caller frees them with tide_te_notifies_free(). \return 0. Thread: any.
 */
int te_meta_notifies_take(struct te_meta *m, struct tide_te_notify **out, size_t *n);
/** Free n notifications and the array (NULL ignored). Thread: any. */
void te_meta_notifies_free(struct tide_te_notify *v, size_t n);
/**
 * Send a Notify ({"name","notify_msg"}) to the daemon of segment peer.
 * \return 0 accepted; -ECONNREFUSED refused (empty notify_msg in the reply); -EPROTO a
 * reply that is not a notify reply; -EINVAL message over TE_HS_MAX_LEN; errors of
 * te_meta_request(); -ENOMEM. err says why. Thread: any.
 */
int te_meta_notify(struct te_meta *m, const char *peer, const char *name, const char *msg,
		   char *err, size_t errlen);
/**
 * Send a Probe to the daemon of segment peer. \return 0 it answered; errors of
 * te_meta_request(). err says why. Thread: any.
 */
int te_meta_probe(struct te_meta *m, const char *peer, char *err, size_t errlen);
/**
 * Send one handshake request of `type` to the daemon of segment `name` (P2P: the name's
 * host:port; HTTP: its rpc_meta) and return the reply (malloc'd, NUL-terminated).
 *
eturn 0; -EINVAL name not host:port in P2P mode; HTTP errors as te_http_get; handshake
 * errors as te_hs_request. err says which step failed. Thread: any.
 */
int te_meta_request(struct te_meta *m, const char *name, uint8_t type, const char *json, size_t len,
		    char **reply, size_t *reply_len, char *err, size_t errlen);
/** Stop the daemon, remove our entries (HTTP and etcd mode, best effort, logged), free. NULL
 * ignored. No other call on m may be in progress. */
void te_meta_close(struct te_meta *m);

#endif /* TE_META_H */
