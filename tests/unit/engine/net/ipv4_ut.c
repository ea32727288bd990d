/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

/* A valid echo request of 8 + 8 bytes; tests then break one field. */
static uint16_t
echo(uint8_t *f)
{
	struct net_icmp_hdr *ih = (struct net_icmp_hdr *)(f + NET_HDRS_LEN);
	uint16_t n = ut_build_ipv4(f, UT_PEER_IP, UT_IP, IPPROTO_ICMP_, 16);

	memset(ih, 0, 16);
	ih->type = 8;
	ih->csum = net_cksum(ih, 16);
	return n;
}

static struct net_ipv4_hdr *
iph(uint8_t *f)
{
	return (struct net_ipv4_hdr *)(f + ETH_HLEN);
}

static void
refix(uint8_t *f)
{
	iph(f)->csum = 0;
	iph(f)->csum = net_cksum(iph(f), (iph(f)->ver_ihl & 0xf) * 4u);
}

static void
test_malformed_headers(void)
{
	struct ut_env e;
	uint8_t f[256];
	uint16_t n;
	const struct tide_net_stats *st;

	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);

	n = echo(f);
	ut_rx(&e, f, ETH_HLEN + 19); /* truncated header */
	CU_ASSERT_EQUAL(st->ip_rx_bad_len, 1);

	n = echo(f);
	iph(f)->ver_ihl = 0x65; /* version 6 */
	refix(f);
	ut_rx(&e, f, n);
	n = echo(f);
	iph(f)->ver_ihl = 0x44; /* IHL 4 */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_bad_hdr, 2);

	n = echo(f);
	iph(f)->tot_len = htons(200); /* longer than the frame */
	refix(f);
	ut_rx(&e, f, n);
	n = echo(f);
	iph(f)->tot_len = htons(19); /* shorter than the header */
	refix(f);
	ut_rx(&e, f, n);
	n = echo(f);
	iph(f)->ver_ihl = 0x4f; /* 60-byte header in a 36-byte datagram */
	refix(f);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_bad_len, 4);

	n = echo(f);
	iph(f)->ttl = 3; /* checksum not updated */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 1);
	CU_ASSERT_EQUAL(st->icmp_rx, 0);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_env_fini(&e);
}

static void
test_fragments_not_ours_proto(void)
{
	struct ut_env e;
	uint8_t f[256];
	uint16_t n;
	const struct tide_net_stats *st;

	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	n = echo(f);
	iph(f)->frag_off = htons(IP_MF);
	refix(f);
	ut_rx(&e, f, n);
	n = echo(f);
	iph(f)->frag_off = htons(185); /* offset 1480 */
	refix(f);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_frags, 2);
	n = echo(f);
	iph(f)->daddr = htonl(0x0a000063);
	refix(f);
	ut_rx(&e, f, n);
	n = echo(f);
	iph(f)->daddr = htonl(0x0a0000ff); /* subnet broadcast */
	refix(f);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_not_ours, 2);
	n = echo(f);
	iph(f)->proto = 17;
	refix(f);
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_bad_proto, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_env_fini(&e);
}

static void
test_padding_options_and_tx_fields(void)
{
	struct ut_env e;
	uint8_t f[256], g[256];
	uint16_t n;
	struct ut_buf *b;

	ut_env_init(&e, NULL);
	/* Ethernet padding after tot_len is ignored. */
	n = echo(f);
	memset(f + n, 0xee, 20);
	ut_rx(&e, f, (uint16_t)(n + 20));
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	const struct net_ipv4_hdr *ip = (const struct net_ipv4_hdr *)(b->data + ETH_HLEN);
	CU_ASSERT_EQUAL(ntohs(ip->tot_len), 36);
	CU_ASSERT(ntohs(ip->frag_off) & IP_DF);
	CU_ASSERT_EQUAL(ip->ttl, 64);
	CU_ASSERT_EQUAL(ip->ver_ihl, 0x45);
	ut_buf_free(&e.dev, b);

	/* A header with 4 bytes of options (NOPs) is accepted; the payload follows it. */
	n = echo(f);
	memcpy(g, f, NET_HDRS_LEN);
	memset(g + NET_HDRS_LEN, TCPOPT_NOP, 4);
	memcpy(g + NET_HDRS_LEN + 4, f + NET_HDRS_LEN, 16);
	iph(g)->ver_ihl = 0x46;
	iph(g)->tot_len = htons(40);
	refix(g);
	ut_rx(&e, g, (uint16_t)(n + 4));
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->icmp_tx_echo_reply, 2);
	ut_dev_drain(&e.dev);
	ut_env_fini(&e);
}

static void
elide_on(struct tide_net_opts *o)
{
	o->cksum_elide = true;
	o->tx_offloads = TIDE_NET_OFFLOAD_IPV4_CKSUM; /* ignored: nothing is asked of the device */
}

/* Elided: the header checksum goes out as 0 and is not checked on the way in. */
static void
test_elide_header_checksum(void)
{
	struct ut_env e;
	uint8_t f[256];
	uint16_t n;
	struct ut_buf *b;
	const struct net_ipv4_hdr *ip;
	const struct tide_net_stats *st;

	ut_env_init(&e, elide_on);
	st = tide_net_stats(e.s);
	n = echo(f);
	iph(f)->ttl = 3; /* checksum not updated: wrong */
	ut_rx(&e, f, n);
	n = echo(f);
	iph(f)->csum = 0; /* what an eliding peer sends */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 0);
	CU_ASSERT_EQUAL(st->icmp_tx_echo_reply, 2);
	for (int i = 0; i < 2; i++) {
		b = ut_dev_pop(&e.dev);
		CU_ASSERT_FATAL(b != NULL);
		ip = (const struct net_ipv4_hdr *)(b->data + ETH_HLEN);
		CU_ASSERT_EQUAL(ip->csum, 0);
		CU_ASSERT_EQUAL(ip->ver_ihl, 0x45);
		CU_ASSERT_EQUAL(ntohs(ip->tot_len), 36);
		CU_ASSERT_EQUAL(ntohl(ip->daddr), UT_PEER_IP);
		ut_buf_free(&e.dev, b);
	}
	ut_env_fini(&e);

	/* Not elided: a zero header checksum from an eliding peer is dropped and counted. */
	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	n = echo(f);
	iph(f)->csum = 0;
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 1);
	CU_ASSERT_EQUAL(st->icmp_rx, 0);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	/* And our own header checksum is computed. */
	ut_rx(&e, f, echo(f));
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_NOT_EQUAL(((const struct net_ipv4_hdr *)(b->data + ETH_HLEN))->csum, 0);
	CU_ASSERT_EQUAL(net_cksum(b->data + ETH_HLEN, IP_HLEN), 0);
	ut_buf_free(&e.dev, b);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("ipv4", NULL, NULL);
	CU_add_test(s, "elide_header_checksum", test_elide_header_checksum);
	CU_add_test(s, "malformed_headers", test_malformed_headers);
	CU_add_test(s, "fragments_not_ours_proto", test_fragments_not_ours_proto);
	CU_add_test(s, "padding_options_and_tx_fields", test_padding_options_and_tx_fields);
}

TIDE_UT_MAIN(register_tests)
