/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_syncookie.c and the listener paths that use it (tcp_input.c): a flood
 * of SYNs past the backlog is answered in full and keeps nothing; a client
 * completes its handshake through a cookie and exchanges data; forged, stale
 * and unsolicited ACKs get a RST and create nothing; the MSS comes back from
 * the cookie's index and window scale / SACK from the echoed TSval; half-open
 * entries give their slots up after 5 SYN-ACK retries.
 */
#include <arpa/inet.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

#define IN(e, ...) ut_tcp_in((e), &(struct ut_seg){__VA_ARGS__})
#define P          1000u
#define BACKLOG    8
#define SLOT       TCP_SYNCOOKIE_SLOT_NS

/* MSS 1460, SACK-permitted, timestamps (tsval), window scale 7: 20 bytes. */
static uint8_t
syn_opts(uint8_t *p, uint16_t mss, bool sack, bool ts, uint32_t tsval, int ws)
{
	uint8_t n = 0;

	p[n++] = TCPOPT_MSS;
	p[n++] = 4;
	p[n++] = (uint8_t)(mss >> 8);
	p[n++] = (uint8_t)mss;
	if (sack) {
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_SACK_PERM;
		p[n++] = 2;
	}
	if (ts) {
		ut_ts_opt(p + n, tsval, 0);
		n += 12;
	}
	if (ws >= 0) {
		p[n++] = TCPOPT_NOP;
		p[n++] = TCPOPT_WINDOW;
		p[n++] = 3;
		p[n++] = (uint8_t)ws;
	}
	return n;
}

/* A listener with a full backlog: BACKLOG half-open connections from ports 7000+. */
static void
full_backlog(struct ut_env *e, struct ut_app *a, struct tide_net_listener **l)
{
	ut_env_init(e, NULL);
	ut_app_init(a);
	CU_ASSERT_FATAL(tide_net_listen(e->s, 80, BACKLOG, ut_app_accept, a, l) == 0);
	for (uint16_t i = 0; i < BACKLOG; i++) {
		IN(e, .seq = P, .flags = TCPHDR_SYN, .sport = (uint16_t)(7000 + i));
	}
	CU_ASSERT_EQUAL(tide_net_stats(e->s)->tcp_conns, BACKLOG);
	CU_ASSERT_EQUAL(tide_net_stats(e->s)->tcp_syncookies_sent, 0);
	ut_dev_drain(&e->dev);
}

/* The SYN-ACK the stack sent to sport, which must be the only frame queued. */
static void
synack_to(struct ut_env *e, uint16_t sport, uint32_t peer_isn, struct ut_tcp_out *o)
{
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(e, o), 0);
	CU_ASSERT_EQUAL(o->flags, TCPHDR_SYN | TCPHDR_ACK);
	CU_ASSERT_EQUAL(o->dport, sport);
	CU_ASSERT_EQUAL(o->ack, peer_isn + 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e->dev), 0);
}

/*
 * 1000 SYNs from as many ports, with a backlog of 8: every one gets a
 * SYN-ACK, only 8 connections exist; then a client completes its handshake
 * through a cookie at once and data flows both ways.
 */
static void
test_flood_answered_and_client_connects(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint8_t opt[40], ts[12];
	uint32_t tsval0;
	unsigned answered = 0;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, BACKLOG, ut_app_accept, &a, &l) == 0);
	for (uint32_t i = 0; i < 1000; i++) {
		uint8_t n = syn_opts(opt, 1460, true, true, 5000 + i, 7);

		IN(&e, .seq = P + i, .flags = TCPHDR_SYN, .opts = opt, .optlen = n,
		   .sport = (uint16_t)(10000 + i));
		if (i % 100 == 99) {
			ut_advance(&e, NS_PER_MS); /* 1000 SYNs in about 10 ms */
		}
	}
	while (ut_pop_tcp(&e, &o) == 0) {
		uint32_t i = o.dport - 10000u;

		CU_ASSERT(i < 1000);
		CU_ASSERT_EQUAL(o.flags, TCPHDR_SYN | TCPHDR_ACK);
		CU_ASSERT_EQUAL(o.ack, P + i + 1);
		answered++;
	}
	CU_ASSERT_EQUAL(answered, 1000);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, BACKLOG);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_listen_overflow, 1000 - BACKLOG);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_sent, 1000 - BACKLOG);
	/* A legitimate client, now. */
	IN(&e, .seq = 77777, .flags = TCPHDR_SYN, .opts = opt,
	   .optlen = syn_opts(opt, 1460, true, true, 900, 7), .sport = 5000);
	synack_to(&e, 5000, 77777, &o);
	CU_ASSERT(o.opts.has_ts && o.opts.has_wscale && o.opts.sack_ok && o.opts.has_mss);
	CU_ASSERT_EQUAL(o.opts.tsecr, 900);
	tsval0 = o.opts.tsval;
	ut_ts_opt(ts, 901, tsval0);
	IN(&e, .seq = 77778, .ack = o.seq + 1, .flags = TCPHDR_ACK, .opts = ts, .optlen = 12,
	   .sport = 5000);
	CU_ASSERT_FATAL(a.accepted != NULL);
	struct tide_net_conn *c = a.accepted;
	CU_ASSERT_EQUAL(c->state, TCP_ESTABLISHED);
	CU_ASSERT_EQUAL(c->rport, 5000);
	CU_ASSERT_EQUAL(c->iss, o.seq);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_ok, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, BACKLOG + 1);
	CU_ASSERT_EQUAL(l->pending, BACKLOG); /* the cookie's connection took no slot */
	/* Data both ways; our TSval never goes below the SYN-ACK's (the peer's PAWS). */
	ut_ts_opt(ts, 902, tsval0);
	IN(&e, .seq = 77778, .ack = o.seq + 1, .flags = TCPHDR_ACK | TCPHDR_PSH, .data = "hello",
	   .len = 5, .opts = ts, .optlen = 12, .sport = 5000);
	CU_ASSERT_EQUAL(a.rxn, 5);
	CU_ASSERT(memcmp(a.rx, "hello", 5) == 0);
	ut_dev_drain(&e.dev);
	CU_ASSERT_EQUAL(tide_net_send(c, "world", 5, e.now), 5);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.len, 5);
	CU_ASSERT_EQUAL(o.ack, 77778 + 5);
	CU_ASSERT(o.opts.has_ts);
	CU_ASSERT(!before(o.opts.tsval, tsval0));
	CU_ASSERT_EQUAL(o.opts.tsecr, 902);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/* A forged cookie, a stale one, and an ACK when no cookie was sent: RST, nothing created. */
static void
test_bad_cookies_reset(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t cookie;
	uint8_t f[128];
	uint16_t n;

	/* No cookie sent yet: a stray ACK is reset without being checked. */
	full_backlog(&e, &a, &l);
	IN(&e, .seq = P + 1, .ack = 12345, .flags = TCPHDR_ACK, .sport = 5000);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_RST);
	CU_ASSERT_EQUAL(o.seq, 12345);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_failed, 0);
	/* Cookies are being sent: a wrong one (any bit of the hash) is refused. */
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .sport = 5000);
	synack_to(&e, 5000, P, &o);
	cookie = o.seq;
	for (uint32_t bit = 3; bit < 32; bit += 7) {
		IN(&e, .seq = P + 1, .ack = (cookie ^ (1u << bit)) + 1, .flags = TCPHDR_ACK,
		   .sport = 5000);
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
		CU_ASSERT_EQUAL(o.flags, TCPHDR_RST);
	}
	/* Right cookie, another peer ISN or port: refused too. */
	IN(&e, .seq = P + 2, .ack = cookie + 1, .flags = TCPHDR_ACK, .sport = 5000);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_RST);
	IN(&e, .seq = P + 1, .ack = cookie + 1, .flags = TCPHDR_ACK, .sport = 5001);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_RST);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_failed, 7);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_ok, 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, BACKLOG);
	CU_ASSERT_EQUAL(a.accepted, NULL);
	/*
	 * Stale: 130 s later (past two 64 s slots) the backlog is full again and
	 * cookies are being sent, but the old one is refused.
	 */
	for (int i = 0; i < 130; i++) {
		ut_advance(&e, 1000 * NS_PER_MS);
	}
	/* The peer's ARP entry expired meanwhile: it asks for us again. */
	n = ut_build_arp(f, 1, ut_peer_mac, UT_PEER_IP, (const uint8_t[6]){0}, UT_IP,
			 (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
	ut_rx(&e, f, n);
	ut_dev_drain(&e.dev);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 0); /* half-opens timed out */
	for (uint16_t i = 0; i < BACKLOG + 1; i++) {
		IN(&e, .seq = P, .flags = TCPHDR_SYN, .sport = (uint16_t)(8000 + i));
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_sent, 2);
	ut_dev_drain(&e.dev);
	IN(&e, .seq = P + 1, .ack = cookie + 1, .flags = TCPHDR_ACK, .sport = 5000);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_RST);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_failed, 8);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, BACKLOG);
	CU_ASSERT_EQUAL(a.accepted, NULL);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * A bare SYN from the peer (MSS option mss, none when 0) answered at t with a
 * cookie, and the ACK that returns it, as tcp_v4_rcv would parse them.
 */
static void
handshake(const struct tide_net_stack *s, uint32_t peer_isn, uint16_t mss, uint64_t t,
	  struct tcp_seg *syn, struct tcp_seg *ack, struct tcp_cookie_opts *ck)
{
	*syn = (struct tcp_seg){.seq = peer_isn,
				.flags = TCPHDR_SYN,
				.saddr = UT_PEER_IP,
				.daddr = UT_IP,
				.sport = 5000,
				.dport = 80,
				.opts = {.mss = mss, .has_mss = mss != 0}};
	*ack = *syn;
	ack->seq = peer_isn + 1;
	ack->flags = TCPHDR_ACK;
	ack->opts.has_mss = false;
	ack->ack = tcp_syncookie_make(s, syn, t, ck) + 1;
}

/* A cookie holds for the rest of its 64 s slot and the next one, never past. */
static void
test_cookie_lifetime(void)
{
	struct ut_env e;
	struct tcp_seg syn, ack;
	struct tcp_cookie_opts ck;
	uint64_t t0 = 10 * SLOT + SLOT / 2;

	ut_env_init(&e, NULL);
	handshake(e.s, 4242, 0, t0, &syn, &ack, &ck);
	CU_ASSERT_EQUAL(tcp_syncookie_check(e.s, &ack, t0, &ck), 0);
	CU_ASSERT_EQUAL(tcp_syncookie_check(e.s, &ack, 11 * SLOT + SLOT - 1, &ck), 0);
	CU_ASSERT_EQUAL(tcp_syncookie_check(e.s, &ack, 12 * SLOT, &ck), -EINVAL);
	CU_ASSERT_EQUAL(tcp_syncookie_check(e.s, &ack, 10 * SLOT - 1, &ck), -EINVAL);
	/* Another secret (another stack, or a restart): refused. */
	e.s->isn_key[1] ^= 1;
	CU_ASSERT_EQUAL(tcp_syncookie_check(e.s, &ack, t0, &ck), -EINVAL);
	ut_env_fini(&e);
}

/* The peer's MSS comes back from the cookie's 3-bit index, rounded down to the table. */
static void
test_mss_from_index(void)
{
	static const struct {
		uint16_t offered; /* 0: no MSS option */
		uint16_t got;
	} cases[] = {{0, 536},     {100, 536},   {536, 536},   {1219, 536},  {1220, 1220},
		     {1400, 1360}, {1452, 1440}, {1460, 1460}, {1500, 1460}, {4096, 4036},
		     {8948, 8940}, {8960, 8960}, {65535, 8960}};
	struct ut_env e;
	struct tcp_cookie_opts ck, back;

	ut_env_init(&e, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tcp_seg syn, ack;

		handshake(e.s, 1000 + (uint32_t)i, cases[i].offered, e.now, &syn, &ack, &ck);
		CU_ASSERT_EQUAL(ck.mss, cases[i].got);
		CU_ASSERT_FALSE(ck.ts);
		CU_ASSERT_EQUAL_FATAL(tcp_syncookie_check(e.s, &ack, e.now, &back), 0);
		CU_ASSERT_EQUAL(back.mss, cases[i].got);
		CU_ASSERT_FALSE(back.ts || back.ws || back.sack);
	}
	ut_env_fini(&e);
}

/*
 * Handshake through a cookie with the SYN's options: with timestamps, window
 * scale and SACK come back from the echoed TSval's low bits; without, the
 * SYN-ACK offers neither and the connection has neither.
 */
static void
check_options(bool ts, int ws, bool sack)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint8_t opt[40], tso[12];
	uint8_t n;

	full_backlog(&e, &a, &l);
	n = syn_opts(opt, 1400, sack, ts, 300, ws);
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .opts = opt, .optlen = n, .sport = 5000);
	synack_to(&e, 5000, P, &o);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_sent, 1);
	CU_ASSERT_EQUAL(o.opts.mss, 1500 - 40);
	CU_ASSERT_EQUAL(o.opts.has_ts, ts);
	CU_ASSERT_EQUAL(o.opts.has_wscale, ts && ws >= 0);
	CU_ASSERT_EQUAL(o.opts.sack_ok, ts && sack);
	if (ts) {
		uint32_t clock = (uint32_t)(e.now / NS_PER_MS) +
				 tcp_ts_offset(e.s, UT_IP, 80, UT_PEER_IP, 5000);

		CU_ASSERT_EQUAL(o.opts.tsecr, 300);
		CU_ASSERT_EQUAL(o.opts.tsval & 0xf, ws >= 0 ? (uint32_t)ws : 0xfu);
		CU_ASSERT_EQUAL((o.opts.tsval >> 4) & 1, sack ? 1u : 0u);
		CU_ASSERT(!after(o.opts.tsval, clock) && clock - o.opts.tsval < 64);
	}
	ut_ts_opt(tso, 301, o.opts.tsval);
	IN(&e, .seq = P + 1, .ack = o.seq + 1, .flags = TCPHDR_ACK, .opts = tso,
	   .optlen = ts ? 12 : 0, .sport = 5000, .wnd = 1000);
	CU_ASSERT_FATAL(a.accepted != NULL);
	struct tide_net_conn *c = a.accepted;
	CU_ASSERT_EQUAL(c->state, TCP_ESTABLISHED);
	CU_ASSERT_EQUAL(c->peer_mss, 1360); /* 1400 rounded down to the table */
	CU_ASSERT_EQUAL(c->ts_ok, ts);
	CU_ASSERT_EQUAL(c->mss, 1360 - (ts ? 12 : 0));
	CU_ASSERT_EQUAL(c->ws_ok, ts && ws >= 0);
	CU_ASSERT_EQUAL(c->sack_ok, ts && sack);
	if (c->ws_ok) {
		CU_ASSERT_EQUAL(c->snd_wscale, ws);
		CU_ASSERT_EQUAL(c->rcv_wscale, o.opts.wscale); /* the shift the SYN-ACK announced */
		CU_ASSERT_EQUAL(c->snd_wnd, 1000u << ws);
	} else {
		CU_ASSERT_EQUAL(c->rcv_wscale, 0);
		CU_ASSERT_EQUAL(c->snd_wnd, 1000);
	}
	if (ts) {
		CU_ASSERT_EQUAL(c->ts_recent, 301);
	}
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_options_from_tsval(void)
{
	check_options(true, 7, true);
	check_options(true, 0, false);
	check_options(true, 14, true);
	check_options(true, -1, true);
	check_options(true, -1, false);
}

static void
test_no_timestamps_no_options(void)
{
	check_options(false, 7, true);
	check_options(false, -1, false);
}

/* The ACK was lost: the client's first data segment carries the cookie and its payload. */
static void
test_first_data_segment_completes(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;

	full_backlog(&e, &a, &l);
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .sport = 5000);
	synack_to(&e, 5000, P, &o);
	IN(&e, .seq = P + 1, .ack = o.seq + 1, .flags = TCPHDR_ACK | TCPHDR_PSH | TCPHDR_FIN,
	   .data = "request", .len = 7, .sport = 5000);
	CU_ASSERT_FATAL(a.accepted != NULL);
	CU_ASSERT_EQUAL(a.rxn, 7);
	CU_ASSERT(memcmp(a.rx, "request", 7) == 0);
	CU_ASSERT(ut_app_has(&a, TIDE_NET_EV_PEER_CLOSED, NULL));
	CU_ASSERT_EQUAL(a.accepted->state, TCP_CLOSE_WAIT);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_ACK);
	CU_ASSERT_EQUAL(o.ack, P + 1 + 7 + 1);
	tide_net_abort(a.accepted, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/* A refusing accept callback resets the cookie's connection like any other. */
static void
test_refused_cookie_connection(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;

	full_backlog(&e, &a, &l);
	a.accept_rc = -ECONNREFUSED;
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .sport = 5000);
	synack_to(&e, 5000, P, &o);
	IN(&e, .seq = P + 1, .ack = o.seq + 1, .flags = TCPHDR_ACK, .sport = 5000);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT(o.flags & TCPHDR_RST);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_accept_refused, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, BACKLOG);
	CU_ASSERT_EQUAL(l->pending, BACKLOG);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * A half-open entry gives its slot up after 5 SYN-ACK retries (1 s RTO,
 * doubling: 63 s), not the 6 SYN retries' 127 s; SYNs then get ordinary
 * connections again.
 */
static void
test_half_open_released_after_synack_retries(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	unsigned synacks = 0;

	full_backlog(&e, &a, &l);
	while (tide_net_stats(e.s)->tcp_conns > 0 && synacks < 1000) {
		ut_advance(&e, 100 * NS_PER_MS);
		synacks += (unsigned)ut_dev_pending(&e.dev);
		ut_dev_drain(&e.dev);
		CU_ASSERT(e.now < 1000 * NS_PER_MS + 64000 * NS_PER_MS);
	}
	CU_ASSERT(e.now >= 1000 * NS_PER_MS + 63000 * NS_PER_MS);
	CU_ASSERT_EQUAL(synacks, 5 * BACKLOG);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 0);
	CU_ASSERT_EQUAL(l->pending, 0);
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .sport = 5000);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_conns, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_syncookies_sent, 0);
	ut_dev_drain(&e.dev);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_syncookie", NULL, NULL);
	CU_add_test(s, "flood_answered_and_client_connects",
		    test_flood_answered_and_client_connects);
	CU_add_test(s, "bad_cookies_reset", test_bad_cookies_reset);
	CU_add_test(s, "cookie_lifetime", test_cookie_lifetime);
	CU_add_test(s, "mss_from_index", test_mss_from_index);
	CU_add_test(s, "options_from_tsval", test_options_from_tsval);
	CU_add_test(s, "no_timestamps_no_options", test_no_timestamps_no_options);
	CU_add_test(s, "first_data_segment_completes", test_first_data_segment_completes);
	CU_add_test(s, "refused_cookie_connection", test_refused_cookie_connection);
	CU_add_test(s, "half_open_released_after_synack_retries",
		    test_half_open_released_after_synack_retries);
}

TIDE_UT_MAIN(register_tests)
