/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
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
tide_ut_connect_from(const char *src, const char *dst, uint16_t port, int timeout_ms)
{
	struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	int fd, rc;

	if (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
	    inet_pton(AF_INET, dst, &to.sin_addr) != 1)
		return -EINVAL;
	to.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (timeout_ms > 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
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
