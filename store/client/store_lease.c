/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One-round-trip puts through Tide's lease extension (store_lease.h).
 *
 * Bounds: one current lease per store; a retired lease lives until its last
 * in-flight put ends (at most one per thread putting); each keeps at most
 * STORE_LEASE_MAX_FREE free ranges, so placing and giving back are O(32).
 * Grants and releases are master round trips; a grant runs under the mutex
 * (the puts waiting for it need its answer anyway), and so do the releases
 * of leases it replaces (the grant may need their space); other releases
 * run after the mutex is dropped.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_lease.h"
#include "store_xfer.h"
#include "tide_log.h"

void
store_leases_init(struct store_leases *L, bool enabled)
{
	memset(L, 0, sizeof(*L));
	pthread_mutex_init(&L->mu, NULL);
	L->mode = enabled ? 0 : -1;
}

static uint64_t
round_up(uint64_t v, uint64_t g)
{
	return (v + g - 1) / g * g;
}

int
store_lease_carve(struct store_lease *l, uint64_t len, uint64_t *off)
{
	uint64_t need = round_up(len, l->granule);

	for (unsigned i = 0; i < l->nfree; i++) {
		if (l->fr[i].len < need)
			continue;
		*off = l->fr[i].off;
		l->fr[i].off += need;
		l->fr[i].len -= need;
		if (l->fr[i].len == 0) {
			memmove(&l->fr[i], &l->fr[i + 1], (l->nfree - i - 1) * sizeof(l->fr[0]));
			l->nfree--;
		}
		return 0;
	}
	return -ENOSPC;
}

bool
store_lease_free(struct store_lease *l, uint64_t off, uint64_t len)
{
	uint64_t need = round_up(len, l->granule), end = off + need;
	unsigned i = 0;
	bool prev, next;

	while (i < l->nfree && l->fr[i].off < off)
		i++;
	prev = i > 0 && l->fr[i - 1].off + l->fr[i - 1].len == off;
	next = i < l->nfree && l->fr[i].off == end;
	if (prev && next) {
		l->fr[i - 1].len += need + l->fr[i].len;
		memmove(&l->fr[i], &l->fr[i + 1], (l->nfree - i - 1) * sizeof(l->fr[0]));
		l->nfree--;
	} else if (prev) {
		l->fr[i - 1].len += need;
	} else if (next) {
		l->fr[i].off = off;
		l->fr[i].len += need;
	} else {
		if (l->nfree == STORE_LEASE_MAX_FREE)
			return false;
		memmove(&l->fr[i + 1], &l->fr[i], (l->nfree - i) * sizeof(l->fr[0]));
		l->fr[i].off = off;
		l->fr[i].len = need;
		l->nfree++;
	}
	return true;
}

static uint64_t
now_ms(void)
{
	return store_xfer_now_ms();
}

/* Placements stop STORE_LEASE_MARGIN_MS before the master may let it go. */
static bool
usable(const struct store_lease *l, uint64_t now)
{
	return !l->retired && now + STORE_LEASE_MARGIN_MS < l->base_ms + l->ttl_ms;
}

/* No more placements from l (mu held). */
static void
retire(struct store_leases *L, struct store_lease *l)
{
	l->retired = true;
	for (unsigned i = 0; i < STORE_LEASE_SLOTS; i++)
		if (L->slot[i].cur == l)
			L->slot[i].cur = NULL;
}

/* One placement of l ended (mu held): l when it is now retired and idle, for
 * the caller to release_free() once the mutex is dropped. */
static struct store_lease *
settle(struct store_lease *l)
{
	l->inflight--;
	return l->retired && l->inflight == 0 ? l : NULL;
}

static void
release_free(struct store_mc *mc, struct store_lease *l)
{
	int rc;

	if (l == NULL)
		return;
	if (!l->gone) {
		rc = store_mc_lease_release(mc, l->id);
		if (rc != 0)
			TIDE_LOG(DEBUG,
				 "lease %llu: release failed (%d); the master frees it "
				 "when it expires",
				 (unsigned long long)l->id, rc);
	}
	free(l);
}

/* Leases a placement retires, released once the mutex is dropped: those of a moved master
 * (forget_moved, one per slot), the slot's own, and the least recently used slot's. */
#define PLACE_REL (STORE_LEASE_SLOTS + 2)

/* release_free() of each of rel[0..n) (NULL entries skipped), emptied. */
static void
release_all(struct store_mc *mc, struct store_lease **rel, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		release_free(mc, rel[k]);
		rel[k] = NULL;
	}
}

/* A new current lease for slot k from the master (mu held); now: the time the grant
 * is sent (its life runs from there). 0, or -EOPNOTSUPP for a plain put. */
static int
grant(struct store_leases *L, struct store_mc *mc, unsigned k, uint64_t now)
{
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	const struct tide_mc_lease *v;
	struct tide_mc_resp resp;
	struct store_lease *l;
	bool unusable;
	int rc;

	cfg.preferred_segment.ptr = L->slot[k].pref;
	cfg.preferred_segment.len = strlen(L->slot[k].pref);
	rc = store_mc_lease_grant(mc, STORE_LEASE_BYTES, &cfg, &resp);

	if (rc == -EOPNOTSUPP) {
		TIDE_LOG(INFO, "master serves no leases: puts take PutStart and PutEnd");
		L->mode = -1;
		return -EOPNOTSUPP;
	}
	if (rc != 0) {
		/* No room now (or the master is away): plain puts for a second. */
		TIDE_LOG(DEBUG, "lease grant failed (%d): plain puts for now", rc);
		L->retry_ms = now_ms() + 1000;
		return -EOPNOTSUPP;
	}
	v = &resp.u.lease.val;
	unusable = v->granule == 0 || v->buf.size < v->granule || v->buf.size % v->granule ||
		   v->buf.buffer_address == 0 || v->ttl_ms <= STORE_LEASE_MARGIN_MS ||
		   v->buf.transport_endpoint.len == 0 ||
		   v->buf.transport_endpoint.len >= sizeof(l->ep);
	l = unusable ? NULL : calloc(1, sizeof(*l));
	if (l == NULL) {
		uint64_t id = v->id;

		if (unusable) {
			TIDE_LOG(WARN,
				 "master granted an unusable lease (size %llu, granule %llu, "
				 "ttl %llu ms): puts take PutStart and PutEnd",
				 (unsigned long long)v->buf.size, (unsigned long long)v->granule,
				 (unsigned long long)v->ttl_ms);
			L->mode = -1;
		} else {
			L->retry_ms = now_ms() + 1000;
		}
		tide_mc_resp_free(&resp);
		(void)store_mc_lease_release(mc, id);
		return -EOPNOTSUPP;
	}
	l->id = v->id;
	l->addr = v->buf.buffer_address;
	l->size = v->buf.size;
	l->granule = v->granule;
	l->ttl_ms = v->ttl_ms;
	l->base_ms = now;
	memcpy(l->ep, v->buf.transport_endpoint.ptr, v->buf.transport_endpoint.len);
	l->ep[v->buf.transport_endpoint.len] = '\0';
	l->fr[0].off = 0;
	l->fr[0].len = l->size;
	l->nfree = 1;
	tide_mc_resp_free(&resp);
	L->slot[k].cur = l;
	L->slot[k].granted = l->size;
	L->mode = 1;
	return 0;
}

/* The slot for pref (mu held): its own, else an empty one, else the least recently
 * used one, whose lease is retired (*old: released by the caller when idle). */
static unsigned
slot_for(struct store_leases *L, const char *pref, struct store_lease **old)
{
	unsigned k, pick = 0;

	for (k = 0; k < STORE_LEASE_SLOTS; k++)
		if (L->slot[k].used_ms != 0 && strcmp(L->slot[k].pref, pref) == 0)
			return k;
	for (k = 0; k < STORE_LEASE_SLOTS; k++) {
		if (L->slot[k].used_ms == 0) {
			pick = k;
			break;
		}
		if (L->slot[k].used_ms < L->slot[pick].used_ms)
			pick = k;
	}
	if (L->slot[pick].cur != NULL) {
		struct store_lease *l = L->slot[pick].cur;

		retire(L, l);
		if (l->inflight == 0)
			*old = l;
	}
	snprintf(L->slot[pick].pref, sizeof(L->slot[pick].pref), "%s", pref);
	L->slot[pick].granted = 0;
	return pick;
}

/* The master moved (a new HA leader): no more placements in the current leases
 * (mu held). They are released all the same (idle ones into rel[], which comes in empty, for the
 * caller once the mutex is dropped): a lease granted while the move happened may be the new
 * leader's, and one of the old leader's is unknown to the new one (lease ids start at a random
 * 62-bit point per table and are checked against the client, so an old id does not name another
 * lease there). */
static void
forget_moved(struct store_leases *L, struct store_lease *rel[STORE_LEASE_SLOTS])
{
	unsigned gen = atomic_load_explicit(&L->gen, memory_order_acquire);

	if (gen == L->seen_gen)
		return;
	L->seen_gen = gen;
	for (unsigned k = 0; k < STORE_LEASE_SLOTS; k++) {
		struct store_lease *l = L->slot[k].cur;

		if (l == NULL)
			continue;
		retire(L, l);
		if (l->inflight == 0)
			rel[k] = l;
	}
	L->retry_ms = 0;
}

void
store_leases_moved(struct store_leases *L)
{
	atomic_fetch_add_explicit(&L->gen, 1, memory_order_release);
}

int
store_lease_place(struct store_leases *L, struct store_mc *mc, const char *pref, uint64_t len,
		  struct store_lease **lease, uint64_t *off)
{
	struct store_lease *rel[PLACE_REL] = {NULL}, *l;
	uint64_t now;
	unsigned k;
	int rc = -EOPNOTSUPP;

	if (pref == NULL)
		pref = "";
	if (len == 0 || len > STORE_LEASE_MAX_OBJ || strlen(pref) >= STORE_LEASE_PREF_MAX)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&L->mu);
	/* The clock after the lock: another thread's grant may have kept us waiting. */
	now = now_ms();
	forget_moved(L, rel);
	if (L->mode < 0 || (L->retry_ms != 0 && now < L->retry_ms))
		goto out;
	k = slot_for(L, pref, &rel[STORE_LEASE_SLOTS]);
	L->slot[k].used_ms = now != 0 ? now : 1;
	/* Its segment gives smaller leases than this: retiring the current one for a new
	 * grant of the same size would only lead to the plain put. */
	if (L->slot[k].granted != 0 && len > L->slot[k].granted)
		goto out;
	l = L->slot[k].cur;
	rc = 0;
	if (l != NULL && (!usable(l, now) || store_lease_carve(l, len, off) != 0)) {
		retire(L, l);
		if (l->inflight == 0)
			rel[STORE_LEASE_SLOTS + 1] = l;
		l = NULL;
	}
	if (l == NULL) {
		/* Space first, then the new grant: with a full segment the grant needs
		 * what the old leases hold. */
		release_all(mc, rel, PLACE_REL);
		rc = grant(L, mc, k, now_ms());
		if (rc == 0) {
			/* A reply the master held (HA durability) or a slow grant may have
			 * used up part of the lease's life: check it as any other. */
			l = L->slot[k].cur;
			rc = usable(l, now_ms()) ? store_lease_carve(l, len, off) : -ESTALE;
		}
	}
	if (rc == 0) {
		l->inflight++;
		*lease = l;
	} else {
		rc = -EOPNOTSUPP;
	}
out:
	pthread_mutex_unlock(&L->mu);
	release_all(mc, rel, PLACE_REL);
	return rc;
}

uint64_t
store_lease_room(struct store_leases *L, const char *pref)
{
	uint64_t room = STORE_LEASE_BYTES;

	if (pref == NULL)
		pref = "";
	pthread_mutex_lock(&L->mu);
	for (unsigned k = 0; k < STORE_LEASE_SLOTS; k++)
		if (L->slot[k].used_ms != 0 && L->slot[k].granted != 0 &&
		    strcmp(L->slot[k].pref, pref) == 0)
			room = L->slot[k].granted;
	pthread_mutex_unlock(&L->mu);
	return room;
}

void
store_lease_giveback(struct store_leases *L, struct store_mc *mc, struct store_lease *l,
		     uint64_t off, uint64_t len, bool stop)
{
	struct store_lease *done;

	pthread_mutex_lock(&L->mu);
	(void)store_lease_free(l, off, len);
	if (stop)
		retire(L, l);
	done = settle(l);
	pthread_mutex_unlock(&L->mu);
	release_free(mc, done);
}

/* What one key's commit answer means for its range and for the lease (mu held).
 * rc: the call's result; ec: the key's ErrorCode when rc is 0. */
static enum store_put_result
commit_one(struct store_leases *L, struct store_lease *l, const struct tide_mc_str *key,
	   uint64_t off, uint64_t len, int rc, int32_t ec, uint64_t t0, int *err)
{
	*err = 0;
	if (rc == -EOPNOTSUPP) {
		/* Refused as a call (an error frame): nothing was stored. */
		(void)store_lease_free(l, off, len);
		L->mode = -1;
		retire(L, l);
		return STORE_PUT_FALLBACK;
	}
	if (rc != 0) {
		/* No answer: the object may exist, so the range is not placed again. */
		retire(L, l);
		*err = rc;
		return STORE_PUT_FAILED;
	}
	if (ec == 0) {
		if (t0 > l->base_ms)
			l->base_ms = t0;
		return STORE_PUT_STORED;
	}
	if (ec == TIDE_MC_EC_OBJECT_ALREADY_EXISTS) {
		(void)store_lease_free(l, off, len);
		return STORE_PUT_EXISTS;
	}
	if (ec == TIDE_MC_EC_LEASE_EXPIRED) {
		if (!l->gone)
			TIDE_LOG(INFO,
				 "lease %llu ended at the master (expired, or a new leader): "
				 "putting %.*s again without it",
				 (unsigned long long)l->id, (int)key->len, key->ptr);
		l->gone = true;
		retire(L, l);
		return STORE_PUT_FALLBACK;
	}
	/* The master refused this range (its piece bound, a disagreement about what
	 * is free): stop using the lease, put this key the plain way. */
	TIDE_LOG(DEBUG, "lease %llu: commit of %.*s refused (%d): retiring it",
		 (unsigned long long)l->id, (int)key->len, key->ptr, ec);
	retire(L, l);
	return STORE_PUT_FALLBACK;
}

void
store_lease_commit_n(struct store_leases *L, struct store_mc *mc, struct store_lease *l,
		     struct tide_mc_str *ks, uint64_t *offs, uint64_t *lens, size_t n,
		     const struct tide_mc_replicate_config *cfg, enum store_put_result *res,
		     int *err)
{
	struct store_lease *done = NULL;
	struct tide_mc_resp resp;
	uint64_t t0 = now_ms();
	int rc = store_mc_lease_commit(mc, l->id, ks, offs, lens, n, cfg, &resp);

	pthread_mutex_lock(&L->mu);
	for (size_t i = 0; i < n; i++) {
		int32_t ec = TIDE_MC_EC_INTERNAL_ERROR;

		if (rc == 0 && i < resp.u.batch_status.n)
			ec = resp.u.batch_status.v[i].ok ? 0 : resp.u.batch_status.v[i].err;
		res[i] = commit_one(L, l, &ks[i], offs[i], lens[i], rc, ec, t0, &err[i]);
		done = settle(l);
	}
	pthread_mutex_unlock(&L->mu);
	if (rc == 0)
		tide_mc_resp_free(&resp);
	release_free(mc, done);
}

enum store_put_result
store_lease_commit(struct store_leases *L, struct store_mc *mc, struct store_lease *l,
		   const char *key, uint64_t off, uint64_t len,
		   const struct tide_mc_replicate_config *cfg, int *err)
{
	struct tide_mc_str ks = {(char *)key, strlen(key)};
	enum store_put_result res;
	int e;

	store_lease_commit_n(L, mc, l, &ks, &off, &len, 1, cfg, &res, &e);
	if (err != NULL)
		*err = e;
	return res;
}

void
store_leases_fini(struct store_leases *L, struct store_mc *mc)
{
	struct store_lease *idle[STORE_LEASE_SLOTS];
	unsigned n = 0;

	pthread_mutex_lock(&L->mu);
	for (unsigned k = 0; k < STORE_LEASE_SLOTS; k++) {
		struct store_lease *l = L->slot[k].cur;

		if (l == NULL)
			continue;
		retire(L, l);
		if (l->inflight == 0)
			idle[n++] = l; /* else its last put releases it */
	}
	memset(L->slot, 0, sizeof(L->slot));
	pthread_mutex_unlock(&L->mu);
	for (unsigned i = 0; i < n; i++)
		release_free(mc, idle[i]);
}
