/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP input (RFC 9293 3.10.7). Each segment is parsed once into a struct
 * tcp_seg; LISTEN and SYN_SENT have their own short handlers and every
 * other state goes through tcp_rcv_state_process, which shares tcp_ack()
 * and tcp_data_queue() and distinguishes states with TCPF_* masks.
 * Hardened per RFC 5961 (RST/SYN challenge ACKs, ACK range check) and
 * RFC 7323 (PAWS). Loss recovery is SACK-based (RFC 6675, tcp_sack.c) when
 * both sides permit SACK, NewReno (RFC 6582) otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"

int
tcp_parse_options(const uint8_t *p, uint32_t len, bool syn, struct tcp_opts *o)
{
	memset(o, 0, sizeof(*o));
	while (len > 0) {
		uint8_t kind = p[0], olen;

		if (kind == TCPOPT_EOL) {
			break;
		}
		if (kind == TCPOPT_NOP) {
			p++;
			len--;
			continue;
		}
		if (len < 2) {
			return -EINVAL;
		}
		olen = p[1];
		if (olen < 2 || olen > len) {
			return -EINVAL;
		}
		switch (kind) {
		case TCPOPT_MSS:
			if (olen == 4 && syn) {
				o->has_mss = true;
				o->mss = (uint16_t)(p[2] << 8 | p[3]);
			}
			break;
		case TCPOPT_WINDOW:
			if (olen == 3 && syn) {
				o->has_wscale = true;
				o->wscale = p[2] > 14 ? 14 : p[2]; /* RFC 7323 2.3 */
			}
			break;
		case TCPOPT_SACK_PERM:
			if (olen == 2 && syn) {
				o->sack_ok = true;
			}
			break;
		case TCPOPT_SACK:
			/* Lengths other than 2 + 8n (n = 1..4) are ignored, as Linux does. */
			if (!syn && olen >= 10 && (olen - 2) % 8 == 0) {
				o->num_sacks = (uint8_t)((olen - 2) / 8);
				for (uint8_t i = 0; i < o->num_sacks; i++) {
					const uint8_t *b = p + 2 + 8 * i;

					o->sacks[i].start = (uint32_t)b[0] << 24 |
							    (uint32_t)b[1] << 16 |
							    (uint32_t)b[2] << 8 | b[3];
					o->sacks[i].end = (uint32_t)b[4] << 24 |
							  (uint32_t)b[5] << 16 |
							  (uint32_t)b[6] << 8 | b[7];
				}
			}
			break;
		case TCPOPT_TIMESTAMP:
			if (olen == 10) {
				o->has_ts = true;
				o->tsval = (uint32_t)p[2] << 24 | (uint32_t)p[3] << 16 |
					   (uint32_t)p[4] << 8 | p[5];
				o->tsecr = (uint32_t)p[6] << 24 | (uint32_t)p[7] << 16 |
					   (uint32_t)p[8] << 8 | p[9];
			}
			break;
		default:
			break;
		}
		p += olen;
		len -= olen;
	}
	return 0;
}

uint32_t
tcp_rcv_wnd(const struct tide_net_conn *c)
{
	return tcp_ring_free(&c->rbuf);
}

/* Settle what the SYN exchange negotiated (c->*_ok hold what we offered or allow). */
static void
tcp_syn_negotiate(struct tide_net_conn *c, const struct tcp_opts *o)
{
	const struct tide_net_stack *s = c->stack;
	uint32_t mss = s->o.mtu - IP_HLEN - TCP_HLEN;

	c->peer_mss = o->has_mss && o->mss >= 64 ? o->mss : 536;
	c->ws_ok = s->o.tcp_wscale && o->has_wscale;
	if (c->ws_ok) {
		c->snd_wscale = o->wscale;
	} else {
		c->snd_wscale = 0;
		c->rcv_wscale = 0;
	}
	c->ts_ok = s->o.tcp_timestamps && o->has_ts;
	if (c->ts_ok) {
		c->ts_recent = o->tsval;
	}
	c->sack_ok = s->o.tcp_sack && o->sack_ok;
	if (c->peer_mss < mss) {
		mss = c->peer_mss;
	}
	c->mss = (uint16_t)(mss - (c->ts_ok ? 12 : 0));
	c->cc->init(c);
}

static void
tcp_rcv_deliver(struct tide_net_conn *c, const uint8_t *data, uint32_t len)
{
	if (!c->app_owned) {
		c->stack->st.tcp_rx_orphan_bytes += len;
		return;
	}
	if (c->rbuf.len == 0 && !c->rcv_held && c->cbs.on_recv != NULL) {
		size_t took = c->cbs.on_recv(c, c->arg, data, len);

		if (took > len) {
			took = len;
		}
		if (!c->app_owned) {
			return;
		}
		data += took;
		len -= (uint32_t)took;
		if (len > 0) {
			c->rcv_held = true;
		}
	}
	if (len > 0) {
		/* Fits: accepted bytes lie inside the window, whose right edge never moves left. */
		tcp_ring_write(&c->rbuf, data, len);
	}
}

/* Insert [seq, seq + len) in the sorted, non-overlapping out-of-order queue, trimming overlaps. */
static void
tcp_ofo_queue(struct tide_net_conn *c, uint32_t seq, const uint8_t *data, uint32_t len)
{
	struct tide_net_stack *s = c->stack;
	struct tcp_ooo **pp = &c->ooo, *o, *tail = tcp_ooo_tail(c);
	uint32_t end = seq + len, seq0 = seq;
	bool at_end = tail != NULL && !before(seq, tail->seq + tail->len);

	if (at_end) {
		pp = &tail->next; /* the common case: past everything queued */
	}
	while (*pp != NULL && !after((*pp)->seq + (*pp)->len, seq)) {
		pp = &(*pp)->next;
	}
	/* Queued data wins: skip what already covers our head, possibly several segments. */
	while (*pp != NULL && !after((*pp)->seq, seq)) {
		uint32_t pend = (*pp)->seq + (*pp)->len;

		if (!before(pend, end)) {
			s->st.tcp_rx_dup_bytes += end - seq;
			tcp_sack_rcv_dsack(c, seq0, end);
			tcp_sack_rcv_note(c, seq0);
			return;
		}
		s->st.tcp_rx_dup_bytes += pend - seq;
		data += pend - seq;
		seq = pend;
		pp = &(*pp)->next;
	}
	while (*pp != NULL && !after((*pp)->seq + (*pp)->len, end)) {
		o = *pp;
		*pp = o->next;
		s->st.tcp_rx_dup_bytes += o->len;
		c->ooo_n--;
		c->ooo_tail = NULL; /* perhaps the tail: found again when needed */
		tcp_ooo_free(s, o);
	}
	if (*pp != NULL && before((*pp)->seq, end)) {
		s->st.tcp_rx_dup_bytes += end - (*pp)->seq;
		end = (*pp)->seq;
	}
	if (end == seq) {
		tcp_sack_rcv_note(c, seq0);
		return;
	}
	/*
	 * The window bounds the bytes; this bounds the entries (a peer sending tiny
	 * segments). Allow a full window of ordinary segments, or SACKed data gets
	 * dropped and the sender must resend it.
	 */
	if (c->ooo_n >= s->o.tcp_max_ooo_segs && c->ooo_n >= c->rbuf.cap / 1024) {
		s->st.tcp_rx_ooo_dropped++;
		return;
	}
	if (s->rx_handle != NULL && !s->rx_kept && s->rx_kept_n < NET_RX_KEEP_MAX) {
		/* Keep the frame: the payload is read once, when the hole fills. */
		o = malloc(sizeof(*o));
		if (o == NULL) {
			s->st.tcp_rx_ooo_dropped++;
			return;
		}
		o->ptr = data;
		o->handle = s->rx_handle;
		s->rx_kept = true;
		s->rx_kept_n++;
	} else {
		o = malloc(sizeof(*o) + (end - seq));
		if (o == NULL) {
			s->st.tcp_rx_ooo_dropped++;
			return;
		}
		memcpy(o->data, data, end - seq);
		o->ptr = o->data;
		o->handle = NULL;
	}
	o->seq = seq;
	o->len = end - seq;
	o->next = *pp;
	*pp = o;
	if (o->next == NULL) {
		/* The new last entry: it continues the last run or starts one. With
		 * the cache valid nothing was removed, so tail is its predecessor. */
		if (c->ooo_tail != NULL) {
			if (seq != tail->seq + tail->len) {
				c->ooo_tail_run = seq;
			}
			c->ooo_tail = o;
		} else if (c->ooo == o) {
			c->ooo_tail_run = seq;
			c->ooo_tail = o;
		}
	} else if (c->ooo_tail != NULL && o->next->seq == end) {
		c->ooo_tail = NULL; /* it may join the last run: found again when needed */
	}
	c->ooo_n++;
	s->st.tcp_rx_ooo_segs++;
	tcp_sack_rcv_note(c, seq0);
}

/* Move queued segments that became in order to the receiver. */
static void
tcp_ofo_drain(struct tide_net_conn *c)
{
	while (c->ooo != NULL && !after(c->ooo->seq, c->rcv_nxt) && c->state != TCP_CLOSE) {
		struct tcp_ooo *o = c->ooo;
		uint32_t end = o->seq + o->len;

		c->ooo = o->next;
		c->ooo_n--;
		if (c->ooo == NULL) {
			c->ooo_tail = NULL;
		}
		if (after(end, c->rcv_nxt)) {
			uint32_t off = c->rcv_nxt - o->seq;

			c->stack->st.tcp_rx_dup_bytes += off;
			c->rcv_nxt = end;
			tcp_rcv_deliver(c, o->ptr + off, end - (o->seq + off));
		} else {
			c->stack->st.tcp_rx_dup_bytes += o->len;
		}
		tcp_ooo_free(c->stack, o);
	}
}

/* Payload of an acceptable segment (RFC 9293 3.10.7.4, seventh step). */
static void
tcp_data_queue(struct tide_net_conn *c, const struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	const uint8_t *data = seg->payload;
	uint32_t seq = seg->seq + ((seg->flags & TCPHDR_SYN) ? 1 : 0);
	uint32_t len = seg->len, wnd = tcp_rcv_wnd(c), limit;

	if (before(seq, c->rcv_nxt)) {
		uint32_t d = c->rcv_nxt - seq;

		c->ack_now = true;
		if (d >= len) {
			s->st.tcp_rx_dup_bytes += len;
			tcp_sack_rcv_dsack(c, seq, seq + len);
			return;
		}
		s->st.tcp_rx_dup_bytes += d;
		tcp_sack_rcv_dsack(c, seq, c->rcv_nxt);
		data += d;
		len -= d;
		seq = c->rcv_nxt;
	}
	limit = c->rcv_nxt + wnd;
	if (after(seq + len, limit)) {
		c->ack_now = true;
		if (!before(seq, limit)) {
			return;
		}
		len = limit - seq;
	}
	if (seq != c->rcv_nxt) {
		bool extends = tcp_sack_rcv_extends(c, seq);

		tcp_ofo_queue(c, seq, data, len);
		if (extends && s->in_rx_burst && s->o.tcp_delack_us != 0 &&
		    ++c->sack_segs <
			    (s->o.tcp_sack_compress ? NET_SACK_COMPRESS_SEGS : NET_ACK_STRETCH)) {
			/*
			 * More of the run the latest SACK reported: the sender knows of
			 * the hole already, and one ACK at the burst's end reports all
			 * of this burst's growth (Linux compresses SACKs likewise), or
			 * with tcp_sack_compress a later one (tcp_ack_owed_flush). An
			 * ACK per segment made the receiver's poller spend its time in
			 * the kernel's path of each ACK, and the ACKs behind that work
			 * came late: a Linux sender at 2 % loss saw 5-10 ms RTTs.
			 */
			c->sack_owed = true;
			if (!c->ack_owed) {
				c->ack_owed = true;
				TAILQ_INSERT_TAIL(&s->ack_owed, c, ack_link);
			}
		} else {
			/* A new hole, or a run the sender has not heard of: at once
			 * (RFC 5681 4.2: the duplicate ACK tells of the hole). */
			c->ack_now = true;
		}
		return;
	}
	c->rcv_nxt += len;
	tcp_rcv_deliver(c, data, len);
	if (c->ooo != NULL) {
		tcp_ofo_drain(c);
		c->ack_now = true; /* a hole was filled */
	}
	if (c->rcv_acked == c->rcv_nxt) {
		/* The receive callback sent a segment acknowledging all of it. */
		c->ack_now = false;
		return;
	}
	if (++c->delack_segs >= 2 && s->in_rx_burst && c->delack_segs < NET_ACK_STRETCH &&
	    s->o.tcp_delack_us != 0) {
		/*
		 * More frames of this burst may carry more of the stream: one ACK at
		 * the burst's end covers them all, as GRO gives Linux one ACK per
		 * merged segment. A receiving poller spent ~7 % on ACKs, one per
		 * two 9000-byte segments. Out-of-order data and filled holes still
		 * ACK at once (above), so loss recovery is not slowed.
		 */
		if (!c->ack_owed) {
			c->ack_owed = true;
			TAILQ_INSERT_TAIL(&s->ack_owed, c, ack_link);
		}
	} else if (c->delack_segs >= 2 || s->o.tcp_delack_us == 0) {
		c->ack_now = true;
	} else if (c->t_delack == 0) {
		tcp_arm(c, &c->t_delack, now + s->o.tcp_delack_us * NS_PER_US);
	}
}

/* Retransmit the first unacknowledged segment (fast retransmit, partial ACK). */
static void
tcp_retransmit_head(struct tide_net_conn *c, uint64_t now)
{
	uint32_t data_end = tcp_snd_end(c);
	uint32_t len = 0;
	uint8_t flags = TCPHDR_ACK;

	if (before(c->snd_una, data_end)) {
		len = data_end - c->snd_una;
		if (len > c->mss) {
			len = c->mss;
		}
		flags |= TCPHDR_PSH;
	}
	if (c->fin_queued && c->snd_una + len == data_end && after(c->snd_max, data_end)) {
		flags |= TCPHDR_FIN;
	}
	if (len == 0 && !(flags & TCPHDR_FIN)) {
		return;
	}
	c->rtt_timing = false;
	if (tcp_transmit(c, c->snd_una, len, flags, now) == 0) {
		c->stack->st.tcp_retrans_segs++;
	}
	tcp_rearm_rto(c, now);
}

/* RFC 9293 3.10.7.4 fifth step. Returns 0 to go on, -1 to drop the segment. */
static int
tcp_ack(struct tide_net_conn *c, const struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	uint32_t ack = seg->ack, acked, wnd, newly = 0, sacked0;
	bool win_changed = false;

	if (after(ack, c->snd_max) || before(ack, c->snd_una - c->max_snd_wnd)) {
		/* RFC 5961 5.2: acknowledges data never sent, or far too old. */
		s->st.tcp_rx_bad_ack++;
		c->ack_now = true;
		return -1;
	}
	wnd = seg->wnd << ((seg->flags & TCPHDR_SYN) ? 0 : c->snd_wscale);
	if (!before(ack, c->snd_una) && (before(c->snd_wl1, seg->seq) ||
					 (c->snd_wl1 == seg->seq && !before(ack, c->snd_wl2)))) {
		win_changed = wnd != c->snd_wnd;
		c->snd_wnd = wnd;
		c->snd_wl1 = seg->seq;
		c->snd_wl2 = ack;
		if (wnd > c->max_snd_wnd) {
			c->max_snd_wnd = wnd;
		}
		if (wnd > 0 && c->t_persist != 0) {
			c->t_persist = 0;
			c->probes = 0;
		}
	}
	if (before(ack, c->snd_una)) {
		return 0;
	}
	c->probes_out = 0; /* the peer answers: a zero-window probe was not lost on a dead one */
	acked = ack - c->snd_una;
	/* SACKed bytes before this ACK: what it delivered is the cumulative advance plus
	 * the change in them (RFC 6937 DeliveredData). */
	sacked0 = c->sack_ok && c->sb_n > 0 ? tcp_sack_sacked_in(c, c->snd_una, c->snd_max) : 0;
	if (c->sack_ok && seg->opts.num_sacks > 0) {
		newly = tcp_sack_update(c, &seg->opts, ack);
		if (newly > 0) {
			tcp_rack_sacked(c, now);
		}
	}
	if (acked == 0) {
		/* Duplicate ACK as RFC 5681 2 defines it. */
		if (seg->len == 0 && !(seg->flags & (TCPHDR_SYN | TCPHDR_FIN)) && !win_changed &&
		    c->snd_max != c->snd_una) {
			s->st.tcp_dup_acks++;
			if (c->sack_ok) {
				/* RFC 6675 2: only ACKs that SACK new data count. */
				if (newly > 0 || seg->opts.num_sacks == 0) {
					c->dupacks++;
				}
				if (newly > 0) {
					/* New data SACKed: the peer is there, a new episode. */
					c->tlp_done = false;
					c->tlp_n = 0;
				}
				tcp_sack_check_loss(c, now);
				if (c->in_recovery) {
					uint32_t sacked1 =
						tcp_sack_sacked_in(c, c->snd_una, c->snd_max);

					tcp_sack_prr(c, sacked1 > sacked0 ? sacked1 - sacked0 : 0);
				}
				tcp_tlp_arm(c, now);
				return 0;
			}
			c->dupacks++;
			if (c->in_recovery) {
				c->cwnd += c->mss;
			} else if (c->dupacks == 3 && after(c->snd_una, c->recover)) {
				/* RFC 6582 3.2 step 2: enter fast retransmit / fast recovery. */
				c->ssthresh = c->cc->ssthresh(c, now);
				c->recover = c->snd_max;
				c->cwnd = c->ssthresh + 3u * c->mss;
				c->in_recovery = true;
				s->st.tcp_fast_retrans++;
				tcp_retransmit_head(c, now);
			}
		} else if (c->sack_ok && newly > 0) {
			c->tlp_done = false;
			c->tlp_n = 0;
			tcp_sack_check_loss(c, now);
			tcp_tlp_arm(c, now);
		}
		return 0;
	}
	if (c->rtt_timing && after(ack, c->rtt_seq)) {
		tcp_rtt_sample(c, now - c->rtt_start);
		c->rtt_timing = false;
	}
	if (after(ack, c->sbuf_seq)) {
		uint32_t d = ack - c->sbuf_seq;

		if (d > c->snd_len) {
			d = c->snd_len; /* the rest acknowledges our FIN */
		}
		tcp_snd_drop(c, d);
	}
	c->snd_una = ack;
	if (before(c->snd_nxt, ack)) {
		c->snd_nxt = ack;
	}
	c->backoff = 0;
	c->retries = 0;
	if (c->rto_undo) {
		c->rto_undo = false;
		/* RFC 3522: the first ACK of new data after a timeout echoes the
		 * retransmission's TSval unless the original got there first. */
		if (seg->opts.has_ts && before(seg->opts.tsecr, c->rto_tsval)) {
			tcp_rto_undo(c);
		}
	}
	tcp_hystart_acked(c, ack, now);
	if (c->cc->on_ack != NULL) {
		c->cc->on_ack(c, acked, now);
	}
	if (c->sack_ok) {
		c->tlp_done = false;
		c->tlp_n = 0; /* new data acknowledged: a new episode */
		tcp_sack_clean(c);
		if (c->in_recovery || c->loss_state) {
			if (!before(ack, c->recover)) {
				/*
				 * RFC 6675 5 (C): RecoveryPoint acknowledged. Leave with
				 * ssthresh (RFC 6582 3.2 step 3, option 2; Linux's too):
				 * option 1, min(ssthresh, FlightSize + SMSS), left one
				 * segment when the recovery point was the last byte out,
				 * and that window waits on the peer's delayed ACK (against
				 * Linux at 5 % loss: 1260 -> 850 tail probes per 128 MiB).
				 */
				if (c->in_recovery) {
					c->cwnd = c->ssthresh;
				}
				c->in_recovery = false;
				c->loss_state = false;
				c->rtx_n = 0;
				c->dupacks = 0;
			} else if (c->loss_state) {
				c->cc->cong_avoid(c, acked, now); /* slow start after the RTO */
			}
		} else {
			c->dupacks = 0;
			if (((1u << c->state) & ~(TCPF_SYN_RECV | TCPF_SYN_SENT)) &&
			    tcp_cwnd_validated(c)) {
				c->cc->cong_avoid(c, acked, now);
			}
		}
		tcp_sack_check_loss(c, now);
		if (c->in_recovery) {
			uint32_t sacked1 = tcp_sack_sacked_in(c, c->snd_una, c->snd_max);

			/* SACKed bytes the ACK covered moved from sacked0 into acked. */
			tcp_sack_prr(c, acked + sacked1 > sacked0 ? acked + sacked1 - sacked0 : 0);
		}
	} else if (c->in_recovery) {
		if (!before(ack, c->recover)) {
			/* Full ACK (RFC 6582 3.2 step 3): deflate, option 2 as above. */
			c->in_recovery = false;
			c->dupacks = 0;
			c->cwnd = c->ssthresh;
		} else {
			/* Partial ACK: retransmit the next hole, deflate by what was acked. */
			c->cwnd = c->cwnd > acked ? c->cwnd - acked : 0;
			c->cwnd += c->mss;
			tcp_retransmit_head(c, now);
		}
	} else {
		c->dupacks = 0;
		if (((1u << c->state) & ~(TCPF_SYN_RECV | TCPF_SYN_SENT)) &&
		    tcp_cwnd_validated(c)) {
			c->cc->cong_avoid(c, acked, now);
		}
	}
	if (c->snd_una == c->snd_max) {
		c->t_rto = 0;
	} else {
		tcp_rearm_rto(c, now);
	}
	tcp_tlp_arm(c, now);
	if (c->want_write && tcp_ring_free(&c->sbuf) > 0 && !c->fin_queued) {
		c->want_write = false;
		tcp_event(c, TIDE_NET_EV_WRITABLE, 0);
	}
	return 0;
}

/* Our FIN has been acknowledged. */
static bool
tcp_fin_acked(const struct tide_net_conn *c)
{
	return c->fin_queued && after(c->snd_una, tcp_fin_seq(c));
}

/* The peer's FIN is next in sequence (RFC 9293 3.10.7.4 eighth step). */
static void
tcp_fin(struct tide_net_conn *c, uint64_t now)
{
	c->rcv_nxt++;
	c->ooo_fin = false;
	c->ack_now = true;
	switch (c->state) {
	case TCP_SYN_RECV:
	case TCP_ESTABLISHED:
		tcp_set_state(c, TCP_CLOSE_WAIT);
		tcp_event(c, TIDE_NET_EV_PEER_CLOSED, 0);
		break;
	case TCP_FIN_WAIT1:
		if (tcp_fin_acked(c)) {
			tcp_time_wait(c, now);
		} else {
			tcp_set_state(c, TCP_CLOSING); /* simultaneous close */
		}
		break;
	case TCP_FIN_WAIT2:
		tcp_time_wait(c, now);
		break;
	default:
		break;
	}
}

/* RFC 9293 3.10.7.4 first step, with RFC 9293's zero-window allowance for ACKs. */
static bool
tcp_sequence_ok(const struct tide_net_conn *c, const struct tcp_seg *seg)
{
	uint32_t wnd = tcp_rcv_wnd(c);

	if (after(c->rcv_adv, c->rcv_nxt) && c->rcv_adv - c->rcv_nxt > wnd) {
		wnd = c->rcv_adv - c->rcv_nxt; /* what we advertised, even if rounded up */
	}
	if (wnd == 0) {
		return seg->seq == c->rcv_nxt;
	}
	if (seg->seg_len == 0) {
		return between(seg->seq, c->rcv_nxt, c->rcv_nxt + wnd - 1);
	}
	return between(seg->seq, c->rcv_nxt, c->rcv_nxt + wnd - 1) ||
	       between(seg->seq + seg->seg_len - 1, c->rcv_nxt, c->rcv_nxt + wnd - 1);
}

static void
tcp_established(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	struct tide_net_listener *l = c->listener;

	tcp_set_state(c, TCP_ESTABLISHED);
	tcp_keepalive_reset(c, now);
	if (c->active) {
		tcp_event(c, TIDE_NET_EV_CONNECTED, 0);
		return;
	}
	if (l == NULL) {
		return;
	}
	c->app_owned = true;
	if (l->accept(l->arg, c) != 0) {
		s->st.tcp_accept_refused++;
		if (c->app_owned) {
			c->app_owned = false;
			tcp_send_active_reset(c, now);
			tcp_done(c, 0);
		}
	}
}

static void
tcp_rcv_synsent(struct tide_net_conn *c, const struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	bool ack_ok = false;

	if (seg->flags & TCPHDR_ACK) {
		if (!after(seg->ack, c->iss) || after(seg->ack, c->snd_max)) {
			tcp_send_reset(s, seg, now);
			return;
		}
		ack_ok = true;
	}
	if (seg->flags & TCPHDR_RST) {
		if (ack_ok) {
			s->st.tcp_rst_rx++;
			s->st.tcp_conn_refused++;
			tcp_done(c, -ECONNREFUSED);
		}
		return;
	}
	if (!(seg->flags & TCPHDR_SYN)) {
		return;
	}
	c->irs = seg->seq;
	c->rcv_nxt = seg->seq + 1;
	c->rcv_adv = c->rcv_nxt;
	tcp_syn_negotiate(c, &seg->opts);
	c->snd_wnd = seg->wnd; /* never scaled in a SYN (RFC 7323 2.2) */
	c->max_snd_wnd = c->snd_wnd;
	c->snd_wl1 = seg->seq;
	c->snd_wl2 = seg->ack;
	if (ack_ok) {
		if (c->rtt_timing && c->retries == 0) {
			tcp_rtt_sample(c, now - c->rtt_start);
		}
		c->rtt_timing = false;
		c->snd_una = seg->ack;
		c->retries = 0;
		c->backoff = 0;
		c->t_rto = 0;
		c->ack_now = true;
		tcp_established(c, now);
		return;
	}
	/* Simultaneous open (RFC 9293 figure 8). */
	tcp_set_state(c, TCP_SYN_RECV);
	c->rtt_timing = false;
	tcp_send_synack(c, now);
}

static void
tcp_rcv_state_process(struct tide_net_conn *c, struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	bool simopen_synack = false;

	if (c->state == TCP_SYN_SENT) {
		tcp_rcv_synsent(c, seg, now);
		goto out;
	}
	/*
	 * Our SYN-ACK crossed the peer's during a simultaneous open: its SYN is the
	 * one we already took (Linux tcp_validate_incoming does the same).
	 */
	if (c->state == TCP_SYN_RECV && c->active &&
	    (seg->flags & (TCPHDR_SYN | TCPHDR_ACK | TCPHDR_RST)) == (TCPHDR_SYN | TCPHDR_ACK) &&
	    seg->seq + 1 == c->rcv_nxt) {
		simopen_synack = true;
		seg->flags &= (uint8_t)~TCPHDR_SYN;
		seg->seq++;
		seg->seg_len--;
	}
	/* PAWS (RFC 7323 5.3). */
	if (c->ts_ok && seg->opts.has_ts && !(seg->flags & TCPHDR_RST) &&
	    before(seg->opts.tsval, c->ts_recent)) {
		s->st.tcp_rx_paws++;
		tcp_send_ack(c, now);
		goto out;
	}
	if (!simopen_synack && !tcp_sequence_ok(c, seg)) {
		s->st.tcp_rx_out_of_window++;
		if (seg->len > 0 && !after(seg->seq + seg->len, c->rcv_nxt)) {
			/* Old data again: tell the sender it was a spurious resend (RFC 2883). */
			tcp_sack_rcv_dsack(c, seg->seq, seg->seq + seg->len);
		}
		if (!(seg->flags & TCPHDR_RST)) {
			tcp_send_ack(c, now);
			if (c->state == TCP_TIME_WAIT && (seg->flags & TCPHDR_FIN)) {
				tcp_time_wait(c, now); /* retransmitted FIN restarts 2*MSL */
			}
		}
		goto out;
	}
	if (c->ts_ok && seg->opts.has_ts && !after(seg->seq, c->rcv_nxt)) {
		c->ts_recent = seg->opts.tsval; /* RFC 7323 4.3 */
	}
	if (seg->flags & TCPHDR_RST) {
		if (seg->seq != c->rcv_nxt) {
			tcp_send_challenge_ack(c, now); /* RFC 5961 3.2 */
			goto out;
		}
		s->st.tcp_rst_rx++;
		if (c->state == TCP_SYN_RECV && !c->active) {
			tcp_done(c, 0); /* passive child: back to LISTEN, nobody to tell */
		} else {
			s->st.tcp_conn_resets++;
			tcp_done(c, c->state == TCP_SYN_RECV ? -ECONNREFUSED : -ECONNRESET);
		}
		return;
	}
	if (seg->flags & TCPHDR_SYN) {
		tcp_send_challenge_ack(c, now); /* RFC 5961 4.2: any SYN when synchronized */
		goto out;
	}
	if (!(seg->flags & TCPHDR_ACK)) {
		goto out;
	}
	tcp_keepalive_reset(c, now);
	if (c->state == TCP_SYN_RECV) {
		if (!between(seg->ack, c->snd_una + 1, c->snd_max)) {
			tcp_send_reset(s, seg, now);
			goto out;
		}
		c->rtt_timing = c->rtt_timing && c->retries == 0;
		if (tcp_ack(c, seg, now) != 0) {
			goto out;
		}
		tcp_established(c, now);
		if (c->state == TCP_CLOSE) {
			return;
		}
		if (c->fin_queued) {
			tcp_set_state(c, TCP_FIN_WAIT1); /* closed while the handshake ran */
		}
	} else if (tcp_ack(c, seg, now) != 0) {
		goto out;
	}
	if (c->state == TCP_CLOSE) {
		return;
	}
	if (tcp_fin_acked(c)) {
		switch (c->state) {
		case TCP_FIN_WAIT1:
			tcp_set_state(c, TCP_FIN_WAIT2);
			if (!c->app_owned) {
				tcp_arm(c, &c->t_wait, now + s->o.tcp_fin_wait2_ms * NS_PER_MS);
			}
			break;
		case TCP_CLOSING:
			tcp_time_wait(c, now);
			goto out;
		case TCP_LAST_ACK:
			tcp_done(c, 0);
			return;
		default:
			break;
		}
	}
	if (seg->len > 0 && ((1u << c->state) & TCPF_CAN_RECV)) {
		tcp_data_queue(c, seg, now);
		if (c->state == TCP_CLOSE) {
			return;
		}
	}
	if ((seg->flags & TCPHDR_FIN) && ((1u << c->state) & TCPF_CAN_RECV)) {
		uint32_t fin_seq = seg->seq + seg->len;

		if (fin_seq == c->rcv_nxt) {
			tcp_fin(c, now);
		} else if (after(fin_seq, c->rcv_nxt) &&
			   !after(fin_seq, c->rcv_nxt + tcp_rcv_wnd(c))) {
			c->ooo_fin = true;
			c->ooo_fin_seq = fin_seq;
			c->ack_now = true;
		}
	} else if (c->ooo_fin && c->ooo_fin_seq == c->rcv_nxt &&
		   ((1u << c->state) & TCPF_CAN_RECV)) {
		tcp_fin(c, now);
	}
	if (c->state == TCP_CLOSE) {
		return;
	}
out:
	if (c->state == TCP_CLOSE || c->dead) {
		return;
	}
	tcp_write_xmit(c, now);
	if (c->ack_now) {
		tcp_send_ack(c, now);
	}
}

/* Answer a SYN without keeping anything: the backlog is full or memory ran out. */
static void
tcp_syncookie_send(struct tide_net_listener *l, const struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_stack *s = l->stack;
	struct tcp_cookie_opts ck;
	uint32_t iss = tcp_syncookie_make(s, seg, now, &ck);

	l->cookie_sent = true;
	l->cookie_sent_at = now;
	s->st.tcp_syncookies_sent++;
	tcp_send_synack_cookie(s, seg, iss, &ck, now);
}

/*
 * An ACK at a listener that sent cookies lately: if it returns a valid
 * cookie, the handshake is done and the connection starts in ESTABLISHED
 * (through SYN_RECV, so accepting it is the ordinary path). Anything else
 * is answered with a RST, as without cookies, and creates nothing.
 */
static void
tcp_syncookie_rcv(struct tide_net_listener *l, struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_stack *s = l->stack;
	struct tcp_cookie_opts ck;
	struct tcp_opts o = {0};
	struct tide_net_conn *c;

	if (tcp_syncookie_check(s, seg, now, &ck) != 0) {
		s->st.tcp_syncookies_failed++;
		tcp_send_reset(s, seg, now);
		return;
	}
	c = tcp_conn_alloc(s, seg->saddr, seg->dport, seg->sport, now);
	if (c == NULL) {
		/* Dropped, not reset: the peer's next segment carries the cookie again. */
		return;
	}
	s->st.tcp_syncookies_ok++;
	tcp_set_iss(c, seg->ack - 1);
	c->snd_una = seg->ack; /* our SYN (the cookie's SYN-ACK) is acknowledged */
	c->snd_nxt = seg->ack;
	c->snd_max = seg->ack;
	c->irs = seg->seq - 1;
	c->rcv_nxt = seg->seq;
	c->rcv_adv = c->rcv_nxt;
	o.has_mss = true;
	o.mss = ck.mss;
	o.has_ts = ck.ts;
	o.tsval = ck.tsecr;
	o.has_wscale = ck.ws;
	o.wscale = ck.wscale;
	o.sack_ok = ck.sack;
	tcp_syn_negotiate(c, &o);
	if (c->ts_ok) {
		/* The SYN-ACK's TSval was at or below the clock: later ones never go back. */
		c->ts_sent = true;
		c->ts_last = ck.tsval;
	}
	c->snd_wnd = seg->wnd << c->snd_wscale;
	c->max_snd_wnd = c->snd_wnd;
	c->snd_wl1 = seg->seq;
	c->snd_wl2 = seg->ack;
	c->listener = l;
	l->pending++;
	c->state = TCP_SYN_RECV;
	s->st.tcp_passive_opens++;
	tcp_established(c, now);
	if (c->state != TCP_ESTABLISHED || c->dead) {
		return; /* refused by the accept callback, or closed from it */
	}
	if (seg->len > 0 || (seg->flags & TCPHDR_FIN)) {
		/* The ACK lost, this is the first data segment: take its payload too. */
		tcp_rcv_state_process(c, seg, now);
	}
}

static void
tcp_listen_rcv(struct tide_net_listener *l, struct tcp_seg *seg, uint64_t now)
{
	struct tide_net_stack *s = l->stack;
	struct tide_net_conn *c;

	if (seg->flags & TCPHDR_RST) {
		return;
	}
	if (seg->flags & TCPHDR_ACK) {
		if (!(seg->flags & TCPHDR_SYN) && l->cookie_sent &&
		    now - l->cookie_sent_at < TCP_SYNCOOKIE_VALID_NS) {
			tcp_syncookie_rcv(l, seg, now);
			return;
		}
		tcp_send_reset(s, seg, now);
		return;
	}
	if ((seg->flags & (TCPHDR_SYN | TCPHDR_FIN)) != TCPHDR_SYN) {
		return;
	}
	if (l->pending >= l->backlog) {
		/* Half-open entries hold the slots (SYN_RECV, ~63 s at most): a cookie
		 * lets a client in meanwhile. */
		s->st.tcp_listen_overflow++;
		tcp_syncookie_send(l, seg, now);
		return;
	}
	c = tcp_conn_alloc(s, seg->saddr, seg->dport, seg->sport, now);
	if (c == NULL) {
		tcp_syncookie_send(l, seg, now);
		return;
	}
	c->listener = l;
	l->pending++;
	c->irs = seg->seq;
	c->rcv_nxt = seg->seq + 1;
	c->rcv_adv = c->rcv_nxt;
	tcp_syn_negotiate(c, &seg->opts);
	c->snd_wnd = seg->wnd;
	c->max_snd_wnd = c->snd_wnd;
	c->snd_wl1 = seg->seq;
	c->snd_wl2 = c->iss;
	c->state = TCP_SYN_RECV;
	s->st.tcp_passive_opens++;
	/* Data on the SYN is not queued; the peer retransmits it after the handshake. */
	tcp_send_synack(c, now);
}

void
tcp_v4_rcv(struct tide_net_stack *s, const struct net_ipv4_hdr *ip, const uint8_t *data,
	   uint16_t len, uint16_t flags, uint64_t now)
{
	const struct net_tcp_hdr *th = (const struct net_tcp_hdr *)data;
	struct tide_net_listener *l;
	struct tide_net_conn *c;
	struct tcp_seg seg;
	uint32_t doff;

	s->st.tcp_rx_segs++;
	if (len < TCP_HLEN) {
		s->st.tcp_rx_bad_hdr++;
		return;
	}
	doff = (uint32_t)(th->doff >> 4) * 4;
	if (doff < TCP_HLEN || doff > len) {
		s->st.tcp_rx_bad_hdr++;
		return;
	}
	if (!(flags & TIDE_NET_RX_F_L4_CSUM_GOOD) &&
	    net_cksum_fold(net_cksum_add(net_cksum_pseudo(ip->saddr, ip->daddr, IPPROTO_TCP_, len),
					 data, len)) != 0) {
		s->st.tcp_rx_bad_csum++;
		return;
	}
	seg.flags = th->flags;
	if (tcp_parse_options(data + TCP_HLEN, doff - TCP_HLEN, seg.flags & TCPHDR_SYN,
			      &seg.opts) != 0) {
		s->st.tcp_rx_bad_hdr++;
		return;
	}
	seg.seq = ntohl(th->seq);
	seg.ack = ntohl(th->ack);
	seg.wnd = ntohs(th->window);
	seg.payload = data + doff;
	seg.len = len - doff;
	seg.seg_len =
		seg.len + ((seg.flags & TCPHDR_SYN) ? 1 : 0) + ((seg.flags & TCPHDR_FIN) ? 1 : 0);
	seg.saddr = ntohl(ip->saddr);
	seg.daddr = ntohl(ip->daddr);
	seg.sport = ntohs(th->sport);
	seg.dport = ntohs(th->dport);

	c = tcp_lookup(s, seg.daddr, seg.dport, seg.saddr, seg.sport);
	if (c != NULL) {
		tcp_rcv_state_process(c, &seg, now);
		return;
	}
	l = tcp_lookup_listener(s, seg.dport);
	if (l != NULL) {
		tcp_listen_rcv(l, &seg, now);
		return;
	}
	s->st.tcp_rx_no_conn++;
	tcp_send_reset(s, &seg, now);
}
