/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ethdev ports: configure, start, burst, stop, with one queue pair per
 * polling lcore and one mempool per NUMA socket those lcores sit on, sized
 * so the socket's RX rings can be full while its TX rings (and, under
 * software steering, its steering rings) are full too, plus per-lcore caches
 * and headroom for packets being built.
 *
 * Steering (see enum tide_eth_steer) keeps each TCP connection on one lcore:
 * hardware RSS with a key and RETA we program and read back, or, for devices
 * without RSS (every vdev: net_ring, net_memif, net_af_packet), a software
 * distributor that hashes exactly as the NIC would, so one port picker works
 * for both.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "intr_hold.h"
#include "memif_intr.h"
#include "memif_publish.h"
#include "tide_eth.h"
#include "tide_eth_rss.h"
#include "tide_log.h"
#include "tide_clock.h"

#define POOL_CACHE       256
#define POOL_HEADROOM    2048
#define RING_PAIR_SLOTS  4096
#define RING_PAIR_MAX    16 /* net_ring's RTE_PMD_RING_MAX_RX_RINGS */
#define STEER_BURST      32
#define PREFETCH_AHEAD   4
#define INTR_DEADLINE_MS 5000 /* for the EAL interrupt thread to answer a hold */
#define DRAIN_BURSTS     1024 /* x 64 frames: more than any RX ring holds */
#define MAX_QUEUES       RTE_MAX_LCORE
#define MEMIF_WAIT_MS    30000 /* for a memif client's server to listen */
#define MEMIF_RETRY_MS   10

struct steer_q {
	struct rte_ring *ring; /* frames steered to this queue; SP under rx_lock, SC by owner */
	struct rte_mbuf *stage[STEER_BURST];
	uint16_t nstage;
	struct tide_eth_steer_stats st;
} __rte_cache_aligned;

struct tide_eth_port {
	uint16_t port_id;
	uint16_t nb_queues; /* logical queues (lcores); 0 until started */
	uint16_t dev_rxq, dev_txq;
	enum tide_eth_steer steer;
	bool tx_shared;
	bool started;
	bool lsc_registered;
	bool memif; /* net_memif: close under an interrupt-thread hold */
	/* net_memif: the PMD's lock its peer-disconnect takes before unmapping the
	 * rings (memif_intr.h); held around every burst. NULL: none to take. */
	rte_spinlock_t *burst_lock;
	unsigned zc_ring_bufs; /* memif zero-copy client: mbufs its RX rings keep after close */
	int socket;
	struct rte_mempool *pools[RTE_MAX_NUMA_NODES]; /* per socket, NULL if unused */
	struct rte_mempool **qpool;                    /* per logical queue */
	struct steer_q *sq;                            /* per logical queue; NULL under NONE */
	rte_spinlock_t rx_lock;                        /* SW: one distributor at a time */
	uint16_t rx_next;                              /* SW: device RX queue to poll next */
	rte_spinlock_t *tx_lock;                       /* per device TX queue, when shared */
	struct tide_eth_rss rss;
	uint64_t rss_hf; /* HW: the hash types configured */
	struct tide_eth_port_caps caps;
	uint64_t lsc_events;        /* written by the interrupt thread */
	struct rte_ring **rx_rings; /* net_ring pairs only: the rings this port receives from */
	uint16_t nb_rx_rings;
	struct rte_ether_addr mac;
	struct tide_eth_port *rxp; /* duplex: the device frames are received from */
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
	if (o->reta_size == 0)
		o->reta_size = TIDE_ETH_RSS_RETA_DEFAULT;
	if (o->ring_pair_rings == 0)
		o->ring_pair_rings = o->nb_queues;
}

static int
lsc_event(uint16_t port_id, enum rte_eth_event_type ev, void *arg, void *ret_param)
{
	struct tide_eth_port *p = arg;
	struct rte_eth_link link;

	(void)ret_param;
	if (ev != RTE_ETH_EVENT_INTR_LSC)
		return 0;
	__atomic_fetch_add(&p->lsc_events, 1, __ATOMIC_RELAXED);
	if (rte_eth_link_get_nowait(port_id, &link) != 0)
		TIDE_LOG(NOTICE, "%s: link changed, state unreadable", p->name);
	else if (link.link_status == RTE_ETH_LINK_UP)
		TIDE_LOG(NOTICE, "%s: link up, %u Mbps %s-duplex", p->name, link.link_speed,
			 link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? "full" : "half");
	else
		TIDE_LOG(NOTICE, "%s: link down", p->name);
	return 0;
}

/* The socket of queue q's lcore; -EINVAL when the caller named a bad one. */
static int
queue_socket(const struct tide_eth_port *p, const struct tide_eth_port_opts *o, uint16_t q)
{
	int s = o->queue_socket != NULL ? o->queue_socket[q] : -1;

	if (s < 0)
		return p->socket;
	return s < RTE_MAX_NUMA_NODES ? s : -EINVAL;
}

/*
 * Fault in a pool's memory now. Without hugepages the EAL's memory is
 * anonymous 4 KiB pages, present only once written: the first pass of
 * frames through a fresh pool would take a page fault per frame buffer
 * (thousands, and slow on a paravirtualised VM), inside the first transfers.
 * MADV_POPULATE_WRITE (Linux 5.14) faults the range in without touching its
 * contents; older kernels refuse it and keep faulting on first use.
 */
static void
pool_mem_populate(struct rte_mempool *mp, void *arg, struct rte_mempool_memhdr *memhdr,
		  unsigned mem_idx)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)memhdr->addr & ~(pg - 1);
	uintptr_t end = (uintptr_t)memhdr->addr + memhdr->len;

	(void)mp;
	(void)arg;
	(void)mem_idx;
#ifdef MADV_POPULATE_WRITE
	(void)madvise((void *)a, end - a, MADV_POPULATE_WRITE);
#else
	(void)a;
	(void)end;
#endif
}

static int
pools_create(struct tide_eth_port *p, const struct tide_eth_port_opts *o, uint32_t steer_slots)
{
	unsigned per_socket[RTE_MAX_NUMA_NODES] = {0};

	p->qpool = calloc(o->nb_queues, sizeof(*p->qpool));
	if (p->qpool == NULL)
		return -ENOMEM;
	for (uint16_t q = 0; q < o->nb_queues; q++) {
		int s = queue_socket(p, o, q);

		if (s < 0) {
			TIDE_LOG(ERR, "%s: queue %u: NUMA socket %d out of range", p->name, q,
				 o->queue_socket[q]);
			return -EINVAL;
		}
		per_socket[s]++;
	}
	for (int s = 0; s < RTE_MAX_NUMA_NODES; s++) {
		char pool_name[RTE_MEMPOOL_NAMESIZE];
		uint32_t n = o->nb_mbufs;

		if (per_socket[s] == 0)
			continue;
		if (n == 0)
			n = per_socket[s] * (o->nb_rxd + o->nb_txd + steer_slots) +
			    rte_lcore_count() * POOL_CACHE + POOL_HEADROOM;
		snprintf(pool_name, sizeof(pool_name), "tide_mb_%u_%d", p->port_id, s);
		p->pools[s] =
			rte_pktmbuf_pool_create(pool_name, n, POOL_CACHE, 0, o->mbuf_dataroom, s);
		if (p->pools[s] == NULL) {
			TIDE_LOG(ERR, "%s: mbuf pool of %u x %u B on socket %d: %s", p->name, n,
				 o->mbuf_dataroom, s, rte_strerror(rte_errno));
			return -rte_errno;
		}
		p->caps.nb_pools++;
		rte_mempool_mem_iter(p->pools[s], pool_mem_populate, NULL);
	}
	for (uint16_t q = 0; q < o->nb_queues; q++)
		p->qpool[q] = p->pools[queue_socket(p, o, q)];
	return 0;
}

/* Decide the steering mode and device queue counts from what the device offers. */
static int
layout_choose(struct tide_eth_port *p, const struct tide_eth_port_opts *o,
	      const struct rte_eth_dev_info *di)
{
	bool has_rss = (di->flow_type_rss_offloads & RTE_ETH_RSS_NONFRAG_IPV4_TCP) != 0 &&
		       o->nb_queues <= di->max_rx_queues;

	p->steer = o->steer;
	if (p->steer == TIDE_ETH_STEER_AUTO) {
		if (o->nb_queues == 1)
			p->steer = TIDE_ETH_STEER_NONE;
		else
			p->steer = has_rss ? TIDE_ETH_STEER_HW : TIDE_ETH_STEER_SW;
	}
	if (p->steer == TIDE_ETH_STEER_HW && !has_rss) {
		TIDE_LOG(ERR,
			 "%s: hardware RSS asked for but the device hashes 0x%llx over %u rx "
			 "queues (%u wanted)",
			 p->name, (unsigned long long)di->flow_type_rss_offloads, di->max_rx_queues,
			 o->nb_queues);
		return -ENOTSUP;
	}
	if (p->steer == TIDE_ETH_STEER_SW) {
		/* Poll every queue the device may deliver to (net_ring and memif
		 * peers send on queue i to our queue i), but at least one. */
		p->dev_rxq = RTE_MIN(o->nb_queues, di->max_rx_queues);
		p->dev_txq = RTE_MIN(o->nb_queues, di->max_tx_queues);
	} else {
		if (o->nb_queues > di->max_rx_queues ||
		    (p->steer == TIDE_ETH_STEER_NONE && o->nb_queues > di->max_tx_queues)) {
			TIDE_LOG(ERR, "%s: %u queue pairs requested, device has %u rx / %u tx",
				 p->name, o->nb_queues, di->max_rx_queues, di->max_tx_queues);
			return -EINVAL;
		}
		p->dev_rxq = o->nb_queues;
		p->dev_txq = RTE_MIN(o->nb_queues, di->max_tx_queues);
	}
	if (p->dev_rxq == 0 || p->dev_txq == 0)
		return -EINVAL;
	p->tx_shared = p->dev_txq < o->nb_queues;
	return 0;
}

/* The key to program: the caller's, or the symmetric one at the device's size. */
static int
key_choose(struct tide_eth_port *p, const struct tide_eth_port_opts *o,
	   const struct rte_eth_dev_info *di, uint16_t reta_size)
{
	size_t dev_len = di->hash_key_size != 0 ? di->hash_key_size : 40;
	int rc;

	if (o->rss_key != NULL && p->steer == TIDE_ETH_STEER_HW && o->rss_key_len != dev_len) {
		TIDE_LOG(ERR, "%s: RSS key of %u bytes, device wants %zu", p->name, o->rss_key_len,
			 dev_len);
		return -EINVAL;
	}
	if (o->rss_key != NULL)
		rc = tide_eth_rss_init(&p->rss, o->rss_key, o->rss_key_len, reta_size,
				       o->nb_queues);
	else
		rc = tide_eth_rss_init(&p->rss, NULL, p->steer == TIDE_ETH_STEER_HW ? dev_len : 40,
				       reta_size, o->nb_queues);
	if (rc != 0)
		TIDE_LOG(ERR, "%s: RSS key %u bytes / RETA %u entries not usable", p->name,
			 o->rss_key != NULL ? o->rss_key_len : (unsigned)dev_len, reta_size);
	return rc;
}

/* After start: program the RETA round-robin and read back what the device
 * really uses, so the picker predicts the device and not our intent. */
static int
hw_rss_sync(struct tide_eth_port *p)
{
	struct rte_eth_rss_reta_entry64 reta[TIDE_ETH_RSS_RETA_MAX / RTE_ETH_RETA_GROUP_SIZE];
	uint16_t n = p->rss.reta_size;
	uint8_t key[TIDE_ETH_RSS_KEY_MAX];
	struct rte_eth_rss_conf rc_conf = {.rss_key = key, .rss_key_len = p->rss.key_len};
	int rc;

	memset(reta, 0, sizeof(reta));
	for (uint16_t i = 0; i < n; i++) {
		reta[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ull << (i % RTE_ETH_RETA_GROUP_SIZE);
		reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] =
			p->rss.reta[i];
	}
	rc = rte_eth_dev_rss_reta_update(p->port_id, reta, n);
	if (rc != 0)
		TIDE_LOG(WARN, "%s: RETA update: %s (reading the device's own)", p->name,
			 rte_strerror(-rc));
	rc = rte_eth_dev_rss_reta_query(p->port_id, reta, n);
	if (rc == 0) {
		for (uint16_t i = 0; i < n; i++) {
			uint16_t q =
				reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];

			if (q >= p->nb_queues) {
				TIDE_LOG(ERR, "%s: RETA entry %u -> queue %u of %u", p->name, i, q,
					 p->nb_queues);
				return -EINVAL;
			}
			p->rss.reta[i] = q;
		}
	} else {
		TIDE_LOG(WARN, "%s: RETA query: %s; assuming entry i -> queue i %% %u", p->name,
			 rte_strerror(-rc), p->nb_queues);
	}
	rc = rte_eth_dev_rss_hash_conf_get(p->port_id, &rc_conf);
	if (rc == 0 && memcmp(key, p->rss.key, p->rss.key_len) != 0) {
		/* Some PMDs ignore the key given at configure time (net_null
		 * does); set it once more before believing the device. */
		struct rte_eth_rss_conf want = {
			.rss_key = p->rss.key, .rss_key_len = p->rss.key_len, .rss_hf = p->rss_hf};

		if (rte_eth_dev_rss_hash_update(p->port_id, &want) == 0)
			rc = rte_eth_dev_rss_hash_conf_get(p->port_id, &rc_conf);
	}
	if (rc != 0) {
		TIDE_LOG(WARN, "%s: RSS key not readable (%s); assuming ours", p->name,
			 rte_strerror(-rc));
	} else if (memcmp(key, p->rss.key, p->rss.key_len) != 0) {
		struct tide_eth_rss dev = p->rss;

		TIDE_LOG(WARN, "%s: device kept its own RSS key; predicting with it", p->name);
		/* Re-initialise for the key's lookup tables; keep the RETA read back. */
		if (tide_eth_rss_init(&p->rss, key, dev.key_len, dev.reta_size, dev.nb_queues) != 0)
			return -EINVAL;
		memcpy(p->rss.reta, dev.reta, sizeof(dev.reta));
	}
	return 0;
}

static int
steer_setup(struct tide_eth_port *p, const struct tide_eth_port_opts *o, uint32_t slots)
{
	p->sq = rte_zmalloc_socket("tide_steer", sizeof(*p->sq) * o->nb_queues, RTE_CACHE_LINE_SIZE,
				   p->socket);
	if (p->sq == NULL)
		return -ENOMEM;
	for (uint16_t q = 0; q < o->nb_queues; q++) {
		char rname[RTE_RING_NAMESIZE];
		int s = queue_socket(p, o, q);

		snprintf(rname, sizeof(rname), "tide_st_%u_%u", p->port_id, q);
		p->sq[q].ring = rte_ring_create(rname, slots, s, RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (p->sq[q].ring == NULL) {
			TIDE_LOG(ERR, "%s: steering ring %u: %s", p->name, q,
				 rte_strerror(rte_errno));
			return -rte_errno;
		}
	}
	return 0;
}

/* A memif client (role=client, memif's default) whose server is not
 * listening yet fails rte_eth_dev_start; a duplex pair of links makes each
 * node the server of one and the client of the other, so neither order of
 * start-up works without waiting. */
static bool
memif_client(const struct rte_eth_dev_info *di)
{
	const char *args = tide_memif_devargs(di);

	return args != NULL && !tide_memif_arg_is(args, "role", "server");
}

/*
 * A memif zero-copy client lends the server its own mbufs, up to a ring's
 * worth per RX queue (devarg rsize: log2 of the ring size, default 10), and
 * DPDK 22.11 never takes them back: neither stop nor close frees them. They
 * are returned with the pool, not leaked by a caller; close counts them apart.
 */
static unsigned
memif_zc_ring_bufs(const struct rte_eth_dev_info *di, uint16_t nb_rxq)
{
	const char *args = tide_memif_devargs(di), *r;
	unsigned log2 = 10;
	size_t len;

	if (!memif_client(di) || !tide_memif_arg_is(args, "zero-copy", "yes"))
		return 0;
	r = tide_memif_arg_find(args, "rsize", &len);
	if (r != NULL)
		log2 = (unsigned)strtoul(r, NULL, 10);
	return log2 <= 14 ? (unsigned)nb_rxq << log2 : 0;
}

/*
 * Device bursts. On net_memif a peer's disconnect runs on the EAL interrupt
 * thread and unmaps the rings a burst reads (memif_intr.h); holding the PMD's
 * lock for the burst makes the disconnect wait until the burst is over, and a
 * burst that starts after the disconnect took the lock finds the link down
 * and touches nothing. Bounds: the lock is held for one burst (at most n
 * frames copied) or, by the interrupt thread, for the head of a disconnect
 * (a control message and a callback unregistration); queues of one memif
 * port serialise their bursts on it.
 */
enum burst_dir { BURST_RX, BURST_TX };

static inline uint16_t
dev_burst(const struct tide_eth_port *p, enum burst_dir dir, uint16_t q, struct rte_mbuf **pkts,
	  uint16_t n)
{
	if (p->burst_lock != NULL)
		rte_spinlock_lock(p->burst_lock);
	n = dir == BURST_RX ? rte_eth_rx_burst(p->port_id, q, pkts, n)
			    : rte_eth_tx_burst(p->port_id, q, pkts, n);
	if (p->burst_lock != NULL)
		rte_spinlock_unlock(p->burst_lock);
	return n;
}

/*
 * rte_eth_dev_start, and for a memif client again every MEMIF_RETRY_MS until
 * its server listens, within MEMIF_WAIT_MS: the client's start is its one
 * connect. A Tide server's socket appears only once its device is started
 * (memif_publish.h), so a connect that succeeds reaches a server that will
 * take it. memif's own error line (one per attempt) is silenced after the
 * first. A started memif server publishes its socket here.
 */
static int
dev_start(struct tide_eth_port *p, const struct rte_eth_dev_info *di)
{
	int rc = rte_eth_dev_start(p->port_id), logtype = -1;
	uint32_t level = 0;
	uint64_t deadline = tide_mono_ms() + MEMIF_WAIT_MS;

	if (rc != 0 && memif_client(di)) {
		TIDE_LOG(NOTICE, "%s: waiting up to %u s for the memif server to listen", p->name,
			 MEMIF_WAIT_MS / 1000);
		logtype = rte_log_register("pmd.net.memif");
		if (logtype >= 0) {
			level = (uint32_t)rte_log_get_level((uint32_t)logtype);
			(void)rte_log_set_level((uint32_t)logtype, RTE_LOG_EMERG);
		}
		while (rc != 0 && tide_mono_ms() < deadline) {
			usleep(MEMIF_RETRY_MS * 1000);
			rc = rte_eth_dev_start(p->port_id);
		}
		if (logtype >= 0)
			(void)rte_log_set_level((uint32_t)logtype, level);
		if (rc != 0)
			TIDE_LOG(ERR,
				 "%s: no memif server listened within %u s (is the peer "
				 "running, with role=server on the same socket?)",
				 p->name, MEMIF_WAIT_MS / 1000);
	}
	if (rc == 0)
		rc = tide_memif_publish(p->name);
	return rc;
}

/* Configure queues and start an already-probed ethdev. */
static int
port_start(struct tide_eth_port *p, const struct tide_eth_port_opts *o)
{
	struct rte_eth_conf conf = {0};
	struct rte_eth_dev_info di;
	uint16_t nb_rxd = o->nb_rxd, nb_txd = o->nb_txd, reta_size;
	uint32_t steer_slots = 0;
	int rc;

	p->socket = rte_eth_dev_socket_id(p->port_id);
	if (p->socket < 0)
		p->socket = (int)rte_socket_id();
	if (p->socket < 0 || p->socket >= RTE_MAX_NUMA_NODES)
		p->socket = 0;
	if (o->nb_queues > MAX_QUEUES)
		return -EINVAL;
	rc = rte_eth_dev_info_get(p->port_id, &di);
	if (rc != 0) {
		TIDE_LOG(ERR, "%s: dev_info_get: %s", p->name, rte_strerror(-rc));
		return rc;
	}
	snprintf(p->caps.driver, sizeof(p->caps.driver), "%s",
		 di.driver_name != NULL ? di.driver_name : "?");
	/* Register the hold before memif's own sources exist: see intr_hold.h. */
	if (strcmp(p->caps.driver, "net_memif") == 0 && tide_intr_hold_init() == 0)
		p->memif = true;
	p->caps.max_rx_queues = di.max_rx_queues;
	p->caps.max_tx_queues = di.max_tx_queues;
	p->caps.flow_type_rss_offloads = di.flow_type_rss_offloads;
	p->caps.reta_size = di.reta_size;
	p->caps.hash_key_size = di.hash_key_size;
	p->caps.lsc = di.dev_flags != NULL && (*di.dev_flags & RTE_ETH_DEV_INTR_LSC) != 0;
	rc = layout_choose(p, o, &di);
	if (rc != 0)
		return rc;
	p->caps.dev_rxq = p->dev_rxq;
	p->caps.dev_txq = p->dev_txq;
	p->caps.tx_shared = p->tx_shared;
	p->nb_queues = o->nb_queues;

	if (p->steer == TIDE_ETH_STEER_HW)
		reta_size = di.reta_size != 0 && di.reta_size <= TIDE_ETH_RSS_RETA_MAX
				    ? di.reta_size
				    : TIDE_ETH_RSS_RETA_DEFAULT;
	else if (p->steer == TIDE_ETH_STEER_SW)
		reta_size = o->reta_size;
	else
		reta_size = 1;
	rc = key_choose(p, o, &di, reta_size);
	if (rc != 0)
		return rc;
	if (p->steer == TIDE_ETH_STEER_NONE)
		p->rss.nb_queues = 1; /* queue i is not a hash result: predict queue 0 */
	if (p->steer == TIDE_ETH_STEER_SW || (p->steer == TIDE_ETH_STEER_HW && o->nb_queues > 1))
		steer_slots = rte_align32pow2((uint32_t)o->nb_rxd * 2);
	rc = pools_create(p, o, p->steer == TIDE_ETH_STEER_SW ? steer_slots : 0);
	if (rc != 0)
		return rc;
	if (steer_slots != 0) {
		rc = steer_setup(p, o, steer_slots);
		if (rc != 0)
			return rc;
	}
	if (p->tx_shared) {
		p->tx_lock = calloc(p->dev_txq, sizeof(*p->tx_lock));
		if (p->tx_lock == NULL)
			return -ENOMEM;
		for (uint16_t q = 0; q < p->dev_txq; q++)
			rte_spinlock_init(&p->tx_lock[q]);
	}
	rte_spinlock_init(&p->rx_lock);

	if (p->steer == TIDE_ETH_STEER_HW) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_key = p->rss.key;
		conf.rx_adv_conf.rss_conf.rss_key_len = p->rss.key_len;
		p->rss_hf = di.flow_type_rss_offloads &
			    (RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_IPV4 |
			     RTE_ETH_RSS_FRAG_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_OTHER);
		conf.rx_adv_conf.rss_conf.rss_hf = p->rss_hf;
		conf.rxmode.offloads |= di.rx_offload_capa & RTE_ETH_RX_OFFLOAD_RSS_HASH;
	}
	/* Unless the caller chose: checksums both ways and chained TX frames (zero-copy
	 * sends), whichever the device has; the stack falls back to software for the rest. */
	uint64_t want_rx = o->rx_offloads != 0
				   ? o->rx_offloads
				   : RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
	uint64_t want_tx = o->tx_offloads != 0
				   ? o->tx_offloads
				   : RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
					     RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	conf.rxmode.offloads |= want_rx & di.rx_offload_capa;
	conf.txmode.offloads |= want_tx & di.tx_offload_capa;
	if ((o->rx_offloads & ~di.rx_offload_capa) != 0 ||
	    (o->tx_offloads & ~di.tx_offload_capa) != 0)
		TIDE_LOG(INFO, "%s: offloads not available: rx 0x%llx tx 0x%llx", p->name,
			 (unsigned long long)(o->rx_offloads & ~di.rx_offload_capa),
			 (unsigned long long)(o->tx_offloads & ~di.tx_offload_capa));
	p->caps.rx_offload_capa = di.rx_offload_capa;
	p->caps.tx_offload_capa = di.tx_offload_capa;
	p->caps.rx_offloads = conf.rxmode.offloads;
	p->caps.tx_offloads = conf.txmode.offloads;
	if (p->caps.lsc) {
		conf.intr_conf.lsc = 1;
		rc = rte_eth_dev_callback_register(p->port_id, RTE_ETH_EVENT_INTR_LSC, lsc_event,
						   p);
		if (rc != 0) {
			TIDE_LOG(WARN, "%s: no link-change events: %s", p->name, rte_strerror(-rc));
			conf.intr_conf.lsc = 0;
		} else {
			p->lsc_registered = true;
		}
	}
	rc = rte_eth_dev_configure(p->port_id, p->dev_rxq, p->dev_txq, &conf);
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
	for (uint16_t q = 0; q < p->dev_rxq; q++) {
		int s = queue_socket(p, o, q);

		rc = rte_eth_rx_queue_setup(p->port_id, q, nb_rxd, (unsigned)s, NULL, p->qpool[q]);
		if (rc != 0) {
			TIDE_LOG(ERR, "%s: rx queue %u: %s", p->name, q, rte_strerror(-rc));
			return rc;
		}
	}
	for (uint16_t q = 0; q < p->dev_txq; q++) {
		int s = queue_socket(p, o, q);

		rc = rte_eth_tx_queue_setup(p->port_id, q, nb_txd, (unsigned)s, NULL);
		if (rc != 0) {
			TIDE_LOG(ERR, "%s: tx queue %u: %s", p->name, q, rte_strerror(-rc));
			return rc;
		}
	}
	rc = dev_start(p, &di);
	if (rc != 0) {
		TIDE_LOG(ERR, "%s: start: %s", p->name, rte_strerror(-rc));
		return rc;
	}
	p->started = true;
	/* Logs why when the lock cannot be found; the port works without it. */
	if (strcmp(p->caps.driver, "net_memif") == 0)
		(void)tide_memif_burst_lock(p->port_id, &p->burst_lock);
	p->zc_ring_bufs = memif_zc_ring_bufs(&di, p->dev_rxq);
	if (p->steer == TIDE_ETH_STEER_HW) {
		rc = hw_rss_sync(p);
		if (rc != 0)
			return rc;
	}
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
	TIDE_LOG(INFO,
		 "%s (%s): %u queue pairs, steering %s, device rx %u tx %u%s, rss 0x%llx reta %u, "
		 "%u pool(s), link %s%s",
		 p->name, p->caps.driver, p->nb_queues,
		 p->steer == TIDE_ETH_STEER_HW   ? "hw"
		 : p->steer == TIDE_ETH_STEER_SW ? "sw"
						 : "none",
		 p->dev_rxq, p->dev_txq, p->tx_shared ? " (tx shared)" : "",
		 (unsigned long long)di.flow_type_rss_offloads, di.reta_size, p->caps.nb_pools,
		 tide_eth_port_link_up(p) ? "up" : "down", p->caps.lsc ? " (lsc)" : "");
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
	if (rc == 0 && o.rx_devname != NULL && strcmp(o.rx_devname, devname) != 0) {
		struct tide_eth_port_opts ro = o;

		/* The receiving half is a port of its own (queues, pools,
		 * steering); p forwards tide_eth_rx and the RX views to it. */
		ro.rx_devname = NULL;
		rc = tide_eth_port_open(o.rx_devname, &ro, &p->rxp);
		if (rc == 0)
			TIDE_LOG(INFO, "%s: duplex port, transmits on %s (%s), receives on %s (%s)",
				 devname, devname, p->caps.driver, o.rx_devname,
				 p->rxp->caps.driver);
	}
	if (rc != 0) {
		tide_eth_port_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

static int
ring_port_create(const char *name, struct rte_ring **rx, struct rte_ring **tx, uint16_t nrings,
		 const struct tide_eth_port_opts *o, struct tide_eth_port **out)
{
	struct tide_eth_port *p = calloc(1, sizeof(*p));
	int id, rc;

	if (p == NULL)
		return -ENOMEM;
	id = rte_eth_from_rings(name, rx, nrings, tx, nrings, rte_socket_id());
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
	/* Ownership of the RX rings passes to the port only once it started:
	 * on failure the caller frees all rings. */
	p->rx_rings = malloc(sizeof(*rx) * nrings);
	if (p->rx_rings == NULL) {
		tide_eth_port_close(p);
		return -ENOMEM;
	}
	memcpy(p->rx_rings, rx, sizeof(*rx) * nrings);
	p->nb_rx_rings = nrings;
	*out = p;
	return 0;
}

static void
rings_free(struct rte_ring **r, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++)
		rte_ring_free(r[i]);
}

int
tide_eth_ring_pair(const char *name_a, const char *name_b, const struct tide_eth_port_opts *opts,
		   struct tide_eth_port **a, struct tide_eth_port **b)
{
	struct tide_eth_port_opts o;
	struct rte_ring *ab[RING_PAIR_MAX] = {0}, *ba[RING_PAIR_MAX] = {0};
	char rname[RTE_RING_NAMESIZE];
	uint16_t nr;
	int rc = 0;

	opts_fill(opts, &o);
	/* net_ring maps queue i to ring i: TX ring i of one port is RX ring i
	 * of the other. Fewer rings than queues makes the lcores share them. */
	nr = o.ring_pair_rings;
	if (nr > o.nb_queues || nr > RING_PAIR_MAX)
		return -EINVAL;
	for (uint16_t i = 0; i < nr && rc == 0; i++) {
		snprintf(rname, sizeof(rname), "%.12s>%.12s.%u", name_a, name_b, i);
		ab[i] = rte_ring_create(rname, RING_PAIR_SLOTS, rte_socket_id(),
					RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(rname, sizeof(rname), "%.12s>%.12s.%u", name_b, name_a, i);
		ba[i] = rte_ring_create(rname, RING_PAIR_SLOTS, rte_socket_id(),
					RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (ab[i] == NULL || ba[i] == NULL) {
			rc = -rte_errno;
			TIDE_LOG(ERR, "ring pair %s<->%s: %s", name_a, name_b,
				 rte_strerror(rte_errno));
		}
	}
	if (rc != 0) {
		rings_free(ab, nr);
		rings_free(ba, nr);
		return rc;
	}
	rc = ring_port_create(name_a, ba, ab, nr, &o, a);
	if (rc != 0) {
		rings_free(ab, nr);
		rings_free(ba, nr);
		return rc;
	}
	rc = ring_port_create(name_b, ab, ba, nr, &o, b);
	if (rc != 0) {
		tide_eth_port_close(*a); /* frees ba */
		rings_free(ab, nr);
		*a = NULL;
		return rc;
	}
	return 0;
}

static void
steer_drain(struct tide_eth_port *p)
{
	void *m[64];
	unsigned n;

	for (uint16_t q = 0; q < p->nb_queues; q++)
		while (p->sq[q].ring != NULL &&
		       (n = rte_ring_dequeue_burst(p->sq[q].ring, m, 64, NULL)) > 0)
			rte_pktmbuf_free_bulk((struct rte_mbuf **)m, n);
}

unsigned
tide_eth_port_close(struct tide_eth_port *p)
{
	struct rte_mbuf *pkts[64];
	unsigned in_use = 0;
	int hold = -ENODEV;

	if (p == NULL)
		return 0;
	in_use = tide_eth_port_close(p->rxp);
	if (p->lsc_registered) {
		/* -EAGAIN while the callback runs on the interrupt thread. */
		for (int i = 0; i < 1000; i++) {
			if (rte_eth_dev_callback_unregister(p->port_id, RTE_ETH_EVENT_INTR_LSC,
							    lsc_event, p) != -EAGAIN)
				break;
			usleep(1000);
		}
	}
	/* net_memif runs its peer's disconnect on the interrupt thread, with
	 * no lock against our rx_burst and stop (intr_hold.h): park that
	 * thread while we drain and stop, so a peer that exits now cannot
	 * unmap regions under us. */
	if (p->memif) {
		hold = tide_intr_hold_enter(INTR_DEADLINE_MS);
		if (hold != 0 && hold != -EDEADLK)
			TIDE_LOG(WARN, "%s: closing without holding the interrupt thread: %s",
				 p->name, strerror(-hold));
	}
	/* Drain what the device still holds so the pools can be freed whole.
	 * Bounded: a source device (net_null) never runs dry. */
	for (uint16_t q = 0; q < p->dev_rxq && p->started; q++) {
		uint16_t n;

		for (unsigned b = 0; b < DRAIN_BURSTS; b++) {
			n = dev_burst(p, BURST_RX, q, pkts, 64);
			if (n == 0)
				break;
			rte_pktmbuf_free_bulk(pkts, n);
		}
	}
	if (p->started)
		(void)rte_eth_dev_stop(p->port_id);
	if (p->memif && hold == 0)
		tide_intr_hold_leave();
	/* Stopping unregistered memif's control channel, which makes the
	 * interrupt thread rebuild its wait list; that rebuild reads the
	 * listener handle memif frees (without unregistering it) in close.
	 * Let the rebuild finish first. */
	if (p->memif && hold != -EDEADLK)
		(void)tide_intr_hold_sync(INTR_DEADLINE_MS);
	tide_memif_unpublish(p->name);
	p->burst_lock = NULL; /* it lives in the device close frees */
	(void)rte_eth_dev_close(p->port_id);
	tide_memif_forget(p->name);
	if (p->sq != NULL) {
		steer_drain(p);
		for (uint16_t q = 0; q < p->nb_queues; q++)
			rte_ring_free(p->sq[q].ring);
		rte_free(p->sq);
	}
	if (p->rx_rings != NULL) {
		rings_free(p->rx_rings, p->nb_rx_rings);
		free(p->rx_rings);
	}
	for (int s = 0; s < RTE_MAX_NUMA_NODES; s++) {
		unsigned n;

		if (p->pools[s] == NULL)
			continue;
		n = rte_mempool_in_use_count(p->pools[s]);
		if (p->zc_ring_bufs != 0) {
			unsigned lent = RTE_MIN(n, p->zc_ring_bufs);

			/* One socket's pool serves the rings (memif has no NUMA). */
			TIDE_LOG(DEBUG, "%s: %u mbufs left in memif's zero-copy rings", p->name,
				 lent);
			n -= lent;
			p->zc_ring_bufs -= lent;
		}
		if (n != 0)
			TIDE_LOG(WARN,
				 "%s: closing with %u mbufs of socket %d still held by callers",
				 p->name, n, s);
		in_use += n;
		rte_mempool_free(p->pools[s]);
	}
	free(p->qpool);
	free(p->tx_lock);
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
	if (p->rxp != NULL && !tide_eth_port_link_up(p->rxp))
		return false;
	return link.link_status == RTE_ETH_LINK_UP;
}

int
tide_eth_port_set_link(struct tide_eth_port *p, bool up)
{
	int rc = up ? rte_eth_dev_set_link_up(p->port_id) : rte_eth_dev_set_link_down(p->port_id);

	if (rc == 0 && p->rxp != NULL)
		rc = tide_eth_port_set_link(p->rxp, up);
	if (rc != 0 && rc != -ENOTSUP)
		TIDE_LOG(ERR, "%s: set link %s: %s", p->name, up ? "up" : "down",
			 rte_strerror(-rc));
	return rc;
}

uint64_t
tide_eth_port_link_events(const struct tide_eth_port *p)
{
	return __atomic_load_n(&p->lsc_events, __ATOMIC_RELAXED) +
	       (p->rxp != NULL ? tide_eth_port_link_events(p->rxp) : 0);
}

struct rte_mempool *
tide_eth_port_pool(const struct tide_eth_port *p)
{
	return p->qpool != NULL ? p->qpool[0] : NULL;
}

struct rte_mempool *
tide_eth_port_queue_pool(const struct tide_eth_port *p, uint16_t q)
{
	return q < p->nb_queues ? p->qpool[q] : NULL;
}

uint16_t
tide_eth_port_nb_queues(const struct tide_eth_port *p)
{
	return p->nb_queues;
}

enum tide_eth_steer
tide_eth_port_steer(const struct tide_eth_port *p)
{
	return p->rxp != NULL ? p->rxp->steer : p->steer;
}

const struct tide_eth_rss *
tide_eth_port_rss(const struct tide_eth_port *p)
{
	if (p->rxp != NULL)
		return &p->rxp->rss;
	return &p->rss;
}

uint16_t
tide_eth_port_tx_queue(const struct tide_eth_port *p, uint16_t q)
{
	if (q >= p->nb_queues)
		return p->dev_txq;
	return p->tx_shared ? (uint16_t)(q % p->dev_txq) : q;
}

void
tide_eth_port_caps(const struct tide_eth_port *p, struct tide_eth_port_caps *caps)
{
	*caps = p->caps;
	if (p->rxp != NULL) {
		/* What received frames carry is the receiving device's doing. */
		caps->max_rx_queues = p->rxp->caps.max_rx_queues;
		caps->flow_type_rss_offloads = p->rxp->caps.flow_type_rss_offloads;
		caps->reta_size = p->rxp->caps.reta_size;
		caps->hash_key_size = p->rxp->caps.hash_key_size;
		caps->dev_rxq = p->rxp->caps.dev_rxq;
		caps->rx_offload_capa = p->rxp->caps.rx_offload_capa;
		caps->rx_offloads = p->rxp->caps.rx_offloads;
		caps->nb_pools += p->rxp->caps.nb_pools;
	}
}

const char *
tide_eth_port_name(const struct tide_eth_port *p)
{
	return p->name;
}

int
tide_eth_port_csum(const struct tide_eth_port *p, enum tide_eth_csum mode,
		   struct tide_eth_csum_plan *plan)
{
	char why[256];
	const struct tide_eth_port *r = p->rxp != NULL ? p->rxp : p;
	int rc = tide_eth_csum_decide(mode, p->caps.driver, r->caps.rx_offloads,
				      p->caps.tx_offloads, plan, why, sizeof(why));

	/* A duplex port elides only if both of its devices may. */
	if (rc == 0 && r != p)
		rc = tide_eth_csum_decide(mode, r->caps.driver, r->caps.rx_offloads,
					  p->caps.tx_offloads, plan, why, sizeof(why));
	if (rc != 0)
		TIDE_LOG(ERR, "port %u %s (%s): %s", r->port_id, r->name, r->caps.driver, why);
	return rc;
}

int
tide_eth_port_steer_stats(const struct tide_eth_port *p, uint16_t q,
			  struct tide_eth_steer_stats *st)
{
	if (p->rxp != NULL)
		p = p->rxp;
	if (q >= p->nb_queues)
		return -EINVAL;
	if (p->sq == NULL)
		*st = (struct tide_eth_steer_stats){0};
	else
		*st = p->sq[q].st;
	return 0;
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
	if (p->rxp != NULL) {
		/* Duplex: receive counters from the receiving device, both devices' errors. */
		struct tide_eth_port_stats r;

		rc = tide_eth_port_stats(p->rxp, &r);
		if (rc != 0)
			return rc;
		st->ipackets = r.ipackets;
		st->ibytes = r.ibytes;
		st->imissed = r.imissed;
		st->ierrors = r.ierrors;
		st->rx_nombuf = r.rx_nombuf;
		st->oerrors += r.oerrors;
	}
	return 0;
}

/* Where a frame goes: a queue, or -1 for every queue (ARP: each lcore's
 * stack keeps its own neighbour table and must see requests and replies).
 * Mirrors what a NIC hashes with RSS_NONFRAG_IPV4_TCP | RSS_IPV4: TCP
 * unfragmented on the 4-tuple, other IPv4 on the addresses, the rest to
 * queue 0 (hash 0 -> RETA entry 0). */
static int
classify(const struct tide_eth_rss *rss, struct rte_mbuf *m)
{
	const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *), *ip, *l4;
	uint32_t len = rte_pktmbuf_data_len(m), ihl, sip, dip, h;
	uint16_t et, frag;

	if (len < RTE_ETHER_HDR_LEN)
		return 0;
	et = (uint16_t)(d[12] << 8 | d[13]);
	if (et == RTE_ETHER_TYPE_ARP)
		return -1;
	/* Byte-wise reads: the IP header sits 2 bytes off 4-byte alignment. */
	ip = d + RTE_ETHER_HDR_LEN;
	if (et != RTE_ETHER_TYPE_IPV4 || len < RTE_ETHER_HDR_LEN + 20 || (ip[0] >> 4) != 4)
		return 0;
	ihl = (uint32_t)(ip[0] & 0xf) * 4;
	if (ihl < 20)
		return 0;
	frag = (uint16_t)(ip[6] << 8 | ip[7]);
	sip = (uint32_t)ip[12] << 24 | (uint32_t)ip[13] << 16 | (uint32_t)ip[14] << 8 | ip[15];
	dip = (uint32_t)ip[16] << 24 | (uint32_t)ip[17] << 16 | (uint32_t)ip[18] << 8 | ip[19];
	l4 = ip + ihl;
	if (ip[9] == IPPROTO_TCP &&
	    (frag & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) == 0 &&
	    len >= RTE_ETHER_HDR_LEN + ihl + 4)
		h = tide_eth_rss_hash_v4tcp(rss, sip, dip, (uint16_t)(l4[0] << 8 | l4[1]),
					    (uint16_t)(l4[2] << 8 | l4[3]));
	else
		h = tide_eth_rss_hash_v4(rss, sip, dip);
	m->hash.rss = h;
	m->ol_flags |= RTE_MBUF_F_RX_RSS_HASH;
	return tide_eth_rss_queue(rss, h);
}

static void
stage_flush(struct steer_q *sq)
{
	unsigned k;

	if (sq->nstage == 0)
		return;
	k = rte_ring_sp_enqueue_burst(sq->ring, (void *const *)sq->stage, sq->nstage, NULL);
	if (k < sq->nstage) {
		rte_pktmbuf_free_bulk(sq->stage + k, sq->nstage - k);
		sq->st.dropped += sq->nstage - k;
	}
	sq->nstage = 0;
}

/* Copy an ARP frame to every queue but `skip`. Copies, not references: the
 * stacks read frames only, but the glue's fault injector may flip bits in
 * one queue's copy. */
static void
fan_out(struct tide_eth_port *p, struct rte_mbuf *m, int skip)
{
	for (uint16_t q = 0; q < p->nb_queues; q++) {
		struct steer_q *sq = &p->sq[q];
		struct rte_mbuf *c;

		if (q == skip)
			continue;
		c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);
		if (c == NULL) {
			sq->st.dropped++;
			continue;
		}
		sq->stage[sq->nstage++] = c;
		sq->st.broadcast++;
	}
}

/* SW steering: one burst from each device RX queue, hashed and passed on.
 * Caller holds rx_lock; every stage holds at most STEER_BURST frames because
 * each received frame adds at most one to each queue's stage. */
static void
distribute(struct tide_eth_port *p)
{
	struct rte_mbuf *m[STEER_BURST];

	for (uint16_t i = 0; i < p->dev_rxq; i++) {
		uint16_t dq = p->rx_next, n;

		p->rx_next = (uint16_t)((p->rx_next + 1) % p->dev_rxq);
		n = dev_burst(p, BURST_RX, dq, m, STEER_BURST);
		/* Reading the headers is the cost of steering without a NIC: a
		 * cache miss per frame unless fetched ahead. */
		for (uint16_t k = 0; k < n && k < PREFETCH_AHEAD; k++)
			rte_prefetch0(rte_pktmbuf_mtod(m[k], void *));
		for (uint16_t k = 0; k < n; k++) {
			int q;

			if (k + PREFETCH_AHEAD < n)
				rte_prefetch0(rte_pktmbuf_mtod(m[k + PREFETCH_AHEAD], void *));
			q = classify(&p->rss, m[k]);

			if (q < 0) {
				fan_out(p, m[k], 0);
				q = 0;
			}
			p->sq[q].stage[p->sq[q].nstage++] = m[k];
			p->sq[q].st.steered++;
		}
		for (uint16_t q = 0; q < p->nb_queues; q++)
			stage_flush(&p->sq[q]);
	}
}

uint16_t
tide_eth_rx(struct tide_eth_port *p, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t got;

	if (p->rxp != NULL)
		p = p->rxp;
	if (p->sq == NULL)
		return dev_burst(p, BURST_RX, q, pkts, n);
	if (p->steer == TIDE_ETH_STEER_SW) {
		if (rte_ring_count(p->sq[q].ring) < n && rte_spinlock_trylock(&p->rx_lock)) {
			distribute(p);
			rte_spinlock_unlock(&p->rx_lock);
		}
		return (uint16_t)rte_ring_sc_dequeue_burst(p->sq[q].ring, (void **)pkts, n, NULL);
	}
	/* HW: the NIC hashes; only ARP (unhashed, so on queue 0) is fanned out
	 * to the other queues' rings by queue 0's owner (the rings' one producer). */
	got = (uint16_t)rte_ring_sc_dequeue_burst(p->sq[q].ring, (void **)pkts, n, NULL);
	if (got < n)
		got += dev_burst(p, BURST_RX, q, pkts + got, n - got);
	if (q == 0) {
		for (uint16_t k = 0; k < got; k++) {
			const uint8_t *d = rte_pktmbuf_mtod(pkts[k], const uint8_t *);

			if (rte_pktmbuf_data_len(pkts[k]) >= RTE_ETHER_HDR_LEN &&
			    (d[12] << 8 | d[13]) == RTE_ETHER_TYPE_ARP) {
				fan_out(p, pkts[k], 0);
				for (uint16_t o = 1; o < p->nb_queues; o++)
					stage_flush(&p->sq[o]);
			}
		}
	}
	return got;
}

int
tide_eth_rx_intr_open(struct tide_eth_port *p, uint16_t q, struct tide_eth_rx_intr *out)
{
	if (p == NULL || out == NULL || q >= p->nb_queues)
		return -EINVAL;
	if (p->rxp != NULL)
		p = p->rxp;
	/* Frames must come from that one device queue: no software steering. */
	if (p->sq != NULL || !p->memif)
		return -ENOTSUP;
	return tide_memif_rxq_intr_open(p->port_id, q, out);
}

int
tide_eth_rx_intr_arm(const struct tide_eth_rx_intr *ri)
{
	return tide_memif_rxq_arm(ri);
}

void
tide_eth_rx_intr_disarm(const struct tide_eth_rx_intr *ri)
{
	tide_memif_rxq_disarm(ri);
}

uint16_t
tide_eth_tx(struct tide_eth_port *p, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t dq, sent;

	if (!p->tx_shared)
		return dev_burst(p, BURST_TX, q, pkts, n);
	dq = q % p->dev_txq;
	rte_spinlock_lock(&p->tx_lock[dq]);
	sent = dev_burst(p, BURST_TX, dq, pkts, n);
	rte_spinlock_unlock(&p->tx_lock[dq]);
	return sent;
}
