/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Integration test of pmd/eth on a real EAL: a net_ring pair joined back to
 * back, and a net_ring loopback vdev from the EAL's --vdev list. Runs with
 * --no-huge unless TIDE_HUGEPAGES=auto/on and hugepages are free.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "tide_eth.h"
#include "tide_ut.h"

#define NPKTS 20000

static struct tide_eal_info eal_info;

/* Affinity of the thread that ran suite_init, before the EAL came up. */
static cpu_set_t aff_before;

static int
suite_init(void)
{
	struct tide_eal_opts o = {0};
	const char *huge = getenv("TIDE_HUGEPAGES");
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "tide-eth-it-%d", (int)getpid());
	o.prog = "eth_it";
	o.file_prefix = prefix;
	o.lcores = "0";
	o.huge = huge != NULL && strcmp(huge, "auto") == 0 ? TIDE_EAL_HUGE_AUTO : TIDE_EAL_HUGE_OFF;
	o.mem_bytes = 128u << 20;
	o.vdevs[0] = "net_ring0";
	if (pthread_getaffinity_np(pthread_self(), sizeof(aff_before), &aff_before) != 0)
		return -1;
	if (tide_eal_init(&o, &eal_info) != 0)
		return -1;
	printf("\nEAL up: %s (%s), %u ports\n", eal_info.hugepages ? "hugepages" : "no-huge",
	       eal_info.huge_reason, eal_info.ports);
	return 0;
}

static void
test_eal_keeps_caller_affinity(void)
{
	cpu_set_t now;

	/* The EAL pins its caller to the main lcore; tide_eal_init gives the mask back. */
	CU_ASSERT_EQUAL_FATAL(pthread_getaffinity_np(pthread_self(), sizeof(now), &now), 0);
	CU_ASSERT(CPU_EQUAL(&now, &aff_before));
}

static int
suite_fini(void)
{
	return tide_eal_fini();
}

static struct rte_mbuf *
make_pkt(struct rte_mempool *mp, uint32_t seq)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint32_t *p;

	if (m == NULL)
		return NULL;
	p = (uint32_t *)rte_pktmbuf_append(m, 64);
	for (int i = 0; i < 16; i++)
		p[i] = seq * 31u + (uint32_t)i;
	return m;
}

static int
check_pkt(struct rte_mbuf *m, uint32_t seq)
{
	const uint32_t *p = rte_pktmbuf_mtod(m, const uint32_t *);

	if (rte_pktmbuf_pkt_len(m) != 64)
		return -1;
	for (int i = 0; i < 16; i++)
		if (p[i] != seq * 31u + (uint32_t)i)
			return -1;
	return 0;
}

/* Send from `tx`, receive on `rx`, in bursts, checking order and content. */
static void
pump(struct tide_eth_port *tx, struct tide_eth_port *rx)
{
	struct rte_mempool *mp = tide_eth_port_pool(tx);
	struct rte_mbuf *burst[32];
	uint32_t sent = 0, got = 0, bad = 0;
	unsigned spins = 0;

	while (got < NPKTS && spins < 1000000) {
		uint16_t n = 0, k;

		while (sent + n < NPKTS && n < 32) {
			burst[n] = make_pkt(mp, sent + n);
			if (burst[n] == NULL)
				break;
			n++;
		}
		k = tide_eth_tx(tx, 0, burst, n);
		if (k < n)
			rte_pktmbuf_free_bulk(burst + k, n - k);
		sent += k;
		n = tide_eth_rx(rx, 0, burst, 32);
		for (uint16_t i = 0; i < n; i++) {
			if (check_pkt(burst[i], got) != 0)
				bad++;
			got++;
		}
		rte_pktmbuf_free_bulk(burst, n);
		spins++;
	}
	CU_ASSERT_EQUAL(sent, NPKTS);
	CU_ASSERT_EQUAL(got, NPKTS);
	CU_ASSERT_EQUAL(bad, 0);
}

static void
test_ring_pair_carries_packets_both_ways(void)
{
	struct tide_eth_port *a = NULL, *b = NULL;
	struct tide_eth_port_stats sa, sb;
	struct tide_eth_port_opts o = {.nb_rxd = 512, .nb_txd = 512};

	TIDE_UT_OK(tide_eth_ring_pair("it_a", "it_b", &o, &a, &b));
	if (a == NULL || b == NULL)
		return;
	CU_ASSERT_TRUE(tide_eth_port_link_up(a));
	CU_ASSERT_TRUE(tide_eth_port_link_up(b));
	CU_ASSERT_NOT_EQUAL(tide_eth_port_id(a), tide_eth_port_id(b));
	pump(a, b);
	pump(b, a);
	TIDE_UT_OK(tide_eth_port_stats(a, &sa));
	TIDE_UT_OK(tide_eth_port_stats(b, &sb));
	CU_ASSERT_EQUAL(sa.opackets, NPKTS);
	CU_ASSERT_EQUAL(sb.ipackets, NPKTS);
	CU_ASSERT_EQUAL(sb.opackets, NPKTS);
	CU_ASSERT_EQUAL(sa.ipackets, NPKTS);
	/* Every mbuf went back to its pool: a leak here would starve a long run. */
	CU_ASSERT_EQUAL(rte_mempool_in_use_count(tide_eth_port_pool(a)), 0);
	CU_ASSERT_EQUAL(rte_mempool_in_use_count(tide_eth_port_pool(b)), 0);
	tide_eth_port_close(a);
	tide_eth_port_close(b);
}

static void
test_vdev_loopback_port(void)
{
	struct tide_eth_port *p = NULL;

	TIDE_UT_OK(tide_eth_port_open("net_ring0", NULL, &p));
	if (p == NULL)
		return;
	pump(p, p);
	tide_eth_port_close(p);
}

static void
test_open_unknown_port_fails(void)
{
	struct tide_eth_port *p = NULL;

	CU_ASSERT_EQUAL(tide_eth_port_open("net_nosuch7", NULL, &p), -ENODEV);
	CU_ASSERT_PTR_NULL(p);
}

static void
test_second_eal_init_refused(void)
{
	struct tide_eal_opts o = {0};

	CU_ASSERT_EQUAL(tide_eal_init(&o, NULL), -EALREADY);
}

static void
test_hugepage_policy_rejects_bad_page_size(void)
{
	char why[160];

	CU_ASSERT_EQUAL(tide_eal_hugepages_usable(1u << 20, 4096, false, why, sizeof(why)),
			-EINVAL);
	/* A request no machine here can satisfy must be refused with a reason. */
	CU_ASSERT_EQUAL(tide_eal_hugepages_usable(1ull << 50, 2u << 20, false, why, sizeof(why)),
			0);
	CU_ASSERT_NOT_EQUAL(why[0], '\0');
}

/* TIDE_CSUM on net_ring ports: elision allowed, no offloads (auto is software). */
static void
test_ring_checksum_modes(void)
{
	struct tide_eth_port *ports[2] = {NULL, NULL};
	struct tide_eth_csum_plan plan = {0};
	struct tide_eth_port_caps caps;

	TIDE_UT_OK(tide_eth_ring_pair("cs_a", "cs_b", NULL, &ports[0], &ports[1]));
	if (ports[0] == NULL || ports[1] == NULL)
		return;
	CU_ASSERT_STRING_EQUAL(tide_eth_port_name(ports[0]), "cs_a");
	CU_ASSERT_STRING_EQUAL(tide_eth_port_name(ports[1]), "cs_b");
	for (int i = 0; i < 2; i++) {
		tide_eth_port_caps(ports[i], &caps);
		CU_ASSERT_STRING_EQUAL(caps.driver, "net_ring");
		TIDE_UT_OK(tide_eth_port_csum(ports[i], TIDE_ETH_CSUM_ELIDE, &plan));
		CU_ASSERT_TRUE(plan.elide);
		TIDE_UT_OK(tide_eth_port_csum(ports[i], TIDE_ETH_CSUM_AUTO, &plan));
		CU_ASSERT(!plan.elide && !plan.tx_ip && !plan.tx_tcp && !plan.rx_ip &&
			  !plan.rx_tcp);
		/* Refused, and logged naming the port, the driver and every missing offload. */
		CU_ASSERT_EQUAL(tide_eth_port_csum(ports[i], TIDE_ETH_CSUM_OFFLOAD, &plan),
				-ENOTSUP);
	}
	tide_eth_port_close(ports[0]);
	tide_eth_port_close(ports[1]);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("pmd_eth", suite_init, suite_fini);

	CU_add_test(s, "ring_checksum_modes", test_ring_checksum_modes);

	CU_add_test(s, "ring_pair_carries_packets_both_ways",
		    test_ring_pair_carries_packets_both_ways);
	CU_add_test(s, "vdev_loopback_port", test_vdev_loopback_port);
	CU_add_test(s, "open_unknown_port_fails", test_open_unknown_port_fails);
	CU_add_test(s, "second_eal_init_refused", test_second_eal_init_refused);
	CU_add_test(s, "eal_keeps_caller_affinity", test_eal_keeps_caller_affinity);
	CU_add_test(s, "hugepage_policy_rejects_bad_page_size",
		    test_hugepage_policy_rejects_bad_page_size);
}

TIDE_UT_MAIN(register_tests)
