/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine's RDMA transport: one-sided READ/WRITE over RC queue
 * pairs, driven by pinned polling workers (engine/lcore), through the RDMA
 * driver table of tide_rdma_dev.h only (pmd/verbs registers it; no verbs
 * header here).
 *
 * Workers: when the user-space TCP transport runs, its lcores are borrowed
 * (te_xport_cfg.shared_lcores): each worker's poller (rdma_poll) is added on
 * one of them, next to the packet rx poller, from a message run on that lcore,
 * and removed the same way at destroy before the worker's state is freed.
 * Otherwise (kernel TCP) the transport starts a worker group of its own. Either
 * way a worker (struct te_lc) is reached only through its inbox and
 * tide_lcore_post().
 *
 * Objects:
 * - an endpoint (struct rep) is one local device connected to one peer device
 *   ("<peer segment>@<peer device>", Mooncake's NIC path) with nqp RC QPs. It is
 *   shared by our own transfers and by the peer's Connection handshakes, as in
 *   Mooncake, so a stock node that connects first and a Tide node that connects
 *   later agree on one QP set. Each endpoint is owned by one worker (chosen on
 *   its device's NUMA node), whose CQ for that device its QPs complete on.
 * - a peer (struct te_xpeer) is a segment: one endpoint per local device (local
 *   device i talks to peer device i mod peer's device count), slices dealt over
 *   the endpoints, then over each endpoint's QPs: a large request runs over
 *   every device and QP at once.
 *
 * Who touches what:
 * - application threads: submit() appends slices to the owning worker's inbox
 *   (one mutex per worker); registration takes the MR table's write lock.
 * - a worker: everything about its endpoints' queues and in-flight rings, its
 *   CQs, its bounce buffers. It posts only while the endpoint is READY.
 * - the connection manager thread (CM) and the handshake daemon's handler: QP
 *   creation, state transitions, handshakes, under the endpoint's setup_lock,
 *   and only while the endpoint is not READY. The endpoint's atomic state hands
 *   the QPs from one side to the other (release on READY, acquire on read).
 *
 * Endpoint states: IDLE (no connection) -> CONNECTING (CM or handler) -> READY
 * (worker posts) -> BROKEN (worker saw an error completion and failed every
 * in-flight slice; the CM tears the QPs down, creates new ones and handshakes
 * again) or DRAIN (a peer re-handshakes: the worker fails in-flight work and
 * goes IDLE for the handler). FAILED: a connect failed; the worker fails the
 * queued slices with the reason and goes IDLE (the next slice retries).
 *
 * Completions: every WR carries wr_id = endpoint index (16 bits) | QP index (8)
 * | connection generation (8) | sequence (32). Only every TE_RDMA_SIGNAL_EVERY-th
 * WR and the last of each burst is signalled; a signalled success retires the
 * QP's ring up to it (RC completes in order), an error completion retires the
 * ring before it as done, fails the errored slice with its mapped error and the
 * rest with -ECONNRESET. Completions of an older generation are ignored.
 *
 * Local memory: a slice's local range must lie in a registered region (segment
 * buffers and tide_te_register_local() buffers, registered once with every
 * device); otherwise it goes through the worker's bounce buffer (registered
 * once, at the worker's first need): WRITE copies in before posting, READ
 * copies out on completion. Nothing is registered per transfer.
 *
 * Bounds: TE_RDMA_MAX_EPS endpoints per transport (each worker scans its own
 * once per iteration); TE_RDMA_QP_DEPTH WRs in flight per QP; bursts of
 * TE_RDMA_BURST WRs per post and completions per poll; bounce buffer of at most
 * TE_RDMA_BOUNCE_BYTES per worker; a queued or in-flight slice fails with
 * -ETIMEDOUT after io_timeout_ms.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <numa.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "te_rdma.h"
#include "te_xport.h"
#include "tide_clock.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_nodeenv.h"
#include "tide_rdma_dev.h"
#include "tide_te.h"

/* Appended to the one line that says rdma cannot run here: the node-file switch that
 * serves rdma over TCP instead (te_engine.c, TIDE_RDMA_AS_TCP). */
#define AS_TCP_HINT "; or set TIDE_RDMA_AS_TCP=1 to serve protocol rdma with TCP on this node"
/* The one line when no driver registered itself (tide_rdma_dev.h, "Linking"). */
#define NO_DRIVER                                                                               \
	"no verbs driver linked into this program: link pmd/verbs (tide_vrb_rdma_dep), or use " \
	"protocol tcp (MOONCAKE_PROTOCOL=tcp)"

#define TE_RDMA_MAX_EPS      1024
#define TE_RDMA_QP_DEPTH     128
#define TE_RDMA_SIGNAL_EVERY 16
#define TE_RDMA_BURST        32
#define TE_RDMA_CQ_SIZE      16384
#define TE_RDMA_BOUNCE_BYTES (16u << 20)
#define TE_RDMA_TICK_NS      (10 * 1000000ull)
#define TE_RDMA_HS_RETRIES   8
#define TE_RDMA_DRAIN_MS     2000
#define TE_RDMA_DEF_QP       2 /* Mooncake's default QPs per endpoint */

static_assert(TE_RDMA_BURST <= TIDE_RDMA_BURST_MAX, "a burst is one post and one poll");

enum ep_state {
	EP_IDLE,
	EP_CONNECTING,
	EP_READY,
	EP_BROKEN,
	EP_DRAIN,
	EP_FAILED,
};

struct rinf {
	struct te_slice *s;
	uint32_t seq;
	int bounce; /* slot, or -1 */
	uint64_t posted_ns;
};

struct rqp {
	struct tide_rdma_qp *qp;
	/* worker only */
	struct rinf ring[TE_RDMA_QP_DEPTH];
	uint32_t head, n;
	uint32_t seq;
	uint32_t unsignaled;
};

struct te_lc;

struct rep {
	struct te_xport *x;
	uint16_t idx;
	unsigned ldev;
	char peer_seg[TE_NAME_MAX];
	char peer_dev[TE_DEV_NAME_MAX];
	char peer_nic[TE_RDMA_NIC_PATH_MAX];
	struct te_lc *l;
	_Atomic int state;
	_Atomic uint32_t gen;
	int fail_err;
	pthread_mutex_t setup_lock;  /* CM and handshake handler */
	struct tide_rdma_addr raddr; /* remote device address (setup_lock) */
	uint16_t rlid;
	bool raddr_known;
	unsigned nqp;
	struct rqp qps[TE_RDMA_MAX_QP_PER_EP];
	atomic_bool cm_queued;
	struct rep *cm_next;
	/* worker only */
	struct te_slice *q_head, *q_tail;
	unsigned nq;
	unsigned rr;
};

struct te_lc {
	struct te_xport *x;
	unsigned idx;
	int numa;
	struct tide_lcore *lc;
	bool polling; /* rdma_poll is on lc, which runs: stop it there at destroy */
	struct tide_rdma_cq *cq[TIDE_RDMA_DEV_MAX];
	pthread_mutex_t inbox_lock;
	struct te_slice *in_head, *in_tail;
	atomic_bool inbox_pending;
	struct rep *eps[TE_RDMA_MAX_EPS];
	_Atomic unsigned neps;
	uint64_t next_tick;
	/* bounce buffer, worker only */
	uint8_t *bounce;
	struct tide_rdma_mr *bounce_mr;
	struct tide_rdma_keys bounce_keys;
	unsigned nbounce;
	uint64_t bounce_free; /* bit i: slot i free */
	bool bounce_failed;
};

struct te_xpeer {
	struct te_xport *x;
	char name[TE_NAME_MAX];
	struct te_desc *desc;
	unsigned nep;
	struct rep *eps[TIDE_RDMA_DEV_MAX];
	atomic_uint rr;
};

struct xmr {
	uint64_t addr, len;
	struct tide_rdma_mr *mr;
	struct tide_rdma_keys keys;
};

struct te_xport {
	struct te_xport_cfg cfg;
	char local_name[TE_NAME_MAX];
	const struct tide_rdma_dev_ops *dev; /* the registered driver */
	struct tide_rdma_devs *d;
	unsigned ndev;
	struct tide_rdma_dev_info devs[TIDE_RDMA_DEV_MAX];
	unsigned nqp;
	struct tide_lcore_group *g; /* own workers; NULL when borrowing cfg.shared_lcores */
	unsigned nlc;
	struct te_lc lcs[TIDE_LCORE_MAX];

	pthread_rwlock_t mr_lock;
	struct xmr *mrs; /* sorted by addr, disjoint */
	size_t nmrs, capmrs;

	pthread_mutex_t ep_lock;
	struct rep *_Atomic eps[TE_RDMA_MAX_EPS];
	unsigned neps;
	unsigned lc_rr[TIDE_RDMA_DEV_MAX];

	pthread_t cm_thr;
	bool cm_started;
	pthread_mutex_t cm_lock;
	pthread_cond_t cm_cond;
	struct rep *cm_head, *cm_tail;
	struct rep *cm_busy;
	bool cm_stop;

	struct {
		_Atomic uint64_t wrs, posts, wc_errors, reconnects, bounced, handshakes;
	} st;
};

/* ---- local memory regions -------------------------------------------------- */

/* Index of the first region whose end is above addr; caller holds mr_lock. */
static size_t
mr_find(const struct te_xport *x, uint64_t addr)
{
	size_t lo = 0, hi = x->nmrs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->mrs[mid].addr + x->mrs[mid].len <= addr) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

/* The region holding [addr, addr+len), or NULL; caller holds mr_lock. */
static const struct xmr *
mr_lookup(const struct te_xport *x, uint64_t addr, uint64_t len)
{
	size_t i = mr_find(x, addr);

	if (i == x->nmrs || addr < x->mrs[i].addr || addr + len > x->mrs[i].addr + x->mrs[i].len) {
		return NULL;
	}
	return &x->mrs[i];
}

static int
rdma_mem_reg(struct te_xport *x, uint64_t addr, uint64_t len)
{
	struct tide_rdma_keys keys;
	struct tide_rdma_mr *mr;
	size_t i;
	int rc;

	if (addr == 0 || len == 0 || addr + len < addr) {
		return -EINVAL;
	}
	rc = x->dev->mr_reg(x->d, (void *)(uintptr_t)addr, len, &mr, &keys);
	if (rc != 0) {
		return rc;
	}
	pthread_rwlock_wrlock(&x->mr_lock);
	i = mr_find(x, addr);
	if (i < x->nmrs && x->mrs[i].addr < addr + len) {
		pthread_rwlock_unlock(&x->mr_lock);
		x->dev->mr_dereg(x->d, mr);
		return -EEXIST;
	}
	if (x->nmrs == x->capmrs) {
		size_t cap = x->capmrs ? x->capmrs * 2 : 16;
		struct xmr *m = realloc(x->mrs, cap * sizeof(*m));

		if (m == NULL) {
			pthread_rwlock_unlock(&x->mr_lock);
			x->dev->mr_dereg(x->d, mr);
			return -ENOMEM;
		}
		x->mrs = m;
		x->capmrs = cap;
	}
	memmove(&x->mrs[i + 1], &x->mrs[i], (x->nmrs - i) * sizeof(*x->mrs));
	x->mrs[i] = (struct xmr){.addr = addr, .len = len, .mr = mr, .keys = keys};
	x->nmrs++;
	pthread_rwlock_unlock(&x->mr_lock);
	return 0;
}

static int
rdma_mem_dereg(struct te_xport *x, uint64_t addr)
{
	struct tide_rdma_mr *mr;
	size_t i;

	/* The write lock waits for a worker building a burst with the region's lkey. */
	pthread_rwlock_wrlock(&x->mr_lock);
	i = mr_find(x, addr);
	if (i == x->nmrs || x->mrs[i].addr != addr) {
		pthread_rwlock_unlock(&x->mr_lock);
		return -ENOENT;
	}
	mr = x->mrs[i].mr;
	memmove(&x->mrs[i], &x->mrs[i + 1], (x->nmrs - i - 1) * sizeof(*x->mrs));
	x->nmrs--;
	pthread_rwlock_unlock(&x->mr_lock);
	x->dev->mr_dereg(x->d, mr);
	return 0;
}

static int
rdma_describe(struct te_xport *x, struct te_desc *d)
{
	int rc = 0;

	snprintf(d->protocol, sizeof(d->protocol), "rdma");
	d->ndevs = x->ndev;
	for (unsigned i = 0; i < x->ndev; i++) {
		snprintf(d->devs[i].name, sizeof(d->devs[i].name), "%s", x->devs[i].name);
		snprintf(d->devs[i].gid, sizeof(d->devs[i].gid), "%s", x->devs[i].addr);
		d->devs[i].lid = x->devs[i].lid;
	}
	pthread_rwlock_rdlock(&x->mr_lock);
	for (uint32_t b = 0; b < d->nbufs && rc == 0; b++) {
		size_t i = mr_find(x, d->bufs[b].addr);

		if (i == x->nmrs || x->mrs[i].addr != d->bufs[b].addr) {
			TIDE_LOG(ERR, "rdma: buffer 0x%" PRIx64 " is not registered",
				 d->bufs[b].addr);
			rc = -ENOENT;
			break;
		}
		d->bufs[b].nkeys = x->ndev;
		for (unsigned k = 0; k < x->ndev; k++) {
			d->bufs[b].rkey[k] = x->mrs[i].keys.rkey[k];
			d->bufs[b].lkey[k] = x->mrs[i].keys.lkey[k];
		}
	}
	pthread_rwlock_unlock(&x->mr_lock);
	return rc;
}

/* ---- worker: bounce buffer ------------------------------------------------ */

static int
bounce_get(struct te_lc *l)
{
	struct te_xport *x = l->x;

	if (l->bounce == NULL && !l->bounce_failed) {
		size_t slot = x->cfg.slice_size, n = TE_RDMA_BOUNCE_BYTES / slot;

		n = n < 2 ? 2 : n > 64 ? 64 : n;
		/* Once per worker, at its first unregistered local buffer. */
		l->bounce = aligned_alloc(4096, n * slot);
		if (l->bounce == NULL || x->dev->mr_reg(x->d, l->bounce, n * slot, &l->bounce_mr,
							&l->bounce_keys) != 0) {
			TIDE_LOG(ERR,
				 "rdma: worker %u: bounce buffer (%zu bytes) unavailable; "
				 "register local buffers (tide_te_register_local)",
				 l->idx, n * slot);
			free(l->bounce);
			l->bounce = NULL;
			l->bounce_failed = true;
			return -2;
		}
		l->nbounce = (unsigned)n;
		l->bounce_free = n == 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
	}
	if (l->bounce == NULL) {
		return -2;
	}
	if (l->bounce_free == 0) {
		return -1;
	}
	int i = __builtin_ctzll(l->bounce_free);

	l->bounce_free &= ~(UINT64_C(1) << i);
	return i;
}

static void
bounce_put(struct te_lc *l, int i)
{
	if (i >= 0) {
		l->bounce_free |= UINT64_C(1) << i;
	}
}

static uint8_t *
bounce_addr(struct te_lc *l, int i)
{
	return l->bounce + (size_t)i * l->x->cfg.slice_size;
}

/* ---- worker: completing slices --------------------------------------------- */

static void
ent_finish(struct te_lc *l, struct rinf *e, int err)
{
	struct te_slice *s = e->s;

	if (err == 0 && e->bounce >= 0 && s->op == TIDE_TE_READ) {
		memcpy(s->local, bounce_addr(l, e->bounce), s->len);
	}
	bounce_put(l, e->bounce);
	e->s = NULL;
	te_slice_done(s, err);
}

/* Fail every in-flight slice of ep (worker only). */
static unsigned
ep_fail_inflight(struct rep *ep, int err)
{
	unsigned n = 0;

	for (unsigned q = 0; q < ep->nqp; q++) {
		struct rqp *rq = &ep->qps[q];

		while (rq->n > 0) {
			ent_finish(ep->l, &rq->ring[rq->head], err);
			rq->head = (rq->head + 1) % TE_RDMA_QP_DEPTH;
			rq->n--;
			n++;
		}
		rq->unsignaled = 0;
	}
	return n;
}

static unsigned
ep_fail_queued(struct rep *ep, int err)
{
	unsigned n = 0;

	while (ep->q_head != NULL) {
		struct te_slice *s = ep->q_head;

		ep->q_head = s->next;
		te_slice_done(s, err);
		n++;
	}
	ep->q_tail = NULL;
	ep->nq = 0;
	return n;
}

static void cm_request(struct rep *ep);

/* An error on a READY endpoint: fail what is in flight, hand it to the CM. */
static void
ep_break(struct rep *ep, int err, const char *why)
{
	int expect = EP_READY;

	ep_fail_inflight(ep, err);
	if (atomic_compare_exchange_strong(&ep->state, &expect, EP_BROKEN)) {
		TIDE_LOG_RATELIMIT(WARN, 5, "rdma: %s -> %s: %s; re-establishing",
				   ep->x->devs[ep->ldev].name, ep->peer_nic, why);
		atomic_fetch_add(&ep->x->st.reconnects, 1);
		cm_request(ep);
	}
}

/* ---- worker: posting --------------------------------------------------------- */

static uint64_t
mk_wr_id(const struct rep *ep, unsigned q, uint32_t gen, uint32_t seq)
{
	return (uint64_t)ep->idx << 48 | (uint64_t)q << 40 | (uint64_t)(gen & 0xff) << 32 | seq;
}

/* Post what fits from ep's queue (READY). Returns WRs posted. */
static unsigned
ep_pump(struct rep *ep, uint64_t now)
{
	struct te_xport *x = ep->x;
	struct te_lc *l = ep->l;
	uint32_t gen = atomic_load_explicit(&ep->gen, memory_order_relaxed);
	unsigned total = 0;

	pthread_rwlock_rdlock(&x->mr_lock);
	while (ep->nq > 0) {
		struct tide_rdma_wr wrs[TE_RDMA_BURST];
		struct rqp *rq = NULL;
		unsigned q = 0, n = 0, posted = 0;
		bool stalled = false;
		int rc;

		for (unsigned k = 0; k < ep->nqp; k++) {
			q = (ep->rr + k) % ep->nqp;
			if (ep->qps[q].n < TE_RDMA_QP_DEPTH) {
				rq = &ep->qps[q];
				break;
			}
		}
		if (rq == NULL) {
			break; /* every QP full: completions will make room */
		}
		ep->rr = q + 1;
		while (n < TE_RDMA_BURST && ep->q_head != NULL && rq->n + n < TE_RDMA_QP_DEPTH) {
			struct te_slice *s = ep->q_head;
			const struct xmr *m = mr_lookup(x, (uint64_t)(uintptr_t)s->local, s->len);
			struct rinf *e = &rq->ring[(rq->head + rq->n + n) % TE_RDMA_QP_DEPTH];
			int slot = -1;

			if (m == NULL) {
				slot = bounce_get(l);
				if (slot == -1) {
					stalled = true; /* wait for a bounce slot */
					break;
				}
				if (slot == -2) {
					ep->q_head = s->next;
					ep->nq--;
					te_slice_done(s, -ENOMEM);
					continue;
				}
				if (s->op == TIDE_TE_WRITE) {
					memcpy(bounce_addr(l, slot), s->local, s->len);
				}
				atomic_fetch_add_explicit(&x->st.bounced, 1, memory_order_relaxed);
			}
			ep->q_head = s->next;
			ep->nq--;
			wrs[n] = (struct tide_rdma_wr){
				.wr_id = mk_wr_id(ep, q, gen, rq->seq),
				.local = m != NULL ? (uint64_t)(uintptr_t)s->local
						   : (uint64_t)(uintptr_t)bounce_addr(l, slot),
				.remote = s->remote,
				.len = s->len,
				.lkey = m != NULL ? m->keys.lkey[ep->ldev]
						  : l->bounce_keys.lkey[ep->ldev],
				.rkey = s->xport_key,
				.op = s->op == TIDE_TE_READ ? TIDE_RDMA_WR_READ
							    : TIDE_RDMA_WR_WRITE,
			};
			if (++rq->unsignaled >= TE_RDMA_SIGNAL_EVERY) {
				wrs[n].signaled = true;
				rq->unsignaled = 0;
			}
			*e = (struct rinf){
				.s = s, .seq = rq->seq++, .bounce = slot, .posted_ns = now};
			n++;
		}
		if (ep->q_head == NULL) {
			ep->q_tail = NULL;
		}
		if (n == 0) {
			break;
		}
		/* The last WR of a burst is always signalled, so nothing waits forever. */
		if (!wrs[n - 1].signaled) {
			wrs[n - 1].signaled = true;
			rq->unsignaled = 0;
		}
		rq->n += n;
		rc = x->dev->post(x->d, rq->qp, wrs, n, &posted);
		atomic_fetch_add_explicit(&x->st.posts, 1, memory_order_relaxed);
		if (rc != 0) {
			/* WRs from `posted` on were not posted: back to the queue head, in
			 * order; the endpoint is broken for the ones that were. */
			struct te_slice *head = NULL, *last = NULL;

			for (unsigned k = posted; k < n; k++) {
				struct rinf *e =
					&rq->ring[(rq->head + rq->n - n + k) % TE_RDMA_QP_DEPTH];

				bounce_put(l, e->bounce);
				if (last != NULL) {
					last->next = e->s;
				} else {
					head = e->s;
				}
				last = e->s;
				e->s = NULL;
			}
			if (last != NULL) {
				last->next = ep->q_head;
				if (ep->q_head == NULL) {
					ep->q_tail = last;
				}
				ep->q_head = head;
			}
			ep->nq += n - posted;
			rq->n -= n - posted;
			rq->seq -= n - posted;
			total += posted;
			pthread_rwlock_unlock(&x->mr_lock);
			ep_break(ep, -ECONNRESET,
				 rc == -ENOMEM ? "send queue full" : strerror(-rc));
			return total;
		}
		atomic_fetch_add_explicit(&x->st.wrs, n, memory_order_relaxed);
		total += n;
		if (stalled) {
			break;
		}
	}
	pthread_rwlock_unlock(&x->mr_lock);
	return total;
}

/* ---- worker: completions -------------------------------------------------------- */

static void
on_wc(struct te_lc *l, const struct tide_rdma_wc *wc)
{
	struct te_xport *x = l->x;
	unsigned idx = (unsigned)(wc->wr_id >> 48), q = (unsigned)(wc->wr_id >> 40) & 0xff;
	uint32_t gen = (uint32_t)(wc->wr_id >> 32) & 0xff, seq = (uint32_t)wc->wr_id;
	struct rep *ep;
	struct rqp *rq;

	if (idx >= TE_RDMA_MAX_EPS) {
		return;
	}
	ep = atomic_load_explicit(&x->eps[idx], memory_order_acquire);
	if (ep == NULL || ep->l != l || q >= ep->nqp ||
	    atomic_load_explicit(&ep->state, memory_order_acquire) != EP_READY ||
	    (atomic_load_explicit(&ep->gen, memory_order_relaxed) & 0xff) != gen) {
		return; /* an older connection's completion (flushed or reset since) */
	}
	rq = &ep->qps[q];
	while (rq->n > 0) {
		struct rinf *e = &rq->ring[rq->head];
		bool last = e->seq == seq;

		if (last && wc->err != 0) {
			char why[160];

			atomic_fetch_add_explicit(&x->st.wc_errors, 1, memory_order_relaxed);
			snprintf(why, sizeof(why), "qp %u wc status %s (%d)", wc->qp_num,
				 x->dev->status_str(wc->status), wc->status);
			rq->head = (rq->head + 1) % TE_RDMA_QP_DEPTH;
			rq->n--;
			ent_finish(l, e, wc->err);
			ep_break(ep, -ECONNRESET, why);
			return;
		}
		rq->head = (rq->head + 1) % TE_RDMA_QP_DEPTH;
		rq->n--;
		ent_finish(l, e, 0);
		if (last) {
			break;
		}
	}
}

/* Timeouts: queued slices and the oldest in-flight WR of each QP. */
static void
ep_tick(struct rep *ep, uint64_t now)
{
	uint64_t limit = (uint64_t)ep->x->cfg.io_timeout_ms * 1000000ull;

	while (ep->q_head != NULL && now - ep->q_head->submitted_ns > limit) {
		struct te_slice *s = ep->q_head;

		ep->q_head = s->next;
		if (ep->q_head == NULL) {
			ep->q_tail = NULL;
		}
		ep->nq--;
		te_slice_done(s, -ETIMEDOUT);
	}
	if (atomic_load_explicit(&ep->state, memory_order_acquire) != EP_READY) {
		return;
	}
	for (unsigned q = 0; q < ep->nqp; q++) {
		const struct rqp *rq = &ep->qps[q];

		if (rq->n > 0 && now - rq->ring[rq->head].posted_ns > limit) {
			ep_break(ep, -ETIMEDOUT, "no completion within io_timeout_ms");
			return;
		}
	}
}

static void
inbox_drain(struct te_lc *l)
{
	struct te_slice *s;

	if (!atomic_load_explicit(&l->inbox_pending, memory_order_acquire)) {
		return;
	}
	pthread_mutex_lock(&l->inbox_lock);
	s = l->in_head;
	l->in_head = l->in_tail = NULL;
	atomic_store_explicit(&l->inbox_pending, false, memory_order_relaxed);
	pthread_mutex_unlock(&l->inbox_lock);
	while (s != NULL) {
		struct te_slice *next = s->next;
		struct rep *ep = (struct rep *)(uintptr_t)s->xport_mark;

		s->next = NULL;
		if (ep->q_tail != NULL) {
			ep->q_tail->next = s;
		} else {
			ep->q_head = s;
		}
		ep->q_tail = s;
		ep->nq++;
		s = next;
	}
}

static int
rdma_poll(void *ctx, uint64_t now)
{
	struct te_lc *l = ctx;
	struct te_xport *x = l->x;
	unsigned neps, work = 0;

	inbox_drain(l);
	for (unsigned d = 0; d < x->ndev; d++) {
		struct tide_rdma_wc wc[TE_RDMA_BURST];
		int n = x->dev->poll(x->d, l->cq[d], wc, TE_RDMA_BURST);

		for (int i = 0; i < n; i++) {
			on_wc(l, &wc[i]);
		}
		work += n > 0 ? (unsigned)n : 0;
	}
	neps = atomic_load_explicit(&l->neps, memory_order_acquire);
	for (unsigned i = 0; i < neps; i++) {
		struct rep *ep = l->eps[i];

		switch (atomic_load_explicit(&ep->state, memory_order_acquire)) {
		case EP_READY:
			if (ep->nq > 0) {
				work += ep_pump(ep, now);
			}
			break;
		case EP_DRAIN:
			/* A peer re-handshakes: hand the QPs over once nothing is in flight. */
			work += ep_fail_inflight(ep, -ECONNRESET);
			atomic_store_explicit(&ep->state, EP_IDLE, memory_order_release);
			break;
		case EP_FAILED:
			work += ep_fail_queued(ep, ep->fail_err);
			atomic_store_explicit(&ep->state, EP_IDLE, memory_order_release);
			break;
		case EP_IDLE:
		case EP_BROKEN:
			if (ep->nq > 0) {
				cm_request(ep);
			}
			break;
		default:
			break;
		}
	}
	if (now >= l->next_tick) {
		/* A fresh read: slices drained above may have been stamped after `now`
		 * (on a shared lcore the packet poller ran in between), and an age
		 * computed from an older `now` would wrap around and time them out. */
		uint64_t t = tide_mono_ns();

		l->next_tick = now + TE_RDMA_TICK_NS;
		for (unsigned i = 0; i < neps; i++) {
			ep_tick(l->eps[i], t);
		}
	}
	return (int)work;
}

/* ---- running work on a worker ------------------------------------------------------ */

/* Run fn(arg) on lcore l and wait for it (an lcore never waits on us). */
static int
run_on_lcore(struct te_lc *l, void (*fn)(void *), void *arg)
{
	return tide_lcore_run_sync(l->lc, fn, arg);
}

/* ---- connection set-up (CM thread and handshake handler) ---------------------------- */

/* Create the endpoint's QPs if it has none; caller holds setup_lock. */
static int
ep_qps_create(struct rep *ep)
{
	struct te_xport *x = ep->x;

	for (unsigned q = 0; q < ep->nqp; q++) {
		if (ep->qps[q].qp == NULL) {
			int rc = x->dev->qp_create(x->d, ep->ldev, ep->l->cq[ep->ldev],
						   TE_RDMA_QP_DEPTH, &ep->qps[q].qp);

			if (rc != 0) {
				return rc;
			}
		}
	}
	return 0;
}

static void
ep_qps_destroy(struct rep *ep)
{
	for (unsigned q = 0; q < ep->nqp; q++) {
		if (ep->qps[q].qp != NULL) {
			ep->x->dev->qp_destroy(ep->x->d, ep->qps[q].qp);
			ep->qps[q].qp = NULL;
		}
	}
}

/* Connect every QP to the peer's; caller holds setup_lock, state CONNECTING. */
static int
ep_qps_connect(struct rep *ep, const uint32_t *qpn, char *why, size_t whylen)
{
	for (unsigned q = 0; q < ep->nqp; q++) {
		struct tide_rdma_remote r = {.addr = ep->raddr, .lid = ep->rlid, .qp_num = qpn[q]};
		int rc = ep->x->dev->qp_connect(ep->x->d, ep->ldev, ep->qps[q].qp, &r, why, whylen);

		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

static void
ep_local_hs(const struct rep *ep, struct te_rdma_hs *h)
{
	const struct tide_rdma_dev_info *d = &ep->x->devs[ep->ldev];

	memset(h, 0, sizeof(*h));
	snprintf(h->local_nic_path, sizeof(h->local_nic_path), "%s@%s", ep->x->local_name, d->name);
	snprintf(h->peer_nic_path, sizeof(h->peer_nic_path), "%s", ep->peer_nic);
	h->has_lid = true;
	h->local_lid = d->lid;
	snprintf(h->local_gid, sizeof(h->local_gid), "%s", d->addr);
	h->nqp = ep->nqp;
	for (unsigned q = 0; q < ep->nqp; q++) {
		h->qp_num[q] = ep->x->dev->qp_num(ep->qps[q].qp);
	}
}

/* Remote device address from a handshake, else from the peer's descriptor. */
static int
ep_learn_remote(struct rep *ep, const struct te_rdma_hs *h, char *why, size_t whylen)
{
	struct te_desc *d = NULL;
	int rc;

	if (h != NULL && h->local_gid[0] != '\0' &&
	    ep->x->dev->addr_parse(h->local_gid, &ep->raddr) == 0) {
		ep->rlid = h->has_lid ? h->local_lid : 0;
		ep->raddr_known = true;
		return 0;
	}
	if (ep->raddr_known) {
		return 0;
	}
	if (ep->x->cfg.meta.fetch_desc == NULL) {
		snprintf(why, whylen, "no address for %.200s", ep->peer_nic);
		return -ENOENT;
	}
	rc = ep->x->cfg.meta.fetch_desc(ep->x->cfg.meta.arg, ep->peer_seg, &d);
	if (rc != 0) {
		snprintf(why, whylen, "descriptor of %.160s: %.60s", ep->peer_seg, strerror(-rc));
		return rc;
	}
	rc = -ENODEV;
	for (uint32_t i = 0; i < d->ndevs; i++) {
		if (strcmp(d->devs[i].name, ep->peer_dev) == 0 &&
		    ep->x->dev->addr_parse(d->devs[i].gid, &ep->raddr) == 0) {
			ep->rlid = d->devs[i].lid;
			ep->raddr_known = true;
			rc = 0;
			break;
		}
	}
	te_desc_free(d);
	if (rc != 0) {
		snprintf(why, whylen, "device %.60s not in %.120s's descriptor", ep->peer_dev,
			 ep->peer_seg);
	}
	return rc;
}

/*
 * Active connect: create QPs (new ones after an error: a QP in error is torn
 * down), ask the peer's daemon, connect. -EBUSY: the peer was connecting to us
 * at the same moment; the caller retries after a random pause.
 */
static int
ep_connect_active(struct rep *ep)
{
	struct te_xport *x = ep->x;
	struct te_rdma_hs mine, theirs;
	char *req = NULL, *reply = NULL, why[256] = "";
	size_t rlen = 0;
	int st, rc;

	pthread_mutex_lock(&ep->setup_lock);
	st = atomic_load(&ep->state);
	if (st != EP_IDLE && st != EP_BROKEN) {
		pthread_mutex_unlock(&ep->setup_lock);
		return 0; /* connected meanwhile (the peer's handshake), or being connected */
	}
	atomic_store(&ep->state, EP_CONNECTING);
	if (st == EP_BROKEN) {
		ep_qps_destroy(ep);
	}
	rc = ep_qps_create(ep);
	if (rc == 0) {
		ep_local_hs(ep, &mine);
		rc = te_rdma_hs_encode(&mine, &req);
	}
	pthread_mutex_unlock(&ep->setup_lock);
	if (rc == 0) {
		/* No lock across the network: the peer's handler for this endpoint must be
		 * able to see CONNECTING and answer busy. */
		atomic_fetch_add(&x->st.handshakes, 1);
		rc = x->cfg.meta.conn_request(x->cfg.meta.arg, ep->peer_seg, req, strlen(req),
					      &reply, &rlen);
		if (rc != 0) {
			snprintf(why, sizeof(why), "handshake: %s", strerror(-rc));
		}
	}
	if (rc == 0) {
		rc = te_rdma_hs_decode(reply, rlen, &theirs, why, sizeof(why));
	}
	if (rc == 0 && theirs.reply_msg[0] != '\0') {
		rc = strstr(theirs.reply_msg, "busy") != NULL ? -EBUSY : -ECONNREFUSED;
		snprintf(why, sizeof(why), "refused by peer: %.200s", theirs.reply_msg);
	}
	if (rc == 0 && (strcmp(theirs.local_nic_path, ep->peer_nic) != 0 ||
			strcmp(theirs.peer_nic_path, mine.local_nic_path) != 0)) {
		rc = -EPROTO;
		snprintf(why, sizeof(why), "reply is for %.110s -> %.110s", theirs.local_nic_path,
			 theirs.peer_nic_path);
	}
	if (rc == 0 && theirs.nqp != ep->nqp) {
		rc = -EPROTO;
		snprintf(why, sizeof(why), "peer has %u QPs per endpoint, we %u (MC_NUM_QP_PER_EP)",
			 theirs.nqp, ep->nqp);
	}
	pthread_mutex_lock(&ep->setup_lock);
	if (rc == 0) {
		rc = ep_learn_remote(ep, &theirs, why, sizeof(why));
	}
	if (rc == 0) {
		rc = ep_qps_connect(ep, theirs.qp_num, why, sizeof(why));
	}
	if (rc == 0) {
		atomic_fetch_add_explicit(&ep->gen, 1, memory_order_relaxed);
		atomic_store_explicit(&ep->state, EP_READY, memory_order_release);
		TIDE_LOG(INFO, "rdma: %s -> %s connected (%u QPs)", mine.local_nic_path,
			 ep->peer_nic, ep->nqp);
	} else if (rc != -EBUSY) {
		ep->fail_err = rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH
				       ? rc
				       : -ECONNREFUSED;
		atomic_store_explicit(&ep->state, EP_FAILED, memory_order_release);
		TIDE_LOG_RATELIMIT(ERR, 5, "rdma: connect %s@%s -> %s failed: %s", x->local_name,
				   x->devs[ep->ldev].name, ep->peer_nic,
				   why[0] ? why : strerror(-rc));
	} else {
		atomic_store_explicit(&ep->state, EP_IDLE, memory_order_release);
	}
	pthread_mutex_unlock(&ep->setup_lock);
	free(req);
	free(reply);
	return rc;
}

static void *
cm_main(void *arg)
{
	struct te_xport *x = arg;

	pthread_mutex_lock(&x->cm_lock);
	for (;;) {
		struct rep *ep;
		int rc;

		while (!x->cm_stop && x->cm_head == NULL) {
			pthread_cond_wait(&x->cm_cond, &x->cm_lock);
		}
		if (x->cm_stop) {
			break;
		}
		ep = x->cm_head;
		x->cm_head = ep->cm_next;
		if (x->cm_head == NULL) {
			x->cm_tail = NULL;
		}
		x->cm_busy = ep;
		pthread_mutex_unlock(&x->cm_lock);
		for (int tries = 0; tries < TE_RDMA_HS_RETRIES; tries++) {
			uint32_t r = 0;

			rc = ep_connect_active(ep);
			if (rc != -EBUSY) {
				break;
			}
			/* Both sides connecting at once: back off 1..32 ms at random. */
			if (getrandom(&r, sizeof(r), 0) != sizeof(r)) {
				r = (uint32_t)tide_mono_ns();
			}
			usleep(1000 + (r % 31000));
		}
		if (rc == -EBUSY) {
			pthread_mutex_lock(&ep->setup_lock);
			ep->fail_err = -ECONNREFUSED;
			atomic_store(&ep->state, EP_FAILED);
			pthread_mutex_unlock(&ep->setup_lock);
		}
		pthread_mutex_lock(&x->cm_lock);
		atomic_store(&ep->cm_queued, false);
		x->cm_busy = NULL;
		pthread_cond_broadcast(&x->cm_cond);
	}
	pthread_mutex_unlock(&x->cm_lock);
	return NULL;
}

/* Queue ep for (re)connection once; any thread. */
static void
cm_request(struct rep *ep)
{
	struct te_xport *x = ep->x;
	bool expect = false;

	if (!atomic_compare_exchange_strong(&ep->cm_queued, &expect, true)) {
		return;
	}
	pthread_mutex_lock(&x->cm_lock);
	ep->cm_next = NULL;
	if (x->cm_tail != NULL) {
		x->cm_tail->cm_next = ep;
	} else {
		x->cm_head = ep;
	}
	x->cm_tail = ep;
	pthread_cond_broadcast(&x->cm_cond);
	pthread_mutex_unlock(&x->cm_lock);
}

/* ---- endpoints ------------------------------------------------------------------ */

/* The endpoint (ldev, peer_seg@peer_dev), created on first use. */
static int
ep_get(struct te_xport *x, unsigned ldev, const char *peer_seg, const char *peer_dev,
       struct rep **out)
{
	struct rep *ep;
	struct te_lc *l = NULL;
	int numa = x->devs[ldev].numa;

	pthread_mutex_lock(&x->ep_lock);
	for (unsigned i = 0; i < x->neps; i++) {
		ep = x->eps[i];
		if (ep->ldev == ldev && strcmp(ep->peer_seg, peer_seg) == 0 &&
		    strcmp(ep->peer_dev, peer_dev) == 0) {
			pthread_mutex_unlock(&x->ep_lock);
			*out = ep;
			return 0;
		}
	}
	if (x->neps == TE_RDMA_MAX_EPS) {
		pthread_mutex_unlock(&x->ep_lock);
		TIDE_LOG_RATELIMIT(ERR, 5, "rdma: %d endpoints in use; no room for %s@%s",
				   TE_RDMA_MAX_EPS, peer_seg, peer_dev);
		return -EMFILE;
	}
	ep = calloc(1, sizeof(*ep));
	if (ep == NULL) {
		pthread_mutex_unlock(&x->ep_lock);
		return -ENOMEM;
	}
	ep->x = x;
	ep->idx = (uint16_t)x->neps;
	ep->ldev = ldev;
	snprintf(ep->peer_seg, sizeof(ep->peer_seg), "%s", peer_seg);
	snprintf(ep->peer_dev, sizeof(ep->peer_dev), "%s", peer_dev);
	snprintf(ep->peer_nic, sizeof(ep->peer_nic), "%s@%s", peer_seg, peer_dev);
	ep->nqp = x->nqp;
	pthread_mutex_init(&ep->setup_lock, NULL);
	atomic_init(&ep->state, EP_IDLE);
	/* A worker on the device's NUMA node when there is one, round-robin. */
	for (unsigned k = 0; k < x->nlc && l == NULL; k++) {
		struct te_lc *c = &x->lcs[(x->lc_rr[ldev] + k) % x->nlc];

		if (numa < 0 || c->numa < 0 || c->numa == numa) {
			l = c;
			x->lc_rr[ldev] = (x->lc_rr[ldev] + k + 1) % x->nlc;
		}
	}
	if (l == NULL) {
		l = &x->lcs[x->lc_rr[ldev]++ % x->nlc];
	}
	ep->l = l;
	l->eps[atomic_load(&l->neps)] = ep;
	atomic_store_explicit(&l->neps, atomic_load(&l->neps) + 1, memory_order_release);
	atomic_store_explicit(&x->eps[x->neps], ep, memory_order_release);
	x->neps++;
	pthread_mutex_unlock(&x->ep_lock);
	*out = ep;
	return 0;
}

/* ---- the handshake daemon's Connection handler --------------------------------- */

static int
reply_with(struct te_rdma_hs *h, const char *msg, char **reply, size_t *reply_len)
{
	int rc;

	if (msg != NULL) {
		snprintf(h->reply_msg, sizeof(h->reply_msg), "%s", msg);
	}
	rc = te_rdma_hs_encode(h, reply);
	if (rc == 0) {
		*reply_len = strlen(*reply);
	}
	return rc;
}

/* Index of our device named name, or -ENODEV. */
static int
dev_find(const struct te_xport *x, const char *name)
{
	for (unsigned i = 0; i < x->ndev; i++) {
		if (strcmp(x->devs[i].name, name) == 0) {
			return (int)i;
		}
	}
	return -ENODEV;
}

static int
rdma_on_connection(struct te_xport *x, const char *json, size_t len, char **reply,
		   size_t *reply_len)
{
	struct te_rdma_hs req, mine;
	char seg[TE_NAME_MAX], dev[TE_DEV_NAME_MAX], pseg[TE_NAME_MAX], pdev[TE_DEV_NAME_MAX];
	char why[256] = "";
	struct rep *ep;
	int ldev, st, rc;

	memset(&mine, 0, sizeof(mine));
	rc = te_rdma_hs_decode(json, len, &req, why, sizeof(why));
	if (rc != 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "rdma: malformed Connection request: %s", why);
		return reply_with(&mine, "malformed handshake", reply, reply_len);
	}
	snprintf(mine.local_nic_path, sizeof(mine.local_nic_path), "%s", req.peer_nic_path);
	snprintf(mine.peer_nic_path, sizeof(mine.peer_nic_path), "%s", req.local_nic_path);
	if (te_rdma_nic_path_split(req.peer_nic_path, seg, sizeof(seg), dev, sizeof(dev)) != 0 ||
	    strcmp(seg, x->local_name) != 0 || (ldev = dev_find(x, dev)) < 0) {
		snprintf(why, sizeof(why), "no local NIC %.110s here (this is %.110s)",
			 req.peer_nic_path, x->local_name);
		return reply_with(&mine, why, reply, reply_len);
	}
	if (te_rdma_nic_path_split(req.local_nic_path, pseg, sizeof(pseg), pdev, sizeof(pdev)) !=
	    0) {
		return reply_with(&mine, "Parse peer nic path failed", reply, reply_len);
	}
	if (req.nqp != x->nqp) {
		snprintf(why, sizeof(why),
			 "QP count mismatch in peer and local endpoints (%u vs %u), check "
			 "MC_NUM_QP_PER_EP",
			 req.nqp, x->nqp);
		return reply_with(&mine, why, reply, reply_len);
	}
	rc = ep_get(x, (unsigned)ldev, pseg, pdev, &ep);
	if (rc != 0) {
		return reply_with(&mine, "too many endpoints", reply, reply_len);
	}
	pthread_mutex_lock(&ep->setup_lock);
	st = atomic_load(&ep->state);
	if (st == EP_READY) {
		/* The peer re-establishes (it restarted or its QPs broke): our side of the
		 * old connection is dead too. Let the worker fail what is in flight. */
		int expect = EP_READY;

		if (atomic_compare_exchange_strong(&ep->state, &expect, EP_DRAIN)) {
			uint64_t until = tide_mono_ns() + TE_RDMA_DRAIN_MS * 1000000ull;

			pthread_mutex_unlock(&ep->setup_lock);
			while (atomic_load(&ep->state) == EP_DRAIN && tide_mono_ns() < until) {
				usleep(100);
			}
			pthread_mutex_lock(&ep->setup_lock);
		}
		st = atomic_load(&ep->state);
	}
	if (st != EP_IDLE && st != EP_BROKEN && st != EP_FAILED) {
		pthread_mutex_unlock(&ep->setup_lock);
		return reply_with(&mine, "busy: simultaneous connect, retry", reply, reply_len);
	}
	atomic_store(&ep->state, EP_CONNECTING);
	rc = ep_learn_remote(ep, &req, why, sizeof(why));
	if (rc == 0) {
		if (st == EP_BROKEN) {
			ep_qps_destroy(ep);
		}
		rc = ep_qps_create(ep);
	}
	if (rc == 0) {
		rc = ep_qps_connect(ep, req.qp_num, why, sizeof(why));
	}
	if (rc == 0) {
		atomic_fetch_add_explicit(&ep->gen, 1, memory_order_relaxed);
		ep_local_hs(ep, &mine);
		atomic_store_explicit(&ep->state, EP_READY, memory_order_release);
		TIDE_LOG(INFO, "rdma: %s -> %s connected by the peer (%u QPs)", mine.local_nic_path,
			 ep->peer_nic, ep->nqp);
	} else {
		/* A half-set-up endpoint is torn down by the next connect. */
		atomic_store_explicit(&ep->state, EP_BROKEN, memory_order_release);
		if (why[0] == '\0') {
			snprintf(why, sizeof(why), "%s", strerror(-rc));
		}
	}
	pthread_mutex_unlock(&ep->setup_lock);
	atomic_fetch_add(&x->st.handshakes, 1);
	return reply_with(&mine, rc == 0 ? NULL : why, reply, reply_len);
}

/* ---- peers ----------------------------------------------------------------------- */

static int
rdma_peer_open(struct te_xport *x, const struct te_peer_addr *addr, struct te_xpeer **out)
{
	struct te_xpeer *p;
	int rc;

	if (addr->desc == NULL || !te_desc_is_rdma(addr->desc)) {
		return -EPROTONOSUPPORT;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		return -ENOMEM;
	}
	p->x = x;
	snprintf(p->name, sizeof(p->name), "%s", addr->name);
	rc = te_desc_dup(addr->desc, &p->desc);
	if (rc != 0) {
		free(p);
		return rc;
	}
	p->nep = x->ndev;
	for (unsigned i = 0; i < x->ndev; i++) {
		const struct te_desc_dev *rd = &p->desc->devs[i % p->desc->ndevs];
		struct rep *ep;

		rc = ep_get(x, i, p->name, rd->name, &ep);
		if (rc != 0) {
			te_desc_free(p->desc);
			free(p);
			return rc;
		}
		pthread_mutex_lock(&ep->setup_lock);
		if (x->dev->addr_parse(rd->gid, &ep->raddr) == 0) {
			ep->rlid = rd->lid;
			ep->raddr_known = true;
		}
		pthread_mutex_unlock(&ep->setup_lock);
		p->eps[i] = ep;
	}
	*out = p;
	return 0;
}

struct close_arg {
	struct rep *ep;
	int err;
	unsigned inflight;
};

static void
close_on_lcore(void *arg)
{
	struct close_arg *a = arg;
	struct rep *ep = a->ep;
	int expect = EP_READY;

	/* Slices still inside the inbox belong to this endpoint too. */
	inbox_drain(ep->l);
	ep_fail_queued(ep, a->err);
	a->inflight = ep_fail_inflight(ep, a->err);
	if (a->inflight > 0) {
		/* WRs may still run: the connection must not be used again as is. */
		atomic_compare_exchange_strong(&ep->state, &expect, EP_BROKEN);
	}
}

static void
rdma_peer_close(struct te_xport *x, struct te_xpeer *p, int err)
{
	(void)x;
	for (unsigned i = 0; i < p->nep; i++) {
		struct close_arg a = {.ep = p->eps[i], .err = err};

		run_on_lcore(p->eps[i]->l, close_on_lcore, &a);
		if (a.inflight > 0) {
			/* Stop the NIC touching the memory of requests we just failed. */
			pthread_mutex_lock(&a.ep->setup_lock);
			if (atomic_load(&a.ep->state) == EP_BROKEN) {
				for (unsigned q = 0; q < a.ep->nqp; q++) {
					if (a.ep->qps[q].qp != NULL) {
						x->dev->qp_reset(x->d, a.ep->qps[q].qp);
					}
				}
			}
			pthread_mutex_unlock(&a.ep->setup_lock);
		}
	}
	te_desc_free(p->desc);
	free(p);
}

static int
rdma_submit(struct te_xport *x, struct te_xpeer *p, struct te_slice *head)
{
	struct te_slice *s = head;

	(void)x;
	while (s != NULL) {
		struct te_slice *next = s->next;
		unsigned k = atomic_fetch_add_explicit(&p->rr, 1, memory_order_relaxed) % p->nep;
		struct rep *ep = p->eps[k];
		const struct te_desc *d = p->desc;
		unsigned rdev = k % d->ndevs;
		uint32_t lo = 0, hi = d->nbufs;

		/* The remote buffer (sorted, disjoint) holding the slice: its key. */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (d->bufs[mid].addr <= s->remote) {
				lo = mid + 1;
			} else {
				hi = mid;
			}
		}
		if (lo == 0 || s->remote + s->len > d->bufs[lo - 1].addr + d->bufs[lo - 1].length ||
		    rdev >= d->bufs[lo - 1].nkeys) {
			te_slice_done(s, -EFAULT);
			s = next;
			continue;
		}
		s->xport_key = d->bufs[lo - 1].rkey[rdev];
		s->xport_mark = (uint64_t)(uintptr_t)ep;
		s->next = NULL;
		pthread_mutex_lock(&ep->l->inbox_lock);
		if (ep->l->in_tail != NULL) {
			ep->l->in_tail->next = s;
		} else {
			ep->l->in_head = s;
		}
		ep->l->in_tail = s;
		atomic_store_explicit(&ep->l->inbox_pending, true, memory_order_release);
		pthread_mutex_unlock(&ep->l->inbox_lock);
		tide_lcore_wake(ep->l->lc); /* it may be sleeping in an idle spell */
		s = next;
	}
	return 0;
}

/* ---- transport ---------------------------------------------------------------------- */

static uint16_t
rdma_data_port(const struct te_xport *x)
{
	(void)x;
	return 0;
}

static int
env_int(const char *name, long lo, long hi, long def, long *out)
{
	const char *v = getenv(name);
	char *end;
	long n;

	*out = def;
	if (v == NULL || v[0] == '\0') {
		return 0;
	}
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < lo || n > hi) {
		TIDE_LOG(ERR, "%s='%s': expected an integer in %ld..%ld", name, v, lo, hi);
		return -EINVAL;
	}
	*out = n;
	return 0;
}

struct poller_arg {
	struct te_lc *l;
	int rc;
};

static void
poller_add_on_lcore(void *arg)
{
	struct poller_arg *a = arg;

	a->rc = tide_lcore_poller_add(a->l->lc, rdma_poll, a->l);
	/* Completion queues have no interrupt the lcore sleeps on: a worker that slept
	 * on its memif queue's would leave completions and requests waiting 10 ms. */
	if (a->rc == 0)
		tide_lcore_irq_off(a->l->lc);
}

/* Worker i polls on lcore i of another transport's running group. */
static int
workers_borrow(struct te_xport *x, struct tide_lcore_group *g)
{
	for (unsigned i = 0; i < x->nlc; i++) {
		struct te_lc *l = &x->lcs[i];
		struct poller_arg a = {.l = l, .rc = -EINVAL};
		int rc;

		l->lc = tide_lcore_get(g, i);
		rc = run_on_lcore(l, poller_add_on_lcore, &a);
		if (rc == 0) {
			rc = a.rc;
		}
		if (rc != 0) {
			TIDE_LOG(ERR, "rdma: adding the CQ poller on lcore %u (CPU %d): %s", i,
				 tide_lcore_cpu(l->lc), strerror(-rc));
			return rc;
		}
		l->polling = true;
	}
	return 0;
}

/* A group of our own, worker i on cpus[i]. */
static int
workers_start(struct te_xport *x, const int *cpus)
{
	struct tide_lcore_opts lo;
	int rc;

	tide_lcore_opts_init(&lo, sizeof(lo));
	rc = tide_lcore_group_create(&lo, cpus, x->nlc, &x->g);
	for (unsigned i = 0; rc == 0 && i < x->nlc; i++) {
		x->lcs[i].lc = tide_lcore_get(x->g, i);
		rc = tide_lcore_poller_add(x->lcs[i].lc, rdma_poll, &x->lcs[i]);
	}
	if (rc == 0) {
		rc = tide_lcore_group_start(x->g);
	}
	for (unsigned i = 0; rc == 0 && i < x->nlc; i++) {
		x->lcs[i].polling = true;
	}
	return rc;
}

static void rdma_destroy(struct te_xport *x);

static int
rdma_create(const struct te_xport_cfg *cfg, struct te_xport **out)
{
	const struct tide_rdma_dev_ops *dev = tide_rdma_dev_get();
	struct tide_rdma_dev_cfg dc;
	struct tide_nodeenv *ne;
	struct te_xport *x;
	char err[1024] = "";
	int cpus[TIDE_LCORE_MAX];
	unsigned ncpu = 0;
	long port, gid, nqp, mtu;
	bool absent;
	int rc;

	if (dev == NULL) {
		/* Built with the transport but linked without a driver: as good as a node
		 * without rdma-core, so TIDE_RDMA_AS_TCP may serve it over TCP. */
		if (cfg->absent_ok)
			TIDE_LOG(INFO, "protocol 'rdma': %s", NO_DRIVER);
		else
			TIDE_LOG(ERR, "protocol 'rdma': %s" AS_TCP_HINT, NO_DRIVER);
		return -EPROTONOSUPPORT;
	}
	if (env_int("MC_IB_PORT", 1, 255, 1, &port) != 0 ||
	    env_int("MC_GID_INDEX", -1, 255, -1, &gid) != 0 ||
	    env_int("MC_NUM_QP_PER_EP", 1, TE_RDMA_MAX_QP_PER_EP, TE_RDMA_DEF_QP, &nqp) != 0 ||
	    env_int("MC_MTU", 256, 4096, 4096, &mtu) != 0) {
		return -EINVAL;
	}
	ne = malloc(sizeof(*ne));
	x = calloc(1, sizeof(*x));
	if (ne == NULL || x == NULL) {
		free(ne);
		free(x);
		return -ENOMEM;
	}
	rc = tide_nodeenv_load(ne, cfg->node_env, NULL, err, sizeof(err));
	if (rc != 0) {
		TIDE_LOG(ERR, "node environment is not valid:\n%s", err);
		free(ne);
		free(x);
		return rc;
	}
	x->cfg = *cfg;
	snprintf(x->local_name, sizeof(x->local_name), "%s",
		 cfg->local_name ? cfg->local_name : "");
	x->cfg.local_name = x->local_name;
	x->cfg.rdma_devices = NULL;
	x->cfg.node_env = NULL;
	x->dev = dev;
	x->nqp = (unsigned)nqp;
	pthread_rwlock_init(&x->mr_lock, NULL);
	pthread_mutex_init(&x->ep_lock, NULL);
	pthread_mutex_init(&x->cm_lock, NULL);
	pthread_cond_init(&x->cm_cond, NULL);
	for (unsigned i = 0; i < TIDE_LCORE_MAX; i++) {
		pthread_mutex_init(&x->lcs[i].inbox_lock, NULL);
	}
	dc = (struct tide_rdma_dev_cfg){
		.devices = cfg->rdma_devices != NULL ? cfg->rdma_devices : ne->device,
		.port = (uint8_t)port,
		.gid_index = (int)gid,
		.max_mtu = (unsigned)mtu,
	};
	rc = dev->open(&dc, &x->d, err, sizeof(err));
	/* Absent: no verbs library, or no device at all. A node that has devices but
	 * not the ones named, or none usable, is a broken RDMA set-up: TIDE_RDMA_AS_TCP
	 * must not hide it behind TCP, so it fails with -ENODEV (not -EPROTONOSUPPORT,
	 * which the core serves with TCP when the key is set). */
	absent = rc == -ELIBACC || rc == -ENXIO;
	if (rc != 0) {
		if (absent && cfg->absent_ok)
			TIDE_LOG(INFO, "protocol 'rdma': %s", err);
		else if ((absent || rc == -ENODEV) && !cfg->absent_ok)
			TIDE_LOG(ERR, "protocol 'rdma': %s" AS_TCP_HINT, err);
		else
			TIDE_LOG(ERR, "protocol 'rdma': %s", err[0] ? err : strerror(-rc));
		free(ne);
		rdma_destroy(x);
		if (absent || (rc == -ENODEV && !cfg->absent_ok))
			return -EPROTONOSUPPORT;
		return rc;
	}
	x->ndev = dev->ndev(x->d);
	for (unsigned i = 0; i < x->ndev; i++) {
		rc = dev->dev_info(x->d, i, &x->devs[i]);
		if (rc != 0) {
			TIDE_LOG(ERR, "rdma: %s: no description of device %u of %u: %s", dev->name,
				 i, x->ndev, strerror(-rc));
			free(ne);
			rdma_destroy(x);
			return rc;
		}
	}
	if (cfg->shared_lcores != NULL) {
		/* One worker per lcore of the user-space TCP transport, on its CPU. */
		ncpu = tide_lcore_count(cfg->shared_lcores);
		for (unsigned i = 0; i < ncpu; i++) {
			cpus[i] = tide_lcore_cpu(tide_lcore_get(cfg->shared_lcores, i));
		}
	} else {
		rc = tide_lcore_cpus_pick(ne->lcores, ne->lcores_per_numa, cpus, TIDE_LCORE_MAX,
					  &ncpu);
	}
	free(ne);
	if (rc != 0) {
		TIDE_LOG(ERR, "rdma: choosing worker CPUs (TIDE_LCORES / TIDE_LCORES_PER_NUMA): %s",
			 strerror(-rc));
		rdma_destroy(x);
		return rc;
	}
	x->nlc = ncpu;
	for (unsigned i = 0; i < x->nlc; i++) {
		struct te_lc *l = &x->lcs[i];

		l->x = x;
		l->idx = i;
		l->numa = numa_available() >= 0 ? numa_node_of_cpu(cpus[i]) : -1;
		for (unsigned d = 0; d < x->ndev; d++) {
			rc = dev->cq_create(x->d, d, TE_RDMA_CQ_SIZE, &l->cq[d]);
			if (rc != 0) {
				rdma_destroy(x);
				return rc;
			}
		}
	}
	rc = cfg->shared_lcores != NULL ? workers_borrow(x, cfg->shared_lcores)
					: workers_start(x, cpus);
	if (rc == 0) {
		rc = -pthread_create(&x->cm_thr, NULL, cm_main, x);
		x->cm_started = rc == 0;
	}
	if (rc != 0) {
		TIDE_LOG(ERR, "rdma: starting workers: %s", strerror(-rc));
		rdma_destroy(x);
		return rc;
	}
	TIDE_LOG(INFO, "rdma: %s (%u), %u device(s) via %s, %u QP(s) per endpoint",
		 x->g == NULL ? "polling on the user-space TCP lcores" : "own workers", x->nlc,
		 x->ndev, dev->provider(x->d), x->nqp);
	*out = x;
	return 0;
}

/* Last run on a worker's lcore: end its slices and take its poller off, so a
 * borrowed lcore never touches l again (an own one is stopped next anyway). */
static void
stop_on_lcore(void *arg)
{
	struct te_lc *l = arg;
	unsigned neps = atomic_load(&l->neps);

	inbox_drain(l);
	for (unsigned i = 0; i < neps; i++) {
		ep_fail_queued(l->eps[i], -ECANCELED);
		ep_fail_inflight(l->eps[i], -ECANCELED);
		atomic_store(&l->eps[i]->state, EP_BROKEN);
	}
	if (tide_lcore_poller_remove(l->lc, rdma_poll, l) != 0) {
		TIDE_LOG(ERR, "rdma: worker %u: CQ poller missing on its lcore", l->idx);
	}
	l->polling = false;
}

static void
rdma_destroy(struct te_xport *x)
{
	if (x->cm_started) {
		pthread_mutex_lock(&x->cm_lock);
		x->cm_stop = true;
		pthread_cond_broadcast(&x->cm_cond);
		pthread_mutex_unlock(&x->cm_lock);
		pthread_join(x->cm_thr, NULL);
	}
	for (unsigned i = 0; i < x->nlc; i++) {
		if (x->lcs[i].polling) {
			run_on_lcore(&x->lcs[i], stop_on_lcore, &x->lcs[i]);
		}
	}
	tide_lcore_group_destroy(x->g); /* own workers only; NULL when borrowed */
	for (unsigned i = 0; i < x->neps; i++) {
		struct rep *ep = x->eps[i];

		ep_qps_destroy(ep);
		pthread_mutex_destroy(&ep->setup_lock);
		free(ep);
	}
	for (unsigned i = 0; i < x->nlc; i++) {
		struct te_lc *l = &x->lcs[i];

		for (unsigned d = 0; d < x->ndev; d++) {
			x->dev->cq_destroy(x->d, l->cq[d]);
		}
		x->dev->mr_dereg(x->d, l->bounce_mr);
		free(l->bounce);
	}
	for (size_t i = 0; i < x->nmrs; i++) {
		x->dev->mr_dereg(x->d, x->mrs[i].mr);
	}
	free(x->mrs);
	x->dev->close(x->d);
	for (unsigned i = 0; i < TIDE_LCORE_MAX; i++) {
		pthread_mutex_destroy(&x->lcs[i].inbox_lock);
	}
	pthread_rwlock_destroy(&x->mr_lock);
	pthread_mutex_destroy(&x->ep_lock);
	pthread_mutex_destroy(&x->cm_lock);
	pthread_cond_destroy(&x->cm_cond);
	free(x);
}

const struct te_xport_ops te_rdma_ops = {
	.name = "rdma",
	.create = rdma_create,
	.data_port = rdma_data_port,
	.peer_open = rdma_peer_open,
	.peer_close = rdma_peer_close,
	.submit = rdma_submit,
	.destroy = rdma_destroy,
	.mem_reg = rdma_mem_reg,
	.mem_dereg = rdma_mem_dereg,
	.describe = rdma_describe,
	.on_connection = rdma_on_connection,
};
