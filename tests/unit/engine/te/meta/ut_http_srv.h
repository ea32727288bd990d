/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A tiny HTTP/1.1 server thread on 127.0.0.1 for the metadata unit tests. It
 * serves one connection at a time in one of three modes:
 * - UT_HTTP_KV: Mooncake's HTTP metadata semantics (GET/PUT/DELETE ?key=...,
 *   404 on a missing key, 400 on a PUT of a different value to a rpc_meta key);
 * - UT_HTTP_CANNED: answer every request with fixed raw bytes, then close;
 * - UT_HTTP_SILENT: read the request and never answer (until the client closes).
 */
#ifndef UT_HTTP_SRV_H
#define UT_HTTP_SRV_H

#include <stddef.h>
#include <stdint.h>

enum ut_http_mode {
	UT_HTTP_KV,
	UT_HTTP_CANNED,
	UT_HTTP_SILENT,
};

struct ut_http_srv;

int ut_http_srv_start(struct ut_http_srv **out);
uint16_t ut_http_srv_port(const struct ut_http_srv *s);
/* canned: raw response (len bytes, copied) for UT_HTTP_CANNED; NULL otherwise. */
void ut_http_srv_set(struct ut_http_srv *s, enum ut_http_mode mode, const char *canned, size_t len);
/* Copy of the last request's first line. */
void ut_http_srv_last_line(struct ut_http_srv *s, char *buf, size_t n);
/* Number of requests read so far. */
unsigned ut_http_srv_requests(struct ut_http_srv *s);
/* Value stored under key (decoded form) in KV mode, copied; NULL when absent. Caller frees. */
char *ut_http_srv_kv_get(struct ut_http_srv *s, const char *key);
void ut_http_srv_stop(struct ut_http_srv *s);

#endif /* UT_HTTP_SRV_H */
