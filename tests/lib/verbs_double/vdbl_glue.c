/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The double as a library pmd/verbs loads through its test seam
 * (TIDETEST_VERBS_GLUE=<path of libtide_vdbl.so>), for processes a C test cannot
 * call tide_vrb_glue_set() in: a Python test that loads libtidestore.so, or a
 * tide-node started by one. Devices come from VDBL_DEVICES, or from
 * the process itself calling vdbl_add_*() through the same library.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdbl.h"

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* "name" or "name:a.b.c.d"; without an address the n-th device gets 10.255.0.n. */
static void
add_one(const char *item, size_t len, unsigned n)
{
	char buf[128], *colon;
	struct in_addr a;
	uint32_t ip = 0x0aff0000u | (n & 0xffu);

	if (len == 0 || len >= sizeof(buf)) {
		fprintf(stderr, "vdbl: VDBL_DEVICES: bad item '%.*s'\n", (int)len, item);
		return;
	}
	memcpy(buf, item, len);
	buf[len] = '\0';
	colon = strchr(buf, ':');
	if (colon != NULL) {
		*colon = '\0';
		if (inet_pton(AF_INET, colon + 1, &a) != 1) {
			fprintf(stderr, "vdbl: VDBL_DEVICES: bad IPv4 in '%s:%s'\n", buf,
				colon + 1);
			return;
		}
		ip = ntohl(a.s_addr);
	}
	if (vdbl_add_roce(buf, 0, ip) != 0)
		fprintf(stderr, "vdbl: VDBL_DEVICES: cannot add '%s'\n", buf);
}

static void
add_env_devices(void)
{
	const char *p = getenv("VDBL_DEVICES");
	unsigned n = 1;

	while (p != NULL && *p != '\0') {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);

		add_one(p, len, n++);
		if (end == NULL)
			break;
		p = end + 1;
	}
}

const struct tide_vrb_ops *
tide_vrb_test_glue(void)
{
	pthread_once(&env_once, add_env_devices);
	return vdbl_ops();
}
