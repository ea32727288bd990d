/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * A memif server's socket file appears only once its device is started.
 *
 * DPDK 22.11's memif server binds and listens on its socket when the EAL
 * probes the vdev, long before the port is configured and started, and turns
 * away a client that connects in between ("ID not found"); the client never
 * reconnects by itself, and a client that is stopped and started again after
 * such a refusal crashes its own interrupt thread. Two Tide nodes joined by a
 * pair of one-way links (TIDE_DPDK_RX_DEVICE) are each the server of one and
 * the client of the other, so one of them always connects into that window.
 *
 * So the EAL is given a private socket path for every filesystem (not
 * abstract) memif server, and the port renames it to the configured path
 * right after rte_eth_dev_start: a client that finds the path finds a
 * started server. Clients wait for the path by retrying their start
 * (port.c). Abstract sockets have no file to rename and are left alone.
 *
 * Internal to pmd/eth. Thread: the main thread (EAL bring-up and ports).
 */
#ifndef TIDE_MEMIF_PUBLISH_H
#define TIDE_MEMIF_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>

/**
 * The value of `key` in a memif devargs string (the part after the device
 * name and its comma: "role=server,socket=/x"), matched whole; its length
 * in *len. \return a pointer into `args`, NULL when absent or args is NULL.
 */
const char *tide_memif_arg_find(const char *args, const char *key, size_t *len);

/** Whether devargs `args` set `key` to exactly `val`. */
bool tide_memif_arg_is(const char *args, const char *key, const char *val);

struct rte_eth_dev_info;

/**
 * The devargs of a net_memif ethdev ("" when it was given none), NULL when
 * the device is not net_memif. Points into the EAL's devargs: valid while
 * the device exists.
 */
const char *tide_memif_devargs(const struct rte_eth_dev_info *di);

/**
 * Copy a --vdev string to `out`, with a memif server's filesystem socket
 * path replaced by a private one (the configured path + ".<pid>.starting"),
 * and remember the pair under the vdev's name for tide_memif_publish().
 * \return 1 rewritten; 0 copied unchanged (not a memif server, abstract
 *         socket, no socket= argument); -E2BIG out too small or the private
 *         path too long for a socket; -ENOSPC more than 8 servers remembered.
 */
int tide_memif_vdev_rewrite(const char *vdev, char *out, size_t outlen);

/**
 * Move a started server's socket from its private path to the configured
 * one (rename(2): replaces a stale file left by a crashed run).
 * \return 0, also when `devname` was not rewritten; -errno from rename.
 */
int tide_memif_publish(const char *devname);

/**
 * Before the device is closed: move the configured socket path back to the
 * private one if it is still the socket this process published (a newer
 * server's file is left alone), so the PMD's close removes it. No-op for a
 * device that was not rewritten.
 */
void tide_memif_unpublish(const char *devname);

/**
 * After the device is closed: remove the private path if the PMD left it,
 * and forget the pair. No-op for a device that was not rewritten.
 */
void tide_memif_forget(const char *devname);

/** Forget every remembered pair (EAL shut down). */
void tide_memif_forget_all(void);

#endif /* TIDE_MEMIF_PUBLISH_H */
