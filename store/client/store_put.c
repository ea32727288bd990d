/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The put sequence (store_put.h). The keys one placement is asked for form a
 * round: placed, written in one engine batch, committed. A call runs at most
 * one round per placement (two), so it makes at most two engine batches and,
 * in the worst case (a lease commit that found its lease gone, then PutStart
 * and PutEnd), three master round trips besides any lease grant.
 *
 * A placement holds a key between place and commit (held[]): a range of a
 * lease, or a PutStart (UpsertStart) the master is waiting to see ended.
 * Commit ends every held key exactly once, with a commit (PutEnd, UpsertEnd)
 * when its writes succeeded and an undo (the range given back, PutRevoke,
 * UpsertRevoke) when they did not, so a key never stays half visible.
 *
 * Writes: one per non-empty piece of a key's value per replica (a value given
 * whole is one piece), so a round of k keys of p pieces on r replicas moves
 * k * p * r ranges in its one engine batch.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "store_lease.h"
#include "store_put.h"
#include "store_repl.h"
#include "store_scratch.h"

/* One placement's turn at the keys the previous ones left. */
struct put_round {
	/* The keys (n of them), their sources (nw pieces in all) and sizes, as codec
	 * strings, and the replicate config with their group ids (n, if any). */
	size_t n, nw;
	const char *const *keys;
	const struct store_xfer_src *src;
	const size_t *lens;
	struct tide_mc_str *ks;
	const struct tide_mc_replicate_config *cfg;
	const struct tide_store_rc *repl;
	bool single, upsert;
	/*
	 * Per key. res: STORE_PUT_FALLBACK until place or commit settles it. held:
	 * place holds it, commit must end it; err of a held key is 0, or why its
	 * writes were not planned, or (added by the sequencer) its first failed write.
	 */
	enum store_put_result *res;
	int *err;
	bool *held;
	/* The writes of the held keys: x[k] belongs to key owner[k]. */
	struct store_xfer *x;
	size_t *owner;
	size_t nx;
	/* What place keeps for commit (its arrays are in sc and xsc, below). */
	struct store_lease *lease; /* lease: the one lease every key is placed in */
	uint64_t *offs;            /* lease: each key's place in it */
	/* lease: the commit's arrays, the written keys only (key cown[j] is j-th). */
	struct tide_mc_str *cks, *cgids;
	uint64_t *coffs, *clens;
	size_t *cown;
	enum store_put_result *cres;
	int *cerr;
	struct tide_mc_resp resp;          /* PutStart: the master's answer */
	struct tide_mc_object_meta *metas; /* BatchPutEnd's, n */
	size_t *midx;                      /* BatchPutEnd's, n */
	/* Last: round_init() clears what comes before them, not their inline bytes. */
	struct store_scratch sc, xsc;
};

/* A placement strategy. */
struct put_placement {
	const char *name;
	/* Whether it may take rd's keys at all. */
	bool (*takes)(const struct store_put_ctx *c, const struct put_round *rd);
	/* Place rd's keys: each is held (its writes in rd->x), settled, or left to the
	 * next placement. 0; -errno: the call failed as a whole, nothing is held or
	 * settled, and nothing is kept. */
	int (*place)(const struct store_put_ctx *c, struct put_round *rd);
	/* After the writes moved: end every held key, free what place kept. */
	void (*commit)(const struct store_put_ctx *c, struct put_round *rd);
};

/* ------------------------------------------------------------------------ lease placement */

static const char *
lease_pref(const struct tide_store_rc *repl)
{
	return repl != NULL ? repl->preferred_segment : NULL;
}

/*
 * What a lease grant can give: one replica, anywhere or on one preferred
 * segment; objects small enough that a master round trip is a large part of
 * their cost. A batch also needs every object non-empty and at most half a
 * lease in all: more would rarely fit beside what the current lease holds (a
 * lease may be smaller than asked for, a share of a small segment).
 */
static bool
lease_takes(const struct store_put_ctx *c, const struct put_round *rd)
{
	const struct tide_store_rc *repl = rd->repl;
	uint64_t total = 0;

	/* A lease commit creates keys, it never replaces one: no upsert. */
	if (c->leases == NULL || rd->upsert)
		return false;
	if (repl != NULL && (repl->replica_num > 1 || repl->n_preferred_segments != 0 ||
			     repl->prefer_alloc_in_same_node))
		return false;
	if (rd->single)
		return rd->lens[0] <= STORE_LEASE_MAX_OBJ;
	for (size_t i = 0; i < rd->n; i++) {
		if (rd->lens[i] == 0 || rd->lens[i] > STORE_LEASE_MAX_OBJ)
			return false;
		total += rd->lens[i];
	}
	return total <= store_lease_room(c->leases, lease_pref(repl)) / 2;
}

/*
 * Every key in the same lease, or none (one commit call covers the round):
 * a key that does not fit, or lands in another lease (the current one filled
 * up), gives back what was placed and leaves the round to PutStart. A key's
 * pieces are written one after the other in its range.
 */
static int
lease_place(const struct store_put_ctx *c, struct put_round *rd)
{
	struct store_lease *l = NULL, *li;
	size_t i, n = rd->n, nx = 0;

	if (!store_sc_init(&rd->sc, store_sc_size(n, sizeof(*rd->offs)) * 3 +
					    store_sc_size(rd->nw, sizeof(*rd->x)) +
					    store_sc_size(rd->nw, sizeof(*rd->owner)) +
					    store_sc_size(n, sizeof(*rd->cown)) +
					    store_sc_size(n, sizeof(*rd->cks)) * 2 +
					    store_sc_size(n, sizeof(*rd->cres)) +
					    store_sc_size(n, sizeof(*rd->cerr))))
		return 0; /* no room to plan: PutStart, which needs less */
	rd->offs = store_sc_take(&rd->sc, n, sizeof(*rd->offs));
	rd->coffs = store_sc_take(&rd->sc, n, sizeof(*rd->coffs));
	rd->clens = store_sc_take(&rd->sc, n, sizeof(*rd->clens));
	rd->x = store_sc_take(&rd->sc, rd->nw, sizeof(*rd->x));
	rd->owner = store_sc_take(&rd->sc, rd->nw, sizeof(*rd->owner));
	rd->cown = store_sc_take(&rd->sc, n, sizeof(*rd->cown));
	rd->cks = store_sc_take(&rd->sc, n, sizeof(*rd->cks));
	rd->cgids = store_sc_take(&rd->sc, n, sizeof(*rd->cgids));
	rd->cres = store_sc_take(&rd->sc, n, sizeof(*rd->cres));
	rd->cerr = store_sc_take(&rd->sc, n, sizeof(*rd->cerr));
	for (i = 0; i < n; i++) {
		int prc = store_lease_place(c->leases, c->mc, lease_pref(rd->repl), rd->lens[i],
					    &li, &rd->offs[i]);

		if (prc == 0 && l != NULL && li != l) {
			store_lease_giveback(c->leases, c->mc, li, rd->offs[i], rd->lens[i], false);
			prc = -EOPNOTSUPP;
		}
		if (prc != 0) {
			while (i-- > 0)
				store_lease_giveback(c->leases, c->mc, l, rd->offs[i], rd->lens[i],
						     false);
			store_sc_fini(&rd->sc);
			return 0;
		}
		l = li;
		for (size_t p = 0, off = 0; p < rd->src[i].np; p++) {
			const struct tide_store_part *pt = &rd->src[i].parts[p];

			if (pt->len == 0)
				continue;
			rd->x[nx] = (struct store_xfer){.ep = l->ep,
							.raddr = l->addr + rd->offs[i] + off,
							.local = (void *)pt->buf,
							.len = pt->len};
			rd->owner[nx++] = i;
			off += pt->len; /* the pieces sum to lens[i]: inside the range */
		}
		rd->held[i] = true;
	}
	rd->lease = l;
	rd->nx = nx;
	return 0;
}

/* One TideLeaseCommit for the keys whose write succeeded; a failed write gives its
 * range back and retires the lease (its segment may be gone: the next put gets a
 * lease elsewhere). */
static void
lease_commit(const struct store_put_ctx *c, struct put_round *rd)
{
	const struct tide_mc_replicate_config *cfg = rd->cfg;
	struct tide_mc_replicate_config sub = *cfg;
	size_t i, k, m = 0;

	if (rd->lease == NULL)
		return;
	for (i = 0; i < rd->n; i++) {
		if (rd->err[i] != 0) {
			rd->res[i] = STORE_PUT_FAILED;
			/* The engine's "try again" is not the put's: nothing will retry it. */
			if (rd->err[i] == -EAGAIN)
				rd->err[i] = -EIO;
			store_lease_giveback(c->leases, c->mc, rd->lease, rd->offs[i], rd->lens[i],
					     true);
			continue;
		}
		rd->cown[m] = i;
		rd->cks[m] = rd->ks[i];
		rd->coffs[m] = rd->offs[i];
		rd->clens[m] = rd->lens[i];
		if (cfg->group_ids.has)
			rd->cgids[m] = cfg->group_ids.val.v[i];
		m++;
	}
	if (m > 0) {
		sub.group_ids.val.v = cfg->group_ids.has ? rd->cgids : NULL;
		sub.group_ids.val.n = cfg->group_ids.has ? m : 0;
		store_lease_commit_n(c->leases, c->mc, rd->lease, rd->cks, rd->coffs, rd->clens, m,
				     &sub, rd->cres, rd->cerr);
	}
	for (k = 0; k < m; k++) {
		rd->res[rd->cown[k]] = rd->cres[k];
		rd->err[rd->cown[k]] = rd->cerr[k];
	}
	store_sc_fini(&rd->sc);
}

static const struct put_placement lease_placement = {
	.name = "lease",
	.takes = lease_takes,
	.place = lease_place,
	.commit = lease_commit,
};

/* --------------------------------------------------------------------- PutStart placement */

static bool
put_start_takes(const struct store_put_ctx *c, const struct put_round *rd)
{
	(void)c;
	(void)rd;
	return true; /* the master places anything it has room for */
}

/* A single put: PutStart (UpsertStart) of the one key, one write per piece per
 * replica. */
static int
put_start_one(const struct store_put_ctx *c, struct put_round *rd)
{
	const struct tide_mc_replica_desc_vec *v;
	size_t cap, np = rd->src[0].np;
	int rc =
		store_mc_put_start(c->mc, rd->keys[0], rd->lens[0], rd->cfg, rd->upsert, &rd->resp);

	/* An upsert replaces an existing key: the master never answers that; if it
	 * does, it is its refusal, not a put that found its key. */
	if (rc == -EEXIST && !rd->upsert) {
		rd->res[0] = STORE_PUT_EXISTS;
		return 0;
	}
	if (rc != 0)
		return rc;
	rd->held[0] = true;
	v = &rd->resp.u.put_start.val;
	/* Replicas (the master's count) times pieces, bounded: beyond the bound the
	 * room cannot be had and the key is revoked with -ENOMEM. */
	cap = np > 1 && v->n > STORE_XFER_MAX_WRITES / np ? STORE_XFER_MAX_WRITES
							  : v->n * (np > 1 ? np : 1);
	if (cap == STORE_XFER_MAX_WRITES ||
	    !store_sc_init(&rd->sc, store_sc_size(cap, sizeof(*rd->x)) +
					    store_sc_size(cap, sizeof(*rd->owner)))) {
		rd->err[0] = -ENOMEM; /* revoked at commit */
		return 0;
	}
	rd->x = store_sc_take(&rd->sc, cap, sizeof(*rd->x));
	rd->owner = store_sc_take(&rd->sc, cap, sizeof(*rd->owner));
	rd->err[0] = store_xfer_replica_writes(v, &rd->src[0], rd->lens[0], rd->x, cap, &rd->nx);
	if (rd->err[0] != 0)
		rd->nx = 0; /* none of its replicas is written */
	return 0;
}

/* A batch: one BatchPutStart (BatchUpsertStart) for the round's keys; a key that
 * exists already is settled at once (a put), one whose replicas cannot be
 * written is held to be revoked. */
static int
put_start_batch(const struct store_put_ctx *c, struct put_round *rd)
{
	size_t i, cap, n = rd->n;
	uint64_t *slens;
	int rc;

	if (!store_sc_init(&rd->sc, store_sc_size(n, sizeof(*slens)) +
					    store_sc_size(n, sizeof(*rd->metas)) +
					    store_sc_size(n, sizeof(*rd->midx))))
		return -ENOMEM;
	slens = store_sc_take(&rd->sc, n, sizeof(*slens));
	rd->metas = store_sc_take(&rd->sc, n, sizeof(*rd->metas));
	rd->midx = store_sc_take(&rd->sc, n, sizeof(*rd->midx));
	for (i = 0; i < n; i++)
		slens[i] = rd->lens[i];
	rc = store_mc_batch_put_start(c->mc, rd->ks, slens, n, rd->cfg, rd->upsert, &rd->resp);
	if (rc != 0) {
		store_sc_fini(&rd->sc);
		return rc;
	}
	cap = store_xfer_put_replicas(&rd->resp.u.batch_put_start, rd->src, n, rd->upsert, rd->err,
				      rd->held);
	for (i = 0; i < n; i++)
		if (!rd->held[i])
			rd->res[i] = rd->err[i] == 0 ? STORE_PUT_EXISTS : STORE_PUT_FAILED;
	rd->x = NULL;
	rd->owner = NULL;
	if (cap > 0 && store_sc_init(&rd->xsc, store_sc_size(cap, sizeof(*rd->x)) +
						       store_sc_size(cap, sizeof(*rd->owner)))) {
		rd->x = store_sc_take(&rd->xsc, cap, sizeof(*rd->x));
		rd->owner = store_sc_take(&rd->xsc, cap, sizeof(*rd->owner));
	}
	rd->nx = store_xfer_plan_puts(&rd->resp.u.batch_put_start, rd->src, rd->lens, n, rd->held,
				      rd->err, rd->x, cap, rd->owner);
	return 0;
}

static int
put_start_place(const struct store_put_ctx *c, struct put_round *rd)
{
	return rd->single ? put_start_one(c, rd) : put_start_batch(c, rd);
}

/* PutEnd (BatchPutEnd; an upsert's UpsertEnd, BatchUpsertEnd) of the held keys
 * whose writes succeeded; PutRevoke (BatchPutRevoke; UpsertRevoke,
 * BatchUpsertRevoke) of the others and of any whose End failed. */
static void
put_start_commit(const struct store_put_ctx *c, struct put_round *rd)
{
	if (rd->single) {
		if (rd->held[0]) {
			tide_mc_resp_free(&rd->resp);
			rd->err[0] = store_mc_put_end(c->mc, rd->keys[0], rd->upsert, rd->err[0]);
			rd->res[0] = rd->err[0] == 0 ? STORE_PUT_STORED : STORE_PUT_FAILED;
		}
		store_sc_fini(&rd->sc);
		return;
	}
	store_sc_fini(&rd->xsc);
	tide_mc_resp_free(&rd->resp);
	store_mc_batch_finish(c->mc, rd->keys, rd->n, rd->upsert, rd->held, rd->err, rd->ks,
			      rd->metas, rd->midx);
	for (size_t i = 0; i < rd->n; i++)
		if (rd->held[i])
			rd->res[i] = rd->err[i] == 0 ? STORE_PUT_STORED : STORE_PUT_FAILED;
	store_sc_fini(&rd->sc);
}

static const struct put_placement put_start_placement = {
	.name = "put-start",
	.takes = put_start_takes,
	.place = put_start_place,
	.commit = put_start_commit,
};

/* ---------------------------------------------------------------------------- the sequence */

/* In the order they are tried: the cheaper first. */
static const struct put_placement *const placements[] = {&lease_placement, &put_start_placement};

/* The request's arrays for the keys of a round. */
struct put_keys {
	size_t *idx; /* round key k is request key idx[k] */
	const char **keys;
	struct store_xfer_src *src;
	struct tide_store_part *one; /* a value given whole: its one piece */
	size_t *lens;
	struct tide_mc_str *ks, *gids;
	enum store_put_result *res;
	int *err;
	bool *held;
	/* The parts form: each request key's pieces and size (NULL: bufs/lens). */
	const struct store_xfer_src *rsrc;
	const size_t *rlens;
};

/* rd over the m request keys in pk->idx, under cfg (group ids: the request's). */
static void
round_init(struct put_round *rd, const struct store_put_req *r,
	   const struct tide_mc_replicate_config *cfg, struct tide_mc_replicate_config *rcfg,
	   const struct put_keys *pk, size_t m)
{
	size_t nw = 0;

	memset(rd, 0, offsetof(struct put_round, sc));
	*rcfg = *cfg;
	for (size_t k = 0; k < m; k++) {
		size_t i = pk->idx[k];

		pk->keys[k] = r->keys[i];
		if (pk->rsrc == NULL) {
			/* A whole value is the one-piece case of the same writes. */
			pk->one[k] = (struct tide_store_part){r->bufs[i], r->lens[i]};
			pk->src[k] = (struct store_xfer_src){&pk->one[k], 1};
			pk->lens[k] = r->lens[i];
		} else {
			pk->src[k] = pk->rsrc[i];
			pk->lens[k] = pk->rlens[i];
		}
		nw += pk->src[k].np;
		pk->ks[k] = store_mc_str(r->keys[i]);
		if (cfg->group_ids.has)
			pk->gids[k] = cfg->group_ids.val.v[i];
		pk->res[k] = STORE_PUT_FALLBACK;
		pk->err[k] = 0;
		pk->held[k] = false;
	}
	if (cfg->group_ids.has) {
		rcfg->group_ids.val.v = pk->gids;
		rcfg->group_ids.val.n = m;
	}
	rd->n = m;
	rd->nw = nw;
	rd->keys = pk->keys;
	rd->src = pk->src;
	rd->lens = pk->lens;
	rd->ks = pk->ks;
	rd->cfg = rcfg;
	rd->repl = r->repl;
	rd->single = r->single;
	rd->upsert = r->upsert;
	rd->res = pk->res;
	rd->err = pk->err;
	rd->held = pk->held;
	rd->sc.heap = NULL;
	rd->xsc.heap = NULL;
}

/* The parts form's per-key pieces and sizes (n entries each) from r. A size that
 * does not fit a size_t is 0: the key is refused as an empty one would be. */
static void
parts_index(const struct store_put_req *r, struct store_xfer_src *rsrc, size_t *rlens)
{
	const struct tide_store_part *p = r->parts;

	for (size_t i = 0; i < r->n; i++) {
		size_t len = 0;
		bool over = false;

		rsrc[i] = (struct store_xfer_src){p, r->nparts[i]};
		for (size_t k = 0; k < r->nparts[i]; k++) {
			over = over || p[k].len > SIZE_MAX - len;
			len += over ? 0 : p[k].len;
		}
		rlens[i] = over ? 0 : len;
		p += r->nparts[i];
	}
}

int
store_put_run(const struct store_put_ctx *c, const struct store_put_req *r,
	      struct store_put_key *out)
{
	struct tide_mc_replicate_config cfg, rcfg;
	struct tide_mc_str *strs;
	struct store_put_key *kout;
	struct store_scratch sc;
	struct put_keys pk;
	size_t n = r->n, nstrs = store_repl_nstrs(r->repl, n), settled = 0, i, k, m;
	size_t np = r->parts != NULL ? n : 0; /* the parts form's index */
	struct store_xfer_src *rsrc;
	uint64_t move_us = 0;
	bool moved = false;
	size_t *rlens;
	int ret = 0;

	if (!store_sc_init(
		    &sc,
		    store_sc_size(nstrs, sizeof(*strs)) + store_sc_size(n, sizeof(*kout)) +
			    store_sc_size(n, sizeof(*pk.idx)) + store_sc_size(n, sizeof(*pk.keys)) +
			    store_sc_size(n, sizeof(*pk.src)) + store_sc_size(n, sizeof(*pk.one)) +
			    store_sc_size(n, sizeof(*pk.lens)) +
			    store_sc_size(n, sizeof(*pk.ks)) * 2 +
			    store_sc_size(n, sizeof(*pk.res)) + store_sc_size(n, sizeof(*pk.err)) +
			    store_sc_size(n, sizeof(*pk.held)) + store_sc_size(np, sizeof(*rsrc)) +
			    store_sc_size(np, sizeof(*rlens))))
		return -ENOMEM;
	strs = store_sc_take(&sc, nstrs, sizeof(*strs));
	kout = store_sc_take(&sc, n, sizeof(*kout));
	pk.idx = store_sc_take(&sc, n, sizeof(*pk.idx));
	pk.keys = store_sc_take(&sc, n, sizeof(*pk.keys));
	pk.src = store_sc_take(&sc, n, sizeof(*pk.src));
	pk.one = store_sc_take(&sc, n, sizeof(*pk.one));
	pk.lens = store_sc_take(&sc, n, sizeof(*pk.lens));
	pk.ks = store_sc_take(&sc, n, sizeof(*pk.ks));
	pk.gids = store_sc_take(&sc, n, sizeof(*pk.gids));
	pk.res = store_sc_take(&sc, n, sizeof(*pk.res));
	pk.err = store_sc_take(&sc, n, sizeof(*pk.err));
	pk.held = store_sc_take(&sc, n, sizeof(*pk.held));
	rsrc = store_sc_take(&sc, np, sizeof(*rsrc));
	rlens = store_sc_take(&sc, np, sizeof(*rlens));
	pk.rsrc = NULL;
	pk.rlens = NULL;
	if (r->parts != NULL) {
		parts_index(r, rsrc, rlens);
		pk.rsrc = rsrc;
		pk.rlens = rlens;
	}
	store_repl_fill(r->repl, n, strs, &cfg);
	for (i = 0; i < n; i++) {
		/* An empty value is the master's INVALID_PARAMS: spare it the keys. Not a
		 * settled key: the call may still fail as a whole. */
		if ((r->parts != NULL ? rlens[i] : r->lens[i]) == 0)
			kout[i] = (struct store_put_key){STORE_PUT_FAILED, -EINVAL, NULL};
		else
			kout[i] = (struct store_put_key){.result = STORE_PUT_FALLBACK};
	}
	for (size_t p = 0; p < sizeof(placements) / sizeof(placements[0]); p++) {
		const struct put_placement *pl = placements[p];
		struct put_round rd;

		for (i = m = 0; i < n; i++)
			if (kout[i].result == STORE_PUT_FALLBACK)
				pk.idx[m++] = i;
		if (m == 0)
			break;
		round_init(&rd, r, &cfg, &rcfg, &pk, m);
		if (!pl->takes(c, &rd))
			continue;
		/* Place the round's keys. */
		ret = pl->place(c, &rd);
		if (ret != 0) {
			/* Before any key was settled the whole call failed: say so. */
			if (settled == 0)
				goto out;
			for (k = 0; k < m; k++)
				kout[pk.idx[k]] =
					(struct store_put_key){STORE_PUT_FAILED, ret, pl->name};
			ret = 0;
			break;
		}
		/* Move the bytes: one engine batch; a key's first failed write is its error. */
		if (rd.nx > 0) {
			uint64_t t0 = tide_mono_ns();

			/* store_xfer_run() counts the bytes written. */
			(void)c->move(&c->eng, TIDE_TE_WRITE, rd.x, rd.nx);
			move_us += (tide_mono_ns() - t0) / 1000u;
			moved = true;
			for (k = 0; k < rd.nx; k++)
				if (rd.x[k].rc != 0 && rd.err[rd.owner[k]] == 0)
					rd.err[rd.owner[k]] = rd.x[k].rc;
		}
		/* Commit what was written, undo the rest; keys still FALLBACK go on. */
		pl->commit(c, &rd);
		for (k = 0; k < m; k++) {
			if (rd.res[k] == STORE_PUT_FALLBACK)
				continue;
			kout[pk.idx[k]] = (struct store_put_key){rd.res[k], rd.err[k], pl->name};
			settled++;
		}
	}
	for (i = 0; i < n; i++) {
		/* PutStart settles every key it is given: this is only a guard. */
		if (kout[i].result == STORE_PUT_FALLBACK)
			kout[i] = (struct store_put_key){STORE_PUT_FAILED, -EREMOTEIO, NULL};
		out[i] = kout[i];
	}
	if (moved)
		store_metrics_xfer_latency(
			c->eng.met,
			r->single ? STORE_METRICS_XFER_PUT : STORE_METRICS_XFER_BATCH_PUT, move_us);
out:
	store_sc_fini(&sc);
	return ret;
}
