/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node runtime (tide_node_rt.h): node file -> device environment (the
 * EAL) -> port -> lcores -> one stack per lcore. Every device call goes
 * through the registered driver (tide_node_dev.h). Bring-up order matters in
 * three places:
 * - CPUs are picked before the EAL starts: the EAL pins the calling thread
 *   to its main lcore, and that affinity would hide the other CPUs;
 * - the checksum mode is applied to each queue before its stack exists:
 *   it decides the stack's tx_offloads and cksum_elide options;
 * - each stack is created on its own lcore (a stack belongs to the thread
 *   that created it), so the lcores start before the stacks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide_clock.h"
#include "tide_log.h"
#include "tide_node_dev.h"
#include "tide_node_rt.h"

struct rt_lc {
	struct tide_node_rt *rt;
	unsigned idx;
	struct tide_node_queue *q; /* the driver's queue pair of this lcore */
	bool irq;                  /* sleeps on its queue's receive interrupt when idle */
	struct tide_net_stack *stack;
	struct tide_net_opts no;
	int rc; /* of the set-up message */
};

struct tide_node_rt {
	struct tide_nodeenv ne;
	struct tide_node_rt_opts o;
	struct tide_node_rt_info info;
	const struct tide_node_dev_ops *dev; /* the registered driver */
	struct tide_node_port *port;
	struct tide_lcore_group *g;
	bool env_up;
	struct rt_lc lcs[TIDE_LCORE_MAX];
};

static int
rt_poll(void *ctx, uint64_t now)
{
	struct rt_lc *l = ctx;
	const struct tide_node_rt_opts *o = &l->rt->o;
	int work;

	if (o->lcore_pre != NULL)
		o->lcore_pre(o->arg, l->idx, now);
	work = (int)l->rt->dev->queue_poll(l->q, l->stack, now);
	if (o->lcore_poll != NULL)
		work += o->lcore_poll(o->arg, l->idx, now);
	work += tide_net_timers_run(l->stack, now);
	return work;
}

static int
rt_irq_arm(void *ctx)
{
	struct rt_lc *l = ctx;

	return l->rt->dev->queue_intr_arm(l->q);
}

static void
rt_irq_disarm(void *ctx)
{
	struct rt_lc *l = ctx;

	l->rt->dev->queue_intr_disarm(l->q);
}

static uint64_t
rt_irq_next(void *ctx)
{
	struct rt_lc *l = ctx;
	uint64_t t = tide_net_next_timer(l->stack), d = l->rt->dev->queue_next_due(l->q);

	return d < t ? d : t;
}

static void
setup_on_lcore(void *arg)
{
	struct rt_lc *l = arg;
	const struct tide_node_rt_opts *o = &l->rt->o;
	struct tide_lcore *lc = tide_lcore_get(l->rt->g, l->idx);
	uint64_t now = tide_mono_ns();

	l->rc = tide_net_stack_create(&l->no, now, &l->stack);
	if (l->rc == 0 && o->lcore_init != NULL)
		l->rc = o->lcore_init(o->arg, l->idx, l->stack, now);
	if (l->rc == 0)
		l->rc = tide_lcore_poller_add(lc, rt_poll, l);
	/* The queue is this lcore's only input besides messages and wakes (which
	 * wake a sleeper by themselves) and the stack's timers (next_ns): with its
	 * interrupt an idle lcore sleeps until a frame or a timer, not 100 us at a
	 * time. The transfer engine's hooks time out requests in seconds; the
	 * 10 ms cap on a sleep serves them. */
	if (l->rc == 0 && l->rt->ne.idle == TIDE_NODEENV_IDLE_ADAPTIVE && l->rt->ne.idle_irq &&
	    l->rt->dev->queue_intr_open(l->q) == 0) {
		struct tide_lcore_irq irq = {.arm = rt_irq_arm,
					     .disarm = rt_irq_disarm,
					     .next_ns = rt_irq_next,
					     .ctx = l};

		l->rc = tide_lcore_irq_add(lc, &irq);
		if (l->rc == 0)
			l->irq = true;
	}
}

/* Stack options of lcore l from the node file; the driver fills the device's
 * part (callbacks, MAC, checksums, the RSS port picker). */
static int
lcore_net_opts(struct tide_node_rt *rt, struct rt_lc *l)
{
	const struct tide_nodeenv *ne = &rt->ne;
	struct tide_net_opts *no = &l->no;
	int rc;

	tide_net_opts_init(no, sizeof(*no));
	no->ip = rt->info.ip;
	no->netmask = ntohl(ne->data_netmask.s_addr);
	no->gateway = ne->gateway_set ? ntohl(ne->gateway.s_addr) : 0;
	no->mtu = (uint16_t)ne->mtu;
	no->tcp_sndbuf = no->tcp_rcvbuf = rt->o.tcp_buf != 0 ? rt->o.tcp_buf : 1u << 20;
	no->tcp_rto_min_us = ne->tcp_rto_min_us;
	no->tcp_max_retries = (uint8_t)ne->tcp_max_retries;
	/* The node file's names map one to one onto the stack's values. */
	no->tcp_cc = ne->tcp_cc == TIDE_NODEENV_CC_CUBIC      ? TIDE_NET_CC_CUBIC
		     : ne->tcp_cc == TIDE_NODEENV_CC_WESTWOOD ? TIDE_NET_CC_WESTWOOD
							      : TIDE_NET_CC_NEWRENO;
	no->tcp_hystart = ne->tcp_hystart;
	no->tcp_pacing = ne->tcp_pacing;
	no->tcp_sack_compress = ne->tcp_sack_compress;
	if (rt->o.time_wait_ms != 0)
		no->tcp_time_wait_ms = rt->o.time_wait_ms;
	/* The stacks share one address: only the first announces it. */
	no->arp_gratuitous = l->idx == 0;
	/* The driver logged the port, its driver and what it lacks. */
	rc = rt->dev->queue_net_opts(l->q, ne, no);
	if (rc != 0)
		return rc;
	if (ne->data_mac_set)
		memcpy(no->mac, ne->data_mac, 6);
	return 0;
}

static int
start_lcores(struct tide_node_rt *rt)
{
	struct tide_lcore_opts lo;
	int rc;

	tide_lcore_opts_init(&lo, sizeof(lo));
	lo.idle = rt->ne.idle == TIDE_NODEENV_IDLE_BUSY ? TIDE_LCORE_IDLE_BUSY
							: TIDE_LCORE_IDLE_ADAPTIVE;
	lo.idle_sleep_us = rt->ne.idle_sleep_us;
	lo.thread_init = rt->dev->thread_init;
	/* lo.clock_ns stays CLOCK_MONOTONIC: the transfer engine stamps slices
	 * with it and RDMA pollers sharing these lcores rely on it. */
	rc = tide_lcore_group_create(&lo, rt->info.cpus, rt->info.nlcores, &rt->g);
	if (rc == 0)
		rc = tide_lcore_group_start(rt->g);
	if (rc != 0)
		TIDE_LOG(ERR, "polling lcores did not start: %s", strerror(-rc));
	return rc;
}

int
tide_node_rt_start(const struct tide_nodeenv *ne, const struct tide_node_rt_opts *o,
		   struct tide_node_rt **out)
{
	const struct tide_node_dev_ops *dev = tide_node_dev_get();
	struct tide_node_rt *rt;
	uint64_t now;
	unsigned n = 0;
	int rc;

	*out = NULL;
	if (ne->dpdk_device[0] == '\0' || !ne->data_ip_set) {
		TIDE_LOG(ERR, "user-space TCP needs TIDE_DPDK_DEVICE and TIDE_DATA_IP in the node "
			      "file");
		return -EINVAL;
	}
	if (dev == NULL) {
		/* A build mistake, not a node-file one: see tide_node_dev.h, "Linking". */
		TIDE_LOG(ERR,
			 "user-space TCP on %s: no device driver linked: link pmd/eth "
			 "(tide_eth_node_dep)",
			 ne->dpdk_device);
		return -ENODEV;
	}
	rt = calloc(1, sizeof(*rt));
	if (rt == NULL)
		return -ENOMEM;
	rt->dev = dev;
	rt->ne = *ne;
	if (o != NULL)
		rt->o = *o;
	rc = tide_lcore_cpus_pick(ne->lcores, ne->lcores_per_numa, rt->info.cpus, TIDE_LCORE_MAX,
				  &n);
	if (rc != 0) {
		TIDE_LOG(ERR,
			 "TIDE_LCORES='%s' TIDE_LCORES_PER_NUMA=%u: no CPU for the polling "
			 "lcores: %s",
			 ne->lcores, ne->lcores_per_numa, strerror(-rc));
		free(rt);
		return rc;
	}
	rt->info.nlcores = rt->o.max_lcores != 0 && n > rt->o.max_lcores ? rt->o.max_lcores : n;
	rt->info.ip = ntohl(ne->data_ip.s_addr);
	inet_ntop(AF_INET, &ne->data_ip, rt->info.ip_str, sizeof(rt->info.ip_str));

	/* The driver logs why the environment or the port did not come up. */
	rc = dev->env_init(&rt->ne, rt->o.prog != NULL ? rt->o.prog : "tide", &rt->info.hugepages);
	if (rc != 0) {
		free(rt);
		return rc;
	}
	rt->env_up = true;
	rc = dev->port_open(&rt->ne, rt->info.cpus, rt->info.nlcores, &rt->port);
	if (rc != 0)
		goto fail;
	now = tide_mono_ns();
	for (unsigned i = 0; i < rt->info.nlcores; i++) {
		struct rt_lc *l = &rt->lcs[i];

		l->rt = rt;
		l->idx = i;
		rc = dev->queue_open(rt->port, i, &rt->ne, now, &l->q);
		if (rc != 0) {
			TIDE_LOG(ERR, "TIDE_FAULT='%s' not usable on queue %u: %s", ne->fault_spec,
				 i, strerror(-rc));
			goto fail;
		}
		rc = lcore_net_opts(rt, l);
		if (rc != 0)
			goto fail;
	}
	rt->info.csum = dev->queue_csum(rt->lcs[0].q);
	/* Hooks may use *out (tide_node_rt_port() for the link state): set it
	 * before the lcore threads exist, which orders the write before them. */
	*out = rt;
	rc = start_lcores(rt);
	if (rc != 0)
		goto fail;
	for (unsigned i = 0; i < rt->info.nlcores; i++) {
		struct rt_lc *l = &rt->lcs[i];

		rc = tide_lcore_run_sync(tide_lcore_get(rt->g, i), setup_on_lcore, l);
		if (rc == 0)
			rc = l->rc;
		if (rc != 0) {
			TIDE_LOG(ERR, "user-space TCP stack set-up on lcore %u failed: %s", i,
				 strerror(-rc));
			goto fail;
		}
	}
	/* Live counters for tools/tide-stats.py (index = lcore order); best
	 * effort: a process without telemetry still moves data. */
	for (unsigned i = 0; i < rt->info.nlcores; i++) {
		unsigned idx;

		if (dev->queue_publish(rt->lcs[i].q, rt->lcs[i].stack, &idx) == 0 && i == 0) {
			rt->info.published = true;
			rt->info.publish_index = idx;
		}
	}
	TIDE_LOG(INFO, "user-space TCP on %s, %s, %u lcore(s) from CPU %d, %s, checksums %s",
		 ne->dpdk_device, rt->info.ip_str, rt->info.nlcores, rt->info.cpus[0],
		 rt->info.hugepages ? "hugepages" : "no hugepages", rt->info.csum);
	return 0;
fail:
	/* Stops the lcores first: until then a hook may still read *out. */
	(void)tide_node_rt_destroy(rt);
	*out = NULL;
	return rc;
}

const struct tide_node_rt_info *
tide_node_rt_info(const struct tide_node_rt *rt)
{
	return &rt->info;
}

struct tide_lcore_group *
tide_node_rt_lcores(struct tide_node_rt *rt)
{
	return rt->g;
}

struct tide_net_stack *
tide_node_rt_stack(struct tide_node_rt *rt, unsigned idx)
{
	return idx < rt->info.nlcores ? rt->lcs[idx].stack : NULL;
}

const struct tide_node_queue *
tide_node_rt_queue(const struct tide_node_rt *rt, unsigned idx)
{
	return idx < rt->info.nlcores ? rt->lcs[idx].q : NULL;
}

struct tide_node_port *
tide_node_rt_port(struct tide_node_rt *rt)
{
	return rt->port;
}

void
tide_node_rt_stop(struct tide_node_rt *rt)
{
	if (rt->g != NULL)
		tide_lcore_group_stop(rt->g);
}

static void
log_stack(unsigned i, const struct tide_net_stats *st)
{
	TIDE_LOG(INFO,
		 "lcore %u user-space TCP: rx_frames %" PRIu64 " tx_frames %" PRIu64
		 " retrans %" PRIu64 " rto %" PRIu64 " resets %" PRIu64 " timeouts %" PRIu64,
		 i, st->rx_frames, st->tx_frames, st->tcp_retrans_segs, st->tcp_rto_fired,
		 st->tcp_conn_resets, st->tcp_conn_timeouts);
	/* Where stalls come from: frames the device refused or had no buffer
	 * for, loss recovery, and what the receiver saw. */
	TIDE_LOG(INFO,
		 "lcore %u user-space TCP: tx_dropped %" PRIu64 " tx_deferred %" PRIu64
		 " tx_nobufs %" PRIu64 " fast_retrans %" PRIu64 " sack_recoveries %" PRIu64
		 " sack_retrans %" PRIu64 " lost_retrans %" PRIu64 " tlp %" PRIu64
		 " dup_acks %" PRIu64 " rx_ooo %" PRIu64 " rx_ooo_dropped %" PRIu64
		 " rx_dup_bytes %" PRIu64 " out_of_window %" PRIu64 " window_probes %" PRIu64,
		 i, st->tx_dropped, st->tx_deferred, st->tx_nobufs, st->tcp_fast_retrans,
		 st->tcp_sack_recoveries, st->tcp_sack_retrans_segs, st->tcp_lost_retrans,
		 st->tcp_tlp_probes, st->tcp_dup_acks, st->tcp_rx_ooo_segs, st->tcp_rx_ooo_dropped,
		 st->tcp_rx_dup_bytes, st->tcp_rx_out_of_window, st->tcp_window_probes);
}

unsigned
tide_node_rt_destroy(struct tide_node_rt *rt)
{
	unsigned held = 0;

	if (rt == NULL)
		return 0;
	if (rt->g != NULL)
		tide_lcore_group_stop(rt->g);
	for (unsigned i = 0; i < rt->info.nlcores; i++) {
		struct rt_lc *l = &rt->lcs[i];

		if (l->stack != NULL)
			log_stack(i, tide_net_stats(l->stack));
		if (rt->g != NULL) {
			struct tide_lcore_stats ls;

			tide_lcore_stats_get(tide_lcore_get(rt->g, i), &ls);
			TIDE_LOG(INFO,
				 "lcore %u poller: %" PRIu64 " iterations, %" PRIu64
				 " busy, %" PRIu64 " sleeps (%" PRIu64
				 " on its receive interrupt%s, %" PRIu64 " ended by a frame)",
				 i, ls.iterations, ls.busy, ls.sleeps, ls.irq_sleeps,
				 l->irq ? "" : ": none", ls.irq_wakeups);
		}
		/* Unpublish (close) before the stack the telemetry reads goes away. */
		if (l->q != NULL)
			rt->dev->queue_close(l->q);
		l->q = NULL;
		tide_net_stack_destroy(l->stack);
		l->stack = NULL;
	}
	tide_lcore_group_destroy(rt->g);
	rt->g = NULL;
	if (rt->port != NULL) {
		/* Every packet buffer must be back once the stacks are gone:
		 * anything else is a leak that would starve a long run. The
		 * driver logs the port's counters first. */
		held = rt->dev->port_close(rt->port);
		if (held != 0)
			TIDE_LOG(ERR, "%u packet buffers still held at port close", held);
	}
	if (rt->env_up)
		rt->dev->env_fini();
	free(rt);
	return held;
}
