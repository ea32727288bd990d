/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP timers: retransmission (RFC 6298, with SYN and SYN-ACK), persist
 * (zero-window probes), delayed ACK, keepalive (RFC 9293 3.8.4) and
 * TIME_WAIT / orphaned FIN_WAIT_2. Each connection keeps absolute
 * deadlines; tide_net_timers_run() visits connections only when the
 * stack's earliest deadline has passed.
 */
#include <errno.h>

#include "net_internal.h"

void
tcp_arm(struct tide_net_conn *c, uint64_t *timer, uint64_t deadline)
{
	*timer = deadline;
	net_timer_note(c->stack, deadline);
}

void
tcp_clear_timers(struct tide_net_conn *c)
{
	c->t_rto = 0;
	c->t_persist = 0;
	c->t_delack = 0;
	c->t_keep = 0;
	c->t_wait = 0;
	c->t_tlp = 0;
	c->t_rack = 0;
	c->t_pace = 0;
}

/* Current RTO with exponential backoff (RFC 6298 5.5), capped at rto_max. */
static uint64_t
tcp_rto_val(const struct tide_net_conn *c)
{
	uint64_t max = c->stack->o.tcp_rto_max_us * NS_PER_US;
	uint64_t rto = c->rto;

	for (uint8_t i = 0; i < c->backoff && rto < max; i++) {
		rto <<= 1;
	}
	return rto < max ? rto : max;
}

void
tcp_rearm_rto(struct tide_net_conn *c, uint64_t now)
{
	tcp_arm(c, &c->t_rto, now + tcp_rto_val(c));
}

void
tcp_rtt_sample(struct tide_net_conn *c, uint64_t r)
{
	const struct tide_net_opts *o = &c->stack->o;
	uint64_t min = o->tcp_rto_min_us * NS_PER_US, max = o->tcp_rto_max_us * NS_PER_US;

	if (r == 0) {
		r = 1;
	}
	c->rtt_last = r;
	if (c->rtt_min == 0 || r < c->rtt_min) {
		c->rtt_min = r;
	}
	if (c->srtt == 0) {
		c->srtt = r;
		c->rttvar = r / 2;
	} else {
		uint64_t delta = c->srtt > r ? c->srtt - r : r - c->srtt;

		c->rttvar = (3 * c->rttvar + delta) / 4;
		c->srtt = (7 * c->srtt + r) / 8;
	}
	c->rto = c->srtt + (4 * c->rttvar > NS_PER_US ? 4 * c->rttvar : NS_PER_US);
	if (c->rto < min) {
		c->rto = min;
	}
	if (c->rto > max) {
		c->rto = max;
	}
}

void
tcp_keepalive_reset(struct tide_net_conn *c, uint64_t now)
{
	c->keep_probes = 0;
	if (c->stack->o.tcp_keepalive &&
	    ((1u << c->state) & (TCPF_ESTABLISHED | TCPF_CLOSE_WAIT))) {
		tcp_arm(c, &c->t_keep, now + c->stack->o.tcp_keepalive_idle_ms * NS_PER_MS);
	}
}

void
tcp_time_wait(struct tide_net_conn *c, uint64_t now)
{
	tcp_set_state(c, TCP_TIME_WAIT);
	tcp_clear_timers(c);
	if (c->stack->o.tcp_time_wait_ms == 0) {
		tcp_done(c, 0);
		return;
	}
	tcp_arm(c, &c->t_wait, now + c->stack->o.tcp_time_wait_ms * NS_PER_MS);
}

static void
tcp_timeout(struct tide_net_conn *c, uint64_t now)
{
	c->stack->st.tcp_conn_timeouts++;
	if ((1u << c->state) & ~(TCPF_SYN_SENT | TCPF_SYN_RECV)) {
		tcp_send_active_reset(c, now);
	}
	tcp_done(c, -ETIMEDOUT);
}

void
tcp_rto_undo(struct tide_net_conn *c)
{
	/* RFC 4015 3.2: back to the window before the timeout; the flight the
	 * timeout would have resent is still in the network, so stop resending it. */
	c->rto_undo = false;
	if (c->cwnd < c->undo_cwnd) {
		c->cwnd = c->undo_cwnd;
	}
	if (c->ssthresh < c->undo_ssthresh) {
		c->ssthresh = c->undo_ssthresh;
	}
	c->loss_state = false;
	c->in_recovery = false;
	c->dupacks = 0;
	c->rtx_n = 0;
	c->recover = c->snd_una;
	if (before(c->snd_nxt, c->snd_max)) {
		c->snd_nxt = c->snd_max; /* go-back-N (no SACK) rewound it */
	}
	c->stack->rto_undone++;
}

/* Linux tcp_retransmit_timer. */
static void
tcp_retransmit_timer(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;

	if ((1u << c->state) & (TCPF_SYN_SENT | TCPF_SYN_RECV)) {
		uint8_t max = s->o.tcp_syn_retries;

		/*
		 * A half-open entry holds a backlog slot: with the 1 s initial RTO,
		 * 5 SYN-ACK retries free it after 63 s (Linux's default) where the 6
		 * SYN retries would keep it 127 s. Cookies answer SYNs meanwhile.
		 */
		if (c->state == TCP_SYN_RECV && !c->active && max > TCP_SYNACK_RETRIES) {
			max = TCP_SYNACK_RETRIES;
		}
		if (c->retries >= max) {
			tcp_timeout(c, now);
			return;
		}
		s->st.tcp_rto_fired++;
		s->st.tcp_retrans_segs++;
		c->retries++;
		c->backoff++;
		c->rtt_timing = false;
		if (c->state == TCP_SYN_SENT) {
			tcp_send_syn(c, now);
		} else {
			tcp_send_synack(c, now);
		}
		return;
	}
	if (c->snd_una == c->snd_max || !((1u << c->state) & TCPF_CAN_SEND)) {
		return;
	}
	if (c->retries >= s->o.tcp_max_retries) {
		tcp_timeout(c, now);
		return;
	}
	s->st.tcp_rto_fired++;
	if (c->backoff == 0) {
		/* Eifel (RFC 3522): remember what this retransmission carries and what
		 * to restore should the original turn out to have arrived. */
		c->rto_undo = c->ts_ok;
		c->rto_tsval = tcp_tsval_at(c, now);
		c->undo_cwnd = c->cwnd;
		c->undo_ssthresh = c->ssthresh;
		/* RFC 5681 3.1 (4): only the first timeout of a loss episode halves. */
		c->ssthresh = c->cc->ssthresh(c, now);
	}
	c->cwnd = c->mss;
	c->pace_next = 0; /* the timeout's resend is not held behind the old schedule */
	c->rtt_timing = false;
	c->retries++;
	c->backoff++;
	c->t_rto = 0;
	c->t_tlp = 0;
	/*
	 * No probe until an ACK brings new data (RFC 8985 7: probes come before
	 * a timeout, not after): against a silent peer only the backed-off RTO
	 * resends, as in Linux, not a train of probes after every timeout.
	 */
	c->tlp_done = true;
	if (c->sack_ok) {
		/* RFC 6675 5.1: resend the unSACKed bytes only, as slow start allows. */
		tcp_sack_on_rto(c);
	} else {
		/* Go back N: resend from snd_una as the (now one-segment) window allows. */
		c->in_recovery = false;
		c->dupacks = 0;
		c->recover = c->snd_max;
		c->snd_nxt = c->snd_una;
	}
	tcp_write_xmit(c, now);
	if (c->t_rto == 0 && c->t_persist == 0) {
		tcp_rearm_rto(c, now);
	}
}

static void
tcp_persist_timer(struct tide_net_conn *c, uint64_t now)
{
	uint64_t max = c->stack->o.tcp_rto_max_us * NS_PER_US, next = c->rto;

	if (c->snd_wnd != 0 || !((1u << c->state) & TCPF_CAN_SEND)) {
		c->probes = 0;
		c->probes_out = 0;
		tcp_write_xmit(c, now);
		return;
	}
	/*
	 * RFC 9293 3.8.6.1: keep probing as long as the peer answers. One that stopped
	 * answering (dead behind a closed window) times out as a data retransmission
	 * does, after tcp_max_retries probes without an answer, as Linux does: else the
	 * connection, and every zero-copy send queued on it, lived for ever (with the
	 * persist timer armed the retransmission timer is not).
	 */
	if (c->probes_out >= c->stack->o.tcp_max_retries) {
		tcp_timeout(c, now);
		return;
	}
	c->stack->st.tcp_window_probes++;
	tcp_send_probe(c, now);
	c->probes_out++;
	if (c->probes < 30) {
		c->probes++;
	}
	for (uint8_t i = 0; i < c->probes && next < max; i++) {
		next <<= 1;
	}
	tcp_arm(c, &c->t_persist, now + (next < max ? next : max));
}

static void
tcp_keepalive_timer(struct tide_net_conn *c, uint64_t now)
{
	const struct tide_net_opts *o = &c->stack->o;

	if (!((1u << c->state) & (TCPF_ESTABLISHED | TCPF_CLOSE_WAIT))) {
		return;
	}
	if (c->keep_probes >= o->tcp_keepalive_probes) {
		tcp_timeout(c, now);
		return;
	}
	c->keep_probes++;
	c->stack->st.tcp_keepalive_probes++;
	tcp_send_probe(c, now);
	tcp_arm(c, &c->t_keep, now + o->tcp_keepalive_intvl_ms * NS_PER_MS);
}

static bool
due(uint64_t *t, uint64_t now)
{
	if (*t != 0 && *t <= now) {
		*t = 0;
		return true;
	}
	return false;
}

int
tcp_conn_timers(struct tide_net_conn *c, uint64_t now)
{
	int fired = 0;

	if (due(&c->t_wait, now)) {
		fired++;
		tcp_done(c, 0);
		return fired;
	}
	/* A due probe goes before a due RTO: it re-arms the RTO (tcp_tlp_arm puts
	 * a probe that would land on the RTO just before it, to go instead). */
	if (due(&c->t_tlp, now)) {
		fired++;
		tcp_tlp_fire(c, now);
	}
	if (c->state != TCP_CLOSE && due(&c->t_rto, now)) {
		fired++;
		tcp_retransmit_timer(c, now);
	}
	if (c->state != TCP_CLOSE && due(&c->t_rack, now)) {
		fired++;
		tcp_rack_timer(c, now);
	}
	if (c->state != TCP_CLOSE && due(&c->t_persist, now)) {
		fired++;
		tcp_persist_timer(c, now);
	}
	if (c->state != TCP_CLOSE && due(&c->t_delack, now)) {
		fired++;
		c->stack->st.tcp_delayed_acks++;
		tcp_send_ack(c, now);
	}
	if (c->state != TCP_CLOSE && due(&c->t_keep, now)) {
		fired++;
		tcp_keepalive_timer(c, now);
	}
	if (c->state != TCP_CLOSE && due(&c->t_pace, now)) {
		fired++;
		tcp_write_xmit(c, now);
	}
	if (c->state != TCP_CLOSE) {
		net_timer_note(c->stack, c->t_rto);
		net_timer_note(c->stack, c->t_persist);
		net_timer_note(c->stack, c->t_delack);
		net_timer_note(c->stack, c->t_keep);
		net_timer_note(c->stack, c->t_wait);
		net_timer_note(c->stack, c->t_tlp);
		net_timer_note(c->stack, c->t_rack);
		net_timer_note(c->stack, c->t_pace);
	}
	return fired;
}
