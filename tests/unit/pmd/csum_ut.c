/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of pmd/eth/csum.c: the checksum policy of a port (TIDE_CSUM),
 * decided from the driver name and the offloads the port was configured
 * with, with no EAL: auto takes what the port has, sw takes nothing,
 * offload insists on all four, elide only on net_memif and net_ring, and
 * every refusal names the driver and what is missing.
 */
#include <errno.h>
#include <string.h>

#include <rte_ethdev.h>

#include "tide_eth.h"
#include "tide_ut.h"

#define RX_ALL (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM)
#define TX_ALL (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM)

static void
test_names_and_parse(void)
{
	static const char *const names[] = {"auto", "sw", "offload", "elide"};
	enum tide_eth_csum m;

	for (int i = 0; i < 4; i++) {
		CU_ASSERT_STRING_EQUAL(tide_eth_csum_name((enum tide_eth_csum)i), names[i]);
		TIDE_UT_OK(tide_eth_csum_parse(names[i], &m));
		CU_ASSERT_EQUAL(m, (enum tide_eth_csum)i);
	}
	TIDE_UT_OK(tide_eth_csum_parse("ELIDE", &m));
	CU_ASSERT_EQUAL(m, TIDE_ETH_CSUM_ELIDE);
	m = TIDE_ETH_CSUM_SW;
	CU_ASSERT_EQUAL(tide_eth_csum_parse("none", &m), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_csum_parse("", &m), -EINVAL);
	CU_ASSERT_EQUAL(tide_eth_csum_parse(NULL, &m), -EINVAL);
	CU_ASSERT_EQUAL(m, TIDE_ETH_CSUM_SW);
	CU_ASSERT_STRING_EQUAL(tide_eth_csum_name((enum tide_eth_csum)9), "?");
}

static void
test_auto_takes_what_the_port_has(void)
{
	struct tide_eth_csum_plan p;
	char why[256];

	/* A NIC configured with everything. */
	TIDE_UT_OK(tide_eth_csum_decide(TIDE_ETH_CSUM_AUTO, "net_ice", RX_ALL, TX_ALL, &p, why,
					sizeof(why)));
	CU_ASSERT(p.rx_ip && p.rx_tcp && p.tx_ip && p.tx_tcp);
	CU_ASSERT_FALSE(p.elide);
	CU_ASSERT_EQUAL(p.mode, TIDE_ETH_CSUM_AUTO);
	/* Half of it: the rest in software. */
	TIDE_UT_OK(
		tide_eth_csum_decide(TIDE_ETH_CSUM_AUTO, "net_x",
				     RTE_ETH_RX_OFFLOAD_TCP_CKSUM | RTE_ETH_RX_OFFLOAD_VLAN_STRIP,
				     RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_MULTI_SEGS,
				     &p, why, sizeof(why)));
	CU_ASSERT(!p.rx_ip && p.rx_tcp && p.tx_ip && !p.tx_tcp);
	/* net_memif and net_af_packet have none: software, never elided on its own. */
	TIDE_UT_OK(tide_eth_csum_decide(TIDE_ETH_CSUM_AUTO, "net_memif", 0,
					RTE_ETH_TX_OFFLOAD_MULTI_SEGS, &p, NULL, 0));
	CU_ASSERT(!p.rx_ip && !p.rx_tcp && !p.tx_ip && !p.tx_tcp && !p.elide);
	TIDE_UT_OK(tide_eth_csum_decide(TIDE_ETH_CSUM_AUTO, "net_af_packet", 0, 0, &p, NULL, 0));
	CU_ASSERT(!p.rx_ip && !p.tx_tcp && !p.elide);
}

static void
test_sw_uses_nothing(void)
{
	struct tide_eth_csum_plan p;

	TIDE_UT_OK(tide_eth_csum_decide(TIDE_ETH_CSUM_SW, "net_ice", RX_ALL, TX_ALL, &p, NULL, 0));
	CU_ASSERT(!p.rx_ip && !p.rx_tcp && !p.tx_ip && !p.tx_tcp && !p.elide);
	CU_ASSERT_EQUAL(p.mode, TIDE_ETH_CSUM_SW);
}

static void
test_offload_insists(void)
{
	struct tide_eth_csum_plan p, keep = {.mode = TIDE_ETH_CSUM_SW, .rx_ip = true};
	char why[256];

	TIDE_UT_OK(tide_eth_csum_decide(TIDE_ETH_CSUM_OFFLOAD, "net_ice", RX_ALL, TX_ALL, &p, why,
					sizeof(why)));
	CU_ASSERT(p.rx_ip && p.rx_tcp && p.tx_ip && p.tx_tcp && !p.elide);
	CU_ASSERT_STRING_EQUAL(why, "");
	/* memif has none: every missing one is named, with the way out. */
	p = keep;
	CU_ASSERT_EQUAL(tide_eth_csum_decide(TIDE_ETH_CSUM_OFFLOAD, "net_memif", 0,
					     RTE_ETH_TX_OFFLOAD_MULTI_SEGS, &p, why, sizeof(why)),
			-ENOTSUP);
	CU_ASSERT_STRING_EQUAL(why, "TIDE_CSUM=offload, but this net_memif port lacks the "
				    "offload(s) rx-ipv4-checksum rx-tcp-checksum tx-ipv4-checksum "
				    "tx-tcp-checksum (TIDE_CSUM=auto falls back to software)");
	CU_ASSERT_EQUAL(memcmp(&p, &keep, sizeof(p)), 0); /* untouched on failure */
	/* One missing is enough, and only that one is named. */
	CU_ASSERT_EQUAL(tide_eth_csum_decide(TIDE_ETH_CSUM_OFFLOAD, "net_x", RX_ALL,
					     RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, &p, why, sizeof(why)),
			-ENOTSUP);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "lacks the offload(s) tx-tcp-checksum ("));
	/* The refusal does not need a message buffer. */
	CU_ASSERT_EQUAL(tide_eth_csum_decide(TIDE_ETH_CSUM_OFFLOAD, NULL, 0, 0, &p, NULL, 0),
			-ENOTSUP);
}

static void
test_elide_only_in_host_memory(void)
{
	static const char *const refused[] = {
		"net_af_packet", "net_af_xdp", "net_tap",  "net_virtio_user",
		"net_vhost",     "net_ice",    "net_mlx5", "net_null",
		"net_memif_x",   "net_rin",    ""};
	struct tide_eth_csum_plan p;
	char why[256];

	CU_ASSERT_TRUE(tide_eth_csum_elide_allowed("net_memif"));
	CU_ASSERT_TRUE(tide_eth_csum_elide_allowed("net_ring"));
	CU_ASSERT_FALSE(tide_eth_csum_elide_allowed(NULL));
	/* Allowed whatever the port's offloads: nothing is asked of the device. */
	TIDE_UT_OK(tide_eth_csum_decide(TIDE_ETH_CSUM_ELIDE, "net_memif", RX_ALL, TX_ALL, &p, why,
					sizeof(why)));
	CU_ASSERT(p.elide && !p.rx_ip && !p.rx_tcp && !p.tx_ip && !p.tx_tcp);
	CU_ASSERT_EQUAL(p.mode, TIDE_ETH_CSUM_ELIDE);
	TIDE_UT_OK(tide_eth_csum_decide(TIDE_ETH_CSUM_ELIDE, "net_ring", 0, 0, &p, NULL, 0));
	CU_ASSERT_TRUE(p.elide);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		char want[128];

		p.elide = false;
		CU_ASSERT_EQUAL(tide_eth_csum_decide(TIDE_ETH_CSUM_ELIDE, refused[i], RX_ALL,
						     TX_ALL, &p, why, sizeof(why)),
				-EPERM);
		CU_ASSERT_FALSE(p.elide);
		snprintf(want, sizeof(want),
			 "TIDE_CSUM=elide is refused on driver %s: ", refused[i]);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
	}
	CU_ASSERT_STRING_EQUAL(why,
			       "TIDE_CSUM=elide is refused on driver : only net_memif and "
			       "net_ring links stay in one host's memory (use TIDE_CSUM=auto)");
	CU_ASSERT_EQUAL(tide_eth_csum_decide(TIDE_ETH_CSUM_ELIDE, NULL, 0, 0, &p, why, sizeof(why)),
			-EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "refused on driver ?"));
	CU_ASSERT_EQUAL(
		tide_eth_csum_decide((enum tide_eth_csum)7, "net_ring", 0, 0, &p, why, sizeof(why)),
		-EINVAL);
	CU_ASSERT_STRING_EQUAL(why, "unknown checksum mode 7");
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("pmd_eth_csum", NULL, NULL);

	CU_add_test(s, "names_and_parse", test_names_and_parse);
	CU_add_test(s, "auto_takes_what_the_port_has", test_auto_takes_what_the_port_has);
	CU_add_test(s, "sw_uses_nothing", test_sw_uses_nothing);
	CU_add_test(s, "offload_insists", test_offload_insists);
	CU_add_test(s, "elide_only_in_host_memory", test_elide_only_in_host_memory);
}

TIDE_UT_MAIN(register_tests)
