/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to pmd/eth: the pieces of tide_eth_net.h's netdev that live in files of
 * their own, so net_glue.c is only the DPDK <-> stack glue:
 *   - eth_fault.c: the fault injector (a lossy wire between the stack and the device);
 *   - net_telemetry.c: the stacks published to DPDK telemetry (/tide/net/stats).
 * Thread: a netdev's owner (its poller) for everything but the telemetry calls, which
 * take their own lock.
 */
#ifndef TIDE_ETH_NET_INTERNAL_H
#define TIDE_ETH_NET_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include "tide_eth_net.h"

/* Frame directions, as the injector and its delay queue know them. */
enum { ETH_DIR_RX = 0, ETH_DIR_TX = 1 };

/* Set nd's injector from fault (already zeroed by the caller): 0; -EINVAL a
 * probability outside [0, 1]; -ENOMEM no room for the delay queue. */
int eth_fault_init(struct tide_eth_netdev *nd, const struct tide_eth_fault_opts *fault);
/* Free the frames the injector still holds (reordered, delayed). */
void eth_fault_fini(struct tide_eth_netdev *nd);
/* Whether frames of direction dir go through the injector. */
bool eth_fault_on(const struct tide_eth_netdev *nd, int dir);
/* Run frames through the injector: in[0..n) is consumed; out receives what goes
 * on now, at most 2n + 1 entries (duplicates and a released held frame). */
uint16_t eth_fault_apply(struct tide_eth_netdev *nd, int dir, struct rte_mbuf **in, uint16_t n,
			 struct rte_mbuf **out);
/* The next delayed frame whose time came by now, in order: true with *m and *dir
 * set (the caller delivers or sends it), false when none is due. */
bool eth_fault_due(struct tide_eth_netdev *nd, uint64_t now, struct rte_mbuf **m, int *dir);

/* Forget nd in the telemetry table (net_telemetry.c; tide_eth_netdev_fini). */
void eth_telemetry_forget(struct tide_eth_netdev *nd);

#endif /* TIDE_ETH_NET_INTERNAL_H */
