/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

#define IN(e, ...) ut_tcp_in((e), &(struct ut_seg){__VA_ARGS__})
#define P          1000u

static void
test_syn_options(void)
{
	struct ut_env e;
	struct tide_net_conn *c;
	struct ut_tcp_out o;

	ut_env_init(&e, NULL);
	CU_ASSERT_FATAL(tide_net_connect(e.s, UT_PEER_IP, 5000, NULL, NULL, e.now, &c) == 0);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_SYN);
	CU_ASSERT(o.opts.has_mss);
	CU_ASSERT_EQUAL(o.opts.mss, 1460);
	CU_ASSERT(o.opts.sack_ok);
	CU_ASSERT(o.opts.has_ts);
	CU_ASSERT_EQUAL(o.opts.tsecr, 0);
	CU_ASSERT(o.opts.has_wscale);
	CU_ASSERT_EQUAL(o.opts.wscale, 3); /* 256 KiB >> 3 fits 16 bits */
	CU_ASSERT_EQUAL(o.wnd, 65535);
	CU_ASSERT(o.df);
	/* The peer answers with every option: window scale and timestamps are on. */
	uint8_t opt[20] = {TCPOPT_MSS, 4, 0x05, 0x00, TCPOPT_NOP, TCPOPT_WINDOW, 3, 7};
	ut_ts_opt(opt + 8, 555, o.opts.tsval);
	IN(&e, .seq = P, .ack = o.seq + 1, .flags = TCPHDR_SYN | TCPHDR_ACK, .opts = opt,
	   .optlen = 20, .sport = 5000, .dport = o.sport, .wnd = 1000);
	CU_ASSERT(c->ws_ok && c->ts_ok);
	CU_ASSERT_FALSE(c->sack_ok);
	CU_ASSERT_EQUAL(c->mss, 1280 - 12);
	CU_ASSERT_EQUAL(c->snd_wscale, 7);
	CU_ASSERT_EQUAL(c->snd_wnd, 1000); /* SYN-ACK window is not scaled */
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT(o.opts.has_ts);
	CU_ASSERT_EQUAL(o.opts.tsecr, 555);
	CU_ASSERT_EQUAL(o.wnd, (256 * 1024) >> 3);
	/* Later windows are scaled by the peer's shift. */
	IN(&e, .seq = P + 1, .ack = c->snd_una, .flags = TCPHDR_ACK, .wnd = 100, .sport = 5000,
	   .dport = c->lport);
	CU_ASSERT_EQUAL(c->snd_wnd, 100u << 7);
	tide_net_abort(c, e.now);
	ut_env_fini(&e);
}

static uint8_t big[20000];

static void
test_segmentation_and_peer_window(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;

	for (unsigned i = 0; i < sizeof(big); i++) {
		big[i] = (uint8_t)i;
	}
	ut_env_init(&e, NULL);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	/* Peer window of 3000 bytes: two full segments and a 80-byte tail. */
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .wnd = 3000);
	tide_net_send(c, big, sizeof(big), e.now);
	uint32_t lens[3] = {1460, 1460, 80}, seq = I + 1;
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
		CU_ASSERT_EQUAL(o.len, lens[i]);
		CU_ASSERT_EQUAL(o.seq, seq);
		CU_ASSERT_EQUAL(memcmp(o.payload, big + (seq - I - 1), o.len), 0);
		CU_ASSERT_EQUAL(o.frame_len, 14 + 20 + 20 + o.len < 60 ? 60 : 14 + 20 + 20 + o.len);
		seq += o.len;
	}
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
nagle_on(struct tide_net_opts *o)
{
	o->tcp_nagle = true;
}

static void
test_nagle_option(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;

	/* Default (no Nagle): every small write leaves at once. */
	ut_env_init(&e, NULL);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	tide_net_send(c, "a", 1, e.now);
	tide_net_send(c, "b", 1, e.now);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 2);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);

	ut_env_init(&e, nagle_on);
	ut_app_init(&a);
	c = ut_passive_open(&e, &a, P, &I, &l);
	tide_net_send(c, "a", 1, e.now);
	tide_net_send(c, "b", 1, e.now);
	tide_net_send(c, "c", 1, e.now);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 1); /* "bc" waits for the ACK */
	ut_dev_drain(&e.dev);
	IN(&e, .seq = P + 1, .ack = I + 2, .flags = TCPHDR_ACK);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.len, 2);
	CU_ASSERT_EQUAL(memcmp(o.payload, "bc", 2), 0);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_output", NULL, NULL);
	CU_add_test(s, "syn_options", test_syn_options);
	CU_add_test(s, "segmentation_and_peer_window", test_segmentation_and_peer_window);
	CU_add_test(s, "nagle_option", test_nagle_option);
}

TIDE_UT_MAIN(register_tests)
