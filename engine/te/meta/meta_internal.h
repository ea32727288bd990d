/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to engine/te/meta and its unit tests: kernel-socket helpers shared by
 * the HTTP client and the handshake daemon/client. Every wait is bounded by an
 * absolute CLOCK_MONOTONIC deadline in milliseconds, so a caller's whole
 * exchange (connect + send + receive) has one budget.
 */
#ifndef META_INTERNAL_H
#define META_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t meta_now_ms(void);

/* Deadline timeout_ms from now (timeout_ms <= 0 means "now": every wait fails at once). */
int64_t meta_deadline(int timeout_ms);

/*
 * Resolve host (IPv4/IPv6 literal or name) and connect a non-blocking TCP socket
 * (TCP_NODELAY, close-on-exec) before the deadline, trying each address.
 * Returns 0 and *fd; -ECONNREFUSED; -ETIMEDOUT; -EHOSTUNREACH (also unresolvable
 * host and unreachable network); -ENOMEM; other -errno from socket().
 */
int meta_sock_connect(const char *host, uint16_t port, int64_t deadline_ms, int *fd);

/* Write all of buf (MSG_NOSIGNAL). 0; -ETIMEDOUT; -EPIPE/-ECONNRESET/... */
int meta_sock_write_all(int fd, const void *buf, size_t len, int64_t deadline_ms);

/* Read up to len bytes, waiting for at least one. >0 bytes; 0 on EOF; -ETIMEDOUT; -errno. */
ssize_t meta_sock_read_some(int fd, void *buf, size_t len, int64_t deadline_ms);

/* Read exactly len bytes. 0; -ECONNRESET when the peer closes first; -ETIMEDOUT; -errno. */
int meta_sock_read_full(int fd, void *buf, size_t len, int64_t deadline_ms);

/* Copy src into dst (size dstlen, NUL-terminated) when it fits; -ENAMETOOLONG otherwise. */
int meta_strlcpy(char *dst, const char *src, size_t dstlen);

/* Split "host:port" / "[v6]:port" into host (no brackets) and port 1..65535. -EINVAL. */
int meta_split_hostport(const char *s, char *host, size_t host_len, uint16_t *port);

#endif /* META_INTERNAL_H */
