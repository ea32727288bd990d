/* SPDX-License-Identifier: Apache-2.0 */
/* In-test HTTP server (see ut_http_srv.h). Bounds: requests up to 1 MiB, 64 keys. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ut_http_srv.h"

#define MAX_KEYS 64
#define MAX_REQ  (1 << 20)

struct kv {
	char *key;
	char *val;
};

struct ut_http_srv {
	int lfd;
	int wake[2];
	uint16_t port;
	pthread_t thr;
	pthread_mutex_t lock;
	enum ut_http_mode mode;
	char *canned;
	size_t canned_len;
	char last[512];
	unsigned nreq;
	struct kv kv[MAX_KEYS];
};

/* Wait for fd readable or the wake pipe. 1 readable; 0 stop. */
static int
wait_in(struct ut_http_srv *s, int fd)
{
	struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};

	for (;;) {
		int rc = poll(p, 2, -1);

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0 || (p[1].revents & POLLIN))
			return 0;
		if (p[0].revents)
			return 1;
	}
}

static void
send_all(int fd, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		b += w;
		n -= (size_t)w;
	}
}

static void
reply(int fd, int code, const char *body)
{
	char hdr[256];
	const char *why = code == 200 ? "OK" : code == 404 ? "Not Found" : "Bad Request";
	int n = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n\r\n", code,
			 why, strlen(body));

	send_all(fd, hdr, (size_t)n);
	send_all(fd, body, strlen(body));
}

static char *
url_decode(const char *s, size_t n)
{
	char *o = malloc(n + 1), *q = o;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n) {
			char hx[3] = {s[i + 1], s[i + 2], 0};

			*q++ = (char)strtol(hx, NULL, 16);
			i += 2;
		} else {
			*q++ = s[i] == '+' ? ' ' : s[i];
		}
	}
	*q = '\0';
	return o;
}

static struct kv *
kv_find(struct ut_http_srv *s, const char *key)
{
	for (int i = 0; i < MAX_KEYS; i++)
		if (s->kv[i].key != NULL && strcmp(s->kv[i].key, key) == 0)
			return &s->kv[i];
	return NULL;
}

static void
serve_kv(struct ut_http_srv *s, int fd, const char *method, const char *target, const char *body)
{
	const char *q = strstr(target, "key=");
	struct kv *e;
	char *key;
	int code = 200;
	char *out = NULL;

	if (q == NULL) {
		reply(fd, 400, "missing key");
		return;
	}
	key = url_decode(q + 4, strcspn(q + 4, "& "));
	pthread_mutex_lock(&s->lock);
	e = kv_find(s, key);
	if (strcmp(method, "GET") == 0) {
		if (e == NULL)
			code = 404;
		else
			out = strdup(e->val);
	} else if (strcmp(method, "PUT") == 0) {
		if (e != NULL && strstr(key, "rpc_meta") != NULL && strcmp(e->val, body) != 0) {
			code = 400;
		} else if (e != NULL) {
			free(e->val);
			e->val = strdup(body);
		} else {
			for (int i = 0; i < MAX_KEYS; i++) {
				if (s->kv[i].key == NULL) {
					s->kv[i].key = strdup(key);
					s->kv[i].val = strdup(body);
					break;
				}
			}
		}
	} else if (strcmp(method, "DELETE") == 0) {
		if (e == NULL) {
			code = 404;
		} else {
			free(e->key);
			free(e->val);
			e->key = e->val = NULL;
		}
	} else {
		code = 400;
	}
	pthread_mutex_unlock(&s->lock);
	reply(fd, code, out != NULL ? out : code == 404 ? "metadata not found" : "");
	free(out);
	free(key);
}

/* More of a request into buf[*len..MAX_REQ); false when buf is full, the peer has gone
 * or the server stops. */
static bool
recv_more(struct ut_http_srv *s, int fd, char *buf, size_t *len)
{
	ssize_t n;

	if (*len >= MAX_REQ || !wait_in(s, fd))
		return false;
	n = recv(fd, buf + *len, MAX_REQ - *len, 0);
	if (n <= 0)
		return false;
	*len += (size_t)n;
	return true;
}

static void
serve_conn(struct ut_http_srv *s, int fd)
{
	char *buf = malloc(MAX_REQ + 1), *hend, method[16] = "", target[400] = "";
	size_t len = 0, clen = 0, canned_len = 0;
	enum ut_http_mode mode;
	char *canned = NULL;
	const char *cl;

	for (;;) {
		buf[len] = '\0';
		hend = strstr(buf, "\r\n\r\n");
		if (hend != NULL)
			break;
		if (!recv_more(s, fd, buf, &len))
			goto out;
	}
	sscanf(buf, "%15s %399s", method, target);
	cl = strcasestr(buf, "\r\nContent-Length:");
	if (cl != NULL && cl < hend)
		clen = strtoul(cl + 17, NULL, 10);
	while ((size_t)(hend + 4 - buf) + clen > len) {
		if (!recv_more(s, fd, buf, &len))
			goto out;
	}
	hend[4 + clen] = '\0';
	pthread_mutex_lock(&s->lock);
	snprintf(s->last, sizeof(s->last), "%.*s", (int)strcspn(buf, "\r\n"), buf);
	s->nreq++;
	mode = s->mode;
	if (mode == UT_HTTP_CANNED) {
		canned = malloc(s->canned_len);
		memcpy(canned, s->canned, s->canned_len);
		canned_len = s->canned_len;
	}
	pthread_mutex_unlock(&s->lock);
	switch (mode) {
	case UT_HTTP_KV:
		serve_kv(s, fd, method, target, hend + 4);
		break;
	case UT_HTTP_CANNED:
		send_all(fd, canned, canned_len);
		break;
	case UT_HTTP_SILENT:
		/* Hold the connection until the client gives up. */
		while (wait_in(s, fd) && recv(fd, buf, MAX_REQ, 0) > 0)
			;
		break;
	}
out:
	free(canned);
	free(buf);
}

static void *
srv_main(void *arg)
{
	struct ut_http_srv *s = arg;

	for (;;) {
		int fd;

		if (!wait_in(s, s->lfd))
			return NULL;
		fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		serve_conn(s, fd);
		close(fd);
	}
}

int
ut_http_srv_start(struct ut_http_srv **out)
{
	struct ut_http_srv *s = calloc(1, sizeof(*s));
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t sl = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(s->lfd, 16) < 0 || getsockname(s->lfd, (struct sockaddr *)&a, &sl) < 0 ||
	    pipe(s->wake) < 0) {
		free(s);
		return -errno;
	}
	s->port = ntohs(a.sin_port);
	pthread_mutex_init(&s->lock, NULL);
	pthread_create(&s->thr, NULL, srv_main, s);
	*out = s;
	return 0;
}

uint16_t
ut_http_srv_port(const struct ut_http_srv *s)
{
	return s->port;
}

void
ut_http_srv_set(struct ut_http_srv *s, enum ut_http_mode mode, const char *canned, size_t len)
{
	pthread_mutex_lock(&s->lock);
	free(s->canned);
	s->canned = NULL;
	s->canned_len = 0;
	if (canned != NULL) {
		s->canned = malloc(len);
		memcpy(s->canned, canned, len);
		s->canned_len = len;
	}
	s->mode = mode;
	pthread_mutex_unlock(&s->lock);
}

void
ut_http_srv_last_line(struct ut_http_srv *s, char *buf, size_t n)
{
	pthread_mutex_lock(&s->lock);
	snprintf(buf, n, "%s", s->last);
	pthread_mutex_unlock(&s->lock);
}

unsigned
ut_http_srv_requests(struct ut_http_srv *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	n = s->nreq;
	pthread_mutex_unlock(&s->lock);
	return n;
}

char *
ut_http_srv_kv_get(struct ut_http_srv *s, const char *key)
{
	struct kv *e;
	char *v = NULL;

	pthread_mutex_lock(&s->lock);
	e = kv_find(s, key);
	if (e != NULL)
		v = strdup(e->val);
	pthread_mutex_unlock(&s->lock);
	return v;
}

void
ut_http_srv_stop(struct ut_http_srv *s)
{
	char b = 1;

	if (write(s->wake[1], &b, 1) != 1)
		perror("ut_http_srv wake");
	pthread_join(s->thr, NULL);
	close(s->lfd);
	close(s->wake[0]);
	close(s->wake[1]);
	for (int i = 0; i < MAX_KEYS; i++) {
		free(s->kv[i].key);
		free(s->kv[i].val);
	}
	free(s->canned);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
