/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

#define IN(e, ...) ut_tcp_in((e), &(struct ut_seg){__VA_ARGS__})
#define P          1000u

static void
test_listen_errors_and_backlog(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l, *l2;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	CU_ASSERT_EQUAL(tide_net_listen(e.s, 0, 1, ut_app_accept, &a, &l), -EINVAL);
	CU_ASSERT_EQUAL(tide_net_listen(e.s, 80, 0, ut_app_accept, &a, &l), -EINVAL);
	CU_ASSERT_EQUAL(tide_net_listen(e.s, 80, 1, NULL, &a, &l), -EINVAL);
	CU_ASSERT_EQUAL(tide_net_listen(e.s, 80, 2, ut_app_accept, &a, &l), 0);
	CU_ASSERT_EQUAL(tide_net_listen(e.s, 80, 2, ut_app_accept, &a, &l2), -EADDRINUSE);
	/* Two half-open connections fill the backlog; the third SYN gets a
	 * cookie and no connection. */
	for (uint16_t p = 0; p < 3; p++) {
		IN(&e, .seq = P, .flags = TCPHDR_SYN, .sport = (uint16_t)(6000 + p));
	}
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 3);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_listen_overflow, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_sent, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 2);
	ut_dev_drain(&e.dev);
	/* A RST from one peer frees its slot. */
	IN(&e, .seq = P + 1, .flags = TCPHDR_RST, .sport = 6000);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 1);
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .sport = 6002);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 2);
	ut_dev_drain(&e.dev);
	/* Closing the listener resets the handshakes in progress. */
	tide_net_listener_close(l, e.now);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 2);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 0);
	CU_ASSERT_EQUAL(a.accepted, NULL);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_accept_refused(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	a.accept_rc = -ECONNREFUSED;
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, 4, ut_app_accept, &a, &l) == 0);
	IN(&e, .seq = P, .flags = TCPHDR_SYN);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	IN(&e, .seq = P + 1, .ack = o.seq + 1, .flags = TCPHDR_ACK);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT(o.flags & TCPHDR_RST);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_accept_refused, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 0);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static int
pick_fixed(void *arg, uint32_t rip, uint16_t rport, unsigned attempt, uint16_t *lport)
{
	unsigned *calls = arg;

	(void)rip;
	(void)rport;
	(*calls)++;
	*lport = (uint16_t)(40000 + (attempt > 2 ? 2 : attempt));
	return 0;
}

static unsigned pick_calls;

static void
pick_tweak(struct tide_net_opts *o)
{
	o->port_pick = pick_fixed;
	o->port_arg = &pick_calls;
}

static void
test_port_pick(void)
{
	struct ut_env e;
	struct tide_net_conn *c[4];
	struct tide_net_conn_info ci;

	pick_calls = 0;
	ut_env_init(&e, pick_tweak);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(tide_net_connect(e.s, UT_PEER_IP, 5000, NULL, NULL, e.now, &c[i]),
				0);
		tide_net_conn_info(c[i], &ci);
		CU_ASSERT_EQUAL(ci.lport, 40000 + i);
	}
	/* Every candidate taken: the stack gives up after 64 attempts. */
	CU_ASSERT_EQUAL(tide_net_connect(e.s, UT_PEER_IP, 5000, NULL, NULL, e.now, &c[3]),
			-EADDRNOTAVAIL);
	/* Same local port to another remote port is a different 4-tuple. */
	CU_ASSERT_EQUAL(tide_net_connect(e.s, UT_PEER_IP, 5001, NULL, NULL, e.now, &c[3]), 0);
	tide_net_conn_info(c[3], &ci);
	CU_ASSERT_EQUAL(ci.lport, 40000);
	CU_ASSERT_EQUAL(tide_net_connect(e.s, 0, 5001, NULL, NULL, e.now, &c[3]), -EINVAL);
	for (int i = 0; i < 4; i++) {
		tide_net_abort(c[i], e.now);
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 0);
	ut_env_fini(&e);
}

static void
small_sndbuf(struct tide_net_opts *o)
{
	o->tcp_sndbuf = 4096;
}

static void
test_send_bounds_and_writable(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint8_t d[10000];
	uint32_t I;

	memset(d, 'x', sizeof(d));
	ut_env_init(&e, small_sndbuf);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	CU_ASSERT_EQUAL(tide_net_send_space(c), 4096);
	CU_ASSERT_EQUAL(tide_net_send(c, d, sizeof(d), e.now), 4096);
	CU_ASSERT_EQUAL(tide_net_send(c, d, 1, e.now), 0);
	CU_ASSERT_FALSE(ut_app_has(&a, TIDE_NET_EV_WRITABLE, NULL));
	ut_dev_drain(&e.dev);
	IN(&e, .seq = P + 1, .ack = I + 1 + 1460, .flags = TCPHDR_ACK);
	CU_ASSERT(ut_app_has(&a, TIDE_NET_EV_WRITABLE, NULL));
	CU_ASSERT_EQUAL(tide_net_send_space(c), 1460);
	/* Pull-style receive when on_recv is absent. */
	tide_net_conn_set_cbs(c, NULL, NULL);
	IN(&e, .seq = P + 1, .ack = I + 1 + 1460, .flags = TCPHDR_ACK, .data = "pull", .len = 4);
	uint8_t buf[8];
	CU_ASSERT_EQUAL(tide_net_recv(c, buf, 2, e.now), 2);
	CU_ASSERT_EQUAL(tide_net_recv(c, buf + 2, 8, e.now), 2);
	CU_ASSERT_EQUAL(memcmp(buf, "pull", 4), 0);
	CU_ASSERT_EQUAL(tide_net_recv(c, buf, 8, e.now), 0);
	/* Abort sends RST at our highest sequence and releases the handle. */
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT(o.flags & TCPHDR_RST);
	CU_ASSERT_EQUAL(o.ack, P + 5);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 0);
	(void)o;
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_send_before_connected_and_after_close(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_conn *c;
	struct ut_tcp_out o;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	CU_ASSERT_FATAL(tide_net_connect(e.s, UT_PEER_IP, 5000, &ut_app_cbs, &a, e.now, &c) == 0);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	/* Bytes queued during SYN_SENT leave right after the handshake. */
	CU_ASSERT_EQUAL(tide_net_send(c, "early", 5, e.now), 5);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	IN(&e, .seq = P, .ack = o.seq + 1, .flags = TCPHDR_SYN | TCPHDR_ACK, .sport = 5000,
	   .dport = o.sport);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.len, 5);
	CU_ASSERT_EQUAL(memcmp(o.payload, "early", 5), 0);
	CU_ASSERT_EQUAL(o.ack, P + 1);
	tide_net_close(c, e.now);
	CU_ASSERT_STRING_EQUAL(tide_net_tcp_state_name(c->state), "FIN_WAIT1");
	CU_ASSERT_STRING_EQUAL(tide_net_tcp_state_name((enum tide_net_tcp_state)99), "?");
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/* RFC 6528's F() is SipHash-2-4: the reference vector (key 00..0f, message
 * 00..0f) and an ISN that depends on the whole 4-tuple and the key. */
static void
test_isn_siphash(void)
{
	const uint64_t k[2] = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
	struct ut_env e;
	uint32_t a, b;

	CU_ASSERT_EQUAL(tcp_siphash_2u64(k, 0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL),
			0x3f2acc7f57c29bdbULL);
	ut_env_init(&e, NULL);
	a = tcp_new_isn(e.s, 1, 2, 3, 4, 0);
	CU_ASSERT_EQUAL(tcp_new_isn(e.s, 1, 2, 3, 4, 0), a);
	CU_ASSERT_NOT_EQUAL(tcp_new_isn(e.s, 1, 2, 3, 5, 0), a);
	CU_ASSERT_NOT_EQUAL(tcp_new_isn(e.s, 1, 3, 3, 4, 0), a);
	b = tcp_new_isn(e.s, 1, 2, 3, 4, 4000 * 1000);
	CU_ASSERT_EQUAL(b - a, 1000u); /* M: one tick per 4 us */
	e.s->isn_key[1] ^= 1;
	CU_ASSERT_NOT_EQUAL(tcp_new_isn(e.s, 1, 2, 3, 4, 0), a);
	ut_env_fini(&e);
}

/*
 * RFC 7323 7.1: TSval = clock + an offset per 4-tuple (keyed, so two
 * connections differ and a peer cannot read our clock), still 1 ms ticks and
 * monotonic on each connection.
 */
static void
test_ts_offset_per_connection(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t ts[2], off[2];
	struct tide_net_conn *c[2];

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, 4, ut_app_accept, &a, &l) == 0);
	for (int i = 0; i < 2; i++) {
		uint16_t sport = (uint16_t)(6000 + i);
		uint8_t ack[12];

		CU_ASSERT_EQUAL_FATAL(ut_syn_ts(&e, P, sport, 100, &o), 0);
		CU_ASSERT_FATAL(o.opts.has_ts);
		ts[i] = o.opts.tsval;
		off[i] = tcp_ts_offset(e.s, UT_IP, 80, UT_PEER_IP, sport);
		CU_ASSERT_EQUAL(ts[i], (uint32_t)(e.now / NS_PER_MS) + off[i]);
		ut_ts_opt(ack, 101, ts[i]);
		IN(&e, .seq = P + 1, .ack = o.seq + 1, .flags = TCPHDR_ACK, .opts = ack,
		   .optlen = 12, .sport = sport);
		c[i] = a.accepted;
		CU_ASSERT_FATAL(c[i] != NULL && c[i]->ts_ok);
		CU_ASSERT_EQUAL(c[i]->ts_off, off[i]);
	}
	CU_ASSERT_NOT_EQUAL(off[0], off[1]);
	CU_ASSERT_NOT_EQUAL(ts[0], ts[1]);
	/* Pure: the same tuple and key give the same offset; another key another. */
	CU_ASSERT_EQUAL(tcp_ts_offset(e.s, UT_IP, 80, UT_PEER_IP, 6000), off[0]);
	e.s->isn_key[0] ^= 1;
	CU_ASSERT_NOT_EQUAL(tcp_ts_offset(e.s, UT_IP, 80, UT_PEER_IP, 6000), off[0]);
	e.s->isn_key[0] ^= 1;
	/* Monotonic per connection, in 1 ms steps from the offset, across a clock read
	 * that goes back. */
	uint32_t prev = ts[0];
	for (int k = 1; k <= 3; k++) {
		uint64_t at = k == 2 ? e.now : e.now + (uint64_t)k * 10 * NS_PER_MS;

		CU_ASSERT_EQUAL(tide_net_send(c[0], "x", 1, at), 1);
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
		CU_ASSERT(!before(o.opts.tsval, prev));
		CU_ASSERT_EQUAL(o.opts.tsval, ts[0] + (k == 2 ? 10u : (uint32_t)k * 10));
		prev = o.opts.tsval;
	}
	tide_net_abort(c[0], e.now);
	tide_net_abort(c[1], e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_conn", NULL, NULL);
	CU_add_test(s, "listen_errors_and_backlog", test_listen_errors_and_backlog);
	CU_add_test(s, "accept_refused", test_accept_refused);
	CU_add_test(s, "port_pick", test_port_pick);
	CU_add_test(s, "isn_siphash", test_isn_siphash);
	CU_add_test(s, "ts_offset_per_connection", test_ts_offset_per_connection);
	CU_add_test(s, "send_bounds_and_writable", test_send_bounds_and_writable);
	CU_add_test(s, "send_before_connected_and_after_close",
		    test_send_before_connected_and_after_close);
}

TIDE_UT_MAIN(register_tests)
