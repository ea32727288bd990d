/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd v3 over its JSON gateway: engine/lib/addr's HTTP client carries the HTTP
 * (tide_http.h, one request per connection), cJSON the bodies,
 * OpenSSL's base64 the byte fields. Gateway facts this relies on (etcd 3.4,
 * Debian 12): every call is a POST to /v3/<service>/<method>; int64 fields
 * come back as strings; fields at their zero value are left out (a failed
 * transaction has no "succeeded", an expired lease's keepalive has no "TTL",
 * a range that found nothing has no "kvs", a range within its limit no
 * "more"); streaming calls (watch) answer with one {"result":...} object per
 * line on a long-lived response; an error is a 4xx/5xx status with a body
 * {"error":msg,"message":msg,"code":grpc_code} whose message, not its code,
 * tells the cases apart (code 11 is both "compacted" and "future revision").
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "tide_buf.h"
#include "tide_clock.h"
#include "tide_etcd.h"
#include "tide_http.h"
#include "tide_log.h"

/* Replies are small (one key, a lease); a bound keeps a confused or hostile
 * endpoint from growing the buffer without end. Mooncake's client allows
 * 32 MiB messages; so do we. */
#define REPLY_MAX          (32u << 20)
#define DEFAULT_TIMEOUT_MS 5000u

struct tide_etcd {
	pthread_mutex_t lock;
	char *urls[TIDE_ETCD_MAX_ENDPOINTS];
	struct tide_http_url url[TIDE_ETCD_MAX_ENDPOINTS]; /* urls[i], parsed */
	int nurls;
	int cur; /* endpoint tried first */
	unsigned timeout_ms;
};

struct buf {
	char *p;
	size_t len, cap;
	bool overflow;
};

int
tide_etcd_parse_endpoints(const char *list, char **urls, int max)
{
	const char *p;
	int n = 0;

	if (list == NULL || urls == NULL || max < 1)
		return -EINVAL;
	if (strncmp(list, "etcd://", 7) == 0)
		list += 7;
	for (p = list; *p != '\0';) {
		const char *end = p + strcspn(p, ";,"), *a = p, *b = end, *colon;
		char *u;

		while (a < b && isspace((unsigned char)*a))
			a++;
		while (b > a && isspace((unsigned char)b[-1]))
			b--;
		p = *end != '\0' ? end + 1 : end;
		if (a == b)
			continue;
		if ((size_t)(b - a) > 7 && strncmp(a, "http://", 7) == 0)
			a += 7;
		else if (memchr(a, ':', (size_t)(b - a)) != NULL && strstr(a, "://") != NULL &&
			 strstr(a, "://") < b)
			goto bad; /* https or another scheme: not supported */
		colon = memrchr(a, ':', (size_t)(b - a));
		if (colon == NULL || colon == a || colon + 1 == b)
			goto bad;
		for (const char *d = colon + 1; d < b; d++)
			if (!isdigit((unsigned char)*d))
				goto bad;
		if (n == max)
			goto bad;
		if (asprintf(&u, "http://%.*s", (int)(b - a), a) < 0) {
			while (n > 0)
				free(urls[--n]);
			return -ENOMEM;
		}
		urls[n++] = u;
	}
	if (n == 0)
		return -EINVAL;
	return n;
bad:
	while (n > 0)
		free(urls[--n]);
	return -EINVAL;
}

int
tide_etcd_open(const char *endpoints, unsigned timeout_ms, struct tide_etcd **out)
{
	struct tide_etcd *e;
	int n;

	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	n = tide_etcd_parse_endpoints(endpoints, e->urls, TIDE_ETCD_MAX_ENDPOINTS);
	if (n < 0) {
		free(e);
		return n;
	}
	e->nurls = n;
	e->timeout_ms = timeout_ms != 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
	for (int i = 0; i < n; i++) {
		/* tide_etcd_parse_endpoints() checked the form; a name too long for the
		 * parsed URL is the one thing left to refuse. */
		if (tide_http_url_parse(e->urls[i], &e->url[i], NULL, 0) != 0) {
			while (n > 0)
				free(e->urls[--n]);
			free(e);
			return -EINVAL;
		}
	}
	pthread_mutex_init(&e->lock, NULL);
	*out = e;
	return 0;
}

void
tide_etcd_close(struct tide_etcd *e)
{
	if (e == NULL)
		return;
	for (int i = 0; i < e->nurls; i++)
		free(e->urls[i]);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

const char *
tide_etcd_endpoint(const struct tide_etcd *e)
{
	return e->urls[e->cur];
}

void
tide_etcd_kv_clear(struct tide_etcd_kv *kv)
{
	if (kv == NULL)
		return;
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

/* --- JSON and base64 helpers ------------------------------------------- */

static char *
b64_encode(const void *p, size_t n)
{
	char *out;

	if (n > (size_t)INT32_MAX / 2)
		return NULL;
	out = malloc(4 * ((n + 2) / 3) + 1);
	if (out != NULL)
		EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	return out;
}

/* Decode into a malloc()ed NUL-terminated buffer. EVP_DecodeBlock counts the
 * padding as output bytes, so the '=' at the end are subtracted. */
static int
b64_decode(const char *s, char **out, size_t *outlen)
{
	size_t n = strlen(s), pad = 0;
	int got;
	char *p;

	*out = NULL;
	if (n % 4 != 0 || n > (size_t)INT32_MAX)
		return -EBADMSG;
	p = malloc(n / 4 * 3 + 1);
	if (p == NULL)
		return -ENOMEM;
	got = n != 0 ? EVP_DecodeBlock((unsigned char *)p, (const unsigned char *)s, (int)n) : 0;
	if (got < 0) {
		free(p);
		return -EBADMSG;
	}
	if (n >= 1 && s[n - 1] == '=')
		pad++;
	if (n >= 2 && s[n - 2] == '=')
		pad++;
	*outlen = (size_t)got - pad;
	p[*outlen] = '\0';
	*out = p;
	return 0;
}

static bool
add_b64(cJSON *o, const char *name, const void *p, size_t n)
{
	char *s = b64_encode(p, n);
	bool ok = s != NULL && cJSON_AddStringToObject(o, name, s) != NULL;

	free(s);
	return ok;
}

static bool
add_i64(cJSON *o, const char *name, int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, v);
	return cJSON_AddStringToObject(o, name, s) != NULL;
}

/* A body of one field: {"<name>": base64(p, n)} or {"<name>": "<v>"}; NULL when out
 * of memory (call() then answers -ENOMEM). */
static cJSON *
body_b64(const char *name, const void *p, size_t n)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL && !add_b64(o, name, p, n)) {
		cJSON_Delete(o);
		o = NULL;
	}
	return o;
}

static cJSON *
body_i64(const char *name, int64_t v)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL && !add_i64(o, name, v)) {
		cJSON_Delete(o);
		o = NULL;
	}
	return o;
}

/* An int64 field: a string of digits or a number; absent = 0 (the gateway
 * leaves zero values out). -EBADMSG when present but not an integer. */
static int
get_i64(const cJSON *o, const char *name, int64_t *v)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
	char *end;

	*v = 0;
	if (f == NULL)
		return 0;
	if (cJSON_IsNumber(f)) {
		double d = f->valuedouble;

		/* Only integers a double holds exactly (|d| <= 2^53); anything else, NaN
		 * included, is not an int64 field (and converting it would be undefined). */
		if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) ||
		    d != (double)(int64_t)d)
			return -EBADMSG;
		*v = (int64_t)d;
		return 0;
	}
	if (!cJSON_IsString(f) || f->valuestring[0] == '\0')
		return -EBADMSG;
	errno = 0;
	*v = strtoll(f->valuestring, &end, 10);
	return errno != 0 || *end != '\0' ? -EBADMSG : 0;
}

static int
header_rev(const cJSON *reply, int64_t *rev)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(reply, "header");
	int64_t v = 0;
	int rc = cJSON_IsObject(h) ? get_i64(h, "revision", &v) : -EBADMSG;

	if (rc == 0 && rev != NULL)
		*rev = v;
	return rc;
}

static int
parse_kv(const cJSON *j, struct tide_etcd_kv *kv)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "key");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "value");
	int rc;

	memset(kv, 0, sizeof(*kv));
	if (!cJSON_IsString(k))
		return -EBADMSG;
	rc = b64_decode(k->valuestring, &kv->key, &kv->key_len);
	if (rc == 0)
		rc = v == NULL           ? b64_decode("", &kv->value, &kv->value_len)
		     : cJSON_IsString(v) ? b64_decode(v->valuestring, &kv->value, &kv->value_len)
					 : -EBADMSG;
	if (rc == 0)
		rc = get_i64(j, "create_revision", &kv->create_revision);
	if (rc == 0)
		rc = get_i64(j, "mod_revision", &kv->mod_revision);
	if (rc == 0)
		rc = get_i64(j, "version", &kv->version);
	if (rc == 0)
		rc = get_i64(j, "lease", &kv->lease);
	if (rc != 0)
		tide_etcd_kv_clear(kv);
	return rc;
}

/* --- HTTP ---------------------------------------------------------------- */

/* Append n bytes to b (NUL-terminated), within REPLY_MAX in all; false (and
 * b->overflow) past it or out of memory. */
static bool
buf_add(struct buf *b, const char *p, size_t n)
{
	void *q = b->p;

	if (tide_grow(&q, &b->cap, b->len, n + 1, 1024, REPLY_MAX) != 0) {
		b->overflow = true;
		return false;
	}
	b->p = q;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return true;
}

/* Transport errors worth trying the next endpoint for: no answer came (status
 * still 0) because the endpoint could not be reached or the connection broke. */
static bool
transport_error(int rc, int status)
{
	return status == 0 && (rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ETIMEDOUT ||
			       rc == -ECONNRESET || rc == -EPIPE);
}

/* One POST of txt to path on endpoint i, answered to sink (NULL: collected). */
static int
post_one(struct tide_etcd *e, int i, const char *path, const char *txt, unsigned timeout_ms,
	 unsigned connect_ms, tide_http_sink_fn sink, void *arg, int *status, char **body,
	 size_t *len)
{
	uint64_t now = tide_mono_ms();
	struct tide_http_req q = {.method = "POST",
				  .target = path,
				  .content_type = "application/json",
				  .body = txt,
				  .body_len = strlen(txt),
				  .deadline_ms = now + timeout_ms,
				  .connect_deadline_ms = now + connect_ms,
				  .max_body = REPLY_MAX,
				  .sink = sink,
				  .arg = arg};

	return tide_http_request(&e->url[i], &q, status, body, len);
}

/* etcd errors that answer the caller rather than report a failure: matched
 * in the reply's message, returned without a log. */
static const struct {
	const char *msg;
	int rc;
} answers[] = {
	{"lease not found", -ENOENT},                        /* a put on an unknown lease */
	{"required revision has been compacted", -ESTALE},   /* compaction done before */
	{"required revision is a future revision", -EINVAL}, /* compaction past the head */
	{"duplicate key given in txn request", -EINVAL},     /* a txn writing a key twice */
};

static int
answer_rc(const cJSON *m)
{
	for (size_t i = 0; cJSON_IsString(m) && i < sizeof(answers) / sizeof(answers[0]); i++)
		if (strstr(m->valuestring, answers[i].msg) != NULL)
			return answers[i].rc;
	return -EPROTO;
}

/*
 * POST body to path on the current endpoint, then on the others after a
 * transport error. On success *reply is the parsed JSON (caller deletes).
 * Called with e->lock held.
 */
static int
post(struct tide_etcd *e, const char *path, cJSON *body, cJSON **reply)
{
	char *txt = cJSON_PrintUnformatted(body);
	int rc = -ECONNREFUSED, last = 0;

	*reply = NULL;
	if (txt == NULL)
		return -ENOMEM;
	for (int t = 0; t < e->nurls; t++) {
		int i = (e->cur + t) % e->nurls, status = 0, r;
		char *b = NULL;
		size_t blen = 0;

		r = post_one(e, i, path, txt, e->timeout_ms, e->timeout_ms, NULL, NULL, &status, &b,
			     &blen);
		if (transport_error(r, status)) {
			last = r;
			rc = r == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
			continue;
		}
		e->cur = i;
		if (r != 0) {
			TIDE_LOG_RATELIMIT(WARN, 5, "etcd %s%s: %s", e->urls[i], path,
					   r == -EMSGSIZE ? "reply too large" : strerror(-r));
			rc = r == -EMSGSIZE ? -EBADMSG : r == -ENOMEM ? -ENOMEM : -EPROTO;
			break;
		}
		*reply = cJSON_ParseWithLength(b, blen);
		free(b);
		if (status != 200) {
			const cJSON *m =
				*reply ? cJSON_GetObjectItemCaseSensitive(*reply, "message") : NULL;

			if (m == NULL && *reply != NULL)
				m = cJSON_GetObjectItemCaseSensitive(*reply, "error");
			rc = answer_rc(m);
			if (rc == -EPROTO)
				TIDE_LOG_RATELIMIT(
					WARN, 5, "etcd %s%s: HTTP %d: %s", e->urls[i], path, status,
					cJSON_IsString(m) ? m->valuestring : "(no message)");
			cJSON_Delete(*reply);
			*reply = NULL;
			break;
		}
		rc = *reply != NULL ? 0 : -EBADMSG;
		break;
	}
	if (rc == -ECONNREFUSED || rc == -ETIMEDOUT)
		TIDE_LOG_RATELIMIT(WARN, 5, "etcd: no endpoint of %d answered %s (last: %s)",
				   e->nurls, path, strerror(-last));
	free(txt);
	return rc;
}

static int
call(struct tide_etcd *e, const char *path, cJSON *body, cJSON **reply)
{
	int rc;

	if (body == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&e->lock);
	rc = post(e, path, body, reply);
	pthread_mutex_unlock(&e->lock);
	cJSON_Delete(body);
	return rc;
}

/* --- calls ---------------------------------------------------------------- */

/* A request's range: [key, end); end_len 0 is just key, end "\0" no upper bound. */
struct range_q {
	const char *key;
	size_t key_len;
	const char *end;
	size_t end_len;
	int64_t limit; /* 0: none */
};

/* {"key": key, "range_end": end}, range_end left out for just key. */
static cJSON *
range_body(const struct range_q *q)
{
	cJSON *o = body_b64("key", q->key, q->key_len);

	if (o != NULL && q->end_len > 0 && !add_b64(o, "range_end", q->end, q->end_len)) {
		cJSON_Delete(o);
		o = NULL;
	}
	return o;
}

/* etcd's key order: bytes compared unsigned, a prefix before its extensions. */
static int
key_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c != 0 ? c : (an > bn) - (an < bn);
}

static bool
in_range(const struct tide_etcd_kv *kv, const struct range_q *q)
{
	int lo = key_cmp(kv->key, kv->key_len, q->key, q->key_len);

	if (q->end_len == 0)
		return lo == 0;
	return lo >= 0 && ((q->end_len == 1 && q->end[0] == '\0') ||
			   key_cmp(kv->key, kv->key_len, q->end, q->end_len) < 0);
}

/* The reply's "kvs" (left out when empty) as a malloc()ed array, checked
 * against the request: at most limit entries, each in the range, keys
 * strictly ascending. A caller paging on the last key relies on all three:
 * a peer breaking them could otherwise keep it reading the same page. */
static int
parse_kvs(const cJSON *reply, const struct range_q *q, struct tide_etcd_kv **out, size_t *n)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(reply, "kvs"), *j;
	struct tide_etcd_kv *kvs;
	size_t cnt, i = 0;
	int rc = 0;

	if (arr != NULL && !cJSON_IsArray(arr))
		return -EBADMSG;
	cnt = (size_t)cJSON_GetArraySize(arr);
	if (cnt == 0)
		return 0;
	if (q->limit > 0 && (uint64_t)cnt > (uint64_t)q->limit)
		return -EBADMSG;
	kvs = calloc(cnt, sizeof(*kvs));
	if (kvs == NULL)
		return -ENOMEM;
	cJSON_ArrayForEach(j, arr)
	{
		const struct tide_etcd_kv *prev = i > 0 ? &kvs[i - 1] : NULL;
		struct tide_etcd_kv *kv = &kvs[i++];

		rc = parse_kv(j, kv);
		if (rc == 0 && !in_range(kv, q))
			rc = -EBADMSG;
		if (rc == 0 && prev != NULL &&
		    key_cmp(prev->key, prev->key_len, kv->key, kv->key_len) >= 0)
			rc = -EBADMSG; /* not strictly ascending */
		if (rc != 0)
			break;
	}
	if (rc != 0) {
		tide_etcd_kvs_free(kvs, i);
		return rc;
	}
	*out = kvs;
	*n = cnt;
	return 0;
}

int
tide_etcd_range(struct tide_etcd *e, const char *key, size_t key_len, const char *range_end,
		size_t range_end_len, int64_t limit, struct tide_etcd_kv **kvs, size_t *n,
		bool *more, int64_t *hrev)
{
	const struct range_q q = {key, key_len, range_end, range_end != NULL ? range_end_len : 0,
				  limit};
	cJSON *body, *reply = NULL;
	const cJSON *m;
	int rc;

	if (kvs != NULL)
		*kvs = NULL;
	if (n != NULL)
		*n = 0;
	if (more != NULL)
		*more = false;
	if (e == NULL || key == NULL || key_len == 0 || limit < 0 || kvs == NULL || n == NULL)
		return -EINVAL;
	/* No sort_order: etcd returns keys ascending without one, and with one
	 * (even ASCEND by KEY) etcd 3.4 reads the whole range before applying the
	 * limit, every page. clientv3's WithSort drops ASCEND/KEY for that reason. */
	body = range_body(&q);
	if (body != NULL && limit > 0 && !add_i64(body, "limit", limit)) {
		cJSON_Delete(body);
		body = NULL;
	}
	rc = call(e, "/v3/kv/range", body, &reply);
	if (rc != 0)
		return rc;
	rc = header_rev(reply, hrev);
	if (rc == 0)
		rc = parse_kvs(reply, &q, kvs, n);
	/* "more" is true only when a limit was reached. */
	m = cJSON_GetObjectItemCaseSensitive(reply, "more");
	if (rc == 0 && m != NULL &&
	    (!cJSON_IsBool(m) || (cJSON_IsTrue(m) && (limit == 0 || (int64_t)*n != limit))))
		rc = -EBADMSG;
	if (rc != 0) {
		tide_etcd_kvs_free(*kvs, *n);
		*kvs = NULL;
		*n = 0;
	} else if (more != NULL) {
		*more = cJSON_IsTrue(m);
	}
	cJSON_Delete(reply);
	return rc;
}

void
tide_etcd_kvs_free(struct tide_etcd_kv *kvs, size_t n)
{
	if (kvs == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		tide_etcd_kv_clear(&kvs[i]);
	free(kvs);
}

size_t
tide_etcd_prefix_end(const char *prefix, size_t prefix_len, char *out)
{
	size_t n = prefix_len;

	while (n > 0 && (unsigned char)prefix[n - 1] == 0xff)
		n--;
	if (n == 0) {
		/* Nothing but 0xff: no key ends the prefix; "\0" means no upper bound. */
		if (prefix_len > 0)
			out[0] = '\0';
		return prefix_len > 0 ? 1 : 0;
	}
	memmove(out, prefix, n - 1);
	out[n - 1] = (char)((unsigned char)prefix[n - 1] + 1);
	return n;
}

int
tide_etcd_get(struct tide_etcd *e, const char *key, size_t key_len, struct tide_etcd_kv *out,
	      int64_t *hrev)
{
	struct tide_etcd_kv *kvs = NULL;
	size_t n = 0;
	int rc;

	if (out == NULL)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	rc = tide_etcd_range(e, key, key_len, NULL, 0, 0, &kvs, &n, NULL, hrev);
	if (rc == 0 && n == 0)
		return -ENOENT;
	if (rc == 0) {
		/* Just key: the range checks leave one entry at most. */
		*out = kvs[0];
		memset(&kvs[0], 0, sizeof(kvs[0]));
	}
	tide_etcd_kvs_free(kvs, n);
	return rc;
}

static cJSON *
put_body(const char *key, size_t key_len, const void *value, size_t value_len, int64_t lease)
{
	cJSON *o = cJSON_CreateObject();

	if (o == NULL || !add_b64(o, "key", key, key_len) ||
	    !add_b64(o, "value", value, value_len) || (lease != 0 && !add_i64(o, "lease", lease))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int
tide_etcd_put(struct tide_etcd *e, const char *key, size_t key_len, const void *value,
	      size_t value_len, int64_t lease, int64_t *rev)
{
	cJSON *reply = NULL;
	int rc;

	if (e == NULL || key == NULL || key_len == 0 || (value == NULL && value_len != 0))
		return -EINVAL;
	rc = call(e, "/v3/kv/put", put_body(key, key_len, value ? value : "", value_len, lease),
		  &reply);
	if (rc == 0)
		rc = header_rev(reply, rev);
	cJSON_Delete(reply);
	return rc;
}

/* One operation of a transaction's success branch. */
static cJSON *
op_json(const struct tide_etcd_op *op)
{
	const struct range_q q = {op->key, op->key_len, op->range_end,
				  op->range_end != NULL ? op->range_end_len : 0, 0};
	bool put = op->type == TIDE_ETCD_OP_PUT;
	cJSON *o = cJSON_CreateObject();
	cJSON *req = put ? put_body(op->key, op->key_len, op->value ? op->value : "", op->value_len,
				    op->lease)
			 : range_body(&q);

	if (o == NULL || req == NULL ||
	    !cJSON_AddItemToObject(o, put ? "request_put" : "request_delete_range", req)) {
		cJSON_Delete(o);
		cJSON_Delete(req);
		return NULL;
	}
	return o;
}

static bool
op_valid(const struct tide_etcd_op *op)
{
	if (op->key == NULL || op->key_len == 0)
		return false;
	if (op->type == TIDE_ETCD_OP_PUT)
		return (op->value != NULL || op->value_len == 0) && op->lease >= 0;
	return op->type == TIDE_ETCD_OP_DELETE;
}

/* {"compare":[cmp_key's create_revision == create_rev], "success":[ops]}; NULL
 * when out of memory. */
static cJSON *
txn_body(const char *cmp_key, size_t cmp_key_len, int64_t create_rev,
	 const struct tide_etcd_op *ops, size_t n)
{
	cJSON *body = cJSON_CreateObject();
	cJSON *cmps = cJSON_AddArrayToObject(body, "compare");
	cJSON *succ = cJSON_AddArrayToObject(body, "success");
	cJSON *cmp = cJSON_CreateObject();
	bool ok;

	if (succ == NULL || !cJSON_AddItemToArray(cmps, cmp)) {
		cJSON_Delete(cmp); /* not attached to body */
		cJSON_Delete(body);
		return NULL;
	}
	ok = add_b64(cmp, "key", cmp_key, cmp_key_len) &&
	     cJSON_AddStringToObject(cmp, "target", "CREATE") != NULL &&
	     cJSON_AddStringToObject(cmp, "result", "EQUAL") != NULL &&
	     add_i64(cmp, "create_revision", create_rev);
	for (size_t i = 0; ok && i < n; i++)
		ok = cJSON_AddItemToArray(succ, op_json(&ops[i])); /* false for NULL */
	if (!ok) {
		cJSON_Delete(body);
		return NULL;
	}
	return body;
}

int
tide_etcd_txn_if_created(struct tide_etcd *e, const char *cmp_key, size_t cmp_key_len,
			 int64_t create_rev, const struct tide_etcd_op *ops, size_t n, int64_t *rev)
{
	cJSON *reply = NULL;
	const cJSON *ok;
	int64_t r = 0;
	int rc;

	if (e == NULL || cmp_key == NULL || cmp_key_len == 0 || create_rev < 0 || ops == NULL ||
	    n == 0 || n > TIDE_ETCD_TXN_MAX_OPS)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!op_valid(&ops[i]))
			return -EINVAL;
	rc = call(e, "/v3/kv/txn", txn_body(cmp_key, cmp_key_len, create_rev, ops, n), &reply);
	if (rc != 0)
		return rc;
	rc = header_rev(reply, &r);
	ok = cJSON_GetObjectItemCaseSensitive(reply, "succeeded");
	if (rc == 0 && ok != NULL && !cJSON_IsBool(ok))
		rc = -EBADMSG;
	else if (rc == 0 && !cJSON_IsTrue(ok))
		rc = -ESTALE; /* left out when false */
	if (rc == 0 && rev != NULL)
		*rev = r;
	cJSON_Delete(reply);
	return rc;
}

int
tide_etcd_create(struct tide_etcd *e, const char *key, size_t key_len, const void *value,
		 size_t value_len, int64_t lease, int64_t *rev)
{
	const struct tide_etcd_op put = {.type = TIDE_ETCD_OP_PUT,
					 .key = key,
					 .key_len = key_len,
					 .value = value,
					 .value_len = value_len,
					 .lease = lease};
	int rc = tide_etcd_txn_if_created(e, key, key_len, 0, &put, 1, rev);

	return rc == -ESTALE ? -EEXIST : rc;
}

int
tide_etcd_delete_range(struct tide_etcd *e, const char *key, size_t key_len, const char *range_end,
		       size_t range_end_len, int64_t *deleted)
{
	const struct range_q q = {key, key_len, range_end, range_end != NULL ? range_end_len : 0,
				  0};
	cJSON *reply = NULL;
	int64_t n = 0;
	int rc;

	if (deleted != NULL)
		*deleted = 0;
	if (e == NULL || key == NULL || key_len == 0)
		return -EINVAL;
	rc = call(e, "/v3/kv/deleterange", range_body(&q), &reply);
	if (rc == 0)
		rc = header_rev(reply, NULL);
	if (rc == 0)
		rc = get_i64(reply, "deleted", &n); /* left out when 0 */
	if (rc == 0 && n < 0)
		rc = -EBADMSG;
	if (rc == 0 && deleted != NULL)
		*deleted = n;
	cJSON_Delete(reply);
	return rc;
}

int
tide_etcd_delete(struct tide_etcd *e, const char *key, size_t key_len)
{
	int64_t n = 0;
	int rc = tide_etcd_delete_range(e, key, key_len, NULL, 0, &n);

	return rc == 0 && n == 0 ? -ENOENT : rc;
}

int
tide_etcd_compact(struct tide_etcd *e, int64_t rev)
{
	cJSON *reply = NULL;
	int rc;

	if (e == NULL || rev <= 0)
		return -EINVAL;
	rc = call(e, "/v3/kv/compaction", body_i64("revision", rev), &reply);
	if (rc == 0)
		rc = header_rev(reply, NULL);
	cJSON_Delete(reply);
	/* Compacted before (by us, another client, etcd's auto-compaction): done. */
	return rc == -ESTALE ? 0 : rc;
}

int
tide_etcd_lease_grant(struct tide_etcd *e, int64_t ttl_s, int64_t *id)
{
	cJSON *body, *reply = NULL;
	int rc;

	if (e == NULL || id == NULL || ttl_s < 1 || ttl_s > 9000000000LL)
		return -EINVAL;
	*id = 0;
	body = body_i64("TTL", ttl_s);
	rc = call(e, "/v3/lease/grant", body, &reply);
	if (rc == 0)
		rc = get_i64(reply, "ID", id);
	if (rc == 0 && *id <= 0)
		rc = -EBADMSG;
	cJSON_Delete(reply);
	return rc;
}

int
tide_etcd_lease_keepalive(struct tide_etcd *e, int64_t id, int64_t *ttl_s)
{
	cJSON *body, *reply = NULL;
	const cJSON *res;
	int64_t ttl = 0;
	int rc;

	if (e == NULL || id <= 0)
		return -EINVAL;
	body = body_i64("ID", id);
	rc = call(e, "/v3/lease/keepalive", body, &reply);
	if (rc != 0)
		return rc;
	/* A unary POST to the streaming method answers one {"result":{...}}. */
	res = cJSON_GetObjectItemCaseSensitive(reply, "result");
	rc = cJSON_IsObject(res) ? get_i64(res, "TTL", &ttl) : -EBADMSG;
	if (rc == 0 && ttl <= 0)
		rc = -ENOENT; /* expired or revoked: etcd leaves TTL out */
	if (rc == 0 && ttl_s != NULL)
		*ttl_s = ttl;
	cJSON_Delete(reply);
	return rc;
}

int
tide_etcd_lease_revoke(struct tide_etcd *e, int64_t id)
{
	cJSON *body, *reply = NULL;
	int rc;

	if (e == NULL || id <= 0)
		return -EINVAL;
	body = body_i64("ID", id);
	rc = call(e, "/v3/lease/revoke", body, &reply);
	cJSON_Delete(reply);
	return rc == -ENOENT ? 0 : rc;
}

/* --- watch ----------------------------------------------------------------- */

struct watch_state {
	struct buf b;
	bool created, changed;
	int64_t rev;
	int err;
};

/* One {"result":...} line: "created" first, then events; a cancel (the
 * start revision was compacted) counts as a change so the caller re-reads. */
static void
watch_line(struct watch_state *w, const char *line, size_t n)
{
	cJSON *j = cJSON_ParseWithLength(line, n);
	const cJSON *res = j ? cJSON_GetObjectItemCaseSensitive(j, "result") : NULL;
	const cJSON *ev;

	if (!cJSON_IsObject(res)) {
		w->err = -EBADMSG;
		cJSON_Delete(j);
		return;
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "created")))
		w->created = true;
	ev = cJSON_GetObjectItemCaseSensitive(res, "events");
	if (cJSON_IsArray(ev) && cJSON_GetArraySize(ev) > 0) {
		const cJSON *kv = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ev, 0), "kv");

		w->changed = true;
		if (cJSON_IsObject(kv))
			(void)get_i64(kv, "mod_revision", &w->rev);
	} else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "canceled"))) {
		w->changed = true;
	}
	cJSON_Delete(j);
}

/* The watch stream's sink: whole lines to watch_line(); 1 (end the stream)
 * once a change, or junk, is seen. */
static int
on_watch(void *arg, const char *p, size_t n)
{
	struct watch_state *w = arg;
	char *nl;

	if (!buf_add(&w->b, p, n))
		return -EMSGSIZE;
	while (!w->changed && w->err == 0 && (nl = memchr(w->b.p, '\n', w->b.len)) != NULL) {
		size_t ln = (size_t)(nl - w->b.p);

		if (ln > 0)
			watch_line(w, w->b.p, ln);
		memmove(w->b.p, nl + 1, w->b.len - ln - 1);
		w->b.len -= ln + 1;
	}
	return w->changed || w->err != 0 ? 1 : 0;
}

int
tide_etcd_wait_change(struct tide_etcd *e, const char *key, size_t key_len, int64_t after_rev,
		      unsigned timeout_ms, int64_t *rev)
{
	cJSON *body, *cr;
	char *txt;
	int rc = -ECONNREFUSED;

	if (e == NULL || key == NULL || key_len == 0 || after_rev < 0 || timeout_ms == 0)
		return -EINVAL;
	body = cJSON_CreateObject();
	cr = cJSON_AddObjectToObject(body, "create_request");
	if (cr == NULL || !add_b64(cr, "key", key, key_len) ||
	    !add_i64(cr, "start_revision", after_rev + 1)) {
		cJSON_Delete(body);
		return -ENOMEM;
	}
	txt = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	if (txt == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&e->lock);
	for (int t = 0; t < e->nurls; t++) {
		int i = (e->cur + t) % e->nurls, status = 0, r;
		struct watch_state w = {0};

		/* The stream's deadline is the wait; connecting keeps the call's own bound. */
		r = post_one(e, i, "/v3/watch", txt, timeout_ms,
			     timeout_ms < e->timeout_ms ? timeout_ms : e->timeout_ms, on_watch, &w,
			     &status, NULL, NULL);
		free(w.b.p);
		if (w.changed) {
			e->cur = i;
			if (rev != NULL)
				*rev = w.rev;
			rc = 1;
			break;
		}
		if (w.err != 0 || w.b.overflow) {
			rc = -EBADMSG;
			break;
		}
		if ((r == -ETIMEDOUT || (r == 0 && status == 200)) && w.created) {
			/* The key stayed quiet, or etcd ended the stream (it is stopping):
			 * no change seen; the caller reads the key again. */
			e->cur = i;
			rc = 0;
			break;
		}
		if (status != 0 && status != 200) {
			TIDE_LOG_RATELIMIT(WARN, 5, "etcd %s/v3/watch: HTTP %d", e->urls[i],
					   status);
			rc = -EPROTO;
			break;
		}
		rc = r == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
	}
	pthread_mutex_unlock(&e->lock);
	free(txt);
	return rc;
}
