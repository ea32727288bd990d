/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/net over an ethdev queue: buffers, bursts, zero-copy chains, checksum
 * offloads and the poll loop. The fault injector that may sit between the two is
 * eth_fault.c, the telemetry of published stacks net_telemetry.c.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "eth_net_internal.h"
#include "memif_publish.h"
#include "tide_eth_net.h"
#include "tide_log.h"

#define RX_BURST 32

/* TIDE_LOG at a level chosen at run time. */
#define LOG_AT(lvl, ...)                                                      \
	do {                                                                  \
		if (tide_log_enabled(lvl))                                    \
			tide_log_write(lvl, TIDE_LOG_COMPONENT, __VA_ARGS__); \
	} while (0)

/* Drivers whose TX walks every segment of a chain whatever the port's
 * configured offloads: net_ring moves mbuf pointers, af_packet copies each
 * segment into its ring frame. */
static bool
driver_chains(const char *name)
{
	/* memif (copy mode, which Tide uses) copies every segment of a chain into
	 * its ring but has no txq_info_get to say MULTI_SEGS is on. */
	return name != NULL &&
	       (strcmp(name, "net_ring") == 0 || strcmp(name, "net_af_packet") == 0 ||
		strcmp(name, "net_memif") == 0);
}

/*
 * memif's zero-copy mode (client side, devarg zero-copy=yes) hands the peer
 * offsets into one shared region, the EAL memory its mempool lives in
 * (22.11 eth_memif_tx_zc: region 1, always): an external buffer elsewhere
 * (registered memory attached by tcp_zc) would reach the peer as a garbage
 * offset. Such a port must get every byte in pool mbufs.
 */
static bool
memif_zero_copy(const struct rte_eth_dev_info *info)
{
	const char *args = tide_memif_devargs(info);

	return args != NULL && tide_memif_arg_is(args, "zero-copy", "yes");
}

static void
probe_port(struct tide_eth_netdev *nd)
{
	struct rte_eth_dev_info info;
	struct rte_eth_txq_info qi;
	uint16_t pid = tide_eth_port_id(nd->port);
	const char *drv = NULL;
	bool no_ext = false, ext_va;

	if (rte_eth_dev_info_get(pid, &info) == 0) {
		nd->tx_capa = info.tx_offload_capa;
		drv = info.driver_name;
		no_ext = memif_zero_copy(&info);
	}
	/*
	 * The IOVA an external buffer gets. Software devices (the drivers
	 * above: every byte is moved by a CPU) ignore it, and in IOVA-as-VA
	 * mode it is the address. Otherwise (a NIC with physical addresses)
	 * memory outside DPDK's would need a translation per frame (the EAL
	 * reads /proc/self/pagemap for each: a TE stream over memif with
	 * hugepages fell from 4.9 GB/s to 0.7) and a frame crossing a page is
	 * not physically contiguous: such a port copies instead.
	 */
	ext_va = driver_chains(drv) || rte_eal_iova_mode() == RTE_IOVA_VA;
	if (!ext_va)
		no_ext = true;
	nd->tx_no_ext = no_ext;
	/* What the queue was set up with (port offloads included, as PMDs
	 * store them); drivers without txq_info_get count as none enabled. */
	if (rte_eth_tx_queue_info_get(pid, tide_eth_port_tx_queue(nd->port, nd->queue), &qi) == 0)
		nd->tx_conf = qi.conf.offloads & nd->tx_capa;
	nd->tx_chain_auto = !no_ext && ((nd->tx_conf & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0 ||
					driver_chains(drv));
	nd->tx_chain = nd->tx_chain_auto;
	TIDE_LOG(INFO,
		 "port %u (%s): tx offload capa 0x%llx configured 0x%llx; zero-copy frames %s%s",
		 pid, drv != NULL ? drv : "?", (unsigned long long)nd->tx_capa,
		 (unsigned long long)nd->tx_conf, nd->tx_chain ? "chained (extbuf)" : "copied",
		 !ext_va  ? " (physical IOVAs: pool buffers only)"
		 : no_ext ? " (memif zero-copy: pool buffers only)"
			  : "");
}

int
tide_eth_netdev_set_zc(struct tide_eth_netdev *nd, enum tide_eth_zc_mode mode)
{
	switch (mode) {
	case TIDE_ETH_ZC_AUTO:
		nd->tx_chain = nd->tx_chain_auto;
		return 0;
	case TIDE_ETH_ZC_COPY:
		nd->tx_chain = false;
		return 0;
	case TIDE_ETH_ZC_CHAIN:
		if (nd->tx_no_ext)
			return -ENOTSUP;
		nd->tx_chain = true;
		return 0;
	}
	return -EINVAL;
}

uint32_t
tide_eth_netdev_tx_offloads(const struct tide_eth_netdev *nd)
{
	uint32_t o = 0;

	if (nd->tx_conf & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)
		o |= TIDE_NET_OFFLOAD_IPV4_CKSUM;
	if (nd->tx_conf & RTE_ETH_TX_OFFLOAD_TCP_CKSUM)
		o |= TIDE_NET_OFFLOAD_TCP_CKSUM;
	return o;
}

int
tide_eth_netdev_csum(struct tide_eth_netdev *nd, enum tide_eth_csum mode, uint32_t *tx_offloads,
		     bool *elide)
{
	struct tide_eth_csum_plan plan;
	uint16_t pid = tide_eth_port_id(nd->port);
	const char *name = tide_eth_port_name(nd->port);
	struct tide_eth_port_caps caps;
	uint32_t tx;
	int rc;

	tide_eth_port_caps(nd->port, &caps);
	rc = tide_eth_port_csum(nd->port, mode, &plan);
	if (rc != 0)
		return rc;
	if (plan.elide && nd->fault.corrupt > 0 && (nd->fault.rx || nd->fault.tx)) {
		TIDE_LOG(ERR,
			 "port %u %s (%s): TIDE_CSUM=elide with fault injection corrupt=%g: "
			 "corrupted frames would be delivered as good, since only checksums "
			 "catch them (use TIDE_CSUM=auto for fault runs)",
			 pid, name, caps.driver, nd->fault.corrupt);
		return -EINVAL;
	}
	/* TX offloads the queue really has (tide_eth_netdev_tx_offloads()). */
	tx = tide_eth_netdev_tx_offloads(nd);
	if (!plan.tx_ip)
		tx &= ~(uint32_t)TIDE_NET_OFFLOAD_IPV4_CKSUM;
	if (!plan.tx_tcp)
		tx &= ~(uint32_t)TIDE_NET_OFFLOAD_TCP_CKSUM;
	if (mode == TIDE_ETH_CSUM_OFFLOAD &&
	    tx != (TIDE_NET_OFFLOAD_IPV4_CKSUM | TIDE_NET_OFFLOAD_TCP_CKSUM)) {
		TIDE_LOG(ERR,
			 "port %u %s (%s): TIDE_CSUM=offload, but TX queue %u was not set up "
			 "with the IPv4 and TCP checksum offloads (queue offloads 0x%llx)",
			 pid, name, caps.driver, nd->queue, (unsigned long long)nd->tx_conf);
		return -ENOTSUP;
	}
	plan.tx_ip = (tx & TIDE_NET_OFFLOAD_IPV4_CKSUM) != 0;
	plan.tx_tcp = (tx & TIDE_NET_OFFLOAD_TCP_CKSUM) != 0;
	nd->csum = plan;
	nd->rx_trust = (uint16_t)((plan.rx_ip ? TIDE_NET_RX_F_IP_CSUM_GOOD : 0) |
				  (plan.rx_tcp ? TIDE_NET_RX_F_L4_CSUM_GOOD : 0));
	*tx_offloads = plan.elide ? 0 : tx;
	*elide = plan.elide;
	if (plan.elide)
		LOG_AT(nd->queue == 0 ? TIDE_LOG_NOTICE : TIDE_LOG_DEBUG,
		       "port %u %s (%s): checksums elided (TIDE_CSUM=elide): none computed, "
		       "none verified; the link's other end must elide too",
		       pid, name, caps.driver);
	else
		LOG_AT(nd->queue == 0 ? TIDE_LOG_NOTICE : TIDE_LOG_DEBUG,
		       "port %u %s (%s): checksums (TIDE_CSUM=%s): tx ipv4 %s, tx tcp %s, "
		       "rx ipv4 %s, rx tcp %s",
		       pid, name, caps.driver, tide_eth_csum_name(mode),
		       plan.tx_ip ? "device" : "software", plan.tx_tcp ? "device" : "software",
		       plan.rx_ip ? "device" : "software", plan.rx_tcp ? "device" : "software");
	return 0;
}

int
tide_eth_netdev_init(struct tide_eth_netdev *nd, struct tide_eth_port *port, uint16_t queue,
		     const struct tide_eth_fault_opts *fault)
{
	memset(nd, 0, sizeof(*nd));
	nd->port = port;
	nd->queue = queue;
	/* AUTO until tide_eth_netdev_csum(): the device's RX verdicts are believed. */
	nd->csum.mode = TIDE_ETH_CSUM_AUTO;
	nd->rx_trust = TIDE_NET_RX_F_IP_CSUM_GOOD | TIDE_NET_RX_F_L4_CSUM_GOOD;
	if (port != NULL)
		probe_port(nd);
	return fault == NULL ? 0 : eth_fault_init(nd, fault);
}

void
tide_eth_netdev_fini(struct tide_eth_netdev *nd)
{
	eth_telemetry_forget(nd);
	eth_fault_fini(nd);
}

static uint16_t
glue_tx_alloc(void *dev, struct tide_net_buf *bufs, uint16_t n, uint16_t size)
{
	struct tide_eth_netdev *nd = dev;
	struct rte_mbuf *m[RX_BURST];
	uint16_t got = 0;

	while (got < n) {
		uint16_t want = n - got < RX_BURST ? n - got : RX_BURST;

		if (rte_pktmbuf_alloc_bulk(tide_eth_port_queue_pool(nd->port, nd->queue), m,
					   want) != 0)
			break;
		for (uint16_t i = 0; i < want; i++) {
			if (rte_pktmbuf_tailroom(m[i]) < size) {
				/* The pool's data room is smaller than the frame:
				 * a configuration error, not a transient one. */
				rte_pktmbuf_free_bulk(m + i, want - i);
				TIDE_LOG_RATELIMIT(ERR, 10,
						   "port %u: %u-byte frame exceeds mbuf room %u",
						   tide_eth_port_id(nd->port), size,
						   rte_pktmbuf_tailroom(m[i]));
				return got;
			}
			bufs[got].handle = m[i];
			bufs[got].data = rte_pktmbuf_mtod(m[i], uint8_t *);
			bufs[got].cap = rte_pktmbuf_tailroom(m[i]);
			bufs[got].len = 0;
			bufs[got].ext_len = 0;
			bufs[got].flags = 0;
			got++;
		}
	}
	return got;
}

static uint16_t
device_tx(struct tide_eth_netdev *nd, struct rte_mbuf **m, uint16_t n)
{
	uint16_t sent = 0;

	/* A short burst from the device is retried once right away; what it
	 * still refuses is the caller's to free. */
	for (int tries = 0; tries < 2 && sent < n; tries++)
		sent += tide_eth_tx(nd->port, nd->queue, m + sent, n - sent);
	return sent;
}

static uint16_t
glue_tx_burst(void *dev, struct tide_net_buf *bufs, uint16_t n)
{
	struct tide_eth_netdev *nd = dev;
	struct rte_mbuf *m[RX_BURST], *out[2 * RX_BURST + 1];
	uint16_t done = 0;

	while (done < n) {
		uint16_t k = n - done < RX_BURST ? n - done : RX_BURST, sent, nout;

		for (uint16_t i = 0; i < k; i++) {
			const struct tide_net_buf *b = &bufs[done + i];
			struct rte_mbuf *mb = b->handle;

			/* Attached segments (glue_tx_attach) already carry their data_len. */
			mb->data_len = b->len;
			mb->pkt_len = (uint32_t)b->len + b->ext_len;
			mb->ol_flags = 0;
			if (b->flags & (TIDE_NET_TX_F_IP_CKSUM | TIDE_NET_TX_F_TCP_CKSUM)) {
				mb->ol_flags |= RTE_MBUF_F_TX_IPV4;
				mb->l2_len = RTE_ETHER_HDR_LEN;
				mb->l3_len = sizeof(struct rte_ipv4_hdr);
				if (b->flags & TIDE_NET_TX_F_IP_CKSUM)
					mb->ol_flags |= RTE_MBUF_F_TX_IP_CKSUM;
				if (b->flags & TIDE_NET_TX_F_TCP_CKSUM)
					mb->ol_flags |= RTE_MBUF_F_TX_TCP_CKSUM;
			}
			m[i] = mb;
		}
		if (!eth_fault_on(nd, ETH_DIR_TX)) {
			sent = device_tx(nd, m, k);
			done += sent;
			if (sent < k)
				return done; /* the stack frees the rest */
			continue;
		}
		/* With faults the injector owns the frames: report all as taken
		 * and free what the device refuses (wire loss). */
		nout = eth_fault_apply(nd, ETH_DIR_TX, m, k, out);
		sent = device_tx(nd, out, nout);
		if (sent < nout)
			rte_pktmbuf_free_bulk(out + sent, nout - sent);
		done += k;
	}
	return done;
}

static void
glue_free_bufs(void *dev, void *const *handles, uint16_t n)
{
	(void)dev;
	rte_pktmbuf_free_bulk((struct rte_mbuf **)(uintptr_t)handles, n);
}

/*
 * An attached payload piece. It lives in the data room of the mbuf that
 * carries the piece: that room is unused while the mbuf points at external
 * memory, and the mbuf goes back to its pool only after the free callback
 * returned (rte_pktmbuf_detach). This holds as long as nothing clones the
 * mbuf (a clone would share shinfo past the mbuf's own free); nothing here
 * does: the fault injector duplicates with rte_pktmbuf_copy.
 */
struct ext_ref {
	struct rte_mbuf_ext_shared_info sh;
	tide_net_ext_release_fn release;
	void *arg;
};

static void
ext_free_cb(void *addr, void *opaque)
{
	struct ext_ref *r = opaque;

	(void)addr;
	r->release(r->arg);
}

static int
glue_tx_attach(void *dev, struct tide_net_buf *buf, const void *data, uint16_t len,
	       tide_net_ext_release_fn release, void *arg)
{
	struct tide_eth_netdev *nd = dev;
	struct rte_mbuf *head = buf->handle, *m;
	struct ext_ref *r;
	rte_iova_t iova;

	if (!nd->tx_chain)
		return -ENOTSUP;
	/* Chaining is on only where the IOVA is the address or unused
	 * (probe_port); a NIC in VA mode still needs the memory DMA-mapped
	 * (rte_extmem_register + rte_dev_dma_map) for its IOMMU to translate. */
	iova = (rte_iova_t)(uintptr_t)data;
	m = rte_pktmbuf_alloc(head->pool);
	if (m == NULL)
		return -ENOBUFS;
	static_assert(sizeof(struct ext_ref) <= RTE_PKTMBUF_HEADROOM, "ext_ref fits any pool");
	r = m->buf_addr;
	r->release = release;
	r->arg = arg;
	r->sh.free_cb = ext_free_cb;
	r->sh.fcb_opaque = r;
	rte_mbuf_ext_refcnt_set(&r->sh, 1);
	rte_pktmbuf_attach_extbuf(m, (void *)(uintptr_t)data, iova, len, &r->sh);
	m->data_len = len;
	m->pkt_len = len;
	rte_pktmbuf_lastseg(head)->next = m;
	head->nb_segs++;
	return 0;
}

const struct tide_net_dev_ops tide_eth_net_dev_ops = {
	.tx_alloc = glue_tx_alloc,
	.tx_burst = glue_tx_burst,
	.free_bufs = glue_free_bufs,
	.tx_attach = glue_tx_attach,
};

static void
to_stack(struct tide_eth_netdev *nd, struct tide_net_stack *stack, struct rte_mbuf **m, uint16_t n,
	 uint64_t now)
{
	struct tide_net_rx_pkt pkts[2 * RX_BURST + 1];
	uint16_t k = 0;

	for (uint16_t i = 0; i < n; i++) {
		uint64_t f = m[i]->ol_flags;

		if (m[i]->nb_segs > 1) {
			/* The stack reads frames as one buffer. Chains come from a
			 * zero-copy peer over net_ring (header + payload mbufs, the
			 * payload fits the header mbuf's tailroom); linearizing
			 * releases the peer's payload references. */
			if (rte_pktmbuf_linearize(m[i]) != 0) {
				rte_pktmbuf_free(m[i]);
				continue;
			}
			nd->rx_linearized++;
		}
		pkts[k].data = rte_pktmbuf_mtod(m[i], const uint8_t *);
		pkts[k].len = rte_pktmbuf_data_len(m[i]);
		pkts[k].flags = 0;
		if ((f & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
			pkts[k].flags |= TIDE_NET_RX_F_IP_CSUM_GOOD;
		if ((f & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
			pkts[k].flags |= TIDE_NET_RX_F_L4_CSUM_GOOD;
		pkts[k].flags &= nd->rx_trust;
		pkts[k].handle = m[i];
		k++;
	}
	if (k > 0)
		tide_net_rx_burst(stack, pkts, k, now);
}

unsigned
tide_eth_netdev_poll(struct tide_eth_netdev *nd, struct tide_net_stack *stack, uint64_t now)
{
	struct rte_mbuf *m[RX_BURST], *out[2 * RX_BURST + 1], *d;
	uint16_t n;
	unsigned work = 0;
	int dir;

	nd->now = now;
	/* Delayed frames whose time came, in order: RX to the stack, TX to the device
	 * (what it refuses is lost, as on a wire). */
	while (eth_fault_due(nd, now, &d, &dir)) {
		if (dir == ETH_DIR_RX)
			to_stack(nd, stack, &d, 1, now);
		else if (device_tx(nd, &d, 1) != 1)
			rte_pktmbuf_free(d);
		work++;
	}
	n = tide_eth_rx(nd->port, nd->queue, m, RX_BURST);
	if (n == 0)
		return work;
	if (eth_fault_on(nd, ETH_DIR_RX))
		to_stack(nd, stack, out, eth_fault_apply(nd, ETH_DIR_RX, m, n, out), now);
	else
		to_stack(nd, stack, m, n, now);
	return work + n;
}
