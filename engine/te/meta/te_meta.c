/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metadata layer: P2PHANDSHAKE, HTTP or etcd, chosen by the connection
 * string, plus the handshake daemon that serves our descriptor in every mode.
 * HTTP and etcd hold the same two keys per segment (Mooncake's
 * "mooncake/[<cluster>/]ram/<name>" and ".../rpc_meta/<name>"); on etcd the
 * values are written as Mooncake writes them, compact JSON and a newline, with
 * no lease (a crashed process's keys stay until overwritten, as stock's do).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_etcd.h"
#include "tide_log.h"
#include "tide_te.h"

#define SUPPORTED                                                        \
	"supported: \"P2PHANDSHAKE\", \"http://host[:port][/path]\" or " \
	"\"etcd://host:port[;host:port...]\" (also without etcd://)"

/* Notifications kept for te_meta_notifies_take(): a bound on count and bytes, so
 * a peer that notifies faster than the application reads cannot grow us without
 * limit. Past it the daemon refuses (an empty notify_msg, which a stock sender
 * reports as "Notify rejected") instead of dropping what it already holds. */
#define NOTIFY_MAX_COUNT 65536
#define NOTIFY_MAX_BYTES (64u << 20)
/* Mooncake's reply to an accepted Notify (TransferMetadata::receivePeerNotify). */
#define NOTIFY_OK      "{\"name\":\"\",\"notify_msg\":\"success\"}"
#define NOTIFY_REFUSED "{\"name\":\"\",\"notify_msg\":\"\"}"

/* Mooncake answers a refused RDMA Connection with a HandShakeDesc carrying reply_msg. */
#define CONN_REFUSAL "{\"reply_msg\":\"tide: RDMA connections are not supported (TCP only)\"}"

struct te_meta {
	bool p2p;
	int timeout_ms;
	struct te_http *http;     /* HTTP mode */
	struct tide_etcd *etcd;   /* etcd mode */
	char prefix[TE_NAME_MAX]; /* "mooncake/" or "mooncake/<cluster id>/" */
	struct te_hs_daemon *daemon;
	pthread_mutex_t publish_lock; /* serialises te_meta_publish (kv_name, HTTP keys) */
	pthread_mutex_t lock;         /* guards pub_json/pub_len (daemon thread reads them) */
	char *pub_json;               /* last published descriptor JSON, or NULL */
	size_t pub_len;
	char kv_name[TE_NAME_MAX]; /* name our HTTP/etcd keys are under (after a successful
				    * rpc_meta PUT), for close; "" when none */
	/* Connection (RDMA) handler; conn_lock is held across each call so that
	 * te_meta_set_conn_handler() can wait for a running one. */
	pthread_mutex_t conn_lock;
	te_hs_handler_fn conn_fn;
	void *conn_arg;
	/* Notifications received, oldest first; a ring would save a memmove per
	 * take, but takes hand over the whole array at once. */
	pthread_mutex_t notify_lock;
	struct tide_te_notify *nq;
	size_t nq_len, nq_cap, nq_bytes;
	/* P2P: the descriptor is rebuilt when asked for, not on every change (a
	 * thousand registrations would otherwise encode it a thousand times, each
	 * with every buffer: quadratic). refresh_lock is held across each call of
	 * refresh_fn so te_meta_set_refresh() can wait for a running one. */
	pthread_mutex_t refresh_lock;
	te_meta_refresh_fn refresh_fn;
	void *refresh_arg;
	_Atomic bool pub_stale;
};

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int
dupreply(const char *s, size_t n, char **reply, size_t *reply_len)
{
	char *p = malloc(n + 1);

	if (p == NULL)
		return -ENOMEM;
	memcpy(p, s, n);
	p[n] = '\0';
	*reply = p;
	*reply_len = n;
	return 0;
}

/* A JSON member as a malloc'd string: "" when absent or not a string (Mooncake's asString). */
static char *
json_str_dup(const cJSON *root, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

	return strdup(cJSON_IsString(v) && v->valuestring != NULL ? v->valuestring : "");
}

/* Daemon thread: queue one Notify request ({"name":...,"notify_msg":...}). 0 kept. */
static int
notify_keep(struct te_meta *m, const char *json, size_t len)
{
	struct tide_te_notify n;
	cJSON *root = cJSON_ParseWithLength(json, len);
	size_t bytes, held;
	int rc = 0;

	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		TIDE_LOG_RATELIMIT(WARN, 10,
				   "handshake: Notify request is not a JSON object: refused");
		return -EPROTO;
	}
	n.name = json_str_dup(root, "name");
	n.msg = json_str_dup(root, "notify_msg");
	cJSON_Delete(root);
	if (n.name == NULL || n.msg == NULL) {
		free(n.name);
		free(n.msg);
		return -ENOMEM;
	}
	bytes = strlen(n.name) + strlen(n.msg) + 2;
	pthread_mutex_lock(&m->notify_lock);
	if (m->nq_len >= NOTIFY_MAX_COUNT || m->nq_bytes + bytes > NOTIFY_MAX_BYTES) {
		rc = -ENOSPC;
	} else if (m->nq_len == m->nq_cap) {
		size_t cap = m->nq_cap ? m->nq_cap * 2 : 16;
		struct tide_te_notify *q = realloc(m->nq, cap * sizeof(*q));

		if (q == NULL) {
			rc = -ENOMEM;
		} else {
			m->nq = q;
			m->nq_cap = cap;
		}
	}
	if (rc == 0) {
		m->nq[m->nq_len++] = n;
		m->nq_bytes += bytes;
	}
	held = m->nq_len;
	pthread_mutex_unlock(&m->notify_lock);
	if (rc != 0) {
		/* The name is the peer's text: its length is printed, not the text. */
		TIDE_LOG_RATELIMIT(
			WARN, 10,
			"handshake: a Notify (name of %zu bytes) refused: %s (%zu held, at "
			"most %d / %u MiB; the application has not called get_notifies)",
			strlen(n.name), rc == -ENOSPC ? "queue full" : strerror(-rc), held,
			NOTIFY_MAX_COUNT, NOTIFY_MAX_BYTES >> 20);
		free(n.name);
		free(n.msg);
	}
	return rc;
}

void
te_meta_notifies_free(struct tide_te_notify *v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++) {
		free(v[i].name);
		free(v[i].msg);
	}
	free(v);
}

int
te_meta_notifies_take(struct te_meta *m, struct tide_te_notify **out, size_t *n)
{
	pthread_mutex_lock(&m->notify_lock);
	*out = m->nq;
	*n = m->nq_len;
	m->nq = NULL;
	m->nq_len = m->nq_cap = m->nq_bytes = 0;
	pthread_mutex_unlock(&m->notify_lock);
	return 0;
}

int
te_meta_notify(struct te_meta *m, const char *peer, const char *name, const char *msg, char *err,
	       size_t errlen)
{
	cJSON *root = cJSON_CreateObject(), *ok;
	char *json = NULL, *reply = NULL;
	size_t reply_len = 0;
	int rc = -ENOMEM;

	if (root == NULL || cJSON_AddStringToObject(root, "name", name) == NULL ||
	    cJSON_AddStringToObject(root, "notify_msg", msg) == NULL ||
	    (json = cJSON_PrintUnformatted(root)) == NULL)
		goto out;
	if (strlen(json) >= TE_HS_MAX_LEN) {
		seterr(err, errlen, "notify to %.200s: message over %d bytes", peer, TE_HS_MAX_LEN);
		rc = -EINVAL;
		goto out;
	}
	rc = te_meta_request(m, peer, TE_HS_NOTIFY, json, strlen(json), &reply, &reply_len, err,
			     errlen);
	if (rc < 0)
		goto out;
	cJSON_Delete(root);
	root = cJSON_ParseWithLength(reply, reply_len);
	ok = cJSON_GetObjectItemCaseSensitive(root, "notify_msg");
	if (!cJSON_IsObject(root) || !cJSON_IsString(ok)) {
		seterr(err, errlen, "notify to %.200s: reply is not a notify reply", peer);
		rc = -EPROTO;
	} else if (ok->valuestring[0] == '\0') {
		/* Mooncake's sender's rule: an empty notify_msg is a refusal. */
		seterr(err, errlen, "notify to %.200s: refused by the peer", peer);
		rc = -ECONNREFUSED;
	} else {
		rc = 0;
	}
out:
	cJSON_Delete(root);
	cJSON_free(json);
	free(reply);
	return rc;
}

int
te_meta_probe(struct te_meta *m, const char *peer, char *err, size_t errlen)
{
	char *reply = NULL;
	size_t reply_len = 0;
	int rc = te_meta_request(m, peer, TE_HS_PROBE, "{}", 2, &reply, &reply_len, err, errlen);

	free(reply);
	return rc < 0 ? rc : 0;
}

static int
hs_handler(void *arg, uint8_t type, const char *json, size_t len, char **reply, size_t *reply_len)
{
	struct te_meta *m = arg;
	int rc;

	switch (type) {
	case TE_HS_METADATA:
		/* The request carries the caller's descriptor; we do not need it. The flag
		 * is cleared before the rebuild, so a change made during it marks it again. */
		pthread_mutex_lock(&m->refresh_lock);
		if (m->refresh_fn != NULL && atomic_exchange(&m->pub_stale, false))
			m->refresh_fn(m->refresh_arg); /* it logs its own failure */
		pthread_mutex_unlock(&m->refresh_lock);
		pthread_mutex_lock(&m->lock);
		if (m->pub_json != NULL)
			rc = dupreply(m->pub_json, m->pub_len, reply, reply_len);
		else
			rc = dupreply("{}", 2, reply, reply_len);
		pthread_mutex_unlock(&m->lock);
		return rc;
	case TE_HS_PROBE:
		return dupreply("{\"status\":\"success\"}", 20, reply, reply_len);
	case TE_HS_NOTIFY:
		if (notify_keep(m, json, len) == 0)
			return dupreply(NOTIFY_OK, sizeof(NOTIFY_OK) - 1, reply, reply_len);
		return dupreply(NOTIFY_REFUSED, sizeof(NOTIFY_REFUSED) - 1, reply, reply_len);
	case TE_HS_CONNECTION:
		pthread_mutex_lock(&m->conn_lock);
		if (m->conn_fn != NULL) {
			rc = m->conn_fn(m->conn_arg, type, json, len, reply, reply_len);
			pthread_mutex_unlock(&m->conn_lock);
			return rc;
		}
		pthread_mutex_unlock(&m->conn_lock);
		TIDE_LOG_RATELIMIT(NOTICE, 10, "handshake: RDMA Connection request refused");
		return dupreply(CONN_REFUSAL, sizeof(CONN_REFUSAL) - 1, reply, reply_len);
	default:
		return -EPROTO;
	}
}

int
te_meta_open(const char *conn, const char *bind_ip, uint16_t rpc_port, int timeout_ms,
	     struct te_meta **out, char *err, size_t errlen)
{
	struct te_meta *m;
	const char *cid;
	int rc;

	if (conn == NULL || conn[0] == '\0') {
		seterr(err, errlen, "metadata connection string empty; %s", SUPPORTED);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	m->timeout_ms = timeout_ms > 0 ? timeout_ms : 3000;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->publish_lock, NULL);
	pthread_mutex_init(&m->conn_lock, NULL);
	pthread_mutex_init(&m->notify_lock, NULL);
	pthread_mutex_init(&m->refresh_lock, NULL);
	if (strcmp(conn, "P2PHANDSHAKE") == 0) {
		m->p2p = true;
	} else if (strncasecmp(conn, "http://", 7) == 0) {
		rc = te_http_open(conn, m->timeout_ms, &m->http, err, errlen);
		if (rc < 0)
			goto fail;
	} else if (strncmp(conn, "etcd://", 7) == 0 ||
		   (strstr(conn, "://") == NULL && strchr(conn, ':') != NULL)) {
		/* Mooncake's plugin rule: no scheme means etcd. */
		rc = tide_etcd_open(conn, (unsigned)m->timeout_ms, &m->etcd);
		if (rc < 0) {
			seterr(err, errlen, "etcd endpoints \"%.128s\": %s", conn,
			       rc == -EINVAL ? "expected host:port[;host:port...]" : strerror(-rc));
			goto fail;
		}
	} else {
		const char *sep = strstr(conn, "://");

		if (sep == NULL)
			seterr(err, errlen, "metadata \"%.64s\" is not supported; %s", conn,
			       SUPPORTED);
		else
			seterr(err, errlen, "metadata scheme \"%.*s\" is not supported; %s",
			       (int)(sep - conn > 24 ? 24 : sep - conn), conn, SUPPORTED);
		rc = -EPROTONOSUPPORT;
		goto fail;
	}
	cid = getenv("MC_METADATA_CLUSTER_ID");
	if (cid != NULL && cid[0] != '\0') {
		if (strlen(cid) > TE_NAME_MAX - 16) {
			seterr(err, errlen, "MC_METADATA_CLUSTER_ID: longer than %d bytes",
			       TE_NAME_MAX - 16);
			rc = -EINVAL;
			goto fail;
		}
		snprintf(m->prefix, sizeof(m->prefix), "mooncake/%s/", cid);
	} else {
		snprintf(m->prefix, sizeof(m->prefix), "mooncake/");
	}
	rc = te_hs_daemon_start(bind_ip, rpc_port, hs_handler, m, &m->daemon);
	if (rc < 0) {
		seterr(err, errlen, "handshake daemon: %s", strerror(-rc));
		goto fail;
	}
	te_hs_daemon_set_timeout(m->daemon, m->timeout_ms);
	*out = m;
	return 0;
fail:
	te_http_close(m->http);
	tide_etcd_close(m->etcd);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->publish_lock);
	pthread_mutex_destroy(&m->conn_lock);
	pthread_mutex_destroy(&m->notify_lock);
	pthread_mutex_destroy(&m->refresh_lock);
	free(m);
	return rc;
}

bool
te_meta_is_p2p(const struct te_meta *m)
{
	return m->p2p;
}

uint16_t
te_meta_rpc_port(const struct te_meta *m)
{
	return te_hs_daemon_port(m->daemon);
}

void
te_meta_set_allow(struct te_meta *m, const struct tide_cidr_list *allow)
{
	te_hs_daemon_set_allow(m->daemon, allow);
}

uint64_t
te_meta_refused(const struct te_meta *m)
{
	return te_hs_daemon_refused(m->daemon);
}

/* Mooncake's getFullMetadataKey: a name with '/' is used as is under the prefix. */
static char *
ram_key(const struct te_meta *m, const char *name)
{
	char *k = NULL;

	if (asprintf(&k, "%s%s%s", m->prefix, strchr(name, '/') != NULL ? "" : "ram/", name) < 0)
		return NULL;
	return k;
}

static char *
rpc_key(const struct te_meta *m, const char *name)
{
	char *k = NULL;

	if (asprintf(&k, "%srpc_meta/%s", m->prefix, name) < 0)
		return NULL;
	return k;
}

/*
 * The key-value side of HTTP and etcd mode: 0 or -errno, -ENOENT for a
 * missing key. A get returns a malloc()ed NUL-terminated value.
 */
static int
kv_get(struct te_meta *m, const char *key, char **val, size_t *len)
{
	struct tide_etcd_kv kv;
	int rc;

	if (m->http != NULL)
		return te_http_get(m->http, key, val, len);
	rc = tide_etcd_get(m->etcd, key, strlen(key), &kv, NULL);
	if (rc == 0) {
		*val = kv.value; /* ownership moves to the caller */
		*len = kv.value_len;
		kv.value = NULL;
		tide_etcd_kv_clear(&kv);
	}
	return rc;
}

static int
kv_put(struct te_meta *m, const char *key, const char *json, size_t len)
{
	char *v;
	int rc;

	if (m->http != NULL)
		return te_http_put(m->http, key, json, len);
	/* Byte for byte what Mooncake's engine writes: JSON, then a newline. */
	v = malloc(len + 1);
	if (v == NULL)
		return -ENOMEM;
	memcpy(v, json, len);
	v[len] = '\n';
	rc = tide_etcd_put(m->etcd, key, strlen(key), v, len + 1, 0, NULL);
	free(v);
	return rc;
}

static int
kv_del(struct te_meta *m, const char *key)
{
	int rc;

	if (m->http != NULL)
		return te_http_del(m->http, key);
	rc = tide_etcd_delete(m->etcd, key, strlen(key));
	return rc == -ENOENT ? 0 : rc;
}

/* Best-effort DELETE of the keys under kv_name (logged on failure). */
static void
withdraw(struct te_meta *m)
{
	char *k1 = ram_key(m, m->kv_name), *k2 = rpc_key(m, m->kv_name);
	int rc = -ENOMEM;

	if (k1 != NULL && k2 != NULL) {
		rc = kv_del(m, k1);
		if (rc == 0)
			rc = kv_del(m, k2);
	}
	if (rc < 0)
		TIDE_LOG(WARN, "cannot remove metadata of %s: %s", m->kv_name, strerror(-rc));
	free(k1);
	free(k2);
	m->kv_name[0] = '\0';
}

static int
publish_locked(struct te_meta *m, const struct te_desc *desc, const char *host)
{
	char *json = NULL, *copy = NULL, *rpc = NULL, *k1 = NULL, *k2 = NULL, why[160];
	struct te_desc *norm = NULL;
	int rc;

	if (!m->p2p && (host == NULL || host[0] == '\0'))
		return -EINVAL;
	/* Never serve what a peer's decoder (ours or Mooncake's) would refuse. */
	if (desc->name[0] == '\0' || desc->protocol[0] == '\0' || desc->tcp_data_port == 0 ||
	    memchr(desc->name, '\0', sizeof(desc->name)) == NULL ||
	    memchr(desc->protocol, '\0', sizeof(desc->protocol)) == NULL) {
		TIDE_LOG(ERR, "publish: descriptor lacks name, protocol or tcp_data_port");
		return -EINVAL;
	}
	rc = te_desc_dup(desc, &norm);
	if (rc < 0)
		return rc;
	rc = te_desc_normalize(norm, why, sizeof(why));
	if (rc == 0)
		rc = te_desc_encode(norm, &json);
	te_desc_free(norm);
	if (rc == -EINVAL)
		TIDE_LOG(ERR, "publish %s: %s", desc->name, why);
	if (rc < 0)
		return rc;
	copy = strdup(json);
	if (copy == NULL) {
		free(json);
		return -ENOMEM;
	}
	pthread_mutex_lock(&m->lock);
	free(m->pub_json);
	m->pub_json = copy;
	m->pub_len = strlen(copy);
	pthread_mutex_unlock(&m->lock);
	if (m->p2p)
		goto out;
	rc = te_rpcmeta_encode(host, te_hs_daemon_port(m->daemon), &rpc);
	if (rc < 0)
		goto out;
	k1 = ram_key(m, desc->name);
	k2 = rpc_key(m, desc->name);
	if (k1 == NULL || k2 == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	/* rpc_meta first: when another live instance owns the name the server answers
	 * 400 and we stop before overwriting its descriptor. */
	rc = kv_put(m, k2, rpc, strlen(rpc));
	if (rc == 0) {
		/* A rename leaves the old keys behind: withdraw them. Only keys we own
		 * (rpc_meta accepted) are ever deleted, never another instance's. */
		if (m->kv_name[0] != '\0' && strcmp(m->kv_name, desc->name) != 0)
			withdraw(m);
		snprintf(m->kv_name, sizeof(m->kv_name), "%s", desc->name);
		rc = kv_put(m, k1, json, strlen(json));
	}
	if (rc == -EEXIST)
		TIDE_LOG(ERR,
			 "publish %s: the metadata server holds a different rpc_meta for this "
			 "name (another live instance?)",
			 desc->name);
	else if (rc < 0)
		TIDE_LOG(ERR, "publish %s: %s", desc->name, strerror(-rc));
out:
	free(json);
	free(rpc);
	free(k1);
	free(k2);
	return rc;
}

int
te_meta_publish(struct te_meta *m, const struct te_desc *desc, const char *host)
{
	int rc;

	pthread_mutex_lock(&m->publish_lock);
	rc = publish_locked(m, desc, host);
	pthread_mutex_unlock(&m->publish_lock);
	return rc;
}

/* True when a Metadata reply is the "nothing published yet" answer ({} or empty). */
static bool
is_empty_reply(const char *json, size_t len)
{
	cJSON *root;
	bool empty;

	if (len == 0)
		return true;
	root = cJSON_ParseWithLength(json, len);
	empty = root != NULL && cJSON_IsObject(root) && root->child == NULL;
	cJSON_Delete(root);
	return empty;
}

static int
fetch_p2p(struct te_meta *m, const char *name, struct te_desc **desc, char *host, size_t host_len,
	  char *err, size_t errlen)
{
	char h[TE_NAME_MAX], *req = NULL, *reply = NULL;
	size_t reqlen, rlen = 0;
	uint16_t port;
	int rc;

	if (meta_split_hostport(name, h, sizeof(h), &port) < 0) {
		seterr(err, errlen, "segment name \"%.200s\": P2PHANDSHAKE names are host:port",
		       name);
		return -EINVAL;
	}
	/* Mooncake sends its own descriptor as the request body. */
	pthread_mutex_lock(&m->lock);
	if (m->pub_json != NULL) {
		req = strdup(m->pub_json);
		reqlen = m->pub_len;
	} else {
		req = strdup("{}");
		reqlen = 2;
	}
	pthread_mutex_unlock(&m->lock);
	if (req == NULL)
		return -ENOMEM;
	rc = te_hs_request(h, port, TE_HS_METADATA, req, reqlen, m->timeout_ms, &reply, &rlen);
	free(req);
	if (rc < 0) {
		seterr(err, errlen, "handshake: %s", strerror(-rc));
		return rc;
	}
	if (is_empty_reply(reply, rlen)) {
		seterr(err, errlen, "peer %.200s has not published a descriptor", name);
		rc = -ENOENT;
	} else {
		rc = te_desc_decode(reply, rlen, desc, err, errlen);
	}
	free(reply);
	if (rc == 0 && meta_strlcpy(host, h, host_len) < 0) {
		te_desc_free(*desc);
		*desc = NULL;
		rc = -ENAMETOOLONG;
	}
	return rc;
}

static int
fetch_http(struct te_meta *m, const char *name, struct te_desc **desc, char *host, size_t host_len,
	   char *err, size_t errlen)
{
	char *k1 = ram_key(m, name), *k2 = rpc_key(m, name), *j1 = NULL, *j2 = NULL;
	size_t l1 = 0, l2 = 0;
	uint16_t port;
	int rc;

	if (k1 == NULL || k2 == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = kv_get(m, k1, &j1, &l1);
	if (rc < 0) {
		seterr(err, errlen, "GET %.200s: %s", k1, strerror(-rc));
		goto out;
	}
	rc = kv_get(m, k2, &j2, &l2);
	if (rc < 0) {
		seterr(err, errlen, "GET %.200s: %s", k2, strerror(-rc));
		goto out;
	}
	rc = te_desc_decode(j1, l1, desc, err, errlen);
	if (rc == 0) {
		rc = te_rpcmeta_decode(j2, l2, host, host_len, &port, err, errlen);
		if (rc < 0) {
			te_desc_free(*desc);
			*desc = NULL;
		}
	}
out:
	free(k1);
	free(k2);
	free(j1);
	free(j2);
	return rc;
}

int
te_meta_fetch(struct te_meta *m, const char *name, struct te_desc **desc, char *host,
	      size_t host_len, char *err, size_t errlen)
{
	int rc;

	if (name == NULL || name[0] == '\0') {
		seterr(err, errlen, "segment name: %s", "empty");
		return -EINVAL;
	}
	if (m->p2p)
		rc = fetch_p2p(m, name, desc, host, host_len, err, errlen);
	else
		rc = fetch_http(m, name, desc, host, host_len, err, errlen);
	if (rc < 0)
		TIDE_LOG(DEBUG, "fetch %s: %s", name, strerror(-rc));
	return rc;
}

void
te_meta_close(struct te_meta *m)
{
	if (m == NULL)
		return;
	/* Stop serving first so no peer reads a descriptor we are withdrawing. */
	te_hs_daemon_stop(m->daemon);
	if (!m->p2p && m->kv_name[0] != '\0')
		withdraw(m);
	te_http_close(m->http);
	tide_etcd_close(m->etcd);
	free(m->pub_json);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->publish_lock);
	pthread_mutex_destroy(&m->conn_lock);
	te_meta_notifies_free(m->nq, m->nq_len);
	pthread_mutex_destroy(&m->notify_lock);
	pthread_mutex_destroy(&m->refresh_lock);
	free(m);
}

void
te_meta_set_refresh(struct te_meta *m, te_meta_refresh_fn fn, void *arg)
{
	pthread_mutex_lock(&m->refresh_lock);
	m->refresh_fn = fn;
	m->refresh_arg = arg;
	pthread_mutex_unlock(&m->refresh_lock);
}

bool
te_meta_publish_later(struct te_meta *m)
{
	bool later;

	if (!m->p2p)
		return false;
	pthread_mutex_lock(&m->refresh_lock);
	later = m->refresh_fn != NULL;
	if (later)
		atomic_store(&m->pub_stale, true);
	pthread_mutex_unlock(&m->refresh_lock);
	return later;
}

void
te_meta_set_conn_handler(struct te_meta *m, te_hs_handler_fn fn, void *arg)
{
	pthread_mutex_lock(&m->conn_lock);
	m->conn_fn = fn;
	m->conn_arg = arg;
	pthread_mutex_unlock(&m->conn_lock);
}

int
te_meta_request(struct te_meta *m, const char *name, uint8_t type, const char *json, size_t len,
		char **reply, size_t *reply_len, char *err, size_t errlen)
{
	char host[TE_NAME_MAX];
	uint16_t port = 0;
	int rc;

	if (m->p2p) {
		if (meta_split_hostport(name, host, sizeof(host), &port) < 0) {
			seterr(err, errlen,
			       "segment name \"%.200s\": P2PHANDSHAKE names are host:port", name);
			return -EINVAL;
		}
	} else {
		char *k = rpc_key(m, name), *j = NULL;
		size_t jl = 0;

		if (k == NULL)
			return -ENOMEM;
		rc = kv_get(m, k, &j, &jl);
		if (rc == 0)
			rc = te_rpcmeta_decode(j, jl, host, sizeof(host), &port, err, errlen);
		else
			seterr(err, errlen, "GET %.200s: %s", k, strerror(-rc));
		free(k);
		free(j);
		if (rc < 0)
			return rc;
	}
	rc = te_hs_request(host, port, type, json, len, m->timeout_ms, reply, reply_len);
	if (rc < 0)
		seterr(err, errlen, "handshake with %.200s (%.200s:%u): %s", name, host,
		       (unsigned)port, strerror(-rc));
	return rc;
}
