/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

static void
test_opts_validation(void)
{
	struct ut_dev d = {0};
	struct tide_net_opts o;
	struct tide_net_stack *s = NULL;

	tide_net_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(o.mtu, 1500);
	CU_ASSERT_EQUAL(o.tcp_rto_min_us, 1000);
	CU_ASSERT_FALSE(o.tcp_nagle);
	CU_ASSERT_FALSE(o.tcp_keepalive);
	CU_ASSERT_FALSE(o.cksum_elide);
	CU_ASSERT_EQUAL(tide_net_stack_create(&o, 0, &s), -EINVAL); /* no dev_ops */
	o.dev_ops = &ut_dev_ops;
	o.dev = &d;
	CU_ASSERT_EQUAL(tide_net_stack_create(&o, 0, &s), -EINVAL); /* no MAC/IP */
	memcpy(o.mac, ut_mac, 6);
	o.ip = UT_IP;
	o.mtu = 100;
	CU_ASSERT_EQUAL(tide_net_stack_create(&o, 0, &s), -EINVAL);
	o.mtu = 1500;
	o.tcp_rto_min_us = 0;
	CU_ASSERT_EQUAL(tide_net_stack_create(&o, 0, &s), -EINVAL);
	o.tcp_rto_min_us = 1000;
	o.mac[0] = 0x01; /* multicast */
	CU_ASSERT_EQUAL(tide_net_stack_create(&o, 0, &s), -EINVAL);
	o.mac[0] = 0x02;
	o.opts_size = 8;
	CU_ASSERT_EQUAL(tide_net_stack_create(&o, 0, &s), -EINVAL);
	o.opts_size = sizeof(o);
	CU_ASSERT_EQUAL(s, NULL);
	CU_ASSERT_EQUAL(tide_net_stack_create(&o, 0, &s), 0);
	tide_net_stack_destroy(s);
	tide_net_stack_destroy(NULL);
	ut_dev_drain(&d);
	CU_ASSERT_EQUAL(d.live, 0);
	free(d.q);
}

static void
test_nobufs_and_tx_refused(void)
{
	struct ut_env e;
	struct tide_net_conn *c;
	const struct tide_net_stats *st;

	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	/* Exhaust the TX cache, then make allocation fail. */
	for (uint16_t i = 0; i < e.s->cache_n; i++) {
		ut_buf_free(&e.dev, e.s->cache[i].handle);
	}
	e.s->cache_n = 0;
	e.dev.alloc_fail = 1;
	CU_ASSERT_EQUAL(tide_net_connect(e.s, UT_PEER_IP, 5000, NULL, NULL, e.now, &c), 0);
	CU_ASSERT_EQUAL(st->tx_nobufs, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	/* The SYN retransmission timer recovers; the device refuses this one:
	 * it is kept (a full ring is backpressure, not loss) and leaves with the
	 * next flush, before anything sent later. */
	e.dev.tx_refuse = 1;
	ut_advance(&e, 1000 * NS_PER_MS);
	CU_ASSERT_EQUAL(st->tx_deferred, 1);
	CU_ASSERT_EQUAL(st->tx_dropped, 0);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	CU_ASSERT_EQUAL(e.s->txq_n, 1);
	ut_advance(&e, 1 * NS_PER_MS);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1);
	CU_ASSERT_EQUAL(e.s->txq_n, 0);
	tide_net_abort(c, e.now);
	ut_env_fini(&e);
}

static void
test_tx_batched_per_burst(void)
{
	struct ut_env e;
	struct tide_net_conn *c[40];

	ut_env_init(&e, NULL);
	unsigned bursts = e.dev.tx_bursts, allocs = e.dev.alloc_calls;
	struct tide_net_rx_pkt p[40];
	uint8_t f[40][64];

	/* 40 ARP requests in one burst: 40 replies in two tx_burst calls, not 40. */
	for (int i = 0; i < 40; i++) {
		uint16_t n = ut_build_arp(f[i], 1, ut_peer_mac, UT_PEER_IP, (const uint8_t[6]){0},
					  UT_IP, ut_mac);
		p[i] = (struct tide_net_rx_pkt){.data = f[i], .len = n};
	}
	tide_net_rx_burst(e.s, p, 40, e.now);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 40);
	CU_ASSERT_EQUAL(e.dev.tx_bursts - bursts, 2);
	CU_ASSERT(e.dev.alloc_calls - allocs <= 2);
	ut_dev_drain(&e.dev);
	/* Destroy with live connections frees them all. */
	for (int i = 0; i < 40; i++) {
		CU_ASSERT_EQUAL(tide_net_connect(e.s, UT_PEER_IP, 5000, NULL, NULL, e.now, &c[i]),
				0);
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 40);
	CU_ASSERT(tide_net_next_timer(e.s) <= e.now + 1000 * NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_timers_run(e.s, e.now), 0);
	ut_env_fini(&e);
}

/* ---- checksum elision on receive ---- */

static void
elide_on(struct tide_net_opts *o)
{
	o->cksum_elide = true;
}

enum csum_damage { CS_ZERO, CS_WRONG, CS_TCP_ZERO };

/* A SYN for port 80 with damaged checksums: both 0 (what an eliding peer sends), both wrong,
 * or only the TCP one 0. */
static uint16_t
syn_frame(uint8_t *f, uint32_t seq, enum csum_damage d)
{
	uint16_t n = ut_build_tcp(f, &(struct ut_seg){.seq = seq, .flags = TCPHDR_SYN});
	struct net_ipv4_hdr *ip = (struct net_ipv4_hdr *)(f + ETH_HLEN);
	struct net_tcp_hdr *th = (struct net_tcp_hdr *)(f + NET_HDRS_LEN);

	switch (d) {
	case CS_ZERO:
		ip->csum = 0;
		th->csum = 0;
		break;
	case CS_WRONG:
		ip->csum ^= htons(0x1111);
		th->csum ^= htons(0x2222);
		break;
	case CS_TCP_ZERO:
		th->csum = 0;
		break;
	}
	return n;
}

static void
test_elide_rx_takes_frames_unverified(void)
{
	struct ut_env e;
	struct tide_net_listener *l;
	const struct tide_net_stats *st;
	uint8_t f[128];
	uint16_t n;

	/* Elided: no checksum is looked at; each SYN gets its SYN-ACK. */
	ut_env_init(&e, elide_on);
	st = tide_net_stats(e.s);
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, 8, ut_app_accept, NULL, &l) == 0);
	ut_rx(&e, f, syn_frame(f, 100, CS_ZERO));
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1);
	ut_rx(&e, f, syn_frame(f, 100, CS_WRONG)); /* the same SYN again: SYN-ACK again */
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 2);
	CU_ASSERT_EQUAL(st->tcp_passive_opens, 1);
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 0);
	CU_ASSERT_EQUAL(st->tcp_rx_bad_csum, 0);
	/* Checksums are the only check skipped: a broken header is still refused. */
	n = syn_frame(f, 100, CS_ZERO);
	f[ETH_HLEN] = 0x65;
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->ip_rx_bad_hdr, 1);
	n = syn_frame(f, 100, CS_WRONG);
	f[NET_HDRS_LEN + 12] = 0x10; /* TCP data offset 4 bytes */
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->tcp_rx_bad_hdr, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 2);
	ut_dev_drain(&e.dev);
	tide_net_listener_close(l, e.now);
	ut_env_fini(&e);

	/* Not elided (the default): the same frames are dropped and counted, no answer. */
	ut_env_init(&e, NULL);
	st = tide_net_stats(e.s);
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, 8, ut_app_accept, NULL, &l) == 0);
	ut_rx(&e, f, syn_frame(f, 100, CS_ZERO)); /* an eliding peer: the IPv4 check fails first */
	ut_rx(&e, f, syn_frame(f, 100, CS_WRONG));
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 2);
	ut_rx(&e, f, syn_frame(f, 100, CS_TCP_ZERO));
	CU_ASSERT_EQUAL(st->tcp_rx_bad_csum, 1);
	CU_ASSERT_EQUAL(st->tcp_passive_opens, 0);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	/* A good SYN still opens. */
	n = ut_build_tcp(f, &(struct ut_seg){.seq = 100, .flags = TCPHDR_SYN});
	ut_rx(&e, f, n);
	CU_ASSERT_EQUAL(st->tcp_passive_opens, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1);
	ut_dev_drain(&e.dev);
	tide_net_listener_close(l, e.now);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("stack", NULL, NULL);
	CU_add_test(s, "elide_rx_takes_frames_unverified", test_elide_rx_takes_frames_unverified);
	CU_add_test(s, "opts_validation", test_opts_validation);
	CU_add_test(s, "nobufs_and_tx_refused", test_nobufs_and_tx_refused);
	CU_add_test(s, "tx_batched_per_burst", test_tx_batched_per_burst);
}

TIDE_UT_MAIN(register_tests)
