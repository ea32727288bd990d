/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t zero6[6];
static const uint8_t mac3[6] = {0x02, 0, 0, 0, 0, 0x03};
#define IP3 0x0a000003u

static const struct net_arp_hdr *
arp_of(const struct ut_buf *b)
{
	CU_ASSERT_EQUAL(ntohs(((const struct net_eth_hdr *)b->data)->type), ETH_P_ARP);
	return (const struct net_arp_hdr *)(b->data + ETH_HLEN);
}

static void
test_gratuitous_on_create(void)
{
	struct ut_dev d = {0};
	struct tide_net_opts o;
	struct tide_net_stack *s;
	struct ut_buf *b;

	tide_net_opts_init(&o, sizeof(o));
	o.dev_ops = &ut_dev_ops;
	o.dev = &d;
	memcpy(o.mac, ut_mac, 6);
	o.ip = UT_IP;
	CU_ASSERT_FATAL(tide_net_stack_create(&o, 1, &s) == 0);
	b = ut_dev_pop(&d);
	CU_ASSERT_FATAL(b != NULL);
	const struct net_arp_hdr *ah = arp_of(b);
	CU_ASSERT_EQUAL(memcmp(b->data, bcast, 6), 0);
	CU_ASSERT_EQUAL(ntohs(ah->oper), 1);
	CU_ASSERT_EQUAL(ntohl(ah->spa), UT_IP);
	CU_ASSERT_EQUAL(ntohl(ah->tpa), UT_IP);
	CU_ASSERT_EQUAL(memcmp(ah->sha, ut_mac, 6), 0);
	CU_ASSERT_EQUAL(tide_net_stats(s)->arp_tx_gratuitous, 1);
	ut_buf_free(&d, b);
	tide_net_stack_destroy(s);
	CU_ASSERT_EQUAL(d.live, 0);
	free(d.q);
}

static void
test_reply_and_learn(void)
{
	struct ut_env e;
	uint8_t f[64], mac[6];
	uint16_t n;
	struct ut_buf *b;

	ut_env_init(&e, NULL);
	/* The fixture's request taught us the peer. */
	CU_ASSERT_EQUAL(tide_net_arp_lookup(e.s, UT_PEER_IP, mac), 0);
	CU_ASSERT_EQUAL(memcmp(mac, ut_peer_mac, 6), 0);
	n = ut_build_arp(f, 1, mac3, IP3, zero6, UT_IP, bcast);
	ut_rx(&e, f, n);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	const struct net_arp_hdr *ah = arp_of(b);
	CU_ASSERT_EQUAL(ntohs(ah->oper), 2);
	CU_ASSERT_EQUAL(memcmp(b->data, mac3, 6), 0);
	CU_ASSERT_EQUAL(memcmp(ah->tha, mac3, 6), 0);
	CU_ASSERT_EQUAL(ntohl(ah->tpa), IP3);
	CU_ASSERT_EQUAL(memcmp(ah->sha, ut_mac, 6), 0);
	CU_ASSERT_EQUAL(ntohl(ah->spa), UT_IP);
	ut_buf_free(&e.dev, b);
	CU_ASSERT_EQUAL(tide_net_arp_lookup(e.s, IP3, mac), 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->arp_tx_replies, 2);
	ut_env_fini(&e);
}

static void
test_not_ours_and_malformed(void)
{
	struct ut_env e;
	uint8_t f[64], mac[6];
	uint16_t n;
	const struct tide_net_stats *st;

	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	/* A request for someone else: no reply, and an unknown sender is not learned. */
	n = ut_build_arp(f, 1, mac3, IP3, zero6, 0x0a000009, bcast);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->arp_rx_not_ours, 1);
	CU_ASSERT_EQUAL(tide_net_arp_lookup(e.s, IP3, mac), -ENOENT);
	/* But a known sender is refreshed from any ARP (RFC 826 merge). */
	const uint8_t newmac[6] = {0x02, 0, 0, 0, 0, 0x22};
	n = ut_build_arp(f, 1, newmac, UT_PEER_IP, zero6, 0x0a000009, bcast);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(tide_net_arp_lookup(e.s, UT_PEER_IP, mac), 0);
	CU_ASSERT_EQUAL(memcmp(mac, newmac, 6), 0);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);

	n = ut_build_arp(f, 1, mac3, IP3, zero6, UT_IP, bcast);
	ut_rx(&e, f, 40);    /* truncated */
	f[ETH_HLEN + 1] = 6; /* htype 6 */
	ut_rx(&e, f, n);
	n = ut_build_arp(f, 1, mac3, IP3, zero6, UT_IP, bcast);
	f[ETH_HLEN + 7] = 9; /* oper 9 */
	ut_rx(&e, f, n);
	n = ut_build_arp(f, 1, mac3, IP3, zero6, UT_IP, bcast);
	f[ETH_HLEN + 4] = 8; /* hlen 8 */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->arp_rx_bad, 4);
	/* A probe (sender 0.0.0.0) is answered but nothing is learned. */
	n = ut_build_arp(f, 1, mac3, 0, zero6, UT_IP, bcast);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(tide_net_arp_lookup(e.s, 0, mac), -ENOENT);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1);
	ut_dev_drain(&e.dev);
	ut_env_fini(&e);
}

static void
test_resolve_queue_and_flush(void)
{
	struct ut_env e;
	struct tide_net_conn *c[NET_ARP_PENDING + 2];
	struct ut_buf *b;
	uint8_t f[64];
	uint16_t n;
	const struct tide_net_stats *st;

	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	/* NET_ARP_PENDING + 2 SYNs toward an unresolved host: one request,
	 * NET_ARP_PENDING frames kept, the two oldest dropped. */
	for (int i = 0; i < NET_ARP_PENDING + 2; i++) {
		CU_ASSERT_FATAL(tide_net_connect(e.s, IP3, 80, NULL, NULL, e.now, &c[i]) == 0);
	}
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1);
	b = ut_dev_pop(&e.dev);
	const struct net_arp_hdr *ah = arp_of(b);
	CU_ASSERT_EQUAL(ntohs(ah->oper), 1);
	CU_ASSERT_EQUAL(ntohl(ah->tpa), IP3);
	CU_ASSERT_EQUAL(memcmp(b->data, bcast, 6), 0);
	ut_buf_free(&e.dev, b);
	CU_ASSERT_EQUAL(st->arp_pending_dropped, 2);
	n = ut_build_arp(f, 2, mac3, IP3, ut_mac, UT_IP, ut_mac);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->arp_rx_replies, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), NET_ARP_PENDING);
	while ((b = ut_dev_pop(&e.dev)) != NULL) {
		struct ut_tcp_out o;

		CU_ASSERT_EQUAL(memcmp(b->data, mac3, 6), 0);
		CU_ASSERT_EQUAL(ut_parse_tcp(b, &o), 0);
		CU_ASSERT_EQUAL(o.flags, TCPHDR_SYN);
		ut_buf_free(&e.dev, b);
	}
	for (int i = 0; i < NET_ARP_PENDING + 2; i++) {
		tide_net_abort(c[i], e.now);
	}
	ut_env_fini(&e);
}

static void
slow_rto(struct tide_net_opts *o)
{
	o->tcp_rto_init_us = 30000000; /* keep SYN retransmissions out of the ARP schedule */
}

static void
test_retry_fail_and_expiry(void)
{
	struct ut_env e;
	struct tide_net_conn *c;
	uint8_t mac[6];
	const struct tide_net_stats *st;

	ut_env_init(&e, slow_rto);
	st = tide_net_stats(e.s);
	CU_ASSERT_FATAL(tide_net_connect(e.s, IP3, 80, NULL, NULL, e.now, &c) == 0);
	CU_ASSERT_EQUAL(st->arp_tx_requests, 1);
	ut_dev_drain(&e.dev);
	ut_advance(&e, 999 * NS_PER_MS);
	CU_ASSERT_EQUAL(st->arp_tx_requests, 1);
	ut_advance(&e, 1 * NS_PER_MS);
	CU_ASSERT_EQUAL(st->arp_tx_requests, 2);
	ut_advance(&e, 1000 * NS_PER_MS);
	CU_ASSERT_EQUAL(st->arp_tx_requests, 3);
	CU_ASSERT_EQUAL(st->arp_pending_dropped, 0);
	ut_dev_drain(&e.dev);
	ut_advance(&e, 1000 * NS_PER_MS); /* three requests unanswered: give up */
	CU_ASSERT_EQUAL(st->arp_tx_requests, 3);
	CU_ASSERT(st->arp_pending_dropped >= 1);
	tide_net_abort(c, e.now);
	ut_dev_drain(&e.dev);

	/* The peer learned at init expires after arp_timeout_ms (60 s). */
	CU_ASSERT_EQUAL(tide_net_arp_lookup(e.s, UT_PEER_IP, mac), 0);
	ut_advance(&e, 60000 * NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_arp_lookup(e.s, UT_PEER_IP, mac), -ENOENT);
	CU_ASSERT(st->arp_expired >= 1);
	ut_env_fini(&e);
}

static void
gw_tweak(struct tide_net_opts *o)
{
	o->gateway = 0x0a0000feu;
}

static void
test_gateway_and_unreachable(void)
{
	struct ut_env e;
	struct tide_net_conn *c;
	struct ut_buf *b;

	ut_env_init(&e, NULL);
	CU_ASSERT_EQUAL(tide_net_connect(e.s, 0xc0a80101u, 80, NULL, NULL, e.now, &c),
			-ENETUNREACH);
	ut_env_fini(&e);

	ut_env_init(&e, gw_tweak);
	CU_ASSERT_EQUAL(tide_net_connect(e.s, 0xc0a80101u, 80, NULL, NULL, e.now, &c), 0);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(ntohl(arp_of(b)->tpa), 0x0a0000feu);
	ut_buf_free(&e.dev, b);
	tide_net_abort(c, e.now);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("arp", NULL, NULL);
	CU_add_test(s, "gratuitous_on_create", test_gratuitous_on_create);
	CU_add_test(s, "reply_and_learn", test_reply_and_learn);
	CU_add_test(s, "not_ours_and_malformed", test_not_ours_and_malformed);
	CU_add_test(s, "resolve_queue_and_flush", test_resolve_queue_and_flush);
	CU_add_test(s, "retry_fail_and_expiry", test_retry_fail_and_expiry);
	CU_add_test(s, "gateway_and_unreachable", test_gateway_and_unreachable);
}

TIDE_UT_MAIN(register_tests)
