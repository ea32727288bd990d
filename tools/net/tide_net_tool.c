/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-net: run Tide's user-space TCP/IP stack on the node's DPDK device and
 * serve or send TCP, so it can be checked against Linux (ping, sockets) and
 * against another Tide node (memif, af_packet on veth).
 *
 *   tide-net serve [--port P] [--echo] [--send SIZE [--close]] [--connections N]
 *                  [--duration S]
 *   tide-net send --peer IP [--port P] [--bytes SIZE]
 *
 * Configuration comes from the node environment file (TIDE_DPDK_DEVICE,
 * TIDE_DATA_IP/NETMASK/GATEWAY/MAC, TIDE_MTU, TIDE_FAULT, TIDE_CSUM, TIDE_IDLE,
 * ...).
 * The stack runs on one pinned polling worker; the main thread only waits.
 * Payload bytes follow a fixed pattern so either side can verify them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_net.h"
#include "tide_node_eal.h"
#include "tide_nodeenv.h"

#define MAX_CONNS 64

static atomic_bool stop_requested;

static void
on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop_requested, true);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The byte at stream offset i; Linux-side test scripts compute the same. */
static inline uint8_t
pattern(uint64_t i)
{
	return (uint8_t)(i * 7 + (i >> 8));
}

struct conn_state {
	struct tide_net_conn *conn;
	struct app *app;
	uint64_t rx, bad, tx;
	uint8_t pend[4096]; /* echo bytes the send buffer had no room for */
	size_t pend_len;
	bool held;        /* on_recv took less than offered: the stack waits for recv_resume */
	bool peer_closed; /* echo: FIN seen; close once everything is echoed */
	bool done;
};

struct app {
	bool serve, echo;
	bool close_first; /* serve --close: FIN after the --send bytes (an active close) */
	uint16_t port;
	uint32_t peer;
	uint64_t bytes;
	uint64_t serve_send; /* serve --send: bytes queued to each accepted connection */
	unsigned want_conns;
	/* Worker state. */
	struct tide_eth_netdev nd;
	struct tide_net_stack *stack;
	struct tide_net_listener *listener;
	struct conn_state conns[MAX_CONNS];
	unsigned nconns, closed_conns;
	uint64_t t_start, t_connected;
	int result; /* 0 ok, -errno failed; written once by the worker */
	atomic_bool finished;
	uint64_t sent;
	bool connected, peer_closed, close_sent;
	uint8_t chunk[16384];
};

static void
conn_flush(struct conn_state *cs, uint64_t now)
{
	while (cs->pend_len > 0) {
		ssize_t k = tide_net_send(cs->conn, cs->pend, cs->pend_len, now);

		if (k <= 0)
			return;
		memmove(cs->pend, cs->pend + k, cs->pend_len - (size_t)k);
		cs->pend_len -= (size_t)k;
		cs->tx += (uint64_t)k;
	}
}

static size_t
serve_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct conn_state *cs = arg;

	(void)c;
	if (cs->app->echo) {
		/* Take only what can be echoed: backpressure flows to the peer.
		 * Taking less than offered makes the stack hold the rest until
		 * tide_net_recv_resume(), which echo_progress() calls once the
		 * backlog is sent, even if it drained right here. */
		size_t offered = n;

		conn_flush(cs, now_ns());
		if (cs->pend_len > 0) {
			cs->held = true;
			return 0;
		}
		if (n > sizeof(cs->pend))
			n = sizeof(cs->pend);
		memcpy(cs->pend, d, n);
		cs->pend_len = n;
		cs->rx += n;
		cs->held = n < offered;
		conn_flush(cs, now_ns());
		return n;
	}
	for (size_t i = 0; i < n; i++)
		if (d[i] != pattern(cs->rx + i))
			cs->bad++;
	cs->rx += n;
	return n;
}

/* The connection is finished: report it and release the handle. */
static void
conn_finish(struct conn_state *cs, const char *how)
{
	struct app *a = cs->app;

	printf("tide-net: connection %u %s: %" PRIu64 " bytes in, %" PRIu64 " out, %" PRIu64
	       " mismatched\n",
	       (unsigned)(cs - a->conns), how, cs->rx, cs->tx, cs->bad);
	fflush(stdout);
	cs->done = true;
	tide_net_close(cs->conn, now_ns());
	if (++a->closed_conns == a->want_conns) {
		a->result = 0;
		atomic_store(&a->finished, true);
	}
}

static void
serve_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct conn_state *cs = arg;

	(void)c;
	if (ev == TIDE_NET_EV_WRITABLE) {
		conn_flush(cs, now_ns()); /* echo_progress() resumes receiving */
	} else if (ev == TIDE_NET_EV_CLOSED) {
		conn_finish(cs, strerror(-reason));
	} else if (ev == TIDE_NET_EV_PEER_CLOSED) {
		if (cs->app->echo)
			cs->peer_closed = true; /* echo_progress() closes once drained */
		else
			conn_finish(cs, "closed by peer");
	}
}

static int
serve_accept(void *arg, struct tide_net_conn *conn)
{
	static const struct tide_net_conn_cbs cbs = {.on_recv = serve_recv,
						     .on_event = serve_event};
	struct app *a = arg;
	struct conn_state *cs;
	struct tide_net_conn_info ci;

	if (a->nconns == MAX_CONNS)
		return -ENOSPC;
	cs = &a->conns[a->nconns++];
	memset(cs, 0, sizeof(*cs));
	cs->conn = conn;
	cs->app = a;
	tide_net_conn_set_cbs(conn, &cbs, cs);
	tide_net_conn_info(conn, &ci);
	printf("tide-net: accepted %u.%u.%u.%u:%u (mss %u, wscale %s, timestamps %s)\n",
	       ci.rip >> 24, (ci.rip >> 16) & 255, (ci.rip >> 8) & 255, ci.rip & 255, ci.rport,
	       ci.mss, ci.ws_ok ? "yes" : "no", ci.ts_ok ? "yes" : "no");
	fflush(stdout);
	/* --send: the pattern, queued at once (it fits: --send <= the send buffer). */
	while (cs->tx < a->serve_send) {
		size_t want = a->serve_send - cs->tx < sizeof(a->chunk) ? a->serve_send - cs->tx
									: sizeof(a->chunk);
		ssize_t k;

		for (size_t i = 0; i < want; i++)
			a->chunk[i] = pattern(cs->tx + i);
		k = tide_net_send(conn, a->chunk, want, now_ns());
		if (k <= 0)
			break;
		cs->tx += (uint64_t)k;
	}
	if (a->close_first)
		conn_finish(cs, "closed first (FIN sent)");
	return 0;
}

static void
send_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct app *a = arg;

	(void)c;
	if (ev == TIDE_NET_EV_CONNECTED) {
		a->connected = true;
		a->t_connected = now_ns();
	} else if (ev == TIDE_NET_EV_PEER_CLOSED) {
		a->peer_closed = true;
	} else if (ev == TIDE_NET_EV_CLOSED) {
		a->result = reason != 0 ? reason : -ECONNRESET;
		atomic_store(&a->finished, true);
	}
}

static size_t
send_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct app *a = arg;

	(void)c;
	(void)d;
	a->conns[0].rx += n; /* the peer's reply, e.g. a byte count */
	return n;
}

/* Sender progress: fill the send buffer, close when all is queued, finish
 * when the peer closed its side. */
static int
send_progress(struct app *a, uint64_t now)
{
	int work = 0;

	if (!a->connected || atomic_load(&a->finished))
		return 0;
	while (a->sent < a->bytes) {
		size_t want = a->bytes - a->sent < sizeof(a->chunk) ? a->bytes - a->sent
								    : sizeof(a->chunk);
		ssize_t k;

		for (size_t i = 0; i < want; i++)
			a->chunk[i] = pattern(a->sent + i);
		k = tide_net_send(a->conns[0].conn, a->chunk, want, now);
		if (k <= 0)
			break;
		a->sent += (uint64_t)k;
		work++;
	}
	if (a->sent == a->bytes && !a->close_sent && tide_net_send_space(a->conns[0].conn) > 0) {
		struct tide_net_conn_info ci;

		tide_net_conn_info(a->conns[0].conn, &ci);
		if (ci.snd_queued == 0) {
			/* Everything acknowledged: half-close and wait for the peer. */
			a->close_sent = true;
			printf("tide-net: sent %" PRIu64 " bytes in %.3f s (%.1f MiB/s)\n", a->sent,
			       (now - a->t_connected) / 1e9,
			       a->sent / 1048576.0 / ((now - a->t_connected) / 1e9));
			fflush(stdout);
			tide_net_close(a->conns[0].conn, now);
			a->conns[0].conn = NULL;
			a->result = 0;
			atomic_store(&a->finished, true);
		}
	}
	return work;
}

/*
 * Echo connections: send what the send buffer had no room for, and once
 * nothing is pending, let the stack offer the bytes it holds again. Runs
 * every iteration (level-triggered), outside any callback, so it never
 * depends on catching the WRITABLE edge. Bounded by MAX_CONNS connections.
 */
static int
echo_progress(struct app *a, uint64_t now)
{
	int work = 0;

	for (unsigned i = 0; i < a->nconns; i++) {
		struct conn_state *cs = &a->conns[i];

		if (cs->done)
			continue;
		if (cs->pend_len > 0)
			conn_flush(cs, now);
		if (cs->pend_len == 0 && cs->held) {
			cs->held = false;
			tide_net_recv_resume(cs->conn, now);
			work++;
		}
		if (cs->peer_closed && cs->pend_len == 0 && !cs->held) {
			struct tide_net_conn_info ci;

			tide_net_conn_info(cs->conn, &ci);
			if (ci.rcv_queued == 0) {
				conn_finish(cs, "closed by peer");
				work++;
			}
		}
	}
	return work;
}

static int
app_poll(void *ctx, uint64_t now)
{
	struct app *a = ctx;
	int work = (int)tide_eth_netdev_poll(&a->nd, a->stack, now);

	work += tide_net_timers_run(a->stack, now);
	if (!a->serve)
		work += send_progress(a, now);
	else if (a->echo)
		work += echo_progress(a, now);
	return work;
}

/* Runs on the worker: create the stack there, so it is owned by it. */
struct setup_msg {
	struct app *a;
	struct tide_net_opts *opts;
	int rc;
	atomic_bool done;
};

static void
setup_on_worker(void *arg)
{
	static const struct tide_net_conn_cbs send_cbs = {.on_recv = send_recv,
							  .on_event = send_event};
	struct setup_msg *m = arg;
	struct app *a = m->a;
	uint64_t now = now_ns();

	m->rc = tide_net_stack_create(m->opts, now, &a->stack);
	if (m->rc == 0 && a->serve)
		m->rc = tide_net_listen(a->stack, a->port, 128, serve_accept, a, &a->listener);
	if (m->rc == 0 && !a->serve) {
		a->nconns = 1;
		a->conns[0].app = a;
		m->rc = tide_net_connect(a->stack, a->peer, a->port, &send_cbs, a, now,
					 &a->conns[0].conn);
	}
	if (m->rc == 0)
		m->rc = tide_lcore_poller_add(tide_lcore_current(), app_poll, a);
	atomic_store(&m->done, true);
}

static void
teardown_on_worker(void *arg)
{
	struct setup_msg *m = arg;
	struct app *a = m->a;

	for (unsigned i = 0; i < a->nconns; i++)
		if (a->conns[i].conn != NULL && !a->conns[i].done && !a->serve)
			tide_net_abort(a->conns[i].conn, now_ns());
	tide_net_listener_close(a->listener, now_ns());
	atomic_store(&m->done, true);
}

static void
print_stats(const struct app *a)
{
	const struct tide_net_stats *s = tide_net_stats(a->stack);

	/* One "name=value" list, stable for scripts and the DTS suites. */
	printf("tide-net: counters: rx_frames=%" PRIu64 " tx_frames=%" PRIu64
	       " eth_rx_not_ours=%" PRIu64 " eth_rx_ipv6=%" PRIu64 " eth_rx_unknown_type=%" PRIu64
	       " arp_rx_requests=%" PRIu64 " arp_tx_replies=%" PRIu64 " ip_rx_bad_hdr=%" PRIu64
	       " ip_rx_bad_len=%" PRIu64 " ip_rx_bad_csum=%" PRIu64 " ip_rx_frags=%" PRIu64
	       " icmp_rx_echo=%" PRIu64 " icmp_rx_bad=%" PRIu64 " tcp_rx_segs=%" PRIu64
	       " tcp_tx_segs=%" PRIu64 " tcp_rx_bad_csum=%" PRIu64 " tcp_rx_bad_hdr=%" PRIu64
	       " tcp_rx_no_conn=%" PRIu64 " tcp_rst_tx=%" PRIu64 " tcp_retrans_segs=%" PRIu64
	       " tcp_conn_resets=%" PRIu64 " tcp_conn_timeouts=%" PRIu64 " tcp_rto_fired=%" PRIu64
	       " tcp_fast_retrans=%" PRIu64 " tcp_tlp_probes=%" PRIu64
	       " tcp_sack_recoveries=%" PRIu64 " tcp_lost_retrans=%" PRIu64
	       " tcp_spurious_retrans=%" PRIu64 "\n",
	       s->rx_frames, s->tx_frames, s->eth_rx_not_ours, s->eth_rx_ipv6,
	       s->eth_rx_unknown_type, s->arp_rx_requests, s->arp_tx_replies, s->ip_rx_bad_hdr,
	       s->ip_rx_bad_len, s->ip_rx_bad_csum, s->ip_rx_frags, s->icmp_rx_echo, s->icmp_rx_bad,
	       s->tcp_rx_segs, s->tcp_tx_segs, s->tcp_rx_bad_csum, s->tcp_rx_bad_hdr,
	       s->tcp_rx_no_conn, s->tcp_rst_tx, s->tcp_retrans_segs, s->tcp_conn_resets,
	       s->tcp_conn_timeouts, s->tcp_rto_fired, s->tcp_fast_retrans, s->tcp_tlp_probes,
	       s->tcp_sack_recoveries, s->tcp_lost_retrans, s->tcp_spurious_retrans);
	if (a->nd.fault.rx || a->nd.fault.tx)
		printf("tide-net: injected faults: dropped %" PRIu64 " duplicated %" PRIu64
		       " reordered %" PRIu64 " corrupted %" PRIu64 " delayed %" PRIu64 "\n",
		       a->nd.fault_stats.dropped, a->nd.fault_stats.duplicated,
		       a->nd.fault_stats.reordered, a->nd.fault_stats.corrupted,
		       a->nd.fault_stats.delayed);
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tide-net [--node-env FILE] serve [--port P] [--echo]"
		" [--send SIZE [--close]] [--connections N] [--duration S]\n"
		"       tide-net [--node-env FILE] send --peer IPV4 [--port P] [--bytes SIZE]\n"
		"Runs Tide's user-space TCP/IP stack on TIDE_DPDK_DEVICE with TIDE_DATA_IP.\n"
		"serve sinks (checks the pattern) or, with --echo, echoes what it receives;\n"
		"--send SIZE (at most 1mb) also sends SIZE pattern bytes on each accepted\n"
		"connection, and --close then closes it at once (FIN first: an active close).\n");
}

int
main(int argc, char **argv)
{
	static const struct option lopts[] = {{"node-env", required_argument, NULL, 'e'},
					      {"port", required_argument, NULL, 'p'},
					      {"peer", required_argument, NULL, 'P'},
					      {"bytes", required_argument, NULL, 'b'},
					      {"echo", no_argument, NULL, 'E'},
					      {"send", required_argument, NULL, 's'},
					      {"close", no_argument, NULL, 'C'},
					      {"connections", required_argument, NULL, 'c'},
					      {"duration", required_argument, NULL, 'd'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	static struct app a;
	struct tide_nodeenv ne;
	struct tide_eal_opts eo;
	struct tide_eal_info ei;
	struct tide_eth_port_opts po = {0};
	struct tide_eth_port *port = NULL;
	struct tide_eth_fault_opts fo = {0};
	struct tide_lcore_opts lo;
	struct tide_lcore_group *g = NULL;
	struct tide_net_opts no;
	struct setup_msg m = {0};
	const char *env_path = NULL;
	char err[4096] = "", devname[128], rxname[128];
	int cpus[TIDE_LCORE_MAX];
	unsigned ncpus = 0;
	double duration = 0;
	uint64_t linger_us;
	int c, rc, status = 1;

	a.port = 5001;
	a.bytes = 64ull << 20;
	a.want_conns = UINT32_MAX;
	while ((c = getopt_long(argc, argv, "+e:h", lopts, NULL)) != -1) {
		if (c == 'e') {
			env_path = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc ||
	    (strcmp(argv[optind], "serve") != 0 && strcmp(argv[optind], "send") != 0)) {
		usage(stderr);
		return 2;
	}
	a.serve = strcmp(argv[optind], "serve") == 0;
	optind++;
	while ((c = getopt_long(argc, argv, "p:P:b:Es:Cc:d:", lopts, NULL)) != -1) {
		struct in_addr ia;
		char *end;
		unsigned long v;

		switch (c) {
		case 'p':
			v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v == 0 || v > 65535) {
				fprintf(stderr, "tide-net: --port %s: not a port 1..65535\n",
					optarg);
				return 2;
			}
			a.port = (uint16_t)v;
			break;
		case 'P':
			if (inet_pton(AF_INET, optarg, &ia) != 1) {
				fprintf(stderr, "tide-net: --peer %s: not an IPv4 address\n",
					optarg);
				return 2;
			}
			a.peer = ntohl(ia.s_addr);
			break;
		case 'b':
			if (tide_nodeenv_parse_size(optarg, &a.bytes) != 0) {
				fprintf(stderr, "tide-net: --bytes %s: not a size (e.g. 64mb)\n",
					optarg);
				return 2;
			}
			break;
		case 'E':
			a.echo = true;
			break;
		case 's':
			if (tide_nodeenv_parse_size(optarg, &a.serve_send) != 0 ||
			    a.serve_send > (1u << 20)) {
				fprintf(stderr, "tide-net: --send %s: not a size up to 1mb\n",
					optarg);
				return 2;
			}
			break;
		case 'C':
			a.close_first = true;
			break;
		case 'c':
			a.want_conns = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			duration = strtod(optarg, NULL);
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!a.serve && (a.serve_send > 0 || a.close_first)) {
		fprintf(stderr, "tide-net: --send and --close are serve options\n");
		return 2;
	}
	if (a.close_first && a.serve_send == 0) {
		fprintf(stderr, "tide-net: --close needs --send SIZE\n");
		return 2;
	}
	if (!a.serve && a.peer == 0) {
		fprintf(stderr, "tide-net: send needs --peer IPV4\n");
		return 2;
	}

	rc = tide_nodeenv_load(&ne, env_path, NULL, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tide-net: node environment is not valid (%s):\n%s", strerror(-rc),
			err);
		return 1;
	}
	tide_log_set_level(ne.log_level);
	if (ne.dpdk_device[0] == '\0' || !ne.data_ip_set) {
		fprintf(stderr, "tide-net: needs TIDE_DPDK_DEVICE and TIDE_DATA_IP in the node "
				"environment\n");
		return 1;
	}
	tide_node_port_opts(&ne, &po, devname, rxname, sizeof(devname));

	/* Choose the worker's CPU before the EAL pins this thread to its main
	 * lcore: afterwards the thread's affinity hides the other CPUs. */
	rc = tide_lcore_cpus_pick(ne.lcores, ne.lcores_per_numa, cpus, TIDE_LCORE_MAX, &ncpus);
	if (rc != 0) {
		fprintf(stderr, "tide-net: no CPU for the polling worker (TIDE_LCORES='%s'): %s\n",
			ne.lcores, strerror(-rc));
		return 1;
	}
	tide_node_eal_opts(&ne, "tide-net", true, &eo);
	rc = tide_eal_init(&eo, &ei);
	if (rc != 0) {
		fprintf(stderr, "tide-net: DPDK EAL did not start: %s\n", strerror(-rc));
		return 1;
	}
	rc = tide_eth_port_open(devname, &po, &port);
	if (rc != 0) {
		fprintf(stderr, "tide-net: cannot open %s: %s\n", devname, strerror(-rc));
		goto out_eal;
	}
	rc = tide_eth_netdev_init(&a.nd, port, 0, tide_node_fault_opts(&ne, now_ns(), &fo));
	if (rc != 0)
		goto out_port;

	tide_net_opts_init(&no, sizeof(no));
	no.dev_ops = &tide_eth_net_dev_ops;
	no.dev = &a.nd;
	if (ne.data_mac_set)
		memcpy(no.mac, ne.data_mac, 6);
	else
		tide_eth_port_mac(port, no.mac);
	no.ip = ntohl(ne.data_ip.s_addr);
	no.netmask = ntohl(ne.data_netmask.s_addr);
	no.gateway = ne.gateway_set ? ntohl(ne.gateway.s_addr) : 0;
	no.mtu = (uint16_t)ne.mtu;
	no.tcp_sndbuf = no.tcp_rcvbuf = 1u << 20;
	no.tcp_rto_min_us = ne.tcp_rto_min_us;
	no.tcp_max_retries = (uint8_t)ne.tcp_max_retries;
	rc = tide_eth_netdev_csum(&a.nd, tide_node_csum(&ne), &no);
	if (rc != 0) {
		fprintf(stderr, "tide-net: TIDE_CSUM=%s refused on %s: %s (see the log above)\n",
			tide_eth_csum_name(tide_node_csum(&ne)), devname, strerror(-rc));
		goto out_nd;
	}

	tide_lcore_opts_init(&lo, sizeof(lo));
	lo.idle =
		ne.idle == TIDE_NODEENV_IDLE_BUSY ? TIDE_LCORE_IDLE_BUSY : TIDE_LCORE_IDLE_ADAPTIVE;
	lo.idle_sleep_us = ne.idle_sleep_us;
	lo.thread_init = tide_eal_thread_register;
	rc = tide_lcore_group_create(&lo, cpus, 1, &g);
	if (rc == 0)
		rc = tide_lcore_group_start(g);
	if (rc != 0) {
		fprintf(stderr, "tide-net: polling worker did not start: %s\n", strerror(-rc));
		goto out_nd;
	}
	m.a = &a;
	m.opts = &no;
	a.t_start = now_ns();
	rc = tide_lcore_post(tide_lcore_get(g, 0), setup_on_worker, &m);
	while (rc == 0 && !atomic_load(&m.done))
		usleep(1000);
	if (rc == 0)
		rc = m.rc;
	if (rc != 0) {
		fprintf(stderr, "tide-net: stack setup failed: %s\n", strerror(-rc));
		goto out_group;
	}
	{
		unsigned idx;

		if (tide_eth_netdev_publish(&a.nd, a.stack, &idx) == 0)
			printf("tide-net: live counters: tools/tide-stats.py --file-prefix %s "
			       "--index "
			       "%u\n",
			       ne.file_prefix, idx);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("tide-net: %s on %s, %u.%u.%u.%u/%u, worker on CPU %d, %s, checksums %s; %s port "
	       "%u\n",
	       a.serve ? "serving" : "sending", ne.dpdk_device, no.ip >> 24, (no.ip >> 16) & 255,
	       (no.ip >> 8) & 255, no.ip & 255, ne.data_prefix_len, cpus[0],
	       ei.hugepages ? "hugepages" : "no hugepages",
	       no.cksum_elide                              ? "elided"
	       : no.tx_offloads != 0 || a.nd.rx_trust != 0 ? "offloaded where the device can"
							   : "in software",
	       a.serve ? (a.echo ? "echo" : "sink") : "to", a.port);
	printf("tide-net: ready\n");
	fflush(stdout);

	while (!atomic_load(&a.finished) && !atomic_load(&stop_requested)) {
		if (duration > 0 && (now_ns() - a.t_start) / 1e9 > duration)
			break;
		if (!a.serve && !a.connected && (now_ns() - a.t_start) / 1e9 > 10) {
			a.result = -ETIMEDOUT;
			break;
		}
		usleep(2000);
	}
	atomic_store(&m.done, false);
	if (tide_lcore_post(tide_lcore_get(g, 0), teardown_on_worker, &m) == 0)
		while (!atomic_load(&m.done))
			usleep(1000);
	/*
	 * Let FINs and last ACKs go out before the worker stops. A sender's FIN
	 * is what the peer waits for to see the end of the data; should it be
	 * lost, its probe goes about one RTO floor later and the RTOs at two and
	 * four floors: keep the stack running through those (with Linux's 200 ms
	 * floor 0.9 s; 50 ms between Tide stacks; 10 s at most).
	 */
	linger_us = !a.serve && a.close_sent ? (uint64_t)ne.tcp_rto_min_us * 9 / 2 : 0;
	usleep((useconds_t)(linger_us < 50000      ? 50000
			    : linger_us > 10000000 ? 10000000
						   : linger_us));
	tide_lcore_group_stop(g);
	print_stats(&a);
	if (a.serve) {
		uint64_t bad = 0;

		for (unsigned i = 0; i < a.nconns; i++)
			bad += a.conns[i].bad;
		status = bad == 0 ? 0 : 1;
		if (a.want_conns != UINT32_MAX && a.closed_conns < a.want_conns)
			status = 1;
	} else {
		status = a.result == 0 && a.sent == a.bytes ? 0 : 1;
		if (status != 0)
			fprintf(stderr,
				"tide-net: send failed after %" PRIu64 " of %" PRIu64
				" bytes: %s\n",
				a.sent, a.bytes, a.result != 0 ? strerror(-a.result) : "stopped");
	}
	/* Unpublish (fini) before the stack it points to goes away. */
	tide_eth_netdev_fini(&a.nd);
	tide_net_stack_destroy(a.stack);
	a.stack = NULL;
out_group:
	tide_lcore_group_destroy(g);
out_nd:
	tide_eth_netdev_fini(&a.nd);
out_port:
	if (port != NULL) {
		/* Every packet buffer must be back in the pool once the stack is
		 * gone: anything else is a leak that would starve a long run. */
		unsigned held = tide_eth_port_close(port);

		printf("tide-net: packet buffers leaked: %u\n", held);
		if (held != 0)
			status = 1;
	}
out_eal:
	tide_eal_fini();
	return status;
}
