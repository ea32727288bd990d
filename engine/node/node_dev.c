/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registered device driver (tide_node_dev.h). One plain pointer: drivers
 * register from constructors, which run one at a time before main() (or
 * while a shared library is loaded), and runtimes only read it later.
 */
#include <errno.h>
#include <stddef.h>

#include "tide_node_dev.h"

static const struct tide_node_dev_ops *node_dev;

int
tide_node_dev_register(const struct tide_node_dev_ops *ops)
{
	if (ops == NULL || ops->name == NULL || ops->env_init == NULL || ops->env_fini == NULL ||
	    ops->thread_init == NULL || ops->port_open == NULL || ops->port_close == NULL ||
	    ops->queue_open == NULL || ops->queue_net_opts == NULL || ops->queue_csum == NULL ||
	    ops->queue_poll == NULL || ops->queue_next_due == NULL ||
	    ops->queue_intr_open == NULL || ops->queue_intr_arm == NULL ||
	    ops->queue_intr_disarm == NULL || ops->queue_publish == NULL ||
	    ops->queue_close == NULL)
		return -EINVAL;
	if (node_dev != NULL && node_dev != ops)
		return -EEXIST;
	node_dev = ops;
	return 0;
}

const struct tide_node_dev_ops *
tide_node_dev_get(void)
{
	return node_dev;
}
