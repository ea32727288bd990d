/* SPDX-License-Identifier: Apache-2.0 */
#include "net_ut_common.h"

#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

const uint8_t ut_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
const uint8_t ut_peer_mac[6] = {0x02, 0, 0, 0, 0, 0x02};

struct ut_buf *
ut_buf_new(void)
{
	struct ut_buf *b = calloc(1, sizeof(*b));

	CU_ASSERT_FATAL(b != NULL);
	return b;
}

void
ut_buf_free(struct ut_dev *d, struct ut_buf *b)
{
	if (b != NULL) {
		d->live--;
		free(b);
	}
}

static uint16_t
ut_tx_alloc(void *dev, struct tide_net_buf *bufs, uint16_t n, uint16_t size)
{
	struct ut_dev *d = dev;

	d->alloc_calls++;
	CU_ASSERT(size <= UT_FRAME_MAX);
	if (d->alloc_fail > 0) {
		d->alloc_fail--;
		return 0;
	}
	for (uint16_t i = 0; i < n; i++) {
		struct ut_buf *b = ut_buf_new();

		d->live++;
		bufs[i].handle = b;
		bufs[i].data = b->data;
		bufs[i].cap = UT_FRAME_MAX;
		bufs[i].len = 0;
	}
	return n;
}

static uint16_t
ut_tx_burst(void *dev, struct tide_net_buf *bufs, uint16_t n)
{
	struct ut_dev *d = dev;
	uint16_t i;

	d->tx_bursts++;
	for (i = 0; i < n; i++) {
		struct ut_buf *b = bufs[i].handle;

		if (d->tx_refuse > 0) {
			d->tx_refuse--;
			break;
		}
		CU_ASSERT(bufs[i].len >= 60 && bufs[i].len <= UT_FRAME_MAX);
		b->len = bufs[i].len;
		if (d->qn == d->qcap) {
			d->qcap = d->qcap ? d->qcap * 2 : 64;
			d->q = realloc(d->q, d->qcap * sizeof(*d->q));
			CU_ASSERT_FATAL(d->q != NULL);
		}
		d->q[d->qn++] = b;
	}
	return i;
}

static void
ut_free_bufs(void *dev, void *const *handles, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		ut_buf_free(dev, handles[i]);
	}
}

const struct tide_net_dev_ops ut_dev_ops = {
	.tx_alloc = ut_tx_alloc,
	.tx_burst = ut_tx_burst,
	.free_bufs = ut_free_bufs,
};

struct ut_buf *
ut_dev_pop(struct ut_dev *d)
{
	if (d->qhead == d->qn) {
		return NULL;
	}
	struct ut_buf *b = d->q[d->qhead++];
	if (d->qhead == d->qn) {
		d->qhead = d->qn = 0;
	}
	return b;
}

size_t
ut_dev_pending(const struct ut_dev *d)
{
	return d->qn - d->qhead;
}

void
ut_dev_drain(struct ut_dev *d)
{
	struct ut_buf *b;

	while ((b = ut_dev_pop(d)) != NULL) {
		ut_buf_free(d, b);
	}
}

void
ut_env_init(struct ut_env *e, ut_tweak_fn tweak)
{
	struct tide_net_opts o;
	uint8_t f[128];
	uint16_t n;

	memset(e, 0, sizeof(*e));
	e->now = 1000 * NS_PER_MS;
	tide_net_opts_init(&o, sizeof(o));
	o.dev_ops = &ut_dev_ops;
	o.dev = &e->dev;
	memcpy(o.mac, ut_mac, 6);
	o.ip = UT_IP;
	o.isn_secret = 42;
	if (tweak != NULL) {
		tweak(&o);
	}
	CU_ASSERT_FATAL(tide_net_stack_create(&o, e->now, &e->s) == 0);
	ut_dev_drain(&e->dev); /* gratuitous ARP */
	/* The peer asks for us: the stack learns the peer and replies. */
	n = ut_build_arp(f, 1, ut_peer_mac, UT_PEER_IP, (const uint8_t[6]){0}, UT_IP,
			 (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
	ut_rx(e, f, n);
	ut_dev_drain(&e->dev);
}

void
ut_env_fini(struct ut_env *e)
{
	tide_net_stack_destroy(e->s);
	ut_dev_drain(&e->dev);
	CU_ASSERT_EQUAL(e->dev.live, 0);
	free(e->dev.q);
	e->dev.q = NULL;
}

void
ut_rx(struct ut_env *e, const uint8_t *frame, uint16_t len)
{
	struct ut_buf *b = ut_buf_new();
	struct tide_net_rx_pkt p;

	e->dev.live++;
	memcpy(b->data, frame, len);
	b->len = len;
	p.data = b->data;
	p.len = len;
	p.flags = 0;
	p.handle = b;
	CU_ASSERT_EQUAL(tide_net_rx_burst(e->s, &p, 1, e->now), 1);
}

int
ut_advance(struct ut_env *e, uint64_t ns)
{
	e->now += ns;
	return tide_net_timers_run(e->s, e->now);
}

uint16_t
ut_build_eth(uint8_t *f, const uint8_t *dst, const uint8_t *src, uint16_t type)
{
	struct net_eth_hdr *eh = (struct net_eth_hdr *)f;

	memcpy(eh->dst, dst, 6);
	memcpy(eh->src, src, 6);
	eh->type = htons(type);
	return ETH_HLEN;
}

uint16_t
ut_build_ipv4(uint8_t *f, uint32_t src, uint32_t dst, uint8_t proto, uint16_t l4len)
{
	struct net_ipv4_hdr *ip = (struct net_ipv4_hdr *)(f + ETH_HLEN);

	ut_build_eth(f, ut_mac, ut_peer_mac, ETH_P_IP);
	memset(ip, 0, sizeof(*ip));
	ip->ver_ihl = 0x45;
	ip->tot_len = htons((uint16_t)(IP_HLEN + l4len));
	ip->id = htons(7);
	ip->frag_off = htons(IP_DF);
	ip->ttl = 64;
	ip->proto = proto;
	ip->saddr = htonl(src);
	ip->daddr = htonl(dst);
	ip->csum = net_cksum(ip, IP_HLEN);
	return (uint16_t)(NET_HDRS_LEN + l4len);
}

uint16_t
ut_build_arp(uint8_t *f, uint16_t oper, const uint8_t *sha, uint32_t spa, const uint8_t *tha,
	     uint32_t tpa, const uint8_t *eth_dst)
{
	struct net_arp_hdr *ah = (struct net_arp_hdr *)(f + ETH_HLEN);

	ut_build_eth(f, eth_dst, sha, ETH_P_ARP);
	ah->htype = htons(1);
	ah->ptype = htons(ETH_P_IP);
	ah->hlen = 6;
	ah->plen = 4;
	ah->oper = htons(oper);
	memcpy(ah->sha, sha, 6);
	ah->spa = htonl(spa);
	memcpy(ah->tha, tha, 6);
	ah->tpa = htonl(tpa);
	return ETH_HLEN + sizeof(*ah);
}

uint16_t
ut_build_tcp(uint8_t *f, const struct ut_seg *sg)
{
	struct net_tcp_hdr *th = (struct net_tcp_hdr *)(f + NET_HDRS_LEN);
	uint16_t hl = (uint16_t)(TCP_HLEN + ((sg->optlen + 3) & ~3u));
	uint16_t tl = (uint16_t)(hl + sg->len);
	uint16_t n = ut_build_ipv4(f, UT_PEER_IP, UT_IP, IPPROTO_TCP_, tl);

	memset(th, 0, hl);
	th->sport = htons(sg->sport ? sg->sport : 5000);
	th->dport = htons(sg->dport ? sg->dport : 80);
	th->seq = htonl(sg->seq);
	th->ack = htonl(sg->ack);
	th->doff = (uint8_t)((hl / 4) << 4);
	th->flags = sg->flags;
	th->window = htons(sg->wnd_zero ? 0 : (sg->wnd ? sg->wnd : 65535));
	if (sg->optlen) {
		memcpy(th + 1, sg->opts, sg->optlen);
	}
	if (sg->len) {
		memcpy((uint8_t *)th + hl, sg->data, sg->len);
	}
	th->csum = net_cksum_fold(net_cksum_add(
		net_cksum_pseudo(htonl(UT_PEER_IP), htonl(UT_IP), IPPROTO_TCP_, tl), th, tl));
	return n;
}

void
ut_tcp_in_burst(struct ut_env *e, const struct ut_seg *sg, unsigned n)
{
	struct tide_net_rx_pkt p[32];

	CU_ASSERT_FATAL(n <= 32);
	for (unsigned i = 0; i < n; i++) {
		struct ut_buf *b = ut_buf_new();

		e->dev.live++;
		b->len = ut_build_tcp(b->data, &sg[i]);
		p[i] = (struct tide_net_rx_pkt){.data = b->data, .len = b->len, .handle = b};
	}
	CU_ASSERT_EQUAL(tide_net_rx_burst(e->s, p, n, e->now), n);
}

void
ut_tcp_in(struct ut_env *e, const struct ut_seg *sg)
{
	uint8_t f[UT_FRAME_MAX];
	uint16_t n = ut_build_tcp(f, sg);

	ut_rx(e, f, n);
}

int
ut_parse_tcp(const struct ut_buf *b, struct ut_tcp_out *o)
{
	const struct net_eth_hdr *eh = (const struct net_eth_hdr *)b->data;
	const struct net_ipv4_hdr *ip = (const struct net_ipv4_hdr *)(b->data + ETH_HLEN);
	const struct net_tcp_hdr *th = (const struct net_tcp_hdr *)(b->data + NET_HDRS_LEN);
	uint16_t tot, tl, doff;

	memset(o, 0, offsetof(struct ut_tcp_out, payload));
	if (ntohs(eh->type) != ETH_P_IP || ip->proto != IPPROTO_TCP_) {
		return -1;
	}
	CU_ASSERT_EQUAL(ip->ver_ihl, 0x45);
	CU_ASSERT_EQUAL(net_cksum(ip, IP_HLEN), 0);
	tot = ntohs(ip->tot_len);
	CU_ASSERT_FATAL(tot + ETH_HLEN <= b->len);
	tl = (uint16_t)(tot - IP_HLEN);
	CU_ASSERT_EQUAL(net_cksum_fold(net_cksum_add(
				net_cksum_pseudo(ip->saddr, ip->daddr, IPPROTO_TCP_, tl), th, tl)),
			0);
	doff = (uint16_t)((th->doff >> 4) * 4);
	CU_ASSERT_FATAL(doff >= TCP_HLEN && doff <= tl);
	o->seq = ntohl(th->seq);
	o->ack = ntohl(th->ack);
	o->flags = th->flags;
	o->wnd = ntohs(th->window);
	o->sport = ntohs(th->sport);
	o->dport = ntohs(th->dport);
	o->saddr = ntohl(ip->saddr);
	o->daddr = ntohl(ip->daddr);
	o->len = (uint16_t)(tl - doff);
	o->frame_len = b->len;
	o->df = (ntohs(ip->frag_off) & IP_DF) != 0;
	memcpy(o->payload, (const uint8_t *)th + doff, o->len);
	CU_ASSERT_EQUAL(tcp_parse_options((const uint8_t *)(th + 1), doff - TCP_HLEN,
					  th->flags & TCPHDR_SYN, &o->opts),
			0);
	return 0;
}

int
ut_pop_tcp(struct ut_env *e, struct ut_tcp_out *o)
{
	struct ut_buf *b = ut_dev_pop(&e->dev);
	int rc;

	if (b == NULL) {
		return -1;
	}
	rc = ut_parse_tcp(b, o);
	ut_buf_free(&e->dev, b);
	return rc;
}

static size_t
ut_app_recv(struct tide_net_conn *c, void *arg, const uint8_t *data, size_t len)
{
	struct ut_app *a = arg;

	(void)c;
	if (len > a->consume_max) {
		len = a->consume_max;
	}
	if (len == 0) {
		return 0;
	}
	if (a->rxn + len > a->rxcap) {
		a->rxcap = (a->rxn + len) * 2;
		a->rx = realloc(a->rx, a->rxcap);
		CU_ASSERT_FATAL(a->rx != NULL);
	}
	memcpy(a->rx + a->rxn, data, len);
	a->rxn += len;
	return len;
}

static void
ut_app_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct ut_app *a = arg;

	if (a->nev < 64) {
		a->events[a->nev] = ev;
		a->reasons[a->nev] = reason;
		a->nev++;
	}
	if (ev == TIDE_NET_EV_PEER_CLOSED && a->close_on_peer_fin) {
		tide_net_close(c, a->now ? *a->now : 0);
	}
}

const struct tide_net_conn_cbs ut_app_cbs = {
	.on_recv = ut_app_recv,
	.on_event = ut_app_event,
};

void
ut_app_init(struct ut_app *a)
{
	memset(a, 0, sizeof(*a));
	a->consume_max = SIZE_MAX;
}

void
ut_app_fini(struct ut_app *a)
{
	free(a->rx);
	a->rx = NULL;
}

int
ut_app_accept(void *arg, struct tide_net_conn *c)
{
	struct ut_app *a = arg;

	a->accepted = c;
	if (a->accept_rc == 0) {
		tide_net_conn_set_cbs(c, &ut_app_cbs, a);
	}
	return a->accept_rc;
}

bool
ut_app_has(const struct ut_app *a, int ev, int *reason)
{
	for (unsigned i = 0; i < a->nev; i++) {
		if (a->events[i] == ev) {
			if (reason != NULL) {
				*reason = a->reasons[i];
			}
			return true;
		}
	}
	return false;
}

static const uint8_t ut_syn_mss[4] = {TCPOPT_MSS, 4, 0x05, 0xb4}; /* 1460 */

struct tide_net_conn *
ut_passive_open(struct ut_env *e, struct ut_app *a, uint32_t peer_isn, uint32_t *our_iss,
		struct tide_net_listener **l)
{
	struct ut_tcp_out o;

	CU_ASSERT_FATAL(tide_net_listen(e->s, 80, 8, ut_app_accept, a, l) == 0);
	ut_tcp_in(e,
		  &(struct ut_seg){
			  .seq = peer_isn, .flags = TCPHDR_SYN, .opts = ut_syn_mss, .optlen = 4});
	CU_ASSERT_FATAL(ut_pop_tcp(e, &o) == 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_SYN | TCPHDR_ACK);
	CU_ASSERT_EQUAL(o.ack, peer_isn + 1);
	*our_iss = o.seq;
	ut_tcp_in(e, &(struct ut_seg){.seq = peer_isn + 1, .ack = o.seq + 1, .flags = TCPHDR_ACK});
	CU_ASSERT_FATAL(a->accepted != NULL);
	return a->accepted;
}

struct tide_net_conn *
ut_active_open(struct ut_env *e, struct ut_app *a, uint32_t peer_isn, uint32_t *our_iss)
{
	struct tide_net_conn *c = NULL;
	struct ut_tcp_out o;

	CU_ASSERT_FATAL(tide_net_connect(e->s, UT_PEER_IP, 5000, &ut_app_cbs, a, e->now, &c) == 0);
	CU_ASSERT_FATAL(ut_pop_tcp(e, &o) == 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_SYN);
	*our_iss = o.seq;
	/* Reply as port 5000 -> our ephemeral port. */
	ut_tcp_in(e, &(struct ut_seg){.seq = peer_isn,
				      .ack = o.seq + 1,
				      .flags = TCPHDR_SYN | TCPHDR_ACK,
				      .opts = ut_syn_mss,
				      .optlen = 4,
				      .sport = 5000,
				      .dport = o.sport});
	CU_ASSERT_FATAL(ut_pop_tcp(e, &o) == 0);
	CU_ASSERT_EQUAL(o.flags, TCPHDR_ACK);
	CU_ASSERT_EQUAL(o.ack, peer_isn + 1);
	CU_ASSERT(ut_app_has(a, TIDE_NET_EV_CONNECTED, NULL));
	return c;
}

void
ut_ts_opt(uint8_t out[12], uint32_t tsval, uint32_t tsecr)
{
	out[0] = TCPOPT_NOP;
	out[1] = TCPOPT_NOP;
	out[2] = TCPOPT_TIMESTAMP;
	out[3] = 10;
	tsval = htonl(tsval);
	tsecr = htonl(tsecr);
	memcpy(out + 4, &tsval, 4);
	memcpy(out + 8, &tsecr, 4);
}

int
ut_syn_ts(struct ut_env *e, uint32_t peer_isn, uint16_t sport, uint32_t tsval, struct ut_tcp_out *o)
{
	uint8_t syn[16] = {TCPOPT_MSS, 4, 0x05, 0xb4};

	ut_ts_opt(syn + 4, tsval, 0);
	ut_tcp_in(e, &(struct ut_seg){.seq = peer_isn,
				      .flags = TCPHDR_SYN,
				      .opts = syn,
				      .optlen = 16,
				      .sport = sport});
	return ut_pop_tcp(e, o);
}
