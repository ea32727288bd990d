/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ethdev ports: configure, start, burst, stop. One mempool per port on the
 * port's NUMA socket, sized so the RX rings can be full while every TX ring
 * is full too, plus per-lcore caches and headroom for packets being built.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tide_eth.h"
#include "tide_log.h"

#define POOL_CACHE      256
#define POOL_HEADROOM   2048
#define RING_PAIR_SLOTS 4096

struct tide_eth_port {
	uint16_t port_id;
	uint16_t nb_queues;
	struct rte_mempool *pool;
	struct rte_ring *rx_ring; /* net_ring pairs only: the ring this port receives from */
	struct rte_ether_addr mac;
	char name[RTE_ETH_NAME_MAX_LEN];
};

static void
opts_fill(const struct tide_eth_port_opts *in, struct tide_eth_port_opts *o)
{
	struct tide_eth_port_opts def = {0};

	*o = in != NULL ? *in : def;
	if (o->nb_queues == 0)
		o->nb_queues = 1;
	if (o->nb_rxd == 0)
		o->nb_rxd = 1024;
	if (o->nb_txd == 0)
		o->nb_txd = 1024;
	if (o->mbuf_dataroom == 0)
		o->mbuf_dataroom = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (o->nb_mbufs == 0)
		o->nb_mbufs = (uint32_t)o->nb_queues * (o->nb_rxd + o->nb_txd) +
			      rte_lcore_count() * POOL_CACHE + POOL_HEADROOM;
}

/* Configure queues and start an already-probed ethdev. */
static int
port_start(struct tide_eth_port *p, const struct tide_eth_port_opts *o)
{
	struct rte_eth_conf conf = {0};
	struct rte_eth_dev_info dev_info;
	int socket = rte_eth_dev_socket_id(p->port_id);
	char pool_name[RTE_MEMPOOL_NAMESIZE];
	uint16_t nb_rxd = o->nb_rxd, nb_txd = o->nb_txd;
	int rc;

	if (socket < 0)
		socket = (int)rte_socket_id();
	rc = rte_eth_dev_info_get(p->port_id, &dev_info);
	if (rc != 0) {
		TIDE_LOG(ERR, "%s: dev_info_get: %s", p->name, rte_strerror(-rc));
		return rc;
	}
	if (o->nb_queues > dev_info.max_rx_queues || o->nb_queues > dev_info.max_tx_queues) {
		TIDE_LOG(ERR, "%s: %u queue pairs requested, device has %u rx / %u tx", p->name,
			 o->nb_queues, dev_info.max_rx_queues, dev_info.max_tx_queues);
		return -EINVAL;
	}
	snprintf(pool_name, sizeof(pool_name), "tide_mb_%u", p->port_id);
	p->pool = rte_pktmbuf_pool_create(pool_name, o->nb_mbufs, POOL_CACHE, 0, o->mbuf_dataroom,
					  socket);
	if (p->pool == NULL) {
		rc = -rte_errno;
		TIDE_LOG(ERR, "%s: mbuf pool of %u x %u B on socket %d: %s", p->name, o->nb_mbufs,
			 o->mbuf_dataroom, socket, rte_strerror(rte_errno));
		return rc;
	}
	rc = rte_eth_dev_configure(p->port_id, o->nb_queues, o->nb_queues, &conf);
	if (rc != 0) {
		TIDE_LOG(ERR, "%s: configure: %s", p->name, rte_strerror(-rc));
		return rc;
	}
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &nb_rxd, &nb_txd);
	if (rc != 0) {
		TIDE_LOG(ERR, "%s: descriptor counts %u/%u: %s", p->name, nb_rxd, nb_txd,
			 rte_strerror(-rc));
		return rc;
	}
	for (uint16_t q = 0; q < o->nb_queues; q++) {
		rc = rte_eth_rx_queue_setup(p->port_id, q, nb_rxd, (unsigned)socket, NULL, p->pool);
		if (rc != 0) {
			TIDE_LOG(ERR, "%s: rx queue %u: %s", p->name, q, rte_strerror(-rc));
			return rc;
		}
		rc = rte_eth_tx_queue_setup(p->port_id, q, nb_txd, (unsigned)socket, NULL);
		if (rc != 0) {
			TIDE_LOG(ERR, "%s: tx queue %u: %s", p->name, q, rte_strerror(-rc));
			return rc;
		}
	}
	rc = rte_eth_dev_start(p->port_id);
	if (rc != 0) {
		TIDE_LOG(ERR, "%s: start: %s", p->name, rte_strerror(-rc));
		return rc;
	}
	p->nb_queues = o->nb_queues;
	/* Some virtual devices (net_ring) report an all-zero MAC, which no
	 * stack may use as a source. Give such a port a locally administered
	 * unicast address, unique per process and port. */
	if (rte_eth_macaddr_get(p->port_id, &p->mac) != 0 || rte_is_zero_ether_addr(&p->mac)) {
		uint32_t pid = (uint32_t)getpid();

		p->mac = (struct rte_ether_addr){{0x02, (uint8_t)(pid >> 16), (uint8_t)(pid >> 8),
						  (uint8_t)pid, (uint8_t)(p->port_id >> 8),
						  (uint8_t)p->port_id}};
		(void)rte_eth_dev_default_mac_addr_set(p->port_id, &p->mac);
	}
	return 0;
}

int
tide_eth_port_open(const char *devname, const struct tide_eth_port_opts *opts,
		   struct tide_eth_port **out)
{
	struct tide_eth_port_opts o;
	struct tide_eth_port *p;
	uint16_t port_id;
	int rc;

	if (rte_eth_dev_get_port_by_name(devname, &port_id) != 0) {
		TIDE_LOG(ERR, "no ethdev named '%s' (is it in the EAL's --vdev/-a list?)", devname);
		return -ENODEV;
	}
	opts_fill(opts, &o);
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->port_id = port_id;
	snprintf(p->name, sizeof(p->name), "%s", devname);
	rc = port_start(p, &o);
	if (rc != 0) {
		tide_eth_port_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

static int
ring_port_create(const char *name, struct rte_ring *rx, struct rte_ring *tx,
		 const struct tide_eth_port_opts *o, struct tide_eth_port **out)
{
	struct tide_eth_port *p = calloc(1, sizeof(*p));
	int id, rc;

	if (p == NULL)
		return -ENOMEM;
	id = rte_eth_from_rings(name, &rx, 1, &tx, 1, rte_socket_id());
	if (id < 0) {
		rc = -rte_errno;
		TIDE_LOG(ERR, "net_ring port %s: %s", name, rte_strerror(rte_errno));
		free(p);
		return rc;
	}
	p->port_id = (uint16_t)id;
	snprintf(p->name, sizeof(p->name), "%s", name);
	rc = port_start(p, o);
	if (rc != 0) {
		tide_eth_port_close(p);
		return rc;
	}
	/* Ownership of the RX ring passes to the port only once it started:
	 * on failure the caller frees both rings. */
	p->rx_ring = rx;
	*out = p;
	return 0;
}

int
tide_eth_ring_pair(const char *name_a, const char *name_b, const struct tide_eth_port_opts *opts,
		   struct tide_eth_port **a, struct tide_eth_port **b)
{
	struct tide_eth_port_opts o;
	struct rte_ring *ab, *ba;
	char rname[RTE_RING_NAMESIZE];
	int rc;

	opts_fill(opts, &o);
	/* One queue pair: net_ring maps queue i to ring i, and a pair joined
	 * by a single ring in each direction is all the demo and tests need. */
	o.nb_queues = 1;
	snprintf(rname, sizeof(rname), "%.12s>%.12s", name_a, name_b);
	ab = rte_ring_create(rname, RING_PAIR_SLOTS, rte_socket_id(),
			     RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(rname, sizeof(rname), "%.12s>%.12s", name_b, name_a);
	ba = rte_ring_create(rname, RING_PAIR_SLOTS, rte_socket_id(),
			     RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (ab == NULL || ba == NULL) {
		rc = -rte_errno;
		TIDE_LOG(ERR, "ring pair %s<->%s: %s", name_a, name_b, rte_strerror(rte_errno));
		rte_ring_free(ab);
		rte_ring_free(ba);
		return rc;
	}
	rc = ring_port_create(name_a, ba, ab, &o, a);
	if (rc != 0) {
		rte_ring_free(ab);
		rte_ring_free(ba);
		return rc;
	}
	rc = ring_port_create(name_b, ab, ba, &o, b);
	if (rc != 0) {
		tide_eth_port_close(*a); /* frees ba */
		rte_ring_free(ab);
		*a = NULL;
		return rc;
	}
	return 0;
}

unsigned
tide_eth_port_close(struct tide_eth_port *p)
{
	struct rte_mbuf *pkts[64];
	unsigned in_use = 0;

	if (p == NULL)
		return 0;
	/* Drain what the device still holds so the pool can be freed whole. */
	for (uint16_t q = 0; q < p->nb_queues; q++) {
		uint16_t n;

		while ((n = rte_eth_rx_burst(p->port_id, q, pkts, 64)) > 0)
			rte_pktmbuf_free_bulk(pkts, n);
	}
	if (p->nb_queues != 0)
		(void)rte_eth_dev_stop(p->port_id);
	(void)rte_eth_dev_close(p->port_id);
	rte_ring_free(p->rx_ring);
	if (p->pool != NULL) {
		in_use = rte_mempool_in_use_count(p->pool);
		if (in_use != 0)
			TIDE_LOG(WARN, "%s: closing with %u mbufs still held by callers", p->name,
				 in_use);
		rte_mempool_free(p->pool);
	}
	free(p);
	return in_use;
}

uint16_t
tide_eth_port_id(const struct tide_eth_port *p)
{
	return p->port_id;
}

void
tide_eth_port_mac(const struct tide_eth_port *p, uint8_t mac[6])
{
	memcpy(mac, p->mac.addr_bytes, 6);
}

bool
tide_eth_port_link_up(const struct tide_eth_port *p)
{
	struct rte_eth_link link;

	if (rte_eth_link_get_nowait(p->port_id, &link) != 0)
		return false;
	return link.link_status == RTE_ETH_LINK_UP;
}

struct rte_mempool *
tide_eth_port_pool(const struct tide_eth_port *p)
{
	return p->pool;
}

int
tide_eth_port_stats(const struct tide_eth_port *p, struct tide_eth_port_stats *st)
{
	struct rte_eth_stats s;
	int rc = rte_eth_stats_get(p->port_id, &s);

	if (rc != 0)
		return rc;
	st->ipackets = s.ipackets;
	st->opackets = s.opackets;
	st->ibytes = s.ibytes;
	st->obytes = s.obytes;
	st->imissed = s.imissed;
	st->ierrors = s.ierrors;
	st->oerrors = s.oerrors;
	st->rx_nombuf = s.rx_nombuf;
	return 0;
}

uint16_t
tide_eth_rx(struct tide_eth_port *p, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(p->port_id, q, pkts, n);
}

uint16_t
tide_eth_tx(struct tide_eth_port *p, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(p->port_id, q, pkts, n);
}
