/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The node runtime's device contract: what tide_node_rt_start() needs from the
 * layer that owns the NIC, as one table of functions a driver registers.
 * engine/node owns this header and calls only through the table, so it is
 * built (and walked by meson) before any device code; pmd/eth is the driver
 * (pmd/eth/node_driver.c, DPDK's EAL and ethdev ports).
 *
 * Handles are opaque here: a driver defines `struct tide_node_port` (the
 * device opened for the runtime) and `struct tide_node_queue` (one queue pair
 * of it bound to one lcore's stack); the runtime only passes them back. The
 * node-file keys that describe the device (TIDE_DPDK_DEVICE,
 * TIDE_DPDK_RX_DEVICE, TIDE_RXD, TIDE_TXD, TIDE_MTU for buffer sizes,
 * TIDE_HUGEPAGES, TIDE_HUGEPAGE_*, TIDE_FILE_PREFIX, TIDE_EAL_ARGS, TIDE_FAULT,
 * TIDE_CSUM) are the driver's to read: each call that needs them gets the
 * loaded node file.
 *
 * Errors: every int function returns 0 or a negative errno, and logs the
 * reason itself (naming the node-file key, the device or the offload at
 * fault), so the runtime only adds what it was doing.
 *
 * Linking: a driver registers itself from a constructor, and a static
 * library member that nothing references is left out of a link, constructor
 * included. pmd/eth's meson dependency `tide_eth_node_dep` therefore makes the
 * reference itself: it carries `-Wl,--undefined=tide_eth_node_dev_ops`, so
 * every program and shared library that lists it, directly or through
 * `tide_store_dep`, keeps the driver. A program that starts a runtime without
 * it gets -ENODEV from tide_node_rt_start() and the log line "no device
 * driver linked: link pmd/eth (tide_eth_node_dep)".
 */
#ifndef TIDE_NODE_DEV_H
#define TIDE_NODE_DEV_H

#include <stdbool.h>
#include <stdint.h>

#include "tide_net.h"
#include "tide_nodeenv.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A device opened for a runtime, with one queue pair per polling lcore. The driver's. */
struct tide_node_port;

/** One queue pair of a tide_node_port bound to one lcore's stack. The driver's. */
struct tide_node_queue;

/**
 * What a device driver does for the node runtime. Every member must be set.
 * The runtime calls them in this order: env_init, port_open, then per queue
 * queue_open and queue_net_opts; on each lcore queue_intr_open once, then
 * queue_poll, queue_next_due, queue_intr_arm and queue_intr_disarm in its
 * loop; queue_publish once the stacks exist; at the end queue_close for each
 * queue, port_close and env_fini. The table must outlive the process.
 */
struct tide_node_dev_ops {
	/** Short name for logs, e.g. "pmd/eth". */
	const char *name;

	/**
	 * Start the process-wide device environment from `ne` (DPDK: the EAL,
	 * with TIDE_DPDK_DEVICE and TIDE_DPDK_RX_DEVICE probed).
	 * \param prog  program name (the EAL's argv[0]).
	 * \param[out] hugepages  whether the device memory is on hugepages.
	 * \return 0; -EALREADY already up in this process; -ENOMEM; other -errno.
	 * Thread: the process's main thread, once.
	 */
	int (*env_init)(const struct tide_nodeenv *ne, const char *prog, bool *hugepages);

	/** Undo env_init, after port_close. Thread: the thread that called env_init. */
	void (*env_fini)(void);

	/**
	 * The polling lcores' thread_init hook (tide_lcore_opts.thread_init):
	 * makes the calling thread one the device's buffer caches serve.
	 * \return 0; negative errno (the lcore group does not start).
	 * Thread: each polling lcore, once, before its first poll.
	 */
	int (*thread_init)(void *arg, unsigned worker);

	/**
	 * Open TIDE_DPDK_DEVICE (and TIDE_DPDK_RX_DEVICE) with `nqueues` queue
	 * pairs, queue i polled by the lcore pinned to cpus[i] (its memory is
	 * placed on that CPU's NUMA node).
	 * \param[out] out  the port; untouched on failure.
	 * \return 0; -ENODEV no such device; -EINVAL; -ENOMEM; other -errno.
	 * Thread: the thread that called env_init. Ownership: closed by port_close.
	 */
	int (*port_open)(const struct tide_nodeenv *ne, const int *cpus, unsigned nqueues,
			 struct tide_node_port **out);

	/**
	 * Log the port's counters (INFO) and close it; every queue must be
	 * closed first. Zero-copy sends the device still held complete here.
	 * \return packet buffers not back in their pools (0 = no leak).
	 * Thread: the thread that opened it, after every lcore stopped.
	 */
	unsigned (*port_close)(struct tide_node_port *port);

	/**
	 * Bind queue pair `idx` of `port`, with TIDE_FAULT's fault injection
	 * when `ne` sets it (seeded from `now` when TIDE_FAULT names no seed).
	 * \param[out] out  the queue; untouched on failure.
	 * \return 0; -EINVAL idx out of range or TIDE_FAULT unusable; -ENOMEM.
	 * Thread: the port's opener, before the stack is created. Ownership:
	 * closed by queue_close, before port_close.
	 */
	int (*queue_open)(struct tide_node_port *port, unsigned idx, const struct tide_nodeenv *ne,
			  uint64_t now, struct tide_node_queue **out);

	/**
	 * Fill the device's part of a stack's options: dev_ops and dev (the
	 * queue), mac (the port's address; the caller may override it
	 * afterwards), tx_offloads and cksum_elide from TIDE_CSUM, and, when the
	 * port has several queues, port_pick and port_arg so that replies to the
	 * stack's active opens from no->ip arrive on this queue. The caller sets
	 * the rest, no->ip included, before this call.
	 * \return 0; -ENOTSUP TIDE_CSUM=offload on a port without the offload;
	 *         -EPERM TIDE_CSUM=elide on a driver that may reach another host;
	 *         -EINVAL a checksum mode the fault injector forbids, or no port
	 *         picker for this queue.
	 * Thread: the port's opener, before the stack is created. Ownership: the
	 * pointers set in `no` stay valid until queue_close.
	 */
	int (*queue_net_opts)(struct tide_node_queue *q, const struct tide_nodeenv *ne,
			      struct tide_net_opts *no);

	/**
	 * How the queue's stack handles checksums after queue_net_opts: "elided",
	 * "offloaded where the device can" or "in software" (a static string).
	 * Thread: any.
	 */
	const char *(*queue_csum)(const struct tide_node_queue *q);

	/**
	 * Receive one burst and hand it to `stack` (also releases frames the
	 * fault injector delayed whose time came).
	 * \return frames handled (0 = idle).
	 * Thread: the lcore that polls the queue.
	 */
	unsigned (*queue_poll)(struct tide_node_queue *q, struct tide_net_stack *stack,
			       uint64_t now);

	/**
	 * When queue_poll next has a held frame to release (no interrupt
	 * announces it), on the clock queue_poll is given; UINT64_MAX when none.
	 * Thread: the lcore that polls the queue.
	 */
	uint64_t (*queue_next_due)(const struct tide_node_queue *q);

	/**
	 * Whether the queue's receive interrupt can wake its sleeping lcore;
	 * prepares queue_intr_arm when it can.
	 * \return 0 it can; -ENOTSUP it cannot (the driver logs why, once);
	 *         -EINVAL the queue has no interrupt of its own.
	 * Thread: the lcore that polls the queue.
	 */
	int (*queue_intr_open)(struct tide_node_queue *q);

	/**
	 * Arm the receive interrupt opened by queue_intr_open.
	 * \return a file descriptor that becomes readable when a frame arrives
	 *         (the driver's: never closed by the caller); -ENOTCONN link down.
	 * Thread: the lcore that polls the queue.
	 */
	int (*queue_intr_arm)(struct tide_node_queue *q);

	/** Disarm it again (no-op when not armed). Thread: the lcore that polls the queue. */
	void (*queue_intr_disarm)(struct tide_node_queue *q);

	/**
	 * Make the counters of `stack` and of the queue readable while they run
	 * (pmd/eth: DPDK telemetry, tools/tide-stats.py).
	 * \param[out] index  what a reader passes to name this stack.
	 * \return 0; -ENOSPC too many published; other -errno.
	 * Thread: the port's opener, once the stack exists (readers only read).
	 * Ownership: queue_close unpublishes, before the stack is destroyed.
	 */
	int (*queue_publish)(struct tide_node_queue *q, const struct tide_net_stack *stack,
			     unsigned *index);

	/**
	 * Unpublish and release the queue (frames it held or delayed included).
	 * Thread: the port's opener, after the queue's lcore stopped.
	 */
	void (*queue_close)(struct tide_node_queue *q);
};

/**
 * Make `ops` the device driver of every node runtime this process starts.
 * Registering the same table again is a no-op.
 * \return 0; -EINVAL ops NULL or a member unset; -EEXIST another driver is
 *         already registered.
 * Thread: a constructor, or the main thread before any tide_node_rt_start().
 * Ownership: the table is borrowed for the life of the process.
 */
int tide_node_dev_register(const struct tide_node_dev_ops *ops);

/**
 * The registered driver.
 * \return the table; NULL when none is registered (no driver linked in).
 * Thread: any, once constructors have run.
 */
const struct tide_node_dev_ops *tide_node_dev_get(void);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_NODE_DEV_H */
