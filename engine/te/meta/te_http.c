/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Minimal HTTP/1.1 client for Mooncake's HTTP metadata protocol: one request
 * per connection ("Connection: close"), the whole exchange (resolve, connect,
 * send, receive) bounded by the handle's timeout. Replies: Content-Length,
 * chunked, or read-to-EOF bodies; interim 1xx replies are skipped.
 * Bounds: status line and each header line <= 8 KiB, at most 100 header lines,
 * body <= TE_HTTP_MAX_BODY (64 MiB); anything larger is -EPROTO.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_buf.h"
#include "tide_log.h"

#define LINE_MAX_LEN 8192
#define MAX_HEADERS  100

struct te_http {
	char host[TE_NAME_MAX]; /* without IPv6 brackets */
	char hosthdr[TE_NAME_MAX + 8];
	uint16_t port;
	char *path; /* "/..." possibly with a query */
	int timeout_ms;
};

static void
seterr(char *err, size_t errlen, const char *msg)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
}

int
te_http_open(const char *url, int timeout_ms, struct te_http **out, char *err, size_t errlen)
{
	const char *p, *hs, *he, *pe;
	struct te_http *h;
	unsigned long port = 80;
	size_t hl;

	if (url == NULL) {
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
	if (hl >= TE_NAME_MAX || memchr(hs, '@', hl) != NULL) {
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
	pe = p;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	memcpy(h->host, hs, hl);
	h->host[hl] = '\0';
	if (strchr(h->host, ':') != NULL)
		snprintf(h->hosthdr, sizeof(h->hosthdr), "[%s]:%lu", h->host, port);
	else
		snprintf(h->hosthdr, sizeof(h->hosthdr), "%s:%lu", h->host, port);
	h->port = (uint16_t)port;
	/* "http://h?x=1" has an empty path: the request target still starts with '/'. */
	if (asprintf(&h->path, "%s%s", *pe == '/' ? "" : "/", pe) < 0) {
		free(h);
		return -ENOMEM;
	}
	h->timeout_ms = timeout_ms;
	*out = h;
	return 0;
}

void
te_http_close(struct te_http *h)
{
	if (h == NULL)
		return;
	free(h->path);
	free(h);
}

/* Percent-encode everything but RFC 3986 unreserved characters (as curl_easy_escape). */
static char *
url_encode(const char *s)
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

/* Buffered reader over one socket. */
struct rd {
	int fd;
	int64_t deadline;
	size_t off, len;
	char buf[16384];
};

static int
rd_fill(struct rd *r)
{
	ssize_t n;

	if (r->off == r->len)
		r->off = r->len = 0;
	n = meta_sock_read_some(r->fd, r->buf + r->len, sizeof(r->buf) - r->len, r->deadline);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return -ECONNRESET;
	r->len += (size_t)n;
	return 0;
}

/* One CRLF- (or LF-) terminated line without the terminator. -EPROTO when too long. */
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

/* Append exactly n bytes to body (already sized). */
static int
rd_exact(struct rd *r, char *dst, size_t n)
{
	while (n > 0) {
		size_t take = r->len - r->off;
		int rc;

		if (take == 0) {
			rc = rd_fill(r);
			if (rc < 0)
				return rc == -ECONNRESET ? -EPROTO : rc;
			continue;
		}
		if (take > n)
			take = n;
		memcpy(dst, r->buf + r->off, take);
		r->off += take;
		dst += take;
		n -= take;
	}
	return 0;
}

struct body {
	char *p;
	size_t len, cap;
};

static int
body_reserve(struct body *b, size_t extra)
{
	void *p = b->p;
	/* The bytes and a NUL, at most TE_HTTP_MAX_BODY bytes of body. */
	int rc = tide_grow(&p, &b->cap, b->len, extra + 1, 0, TE_HTTP_MAX_BODY + 1);

	b->p = p;
	return rc == -E2BIG ? -EPROTO : rc;
}

static int
read_sized(struct rd *r, struct body *b, size_t n)
{
	int rc = body_reserve(b, n);

	if (rc == 0)
		rc = rd_exact(r, b->p + b->len, n);
	if (rc == 0)
		b->len += n;
	return rc;
}

static int
read_chunked(struct rd *r, struct body *b, char *line)
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
		if (sz > TE_HTTP_MAX_BODY)
			return -EPROTO;
		if (sz == 0)
			break;
		rc = read_sized(r, b, (size_t)sz);
		if (rc == 0)
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

static int
read_to_eof(struct rd *r, struct body *b)
{
	for (;;) {
		size_t avail = r->len - r->off;
		int rc;

		if (avail > 0) {
			rc = body_reserve(b, avail);
			if (rc < 0)
				return rc;
			memcpy(b->p + b->len, r->buf + r->off, avail);
			b->len += avail;
			r->off = r->len;
		}
		rc = rd_fill(r);
		if (rc == -ECONNRESET)
			return 0;
		if (rc < 0)
			return rc;
	}
}

/* Parse one reply. 0 with *status and body (NUL-terminated when present). */
static int
read_reply(struct rd *r, int *status, struct body *b)
{
	char *line = malloc(LINE_MAX_LEN);
	int rc;

	if (line == NULL)
		return -ENOMEM;
	for (;;) {
		long long clen = -1;
		bool chunked = false;
		int code, nh = 0;

		rc = rd_line(r, line, LINE_MAX_LEN);
		if (rc < 0)
			goto out;
		if (strncmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
		    line[8] != ' ' || line[9] < '1' || line[9] > '5' || line[10] < '0' ||
		    line[10] > '9' || line[11] < '0' || line[11] > '9' ||
		    (line[12] != '\0' && line[12] != ' ')) {
			rc = -EPROTO;
			goto out;
		}
		code = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
		for (;;) {
			char *colon, *v;

			rc = rd_line(r, line, LINE_MAX_LEN);
			if (rc < 0)
				goto out;
			if (line[0] == '\0')
				break;
			if (++nh > MAX_HEADERS) {
				rc = -EPROTO;
				goto out;
			}
			colon = strchr(line, ':');
			if (colon == NULL) {
				rc = -EPROTO;
				goto out;
			}
			*colon = '\0';
			for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
				;
			if (strcasecmp(line, "content-length") == 0) {
				char *end;

				errno = 0;
				clen = strtoll(v, &end, 10);
				while (*end == ' ' || *end == '\t')
					end++;
				if (errno != 0 || v[0] < '0' || v[0] > '9' || *end != '\0' ||
				    clen > TE_HTTP_MAX_BODY) {
					rc = -EPROTO;
					goto out;
				}
			} else if (strcasecmp(line, "transfer-encoding") == 0) {
				chunked = strcasestr(v, "chunked") != NULL;
			}
		}
		if (code >= 100 && code < 200)
			continue; /* interim reply; the real one follows */
		*status = code;
		if (code == 204 || code == 304)
			rc = 0;
		else if (chunked)
			rc = read_chunked(r, b, line);
		else if (clen >= 0)
			rc = read_sized(r, b, (size_t)clen);
		else
			rc = read_to_eof(r, b);
		if (rc == 0 && body_reserve(b, 0) == 0)
			b->p[b->len] = '\0';
		goto out;
	}
out:
	free(line);
	return rc;
}

static int
request(struct te_http *h, const char *method, const char *key, const char *data, size_t dlen,
	int *status, struct body *b)
{
	int64_t deadline = meta_deadline(h->timeout_ms);
	struct rd *r = NULL;
	char *ekey, *hdr = NULL;
	int fd = -1, rc, n;

	ekey = url_encode(key);
	if (ekey == NULL)
		return -ENOMEM;
	if (data != NULL)
		n = asprintf(
			&hdr,
			"%s %s%ckey=%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tide\r\nAccept: */*\r\n"
			"Connection: close\r\nContent-Type: application/json\r\n"
			"Content-Length: %zu\r\n\r\n",
			method, h->path, strchr(h->path, '?') != NULL ? '&' : '?', ekey, h->hosthdr,
			dlen);
	else
		n = asprintf(
			&hdr,
			"%s %s%ckey=%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tide\r\nAccept: */*\r\n"
			"Connection: close\r\n\r\n",
			method, h->path, strchr(h->path, '?') != NULL ? '&' : '?', ekey,
			h->hosthdr);
	free(ekey);
	if (n < 0)
		return -ENOMEM;
	rc = meta_sock_connect(h->host, h->port, deadline, &fd);
	if (rc < 0)
		goto out;
	rc = meta_sock_write_all(fd, hdr, (size_t)n, deadline);
	if (rc == 0 && data != NULL && dlen > 0)
		rc = meta_sock_write_all(fd, data, dlen, deadline);
	if (rc < 0)
		goto out;
	r = malloc(sizeof(*r));
	if (r == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	r->fd = fd;
	r->deadline = deadline;
	r->off = r->len = 0;
	rc = read_reply(r, status, b);
	if (rc == -ECONNRESET || rc == -EPIPE)
		rc = -EPROTO;
out:
	if (rc < 0)
		TIDE_LOG(DEBUG, "%s %s key=%s: %s", method, h->hosthdr, key, strerror(-rc));
	free(r);
	free(hdr);
	if (fd >= 0)
		close(fd);
	return rc;
}

int
te_http_get(struct te_http *h, const char *key, char **body, size_t *len)
{
	struct body b = {0};
	int status = 0, rc;

	rc = request(h, "GET", key, NULL, 0, &status, &b);
	if (rc == 0 && status >= 200 && status < 300) {
		if (body_reserve(&b, 0) < 0) {
			free(b.p);
			return -ENOMEM;
		}
		b.p[b.len] = '\0';
		*body = b.p;
		if (len != NULL)
			*len = b.len;
		return 0;
	}
	free(b.p);
	if (rc < 0)
		return rc;
	return status == 404 ? -ENOENT : -EPROTO;
}

int
te_http_put(struct te_http *h, const char *key, const char *body, size_t len)
{
	struct body b = {0};
	int status = 0, rc;

	rc = request(h, "PUT", key, body != NULL ? body : "", body != NULL ? len : 0, &status, &b);
	free(b.p);
	if (rc < 0)
		return rc;
	if (status >= 200 && status < 300)
		return 0;
	return status == 400 ? -EEXIST : -EPROTO;
}

int
te_http_del(struct te_http *h, const char *key)
{
	struct body b = {0};
	int status = 0, rc;

	rc = request(h, "DELETE", key, NULL, 0, &status, &b);
	free(b.p);
	if (rc < 0)
		return rc;
	return (status >= 200 && status < 300) || status == 404 ? 0 : -EPROTO;
}
