/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The one parser of peer addresses ("where is the master", "where is that
 * segment's daemon", "what is my hostname"): every module that splits a
 * host and a port calls it, so they all agree on IPv6.
 *
 * Accepted forms:
 *   "host:port"       host is a name or an IPv4 address; port 1..65535
 *   "[v6]:port"       an IPv6 literal must be bracketed when a port follows
 *   "host", "[v6]", "fe80::1"
 *                     bare hosts (port 0), only with TIDE_ADDR_PORT_OPTIONAL;
 *                     an unbracketed string with two or more colons is an IPv6
 *                     literal without a port (never "fe80:" port 1)
 * The port is plain decimal (no sign, no spaces, no leading '+'). Nothing is
 * resolved. Thread: any; pure.
 */
#ifndef TIDE_ADDR_H
#define TIDE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Flags for tide_addr_split(). */
#define TIDE_ADDR_PORT_OPTIONAL 0x1 /**< a bare host is fine (port 0) */

/**
 * Split s into host (brackets removed) and port.
 * \param s        NUL-terminated address.
 * \param host     receives the host, NUL-terminated (may be NULL to only validate).
 * \param host_len size of host.
 * \param port     receives the port; 0 for a bare host.
 * \param flags    TIDE_ADDR_*.
 * \param[out] v6  set when the host is an IPv6 literal (bracketed or bare); may be NULL.
 * \return 0; -EINVAL malformed (empty host, missing or bad port, unbalanced
 *         brackets, a port after an unbracketed IPv6 literal is unreadable and
 *         so refused, a bare host without TIDE_ADDR_PORT_OPTIONAL);
 *         -ERANGE port 0 or above 65535; -ENAMETOOLONG host does not fit.
 *         Nothing is written on error.
 */
int tide_addr_split(const char *s, char *host, size_t host_len, uint16_t *port, unsigned flags,
		    bool *v6);

#endif /* TIDE_ADDR_H */
