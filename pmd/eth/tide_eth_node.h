/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * pmd/eth for the node file and the node runtime.
 *
 * - The node file's DPDK options, one mapping for every program:
 *   TIDE_HUGEPAGES, TIDE_HUGEPAGE_*, TIDE_FILE_PREFIX, TIDE_EAL_ARGS,
 *   TIDE_DPDK_DEVICE, TIDE_DPDK_RX_DEVICE, TIDE_RXD, TIDE_TXD, TIDE_FAULT and
 *   TIDE_CSUM as this layer's option structs (node_eal.c); the driver below
 *   uses them, and so may a program that opens ports of its own.
 * - The node runtime's device driver (engine/node/tide_node_dev.h) over
 *   those options, the EAL, ports and netdevs (node_driver.c). It registers
 *   itself from a constructor; the meson dependency tide_eth_node_dep keeps
 *   it in every program that lists it (see tide_node_dev.h, "Linking").
 * - Accessors from the runtime's opaque handles to this layer's objects, for
 *   programs above pmd/ that want link state or counters.
 */
#ifndef TIDE_ETH_NODE_H
#define TIDE_ETH_NODE_H

#include <stdbool.h>

#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_node_dev.h"
#include "tide_nodeenv.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Fill `eo` (zeroed first) from `ne`. Pointers in `eo` point into `ne`, which
 * must outlive the tide_eal_init() call.
 * \param prog        argv[0] for the EAL.
 * \param with_device add TIDE_DPDK_DEVICE: a vdev string ("net_...") as --vdev,
 *                    anything else as a PCI allow entry; nothing when it is "";
 *                    and TIDE_DPDK_RX_DEVICE as a second --vdev when set.
 * Thread: any.
 */
void tide_eth_node_eal_opts(const struct tide_nodeenv *ne, const char *prog, bool with_device,
			    struct tide_eal_opts *eo);

/**
 * Port options from the node file, the same for every program that opens
 * TIDE_DPDK_DEVICE: descriptor counts (TIDE_RXD/TIDE_TXD), mbufs with room
 * for one TIDE_MTU frame, and TIDE_DPDK_RX_DEVICE as the receiving device.
 * `po` is zeroed first; queues and sockets stay the caller's to set.
 * \param[out] tx  TIDE_DPDK_DEVICE's ethdev name (the string up to its first
 *                 ','), "" when none; `len` bytes.
 * \param[out] rx  TIDE_DPDK_RX_DEVICE's, "" when none; po->rx_devname points
 *                 here when set. Both must outlive tide_eth_port_open().
 * Thread: any.
 */
void tide_eth_node_port_opts(const struct tide_nodeenv *ne, struct tide_eth_port_opts *po, char *tx,
			     char *rx, size_t len);

/**
 * The fault injector's options from TIDE_FAULT, so every tool and the
 * transfer engine read it the same way.
 * \param seed_now  seed used when TIDE_FAULT names none (e.g. a clock reading).
 * \return a pointer to fo when TIDE_FAULT is set, NULL when injection is off
 *         (the value tide_eth_netdev_init() takes). Thread: any.
 */
const struct tide_eth_fault_opts *tide_eth_node_fault_opts(const struct tide_nodeenv *ne,
							   uint64_t seed_now,
							   struct tide_eth_fault_opts *fo);

/**
 * TIDE_CSUM as the glue's checksum mode, for tide_eth_netdev_csum(), so every
 * tool and the transfer engine apply it the same way:
 *
 *     rc = tide_eth_netdev_csum(&nd, tide_eth_node_csum(ne), &tx_offloads, &elide);
 *
 * Thread: any.
 */
enum tide_eth_csum tide_eth_node_csum(const struct tide_nodeenv *ne);

/**
 * pmd/eth's driver table, registered with tide_node_dev_register() by a
 * constructor of node_driver.c. Also the symbol tide_eth_node_dep names to
 * the linker, so that object (and its constructor) is never left out.
 */
extern const struct tide_node_dev_ops tide_eth_node_dev_ops;

/**
 * The ethdev port behind a node runtime's port (tide_node_rt_port()).
 * \return the port; NULL when `port` is NULL or pmd/eth is not the
 *         registered driver. Valid as long as the runtime.
 * Thread: any.
 */
struct tide_eth_port *tide_eth_node_port(const struct tide_node_port *port);

/**
 * The netdev behind a node runtime's queue (tide_node_rt_queue()): its fault
 * injector's options and counters.
 * \return the netdev; NULL when `q` is NULL or pmd/eth is not the registered
 *         driver. Valid as long as the runtime.
 * Thread: as the queue's stack (counters are the polling lcore's).
 */
const struct tide_eth_netdev *tide_eth_node_netdev(const struct tide_node_queue *q);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_ETH_NODE_H */
