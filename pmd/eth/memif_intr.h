/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Receive interrupts of net_memif queues, and the lock that keeps a peer's
 * disconnect from unmapping rings under a burst (pmd/eth internal, not
 * installed).
 *
 * The memif protocol has interrupts: each ring has an eventfd shared by its
 * two ends, and a transmitter writes it after a burst unless the receiver set
 * MEMIF_RING_FLAG_MASK_INT in the ring's flags (shared memory). DPDK 22.11's
 * memif PMD transmits that way, but its receiver masks every ring at connect
 * ("polling mode") and offers no rx_queue_intr_enable, so an application
 * cannot sleep until a frame arrives. This module reaches the two things that
 * takes, the queue's eventfd and its ring's flags word, through the PMD's
 * private structures as DPDK 22.11 lays them out (mirrored in memif_intr.c),
 * and refuses (-ENOTSUP) unless every pointer on the way checks out against
 * public state: the device found by name, its queue array against the public
 * fast-path table, the queue's port id, the ring's cookie. Other DPDK versions
 * get -ENOTSUP at build time.
 *
 * Lost wake-ups: the PMD's transmitter stores the ring's head, then reads the
 * flags, with no fence between; a receiver that unmasks and re-checks can
 * miss a frame published in that window, so callers must bound their sleep.
 *
 * A peer's disconnect, run on the EAL interrupt thread (memif_disconnect),
 * clears the device's connected flag and then unmaps the rings and frees
 * the regions, with no lock against rx_burst, tx_burst or the ring flags
 * here: a burst that read the flag before it was cleared and was then
 * descheduled touches unmapped memory when it resumes (SIGSEGV). Between the
 * flag and the unmap, memif_disconnect takes and releases its control channel
 * lock (pmd_internals.cc_lock). A caller that holds that lock around each
 * burst (tide_memif_burst_lock) therefore either finishes before the unmap
 * starts, or sees the flag cleared and touches nothing. Arm and disarm take
 * it themselves, check the connected flag, and find the ring and the eventfd
 * again every time (a reconnect maps new rings and new eventfds); the device
 * and queue pointers, stable while the port is configured, are resolved once.
 *
 * Thread: the lcore that owns the queue (as for rte_eth_rx_burst).
 */
#ifndef TIDE_MEMIF_INTR_H
#define TIDE_MEMIF_INTR_H

#include <stdint.h>

#include <rte_spinlock.h>

struct tide_eth_rx_intr;

/**
 * The lock memif_disconnect takes between clearing the connected flag and
 * unmapping the rings (see the file comment): hold it around every burst on
 * the port. Resolved once the port is started; checked against public state
 * (the device found by name, its socket path against the devargs' socket=).
 * \param[out] out  the PMD's lock, valid until the port is closed
 * \return 0; -ENOTSUP another DPDK version or driver, or a structure that does
 *         not check out (then nothing orders bursts with a peer's disconnect).
 * Thread: the main thread, at port start.
 */
int tide_memif_burst_lock(uint16_t port_id, rte_spinlock_t **out);

/**
 * Resolve receive queue q of memif port port_id into *out (once, at set-up):
 * 0, or -ENOTSUP (another DPDK version, or a structure that does not check
 * out; logged once with the reason).
 */
int tide_memif_rxq_intr_open(uint16_t port_id, uint16_t q, struct tide_eth_rx_intr *out);

/**
 * Unmask the queue's ring: from now on a frame the peer sends makes the
 * returned eventfd readable. Followed by a full fence, so a receive burst after
 * this call sees any frame published before the peer read the flags.
 * \return the eventfd (owned by the PMD: poll it, never close it);
 *         -ENOTCONN the link is down (no ring).
 */
int tide_memif_rxq_arm(const struct tide_eth_rx_intr *ri);

/**
 * Mask the queue's ring again (the peer stops writing the eventfd) and drain the
 * eventfd. A no-op when the link is down.
 */
void tide_memif_rxq_disarm(const struct tide_eth_rx_intr *ri);

#endif /* TIDE_MEMIF_INTR_H */
