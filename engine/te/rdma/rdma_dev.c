/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registered RDMA driver (tide_rdma_dev.h). One plain pointer: drivers
 * register from constructors, which run one at a time before main() (or
 * while a shared library is loaded), and transports only read it later.
 */
#include <errno.h>
#include <stddef.h>

#include "tide_rdma_dev.h"

static const struct tide_rdma_dev_ops *rdma_dev;

int
tide_rdma_dev_register(const struct tide_rdma_dev_ops *ops)
{
	if (ops == NULL || ops->name == NULL || ops->open == NULL || ops->close == NULL ||
	    ops->ndev == NULL || ops->dev_info == NULL || ops->provider == NULL ||
	    ops->addr_parse == NULL || ops->mr_reg == NULL || ops->mr_dereg == NULL ||
	    ops->cq_create == NULL || ops->cq_destroy == NULL || ops->qp_create == NULL ||
	    ops->qp_num == NULL || ops->qp_connect == NULL || ops->qp_reset == NULL ||
	    ops->qp_destroy == NULL || ops->post == NULL || ops->poll == NULL ||
	    ops->status_str == NULL)
		return -EINVAL;
	if (rdma_dev != NULL && rdma_dev != ops)
		return -EEXIST;
	rdma_dev = ops;
	return 0;
}

const struct tide_rdma_dev_ops *
tide_rdma_dev_get(void)
{
	return rdma_dev;
}
