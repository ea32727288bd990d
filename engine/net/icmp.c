/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ICMP: answer echo requests (so `ping` works); count everything else.
 */
#include <arpa/inet.h>
#include <string.h>

#include "net_internal.h"

#define ICMP_ECHOREPLY 0
#define ICMP_ECHO      8

void
net_icmp_input(struct tide_net_stack *s, const struct net_ipv4_hdr *ip, const uint8_t *data,
	       uint16_t len, uint16_t flags, uint64_t now)
{
	const struct net_icmp_hdr *ih = (const struct net_icmp_hdr *)data;
	struct net_icmp_hdr *oh;
	struct tide_net_buf b;

	s->st.icmp_rx++;
	if (len < sizeof(*ih) ||
	    (!(flags & TIDE_NET_RX_F_L4_CSUM_GOOD) && net_cksum(data, len) != 0)) {
		s->st.icmp_rx_bad++;
		return;
	}
	if (ih->type != ICMP_ECHO || ih->code != 0) {
		s->st.icmp_rx_other++;
		return;
	}
	s->st.icmp_rx_echo++;
	/* A reply is as long as the request, which fit our MTU on the way in. */
	if (len > s->o.mtu - IP_HLEN || net_txbuf_get(s, &b) != 0) {
		return;
	}
	oh = (struct net_icmp_hdr *)(b.data + NET_HDRS_LEN);
	memcpy(oh, data, len);
	oh->type = ICMP_ECHOREPLY;
	oh->code = 0;
	oh->csum = 0;
	if (!s->o.cksum_elide) {
		oh->csum = net_cksum(oh, len);
	}
	if (net_ipv4_output(s, &b, ntohl(ip->saddr), IPPROTO_ICMP_, len, now) == 0) {
		s->st.icmp_tx_echo_reply++;
	}
}
