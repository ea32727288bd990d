/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for engine/te/rdma's driver registry (rdma_dev.c) and what the
 * RDMA transport does before any device exists: no driver linked, a driver
 * refused at registration, a driver whose open fails in each way the
 * contract names. This program links the transfer engine without pmd/verbs,
 * which is the point: the transport builds and fails cleanly with no verbs
 * layer at all, saying what is missing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "te_ut.h"
#include "tide_rdma_dev.h"
#include "tide_te.h"
#include "tide_ut.h"

/* What the fake driver's open answers, and what it was asked. */
static struct {
	int rc;
	const char *err;
	unsigned opens;
	struct tide_rdma_dev_cfg cfg;
	char devices[128];
} fake;

static int
ut_open(const struct tide_rdma_dev_cfg *cfg, struct tide_rdma_devs **out, char *err, size_t errlen)
{
	(void)out;
	fake.opens++;
	fake.cfg = *cfg;
	snprintf(fake.devices, sizeof(fake.devices), "%s", cfg->devices ? cfg->devices : "");
	fake.cfg.devices = fake.devices;
	snprintf(err, errlen, "%s", fake.err);
	return fake.rc;
}

/* rdma_destroy() closes whatever open gave, NULL included (the contract ignores it). */
static void
ut_close(struct tide_rdma_devs *d)
{
	CU_ASSERT_PTR_NULL(d);
}

static unsigned
ut_ndev(const struct tide_rdma_devs *d)
{
	(void)d;
	CU_FAIL("ndev without an open handle");
	return 0;
}

static int
ut_dev_info(const struct tide_rdma_devs *d, unsigned i, struct tide_rdma_dev_info *out)
{
	(void)d;
	(void)i;
	(void)out;
	CU_FAIL("dev_info without an open handle");
	return -EINVAL;
}

static const char *
ut_provider(const struct tide_rdma_devs *d)
{
	(void)d;
	return "ut";
}

static int
ut_addr_parse(const char *text, struct tide_rdma_addr *out)
{
	(void)text;
	(void)out;
	return -EINVAL;
}

static int
ut_mr_reg(struct tide_rdma_devs *d, void *addr, size_t len, struct tide_rdma_mr **out,
	  struct tide_rdma_keys *keys)
{
	(void)d;
	(void)addr;
	(void)len;
	(void)out;
	(void)keys;
	CU_FAIL("mr_reg without an open handle");
	return -EINVAL;
}

static void
ut_mr_dereg(struct tide_rdma_devs *d, struct tide_rdma_mr *mr)
{
	(void)d;
	CU_ASSERT_PTR_NULL(mr);
}

static int
ut_cq_create(struct tide_rdma_devs *d, unsigned dev, int cqe, struct tide_rdma_cq **out)
{
	(void)d;
	(void)dev;
	(void)cqe;
	(void)out;
	CU_FAIL("cq_create without an open handle");
	return -EINVAL;
}

static int
ut_cq_destroy(struct tide_rdma_devs *d, struct tide_rdma_cq *cq)
{
	(void)d;
	CU_ASSERT_PTR_NULL(cq);
	return 0;
}

static int
ut_qp_create(struct tide_rdma_devs *d, unsigned dev, struct tide_rdma_cq *cq, int depth,
	     struct tide_rdma_qp **out)
{
	(void)d;
	(void)dev;
	(void)cq;
	(void)depth;
	(void)out;
	CU_FAIL("qp_create without an open handle");
	return -EINVAL;
}

static uint32_t
ut_qp_num(const struct tide_rdma_qp *qp)
{
	(void)qp;
	return 0;
}

static int
ut_qp_connect(struct tide_rdma_devs *d, unsigned dev, struct tide_rdma_qp *qp,
	      const struct tide_rdma_remote *remote, char *why, size_t whylen)
{
	(void)d;
	(void)dev;
	(void)qp;
	(void)remote;
	(void)why;
	(void)whylen;
	CU_FAIL("qp_connect without an open handle");
	return -EINVAL;
}

static int
ut_qp_reset(struct tide_rdma_devs *d, struct tide_rdma_qp *qp)
{
	(void)d;
	(void)qp;
	CU_FAIL("qp_reset without an open handle");
	return -EINVAL;
}

static int
ut_qp_destroy(struct tide_rdma_devs *d, struct tide_rdma_qp *qp)
{
	(void)d;
	CU_ASSERT_PTR_NULL(qp);
	return 0;
}

static int
ut_post(struct tide_rdma_devs *d, struct tide_rdma_qp *qp, const struct tide_rdma_wr *wr,
	unsigned n, unsigned *posted)
{
	(void)d;
	(void)qp;
	(void)wr;
	(void)n;
	*posted = 0;
	CU_FAIL("post without an open handle");
	return -EINVAL;
}

static int
ut_poll(struct tide_rdma_devs *d, struct tide_rdma_cq *cq, struct tide_rdma_wc *wc, unsigned n)
{
	(void)d;
	(void)cq;
	(void)wc;
	(void)n;
	CU_FAIL("poll without an open handle");
	return -EINVAL;
}

static const char *
ut_status_str(int status)
{
	(void)status;
	return "ut";
}

static const struct tide_rdma_dev_ops ut_ops = {
	.name = "ut",
	.open = ut_open,
	.close = ut_close,
	.ndev = ut_ndev,
	.dev_info = ut_dev_info,
	.provider = ut_provider,
	.addr_parse = ut_addr_parse,
	.mr_reg = ut_mr_reg,
	.mr_dereg = ut_mr_dereg,
	.cq_create = ut_cq_create,
	.cq_destroy = ut_cq_destroy,
	.qp_create = ut_qp_create,
	.qp_num = ut_qp_num,
	.qp_connect = ut_qp_connect,
	.qp_reset = ut_qp_reset,
	.qp_destroy = ut_qp_destroy,
	.post = ut_post,
	.poll = ut_poll,
	.status_str = ut_status_str,
};

static const char *install_devices; /* tide_te_opts.rdma_devices for install() */
static int install_rc;
static char install_xport[32];

/* One engine, protocol rdma installed and destroyed again. */
static void
install(void)
{
	struct tide_te *te = te_ut_create_local(install_devices);

	if (te == NULL) {
		install_rc = -EINVAL;
		return;
	}
	install_rc = tide_te_install_transport(te, "rdma");
	snprintf(install_xport, sizeof(install_xport), "%s", tide_te_transport_name(te));
	tide_te_destroy(te);
}

/* First: nothing is registered yet in this process. */
static void
test_install_without_driver(void)
{
	char log[8192];

	CU_ASSERT_PTR_NULL(tide_rdma_dev_get());
	unsetenv("TIDE_RDMA_AS_TCP");
	tide_ut_capture_stderr(install, log, sizeof(log));
	CU_ASSERT_EQUAL(install_rc, -EPROTONOSUPPORT);
	CU_ASSERT_STRING_EQUAL(install_xport, ""); /* nothing half-installed */
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "no verbs driver linked into this program"));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "tide_vrb_rdma_dep"));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "TIDE_RDMA_AS_TCP=1"));

	/* The node's switch serves protocol rdma over TCP instead. */
	setenv("TIDE_RDMA_AS_TCP", "1", 1);
	tide_ut_capture_stderr(install, log, sizeof(log));
	unsetenv("TIDE_RDMA_AS_TCP");
	CU_ASSERT_EQUAL(install_rc, 0);
	CU_ASSERT_STRING_EQUAL(install_xport, "tcp-kernel");
}

static void
test_register_refuses_incomplete(void)
{
	struct tide_rdma_dev_ops o = ut_ops;

	CU_ASSERT_EQUAL(tide_rdma_dev_register(NULL), -EINVAL);
	o.name = NULL;
	CU_ASSERT_EQUAL(tide_rdma_dev_register(&o), -EINVAL);
	o = ut_ops;
	o.open = NULL;
	CU_ASSERT_EQUAL(tide_rdma_dev_register(&o), -EINVAL);
	o = ut_ops;
	o.post = NULL;
	CU_ASSERT_EQUAL(tide_rdma_dev_register(&o), -EINVAL);
	o = ut_ops;
	o.status_str = NULL;
	CU_ASSERT_EQUAL(tide_rdma_dev_register(&o), -EINVAL);
	CU_ASSERT_PTR_NULL(tide_rdma_dev_get());
}

static void
test_register_once(void)
{
	static const struct tide_rdma_dev_ops other = {0};
	struct tide_rdma_dev_ops copy = ut_ops;

	TIDE_UT_OK(tide_rdma_dev_register(&ut_ops));
	TIDE_UT_OK(tide_rdma_dev_register(&ut_ops)); /* the same table again: no-op */
	CU_ASSERT_EQUAL(tide_rdma_dev_register(&copy), -EEXIST);
	CU_ASSERT_EQUAL(tide_rdma_dev_register(&other), -EINVAL);
	CU_ASSERT_PTR_EQUAL(tide_rdma_dev_get(), &ut_ops);
}

/* The transport hands the driver the node's settings, MOONCAKE_DEVICE's override first. */
static void
test_open_gets_settings(void)
{
	char log[8192];

	fake.rc = -ENOMEM;
	fake.err = "ut: out of memory";
	fake.opens = 0;
	install_devices = "ut_0,ut_1";
	setenv("MC_IB_PORT", "2", 1);
	setenv("MC_GID_INDEX", "3", 1);
	setenv("MC_MTU", "1500", 1);
	tide_ut_capture_stderr(install, log, sizeof(log));
	unsetenv("MC_IB_PORT");
	unsetenv("MC_GID_INDEX");
	unsetenv("MC_MTU");
	install_devices = NULL;
	CU_ASSERT_EQUAL(fake.opens, 1);
	CU_ASSERT_STRING_EQUAL(fake.cfg.devices, "ut_0,ut_1");
	CU_ASSERT_EQUAL(fake.cfg.port, 2);
	CU_ASSERT_EQUAL(fake.cfg.gid_index, 3);
	CU_ASSERT_EQUAL(fake.cfg.max_mtu, 1500);
	/* Any other failure is the driver's, returned as is. */
	CU_ASSERT_EQUAL(install_rc, -ENOMEM);
	CU_ASSERT_STRING_EQUAL(install_xport, "");
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "ut: out of memory"));

	/* Defaults: every device, port 1, the driver picks the address, MTU 4096. */
	tide_ut_capture_stderr(install, log, sizeof(log));
	CU_ASSERT_STRING_EQUAL(fake.cfg.devices, "");
	CU_ASSERT_EQUAL(fake.cfg.port, 1);
	CU_ASSERT_EQUAL(fake.cfg.gid_index, -1);
	CU_ASSERT_EQUAL(fake.cfg.max_mtu, 4096);
}

/*
 * No verbs library and no device are "no RDMA here": refused with the driver's
 * line and the TCP switch named, or served over TCP with the switch. Devices
 * that exist but not as named are a broken set-up the switch does not hide.
 */
static void
test_open_failures(void)
{
	static const struct {
		int rc;
		const char *err;
		int want, want_as_tcp;
	} cases[] = {
		{-ELIBACC, "cannot load libibverbs.so.1", -EPROTONOSUPPORT, 0},
		{-ENXIO, "no RDMA device found", -EPROTONOSUPPORT, 0},
		{-ENODEV, "no device 'mlx5_7' (this node has ut_0)", -EPROTONOSUPPORT, -ENODEV},
	};
	char log[8192];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fake.rc = cases[i].rc;
		fake.err = cases[i].err;
		tide_ut_capture_stderr(install, log, sizeof(log));
		CU_ASSERT_EQUAL(install_rc, cases[i].want);
		CU_ASSERT_STRING_EQUAL(install_xport, "");
		CU_ASSERT_PTR_NOT_NULL(strstr(log, cases[i].err));
		CU_ASSERT_PTR_NOT_NULL(strstr(log, "TIDE_RDMA_AS_TCP=1"));

		setenv("TIDE_RDMA_AS_TCP", "1", 1);
		tide_ut_capture_stderr(install, log, sizeof(log));
		unsetenv("TIDE_RDMA_AS_TCP");
		CU_ASSERT_EQUAL(install_rc, cases[i].want_as_tcp);
		CU_ASSERT_STRING_EQUAL(install_xport,
				       cases[i].want_as_tcp == 0 ? "tcp-kernel" : "");
	}
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("rdma_dev", NULL, NULL);

	CU_add_test(s, "install_without_driver", test_install_without_driver);
	CU_add_test(s, "register_refuses_incomplete", test_register_refuses_incomplete);
	CU_add_test(s, "register_once", test_register_once);
	CU_add_test(s, "open_gets_settings", test_open_gets_settings);
	CU_add_test(s, "open_failures", test_open_failures);
}

TIDE_UT_MAIN(register_tests)
