/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Blocking C client of the Mooncake master protocol (coro_rpc over TCP), for
 * tests, the benchmark and the store client. Works against our master and a
 * stock `mooncake_master` alike: requests are encoded as a stock release
 * client does (type literal included, spec 1.4) in the HEAD layout unless
 * the request says otherwise.
 *
 * One struct tide_mc_client is one TCP connection with its own sequence
 * numbers. Calls are synchronous; tide_mc_client_call_batch() pipelines: it
 * sends N requests in one write and collects the N answers by seq_num,
 * whatever order they arrive in.
 *
 * Errors: 0 or negative errno. -ETIMEDOUT: no complete answer within the
 * timeout; -ECONNRESET / -EPIPE: the master closed the connection;
 * -EREMOTEIO: the master answered with a coro_rpc transport error (errc in
 * the optional struct tide_mc_err); -EBADMSG: the answer's body did not
 * decode. After -ETIMEDOUT, a connection error, a bad response header or an
 * unexpected seq_num the connection is unusable (every later call returns
 * -ENOTCONN); after -EREMOTEIO or -EBADMSG it stays usable (framing is intact;
 * our master keeps the connection, a stock one may close it, which the next
 * call then reports).
 *
 * Thread: a client belongs to one thread at a time (no internal lock).
 * Different clients may be used from different threads concurrently.
 */
#ifndef TIDE_MC_CLIENT_H
#define TIDE_MC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_mc_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default connect and call timeout (ms), as the stock client's 30 s. */
#define TIDE_MC_CLIENT_DEFAULT_TIMEOUT_MS 30000

/** The client; opaque. */
struct tide_mc_client;

/**
 * Connect to a master (non-blocking connect bounded by timeout_ms).
 * \param host        IPv4 address or host name.
 * \param port        RPC port.
 * \param timeout_ms  Connect timeout, also the initial call timeout; <= 0 = default.
 * \param[out] out    The connected client.
 * \return 0; -EINVAL bad args; -EHOSTUNREACH name does not resolve;
 *         -ETIMEDOUT; -ECONNREFUSED / other -errno from connect; -ENOMEM.
 * Thread: any. Ownership: free with tide_mc_client_close().
 */
int tide_mc_client_connect(const char *host, uint16_t port, int timeout_ms,
			   struct tide_mc_client **out);

/**
 * Connect to "host:port".
 * \return As tide_mc_client_connect(); -EINVAL no ':port'.
 * Thread: any.
 */
int tide_mc_client_connect_addr(const char *addr, int timeout_ms, struct tide_mc_client **out);

/** Close the connection and free the client. NULL-safe. Thread: the owner. */
void tide_mc_client_close(struct tide_mc_client *c);

/** Set the per-call timeout (ms; <= 0 = default). Thread: the owner. */
void tide_mc_client_set_timeout(struct tide_mc_client *c, int timeout_ms);

/**
 * Poll for an answer up to us microseconds after a request is sent before sleeping in
 * poll() (0, the default: sleep at once). On an idle VM waking a sleeping thread costs
 * tens of microseconds per round trip; a master answers a small call within that. Bounded
 * CPU: at most us per call. Thread: the owner.
 */
void tide_mc_client_set_poll_us(struct tide_mc_client *c, uint32_t us);

/** Encoder flags for requests (TIDE_MC_ENC_*; default TIDE_MC_ENC_STOCK). Thread: the owner. */
void tide_mc_client_set_enc_flags(struct tide_mc_client *c, unsigned flags);

/** True while the connection is usable. Thread: the owner. */
bool tide_mc_client_connected(const struct tide_mc_client *c);

/**
 * One synchronous call: encode `req`, send, wait for the answer with the same seq.
 * \param req       Request (fn, layout and the matching member of u); only read.
 * \param[out] resp Decoded result on 0; free with tide_mc_resp_free().
 * \param[out] err  Optional; remote errc and message on -EREMOTEIO, decode details on -EBADMSG.
 * \return 0; -EREMOTEIO transport error answer; -ETIMEDOUT; -ECONNRESET;
 *         -EPIPE; -EBADMSG undecodable answer; -ENOTCONN unusable client;
 *         -EINVAL request the codec cannot encode; -ENOMEM.
 * Thread: the owner.
 */
int tide_mc_client_call(struct tide_mc_client *c, const struct tide_mc_req *req,
			struct tide_mc_resp *resp, struct tide_mc_err *err);

/**
 * Pipelined calls: send all n requests in one go, then collect n answers.
 * \param reqs   n requests.
 * \param resps  n results; resps[i] is valid (free it) where rcs[i] == 0.
 * \param rcs    n per-call codes as tide_mc_client_call() returns them.
 * \return 0 when every answer arrived (some may still have rcs[i] != 0, e.g.
 *         -EREMOTEIO); else the connection-level error (-ETIMEDOUT, -ECONNRESET,
 *         ...), with rcs[i] set to it for each answer that did not arrive.
 * Thread: the owner.
 */
int tide_mc_client_call_batch(struct tide_mc_client *c, const struct tide_mc_req *reqs, size_t n,
			      struct tide_mc_resp *resps, int *rcs);

/**
 * Send raw bytes (e.g. a hand-made or captured frame) as they are.
 * \return 0; -ETIMEDOUT; -EPIPE / -ECONNRESET; -ENOTCONN.
 * Thread: the owner.
 */
int tide_mc_client_send_raw(struct tide_mc_client *c, const void *buf, size_t len);

/**
 * Read one whole response frame (header + body) as bytes.
 * \param[out] out  The frame is appended (start from {0}; release with tide_mc_buf_release()).
 * \return 0; -ETIMEDOUT; -ECONNRESET the peer closed (also cleanly, before a
 *         header); -EPROTO bad response header.
 * Thread: the owner.
 */
int tide_mc_client_recv_raw(struct tide_mc_client *c, struct tide_mc_buf *out);

/**
 * Next sequence number the client will use (the stock client starts at 0).
 * Thread: the owner.
 */
uint32_t tide_mc_client_next_seq(const struct tide_mc_client *c);

/* ------------------------------------------------------------------------------------------ */
/* Typed helpers for the common calls. Each returns what tide_mc_client_call() returns; when  */
/* that is 0, *ec is the business result (0 or a negative Mooncake ErrorCode).                 */
/* ------------------------------------------------------------------------------------------ */

/**
 * ServiceReady.
 * \param[out] version  Copied into (NUL-terminated, truncated to) vlen bytes; may be NULL.
 * Thread: the owner.
 */
int tide_mc_client_service_ready(struct tide_mc_client *c, char *version, size_t vlen, int32_t *ec);

/** Ping. \param[out] status enum tide_mc_client_status. Thread: the owner. */
int tide_mc_client_ping(struct tide_mc_client *c, const struct tide_mc_uuid *client,
			int32_t *status, int32_t *ec);

/** MountSegment. Thread: the owner. */
int tide_mc_client_mount(struct tide_mc_client *c, const struct tide_mc_segment *seg,
			 const struct tide_mc_uuid *client, int32_t *ec);

/** ReMountSegment. Thread: the owner. */
int tide_mc_client_remount(struct tide_mc_client *c, const struct tide_mc_segment *segs, size_t n,
			   const struct tide_mc_uuid *client, int32_t *ec);

/** UnmountSegment. Thread: the owner. */
int tide_mc_client_unmount(struct tide_mc_client *c, const struct tide_mc_uuid *segment,
			   const struct tide_mc_uuid *client, int32_t *ec);

/**
 * PutStart.
 * \param cfg       The ReplicateConfig sent as is (HEAD layout; strings and arrays are
 *                  borrowed for the call); NULL = Mooncake's defaults (1 replica, no pin,
 *                  no preference, no group).
 * \param[out] out  Descriptors on success (free with tide_mc_resp_free(out) when rc is 0);
 *                  may be NULL when not needed.
 * Thread: the owner.
 */
int tide_mc_client_put_start(struct tide_mc_client *c, const struct tide_mc_uuid *client,
			     const char *key, uint64_t len,
			     const struct tide_mc_replicate_config *cfg, struct tide_mc_resp *out,
			     int32_t *ec);

/** PutEnd (replica type ALL, no checksum). Thread: the owner. */
int tide_mc_client_put_end(struct tide_mc_client *c, const struct tide_mc_uuid *client,
			   const char *key, int32_t *ec);

/** PutRevoke (replica type ALL). Thread: the owner. */
int tide_mc_client_put_revoke(struct tide_mc_client *c, const struct tide_mc_uuid *client,
			      const char *key, int32_t *ec);

/**
 * GetReplicaList.
 * \param[out] out  Result (free with tide_mc_resp_free() when rc is 0); may be NULL.
 * Thread: the owner.
 */
int tide_mc_client_get_replica_list(struct tide_mc_client *c, const char *key,
				    struct tide_mc_resp *out, int32_t *ec);

/** ExistKey. Thread: the owner. */
int tide_mc_client_exist_key(struct tide_mc_client *c, const char *key, bool *exists, int32_t *ec);

/** Remove. Thread: the owner. */
int tide_mc_client_remove(struct tide_mc_client *c, const char *key, bool force, int32_t *ec);

/** RemoveAll. \param[out] removed  Objects removed. Thread: the owner. */
int tide_mc_client_remove_all(struct tide_mc_client *c, bool force, int64_t *removed);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_MC_CLIENT_H */
