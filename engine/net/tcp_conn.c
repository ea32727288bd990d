/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP connection table, lifecycle and the application API (listen,
 * connect, send, receive, close, abort).
 *
 * Lifetime: a connection is freed only when it is CLOSE and the
 * application does not hold it (never accepted, or closed/aborted). Freeing
 * is deferred to the outermost public entry point (net_leave), so callbacks
 * may close or abort any connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"
#include "tide_log.h"

static unsigned
conn_hash(uint32_t rip, uint16_t lport, uint16_t rport)
{
	uint32_t h = rip ^ ((uint32_t)rport << 16 | lport);

	h *= 0x9e3779b1u;
	return (h >> 16) & (NET_CONN_BUCKETS - 1);
}

struct tide_net_conn *
tcp_lookup(struct tide_net_stack *s, uint32_t lip, uint16_t lport, uint32_t rip, uint16_t rport)
{
	struct tide_net_conn *c;

	LIST_FOREACH(c, &s->conn_hash[conn_hash(rip, lport, rport)], hash_link)
	{
		if (c->rip == rip && c->rport == rport && c->lport == lport && c->lip == lip) {
			return c;
		}
	}
	return NULL;
}

struct tide_net_listener *
tcp_lookup_listener(struct tide_net_stack *s, uint16_t port)
{
	struct tide_net_listener *l;

	LIST_FOREACH(l, &s->listeners, link)
	{
		if (l->port == port) {
			return l;
		}
	}
	return NULL;
}

#define ROTL64(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

/* One SipHash round (Aumasson, Bernstein 2012). */
static inline void
sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = ROTL64(v[1], 13);
	v[1] ^= v[0];
	v[0] = ROTL64(v[0], 32);
	v[2] += v[3];
	v[3] = ROTL64(v[3], 16);
	v[3] ^= v[2];
	v[0] += v[3];
	v[3] = ROTL64(v[3], 21);
	v[3] ^= v[0];
	v[2] += v[1];
	v[1] = ROTL64(v[1], 17);
	v[1] ^= v[2];
	v[2] = ROTL64(v[2], 32);
}

/*
 * SipHash-2-4 of two 64-bit words (16 bytes, little-endian order) under a
 * 128-bit key: RFC 6528's F(), a keyed pseudo-random function an observer of
 * ISNs cannot invert to the key (the splitmix finaliser used before could be).
 */
uint64_t
tcp_siphash_2u64(const uint64_t k[2], uint64_t m0, uint64_t m1)
{
	uint64_t v[4] = {k[0] ^ 0x736f6d6570736575ULL, k[1] ^ 0x646f72616e646f6dULL,
			 k[0] ^ 0x6c7967656e657261ULL, k[1] ^ 0x7465646279746573ULL};
	const uint64_t m[2] = {m0, m1};
	uint64_t b = (uint64_t)16 << 56;

	for (int i = 0; i < 2; i++) {
		v[3] ^= m[i];
		sip_round(v);
		sip_round(v);
		v[0] ^= m[i];
	}
	v[3] ^= b;
	sip_round(v);
	sip_round(v);
	v[0] ^= b;
	v[2] ^= 0xff;
	for (int i = 0; i < 4; i++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint32_t
tcp_new_isn(struct tide_net_stack *s, uint32_t lip, uint16_t lport, uint32_t rip, uint16_t rport,
	    uint64_t now)
{
	uint64_t f;

	if (s->isn_fixed_on) {
		return s->isn_fixed;
	}
	/* RFC 6528: ISN = M + F(localip, localport, remoteip, remoteport, secretkey),
	 * M a 4 us clock. */
	f = tcp_siphash_2u64(s->isn_key, (uint64_t)lip << 32 | rip, (uint64_t)lport << 16 | rport);
	return (uint32_t)(now / 4000) + (uint32_t)f;
}

uint32_t
tcp_ts_offset(const struct tide_net_stack *s, uint32_t lip, uint16_t lport, uint32_t rip,
	      uint16_t rport)
{
	/*
	 * RFC 7323 7.1: a TSval that is the bare clock tells every peer our
	 * uptime and lets it match connections to one host. The offset is the
	 * same F() as the ISN's with the top bit of the second word set, so the
	 * two are unrelated; it is constant per 4-tuple, so a SYN cookie's
	 * connection (tcp_syncookie.c) finds the offset its SYN-ACK used.
	 */
	return (uint32_t)(tcp_siphash_2u64(s->isn_key, (uint64_t)lip << 32 | rip,
					   1ull << 63 | (uint64_t)lport << 16 | rport) >>
			  32);
}

uint8_t
tcp_rcv_wscale_for(uint32_t rcvbuf)
{
	uint8_t ws = 0;

	while (ws < 14 && (rcvbuf >> ws) > 65535) {
		ws++;
	}
	return ws;
}

void
tcp_set_iss(struct tide_net_conn *c, uint32_t iss)
{
	c->iss = iss;
	c->snd_una = iss;
	c->snd_nxt = iss;
	c->snd_max = iss;
	c->sbuf_seq = iss + 1;
	c->recover = iss;
	c->high_rxt = iss;
	c->rtx_high = iss;
	/* Sequence marks start at the ISS like the others: 0 would be "after"
	 * snd_una for half of the ISS space (tcp_local_congestion, tcp_cwnd_validated). */
	c->cwr_mark = iss;
	c->cwnd_mark = iss;
	c->rack_lost = iss;
}

struct tide_net_conn *
tcp_conn_alloc(struct tide_net_stack *s, uint32_t rip, uint16_t lport, uint16_t rport, uint64_t now)
{
	struct tide_net_conn *c = calloc(1, sizeof(*c));

	if (c != NULL) {
		c->sbuf.buf = malloc(s->o.tcp_sndbuf);
		c->rbuf.buf = malloc(s->o.tcp_rcvbuf);
	}
	if (c == NULL || c->sbuf.buf == NULL || c->rbuf.buf == NULL) {
		if (c != NULL) {
			free(c->sbuf.buf);
			free(c->rbuf.buf);
		}
		free(c);
		s->st.tcp_conn_nomem++;
		return NULL;
	}
	c->stack = s;
	c->sbuf.cap = s->o.tcp_sndbuf;
	c->rbuf.cap = s->o.tcp_rcvbuf;
	c->lip = s->o.ip;
	c->rip = rip;
	c->lport = lport;
	c->rport = rport;
	c->state = TCP_CLOSE;
	c->rto = s->o.tcp_rto_init_us * NS_PER_US;
	c->peer_mss = 536;
	c->mss = 536;
	c->rcv_wscale = s->o.tcp_wscale ? tcp_rcv_wscale_for(s->o.tcp_rcvbuf) : 0;
	c->cc = tcp_cc_get(s->o.tcp_cc);
	c->id = ++s->next_conn_id;
	tcp_set_iss(c, tcp_new_isn(s, c->lip, lport, rip, rport, now));
	c->ts_off = tcp_ts_offset(s, c->lip, lport, rip, rport);
	LIST_INSERT_HEAD(&s->conn_hash[conn_hash(rip, lport, rport)], c, hash_link);
	c->hashed = true;
	TAILQ_INSERT_TAIL(&s->conns, c, link);
	s->st.tcp_conns++;
	return c;
}

static void
tcp_unlink_listener(struct tide_net_conn *c)
{
	if (c->listener != NULL) {
		c->listener->pending--;
		c->listener = NULL;
	}
}

void
tcp_set_state(struct tide_net_conn *c, int state)
{
	if (c->state == TCP_SYN_RECV && state != TCP_SYN_RECV) {
		tcp_unlink_listener(c);
	}
	c->state = (uint8_t)state;
}

void
tcp_ooo_free(struct tide_net_stack *s, struct tcp_ooo *o)
{
	if (o->handle != NULL) {
		s->ops->free_bufs(s->dev, &o->handle, 1);
		s->rx_kept_n--;
	}
	free(o);
}

static void
tcp_ooo_purge(struct tide_net_conn *c)
{
	while (c->ooo != NULL) {
		struct tcp_ooo *o = c->ooo;

		c->ooo = o->next;
		tcp_ooo_free(c->stack, o);
	}
	c->ooo_n = 0;
	c->ooo_tail = NULL;
	c->ooo_fin = false;
}

struct tcp_ooo *
tcp_ooo_tail(struct tide_net_conn *c)
{
	struct tcp_ooo *o;

	if (c->ooo_tail != NULL || c->ooo == NULL) {
		return c->ooo_tail;
	}
	/* One walk after the queue changed other than at its end. */
	c->ooo_tail_run = c->ooo->seq;
	for (o = c->ooo; o->next != NULL; o = o->next) {
		if (o->next->seq != o->seq + o->len) {
			c->ooo_tail_run = o->next->seq;
		}
	}
	c->ooo_tail = o;
	return o;
}

static void
tcp_kill(struct tide_net_conn *c)
{
	if (!c->dead) {
		c->dead = true;
		TAILQ_INSERT_TAIL(&c->stack->graveyard, c, grave_link);
	}
}

void
tcp_event(struct tide_net_conn *c, enum tide_net_event ev, int reason)
{
	if (c->app_owned && c->cbs.on_event != NULL) {
		c->cbs.on_event(c, c->arg, ev, reason);
	}
}

void
tcp_done(struct tide_net_conn *c, int reason)
{
	if (c->state == TCP_CLOSE && !c->hashed) {
		if (!c->app_owned) {
			tcp_kill(c);
		}
		return;
	}
	tcp_set_state(c, TCP_CLOSE);
	tcp_unlink_listener(c);
	tcp_tx_unblock(c);
	tcp_ack_unowe(c);
	tcp_clear_timers(c);
	tcp_ooo_purge(c);
	tcp_snd_purge(c, reason);
	if (c->hashed) {
		LIST_REMOVE(c, hash_link);
		c->hashed = false;
	}
	if (c->app_owned && !c->closed_notified) {
		c->closed_notified = true;
		tcp_event(c, TIDE_NET_EV_CLOSED, reason);
	}
	if (!c->app_owned) {
		tcp_kill(c);
	}
}

void
net_conns_reap(struct tide_net_stack *s)
{
	struct tide_net_conn *c;

	while ((c = TAILQ_FIRST(&s->graveyard)) != NULL) {
		TAILQ_REMOVE(&s->graveyard, c, grave_link);
		TAILQ_REMOVE(&s->conns, c, link);
		tcp_tx_unblock(c);
		tcp_ack_unowe(c);
		free(c->sbuf.buf);
		free(c->rbuf.buf);
		free(c->chunks);
		free(c);
		s->st.tcp_conns--;
	}
}

void
net_leave(struct tide_net_stack *s)
{
	assert(s->busy > 0);
	if (--s->busy == 0) {
		net_conns_reap(s);
		net_tx_flush(s);
		if (!TAILQ_EMPTY(&s->zc_wait)) {
			net_zc_reap(s);
		}
	}
}

/* ---- byte rings ---- */

uint32_t
tcp_ring_free(const struct tcp_ring *r)
{
	return r->cap - r->len;
}

void
tcp_ring_write(struct tcp_ring *r, const uint8_t *src, uint32_t n)
{
	uint32_t tail = (r->head + r->len) % r->cap;
	uint32_t first = r->cap - tail < n ? r->cap - tail : n;

	assert(n <= tcp_ring_free(r));
	memcpy(r->buf + tail, src, first);
	memcpy(r->buf, src + first, n - first);
	r->len += n;
}

void
tcp_ring_read(const struct tcp_ring *r, uint32_t off, uint8_t *dst, uint32_t n)
{
	uint32_t pos = (r->head + off) % r->cap;
	uint32_t first = r->cap - pos < n ? r->cap - pos : n;

	assert(off + n <= r->len);
	memcpy(dst, r->buf + pos, first);
	memcpy(dst + first, r->buf, n - first);
}

void
tcp_ring_drop(struct tcp_ring *r, uint32_t n)
{
	assert(n <= r->len);
	r->head = (r->head + n) % r->cap;
	r->len -= n;
	if (r->len == 0) {
		r->head = 0;
	}
}

void
tcp_rcv_deliver_buffered(struct tide_net_conn *c)
{
	while (c->rbuf.len > 0 && !c->rcv_held && c->app_owned && c->cbs.on_recv != NULL) {
		uint32_t chunk = c->rbuf.cap - c->rbuf.head;
		size_t took;

		if (chunk > c->rbuf.len) {
			chunk = c->rbuf.len;
		}
		took = c->cbs.on_recv(c, c->arg, c->rbuf.buf + c->rbuf.head, chunk);
		if (took > chunk) {
			took = chunk;
		}
		if (!c->app_owned) {
			/* Closed from the callback: what it left is discarded. */
			tcp_ring_drop(&c->rbuf, c->rbuf.len);
			return;
		}
		tcp_ring_drop(&c->rbuf, (uint32_t)took);
		if (took < chunk) {
			c->rcv_held = true;
		}
	}
}

/* ---- API ---- */

int
tide_net_listen(struct tide_net_stack *s, uint16_t port, uint32_t backlog,
		tide_net_accept_fn accept, void *arg, struct tide_net_listener **out)
{
	struct tide_net_listener *l;

	if (port == 0 || backlog == 0 || backlog > 65535 || accept == NULL || out == NULL) {
		return -EINVAL;
	}
	if (tcp_lookup_listener(s, port) != NULL) {
		return -EADDRINUSE;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		return -ENOMEM;
	}
	l->stack = s;
	l->port = port;
	l->backlog = backlog;
	l->accept = accept;
	l->arg = arg;
	LIST_INSERT_HEAD(&s->listeners, l, link);
	*out = l;
	return 0;
}

void
tide_net_listener_close(struct tide_net_listener *l, uint64_t now)
{
	struct tide_net_stack *s;
	struct tide_net_conn *c;

	if (l == NULL) {
		return;
	}
	s = l->stack;
	net_enter(s);
	TAILQ_FOREACH(c, &s->conns, link)
	{
		if (c->listener == l && !c->dead) {
			tcp_send_active_reset(c, now);
			tcp_done(c, 0);
		}
	}
	LIST_REMOVE(l, link);
	free(l);
	net_leave(s);
}

static int
pick_port(struct tide_net_stack *s, uint32_t ip, uint16_t port, uint16_t *out)
{
	for (unsigned attempt = 0; attempt < 64; attempt++) {
		uint16_t lport;

		if (s->o.port_pick != NULL) {
			int rc = s->o.port_pick(s->o.port_arg, ip, port, attempt, &lport);
			if (rc != 0) {
				return rc;
			}
			if (lport == 0) {
				return -EINVAL;
			}
		} else {
			lport = s->next_eport;
			s->next_eport =
				s->next_eport == 65535 ? 49152 : (uint16_t)(s->next_eport + 1);
		}
		if (tcp_lookup(s, s->o.ip, lport, ip, port) == NULL) {
			*out = lport;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
}

int
tide_net_connect(struct tide_net_stack *s, uint32_t ip, uint16_t port,
		 const struct tide_net_conn_cbs *cbs, void *arg, uint64_t now,
		 struct tide_net_conn **out)
{
	struct tide_net_conn *c;
	uint16_t lport;
	int rc;

	if (ip == 0 || port == 0 || out == NULL) {
		return -EINVAL;
	}
	if (net_ipv4_nexthop(s, ip) == 0) {
		s->st.arp_unreachable++;
		return -ENETUNREACH;
	}
	rc = pick_port(s, ip, port, &lport);
	if (rc != 0) {
		return rc;
	}
	net_enter(s);
	c = tcp_conn_alloc(s, ip, lport, port, now);
	if (c == NULL) {
		net_leave(s);
		return -ENOMEM;
	}
	if (cbs != NULL) {
		c->cbs = *cbs;
	}
	c->arg = arg;
	c->app_owned = true;
	c->active = true;
	c->ts_ok = s->o.tcp_timestamps; /* offered; settled by the SYN-ACK */
	c->sack_ok = s->o.tcp_sack;
	c->ws_ok = s->o.tcp_wscale;
	tcp_set_state(c, TCP_SYN_SENT);
	s->st.tcp_active_opens++;
	tcp_send_syn(c, now);
	*out = c;
	net_leave(s);
	return 0;
}

void
tide_net_conn_set_cbs(struct tide_net_conn *c, const struct tide_net_conn_cbs *cbs, void *arg)
{
	if (cbs != NULL) {
		c->cbs = *cbs;
	} else {
		memset(&c->cbs, 0, sizeof(c->cbs));
	}
	c->arg = arg;
}

ssize_t
tide_net_send(struct tide_net_conn *c, const void *data, size_t len, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	uint32_t n;

	if (!c->app_owned || c->fin_queued ||
	    !((1u << c->state) &
	      (TCPF_SYN_SENT | TCPF_SYN_RECV | TCPF_ESTABLISHED | TCPF_CLOSE_WAIT))) {
		return -EPIPE;
	}
	n = tcp_ring_free(&c->sbuf);
	if (len < n) {
		n = (uint32_t)len;
	}
	if (n < len) {
		c->want_write = true;
	}
	if (n == 0) {
		return 0;
	}
	net_enter(s);
	tcp_snd_append(c, data, n);
	tcp_write_xmit(c, now);
	net_leave(s);
	return n;
}

size_t
tide_net_send_space(const struct tide_net_conn *c)
{
	if (!c->app_owned || c->fin_queued ||
	    !((1u << c->state) &
	      (TCPF_SYN_SENT | TCPF_SYN_RECV | TCPF_ESTABLISHED | TCPF_CLOSE_WAIT))) {
		return 0;
	}
	return tcp_ring_free(&c->sbuf);
}

size_t
tide_net_recv(struct tide_net_conn *c, void *buf, size_t len, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	uint32_t n = c->rbuf.len;

	if (len < n) {
		n = (uint32_t)len;
	}
	if (n == 0) {
		return 0;
	}
	net_enter(s);
	tcp_ring_read(&c->rbuf, 0, buf, n);
	tcp_ring_drop(&c->rbuf, n);
	if ((1u << c->state) & TCPF_CAN_RECV) {
		tcp_window_update(c, now);
	}
	net_leave(s);
	return n;
}

void
tide_net_recv_resume(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;

	net_enter(s);
	c->rcv_held = false;
	tcp_rcv_deliver_buffered(c);
	if ((1u << c->state) & TCPF_CAN_RECV) {
		tcp_window_update(c, now);
	}
	net_leave(s);
}

void
tide_net_close(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;

	if (!c->app_owned) {
		return;
	}
	net_enter(s);
	c->app_owned = false;
	memset(&c->cbs, 0, sizeof(c->cbs));
	tcp_ring_drop(&c->rbuf, c->rbuf.len);
	switch (c->state) {
	case TCP_SYN_SENT:
	case TCP_CLOSE:
		tcp_done(c, 0);
		break;
	case TCP_SYN_RECV:
		/* RFC 9293 3.10.4: the FIN waits for ESTABLISHED (tcp_rcv_state_process). */
		c->fin_queued = true;
		break;
	case TCP_ESTABLISHED:
		c->fin_queued = true;
		tcp_set_state(c, TCP_FIN_WAIT1);
		tcp_write_xmit(c, now);
		break;
	case TCP_CLOSE_WAIT:
		c->fin_queued = true;
		tcp_set_state(c, TCP_LAST_ACK);
		tcp_write_xmit(c, now);
		break;
	default:
		break;
	}
	net_leave(s);
}

void
tide_net_abort(struct tide_net_conn *c, uint64_t now)
{
	struct tide_net_stack *s = c->stack;

	if (!c->app_owned) {
		return;
	}
	net_enter(s);
	c->app_owned = false;
	if ((1u << c->state) & (TCPF_SYN_RECV | TCPF_ESTABLISHED | TCPF_FIN_WAIT1 | TCPF_FIN_WAIT2 |
				TCPF_CLOSE_WAIT | TCPF_CLOSING | TCPF_LAST_ACK)) {
		tcp_send_active_reset(c, now);
	}
	tcp_done(c, 0);
	net_leave(s);
}

void
tide_net_conn_info(const struct tide_net_conn *c, struct tide_net_conn_info *i)
{
	memset(i, 0, sizeof(*i));
	i->state = (enum tide_net_tcp_state)c->state;
	i->lip = c->lip;
	i->rip = c->rip;
	i->lport = c->lport;
	i->rport = c->rport;
	i->mss = c->mss;
	i->cwnd = c->cwnd;
	i->ssthresh = c->ssthresh;
	i->snd_wnd = c->snd_wnd;
	i->rcv_wnd = tcp_rcv_wnd(c);
	i->srtt_ns = c->srtt;
	i->rto_ns = c->rto;
	i->snd_queued = c->snd_len;
	i->rcv_queued = c->rbuf.len;
	i->ts_ok = c->ts_ok;
	i->ws_ok = c->ws_ok;
	i->sack_ok = c->sack_ok;
}

const char *
tide_net_tcp_state_name(enum tide_net_tcp_state state)
{
	static const char *const names[] = {
		[TCP_ESTABLISHED] = "ESTABLISHED",
		[TCP_SYN_SENT] = "SYN_SENT",
		[TCP_SYN_RECV] = "SYN_RECV",
		[TCP_FIN_WAIT1] = "FIN_WAIT1",
		[TCP_FIN_WAIT2] = "FIN_WAIT2",
		[TCP_TIME_WAIT] = "TIME_WAIT",
		[TCP_CLOSE] = "CLOSE",
		[TCP_CLOSE_WAIT] = "CLOSE_WAIT",
		[TCP_LAST_ACK] = "LAST_ACK",
		[TCP_LISTEN] = "LISTEN",
		[TCP_CLOSING] = "CLOSING",
	};

	if ((unsigned)state >= sizeof(names) / sizeof(names[0]) || names[state] == NULL) {
		return "?";
	}
	return names[state];
}
