/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the in-process backend of store_backend.h. The
 * master places objects (store_mc.h, leases store_lease.h), this process's
 * transfer engine moves the bytes (store_xfer.h), puts are sequenced by
 * store_put.h.
 *
 * The state is set up and torn down by store_client.c (the engine, the
 * segment, the master connections, the local buffer, the heartbeat that keeps
 * the segment mounted); the ops read it and change only what they own: the
 * mapped regions (under map_lock), and what mc and leases lock themselves.
 *
 * Thread: the ops run from any thread at once; set-up and close are the owner's.
 */
#ifndef TIDE_STORE_INPROC_H
#define TIDE_STORE_INPROC_H

#include <pthread.h>
#include <stddef.h>

#include "store_backend.h"
#include "store_lease.h"
#include "store_mc.h"
#include "store_sess.h"
#include "store_xfer.h"

/* Bound on a health check's connect and answer (and on close's UnmountSegment),
 * so that a dead master is reported in seconds. */
#define STORE_HEALTH_TIMEOUT_MS 2000

/* A tide_store_map_buffer() region: mmap'd here, registered with the engine. */
struct store_mapped {
	void *base;
	size_t len;
	struct store_mapped *next;
};

struct store_inproc {
	struct store_backend be; /* ops: store_inproc_ops */
	char *proto;             /* "tcp" / "rdma" (owned; NULL before set-up) */
	struct tide_te *te;      /* the engine the bytes move with */
	void *seg_base;          /* our mounted segment; NULL: nothing contributed */
	size_t seg_size;
	struct store_mc mc;         /* master connections, client id, HA leader lookup */
	struct store_leases leases; /* one-round-trip puts */
	void *lbuf;                 /* the local buffer (caller staging); NULL: none */
	size_t lbuf_len;
	pthread_mutex_t map_lock; /* maps */
	struct store_mapped *maps;
	/* Open sessions (store_session.h), TIDE_STORE_SESSIONS_MAX each; lock themselves. */
	struct store_sess_tab put_sess, get_sess;
};

/* Where ip's transfers run (store_xfer.h): its engine and its own segment. Thread: any. */
static inline struct store_xfer_eng
store_inproc_eng(struct store_inproc *ip)
{
	struct store_xfer_eng e = {.te = ip->te,
				   .seg_base = ip->seg_base,
				   .seg_size = ip->seg_size,
				   .met = &ip->mc.pool.metrics};

	return e;
}

#endif /* TIDE_STORE_INPROC_H */
