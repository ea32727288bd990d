/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Shared by the tools: DPDK EAL options from the node environment file, so
 * every tool maps TIDE_HUGEPAGES, TIDE_HUGEPAGE_*, TIDE_FILE_PREFIX,
 * TIDE_EAL_ARGS and TIDE_DPDK_DEVICE the same way.
 */
#ifndef TIDE_NODE_EAL_H
#define TIDE_NODE_EAL_H

#include <stdbool.h>

#include "tide_eth.h"
#include "tide_nodeenv.h"

/**
 * Fill `eo` (zeroed first) from `ne`. Pointers in `eo` point into `ne`, which
 * must outlive the tide_eal_init() call.
 * \param prog        argv[0] for the EAL.
 * \param with_device add TIDE_DPDK_DEVICE: a vdev string ("net_...") as --vdev,
 *                    anything else as a PCI allow entry; nothing when it is "".
 * Thread: any.
 */
void tide_node_eal_opts(const struct tide_nodeenv *ne, const char *prog, bool with_device,
			struct tide_eal_opts *eo);

#endif /* TIDE_NODE_EAL_H */
