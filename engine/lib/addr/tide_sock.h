/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The one TCP socket with deadlines: connect to a host (IPv4 or IPv6 literal, or a
 * name: each of its addresses in turn), listen on an address of either family, and
 * wait for readiness; every wait is bounded by the caller's deadline, so no call
 * here can hang. Deadlines are CLOCK_MONOTONIC milliseconds (tide_mono_ms()).
 * Users: the transfer engine's metadata and handshake client, the master client,
 * the master's RPC listener.
 */
#ifndef TIDE_SOCK_H
#define TIDE_SOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/**
 * Connect to host:port before deadline_ms. host: an IPv4 or IPv6 literal (no
 * brackets) or a name, whose addresses are tried in order until one answers (a
 * timeout spends the whole budget and ends the walk). The socket is non-blocking,
 * close-on-exec, TCP_NODELAY.
 * \param[out] fd  the connected socket (the caller closes it).
 * \return 0; -EHOSTUNREACH the name does not resolve or no route (ENETUNREACH,
 *         EHOSTDOWN, ENETDOWN, EADDRNOTAVAIL); -ECONNREFUSED; -ETIMEDOUT; -ENOMEM;
 *         another -errno of socket()/connect(). Thread: any.
 */
int tide_sock_connect(const char *host, uint16_t port, uint64_t deadline_ms, int *fd);

/**
 * A listening socket on host:port (port 0: ephemeral), SO_REUSEADDR, non-blocking,
 * close-on-exec. host: an IPv4 or IPv6 literal ("0.0.0.0", "::" for every address
 * of that family; an IPv6 socket takes IPv6 only).
 * \param[out] fd         the socket (the caller closes it).
 * \param[out] port_out   the port bound (NULL: not wanted).
 * \return 0; -EINVAL host is not an address literal; -errno of socket()/bind()/
 *         listen(). Thread: any.
 */
int tide_sock_listen(const char *host, uint16_t port, int backlog, int *fd, uint16_t *port_out);

/**
 * Wait until fd is ready for `events` (POLLIN, POLLOUT) or deadline_ms passes.
 * \return 0 ready (or an error or hang-up is pending: the next I/O says which);
 *         -ETIMEDOUT; another -errno of poll(). EINTR is retried. Thread: any.
 */
int tide_sock_wait(int fd, short events, uint64_t deadline_ms);

/**
 * Send all len bytes of buf on non-blocking fd before deadline_ms (MSG_NOSIGNAL:
 * a closed peer is -EPIPE, never a signal).
 * \return 0; -ETIMEDOUT; another -errno of send() or poll(). Thread: any.
 */
int tide_sock_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ms);

/**
 * Receive what is there (at most len bytes) on non-blocking fd, waiting for the
 * first byte until deadline_ms.
 * \return bytes received, 0 at end of stream; -ETIMEDOUT; another -errno of
 *         recv() or poll(). Thread: any.
 */
ssize_t tide_sock_read_some(int fd, void *buf, size_t len, uint64_t deadline_ms);

/**
 * Poll fd for `events` without sleeping, for at most us microseconds, before a
 * caller's sleeping wait. Why: on an idle VM a sleeping thread's wake-up costs
 * tens of microseconds, more than a small answer takes to arrive; polling spares
 * it, at the cost of at most us of CPU per wait. us 0: returns false at once.
 * \return true when fd became ready (or has an error pending) within us, false
 *         otherwise. Thread: any.
 */
bool tide_sock_poll_briefly(int fd, short events, uint32_t us);

#endif /* TIDE_SOCK_H */
