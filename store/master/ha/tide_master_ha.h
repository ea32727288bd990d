/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Leader election of masters on etcd, with Mooncake's key and value: the
 * leader holds `mooncake-store/<cluster>/master_view` = "<rpc_address>:<port>"
 * (plain text), created only if absent and attached to a lease it keeps
 * alive; its create_revision is the view version. Standbys watch the key and
 * campaign when it disappears (lease expired or revoked).
 *
 * Safety: a leader renews every TTL/6 and stops serving once TTL - TTL/4 has
 * passed since the send time of its last acknowledged keepalive;
 * etcd cannot expire that lease earlier (it counts from when the keepalive
 * arrived), so a new leader is elected only after the old one stopped, unless
 * the old process is frozen longer than that (no fencing token exists in the
 * Mooncake protocol; stock has the same window).
 *
 * The object table is replicated by the caller (tide_master_log.h): serve()
 * rebuilds it from etcd before it opens the RPC port.
 */
#ifndef TIDE_MASTER_HA_H
#define TIDE_MASTER_HA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Lease TTL when none is given (seconds). Stock's is 5; 2 keeps a failover after a
 *  crash under 3 s. etcd 3.4 refuses TTLs under its minimum (1.5 election timeouts). */
#define TIDE_MASTER_HA_DEFAULT_TTL_S 2

struct tide_master_ha_opts {
	const char *endpoints;  /**< etcd endpoint list (tide_etcd_parse_endpoints) */
	const char *cluster_id; /**< NULL/"": "mooncake_cluster" */
	const char *self;       /**< the value to publish: "<rpc_address>:<rpc_port>" */
	unsigned ttl_s;         /**< lease TTL; 0: TIDE_MASTER_HA_DEFAULT_TTL_S */
};

/** What the election reports (for /health); strings valid during the call. */
struct tide_master_ha_status {
	const char *role;   /**< "leader" or "standby" */
	const char *state;  /**< "standby", "candidate", "serving", "etcd_unreachable" */
	const char *leader; /**< known leader "ip:port", or "" */
	int64_t view_version;
};

struct tide_master_ha_ops {
	/** Won: start serving (open the RPC port). key is the master_view key held
	 *  and view its create_revision (a fence for writes made as the leader).
	 *  Non-zero: the lease is released and the election goes on (after a pause). */
	int (*serve)(void *arg, const char *key, int64_t view);
	/** Lost the lease (or stopping): stop serving; the next serve() must start from
	 *  an empty object table. */
	void (*unserve)(void *arg);
	/** Role or leader changed. */
	void (*status)(void *arg, const struct tide_master_ha_status *st);
	/** Optional, asked every 100 ms while leading: false steps down (the lease is
	 *  revoked, the election goes on after a pause). */
	bool (*healthy)(void *arg);
	/** Optional: the leadership is certain only until deadline_ns (CLOCK_MONOTONIC):
	 *  TTL - TTL/4 after the send time of the grant or renewal etcd last
	 *  acknowledged. Called before serve() and after each
	 *  renewal; a server should answer nothing after it (a process paused past
	 *  it wakes up deposed before this loop can notice). */
	void (*lease)(void *arg, uint64_t deadline_ns);
};

/**
 * Run the election until *stop is true: campaign, serve while the lease
 * lives, stand by otherwise. Waits are at most 500 ms, so a stop is seen
 * within that. On stop a leader calls unserve() and revokes its lease (the
 * key goes at once and a standby takes over without waiting for the TTL).
 * \return 0 after stop; -EINVAL bad options (endpoints, self); -ENOMEM.
 * Thread: a thread of the caller's, for the whole run; callbacks run on it.
 */
int tide_master_ha_run(const struct tide_master_ha_opts *o, const struct tide_master_ha_ops *ops,
		       void *arg, atomic_bool *stop);

/** Longest master_view value accepted, NUL included. */
#define TIDE_MASTER_HA_LEADER_MAX 96

/**
 * Whether a master_view value names a leader: "host:port" (port 1..65535) of
 * characters safe to echo in JSON and logs, shorter than
 * TIDE_MASTER_HA_LEADER_MAX, and not later Mooncake's
 * "__mooncake_service_warming__" placeholder. v need not be NUL-terminated.
 * Thread: any.
 */
bool tide_master_ha_leader_valid(const char *v, size_t n);

/** The etcd key for a cluster id (NULL/"": mooncake_cluster), into buf. \return 0;
 *  -ENAMETOOLONG. Thread: any. */
int tide_master_ha_key(const char *cluster_id, char *buf, size_t len);

/** "<root>/<cluster>/<leaf>" into buf, with Mooncake's rules for the cluster id
 *  (NULL/"": mooncake_cluster; one trailing '/' dropped): master_view's key and
 *  the replicated table's prefix share them. \return 0; -ENAMETOOLONG. Thread: any. */
int tide_master_ha_cluster_path(const char *root, const char *cluster_id, const char *leaf,
				char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_MASTER_HA_H */
