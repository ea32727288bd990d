/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two user-space TCP/IP stacks over real DPDK ports (a net_ring pair) in one
 * process: ARP, handshake, a bulk transfer verified byte for byte, orderly
 * close; then the same through the fault injector (loss, duplication,
 * reordering, corruption, delay) in both directions. Zero-copy sends
 * (tide_net_send_zc) the same way, with chained extbuf frames and with the
 * copy fallback, and the glue's TX offload marking and extbuf release on
 * real mbufs; a peer dying with chained zero-copy frames in flight (the
 * sender's completions wait for the frames the dead peer's ring still holds).
 * Every port must close with no mbuf left outstanding.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_mbuf.h>

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
	CU_ASSERT_EQUAL(tide_eth_port_close(pa), 0);
	CU_ASSERT_EQUAL(tide_eth_port_close(pb), 0);
}

/* ---- zero-copy ---- */

struct zc_src {
	unsigned issued, done, failed;
};

static void
zc_done(void *cookie, int status)
{
	struct zc_src *z = *(struct zc_src **)cookie;

	z->done++;
	if (status != 0)
		z->failed++;
}

/*
 * A -> B: `total` bytes as zero-copy sends of `zc_chunk` bytes, each followed
 * by a copied send of `copy_len` bytes, from one buffer that must be intact
 * afterwards; B checks every byte. A keeps at most `window` sends outstanding.
 */
static void
zc_transfer(const struct tide_eth_fault_opts *fault, enum tide_eth_zc_mode mode, uint64_t total,
	    size_t zc_chunk, size_t copy_len, const char *label)
{
	static const struct tide_net_conn_cbs src_cbs = {.on_event = source_event};
	struct tide_eth_port_opts po = {.nb_rxd = 1024, .nb_txd = 1024, .nb_mbufs = 16384};
	struct tide_eth_port *pa = NULL, *pb = NULL;
	struct node a = {0}, b = {0};
	struct tide_net_listener *l = NULL;
	struct tide_net_conn *c = NULL;
	struct sink sk = {0};
	struct source sr = {0};
	struct zc_src zs = {0};
	struct zc_src *zp = &zs;
	uint8_t *buf;
	uint64_t sent = 0, t0, deadline, bad_src = 0;
	char name_a[32], name_b[32];
	static int zc_pair_no;

	buf = malloc(total);
	CU_ASSERT_FATAL(buf != NULL);
	for (uint64_t i = 0; i < total; i++)
		buf[i] = pattern(i);
	snprintf(name_a, sizeof(name_a), "nzc_a%d", zc_pair_no);
	snprintf(name_b, sizeof(name_b), "nzc_b%d", zc_pair_no++);
	TIDE_UT_OK(tide_eth_ring_pair(name_a, name_b, &po, &pa, &pb));
	TIDE_UT_OK(node_up(&a, pa, IP_A, fault));
	TIDE_UT_OK(node_up(&b, pb, IP_B, fault));
	CU_ASSERT_TRUE(a.nd.tx_chain_auto); /* net_ring walks chains */
	TIDE_UT_OK(tide_eth_netdev_set_zc(&a.nd, mode));
	TIDE_UT_OK(tide_net_listen(b.stack, PORT, 16, sink_accept, &sk, &l));
	TIDE_UT_OK(tide_net_connect(a.stack, IP_B, PORT, &src_cbs, &sr, now_ns(), &c));
	t0 = now_ns();
	deadline = t0 + 120ull * 1000000000ull;
	while (!sr.connected && !sr.closed && now_ns() < deadline)
		poll_both(&a, &b);
	CU_ASSERT_TRUE_FATAL(sr.connected);
	while (sent < total && !sr.closed && now_ns() < deadline) {
		size_t n = total - sent < zc_chunk ? total - sent : zc_chunk;

		/* Outstanding sends bound the memory the application pins. */
		if (zs.issued - zs.done < 8) {
			ssize_t k = tide_net_send_zc(c, buf + sent, n, zc_done, &zp, now_ns());

			if (k == (ssize_t)n) {
				sent += n;
				zs.issued++;
				if (copy_len > 0 && sent < total) {
					size_t m =
						total - sent < copy_len ? total - sent : copy_len;
					ssize_t q = tide_net_send(c, buf + sent, m, now_ns());

					if (q > 0)
						sent += (uint64_t)q;
				}
			}
		}
		poll_both(&a, &b);
	}
	tide_net_close(c, now_ns());
	while (!(sk.got == total && sk.peer_closed && zs.done == zs.issued) && now_ns() < deadline)
		poll_both(&a, &b);
	for (uint64_t i = 0; i < total; i++)
		bad_src += buf[i] != pattern(i);
	{
		double secs = (now_ns() - t0) / 1e9;
		const struct tide_net_stats *sa = tide_net_stats(a.stack);

		printf("\n  zc %s: %llu bytes in %.2f s (%.1f MiB/s), %u sends completed, A "
		       "retrans "
		       "%llu rto %llu, B linearized %llu; faults A %llu/%llu/%llu B %llu/%llu/%llu "
		       "(drop/dup/reorder)\n",
		       label, (unsigned long long)sk.got, secs, sk.got / secs / 1048576.0, zs.done,
		       (unsigned long long)sa->tcp_retrans_segs,
		       (unsigned long long)sa->tcp_rto_fired,
		       (unsigned long long)b.nd.rx_linearized,
		       (unsigned long long)a.nd.fault_stats.dropped,
		       (unsigned long long)a.nd.fault_stats.duplicated,
		       (unsigned long long)a.nd.fault_stats.reordered,
		       (unsigned long long)b.nd.fault_stats.dropped,
		       (unsigned long long)b.nd.fault_stats.duplicated,
		       (unsigned long long)b.nd.fault_stats.reordered);
		if (fault != NULL && fault->drop > 0)
			CU_ASSERT_TRUE(sa->tcp_retrans_segs > 0);
	}
	if (mode == TIDE_ETH_ZC_COPY) {
		CU_ASSERT_EQUAL(b.nd.rx_linearized, 0);
	} else {
		CU_ASSERT_TRUE(b.nd.rx_linearized > 0);
	}
	CU_ASSERT_EQUAL(sent, total);
	CU_ASSERT_EQUAL(sk.got, total);
	CU_ASSERT_EQUAL(sk.bad, 0);
	CU_ASSERT_EQUAL(bad_src, 0); /* nothing wrote into the referenced memory */
	CU_ASSERT_TRUE(sk.peer_closed);
	CU_ASSERT_EQUAL(zs.done, zs.issued);
	CU_ASSERT_EQUAL(zs.failed, 0);
	CU_ASSERT_EQUAL(tide_net_zc_pending(a.stack), 0);
	if (sk.conn != NULL)
		tide_net_close(sk.conn, now_ns());
	tide_net_listener_close(l, now_ns());
	node_down(&a);
	node_down(&b);
	CU_ASSERT_EQUAL(tide_eth_port_close(pa), 0);
	CU_ASSERT_EQUAL(tide_eth_port_close(pb), 0);
	free(buf);
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
	if (tide_eal_init(&o, NULL) != 0)
		return -1;
	/* The external-buffer IOVA check only tells a translation apart from the
	 * address when the EAL hands out physical IOVAs (root, hugepages). */
	printf("\n    IOVA mode: %s\n", rte_eal_iova_mode() == RTE_IOVA_PA ? "PA" : "VA");
	return 0;
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
test_zc_clean_chained(void)
{
	zc_transfer(NULL, TIDE_ETH_ZC_AUTO, 128ull << 20, 1u << 20, 100, "clean, chained");
}

static void
test_zc_clean_copy_fallback(void)
{
	zc_transfer(NULL, TIDE_ETH_ZC_COPY, 64ull << 20, 256u << 10, 0, "clean, copy fallback");
}

static void
test_zc_lossy_chained(void)
{
	struct tide_eth_fault_opts f = {.drop = 0.01,
					.dup = 0.005,
					.reorder = 0.01,
					.corrupt = 0.005,
					.seed = 43,
					.rx = true,
					.tx = true};

	zc_transfer(&f, TIDE_ETH_ZC_AUTO, 64ull << 20, 1u << 20, 1000,
		    "1% loss, 1% reorder, 0.5% dup, 0.5% corrupt, chained");
}

static void
test_zc_delayed_chained(void)
{
	struct tide_eth_fault_opts f = {.delay_us = 200, .drop = 0.001, .seed = 8, .tx = true};

	zc_transfer(&f, TIDE_ETH_ZC_AUTO, 16ull << 20, 256u << 10, 0,
		    "200 us delay + 0.1% loss, chained");
}

/* Zero-copy sends of the peer-death test: each owns its buffer, freed in its completion. */
#define PD_SENDS 16
#define PD_LEN   (128u << 10)
static uint8_t *pd_buf[PD_SENDS];
static int pd_status[PD_SENDS];
static unsigned pd_done_n;

static void
pd_done(void *cookie, int status)
{
	unsigned i = (unsigned)(uintptr_t)cookie;

	CU_ASSERT_FATAL(i < PD_SENDS && pd_buf[i] != NULL);
	memset(pd_buf[i], 0xdd, PD_LEN); /* nothing may read it after this */
	free(pd_buf[i]);
	pd_buf[i] = NULL;
	pd_status[i] = status;
	pd_done_n++;
}

/*
 * The peer dies with chained zero-copy frames in flight: B stops polling and
 * its stack goes away while its RX ring (and A's delay queue) still hold
 * frames whose payload segments reference A's buffers; A gives up
 * (tide_net_abort, as the transport's progress timeout does). A's sends
 * complete with an error only once the frames are gone: those B's port
 * holds are released when it closes. Buffers are freed inside their
 * completions (ASan: no later access) and both ports close with every mbuf
 * back in its pool.
 */
static void
test_zc_peer_dies_in_flight(void)
{
	static const struct tide_net_conn_cbs src_cbs = {.on_event = source_event};
	struct tide_eth_fault_opts f = {.delay_us = 300, .drop = 0.01, .seed = 11, .tx = true};
	struct tide_eth_port_opts po = {.nb_rxd = 1024, .nb_txd = 1024, .nb_mbufs = 16384};
	struct tide_eth_port *pa = NULL, *pb = NULL;
	struct node a = {0}, b = {0};
	struct tide_net_listener *l = NULL;
	struct tide_net_conn *c = NULL;
	struct sink sk = {0};
	struct source sr = {0};
	uint64_t deadline;
	unsigned issued = 0, ok = 0, failed = 0, before_close;

	pd_done_n = 0;
	TIDE_UT_OK(tide_eth_ring_pair("npd_a", "npd_b", &po, &pa, &pb));
	TIDE_UT_OK(node_up(&a, pa, IP_A, &f));
	TIDE_UT_OK(node_up(&b, pb, IP_B, NULL));
	TIDE_UT_OK(tide_eth_netdev_set_zc(&a.nd, TIDE_ETH_ZC_CHAIN));
	TIDE_UT_OK(tide_net_listen(b.stack, PORT, 16, sink_accept, &sk, &l));
	TIDE_UT_OK(tide_net_connect(a.stack, IP_B, PORT, &src_cbs, &sr, now_ns(), &c));
	deadline = now_ns() + 60ull * 1000000000ull;
	while (!sr.connected && now_ns() < deadline)
		poll_both(&a, &b);
	CU_ASSERT_TRUE_FATAL(sr.connected);
	for (unsigned i = 0; i < PD_SENDS; i++) {
		pd_buf[i] = malloc(PD_LEN);
		CU_ASSERT_FATAL(pd_buf[i] != NULL);
		for (size_t k = 0; k < PD_LEN; k++)
			pd_buf[i][k] = pattern((uint64_t)i * PD_LEN + k);
		CU_ASSERT_EQUAL(tide_net_send_zc(c, pd_buf[i], PD_LEN, pd_done,
						 (void *)(uintptr_t)i, now_ns()),
				(ssize_t)PD_LEN);
		issued++;
	}
	/* Some data gets through, then B dies mid-stream. */
	while (sk.got < 2 * PD_LEN && now_ns() < deadline)
		poll_both(&a, &b);
	CU_ASSERT_TRUE(sk.got >= 2 * PD_LEN);
	CU_ASSERT_EQUAL(sk.bad, 0);
	/* B vanishes without a word (a stack destroy sends nothing); its RX ring
	 * keeps whatever reaches it. */
	(void)l;
	node_down(&b);
	for (unsigned i = 0; i < 200; i++) { /* A retransmits into the void */
		uint64_t t = now_ns();

		tide_eth_netdev_poll(&a.nd, a.stack, t);
		tide_net_timers_run(a.stack, t);
		usleep(500);
	}
	tide_net_abort(c, now_ns());
	for (unsigned i = 0; i < 100; i++) {
		uint64_t t = now_ns();

		tide_eth_netdev_poll(&a.nd, a.stack, t); /* A's delay queue drains into B's ring */
		tide_net_timers_run(a.stack, t);
		usleep(1000);
	}
	before_close = pd_done_n;
	CU_ASSERT_TRUE(before_close < issued); /* B's ring still holds referencing frames */
	CU_ASSERT_EQUAL(tide_net_zc_pending(a.stack), issued - before_close);
	/* B's port drains its ring: the last references go, A completes everything. */
	CU_ASSERT_EQUAL(tide_eth_port_close(pb), 0);
	tide_net_timers_run(a.stack, now_ns());
	CU_ASSERT_EQUAL(pd_done_n, issued);
	CU_ASSERT_EQUAL(tide_net_zc_pending(a.stack), 0);
	for (unsigned i = 0; i < PD_SENDS; i++) {
		CU_ASSERT_PTR_NULL(pd_buf[i]);
		if (pd_status[i] == 0)
			ok++;
		else if (pd_status[i] == -ECONNABORTED)
			failed++;
	}
	printf("\n  zc peer death: %u sends, %u acknowledged, %u aborted (%u completed before B's "
	       "port closed), B got %llu bytes, A retrans %llu\n",
	       issued, ok, failed, before_close, (unsigned long long)sk.got,
	       (unsigned long long)tide_net_stats(a.stack)->tcp_retrans_segs);
	CU_ASSERT_EQUAL(ok + failed, issued);
	CU_ASSERT_TRUE(failed > 0);
	node_down(&a);
	CU_ASSERT_EQUAL(tide_eth_port_close(pa), 0);
}

static atomic_uint ext_released;

static void
ext_release(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ext_released, 1);
}

/* The glue on real mbufs: offload marks, and an attached segment travels as a
 * chain and is released when the receiver frees it. */
static void
test_glue_offload_flags_and_extbuf(void)
{
	struct tide_eth_port_opts po = {.nb_rxd = 256, .nb_txd = 256, .nb_mbufs = 2048};
	struct tide_eth_port *pa = NULL, *pb = NULL;
	struct tide_eth_netdev nd;
	const struct tide_net_dev_ops *ops = &tide_eth_net_dev_ops;
	struct tide_net_buf bufs[2];
	struct rte_mbuf *rx[4];
	static uint8_t payload[1000];
	uint16_t n = 0;

	TIDE_UT_OK(tide_eth_ring_pair("ngl_a", "ngl_b", &po, &pa, &pb));
	TIDE_UT_OK(tide_eth_netdev_init(&nd, pa, 0, NULL));
	/* net_ring has no checksum offload: the stack must compute everything. */
	CU_ASSERT_EQUAL(tide_eth_netdev_tx_offloads(&nd), 0);
	CU_ASSERT_EQUAL(ops->tx_alloc(&nd, bufs, 2, 1514), 2);
	memset(bufs[0].data, 0x11, 54);
	bufs[0].len = 60;
	bufs[0].flags = TIDE_NET_TX_F_IP_CKSUM | TIDE_NET_TX_F_TCP_CKSUM;
	memset(bufs[1].data, 0x22, 54);
	bufs[1].len = 54;
	bufs[1].ext_len = 0;
	atomic_store(&ext_released, 0);
	TIDE_UT_OK(ops->tx_attach(&nd, &bufs[1], payload, sizeof(payload), ext_release, NULL));
	bufs[1].ext_len = sizeof(payload);
	CU_ASSERT_EQUAL(ops->tx_burst(&nd, bufs, 2), 2);
	for (int tries = 0; tries < 100 && n < 2; tries++)
		n += tide_eth_rx(pb, 0, rx + n, (uint16_t)(4 - n));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_TRUE((rx[0]->ol_flags & RTE_MBUF_F_TX_IPV4) != 0);
	CU_ASSERT_TRUE((rx[0]->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) != 0);
	CU_ASSERT_TRUE((rx[0]->ol_flags & RTE_MBUF_F_TX_TCP_CKSUM) == RTE_MBUF_F_TX_TCP_CKSUM);
	CU_ASSERT_EQUAL(rx[0]->l2_len, 14);
	CU_ASSERT_EQUAL(rx[0]->l3_len, 20);
	CU_ASSERT_EQUAL(rx[0]->pkt_len, 60);
	CU_ASSERT_EQUAL(rx[1]->ol_flags & (RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM), 0);
	CU_ASSERT_EQUAL(rx[1]->nb_segs, 2);
	CU_ASSERT_EQUAL(rx[1]->pkt_len, 54 + sizeof(payload));
	CU_ASSERT_EQUAL(rx[1]->data_len, 54);
	CU_ASSERT_TRUE(rx[1]->next != NULL && RTE_MBUF_HAS_EXTBUF(rx[1]->next));
	CU_ASSERT_PTR_EQUAL(rte_pktmbuf_mtod(rx[1]->next, uint8_t *), payload);
	/* A software device gets the address as IOVA whatever the EAL's IOVA
	 * mode (with hugepages: physical); a per-frame translation there read
	 * /proc/self/pagemap and cut memif streams 6-8x. */
	CU_ASSERT_TRUE(rx[1]->next != NULL &&
		       rx[1]->next->buf_iova == (rte_iova_t)(uintptr_t)rx[1]->next->buf_addr);
	CU_ASSERT_EQUAL(atomic_load(&ext_released), 0);
	rte_pktmbuf_free_bulk(rx, n);
	CU_ASSERT_EQUAL(atomic_load(&ext_released), 1);
	/* A buffer freed untransmitted releases its segment too; COPY mode refuses. */
	CU_ASSERT_EQUAL(ops->tx_alloc(&nd, bufs, 1, 1514), 1);
	TIDE_UT_OK(ops->tx_attach(&nd, &bufs[0], payload, 300, ext_release, NULL));
	ops->free_bufs(&nd, &bufs[0].handle, 1);
	CU_ASSERT_EQUAL(atomic_load(&ext_released), 2);
	TIDE_UT_OK(tide_eth_netdev_set_zc(&nd, TIDE_ETH_ZC_COPY));
	CU_ASSERT_EQUAL(ops->tx_alloc(&nd, bufs, 1, 1514), 1);
	CU_ASSERT_TRUE(ops->tx_attach(&nd, &bufs[0], payload, 300, ext_release, NULL) < 0);
	ops->free_bufs(&nd, &bufs[0].handle, 1);
	CU_ASSERT_EQUAL(atomic_load(&ext_released), 2);
	tide_eth_netdev_fini(&nd);
	CU_ASSERT_EQUAL(tide_eth_port_close(pa), 0);
	CU_ASSERT_EQUAL(tide_eth_port_close(pb), 0);
}

/* Inject an ICMP echo request with wrong IPv4 and ICMP checksums, carrying
 * `ol_flags` as a NIC's RX would, from port `from` to the stack behind nd. */
static void
inject_bad_ping(struct tide_eth_port *from, struct node *to, uint64_t ol_flags)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(tide_eth_port_pool(from));
	uint8_t *f;
	uint8_t dst[6];

	CU_ASSERT_FATAL(m != NULL);
	f = (uint8_t *)rte_pktmbuf_append(m, 14 + 20 + 16);
	CU_ASSERT_FATAL(f != NULL);
	memset(f, 0, 50);
	tide_eth_port_mac(to->port, dst);
	memcpy(f, dst, 6);
	f[6] = 0x02;
	f[11] = 0x09;
	f[12] = 0x08; /* IPv4 */
	f[14] = 0x45;
	f[17] = 36; /* total length */
	f[22] = 64;
	f[23] = 1;    /* ICMP */
	f[24] = 0xde; /* header checksum: wrong */
	f[26] = 10;   /* 10.77.0.9 */
	f[27] = 77;
	f[29] = 9;
	f[30] = IP_B >> 24;
	f[31] = (IP_B >> 16) & 0xff;
	f[32] = (IP_B >> 8) & 0xff;
	f[33] = IP_B & 0xff;
	f[34] = 8;    /* echo request */
	f[36] = 0x12; /* checksum: wrong */
	m->ol_flags = ol_flags;
	CU_ASSERT_EQUAL_FATAL(tide_eth_tx(from, 0, &m, 1), 1);
	for (int i = 0; i < 100 && tide_eth_netdev_poll(&to->nd, to->stack, now_ns()) == 0; i++)
		;
}

/* The glue turns a NIC's RX checksum verdicts into TIDE_NET_RX_F_*. */
static void
test_glue_rx_cksum_flags(void)
{
	struct tide_eth_port_opts po = {.nb_rxd = 256, .nb_txd = 256, .nb_mbufs = 2048};
	struct tide_eth_port *pa = NULL, *pb = NULL;
	struct node b = {0};
	const struct tide_net_stats *st;

	TIDE_UT_OK(tide_eth_ring_pair("ngr_a", "ngr_b", &po, &pa, &pb));
	TIDE_UT_OK(node_up(&b, pb, IP_B, NULL));
	st = tide_net_stats(b.stack);
	inject_bad_ping(pa, &b, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD);
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 0);
	CU_ASSERT_EQUAL(st->icmp_rx_bad, 0);
	CU_ASSERT_EQUAL(st->icmp_rx_echo, 1);
	inject_bad_ping(pa, &b, RTE_MBUF_F_RX_IP_CKSUM_GOOD);
	CU_ASSERT_EQUAL(st->icmp_rx_bad, 1);
	inject_bad_ping(pa, &b, RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN);
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 1);
	inject_bad_ping(pa, &b, RTE_MBUF_F_RX_IP_CKSUM_BAD | RTE_MBUF_F_RX_L4_CKSUM_GOOD);
	CU_ASSERT_EQUAL(st->ip_rx_bad_csum, 2);
	node_down(&b);
	CU_ASSERT_EQUAL(tide_eth_port_close(pa), 0);
	CU_ASSERT_EQUAL(tide_eth_port_close(pb), 0);
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
	CU_add_test(s, "glue_offload_flags_and_extbuf", test_glue_offload_flags_and_extbuf);
	CU_add_test(s, "glue_rx_cksum_flags", test_glue_rx_cksum_flags);
	CU_add_test(s, "zc_clean_chained", test_zc_clean_chained);
	CU_add_test(s, "zc_clean_copy_fallback", test_zc_clean_copy_fallback);
	CU_add_test(s, "zc_lossy_chained", test_zc_lossy_chained);
	CU_add_test(s, "zc_delayed_chained", test_zc_delayed_chained);
	CU_add_test(s, "zc_peer_dies_in_flight", test_zc_peer_dies_in_flight);
}

TIDE_UT_MAIN(register_tests)
