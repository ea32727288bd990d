/* SPDX-License-Identifier: Apache-2.0 */
/* pmd/verbs/vrb_glue.c: the dlopen()ed table and the test override. */
#include <errno.h>
#include <string.h>

#include "tide_ut.h"
#include "tide_vrb.h"
#include "vdbl.h"

static void
test_glue_get_override_wins(void)
{
	const struct tide_vrb_ops *ops = NULL;

	tide_vrb_glue_set(vdbl_ops());
	TIDE_UT_OK(tide_vrb_glue_get(&ops, NULL, 0));
	CU_ASSERT_PTR_EQUAL(ops, vdbl_ops());
	/* The override never loads the library. */
	CU_ASSERT_EQUAL(tide_vrb_glue_dlopen_count(), 0);
	tide_vrb_glue_set(NULL);
}

/* Without the override the real library is loaded once (or, on a host without
 * rdma-core, refused with a message that says what to set). Either way a host
 * without a device ends in -ENODEV naming MOONCAKE_PROTOCOL=tcp. */
static void
test_glue_get_real_library(void)
{
	const struct tide_vrb_ops *ops = NULL, *again = NULL;
	char err[512] = "";
	int rc = tide_vrb_glue_get(&ops, err, sizeof(err));

	CU_ASSERT_EQUAL(tide_vrb_glue_dlopen_count(), 1);
	if (rc != 0) {
		CU_ASSERT_EQUAL(rc, -ENOENT);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "MOONCAKE_PROTOCOL=tcp"));
		return;
	}
	CU_ASSERT_STRING_EQUAL(ops->name, "libibverbs.so.1");
	TIDE_UT_OK(tide_vrb_glue_get(&again, NULL, 0));
	CU_ASSERT_PTR_EQUAL(again, ops);
	CU_ASSERT_EQUAL(tide_vrb_glue_dlopen_count(), 1); /* cached */
	CU_ASSERT_PTR_NOT_NULL(ops->get_device_list);
	CU_ASSERT_PTR_NOT_NULL(ops->post_send);
	CU_ASSERT_PTR_NOT_NULL(ops->poll_cq);

	struct tide_vrb_cfg cfg;
	struct tide_vrb *v = NULL;

	tide_vrb_cfg_init(&cfg, sizeof(cfg));
	rc = tide_vrb_open(ops, &cfg, &v, err, sizeof(err));
	if (rc == 0) {
		/* A host with a real device: nothing more to check here. */
		tide_vrb_close(v);
		return;
	}
	CU_ASSERT_EQUAL(rc, -ENODEV);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "MOONCAKE_PROTOCOL=tcp"));
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("vrb_glue", NULL, NULL);

	CU_add_test(s, "test_glue_get_override_wins", test_glue_get_override_wins);
	CU_add_test(s, "test_glue_get_real_library", test_glue_get_real_library);
}

TIDE_UT_MAIN(register_tests)
