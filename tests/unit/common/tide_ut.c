/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "tide_ut.h"

int
tide_ut_run(void (*register_fn)(void))
{
	unsigned failures;

	if (CU_initialize_registry() != CUE_SUCCESS) {
		fprintf(stderr, "CUnit: cannot initialise registry: %s\n", CU_get_error_msg());
		return 2;
	}
	register_fn();
	if (CU_get_error() != CUE_SUCCESS) {
		fprintf(stderr, "CUnit: registration failed: %s\n", CU_get_error_msg());
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed() +
		   CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failures == 0 ? 0 : 1;
}
