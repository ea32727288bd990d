/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pmd/verbs as the RDMA transport's driver (engine/te/rdma/tide_rdma_dev.h).
 * Nothing here decides policy of its own: each op is a tide_vrb_* call, and
 * the data path converts one burst of the contract's work requests into
 * libibverbs' (and one burst of completions back) on the stack, with one
 * indirect call per burst as before.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tide_log.h"
#include "tide_vrb.h"
#include "tide_vrb_rdma.h"

static_assert(sizeof(union ibv_gid) == sizeof(struct tide_rdma_addr), "GID is 16 bytes");
static_assert(TIDE_VRB_MAX_DEVS == TIDE_RDMA_DEV_MAX, "one device table size");
static_assert(TIDE_VRB_NAME_LEN == TIDE_RDMA_DEV_NAME_LEN, "one device name size");
static_assert(TIDE_VRB_GID_STR_LEN == TIDE_RDMA_ADDR_STR_LEN, "one GID text size");

struct tide_rdma_devs {
	struct tide_vrb *v;
	const struct tide_vrb_ops *ops; /* the glue the devices were opened with */
};

/* Whether the verbs library lists any RDMA device on this node. */
static bool
devices_present(const struct tide_vrb_ops *ops)
{
	int n = 0;
	struct ibv_device **list = ops->get_device_list(&n);

	if (list != NULL)
		ops->free_device_list(list);
	return list != NULL && n > 0;
}

/* The largest path MTU not above max_mtu bytes; 0 below the smallest. */
static enum ibv_mtu
mtu_of(unsigned max_mtu)
{
	return max_mtu >= 4096   ? IBV_MTU_4096
	       : max_mtu >= 2048 ? IBV_MTU_2048
	       : max_mtu >= 1024 ? IBV_MTU_1024
	       : max_mtu >= 512  ? IBV_MTU_512
	       : max_mtu >= 256  ? IBV_MTU_256
				 : 0;
}

static int
vrb_rdma_open(const struct tide_rdma_dev_cfg *cfg, struct tide_rdma_devs **out, char *err,
	      size_t errlen)
{
	const struct tide_vrb_ops *ops;
	struct tide_vrb_cfg vc;
	struct tide_rdma_devs *d;
	int rc;

	if (cfg == NULL || out == NULL || mtu_of(cfg->max_mtu) == 0 || cfg->port == 0)
		return -EINVAL;
	/* -ENOENT or -ENOSYS: the library (or the test seam's) is not there. */
	if (tide_vrb_glue_get(&ops, err, errlen) != 0)
		return -ELIBACC;
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return -ENOMEM;
	tide_vrb_cfg_init(&vc, sizeof(vc));
	vc.devices = cfg->devices;
	vc.port = cfg->port;
	vc.gid_index = cfg->gid_index;
	vc.max_mtu = mtu_of(cfg->max_mtu);
	rc = tide_vrb_open(ops, &vc, &d->v, err, errlen);
	if (rc != 0) {
		/* No device at all is not the same as the named ones missing: the
		 * transport may serve the first over TCP, never the second. */
		if (rc == -ENODEV && !devices_present(ops))
			rc = -ENXIO;
		free(d);
		return rc;
	}
	d->ops = ops;
	*out = d;
	return 0;
}

static void
vrb_rdma_close(struct tide_rdma_devs *d)
{
	if (d == NULL)
		return;
	tide_vrb_close(d->v);
	free(d);
}

static unsigned
vrb_rdma_ndev(const struct tide_rdma_devs *d)
{
	return tide_vrb_ndev(d->v);
}

static int
vrb_rdma_dev_info(const struct tide_rdma_devs *d, unsigned i, struct tide_rdma_dev_info *out)
{
	const struct tide_vrb_dev *dv = tide_vrb_dev(d->v, i);

	if (dv == NULL)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	memcpy(out->name, dv->name, sizeof(out->name));
	memcpy(out->addr, dv->gid_str, sizeof(out->addr));
	out->lid = dv->lid;
	out->numa = dv->numa;
	return 0;
}

static const char *
vrb_rdma_provider(const struct tide_rdma_devs *d)
{
	return d->ops->name != NULL ? d->ops->name : "?";
}

static int
vrb_rdma_addr_parse(const char *text, struct tide_rdma_addr *out)
{
	union ibv_gid g;
	int rc = tide_vrb_gid_parse(text, &g);

	if (rc == 0)
		memcpy(out->raw, g.raw, sizeof(out->raw));
	return rc;
}

static int
vrb_rdma_mr_reg(struct tide_rdma_devs *d, void *addr, size_t len, struct tide_rdma_mr **out,
		struct tide_rdma_keys *keys)
{
	struct tide_vrb_mr *m;
	int rc = tide_vrb_mr_reg(d->v, addr, len, &m);

	if (rc != 0)
		return rc;
	memset(keys, 0, sizeof(*keys));
	for (unsigned i = 0; i < m->n; i++) {
		keys->lkey[i] = m->mr[i]->lkey;
		keys->rkey[i] = m->mr[i]->rkey;
	}
	*out = (struct tide_rdma_mr *)m;
	return 0;
}

static void
vrb_rdma_mr_dereg(struct tide_rdma_devs *d, struct tide_rdma_mr *mr)
{
	tide_vrb_mr_dereg(d->v, (struct tide_vrb_mr *)mr);
}

static int
vrb_rdma_cq_create(struct tide_rdma_devs *d, unsigned dev, int cqe, struct tide_rdma_cq **out)
{
	struct ibv_cq *cq;
	int rc = tide_vrb_cq_create(d->v, dev, cqe, &cq);

	if (rc == 0)
		*out = (struct tide_rdma_cq *)cq;
	return rc;
}

static int
vrb_rdma_cq_destroy(struct tide_rdma_devs *d, struct tide_rdma_cq *cq)
{
	return tide_vrb_cq_destroy(d->v, (struct ibv_cq *)cq);
}

static int
vrb_rdma_qp_create(struct tide_rdma_devs *d, unsigned dev, struct tide_rdma_cq *cq, int depth,
		   struct tide_rdma_qp **out)
{
	struct ibv_qp *qp;
	int rc = tide_vrb_qp_create(d->v, dev, (struct ibv_cq *)cq, depth, NULL, &qp);

	if (rc == 0)
		*out = (struct tide_rdma_qp *)qp;
	return rc;
}

static uint32_t
vrb_rdma_qp_num(const struct tide_rdma_qp *qp)
{
	return ((const struct ibv_qp *)qp)->qp_num;
}

static int
vrb_rdma_qp_connect(struct tide_rdma_devs *d, unsigned dev, struct tide_rdma_qp *qp,
		    const struct tide_rdma_remote *remote, char *why, size_t whylen)
{
	struct tide_vrb_remote r;

	if (remote == NULL)
		return -EINVAL;
	memcpy(r.gid.raw, remote->addr.raw, sizeof(r.gid.raw));
	r.lid = remote->lid;
	r.qp_num = remote->qp_num;
	return tide_vrb_qp_connect(d->v, dev, (struct ibv_qp *)qp, &r, why, whylen);
}

static int
vrb_rdma_qp_reset(struct tide_rdma_devs *d, struct tide_rdma_qp *qp)
{
	return tide_vrb_qp_reset(d->v, (struct ibv_qp *)qp);
}

static int
vrb_rdma_qp_destroy(struct tide_rdma_devs *d, struct tide_rdma_qp *qp)
{
	return tide_vrb_qp_destroy(d->v, (struct ibv_qp *)qp);
}

static int
vrb_rdma_post(struct tide_rdma_devs *d, struct tide_rdma_qp *qp, const struct tide_rdma_wr *wr,
	      unsigned n, unsigned *posted)
{
	struct ibv_send_wr wrs[TIDE_RDMA_BURST_MAX], *bad = NULL;
	struct ibv_sge sges[TIDE_RDMA_BURST_MAX];
	int rc;

	*posted = 0;
	if (n == 0 || n > TIDE_RDMA_BURST_MAX)
		return -EINVAL;
	memset(wrs, 0, n * sizeof(wrs[0]));
	for (unsigned i = 0; i < n; i++) {
		sges[i].addr = wr[i].local;
		sges[i].length = wr[i].len;
		sges[i].lkey = wr[i].lkey;
		wrs[i].wr_id = wr[i].wr_id;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		wrs[i].sg_list = &sges[i];
		wrs[i].num_sge = 1;
		wrs[i].opcode =
			wr[i].op == TIDE_RDMA_WR_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wrs[i].send_flags = wr[i].signaled ? IBV_SEND_SIGNALED : 0;
		wrs[i].wr.rdma.remote_addr = wr[i].remote;
		wrs[i].wr.rdma.rkey = wr[i].rkey;
	}
	/* verbs: a positive errno, and bad_wr at the first WR not posted. */
	rc = d->ops->post_send((struct ibv_qp *)qp, wrs, &bad);
	if (rc == 0) {
		*posted = n;
		return 0;
	}
	*posted = bad != NULL ? (unsigned)(bad - wrs) : 0;
	return rc > 0 ? -rc : rc;
}

/* What a work completion status means to the transport (tide_rdma_wc.err). */
static int
wc_err(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
		return -EFAULT; /* the peer refused the address or key */
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
	case IBV_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

static int
vrb_rdma_poll(struct tide_rdma_devs *d, struct tide_rdma_cq *cq, struct tide_rdma_wc *wc,
	      unsigned n)
{
	struct ibv_wc w[TIDE_RDMA_BURST_MAX];
	int got;

	if (n > TIDE_RDMA_BURST_MAX)
		return -EINVAL;
	/* verbs: a count, or a negative value (not an errno) when the CQ is broken. */
	got = d->ops->poll_cq((struct ibv_cq *)cq, (int)n, w);
	if (got < 0)
		return -EIO;
	for (int i = 0; i < got; i++) {
		wc[i].wr_id = w[i].wr_id;
		wc[i].qp_num = w[i].qp_num;
		wc[i].status = (int)w[i].status;
		wc[i].err = wc_err(w[i].status);
	}
	return got;
}

static const char *
vrb_rdma_status_str(int status)
{
	return tide_vrb_wc_status_str((enum ibv_wc_status)status);
}

const struct tide_rdma_dev_ops tide_vrb_rdma_dev_ops = {
	.name = "pmd/verbs",
	.open = vrb_rdma_open,
	.close = vrb_rdma_close,
	.ndev = vrb_rdma_ndev,
	.dev_info = vrb_rdma_dev_info,
	.provider = vrb_rdma_provider,
	.addr_parse = vrb_rdma_addr_parse,
	.mr_reg = vrb_rdma_mr_reg,
	.mr_dereg = vrb_rdma_mr_dereg,
	.cq_create = vrb_rdma_cq_create,
	.cq_destroy = vrb_rdma_cq_destroy,
	.qp_create = vrb_rdma_qp_create,
	.qp_num = vrb_rdma_qp_num,
	.qp_connect = vrb_rdma_qp_connect,
	.qp_reset = vrb_rdma_qp_reset,
	.qp_destroy = vrb_rdma_qp_destroy,
	.post = vrb_rdma_post,
	.poll = vrb_rdma_poll,
	.status_str = vrb_rdma_status_str,
};

/* Before main() (or while libtidestore.so loads): a transport started later
 * finds the driver without its program naming pmd/verbs in code. */
__attribute__((constructor)) static void
vrb_rdma_driver_register(void)
{
	int rc = tide_rdma_dev_register(&tide_vrb_rdma_dev_ops);

	if (rc != 0)
		TIDE_LOG(ERR, "pmd/verbs: not the RDMA transport's driver: %s", strerror(-rc));
}
