/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The object table's journal: every committed change as a self-contained
 * record, so another master can rebuild the table (store/master/ha keeps
 * them in etcd). Contract in tide_mc_table.h.
 *
 * Record layout (little-endian, no padding), first byte the type:
 *   SEG_ADD  1: id(16) client(16) base(8) size(8) then three strings, each
 *               u32 length + bytes: name, te_endpoint, protocol
 *   SEG_DEL  2: id(16)
 *   OBJ_SET  3: size(8) checksum(8) soft_pin_left_ms(8) writer_hash(4)
 *               flags(1) nrep(1) key_len(4) key, then nrep x (segment id(16)
 *               offset in the segment's allocator(8))
 *   OBJ_DEL  4: key_len(4) key
 * A UUID is first(8) second(8). Offsets are allocator offsets (address -
 * base), so a record stays true for a segment mounted at the same base.
 * Why records and not the RPCs: placement is random and time-dependent, so
 * only the outcome (which segment, which offset) can be replayed exactly.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_table_int.h"
#include "tide_log.h"

enum {
	J_SEG_ADD = 1,
	J_SEG_DEL = 2,
	J_OBJ_SET = 3,
	J_OBJ_DEL = 4,
};

/* Journaled object flags (not the table's internal ones). */
#define JF_HARD_PIN 0x01
#define JF_SOFT_PIN 0x02
#define JF_CSUM     0x04

/* Bytes of a replica entry and of OBJ_SET's fixed part. */
#define J_REP_LEN     24u
#define J_OBJ_SET_FIX (1u + 8 + 8 + 8 + 4 + 1 + 1 + 4)

/* ---- encoding ---------------------------------------------------------------------------- */

struct jw {
	uint8_t *p;
};

static void
w_u8(struct jw *w, uint8_t v)
{
	*w->p++ = v;
}

static void
w_u32(struct jw *w, uint32_t v)
{
	v = htole32(v);
	memcpy(w->p, &v, 4);
	w->p += 4;
}

static void
w_u64(struct jw *w, uint64_t v)
{
	v = htole64(v);
	memcpy(w->p, &v, 8);
	w->p += 8;
}

static void
w_uuid(struct jw *w, const struct tide_mc_uuid *u)
{
	w_u64(w, u->first);
	w_u64(w, u->second);
}

static void
w_bytes(struct jw *w, const void *p, size_t n)
{
	w_u32(w, (uint32_t)n);
	if (n)
		memcpy(w->p, p, n);
	w->p += n;
}

/* Scratch of at least n bytes, or NULL (out of memory). */
static uint8_t *
jbuf(struct tide_mc_table *t, size_t n)
{
	if (n > t->jcap) {
		size_t cap = n < 4096 ? 4096 : n;
		uint8_t *p = realloc(t->jbuf, cap);

		if (!p)
			return NULL;
		t->jbuf = p;
		t->jcap = cap;
	}
	return t->jbuf;
}

static size_t
seg_add_len(const struct mct_seg *s)
{
	return 1 + 16 + 16 + 8 + 8 + 12 + s->name_len + s->endpoint_len + s->protocol_len;
}

static size_t
seg_add_enc(const struct mct_seg *s, uint8_t *p)
{
	struct jw w = {p};

	w_u8(&w, J_SEG_ADD);
	w_uuid(&w, &s->id);
	w_uuid(&w, &s->client);
	w_u64(&w, s->base);
	w_u64(&w, s->size);
	w_bytes(&w, s->name, s->name_len);
	w_bytes(&w, s->endpoint, s->endpoint_len);
	w_bytes(&w, s->protocol, s->protocol_len);
	return (size_t)(w.p - p);
}

static size_t
obj_set_len(const struct mct_obj *o)
{
	return J_OBJ_SET_FIX + o->key_len + (size_t)o->nrep * J_REP_LEN;
}

static size_t
obj_set_enc(const struct tide_mc_table *t, const struct mct_obj *o, uint64_t now, uint8_t *p)
{
	struct jw w = {p};
	uint8_t f = 0;

	if (o->flags & MCT_OF_HARD_PIN)
		f |= JF_HARD_PIN;
	if ((o->flags & MCT_OF_SOFT_PIN) && o->soft_ms > now)
		f |= JF_SOFT_PIN;
	if (o->flags & MCT_OF_HAS_CSUM)
		f |= JF_CSUM;
	w_u8(&w, J_OBJ_SET);
	w_u64(&w, o->size);
	w_u64(&w, (f & JF_CSUM) ? o->csum : 0);
	w_u64(&w, (f & JF_SOFT_PIN) ? o->soft_ms - now : 0);
	w_u32(&w, o->aux); /* COMPLETE: the writer's hash (ILLEGAL_CLIENT on a late PutEnd) */
	w_u8(&w, f);
	w_u8(&w, o->nrep);
	w_bytes(&w, mct_key_c(o), o->key_len);
	for (unsigned i = 0; i < o->nrep; i++) {
		w_uuid(&w, &t->segs[o->rep[i].seg]->id);
		w_u64(&w, o->rep[i].off);
	}
	return (size_t)(w.p - p);
}

/* Number the record and hand it over; a record that cannot be built goes as NULL. */
static void
emit(struct tide_mc_table *t, const uint8_t *rec, size_t len)
{
	uint64_t seq = t->jseq + 1;

	__atomic_store_n(&t->jseq, seq, __ATOMIC_RELEASE);
	if (!rec)
		TIDE_LOG(ERR, "journal record %llu: out of memory, the journal is broken",
			 (unsigned long long)seq);
	t->jfn(t->jctx, seq, rec, rec ? len : 0);
}

void
mct_j_seg_add(struct tide_mc_table *t, const struct mct_seg *s)
{
	uint8_t *p;

	if (!t->jfn)
		return;
	p = jbuf(t, seg_add_len(s));
	emit(t, p, p ? seg_add_enc(s, p) : 0);
}

void
mct_j_seg_del(struct tide_mc_table *t, const struct mct_seg *s)
{
	uint8_t rec[17];
	struct jw w = {rec};

	if (!t->jfn)
		return;
	w_u8(&w, J_SEG_DEL);
	w_uuid(&w, &s->id);
	emit(t, rec, sizeof(rec));
	__atomic_store_n(&t->jseq_free, t->jseq, __ATOMIC_RELEASE);
}

void
mct_j_obj_set(struct tide_mc_table *t, const struct mct_obj *o, uint64_t now)
{
	uint8_t *p;

	if (!t->jfn)
		return;
	p = jbuf(t, obj_set_len(o));
	emit(t, p, p ? obj_set_enc(t, o, now, p) : 0);
}

void
mct_j_obj_del(struct tide_mc_table *t, const struct mct_obj *o)
{
	uint8_t *p;
	struct jw w;

	if (!t->jfn)
		return;
	p = jbuf(t, 5 + (size_t)o->key_len);
	if (p) {
		w.p = p;
		w_u8(&w, J_OBJ_DEL);
		w_bytes(&w, mct_key_c(o), o->key_len);
	}
	emit(t, p, p ? 5 + (size_t)o->key_len : 0);
	__atomic_store_n(&t->jseq_free, t->jseq, __ATOMIC_RELEASE);
}

int
tide_mc_table_journal_set(struct tide_mc_table *t, tide_mc_table_journal_fn fn, void *ctx,
			  uint64_t last_seq)
{
	if (!t)
		return -EINVAL;
	mct_lock(t);
	t->jfn = fn;
	t->jctx = ctx;
	__atomic_store_n(&t->jseq, last_seq, __ATOMIC_RELEASE);
	__atomic_store_n(&t->jseq_free, last_seq, __ATOMIC_RELEASE);
	mct_unlock(t);
	return 0;
}

uint64_t
tide_mc_table_journal_seq(const struct tide_mc_table *t)
{
	return t ? __atomic_load_n(&t->jseq, __ATOMIC_ACQUIRE) : 0;
}

uint64_t
tide_mc_table_journal_free_seq(const struct tide_mc_table *t)
{
	return t ? __atomic_load_n(&t->jseq_free, __ATOMIC_ACQUIRE) : 0;
}

/* ---- decoding and replay ----------------------------------------------------------------- */

struct jr {
	const uint8_t *p, *end;
	bool bad;
};

static bool
r_need(struct jr *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return false;
	}
	return true;
}

static uint8_t
r_u8(struct jr *r)
{
	return r_need(r, 1) ? *r->p++ : 0;
}

static uint32_t
r_u32(struct jr *r)
{
	uint32_t v = 0;

	if (r_need(r, 4)) {
		memcpy(&v, r->p, 4);
		r->p += 4;
	}
	return le32toh(v);
}

static uint64_t
r_u64(struct jr *r)
{
	uint64_t v = 0;

	if (r_need(r, 8)) {
		memcpy(&v, r->p, 8);
		r->p += 8;
	}
	return le64toh(v);
}

static void
r_uuid(struct jr *r, struct tide_mc_uuid *u)
{
	u->first = r_u64(r);
	u->second = r_u64(r);
}

static void
r_str(struct jr *r, struct tide_mc_str *s)
{
	uint32_t n = r_u32(r);

	s->ptr = NULL;
	s->len = 0;
	if (r_need(r, n)) {
		s->ptr = (char *)(uintptr_t)r->p;
		s->len = n;
		r->p += n;
	}
}

static int
apply_seg_add(struct tide_mc_table *t, struct jr *r, uint64_t now)
{
	struct tide_mc_segment g;
	struct tide_mc_uuid client;
	int32_t idx;

	memset(&g, 0, sizeof(g));
	r_uuid(r, &g.id);
	r_uuid(r, &client);
	g.base = r_u64(r);
	g.size = r_u64(r);
	r_str(r, &g.name);
	r_str(r, &g.te_endpoint);
	r_str(r, &g.protocol);
	if (r->bad || r->p != r->end || !g.base || g.size < t->o.seg_granule ||
	    g.size > TIDE_SEG_SIZE_MAX || g.base + g.size < g.base)
		return -EBADMSG;
	idx = mct_seg_find(t, &g.id);
	if (idx >= 0) {
		const struct mct_seg *s = t->segs[idx];

		return s->base == g.base && s->size == g.size && s->client.first == client.first &&
				       s->client.second == client.second
			       ? 0
			       : -EEXIST;
	}
	if (mct_client_add(t, &client, now) != 0 || mct_seg_add(t, &g, &client) != 0)
		return -ENOMEM;
	return 0;
}

static int
apply_obj_set(struct tide_mc_table *t, struct jr *r, uint64_t now)
{
	struct tide_mc_uuid seg_id[TIDE_MC_TABLE_MAX_REPLICAS];
	uint64_t off[TIDE_MC_TABLE_MAX_REPLICAS];
	int32_t idx[TIDE_MC_TABLE_MAX_REPLICAS];
	uint64_t size, csum, pin_left;
	struct tide_mc_str key;
	struct mct_obj *o;
	uint32_t writer;
	unsigned i, nrep;
	uint8_t f;
	int rc = 0;

	size = r_u64(r);
	csum = r_u64(r);
	pin_left = r_u64(r);
	writer = r_u32(r);
	f = r_u8(r);
	nrep = r_u8(r);
	r_str(r, &key);
	if (r->bad || !size || !key.len || nrep == 0 || nrep > TIDE_MC_TABLE_MAX_REPLICAS ||
	    (f & ~(JF_HARD_PIN | JF_SOFT_PIN | JF_CSUM)))
		return -EBADMSG;
	for (i = 0; i < nrep; i++) {
		r_uuid(r, &seg_id[i]);
		off[i] = r_u64(r);
	}
	if (r->bad || r->p != r->end)
		return -EBADMSG;
	if (mct_obj_find(t, key.ptr, key.len))
		return -EEXIST; /* a log always erases a key before it sets it again */
	for (i = 0; i < nrep; i++) {
		idx[i] = mct_seg_find(t, &seg_id[i]);
		if (idx[i] < 0) {
			rc = -ENOENT;
			break;
		}
		rc = tide_seg_alloc_at(t->segs[idx[i]]->alloc, off[i], size);
		if (rc != 0) {
			rc = rc == -EINVAL ? -EBADMSG : rc;
			break;
		}
	}
	o = rc == 0 ? mct_obj_new(&key, size, nrep) : NULL;
	if (rc == 0 && !o)
		rc = -ENOMEM;
	if (rc != 0) {
		while (i-- > 0)
			tide_seg_free(t->segs[idx[i]]->alloc, off[i]);
		return rc;
	}
	for (i = 0; i < nrep; i++) {
		o->rep[i] = (struct mct_rep){
			.id = t->next_rep_id++, .off = off[i], .seg = (uint32_t)idx[i]};
		mct_rep_account(t, t->segs[idx[i]], size, +1);
	}
	o->aux = writer;
	o->lease_ms = now + t->o.default_kv_lease_ttl_ms;
	if (f & JF_HARD_PIN)
		o->flags |= MCT_OF_HARD_PIN;
	if (f & JF_SOFT_PIN) {
		o->flags |= MCT_OF_SOFT_PIN;
		o->soft_ms = now + pin_left;
	}
	if (f & JF_CSUM) {
		o->flags |= MCT_OF_HAS_CSUM;
		o->csum = csum;
	}
	rc = mct_obj_insert(t, o);
	if (rc != 0) {
		for (i = 0; i < nrep; i++)
			mct_rep_free(t, &o->rep[i], size);
		free(o);
	}
	return rc;
}

int
tide_mc_table_journal_apply(struct tide_mc_table *t, const void *rec, size_t len, uint64_t now_ms)
{
	struct jr r = {rec, (const uint8_t *)rec + len, false};
	struct tide_mc_uuid id;
	struct tide_mc_str key;
	struct mct_obj *o;
	int32_t idx;
	int rc;

	if (!t || !rec || !len)
		return -EBADMSG;
	mct_lock(t);
	if (t->jfn) {
		/* Replaying into a journaled table would journal the records again. */
		mct_unlock(t);
		return -EBUSY;
	}
	switch (r_u8(&r)) {
	case J_SEG_ADD:
		rc = apply_seg_add(t, &r, now_ms);
		break;
	case J_SEG_DEL:
		r_uuid(&r, &id);
		rc = r.bad || r.p != r.end ? -EBADMSG : 0;
		idx = rc == 0 ? mct_seg_find(t, &id) : -1;
		if (idx >= 0)
			mct_seg_unmount(t, (uint32_t)idx);
		break;
	case J_OBJ_SET:
		rc = apply_obj_set(t, &r, now_ms);
		break;
	case J_OBJ_DEL:
		r_str(&r, &key);
		rc = r.bad || r.p != r.end || !key.len ? -EBADMSG : 0;
		o = rc == 0 ? mct_obj_find(t, key.ptr, key.len) : NULL;
		if (o)
			mct_obj_erase(t, o, MCT_FREE_NOW, 0);
		break;
	default:
		rc = -EBADMSG;
	}
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_journal_snapshot(struct tide_mc_table *t, tide_mc_table_snapshot_fn fn, void *ctx,
			       uint64_t now_ms, uint64_t *seq)
{
	uint8_t *p;
	int rc = 0;

	if (!t || !fn || !seq)
		return -EINVAL;
	mct_lock(t);
	for (uint32_t i = 0; i < t->nseg_slots && rc == 0; i++) {
		const struct mct_seg *s = t->segs[i];

		if (!s)
			continue;
		p = jbuf(t, seg_add_len(s));
		rc = p ? fn(ctx, p, seg_add_enc(s, p)) : -ENOMEM;
	}
	for (uint64_t i = 0; i <= t->mask && rc == 0; i++) {
		const struct mct_obj *o = t->ctrl[i] ? t->slot[i] : NULL;

		if (!o || (o->flags & MCT_OF_PROCESSING) || !o->nrep)
			continue;
		p = jbuf(t, obj_set_len(o));
		rc = p ? fn(ctx, p, obj_set_enc(t, o, now_ms, p)) : -ENOMEM;
	}
	*seq = t->jseq;
	mct_unlock(t);
	return rc;
}
