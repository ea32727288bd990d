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
#include "tide_clock.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_net.h"
#include "tide_node_rt.h"
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
	struct tide_net_stack *stack; /* the runtime's stack of this lcore */
	struct tide_net_listener *listener;
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
	struct tide_node_rt *rt; /* EAL, port, lcores, stacks, data address */
	unsigned nlc;
	struct te_lc lcs[TIDE_LCORE_MAX];
	uint16_t data_port;
};

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
	uint64_t now = tide_mono_ns();
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
		c->opened_ns = c->progress_ns = tide_mono_ns();
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
	rc = tide_net_connect(p->l->stack, top->ip, top->a.data_port, &conn_cbs, c, tide_mono_ns(),
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

/* The runtime's lcore_pre hook: the iteration's clock, before received
 * frames reach the stack, so callbacks stamp with it (see te_lc.now). */
static void
dpdk_pre(void *arg, unsigned idx, uint64_t now)
{
	((struct te_xport *)arg)->lcs[idx].now = now;
}

/* The runtime's lcore_poll hook: it runs after received frames went to the
 * stack and before the stack's timers. */
static int
dpdk_poll(void *arg, unsigned idx, uint64_t now)
{
	struct te_lc *l = &((struct te_xport *)arg)->lcs[idx];

	inbox_drain(l);
	resume_held(l, now);
	if (now >= l->next_tick) {
		l->next_tick = now + TE_DPDK_TICK_NS;
		/* A fresh read, once per tick: stamps above carry this iteration's clock. */
		conns_tick(l, tide_mono_ns());
	}
	conns_reap(l);
	return 0;
}

/* ---- setup and teardown -------------------------------------------------- */

/* The runtime's lcore_init hook: on lcore idx, its stack just created. */
static int
setup_on_lcore(void *arg, unsigned idx, struct tide_net_stack *stack, uint64_t now)
{
	struct te_lc *l = &((struct te_xport *)arg)->lcs[idx];

	l->lc = tide_lcore_current();
	l->stack = stack;
	l->now = now;
	return tide_net_listen(stack, l->x->data_port, 1024, srv_accept, l, &l->listener);
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
	tide_net_listener_close(l->listener, tide_mono_ns());
	l->listener = NULL;
	conns_reap(l);
}

static void dpdk_destroy(struct te_xport *x);

static int
dpdk_create(const struct te_xport_cfg *cfg, struct te_xport **out)
{
	struct te_xport *x = calloc(1, sizeof(*x));
	struct tide_node_rt_opts ro = {0};
	const struct tide_node_rt_info *ri;
	char err[2048] = "";
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
	if (cfg->data_port != 0) {
		x->data_port = cfg->data_port;
	} else {
		/* The stack is ours alone on this address: any port is free. */
		uint16_t r = 0;
		if (getrandom(&r, sizeof(r), 0) != sizeof(r)) {
			r = (uint16_t)tide_mono_ns();
		}
		x->data_port = (uint16_t)(15000 + r % 2000);
	}
	for (unsigned i = 0; i < TIDE_LCORE_MAX; i++) {
		struct te_lc *l = &x->lcs[i];
		l->x = x;
		l->idx = i;
		pthread_mutex_init(&l->inbox_lock, NULL);
		TAILQ_INIT(&l->inbox_peers);
		LIST_INIT(&l->conns);
		LIST_INIT(&l->dead);
		LIST_INIT(&l->peers);
	}
	ro.prog = "tide-te";
	ro.tcp_buf = 4u << 20;
	ro.lcore_init = setup_on_lcore;
	ro.lcore_pre = dpdk_pre;
	ro.lcore_poll = dpdk_poll;
	ro.arg = x;
	rc = tide_node_rt_start(&x->ne, &ro, &x->rt);
	if (rc != 0) {
		/* The runtime logged what was wrong and undid what it started. */
		dpdk_destroy(x);
		return rc;
	}
	ri = tide_node_rt_info(x->rt);
	x->nlc = ri->nlcores;
	/* The runtime logged the device, lcores and memory. */
	TIDE_LOG(INFO, "tcp-dpdk: data server on %s:%u", ri->ip_str, x->data_port);
	*out = x;
	return 0;
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
	if (x->rt != NULL) {
		for (unsigned i = 0; i < x->nlc; i++) {
			if (x->lcs[i].stack != NULL) {
				run_on_lcore(&x->lcs[i], teardown_on_lcore, &x->lcs[i]);
			}
		}
		/* Let RSTs and FINs leave before the lcores stop. */
		usleep(20000);
		/* Logs the stacks' and the port's counters; a leak is logged there. */
		(void)tide_node_rt_destroy(x->rt);
		x->rt = NULL;
	}
	/*
	 * Sends the stack could not complete end here, once the port is closed
	 * and no frame references their memory: slices complete, server sessions
	 * release their check() references (on this thread: the lcores are gone).
	 */
	for (unsigned i = 0; i < TIDE_LCORE_MAX; i++) {
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
	free(x);
}

static void
dpdk_data_host(const struct te_xport *x, char *host, size_t len)
{
	snprintf(host, len, "%s", tide_node_rt_info(x->rt)->ip_str);
}

static struct tide_lcore_group *
dpdk_lcores(struct te_xport *x)
{
	return tide_node_rt_lcores(x->rt);
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
