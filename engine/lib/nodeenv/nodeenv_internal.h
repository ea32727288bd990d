/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to engine/lib/nodeenv: the value parsers shared by the key table.
 * Only nodeenv*.c and their unit test include this.
 *
 * Parsers return 0 or -EINVAL (-ERANGE where noted) and write their output
 * only on success. Checkers (ne_chk_*) validate a value that already has the
 * key's type: `v` is the text, `num` the parsed number for numeric keys. On
 * failure they fill `why` with the tail of "'<value>' <why>".
 */
#ifndef NODEENV_INTERNAL_H
#define NODEENV_INTERNAL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** snprintf into why (NULL or n == 0 allowed). */
void ne_why(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** Decimal digits only, s[0..len). -EINVAL malformed/empty; -ERANGE > UINT64_MAX. */
int ne_parse_u64(const char *s, size_t len, uint64_t *out);

/** Size as an exact "<n>[.ddd]<unit>" in the largest unit ("256mb", "3.125gb"), else bytes. */
void ne_size_human(uint64_t v, char *buf, size_t n);

/** 1/0, true/false, yes/no, on/off, case-insensitive. */
int ne_parse_bool(const char *s, bool *out);

/** Strict dotted quad, no leading zeros. Network byte order. */
int ne_parse_ipv4(const char *s, struct in_addr *out);

/** Dotted contiguous mask or "/N" (1..32). */
int ne_parse_netmask(const char *s, struct in_addr *mask, uint8_t *prefix);

/** aa:bb:cc:dd:ee:ff, unicast and non-zero. */
int ne_parse_mac(const char *s, uint8_t mac[6], char *why, size_t n);

int ne_chk_hostport(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_hostname(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_devlist(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_metadata(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_master(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_dpdk_device(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_lcores(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_file_prefix(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_pow2(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_hugepage_size(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_group(const char *v, uint64_t num, char *why, size_t n);
int ne_chk_allow_nets(const char *v, uint64_t num, char *why, size_t n);

#endif /* NODEENV_INTERNAL_H */
