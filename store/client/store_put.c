/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The put sequence (store_put.h). The keys one placement is asked for form a
 * round: placed, written in one engine batch, committed. A call runs at most
 * one round per placement (two), so it makes at most two engine batches and,
 * in the worst case (a lease commit that found its lease gone, then PutStart
 * and PutEnd), three master round trips besides any lease grant.
 *
 * A placement holds a key between place and commit (held[]): a range of a
 * lease, or a PutStart the master is waiting to see ended. Commit ends every
 * held key exactly once, with a commit (PutEnd) when its writes succeeded and
 * an undo (the range given back, PutRevoke) when they did not, so a key never
 * stays half visible.
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
	/* The keys (n of them), their sources and sizes, as codec strings, and the
	 * replicate config with their group ids (n, if any). */
	size_t n;
	const char *const *keys;
	const void *const *bufs;
	const size_t *lens;
	struct tide_mc_str *ks;
	const struct tide_mc_replicate_config *cfg;
	const struct tide_store_rc *repl;
	bool single;
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

	if (c->leases == NULL)
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
 * up), gives back what was placed and leaves the round to PutStart.
 */
static int
lease_place(const struct store_put_ctx *c, struct put_round *rd)
{
	struct store_lease *l = NULL, *li;
	size_t i, n = rd->n;

	if (!store_sc_init(&rd->sc, store_sc_size(n, sizeof(*rd->offs)) * 3 +
					    store_sc_size(n, sizeof(*rd->x)) +
					    store_sc_size(n, sizeof(*rd->owner)) * 2 +
					    store_sc_size(n, sizeof(*rd->cks)) * 2 +
					    store_sc_size(n, sizeof(*rd->cres)) +
					    store_sc_size(n, sizeof(*rd->cerr))))
		return 0; /* no room to plan: PutStart, which needs less */
	rd->offs = store_sc_take(&rd->sc, n, sizeof(*rd->offs));
	rd->coffs = store_sc_take(&rd->sc, n, sizeof(*rd->coffs));
	rd->clens = store_sc_take(&rd->sc, n, sizeof(*rd->clens));
	rd->x = store_sc_take(&rd->sc, n, sizeof(*rd->x));
	rd->owner = store_sc_take(&rd->sc, n, sizeof(*rd->owner));
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
		rd->x[i] = (struct store_xfer){.ep = l->ep,
					       .raddr = l->addr + rd->offs[i],
					       .local = (void *)rd->bufs[i],
					       .len = rd->lens[i]};
		rd->owner[i] = i;
		rd->held[i] = true;
	}
	rd->lease = l;
	rd->nx = n;
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

/* A single put: PutStart of the one key, one write per replica. */
static int
put_start_one(const struct store_put_ctx *c, struct put_round *rd)
{
	const struct tide_mc_replica_desc_vec *v;
	int rc = store_mc_put_start(c->mc, rd->keys[0], rd->lens[0], rd->cfg, &rd->resp);

	if (rc == -EEXIST) {
		rd->res[0] = STORE_PUT_EXISTS;
		return 0;
	}
	if (rc != 0)
		return rc;
	rd->held[0] = true;
	v = &rd->resp.u.put_start.val;
	if (!store_sc_init(&rd->sc, store_sc_size(v->n, sizeof(*rd->x)) +
					    store_sc_size(v->n, sizeof(*rd->owner)))) {
		rd->err[0] = -ENOMEM; /* revoked at commit */
		return 0;
	}
	rd->x = store_sc_take(&rd->sc, v->n, sizeof(*rd->x));
	rd->owner = store_sc_take(&rd->sc, v->n, sizeof(*rd->owner));
	rd->err[0] = store_xfer_replica_writes(v, rd->bufs[0], rd->lens[0], rd->x, &rd->nx);
	if (rd->err[0] != 0)
		rd->nx = 0; /* none of its replicas is written */
	return 0;
}

/* A batch: one BatchPutStart for the round's keys; a key that exists already is
 * settled at once, one whose replicas cannot be written is held to be revoked. */
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
	rc = store_mc_batch_put_start(c->mc, rd->ks, slens, n, rd->cfg, &rd->resp);
	if (rc != 0) {
		store_sc_fini(&rd->sc);
		return rc;
	}
	cap = store_xfer_put_replicas(&rd->resp.u.batch_put_start, n, rd->err, rd->held);
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
	rd->nx = store_xfer_plan_puts(&rd->resp.u.batch_put_start, rd->bufs, rd->lens, n, rd->held,
				      rd->err, rd->x, cap, rd->owner);
	return 0;
}

static int
put_start_place(const struct store_put_ctx *c, struct put_round *rd)
{
	return rd->single ? put_start_one(c, rd) : put_start_batch(c, rd);
}

/* PutEnd (BatchPutEnd) of the held keys whose writes succeeded; PutRevoke
 * (BatchPutRevoke) of the others and of any whose End failed. */
static void
put_start_commit(const struct store_put_ctx *c, struct put_round *rd)
{
	if (rd->single) {
		if (rd->held[0]) {
			tide_mc_resp_free(&rd->resp);
			rd->err[0] = store_mc_put_end(c->mc, rd->keys[0], rd->err[0]);
			rd->res[0] = rd->err[0] == 0 ? STORE_PUT_STORED : STORE_PUT_FAILED;
		}
		store_sc_fini(&rd->sc);
		return;
	}
	store_sc_fini(&rd->xsc);
	tide_mc_resp_free(&rd->resp);
	store_mc_batch_finish(c->mc, rd->keys, rd->n, rd->held, rd->err, rd->ks, rd->metas,
			      rd->midx);
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
	const void **bufs;
	size_t *lens;
	struct tide_mc_str *ks, *gids;
	enum store_put_result *res;
	int *err;
	bool *held;
};

/* rd over the m request keys in pk->idx, under cfg (group ids: the request's). */
static void
round_init(struct put_round *rd, const struct store_put_req *r,
	   const struct tide_mc_replicate_config *cfg, struct tide_mc_replicate_config *rcfg,
	   const struct put_keys *pk, size_t m)
{
	memset(rd, 0, offsetof(struct put_round, sc));
	*rcfg = *cfg;
	for (size_t k = 0; k < m; k++) {
		size_t i = pk->idx[k];

		pk->keys[k] = r->keys[i];
		pk->bufs[k] = r->bufs[i];
		pk->lens[k] = r->lens[i];
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
	rd->keys = pk->keys;
	rd->bufs = pk->bufs;
	rd->lens = pk->lens;
	rd->ks = pk->ks;
	rd->cfg = rcfg;
	rd->repl = r->repl;
	rd->single = r->single;
	rd->res = pk->res;
	rd->err = pk->err;
	rd->held = pk->held;
	rd->sc.heap = NULL;
	rd->xsc.heap = NULL;
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
	int ret = 0;

	if (!store_sc_init(&sc, store_sc_size(nstrs, sizeof(*strs)) +
					store_sc_size(n, sizeof(*kout)) +
					store_sc_size(n, sizeof(*pk.idx)) +
					store_sc_size(n, sizeof(*pk.keys)) * 2 +
					store_sc_size(n, sizeof(*pk.lens)) +
					store_sc_size(n, sizeof(*pk.ks)) * 2 +
					store_sc_size(n, sizeof(*pk.res)) +
					store_sc_size(n, sizeof(*pk.err)) +
					store_sc_size(n, sizeof(*pk.held))))
		return -ENOMEM;
	strs = store_sc_take(&sc, nstrs, sizeof(*strs));
	kout = store_sc_take(&sc, n, sizeof(*kout));
	pk.idx = store_sc_take(&sc, n, sizeof(*pk.idx));
	pk.keys = store_sc_take(&sc, n, sizeof(*pk.keys));
	pk.bufs = store_sc_take(&sc, n, sizeof(*pk.bufs));
	pk.lens = store_sc_take(&sc, n, sizeof(*pk.lens));
	pk.ks = store_sc_take(&sc, n, sizeof(*pk.ks));
	pk.gids = store_sc_take(&sc, n, sizeof(*pk.gids));
	pk.res = store_sc_take(&sc, n, sizeof(*pk.res));
	pk.err = store_sc_take(&sc, n, sizeof(*pk.err));
	pk.held = store_sc_take(&sc, n, sizeof(*pk.held));
	store_repl_fill(r->repl, n, strs, &cfg);
	for (i = 0; i < n; i++)
		kout[i] = (struct store_put_key){.result = STORE_PUT_FALLBACK};
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
			(void)c->move(&c->eng, TIDE_TE_WRITE, rd.x, rd.nx);
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
out:
	store_sc_fini(&sc);
	return ret;
}
