/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Internal to engine/te: transport-agnostic TCP data sessions (framing in te_frame.h).
 *
 * One session per connection, push-driven, with no sockets or clocks inside,
 * so the same code runs over kernel sockets (te_tcp_kernel.c) and over the
 * user-space TCP stack on DPDK lcores (on_recv(data, len) / send() that may
 * accept less). A session never blocks and never allocates after create.
 *
 * Input, two equivalent ways (mix freely):
 * - push: `feed(data, len)` copies what it can use and returns how many bytes
 *   it consumed. It consumes less than len only when it cannot take more now
 *   (server: its reply queue is full or a closing reply is queued; either:
 *   the session ended). Offer the rest again once tx_iov() returns 0, e.g.
 *   with tide_net_recv_resume() on the DPDK side.
 * - pull (zero copy): `rx_window(&ptr)` returns where the next bytes belong
 *   (a header buffer, the checked destination of a WRITE, the slice->local
 *   of a READ reply) and how many; recv() into it, then `rx_advance(n)`.
 *   A 0 window means "no bytes wanted now" (a client still reads into a
 *   staging buffer and feed()s it, so EOF and stray bytes are noticed).
 *
 * Output: `tx_iov(iov, max)` lists the bytes to send next (headers, status
 * words, payload straight from registered memory or slice->local); after
 * sending n of them (writev(), or send() piece by piece, possibly partial)
 * call `tx_advance(n)`. The iovecs stay valid until the next call into the
 * session. Call tx_iov() again after every tx_advance() until it returns 0
 * or the connection accepts no more.
 *
 * Driving a session from a push stack (on_recv callback, send() that may
 * accept less; this is the whole loop):
 *
 *     static void flush(conn) {               // after on_recv, and on WRITABLE
 *             struct iovec iov[16];
 *             unsigned n;
 *             while ((n = te_srv_sess_tx_iov(s, iov, 16)) > 0) {
 *                     size_t sent = 0;
 *                     for (unsigned i = 0; i < n; i++) {
 *                             ssize_t k = send(conn, iov[i].iov_base, iov[i].iov_len);
 *                             if (k > 0) sent += k;
 *                             if (k < (ssize_t)iov[i].iov_len) break;
 *                     }
 *                     te_srv_sess_tx_advance(s, sent);
 *                     if (<send accepted less than offered>) return;   // wait WRITABLE
 *             }
 *             if (te_srv_sess_close_reason(s) != 0) close(conn);
 *             else if (conn->held) conn->resume = true;   // poll loop: recv_resume()
 *     }
 *     static size_t on_recv(conn, data, len) {
 *             size_t used = te_srv_sess_feed(s, data, len);
 *             conn->held = used < len;         // the stack keeps the rest
 *             flush(conn);
 *             return used;
 *     }
 *
 * (tide_net_recv_resume() may not be called from inside on_recv; the loop
 * calls it for connections marked resume, which offers the held bytes again.)
 *
 * The client side is the same with te_cli_sess_*; its feed() takes every byte
 * unless the session failed, and te_cli_sess_error() != 0 means: close the
 * connection (the session has already completed every slice it owned). A
 * connection that ends for any other reason: te_cli_sess_fail(c, -ECONNRESET).
 * Submit more slices (te_cli_sess_can_submit()/submit()) after completions and
 * flush again; there is no timer inside, the transport owns io_timeout_ms
 * (te_cli_sess_inflight() says whether anything is outstanding).
 *
 * Errors: malformed peer input never crashes; it ends the session with a
 * -errno reported by te_srv_sess_close_reason() / te_cli_sess_error(), after
 * which the transport closes the connection.
 *
 * Thread: a session is used by one thread at a time (its connection's owner);
 * sessions are independent of each other.
 */
#ifndef TE_SESS_H
#define TE_SESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "te_frame.h"
#include "te_xport.h"

/* ------------------------------------------------------------------------ */
/* Server side: serves v1, v2 and native requests, deciding per header.     */
/* Thread (every function below but create): the connection's owner.       */

struct te_srv_sess;

/**
 * Create a server session.
 * \param ctx  hooks and our instance; copied. check()/release() are called from
 *             this session's calls only; every successful check() is matched by
 *             exactly one release() (at the latest in te_srv_sess_destroy()).
 * \param[out] out  new session; untouched on failure.
 * \return 0; -EINVAL ctx->check or ctx->release NULL; -ENOMEM.
 * Thread: any. Ownership: te_srv_sess_destroy().
 */
int te_srv_sess_create(const struct te_srv_ctx *ctx, struct te_srv_sess **out);

/**
 * Release every held check() reference (a WRITE in progress, READ replies not
 * fully sent: the connection was lost mid-copy; with tx_hold, replies the
 * transport still held too) and free. NULL ignored. A zero-copy transport
 * destroys the session only once the device released every frame that
 * references its replies.
 */
void te_srv_sess_destroy(struct te_srv_sess *s);

/**
 * Push received bytes. Headers are parsed and checked; WRITE payload is copied
 * once, into the checked destination; a refused native WRITE's payload is skipped.
 * Replies queue up (at most 32, so a pipelined stream is answered with few
 * sends); READ data is referenced in place, never copied.
 * \return bytes consumed (0..len): less than len while the reply queue is full,
 *         a closing reply (v2 REJECTED, STALE) is queued, or after the session ended.
 */
size_t te_srv_sess_feed(struct te_srv_sess *s, const uint8_t *data, size_t len);

/**
 * Where the next received bytes go (zero-copy receive).
 * \param[out] ptr  destination (valid for the returned length); NULL when 0.
 * \return bytes wanted there (never more than the current header / payload
 *         remainder); 0 when no input is wanted now.
 */
size_t te_srv_sess_rx_window(struct te_srv_sess *s, uint8_t **ptr);

/**
 * \return the whole size of the WRITE payload being received (not what is left
 *         of it), 0 when no payload is in progress. Lets a transport decide
 *         from the request, not from a read's remainder, whether to read in place.
 */
uint64_t te_srv_sess_rx_payload(const struct te_srv_sess *s);

/** Account n bytes written at the rx_window() pointer (n <= its length). */
void te_srv_sess_rx_advance(struct te_srv_sess *s, size_t n);

/**
 * Bytes to send next: the queued replies in order, each a reply header or
 * status word followed, for READ, by the data straight from the checked source
 * (whose check() reference is released once its last byte is sent).
 * \return iovecs filled (0..max); 0 when nothing is pending.
 */
unsigned te_srv_sess_tx_iov(struct te_srv_sess *s, struct iovec *iov, unsigned max);

/** Account n bytes sent (n <= the sum of tx_iov()'s lengths). */
void te_srv_sess_tx_advance(struct te_srv_sess *s, size_t n);

/** Most replies a server session keeps at once: queued, and (tx_hold) held by the transport. */
#define TE_SRV_SESS_OUTQ 32

/**
 * Zero-copy transports (the DPDK one sends READ data by reference to the
 * checked memory, and the device reads it until the peer acknowledged it and
 * the frames were released). With `on`, a reply whose last byte tx_advance()
 * accounted is no longer sent but is still held: its check() reference (and
 * its slot among the TE_SRV_SESS_OUTQ) stays until te_srv_sess_tx_done()
 * covers it, so an unregister waits for the device, not only for the send
 * call. Input stops while held and queued replies fill the queue, exactly as
 * when queued ones do. Default off (the kernel transport's sendmsg copies).
 * Call before any traffic.
 */
void te_srv_sess_tx_hold(struct te_srv_sess *s, bool on);

/** Bytes tx_advance() accounted since create: a position in the output stream. */
uint64_t te_srv_sess_tx_pos(const struct te_srv_sess *s);

/**
 * tx_hold: the transport no longer references any output byte before
 * position upto (a te_srv_sess_tx_pos() value). Releases the held replies
 * that end at or before it, oldest first; the queue has room again (offer
 * held input again, e.g. tide_net_recv_resume()).
 */
void te_srv_sess_tx_done(struct te_srv_sess *s, uint64_t upto);

/**
 * \return 0 while the connection should stay open (output may be pending);
 *         -errno once it must be closed and nothing is left to send:
 *         -EFAULT address refused under v1/v2 (v1: silent; v2: after status REJECTED);
 *         -ESTALE native HELLO named another instance (after status STALE);
 *         -EPROTO malformed header (closed without a reply).
 */
int te_srv_sess_close_reason(const struct te_srv_sess *s);

/**
 * \return true between requests (no header byte, payload or reply pending or
 *         held): an idle connection holds no check() reference and may sit forever;
 *         a busy one is subject to the transport's progress timeout.
 */
bool te_srv_sess_idle(const struct te_srv_sess *s);

/**
 * \param[out] nreq  well-formed request headers parsed so far (a native HELLO
 *                   counts); may be NULL.
 * \return the framing of the latest of them (TE_PROTO_V1, V2 or NATIVE), 0
 *         before the first.
 */
uint8_t te_srv_sess_proto(const struct te_srv_sess *s, uint64_t *nreq);

/* ------------------------------------------------------------------------ */
/* Client side: a window of te_slice requests on one connection.           */
/* Thread (every function below but create): the connection's owner.       */

/**
 * Completion of one slice; err as te_slice_done(). Called from inside the
 * session's functions (feed, rx_advance, tx_advance, fail, destroy); must not
 * call back into the same session.
 */
typedef void (*te_cli_done_fn)(void *arg, struct te_slice *s, int err);

struct te_cli_sess_cfg {
	uint32_t proto;              /**< TE_PROTO_V1, V2 or NATIVE */
	uint64_t instance;           /**< NATIVE: peer instance for HELLO; 0 = no HELLO */
	uint32_t max_inflight;       /**< NATIVE window in slices (1..4096); V1/V2 use 1 */
	uint64_t max_inflight_bytes; /**< NATIVE window in bytes (0 = no byte limit); one
					slice is always allowed */
	te_cli_done_fn done;
	void *arg;
};

struct te_cli_sess;

/**
 * Create a client session. A NATIVE session with an instance starts by
 * sending HELLO; requests are pipelined right behind it (the server answers
 * in order and closes after STALE, so no request after a STALE HELLO runs).
 * \return 0; -EINVAL bad proto, max_inflight out of range, done NULL; -ENOMEM.
 * Thread: any. Ownership: te_cli_sess_destroy().
 */
int te_cli_sess_create(const struct te_cli_sess_cfg *cfg, struct te_cli_sess **out);

/** Fail every owned slice with err (as te_cli_sess_fail()), then free. NULL ignored. */
void te_cli_sess_destroy(struct te_cli_sess *c, int err);

/** True when a slice of len bytes fits the window now (and the session has not failed). */
bool te_cli_sess_can_submit(const struct te_cli_sess *c, uint32_t len);

/**
 * Take a slice (s->op, s->local, s->remote, s->len). It is sent after those
 * already taken and completed through cfg->done exactly once.
 * \return 0; -EBUSY window full; -EINVAL bad op or len 0; -EPIPE the session
 *         failed (the slice was not taken).
 */
int te_cli_sess_submit(struct te_cli_sess *c, struct te_slice *s);

/** Bytes to send next (HELLO, headers, WRITE payloads from slice->local). \return count. */
unsigned te_cli_sess_tx_iov(struct te_cli_sess *c, struct iovec *iov, unsigned max);

/** Account n bytes sent. Completes v1 WRITEs (no reply exists) when their last byte left. */
void te_cli_sess_tx_advance(struct te_cli_sess *c, size_t n);

/**
 * Push reply bytes (status words, reply headers, READ data into slice->local).
 * Malformed input (unknown status, bad reserved word, request id out of order,
 * bytes when no reply is due) fails every slice with -EPROTO.
 * \return bytes consumed; less than len only after the session failed.
 */
size_t te_cli_sess_feed(struct te_cli_sess *c, const uint8_t *data, size_t len);

/** Zero-copy receive, as te_srv_sess_rx_window(): READ data lands in slice->local. */
size_t te_cli_sess_rx_window(struct te_cli_sess *c, uint8_t **ptr);

/** As te_srv_sess_rx_payload(): the whole size of the READ data being received, or 0. */
uint64_t te_cli_sess_rx_payload(const struct te_cli_sess *c);

/** Account n bytes written at the rx_window() pointer. */
void te_cli_sess_rx_advance(struct te_cli_sess *c, size_t n);

/**
 * \return 0 healthy; -errno once the session failed and the connection must be
 *         closed: -EPROTO malformed reply; -ESTALE HELLO answered STALE; -EFAULT v2
 *         address refused (the server closes; only that slice failed); or the err
 *         given to te_cli_sess_fail(). Every owned slice has been completed by then.
 */
int te_cli_sess_error(const struct te_cli_sess *c);

/**
 * The connection is gone (-ECONNRESET, -ETIMEDOUT, -ECANCELED, ...): complete
 * every owned slice with err and fail the session (first error sticks).
 */
void te_cli_sess_fail(struct te_cli_sess *c, int err);

/** Slices owned (submitted, not yet completed). */
uint32_t te_cli_sess_inflight(const struct te_cli_sess *c);

/** Bytes of the slices owned. */
uint64_t te_cli_sess_inflight_bytes(const struct te_cli_sess *c);

#endif /* TE_SESS_H */
