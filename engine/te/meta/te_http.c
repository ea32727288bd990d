/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mooncake's HTTP metadata protocol (GET/PUT/DELETE <url>?key=<encoded>) over
 * engine/lib/addr's one HTTP client (tide_http.h): this file maps the protocol's
 * statuses to errors. Bounds: the client's (header lines 8 KiB, 100 headers),
 * bodies TE_HTTP_MAX_BODY; anything larger is -EPROTO.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_http.h"
#include "tide_log.h"

struct te_http {
	struct tide_http_url url;
	int timeout_ms;
};

int
te_http_open(const char *url, int timeout_ms, struct te_http **out, char *err, size_t errlen)
{
	struct te_http *h = calloc(1, sizeof(*h));
	int rc;

	if (h == NULL)
		return -ENOMEM;
	rc = tide_http_url_parse(url, &h->url, err, errlen);
	if (rc != 0) {
		free(h);
		return rc;
	}
	h->timeout_ms = timeout_ms;
	*out = h;
	return 0;
}

void
te_http_close(struct te_http *h)
{
	free(h);
}

/* One request for key; 0 with *status and the body (or a transport error). A
 * broken or malformed exchange is -EPROTO to callers, as an oversized body. */
static int
request(struct te_http *h, const char *method, const char *key, const char *data, size_t dlen,
	int *status, char **body, size_t *len)
{
	struct tide_http_req q = {.method = method,
				  .deadline_ms = (uint64_t)meta_deadline(h->timeout_ms),
				  .max_body = TE_HTTP_MAX_BODY};
	char *ekey = tide_http_encode(key), *target = NULL;
	int rc;

	if (ekey == NULL)
		return -ENOMEM;
	if (asprintf(&target, "%s%ckey=%s", h->url.path, strchr(h->url.path, '?') ? '&' : '?',
		     ekey) < 0) {
		free(ekey);
		return -ENOMEM;
	}
	free(ekey);
	q.target = target;
	if (data != NULL) {
		q.content_type = "application/json";
		q.body = data;
		q.body_len = dlen;
	}
	rc = tide_http_request(&h->url, &q, status, body, len);
	free(target);
	if (rc == -ECONNRESET || rc == -EPIPE || rc == -EMSGSIZE)
		rc = -EPROTO;
	return rc;
}

int
te_http_get(struct te_http *h, const char *key, char **body, size_t *len)
{
	char *b = NULL;
	size_t n = 0;
	int status = 0, rc;

	rc = request(h, "GET", key, NULL, 0, &status, &b, &n);
	if (rc == 0 && status >= 200 && status < 300) {
		*body = b;
		if (len != NULL)
			*len = n;
		return 0;
	}
	free(b);
	if (rc < 0)
		return rc;
	return status == 404 ? -ENOENT : -EPROTO;
}

int
te_http_put(struct te_http *h, const char *key, const char *body, size_t len)
{
	int status = 0, rc;

	rc = request(h, "PUT", key, body != NULL ? body : "", body != NULL ? len : 0, &status, NULL,
		     NULL);
	if (rc < 0)
		return rc;
	if (status >= 200 && status < 300)
		return 0;
	return status == 400 ? -EEXIST : -EPROTO;
}

int
te_http_del(struct te_http *h, const char *key)
{
	int status = 0, rc;

	rc = request(h, "DELETE", key, NULL, 0, &status, NULL, NULL);
	if (rc < 0)
		return rc;
	return (status >= 200 && status < 300) || status == 404 ? 0 : -EPROTO;
}
