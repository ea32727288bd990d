/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_replicas.c: the one-block result of
 * tide_store_batch_get_replicas() from a master's answer, every replica kind
 * (the integration tests see memory replicas only), per-key errors, a short
 * answer, and the block's bounds (strings and replicas exactly counted).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_replicas.h"
#include "tide_store.h"
#include "tide_ut.h"

static struct tide_mc_str
S(const char *p) {
	struct tide_mc_str s = {(char *)p, strlen(p)};

	return s;
}

static void
test_every_kind(void)
{
	struct tide_mc_replica_desc d[5];
	struct tide_mc_exp_replica_list e[3];
	struct tide_mc_exp_replica_list_vec r = {e, 3};
	struct tide_store_replicas *out = NULL;
	const struct tide_store_replica *v;

	memset(d, 0, sizeof(d));
	memset(e, 0, sizeof(e));
	d[0] = (struct tide_mc_replica_desc){
		.id = 7, .kind = TIDE_MC_RK_MEMORY, .status = TIDE_MC_RS_COMPLETE};
	d[0].u.memory =
		(struct tide_mc_buffer_desc){100, 0x7f0000001000, S("tcp"), S("10.0.0.1:5")};
	d[1] = (struct tide_mc_replica_desc){
		.id = 8, .kind = TIDE_MC_RK_NOF, .status = TIDE_MC_RS_PROCESSING};
	d[1].u.nof = (struct tide_mc_buffer_desc){100, 0x2000, S("rdma"), S("10.0.0.2:6")};
	d[2] = (struct tide_mc_replica_desc){
		.id = 9, .kind = TIDE_MC_RK_DISK, .status = TIDE_MC_RS_COMPLETE};
	d[2].u.disk = (struct tide_mc_disk_desc){S("/ssd/obj-1"), 100};
	d[3] = (struct tide_mc_replica_desc){
		.id = 10, .kind = TIDE_MC_RK_LOCAL_DISK, .status = TIDE_MC_RS_COMPLETE};
	d[3].u.local_disk.object_size = 100;
	d[3].u.local_disk.transport_endpoint = S("10.0.0.3:7");
	d[4] = (struct tide_mc_replica_desc){
		.id = 11, .kind = TIDE_MC_RK_DFS, .status = TIDE_MC_RS_FAILED};
	d[4].u.dfs.file_path = S("");
	d[4].u.dfs.object_size = 100;
	e[0].ok = true;
	e[0].val.replicas = (struct tide_mc_replica_desc_vec){d, 5};
	e[1].err = TIDE_MC_EC_OBJECT_NOT_FOUND;
	e[2].ok = true; /* no replicas at all */
	/* Four keys, three answers: the last is -EBADMSG. */
	CU_ASSERT_EQUAL_FATAL(store_replicas_from_mc(&r, 4, &out), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_EQUAL(out[0].err, 0);
	CU_ASSERT_EQUAL_FATAL(out[0].n, 5);
	v = out[0].v;
	CU_ASSERT_EQUAL(v[0].id, 7);
	CU_ASSERT_EQUAL(v[0].type, TIDE_STORE_REPLICA_MEMORY);
	CU_ASSERT_EQUAL(v[0].status, TIDE_STORE_REPLICA_COMPLETE);
	CU_ASSERT_EQUAL(v[0].size, 100);
	CU_ASSERT_EQUAL(v[0].buffer_address, 0x7f0000001000);
	CU_ASSERT_STRING_EQUAL(v[0].transport_endpoint, "10.0.0.1:5");
	CU_ASSERT_STRING_EQUAL(v[0].protocol, "tcp");
	CU_ASSERT_STRING_EQUAL(v[0].file_path, "");
	CU_ASSERT_EQUAL(v[1].type, TIDE_STORE_REPLICA_NOF);
	CU_ASSERT_EQUAL(v[1].status, TIDE_STORE_REPLICA_PROCESSING);
	CU_ASSERT_EQUAL(v[1].buffer_address, 0x2000);
	CU_ASSERT_STRING_EQUAL(v[1].transport_endpoint, "10.0.0.2:6");
	CU_ASSERT_STRING_EQUAL(v[1].protocol, "rdma");
	CU_ASSERT_EQUAL(v[2].type, TIDE_STORE_REPLICA_DISK);
	CU_ASSERT_EQUAL(v[2].size, 100);
	CU_ASSERT_EQUAL(v[2].buffer_address, 0);
	CU_ASSERT_STRING_EQUAL(v[2].file_path, "/ssd/obj-1");
	CU_ASSERT_STRING_EQUAL(v[2].transport_endpoint, "");
	CU_ASSERT_EQUAL(v[3].type, TIDE_STORE_REPLICA_LOCAL_DISK);
	CU_ASSERT_STRING_EQUAL(v[3].transport_endpoint, "10.0.0.3:7");
	CU_ASSERT_STRING_EQUAL(v[3].file_path, "");
	CU_ASSERT_EQUAL(v[4].type, TIDE_STORE_REPLICA_DFS);
	CU_ASSERT_EQUAL(v[4].status, TIDE_STORE_REPLICA_FAILED);
	CU_ASSERT_STRING_EQUAL(v[4].file_path, ""); /* empty: never NULL */
	/* The strings are copies inside the block, not the codec's. */
	CU_ASSERT_PTR_NOT_EQUAL(v[0].transport_endpoint, d[0].u.memory.transport_endpoint.ptr);
	CU_ASSERT_EQUAL(out[1].err, -ENOENT);
	CU_ASSERT_EQUAL(out[1].n, 0);
	CU_ASSERT_PTR_NULL(out[1].v);
	CU_ASSERT_EQUAL(out[2].err, 0);
	CU_ASSERT_EQUAL(out[2].n, 0);
	CU_ASSERT_PTR_NULL(out[2].v);
	CU_ASSERT_EQUAL(out[3].err, -EBADMSG);
	tide_store_replicas_free(out);
}

/* The builder never writes past what was counted. */
static void
test_block_bounds(void)
{
	struct store_replicas_blk b;

	CU_ASSERT_EQUAL_FATAL(store_replicas_alloc(&b, 1, 1, 4), 0);
	CU_ASSERT_PTR_NOT_NULL(store_replicas_take(&b));
	CU_ASSERT_PTR_NULL(store_replicas_take(&b));
	CU_ASSERT_STRING_EQUAL(store_replicas_str(&b, "abc", 3), "abc");
	CU_ASSERT_STRING_EQUAL(store_replicas_str(&b, "d", 1), ""); /* no room left */
	CU_ASSERT_STRING_EQUAL(store_replicas_str(&b, NULL, 0), "");
	tide_store_replicas_free(b.keys);
	CU_ASSERT_EQUAL(store_replicas_alloc(&b, SIZE_MAX / 8, SIZE_MAX / 8, 1), -ENOMEM);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_replicas", NULL, NULL);

	CU_add_test(s, "every_kind", test_every_kind);
	CU_add_test(s, "block_bounds", test_block_bounds);
}

TIDE_UT_MAIN(register_tests)
