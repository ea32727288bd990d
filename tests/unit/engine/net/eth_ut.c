/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static void
test_short_frame(void)
{
	struct ut_env e;
	uint8_t f[64] = {0};

	ut_env_init(&e, NULL);
	ut_rx(&e, f, 13);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->eth_rx_short, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_env_fini(&e);
}

static void
test_not_ours_and_types(void)
{
	struct ut_env e;
	uint8_t f[64] = {0};
	const uint8_t other[6] = {0x02, 9, 9, 9, 9, 9};
	const uint8_t mcast6[6] = {0x33, 0x33, 0, 0, 0, 1};
	const struct tide_net_stats *st;

	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	ut_build_eth(f, other, ut_peer_mac, ETH_P_IP);
	ut_rx(&e, f, 60);
	CU_ASSERT_EQUAL(st->eth_rx_not_ours, 1);
	ut_build_eth(f, mcast6, ut_peer_mac, ETH_P_IPV6);
	ut_rx(&e, f, 60);
	ut_build_eth(f, ut_mac, ut_peer_mac, ETH_P_IPV6);
	ut_rx(&e, f, 60);
	CU_ASSERT_EQUAL(st->eth_rx_ipv6, 2);
	ut_build_eth(f, ut_mac, ut_peer_mac, 0x8100); /* VLAN tag: not handled */
	ut_rx(&e, f, 60);
	ut_build_eth(f, bcast, ut_peer_mac, 0x88cc); /* LLDP */
	ut_rx(&e, f, 60);
	CU_ASSERT_EQUAL(st->eth_rx_unknown_type, 2);
	CU_ASSERT_EQUAL(st->ip_rx, 0);
	CU_ASSERT_EQUAL(st->rx_frames, 5 + 1); /* + the fixture's ARP */
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_env_fini(&e);
}

static void
test_tx_header_and_padding(void)
{
	struct ut_env e;
	uint8_t f[64];
	uint16_t n;
	struct ut_buf *b;

	ut_env_init(&e, NULL);
	/* A broadcast ARP request for us is accepted; the 42-byte reply is padded to 60. */
	n = ut_build_arp(f, 1, ut_peer_mac, UT_PEER_IP, (const uint8_t[6]){0}, UT_IP, bcast);
	ut_rx(&e, f, n);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(b->len, 60);
	CU_ASSERT_EQUAL(memcmp(b->data, ut_peer_mac, 6), 0);
	CU_ASSERT_EQUAL(memcmp(b->data + 6, ut_mac, 6), 0);
	CU_ASSERT_EQUAL(b->data[12], 0x08);
	CU_ASSERT_EQUAL(b->data[13], 0x06);
	for (unsigned i = 42; i < 60; i++) {
		CU_ASSERT_EQUAL(b->data[i], 0);
	}
	ut_buf_free(&e.dev, b);
	ut_env_fini(&e);
}

static void
test_burst_frees_every_handle(void)
{
	struct ut_env e;
	struct tide_net_rx_pkt p[40];

	ut_env_init(&e, NULL);
	long live = e.dev.live; /* the stack's cache of TX buffers */
	for (unsigned i = 0; i < 40; i++) {
		struct ut_buf *b = ut_buf_new();

		e.dev.live++;
		ut_build_eth(b->data, ut_mac, ut_peer_mac, 0x9000);
		p[i] = (struct tide_net_rx_pkt){.data = b->data, .len = 60, .handle = b};
	}
	CU_ASSERT_EQUAL(tide_net_rx_burst(e.s, p, 40, e.now), 40);
	CU_ASSERT_EQUAL(e.dev.live, live);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->eth_rx_unknown_type, 40);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("eth", NULL, NULL);
	CU_add_test(s, "short_frame", test_short_frame);
	CU_add_test(s, "not_ours_and_types", test_not_ours_and_types);
	CU_add_test(s, "tx_header_and_padding", test_tx_header_and_padding);
	CU_add_test(s, "burst_frees_every_handle", test_burst_frees_every_handle);
}

TIDE_UT_MAIN(register_tests)
