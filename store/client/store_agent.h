/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the client side of the per-node agent
 * (tide-node), the "agent" backend of store_backend.h. When a store is
 * attached, every public tide_store_X(s, ...) (except the registered-buffer
 * bookkeeping, which store_client.c keeps for both backends) runs
 * tide_agent_X(a, ...) through store_agent_ops, with the same arguments,
 * results and error conventions as documented in tide_store.h; the agent runs
 * the operation on its embedded store with the caller's memory mapped (shared
 * regions) or bounced through a shared staging area (other memory).
 * Thread rules are those of the matching tide_store_X().
 */
#ifndef TIDE_STORE_AGENT_H
#define TIDE_STORE_AGENT_H

#include "tide_store.h"

struct store_backend;
struct tide_agent_conn;

struct tide_nodeenv;

/*
 * The node environment (tide_nodeenv_load() of TIDE_NODE_ENV / the process
 * environment) into a new *out (free it). 0; -EINVAL not valid (logged with
 * every problem, "store setup:"); -ENOMEM. Thread: any.
 */
int tide_store_nodeenv(struct tide_nodeenv **out);

/*
 * Decide between agent and embedded from cfg->agent (or TIDE_AGENT of the
 * node file) and attach when asked: connect to the socket, say hello, map the
 * local buffer (cfg->local_buffer_size bytes of shared memory).
 * Returns 1 attached (*out set), 0 run embedded, or -errno after logging what
 * was wrong and what to do (no agent at the socket in "required" mode:
 * -ECONNREFUSED, also when the socket file does not exist; node file not valid: -EINVAL; version
 * mismatch: -EPROTO; -ENOMEM).
 * why (may be NULL): on 0, why this process runs the engine itself, e.g.
 * "TIDE_AGENT=off" or "no node agent answers at /run/tide/agent.sock
 * (TIDE_AGENT=auto)", for the caller's one log line once the transport is known.
 * ne (may be NULL): the caller's node environment, read once for the whole set-up: when
 * *ne is NULL and the decision needs the node file, it is loaded into *ne (the caller
 * frees it; not loaded when cfg names the mode and the socket).
 */
int tide_agent_setup(const struct tide_store_cfg *cfg, struct tide_nodeenv **ne,
		     struct tide_agent_conn **out, char *why, size_t whylen);
/* Detach: unmap every shared region, close the socket, free. NULL-safe. */
void tide_agent_close(struct tide_agent_conn *a);
/* a as a store backend (ops: store_agent_ops); valid until tide_agent_close(a). */
struct store_backend *tide_agent_backend(struct tide_agent_conn *a);
const char *tide_agent_endpoint(const struct tide_agent_conn *a);
const char *tide_agent_protocol(const struct tide_agent_conn *a);

int tide_agent_put(struct tide_agent_conn *a, const char *key, const void *buf, size_t len,
		   const struct tide_store_rc *repl);
int64_t tide_agent_get_into(struct tide_agent_conn *a, const char *key, void *buf, size_t len);
int64_t tide_agent_get_size(struct tide_agent_conn *a, const char *key);
int tide_agent_is_exist(struct tide_agent_conn *a, const char *key);
int tide_agent_remove(struct tide_agent_conn *a, const char *key, bool force);
int64_t tide_agent_remove_all(struct tide_agent_conn *a, bool force);
int tide_agent_batch_put_from(struct tide_agent_conn *a, const char *const *keys,
			      const void *const *bufs, const size_t *lens, size_t n,
			      const struct tide_store_rc *repl, int *rcs);
int tide_agent_batch_put_parts(struct tide_agent_conn *a, const char *const *keys,
			       const struct tide_store_part *parts, const size_t *nparts, size_t n,
			       const struct tide_store_rc *repl, unsigned flags, int *rcs);
int tide_agent_batch_get_into(struct tide_agent_conn *a, const char *const *keys, void *const *bufs,
			      const size_t *lens, size_t n, int64_t *sizes);
int tide_agent_get_into_ranges(struct tide_agent_conn *a, const char *const *keys, size_t nkeys,
			       struct tide_store_frag *frags, size_t nfrags);
int tide_agent_batch_get_replicas(struct tide_agent_conn *a, const char *const *keys, size_t n,
				  struct tide_store_replicas **out);
/* tide_store_batch_replica_clear() through the agent: the keys cleared (cleared[i]
 * 1 or 0), or -errno; an agent older than AGENT_REPLICA_CLEAR closes the connection
 * on it (-ECONNRESET / -EPROTO). Thread: any (serialised per connection). */
int64_t tide_agent_batch_replica_clear(struct tide_agent_conn *a, const char *const *keys, size_t n,
				       const char *segment_name, int *cleared);
int tide_agent_batch_get_parts(struct tide_agent_conn *a, const char *const *keys,
			       const struct tide_store_part *parts, const size_t *nparts, size_t n,
			       int64_t *sizes);
int tide_agent_batch_is_exist(struct tide_agent_conn *a, const char *const *keys, size_t n,
			      int *out);
int tide_agent_batch_remove(struct tide_agent_conn *a, const char *const *keys, size_t n,
			    bool force, int *rcs);
int64_t tide_agent_remove_by_regex(struct tide_agent_conn *a, const char *pattern, bool force);
int tide_agent_local_buffer(struct tide_agent_conn *a, void **base, size_t *len);
int tide_agent_map_buffer(struct tide_agent_conn *a, size_t len, void **out);
int tide_agent_unmap_buffer(struct tide_agent_conn *a, void *ptr);
int tide_agent_health_check(struct tide_agent_conn *a);

#endif /* TIDE_STORE_AGENT_H */
