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
	got = store_xfer_read_replica(&c->eng, l, dst->buf, dst->len, t0);
	tide_mc_resp_free(&resp);
	if (got < 0 && dst->alloc != NULL) {
		if (dst->release != NULL)
			dst->release(dst->arg, dst->buf);
		dst->buf = NULL;
	}
	return got;
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
		store_xfer_run(&c->eng, TIDE_TE_READ, x, nx);
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
	uint64_t t0;
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
		store_xfer_run(&c->eng, TIDE_TE_READ, x, nx);
		store_xfer_frags_done(x, owner, nx, frags, todo);
	}
	store_xfer_frags_lease(ki, nkeys, frags, nfrags, t0);
	tide_mc_resp_free(&resp);
	for (f = 0; f < nfrags && ret == 0; f++)
		ret = frags[f].result < 0 ? (int)frags[f].result : 0;
out:
	store_sc_fini(&sc);
	return ret;
}
