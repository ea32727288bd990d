/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IPv4 for a host: validate, deliver ICMP and TCP addressed to us, drop the
 * rest with counters. No fragmentation: DF is set on every datagram we send
 * and received fragments are counted and dropped. Options are skipped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "net_internal.h"
#include "tide_log.h"

void
net_ipv4_input(struct tide_net_stack *s, const uint8_t *data, uint16_t len, uint16_t flags,
	       uint64_t now)
{
	const struct net_ipv4_hdr *ip = (const struct net_ipv4_hdr *)data;
	uint16_t hlen, tot;

	s->st.ip_rx++;
	if (len < IP_HLEN) {
		s->st.ip_rx_bad_len++;
		return;
	}
	hlen = (uint16_t)((ip->ver_ihl & 0xf) * 4);
	if ((ip->ver_ihl >> 4) != 4 || hlen < IP_HLEN) {
		s->st.ip_rx_bad_hdr++;
		return;
	}
	tot = ntohs(ip->tot_len);
	/* Ethernet pads short frames, so len may exceed tot_len but never the reverse. */
	if (hlen > len || tot < hlen || tot > len) {
		s->st.ip_rx_bad_len++;
		return;
	}
	if (!(flags & TIDE_NET_RX_F_IP_CSUM_GOOD) && net_cksum(data, hlen) != 0) {
		s->st.ip_rx_bad_csum++;
		if (ip->csum == 0) {
			/* What a peer eliding checksums sends (tide_net_opts.cksum_elide). */
			TIDE_LOG_RATELIMIT(
				WARN, 60,
				"IPv4 header checksum 0 from %u.%u.%u.%u: the peer "
				"probably elides checksums (TIDE_CSUM=elide); both ends "
				"of a link must agree",
				((const uint8_t *)&ip->saddr)[0], ((const uint8_t *)&ip->saddr)[1],
				((const uint8_t *)&ip->saddr)[2], ((const uint8_t *)&ip->saddr)[3]);
		}
		return;
	}
	if (ntohs(ip->frag_off) & (IP_MF | IP_OFFMASK)) {
		s->st.ip_rx_frags++;
		return;
	}
	if (ntohl(ip->daddr) != s->o.ip) {
		s->st.ip_rx_not_ours++;
		return;
	}
	switch (ip->proto) {
	case IPPROTO_TCP_:
		tcp_v4_rcv(s, ip, data + hlen, (uint16_t)(tot - hlen), flags, now);
		break;
	case IPPROTO_ICMP_:
		net_icmp_input(s, ip, data + hlen, (uint16_t)(tot - hlen), flags, now);
		break;
	default:
		s->st.ip_rx_bad_proto++;
		break;
	}
}

uint32_t
net_ipv4_nexthop(const struct tide_net_stack *s, uint32_t dst)
{
	if ((dst & s->o.netmask) == (s->o.ip & s->o.netmask)) {
		return dst;
	}
	return s->o.gateway;
}

int
net_ipv4_output(struct tide_net_stack *s, struct tide_net_buf *b, uint32_t dst, uint8_t proto,
		uint16_t l4len, uint64_t now)
{
	struct net_ipv4_hdr *ip = (struct net_ipv4_hdr *)(b->data + ETH_HLEN);
	uint32_t nh = net_ipv4_nexthop(s, dst);

	if (nh == 0) {
		s->st.arp_unreachable++;
		net_txbuf_put(s, b);
		return -ENETUNREACH;
	}
	ip->ver_ihl = 0x45;
	ip->tos = 0;
	ip->tot_len = htons((uint16_t)(IP_HLEN + l4len));
	/* RFC 6864: the ID of an atomic (DF) datagram carries no meaning; a counter helps captures.
	 */
	ip->id = htons(s->ip_id++);
	ip->frag_off = htons(IP_DF);
	ip->ttl = IP_TTL_DEFAULT;
	ip->proto = proto;
	ip->csum = 0;
	ip->saddr = htonl(s->o.ip);
	ip->daddr = htonl(dst);
	if (s->o.cksum_elide) {
		/* ip->csum stays 0: nothing computes it, and the peer does not check. */
	} else if (s->o.tx_offloads & TIDE_NET_OFFLOAD_IPV4_CKSUM) {
		b->flags |= TIDE_NET_TX_F_IP_CKSUM;
	} else {
		ip->csum = net_cksum(ip, IP_HLEN);
	}
	/* Attached payload (b->ext_len) follows the bytes at b->data. */
	b->len = (uint16_t)(NET_HDRS_LEN + l4len - b->ext_len);
	s->st.ip_tx++;
	net_arp_output(s, b, nh, now);
	return 0;
}
