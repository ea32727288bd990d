/* SPDX-License-Identifier: Apache-2.0 */
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
	/* The SYN retransmission timer recovers; the device refuses this one. */
	e.dev.tx_refuse = 1;
	ut_advance(&e, 1000 * NS_PER_MS);
	CU_ASSERT_EQUAL(st->tx_dropped, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_advance(&e, 2000 * NS_PER_MS);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1);
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

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("stack", NULL, NULL);
	CU_add_test(s, "opts_validation", test_opts_validation);
	CU_add_test(s, "nobufs_and_tx_refused", test_nobufs_and_tx_refused);
	CU_add_test(s, "tx_batched_per_burst", test_tx_batched_per_burst);
}

TIDE_UT_MAIN(register_tests)
