/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Handshake daemon and client (Mooncake's TransferHandshakeUtil framing).
 *
 * The daemon is one thread multiplexing the listener and up to HS_MAX_CONNS
 * connections with poll(), so a slow or silent client cannot hold up the
 * others: each connection has a deadline (io timeout from accept) and is cut
 * when it passes. When the table is full the oldest connection is evicted to
 * make room. A wake pipe in the poll set makes stop prompt.
 *
 * Per connection: u64 LE length (counts the type byte), u8 type, JSON. Lengths
 * of 0 or over TE_HS_MAX_LEN are refused before any body is buffered, so one
 * connection holds at most TE_HS_MAX_LEN + 1 bytes. After the reply the daemon
 * shuts its write side and lingers up to HS_LINGER_MS for the peer's close, as
 * Mooncake does, so the peer reads the whole reply before the socket goes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_cidr.h"
#include "tide_log.h"

#define HS_MAX_CONNS   64
#define HS_LINGER_MS   500
#define HS_DEF_TIMEOUT 3000
#define HS_POLL_CAP_MS 1000

enum hs_state {
	HS_LEN,    /* reading the 8-byte length */
	HS_TYPE,   /* reading the type byte */
	HS_BODY,   /* reading the JSON */
	HS_REPLY,  /* writing the reply */
	HS_LINGER, /* write side shut; waiting for the peer's close */
};

struct hs_conn {
	int fd;
	enum hs_state st;
	int64_t deadline;
	uint64_t seq; /* accept order, for eviction */
	uint8_t lenbuf[8];
	size_t got;
	uint64_t flen; /* bytes after the length field */
	uint8_t type;
	bool legacy;
	char *body;
	size_t blen;
	char *out;
	size_t olen, osent;
	char peer[64];
};

struct te_hs_daemon {
	int lfd;
	int wake[2];
	uint16_t port;
	bool stop;      /* atomic */
	int timeout_ms; /* atomic */
	te_hs_handler_fn fn;
	void *arg;
	pthread_t thr;
	uint64_t seq;
	unsigned nconns;
	struct hs_conn conns[HS_MAX_CONNS];
	/* Peers that may connect (te_hs_daemon_set_allow); n == 0: any. Read at
	 * each accept, so the lock is taken once per connection, never per byte. */
	pthread_mutex_t allow_lock;
	struct tide_cidr_list allow;
	uint64_t refused; /* atomic: connections closed at accept for their address */
};

static uint64_t
get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void
put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
conn_free(struct hs_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->body);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* Build the framed reply: typed requests get the type byte back, legacy ones do not. */
static int
frame_reply(struct hs_conn *c, const char *reply, size_t rlen)
{
	size_t hdr = c->legacy ? 8 : 9;

	if (rlen + (c->legacy ? 0 : 1) > TE_HS_MAX_LEN)
		return -EMSGSIZE;
	c->out = malloc(hdr + rlen);
	if (c->out == NULL)
		return -ENOMEM;
	put_le64((uint8_t *)c->out, rlen + (c->legacy ? 0 : 1));
	if (!c->legacy)
		c->out[8] = (char)c->type;
	memcpy(c->out + hdr, reply, rlen);
	c->olen = hdr + rlen;
	c->osent = 0;
	return 0;
}

/* The request is complete: run the handler and queue the reply. false: drop the connection. */
static bool
dispatch(struct te_hs_daemon *d, struct hs_conn *c)
{
	char *reply = NULL;
	size_t rlen = 0;
	int rc;

	c->body[c->blen] = '\0';
	rc = d->fn(d->arg, c->type, c->body, c->blen, &reply, &rlen);
	if (rc == 0) {
		rc = frame_reply(c, reply != NULL ? reply : "", reply != NULL ? rlen : 0);
		free(reply);
	}
	if (rc != 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "handshake from %s: type %u not answered: %s", c->peer,
				   (unsigned)c->type, strerror(-rc));
		return false;
	}
	free(c->body);
	c->body = NULL;
	c->st = HS_REPLY;
	return true;
}

/* Read what is available. false: drop the connection (logged). */
static bool
on_readable(struct te_hs_daemon *d, struct hs_conn *c)
{
	for (;;) {
		uint8_t *dst;
		size_t want;
		ssize_t n;

		if (c->st == HS_LEN) {
			dst = c->lenbuf + c->got;
			want = 8 - c->got;
		} else if (c->st == HS_TYPE) {
			dst = &c->type;
			want = 1;
		} else if (c->st == HS_BODY) {
			dst = (uint8_t *)c->body + c->got;
			want = c->blen - c->got;
		} else {
			/* Linger: discard whatever the peer still sends; EOF closes. */
			char junk[512];

			n = recv(c->fd, junk, sizeof(junk), 0);
			if (n > 0)
				continue;
			return !(n == 0 || (errno != EAGAIN && errno != EINTR));
		}
		if (want == 0)
			n = 0;
		else
			n = recv(c->fd, dst, want, 0);
		if (want != 0 && n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return true;
			TIDE_LOG_RATELIMIT(WARN, 5, "handshake from %s: recv: %s", c->peer,
					   strerror(errno));
			return false;
		}
		if (want != 0 && n == 0) {
			if (c->st != HS_LEN || c->got != 0)
				TIDE_LOG_RATELIMIT(WARN, 5,
						   "handshake from %s: short frame (closed in %s)",
						   c->peer, c->st == HS_BODY ? "body" : "header");
			return false;
		}
		c->got += (size_t)n;
		if (c->st == HS_LEN && c->got == 8) {
			c->flen = get_le64(c->lenbuf);
			if (c->flen == 0 || c->flen > TE_HS_MAX_LEN) {
				TIDE_LOG_RATELIMIT(WARN, 5,
						   "handshake from %s: frame length %" PRIu64
						   " not in 1..%d",
						   c->peer, c->flen, TE_HS_MAX_LEN);
				return false;
			}
			c->st = HS_TYPE;
			c->got = 0;
		} else if (c->st == HS_TYPE && c->got == 1) {
			/* A first byte > 3 is JSON text of a legacy untyped Metadata frame. */
			c->legacy = c->type > TE_HS_PROBE;
			c->blen = c->legacy ? c->flen : c->flen - 1;
			c->body = malloc(c->blen + 1);
			if (c->body == NULL)
				return false;
			c->got = 0;
			if (c->legacy) {
				c->body[0] = (char)c->type;
				c->got = 1;
				c->type = TE_HS_METADATA;
			}
			c->st = HS_BODY;
		}
		if (c->st == HS_BODY && c->got == c->blen)
			return dispatch(d, c);
	}
}

/* Write what the socket takes. false: drop. */
static bool
on_writable(struct hs_conn *c, int timeout_ms)
{
	while (c->osent < c->olen) {
		ssize_t n = send(c->fd, c->out + c->osent, c->olen - c->osent, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return true;
			return false;
		}
		c->osent += (size_t)n;
	}
	shutdown(c->fd, SHUT_WR);
	c->st = HS_LINGER;
	c->deadline = meta_now_ms() + (timeout_ms < HS_LINGER_MS ? timeout_ms : HS_LINGER_MS);
	return true;
}

static void
do_accept(struct te_hs_daemon *d)
{
	for (int i = 0; i < 16; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct hs_conn *c;
		char ip[INET6_ADDRSTRLEN] = "?", peer[sizeof(d->conns[0].peer)] = "?";
		bool allowed;
		int fd;

		fd = accept4(d->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				TIDE_LOG_RATELIMIT(WARN, 5, "handshake accept: %s",
						   strerror(errno));
			return;
		}
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
			snprintf(peer, sizeof(peer), "%s:%u", ip, ntohs(s4->sin_port));
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
			snprintf(peer, sizeof(peer), "[%s]:%u", ip, ntohs(s6->sin6_port));
		}
		/* Before anything is read or any slot taken: a refused peer costs
		 * one accept and one close, and cannot evict an allowed one. */
		pthread_mutex_lock(&d->allow_lock);
		allowed = tide_cidr_allows(&d->allow, (struct sockaddr *)&ss, sl);
		pthread_mutex_unlock(&d->allow_lock);
		if (!allowed) {
			__atomic_fetch_add(&d->refused, 1, __ATOMIC_RELAXED);
			TIDE_LOG_RATELIMIT(WARN, 5,
					   "handshake: connection from %s refused (not in "
					   "TIDE_ALLOW_NETS)",
					   peer);
			close(fd);
			continue;
		}
		if (d->nconns == HS_MAX_CONNS) {
			unsigned old = 0;

			for (unsigned j = 1; j < d->nconns; j++)
				if (d->conns[j].seq < d->conns[old].seq)
					old = j;
			TIDE_LOG_RATELIMIT(WARN, 5, "handshake: %d connections open; evicting %s",
					   HS_MAX_CONNS, d->conns[old].peer);
			conn_free(&d->conns[old]);
			d->conns[old] = d->conns[--d->nconns];
		}
		c = &d->conns[d->nconns++];
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->st = HS_LEN;
		c->seq = d->seq++;
		c->deadline = meta_now_ms() + __atomic_load_n(&d->timeout_ms, __ATOMIC_RELAXED);
		memcpy(c->peer, peer, sizeof(c->peer));
	}
}

static void *
daemon_main(void *arg)
{
	struct te_hs_daemon *d = arg;
	struct pollfd pfd[HS_MAX_CONNS + 2];

	while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE)) {
		int64_t now = meta_now_ms(), wait = HS_POLL_CAP_MS;
		int tmo = __atomic_load_n(&d->timeout_ms, __ATOMIC_RELAXED);
		unsigned n;

		pfd[0] = (struct pollfd){.fd = d->wake[0], .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = d->lfd, .events = POLLIN};
		for (n = 0; n < d->nconns; n++) {
			struct hs_conn *c = &d->conns[n];

			pfd[n + 2] = (struct pollfd){
				.fd = c->fd, .events = c->st == HS_REPLY ? POLLOUT : POLLIN};
			if (c->deadline - now < wait)
				wait = c->deadline - now;
		}
		if (poll(pfd, n + 2, wait < 0 ? 0 : (int)wait) < 0 && errno != EINTR) {
			TIDE_LOG_RATELIMIT(ERR, 5, "handshake poll: %s", strerror(errno));
			usleep(10000);
			continue;
		}
		if (__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE))
			break;
		now = meta_now_ms();
		/* Service existing connections (indices match pfd until compaction below). */
		for (unsigned i = 0; i < n; i++) {
			struct hs_conn *c = &d->conns[i];
			bool keep = true;

			if (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR))
				keep = c->st == HS_REPLY ? on_writable(c, tmo) : on_readable(d, c);
			else if (pfd[i + 2].revents & POLLOUT)
				keep = on_writable(c, tmo);
			if (keep && c->st == HS_REPLY)
				keep = on_writable(c, tmo);
			if (keep && meta_now_ms() >= c->deadline) {
				if (c->st != HS_LINGER)
					TIDE_LOG_RATELIMIT(
						WARN, 5, "handshake from %s: timed out after %d ms",
						c->peer, tmo);
				keep = false;
			}
			if (!keep)
				conn_free(c);
		}
		for (unsigned i = 0; i < d->nconns;) {
			if (d->conns[i].fd < 0)
				d->conns[i] = d->conns[--d->nconns];
			else
				i++;
		}
		if (pfd[1].revents & POLLIN)
			do_accept(d);
	}
	for (unsigned i = 0; i < d->nconns; i++)
		conn_free(&d->conns[i]);
	d->nconns = 0;
	return NULL;
}

static int
make_listener(const char *bind_ip, uint16_t port, int *out, uint16_t *bound)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int fd, one = 1;

	if (bind_ip == NULL || bind_ip[0] == '\0' ||
	    inet_pton(AF_INET, bind_ip, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		if (bind_ip == NULL || bind_ip[0] == '\0')
			s4->sin_addr.s_addr = htonl(INADDR_ANY);
		sl = sizeof(*s4);
	} else if (inet_pton(AF_INET6, bind_ip, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		sl = sizeof(*s6);
	} else {
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 128) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	*bound = ntohs(ss.ss_family == AF_INET ? s4->sin_port : s6->sin6_port);
	*out = fd;
	return 0;
}

int
te_hs_daemon_start(const char *bind_ip, uint16_t port, te_hs_handler_fn fn, void *arg,
		   struct te_hs_daemon **out)
{
	struct te_hs_daemon *d;
	int rc;

	if (fn == NULL || out == NULL)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return -ENOMEM;
	d->fn = fn;
	d->arg = arg;
	d->timeout_ms = HS_DEF_TIMEOUT;
	d->wake[0] = d->wake[1] = -1;
	rc = make_listener(bind_ip, port, &d->lfd, &d->port);
	if (rc < 0) {
		free(d);
		return rc;
	}
	pthread_mutex_init(&d->allow_lock, NULL);
	if (pipe2(d->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = -pthread_create(&d->thr, NULL, daemon_main, d);
	if (rc != 0)
		goto fail;
	TIDE_LOG(INFO, "handshake daemon listening on %s:%u", bind_ip != NULL ? bind_ip : "*",
		 (unsigned)d->port);
	*out = d;
	return 0;
fail:
	if (d->wake[0] >= 0) {
		close(d->wake[0]);
		close(d->wake[1]);
	}
	close(d->lfd);
	pthread_mutex_destroy(&d->allow_lock);
	free(d);
	return rc;
}

uint16_t
te_hs_daemon_port(const struct te_hs_daemon *d)
{
	return d->port;
}

void
te_hs_daemon_set_timeout(struct te_hs_daemon *d, int timeout_ms)
{
	__atomic_store_n(&d->timeout_ms, timeout_ms > 0 ? timeout_ms : HS_DEF_TIMEOUT,
			 __ATOMIC_RELAXED);
}

void
te_hs_daemon_stop(struct te_hs_daemon *d)
{
	char b = 1;

	if (d == NULL)
		return;
	__atomic_store_n(&d->stop, true, __ATOMIC_RELEASE);
	if (write(d->wake[1], &b, 1) < 0) {
		/* A full pipe already wakes the thread; nothing else can fail here. */
	}
	pthread_join(d->thr, NULL);
	close(d->wake[0]);
	close(d->wake[1]);
	close(d->lfd);
	pthread_mutex_destroy(&d->allow_lock);
	free(d);
}

void
te_hs_daemon_set_allow(struct te_hs_daemon *d, const struct tide_cidr_list *allow)
{
	pthread_mutex_lock(&d->allow_lock);
	if (allow != NULL)
		d->allow = *allow;
	else
		d->allow.n = 0;
	pthread_mutex_unlock(&d->allow_lock);
}

uint64_t
te_hs_daemon_refused(const struct te_hs_daemon *d)
{
	return __atomic_load_n(&d->refused, __ATOMIC_RELAXED);
}

int
te_hs_request(const char *host, uint16_t port, uint8_t type, const char *json, size_t len,
	      int timeout_ms, char **reply, size_t *reply_len)
{
	int64_t deadline = meta_deadline(timeout_ms);
	uint8_t hdr[9];
	uint64_t rlen;
	char *buf = NULL;
	int fd = -1, rc;

	if (type > TE_HS_PROBE || len > TE_HS_MAX_LEN - 1)
		return len > TE_HS_MAX_LEN - 1 ? -EMSGSIZE : -EINVAL;
	rc = meta_sock_connect(host, port, deadline, &fd);
	if (rc < 0)
		return rc;
	put_le64(hdr, len + 1);
	hdr[8] = type;
	rc = meta_sock_write_all(fd, hdr, sizeof(hdr), deadline);
	if (rc == 0 && len > 0)
		rc = meta_sock_write_all(fd, json, len, deadline);
	if (rc < 0)
		goto out;
	rc = meta_sock_read_full(fd, hdr, sizeof(hdr), deadline);
	if (rc < 0)
		goto out;
	rlen = get_le64(hdr);
	if (rlen == 0 || rlen > TE_HS_MAX_LEN || hdr[8] != type) {
		TIDE_LOG_RATELIMIT(WARN, 5,
				   "handshake reply from %s:%u: bad frame (length %" PRIu64
				   ", type %u for %u)",
				   host, (unsigned)port, rlen, (unsigned)hdr[8], (unsigned)type);
		rc = -EPROTO;
		goto out;
	}
	buf = malloc(rlen);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = meta_sock_read_full(fd, buf, rlen - 1, deadline);
	if (rc < 0)
		goto out;
	buf[rlen - 1] = '\0';
	*reply = buf;
	*reply_len = rlen - 1;
	buf = NULL;
out:
	/* The daemon closing before a full reply (or resetting us) is a malformed reply. */
	if (rc == -ECONNRESET || rc == -EPIPE)
		rc = -EPROTO;
	free(buf);
	close(fd);
	return rc;
}
