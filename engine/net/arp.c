/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ARP (RFC 826) for one IPv4 address: answer requests for it, learn from
 * requests and replies addressed to us (and refresh entries we already
 * hold from any ARP), resolve next hops with a few queued frames each, and
 * expire entries. The cache is NET_ARP_SLOTS entries scanned linearly, with
 * the last hit checked first: a host talks to few next hops.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "net_internal.h"

#define ARPOP_REQUEST 1
#define ARPOP_REPLY   2

static const uint8_t arp_bcast[ETH_ALEN] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t arp_zero[ETH_ALEN];

static struct net_arp_entry *
arp_find(struct tide_net_stack *s, uint32_t ip)
{
	struct net_arp_entry *e = &s->arp[s->arp_hit];

	if (e->state != ARP_FREE && e->ip == ip) {
		return e;
	}
	for (unsigned i = 0; i < NET_ARP_SLOTS; i++) {
		e = &s->arp[i];
		if (e->state != ARP_FREE && e->ip == ip) {
			s->arp_hit = i;
			return e;
		}
	}
	return NULL;
}

static void
arp_drop_pending(struct tide_net_stack *s, struct net_arp_entry *e)
{
	for (uint8_t i = 0; i < e->npend; i++) {
		net_txbuf_put(s, &e->pend[i]);
	}
	s->st.arp_pending_dropped += e->npend;
	e->npend = 0;
}

static void
arp_free(struct tide_net_stack *s, struct net_arp_entry *e)
{
	arp_drop_pending(s, e);
	e->state = ARP_FREE;
}

/* A free slot, else the resolved entry closest to expiry, else the oldest resolution. */
static struct net_arp_entry *
arp_alloc(struct tide_net_stack *s, uint32_t ip)
{
	struct net_arp_entry *victim = NULL;

	for (unsigned i = 0; i < NET_ARP_SLOTS; i++) {
		struct net_arp_entry *e = &s->arp[i];

		if (e->state == ARP_FREE) {
			victim = e;
			break;
		}
		if (victim == NULL ||
		    (e->state == ARP_REACHABLE && victim->state != ARP_REACHABLE) ||
		    (e->state == victim->state && e->deadline < victim->deadline)) {
			victim = e;
		}
	}
	arp_free(s, victim);
	memset(victim, 0, sizeof(*victim));
	victim->ip = ip;
	return victim;
}

static void
arp_resolved(struct tide_net_stack *s, struct net_arp_entry *e, const uint8_t *mac, uint64_t now)
{
	memcpy(e->mac, mac, ETH_ALEN);
	e->state = ARP_REACHABLE;
	e->retries = 0;
	e->deadline = now + s->o.arp_timeout_ms * NS_PER_MS;
	net_timer_note(s, e->deadline);
	for (uint8_t i = 0; i < e->npend; i++) {
		net_eth_output(s, &e->pend[i], e->mac, ETH_P_IP);
	}
	e->npend = 0;
}

int
net_arp_send(struct tide_net_stack *s, uint16_t oper, const uint8_t *tha, uint32_t tpa,
	     const uint8_t *eth_dst)
{
	struct tide_net_buf b;
	struct net_arp_hdr *ah;

	if (net_txbuf_get(s, &b) != 0) {
		return -ENOBUFS;
	}
	ah = (struct net_arp_hdr *)(b.data + ETH_HLEN);
	ah->htype = htons(1);
	ah->ptype = htons(ETH_P_IP);
	ah->hlen = ETH_ALEN;
	ah->plen = 4;
	ah->oper = htons(oper);
	memcpy(ah->sha, s->o.mac, ETH_ALEN);
	ah->spa = htonl(s->o.ip);
	memcpy(ah->tha, tha, ETH_ALEN);
	ah->tpa = htonl(tpa);
	b.len = ETH_HLEN + sizeof(*ah);
	net_eth_output(s, &b, eth_dst, ETH_P_ARP);
	return 0;
}

static void
arp_request(struct tide_net_stack *s, struct net_arp_entry *e, uint64_t now)
{
	if (net_arp_send(s, ARPOP_REQUEST, arp_zero, e->ip, arp_bcast) == 0) {
		s->st.arp_tx_requests++;
	}
	e->retries++;
	e->deadline = now + s->o.arp_retry_ms * NS_PER_MS;
	net_timer_note(s, e->deadline);
}

void
net_arp_input(struct tide_net_stack *s, const uint8_t *data, uint16_t len, uint64_t now)
{
	const struct net_arp_hdr *ah = (const struct net_arp_hdr *)data;
	struct net_arp_entry *e;
	uint32_t spa, tpa;
	uint16_t oper;

	s->st.arp_rx++;
	if (len < sizeof(*ah)) {
		s->st.arp_rx_bad++;
		return;
	}
	oper = ntohs(ah->oper);
	if (ntohs(ah->htype) != 1 || ntohs(ah->ptype) != ETH_P_IP || ah->hlen != ETH_ALEN ||
	    ah->plen != 4 || (oper != ARPOP_REQUEST && oper != ARPOP_REPLY)) {
		s->st.arp_rx_bad++;
		return;
	}
	spa = ntohl(ah->spa);
	tpa = ntohl(ah->tpa);
	/* Never learn a multicast/broadcast hardware address or an unset sender (RFC 5227 probe).
	 */
	bool learnable = spa != 0 && !(ah->sha[0] & 1) && spa != s->o.ip;

	e = learnable ? arp_find(s, spa) : NULL;
	if (e != NULL) {
		arp_resolved(s, e, ah->sha, now);
	}
	if (tpa != s->o.ip) {
		s->st.arp_rx_not_ours++;
		return;
	}
	if (e == NULL && learnable) {
		arp_resolved(s, arp_alloc(s, spa), ah->sha, now);
	}
	if (oper == ARPOP_REQUEST) {
		s->st.arp_rx_requests++;
		if (net_arp_send(s, ARPOP_REPLY, ah->sha, spa, ah->sha) == 0) {
			s->st.arp_tx_replies++;
		}
	} else {
		s->st.arp_rx_replies++;
	}
}

void
net_arp_output(struct tide_net_stack *s, struct tide_net_buf *b, uint32_t nexthop, uint64_t now)
{
	struct net_arp_entry *e = arp_find(s, nexthop);

	if (e != NULL && e->state == ARP_REACHABLE) {
		if (e->deadline > now) {
			net_eth_output(s, b, e->mac, ETH_P_IP);
			return;
		}
		/* Expired but not yet reaped: resolve again, queueing meanwhile. */
		s->st.arp_expired++;
		e->state = ARP_INCOMPLETE;
		e->retries = 0;
		arp_request(s, e, now);
	} else if (e == NULL) {
		e = arp_alloc(s, nexthop);
		e->state = ARP_INCOMPLETE;
		arp_request(s, e, now);
	}
	if (e->npend == NET_ARP_PENDING) {
		/* Keep the newest frames: TCP retransmits whatever is dropped here. */
		net_txbuf_put(s, &e->pend[0]);
		memmove(&e->pend[0], &e->pend[1], sizeof(e->pend[0]) * (NET_ARP_PENDING - 1));
		e->npend--;
		s->st.arp_pending_dropped++;
	}
	e->pend[e->npend++] = *b;
}

int
net_arp_timers(struct tide_net_stack *s, uint64_t now)
{
	int fired = 0;

	for (unsigned i = 0; i < NET_ARP_SLOTS; i++) {
		struct net_arp_entry *e = &s->arp[i];

		if (e->state == ARP_FREE) {
			continue;
		}
		if (e->deadline > now) {
			net_timer_note(s, e->deadline);
			continue;
		}
		fired++;
		if (e->state == ARP_REACHABLE) {
			s->st.arp_expired++;
			arp_free(s, e);
		} else if (e->retries >= s->o.arp_retries) {
			arp_free(s, e);
		} else {
			arp_request(s, e, now);
		}
	}
	return fired;
}

void
net_arp_destroy(struct tide_net_stack *s)
{
	for (unsigned i = 0; i < NET_ARP_SLOTS; i++) {
		if (s->arp[i].state != ARP_FREE) {
			arp_free(s, &s->arp[i]);
		}
	}
}

int
tide_net_arp_lookup(const struct tide_net_stack *s, uint32_t ip, uint8_t mac[6])
{
	for (unsigned i = 0; i < NET_ARP_SLOTS; i++) {
		const struct net_arp_entry *e = &s->arp[i];

		if (e->state == ARP_REACHABLE && e->ip == ip) {
			memcpy(mac, e->mac, ETH_ALEN);
			return 0;
		}
	}
	return -ENOENT;
}
