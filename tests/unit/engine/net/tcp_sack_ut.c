/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_sack.c: SACK option parsing, receiver block generation from the
 * out-of-order queue (order, merging, limits, D-SACK), the sender scoreboard
 * (merging, stale and forged blocks), hole retransmission order, proportional
 * rate reduction's timeline, the log of retransmissions kept for a second loss
 * (runs merged, the lowest never dropped), and the RTO
 * keeping SACKed data; the RACK timer and the probe that resend lost
 * retransmissions in recovery ahead of a 200 ms RTO; one probe per episode
 * when it resends, none after an RTO, so a silent peer sees only the RTO's
 * resends; a lone segment's probe waiting out the peer's delayed ACK, in
 * place of the RTO; loss patterns replayed with their timelines (a lost ACK
 * train met by up to six probes of new data, a tail, a retransmission lost
 * twice, a silent peer with data queued).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

#define IN(e, ...) ut_tcp_in((e), &(struct ut_seg){__VA_ARGS__})
#define P          1000u
#define MSS        1460u

static uint8_t data[64 * 1024];

/* NOP NOP SACK with n blocks; returns the option length. */
static uint8_t
sack_opt(uint8_t *p, const struct tcp_sack_blk *b, uint8_t n)
{
	p[0] = TCPOPT_NOP;
	p[1] = TCPOPT_NOP;
	p[2] = TCPOPT_SACK;
	p[3] = (uint8_t)(2 + 8 * n);
	for (uint8_t i = 0; i < n; i++) {
		uint32_t v[2] = {htonl(b[i].start), htonl(b[i].end)};

		memcpy(p + 4 + 8 * i, v, 8);
	}
	return (uint8_t)(4 + 8 * n);
}

static void
test_parse_blocks(void)
{
	struct tcp_sack_blk b[4] = {{10, 20}, {30, 40}, {50, 60}, {0xfffffff0u, 5}};
	uint8_t p[40];
	struct tcp_opts o;

	for (uint8_t n = 1; n <= 4; n++) {
		uint8_t len = sack_opt(p, b, n);

		CU_ASSERT_EQUAL(tcp_parse_options(p, len, false, &o), 0);
		CU_ASSERT_EQUAL(o.num_sacks, n);
		for (uint8_t i = 0; i < n; i++) {
			CU_ASSERT_EQUAL(o.sacks[i].start, b[i].start);
			CU_ASSERT_EQUAL(o.sacks[i].end, b[i].end);
		}
	}
	/* With timestamps in front: 3 blocks fill the 40 bytes. */
	ut_ts_opt(p, 77, 88);
	CU_ASSERT_EQUAL(sack_opt(p + 12, b, 3), 28);
	CU_ASSERT_EQUAL(tcp_parse_options(p, 40, false, &o), 0);
	CU_ASSERT(o.has_ts);
	CU_ASSERT_EQUAL(o.tsval, 77);
	CU_ASSERT_EQUAL(o.num_sacks, 3);
	CU_ASSERT_EQUAL(o.sacks[2].end, 60);
	/* A SYN's SACK blocks mean nothing. */
	CU_ASSERT_EQUAL(tcp_parse_options(p + 12, 28, true, &o), 0);
	CU_ASSERT_EQUAL(o.num_sacks, 0);
	/* Lengths other than 2 + 8n are ignored, the rest of the options still parse. */
	sack_opt(p, b, 1);
	p[3] = 8; /* too short for one block; the next bytes read as EOL */
	CU_ASSERT_EQUAL(tcp_parse_options(p, 12, false, &o), 0);
	CU_ASSERT_EQUAL(o.num_sacks, 0);
	p[3] = 2;
	ut_ts_opt(p + 4, 5, 6);
	CU_ASSERT_EQUAL(tcp_parse_options(p, 16, false, &o), 0);
	CU_ASSERT_EQUAL(o.num_sacks, 0);
	CU_ASSERT(o.has_ts);
	/* Longer than what is left: the header is malformed. */
	sack_opt(p, b, 2);
	CU_ASSERT_EQUAL(tcp_parse_options(p, 12, false, &o), -EINVAL);
}

/* Passive open, then pretend SACK was negotiated (the scripted SYN offers only MSS). */
static struct tide_net_conn *
sack_conn(struct ut_env *e, struct ut_app *a, uint32_t *iss, struct tide_net_listener **l)
{
	struct tide_net_conn *c;

	ut_env_init(e, NULL);
	ut_app_init(a);
	c = ut_passive_open(e, a, P, iss, l);
	c->sack_ok = true;
	return c;
}

/* Last ACK the stack sent. */
static void
last_ack(struct ut_env *e, struct ut_tcp_out *o)
{
	struct ut_tcp_out t;
	bool got = false;

	/* Cleared first: CU_ASSERT_FATAL's longjmp is invisible to gcc -O3, which would
	 * otherwise see callers read *o uninitialised when no segment came out. */
	memset(o, 0, sizeof(*o));
	while (ut_pop_tcp(e, &t) == 0) {
		*o = t;
		got = true;
	}
	CU_ASSERT_FATAL(got);
}

static void
test_receiver_blocks(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I, R = P + 1;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	/* Holes at R, R+200, R+400...: segments of 100 bytes at R+100, R+300, ... */
	IN(&e, .seq = R + 100, .ack = I + 1, .flags = TCPHDR_ACK, .data = data, .len = 100);
	last_ack(&e, &o);
	CU_ASSERT_EQUAL(o.ack, R);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 1);
	CU_ASSERT_EQUAL(o.opts.sacks[0].start, R + 100);
	CU_ASSERT_EQUAL(o.opts.sacks[0].end, R + 200);
	IN(&e, .seq = R + 500, .ack = I + 1, .flags = TCPHDR_ACK, .data = data, .len = 100);
	IN(&e, .seq = R + 300, .ack = I + 1, .flags = TCPHDR_ACK, .data = data, .len = 100);
	last_ack(&e, &o);
	/* Newest first, then the others in the order they were reported. */
	CU_ASSERT_EQUAL(o.opts.num_sacks, 3);
	CU_ASSERT_EQUAL(o.opts.sacks[0].start, R + 300);
	CU_ASSERT_EQUAL(o.opts.sacks[1].start, R + 500);
	CU_ASSERT_EQUAL(o.opts.sacks[2].start, R + 100);
	/* Filling between two runs merges them into one block. */
	IN(&e, .seq = R + 200, .ack = I + 1, .flags = TCPHDR_ACK, .data = data, .len = 100);
	last_ack(&e, &o);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 2);
	CU_ASSERT_EQUAL(o.opts.sacks[0].start, R + 100);
	CU_ASSERT_EQUAL(o.opts.sacks[0].end, R + 400);
	CU_ASSERT_EQUAL(o.opts.sacks[1].start, R + 500);
	/* Six runs: without timestamps 4 blocks fit, the newest first. */
	for (uint32_t k = 0; k < 4; k++) {
		IN(&e, .seq = R + 700 + 200 * k, .ack = I + 1, .flags = TCPHDR_ACK, .data = data,
		   .len = 100);
	}
	last_ack(&e, &o);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 4);
	CU_ASSERT_EQUAL(o.opts.sacks[0].start, R + 1300);
	CU_ASSERT_EQUAL(o.opts.sacks[1].start, R + 1100);
	CU_ASSERT_EQUAL(o.opts.sacks[2].start, R + 900);
	CU_ASSERT_EQUAL(o.opts.sacks[3].start, R + 700);
	/* A duplicate of queued data: D-SACK first, then the block holding it (RFC 2883). */
	IN(&e, .seq = R + 500, .ack = I + 1, .flags = TCPHDR_ACK, .data = data, .len = 100);
	last_ack(&e, &o);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 4);
	CU_ASSERT_EQUAL(o.opts.sacks[0].start, R + 500);
	CU_ASSERT_EQUAL(o.opts.sacks[0].end, R + 600);
	CU_ASSERT_EQUAL(o.opts.sacks[1].start, R + 500);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_dsack_tx, 1);
	/* Filling the first hole delivers up to the next one; blocks below rcv_nxt vanish. */
	IN(&e, .seq = R, .ack = I + 1, .flags = TCPHDR_ACK, .data = data, .len = 100);
	last_ack(&e, &o);
	CU_ASSERT_EQUAL(o.ack, R + 400);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 4);
	for (int i = 0; i < 4; i++) {
		CU_ASSERT(after(o.opts.sacks[i].start, R + 400));
	}
	/* Old data again: a D-SACK below the cumulative ACK. */
	IN(&e, .seq = R, .ack = I + 1, .flags = TCPHDR_ACK, .data = data, .len = 100);
	last_ack(&e, &o);
	CU_ASSERT_EQUAL(o.opts.sacks[0].start, R);
	CU_ASSERT_EQUAL(o.opts.sacks[0].end, R + 100);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_dsack_tx, 2);
	/* Everything in: no blocks any more. */
	for (uint32_t k = 0; k < 5; k++) {
		IN(&e, .seq = R + 400 + 200 * k, .ack = I + 1, .flags = TCPHDR_ACK, .data = data,
		   .len = 100);
	}
	last_ack(&e, &o);
	CU_ASSERT_EQUAL(o.ack, R + 1400);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 0);
	CU_ASSERT_EQUAL(a.rxn, 1400);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_receiver_blocks_with_ts_fit(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I, R = P + 1;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	c->ts_ok = true;
	c->mss = MSS - 12;
	for (uint32_t k = 0; k < 5; k++) {
		IN(&e, .seq = R + 100 + 200 * k, .ack = I + 1, .flags = TCPHDR_ACK, .data = data,
		   .len = 100);
	}
	last_ack(&e, &o);
	CU_ASSERT(o.opts.has_ts);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 3);
	CU_ASSERT_EQUAL(o.opts.sacks[0].start, R + 900);
	/* Data segments shrink so that the blocks still fit in the MSS. */
	c->snd_wnd = 65535;
	tide_net_send(c, data, 3000, e.now);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.opts.num_sacks, 3);
	CU_ASSERT_EQUAL(o.len, MSS - 12 - 28);
	CU_ASSERT(o.frame_len <= 14 + 1500);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_scoreboard(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct tcp_opts o;
	uint32_t I;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	uint32_t U = I + 1;
	/* Pretend 20000 bytes are out. */
	c->snd_una = U;
	c->snd_max = c->snd_nxt = U + 20000;
	memset(&o, 0, sizeof(o));
	o.num_sacks = 2;
	o.sacks[0] = (struct tcp_sack_blk){U + 3000, U + 4000};
	o.sacks[1] = (struct tcp_sack_blk){U + 1000, U + 2000};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U), 2000);
	CU_ASSERT_EQUAL(c->sb_n, 2);
	CU_ASSERT_EQUAL(c->sb[0].start, U + 1000); /* kept sorted */
	/* Overlapping both and bridging the gap: one range, only new bytes count. */
	o.num_sacks = 1;
	o.sacks[0] = (struct tcp_sack_blk){U + 1500, U + 3500};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U), 1000);
	CU_ASSERT_EQUAL(c->sb_n, 1);
	CU_ASSERT_EQUAL(c->sb[0].start, U + 1000);
	CU_ASSERT_EQUAL(c->sb[0].end, U + 4000);
	/* Adjacent ranges merge too. */
	o.sacks[0] = (struct tcp_sack_blk){U + 4000, U + 5000};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U), 1000);
	CU_ASSERT_EQUAL(c->sb_n, 1);
	CU_ASSERT_EQUAL(c->sb[0].end, U + 5000);
	/* Beyond snd_max, inverted: rejected and counted. */
	o.num_sacks = 2;
	o.sacks[0] = (struct tcp_sack_blk){U + 19000, U + 21000};
	o.sacks[1] = (struct tcp_sack_blk){U + 9000, U + 8000};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U), 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_sack_rejected, 2);
	CU_ASSERT_EQUAL(c->sb_n, 1);
	/* Stale (second block below the ACK) is ignored; a first one is a D-SACK. */
	o.sacks[0] = (struct tcp_sack_blk){U + 10000, U + 11000};
	o.sacks[1] = (struct tcp_sack_blk){U - 500, U};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U), 1000);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_sack_rejected, 2);
	o.sacks[0] = (struct tcp_sack_blk){U - 500, U};
	o.sacks[1] = (struct tcp_sack_blk){U + 10000, U + 11000};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U), 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_dsack_rx, 1);
	/* D-SACK inside the second block (RFC 2883 4.2). */
	o.sacks[0] = (struct tcp_sack_blk){U + 10200, U + 10400};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U), 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_dsack_rx, 2);
	CU_ASSERT_EQUAL(c->sb_n, 2);
	/* IsLost: the 5000 SACKed bytes above the first hole exceed 2 * MSS. */
	CU_ASSERT_EQUAL(tcp_sack_lost_edge(c), U + 1000);
	CU_ASSERT_EQUAL(tcp_sack_sacked_in(c, U, U + 20000), 5000);
	/* The cumulative ACK passes the first range: it is forgotten, the second kept. */
	c->snd_una = U + 6000;
	tcp_sack_clean(c);
	CU_ASSERT_EQUAL(c->sb_n, 1);
	CU_ASSERT_EQUAL(c->sb[0].start, U + 10000);
	/* A block straddling the ACK is clipped to it. */
	o.num_sacks = 1;
	o.sacks[0] = (struct tcp_sack_blk){U + 5000, U + 7000};
	CU_ASSERT_EQUAL(tcp_sack_update(c, &o, U + 6000), 1000);
	CU_ASSERT_EQUAL(c->sb[0].start, U + 6000);
	/* Bounded memory: many disjoint ranges never exceed TCP_SB_MAX, the lowest are kept. */
	tcp_sack_reset(c);
	c->snd_una = U;
	for (uint32_t k = 0; k < TCP_SB_MAX + 8; k++) {
		o.sacks[0] = (struct tcp_sack_blk){U + 100 + 200 * k, U + 200 + 200 * k};
		tcp_sack_update(c, &o, U);
	}
	CU_ASSERT_EQUAL(c->sb_n, TCP_SB_MAX);
	CU_ASSERT_EQUAL(c->sb[0].start, U + 100);
	CU_ASSERT(tide_net_stats(e.s)->tcp_sack_sb_overflow > 0);
	tcp_sack_reset(c);
	c->snd_una = c->snd_max = c->snd_nxt = U;
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/* Ten segments out; the peer SACKs everything but segments 0 and 5. */
static struct tide_net_conn *
ten_out(struct ut_env *e, struct ut_app *a, struct tide_net_listener **l, uint32_t *U)
{
	struct ut_tcp_out o;
	uint32_t I;
	struct tide_net_conn *c = sack_conn(e, a, &I, l);

	*U = I + 1;
	CU_ASSERT_EQUAL(tide_net_send(c, data, 10 * MSS, e->now), 10 * MSS);
	for (int i = 0; i < 10; i++) {
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(e, &o), 0);
		CU_ASSERT_EQUAL(o.seq, *U + i * MSS);
	}
	return c;
}

static void
sack_ack(struct ut_env *e, struct tide_net_conn *c, uint32_t ack, const struct tcp_sack_blk *b,
	 uint8_t n)
{
	uint8_t opt[40];
	uint8_t len = sack_opt(opt, b, n);

	IN(e, .seq = P + 1, .ack = ack, .flags = TCPHDR_ACK, .opts = opt, .optlen = len,
	   .dport = 80, .sport = 5000);
	(void)c;
}

/*
 * RFC 6937: segment 0 of 20 is lost and the rest arrive one per ACK. Recovery
 * halves the window, and proportional rate reduction spreads the cut over the
 * round: about one segment per two delivered from the first ACKs on, never a
 * burst. RFC 6675's rule alone (pipe < cwnd) sent nothing for the first eight
 * ACKs, then one per ACK; a burst of holes marked lost at once went out
 * together, into the queue that had just overflowed.
 */
static void
test_prr_spreads_the_reduction(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I, U;
	unsigned per_ack[20] = {0}, entered = 0;
	bool first_rtx = false;
	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);

	U = I + 1;
	c->cwnd = 20 * MSS;
	CU_ASSERT_EQUAL(tide_net_send(c, data, 40 * MSS, e.now), 40 * MSS);
	for (int i = 0; i < 20; i++) {
		CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
		CU_ASSERT_EQUAL(o.seq, U + i * MSS);
	}
	CU_ASSERT_NOT_EQUAL(ut_pop_tcp(&e, &o), 0); /* cwnd-limited */
	for (unsigned k = 1; k < 20; k++) {
		struct tcp_sack_blk b = {U + MSS, U + (k + 1) * MSS};

		sack_ack(&e, c, U, &b, 1);
		if (c->in_recovery && entered == 0)
			entered = k;
		while (ut_pop_tcp(&e, &o) == 0) {
			if (o.len == 0)
				continue;
			if (o.seq == U)
				first_rtx = true;
			per_ack[k]++;
		}
	}
	CU_ASSERT_FATAL(entered == 3); /* three segments SACKed above the hole */
	CU_ASSERT(first_rtx);
	CU_ASSERT(c->in_recovery);
	unsigned early = 0, total = 0;
	for (unsigned k = entered + 1; k < 20; k++) {
		CU_ASSERT(per_ack[k] <= 1);
		total += per_ack[k];
		if (k <= entered + 8)
			early += per_ack[k];
	}
	printf("\n    PRR: recovery at ACK %u, then %u segments for %u ACKs (%u in the first 8)\n",
	       entered, total, 19 - entered, early);
	CU_ASSERT(early >= 3 && early <= 5);
	CU_ASSERT(total >= 7 && total <= 10);
	/* The ACK for everything ends recovery at ssthresh. */
	IN(&e, .seq = P + 1, .ack = c->snd_max, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(c->cwnd, c->ssthresh);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * The log of retransmissions watched for a second loss: a run of consecutive
 * segments is one entry; a full log gives up its highest entry, never the one at
 * snd_una, whose second loss the cumulative ACK waits on (out of watch, it waited
 * for the 200 ms RTO).
 */
static void
test_rtx_log_keeps_the_lowest(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	uint32_t U;
	bool lowest = false;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	c->rtx_n = 0;
	/* Segments 0, 1 and 2 resent one after another: one entry. */
	for (uint32_t i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(tcp_sack_retransmit(c, U + i * MSS, MSS, TCPHDR_ACK, -1, e.now), 0);
	CU_ASSERT_EQUAL_FATAL(c->rtx_n, 1);
	CU_ASSERT_EQUAL(c->rtx[0].start, U);
	CU_ASSERT_EQUAL(c->rtx[0].end, U + 3 * MSS);
	/* Far more resends than the log holds, none next to the one before. */
	for (uint32_t i = 0; i < 3 * TCP_RTX_LOG_MAX; i++) {
		uint32_t seg = 4 + 2 * (i % 3);

		ut_advance(&e, NS_PER_US);
		CU_ASSERT_EQUAL(tcp_sack_retransmit(c, U + seg * MSS, MSS, TCPHDR_ACK, -1, e.now),
				0);
	}
	CU_ASSERT_EQUAL(c->rtx_n, TCP_RTX_LOG_MAX);
	for (uint8_t i = 0; i < c->rtx_n; i++) {
		lowest |= c->rtx[i].start == U;
		CU_ASSERT(!after(c->rtx[i].start, U + 8 * MSS));
	}
	CU_ASSERT(lowest);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_hole_retransmission_order(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t U;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	/* Segments 1-2 arrive: one block, not enough for IsLost, no retransmission. */
	struct tcp_sack_blk b[2] = {{U + MSS, U + 3 * MSS}};
	sack_ack(&e, c, U, b, 1);
	CU_ASSERT_FALSE(c->in_recovery);
	while (ut_pop_tcp(&e, &o) == 0) {
		CU_ASSERT(!before(o.seq, U + 10 * MSS)); /* limited transmit: new data only */
	}
	/* 1-4 and 6-9: IsLost(0) (and 5, with three segments SACKed above it). */
	b[0] = (struct tcp_sack_blk){U + 6 * MSS, U + 10 * MSS};
	b[1] = (struct tcp_sack_blk){U + MSS, U + 5 * MSS};
	sack_ack(&e, c, U, b, 2);
	CU_ASSERT(c->in_recovery);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_sack_recoveries, 1);
	uint32_t seen[8], n = 0;
	while (ut_pop_tcp(&e, &o) == 0 && n < 8) {
		if (before(o.seq, U + 10 * MSS)) {
			seen[n++] = o.seq;
			CU_ASSERT_EQUAL(o.len, MSS);
		}
	}
	/* Exactly the two holes, lowest first; nothing SACKed went again. */
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(seen[0], U);
	CU_ASSERT_EQUAL(seen[1], U + 5 * MSS);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_sack_retrans_segs, 2);
	/* The holes are filled: recovery ends on the ACK that covers the recovery point. */
	IN(&e, .seq = P + 1, .ack = c->snd_max, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(c->sb_n, 0);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_rto_keeps_sacked(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t U;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	/* Only segments 6-7 are SACKed: too little for IsLost, and no new data may go. */
	struct tcp_sack_blk b[1] = {{U + 6 * MSS, U + 8 * MSS}};
	c->snd_wnd = 10 * MSS; /* no room for new data: nothing but the RTO can help */
	c->srtt = 0;           /* no RTT sample: no RACK timer and no probe either */
	sack_ack(&e, c, U, b, 1);
	ut_dev_drain(&e.dev);
	CU_ASSERT_FALSE(c->in_recovery);
	/* RTO: snd_una's segment first, with a one-segment window. */
	ut_advance(&e, c->rto + NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 1);
	CU_ASSERT(c->loss_state);
	CU_ASSERT_EQUAL(c->sb_n, 1); /* SACKed data kept */
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, U);
	CU_ASSERT_EQUAL(ut_pop_tcp(&e, &o), -1);
	/* Each ACK opens the window; resent segments skip 6-7 (SACKed). */
	uint32_t ack = U + MSS;
	uint32_t sent[16], n = 0;
	while (before(ack, U + 10 * MSS) && n < 16) {
		IN(&e, .seq = P + 1, .ack = ack, .flags = TCPHDR_ACK,
		   .opts = (uint8_t[12]){TCPOPT_NOP, TCPOPT_NOP, TCPOPT_SACK, 10,
					 (uint8_t)((U + 6 * MSS) >> 24),
					 (uint8_t)((U + 6 * MSS) >> 16),
					 (uint8_t)((U + 6 * MSS) >> 8), (uint8_t)(U + 6 * MSS),
					 (uint8_t)((U + 8 * MSS) >> 24),
					 (uint8_t)((U + 8 * MSS) >> 16),
					 (uint8_t)((U + 8 * MSS) >> 8), (uint8_t)(U + 8 * MSS)},
		   .optlen = before(ack, U + 6 * MSS) ? 12 : 0);
		while (ut_pop_tcp(&e, &o) == 0 && n < 16) {
			if (before(o.seq, U + 10 * MSS)) {
				sent[n++] = o.seq;
			}
		}
		ack = ack == U + 5 * MSS ? U + 6 * MSS : ack + MSS;
		if (ack == U + 6 * MSS) {
			ack = U + 8 * MSS; /* the receiver holds 6-7 */
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		CU_ASSERT(!between(sent[i], U + 6 * MSS, U + 8 * MSS - 1));
	}
	/* 1..5 and 8, 9 were resent, each once. */
	CU_ASSERT_EQUAL(n, 7);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_retrans_segs, 8);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * Peer-like timing: an RTO floor far above the RTT (a Linux peer needs 200 ms)
 * with a 100 us SRTT, so the probe timer (PTO 200 us: 2 SRTT, at its floor) runs
 * well ahead of it.
 */
static void
slow_rto(struct ut_env *e, struct tide_net_conn *c)
{
	c->srtt = 100 * NS_PER_US;
	c->rttvar = 50 * NS_PER_US;
	c->rto = 200 * NS_PER_MS;
	tcp_rearm_rto(c, e->now);
	tcp_tlp_arm(c, e->now);
}

/* Times (ns after start) of the segments the stack sends at seq within `span`. */
static unsigned
watch_seq(struct ut_env *e, uint32_t seq, uint64_t span, uint64_t *at, unsigned max)
{
	uint64_t t0 = e->now;
	unsigned n = 0;
	struct ut_tcp_out o;

	while (e->now - t0 < span) {
		ut_advance(e, 50 * NS_PER_US);
		while (ut_pop_tcp(e, &o) == 0) {
			if (o.seq == seq && o.len > 0 && n < max) {
				at[n++] = e->now - t0;
			}
		}
	}
	return n;
}

/* In recovery, the retransmission of the only hole is lost and nothing sent after it
 * can be SACKed: the probe timer marks it lost by time and resends it, long before
 * the RTO. */
static void
test_lost_retransmission_tail_resent_before_rto(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint64_t at[4];
	uint32_t U;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	slow_rto(&e, c);
	c->snd_wnd = 10 * MSS; /* no new data may go */
	struct tcp_sack_blk b[1] = {{U + MSS, U + 10 * MSS}};
	sack_ack(&e, c, U, b, 1);
	CU_ASSERT_FATAL(c->in_recovery);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, U); /* the fast retransmission: lost on the wire */
	ut_dev_drain(&e.dev);
	CU_ASSERT_EQUAL(watch_seq(&e, U, 5 * NS_PER_MS, at, 4) >= 1, true);
	CU_ASSERT(at[0] <= 2 * NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	CU_ASSERT(tide_net_stats(e.s)->tcp_lost_retrans >= 1);
	CU_ASSERT(tide_net_stats(e.s)->tcp_tlp_probes >= 1);
	/* It arrives: recovery ends without an RTO. */
	IN(&e, .seq = P + 1, .ack = U + 10 * MSS, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * In recovery, the fast retransmission is lost, and data sent after it is
 * SACKed before a reordering window (SRTT / 4) has passed; then the ACKs
 * stop. The RACK timer (not a probe) marks it lost when the window ends and
 * resends it.
 */
static void
test_rack_timer_resends_lost_retransmission(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint64_t t0, at = 0;
	uint32_t U;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	slow_rto(&e, c);
	c->snd_wnd = 20 * MSS;
	struct tcp_sack_blk b[1] = {{U + MSS, U + 10 * MSS}};
	sack_ack(&e, c, U, b, 1);
	CU_ASSERT_FATAL(c->in_recovery);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, U); /* the fast retransmission: lost on the wire */
	ut_dev_drain(&e.dev);
	t0 = e.now;
	/* New data after it, SACKed 20 us later: evidence, but not yet the time. */
	CU_ASSERT_EQUAL(tide_net_send(c, data, MSS, e.now), MSS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, U + 10 * MSS);
	ut_advance(&e, 20 * NS_PER_US);
	b[0] = (struct tcp_sack_blk){U + MSS, U + 11 * MSS};
	sack_ack(&e, c, U, b, 1);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	CU_ASSERT(c->t_rack != 0);
	while (at == 0 && e.now - t0 < 2 * NS_PER_MS) {
		ut_advance(&e, 5 * NS_PER_US);
		while (ut_pop_tcp(&e, &o) == 0) {
			if (o.seq == U && o.len > 0 && at == 0) {
				at = e.now - t0;
			}
		}
	}
	/* 125 us (SRTT + SRTT / 4) after the retransmission, before the probe could. */
	CU_ASSERT(at >= 125 * NS_PER_US && at <= 135 * NS_PER_US);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_lost_retrans, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	IN(&e, .seq = P + 1, .ack = U + 11 * MSS, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(c->t_rack, 0);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * RACK for original data (RFC 8985 6.2): five segments out, only the last one
 * SACKed: too little for DupThresh, too many for early retransmit, and the
 * window allows nothing new. The four below it are lost once the SACK is a
 * reordering window (100 us here) old: recovery starts on the RACK timer,
 * before any probe. If the hole fills within the window, it was reordering
 * and nothing is resent (watched until just before the 200 us PTO).
 */
static void
check_rack_originals(bool reordered)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint64_t t0, at = 0;
	uint32_t I, U;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	U = I + 1;
	c->snd_wnd = 5 * MSS;
	CU_ASSERT_EQUAL(tide_net_send(c, data, 8 * MSS, e.now), 8 * MSS);
	ut_dev_drain(&e.dev);
	CU_ASSERT_EQUAL_FATAL(c->snd_max, U + 5 * MSS);
	slow_rto(&e, c);
	struct tcp_sack_blk b[1] = {{U + 4 * MSS, U + 5 * MSS}};
	uint8_t opt[12];
	IN(&e, .seq = P + 1, .ack = U, .flags = TCPHDR_ACK, .opts = opt,
	   .optlen = sack_opt(opt, b, 1), .wnd = 5 * MSS);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	CU_ASSERT(c->t_rack != 0);
	t0 = e.now;
	if (reordered) {
		/* The first four arrive 50 us later: only the SACKed segment was early. */
		ut_advance(&e, 50 * NS_PER_US);
		IN(&e, .seq = P + 1, .ack = U + 5 * MSS, .flags = TCPHDR_ACK);
		ut_dev_drain(&e.dev); /* new data the ACK let out */
	}
	while (e.now - t0 < 190 * NS_PER_US) {
		ut_advance(&e, 5 * NS_PER_US);
		while (ut_pop_tcp(&e, &o) == 0) {
			if (o.seq == U && o.len > 0 && at == 0) {
				at = e.now - t0;
			}
		}
	}
	if (reordered) {
		CU_ASSERT_EQUAL(at, 0);
		CU_ASSERT_FALSE(c->in_recovery);
		CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_retrans_segs, 0);
	} else {
		CU_ASSERT(at >= 100 * NS_PER_US && at <= 110 * NS_PER_US);
		CU_ASSERT(c->in_recovery);
		CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_sack_recoveries, 1);
		CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 0);
		CU_ASSERT_EQUAL(tcp_sack_lost_edge(c), U + 4 * MSS);
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_rack_marks_originals_lost(void)
{
	check_rack_originals(false);
}

static void
test_rack_reordering_not_loss(void)
{
	check_rack_originals(true);
}

/*
 * With an RTO far above the PTO (200 ms against 200 us), one probe per
 * episode (RFC 8985 7.3): the last segment goes once at the PTO, then only
 * the RTO resends, with its backoff, until new data is acknowledged, which
 * starts a new episode with a probe again.
 */
static void
test_one_probe_per_episode(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint64_t at[16];
	uint32_t I, U;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	U = I + 1;
	CU_ASSERT_EQUAL(tide_net_send(c, data, 2 * MSS, e.now), 2 * MSS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	slow_rto(&e, c);
	/* The probe: the last segment, 2 SRTT (200 us, the floor) after. */
	CU_ASSERT_EQUAL(watch_seq(&e, U + MSS, 199 * NS_PER_MS, at, 16), 1);
	CU_ASSERT(at[0] >= 200 * NS_PER_US && at[0] <= 250 * NS_PER_US);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	CU_ASSERT(c->tlp_done);
	CU_ASSERT_EQUAL(c->t_tlp, 0);
	/* The probe re-armed the RTO: it fires 200 ms after it, then 400 ms later. */
	CU_ASSERT_EQUAL(watch_seq(&e, U, 700 * NS_PER_MS, at, 16), 2);
	CU_ASSERT(at[0] >= 1 * NS_PER_MS && at[0] <= 2 * NS_PER_MS);
	CU_ASSERT(at[1] - at[0] >= 399 * NS_PER_MS && at[1] - at[0] <= 401 * NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 2);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 1);
	/* An ACK of new data starts a new episode: the next tail gets its probe. */
	IN(&e, .seq = P + 1, .ack = U + 2 * MSS, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->tlp_done);
	ut_dev_drain(&e.dev);
	c->cwnd = 10 * MSS; /* out of the RTO's slow start: both segments go at once */
	CU_ASSERT_EQUAL(tide_net_send(c, data, 2 * MSS, e.now), 2 * MSS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	slow_rto(&e, c);
	CU_ASSERT_EQUAL(watch_seq(&e, U + 3 * MSS, 10 * NS_PER_MS, at, 16), 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 2);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * One segment out: the peer may hold its ACK for its delayed-ACK time, taken
 * as the RTO floor (RFC 8985 7.2 WCDelAckT). With a 200 ms floor that puts
 * the probe past the RTO, so it goes just before it, in its place: one
 * resend at 200 ms that is a probe (the window stays), then the RTO 200 ms
 * after it.
 */
static void
test_one_segment_probe_waits_delayed_ack(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint64_t at[4];
	uint32_t I, U, cwnd;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	U = I + 1;
	e.s->o.tcp_rto_min_us = 200000;
	CU_ASSERT_EQUAL(tide_net_send(c, data, MSS, e.now), MSS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	slow_rto(&e, c);
	cwnd = c->cwnd;
	CU_ASSERT_EQUAL(watch_seq(&e, U, 250 * NS_PER_MS, at, 4), 1);
	CU_ASSERT(at[0] >= 199 * NS_PER_MS && at[0] <= 201 * NS_PER_MS);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	CU_ASSERT_EQUAL(c->cwnd, cwnd);
	CU_ASSERT_EQUAL(watch_seq(&e, U, 200 * NS_PER_MS, at, 4), 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 1);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * The peer goes silent for 10 s with SACK negotiated and the default 1 ms
 * RTO floor: the first segment is resent by the RTO alone, with its backoff
 * (1, 2, 4, ... 4096 ms: 13 times), plus the one probe before the first
 * timeout (the next would come after it). It was resent after every timeout
 * by a train of probes too (about 50 times in 10 s).
 */
static void
test_silent_peer_rto_only(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint64_t t0;
	uint32_t I, U;
	unsigned n = 0;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	U = I + 1;
	CU_ASSERT_FATAL(c->srtt != 0); /* sampled from the handshake: probes are armed */
	CU_ASSERT_EQUAL(tide_net_send(c, data, MSS, e.now), MSS);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	t0 = e.now;
	while (e.now - t0 < 10000 * NS_PER_MS) {
		ut_advance(&e, 100 * NS_PER_US);
		while (ut_pop_tcp(&e, &o) == 0) {
			CU_ASSERT_EQUAL(o.seq, U);
			n += o.seq == U && o.len > 0;
		}
	}
	printf("\n    10 s silent: %u resends, %lu RTOs, %lu probes", n,
	       (unsigned long)tide_net_stats(e.s)->tcp_rto_fired,
	       (unsigned long)tide_net_stats(e.s)->tcp_tlp_probes);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 13);
	CU_ASSERT(tide_net_stats(e.s)->tcp_tlp_probes <= 1);
	CU_ASSERT_EQUAL(n,
			tide_net_stats(e.s)->tcp_rto_fired + tide_net_stats(e.s)->tcp_tlp_probes);
	CU_ASSERT_EQUAL(c->state, TCP_ESTABLISHED);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/* ---- loss patterns replayed, with their timelines (issue 35) ---- */

/* One data segment the stack sent: its sequence and when (ns after t0). */
struct sent_seg {
	uint32_t seq;
	uint64_t at;
};

/* Run the clock for span in 10 us steps; record data segments (at most max). */
static unsigned
timeline(struct ut_env *e, uint64_t span, struct sent_seg *out, unsigned max)
{
	uint64_t t0 = e->now;
	unsigned n = 0;
	struct ut_tcp_out o;

	while (e->now - t0 < span) {
		ut_advance(e, 10 * NS_PER_US);
		while (ut_pop_tcp(e, &o) == 0) {
			if (o.len > 0 && n < max) {
				out[n++] = (struct sent_seg){o.seq, e->now - t0};
			}
		}
	}
	return n;
}

/* ten_out with 20 segments queued: 10 out (the initial window), 10 waiting. */
static struct tide_net_conn *
ten_out_more_queued(struct ut_env *e, struct ut_app *a, struct tide_net_listener **l, uint32_t *U)
{
	struct tide_net_conn *c = ten_out(e, a, l, U);

	CU_ASSERT_EQUAL(tide_net_send(c, data, 10 * MSS, e->now), 10 * MSS);
	CU_ASSERT_EQUAL(ut_dev_pending(&e->dev), 0); /* the window is full */
	slow_rto(e, c);
	return c;
}

/*
 * A lost ACK train: the peer got the whole window, and every ACK it sent was
 * lost. Each probe is new data (the window was full, not the network silent),
 * and a further probe follows a doubled PTO later: at 200 us (2 SRTT, the
 * floor), 0.6, 1.4, 3, 6.2 and 12.6 ms, six in all, then nothing until the RTO
 * 200 ms after the last. The last probe's ACK arrives: no RTO, a new episode.
 */
static void
test_lost_ack_train_probes_new_data(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct sent_seg sg[8];
	uint32_t U;
	unsigned n;

	struct tide_net_conn *c = ten_out_more_queued(&e, &a, &l, &U);
	n = timeline(&e, 20 * NS_PER_MS, sg, 8);
	CU_ASSERT_EQUAL_FATAL(n, 6);
	for (unsigned i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(sg[i].seq, U + (10 + i) * MSS); /* new data, in order */
	}
	CU_ASSERT(sg[0].at >= 200 * NS_PER_US && sg[0].at <= 220 * NS_PER_US);
	for (unsigned i = 1; i < n; i++) {
		uint64_t gap = sg[i].at - sg[i - 1].at, want = (400 * NS_PER_US) << (i - 1);

		CU_ASSERT(gap >= want && gap <= want + 20 * NS_PER_US);
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 6);
	CU_ASSERT(c->tlp_done);
	CU_ASSERT_EQUAL(c->t_tlp, 0);
	CU_ASSERT(c->t_rto >= e.now + 190 * NS_PER_MS); /* re-armed by the last probe */
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	/* The last probe's ACK: everything arrived. */
	IN(&e, .seq = P + 1, .ack = U + 16 * MSS, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->tlp_done);
	CU_ASSERT_EQUAL(c->tlp_n, 0);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_retrans_segs, 0); /* new data, not resends */
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * The same train, but the first probe's ACK gets through (acknowledging all
 * eleven segments): the episode ends after one probe, and the ACK opens the
 * window for the rest without a second probe. The path is faster than the
 * probe's floor (30 us SRTT, a NIC's LAN): the probe waits TLP_PTO_MIN_NS
 * (200 us), not 2 SRTT (60 us), so a receiver holding its ACK for ~100 us
 * (SACK compression) draws none.
 */
static void
test_lost_ack_train_first_probe_answered(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct sent_seg sg[8];
	uint32_t U;

	struct tide_net_conn *c = ten_out_more_queued(&e, &a, &l, &U);
	c->srtt = 30 * NS_PER_US;
	tcp_tlp_arm(c, e.now);
	CU_ASSERT_EQUAL_FATAL(timeline(&e, 300 * NS_PER_US, sg, 8), 1);
	CU_ASSERT_EQUAL(sg[0].seq, U + 10 * MSS);
	CU_ASSERT(sg[0].at >= 200 * NS_PER_US && sg[0].at <= 210 * NS_PER_US);
	IN(&e, .seq = P + 1, .ack = U + 11 * MSS, .flags = TCPHDR_ACK);
	ut_dev_drain(&e.dev); /* the rest of the queue, as the window allows */
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 1);
	CU_ASSERT_EQUAL(c->tlp_n, 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * A tail: the last segment of the flight is lost and nothing more is queued.
 * The probe resends it (the last unSACKed segment) at the PTO, once; it is
 * answered and no recovery is entered (the probe repaired the loss, RFC 8985
 * 7.4), no RTO fires.
 */
static void
test_tail_loss_single_probe(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct sent_seg sg[8];
	uint32_t U;
	unsigned n;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	slow_rto(&e, c);
	IN(&e, .seq = P + 1, .ack = U + 9 * MSS, .flags = TCPHDR_ACK);
	slow_rto(&e, c); /* the ACK's RTT sample set the 1 ms floor's RTO: back to 200 ms */
	n = timeline(&e, 5 * NS_PER_MS, sg, 8);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(sg[0].seq, U + 9 * MSS);
	/* One segment out: 2 SRTT (200 us, the floor) plus the peer's delayed ACK, taken
	 * as the RTO floor (1 ms). */
	CU_ASSERT(sg[0].at >= 1200 * NS_PER_US && sg[0].at <= 1220 * NS_PER_US);
	CU_ASSERT(c->tlp_done); /* a resend: the episode's one probe */
	IN(&e, .seq = P + 1, .ack = U + 10 * MSS, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 1);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_sack_recoveries, 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	CU_ASSERT_EQUAL(c->t_rto, 0);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * A retransmission lost twice: in recovery, the only hole's fast
 * retransmission is lost, then its resend by the probe is lost too. The next
 * probe (a doubled PTO after) resends it a third time, which arrives: no RTO.
 * Timeline: fast retransmission at 0, resends within 2 ms and about 1 ms
 * after that, nothing else of the hole.
 */
static void
test_retransmission_lost_twice_no_rto(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	struct sent_seg sg[8];
	uint32_t U;
	unsigned n;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	slow_rto(&e, c);
	c->snd_wnd = 10 * MSS; /* no new data may go: only the hole */
	struct tcp_sack_blk b[1] = {{U + MSS, U + 10 * MSS}};
	sack_ack(&e, c, U, b, 1);
	CU_ASSERT_FATAL(c->in_recovery);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, U); /* the fast retransmission: lost */
	n = timeline(&e, 6 * NS_PER_MS, sg, 8);
	CU_ASSERT_FATAL(n >= 2);
	CU_ASSERT_EQUAL(sg[0].seq, U);
	CU_ASSERT_EQUAL(sg[1].seq, U);
	CU_ASSERT(sg[0].at <= 2 * NS_PER_MS);
	CU_ASSERT(sg[1].at > sg[0].at && sg[1].at - sg[0].at <= 2100 * NS_PER_US);
	CU_ASSERT(n <= 6); /* at most TLP_MAX_PROBES */
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	/* The last one arrives. */
	IN(&e, .seq = P + 1, .ack = U + 10 * MSS, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 0);
	ut_dev_drain(&e.dev);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * A silent peer with data queued (a bulk sender whose peer vanished): six
 * probes of new data at most, then the RTO alone with its backoff, as with
 * nothing queued. 10 s with the 1 ms floor: the probes, then 13 timeouts
 * (1, 2, 4, ... 4096 ms), each resending the first segment only.
 */
static void
test_silent_peer_with_data_bounded_probes(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint64_t t0;
	uint32_t U;
	unsigned first = 0, fresh = 0;

	struct tide_net_conn *c = ten_out(&e, &a, &l, &U);
	CU_ASSERT_EQUAL(tide_net_send(c, data, 10 * MSS, e.now), 10 * MSS);
	t0 = e.now;
	while (e.now - t0 < 10000 * NS_PER_MS) {
		ut_advance(&e, 100 * NS_PER_US);
		while (ut_pop_tcp(&e, &o) == 0) {
			first += o.seq == U && o.len > 0;
			fresh += !before(o.seq, U + 10 * MSS) && o.len > 0;
		}
	}
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_tlp_probes, 6);
	CU_ASSERT_EQUAL(fresh, 6);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_rto_fired, 13);
	CU_ASSERT_EQUAL(first, 13);
	CU_ASSERT_EQUAL(c->state, TCP_ESTABLISHED);
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

/*
 * The receiver's blocks against a model (issue 35: the out-of-order queue
 * caches its last run): 20,000 arrivals of 100-byte slots, random within 64
 * slots of RCV.NXT (duplicates, overlaps of two slots, in-order fills among
 * them), one RX burst of one to four segments at a time. After every burst
 * the last ACK's cumulative point and each SACK block must match a bitmap of
 * what arrived: every block a maximal run of received slots above the ACK,
 * the first one holding the newest arrival above it.
 */
static void
test_receiver_blocks_random_model(void)
{
	enum { SLOTS = 64, SZ = 100, ROUNDS = 20000 };
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	struct ut_seg b[4];
	uint8_t have[4 * SLOTS]; /* slot k (from the start) received */
	uint32_t I, R = P + 1, base = 0, x = 12345;
	unsigned bad = 0;

	struct tide_net_conn *c = sack_conn(&e, &a, &I, &l);
	/* Blocks, not timing: each burst's ACK at its end (tcp_input_ut checks
	 * SACK compression's timeline). */
	e.s->o.tcp_sack_compress = false;
	memset(have, 0, sizeof(have));
	for (unsigned r = 0; r < ROUNDS && bad < 5; r++) {
		unsigned n = 1 + r % 4;
		uint32_t newest = 0;
		bool newest_above = false, dup = false;

		for (unsigned i = 0; i < n; i++) {
			uint32_t k, len;

			x = x * 1103515245u + 12345u;
			k = base + (x >> 16) % SLOTS;
			len = ((x >> 8) & 7) == 0 ? 2 * SZ : SZ;
			b[i] = (struct ut_seg){.seq = R + k * SZ,
					       .ack = I + 1,
					       .flags = TCPHDR_ACK,
					       .data = data,
					       .len = (uint16_t)len};
			for (uint32_t j = k; j < k + len / SZ; j++) {
				dup = dup || j < base || have[j % (4 * SLOTS)];
				have[j % (4 * SLOTS)] = 1;
			}
			newest = k;
		}
		ut_tcp_in_burst(&e, b, n);
		while (have[base % (4 * SLOTS)]) {
			have[base % (4 * SLOTS)] = 0;
			base++;
			/* Forget slots far behind, so the ring never aliases. */
			have[(base + 2 * SLOTS) % (4 * SLOTS)] = 0;
		}
		newest_above = newest >= base;
		last_ack(&e, &o);
		if (o.ack != R + base * SZ) {
			bad++;
			CU_FAIL("cumulative ACK differs from the model");
			continue;
		}
		for (uint8_t i = 0, first = 0; i < o.opts.num_sacks; i++) {
			uint32_t s0 = (o.opts.sacks[i].start - R) / SZ,
				 e0 = (o.opts.sacks[i].end - R) / SZ;
			bool ok = s0 > base && e0 > s0 && !have[(s0 - 1) % (4 * SLOTS)] &&
				  !have[e0 % (4 * SLOTS)];

			for (uint32_t j = s0; ok && j < e0; j++) {
				ok = have[j % (4 * SLOTS)];
			}
			if (i == first && newest_above) {
				ok = ok && newest >= s0 && newest < e0;
			}
			if (!ok && i == 0 && dup) {
				/* A D-SACK (RFC 2883) of a duplicate of this burst, when the ACK
				 * that carries it is the last: data received, not a whole run. */
				bool in = e0 > s0;

				for (uint32_t j = s0; in && j < e0; j++) {
					in = j < base || have[j % (4 * SLOTS)];
				}
				if (in) {
					first = 1;
					continue;
				}
			}
			if (!ok) {
				bad++;
				CU_FAIL("a SACK block is not a maximal received run");
			}
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(base > ROUNDS / 4); /* the stream moved on: holes kept filling */
	tide_net_abort(c, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_sack", NULL, NULL);
	CU_add_test(s, "parse_blocks", test_parse_blocks);
	CU_add_test(s, "receiver_blocks", test_receiver_blocks);
	CU_add_test(s, "receiver_blocks_with_ts_fit", test_receiver_blocks_with_ts_fit);
	CU_add_test(s, "receiver_blocks_random_model", test_receiver_blocks_random_model);
	CU_add_test(s, "scoreboard", test_scoreboard);
	CU_add_test(s, "hole_retransmission_order", test_hole_retransmission_order);
	CU_add_test(s, "prr_spreads_the_reduction", test_prr_spreads_the_reduction);
	CU_add_test(s, "rtx_log_keeps_the_lowest", test_rtx_log_keeps_the_lowest);
	CU_add_test(s, "rto_keeps_sacked", test_rto_keeps_sacked);
	CU_add_test(s, "lost_retransmission_tail_resent_before_rto",
		    test_lost_retransmission_tail_resent_before_rto);
	CU_add_test(s, "rack_timer_resends_lost_retransmission",
		    test_rack_timer_resends_lost_retransmission);
	CU_add_test(s, "rack_marks_originals_lost", test_rack_marks_originals_lost);
	CU_add_test(s, "rack_reordering_not_loss", test_rack_reordering_not_loss);
	CU_add_test(s, "one_probe_per_episode", test_one_probe_per_episode);
	CU_add_test(s, "one_segment_probe_waits_delayed_ack",
		    test_one_segment_probe_waits_delayed_ack);
	CU_add_test(s, "silent_peer_rto_only", test_silent_peer_rto_only);
	CU_add_test(s, "lost_ack_train_probes_new_data", test_lost_ack_train_probes_new_data);
	CU_add_test(s, "lost_ack_train_first_probe_answered",
		    test_lost_ack_train_first_probe_answered);
	CU_add_test(s, "tail_loss_single_probe", test_tail_loss_single_probe);
	CU_add_test(s, "retransmission_lost_twice_no_rto", test_retransmission_lost_twice_no_rto);
	CU_add_test(s, "silent_peer_with_data_bounded_probes",
		    test_silent_peer_with_data_bounded_probes);
}

TIDE_UT_MAIN(register_tests)
