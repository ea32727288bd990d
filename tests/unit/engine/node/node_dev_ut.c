/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for engine/node's driver registry (node_dev.c) and what
 * tide_node_rt_start() does before any device exists: no driver linked, a
 * driver refused at registration, a driver whose environment fails. This
 * program links engine/node without pmd/eth, which is the point: the
 * runtime builds and fails cleanly with no device layer at all.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tide_node_dev.h"
#include "tide_node_rt.h"
#include "tide_nodeenv.h"
#include "tide_ut.h"

static unsigned env_inits;

/* A driver whose environment never starts: every other op is unreachable. */
static int
ut_env_init(const struct tide_nodeenv *ne, const char *prog, bool *hugepages)
{
	(void)ne;
	(void)prog;
	(void)hugepages;
	env_inits++;
	return -ENOTSUP;
}

static void
ut_env_fini(void)
{
	CU_FAIL("env_fini without an environment");
}

static int
ut_thread_init(void *arg, unsigned worker)
{
	(void)arg;
	(void)worker;
	return -ENOTSUP;
}

static int
ut_port_open(const struct tide_nodeenv *ne, const int *cpus, unsigned nqueues,
	     struct tide_node_port **out)
{
	(void)ne;
	(void)cpus;
	(void)nqueues;
	(void)out;
	CU_FAIL("port_open without an environment");
	return -ENOTSUP;
}

static unsigned
ut_port_close(struct tide_node_port *port)
{
	(void)port;
	CU_FAIL("port_close without a port");
	return 0;
}

static int
ut_queue_open(struct tide_node_port *port, unsigned idx, const struct tide_nodeenv *ne,
	      uint64_t now, struct tide_node_queue **out)
{
	(void)port;
	(void)idx;
	(void)ne;
	(void)now;
	(void)out;
	return -ENOTSUP;
}

static int
ut_queue_net_opts(struct tide_node_queue *q, const struct tide_nodeenv *ne,
		  struct tide_net_opts *no)
{
	(void)q;
	(void)ne;
	(void)no;
	return -ENOTSUP;
}

static const char *
ut_queue_csum(const struct tide_node_queue *q)
{
	(void)q;
	return "in software";
}

static unsigned
ut_queue_poll(struct tide_node_queue *q, struct tide_net_stack *stack, uint64_t now)
{
	(void)q;
	(void)stack;
	(void)now;
	return 0;
}

static uint64_t
ut_queue_next_due(const struct tide_node_queue *q)
{
	(void)q;
	return UINT64_MAX;
}

static int
ut_queue_intr(struct tide_node_queue *q)
{
	(void)q;
	return -ENOTSUP;
}

static void
ut_queue_intr_disarm(struct tide_node_queue *q)
{
	(void)q;
}

static int
ut_queue_publish(struct tide_node_queue *q, const struct tide_net_stack *stack, unsigned *index)
{
	(void)q;
	(void)stack;
	(void)index;
	return -ENOTSUP;
}

static void
ut_queue_close(struct tide_node_queue *q)
{
	(void)q;
}

static const struct tide_node_dev_ops ut_ops = {
	.name = "ut",
	.env_init = ut_env_init,
	.env_fini = ut_env_fini,
	.thread_init = ut_thread_init,
	.port_open = ut_port_open,
	.port_close = ut_port_close,
	.queue_open = ut_queue_open,
	.queue_net_opts = ut_queue_net_opts,
	.queue_csum = ut_queue_csum,
	.queue_poll = ut_queue_poll,
	.queue_next_due = ut_queue_next_due,
	.queue_intr_open = ut_queue_intr,
	.queue_intr_arm = ut_queue_intr,
	.queue_intr_disarm = ut_queue_intr_disarm,
	.queue_publish = ut_queue_publish,
	.queue_close = ut_queue_close,
};

static int
load_node(struct tide_nodeenv *ne)
{
	static char *const kv[] = {"TIDE_DPDK_DEVICE=net_ring0", "TIDE_DATA_IP=10.0.0.1",
				   "TIDE_LCORES=0", NULL};
	char err[2048] = "";
	int rc = tide_nodeenv_load(ne, "/dev/null", kv, err, sizeof(err));

	if (rc != 0)
		fprintf(stderr, "node file refused:\n%s", err);
	return rc;
}

/* First: nothing is registered yet in this process. */
static void
test_start_without_driver(void)
{
	static struct tide_nodeenv ne;
	struct tide_node_rt *rt = (struct tide_node_rt *)&ne; /* must come back NULL */

	CU_ASSERT_PTR_NULL(tide_node_dev_get());
	TIDE_UT_OK(load_node(&ne));
	CU_ASSERT_EQUAL(tide_node_rt_start(&ne, NULL, &rt), -ENODEV);
	CU_ASSERT_PTR_NULL(rt);
}

static void
test_register_refuses_incomplete(void)
{
	struct tide_node_dev_ops o = ut_ops;

	CU_ASSERT_EQUAL(tide_node_dev_register(NULL), -EINVAL);
	o.name = NULL;
	CU_ASSERT_EQUAL(tide_node_dev_register(&o), -EINVAL);
	o = ut_ops;
	o.queue_close = NULL;
	CU_ASSERT_EQUAL(tide_node_dev_register(&o), -EINVAL);
	o = ut_ops;
	o.env_init = NULL;
	CU_ASSERT_EQUAL(tide_node_dev_register(&o), -EINVAL);
	CU_ASSERT_PTR_NULL(tide_node_dev_get());
}

static void
test_register_once(void)
{
	static const struct tide_node_dev_ops other = {0};
	struct tide_node_dev_ops copy = ut_ops;

	TIDE_UT_OK(tide_node_dev_register(&ut_ops));
	TIDE_UT_OK(tide_node_dev_register(&ut_ops)); /* the same table again: no-op */
	CU_ASSERT_EQUAL(tide_node_dev_register(&copy), -EEXIST);
	CU_ASSERT_EQUAL(tide_node_dev_register(&other), -EINVAL);
	CU_ASSERT_PTR_EQUAL(tide_node_dev_get(), &ut_ops);
}

/* The driver's error comes back unchanged, and nothing it did not start is undone. */
static void
test_start_env_failure_returned(void)
{
	static struct tide_nodeenv ne;
	struct tide_node_rt *rt = NULL;

	TIDE_UT_OK(load_node(&ne));
	env_inits = 0;
	CU_ASSERT_EQUAL(tide_node_rt_start(&ne, NULL, &rt), -ENOTSUP);
	CU_ASSERT_PTR_NULL(rt);
	CU_ASSERT_EQUAL(env_inits, 1);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("node_dev", NULL, NULL);

	CU_add_test(s, "start_without_driver", test_start_without_driver);
	CU_add_test(s, "register_refuses_incomplete", test_register_refuses_incomplete);
	CU_add_test(s, "register_once", test_register_once);
	CU_add_test(s, "start_env_failure_returned", test_start_env_failure_returned);
}

TIDE_UT_MAIN(register_tests)
