/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

#define IN(e, ...) ut_tcp_in((e), &(struct ut_seg){__VA_ARGS__})
#define P          1000u

static uint8_t big[64 * 1460];

static void
test_slow_start_growth(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;

	ut_env_init(&e, NULL);
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	CU_ASSERT_EQUAL(c->cwnd, 10u * 1460); /* RFC 6928 */
	CU_ASSERT_EQUAL(tide_net_send(c, big, sizeof(big), e.now), (ssize_t)sizeof(big));
	unsigned n = 0;
	while (ut_pop_tcp(&e, &o) == 0) {
		n++;
	}
	CU_ASSERT_EQUAL(n, 10); /* initial window */
	/* ACK two segments: cwnd grows by 2 MSS (ABC, L = 2), four more go out. */
	IN(&e, .seq = P + 1, .ack = I + 1 + 2 * 1460, .flags = TCPHDR_ACK);
	CU_ASSERT_EQUAL(c->cwnd, 12u * 1460);
	n = 0;
	while (ut_pop_tcp(&e, &o) == 0) {
		n++;
	}
	CU_ASSERT_EQUAL(n, 4);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
run_fast_retransmit(enum tide_net_cc cc)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t I;

	ut_env_init(&e, NULL);
	e.s->o.tcp_cc = cc;
	ut_app_init(&a);
	struct tide_net_conn *c = ut_passive_open(&e, &a, P, &I, &l);
	CU_ASSERT_STRING_EQUAL(c->cc->name, tcp_cc_get(cc)->name);
	tide_net_send(c, big, 10 * 1460, e.now);
	ut_dev_drain(&e.dev);
	/* Segment 1 lost; segments 2..10 arrive: duplicate ACKs for I+1. */
	for (int i = 0; i < 2; i++) {
		IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK);
	}
	CU_ASSERT_EQUAL(ut_dev_pending(&e.dev), 0);
	CU_ASSERT_FALSE(c->in_recovery);
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK);
	CU_ASSERT(c->in_recovery);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_fast_retrans, 1);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, I + 1);
	CU_ASSERT_EQUAL(o.len, 1460);
	uint32_t ss = c->ssthresh;
	CU_ASSERT(ss < 10u * 1460);
	CU_ASSERT_EQUAL(c->cwnd, ss + 3u * 1460);
	CU_ASSERT_EQUAL(c->recover, I + 1 + 10 * 1460);
	/* More duplicates inflate cwnd. */
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK);
	CU_ASSERT_EQUAL(c->cwnd, ss + 4u * 1460);
	ut_dev_drain(&e.dev);
	/* Partial ACK (segment 5 also lost): retransmit it, stay in recovery. */
	IN(&e, .seq = P + 1, .ack = I + 1 + 4 * 1460, .flags = TCPHDR_ACK);
	CU_ASSERT(c->in_recovery);
	CU_ASSERT_EQUAL_FATAL(ut_pop_tcp(&e, &o), 0);
	CU_ASSERT_EQUAL(o.seq, I + 1 + 4 * 1460);
	ut_dev_drain(&e.dev);
	/* Full ACK: leave recovery with cwnd <= ssthresh. */
	IN(&e, .seq = P + 1, .ack = I + 1 + 10 * 1460, .flags = TCPHDR_ACK);
	CU_ASSERT_FALSE(c->in_recovery);
	CU_ASSERT(c->cwnd <= ss);
	CU_ASSERT_EQUAL(c->sbuf.len, 0);
	CU_ASSERT_EQUAL(tide_net_stats(e.s)->tcp_retrans_segs, 2);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_fast_retransmit_newreno(void)
{
	run_fast_retransmit(TIDE_NET_CC_NEWRENO);
}

static void
test_fast_retransmit_cubic(void)
{
	run_fast_retransmit(TIDE_NET_CC_CUBIC);
}

static void
test_fast_retransmit_westwood(void)
{
	/* No rate measured yet (the first interval has not closed): NewReno's half. */
	run_fast_retransmit(TIDE_NET_CC_WESTWOOD);
}

/* Westwood+'s estimate, step by step: acknowledged bytes over intervals of at least
 * max(srtt, 2 ms); then what a loss does to the window with and without a queue. */
static void
test_westwood_estimate(void)
{
	const struct tcp_westwood *w;
	struct tide_net_conn c;
	struct ut_env e;
	uint64_t t = 1000000000ull; /* 1 s */

	ut_env_init(&e, NULL);
	memset(&c, 0, sizeof(c));
	c.stack = e.s;
	c.mss = 1000;
	c.cc = tcp_cc_get(TIDE_NET_CC_WESTWOOD);
	CU_ASSERT_STRING_EQUAL(c.cc->name, "westwood");
	c.cc->init(&c);
	w = &c.cc_priv.westwood;
	CU_ASSERT_EQUAL(c.cwnd, 10000u);
	c.srtt = 1000000; /* 1 ms: the 2 ms floor sets the interval */
	c.rtt_min = 1000000;
	/* The first ACK only starts the interval: its bytes are not timed. */
	c.cc->on_ack(&c, 50000, t);
	CU_ASSERT_EQUAL(w->bk, 0);
	CU_ASSERT_EQUAL(w->bw, 0);
	/* 10,000 bytes every 100 us (100 MB/s): no sample before 2 ms have passed. */
	for (int i = 1; i < 20; i++)
		c.cc->on_ack(&c, 10000, t + (uint64_t)i * 100000);
	CU_ASSERT_EQUAL(w->bw, 0);
	CU_ASSERT_EQUAL(w->bk, 190000u);
	c.cc->on_ack(&c, 10000, t + 2000000);
	CU_ASSERT_EQUAL(w->bw, 100000000u); /* the first sample seeds both stages */
	CU_ASSERT_EQUAL(w->bw_ns, 100000000u);
	CU_ASSERT_EQUAL(w->bk, 0);
	/* Half the rate for one interval: the first stage moves 1/8 of the way, the
	 * second 1/8 of that. */
	for (int i = 1; i <= 20; i++)
		c.cc->on_ack(&c, 5000, t + 2000000 + (uint64_t)i * 100000);
	CU_ASSERT_EQUAL(w->bw_ns, (7 * 100000000ull + 50000000) / 8);
	CU_ASSERT_EQUAL(w->bw, (7 * 100000000ull + w->bw_ns) / 8);

	/* The loss that ends slow start: NewReno's half, whatever the estimate. */
	c.cwnd = 100000;
	c.snd_una = 0;
	c.snd_max = 100000;
	c.ssthresh = UINT32_MAX;
	CU_ASSERT_EQUAL(c.cc->ssthresh(&c, t), 50000u);
	/* A random loss on a path without a queue: rate x least RTT (about 99 KB here)
	 * is what is in flight, so the window stays, where NewReno would halve it. */
	c.ssthresh = 50000;
	uint64_t bdp = w->bw * 1000 / 1000000;
	CU_ASSERT_EQUAL(c.cc->ssthresh(&c, t), (uint32_t)bdp);
	CU_ASSERT(bdp > 95000 && bdp < 100000);
	/* A loss at a standing queue (cwnd three times the path's product): never below
	 * NewReno's half. */
	c.cwnd = 300000;
	c.snd_max = 300000;
	CU_ASSERT_EQUAL(c.cc->ssthresh(&c, t), 150000u);
	/* Never above cwnd, whatever the estimate (the flight may exceed cwnd after an
	 * earlier reduction). */
	c.cwnd = 60000;
	c.snd_max = 100000;
	CU_ASSERT_EQUAL(c.cc->ssthresh(&c, t), 60000u);
	/* Floor: two segments. */
	c.rtt_min = 0;
	c.cwnd = 2000;
	c.snd_max = 1000;
	CU_ASSERT_EQUAL(c.cc->ssthresh(&c, t), 2000u);
	/* Avoidance grows as NewReno's: one MSS per window of acknowledged bytes. */
	c.ssthresh = 20000;
	c.cwnd = 20000;
	for (int i = 0; i < 20; i++)
		c.cc->cong_avoid(&c, 1000, t);
	CU_ASSERT_EQUAL(c.cwnd, 21000u);
	ut_env_fini(&e);
}

static void
test_congestion_avoidance(void)
{
	struct tide_net_conn c;
	struct ut_env e;

	ut_env_init(&e, NULL);
	memset(&c, 0, sizeof(c));
	c.stack = e.s;
	c.mss = 1000;
	/* NewReno: one MSS per window of acknowledged bytes. */
	c.cc = &tcp_newreno_ops;
	c.cc->init(&c);
	c.ssthresh = 20000;
	c.cwnd = 20000;
	for (int i = 0; i < 20; i++) {
		c.cc->cong_avoid(&c, 1000, e.now);
	}
	CU_ASSERT_EQUAL(c.cwnd, 21000);
	c.snd_una = 0;
	c.snd_max = 30000;
	CU_ASSERT_EQUAL(c.cc->ssthresh(&c, e.now), 15000);
	c.snd_max = 1000;
	CU_ASSERT_EQUAL(c.cc->ssthresh(&c, e.now), 2000); /* floor 2 MSS */

	/* CUBIC: beta 0.7 on loss, then concave regrowth toward w_max. */
	c.cc = &tcp_cubic_ops;
	c.cc->init(&c);
	c.cwnd = 100000;
	c.srtt = 100 * NS_PER_US;
	uint32_t ss = c.cc->ssthresh(&c, e.now);
	CU_ASSERT_EQUAL(ss, 70000);
	CU_ASSERT_EQUAL(c.cc_priv.cubic.w_max, 100000);
	c.ssthresh = ss;
	c.cwnd = ss;
	uint64_t t = e.now;
	uint32_t prev = c.cwnd, shrank = 0, at_k = 0;
	/*
	 * A slow ACK clock (1000 bytes per 10 ms: a 0.7 s RTT) keeps the Reno-friendly
	 * estimate small, so the cubic curve drives: K = cbrt((100000 - 70000) / 1000 / 0.4)
	 * = 4.2 s to climb back to w_max (concave), then probing beyond it (convex).
	 */
	for (int i = 0; i < 800; i++) {
		t += 10 * NS_PER_MS;
		c.cc->cong_avoid(&c, 1000, t);
		shrank += c.cwnd < prev;
		prev = c.cwnd;
		if (i == 420) {
			at_k = c.cwnd;
		}
	}
	CU_ASSERT_EQUAL(shrank, 0);
	CU_ASSERT(at_k > 92000 && at_k < 106000);
	CU_ASSERT(c.cwnd > 110000);
	ut_env_fini(&e);
}

/* ---- cwnd validation (RFC 7661, tcp_cwnd_validated): grow only while cwnd limits ---- */

static struct tide_net_conn *
open_at_isn(struct ut_env *e, struct ut_app *a, struct tide_net_listener **l, uint32_t isn)
{
	uint32_t I;

	ut_env_init(e, NULL);
	e->s->isn_fixed_on = true;
	e->s->isn_fixed = isn;
	ut_app_init(a);
	struct tide_net_conn *c = ut_passive_open(e, a, P, &I, l);
	CU_ASSERT_EQUAL(I, isn);
	CU_ASSERT_EQUAL(c->mss, 1460);
	ut_dev_drain(&e->dev);
	return c;
}

/* The peer acknowledges everything sent; returns how many data segments that let out. */
static unsigned
ack_all(struct ut_env *e, struct tide_net_conn *c)
{
	struct ut_tcp_out o;
	unsigned n = 0;

	IN(e, .seq = P + 1, .ack = c->snd_nxt, .flags = TCPHDR_ACK);
	while (ut_pop_tcp(e, &o) == 0) {
		n += o.len > 0;
	}
	return n;
}

/* The application writes two segments per round trip, far less than cwnd allows. */
static void
app_limited_rounds(struct ut_env *e, struct tide_net_conn *c, unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++) {
		CU_ASSERT_EQUAL(tide_net_send(c, big, 2 * 1460, e->now), 2 * 1460);
		CU_ASSERT_EQUAL(ut_dev_pending(&e->dev), 2);
		ut_dev_drain(&e->dev);
		CU_ASSERT_EQUAL(ack_all(e, c), 0);
	}
}

static void
run_cwnd_validation_app_limited(uint32_t isn)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct tide_net_conn *c = open_at_isn(&e, &a, &l, isn);

	/* Slow start: 2 segments in flight never need 10 (cwnd < 2 x max_flight fails). */
	app_limited_rounds(&e, c, 5);
	CU_ASSERT_EQUAL(c->cwnd, 10u * 1460);
	CU_ASSERT_EQUAL(c->ssthresh, UINT32_MAX);
	/* Congestion avoidance, as after a loss: 20 segments acknowledged, twice
	 * the window, would add 2 MSS if the window were in use. */
	c->ssthresh = c->cwnd;
	app_limited_rounds(&e, c, 10);
	CU_ASSERT_EQUAL(c->cwnd, 10u * 1460);
	CU_ASSERT_EQUAL(c->sbuf.len, 0);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_cwnd_validation_app_limited(void)
{
	run_cwnd_validation_app_limited(1000);
	run_cwnd_validation_app_limited(0x90000000u); /* marks start at the ISS, not 0 */
}

static void
run_cwnd_validation_cwnd_limited(uint32_t isn)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	struct tide_net_conn *c = open_at_isn(&e, &a, &l, isn);
	uint32_t start = c->snd_nxt;
	unsigned n = 0;

	/* Congestion avoidance at 10 MSS with 20 segments to send: the window limits. */
	c->ssthresh = c->cwnd;
	CU_ASSERT_EQUAL(tide_net_send(c, big, 20 * 1460, e.now), 20 * 1460);
	while (ut_pop_tcp(&e, &o) == 0) {
		n++;
	}
	CU_ASSERT_EQUAL(n, 10);
	/* ACKs of two segments each: one window acknowledged adds one MSS (RFC 5681). */
	for (unsigned i = 1; i <= 10; i++) {
		IN(&e, .seq = P + 1, .ack = start + 2 * i * 1460, .flags = TCPHDR_ACK);
		ut_dev_drain(&e.dev);
		if (i == 4) {
			CU_ASSERT_EQUAL(c->cwnd, 10u * 1460);
		} else if (i == 5) {
			CU_ASSERT_EQUAL(c->cwnd, 11u * 1460);
		}
	}
	/* The last data left at the fifth ACK: the window has not limited since. */
	CU_ASSERT_EQUAL(c->snd_una, start + 20 * 1460);
	CU_ASSERT_EQUAL(c->cwnd, 11u * 1460);
	/* Then application-limited: 20 more segments acknowledged, no growth. */
	app_limited_rounds(&e, c, 10);
	CU_ASSERT_EQUAL(c->cwnd, 11u * 1460);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
test_cwnd_validation_cwnd_limited(void)
{
	run_cwnd_validation_cwnd_limited(1000);
	run_cwnd_validation_cwnd_limited(0x90000000u);
}

/* ---- HyStart++ ----
 *
 * A scripted path: every segment is acknowledged alone, delay(k) after it went
 * out (k: its index from the first data byte), in order. The sender's buffer
 * is kept full and the peer's window is 8 MiB, so only cwnd limits it; each
 * ACK adds a segment to the window, so 10 + 2(n - 1) segments are out when the
 * n-th ACK arrives. A round begins when the ACK of the data sent before the
 * previous one began arrives: at ACKs 1, 10, 28, 64, 136, ... (rounds 1-5),
 * whose timed segments are the first 8 sent after: 10-17, 28-35, 64-71,
 * 136-143, 280-287. Each round's samples arrive in the next one.
 */
#define HS_SEG   1460u
#define HS_ACKS  3000u
#define HS_BASE  (100 * NS_PER_US)
#define HS_QUEUE (900 * NS_PER_US)

typedef uint64_t (*hs_delay_fn)(uint32_t k);

struct hs_run {
	uint32_t css_at; /* segments acknowledged when CSS began; 0 = never */
	uint32_t css_cwnd;
	uint32_t exit_at; /* when congestion avoidance began; 0 = never */
	uint32_t cwnd_end, ssthresh_end;
	uint64_t css, exits; /* the stack's counters */
};

static struct hs_run
hs_script(bool hystart, hs_delay_fn delay)
{
	static const uint8_t syn_opts[8] = {TCPOPT_MSS, 4, 0x05, 0xb4, 1, 3, 3, 7}; /* WS 7 */
	static struct {
		uint64_t at;
		uint32_t ack;
	} q[4096];
	struct hs_run r = {0};
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	uint32_t qh = 0, qn = 0, I;
	uint64_t last = 0;

	ut_env_init(&e, NULL);
	e.s->o.tcp_hystart = hystart;
	e.s->o.tcp_sndbuf = 4u << 20; /* never what limits the flight */
	ut_app_init(&a);
	CU_ASSERT_FATAL(tide_net_listen(e.s, 80, 8, ut_app_accept, &a, &l) == 0);
	IN(&e, .seq = P, .flags = TCPHDR_SYN, .opts = syn_opts, .optlen = 8);
	CU_ASSERT_FATAL(ut_pop_tcp(&e, &o) == 0);
	I = o.seq;
	IN(&e, .seq = P + 1, .ack = I + 1, .flags = TCPHDR_ACK, .wnd = 65535);
	struct tide_net_conn *c = a.accepted;
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(c->hs.css, false);
	for (uint32_t acks = 0; acks < HS_ACKS; acks++) {
		(void)tide_net_send(c, big, sizeof(big), e.now);
		while (ut_pop_tcp(&e, &o) == 0) {
			if (o.len == 0) {
				continue;
			}
			uint32_t k = (o.seq - I - 1) / HS_SEG;
			uint64_t at = e.now + delay(k);

			at = at > last ? at : last; /* the path keeps order */
			last = at;
			CU_ASSERT_FATAL(qn < 4096);
			q[(qh + qn++) % 4096].at = at;
			q[(qh + qn - 1) % 4096].ack = o.seq + o.len;
		}
		CU_ASSERT_FATAL(qn > 0);
		e.now = q[qh].at;
		IN(&e, .seq = P + 1, .ack = q[qh].ack, .flags = TCPHDR_ACK, .wnd = 65535);
		qh = (qh + 1) % 4096;
		qn--;
		uint32_t done = (c->snd_una - I - 1) / HS_SEG;

		if (c->hs.css && r.css_at == 0) {
			r.css_at = done;
			r.css_cwnd = c->cwnd / HS_SEG;
		}
		if (c->ssthresh != UINT32_MAX && r.exit_at == 0) {
			r.exit_at = done;
		}
	}
	r.cwnd_end = c->cwnd / HS_SEG;
	r.ssthresh_end = c->ssthresh;
	r.css = e.s->st.tcp_hystart_css;
	r.exits = e.s->st.tcp_hystart_exits;
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
	return r;
}

/* From segment 136 on (round 4's timed ones, the first sent in it) a queue
 * adds 900 us for good. */
static uint64_t
hs_queue_builds(uint32_t k)
{
	return k < 136 ? HS_BASE : HS_BASE + HS_QUEUE;
}

/* Only round 4's timed segments, 136-143, are late: noise. */
static uint64_t
hs_one_late_round(uint32_t k)
{
	return k >= 136 && k < 144 ? HS_BASE + HS_QUEUE : HS_BASE;
}

static void
test_hystart_rise_ends_slow_start(void)
{
	struct hs_run r = hs_script(true, hs_queue_builds);

	/* Round 4's timed segments are acknowledged in round 5; the eighth of
	 * them (segment 143) brings that round's least RTT to 1 ms against round
	 * 3's 100 us (threshold: 250 us): CSS begins with 144 segments
	 * acknowledged, the window 10 + 143 segments, and a quarter of one for
	 * that ACK. */
	CU_ASSERT_EQUAL(r.css_at, 144);
	CU_ASSERT_EQUAL(r.css_cwnd, 153);
	CU_ASSERT_EQUAL(r.css, 1);
	/* Five rounds of CSS, then avoidance at the window CSS reached. In CSS an
	 * ACK adds a quarter segment, so 1.25 go out per ACK: rounds 6-10 begin at
	 * about ACKs 280, 466, 698, 988 and 1,350 (each a round's sends later), and
	 * the fifth ends CSS with 153 + (1,355 - 144) / 4 segments. */
	CU_ASSERT_EQUAL(r.exits, 1);
	CU_ASSERT_EQUAL(r.exit_at, 1355);
	CU_ASSERT_EQUAL(r.ssthresh_end / HS_SEG, 455);
	/* Without HyStart++ the same path never leaves slow start (no loss). */
	struct hs_run off = hs_script(false, hs_queue_builds);

	CU_ASSERT_EQUAL(off.css, 0);
	CU_ASSERT_EQUAL(off.ssthresh_end, UINT32_MAX);
	CU_ASSERT(off.cwnd_end > r.cwnd_end);
}

static void
test_hystart_noise_resumes(void)
{
	struct hs_run r = hs_script(true, hs_one_late_round);

	/* CSS begins as above; round 5's timed segments are on time again, so
	 * round 6's least RTT falls below the one that began CSS: slow start goes
	 * on, and the window keeps doubling. */
	CU_ASSERT_EQUAL(r.css_at, 144);
	CU_ASSERT_EQUAL(r.css, 1);
	CU_ASSERT_EQUAL(r.exits, 0);
	CU_ASSERT_EQUAL(r.ssthresh_end, UINT32_MAX);
	CU_ASSERT(r.cwnd_end > 1000);
}

/* ---- Pacing: a window spread over the RTT (tcp_pace_ok / tcp_pace_sent) ---- */

#define PACE_SRTT (1000 * NS_PER_US)
#define PACE_WND  20u /* segments */

/*
 * Opens a connection whose smoothed RTT is 1 ms and window 20 segments,
 * writes more than the window and lets the pacer's timer run; returns in
 * at[k] when the k-th data segment left, relative to the write.
 */
static unsigned
pace_script(bool pacing, uint32_t ssthresh, uint64_t rtt_last, uint64_t at[PACE_WND + 1])
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	struct tide_net_conn *c = open_at_isn(&e, &a, &l, 1000);
	uint64_t t0 = e.now;
	unsigned n = 0;

	e.s->o.tcp_pacing = pacing;
	c->srtt = PACE_SRTT;
	c->rtt_last = rtt_last;
	c->cwnd = PACE_WND * 1460;
	c->ssthresh = ssthresh;
	CU_ASSERT_EQUAL(tide_net_send(c, big, (PACE_WND + 10) * 1460, e.now),
			(PACE_WND + 10) * 1460);
	for (unsigned i = 0; i < 4 * PACE_WND; i++) {
		while (ut_pop_tcp(&e, &o) == 0) {
			if (o.len > 0 && n <= PACE_WND) {
				at[n++] = e.now - t0;
			}
		}
		if (c->t_pace == 0) {
			break;
		}
		CU_ASSERT_FATAL(c->t_pace > e.now);
		e.now = c->t_pace;
		tide_net_timers_run(e.s, e.now);
	}
	CU_ASSERT_EQUAL(c->t_pace, 0); /* the window, not the pacer, stops it now */
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
	return n;
}

static void
test_pacing_spreads_window(void)
{
	uint64_t at[PACE_WND + 1];
	/* Congestion avoidance: 1.2 windows per RTT, a segment every
	 * 1 ms / 24 = 41,666 ns. The schedule may run an eighth of the RTT
	 * (125 us) ahead, and an idle sender starts with that much credit, so
	 * segments 0-6 leave at once (6 x 41,666 <= 250,000) and segment k at
	 * k x 41,666 - 250,000. */
	unsigned n = pace_script(true, 10 * 1460, PACE_SRTT, at);

	CU_ASSERT_EQUAL(n, PACE_WND);
	for (unsigned k = 0; k < n; k++) {
		CU_ASSERT_EQUAL(at[k], k < 7 ? 0 : k * 41666ull - 250000);
	}
	/* The window's last segment leaves 542 us after its first, not at once. */
	CU_ASSERT_EQUAL(at[PACE_WND - 1], 541654);
	/* Slow start paces at twice the window's rate: one every 25 us, 11 at once. */
	n = pace_script(true, UINT32_MAX, PACE_SRTT, at);
	CU_ASSERT_EQUAL(n, PACE_WND);
	for (unsigned k = 0; k < n; k++) {
		CU_ASSERT_EQUAL(at[k], k < 11 ? 0 : k * 25000ull - 250000);
	}
	/* The latest sample below the smoothed RTT (a queue drained) sets the
	 * pace: half the RTT, twice the rate, bursts of 62.5 us. */
	n = pace_script(true, 10 * 1460, PACE_SRTT / 2, at);
	CU_ASSERT_EQUAL(n, PACE_WND);
	for (unsigned k = 0; k < n; k++) {
		CU_ASSERT_EQUAL(at[k], k < 7 ? 0 : k * 20833ull - 125000);
	}
	/* Off: the window leaves at once. */
	n = pace_script(false, 10 * 1460, PACE_SRTT, at);
	CU_ASSERT_EQUAL(n, PACE_WND);
	CU_ASSERT_EQUAL(at[PACE_WND - 1], 0);
}

/* A timeout's resend does not wait behind the schedule of the flight it replaces. */
static void
test_pacing_rto_not_held(void)
{
	struct ut_env e;
	struct ut_app a;
	struct tide_net_listener *l;
	struct ut_tcp_out o;
	struct tide_net_conn *c = open_at_isn(&e, &a, &l, 1000);
	unsigned n = 0;

	e.s->o.tcp_pacing = true;
	c->srtt = c->rtt_last = PACE_SRTT;
	c->cwnd = PACE_WND * 1460;
	c->ssthresh = 10 * 1460;
	tide_net_send(c, big, PACE_WND * 1460, e.now);
	ut_dev_drain(&e.dev);
	/* Far ahead: 4 segments left, the schedule reaches 167 us out. */
	CU_ASSERT(c->pace_next > e.now);
	CU_ASSERT(c->t_pace != 0);
	CU_ASSERT_FATAL(c->t_rto != 0);
	c->t_pace = 0; /* lost in a stall: only the RTO fires */
	e.now = c->t_rto;
	c->pace_next = e.now + PACE_SRTT; /* a schedule far past the timeout */
	tide_net_timers_run(e.s, e.now);
	while (ut_pop_tcp(&e, &o) == 0) {
		n += o.len > 0 && o.seq == c->snd_una;
	}
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(e.s->st.tcp_rto_fired, 1);
	tide_net_abort(c, e.now);
	tide_net_listener_close(l, e.now);
	ut_app_fini(&a);
	ut_env_fini(&e);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_cc", NULL, NULL);
	CU_add_test(s, "slow_start_growth", test_slow_start_growth);
	CU_add_test(s, "fast_retransmit_newreno", test_fast_retransmit_newreno);
	CU_add_test(s, "fast_retransmit_cubic", test_fast_retransmit_cubic);
	CU_add_test(s, "fast_retransmit_westwood", test_fast_retransmit_westwood);
	CU_add_test(s, "westwood_estimate", test_westwood_estimate);
	CU_add_test(s, "congestion_avoidance", test_congestion_avoidance);
	CU_add_test(s, "cwnd_validation_app_limited", test_cwnd_validation_app_limited);
	CU_add_test(s, "cwnd_validation_cwnd_limited", test_cwnd_validation_cwnd_limited);
	CU_add_test(s, "hystart_rise_ends_slow_start", test_hystart_rise_ends_slow_start);
	CU_add_test(s, "hystart_noise_resumes", test_hystart_noise_resumes);
	CU_add_test(s, "pacing_spreads_window", test_pacing_spreads_window);
	CU_add_test(s, "pacing_rto_not_held", test_pacing_rto_not_held);
}

TIDE_UT_MAIN(register_tests)
