/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Master table, second half: creation, result arena, segments, client
 * liveness, delayed buffer release, tick and metrics (tide_mc_table.h).
 * Segments and clients are few (one or a handful per client process), so
 * they live in flat arrays searched linearly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "tide_log.h"
#include "mc_table_int.h"
#include "tide_rng.h"

/* ------------------------------------------------------------------------------------------ */
/* Options, create, destroy                                                                    */
/* ------------------------------------------------------------------------------------------ */

void
tide_mc_table_opts_init(struct tide_mc_table_opts *opts, size_t opts_size)
{
	struct tide_mc_table_opts d = {
		.opts_size = sizeof(d),
		.default_kv_lease_ttl_ms = 10000,
		.default_kv_soft_pin_ttl_ms = 30ull * 60 * 1000,
		.max_kv_soft_pin_ttl_ms = 24ull * 3600 * 1000,
		.allow_evict_soft_pinned_objects = true,
		.eviction_ratio = 0.05,
		.eviction_high_watermark_ratio = 0.90,
		.client_ttl_ms = 10000,
		.put_start_discard_timeout_ms = 30000,
		.put_start_release_timeout_ms = 600000,
		.seg_granule = TIDE_SEG_GRANULE_DEFAULT,
		.seg_max_blocks = 1u << 22,
		.seed = 0,
		.pin_unread = false,
		.regex_match_limit = TIDE_MC_TABLE_REGEX_MATCH_LIMIT,
		.regex_memory_limit = TIDE_MC_TABLE_REGEX_MEMORY,
		.regex_timeout_ms = TIDE_MC_TABLE_REGEX_TIMEOUT_MS,
		.lease_ttl_ms = 30000,
		.lease_seg_share = 8,
	};

	if (!opts)
		return;
	if (opts_size > sizeof(d))
		opts_size = sizeof(d);
	d.opts_size = opts_size;
	memcpy(opts, &d, opts_size);
}

int
tide_mc_table_create(const struct tide_mc_table_opts *opts, struct tide_mc_table **out)
{
	struct tide_mc_table *t;
	const struct tide_mc_table_opts *o = opts;
	uint64_t seed;

	if (!o || !out || o->opts_size < sizeof(*o))
		return -EINVAL;
	if (!(o->eviction_ratio >= 0 && o->eviction_ratio <= 1) ||
	    !(o->eviction_high_watermark_ratio >= 0 && o->eviction_high_watermark_ratio <= 1) ||
	    o->seg_granule < TIDE_SEG_GRANULE_MIN || o->seg_granule > TIDE_SEG_GRANULE_MAX ||
	    (o->seg_granule & (o->seg_granule - 1)) || o->seg_max_blocks < 2 ||
	    o->default_kv_soft_pin_ttl_ms > o->max_kv_soft_pin_ttl_ms ||
	    o->put_start_release_timeout_ms <= o->put_start_discard_timeout_ms ||
	    o->regex_match_limit == 0 || o->regex_memory_limit < TIDE_MC_TABLE_REGEX_MEMORY_MIN ||
	    o->regex_timeout_ms == 0 || o->lease_ttl_ms == 0 || o->lease_seg_share == 0)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->o = *o;
	seed = o->seed;
	if (!seed && getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t;
	/* splitmix64 expands the seed into the hash key and the PRNG state. */
	for (int i = 0; i < 3; i++) {
		uint64_t z = tide_rng_next(&seed);

		if (i == 0)
			t->hk0 = z;
		else if (i == 1)
			t->hk1 = z;
		else
			t->rng = z | 1;
	}
	t->next_rep_id = 1;
	/* Lease ids start at a random point of a 2^62 space (ids only grow: the lease
	 * array stays sorted): a client that kept a lease of a previous leader or of
	 * a restarted master cannot name one of this table's by accident. */
	t->next_lease_id = 1 + ((t->rng * 0x9e3779b97f4a7c15ull) >> 2);
	if (pthread_mutex_init(&t->lock, NULL) != 0) {
		free(t);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&t->re_lock, NULL) != 0) {
		pthread_mutex_destroy(&t->lock);
		free(t);
		return -ENOMEM;
	}
	if (mct_ht_init(t) != 0) {
		pthread_mutex_destroy(&t->re_lock);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

static void
seg_free(struct mct_seg *s)
{
	tide_seg_destroy(s->alloc);
	free(s->name);
	free(s->endpoint);
	free(s->protocol);
	free(s);
}

void
tide_mc_table_destroy(struct tide_mc_table *t)
{
	if (!t)
		return;
	for (uint64_t i = 0; t->ctrl && i <= t->mask; i++)
		if (t->ctrl[i])
			free(t->slot[i]);
	mct_ht_fini(t);
	for (uint32_t i = 0; i < t->nseg_slots; i++)
		if (t->segs[i])
			seg_free(t->segs[i]);
	free(t->segs);
	mct_leases_free(t); /* their pieces went with the segments' allocators */
	free(t->proc);
	free(t->disc);
	free(t->clients);
	free(t->jbuf);
	pthread_mutex_destroy(&t->re_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

uint64_t
mct_rand(struct tide_mc_table *t)
{
	/* xorshift64*: placement only needs to spread load, not resist prediction. */
	t->rng ^= t->rng >> 12;
	t->rng ^= t->rng << 25;
	t->rng ^= t->rng >> 27;
	return t->rng * UINT64_C(0x2545f4914f6cdd1d);
}

/* ------------------------------------------------------------------------------------------ */
/* Arena                                                                                       */
/* ------------------------------------------------------------------------------------------ */

struct achunk {
	struct achunk *prev;
	size_t cap;
	max_align_t data[];
};

void *
mct_arena_alloc(struct tide_mc_table_arena *a, size_t n)
{
	struct achunk *c = a->chunk;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (!c || a->cap - a->used < n) {
		size_t cap = a->cap ? a->cap * 2 : 4096;

		while (cap < n)
			cap *= 2;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->prev = a->chunk;
		c->cap = cap;
		a->chunk = c;
		a->cap = cap;
		a->used = 0;
	}
	p = (char *)c->data + a->used;
	a->used += n;
	return p;
}

int
mct_arena_str(struct tide_mc_table_arena *a, const char *s, size_t len, struct tide_mc_str *out)
{
	char *p = mct_arena_alloc(a, len + 1);

	if (!p)
		return -ENOMEM;
	memcpy(p, s, len);
	p[len] = 0;
	out->ptr = p;
	out->len = len;
	return 0;
}

void
tide_mc_table_arena_reset(struct tide_mc_table_arena *a)
{
	struct achunk *c;

	if (!a || !a->chunk)
		return;
	c = a->chunk;
	/* Keep the newest (largest) chunk: steady-state replies then need no malloc. */
	while (c->prev) {
		struct achunk *p = c->prev;

		c->prev = p->prev;
		free(p);
	}
	a->used = 0;
}

void
tide_mc_table_arena_release(struct tide_mc_table_arena *a)
{
	struct achunk *c;

	if (!a)
		return;
	for (c = a->chunk; c;) {
		struct achunk *p = c->prev;

		free(c);
		c = p;
	}
	a->chunk = NULL;
	a->used = 0;
	a->cap = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Buffers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

void
mct_rep_account(struct tide_mc_table *t, struct mct_seg *s, uint64_t len, int dir)
{
	uint64_t e = mct_extent(t, len);

	if (dir > 0) {
		s->used += e;
		s->nrep++;
		t->alloc_bytes += e;
	} else {
		s->used -= e;
		s->nrep--;
		t->alloc_bytes -= e;
	}
}

void
mct_rep_free(struct tide_mc_table *t, const struct mct_rep *r, uint64_t len)
{
	struct mct_seg *s = t->segs[r->seg];
	int rc = tide_seg_free(s->alloc, r->off);

	if (rc)
		TIDE_LOG(ERR, "segment %.*s: free of offset %llu failed (%d)", (int)s->name_len,
			 s->name, (unsigned long long)r->off, rc);
	else
		mct_rep_account(t, s, len, -1);
}

void
mct_discard(struct tide_mc_table *t, const struct mct_rep *r, uint64_t len, uint64_t release_ms,
	    enum mct_disc_kind kind)
{
	/* The object is counted discarded at its first buffer and released when that
	 * one is (stock counts a put's discarded replicas as one entry). */
	if (kind == MCT_DISC_PUT_HEAD)
		t->put_discards++;
	if (t->ndisc == t->disc_cap) {
		size_t nc = t->disc_cap ? t->disc_cap * 2 : 16;
		struct mct_discard *nd = realloc(t->disc, nc * sizeof(*nd));

		if (!nd) {
			/* Cannot remember it: freeing now beats leaking the space. */
			mct_rep_free(t, r, len);
			t->put_releases += kind == MCT_DISC_PUT_HEAD;
			return;
		}
		t->disc = nd;
		t->disc_cap = nc;
	}
	t->disc[t->ndisc++] = (struct mct_discard){r->off, len, release_ms, r->seg, (uint8_t)kind};
	if (kind == MCT_DISC_LEASE)
		t->lease_disc_bytes += len;
	else
		t->put_discard_bytes += len;
}

/* Release due buffers (seg == UINT32_MAX), or forget those of segment seg. */
static void
discards_sweep(struct tide_mc_table *t, uint32_t seg, uint64_t now)
{
	size_t i = 0;

	while (i < t->ndisc) {
		struct mct_discard *d = &t->disc[i];

		if (seg == UINT32_MAX ? d->release_ms > now : d->seg != seg) {
			i++;
			continue;
		}
		if (seg == UINT32_MAX) {
			struct mct_rep r = {.off = d->off, .seg = d->seg};

			mct_rep_free(t, &r, d->len);
		} else {
			mct_rep_account(t, t->segs[seg], d->len, -1);
		}
		if (d->kind == MCT_DISC_LEASE)
			t->lease_disc_bytes -= d->len;
		else
			t->put_discard_bytes -= d->len;
		t->put_releases += d->kind == MCT_DISC_PUT_HEAD;
		t->disc[i] = t->disc[--t->ndisc];
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Clients                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static struct mct_client *
client_touch(struct tide_mc_table *t, const struct tide_mc_uuid *id, uint64_t now)
{
	struct mct_client *c = NULL;

	for (size_t i = 0; i < t->nclients; i++)
		if (mct_uuid_eq(&t->clients[i].id, id))
			c = &t->clients[i];
	if (!c) {
		if (t->nclients == t->client_cap) {
			size_t nc = t->client_cap ? t->client_cap * 2 : 16;
			struct mct_client *n = realloc(t->clients, nc * sizeof(*n));

			if (!n)
				return NULL;
			t->clients = n;
			t->client_cap = nc;
		}
		c = &t->clients[t->nclients++];
		c->id = *id;
		c->ok = false;
	}
	c->expiry_ms = now + t->o.client_ttl_ms;
	return c;
}

/* ------------------------------------------------------------------------------------------ */
/* Segments                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static int32_t
seg_find(const struct tide_mc_table *t, const struct tide_mc_uuid *id)
{
	for (uint32_t i = 0; i < t->nseg_slots; i++)
		if (t->segs[i] && mct_uuid_eq(&t->segs[i]->id, id))
			return (int32_t)i;
	return -1;
}

static bool
str_eq(const char *a, size_t alen, const struct tide_mc_str *b)
{
	return alen == b->len && (!alen || memcmp(a, b->ptr, alen) == 0);
}

static bool
seg_same(const struct mct_seg *s, const struct tide_mc_segment *g,
	 const struct tide_mc_uuid *client)
{
	return mct_uuid_eq(&s->client, client) && s->base == g->base && s->size == g->size &&
	       str_eq(s->name, s->name_len, &g->name) &&
	       str_eq(s->endpoint, s->endpoint_len, &g->te_endpoint) &&
	       str_eq(s->protocol, s->protocol_len, &g->protocol);
}

static bool
str_ok(const struct tide_mc_str *s)
{
	return !s->len || s->ptr;
}

static int
seg_valid(const struct tide_mc_table *t, const struct tide_mc_segment *g)
{
	if (!g->base || g->size < t->o.seg_granule || g->size > TIDE_SEG_SIZE_MAX ||
	    g->base + g->size < g->base || !str_ok(&g->name) || !str_ok(&g->te_endpoint) ||
	    !str_ok(&g->protocol))
		return TIDE_MC_EC_INVALID_PARAMS;
	return 0;
}

static char *
dup_str(const struct tide_mc_str *s)
{
	char *p = malloc(s->len + 1);

	if (p) {
		if (s->len)
			memcpy(p, s->ptr, s->len);
		p[s->len] = 0;
	}
	return p;
}

static int
seg_add(struct tide_mc_table *t, const struct tide_mc_segment *g, const struct tide_mc_uuid *client)
{
	struct tide_seg_opts so;
	struct mct_seg *s = calloc(1, sizeof(*s));
	uint32_t idx;

	if (!s)
		return TIDE_MC_EC_INTERNAL_ERROR;
	s->id = g->id;
	s->client = *client;
	s->base = g->base;
	s->size = g->size;
	s->managed = g->size & ~(uint64_t)(t->o.seg_granule - 1);
	s->name = dup_str(&g->name);
	s->endpoint = dup_str(&g->te_endpoint);
	s->protocol = dup_str(&g->protocol);
	s->name_len = g->name.len;
	s->endpoint_len = g->te_endpoint.len;
	s->protocol_len = g->protocol.len;
	tide_seg_opts_init(&so, sizeof(so));
	so.size = s->managed;
	so.granule = t->o.seg_granule;
	so.max_blocks = t->o.seg_max_blocks;
	if (!s->name || !s->endpoint || !s->protocol || tide_seg_create(&so, &s->alloc) != 0)
		goto fail;
	s->name_id = t->next_name_id++;
	for (uint32_t i = 0; i < t->nseg_slots; i++) {
		const struct mct_seg *o = t->segs[i];

		if (o && o->name_len == s->name_len && memcmp(o->name, s->name, s->name_len) == 0) {
			s->name_id = o->name_id;
			break;
		}
	}
	for (idx = 0; idx < t->nseg_slots && t->segs[idx]; idx++)
		;
	if (idx == t->nseg_slots) {
		uint32_t nc = t->nseg_slots ? t->nseg_slots * 2 : 8;
		struct mct_seg **n = realloc(t->segs, nc * sizeof(*n));

		if (!n)
			goto fail;
		memset(n + t->nseg_slots, 0, (nc - t->nseg_slots) * sizeof(*n));
		t->segs = n;
		t->nseg_slots = nc;
	}
	t->segs[idx] = s;
	t->nsegs++;
	t->capacity += s->managed;
	mct_j_seg_add(t, s);
	TIDE_LOG(INFO, "mounted segment %.*s (%.*s) base 0x%llx size %llu", (int)s->name_len,
		 s->name, (int)s->endpoint_len, s->endpoint, (unsigned long long)s->base,
		 (unsigned long long)s->size);
	return 0;
fail:
	seg_free(s);
	return TIDE_MC_EC_INTERNAL_ERROR;
}

static void
seg_unmount(struct tide_mc_table *t, uint32_t idx)
{
	struct mct_seg *s = t->segs[idx];

	discards_sweep(t, idx, 0);
	mct_lease_drop_seg(t, idx);
	/* If the scan cannot allocate its list, replicas would point at a freed
	   slot: keep the segment (draining) and retry at the next tick. */
	if (s->nrep && mct_drop_seg_replicas(t, idx) != 0) {
		s->draining = true;
		s->unmount_at = 0;
		return;
	}
	TIDE_LOG(INFO, "unmounted segment %.*s", (int)s->name_len, s->name);
	mct_j_seg_del(t, s);
	t->capacity -= s->managed;
	t->alloc_bytes -= s->used;
	t->segs[idx] = NULL;
	t->nsegs--;
	seg_free(s);
}

int
mct_seg_add(struct tide_mc_table *t, const struct tide_mc_segment *g,
	    const struct tide_mc_uuid *client)
{
	return seg_add(t, g, client);
}

int32_t
mct_seg_find(const struct tide_mc_table *t, const struct tide_mc_uuid *id)
{
	return seg_find(t, id);
}

void
mct_seg_unmount(struct tide_mc_table *t, uint32_t idx)
{
	seg_unmount(t, idx);
}

void
tide_mc_table_clients_refresh(struct tide_mc_table *t, uint64_t now_ms)
{
	if (!t)
		return;
	mct_lock(t);
	for (size_t i = 0; i < t->nclients; i++)
		t->clients[i].expiry_ms = now_ms + t->o.client_ttl_ms;
	mct_unlock(t);
}

int
mct_client_add(struct tide_mc_table *t, const struct tide_mc_uuid *id, uint64_t now)
{
	return client_touch(t, id, now) != NULL ? 0 : -ENOMEM;
}

int
tide_mc_table_mount_segment(struct tide_mc_table *t, const struct tide_mc_segment *seg,
			    const struct tide_mc_uuid *client, uint64_t now_ms)
{
	int rc;

	if (!t || !seg || !client)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	rc = seg_valid(t, seg);
	if (!rc && !client_touch(t, client, now_ms))
		rc = TIDE_MC_EC_INTERNAL_ERROR;
	if (!rc && seg_find(t, &seg->id) < 0)
		rc = seg_add(t, seg, client);
	t->requests[TIDE_MC_TABLE_OP_MOUNT]++;
	t->failures[TIDE_MC_TABLE_OP_MOUNT] += rc != 0;
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_remount_segments(struct tide_mc_table *t, const struct tide_mc_segment *segs,
			       size_t n, const struct tide_mc_uuid *client, uint64_t now_ms)
{
	struct mct_client *c;
	int rc = 0;

	if (!t || !client || (n && !segs))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	for (size_t i = 0; i < n && !rc; i++) {
		int32_t k = seg_find(t, &segs[i].id);

		rc = k >= 0 ? (seg_same(t->segs[k], &segs[i], client) ? 0
								      : TIDE_MC_EC_INVALID_PARAMS)
			    : seg_valid(t, &segs[i]);
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (seg_find(t, &segs[i].id) < 0)
			rc = seg_add(t, &segs[i], client);
	if (!rc) {
		c = client_touch(t, client, now_ms);
		if (c)
			c->ok = true; /* the only place a client becomes OK (spec 3.4) */
		else
			rc = TIDE_MC_EC_INTERNAL_ERROR;
	}
	t->requests[TIDE_MC_TABLE_OP_REMOUNT]++;
	t->failures[TIDE_MC_TABLE_OP_REMOUNT] += rc != 0;
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_unmount_segment(struct tide_mc_table *t, const struct tide_mc_uuid *segment_id,
			      const struct tide_mc_uuid *client, uint64_t now_ms)
{
	int32_t k;

	(void)now_ms;
	if (!t || !segment_id || !client)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	k = seg_find(t, segment_id);
	if (k >= 0)
		seg_unmount(t, (uint32_t)k);
	t->requests[TIDE_MC_TABLE_OP_UNMOUNT]++;
	mct_unlock(t);
	return 0;
}

int
tide_mc_table_graceful_unmount_segment(struct tide_mc_table *t,
				       const struct tide_mc_uuid *segment_id,
				       const struct tide_mc_uuid *client, uint64_t grace_period_ms,
				       uint64_t now_ms)
{
	int32_t k;

	if (!t || !segment_id || !client)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	k = seg_find(t, segment_id);
	if (k >= 0 && !grace_period_ms) {
		seg_unmount(t, (uint32_t)k);
	} else if (k >= 0) {
		t->segs[k]->draining = true;
		t->segs[k]->unmount_at = now_ms + grace_period_ms;
	}
	t->requests[TIDE_MC_TABLE_OP_GRACEFUL_UNMOUNT]++;
	mct_unlock(t);
	return 0;
}

int
tide_mc_table_ping(struct tide_mc_table *t, const struct tide_mc_uuid *client, uint64_t now_ms,
		   struct tide_mc_ping_info *out)
{
	struct mct_client *c;
	int rc = 0;

	if (!t || !client || !out)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	c = client_touch(t, client, now_ms);
	out->view_version_id = 0;
	out->client_status = c && c->ok ? TIDE_MC_CLIENT_OK : TIDE_MC_CLIENT_NEED_REMOUNT;
	if (!c)
		rc = TIDE_MC_EC_INTERNAL_ERROR;
	t->requests[TIDE_MC_TABLE_OP_PING]++;
	t->failures[TIDE_MC_TABLE_OP_PING] += rc != 0;
	mct_unlock(t);
	return rc;
}

/* Host of a te_endpoint: the text before the first ':' (as stock QueryIp). */
static size_t
host_len(const struct mct_seg *s)
{
	const char *c = memchr(s->endpoint, ':', s->endpoint_len);

	return c ? (size_t)(c - s->endpoint) : s->endpoint_len;
}

static int
query_ip_one(struct tide_mc_table *t, const struct tide_mc_uuid *id, struct tide_mc_table_arena *a,
	     struct tide_mc_ip_entry *e, bool *found)
{
	size_t n = 0;

	*found = false;
	e->client_id = *id;
	e->ips.v = NULL;
	e->ips.n = 0;
	for (uint32_t i = 0; i < t->nseg_slots; i++) {
		const struct mct_seg *s = t->segs[i];

		if (s && mct_uuid_eq(&s->client, id)) {
			*found = true;
			n += s->endpoint_len != 0;
		}
	}
	if (!n)
		return 0;
	e->ips.v = mct_arena_alloc(a, n * sizeof(*e->ips.v));
	if (!e->ips.v)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->nseg_slots; i++) {
		const struct mct_seg *s = t->segs[i];
		size_t hl, k;

		if (!s || !mct_uuid_eq(&s->client, id) || !s->endpoint_len)
			continue;
		hl = host_len(s);
		for (k = 0; k < e->ips.n; k++)
			if (e->ips.v[k].len == hl && memcmp(e->ips.v[k].ptr, s->endpoint, hl) == 0)
				break;
		if (k == e->ips.n && mct_arena_str(a, s->endpoint, hl, &e->ips.v[e->ips.n++]))
			return -ENOMEM;
	}
	return 0;
}

int
tide_mc_table_batch_query_ip(struct tide_mc_table *t, const struct tide_mc_uuid *clients, size_t n,
			     struct tide_mc_table_arena *a, struct tide_mc_ip_entry_vec *out)
{
	uint64_t f0, nfail = 0;
	int rc = 0;

	if (!t || !a || !out || (n && !clients))
		return TIDE_MC_EC_INVALID_PARAMS;
	out->v = NULL;
	out->n = 0;
	mct_lock(t);
	f0 = t->failures[TIDE_MC_TABLE_OP_BATCH_QUERY_IP];
	if (n) {
		out->v = mct_arena_alloc(a, n * sizeof(*out->v));
		if (!out->v)
			rc = TIDE_MC_EC_INTERNAL_ERROR;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		bool found, dup = false;

		for (size_t k = 0; k < out->n; k++)
			dup = dup || mct_uuid_eq(&out->v[k].client_id, &clients[i]);
		if (dup)
			continue; /* a map: one entry per client */
		if (query_ip_one(t, &clients[i], a, &out->v[out->n], &found))
			rc = TIDE_MC_EC_INTERNAL_ERROR;
		else if (found)
			out->n++;
		else
			nfail++;
	}
	/* Per client id, as stock: one not found (or all, on an error) failed. */
	t->requests[TIDE_MC_TABLE_OP_BATCH_QUERY_IP] += n;
	t->failures[TIDE_MC_TABLE_OP_BATCH_QUERY_IP] += rc ? n : nfail;
	mct_count_batch(t, TIDE_MC_TABLE_OP_BATCH_QUERY_IP, n, f0);
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_query_segment_status(struct tide_mc_table *t, const struct tide_mc_str *name,
				   int32_t *status)
{
	int rc = TIDE_MC_EC_SEGMENT_NOT_FOUND;

	if (!t || !name || !status || !str_ok(name))
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	*status = TIDE_MC_SEGMENT_UNDEFINED;
	for (uint32_t i = 0; i < t->nseg_slots; i++) {
		const struct mct_seg *s = t->segs[i];

		if (!s || !str_eq(s->name, s->name_len, name))
			continue;
		rc = 0;
		if (!s->draining)
			*status = TIDE_MC_SEGMENT_OK;
		else if (*status != TIDE_MC_SEGMENT_OK)
			*status = TIDE_MC_SEGMENT_UNMOUNTING;
	}
	t->requests[TIDE_MC_TABLE_OP_QUERY_SEGMENT_STATUS]++;
	t->failures[TIDE_MC_TABLE_OP_QUERY_SEGMENT_STATUS] += rc != 0;
	mct_unlock(t);
	return rc;
}

int
tide_mc_table_segments_list(struct tide_mc_table *t, struct tide_mc_table_arena *a,
			    struct tide_mc_table_segment_info **out, size_t *n)
{
	int rc = 0;
	size_t k = 0;

	if (!t || !a || !out || !n)
		return TIDE_MC_EC_INVALID_PARAMS;
	mct_lock(t);
	*out = t->nsegs ? mct_arena_alloc(a, t->nsegs * sizeof(**out)) : NULL;
	if (t->nsegs && !*out)
		rc = TIDE_MC_EC_INTERNAL_ERROR;
	for (uint32_t i = 0; i < t->nseg_slots && !rc; i++) {
		const struct mct_seg *s = t->segs[i];
		struct tide_mc_table_segment_info *e;

		if (!s)
			continue;
		e = &(*out)[k++];
		e->id = s->id;
		e->client_id = s->client;
		e->base = s->base;
		e->size = s->managed;
		e->used = s->used;
		e->status = s->draining ? TIDE_MC_SEGMENT_UNMOUNTING : TIDE_MC_SEGMENT_OK;
		if (mct_arena_str(a, s->name, s->name_len, &e->name) ||
		    mct_arena_str(a, s->endpoint, s->endpoint_len, &e->te_endpoint) ||
		    mct_arena_str(a, s->protocol, s->protocol_len, &e->protocol))
			rc = TIDE_MC_EC_INTERNAL_ERROR;
	}
	*n = rc ? 0 : k;
	mct_unlock(t);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Tick and metrics                                                                            */
/* ------------------------------------------------------------------------------------------ */

static void
expire_clients(struct tide_mc_table *t, uint64_t now)
{
	size_t i = 0;

	while (i < t->nclients) {
		struct mct_client c = t->clients[i];

		if (c.expiry_ms > now) {
			i++;
			continue;
		}
		TIDE_LOG(NOTICE, "client %016llx%016llx missed its pings: unmounting its segments",
			 (unsigned long long)c.id.first, (unsigned long long)c.id.second);
		t->clients[i] = t->clients[--t->nclients];
		t->expired_clients++;
		for (uint32_t k = 0; k < t->nseg_slots; k++)
			if (t->segs[k] && mct_uuid_eq(&t->segs[k]->client, &c.id))
				seg_unmount(t, k);
		mct_reclaim_puts(t, &c.id, now);
		mct_lease_drop_client(t, &c.id);
	}
}

void
tide_mc_table_tick(struct tide_mc_table *t, uint64_t now_ms)
{
	if (!t)
		return;
	mct_lock(t);
	expire_clients(t, now_ms);
	for (uint32_t k = 0; k < t->nseg_slots; k++)
		if (t->segs[k] && t->segs[k]->draining && t->segs[k]->unmount_at <= now_ms)
			seg_unmount(t, k);
	discards_sweep(t, UINT32_MAX, now_ms);
	mct_leases_expire(t, now_ms);
	mct_reclaim_puts(t, NULL, now_ms);
	mct_evict(t, now_ms);
	mct_unlock(t);
}

void
tide_mc_table_metrics_get(struct tide_mc_table *t, struct tide_mc_table_metrics *m)
{
	if (!t || !m)
		return;
	memset(m, 0, sizeof(*m));
	mct_lock(t);
	m->keys = t->nobj;
	m->processing_keys = t->nproc;
	m->soft_pinned_keys = t->soft_pinned;
	m->hard_pinned_keys = t->hard_pinned;
	m->value_bytes = t->value_bytes;
	m->allocated_bytes = t->alloc_bytes;
	m->capacity_bytes = t->capacity;
	m->segments = t->nsegs;
	m->clients = t->nclients;
	for (size_t i = 0; i < t->nclients; i++)
		m->ok_clients += t->clients[i].ok;
	m->discarded_buffers = t->ndisc;
	m->eviction_rounds = t->eviction_rounds;
	m->evicted_keys = t->evicted_keys;
	m->evicted_bytes = t->evicted_bytes;
	m->expired_clients = t->expired_clients;
	m->reclaimed_puts = t->reclaimed_puts;
	m->evict_skipped_unread = t->evict_skipped_unread;
	m->eviction_attempts = t->eviction_attempts;
	memcpy(m->requests, t->requests, sizeof(m->requests));
	memcpy(m->failures, t->failures, sizeof(m->failures));
	memcpy(m->batch_calls, t->batch_calls, sizeof(m->batch_calls));
	memcpy(m->batch_failed_calls, t->batch_failed_calls, sizeof(m->batch_failed_calls));
	memcpy(m->batch_partial_calls, t->batch_partial_calls, sizeof(m->batch_partial_calls));
	m->alloc_failures = t->alloc_failures;
	m->partial_allocations = t->partial_allocations;
	m->put_discards = t->put_discards;
	m->put_releases = t->put_releases;
	m->put_discard_bytes = t->put_discard_bytes;
	m->gets = t->gets;
	m->gets_found = t->gets_found;
	m->gets_found_bytes = t->gets_found_bytes;
	memcpy(m->vsize_bucket, t->vsize_bucket, sizeof(m->vsize_bucket));
	m->vsize_sum = t->vsize_sum;
	m->leases = t->nleases;
	m->leased_bytes = t->leased_bytes;
	m->discarded_bytes = 0; /* O(discards): a scrape, not a hot path */
	for (size_t i = 0; i < t->ndisc; i++)
		m->discarded_bytes += mct_extent(t, t->disc[i].len);
	mct_unlock(t);
}

const char *
tide_mc_table_op_name(enum tide_mc_table_op op)
{
	static const char *const names[TIDE_MC_TABLE_OP_COUNT] = {
		[TIDE_MC_TABLE_OP_MOUNT] = "mount_segment",
		[TIDE_MC_TABLE_OP_REMOUNT] = "remount_segment",
		[TIDE_MC_TABLE_OP_UNMOUNT] = "unmount_segment",
		[TIDE_MC_TABLE_OP_GRACEFUL_UNMOUNT] = "graceful_unmount_segment",
		[TIDE_MC_TABLE_OP_PING] = "ping",
		[TIDE_MC_TABLE_OP_PUT_START] = "put_start",
		[TIDE_MC_TABLE_OP_PUT_END] = "put_end",
		[TIDE_MC_TABLE_OP_PUT_REVOKE] = "put_revoke",
		[TIDE_MC_TABLE_OP_UPSERT_START] = "upsert_start",
		[TIDE_MC_TABLE_OP_UPSERT_END] = "upsert_end",
		[TIDE_MC_TABLE_OP_UPSERT_REVOKE] = "upsert_revoke",
		[TIDE_MC_TABLE_OP_BATCH_PUT_START] = "batch_put_start",
		[TIDE_MC_TABLE_OP_BATCH_PUT_END] = "batch_put_end",
		[TIDE_MC_TABLE_OP_BATCH_PUT_REVOKE] = "batch_put_revoke",
		[TIDE_MC_TABLE_OP_BATCH_UPSERT_START] = "batch_upsert_start",
		[TIDE_MC_TABLE_OP_BATCH_UPSERT_END] = "batch_upsert_end",
		[TIDE_MC_TABLE_OP_BATCH_UPSERT_REVOKE] = "batch_upsert_revoke",
		[TIDE_MC_TABLE_OP_GET_REPLICA_LIST] = "get_replica_list",
		[TIDE_MC_TABLE_OP_BATCH_GET_REPLICA_LIST] = "batch_get_replica_list",
		[TIDE_MC_TABLE_OP_GET_REPLICA_LIST_BY_REGEX] = "get_replica_list_by_regex",
		[TIDE_MC_TABLE_OP_EXIST_KEY] = "exist_key",
		[TIDE_MC_TABLE_OP_BATCH_EXIST_KEY] = "batch_exist_key",
		[TIDE_MC_TABLE_OP_REMOVE] = "remove",
		[TIDE_MC_TABLE_OP_BATCH_REMOVE] = "batch_remove",
		[TIDE_MC_TABLE_OP_REMOVE_BY_REGEX] = "remove_by_regex",
		[TIDE_MC_TABLE_OP_REMOVE_ALL] = "remove_all",
		[TIDE_MC_TABLE_OP_BATCH_QUERY_IP] = "batch_query_ip",
		[TIDE_MC_TABLE_OP_QUERY_SEGMENT_STATUS] = "query_segment_status",
		[TIDE_MC_TABLE_OP_LEASE_GRANT] = "lease_grant",
		[TIDE_MC_TABLE_OP_LEASE_COMMIT] = "lease_commit",
		[TIDE_MC_TABLE_OP_LEASE_RELEASE] = "lease_release",
		[TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR] = "batch_replica_clear",
	};

	return (unsigned)op < TIDE_MC_TABLE_OP_COUNT ? names[op] : "unknown";
}
