/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine's user-space TCP transport: the same sessions as the
 * kernel-socket transport (te_sess.h), driven by Tide's TCP/IP stack on a
 * pinned DPDK lcore instead of by epoll.
 *
 * The node file gives the device, address and lcores (TIDE_DPDK_DEVICE,
 * TIDE_DATA_IP, ...). One stack runs on one polling lcore; it owns every
 * connection, session and peer queue, so nothing below is locked except the
 * inbox through which application threads hand slices over. Application
 * threads reach the lcore only through that inbox and tide_lcore_post()
 * (peer close, teardown), and wait for posted work with a flag.
 *
 * The EAL is process-wide: one user-space transport per process.
 *
 * Bounds: TE_DPDK_MAX_CONNS connections per peer; a client connection has at
 * most max_inflight slices (64) and 8 MiB in flight; a server connection
 * buffers nothing (WRITE payload is copied once from the stack's receive
 * buffer into registered memory, READ data is sent from registered memory).
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

struct dconn;
LIST_HEAD(dconn_list, dconn);

struct te_xpeer {
	struct te_xport *x;
	struct te_peer_addr a;
	uint32_t ip; /* host order */
	/* Inbox: slices handed over by application threads (lock), then the
	 * lcore's own queue of slices not yet in a session. */
	pthread_mutex_t lock;
	struct te_slice *in_head, *in_tail;
	bool in_listed; /* on x->inbox_peers */
	TAILQ_ENTRY(te_xpeer) inbox_link;
	struct te_slice *q_head, *q_tail;
	struct dconn *conns[TE_DPDK_MAX_CONNS];
	unsigned nconns, rr;
	int last_err; /* error of the last connection that died (to fail the queue) */
	LIST_ENTRY(te_xpeer) link;
};

struct dconn {
	struct te_xport *x;
	struct tide_net_conn *nc;
	struct te_xpeer *peer; /* client connections */
	struct te_srv_sess *srv;
	struct te_cli_sess *cli;
	bool connected;
	bool rx_held;    /* on_recv consumed less than offered: resume once output drained */
	bool tx_blocked; /* the stack's send buffer is full: wait for WRITABLE */
	bool dead;
	uint64_t opened_ns, progress_ns;
	LIST_ENTRY(dconn) link;
};

struct te_xport {
	struct te_xport_cfg cfg;
	struct tide_nodeenv ne;
	struct tide_eth_port *port;
	struct tide_eth_netdev nd;
	bool nd_up;
	struct tide_net_stack *stack;
	struct tide_net_listener *listener;
	struct tide_lcore_group *g;
	struct tide_lcore *lc;
	uint16_t data_port;
	uint32_t ip;
	char ip_str[INET_ADDRSTRLEN];
	uint64_t next_tick;

	pthread_mutex_t inbox_lock;
	TAILQ_HEAD(, te_xpeer) inbox_peers;
	atomic_bool inbox_pending;

	struct dconn_list conns; /* every live connection (lcore only) */
	struct dconn_list dead;  /* killed inside callbacks; freed by the poller */
	LIST_HEAD(, te_xpeer) peers;
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- running work on the lcore ---------------------------------------- */

struct sync_msg {
	void (*fn)(void *arg);
	void *arg;
	atomic_bool done;
};

static void
sync_trampoline(void *arg)
{
	struct sync_msg *m = arg;
	m->fn(m->arg);
	atomic_store(&m->done, true);
}

/* Run fn(arg) on the lcore and wait for it (the lcore never waits on us). */
static int
run_on_lcore(struct te_xport *x, void (*fn)(void *), void *arg)
{
	struct sync_msg m = {.fn = fn, .arg = arg};
	int rc;
	while ((rc = tide_lcore_post(x->lc, sync_trampoline, &m)) == -EAGAIN) {
		usleep(100);
	}
	if (rc != 0) {
		return rc;
	}
	while (!atomic_load(&m.done)) {
		usleep(50);
	}
	return 0;
}

/* ---- connections (lcore only) ------------------------------------------ */

static void conn_kill(struct dconn *c, int err);
static void peer_pump(struct te_xpeer *p);

/* Send what the session has ready, as far as the stack's buffer allows. */
static void
conn_flush(struct dconn *c, uint64_t now)
{
	struct iovec iov[TE_DPDK_IOV];
	while (!c->dead && c->connected && !c->tx_blocked) {
		unsigned n = c->srv ? te_srv_sess_tx_iov(c->srv, iov, TE_DPDK_IOV)
				    : te_cli_sess_tx_iov(c->cli, iov, TE_DPDK_IOV);
		size_t total = 0;
		bool short_send = false;
		if (n == 0) {
			break;
		}
		for (unsigned i = 0; i < n; i++) {
			ssize_t sent = tide_net_send(c->nc, iov[i].iov_base, iov[i].iov_len, now);
			if (sent < 0) {
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
			} else {
				te_cli_sess_tx_advance(c->cli, total);
			}
		}
		if (short_send) {
			c->tx_blocked = true; /* TIDE_NET_EV_WRITABLE follows */
		}
	}
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

static void
conns_reap(struct te_xport *x)
{
	struct dconn *c;
	while ((c = LIST_FIRST(&x->dead)) != NULL) {
		LIST_REMOVE(c, link);
		free(c);
	}
}

static size_t
conn_on_recv(struct tide_net_conn *nc, void *arg, const uint8_t *data, size_t len)
{
	struct dconn *c = arg;
	uint64_t now = mono_ns();
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
	uint64_t now = mono_ns();
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
	struct te_xpeer *p = c->peer;
	if (c->dead) {
		return;
	}
	c->dead = true;
	LIST_REMOVE(c, link);
	LIST_INSERT_HEAD(&c->x->dead, c, link);
	if (c->cli != NULL) {
		te_cli_sess_fail(c->cli, err);
		te_cli_sess_destroy(c->cli, err);
		c->cli = NULL;
	}
	if (c->srv != NULL) {
		te_srv_sess_destroy(c->srv);
		c->srv = NULL;
	}
	if (c->nc != NULL) {
		tide_net_conn_set_cbs(c->nc, NULL, NULL);
		if (err == -EFAULT || err == -ESTALE || err == 0) {
			tide_net_close(c->nc, now); /* the framing's orderly close */
		} else {
			tide_net_abort(c->nc, now);
		}
		c->nc = NULL;
	}
	if (p != NULL) {
		for (unsigned i = 0; i < p->nconns; i++) {
			if (p->conns[i] == c) {
				p->conns[i] = p->conns[--p->nconns];
				break;
			}
		}
		p->last_err = err;
	}
	if (p != NULL && p->nconns == 0 && p->q_head != NULL && err != -EFAULT) {
		/* Nobody left to carry the queue: fail it now rather than loop on
		 * reconnects; the core re-fetches the descriptor on the next submit. */
		struct te_slice *s = p->q_head;
		p->q_head = p->q_tail = NULL;
		while (s != NULL) {
			struct te_slice *next = s->next;
			te_slice_done(s, err);
			s = next;
		}
	}
}

static struct dconn *
conn_new(struct te_xport *x)
{
	struct dconn *c = calloc(1, sizeof(*c));
	if (c != NULL) {
		c->x = x;
		c->opened_ns = c->progress_ns = mono_ns();
		LIST_INSERT_HEAD(&x->conns, c, link);
	}
	return c;
}

static int
srv_accept(void *arg, struct tide_net_conn *nc)
{
	struct te_xport *x = arg;
	struct dconn *c = conn_new(x);
	if (c == NULL) {
		return -ENOMEM;
	}
	if (te_srv_sess_create(&x->cfg.srv, &c->srv) != 0) {
		LIST_REMOVE(c, link);
		free(c);
		return -ENOMEM;
	}
	c->nc = nc;
	c->connected = true;
	tide_net_conn_set_cbs(nc, &conn_cbs, c);
	return 0;
}

static void
cli_done(void *arg, struct te_slice *s, int err)
{
	(void)arg;
	te_slice_done(s, err);
}

static struct dconn *
peer_connect(struct te_xpeer *p)
{
	struct te_xport *x = p->x;
	struct te_cli_sess_cfg cc = {.proto = p->a.proto,
				     .instance = p->a.proto == TE_PROTO_NATIVE ? p->a.instance : 0,
				     .max_inflight =
					     p->a.proto == TE_PROTO_NATIVE ? TE_DPDK_INFLIGHT : 1,
				     .max_inflight_bytes = TE_DPDK_INFLIGHT_BYTES,
				     .done = cli_done,
				     .arg = p};
	struct dconn *c = conn_new(x);
	int rc;
	if (c == NULL) {
		return NULL;
	}
	c->peer = p;
	if (te_cli_sess_create(&cc, &c->cli) != 0) {
		LIST_REMOVE(c, link);
		free(c);
		return NULL;
	}
	rc = tide_net_connect(x->stack, p->ip, p->a.data_port, &conn_cbs, c, mono_ns(), &c->nc);
	if (rc != 0) {
		TIDE_LOG(ERR, "connect to %s:%u: %s", p->a.host, p->a.data_port, strerror(-rc));
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
peer_pump(struct te_xpeer *p)
{
	struct te_xport *x = p->x;
	uint64_t now = mono_ns();
	/* v1 WRITEs are never acknowledged: one connection keeps them ordered with the
	 * READs that follow (the server runs a connection in order). */
	unsigned max_conns = p->a.proto == TE_PROTO_V1 ? 1 : x->cfg.conns_per_peer;
	while (p->q_head != NULL) {
		struct te_slice *s = p->q_head;
		struct dconn *c = NULL;
		/* Prefer a fresh connection while below the limit and every existing one
		 * is busy, so a large request spreads across connections. */
		for (unsigned k = 0; k < p->nconns; k++) {
			struct dconn *cand = p->conns[(p->rr + k) % p->nconns];
			if (te_cli_sess_can_submit(cand->cli, s->len) &&
			    (te_cli_sess_inflight(cand->cli) == 0 || p->nconns >= max_conns)) {
				c = cand;
				p->rr = (p->rr + k + 1) % p->nconns;
				break;
			}
		}
		if (c == NULL && p->nconns < max_conns) {
			c = peer_connect(p);
			if (c == NULL) {
				if (p->nconns == 0) {
					int err = p->last_err ? p->last_err : -ENOMEM;
					p->q_head = p->q_tail = NULL;
					while (s != NULL) {
						struct te_slice *next = s->next;
						te_slice_done(s, err);
						s = next;
					}
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
inbox_drain(struct te_xport *x)
{
	TAILQ_HEAD(, te_xpeer) todo = TAILQ_HEAD_INITIALIZER(todo);
	struct te_xpeer *p;
	if (!atomic_exchange(&x->inbox_pending, false)) {
		return;
	}
	pthread_mutex_lock(&x->inbox_lock);
	TAILQ_CONCAT(&todo, &x->inbox_peers, inbox_link);
	pthread_mutex_unlock(&x->inbox_lock);
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

/* Progress timeouts and held receive data. */
static void
conns_tick(struct te_xport *x, uint64_t now)
{
	struct dconn *c, *next;
	uint64_t io = (uint64_t)x->cfg.io_timeout_ms * 1000000ull;
	uint64_t co = (uint64_t)x->cfg.connect_timeout_ms * 1000000ull;
	for (c = LIST_FIRST(&x->conns); c != NULL; c = next) {
		next = LIST_NEXT(c, link);
		if (!c->connected && now > c->opened_ns && now - c->opened_ns > co) {
			TIDE_LOG(WARN, "data connection to %s:%u: no answer in %u ms",
				 c->peer ? c->peer->a.host : "?",
				 c->peer ? c->peer->a.data_port : 0, x->cfg.connect_timeout_ms);
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
				 "queued %u/%u, snd_wnd %u, cwnd %u, rto %" PRIu64
				 " us, tx_blocked %d, "
				 "rx_held %d)",
				 c->srv ? "server" : "client", ci.lport, ci.rport,
				 x->cfg.io_timeout_ms, tide_net_tcp_state_name(ci.state),
				 ci.snd_queued, ci.rcv_queued, ci.snd_wnd, ci.cwnd,
				 ci.rto_ns / 1000, c->tx_blocked, c->rx_held);
			conn_kill(c, -ETIMEDOUT);
		}
	}
}

static void
resume_held(struct te_xport *x, uint64_t now)
{
	struct dconn *c, *next;
	for (c = LIST_FIRST(&x->conns); c != NULL; c = next) {
		struct iovec iov[1];
		next = LIST_NEXT(c, link);
		if (!c->rx_held || c->tx_blocked) {
			continue;
		}
		if ((c->srv ? te_srv_sess_tx_iov(c->srv, iov, 1)
			    : te_cli_sess_tx_iov(c->cli, iov, 1)) == 0) {
			c->rx_held = false;
			tide_net_recv_resume(c->nc, now); /* may kill c via callbacks */
		}
	}
}

static int
dpdk_poll(void *ctx, uint64_t now)
{
	struct te_xport *x = ctx;
	int work = (int)tide_eth_netdev_poll(&x->nd, x->stack, now);
	inbox_drain(x);
	resume_held(x, now);
	work += tide_net_timers_run(x->stack, now);
	if (now >= x->next_tick) {
		x->next_tick = now + TE_DPDK_TICK_NS;
		/* Callbacks above stamped connections with later clock reads than `now`. */
		conns_tick(x, mono_ns());
	}
	conns_reap(x);
	return work;
}

/* ---- setup and teardown -------------------------------------------------- */

struct setup_arg {
	struct te_xport *x;
	struct tide_net_opts *no;
	int rc;
};

static void
setup_on_lcore(void *arg)
{
	struct setup_arg *a = arg;
	struct te_xport *x = a->x;
	a->rc = tide_net_stack_create(a->no, mono_ns(), &x->stack);
	if (a->rc == 0) {
		a->rc = tide_net_listen(x->stack, x->data_port, 1024, srv_accept, x, &x->listener);
	}
	if (a->rc == 0) {
		a->rc = tide_lcore_poller_add(x->lc, dpdk_poll, x);
	}
}

static void
teardown_on_lcore(void *arg)
{
	struct te_xport *x = arg;
	struct te_xpeer *p;
	inbox_drain(x);
	LIST_FOREACH(p, &x->peers, link)
	{
		struct te_slice *s = p->q_head;
		p->q_head = p->q_tail = NULL;
		while (s != NULL) {
			struct te_slice *next = s->next;
			te_slice_done(s, -ECANCELED);
			s = next;
		}
	}
	while (!LIST_EMPTY(&x->conns)) {
		conn_kill(LIST_FIRST(&x->conns), -ECANCELED);
	}
	tide_net_listener_close(x->listener, mono_ns());
	x->listener = NULL;
	conns_reap(x);
}

static void dpdk_destroy(struct te_xport *x);

static int
dpdk_create(const struct te_xport_cfg *cfg, struct te_xport **out)
{
	struct te_xport *x = calloc(1, sizeof(*x));
	struct tide_eal_opts eo;
	struct tide_eal_info ei;
	struct tide_eth_port_opts po = {0};
	struct tide_eth_fault_opts fo = {0};
	struct tide_lcore_opts lo;
	struct tide_net_opts no;
	char err[2048] = "", devname[128];
	int cpus[TIDE_LCORE_MAX];
	unsigned ncpus = 0;
	int rc;

	if (x == NULL) {
		return -ENOMEM;
	}
	x->cfg = *cfg;
	pthread_mutex_init(&x->inbox_lock, NULL);
	TAILQ_INIT(&x->inbox_peers);
	LIST_INIT(&x->conns);
	LIST_INIT(&x->dead);
	LIST_INIT(&x->peers);
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
	rc = tide_lcore_cpus_pick(x->ne.lcores, x->ne.lcores_per_numa, cpus, TIDE_LCORE_MAX,
				  &ncpus);
	if (rc != 0) {
		TIDE_LOG(ERR, "no CPU for the polling lcore (TIDE_LCORES='%s'): %s", x->ne.lcores,
			 strerror(-rc));
		free(x);
		return rc;
	}
	tide_node_eal_opts(&x->ne, "tide-te", true, &eo);
	rc = tide_eal_init(&eo, &ei);
	if (rc != 0) {
		TIDE_LOG(ERR, "DPDK EAL did not start: %s", strerror(-rc));
		free(x);
		return rc;
	}
	snprintf(devname, sizeof(devname), "%.*s", (int)strcspn(x->ne.dpdk_device, ","),
		 x->ne.dpdk_device);
	po.nb_rxd = (uint16_t)x->ne.rxd;
	po.nb_txd = (uint16_t)x->ne.txd;
	if (x->ne.mtu > 1500) {
		/* One frame per mbuf: frame + Ethernet header + the 128-byte headroom. */
		po.mbuf_dataroom = (uint16_t)(x->ne.mtu + 14 + 128 + 64);
	}
	rc = tide_eth_port_open(devname, &po, &x->port);
	if (rc != 0) {
		TIDE_LOG(ERR, "cannot open %s: %s", devname, strerror(-rc));
		goto fail;
	}
	if (x->ne.fault.enabled) {
		fo.drop = x->ne.fault.drop;
		fo.dup = x->ne.fault.dup;
		fo.reorder = x->ne.fault.reorder;
		fo.corrupt = x->ne.fault.corrupt;
		fo.delay_us = x->ne.fault.delay_us;
		fo.seed = x->ne.fault.seed != 0 ? x->ne.fault.seed : mono_ns();
		fo.rx = x->ne.fault.dir != TIDE_NODEENV_FAULT_TX;
		fo.tx = x->ne.fault.dir != TIDE_NODEENV_FAULT_RX;
	}
	rc = tide_eth_netdev_init(&x->nd, x->port, 0, x->ne.fault.enabled ? &fo : NULL);
	if (rc != 0) {
		goto fail;
	}
	x->nd_up = true;
	tide_net_opts_init(&no, sizeof(no));
	no.dev_ops = &tide_eth_net_dev_ops;
	no.dev = &x->nd;
	if (x->ne.data_mac_set) {
		memcpy(no.mac, x->ne.data_mac, 6);
	} else {
		tide_eth_port_mac(x->port, no.mac);
	}
	x->ip = ntohl(x->ne.data_ip.s_addr);
	inet_ntop(AF_INET, &x->ne.data_ip, x->ip_str, sizeof(x->ip_str));
	no.ip = x->ip;
	no.netmask = ntohl(x->ne.data_netmask.s_addr);
	no.gateway = x->ne.gateway_set ? ntohl(x->ne.gateway.s_addr) : 0;
	no.mtu = (uint16_t)x->ne.mtu;
	no.tcp_sndbuf = no.tcp_rcvbuf = 4u << 20;
	no.tcp_rto_min_us = x->ne.tcp_rto_min_us;
	no.tcp_max_retries = (uint8_t)x->ne.tcp_max_retries;
	no.tx_offloads = tide_eth_netdev_tx_offloads(&x->nd);
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

	tide_lcore_opts_init(&lo, sizeof(lo));
	lo.idle = x->ne.idle == TIDE_NODEENV_IDLE_BUSY ? TIDE_LCORE_IDLE_BUSY
						       : TIDE_LCORE_IDLE_ADAPTIVE;
	lo.idle_sleep_us = x->ne.idle_sleep_us;
	lo.thread_init = tide_eal_thread_register;
	rc = tide_lcore_group_create(&lo, cpus, 1, &x->g);
	if (rc == 0) {
		rc = tide_lcore_group_start(x->g);
	}
	if (rc != 0) {
		TIDE_LOG(ERR, "polling lcore did not start: %s", strerror(-rc));
		goto fail;
	}
	x->lc = tide_lcore_get(x->g, 0);
	struct setup_arg sa = {.x = x, .no = &no};
	rc = run_on_lcore(x, setup_on_lcore, &sa);
	if (rc == 0) {
		rc = sa.rc;
	}
	if (rc != 0) {
		TIDE_LOG(ERR, "user-space TCP stack setup failed: %s", strerror(-rc));
		goto fail;
	}
	TIDE_LOG(INFO, "user-space TCP on %s, %s:%u, lcore on CPU %d, %s", x->ne.dpdk_device,
		 x->ip_str, x->data_port, cpus[0], ei.hugepages ? "hugepages" : "no hugepages");
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

static int
dpdk_peer_open(struct te_xport *x, const struct te_peer_addr *addr, struct te_xpeer **out)
{
	struct te_xpeer *p = calloc(1, sizeof(*p));
	struct in_addr ia;
	if (p == NULL) {
		return -ENOMEM;
	}
	if (inet_pton(AF_INET, addr->host, &ia) != 1) {
		struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
		if (getaddrinfo(addr->host, NULL, &hints, &res) != 0 || res == NULL) {
			TIDE_LOG(ERR, "peer host '%s' does not resolve to an IPv4 address",
				 addr->host);
			free(p);
			return -EHOSTUNREACH;
		}
		ia = ((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr;
		freeaddrinfo(res);
	}
	p->x = x;
	p->a = *addr;
	p->ip = ntohl(ia.s_addr);
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

struct close_arg {
	struct te_xpeer *p;
	int err;
};

static void
peer_close_on_lcore(void *arg)
{
	struct close_arg *a = arg;
	struct te_xpeer *p = a->p;
	struct te_slice *s;
	inbox_drain(p->x); /* nothing of p may stay in the inbox */
	while (p->nconns > 0) {
		conn_kill(p->conns[0], a->err);
	}
	s = p->q_head;
	p->q_head = p->q_tail = NULL;
	while (s != NULL) {
		struct te_slice *next = s->next;
		te_slice_done(s, a->err);
		s = next;
	}
	if (p->link.le_prev != NULL) {
		LIST_REMOVE(p, link);
	}
}

static void
dpdk_peer_close(struct te_xport *x, struct te_xpeer *p, int err)
{
	struct close_arg a = {.p = p, .err = err};
	if (p == NULL) {
		return;
	}
	run_on_lcore(x, peer_close_on_lcore, &a);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int
dpdk_submit(struct te_xport *x, struct te_xpeer *p, struct te_slice *head)
{
	struct te_slice *tail = head;
	bool list;
	if (head == NULL) {
		return 0;
	}
	while (tail->next != NULL) {
		tail = tail->next;
	}
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
		pthread_mutex_lock(&x->inbox_lock);
		TAILQ_INSERT_TAIL(&x->inbox_peers, p, inbox_link);
		pthread_mutex_unlock(&x->inbox_lock);
	}
	atomic_store(&x->inbox_pending, true);
	return 0;
}

static void
register_peer_on_lcore(void *arg)
{
	struct te_xpeer *p = arg;
	LIST_INSERT_HEAD(&p->x->peers, p, link);
}

static int
dpdk_peer_open_reg(struct te_xport *x, const struct te_peer_addr *addr, struct te_xpeer **out)
{
	int rc = dpdk_peer_open(x, addr, out);
	if (rc == 0) {
		rc = run_on_lcore(x, register_peer_on_lcore, *out);
	}
	return rc;
}

static void
dpdk_destroy(struct te_xport *x)
{
	if (x == NULL) {
		return;
	}
	if (x->g != NULL) {
		if (x->stack != NULL) {
			run_on_lcore(x, teardown_on_lcore, x);
			/* Let RSTs and FINs leave before the lcore stops. */
			usleep(20000);
		}
		tide_lcore_group_stop(x->g);
	}
	if (x->stack != NULL) {
		const struct tide_net_stats *st = tide_net_stats(x->stack);
		TIDE_LOG(INFO,
			 "user-space TCP counters: rx_frames %" PRIu64 " tx_frames %" PRIu64
			 " tx_nobufs %" PRIu64 " tx_dropped %" PRIu64 " retrans %" PRIu64
			 " rto %" PRIu64 " out_of_window %" PRIu64 " window_probes %" PRIu64
			 " resets %" PRIu64 " timeouts %" PRIu64,
			 st->rx_frames, st->tx_frames, st->tx_nobufs, st->tx_dropped,
			 st->tcp_retrans_segs, st->tcp_rto_fired, st->tcp_rx_out_of_window,
			 st->tcp_window_probes, st->tcp_conn_resets, st->tcp_conn_timeouts);
	}
	if (x->nd_up) {
		tide_eth_netdev_fini(&x->nd);
	}
	tide_net_stack_destroy(x->stack);
	tide_lcore_group_destroy(x->g);
	if (x->port != NULL) {
		unsigned held = tide_eth_port_close(x->port);
		if (held != 0) {
			TIDE_LOG(ERR, "%u packet buffers still held at port close", held);
		}
	}
	tide_eal_fini();
	pthread_mutex_destroy(&x->inbox_lock);
	free(x);
}

static void
dpdk_data_host(const struct te_xport *x, char *host, size_t len)
{
	snprintf(host, len, "%s", x->ip_str);
}

const struct te_xport_ops te_tcp_dpdk_ops = {
	.name = "tcp-dpdk",
	.create = dpdk_create,
	.data_port = dpdk_data_port,
	.data_host = dpdk_data_host,
	.peer_open = dpdk_peer_open_reg,
	.peer_close = dpdk_peer_close,
	.submit = dpdk_submit,
	.destroy = dpdk_destroy,
};
