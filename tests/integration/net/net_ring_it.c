/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two user-space TCP/IP stacks over real DPDK ports (a net_ring pair) in one
 * process: ARP, handshake, a bulk transfer verified byte for byte, orderly
 * close; then the same through the fault injector (loss, duplication,
 * reordering, corruption, delay) in both directions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_net.h"
#include "tide_ut.h"

#define IP_A 0x0a4d0001u /* 10.77.0.1 */
#define IP_B 0x0a4d0002u /* 10.77.0.2 */
#define PORT 5001

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint8_t
pattern(uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

struct sink {
	uint64_t got, bad;
	bool peer_closed, accepted;
	struct tide_net_conn *conn;
};

static size_t
sink_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct sink *s = arg;

	(void)c;
	for (size_t i = 0; i < n; i++)
		if (d[i] != pattern(s->got + i))
			s->bad++;
	s->got += n;
	return n;
}

static void
sink_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct sink *s = arg;

	(void)c;
	(void)reason;
	if (ev == TIDE_NET_EV_PEER_CLOSED)
		s->peer_closed = true;
}

static int
sink_accept(void *arg, struct tide_net_conn *conn)
{
	struct sink *s = arg;
	static const struct tide_net_conn_cbs cbs = {.on_recv = sink_recv, .on_event = sink_event};

	s->conn = conn;
	s->accepted = true;
	tide_net_conn_set_cbs(conn, &cbs, s);
	return 0;
}

struct source {
	bool connected, closed;
	int reason;
};

static void
source_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct source *s = arg;

	(void)c;
	if (ev == TIDE_NET_EV_CONNECTED)
		s->connected = true;
	if (ev == TIDE_NET_EV_CLOSED) {
		s->closed = true;
		s->reason = reason;
	}
}

struct node {
	struct tide_eth_port *port;
	struct tide_eth_netdev nd;
	struct tide_net_stack *stack;
};

static int
node_up(struct node *n, struct tide_eth_port *port, uint32_t ip,
	const struct tide_eth_fault_opts *fault)
{
	struct tide_net_opts o;
	int rc;

	n->port = port;
	rc = tide_eth_netdev_init(&n->nd, port, 0, fault);
	if (rc != 0)
		return rc;
	tide_net_opts_init(&o, sizeof(o));
	o.dev_ops = &tide_eth_net_dev_ops;
	o.dev = &n->nd;
	tide_eth_port_mac(port, o.mac);
	o.ip = ip;
	o.tcp_sndbuf = o.tcp_rcvbuf = 1u << 20;
	return tide_net_stack_create(&o, now_ns(), &n->stack);
}

static void
node_down(struct node *n)
{
	tide_net_stack_destroy(n->stack);
	tide_eth_netdev_fini(&n->nd);
}

static void
poll_both(struct node *a, struct node *b)
{
	uint64_t now = now_ns();

	tide_eth_netdev_poll(&a->nd, a->stack, now);
	tide_eth_netdev_poll(&b->nd, b->stack, now);
	tide_net_timers_run(a->stack, now);
	tide_net_timers_run(b->stack, now);
}

/* Connect A -> B, send `total` bytes, close, and check B got them intact. */
static void
transfer(const struct tide_eth_fault_opts *fault, uint64_t total, const char *label)
{
	static const struct tide_net_conn_cbs src_cbs = {.on_event = source_event};
	struct tide_eth_port_opts po = {.nb_rxd = 1024, .nb_txd = 1024, .nb_mbufs = 16384};
	struct tide_eth_port *pa = NULL, *pb = NULL;
	struct node a = {0}, b = {0};
	struct tide_net_listener *l = NULL;
	struct tide_net_conn *c = NULL;
	struct sink sk = {0};
	struct source sr = {0};
	uint8_t chunk[16384];
	uint64_t sent = 0, t0, deadline;
	char name_a[32], name_b[32];
	static int pair_no;

	snprintf(name_a, sizeof(name_a), "nit_a%d", pair_no);
	snprintf(name_b, sizeof(name_b), "nit_b%d", pair_no++);
	TIDE_UT_OK(tide_eth_ring_pair(name_a, name_b, &po, &pa, &pb));
	TIDE_UT_OK(node_up(&a, pa, IP_A, fault));
	TIDE_UT_OK(node_up(&b, pb, IP_B, fault));
	TIDE_UT_OK(tide_net_listen(b.stack, PORT, 16, sink_accept, &sk, &l));
	TIDE_UT_OK(tide_net_connect(a.stack, IP_B, PORT, &src_cbs, &sr, now_ns(), &c));
	t0 = now_ns();
	deadline = t0 + 60ull * 1000000000ull;
	while (!sr.connected && !sr.closed && now_ns() < deadline)
		poll_both(&a, &b);
	CU_ASSERT_TRUE_FATAL(sr.connected);
	while (sent < total && !sr.closed && now_ns() < deadline) {
		size_t want = total - sent < sizeof(chunk) ? total - sent : sizeof(chunk);
		ssize_t k;

		for (size_t i = 0; i < want; i++)
			chunk[i] = pattern(sent + i);
		k = tide_net_send(c, chunk, want, now_ns());
		if (k > 0)
			sent += (uint64_t)k;
		poll_both(&a, &b);
	}
	tide_net_close(c, now_ns());
	while (!(sk.got == total && sk.peer_closed) && now_ns() < deadline)
		poll_both(&a, &b);
	{
		const struct tide_net_stats *sa = tide_net_stats(a.stack);
		const struct tide_net_stats *sb = tide_net_stats(b.stack);
		double secs = (now_ns() - t0) / 1e9;

		printf("\n  %s: %llu bytes in %.2f s (%.1f MiB/s); A retrans %llu rto %llu fast "
		       "%llu;"
		       " B bad csum ip %llu tcp %llu, dup bytes %llu, ooo %llu; faults A %llu/%llu/"
		       "%llu/%llu B %llu/%llu/%llu/%llu (drop/dup/reorder/corrupt)\n",
		       label, (unsigned long long)sk.got, secs, sk.got / secs / 1048576.0,
		       (unsigned long long)sa->tcp_retrans_segs,
		       (unsigned long long)sa->tcp_rto_fired,
		       (unsigned long long)sa->tcp_fast_retrans,
		       (unsigned long long)sb->ip_rx_bad_csum,
		       (unsigned long long)sb->tcp_rx_bad_csum,
		       (unsigned long long)sb->tcp_rx_dup_bytes,
		       (unsigned long long)sb->tcp_rx_ooo_segs,
		       (unsigned long long)a.nd.fault_stats.dropped,
		       (unsigned long long)a.nd.fault_stats.duplicated,
		       (unsigned long long)a.nd.fault_stats.reordered,
		       (unsigned long long)a.nd.fault_stats.corrupted,
		       (unsigned long long)b.nd.fault_stats.dropped,
		       (unsigned long long)b.nd.fault_stats.duplicated,
		       (unsigned long long)b.nd.fault_stats.reordered,
		       (unsigned long long)b.nd.fault_stats.corrupted);
		if (fault != NULL && fault->drop > 0)
			CU_ASSERT_TRUE(sa->tcp_retrans_segs > 0);
		if (fault != NULL && fault->corrupt > 0)
			CU_ASSERT_TRUE(sb->ip_rx_bad_csum + sb->tcp_rx_bad_csum +
					       sb->ip_rx_bad_hdr + sb->tcp_rx_bad_hdr +
					       sb->ip_rx_bad_len + sb->eth_rx_not_ours +
					       sb->eth_rx_unknown_type + sb->ip_rx_not_ours +
					       sb->ip_rx_bad_proto >
				       0);
	}
	CU_ASSERT_EQUAL(sent, total);
	CU_ASSERT_EQUAL(sk.got, total);
	CU_ASSERT_EQUAL(sk.bad, 0);
	CU_ASSERT_TRUE(sk.peer_closed);
	CU_ASSERT_FALSE(sr.closed && sr.reason != 0);
	if (sk.conn != NULL)
		tide_net_close(sk.conn, now_ns());
	tide_net_listener_close(l, now_ns());
	node_down(&a);
	node_down(&b);
	tide_eth_port_close(pa);
	tide_eth_port_close(pb);
}

static int
suite_init(void)
{
	struct tide_eal_opts o = {0};
	const char *huge = getenv("TIDE_HUGEPAGES");
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "tide-net-it-%d", (int)getpid());
	o.prog = "net_ring_it";
	o.file_prefix = prefix;
	o.huge = huge != NULL && strcmp(huge, "auto") == 0 ? TIDE_EAL_HUGE_AUTO : TIDE_EAL_HUGE_OFF;
	o.mem_bytes = 256u << 20;
	return tide_eal_init(&o, NULL) == 0 ? 0 : -1;
}

static int
suite_fini(void)
{
	return tide_eal_fini();
}

static void
test_clean_link_transfer(void)
{
	transfer(NULL, 64ull << 20, "clean link");
}

static void
test_lossy_link_transfer(void)
{
	struct tide_eth_fault_opts f = {.drop = 0.01,
					.dup = 0.005,
					.reorder = 0.01,
					.corrupt = 0.005,
					.seed = 42,
					.rx = true,
					.tx = true};

	transfer(&f, 8ull << 20, "1% loss, 1% reorder, 0.5% dup, 0.5% corrupt");
}

static void
test_delayed_link_transfer(void)
{
	struct tide_eth_fault_opts f = {.delay_us = 200, .drop = 0.001, .seed = 7, .tx = true};

	transfer(&f, 4ull << 20, "200 us delay + 0.1% loss");
}

static void
test_bad_fault_opts_rejected(void)
{
	struct tide_eth_netdev nd;
	struct tide_eth_fault_opts f = {.drop = 1.5};

	CU_ASSERT_EQUAL(tide_eth_netdev_init(&nd, NULL, 0, &f), -EINVAL);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("net_ring", suite_init, suite_fini);

	CU_add_test(s, "clean_link_transfer", test_clean_link_transfer);
	CU_add_test(s, "lossy_link_transfer", test_lossy_link_transfer);
	CU_add_test(s, "delayed_link_transfer", test_delayed_link_transfer);
	CU_add_test(s, "bad_fault_opts_rejected", test_bad_fault_opts_rejected);
}

TIDE_UT_MAIN(register_tests)
