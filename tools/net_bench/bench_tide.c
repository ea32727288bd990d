/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Tide side: one process per endpoint, each with its own EAL, a
 * net_memif port and one user-space stack on one pinned polling worker.
 * The benchmark server is the memif server (the coordinator starts it
 * first); teardown is two-phase so neither side polls while the other
 * removes its end of the memif link (a DPDK 22.11 crash otherwise).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net_bench.h"
#include "tide_eth_node.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_net.h"
#include "tide_node_rt.h"
#include "tide_nodeenv.h"

#define SERVER_IP   0x0a4d0001u /* 10.77.0.1 */
#define BENCH_PORT  7001
#define MEMIF_BSIZE 9216 /* one 9000-byte-MTU frame per memif descriptor */
#define ZC_MIN      4096 /* smaller sends are copied */

struct tide_side {
	struct nb_endpoint ep;
	struct tide_node_rt *rt;
	struct tide_net_stack *stack;
	struct tide_net_listener *listener;
	bool server, link_up;
	uint64_t next_link_check;
	bool zc;
	uint32_t zc_limit;             /* zero-copy bytes outstanding per flow */
	uint64_t zc_out[NB_MAX_FLOWS]; /* per flow slot */
	uint64_t zc_sends, zc_failed;
};

static struct tide_side *side; /* the process's one endpoint, for completions */

static size_t
cb_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	(void)c;
	nb_on_data(arg, d, n);
	return n;
}

static void
cb_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct nb_flow *f = arg;

	(void)c;
	switch (ev) {
	case TIDE_NET_EV_CONNECTED:
		nb_on_connected(f);
		break;
	case TIDE_NET_EV_WRITABLE:
		nb_on_writable(f);
		break;
	case TIDE_NET_EV_PEER_CLOSED:
		nb_on_peer_closed(f);
		break;
	case TIDE_NET_EV_CLOSED:
		if (!f->closed)
			nb_on_error(f, reason != 0 ? reason : -ECONNRESET);
		else if (f->conn != NULL)
			tide_net_close(f->conn, nb_now_ns());
		f->conn = NULL;
		break;
	}
}

static const struct tide_net_conn_cbs conn_cbs = {.on_recv = cb_recv, .on_event = cb_event};

/* Cookie: flow slot << 32 | length. A slot's counter only limits what is
 * outstanding, so completions of a previous connection in the slot balance it. */
static void
zc_done(void *cookie, int status)
{
	uint64_t v = (uint64_t)(uintptr_t)cookie;
	unsigned idx = (unsigned)(v >> 32);
	struct nb_flow *f = &side->ep.flows[idx];

	side->zc_out[idx] -= (uint32_t)v;
	if (status != 0)
		side->zc_failed++;
	if (f->in_use && f->blocked && f->conn != NULL)
		nb_on_writable(f);
}

static ssize_t
x_send(struct nb_endpoint *ep, struct nb_flow *f, const void *p, size_t n)
{
	struct tide_side *s = ep->xctx;
	const uint8_t *b = p;

	if (f->conn == NULL)
		return -EPIPE;
	/* Only the pattern is immutable for as long as a zero-copy send needs it. */
	if (s->zc && n >= ZC_MIN && b >= nb_pattern && b + n <= nb_pattern + 2 * NB_PAT_PERIOD) {
		unsigned idx = (unsigned)(f - ep->flows);
		ssize_t k;

		if (s->zc_out[idx] >= s->zc_limit)
			return 0;
		if (n > s->zc_limit)
			n = s->zc_limit;
		k = tide_net_send_zc(f->conn, p, n, zc_done,
				     (void *)(uintptr_t)((uint64_t)idx << 32 | n), nb_now_ns());
		if (k == -EAGAIN)
			return 0;
		if (k > 0) {
			s->zc_out[idx] += (uint64_t)k;
			s->zc_sends++;
		}
		return k;
	}
	return tide_net_send(f->conn, p, n, nb_now_ns());
}

static int
x_connect(struct nb_endpoint *ep, struct nb_flow *f)
{
	struct tide_side *s = ep->xctx;
	struct tide_net_conn *c = NULL;
	int rc = tide_net_connect(s->stack, SERVER_IP, BENCH_PORT, &conn_cbs, f, nb_now_ns(), &c);

	f->conn = c;
	return rc;
}

static void
x_close(struct nb_endpoint *ep, struct nb_flow *f)
{
	(void)ep;
	if (f->conn != NULL)
		tide_net_close(f->conn, nb_now_ns());
	f->conn = NULL;
}

static const struct nb_xport_ops tide_ops = {
	.send = x_send, .connect = x_connect, .close = x_close};

static int
on_accept(void *arg, struct tide_net_conn *conn)
{
	struct tide_side *s = arg;
	struct nb_flow *f = nb_flow_alloc(&s->ep);

	if (f == NULL)
		return -ENOSPC;
	f->conn = conn;
	tide_net_conn_set_cbs(conn, &conn_cbs, f);
	return 0;
}

/* The runtime's lcore_poll hook: after received frames, before timers. */
static int
side_poll(void *arg, unsigned idx, uint64_t now)
{
	struct tide_side *s = arg;

	(void)idx;
	if (!s->link_up) {
		/* The client connects only once memif is up, so no SYN waits for
		 * an RTO; the link query is rate-limited while down. */
		if (now < s->next_link_check)
			return 0;
		s->next_link_check = now + 1000000;
		s->link_up = tide_eth_port_link_up(tide_eth_node_port(tide_node_rt_port(s->rt)));
		if (!s->link_up)
			return 0;
	}
	if (!__atomic_load_n(&s->ep.finished, __ATOMIC_ACQUIRE))
		return nb_tick(&s->ep, now);
	return 0;
}

/* The runtime's lcore_init hook, on the worker that owns the stack. */
static int
setup_on_worker(void *arg, unsigned idx, struct tide_net_stack *stack, uint64_t now)
{
	struct tide_side *s = arg;

	(void)idx;
	(void)now;
	s->stack = stack;
	if (s->server)
		return tide_net_listen(s->stack, BENCH_PORT, 256, on_accept, s, &s->listener);
	return 0;
}

/*
 * This endpoint as a node file, so the benchmark starts its stack the way
 * every Tide node does (tide_node_rt): a memif link in the run's directory,
 * one pinned polling lcore, 128 MiB of DPDK memory.
 */
static int
side_nodeenv(const struct nb_cfg *cfg, bool server, struct tide_nodeenv *ne)
{
	char kv[12][320];
	char *env[13];
	char err[2048] = "";
	unsigned n = 0;
	int rc;

	snprintf(kv[n++], sizeof(kv[0]),
		 "TIDE_DPDK_DEVICE=net_memif0,role=%s,socket=%s/memif.sock,socket-abstract=no,"
		 "bsize=%u,rsize=12",
		 server ? "server" : "client", cfg->dir, cfg->mtu > 1500 ? MEMIF_BSIZE : 2048);
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_DATA_IP=10.77.0.%d", server ? 1 : 2);
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_DATA_NETMASK=255.255.255.0");
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_MTU=%u", cfg->mtu);
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_LCORES=%d", cfg->cpu);
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_FILE_PREFIX=tide-nb-%d-%s", (int)getpid(),
		 server ? "s" : "c");
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_HUGEPAGES=auto");
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_HUGEPAGE_MEM=128mb");
	/* Both ends of the memif link run the same mode (the coordinator's choice). */
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_CSUM=%s", cfg->elide ? "elide" : "auto");
	snprintf(kv[n++], sizeof(kv[0]), "TIDE_IDLE=%s", cfg->adaptive ? "adaptive" : "busy");
	if (cfg->rto_min_us != 0)
		snprintf(kv[n++], sizeof(kv[0]), "TIDE_TCP_RTO_MIN_US=%u", cfg->rto_min_us);
	for (unsigned i = 0; i < n; i++)
		env[i] = kv[i];
	env[n] = NULL;
	/* Only these keys: the caller's environment and /etc/tide do not apply. */
	rc = tide_nodeenv_load(ne, "/dev/null", env, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "tide-net-bench: endpoint settings refused:\n%s", err);
	return rc;
}

int
nb_run_tide(const struct nb_cfg *cfg, bool server)
{
	static struct tide_side s;
	static struct tide_nodeenv ne;
	struct tide_node_rt_opts ro = {0};
	struct nb_ctl_msg m = {0};
	int rc;

	side = &s;
	s.server = server;
	s.zc = cfg->zc;
	s.zc_limit = cfg->sockbuf;
	nb_endpoint_init(&s.ep, &tide_ops, &s, !server, cfg->rows, cfg->nrows, cfg->warmup_s,
			 cfg->duration_s);
	rc = side_nodeenv(cfg, server, &ne);
	if (rc != 0)
		goto out;
	ro.prog = "tide-net-bench";
	ro.max_lcores = 1;
	ro.tcp_buf = cfg->sockbuf;
	ro.time_wait_ms = 1000; /* eight flows per row: do not pile up ports */
	ro.lcore_init = setup_on_worker;
	ro.lcore_poll = side_poll;
	ro.arg = &s;
	rc = tide_node_rt_start(&ne, &ro, &s.rt);
	if (rc != 0) {
		fprintf(stderr, "tide-net-bench: user-space TCP did not start: %s\n",
			strerror(-rc));
		goto out;
	}
	m.type = NB_CTL_READY;
	m.huge = tide_node_rt_info(s.rt)->hugepages;
	nb_ctl_send(cfg->ctl, &m);

	while (!__atomic_load_n(&s.ep.finished, __ATOMIC_ACQUIRE) && nb_now_ns() < cfg->deadline)
		usleep(2000);
	if (!__atomic_load_n(&s.ep.finished, __ATOMIC_ACQUIRE))
		s.ep.error = s.ep.error != 0 ? s.ep.error : -ETIMEDOUT;
	/* Phase one: stop polling, report, and wait until the peer stopped too. */
	tide_node_rt_stop(s.rt);
	if (s.ep.error != 0 || tide_net_stats(s.stack)->tcp_retrans_segs > 0) {
		const struct tide_net_stats *ns = tide_net_stats(s.stack);
		struct tide_eth_port_stats ps = {0};

		tide_eth_port_stats(tide_eth_node_port(tide_node_rt_port(s.rt)), &ps);
		fprintf(stderr,
			"tide-net-bench: tide %s: error %d; %" PRIu64
			" segments retransmitted (%" PRIu64 " RTO, %" PRIu64 " fast), %" PRIu64
			" tx refused by memif; port imissed %" PRIu64 " rx_nombuf %" PRIu64
			" oerrors %" PRIu64 "\n",
			server ? "server" : "client", s.ep.error, ns->tcp_retrans_segs,
			ns->tcp_rto_fired, ns->tcp_fast_retrans, ns->tx_dropped, ps.imissed,
			ps.rx_nombuf, ps.oerrors);
	}
	if (s.zc && s.zc_sends > 0)
		fprintf(stderr,
			"tide-net-bench: tide %s: %" PRIu64 " zero-copy sends, %" PRIu64
			" completed with an error, %zu outstanding\n",
			server ? "server" : "client", s.zc_sends, s.zc_failed,
			tide_net_zc_pending(s.stack));
	m.type = NB_CTL_RESULT;
	m.status = s.ep.error;
	memcpy(m.res, s.ep.res, sizeof(m.res));
	nb_ctl_send(cfg->ctl, &m);
	m.type = NB_CTL_QUIESCED;
	nb_ctl_send(cfg->ctl, &m);
	(void)nb_ctl_recv(cfg->ctl, &m, 30000);
	rc = s.ep.error;
	s.stack = NULL;
	(void)tide_node_rt_destroy(s.rt);
out:
	nb_endpoint_fini(&s.ep);
	return rc;
}
