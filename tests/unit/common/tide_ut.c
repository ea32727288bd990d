/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "tide_ut.h"

long
tide_ut_rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

double
tide_ut_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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
