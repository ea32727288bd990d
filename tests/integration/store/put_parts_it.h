/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide_store_batch_put_parts() end to end, shared by store_client_it (two
 * in-process stores) and agent_it (clients attached to two agents): one store
 * writes, another reads, against the real master.
 *
 * Pieces come from the heap (through an agent: bounced via the staging area)
 * and from the writer's local buffer (shared with an agent: not copied), some
 * empty; every value read back with tide_store_get_into() is compared byte by
 * byte with the concatenation of its pieces. Puts keep an existing key;
 * upserts replace it at the same size and at other sizes (larger, smaller),
 * create a missing one, in batches and alone (single RPCs).
 *
 * Include it once, from a CUnit test file; it asserts with CUnit.
 */
#ifndef TIDE_PUT_PARTS_IT_H
#define TIDE_PUT_PARTS_IT_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_store.h"
#include "tide_ut.h"

/* Bytes of a value: p[0..np) one after the other, into out (malloc'd; free it). */
static uint8_t *
pp_gather(const struct tide_store_part *p, size_t np, size_t *len)
{
	size_t n = 0, off = 0;
	uint8_t *out;

	for (size_t k = 0; k < np; k++)
		n += p[k].len;
	out = malloc(n ? n : 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	for (size_t k = 0; k < np; k++) {
		if (p[k].len > 0)
			memcpy(out + off, p[k].buf, p[k].len);
		off += p[k].len;
	}
	*len = n;
	return out;
}

/* Pseudo-random bytes of seed. */
static void
pp_fill(uint8_t *p, size_t n, unsigned seed)
{
	tide_ut_fill_lcg(p, n, seed * 2654435761u + 7, 1103515245u, 12345u, 16);
}

/* r holds key with exactly the bytes of p[0..np): size and every byte. */
static void
pp_expect(struct tide_store *r, const char *key, const struct tide_store_part *p, size_t np)
{
	size_t len;
	uint8_t *want = pp_gather(p, np, &len), *got = malloc(len + 64);

	CU_ASSERT_PTR_NOT_NULL_FATAL(got);
	memset(got, 0xee, len + 64);
	CU_ASSERT_EQUAL(tide_store_get_size(r, key), (int64_t)len);
	CU_ASSERT_EQUAL(tide_store_get_into(r, key, got, len + 64), (int64_t)len);
	CU_ASSERT_EQUAL(memcmp(got, want, len), 0);
	CU_ASSERT_EQUAL(got[len], 0xee); /* nothing past the value */
	free(want);
	free(got);
}

/*
 * w writes, r reads, keys named pfx-...; repl_num replicas for the puts (the
 * cluster must have that many segments). lbuf: w's local buffer (at least
 * 2 MiB), or NULL to take pieces from the heap only.
 */
static void
put_parts_check(struct tide_store *w, struct tide_store *r, const char *pfx, unsigned repl_num,
		uint8_t *lbuf)
{
	enum { NH = 6 };
	static const size_t hl[NH] = {1, 4095, 65536, 1u << 20, 300, 7};
	struct tide_store_rc rc = {.replica_num = repl_num};
	uint8_t *h[NH], *lb = lbuf;
	char k[4][96];
	const char *keys[4] = {k[0], k[1], k[2], k[3]};
	int rcs[4];

	for (int i = 0; i < NH; i++) {
		h[i] = malloc(hl[i]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(h[i]);
		pp_fill(h[i], hl[i], 100u + (unsigned)i);
	}
	if (lb == NULL) {
		lb = malloc(2u << 20);
		CU_ASSERT_PTR_NOT_NULL_FATAL(lb);
	}
	pp_fill(lb, 2u << 20, 99u);
	for (int i = 0; i < 4; i++)
		snprintf(k[i], sizeof(k[i]), "%s-parts-%d", pfx, i);

	/* A batch: key 0 from the heap (an empty piece among them), key 1 partly from the
	 * local buffer, key 2 empty in all (-EINVAL, the others stored), key 3 one piece. */
	struct tide_store_part p[] = {
		{h[0], 1},        {h[1], 4095},  {NULL, 0}, {h[2], 65536}, {lb + 4096, 70000},
		{h[3], 1u << 20}, {lb + 1, 333}, {h[4], 0}, {h[5], 7},
	};
	size_t np[4] = {4, 3, 1, 1};

	CU_ASSERT_EQUAL(tide_store_batch_put_parts(w, keys, p, np, 4, &rc, 0, rcs), 0);
	CU_ASSERT(rcs[0] == 0 && rcs[1] == 0 && rcs[3] == 0);
	CU_ASSERT_EQUAL(rcs[2], -EINVAL);
	pp_expect(r, keys[0], &p[0], 4);
	pp_expect(r, keys[1], &p[4], 3);
	pp_expect(r, keys[3], &p[8], 1);
	CU_ASSERT_EQUAL(tide_store_is_exist(r, keys[2]), 0);

	/* A put of existing keys keeps them (0 each), whatever the new size. */
	struct tide_store_part other[2] = {{h[4], 300}, {lb + 5000, 12}};
	size_t no[2] = {1, 1};

	CU_ASSERT_EQUAL(tide_store_batch_put_parts(w, keys, other, no, 2, &rc, 0, rcs), 0);
	CU_ASSERT(rcs[0] == 0 && rcs[1] == 0);
	pp_expect(r, keys[0], &p[0], 4);
	pp_expect(r, keys[1], &p[4], 3);

	/* Upsert, one key (single RPCs): the same size with new bytes, in two pieces. */
	struct tide_store_part same[2] = {{lb + 100000, 40000}, {h[3] + 7, 65536 + 4096 - 40000}};
	size_t n2 = 2, n1 = 1;

	CU_ASSERT_EQUAL(
		tide_store_batch_put_parts(w, keys, same, &n2, 1, &rc, TIDE_STORE_PUT_UPSERT, rcs),
		0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	pp_expect(r, keys[0], same, 2);
	/* Larger, then smaller. */
	struct tide_store_part big[2] = {{h[3], 1u << 20}, {lb, 100000}};

	CU_ASSERT_EQUAL(
		tide_store_batch_put_parts(w, keys, big, &n2, 1, &rc, TIDE_STORE_PUT_UPSERT, rcs),
		0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	pp_expect(r, keys[0], big, 2);
	CU_ASSERT_EQUAL(
		tide_store_batch_put_parts(w, keys, &p[8], &n1, 1, &rc, TIDE_STORE_PUT_UPSERT, rcs),
		0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	pp_expect(r, keys[0], &p[8], 1);

	/* A batch upsert: key 1 (exists) to another size, key 2 (missing) created, key 3
	 * (exists) at its size with other bytes. */
	struct tide_store_part up[] = {{h[2] + 1, 5000}, {lb + 7, 123}, {h[1], 4095},
				       {lb + 9000, 1},   {h[5] + 0, 0}, {h[0], 1},
				       {lb + 2, 6}};
	size_t nu[3] = {2, 2, 3}; /* 5123; 4096; 0 + 1 + 6 = 7 */

	CU_ASSERT_EQUAL(
		tide_store_batch_put_parts(w, &keys[1], up, nu, 3, &rc, TIDE_STORE_PUT_UPSERT, rcs),
		0);
	CU_ASSERT(rcs[0] == 0 && rcs[1] == 0 && rcs[2] == 0);
	pp_expect(r, keys[1], &up[0], 2);
	pp_expect(r, keys[2], &up[2], 2);
	pp_expect(r, keys[3], &up[4], 3);

	/* Upsert of a missing key alone; refusals of the whole call. */
	char miss[96];
	const char *mk = miss;

	snprintf(miss, sizeof(miss), "%s-parts-missing", pfx);
	CU_ASSERT_EQUAL(
		tide_store_batch_put_parts(w, &mk, &p[4], &n2, 1, &rc, TIDE_STORE_PUT_UPSERT, rcs),
		0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	pp_expect(r, miss, &p[4], 2);
	struct tide_store_part bad = {NULL, 5};

	rcs[0] = 12345;
	CU_ASSERT_EQUAL(tide_store_batch_put_parts(w, &mk, &bad, &n1, 1, &rc, 0, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_parts(w, &mk, p, &n1, 1, &rc, 0x2u, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_parts(w, &mk, p, NULL, 1, &rc, 0, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_parts(w, &mk, p, &n1, 0, &rc, 0, rcs), -EINVAL);
	CU_ASSERT_EQUAL(rcs[0], 12345);

	for (int i = 0; i < 4; i++)
		(void)tide_store_remove(w, keys[i], true);
	(void)tide_store_remove(w, miss, true);
	for (int i = 0; i < NH; i++)
		free(h[i]);
	if (lbuf == NULL)
		free(lb);
}

#endif /* TIDE_PUT_PARTS_IT_H */
