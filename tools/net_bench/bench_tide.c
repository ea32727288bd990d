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
#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_net.h"

#define SERVER_IP   0x0a4d0001u /* 10.77.0.1 */
#define CLIENT_IP   0x0a4d0002u /* 10.77.0.2 */
#define BENCH_PORT  7001
#define MEMIF_BSIZE 9216 /* one 9000-byte-MTU frame per memif descriptor */
#define ZC_MIN      4096 /* smaller sends are copied */

struct tide_side {
	struct nb_endpoint ep;
	struct tide_eth_netdev nd;
	struct tide_eth_port *port;
	struct tide_net_stack *stack;
	struct tide_net_listener *listener;
	struct tide_net_opts no;
	bool server, link_up;
	uint64_t next_link_check;
	int setup_rc;
	int setup_done;
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

static int
side_poll(void *ctx, uint64_t now)
{
	struct tide_side *s = ctx;
	int work = (int)tide_eth_netdev_poll(&s->nd, s->stack, now);

	work += tide_net_timers_run(s->stack, now);
	if (!s->link_up) {
		/* The client connects only once memif is up, so no SYN waits for
		 * an RTO; the link query is rate-limited while down. */
		if (now < s->next_link_check)
			return work;
		s->next_link_check = now + 1000000;
		s->link_up = tide_eth_port_link_up(s->port);
		if (!s->link_up)
			return work;
	}
	if (!__atomic_load_n(&s->ep.finished, __ATOMIC_ACQUIRE))
		work += nb_tick(&s->ep, now);
	return work;
}

static void
setup_on_worker(void *arg)
{
	struct tide_side *s = arg;
	uint64_t now = nb_now_ns();
	int rc = tide_net_stack_create(&s->no, now, &s->stack);

	if (rc == 0 && s->server)
		rc = tide_net_listen(s->stack, BENCH_PORT, 256, on_accept, s, &s->listener);
	if (rc == 0)
		rc = tide_lcore_poller_add(tide_lcore_current(), side_poll, s);
	s->setup_rc = rc;
	__atomic_store_n(&s->setup_done, 1, __ATOMIC_RELEASE);
}

int
nb_run_tide(const struct nb_cfg *cfg, bool server)
{
	static struct tide_side s;
	struct tide_eal_opts eo = {0};
	struct tide_eal_info ei;
	struct tide_eth_port_opts po = {0};
	struct tide_lcore_opts lo;
	struct tide_lcore_group *g = NULL;
	struct nb_ctl_msg m = {0};
	char prefix[64], vdev[512], lcores[16];
	int rc, cpu = cfg->cpu;

	side = &s;
	s.server = server;
	s.zc = cfg->zc;
	s.zc_limit = cfg->sockbuf;
	nb_endpoint_init(&s.ep, &tide_ops, &s, !server, cfg->rows, cfg->nrows, cfg->warmup_s,
			 cfg->duration_s);
	snprintf(prefix, sizeof(prefix), "tide-nb-%d-%s", (int)getpid(), server ? "s" : "c");
	snprintf(vdev, sizeof(vdev),
		 "net_memif0,role=%s,socket=%s/memif.sock,socket-abstract=no,bsize=%u,rsize=12",
		 server ? "server" : "client", cfg->dir, cfg->mtu > 1500 ? MEMIF_BSIZE : 2048);
	snprintf(lcores, sizeof(lcores), "%d", cpu);
	eo.prog = "tide-net-bench";
	eo.file_prefix = prefix;
	eo.lcores = lcores;
	eo.huge = TIDE_EAL_HUGE_AUTO;
	eo.mem_bytes = 128ull << 20;
	eo.vdevs[0] = vdev;
	rc = tide_eal_init(&eo, &ei);
	if (rc != 0) {
		fprintf(stderr, "tide-net-bench: EAL did not start: %s\n", strerror(-rc));
		return rc;
	}
	if (cfg->mtu > 1500)
		po.mbuf_dataroom = MEMIF_BSIZE + 128; /* + RTE_PKTMBUF_HEADROOM */
	rc = tide_eth_port_open("net_memif0", &po, &s.port);
	if (rc != 0) {
		fprintf(stderr, "tide-net-bench: net_memif0: %s\n", strerror(-rc));
		goto out_eal;
	}
	rc = tide_eth_netdev_init(&s.nd, s.port, 0, NULL);
	if (rc != 0)
		goto out_port;
	tide_net_opts_init(&s.no, sizeof(s.no));
	/* Both ends of the memif link run the same mode (the coordinator's choice). */
	rc = tide_eth_netdev_csum(&s.nd, cfg->elide ? TIDE_ETH_CSUM_ELIDE : TIDE_ETH_CSUM_AUTO,
				  &s.no);
	if (rc != 0) {
		fprintf(stderr, "tide-net-bench: checksum mode refused: %s\n", strerror(-rc));
		tide_eth_netdev_fini(&s.nd);
		goto out_port;
	}
	s.no.dev_ops = &tide_eth_net_dev_ops;
	s.no.dev = &s.nd;
	tide_eth_port_mac(s.port, s.no.mac);
	s.no.ip = server ? SERVER_IP : CLIENT_IP;
	s.no.mtu = (uint16_t)cfg->mtu;
	s.no.tcp_sndbuf = s.no.tcp_rcvbuf = cfg->sockbuf;
	if (cfg->rto_min_us != 0)
		s.no.tcp_rto_min_us = cfg->rto_min_us;
	s.no.tcp_time_wait_ms = 1000; /* eight flows per row: do not pile up ports */

	tide_lcore_opts_init(&lo, sizeof(lo));
	lo.idle = cfg->adaptive ? TIDE_LCORE_IDLE_ADAPTIVE : TIDE_LCORE_IDLE_BUSY;
	lo.thread_init = tide_eal_thread_register;
	rc = tide_lcore_group_create(&lo, &cpu, 1, &g);
	if (rc == 0)
		rc = tide_lcore_group_start(g);
	if (rc == 0)
		rc = tide_lcore_post(tide_lcore_get(g, 0), setup_on_worker, &s);
	while (rc == 0 && !__atomic_load_n(&s.setup_done, __ATOMIC_ACQUIRE))
		usleep(1000);
	if (rc == 0)
		rc = s.setup_rc;
	if (rc != 0) {
		fprintf(stderr, "tide-net-bench: stack setup failed: %s\n", strerror(-rc));
		goto out_group;
	}
	m.type = NB_CTL_READY;
	m.huge = ei.hugepages;
	nb_ctl_send(cfg->ctl, &m);

	while (!__atomic_load_n(&s.ep.finished, __ATOMIC_ACQUIRE) && nb_now_ns() < cfg->deadline)
		usleep(2000);
	if (!__atomic_load_n(&s.ep.finished, __ATOMIC_ACQUIRE))
		s.ep.error = s.ep.error != 0 ? s.ep.error : -ETIMEDOUT;
	/* Phase one: stop polling, report, and wait until the peer stopped too. */
	tide_lcore_group_stop(g);
	if (s.ep.error != 0 || tide_net_stats(s.stack)->tcp_retrans_segs > 0) {
		const struct tide_net_stats *ns = tide_net_stats(s.stack);
		struct tide_eth_port_stats ps = {0};

		tide_eth_port_stats(s.port, &ps);
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
	tide_net_stack_destroy(s.stack);
out_group:
	tide_lcore_group_destroy(g);
	tide_eth_netdev_fini(&s.nd);
out_port:
	tide_eth_port_close(s.port);
out_eal:
	tide_eal_fini();
	nb_endpoint_fini(&s.ep);
	return rc;
}
