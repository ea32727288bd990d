/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Selective acknowledgment.
 *
 * Receiver (RFC 2018, RFC 2883): SACK blocks are derived from the
 * out-of-order queue on every ACK; the first block covers the newest arrival
 * and a D-SACK for duplicate data goes before it once. Data that only grows
 * the run the last SACK reported is answered once per RX burst (tcp_data_queue;
 * Linux compresses SACKs likewise); a new hole or run is answered at once.
 *
 * Sender (RFC 6675): a bounded scoreboard of SACKed ranges, IsLost by
 * DupThresh segments or blocks SACKed above, pipe, and NextSeg rule 1/2
 * (holes first, then new data) driven by tcp_write_xmit. After an RTO the
 * scoreboard is kept (unless the receiver reneged) and every unSACKed byte
 * below the recovery point counts as lost, so only holes are resent.
 * Retransmissions are remembered with the snd_max they were sent at: when
 * DupThresh of data sent after one is SACKed while it is not, it was lost
 * again and goes out once more instead of waiting for the RTO.
 *
 * RACK (RFC 8985 6, by time): a retransmission, or original data below a
 * SACKed range, is lost once data sent after it was SACKed and a reordering
 * window passed, decided on its own timer (t_rack) so no further ACK is
 * needed. Tail loss probes (RFC 8985 7, t_tlp) cover tails with no such
 * evidence, before the RTO only.
 */
#include <string.h>

#include "net_internal.h"

/* ---- receiver ---- */

/* Walks the out-of-order queue as maximal contiguous runs (entries never overlap). */
struct ooo_runs {
	const struct tcp_ooo *o;
};

static bool
run_next(struct ooo_runs *it, struct tcp_sack_blk *r)
{
	if (it->o == NULL) {
		return false;
	}
	r->start = it->o->seq;
	r->end = it->o->seq + it->o->len;
	it->o = it->o->next;
	while (it->o != NULL && it->o->seq == r->end) {
		r->end += it->o->len;
		it->o = it->o->next;
	}
	return true;
}

static bool
ooo_run_of(struct tide_net_conn *c, uint32_t seq, struct tcp_sack_blk *out)
{
	struct ooo_runs it = {c->ooo};
	struct tcp_sack_blk r;
	const struct tcp_ooo *tail = tcp_ooo_tail(c);

	if (tail != NULL && !before(seq, c->ooo_tail_run) && before(seq, tail->seq + tail->len)) {
		/* The last run, where the newest arrivals mostly are: no walk. */
		out->start = c->ooo_tail_run;
		out->end = tail->seq + tail->len;
		return true;
	}

	while (run_next(&it, &r)) {
		if (!before(seq, r.start) && before(seq, r.end)) {
			*out = r;
			return true;
		}
	}
	return false;
}

void
tcp_sack_rcv_note(struct tide_net_conn *c, uint32_t seq)
{
	struct tcp_sack_blk run;
	bool have;
	uint8_t n = 0;

	if (!c->sack_ok) {
		return;
	}
	have = ooo_run_of(c, seq, &run);
	/* Keep older anchors only when they still name a different run (bounded by 4). */
	for (uint8_t i = 0; i < c->sack_anchor_n; i++) {
		uint32_t a = c->sack_anchor[i];

		if (before(a, c->rcv_nxt)) {
			continue;
		}
		if (have && !before(a, run.start) && before(a, run.end)) {
			continue;
		}
		c->sack_anchor[n++] = a;
	}
	if (n == TCP_SACK_WIRE_MAX) {
		n--;
	}
	memmove(c->sack_anchor + 1, c->sack_anchor, n * sizeof(c->sack_anchor[0]));
	c->sack_anchor[0] = seq;
	c->sack_anchor_n = (uint8_t)(n + 1);
}

bool
tcp_sack_rcv_extends(struct tide_net_conn *c, uint32_t seq)
{
	struct tcp_sack_blk run;

	if (!c->sack_ok || c->sack_anchor_n == 0 || c->ooo == NULL ||
	    before(c->sack_anchor[0], c->rcv_nxt)) {
		return false;
	}
	return ooo_run_of(c, c->sack_anchor[0], &run) && run.end == seq;
}

void
tcp_sack_rcv_dsack(struct tide_net_conn *c, uint32_t start, uint32_t end)
{
	if (!c->sack_ok || !before(start, end)) {
		return;
	}
	c->dsack.start = start;
	c->dsack.end = end;
	c->dsack_pending = true;
}

static bool
blk_listed(const struct tcp_sack_blk *v, uint8_t from, uint8_t n, const struct tcp_sack_blk *b)
{
	for (uint8_t i = from; i < n; i++) {
		if (v[i].start == b->start) {
			return true;
		}
	}
	return false;
}

uint8_t
tcp_sack_rcv_blocks(struct tide_net_conn *c, struct tcp_sack_blk *out, uint8_t max)
{
	struct ooo_runs it = {c->ooo};
	struct tcp_sack_blk r;
	uint8_t n = 0, first;

	if (!c->sack_ok || max == 0) {
		return 0;
	}
	if (max > TCP_SACK_WIRE_MAX) {
		max = TCP_SACK_WIRE_MAX;
	}
	if (c->dsack_pending) {
		out[n++] = c->dsack;
	}
	first = n;
	for (uint8_t i = 0; i < c->sack_anchor_n && n < max; i++) {
		uint32_t a = c->sack_anchor[i];

		if (before(a, c->rcv_nxt) || !ooo_run_of(c, a, &r) ||
		    blk_listed(out, first, n, &r)) {
			continue;
		}
		out[n++] = r;
	}
	while (n < max && run_next(&it, &r)) {
		if (!blk_listed(out, first, n, &r)) {
			out[n++] = r;
		}
	}
	return n;
}

uint32_t
tcp_sack_rcv_optlen(const struct tide_net_conn *c)
{
	if (!c->sack_ok || (c->ooo == NULL && !c->dsack_pending)) {
		return 0;
	}
	/* NOP NOP kind len + blocks; 3 fit beside timestamps, 4 without. */
	return 4u + 8u * (c->ts_ok ? 3u : 4u);
}

/* ---- sender scoreboard ---- */

static uint32_t
seq_max(uint32_t a, uint32_t b)
{
	return after(a, b) ? a : b;
}

static uint32_t
seq_min(uint32_t a, uint32_t b)
{
	return before(a, b) ? a : b;
}

uint32_t
tcp_sack_sacked_in(const struct tide_net_conn *c, uint32_t from, uint32_t to)
{
	uint32_t sum = 0;

	for (uint8_t i = 0; i < c->sb_n; i++) {
		uint32_t lo = seq_max(c->sb[i].start, from), hi = seq_min(c->sb[i].end, to);

		if (before(lo, hi)) {
			sum += hi - lo;
		}
	}
	return sum;
}

static uint32_t
unsacked_in(const struct tide_net_conn *c, uint32_t from, uint32_t to)
{
	if (!before(from, to)) {
		return 0;
	}
	return (to - from) - tcp_sack_sacked_in(c, from, to);
}

/* Merge [s, e) into the scoreboard. Returns the bytes it newly covers. */
static uint32_t
sb_insert(struct tide_net_conn *c, uint32_t s, uint32_t e)
{
	uint32_t newly = unsacked_in(c, s, e);
	uint8_t i = 0, j;

	while (i < c->sb_n && before(c->sb[i].end, s)) {
		i++;
	}
	j = i;
	while (j < c->sb_n && !after(c->sb[j].start, e)) {
		s = seq_min(s, c->sb[j].start);
		e = seq_max(e, c->sb[j].end);
		j++;
	}
	if (j > i) {
		c->sb[i] = (struct tcp_sack_blk){s, e};
		memmove(c->sb + i + 1, c->sb + j, (size_t)(c->sb_n - j) * sizeof(c->sb[0]));
		c->sb_n = (uint8_t)(c->sb_n - (j - i - 1));
		return newly;
	}
	if (c->sb_n == TCP_SB_MAX) {
		/*
		 * Full: forget the highest range. Ranges near snd_una decide what is
		 * resent first; a forgotten one only costs a needless retransmission.
		 */
		c->stack->st.tcp_sack_sb_overflow++;
		if (i == c->sb_n) {
			return 0;
		}
		c->sb_n--;
	}
	memmove(c->sb + i + 1, c->sb + i, (size_t)(c->sb_n - i) * sizeof(c->sb[0]));
	c->sb[i] = (struct tcp_sack_blk){s, e};
	c->sb_n++;
	return newly;
}

uint32_t
tcp_sack_update(struct tide_net_conn *c, const struct tcp_opts *o, uint32_t ack)
{
	struct tide_net_stack *st = c->stack;
	uint32_t newly = 0;

	for (uint8_t i = 0; i < o->num_sacks && i < TCP_SACK_WIRE_MAX; i++) {
		uint32_t s = o->sacks[i].start, e = o->sacks[i].end;

		if (!before(s, e)) {
			st->st.tcp_sack_rejected++;
			continue;
		}
		/* RFC 2883 4: below the cumulative ACK, or inside the second block. */
		if (i == 0 &&
		    (!after(e, ack) || (o->num_sacks > 1 && !before(s, o->sacks[1].start) &&
					!after(e, o->sacks[1].end)))) {
			st->st.tcp_dsack_rx++;
			if (before(s, c->rtx_high) &&
			    c->rtx_high - s <= c->sbuf.cap + c->max_snd_wnd) {
				st->st.tcp_spurious_retrans++;
			}
			continue;
		}
		/*
		 * RFC 5961 spirit: a block must lie in data we sent and the receiver
		 * could hold; blocks beyond snd_max are forged or corrupt.
		 */
		if (after(e, c->snd_max) || e - s > c->snd_max - c->snd_una) {
			st->st.tcp_sack_rejected++;
			continue;
		}
		if (!after(e, ack)) {
			continue; /* stale: cumulatively acknowledged meanwhile */
		}
		if (before(s, ack)) {
			s = ack;
		}
		st->st.tcp_sack_blocks_rx++;
		newly += sb_insert(c, s, e);
	}
	return newly;
}

void
tcp_sack_clean(struct tide_net_conn *c)
{
	uint32_t una = c->snd_una;
	uint8_t k = 0;

	for (uint8_t i = 0; i < c->sb_n; i++) {
		struct tcp_sack_blk b = c->sb[i];

		if (!after(b.end, una)) {
			continue;
		}
		if (before(b.start, una)) {
			b.start = una;
		}
		c->sb[k++] = b;
	}
	c->sb_n = k;
	if (before(c->rack_lost, una)) {
		c->rack_lost = una;
	}
	if (c->rack_seen != 0 && !after(c->rack_seq, una)) {
		c->rack_seen = 0; /* the hole filled within the window: it was reordering */
	}
	k = 0;
	for (uint8_t i = 0; i < c->rtx_n; i++) {
		if (after(c->rtx[i].end, una)) {
			c->rtx[k++] = c->rtx[i];
		}
	}
	c->rtx_n = k;
}

void
tcp_sack_reset(struct tide_net_conn *c)
{
	c->sb_n = 0;
	c->rtx_n = 0;
	c->t_rack = 0;
	c->rack_seen = 0;
	c->rack_lost = c->snd_una;
	c->loss_state = false;
	c->high_rxt = c->snd_una;
}

/*
 * IsLost boundary from SACK information alone (RFC 6675 4, IsLost()), or
 * RACK's (rack_lost) when it is higher.
 */
static uint32_t
lost_edge_sacked(const struct tide_net_conn *c)
{
	uint32_t acc = 0, edge = c->snd_una;

	for (int i = c->sb_n - 1, cnt = 1; i >= 0; i--, cnt++) {
		acc += c->sb[i].end - c->sb[i].start;
		if (acc > (TCP_DUPTHRESH - 1u) * c->mss || cnt >= TCP_DUPTHRESH) {
			edge = c->sb[i].start;
			break;
		}
	}
	if (after(c->rack_lost, edge) && !after(c->rack_lost, c->snd_max)) {
		edge = c->rack_lost;
	}
	return edge;
}

uint32_t
tcp_sack_lost_edge(const struct tide_net_conn *c)
{
	uint32_t edge = lost_edge_sacked(c);

	if (c->loss_state && after(c->recover, edge)) {
		edge = c->recover;
	}
	if (after(edge, c->snd_max)) {
		edge = c->snd_max;
	}
	return edge;
}

uint32_t
tcp_sack_pipe(const struct tide_net_conn *c)
{
	uint32_t una = c->snd_una, max = c->snd_max;
	uint32_t edge = tcp_sack_lost_edge(c), hr = c->high_rxt;
	uint32_t pipe, relost = 0;

	if (before(edge, una)) {
		edge = una;
	}
	hr = seq_min(seq_max(hr, una), max);
	/* Unlost, unSACKed originals plus retransmissions of lost bytes. */
	pipe = unsacked_in(c, edge, max) + unsacked_in(c, una, hr);
	for (uint8_t i = 0; i < c->rtx_n; i++) {
		if (c->rtx[i].relost) {
			relost += unsacked_in(c, seq_max(c->rtx[i].start, una), c->rtx[i].end);
		}
	}
	return pipe > relost ? pipe - relost : 0;
}

/* First unSACKed sequence at or above s. */
static uint32_t
skip_sacked(const struct tide_net_conn *c, uint32_t s)
{
	for (uint8_t i = 0; i < c->sb_n; i++) {
		if (!after(c->sb[i].start, s) && after(c->sb[i].end, s)) {
			s = c->sb[i].end;
		}
	}
	return s;
}

/* Start of the first SACKed range above s, or snd_max. */
static uint32_t
next_sacked(const struct tide_net_conn *c, uint32_t s)
{
	for (uint8_t i = 0; i < c->sb_n; i++) {
		if (after(c->sb[i].start, s)) {
			return c->sb[i].start;
		}
	}
	return c->snd_max;
}

/* One segment of the unSACKed range [s, e): data (and our FIN when it lies inside). */
static bool
hole_seg(const struct tide_net_conn *c, uint32_t s, uint32_t e, uint32_t smss, uint32_t *seq,
	 uint32_t *len, uint8_t *flags)
{
	uint32_t data_end = tcp_snd_end(c);
	bool fin_sent = c->fin_queued && after(c->snd_max, data_end);
	uint32_t n;

	if (!before(s, e)) {
		return false;
	}
	*seq = s;
	*flags = TCPHDR_ACK;
	if (!before(s, data_end)) {
		if (s != data_end || !fin_sent) {
			return false;
		}
		*len = 0;
		*flags |= TCPHDR_FIN;
		return true;
	}
	n = seq_min(e, data_end) - s;
	if (n > smss) {
		n = smss;
	}
	*len = n;
	*flags |= TCPHDR_PSH;
	if (fin_sent && s + n == data_end && after(e, data_end)) {
		*flags |= TCPHDR_FIN;
	}
	return true;
}

bool
tcp_sack_next_rtx(const struct tide_net_conn *c, uint32_t smss, uint32_t *seq, uint32_t *len,
		  uint8_t *flags, int *relost)
{
	uint32_t s, edge;

	for (uint8_t i = 0; i < c->rtx_n; i++) {
		const struct tcp_rtx_ent *r = &c->rtx[i];

		if (!r->relost) {
			continue;
		}
		s = skip_sacked(c, seq_max(r->start, c->snd_una));
		if (before(s, r->end) &&
		    hole_seg(c, s, seq_min(r->end, next_sacked(c, s)), smss, seq, len, flags)) {
			*relost = i;
			return true;
		}
	}
	*relost = -1;
	edge = tcp_sack_lost_edge(c);
	s = skip_sacked(c, seq_max(c->high_rxt, c->snd_una));
	if (!before(s, edge)) {
		return false;
	}
	return hole_seg(c, s, seq_min(next_sacked(c, s), edge), smss, seq, len, flags);
}

/*
 * Watch a retransmission of [seq, end) for a second loss. One that continues the
 * last entry (the next hole's segment, sent with no new data between) extends it,
 * timed from its last segment: a recovery resends runs of segments, and a log of
 * single segments filled up within one run. When the log is full the entry
 * highest in sequence gives way (the new one, if it is the highest): the lowest
 * holes are the ones the cumulative ACK waits for, and one that fell out of watch
 * waited for the RTO (seen at a 20-packet queue: a lost resend of snd_una, then
 * 200 ms of silence, then every segment resent).
 */
static void
rtx_log(struct tide_net_conn *c, uint32_t seq, uint32_t end, uint64_t now)
{
	struct tcp_rtx_ent *last = c->rtx_n > 0 ? &c->rtx[c->rtx_n - 1] : NULL;
	uint8_t hi = 0;

	if (last != NULL && last->end == seq && last->mark == c->snd_max && !last->relost) {
		last->end = end;
		last->sent = now;
		return;
	}
	if (c->rtx_n == TCP_RTX_LOG_MAX) {
		for (uint8_t i = 1; i < c->rtx_n; i++) {
			if (after(c->rtx[i].start, c->rtx[hi].start)) {
				hi = i;
			}
		}
		if (after(seq, c->rtx[hi].start)) {
			return; /* the new one is the highest: not watched */
		}
		memmove(c->rtx + hi, c->rtx + hi + 1,
			(size_t)(c->rtx_n - hi - 1) * sizeof(c->rtx[0]));
		c->rtx_n--;
	}
	c->rtx[c->rtx_n++] = (struct tcp_rtx_ent){seq, end, c->snd_max, false, now};
}

int
tcp_sack_retransmit(struct tide_net_conn *c, uint32_t seq, uint32_t len, uint8_t flags, int relost,
		    uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	uint32_t end = seq + len + ((flags & TCPHDR_FIN) ? 1 : 0);
	int rc = tcp_transmit(c, seq, len, flags, now);

	if (rc != 0) {
		return rc;
	}
	s->st.tcp_retrans_segs++;
	s->st.tcp_sack_retrans_segs++;
	if (c->in_recovery) {
		c->prr_out += len;
	}
	if (c->rtt_timing && !before(c->rtt_seq, seq) && before(c->rtt_seq, end)) {
		c->rtt_timing = false; /* Karn */
	}
	if (after(end, c->rtx_high)) {
		c->rtx_high = end;
	}
	if (relost >= 0 && relost < c->rtx_n && !before(end, c->rtx[relost].end)) {
		struct tcp_rtx_ent *r = &c->rtx[relost];

		r->start = seq;
		r->end = end;
		r->mark = c->snd_max;
		r->relost = false;
		r->sent = now;
	} else {
		if (relost >= 0 && relost < c->rtx_n) {
			/* Sent part of it (a smaller segment now): the rest stays owed. */
			c->rtx[relost].start = end;
		}
		if (relost < 0 && after(end, c->high_rxt)) {
			c->high_rxt = end;
		}
		rtx_log(c, seq, end, now);
	}
	if (c->t_rto == 0) {
		tcp_rearm_rto(c, now);
	}
	return 0;
}

/*
 * RACK's reordering window: how long after the evidence a loss is declared.
 * A quarter of the SRTT as RFC 8985 6.2 says, floored so that reordering
 * across one poll of a sub-10 us link is not taken for loss (a spurious
 * recovery halves the window); still far below any RTO or PTO.
 */
#define RACK_REO_MIN_NS (100 * NS_PER_US)

static uint64_t
rack_reo_wnd(const struct tide_net_conn *c)
{
	return c->srtt / 4 > RACK_REO_MIN_NS ? c->srtt / 4 : RACK_REO_MIN_NS;
}

/*
 * A retransmission is lost when it is not SACKed while DupThresh of data sent
 * after it is, or (RACK, RFC 8985 6.2) while anything sent after it is and
 * it has been out for more than an RTT plus a quarter for reordering. One
 * that has that evidence but not yet the time lowers *next to when it will.
 * Visits each of the at most TCP_RTX_LOG_MAX entries once. Returns how many
 * were newly marked.
 */
static unsigned
detect_lost_rtx(struct tide_net_conn *c, uint64_t now, uint64_t *next)
{
	uint32_t edge = lost_edge_sacked(c);
	uint64_t wait = c->srtt + c->srtt / 4;
	unsigned n = 0;

	for (uint8_t i = 0; i < c->rtx_n; i++) {
		struct tcp_rtx_ent *r = &c->rtx[i];

		if (r->relost) {
			continue;
		}
		if (!before(r->mark, edge)) {
			if (c->srtt == 0 || tcp_sack_sacked_in(c, r->mark, c->snd_max) == 0) {
				continue;
			}
			if (now - r->sent < wait) {
				if (unsacked_in(c, seq_max(r->start, c->snd_una), r->end) > 0 &&
				    (*next == 0 || r->sent + wait < *next)) {
					*next = r->sent + wait;
				}
				continue;
			}
		}
		if (unsacked_in(c, seq_max(r->start, c->snd_una), r->end) > 0) {
			r->relost = true;
			c->stack->st.tcp_lost_retrans++;
			n++;
		}
	}
	return n;
}

void
tcp_rack_sacked(struct tide_net_conn *c, uint64_t now)
{
	uint32_t e;

	/* One edge waits at a time; a later SACK sets the next when it ripens. */
	if (!c->sack_ok || c->srtt == 0 || c->rack_seen != 0 || c->sb_n == 0) {
		return;
	}
	/* Originals go out in sequence order: everything unSACKed below the
	 * highest SACKed range was sent before it. */
	e = c->sb[c->sb_n - 1].start;
	if (after(e, c->rack_lost) && after(e, c->snd_una)) {
		c->rack_seq = e;
		c->rack_seen = now != 0 ? now : 1;
	}
}

/*
 * RACK's time-based decisions (RFC 8985 6.2): the waiting SACK edge becomes
 * the lost edge once its window passed, and, in recovery, retransmissions
 * are checked (detect_lost_rtx). Arms t_rack for the earliest decision still
 * waiting, so none depends on another ACK arriving. Returns how many
 * retransmissions were newly marked lost.
 */
static unsigned
rack_detect(struct tide_net_conn *c, uint64_t now)
{
	uint64_t next = 0, reo = rack_reo_wnd(c);
	unsigned n = 0;

	if (c->rack_seen != 0) {
		if (now - c->rack_seen >= reo) {
			if (after(c->rack_seq, c->rack_lost)) {
				c->rack_lost = c->rack_seq;
			}
			c->rack_seen = 0;
		} else {
			next = c->rack_seen + reo;
		}
	}
	if (c->in_recovery || c->loss_state) {
		n = detect_lost_rtx(c, now, &next);
	}
	if (next != 0) {
		tcp_arm(c, &c->t_rack, next);
	} else {
		c->t_rack = 0;
	}
	return n;
}

void
tcp_rack_timer(struct tide_net_conn *c, uint64_t now)
{
	if (!c->sack_ok || c->snd_una == c->snd_max || !((1u << c->state) & TCPF_CAN_SEND)) {
		return;
	}
	/* A loss decision, not a probe: the losses go out as the window (pipe < cwnd)
	 * allows, entering recovery first if need be. */
	tcp_sack_check_loss(c, now);
	if (tcp_sack_recovering(c)) {
		tcp_write_xmit(c, now);
	}
}

/*
 * RFC 5827 early retransmit: with fewer than four segments out and nothing
 * more allowed out, DupThresh SACKs can never arrive; one less than the
 * segments out will do.
 */
static bool
early_retransmit(const struct tide_net_conn *c)
{
	uint32_t out = c->snd_max - c->snd_una, data_end = tcp_snd_end(c);
	uint32_t segs = (out + c->mss - 1) / c->mss, sacked;

	if (c->sb_n == 0 || segs >= 4 || segs < 2) {
		return false;
	}
	if (before(c->snd_max, data_end) &&
	    out - tcp_sack_sacked_in(c, c->snd_una, c->snd_max) < c->cwnd) {
		return false; /* limited transmit can still send and draw more SACKs */
	}
	sacked = tcp_sack_sacked_in(c, c->snd_una, c->snd_max);
	return sacked >= (segs - 1) * (uint32_t)c->mss || (c->sb_n >= segs - 1 && sacked > 0);
}

void
tcp_sack_check_loss(struct tide_net_conn *c, uint64_t now)
{
	uint32_t seq, len, smss;
	uint8_t flags;

	if (!c->sack_ok || c->snd_una == c->snd_max) {
		c->t_rack = 0;
		return;
	}
	rack_detect(c, now);
	if (c->in_recovery || c->loss_state) {
		return;
	}
	if (c->dupacks < TCP_DUPTHRESH && !after(lost_edge_sacked(c), c->snd_una) &&
	    !early_retransmit(c)) {
		return;
	}
	/* RFC 6675 5 (4): enter recovery; RecoveryPoint = HighData. */
	c->ssthresh = c->cc->ssthresh(c, now);
	c->cwnd = c->ssthresh;
	c->recover = c->snd_max;
	c->high_rxt = c->snd_una;
	c->rtx_n = 0;
	c->in_recovery = true;
	c->dupacks = 0;
	c->rtt_timing = false;
	c->recover_fs = c->snd_max - c->snd_una;
	c->prr_delivered = 0;
	c->prr_out = 0;
	c->stack->st.tcp_fast_retrans++;
	c->stack->st.tcp_sack_recoveries++;
	/* (4.3): the first unSACKed segment goes now, even if IsLost does not say so yet. */
	smss = c->mss - tcp_sack_rcv_optlen(c);
	seq = skip_sacked(c, c->snd_una);
	if (hole_seg(c, seq, next_sacked(c, seq), smss, &seq, &len, &flags)) {
		tcp_sack_retransmit(c, seq, len, flags, -1, now);
	}
}

/*
 * RFC 6937 (PRR-SSRB): while pipe is above ssthresh, send ssthresh/RecoverFS
 * of what is delivered, so the window comes down to ssthresh over one round
 * instead of at once; below it, grow back toward ssthresh by at most what is
 * delivered plus one segment per ACK. RFC 6675's rule alone (send while pipe
 * < cwnd = ssthresh) sends a burst whenever an ACK marks several holes lost,
 * into the queue that just overflowed: at a 20-packet queue, Tide -> Tide
 * retransmitted most segments twice (13,000 retransmissions for 11,600
 * segments) as those bursts lost the retransmissions too.
 */
void
tcp_sack_prr(struct tide_net_conn *c, uint32_t delivered)
{
	uint32_t pipe = tcp_sack_pipe(c), sndcnt;

	c->prr_delivered += delivered;
	if (pipe > c->ssthresh) {
		uint64_t fs = c->recover_fs != 0 ? c->recover_fs : 1;
		uint64_t due = ((uint64_t)c->prr_delivered * c->ssthresh + fs - 1) / fs;

		sndcnt = due > c->prr_out ? (uint32_t)(due - c->prr_out) : 0;
	} else {
		uint32_t limit = c->prr_delivered > c->prr_out ? c->prr_delivered - c->prr_out : 0;

		if (limit < delivered) {
			limit = delivered;
		}
		limit += c->mss;
		sndcnt = c->ssthresh - pipe < limit ? c->ssthresh - pipe : limit;
	}
	/* The first retransmission of a recovery goes whatever the count says. */
	if (sndcnt == 0 && c->prr_out == 0) {
		sndcnt = c->mss;
	}
	c->cwnd = pipe + sndcnt;
}

void
tcp_sack_on_rto(struct tide_net_conn *c)
{
	/*
	 * SACKed data starting right at snd_una means the receiver dropped what it
	 * SACKed (RFC 2018 8 reneging): trust nothing it said.
	 */
	if (c->sb_n > 0 && !after(c->sb[0].start, c->snd_una)) {
		c->sb_n = 0;
	}
	c->in_recovery = false;
	c->loss_state = true;
	c->dupacks = 0;
	c->recover = c->snd_max;
	c->high_rxt = c->snd_una;
	c->rtx_n = 0;
	c->t_rack = 0;
	c->rack_seen = 0;
}

/* ---- tail loss probe (RFC 8985 7), extended to recovery ---- */

#define TLP_PTO_MIN_NS (200 * NS_PER_US)
#define TLP_MAX_PROBES 6 /* probes per episode when more may follow (tcp_tlp_fire) */

/*
 * Probes per episode (RFC 8985 7.3): once a probe resent data outside
 * recovery, or TLP_MAX_PROBES probes went, or the RTO fired, none is armed until
 * an ACK acknowledges or SACKs new data (tlp_done), so an unanswered probe
 * leaves the RTO and its backoff alone, as in Linux (it was a train of probes
 * backing off up to the RTO: a silent peer saw ten times Linux's resends).
 * Probes of new data, and probes in recovery, may be followed by another, a
 * doubled PTO later (tcp_tlp_fire says why): at most TLP_MAX_PROBES in all.
 *
 * PTO = 2 SRTT (7.2), floored at TLP_PTO_MIN_NS so a peer's ordinary ACK
 * pacing does not draw probes: a receiver holds an ACK that only adds to a
 * SACKed run for about 100 us on a sub-ms path (Linux: SRTT/20 plus 100 us of
 * timer slack; Tide: SRTT/4), and the floor stays above that. It was 500 us:
 * at 5 % loss each way on a 100 us veth the sender then sat idle before each
 * of its ~550 probes per 128 MiB, and 200 us moved Tide -> Linux 1.24x as much
 * (medians of five, 139 against 112 MiB/s) with as many spurious
 * retransmissions (150-170); 100 us gained a little more but drew 1.5x the
 * probes. With one segment out the peer may hold its ACK for its delayed-ACK
 * time (WCDelAckT), taken as the RTO floor: the node sets that from the peers
 * it talks to (1 ms between Tide stacks, 200 ms for Linux's delayed ACKs). A
 * PTO past the RTO is cut to just before it, so the probe goes in place of
 * the timeout, without collapsing the window (the timer wheel runs a due
 * probe before a due RTO), and the probe re-arms the RTO.
 *
 * Where a peer answers a whole flight with one ACK (Linux does, for a
 * burst it takes in one softirq or read), a small window on a sub-ms link
 * makes a tail of every lost ACK, and a probe or its answer is lost as often
 * as anything else: with one probe per episode that was about 30 RTOs per
 * 64 MiB at 5 % loss each way (each 200 ms with Linux's floor:
 * tools/loss-bench.py); with up to three, none on a quiet machine. On a
 * loaded one (1-min load 8-12 on 2 CPUs) the receiver answers several probes
 * with one late ACK, and three left 11 RTOs in four such runs; six, 1. Probes also run in
 * recovery, for a lost retransmission with nothing sent after it to tell (a
 * tail the RACK timer never sees); lost retransmissions that do have
 * evidence are the RACK timer's (t_rack).
 */
void
tcp_tlp_arm(struct tide_net_conn *c, uint64_t now)
{
	uint64_t pto;

	if (!c->sack_ok || c->tlp_done || c->snd_una == c->snd_max || c->srtt == 0 ||
	    !((1u << c->state) & TCPF_CAN_SEND)) {
		c->t_tlp = 0;
		return;
	}
	pto = 2 * c->srtt;
	if (pto < TLP_PTO_MIN_NS) {
		pto = TLP_PTO_MIN_NS;
	}
	pto <<= c->tlp_n; /* a further probe of the episode backs off */
	if (c->snd_max - c->snd_una <= c->mss) {
		pto += (uint64_t)c->stack->o.tcp_rto_min_us * NS_PER_US;
	}
	if (c->t_rto != 0 && now + pto >= c->t_rto) {
		if (c->t_rto <= now + 1) {
			c->t_tlp = 0; /* the RTO is due: it resends */
			return;
		}
		pto = c->t_rto - 1 - now;
	}
	tcp_arm(c, &c->t_tlp, now + pto);
}

/*
 * RACK (RFC 8985 6.2) by time alone: a retransmission neither acknowledged
 * nor SACKed a reordering window (SRTT / 4) after an RTT is lost, whether or
 * not anything sent after it was delivered (that evidence is what
 * detect_lost_rtx waits for, and a tail never gets it). Returns how many
 * were newly marked.
 */
static unsigned
mark_lost_rtx_by_time(struct tide_net_conn *c, uint64_t now)
{
	uint64_t wait = c->srtt + c->srtt / 4;
	unsigned n = 0;

	for (uint8_t i = 0; i < c->rtx_n; i++) {
		struct tcp_rtx_ent *r = &c->rtx[i];

		if (r->relost || now - r->sent < wait) {
			continue;
		}
		if (unsacked_in(c, seq_max(r->start, c->snd_una), r->end) > 0) {
			r->relost = true;
			c->stack->st.tcp_lost_retrans++;
			n++;
		}
	}
	return n;
}

/* Send [seq, seq+len) outside the scoreboard; counts it as a probe. */
static int
tlp_send(struct tide_net_conn *c, uint32_t seq, uint32_t len, uint8_t flags, uint64_t now)
{
	if (tcp_transmit(c, seq, len, flags, now) != 0) {
		return -1;
	}
	c->stack->st.tcp_retrans_segs++;
	if (c->rtt_timing && !before(c->rtt_seq, seq) && before(c->rtt_seq, seq + len + 1)) {
		c->rtt_timing = false;
	}
	if (after(seq + len, c->rtx_high)) {
		c->rtx_high = seq + len;
	}
	return 0;
}

static bool
tlp_probe_recovery(struct tide_net_conn *c, uint64_t now)
{
	uint32_t smss = c->mss - tcp_sack_rcv_optlen(c), seq, len, s;
	uint64_t before_segs = c->stack->st.tcp_tx_segs;
	uint8_t flags;

	/* Lost retransmissions go again through the scoreboard, as pipe allows. */
	if (mark_lost_rtx_by_time(c, now) > 0) {
		tcp_write_xmit(c, now);
		if (c->stack->st.tcp_tx_segs != before_segs) {
			return true;
		}
	}
	/* Else the first unSACKed segment: what holds the cumulative ACK back. */
	s = skip_sacked(c, c->snd_una);
	if (hole_seg(c, s, next_sacked(c, s), smss, &seq, &len, &flags)) {
		return tlp_send(c, seq, len, flags, now) == 0;
	}
	return false;
}

static bool
tlp_probe_open(struct tide_net_conn *c, uint64_t now)
{
	uint32_t smss = c->mss - tcp_sack_rcv_optlen(c), e, s, seq, len;
	uint8_t flags;

	/* New data when the window allows (7.3), else the last unSACKed segment. */
	if (tcp_xmit_one_new(c, now) == 0) {
		return true;
	}
	e = c->snd_max;
	if (c->sb_n > 0 && c->sb[c->sb_n - 1].end == e) {
		e = c->sb[c->sb_n - 1].start;
	}
	s = e - c->snd_una > smss ? e - smss : c->snd_una;
	for (uint8_t i = 0; i < c->sb_n; i++) {
		if (before(c->sb[i].start, e) && after(c->sb[i].end, s)) {
			s = c->sb[i].end;
		}
	}
	/* Not a scoreboard retransmission: high_rxt and the watch list stay put. */
	return hole_seg(c, s, e, smss, &seq, &len, &flags) &&
	       tlp_send(c, seq, len, flags, now) == 0;
}

void
tcp_tlp_fire(struct tide_net_conn *c, uint64_t now)
{
	uint32_t max_before = c->snd_max;
	bool sent, rec;

	if (!c->sack_ok || c->tlp_done || c->snd_una == c->snd_max ||
	    !((1u << c->state) & TCPF_CAN_SEND)) {
		return;
	}
	rec = tcp_sack_recovering(c);
	sent = rec ? tlp_probe_recovery(c, now) : tlp_probe_open(c, now);
	if (sent) {
		c->stack->st.tcp_tlp_probes++;
	}
	c->tlp_n++;
	/*
	 * Outside recovery a probe that resent data, or none that could go (no
	 * buffer, nothing to resend), is the episode's one chance (7.3): the
	 * RTO, not the PTO, is armed behind it. A probe of new data is new data
	 * first: the window was full, not the network silent, and its ACK is as
	 * likely lost as the one that made the tail (a Linux receiver
	 * acknowledges a read's worth of segments with one ACK). In recovery the
	 * peer was heard from within the episode (it SACKed), and what the probe
	 * resends is a retransmission RACK found lost or the hole under the
	 * cumulative ACK. Up to TLP_MAX_PROBES such probes, each a doubled PTO
	 * after the one before, go before the timeout, so a lost ACK or a lost
	 * retransmission costs about a millisecond and not the RTO floor; a
	 * silent peer sees at most TLP_MAX_PROBES of them, then the RTO alone.
	 */
	if (!sent || (!rec && c->snd_max == max_before) || c->tlp_n >= TLP_MAX_PROBES) {
		c->tlp_done = true;
	}
	tcp_rearm_rto(c, now);
	if (!c->tlp_done) {
		tcp_tlp_arm(c, now);
	}
}
