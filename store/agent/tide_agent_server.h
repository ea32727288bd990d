/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The per-node agent's server (what `tide-node` runs): client processes of
 * one node attach over a UNIX socket and run every store operation through
 * the agent's embedded store, which owns the node's transfer engine, DPDK
 * port and pollers, and the node's segment. Clients' buffers are shared
 * memory regions they create and send over the socket (SCM_RIGHTS); the
 * agent maps each once, so a transfer into or out of them is not copied.
 *
 * Lifetimes: a client's regions are unmapped when its connection closes
 * (after the operation in progress, if any, has finished: a put whose
 * client died still completes or is revoked, never left half visible).
 * Objects live in the agent's segment and so outlive every client process.
 *
 * Bounds: at most TIDE_AGENT_MAX_CLIENTS connections (more are refused with
 * a log line), AGENT_MAX_REGIONS regions per client; request limits are in
 * store/client/agent_proto.h.
 */
#ifndef TIDE_AGENT_SERVER_H
#define TIDE_AGENT_SERVER_H

#include <stdint.h>

#include "tide_store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TIDE_AGENT_MAX_CLIENTS 512

struct tide_agent_server;

/** Counters (monotonic since start). */
struct tide_agent_stats {
	uint64_t clients_now;   /**< connections open */
	uint64_t clients_total; /**< connections accepted */
	uint64_t requests;      /**< requests answered */
	uint64_t bad_requests;  /**< malformed requests (connection closed) */
	uint64_t regions_now;   /**< shared regions mapped */
};

/**
 * Listen on path and serve clients with store.
 * A stale socket file at path (nobody answers) is replaced; the parent
 * directory is created (0755) if missing; the socket is made 0666: the store
 * has no authentication, anyone who can reach the master can do as much.
 * \param store  A set-up embedded store; not owned; must outlive the server.
 * \param path   Socket path (< 108 bytes).
 * \param[out] out  The server.
 * \return 0; -EADDRINUSE another agent answers at path; -ENAMETOOLONG; -EINVAL
 *         store NULL or attached to an agent itself; -ENOMEM; socket errors.
 * Thread: any. Ownership: stop with tide_agent_server_stop().
 */
int tide_agent_server_start(struct tide_store *store, const char *path,
			    struct tide_agent_server **out);

/** Snapshot of the counters. Thread: any. */
void tide_agent_server_stats(struct tide_agent_server *srv, struct tide_agent_stats *st);

/**
 * Stop accepting, disconnect every client (each finishes its operation in
 * progress first), unmap their regions, remove the socket file and free.
 * NULL-safe. Thread: any but a server thread.
 */
void tide_agent_server_stop(struct tide_agent_server *srv);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_AGENT_SERVER_H */
