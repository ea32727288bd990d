/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Congestion control behind struct tcp_cc_ops: NewReno (RFC 5681 window
 * growth; the recovery itself is RFC 6582 in tcp_input.c), CUBIC (RFC 9438)
 * and Westwood+; HyStart++ (RFC 9406) in the first slow start of all three.
 * Windows are in bytes.
 */
#include <math.h>
#include <string.h>

#include "net_internal.h"

#define TCP_INIT_CWND_SEGS 10 /* RFC 6928 */
#define TCP_CWND_MAX       (1u << 30)

/* ---- HyStart++ (RFC 9406) ----
 *
 * Slow start doubles the window each round until a loss, so it ends by
 * overflowing the bottleneck's queue with up to a window of losses. HyStart++
 * watches each round's least RTT instead: once it rose over the round
 * before's by a threshold, a queue is building, and growth drops to a quarter
 * (conservative slow start, CSS) for HS_CSS_ROUNDS rounds, then congestion
 * avoidance begins at that window; a round whose least RTT falls back below
 * the one that started CSS was noise, and slow start resumes. Only the first
 * slow start (ssthresh still unset), as RFC 9406 advises; a loss ends it.
 *
 * RTT samples: the connection times one segment per RTT for the RTO, too few
 * for a round's minimum (RFC 9406 wants TCP_HS_SAMPLES per round), and TSvals
 * count milliseconds. So the first TCP_HS_SAMPLES segments sent in each round
 * are timed here; their ACKs arrive early in the next round, so the samples
 * measure the queue that stood when the round before began.
 *
 * The threshold: RFC 9406 clamps an eighth of the RTT to 4..16 ms, for the
 * Internet. Tide's paths run at 20 us..1 ms, where a 4 ms rise is a queue
 * that has long overflowed (a 20-packet queue at 200 Mbit/s holds 1.2 ms), so
 * the floor here is 250 us: four full-size packets at 200 Mbit/s, far above
 * the round-to-round noise of a polling stack's least RTT.
 */
#define HS_THRESH_MIN_NS (250 * NS_PER_US)
#define HS_THRESH_MAX_NS (16 * NS_PER_MS)
#define HS_CSS_DIVISOR   4 /* CSS_GROWTH_DIVISOR */
#define HS_CSS_ROUNDS    5 /* CSS_ROUNDS */

static bool
hs_active(const struct tide_net_conn *c)
{
	return c->stack->o.tcp_hystart && c->ssthresh == UINT32_MAX;
}

static void
hs_reset(struct tide_net_conn *c)
{
	struct tcp_hystart *h = &c->hs;

	memset(h, 0, sizeof(*h));
	h->window_end = c->snd_nxt;
	h->cur_min = h->last_min = h->css_base = UINT64_MAX;
}

void
tcp_hystart_sent(struct tide_net_conn *c, uint32_t end, uint64_t now)
{
	struct tcp_hystart *h = &c->hs;

	if (!hs_active(c) || h->taken >= TCP_HS_SAMPLES || h->n >= TCP_HS_RING) {
		return;
	}
	uint8_t i = (uint8_t)((h->head + h->n) % TCP_HS_RING);

	h->seq[i] = end;
	h->at[i] = now;
	h->n++;
	h->taken++;
}

/* One RTT sample of the current round (RFC 9406 4.2). */
static void
hs_sample(struct tide_net_conn *c, uint64_t rtt)
{
	struct tcp_hystart *h = &c->hs;

	if (rtt < h->cur_min) {
		h->cur_min = rtt;
	}
	if (++h->samples < TCP_HS_SAMPLES) {
		return;
	}
	if (h->css) {
		if (h->cur_min < h->css_base) {
			h->css = false; /* the rise was noise: slow start again */
			h->css_base = UINT64_MAX;
		}
		return;
	}
	if (h->last_min == UINT64_MAX) {
		return;
	}
	uint64_t th = h->last_min / 8;

	th = th < HS_THRESH_MIN_NS   ? HS_THRESH_MIN_NS
	     : th > HS_THRESH_MAX_NS ? HS_THRESH_MAX_NS
				     : th;
	if (h->cur_min >= h->last_min + th) {
		h->css = true;
		h->css_base = h->cur_min;
		h->css_rounds = 0;
		c->stack->st.tcp_hystart_css++;
	}
}

void
tcp_hystart_acked(struct tide_net_conn *c, uint32_t ack, uint64_t now)
{
	struct tcp_hystart *h = &c->hs;

	if (!hs_active(c)) {
		h->n = 0;
		h->css = false;
		return;
	}
	if (!before(ack, h->window_end)) {
		/* A round ended: the stamps still out were sent in it, their samples
		 * belong to the one that begins. */
		h->window_end = c->snd_nxt;
		h->last_min = h->cur_min;
		h->cur_min = UINT64_MAX;
		h->samples = 0;
		h->taken = 0;
		if (h->css && ++h->css_rounds >= HS_CSS_ROUNDS) {
			c->ssthresh = c->cwnd; /* congestion avoidance from here */
			h->css = false;
			h->n = 0;
			c->stack->st.tcp_hystart_exits++;
			return;
		}
	}
	while (h->n > 0 && !after(h->seq[h->head], ack)) {
		hs_sample(c, now - h->at[h->head]);
		h->head = (uint8_t)((h->head + 1) % TCP_HS_RING);
		h->n--;
	}
}

/* ---- Pacing ----
 *
 * Without it a window leaves at the device's rate the moment ACKs open it: a
 * train of up to a window that lands whole in a bottleneck's queue. With
 * several flows through a shallow tail-drop queue the flow whose train
 * arrives first keeps the queue full and the others lose, their
 * retransmissions too, again and again. Paced, each flow's segments are
 * spread over its RTT and the queue sees them interleaved.
 *
 * The rate is the window over the RTT, times 2 in slow start (the window
 * doubles each round, so a round's flight must not take the whole of it) and
 * 1.2 after (headroom, so pacing alone never limits a flow the window does
 * not), as Linux's tcp_update_pacing_rate. The window is the larger of cwnd
 * and the flight (after a cut the flight still drains at the old rate).
 *
 * The RTT is the smoothed one, or the latest sample when that is less: one
 * timed segment per round moves the smoothed RTT an eighth of the way, so
 * after a cut has drained a bottleneck's queue it would still carry the
 * queue's delay for several rounds, and pace the smaller window below the
 * link's rate while the queue stands empty.
 *
 * Segments go back to back while the schedule is less than an eighth of the
 * RTT ahead, or two segments' time if that is longer: devices send in bursts,
 * and a poller wakes at a granularity of microseconds, not at every segment's
 * instant. A schedule that fell behind keeps one such burst of credit. No
 * pacing before the first RTT sample.
 *
 * Bounds: ns = len * rtt * 5 / w, len < 2^16, rtt < 2^37 ns (about 137 s, far
 * above the RTO ceiling that bounds what an RTT sample can be), so the
 * product stays below 2^56.
 */
static uint64_t
pace_rtt(const struct tide_net_conn *c)
{
	return c->rtt_last != 0 && c->rtt_last < c->srtt ? c->rtt_last : c->srtt;
}

static uint64_t
pace_ns(const struct tide_net_conn *c, uint32_t len)
{
	uint32_t flight = c->snd_nxt - c->snd_una;
	uint64_t w = c->cwnd > flight ? c->cwnd : flight, rtt = pace_rtt(c);

	if (w < c->mss) {
		w = c->mss;
	}
	if (c->cwnd < c->ssthresh / 2) {
		return (uint64_t)len * rtt / (2 * w);
	}
	return (uint64_t)len * rtt * 5 / (6 * w);
}

/* How far ahead of now the schedule may run: the burst allowance. */
static uint64_t
pace_burst(const struct tide_net_conn *c)
{
	uint64_t burst = pace_rtt(c) / 8, two = pace_ns(c, 2u * c->mss);

	return burst > two ? burst : two;
}

bool
tcp_pace_ok(struct tide_net_conn *c, uint64_t now)
{
	uint64_t burst;

	if (!c->stack->o.tcp_pacing || c->srtt == 0 || c->pace_next <= now) {
		return true;
	}
	burst = pace_burst(c);
	if (c->pace_next - now <= burst) {
		return true;
	}
	if (c->pace_next - now > 2 * pace_rtt(c) + burst) {
		/* Further ahead than one segment at the slowest rate can put it: the
		 * clock stepped back. Start the schedule again rather than wait. */
		c->pace_next = now;
		return true;
	}
	c->stack->st.tcp_paced++;
	tcp_arm(c, &c->t_pace, c->pace_next - burst);
	return false;
}

void
tcp_pace_sent(struct tide_net_conn *c, uint32_t len, uint64_t now)
{
	uint64_t burst, floor;

	if (!c->stack->o.tcp_pacing || c->srtt == 0) {
		return;
	}
	/*
	 * A schedule that fell behind (the poller woke late, or the sender had
	 * nothing to send) keeps at most one burst of credit: a late wake-up is
	 * made up for in part, and an idle spell never turns into a window at
	 * the device's rate.
	 */
	burst = pace_burst(c);
	floor = now > burst ? now - burst : 0;
	c->pace_next = (c->pace_next > floor ? c->pace_next : floor) + pace_ns(c, len);
}

/* Every control's start: the initial window, no ssthresh, its state zeroed. */
static void
cc_init(struct tide_net_conn *c)
{
	c->cwnd = TCP_INIT_CWND_SEGS * (uint32_t)c->mss;
	c->ssthresh = UINT32_MAX;
	memset(&c->cc_priv, 0, sizeof(c->cc_priv));
	hs_reset(c);
}

/* Slow start with appropriate byte counting (RFC 3465, L = 2), a quarter of it
 * in HyStart++'s conservative phase. Returns leftover bytes. */
static uint32_t
slow_start(struct tide_net_conn *c, uint32_t acked)
{
	uint32_t inc = acked < 2u * c->mss ? acked : 2u * c->mss;

	if (c->hs.css) {
		c->cwnd += inc / HS_CSS_DIVISOR; /* ssthresh is unset in CSS */
		return 0;
	}
	if (c->cwnd + inc > c->ssthresh) {
		inc = c->ssthresh > c->cwnd ? c->ssthresh - c->cwnd : 0;
	}
	c->cwnd += inc;
	return acked - inc;
}

/* NewReno's growth, its byte counter at *acc (NewReno's and Westwood+'s). */
static void
reno_grow(struct tide_net_conn *c, uint32_t acked, uint64_t *acc)
{
	if (c->cwnd < c->ssthresh) {
		acked = slow_start(c, acked);
		if (acked == 0) {
			return;
		}
	}
	/* One MSS per cwnd of acknowledged bytes (RFC 5681 3.1, byte counting). */
	*acc += acked;
	if (*acc >= c->cwnd) {
		*acc -= c->cwnd;
		if (c->cwnd < TCP_CWND_MAX) {
			c->cwnd += c->mss;
		}
	}
}

static void
reno_cong_avoid(struct tide_net_conn *c, uint32_t acked, uint64_t now)
{
	(void)now;
	reno_grow(c, acked, &c->cc_priv.raw[0]);
}

static uint32_t
reno_ssthresh(struct tide_net_conn *c, uint64_t now)
{
	uint32_t flight = c->snd_max - c->snd_una;
	uint32_t half = flight / 2;

	(void)now;
	c->cc_priv.raw[0] = 0;
	return half > 2u * c->mss ? half : 2u * c->mss; /* RFC 5681 (4) */
}

const struct tcp_cc_ops tcp_newreno_ops = {
	.name = "newreno",
	.init = cc_init,
	.cong_avoid = reno_cong_avoid,
	.ssthresh = reno_ssthresh,
};

/* ---- CUBIC (RFC 9438) ---- */

#define CUBIC_C    0.4
#define CUBIC_BETA 0.7

static void
cubic_cong_avoid(struct tide_net_conn *c, uint32_t acked, uint64_t now)
{
	struct tcp_cubic *cb = &c->cc_priv.cubic;
	double mss = c->mss, t, w_cubic, target;

	if (c->cwnd < c->ssthresh) {
		acked = slow_start(c, acked);
		if (acked == 0) {
			return;
		}
	}
	if (cb->epoch_start == 0) {
		cb->epoch_start = now ? now : 1;
		cb->ack_bytes = 0;
		if (cb->w_max < c->cwnd) {
			cb->w_max = c->cwnd;
			cb->k_us = 0;
		} else {
			/* RFC 9438 eq. 2: K = cbrt((W_max - cwnd_epoch) / C), in segments and
			 * seconds. */
			cb->k_us = (uint32_t)(cbrt((cb->w_max - c->cwnd) / mss / CUBIC_C) * 1e6);
		}
		cb->w_est = c->cwnd;
	}
	t = (double)(now - cb->epoch_start) / 1e9 + (c->srtt ? (double)c->srtt / 1e9 : 0);
	t -= cb->k_us / 1e6;
	w_cubic = (CUBIC_C * t * t * t) * mss + cb->w_max;
	/* Reno-friendly region (RFC 9438 4.3): alpha = 3(1-beta)/(1+beta) per RTT. */
	cb->ack_bytes += acked;
	if (cb->ack_bytes >= c->cwnd) {
		cb->ack_bytes -= c->cwnd;
		cb->w_est += (uint32_t)(3.0 * (1 - CUBIC_BETA) / (1 + CUBIC_BETA) * mss);
	}
	target = w_cubic > 1.5 * c->cwnd ? 1.5 * c->cwnd : w_cubic;
	if (cb->w_est > target) {
		target = cb->w_est;
	}
	if (target > c->cwnd) {
		/* Grow by (target - cwnd) / cwnd per MSS acked (RFC 9438 4.4). */
		double inc = (target - c->cwnd) / c->cwnd * acked;

		if (inc < 1) {
			inc = 1;
		}
		if (c->cwnd + inc < TCP_CWND_MAX) {
			c->cwnd += (uint32_t)inc;
		}
	}
}

static uint32_t
cubic_ssthresh(struct tide_net_conn *c, uint64_t now)
{
	struct tcp_cubic *cb = &c->cc_priv.cubic;
	uint32_t ss;

	(void)now;
	/* Fast convergence (RFC 9438 4.7). */
	if (c->cwnd < cb->w_max) {
		cb->w_max = (uint32_t)(c->cwnd * (1 + CUBIC_BETA) / 2);
	} else {
		cb->w_max = c->cwnd;
	}
	cb->epoch_start = 0;
	ss = (uint32_t)(c->cwnd * CUBIC_BETA);
	return ss > 2u * c->mss ? ss : 2u * c->mss;
}

const struct tcp_cc_ops tcp_cubic_ops = {
	.name = "cubic",
	.init = cc_init,
	.cong_avoid = cubic_cong_avoid,
	.ssthresh = cubic_ssthresh,
};

/* ---- Westwood+ ----
 *
 * NewReno's growth, but a loss sets ssthresh from what the path delivers: the
 * acknowledged bytes' rate (sampled over at least one RTT, filtered twice) times
 * the least RTT seen. A random loss on a path without a standing queue then
 * leaves the window about where it was, where NewReno halves it; a loss at a
 * full queue brings the window down to the path's bandwidth-delay product,
 * which drains the queue. The estimate can be low (an application that sent
 * little, the first RTTs): ssthresh is never below NewReno's half, so the
 * control is never slower than NewReno, and never above cwnd; the loss that
 * ends slow start takes NewReno's half. */

/* A sample covers at least this long (and at least one smoothed RTT): shorter
 * intervals see the ACK clumps a polling receiver sends, not the rate. */
#define WESTWOOD_WIN_MIN_NS (2 * NS_PER_MS)

static void
westwood_on_ack(struct tide_net_conn *c, uint32_t acked, uint64_t now)
{
	struct tcp_westwood *w = &c->cc_priv.westwood;
	uint64_t win = c->srtt > WESTWOOD_WIN_MIN_NS ? c->srtt : WESTWOOD_WIN_MIN_NS, d, sample;

	if (w->win_start == 0) {
		w->win_start = now ? now : 1;
		w->bk = 0;
		return; /* bytes acked before the first interval began are not timed */
	}
	w->bk += acked;
	d = now - w->win_start;
	if (d < win) {
		return;
	}
	/* In microseconds: bk * 10^6 stays far inside 64 bits for any rate and window
	 * (10 GB/s for 1 s: 10^16). */
	d /= NS_PER_US;
	sample = d > 0 ? w->bk * 1000000u / d : 0;
	/* Two 7/8 stages, as Westwood+: the first takes the samples, the second
	 * smooths the first; the very first sample seeds both. */
	if (w->bw == 0) {
		w->bw_ns = w->bw = sample;
	} else {
		w->bw_ns = (7 * w->bw_ns + sample) / 8;
		w->bw = (7 * w->bw + w->bw_ns) / 8;
	}
	w->win_start = now;
	w->bk = 0;
}

static void
westwood_cong_avoid(struct tide_net_conn *c, uint32_t acked, uint64_t now)
{
	(void)now;
	reno_grow(c, acked, &c->cc_priv.westwood.reno_acc);
}

static uint32_t
westwood_ssthresh(struct tide_net_conn *c, uint64_t now)
{
	const struct tcp_westwood *w = &c->cc_priv.westwood;
	uint32_t flight = c->snd_max - c->snd_una, half = flight / 2;
	uint64_t bdp = w->bw * (c->rtt_min / NS_PER_US) / 1000000u; /* bytes; 0: no estimate */

	(void)now;
	c->cc_priv.westwood.reno_acc = 0;
	if (half < 2u * c->mss) {
		half = 2u * c->mss; /* RFC 5681 (4) */
	}
	/* The first loss ends slow start, whose doubling rate is no estimate of the
	 * path's (a token bucket's burst passes it at line rate): NewReno's half
	 * then. Seen at a 200 Mbit/s tbf: 1 MiB flows took 246 ms instead of 44. */
	if (c->ssthresh == UINT32_MAX) {
		return half;
	}
	if (bdp > c->cwnd) {
		bdp = c->cwnd; /* a loss never raises the window */
	}
	return bdp > half ? (uint32_t)bdp : half;
}

const struct tcp_cc_ops tcp_westwood_ops = {
	.name = "westwood",
	.init = cc_init,
	.cong_avoid = westwood_cong_avoid,
	.ssthresh = westwood_ssthresh,
	.on_ack = westwood_on_ack,
};

const struct tcp_cc_ops *
tcp_cc_get(enum tide_net_cc cc)
{
	switch (cc) {
	case TIDE_NET_CC_CUBIC:
		return &tcp_cubic_ops;
	case TIDE_NET_CC_WESTWOOD:
		return &tcp_westwood_ops;
	default:
		return &tcp_newreno_ops;
	}
}
