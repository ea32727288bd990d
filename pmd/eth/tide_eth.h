/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Tide's DPDK seam: EAL bring-up and ethdev ports.
 *
 * This is the only place that calls rte_eal_* and rte_eth_*; everything above
 * it sees a port as "bursts of packets on a queue". The EAL is configured from
 * plain options (the node environment file is translated by the caller), and
 * hugepages are used when enough can be had, otherwise the EAL runs with
 * --no-huge on anonymous memory, so tests and laptops work unchanged.
 *
 * Packets crossing this seam are `struct rte_mbuf *`; callers outside pmd/
 * treat them as opaque handles plus the accessors in this header.
 */
#ifndef TIDE_ETH_H
#define TIDE_ETH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rte_mbuf;
struct rte_mempool;

/** Whether to back DPDK memory with hugepages. */
enum tide_eal_huge {
	TIDE_EAL_HUGE_AUTO = 0, /**< hugepages if enough are free (or reservable), else --no-huge */
	TIDE_EAL_HUGE_ON,       /**< hugepages or fail */
	TIDE_EAL_HUGE_OFF,      /**< always --no-huge */
};

/** EAL options; zero-initialise, then set what you need. */
struct tide_eal_opts {
	const char *prog;        /**< argv[0] for the EAL; NULL = "tide" */
	const char *file_prefix; /**< --file-prefix; NULL = "tide". Must differ per process. */
	const char *lcores;      /**< -l list, e.g. "0" or "1-3"; NULL = "0" */
	enum tide_eal_huge huge; /**< hugepage policy */
	uint64_t mem_bytes;      /**< memory for DPDK (-m); 0 = 256 MiB */
	uint64_t hugepage_size;  /**< 2 MiB or 1 GiB; 0 = 2 MiB */
	bool reserve_hugepages;  /**< AUTO/ON: try to raise nr_hugepages when short (needs root) */
	const char *vdevs[4];    /**< --vdev strings (NULL-terminated if fewer than 4) */
	const char *pci_allow;   /**< -a PCI address; NULL = no PCI device (--no-pci) */
	const char *extra_args;  /**< whitespace-separated extra EAL args; may be NULL */
	int log_level;           /**< EAL log level 1..8; 0 = 4 (warnings) */
};

/** What the EAL came up with. */
struct tide_eal_info {
	bool hugepages;        /**< true: hugepage-backed; false: --no-huge */
	uint64_t mem_bytes;    /**< memory requested from the EAL */
	unsigned lcores;       /**< enabled lcores */
	unsigned ports;        /**< ethdev ports probed */
	char huge_reason[160]; /**< why hugepages were or were not used */
};

/**
 * Decide whether hugepages can back `mem_bytes` of `page_size` pages, reserving
 * more pages when `reserve` is set and the process may write nr_hugepages.
 * Pure policy, no EAL: usable before tide_eal_init.
 * \param[out] reason  human-readable explanation (may be NULL)
 * \return 1 usable; 0 not usable (reason says why); -EINVAL bad page size.
 * Thread: any, before EAL init.
 */
int tide_eal_hugepages_usable(uint64_t mem_bytes, uint64_t page_size, bool reserve, char *reason,
			      size_t reason_len);

/**
 * Bring up the EAL once per process.
 * \return 0; -EALREADY already up; -ENOMEM hugepages required (ON) but unavailable;
 *         -EINVAL bad options; other -errno from rte_eal_init (its message is logged).
 * Thread: the main thread, once, before any other tide_eth call.
 */
int tide_eal_init(const struct tide_eal_opts *opts, struct tide_eal_info *info);

/**
 * Release the EAL (rte_eal_cleanup). All ports must be closed first.
 * \return 0; -EALREADY not up.
 * Thread: the thread that called tide_eal_init, after all workers stopped.
 */
int tide_eal_fini(void);

/**
 * Give the calling non-EAL thread an lcore id (rte_thread_register), so
 * per-lcore mempool caches serve its allocations. For engine/lcore workers'
 * thread_init hook (its signature matches).
 * \return 0; -ENOSPC no free lcore id (raise RTE_MAX_LCORE); -EINVAL EAL not up.
 * Thread: the thread to register, once.
 */
int tide_eal_thread_register(void *arg, unsigned worker);

/** Port configuration; zero-initialise, then set what you need. */
struct tide_eth_port_opts {
	uint16_t nb_queues;     /**< RX/TX queue pairs; 0 = 1 */
	uint16_t nb_rxd;        /**< RX descriptors per queue; 0 = 1024 */
	uint16_t nb_txd;        /**< TX descriptors per queue; 0 = 1024 */
	uint32_t nb_mbufs;      /**< mbufs in the port's pool; 0 = enough for the rings + 2048 */
	uint16_t mbuf_dataroom; /**< data room per mbuf; 0 = RTE_MBUF_DEFAULT_BUF_SIZE */
};

/** One started ethdev port and its packet pool. */
struct tide_eth_port;

/** Port counters, read from the device (rte_eth_stats). */
struct tide_eth_port_stats {
	uint64_t ipackets, opackets, ibytes, obytes;
	uint64_t imissed, ierrors, oerrors, rx_nombuf;
};

/**
 * Configure and start the ethdev named `devname` (e.g. "net_ring0" or a PCI
 * address), with one mempool on the port's NUMA socket.
 * \param[out] out  the started port; untouched on failure.
 * \return 0; -ENODEV no such port; -ENOMEM pool; other -errno from ethdev (logged).
 * Thread: main thread. Ownership: close with tide_eth_port_close().
 */
int tide_eth_port_open(const char *devname, const struct tide_eth_port_opts *opts,
		       struct tide_eth_port **out);

/**
 * Create a pair of ethdevs joined back to back by rte_rings (the net_ring PMD):
 * what one transmits the other receives. A two-node link inside one process,
 * for the local demo cluster and integration tests.
 * \return 0; -ENOMEM; -EEXIST name in use; other -errno (logged).
 * Thread: main thread. Ownership: close both with tide_eth_port_close().
 */
int tide_eth_ring_pair(const char *name_a, const char *name_b,
		       const struct tide_eth_port_opts *opts, struct tide_eth_port **a,
		       struct tide_eth_port **b);

/**
 * Stop and close a port and free its mempool.
 * \return packet buffers that were still held by callers (not returned to
 *         the pool) when the device had released its own: 0 unless something
 *         leaked them. NULL is ignored (returns 0).
 * Thread: main thread, after its pollers stopped.
 */
unsigned tide_eth_port_close(struct tide_eth_port *port);

/** ethdev port id. Thread: any. */
uint16_t tide_eth_port_id(const struct tide_eth_port *port);

/** Port MAC address into mac[6]. Thread: any. */
void tide_eth_port_mac(const struct tide_eth_port *port, uint8_t mac[6]);

/** Link up? (non-blocking query). Thread: any. */
bool tide_eth_port_link_up(const struct tide_eth_port *port);

/** The port's packet pool (for callers building packets). Thread: any. */
struct rte_mempool *tide_eth_port_pool(const struct tide_eth_port *port);

/**
 * Read device counters. \return 0; -errno from rte_eth_stats_get.
 * Thread: any (values are racy snapshots).
 */
int tide_eth_port_stats(const struct tide_eth_port *port, struct tide_eth_port_stats *st);

/**
 * Receive up to n packets from queue q. Returns the number received; the
 * caller owns them. Thread: the lcore that owns queue q.
 */
uint16_t tide_eth_rx(struct tide_eth_port *port, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

/**
 * Transmit up to n packets on queue q. Returns how many the device took;
 * the caller still owns (and must free or retry) the rest.
 * Thread: the lcore that owns queue q.
 */
uint16_t tide_eth_tx(struct tide_eth_port *port, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_ETH_H */
