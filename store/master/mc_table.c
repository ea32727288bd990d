/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object table and segment manager of the Mooncake-compatible master.
 * Contract and semantics: tide_mc_table.h. This file: objects, hash table,
 * placement, state machine, eviction. Segments/clients/arena: mc_table_seg.c.
 *
 * Memory per object: one malloc holding a 48-byte header, 24 bytes per
 * replica and the key (+NUL), plus 9 bytes per hash slot (1 control byte and
 * 1 pointer, load factor kept in (0.4, 0.8]). The writer's UUID and the
 * put start time are only needed while an object is PROCESSING, so they live
 * in a side array of in-flight puts instead of in every object.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide_log.h"
#include "mc_regex.h"
#include "mc_table_int.h"
#include "tide_clock.h"

/* ------------------------------------------------------------------------------------------ */
/* Key hash: SipHash-1-3, keyed per table so clients cannot aim keys at one probe chain.     */
/* ------------------------------------------------------------------------------------------ */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

uint64_t
mct_hash(const struct tide_mc_table *t, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t v0 = t->hk0 ^ UINT64_C(0x736f6d6570736575);
	uint64_t v1 = t->hk1 ^ UINT64_C(0x646f72616e646f6d);
	uint64_t v2 = t->hk0 ^ UINT64_C(0x6c7967656e657261);
	uint64_t v3 = t->hk1 ^ UINT64_C(0x7465646279746573);
	uint64_t m, b = (uint64_t)len << 56;
	size_t i, left = len & 7;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, p + i, 8); /* little-endian host: x86-64 and arm64 */
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t k = 0; k < left; k++)
		b |= (uint64_t)p[i + k] << (8 * k);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint32_t
mct_uuid_hash32(const struct tide_mc_uuid *u)
{
	uint64_t x = u->first * UINT64_C(0x9e3779b97f4a7c15) ^ u->second;

	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	return (uint32_t)x;
}

/* ------------------------------------------------------------------------------------------ */
/* Open-addressing table: linear probing, 7-bit tags, backward-shift deletion (no tombstones) */
/* ------------------------------------------------------------------------------------------ */

#define HT_MIN_CAP 64u
#define TAG(h)     ((uint8_t)(0x80u | ((h) >> 57)))

static int
ht_resize(struct tide_mc_table *t, uint64_t cap)
{
	uint8_t *ctrl = calloc(cap, 1);
	struct mct_obj **slot = malloc(cap * sizeof(*slot));
	uint64_t mask = cap - 1;

	if (!ctrl || !slot) {
		free(ctrl);
		free(slot);
		return -ENOMEM;
	}
	for (uint64_t i = 0; t->ctrl && i <= t->mask; i++) {
		if (!t->ctrl[i])
			continue;
		uint64_t j = t->slot[i]->hash & mask;

		while (ctrl[j])
			j = (j + 1) & mask;
		ctrl[j] = t->ctrl[i];
		slot[j] = t->slot[i];
	}
	free(t->ctrl);
	free(t->slot);
	t->ctrl = ctrl;
	t->slot = slot;
	t->mask = mask;
	return 0;
}

int
mct_ht_init(struct tide_mc_table *t)
{
	return ht_resize(t, HT_MIN_CAP);
}

void
mct_ht_fini(struct tide_mc_table *t)
{
	free(t->ctrl);
	free(t->slot);
	t->ctrl = NULL;
	t->slot = NULL;
}

static struct mct_obj *
ht_find(const struct tide_mc_table *t, const char *key, size_t len, uint64_t h)
{
	uint64_t i = (uint32_t)h & t->mask;
	uint8_t tag = TAG(h);

	/* Terminates: the load factor stays <= 0.8, so an empty slot exists. */
	for (; t->ctrl[i]; i = (i + 1) & t->mask) {
		struct mct_obj *o = t->slot[i];

		if (t->ctrl[i] == tag && o->key_len == len && memcmp(mct_key(o), key, len) == 0)
			return o;
	}
	return NULL;
}

static int
ht_insert(struct tide_mc_table *t, struct mct_obj *o, uint64_t h)
{
	uint64_t i;

	if ((t->nobj + 1) * 5 > (t->mask + 1) * 4 && ht_resize(t, (t->mask + 1) * 2) != 0)
		return -ENOMEM;
	for (i = o->hash & t->mask; t->ctrl[i]; i = (i + 1) & t->mask)
		;
	t->ctrl[i] = TAG(h);
	t->slot[i] = o;
	t->nobj++;
	return 0;
}

static void
ht_delete(struct tide_mc_table *t, const struct mct_obj *o)
{
	uint64_t i = o->hash & t->mask, j;

	while (t->slot[i] != o || !t->ctrl[i])
		i = (i + 1) & t->mask;
	/* Backward shift: pull later members of the cluster into the hole when
	   their home slot is not cyclically inside (hole, position]. */
	for (j = (i + 1) & t->mask; t->ctrl[j]; j = (j + 1) & t->mask) {
		uint64_t home = t->slot[j]->hash & t->mask;

		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->ctrl[i] = t->ctrl[j];
			t->slot[i] = t->slot[j];
			i = j;
		}
	}
	t->ctrl[i] = 0;
	t->nobj--;
	/* Shrink when far below capacity so a burst does not pin memory. */
	if (t->mask + 1 > HT_MIN_CAP && t->nobj * 10 < (t->mask + 1) * 2)
		(void)ht_resize(t, (t->mask + 1) / 2);
}

/* Snapshot the objects matching pred so callers may delete while walking. */
static int
ht_collect(struct tide_mc_table *t, bool (*pred)(struct tide_mc_table *, struct mct_obj *, void *),
	   void *arg, struct mct_obj ***out, size_t *n)
{
	size_t cap = 0, cnt = 0;
	struct mct_obj **v = NULL;

	for (uint64_t i = 0; i <= t->mask; i++) {
		if (!t->ctrl[i] || !pred(t, t->slot[i], arg))
			continue;
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct mct_obj **nv = realloc(v, nc * sizeof(*v));

			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
			cap = nc;
		}
		v[cnt++] = t->slot[i];
	}
	*out = v;
	*n = cnt;
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Objects                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static struct mct_obj *
obj_new(const struct tide_mc_str *key, uint64_t len, unsigned nrep)
{
	struct mct_obj *o = malloc(sizeof(*o) + nrep * sizeof(struct mct_rep) + key->len + 1);

	if (!o)
		return NULL;
	memset(o, 0, sizeof(*o));
	o->size = len;
	o->key_len = (uint32_t)key->len;
	o->nrep = (uint8_t)nrep;
	o->nrep_cap = (uint8_t)nrep;
	memcpy(mct_key(o), key->ptr, key->len);
	mct_key(o)[key->len] = 0;
	return o;
}

struct mct_obj *
mct_obj_new(const struct tide_mc_str *key, uint64_t len, unsigned nrep)
{
	return obj_new(key, len, nrep);
}

struct mct_obj *
mct_obj_find(struct tide_mc_table *t, const char *key, size_t len)
{
	return ht_find(t, key, len, mct_hash(t, key, len));
}

static void obj_pins_account(struct tide_mc_table *t, const struct mct_obj *o, int dir);

const uint64_t TIDE_MC_TABLE_VSIZE_BOUND[TIDE_MC_TABLE_VSIZE_BOUNDS] = {
	4096, 65536, 262144, 1048576, 4194304, 16777216, 67108864};

/* A new object of len bytes for the value-size histogram (stock observes every
 * object created; bucket k: len <= bound k, the last one above all seven). */
static void
vsize_observe(struct tide_mc_table *t, uint64_t len)
{
	unsigned k = 0;

	while (k < TIDE_MC_TABLE_VSIZE_BOUNDS && len > TIDE_MC_TABLE_VSIZE_BOUND[k])
		k++;
	t->vsize_bucket[k]++;
	t->vsize_sum += len;
}

int
mct_obj_insert(struct tide_mc_table *t, struct mct_obj *o)
{
	uint64_t h = mct_hash(t, mct_key(o), o->key_len);

	o->hash = (uint32_t)h;
	if (ht_insert(t, o, h) != 0)
		return -ENOMEM;
	obj_pins_account(t, o, +1);
	t->value_bytes += o->size * o->nrep;
	vsize_observe(t, o->size);
	return 0;
}

static int
proc_add(struct tide_mc_table *t, struct mct_obj *o, const struct tide_mc_uuid *client,
	 uint64_t now, uint8_t pin_action, uint64_t pin_ttl)
{
	if (t->nproc == t->proc_cap) {
		size_t nc = t->proc_cap ? t->proc_cap * 2 : 64;
		struct mct_proc *np = realloc(t->proc, nc * sizeof(*np));

		if (!np)
			return -ENOMEM;
		t->proc = np;
		t->proc_cap = nc;
	}
	t->proc[t->nproc] = (struct mct_proc){o, *client, now, pin_ttl, pin_action};
	o->aux = (uint32_t)t->nproc++;
	/* New content (a put, or an upsert in place): nobody has read it yet. */
	o->flags = (uint8_t)((o->flags | MCT_OF_PROCESSING) & ~MCT_OF_READ);
	return 0;
}

/* Leave the in-flight set; aux then holds the writer's hash for ILLEGAL_CLIENT checks. */
static void
proc_del(struct tide_mc_table *t, struct mct_obj *o)
{
	size_t i = o->aux;

	o->aux = mct_uuid_hash32(&t->proc[i].client);
	o->flags &= (uint8_t)~MCT_OF_PROCESSING;
	t->proc[i] = t->proc[--t->nproc];
	if (i < t->nproc)
		t->proc[i].obj->aux = (uint32_t)i;
}

static bool
writer_is(const struct tide_mc_table *t, const struct mct_obj *o, const struct tide_mc_uuid *c)
{
	if (o->flags & MCT_OF_PROCESSING)
		return mct_uuid_eq(&t->proc[o->aux].client, c);
	return o->aux == mct_uuid_hash32(c);
}

static void
obj_pins_account(struct tide_mc_table *t, const struct mct_obj *o, int dir)
{
	if (o->flags & MCT_OF_SOFT_PIN)
		t->soft_pinned += (uint64_t)(int64_t)dir;
	if (o->flags & MCT_OF_HARD_PIN)
		t->hard_pinned += (uint64_t)(int64_t)dir;
}

/*
 * Erase an object. Its buffers are freed now (how == MCT_FREE_NOW), kept
 * allocated until release_at (MCT_FREE_LATER: a writer may still be writing
 * into them), or already gone with their segment (nrep == 0).
 */
void
mct_obj_erase(struct tide_mc_table *t, struct mct_obj *o, int how, uint64_t release_at)
{
	/* Only COMPLETE objects were journaled; a PROCESSING one was never acknowledged. */
	if (!(o->flags & MCT_OF_PROCESSING))
		mct_j_obj_del(t, o);
	for (unsigned i = 0; i < o->nrep; i++) {
		if (how == MCT_FREE_LATER)
			mct_discard(t, &o->rep[i], o->size, release_at,
				    i ? MCT_DISC_PUT : MCT_DISC_PUT_HEAD);
		else
			mct_rep_free(t, &o->rep[i], o->size);
	}
	t->value_bytes -= o->size * o->nrep;
	if (o->flags & MCT_OF_PROCESSING)
		proc_del(t, o);
	obj_pins_account(t, o, -1);
	ht_delete(t, o);
	free(o);
}

/* Write n descriptors of o into the arena. */
static int
descs_out(struct tide_mc_table *t, const struct mct_obj *o, struct tide_mc_table_arena *a,
	  struct tide_mc_replica_desc_vec *out)
{
	static char tcp[] = "tcp"; /* stock AllocatedBuffer::protocol default, spec 3.1 */
	int32_t st = (o->flags & MCT_OF_PROCESSING) ? TIDE_MC_RS_PROCESSING : TIDE_MC_RS_COMPLETE;

	out->n = 0;
	out->v = NULL;
	if (!o->nrep)
		return 0;
	out->v = mct_arena_alloc(a, o->nrep * sizeof(*out->v));
	if (!out->v)
		return -ENOMEM;
	for (unsigned i = 0; i < o->nrep; i++) {
		const struct mct_seg *s = t->segs[o->rep[i].seg];
		struct tide_mc_replica_desc *d = &out->v[i];

		memset(d, 0, sizeof(*d));
		d->id = o->rep[i].id;
		d->kind = TIDE_MC_RK_MEMORY;
		d->status = st;
		d->u.memory.size = o->size;
		d->u.memory.buffer_address = s->base + o->rep[i].off;
		d->u.memory.protocol.ptr = tcp;
		d->u.memory.protocol.len = 3;
		if (mct_arena_str(a, s->endpoint, s->endpoint_len, &d->u.memory.transport_endpoint))
			return -ENOMEM;
	}
	out->n = o->nrep;
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Placement (spec 3.5, random strategy)                                                       */
/* ------------------------------------------------------------------------------------------ */

struct place {
	uint64_t len;
	uint32_t share; /* > 0: at most 1/share of a segment (mct_place_one); want is 1 */
	unsigned want, n;
	uint32_t names[TIDE_MC_TABLE_MAX_REPLICAS];
	struct mct_rep rep[TIDE_MC_TABLE_MAX_REPLICAS];
};

static bool
name_used(const struct place *p, uint32_t name_id)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->names[i] == name_id)
			return true;
	return false;
}

static bool
try_seg(struct tide_mc_table *t, struct place *p, uint32_t idx)
{
	struct mct_seg *s = t->segs[idx];
	uint64_t off, len = p->len;

	if (!s || s->draining || name_used(p, s->name_id))
		return false;
	if (p->share) {
		uint64_t g = t->o.seg_granule, cap = s->managed / p->share / g * g;

		if (cap < g)
			cap = g;
		if (len > cap)
			len = cap;
	}
	if (tide_seg_alloc(s->alloc, len, 1, &off) != 0)
		return false;
	/* One replica when share is set: the length placed is the caller's. */
	p->len = len;
	mct_rep_account(t, s, len, +1);
	p->rep[p->n] = (struct mct_rep){t->next_rep_id++, off, idx, 0};
	p->names[p->n++] = s->name_id;
	return true;
}

/* Segments sharing a name form one target; try them from a random offset. */
static void
try_name(struct tide_mc_table *t, struct place *p, const struct tide_mc_str *name)
{
	uint32_t start;

	if (!name->len || p->n == p->want || !t->nseg_slots)
		return;
	start = (uint32_t)(mct_rand(t) % t->nseg_slots);
	for (uint32_t k = 0; k < t->nseg_slots; k++) {
		uint32_t i = (start + k) % t->nseg_slots;
		const struct mct_seg *s = t->segs[i];

		if (s && s->name_len == name->len && memcmp(s->name, name->ptr, name->len) == 0 &&
		    try_seg(t, p, i))
			return;
	}
}

static void
place(struct tide_mc_table *t, struct place *p, const struct tide_mc_replicate_config *cfg)
{
	if (cfg->preferred_segment.len) {
		try_name(t, p, &cfg->preferred_segment);
	} else {
		for (size_t i = 0; i < cfg->preferred_segments.n; i++)
			try_name(t, p, &cfg->preferred_segments.v[i]);
	}
	if (p->n < p->want && t->nseg_slots) {
		uint32_t start = (uint32_t)(mct_rand(t) % t->nseg_slots);

		for (uint32_t k = 0; k < t->nseg_slots && p->n < p->want; k++)
			(void)try_seg(t, p, (start + k) % t->nseg_slots);
	}
}

static void
place_undo(struct tide_mc_table *t, struct place *p)
{
	for (unsigned i = 0; i < p->n; i++)
		mct_rep_free(t, &p->rep[i], p->len);
	p->n = 0;
}

bool
mct_place_one(struct tide_mc_table *t, uint64_t *len, uint32_t share,
	      const struct tide_mc_replicate_config *cfg, struct mct_rep *out)
{
	struct place p = {.len = *len, .share = share, .want = 1, .n = 0};

	place(t, &p, cfg);
	if (p.n) {
		*out = p.rep[0];
		*len = p.len;
	}
	return p.n != 0;
}

/* ------------------------------------------------------------------------------------------ */
/* PutStart / UpsertStart                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Spec 3.3, shared with lease commits: a COMPLETE key, or a put that started less than the
 * discard timeout ago, is taken; a put abandoned longer than that may be taken over. */
bool
mct_key_taken(const struct tide_mc_table *t, const struct mct_obj *o, uint64_t now)
{
	return !(o->flags & MCT_OF_PROCESSING) ||
	       t->proc[o->aux].start_ms + t->o.put_start_discard_timeout_ms >= now;
}

/* Drop an abandoned put (mct_key_taken() false) for a new put of its key (by: who takes it
 * over, for the log); its buffers are released later, its writer may still be writing. */
void
mct_take_over(struct tide_mc_table *t, struct mct_obj *o, const struct tide_mc_str *key,
	      const char *by, uint64_t now)
{
	TIDE_LOG(INFO, "%s %.*s: taking over a put started %llu ms ago", by,
		 (int)(key->len < 200 ? key->len : 200), key->ptr,
		 (unsigned long long)(now - t->proc[o->aux].start_ms));
	mct_obj_erase(t, o, MCT_FREE_LATER, now + t->o.put_start_release_timeout_ms);
}

/* The soft-pin request of cfg (both layouts); shared with allocation leases. */
int
mct_pin_parse(const struct tide_mc_table *t, const struct tide_mc_replicate_config *cfg,
	      struct mct_pin_req *pin)
{
	pin->action = cfg->soft_pin_action;
	if (cfg->with_soft_pin && pin->action == TIDE_MC_SOFT_PIN_PRESERVE)
		pin->action = TIDE_MC_SOFT_PIN_ENABLE; /* V0312 layout: a bool */
	pin->ttl = 0;
	if (pin->action > TIDE_MC_SOFT_PIN_DISABLE)
		return TIDE_MC_EC_INVALID_PARAMS;
	if (pin->action == TIDE_MC_SOFT_PIN_ENABLE) {
		pin->ttl = cfg->soft_pin_ttl_ms.has ? cfg->soft_pin_ttl_ms.val
						    : t->o.default_kv_soft_pin_ttl_ms;
		if (!pin->ttl || pin->ttl > t->o.max_kv_soft_pin_ttl_ms)
			return TIDE_MC_EC_INVALID_PARAMS;
	} else if (cfg->soft_pin_ttl_ms.has) {
		return TIDE_MC_EC_INVALID_PARAMS;
	}
	return 0;
}

static int
check_start(const struct tide_mc_table *t, const struct tide_mc_str *key, uint64_t len,
	    const struct tide_mc_replicate_config *cfg, struct mct_pin_req *pin)
{
	if (!key || !key->len || key->len > UINT32_MAX || (!key->ptr) || !len || !cfg)
		return TIDE_MC_EC_INVALID_PARAMS;
	/* Only memory replicas exist here (no NoF build, no DFS tier): spec 3.3. */
	if (!cfg->replica_num || cfg->nof_replica_num || cfg->dfs_replica_num)
		return TIDE_MC_EC_INVALID_PARAMS;
	return mct_pin_parse(t, cfg, pin);
}

/*
 * Allocate and insert a new PROCESSING object. inherit_pin: a live soft-pin
 * deadline carried over from a replaced object (0 = none).
 */
static int
alloc_insert(struct tide_mc_table *t, const struct tide_mc_uuid *client,
	     const struct tide_mc_str *key, uint64_t h, uint64_t len,
	     const struct tide_mc_replicate_config *cfg, const struct mct_pin_req *pin, bool hard,
	     uint64_t inherit_pin, uint64_t now, struct tide_mc_table_arena *a,
	     struct tide_mc_replica_desc_vec *out)
{
	struct place p;
	struct mct_obj *o;

	p.len = len;
	p.share = 0;
	p.n = 0;
	p.want = cfg->replica_num < TIDE_MC_TABLE_MAX_REPLICAS ? (unsigned)cfg->replica_num
							       : TIDE_MC_TABLE_MAX_REPLICAS;
	place(t, &p, cfg);
	if (!p.n) {
		t->need_evict = true;
		t->alloc_failures++;
		return TIDE_MC_EC_NO_AVAILABLE_HANDLE;
	}
	if (p.n < p.want)
		TIDE_LOG(DEBUG, "put_start %.*s: %u of %u replicas placed", (int)key->len, key->ptr,
			 p.n, p.want);
	o = obj_new(key, len, p.n);
	if (!o)
		goto nomem;
	o->hash = (uint32_t)h;
	memcpy(o->rep, p.rep, p.n * sizeof(p.rep[0]));
	if (hard)
		o->flags |= MCT_OF_HARD_PIN;
	if (inherit_pin) {
		o->flags |= MCT_OF_SOFT_PIN;
		o->soft_ms = inherit_pin;
	}
	if (proc_add(t, o, client, now, pin->action, pin->ttl) != 0)
		goto nomem_obj;
	if (ht_insert(t, o, h) != 0) {
		proc_del(t, o);
		goto nomem_obj;
	}
	obj_pins_account(t, o, +1);
	t->value_bytes += len * p.n;
	t->partial_allocations += p.n < p.want;
	vsize_observe(t, len);
	if (out && descs_out(t, o, a, out) != 0)
		return TIDE_MC_EC_INTERNAL_ERROR; /* object stays; the reply fails */
	return 0;
nomem_obj:
	free(o);
nomem:
	place_undo(t, &p);
	return TIDE_MC_EC_INTERNAL_ERROR;
}

static int
start_locked(struct tide_mc_table *t, bool upsert, const struct tide_mc_uuid *client,
	     const struct tide_mc_str *key, uint64_t len,
	     const struct tide_mc_replicate_config *cfg, uint64_t now,
	     struct tide_mc_table_arena *a, struct tide_mc_replica_desc_vec *out)
{
	struct mct_pin_req pin;
	uint64_t h, inherit = 0;
	bool hard = cfg && cfg->with_hard_pin;
	struct mct_obj *o;
	int rc = check_start(t, key, len, cfg, &pin);

	if (rc)
		return rc;
	h = mct_hash(t, key->ptr, key->len);
	o = ht_find(t, key->ptr, key->len, h);
	if (o && !upsert) {
		if (mct_key_taken(t, o, now))
			return TIDE_MC_EC_OBJECT_ALREADY_EXISTS;
		mct_take_over(t, o, key, "put_start", now);
		o = NULL;
	}
	if (o && (o->flags & MCT_OF_PROCESSING)) {
		/* Upsert preempts an in-flight write at once; its writer may still be
		   writing, so the buffers are released later. Without COMPLETE data
		   (the only kind here: an object is all PROCESSING or all COMPLETE)
		   the key is then absent. */
		if ((o->flags & MCT_OF_SOFT_PIN) && o->soft_ms > now)
			inherit = o->soft_ms;
		hard = hard || (o->flags & MCT_OF_HARD_PIN);
		mct_obj_erase(t, o, MCT_FREE_LATER, now + t->o.put_start_release_timeout_ms);
		o = NULL;
	}
	if (!o)
		return alloc_insert(t, client, key, h, len, cfg, &pin, hard, inherit, now, a, out);
	if (o->size == len) {
		/* In place: same buffers, turned PROCESSING until UpsertEnd. */
		if (proc_add(t, o, client, now, pin.action, pin.ttl) != 0)
			return TIDE_MC_EC_INTERNAL_ERROR;
		/* Its bytes are about to be overwritten: for the journal the COMPLETE
		 * object is gone now (UpsertEnd sets it again), and a PROCESSING one is
		 * never journaled, so a later revoke or takeover needs no record. */
		mct_j_obj_del(t, o);
		return (out && descs_out(t, o, a, out) != 0) ? TIDE_MC_EC_INTERNAL_ERROR : 0;
	}
	/* Another length: new buffers; the old ones may still be read by a client
	   holding their descriptors, so they are released later. */
	if ((o->flags & MCT_OF_SOFT_PIN) && o->soft_ms > now)
		inherit = o->soft_ms;
	hard = hard || (o->flags & MCT_OF_HARD_PIN);
	mct_obj_erase(t, o, MCT_FREE_LATER, now + t->o.put_start_release_timeout_ms);
	return alloc_insert(t, client, key, h, len, cfg, &pin, hard, inherit, now, a, out);
}

/* PutStart and UpsertStart differ only in what start_locked does with an
 * existing key; one body keeps their checks and accounting identical. */
static int
single_start(struct tide_mc_table *t, bool upsert, const struct tide_mc_uuid *client,
	     const struct tide_mc_str *key, uint64_t len,
	     const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
	     struct tide_mc_table_arena *a, struct tide_mc_replica_desc_vec *out)
{
	int rc = TIDE_MC_EC_INVALID_PARAMS;

	if (!t || !client || !a || !out)
		return TIDE_MC_EC_INVALID_PARAMS;
	out->v = NULL;
	out->n = 0;
	mct_lock(t);
	if (!(cfg && cfg->group_ids.has && cfg->group_ids.val.n != 1))
		rc = start_locked(t, upsert, client, key, len, cfg, now_ms, a, out);
	mct_count(t, upsert ? TIDE_MC_TABLE_OP_UPSERT_START : TIDE_MC_TABLE_OP_PUT_START, rc);
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_put_start(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			const struct tide_mc_str *key, uint64_t len,
			const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			struct tide_mc_table_arena *a, struct tide_mc_replica_desc_vec *out)
{
	return single_start(t, false, client, key, len, cfg, now_ms, a, out);
}

int
tide_mc_table_upsert_start(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			   const struct tide_mc_str *key, uint64_t len,
			   const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			   struct tide_mc_table_arena *a, struct tide_mc_replica_desc_vec *out)
{
	return single_start(t, true, client, key, len, cfg, now_ms, a, out);
}

int
tide_mc_table_batch_put_start(struct tide_mc_table *t, bool upsert,
			      const struct tide_mc_uuid *client, const struct tide_mc_str *keys,
			      size_t n_keys, const uint64_t *lens, size_t n_lens,
			      const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			      struct tide_mc_table_arena *a, struct tide_mc_exp_replicas *out)
{
	enum tide_mc_table_op op =
		upsert ? TIDE_MC_TABLE_OP_BATCH_UPSERT_START : TIDE_MC_TABLE_OP_BATCH_PUT_START;
	uint64_t f0;
	bool bad;

	if (!t || !client || !a || (n_keys && (!keys || !out)) || (n_lens && !lens))
		return TIDE_MC_EC_INVALID_PARAMS;
	bad = n_keys != n_lens || (cfg && cfg->group_ids.has && cfg->group_ids.val.n != n_keys);
	mct_lock(t);
	f0 = t->failures[op];
	for (size_t i = 0; i < n_keys; i++) {
		int rc;

		out[i].val.v = NULL;
		out[i].val.n = 0;
		rc = bad ? TIDE_MC_EC_INVALID_PARAMS
			 : start_locked(t, upsert, client, &keys[i], lens[i], cfg, now_ms, a,
					&out[i].val);
		out[i].ok = rc == 0;
		out[i].err = rc;
		mct_count(t, op, rc);
	}
	mct_count_batch(t, op, n_keys, f0);
	mct_unlock(t);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* PutEnd / PutRevoke                                                                          */
/* ------------------------------------------------------------------------------------------ */

static bool
targets_memory(int32_t replica_type)
{
	return replica_type == TIDE_MC_REPLICA_MEMORY || replica_type == TIDE_MC_REPLICA_ALL;
}

static struct mct_obj *
lookup(struct tide_mc_table *t, const struct tide_mc_str *key)
{
	if (!key || !key->len || !key->ptr)
		return NULL;
	return ht_find(t, key->ptr, key->len, mct_hash(t, key->ptr, key->len));
}

static int
end_locked(struct tide_mc_table *t, const struct tide_mc_uuid *client,
	   const struct tide_mc_str *key, const struct tide_mc_opt_u64 *checksum,
	   int32_t replica_type, uint64_t now)
{
	struct mct_obj *o = lookup(t, key);
	struct mct_proc *p;

	if (!o)
		return TIDE_MC_EC_OBJECT_NOT_FOUND;
	if (!writer_is(t, o, client))
		return TIDE_MC_EC_ILLEGAL_CLIENT;
	if (!(o->flags & MCT_OF_PROCESSING))
		return 0; /* every targeted replica is already COMPLETE: an idempotent retry */
	if (!targets_memory(replica_type))
		return TIDE_MC_EC_INVALID_WRITE;
	p = &t->proc[o->aux];
	obj_pins_account(t, o, -1);
	if (p->pin_action == TIDE_MC_SOFT_PIN_ENABLE) {
		o->flags |= MCT_OF_SOFT_PIN;
		o->soft_ms = now + p->pin_ttl;
	} else if (p->pin_action == TIDE_MC_SOFT_PIN_DISABLE) {
		o->flags &= (uint8_t)~MCT_OF_SOFT_PIN;
	}
	obj_pins_account(t, o, +1);
	if (checksum && checksum->has) {
		o->flags |= MCT_OF_HAS_CSUM;
		o->csum = checksum->val;
	} else {
		o->flags &= (uint8_t)~MCT_OF_HAS_CSUM;
	}
	proc_del(t, o);
	if (o->lease_ms < now)
		o->lease_ms = now; /* a 0 ms lease, as stock */
	mct_j_obj_set(t, o, now);
	return 0;
}

static int
revoke_locked(struct tide_mc_table *t, const struct tide_mc_uuid *client,
	      const struct tide_mc_str *key, int32_t replica_type)
{
	struct mct_obj *o = lookup(t, key);

	if (!o)
		return TIDE_MC_EC_OBJECT_NOT_FOUND;
	if (!writer_is(t, o, client))
		return TIDE_MC_EC_ILLEGAL_CLIENT;
	if (!(o->flags & MCT_OF_PROCESSING) || !targets_memory(replica_type))
		return TIDE_MC_EC_INVALID_WRITE;
	/* The writer gave up, so nobody writes into the buffers: free at once. */
	mct_obj_erase(t, o, MCT_FREE_NOW, 0);
	return 0;
}

/* Put and Upsert End/Revoke differ only in the counter they feed; one body
 * each keeps their checks identical. */
static int
single_end(struct tide_mc_table *t, enum tide_mc_table_op op, const struct tide_mc_uuid *client,
	   const struct tide_mc_str *key, const struct tide_mc_opt_u64 *checksum,
	   int32_t replica_type, uint64_t now_ms)
{
	int rc;

	if (!t || !client)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	rc = mct_count(t, op, end_locked(t, client, key, checksum, replica_type, now_ms));
	mct_unlock(t);
	return rc;
}

static int
single_revoke(struct tide_mc_table *t, enum tide_mc_table_op op, const struct tide_mc_uuid *client,
	      const struct tide_mc_str *key, int32_t replica_type)
{
	int rc;

	if (!t || !client)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	rc = mct_count(t, op, revoke_locked(t, client, key, replica_type));
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_put_end(struct tide_mc_table *t, const struct tide_mc_uuid *client,
		      const struct tide_mc_str *key, const struct tide_mc_opt_u64 *checksum,
		      int32_t replica_type, uint64_t now_ms)
{
	return single_end(t, TIDE_MC_TABLE_OP_PUT_END, client, key, checksum, replica_type, now_ms);
}

int
tide_mc_table_upsert_end(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			 const struct tide_mc_str *key, const struct tide_mc_opt_u64 *checksum,
			 int32_t replica_type, uint64_t now_ms)
{
	return single_end(t, TIDE_MC_TABLE_OP_UPSERT_END, client, key, checksum, replica_type,
			  now_ms);
}

int
tide_mc_table_put_revoke(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			 const struct tide_mc_str *key, int32_t replica_type, uint64_t now_ms)
{
	(void)now_ms;
	return single_revoke(t, TIDE_MC_TABLE_OP_PUT_REVOKE, client, key, replica_type);
}

int
tide_mc_table_upsert_revoke(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			    const struct tide_mc_str *key, int32_t replica_type, uint64_t now_ms)
{
	(void)now_ms;
	return single_revoke(t, TIDE_MC_TABLE_OP_UPSERT_REVOKE, client, key, replica_type);
}

int
tide_mc_table_batch_put_end(struct tide_mc_table *t, bool upsert, const struct tide_mc_uuid *client,
			    const struct tide_mc_object_meta *metas, size_t n, int32_t replica_type,
			    uint64_t now_ms, struct tide_mc_exp_void *out)
{
	enum tide_mc_table_op op =
		upsert ? TIDE_MC_TABLE_OP_BATCH_UPSERT_END : TIDE_MC_TABLE_OP_BATCH_PUT_END;
	uint64_t f0;

	if (!t || !client || (n && (!metas || !out)))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	f0 = t->failures[op];
	for (size_t i = 0; i < n; i++) {
		int rc = mct_count(t, op,
				   end_locked(t, client, &metas[i].key, &metas[i].object_checksum,
					      replica_type, now_ms));

		out[i].ok = rc == 0;
		out[i].err = rc;
	}
	mct_count_batch(t, op, n, f0);
	mct_unlock(t);
	return 0;
}

int
tide_mc_table_batch_put_revoke(struct tide_mc_table *t, bool upsert,
			       const struct tide_mc_uuid *client, const struct tide_mc_str *keys,
			       size_t n, int32_t replica_type, uint64_t now_ms,
			       struct tide_mc_exp_void *out)
{
	enum tide_mc_table_op op =
		upsert ? TIDE_MC_TABLE_OP_BATCH_UPSERT_REVOKE : TIDE_MC_TABLE_OP_BATCH_PUT_REVOKE;
	uint64_t f0;

	(void)now_ms;
	if (!t || !client || (n && (!keys || !out)))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	f0 = t->failures[op];
	for (size_t i = 0; i < n; i++) {
		int rc = mct_count(t, op, revoke_locked(t, client, &keys[i], replica_type));

		out[i].ok = rc == 0;
		out[i].err = rc;
	}
	mct_count_batch(t, op, n, f0);
	mct_unlock(t);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Reads                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void
grant_lease(struct tide_mc_table *t, struct mct_obj *o, uint64_t now)
{
	uint64_t until = now + t->o.default_kv_lease_ttl_ms;

	if (o->lease_ms < until)
		o->lease_ms = until;
}

static bool
readable(const struct mct_obj *o)
{
	return !(o->flags & MCT_OF_PROCESSING) && o->nrep;
}

static int
get_locked(struct tide_mc_table *t, const struct tide_mc_str *key, uint64_t now, bool lease,
	   struct tide_mc_table_arena *a, struct tide_mc_replica_list *out)
{
	struct mct_obj *o = lookup(t, key);

	memset(out, 0, sizeof(*out));
	/* lease == false is the admin QueryKey: a look, not a read (nor a get counted). */
	t->gets += lease;
	if (!o)
		return TIDE_MC_EC_OBJECT_NOT_FOUND;
	if (!readable(o))
		return TIDE_MC_EC_REPLICA_IS_NOT_READY;
	if (descs_out(t, o, a, &out->replicas) != 0)
		return TIDE_MC_EC_INTERNAL_ERROR;
	if (lease) {
		grant_lease(t, o, now);
		o->flags |= MCT_OF_READ;
		t->gets_found++;
		t->gets_found_bytes += o->size;
	}
	out->lease_ttl_ms = t->o.default_kv_lease_ttl_ms;
	out->object_checksum.has = (o->flags & MCT_OF_HAS_CSUM) != 0;
	out->object_checksum.val = o->csum;
	return 0;
}

int
tide_mc_table_get_replica_list(struct tide_mc_table *t, const struct tide_mc_str *key,
			       uint64_t now_ms, struct tide_mc_table_arena *a,
			       struct tide_mc_replica_list *out)
{
	int rc;

	if (!t || !a || !out)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	rc = mct_count(t, TIDE_MC_TABLE_OP_GET_REPLICA_LIST,
		       get_locked(t, key, now_ms, true, a, out));
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_query_key(struct tide_mc_table *t, const struct tide_mc_str *key, uint64_t now_ms,
			struct tide_mc_table_arena *a, struct tide_mc_replica_list *out)
{
	int rc;

	if (!t || !a || !out)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	rc = get_locked(t, key, now_ms, false, a, out);
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_batch_get_replica_list(struct tide_mc_table *t, const struct tide_mc_str *keys,
				     size_t n, uint64_t now_ms, struct tide_mc_table_arena *a,
				     struct tide_mc_exp_replica_list *out)
{
	uint64_t f0;

	if (!t || !a || (n && (!keys || !out)))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	f0 = t->failures[TIDE_MC_TABLE_OP_BATCH_GET_REPLICA_LIST];
	for (size_t i = 0; i < n; i++) {
		int rc = mct_count(t, TIDE_MC_TABLE_OP_BATCH_GET_REPLICA_LIST,
				   get_locked(t, &keys[i], now_ms, true, a, &out[i].val));

		out[i].ok = rc == 0;
		out[i].err = rc;
	}
	mct_count_batch(t, TIDE_MC_TABLE_OP_BATCH_GET_REPLICA_LIST, n, f0);
	mct_unlock(t);
	return 0;
}

static bool
exist_locked(struct tide_mc_table *t, const struct tide_mc_str *key, uint64_t now)
{
	struct mct_obj *o = lookup(t, key);

	if (!o || !readable(o))
		return false;
	grant_lease(t, o, now);
	return true;
}

int
tide_mc_table_exist_key(struct tide_mc_table *t, const struct tide_mc_str *key, uint64_t now_ms,
			bool *exists)
{
	if (!t || !exists)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	*exists = exist_locked(t, key, now_ms);
	mct_count(t, TIDE_MC_TABLE_OP_EXIST_KEY, 0);
	mct_unlock(t);
	return 0;
}

int
tide_mc_table_batch_exist_key(struct tide_mc_table *t, const struct tide_mc_str *keys, size_t n,
			      uint64_t now_ms, struct tide_mc_exp_bool *out)
{
	if (!t || (n && (!keys || !out)))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	for (size_t i = 0; i < n; i++) {
		out[i].ok = true;
		out[i].err = 0;
		out[i].val = exist_locked(t, &keys[i], now_ms);
		mct_count(t, TIDE_MC_TABLE_OP_BATCH_EXIST_KEY, 0);
	}
	/* No key fails (absent is false): only an empty batch counts as failed. */
	mct_count_batch(t, TIDE_MC_TABLE_OP_BATCH_EXIST_KEY, n,
			t->failures[TIDE_MC_TABLE_OP_BATCH_EXIST_KEY]);
	mct_unlock(t);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Regex scans: compiled outside the lock, keys copied under it, matched outside it            */
/* ------------------------------------------------------------------------------------------ */

/* Keys copied out of the table: records of (u32 length, bytes). */
struct key_snap {
	uint8_t *buf;
	size_t len, cap;
	size_t n;
};

static bool
removable(const struct mct_obj *o, bool force, uint64_t now)
{
	return !(o->flags & MCT_OF_PROCESSING) && (force || now >= o->lease_ms);
}

/* What a scan keeps: readable objects (get) or removable ones (remove). */
static bool
re_candidate(const struct mct_obj *o, bool want_readable, bool force, uint64_t now)
{
	return want_readable ? readable(o) : removable(o, force, now);
}

/* Copy the candidates' keys (lock held): one pass of memcpy, whatever the pattern. */
static int
snap_keys(struct tide_mc_table *t, bool want_readable, bool force, uint64_t now,
	  struct key_snap *ks)
{
	size_t need = 0;

	for (uint64_t i = 0; i <= t->mask; i++)
		if (t->ctrl[i] && re_candidate(t->slot[i], want_readable, force, now))
			need += sizeof(uint32_t) + t->slot[i]->key_len;
	ks->buf = malloc(need ? need : 1);
	if (!ks->buf)
		return -ENOMEM;
	ks->cap = need;
	for (uint64_t i = 0; i <= t->mask; i++) {
		const struct mct_obj *o = t->slot[i];

		if (!t->ctrl[i] || !re_candidate(o, want_readable, force, now))
			continue;
		memcpy(ks->buf + ks->len, &o->key_len, sizeof(uint32_t));
		memcpy(ks->buf + ks->len + sizeof(uint32_t), mct_key_c(o), o->key_len);
		ks->len += sizeof(uint32_t) + o->key_len;
		ks->n++;
	}
	return 0;
}

static void
log_pattern(const char *what, const struct tide_mc_str *re, const char *why)
{
	int n = re && re->len < 200 ? (int)re->len : 200;

	TIDE_LOG_RATELIMIT(WARN, 10, "%s: pattern '%.*s'%s refused: %s", what, n,
			   re && re->ptr ? re->ptr : "", re && re->len > 200 ? "..." : "", why);
}

/*
 * The keys of the candidates that match pattern re, in ks (compacted to the
 * matches). The table lock is held only to copy the keys; one scan at a
 * time per table (re_lock, held by the caller) so the copies take at most
 * one table's worth of keys. INVALID_PARAMS for a pattern that does not
 * compile or goes over a limit (as stock answers a std::regex_error),
 * INTERNAL_ERROR out of memory.
 */
static int
re_scan(struct tide_mc_table *t, const char *what, const struct tide_mc_str *re, bool want_readable,
	bool force, uint64_t now, struct key_snap *ks)
{
	struct mct_regex *rx = NULL;
	char why[256];
	size_t pos = 0, out = 0, matched = 0;
	uint64_t deadline;
	int rc;

	memset(ks, 0, sizeof(*ks));
	if (!re || (re->len && !re->ptr))
		return TIDE_MC_EC_INVALID_PARAMS;
	rc = mct_regex_compile(re->ptr, re->len, t->o.regex_match_limit, t->o.regex_memory_limit,
			       &rx, why, sizeof(why));
	if (rc != 0) {
		if (rc == -ENOMEM)
			return TIDE_MC_EC_INTERNAL_ERROR;
		log_pattern(what, re, why);
		return TIDE_MC_EC_INVALID_PARAMS;
	}
	mct_lock(t);
	rc = snap_keys(t, want_readable, force, now, ks);
	mct_unlock(t);
	if (rc != 0) {
		mct_regex_free(rx);
		return TIDE_MC_EC_INTERNAL_ERROR;
	}
	deadline = tide_mono_ms() + t->o.regex_timeout_ms;
	for (size_t i = 0; i < ks->n; i++) {
		uint32_t kl;

		memcpy(&kl, ks->buf + pos, sizeof(kl));
		rc = mct_regex_search(rx, (const char *)ks->buf + pos + sizeof(kl), kl);
		if (rc < 0) {
			log_pattern(what, re,
				    rc == -E2BIG ? "a key took more than the match limit "
						   "(--regex_match_limit, --regex_memory_mb)"
						 : "matching failed");
			break;
		}
		if (rc == 1) { /* keep it: compact the matches at the front */
			memmove(ks->buf + out, ks->buf + pos, sizeof(kl) + kl);
			out += sizeof(kl) + kl;
			matched++;
		}
		pos += sizeof(kl) + kl;
		rc = 0;
		if (tide_mono_ms() > deadline) { /* vDSO: a few ns next to a match */
			snprintf(why, sizeof(why),
				 "%zu keys to match, %zu done in %" PRIu64 " ms (--regex_timeout)",
				 ks->n, i + 1, t->o.regex_timeout_ms);
			log_pattern(what, re, why);
			rc = -ETIME;
			break;
		}
	}
	mct_regex_free(rx);
	if (rc != 0) {
		free(ks->buf);
		memset(ks, 0, sizeof(*ks));
		return TIDE_MC_EC_INVALID_PARAMS;
	}
	ks->len = out;
	ks->n = matched;
	return 0;
}

/* Next key of a snapshot at *pos. */
static struct tide_mc_str
snap_next(const struct key_snap *ks, size_t *pos)
{
	struct tide_mc_str k;
	uint32_t kl;

	memcpy(&kl, ks->buf + *pos, sizeof(kl));
	k.ptr = (char *)ks->buf + *pos + sizeof(kl);
	k.len = kl;
	*pos += sizeof(kl) + kl;
	return k;
}

/* Matched keys applied per chunk, the lock dropped in between. */
#define RE_APPLY_CHUNK 4096u

int
tide_mc_table_get_replica_list_by_regex(struct tide_mc_table *t, const struct tide_mc_str *re,
					uint64_t now_ms, struct tide_mc_table_arena *a,
					struct tide_mc_regex_entry_vec *out)
{
	struct key_snap ks;
	size_t pos = 0, done = 0;
	int rc;

	if (!t || !a || !out)
		return TIDE_MC_EC_INVALID_PARAMS;
	out->v = NULL;
	out->n = 0;
	pthread_mutex_lock(&t->re_lock);
	rc = re_scan(t, "GetReplicaListByRegex", re, true, false, now_ms, &ks);
	if (rc == 0 && ks.n) {
		out->v = mct_arena_alloc(a, ks.n * sizeof(*out->v));
		rc = out->v ? 0 : TIDE_MC_EC_INTERNAL_ERROR;
	}
	while (rc == 0 && done < ks.n) {
		mct_lock(t);
		for (size_t end = done + RE_APPLY_CHUNK; done < ks.n && done < end; done++) {
			struct tide_mc_str k = snap_next(&ks, &pos);
			struct mct_obj *o = lookup(t, &k);
			struct tide_mc_regex_entry *e = &out->v[out->n];

			if (!o || !readable(o))
				continue; /* gone or rewritten since the copy */
			if (mct_arena_str(a, mct_key(o), o->key_len, &e->key) ||
			    descs_out(t, o, a, &e->replicas)) {
				rc = TIDE_MC_EC_INTERNAL_ERROR;
				break;
			}
			grant_lease(t, o, now_ms);
			o->flags |= MCT_OF_READ;
			out->n++;
		}
		mct_unlock(t);
	}
	pthread_mutex_unlock(&t->re_lock);
	free(ks.buf);
	mct_lock(t);
	mct_count(t, TIDE_MC_TABLE_OP_GET_REPLICA_LIST_BY_REGEX, rc);
	mct_unlock(t);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Removal                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static int
remove_locked(struct tide_mc_table *t, const struct tide_mc_str *key, bool force, uint64_t now)
{
	struct mct_obj *o = lookup(t, key);

	if (!o)
		return TIDE_MC_EC_OBJECT_NOT_FOUND;
	if (!force && now < o->lease_ms)
		return TIDE_MC_EC_OBJECT_HAS_LEASE;
	if (o->flags & MCT_OF_PROCESSING)
		return TIDE_MC_EC_REPLICA_IS_NOT_READY;
	mct_obj_erase(t, o, MCT_FREE_NOW, 0);
	return 0;
}

int
tide_mc_table_remove(struct tide_mc_table *t, const struct tide_mc_str *key, bool force,
		     uint64_t now_ms)
{
	int rc;

	if (!t)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	rc = mct_count(t, TIDE_MC_TABLE_OP_REMOVE, remove_locked(t, key, force, now_ms));
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_batch_remove(struct tide_mc_table *t, const struct tide_mc_str *keys, size_t n,
			   bool force, uint64_t now_ms, struct tide_mc_exp_void *out)
{
	uint64_t f0;

	if (!t || (n && (!keys || !out)))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	f0 = t->failures[TIDE_MC_TABLE_OP_BATCH_REMOVE];
	for (size_t i = 0; i < n; i++) {
		int rc = mct_count(t, TIDE_MC_TABLE_OP_BATCH_REMOVE,
				   remove_locked(t, &keys[i], force, now_ms));

		out[i].ok = rc == 0;
		out[i].err = rc;
	}
	mct_count_batch(t, TIDE_MC_TABLE_OP_BATCH_REMOVE, n, f0);
	mct_unlock(t);
	return 0;
}

/* Whether replica r of an object lies in a segment mounted under name seg. */
static bool
rep_on(const struct tide_mc_table *t, const struct mct_rep *r, const struct tide_mc_str *seg)
{
	const struct mct_seg *s = t->segs[r->seg];

	return s->name_len == seg->len && memcmp(s->name, seg->ptr, seg->len) == 0;
}

/* One key of BatchReplicaClear (lock held): 0 cleared, else why it was skipped. */
static int
replica_clear_locked(struct tide_mc_table *t, const struct tide_mc_uuid *client,
		     const struct tide_mc_str *key, const struct tide_mc_str *seg, uint64_t now)
{
	struct mct_obj *o = lookup(t, key);
	unsigned i, w = 0;

	if (!o)
		return TIDE_MC_EC_OBJECT_NOT_FOUND;
	if (!writer_is(t, o, client))
		return TIDE_MC_EC_ILLEGAL_CLIENT;
	if (now < o->lease_ms)
		return TIDE_MC_EC_OBJECT_HAS_LEASE;
	/* Stock skips incomplete replicas in both modes; ours are all PROCESSING or none. */
	if (o->flags & MCT_OF_PROCESSING)
		return TIDE_MC_EC_REPLICA_IS_NOT_READY;
	for (i = 0; seg->len && i < o->nrep; i++)
		w += !rep_on(t, &o->rep[i], seg);
	if (seg->len && w == o->nrep)
		return TIDE_MC_EC_SEGMENT_NOT_FOUND; /* no replica there */
	if (!seg->len || w == 0) {
		mct_obj_erase(t, o, MCT_FREE_NOW, 0);
		return 0;
	}
	/* Some replicas stay: the journal forgets the object and learns it again. */
	mct_j_obj_del(t, o);
	w = 0;
	for (i = 0; i < o->nrep; i++) {
		if (rep_on(t, &o->rep[i], seg))
			mct_rep_free(t, &o->rep[i], o->size);
		else
			o->rep[w++] = o->rep[i];
	}
	t->value_bytes -= o->size * (o->nrep - w);
	o->nrep = (uint8_t)w;
	mct_j_obj_set(t, o, now);
	return 0;
}

int
tide_mc_table_batch_replica_clear(struct tide_mc_table *t, const struct tide_mc_uuid *client,
				  const struct tide_mc_str *keys, size_t n,
				  const struct tide_mc_str *segment_name, uint64_t now_ms,
				  struct tide_mc_table_arena *a, struct tide_mc_str_vec *out)
{
	static const struct tide_mc_str all = {NULL, 0};
	const struct tide_mc_str *seg = segment_name ? segment_name : &all;
	struct tide_mc_str *v = NULL;
	uint64_t f0;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!t || !client || !a || !out || (n && !keys) || (seg->len && !seg->ptr))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	if (n && (n > SIZE_MAX / sizeof(*v) || !(v = mct_arena_alloc(a, n * sizeof(*v))))) {
		/* As stock counts a call that failed as a whole: every key failed. */
		t->requests[TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR] += n;
		t->failures[TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR] += n;
		t->batch_calls[TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR]++;
		t->batch_failed_calls[TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR]++;
		mct_unlock(t);
		return TIDE_MC_EC_INTERNAL_ERROR;
	}
	f0 = t->failures[TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR];
	for (size_t i = 0; i < n; i++) {
		int rc = mct_count(t, TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR,
				   replica_clear_locked(t, client, &keys[i], seg, now_ms));

		if (rc == 0)
			v[out->n++] = keys[i];
	}
	mct_count_batch(t, TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR, n, f0);
	mct_unlock(t);
	out->v = out->n ? v : NULL;
	return 0;
}

static int64_t
erase_all(struct tide_mc_table *t, struct mct_obj **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mct_obj_erase(t, v[i], MCT_FREE_NOW, 0);
	free(v);
	return (int64_t)n;
}

int
tide_mc_table_remove_by_regex(struct tide_mc_table *t, const struct tide_mc_str *re, bool force,
			      uint64_t now_ms, int64_t *cnt)
{
	struct key_snap ks;
	size_t pos = 0, done = 0;
	int rc;

	if (!t || !cnt)
		return TIDE_MC_EC_INVALID_PARAMS;
	*cnt = 0;
	pthread_mutex_lock(&t->re_lock);
	rc = re_scan(t, "RemoveByRegex", re, false, force, now_ms, &ks);
	while (rc == 0 && done < ks.n) {
		mct_lock(t);
		for (size_t end = done + RE_APPLY_CHUNK; done < ks.n && done < end; done++) {
			struct tide_mc_str k = snap_next(&ks, &pos);
			struct mct_obj *o = lookup(t, &k);

			if (o && removable(o, force, now_ms)) {
				mct_obj_erase(t, o, MCT_FREE_NOW, 0);
				(*cnt)++;
			}
		}
		mct_unlock(t);
	}
	pthread_mutex_unlock(&t->re_lock);
	free(ks.buf);
	mct_lock(t);
	mct_count(t, TIDE_MC_TABLE_OP_REMOVE_BY_REGEX, rc);
	mct_unlock(t);
	return rc;
}

struct all_arg {
	bool force;
	uint64_t now;
};

static bool
all_pred(struct tide_mc_table *t, struct mct_obj *o, void *arg)
{
	const struct all_arg *r = arg;

	(void)t;
	return removable(o, r->force, r->now);
}

int64_t
tide_mc_table_remove_all(struct tide_mc_table *t, bool force, uint64_t now_ms)
{
	struct all_arg arg = {.force = force, .now = now_ms};
	struct mct_obj **v = NULL;
	size_t n = 0;
	int64_t removed = 0;
	int rc;

	if (!t)
		return 0;
	mct_lock(t);
	rc = ht_collect(t, all_pred, &arg, &v, &n) ? TIDE_MC_EC_INTERNAL_ERROR : 0;
	if (rc == 0)
		removed = erase_all(t, v, n);
	mct_count(t, TIDE_MC_TABLE_OP_REMOVE_ALL, rc);
	mct_unlock(t);
	return removed;
}

/* ------------------------------------------------------------------------------------------ */
/* Replica cleanup for unmount and client expiry                                               */
/* ------------------------------------------------------------------------------------------ */

static bool
seg_pred(struct tide_mc_table *t, struct mct_obj *o, void *arg)
{
	uint32_t idx = *(const uint32_t *)arg;

	(void)t;
	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg == idx)
			return true;
	return false;
}

int
mct_drop_seg_replicas(struct tide_mc_table *t, uint32_t idx)
{
	struct mct_obj **v = NULL;
	size_t n = 0;

	if (ht_collect(t, seg_pred, &idx, &v, &n) != 0)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		struct mct_obj *o = v[k];
		unsigned w = 0;

		for (unsigned i = 0; i < o->nrep; i++)
			if (o->rep[i].seg != idx)
				o->rep[w++] = o->rep[i];
		t->value_bytes -= o->size * (o->nrep - w);
		o->nrep = (uint8_t)w; /* the allocator goes with the segment: nothing to free */
		if (!w)
			mct_obj_erase(t, o, MCT_FREE_NOW, 0);
	}
	free(v);
	return 0;
}

/* In-flight puts of a dead writer, or older than the release timeout. */
void
mct_reclaim_puts(struct tide_mc_table *t, const struct tide_mc_uuid *dead, uint64_t now)
{
	size_t i = 0;

	while (i < t->nproc) {
		struct mct_proc *p = &t->proc[i];
		bool stale = dead ? mct_uuid_eq(&p->client, dead)
				  : p->start_ms + t->o.put_start_release_timeout_ms <= now;

		if (!stale) {
			i++;
			continue;
		}
		t->reclaimed_puts++;
		/* Erasing swaps the last entry into slot i: do not advance. */
		mct_obj_erase(t, p->obj, MCT_FREE_NOW, 0);
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Eviction (spec 4.3)                                                                         */
/* ------------------------------------------------------------------------------------------ */

/*
 * Partition so that v[0..k) hold the k smallest leases (order inside
 * unspecified): quickselect with Hoare's partition around the lower middle
 * element, which leaves lo <= j < hi - 1, so every round shrinks [lo, hi)
 * (the previous version could stop with j == hi - 1 when the pivot was the
 * range's maximum, and loop for ever holding the table lock). O(n) expected.
 */
void
mct_select_oldest(struct mct_cand *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n;

	while (hi - lo > 1 && k > lo && k < hi) {
		uint64_t pivot = v[lo + (hi - lo - 1) / 2].lease;
		size_t i = lo, j = hi - 1;

		for (;;) {
			while (v[i].lease < pivot)
				i++;
			while (v[j].lease > pivot)
				j--;
			if (i >= j)
				break;
			struct mct_cand tmp = v[i];

			v[i] = v[j];
			v[j] = tmp;
			i++;
			j--;
		}
		/* Now v[lo..j] <= pivot <= v[j+1..hi), lo <= j < hi - 1. */
		if (k <= j)
			hi = j + 1;
		else
			lo = j + 1;
	}
}

static void
evict_set(struct tide_mc_table *t, struct mct_cand *v, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		t->evicted_keys++;
		/* Bytes freed, as stock's master_evicted_size_bytes: size times replicas. */
		t->evicted_bytes += v[i].obj->size * v[i].obj->nrep;
		mct_obj_erase(t, v[i].obj, MCT_FREE_NOW, 0);
	}
}

void
mct_evict(struct tide_mc_table *t, uint64_t now)
{
	double used, target, lower;
	struct mct_cand *nopin = NULL, *soft = NULL;
	size_t nn = 0, ns = 0, base = 0, unread = 0, k1, k2;

	if (!t->capacity || t->o.eviction_ratio <= 0) {
		/* A put that failed with no segment mounted asks for nothing here: a
		 * round left pending would evict, at some later tick, objects put into
		 * a segment mounted since. */
		t->need_evict = false;
		return;
	}
	/* Unused lease space is not data: a client's reservation must not evict
	 * objects (a 16 MiB lease in a 16 MiB segment evicted every object put
	 * into it at the next tick), nor must it once the lease ended and its
	 * space waits out the grace period as discarded buffers (every idle
	 * client's lease ends so). Committed objects count as any object; a full
	 * segment still fails PutStart, whose need_evict runs a round as stock's. */
	used = (double)(t->alloc_bytes - t->leased_bytes - t->lease_disc_bytes) /
	       (double)t->capacity;
	if (!(used > t->o.eviction_high_watermark_ratio) && !t->need_evict)
		return;
	t->need_evict = false;
	t->eviction_attempts++; /* a round that evicts nothing still counts, as stock's */
	target = fmax(t->o.eviction_ratio,
		      used - t->o.eviction_high_watermark_ratio + t->o.eviction_ratio);
	lower = fmax(target / 2, used - t->o.eviction_high_watermark_ratio);
	nopin = malloc((t->nobj + 1) * sizeof(*nopin));
	soft = malloc((t->nobj + 1) * sizeof(*soft));
	if (!nopin || !soft)
		goto out;
	/* Census: the base counts every unpinned object with COMPLETE data,
	   leased or not; candidates are those whose lease has expired. Under
	   pin_unread an unread object is pinned like a hard-pinned one: outside
	   the base, so the round's share is taken from what may go at all. */
	for (uint64_t i = 0; i <= t->mask; i++) {
		struct mct_obj *o = t->slot[i];

		if (!t->ctrl[i] || (o->flags & MCT_OF_HARD_PIN) || !readable(o))
			continue;
		if (t->o.pin_unread && !(o->flags & MCT_OF_READ)) {
			unread++;
			continue;
		}
		base++;
		if (now < o->lease_ms)
			continue;
		if ((o->flags & MCT_OF_SOFT_PIN) && o->soft_ms > now) {
			if (t->o.allow_evict_soft_pinned_objects)
				soft[ns++] = (struct mct_cand){o->lease_ms, o};
		} else {
			nopin[nn++] = (struct mct_cand){o->lease_ms, o};
		}
	}
	t->evict_skipped_unread += unread;
	if (!base) {
		if (unread)
			TIDE_LOG_RATELIMIT(
				NOTICE, 10,
				"eviction: used %.3f and all %zu unpinned objects are "
				"unread (pin_unread): puts get NO_AVAILABLE_HANDLE until "
				"readers catch up or objects are removed",
				used, unread);
		goto out;
	}
	k1 = (size_t)ceil((double)base * target);
	if (k1 > nn)
		k1 = nn;
	mct_select_oldest(nopin, nn, k1);
	evict_set(t, nopin, k1);
	/* Second pass: soft-pinned objects, only up to the lower bound. */
	k2 = (size_t)ceil((double)base * lower);
	k2 = k2 > k1 ? k2 - k1 : 0;
	if (k2 > ns)
		k2 = ns;
	mct_select_oldest(soft, ns, k2);
	evict_set(t, soft, k2);
	if (k1 + k2) {
		t->eviction_rounds++;
		TIDE_LOG(INFO,
			 "eviction: used %.3f, evicted %zu unpinned + %zu soft-pinned of %zu (%zu "
			 "unread kept)",
			 used, k1, k2, base, unread);
	}
out:
	free(nopin);
	free(soft);
}
