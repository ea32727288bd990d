/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process backend (store_inproc.h): each call is master RPCs
 * (store_mc.c) for placement and lookups, and one engine batch (store_xfer.c)
 * per round of transfers; puts are the one sequence of store_put.c (place n,
 * move, commit n), gets those of store_get.c (locate n, read n). The state it
 * runs on is set up by store_client.c.
 *
 * Small objects: a 256 B put costs two master round trips and one transfer
 * (one round trip through a lease). The calls keep their arrays on the stack
 * up to a typical size (store_scratch.h: no malloc per call apart from the
 * decoded answers), and a replica in this process's own segment is copied
 * with memcpy without going through an engine batch.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "store_get.h"
#include "store_inproc.h"
#include "store_put.h"
#include "store_repl.h"
#include "store_replicas.h"
#include "store_scratch.h"
#include "store_session.h"
#include "tide_log.h"
#include "tide_te.h"

static struct store_inproc *
ip_of(struct store_backend *b)
{
	return store_backend_of(b, struct store_inproc, be);
}

static bool
key_ok(const char *key)
{
	return key != NULL && key[0] != '\0';
}

/* Whether every one of n keys is a valid key (n in 1..UINT32_MAX). */
static bool
keys_ok(const char *const *keys, size_t n)
{
	if (keys == NULL || n == 0 || n > UINT32_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!key_ok(keys[i]))
			return false;
	return true;
}

/* ------------------------------------------------------------------------------ objects */

/* Puts run the sequence of store_put.h against this process's master and engine. */
static struct store_put_ctx
put_ctx(struct store_inproc *ip)
{
	struct store_put_ctx c = {.mc = &ip->mc,
				  .leases = &ip->leases,
				  .eng = store_inproc_eng(ip),
				  .move = store_xfer_run};

	return c;
}

static int
be_put(struct store_backend *b, const char *key, const void *buf, size_t len,
       const struct tide_store_rc *repl)
{
	struct store_inproc *ip = ip_of(b);
	struct store_put_ctx c = put_ctx(ip);
	struct store_put_req r = {
		.keys = &key, .bufs = &buf, .lens = &len, .n = 1, .repl = repl, .single = true};
	struct store_put_key out;
	int ret;

	/* A 0-byte object is refused by the master (INVALID_PARAMS): spare the trip. */
	if (!key_ok(key) || buf == NULL || len == 0 || store_repl_check(repl, 1) != 0)
		return -EINVAL;
	ret = store_put_run(&c, &r, &out);
	return ret != 0 ? ret : store_put_errno(&out);
}

/* Gets run the sequences of store_get.h against this process's master and engine. */
static struct store_get_ctx
get_ctx(struct store_inproc *ip)
{
	struct store_get_ctx c = {.mc = &ip->mc, .eng = store_inproc_eng(ip)};

	return c;
}

static int64_t
be_get_into(struct store_backend *b, const char *key, void *buf, size_t len)
{
	struct store_get_ctx c = get_ctx(ip_of(b));
	struct store_get_dst d = {.buf = buf, .len = len};

	if ((buf == NULL && len > 0) || !key_ok(key))
		return -EINVAL;
	return store_get_one(&c, key, &d);
}

static int
be_get_with(struct store_backend *b, const char *key, tide_store_alloc_fn alloc,
	    tide_store_release_fn release, void *arg, void **out, size_t *len)
{
	struct store_get_ctx c = get_ctx(ip_of(b));
	struct store_get_dst d = {.alloc = alloc, .release = release, .arg = arg};
	int64_t got;

	if (!key_ok(key))
		return -EINVAL;
	got = store_get_one(&c, key, &d);
	if (got < 0)
		return (int)got;
	*out = d.buf;
	*len = (size_t)got;
	return 0;
}

static int64_t
be_get_size(struct store_backend *b, const char *key)
{
	struct store_get_ctx c = get_ctx(ip_of(b));

	if (!key_ok(key))
		return -EINVAL;
	return store_get_one(&c, key, NULL);
}

static int
be_is_exist(struct store_backend *b, const char *key)
{
	struct store_inproc *ip = ip_of(b);

	if (!key_ok(key))
		return -EINVAL;
	return store_mc_exist_key(&ip->mc, key);
}

static int
be_remove(struct store_backend *b, const char *key, bool force)
{
	struct store_inproc *ip = ip_of(b);

	if (!key_ok(key))
		return -EINVAL;
	return store_mc_remove(&ip->mc, key, force);
}

static int64_t
be_remove_all(struct store_backend *b, bool force)
{
	struct store_inproc *ip = ip_of(b);

	return store_mc_remove_all(&ip->mc, force);
}

static int64_t
be_replica_clear(struct store_backend *b, const char *const *keys, size_t n,
		 const char *segment_name, int *cleared)
{
	struct store_inproc *ip = ip_of(b);
	struct tide_mc_str *ks = NULL;
	struct tide_mc_resp resp;
	int64_t count = 0;
	size_t k, at = 0;
	int rc;

	if (n > 0 && (ks = calloc(n, sizeof(*ks))) == NULL)
		return -ENOMEM;
	/* An empty batch goes to the master too, which counts it as stock's does. */
	rc = store_mc_batch_replica_clear(&ip->mc, keys, n, segment_name, ks, &resp);
	free(ks);
	if (rc != 0)
		return rc;
	if (!resp.u.cleared.ok) {
		rc = store_mc_errno(resp.u.cleared.err);
		tide_mc_resp_free(&resp);
		return rc != 0 ? rc : -EREMOTEIO;
	}
	memset(cleared, 0, n * sizeof(*cleared));
	/* The master answers the cleared keys in request order: a subsequence of keys. */
	for (k = 0; k < resp.u.cleared.val.n; k++) {
		const struct tide_mc_str *c = &resp.u.cleared.val.v[k];

		while (at < n &&
		       (strlen(keys[at]) != c->len || memcmp(keys[at], c->ptr, c->len) != 0))
			at++;
		if (at == n) {
			count = -EBADMSG;
			break;
		}
		cleared[at++] = 1;
		count++;
	}
	tide_mc_resp_free(&resp);
	return count;
}

static int64_t
be_remove_by_regex(struct store_backend *b, const char *pattern, bool force)
{
	struct store_inproc *ip = ip_of(b);

	if (!key_ok(pattern))
		return -EINVAL;
	return store_mc_remove_by_regex(&ip->mc, pattern, force);
}

/* ------------------------------------------------------------------------------ batches */

static int
first_error(const int *rcs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (rcs[i] != 0)
			return rcs[i];
	return 0;
}

static int
be_batch_put(struct store_backend *b, const char *const *keys, const void *const *bufs,
	     const size_t *lens, size_t n, const struct tide_store_rc *repl, int *rcs)
{
	struct store_inproc *ip = ip_of(b);
	struct store_put_ctx c = put_ctx(ip);
	struct store_put_req r = {
		.keys = keys, .bufs = bufs, .lens = lens, .n = n, .repl = repl, .single = false};
	struct store_put_key *out;
	struct store_scratch sc;
	size_t i;
	int ret;

	if (keys == NULL || bufs == NULL || lens == NULL || rcs == NULL || n == 0 || n > UINT32_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!key_ok(keys[i]) || (bufs[i] == NULL && lens[i] > 0))
			return -EINVAL;
	if (store_repl_check(repl, n) != 0) {
		/* e.g. fewer group ids than keys: every key is refused. */
		for (i = 0; i < n; i++)
			rcs[i] = -EINVAL;
		return -EINVAL;
	}
	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*out))))
		return -ENOMEM;
	out = store_sc_take(&sc, n, sizeof(*out));
	ret = store_put_run(&c, &r, out);
	if (ret == 0) {
		for (i = 0; i < n; i++)
			rcs[i] = store_put_errno(&out[i]);
		ret = first_error(rcs, n);
	}
	store_sc_fini(&sc);
	return ret;
}

/*
 * The same sequence with the values in pieces, upserting or not: the pieces
 * are written where they are (store_put.h). n == 1 takes the single-key RPCs,
 * as be_put(). Every piece is checked before anything is sent: a NULL buf with
 * a non-zero len refuses the call as batch_put refuses such a buffer.
 */
static int
be_put_parts(struct store_backend *b, const char *const *keys, const struct tide_store_part *parts,
	     const size_t *nparts, size_t n, const struct tide_store_rc *repl, unsigned flags,
	     int *rcs)
{
	struct store_inproc *ip = ip_of(b);
	struct store_put_ctx c = put_ctx(ip);
	struct store_put_req r = {.keys = keys,
				  .parts = parts,
				  .nparts = nparts,
				  .n = n,
				  .repl = repl,
				  .single = n == 1,
				  .upsert = (flags & TIDE_STORE_PUT_UPSERT) != 0};
	struct store_put_key *out;
	struct store_scratch sc;
	size_t i, total;
	int ret;

	if ((flags & ~TIDE_STORE_PUT_UPSERT) != 0 || !keys_ok(keys, n) || rcs == NULL ||
	    !store_parts_ok(parts, nparts, n, STORE_PARTS_MAX, &total))
		return -EINVAL;
	if (store_repl_check(repl, n) != 0) {
		/* e.g. fewer group ids than keys: every key is refused, as batch_put. */
		for (i = 0; i < n; i++)
			rcs[i] = -EINVAL;
		return 0;
	}
	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*out))))
		return -ENOMEM;
	out = store_sc_take(&sc, n, sizeof(*out));
	ret = store_put_run(&c, &r, out);
	if (ret == 0)
		for (i = 0; i < n; i++)
			rcs[i] = store_put_errno(&out[i]);
	store_sc_fini(&sc);
	return ret;
}

static int
be_batch_get_into(struct store_backend *b, const char *const *keys, void *const *bufs,
		  const size_t *lens, size_t n, int64_t *sizes)
{
	struct store_get_ctx c = get_ctx(ip_of(b));

	if (keys == NULL || bufs == NULL || lens == NULL || sizes == NULL || n == 0 ||
	    n > UINT32_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!key_ok(keys[i]) || (bufs[i] == NULL && lens[i] > 0))
			return -EINVAL;
	return store_get_batch(&c, keys, bufs, lens, n, sizes);
}

/* One BatchGetReplicaList; the answer becomes the caller's block (store_replicas.h). */
static int
be_get_replicas(struct store_backend *b, const char *const *keys, size_t n,
		struct tide_store_replicas **out)
{
	struct store_inproc *ip = ip_of(b);
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct store_scratch sc;
	int ret;

	if (!keys_ok(keys, n))
		return -EINVAL;
	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*ks))))
		return -ENOMEM;
	ks = store_sc_take(&sc, n, sizeof(*ks));
	ret = store_mc_batch_replica_list(&ip->mc, keys, n, ks, &resp);
	if (ret == 0) {
		ret = store_replicas_from_mc(&resp.u.batch_replica_list, n, out);
		tide_mc_resp_free(&resp);
	}
	store_sc_fini(&sc);
	return ret;
}

/* Pieces are checked as be_put_parts() checks them, before the master sees anything. */
static int
be_get_parts(struct store_backend *b, const char *const *keys, const struct tide_store_part *parts,
	     const size_t *nparts, size_t n, int64_t *sizes)
{
	struct store_get_ctx c = get_ctx(ip_of(b));
	size_t total;

	if (!keys_ok(keys, n) || sizes == NULL ||
	    !store_parts_ok(parts, nparts, n, STORE_PARTS_MAX, &total))
		return -EINVAL;
	return store_get_parts(&c, keys, parts, nparts, n, total, sizes);
}

static int
be_get_into_ranges(struct store_backend *b, const char *const *keys, size_t nkeys,
		   struct tide_store_frag *frags, size_t nfrags)
{
	struct store_get_ctx c = get_ctx(ip_of(b));

	if (frags == NULL || nfrags == 0 || nfrags > UINT32_MAX || !keys_ok(keys, nkeys))
		return -EINVAL;
	for (size_t f = 0; f < nfrags; f++)
		if (frags[f].dst == NULL && frags[f].len > 0)
			return -EINVAL;
	return store_get_ranges(&c, keys, nkeys, frags, nfrags);
}

/* BatchExistKey or BatchRemove of n valid keys; resp valid (free it) on 0. */
static int
batch_keys_call(struct store_inproc *ip, enum tide_mc_fn fn, const char *const *keys, size_t n,
		bool force, struct tide_mc_resp *resp)
{
	struct tide_mc_str *ks;
	struct store_scratch sc;
	int ret;

	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*ks))))
		return -ENOMEM;
	ks = store_sc_take(&sc, n, sizeof(*ks));
	ret = store_mc_batch_keys(&ip->mc, fn, keys, n, force, ks, resp);
	store_sc_fini(&sc);
	return ret;
}

static int
be_batch_is_exist(struct store_backend *b, const char *const *keys, size_t n, int *out)
{
	struct store_inproc *ip = ip_of(b);
	struct tide_mc_resp resp;
	int ret;

	if (out == NULL || !keys_ok(keys, n))
		return -EINVAL;
	ret = batch_keys_call(ip, TIDE_MC_FN_BATCH_EXIST_KEY, keys, n, false, &resp);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < n; i++) {
		const struct tide_mc_exp_bool *e =
			i < resp.u.batch_exist.n ? &resp.u.batch_exist.v[i] : NULL;

		if (e == NULL)
			out[i] = -EBADMSG;
		else if (e->ok)
			out[i] = e->val ? 1 : 0;
		else
			out[i] = e->err == TIDE_MC_EC_OBJECT_NOT_FOUND ? 0 : store_mc_errno(e->err);
	}
	tide_mc_resp_free(&resp);
	return 0;
}

static int
be_batch_remove(struct store_backend *b, const char *const *keys, size_t n, bool force, int *rcs)
{
	struct store_inproc *ip = ip_of(b);
	struct tide_mc_resp resp;
	int ret;

	if (rcs == NULL || !keys_ok(keys, n))
		return -EINVAL;
	ret = batch_keys_call(ip, TIDE_MC_FN_BATCH_REMOVE, keys, n, force, &resp);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < n; i++)
		rcs[i] = store_mc_vec_status(&resp, i);
	tide_mc_resp_free(&resp);
	return first_error(rcs, n);
}

/* ------------------------------------------------------------------------------- memory */

static int
be_local_buffer(struct store_backend *b, void **base, size_t *len)
{
	struct store_inproc *ip = ip_of(b);

	if (base == NULL || len == NULL)
		return -EINVAL;
	*base = ip->lbuf;
	*len = ip->lbuf_len;
	return 0;
}

static int
be_map_buffer(struct store_backend *b, size_t len, void **out)
{
	struct store_inproc *ip = ip_of(b);
	struct store_mapped *m;
	void *p;
	int rc;

	if (len == 0 || out == NULL)
		return -EINVAL;
	m = malloc(sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		 0);
	if (p == MAP_FAILED) {
		free(m);
		return -ENOMEM;
	}
	rc = tide_te_register_local(ip->te, p, len);
	if (rc != 0) {
		munmap(p, len);
		free(m);
		return rc;
	}
	m->base = p;
	m->len = len;
	pthread_mutex_lock(&ip->map_lock);
	m->next = ip->maps;
	ip->maps = m;
	pthread_mutex_unlock(&ip->map_lock);
	*out = p;
	return 0;
}

static int
be_unmap_buffer(struct store_backend *b, void *ptr)
{
	struct store_inproc *ip = ip_of(b);
	struct store_mapped **pp, *m = NULL;

	pthread_mutex_lock(&ip->map_lock);
	for (pp = &ip->maps; *pp != NULL; pp = &(*pp)->next) {
		if ((*pp)->base == ptr) {
			m = *pp;
			*pp = m->next;
			break;
		}
	}
	pthread_mutex_unlock(&ip->map_lock);
	if (m == NULL)
		return -ENOENT;
	tide_te_unregister_local(ip->te, m->base);
	munmap(m->base, m->len);
	free(m);
	return 0;
}

/* tide_te_register_local: with RDMA an MR per device, so the NIC moves the buffer in
 * place; with TCP a record. A range already covered (inside the local buffer) is
 * -EEXIST, which the caller takes as success. */
static int
be_register_memory(struct store_backend *b, void *ptr, size_t len)
{
	return tide_te_register_local(ip_of(b)->te, ptr, len);
}

static void
be_unregister_memory(struct store_backend *b, void *ptr)
{
	(void)tide_te_unregister_local(ip_of(b)->te, ptr); /* -ENOENT: it was covered */
}

/* ----------------------------------------------------------------------------- sessions */

static int
be_put_sess_start(struct store_backend *b, const char *const *keys, const size_t *sizes, size_t n,
		  const struct tide_store_rc *repl, int *rcs)
{
	return store_session_put_start(ip_of(b), keys, sizes, n, repl, rcs);
}

static int
be_sess_ranges(struct store_backend *b, bool put, const char *const *keys,
	       const struct tide_store_part *parts, const uint64_t *offs, const size_t *nparts,
	       size_t n, int64_t *out)
{
	return store_session_ranges(ip_of(b), put, keys, parts, offs, nparts, n, out);
}

static int
be_put_sess_end(struct store_backend *b, const char *const *keys, size_t n, bool revoke, int *rcs)
{
	return store_session_put_end(ip_of(b), keys, n, revoke, rcs);
}

static int
be_get_sess_start(struct store_backend *b, const char *const *keys, size_t n, int *rcs)
{
	return store_session_get_start(ip_of(b), keys, n, rcs);
}

static int
be_get_sess_end(struct store_backend *b, const char *const *keys, size_t n)
{
	return store_session_get_end(ip_of(b), keys, n);
}

/* ------------------------------------------------------------------------------- status */

static int
be_health_check(struct store_backend *b)
{
	struct store_inproc *ip = ip_of(b);
	struct tide_mc_pool_conn *m;
	int32_t ec = 0;
	int rc;

	/* ServiceReady: no side effect at the master (a Ping would register a client). */
	m = tide_mc_pool_get(&ip->mc.pool, STORE_HEALTH_TIMEOUT_MS, &rc);
	if (m == NULL)
		return 2;
	tide_mc_client_set_timeout(m->c, STORE_HEALTH_TIMEOUT_MS);
	rc = tide_mc_client_service_ready(m->c, NULL, 0, &ec);
	tide_mc_client_set_timeout(m->c, 0);
	tide_mc_pool_put(m);
	return rc == 0 && ec == 0 ? 0 : 2;
}

static const char *
be_endpoint(const struct store_backend *b)
{
	const struct store_inproc *ip = store_backend_of(b, const struct store_inproc, be);

	return ip->te != NULL ? tide_te_local_name(ip->te) : "";
}

static const char *
be_protocol(const struct store_backend *b)
{
	const struct store_inproc *ip = store_backend_of(b, const struct store_inproc, be);

	return ip->proto != NULL ? ip->proto : "";
}

const struct store_backend_ops store_inproc_ops = {
	.name = "in-process",
	.attached = false,
	.put = be_put,
	.batch_put = be_batch_put,
	.put_parts = be_put_parts,
	.get_into = be_get_into,
	.get_with = be_get_with,
	.get_size = be_get_size,
	.batch_get_into = be_batch_get_into,
	.get_into_ranges = be_get_into_ranges,
	.get_parts = be_get_parts,
	.get_replicas = be_get_replicas,
	.put_sess_start = be_put_sess_start,
	.sess_ranges = be_sess_ranges,
	.put_sess_end = be_put_sess_end,
	.get_sess_start = be_get_sess_start,
	.get_sess_end = be_get_sess_end,
	.exist = be_is_exist,
	.batch_exist = be_batch_is_exist,
	.remove = be_remove,
	.batch_remove = be_batch_remove,
	.remove_all = be_remove_all,
	.remove_by_regex = be_remove_by_regex,
	.replica_clear = be_replica_clear,
	.local_buffer = be_local_buffer,
	.map_buffer = be_map_buffer,
	.unmap_buffer = be_unmap_buffer,
	.register_memory = be_register_memory,
	.unregister_memory = be_unregister_memory,
	.health_check = be_health_check,
	.endpoint = be_endpoint,
	.protocol = be_protocol,
};
