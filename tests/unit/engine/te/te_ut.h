/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine helpers for te tests, over the public API; every step is asserted with
 * CUnit: an engine on 127.0.0.1, and one request through it (a batch of one
 * allocated, submitted, waited for, its status read, freed).
 */
#ifndef TE_UT_H
#define TE_UT_H

#include <CUnit/CUnit.h>
#include <stdint.h>

#include "tide_te.h"
#include "tide_ut.h"

/* An engine on 127.0.0.1, options otherwise default but rdma_devices (NULL: the node
 * env's); NULL when tide_te_create() failed (asserted). */
static inline struct tide_te *
te_ut_create_local(const char *rdma_devices)
{
	struct tide_te_opts o;
	struct tide_te *te = NULL;

	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	o.rdma_devices = rdma_devices;
	TIDE_UT_OK(tide_te_create(&o, &te));
	return te;
}

/* Submit one request and wait (30 s at most); returns its final status. */
static inline struct tide_te_status
te_ut_one(struct tide_te *te, enum tide_te_op op, void *local, tide_te_seg_t seg, uint64_t remote,
	  uint64_t len)
{
	struct tide_te_req r = {
		.op = op, .local = local, .seg = seg, .remote_addr = remote, .len = len};
	struct tide_te_status st = {0};
	tide_te_batch_t b;

	CU_ASSERT_FATAL(tide_te_batch_alloc(te, 1, &b) == 0);
	CU_ASSERT(tide_te_submit(te, b, &r, 1) == 0);
	CU_ASSERT(tide_te_wait(te, b, 30000) == 0);
	CU_ASSERT(tide_te_status(te, b, 0, &st) == 0);
	CU_ASSERT(tide_te_batch_free(te, b) == 0);
	return st;
}

#endif /* TE_UT_H */
