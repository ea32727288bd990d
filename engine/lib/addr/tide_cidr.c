/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer-network allowlists (see tide_cidr.h for the syntax). Bounds: parsing
 * reads s once and copies at most CIDR_TEXT_MAX bytes of one entry; matching
 * compares at most TIDE_CIDR_MAX entries of at most 16 bytes each.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tide_cidr.h"

/* Longest entry: a full IPv6 literal with an embedded IPv4 tail and "/128". */
#define CIDR_TEXT_MAX (INET6_ADDRSTRLEN + 4)

static void
set_why(char *why, size_t n, unsigned idx, const char *e, size_t elen, const char *what)
{
	if (why == NULL || n == 0)
		return;
	snprintf(why, n, "entry %u '%.*s' %s", idx, (int)(elen > 80 ? 80 : elen), e, what);
}

/* Whether the bits of a after its first prefix bits are all 0. */
static bool
host_bits_clear(const uint8_t *a, unsigned bytes, unsigned prefix)
{
	for (unsigned i = prefix / 8; i < bytes; i++) {
		uint8_t keep = i == prefix / 8 ? (uint8_t)(0xff00u >> (prefix % 8)) : 0;

		if (a[i] & (uint8_t)~keep)
			return false;
	}
	return true;
}

/* Whether the first prefix bits of a and b agree. */
static bool
prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, b, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[full] ^ b[full]) & (uint8_t)(0xff00u >> rest)) == 0;
}

/* One entry (already trimmed, elen > 0) into c. 0, or -EINVAL with why set. */
static int
parse_one(const char *e, size_t elen, unsigned idx, struct tide_cidr *c, char *why, size_t n)
{
	char text[CIDR_TEXT_MAX + 1], shown[INET6_ADDRSTRLEN];
	const char *slash;
	unsigned bits, prefix;

	if (elen > CIDR_TEXT_MAX) {
		set_why(why, n, idx, e, elen, "is too long to be a network");
		return -EINVAL;
	}
	memcpy(text, e, elen);
	text[elen] = '\0';
	slash = strchr(text, '/');
	if (slash != NULL)
		text[slash - text] = '\0';
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, text, c->addr) == 1) {
		c->family = AF_INET;
		bits = 32;
	} else if (inet_pton(AF_INET6, text, c->addr) == 1) {
		c->family = AF_INET6;
		bits = 128;
	} else {
		set_why(why, n, idx, e, elen,
			"is not an IPv4 or IPv6 address (e.g. 10.0.0.0/8, 192.168.1.7, fd00::/8)");
		return -EINVAL;
	}
	prefix = bits;
	if (slash != NULL) {
		const char *p = slash + 1;
		unsigned v = 0;

		/* Plain decimal, at most 3 digits, no sign: "/+8" or "/08" are typos. */
		if (*p == '\0' || strlen(p) > 3 || (p[0] == '0' && p[1] != '\0')) {
			set_why(why, n, idx, e, elen, "has a bad prefix length");
			return -EINVAL;
		}
		for (; *p != '\0'; p++) {
			if (*p < '0' || *p > '9') {
				set_why(why, n, idx, e, elen, "has a bad prefix length");
				return -EINVAL;
			}
			v = v * 10 + (unsigned)(*p - '0');
		}
		if (v > bits) {
			set_why(why, n, idx, e, elen,
				bits == 32 ? "has a prefix over 32" : "has a prefix over 128");
			return -EINVAL;
		}
		prefix = v;
	}
	c->prefix = (uint8_t)prefix;
	if (!host_bits_clear(c->addr, bits / 8, prefix)) {
		char what[160];
		uint8_t net[16] = {0};

		memcpy(net, c->addr, prefix / 8);
		if (prefix % 8 != 0)
			net[prefix / 8] = c->addr[prefix / 8] & (uint8_t)(0xff00u >> (prefix % 8));
		inet_ntop(c->family, net, shown, sizeof(shown));
		snprintf(what, sizeof(what), "has bits set after /%u (the network is %s/%u)",
			 prefix, shown, prefix);
		set_why(why, n, idx, e, elen, what);
		return -EINVAL;
	}
	return 0;
}

int
tide_cidr_parse(const char *s, struct tide_cidr_list *out, char *why, size_t whylen)
{
	struct tide_cidr_list l;
	const char *p = s != NULL ? s : "";
	unsigned idx = 0;
	bool blank = true;

	for (const char *q = p; *q != '\0'; q++) {
		if (*q != ' ' && *q != '\t')
			blank = false;
	}
	if (blank) {
		out->n = 0;
		return 0;
	}
	l.n = 0;
	for (;;) {
		const char *end = strchr(p, ','), *b = p, *t;
		int rc;

		if (end == NULL)
			end = p + strlen(p);
		t = end;
		while (b < t && (*b == ' ' || *b == '\t'))
			b++;
		while (t > b && (t[-1] == ' ' || t[-1] == '\t'))
			t--;
		idx++;
		if (t == b) {
			if (why != NULL && whylen > 0)
				snprintf(why, whylen, "entry %u is empty", idx);
			return -EINVAL;
		}
		if (l.n == TIDE_CIDR_MAX) {
			if (why != NULL && whylen > 0)
				snprintf(why, whylen, "has more than %u networks", TIDE_CIDR_MAX);
			return -E2BIG;
		}
		rc = parse_one(b, (size_t)(t - b), idx, &l.e[l.n], why, whylen);
		if (rc != 0)
			return rc;
		l.n++;
		if (*end == '\0')
			break;
		p = end + 1;
	}
	memcpy(out, &l, offsetof(struct tide_cidr_list, e) + l.n * sizeof(l.e[0]));
	return 0;
}

static bool
match(const struct tide_cidr_list *l, int family, const uint8_t *a)
{
	for (uint32_t i = 0; i < l->n; i++) {
		if (l->e[i].family == family && prefix_eq(l->e[i].addr, a, l->e[i].prefix))
			return true;
	}
	return false;
}

bool
tide_cidr_allows(const struct tide_cidr_list *l, const struct sockaddr *sa, socklen_t len)
{
	if (l == NULL || l->n == 0)
		return true;
	if (sa == NULL)
		return false;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;

		return match(l, AF_INET, (const uint8_t *)&s4->sin_addr);
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
		const uint8_t *a = s6->sin6_addr.s6_addr;

		if (match(l, AF_INET6, a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && match(l, AF_INET, a + 12);
	}
	return false;
}

bool
tide_cidr_allows_ip4(const struct tide_cidr_list *l, uint32_t ip)
{
	uint32_t be = htonl(ip);

	if (l == NULL || l->n == 0)
		return true;
	return match(l, AF_INET, (const uint8_t *)&be);
}
