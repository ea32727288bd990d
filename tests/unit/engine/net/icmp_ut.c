/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

static uint16_t
build_echo(uint8_t *f, uint8_t type, uint16_t id, uint16_t seq, uint16_t plen)
{
	struct net_icmp_hdr *ih = (struct net_icmp_hdr *)(f + NET_HDRS_LEN);
	uint16_t n = ut_build_ipv4(f, UT_PEER_IP, UT_IP, IPPROTO_ICMP_, (uint16_t)(8 + plen));

	ih->type = type;
	ih->code = 0;
	ih->csum = 0;
	ih->id = htons(id);
	ih->seq = htons(seq);
	for (uint16_t i = 0; i < plen; i++) {
		((uint8_t *)(ih + 1))[i] = (uint8_t)(i ^ 0x5a);
	}
	ih->csum = net_cksum(ih, 8u + plen);
	return n;
}

static void
test_echo_reply(void)
{
	struct ut_env e;
	uint8_t f[1600];
	uint16_t n = build_echo(f, 8, 0x1234, 7, 56);
	struct ut_buf *b;

	ut_env_init(&e, NULL);
	ut_rx(&e, f, n);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	const struct net_ipv4_hdr *ip = (const struct net_ipv4_hdr *)(b->data + ETH_HLEN);
	const struct net_icmp_hdr *ih = (const struct net_icmp_hdr *)(b->data + NET_HDRS_LEN);
	CU_ASSERT_EQUAL(memcmp(b->data, ut_peer_mac, 6), 0);
	CU_ASSERT_EQUAL(ntohl(ip->daddr), UT_PEER_IP);
	CU_ASSERT_EQUAL(ntohl(ip->saddr), UT_IP);
	CU_ASSERT_EQUAL(ntohs(ip->tot_len), 20 + 8 + 56);
	CU_ASSERT_EQUAL(net_cksum(ip, 20), 0);
	CU_ASSERT_EQUAL(ih->type, 0);
	CU_ASSERT_EQUAL(ntohs(ih->id), 0x1234);
	CU_ASSERT_EQUAL(ntohs(ih->seq), 7);
	CU_ASSERT_EQUAL(net_cksum(ih, 64), 0);
	CU_ASSERT_EQUAL(memcmp(ih + 1, f + NET_HDRS_LEN + 8, 56), 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->icmp_tx_echo_reply, 1);
	ut_buf_free(&e.dev, b);
	/* Odd payload length and a full-MTU request. */
	n = build_echo(f, 8, 1, 2, 1471);
	ut_rx(&e, f, n);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(b->len, 14 + 20 + 8 + 1471);
	CU_ASSERT_EQUAL(net_cksum(b->data + NET_HDRS_LEN, 8 + 1471), 0);
	ut_buf_free(&e.dev, b);
	n = build_echo(f, 8, 1, 3, 1472);
	ut_rx(&e, f, n);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(b->len, 14 + 1500);
	ut_buf_free(&e.dev, b);
	ut_env_fini(&e);
}

static void
test_bad_and_other(void)
{
	struct ut_env e;
	uint8_t f[256];
	uint16_t n;
	const struct tide_net_stats *st;

	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	n = build_echo(f, 8, 1, 1, 16);
	f[NET_HDRS_LEN + 9] ^= 0xff; /* payload corrupted: checksum fails */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->icmp_rx_bad, 1);
	n = ut_build_ipv4(f, UT_PEER_IP, UT_IP, IPPROTO_ICMP_, 4); /* truncated header */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->icmp_rx_bad, 2);
	n = build_echo(f, 0, 1, 1, 16); /* an echo reply to us is not answered */
	ut_rx(&e, f, n);
	n = build_echo(f, 3, 1, 1, 16); /* destination unreachable */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->icmp_rx_other, 2);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	CU_ASSERT_EQUAL(st->icmp_tx_echo_reply, 0);
	ut_env_fini(&e);
}

static void
test_offload_flag_skips_check(void)
{
	struct ut_env e;
	uint8_t f[256];
	uint16_t n = build_echo(f, 8, 1, 1, 16);
	struct ut_buf *b = ut_buf_new();
	struct tide_net_rx_pkt p;

	ut_env_init(&e, NULL);
	f[NET_HDRS_LEN + 2] ^= 0xff; /* wrong ICMP checksum, but "verified by the NIC" */
	memcpy(b->data, f, n);
	e.dev.live++;
	p = (struct tide_net_rx_pkt){
		.data = b->data, .len = n, .flags = TIDE_NET_RX_F_L4_CSUM_GOOD, .handle = b};
	tide_net_rx_burst(e.s, &p, 1, e.now);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->icmp_tx_echo_reply, 1);
	ut_dev_drain(&e.dev);
	ut_env_fini(&e);
}

static void
elide_on(struct tide_net_opts *o)
{
	o->cksum_elide = true;
}

/* Elided: a request with a wrong checksum is answered, and the reply carries 0. */
static void
test_elide_echo(void)
{
	struct ut_env e;
	uint8_t f[256];
	uint16_t n = build_echo(f, 8, 9, 4, 40);
	struct ut_buf *b;
	const struct net_icmp_hdr *ih;

	ut_env_init(&e, elide_on);
	f[NET_HDRS_LEN + 2] ^= 0xff;
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->icmp_rx_bad, 0);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	ih = (const struct net_icmp_hdr *)(b->data + NET_HDRS_LEN);
	CU_ASSERT_EQUAL(ih->type, 0);
	CU_ASSERT_EQUAL(ih->csum, 0);
	CU_ASSERT_EQUAL(ntohs(ih->seq), 4);
	CU_ASSERT_EQUAL(memcmp(ih + 1, f + NET_HDRS_LEN + 8, 40), 0);
	ut_buf_free(&e.dev, b);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("icmp", NULL, NULL);
	CU_add_test(s, "elide_echo", test_elide_echo);
	CU_add_test(s, "echo_reply", test_echo_reply);
	CU_add_test(s, "bad_and_other", test_bad_and_other);
	CU_add_test(s, "offload_flag_skips_check", test_offload_flag_skips_check);
}

TIDE_UT_MAIN(register_tests)
