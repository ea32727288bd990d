/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two stacks wired back to back through the fake device, with seeded loss,
 * duplication and reordering on the link, moving 10 MB each way at once and
 * verifying every byte, then closing both sides down to no connections.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

#define XFER_BYTES (10u * 1024 * 1024)

struct link_cfg {
	unsigned drop_pm, dup_pm, reorder_pm; /* per mille */
	uint64_t seed;
	enum tide_net_cc cc;
	bool wrap_isn;
	bool no_sack;        /* neither side offers SACK: NewReno + go-back-N */
	uint32_t rto_min_us; /* 0 = stack default */
};

/* What a run measured, for comparisons between configurations. */
struct xfer_result {
	uint64_t sim_ns;
	uint64_t dropped, retrans, rto, sack_retrans, lost_retrans, spurious;
	uint64_t sack_tx, sack_rx;
};

struct side {
	struct ut_dev dev;
	struct tide_net_stack *s;
	struct tide_net_conn *c;
	uint8_t id;
	uint64_t sent, rcvd, bad;
	bool connected, peer_fin;
	int closed;
	bool closed_seen;
};

static uint8_t
pat(uint8_t side, uint64_t off)
{
	return (uint8_t)(off * 131 + (off >> 9) * 7 + side * 61u);
}

static size_t
side_recv(struct tide_net_conn *c, void *arg, const uint8_t *data, size_t len)
{
	struct side *sd = arg;

	(void)c;
	for (size_t i = 0; i < len; i++) {
		if (data[i] != pat((uint8_t)(sd->id ^ 1), sd->rcvd + i)) {
			sd->bad++;
		}
	}
	sd->rcvd += len;
	return len;
}

static void
side_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct side *sd = arg;

	(void)c;
	if (ev == TIDE_NET_EV_CONNECTED) {
		sd->connected = true;
	} else if (ev == TIDE_NET_EV_PEER_CLOSED) {
		sd->peer_fin = true;
	} else if (ev == TIDE_NET_EV_CLOSED) {
		sd->closed_seen = true;
		sd->closed = reason;
	}
}

static const struct tide_net_conn_cbs side_cbs = {.on_recv = side_recv, .on_event = side_event};

static int
side_accept(void *arg, struct tide_net_conn *c)
{
	struct side *sd = arg;

	sd->c = c;
	sd->connected = true;
	tide_net_conn_set_cbs(c, &side_cbs, sd);
	return 0;
}

static uint64_t
rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct wire {
	struct ut_buf *held; /* reordered frame, delivered after the next one */
	uint64_t dropped, duped, reordered;
};

static void
deliver(struct side *from, struct side *to, struct ut_buf **v, unsigned n, uint64_t now)
{
	struct tide_net_rx_pkt p[64];

	for (unsigned i = 0; i < n; i++) {
		p[i] = (struct tide_net_rx_pkt){
			.data = v[i]->data, .len = v[i]->len, .handle = v[i]};
		from->dev.live--; /* ownership moves to the receiving device */
		to->dev.live++;
	}
	if (n > 0) {
		tide_net_rx_burst(to->s, p, (uint16_t)n, now);
	}
}

static void
pump(struct side *from, struct side *to, struct wire *w, const struct link_cfg *cfg, uint64_t *rs,
     uint64_t now)
{
	struct ut_buf *v[64];
	unsigned n = 0;
	struct ut_buf *b;

	if (w->held != NULL && n < 64) {
		v[n++] = w->held;
		w->held = NULL;
	}
	while (n < 62 && (b = ut_dev_pop(&from->dev)) != NULL) {
		uint64_t r = rnd(rs) % 1000;

		if (r < cfg->drop_pm) {
			w->dropped++;
			ut_buf_free(&from->dev, b);
			continue;
		}
		if (w->held == NULL && rnd(rs) % 1000 < cfg->reorder_pm) {
			w->reordered++;
			w->held = b;
			continue;
		}
		v[n++] = b;
		if (rnd(rs) % 1000 < cfg->dup_pm) {
			struct ut_buf *d = ut_buf_new();

			memcpy(d, b, sizeof(*d));
			from->dev.live++;
			w->duped++;
			v[n++] = d;
		}
	}
	deliver(from, to, v, n, now);
}

static void
side_push(struct side *sd, uint64_t now)
{
	uint8_t chunk[16384];

	while (sd->c != NULL && sd->connected && sd->sent < XFER_BYTES) {
		size_t room = tide_net_send_space(sd->c), n = sizeof(chunk);

		if (room == 0) {
			break;
		}
		if (n > room) {
			n = room;
		}
		if (n > XFER_BYTES - sd->sent) {
			n = XFER_BYTES - sd->sent;
		}
		for (size_t i = 0; i < n; i++) {
			chunk[i] = pat(sd->id, sd->sent + i);
		}
		ssize_t k = tide_net_send(sd->c, chunk, n, now);
		CU_ASSERT_FATAL(k > 0);
		sd->sent += (uint64_t)k;
	}
}

static void
side_init(struct side *sd, uint8_t id, const struct link_cfg *cfg, uint64_t now)
{
	struct tide_net_opts o;

	memset(sd, 0, sizeof(*sd));
	sd->id = id;
	tide_net_opts_init(&o, sizeof(o));
	o.dev_ops = &ut_dev_ops;
	o.dev = &sd->dev;
	memcpy(o.mac, id == 0 ? ut_mac : ut_peer_mac, 6);
	o.ip = id == 0 ? UT_IP : UT_PEER_IP;
	o.tcp_time_wait_ms = 10;
	o.tcp_cc = cfg->cc;
	o.tcp_sack = !cfg->no_sack;
	if (cfg->rto_min_us != 0) {
		o.tcp_rto_min_us = cfg->rto_min_us;
		if (o.tcp_rto_init_us < o.tcp_rto_min_us) {
			o.tcp_rto_init_us = o.tcp_rto_min_us;
		}
	}
	o.isn_secret = cfg->seed + id;
	CU_ASSERT_FATAL(tide_net_stack_create(&o, now, &sd->s) == 0);
	if (cfg->wrap_isn) {
		sd->s->isn_fixed_on = true;
		sd->s->isn_fixed =
			0xffffffffu - 3000000u * (id + 1); /* wraps within the transfer */
	}
}

static void
run_transfer_r(const struct link_cfg *cfg, struct xfer_result *res)
{
	struct side a, b;
	struct wire wab = {0}, wba = {0};
	struct tide_net_listener *l;
	uint64_t now = 1000 * NS_PER_MS, rs = cfg->seed * 2654435761u + 1;
	uint64_t steps = 0, start;
	bool closing = false;

	side_init(&a, 0, cfg, now);
	side_init(&b, 1, cfg, now);
	start = now;
	CU_ASSERT_FATAL(tide_net_listen(b.s, 7000, 16, side_accept, &b, &l) == 0);
	CU_ASSERT_FATAL(tide_net_connect(a.s, UT_PEER_IP, 7000, &side_cbs, &a, now, &a.c) == 0);
	/* 10 us per step; generous cap of 120 simulated seconds. */
	while (steps++ < 12000000) {
		now += 10 * NS_PER_US;
		side_push(&a, now);
		side_push(&b, now);
		pump(&a, &b, &wab, cfg, &rs, now);
		pump(&b, &a, &wba, cfg, &rs, now);
		tide_net_timers_run(a.s, now);
		tide_net_timers_run(b.s, now);
		if (!closing && a.rcvd == XFER_BYTES && b.rcvd == XFER_BYTES) {
			closing = true;
			tide_net_close(a.c, now);
			tide_net_close(b.c, now);
		}
		if (closing && tide_net_stats(a.s)->tcp_conns == 0 &&
		    tide_net_stats(b.s)->tcp_conns == 0 && ut_dev_pending(&a.dev) == 0 &&
		    ut_dev_pending(&b.dev) == 0 && wab.held == NULL && wba.held == NULL) {
			break;
		}
		if (a.closed_seen || b.closed_seen) {
			break;
		}
	}
	if (getenv("B2B_DEBUG") && !closing) {
		struct side *v[2] = {&a, &b};
		for (int i = 0; i < 2; i++) {
			struct tide_net_conn *c = v[i]->c;
			printf("side %d: state %d una %u nxt %u max %u sbuf_seq %u slen %u cwnd %u "
			       "ssth %u "
			       "wnd %u rcv_nxt %u rlen %u ooo %u t_rto %lu t_per %lu now %lu "
			       "backoff %u "
			       "rec %d recover %u dup %u timer_next %lu\n",
			       i, c->state, c->snd_una, c->snd_nxt, c->snd_max, c->sbuf_seq,
			       c->sbuf.len, c->cwnd, c->ssthresh, c->snd_wnd, c->rcv_nxt,
			       c->rbuf.len, c->ooo_n, (unsigned long)c->t_rto,
			       (unsigned long)c->t_persist, (unsigned long)now, c->backoff,
			       c->in_recovery, c->recover, c->dupacks,
			       (unsigned long)c->stack->timer_next);
		}
	}
	CU_ASSERT_FALSE(a.closed_seen);
	CU_ASSERT_FALSE(b.closed_seen);
	CU_ASSERT_EQUAL(a.rcvd, XFER_BYTES);
	CU_ASSERT_EQUAL(b.rcvd, XFER_BYTES);
	CU_ASSERT_EQUAL(a.bad, 0);
	CU_ASSERT_EQUAL(b.bad, 0);
	CU_ASSERT(closing);
	CU_ASSERT_EQUAL(tide_net_stats(a.s)->tcp_conns, 0);
	CU_ASSERT_EQUAL(tide_net_stats(b.s)->tcp_conns, 0);
	if (cfg->drop_pm > 0) {
		CU_ASSERT(tide_net_stats(a.s)->tcp_retrans_segs > 0);
		CU_ASSERT(tide_net_stats(b.s)->tcp_retrans_segs > 0);
	}
	{
		const struct tide_net_stats *sa = tide_net_stats(a.s), *sb = tide_net_stats(b.s);

		*res = (struct xfer_result){
			.sim_ns = now - start,
			.dropped = wab.dropped + wba.dropped,
			.retrans = sa->tcp_retrans_segs + sb->tcp_retrans_segs,
			.rto = sa->tcp_rto_fired + sb->tcp_rto_fired,
			.sack_retrans = sa->tcp_sack_retrans_segs + sb->tcp_sack_retrans_segs,
			.lost_retrans = sa->tcp_lost_retrans + sb->tcp_lost_retrans,
			.spurious = sa->tcp_spurious_retrans + sb->tcp_spurious_retrans,
			.sack_tx = sa->tcp_sack_blocks_tx + sb->tcp_sack_blocks_tx,
			.sack_rx = sa->tcp_sack_blocks_rx + sb->tcp_sack_blocks_rx,
		};
		if (cfg->no_sack) {
			CU_ASSERT_EQUAL(res->sack_tx + res->sack_rx + res->sack_retrans, 0);
		}
		printf("\n    sack %s: blocks tx %lu rx %lu, sack retrans %lu, lost retrans %lu, "
		       "spurious %lu, dsack rx %lu",
		       cfg->no_sack ? "off" : "on", (unsigned long)res->sack_tx,
		       (unsigned long)res->sack_rx, (unsigned long)res->sack_retrans,
		       (unsigned long)res->lost_retrans, (unsigned long)res->spurious,
		       (unsigned long)(sa->tcp_dsack_rx + sb->tcp_dsack_rx));
	}
	printf("\n    loss %u/1000 dup %u reorder %u cc %s: %.3f simulated s, %lu steps, "
	       "dropped %lu+%lu duped %lu+%lu reordered %lu+%lu, retrans %lu+%lu "
	       "(fast %lu+%lu, rto %lu+%lu)\n",
	       cfg->drop_pm, cfg->dup_pm, cfg->reorder_pm, tcp_cc_get(cfg->cc)->name,
	       (double)(now - start) / 1e9, (unsigned long)steps, (unsigned long)wab.dropped,
	       (unsigned long)wba.dropped, (unsigned long)wab.duped, (unsigned long)wba.duped,
	       (unsigned long)wab.reordered, (unsigned long)wba.reordered,
	       (unsigned long)tide_net_stats(a.s)->tcp_retrans_segs,
	       (unsigned long)tide_net_stats(b.s)->tcp_retrans_segs,
	       (unsigned long)tide_net_stats(a.s)->tcp_fast_retrans,
	       (unsigned long)tide_net_stats(b.s)->tcp_fast_retrans,
	       (unsigned long)tide_net_stats(a.s)->tcp_rto_fired,
	       (unsigned long)tide_net_stats(b.s)->tcp_rto_fired);
	tide_net_listener_close(l, now);
	if (wab.held) {
		ut_buf_free(&a.dev, wab.held);
	}
	if (wba.held) {
		ut_buf_free(&b.dev, wba.held);
	}
	tide_net_stack_destroy(a.s);
	tide_net_stack_destroy(b.s);
	ut_dev_drain(&a.dev);
	ut_dev_drain(&b.dev);
	CU_ASSERT_EQUAL(a.dev.live + b.dev.live, 0);
	free(a.dev.q);
	free(b.dev.q);
}

static void
run_transfer(const struct link_cfg *cfg)
{
	struct xfer_result r;

	run_transfer_r(cfg, &r);
}

static void
test_clean_link(void)
{
	run_transfer(&(struct link_cfg){.seed = 1});
}

static void
test_loss_dup_reorder(void)
{
	run_transfer(&(struct link_cfg){.drop_pm = 10, .dup_pm = 10, .reorder_pm = 10, .seed = 2});
}

static void
test_heavy_loss_cubic(void)
{
	run_transfer(&(struct link_cfg){
		.drop_pm = 50, .dup_pm = 5, .reorder_pm = 20, .seed = 3, .cc = TIDE_NET_CC_CUBIC});
}

static void
test_wrapping_isn_with_loss(void)
{
	run_transfer(
		&(struct link_cfg){.drop_pm = 20, .reorder_pm = 20, .seed = 4, .wrap_isn = true});
}

/*
 * The same seeded link with and without SACK: SACK must deliver every byte,
 * resend no more than twice what the link dropped (frames carry data both
 * ways, so nearly every drop is a data segment) and not take longer than
 * NewReno with go-back-N.
 */
static void
sack_vs_baseline(unsigned drop_pm, unsigned reorder_pm, uint64_t seed, enum tide_net_cc cc)
{
	struct link_cfg cfg = {
		.drop_pm = drop_pm, .reorder_pm = reorder_pm, .seed = seed, .cc = cc};
	struct xfer_result with, without;

	run_transfer_r(&cfg, &with);
	cfg.no_sack = true;
	run_transfer_r(&cfg, &without);
	printf("\n    => %u/1000 loss: sack %.3f s %lu retrans %lu rto, no sack %.3f s %lu retrans "
	       "%lu rto\n",
	       drop_pm, (double)with.sim_ns / 1e9, (unsigned long)with.retrans,
	       (unsigned long)with.rto, (double)without.sim_ns / 1e9,
	       (unsigned long)without.retrans, (unsigned long)without.rto);
	CU_ASSERT(with.sack_tx > 0);
	CU_ASSERT(with.sack_rx > 0);
	CU_ASSERT(with.sack_retrans > 0);
	CU_ASSERT(with.retrans <= 2 * with.dropped);
	CU_ASSERT(with.sim_ns <= without.sim_ns);
	CU_ASSERT(with.rto <= without.rto);
}

static void
test_sack_1pct_reorder(void)
{
	sack_vs_baseline(10, 10, 11, TIDE_NET_CC_NEWRENO);
}

static void
test_sack_5pct_reorder(void)
{
	sack_vs_baseline(50, 10, 12, TIDE_NET_CC_NEWRENO);
}

static void
test_sack_5pct_reorder_cubic(void)
{
	sack_vs_baseline(50, 10, 13, TIDE_NET_CC_CUBIC);
}

static void
test_sack_5pct_reorder_westwood(void)
{
	sack_vs_baseline(50, 10, 14, TIDE_NET_CC_WESTWOOD);
}

/*
 * 5% loss both ways with a Linux-like 200 ms RTO floor against a ~10 us RTT:
 * a timeout costs 20000 RTTs, so loss recovery must not wait for it. Fast
 * recovery, the RACK timer and the one probe per episode resend lost
 * retransmissions long before it.
 */
static void
test_sack_5pct_200ms_rto_floor(void)
{
	struct xfer_result r;

	run_transfer_r(
		&(struct link_cfg){
			.drop_pm = 50, .reorder_pm = 10, .seed = 14, .rto_min_us = 200000},
		&r);
	printf("\n    => 200 ms RTO floor: %.3f s, %lu retrans, %lu rto, %lu lost retrans\n",
	       (double)r.sim_ns / 1e9, (unsigned long)r.retrans, (unsigned long)r.rto,
	       (unsigned long)r.lost_retrans);
}

/* Two stacks joined by a clean link with one connection a -> b open. */
struct pair {
	struct link_cfg cfg;
	struct side a, b;
	struct wire wab, wba;
	struct tide_net_listener *l;
	uint64_t now, rs;
};

static void
pair_pump_ab(struct pair *p)
{
	pump(&p->a, &p->b, &p->wab, &p->cfg, &p->rs, p->now);
}

static void
pair_open(struct pair *p, uint64_t seed)
{
	memset(p, 0, sizeof(*p));
	p->cfg.seed = seed;
	p->now = 1000 * NS_PER_MS;
	p->rs = 1;
	side_init(&p->a, 0, &p->cfg, p->now);
	side_init(&p->b, 1, &p->cfg, p->now);
	CU_ASSERT_FATAL(tide_net_listen(p->b.s, 7000, 16, side_accept, &p->b, &p->l) == 0);
	CU_ASSERT_FATAL(
		tide_net_connect(p->a.s, UT_PEER_IP, 7000, &side_cbs, &p->a, p->now, &p->a.c) == 0);
	for (int i = 0; i < 4 && !(p->a.connected && p->b.c != NULL); i++) {
		pair_pump_ab(p);
		pump(&p->b, &p->a, &p->wba, &p->cfg, &p->rs, p->now);
	}
	CU_ASSERT_FATAL(p->a.connected && p->b.c != NULL);
}

static void
pair_close(struct pair *p)
{
	tide_net_listener_close(p->l, p->now);
	tide_net_stack_destroy(p->a.s);
	tide_net_stack_destroy(p->b.s);
	ut_dev_drain(&p->a.dev);
	ut_dev_drain(&p->b.dev);
	CU_ASSERT_EQUAL(p->a.dev.live + p->b.dev.live, 0);
	free(p->a.dev.q);
	free(p->b.dev.q);
}

/*
 * A segment stamped with an earlier clock than one already sent (the TE
 * stamps with its poll's clock and with later reads in callbacks) keeps the
 * highest TSval: the receiving stack's PAWS check takes both, in order.
 */
static void
test_tsval_clock_back_no_paws(void)
{
	static struct pair p;
	uint8_t x[2000];

	for (unsigned i = 0; i < sizeof(x); i++) {
		x[i] = pat(0, i);
	}
	pair_open(&p, 21);
	CU_ASSERT_FATAL(p.a.c->ts_ok && p.b.c->ts_ok);
	/* First with a clock read 5 ms later, then with the earlier one. */
	CU_ASSERT_EQUAL(tide_net_send(p.a.c, x, 1000, p.now + 5 * NS_PER_MS), 1000);
	pair_pump_ab(&p);
	CU_ASSERT_EQUAL(p.b.rcvd, 1000);
	CU_ASSERT_EQUAL(tide_net_send(p.a.c, x + 1000, 1000, p.now), 1000);
	pair_pump_ab(&p);
	CU_ASSERT_EQUAL(p.b.rcvd, 2000);
	CU_ASSERT_EQUAL(p.b.bad, 0);
	CU_ASSERT_EQUAL(tide_net_stats(p.b.s)->tcp_rx_paws, 0);
	pump(&p.b, &p.a, &p.wba, &p.cfg, &p.rs, p.now);
	CU_ASSERT_EQUAL(p.a.c->snd_una, p.a.c->snd_max);
	CU_ASSERT_EQUAL(tide_net_stats(p.a.s)->tcp_rx_paws, 0);
	pair_close(&p);
}

/*
 * ACK coalescing: in-order segments of one RX burst are acknowledged once at
 * the burst's end, or every NET_ACK_STRETCH (8) segments, instead of every
 * second one; the sender still sees everything acknowledged.
 */
static void
test_one_ack_per_burst(void)
{
	static struct pair p;
	static uint8_t x[10 * 1460];
	uint64_t acks;
	uint32_t len;

	for (unsigned i = 0; i < sizeof(x); i++) {
		x[i] = pat(0, i);
	}
	pair_open(&p, 22);
	/* Ten full segments (the initial window) in one burst: ACKs after the
	 * 8th and at the end, not five. */
	len = 10u * p.a.c->mss;
	CU_ASSERT_FATAL(len <= sizeof(x));
	CU_ASSERT_EQUAL(tide_net_send(p.a.c, x, len, p.now), (ssize_t)len);
	acks = tide_net_stats(p.b.s)->tcp_tx_segs;
	pair_pump_ab(&p);
	CU_ASSERT_EQUAL(p.b.rcvd, len);
	CU_ASSERT_EQUAL(tide_net_stats(p.b.s)->tcp_tx_segs - acks, 2);
	pump(&p.b, &p.a, &p.wba, &p.cfg, &p.rs, p.now);
	CU_ASSERT_EQUAL(p.a.c->snd_una, p.a.c->snd_max);
	CU_ASSERT_EQUAL(p.b.bad, 0);
	pair_close(&p);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_b2b", NULL, NULL);
	CU_add_test(s, "clean_link", test_clean_link);
	CU_add_test(s, "tsval_clock_back_no_paws", test_tsval_clock_back_no_paws);
	CU_add_test(s, "one_ack_per_burst", test_one_ack_per_burst);
	CU_add_test(s, "loss_dup_reorder", test_loss_dup_reorder);
	CU_add_test(s, "heavy_loss_cubic", test_heavy_loss_cubic);
	CU_add_test(s, "wrapping_isn_with_loss", test_wrapping_isn_with_loss);
	CU_add_test(s, "sack_1pct_reorder", test_sack_1pct_reorder);
	CU_add_test(s, "sack_5pct_reorder", test_sack_5pct_reorder);
	CU_add_test(s, "sack_5pct_reorder_cubic", test_sack_5pct_reorder_cubic);
	CU_add_test(s, "sack_5pct_reorder_westwood", test_sack_5pct_reorder_westwood);
	CU_add_test(s, "sack_5pct_200ms_rto_floor", test_sack_5pct_200ms_rto_floor);
}

TIDE_UT_MAIN(register_tests)
