/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master object table as the table tests drive it (see mc_table_fixture.h).
 */
#include <stdio.h>
#include <string.h>

#include "mc_table_fixture.h"
#include "tide_ut.h"

struct tide_mc_str
mc_fixture_str(const char *s)
{
	return (struct tide_mc_str){(char *)s, strlen(s)};
}

struct tide_mc_table *
mc_fixture_table(uint32_t max_blocks)
{
	struct tide_mc_table_opts o;
	struct tide_mc_table *t = NULL;

	tide_mc_table_opts_init(&o, sizeof(o));
	o.seed = 7;
	o.seg_max_blocks = max_blocks;
	CU_ASSERT_FATAL(tide_mc_table_create(&o, &t) == 0);
	return t;
}

struct tide_mc_segment
mc_fixture_segment(struct tide_mc_uuid id, const char *name, uint64_t base, uint64_t size,
		   const char *endpoint)
{
	struct tide_mc_segment g;

	memset(&g, 0, sizeof(g));
	g.id = id;
	g.name = mc_fixture_str(name);
	g.base = base;
	g.size = size;
	g.te_endpoint = mc_fixture_str(endpoint);
	g.protocol = mc_fixture_str("tcp");
	return g;
}

void
mc_fixture_destroy(struct tide_mc_table **t, struct tide_mc_table_arena *a)
{
	tide_mc_table_destroy(*t);
	*t = NULL;
	tide_mc_table_arena_release(a);
}

struct tide_mc_table_metrics
mc_fixture_metrics(struct tide_mc_table *t)
{
	struct tide_mc_table_metrics m;

	tide_mc_table_metrics_get(t, &m);
	return m;
}

void
mc_fixture_tick_alive(struct tide_mc_table *t, const struct tide_mc_uuid *client, uint64_t now)
{
	struct tide_mc_ping_info pi;

	CU_ASSERT_EQUAL(tide_mc_table_ping(t, client, now, &pi), 0);
	tide_mc_table_tick(t, now);
}

void
mc_fixture_mount(struct tide_mc_table *t, struct tide_mc_uuid id, const char *name, uint64_t base,
		 uint64_t size, const struct tide_mc_uuid *client)
{
	struct tide_mc_segment g = mc_fixture_segment(id, name, base, size, name);

	CU_ASSERT_EQUAL(tide_mc_table_mount_segment(t, &g, client, 0), 0);
}

size_t
mc_fixture_key(const struct mc_fixture_objects *o, int i, char *buf, size_t n)
{
	int w = snprintf(buf, n, "%s%0*d%s", o->prefix, o->digits, i, o->suffix ? o->suffix : "");
	size_t len = w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;

	while (len < o->pad_to && len + 1 < n)
		buf[len++] = 'k';
	buf[len] = '\0';
	return len;
}

int
mc_fixture_put(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i, uint64_t len,
	       uint64_t replicas, bool hard_pin, bool end)
{
	struct tide_mc_table_arena a = {0};
	struct tide_mc_replicate_config cfg;
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_opt_u64 csum = {.has = true, .val = o->csum_base + (unsigned)i};
	char name[MC_FIXTURE_KEY_MAX];
	struct tide_mc_str k;
	int rc;

	k.ptr = name;
	k.len = mc_fixture_key(o, i, name, sizeof(name));
	memset(&cfg, 0, sizeof(cfg));
	cfg.replica_num = replicas;
	cfg.with_hard_pin = hard_pin;
	rc = tide_mc_table_put_start(t, o->owner, &k, len, &cfg, 0, &a, &d);
	if (rc == 0 && end)
		CU_ASSERT_EQUAL(tide_mc_table_put_end(t, o->owner, &k, i % 2 ? &csum : NULL,
						      TIDE_MC_REPLICA_ALL, 0),
				0);
	tide_mc_table_arena_release(&a);
	return rc;
}

int
mc_fixture_remove(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i)
{
	char name[MC_FIXTURE_KEY_MAX];
	struct tide_mc_str k;

	k.ptr = name;
	k.len = mc_fixture_key(o, i, name, sizeof(name));
	return tide_mc_table_remove(t, &k, true, 0);
}

int
mc_fixture_query(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i,
		 struct tide_mc_table_arena *a, struct tide_mc_replica_list *out)
{
	char name[MC_FIXTURE_KEY_MAX];
	struct tide_mc_str k;
	int rc;

	k.ptr = name;
	k.len = mc_fixture_key(o, i, name, sizeof(name));
	rc = tide_mc_table_query_key(t, &k, 0, a, out);
	return rc == TIDE_MC_EC_REPLICA_IS_NOT_READY ? TIDE_MC_EC_OBJECT_NOT_FOUND : rc;
}

bool
mc_fixture_has_key(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i)
{
	struct tide_mc_table_arena a = {0};
	struct tide_mc_replica_list l;
	int rc = mc_fixture_query(t, o, i, &a, &l);

	tide_mc_table_arena_release(&a);
	return rc == 0;
}

static bool
str_eq(const struct tide_mc_str *a, const struct tide_mc_str *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->ptr, b->ptr, a->len) == 0);
}

static bool
same_replica(const struct tide_mc_replica_desc *p, const struct tide_mc_replica_desc *q)
{
	return p->kind == q->kind && p->status == q->status &&
	       p->u.memory.size == q->u.memory.size &&
	       p->u.memory.buffer_address == q->u.memory.buffer_address &&
	       str_eq(&p->u.memory.transport_endpoint, &q->u.memory.transport_endpoint);
}

bool
mc_fixture_same_key(struct tide_mc_table *x, struct tide_mc_table *y,
		    const struct mc_fixture_objects *o, int i)
{
	struct tide_mc_table_arena a = {0};
	struct tide_mc_replica_list lx, ly;
	int rx = mc_fixture_query(x, o, i, &a, &lx), ry = mc_fixture_query(y, o, i, &a, &ly);
	bool same = rx == ry;

	if (same && rx == 0) {
		same = lx.replicas.n == ly.replicas.n &&
		       lx.object_checksum.has == ly.object_checksum.has &&
		       (!lx.object_checksum.has ||
			lx.object_checksum.val == ly.object_checksum.val);
		for (size_t r = 0; same && r < lx.replicas.n; r++)
			same = same_replica(&lx.replicas.v[r], &ly.replicas.v[r]);
	}
	tide_mc_table_arena_release(&a);
	return same;
}

void
mc_fixture_assert_same_segments(struct tide_mc_table *x, struct tide_mc_table *y, bool usage)
{
	struct tide_mc_table_arena a = {0};
	struct tide_mc_table_segment_info *sx = NULL, *sy = NULL;
	struct tide_mc_table_metrics mx;
	size_t nx = 0, ny = 0;

	tide_mc_table_metrics_get(x, &mx);
	TIDE_UT_OK(tide_mc_table_segments_list(x, &a, &sx, &nx));
	TIDE_UT_OK(tide_mc_table_segments_list(y, &a, &sy, &ny));
	CU_ASSERT_EQUAL(nx, ny);
	for (size_t i = 0; i < nx; i++) {
		size_t j = 0;

		while (j < ny &&
		       (sy[j].id.first != sx[i].id.first || sy[j].id.second != sx[i].id.second))
			j++;
		if (j == ny) {
			CU_FAIL("a segment is missing from the rebuilt table");
			continue;
		}
		CU_ASSERT_EQUAL(sx[i].base, sy[j].base);
		CU_ASSERT_EQUAL(sx[i].size, sy[j].size);
		CU_ASSERT_EQUAL(sx[i].client_id.first, sy[j].client_id.first);
		CU_ASSERT_EQUAL(sx[i].status, sy[j].status);
		CU_ASSERT(str_eq(&sx[i].name, &sy[j].name));
		CU_ASSERT(str_eq(&sx[i].te_endpoint, &sy[j].te_endpoint));
		if (usage && mx.processing_keys == 0)
			CU_ASSERT_EQUAL(sx[i].used, sy[j].used);
	}
	tide_mc_table_arena_release(&a);
}

void
mc_fixture_assert_same(struct tide_mc_table *x, struct tide_mc_table *y,
		       const struct mc_fixture_objects *o, int n)
{
	struct tide_mc_table_metrics mx, my;
	int diff = 0;

	for (int i = 0; i < n; i++)
		if (!mc_fixture_same_key(x, y, o, i) && diff++ < 3)
			printf("\n  %s: object %d differs", o->prefix, i);
	CU_ASSERT_EQUAL(diff, 0);
	tide_mc_table_metrics_get(x, &mx);
	tide_mc_table_metrics_get(y, &my);
	CU_ASSERT_EQUAL(mx.keys - mx.processing_keys, my.keys);
	CU_ASSERT_EQUAL(my.processing_keys, 0);
	CU_ASSERT_EQUAL(mx.hard_pinned_keys, my.hard_pinned_keys);
	CU_ASSERT_EQUAL(mx.segments, my.segments);
	CU_ASSERT_EQUAL(mx.capacity_bytes, my.capacity_bytes);
	if (mx.processing_keys == 0)
		CU_ASSERT_EQUAL(mx.allocated_bytes, my.allocated_bytes);
	mc_fixture_assert_same_segments(x, y, true);
}
