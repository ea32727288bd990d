/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The one parser and matcher of peer-network allowlists: TIDE_ALLOW_NETS in
 * the node file (transfer-engine handshake and data ports) and the master's
 * --allow_networks (RPC, admin HTTP and metadata ports) share it, so both
 * read the same text the same way.
 *
 * Syntax: a comma list of networks, each `address/prefix` or a bare address
 * (a single host: /32 or /128). IPv4 dotted quads and IPv6 literals (no
 * brackets, no zone id). Spaces and tabs around an entry are ignored. A
 * network with bits set after its prefix ("10.0.0.1/8") is refused: it is
 * usually a typo for a host or a wider network than meant. An empty text
 * (or one of only spaces) is the empty list, which allows every peer.
 *
 * Matching: an IPv4 peer is allowed when an IPv4 entry covers it; an IPv6
 * peer when an IPv6 entry covers it. An IPv4-mapped IPv6 peer
 * (::ffff:a.b.c.d, what a dual-stack listener reports) is also allowed by an
 * IPv4 entry that covers a.b.c.d.
 *
 * Thread: any; every function is pure (a parsed list is plain data that any
 * thread may read concurrently).
 */
#ifndef TIDE_CIDR_H
#define TIDE_CIDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/** Most networks in one list. */
#define TIDE_CIDR_MAX 64

/** One network. */
struct tide_cidr {
	uint8_t family;   /**< AF_INET or AF_INET6 */
	uint8_t prefix;   /**< 0..32 (IPv4) or 0..128 (IPv6) */
	uint8_t addr[16]; /**< network order; IPv4 in addr[0..3]; bits after prefix are 0 */
};

/** A parsed allowlist; n == 0 allows every peer. */
struct tide_cidr_list {
	uint32_t n;                        /**< entries in e[] */
	struct tide_cidr e[TIDE_CIDR_MAX]; /**< the networks, in the order written */
};

/**
 * Parse a comma list of networks (see the file comment for the syntax).
 * \param s      NUL-terminated text; NULL is the empty list.
 * \param[out] out  The list on success; untouched on failure.
 * \param why    On failure, what is wrong, naming the entry by position and
 *               text (e.g. "entry 2 '10.0.0.1/8' has bits set after /8 (the
 *               network is 10.0.0.0/8)"); may be NULL.
 * \param whylen Size of why.
 * \return 0; -EINVAL an entry is empty, not an address, has a bad or
 *         out-of-range prefix, or has bits set after its prefix; -E2BIG more
 *         than TIDE_CIDR_MAX entries.
 */
int tide_cidr_parse(const char *s, struct tide_cidr_list *out, char *why, size_t whylen);

/**
 * Whether a peer address is allowed.
 * \param l   The list; NULL or empty allows every peer.
 * \param sa  The peer (AF_INET or AF_INET6, as accept() fills it); NULL, a
 *            short length or another family is refused unless the list is
 *            empty.
 * \param len Bytes valid at sa.
 * \return true when allowed.
 */
bool tide_cidr_allows(const struct tide_cidr_list *l, const struct sockaddr *sa, socklen_t len);

/**
 * Whether an IPv4 peer is allowed (for stacks that report a bare address).
 * \param l   The list; NULL or empty allows every peer.
 * \param ip  The peer's address in host byte order.
 * \return true when allowed.
 */
bool tide_cidr_allows_ip4(const struct tide_cidr_list *l, uint32_t ip);

#endif /* TIDE_CIDR_H */
