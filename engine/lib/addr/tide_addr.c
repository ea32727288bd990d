/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer address parser (see tide_addr.h for the grammar). Bounds: reads s once
 * up to its NUL; writes at most host_len bytes to host.
 */
#include <errno.h>
#include <string.h>

#include "tide_addr.h"

/* Plain decimal 1..65535; -EINVAL not a number, -ERANGE out of range. */
static int
parse_port(const char *p, uint16_t *out)
{
	unsigned long v = 0;

	if (*p == '\0')
		return -EINVAL;
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > 65535)
			return -ERANGE;
	}
	if (v == 0)
		return -ERANGE;
	*out = (uint16_t)v;
	return 0;
}

int
tide_addr_split(const char *s, char *host, size_t host_len, uint16_t *port, unsigned flags,
		bool *v6)
{
	const char *hs = s, *he, *ps = NULL;
	bool is6 = false;
	uint16_t p = 0;
	size_t hl;
	int rc;

	if (s == NULL)
		return -EINVAL;
	if (s[0] == '[') {
		he = strchr(s, ']');
		if (he == NULL)
			return -EINVAL;
		hs = s + 1;
		is6 = true;
		if (he[1] == ':')
			ps = he + 2;
		else if (he[1] != '\0')
			return -EINVAL;
	} else {
		const char *c1 = strchr(s, ':');

		he = s + strlen(s);
		if (c1 != NULL && strchr(c1 + 1, ':') != NULL) {
			is6 = true; /* two or more colons: a bare IPv6 literal */
		} else if (c1 != NULL) {
			he = c1;
			ps = c1 + 1;
		}
		if (memchr(s, '[', (size_t)(he - s)) != NULL || memchr(s, ']', (size_t)(he - s)))
			return -EINVAL;
	}
	hl = (size_t)(he - hs);
	if (hl == 0)
		return -EINVAL;
	if (ps != NULL) {
		rc = parse_port(ps, &p);
		if (rc != 0)
			return rc;
	} else if (!(flags & TIDE_ADDR_PORT_OPTIONAL)) {
		return -EINVAL;
	}
	if (host != NULL) {
		if (hl >= host_len)
			return -ENAMETOOLONG;
		memcpy(host, hs, hl);
		host[hl] = '\0';
	}
	if (port != NULL)
		*port = p;
	if (v6 != NULL)
		*v6 = is6;
	return 0;
}
