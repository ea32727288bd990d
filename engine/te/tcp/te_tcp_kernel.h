/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Internal to engine/te: the kernel-socket TCP transport. Its operations are
 * `te_tcp_kernel_ops` (declared in te_xport.h); this header adds what tools
 * and tests may inspect.
 *
 * Behaviour (details in te_tcp_kernel.c):
 * - io_threads epoll threads; the data server accepts v1, v2 and native
 *   framing on one port and spreads accepted connections over the threads.
 * - Per peer up to conns_per_peer connections, opened lazily (as many as the
 *   queued slices need) with a non-blocking connect bounded by
 *   connect_timeout_ms (0: 3000), TCP_NODELAY, spread over the threads.
 * - Slices wait in the peer's queue and are pulled by whichever connection
 *   has window room, each taking at most its share, so one request's slices
 *   run over several connections. Native: up to 64 slices / 8 MiB (at least
 *   2 slices) pipelined per connection; v1/v2: one at a time (Mooncake
 *   servers are sequential).
 * - Errors: a lost connection fails its own slices (-ECONNRESET, or the
 *   session's -EPROTO/-ESTALE); once no connection of the peer is up or
 *   connecting, the queued slices fail with the same error. A v2 refusal
 *   fails only that slice (-EFAULT) and reconnects. No byte moved for
 *   io_timeout_ms (0: never) with slices in flight: -ETIMEDOUT. The next
 *   submit after a failure reconnects.
 * - v1 has no acknowledgement: a v1 WRITE completes when its last byte is
 *   handed to the kernel, and a refused v1 READ shows up as -ECONNRESET.
 * - peer_open() resolves a host name with getaddrinfo() (may block on DNS;
 *   IPv4 literals do not).
 * - peer_close() and destroy() wait for the io threads: call them from an
 *   application thread, never from inside te_slice_done(), and without holding
 *   a lock that te_slice_done() takes. submit() must not race with
 *   peer_close() of the same peer.
 */
#ifndef TE_TCP_KERNEL_H
#define TE_TCP_KERNEL_H

#include <stdint.h>

#include "te_xport.h"

/**
 * Number of the peer's connections that are established now (racy read).
 * Thread: any, while the peer is open.
 */
uint32_t te_tcp_kernel_peer_conns_up(struct te_xpeer *p);

/**
 * Data connections that failed to open or were lost (refused, reset, timed
 * out, protocol error), for tide_te_stats.conn_failures. v2 refusals and
 * cancellations do not count. Thread: any (racy read).
 */
uint64_t te_tcp_kernel_conn_failures(const struct te_xport *x);

/**
 * Server connections moved to their peer's home thread (reused stock-framed
 * lanes, see te_tcp_kernel.c). Thread: any (racy read).
 */
uint64_t te_tcp_kernel_srv_moves(const struct te_xport *x);

#endif /* TE_TCP_KERNEL_H */
