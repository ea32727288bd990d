/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <limits.h>
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

/* ---- checksum elision (tide_net_opts.cksum_elide) ---- */

static struct tide_net_dev_ops cap_ops;
static uint16_t cap_flags; /* TIDE_NET_TX_F_* of every frame handed to the device */

static uint16_t
cap_tx_burst(void *dev, struct tide_net_buf *bufs, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		cap_flags |= bufs[i].flags;
	}
	return ut_dev_ops.tx_burst(dev, bufs, n);
}

/* Elision wins over offloads the device claims: nothing is asked of it either. */
static void
elide_on(struct tide_net_opts *o)
{
	cap_ops = ut_dev_ops;
	cap_ops.tx_burst = cap_tx_burst;
	o->dev_ops = &cap_ops;
	o->cksum_elide = true;
	o->tx_offloads = TIDE_NET_OFFLOAD_IPV4_CKSUM | TIDE_NET_OFFLOAD_TCP_CKSUM;
}

/*
 * The next frame must carry 0 in both checksum fields. The checksums a
 * verifying peer would need are then filled in, so the common parser checks
 * everything else (and that the headers and payload are intact).
 */
static void
pop_elided(struct ut_env *e, struct ut_tcp_out *o)
{
	struct ut_buf *b = ut_dev_pop(&e->dev);
	struct net_ipv4_hdr *ip;
	struct net_tcp_hdr *th;
	uint16_t tl;

	CU_ASSERT_FATAL(b != NULL);
	ip = (struct net_ipv4_hdr *)(b->data + ETH_HLEN);
	th = (struct net_tcp_hdr *)(b->data + NET_HDRS_LEN);
	CU_ASSERT_EQUAL(ip->proto, IPPROTO_TCP_);
	CU_ASSERT_EQUAL(ip->csum, 0);
	CU_ASSERT_EQUAL(th->csum, 0);
	tl = (uint16_t)(ntohs(ip->tot_len) - IP_HLEN);
	ip->csum = net_cksum(ip, IP_HLEN);
	th->csum = net_cksum_fold(
		net_cksum_add(net_cksum_pseudo(ip->saddr, ip->daddr, IPPROTO_TCP_, tl), th, tl));
	CU_ASSERT_EQUAL(ut_parse_tcp(b, o), 0);
	ut_buf_free(&e->dev, b);
}

static void
test_elide_sends_no_checksums(void)
{
	static const uint8_t mss[4] = {TCPOPT_MSS, 4, 0x05, 0xb4};
	struct ut_env e;
	struct ut_app a;
	struct tide_net_conn *c = NULL;
	struct ut_tcp_out o;
	uint32_t iss, seq;

	for (unsigned i = 0; i < sizeof(big); i++) {
		big[i] = (uint8_t)(i * 7 + 3);
	}
	cap_flags = 0;
	ut_env_init(&e, elide_on);
	ut_app_init(&a);
	/* SYN, then the ACK of the handshake (the peer's frames carry real checksums). */
	CU_ASSERT_FATAL(tide_net_connect(e.s, UT_PEER_IP, 5000, &ut_app_cbs, &a, e.now, &c) == 0);
	pop_elided(&e, &o);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_SYN);
	iss = o.seq;
	IN(&e, .seq = P, .ack = iss + 1, .flags = TCPHDR_SYN | TCPHDR_ACK, .opts = mss, .optlen = 4,
	   .sport = 5000, .dport = o.sport);
	pop_elided(&e, &o);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_ACK);
	CU_ASSERT(ut_app_has(&a, TIDE_NET_EV_CONNECTED, NULL));
	/* Data segments: copied payload, no sum over it, the bytes intact. */
	CU_ASSERT_EQUAL(tide_net_send(c, big, 3000, e.now), 3000);
	seq = iss + 1;
	for (int i = 0; i < 3; i++) {
		pop_elided(&e, &o);
		CU_ASSERT_EQUAL(o.seq, seq);
		CU_ASSERT_EQUAL(memcmp(o.payload, big + (seq - iss - 1), o.len), 0);
		seq += o.len;
	}
	CU_ASSERT_EQUAL(seq, iss + 1 + 3000);
	/* A segment for no connection: the reset (tcp_send_reset) is elided too. */
	IN(&e, .seq = 77, .flags = TCPHDR_SYN, .sport = 5001, .dport = 81);
	pop_elided(&e, &o);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_RST | TCPHDR_ACK);
	CU_ASSERT_EQUAL(o.ack, 78);
	/* And the abort's reset. */
	tide_net_abort(c, e.now);
	pop_elided(&e, &o);
	CU_ASSERT(o.flags & TCPHDR_RST);
	CU_ASSERT_EQUAL(cap_flags, 0);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/* Without elision the same device offloads get used: the fields hand the work to it. */
static void
offload_on(struct tide_net_opts *o)
{
	elide_on(o);
	o->cksum_elide = false;
}

static void
test_offload_marks_frames_unless_elided(void)
{
	struct ut_env e;
	struct tide_net_conn *c = NULL;
	struct ut_buf *b;

	cap_flags = 0;
	ut_env_init(&e, offload_on);
	CU_ASSERT_FATAL(tide_net_connect(e.s, UT_PEER_IP, 5000, NULL, NULL, e.now, &c) == 0);
	b = ut_dev_pop(&e.dev);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(cap_flags, TIDE_NET_TX_F_IP_CKSUM | TIDE_NET_TX_F_TCP_CKSUM);
	/* The TCP field holds the pseudo-header sum the device completes: not 0. */
	CU_ASSERT_NOT_EQUAL(((struct net_tcp_hdr *)(b->data + NET_HDRS_LEN))->csum, 0);
	ut_buf_free(&e.dev, b);
	tide_net_abort(c, e.now);
	ut_env_fini(&e);
}

/* ---- a full device: backpressure (net_tx_full, tcp_tx_block, net_tx_resume) ---- */

static uint8_t bulk[130 * 1460];
static struct tide_net_dev_ops ring_ops;
static unsigned ring_room; /* frames the device takes before its ring is full; UINT_MAX: all */

static uint16_t
ring_tx_burst(void *dev, struct tide_net_buf *bufs, uint16_t n)
{
	uint16_t sent;

	if (n > ring_room) {
		n = (uint16_t)ring_room;
	}
	sent = ut_dev_ops.tx_burst(dev, bufs, n);
	if (ring_room != UINT_MAX) {
		ring_room -= sent;
	}
	return sent;
}

static void
ring_on(struct tide_net_opts *o)
{
	ring_ops = ut_dev_ops;
	ring_ops.tx_burst = ring_tx_burst;
	o->dev_ops = &ring_ops;
	ring_room = UINT_MAX;
}

static void
ring_cubic_on(struct tide_net_opts *o)
{
	ring_on(o);
	o->tcp_cc = TIDE_NET_CC_CUBIC;
}

/* Window field of the peer's segments: 4096 << 7 = 512 KiB, more than any window here. */
#define PEER_WND 4096

/* Active open to a peer that scales its window by 2^7 (MSS 1460; no timestamps, no SACK). */
static struct tide_net_conn *
open_scaled(struct ut_env *e, struct ut_app *a, uint32_t *iss)
{
	static const uint8_t opt[8] = {TCPOPT_MSS, 4, 0x05, 0xb4, TCPOPT_NOP, TCPOPT_WINDOW, 3, 7};
	struct tide_net_conn *c = NULL;
	struct ut_tcp_out o;

	CU_ASSERT_FATAL(tide_net_connect(e->s, UT_PEER_IP, 5000, &ut_app_cbs, a, e->now, &c) == 0);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(e, &o), 0);
	*iss = o.seq;
	IN(e, .seq = P, .ack = o.seq + 1, .flags = TCPHDR_SYN | TCPHDR_ACK, .opts = opt,
	   .optlen = 8, .sport = 5000, .dport = o.sport, .wnd = PEER_WND);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(e, &o), 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_ACK);
	/* The SYN-ACK's window is not scaled: a window update opens the scaled one. */
	IN(e, .seq = P + 1, .ack = *iss + 1, .flags = TCPHDR_ACK, .wnd = PEER_WND, .sport = 5000,
	   .dport = c->lport);
	CU_ASSERT_FATAL(c->state == TCP_ESTABLISHED);
	CU_ASSERT_EQUAL(c->mss, 1460);
	CU_ASSERT_EQUAL(c->snd_wnd, (uint32_t)PEER_WND << 7);
	return c;
}

/*
 * Queue `segs` segments of `bulk` on c (its window opened to hold more) while
 * the device refuses every frame: NET_TX_BURST frames fill the stack's TX
 * queue, then c stops with the rest unsent.
 */
static void
send_into_full_device(struct ut_env *e, struct tide_net_conn *c, uint32_t iss, unsigned segs)
{
	ring_room = 0;
	c->cwnd = 100 * 1460; /* grown: more than the TX queue holds */
	CU_ASSERT_EQUAL(tide_net_send(c, bulk, segs * 1460u, e->now), segs * 1460);
	CU_ASSERT_EQUAL(ut_dev_pending(&e->dev), 0);
	CU_ASSERT_EQUAL(c->snd_nxt, iss + 1 + NET_TX_BURST * 1460);
	CU_ASSERT(c->tx_blocked);
	CU_ASSERT(TAILQ_FIRST(&e->s->tx_blocked) == c);
}

/* Two scaled connections a and b; a's data then fills the device queue. */
struct two_conns {
	struct ut_env e;
	struct ut_app aa, ab;
	struct tide_net_conn *ca, *cb;
	uint32_t ia, ib; /* their ISNs */
};

static void
two_conns_a_fills_device(struct two_conns *t)
{
	ut_env_init(&t->e, ring_on);
	ut_app_init(&t->aa);
	ut_app_init(&t->ab);
	t->ca = open_scaled(&t->e, &t->aa, &t->ia);
	t->cb = open_scaled(&t->e, &t->ab, &t->ib);
	send_into_full_device(&t->e, t->ca, t->ia, 40);
}

static void
two_conns_fini(struct two_conns *t)
{
	ut_app_fini(&t->aa);
	ut_app_fini(&t->ab);
	ut_env_fini(&t->e);
}

/*
 * A device that refuses frames: the sender stops instead of building frames
 * it would drop, reduces its window once for the episode, and sends the rest
 * in order once the device takes frames again. With an ISS in either half of
 * the sequence space (cwr_mark starts at the ISS).
 */
static void
run_full_device_stops_sender(uint32_t isn)
{
	const struct tide_net_stats *st;
	struct ut_env e;
	struct ut_app a;
	struct ut_tcp_out o;
	uint32_t I, seq, end, cwnd;
	unsigned rounds = 0;

	for (unsigned i = 0; i < sizeof(bulk); i++) {
		bulk[i] = (uint8_t)(i * 13 + 5);
	}
	ut_env_init(&e, ring_cubic_on);
	e.s->isn_fixed_on = true;
	e.s->isn_fixed = isn;
	st = tide_net_stats(e.s);
	ut_app_init(&a);
	struct tide_net_conn *c = open_scaled(&e, &a, &I);
	CU_ASSERT_EQUAL(I, isn);

	/* 100 segments: the queue takes NET_TX_BURST, then the sender stops once. */
	send_into_full_device(&e, c, I, 100);
	CU_ASSERT_EQUAL(st->tx_dropped, 0);
	CU_ASSERT(st->tx_deferred >= NET_TX_BURST);
	CU_ASSERT_EQUAL(st->tcp_tx_blocked, 1);
	CU_ASSERT_EQUAL(st->tcp_tx_cwr, 1);
	/* Reduced as for loss (CUBIC: beta 0.7 of 100 segments), once. */
	CU_ASSERT_EQUAL(c->cwnd, c->ssthresh);
	CU_ASSERT(c->cwnd >= 69 * 1460 && c->cwnd <= 70 * 1460);
	cwnd = c->cwnd;
	/* Still full: timers, and more data from the application, change nothing. */
	ut_advance(&e, 10 * NS_PER_US);
	CU_ASSERT_EQUAL(tide_net_send(c, bulk + 100 * 1460, 30 * 1460, e.now), 30 * 1460);
	ut_advance(&e, 10 * NS_PER_US);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	CU_ASSERT_EQUAL(c->snd_nxt, I + 1 + NET_TX_BURST * 1460);
	CU_ASSERT_EQUAL(st->tx_dropped, 0);
	CU_ASSERT_EQUAL(st->tcp_tx_blocked, 1);
	CU_ASSERT_EQUAL(st->tcp_tx_cwr, 1);
	CU_ASSERT_EQUAL(c->cwnd, cwnd);

	/* The device takes one queue's worth, then is full again: the sender refills
	 * the queue and stops a second time, in the same window: no second cut. */
	ring_room = NET_TX_BURST;
	ut_advance(&e, 10 * NS_PER_US);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), NET_TX_BURST);
	CU_ASSERT_EQUAL(c->snd_nxt, I + 1 + 2 * NET_TX_BURST * 1460);
	CU_ASSERT(c->tx_blocked);
	CU_ASSERT_EQUAL(st->tcp_tx_blocked, 2);
	CU_ASSERT_EQUAL(st->tcp_tx_cwr, 1);
	CU_ASSERT_EQUAL(c->cwnd, cwnd);
	CU_ASSERT_EQUAL(st->tx_dropped, 0);

	/* The device drains: a timer run resumes the sender. Every byte then
	 * leaves once, in order, as the peer acknowledges what it got. */
	ring_room = UINT_MAX;
	ut_advance(&e, 10 * NS_PER_US);
	CU_ASSERT_FALSE(c->tx_blocked);
	CU_ASSERT(TAILQ_EMPTY(&e.s->tx_blocked));
	seq = I + 1;
	end = I + 1 + 130 * 1460;
	while (seq != end && rounds++ < 20) {
		while (ut_pop_tcp(&e, &o) == 0) {
			CU_ASSERT_EQUAL_FATAL(o.seq, seq);
			CU_ASSERT_EQUAL(o.len, 1460);
			CU_ASSERT_EQUAL(memcmp(o.payload, bulk + (seq - I - 1), o.len), 0);
			seq += o.len;
		}
		IN(&e, .seq = P + 1, .ack = seq, .flags = TCPHDR_ACK, .wnd = PEER_WND,
		   .sport = 5000, .dport = c->lport);
	}
	CU_ASSERT_EQUAL(seq, end);
	CU_ASSERT_EQUAL(c->snd_una, end);
	CU_ASSERT_EQUAL(c->sbuf.len, 0);
	CU_ASSERT_EQUAL(st->tx_dropped, 0);
	CU_ASSERT_EQUAL(st->tcp_retrans_segs, 0);
	CU_ASSERT_EQUAL(st->tcp_tx_blocked, 2);
	CU_ASSERT_EQUAL(st->tcp_tx_cwr, 1);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_full_device_stops_sender(void)
{
	run_full_device_stops_sender(1000);
	run_full_device_stops_sender(0xffff0000u); /* upper half, and wraps during the run */
}

/*
 * Connections stopped by a full device leave the waiting list when they
 * end: aborted by the application, or reset by the peer after a close. The
 * resume that follows must not touch them (ASan: they are freed).
 */
static void
test_full_device_closed_conn_unlisted(void)
{
	const struct tide_net_stats *st;
	struct two_conns t;
	uint16_t bport;

	for (unsigned i = 0; i < sizeof(bulk); i++) {
		bulk[i] = (uint8_t)i;
	}
	two_conns_a_fills_device(&t);
	st = tide_net_stats(t.e.s);
	bport = t.cb->lport;
	/* b has data too, and finds the queue full: it waits behind a. */
	CU_ASSERT_EQUAL(tide_net_send(t.cb, bulk, 1000, t.e.now), 1000);
	CU_ASSERT_EQUAL(t.cb->snd_nxt, t.ib + 1);
	CU_ASSERT(t.cb->tx_blocked);
	CU_ASSERT_EQUAL(st->tcp_tx_blocked, 2);
	CU_ASSERT(TAILQ_FIRST(&t.e.s->tx_blocked) == t.ca);
	CU_ASSERT(TAILQ_NEXT(t.ca, txb_link) == t.cb);

	tide_net_abort(t.ca, t.e.now);
	CU_ASSERT(TAILQ_FIRST(&t.e.s->tx_blocked) == t.cb);
	CU_ASSERT(TAILQ_NEXT(t.cb, txb_link) == NULL);
	CU_ASSERT_EQUAL(st->tcp_conns, 1);
	/* b closes (its FIN waits behind the data), then the peer resets it. */
	tide_net_close(t.cb, t.e.now);
	CU_ASSERT(t.cb->tx_blocked);
	IN(&t.e, .seq = P + 1, .flags = TCPHDR_RST, .sport = 5000, .dport = bport);
	CU_ASSERT_EQUAL(st->tcp_conns, 0);
	CU_ASSERT(TAILQ_EMPTY(&t.e.s->tx_blocked));

	/* The device drains: only a's frames, queued before it ended, go out. */
	ring_room = UINT_MAX;
	ut_advance(&t.e, 10 * NS_PER_US);
	CU_ASSERT_EQUAL(ut_dev_pending(&t.e.dev), NET_TX_BURST);
	CU_ASSERT_EQUAL(st->tcp_tx_blocked, 2);
	two_conns_fini(&t);
}

/*
 * A connection with nothing to send is not stopped by a full device, nor its
 * window cut: here it only receives while another connection fills the queue.
 */
static void
test_full_device_idle_conn_untouched(void)
{
	const struct tide_net_stats *st;
	struct two_conns t;

	two_conns_a_fills_device(&t);
	st = tide_net_stats(t.e.s);
	CU_ASSERT_EQUAL(st->tcp_tx_cwr, 1);
	IN(&t.e, .seq = P + 1, .ack = t.ib + 1, .flags = TCPHDR_ACK | TCPHDR_PSH, .data = "hello",
	   .len = 5, .wnd = PEER_WND, .sport = 5000, .dport = t.cb->lport);
	CU_ASSERT_EQUAL(t.ab.rxn, 5);
	CU_ASSERT_FALSE(t.cb->tx_blocked);
	CU_ASSERT(TAILQ_FIRST(&t.e.s->tx_blocked) == t.ca);
	CU_ASSERT(TAILQ_NEXT(t.ca, txb_link) == NULL);
	CU_ASSERT_EQUAL(st->tcp_tx_blocked, 1);
	CU_ASSERT_EQUAL(st->tcp_tx_cwr, 1);
	CU_ASSERT_EQUAL(t.cb->cwnd, 10u * 1460);
	CU_ASSERT_EQUAL(t.cb->ssthresh, UINT32_MAX);
	tide_net_abort(t.ca, t.e.now);
	tide_net_abort(t.cb, t.e.now);
	two_conns_fini(&t);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_output", NULL, NULL);
	CU_add_test(s, "elide_sends_no_checksums", test_elide_sends_no_checksums);
	CU_add_test(s, "offload_marks_frames_unless_elided",
		    test_offload_marks_frames_unless_elided);
	CU_add_test(s, "syn_options", test_syn_options);
	CU_add_test(s, "segmentation_and_peer_window", test_segmentation_and_peer_window);
	CU_add_test(s, "nagle_option", test_nagle_option);
	CU_add_test(s, "full_device_stops_sender", test_full_device_stops_sender);
	CU_add_test(s, "full_device_closed_conn_unlisted", test_full_device_closed_conn_unlisted);
	CU_add_test(s, "full_device_idle_conn_untouched", test_full_device_idle_conn_untouched);
}

TIDE_UT_MAIN(register_tests)
