/* SPDX-License-Identifier: Apache-2.0 */
/*
 * In-process sessions (store_session.h). A put session is BatchPutStart's
 * reservation kept open: its replicas go into put_sess at the start, ranged
 * writes go to every one of them, and the end is the BatchPutEnd (or
 * BatchPutRevoke) the put sequence would have sent (store_mc_batch_finish(),
 * which also revokes a key whose End failed). A get session is one
 * BatchGetReplicaList answer kept: the key's first COMPLETE memory replica and
 * its read lease.
 *
 * Bounds: TIDE_STORE_SESSIONS_MAX sessions per table; a ranged call moves at
 * most one transfer per piece per replica (STORE_SESS_MAX_REPS replicas a
 * session), all in one engine batch, whose list lives in one allocation sized
 * up front (refused with -ENOMEM past what size_t can count).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_metrics.h"
#include "store_repl.h"
#include "store_scratch.h"
#include "store_session.h"
#include "tide_log.h"

static bool
keys_ok(const char *const *keys, size_t n)
{
	if (keys == NULL || n == 0 || n > UINT32_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (keys[i] == NULL || keys[i][0] == '\0')
			return false;
	return true;
}

/* ------------------------------------------------------------------------------ put start */

/*
 * Key i of the BatchPutStart answer e (object of size bytes) as a session: every
 * memory replica large enough. 0; -EREMOTEIO none (the key is then revoked).
 */
static int
put_reps(const struct tide_mc_replica_desc_vec *v, uint64_t size, struct store_sess_rep *reps,
	 size_t *nrep)
{
	*nrep = 0;
	for (size_t k = 0; k < v->n && *nrep < STORE_SESS_MAX_REPS; k++) {
		const struct tide_mc_buffer_desc *bd = &v->v[k].u.memory;

		/* Memory replicas only (spec 3.3), each one contiguous buffer: a replica
		 * we could not write whole is one we must not end as written. */
		if (v->v[k].kind != TIDE_MC_RK_MEMORY || bd->size < size ||
		    bd->transport_endpoint.ptr == NULL)
			return -EREMOTEIO;
		reps[(*nrep)++] =
			(struct store_sess_rep){bd->transport_endpoint.ptr, bd->buffer_address};
	}
	return *nrep == v->n && *nrep > 0 ? 0 : -EREMOTEIO;
}

int
store_session_put_start(struct store_inproc *ip, const char *const *keys, const size_t *sizes,
			size_t n, const struct tide_store_rc *repl, int *rcs)
{
	struct tide_mc_replicate_config cfg;
	struct tide_store_rc sub = {0};
	struct tide_mc_resp resp;
	struct store_scratch sc;
	struct tide_mc_str *ks, *strs;
	const char **gids, **skeys;
	uint64_t *slens;
	size_t *idx, m = 0, nstrs, i, j;
	int *err, *kr;
	bool *pend;
	int ret;

	if (!keys_ok(keys, n) || sizes == NULL || rcs == NULL)
		return -EINVAL;
	if (store_repl_check(repl, n) != 0) {
		for (i = 0; i < n; i++)
			rcs[i] = -EINVAL; /* e.g. fewer group ids than keys, as the puts */
		return 0;
	}
	nstrs = store_repl_nstrs(repl, n);
	if (!store_sc_init(&sc,
			   store_sc_size(n, sizeof(*ks)) + store_sc_size(nstrs, sizeof(*strs)) +
				   store_sc_size(n, sizeof(*gids)) +
				   store_sc_size(n, sizeof(*skeys)) +
				   store_sc_size(n, sizeof(*slens)) +
				   store_sc_size(n, sizeof(*idx)) + store_sc_size(n, sizeof(*err)) +
				   store_sc_size(n, sizeof(*kr)) + store_sc_size(n, sizeof(*pend))))
		return -ENOMEM;
	ks = store_sc_take(&sc, n, sizeof(*ks));
	strs = store_sc_take(&sc, nstrs, sizeof(*strs));
	gids = store_sc_take(&sc, n, sizeof(*gids));
	skeys = store_sc_take(&sc, n, sizeof(*skeys));
	slens = store_sc_take(&sc, n, sizeof(*slens));
	idx = store_sc_take(&sc, n, sizeof(*idx));
	err = store_sc_take(&sc, n, sizeof(*err));
	kr = store_sc_take(&sc, n, sizeof(*kr)); /* rcs, copied out once the call ran */
	pend = store_sc_take(&sc, n, sizeof(*pend));
	/* Taken before the master is asked: a second start of a key (in this call or
	 * another) is refused here, and the table's bound holds before anything is
	 * reserved at the master. */
	for (i = 0; i < n; i++) {
		int r = sizes[i] == 0 ? -EINVAL : store_sess_reserve(&ip->put_sess, keys[i]);

		kr[i] = r == -ENOSPC ? -EMFILE : r;
		if (r != 0)
			continue;
		idx[m] = i;
		skeys[m] = keys[i];
		ks[m] = store_mc_str(keys[i]);
		slens[m] = sizes[i];
		if (repl != NULL && repl->group_ids != NULL)
			gids[m] = repl->group_ids[i];
		m++;
	}
	if (m == 0) {
		memcpy(rcs, kr, n * sizeof(*rcs));
		store_sc_fini(&sc);
		return 0;
	}
	/* The reserved keys' own group ids, in their order. */
	if (repl != NULL) {
		sub = *repl;
		if (repl->group_ids != NULL)
			sub.group_ids = gids;
	}
	store_repl_fill(repl != NULL ? &sub : NULL, m, strs, &cfg);
	ret = store_mc_batch_put_start(&ip->mc, ks, slens, m, &cfg, false, &resp);
	if (ret != 0) {
		for (j = 0; j < m; j++)
			store_sess_unlink(&ip->put_sess, keys[idx[j]]);
		store_sc_fini(&sc);
		return ret;
	}
	for (j = 0; j < m; j++) {
		const struct tide_mc_exp_replicas_vec *r = &resp.u.batch_put_start;
		const struct tide_mc_exp_replicas *e = j < r->n ? &r->v[j] : NULL;
		struct store_sess_rep reps[STORE_SESS_MAX_REPS];
		size_t nrep = 0;
		int rc;

		pend[j] = false;
		err[j] = 0;
		if (e == NULL) {
			rc = -EBADMSG;
		} else if (!e->ok) {
			rc = store_mc_errno(e->err); /* an existing object: -EEXIST */
		} else {
			pend[j] = true; /* reserved: kept or revoked below */
			rc = put_reps(&e->val, slens[j], reps, &nrep);
			if (rc == 0)
				rc = store_sess_fill(&ip->put_sess, skeys[j], slens[j], reps, nrep,
						     0);
			err[j] = rc;
			if (rc == 0)
				pend[j] = false; /* the session holds it now */
		}
		if (rc != 0)
			store_sess_unlink(&ip->put_sess, skeys[j]);
		kr[idx[j]] = rc;
	}
	tide_mc_resp_free(&resp);
	memcpy(rcs, kr, n * sizeof(*rcs));
	/* Reservations no session holds (no memory replica, no memory to remember
	 * them) go back now: pending with an error is what batch_finish revokes. */
	for (j = 0; j < m; j++)
		if (pend[j])
			break;
	if (j < m) {
		struct tide_mc_object_meta *metas = calloc(m, sizeof(*metas));

		if (metas != NULL)
			store_mc_batch_finish(&ip->mc, skeys, m, false, pend, err, ks, metas, idx);
		else
			TIDE_LOG(WARN, "session start: no memory to revoke failed keys; the "
				       "master's discard timeout frees them");
		free(metas);
	}
	store_sc_fini(&sc);
	return 0;
}

/* ---------------------------------------------------------------------------------- ranges */

/* Check the pieces as tide_store_batch_put_parts() does; *total their count. */
static bool
parts_ok(const struct tide_store_part *parts, const uint64_t *offs, const size_t *nparts, size_t n,
	 size_t *total)
{
	/* The pieces as every parts op checks them, and an offset for each. */
	return store_parts_ok(parts, nparts, n, STORE_PARTS_MAX, total) &&
	       (*total == 0 || offs != NULL);
}

int
store_session_ranges(struct store_inproc *ip, bool put, const char *const *keys,
		     const struct tide_store_part *parts, const uint64_t *offs,
		     const size_t *nparts, size_t n, int64_t *out)
{
	struct store_sess_tab *t = put ? &ip->put_sess : &ip->get_sess;
	struct store_xfer_eng eng = store_inproc_eng(ip);
	struct store_sess **ss = NULL;
	struct store_xfer *x = NULL;
	int64_t *res = NULL; /* out, copied once the call ran */
	size_t *owner = NULL, total = 0, cap = 0, nx = 0, i, k, j;
	uint64_t now = store_xfer_now_ms();
	int ret = 0;

	if (!keys_ok(keys, n) || out == NULL || !parts_ok(parts, offs, nparts, n, &total))
		return -EINVAL;
	ss = calloc(n, sizeof(*ss));
	res = calloc(n, sizeof(*res));
	if (ss == NULL || res == NULL) {
		free(ss);
		free(res);
		return -ENOMEM;
	}
	/* Hold every key's session and check its ranges; count the transfers. */
	for (i = 0, k = 0; i < n; k += nparts[i], i++) {
		int64_t bytes = 0;
		int err;

		ss[i] = store_sess_use(t, keys[i], now, &err);
		if (ss[i] == NULL) {
			res[i] = err;
			continue;
		}
		for (j = k; j < k + nparts[i] && err == 0; j++) {
			if (!store_sess_in_range(offs[j], parts[j].len, ss[i]->size))
				err = -ERANGE;
			bytes += (int64_t)parts[j].len; /* within size, itself an object size */
		}
		/* Stock writes nothing for a key without pieces (INVALID_REPLICA); a read
		 * of none reads 0 bytes. */
		if (err == 0 && put && nparts[i] == 0)
			err = -EREMOTEIO;
		if (err != 0) {
			store_sess_done(t, ss[i]);
			ss[i] = NULL;
			res[i] = err;
			continue;
		}
		res[i] = bytes;
		/* At most STORE_SESS_MAX_REPS transfers a piece: a list past what size_t
		 * counts could not be allocated anyway. */
		if (nparts[i] > (SIZE_MAX / sizeof(*x) - cap) / STORE_SESS_MAX_REPS) {
			ret = -ENOMEM;
			goto out;
		}
		cap += nparts[i] * (put ? ss[i]->nrep : 1);
	}
	if (cap > 0) {
		x = calloc(cap, sizeof(*x));
		owner = calloc(cap, sizeof(*owner));
		if (x == NULL || owner == NULL) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (i = 0, k = 0; i < n; k += nparts[i], i++) {
		if (ss[i] == NULL)
			continue;
		/* A get session remembers one replica; a put writes every one. */
		for (size_t r = 0; r < (put ? ss[i]->nrep : 1); r++)
			for (j = k; j < k + nparts[i]; j++) {
				if (parts[j].len == 0)
					continue; /* nothing to move */
				x[nx] = (struct store_xfer){.ep = ss[i]->rep[r].ep,
							    .raddr = ss[i]->rep[r].addr + offs[j],
							    .local =
								    (void *)(uintptr_t)parts[j].buf,
							    .len = parts[j].len};
				owner[nx++] = i;
			}
	}
	if (nx > 0) {
		uint64_t t0 = tide_mono_ns();

		/* A session's ranged moves are batch moves to stock's transfer metrics: the
		 * bytes are counted by store_xfer_run(), the call's time here. */
		(void)store_xfer_run(&eng, put ? TIDE_TE_WRITE : TIDE_TE_READ, x, nx);
		store_metrics_xfer_latency(
			eng.met, put ? STORE_METRICS_XFER_BATCH_PUT : STORE_METRICS_XFER_BATCH_GET,
			(tide_mono_ns() - t0) / 1000u);
		for (k = 0; k < nx; k++)
			if (x[k].rc != 0 && res[owner[k]] >= 0)
				res[owner[k]] = x[k].rc;
	}
	/* A read that ended after the lease: the object may have moved under it. */
	now = store_xfer_now_ms();
	for (i = 0; !put && i < n; i++)
		if (ss[i] != NULL && res[i] >= 0 && now >= ss[i]->lease_end_ms) {
			res[i] = -ESTALE;
			store_sess_unlink(t, keys[i]);
		}
	memcpy(out, res, n * sizeof(*out));
out:
	for (i = 0; i < n; i++)
		if (ss[i] != NULL)
			store_sess_done(t, ss[i]);
	free(ss);
	free(res);
	free(x);
	free(owner);
	return ret;
}

/* --------------------------------------------------------------------------------- put end */

int
store_session_put_end(struct store_inproc *ip, const char *const *keys, size_t n, bool revoke,
		      int *rcs)
{
	struct tide_mc_object_meta *metas;
	struct store_scratch sc;
	struct tide_mc_str *ks;
	size_t *idx, i;
	bool *pend, any = false;

	if (!keys_ok(keys, n) || rcs == NULL)
		return -EINVAL;
	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*metas)) + store_sc_size(n, sizeof(*ks)) +
					store_sc_size(n, sizeof(*idx)) +
					store_sc_size(n, sizeof(*pend))))
		return -ENOMEM;
	metas = store_sc_take(&sc, n, sizeof(*metas));
	ks = store_sc_take(&sc, n, sizeof(*ks));
	idx = store_sc_take(&sc, n, sizeof(*idx));
	pend = store_sc_take(&sc, n, sizeof(*pend));
	/* Seal first: no new write starts, and those in flight end before the master
	 * is told the bytes are there (or gone). */
	for (i = 0; i < n; i++) {
		rcs[i] = store_sess_seal(&ip->put_sess, keys[i]);
		pend[i] = rcs[i] == 0;
		any = any || pend[i];
		/* batch_finish revokes what is pending with an error. */
		if (pend[i] && revoke)
			rcs[i] = -ECANCELED;
	}
	if (any)
		store_mc_batch_finish(&ip->mc, keys, n, false, pend, rcs, ks, metas, idx);
	for (i = 0; i < n; i++) {
		if (!pend[i])
			continue;
		/* Ended, or revoked (asked for, or after a failed End): the session is over. */
		store_sess_unlink(&ip->put_sess, keys[i]);
		if (revoke)
			rcs[i] = 0;
	}
	store_sc_fini(&sc);
	return 0;
}

/* ------------------------------------------------------------------------------------ gets */

int
store_session_get_start(struct store_inproc *ip, const char *const *keys, size_t n, int *rcs)
{
	struct store_scratch sc;
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct store_rkey *ki;
	uint64_t t0 = store_xfer_now_ms();
	int ret;

	if (!keys_ok(keys, n) || rcs == NULL)
		return -EINVAL;
	if (!store_sc_init(&sc, store_sc_size(n, sizeof(*ks)) + store_sc_size(n, sizeof(*ki))))
		return -ENOMEM;
	ks = store_sc_take(&sc, n, sizeof(*ks));
	ki = store_sc_take(&sc, n, sizeof(*ki));
	ret = store_mc_batch_replica_list(&ip->mc, keys, n, ks, &resp);
	if (ret != 0) {
		store_sc_fini(&sc);
		return ret;
	}
	store_xfer_rkeys(&resp.u.batch_replica_list, n, ki);
	for (size_t i = 0; i < n; i++) {
		const struct tide_mc_buffer_desc *bd;
		struct store_sess_rep rep;
		uint32_t from = 0;
		int rc = ki[i].err;

		if (rc == 0) {
			bd = store_xfer_next_replica(&ki[i], &from);
			rep = (struct store_sess_rep){bd->transport_endpoint.ptr,
						      bd->buffer_address};
			/* The lease runs from the lookup; at least 1 ms so that 0 stays "none". */
			rc = store_sess_put(&ip->get_sess, keys[i], bd->size, &rep, 1,
					    t0 + (ki[i].lease_ms ? ki[i].lease_ms : 1));
			rc = rc == -ENOSPC ? -EMFILE : rc;
		}
		if (rc != 0)
			store_sess_unlink(&ip->get_sess, keys[i]); /* as stock: the old one goes */
		rcs[i] = rc;
	}
	tide_mc_resp_free(&resp);
	store_sc_fini(&sc);
	return 0;
}

int
store_session_get_end(struct store_inproc *ip, const char *const *keys, size_t n)
{
	if (!keys_ok(keys, n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		store_sess_unlink(&ip->get_sess, keys[i]);
	return 0;
}

void
store_session_close(struct store_inproc *ip)
{
	char **keys = NULL;
	size_t n = store_sess_keys(&ip->put_sess, &keys);

	if (n > 0) {
		int *rcs = calloc(n, sizeof(*rcs));

		if (rcs == NULL || n > UINT32_MAX ||
		    store_session_put_end(ip, (const char *const *)keys, n, true, rcs) != 0)
			TIDE_LOG(WARN,
				 "close: %zu put sessions not revoked; the master's discard "
				 "timeout frees them",
				 n);
		free(rcs);
	}
	free(keys);
}
