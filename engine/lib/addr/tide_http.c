/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one HTTP/1.1 client (tide_http.h): a buffered reader over engine/lib/addr's
 * deadline socket, the reply parser, and a body that goes to a sink or into a
 * growing buffer. Bounds: LINE_MAX_LEN per status or header line, MAX_HEADERS
 * header lines (and trailer lines), the caller's max_body for the body; every
 * wait ends at the caller's deadline.
 */
#include "tide_http.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tide_buf.h"
#include "tide_log.h"
#include "tide_sock.h"

#define LINE_MAX_LEN 8192
#define MAX_HEADERS  100

static void
seterr(char *err, size_t errlen, const char *msg)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
}

int
tide_http_url_parse(const char *url, struct tide_http_url *u, char *err, size_t errlen)
{
	const char *p, *hs, *he;
	unsigned long port = 80;
	size_t hl;

	if (url == NULL || u == NULL) {
		seterr(err, errlen, "url: missing");
		return -EINVAL;
	}
	if (strncasecmp(url, "https://", 8) == 0) {
		seterr(err, errlen, "url: https is not supported (use http://)");
		return -EPROTONOSUPPORT;
	}
	if (strncasecmp(url, "http://", 7) != 0) {
		seterr(err, errlen, "url: must start with http://");
		return -EINVAL;
	}
	for (p = url; *p != '\0'; p++) {
		if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#') {
			seterr(err, errlen, "url: contains a space, control character or '#'");
			return -EINVAL;
		}
	}
	hs = url + 7;
	if (*hs == '[') {
		he = strchr(hs, ']');
		if (he == NULL) {
			seterr(err, errlen, "url: unterminated '[' in host");
			return -EINVAL;
		}
		hs++;
		p = he + 1;
	} else {
		he = hs + strcspn(hs, ":/?");
		p = he;
	}
	hl = (size_t)(he - hs);
	if (hl == 0) {
		seterr(err, errlen, "url: empty host");
		return -EINVAL;
	}
	if (hl >= sizeof(u->host) || memchr(hs, '@', hl) != NULL) {
		seterr(err, errlen, "url: host too long or contains userinfo");
		return -EINVAL;
	}
	if (*p == ':') {
		char *end;

		if (p[1] < '0' || p[1] > '9') {
			seterr(err, errlen, "url: port is not a number");
			return -EINVAL;
		}
		errno = 0;
		port = strtoul(p + 1, &end, 10);
		if (errno != 0 || port == 0 || port > 65535 ||
		    (*end != '\0' && *end != '/' && *end != '?')) {
			seterr(err, errlen, "url: port not in 1..65535");
			return -EINVAL;
		}
		p = end;
	} else if (*p != '\0' && *p != '/' && *p != '?') {
		seterr(err, errlen, "url: junk after host");
		return -EINVAL;
	}
	memset(u, 0, sizeof(*u));
	memcpy(u->host, hs, hl);
	if (strchr(u->host, ':') != NULL)
		snprintf(u->hosthdr, sizeof(u->hosthdr), "[%s]:%lu", u->host, port);
	else
		snprintf(u->hosthdr, sizeof(u->hosthdr), "%s:%lu", u->host, port);
	u->port = (uint16_t)port;
	/* "http://h?x=1" has an empty path: the request target still starts with '/'. */
	if ((size_t)snprintf(u->path, sizeof(u->path), "%s%s", *p == '/' ? "" : "/", p) >=
	    sizeof(u->path)) {
		seterr(err, errlen, "url: path too long");
		return -EINVAL;
	}
	return 0;
}

char *
tide_http_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *o = malloc(n * 3 + 1), *q = o;

	if (o == NULL)
		return NULL;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			*q++ = (char)c;
		} else {
			*q++ = '%';
			*q++ = hex[c >> 4];
			*q++ = hex[c & 15];
		}
	}
	*q = '\0';
	return o;
}

/* One exchange's reader and body. */
struct rd {
	int fd;
	uint64_t deadline;
	size_t off, len;
	const struct tide_http_req *req;
	size_t max;   /* body bound: req->max_body, or TIDE_HTTP_MAX_BODY */
	size_t seen;  /* body bytes delivered */
	bool stopped; /* the sink ended the exchange */
	char *body;   /* collected body (no sink) */
	size_t blen, bcap;
	char buf[16384];
};

/* More bytes into buf. -ECONNRESET at end of stream. */
static int
rd_fill(struct rd *r)
{
	ssize_t n;

	if (r->off == r->len)
		r->off = r->len = 0;
	n = tide_sock_read_some(r->fd, r->buf + r->len, sizeof(r->buf) - r->len, r->deadline);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return -ECONNRESET;
	r->len += (size_t)n;
	return 0;
}

/* One CRLF- (or LF-) terminated line without the terminator; -EPROTO when too
 * long or cut short. */
static int
rd_line(struct rd *r, char *line, size_t max)
{
	size_t n = 0;

	for (;;) {
		int rc;

		while (r->off < r->len) {
			char c = r->buf[r->off++];

			if (c == '\n') {
				if (n > 0 && line[n - 1] == '\r')
					n--;
				line[n] = '\0';
				return 0;
			}
			if (n + 1 >= max)
				return -EPROTO;
			line[n++] = c;
		}
		rc = rd_fill(r);
		if (rc < 0)
			return rc == -ECONNRESET ? -EPROTO : rc;
	}
}

/* Deliver n body bytes at p: to the sink, or appended to the collected body. */
static int
deliver(struct rd *r, const char *p, size_t n)
{
	const struct tide_http_req *q = r->req;

	if (n > r->max - r->seen)
		return -EMSGSIZE;
	r->seen += n;
	if (q->sink != NULL) {
		int rc = q->sink(q->arg, p, n);

		if (rc == 1)
			r->stopped = true;
		return rc < 0 ? rc : 0;
	}
	void *b = r->body;
	/* The bytes and a NUL. */
	int rc = tide_grow(&b, &r->bcap, r->blen, n + 1, 1024, r->max + 1);

	r->body = b;
	if (rc != 0)
		return rc == -E2BIG ? -EMSGSIZE : rc;
	memcpy(r->body + r->blen, p, n);
	r->blen += n;
	return 0;
}

/* Pass n body bytes from the socket on (n: SIZE_MAX reads to end of stream). */
static int
rd_body(struct rd *r, size_t n)
{
	while (n > 0 && !r->stopped) {
		size_t take = r->len - r->off;
		int rc;

		if (take == 0) {
			rc = rd_fill(r);
			if (rc == -ECONNRESET && n == SIZE_MAX)
				return 0; /* the end of a read-to-EOF body */
			if (rc < 0)
				return rc == -ECONNRESET ? -EPROTO : rc;
			continue;
		}
		if (take > n)
			take = n;
		rc = deliver(r, r->buf + r->off, take);
		r->off += take;
		if (n != SIZE_MAX)
			n -= take;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int
rd_chunked(struct rd *r, char *line)
{
	for (;;) {
		unsigned long long sz;
		char *end;
		int rc;

		rc = rd_line(r, line, LINE_MAX_LEN);
		if (rc < 0)
			return rc;
		if (!((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f') ||
		      (line[0] >= 'A' && line[0] <= 'F')))
			return -EPROTO;
		errno = 0;
		sz = strtoull(line, &end, 16);
		if (errno != 0 || (*end != '\0' && *end != ';' && *end != ' ' && *end != '\t'))
			return -EPROTO;
		if (sz > r->max)
			return -EMSGSIZE;
		if (sz == 0)
			break;
		rc = rd_body(r, (size_t)sz);
		if (rc < 0 || r->stopped)
			return rc;
		rc = rd_line(r, line, LINE_MAX_LEN);
		if (rc < 0)
			return rc;
		if (line[0] != '\0')
			return -EPROTO;
	}
	/* Trailer section, ended by an empty line. */
	for (int i = 0; i <= MAX_HEADERS; i++) {
		int rc = rd_line(r, line, LINE_MAX_LEN);

		if (rc < 0)
			return rc;
		if (line[0] == '\0')
			return 0;
	}
	return -EPROTO;
}

/* The status line "HTTP/1.x NNN[ reason]": its code, or -EPROTO. */
static int
status_code(const char *line)
{
	if (strncmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
	    line[8] != ' ' || line[9] < '1' || line[9] > '5' || line[10] < '0' || line[10] > '9' ||
	    line[11] < '0' || line[11] > '9' || (line[12] != '\0' && line[12] != ' '))
		return -EPROTO;
	return (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
}

/* Read replies until the final one; its status into *status, its body on. */
static int
read_reply(struct rd *r, char *line, int *status)
{
	for (;;) {
		long long clen = -1;
		bool chunked = false;
		int code, nh = 0, rc;

		rc = rd_line(r, line, LINE_MAX_LEN);
		if (rc < 0)
			return rc;
		code = status_code(line);
		if (code < 0)
			return code;
		for (;;) {
			char *colon, *v;

			rc = rd_line(r, line, LINE_MAX_LEN);
			if (rc < 0)
				return rc;
			if (line[0] == '\0')
				break;
			if (++nh > MAX_HEADERS)
				return -EPROTO;
			colon = strchr(line, ':');
			if (colon == NULL)
				return -EPROTO;
			*colon = '\0';
			for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
				;
			if (strcasecmp(line, "content-length") == 0) {
				char *end;

				errno = 0;
				clen = strtoll(v, &end, 10);
				while (*end == ' ' || *end == '\t')
					end++;
				if (errno != 0 || v[0] < '0' || v[0] > '9' || *end != '\0')
					return -EPROTO;
				if ((unsigned long long)clen > r->max)
					return -EMSGSIZE;
			} else if (strcasecmp(line, "transfer-encoding") == 0) {
				chunked = strcasestr(v, "chunked") != NULL;
			}
		}
		if (code < 200)
			continue; /* interim reply; the real one follows */
		*status = code;
		if (code == 204 || code == 304)
			return 0;
		if (chunked)
			return rd_chunked(r, line);
		return rd_body(r, clen >= 0 ? (size_t)clen : SIZE_MAX);
	}
}

int
tide_http_request(const struct tide_http_url *u, const struct tide_http_req *q, int *status,
		  char **body, size_t *len)
{
	const char *target;
	struct rd *r = NULL;
	char *hdr = NULL, *line = NULL;
	int fd = -1, rc, n;

	if (u == NULL || q == NULL || q->method == NULL || status == NULL ||
	    (q->body == NULL && q->body_len > 0))
		return -EINVAL;
	*status = 0;
	target = q->target != NULL ? q->target : u->path;
	if (q->body != NULL || q->content_type != NULL)
		n = asprintf(&hdr,
			     "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tide\r\nAccept: */*\r\n"
			     "Connection: close\r\n%s%s%sContent-Length: %zu\r\n\r\n",
			     q->method, target, u->hosthdr, q->content_type ? "Content-Type: " : "",
			     q->content_type ? q->content_type : "", q->content_type ? "\r\n" : "",
			     q->body_len);
	else
		n = asprintf(&hdr,
			     "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tide\r\nAccept: */*\r\n"
			     "Connection: close\r\n\r\n",
			     q->method, target, u->hosthdr);
	if (n < 0)
		return -ENOMEM;
	r = calloc(1, sizeof(*r));
	line = malloc(LINE_MAX_LEN);
	if (r == NULL || line == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = tide_sock_connect(u->host, u->port,
			       q->connect_deadline_ms != 0 &&
					       q->connect_deadline_ms < q->deadline_ms
				       ? q->connect_deadline_ms
				       : q->deadline_ms,
			       &fd);
	if (rc < 0)
		goto out;
	rc = tide_sock_write_all(fd, hdr, (size_t)n, q->deadline_ms);
	if (rc == 0 && q->body_len > 0)
		rc = tide_sock_write_all(fd, q->body, q->body_len, q->deadline_ms);
	if (rc < 0)
		goto out;
	r->fd = fd;
	r->deadline = q->deadline_ms;
	r->req = q;
	r->max = q->max_body != 0 && q->max_body < TIDE_HTTP_MAX_BODY ? q->max_body
								      : TIDE_HTTP_MAX_BODY;
	rc = read_reply(r, line, status);
	/* The peer closed before a status line: a broken connection, as for a send. */
	if (rc == -EPROTO && *status == 0 && r->len == 0 && r->seen == 0)
		rc = -ECONNRESET;
	if (rc == 0 && q->sink == NULL) {
		if (r->body == NULL && (r->body = malloc(1)) == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		r->body[r->blen] = '\0';
		if (body != NULL) {
			*body = r->body;
			r->body = NULL;
		}
		if (len != NULL)
			*len = r->blen;
	}
out:
	if (rc < 0)
		TIDE_LOG(DEBUG, "%s http://%s%s: %s", q->method, u->hosthdr, target, strerror(-rc));
	if (r != NULL)
		free(r->body);
	free(r);
	free(line);
	free(hdr);
	if (fd >= 0)
		close(fd);
	return rc;
}
