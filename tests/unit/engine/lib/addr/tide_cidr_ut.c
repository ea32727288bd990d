/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: engine/lib/addr/tide_cidr.c, the one peer-network allowlist. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "tide_cidr.h"
#include "tide_ut.h"

static struct sockaddr_in
v4(const char *a)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(1234)};

	CU_ASSERT_EQUAL(inet_pton(AF_INET, a, &s.sin_addr), 1);
	return s;
}

static struct sockaddr_in6
v6(const char *a)
{
	struct sockaddr_in6 s = {.sin6_family = AF_INET6, .sin6_port = htons(1234)};

	CU_ASSERT_EQUAL(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
	return s;
}

static bool
allows4(const struct tide_cidr_list *l, const char *a)
{
	struct sockaddr_in s = v4(a);

	return tide_cidr_allows(l, (struct sockaddr *)&s, sizeof(s));
}

static bool
allows6(const struct tide_cidr_list *l, const char *a)
{
	struct sockaddr_in6 s = v6(a);

	return tide_cidr_allows(l, (struct sockaddr *)&s, sizeof(s));
}

static void
test_parse_accepted(void)
{
	struct tide_cidr_list l;
	char why[256] = "";

	TIDE_UT_OK(tide_cidr_parse("10.0.0.0/8, 192.168.1.7 ,fd00::/8,::1,0.0.0.0/0", &l, why,
				   sizeof(why)));
	CU_ASSERT_EQUAL(l.n, 5);
	CU_ASSERT_EQUAL(l.e[0].family, AF_INET);
	CU_ASSERT_EQUAL(l.e[0].prefix, 8);
	CU_ASSERT_EQUAL(l.e[0].addr[0], 10);
	CU_ASSERT_EQUAL(l.e[1].family, AF_INET);
	CU_ASSERT_EQUAL(l.e[1].prefix, 32); /* a bare address is one host */
	CU_ASSERT_EQUAL(l.e[2].family, AF_INET6);
	CU_ASSERT_EQUAL(l.e[2].prefix, 8);
	CU_ASSERT_EQUAL(l.e[3].prefix, 128);
	CU_ASSERT_EQUAL(l.e[4].prefix, 0);

	/* Non-byte prefixes with their host bits clear. */
	TIDE_UT_OK(tide_cidr_parse("172.16.0.0/12,10.1.2.128/25,2001:db8:8000::/33", &l, NULL, 0));
	CU_ASSERT_EQUAL(l.n, 3);
}

static void
test_parse_empty_allows_all(void)
{
	struct tide_cidr_list l = {.n = 7};

	TIDE_UT_OK(tide_cidr_parse("", &l, NULL, 0));
	CU_ASSERT_EQUAL(l.n, 0);
	l.n = 7;
	TIDE_UT_OK(tide_cidr_parse(" \t ", &l, NULL, 0));
	CU_ASSERT_EQUAL(l.n, 0);
	l.n = 7;
	TIDE_UT_OK(tide_cidr_parse(NULL, &l, NULL, 0));
	CU_ASSERT_EQUAL(l.n, 0);
	CU_ASSERT_TRUE(allows4(&l, "203.0.113.9"));
	CU_ASSERT_TRUE(allows6(&l, "2001:db8::1"));
	CU_ASSERT_TRUE(tide_cidr_allows(NULL, NULL, 0));
	CU_ASSERT_TRUE(tide_cidr_allows_ip4(NULL, 0x01020304));
}

struct bad_case {
	const char *in;
	int rc;
	const char *why; /* a substring the message must contain */
};

static void
test_parse_refused(void)
{
	static const struct bad_case cases[] = {
		{"10.0.0.1/8", -EINVAL,
		 "entry 1 '10.0.0.1/8' has bits set after /8 (the network "
		 "is 10.0.0.0/8)"},
		{"10.0.0.0/8,192.168.1.0/23", -EINVAL,
		 "entry 2 '192.168.1.0/23' has bits set "
		 "after /23 (the network is 192.168.0.0/23)"},
		{"fd00::1/8", -EINVAL, "the network is fd00::/8"},
		{"10.0.0.0/33", -EINVAL, "entry 1 '10.0.0.0/33' has a prefix over 32"},
		{"::/129", -EINVAL, "prefix over 128"},
		{"10.0.0.0/", -EINVAL, "bad prefix length"},
		{"10.0.0.0/+8", -EINVAL, "bad prefix length"},
		{"10.0.0.0/08", -EINVAL, "bad prefix length"},
		{"10.0.0.0/8x", -EINVAL, "bad prefix length"},
		{"10.0.0.0/1000", -EINVAL, "bad prefix length"},
		{"10.0.0.0/8/8", -EINVAL, "bad prefix length"},
		{"10.0.0.256", -EINVAL, "entry 1 '10.0.0.256' is not an IPv4 or IPv6 address"},
		{"010.0.0.1", -EINVAL, "not an IPv4 or IPv6 address"},
		{"10.1", -EINVAL, "not an IPv4 or IPv6 address"},
		{"node-a", -EINVAL, "not an IPv4 or IPv6 address"}, /* names are never resolved */
		{"[::1]", -EINVAL, "not an IPv4 or IPv6 address"},
		{"fe80::1%eth0", -EINVAL, "not an IPv4 or IPv6 address"},
		{"/8", -EINVAL, "not an IPv4 or IPv6 address"},
		{"10.0.0.0/8,", -EINVAL, "entry 2 is empty"},
		{",10.0.0.0/8", -EINVAL, "entry 1 is empty"},
		{"10.0.0.0/8, ,::1", -EINVAL, "entry 2 is empty"},
		{"10.0.0.0 8", -EINVAL, "not an IPv4 or IPv6 address"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tide_cidr_list l = {.n = 99};
		char why[256] = "";
		int rc = tide_cidr_parse(cases[i].in, &l, why, sizeof(why));

		CU_ASSERT_EQUAL(rc, cases[i].rc);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, cases[i].why));
		if (rc != cases[i].rc || strstr(why, cases[i].why) == NULL)
			fprintf(stderr, "\n'%s': rc %d, why '%s'\n", cases[i].in, rc, why);
		CU_ASSERT_EQUAL(l.n, 99); /* untouched on failure */
	}
}

static void
test_parse_bounds(void)
{
	char text[TIDE_CIDR_MAX * 16 + 32], why[256] = "", *p = text;
	struct tide_cidr_list l;

	for (unsigned i = 0; i < TIDE_CIDR_MAX; i++)
		p += sprintf(p, "%s10.0.%u.0/24", i ? "," : "", i);
	TIDE_UT_OK(tide_cidr_parse(text, &l, why, sizeof(why)));
	CU_ASSERT_EQUAL(l.n, TIDE_CIDR_MAX);
	strcpy(p, ",10.9.9.9");
	CU_ASSERT_EQUAL(tide_cidr_parse(text, &l, why, sizeof(why)), -E2BIG);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "more than 64 networks"));

	/* An entry longer than any address is refused before it is copied. */
	memset(text, '1', 200);
	text[200] = '\0';
	CU_ASSERT_EQUAL(tide_cidr_parse(text, &l, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "too long"));
	/* A NULL or zero-length why is fine. */
	CU_ASSERT_EQUAL(tide_cidr_parse("x", &l, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(tide_cidr_parse("x", &l, why, 0), -EINVAL);
}

static void
test_allows_v4(void)
{
	struct tide_cidr_list l;

	TIDE_UT_OK(tide_cidr_parse("127.0.0.1/32,10.0.0.0/8,192.168.4.0/22", &l, NULL, 0));
	CU_ASSERT_TRUE(allows4(&l, "127.0.0.1"));
	CU_ASSERT_FALSE(allows4(&l, "127.0.0.2"));
	CU_ASSERT_TRUE(allows4(&l, "10.255.255.255"));
	CU_ASSERT_FALSE(allows4(&l, "11.0.0.0"));
	CU_ASSERT_TRUE(allows4(&l, "192.168.4.0"));
	CU_ASSERT_TRUE(allows4(&l, "192.168.7.255"));
	CU_ASSERT_FALSE(allows4(&l, "192.168.8.0"));
	CU_ASSERT_FALSE(allows4(&l, "192.168.3.255"));
	CU_ASSERT_TRUE(tide_cidr_allows_ip4(&l, 0x7f000001));
	CU_ASSERT_FALSE(tide_cidr_allows_ip4(&l, 0x7f000002));
	CU_ASSERT_TRUE(tide_cidr_allows_ip4(&l, 0xc0a80501));
	/* IPv4 entries say nothing about native IPv6 peers... */
	CU_ASSERT_FALSE(allows6(&l, "::1"));
	/* ...but cover IPv4-mapped ones, as a dual-stack listener reports them. */
	CU_ASSERT_TRUE(allows6(&l, "::ffff:10.1.2.3"));
	CU_ASSERT_FALSE(allows6(&l, "::ffff:11.1.2.3"));

	/* 0.0.0.0/0: every IPv4 peer. */
	TIDE_UT_OK(tide_cidr_parse("0.0.0.0/0", &l, NULL, 0));
	CU_ASSERT_TRUE(allows4(&l, "203.0.113.9"));
	CU_ASSERT_FALSE(allows6(&l, "2001:db8::1"));
}

static void
test_allows_v6(void)
{
	struct tide_cidr_list l;

	TIDE_UT_OK(tide_cidr_parse("fd00::/8,2001:db8:8000::/33,::1", &l, NULL, 0));
	CU_ASSERT_TRUE(allows6(&l, "fdff:1::9"));
	CU_ASSERT_FALSE(allows6(&l, "fe00::1"));
	CU_ASSERT_TRUE(allows6(&l, "2001:db8:ffff::1"));
	CU_ASSERT_FALSE(allows6(&l, "2001:db8:7fff::1"));
	CU_ASSERT_TRUE(allows6(&l, "::1"));
	CU_ASSERT_FALSE(allows6(&l, "::2"));
	CU_ASSERT_FALSE(allows4(&l, "127.0.0.1"));
	CU_ASSERT_FALSE(tide_cidr_allows_ip4(&l, 0x7f000001));
}

static void
test_allows_odd_addresses(void)
{
	struct tide_cidr_list l;
	struct sockaddr_in s = v4("127.0.0.1");
	struct sockaddr_un_like {
		sa_family_t family;
		char path[8];
	} u = {.family = AF_UNIX};

	TIDE_UT_OK(tide_cidr_parse("127.0.0.1", &l, NULL, 0));
	CU_ASSERT_TRUE(tide_cidr_allows(&l, (struct sockaddr *)&s, sizeof(s)));
	/* A short length, no address or another family never passes a non-empty list. */
	CU_ASSERT_FALSE(tide_cidr_allows(&l, (struct sockaddr *)&s, sizeof(s) - 1));
	CU_ASSERT_FALSE(tide_cidr_allows(&l, NULL, 0));
	CU_ASSERT_FALSE(tide_cidr_allows(&l, (struct sockaddr *)&u, sizeof(u)));
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tide_cidr", NULL, NULL);

	CU_add_test(s, "parse_accepted", test_parse_accepted);
	CU_add_test(s, "parse_empty_allows_all", test_parse_empty_allows_all);
	CU_add_test(s, "parse_refused", test_parse_refused);
	CU_add_test(s, "parse_bounds", test_parse_bounds);
	CU_add_test(s, "allows_v4", test_allows_v4);
	CU_add_test(s, "allows_v6", test_allows_v6);
	CU_add_test(s, "allows_odd_addresses", test_allows_odd_addresses);
}

TIDE_UT_MAIN(register_tests)
