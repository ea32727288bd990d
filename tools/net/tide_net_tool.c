/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-net: run Tide's user-space TCP/IP stack on the node's DPDK device and
 * serve or send TCP, so it can be checked against Linux (ping, sockets) and
 * against another Tide node (memif, af_packet on veth).
 *
 *   tide-net serve [--port P] [--echo] [--send SIZE [--close]] [--connections N]
 *                  [--duration S]
 *   tide-net send --peer IP [--port P] [--bytes SIZE] [--flows N]
 *
 * Configuration comes from the node environment file (TIDE_DPDK_DEVICE,
 * TIDE_DATA_IP/NETMASK/GATEWAY/MAC, TIDE_MTU, TIDE_FAULT, TIDE_CSUM, TIDE_IDLE,
 * ...).
 * The stack runs on one pinned polling worker; the main thread only waits.
 * Payload bytes follow a fixed pattern so either side can verify them.
 *
 * send --flows N opens N connections at once, all on the one worker, each
 * moving --bytes of its own (the pattern from offset 0). Each prints "sent B
 * bytes in S s (...), connected at +T s, opened at +O s" when its last byte
 * is acknowledged, with N > 1 after "flow I: ": S counted from the end of its own
 * handshake, T that end and O its connect call (the SYN), both from the start;
 * T + S - O is its completion time with the handshake. The first flow opens
 * alone and the others once it is connected (see setup_on_worker()).
 *
 * Every run ends with one line saying how: "done: ..." (exit 0), "stopped by
 * SIGTERM ..." (exit 0), "peer gone after N bytes (ERRNO)" or "failed: ..."
 * (exit 1; on stderr). The peer is gone when the connection is reset or times
 * out, or when the link stays down for LINK_GONE_MS (a memif peer that exits
 * takes the link down, and nothing else would tell us before TCP's
 * retransmission limit, about a minute).
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

#include "tide_clock.h"
#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_eth_node.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_net.h"
#include "tide_node_rt.h"
#include "tide_nodeenv.h"

#define MAX_CONNS       64
#define PATTERN_PERIOD  65536 /* pattern(i) depends on i mod 2^16 only */
#define CHUNK_BYTES     16384 /* most bytes one tide_net_send() call offers */
#define CONNECT_LIMIT_S 10    /* send: no connection within this long is a failure */
#define LINK_GONE_MS    1000  /* the link down this long after it was up: the peer is gone */

/* The signal that asked us to stop (SIGINT, SIGTERM), 0 until one did. */
static atomic_int stop_signal;

static void
on_signal(int sig)
{
	atomic_store(&stop_signal, sig);
}

/* Why the main thread stopped waiting. */
enum run_end {
	END_FINISHED,   /* the worker finished (a.result says how, for a sender) */
	END_SIGNAL,     /* SIGINT or SIGTERM */
	END_DURATION,   /* serve --duration passed */
	END_NO_CONNECT, /* send: no connection within CONNECT_LIMIT_S */
	END_LINK_LOST,  /* the link stayed down for LINK_GONE_MS after it was up */
};

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
	int err;          /* the reason it ended with (reset, timeout), 0 for the peer's FIN */
	bool held;        /* on_recv took less than offered: the stack waits for recv_resume */
	bool peer_closed; /* echo: FIN seen; close once everything is echoed */
	bool done;
	/* send: one flow; tx counts the bytes the send buffer took. */
	uint64_t t_opened; /* the connect call: a flow's completion time counts from here */
	uint64_t t_connected;
	bool connected;
};

struct app {
	bool serve, echo;
	bool close_first; /* serve --close: FIN after the --send bytes (an active close) */
	uint16_t port;
	uint32_t peer;
	uint64_t bytes;      /* send: per flow */
	unsigned nflows;     /* send --flows: connections opened at once (1..MAX_CONNS) */
	uint64_t serve_send; /* serve --send: bytes queued to each accepted connection */
	unsigned want_conns;
	/* Worker state. */
	struct tide_node_rt *rt;
	uint64_t now; /* this poll iteration's clock, for callbacks (lcore_pre) */
	struct tide_net_stack *stack;
	struct tide_net_listener *listener;
	struct conn_state conns[MAX_CONNS];
	unsigned nconns, closed_conns;
	unsigned failed_conns; /* serve: ended by a reset or timeout, not the peer's FIN */
	int first_err;         /* serve: the first such reason */
	uint64_t t_start;
	int result; /* 0 ok, -errno failed (a sender's first failed flow); written by the worker */
	atomic_bool finished;
	uint64_t sent;         /* send: bytes the send buffers took, all flows */
	unsigned ended_flows;  /* send: flows acknowledged whole or failed */
	unsigned failed_flows; /* send: flows ended by a reset, refusal or timeout */
	unsigned next_flow;    /* send: the flow send_progress() serves first */
	bool connected;        /* send: some flow completed its handshake */
	bool close_sent;       /* send: some flow closed after its last byte was acknowledged */
	uint8_t chunk[CHUNK_BYTES];
	/* send: the pattern from offset 0 for a period and one chunk more, so the
	 * bytes at any offset are one slice of it, never computed per send. */
	uint8_t ptab[PATTERN_PERIOD + CHUNK_BYTES];
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

		conn_flush(cs, cs->app->now);
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
		conn_flush(cs, cs->app->now);
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
	tide_net_close(cs->conn, a->now);
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
		conn_flush(cs, cs->app->now); /* echo_progress() resumes receiving */
	} else if (ev == TIDE_NET_EV_CLOSED) {
		/* Counted as done: a server outlives its clients (reported at exit). */
		cs->err = reason != 0 ? reason : -ECONNRESET;
		if (cs->app->failed_conns++ == 0)
			cs->app->first_err = cs->err;
		conn_finish(cs, strerror(-cs->err));
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
		k = tide_net_send(conn, a->chunk, want, a->now);
		if (k <= 0)
			break;
		cs->tx += (uint64_t)k;
	}
	if (a->close_first)
		conn_finish(cs, "closed first (FIN sent)");
	return 0;
}

/* A sender's flow ended: acknowledged whole (err 0) or failed. */
static void
flow_end(struct conn_state *cs, int err)
{
	struct app *a = cs->app;

	cs->done = true;
	cs->err = err;
	if (err != 0 && a->failed_flows++ == 0)
		a->result = err;
	if (err != 0 && a->nflows > 1) {
		printf("tide-net: flow %u: failed after %" PRIu64 " of %" PRIu64 " bytes (%s)\n",
		       (unsigned)(cs - a->conns), cs->tx, a->bytes, strerror(-err));
		fflush(stdout);
	}
	if (++a->ended_flows == a->nflows)
		atomic_store(&a->finished, true);
}

static void
send_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct conn_state *cs = arg;
	struct app *a = cs->app;

	(void)c;
	if (ev == TIDE_NET_EV_CONNECTED) {
		cs->connected = true;
		cs->t_connected = a->now;
		a->connected = true;
	} else if (ev == TIDE_NET_EV_PEER_CLOSED) {
		cs->peer_closed = true;
	} else if (ev == TIDE_NET_EV_CLOSED && !cs->done) {
		flow_end(cs, reason != 0 ? reason : -ECONNRESET);
	}
}

static size_t
send_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct conn_state *cs = arg;

	(void)c;
	(void)d;
	cs->rx += n; /* the peer's reply, e.g. a byte count */
	return n;
}

static const struct tide_net_conn_cbs send_cbs = {.on_recv = send_recv, .on_event = send_event};

/* Open flows 1..nflows-1 in one iteration, so they start together (within
 * microseconds of each other, one handshake after the first). A failure is
 * the run's: the flow counts as ended and failed. Returns 1 (work done). */
static int
open_flows(struct app *a, uint64_t now)
{
	while (a->nconns < a->nflows) {
		struct conn_state *cs = &a->conns[a->nconns++];
		int rc;

		cs->app = a;
		cs->t_opened = now;
		rc = tide_net_connect(a->stack, a->peer, a->port, &send_cbs, cs, now, &cs->conn);
		if (rc != 0) {
			cs->conn = NULL;
			flow_end(cs, rc);
		}
	}
	return 1;
}

/* One flow: fill its send buffer from the pattern table; once every byte is
 * acknowledged, report its completion time and close (FIN). */
static int
flow_progress(struct app *a, struct conn_state *cs, uint64_t now)
{
	struct tide_net_conn_info ci;
	uint64_t secs_ns;
	int work = 0;

	while (cs->tx < a->bytes) {
		uint64_t left = a->bytes - cs->tx;
		size_t want = left < CHUNK_BYTES ? (size_t)left : CHUNK_BYTES;
		ssize_t k = tide_net_send(cs->conn, a->ptab + cs->tx % PATTERN_PERIOD, want, now);

		if (k <= 0)
			break;
		cs->tx += (uint64_t)k;
		a->sent += (uint64_t)k;
		work++;
	}
	if (cs->tx < a->bytes || tide_net_send_space(cs->conn) == 0)
		return work;
	tide_net_conn_info(cs->conn, &ci);
	if (ci.snd_queued != 0)
		return work;
	/* Everything acknowledged: half-close; the stack finishes the close. */
	secs_ns = now - cs->t_connected;
	if (a->nflows == 1)
		printf("tide-net: ");
	else
		printf("tide-net: flow %u: ", (unsigned)(cs - a->conns));
	printf("sent %" PRIu64 " bytes in %.3f s (%.1f MiB/s), connected at +%.6f s, opened at "
	       "+%.6f s\n",
	       cs->tx, secs_ns / 1e9, cs->tx / 1048576.0 / (secs_ns / 1e9),
	       (cs->t_connected - a->t_start) / 1e9, (cs->t_opened - a->t_start) / 1e9);
	fflush(stdout);
	a->close_sent = true;
	tide_net_close(cs->conn, now);
	cs->conn = NULL;
	flow_end(cs, 0);
	return work + 1;
}

/*
 * Sender progress, every iteration (level-triggered, so no WRITABLE edge is
 * needed): each live flow gets its turn. The first flow served rotates, so
 * no flow is always the one that meets a full device queue; at most
 * MAX_CONNS flows per call.
 */
static int
send_progress(struct app *a, uint64_t now)
{
	unsigned first = a->next_flow;
	int work = 0;

	if (!a->connected || atomic_load(&a->finished))
		return 0;
	/* The first flow's handshake resolved the peer's address: open the
	 * others now, their SYNs ahead of its data. */
	if (a->nconns < a->nflows)
		work += open_flows(a, now);
	a->next_flow = first + 1 == a->nflows ? 0 : first + 1;
	for (unsigned j = 0; j < a->nflows; j++) {
		unsigned i = first + j < a->nflows ? first + j : first + j - a->nflows;
		struct conn_state *cs = &a->conns[i];

		if (cs->connected && !cs->done)
			work += flow_progress(a, cs, now);
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

/* The runtime's lcore_pre hook: callbacks stamp with the iteration's clock
 * instead of reading it per received segment. */
static void
app_pre(void *arg, unsigned idx, uint64_t now)
{
	(void)idx;
	((struct app *)arg)->now = now;
}

/* The runtime's lcore_poll hook: after received frames, before timers. */
static int
app_poll(void *arg, unsigned idx, uint64_t now)
{
	struct app *a = arg;

	(void)idx;
	if (!a->serve)
		return send_progress(a, now);
	if (a->echo)
		return echo_progress(a, now);
	return 0;
}

/* The runtime's lcore_init hook, on the worker: the stack is its own. */
static int
setup_on_worker(void *arg, unsigned idx, struct tide_net_stack *stack, uint64_t now)
{
	struct app *a = arg;

	(void)idx;
	a->stack = stack;
	a->now = now;
	a->t_start = now; /* timeouts count from here, not from EAL start-up */
	if (a->serve)
		return tide_net_listen(a->stack, a->port, 128, serve_accept, a, &a->listener);
	for (size_t i = 0; i < sizeof(a->ptab); i++)
		a->ptab[i] = pattern(i);
	/* One flow first: the stack queues only a few frames (4) per next hop
	 * whose address it has not resolved yet, so N SYNs sent before ARP
	 * answered would lose all but those few to the 1 s SYN retransmission.
	 * send_progress() opens the others once this one is connected. */
	a->conns[0].app = a;
	a->conns[0].t_opened = now;
	a->nconns = 1;
	return tide_net_connect(a->stack, a->peer, a->port, &send_cbs, &a->conns[0], now,
				&a->conns[0].conn);
}

static void
teardown_on_worker(void *arg)
{
	struct app *a = arg;

	for (unsigned i = 0; i < a->nconns; i++)
		/* A sender's flow still holds its handle unless it closed it, failed
		 * flows included (the stack keeps a gone connection until then). */
		if (a->conns[i].conn != NULL && !a->serve)
			tide_net_abort(a->conns[i].conn, tide_mono_ns());
	tide_net_listener_close(a->listener, tide_mono_ns());
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
	       " tcp_spurious_retrans=%" PRIu64 " tcp_hystart_css=%" PRIu64
	       " tcp_hystart_exits=%" PRIu64 " tcp_tx_blocked=%" PRIu64 " tcp_tx_cwr=%" PRIu64
	       " tcp_paced=%" PRIu64 " tcp_sack_held=%" PRIu64 "\n",
	       s->rx_frames, s->tx_frames, s->eth_rx_not_ours, s->eth_rx_ipv6,
	       s->eth_rx_unknown_type, s->arp_rx_requests, s->arp_tx_replies, s->ip_rx_bad_hdr,
	       s->ip_rx_bad_len, s->ip_rx_bad_csum, s->ip_rx_frags, s->icmp_rx_echo, s->icmp_rx_bad,
	       s->tcp_rx_segs, s->tcp_tx_segs, s->tcp_rx_bad_csum, s->tcp_rx_bad_hdr,
	       s->tcp_rx_no_conn, s->tcp_rst_tx, s->tcp_retrans_segs, s->tcp_conn_resets,
	       s->tcp_conn_timeouts, s->tcp_rto_fired, s->tcp_fast_retrans, s->tcp_tlp_probes,
	       s->tcp_sack_recoveries, s->tcp_lost_retrans, s->tcp_spurious_retrans,
	       s->tcp_hystart_css, s->tcp_hystart_exits, s->tcp_tx_blocked, s->tcp_tx_cwr,
	       s->tcp_paced, s->tcp_sack_held);
	const struct tide_eth_netdev *nd = tide_eth_node_netdev(tide_node_rt_queue(a->rt, 0));

	if (nd->fault.rx || nd->fault.tx)
		printf("tide-net: injected faults: dropped %" PRIu64 " duplicated %" PRIu64
		       " reordered %" PRIu64 " corrupted %" PRIu64 " delayed %" PRIu64 "\n",
		       nd->fault_stats.dropped, nd->fault_stats.duplicated,
		       nd->fault_stats.reordered, nd->fault_stats.corrupted,
		       nd->fault_stats.delayed);
}

/*
 * Wait on the main thread (the worker does the work) until it finished, a
 * signal, --duration, the connect limit or a lost link; 2 ms naps, so an end
 * is noticed within a few ms.
 */
static enum run_end
wait_for_end(struct app *a, double duration)
{
	const struct tide_eth_port *port = tide_eth_node_port(tide_node_rt_port(a->rt));
	uint64_t down_since = 0;
	bool was_up = false;

	for (;;) {
		uint64_t now = tide_mono_ns();

		if (atomic_load(&a->finished))
			return END_FINISHED;
		if (atomic_load(&stop_signal) != 0)
			return END_SIGNAL;
		if (duration > 0 && (now - a->t_start) / 1e9 > duration)
			return END_DURATION;
		/* connected is the worker's; a late read only waits one more nap. */
		if (!a->serve && !__atomic_load_n(&a->connected, __ATOMIC_RELAXED) &&
		    (now - a->t_start) / 1e9 > CONNECT_LIMIT_S)
			return END_NO_CONNECT;
		if (tide_eth_port_link_up(port)) {
			was_up = true;
			down_since = 0;
		} else if (was_up) {
			if (down_since == 0)
				down_since = now;
			else if (now - down_since > (uint64_t)LINK_GONE_MS * 1000000)
				return END_LINK_LOST;
		}
		usleep(2000);
	}
}

static const char *
errname(int err)
{
	const char *n = strerrorname_np(err < 0 ? -err : err);

	return n != NULL ? n : "?";
}

/*
 * The one line that says how the run ended, after everything was torn down
 * (a crash before it leaves no such line). Success and SIGTERM on stdout
 * (exit 0), failures on stderr (exit 1). Returns the exit status.
 */
static int
report_end(const struct app *a, enum run_end end, double duration, unsigned held)
{
	char line[512], peer[INET_ADDRSTRLEN];
	struct in_addr ia = {.s_addr = htonl(a->peer)};
	uint64_t rx = 0, bad = 0;
	int ok = 0;

	inet_ntop(AF_INET, &ia, peer, sizeof(peer));
	for (unsigned i = 0; i < a->nconns; i++) {
		rx += a->conns[i].rx;
		bad += a->conns[i].bad;
	}
	if (a->serve && bad != 0) {
		/* Corrupt data fails the run however it ended. */
		snprintf(line, sizeof(line),
			 "failed: %" PRIu64 " of %" PRIu64 " bytes received broke the pattern", bad,
			 rx);
	} else if (end == END_SIGNAL) {
		snprintf(line, sizeof(line), "stopped by SIG%s after %" PRIu64 " bytes%s",
			 sigabbrev_np(atomic_load(&stop_signal)), a->serve ? rx : a->sent,
			 a->serve ? " received" : " sent");
		ok = 1;
	} else if (end == END_LINK_LOST) {
		snprintf(line, sizeof(line),
			 "peer gone after %" PRIu64 " bytes (link down for %u ms, ENOLINK)",
			 a->serve ? rx : a->sent, LINK_GONE_MS);
	} else if (a->serve && end == END_DURATION && a->want_conns != UINT32_MAX &&
		   a->closed_conns < a->want_conns) {
		snprintf(line, sizeof(line),
			 "failed: --duration %g s passed with %u of %u connection(s) done, %" PRIu64
			 " bytes received",
			 duration, a->closed_conns, a->want_conns, rx);
	} else if (a->serve && a->closed_conns > 0 && a->failed_conns == a->closed_conns) {
		/* Every client vanished (reset, timeout): nothing was served whole. */
		snprintf(line, sizeof(line), "peer gone after %" PRIu64 " bytes (%s: %s)", rx,
			 errname(a->first_err), strerror(-a->first_err));
	} else if (a->serve) {
		int k = snprintf(line, sizeof(line),
				 "done: %" PRIu64 " bytes received on %u connection(s)", rx,
				 a->closed_conns);

		if (end == END_DURATION)
			snprintf(line + k, sizeof(line) - (size_t)k, ", --duration %g s passed",
				 duration);
		else if (a->failed_conns > 0)
			snprintf(line + k, sizeof(line) - (size_t)k,
				 ", %u ended by the peer's %s (%s)", a->failed_conns,
				 a->first_err == -ETIMEDOUT ? "silence" : "reset",
				 errname(a->first_err));
		else
			snprintf(line + k, sizeof(line) - (size_t)k, ", peer closed");
		ok = 1;
	} else if (end == END_NO_CONNECT) {
		snprintf(line, sizeof(line), "failed: no connection to %s:%u within %d s", peer,
			 a->port, CONNECT_LIMIT_S);
	} else if (a->result != 0 && !a->connected) {
		snprintf(line, sizeof(line), "failed: no connection to %s:%u (%s: %s)", peer,
			 a->port, errname(a->result), strerror(-a->result));
	} else if (a->result != 0) {
		int k = snprintf(line, sizeof(line), "peer gone after %" PRIu64 " bytes (%s: %s)",
				 a->sent, errname(a->result), strerror(-a->result));

		if (a->nflows > 1)
			snprintf(line + k, sizeof(line) - (size_t)k, "; %u of %u flows failed",
				 a->failed_flows, a->nflows);
	} else if (a->ended_flows == a->nflows && a->nflows == 1) {
		snprintf(line, sizeof(line),
			 "done: sent %" PRIu64 " bytes, every byte acknowledged, FIN sent",
			 a->sent);
		ok = 1;
	} else if (a->ended_flows == a->nflows) {
		snprintf(line, sizeof(line),
			 "done: sent %" PRIu64 " bytes on %u flows, every byte acknowledged, FIN "
			 "sent on each",
			 a->sent, a->nflows);
		ok = 1;
	} else {
		snprintf(line, sizeof(line),
			 "failed after %" PRIu64 " of %" PRIu64 " bytes (%u of %u flows done)",
			 a->sent, a->bytes * a->nflows, a->ended_flows, a->nflows);
	}
	if (held != 0) {
		size_t k = strlen(line);

		snprintf(line + k, sizeof(line) - k, "; %u packet buffers leaked", held);
		ok = 0;
	}
	fflush(stdout);
	fprintf(ok ? stdout : stderr, "tide-net: %s\n", line);
	fflush(ok ? stdout : stderr);
	return ok ? 0 : 1;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tide-net [--node-env FILE] serve [--port P] [--echo]"
		" [--send SIZE [--close]] [--connections N] [--duration S]\n"
		"       tide-net [--node-env FILE] send --peer IPV4 [--port P] [--bytes SIZE]"
		" [--flows N]\n"
		"Runs Tide's user-space TCP/IP stack on TIDE_DPDK_DEVICE with TIDE_DATA_IP.\n"
		"serve sinks (checks the pattern) or, with --echo, echoes what it receives;\n"
		"--send SIZE (at most 1mb) also sends SIZE pattern bytes on each accepted\n"
		"connection, and --close then closes it at once (FIN first: an active close).\n"
		"send --flows N (1..%d) opens N connections at once, each sending --bytes.\n",
		MAX_CONNS);
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
					      {"flows", required_argument, NULL, 'f'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	static struct app a;
	struct tide_nodeenv ne;
	struct tide_node_rt_opts ro = {0};
	const struct tide_node_rt_info *ri;
	const char *env_path = NULL;
	char err[4096] = "";
	double duration = 0;
	uint64_t linger_us;
	enum run_end how;
	unsigned held;
	int c, rc;

	a.port = 5001;
	a.bytes = 64ull << 20;
	a.want_conns = UINT32_MAX;
	a.nflows = 1;
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
	while ((c = getopt_long(argc, argv, "p:P:b:Es:Cc:d:f:", lopts, NULL)) != -1) {
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
		case 'f':
			v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v == 0 || v > MAX_CONNS) {
				fprintf(stderr, "tide-net: --flows %s: not a count 1..%d\n", optarg,
					MAX_CONNS);
				return 2;
			}
			a.nflows = (unsigned)v;
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
	if (a.serve && a.nflows != 1) {
		fprintf(stderr, "tide-net: --flows is a send option\n");
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
	/* Before the runtime: a SIGTERM during start-up ends the run cleanly once
	 * it is up (start-up is bounded: the EAL, a memif client's 30 s wait). */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	ro.prog = "tide-net";
	ro.max_lcores = 1; /* one stack: the connections live on one worker */
	ro.lcore_init = setup_on_worker;
	ro.lcore_pre = app_pre;
	ro.lcore_poll = app_poll;
	ro.arg = &a;
	rc = tide_node_rt_start(&ne, &ro, &a.rt);
	if (rc != 0) {
		fprintf(stderr, "tide-net: user-space TCP did not start: %s (see the log above)\n",
			strerror(-rc));
		return 1;
	}
	ri = tide_node_rt_info(a.rt);
	if (ri->published)
		printf("tide-net: live counters: tools/tide-stats.py --file-prefix %s --index %u\n",
		       ne.file_prefix, ri->publish_index);
	printf("tide-net: %s on %s, %s/%u, worker on CPU %d, %s, checksums %s; %s port %u\n",
	       a.serve ? "serving" : "sending", ne.dpdk_device, ri->ip_str, ne.data_prefix_len,
	       ri->cpus[0], ri->hugepages ? "hugepages" : "no hugepages", ri->csum,
	       a.serve ? (a.echo ? "echo" : "sink") : "to", a.port);
	printf("tide-net: ready\n");
	fflush(stdout);

	how = wait_for_end(&a, duration);
	(void)tide_lcore_run_sync(tide_lcore_get(tide_node_rt_lcores(a.rt), 0), teardown_on_worker,
				  &a);
	/*
	 * Let FINs and last ACKs go out before the worker stops. Our FIN is what
	 * the peer waits for to see the end of the data (a sender's) or the end
	 * of the exchange (a server that closes after the peer did); should it
	 * be lost, its probe goes about one RTO floor later and the RTOs at two
	 * and four floors. So after closing anything, keep the stack running
	 * until it holds no connection (a passive close ends when our FIN is
	 * acknowledged) or 4.5 RTO floors passed (an active close stays in
	 * TIME_WAIT): with Linux's 200 ms floor 0.9 s, 10 s at most; 50 ms
	 * when nothing was closed. A server whose peers all closed first (and
	 * that closed only then) has nothing in TIME_WAIT, and its FIN's timeout is the
	 * connection's RTO, not the floor: 1 s on one that never had an RTT
	 * sample (a receiver whose SYN-ACK was resent). So it waits for every
	 * connection to end, 10 s at most: at 5 % loss a Linux sender, whose
	 * last ACK and our FIN were both lost, waited 600 s for a receiver
	 * that had left after 50 ms.
	 */
	linger_us = a.close_sent || a.closed_conns > 0 ? (uint64_t)ne.tcp_rto_min_us * 9 / 2 : 0;
	if (how == END_FINISHED && a.serve && !a.close_first)
		linger_us = 10000000;
	linger_us = linger_us < 50000 ? 50000 : linger_us > 10000000 ? 10000000 : linger_us;
	{
		uint64_t until = tide_mono_ns() + linger_us * 1000;

		usleep(20000); /* at least this, for the last ACKs */
		/* tcp_conns is written by the worker; a racy read is enough here. */
		while (tide_mono_ns() < until &&
		       __atomic_load_n(&tide_net_stats(a.stack)->tcp_conns, __ATOMIC_RELAXED) > 0)
			usleep(2000);
	}
	tide_node_rt_stop(a.rt);
	print_stats(&a);
	a.stack = NULL;
	held = tide_node_rt_destroy(a.rt);
	/* Every packet buffer must be back in the pool once the stack is gone. */
	printf("tide-net: packet buffers leaked: %u\n", held);
	return report_end(&a, how, duration, held);
}
