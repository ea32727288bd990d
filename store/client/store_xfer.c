/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transfer planning and execution of the store's calls (store_xfer.h): which
 * replica each key or fragment is read from or written to, and one engine
 * batch per round of them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_mc.h"
#include "store_metrics.h"
#include "store_xfer.h"
#include "tide_log.h"

/* Wait bound for one transfer batch; the engine fails stalled requests within
 * its own io_timeout_ms (10 s) so this only guards against an engine bug. */
#define XFER_WAIT_MS 60000

/*
 * The range lies in our own mounted segment: copy it here. The engine would
 * copy it too (same-process shortcut), but only after a batch alloc, submit,
 * wait, status and free; for a small object that is most of the work.
 */
bool
store_xfer_self_copy(const struct store_xfer_eng *e, enum tide_te_op op, const struct store_xfer *x,
		     const char *self)
{
	uintptr_t base = (uintptr_t)e->seg_base;
	void *remote;

	if (e->seg_base == NULL || strcmp(x->ep, self) != 0 || x->raddr < base ||
	    x->len > e->seg_size || x->raddr - base > e->seg_size - x->len)
		return false;
	remote = (void *)(uintptr_t)x->raddr;
	if (op == TIDE_TE_READ)
		memcpy(x->local, remote, x->len);
	else
		memcpy(remote, x->local, x->len);
	return true;
}

/* store_xfer_run() without the counting. */
static int
xfer_run(const struct store_xfer_eng *e, enum tide_te_op op, struct store_xfer *x, size_t n)
{
	struct tide_te_req inl[STORE_XFER_INLINE], *reqs = inl;
	const char *self = tide_te_local_name(e->te);
	struct tide_te_status st;
	tide_te_batch_t b = 0;
	size_t i, nr = 0;
	uint32_t sub = 0;
	int first = 0, rc;
	bool have_b;

	for (i = 0; i < n; i++) {
		x[i].rc = 0;
		if (x[i].len == 0 || store_xfer_self_copy(e, op, &x[i], self))
			continue;
		x[i].rc = 1; /* for the engine */
		nr++;
	}
	if (nr == 0)
		return 0;
	if (nr > UINT32_MAX)
		return -EINVAL;
	if (nr > STORE_XFER_INLINE) {
		reqs = calloc(nr, sizeof(*reqs));
		if (reqs == NULL) {
			for (i = 0; i < n; i++)
				if (x[i].rc == 1)
					x[i].rc = -ENOMEM;
			return -ENOMEM;
		}
	}
	for (i = 0; i < n; i++) {
		if (x[i].rc != 1)
			continue;
		rc = tide_te_open_segment(e->te, x[i].ep, &reqs[sub].seg);
		if (rc != 0) {
			TIDE_LOG_RATELIMIT(WARN, 5, "open segment %s: %s", x[i].ep,
					   tide_te_strerror(rc));
			x[i].rc = rc;
			if (first == 0)
				first = rc;
			continue;
		}
		reqs[sub].op = op;
		reqs[sub].local = x[i].local;
		reqs[sub].remote_addr = x[i].raddr;
		reqs[sub].len = x[i].len;
		sub++;
	}
	if (sub == 0)
		goto out;
	rc = tide_te_batch_alloc(e->te, sub, &b);
	have_b = rc == 0;
	if (have_b) {
		rc = tide_te_submit(e->te, b, reqs, sub);
		if (rc == 0)
			rc = tide_te_wait(e->te, b, XFER_WAIT_MS);
		if (rc != 0) {
			/* Requests may still be in flight: the batch cannot be freed yet; the
			 * engine fails them within io_timeout_ms, so wait once more. */
			tide_te_wait(e->te, b, -1);
		}
	}
	for (i = 0, sub = 0; i < n; i++) {
		int xr = rc;

		if (x[i].rc != 1)
			continue;
		if (xr == 0) {
			xr = tide_te_status(e->te, b, sub, &st);
			if (xr == 0 && st.state != TIDE_TE_COMPLETED)
				xr = st.error != 0 ? st.error : -EIO;
		}
		sub++;
		x[i].rc = xr;
		if (xr != 0) {
			/* The handle stays open: other threads may be using it, and the engine
			 * fetches a restarted peer's descriptor again by itself. */
			TIDE_LOG_RATELIMIT(WARN, 5, "transfer with %s failed: %s", x[i].ep,
					   tide_te_strerror(xr));
			if (first == 0)
				first = xr;
		}
	}
	if (have_b)
		tide_te_batch_free(e->te, b);
out:
	if (reqs != inl)
		free(reqs);
	return first;
}

int
store_xfer_run(const struct store_xfer_eng *e, enum tide_te_op op, struct store_xfer *x, size_t n)
{
	int rc = xfer_run(e, op, x, n);
	uint64_t bytes = 0;

	/* Every byte any call moves is counted here, once: stock's transfer byte
	 * counters sum the transfers that completed (each replica written counts). */
	if (e->met != NULL) {
		for (size_t i = 0; i < n; i++)
			if (x[i].rc == 0)
				bytes += x[i].len;
		store_metrics_xfer_bytes(e->met, op == TIDE_TE_WRITE, bytes);
	}
	return rc;
}

/* ------------------------------------------------------------------------------ single keys */

const struct tide_mc_buffer_desc *
store_xfer_complete(const struct tide_mc_replica_desc *d)
{
	if (d->status != TIDE_MC_RS_COMPLETE ||
	    (d->kind != TIDE_MC_RK_MEMORY && d->kind != TIDE_MC_RK_NOF))
		return NULL;
	return &d->u.memory;
}

int
store_xfer_replica_writes(const struct tide_mc_replica_desc_vec *v,
			  const struct store_xfer_src *src, uint64_t len, struct store_xfer *x,
			  size_t cap, size_t *nx)
{
	if (v->n == 0)
		return -EREMOTEIO;
	for (size_t k = 0; k < v->n; k++) {
		const struct tide_mc_buffer_desc *bd = &v->v[k].u.memory;
		uint64_t off = 0;

		/* Only memory replicas exist at this master (spec 3.3); each is one
		 * contiguous buffer, so a piece never straddles two. */
		if (v->v[k].kind != TIDE_MC_RK_MEMORY || bd->size < len)
			return -EREMOTEIO;
		for (size_t p = 0; p < src->np; p++) {
			const struct tide_store_part *pt = &src->parts[p];

			if (pt->len == 0)
				continue; /* nothing to move, and no request for the engine */
			/* The pieces' sum is len (the caller's): a piece cannot pass the end. */
			if (*nx >= cap || pt->len > len - off)
				return -EREMOTEIO;
			x[*nx].ep = bd->transport_endpoint.ptr;
			x[*nx].raddr = bd->buffer_address + off;
			x[*nx].local = (void *)(uintptr_t)pt->buf;
			x[*nx].len = pt->len;
			(*nx)++;
			off += pt->len;
		}
	}
	return 0;
}

int64_t
store_xfer_read_replica(const struct store_xfer_eng *e, const struct tide_mc_replica_list *l,
			void *buf, size_t len, uint64_t t0)
{
	const struct tide_mc_buffer_desc *bd;
	int64_t ret = -EAGAIN;
	uint64_t lease;
	struct store_xfer x;
	int rc;

	for (size_t i = 0; i < l->replicas.n; i++) {
		bd = store_xfer_complete(&l->replicas.v[i]);
		if (bd == NULL)
			continue;
		if (bd->size > len)
			return -ENOBUFS;
		x.ep = bd->transport_endpoint.ptr;
		x.raddr = bd->buffer_address;
		x.local = buf;
		x.len = bd->size;
		rc = store_xfer_run(e, TIDE_TE_READ, &x, 1);
		if (rc == 0) {
			/* Spec 5.4: past the lease the buffer may have been reused (LEASE_EXPIRED).
			 */
			lease = l->lease_ttl_ms;
			return lease != 0 && store_xfer_now_ms() - t0 > lease ? -ESTALE
									      : (int64_t)bd->size;
		}
		/* Spec 5.4 picks the first COMPLETE replica; we also fall back on failure. */
		ret = rc;
	}
	return ret;
}

int64_t
store_xfer_replica_size(const struct tide_mc_replica_list *l)
{
	for (size_t i = 0; i < l->replicas.n; i++) {
		const struct tide_mc_buffer_desc *bd = store_xfer_complete(&l->replicas.v[i]);

		if (bd != NULL)
			return (int64_t)bd->size;
	}
	return -EAGAIN;
}

/* ---------------------------------------------------------------------------------- batches */

size_t
store_xfer_put_replicas(const struct tide_mc_exp_replicas_vec *r, const struct store_xfer_src *src,
			size_t n, bool upsert, int *rcs, bool *pending)
{
	size_t cap = 0;

	for (size_t i = 0; i < n; i++) {
		const struct tide_mc_exp_replicas *e = i < r->n ? &r->v[i] : NULL;
		size_t w;

		rcs[i] = 0;
		if (e == NULL) {
			rcs[i] = -EBADMSG;
		} else if (!e->ok) {
			/* Spec 5.3: an existing key is a successful put; an upsert replaces it,
			 * so the answer is the master's refusal. */
			if (upsert || e->err != TIDE_MC_EC_OBJECT_ALREADY_EXISTS)
				rcs[i] = store_mc_errno(e->err);
		} else {
			pending[i] = true;
			/* Replicas (the master's count) times pieces: saturate, a room this
			 * large fails to allocate and the keys get -ENOMEM. */
			w = src[i].np == 0 ? 0 : e->val.n;
			if (src[i].np > 1 && w > STORE_XFER_MAX_WRITES / src[i].np)
				w = STORE_XFER_MAX_WRITES;
			else
				w *= src[i].np > 1 ? src[i].np : 1;
			cap = w > STORE_XFER_MAX_WRITES - cap ? STORE_XFER_MAX_WRITES : cap + w;
		}
	}
	return cap;
}

size_t
store_xfer_plan_puts(const struct tide_mc_exp_replicas_vec *r, const struct store_xfer_src *src,
		     const size_t *lens, size_t n, const bool *pending, int *rcs,
		     struct store_xfer *x, size_t cap, size_t *owner)
{
	size_t nx = 0;

	for (size_t i = 0; i < n; i++) {
		size_t mark = nx;

		if (!pending[i])
			continue;
		if (x == NULL) {
			rcs[i] = cap > 0 ? -ENOMEM : -EREMOTEIO;
			continue;
		}
		rcs[i] = store_xfer_replica_writes(&r->v[i].val, &src[i], lens[i], x, cap, &nx);
		if (rcs[i] != 0) {
			nx = mark; /* none of this key's replicas is written */
			continue;
		}
		for (size_t k = mark; k < nx; k++)
			owner[k] = i;
	}
	return nx;
}

size_t
store_xfer_plan_gets(const struct tide_mc_exp_replica_list_vec *r, void *const *bufs,
		     const size_t *lens, size_t n, int64_t *sizes, struct store_xfer *x,
		     size_t *owner)
{
	size_t nx = 0;

	for (size_t i = 0; i < n; i++) {
		const struct tide_mc_exp_replica_list *e = i < r->n ? &r->v[i] : NULL;
		const struct tide_mc_buffer_desc *bd = NULL;

		sizes[i] = -EAGAIN;
		if (e == NULL) {
			sizes[i] = -EBADMSG;
			continue;
		}
		if (!e->ok) {
			sizes[i] = store_mc_errno(e->err);
			continue;
		}
		for (size_t k = 0; k < e->val.replicas.n && bd == NULL; k++)
			bd = store_xfer_complete(&e->val.replicas.v[k]);
		if (bd == NULL)
			continue;
		if (bd->size > lens[i]) {
			sizes[i] = -ENOBUFS;
			continue;
		}
		sizes[i] = (int64_t)bd->size;
		x[nx].ep = bd->transport_endpoint.ptr;
		x[nx].raddr = bd->buffer_address;
		x[nx].local = bufs[i];
		x[nx].len = bd->size;
		owner[nx++] = i;
	}
	return nx;
}

/* ------------------------------------------------------------------------------ ranged reads */

const struct tide_mc_buffer_desc *
store_xfer_next_replica(const struct store_rkey *k, uint32_t *from)
{
	const struct tide_mc_buffer_desc *bd;

	while (*from < k->reps->n) {
		bd = store_xfer_complete(&k->reps->v[(*from)++]);
		if (bd != NULL)
			return bd;
	}
	return NULL;
}

void
store_xfer_rkeys(const struct tide_mc_exp_replica_list_vec *r, size_t nkeys, struct store_rkey *ki)
{
	const struct tide_mc_buffer_desc *bd;

	for (size_t i = 0; i < nkeys; i++) {
		const struct tide_mc_exp_replica_list *e = i < r->n ? &r->v[i] : NULL;
		uint32_t from = 0;

		ki[i].reps = NULL;
		ki[i].err = e == NULL ? -EBADMSG : !e->ok ? store_mc_errno(e->err) : 0;
		if (ki[i].err != 0)
			continue;
		ki[i].reps = &e->val.replicas;
		ki[i].lease_ms = e->val.lease_ttl_ms;
		bd = store_xfer_next_replica(&ki[i], &from);
		if (bd == NULL) {
			ki[i].reps = NULL;
			ki[i].err = -EAGAIN; /* no COMPLETE replica */
			continue;
		}
		ki[i].size = bd->size;
	}
}

void
store_xfer_frags_settle(const struct store_rkey *ki, size_t nkeys, struct tide_store_frag *frags,
			size_t nfrags, uint32_t *next, bool *todo)
{
	for (size_t f = 0; f < nfrags; f++) {
		struct tide_store_frag *fr = &frags[f];

		next[f] = 0;
		todo[f] = false;
		if (fr->key >= nkeys)
			fr->result = -EINVAL;
		else if (ki[fr->key].err != 0)
			fr->result = ki[fr->key].err;
		else if (fr->src_off > ki[fr->key].size || fr->len > ki[fr->key].size - fr->src_off)
			fr->result = -EINVAL;
		else if (fr->len == 0)
			fr->result = 0;
		else
			todo[f] = true;
	}
}

size_t
store_xfer_frags_round(const struct store_rkey *ki, const struct tide_store_frag *frags,
		       size_t nfrags, uint32_t *next, bool *todo, struct store_xfer *x,
		       size_t *owner)
{
	const struct tide_mc_buffer_desc *bd;
	size_t nx = 0;

	for (size_t f = 0; f < nfrags; f++) {
		if (!todo[f])
			continue;
		bd = store_xfer_next_replica(&ki[frags[f].key], &next[f]);
		if (bd == NULL) {
			todo[f] = false; /* every replica failed: keeps the last error */
			continue;
		}
		x[nx].ep = bd->transport_endpoint.ptr;
		x[nx].raddr = bd->buffer_address + frags[f].src_off;
		x[nx].local = frags[f].dst;
		x[nx].len = frags[f].len;
		owner[nx++] = f;
	}
	return nx;
}

void
store_xfer_frags_done(const struct store_xfer *x, const size_t *owner, size_t nx,
		      struct tide_store_frag *frags, bool *todo)
{
	for (size_t i = 0; i < nx; i++) {
		size_t f = owner[i];

		frags[f].result = x[i].rc == 0 ? (int64_t)frags[f].len : x[i].rc;
		todo[f] = x[i].rc != 0;
	}
}

/* As get_into: past the read lease the bytes may come from a reused buffer. */
void
store_xfer_frags_lease(const struct store_rkey *ki, size_t nkeys, struct tide_store_frag *frags,
		       size_t nfrags, uint64_t t0)
{
	for (size_t f = 0; f < nfrags; f++) {
		struct tide_store_frag *fr = &frags[f];

		if (fr->result > 0 && fr->key < nkeys && ki[fr->key].lease_ms != 0 &&
		    store_xfer_now_ms() - t0 > ki[fr->key].lease_ms)
			fr->result = -ESTALE;
	}
}
