/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/te/rdma/te_rdma.c through the public engine API, over the verbs
 * double: two engines in one process ("nodes" A with devices dbl_a0 and
 * dbl_a1, B with dbl_b0), P2PHANDSHAKE on loopback, real bytes moved between
 * their buffers by the double's RC emulation. Covers posting and polling,
 * batching and signalling, bounce buffers, error completions, rkey
 * violations, a QP forced into error with work in flight, reconnection,
 * transport choice per pair, the descriptor and the Connection handshake, that
 * protocol tcp never touches verbs, and polling on the lcores a TCP transport
 * lends (as user-space TCP does) instead of on workers of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "te_meta.h"
#include "te_rdma.h"
#include "te_ut.h"
#include "te_xport.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_te.h"
#include "tide_ut.h"
#include "tide_vrb.h"
#include "vdbl.h"

#define SEG_LEN (8u << 20)

struct node {
	struct tide_te *te;
	uint8_t *seg;   /* registered, published */
	uint8_t *local; /* tide_te_register_local()ed */
	uint16_t rpc_port;
};

static struct node a, b;
static const char *node_env_path; /* node file for node_up(); NULL: $TIDE_NODE_ENV */

static void
devices_reset(void)
{
	vdbl_reset();
	vdbl_add_roce("dbl_a0", 0, 0x0a000001);
	vdbl_add_roce("dbl_a1", 0, 0x0a000002);
	vdbl_add_roce("dbl_b0", 0, 0x0a000003);
	tide_vrb_glue_set(vdbl_ops());
}

static void
node_up(struct node *n, const char *devices, const char *proto)
{
	struct tide_te_opts o;

	memset(n, 0, sizeof(*n));
	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	o.rdma_devices = devices;
	o.node_env = node_env_path;
	o.slice_size = 256 << 10; /* several slices per request: spread over QPs */
	o.io_timeout_ms = 3000;
	TIDE_UT_OK(tide_te_create(&o, &n->te));
	TIDE_UT_OK(tide_te_install_transport(n->te, proto));
	n->seg = aligned_alloc(4096, SEG_LEN);
	n->local = aligned_alloc(4096, SEG_LEN);
	memset(n->seg, 0, SEG_LEN);
	memset(n->local, 0, SEG_LEN);
	TIDE_UT_OK(tide_te_register(n->te, n->seg, SEG_LEN, "cpu:0"));
	TIDE_UT_OK(tide_te_register_local(n->te, n->local, SEG_LEN));
	tide_te_local_addr(n->te, NULL, 0, &n->rpc_port, NULL);
}

static void
node_down(struct node *n)
{
	tide_te_destroy(n->te);
	free(n->seg);
	free(n->local);
	memset(n, 0, sizeof(*n));
}

static void
fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		p[i] = (uint8_t)(i * 31 + seed);
	}
}

/* One request; returns its final status. */
static struct tide_te_status
xfer(struct node *from, tide_te_seg_t seg, enum tide_te_op op, void *local, uint64_t remote,
     uint64_t len)
{
	struct tide_te_req r = {
		.op = op, .local = local, .seg = seg, .remote_addr = remote, .len = len};
	struct tide_te_status st = {.state = TIDE_TE_INVALID};
	tide_te_batch_t bt;

	TIDE_UT_OK(tide_te_batch_alloc(from->te, 4, &bt));
	TIDE_UT_OK(tide_te_submit(from->te, bt, &r, 1));
	TIDE_UT_OK(tide_te_wait(from->te, bt, 10000));
	TIDE_UT_OK(tide_te_status(from->te, bt, 0, &st));
	TIDE_UT_OK(tide_te_batch_free(from->te, bt));
	return st;
}

static tide_te_seg_t
open_seg(struct node *from, struct node *to)
{
	tide_te_seg_t seg = -1;

	TIDE_UT_OK(tide_te_open_segment(from->te, tide_te_local_name(to->te), &seg));
	return seg;
}

/* ---- protocol tcp never touches verbs --------------------------------------------- */

static bool
ibverbs_mapped(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		found |= strstr(line, "libibverbs") != NULL;
	}
	if (f != NULL) {
		fclose(f);
	}
	return found;
}

/* Runs first: no glue override yet, so any verbs use would dlopen the library. */
static void
test_tcp_never_touches_verbs(void)
{
	struct vdbl_stats st;
	struct tide_te_status s;

	node_up(&a, NULL, "tcp");
	node_up(&b, NULL, "tcp");
	fill(a.local, 65536, 1);
	s = xfer(&a, open_seg(&a, &b), TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 65536);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg, 65536), 0);
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(a.te), "tcp-kernel");
	node_down(&a);
	node_down(&b);
	CU_ASSERT_EQUAL(tide_vrb_glue_dlopen_count(), 0);
	CU_ASSERT_FALSE(ibverbs_mapped());
	/* With the double installed: not one device is opened either. */
	devices_reset();
	node_up(&a, NULL, "tcp");
	node_down(&a);
	vdbl_stats_get(&st);
	CU_ASSERT_EQUAL(st.open_device, 0);
	CU_ASSERT_EQUAL(st.reg_mr, 0);
}

/* ---- set-up without a device --------------------------------------------------------- */

static int setup_rc;

static void
try_rdma_install(void)
{
	struct tide_te *te = te_ut_create_local(NULL);

	setup_rc = tide_te_install_transport(te, "rdma");
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(te), ""); /* nothing half-installed */
	tide_te_destroy(te);
}

static void
test_rdma_without_device_fails_clearly(void)
{
	char log[8192];

	vdbl_reset(); /* no devices at all */
	tide_vrb_glue_set(vdbl_ops());
	tide_ut_capture_stderr(try_rdma_install, log, sizeof(log));
	CU_ASSERT_EQUAL(setup_rc, -EPROTONOSUPPORT);
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "no RDMA device found"));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "MOONCAKE_PROTOCOL=tcp"));

	/* A device named in MOONCAKE_DEVICE that this node lacks. */
	devices_reset();
	setenv("MOONCAKE_DEVICE", "mlx5_7", 1);
	tide_ut_capture_stderr(try_rdma_install, log, sizeof(log));
	unsetenv("MOONCAKE_DEVICE");
	CU_ASSERT_EQUAL(setup_rc, -EPROTONOSUPPORT);
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "'mlx5_7'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "dbl_a0"));
}

/* ---- data path ------------------------------------------------------------------------- */

static void
pair_up(void)
{
	devices_reset();
	node_up(&a, "dbl_a0,dbl_a1", "rdma");
	node_up(&b, "dbl_b0", "rdma");
}

static void
pair_down(void)
{
	struct vdbl_stats st;

	node_down(&a);
	node_down(&b);
	vdbl_stats_get(&st);
	CU_ASSERT_EQUAL(st.live_qp, 0);
	CU_ASSERT_EQUAL(st.live_cq, 0);
	CU_ASSERT_EQUAL(st.live_mr, 0);
	CU_ASSERT_EQUAL(st.live_pd, 0);
	CU_ASSERT_EQUAL(st.live_ctx, 0);
}

static void
test_rdma_write_read_registered(void)
{
	struct vdbl_stats before, after;
	struct tide_te_status s;
	tide_te_seg_t seg;
	const uint64_t len = 3u << 20; /* 12 slices of 256 KiB over 2 devices x 2 QPs */

	pair_up();
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(a.te), "rdma");
	seg = open_seg(&a, &b);
	vdbl_stats_get(&before);
	fill(a.local, len, 7);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg + 4096, len);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(s.transferred, len);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg + 4096, len), 0);
	s = xfer(&a, seg, TIDE_TE_READ, a.local + len, (uint64_t)(uintptr_t)b.seg + 4096, len);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, a.local + len, len), 0);
	/* Local source in A's own segment works too (segment buffers have lkeys). */
	fill(a.seg, 65536, 9);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.seg, (uint64_t)(uintptr_t)b.seg, 65536);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.seg, b.seg, 65536), 0);
	vdbl_stats_get(&after);
	/* Nothing registered per transfer; work went out as RDMA WRs in batches. */
	CU_ASSERT_EQUAL(after.reg_mr, before.reg_mr);
	CU_ASSERT(after.wrs_posted - before.wrs_posted >= 25);
	CU_ASSERT(after.post_send_calls - before.post_send_calls <
		  after.wrs_posted - before.wrs_posted);
	/* Fewer completions than WRs: only every 16th and the last of a burst signal. */
	CU_ASSERT(after.wcs_generated - before.wcs_generated <=
		  after.wrs_posted - before.wrs_posted);
	/* Both of A's devices carried traffic: 2 devices x 2 QPs on A's side. */
	{
		uint32_t q[16];

		CU_ASSERT(vdbl_requester_qps(q, 16) >= 4);
	}
	pair_down();
}

static void
test_rdma_unregistered_local_bounces(void)
{
	struct vdbl_stats s1, s2, s3;
	struct tide_te_status s;
	tide_te_seg_t seg;
	uint8_t *plain = malloc(1 << 20), *back = malloc(1 << 20);

	pair_up();
	seg = open_seg(&a, &b);
	fill(plain, 1 << 20, 3);
	vdbl_stats_get(&s1);
	s = xfer(&a, seg, TIDE_TE_WRITE, plain, (uint64_t)(uintptr_t)b.seg, 1 << 20);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(plain, b.seg, 1 << 20), 0);
	vdbl_stats_get(&s2);
	/* The staging area is registered once per worker (one MR per device). */
	CU_ASSERT(s2.reg_mr - s1.reg_mr <= 2);
	s = xfer(&a, seg, TIDE_TE_READ, back, (uint64_t)(uintptr_t)b.seg, 1 << 20);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(plain, back, 1 << 20), 0);
	vdbl_stats_get(&s3);
	CU_ASSERT_EQUAL(s3.reg_mr, s2.reg_mr);
	pair_down();
	free(plain);
	free(back);
}

/* ---- errors and reconnection ------------------------------------------------------------- */

static void
test_rdma_error_completion_then_reconnect(void)
{
	struct vdbl_stats s1, s2;
	struct tide_te_status s;
	tide_te_seg_t seg;

	pair_up();
	seg = open_seg(&a, &b);
	fill(a.local, 4096, 5);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	vdbl_stats_get(&s1);
	vdbl_inject_wc_error(IBV_WC_RETRY_EXC_ERR, 0);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_FAILED);
	CU_ASSERT_EQUAL(s.error, -ECONNRESET);
	/* The broken QPs are torn down and new ones connected; the next request works. */
	fill(a.local, 4096, 6);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg, 4096), 0);
	/* The request may have gone over the other device's endpoint while the CM
	 * thread still rebuilds the broken one: wait for it. */
	vdbl_stats_get(&s2);
	for (int i = 0;
	     i < 2000 && (s2.destroy_qp <= s1.destroy_qp || s2.create_qp <= s1.create_qp); i++) {
		usleep(1000);
		vdbl_stats_get(&s2);
	}
	CU_ASSERT(s2.destroy_qp > s1.destroy_qp);
	CU_ASSERT(s2.create_qp > s1.create_qp);
	pair_down();
}

static void
test_rdma_rkey_violation(void)
{
	struct tide_te_status s;
	tide_te_seg_t seg;

	pair_up();
	seg = open_seg(&a, &b);
	/* B drops its buffer's keys; A still holds B's old descriptor. */
	TIDE_UT_OK(tide_te_unregister(b.te, b.seg));
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_FAILED);
	CU_ASSERT_EQUAL(s.error, -EFAULT);
	/* B registers again (new keys): A refreshes the descriptor and reconnects. */
	TIDE_UT_OK(tide_te_register(b.te, b.seg, SEG_LEN, "cpu:0"));
	fill(a.local, 4096, 11);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg, 4096), 0);
	pair_down();
}

static void
test_rdma_qp_forced_error_inflight(void)
{
	struct tide_te_req r[4];
	struct tide_te_status st;
	uint32_t qpn[16];
	tide_te_batch_t bt;
	tide_te_seg_t seg;
	unsigned n;

	pair_up();
	seg = open_seg(&a, &b);
	/* Connect first, then hold WRs in flight. */
	st = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 1 << 20);
	CU_ASSERT_EQUAL(st.state, TIDE_TE_COMPLETED);
	vdbl_set_deferred(true);
	for (int i = 0; i < 4; i++) {
		r[i] = (struct tide_te_req){.op = TIDE_TE_WRITE,
					    .local = a.local + i * 65536,
					    .seg = seg,
					    .remote_addr = (uint64_t)(uintptr_t)b.seg + i * 65536,
					    .len = 65536};
	}
	TIDE_UT_OK(tide_te_batch_alloc(a.te, 4, &bt));
	TIDE_UT_OK(tide_te_submit(a.te, bt, r, 4));
	for (int i = 0; i < 2000 && vdbl_pending() < 4; i++) {
		usleep(1000);
	}
	CU_ASSERT_EQUAL(vdbl_pending(), 4);
	TIDE_UT_OK(tide_te_status(a.te, bt, 0, &st));
	CU_ASSERT_EQUAL(st.state, TIDE_TE_PENDING);
	/* The link drops: every requester QP goes to ERR. */
	n = vdbl_requester_qps(qpn, 16);
	CU_ASSERT(n >= 1);
	for (unsigned i = 0; i < n; i++) {
		TIDE_UT_OK(vdbl_qp_force_error(qpn[i]));
	}
	TIDE_UT_OK(tide_te_wait(a.te, bt, 10000));
	for (uint32_t i = 0; i < 4; i++) {
		TIDE_UT_OK(tide_te_status(a.te, bt, i, &st));
		CU_ASSERT_EQUAL(st.state, TIDE_TE_FAILED);
		CU_ASSERT_EQUAL(st.error, -ECONNRESET);
	}
	TIDE_UT_OK(tide_te_batch_free(a.te, bt));
	vdbl_set_deferred(false);
	/* Re-established: the same transfer now goes through. */
	fill(a.local, 65536, 13);
	st = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 65536);
	CU_ASSERT_EQUAL(st.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg, 65536), 0);
	pair_down();
}

/* A peer whose QPs never answer: the request times out, it does not hang. */
static void
test_rdma_no_completion_times_out(void)
{
	struct tide_te_status st;
	tide_te_seg_t seg;

	pair_up();
	seg = open_seg(&a, &b);
	st = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(st.state, TIDE_TE_COMPLETED);
	vdbl_set_deferred(true); /* WRs never run */
	st = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(st.state, TIDE_TE_TIMEOUT);
	vdbl_set_deferred(false);
	vdbl_progress();
	st = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 4096);
	CU_ASSERT_EQUAL(st.state, TIDE_TE_COMPLETED);
	pair_down();
}

/* ---- transport choice, descriptor, handshake ------------------------------------------- */

static void
test_pair_picks_best_common_transport(void)
{
	struct vdbl_stats s1, s2;
	struct tide_te_status st;

	devices_reset();
	node_up(&a, "dbl_a0", "rdma");
	node_up(&b, NULL, "tcp"); /* B has no RDMA */
	vdbl_stats_get(&s1);
	fill(a.local, 65536, 21);
	st = xfer(&a, open_seg(&a, &b), TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, 65536);
	CU_ASSERT_EQUAL(st.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg, 65536), 0);
	/* ... and B (tcp only) reaches A over A's TCP server. */
	fill(b.local, 65536, 22);
	st = xfer(&b, open_seg(&b, &a), TIDE_TE_WRITE, b.local, (uint64_t)(uintptr_t)a.seg, 65536);
	CU_ASSERT_EQUAL(st.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(b.local, a.seg, 65536), 0);
	vdbl_stats_get(&s2);
	CU_ASSERT_EQUAL(s2.wrs_posted, s1.wrs_posted); /* all of it over TCP */
	node_down(&a);
	node_down(&b);
}

static void
test_descriptor_advertises_rdma_and_tcp(void)
{
	struct te_desc *d = NULL;
	char *reply = NULL;
	size_t rlen = 0;

	pair_up();
	TIDE_UT_OK(te_hs_request("127.0.0.1", a.rpc_port, TE_HS_METADATA, "{}", 2, 3000, &reply,
				 &rlen));
	TIDE_UT_OK(te_desc_decode(reply, rlen, &d, NULL, 0));
	CU_ASSERT_STRING_EQUAL(d->protocol, "rdma");
	CU_ASSERT_TRUE(te_desc_is_rdma(d));
	CU_ASSERT_NOT_EQUAL(d->tcp_data_port, 0);
	CU_ASSERT_EQUAL(d->ndevs, 2);
	CU_ASSERT_STRING_EQUAL(d->devs[1].name, "dbl_a1");
	CU_ASSERT_STRING_EQUAL(d->devs[0].gid, "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01");
	CU_ASSERT_EQUAL(d->nbufs, 1); /* the local-only buffer is not published */
	CU_ASSERT_EQUAL(d->bufs[0].nkeys, 2);
	CU_ASSERT_NOT_EQUAL(d->bufs[0].rkey[0], d->bufs[0].rkey[1]);
	te_desc_free(d);
	free(reply);
	pair_down();
}

/* A stock Mooncake node's requests, sent by hand to B's daemon. */
static void
test_connection_handshake_as_stock_peer(void)
{
	struct te_rdma_hs req = {.nqp = 2, .qp_num = {0x500, 0x501}}, rep;
	char *j = NULL, *reply = NULL, seg[TE_NAME_MAX];
	size_t rlen = 0;

	pair_up();
	snprintf(seg, sizeof(seg), "%s", tide_te_local_name(b.te));
	/* Older Mooncake: no local_gid; B looks dbl_a0 up in A's descriptor. */
	snprintf(req.local_nic_path, sizeof(req.local_nic_path), "%s@dbl_a0",
		 tide_te_local_name(a.te));
	snprintf(req.peer_nic_path, sizeof(req.peer_nic_path), "%s@dbl_b0", seg);
	TIDE_UT_OK(te_rdma_hs_encode(&req, &j));
	TIDE_UT_OK(te_hs_request("127.0.0.1", b.rpc_port, TE_HS_CONNECTION, j, strlen(j), 3000,
				 &reply, &rlen));
	TIDE_UT_OK(te_rdma_hs_decode(reply, rlen, &rep, NULL, 0));
	CU_ASSERT_STRING_EQUAL(rep.reply_msg, "");
	CU_ASSERT_STRING_EQUAL(rep.local_nic_path, req.peer_nic_path);
	CU_ASSERT_STRING_EQUAL(rep.peer_nic_path, req.local_nic_path);
	CU_ASSERT_EQUAL(rep.nqp, 2);
	CU_ASSERT_NOT_EQUAL(rep.qp_num[0], 0);
	CU_ASSERT_EQUAL(vdbl_qp_state(rep.qp_num[0]), IBV_QPS_RTS);
	free(j);
	free(reply);
	/* Refusals carry a reason: wrong device, QP count mismatch. */
	snprintf(req.peer_nic_path, sizeof(req.peer_nic_path), "%s@mlx5_9", seg);
	TIDE_UT_OK(te_rdma_hs_encode(&req, &j));
	TIDE_UT_OK(te_hs_request("127.0.0.1", b.rpc_port, TE_HS_CONNECTION, j, strlen(j), 3000,
				 &reply, &rlen));
	TIDE_UT_OK(te_rdma_hs_decode(reply, rlen, &rep, NULL, 0));
	CU_ASSERT_PTR_NOT_NULL(strstr(rep.reply_msg, "no local NIC"));
	free(j);
	free(reply);
	snprintf(req.peer_nic_path, sizeof(req.peer_nic_path), "%s@dbl_b0", seg);
	req.nqp = 3;
	TIDE_UT_OK(te_rdma_hs_encode(&req, &j));
	TIDE_UT_OK(te_hs_request("127.0.0.1", b.rpc_port, TE_HS_CONNECTION, j, strlen(j), 3000,
				 &reply, &rlen));
	TIDE_UT_OK(te_rdma_hs_decode(reply, rlen, &rep, NULL, 0));
	CU_ASSERT_PTR_NOT_NULL(strstr(rep.reply_msg, "MC_NUM_QP_PER_EP"));
	free(j);
	free(reply);
	pair_down();
}

static void
test_register_local_rules(void)
{
	uint8_t *buf = malloc(1 << 16);

	pair_up();
	CU_ASSERT_EQUAL(tide_te_register_local(a.te, NULL, 10), -EINVAL);
	/* Inside a registered segment buffer: accepted, nothing new. */
	TIDE_UT_OK(tide_te_register_local(a.te, a.seg + 4096, 4096));
	CU_ASSERT_EQUAL(tide_te_register_local(a.te, a.local + 10, 10), -EEXIST);
	CU_ASSERT_EQUAL(tide_te_register_local(a.te, a.seg + SEG_LEN - 10, 20), -EEXIST);
	TIDE_UT_OK(tide_te_register_local(a.te, buf, 1 << 16));
	TIDE_UT_OK(tide_te_unregister_local(a.te, buf));
	TIDE_UT_OK(tide_te_unregister_local(a.te, a.seg + 4096));
	CU_ASSERT_EQUAL(tide_te_unregister_local(a.te, buf), -ENOENT);
	pair_down();
	free(buf);
}

/* ---- polling on lent lcores (user-space TCP's) -------------------------------------------- */

/*
 * What tcp-dpdk lends, without DPDK: each node's TCP transport is kernel sockets
 * wrapped so that ->lcores hands out a running lcore group this test owns (node
 * i gets group i), and the verbs table's poll_cq is wrapped to see which lcore
 * polls. A ticker poller on each group shows the group itself keeps running.
 */
#define SHARE_NODES 2

static struct {
	struct tide_lcore_group *g[SHARE_NODES];
	struct te_xport *x[SHARE_NODES];
	atomic_uint_fast64_t polls[SHARE_NODES]; /* CQ polls on group i's lcores */
	atomic_uint_fast64_t polls_elsewhere;    /* on any other thread */
	atomic_uint_fast64_t ticks[SHARE_NODES];
	bool quiet_at_tcp_destroy[SHARE_NODES]; /* no CQ poll while TCP was destroyed */
} sh;

static struct te_xport_ops share_tcp_ops;
static struct tide_vrb_ops share_vrb_ops;

static int
share_group_of(const struct tide_lcore *lc)
{
	for (int i = 0; lc != NULL && i < SHARE_NODES; i++) {
		for (unsigned k = 0; sh.g[i] != NULL && k < tide_lcore_count(sh.g[i]); k++) {
			if (tide_lcore_get(sh.g[i], k) == lc) {
				return i;
			}
		}
	}
	return -1;
}

static int
share_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int i = share_group_of(tide_lcore_current());

	atomic_fetch_add(i < 0 ? &sh.polls_elsewhere : &sh.polls[i], 1);
	return vdbl_ops()->poll_cq(cq, n, wc);
}

static int
share_tick(void *ctx, uint64_t now)
{
	(void)now;
	atomic_fetch_add((atomic_uint_fast64_t *)ctx, 1);
	return 0;
}

static int
share_tcp_create(const struct te_xport_cfg *cfg, struct te_xport **out)
{
	int rc = te_tcp_kernel_ops.create(cfg, out);

	for (int i = 0; rc == 0 && i < SHARE_NODES; i++) {
		if (sh.x[i] == NULL) {
			sh.x[i] = *out;
			break;
		}
	}
	return rc;
}

static struct tide_lcore_group *
share_tcp_lcores(struct te_xport *x)
{
	for (int i = 0; i < SHARE_NODES; i++) {
		if (sh.x[i] == x) {
			return sh.g[i];
		}
	}
	return NULL;
}

static void
share_tcp_destroy(struct te_xport *x)
{
	for (int i = 0; i < SHARE_NODES; i++) {
		if (sh.x[i] == x) {
			uint64_t p = atomic_load(&sh.polls[i]);

			/* The engine destroyed the RDMA transport first: it polls no more. */
			usleep(20000);
			sh.quiet_at_tcp_destroy[i] = atomic_load(&sh.polls[i]) == p;
			sh.x[i] = NULL;
		}
	}
	te_tcp_kernel_ops.destroy(x);
}

static void
share_nodes_up(void)
{
	node_up(&a, "dbl_a0,dbl_a1", "rdma");
	node_up(&b, "dbl_b0", "rdma");
}

static void
share_node_a_up(void)
{
	node_up(&a, "dbl_a0", "rdma");
}

static void
share_with_info_log(void (*fn)(void), char *buf, size_t len)
{
	enum tide_log_level lvl = tide_log_get_level();

	tide_log_set_level(TIDE_LOG_INFO);
	tide_ut_capture_stderr(fn, buf, len);
	tide_log_set_level(lvl);
}

/* Node i went down: its lcores never poll its CQs again, and keep running. */
static void
share_check_gone(int i)
{
	struct tide_lcore_stats st0, st1;
	uint64_t polls = atomic_load(&sh.polls[i]), ticks = atomic_load(&sh.ticks[i]);

	CU_ASSERT_TRUE(sh.quiet_at_tcp_destroy[i]);
	tide_lcore_stats_get(tide_lcore_get(sh.g[i], 0), &st0);
	usleep(50000);
	tide_lcore_stats_get(tide_lcore_get(sh.g[i], 0), &st1);
	CU_ASSERT_EQUAL(atomic_load(&sh.polls[i]), polls);
	CU_ASSERT_TRUE(st1.iterations > st0.iterations);
	CU_ASSERT_TRUE(atomic_load(&sh.ticks[i]) > ticks);
}

static void
test_rdma_polls_on_lent_lcores(void)
{
	struct tide_lcore_opts lo;
	struct tide_te_status s;
	struct vdbl_stats vs;
	char log[16384];
	const uint64_t len = 3u << 20; /* slices over both of A's devices and lcores */
	uint64_t polls_b;
	tide_te_seg_t seg;
	cpu_set_t set;
	int cpus[2] = {0, 0};

	memset(&sh, 0, sizeof(sh));
	CU_ASSERT_EQUAL_FATAL(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int c = CPU_SETSIZE - 1; c >= 0; c--) {
		if (CPU_ISSET(c, &set)) {
			cpus[0] = cpus[1] = c;
		}
	}
	devices_reset();
	share_vrb_ops = *vdbl_ops();
	share_vrb_ops.poll_cq = share_poll_cq;
	tide_vrb_glue_set(&share_vrb_ops);
	share_tcp_ops = te_tcp_kernel_ops;
	share_tcp_ops.create = share_tcp_create;
	share_tcp_ops.lcores = share_tcp_lcores;
	share_tcp_ops.destroy = share_tcp_destroy;
	te_engine_tcp_ops_override(&share_tcp_ops);
	/* A lends two lcores (one per device), B one; both run before the engines start. */
	for (int i = 0; i < SHARE_NODES; i++) {
		tide_lcore_opts_init(&lo, sizeof(lo));
		TIDE_UT_OK(tide_lcore_group_create(&lo, cpus, i == 0 ? 2 : 1, &sh.g[i]));
		TIDE_UT_OK(tide_lcore_poller_add(tide_lcore_get(sh.g[i], 0), share_tick,
						 &sh.ticks[i]));
		TIDE_UT_OK(tide_lcore_group_start(sh.g[i]));
	}

	share_with_info_log(share_nodes_up, log, sizeof(log));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "rdma: polling on the user-space TCP lcores (2)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "rdma: polling on the user-space TCP lcores (1)"));
	CU_ASSERT_PTR_NULL(strstr(log, "own workers"));
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(a.te), "rdma");

	seg = open_seg(&a, &b);
	fill(a.local, len, 31);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, len);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg, len), 0);
	s = xfer(&a, seg, TIDE_TE_READ, a.local + len, (uint64_t)(uintptr_t)b.seg, len);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, a.local + len, len), 0);
	/* Every CQ poll ran on a lent lcore, none on a thread of the transport's own. */
	CU_ASSERT_TRUE(atomic_load(&sh.polls[0]) > 0);
	CU_ASSERT_TRUE(atomic_load(&sh.polls[1]) > 0);
	CU_ASSERT_EQUAL(atomic_load(&sh.polls_elsewhere), 0);

	/* A goes: its pollers leave A's lcores, B's keep polling on B's. */
	node_down(&a);
	share_check_gone(0);
	polls_b = atomic_load(&sh.polls[1]);
	usleep(20000);
	CU_ASSERT_TRUE(atomic_load(&sh.polls[1]) > polls_b);
	node_down(&b);
	share_check_gone(1);
	vdbl_stats_get(&vs);
	CU_ASSERT_EQUAL(vs.live_qp, 0);
	CU_ASSERT_EQUAL(vs.live_cq, 0);
	CU_ASSERT_EQUAL(vs.live_mr, 0);
	for (int i = 0; i < SHARE_NODES; i++) {
		tide_lcore_group_stop(sh.g[i]);
		tide_lcore_group_destroy(sh.g[i]);
		sh.g[i] = NULL;
	}
	CU_ASSERT_EQUAL(atomic_load(&sh.polls_elsewhere), 0);

	/* Without lent lcores (kernel TCP): workers of its own, polling off the lcores above. */
	te_engine_tcp_ops_override(NULL);
	share_with_info_log(share_node_a_up, log, sizeof(log));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "rdma: own workers ("));
	CU_ASSERT_PTR_NULL(strstr(log, "polling on the user-space TCP lcores"));
	for (int i = 0; i < 2000 && atomic_load(&sh.polls_elsewhere) == 0; i++) {
		usleep(1000);
	}
	CU_ASSERT_TRUE(atomic_load(&sh.polls_elsewhere) > 0);
	node_down(&a);
	tide_vrb_glue_set(vdbl_ops());
}

/*
 * The real pairing, end to end: A's TCP transport is user-space TCP (DPDK EAL
 * without hugepages, net_null device that never receives) and its RDMA transport
 * polls on those lcores; B is kernel TCP with RDMA on workers of its own. The
 * EAL starts once per process, so this runs last.
 */
static void
share_dpdk_node_up(void)
{
	node_up(&a, "dbl_a0,dbl_a1", "rdma");
	node_env_path = NULL;
	node_up(&b, "dbl_b0", "rdma");
}

static void
test_rdma_polls_on_user_space_tcp_lcores(void)
{
	char path[] = "/tmp/te_rdma_ut_env.XXXXXX", text[512], log[16384];
	const uint64_t len = 2u << 20;
	struct tide_te_status s;
	tide_te_seg_t seg;
	cpu_set_t set;
	int fd, cpu = 0;

	CU_ASSERT_EQUAL_FATAL(sched_getaffinity(0, sizeof(set), &set), 0);
	while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set)) {
		cpu++;
	}
	snprintf(text, sizeof(text),
		 "TIDE_DPDK_DEVICE=net_null0,no-rx=1\nTIDE_DATA_IP=10.77.0.1\n"
		 "TIDE_HUGEPAGES=off\nTIDE_LCORES=%d\nTIDE_FILE_PREFIX=te-rdma-ut-%d\n",
		 cpu, (int)getpid());
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	devices_reset();
	node_env_path = path;
	share_with_info_log(share_dpdk_node_up, log, sizeof(log));
	unlink(path);
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "transport tcp-dpdk"));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "rdma: polling on the user-space TCP lcores (1)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "rdma: own workers ("));
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(a.te), "rdma");

	/* Both ways: A's CQs on its user-space TCP lcore, B's on its own worker. */
	seg = open_seg(&a, &b);
	fill(a.local, len, 41);
	s = xfer(&a, seg, TIDE_TE_WRITE, a.local, (uint64_t)(uintptr_t)b.seg, len);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(a.local, b.seg, len), 0);
	fill(b.local, len, 42);
	s = xfer(&b, open_seg(&b, &a), TIDE_TE_WRITE, b.local, (uint64_t)(uintptr_t)a.seg, len);
	CU_ASSERT_EQUAL(s.state, TIDE_TE_COMPLETED);
	CU_ASSERT_EQUAL(memcmp(b.local, a.seg, len), 0);
	/* RDMA goes before the transport whose lcores it polls on (no hang, nothing left). */
	pair_down();
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_rdma", NULL, NULL);

	/* First: before any test installs the verbs double. */
	CU_add_test(s, "test_tcp_never_touches_verbs", test_tcp_never_touches_verbs);
	CU_add_test(s, "test_rdma_without_device_fails_clearly",
		    test_rdma_without_device_fails_clearly);
	CU_add_test(s, "test_rdma_write_read_registered", test_rdma_write_read_registered);
	CU_add_test(s, "test_rdma_unregistered_local_bounces",
		    test_rdma_unregistered_local_bounces);
	CU_add_test(s, "test_rdma_error_completion_then_reconnect",
		    test_rdma_error_completion_then_reconnect);
	CU_add_test(s, "test_rdma_rkey_violation", test_rdma_rkey_violation);
	CU_add_test(s, "test_rdma_qp_forced_error_inflight", test_rdma_qp_forced_error_inflight);
	CU_add_test(s, "test_rdma_no_completion_times_out", test_rdma_no_completion_times_out);
	CU_add_test(s, "test_pair_picks_best_common_transport",
		    test_pair_picks_best_common_transport);
	CU_add_test(s, "test_descriptor_advertises_rdma_and_tcp",
		    test_descriptor_advertises_rdma_and_tcp);
	CU_add_test(s, "test_connection_handshake_as_stock_peer",
		    test_connection_handshake_as_stock_peer);
	CU_add_test(s, "test_register_local_rules", test_register_local_rules);
	CU_add_test(s, "test_rdma_polls_on_lent_lcores", test_rdma_polls_on_lent_lcores);
	/* Last: the DPDK EAL starts once per process. */
	CU_add_test(s, "test_rdma_polls_on_user_space_tcp_lcores",
		    test_rdma_polls_on_user_space_tcp_lcores);
}

TIDE_UT_MAIN(register_tests)
