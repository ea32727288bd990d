/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pmd/verbs/vrb_qp.c: CQs, RC QPs and their transitions, exercised over the
 * verbs double with two devices standing for two nodes: WRITE and READ between
 * registered regions, completions, error completions, rkey violations, a QP
 * forced into error and re-established.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tide_ut.h"
#include "tide_vrb.h"
#include "vdbl.h"

struct side {
	struct tide_vrb *v;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct tide_vrb_mr *mr;
	uint8_t *buf;
};

static struct side a, b;

static void
side_open(struct side *s, const char *dev)
{
	struct tide_vrb_cfg cfg;

	tide_vrb_cfg_init(&cfg, sizeof(cfg));
	cfg.devices = dev;
	TIDE_UT_OK(tide_vrb_open(vdbl_ops(), &cfg, &s->v, NULL, 0));
	TIDE_UT_OK(tide_vrb_cq_create(s->v, 0, 64, &s->cq));
	TIDE_UT_OK(tide_vrb_qp_create(s->v, 0, s->cq, 16, s, &s->qp));
	s->buf = calloc(1, 65536);
	TIDE_UT_OK(tide_vrb_mr_reg(s->v, s->buf, 65536, &s->mr));
}

static struct tide_vrb_remote
remote_of(const struct side *s)
{
	struct tide_vrb_remote r = {.gid = tide_vrb_dev(s->v, 0)->gid,
				    .lid = tide_vrb_dev(s->v, 0)->lid,
				    .qp_num = s->qp->qp_num};
	return r;
}

static void
connect_both(void)
{
	struct tide_vrb_remote ra = remote_of(&a), rb = remote_of(&b);
	char why[256] = "";

	TIDE_UT_OK(tide_vrb_qp_connect(a.v, 0, a.qp, &rb, why, sizeof(why)));
	TIDE_UT_OK(tide_vrb_qp_connect(b.v, 0, b.qp, &ra, why, sizeof(why)));
}

static int
setup(void)
{
	vdbl_reset();
	vdbl_add_roce("dbl_a", 0, 0x0a000001);
	vdbl_add_roce("dbl_b", 0, 0x0a000002);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	side_open(&a, "dbl_a");
	side_open(&b, "dbl_b");
	return 0;
}

static void
side_close(struct side *s)
{
	tide_vrb_mr_dereg(s->v, s->mr);
	TIDE_UT_OK(tide_vrb_qp_destroy(s->v, s->qp));
	TIDE_UT_OK(tide_vrb_cq_destroy(s->v, s->cq));
	tide_vrb_close(s->v);
	free(s->buf);
}

static int
teardown(void)
{
	struct vdbl_stats st;

	side_close(&a);
	side_close(&b);
	vdbl_stats_get(&st);
	return st.live_qp + st.live_cq + st.live_mr + st.live_pd + st.live_ctx == 0 ? 0 : -1;
}

static int
post(struct side *s, enum ibv_wr_opcode op, uint64_t wr_id, size_t loff, void *raddr, uint32_t rkey,
     uint32_t len, bool signaled)
{
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(s->buf + loff),
			      .length = len,
			      .lkey = s->mr->mr[0]->lkey};
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)raddr;
	wr.wr.rdma.rkey = rkey;
	return tide_vrb_ops_of(s->v)->post_send(s->qp, &wr, &bad);
}

static int
poll1(struct side *s, struct ibv_wc *wc)
{
	return tide_vrb_ops_of(s->v)->poll_cq(s->cq, 1, wc);
}

static void
test_qp_post_before_rts_refused(void)
{
	struct ibv_wc wc;

	setup();
	CU_ASSERT_EQUAL(post(&a, IBV_WR_RDMA_WRITE, 1, 0, b.buf, b.mr->mr[0]->rkey, 8, true),
			EINVAL);
	CU_ASSERT_EQUAL(poll1(&a, &wc), 0);
	CU_ASSERT_EQUAL(teardown(), 0);
}

static void
test_qp_write_read_roundtrip(void)
{
	struct ibv_wc wc;

	setup();
	connect_both();
	CU_ASSERT_EQUAL(vdbl_qp_state(a.qp->qp_num), IBV_QPS_RTS);
	memset(a.buf, 0xab, 4096);
	/* Unsignalled then signalled: one completion covers both. */
	TIDE_UT_OK(post(&a, IBV_WR_RDMA_WRITE, 1, 0, b.buf + 100, b.mr->mr[0]->rkey, 2048, false));
	TIDE_UT_OK(
		post(&a, IBV_WR_RDMA_WRITE, 2, 2048, b.buf + 2148, b.mr->mr[0]->rkey, 2048, true));
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.wr_id, 2);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc.opcode, IBV_WC_RDMA_WRITE);
	CU_ASSERT_EQUAL(poll1(&a, &wc), 0);
	CU_ASSERT_EQUAL(b.buf[100], 0xab);
	CU_ASSERT_EQUAL(b.buf[4195], 0xab);
	CU_ASSERT_EQUAL(b.buf[4196], 0);
	/* READ back into another place of a. */
	TIDE_UT_OK(post(&a, IBV_WR_RDMA_READ, 3, 8192, b.buf + 100, b.mr->mr[0]->rkey, 4096, true));
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.opcode, IBV_WC_RDMA_READ);
	CU_ASSERT_EQUAL(memcmp(a.buf, a.buf + 8192, 4096), 0);
	CU_ASSERT_EQUAL(teardown(), 0);
}

/* An rkey violation completes with REM_ACCESS_ERR even unsignalled, moves the
 * QP to ERR and flushes what follows; reconnecting makes it usable again. */
static void
test_qp_rkey_violation_then_reconnect(void)
{
	struct ibv_wc wc;

	setup();
	connect_both();
	TIDE_UT_OK(post(&a, IBV_WR_RDMA_WRITE, 7, 0, b.buf + 65000, b.mr->mr[0]->rkey, 4096,
			false)); /* past the region */
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.wr_id, 7);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_REM_ACCESS_ERR);
	CU_ASSERT_EQUAL(vdbl_qp_state(a.qp->qp_num), IBV_QPS_ERR);
	TIDE_UT_OK(post(&a, IBV_WR_RDMA_WRITE, 8, 0, b.buf, b.mr->mr[0]->rkey, 16, false));
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_WR_FLUSH_ERR);
	/* A wrong rkey (a's own key is not valid at b). */
	connect_both();
	TIDE_UT_OK(post(&a, IBV_WR_RDMA_READ, 9, 0, b.buf, a.mr->mr[0]->rkey, 16, true));
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_REM_ACCESS_ERR);
	/* Bad lkey: local protection error. */
	connect_both();
	{
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)a.buf, .length = 16, .lkey = 1};
		struct ibv_send_wr wr = {.wr_id = 10,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .sg_list = &sge,
					 .num_sge = 1},
				   *bad;

		wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)b.buf;
		wr.wr.rdma.rkey = b.mr->mr[0]->rkey;
		TIDE_UT_OK(tide_vrb_ops_of(a.v)->post_send(a.qp, &wr, &bad));
	}
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_LOC_PROT_ERR);
	/* Reconnected: works again. */
	connect_both();
	a.buf[0] = 0x5a;
	TIDE_UT_OK(post(&a, IBV_WR_RDMA_WRITE, 11, 0, b.buf, b.mr->mr[0]->rkey, 1, true));
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(b.buf[0], 0x5a);
	CU_ASSERT_EQUAL(teardown(), 0);
}

/* In-flight work on a QP forced into error (link loss) completes flushed. */
static void
test_qp_forced_error_flushes_inflight(void)
{
	struct ibv_wc wc[8];

	setup();
	connect_both();
	vdbl_set_deferred(true);
	for (int i = 0; i < 3; i++) {
		TIDE_UT_OK(post(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, 0, b.buf, b.mr->mr[0]->rkey, 64,
				i == 2));
	}
	CU_ASSERT_EQUAL(vdbl_pending(), 3);
	TIDE_UT_OK(vdbl_qp_force_error(a.qp->qp_num));
	CU_ASSERT_EQUAL(tide_vrb_ops_of(a.v)->poll_cq(a.cq, 8, wc), 3);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		CU_ASSERT_EQUAL(wc[i].wr_id, (uint64_t)i);
	}
	CU_ASSERT_EQUAL(vdbl_qp_force_error(12345), -ENOENT);
	vdbl_set_deferred(false);
	CU_ASSERT_EQUAL(teardown(), 0);
}

/* The peer QP not connected back (or gone): retry exceeded. */
static void
test_qp_peer_not_connected(void)
{
	struct tide_vrb_remote rb;
	struct ibv_wc wc;

	setup();
	rb = remote_of(&b);
	TIDE_UT_OK(tide_vrb_qp_connect(a.v, 0, a.qp, &rb, NULL, 0));
	TIDE_UT_OK(post(&a, IBV_WR_RDMA_WRITE, 1, 0, b.buf, b.mr->mr[0]->rkey, 8, false));
	CU_ASSERT_EQUAL(poll1(&a, &wc), 1);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_RETRY_EXC_ERR);
	CU_ASSERT_EQUAL(teardown(), 0);
}

static void
test_qp_connect_modify_failure_says_which(void)
{
	struct tide_vrb_remote rb;
	char why[256] = "";

	setup();
	rb = remote_of(&b);
	vdbl_fail_call(VDBL_MODIFY_QP, EINVAL, 1);
	CU_ASSERT_EQUAL(tide_vrb_qp_connect(a.v, 0, a.qp, &rb, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "-> RESET"));
	/* The refused move left the QP where it was. */
	CU_ASSERT_EQUAL(vdbl_qp_state(a.qp->qp_num), IBV_QPS_RESET);
	CU_ASSERT_EQUAL(teardown(), 0);
}

static void
test_gid_format_parse(void)
{
	union ibv_gid g, back;
	char s[TIDE_VRB_GID_STR_LEN];

	for (int i = 0; i < 16; i++) {
		g.raw[i] = (uint8_t)(i * 17);
	}
	tide_vrb_gid_format(&g, s);
	CU_ASSERT_EQUAL(strlen(s), 47);
	CU_ASSERT_STRING_EQUAL(s, "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff");
	TIDE_UT_OK(tide_vrb_gid_parse(s, &back));
	CU_ASSERT_EQUAL(memcmp(&g, &back, 16), 0);
	TIDE_UT_OK(tide_vrb_gid_parse("0:0:0:0:0:0:0:0:0:0:ff:ff:a:0:0:1", &back));
	CU_ASSERT_EQUAL(back.raw[12], 0x0a);
	CU_ASSERT_EQUAL(tide_vrb_gid_parse("00:11", &back), -EINVAL);
	CU_ASSERT_EQUAL(
		tide_vrb_gid_parse("00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00", &back),
		-EINVAL);
	CU_ASSERT_EQUAL(
		tide_vrb_gid_parse("zz:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff", &back),
		-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(tide_vrb_wc_status_str(IBV_WC_REM_ACCESS_ERR), "rkey"));
	CU_ASSERT_STRING_EQUAL(tide_vrb_wc_status_str(IBV_WC_SUCCESS), "success");
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("vrb_qp", NULL, NULL);

	CU_add_test(s, "test_qp_post_before_rts_refused", test_qp_post_before_rts_refused);
	CU_add_test(s, "test_qp_write_read_roundtrip", test_qp_write_read_roundtrip);
	CU_add_test(s, "test_qp_rkey_violation_then_reconnect",
		    test_qp_rkey_violation_then_reconnect);
	CU_add_test(s, "test_qp_forced_error_flushes_inflight",
		    test_qp_forced_error_flushes_inflight);
	CU_add_test(s, "test_qp_peer_not_connected", test_qp_peer_not_connected);
	CU_add_test(s, "test_qp_connect_modify_failure_says_which",
		    test_qp_connect_modify_failure_says_which);
	CU_add_test(s, "test_gid_format_parse", test_gid_format_parse);
}

TIDE_UT_MAIN(register_tests)
