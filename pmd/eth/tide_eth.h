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

/**
 * How received frames reach the queue of the lcore that owns their
 * connection, when a port has several queues (one per lcore).
 */
enum tide_eth_steer {
	/** One queue: NONE. Several: HW when the device hashes IPv4/TCP, else SW. */
	TIDE_ETH_STEER_AUTO = 0,
	/**
	 * Hardware RSS over IPv4/TCP with tide_eth_port_rss()'s key and RETA
	 * (-ENOTSUP without it). ARP frames, which the NIC leaves on queue 0,
	 * are copied by queue 0's poller to the other queues.
	 */
	TIDE_ETH_STEER_HW,
	/**
	 * Software steering: whichever lcore finds its queue short polls the
	 * device's RX queues (one at a time, under a try-lock), computes the same
	 * Toeplitz hash and RETA lookup a NIC would and passes each frame to the
	 * owning queue's ring. ARP frames are copied to every queue. TX goes to a
	 * device queue per lcore when the device has enough, else to shared
	 * device queues under a spinlock. Every queue must be polled: frames
	 * for a queue nobody polls fill its ring and are then dropped (counted
	 * in tide_eth_steer_stats.dropped).
	 */
	TIDE_ETH_STEER_SW,
	/** No steering: queue i is device queue i, whatever the device puts there. */
	TIDE_ETH_STEER_NONE,
};

/**
 * NUMA node of a CPU, for tide_eth_port_opts.queue_socket (an engine/lcore
 * worker pinned to `cpu` polls the queue). Reads sysfs; no EAL needed.
 * \return node >= 0 (0 on kernels without NUMA); -EINVAL cpu < 0 or no such CPU.
 * Thread: any.
 */
int tide_eal_cpu_socket(int cpu);

/** Port configuration; zero-initialise, then set what you need. */
struct tide_eth_port_opts {
	uint16_t nb_queues;     /**< RX/TX queue pairs, one per polling lcore; 0 = 1 */
	uint16_t nb_rxd;        /**< RX descriptors per queue; 0 = 1024 */
	uint16_t nb_txd;        /**< TX descriptors per queue; 0 = 1024 */
	uint32_t nb_mbufs;      /**< mbufs in each NUMA socket's pool; 0 = enough for that socket's
				     rings (and steering rings) + per-lcore caches + 2048 */
	uint16_t mbuf_dataroom; /**< data room per mbuf; 0 = RTE_MBUF_DEFAULT_BUF_SIZE */
	enum tide_eth_steer steer; /**< steering policy; default AUTO */
	const uint8_t *rss_key;    /**< hash key; NULL = tide_eth_rss_key_sym sized to the device */
	uint8_t rss_key_len;       /**< bytes at rss_key (16..64; hardware: the device's size) */
	uint16_t reta_size;        /**< software steering RETA entries; 0 = 128 */
	/**
	 * NUMA socket of the lcore that polls each queue (nb_queues entries);
	 * NULL, or an entry < 0, = the port's socket. One mbuf pool is created
	 * per socket used and shared by that socket's queues.
	 */
	const int *queue_socket;
	/** tide_eth_ring_pair() only: rings per direction; 0 = nb_queues. */
	uint16_t ring_pair_rings;
	/**
	 * RTE_ETH_RX_OFFLOAD_* / RTE_ETH_TX_OFFLOAD_* to enable at configure
	 * time; those the device lacks are left out (logged at INFO; see
	 * tide_eth_port_caps() for what was enabled). 0 = none.
	 */
	uint64_t rx_offloads, tx_offloads;
	/**
	 * tide_eth_port_open() only: receive from this second ethdev instead
	 * ("net_memif1"); the named device then only transmits. NULL (or the same
	 * name) = one device both ways. Two one-way links make one duplex port:
	 * with memif, a node that is the zero-copy client (devarg zero-copy=yes)
	 * of the link it receives on and the server of the link it sends on gets
	 * each byte copied once by the sender's memif, straight into its own
	 * mbufs, where one memif link copies it twice (into the ring and out). Both
	 * devices get nb_queues queues, this struct's settings and their own pools;
	 * steering, RSS and RX offloads are the receiving device's.
	 */
	const char *rx_devname;
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
 * address) with opts->nb_queues queue pairs, one mbuf pool per NUMA socket
 * used, and the steering opts->steer asks for (see enum tide_eth_steer).
 * Registers a link-status-change logger when the device supports it. With
 * opts->rx_devname, both devices are started and the port receives from that
 * one (tide_eth_rx) and transmits on `devname` (tide_eth_tx); the link is up
 * when both are.
 * \param[out] out  the started port; untouched on failure.
 * \return 0; -ENODEV no such port (either device); -ENOMEM pool or rings; -ENOTSUP STEER_HW
 *         on a device without IPv4/TCP RSS; -EINVAL more queues than the device
 *         has under HW/NONE, bad key length or socket; other -errno from
 *         ethdev (logged).
 * Thread: main thread. Ownership: close with tide_eth_port_close().
 */
int tide_eth_port_open(const char *devname, const struct tide_eth_port_opts *opts,
		       struct tide_eth_port **out);

/**
 * Create a pair of ethdevs joined back to back by rte_rings (the net_ring PMD):
 * what one transmits the other receives. A two-node link inside one process,
 * for the local demo cluster and integration tests. With opts->nb_queues > 1
 * each port gets opts->ring_pair_rings (default nb_queues) rings per
 * direction, TX ring i of one being RX ring i of the other; net_ring has no
 * RSS, so AUTO steering is SW.
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

/** The port's packet pool (queue 0's socket; for callers building packets). Thread: any. */
struct rte_mempool *tide_eth_port_pool(const struct tide_eth_port *port);

/**
 * The pool of queue q's NUMA socket, for the lcore that owns q to build
 * packets from.
 * \return the pool; NULL q out of range. Thread: any.
 */
struct rte_mempool *tide_eth_port_queue_pool(const struct tide_eth_port *port, uint16_t q);

/** Queue pairs the port was opened with (one per lcore). Thread: any. */
uint16_t tide_eth_port_nb_queues(const struct tide_eth_port *port);

/** The steering in effect: HW, SW or NONE (never AUTO). Thread: any. */
enum tide_eth_steer tide_eth_port_steer(const struct tide_eth_port *port);

struct tide_eth_rss;

/**
 * The hash key and RETA that decide which queue receives a frame: read back
 * from the device under HW steering, the software ones under SW, and a
 * one-queue table under NONE. Feed it to tide_eth_rss_picker_init().
 *
 * \return the table, valid until the port is closed. Thread: any.
 */
const struct tide_eth_rss *tide_eth_port_rss(const struct tide_eth_port *port);

/** What the device reported (rte_eth_dev_info) when the port was opened. */
struct tide_eth_port_caps {
	char driver[32]; /**< driver name, e.g. "net_ring" */
	uint16_t max_rx_queues, max_tx_queues;
	uint64_t flow_type_rss_offloads; /**< RTE_ETH_RSS_* the device can hash on; 0 = no RSS */
	uint16_t reta_size;              /**< RETA entries; 0 = not reported */
	uint8_t hash_key_size;           /**< RSS key bytes; 0 = not reported */
	bool lsc;                        /**< link-status-change interrupts */
	uint16_t dev_rxq, dev_txq;       /**< device queues configured */
	bool tx_shared;                  /**< lcores share device TX queues (under a lock) */
	unsigned nb_pools;               /**< mbuf pools created (one per NUMA socket used) */
	uint64_t rx_offload_capa, tx_offload_capa; /**< what the device can offload */
	uint64_t rx_offloads, tx_offloads;         /**< what the port was configured with */
};

/**
 * The device TX queue that tide_eth_tx(port, q, ...) transmits on: q itself,
 * or q % caps.dev_txq when lcores share device queues. For per-queue device
 * queries (rte_eth_tx_queue_info_get).
 * \return the device queue; caps.dev_txq when q is out of range. Thread: any.
 */
uint16_t tide_eth_port_tx_queue(const struct tide_eth_port *port, uint16_t q);

/** Device capabilities and the queue layout chosen. Thread: any. */
void tide_eth_port_caps(const struct tide_eth_port *port, struct tide_eth_port_caps *caps);

/** The name the port was opened with ("net_memif0", a PCI address). Thread: any. */
const char *tide_eth_port_name(const struct tide_eth_port *port);

/**
 * How a user-space stack on a port handles IPv4 header and TCP checksums:
 * TIDE_CSUM in the node file, with the same names (tide_eth_csum_name()).
 */
enum tide_eth_csum {
	/**
	 * The device's RX and TX checksum offloads where the port was configured
	 * with them (tide_eth_port_open() asks for them whenever the device has
	 * them), software for the rest.
	 */
	TIDE_ETH_CSUM_AUTO = 0,
	/** Software both ways; the device's offloads and RX verdicts go unused. */
	TIDE_ETH_CSUM_SW,
	/** The device's both ways; refused unless the port has all four offloads. */
	TIDE_ETH_CSUM_OFFLOAD,
	/**
	 * None computed, none verified (tide_net_opts.cksum_elide). Only on
	 * net_memif and net_ring, whose frames stay in one host's memory, and
	 * only when the other end of the link elides too (a peer that verifies
	 * drops every frame).
	 */
	TIDE_ETH_CSUM_ELIDE,
};

/** What tide_eth_csum_decide() chose. */
struct tide_eth_csum_plan {
	enum tide_eth_csum mode; /**< the mode asked for */
	bool elide;              /**< compute and verify nothing */
	bool tx_ip, tx_tcp;      /**< the device computes the IPv4 header / TCP checksum */
	bool rx_ip, rx_tcp;      /**< the stack trusts the device's IPv4 / TCP RX verdicts */
};

/** "auto", "sw", "offload", "elide"; "?" for other values. Thread: any. */
const char *tide_eth_csum_name(enum tide_eth_csum mode);

/** Parse a tide_eth_csum_name() (any case). \return 0; -EINVAL. Thread: any. */
int tide_eth_csum_parse(const char *s, enum tide_eth_csum *out);

/** Whether TIDE_ETH_CSUM_ELIDE may be used on a driver: net_memif, net_ring. Thread: any. */
bool tide_eth_csum_elide_allowed(const char *driver);

/**
 * The checksum plan for a port with this driver and configured offloads.
 * Pure policy: no EAL needed.
 * \param driver       ethdev driver name (tide_eth_port_caps.driver)
 * \param rx_offloads  RTE_ETH_RX_OFFLOAD_* the port was configured with
 * \param tx_offloads  RTE_ETH_TX_OFFLOAD_* the port was configured with
 * \param[out] plan    the decision; untouched on failure
 * \param why          on failure, one line naming the driver and what it lacks,
 *                     or why elision is refused (may be NULL)
 * \return 0; -ENOTSUP OFFLOAD on a port without one of the IPv4/TCP RX/TX
 *         checksum offloads; -EPERM ELIDE on a driver other than net_memif
 *         and net_ring; -EINVAL unknown mode.
 * Thread: any.
 */
int tide_eth_csum_decide(enum tide_eth_csum mode, const char *driver, uint64_t rx_offloads,
			 uint64_t tx_offloads, struct tide_eth_csum_plan *plan, char *why,
			 size_t whylen);

/**
 * tide_eth_csum_decide() for an open port (its driver and configured
 * offloads); a refusal is logged at ERR naming the port, its driver and what
 * is missing.
 * \return as tide_eth_csum_decide(). Thread: any.
 */
int tide_eth_port_csum(const struct tide_eth_port *port, enum tide_eth_csum mode,
		       struct tide_eth_csum_plan *plan);

/** Software steering counters of one queue (written by the steering lcore). */
struct tide_eth_steer_stats {
	uint64_t steered;   /**< frames hashed to this queue and passed on */
	uint64_t broadcast; /**< copies of ARP frames passed to this queue */
	uint64_t dropped; /**< frames for this queue lost: its ring was full, or no mbuf to copy */
};

/**
 * Steering counters of queue q (all zero under NONE; under HW only
 * broadcast copies of ARP frames from queue 0 count).
 *
 * \return 0; -EINVAL q out of range. Thread: any (racy snapshot).
 */
int tide_eth_port_steer_stats(const struct tide_eth_port *port, uint16_t q,
			      struct tide_eth_steer_stats *st);

/**
 * Bring the link administratively up or down (rte_eth_dev_set_link_up/down).
 *
 * \return 0; -ENOTSUP the driver cannot; other -errno from ethdev.
 * Thread: main thread.
 */
int tide_eth_port_set_link(struct tide_eth_port *port, bool up);

/**
 * Link-status-change events delivered by the device (each is logged at
 * NOTICE with the new state); always 0 when caps.lsc is false, in which case
 * tide_eth_port_link_up() is the only way to see the link.
 * Thread: any.
 */
uint64_t tide_eth_port_link_events(const struct tide_eth_port *port);

/**
 * Read device counters. \return 0; -errno from rte_eth_stats_get.
 * Thread: any (values are racy snapshots).
 */
int tide_eth_port_stats(const struct tide_eth_port *port, struct tide_eth_port_stats *st);

/**
 * Receive up to n packets from queue q. Returns the number received; the
 * caller owns them. Under SW steering this may first poll the device for
 * every queue (see TIDE_ETH_STEER_SW). Thread: the lcore that owns queue q.
 */
uint16_t tide_eth_rx(struct tide_eth_port *port, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

/**
 * Transmit up to n packets on queue q. Returns how many the device took;
 * the caller still owns (and must free or retry) the rest. When lcores share
 * a device TX queue (caps.tx_shared) the burst is sent under that queue's lock.
 * Thread: the lcore that owns queue q.
 */
uint16_t tide_eth_tx(struct tide_eth_port *port, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

/**
 * Receive interrupts of one queue, resolved once by tide_eth_rx_intr_open():
 * the device queue behind it and the driver's structures. Owned by the
 * caller; the port must outlive it.
 */
struct tide_eth_rx_intr {
	uint16_t port_id; /**< the device (a duplex port's receive device) */
	uint16_t queue;
	void *dev; /**< the driver's device, queue (memif_intr.c) */
	void *rxq;
};

/**
 * Whether receive queue q can wake a sleeping poller (tide_eth_rx_intr_arm()),
 * and if so fill *out: net_memif of DPDK 22.11 through its private structures
 * (memif_intr.h), one device queue per logical queue (no software steering).
 * Logs once why not.
 * \return 0; -ENOTSUP (another driver or DPDK version, software steering, a
 *         structure that does not check out); -EINVAL q out of range.
 * Thread: any, once the port is started; the work of set-up, not of the poll loop.
 */
int tide_eth_rx_intr_open(struct tide_eth_port *port, uint16_t q, struct tide_eth_rx_intr *out);

/**
 * Arm the queue's receive interrupt: from now on a frame arriving on it makes
 * the returned file descriptor readable (poll it; the port owns it: never
 * close it, and ask again after each arm: a reconnected link has another).
 * A full fence follows, so a receive burst after this call sees what was
 * published before the peer last looked. The peer's check and our re-check
 * race without a fence on its side: bound every sleep (a lost wake-up waits
 * for that bound). Disarm once the queue is polled again: while armed, the
 * peer pays a system call per burst it sends.
 * \return the descriptor; -ENOTCONN the link is down.
 * Thread: the lcore that owns the queue.
 */
int tide_eth_rx_intr_arm(const struct tide_eth_rx_intr *ri);

/** Disarm the queue's receive interrupt and drain its descriptor (no-op when not
 *  armed or the link is down). Thread: the lcore that owns the queue. */
void tide_eth_rx_intr_disarm(const struct tide_eth_rx_intr *ri);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_ETH_H */
