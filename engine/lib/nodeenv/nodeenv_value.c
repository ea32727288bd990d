/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Value parsers for the node environment file. Each takes NUL-terminated
 * text, writes its output only on success, and explains a failure in `why`
 * as the tail of "'<value>' <why>". No locale-dependent calls (strtod,
 * isdigit under a non-C locale) and no atoi: every number is scanned here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nodeenv_internal.h"
#include "tide_addr.h"
#include "tide_cidr.h"
#include "tide_nodeenv.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

void
ne_why(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || n == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int
hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static char
lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static bool
eq_nocase(const char *a, const char *b)
{
	while (*a != '\0' && *b != '\0') {
		if (lower(*a) != lower(*b))
			return false;
		a++;
		b++;
	}
	return *a == *b;
}

int
ne_parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	bool big = false;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned d;

		if (!is_digit(s[i]))
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		/* Keep scanning after overflow so "99999999999999999999x" is
		 * reported as malformed, not as too large. */
		if (v > (UINT64_MAX - d) / 10)
			big = true;
		else
			v = v * 10 + d;
	}
	if (big)
		return -ERANGE;
	*out = v;
	return 0;
}

int
tide_nodeenv_parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *sfx;
		uint64_t mult;
	} sfx[] = {
		{"", 1},      {"b", 1},    {"k", KIB},   {"kb", KIB},  {"kib", KIB},
		{"m", MIB},   {"mb", MIB}, {"mib", MIB}, {"g", GIB},   {"gb", GIB},
		{"gib", GIB}, {"t", TIB},  {"tb", TIB},  {"tib", TIB},
	};
	unsigned __int128 ip = 0, fnum = 0, fden = 1, total;
	uint64_t mult = 0;
	const char *p = s;
	bool big = false;
	unsigned nfrac = 0;

	if (s == NULL || !is_digit(*p))
		return -EINVAL;
	for (; is_digit(*p); p++) {
		if (!big)
			ip = ip * 10 + (unsigned)(*p - '0');
		if (ip > UINT64_MAX)
			big = true;
	}
	if (*p == '.') {
		p++;
		if (!is_digit(*p))
			return -EINVAL;
		/* 18 digits keep fnum * 2^40 below 2^128; more precision than
		 * a byte count can use. */
		for (; is_digit(*p); p++) {
			if (++nfrac > 18)
				return -EINVAL;
			fnum = fnum * 10 + (unsigned)(*p - '0');
			fden *= 10;
		}
	}
	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		if (eq_nocase(p, sfx[i].sfx)) {
			mult = sfx[i].mult;
			break;
		}
	}
	if (mult == 0)
		return -EINVAL;
	if (big)
		return -ERANGE;
	total = ip * mult + fnum * mult / fden;
	if (total > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)total;
	return 0;
}

void
ne_size_human(uint64_t v, char *buf, size_t n)
{
	static const struct {
		uint64_t mult;
		const char *sfx;
	} units[] = {{TIB, "tb"}, {GIB, "gb"}, {MIB, "mb"}, {KIB, "kb"}};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		uint64_t m = units[i].mult, frac = v % m;

		if (v == 0 || v < m)
			continue;
		if (frac == 0) {
			snprintf(buf, n, "%" PRIu64 "%s", v / m, units[i].sfx);
			return;
		}
		/* Up to three exact decimals (3.125gb), the form Mooncake documents. */
		if ((unsigned __int128)frac * 1000 % m == 0) {
			char dec[8];
			size_t l;

			snprintf(dec, sizeof(dec), "%03u",
				 (unsigned)((unsigned __int128)frac * 1000 / m));
			for (l = strlen(dec); l > 0 && dec[l - 1] == '0'; l--)
				dec[l - 1] = '\0';
			snprintf(buf, n, "%" PRIu64 ".%s%s", v / m, dec, units[i].sfx);
			return;
		}
	}
	snprintf(buf, n, "%" PRIu64, v);
}

int
tide_nodeenv_parse_bool(const char *s, bool *out)
{
	return s != NULL && out != NULL ? ne_parse_bool(s, out) : -EINVAL;
}

int
ne_parse_bool(const char *s, bool *out)
{
	/* The one boolean syntax of Tide (node file, tool flags, mooncake_master
	 * flags): any case; t/f and y/n as gflags also takes them. */
	static const char *const yes[] = {"1", "true", "yes", "on", "t", "y"};
	static const char *const no[] = {"0", "false", "no", "off", "f", "n"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (eq_nocase(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (eq_nocase(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

int
ne_parse_ipv4(const char *s, struct in_addr *out)
{
	uint32_t addr = 0;
	const char *p = s;

	/* Strict dotted quad: inet_aton would also take "10.1" and octal
	 * "010.0.0.1", which other tools reading the same file would not. */
	for (int part = 0; part < 4; part++) {
		unsigned v = 0, nd = 0;

		if (part > 0 && *p++ != '.')
			return -EINVAL;
		while (is_digit(*p)) {
			if (nd == 1 && v == 0)
				return -EINVAL; /* leading zero */
			v = v * 10 + (unsigned)(*p - '0');
			if (++nd > 3 || v > 255)
				return -EINVAL;
			p++;
		}
		if (nd == 0)
			return -EINVAL;
		addr = (addr << 8) | v;
	}
	if (*p != '\0')
		return -EINVAL;
	out->s_addr = htonl(addr);
	return 0;
}

int
ne_parse_netmask(const char *s, struct in_addr *mask, uint8_t *prefix)
{
	uint32_t m, inv;
	struct in_addr a;

	if (s[0] == '/') {
		uint64_t len;

		if (ne_parse_u64(s + 1, strlen(s + 1), &len) != 0 || len < 1 || len > 32)
			return -EINVAL;
		m = len == 32 ? UINT32_MAX : ~(UINT32_MAX >> len);
		mask->s_addr = htonl(m);
		*prefix = (uint8_t)len;
		return 0;
	}
	if (ne_parse_ipv4(s, &a) != 0)
		return -EINVAL;
	m = ntohl(a.s_addr);
	inv = ~m;
	/* Contiguous iff the host part is 2^k - 1. */
	if (m == 0 || (inv & (inv + 1)) != 0)
		return -EINVAL;
	*mask = a;
	*prefix = (uint8_t)(32 - __builtin_popcount(inv));
	return 0;
}

int
ne_parse_mac(const char *s, uint8_t mac[6], char *why, size_t n)
{
	uint8_t m[6];
	const char *p = s;

	for (int i = 0; i < 6; i++) {
		int hi, lo;

		if (i > 0 && *p++ != ':')
			goto syntax;
		hi = hex_val(p[0]);
		lo = hi < 0 ? -1 : hex_val(p[1]);
		if (lo < 0)
			goto syntax;
		m[i] = (uint8_t)(hi << 4 | lo);
		p += 2;
	}
	if (*p != '\0')
		goto syntax;
	if (m[0] & 1) {
		ne_why(why, n, "is a multicast/broadcast MAC (the first octet must be even)");
		return -EINVAL;
	}
	if ((m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0) {
		ne_why(why, n,
		       "is the all-zero MAC (valid: a unicast MAC, or \"\" for the port's own)");
		return -EINVAL;
	}
	memcpy(mac, m, 6);
	return 0;
syntax:
	ne_why(why, n,
	       "is not a MAC address (valid: aa:bb:cc:dd:ee:ff, or \"\" for the port's own)");
	return -EINVAL;
}

/* A probability: digits with an optional fraction, value in [0,1]. */
static int
parse_prob(const char *s, size_t len, double *out)
{
	uint64_t ip = 0;
	double frac = 0, scale = 1;
	size_t i = 0;

	if (len == 0 || !is_digit(s[0]))
		return -EINVAL;
	for (; i < len && is_digit(s[i]); i++) {
		ip = ip * 10 + (uint64_t)(s[i] - '0');
		if (ip > 1)
			return -EINVAL;
	}
	if (i < len && s[i] == '.') {
		if (++i == len)
			return -EINVAL;
		for (; i < len && is_digit(s[i]); i++) {
			scale /= 10;
			frac += (s[i] - '0') * scale;
		}
	}
	if (i != len || (double)ip + frac > 1.0)
		return -EINVAL;
	*out = (double)ip + frac;
	return 0;
}

int
tide_nodeenv_parse_fault(const char *s, struct tide_nodeenv_fault *out, char *why, size_t whylen)
{
	static const char *const subkeys[] = {"drop",     "dup",  "reorder", "corrupt",
					      "delay_us", "seed", "dir"};
	enum { NSUB = sizeof(subkeys) / sizeof(subkeys[0]) };
	struct tide_nodeenv_fault f = {.dir = TIDE_NODEENV_FAULT_BOTH};
	bool seen[NSUB] = {false};
	const char *p = s;

	if (s == NULL) {
		ne_why(why, whylen, "is missing");
		return -EINVAL;
	}
	if (*s == '\0') {
		*out = f;
		return 0;
	}
	f.enabled = true;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t elen = end != NULL ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', elen);
		size_t klen, vlen;
		const char *v;
		size_t k;
		uint64_t num;

		if (elen == 0) {
			ne_why(why, whylen, "has an empty element (expected sub-key=value)");
			return -EINVAL;
		}
		if (eq == NULL) {
			ne_why(why, whylen, "has '%.*s' without '=' (expected sub-key=value)",
			       (int)elen, p);
			return -EINVAL;
		}
		klen = (size_t)(eq - p);
		v = eq + 1;
		vlen = elen - klen - 1;
		for (k = 0; k < NSUB; k++) {
			if (strlen(subkeys[k]) == klen && memcmp(p, subkeys[k], klen) == 0)
				break;
		}
		if (k == NSUB) {
			ne_why(why, whylen,
			       "has unknown sub-key '%.*s' (valid: drop, dup, reorder, corrupt, "
			       "delay_us, seed, dir)",
			       (int)klen, p);
			return -EINVAL;
		}
		if (seen[k]) {
			ne_why(why, whylen, "has sub-key %s twice", subkeys[k]);
			return -EINVAL;
		}
		seen[k] = true;
		switch (k) {
		case 0:
		case 1:
		case 2:
		case 3: {
			double *dst[] = {&f.drop, &f.dup, &f.reorder, &f.corrupt};

			if (parse_prob(v, vlen, dst[k]) != 0) {
				ne_why(why, whylen,
				       "has %s='%.*s', not a probability in [0,1] (e.g. 0.01)",
				       subkeys[k], (int)vlen, v);
				return -EINVAL;
			}
			break;
		}
		case 4:
			if (ne_parse_u64(v, vlen, &num) != 0 || num > 1000000) {
				ne_why(why, whylen,
				       "has delay_us='%.*s', not an integer in 0..1000000",
				       (int)vlen, v);
				return -EINVAL;
			}
			f.delay_us = (uint32_t)num;
			break;
		case 5:
			if (ne_parse_u64(v, vlen, &num) != 0) {
				ne_why(why, whylen,
				       "has seed='%.*s', not an unsigned 64-bit decimal integer",
				       (int)vlen, v);
				return -EINVAL;
			}
			f.seed = num;
			break;
		default:
			if (vlen == 2 && memcmp(v, "rx", 2) == 0) {
				f.dir = TIDE_NODEENV_FAULT_RX;
			} else if (vlen == 2 && memcmp(v, "tx", 2) == 0) {
				f.dir = TIDE_NODEENV_FAULT_TX;
			} else if (vlen == 4 && memcmp(v, "both", 4) == 0) {
				f.dir = TIDE_NODEENV_FAULT_BOTH;
			} else {
				ne_why(why, whylen, "has dir='%.*s' (valid: rx, tx, both)",
				       (int)vlen, v);
				return -EINVAL;
			}
			break;
		}
		if (end == NULL)
			break;
		p = end + 1;
	}
	*out = f;
	return 0;
}

/* Host part of host:port (brackets already removed): a DNS name or IPv4
 * literal, or, when v6, an IPv6 literal. */
static bool
valid_host(const char *h, bool v6)
{
	if (h[0] == '\0')
		return false;
	for (; *h != '\0'; h++) {
		char c = *h;

		if (v6 ? !(hex_val(c) >= 0 || c == ':' || c == '.')
		       : !(hex_val(c) >= 0 || (lower(c) >= 'a' && lower(c) <= 'z') || c == '.' ||
			   c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* host:port (or [v6]:port) in s[0..len): engine/lib/addr's parser, then the host's
 * characters. -ERANGE bad port; -EINVAL anything else. */
static int
split_hostport(const char *s, size_t len, uint16_t *port)
{
	char buf[TIDE_NODEENV_MAX_LINE + 1], host[256];
	bool v6 = false;
	int rc;

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	rc = tide_addr_split(buf, host, sizeof(host), port, 0, &v6);
	if (rc == -ERANGE)
		return -ERANGE;
	if (rc != 0 || !valid_host(host, v6))
		return -EINVAL;
	return 0;
}

int
ne_chk_hostport(const char *v, uint64_t num, char *why, size_t n)
{
	uint16_t port;
	int rc = split_hostport(v, strlen(v), &port);

	(void)num;
	if (rc == -ERANGE)
		ne_why(why, n, "has a bad port (valid: host:port with port 1..65535)");
	else if (rc != 0)
		ne_why(why, n, "is not host:port (e.g. 10.0.0.1:50051)");
	return rc == 0 ? 0 : -EINVAL;
}

int
ne_chk_hostname(const char *v, uint64_t num, char *why, size_t n)
{
	(void)num;
	for (const char *p = v; *p != '\0'; p++) {
		if (*p == ' ' || *p == '\t' || *p == '/') {
			ne_why(why, n, "is not a host name or address (e.g. 10.0.0.2 or node1)");
			return -EINVAL;
		}
	}
	return 0;
}

int
ne_chk_devlist(const char *v, uint64_t num, char *why, size_t n)
{
	size_t run = 0;

	(void)num;
	if (*v == '\0')
		return 0;
	for (const char *p = v;; p++) {
		char c = *p;

		if (c == ',' || c == '\0') {
			if (run == 0) {
				ne_why(why, n,
				       "has an empty device name (valid: mlx5_0,mlx5_1 or \"\")");
				return -EINVAL;
			}
			if (c == '\0')
				return 0;
			run = 0;
			continue;
		}
		if (!(hex_val(c) >= 0 || (lower(c) >= 'a' && lower(c) <= 'z') || c == '_' ||
		      c == '-' || c == '.' || c == ':')) {
			ne_why(why, n, "is not a comma list of device names (e.g. mlx5_0,mlx5_1)");
			return -EINVAL;
		}
		run++;
	}
}

/*
 * etcd endpoints (Mooncake: "etcd://h1:p1;h2:p2", ',' also; no scheme means
 * etcd for the transfer engine's metadata): host:port entries, each
 * optionally http://, spaces around them ignored.
 */
static int
etcd_list_ok(const char *p, char *why, size_t n)
{
	static const char http[] = "http://";
	int entries = 0;

	while (*p != '\0') {
		const char *a = p, *b = p + strcspn(p, ";,");
		uint16_t port;

		p = *b != '\0' ? b + 1 : b;
		while (a < b && *a == ' ')
			a++;
		while (b > a && b[-1] == ' ')
			b--;
		if (a == b)
			continue;
		if ((size_t)(b - a) > sizeof(http) - 1 && strncmp(a, http, sizeof(http) - 1) == 0)
			a += sizeof(http) - 1;
		if (split_hostport(a, (size_t)(b - a), &port) != 0) {
			ne_why(why, n,
			       "has an etcd endpoint '%.*s' that is not host:port (e.g. "
			       "etcd://10.0.0.1:2379;10.0.0.2:2379)",
			       (int)(b - a > 64 ? 64 : b - a), a);
			return -EINVAL;
		}
		entries++;
	}
	if (entries > 0)
		return 0;
	ne_why(why, n, "names no etcd endpoint (e.g. etcd://10.0.0.1:2379)");
	return -EINVAL;
}

int
ne_chk_master(const char *v, uint64_t num, char *why, size_t n)
{
	if (strncmp(v, "etcd://", 7) == 0)
		return etcd_list_ok(v + 7, why, n);
	if (strstr(v, "://") != NULL) {
		ne_why(why, n,
		       "uses an unsupported scheme (valid: host:port, or "
		       "etcd://host:port[;host:port...] for HA masters)");
		return -EINVAL;
	}
	return ne_chk_hostport(v, num, why, n);
}

int
ne_chk_metadata(const char *v, uint64_t num, char *why, size_t n)
{
	static const char http[] = "http://";
	const char *scheme_end;

	(void)num;
	if (strcmp(v, "P2PHANDSHAKE") == 0)
		return 0;
	if (strncmp(v, http, sizeof(http) - 1) == 0) {
		const char *hp = v + sizeof(http) - 1;
		const char *slash = strchr(hp, '/');
		size_t hplen = slash != NULL ? (size_t)(slash - hp) : strlen(hp);
		uint16_t port;

		if (split_hostport(hp, hplen, &port) == 0)
			return 0;
		ne_why(why, n, "is not http://host:port/path (e.g. http://10.0.0.1:8080/metadata)");
		return -EINVAL;
	}
	scheme_end = strstr(v, "://");
	if (strncmp(v, "etcd://", 7) == 0 || (scheme_end == NULL && strchr(v, ':') != NULL))
		return etcd_list_ok(strncmp(v, "etcd://", 7) == 0 ? v + 7 : v, why, n);
	if (scheme_end != NULL)
		ne_why(why, n,
		       "uses the unsupported scheme '%.*s://' (supported: P2PHANDSHAKE, "
		       "http://host:port/path, etcd://host:port[;host:port...])",
		       (int)(scheme_end - v), v);
	else
		ne_why(why, n,
		       "is not supported (supported: P2PHANDSHAKE, http://host:port/path, "
		       "etcd://host:port[;host:port...])");
	return -EINVAL;
}

/* `,key=value` device arguments after a PCI address or vdev name. */
static bool
valid_devargs(const char *p)
{
	while (*p == ',') {
		const char *k = ++p;

		while (hex_val(*p) >= 0 || (lower(*p) >= 'a' && lower(*p) <= 'z') || *p == '_' ||
		       *p == '-')
			p++;
		if (p == k || *p++ != '=')
			return false;
		if (*p == ',' || *p == '\0')
			return false;
		while (*p != ',' && *p != '\0') {
			if (*p == ' ' || *p == '\t')
				return false;
			p++;
		}
	}
	return *p == '\0';
}

static bool
hex_n(const char *p, int n)
{
	for (int i = 0; i < n; i++) {
		if (hex_val(p[i]) < 0)
			return false; /* also stops at the NUL */
	}
	return true;
}

/* [DDDD:]BB:DD.F, hex; device <= 0x1f, function 0..7. Returns the end or NULL. */
static const char *
parse_pci(const char *s)
{
	const char *p = s;

	if (hex_n(p, 4) && p[4] == ':' && hex_n(p + 5, 2) && p[7] == ':')
		p += 5;
	if (!(hex_n(p, 2) && p[2] == ':' && hex_n(p + 3, 2) && p[5] == '.' && p[6] >= '0' &&
	      p[6] <= '7'))
		return NULL;
	if (hex_val(p[3]) * 16 + hex_val(p[4]) > 0x1f)
		return NULL;
	return p + 7;
}

int
ne_chk_dpdk_device(const char *v, uint64_t num, char *why, size_t n)
{
	const char *p;

	(void)num;
	if (*v == '\0')
		return 0;
	p = parse_pci(v);
	if (p == NULL && strncmp(v, "net_", 4) == 0) {
		const char *name = v + 4, *digits;

		p = name;
		while ((*p >= 'a' && *p <= 'z') || is_digit(*p) || *p == '_')
			p++;
		digits = p;
		while (digits > name && is_digit(digits[-1]))
			digits--;
		/* net_<driver><n>: a driver name starting with a letter, then the
		 * instance number. */
		if (digits == p || digits == name || !(*name >= 'a' && *name <= 'z'))
			p = NULL;
	}
	if (p != NULL && valid_devargs(p))
		return 0;
	ne_why(why, n,
	       "is not a DPDK device (valid: a PCI address like 0000:3b:00.0 or 3b:00.0, or a "
	       "vdev like net_ring0 or net_memif0,role=server,socket=/tmp/m.sock)");
	return -EINVAL;
}

int
ne_chk_lcores(const char *v, uint64_t num, char *why, size_t n)
{
	/* 1024 ids: beyond any RTE_MAX_LCORE Debian builds with. */
	uint64_t used[1024 / 64] = {0};
	const char *p = v;

	(void)num;
	if (*v == '\0')
		return 0;
	for (;;) {
		const char *a = p, *b;
		uint64_t lo, hi;

		while (is_digit(*p))
			p++;
		if (ne_parse_u64(a, (size_t)(p - a), &lo) != 0)
			goto syntax;
		hi = lo;
		if (*p == '-') {
			b = ++p;
			while (is_digit(*p))
				p++;
			if (ne_parse_u64(b, (size_t)(p - b), &hi) != 0)
				goto syntax;
		}
		if (lo > hi || hi > 1023) {
			ne_why(why, n,
			       "has range %" PRIu64 "-%" PRIu64 " (ids are 0..1023, low-high)", lo,
			       hi);
			return -EINVAL;
		}
		for (uint64_t i = lo; i <= hi; i++) {
			if (used[i / 64] & (UINT64_C(1) << (i % 64))) {
				ne_why(why, n, "lists lcore %" PRIu64 " twice", i);
				return -EINVAL;
			}
			used[i / 64] |= UINT64_C(1) << (i % 64);
		}
		if (*p == '\0')
			return 0;
		if (*p++ != ',')
			goto syntax;
	}
syntax:
	ne_why(why, n, "is not an lcore list (e.g. 1-3,5)");
	return -EINVAL;
}

int
ne_chk_file_prefix(const char *v, uint64_t num, char *why, size_t n)
{
	size_t len = strlen(v);

	(void)num;
	for (size_t i = 0; i < len; i++) {
		char c = v[i];

		if (!(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') || c == '_' || c == '-'))
			len = 0;
	}
	if (len >= 1 && len <= 32)
		return 0;
	ne_why(why, n, "is not a file prefix (valid: 1..32 of A-Z a-z 0-9 _ -)");
	return -EINVAL;
}

int
ne_chk_pow2(const char *v, uint64_t num, char *why, size_t n)
{
	(void)v;
	if (num != 0 && (num & (num - 1)) == 0)
		return 0;
	ne_why(why, n, "is not a power of two (valid: 64, 128, 256, ..., 16384)");
	return -EINVAL;
}

int
ne_chk_hugepage_size(const char *v, uint64_t num, char *why, size_t n)
{
	(void)v;
	if (num == 2 * MIB || num == GIB)
		return 0;
	ne_why(why, n, "is not a supported hugepage size (valid: 2mb, 1gb)");
	return -EINVAL;
}

int
ne_chk_group(const char *v, uint64_t num, char *why, size_t n)
{
	(void)num;
	/* Whether the group exists is the agent's to say at start-up (this
	 * file is also checked on hosts that do not have it); only text no
	 * group database can hold is refused here. */
	for (const char *p = v; *p != '\0'; p++) {
		if (*p == ':' || *p == ',' || *p == ' ' || *p == '\t' || *p == '/') {
			ne_why(why, n, "is not a group name or gid (e.g. tide, 4242)");
			return -EINVAL;
		}
	}
	return 0;
}

int
ne_chk_allow_nets(const char *v, uint64_t num, char *why, size_t n)
{
	struct tide_cidr_list l;
	char cwhy[200];

	(void)num;
	if (tide_cidr_parse(v, &l, cwhy, sizeof(cwhy)) != 0) {
		ne_why(why, n, "is not a list of networks: %s (valid: %s)", cwhy,
		       "10.0.0.0/8,192.168.1.7,fd00::/8, or empty");
		return -EINVAL;
	}
	return 0;
}
