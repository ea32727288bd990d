/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Glue between an ethdev queue and a user-space stack (engine/net): the
 * stack's device callbacks implemented with mbufs, the RX poll that feeds it,
 * and a seeded software fault injector between the two.
 *
 * One `struct tide_eth_netdev` binds one stack to one (port, queue). It is
 * owned by the worker that owns the stack and the queue; nothing here locks.
 */
#ifndef TIDE_ETH_NET_H
#define TIDE_ETH_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "tide_eth.h"
#include "tide_net_dev.h" /* the stack's device contract, nothing more */

#ifdef __cplusplus
extern "C" {
#endif

/** Fault injection, per direction; all zero = off. */
struct tide_eth_fault_opts {
	double drop;       /**< probability a frame is lost */
	double dup;        /**< probability a frame is delivered twice */
	double reorder;    /**< probability a frame is held back behind the next one */
	double corrupt;    /**< probability one bit of the frame (past the Ethernet header) flips */
	uint32_t delay_us; /**< every frame is held this long before delivery */
	uint64_t seed;     /**< PRNG seed; same seed, same decisions */
	bool rx;           /**< apply to received frames */
	bool tx;           /**< apply to transmitted frames */
};

/** What the injector did. */
struct tide_eth_fault_stats {
	uint64_t dropped, duplicated, reordered, corrupted, delayed;
};

/** How the glue builds frames that carry zero-copy payload (tide_net_send_zc()). */
enum tide_eth_zc_mode {
	/**
	 * Header mbuf + one mbuf per payload piece attached with
	 * rte_pktmbuf_attach_extbuf, when the port can transmit chained
	 * mbufs: its configured TX offloads include RTE_ETH_TX_OFFLOAD_MULTI_SEGS,
	 * or the driver is one that walks every segment regardless (net_ring,
	 * net_af_packet, net_memif in copy mode). Otherwise as TIDE_ETH_ZC_COPY.
	 * A receiving netdev makes chained frames contiguous (rx_linearized).
	 */
	TIDE_ETH_ZC_AUTO = 0,
	/** The stack copies the payload into the frame at transmit time. */
	TIDE_ETH_ZC_COPY,
	/** Always chain (for tests and drivers known to handle chains). */
	TIDE_ETH_ZC_CHAIN,
};

/** A stack bound to one queue of one port. Zero-initialise, then tide_eth_netdev_init(). */
struct tide_eth_netdev {
	struct tide_eth_port *port;
	uint16_t queue;
	struct tide_eth_fault_opts fault;
	struct tide_eth_fault_stats fault_stats;
	/* Private to the glue. */
	uint64_t rng;
	struct rte_mbuf *held[2];       /* reorder slot per direction (0 rx, 1 tx) */
	struct tide_eth_delayq *dq;     /* delayed frames, when delay_us > 0 */
	uint64_t now;                   /* time of the last poll, for TX delays */
	bool tx_chain;                  /* tx_attach chains extbuf mbufs (else it refuses) */
	bool tx_chain_auto;             /* what TIDE_ETH_ZC_AUTO resolved to */
	bool tx_no_ext;                 /* memif zero-copy: no external buffers at all */
	uint64_t tx_capa;               /* rte_eth_dev_info.tx_offload_capa */
	uint64_t tx_conf;               /* TX offloads the port was configured with */
	uint64_t rx_linearized;         /* chained frames received and made contiguous */
	struct tide_eth_csum_plan csum; /* tide_eth_netdev_csum(); AUTO until it is called */
	uint16_t rx_trust;              /* TIDE_NET_RX_F_* device verdicts passed on to the stack */
};

/** The engine/net device callbacks over mbufs; dev is a struct tide_eth_netdev *. */
extern const struct tide_net_dev_ops tide_eth_net_dev_ops;

/**
 * Bind `nd` to (port, queue) with optional fault injection (NULL = none).
 * \return 0; -EINVAL probabilities outside [0,1]; -ENOMEM delay queue.
 * Thread: the owning worker, before the stack is created.
 */
int tide_eth_netdev_init(struct tide_eth_netdev *nd, struct tide_eth_port *port, uint16_t queue,
			 const struct tide_eth_fault_opts *fault);

/**
 * Choose how frames with zero-copy payload are built (default
 * TIDE_ETH_ZC_AUTO, resolved by tide_eth_netdev_init()).
 * \return 0; -EINVAL unknown mode; -ENOTSUP TIDE_ETH_ZC_CHAIN on a port that
 *         cannot carry external buffers (net_memif with zero-copy=yes, or a
 *         hardware device while the EAL uses physical IOVAs).
 * Thread: owner, before traffic.
 */
int tide_eth_netdev_set_zc(struct tide_eth_netdev *nd, enum tide_eth_zc_mode mode);

/**
 * The TIDE_NET_OFFLOAD_* checksum offloads the stack may use on this port:
 * those the device reports in tx_offload_capa AND the port was configured
 * with (rte_eth_dev_conf_get; a PMD may pick a TX path that ignores
 * ol_flags for offloads not enabled at configure time). Put it in
 * tide_net_opts.tx_offloads. Frames marked TIDE_NET_TX_F_* then leave with
 * RTE_MBUF_F_TX_IPV4 | _IP_CKSUM / _TCP_CKSUM, l2_len 14 and l3_len 20.
 * Thread: any, after tide_eth_netdev_init().
 */
uint32_t tide_eth_netdev_tx_offloads(const struct tide_eth_netdev *nd);

/**
 * Checksum handling of the stack on this netdev (TIDE_CSUM): decides with
 * tide_eth_port_csum() and sets *tx_offloads (TIDE_NET_OFFLOAD_* the device
 * computes, as tide_eth_netdev_tx_offloads() for AUTO) and *elide, for the
 * stack's tide_net_opts.tx_offloads and .cksum_elide, and which of the
 * device's RX verdicts the glue passes on (none under SW). Logs the outcome, for queue 0 at NOTICE,
 * e.g. "port 0 net_memif0 (net_memif): checksums elided (TIDE_CSUM=elide) ...". Without this call a
 * netdev behaves as AUTO (RX verdicts passed on) and the caller chooses the stack's tx_offloads
 * itself. \return 0; -ENOTSUP OFFLOAD and the port lacks an offload, -EPERM ELIDE on a driver other
 * than net_memif/net_ring (both logged, naming the port, its driver and what is missing); -EINVAL
 * unknown mode, or ELIDE while the fault injector corrupts frames (only checksums would catch the
 * corruption). Thread: the owner, after tide_eth_netdev_init(), before the stack is created.
 */
int tide_eth_netdev_csum(struct tide_eth_netdev *nd, enum tide_eth_csum mode, uint32_t *tx_offloads,
			 bool *elide);

/** Release what the netdev holds (held and delayed frames). Thread: owner. */
void tide_eth_netdev_fini(struct tide_eth_netdev *nd);

/**
 * Receive one burst from the queue and hand it to the stack; also releases
 * delayed frames whose time came. \return frames handled (0 = idle).
 * Thread: owner (the worker polling this queue).
 */
unsigned tide_eth_netdev_poll(struct tide_eth_netdev *nd, struct tide_net_stack *stack,
			      uint64_t now);

/**
 * When tide_eth_netdev_poll() next has a delayed frame (TIDE_FAULT delays) to release, on
 * the clock it is given; UINT64_MAX when none is held. For a worker that sleeps between
 * frames: a held frame is work no interrupt announces. Thread: owner.
 */
uint64_t tide_eth_netdev_next_due(const struct tide_eth_netdev *nd);

/**
 * Publish a stack's counters (every tide_net_stats field, the injector's and
 * the port's) through DPDK telemetry, so they can be read while it runs:
 * command "/tide/net/stats" with the returned index as parameter, on the
 * socket /var/run/dpdk/<file-prefix>/dpdk_telemetry.v2 (tools/tide-stats.py).
 * Values are racy snapshots taken by the telemetry thread.
 * \param[out] index  the parameter to pass (0 for the first stack).
 * \return 0; -ENOSPC more than 16 stacks published; -errno from telemetry.
 * Thread: the owner, after the stack was created. Call tide_eth_netdev_fini()
 * (which unpublishes) before destroying the stack.
 */
int tide_eth_netdev_publish(struct tide_eth_netdev *nd, const struct tide_net_stack *stack,
			    unsigned *index);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_ETH_NET_H */
