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

/* Poll fd for events until the deadline. 0 ready; -ETIMEDOUT; -errno. */
static int
wait_fd(int fd, short events, int64_t deadline_ms)
{
	for (;;) {
		int64_t left = deadline_ms - meta_now_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int rc;

		if (left <= 0)
			return -ETIMEDOUT;
		rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

static int
map_connect_err(int e)
{
	switch (e) {
	case ECONNREFUSED:
	case ETIMEDOUT:
	case ENOMEM:
		return -e;
	case ENETUNREACH:
	case EHOSTUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EADDRNOTAVAIL:
		return -EHOSTUNREACH;
	default:
		return -e;
	}
}

static int
connect_one(const struct addrinfo *ai, int64_t deadline_ms, int *out)
{
	int fd, one = 1, soerr = 0, rc;
	socklen_t sl = sizeof(soerr);

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		goto done;
	if (errno != EINPROGRESS) {
		rc = map_connect_err(errno);
		goto fail;
	}
	rc = wait_fd(fd, POLLOUT, deadline_ms);
	if (rc < 0)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) {
		rc = -errno;
		goto fail;
	}
	if (soerr != 0) {
		rc = map_connect_err(soerr);
		goto fail;
	}
done:
	*out = fd;
	return 0;
fail:
	close(fd);
	return rc;
}

int
meta_sock_connect(const char *host, uint16_t port, int64_t deadline_ms, int *fd)
{
	struct addrinfo hints = {0}, *res = NULL, *ai;
	char portstr[8];
	int rc;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0)
		return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
	rc = -EHOSTUNREACH;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		rc = connect_one(ai, deadline_ms, fd);
		/* A timeout spent the whole budget; later addresses would fail at once. */
		if (rc == 0 || rc == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return rc;
}

int
meta_sock_write_all(int fd, const void *buf, size_t len, int64_t deadline_ms)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int rc = wait_fd(fd, POLLOUT, deadline_ms);

			if (rc < 0)
				return rc;
			continue;
		}
		return n < 0 ? -errno : -EIO;
	}
	return 0;
}

ssize_t
meta_sock_read_some(int fd, void *buf, size_t len, int64_t deadline_ms)
{
	for (;;) {
		ssize_t n = recv(fd, buf, len, 0);
		int rc;

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = wait_fd(fd, POLLIN, deadline_ms);
		if (rc < 0)
			return rc;
	}
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
	/* The one parser (engine/addr); this layer reports every refusal as -EINVAL. */
	return tide_addr_split(s, host, host_len, port, 0, NULL) == 0 ? 0 : -EINVAL;
}
