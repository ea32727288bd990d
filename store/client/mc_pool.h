/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the store handle's pool of master connections.
 *
 * TIDE_MC_POOL_N connections to one master, opened on first use and again
 * after one broke. A call takes the first idle connection, else queues on
 * one in turn, so concurrent callers (Python threads, a batch and a
 * heartbeat-driven remount) do not serialise on a single socket. The master
 * address can change (a new HA leader): connections made to the old one are
 * closed as they are next taken.
 */
#ifndef TIDE_MC_POOL_H
#define TIDE_MC_POOL_H

#include <pthread.h>
#include <stdatomic.h>

#include "store_metrics.h"
#include "tide_mc_client.h"

#define TIDE_MC_POOL_N 4

#define TIDE_MC_POOL_ADDR_MAX 128

struct tide_mc_pool_conn {
	pthread_mutex_t lock;
	struct tide_mc_client *c; /* NULL: not connected (yet, or since it broke) */
	unsigned gen;             /* address generation c was connected with */
};

struct tide_mc_pool {
	pthread_mutex_t addr_lock;          /* guards master and gen */
	char master[TIDE_MC_POOL_ADDR_MAX]; /* "host:port"; "" until set */
	unsigned gen;                       /* bumped by each set_master */
	struct tide_mc_pool_conn conns[TIDE_MC_POOL_N];
	atomic_uint rr; /* which busy connection a caller queues on */
	/* Optional: called once when a connect fails, to look the master up again (an HA
	 * leader that moved); it calls tide_mc_pool_set_master() and returns 0 when it
	 * did, then the connect is tried once more. Set before first use. */
	int (*relocate)(void *arg);
	void *relocate_arg;
	/* Busy poll for each answer up to this many microseconds (tide_mc_client_set_poll_us;
	 * TIDE_MASTER_POLL_US). Set before first use; 0 sleeps at once. */
	uint32_t poll_us;
	/* The RPCs made through this pool, counted and timed (store_metrics.h). */
	struct store_metrics metrics;
};

/* Ready to use once the master is set; nothing is connected. Thread: the owner. */
void tide_mc_pool_init(struct tide_mc_pool *p);

/* Point the pool at addr ("host:port"): later gets connect there, and
 * connections to the previous address are closed as they are taken.
 * Returns 0, or -ENAMETOOLONG. Thread: any. */
int tide_mc_pool_set_master(struct tide_mc_pool *p, const char *addr);

/* The current address, copied into buf (len >= TIDE_MC_POOL_ADDR_MAX). Thread: any. */
void tide_mc_pool_master(struct tide_mc_pool *p, char *buf, size_t len);

/* Close every connection (they reopen on the next get). Thread: the owner, no call in flight. */
void tide_mc_pool_close_all(struct tide_mc_pool *p);

/* close_all, then release the locks. Thread: the owner, no call in flight. */
void tide_mc_pool_fini(struct tide_mc_pool *p);

/*
 * A connected master connection, locked for the caller until
 * tide_mc_pool_put(). A connection that broke is reopened here; timeout_ms
 * bounds that connect (0: the client's default).
 * When the connect fails and a relocate hook is set, the hook runs and, if the
 * address changed, the connect is tried once more.
 * Returns NULL with *err set (-errno of the connect: -ECONNREFUSED,
 * -ETIMEDOUT, -EINVAL no ':port' in master, ...); nothing stays locked then.
 * Thread: any.
 */
struct tide_mc_pool_conn *tide_mc_pool_get(struct tide_mc_pool *p, int timeout_ms, int *err);

/* Give a connection back. Thread: the one that got it. */
void tide_mc_pool_put(struct tide_mc_pool_conn *m);

/*
 * One master RPC on a pooled connection: what tide_mc_client_call() returns,
 * or the connect's error. resp is valid (free it) only on 0. Thread: any.
 */
int tide_mc_pool_call(struct tide_mc_pool *p, const struct tide_mc_req *r,
		      struct tide_mc_resp *resp);

#endif /* TIDE_MC_POOL_H */
