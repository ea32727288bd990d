/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP output: segment building (options, window, checksum), the sender
 * loop that fills the congestion and receive windows (tcp_write_xmit), and
 * the control segments (ACK, RST, challenge ACK, probes, SYN, SYN-ACK).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "net_internal.h"

#define TCPOLEN_TS_ALIGNED 12

static uint32_t
tcp_tsval(uint64_t now)
{
	/* 1 ms ticks (RFC 7323 allows 1 ms..1 s): PAWS stays valid for 24 days of idling. */
	return (uint32_t)(now / NS_PER_MS);
}

/* Window field for the next segment; never moves the advertised right edge left. */
static uint16_t
tcp_select_window(struct tide_net_conn *c, bool syn)
{
	uint32_t wnd = tcp_rcv_wnd(c);
	uint8_t ws = syn ? 0 : c->rcv_wscale;

	if (!syn && after(c->rcv_adv, c->rcv_nxt)) {
		uint32_t cur = c->rcv_adv - c->rcv_nxt;
		uint32_t scaled = wnd >> ws << ws;

		if (scaled < cur) {
			/* Linux tcp_select_window: round the old window up, never shrink it. */
			wnd = (cur + (1u << ws) - 1) >> ws << ws;
		}
	}
	wnd >>= ws;
	if (wnd > 65535) {
		wnd = 65535;
	}
	if (!syn) {
		c->rcv_adv = c->rcv_nxt + (wnd << ws);
	}
	return (uint16_t)wnd;
}

static uint8_t
tcp_build_options(const struct tide_net_conn *c, uint8_t flags, uint8_t *p, uint64_t now)
{
	uint8_t n = 0;
	const struct tide_net_stack *s = c->stack;

	if (flags & TCPHDR_SYN) {
		uint16_t mss = (uint16_t)(s->o.mtu - IP_HLEN - TCP_HLEN);

		p[n++] = TCPOPT_MSS;
		p[n++] = 4;
		p[n++] = (uint8_t)(mss >> 8);
		p[n++] = (uint8_t)mss;
		if (c->ts_ok) {
			if (c->sack_ok) {
				p[n++] = TCPOPT_SACK_PERM;
				p[n++] = 2;
			} else {
				p[n++] = TCPOPT_NOP;
				p[n++] = TCPOPT_NOP;
			}
		} else if (c->sack_ok) {
			p[n++] = TCPOPT_NOP;
			p[n++] = TCPOPT_NOP;
			p[n++] = TCPOPT_SACK_PERM;
			p[n++] = 2;
		}
	} else if (c->ts_ok) {
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_NOP;
	}
	if (c->ts_ok) {
		uint32_t v = htonl(tcp_tsval(now));
		uint32_t e =
			htonl((flags & TCPHDR_SYN) && !(flags & TCPHDR_ACK) ? 0 : c->ts_recent);

		p[n++] = TCPOPT_TIMESTAMP;
		p[n++] = 10;
		memcpy(p + n, &v, 4);
		memcpy(p + n + 4, &e, 4);
		n += 8;
	}
	if ((flags & TCPHDR_SYN) && c->ws_ok) {
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_WINDOW;
		p[n++] = 3;
		p[n++] = c->rcv_wscale;
	}
	return n;
}

int
tcp_transmit(struct tide_net_conn *c, uint32_t seq, uint32_t len, uint8_t flags, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	struct tide_net_buf b;
	struct net_tcp_hdr *th;
	uint8_t optlen;
	uint16_t tlen;

	if (net_txbuf_get(s, &b) != 0) {
		return -ENOBUFS;
	}
	th = (struct net_tcp_hdr *)(b.data + NET_HDRS_LEN);
	optlen = tcp_build_options(c, flags, (uint8_t *)(th + 1), now);
	th->sport = htons(c->lport);
	th->dport = htons(c->rport);
	th->seq = htonl(seq);
	th->ack = (flags & TCPHDR_ACK) ? htonl(c->rcv_nxt) : 0;
	th->doff = (uint8_t)(((TCP_HLEN + optlen) / 4) << 4);
	th->flags = flags;
	th->window = htons(tcp_select_window(c, flags & TCPHDR_SYN));
	th->csum = 0;
	th->urg = 0;
	if (len > 0) {
		tcp_ring_read(&c->sbuf, seq - c->sbuf_seq, (uint8_t *)(th + 1) + optlen, len);
	}
	tlen = (uint16_t)(TCP_HLEN + optlen + len);
	th->csum = net_cksum_fold(net_cksum_add(
		net_cksum_pseudo(htonl(c->lip), htonl(c->rip), IPPROTO_TCP_, tlen), th, tlen));
	s->st.tcp_tx_segs++;
	if (flags & TCPHDR_RST) {
		s->st.tcp_rst_tx++;
	}
	if (flags & TCPHDR_ACK) {
		c->ack_now = false;
		c->delack_segs = 0;
		c->t_delack = 0;
	}
	return net_ipv4_output(s, &b, c->rip, IPPROTO_TCP_, tlen, now);
}

uint32_t
tcp_unsent(const struct tide_net_conn *c)
{
	uint32_t end = c->sbuf_seq + c->sbuf.len;

	return before(c->snd_nxt, end) ? end - c->snd_nxt : 0;
}

void
tcp_write_xmit(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	uint32_t data_end = c->sbuf_seq + c->sbuf.len;

	if (!((1u << c->state) & TCPF_CAN_SEND)) {
		return;
	}
	for (;;) {
		uint32_t inflight = c->snd_nxt - c->snd_una;
		uint32_t wnd = c->cwnd < c->snd_wnd ? c->cwnd : c->snd_wnd;
		uint32_t seq = c->snd_nxt, len;
		uint8_t flags = TCPHDR_ACK;

		if (before(seq, data_end)) {
			if (inflight >= wnd) {
				break;
			}
			len = data_end - seq;
			if (len > c->mss) {
				len = c->mss;
			}
			if (len > wnd - inflight) {
				len = wnd - inflight;
			}
			/* RFC 9293 3.7.4 (Nagle), off by default. */
			if (s->o.tcp_nagle && len < c->mss && c->snd_una != c->snd_max &&
			    !c->fin_queued) {
				break;
			}
			if (c->fin_queued && seq + len == data_end) {
				flags |= TCPHDR_FIN;
			}
			flags |= TCPHDR_PSH;
		} else if (c->fin_queued && seq == data_end) {
			len = 0;
			flags |= TCPHDR_FIN;
		} else {
			break;
		}
		if (tcp_transmit(c, seq, len, flags, now) != 0) {
			break;
		}
		if (before(seq, c->snd_max)) {
			s->st.tcp_retrans_segs++;
		} else if (!c->rtt_timing) {
			c->rtt_timing = true;
			c->rtt_seq = seq;
			c->rtt_start = now;
		}
		c->snd_nxt = seq + len + ((flags & TCPHDR_FIN) ? 1 : 0);
		if (after(c->snd_nxt, c->snd_max)) {
			c->snd_max = c->snd_nxt;
		}
		if (c->t_rto == 0) {
			tcp_rearm_rto(c, now);
		}
		if (flags & TCPHDR_FIN) {
			break;
		}
	}
	/* Data waits, the peer's window is shut and nothing is in flight: probe (RFC 9293 3.8.6.1).
	 */
	if (c->snd_wnd == 0 && c->snd_nxt == c->snd_una && before(c->snd_nxt, data_end) &&
	    c->t_persist == 0) {
		c->t_rto = 0;
		tcp_arm(c, &c->t_persist, now + c->rto);
	}
}

void
tcp_send_ack(struct tide_net_conn *c, uint64_t now)
{
	if (c->state == TCP_SYN_RECV) {
		tcp_send_synack(c, now); /* a duplicate SYN: repeat the SYN-ACK */
		return;
	}
	if ((1u << c->state) & (TCPF_SYN_SENT | TCPF_CLOSE | TCPF_LISTEN)) {
		return;
	}
	/*
	 * snd_max, not snd_nxt: after an RTO rewinds snd_nxt, an ACK carrying an old
	 * sequence would fail the peer's acceptability test and be dropped with
	 * the acknowledgment it carries (BSD tcp_output does the same).
	 */
	tcp_transmit(c, c->snd_max, 0, TCPHDR_ACK, now);
}

void
tcp_window_update(struct tide_net_conn *c, uint64_t now)
{
	uint32_t wnd = tcp_rcv_wnd(c);
	uint32_t cur = after(c->rcv_adv, c->rcv_nxt) ? c->rcv_adv - c->rcv_nxt : 0;
	uint32_t thresh = c->rbuf.cap / 2 < 2u * c->mss ? c->rbuf.cap / 2 : 2u * c->mss;

	/* Receiver SWS avoidance (RFC 9293 3.8.6.2.2): only announce worthwhile openings. */
	if (wnd >= cur + thresh) {
		tcp_send_ack(c, now);
	}
}

void
tcp_send_challenge_ack(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;

	if (now - s->chack_second >= 1000 * NS_PER_MS) {
		s->chack_second = now;
		s->chack_count = 0;
	}
	if (s->chack_count >= s->o.tcp_challenge_ack_limit) {
		s->st.tcp_challenge_limited++;
		return;
	}
	s->chack_count++;
	s->st.tcp_challenge_acks++;
	tcp_transmit(c, c->snd_max, 0, TCPHDR_ACK, now);
}

void
tcp_send_probe(struct tide_net_conn *c, uint64_t now)
{
	/* An old sequence number is unacceptable to the peer, which must answer with an ACK. */
	tcp_transmit(c, c->snd_una - 1, 0, TCPHDR_ACK, now);
}

void
tcp_send_active_reset(struct tide_net_conn *c, uint64_t now)
{
	tcp_transmit(c, c->snd_max, 0, TCPHDR_RST | TCPHDR_ACK, now);
}

void
tcp_send_syn(struct tide_net_conn *c, uint64_t now)
{
	tcp_transmit(c, c->iss, 0, TCPHDR_SYN, now);
	if (c->snd_max == c->iss) {
		c->rtt_timing = true;
		c->rtt_seq = c->iss;
		c->rtt_start = now;
	}
	c->snd_nxt = c->iss + 1;
	c->snd_max = c->iss + 1;
	tcp_rearm_rto(c, now);
}

void
tcp_send_synack(struct tide_net_conn *c, uint64_t now)
{
	tcp_transmit(c, c->iss, 0, TCPHDR_SYN | TCPHDR_ACK, now);
	if (c->snd_max == c->iss) {
		c->rtt_timing = true;
		c->rtt_seq = c->iss;
		c->rtt_start = now;
	}
	c->snd_nxt = c->iss + 1;
	c->snd_max = c->iss + 1;
	tcp_rearm_rto(c, now);
}

void
tcp_send_reset(struct tide_net_stack *s, const struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_buf b;
	struct net_tcp_hdr *th;

	if (seg->flags & TCPHDR_RST) {
		return;
	}
	if (net_txbuf_get(s, &b) != 0) {
		return;
	}
	th = (struct net_tcp_hdr *)(b.data + NET_HDRS_LEN);
	memset(th, 0, sizeof(*th));
	th->sport = htons(seg->dport);
	th->dport = htons(seg->sport);
	/* RFC 9293 3.10.7.1: take the sequence from the ACK, else acknowledge the segment. */
	if (seg->flags & TCPHDR_ACK) {
		th->seq = htonl(seg->ack);
		th->flags = TCPHDR_RST;
	} else {
		th->ack = htonl(seg->seq + seg->seg_len);
		th->flags = TCPHDR_RST | TCPHDR_ACK;
	}
	th->doff = (TCP_HLEN / 4) << 4;
	th->csum = net_cksum_fold(net_cksum_add(
		net_cksum_pseudo(htonl(s->o.ip), htonl(seg->saddr), IPPROTO_TCP_, TCP_HLEN), th,
		TCP_HLEN));
	s->st.tcp_tx_segs++;
	s->st.tcp_rst_tx++;
	net_ipv4_output(s, &b, seg->saddr, IPPROTO_TCP_, TCP_HLEN, now);
}
