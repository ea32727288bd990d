/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seg_warm.c: a range is faulted in whole (mincore) with what was already
 * written in it kept, nothing is faulted in past the memory reserve, stop
 * returns promptly mid-way and leaves the memory usable, and bad ranges are
 * refused.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "seg_warm.h"
#include "tide_ut.h"

static void *
anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Pages of [p, p + len) resident now. */
static size_t
resident_pages(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = len / pg, r = 0;
	unsigned char *v = malloc(n);

	if (v == NULL || mincore(p, len, v) != 0) {
		free(v);
		return SIZE_MAX;
	}
	for (size_t i = 0; i < n; i++)
		r += v[i] & 1;
	free(v);
	return r;
}

/* Wait (10 s deadline) until the thread is done; returns its progress. */
static size_t
wait_done(struct tide_seg_warm *w, int *done)
{
	struct timespec ts = {0, 5 * 1000 * 1000};
	double end = tide_ut_now_s() + 10;
	size_t got;

	do {
		got = tide_seg_warm_progress(w, done);
		if (*done)
			return got;
		nanosleep(&ts, NULL);
	} while (tide_ut_now_s() < end);
	return got;
}

static void
test_whole_range(void)
{
	const size_t len = 96u << 20; /* three steps */
	struct tide_seg_warm *w = NULL;
	int done = 0;
	char *p = anon(len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL_FATAL(resident_pages(p, len), 0);
	/* Bytes already written (a put that came first) are kept, not zeroed. */
	p[(40u << 20) + 8] = 0x33;
	p[(40u << 20) + 4096 * 3] = 0x44;
	/* A reserve of one page: any machine that runs the tests has 96 MiB more. */
	CU_ASSERT_EQUAL_FATAL(tide_seg_warm_start(p, len, 4096, &w), 0);
	CU_ASSERT_EQUAL(wait_done(w, &done), len);
	CU_ASSERT_TRUE(done);
	CU_ASSERT_EQUAL(resident_pages(p, len), len / (size_t)sysconf(_SC_PAGESIZE));
	/* Faulted in as zero pages of its own: the memory reads zero and takes writes. */
	CU_ASSERT_EQUAL(p[0] | p[len / 2] | p[len - 1], 0);
	CU_ASSERT_EQUAL(p[(40u << 20) + 8], 0x33);
	CU_ASSERT_EQUAL(p[(40u << 20) + 4096 * 3], 0x44);
	memset(p + len - 4096, 0x5a, 4096);
	CU_ASSERT_EQUAL(p[len - 1], 0x5a);
	tide_seg_warm_stop(w);
	munmap(p, len);
}

static void
test_reserve_stops_it(void)
{
	const size_t len = 64u << 20;
	struct tide_seg_warm *w = NULL;
	int done = 0;
	char *p = anon(len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	/* More than any machine has available: nothing is faulted in. */
	CU_ASSERT_EQUAL_FATAL(tide_seg_warm_start(p, len, UINT64_MAX / 4, &w), 0);
	CU_ASSERT_EQUAL(wait_done(w, &done), 0);
	CU_ASSERT_TRUE(done);
	CU_ASSERT_EQUAL(resident_pages(p, len), 0);
	tide_seg_warm_stop(w);
	munmap(p, len);
}

static void
test_stop_midway(void)
{
	const size_t len = 8ul << 30; /* address space only; stopped long before */
	struct tide_seg_warm *w = NULL;
	double t0;
	char *p = anon(len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL_FATAL(tide_seg_warm_start(p, len, 4096, &w), 0);
	t0 = tide_ut_now_s();
	tide_seg_warm_stop(w);
	/* At most the 32 MiB step in progress (tens of ms); 2 s leaves room for ASan. */
	CU_ASSERT(tide_ut_now_s() - t0 < 2.0);
	CU_ASSERT(resident_pages(p, 256u << 20) < (256u << 20) / (size_t)sysconf(_SC_PAGESIZE));
	p[12345] = 7;
	CU_ASSERT_EQUAL(p[12345], 7);
	munmap(p, len);
	tide_seg_warm_stop(NULL);
}

static void
test_bad_ranges(void)
{
	struct tide_seg_warm *w = NULL;
	const size_t len = 1u << 20;
	char *p = anon(len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(tide_seg_warm_start(p + 1, len - 4096, 0, &w), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_warm_start(p, len - 1, 0, &w), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_warm_start(p, 0, 0, &w), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_warm_start(NULL, len, 0, &w), -EINVAL);
	CU_ASSERT_EQUAL(tide_seg_warm_start(p, len, 0, NULL), -EINVAL);
	CU_ASSERT_PTR_NULL(w);
	munmap(p, len);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("seg_warm", NULL, NULL);

	CU_add_test(s, "whole_range", test_whole_range);
	CU_add_test(s, "reserve_stops_it", test_reserve_stops_it);
	CU_add_test(s, "stop_midway", test_stop_midway);
	CU_add_test(s, "bad_ranges", test_bad_ranges);
}

TIDE_UT_MAIN(register_tests)
