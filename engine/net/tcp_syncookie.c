/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SYN cookies (RFC 4987 3.6). A listener whose backlog is full (or that
 * cannot allocate a connection) still answers every SYN: the SYN-ACK's ISS
 * is a keyed hash of the handshake, so nothing is kept, and the ACK that
 * comes back (ack - 1 = the cookie) is enough to build the connection. A
 * flood of SYNs then costs one SYN-ACK each, and a legitimate client
 * connects at once instead of waiting for a half-open slot to time out.
 *
 * Cookie layout (32 bits, the ISS):
 *   bits 31..3  F(4-tuple, peer ISN, time slot), the top 29 bits of SipHash-2-4
 *               under the stack's RFC 6528 secret;
 *   bits  2..0  index of the peer's MSS in tcp_cookie_mss[].
 * The time slot is now / 64 s; an ACK is checked against the current and the
 * previous slot, so a cookie is honoured for 64 to 128 s. A forged ACK has
 * a 2 in 2^29 chance per try.
 *
 * Only the MSS fits in the ISS. When the peer offers timestamps, our
 * SYN-ACK's TSval carries the rest in its low bits and the peer echoes it in
 * the ACK's TSecr (as Linux does):
 *   bits 3..0  the peer's window scale, 15 = no window scaling;
 *   bit  4     SACK permitted.
 * Without timestamps, the SYN-ACK offers neither window scaling nor SACK, so
 * the connection has neither (Linux does the same).
 */
#include <errno.h>

#include "net_internal.h"

/*
 * Peer MSS values a cookie can name, ascending: IPv4's minimum (RFC 9293
 * 3.7.1), IPv6's minimum MTU less headers, common tunnel and PPPoE paths,
 * Ethernet, a 4 KiB MTU, and 9000-byte jumbo frames with and without
 * tunnel headers. A peer gets the largest entry not above what it offered.
 */
static const uint16_t tcp_cookie_mss[8] = {536, 1220, 1360, 1440, 1460, 4036, 8940, 8960};

#define COOKIE_MSS_MASK 0x7u
#define COOKIE_TS_MASK  0x1fu /* TSval bits holding wscale and SACK */
#define COOKIE_TS_SACK  0x10u
#define COOKIE_WS_NONE  0xfu

/* F() of the handshake in time slot t; two SipHash calls chain the 160 input bits. */
static uint32_t
cookie_hash(const struct tide_net_stack *s, const struct tcp_seg *seg, uint32_t peer_isn,
	    uint64_t t)
{
	/* seg is the peer's segment: daddr/dport are ours. */
	uint64_t h = tcp_siphash_2u64(s->isn_key, (uint64_t)seg->daddr << 32 | seg->saddr,
				      (uint64_t)seg->dport << 48 | (uint64_t)seg->sport << 32 |
					      peer_isn);

	/* "SYNC" in the top word keeps these inputs apart from the ISN's and the TSval's. */
	return (uint32_t)tcp_siphash_2u64(s->isn_key, h, 0x53594e43ull << 32 | (uint32_t)t);
}

uint32_t
tcp_syncookie_make(const struct tide_net_stack *s, const struct tcp_seg *syn, uint64_t now,
		   struct tcp_cookie_opts *ck)
{
	const struct tcp_opts *o = &syn->opts;
	uint16_t peer = o->has_mss && o->mss >= 64 ? o->mss : 536;
	uint32_t idx = 7;

	/* Largest entry not above the peer's; a peer below 536 gets 536 as if it
	 * had sent none (every host must take 576-byte datagrams). */
	while (idx > 0 && tcp_cookie_mss[idx] > peer) {
		idx--;
	}
	*ck = (struct tcp_cookie_opts){.mss = tcp_cookie_mss[idx]};
	if (s->o.tcp_timestamps && o->has_ts) {
		uint32_t clock = (uint32_t)(now / NS_PER_MS) +
				 tcp_ts_offset(s, syn->daddr, syn->dport, syn->saddr, syn->sport);
		uint32_t bits;

		ck->ts = true;
		ck->ws = s->o.tcp_wscale && o->has_wscale;
		ck->wscale = ck->ws ? o->wscale : 0;
		ck->sack = s->o.tcp_sack && o->sack_ok;
		ck->tsecr = o->tsval;
		bits = (ck->ws ? ck->wscale : COOKIE_WS_NONE) | (ck->sack ? COOKIE_TS_SACK : 0);
		/* Never ahead of the clock: the connection's later TSvals must not go
		 * back from this one (PAWS at the peer). */
		ck->tsval = (clock & ~COOKIE_TS_MASK) | bits;
		if (after(ck->tsval, clock)) {
			ck->tsval -= COOKIE_TS_MASK + 1;
		}
	}
	return (cookie_hash(s, syn, syn->seq, now / TCP_SYNCOOKIE_SLOT_NS) & ~COOKIE_MSS_MASK) |
	       idx;
}

int
tcp_syncookie_check(const struct tide_net_stack *s, const struct tcp_seg *ack, uint64_t now,
		    struct tcp_cookie_opts *ck)
{
	uint32_t cookie = ack->ack - 1, peer_isn = ack->seq - 1;
	uint64_t t = now / TCP_SYNCOOKIE_SLOT_NS;
	bool ok = false;

	/* This slot and the previous one: at most two hashes per ACK checked. */
	for (uint64_t back = 0; back < 2 && back <= t && !ok; back++) {
		ok = ((cookie_hash(s, ack, peer_isn, t - back) ^ cookie) & ~COOKIE_MSS_MASK) == 0;
	}
	if (!ok) {
		return -EINVAL;
	}
	*ck = (struct tcp_cookie_opts){.mss = tcp_cookie_mss[cookie & COOKIE_MSS_MASK]};
	if (s->o.tcp_timestamps && ack->opts.has_ts) {
		uint32_t bits = ack->opts.tsecr & COOKIE_TS_MASK;
		uint32_t ws = bits & COOKIE_WS_NONE;

		ck->ts = true;
		ck->tsval = ack->opts.tsecr;
		ck->tsecr = ack->opts.tsval;
		/* Only what our SYN-ACK may have offered: a shift above 14 means none. */
		ck->ws = s->o.tcp_wscale && ws <= 14;
		ck->wscale = ck->ws ? (uint8_t)ws : 0;
		ck->sack = s->o.tcp_sack && (bits & COOKIE_TS_SACK) != 0;
	}
	return 0;
}
