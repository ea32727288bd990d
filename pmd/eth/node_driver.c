/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pmd/eth as the node runtime's device driver (engine/node/tide_node_dev.h):
 * the EAL from the node file, one ethdev port with a queue pair per polling
 * lcore, and per queue the netdev that feeds its stack, the queue's receive
 * interrupt and its RSS port picker. Nothing here decides policy of its own:
 * each op is the tide_eth_* calls the runtime used to make itself.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide_eth_node.h"
#include "tide_eth_rss.h"
#include "tide_log.h"

struct tide_node_port {
	struct tide_eth_port *port;
	unsigned nqueues;
};

struct tide_node_queue {
	struct tide_eth_netdev nd; /* the stack's device (tide_net_opts.dev) */
	struct tide_node_port *port;
	uint16_t idx;
	struct tide_eth_rx_intr ri;    /* after queue_intr_open succeeded */
	struct tide_eth_rss_picker pk; /* port_arg, when the port has several queues */
	uint32_t tx_offloads;          /* what queue_net_opts gave the stack */
	bool elide;
};

static int
eth_env_init(const struct tide_nodeenv *ne, const char *prog, bool *hugepages)
{
	struct tide_eal_opts eo;
	struct tide_eal_info ei;
	int rc;

	/* eo points into ne, which the runtime keeps. */
	tide_eth_node_eal_opts(ne, prog, true, &eo);
	rc = tide_eal_init(&eo, &ei);
	if (rc != 0) {
		TIDE_LOG(ERR, "DPDK EAL did not start: %s", strerror(-rc));
		return rc;
	}
	*hugepages = ei.hugepages;
	return 0;
}

static void
eth_env_fini(void)
{
	(void)tide_eal_fini();
}

static int
eth_port_open(const struct tide_nodeenv *ne, const int *cpus, unsigned nqueues,
	      struct tide_node_port **out)
{
	struct tide_eth_port_opts po;
	char devname[128], rxname[128];
	struct tide_node_port *p;
	int *sockets;
	int rc;

	if (nqueues == 0 || nqueues > UINT16_MAX)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	sockets = calloc(nqueues, sizeof(*sockets));
	if (p == NULL || sockets == NULL) {
		free(p);
		free(sockets);
		return -ENOMEM;
	}
	tide_eth_node_port_opts(ne, &po, devname, rxname, sizeof(devname));
	for (unsigned i = 0; i < nqueues; i++)
		sockets[i] = tide_eal_cpu_socket(cpus[i]);
	po.nb_queues = (uint16_t)nqueues;
	po.queue_socket = sockets;
	rc = tide_eth_port_open(devname, &po, &p->port);
	free(sockets); /* read only while the port opens */
	if (rc != 0) {
		TIDE_LOG(ERR, "TIDE_DPDK_DEVICE: cannot open %s with %u queue pair(s): %s", devname,
			 nqueues, strerror(-rc));
		free(p);
		return rc;
	}
	p->nqueues = nqueues;
	*out = p;
	return 0;
}

static unsigned
eth_port_close(struct tide_node_port *p)
{
	struct tide_eth_port_stats ps;
	unsigned held;

	if (tide_eth_port_stats(p->port, &ps) == 0)
		TIDE_LOG(INFO,
			 "port: ipackets %" PRIu64 " opackets %" PRIu64 " imissed %" PRIu64
			 " ierrors %" PRIu64 " oerrors %" PRIu64 " rx_nombuf %" PRIu64,
			 ps.ipackets, ps.opackets, ps.imissed, ps.ierrors, ps.oerrors,
			 ps.rx_nombuf);
	held = tide_eth_port_close(p->port);
	free(p);
	return held;
}

static int
eth_queue_open(struct tide_node_port *p, unsigned idx, const struct tide_nodeenv *ne, uint64_t now,
	       struct tide_node_queue **out)
{
	struct tide_eth_fault_opts fo;
	const struct tide_eth_fault_opts *fault = tide_eth_node_fault_opts(ne, now, &fo);
	struct tide_node_queue *q;
	int rc;

	if (idx >= p->nqueues)
		return -EINVAL;
	q = calloc(1, sizeof(*q)); /* zeroed, as tide_eth_netdev_init() wants it */
	if (q == NULL)
		return -ENOMEM;
	rc = tide_eth_netdev_init(&q->nd, p->port, (uint16_t)idx, fault);
	if (rc != 0) {
		free(q);
		return rc;
	}
	q->port = p;
	q->idx = (uint16_t)idx;
	*out = q;
	return 0;
}

static int
eth_queue_net_opts(struct tide_node_queue *q, const struct tide_nodeenv *ne,
		   struct tide_net_opts *no)
{
	const struct tide_eth_rss *rss = tide_eth_port_rss(q->port->port);
	enum tide_eth_csum mode = tide_eth_node_csum(ne);
	int rc;

	no->dev_ops = &tide_eth_net_dev_ops;
	no->dev = &q->nd;
	tide_eth_port_mac(q->port->port, no->mac);
	rc = tide_eth_netdev_csum(&q->nd, mode, &no->tx_offloads, &no->cksum_elide);
	if (rc != 0) {
		/* The glue logged the port, its driver and what it lacks. */
		TIDE_LOG(ERR, "TIDE_CSUM=%s refused on %s: %s", tide_eth_csum_name(mode),
			 ne->dpdk_device, strerror(-rc));
		return rc;
	}
	q->tx_offloads = no->tx_offloads;
	q->elide = no->cksum_elide;
	if (q->port->nqueues > 1 && rss != NULL) {
		/* Replies to this lcore's active opens must come back to its queue
		 * (queue i is lcore i's). */
		rc = tide_eth_rss_picker_init(&q->pk, rss, q->idx, no->ip, 0, 0);
		if (rc != 0) {
			TIDE_LOG(ERR, "lcore %u: no RSS port picker: %s", q->idx, strerror(-rc));
			return rc;
		}
		no->port_pick = tide_eth_rss_port_pick;
		no->port_arg = &q->pk;
	}
	return 0;
}

static const char *
eth_queue_csum(const struct tide_node_queue *q)
{
	if (q->elide)
		return "elided";
	return q->tx_offloads != 0 || q->nd.rx_trust != 0 ? "offloaded where the device can"
							  : "in software";
}

static unsigned
eth_queue_poll(struct tide_node_queue *q, struct tide_net_stack *stack, uint64_t now)
{
	return tide_eth_netdev_poll(&q->nd, stack, now);
}

static uint64_t
eth_queue_next_due(const struct tide_node_queue *q)
{
	return tide_eth_netdev_next_due(&q->nd);
}

static int
eth_queue_intr_open(struct tide_node_queue *q)
{
	return tide_eth_rx_intr_open(q->port->port, q->idx, &q->ri);
}

static int
eth_queue_intr_arm(struct tide_node_queue *q)
{
	return tide_eth_rx_intr_arm(&q->ri);
}

static void
eth_queue_intr_disarm(struct tide_node_queue *q)
{
	tide_eth_rx_intr_disarm(&q->ri);
}

static int
eth_queue_publish(struct tide_node_queue *q, const struct tide_net_stack *stack, unsigned *index)
{
	return tide_eth_netdev_publish(&q->nd, stack, index);
}

static void
eth_queue_close(struct tide_node_queue *q)
{
	tide_eth_netdev_fini(&q->nd); /* unpublishes, frees held and delayed frames */
	free(q);
}

const struct tide_node_dev_ops tide_eth_node_dev_ops = {
	.name = "pmd/eth",
	.env_init = eth_env_init,
	.env_fini = eth_env_fini,
	.thread_init = tide_eal_thread_register,
	.port_open = eth_port_open,
	.port_close = eth_port_close,
	.queue_open = eth_queue_open,
	.queue_net_opts = eth_queue_net_opts,
	.queue_csum = eth_queue_csum,
	.queue_poll = eth_queue_poll,
	.queue_next_due = eth_queue_next_due,
	.queue_intr_open = eth_queue_intr_open,
	.queue_intr_arm = eth_queue_intr_arm,
	.queue_intr_disarm = eth_queue_intr_disarm,
	.queue_publish = eth_queue_publish,
	.queue_close = eth_queue_close,
};

/* Before main() (or while libtidestore.so loads): a runtime started later
 * finds the driver without its program naming pmd/eth in code. */
__attribute__((constructor)) static void
eth_node_driver_register(void)
{
	int rc = tide_node_dev_register(&tide_eth_node_dev_ops);

	if (rc != 0)
		TIDE_LOG(ERR, "pmd/eth: not the node runtime's device driver: %s", strerror(-rc));
}

struct tide_eth_port *
tide_eth_node_port(const struct tide_node_port *port)
{
	if (port == NULL || tide_node_dev_get() != &tide_eth_node_dev_ops)
		return NULL;
	return port->port;
}

const struct tide_eth_netdev *
tide_eth_node_netdev(const struct tide_node_queue *q)
{
	if (q == NULL || tide_node_dev_get() != &tide_eth_node_dev_ops)
		return NULL;
	return &q->nd;
}
