/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * A test double behind pmd/verbs' glue table (struct tide_vrb_ops) that
 * emulates reliable-connected RDMA in memory, for hosts without a device.
 *
 * Devices are declared by the test (name, NUMA node, port state, link layer,
 * LID, GID table with RoCE versions). Everything a real HCA checks on the
 * paths Tide uses is checked here:
 * - protection domains own memory regions and queue pairs; an lkey must be
 *   from the QP's PD and cover the local range (else LOC_PROT_ERR); an rkey
 *   must be from the responder QP's PD, cover the remote range and allow the
 *   access (else REM_ACCESS_ERR);
 * - QPs move RESET -> INIT -> RTR -> RTS (other moves are EINVAL); posting
 *   before RTS fails with EINVAL; a WR whose destination QP does not exist, is
 *   not RTR/RTS or is not connected back completes with RETRY_EXC_ERR;
 * - an error completion moves the QP to ERR and every later or pending WR
 *   completes with WR_FLUSH_ERR; a QP in RESET drops pending WRs silently;
 * - unsignalled WRs produce a completion only on error.
 * RDMA READ/WRITE run between the processes' own buffers (two "nodes" in one
 * process): at post time, or at vdbl_progress() in deferred mode, which lets a
 * test hold work in flight and then break the QP under it.
 *
 * Thread-safe: one mutex serialises every entry point (engine lcores poll
 * while the test thread injects faults).
 */
#ifndef VDBL_H
#define VDBL_H

#include <stdbool.h>
#include <stdint.h>

#include "tide_vrb.h"

/** A device to emulate. */
struct vdbl_dev_spec {
	const char *name;
	int numa;        /**< -1 unknown */
	bool down;       /**< port not ACTIVE */
	bool infiniband; /**< else RoCE (Ethernet link layer) */
	uint16_t lid;    /**< IB only */
	unsigned ngid;   /**< used entries of gid[] */
	union ibv_gid gid[8];
	int roce_ver[8];  /**< 1 or 2 per entry */
	enum ibv_mtu mtu; /**< 0: IBV_MTU_4096 */
};

/** Calls whose next invocation(s) can be made to fail. */
enum vdbl_call {
	VDBL_OPEN_DEVICE,
	VDBL_REG_MR,
	VDBL_CREATE_CQ,
	VDBL_CREATE_QP,
	VDBL_MODIFY_QP,
	VDBL_POST_SEND,
	VDBL_NCALLS,
};

struct vdbl_stats {
	unsigned open_device, reg_mr, dereg_mr, create_qp, destroy_qp, modify_qp;
	unsigned post_send_calls; /**< post_send invocations (one per batch) */
	unsigned wrs_posted, wrs_executed, wcs_generated, wcs_error;
	unsigned live_ctx, live_pd, live_mr, live_cq, live_qp;
};

/** The double's glue table (install with tide_vrb_glue_set()). */
const struct tide_vrb_ops *vdbl_ops(void);

/**
 * Only in libtide_vdbl.so (vdbl_glue.c): the entry point of pmd/verbs' test seam
 * (TIDETEST_VERBS_GLUE, see tide_vrb_glue_get()), the double's table. The first call
 * declares the RoCE devices listed in VDBL_DEVICES, a comma list of "name" or
 * "name:a.b.c.d" (GID IPv4; default 10.255.0.<position>); the process may also add
 * devices itself through the library (vdbl_add_roce(), e.g. with ctypes).
 */
const struct tide_vrb_ops *tide_vrb_test_glue(void);

/** Forget every device, object, fault and counter. Objects still open leak on purpose
 * (the test failed anyway). */
void vdbl_reset(void);

/** Add a device. \return 0; -ENOSPC (16 max). */
int vdbl_add_device(const struct vdbl_dev_spec *spec);

/** Add a RoCE device whose GID table is [fe80 v1, fe80 v2, ::ffff:ipv4 v1, ::ffff:ipv4 v2]
 * (auto-selection must pick index 3). ipv4 in host order. */
int vdbl_add_roce(const char *name, int numa, uint32_t ipv4);

/** Make the next `count` calls of `c` fail with err (a positive errno). */
void vdbl_fail_call(enum vdbl_call c, int err, unsigned count);

/** The WR executed after `skip` more successful ones completes with `st` (QP -> ERR). */
void vdbl_inject_wc_error(enum ibv_wc_status st, unsigned skip);

/** Deferred mode: WRs wait in their QP until vdbl_progress(). */
void vdbl_set_deferred(bool on);

/** Execute every pending WR. \return how many ran. */
unsigned vdbl_progress(void);

/** WRs posted and not yet executed, over all QPs. */
unsigned vdbl_pending(void);

/**
 * Move QP qpn to ERR as a link failure would: pending WRs complete with
 * WR_FLUSH_ERR, later posts too. \return 0; -ENOENT no such QP.
 */
int vdbl_qp_force_error(uint32_t qpn);

/** QP numbers of QPs in RTS that have posted at least one WR (requesters); returns count. */
unsigned vdbl_requester_qps(uint32_t *qpns, unsigned max);

/** State of QP qpn, or -ENOENT. */
int vdbl_qp_state(uint32_t qpn);

/** Copy the counters. */
void vdbl_stats_get(struct vdbl_stats *st);

#endif /* VDBL_H */
