/* SPDX-License-Identifier: Apache-2.0 */
/* pmd/verbs/vrb_dev.c: discovery, MOONCAKE_DEVICE lists, GID choice, NUMA, MRs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tide_ut.h"
#include "tide_vrb.h"
#include "vdbl.h"

static int
setup(void)
{
	vdbl_reset();
	return 0;
}

static int
open_list(const char *list, int gid_index, struct tide_vrb **v, char *err, size_t errlen)
{
	struct tide_vrb_cfg cfg;

	tide_vrb_cfg_init(&cfg, sizeof(cfg));
	cfg.devices = list;
	cfg.gid_index = gid_index;
	return tide_vrb_open(vdbl_ops(), &cfg, v, err, errlen);
}

static void
assert_all_closed(void)
{
	struct vdbl_stats st;

	vdbl_stats_get(&st);
	CU_ASSERT_EQUAL(st.live_ctx, 0);
	CU_ASSERT_EQUAL(st.live_pd, 0);
	CU_ASSERT_EQUAL(st.live_mr, 0);
}

static void
test_open_no_device(void)
{
	struct tide_vrb *v = NULL;
	char err[512] = "";

	vdbl_reset();
	CU_ASSERT_EQUAL(open_list(NULL, -1, &v, err, sizeof(err)), -ENODEV);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "MOONCAKE_PROTOCOL=tcp"));
	CU_ASSERT_PTR_NULL(v);
}

static void
test_open_all_skips_down_ports(void)
{
	struct vdbl_dev_spec down = {.name = "mlx5_9", .down = true, .ngid = 0};
	struct tide_vrb *v = NULL;

	vdbl_reset();
	vdbl_add_roce("mlx5_0", 0, 0x0a000001);
	vdbl_add_device(&down);
	vdbl_add_roce("mlx5_1", 1, 0x0a000002);
	TIDE_UT_OK(open_list("", -1, &v, NULL, 0));
	CU_ASSERT_EQUAL(tide_vrb_ndev(v), 2);
	CU_ASSERT_STRING_EQUAL(tide_vrb_dev(v, 0)->name, "mlx5_0");
	CU_ASSERT_STRING_EQUAL(tide_vrb_dev(v, 1)->name, "mlx5_1");
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 1)->idx, 1);
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 1)->numa, 1);
	CU_ASSERT_PTR_NULL(tide_vrb_dev(v, 2));
	CU_ASSERT_EQUAL(tide_vrb_dev_find(v, "mlx5_1"), 1);
	CU_ASSERT_EQUAL(tide_vrb_dev_find(v, "mlx5_9"), -ENODEV);
	tide_vrb_close(v);
	assert_all_closed();
}

/* MOONCAKE_DEVICE: exactly the listed devices, in list order, each must exist. */
static void
test_open_list_order_and_missing(void)
{
	struct tide_vrb *v = NULL;
	char err[512] = "";

	vdbl_reset();
	vdbl_add_roce("mlx5_0", 0, 0x0a000001);
	vdbl_add_roce("mlx5_1", 0, 0x0a000002);
	vdbl_add_roce("mlx5_2", 0, 0x0a000003);
	TIDE_UT_OK(open_list(" mlx5_2 ,mlx5_0,mlx5_2", -1, &v, NULL, 0));
	CU_ASSERT_EQUAL(tide_vrb_ndev(v), 2);
	CU_ASSERT_STRING_EQUAL(tide_vrb_dev(v, 0)->name, "mlx5_2");
	CU_ASSERT_STRING_EQUAL(tide_vrb_dev(v, 1)->name, "mlx5_0");
	tide_vrb_close(v);

	CU_ASSERT_EQUAL(open_list("mlx5_0,mlx5_7", -1, &v, err, sizeof(err)), -ENODEV);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'mlx5_7'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "mlx5_0, mlx5_1, mlx5_2"));
	CU_ASSERT_EQUAL(open_list("mlx5_0,,mlx5_1", -1, &v, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(open_list("mlx5_0,", -1, &v, err, sizeof(err)), -EINVAL);
	assert_all_closed();
}

static void
test_open_listed_port_down_fails(void)
{
	struct vdbl_dev_spec down = {.name = "mlx5_0", .down = true};
	struct tide_vrb *v = NULL;
	char err[512] = "";

	vdbl_reset();
	vdbl_add_device(&down);
	CU_ASSERT_EQUAL(open_list("mlx5_0", -1, &v, err, sizeof(err)), -ENETDOWN);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not active"));
	assert_all_closed();
}

/* RoCE v2 with an IPv4-mapped address wins; an explicit MC_GID_INDEX is obeyed. */
static void
test_gid_choice(void)
{
	struct vdbl_dev_spec v1only = {.name = "rxe_v1", .ngid = 2};
	struct tide_vrb *v = NULL;
	char err[512] = "";

	vdbl_reset();
	vdbl_add_roce("mlx5_0", 0, 0x0a000001);
	TIDE_UT_OK(open_list("mlx5_0", -1, &v, NULL, 0));
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->gid_index, 3);
	CU_ASSERT_STRING_EQUAL(tide_vrb_dev(v, 0)->gid_str,
			       "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01");
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->lid, 0);
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->link_layer, IBV_LINK_LAYER_ETHERNET);
	tide_vrb_close(v);

	TIDE_UT_OK(open_list("mlx5_0", 1, &v, NULL, 0));
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->gid_index, 1);
	tide_vrb_close(v);
	CU_ASSERT_EQUAL(open_list("mlx5_0", 6, &v, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "MC_GID_INDEX"));

	/* Only RoCE v1 entries: the first non-zero one. */
	v1only.gid[1].raw[0] = 0xfe;
	v1only.roce_ver[0] = v1only.roce_ver[1] = 1;
	vdbl_add_device(&v1only);
	TIDE_UT_OK(open_list("rxe_v1", -1, &v, NULL, 0));
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->gid_index, 1);
	tide_vrb_close(v);
	assert_all_closed();
}

static void
test_gid_none_on_roce(void)
{
	struct vdbl_dev_spec empty = {.name = "mlx5_0", .ngid = 0};
	struct tide_vrb *v = NULL;
	char err[512] = "";

	vdbl_reset();
	vdbl_add_device(&empty);
	CU_ASSERT_EQUAL(open_list("mlx5_0", -1, &v, err, sizeof(err)), -EADDRNOTAVAIL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no usable GID"));
	assert_all_closed();
}

static void
test_infiniband_lid_and_mtu(void)
{
	struct vdbl_dev_spec ib = {
		.name = "mlx5_ib", .infiniband = true, .lid = 17, .ngid = 1, .mtu = IBV_MTU_2048};
	struct tide_vrb_cfg cfg;
	struct tide_vrb *v = NULL;

	vdbl_reset();
	ib.gid[0].raw[0] = 0xfe;
	vdbl_add_device(&ib);
	tide_vrb_cfg_init(&cfg, sizeof(cfg));
	cfg.max_mtu = IBV_MTU_1024;
	TIDE_UT_OK(tide_vrb_open(vdbl_ops(), &cfg, &v, NULL, 0));
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->lid, 17);
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->gid_index, 0);
	CU_ASSERT_EQUAL(tide_vrb_dev(v, 0)->mtu, IBV_MTU_1024);
	tide_vrb_close(v);
	cfg.port = 0;
	CU_ASSERT_EQUAL(tide_vrb_open(vdbl_ops(), &cfg, &v, NULL, 0), -EINVAL);
	assert_all_closed();
}

static void
test_open_device_failure_cleans_up(void)
{
	struct tide_vrb *v = NULL;
	char err[512] = "";

	vdbl_reset();
	vdbl_add_roce("mlx5_0", 0, 0x0a000001);
	vdbl_add_roce("mlx5_1", 0, 0x0a000002);
	vdbl_fail_call(VDBL_OPEN_DEVICE, EACCES, 1);
	CU_ASSERT_EQUAL(open_list("mlx5_0,mlx5_1", -1, &v, err, sizeof(err)), -EACCES);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "mlx5_0: open failed"));
	assert_all_closed();
	/* Without a list a device that fails to open is skipped. */
	vdbl_fail_call(VDBL_OPEN_DEVICE, EACCES, 1);
	TIDE_UT_OK(open_list(NULL, -1, &v, NULL, 0));
	CU_ASSERT_EQUAL(tide_vrb_ndev(v), 1);
	CU_ASSERT_STRING_EQUAL(tide_vrb_dev(v, 0)->name, "mlx5_1");
	tide_vrb_close(v);
	assert_all_closed();
}

static void
test_mr_reg_every_device_once(void)
{
	struct tide_vrb_mr *mr = NULL;
	struct tide_vrb *v = NULL;
	struct vdbl_stats st;
	char *buf = malloc(8192);

	vdbl_reset();
	vdbl_add_roce("mlx5_0", 0, 0x0a000001);
	vdbl_add_roce("mlx5_1", 0, 0x0a000002);
	TIDE_UT_OK(open_list(NULL, -1, &v, NULL, 0));
	TIDE_UT_OK(tide_vrb_mr_reg(v, buf, 8192, &mr));
	CU_ASSERT_EQUAL(mr->n, 2);
	CU_ASSERT_NOT_EQUAL(mr->mr[0]->rkey, mr->mr[1]->rkey);
	CU_ASSERT_PTR_EQUAL(mr->mr[1]->addr, buf);
	vdbl_stats_get(&st);
	CU_ASSERT_EQUAL(st.reg_mr, 2);
	tide_vrb_mr_dereg(v, mr);
	CU_ASSERT_EQUAL(tide_vrb_mr_reg(v, NULL, 10, &mr), -EINVAL);
	vdbl_fail_call(VDBL_REG_MR, ENOMEM, 1);
	CU_ASSERT_EQUAL(tide_vrb_mr_reg(v, buf, 8192, &mr), -ENOMEM);
	vdbl_stats_get(&st);
	CU_ASSERT_EQUAL(st.live_mr, 0);
	tide_vrb_close(v);
	assert_all_closed();
	free(buf);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("vrb_dev", setup, NULL);

	CU_add_test(s, "test_open_no_device", test_open_no_device);
	CU_add_test(s, "test_open_all_skips_down_ports", test_open_all_skips_down_ports);
	CU_add_test(s, "test_open_list_order_and_missing", test_open_list_order_and_missing);
	CU_add_test(s, "test_open_listed_port_down_fails", test_open_listed_port_down_fails);
	CU_add_test(s, "test_gid_choice", test_gid_choice);
	CU_add_test(s, "test_gid_none_on_roce", test_gid_none_on_roce);
	CU_add_test(s, "test_infiniband_lid_and_mtu", test_infiniband_lid_and_mtu);
	CU_add_test(s, "test_open_device_failure_cleans_up", test_open_device_failure_cleans_up);
	CU_add_test(s, "test_mr_reg_every_device_once", test_mr_reg_every_device_once);
}

TIDE_UT_MAIN(register_tests)
