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

/*
 * SACK blocks (RFC 2018 3) after the other options, as many as fit beside len
 * bytes of payload: 3 with timestamps, 4 without.
 */
static uint8_t
tcp_build_sack(struct tide_net_conn *c, uint8_t n, uint32_t len, uint8_t *p)
{
	struct tcp_sack_blk blk[TCP_SACK_WIRE_MAX];
	uint32_t limit = c->mss + (c->ts_ok ? TCPOLEN_TS_ALIGNED : 0u), used = n + len, max;
	uint8_t k;

	if (limit < used + 4 + 8 || TCP_MAX_OPTLEN < n + 4 + 8) {
		return n;
	}
	max = (limit - used - 4) / 8;
	if (max > (TCP_MAX_OPTLEN - n - 4u) / 8) {
		max = (TCP_MAX_OPTLEN - n - 4u) / 8;
	}
	k = tcp_sack_rcv_blocks(c, blk, (uint8_t)max);
	if (k == 0) {
		return n;
	}
	p[n++] = TCPOPT_NOP;
	p[n++] = TCPOPT_NOP;
	p[n++] = TCPOPT_SACK;
	p[n++] = (uint8_t)(2 + 8 * k);
	for (uint8_t i = 0; i < k; i++) {
		uint32_t v[2] = {htonl(blk[i].start), htonl(blk[i].end)};

		memcpy(p + n, v, 8);
		n += 8;
	}
	c->stack->st.tcp_sack_blocks_tx += k;
	if (c->dsack_pending) {
		/* Reported once (RFC 2883 4); the D-SACK is always the first block. */
		c->dsack_pending = false;
		c->stack->st.tcp_dsack_tx++;
	}
	return n;
}

/* NOP NOP TIMESTAMP: 12 bytes. */
static uint8_t
tcp_put_ts(uint8_t *p, uint32_t tsval, uint32_t tsecr)
{
	uint32_t v = htonl(tsval), e = htonl(tsecr);

	p[0] = TCPOPT_NOP;
	p[1] = TCPOPT_NOP;
	p[2] = TCPOPT_TIMESTAMP;
	p[3] = 10;
	memcpy(p + 4, &v, 4);
	memcpy(p + 8, &e, 4);
	return TCPOLEN_TS_ALIGNED;
}

/*
 * The options of a SYN or SYN-ACK, 32-bit aligned (at most 24 bytes): MSS,
 * SACK-permitted where a timestamp's NOPs would go, timestamps, window scale.
 */
static uint8_t
tcp_syn_options(uint8_t *p, uint16_t mss, bool sack, bool ts, uint32_t tsval, uint32_t tsecr,
		bool ws, uint8_t wscale)
{
	uint8_t n = 0;

	p[n++] = TCPOPT_MSS;
	p[n++] = 4;
	p[n++] = (uint8_t)(mss >> 8);
	p[n++] = (uint8_t)mss;
	if (ts) {
		n += tcp_put_ts(p + n, tsval, tsecr);
		if (sack) {
			p[n - 12] = TCPOPT_SACK_PERM;
			p[n - 11] = 2;
		}
	} else if (sack) {
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_SACK_PERM;
		p[n++] = 2;
	}
	if (ws) {
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_WINDOW;
		p[n++] = 3;
		p[n++] = wscale;
	}
	return n;
}

static uint8_t
tcp_build_options(struct tide_net_conn *c, uint8_t flags, uint32_t len, uint8_t *p, uint64_t now)
{
	uint8_t n = 0;
	const struct tide_net_stack *s = c->stack;
	/* 1 ms ticks (RFC 7323 allows 1 ms..1 s): PAWS stays valid for 24 days. */
	uint32_t tsval = c->ts_ok ? tcp_tsval_at(c, now) : 0;

	if (flags & TCPHDR_SYN) {
		return tcp_syn_options(p, (uint16_t)(s->o.mtu - IP_HLEN - TCP_HLEN), c->sack_ok,
				       c->ts_ok, tsval, (flags & TCPHDR_ACK) ? c->ts_recent : 0,
				       c->ws_ok, c->rcv_wscale);
	}
	if (c->ts_ok) {
		n = tcp_put_ts(p, tsval, c->ts_recent);
	}
	if (c->sack_ok && (flags & (TCPHDR_SYN | TCPHDR_RST | TCPHDR_ACK)) == TCPHDR_ACK &&
	    (c->ooo != NULL || c->dsack_pending)) {
		n = tcp_build_sack(c, n, len, p);
	}
	return n;
}

/*
 * The device refused a later segment after taking an earlier one: move the
 * headers (and payload copied so far) to a fresh buffer and free the old
 * one, whose release callbacks drop its references.
 */
static int
tcp_rebuild_copy(struct tide_net_stack *s, struct tide_net_buf *b, uint16_t hlen)
{
	struct tide_net_buf nb;

	if (net_txbuf_get(s, &nb) != 0) {
		net_txbuf_put(s, b);
		return -ENOBUFS;
	}
	memcpy(nb.data, b->data, hlen);
	net_txbuf_put(s, b);
	*b = nb;
	return 0;
}

int
tcp_transmit(struct tide_net_conn *c, uint32_t seq, uint32_t len, uint8_t flags, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	/* Elided: the field stays 0 and no byte is summed. Offloaded: only the pseudo-header. */
	bool elide = s->o.cksum_elide;
	bool offload = !elide && (s->o.tx_offloads & TIDE_NET_OFFLOAD_TCP_CKSUM) != 0;
	bool sw = !elide && !offload;
	struct tide_net_buf b;
	struct net_tcp_hdr *th;
	uint32_t sum, copied = 0;
	uint8_t optlen;
	uint16_t tlen, hlen;

	if (net_txbuf_get(s, &b) != 0) {
		return -ENOBUFS;
	}
	th = (struct net_tcp_hdr *)(b.data + NET_HDRS_LEN);
	optlen = tcp_build_options(c, flags, len, (uint8_t *)(th + 1), now);
	th->sport = htons(c->lport);
	th->dport = htons(c->rport);
	th->seq = htonl(seq);
	th->ack = (flags & TCPHDR_ACK) ? htonl(c->rcv_nxt) : 0;
	th->doff = (uint8_t)(((TCP_HLEN + optlen) / 4) << 4);
	th->flags = flags;
	th->window = htons(tcp_select_window(c, flags & TCPHDR_SYN));
	th->csum = 0;
	th->urg = 0;
	hlen = (uint16_t)(TCP_HLEN + optlen);
	tlen = (uint16_t)(hlen + len);
	sum = elide ? 0 : net_cksum_pseudo(htonl(c->lip), htonl(c->rip), IPPROTO_TCP_, tlen);
	if (sw) {
		sum = net_cksum_add(sum, th, hlen);
	}
	if (len > 0) {
		uint32_t psum = sum;

		if (tcp_snd_fill(c, &b, (uint8_t *)th + hlen, seq, len, true, sw, &psum, &copied) !=
		    0) {
			/* Headers are final (their side effects are done): keep them. */
			if (tcp_rebuild_copy(s, &b, (uint16_t)(NET_HDRS_LEN + hlen)) != 0) {
				return -ENOBUFS;
			}
			th = (struct net_tcp_hdr *)(b.data + NET_HDRS_LEN);
			psum = sum;
			tcp_snd_fill(c, &b, (uint8_t *)th + hlen, seq, len, false, sw, &psum,
				     &copied);
		}
		sum = psum;
	}
	if (offload) {
		/* The device sums the segment; it expects the pseudo-header sum in place. */
		th->csum = (uint16_t)~net_cksum_fold(sum);
		b.flags |= TIDE_NET_TX_F_TCP_CKSUM;
	} else if (sw) {
		th->csum = net_cksum_fold(sum);
	}
	s->st.tcp_tx_segs++;
	if (flags & TCPHDR_RST) {
		s->st.tcp_rst_tx++;
	}
	if (flags & TCPHDR_ACK) {
		/* It carries the current ACK: nothing is owed, the delayed ACK is off. */
		c->rcv_acked = c->rcv_nxt;
		c->ack_now = false;
		c->sack_owed = false;
		c->sack_segs = 0;
		c->delack_segs = 0;
		c->t_delack = 0;
	}
	return net_ipv4_output(s, &b, c->rip, IPPROTO_TCP_, tlen, now);
}

uint32_t
tcp_unsent(const struct tide_net_conn *c)
{
	uint32_t end = tcp_snd_end(c);

	return before(c->snd_nxt, end) ? end - c->snd_nxt : 0;
}

/*
 * The device refused frames: the queue toward the peer is full, the local
 * equivalent of a congestion mark (Linux enters CWR when its qdisc pushes
 * back). Reduce once per window, as for loss but with nothing to resend:
 * a window that keeps the device ring full only makes the peer read older,
 * colder buffers (measured on memif: 1 MiB writes 4.3 vs 4.7 GB/s).
 */
static void
tcp_local_congestion(struct tide_net_conn *c, uint64_t now)
{
	if (before(c->snd_una, c->cwr_mark) || c->in_recovery || c->loss_state) {
		return;
	}
	c->ssthresh = c->cc->ssthresh(c, now);
	c->cwnd = c->ssthresh;
	c->cwr_mark = c->snd_nxt;
	c->stack->st.tcp_tx_cwr++;
}

void
tcp_ack_unowe(struct tide_net_conn *c)
{
	if (c->ack_owed) {
		c->ack_owed = false;
		TAILQ_REMOVE(&c->stack->ack_owed, c, ack_link);
	}
}

/*
 * SACK compression: hold an ACK that owes only more of the run the last SACK
 * reported, until a quarter of the smoothed RTT after the first held segment
 * (the delayed-ACK timer sends it; at most NET_SACK_COMPRESS_MAX_NS) or until
 * NET_SACK_COMPRESS_SEGS segments make tcp_data_queue answer at once. Why: a
 * Linux sender (BBR) at 1-2 % loss into this receiver got an ACK per 3
 * segments (60,000-77,000 per 256 MiB at 2 %), spent its CPU on them and
 * moved half of what it moved into a Linux receiver; held so, it got
 * 16,000-34,000 at 1-5 % and moved 0.93-1.24x of that (docs/benchmarks.md).
 * The cost falls on a window-limited sender, which waits longer to hear of
 * deliveries: Tide's NewReno at 5 % moved 14 % less. An eighth of the RTT
 * kept less of the gain and saved only part of the cost. No RTT sample yet
 * (srtt 0): nothing is held, rather than guess.
 */
static bool
tcp_sack_hold(struct tide_net_conn *c, uint64_t now)
{
	uint64_t due;

	if (!c->stack->o.tcp_sack_compress || !c->sack_owed || c->rcv_acked != c->rcv_nxt ||
	    c->srtt == 0) {
		return false;
	}
	due = now +
	      (c->srtt / 4 < NET_SACK_COMPRESS_MAX_NS ? c->srtt / 4 : NET_SACK_COMPRESS_MAX_NS);
	/* Armed already: by an earlier hold (every ACK sent disarms it). */
	if (c->t_delack == 0 || c->t_delack > due) {
		tcp_arm(c, &c->t_delack, due);
	}
	c->stack->st.tcp_sack_held++;
	return true;
}

void
tcp_ack_owed_flush(struct tide_net_stack *s, uint64_t now)
{
	struct tide_net_conn *c;

	while ((c = TAILQ_FIRST(&s->ack_owed)) != NULL) {
		tcp_ack_unowe(c);
		/* A segment sent since (data, a window update) may have carried it. */
		if (!c->dead && (c->rcv_acked != c->rcv_nxt || c->sack_owed) &&
		    !tcp_sack_hold(c, now)) {
			tcp_send_ack(c, now);
		}
	}
}

void
tcp_tx_block(struct tide_net_conn *c)
{
	if (!c->tx_blocked) {
		c->stack->st.tcp_tx_blocked++;
		c->tx_blocked = true;
		TAILQ_INSERT_TAIL(&c->stack->tx_blocked, c, txb_link);
	}
}

void
tcp_tx_unblock(struct tide_net_conn *c)
{
	if (c->tx_blocked) {
		c->tx_blocked = false;
		TAILQ_REMOVE(&c->stack->tx_blocked, c, txb_link);
	}
}

/*
 * A full device is backpressure: a sender with a segment to send stops and
 * goes on when the device takes frames (net_tx_resume), rather than build
 * frames it would drop and recover them as loss.
 */
static bool
tcp_tx_stopped(struct tide_net_conn *c, uint64_t now)
{
	if (!net_tx_full(c->stack)) {
		return false;
	}
	tcp_tx_block(c);
	tcp_local_congestion(c, now);
	return true;
}

void
tcp_write_xmit(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	uint32_t data_end = tcp_snd_end(c);
	bool sackrec = tcp_sack_recovering(c);
	/* Leave room for the SACK blocks the segment carries while we hold a hole. */
	uint32_t smss = c->mss - tcp_sack_rcv_optlen(c);
	bool sent_new = false;

	if (!((1u << c->state) & TCPF_CAN_SEND)) {
		return;
	}
	for (;;) {
		uint32_t seq = c->snd_nxt, len, room;
		uint8_t flags = TCPHDR_ACK;

		if (sackrec) {
			/* RFC 6675 5 (C): while pipe < cwnd, NextSeg: a lost hole, else new data.
			 */
			uint32_t rlen;
			uint8_t rflags;
			int relost;

			if (tcp_sack_pipe(c) >= c->cwnd) {
				break;
			}
			if (tcp_sack_next_rtx(c, smss, &seq, &rlen, &rflags, &relost)) {
				if (!tcp_pace_ok(c, now) || tcp_tx_stopped(c, now) ||
				    tcp_sack_retransmit(c, seq, rlen, rflags, relost, now) != 0) {
					break;
				}
				tcp_pace_sent(c, rlen, now);
				continue;
			}
			seq = c->snd_nxt;
			room = after(c->snd_una + c->snd_wnd, seq) ? c->snd_una + c->snd_wnd - seq
								   : 0;
		} else {
			uint32_t inflight = seq - c->snd_una;
			uint32_t wnd = c->cwnd < c->snd_wnd ? c->cwnd : c->snd_wnd;

			room = inflight < wnd ? wnd - inflight : 0;
			if (c->sb_n > 0 && c->sack_ok) {
				/*
				 * SACKed bytes have left the network: sending for them is
				 * limited transmit (RFC 3042) without the two-segment cap,
				 * and it produces the SACKs that let IsLost fire.
				 */
				uint32_t cw_in = inflight - tcp_sack_sacked_in(c, c->snd_una, seq);
				uint32_t rw = after(c->snd_una + c->snd_wnd, seq)
						      ? c->snd_una + c->snd_wnd - seq
						      : 0;

				room = cw_in < c->cwnd ? c->cwnd - cw_in : 0;
				if (room > rw) {
					room = rw;
				}
			}
		}
		if (before(seq, data_end)) {
			if (room == 0) {
				/* Held back by the window: cwnd when it is the smaller one. */
				if (c->cwnd <= c->snd_wnd) {
					c->cwnd_limited = true;
				}
				break;
			}
			len = data_end - seq;
			if (len > smss) {
				len = smss;
			}
			if (len > room) {
				len = room;
			}
			/* RFC 9293 3.7.4 (Nagle), off by default. */
			if (s->o.tcp_nagle && len < smss && c->snd_una != c->snd_max &&
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
		/* Only a segment to send stops at a full device: a connection with
		 * nothing to send (called for an incoming segment) is not waiting
		 * for the device, and its window is not cut. */
		if ((len > 0 && !tcp_pace_ok(c, now)) || tcp_tx_stopped(c, now) ||
		    tcp_transmit(c, seq, len, flags, now) != 0) {
			break;
		}
		tcp_pace_sent(c, len, now);
		if (before(seq, c->snd_max)) {
			s->st.tcp_retrans_segs++;
			if (after(seq + len, c->rtx_high)) {
				c->rtx_high = seq + len;
			}
		} else {
			if (!c->rtt_timing && !sackrec) {
				/* Not during recovery: the ACK would wait for the holes below. */
				c->rtt_timing = true;
				c->rtt_seq = seq;
				c->rtt_start = now;
			}
			tcp_hystart_sent(c, seq + len, now);
		}
		sent_new = true;
		if (sackrec && c->in_recovery) {
			c->prr_out += len;
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
	if (sent_new) {
		uint32_t flight = c->snd_nxt - c->snd_una;

		if (flight > c->max_flight) {
			c->max_flight = flight;
		}
		tcp_tlp_arm(c, now);
	}
	/* Data waits, the peer's window is shut and nothing is in flight: probe (RFC 9293 3.8.6.1).
	 */
	if (c->snd_wnd == 0 && c->snd_nxt == c->snd_una && before(c->snd_nxt, data_end) &&
	    c->t_persist == 0) {
		c->t_rto = 0;
		tcp_arm(c, &c->t_persist, now + c->rto);
	}
}

int
tcp_xmit_one_new(struct tide_net_conn *c, uint64_t now)
{
	uint32_t data_end = tcp_snd_end(c), seq = c->snd_nxt, len;
	uint32_t smss = c->mss - tcp_sack_rcv_optlen(c);
	uint32_t rw = after(c->snd_una + c->snd_wnd, seq) ? c->snd_una + c->snd_wnd - seq : 0;
	uint8_t flags = TCPHDR_ACK | TCPHDR_PSH;

	if (seq != c->snd_max || !before(seq, data_end) || rw == 0) {
		return -1;
	}
	len = data_end - seq;
	if (len > smss) {
		len = smss;
	}
	if (len > rw) {
		len = rw;
	}
	if (c->fin_queued && seq + len == data_end) {
		flags |= TCPHDR_FIN;
	}
	if (tcp_transmit(c, seq, len, flags, now) != 0) {
		return -1;
	}
	c->snd_nxt = seq + len + ((flags & TCPHDR_FIN) ? 1 : 0);
	c->snd_max = c->snd_nxt;
	return 0;
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
	} else {
		/* A repeat (the peer's SYN came again: our SYN-ACK or its ACK was
		 * lost): the ACK may answer either copy, so no sample (Karn). Timed
		 * from the first, a lost SYN-ACK gave the receiver a 1 s RTT. */
		c->rtt_timing = false;
	}
	c->snd_nxt = c->iss + 1;
	c->snd_max = c->iss + 1;
	tcp_rearm_rto(c, now);
}

void
tcp_send_synack_cookie(struct tide_net_stack *s, const struct tcp_seg *syn, uint32_t iss,
		       const struct tcp_cookie_opts *ck, uint64_t now)
{
	struct tide_net_buf b;
	struct net_tcp_hdr *th;
	uint8_t optlen;
	uint16_t tlen;

	if (net_txbuf_get(s, &b) != 0) {
		return;
	}
	th = (struct net_tcp_hdr *)(b.data + NET_HDRS_LEN);
	memset(th, 0, sizeof(*th));
	/* Our window scale is a function of the options alone, so the connection the
	 * ACK creates uses the shift announced here. */
	optlen = tcp_syn_options((uint8_t *)(th + 1), (uint16_t)(s->o.mtu - IP_HLEN - TCP_HLEN),
				 ck->sack, ck->ts, ck->tsval, ck->tsecr, ck->ws,
				 tcp_rcv_wscale_for(s->o.tcp_rcvbuf));
	tlen = (uint16_t)(TCP_HLEN + optlen);
	th->sport = htons(syn->dport);
	th->dport = htons(syn->sport);
	th->seq = htonl(iss);
	th->ack = htonl(syn->seq + 1);
	th->doff = (uint8_t)((tlen / 4) << 4);
	th->flags = TCPHDR_SYN | TCPHDR_ACK;
	/* A SYN's window is never scaled (RFC 7323 2.2). */
	th->window = htons(s->o.tcp_rcvbuf < 65535 ? (uint16_t)s->o.tcp_rcvbuf : 65535);
	if (!s->o.cksum_elide) {
		th->csum = net_cksum_fold(net_cksum_add(
			net_cksum_pseudo(htonl(s->o.ip), htonl(syn->saddr), IPPROTO_TCP_, tlen), th,
			tlen));
	}
	s->st.tcp_tx_segs++;
	net_ipv4_output(s, &b, syn->saddr, IPPROTO_TCP_, tlen, now);
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
	if (!s->o.cksum_elide) {
		th->csum = net_cksum_fold(net_cksum_add(
			net_cksum_pseudo(htonl(s->o.ip), htonl(seg->saddr), IPPROTO_TCP_, TCP_HLEN),
			th, TCP_HLEN));
	}
	s->st.tcp_tx_segs++;
	s->st.tcp_rst_tx++;
	net_ipv4_output(s, &b, seg->saddr, IPPROTO_TCP_, TCP_HLEN, now);
}
