/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store's master calls (store_mc.h): ErrorCode mapping, the HA leader
 * lookup through etcd, the failover retry policy, and one wrapper per master
 * RPC of the data path. Setup-time calls (ServiceReady, Mount, Unmount) and
 * the heartbeat stay with the store's life cycle in store_client.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_mc.h"
#include "store_repl.h"
#include "tide_clock.h"
#include "tide_etcd.h"
#include "tide_log.h"
#include "tide_master_ha.h"
#include "tide_store.h"
#include "tide_te.h"

/* How long an idempotent call waits for a new HA leader (lease TTL 2-5 s + election). */
#define FAILOVER_WAIT_MS 8000u
#define FAILOVER_STEP_MS 100u

static const struct tide_mc_str tenant_default = {(char *)"default", 7};

/* Mooncake ErrorCode -> negative errno, as documented in tide_store.h. */
int
store_mc_errno(int32_t ec)
{
	switch (ec) {
	case TIDE_MC_EC_OK:
		return 0;
	case TIDE_MC_EC_OBJECT_NOT_FOUND:
		return -ENOENT;
	case TIDE_MC_EC_OBJECT_ALREADY_EXISTS:
		return -EEXIST;
	case TIDE_MC_EC_NO_AVAILABLE_HANDLE:
		return -ENOSPC;
	case TIDE_MC_EC_REPLICA_IS_NOT_READY:
	case TIDE_MC_EC_INVALID_REPLICA:
		return -EAGAIN;
	case TIDE_MC_EC_OBJECT_HAS_LEASE:
	case TIDE_MC_EC_OBJECT_HAS_REPLICATION_TASK:
		return -EBUSY;
	case TIDE_MC_EC_INVALID_KEY:
	case TIDE_MC_EC_INVALID_PARAMS:
		return -EINVAL;
	case TIDE_MC_EC_INVALID_VERSION:
		return -EPROTO;
	case TIDE_MC_EC_SEGMENT_NOT_FOUND:
	case TIDE_MC_EC_CLIENT_NOT_FOUND:
	case TIDE_MC_EC_ILLEGAL_CLIENT:
		return -ENODEV;
	default:
		return -EREMOTEIO;
	}
}

/* The errors above (and the store's own) in words: beside the mapping it explains. */
const char *
tide_store_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -ENOENT:
		return "no such object";
	case -EEXIST:
		return "object already exists";
	case -ENOSPC:
		return "no space in any segment (NO_AVAILABLE_HANDLE)";
	case -ENOBUFS:
		return "buffer too small for the object";
	case -EAGAIN:
		return "object not complete yet (no COMPLETE replica)";
	case -EBUSY:
		return "object has a lease or a replication task";
	case -EREMOTEIO:
		return "master reported an error";
	case -ENODEV:
		return "segment or client unknown to the master";
	case -EPROTO:
		return "master version mismatch";
	case -ESTALE:
		return "read lease expired during the read (LEASE_EXPIRED): data may be stale";
	default:
		return err < 0 ? tide_te_strerror(err) : "unknown error";
	}
}

/* rc from the master client, else the business code mapped. */
int
store_mc_result(int rc, int32_t ec)
{
	return rc != 0 ? rc : store_mc_errno(ec);
}

void
store_mc_req_init(struct tide_mc_req *r, enum tide_mc_fn fn)
{
	memset(r, 0, sizeof(*r));
	r->fn = fn;
	r->layout = TIDE_MC_LAYOUT_HEAD;
}

/* Business result of one element of an expected<void> vector (missing: -EBADMSG). */
int
store_mc_vec_status(const struct tide_mc_resp *r, size_t i)
{
	if (i >= r->u.batch_status.n)
		return -EBADMSG;
	return r->u.batch_status.v[i].ok ? 0 : store_mc_errno(r->u.batch_status.v[i].err);
}

/* ---------------------------------------------------------------------- the master's address */

int
store_mc_locate(struct store_mc *mc)
{
	struct tide_etcd_kv kv;
	char old[TIDE_MC_POOL_ADDR_MAX];
	int rc = tide_etcd_get(mc->etcd, mc->etcd_key, strlen(mc->etcd_key), &kv, NULL);

	if (rc != 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "master leader: etcd %s: %s", mc->etcd_key,
				   rc == -ENOENT ? "no leader elected" : strerror(-rc));
		return rc;
	}
	if (!tide_master_ha_leader_valid(kv.value, kv.value_len)) {
		TIDE_LOG_RATELIMIT(WARN, 5, "master leader: %s holds \"%.64s\", not host:port",
				   mc->etcd_key, kv.value);
		tide_etcd_kv_clear(&kv);
		return -ENOENT;
	}
	tide_mc_pool_master(&mc->pool, old, sizeof(old));
	if (strcmp(old, kv.value) != 0) {
		TIDE_LOG(NOTICE, "master leader: %s (view %" PRId64 ")%s%s", kv.value,
			 kv.create_revision, old[0] ? ", was " : "", old);
		rc = tide_mc_pool_set_master(&mc->pool, kv.value);
		/* The new leader answers the first Ping with NEED_REMOUNT: ping now. */
		if (mc->moved != NULL)
			mc->moved(mc->moved_arg);
	}
	tide_etcd_kv_clear(&kv);
	return rc;
}

/* The pool's relocate hook: a connect to the master failed. */
static int
relocate_master(void *arg)
{
	return store_mc_locate(arg);
}

int
store_mc_set_master(struct store_mc *mc, const char *master)
{
	const char *cid;
	int rc;

	if (strncmp(master, "etcd://", 7) != 0)
		return tide_mc_pool_set_master(&mc->pool, master);
	/* Stock's client reads the namespace from the environment only. */
	cid = getenv("MC_STORE_CLUSTER_ID");
	rc = tide_master_ha_key(cid, mc->etcd_key, sizeof(mc->etcd_key));
	if (rc == 0)
		rc = tide_etcd_open(master, 0, &mc->etcd);
	if (rc != 0) {
		TIDE_LOG(ERR, "master address \"%s\": %s", master,
			 rc == -EINVAL ? "etcd endpoints are not host:port[;host:port...]"
				       : strerror(-rc));
		return rc;
	}
	mc->pool.relocate = relocate_master;
	mc->pool.relocate_arg = mc;
	rc = store_mc_locate(mc);
	if (rc != 0) {
		TIDE_LOG(ERR, "master address \"%s\": no leader at %s (%s)", master, mc->etcd_key,
			 strerror(-rc));
		return -ENOTCONN;
	}
	return 0;
}

void
store_mc_reset(struct store_mc *mc)
{
	tide_mc_pool_close_all(&mc->pool);
	mc->pool.relocate = NULL;
	tide_etcd_close(mc->etcd);
	mc->etcd = NULL;
	tide_mc_pool_set_master(&mc->pool, "");
}

/*
 * Reads, PutEnd and BatchPutEnd go through here: sent twice they change
 * nothing more than once, and a PutEnd whose put the old leader never made
 * durable fails at the new one (OBJECT_NOT_FOUND), so the put is revoked,
 * never half visible.
 */
bool
store_mc_failover_retry(struct store_mc *mc, int rc, uint64_t *until)
{
	uint64_t now = tide_mono_ns();

	if (mc->etcd == NULL || (rc != -ECONNRESET && rc != -EPIPE && rc != -ECONNREFUSED &&
				 rc != -ENOTCONN && rc != -ECONNABORTED))
		return false;
	if (*until == 0)
		*until = now + FAILOVER_WAIT_MS * 1000000ull;
	else if (now >= *until)
		return false;
	usleep(FAILOVER_STEP_MS * 1000u);
	(void)store_mc_locate(mc);
	return true;
}

/* ---------------------------------------------------------------------------- single keys */

/* The single-key RPCs of the master client that one_call() makes. */
enum one_fn {
	ONE_PUT_START,
	ONE_REPLICA_LIST,
	ONE_EXIST_KEY,
	ONE_REMOVE,
	ONE_REMOVE_ALL,
};

/* A one_call()'s arguments (in) and answers (out; zero them first). */
struct one {
	const char *key;
	uint64_t len;
	const struct tide_mc_replicate_config *cfg;
	bool force;
	struct tide_mc_resp *resp; /* PutStart, GetReplicaList */
	int32_t ec;                /* business code */
	bool exists;               /* ExistKey */
	int64_t removed;           /* RemoveAll */
};

/* One RPC on a pooled connection, held for it alone: the client's result or the
 * connect's error; o's answers are set only as the client sets them. */
static int
one_call(struct store_mc *mc, enum one_fn fn, struct one *o)
{
	/* The master function each one_fn sends, for the RPC metrics. */
	static const enum tide_mc_fn mfn[] = {
		[ONE_PUT_START] = TIDE_MC_FN_PUT_START,
		[ONE_REPLICA_LIST] = TIDE_MC_FN_GET_REPLICA_LIST,
		[ONE_EXIST_KEY] = TIDE_MC_FN_EXIST_KEY,
		[ONE_REMOVE] = TIDE_MC_FN_REMOVE,
		[ONE_REMOVE_ALL] = TIDE_MC_FN_REMOVE_ALL,
	};
	enum tide_mc_fn f =
		(unsigned)fn < sizeof(mfn) / sizeof(mfn[0]) ? mfn[fn] : TIDE_MC_FN_COUNT;
	uint64_t t0 = store_metrics_rpc_begin(&mc->pool.metrics, f);
	struct tide_mc_pool_conn *m;
	int rc;

	m = tide_mc_pool_get(&mc->pool, 0, &rc);
	if (m == NULL) {
		store_metrics_rpc_end(&mc->pool.metrics, f, t0, rc);
		return rc;
	}
	switch (fn) {
	case ONE_PUT_START:
		rc = tide_mc_client_put_start(m->c, &mc->client_id, o->key, o->len, o->cfg, o->resp,
					      &o->ec);
		break;
	case ONE_REPLICA_LIST:
		rc = tide_mc_client_get_replica_list(m->c, o->key, o->resp, &o->ec);
		break;
	case ONE_EXIST_KEY:
		rc = tide_mc_client_exist_key(m->c, o->key, &o->exists, &o->ec);
		break;
	case ONE_REMOVE:
		rc = tide_mc_client_remove(m->c, o->key, o->force, &o->ec);
		break;
	case ONE_REMOVE_ALL:
		rc = tide_mc_client_remove_all(m->c, o->force, &o->removed);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	tide_mc_pool_put(m);
	store_metrics_rpc_end(&mc->pool.metrics, f, t0, rc);
	return rc;
}

/* UpsertStart: PutStart's request and answer under another function id (the
 * master client has no helper for it). rc as one_call(); *ec the business code. */
static int
upsert_start(struct store_mc *mc, const char *key, uint64_t len,
	     const struct tide_mc_replicate_config *cfg, struct tide_mc_resp *resp, int32_t *ec)
{
	struct tide_mc_req r;
	int rc;

	store_mc_req_init(&r, TIDE_MC_FN_UPSERT_START);
	r.u.put_start.client_id = mc->client_id;
	r.u.put_start.key = store_mc_str(key);
	r.u.put_start.slice_length = len;
	if (cfg != NULL)
		r.u.put_start.config = *cfg;
	else
		r.u.put_start.config.replica_num = 1; /* Mooncake's default, as PutStart's */
	r.u.put_start.tenant_id = tenant_default;
	rc = tide_mc_pool_call(&mc->pool, &r, resp);
	if (rc == 0)
		*ec = resp->u.put_start.ok ? 0 : resp->u.put_start.err;
	return rc;
}

int
store_mc_put_start(struct store_mc *mc, const char *key, uint64_t len,
		   const struct tide_mc_replicate_config *cfg, bool upsert,
		   struct tide_mc_resp *resp)
{
	struct one o = {.key = key, .len = len, .cfg = cfg, .resp = resp};
	int rc = upsert ? upsert_start(mc, key, len, cfg, resp, &o.ec)
			: one_call(mc, ONE_PUT_START, &o);

	if (rc != 0)
		return rc;
	if (o.ec != 0) {
		tide_mc_resp_free(resp);
		return store_mc_errno(o.ec); /* an existing key: -EEXIST */
	}
	return 0;
}

/* PutEnd or PutRevoke (end false) through the master client's helpers, or their
 * Upsert twins, which have none: the same requests under other ids. */
static int
end_call(struct tide_mc_pool_conn *m, struct store_mc *mc, const char *key, bool upsert, bool end,
	 int32_t *ec)
{
	enum tide_mc_fn f = upsert ? (end ? TIDE_MC_FN_UPSERT_END : TIDE_MC_FN_UPSERT_REVOKE)
				   : (end ? TIDE_MC_FN_PUT_END : TIDE_MC_FN_PUT_REVOKE);
	uint64_t t0 = store_metrics_rpc_begin(&mc->pool.metrics, f);
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int rc;

	if (!upsert) {
		rc = end ? tide_mc_client_put_end(m->c, &mc->client_id, key, ec)
			 : tide_mc_client_put_revoke(m->c, &mc->client_id, key, ec);
		store_metrics_rpc_end(&mc->pool.metrics, f, t0, rc);
		return rc;
	}
	if (end) {
		store_mc_req_init(&r, TIDE_MC_FN_UPSERT_END);
		r.u.put_end.client_id = mc->client_id;
		r.u.put_end.meta.key = store_mc_str(key);
		r.u.put_end.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.put_end.tenant_id = tenant_default;
	} else {
		store_mc_req_init(&r, TIDE_MC_FN_UPSERT_REVOKE);
		r.u.put_revoke.client_id = mc->client_id;
		r.u.put_revoke.key = store_mc_str(key);
		r.u.put_revoke.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.put_revoke.tenant_id = tenant_default;
	}
	rc = tide_mc_client_call(m->c, &r, &resp, NULL);
	store_metrics_rpc_end(&mc->pool.metrics, f, t0, rc);
	if (rc != 0)
		return rc;
	*ec = resp.u.status.ok ? 0 : resp.u.status.err;
	tide_mc_resp_free(&resp);
	return 0;
}

int
store_mc_put_end(struct store_mc *mc, const char *key, bool upsert, int ret)
{
	struct tide_mc_pool_conn *m;
	uint64_t until = 0;
	int32_t ec = 0;
	int rc2;

	for (;;) {
		m = tide_mc_pool_get(&mc->pool, 0, &rc2);
		if (m == NULL && ret == 0 && store_mc_failover_retry(mc, rc2, &until))
			continue;
		if (m == NULL) {
			/* The master dropped the connection: it revokes nothing by itself, but
			 * a later PutStart of the key discards the stale put (spec 3.3). */
			return ret != 0 ? ret : rc2;
		}
		if (ret != 0)
			break;
		rc2 = end_call(m, mc, key, upsert, true, &ec);
		if (rc2 != 0 && store_mc_failover_retry(mc, rc2, &until)) {
			tide_mc_pool_put(m);
			continue;
		}
		ret = store_mc_result(rc2, ec);
		if (ret != 0)
			TIDE_LOG_RATELIMIT(WARN, 5, "%s %s failed: %s",
					   upsert ? "UpsertEnd" : "PutEnd", key,
					   tide_store_strerror(ret));
		break;
	}
	if (ret != 0) {
		/* Nothing partly written (or not ended) may stay visible. */
		rc2 = end_call(m, mc, key, upsert, false, &ec);
		if (rc2 != 0 || ec != 0)
			TIDE_LOG_RATELIMIT(WARN, 5, "%s %s failed (%d/%d)",
					   upsert ? "UpsertRevoke" : "PutRevoke", key, rc2, ec);
	}
	tide_mc_pool_put(m);
	return ret;
}

int
store_mc_replica_list(struct store_mc *mc, const char *key, struct tide_mc_resp *resp)
{
	struct one o = {.key = key, .resp = resp};
	uint64_t until = 0;
	int rc;

	do {
		rc = one_call(mc, ONE_REPLICA_LIST, &o);
	} while (rc != 0 && store_mc_failover_retry(mc, rc, &until));
	if (rc != 0)
		return rc;
	if (o.ec != 0) {
		tide_mc_resp_free(resp);
		return store_mc_errno(o.ec);
	}
	return 0;
}

int
store_mc_exist_key(struct store_mc *mc, const char *key)
{
	struct one o = {.key = key};
	uint64_t until = 0;
	int rc;

	do {
		rc = one_call(mc, ONE_EXIST_KEY, &o);
	} while (rc != 0 && store_mc_failover_retry(mc, rc, &until));
	rc = store_mc_result(rc, o.ec);
	if (rc == -ENOENT)
		return 0;
	return rc != 0 ? rc : o.exists ? 1 : 0;
}

int
store_mc_remove(struct store_mc *mc, const char *key, bool force)
{
	struct one o = {.key = key, .force = force};
	int rc = one_call(mc, ONE_REMOVE, &o);

	return store_mc_result(rc, o.ec);
}

int64_t
store_mc_remove_all(struct store_mc *mc, bool force)
{
	struct one o = {.force = force};
	int rc = one_call(mc, ONE_REMOVE_ALL, &o);

	if (rc != 0)
		return rc;
	return o.removed < 0 ? 0 : o.removed;
}

int64_t
store_mc_remove_by_regex(struct store_mc *mc, const char *pattern, bool force)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int64_t ret;
	int rc;

	store_mc_req_init(&r, TIDE_MC_FN_REMOVE_BY_REGEX);
	r.u.remove.key = store_mc_str(pattern);
	r.u.remove.force = force;
	r.u.remove.tenant_id = tenant_default;
	rc = tide_mc_pool_call(&mc->pool, &r, &resp);
	if (rc != 0)
		return rc;
	ret = resp.u.count.ok ? resp.u.count.val : store_mc_errno(resp.u.count.err);
	tide_mc_resp_free(&resp);
	return ret;
}

/* ---------------------------------------------------------------------------------- batches */

int
store_mc_batch_put_start(struct store_mc *mc, struct tide_mc_str *ks, uint64_t *slens, size_t n,
			 const struct tide_mc_replicate_config *cfg, bool upsert,
			 struct tide_mc_resp *resp)
{
	struct tide_mc_req r;

	/* BatchUpsertStart's arguments and answer are BatchPutStart's. */
	store_mc_req_init(&r, upsert ? TIDE_MC_FN_BATCH_UPSERT_START : TIDE_MC_FN_BATCH_PUT_START);
	r.u.batch_put_start.client_id = mc->client_id;
	r.u.batch_put_start.keys.v = ks;
	r.u.batch_put_start.keys.n = n;
	r.u.batch_put_start.slice_lengths.v = slens;
	r.u.batch_put_start.slice_lengths.n = n;
	r.u.batch_put_start.config = *cfg;
	r.u.batch_put_start.tenant_id = tenant_default;
	return tide_mc_pool_call(&mc->pool, &r, resp);
}

/* BatchPutEnd or BatchUpsertEnd (v: n metas), or BatchPutRevoke or
 * BatchUpsertRevoke (v: n keys) for mc's client, every replica (the Upsert
 * ones carry no replica type: the codec leaves it out). 0: *resp valid (free
 * it); -errno. */
static int
batch_put_done(struct store_mc *mc, enum tide_mc_fn fn, void *v, size_t n,
	       struct tide_mc_resp *resp)
{
	struct tide_mc_req r;

	store_mc_req_init(&r, fn);
	if (fn == TIDE_MC_FN_BATCH_PUT_END || fn == TIDE_MC_FN_BATCH_UPSERT_END) {
		r.u.batch_put_end.client_id = mc->client_id;
		r.u.batch_put_end.metas.v = v;
		r.u.batch_put_end.metas.n = n;
		r.u.batch_put_end.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.batch_put_end.tenant_id = tenant_default;
	} else {
		r.u.batch_put_revoke.client_id = mc->client_id;
		r.u.batch_put_revoke.keys.v = v;
		r.u.batch_put_revoke.keys.n = n;
		r.u.batch_put_revoke.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.batch_put_revoke.tenant_id = tenant_default;
	}
	return tide_mc_pool_call(&mc->pool, &r, resp);
}

void
store_mc_batch_finish(struct store_mc *mc, const char *const *keys, size_t n, bool upsert,
		      const bool *pending, int *rcs, struct tide_mc_str *ks,
		      struct tide_mc_object_meta *metas, size_t *idx)
{
	enum tide_mc_fn end = upsert ? TIDE_MC_FN_BATCH_UPSERT_END : TIDE_MC_FN_BATCH_PUT_END;
	enum tide_mc_fn revoke =
		upsert ? TIDE_MC_FN_BATCH_UPSERT_REVOKE : TIDE_MC_FN_BATCH_PUT_REVOKE;
	struct tide_mc_resp resp;
	size_t ne = 0, nr = 0, i;
	uint64_t until = 0;
	int rc;

	for (i = 0; i < n; i++) {
		if (pending[i] && rcs[i] == 0) {
			metas[ne].key = store_mc_str(keys[i]);
			metas[ne].object_checksum.has = false;
			metas[ne].object_checksum.val = 0;
			idx[ne++] = i;
		}
	}
	if (ne > 0) {
		do {
			rc = batch_put_done(mc, end, metas, ne, &resp);
		} while (rc != 0 && store_mc_failover_retry(mc, rc, &until));
		for (i = 0; i < ne; i++)
			rcs[idx[i]] = rc != 0 ? rc : store_mc_vec_status(&resp, i);
		if (rc == 0)
			tide_mc_resp_free(&resp);
	}
	for (i = 0; i < n; i++)
		if (pending[i] && rcs[i] != 0)
			ks[nr++] = store_mc_str(keys[i]);
	/* Nothing partly stored (or not ended) may stay visible. */
	if (nr > 0) {
		rc = batch_put_done(mc, revoke, ks, nr, &resp);
		if (rc == 0)
			tide_mc_resp_free(&resp);
		else
			TIDE_LOG_RATELIMIT(WARN, 5, "%s of %zu keys failed: %d",
					   upsert ? "BatchUpsertRevoke" : "BatchPutRevoke", nr, rc);
	}
}

int
store_mc_batch_replica_list(struct store_mc *mc, const char *const *keys, size_t n,
			    struct tide_mc_str *ks, struct tide_mc_resp *resp)
{
	struct tide_mc_req r;
	uint64_t until = 0;
	int rc;

	for (size_t i = 0; i < n; i++)
		ks[i] = store_mc_str(keys[i]);
	store_mc_req_init(&r, TIDE_MC_FN_BATCH_GET_REPLICA_LIST);
	r.u.keys.keys.v = ks;
	r.u.keys.keys.n = n;
	r.u.keys.tenant_id = tenant_default;
	do {
		rc = tide_mc_pool_call(&mc->pool, &r, resp);
	} while (rc != 0 && store_mc_failover_retry(mc, rc, &until));
	return rc;
}

int
store_mc_batch_keys(struct store_mc *mc, enum tide_mc_fn fn, const char *const *keys, size_t n,
		    bool force, struct tide_mc_str *ks, struct tide_mc_resp *resp)
{
	struct tide_mc_req r;

	for (size_t i = 0; i < n; i++)
		ks[i] = store_mc_str(keys[i]);
	store_mc_req_init(&r, fn);
	if (fn == TIDE_MC_FN_BATCH_REMOVE) {
		r.u.batch_remove.keys.v = ks;
		r.u.batch_remove.keys.n = n;
		r.u.batch_remove.force = force;
		r.u.batch_remove.tenant_id = tenant_default;
	} else {
		r.u.keys.keys.v = ks;
		r.u.keys.keys.n = n;
		r.u.keys.tenant_id = tenant_default;
	}
	return tide_mc_pool_call(&mc->pool, &r, resp);
}

int
store_mc_batch_replica_clear(struct store_mc *mc, const char *const *keys, size_t n,
			     const char *segment, struct tide_mc_str *ks, struct tide_mc_resp *resp)
{
	struct tide_mc_req r;

	for (size_t i = 0; i < n; i++)
		ks[i] = store_mc_str(keys[i]);
	/* Stock's call carries no tenant: its master clears in the default one. */
	store_mc_req_init(&r, TIDE_MC_FN_BATCH_REPLICA_CLEAR);
	r.u.batch_replica_clear.keys.v = n ? ks : NULL;
	r.u.batch_replica_clear.keys.n = n;
	r.u.batch_replica_clear.client_id = mc->client_id;
	r.u.batch_replica_clear.segment_name = store_mc_str(segment);
	return tide_mc_pool_call(&mc->pool, &r, resp);
}

/* ---------------------------------------------------------------- Tide's lease extension */

/* One lease RPC. A coro_rpc error frame (a stock master: errc 11, function not
 * registered) becomes -EOPNOTSUPP; the connection stays usable. */
static int
lease_call(struct store_mc *mc, const struct tide_mc_req *r, struct tide_mc_resp *resp)
{
	uint64_t t0 = store_metrics_rpc_begin(&mc->pool.metrics, r->fn);
	struct tide_mc_pool_conn *m;
	struct tide_mc_err err;
	int rc;

	m = tide_mc_pool_get(&mc->pool, 0, &rc);
	if (m == NULL) {
		store_metrics_rpc_end(&mc->pool.metrics, r->fn, t0, rc);
		return rc;
	}
	rc = tide_mc_client_call(m->c, r, resp, &err);
	tide_mc_pool_put(m);
	store_metrics_rpc_end(&mc->pool.metrics, r->fn, t0, rc);
	if (rc == -EREMOTEIO && err.errc == TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED) {
		TIDE_LOG(DEBUG, "master does not serve %s (%s): plain puts",
			 tide_mc_fn_info(r->fn)->name, err.msg);
		return -EOPNOTSUPP;
	}
	return rc;
}

int
store_mc_lease_grant(struct store_mc *mc, uint64_t size, const struct tide_mc_replicate_config *cfg,
		     struct tide_mc_resp *resp)
{
	struct tide_mc_req r;
	int rc;

	store_mc_req_init(&r, TIDE_MC_FN_TIDE_LEASE_GRANT);
	r.u.lease_grant.client_id = mc->client_id;
	r.u.lease_grant.size = size;
	if (cfg != NULL)
		r.u.lease_grant.config = *cfg;
	else
		r.u.lease_grant.config.replica_num = 1;
	rc = lease_call(mc, &r, resp);
	if (rc != 0)
		return rc;
	if (!resp->u.lease.ok) {
		rc = store_mc_errno(resp->u.lease.err);
		tide_mc_resp_free(resp);
		return rc;
	}
	return 0;
}

int
store_mc_lease_commit(struct store_mc *mc, uint64_t lease_id, struct tide_mc_str *ks,
		      uint64_t *offs, uint64_t *sizes, size_t n,
		      const struct tide_mc_replicate_config *cfg, struct tide_mc_resp *resp)
{
	struct tide_mc_req r;

	store_mc_req_init(&r, TIDE_MC_FN_TIDE_LEASE_COMMIT);
	r.u.lease_commit.client_id = mc->client_id;
	r.u.lease_commit.lease_id = lease_id;
	r.u.lease_commit.keys.v = ks;
	r.u.lease_commit.keys.n = n;
	r.u.lease_commit.offsets.v = offs;
	r.u.lease_commit.offsets.n = n;
	r.u.lease_commit.sizes.v = sizes;
	r.u.lease_commit.sizes.n = n;
	if (cfg != NULL)
		r.u.lease_commit.config = *cfg;
	else
		r.u.lease_commit.config.replica_num = 1;
	return lease_call(mc, &r, resp);
}

int
store_mc_lease_release(struct store_mc *mc, uint64_t lease_id)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int rc;

	store_mc_req_init(&r, TIDE_MC_FN_TIDE_LEASE_RELEASE);
	r.u.lease_release.client_id = mc->client_id;
	r.u.lease_release.lease_id = lease_id;
	rc = lease_call(mc, &r, &resp);
	if (rc != 0)
		return rc;
	rc = store_mc_errno(resp.u.status.ok ? 0 : resp.u.status.err);
	tide_mc_resp_free(&resp);
	return rc;
}
