/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checksum policy of a port (TIDE_CSUM in the node file): which checksums
 * the device computes and verifies, which the stack does in software, and
 * where checksums may be left out altogether.
 *
 * Elision is a property of the driver, not of a measurement: net_memif
 * (processes of one host sharing memory) and net_ring (one process) never
 * put a frame on a wire, so a flipped bit is no more likely than in any
 * other memory the processes share, the trust Linux loopback gives itself
 * when it skips checksums. Every other driver reaches a wire or the kernel
 * (net_af_packet, NICs, virtio-user, vhost, tap...), so elision is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <rte_ethdev.h>

#include "tide_eth.h"

static const char *const csum_names[] = {
	[TIDE_ETH_CSUM_AUTO] = "auto",
	[TIDE_ETH_CSUM_SW] = "sw",
	[TIDE_ETH_CSUM_OFFLOAD] = "offload",
	[TIDE_ETH_CSUM_ELIDE] = "elide",
};

#define NMODES (sizeof(csum_names) / sizeof(csum_names[0]))

const char *
tide_eth_csum_name(enum tide_eth_csum mode)
{
	return (unsigned)mode < NMODES ? csum_names[mode] : "?";
}

int
tide_eth_csum_parse(const char *s, enum tide_eth_csum *out)
{
	for (unsigned i = 0; s != NULL && i < NMODES; i++)
		if (strcasecmp(s, csum_names[i]) == 0) {
			*out = (enum tide_eth_csum)i;
			return 0;
		}
	return -EINVAL;
}

bool
tide_eth_csum_elide_allowed(const char *driver)
{
	return driver != NULL &&
	       (strcmp(driver, "net_memif") == 0 || strcmp(driver, "net_ring") == 0);
}

int
tide_eth_csum_decide(enum tide_eth_csum mode, const char *driver, uint64_t rx_offloads,
		     uint64_t tx_offloads, struct tide_eth_csum_plan *plan, char *why,
		     size_t whylen)
{
	struct tide_eth_csum_plan p = {.mode = mode};
	bool rx_ip = (rx_offloads & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0;
	bool rx_tcp = (rx_offloads & RTE_ETH_RX_OFFLOAD_TCP_CKSUM) != 0;
	bool tx_ip = (tx_offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
	bool tx_tcp = (tx_offloads & RTE_ETH_TX_OFFLOAD_TCP_CKSUM) != 0;

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	switch (mode) {
	case TIDE_ETH_CSUM_AUTO:
		p.rx_ip = rx_ip;
		p.rx_tcp = rx_tcp;
		p.tx_ip = tx_ip;
		p.tx_tcp = tx_tcp;
		break;
	case TIDE_ETH_CSUM_SW:
		break;
	case TIDE_ETH_CSUM_OFFLOAD:
		if (!(rx_ip && rx_tcp && tx_ip && tx_tcp)) {
			if (why != NULL)
				snprintf(why, whylen,
					 "TIDE_CSUM=offload, but this %s port lacks the "
					 "offload(s)%s%s%s%s (TIDE_CSUM=auto falls back to "
					 "software)",
					 driver != NULL ? driver : "?",
					 rx_ip ? "" : " rx-ipv4-checksum",
					 rx_tcp ? "" : " rx-tcp-checksum",
					 tx_ip ? "" : " tx-ipv4-checksum",
					 tx_tcp ? "" : " tx-tcp-checksum");
			return -ENOTSUP;
		}
		p.rx_ip = p.rx_tcp = p.tx_ip = p.tx_tcp = true;
		break;
	case TIDE_ETH_CSUM_ELIDE:
		if (!tide_eth_csum_elide_allowed(driver)) {
			if (why != NULL)
				snprintf(why, whylen,
					 "TIDE_CSUM=elide is refused on driver %s: only net_memif "
					 "and net_ring links stay in one host's memory (use "
					 "TIDE_CSUM=auto)",
					 driver != NULL ? driver : "?");
			return -EPERM;
		}
		p.elide = true;
		break;
	default:
		if (why != NULL)
			snprintf(why, whylen, "unknown checksum mode %d", (int)mode);
		return -EINVAL;
	}
	*plan = p;
	return 0;
}
