/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The one HTTP/1.1 client: one request per connection ("Connection: close"),
 * the whole exchange (resolve, connect, send, receive) bounded by the caller's
 * deadline on engine/lib/addr's deadline socket, IPv4 and IPv6. Replies with a
 * Content-Length, chunked or read-to-EOF body; interim 1xx replies are skipped.
 * The body is collected, or handed piece by piece to a sink as it arrives (a
 * stream such as etcd's watch). Users: the transfer engine's HTTP metadata
 * client (Mooncake's protocol), the etcd v3 client (its JSON gateway).
 *
 * Bounds: status line and each header line at most 8 KiB, at most 100 header
 * lines, the body at most the request's max_body.
 */
#ifndef TIDE_HTTP_H
#define TIDE_HTTP_H

#include <stddef.h>
#include <stdint.h>

/** The largest reply body any request takes (64 MiB). */
#define TIDE_HTTP_MAX_BODY (64u << 20)

/** A parsed http:// URL. */
struct tide_http_url {
	char host[256];    /**< name or address literal, without IPv6 brackets */
	char hosthdr[272]; /**< the Host header: host:port, "[v6]:port" */
	uint16_t port;     /**< 80 when the URL names none */
	char path[2048];   /**< request target: "/..." with any query ("/" at least) */
};

/**
 * Parse url ("http://host[:port][/path][?query]", host a name, an IPv4
 * literal or a bracketed IPv6 literal) into *u.
 * \return 0; -EPROTONOSUPPORT https; -EINVAL anything else malformed (no
 *         scheme, empty host, userinfo, a port outside 1..65535, spaces or
 *         control characters, '#', too long), with the reason in err when err
 *         is not NULL. Thread: any.
 */
int tide_http_url_parse(const char *url, struct tide_http_url *u, char *err, size_t errlen);

/**
 * Body sink: called with each piece of the reply body (chunk framing removed)
 * as it arrives, in order. Return 0 to go on, 1 to end the exchange here (the
 * request then returns 0 with what was seen), or a negative errno to fail it
 * with that error.
 */
typedef int (*tide_http_sink_fn)(void *arg, const char *p, size_t n);

/** One request; zero-initialise, then set what is needed. */
struct tide_http_req {
	const char *method;       /**< "GET", "PUT", "POST", "DELETE" */
	const char *target;       /**< request target, "/..." (NULL: the URL's path) */
	const char *content_type; /**< of body; NULL: no Content-Type header */
	const void *body;         /**< body_len bytes sent after the headers; may be NULL */
	size_t body_len;          /**< a Content-Length is sent when body or content_type is set */
	uint64_t deadline_ms;     /**< the whole exchange, CLOCK_MONOTONIC ms (tide_mono_ms()) */
	uint64_t connect_deadline_ms; /**< connecting only; 0: deadline_ms */
	size_t max_body;              /**< reply body bound (collected or streamed); 0 or more than
				       * TIDE_HTTP_MAX_BODY: TIDE_HTTP_MAX_BODY */
	tide_http_sink_fn sink;       /**< NULL: the body is collected into *body */
	void *arg;                    /**< passed to sink */
};

/**
 * Run one request against u and read the final reply.
 * \param[out] status  the reply's status code, set as soon as its status line
 *                     arrived (0 until then), so a stream that times out after
 *                     its headers is told apart from a server that never answered.
 * \param[out] body,len  without a sink: the body, malloc'd and NUL-terminated
 *                     (the caller frees it; "" when empty); both may be NULL to
 *                     drop it. Untouched with a sink, and on failure.
 * \return 0 a reply was read (any status); -EINVAL bad arguments; the connect
 *         errors of tide_sock_connect() (-ECONNREFUSED, -EHOSTUNREACH,
 *         -ETIMEDOUT); -ETIMEDOUT the deadline passed later; -EPIPE or
 *         -ECONNRESET the connection broke while sending or before any reply;
 *         -EPROTO a malformed reply, or one cut short; -EMSGSIZE a body beyond
 *         max_body; -ENOMEM; or the sink's negative errno.
 * Thread: any; the call blocks until the reply or the deadline.
 */
int tide_http_request(const struct tide_http_url *u, const struct tide_http_req *r, int *status,
		      char **body, size_t *len);

/**
 * Percent-encode every byte of s but RFC 3986's unreserved characters, for a
 * query value. \return a malloc'd string (the caller frees it), NULL on
 * allocation failure. Thread: any.
 */
char *tide_http_encode(const char *s);

#endif /* TIDE_HTTP_H */
