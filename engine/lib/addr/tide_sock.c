/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tide_clock.h"
#include "tide_sock.h"

int
tide_sock_wait(int fd, short events, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t now = tide_mono_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int rc;

		if (now >= deadline_ms)
			return -ETIMEDOUT;
		/* At most a minute per poll: the bound of an int, and deadlines stay exact. */
		rc = poll(&p, 1, deadline_ms - now > 60000 ? 60000 : (int)(deadline_ms - now));
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

int
tide_sock_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ms)
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
			int rc = tide_sock_wait(fd, POLLOUT, deadline_ms);

			if (rc < 0)
				return rc;
			continue;
		}
		return n < 0 ? -errno : -EIO;
	}
	return 0;
}

ssize_t
tide_sock_read_some(int fd, void *buf, size_t len, uint64_t deadline_ms)
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
		rc = tide_sock_wait(fd, POLLIN, deadline_ms);
		if (rc < 0)
			return rc;
	}
}

bool
tide_sock_poll_briefly(int fd, short events, uint32_t us)
{
	struct pollfd p = {.fd = fd, .events = events};
	uint64_t end;

	if (us == 0)
		return false;
	end = tide_mono_us() + us;
	do {
		if (poll(&p, 1, 0) != 0)
			return true; /* ready, or an error the next poll() reports again */
	} while (tide_mono_us() < end);
	return false;
}

/* Connect errors as one code per cause: every "no way to that host" is -EHOSTUNREACH. */
static int
connect_err(int e)
{
	switch (e) {
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
connect_one(const struct addrinfo *ai, uint64_t deadline_ms, int *out)
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
		rc = connect_err(errno);
		goto fail;
	}
	rc = tide_sock_wait(fd, POLLOUT, deadline_ms);
	if (rc < 0)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) {
		rc = -errno;
		goto fail;
	}
	if (soerr != 0) {
		rc = connect_err(soerr);
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
tide_sock_connect(const char *host, uint16_t port, uint64_t deadline_ms, int *fd)
{
	struct addrinfo hints = {0}, *res = NULL, *ai;
	char portstr[8];
	int rc;

	if (host == NULL || fd == NULL || port == 0)
		return -EINVAL;
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
tide_sock_listen(const char *host, uint16_t port, int backlog, int *fd, uint16_t *port_out)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int s, one = 1, rc;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(port);
		sl = sizeof(*v4);
	} else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(port);
		sl = sizeof(*v6);
	} else {
		return -EINVAL;
	}
	s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&ss, sl) != 0 || listen(s, backlog) != 0 ||
	    getsockname(s, (struct sockaddr *)&ss, &sl) != 0) {
		rc = -errno;
		close(s);
		return rc;
	}
	if (port_out != NULL)
		*port_out = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
	*fd = s;
	return 0;
}
