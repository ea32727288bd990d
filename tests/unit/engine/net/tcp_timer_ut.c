/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

#define IN(e, ...) ut_tcp_in((e), &(struct ut_seg){__VA_ARGS__})
#define P          1000u

static void
rto_tweak(struct tide_net_opts *o)
{
	o->tcp_rto_init_us = 10000; /* 10 ms */
	o->tcp_rto_min_us = 10000;
	o->tcp_max_retries = 4;
	o->tcp_syn_retries = 2;
}

/* Advance in 100 us steps until a frame appears; returns the elapsed time. */
static uint64_t
until_frame(struct ut_env *e, uint64_t limit)
{
	uint64_t t = 0;

	while (ut_dev_pending(&e->dev) == 0 && t < limit) {
		ut_advance(e, 100 * NS_PER_US);
		t += 100 * NS_PER_US;
	}
	return t;
}

static void
test_rto_backoff_and_timeout(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;
	int reason = 0;

	ut_env_init(&e, rto_tweak);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	CU_ASSERT_EQUAL(tide_net_send(c, "data", 4, e.now), 4);
	ut_dev_drain(&e.dev);
	/* RTO was sampled from the handshake (0 ns here) and clamped to the 10 ms floor. */
	uint64_t expect = 10 * NS_PER_MS;
	for (int i = 0; i < 4; i++) {
		uint64_t t = until_frame(&e, 10000 * NS_PER_MS);
		CU_ASSERT(t >= expect && t <= expect + 100 * NS_PER_US);
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
		CU_ASSERT_EQUAL(o.seq, I + 1);
		CU_ASSERT_EQUAL(o.len, 4);
		CU_ASSERT_EQUAL(c->cwnd, c->mss);
		expect *= 2;
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 4);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_retrans_segs, 4);
	/* Fifth expiry: retries exhausted, RST, ETIMEDOUT. */
	until_frame(&e, 10000 * NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT(o.flags & TCPHDR_RST);
	CU_ASSERT(ut_app_has(&a, TIDE_NET_EV_CLOSED, &reason));
	CU_ASSERT_EQUAL(reason, -ETIMEDOUT);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conn_timeouts, 1);
	tide_net_close(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_ack_resets_backoff(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;

	ut_env_init(&e, rto_tweak);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	tide_net_send(c, "abcdefgh", 8, e.now);
	ut_dev_drain(&e.dev);
	until_frame(&e, NS_PER_MS * 1000);
	until_frame(&e, NS_PER_MS * 1000);
	CU_ASSERT_EQUAL(c->backoff, 1);
	ut_dev_drain(&e.dev);
	until_frame(&e, NS_PER_MS * 1000);
	CU_ASSERT_EQUAL(c->backoff, 2);
	ut_dev_drain(&e.dev);
	IN(&e, .seq = P + 1, .ack = I + 9, .flags = TCPHDR_ACK);
	CU_ASSERT_EQUAL(c->backoff, 0);
	CU_ASSERT_EQUAL(c->t_rto, 0);
	CU_ASSERT_EQUAL(c->sbuf.len, 0);
	(void)o;
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * Eifel (RFC 3522 / 4015): after a timeout, the first ACK of new data tells by
 * its TSecr whether it answers the original transmission (the timeout was
 * spurious: window restored, the rest of the flight not resent) or the
 * retransmission (a real loss: slow start and go-back-N go on).
 */
static void
check_rto_undo(bool spurious)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint8_t syn[16] = {TCPOPT_MSS, 4, 0x05, 0xb4}, ts[12];
	static uint8_t data[3 * 1448];
	uint32_t I, peer_ts = 100, orig_ts, rtx_ts, cwnd0, mss;
	unsigned resent = 0;

	ut_env_init(&e, rto_tweak);
	ut_app_init(&a);
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, 4, ut_app_accept, &a, &l) == 0);
	ut_ts_opt(syn + 4, peer_ts, 0);
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .opts = syn, .optlen = 16);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	I = o.seq;
	ut_ts_opt(ts, ++peer_ts, o.opts.tsval);
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .opts = ts, .optlen = 12);
	struct tide_net_conn *c = a.accepted;
	CU_ASSERT_FATAL(c != NULL && c->ts_ok);
	mss = c->mss;
	ut_advance(&e, 2 * NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_send(c, data, 3 * mss, e.now), 3 * mss);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	orig_ts = o.opts.tsval;
	ut_dev_drain(&e.dev);
	cwnd0 = c->cwnd;
	/* The peer stalls: the timer resends the first segment only. */
	until_frame(&e, 100 * NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, I + 1);
	rtx_ts = o.opts.tsval;
	CU_ASSERT(rtx_ts > orig_ts);
	CU_ASSERT_EQUAL(c->cwnd, mss);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 1);
	/* The peer's ACK of the first segment, echoing the original or the resend. */
	ut_ts_opt(ts, ++peer_ts, spurious ? orig_ts : rtx_ts);
	IN(&e, .seq = P + 1, .ack = I + 1 + mss, .flags = TCPHDR_ACK, .opts = ts, .optlen = 12);
	while (ut_pop_tcp(&e, &o) == 0) {
		resent += o.len > 0 && o.seq == I + 1 + mss;
	}
	if (spurious) {
		CU_ASSERT_EQUAL(e.s->rto_undone, 1);
		CU_ASSERT(c->cwnd >= cwnd0);
		CU_ASSERT_FALSE(c->rto_undo);
		CU_ASSERT_EQUAL(resent, 0); /* segments 2 and 3 are still on their way */
		CU_ASSERT_EQUAL(c->snd_nxt, c->snd_max);
	} else {
		CU_ASSERT_EQUAL(e.s->rto_undone, 0);
		CU_ASSERT(c->cwnd < cwnd0);
		CU_ASSERT_EQUAL(resent, 1); /* go-back-N continues with segment 2 */
	}
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_spurious_rto_undone(void)
{
	check_rto_undo(true);
}

static void
test_real_loss_not_undone(void)
{
	check_rto_undo(false);
}

static void
test_syn_retries(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_conn *c;
	struct ut_tcp_out o;
	int reason = 0;

	ut_env_init(&e, rto_tweak);
	ut_app_init(&a);
	CU_ASSERT_FATAL(tide_net_connect(e.s, UT_PEER_IP, 5000, &ut_app_cbs, &a, e.now, &c) == 0);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	uint32_t I = o.seq;
	CU_ASSERT_EQUAL(until_frame(&e, NS_PER_MS * 1000), 10 * NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_SYN);
	CU_ASSERT_EQUAL(o.seq, I);
	CU_ASSERT_EQUAL(until_frame(&e, NS_PER_MS * 1000), 20 * NS_PER_MS);
	ut_dev_drain(&e.dev);
	ut_advance(&e, 40 * NS_PER_MS);
	CU_ASSERT(ut_app_has(&a, TIDE_NET_EV_CLOSED, &reason));
	CU_ASSERT_EQUAL(reason, -ETIMEDOUT);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0); /* no RST for an unsynchronized connection */
	tide_net_close(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_zero_window_probe(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;

	ut_env_init(&e, rto_tweak);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	/* The peer closes its window. */
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .wnd_zero = true);
	CU_ASSERT_EQUAL(c->snd_wnd, 0);
	CU_ASSERT_EQUAL(tide_net_send(c, "payload", 7, e.now), 7);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	CU_ASSERT(c->t_persist != 0);
	uint64_t expect = 10 * NS_PER_MS;
	for (int i = 0; i < 3; i++) {
		uint64_t t = until_frame(&e, 10000 * NS_PER_MS);
		CU_ASSERT(t >= expect && t <= expect + 100 * NS_PER_US);
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
		CU_ASSERT_EQUAL(o.seq, I); /* snd_una - 1 */
		CU_ASSERT_EQUAL(o.len, 0);
		/* Peer answers, window still zero. */
		IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .wnd_zero = true);
		expect *= 2;
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_window_probes, 3);
	CU_ASSERT_EQUAL(c->state, TCP_ESTABLISHED); /* probing never gives up */
	/* Window opens: data goes out, probing stops. */
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .wnd = 1000);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.len, 7);
	CU_ASSERT_EQUAL(c->t_persist, 0);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/* A peer that closes its window and then dies: after tcp_max_retries (4 here) probes
 * without an answer the connection times out (it probed for ever, holding its sends). */
static void
test_zero_window_dead_peer(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;
	int reason = 0;

	ut_env_init(&e, rto_tweak);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .wnd_zero = true);
	CU_ASSERT_EQUAL(tide_net_send(c, "payload", 7, e.now), 7);
	/* One probe answered: the count of unanswered ones starts again. */
	until_frame(&e, 10000 * NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .wnd_zero = true);
	/* Then silence: four more probes, then the timeout. */
	for (int i = 0; i < 4; i++) {
		until_frame(&e, 100000 * NS_PER_MS);
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
		CU_ASSERT_EQUAL(o.len, 0);
		CU_ASSERT_FALSE(o.flags & TCPHDR_RST);
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_window_probes, 5);
	CU_ASSERT_FALSE(ut_app_has(&a, TIDE_NET_EV_CLOSED, &reason));
	until_frame(&e, 100000 * NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT(o.flags & TCPHDR_RST);
	CU_ASSERT(ut_app_has(&a, TIDE_NET_EV_CLOSED, &reason));
	CU_ASSERT_EQUAL(reason, -ETIMEDOUT);
	tide_net_close(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
ka_tweak(struct tide_net_opts *o)
{
	o->tcp_keepalive = true;
	o->tcp_keepalive_idle_ms = 1000;
	o->tcp_keepalive_intvl_ms = 100;
	o->tcp_keepalive_probes = 3;
}

static void
test_keepalive(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;
	int reason = 0;

	ut_env_init(&e, ka_tweak);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	ut_advance(&e, 999 * NS_PER_MS);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_advance(&e, NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, I);
	/* Answered: idle period restarts. */
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK);
	ut_advance(&e, 500 * NS_PER_MS);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_advance(&e, 500 * NS_PER_MS);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1);
		ut_dev_drain(&e.dev);
		ut_advance(&e, 100 * NS_PER_MS);
	}
	CU_ASSERT(ut_app_has(&a, TIDE_NET_EV_CLOSED, &reason));
	CU_ASSERT_EQUAL(reason, -ETIMEDOUT);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_keepalive_probes, 4);
	tide_net_close(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_fin_wait2_orphan_timeout(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	uint32_t I;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	tide_net_close(c, e.now);
	IN(&e, .seq = P + 1, .ack = I + 2, .flags = TCPHDR_ACK);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 1);
	ut_advance(&e, 60000 * NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 0);
	CU_ASSERT(tide_net_next_timer(e.s) > e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_rtt_estimator(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	uint32_t I;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	c->srtt = 0;
	tcp_rtt_sample(c, 2 * NS_PER_MS);
	CU_ASSERT_EQUAL(c->srtt, 2 * NS_PER_MS);
	CU_ASSERT_EQUAL(c->rttvar, 1 * NS_PER_MS);
	CU_ASSERT_EQUAL(c->rto, 6 * NS_PER_MS); /* srtt + 4 rttvar */
	tcp_rtt_sample(c, 2 * NS_PER_MS);
	CU_ASSERT_EQUAL(c->srtt, 2 * NS_PER_MS);
	CU_ASSERT_EQUAL(c->rttvar, 750 * NS_PER_US);
	for (int i = 0; i < 50; i++) {
		tcp_rtt_sample(c, 10 * NS_PER_US);
	}
	CU_ASSERT_EQUAL(c->rto, 1 * NS_PER_MS); /* rto_min */
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * tcp_tsval_at: segments are stamped with clocks read at different moments
 * (a poll's start, a callback's own read), so a later segment can bring an
 * earlier clock. It keeps the highest TSval sent: one that went back would be
 * dropped by the peer's PAWS check (RFC 7323 5.3).
 */
static void
test_tsval_never_goes_back(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint8_t ts[12];
	uint32_t I, t0;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, 4, ut_app_accept, &a, &l) == 0);
	CU_ASSERT_EQUAL_FATAL(ut_syn_ts(&e, P, 0, 100, &o), 0);
	I = o.seq;
	CU_ASSERT(o.opts.has_ts);
	t0 = o.opts.tsval; /* 1 ms ticks from a per-connection offset (RFC 7323 7.1) */
	ut_ts_opt(ts, 101, o.opts.tsval);
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .opts = ts, .optlen = 12);
	struct tide_net_conn *c = a.accepted;
	CU_ASSERT_FATAL(c != NULL && c->ts_ok);
	/* A segment stamped with a clock read 5 ms later... */
	CU_ASSERT_EQUAL(tide_net_send(c, "a", 1, e.now + 5 * NS_PER_MS), 1);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, I + 1);
	CU_ASSERT(o.opts.has_ts);
	CU_ASSERT_EQUAL(o.opts.tsval, t0 + 5);
	/* ...then one with the earlier clock: the same TSval, not t0. */
	CU_ASSERT_EQUAL(tide_net_send(c, "b", 1, e.now), 1);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, I + 2);
	CU_ASSERT(o.opts.has_ts);
	CU_ASSERT_EQUAL(o.opts.tsval, t0 + 5);
	/* Once the clock passes it, TSvals follow the clock again. */
	CU_ASSERT_EQUAL(tide_net_send(c, "c", 1, e.now + 7 * NS_PER_MS), 1);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, I + 3);
	CU_ASSERT_EQUAL(o.opts.tsval, t0 + 7);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_timer", NULL, NULL);
	CU_add_test(s, "rto_backoff_and_timeout", test_rto_backoff_and_timeout);
	CU_add_test(s, "ack_resets_backoff", test_ack_resets_backoff);
	CU_add_test(s, "spurious_rto_undone", test_spurious_rto_undone);
	CU_add_test(s, "real_loss_not_undone", test_real_loss_not_undone);
	CU_add_test(s, "syn_retries", test_syn_retries);
	CU_add_test(s, "zero_window_probe", test_zero_window_probe);
	CU_add_test(s, "zero_window_dead_peer", test_zero_window_dead_peer);
	CU_add_test(s, "keepalive", test_keepalive);
	CU_add_test(s, "fin_wait2_orphan_timeout", test_fin_wait2_orphan_timeout);
	CU_add_test(s, "rtt_estimator", test_rtt_estimator);
	CU_add_test(s, "tsval_never_goes_back", test_tsval_never_goes_back);
}

TIDE_UT_MAIN(register_tests)
