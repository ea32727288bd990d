/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for store/seg/seg_alloc.c: argument checks, exhaustion of space
 * and of the block table, alignment, coalescing, rejected frees, segment
 * sizes from 1 MiB to 1 TiB, and a seeded randomized model check of
 * >= 1,000,000 operations against a sorted array of live extents.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_log.h"
#include "tide_seg.h"
#include "tide_ut.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

static struct tide_seg *
seg_new(uint64_t size, uint32_t granule, uint32_t max_blocks)
{
	struct tide_seg_opts o;
	struct tide_seg *seg = NULL;

	tide_seg_opts_init(&o, sizeof(o));
	o.size = size;
	if (granule != 0)
		o.granule = granule;
	if (max_blocks != 0)
		o.max_blocks = max_blocks;
	CU_ASSERT_EQUAL_FATAL(tide_seg_create(&o, &seg), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	return seg;
}

static struct tide_seg_stats
stats(const struct tide_seg *seg)
{
	struct tide_seg_stats st;

	tide_seg_stats_get(seg, &st);
	return st;
}

/* seg's space: bytes used and free, its largest free extent, how many free extents. */
static void
assert_space(const struct tide_seg *seg, uint64_t used, uint64_t free_bytes, uint64_t largest,
	     uint64_t extents)
{
	struct tide_seg_stats st = stats(seg);

	CU_ASSERT_EQUAL(st.used, used);
	CU_ASSERT_EQUAL(st.free, free_bytes);
	CU_ASSERT_EQUAL(st.largest_free, largest);
	CU_ASSERT_EQUAL(st.free_extents, extents);
}

/* The segment is back to one free extent covering everything. */
static void
assert_all_free(const struct tide_seg *seg, uint64_t size)
{
	struct tide_seg_stats st = stats(seg);

	assert_space(seg, 0, size, size, 1);
	CU_ASSERT_EQUAL(st.live_allocs, 0);
	CU_ASSERT_EQUAL(st.blocks_used, 1);
	CU_ASSERT_DOUBLE_EQUAL(st.fragmentation, 0.0, 1e-12);
	TIDE_UT_OK(tide_seg_check(seg));
}

static uint64_t rng_state;

static uint64_t
rng(void)
{
	uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static uint64_t
rng_range(uint64_t lo, uint64_t hi)
{
	return lo + rng() % (hi - lo + 1);
}

static void
test_create_invalid(void)
{
	struct tide_seg_opts o;
	struct tide_seg *seg = (struct tide_seg *)&o;

	tide_seg_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(o.granule, TIDE_SEG_GRANULE_DEFAULT);
	CU_ASSERT_EQUAL(o.max_blocks, TIDE_SEG_MAX_BLOCKS_DEFAULT);
	CU_ASSERT_EQUAL(o.size, 0);
	CU_ASSERT_EQUAL(tide_seg_create(&o, &seg), -EINVAL); /* size 0 */
	o.size = MiB + 8;
	CU_ASSERT_EQUAL(tide_seg_create(&o, &seg), -EINVAL); /* not a granule multiple */
	o.size = TIDE_SEG_SIZE_MAX << 1;
	CU_ASSERT_EQUAL(tide_seg_create(&o, &seg), -EINVAL);
	o.size = MiB;
	o.granule = 48;
	CU_ASSERT_EQUAL(tide_seg_create(&o, &seg), -EINVAL);
	o.granule = 4;
	CU_ASSERT_EQUAL(tide_seg_create(&o, &seg), -EINVAL);
	o.granule = 64;
	o.max_blocks = 1;
	CU_ASSERT_EQUAL(tide_seg_create(&o, &seg), -EINVAL);
	o.max_blocks = 16;
	o.opts_size = sizeof(o) - 1;
	CU_ASSERT_EQUAL(tide_seg_create(&o, &seg), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_create(NULL, &seg), -EINVAL);
	/* Failure leaves the out-param alone. */
	CU_ASSERT_PTR_EQUAL(seg, (struct tide_seg *)&o);
	o.opts_size = sizeof(o);
	CU_ASSERT_EQUAL(tide_seg_create(&o, NULL), -EINVAL);
	TIDE_UT_OK(tide_seg_create(&o, &seg));
	assert_all_free(seg, MiB);
	tide_seg_destroy(seg);
	tide_seg_destroy(NULL);
}

static void
test_alloc_invalid(void)
{
	struct tide_seg *seg = seg_new(MiB, 0, 0);
	uint64_t off = 12345;

	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 0, 8, &off), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, MiB + 1, 8, &off), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 64, 0, &off), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 64, 3, &off), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 64, 96, &off), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 64, 2 * MiB, &off), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 64, 8, NULL), -EINVAL);
	CU_ASSERT_EQUAL(off, 12345);
	/* Invalid requests are not allocation failures. */
	CU_ASSERT_EQUAL(stats(seg).alloc_failures, 0);
	assert_all_free(seg, MiB);
	tide_seg_destroy(seg);
}

static void
test_alloc_exhaustion(void)
{
	struct tide_seg *seg = seg_new(MiB, 64, 0);
	uint64_t off, victim = 0;
	struct tide_seg_stats st;
	unsigned n = 0;

	while (tide_seg_alloc(seg, 4 * KiB, 1, &off) == 0) {
		CU_ASSERT_EQUAL(off % (4 * KiB), 0);
		if (n == 100)
			victim = off;
		n++;
	}
	CU_ASSERT_EQUAL(n, 256);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 4 * KiB, 1, &off), -ENOSPC);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 1, 1, &off), -ENOSPC);
	st = stats(seg);
	CU_ASSERT_EQUAL(st.alloc_failures, 3);
	CU_ASSERT_EQUAL(st.alloc_fail_nospc, 3);
	CU_ASSERT_EQUAL(st.alloc_fail_nomem, 0);
	assert_space(seg, MiB, 0, 0, 0);
	CU_ASSERT_DOUBLE_EQUAL(st.fragmentation, 0.0, 1e-12);

	/* Freeing one makes room for exactly that one again. */
	TIDE_UT_OK(tide_seg_free(seg, victim));
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 4 * KiB + 1, 1, &off), -ENOSPC);
	TIDE_UT_OK(tide_seg_alloc(seg, 4 * KiB, 1, &off));
	CU_ASSERT_EQUAL(off, victim);
	TIDE_UT_OK(tide_seg_check(seg));

	tide_seg_reset(seg);
	assert_all_free(seg, MiB);
	/* reset keeps the failure counters. */
	CU_ASSERT_EQUAL(stats(seg).alloc_fail_nospc, 4);
	tide_seg_destroy(seg);
}

static void
test_alloc_block_table_full(void)
{
	/* 4 nodes: the free tail uses one, each split of the tail one more. */
	struct tide_seg *seg = seg_new(MiB, 64, 4);
	uint64_t off[4];
	struct tide_seg_stats st;

	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &off[0]));
	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &off[1]));
	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &off[2]));
	CU_ASSERT_EQUAL(stats(seg).blocks_used, 4);
	/* Space is there but splitting the tail needs a fifth node. */
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 64, 1, &off[3]), -ENOMEM);
	/* An aligned request would need two nodes (pad and tail). */
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 64, 4 * KiB, &off[3]), -ENOMEM);
	st = stats(seg);
	CU_ASSERT_EQUAL(st.alloc_fail_nomem, 2);
	CU_ASSERT_EQUAL(st.alloc_failures, 2);
	CU_ASSERT_EQUAL(st.live_allocs, 3);
	/* Taking the whole tail needs no node. */
	TIDE_UT_OK(tide_seg_alloc(seg, MiB - 3 * 64, 1, &off[3]));
	CU_ASSERT_EQUAL(off[3], 3 * 64);
	CU_ASSERT_EQUAL(stats(seg).free, 0);
	/* Freeing the middle one: its neighbours are used, so no node is released... */
	TIDE_UT_OK(tide_seg_free(seg, off[1]));
	CU_ASSERT_EQUAL(stats(seg).blocks_used, 4);
	/* ...and an exact fit reuses it without a split. */
	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &off[1]));
	CU_ASSERT_EQUAL(off[1], 64);
	TIDE_UT_OK(tide_seg_free(seg, off[0]));
	TIDE_UT_OK(tide_seg_free(seg, off[3]));
	TIDE_UT_OK(tide_seg_free(seg, off[2]));
	TIDE_UT_OK(tide_seg_free(seg, off[1]));
	assert_all_free(seg, MiB);
	tide_seg_destroy(seg);
}

static void
test_alloc_alignment(void)
{
	struct tide_seg *seg = seg_new(GiB, 64, 0);
	uint64_t align, off, offs[64 * 21];
	unsigned n = 0, i, k;

	rng_state = 7;
	/* Misalign the free space first so alignment actually has work to do. */
	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &off));
	for (align = 1; align <= MiB; align <<= 1) {
		for (k = 0; k < 64; k++) {
			uint64_t size = rng_range(1, 3 * KiB);
			uint64_t got;

			TIDE_UT_OK(tide_seg_alloc(seg, size, align, &off));
			CU_ASSERT_EQUAL(off % align, 0);
			CU_ASSERT_EQUAL(off % 64, 0);
			TIDE_UT_OK(tide_seg_alloc_size(seg, off, &got));
			CU_ASSERT_EQUAL(got, (size + 63) & ~UINT64_C(63));
			offs[n++] = off;
		}
	}
	TIDE_UT_OK(tide_seg_check(seg));
	for (i = 0; i < n; i++) {
		TIDE_UT_OK(tide_seg_free(seg, offs[i]));
	}
	TIDE_UT_OK(tide_seg_free(seg, 0));
	assert_all_free(seg, GiB);
	tide_seg_destroy(seg);

	/* align == segment size: only offset 0 qualifies, found by the head fallback. */
	seg = seg_new(64 * MiB, 64, 0);
	TIDE_UT_OK(tide_seg_alloc(seg, 1, 64 * MiB, &off));
	CU_ASSERT_EQUAL(off, 0);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 1, 64 * MiB, &off), -ENOSPC);
	/* Half the segment, aligned to half: the upper half. */
	TIDE_UT_OK(tide_seg_alloc(seg, 32 * MiB, 32 * MiB, &off));
	CU_ASSERT_EQUAL(off, 32 * MiB);
	TIDE_UT_OK(tide_seg_check(seg));
	TIDE_UT_OK(tide_seg_free(seg, 0));
	TIDE_UT_OK(tide_seg_free(seg, 32 * MiB));
	TIDE_UT_OK(tide_seg_alloc(seg, 64 * MiB, 64 * MiB, &off));
	CU_ASSERT_EQUAL(off, 0);
	TIDE_UT_OK(tide_seg_free(seg, 0));
	assert_all_free(seg, 64 * MiB);
	tide_seg_destroy(seg);
}

static void
test_free_coalesce_neighbours(void)
{
	struct tide_seg *seg = seg_new(MiB, 64, 0);
	uint64_t a, b, c, d;
	struct tide_seg_stats st;

	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &a));
	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &b));
	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &c));
	TIDE_UT_OK(tide_seg_alloc(seg, 64, 1, &d));
	CU_ASSERT(a == 0 && b == 64 && c == 128 && d == 192);
	CU_ASSERT_EQUAL(stats(seg).free_extents, 1);

	/* No free neighbour: a new extent. */
	TIDE_UT_OK(tide_seg_free(seg, b));
	st = stats(seg);
	CU_ASSERT_EQUAL(st.free_extents, 2);
	CU_ASSERT_EQUAL(st.largest_free, MiB - 256);
	/* Right neighbour free: a absorbs b. */
	TIDE_UT_OK(tide_seg_free(seg, a));
	st = stats(seg);
	CU_ASSERT_EQUAL(st.free_extents, 2);
	CU_ASSERT_EQUAL(st.blocks_used, 4);
	/* The merged extent is one block of 128: an exact 128-byte fit lands at 0. */
	TIDE_UT_OK(tide_seg_alloc(seg, 128, 1, &a));
	CU_ASSERT_EQUAL(a, 0);
	TIDE_UT_OK(tide_seg_free(seg, a));
	/* Left neighbour free: [0,128) absorbs c. */
	TIDE_UT_OK(tide_seg_free(seg, c));
	st = stats(seg);
	CU_ASSERT_EQUAL(st.free_extents, 2);
	CU_ASSERT_EQUAL(st.blocks_used, 3);
	CU_ASSERT_DOUBLE_EQUAL(st.fragmentation, 1.0 - (double)(MiB - 256) / (double)(MiB - 64),
			       1e-12);
	TIDE_UT_OK(tide_seg_check(seg));
	/* Both neighbours free: everything merges into one extent. */
	TIDE_UT_OK(tide_seg_free(seg, d));
	assert_all_free(seg, MiB);
	tide_seg_destroy(seg);
}

/* Free n objects in each of several orders; the segment must merge back to one extent. */
static void
test_free_coalesce_orders(void)
{
	enum { N = 2000 };
	static uint64_t offs[N];
	struct tide_seg *seg = seg_new(MiB - 3 * 64, 64, 0); /* not a power of two on purpose */
	unsigned order, i;

	rng_state = 11;
	for (order = 0; order < 5; order++) {
		unsigned n = 0;

		while (n < N && tide_seg_alloc(seg, rng_range(1, 400), 1 << rng_range(0, 8),
					       &offs[n]) == 0) {
			n++;
		}
		CU_ASSERT(n > 100);
		switch (order) {
		case 0: /* address order: each free merges left */
			break;
		case 1: /* reverse: each free merges right */
			for (i = 0; i < n / 2; i++) {
				uint64_t t = offs[i];

				offs[i] = offs[n - 1 - i];
				offs[n - 1 - i] = t;
			}
			break;
		case 2: /* evens then odds: the odds merge both sides */
		case 3: {
			static uint64_t tmp[N];
			unsigned k = 0;

			for (i = 0; i < n; i += 2)
				tmp[k++] = offs[i];
			for (i = 1; i < n; i += 2)
				tmp[k++] = offs[i];
			if (order == 3) { /* odds first */
				for (i = 0; i < n / 2; i++) {
					uint64_t t = tmp[i];

					tmp[i] = tmp[n - 1 - i];
					tmp[n - 1 - i] = t;
				}
			}
			memcpy(offs, tmp, n * sizeof(offs[0]));
			break;
		}
		default: /* random */
			for (i = n - 1; i > 0; i--) {
				unsigned j = (unsigned)rng_range(0, i);
				uint64_t t = offs[i];

				offs[i] = offs[j];
				offs[j] = t;
			}
			break;
		}
		for (i = 0; i < n; i++) {
			TIDE_UT_OK(tide_seg_free(seg, offs[i]));
			if (i % 256 == 0)
				TIDE_UT_OK(tide_seg_check(seg));
		}
		assert_all_free(seg, MiB - 3 * 64);
	}
	tide_seg_destroy(seg);
}

static void
test_free_rejects(void)
{
	struct tide_seg *seg = seg_new(MiB, 64, 0);
	uint64_t a, b, sz;
	struct tide_seg_stats before, after;

	TIDE_UT_OK(tide_seg_alloc(seg, 1000, 1, &a));
	TIDE_UT_OK(tide_seg_alloc(seg, 1000, 1, &b));
	before = stats(seg);
	CU_ASSERT_EQUAL(tide_seg_free(seg, a + 64), -ENOENT);    /* interior */
	CU_ASSERT_EQUAL(tide_seg_free(seg, a + 1), -ENOENT);     /* interior, unaligned */
	CU_ASSERT_EQUAL(tide_seg_free(seg, 512 * KiB), -ENOENT); /* inside a free extent */
	CU_ASSERT_EQUAL(tide_seg_free(seg, MiB), -EINVAL);       /* just past the end */
	CU_ASSERT_EQUAL(tide_seg_free(seg, UINT64_MAX), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc_size(seg, a + 64, &sz), -ENOENT);
	CU_ASSERT_EQUAL(tide_seg_alloc_size(seg, MiB, &sz), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc_size(seg, a, NULL), -EINVAL);
	after = stats(seg);
	CU_ASSERT_EQUAL(after.used, before.used);
	CU_ASSERT_EQUAL(after.free_extents, before.free_extents);
	CU_ASSERT_EQUAL(after.live_allocs, 2);
	CU_ASSERT_EQUAL(after.free_rejected, 5);
	TIDE_UT_OK(tide_seg_check(seg));

	TIDE_UT_OK(tide_seg_free(seg, a));
	CU_ASSERT_EQUAL(tide_seg_free(seg, a), -ENOENT); /* double free */
	CU_ASSERT_EQUAL(tide_seg_alloc_size(seg, a, &sz), -ENOENT);
	TIDE_UT_OK(tide_seg_free(seg, b));
	CU_ASSERT_EQUAL(tide_seg_free(seg, b), -ENOENT); /* double free after a merge */
	CU_ASSERT_EQUAL(stats(seg).free_rejected, 7);
	assert_all_free(seg, MiB);

	/* A foreign offset: valid in a bigger segment, out of range here. */
	{
		struct tide_seg *big = seg_new(GiB, 64, 0);
		uint64_t far;

		TIDE_UT_OK(tide_seg_alloc(big, 512 * MiB, 512 * MiB, &far));
		CU_ASSERT_EQUAL(far, 0);
		TIDE_UT_OK(tide_seg_alloc(big, 512 * MiB, 1, &far));
		CU_ASSERT_EQUAL(tide_seg_free(seg, far), -EINVAL);
		TIDE_UT_OK(tide_seg_free(big, far));
		tide_seg_destroy(big);
	}
	assert_all_free(seg, MiB);
	tide_seg_destroy(seg);
}

static void
test_segment_1mib_and_1tib(void)
{
	static const uint64_t sizes[] = {MiB, TiB, TiB - 3 * 64, 4 * TiB};
	unsigned i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t size = sizes[i], o1, o2, o3, o4, got;
		struct tide_seg *seg = seg_new(size, 64, 0);
		struct tide_seg_stats st;

		assert_all_free(seg, size);
		/* One byte takes one granule. */
		TIDE_UT_OK(tide_seg_alloc(seg, 1, 1, &o1));
		TIDE_UT_OK(tide_seg_alloc_size(seg, o1, &got));
		CU_ASSERT_EQUAL(got, 64);
		/* Half the segment, aligned to the largest power of two <= a quarter. */
		uint64_t align = UINT64_C(1) << (63 - __builtin_clzll(size / 4));

		uint64_t half = size / 2 & ~UINT64_C(63);

		TIDE_UT_OK(tide_seg_alloc(seg, half, align, &o2));
		CU_ASSERT_EQUAL(o2 % align, 0);
		/* The rest, in two pieces. */
		st = stats(seg);
		CU_ASSERT_EQUAL(st.used, 64 + half);
		CU_ASSERT_EQUAL(st.free, size - 64 - half);
		TIDE_UT_OK(tide_seg_alloc(seg, st.largest_free, 1, &o3));
		st = stats(seg);
		if (st.free != 0) {
			TIDE_UT_OK(tide_seg_alloc(seg, st.largest_free, 1, &o4));
		} else {
			o4 = UINT64_MAX;
		}
		st = stats(seg);
		CU_ASSERT_EQUAL(st.free, 0);
		CU_ASSERT_EQUAL(tide_seg_alloc(seg, 1, 1, &got), -ENOSPC);
		TIDE_UT_OK(tide_seg_check(seg));
		TIDE_UT_OK(tide_seg_free(seg, o2));
		TIDE_UT_OK(tide_seg_free(seg, o3));
		if (o4 != UINT64_MAX)
			TIDE_UT_OK(tide_seg_free(seg, o4));
		TIDE_UT_OK(tide_seg_free(seg, o1));
		assert_all_free(seg, size);
		tide_seg_destroy(seg);
	}
}

static void
test_alloc_whole_segment(void)
{
	struct tide_seg *seg = seg_new(TiB, 64, 0);
	uint64_t off, got;

	TIDE_UT_OK(tide_seg_alloc(seg, TiB, 1, &off));
	CU_ASSERT_EQUAL(off, 0);
	TIDE_UT_OK(tide_seg_alloc_size(seg, 0, &got));
	CU_ASSERT_EQUAL(got, TiB);
	CU_ASSERT_EQUAL(stats(seg).blocks_used, 1);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 1, 1, &off), -ENOSPC);
	TIDE_UT_OK(tide_seg_free(seg, 0));
	assert_all_free(seg, TiB);
	TIDE_UT_OK(tide_seg_alloc(seg, TiB - 1, TiB, &off));
	CU_ASSERT_EQUAL(off, 0);
	TIDE_UT_OK(tide_seg_free(seg, 0));
	assert_all_free(seg, TiB);
	tide_seg_destroy(seg);
}

static void
test_alloc_one_byte_objects(void)
{
	enum { N = MiB / 8 };
	struct tide_seg *seg = seg_new(MiB, 8, N + 1);
	struct tide_seg_stats st;
	uint64_t off, i;

	for (i = 0; i < N; i++) {
		TIDE_UT_OK(tide_seg_alloc(seg, 1, 1, &off));
		if (off != i * 8) {
			CU_FAIL("1-byte objects are not packed in address order");
			break;
		}
	}
	st = stats(seg);
	CU_ASSERT_EQUAL(st.used, MiB);
	CU_ASSERT_EQUAL(st.live_allocs, N);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 1, 1, &off), -ENOSPC);
	/* Every other one: N/2 separate 8-byte holes. */
	for (i = 0; i < N; i += 2)
		TIDE_UT_OK(tide_seg_free(seg, i * 8));
	st = stats(seg);
	CU_ASSERT_EQUAL(st.free_extents, N / 2);
	CU_ASSERT_EQUAL(st.largest_free, 8);
	CU_ASSERT_DOUBLE_EQUAL(st.fragmentation, 1.0 - 8.0 / (double)(MiB / 2), 1e-12);
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 9, 1, &off), -ENOSPC);
	TIDE_UT_OK(tide_seg_check(seg));
	for (i = 1; i < N; i += 2)
		TIDE_UT_OK(tide_seg_free(seg, i * 8));
	assert_all_free(seg, MiB);
	tide_seg_destroy(seg);
}

static void
test_stats_get(void)
{
	struct tide_seg *seg = seg_new(16 * MiB, 64, 0);
	struct tide_seg_stats st;
	uint64_t a, b, c;

	TIDE_UT_OK(tide_seg_alloc(seg, 100, 1, &a));     /* 128 at 0 */
	TIDE_UT_OK(tide_seg_alloc(seg, 4 * MiB, 1, &b)); /* at 128 */
	TIDE_UT_OK(tide_seg_alloc(seg, 1, 1, &c));       /* 64 at 4 MiB + 128 */
	CU_ASSERT(a == 0 && b == 128 && c == 4 * MiB + 128);
	TIDE_UT_OK(tide_seg_free(seg, b));
	CU_ASSERT_EQUAL(tide_seg_alloc(seg, 16 * MiB, 1, &a), -ENOSPC);
	st = stats(seg);
	CU_ASSERT_EQUAL(st.size, 16 * MiB);
	assert_space(seg, 192, 16 * MiB - 192, 12 * MiB - 192, 2);
	CU_ASSERT_EQUAL(st.live_allocs, 2);
	CU_ASSERT_EQUAL(st.blocks_used, 4);
	CU_ASSERT_EQUAL(st.max_blocks, TIDE_SEG_MAX_BLOCKS_DEFAULT);
	CU_ASSERT_EQUAL(st.alloc_failures, 1);
	CU_ASSERT_EQUAL(st.alloc_fail_nospc, 1);
	CU_ASSERT_EQUAL(st.free_rejected, 0);
	CU_ASSERT_DOUBLE_EQUAL(st.fragmentation,
			       1.0 - (double)(12 * MiB - 192) / (double)(16 * MiB - 192), 1e-12);
	tide_seg_destroy(seg);
}

/*
 * Randomized model check. The reference is a sorted array of the live
 * extents [off, off + rsize) plus a running count of maximal free gaps,
 * which must equal the allocator's free extents after every op because
 * frees merge immediately.
 */
#define MODEL_LIVE_MAX 4096

struct ext {
	uint64_t off;
	uint64_t size;
};

struct model {
	struct tide_seg *seg;
	uint64_t size;
	uint64_t granule;
	uint32_t max_blocks;
	struct ext *live;
	size_t n, cap;
	uint64_t used;
	uint64_t gaps;
	/* results */
	uint64_t allocs, frees, nospc, nomem, nospc_fit_existed, bad_frees;
	uint64_t failures; /* CUnit failures recorded by this model (stop early) */
};

/* First index with live[i].off >= off. */
static size_t
model_lower(const struct model *m, uint64_t off)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->live[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint64_t
gap_start(const struct model *m, size_t i)
{
	return i == 0 ? 0 : m->live[i - 1].off + m->live[i - 1].size;
}

static uint64_t
gap_end(const struct model *m, size_t i)
{
	return i == m->n ? m->size : m->live[i].off;
}

static bool
model_insert(struct model *m, uint64_t off, uint64_t size)
{
	size_t i = model_lower(m, off);
	uint64_t l = gap_start(m, i), r = gap_end(m, i);

	if (off < l || off + size > r)
		return false; /* overlaps a live extent */
	if (m->n == m->cap)
		return false;
	memmove(&m->live[i + 1], &m->live[i], (m->n - i) * sizeof(m->live[0]));
	m->live[i].off = off;
	m->live[i].size = size;
	m->n++;
	m->used += size;
	m->gaps += (uint64_t)(off > l) + (off + size < r) - 1;
	return true;
}

static void
model_remove(struct model *m, size_t i)
{
	uint64_t l = gap_start(m, i), r = gap_end(m, i + 1);
	const struct ext *e = &m->live[i];

	m->gaps += 1 - (uint64_t)(e->off > l) - (e->off + e->size < r);
	m->used -= e->size;
	memmove(&m->live[i], &m->live[i + 1], (m->n - i - 1) * sizeof(m->live[0]));
	m->n--;
}

static uint64_t
model_largest_gap(const struct model *m, uint64_t bytes, uint64_t align, bool *aligned_fit)
{
	uint64_t best = 0;
	size_t i;

	*aligned_fit = false;
	for (i = 0; i <= m->n; i++) {
		uint64_t l = gap_start(m, i), r = gap_end(m, i);
		uint64_t a = (l + align - 1) & ~(align - 1);

		if (r - l > best)
			best = r - l;
		if (a < r && r - a >= bytes)
			*aligned_fit = true;
	}
	return best;
}

/* Evaluates cond once: it may have side effects (model_insert). */
#define MODEL_CHECK(m, cond, ...)                               \
	do {                                                    \
		bool ok_ = (cond);                              \
		CU_ASSERT(ok_);                                 \
		if (!ok_) {                                     \
			fprintf(stderr, "model: " __VA_ARGS__); \
			fputc('\n', stderr);                    \
			(m)->failures++;                        \
		}                                               \
	} while (0)

/* Sizes shaped like the rollout mix (miles-usage.md 1.5), scaled to the segment. */
static uint64_t
model_size(uint64_t seg_size)
{
	uint64_t p = rng() % 100;

	if (p < 60)
		return rng_range(1, 256); /* scalars, small tensors */
	if (p < 75)
		return rng_range(257, 16 * KiB); /* meta, manifest */
	if (p < 90)
		return rng_range(16 * KiB, MiB); /* dense tensors */
	if (p < 98)
		return rng_range(MiB, seg_size / 64);
	return rng_range(seg_size / 64, seg_size / 16); /* the "64 MiB chunks" */
}

static uint64_t
model_align(uint64_t granule)
{
	uint64_t p = rng() % 100;

	if (p < 70)
		return UINT64_C(1) << rng_range(0, 6);
	if (p < 97)
		return (granule * 2) << rng_range(0, 9);
	return UINT64_C(1) << rng_range(17, 22);
}

static void
model_alloc(struct model *m, uint64_t op)
{
	uint64_t size = model_size(m->size);
	uint64_t align = model_align(m->granule);
	uint64_t bytes = (size + m->granule - 1) & ~(m->granule - 1);
	uint64_t eff = align < m->granule ? m->granule : align;
	uint64_t off = UINT64_MAX, got = 0;
	int rc = tide_seg_alloc(m->seg, size, align, &off);

	if (rc == 0) {
		m->allocs++;
		MODEL_CHECK(m, off % eff == 0, "op %" PRIu64 ": off 0x%" PRIx64 " align %" PRIu64,
			    op, off, align);
		MODEL_CHECK(m, off < m->size && bytes <= m->size - off,
			    "op %" PRIu64 ": [0x%" PRIx64 ", +%" PRIu64 ") out of bounds", op, off,
			    bytes);
		MODEL_CHECK(m, model_insert(m, off, bytes),
			    "op %" PRIu64 ": [0x%" PRIx64 ", +%" PRIu64 ") overlaps a live extent",
			    op, off, bytes);
		MODEL_CHECK(m, tide_seg_alloc_size(m->seg, off, &got) == 0 && got == bytes,
			    "op %" PRIu64 ": alloc_size %" PRIu64 " != %" PRIu64, op, got, bytes);
	} else if (rc == -ENOSPC) {
		/*
		 * Legitimate only when no free extent reaches the padded request
		 * rounded up to its size class: need + need/64 + granule bounds it.
		 */
		uint64_t need = bytes + (eff - m->granule);
		bool fit;
		uint64_t largest = model_largest_gap(m, bytes, eff, &fit);

		m->nospc++;
		m->nospc_fit_existed += fit;
		MODEL_CHECK(m, largest < need + need / 64 + m->granule,
			    "op %" PRIu64 ": -ENOSPC for %" PRIu64 " (align %" PRIu64
			    ") with a free gap of %" PRIu64,
			    op, bytes, align, largest);
	} else if (rc == -ENOMEM) {
		struct tide_seg_stats st;

		tide_seg_stats_get(m->seg, &st);
		m->nomem++;
		MODEL_CHECK(m, st.blocks_used + 2 > m->max_blocks,
			    "op %" PRIu64 ": -ENOMEM with %" PRIu64 " of %" PRIu32 " blocks used",
			    op, st.blocks_used, m->max_blocks);
	} else {
		MODEL_CHECK(m, false, "op %" PRIu64 ": alloc returned %d", op, rc);
	}
}

static void
model_free(struct model *m, uint64_t op)
{
	size_t i = (size_t)(rng() % m->n);
	struct ext e = m->live[i];
	int rc;

	/* Now and then, a bad free first: it must be rejected and change nothing. */
	if (rng() % 64 == 0) {
		uint64_t bad =
			e.size > m->granule ? e.off + m->granule * rng_range(1, 3) : e.off + 1;

		if (bad < e.off + e.size) {
			rc = tide_seg_free(m->seg, bad);
			MODEL_CHECK(m, rc == -ENOENT, "op %" PRIu64 ": interior free returned %d",
				    op, rc);
			m->bad_frees++;
		}
	}
	rc = tide_seg_free(m->seg, e.off);
	MODEL_CHECK(m, rc == 0, "op %" PRIu64 ": free 0x%" PRIx64 " returned %d", op, e.off, rc);
	model_remove(m, i);
	m->frees++;
	if (rng() % 64 == 0) {
		rc = tide_seg_free(m->seg, e.off);
		MODEL_CHECK(m, rc == -ENOENT, "op %" PRIu64 ": double free returned %d", op, rc);
		m->bad_frees++;
	}
}

/*
 * Alloc below the fill target 3 times in 4, above it 1 in 4; after a failed
 * alloc, free 3 times in 4; never exceed MODEL_LIVE_MAX live extents. The
 * cap keeps the reference's O(n) scans cheap: at full fill small objects
 * would otherwise pile up into the tens of thousands.
 */
static bool
model_want_alloc(const struct model *m, uint64_t target, bool last_failed)
{
	if (m->n == 0)
		return true;
	if (m->n >= MODEL_LIVE_MAX || (last_failed && rng() % 4 != 0))
		return false;
	return m->used < target ? rng() % 4 != 0 : rng() % 4 == 0;
}

static void
model_run(uint64_t seg_size, uint32_t granule, uint32_t max_blocks, uint64_t ops, uint64_t seed,
	  bool expect_nospc, bool expect_nomem)
{
	struct model m = {0};
	struct tide_seg_stats st;
	uint64_t op, target = 0;
	bool last_failed = false;
	enum tide_log_level saved_level;

	m.size = seg_size;
	m.granule = granule;
	m.max_blocks = max_blocks;
	m.cap = max_blocks;
	m.live = calloc(m.cap, sizeof(m.live[0]));
	CU_ASSERT_PTR_NOT_NULL_FATAL(m.live);
	m.seg = seg_new(seg_size, granule, max_blocks);
	m.gaps = 1;
	/* Bad frees are expected here; keep their warnings out of the output. */
	saved_level = tide_log_get_level();
	tide_log_set_level(TIDE_LOG_ERR);
	rng_state = seed;
	printf("\n    model: seed %" PRIu64 " (set TIDE_SEG_UT_SEED to replay), %" PRIu64
	       " ops, segment %" PRIu64 " B, granule %" PRIu32 ", max_blocks %" PRIu32 "\n",
	       seed, ops, seg_size, granule, max_blocks);

	for (op = 0; op < ops && m.failures < 10; op++) {
		/* Fill targets move between 50% and ~full so failures are exercised. */
		/*
		 * Fill targets move between 50% and full so failures are
		 * exercised; a failure is followed by a free 3 times in 4, which
		 * and the live set is capped (model_want_alloc()).
		 */
		if (op % 20000 == 0) {
			static const unsigned pct[] = {50, 80, 95, 100};

			target = seg_size / 100 * pct[rng() % 4];
		}
		if (model_want_alloc(&m, target, last_failed)) {
			uint64_t fails = m.nospc + m.nomem;

			model_alloc(&m, op);
			last_failed = m.nospc + m.nomem != fails;
		} else {
			model_free(&m, op);
			last_failed = false;
		}

		tide_seg_stats_get(m.seg, &st);
		MODEL_CHECK(&m, st.used == m.used && st.used + st.free == seg_size,
			    "op %" PRIu64 ": used %" PRIu64 " (model %" PRIu64 ") free %" PRIu64,
			    op, st.used, m.used, st.free);
		MODEL_CHECK(&m, st.live_allocs == m.n && st.free_extents == m.gaps,
			    "op %" PRIu64 ": live %" PRIu64 " (model %zu) extents %" PRIu64
			    " (model %" PRIu64 ")",
			    op, st.live_allocs, m.n, st.free_extents, m.gaps);
		MODEL_CHECK(&m, st.largest_free <= st.free, "op %" PRIu64 ": largest > free", op);
		if (op % 4096 == 0) {
			bool fit;

			MODEL_CHECK(&m, tide_seg_check(m.seg) == 0, "op %" PRIu64 ": check failed",
				    op);
			MODEL_CHECK(&m, st.largest_free == model_largest_gap(&m, 1, 1, &fit),
				    "op %" PRIu64 ": largest free %" PRIu64 " differs from model",
				    op, st.largest_free);
		}
	}
	CU_ASSERT_EQUAL(op, ops);
	printf("    model: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " -ENOSPC (%" PRIu64
	       " where an aligned gap existed: class rounding/align padding), %" PRIu64
	       " -ENOMEM, %" PRIu64 " bad frees rejected\n",
	       m.allocs, m.frees, m.nospc, m.nospc_fit_existed, m.nomem, m.bad_frees);
	/* The workload must actually reach the failure paths it means to check. */
	CU_ASSERT(m.allocs > ops / 4);
	CU_ASSERT(m.nospc > (expect_nospc ? ops / 100 : 0) || !expect_nospc);
	CU_ASSERT(m.nomem > (expect_nomem ? ops / 100 : 0) || !expect_nomem);

	while (m.n > 0) {
		TIDE_UT_OK(tide_seg_free(m.seg, m.live[m.n - 1].off));
		m.n--;
	}
	assert_all_free(m.seg, seg_size);
	tide_seg_destroy(m.seg);
	free(m.live);
	tide_log_set_level(saved_level);
}

static uint64_t
model_seed(void)
{
	const char *s = getenv("TIDE_SEG_UT_SEED");

	return s != NULL ? strtoull(s, NULL, 0) : UINT64_C(20240601);
}

/*
 * alloc_at rebuilds a layout: extents placed where another allocator put
 * them (in random order) leave the same used bytes and free extents, and
 * overlaps, unaligned offsets and ranges past the end are refused.
 */
static void
test_alloc_at_rebuild(void)
{
	struct tide_seg *a = seg_new(16 * MiB, 0, 0), *b = seg_new(16 * MiB, 0, 0);
	uint64_t off[512], len[512], tmp, sz;
	struct tide_seg_stats sa, sb;
	unsigned i, j, n = 0;
	uint64_t rng = 12345;

	for (i = 0; i < 512; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		len[n] = 1 + (rng >> 33) % (40 * KiB);
		if (tide_seg_alloc(a, len[n], 1, &off[n]) == 0)
			n++;
	}
	/* Free every third one so the layout has holes. */
	for (i = 0, j = 0; i < n; i++) {
		if (i % 3 == 1) {
			CU_ASSERT_EQUAL(tide_seg_free(a, off[i]), 0);
			continue;
		}
		off[j] = off[i];
		len[j++] = len[i];
	}
	n = j;
	/* Rebuild in a shuffled order. */
	for (i = n; i > 1; i--) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		j = (unsigned)((rng >> 33) % i);
		tmp = off[i - 1], off[i - 1] = off[j], off[j] = tmp;
		tmp = len[i - 1], len[i - 1] = len[j], len[j] = tmp;
	}
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(tide_seg_alloc_at(b, off[i], len[i]), 0);
	CU_ASSERT_EQUAL(tide_seg_check(b), 0);
	sa = stats(a);
	sb = stats(b);
	CU_ASSERT_EQUAL(sa.used, sb.used);
	CU_ASSERT_EQUAL(sa.live_allocs, sb.live_allocs);
	CU_ASSERT_EQUAL(sa.free_extents, sb.free_extents);
	CU_ASSERT_EQUAL(sa.largest_free, sb.largest_free);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(tide_seg_alloc_size(b, off[i], &sz), 0);
		CU_ASSERT_EQUAL(sz, (len[i] + 63) & ~UINT64_C(63));
		/* The same extent, or one overlapping its start or its end, again: refused. */
		CU_ASSERT_EQUAL(tide_seg_alloc_at(b, off[i], len[i]), -EEXIST);
		if (off[i] >= 64)
			CU_ASSERT_EQUAL(tide_seg_alloc_at(b, off[i] - 64, 128), -EEXIST);
		CU_ASSERT_EQUAL(tide_seg_alloc_at(b, off[i] + sz - 64, 128), -EEXIST);
	}
	CU_ASSERT_EQUAL(tide_seg_check(b), 0);
	CU_ASSERT_EQUAL(stats(b).used, sa.used);
	/* Arguments. */
	CU_ASSERT_EQUAL(tide_seg_alloc_at(b, 16 * MiB, 64), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc_at(b, 16 * MiB - 64, 65), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc_at(b, 0, 0), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_alloc_at(b, 32, 64), -EINVAL);
	/* Freed extents are allocatable normally afterwards. */
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(tide_seg_free(b, off[i]), 0);
	assert_all_free(b, 16 * MiB);
	CU_ASSERT_EQUAL(tide_seg_alloc_at(b, 16 * MiB - 64, 64), 0);
	CU_ASSERT_EQUAL(tide_seg_alloc_at(b, 0, 64), 0);
	CU_ASSERT_EQUAL(tide_seg_check(b), 0);
	tide_seg_destroy(a);
	tide_seg_destroy(b);
}

/* alloc_at needs block-table room for the free pieces either side. */
static void
test_alloc_at_block_table_full(void)
{
	struct tide_seg *s = seg_new(1 * MiB, 0, 3);

	CU_ASSERT_EQUAL(tide_seg_alloc_at(s, 64 * KiB, 64), 0); /* pad + used + rest: 3 nodes */
	CU_ASSERT_EQUAL(tide_seg_alloc_at(s, 128 * KiB, 64), -ENOMEM);
	CU_ASSERT_EQUAL(tide_seg_check(s), 0);
	CU_ASSERT_EQUAL(stats(s).live_allocs, 1);
	tide_seg_destroy(s);
}

static void
test_model_random_1m(void)
{
	model_run(256 * MiB, 64, 1u << 16, 1000000, model_seed(), true, false);
}

/* Small block table and 8-byte granule: -ENOMEM paths under the same checks. */
static void
test_model_small_table(void)
{
	model_run(64 * MiB, 8, 128, 200000, model_seed() + 1, false, true);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("seg_alloc", NULL, NULL);

	CU_add_test(s, "test_tide_seg_create_invalid", test_create_invalid);
	CU_add_test(s, "test_tide_seg_alloc_invalid", test_alloc_invalid);
	CU_add_test(s, "test_tide_seg_alloc_exhaustion", test_alloc_exhaustion);
	CU_add_test(s, "test_tide_seg_alloc_block_table_full", test_alloc_block_table_full);
	CU_add_test(s, "test_tide_seg_alloc_alignment", test_alloc_alignment);
	CU_add_test(s, "test_tide_seg_free_coalesce_neighbours", test_free_coalesce_neighbours);
	CU_add_test(s, "test_tide_seg_free_coalesce_orders", test_free_coalesce_orders);
	CU_add_test(s, "test_tide_seg_free_rejects", test_free_rejects);
	CU_add_test(s, "test_tide_seg_segment_1mib_and_1tib", test_segment_1mib_and_1tib);
	CU_add_test(s, "test_tide_seg_alloc_whole_segment", test_alloc_whole_segment);
	CU_add_test(s, "test_tide_seg_alloc_one_byte_objects", test_alloc_one_byte_objects);
	CU_add_test(s, "test_tide_seg_stats_get", test_stats_get);
	CU_add_test(s, "test_tide_seg_alloc_at_rebuild", test_alloc_at_rebuild);
	CU_add_test(s, "test_tide_seg_alloc_at_block_table_full", test_alloc_at_block_table_full);
	CU_add_test(s, "test_tide_seg_model_random_1m", test_model_random_1m);
	CU_add_test(s, "test_tide_seg_model_small_table", test_model_small_table);
}

TIDE_UT_MAIN(register_tests)
