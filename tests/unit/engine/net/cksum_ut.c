/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

/* Reference: big-endian 16-bit words, end-around carry (RFC 1071 4.1, literally). */
static uint16_t
ref_cksum(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2) {
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	}
	if (n & 1) {
		sum += (uint32_t)p[n - 1] << 8;
	}
	while (sum >> 16) {
		sum = (sum & 0xffff) + (sum >> 16);
	}
	return (uint16_t)~sum;
}

static void
test_rfc1071_example(void)
{
	/* RFC 1071 section 3 example: the sum is ddf2, so the checksum is 220d. */
	const uint8_t d[8] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
	uint16_t c = net_cksum(d, sizeof(d));
	uint8_t wire[2];

	memcpy(wire, &c, 2);
	CU_ASSERT_EQUAL(wire[0], 0x22);
	CU_ASSERT_EQUAL(wire[1], 0x0d);
}

static void
test_matches_reference_all_lengths(void)
{
	uint8_t buf[301];
	uint32_t x = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t n = 0; n <= sizeof(buf); n++) {
		uint16_t c = net_cksum(buf, n);
		CU_ASSERT_EQUAL(ntohs(c), ref_cksum(buf, n, 0));
	}
	/* All-ones data must not produce the zero sum incorrectly. */
	memset(buf, 0xff, 64);
	CU_ASSERT_EQUAL(ntohs(net_cksum(buf, 64)), ref_cksum(buf, 64, 0));
}

static void
test_verify_embedded(void)
{
	uint8_t buf[40];

	for (unsigned i = 0; i < sizeof(buf); i++) {
		buf[i] = (uint8_t)(i * 37 + 1);
	}
	buf[10] = buf[11] = 0;
	uint16_t c = net_cksum(buf, sizeof(buf));
	memcpy(buf + 10, &c, 2);
	CU_ASSERT_EQUAL(net_cksum(buf, sizeof(buf)), 0);
	buf[3] ^= 1;
	CU_ASSERT_NOT_EQUAL(net_cksum(buf, sizeof(buf)), 0);
}

static void
test_pseudo_header(void)
{
	/* Pseudo-header as bytes: src, dst, zero, proto, length; then a 13-byte segment. */
	uint8_t ph[12 + 13] = {10, 0, 0, 1, 192, 168, 7, 9, 0, 6, 0, 13};
	uint32_t s = htonl(0x0a000001), d = htonl(0xc0a80709);

	for (unsigned i = 0; i < 13; i++) {
		ph[12 + i] = (uint8_t)(0xa0 + i);
	}
	uint16_t got = net_cksum_fold(net_cksum_add(net_cksum_pseudo(s, d, 6, 13), ph + 12, 13));
	CU_ASSERT_EQUAL(ntohs(got), ref_cksum(ph, sizeof(ph), 0));
}

/* Pieces summed at their offsets in the stream equal the contiguous sum (odd cuts swap). */
static void
test_add_at_matches_contiguous(void)
{
	uint8_t buf[1500];

	for (size_t i = 0; i < sizeof(buf); i++) {
		buf[i] = (uint8_t)((i * 131 + (i >> 9)) & 0xff);
	}
	for (size_t cut = 0; cut <= 17; cut++) {
		uint32_t parts = net_cksum_add_at(0, buf, cut, 0);

		parts = net_cksum_add_at(parts, buf + cut, 700 - cut, cut);
		parts = net_cksum_add_at(parts, buf + 700, 800, 700);
		CU_ASSERT_EQUAL(net_cksum_fold(parts), net_cksum(buf, sizeof(buf)));
	}
	{
		uint32_t a = net_cksum_add_at(0, buf, 333, 0);

		a = net_cksum_add_at(a, buf + 333, 1, 333);
		a = net_cksum_add_at(a, buf + 334, 1166, 334);
		CU_ASSERT_EQUAL(net_cksum_fold(a), net_cksum(buf, sizeof(buf)));
	}
	/* Added to a running (pseudo-header) sum. */
	{
		uint32_t p = net_cksum_pseudo(htonl(0x0a000001), htonl(0x0a000002), 6, 1500);

		CU_ASSERT_EQUAL(net_cksum_fold(net_cksum_add_at(net_cksum_add_at(p, buf, 101, 0),
								buf + 101, 1399, 101)),
				net_cksum_fold(net_cksum_add(p, buf, sizeof(buf))));
	}
}

/* Reference sum of buf added to a running 32-bit sum, folded to 16 bits (no complement). */
static uint16_t
ref_fold(const uint8_t *p, size_t n, uint32_t start)
{
	uint64_t sum = 0;

	for (size_t i = 0; i + 1 < n; i += 2) {
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	}
	if (n & 1) {
		sum += (uint32_t)p[n - 1] << 8;
	}
	/* start holds host-order words as they lie in memory: bring it to wire order. */
	sum += ntohs((uint16_t)start) + ntohs((uint16_t)(start >> 16));
	while (sum >> 16) {
		sum = (sum & 0xffff) + (sum >> 16);
	}
	return (uint16_t)sum;
}

/*
 * The 32-byte bulk loop and its tails: every start alignment (the payload of
 * a frame sits 54 + options bytes in), every length across the 32-byte
 * rounds, frame-sized and 64 KiB buffers, a running sum near 2^32, and
 * all-ones data (the most carries).
 */
static void
test_bulk_alignments_and_carries(void)
{
	static uint8_t buf[65536 + 8];
	static const uint32_t starts[] = {0, 1, 0xffff, 0xfffffffeu};
	static const size_t longs[] = {1460, 1461, 8948, 8960, 9000, 65535, 65536};
	uint32_t x = 777;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t off = 0; off < 8; off++) {
		for (size_t n = 0; n <= 200; n++) {
			for (size_t k = 0; k < sizeof(starts) / sizeof(starts[0]); k++) {
				uint16_t got = (uint16_t)~net_cksum_fold(
					net_cksum_add(starts[k], buf + off, n));

				CU_ASSERT_EQUAL(ntohs(got), ref_fold(buf + off, n, starts[k]));
			}
		}
		for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++) {
			uint16_t got = (uint16_t)~net_cksum_fold(
				net_cksum_add(0xfffffffeu, buf + off, longs[i]));

			CU_ASSERT_EQUAL(ntohs(got), ref_fold(buf + off, longs[i], 0xfffffffeu));
		}
	}
	memset(buf, 0xff, sizeof(buf));
	for (size_t off = 0; off < 8; off++) {
		CU_ASSERT_EQUAL(ntohs(net_cksum(buf + off, 65536)), ref_cksum(buf + off, 65536, 0));
		CU_ASSERT_EQUAL(ntohs(net_cksum(buf + off, 65535)), ref_cksum(buf + off, 65535, 0));
	}
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("cksum", NULL, NULL);
	CU_add_test(s, "bulk_alignments_and_carries", test_bulk_alignments_and_carries);
	CU_add_test(s, "rfc1071_example", test_rfc1071_example);
	CU_add_test(s, "matches_reference_all_lengths", test_matches_reference_all_lengths);
	CU_add_test(s, "verify_embedded", test_verify_embedded);
	CU_add_test(s, "pseudo_header", test_pseudo_header);
	CU_add_test(s, "add_at_matches_contiguous", test_add_at_matches_contiguous);
}

TIDE_UT_MAIN(register_tests)
