/* SPDX-License-Identifier: Apache-2.0 */
/* engine/lib/log/buf.c: the one growable buffer (tide_grow, struct tide_buf). */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide_buf.h"
#include "tide_ut.h"

static void
test_grow_doubles_from_first(void)
{
	void *p = NULL;
	size_t cap = 0;

	TIDE_UT_OK(tide_grow(&p, &cap, 0, 10, 100, 0));
	CU_ASSERT(p != NULL && cap == 100);
	TIDE_UT_OK(tide_grow(&p, &cap, 90, 10, 100, 0)); /* fits: unchanged */
	CU_ASSERT_EQUAL(cap, 100);
	TIDE_UT_OK(tide_grow(&p, &cap, 90, 11, 100, 0));
	CU_ASSERT_EQUAL(cap, 200);
	TIDE_UT_OK(tide_grow(&p, &cap, 200, 1000, 100, 0));
	CU_ASSERT_EQUAL(cap, 1600);
	free(p);
}

static void
test_grow_limit(void)
{
	void *p = NULL;
	size_t cap = 0;

	/* Doubling past the limit stops at the limit; beyond it nothing changes. */
	TIDE_UT_OK(tide_grow(&p, &cap, 0, 700, 512, 1000));
	CU_ASSERT_EQUAL(cap, 1000);
	CU_ASSERT_EQUAL(tide_grow(&p, &cap, 1000, 1, 512, 1000), -E2BIG);
	CU_ASSERT_EQUAL(tide_grow(&p, &cap, 10, SIZE_MAX, 512, 0), -E2BIG);
	CU_ASSERT_EQUAL(tide_grow(&p, &cap, SIZE_MAX, 1, 512, 0), -E2BIG);
	CU_ASSERT_EQUAL(cap, 1000);
	free(p);
}

static void
test_buf_append_keeps_a_nul(void)
{
	struct tide_buf b = {0};

	TIDE_UT_OK(tide_buf_append(&b, "abc", 3, 0));
	TIDE_UT_OK(tide_buf_append(&b, "", 0, 0));
	TIDE_UT_OK(tide_buf_append(&b, "def", 3, 0));
	CU_ASSERT_EQUAL(b.len, 6);
	CU_ASSERT_STRING_EQUAL(b.p, "abcdef");
	/* The NUL counts against the limit: 6 + 3 + 1 > 9. */
	CU_ASSERT_EQUAL(tide_buf_append(&b, "ghi", 3, 9), -E2BIG);
	CU_ASSERT_EQUAL(b.len, 6);
	TIDE_UT_OK(tide_buf_append(&b, "gh", 2, 9));
	CU_ASSERT_STRING_EQUAL(b.p, "abcdefgh");
	for (int i = 0; i < 1000; i++)
		TIDE_UT_OK(tide_buf_append(&b, "0123456789", 10, 0));
	CU_ASSERT_EQUAL(b.len, 10008);
	CU_ASSERT(b.cap >= b.len + 1);
	tide_buf_free(&b);
	CU_ASSERT(b.p == NULL && b.len == 0 && b.cap == 0);
	tide_buf_free(NULL);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("buf", NULL, NULL);

	CU_add_test(s, "grow_doubles_from_first", test_grow_doubles_from_first);
	CU_add_test(s, "grow_limit", test_grow_limit);
	CU_add_test(s, "buf_append_keeps_a_nul", test_buf_append_keeps_a_nul);
}

TIDE_UT_MAIN(register_tests)
