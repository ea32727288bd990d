/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ethernet: accept frames for our MAC or broadcast, dispatch IPv4 and ARP,
 * count and drop the rest (IPv6 neighbour discovery arrives on veth links).
 */
#include <arpa/inet.h>
#include <string.h>

#include "net_internal.h"

static const uint8_t eth_bcast[ETH_ALEN] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

void
net_eth_input(struct tide_net_stack *s, const uint8_t *data, uint16_t len, uint16_t flags,
	      uint64_t now)
{
	const struct net_eth_hdr *eh = (const struct net_eth_hdr *)data;
	uint16_t type;

	if (len < ETH_HLEN) {
		s->st.eth_rx_short++;
		return;
	}
	type = ntohs(eh->type);
	if (type == ETH_P_IPV6) {
		s->st.eth_rx_ipv6++;
		return;
	}
	if (memcmp(eh->dst, s->o.mac, ETH_ALEN) != 0 && memcmp(eh->dst, eth_bcast, ETH_ALEN) != 0) {
		s->st.eth_rx_not_ours++;
		return;
	}
	switch (type) {
	case ETH_P_IP:
		net_ipv4_input(s, data + ETH_HLEN, (uint16_t)(len - ETH_HLEN), flags, now);
		break;
	case ETH_P_ARP:
		net_arp_input(s, data + ETH_HLEN, (uint16_t)(len - ETH_HLEN), now);
		break;
	default:
		s->st.eth_rx_unknown_type++;
		break;
	}
}

void
net_eth_output(struct tide_net_stack *s, struct tide_net_buf *b, const uint8_t *dst, uint16_t type)
{
	struct net_eth_hdr *eh = (struct net_eth_hdr *)b->data;

	memcpy(eh->dst, dst, ETH_ALEN);
	memcpy(eh->src, s->o.mac, ETH_ALEN);
	eh->type = htons(type);
	net_tx_enqueue(s, b);
}
