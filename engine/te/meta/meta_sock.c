/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel-socket helpers for the metadata layer. Sockets are non-blocking and
 * every wait is a poll() bounded by the caller's deadline, so no call here can
 * block longer than the caller asked (getaddrinfo() on a name is the one
 * exception: the resolver has its own timeouts; literals never block).
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "meta_internal.h"
#include "tide_addr.h"
#include "tide_sock.h"
#include "tide_clock.h"

int64_t
meta_now_ms(void)
{
	return (int64_t)tide_mono_ms();
}

int64_t
meta_deadline(int timeout_ms)
{
	return meta_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
}

/* The one deadline socket is engine/lib/addr's; these keep the metadata layer's
 * signed deadlines (meta_deadline()). */
int
meta_sock_connect(const char *host, uint16_t port, int64_t deadline_ms, int *fd)
{
	return tide_sock_connect(host, port, deadline_ms < 0 ? 0 : (uint64_t)deadline_ms, fd);
}

int
meta_sock_write_all(int fd, const void *buf, size_t len, int64_t deadline_ms)
{
	return tide_sock_write_all(fd, buf, len, deadline_ms < 0 ? 0 : (uint64_t)deadline_ms);
}

ssize_t
meta_sock_read_some(int fd, void *buf, size_t len, int64_t deadline_ms)
{
	return tide_sock_read_some(fd, buf, len, deadline_ms < 0 ? 0 : (uint64_t)deadline_ms);
}

int
meta_sock_read_full(int fd, void *buf, size_t len, int64_t deadline_ms)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = meta_sock_read_some(fd, p, len, deadline_ms);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
meta_strlcpy(char *dst, const char *src, size_t dstlen)
{
	size_t n = strlen(src);

	if (dstlen == 0 || n >= dstlen)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

int
meta_split_hostport(const char *s, char *host, size_t host_len, uint16_t *port)
{
	/* The one parser (engine/lib/addr); this layer reports every refusal as -EINVAL. */
	return tide_addr_split(s, host, host_len, port, 0, NULL) == 0 ? 0 : -EINVAL;
}
