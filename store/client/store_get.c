/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The get sequences (store_get.h). A lookup is one master round trip whatever
 * the number of keys; the reads after it are bounded by the replica count: a
 * single key tries its replicas in order, a batch makes one engine batch and
 * then one single-key get per failed key, ranged reads make one engine batch
 * per replica rank (a handful).
 */
#include <errno.h>

#include "store_get.h"
#include "store_scratch.h"

int64_t
store_get_one(const struct store_get_ctx *c, const char *key, struct store_get_dst *dst)
{
	const struct tide_mc_replica_list *l;
	struct tide_mc_resp resp;
	uint64_t t0 = store_xfer_now_ms(); /* the read lease runs from the lookup */
	uint64_t t1;
	int64_t size, got;
	int rc;

	rc = store_mc_replica_list(c->mc, key, &resp);
	if (rc != 0)
		return rc;
	l = &resp.u.replica_list.val;
	/* One list gives the size and the place, so a block asked for is sized from the
	 * list it is read with: no size round trip, no race with a remove and re-put. */
	size = store_xfer_replica_size(l);
	if (dst == NULL || (size < 0 && dst->alloc != NULL)) {
		tide_mc_resp_free(&resp);
		return size;
	}
	if (dst->alloc != NULL) {
		dst->buf = dst->alloc(dst->arg, (size_t)size);
		if (dst->buf == NULL) {
			tide_mc_resp_free(&resp);
			return -ENOMEM;
		}
		dst->len = (size_t)size;
	}
	t1 = tide_mono_ns();
	got = store_xfer_read_replica(&c->eng, l, dst->buf, dst->len, t0);
	tide_mc_resp_free(&resp);
	if (got >= 0) /* the bytes were counted by store_xfer_run() */
		store_metrics_xfer_latency(c->eng.met, STORE_METRICS_XFER_GET,
					   (tide_mono_ns() - t1) / 1000u);
	if (got < 0 && dst->alloc != NULL) {
		if (dst->release != NULL)
			dst->release(dst->arg, dst->buf);
		dst->buf = NULL;
	}
	return got;
}

/* One engine batch of reads (store_xfer_run() counts their bytes); its time is
 * added to *us. */
static void
read_run(const struct store_get_ctx *c, struct store_xfer *x, size_t nx, uint64_t *us)
{
	uint64_t t = tide_mono_ns();

	store_xfer_run(&c->eng, TIDE_TE_READ, x, nx);
	*us += (tide_mono_ns() - t) / 1000u;
}

/* A batch call's reads took us microseconds (nothing when none ran). */
static void
batch_observe(const struct store_get_ctx *c, bool ran, uint64_t us)
{
	if (ran)
		store_metrics_xfer_latency(c->eng.met, STORE_METRICS_XFER_BATCH_GET, us);
}

int
store_get_batch(const struct store_get_ctx *c, const char *const *keys, void *const *bufs,
		const size_t *lens, size_t n, int64_t *sizes)
{
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct store_scratch sc;
	struct store_xfer *x;
	size_t *owner, nx, i, k;
	uint64_t us = 0;
	int ret;

	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*ks)) + store_sc_size(n, sizeof(*x)) +
					store_sc_size(n, sizeof(*owner))))
		return -ENOMEM;
	ks = store_sc_take(&sc, n, sizeof(*ks));
	x = store_sc_take(&sc, n, sizeof(*x));
	owner = store_sc_take(&sc, n, sizeof(*owner));
	/* Locate n. */
	ret = store_mc_batch_replica_list(c->mc, keys, n, ks, &resp);
	if (ret != 0)
		goto out;
	/* Read n: each key's first COMPLETE replica, one engine batch. */
	nx = store_xfer_plan_gets(&resp.u.batch_replica_list, bufs, lens, n, sizes, x, owner);
	if (nx > 0)
		read_run(c, x, nx, &us);
	batch_observe(c, nx > 0, us);
	tide_mc_resp_free(&resp);
	/* A failed first replica: the key on its own, which tries the others. */
	for (k = 0; k < nx; k++) {
		struct store_get_dst d = {.buf = bufs[owner[k]], .len = lens[owner[k]]};

		if (x[k].rc != 0)
			sizes[owner[k]] = store_get_one(c, keys[owner[k]], &d);
	}
	for (i = 0; i < n && ret == 0; i++)
		ret = sizes[i] < 0 ? (int)sizes[i] : 0;
out:
	store_sc_fini(&sc);
	return ret;
}

int
store_get_ranges(const struct store_get_ctx *c, const char *const *keys, size_t nkeys,
		 struct tide_store_frag *frags, size_t nfrags)
{
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct store_scratch sc;
	struct store_rkey *ki;
	struct store_xfer *x;
	uint32_t *next;
	bool *todo;
	size_t *owner, nx, f;
	uint64_t t0, us = 0;
	bool ran = false;
	int ret;

	if (!store_sc_init(&sc, store_sc_size(nkeys, sizeof(*ks)) +
					store_sc_size(nkeys, sizeof(*ki)) +
					store_sc_size(nfrags, sizeof(*next)) +
					store_sc_size(nfrags, sizeof(*todo)) +
					store_sc_size(nfrags, sizeof(*x)) +
					store_sc_size(nfrags, sizeof(*owner))))
		return -ENOMEM;
	ks = store_sc_take(&sc, nkeys, sizeof(*ks));
	ki = store_sc_take(&sc, nkeys, sizeof(*ki));
	next = store_sc_take(&sc, nfrags, sizeof(*next));
	todo = store_sc_take(&sc, nfrags, sizeof(*todo));
	x = store_sc_take(&sc, nfrags, sizeof(*x));
	owner = store_sc_take(&sc, nfrags, sizeof(*owner));
	/* Locate n. */
	t0 = store_xfer_now_ms();
	ret = store_mc_batch_replica_list(c->mc, keys, nkeys, ks, &resp);
	if (ret != 0)
		goto out;
	store_xfer_rkeys(&resp.u.batch_replica_list, nkeys, ki);
	/* Read n: fragments that cannot be read are settled now, the others in rounds. */
	store_xfer_frags_settle(ki, nkeys, frags, nfrags, next, todo);
	while ((nx = store_xfer_frags_round(ki, frags, nfrags, next, todo, x, owner)) > 0) {
		read_run(c, x, nx, &us);
		ran = true;
		store_xfer_frags_done(x, owner, nx, frags, todo);
	}
	batch_observe(c, ran, us);
	store_xfer_frags_lease(ki, nkeys, frags, nfrags, t0);
	tide_mc_resp_free(&resp);
	for (f = 0; f < nfrags && ret == 0; f++)
		ret = frags[f].result < 0 ? (int)frags[f].result : 0;
out:
	store_sc_fini(&sc);
	return ret;
}

/*
 * Each key's pieces, in order, as the fragments that cover its object: a piece
 * takes min(its len, what is left of the object); pieces past the end get
 * nothing. A key whose pieces hold less than its object gets -ENOBUFS and no
 * fragment; a failed lookup its error. Returns the fragments written to fr
 * (at most total, one per piece).
 */
static size_t
parts_frags(const struct store_rkey *ki, const struct tide_store_part *parts, const size_t *nparts,
	    size_t n, int64_t *sizes, struct tide_store_frag *fr)
{
	size_t nf = 0, k = 0;

	for (size_t i = 0; i < n; i++) {
		size_t end = k + nparts[i];
		uint64_t room = 0, off = 0;

		if (ki[i].err != 0) {
			sizes[i] = ki[i].err;
			k = end;
			continue;
		}
		for (size_t j = k; j < end; j++)
			room = parts[j].len > UINT64_MAX - room ? UINT64_MAX : room + parts[j].len;
		if (room < ki[i].size) {
			sizes[i] = -ENOBUFS;
			k = end;
			continue;
		}
		sizes[i] = (int64_t)ki[i].size;
		for (; k < end && off < ki[i].size; k++) {
			uint64_t take = ki[i].size - off;

			if (parts[k].len == 0)
				continue;
			if (take > parts[k].len)
				take = parts[k].len;
			/* The struct is the put's (const): these pieces are the caller's
			 * destinations. */
			fr[nf++] = (struct tide_store_frag){.key = i,
							    .src_off = off,
							    .dst = (void *)(uintptr_t)parts[k].buf,
							    .len = take};
			off += take;
		}
		k = end;
	}
	return nf;
}

int
store_get_parts(const struct store_get_ctx *c, const char *const *keys,
		const struct tide_store_part *parts, const size_t *nparts, size_t n, size_t total,
		int64_t *sizes)
{
	struct tide_store_frag *fr;
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct store_scratch sc;
	struct store_rkey *ki;
	struct store_xfer *x;
	size_t *owner, nx, nf, f, i;
	uint32_t *next;
	bool *todo;
	uint64_t t0, us = 0;
	bool ran = false;
	int ret;

	/* A fragment per piece at most: total bounds every per-fragment array. */
	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*ks)) + store_sc_size(n, sizeof(*ki)) +
					store_sc_size(total, sizeof(*fr)) +
					store_sc_size(total, sizeof(*next)) +
					store_sc_size(total, sizeof(*todo)) +
					store_sc_size(total, sizeof(*x)) +
					store_sc_size(total, sizeof(*owner))))
		return -ENOMEM;
	ks = store_sc_take(&sc, n, sizeof(*ks));
	ki = store_sc_take(&sc, n, sizeof(*ki));
	fr = store_sc_take(&sc, total, sizeof(*fr));
	next = store_sc_take(&sc, total, sizeof(*next));
	todo = store_sc_take(&sc, total, sizeof(*todo));
	x = store_sc_take(&sc, total, sizeof(*x));
	owner = store_sc_take(&sc, total, sizeof(*owner));
	/* Locate n: the sizes decide which pieces are read, and how much of each. */
	t0 = store_xfer_now_ms();
	ret = store_mc_batch_replica_list(c->mc, keys, n, ks, &resp);
	if (ret != 0)
		goto out;
	store_xfer_rkeys(&resp.u.batch_replica_list, n, ki);
	nf = parts_frags(ki, parts, nparts, n, sizes, fr);
	/* Read n: one engine batch from the first replicas, another round per replica rank
	 * only for fragments whose transfer failed. */
	store_xfer_frags_settle(ki, n, fr, nf, next, todo);
	while ((nx = store_xfer_frags_round(ki, fr, nf, next, todo, x, owner)) > 0) {
		read_run(c, x, nx, &us);
		ran = true;
		store_xfer_frags_done(x, owner, nx, fr, todo);
	}
	batch_observe(c, ran, us);
	store_xfer_frags_lease(ki, n, fr, nf, t0);
	tide_mc_resp_free(&resp);
	/* A key is read when every one of its fragments is. */
	for (f = 0; f < nf; f++)
		if (fr[f].result < 0 && sizes[fr[f].key] >= 0)
			sizes[fr[f].key] = fr[f].result;
	for (i = 0; i < n && ret == 0; i++)
		ret = sizes[i] < 0 ? (int)sizes[i] : 0;
out:
	store_sc_fini(&sc);
	return ret;
}
