/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation leases of the master table (Tide extension, not in stock
 * Mooncake; contract in tide_mc_table.h, "Allocation leases"): a client is
 * granted free space in one segment, writes objects into it, and one commit
 * turns parts of it into COMPLETE objects, instead of PutStart + PutEnd each.
 *
 * Representation. A lease is the list of its unused pieces, sorted by
 * offset, each its own allocator allocation. Why pieces and not one
 * allocation with a bitmap of used parts: the allocator frees whole
 * allocations only (tide_seg_free(off)), and a committed object must be an
 * allocation of its own so that a later Remove, an eviction or the journal
 * replay (tide_seg_alloc_at() at the object's offset) see exactly its
 * extent, whatever happens to the rest of the lease. Committing [o, o+e)
 * out of piece [p, p+L) therefore frees the piece and re-allocates, at the
 * same places, [p, o), the object and [o+e, p+L); all or nothing.
 *
 * Accounting. Pieces are allocations like replicas and discarded buffers:
 * each is counted in its segment's used/nrep and in t->alloc_bytes by
 * mct_rep_account() with its (granule-multiple) length, so usage metrics see
 * leased space (the eviction watermark subtracts t->leased_bytes: a
 * reservation is not data to evict for), and seg->used stays the sum of
 * the extents of the segment's live allocations. t->leased_bytes is the sum
 * of all pieces.
 *
 * Bounds. At most TIDE_MC_TABLE_LEASE_MAX live leases, kept in an array of
 * pointers sorted by id (ids only grow, so a grant appends): lookup is a
 * binary search, ending one a memmove of at most 4096 pointers, the tick's
 * sweep one pass. At most TIDE_MC_TABLE_LEASE_PIECES pieces per lease, held
 * in the lease itself (about 1 KiB a lease, 4 MiB for the table at most):
 * a commit costs, per key, O(pieces) to find and split its piece, a hash
 * insert and at most four allocator operations (O(log n) each). Everything
 * runs under the table lock, which also serialises the allocators.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tide_log.h"
#include "mc_table_int.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Index of lease id in t->leases, or t->nleases if none: binary search (sorted by id). */
static size_t
lease_idx(const struct tide_mc_table *t, uint64_t id)
{
	size_t lo = 0, hi = t->nleases;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->leases[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nleases && t->leases[lo]->id == id ? lo : t->nleases;
}

/* Why a lease ended. */
enum lease_why {
	LEASE_LIVE = 0,
	LEASE_EXPIRED,
	LEASE_CLIENT_EXPIRED,
	LEASE_SEG_UNMOUNTING,
	LEASE_SEG_UNMOUNTED,
	LEASE_RELEASED,
	LEASE_USED_UP,
};

/*
 * keep: the holder may still be writing into the lease: its deadline passed (the client stops
 * placing 15 s before it, but a write placed then may still be moving), or its client missed
 * its pings (it may be alive and cut off from the master only). Its pieces are kept as
 * discarded buffers until TIDE_MC_TABLE_LEASE_GRACE_MS past the deadline, as a stale
 * PutStart's buffers are, so no other object gets those bytes meanwhile. The others end
 * with nothing in flight (the client said so, or the segment goes with its data).
 * info: logged at INFO (a client held space it neither used nor released), else DEBUG.
 */
static const struct {
	const char *name;
	bool keep, info;
} lease_whys[] = {
	[LEASE_EXPIRED] = {"expired", true, true},
	[LEASE_CLIENT_EXPIRED] = {"client expired", true, false},
	[LEASE_SEG_UNMOUNTING] = {"segment unmounting", false, false},
	[LEASE_SEG_UNMOUNTED] = {"segment unmounted", false, false},
	[LEASE_RELEASED] = {"released", false, false},
	[LEASE_USED_UP] = {"used up", false, false},
};

/* Take every piece out of l: discarded until `until` if keep, else freed. */
static void
lease_drop_pieces(struct tide_mc_table *t, struct mct_lease *l, bool keep, uint64_t until)
{
	for (uint32_t k = 0; k < l->npiece; k++) {
		struct mct_rep r = {.off = l->piece[k].off, .seg = l->seg};

		if (keep)
			mct_discard(t, &r, l->piece[k].len, until, MCT_DISC_LEASE);
		else
			mct_rep_free(t, &r, l->piece[k].len);
		t->leased_bytes -= l->piece[k].len;
	}
	l->npiece = 0;
}

/* End l: give its pieces back (or keep them, above), log why, free it. The caller takes it
 * out of t->leases. */
static void
lease_end(struct tide_mc_table *t, struct mct_lease *l, enum lease_why why)
{
	const struct mct_seg *s = t->segs[l->seg];
	enum tide_log_level lvl = lease_whys[why].info ? TIDE_LOG_INFO : TIDE_LOG_DEBUG;
	uint64_t unused = 0;

	if (tide_log_enabled(lvl)) {
		for (uint32_t k = 0; k < l->npiece; k++)
			unused += l->piece[k].len;
		tide_log_write(lvl, TIDE_LOG_COMPONENT,
			       "lease %llu of client %016llx%016llx in segment %.*s ended (%s): "
			       "%llu of %llu bytes unused, %s",
			       (unsigned long long)l->id, (unsigned long long)l->client.first,
			       (unsigned long long)l->client.second, (int)s->name_len, s->name,
			       lease_whys[why].name, (unsigned long long)unused,
			       (unsigned long long)l->size,
			       lease_whys[why].keep ? "kept as discarded buffers" : "freed");
	}
	lease_drop_pieces(t, l, lease_whys[why].keep,
			  l->deadline_ms + TIDE_MC_TABLE_LEASE_GRACE_MS);
	free(l);
}

/* End the lease at index i and close the gap (keeps the id order). */
static void
lease_end_at(struct tide_mc_table *t, size_t i, enum lease_why why)
{
	lease_end(t, t->leases[i], why);
	memmove(&t->leases[i], &t->leases[i + 1], (t->nleases - i - 1) * sizeof(t->leases[0]));
	t->nleases--;
}

/* Why a lease has ended by now, or LEASE_LIVE. */
static enum lease_why
lease_over(const struct tide_mc_table *t, const struct mct_lease *l, uint64_t now)
{
	if (now >= l->deadline_ms)
		return LEASE_EXPIRED;
	/* A draining segment takes no new data: objects put there would vanish with it. */
	if (t->segs[l->seg]->draining)
		return LEASE_SEG_UNMOUNTING;
	return LEASE_LIVE;
}

/*
 * The caller's live lease id, as index *i. LEASE_EXPIRED if unknown or
 * another client's (left alone), or ended by now (ended here, so the answer
 * does not depend on when the tick runs).
 */
static int
lease_get(struct tide_mc_table *t, const struct tide_mc_uuid *client, uint64_t id, uint64_t now,
	  size_t *i)
{
	enum lease_why why;

	*i = lease_idx(t, id);
	if (*i == t->nleases || !mct_uuid_eq(&t->leases[*i]->client, client))
		return TIDE_MC_EC_LEASE_EXPIRED;
	why = lease_over(t, t->leases[*i], now);
	if (why != LEASE_LIVE) {
		lease_end_at(t, *i, why);
		return TIDE_MC_EC_LEASE_EXPIRED;
	}
	return 0;
}

/* End, in one pass, every lease pred gives a reason for. */
static void
leases_sweep(struct tide_mc_table *t,
	     enum lease_why (*pred)(struct tide_mc_table *, const struct mct_lease *, const void *),
	     const void *arg)
{
	size_t w = 0;

	for (size_t i = 0; i < t->nleases; i++) {
		struct mct_lease *l = t->leases[i];
		enum lease_why why = pred(t, l, arg);

		if (why != LEASE_LIVE)
			lease_end(t, l, why);
		else
			t->leases[w++] = l;
	}
	t->nleases = w;
}

/* ------------------------------------------------------------------------------------------ */
/* Grant                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static int
grant_locked(struct tide_mc_table *t, const struct tide_mc_uuid *client, uint64_t size,
	     const struct tide_mc_replicate_config *cfg, uint64_t now,
	     struct tide_mc_table_arena *a, struct tide_mc_lease *out)
{
	static char tcp[] = "tcp";
	struct mct_lease *l;
	struct mct_seg *s;
	struct mct_rep r;
	uint64_t e;

	if (!size || cfg->replica_num != 1 || cfg->nof_replica_num || cfg->dfs_replica_num ||
	    (cfg->group_ids.has && cfg->group_ids.val.n != 1))
		return TIDE_MC_EC_INVALID_PARAMS;
	if (t->nleases >= TIDE_MC_TABLE_LEASE_MAX) {
		TIDE_LOG_RATELIMIT(WARN, 10, "lease grant: %u leases live, the table's bound",
				   TIDE_MC_TABLE_LEASE_MAX);
		return TIDE_MC_EC_NO_AVAILABLE_HANDLE;
	}
	/* Room for the pointer first, so nothing has to be undone for it. */
	if (t->nleases == t->lease_cap) {
		size_t nc = t->lease_cap ? t->lease_cap * 2 : 16;
		struct mct_lease **nl;

		if (nc > TIDE_MC_TABLE_LEASE_MAX)
			nc = TIDE_MC_TABLE_LEASE_MAX;
		nl = realloc(t->leases, nc * sizeof(*nl));
		if (!nl)
			return TIDE_MC_EC_INTERNAL_ERROR;
		t->leases = nl;
		t->lease_cap = nc;
	}
	l = malloc(sizeof(*l));
	if (!l)
		return TIDE_MC_EC_INTERNAL_ERROR;
	/* PutStart's placement of one replica: preferred names, then a random start; at most
	 * a share of the segment chosen (the client uses what it is given). */
	if (!mct_place_one(t, &size, t->o.lease_seg_share, cfg, &r)) {
		free(l);
		/* No eviction round asked for: a lease wants a large contiguous run, and
		 * the client's put falls back to PutStart, which asks if it fails too. */
		return TIDE_MC_EC_NO_AVAILABLE_HANDLE;
	}
	s = t->segs[r.seg];
	e = mct_extent(t, size);
	memset(out, 0, sizeof(*out));
	if (mct_arena_str(a, s->endpoint, s->endpoint_len, &out->buf.transport_endpoint) ||
	    (s->protocol_len ? mct_arena_str(a, s->protocol, s->protocol_len, &out->buf.protocol)
			     : mct_arena_str(a, tcp, 3, &out->buf.protocol))) {
		mct_rep_free(t, &r, size);
		free(l);
		return TIDE_MC_EC_INTERNAL_ERROR;
	}
	memset(l, 0, sizeof(*l));
	l->id = t->next_lease_id++;
	l->deadline_ms = now + t->o.lease_ttl_ms;
	l->client = *client;
	l->start = r.off;
	l->size = e;
	l->seg = r.seg;
	l->npiece = 1;
	l->piece[0] = (struct mct_piece){r.off, e};
	t->leases[t->nleases++] = l; /* the largest id: the array stays sorted */
	t->leased_bytes += e;
	out->id = l->id;
	out->ttl_ms = t->o.lease_ttl_ms;
	out->granule = t->o.seg_granule;
	out->buf.size = e;
	out->buf.buffer_address = s->base + r.off;
	return 0;
}

int
tide_mc_table_lease_grant(struct tide_mc_table *t, const struct tide_mc_uuid *client, uint64_t size,
			  const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			  struct tide_mc_table_arena *a, struct tide_mc_lease *out)
{
	struct tide_mc_replicate_config dflt;
	int rc;

	if (!t || !client || !a || !out)
		return TIDE_MC_EC_INVALID_PARAMS;
	if (!cfg) {
		memset(&dflt, 0, sizeof(dflt));
		dflt.replica_num = 1;
		cfg = &dflt;
	}
	mct_lock(t);
	rc = mct_count(t, TIDE_MC_TABLE_OP_LEASE_GRANT,
		       grant_locked(t, client, size, cfg, now_ms, a, out));
	mct_unlock(t);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Commit                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/*
 * Put the piece's allocation back after a failed or undone carve. It cannot
 * fail in practice (the block nodes the carve's first free released are
 * free again); if it does, the piece is dropped from the lease and from the
 * accounting (its space is free in the allocator) and *lost is set.
 */
static void
piece_restore(struct tide_mc_table *t, struct mct_lease *l, uint32_t k, bool *lost)
{
	struct mct_seg *s = t->segs[l->seg];
	const struct mct_piece *pc = &l->piece[k];
	int rc = tide_seg_alloc_at(s->alloc, pc->off, pc->len);

	*lost = rc != 0;
	if (!rc)
		return;
	TIDE_LOG(ERR,
		 "segment %.*s: lease %llu: offset %llu (%llu bytes) cannot be reserved "
		 "again (%d): dropped from the lease",
		 (int)s->name_len, s->name, (unsigned long long)l->id, (unsigned long long)pc->off,
		 (unsigned long long)pc->len, rc);
	mct_rep_account(t, s, pc->len, -1);
	t->leased_bytes -= pc->len;
	memmove(&l->piece[k], &l->piece[k + 1], (l->npiece - k - 1) * sizeof(l->piece[0]));
	l->npiece--;
}

/*
 * Replace piece k's allocation by three: [p, at) if lo, the object's
 * [at, at + size rounded) and the rest if hi. All or nothing: on failure
 * (-ENOMEM: the segment's block table is full) the piece is as before.
 * Allocator only; the caller accounts.
 */
static int
carve(struct tide_mc_table *t, struct mct_lease *l, uint32_t k, uint64_t at, uint64_t size,
      uint64_t lo, uint64_t hi)
{
	struct tide_seg *sa = t->segs[l->seg]->alloc;
	const struct mct_piece pc = l->piece[k];
	uint64_t rest = pc.off + pc.len - hi;
	bool lost;
	int rc = tide_seg_free(sa, pc.off);

	if (rc) /* the piece is ours: cannot happen */
		return rc;
	rc = tide_seg_alloc_at(sa, at, size);
	if (!rc && lo) {
		rc = tide_seg_alloc_at(sa, pc.off, lo);
		if (rc)
			tide_seg_free(sa, at);
	}
	if (!rc && hi) {
		rc = tide_seg_alloc_at(sa, rest, hi);
		if (rc) {
			tide_seg_free(sa, at);
			if (lo)
				tide_seg_free(sa, pc.off);
		}
	}
	if (rc)
		piece_restore(t, l, k, &lost);
	return rc;
}

/* Undo a successful carve (the object could not be inserted). */
static void
uncarve(struct tide_mc_table *t, struct mct_lease *l, uint32_t k, uint64_t at, uint64_t lo,
	uint64_t hi)
{
	struct tide_seg *sa = t->segs[l->seg]->alloc;
	const struct mct_piece *pc = &l->piece[k];
	bool lost;

	tide_seg_free(sa, at);
	if (lo)
		tide_seg_free(sa, pc->off);
	if (hi)
		tide_seg_free(sa, pc->off + pc->len - hi);
	piece_restore(t, l, k, &lost);
}

/* What a commit applies to each object it creates. */
struct commit_cfg {
	struct mct_pin_req pin;
	bool hard;
	uint32_t writer; /* hash of the client's UUID, as PutEnd leaves in aux */
};

/* One key of a commit; nothing changes unless it returns 0. */
static int
commit_one(struct tide_mc_table *t, struct mct_lease *l, const struct commit_cfg *cc,
	   const struct tide_mc_str *key, uint64_t off, uint64_t size, uint64_t now)
{
	struct mct_seg *s = t->segs[l->seg];
	uint64_t at, e, lo, hi;
	struct mct_obj *o, *stale;
	struct mct_piece pc;
	uint32_t k, grow;

	if (!key || !key->len || !key->ptr || key->len > UINT32_MAX || !size)
		return TIDE_MC_EC_INVALID_PARAMS;
	if (off & (t->o.seg_granule - 1) || off >= l->size || size > l->size - off)
		return TIDE_MC_EC_INVALID_PARAMS;
	/* l->size and off are granule multiples, so the rounded extent fits too. */
	e = mct_extent(t, size);
	at = l->start + off;
	for (k = 0; k < l->npiece; k++)
		if (l->piece[k].off <= at && at + e <= l->piece[k].off + l->piece[k].len)
			break;
	if (k == l->npiece) /* beyond every unused part, or over a committed one */
		return TIDE_MC_EC_INVALID_PARAMS;
	/* PutStart's rule: else the commit would answer "exists" for an abandoned put's key,
	 * one nobody can read, and the client count it as stored. */
	stale = mct_obj_find(t, key->ptr, key->len);
	if (stale && mct_key_taken(t, stale, now))
		return TIDE_MC_EC_OBJECT_ALREADY_EXISTS;
	pc = l->piece[k];
	lo = at - pc.off;
	hi = pc.off + pc.len - (at + e);
	grow = (lo != 0) + (hi != 0); /* pieces replacing piece k */
	if (l->npiece - 1 + grow > TIDE_MC_TABLE_LEASE_PIECES)
		return TIDE_MC_EC_NO_AVAILABLE_HANDLE;
	o = mct_obj_new(key, size, 1);
	if (!o)
		return TIDE_MC_EC_INTERNAL_ERROR;
	if (carve(t, l, k, at, size, lo, hi) != 0) {
		TIDE_LOG_RATELIMIT(WARN, 10,
				   "segment %.*s: lease %llu: block table full, commit of %.*s "
				   "refused",
				   (int)s->name_len, s->name, (unsigned long long)l->id,
				   (int)(key->len < 200 ? key->len : 200), key->ptr);
		free(o);
		return TIDE_MC_EC_INTERNAL_ERROR;
	}
	/* COMPLETE as PutEnd leaves an object: writer hash in aux, a 0 ms read lease,
	 * no checksum, unread (pin_unread), pins as PutStart + PutEnd set them. */
	o->rep[0] = (struct mct_rep){t->next_rep_id++, at, l->seg, 0};
	o->aux = cc->writer;
	o->lease_ms = now;
	if (cc->hard)
		o->flags |= MCT_OF_HARD_PIN;
	if (cc->pin.action == TIDE_MC_SOFT_PIN_ENABLE) {
		o->flags |= MCT_OF_SOFT_PIN;
		o->soft_ms = now + cc->pin.ttl;
	}
	/* Last, once nothing else can fail but the insert (which leaves the abandoned put
	 * gone, as any later PutStart would). */
	if (stale)
		mct_take_over(t, stale, key, "lease commit", now);
	if (mct_obj_insert(t, o) != 0) { /* pins and value bytes are accounted on success only */
		uncarve(t, l, k, at, lo, hi);
		free(o);
		return TIDE_MC_EC_INTERNAL_ERROR;
	}
	/* seg->used and nrep: one allocation of pc.len became up to three of the same total. */
	mct_rep_account(t, s, pc.len, -1);
	mct_rep_account(t, s, size, +1);
	if (lo)
		mct_rep_account(t, s, lo, +1);
	if (hi)
		mct_rep_account(t, s, hi, +1);
	t->leased_bytes -= e;
	memmove(&l->piece[k + grow], &l->piece[k + 1], (l->npiece - k - 1) * sizeof(l->piece[0]));
	if (lo)
		l->piece[k++] = (struct mct_piece){pc.off, lo};
	if (hi)
		l->piece[k] = (struct mct_piece){at + e, hi};
	l->npiece = l->npiece - 1 + grow;
	mct_j_obj_set(t, o, now);
	return 0;
}

int
tide_mc_table_lease_commit(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			   uint64_t lease_id, const struct tide_mc_str *keys,
			   const uint64_t *offsets, const uint64_t *sizes, size_t n,
			   const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			   struct tide_mc_exp_void *out)
{
	struct commit_cfg cc = {.pin = {TIDE_MC_SOFT_PIN_PRESERVE, 0}};
	struct mct_lease *l;
	size_t i, done = 0;
	int rc = 0;

	if (!t || !client || (n && (!keys || !offsets || !sizes || !out)))
		return TIDE_MC_EC_INVALID_PARAMS;
	if (cfg && ((cfg->group_ids.has && cfg->group_ids.val.n != n) ||
		    mct_pin_parse(t, cfg, &cc.pin) != 0))
		rc = TIDE_MC_EC_INVALID_PARAMS;
	cc.hard = cfg && cfg->with_hard_pin;
	cc.writer = mct_uuid_hash32(client);
	mct_lock(t);
	if (!rc)
		rc = lease_get(t, client, lease_id, now_ms, &i);
	if (rc) {
		/* Whole-call failure: every key carries it too (and counts as a failure). */
		for (size_t j = 0; j < n; j++) {
			out[j].ok = false;
			out[j].err = mct_count(t, TIDE_MC_TABLE_OP_LEASE_COMMIT, rc);
		}
		mct_unlock(t);
		return rc;
	}
	l = t->leases[i];
	for (size_t j = 0; j < n; j++) {
		int r = mct_count(t, TIDE_MC_TABLE_OP_LEASE_COMMIT,
				  commit_one(t, l, &cc, &keys[j], offsets[j], sizes[j], now_ms));

		out[j].ok = r == 0;
		out[j].err = r;
		done += r == 0;
	}
	if (done)
		l->deadline_ms = now_ms + t->o.lease_ttl_ms;
	/* Used up: nothing left to commit or release, so end it now and free its slot. */
	if (!l->npiece)
		lease_end_at(t, i, LEASE_USED_UP);
	mct_unlock(t);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Release, expiry, unmount, destroy                                                           */
/* ------------------------------------------------------------------------------------------ */

int
tide_mc_table_lease_release(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			    uint64_t lease_id, uint64_t now_ms)
{
	size_t i;
	int rc;

	if (!t || !client)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	rc = lease_get(t, client, lease_id, now_ms, &i);
	if (!rc)
		lease_end_at(t, i, LEASE_RELEASED);
	mct_count(t, TIDE_MC_TABLE_OP_LEASE_RELEASE, rc);
	mct_unlock(t);
	return rc;
}

static enum lease_why
over_pred(struct tide_mc_table *t, const struct mct_lease *l, const void *arg)
{
	return lease_over(t, l, *(const uint64_t *)arg);
}

void
mct_leases_expire(struct tide_mc_table *t, uint64_t now)
{
	if (t->nleases)
		leases_sweep(t, over_pred, &now);
}

static enum lease_why
seg_pred(struct tide_mc_table *t, const struct mct_lease *l, const void *arg)
{
	(void)t;
	return l->seg == *(const uint32_t *)arg ? LEASE_SEG_UNMOUNTED : LEASE_LIVE;
}

/*
 * Before segment idx is unmounted. The pieces are freed in the allocator,
 * not just forgotten as the segment's discarded buffers are: if the unmount
 * then stops short (the segment stays, draining, until the next tick), the
 * allocator and the accounting still agree.
 */
void
mct_lease_drop_seg(struct tide_mc_table *t, uint32_t idx)
{
	if (t->nleases)
		leases_sweep(t, seg_pred, &idx);
}

static enum lease_why
client_pred(struct tide_mc_table *t, const struct mct_lease *l, const void *arg)
{
	(void)t;
	return mct_uuid_eq(&l->client, arg) ? LEASE_CLIENT_EXPIRED : LEASE_LIVE;
}

/* A dead client's leases: it will commit nothing more (as its puts are reclaimed). */
void
mct_lease_drop_client(struct tide_mc_table *t, const struct tide_mc_uuid *client)
{
	if (t->nleases)
		leases_sweep(t, client_pred, client);
}

/* Destroy: the pieces go with the segments' allocators; only the leases' memory is ours. */
void
mct_leases_free(struct tide_mc_table *t)
{
	for (size_t i = 0; i < t->nleases; i++)
		free(t->leases[i]);
	free(t->leases);
	t->leases = NULL;
	t->nleases = 0;
	t->lease_cap = 0;
}
