/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The node runtime: one way from a node file to running user-space TCP
 * stacks. tide_node_rt_start() picks the polling CPUs (TIDE_LCORES /
 * TIDE_LCORES_PER_NUMA), starts the EAL (TIDE_HUGEPAGES, TIDE_FILE_PREFIX,
 * TIDE_EAL_ARGS, ...), opens TIDE_DPDK_DEVICE (and TIDE_DPDK_RX_DEVICE) with
 * one queue pair per polling lcore, binds a netdev per queue (TIDE_FAULT),
 * applies TIDE_CSUM, starts the lcores (TIDE_IDLE) and creates one stack per
 * lcore on TIDE_DATA_IP with the node's MTU, RTO floor and retry limit. The
 * transfer engine's user-space transport, `tide-net` and `tide-net-bench`
 * all start their stacks here, so a node file means the same thing to each.
 *
 * Each lcore then polls, in this order: received frames into its stack, the
 * caller's lcore_poll hook, the stack's timers. Several lcores share the
 * data address: active opens pick ports whose replies hash back to the
 * opening lcore's queue (the driver's port picker), and only lcore 0 sends
 * the gratuitous ARP.
 *
 * The device is reached only through the registered driver
 * (tide_node_dev.h): a program that starts a runtime links pmd/eth's
 * tide_eth_node_dep, which brings it. The port and queue handles below are
 * that driver's; pmd/eth turns them into its own objects
 * (tide_eth_node_port(), tide_eth_node_netdev() in pmd/eth/tide_eth_node.h).
 *
 * Lifetime: start -> (traffic) -> tide_node_rt_stop() -> tide_node_rt_destroy().
 * One runtime per process (the EAL is process-wide).
 */
#ifndef TIDE_NODE_RT_H
#define TIDE_NODE_RT_H

#include <stdbool.h>
#include <stdint.h>

#include <netinet/in.h>

#include "tide_lcore.h"
#include "tide_net.h"
#include "tide_node_dev.h"
#include "tide_nodeenv.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tide_node_rt;

/** What the caller runs on the lcores; zero-initialise, then set what is needed. */
struct tide_node_rt_opts {
	const char *prog;    /**< EAL argv[0]; NULL = "tide" */
	unsigned max_lcores; /**< at most this many polling lcores; 0 = what the node file picks */
	uint32_t tcp_buf;    /**< per-connection send and receive buffer; 0 = 1 MiB */
	uint32_t time_wait_ms; /**< TIME_WAIT length; 0 = the stack's default (60 s) */
	/**
	 * Runs on lcore `idx` once its stack exists and before the lcore polls
	 * it (listeners, connects). A negative errno fails the start.
	 */
	int (*lcore_init)(void *arg, unsigned idx, struct tide_net_stack *stack, uint64_t now);
	/**
	 * Runs on lcore `idx` first in every iteration, before received frames
	 * reach the stack (and its callbacks): e.g. to keep the iteration's
	 * clock for those callbacks. NULL: none.
	 */
	void (*lcore_pre)(void *arg, unsigned idx, uint64_t now);
	/**
	 * Runs on lcore `idx` in every iteration after received frames went to
	 * the stack and before its timers; returns > 0 when it did work (the
	 * adaptive idle policy sleeps only after iterations that did none).
	 */
	int (*lcore_poll)(void *arg, unsigned idx, uint64_t now);
	void *arg; /**< passed to both hooks */
};

/** What the runtime came up with; valid until tide_node_rt_destroy(). */
struct tide_node_rt_info {
	unsigned nlcores;         /**< polling lcores (= queue pairs = stacks) */
	int cpus[TIDE_LCORE_MAX]; /**< CPU of each lcore */
	uint32_t ip;              /**< TIDE_DATA_IP, host order */
	char ip_str[INET_ADDRSTRLEN];
	bool hugepages;         /**< the EAL's memory is on hugepages */
	const char *csum;       /**< "elided", "offloaded where the device can", "in software" */
	bool published;         /**< lcore 0's counters are readable through telemetry */
	unsigned publish_index; /**< its index for tools/tide-stats.py --index */
};

/**
 * Bring the node's user-space TCP up from `ne` (see the file comment). On
 * failure everything started is undone, the EAL included, and the reason is
 * logged naming the node-file key, the device or the offload at fault.
 * \param ne  a loaded node file with TIDE_DPDK_DEVICE and TIDE_DATA_IP set;
 *            copied, the caller may free it afterwards.
 * \param[out] out  NULL until the lcores start, then set before the first hook
 *            runs (hooks may read it through their arg); NULL again on failure,
 *            once every lcore has stopped.
 * \return 0 and *out; -EINVAL no device or data address in `ne`, a checksum
 *         mode the fault injector forbids; -ENOTSUP TIDE_CSUM=offload on a port
 *         without the offload; -EPERM TIDE_CSUM=elide on a driver that may
 *         reach another host; -ERANGE/-ENODEV TIDE_LCORES names no usable CPU;
 *         -ENODEV no such device, or no device driver registered
 *         (tide_node_dev.h); -EALREADY the EAL is already up in this
 *         process; -ENOMEM; or the negative errno lcore_init returned.
 * Thread: the process's main thread, once. Ownership: the caller destroys it.
 */
int tide_node_rt_start(const struct tide_nodeenv *ne, const struct tide_node_rt_opts *o,
		       struct tide_node_rt **out);

/** What start came up with. Thread: any. */
const struct tide_node_rt_info *tide_node_rt_info(const struct tide_node_rt *rt);

/** The polling lcores (tide_lcore_post / run_sync / wake). Thread: any. */
struct tide_lcore_group *tide_node_rt_lcores(struct tide_node_rt *rt);

/**
 * Stack of lcore `idx`, NULL when out of range. Use it only on that lcore
 * while it runs, or from any thread after tide_node_rt_stop(). Thread: see above.
 */
struct tide_net_stack *tide_node_rt_stack(struct tide_node_rt *rt, unsigned idx);

/**
 * The driver's queue of lcore `idx` (pmd/eth: its netdev, with the fault
 * injector's counters), NULL when out of range. Valid until
 * tide_node_rt_destroy(). Thread: as the stack.
 */
const struct tide_node_queue *tide_node_rt_queue(const struct tide_node_rt *rt, unsigned idx);

/**
 * The driver's port (pmd/eth: link state, statistics). Valid until
 * tide_node_rt_destroy(). Thread: any.
 */
struct tide_node_port *tide_node_rt_port(struct tide_node_rt *rt);

/**
 * Stop polling: each lcore finishes its iteration and its posted messages,
 * then exits. Stacks and the port stay for statistics. Idempotent.
 * Thread: the owner; never an lcore.
 */
void tide_node_rt_stop(struct tide_node_rt *rt);

/**
 * Stop if needed, log each stack's and the port's counters (INFO), free the
 * stacks (no callbacks), close the port and release the EAL. Zero-copy sends
 * whose frames the device still held complete while the port closes, on
 * this thread. NULL is ignored.
 * \return packet buffers not back in their pools at port close (0 = no leak).
 * Thread: the owner, after everything that used the stacks stopped.
 */
unsigned tide_node_rt_destroy(struct tide_node_rt *rt);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_NODE_RT_H */
