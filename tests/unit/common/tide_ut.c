/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

double
tide_ut_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void *
tide_ut_read_file(const char *dir, const char *name, size_t *len)
{
	char path[512];
	char *buf;
	long n;
	FILE *f;

	if (dir != NULL) {
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		name = path;
	}
	f = fopen(name, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (len != NULL)
		*len = (size_t)n;
	return buf;
}

void
tide_ut_capture_stderr(void (*fn)(void), char *buf, size_t len)
{
	char path[] = "/tmp/tide_ut_stderr.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	ssize_t n;

	fflush(stderr);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
}

uint64_t
tide_ut_get_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

void
tide_ut_put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

void
tide_ut_fill_lcg(uint8_t *p, size_t n, uint32_t x, uint32_t a, uint32_t c, unsigned shift)
{
	for (size_t i = 0; i < n; i++) {
		x = x * a + c;
		p[i] = (uint8_t)(x >> shift);
	}
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

/* The low end of the ephemeral range; 32768 (Linux's default) when unreadable. */
static unsigned
ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	unsigned lo = 32768, hi = 0;

	if (f != NULL) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	return lo;
}

uint16_t
tide_ut_free_port_run(unsigned n)
{
	unsigned lo = ephemeral_low(), start, base;
	int fds[16];

	if (n == 0 || n > 16 || lo <= 10000 + n)
		return 0;
	/* Start at a pid-dependent place so parallel test processes look apart. */
	start = 10000 + ((unsigned)getpid() * 97u) % (lo - 10000 - n);
	for (unsigned tries = 0; tries < lo - 10000; tries += n) {
		unsigned i;

		base = 10000 + (start - 10000 + tries) % (lo - 10000 - n);
		for (i = 0; i < n; i++) {
			struct sockaddr_in sa = {.sin_family = AF_INET,
						 .sin_port = htons((uint16_t)(base + i)),
						 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			int one = 1;

			fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fds[i] < 0)
				break;
			(void)setsockopt(fds[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (bind(fds[i], (struct sockaddr *)&sa, sizeof(sa)) != 0) {
				close(fds[i]);
				break;
			}
		}
		for (unsigned j = 0; j < i; j++)
			close(fds[j]);
		if (i == n)
			return (uint16_t)base;
	}
	return 0;
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
