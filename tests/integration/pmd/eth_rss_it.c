/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Integration test of per-lcore queues and steering on a real EAL (no
 * hugepages): net_ring pairs with two queues per port, which report no RSS,
 * so the ports steer in software.
 *
 * - what net_ring reports and the queue/pool/steering layout chosen from it;
 * - link state through the query and administrative down/up;
 * - raw frames: every TCP frame is received on the queue its reply tuple
 *   hashes to, ARP reaches every queue, nothing is lost;
 * - two threads registered as EAL threads, each owning queue i of both ports
 *   and a stack on each side: several connections opened from each thread
 *   with the RSS port picker, echoed back byte for byte; every connection is
 *   seen by the owning stack only (the picker's queue on both sides, and no
 *   stack ever saw a segment for a connection it does not have), with one
 *   device queue per lcore and with lcores sharing one device queue, and
 *   with checksums elided on both sides;
 * - checksum modes (TIDE_CSUM) through the glue: refused where they must
 *   be, and what happens on the link when both, or only one, end elides.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_eth_rss.h"
#include "tide_net.h"
#include "tide_ut.h"

#define NQ        2
#define IP_A      0x0a580001u /* 10.88.0.1 */
#define IP_B      0x0a580002u /* 10.88.0.2 */
#define SRV_PORT  7100
#define CONNS     4     /* per thread */
#define XFER      65536 /* bytes each connection sends and gets back */
#define MAX_BCONN 16

static struct tide_eal_info eal_info;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int
suite_init(void)
{
	struct tide_eal_opts o = {0};
	const char *huge = getenv("TIDE_HUGEPAGES");
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "tide-eth-rss-it-%d", (int)getpid());
	o.prog = "eth_rss_it";
	o.file_prefix = prefix;
	o.lcores = "0";
	o.huge = huge != NULL && strcmp(huge, "auto") == 0 ? TIDE_EAL_HUGE_AUTO : TIDE_EAL_HUGE_OFF;
	o.mem_bytes = 256u << 20;
	/* net_null reports and stores RSS settings (it hashes nothing): the
	 * hardware path's configuration, RETA and key read-back. Closing an
	 * ethdev vdev releases it, so one per open. */
	o.vdevs[0] = "net_null0";
	o.vdevs[1] = "net_null1";
	o.vdevs[2] = "net_null2";
	o.vdevs[3] = "net_null3"; /* checksum modes: a driver where elision is refused */
	if (tide_eal_init(&o, &eal_info) != 0)
		return -1;
	printf("\nEAL up: %s (%s)\n", eal_info.hugepages ? "hugepages" : "no-huge",
	       eal_info.huge_reason);
	return 0;
}

static int
suite_fini(void)
{
	return tide_eal_fini();
}

static void
pair_close(struct tide_eth_port *a, struct tide_eth_port *b)
{
	CU_ASSERT_EQUAL(tide_eth_port_close(a), 0);
	CU_ASSERT_EQUAL(tide_eth_port_close(b), 0);
}

/* What net_ring reports, and the layout chosen from it. */
static void
test_ring_caps_and_layout(void)
{
	struct tide_eth_port_opts o = {.nb_queues = NQ, .nb_rxd = 256, .nb_txd = 256};
	struct tide_eth_port *a = NULL, *b = NULL;
	struct tide_eth_port_caps c;
	const struct tide_eth_rss *rss;

	TIDE_UT_OK(tide_eth_ring_pair("rc_a", "rc_b", &o, &a, &b));
	if (a == NULL)
		return;
	tide_eth_port_caps(a, &c);
	printf("\n  net_ring: driver %s, max rx %u tx %u, rss offloads 0x%llx, reta %u, key %u, "
	       "lsc %d\n",
	       c.driver, c.max_rx_queues, c.max_tx_queues,
	       (unsigned long long)c.flow_type_rss_offloads, c.reta_size, c.hash_key_size, c.lsc);
	CU_ASSERT_STRING_EQUAL(c.driver, "net_ring");
	CU_ASSERT_EQUAL(c.max_rx_queues, NQ);
	CU_ASSERT_EQUAL(c.max_tx_queues, NQ);
	CU_ASSERT_EQUAL(c.flow_type_rss_offloads, 0);
	CU_ASSERT_EQUAL(c.reta_size, 0);
	CU_ASSERT_EQUAL(tide_eth_port_steer(a), TIDE_ETH_STEER_SW);
	CU_ASSERT_EQUAL(tide_eth_port_nb_queues(a), NQ);
	CU_ASSERT_EQUAL(c.dev_rxq, NQ);
	CU_ASSERT_EQUAL(c.dev_txq, NQ);
	CU_ASSERT_FALSE(c.tx_shared);
	CU_ASSERT_EQUAL(tide_eth_port_tx_queue(a, 1), 1);
	CU_ASSERT_EQUAL(c.nb_pools, 1);
	CU_ASSERT_PTR_NOT_NULL(tide_eth_port_queue_pool(a, 1));
	CU_ASSERT_PTR_EQUAL(tide_eth_port_queue_pool(a, 0), tide_eth_port_queue_pool(a, 1));
	CU_ASSERT_PTR_EQUAL(tide_eth_port_pool(a), tide_eth_port_queue_pool(a, 0));
	CU_ASSERT_PTR_NULL(tide_eth_port_queue_pool(a, NQ));
	rss = tide_eth_port_rss(a);
	CU_ASSERT_EQUAL(rss->nb_queues, NQ);
	CU_ASSERT_EQUAL(rss->reta_size, TIDE_ETH_RSS_RETA_DEFAULT);
	CU_ASSERT_EQUAL(memcmp(rss->key, tide_eth_rss_key_sym, 40), 0);
	pair_close(a, b);

	/* One ring per direction for two lcores: they share the TX queue. */
	o.ring_pair_rings = 1;
	TIDE_UT_OK(tide_eth_ring_pair("rc_c", "rc_d", &o, &a, &b));
	if (a == NULL)
		return;
	tide_eth_port_caps(a, &c);
	CU_ASSERT_EQUAL(c.dev_rxq, 1);
	CU_ASSERT_EQUAL(c.dev_txq, 1);
	CU_ASSERT_TRUE(c.tx_shared);
	CU_ASSERT_EQUAL(tide_eth_port_tx_queue(a, 0), 0);
	CU_ASSERT_EQUAL(tide_eth_port_tx_queue(a, 1), 0);
	CU_ASSERT_EQUAL(tide_eth_port_tx_queue(a, NQ), 1);
	pair_close(a, b);

	/* Hardware RSS cannot be had from net_ring; NONE keeps raw queues. */
	o.ring_pair_rings = 0;
	o.steer = TIDE_ETH_STEER_HW;
	CU_ASSERT_EQUAL(tide_eth_ring_pair("rc_e", "rc_f", &o, &a, &b), -ENOTSUP);
	o.steer = TIDE_ETH_STEER_NONE;
	TIDE_UT_OK(tide_eth_ring_pair("rc_g", "rc_h", &o, &a, &b));
	if (a != NULL) {
		CU_ASSERT_EQUAL(tide_eth_port_steer(a), TIDE_ETH_STEER_NONE);
		CU_ASSERT_EQUAL(tide_eth_port_rss(a)->nb_queues, 1);
		pair_close(a, b);
	}

	/* Queue sockets: explicit 0 and "port's" share one pool; a bad one fails. */
	{
		int sockets[NQ] = {0, -1}, bad[NQ] = {0, 4096};

		o.steer = TIDE_ETH_STEER_AUTO;
		o.queue_socket = sockets;
		TIDE_UT_OK(tide_eth_ring_pair("rc_i", "rc_j", &o, &a, &b));
		if (a != NULL) {
			tide_eth_port_caps(a, &c);
			CU_ASSERT_EQUAL(c.nb_pools, 1);
			pair_close(a, b);
		}
		o.queue_socket = bad;
		CU_ASSERT_EQUAL(tide_eth_ring_pair("rc_k", "rc_l", &o, &a, &b), -EINVAL);
	}
	/* Offloads: what the device has is enabled, the rest left out. */
	{
		struct tide_eth_port_opts of = {.nb_rxd = 256, .nb_txd = 256};

		of.tx_offloads = RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_TCP_TSO;
		of.rx_offloads = RTE_ETH_RX_OFFLOAD_TCP_LRO;
		TIDE_UT_OK(tide_eth_ring_pair("rc_o", "rc_p", &of, &a, &b));
		if (a != NULL) {
			tide_eth_port_caps(a, &c);
			printf("  net_ring offload capa rx 0x%llx tx 0x%llx\n",
			       (unsigned long long)c.rx_offload_capa,
			       (unsigned long long)c.tx_offload_capa);
			CU_ASSERT_EQUAL(c.tx_offloads, of.tx_offloads & c.tx_offload_capa);
			CU_ASSERT_EQUAL(c.rx_offloads, of.rx_offloads & c.rx_offload_capa);
			pair_close(a, b);
		}
	}
	/* The single-queue default is unchanged: no steering. */
	TIDE_UT_OK(tide_eth_ring_pair("rc_m", "rc_n", NULL, &a, &b));
	if (a != NULL) {
		CU_ASSERT_EQUAL(tide_eth_port_steer(a), TIDE_ETH_STEER_NONE);
		CU_ASSERT_EQUAL(tide_eth_port_nb_queues(a), 1);
		pair_close(a, b);
	}
}

/* The CPU -> NUMA node helper callers fill queue_socket with. */
static void
test_cpu_socket(void)
{
	int n0 = tide_eal_cpu_socket(0);

	CU_ASSERT(n0 >= 0 && n0 < RTE_MAX_NUMA_NODES);
	/* The EAL agrees for the lcore it runs on CPU 0 (-l 0). */
	CU_ASSERT_EQUAL((unsigned)n0, rte_lcore_to_socket_id(rte_get_main_lcore()));
	CU_ASSERT_EQUAL(tide_eal_cpu_socket(-1), -EINVAL);
	CU_ASSERT_EQUAL(tide_eal_cpu_socket(1 << 20), -EINVAL);
}

/* What the device itself says its key and RETA are. */
static void
check_device_rss(const struct tide_eth_port *p, const uint8_t *key)
{
	const struct tide_eth_rss *rss = tide_eth_port_rss(p);
	struct rte_eth_rss_reta_entry64 reta[2];
	uint8_t dkey[40];
	struct rte_eth_rss_conf conf = {.rss_key = dkey, .rss_key_len = sizeof(dkey)};

	memset(reta, 0, sizeof(reta));
	reta[0].mask = reta[1].mask = ~0ull;
	TIDE_UT_OK(rte_eth_dev_rss_reta_query(tide_eth_port_id(p), reta, 128));
	for (unsigned i = 0; i < 128; i++)
		CU_ASSERT_EQUAL_FATAL(reta[i / 64].reta[i % 64], rss->reta[i]);
	TIDE_UT_OK(rte_eth_dev_rss_hash_conf_get(tide_eth_port_id(p), &conf));
	CU_ASSERT_EQUAL(memcmp(dkey, key, 40), 0);
	CU_ASSERT_EQUAL(memcmp(rss->key, key, 40), 0);
	CU_ASSERT(conf.rss_hf & RTE_ETH_RSS_NONFRAG_IPV4_TCP);
}

/* The hardware path on a device that takes RSS settings (net_null). */
static void
test_hw_rss_config(void)
{
	struct tide_eth_port_opts o = {.nb_queues = NQ, .nb_rxd = 256, .nb_txd = 256};
	struct tide_eth_port *p = NULL;
	struct tide_eth_port_caps c;
	const struct tide_eth_rss *rss;
	struct tide_eth_rss_picker pk;

	TIDE_UT_OK(tide_eth_port_open("net_null0", &o, &p));
	if (p == NULL)
		return;
	tide_eth_port_caps(p, &c);
	printf("\n  net_null: max rx %u tx %u, rss offloads 0x%llx, reta %u, key %u\n",
	       c.max_rx_queues, c.max_tx_queues, (unsigned long long)c.flow_type_rss_offloads,
	       c.reta_size, c.hash_key_size);
	CU_ASSERT_EQUAL(tide_eth_port_steer(p), TIDE_ETH_STEER_HW);
	CU_ASSERT(c.flow_type_rss_offloads & RTE_ETH_RSS_NONFRAG_IPV4_TCP);
	CU_ASSERT_EQUAL(c.dev_rxq, NQ);
	CU_ASSERT_FALSE(c.tx_shared);
	rss = tide_eth_port_rss(p);
	CU_ASSERT_EQUAL(rss->nb_queues, NQ);
	CU_ASSERT_EQUAL(rss->reta_size, c.reta_size != 0 ? c.reta_size : 128);
	if (rss->reta_size == 128) {
		for (unsigned i = 0; i < 128; i++)
			CU_ASSERT_EQUAL_FATAL(rss->reta[i], i % NQ);
		check_device_rss(p, tide_eth_rss_key_sym);
	}
	/* The picker works from what the device was given. */
	TIDE_UT_OK(tide_eth_rss_picker_init(&pk, rss, 1, IP_A, 0, 0));
	for (int i = 0; i < 100; i++) {
		uint16_t lport;

		TIDE_UT_OK(tide_eth_rss_port_pick(&pk, IP_B, 80, 0, &lport));
		CU_ASSERT_EQUAL(tide_eth_rss_reply_queue(rss, IP_A, lport, IP_B, 80), 1);
	}
	CU_ASSERT_EQUAL(tide_eth_port_close(p), 0);

	/* A caller's key, of the device's size, is what the device hashes with. */
	o.rss_key = tide_eth_rss_key_ms;
	o.rss_key_len = 40;
	p = NULL;
	TIDE_UT_OK(tide_eth_port_open("net_null1", &o, &p));
	if (p != NULL) {
		if (tide_eth_port_rss(p)->reta_size == 128)
			check_device_rss(p, tide_eth_rss_key_ms);
		CU_ASSERT_EQUAL(tide_eth_port_close(p), 0);
	}
	/* A key of another size cannot be programmed. */
	o.rss_key_len = 52;
	CU_ASSERT_EQUAL(tide_eth_port_open("net_null2", &o, &p), -EINVAL);
}

static void
test_link_state(void)
{
	struct tide_eth_port_opts o = {.nb_queues = NQ, .nb_rxd = 256, .nb_txd = 256};
	struct tide_eth_port *a = NULL, *b = NULL;
	struct tide_eth_port_caps c;

	TIDE_UT_OK(tide_eth_ring_pair("lk_a", "lk_b", &o, &a, &b));
	if (a == NULL)
		return;
	tide_eth_port_caps(a, &c);
	CU_ASSERT_TRUE(tide_eth_port_link_up(a));
	TIDE_UT_OK(tide_eth_port_set_link(a, false));
	CU_ASSERT_FALSE(tide_eth_port_link_up(a));
	CU_ASSERT_TRUE(tide_eth_port_link_up(b));
	TIDE_UT_OK(tide_eth_port_set_link(a, true));
	CU_ASSERT_TRUE(tide_eth_port_link_up(a));
	/* net_ring raises no link interrupts: no events without LSC. */
	if (!c.lsc)
		CU_ASSERT_EQUAL(tide_eth_port_link_events(a), 0);
	pair_close(a, b);
}

/* An Ethernet/IPv4/TCP frame (checksums are not looked at by steering). */
static struct rte_mbuf *
tcp_frame(struct rte_mempool *mp, uint32_t sip, uint32_t dip, uint16_t sp, uint16_t dp)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint8_t *d;

	if (m == NULL)
		return NULL;
	if (rte_pktmbuf_append(m, 54) == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	d = rte_pktmbuf_mtod(m, uint8_t *);
	memset(d, 0, 54);
	memset(d, 0xff, 6);
	d[12] = 0x08;
	d[14] = 0x45;
	d[16] = 0;
	d[17] = 40;
	d[22] = 64;
	d[23] = 6;
	for (int i = 0; i < 4; i++) {
		d[26 + i] = (uint8_t)(sip >> (24 - 8 * i));
		d[30 + i] = (uint8_t)(dip >> (24 - 8 * i));
	}
	d[34] = (uint8_t)(sp >> 8);
	d[35] = (uint8_t)sp;
	d[36] = (uint8_t)(dp >> 8);
	d[37] = (uint8_t)dp;
	return m;
}

static struct rte_mbuf *
arp_frame(struct rte_mempool *mp)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint8_t *d;

	if (m == NULL)
		return NULL;
	if (rte_pktmbuf_append(m, 60) == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	d = rte_pktmbuf_mtod(m, uint8_t *);
	memset(d, 0, 60);
	memset(d, 0xff, 6);
	d[12] = 0x08;
	d[13] = 0x06;
	return m;
}

/* Frames sent on every TX queue of A arrive at B on the queue their hash
 * names, whichever device queue carried them; ARP arrives on every queue. */
static void
test_sw_steering_frames(void)
{
	enum { NFRAMES = 2000 };
	struct tide_eth_port_opts o = {.nb_queues = NQ, .nb_rxd = 512, .nb_txd = 512};
	struct tide_eth_port *a = NULL, *b = NULL;
	const struct tide_eth_rss *rss;
	unsigned per_q[NQ] = {0}, arp[NQ] = {0}, wrong = 0, got = 0, sent = 0;
	struct tide_eth_steer_stats st[NQ];

	TIDE_UT_OK(tide_eth_ring_pair("sf_a", "sf_b", &o, &a, &b));
	if (a == NULL)
		return;
	rss = tide_eth_port_rss(b);
	for (unsigned i = 0; i < NFRAMES; i++) {
		struct rte_mbuf *m = tcp_frame(tide_eth_port_pool(a), 0x0a000001u + i % 13,
					       0x0a000100u, (uint16_t)(1024 + i * 7), 80);

		if (m == NULL)
			break;
		if (tide_eth_tx(a, (uint16_t)(i % NQ), &m, 1) != 1) {
			rte_pktmbuf_free(m);
			break;
		}
		sent++;
	}
	{
		struct rte_mbuf *m = arp_frame(tide_eth_port_pool(a));

		CU_ASSERT_PTR_NOT_NULL_FATAL(m);
		CU_ASSERT_EQUAL_FATAL(tide_eth_tx(a, 1, &m, 1), 1);
	}
	CU_ASSERT_EQUAL(sent, NFRAMES);
	for (unsigned spins = 0; spins < 100000 && got < sent + NQ; spins++) {
		for (uint16_t q = 0; q < NQ; q++) {
			struct rte_mbuf *m[32];
			uint16_t n = tide_eth_rx(b, q, m, 32);

			for (uint16_t k = 0; k < n; k++) {
				const uint8_t *d = rte_pktmbuf_mtod(m[k], const uint8_t *);

				got++;
				if (d[13] == 0x06) {
					arp[q]++;
					continue;
				}
				uint32_t sip = (uint32_t)d[26] << 24 | (uint32_t)d[27] << 16 |
					       (uint32_t)d[28] << 8 | d[29];
				uint32_t dip = (uint32_t)d[30] << 24 | (uint32_t)d[31] << 16 |
					       (uint32_t)d[32] << 8 | d[33];
				uint16_t sp = (uint16_t)(d[34] << 8 | d[35]);
				uint16_t dp = (uint16_t)(d[36] << 8 | d[37]);

				per_q[q]++;
				wrong += tide_eth_rss_reply_queue(rss, dip, dp, sip, sp) != q;
				wrong += m[k]->hash.rss !=
					 tide_eth_rss_hash_v4tcp(rss, sip, dip, sp, dp);
			}
			rte_pktmbuf_free_bulk(m, n);
		}
	}
	printf("\n  steered %u + %u frames, ARP copies %u + %u\n", per_q[0], per_q[1], arp[0],
	       arp[1]);
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT_EQUAL(per_q[0] + per_q[1], NFRAMES);
	/* 13 sources x many ports over a 2-queue RETA: both queues get a share. */
	CU_ASSERT(per_q[0] > NFRAMES / 4 && per_q[1] > NFRAMES / 4);
	for (uint16_t q = 0; q < NQ; q++) {
		CU_ASSERT_EQUAL(arp[q], 1);
		TIDE_UT_OK(tide_eth_port_steer_stats(b, q, &st[q]));
		CU_ASSERT_EQUAL(st[q].dropped, 0);
	}
	CU_ASSERT_EQUAL(st[0].steered, per_q[0] + 1); /* the ARP original */
	CU_ASSERT_EQUAL(st[1].steered, per_q[1]);
	CU_ASSERT_EQUAL(st[0].broadcast, 0);
	CU_ASSERT_EQUAL(st[1].broadcast, 1);
	CU_ASSERT_EQUAL(tide_eth_port_steer_stats(b, NQ, &st[0]), -EINVAL);
	pair_close(a, b);
}

/* Frames per second through B's receive path, one thread draining every
 * queue: software steering against plain queues (NONE). Printed, not
 * asserted: the number depends on the machine. */
static double
rx_rate(enum tide_eth_steer steer, const char *label)
{
	enum { TOTAL = 400000, BURST = 32 };
	struct tide_eth_port_opts o = {
		.nb_queues = NQ, .nb_rxd = 1024, .nb_txd = 1024, .steer = steer};
	struct tide_eth_port *a = NULL, *b = NULL;
	struct rte_mbuf *m[BURST];
	uint64_t t_rx = 0;
	unsigned sent = 0, got = 0;
	char na[16], nb[16];

	snprintf(na, sizeof(na), "%s_a", label);
	snprintf(nb, sizeof(nb), "%s_b", label);
	TIDE_UT_OK(tide_eth_ring_pair(na, nb, &o, &a, &b));
	if (a == NULL)
		return 0;
	while (got < TOTAL) {
		uint16_t n = 0;
		uint64_t t0;

		/* Fill B's device rings with a window of frames, then time the drain. */
		while (sent - got < 2048 && sent < TOTAL) {
			for (n = 0; n < BURST; n++) {
				m[n] = tcp_frame(tide_eth_port_pool(a), 0x0a000001u + sent % 251,
						 0x0a000100u, (uint16_t)(1024 + (sent + n) % 5000),
						 80);
				if (m[n] == NULL)
					break;
			}
			uint16_t k = tide_eth_tx(a, (uint16_t)(sent / BURST % NQ), m, n);

			rte_pktmbuf_free_bulk(m + k, n - k);
			sent += k;
			if (k == 0)
				break;
		}
		t0 = now_ns();
		for (unsigned idle = 0; idle < 4 && got < sent;) {
			unsigned before = got;

			for (uint16_t q = 0; q < NQ; q++) {
				n = tide_eth_rx(b, q, m, BURST);
				rte_pktmbuf_free_bulk(m, n);
				got += n;
			}
			idle = got == before ? idle + 1 : 0;
		}
		t_rx += now_ns() - t0;
		if (got < sent)
			break; /* frames lost: the assertion below says so */
	}
	CU_ASSERT_EQUAL(got, TOTAL);
	pair_close(a, b);
	return t_rx > 0 ? got / (t_rx / 1e9) / 1e6 : 0;
}

static void
test_sw_steering_rate(void)
{
	double none = rx_rate(TIDE_ETH_STEER_NONE, "rn");
	double sw = rx_rate(TIDE_ETH_STEER_SW, "rs");

	printf("\n  receive path, 1 thread draining %u queues: plain %.1f Mpps, software "
	       "steering %.1f Mpps\n",
	       NQ, none, sw);
	CU_ASSERT(none > 0 && sw > 0);
}

/* ---- Two lcores, a stack per lcore per side ---- */

static uint8_t
pattern(uint32_t conn, uint64_t i)
{
	return (uint8_t)(((i + conn * 977u) * 2654435761u) >> 13);
}

struct aconn {
	struct tide_net_conn *c;
	uint32_t id;
	uint64_t sent, got, bad;
	bool connected, closed;
	int reason;
};

struct bconn {
	struct tide_net_conn *c;
	uint8_t *buf;
	size_t got, echoed;
	bool peer_closed;
};

struct worker {
	unsigned idx;
	enum tide_eth_csum csum; /* both sides' TIDE_CSUM */
	struct tide_eth_port *pa, *pb;
	pthread_t tid;
	/* Owned by the thread while it runs. */
	struct tide_eth_netdev nda, ndb;
	struct tide_net_stack *sa, *sb;
	struct tide_eth_rss_picker picker;
	struct aconn ac[CONNS];
	struct bconn bc[MAX_BCONN];
	unsigned nb_bconn;
	uint64_t now;
	/* Results, read by the main thread after join. */
	int rc;
	unsigned a_wrong_queue, b_wrong_queue, accepted;
	uint64_t a_no_conn, b_no_conn, a_rst_tx, b_rst_tx, a_rx_segs, b_rx_segs, bad_bytes;
	unsigned done_conns;
	bool elided; /* both netdevs ended up eliding */
};

static size_t
a_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct aconn *ac = arg;

	(void)c;
	for (size_t i = 0; i < n; i++)
		ac->bad += d[i] != pattern(ac->id, ac->got + i);
	ac->got += n;
	return n;
}

static void
a_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct aconn *ac = arg;

	(void)c;
	if (ev == TIDE_NET_EV_CONNECTED)
		ac->connected = true;
	if (ev == TIDE_NET_EV_CLOSED) {
		ac->closed = true;
		ac->reason = reason;
	}
}

static size_t
b_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct bconn *bc = arg;
	size_t k = XFER - bc->got < n ? XFER - bc->got : n;

	(void)c;
	memcpy(bc->buf + bc->got, d, k);
	bc->got += k;
	return n;
}

static void
b_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct bconn *bc = arg;

	(void)c;
	(void)reason;
	if (ev == TIDE_NET_EV_PEER_CLOSED)
		bc->peer_closed = true;
	if (ev == TIDE_NET_EV_CLOSED)
		bc->c = NULL;
}

static int
b_accept(void *arg, struct tide_net_conn *conn)
{
	static const struct tide_net_conn_cbs cbs = {.on_recv = b_recv, .on_event = b_event};
	struct worker *w = arg;
	struct bconn *bc;
	struct tide_net_conn_info ci;

	if (w->nb_bconn == MAX_BCONN)
		return -ENOSPC;
	bc = &w->bc[w->nb_bconn];
	bc->buf = malloc(XFER);
	if (bc->buf == NULL)
		return -ENOMEM;
	bc->c = conn;
	w->nb_bconn++;
	w->accepted++;
	tide_net_conn_info(conn, &ci);
	/* B sees the connection on the queue its own port steers it to. */
	if (tide_eth_rss_reply_queue(tide_eth_port_rss(w->pb), ci.lip, ci.lport, ci.rip,
				     ci.rport) != w->idx)
		w->b_wrong_queue++;
	tide_net_conn_set_cbs(conn, &cbs, bc);
	return 0;
}

static int
stack_up(struct worker *w, struct tide_eth_netdev *nd, struct tide_eth_port *p, uint32_t ip,
	 bool picker, struct tide_net_stack **out)
{
	struct tide_net_opts o;
	int rc = tide_eth_netdev_init(nd, p, (uint16_t)w->idx, NULL);

	if (rc != 0)
		return rc;
	tide_net_opts_init(&o, sizeof(o));
	o.dev_ops = &tide_eth_net_dev_ops;
	o.dev = nd;
	tide_eth_port_mac(p, o.mac);
	o.ip = ip;
	rc = tide_eth_netdev_csum(nd, w->csum, &o.tx_offloads, &o.cksum_elide);
	if (rc != 0)
		return rc;
	if (picker) {
		rc = tide_eth_rss_picker_init(&w->picker, tide_eth_port_rss(p), (uint16_t)w->idx,
					      ip, 0, 0);
		if (rc != 0)
			return rc;
		o.port_pick = tide_eth_rss_port_pick;
		o.port_arg = &w->picker;
	}
	return tide_net_stack_create(&o, now_ns(), out);
}

static unsigned
poll_once(struct worker *w)
{
	unsigned work;

	w->now = now_ns();
	work = tide_eth_netdev_poll(&w->nda, w->sa, w->now);
	work += tide_eth_netdev_poll(&w->ndb, w->sb, w->now);
	tide_net_timers_run(w->sa, w->now);
	tide_net_timers_run(w->sb, w->now);
	return work;
}

static void
pump_data(struct worker *w)
{
	uint8_t chunk[4096];

	for (unsigned i = 0; i < CONNS; i++) {
		struct aconn *ac = &w->ac[i];

		while (ac->connected && !ac->closed && ac->sent < XFER) {
			size_t n =
				XFER - ac->sent < sizeof(chunk) ? XFER - ac->sent : sizeof(chunk);
			ssize_t k;

			for (size_t j = 0; j < n; j++)
				chunk[j] = pattern(ac->id, ac->sent + j);
			k = tide_net_send(ac->c, chunk, n, w->now);
			if (k <= 0)
				break;
			ac->sent += (uint64_t)k;
		}
	}
	for (unsigned i = 0; i < w->nb_bconn; i++) {
		struct bconn *bc = &w->bc[i];

		while (bc->c != NULL && bc->echoed < bc->got) {
			ssize_t k = tide_net_send(bc->c, bc->buf + bc->echoed, bc->got - bc->echoed,
						  w->now);

			if (k <= 0)
				break;
			bc->echoed += (size_t)k;
		}
	}
}

static void *
worker_main(void *arg)
{
	static const struct tide_net_conn_cbs acbs = {.on_recv = a_recv, .on_event = a_event};
	struct worker *w = arg;
	struct tide_net_listener *l = NULL;
	uint64_t deadline;
	int rc;

	rc = tide_eal_thread_register(NULL, w->idx);
	if (rc != 0) {
		w->rc = rc;
		return NULL;
	}
	rc = stack_up(w, &w->nda, w->pa, IP_A, true, &w->sa);
	if (rc == 0)
		rc = stack_up(w, &w->ndb, w->pb, IP_B, false, &w->sb);
	if (rc == 0)
		rc = tide_net_listen(w->sb, SRV_PORT, 64, b_accept, w, &l);
	for (unsigned i = 0; i < CONNS && rc == 0; i++) {
		w->ac[i].id = w->idx * CONNS + i;
		rc = tide_net_connect(w->sa, IP_B, SRV_PORT, &acbs, &w->ac[i], now_ns(),
				      &w->ac[i].c);
	}
	deadline = now_ns() + 60ull * 1000000000ull;
	while (rc == 0 && w->now < deadline) {
		unsigned done = 0;

		if (poll_once(w) == 0)
			sched_yield();
		pump_data(w);
		for (unsigned i = 0; i < CONNS; i++)
			done += w->ac[i].got == XFER || w->ac[i].closed;
		if (done == CONNS)
			break;
	}
	for (unsigned i = 0; i < CONNS && rc == 0; i++) {
		struct aconn *ac = &w->ac[i];
		struct tide_net_conn_info ci;

		w->done_conns += ac->got == XFER && !ac->closed;
		w->bad_bytes += ac->bad;
		if (ac->closed) {
			fprintf(stderr, "worker %u conn %u closed: %d\n", w->idx, i, ac->reason);
			continue;
		}
		tide_net_conn_info(ac->c, &ci);
		if (tide_eth_rss_reply_queue(tide_eth_port_rss(w->pa), ci.lip, ci.lport, ci.rip,
					     ci.rport) != w->idx)
			w->a_wrong_queue++;
		tide_net_close(ac->c, now_ns());
	}
	/* Orderly close both ways, briefly; the stacks free what remains. */
	for (uint64_t until = now_ns() + 200000000ull; now_ns() < until;) {
		if (poll_once(w) == 0)
			sched_yield();
		for (unsigned i = 0; i < w->nb_bconn; i++)
			if (w->bc[i].c != NULL && w->bc[i].peer_closed &&
			    w->bc[i].echoed == w->bc[i].got) {
				tide_net_close(w->bc[i].c, w->now);
				w->bc[i].c = NULL;
			}
	}
	w->elided = w->nda.csum.elide && w->ndb.csum.elide;
	if (w->sa != NULL) {
		const struct tide_net_stats *s = tide_net_stats(w->sa);

		w->a_no_conn = s->tcp_rx_no_conn;
		w->a_rst_tx = s->tcp_rst_tx;
		w->a_rx_segs = s->tcp_rx_segs;
	}
	if (w->sb != NULL) {
		const struct tide_net_stats *s = tide_net_stats(w->sb);

		w->b_no_conn = s->tcp_rx_no_conn;
		w->b_rst_tx = s->tcp_rst_tx;
		w->b_rx_segs = s->tcp_rx_segs;
	}
	if (l != NULL)
		tide_net_listener_close(l, now_ns());
	if (w->sa != NULL)
		tide_net_stack_destroy(w->sa);
	if (w->sb != NULL)
		tide_net_stack_destroy(w->sb);
	tide_eth_netdev_fini(&w->nda);
	tide_eth_netdev_fini(&w->ndb);
	for (unsigned i = 0; i < w->nb_bconn; i++)
		free(w->bc[i].buf);
	w->rc = rc;
	rte_thread_unregister();
	return NULL;
}

static void
lcores(uint16_t nq, uint16_t rings, const char *label, enum tide_eth_csum csum)
{
	struct tide_eth_port_opts o = {
		.nb_queues = nq, .nb_rxd = 1024, .nb_txd = 1024, .ring_pair_rings = rings};
	struct tide_eth_port *pa = NULL, *pb = NULL;
	struct worker *w = calloc(nq, sizeof(*w));
	char na[16], nb[16];
	uint64_t t0 = now_ns();

	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	snprintf(na, sizeof(na), "%s_a", label);
	snprintf(nb, sizeof(nb), "%s_b", label);
	TIDE_UT_OK(tide_eth_ring_pair(na, nb, &o, &pa, &pb));
	if (pa == NULL) {
		free(w);
		return;
	}
	for (unsigned i = 0; i < nq; i++) {
		w[i].idx = i;
		w[i].csum = csum;
		w[i].pa = pa;
		w[i].pb = pb;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < nq; i++)
		pthread_join(w[i].tid, NULL);
	printf("\n  %s (%u lcores, %u device queue(s)): %.2f s\n", label, nq, rings,
	       (now_ns() - t0) / 1e9);
	for (unsigned i = 0; i < nq; i++) {
		struct tide_eth_steer_stats sta, stb;

		TIDE_UT_OK(tide_eth_port_steer_stats(pa, (uint16_t)i, &sta));
		TIDE_UT_OK(tide_eth_port_steer_stats(pb, (uint16_t)i, &stb));
		printf("  lcore %u: rc %d, conns done %u/%u, accepted %u, wrong queue A %u B %u, "
		       "rx segs A %llu B %llu, no-conn A %llu B %llu, steered A %llu B %llu, "
		       "arp copies A %llu B %llu, steer drops A %llu B %llu, picker picks %llu "
		       "skipped %llu\n",
		       i, w[i].rc, w[i].done_conns, CONNS, w[i].accepted, w[i].a_wrong_queue,
		       w[i].b_wrong_queue, (unsigned long long)w[i].a_rx_segs,
		       (unsigned long long)w[i].b_rx_segs, (unsigned long long)w[i].a_no_conn,
		       (unsigned long long)w[i].b_no_conn, (unsigned long long)sta.steered,
		       (unsigned long long)stb.steered, (unsigned long long)sta.broadcast,
		       (unsigned long long)stb.broadcast, (unsigned long long)sta.dropped,
		       (unsigned long long)stb.dropped, (unsigned long long)w[i].picker.picks,
		       (unsigned long long)w[i].picker.rejected);
		CU_ASSERT_EQUAL(w[i].rc, 0);
		CU_ASSERT_EQUAL(w[i].elided, csum == TIDE_ETH_CSUM_ELIDE);
		/* Data round-trips on every connection. */
		CU_ASSERT_EQUAL(w[i].done_conns, CONNS);
		CU_ASSERT_EQUAL(w[i].bad_bytes, 0);
		/* Each lcore's connections live on that lcore on both sides:
		 * the symmetric key makes B's queue equal A's. */
		CU_ASSERT_EQUAL(w[i].accepted, CONNS);
		CU_ASSERT_EQUAL(w[i].a_wrong_queue, 0);
		CU_ASSERT_EQUAL(w[i].b_wrong_queue, 0);
		CU_ASSERT_EQUAL(w[i].picker.picks, CONNS);
		/* No stack ever got a segment of a connection it does not own
		 * (it would have answered with a reset). */
		CU_ASSERT_EQUAL(w[i].a_no_conn, 0);
		CU_ASSERT_EQUAL(w[i].b_no_conn, 0);
		CU_ASSERT_EQUAL(w[i].a_rst_tx, 0);
		CU_ASSERT_EQUAL(w[i].b_rst_tx, 0);
		/* Both lcores' queues carried their own traffic. */
		CU_ASSERT(w[i].a_rx_segs >= CONNS * (XFER / 1460));
		CU_ASSERT(w[i].b_rx_segs >= CONNS * (XFER / 1460));
		CU_ASSERT(sta.steered >= w[i].a_rx_segs);
		CU_ASSERT(stb.steered >= w[i].b_rx_segs);
		/* Each stack's ARP traffic reached the other lcore too. */
		CU_ASSERT(sta.broadcast > 0 || i == 0);
		CU_ASSERT(stb.broadcast > 0 || i == 0);
		CU_ASSERT_EQUAL(sta.dropped, 0);
		CU_ASSERT_EQUAL(stb.dropped, 0);
	}
	pair_close(pa, pb);
	free(w);
}

static void
test_two_lcores_queue_per_lcore(void)
{
	lcores(NQ, NQ, "lq", TIDE_ETH_CSUM_AUTO);
}

static void
test_two_lcores_shared_device_queue(void)
{
	lcores(NQ, 1, "sq", TIDE_ETH_CSUM_AUTO);
}

/* Four lcores over two device queue pairs: the distributor polls both, and
 * pairs of lcores share a TX queue, each pair under its own lock. */
static void
test_four_lcores_two_device_queues(void)
{
	lcores(4, 2, "fq", TIDE_ETH_CSUM_AUTO);
}

/* The same over a memory-only link with checksums elided on both sides (TIDE_CSUM=elide). */
static void
test_two_lcores_checksums_elided(void)
{
	lcores(NQ, NQ, "le", TIDE_ETH_CSUM_ELIDE);
}

/* ---- checksum modes through the glue (tide_eth_netdev_csum) ---- */

struct ck_sink {
	uint8_t *buf;
	size_t got;
};

static size_t
ck_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct ck_sink *k = arg;
	size_t take = XFER - k->got < n ? XFER - k->got : n;

	(void)c;
	memcpy(k->buf + k->got, d, take);
	k->got += take;
	return n;
}

static int
ck_accept(void *arg, struct tide_net_conn *conn)
{
	static const struct tide_net_conn_cbs cbs = {.on_recv = ck_recv};

	tide_net_conn_set_cbs(conn, &cbs, arg);
	return 0;
}

static int
ck_stack(struct tide_eth_netdev *nd, struct tide_eth_port *p, uint32_t ip, enum tide_eth_csum mode,
	 struct tide_net_stack **out)
{
	struct tide_net_opts o;
	int rc = tide_eth_netdev_init(nd, p, 0, NULL);

	if (rc != 0)
		return rc;
	tide_net_opts_init(&o, sizeof(o));
	o.dev_ops = &tide_eth_net_dev_ops;
	o.dev = nd;
	tide_eth_port_mac(p, o.mac);
	o.ip = ip;
	rc = tide_eth_netdev_csum(nd, mode, &o.tx_offloads, &o.cksum_elide);
	if (rc != 0)
		return rc;
	return tide_net_stack_create(&o, now_ns(), out);
}

/*
 * A sends XFER pattern bytes to B over a net_ring pair, A and B in their own
 * checksum modes, for at most `ms`. Returns the bytes B got intact; *bad_a
 * and *bad_b get each side's checksum drops (IPv4 + TCP).
 */
static size_t
ck_transfer(enum tide_eth_csum ma, enum tide_eth_csum mb, unsigned ms, uint64_t *bad_a,
	    uint64_t *bad_b)
{
	struct tide_eth_port *pa = NULL, *pb = NULL;
	struct tide_eth_netdev nda, ndb;
	struct tide_net_stack *sa = NULL, *sb = NULL;
	struct tide_net_listener *l = NULL;
	struct tide_net_conn *c = NULL;
	struct ck_sink sink = {.buf = malloc(XFER)};
	uint8_t *src = malloc(XFER);
	uint64_t sent = 0, deadline = now_ns() + ms * 1000000ull;
	static unsigned round;
	char na[16], nb[16];
	size_t ok = 0;

	CU_ASSERT_FATAL(sink.buf != NULL && src != NULL);
	for (size_t i = 0; i < XFER; i++)
		src[i] = pattern(7, i);
	/* A closed ethdev's name is not reusable: one pair of names per round. */
	snprintf(na, sizeof(na), "ck%u_a", round);
	snprintf(nb, sizeof(nb), "ck%u_b", round++);
	TIDE_UT_OK(tide_eth_ring_pair(na, nb, NULL, &pa, &pb));
	CU_ASSERT_FATAL(pa != NULL && pb != NULL);
	TIDE_UT_OK(ck_stack(&nda, pa, IP_A, ma, &sa));
	TIDE_UT_OK(ck_stack(&ndb, pb, IP_B, mb, &sb));
	CU_ASSERT_FATAL(sa != NULL && sb != NULL);
	TIDE_UT_OK(tide_net_listen(sb, SRV_PORT, 8, ck_accept, &sink, &l));
	TIDE_UT_OK(tide_net_connect(sa, IP_B, SRV_PORT, NULL, NULL, now_ns(), &c));
	while (sink.got < XFER && now_ns() < deadline) {
		uint64_t now = now_ns();
		ssize_t k;

		tide_eth_netdev_poll(&nda, sa, now);
		tide_eth_netdev_poll(&ndb, sb, now);
		tide_net_timers_run(sa, now);
		tide_net_timers_run(sb, now);
		k = sent < XFER ? tide_net_send(c, src + sent, XFER - sent, now) : 0;
		if (k > 0)
			sent += (uint64_t)k;
	}
	while (ok < sink.got && sink.buf[ok] == src[ok])
		ok++;
	*bad_a = tide_net_stats(sa)->ip_rx_bad_csum + tide_net_stats(sa)->tcp_rx_bad_csum;
	*bad_b = tide_net_stats(sb)->ip_rx_bad_csum + tide_net_stats(sb)->tcp_rx_bad_csum;
	tide_net_abort(c, now_ns());
	tide_net_listener_close(l, now_ns());
	/* Let the resets land, so no frame of one port waits in the other's ring. */
	for (uint64_t until = now_ns() + 20000000ull; now_ns() < until;) {
		tide_eth_netdev_poll(&nda, sa, now_ns());
		tide_eth_netdev_poll(&ndb, sb, now_ns());
	}
	tide_net_stack_destroy(sa);
	tide_net_stack_destroy(sb);
	tide_eth_netdev_fini(&nda);
	tide_eth_netdev_fini(&ndb);
	pair_close(pa, pb);
	free(sink.buf);
	free(src);
	return ok;
}

static void
test_checksum_modes(void)
{
	struct tide_eth_fault_opts corrupt = {.corrupt = 0.01, .rx = true, .tx = true, .seed = 5};
	struct tide_eth_port_opts po = {.nb_rxd = 512, .nb_txd = 512};
	struct tide_eth_port *pn = NULL, *pa = NULL, *pb = NULL;
	struct tide_eth_netdev nd;
	struct tide_net_opts o;
	uint64_t bad_a, bad_b;

	/* A driver whose frames may leave the host: elision refused, software otherwise. */
	TIDE_UT_OK(tide_eth_port_open("net_null3", &po, &pn));
	if (pn != NULL) {
		TIDE_UT_OK(tide_eth_netdev_init(&nd, pn, 0, NULL));
		tide_net_opts_init(&o, sizeof(o));
		o.tx_offloads = 0x55;
		CU_ASSERT_EQUAL(tide_eth_netdev_csum(&nd, TIDE_ETH_CSUM_ELIDE, &o.tx_offloads,
						     &o.cksum_elide),
				-EPERM);
		CU_ASSERT_FALSE(o.cksum_elide);
		CU_ASSERT_EQUAL(o.tx_offloads, 0x55); /* untouched on failure */
		CU_ASSERT_EQUAL(tide_eth_netdev_csum(&nd, TIDE_ETH_CSUM_OFFLOAD, &o.tx_offloads,
						     &o.cksum_elide),
				-ENOTSUP);
		TIDE_UT_OK(tide_eth_netdev_csum(&nd, TIDE_ETH_CSUM_SW, &o.tx_offloads,
						&o.cksum_elide));
		CU_ASSERT_EQUAL(o.tx_offloads, 0);
		CU_ASSERT_FALSE(o.cksum_elide);
		CU_ASSERT_EQUAL(nd.rx_trust, 0);
		tide_eth_netdev_fini(&nd);
		CU_ASSERT_EQUAL(tide_eth_port_close(pn), 0);
	}

	/* net_ring: elision allowed, except with a fault injector that corrupts. */
	TIDE_UT_OK(tide_eth_ring_pair("cm_a", "cm_b", NULL, &pa, &pb));
	if (pa != NULL && pb != NULL) {
		TIDE_UT_OK(tide_eth_netdev_init(&nd, pa, 0, &corrupt));
		tide_net_opts_init(&o, sizeof(o));
		CU_ASSERT_EQUAL(tide_eth_netdev_csum(&nd, TIDE_ETH_CSUM_ELIDE, &o.tx_offloads,
						     &o.cksum_elide),
				-EINVAL);
		CU_ASSERT_FALSE(o.cksum_elide);
		TIDE_UT_OK(tide_eth_netdev_csum(&nd, TIDE_ETH_CSUM_AUTO, &o.tx_offloads,
						&o.cksum_elide)); /* fine with checks */
		tide_eth_netdev_fini(&nd);
		TIDE_UT_OK(tide_eth_netdev_init(&nd, pa, 0, NULL));
		o.tx_offloads = TIDE_NET_OFFLOAD_TCP_CKSUM;
		TIDE_UT_OK(tide_eth_netdev_csum(&nd, TIDE_ETH_CSUM_ELIDE, &o.tx_offloads,
						&o.cksum_elide));
		CU_ASSERT_TRUE(o.cksum_elide);
		CU_ASSERT_EQUAL(o.tx_offloads, 0);
		CU_ASSERT_TRUE(nd.csum.elide);
		tide_eth_netdev_fini(&nd);
		pair_close(pa, pb);
	}

	/* Both ends elide: every byte arrives, nothing was checked so nothing was dropped. */
	CU_ASSERT_EQUAL(
		ck_transfer(TIDE_ETH_CSUM_ELIDE, TIDE_ETH_CSUM_ELIDE, 10000, &bad_a, &bad_b), XFER);
	CU_ASSERT_EQUAL(bad_a + bad_b, 0);
	/* Software both ways (auto on net_ring): the same. */
	CU_ASSERT_EQUAL(ck_transfer(TIDE_ETH_CSUM_AUTO, TIDE_ETH_CSUM_SW, 10000, &bad_a, &bad_b),
			XFER);
	CU_ASSERT_EQUAL(bad_a + bad_b, 0);
	/* Only A elides: B verifies, drops A's frames (zero checksums), nothing opens. */
	CU_ASSERT_EQUAL(ck_transfer(TIDE_ETH_CSUM_ELIDE, TIDE_ETH_CSUM_AUTO, 300, &bad_a, &bad_b),
			0);
	CU_ASSERT(bad_b > 0);
	CU_ASSERT_EQUAL(bad_a, 0);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("eth_rss", suite_init, suite_fini);

	CU_add_test(s, "net_ring caps and queue layout", test_ring_caps_and_layout);
	CU_add_test(s, "cpu socket", test_cpu_socket);
	CU_add_test(s, "hardware RSS configuration (net_null)", test_hw_rss_config);
	CU_add_test(s, "link state", test_link_state);
	CU_add_test(s, "software steering of frames", test_sw_steering_frames);
	CU_add_test(s, "software steering rate", test_sw_steering_rate);
	CU_add_test(s, "two lcores, a device queue each", test_two_lcores_queue_per_lcore);
	CU_add_test(s, "two lcores, one shared device queue", test_two_lcores_shared_device_queue);
	CU_add_test(s, "four lcores, two device queues", test_four_lcores_two_device_queues);
	CU_add_test(s, "two lcores, checksums elided", test_two_lcores_checksums_elided);
	CU_add_test(s, "checksum modes through the glue", test_checksum_modes);
}

TIDE_UT_MAIN(register_tests)
