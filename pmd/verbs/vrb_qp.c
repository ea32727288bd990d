/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Completion queues, RC queue pairs and their state transitions, GID text.
 *
 * Connection attributes follow Mooncake's RDMA endpoint so a Tide QP and a
 * stock Mooncake QP agree without negotiating: PSN 0 in both directions,
 * global routing (GRH) always, hop limit 16, 16 outstanding RDMA reads each
 * way (clamped to what the device allows), timeout 14 (~67 ms), retry and
 * RNR retry 7, min RNR timer 12.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tide_log.h"
#include "vrb_internal.h"

#define VRB_HOP_LIMIT   16
#define VRB_RD_ATOMIC   16
#define VRB_QP_TIMEOUT  14
#define VRB_RETRY_CNT   7
#define VRB_RNR_RETRY   7
#define VRB_MIN_RNR_TMR 12

static void __attribute__((format(printf, 3, 4)))
setwhy(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || len == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

int
tide_vrb_cq_create(struct tide_vrb *v, unsigned dev, int cqe, struct ibv_cq **out)
{
	struct tide_vrb_dev *d;

	if (dev >= v->ndev || cqe <= 0 || out == NULL) {
		return -EINVAL;
	}
	d = &v->devs[dev];
	if (d->max_cqe > 0 && cqe > d->max_cqe) {
		cqe = d->max_cqe;
	}
	errno = 0;
	*out = v->ops->create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (*out == NULL) {
		int rc = errno ? -errno : -ENOMEM;

		TIDE_LOG(ERR, "verbs: %s: create_cq(%d): %s", d->name, cqe, strerror(-rc));
		return rc;
	}
	return 0;
}

int
tide_vrb_cq_destroy(struct tide_vrb *v, struct ibv_cq *cq)
{
	int rc;

	if (cq == NULL) {
		return 0;
	}
	rc = v->ops->destroy_cq(cq);
	return rc > 0 ? -rc : rc;
}

int
tide_vrb_qp_create(struct tide_vrb *v, unsigned dev, struct ibv_cq *cq, int depth, void *qp_context,
		   struct ibv_qp **out)
{
	struct ibv_qp_init_attr a;
	struct tide_vrb_dev *d;

	if (dev >= v->ndev || cq == NULL || depth <= 0 || out == NULL) {
		return -EINVAL;
	}
	d = &v->devs[dev];
	if (d->max_qp_wr > 0 && depth > d->max_qp_wr) {
		depth = d->max_qp_wr;
	}
	memset(&a, 0, sizeof(a));
	a.qp_context = qp_context;
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = (uint32_t)depth;
	a.cap.max_recv_wr = 1; /* one-sided only: nothing is ever received */
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	errno = 0;
	*out = v->ops->create_qp(d->pd, &a);
	if (*out == NULL) {
		int rc = errno ? -errno : -ENOMEM;

		TIDE_LOG(ERR, "verbs: %s: create_qp(depth %d): %s", d->name, depth, strerror(-rc));
		return rc;
	}
	return 0;
}

static int
modify(struct tide_vrb *v, struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int rc = v->ops->modify_qp(qp, a, mask);

	return rc > 0 ? -rc : rc;
}

int
tide_vrb_qp_reset(struct tide_vrb *v, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	return modify(v, qp, &a, IBV_QP_STATE);
}

int
tide_vrb_qp_connect(struct tide_vrb *v, unsigned dev, struct ibv_qp *qp,
		    const struct tide_vrb_remote *r, char *why, size_t whylen)
{
	struct tide_vrb_dev *d;
	struct ibv_qp_attr a;
	uint8_t rd;
	int rc;

	if (dev >= v->ndev || qp == NULL || r == NULL) {
		return -EINVAL;
	}
	d = &v->devs[dev];
	rd = (uint8_t)(d->max_qp_rd_atom > 0 && d->max_qp_rd_atom < VRB_RD_ATOMIC
			       ? d->max_qp_rd_atom
			       : VRB_RD_ATOMIC);
	/* Any state -> RESET first: some NICs refuse INIT from ERR directly. */
	rc = tide_vrb_qp_reset(v, qp);
	if (rc != 0) {
		setwhy(why, whylen, "%s qp %u -> RESET: %s", d->name, qp->qp_num, strerror(-rc));
		return rc;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = d->port;
	a.pkey_index = 0;
	a.qp_access_flags =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	rc = modify(v, qp, &a,
		    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc != 0) {
		setwhy(why, whylen, "%s qp %u -> INIT (port %u): %s", d->name, qp->qp_num,
		       (unsigned)d->port, strerror(-rc));
		return rc;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = r->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = rd;
	a.min_rnr_timer = VRB_MIN_RNR_TMR;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = r->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
	a.ah_attr.grh.hop_limit = VRB_HOP_LIMIT;
	a.ah_attr.dlid = r->lid;
	a.ah_attr.sl = 0;
	a.ah_attr.port_num = d->port;
	rc = modify(v, qp, &a,
		    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc != 0) {
		setwhy(why, whylen,
		       "%s qp %u -> RTR (remote qp %u lid %u, gid index %d): %s "
		       "(wrong MC_GID_INDEX or unreachable GID?)",
		       d->name, qp->qp_num, r->qp_num, (unsigned)r->lid, d->gid_index,
		       strerror(-rc));
		return rc;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = VRB_QP_TIMEOUT;
	a.retry_cnt = VRB_RETRY_CNT;
	a.rnr_retry = VRB_RNR_RETRY;
	a.sq_psn = 0;
	a.max_rd_atomic = rd;
	rc = modify(v, qp, &a,
		    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc != 0) {
		setwhy(why, whylen, "%s qp %u -> RTS: %s", d->name, qp->qp_num, strerror(-rc));
		return rc;
	}
	return 0;
}

int
tide_vrb_qp_destroy(struct tide_vrb *v, struct ibv_qp *qp)
{
	int rc;

	if (qp == NULL) {
		return 0;
	}
	rc = v->ops->destroy_qp(qp);
	return rc > 0 ? -rc : rc;
}

void
tide_vrb_gid_format(const union ibv_gid *gid, char *buf)
{
	size_t off = 0;

	for (int i = 0; i < 16; i++) {
		off += (size_t)snprintf(buf + off, TIDE_VRB_GID_STR_LEN - off, i ? ":%02x" : "%02x",
					gid->raw[i]);
	}
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

int
tide_vrb_gid_parse(const char *s, union ibv_gid *gid)
{
	/* Exactly "hh" 16 times with ':' between: one or two digits per byte, as
	 * Mooncake's stream parser accepts. */
	for (int i = 0; i < 16; i++) {
		int hi = hexval(s[0]), lo;

		if (hi < 0) {
			return -EINVAL;
		}
		lo = hexval(s[1]);
		if (lo >= 0) {
			gid->raw[i] = (uint8_t)(hi << 4 | lo);
			s += 2;
		} else {
			gid->raw[i] = (uint8_t)hi;
			s += 1;
		}
		if (i < 15) {
			if (*s != ':') {
				return -EINVAL;
			}
			s++;
		}
	}
	return *s == '\0' ? 0 : -EINVAL;
}

const char *
tide_vrb_wc_status_str(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return "success";
	case IBV_WC_LOC_LEN_ERR:
		return "local length error";
	case IBV_WC_LOC_QP_OP_ERR:
		return "local QP operation error";
	case IBV_WC_LOC_PROT_ERR:
		return "local protection error";
	case IBV_WC_WR_FLUSH_ERR:
		return "work request flushed (QP in error)";
	case IBV_WC_LOC_ACCESS_ERR:
		return "local access error";
	case IBV_WC_REM_INV_REQ_ERR:
		return "remote invalid request";
	case IBV_WC_REM_ACCESS_ERR:
		return "remote access error (rkey or range refused)";
	case IBV_WC_REM_OP_ERR:
		return "remote operation error";
	case IBV_WC_RETRY_EXC_ERR:
		return "transport retry counter exceeded (peer unreachable)";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "RNR retry counter exceeded";
	case IBV_WC_FATAL_ERR:
		return "fatal error";
	case IBV_WC_RESP_TIMEOUT_ERR:
		return "response timeout";
	default:
		return "other work completion error";
	}
}
