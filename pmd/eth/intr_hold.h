/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Holding the EAL interrupt thread (pmd/eth internal, not installed).
 *
 * Some drivers do work on the EAL interrupt thread that races the
 * application's own calls into the same device: net_memif (22.11) runs its
 * peer's disconnect there, unmapping and freeing regions with no lock against
 * rte_eth_rx_burst, rte_eth_dev_stop or rte_eth_dev_close on other threads.
 * A caller that must not overlap with such callbacks parks the interrupt
 * thread in a callback of ours (tide_intr_hold_enter), does its work, and lets
 * it go (tide_intr_hold_leave). The interrupt thread runs one callback at a
 * time, so nothing of the driver's runs in between.
 *
 * One interrupt source (an eventfd) per process, registered once and never
 * unregistered: after a memif server port is closed, the EAL's source list
 * keeps a listener whose handle memif freed, and every later rebuild of the
 * interrupt thread's wait list (which each register or unregister triggers)
 * reads it. So this module makes no register or unregister after init.
 */
#ifndef TIDE_ETH_INTR_HOLD_H
#define TIDE_ETH_INTR_HOLD_H

#include <stdint.h>

/**
 * Register the hold source with the EAL interrupt thread. Idempotent.
 * \return 0; -errno from eventfd() or the EAL (nothing registered then).
 * Thread: any, after rte_eal_init; serialised internally.
 */
int tide_intr_hold_init(void);

/**
 * Park the interrupt thread in the hold callback and return once it is
 * there. Every enter that returns 0 must be followed by one leave; holds do
 * not nest (a second enter waits for the first leave).
 * \param deadline_ms  how long to wait for the thread to arrive
 * \return 0 held; -ENODEV init did not succeed; -EDEADLK called on the
 *         interrupt thread itself (it is then already exclusive: go on
 *         without a hold); -ETIMEDOUT the thread did not arrive (it may
 *         still arrive later and will then go at once).
 * Thread: any but the interrupt thread.
 */
int tide_intr_hold_enter(unsigned deadline_ms);

/**
 * Release the interrupt thread parked by tide_intr_hold_enter.
 * Thread: the one that entered.
 */
void tide_intr_hold_leave(void);

/**
 * Wait until the interrupt thread has gone around its loop twice, so a wait
 * list rebuild requested before the call (by a driver's register or
 * unregister) has completed. Used before freeing what such a rebuild reads.
 * \return 0; -ENODEV; -EDEADLK on the interrupt thread; -ETIMEDOUT.
 * Thread: any but the interrupt thread.
 */
int tide_intr_hold_sync(unsigned deadline_ms);

/** Hold callbacks the interrupt thread has run since init (for tests). */
uint64_t tide_intr_hold_visits(void);

#endif
