/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Tests only: the store client's master calls (store/client/store_mc.h) against a master
 * server in the test's process, as store_mc_ut and store_lease_ut drive them: the server,
 * and the segment a store's set-up mounts.
 *
 * Every function asserts with CUnit, so it runs in a CUnit test, on the test's thread.
 */
#ifndef TIDE_STORE_MC_FIXTURE_H
#define TIDE_STORE_MC_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "store_mc.h"
#include "tide_mc_server.h"

/** The name (and transfer endpoint) of the segment store_mc_fixture_mount() mounts. */
#define STORE_MC_FIXTURE_SEG_NAME "127.0.0.1:9"

/**
 * A master server in this process on an ephemeral 127.0.0.1 RPC port: one RPC thread,
 * 10 ms ticks, no metrics port. leases: Tide's lease extension is served (false: the
 * functions answer "not registered", as a stock master's do); lease_share: the table's
 * lease_seg_share (0 keeps the default). NULL when it cannot start; stop and destroy it.
 */
struct tide_mc_server *store_mc_fixture_server(bool leases, uint32_t lease_share);

/**
 * Mount, for mc's client, a segment of size bytes at base named
 * STORE_MC_FIXTURE_SEG_NAME (id 0xabc, protocol tcp), as a store's set-up does, through
 * one of mc's pooled connections; asserts that the master took it. mc's master must be
 * set (store_mc_set_master()).
 */
void store_mc_fixture_mount(struct store_mc *mc, uint64_t base, uint64_t size);

/**
 * As store_mc_fixture_mount(), for a segment named name (also its transfer endpoint) of
 * id first id_first: another segment beside the first (the master puts the replicas of
 * an object on segments of different names only).
 */
void store_mc_fixture_mount_as(struct store_mc *mc, const char *name, uint64_t id_first,
			       uint64_t base, uint64_t size);

#endif
