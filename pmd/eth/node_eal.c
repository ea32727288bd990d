/* SPDX-License-Identifier: Apache-2.0 */
/* The node file's DPDK options as pmd/eth's option structs (tide_eth_node.h). */
#include <stdio.h>
#include <string.h>

#include "tide_eth_node.h"

void
tide_eth_node_eal_opts(const struct tide_nodeenv *ne, const char *prog, bool with_device,
		       struct tide_eal_opts *eo)
{
	memset(eo, 0, sizeof(*eo));
	eo->prog = prog;
	eo->file_prefix = ne->file_prefix;
	eo->huge = ne->hugepages == TIDE_NODEENV_HUGE_ON    ? TIDE_EAL_HUGE_ON
		   : ne->hugepages == TIDE_NODEENV_HUGE_OFF ? TIDE_EAL_HUGE_OFF
							    : TIDE_EAL_HUGE_AUTO;
	eo->mem_bytes = ne->hugepage_mem;
	eo->hugepage_size = ne->hugepage_size;
	eo->extra_args = ne->eal_args;
	if (!with_device || ne->dpdk_device[0] == '\0')
		return;
	if (strncmp(ne->dpdk_device, "net_", 4) == 0)
		eo->vdevs[0] = ne->dpdk_device;
	else
		eo->pci_allow = ne->dpdk_device;
	/* nodeenv allows a receive-only device only next to a vdev. */
	if (ne->dpdk_rx_device[0] != '\0')
		eo->vdevs[1] = ne->dpdk_rx_device;
}

void
tide_eth_node_port_opts(const struct tide_nodeenv *ne, struct tide_eth_port_opts *po, char *tx,
			char *rx, size_t len)
{
	memset(po, 0, sizeof(*po));
	snprintf(tx, len, "%.*s", (int)strcspn(ne->dpdk_device, ","), ne->dpdk_device);
	snprintf(rx, len, "%.*s", (int)strcspn(ne->dpdk_rx_device, ","), ne->dpdk_rx_device);
	po->rx_devname = rx[0] != '\0' ? rx : NULL;
	po->nb_rxd = (uint16_t)ne->rxd;
	po->nb_txd = (uint16_t)ne->txd;
	/* One frame per mbuf: frame + Ethernet header + the 128-byte headroom + slack. */
	if (ne->mtu > 1500)
		po->mbuf_dataroom = (uint16_t)(ne->mtu + 14 + 128 + 64);
}

const struct tide_eth_fault_opts *
tide_eth_node_fault_opts(const struct tide_nodeenv *ne, uint64_t seed_now,
			 struct tide_eth_fault_opts *fo)
{
	memset(fo, 0, sizeof(*fo));
	if (!ne->fault.enabled)
		return NULL;
	fo->drop = ne->fault.drop;
	fo->dup = ne->fault.dup;
	fo->reorder = ne->fault.reorder;
	fo->corrupt = ne->fault.corrupt;
	fo->delay_us = ne->fault.delay_us;
	fo->seed = ne->fault.seed != 0 ? ne->fault.seed : seed_now;
	fo->rx = ne->fault.dir != TIDE_NODEENV_FAULT_TX;
	fo->tx = ne->fault.dir != TIDE_NODEENV_FAULT_RX;
	return fo;
}

enum tide_eth_csum
tide_eth_node_csum(const struct tide_nodeenv *ne)
{
	switch (ne->csum) {
	case TIDE_NODEENV_CSUM_SW:
		return TIDE_ETH_CSUM_SW;
	case TIDE_NODEENV_CSUM_OFFLOAD:
		return TIDE_ETH_CSUM_OFFLOAD;
	case TIDE_NODEENV_CSUM_ELIDE:
		return TIDE_ETH_CSUM_ELIDE;
	case TIDE_NODEENV_CSUM_AUTO:
		break;
	}
	return TIDE_ETH_CSUM_AUTO;
}
