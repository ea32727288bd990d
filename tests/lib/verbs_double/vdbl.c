/* SPDX-License-Identifier: Apache-2.0 */
/*
 * In-memory RC verbs double; contract in vdbl.h.
 *
 * Objects embed the real ibv_* struct first, so the engine sees ordinary
 * pointers (qp->qp_num, mr->lkey, ...) and the double gets its own state back
 * with a cast. Bounds: 16 devices; completion queues hold what the caller
 * sized them for (an overflow is counted and the completion dropped, as a
 * real CQ overrun would lose it); pending WRs per QP are limited by the QP's
 * max_send_wr (post_send answers ENOMEM beyond it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdbl.h"

#define VDBL_MAX_DEVS 16

struct vdev {
	struct ibv_device ibdev;
	struct vdbl_dev_spec spec;
	char name[64];
};

struct vctx {
	struct ibv_context ctx;
	struct vdev *dev;
};

struct vpd {
	struct ibv_pd pd;
	unsigned refs; /* MRs and QPs */
};

struct vmr {
	struct ibv_mr mr;
	int access;
	struct vmr *next;
};

struct vcq {
	struct ibv_cq cq;
	struct ibv_wc *ring;
	int cap, head, n;
	unsigned qps;
	unsigned overflows;
};

struct vwr {
	struct vwr *next;
	uint64_t wr_id;
	enum ibv_wr_opcode op;
	bool signaled;
	uint64_t laddr;
	uint32_t len, lkey;
	uint64_t raddr;
	uint32_t rkey;
};

struct vqp {
	struct ibv_qp qp;
	struct vctx *vc;
	enum ibv_qp_state st;
	uint32_t dest_qpn;
	union ibv_gid dgid;
	uint16_t dlid;
	uint8_t sgid_index;
	uint32_t depth;
	struct vwr *pend_head, *pend_tail;
	unsigned npend;
	bool posted_once;
	struct vqp *next;
};

static struct {
	pthread_mutex_t lock;
	struct vdev devs[VDBL_MAX_DEVS];
	unsigned ndev;
	struct vmr *mrs;
	struct vqp *qps;
	uint32_t next_qpn, next_key;
	bool deferred;
	int fail_err[VDBL_NCALLS];
	unsigned fail_count[VDBL_NCALLS];
	bool inject;
	enum ibv_wc_status inject_st;
	unsigned inject_skip;
	struct vdbl_stats st;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_qpn = 0x100, .next_key = 0x1000};

/* Caller holds the lock. true: fail this call with errno set. */
static bool
should_fail(enum vdbl_call c)
{
	if (g.fail_count[c] == 0) {
		return false;
	}
	g.fail_count[c]--;
	errno = g.fail_err[c];
	return true;
}

/* ---- control ------------------------------------------------------------ */

void
vdbl_reset(void)
{
	pthread_mutex_lock(&g.lock);
	g.ndev = 0;
	memset(g.devs, 0, sizeof(g.devs));
	g.mrs = NULL;
	g.qps = NULL;
	g.deferred = false;
	memset(g.fail_count, 0, sizeof(g.fail_count));
	g.inject = false;
	memset(&g.st, 0, sizeof(g.st));
	pthread_mutex_unlock(&g.lock);
}

int
vdbl_add_device(const struct vdbl_dev_spec *spec)
{
	struct vdev *d;

	pthread_mutex_lock(&g.lock);
	if (g.ndev == VDBL_MAX_DEVS) {
		pthread_mutex_unlock(&g.lock);
		return -ENOSPC;
	}
	d = &g.devs[g.ndev++];
	memset(d, 0, sizeof(*d));
	d->spec = *spec;
	snprintf(d->name, sizeof(d->name), "%s", spec->name);
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", spec->name);
	d->spec.name = d->name;
	if (d->spec.mtu == 0) {
		d->spec.mtu = IBV_MTU_4096;
	}
	pthread_mutex_unlock(&g.lock);
	return 0;
}

int
vdbl_add_roce(const char *name, int numa, uint32_t ipv4)
{
	struct vdbl_dev_spec s = {.name = name, .numa = numa, .ngid = 4};

	for (int i = 0; i < 2; i++) {
		s.gid[i].raw[0] = 0xfe;
		s.gid[i].raw[1] = 0x80;
		s.gid[i].raw[15] = (uint8_t)(ipv4 & 0xff);
		s.roce_ver[i] = i + 1;
	}
	for (int i = 2; i < 4; i++) {
		s.gid[i].raw[10] = 0xff;
		s.gid[i].raw[11] = 0xff;
		s.gid[i].raw[12] = (uint8_t)(ipv4 >> 24);
		s.gid[i].raw[13] = (uint8_t)(ipv4 >> 16);
		s.gid[i].raw[14] = (uint8_t)(ipv4 >> 8);
		s.gid[i].raw[15] = (uint8_t)ipv4;
		s.roce_ver[i] = i - 1;
	}
	return vdbl_add_device(&s);
}

void
vdbl_fail_call(enum vdbl_call c, int err, unsigned count)
{
	pthread_mutex_lock(&g.lock);
	g.fail_err[c] = err;
	g.fail_count[c] = count;
	pthread_mutex_unlock(&g.lock);
}

void
vdbl_inject_wc_error(enum ibv_wc_status st, unsigned skip)
{
	pthread_mutex_lock(&g.lock);
	g.inject = true;
	g.inject_st = st;
	g.inject_skip = skip;
	pthread_mutex_unlock(&g.lock);
}

void
vdbl_set_deferred(bool on)
{
	pthread_mutex_lock(&g.lock);
	g.deferred = on;
	pthread_mutex_unlock(&g.lock);
}

void
vdbl_stats_get(struct vdbl_stats *st)
{
	pthread_mutex_lock(&g.lock);
	*st = g.st;
	pthread_mutex_unlock(&g.lock);
}

/* ---- completions and execution (lock held) ------------------------------ */

static void
cq_push(struct vcq *cq, const struct ibv_wc *wc)
{
	if (cq->n == cq->cap) {
		cq->overflows++;
		return;
	}
	cq->ring[(cq->head + cq->n) % cq->cap] = *wc;
	cq->n++;
	g.st.wcs_generated++;
	if (wc->status != IBV_WC_SUCCESS) {
		g.st.wcs_error++;
	}
}

static void
complete(struct vqp *q, const struct vwr *w, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	if (st == IBV_WC_SUCCESS && !w->signaled) {
		return;
	}
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = st;
	wc.opcode = w->op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
	wc.qp_num = q->qp.qp_num;
	wc.byte_len = st == IBV_WC_SUCCESS ? w->len : 0;
	cq_push((struct vcq *)q->qp.send_cq, &wc);
}

static struct vmr *
mr_find(uint32_t key, bool rkey, struct ibv_pd *pd, uint64_t addr, uint64_t len, int need)
{
	for (struct vmr *m = g.mrs; m != NULL; m = m->next) {
		uint64_t a = (uint64_t)(uintptr_t)m->mr.addr;

		if ((rkey ? m->mr.rkey : m->mr.lkey) != key || m->mr.pd != pd) {
			continue;
		}
		if (addr < a || addr + len < addr || addr + len > a + m->mr.length ||
		    (m->access & need) != need) {
			return NULL;
		}
		return m;
	}
	return NULL;
}

static bool
gid_on_dev(const struct vdev *d, const union ibv_gid *gid)
{
	for (unsigned i = 0; i < d->spec.ngid; i++) {
		if (memcmp(d->spec.gid[i].raw, gid->raw, 16) == 0) {
			return true;
		}
	}
	return false;
}

/* The responder QP of q's connection, or NULL when it does not answer. */
static struct vqp *
responder(struct vqp *q)
{
	const struct vdev *me = q->vc->dev;

	for (struct vqp *r = g.qps; r != NULL; r = r->next) {
		const struct vdev *rd = r->vc->dev;

		if (r->qp.qp_num != q->dest_qpn) {
			continue;
		}
		if (rd->spec.infiniband ? rd->spec.lid != q->dlid : !gid_on_dev(rd, &q->dgid)) {
			continue;
		}
		if ((r->st != IBV_QPS_RTR && r->st != IBV_QPS_RTS) || r->dest_qpn != q->qp.qp_num) {
			return NULL;
		}
		if (me->spec.infiniband ? me->spec.lid != r->dlid : !gid_on_dev(me, &r->dgid)) {
			return NULL;
		}
		return r;
	}
	return NULL;
}

static void
flush_pending(struct vqp *q, bool with_completions)
{
	struct vwr *w = q->pend_head;

	while (w != NULL) {
		struct vwr *next = w->next;

		if (with_completions) {
			/* A flushed WR always completes, signalled or not. */
			struct vwr copy = *w;

			copy.signaled = true;
			complete(q, &copy, IBV_WC_WR_FLUSH_ERR);
		}
		free(w);
		w = next;
	}
	q->pend_head = q->pend_tail = NULL;
	q->npend = 0;
}

/* Run one WR on q (in RTS). */
static void
execute(struct vqp *q, const struct vwr *w)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct vqp *r;
	int lneed = w->op == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0;
	int rneed = w->op == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;

	g.st.wrs_executed++;
	if (q->st == IBV_QPS_ERR) {
		st = IBV_WC_WR_FLUSH_ERR;
	} else if (g.inject && g.inject_skip == 0) {
		g.inject = false;
		st = g.inject_st;
	} else if (w->len > 0 &&
		   mr_find(w->lkey, false, q->qp.pd, w->laddr, w->len, lneed) == NULL) {
		st = IBV_WC_LOC_PROT_ERR;
	} else if ((r = responder(q)) == NULL) {
		st = IBV_WC_RETRY_EXC_ERR;
	} else if (mr_find(w->rkey, true, r->qp.pd, w->raddr, w->len, rneed) == NULL) {
		st = IBV_WC_REM_ACCESS_ERR;
	} else {
		void *l = (void *)(uintptr_t)w->laddr, *rm = (void *)(uintptr_t)w->raddr;

		if (w->op == IBV_WR_RDMA_READ) {
			memmove(l, rm, w->len);
		} else {
			memmove(rm, l, w->len);
		}
	}
	if (st == IBV_WC_SUCCESS && g.inject) {
		g.inject_skip--;
	}
	if (st != IBV_WC_SUCCESS) {
		struct vwr copy = *w;

		copy.signaled = true;
		complete(q, &copy, st);
		q->st = IBV_QPS_ERR;
		return;
	}
	complete(q, w, st);
}

static unsigned
progress_qp(struct vqp *q)
{
	unsigned n = 0;

	while (q->pend_head != NULL) {
		struct vwr *w = q->pend_head;

		q->pend_head = w->next;
		if (q->pend_head == NULL) {
			q->pend_tail = NULL;
		}
		q->npend--;
		execute(q, w);
		free(w);
		n++;
	}
	return n;
}

unsigned
vdbl_progress(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&g.lock);
	for (struct vqp *q = g.qps; q != NULL; q = q->next) {
		n += progress_qp(q);
	}
	pthread_mutex_unlock(&g.lock);
	return n;
}

unsigned
vdbl_pending(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&g.lock);
	for (struct vqp *q = g.qps; q != NULL; q = q->next) {
		n += q->npend;
	}
	pthread_mutex_unlock(&g.lock);
	return n;
}

static struct vqp *
qp_by_num(uint32_t qpn)
{
	for (struct vqp *q = g.qps; q != NULL; q = q->next) {
		if (q->qp.qp_num == qpn) {
			return q;
		}
	}
	return NULL;
}

int
vdbl_qp_force_error(uint32_t qpn)
{
	struct vqp *q;

	pthread_mutex_lock(&g.lock);
	q = qp_by_num(qpn);
	if (q != NULL) {
		q->st = IBV_QPS_ERR;
		flush_pending(q, true);
	}
	pthread_mutex_unlock(&g.lock);
	return q != NULL ? 0 : -ENOENT;
}

unsigned
vdbl_requester_qps(uint32_t *qpns, unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&g.lock);
	for (struct vqp *q = g.qps; q != NULL && n < max; q = q->next) {
		if (q->st == IBV_QPS_RTS && q->posted_once) {
			qpns[n++] = q->qp.qp_num;
		}
	}
	pthread_mutex_unlock(&g.lock);
	return n;
}

int
vdbl_qp_state(uint32_t qpn)
{
	struct vqp *q;
	int st;

	pthread_mutex_lock(&g.lock);
	q = qp_by_num(qpn);
	st = q != NULL ? (int)q->st : -ENOENT;
	pthread_mutex_unlock(&g.lock);
	return st;
}

/* ---- the glue table ------------------------------------------------------ */

static struct ibv_device **
d_get_device_list(int *num)
{
	struct ibv_device **list;

	pthread_mutex_lock(&g.lock);
	list = calloc(g.ndev + 1, sizeof(*list));
	if (list != NULL) {
		for (unsigned i = 0; i < g.ndev; i++) {
			list[i] = &g.devs[i].ibdev;
		}
		*num = (int)g.ndev;
	}
	pthread_mutex_unlock(&g.lock);
	if (list == NULL) {
		errno = ENOMEM;
	}
	return list;
}

static void
d_free_device_list(struct ibv_device **list)
{
	free(list);
}

static const char *
d_get_device_name(struct ibv_device *dev)
{
	return ((struct vdev *)dev)->name;
}

static struct ibv_context *
d_open_device(struct ibv_device *dev)
{
	struct vctx *c = NULL;

	pthread_mutex_lock(&g.lock);
	if (!should_fail(VDBL_OPEN_DEVICE)) {
		c = calloc(1, sizeof(*c));
		if (c != NULL) {
			c->ctx.device = dev;
			c->dev = (struct vdev *)dev;
			g.st.open_device++;
			g.st.live_ctx++;
		}
	}
	pthread_mutex_unlock(&g.lock);
	return c != NULL ? &c->ctx : NULL;
}

static int
d_close_device(struct ibv_context *ctx)
{
	pthread_mutex_lock(&g.lock);
	g.st.live_ctx--;
	pthread_mutex_unlock(&g.lock);
	free(ctx);
	return 0;
}

static int
d_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	(void)ctx;
	memset(a, 0, sizeof(*a));
	a->max_qp_wr = 4096;
	a->max_cqe = 65536;
	a->max_qp_rd_atom = 16;
	a->max_qp = 1 << 16;
	a->phys_port_cnt = 1;
	return 0;
}

static int
d_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a)
{
	const struct vdev *d = ((struct vctx *)ctx)->dev;

	if (port != 1) {
		return EINVAL;
	}
	memset(a, 0, sizeof(*a));
	a->state = d->spec.down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = d->spec.mtu;
	a->gid_tbl_len = 8;
	a->lid = d->spec.infiniband ? d->spec.lid : 0;
	a->link_layer = d->spec.infiniband ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET;
	return 0;
}

static int
d_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	const struct vdev *d = ((struct vctx *)ctx)->dev;

	if (port != 1 || index < 0 || index >= 8) {
		return EINVAL;
	}
	if ((unsigned)index < d->spec.ngid) {
		*gid = d->spec.gid[index];
	} else {
		memset(gid, 0, sizeof(*gid));
	}
	return 0;
}

static int
d_gid_roce_version(struct ibv_context *ctx, uint8_t port, int index)
{
	const struct vdev *d = ((struct vctx *)ctx)->dev;

	if (port != 1 || index < 0 || (unsigned)index >= d->spec.ngid) {
		return -ENOENT;
	}
	return d->spec.roce_ver[index];
}

static int
d_device_numa_node(struct ibv_device *dev)
{
	return ((struct vdev *)dev)->spec.numa;
}

static struct ibv_pd *
d_alloc_pd(struct ibv_context *ctx)
{
	struct vpd *p = calloc(1, sizeof(*p));

	if (p == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = ctx;
	pthread_mutex_lock(&g.lock);
	g.st.live_pd++;
	pthread_mutex_unlock(&g.lock);
	return &p->pd;
}

static int
d_dealloc_pd(struct ibv_pd *pd)
{
	struct vpd *p = (struct vpd *)pd;

	pthread_mutex_lock(&g.lock);
	if (p->refs != 0) {
		pthread_mutex_unlock(&g.lock);
		return EBUSY;
	}
	g.st.live_pd--;
	pthread_mutex_unlock(&g.lock);
	free(p);
	return 0;
}

static struct ibv_mr *
d_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct vmr *m = NULL;

	pthread_mutex_lock(&g.lock);
	if (addr == NULL || len == 0) {
		errno = EINVAL;
	} else if (!should_fail(VDBL_REG_MR)) {
		m = calloc(1, sizeof(*m));
		if (m != NULL) {
			m->mr.context = pd->context;
			m->mr.pd = pd;
			m->mr.addr = addr;
			m->mr.length = len;
			m->mr.lkey = g.next_key++;
			m->mr.rkey = g.next_key++;
			m->access = access;
			m->next = g.mrs;
			g.mrs = m;
			((struct vpd *)pd)->refs++;
			g.st.reg_mr++;
			g.st.live_mr++;
		} else {
			errno = ENOMEM;
		}
	}
	pthread_mutex_unlock(&g.lock);
	return m != NULL ? &m->mr : NULL;
}

static int
d_dereg_mr(struct ibv_mr *mr)
{
	struct vmr **pp;

	pthread_mutex_lock(&g.lock);
	for (pp = &g.mrs; *pp != NULL; pp = &(*pp)->next) {
		if (&(*pp)->mr == mr) {
			struct vmr *m = *pp;

			*pp = m->next;
			((struct vpd *)mr->pd)->refs--;
			g.st.dereg_mr++;
			g.st.live_mr--;
			pthread_mutex_unlock(&g.lock);
			free(m);
			return 0;
		}
	}
	pthread_mutex_unlock(&g.lock);
	return EINVAL;
}

static struct ibv_cq *
d_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
	    int vec)
{
	struct vcq *c = NULL;

	(void)vec;
	pthread_mutex_lock(&g.lock);
	if (cqe <= 0) {
		errno = EINVAL;
	} else if (!should_fail(VDBL_CREATE_CQ)) {
		c = calloc(1, sizeof(*c));
		if (c != NULL && (c->ring = calloc((size_t)cqe, sizeof(*c->ring))) == NULL) {
			free(c);
			c = NULL;
		}
		if (c != NULL) {
			c->cq.context = ctx;
			c->cq.channel = ch;
			c->cq.cq_context = cq_context;
			c->cq.cqe = cqe;
			c->cap = cqe;
			g.st.live_cq++;
		} else {
			errno = ENOMEM;
		}
	}
	pthread_mutex_unlock(&g.lock);
	return c != NULL ? &c->cq : NULL;
}

static int
d_destroy_cq(struct ibv_cq *cq)
{
	struct vcq *c = (struct vcq *)cq;

	pthread_mutex_lock(&g.lock);
	if (c->qps != 0) {
		pthread_mutex_unlock(&g.lock);
		return EBUSY;
	}
	g.st.live_cq--;
	pthread_mutex_unlock(&g.lock);
	free(c->ring);
	free(c);
	return 0;
}

static struct ibv_qp *
d_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct vqp *q = NULL;

	pthread_mutex_lock(&g.lock);
	if (a->qp_type != IBV_QPT_RC || a->send_cq == NULL || a->cap.max_send_wr == 0) {
		errno = EINVAL;
	} else if (!should_fail(VDBL_CREATE_QP)) {
		q = calloc(1, sizeof(*q));
		if (q != NULL) {
			q->qp.context = pd->context;
			q->qp.qp_context = a->qp_context;
			q->qp.pd = pd;
			q->qp.send_cq = a->send_cq;
			q->qp.recv_cq = a->recv_cq;
			q->qp.qp_num = g.next_qpn++;
			q->qp.qp_type = IBV_QPT_RC;
			q->qp.state = IBV_QPS_RESET;
			q->vc = (struct vctx *)pd->context;
			q->st = IBV_QPS_RESET;
			q->depth = a->cap.max_send_wr;
			q->next = g.qps;
			g.qps = q;
			((struct vpd *)pd)->refs++;
			((struct vcq *)a->send_cq)->qps++;
			g.st.create_qp++;
			g.st.live_qp++;
		} else {
			errno = ENOMEM;
		}
	}
	pthread_mutex_unlock(&g.lock);
	return q != NULL ? &q->qp : NULL;
}

static int
d_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct vqp *q = (struct vqp *)qp;
	const int init_need = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	const int rtr_need = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int rts_need = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
	int rc = 0;

	pthread_mutex_lock(&g.lock);
	g.st.modify_qp++;
	if (should_fail(VDBL_MODIFY_QP)) {
		rc = errno;
		goto out;
	}
	if (!(mask & IBV_QP_STATE)) {
		rc = EINVAL;
		goto out;
	}
	switch (a->qp_state) {
	case IBV_QPS_RESET:
		flush_pending(q, false);
		break;
	case IBV_QPS_ERR:
		flush_pending(q, true);
		break;
	case IBV_QPS_INIT:
		if (q->st != IBV_QPS_RESET || (mask & init_need) != init_need || a->port_num != 1) {
			rc = EINVAL;
		}
		break;
	case IBV_QPS_RTR:
		if (q->st != IBV_QPS_INIT || (mask & rtr_need) != rtr_need ||
		    !a->ah_attr.is_global || a->ah_attr.grh.sgid_index >= 8 ||
		    (!q->vc->dev->spec.infiniband &&
		     a->ah_attr.grh.sgid_index >= q->vc->dev->spec.ngid)) {
			rc = EINVAL;
			break;
		}
		q->dest_qpn = a->dest_qp_num;
		q->dgid = a->ah_attr.grh.dgid;
		q->dlid = a->ah_attr.dlid;
		q->sgid_index = a->ah_attr.grh.sgid_index;
		break;
	case IBV_QPS_RTS:
		if (q->st != IBV_QPS_RTR || (mask & rts_need) != rts_need) {
			rc = EINVAL;
		}
		break;
	default:
		rc = EINVAL;
		break;
	}
	if (rc == 0) {
		q->st = a->qp_state;
		q->qp.state = a->qp_state;
	}
out:
	pthread_mutex_unlock(&g.lock);
	return rc;
}

static int
d_destroy_qp(struct ibv_qp *qp)
{
	struct vqp *q = (struct vqp *)qp, **pp;

	pthread_mutex_lock(&g.lock);
	for (pp = &g.qps; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	flush_pending(q, false);
	((struct vpd *)qp->pd)->refs--;
	((struct vcq *)qp->send_cq)->qps--;
	g.st.destroy_qp++;
	g.st.live_qp--;
	pthread_mutex_unlock(&g.lock);
	free(q);
	return 0;
}

static int
d_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct vqp *q = (struct vqp *)qp;
	int rc = 0;

	pthread_mutex_lock(&g.lock);
	g.st.post_send_calls++;
	if (should_fail(VDBL_POST_SEND)) {
		*bad = wr;
		rc = errno;
		goto out;
	}
	if (q->st != IBV_QPS_RTS && q->st != IBV_QPS_ERR) {
		*bad = wr;
		rc = EINVAL;
		goto out;
	}
	for (; wr != NULL; wr = wr->next) {
		struct vwr *w;

		if ((wr->opcode != IBV_WR_RDMA_READ && wr->opcode != IBV_WR_RDMA_WRITE) ||
		    wr->num_sge != 1 || q->npend >= q->depth) {
			*bad = wr;
			rc = q->npend >= q->depth ? ENOMEM : EINVAL;
			break;
		}
		w = calloc(1, sizeof(*w));
		if (w == NULL) {
			*bad = wr;
			rc = ENOMEM;
			break;
		}
		w->wr_id = wr->wr_id;
		w->op = wr->opcode;
		w->signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
		w->laddr = wr->sg_list[0].addr;
		w->len = wr->sg_list[0].length;
		w->lkey = wr->sg_list[0].lkey;
		w->raddr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		if (q->pend_tail != NULL) {
			q->pend_tail->next = w;
		} else {
			q->pend_head = w;
		}
		q->pend_tail = w;
		q->npend++;
		q->posted_once = true;
		g.st.wrs_posted++;
	}
	if (!g.deferred) {
		progress_qp(q);
	}
out:
	pthread_mutex_unlock(&g.lock);
	return rc;
}

static int
d_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct vcq *c = (struct vcq *)cq;
	int got = 0;

	pthread_mutex_lock(&g.lock);
	while (got < n && c->n > 0) {
		wc[got++] = c->ring[c->head];
		c->head = (c->head + 1) % c->cap;
		c->n--;
	}
	pthread_mutex_unlock(&g.lock);
	return got;
}

static const struct tide_vrb_ops vdbl_table = {
	.name = "verbs-double",
	.get_device_list = d_get_device_list,
	.free_device_list = d_free_device_list,
	.get_device_name = d_get_device_name,
	.open_device = d_open_device,
	.close_device = d_close_device,
	.query_device = d_query_device,
	.query_port = d_query_port,
	.query_gid = d_query_gid,
	.gid_roce_version = d_gid_roce_version,
	.device_numa_node = d_device_numa_node,
	.alloc_pd = d_alloc_pd,
	.dealloc_pd = d_dealloc_pd,
	.reg_mr = d_reg_mr,
	.dereg_mr = d_dereg_mr,
	.create_cq = d_create_cq,
	.destroy_cq = d_destroy_cq,
	.create_qp = d_create_qp,
	.modify_qp = d_modify_qp,
	.destroy_qp = d_destroy_qp,
	.post_send = d_post_send,
	.poll_cq = d_poll_cq,
};

const struct tide_vrb_ops *
vdbl_ops(void)
{
	return &vdbl_table;
}
