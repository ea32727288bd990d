/* SPDX-License-Identifier: Apache-2.0 */
/* engine/te/rdma/te_rdma_hs.c: Mooncake's Connection handshake message. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "te_rdma.h"
#include "tide_ut.h"

static char err[256];

static int
dec(const char *j, struct te_rdma_hs *h)
{
	err[0] = '\0';
	return te_rdma_hs_decode(j, strlen(j), h, err, sizeof(err));
}

static void
test_hs_roundtrip(void)
{
	struct te_rdma_hs a = {.local_nic_path = "10.0.0.1:1234@mlx5_0",
			       .peer_nic_path = "10.0.0.2:5678@mlx5_3",
			       .has_lid = true,
			       .local_lid = 9,
			       .local_gid = "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01",
			       .nqp = 2,
			       .qp_num = {0x11, 0xffffff}},
			  b;
	char *j = NULL;

	TIDE_UT_OK(te_rdma_hs_encode(&a, &j));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"protocol\":\"rdma\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"qp_num\":[17,16777215]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"reply_msg\":\"\""));
	TIDE_UT_OK(dec(j, &b));
	CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof(a)), 0);
	free(j);
}

/* An older stock Mooncake request: no protocol/lid/gid, extra keys. */
static void
test_hs_stock_request(void)
{
	struct te_rdma_hs h;

	TIDE_UT_OK(dec("{\"local_nic_path\":\"a:1@mlx5_0\",\"peer_nic_path\":\"b:2@mlx5_1\","
		       "\"qp_num\":[300,301],\"reply_msg\":\"\",\"payload\":\"\"}",
		       &h));
	CU_ASSERT_FALSE(h.has_lid);
	CU_ASSERT_STRING_EQUAL(h.local_gid, "");
	CU_ASSERT_EQUAL(h.nqp, 2);
	CU_ASSERT_EQUAL(h.qp_num[1], 301);
	/* A refusal keeps its text, even when long. */
	{
		char big[1024];

		snprintf(big, sizeof(big), "{\"reply_msg\":\"%0600d\"}", 7);
		TIDE_UT_OK(dec(big, &h));
		CU_ASSERT_EQUAL(strlen(h.reply_msg), TE_RDMA_REPLY_MAX - 1);
	}
}

static void
test_hs_rejects(void)
{
	struct te_rdma_hs h;

	CU_ASSERT_EQUAL(dec("[]", &h), -EPROTO);
	CU_ASSERT_EQUAL(dec("{\"qp_num\":[1,-1]}", &h), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "qp_num[1]"));
	CU_ASSERT_EQUAL(dec("{\"qp_num\":[1,2,3,4,5,6,7,8,9]}", &h), -EPROTO);
	CU_ASSERT_EQUAL(dec("{\"qp_num\":\"x\"}", &h), -EPROTO);
	CU_ASSERT_EQUAL(dec("{\"local_lid\":70000}", &h), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "local_lid"));
	CU_ASSERT_EQUAL(dec("{\"local_nic_path\":5}", &h), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "local_nic_path"));
	CU_ASSERT_EQUAL(te_rdma_hs_decode("{}\0x", 4, &h, err, sizeof(err)), -EPROTO);
}

static void
test_nic_path_split(void)
{
	char seg[64], dev[16];

	TIDE_UT_OK(
		te_rdma_nic_path_split("10.0.0.1:1234@mlx5_0", seg, sizeof(seg), dev, sizeof(dev)));
	CU_ASSERT_STRING_EQUAL(seg, "10.0.0.1:1234");
	CU_ASSERT_STRING_EQUAL(dev, "mlx5_0");
	TIDE_UT_OK(te_rdma_nic_path_split("a@b@c", seg, sizeof(seg), dev, sizeof(dev)));
	CU_ASSERT_STRING_EQUAL(seg, "a@b");
	CU_ASSERT_EQUAL(te_rdma_nic_path_split("nodev", seg, sizeof(seg), dev, sizeof(dev)),
			-EINVAL);
	CU_ASSERT_EQUAL(te_rdma_nic_path_split("@x", seg, sizeof(seg), dev, sizeof(dev)), -EINVAL);
	CU_ASSERT_EQUAL(te_rdma_nic_path_split("x@", seg, sizeof(seg), dev, sizeof(dev)), -EINVAL);
	CU_ASSERT_EQUAL(
		te_rdma_nic_path_split("x@0123456789abcdef", seg, sizeof(seg), dev, sizeof(dev)),
		-EINVAL);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_rdma_hs", NULL, NULL);

	CU_add_test(s, "test_hs_roundtrip", test_hs_roundtrip);
	CU_add_test(s, "test_hs_stock_request", test_hs_stock_request);
	CU_add_test(s, "test_hs_rejects", test_hs_rejects);
	CU_add_test(s, "test_nic_path_split", test_nic_path_split);
}

TIDE_UT_MAIN(register_tests)
