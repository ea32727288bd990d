/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device discovery, GID choice, protection domains and memory registration.
 * Slow path only: runs at set-up and when a buffer is registered, never per
 * transfer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_log.h"
#include "vrb_internal.h"

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void
tide_vrb_cfg_init(struct tide_vrb_cfg *cfg, size_t cfg_size)
{
	struct tide_vrb_cfg d = {
		.cfg_size = sizeof(d),
		.port = 1,
		.gid_index = -1,
		.max_mtu = IBV_MTU_4096,
	};

	memset(cfg, 0, cfg_size);
	memcpy(cfg, &d, cfg_size < sizeof(d) ? cfg_size : sizeof(d));
}

/* Split a comma list into names; empty items are an error ("a,,b"). */
static int
split_names(const char *list, char names[][TIDE_VRB_NAME_LEN], unsigned *n, char *err,
	    size_t errlen)
{
	const char *p = list;

	*n = 0;
	while (*p != '\0') {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		while (len > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) {
			len--;
		}
		if (len == 0 || len >= TIDE_VRB_NAME_LEN) {
			seterr(err, errlen, "device list '%s': %s item", list,
			       len == 0 ? "empty" : "over-long");
			return -EINVAL;
		}
		if (*n == TIDE_VRB_MAX_DEVS) {
			seterr(err, errlen, "device list '%s': more than %d devices", list,
			       TIDE_VRB_MAX_DEVS);
			return -EINVAL;
		}
		memcpy(names[*n], p, len);
		names[*n][len] = '\0';
		(*n)++;
		if (end == NULL) {
			break;
		}
		p = end + 1;
		if (*p == '\0') {
			seterr(err, errlen, "device list '%s': empty item", list);
			return -EINVAL;
		}
	}
	return 0;
}

static bool
gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return memcmp(g->raw, zero, sizeof(zero)) == 0;
}

/* ::ffff:a.b.c.d - the entry RoCE v2 uses for an IPv4 interface address. */
static bool
gid_is_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

/* Choose the GID of d; the port attributes are already in d. At most
 * gid_tbl_len queries (bounded by the device, 256 on current NICs). */
static int
pick_gid(struct tide_vrb *v, struct tide_vrb_dev *d, int want, int tbl_len, char *err,
	 size_t errlen)
{
	int best = -1, best_rank = 0;

	if (want >= 0) {
		int rc = v->ops->query_gid(d->ctx, d->port, want, &d->gid);

		if (rc != 0 || gid_is_zero(&d->gid)) {
			seterr(err, errlen,
			       "%s port %u: GID index %d (MC_GID_INDEX) is %s; see "
			       "`show_gids` for valid indexes",
			       d->name, (unsigned)d->port, want, rc != 0 ? "unreadable" : "empty");
			return rc != 0 ? -(rc > 0 ? rc : EINVAL) : -EINVAL;
		}
		d->gid_index = want;
		return 0;
	}
	if (d->link_layer != IBV_LINK_LAYER_ETHERNET) {
		/* InfiniBand routes by LID; index 0 holds the port GID. */
		if (v->ops->query_gid(d->ctx, d->port, 0, &d->gid) != 0) {
			memset(&d->gid, 0, sizeof(d->gid));
		}
		d->gid_index = 0;
		return 0;
	}
	for (int i = 0; i < tbl_len; i++) {
		union ibv_gid g;
		int rank;

		if (v->ops->query_gid(d->ctx, d->port, i, &g) != 0 || gid_is_zero(&g)) {
			continue;
		}
		/* 3: RoCE v2 + IPv4-mapped, 2: RoCE v2, 1: anything non-zero. */
		rank = v->ops->gid_roce_version(d->ctx, d->port, i) == 2
			       ? (gid_is_v4_mapped(&g) ? 3 : 2)
			       : 1;
		if (rank > best_rank) {
			best = i;
			best_rank = rank;
			d->gid = g;
			if (rank == 3) {
				break;
			}
		}
	}
	if (best < 0) {
		seterr(err, errlen,
		       "%s port %u: RoCE port has no usable GID (is an IP address configured "
		       "on its netdev?)",
		       d->name, (unsigned)d->port);
		return -EADDRNOTAVAIL;
	}
	d->gid_index = best;
	return 0;
}

/* Open one listed device; d->name is set. */
static int
dev_open(struct tide_vrb *v, const struct tide_vrb_cfg *cfg, struct ibv_device *ibdev,
	 struct tide_vrb_dev *d, char *err, size_t errlen)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	int rc;

	d->ctx = v->ops->open_device(ibdev);
	if (d->ctx == NULL) {
		rc = errno ? -errno : -EIO;
		seterr(err, errlen, "%s: open failed: %s (memlock limit? see README RDMA)", d->name,
		       strerror(-rc));
		return rc;
	}
	rc = v->ops->query_device(d->ctx, &da);
	if (rc == 0) {
		rc = v->ops->query_port(d->ctx, cfg->port, &pa);
	}
	if (rc != 0) {
		seterr(err, errlen, "%s: query of port %u failed: %s (MC_IB_PORT?)", d->name,
		       (unsigned)cfg->port, strerror(rc > 0 ? rc : EIO));
		return -(rc > 0 ? rc : EIO);
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		seterr(err, errlen, "%s port %u is not active (state %d); check the link", d->name,
		       (unsigned)cfg->port, (int)pa.state);
		return -ENETDOWN;
	}
	d->port = cfg->port;
	d->link_layer = pa.link_layer;
	d->lid = pa.lid;
	d->mtu = pa.active_mtu < cfg->max_mtu ? pa.active_mtu : cfg->max_mtu;
	d->max_qp_wr = da.max_qp_wr;
	d->max_cqe = da.max_cqe;
	d->max_qp_rd_atom = da.max_qp_rd_atom;
	d->numa = v->ops->device_numa_node(ibdev);
	rc = pick_gid(v, d, cfg->gid_index, pa.gid_tbl_len, err, errlen);
	if (rc != 0) {
		return rc;
	}
	tide_vrb_gid_format(&d->gid, d->gid_str);
	d->pd = v->ops->alloc_pd(d->ctx);
	if (d->pd == NULL) {
		rc = errno ? -errno : -ENOMEM;
		seterr(err, errlen, "%s: protection domain: %s", d->name, strerror(-rc));
		return rc;
	}
	return 0;
}

static void
dev_close(struct tide_vrb *v, struct tide_vrb_dev *d)
{
	if (d->pd != NULL) {
		v->ops->dealloc_pd(d->pd);
		d->pd = NULL;
	}
	if (d->ctx != NULL) {
		v->ops->close_device(d->ctx);
		d->ctx = NULL;
	}
}

/* "mlx5_0 (active), mlx5_1 (down)" for error texts. */
static void
list_names(struct tide_vrb *v, struct ibv_device **list, int n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && off < len; i++) {
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
					v->ops->get_device_name(list[i]));
	}
	if (n == 0) {
		snprintf(buf, len, "none");
	}
}

int
tide_vrb_open(const struct tide_vrb_ops *ops, const struct tide_vrb_cfg *cfg_in,
	      struct tide_vrb **out, char *err, size_t errlen)
{
	char names[TIDE_VRB_MAX_DEVS][TIDE_VRB_NAME_LEN];
	char have[512];
	struct tide_vrb_cfg cfg;
	struct ibv_device **list;
	struct tide_vrb *v;
	unsigned nnames = 0;
	int n = 0, rc = 0;

	if (ops == NULL || cfg_in == NULL || out == NULL) {
		return -EINVAL;
	}
	tide_vrb_cfg_init(&cfg, sizeof(cfg));
	memcpy(&cfg, cfg_in, cfg_in->cfg_size < sizeof(cfg) ? cfg_in->cfg_size : sizeof(cfg));
	if (cfg.port == 0) {
		seterr(err, errlen, "port 0 is not a valid IB port (MC_IB_PORT counts from 1)");
		return -EINVAL;
	}
	if (cfg.devices != NULL && cfg.devices[0] != '\0') {
		rc = split_names(cfg.devices, names, &nnames, err, errlen);
		if (rc != 0) {
			return rc;
		}
	}
	v = calloc(1, sizeof(*v));
	if (v == NULL) {
		return -ENOMEM;
	}
	v->ops = ops;
	errno = 0;
	list = ops->get_device_list(&n);
	if (list == NULL || n <= 0) {
		if (list != NULL) {
			ops->free_device_list(list);
		}
		seterr(err, errlen,
		       "no RDMA device found (%s): load the NIC's RDMA driver (mlx5_ib, ...) "
		       "or use protocol tcp (MOONCAKE_PROTOCOL=tcp)",
		       errno == ENOSYS ? "no kernel verbs support" : "ibv_get_device_list empty");
		free(v);
		return -ENODEV;
	}
	list_names(v, list, n, have, sizeof(have));
	if (nnames > 0) {
		for (unsigned k = 0; k < nnames && rc == 0; k++) {
			struct ibv_device *found = NULL;

			for (int i = 0; i < n; i++) {
				if (strcmp(ops->get_device_name(list[i]), names[k]) == 0) {
					found = list[i];
					break;
				}
			}
			if (found == NULL) {
				seterr(err, errlen,
				       "RDMA device '%s' (rdma_devices / MOONCAKE_DEVICE) is "
				       "not on this node (devices here: %s); name one of "
				       "those, or use protocol tcp (MOONCAKE_PROTOCOL=tcp)",
				       names[k], have);
				rc = -ENODEV;
				break;
			}
			if (tide_vrb_dev_find(v, names[k]) >= 0) {
				continue; /* listed twice */
			}
			struct tide_vrb_dev *d = &v->devs[v->ndev];

			snprintf(d->name, sizeof(d->name), "%.*s", TIDE_VRB_NAME_LEN - 1, names[k]);
			d->idx = v->ndev;
			rc = dev_open(v, &cfg, found, d, err, errlen);
			if (rc != 0) {
				dev_close(v, d);
				break;
			}
			v->ndev++;
		}
	} else {
		/* Every device with an active port; one that is down is skipped. */
		char first_err[256] = "";

		for (int i = 0; i < n && v->ndev < TIDE_VRB_MAX_DEVS; i++) {
			struct tide_vrb_dev *d = &v->devs[v->ndev];
			char e[256] = "";

			memset(d, 0, sizeof(*d));
			snprintf(d->name, sizeof(d->name), "%.*s", TIDE_VRB_NAME_LEN - 1,
				 ops->get_device_name(list[i]));
			d->idx = v->ndev;
			if (dev_open(v, &cfg, list[i], d, e, sizeof(e)) != 0) {
				TIDE_LOG(NOTICE, "verbs: skipping %s", e);
				if (first_err[0] == '\0') {
					snprintf(first_err, sizeof(first_err), "%s", e);
				}
				dev_close(v, d);
				continue;
			}
			v->ndev++;
		}
		if (v->ndev == 0) {
			seterr(err, errlen,
			       "no usable RDMA device (devices here: %s; first: %s); or use "
			       "protocol tcp (MOONCAKE_PROTOCOL=tcp)",
			       have, first_err);
			rc = -ENODEV;
		}
	}
	ops->free_device_list(list);
	if (rc != 0) {
		tide_vrb_close(v);
		return rc;
	}
	for (unsigned i = 0; i < v->ndev; i++) {
		const struct tide_vrb_dev *d = &v->devs[i];

		TIDE_LOG(INFO, "verbs: %s port %u %s lid %u gid[%d] %s mtu %d numa %d", d->name,
			 (unsigned)d->port,
			 d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", (unsigned)d->lid,
			 d->gid_index, d->gid_str, 128 << d->mtu, d->numa);
	}
	*out = v;
	return 0;
}

void
tide_vrb_close(struct tide_vrb *v)
{
	if (v == NULL) {
		return;
	}
	for (unsigned i = 0; i < v->ndev; i++) {
		dev_close(v, &v->devs[i]);
	}
	free(v);
}

unsigned
tide_vrb_ndev(const struct tide_vrb *v)
{
	return v->ndev;
}

const struct tide_vrb_dev *
tide_vrb_dev(const struct tide_vrb *v, unsigned i)
{
	return i < v->ndev ? &v->devs[i] : NULL;
}

int
tide_vrb_dev_find(const struct tide_vrb *v, const char *name)
{
	for (unsigned i = 0; i < v->ndev; i++) {
		if (strcmp(v->devs[i].name, name) == 0) {
			return (int)i;
		}
	}
	return -ENODEV;
}

const struct tide_vrb_ops *
tide_vrb_ops_of(const struct tide_vrb *v)
{
	return v->ops;
}

int
tide_vrb_mr_reg(struct tide_vrb *v, void *addr, size_t len, struct tide_vrb_mr **out)
{
	const int access =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	struct tide_vrb_mr *m;

	if (addr == NULL || len == 0 || out == NULL) {
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		return -ENOMEM;
	}
	m->addr = addr;
	m->len = len;
	for (unsigned i = 0; i < v->ndev; i++) {
		errno = 0;
		m->mr[i] = v->ops->reg_mr(v->devs[i].pd, addr, len, access);
		if (m->mr[i] == NULL) {
			int rc = errno ? -errno : -ENOMEM;

			TIDE_LOG(ERR, "verbs: %s: registering %zu bytes at %p failed: %s%s",
				 v->devs[i].name, len, addr, strerror(-rc),
				 rc == -ENOMEM || rc == -EPERM || rc == -EFAULT
					 ? " (raise the memlock limit: ulimit -l unlimited)"
					 : "");
			tide_vrb_mr_dereg(v, m);
			return rc;
		}
		m->n = i + 1;
	}
	*out = m;
	return 0;
}

void
tide_vrb_mr_dereg(struct tide_vrb *v, struct tide_vrb_mr *m)
{
	if (m == NULL) {
		return;
	}
	for (unsigned i = 0; i < m->n; i++) {
		if (m->mr[i] != NULL) {
			v->ops->dereg_mr(m->mr[i]);
		}
	}
	free(m);
}
