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
 * store/proto/agent_proto.h.
 *
 * Access: the socket is 0660, owned by the agent's user and a socket group
 * (the agent's own group unless opts.socket_group names another); each
 * connecting process's kernel credentials (SO_PEERCRED, SO_PEERGROUPS) must
 * pass the same rule (root, the agent's user, or a member of that group).
 * The store behind it has no authentication of its own: whoever may attach
 * may read, overwrite and remove every object, as anyone who reaches the
 * master may.
 *
 * Hostile clients cannot crash the agent or take what another client has:
 * a shared region must be a memfd on tmpfs sealed against shrinking
 * (F_SEAL_SHRINK; MAP answers -EPERM otherwise), so no transfer into or out
 * of it can fault; every descriptor a request carries is closed whether the
 * request is served or refused; a malformed request closes only its own
 * connection.
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
	uint64_t refused_peers; /**< connections refused on their credentials */
};

/** Options for tide_agent_server_start_opts(); fill with tide_agent_server_opts_init(). */
struct tide_agent_server_opts {
	size_t opts_size; /**< sizeof(struct tide_agent_server_opts) */
	/** Group (name or number) that owns the socket and may attach; NULL or "":
	    the agent's effective group (tide-node --socket-group). */
	const char *socket_group;
};

/** Fill opts with the defaults. Thread: any. */
void tide_agent_server_opts_init(struct tide_agent_server_opts *opts, size_t opts_size);

/**
 * Listen on path and serve clients with store.
 * A stale socket file at path (nobody answers) is replaced; the parent
 * directory is created (0755) if missing; the socket is made 0660, group
 * opts->socket_group (see Access above).
 * \param store  A set-up embedded store; not owned; must outlive the server.
 * \param path   Socket path (< 108 bytes).
 * \param opts   Options (NULL: the defaults).
 * \param[out] out  The server.
 * \return 0; -EADDRINUSE another agent answers at path; -ENAMETOOLONG; -EINVAL
 *         store NULL or attached to an agent itself, opts_size too small;
 *         -ENOENT no such socket group; -EPERM the group cannot be given to
 *         the socket (not root and not a member); -ENOMEM; socket errors.
 * Thread: any. Ownership: stop with tide_agent_server_stop().
 */
int tide_agent_server_start_opts(struct tide_store *store, const char *path,
				 const struct tide_agent_server_opts *opts,
				 struct tide_agent_server **out);

/** tide_agent_server_start_opts() with the default options. */
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
