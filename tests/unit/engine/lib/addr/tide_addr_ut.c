/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: engine/lib/addr/tide_addr.c, the one host:port parser. */
#include <errno.h>
#include <string.h>

#include "tide_addr.h"
#include "tide_ut.h"

struct ok_case {
	const char *in;
	unsigned flags;
	const char *host;
	uint16_t port;
	bool v6;
};

static void
test_accepted(void)
{
	static const struct ok_case cases[] = {
		{"10.0.0.1:50051", 0, "10.0.0.1", 50051, false},
		{"master.local:1", 0, "master.local", 1, false},
		{"[fe80::1]:65535", 0, "fe80::1", 65535, true},
		{"[::1]:8080", TIDE_ADDR_PORT_OPTIONAL, "::1", 8080, true},
		{"node-a", TIDE_ADDR_PORT_OPTIONAL, "node-a", 0, false},
		{"127.0.0.1", TIDE_ADDR_PORT_OPTIONAL, "127.0.0.1", 0, false},
		/* an unbracketed IPv6 literal is a bare host, never "fe80:" port 1 */
		{"fe80::1", TIDE_ADDR_PORT_OPTIONAL, "fe80::1", 0, true},
		{"2001:db8::7:1", TIDE_ADDR_PORT_OPTIONAL, "2001:db8::7:1", 0, true},
		{"[2001:db8::7]", TIDE_ADDR_PORT_OPTIONAL, "2001:db8::7", 0, true},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char host[64] = "";
		uint16_t port = 7;
		bool v6 = !cases[i].v6;

		CU_ASSERT_EQUAL(tide_addr_split(cases[i].in, host, sizeof(host), &port,
						cases[i].flags, &v6),
				0);
		CU_ASSERT_STRING_EQUAL(host, cases[i].host);
		CU_ASSERT_EQUAL(port, cases[i].port);
		CU_ASSERT_EQUAL(v6, cases[i].v6);
	}
}

struct bad_case {
	const char *in;
	unsigned flags;
	int rc;
};

static void
test_refused(void)
{
	static const struct bad_case cases[] = {
		{"", TIDE_ADDR_PORT_OPTIONAL, -EINVAL},
		{":50051", 0, -EINVAL},
		{"host:", 0, -EINVAL},
		{"host", 0, -EINVAL},    /* a port is required here */
		{"fe80::1", 0, -EINVAL}, /* IPv6 needs brackets with a port */
		{"[fe80::1]", 0, -EINVAL},
		{"[fe80::1", TIDE_ADDR_PORT_OPTIONAL, -EINVAL},
		{"[fe80::1]x", TIDE_ADDR_PORT_OPTIONAL, -EINVAL},
		{"[]:80", 0, -EINVAL},
		{"a]b:80", 0, -EINVAL},
		{"host:+80", 0, -EINVAL},
		{"host: 80", 0, -EINVAL},
		{"host:80x", 0, -EINVAL},
		{"host:0", 0, -ERANGE},
		{"host:65536", 0, -ERANGE},
		{"host:99999999999999999999", 0, -ERANGE},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char host[64] = "untouched";
		uint16_t port = 7;

		CU_ASSERT_EQUAL(tide_addr_split(cases[i].in, host, sizeof(host), &port,
						cases[i].flags, NULL),
				cases[i].rc);
		CU_ASSERT_STRING_EQUAL(host, "untouched");
		CU_ASSERT_EQUAL(port, 7);
	}
	CU_ASSERT_EQUAL(tide_addr_split(NULL, NULL, 0, NULL, 0, NULL), -EINVAL);
}

static void
test_host_length(void)
{
	char host[8];
	uint16_t port;

	CU_ASSERT_EQUAL(tide_addr_split("1234567:1", host, sizeof(host), &port, 0, NULL), 0);
	CU_ASSERT_STRING_EQUAL(host, "1234567");
	CU_ASSERT_EQUAL(tide_addr_split("12345678:1", host, sizeof(host), &port, 0, NULL),
			-ENAMETOOLONG);
	/* validation only */
	CU_ASSERT_EQUAL(tide_addr_split("12345678:1", NULL, 0, NULL, 0, NULL), 0);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tide_addr", NULL, NULL);

	CU_add_test(s, "accepted", test_accepted);
	CU_add_test(s, "refused", test_refused);
	CU_add_test(s, "host_length", test_host_length);
}

TIDE_UT_MAIN(register_tests)
