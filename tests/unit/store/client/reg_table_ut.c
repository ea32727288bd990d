/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/reg_table.c: the registered-buffer table. Checks each call's
 * errors, growth, and that backward-shift deletion keeps every remaining key
 * reachable: a random run of adds and deletes (clustered addresses, so probe
 * chains wrap and collide) against a plain array, with the table's count and
 * lookups compared after every step.
 */
#include <errno.h>
#include <stdlib.h>

#include "reg_table.h"
#include "tide_ut.h"

static void
test_init_rejects_bad_capacity(void)
{
	struct tide_reg_table rt;

	CU_ASSERT_EQUAL(tide_reg_table_init(&rt, 0), -EINVAL);
	CU_ASSERT_EQUAL(tide_reg_table_init(&rt, 1), -EINVAL);
	CU_ASSERT_EQUAL(tide_reg_table_init(&rt, 48), -EINVAL);
	TIDE_UT_OK(tide_reg_table_init(&rt, 2));
	tide_reg_table_fini(&rt);
	tide_reg_table_fini(NULL);
}

static void
test_add_del_errors(void)
{
	struct tide_reg_table rt;
	size_t len = 0;

	TIDE_UT_OK(tide_reg_table_init(&rt, 4));
	CU_ASSERT_EQUAL(tide_reg_table_add(&rt, 0, 10), -EINVAL);
	CU_ASSERT_EQUAL(tide_reg_table_add(&rt, 0x1000, 0), -EINVAL);
	TIDE_UT_OK(tide_reg_table_add(&rt, 0x1000, 10));
	CU_ASSERT_EQUAL(tide_reg_table_add(&rt, 0x1000, 20), -EEXIST);
	CU_ASSERT_EQUAL(tide_reg_table_len(&rt, 0x1000), 10); /* unchanged */
	CU_ASSERT_EQUAL(tide_reg_table_len(&rt, 0x2000), 0);
	CU_ASSERT_EQUAL(tide_reg_table_len(&rt, 0), 0);
	CU_ASSERT_EQUAL(tide_reg_table_del(&rt, 0x2000, &len), -ENOENT);
	CU_ASSERT_EQUAL(tide_reg_table_del(&rt, 0, &len), -ENOENT);
	TIDE_UT_OK(tide_reg_table_del(&rt, 0x1000, &len));
	CU_ASSERT_EQUAL(len, 10);
	CU_ASSERT_EQUAL(rt.n, 0);
	CU_ASSERT_EQUAL(tide_reg_table_del(&rt, 0x1000, NULL), -ENOENT);
	tide_reg_table_fini(&rt);
}

static void
test_grows_at_half_load(void)
{
	struct tide_reg_table rt;

	TIDE_UT_OK(tide_reg_table_init(&rt, 4));
	TIDE_UT_OK(tide_reg_table_add(&rt, 0x1000, 1));
	TIDE_UT_OK(tide_reg_table_add(&rt, 0x2000, 2));
	CU_ASSERT_EQUAL(rt.cap, 4);
	TIDE_UT_OK(tide_reg_table_add(&rt, 0x3000, 3));
	CU_ASSERT_EQUAL(rt.cap, 8);
	for (uintptr_t a = 4; a <= 1000; a++)
		TIDE_UT_OK(tide_reg_table_add(&rt, a * 0x1000, (size_t)a));
	CU_ASSERT_EQUAL(rt.n, 1000);
	CU_ASSERT_TRUE(rt.cap >= 2000 && (rt.cap & (rt.cap - 1)) == 0);
	for (uintptr_t a = 1; a <= 1000; a++)
		CU_ASSERT_EQUAL(tide_reg_table_len(&rt, a * 0x1000), (size_t)a);
	tide_reg_table_fini(&rt);
}

#define NKEYS 96

static void
test_random_against_model(void)
{
	struct tide_reg_table rt;
	size_t model[NKEYS] = {0}; /* length per key index, 0 = absent */
	size_t n = 0, bad = 0;
	unsigned seed = 12345;

	TIDE_UT_OK(tide_reg_table_init(&rt, 8));
	for (int step = 0; step < 200000; step++) {
		unsigned k = (unsigned)rand_r(&seed) % NKEYS;
		/* 64-byte spacing: neighbours share high bits, homes collide. */
		uintptr_t addr = 0x7f0000000000ull + (uintptr_t)k * 64;
		size_t len = 0;

		if ((unsigned)rand_r(&seed) % 2 == 0) {
			int rc = tide_reg_table_add(&rt, addr, (size_t)step + 1);

			if (model[k] != 0) {
				bad += rc != -EEXIST;
			} else {
				bad += rc != 0;
				model[k] = (size_t)step + 1;
				n++;
			}
		} else {
			int rc = tide_reg_table_del(&rt, addr, &len);

			if (model[k] == 0) {
				bad += rc != -ENOENT;
			} else {
				bad += rc != 0 || len != model[k];
				model[k] = 0;
				n--;
			}
		}
		bad += rt.n != n;
		if (step % 97 == 0)
			for (unsigned j = 0; j < NKEYS; j++)
				bad += tide_reg_table_len(&rt,
							  0x7f0000000000ull + (uintptr_t)j * 64) !=
				       model[j];
	}
	CU_ASSERT_EQUAL(bad, 0);
	tide_reg_table_fini(&rt);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("reg_table", NULL, NULL);

	CU_add_test(s, "init_rejects_bad_capacity", test_init_rejects_bad_capacity);
	CU_add_test(s, "add_del_errors", test_add_del_errors);
	CU_add_test(s, "grows_at_half_load", test_grows_at_half_load);
	CU_add_test(s, "random_against_model", test_random_against_model);
}

TIDE_UT_MAIN(register_tests)
