/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * pmd/verbs as the RDMA transport's driver (engine/te/rdma/tide_rdma_dev.h):
 * each op is the tide_vrb_* call (tide_vrb.h) the transport used to make
 * itself, with the contract's plain types converted to and from libibverbs'
 * next to the call. Handles are casts: a tide_rdma_mr is a tide_vrb_mr, a
 * tide_rdma_cq an ibv_cq and a tide_rdma_qp an ibv_qp.
 *
 * The glue table (tide_vrb_glue_get(), tide_vrb_glue_set(), the
 * TIDETEST_VERBS_GLUE seam) stays underneath: the driver takes it when the
 * transport opens its devices, so a test that installs the verbs double
 * before that gets the double, and protocol tcp never loads libibverbs.
 *
 * Linking: rdma_driver.c registers the table from a constructor; the meson
 * dependency `tide_vrb_rdma_dep` names it to the linker
 * (`-Wl,--undefined=tide_vrb_rdma_dev_ops`), so every program or shared
 * library that lists the dependency keeps the driver.
 */
#ifndef TIDE_VRB_RDMA_H
#define TIDE_VRB_RDMA_H

#include "tide_rdma_dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * pmd/verbs' driver table, registered with tide_rdma_dev_register() by a
 * constructor of rdma_driver.c. Also the symbol tide_vrb_rdma_dep names to the
 * linker, so that object (and its constructor) is never left out.
 */
extern const struct tide_rdma_dev_ops tide_vrb_rdma_dev_ops;

#ifdef __cplusplus
}
#endif
#endif /* TIDE_VRB_RDMA_H */
