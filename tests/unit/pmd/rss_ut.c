/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of pmd/eth/rss.c: the Toeplitz hash against Microsoft's RSS
 * verification vectors and DPDK's rte_softrss, RETA mapping, and the
 * RSS-aware local port picker (every port lands on the lcore's queue, picks
 * spread over the range, exhaustion).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <rte_thash.h>

#include "tide_eth_rss.h"
#include "tide_ut.h"

#define IP4(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

/* "Verifying the RSS Hash Calculation", Microsoft NDIS documentation: the
 * IPv4 and IPv4/TCP results for the default 40-byte key. */
static const struct {
	uint32_t dip, sip;
	uint16_t dport, sport;
	uint32_t h_ip, h_tcp;
} ms_vec[] = {
	{IP4(161, 142, 100, 80), IP4(66, 9, 149, 187), 1766, 2794, 0x323e8fc2, 0x51ccc178},
	{IP4(65, 69, 140, 83), IP4(199, 92, 111, 2), 4739, 14230, 0xd718262a, 0xc626b0ea},
	{IP4(12, 22, 207, 184), IP4(24, 19, 198, 95), 38024, 12898, 0xd2d0a5de, 0x5c2b394a},
	{IP4(209, 142, 163, 6), IP4(38, 27, 205, 30), 2217, 48228, 0x82989176, 0xafc7327f},
	{IP4(202, 188, 127, 2), IP4(153, 39, 163, 191), 1303, 44251, 0x5d1809c5, 0x10e828a2},
};

static uint64_t rng_state = 0x1234567887654321ull;

static uint32_t
rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static void
test_ms_vectors(void)
{
	struct tide_eth_rss rss;

	TIDE_UT_OK(tide_eth_rss_init(&rss, tide_eth_rss_key_ms, 40, 128, 1));
	for (size_t i = 0; i < sizeof(ms_vec) / sizeof(ms_vec[0]); i++) {
		CU_ASSERT_EQUAL(tide_eth_rss_hash_v4tcp(&rss, ms_vec[i].sip, ms_vec[i].dip,
							ms_vec[i].sport, ms_vec[i].dport),
				ms_vec[i].h_tcp);
		CU_ASSERT_EQUAL(tide_eth_rss_hash_v4(&rss, ms_vec[i].sip, ms_vec[i].dip),
				ms_vec[i].h_ip);
	}
}

/* The raw byte-string entry point on the first vector, spelled out. */
static void
test_toeplitz_bytes(void)
{
	const uint8_t in[12] = {66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6};

	CU_ASSERT_EQUAL(tide_eth_toeplitz(tide_eth_rss_key_ms, 40, in, 12), 0x51ccc178u);
	CU_ASSERT_EQUAL(tide_eth_toeplitz(tide_eth_rss_key_ms, 40, in, 8), 0x323e8fc2u);
	CU_ASSERT_EQUAL(tide_eth_toeplitz(tide_eth_rss_key_ms, 40, in, 0), 0u);
}

/* Same results as DPDK's own software Toeplitz on random tuples, both keys. */
static void
test_vs_rte_softrss(void)
{
	const uint8_t *keys[2] = {tide_eth_rss_key_ms, tide_eth_rss_key_sym};

	for (int k = 0; k < 2; k++) {
		struct tide_eth_rss rss;

		TIDE_UT_OK(tide_eth_rss_init(&rss, keys[k], 40, 128, 1));
		for (int i = 0; i < 2000; i++) {
			uint32_t sip = rnd(), dip = rnd(), ports = rnd();
			uint32_t tuple[3] = {sip, dip, ports};
			uint16_t sport = (uint16_t)(ports >> 16), dport = (uint16_t)ports;

			CU_ASSERT_EQUAL_FATAL(tide_eth_rss_hash_v4tcp(&rss, sip, dip, sport, dport),
					      rte_softrss(tuple, 3, keys[k]));
			CU_ASSERT_EQUAL_FATAL(tide_eth_rss_hash_v4(&rss, sip, dip),
					      rte_softrss(tuple, 2, keys[k]));
		}
	}
}

/* The symmetric key hashes both directions alike, also when stretched to 52 bytes. */
static void
test_symmetric(void)
{
	struct tide_eth_rss r40, r52, rms;
	unsigned asym_ms = 0;

	TIDE_UT_OK(tide_eth_rss_init(&r40, NULL, 0, 128, 4));
	TIDE_UT_OK(tide_eth_rss_init(&r52, NULL, 52, 128, 4));
	TIDE_UT_OK(tide_eth_rss_init(&rms, tide_eth_rss_key_ms, 40, 128, 4));
	CU_ASSERT_EQUAL(r40.key_len, 40);
	CU_ASSERT_EQUAL(memcmp(r40.key, tide_eth_rss_key_sym, 40), 0);
	CU_ASSERT_EQUAL(r52.key_len, 52);
	CU_ASSERT_EQUAL(r52.key[50], 0x6d);
	CU_ASSERT_EQUAL(r52.key[51], 0x5a);
	for (int i = 0; i < 1000; i++) {
		uint32_t a = rnd(), b = rnd();
		uint16_t pa = (uint16_t)rnd(), pb = (uint16_t)rnd();

		CU_ASSERT_EQUAL_FATAL(tide_eth_rss_hash_v4tcp(&r40, a, b, pa, pb),
				      tide_eth_rss_hash_v4tcp(&r40, b, a, pb, pa));
		CU_ASSERT_EQUAL_FATAL(tide_eth_rss_hash_v4tcp(&r52, a, b, pa, pb),
				      tide_eth_rss_hash_v4tcp(&r52, b, a, pb, pa));
		CU_ASSERT_EQUAL_FATAL(tide_eth_rss_reply_queue(&r40, a, pa, b, pb),
				      tide_eth_rss_reply_queue(&r40, b, pb, a, pa));
		asym_ms += tide_eth_rss_hash_v4tcp(&rms, a, b, pa, pb) !=
			   tide_eth_rss_hash_v4tcp(&rms, b, a, pb, pa);
	}
	/* The Microsoft key is not symmetric: the property above is the key's. */
	CU_ASSERT(asym_ms > 900);
}

static void
test_init_and_reta(void)
{
	struct tide_eth_rss rss;
	uint8_t key[65] = {0};

	CU_ASSERT_EQUAL(tide_eth_rss_init(&rss, key, 15, 128, 2), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_init(&rss, key, 65, 128, 2), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_init(&rss, key, 0, 128, 2), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_init(&rss, NULL, 0, 0, 2), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_init(&rss, NULL, 0, TIDE_ETH_RSS_RETA_MAX + 1, 2), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_init(&rss, NULL, 0, 128, 0), -EINVAL);
	TIDE_UT_OK(tide_eth_rss_init(&rss, key, 64, TIDE_ETH_RSS_RETA_MAX, 3));
	TIDE_UT_OK(tide_eth_rss_init(&rss, NULL, 0, 128, 3));
	CU_ASSERT_EQUAL(rss.nb_queues, 3);
	CU_ASSERT_EQUAL(rss.reta_size, 128);
	for (unsigned i = 0; i < 128; i++)
		CU_ASSERT_EQUAL_FATAL(rss.reta[i], i % 3);
	/* Lookup uses the hash modulo the table size (the NIC's low bits). */
	CU_ASSERT_EQUAL(tide_eth_rss_queue(&rss, 0), 0);
	CU_ASSERT_EQUAL(tide_eth_rss_queue(&rss, 128 + 4), 4 % 3);
	CU_ASSERT_EQUAL(tide_eth_rss_queue(&rss, 0xffffffffu), 127 % 3);
	/* A table the device programmed differently is honoured. */
	rss.reta[5] = 2;
	CU_ASSERT_EQUAL(tide_eth_rss_queue(&rss, 5), 2);
}

static void
test_picker_init(void)
{
	struct tide_eth_rss rss;
	struct tide_eth_rss_picker pk;

	TIDE_UT_OK(tide_eth_rss_init(&rss, NULL, 0, 128, 4));
	CU_ASSERT_EQUAL(tide_eth_rss_picker_init(&pk, NULL, 0, 1, 0, 0), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_picker_init(&pk, &rss, 4, 1, 0, 0), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_picker_init(&pk, &rss, 0, 1, 0, 10), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_rss_picker_init(&pk, &rss, 0, 1, 200, 100), -EINVAL);
	TIDE_UT_OK(tide_eth_rss_picker_init(&pk, &rss, 3, 1, 0, 0));
	CU_ASSERT_EQUAL(pk.lo, 49152);
	CU_ASSERT_EQUAL(pk.hi, 65535);
	/* Queues start in different quarters of the range. */
	CU_ASSERT(pk.cursor >= 49152 + 3 * 4096 && pk.cursor <= 65535);
}

/* Every pick, for every queue, lands on that queue by the full hash, and a
 * run of picks covers the range evenly. */
static void
test_picker_lands(void)
{
	const uint32_t lip = IP4(10, 0, 0, 1);

	for (uint16_t nq = 1; nq <= 8; nq *= 2) {
		struct tide_eth_rss rss;

		TIDE_UT_OK(tide_eth_rss_init(&rss, tide_eth_rss_key_ms, 40, 128, nq));
		for (uint16_t q = 0; q < nq; q++) {
			struct tide_eth_rss_picker pk;
			unsigned bucket[16] = {0};
			/* Two passes over the range (one pass yields ~16384/nq ports). */
			const int picks = 2 * 16384 / nq;

			TIDE_UT_OK(tide_eth_rss_picker_init(&pk, &rss, q, lip, 0, 0));
			for (int i = 0; i < picks; i++) {
				uint32_t rip = IP4(10, 0, 1, (uint32_t)(i % 7));
				uint16_t rport = (uint16_t)(5000 + i % 3), lport = 0;

				TIDE_UT_OK(tide_eth_rss_port_pick(&pk, rip, rport, 0, &lport));
				CU_ASSERT_FATAL(lport >= 49152);
				CU_ASSERT_EQUAL_FATAL(
					tide_eth_rss_reply_queue(&rss, lip, lport, rip, rport), q);
				bucket[(lport - 49152) / 1024]++;
			}
			/* 16 buckets of 1024 ports, picks / 16 each if even (the
			 * pass overrun lands early buckets up to ~1.5x); a
			 * picker stuck in one region would leave most empty. */
			for (int b = 0; b < 16; b++)
				CU_ASSERT(bucket[b] > (unsigned)picks / 16 / 2 &&
					  bucket[b] < (unsigned)picks / 16 * 7 / 4);
			CU_ASSERT_EQUAL(pk.picks, (uint64_t)picks);
			if (nq > 1)
				CU_ASSERT(pk.rejected > 0);
		}
	}
}

/* Successive attempts for one remote return distinct ports of the queue,
 * each port of the range that maps to it exactly once, then EADDRNOTAVAIL. */
static void
test_picker_exhaustion(void)
{
	const uint32_t lip = IP4(192, 168, 7, 1), rip = IP4(192, 168, 7, 2);
	const uint16_t rport = 80, lo = 40000, hi = 40199;
	struct tide_eth_rss rss;
	struct tide_eth_rss_picker pk;
	uint8_t seen[200] = {0};
	unsigned expect = 0, got = 0;
	uint16_t lport;
	int rc;

	TIDE_UT_OK(tide_eth_rss_init(&rss, NULL, 0, 128, 4));
	for (unsigned p = lo; p <= hi; p++)
		expect += tide_eth_rss_reply_queue(&rss, lip, (uint16_t)p, rip, rport) == 2;
	CU_ASSERT(expect > 20 && expect < 80);
	TIDE_UT_OK(tide_eth_rss_picker_init(&pk, &rss, 2, lip, lo, hi));
	for (unsigned attempt = 0;; attempt++) {
		rc = tide_eth_rss_port_pick(&pk, rip, rport, attempt, &lport);
		if (rc != 0)
			break;
		CU_ASSERT_FATAL(lport >= lo && lport <= hi);
		CU_ASSERT_EQUAL(seen[lport - lo], 0);
		seen[lport - lo] = 1;
		got++;
		CU_ASSERT_FATAL(got <= expect);
	}
	CU_ASSERT_EQUAL(rc, -EADDRNOTAVAIL);
	CU_ASSERT_EQUAL(got, expect);
	/* A new connect (attempt 0) searches again. */
	TIDE_UT_OK(tide_eth_rss_port_pick(&pk, rip, rport, 0, &lport));
	CU_ASSERT_EQUAL(tide_eth_rss_reply_queue(&rss, lip, lport, rip, rport), 2);

	/* A one-port range whose port maps elsewhere has nothing to give. */
	for (unsigned p = lo; p <= hi; p++) {
		if (tide_eth_rss_reply_queue(&rss, lip, (uint16_t)p, rip, rport) != 2) {
			TIDE_UT_OK(tide_eth_rss_picker_init(&pk, &rss, 2, lip, (uint16_t)p,
							    (uint16_t)p));
			CU_ASSERT_EQUAL(tide_eth_rss_port_pick(&pk, rip, rport, 0, &lport),
					-EADDRNOTAVAIL);
			break;
		}
	}
}

/* The proportion of the whole range that each queue owns is about 1/n. */
static void
test_picker_share(void)
{
	const uint32_t lip = IP4(10, 1, 2, 3), rip = IP4(10, 1, 2, 4);
	struct tide_eth_rss rss;
	unsigned count[4] = {0};

	TIDE_UT_OK(tide_eth_rss_init(&rss, NULL, 0, 128, 4));
	for (unsigned p = 49152; p <= 65535; p++)
		count[tide_eth_rss_reply_queue(&rss, lip, (uint16_t)p, rip, 7000)]++;
	for (int q = 0; q < 4; q++)
		CU_ASSERT(count[q] > 16384 / 4 * 8 / 10 && count[q] < 16384 / 4 * 12 / 10);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("rss", NULL, NULL);

	CU_add_test(s, "microsoft vectors", test_ms_vectors);
	CU_add_test(s, "toeplitz bytes", test_toeplitz_bytes);
	CU_add_test(s, "vs rte_softrss", test_vs_rte_softrss);
	CU_add_test(s, "symmetric key", test_symmetric);
	CU_add_test(s, "init and reta", test_init_and_reta);
	CU_add_test(s, "picker init", test_picker_init);
	CU_add_test(s, "picker lands on queue", test_picker_lands);
	CU_add_test(s, "picker exhaustion", test_picker_exhaustion);
	CU_add_test(s, "picker share", test_picker_share);
}

TIDE_UT_MAIN(register_tests)
