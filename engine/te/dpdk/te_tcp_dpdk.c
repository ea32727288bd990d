/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine's user-space TCP transport: the same sessions as the
 * kernel-socket transport (te_sess.h), driven by Tide's TCP/IP stack on a
 * pinned DPDK lcore instead of by epoll.
 *
 * The node file gives the device, address and lcores (TIDE_DPDK_DEVICE,
 * TIDE_DATA_IP, TIDE_LCORES / TIDE_LCORES_PER_NUMA). Each polling lcore has
 * its own queue pair, stack, listener (all on the data port) and
 * connections; the port steers each connection's packets to the lcore that
 * owns it (hardware RSS, or software steering on vdevs) and active opens
 * pick local ports whose reply tuple hashes to the opening lcore. A peer's
 * slices are dealt round-robin over the lcores, so one large request runs
 * over several connections on several lcores.
 *
 * An lcore owns everything it touches, so nothing below is locked except
 * the per-lcore inbox through which application threads hand slices over.
 * Application threads reach an lcore only through its inbox and
 * tide_lcore_post() (peer open/close, teardown), and wait for posted work
 * with a flag.
 *
 * The EAL is process-wide: one user-space transport per process.
 *
 * The lcores are lent to the RDMA transport when both are installed
 * (dpdk_lcores()): it adds its completion-queue poller on each lcore, after
 * dpdk_poll(), so one pinned CPU per lcore polls the packet queue and the CQs.
 *
 * Bounds: TE_DPDK_MAX_CONNS connections per peer; a client connection has at
 * most max_inflight slices (64) and 8 MiB in flight; a server connection
 * buffers nothing and holds at most TE_SRV_SESS_OUTQ replies.
 *
 * CPU copies per payload byte (the device's own copies, e.g. memif's into
 * and out of its shared ring, not counted): received bytes are copied once,
 * by the session's feed(), from the frame the stack hands to on_recv straight
 * into their destination (a WRITE's checked memory, a READ's slice->local).
 * WRITE payloads and READ replies leave through tide_net_send_zc(): frames
 * reference the caller's or the registered memory (no copy when the device
 * chains external buffers, one copy into the frame when it does not), and
 * retransmissions read the same memory again. A slice completes, and a READ
 * reply's check() reference is released, only once the peer acknowledged
 * the bytes and the device released every frame carrying them, so a buffer
 * being unregistered waits for frames still in flight.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "te_sess.h"
#include "te_xport.h"
#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_eth_rss.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_net.h"
#include "tide_node_eal.h"
#include "tide_nodeenv.h"

#define TE_DPDK_MAX_CONNS      64
#define TE_DPDK_IOV            16
#define TE_DPDK_INFLIGHT       64
#define TE_DPDK_INFLIGHT_BYTES (8u << 20)
#define TE_DPDK_TICK_NS        (10 * 1000000ull) /* timeout scan period */
/* WRITE payloads and READ replies at least this long go out zero-copy from the
 * caller's buffer or registered memory; headers and small pieces are copied. */
#define TE_DPDK_ZC_MIN 2048
/* One zero-copy send (one completion) covers at most this much of a payload. */
#define TE_DPDK_ZC_CHUNK (4u << 20)

struct dconn;
struct te_lc;
LIST_HEAD(dconn_list, dconn);

/* A peer as one lcore sees it: its queue and its connections on that lcore. */
struct dpeer {
	struct te_xpeer *top;
	struct te_lc *l;
	/* Inbox: slices handed over by application threads (lock), then the
	 * lcore's own queue of slices not yet in a session. */
	pthread_mutex_t lock;
	struct te_slice *in_head, *in_tail;
	bool in_listed; /* on l->inbox_peers */
	TAILQ_ENTRY(dpeer) inbox_link;
	struct te_slice *q_head, *q_tail;
	struct dconn *conns[TE_DPDK_MAX_CONNS];
	unsigned nconns, max_conns, rr;
	int last_err; /* error of the last connection that died (to fail the queue) */
	bool registered;
	LIST_ENTRY(dpeer) link;
};

struct te_xpeer {
	struct te_xport *x;
	struct te_peer_addr a;
	uint32_t ip;    /* host order */
	atomic_uint rr; /* next lcore for a slice */
	unsigned nsub;  /* lcores this peer's slices go to (v1: one) */
	struct dpeer *sub[TIDE_LCORE_MAX];
};

/* Server connections: zero-copy sends outstanding at once (one per READ reply). */
#define TE_DPDK_SRV_ZC TE_SRV_SESS_OUTQ

struct dconn {
	struct te_lc *l;
	struct tide_net_conn *nc;
	struct dpeer *peer; /* client connections */
	struct te_srv_sess *srv;
	struct te_cli_sess *cli;
	bool connected;
	bool rx_held;    /* on_recv consumed less than offered: resume once output drained */
	bool tx_blocked; /* the stack's send buffer is full: wait for WRITABLE */
	bool dead;
	uint64_t opened_ns, progress_ns;
	bool in_flush; /* conn_flush() is running (completions must not re-enter it) */
	/* Zero-copy sends (client: WRITE payloads; server: READ replies) issued and
	 * completed, in order. Client: the slices whose replies came back while
	 * earlier zero-copy sends were still referenced. Server: the session's
	 * output position after each outstanding send (by zc_issued modulo), and
	 * that of the latest completed one, up to which replies may be released. */
	uint64_t zc_issued, zc_done;
	struct te_slice *held_head, *held_tail;
	uint64_t zc_upto[TE_DPDK_SRV_ZC];
	uint64_t zc_done_upto;
	LIST_ENTRY(dconn) link;
};

/* One polling lcore: its queue pair, stack, listener and connections. */
struct te_lc {
	struct te_xport *x;
	unsigned idx;
	struct tide_lcore *lc;
	struct tide_eth_netdev nd;
	bool nd_up;
	struct tide_net_stack *stack;
	struct tide_net_listener *listener;
	struct tide_eth_rss_picker pk;
	uint64_t next_tick;
	/* The clock of the current poll iteration: callbacks stamp with it
	 * instead of reading the clock per segment (clock_gettime was 4-10 %
	 * of a receiving poller); the stack keeps TSvals monotonic. */
	uint64_t now;

	pthread_mutex_t inbox_lock;
	TAILQ_HEAD(, dpeer) inbox_peers;
	atomic_bool inbox_pending;

	struct dconn_list conns; /* every live connection (lcore only) */
	struct dconn_list dead;  /* killed inside callbacks; freed by the poller */
	LIST_HEAD(, dpeer) peers;
};

struct te_xport {
	struct te_xport_cfg cfg;
	struct tide_nodeenv ne;
	struct tide_eth_port *port;
	struct tide_lcore_group *g;
	unsigned nlc;
	struct te_lc lcs[TIDE_LCORE_MAX];
	uint16_t data_port;
	uint32_t ip;
	char ip_str[INET_ADDRSTRLEN];
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- running work on an lcore -------------------------------------------- */

/* Run fn(arg) on lcore l and wait for it (an lcore never waits on us). */
static int
run_on_lcore(struct te_lc *l, void (*fn)(void *), void *arg)
{
	return tide_lcore_run_sync(l->lc, fn, arg);
}

/* ---- connections (lcore only) ------------------------------------------ */

static void conn_kill(struct dconn *c, int err);
static void peer_pump(struct dpeer *p);
static void conn_zc_done(void *cookie, int status);

static void
fail_chain(struct te_slice *s, int err)
{
	while (s != NULL) {
		struct te_slice *next = s->next;
		te_slice_done(s, err);
		s = next;
	}
}

/* Server: every zero-copy send slot is taken; a completion flushes again. */
static bool
srv_zc_full(const struct dconn *c)
{
	return c->srv != NULL && c->zc_issued - c->zc_done >= TE_DPDK_SRV_ZC;
}

/* Server: replies the device no longer references give their check() references back. */
static void
srv_zc_settle(struct dconn *c)
{
	if (c->srv == NULL) {
		return;
	}
	if (c->zc_done == c->zc_issued) {
		te_srv_sess_tx_done(c->srv, te_srv_sess_tx_pos(c->srv));
	} else {
		te_srv_sess_tx_done(c->srv, c->zc_done_upto);
	}
}

/*
 * Send len bytes at p zero-copy, in pieces of at most TE_DPDK_ZC_CHUNK (one
 * completion each), pos = the server session's output position of p.
 * *sent gets the bytes queued. \return 0 (all, or no send slot left: a
 * completion flushes again); 1 the stack refused more (WRITABLE follows);
 * -errno the connection is unusable.
 */
static int
zc_send(struct dconn *c, const uint8_t *p, size_t len, uint64_t pos, uint64_t now, ssize_t *sent)
{
	size_t off = 0;
	int rc = 0;
	*sent = 0;
	while (off < len && !srv_zc_full(c)) {
		size_t k = len - off < TE_DPDK_ZC_CHUNK ? len - off : TE_DPDK_ZC_CHUNK;
		ssize_t r = tide_net_send_zc(c->nc, p + off, k, conn_zc_done, c, now);
		if (r == -EAGAIN) {
			rc = 1;
			break;
		}
		if (r < 0) {
			return (int)r;
		}
		off += (size_t)r;
		if (c->srv != NULL) {
			c->zc_upto[c->zc_issued % TE_DPDK_SRV_ZC] = pos + off;
		}
		c->zc_issued++;
	}
	*sent = (ssize_t)off;
	return rc;
}

/* Send what the session has ready, as far as the stack's buffer allows. */
static void
conn_flush(struct dconn *c, uint64_t now)
{
	struct iovec iov[TE_DPDK_IOV];
	if (c->in_flush) {
		return;
	}
	c->in_flush = true;
	while (!c->dead && c->connected && !c->tx_blocked && !srv_zc_full(c)) {
		unsigned n = c->srv ? te_srv_sess_tx_iov(c->srv, iov, TE_DPDK_IOV)
				    : te_cli_sess_tx_iov(c->cli, iov, TE_DPDK_IOV);
		uint64_t pos0 = c->srv ? te_srv_sess_tx_pos(c->srv) : 0;
		size_t total = 0;
		bool short_send = false;
		if (n == 0) {
			break;
		}
		for (unsigned i = 0; i < n; i++) {
			ssize_t sent;
			if (iov[i].iov_len >= TE_DPDK_ZC_MIN) {
				/* Client: WRITE payload; the slice's memory stays valid until
				 * its completion, which waits for this send (cli_done).
				 * Server: READ data in checked memory (headers are short);
				 * the session holds its check() reference until the send
				 * completes (srv_zc_settle). */
				int why = zc_send(c, iov[i].iov_base, iov[i].iov_len, pos0 + total,
						  now, &sent);
				if (why < 0) {
					c->in_flush = false;
					conn_kill(c, -EPIPE);
					return;
				}
				total += (size_t)sent;
				short_send = why == 1;
				if ((size_t)sent < iov[i].iov_len) {
					break; /* no send slot (a completion flushes again) or
						  WRITABLE */
				}
				continue;
			}
			sent = tide_net_send(c->nc, iov[i].iov_base, iov[i].iov_len, now);
			if (sent < 0) {
				c->in_flush = false;
				conn_kill(c, -EPIPE);
				return;
			}
			total += (size_t)sent;
			if ((size_t)sent < iov[i].iov_len) {
				short_send = true;
				break;
			}
		}
		if (total > 0) {
			c->progress_ns = now;
			if (c->srv) {
				te_srv_sess_tx_advance(c->srv, total);
				srv_zc_settle(c); /* copied replies need no device release */
			} else {
				te_cli_sess_tx_advance(c->cli, total);
			}
		}
		if (short_send) {
			c->tx_blocked = true; /* TIDE_NET_EV_WRITABLE follows */
		}
	}
	c->in_flush = false;
	if (c->dead) {
		return;
	}
	if (c->srv != NULL) {
		int why = te_srv_sess_close_reason(c->srv);
		if (why != 0) {
			/* Refused or malformed request: the framing says close. */
			conn_kill(c, why);
		}
	} else if (te_cli_sess_error(c->cli) != 0) {
		conn_kill(c, te_cli_sess_error(c->cli));
	}
}

/* Complete the held slices whose zero-copy sends have all been released. */
static void
conn_release_held(struct dconn *c)
{
	while (c->held_head != NULL && c->held_head->xport_mark <= c->zc_done) {
		struct te_slice *s = c->held_head;
		c->held_head = s->next;
		if (c->held_head == NULL) {
			c->held_tail = NULL;
		}
		te_slice_done(s, s->xport_err);
	}
}

/*
 * A zero-copy send completed: acknowledged and released by the device, or
 * the connection ended and the device released it. Made on the lcore from
 * inside a tide_net_* call, in issue order.
 */
static void
conn_zc_done(void *cookie, int status)
{
	struct dconn *c = cookie;
	bool was_full = srv_zc_full(c);
	(void)status; /* the slice's own result comes from its reply (or the session) */
	if (c->srv != NULL) {
		c->zc_done_upto = c->zc_upto[c->zc_done % TE_DPDK_SRV_ZC];
	}
	c->zc_done++;
	conn_release_held(c);
	srv_zc_settle(c);
	/* Input the session refused while its queue was full resumes from the
	 * poller (resume_held); output waiting for a send slot goes now. */
	if (was_full && !c->dead) {
		conn_flush(c, c->l->now);
	}
}

/* Free dead connections the stack and device no longer reference; a server
 * session lives until then, holding the check() references of the replies
 * still in frames. */
static void
conns_reap(struct te_lc *l)
{
	struct dconn *c, *next;
	for (c = LIST_FIRST(&l->dead); c != NULL; c = next) {
		next = LIST_NEXT(c, link);
		if (c->zc_done == c->zc_issued) {
			LIST_REMOVE(c, link);
			te_srv_sess_destroy(c->srv);
			free(c);
		}
	}
}

static size_t
conn_on_recv(struct tide_net_conn *nc, void *arg, const uint8_t *data, size_t len)
{
	struct dconn *c = arg;
	uint64_t now = c->l->now;
	size_t used;
	(void)nc;
	if (c->dead) {
		return len;
	}
	used = c->srv ? te_srv_sess_feed(c->srv, data, len) : te_cli_sess_feed(c->cli, data, len);
	if (used > 0) {
		c->progress_ns = now;
	}
	if (used < len) {
		c->rx_held = true;
	}
	conn_flush(c, now);
	if (c->peer != NULL && !c->dead) {
		peer_pump(c->peer); /* completions opened the window */
	}
	return used;
}

static void
conn_on_event(struct tide_net_conn *nc, void *arg, enum tide_net_event ev, int reason)
{
	struct dconn *c = arg;
	uint64_t now = c->l->now;
	(void)nc;
	if (c->dead) {
		return;
	}
	/* c stays allocated (graveyard) until the poller reaps it. */
	switch (ev) {
	case TIDE_NET_EV_CONNECTED:
		c->connected = true;
		c->progress_ns = now;
		conn_flush(c, now);
		break;
	case TIDE_NET_EV_WRITABLE:
		c->tx_blocked = false;
		conn_flush(c, now);
		break;
	case TIDE_NET_EV_PEER_CLOSED:
		conn_kill(c, -ECONNRESET);
		break;
	case TIDE_NET_EV_CLOSED:
		conn_kill(c, reason != 0 ? reason : -ECONNRESET);
		break;
	}
	if (c->peer != NULL && !c->dead) {
		peer_pump(c->peer);
	}
}

static const struct tide_net_conn_cbs conn_cbs = {.on_recv = conn_on_recv,
						  .on_event = conn_on_event};

/* End a connection: fail what its session owns, release the stack handle. */
static void
conn_kill(struct dconn *c, int err)
{
	uint64_t now = mono_ns();
	struct dpeer *p = c->peer;
	if (c->dead) {
		return;
	}
	c->dead = true;
	LIST_REMOVE(c, link);
	LIST_INSERT_HEAD(&c->l->dead, c, link);
	if (c->cli != NULL) {
		te_cli_sess_fail(c->cli, err);
		te_cli_sess_destroy(c->cli, err);
		c->cli = NULL;
	}
	/* c->srv stays until conns_reap: the device may still read replies it holds. */
	if (c->nc != NULL) {
		tide_net_conn_set_cbs(c->nc, NULL, NULL);
		if (err == -EFAULT || err == -ESTALE || err == 0) {
			tide_net_close(c->nc, now); /* the framing's orderly close */
		} else {
			tide_net_abort(c->nc, now);
		}
		c->nc = NULL;
	}
	if (p == NULL) {
		return;
	}
	for (unsigned i = 0; i < p->nconns; i++) {
		if (p->conns[i] == c) {
			p->conns[i] = p->conns[--p->nconns];
			break;
		}
	}
	p->last_err = err;
	if (p->nconns == 0 && p->q_head != NULL && err != -EFAULT) {
		/* Nobody left to carry the queue: fail it now rather than loop on
		 * reconnects; the core re-fetches the descriptor on the next submit. */
		struct te_slice *s = p->q_head;
		p->q_head = p->q_tail = NULL;
		fail_chain(s, err);
	}
}

static struct dconn *
conn_new(struct te_lc *l)
{
	struct dconn *c = calloc(1, sizeof(*c));
	if (c != NULL) {
		c->l = l;
		c->opened_ns = c->progress_ns = mono_ns();
		LIST_INSERT_HEAD(&l->conns, c, link);
	}
	return c;
}

static int
srv_accept(void *arg, struct tide_net_conn *nc)
{
	struct te_lc *l = arg;
	struct tide_net_conn_info ci;
	struct dconn *c;

	/* TIDE_ALLOW_NETS: refused before a byte is read; the stack resets the
	 * connection and counts it (tcp_accept_refused). */
	tide_net_conn_info(nc, &ci);
	if (!tide_cidr_allows_ip4(l->x->cfg.allow, ci.rip)) {
		struct in_addr a = {.s_addr = htonl(ci.rip)};
		char ip[INET_ADDRSTRLEN];

		if (l->x->cfg.refused != NULL) {
			atomic_fetch_add_explicit(l->x->cfg.refused, 1, memory_order_relaxed);
		}
		TIDE_LOG_RATELIMIT(WARN, 5,
				   "data port: connection from %s refused (not in TIDE_ALLOW_NETS)",
				   inet_ntop(AF_INET, &a, ip, sizeof(ip)));
		return -EACCES;
	}
	c = conn_new(l);
	if (c == NULL) {
		return -ENOMEM;
	}
	if (te_srv_sess_create(&l->x->cfg.srv, &c->srv) != 0) {
		LIST_REMOVE(c, link);
		free(c);
		return -ENOMEM;
	}
	te_srv_sess_tx_hold(c->srv, true); /* READ replies go by reference */
	c->nc = nc;
	c->connected = true;
	tide_net_conn_set_cbs(nc, &conn_cbs, c);
	return 0;
}

/* A slice's reply (or failure) came back: complete it once no zero-copy send
 * issued before it is still referenced, so its memory is the caller's again. */
static void
cli_done(void *arg, struct te_slice *s, int err)
{
	struct dconn *c = arg;
	if (c->zc_done == c->zc_issued) {
		te_slice_done(s, err);
		return;
	}
	s->xport_mark = c->zc_issued;
	s->xport_err = err;
	s->next = NULL;
	if (c->held_tail != NULL) {
		c->held_tail->next = s;
	} else {
		c->held_head = s;
	}
	c->held_tail = s;
}

static struct dconn *
peer_connect(struct dpeer *p)
{
	const struct te_xpeer *top = p->top;
	struct te_cli_sess_cfg cc = {
		.proto = top->a.proto,
		.instance = top->a.proto == TE_PROTO_NATIVE ? top->a.instance : 0,
		.max_inflight = top->a.proto == TE_PROTO_NATIVE ? TE_DPDK_INFLIGHT : 1,
		.max_inflight_bytes = TE_DPDK_INFLIGHT_BYTES,
		.done = cli_done};
	struct dconn *c = conn_new(p->l);
	int rc;
	if (c == NULL) {
		return NULL;
	}
	cc.arg = c;
	c->peer = p;
	if (te_cli_sess_create(&cc, &c->cli) != 0) {
		LIST_REMOVE(c, link);
		free(c);
		return NULL;
	}
	rc = tide_net_connect(p->l->stack, top->ip, top->a.data_port, &conn_cbs, c, mono_ns(),
			      &c->nc);
	if (rc != 0) {
		TIDE_LOG(ERR, "connect to %s:%u: %s", top->a.host, top->a.data_port, strerror(-rc));
		te_cli_sess_destroy(c->cli, rc);
		LIST_REMOVE(c, link);
		free(c);
		p->last_err = rc;
		return NULL;
	}
	p->conns[p->nconns++] = c;
	return c;
}

/* Move queued slices into sessions with room, opening connections lazily. */
static void
peer_pump(struct dpeer *p)
{
	uint64_t now = p->l->now;
	while (p->q_head != NULL) {
		struct te_slice *s = p->q_head;
		struct dconn *c = NULL;
		/* Prefer a fresh connection while below the limit and every existing one
		 * is busy, so a large request spreads across connections. */
		for (unsigned k = 0; k < p->nconns; k++) {
			struct dconn *cand = p->conns[(p->rr + k) % p->nconns];
			if (te_cli_sess_can_submit(cand->cli, s->len) &&
			    (te_cli_sess_inflight(cand->cli) == 0 || p->nconns >= p->max_conns)) {
				c = cand;
				p->rr = (p->rr + k + 1) % p->nconns;
				break;
			}
		}
		if (c == NULL && p->nconns < p->max_conns) {
			c = peer_connect(p);
			if (c == NULL) {
				if (p->nconns == 0) {
					p->q_head = p->q_tail = NULL;
					fail_chain(s, p->last_err ? p->last_err : -ENOMEM);
				}
				break;
			}
		}
		if (c == NULL) {
			break; /* every window is full: completions pump again */
		}
		p->q_head = s->next;
		if (p->q_head == NULL) {
			p->q_tail = NULL;
		}
		s->next = NULL;
		if (te_cli_sess_submit(c->cli, s) != 0) {
			te_slice_done(s, -EPIPE);
		}
	}
	for (unsigned k = 0; k < p->nconns; k++) {
		conn_flush(p->conns[k], now);
	}
}

/* ---- lcore poller -------------------------------------------------------- */

static void
inbox_drain(struct te_lc *l)
{
	TAILQ_HEAD(, dpeer) todo = TAILQ_HEAD_INITIALIZER(todo);
	struct dpeer *p;
	if (!atomic_exchange(&l->inbox_pending, false)) {
		return;
	}
	pthread_mutex_lock(&l->inbox_lock);
	TAILQ_CONCAT(&todo, &l->inbox_peers, inbox_link);
	pthread_mutex_unlock(&l->inbox_lock);
	while ((p = TAILQ_FIRST(&todo)) != NULL) {
		struct te_slice *h, *t;
		TAILQ_REMOVE(&todo, p, inbox_link);
		pthread_mutex_lock(&p->lock);
		h = p->in_head;
		t = p->in_tail;
		p->in_head = p->in_tail = NULL;
		p->in_listed = false;
		pthread_mutex_unlock(&p->lock);
		if (h == NULL) {
			continue;
		}
		if (p->q_tail != NULL) {
			p->q_tail->next = h;
		} else {
			p->q_head = h;
		}
		p->q_tail = t;
		peer_pump(p);
	}
}

/* Connect and progress timeouts. */
static void
conns_tick(struct te_lc *l, uint64_t now)
{
	const struct te_xport_cfg *cfg = &l->x->cfg;
	struct dconn *c, *next;
	uint64_t io = (uint64_t)cfg->io_timeout_ms * 1000000ull;
	uint64_t co = (uint64_t)cfg->connect_timeout_ms * 1000000ull;
	for (c = LIST_FIRST(&l->conns); c != NULL; c = next) {
		next = LIST_NEXT(c, link);
		if (!c->connected && now > c->opened_ns && now - c->opened_ns > co) {
			TIDE_LOG(WARN, "data connection to %s:%u: no answer in %u ms",
				 c->peer ? c->peer->top->a.host : "?",
				 c->peer ? c->peer->top->a.data_port : 0, cfg->connect_timeout_ms);
			conn_kill(c, -ETIMEDOUT);
			continue;
		}
		bool busy = c->cli ? te_cli_sess_inflight(c->cli) > 0 : !te_srv_sess_idle(c->srv);
		if (busy && now > c->progress_ns && now - c->progress_ns > io) {
			struct tide_net_conn_info ci;
			tide_net_conn_info(c->nc, &ci);
			TIDE_LOG(WARN,
				 "data connection %s %u -> %u: no progress in %u ms: closed (state "
				 "%s, "
				 "send queue %u, receive queue %u, snd_wnd %u, cwnd %u)",
				 c->srv ? "server" : "client", ci.lport, ci.rport,
				 cfg->io_timeout_ms, tide_net_tcp_state_name(ci.state),
				 ci.snd_queued, ci.rcv_queued, ci.snd_wnd, ci.cwnd);
			conn_kill(c, -ETIMEDOUT);
		}
	}
}

/* Offer held receive bytes again once the session's output drained. */
static void
resume_held(struct te_lc *l, uint64_t now)
{
	struct dconn *c;
	bool again = true;
	/* A resume runs callbacks that may kill any connection (moving it to the
	 * graveyard), so restart the walk after each one. */
	while (again) {
		again = false;
		LIST_FOREACH(c, &l->conns, link)
		{
			struct iovec iov[1];
			uint8_t *p;
			if (!c->rx_held || c->tx_blocked) {
				continue;
			}
			/* A server takes input again once its reply queue has room
			 * (replies held by the device count until they complete). */
			if (c->srv ? te_srv_sess_rx_window(c->srv, &p) > 0
				   : te_cli_sess_tx_iov(c->cli, iov, 1) == 0) {
				c->rx_held = false;
				tide_net_recv_resume(c->nc, now);
				again = true;
				break;
			}
		}
	}
}

static int
dpdk_poll(void *ctx, uint64_t now)
{
	struct te_lc *l = ctx;
	int work;

	l->now = now;
	work = (int)tide_eth_netdev_poll(&l->nd, l->stack, now);
	inbox_drain(l);
	resume_held(l, now);
	work += tide_net_timers_run(l->stack, now);
	if (now >= l->next_tick) {
		l->next_tick = now + TE_DPDK_TICK_NS;
		/* A fresh read, once per tick: stamps above carry this iteration's clock. */
		conns_tick(l, mono_ns());
	}
	conns_reap(l);
	return work;
}

/* ---- setup and teardown -------------------------------------------------- */

struct setup_arg {
	struct te_lc *l;
	struct tide_net_opts no;
	int rc;
};

static void
setup_on_lcore(void *arg)
{
	struct setup_arg *a = arg;
	struct te_lc *l = a->l;
	l->now = mono_ns();
	a->rc = tide_net_stack_create(&a->no, l->now, &l->stack);
	if (a->rc == 0) {
		a->rc = tide_net_listen(l->stack, l->x->data_port, 1024, srv_accept, l,
					&l->listener);
	}
	if (a->rc == 0) {
		a->rc = tide_lcore_poller_add(l->lc, dpdk_poll, l);
	}
	/* Live counters for tools/tide-stats.py (index = lcore order); best
	 * effort: a process without telemetry still transfers. */
	if (a->rc == 0 && l->nd_up) {
		unsigned idx;

		(void)tide_eth_netdev_publish(&l->nd, l->stack, &idx);
	}
}

static void
teardown_on_lcore(void *arg)
{
	struct te_lc *l = arg;
	struct dpeer *p;
	inbox_drain(l);
	LIST_FOREACH(p, &l->peers, link)
	{
		struct te_slice *s = p->q_head;
		p->q_head = p->q_tail = NULL;
		fail_chain(s, -ECANCELED);
	}
	while (!LIST_EMPTY(&l->conns)) {
		conn_kill(LIST_FIRST(&l->conns), -ECANCELED);
	}
	tide_net_listener_close(l->listener, mono_ns());
	l->listener = NULL;
	conns_reap(l);
}

static void dpdk_destroy(struct te_xport *x);

static int
dpdk_create(const struct te_xport_cfg *cfg, struct te_xport **out)
{
	struct te_xport *x = calloc(1, sizeof(*x));
	struct tide_eal_opts eo;
	struct tide_eal_info ei;
	struct tide_eth_port_opts po = {0};
	struct tide_eth_fault_opts fo;
	const struct tide_eth_fault_opts *fault;
	struct tide_lcore_opts lo;
	char err[2048] = "", devname[128], rxname[128];
	int cpus[TIDE_LCORE_MAX], sockets[TIDE_LCORE_MAX];
	unsigned ncpus = 0;
	int rc;

	if (x == NULL) {
		return -ENOMEM;
	}
	x->cfg = *cfg;
	rc = tide_nodeenv_load(&x->ne, cfg->node_env, NULL, err, sizeof(err));
	if (rc != 0) {
		TIDE_LOG(ERR, "node environment is not valid:\n%s", err);
		free(x);
		return rc;
	}
	if (x->ne.dpdk_device[0] == '\0' || !x->ne.data_ip_set) {
		TIDE_LOG(ERR, "user-space TCP needs TIDE_DPDK_DEVICE and TIDE_DATA_IP in the node "
			      "file (or set MC_FORCE_TCP=1 for kernel sockets)");
		free(x);
		return -EINVAL;
	}
	/* Before the EAL pins this thread: afterwards its affinity hides the other CPUs. */
	rc = tide_lcore_cpus_pick(x->ne.lcores, x->ne.lcores_per_numa, cpus, TIDE_LCORE_MAX,
				  &ncpus);
	if (rc != 0) {
		TIDE_LOG(ERR, "no CPU for the polling lcores (TIDE_LCORES='%s'): %s", x->ne.lcores,
			 strerror(-rc));
		free(x);
		return rc;
	}
	x->nlc = ncpus;
	tide_node_eal_opts(&x->ne, "tide-te", true, &eo);
	rc = tide_eal_init(&eo, &ei);
	if (rc != 0) {
		TIDE_LOG(ERR, "DPDK EAL did not start: %s", strerror(-rc));
		free(x);
		return rc;
	}
	tide_node_port_opts(&x->ne, &po, devname, rxname, sizeof(devname));
	for (unsigned i = 0; i < x->nlc; i++) {
		sockets[i] = tide_eal_cpu_socket(cpus[i]);
	}
	po.nb_queues = (uint16_t)x->nlc;
	po.queue_socket = sockets;
	rc = tide_eth_port_open(devname, &po, &x->port);
	if (rc != 0) {
		TIDE_LOG(ERR, "cannot open %s with %u queue pair(s): %s", devname, x->nlc,
			 strerror(-rc));
		goto fail;
	}
	x->ip = ntohl(x->ne.data_ip.s_addr);
	inet_ntop(AF_INET, &x->ne.data_ip, x->ip_str, sizeof(x->ip_str));
	if (cfg->data_port != 0) {
		x->data_port = cfg->data_port;
	} else {
		/* The stack is ours alone on this address: any port is free. */
		uint16_t r = 0;
		if (getrandom(&r, sizeof(r), 0) != sizeof(r)) {
			r = (uint16_t)mono_ns();
		}
		x->data_port = (uint16_t)(15000 + r % 2000);
	}
	fault = tide_node_fault_opts(&x->ne, mono_ns(), &fo);
	for (unsigned i = 0; i < x->nlc; i++) {
		struct te_lc *l = &x->lcs[i];
		l->x = x;
		l->idx = i;
		pthread_mutex_init(&l->inbox_lock, NULL);
		TAILQ_INIT(&l->inbox_peers);
		LIST_INIT(&l->conns);
		LIST_INIT(&l->dead);
		LIST_INIT(&l->peers);
		rc = tide_eth_netdev_init(&l->nd, x->port, (uint16_t)i, fault);
		if (rc != 0) {
			goto fail;
		}
		l->nd_up = true;
	}

	tide_lcore_opts_init(&lo, sizeof(lo));
	lo.idle = x->ne.idle == TIDE_NODEENV_IDLE_BUSY ? TIDE_LCORE_IDLE_BUSY
						       : TIDE_LCORE_IDLE_ADAPTIVE;
	lo.idle_sleep_us = x->ne.idle_sleep_us;
	lo.thread_init = tide_eal_thread_register;
	/* lo.clock_ns stays CLOCK_MONOTONIC: slices are stamped with it, and the RDMA
	 * poller sharing these lcores relies on it too. */
	rc = tide_lcore_group_create(&lo, cpus, x->nlc, &x->g);
	if (rc == 0) {
		rc = tide_lcore_group_start(x->g);
	}
	if (rc != 0) {
		TIDE_LOG(ERR, "polling lcores did not start: %s", strerror(-rc));
		goto fail;
	}
	for (unsigned i = 0; i < x->nlc; i++) {
		struct te_lc *l = &x->lcs[i];
		struct setup_arg sa = {.l = l};
		const struct tide_eth_rss *rss = tide_eth_port_rss(x->port);
		l->lc = tide_lcore_get(x->g, i);
		tide_net_opts_init(&sa.no, sizeof(sa.no));
		sa.no.dev_ops = &tide_eth_net_dev_ops;
		sa.no.dev = &l->nd;
		if (x->ne.data_mac_set) {
			memcpy(sa.no.mac, x->ne.data_mac, 6);
		} else {
			tide_eth_port_mac(x->port, sa.no.mac);
		}
		sa.no.ip = x->ip;
		sa.no.netmask = ntohl(x->ne.data_netmask.s_addr);
		sa.no.gateway = x->ne.gateway_set ? ntohl(x->ne.gateway.s_addr) : 0;
		sa.no.mtu = (uint16_t)x->ne.mtu;
		sa.no.tcp_sndbuf = sa.no.tcp_rcvbuf = 4u << 20;
		sa.no.tcp_rto_min_us = x->ne.tcp_rto_min_us;
		sa.no.tcp_max_retries = (uint8_t)x->ne.tcp_max_retries;
		rc = tide_eth_netdev_csum(&l->nd, tide_node_csum(&x->ne), &sa.no);
		if (rc != 0) {
			goto fail;
		}
		/* Only the first stack announces the address; the others share it. */
		sa.no.arp_gratuitous = i == 0;
		if (x->nlc > 1 && rss != NULL) {
			/* Replies to our active opens must come back to this lcore's queue. */
			rc = tide_eth_rss_picker_init(&l->pk, rss, (uint16_t)i, x->ip, 0, 0);
			if (rc != 0) {
				goto fail;
			}
			sa.no.port_pick = tide_eth_rss_port_pick;
			sa.no.port_arg = &l->pk;
		}
		rc = run_on_lcore(l, setup_on_lcore, &sa);
		if (rc == 0) {
			rc = sa.rc;
		}
		if (rc != 0) {
			TIDE_LOG(ERR, "user-space TCP stack setup on lcore %u failed: %s", i,
				 strerror(-rc));
			goto fail;
		}
	}
	TIDE_LOG(INFO, "user-space TCP on %s, %s:%u, %u lcore(s) from CPU %d, %s",
		 x->ne.dpdk_device, x->ip_str, x->data_port, x->nlc, cpus[0],
		 ei.hugepages ? "hugepages" : "no hugepages");
	*out = x;
	return 0;
fail:
	dpdk_destroy(x);
	return rc;
}

static uint16_t
dpdk_data_port(const struct te_xport *x)
{
	return x->data_port;
}

static void
register_peer_on_lcore(void *arg)
{
	struct dpeer *p = arg;
	LIST_INSERT_HEAD(&p->l->peers, p, link);
	p->registered = true;
}

static void
peer_close_on_lcore(void *arg)
{
	struct dpeer *p = arg;
	struct te_slice *s;
	int err = p->last_err;
	inbox_drain(p->l); /* nothing of p may stay in the inbox */
	while (p->nconns > 0) {
		conn_kill(p->conns[0], err);
	}
	s = p->q_head;
	p->q_head = p->q_tail = NULL;
	fail_chain(s, err);
	if (p->registered) {
		LIST_REMOVE(p, link);
		p->registered = false;
	}
}

static void
dpdk_peer_close(struct te_xport *x, struct te_xpeer *top, int err)
{
	if (top == NULL) {
		return;
	}
	for (unsigned i = 0; i < top->nsub; i++) {
		struct dpeer *p = top->sub[i];
		if (p == NULL) {
			continue;
		}
		p->last_err = err;
		run_on_lcore(&x->lcs[i], peer_close_on_lcore, p);
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
	free(top);
}

static int
dpdk_peer_open(struct te_xport *x, const struct te_peer_addr *addr, struct te_xpeer **out)
{
	struct te_xpeer *top = calloc(1, sizeof(*top));
	struct in_addr ia;
	unsigned per;
	if (top == NULL) {
		return -ENOMEM;
	}
	if (inet_pton(AF_INET, addr->host, &ia) != 1) {
		struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
		if (getaddrinfo(addr->host, NULL, &hints, &res) != 0 || res == NULL) {
			TIDE_LOG(ERR, "peer host '%s' does not resolve to an IPv4 address",
				 addr->host);
			free(top);
			return -EHOSTUNREACH;
		}
		ia = ((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr;
		freeaddrinfo(res);
	}
	top->x = x;
	top->a = *addr;
	top->ip = ntohl(ia.s_addr);
	/* v1 WRITEs are never acknowledged: one connection on one lcore keeps them
	 * ordered with the READs that follow (the server runs a connection in order). */
	top->nsub = addr->proto == TE_PROTO_V1 ? 1 : x->nlc;
	per = x->cfg.conns_per_peer / top->nsub;
	for (unsigned i = 0; i < top->nsub; i++) {
		struct dpeer *p = calloc(1, sizeof(*p));
		if (p == NULL) {
			dpdk_peer_close(x, top, -ENOMEM);
			return -ENOMEM;
		}
		p->top = top;
		p->l = &x->lcs[i];
		p->max_conns = addr->proto == TE_PROTO_V1 ? 1 : per > 0 ? per : 1;
		if (p->max_conns > TE_DPDK_MAX_CONNS) {
			p->max_conns = TE_DPDK_MAX_CONNS;
		}
		pthread_mutex_init(&p->lock, NULL);
		top->sub[i] = p;
		run_on_lcore(p->l, register_peer_on_lcore, p);
	}
	*out = top;
	return 0;
}

/* Hand a chain of slices to one lcore's inbox. */
static void
inbox_put(struct dpeer *p, struct te_slice *head, struct te_slice *tail)
{
	struct te_lc *l = p->l;
	bool list;
	tail->next = NULL;
	pthread_mutex_lock(&p->lock);
	if (p->in_tail != NULL) {
		p->in_tail->next = head;
	} else {
		p->in_head = head;
	}
	p->in_tail = tail;
	list = !p->in_listed;
	p->in_listed = true;
	pthread_mutex_unlock(&p->lock);
	if (list) {
		pthread_mutex_lock(&l->inbox_lock);
		TAILQ_INSERT_TAIL(&l->inbox_peers, p, inbox_link);
		pthread_mutex_unlock(&l->inbox_lock);
	}
	atomic_store(&l->inbox_pending, true);
	tide_lcore_wake(l->lc); /* it may be sleeping in an idle spell */
}

static int
dpdk_submit(struct te_xport *x, struct te_xpeer *top, struct te_slice *head)
{
	struct te_slice *heads[TIDE_LCORE_MAX] = {0}, *tails[TIDE_LCORE_MAX] = {0};
	(void)x;
	/* Deal slices round-robin over the peer's lcores. */
	while (head != NULL) {
		struct te_slice *next = head->next;
		unsigned i = top->nsub > 1 ? atomic_fetch_add(&top->rr, 1) % top->nsub : 0;
		head->next = NULL;
		if (tails[i] != NULL) {
			tails[i]->next = head;
		} else {
			heads[i] = head;
		}
		tails[i] = head;
		head = next;
	}
	for (unsigned i = 0; i < top->nsub; i++) {
		if (heads[i] != NULL) {
			inbox_put(top->sub[i], heads[i], tails[i]);
		}
	}
	return 0;
}

static void
dpdk_destroy(struct te_xport *x)
{
	if (x == NULL) {
		return;
	}
	if (x->g != NULL) {
		for (unsigned i = 0; i < x->nlc; i++) {
			if (x->lcs[i].stack != NULL) {
				run_on_lcore(&x->lcs[i], teardown_on_lcore, &x->lcs[i]);
			}
		}
		/* Let RSTs and FINs leave before the lcores stop. */
		usleep(20000);
		tide_lcore_group_stop(x->g);
	}
	for (unsigned i = 0; i < x->nlc; i++) {
		struct te_lc *l = &x->lcs[i];
		if (l->stack != NULL) {
			const struct tide_net_stats *st = tide_net_stats(l->stack);
			TIDE_LOG(INFO,
				 "lcore %u user-space TCP: rx_frames %" PRIu64 " tx_frames %" PRIu64
				 " retrans %" PRIu64 " rto %" PRIu64 " resets %" PRIu64
				 " timeouts %" PRIu64,
				 i, st->rx_frames, st->tx_frames, st->tcp_retrans_segs,
				 st->tcp_rto_fired, st->tcp_conn_resets, st->tcp_conn_timeouts);
			/* Where stalls come from: frames the device refused or had no
			 * buffer for, loss recovery, and what the receiver saw. */
			TIDE_LOG(INFO,
				 "lcore %u user-space TCP: tx_dropped %" PRIu64
				 " tx_deferred %" PRIu64 " tx_nobufs %" PRIu64
				 " fast_retrans %" PRIu64 " sack_recoveries %" PRIu64
				 " sack_retrans %" PRIu64 " lost_retrans %" PRIu64 " tlp %" PRIu64
				 " dup_acks %" PRIu64 " rx_ooo %" PRIu64 " rx_ooo_dropped %" PRIu64
				 " rx_dup_bytes %" PRIu64 " out_of_window %" PRIu64
				 " window_probes %" PRIu64,
				 i, st->tx_dropped, st->tx_deferred, st->tx_nobufs,
				 st->tcp_fast_retrans, st->tcp_sack_recoveries,
				 st->tcp_sack_retrans_segs, st->tcp_lost_retrans,
				 st->tcp_tlp_probes, st->tcp_dup_acks, st->tcp_rx_ooo_segs,
				 st->tcp_rx_ooo_dropped, st->tcp_rx_dup_bytes,
				 st->tcp_rx_out_of_window, st->tcp_window_probes);
		}
		if (l->nd_up) {
			tide_eth_netdev_fini(&l->nd);
		}
		tide_net_stack_destroy(l->stack);
	}
	tide_lcore_group_destroy(x->g);
	if (x->port != NULL) {
		struct tide_eth_port_stats ps;
		unsigned held;
		if (tide_eth_port_stats(x->port, &ps) == 0) {
			TIDE_LOG(INFO,
				 "port: ipackets %" PRIu64 " opackets %" PRIu64 " imissed %" PRIu64
				 " ierrors %" PRIu64 " oerrors %" PRIu64 " rx_nombuf %" PRIu64,
				 ps.ipackets, ps.opackets, ps.imissed, ps.ierrors, ps.oerrors,
				 ps.rx_nombuf);
		}
		held = tide_eth_port_close(x->port);
		if (held != 0) {
			TIDE_LOG(ERR, "%u packet buffers still held at port close", held);
		}
	}
	/*
	 * Sends the stack could not complete end here, once the port is closed
	 * and no frame references their memory: slices complete, server sessions
	 * release their check() references (on this thread: the lcores are gone).
	 */
	for (unsigned i = 0; i < x->nlc; i++) {
		struct te_lc *l = &x->lcs[i];
		for (struct dconn *c = LIST_FIRST(&l->dead), *next; c != NULL; c = next) {
			next = LIST_NEXT(c, link);
			c->zc_done = UINT64_MAX;
			conn_release_held(c);
			LIST_REMOVE(c, link);
			te_srv_sess_destroy(c->srv);
			free(c);
		}
		if (l->x != NULL) {
			pthread_mutex_destroy(&l->inbox_lock);
		}
	}
	tide_eal_fini();
	free(x);
}

static void
dpdk_data_host(const struct te_xport *x, char *host, size_t len)
{
	snprintf(host, len, "%s", x->ip_str);
}

static struct tide_lcore_group *
dpdk_lcores(struct te_xport *x)
{
	return x->g;
}

const struct te_xport_ops te_tcp_dpdk_ops = {
	.name = "tcp-dpdk",
	.create = dpdk_create,
	.data_port = dpdk_data_port,
	.data_host = dpdk_data_host,
	.peer_open = dpdk_peer_open,
	.peer_close = dpdk_peer_close,
	.submit = dpdk_submit,
	.destroy = dpdk_destroy,
	.lcores = dpdk_lcores,
};
