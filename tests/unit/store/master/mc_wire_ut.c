/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of store/master/mc_wire.c: coro_rpc headers, the function-id
 * table (checked against the spec's independently computed table), error
 * frames (checked against the spec's verified dumps) and frame-level errors.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_internal.h"
#include "tide_mc_codec.h"
#include "tide_ut.h"

/* Spec 1.3: ids of every handler registered at HEAD, as the spec lists them. */
static const struct {
	const char *name;
	uint32_t id;
} spec_ids[] = {
	{"ExistKey", 0x89385f09},
	{"BatchExistKey", 0xb89fa6b0},
	{"ServiceReady", 0x7b81bb56},
	{"GetReplicaList", 0x1f7ef174},
	{"BatchGetReplicaList", 0x1b0d20ff},
	{"GetReplicaListByRegex", 0xfe6af93c},
	{"PutStart", 0x65ea9ac1},
	{"PutEnd", 0x8e8b2099},
	{"PutRevoke", 0xa0767c44},
	{"BatchPutStart", 0x56be1822},
	{"BatchPutEnd", 0x80e020ab},
	{"BatchPutRevoke", 0xb82567aa},
	{"UpsertStart", 0xa1335e41},
	{"UpsertEnd", 0x2e20e258},
	{"UpsertRevoke", 0x610b042e},
	{"BatchUpsertStart", 0xd564b423},
	{"BatchUpsertEnd", 0xb1bcd72f},
	{"BatchUpsertRevoke", 0x9093ae79},
	{"Remove", 0xf1b09774},
	{"RemoveByRegex", 0xfccc1fd3},
	{"RemoveAll", 0xd978ceb0},
	{"BatchRemove", 0x5902407d},
	{"MountSegment", 0x3e7ec4bb},
	{"ReMountSegment", 0x0b053b72},
	{"UnmountSegment", 0x6f10b465},
	{"GracefulUnmountSegment", 0xa4ec3175},
	{"Ping", 0xd6c2dae5},
	{"GetFsdir", 0x3e585123},
	{"GetStorageConfig", 0x8da9b0a6},
	{"QuerySegmentStatus", 0x79b8af8c},
	{"QuerySegmentStatusById", 0x573fd453},
	{"BatchQueryIp", 0x7ce454a9},
	{"BatchReplicaClear", 0x137b01fc},
	{"MountNoFSegment", 0x14d3f74c},
	{"ReMountNoFSegment", 0xc15a1a37},
	{"UnmountNoFSegment", 0xbb263e21},
	{"GetAllNoFSegments", 0x04eb3c85},
	{"GetNoFSegmentsByName", 0x6b194364},
	{"MountLocalDiskSegment", 0x281fc089},
	{"UnmountLocalDiskSegment", 0x59fe76e4},
	{"OffloadObjectHeartbeat", 0x2a9b08f8},
	{"ReportSsdCapacity", 0x7e109a9c},
	{"NotifyOffloadSuccess", 0x2df85842},
	{"PromotionObjectHeartbeat", 0x0a19072a},
	{"PromotionAllocStart", 0x36430f70},
	{"NotifyPromotionSuccess", 0xfe6e3d25},
	{"NotifyPromotionFailure", 0xcbecf2b4},
	{"CopyStart", 0x29836d38},
	{"CopyEnd", 0xf696f1d9},
	{"CopyRevoke", 0x1f558b5c},
	{"MoveStart", 0x458e4ce0},
	{"MoveEnd", 0x636a8b47},
	{"MoveRevoke", 0x919b315f},
	{"DynamicReplicaCopyStart", 0x21118d62},
	{"DynamicReplicaCopyEnd", 0x4f22bba4},
	{"DynamicReplicaCopyRevoke", 0x99768752},
	{"EvictDiskReplica", 0xd00ac42b},
	{"BatchEvictDiskReplica", 0x74d1e980},
	{"PollRemoveAll", 0x05b21025},
	{"CreateCopyTask", 0x7801dba0},
	{"CreateMoveTask", 0x97200d2c},
	{"QueryTask", 0x07816a74},
	{"FetchTasks", 0xdf141844},
	{"MarkTaskToComplete", 0xa7060015},
};

static void
test_fn_table_matches_spec(void)
{
	unsigned seen[TIDE_MC_FN_COUNT] = {0};
	unsigned head_only = 0;

	TIDE_UT_OK(tide_mc_codec_init());
	CU_ASSERT_EQUAL(MC_ARRAY_SIZE(spec_ids), 64);
	/* Stock's 64 plus Tide's three lease functions. */
	CU_ASSERT_EQUAL(TIDE_MC_FN_COUNT, 67);
	for (size_t i = 0; i < MC_ARRAY_SIZE(spec_ids); i++) {
		enum tide_mc_fn fn = TIDE_MC_FN_COUNT;
		uint32_t id = 0;

		TIDE_UT_OK(tide_mc_fn_id_of_name(spec_ids[i].name, &id));
		CU_ASSERT_EQUAL(id, spec_ids[i].id);
		TIDE_UT_OK(tide_mc_fn_from_id(spec_ids[i].id, &fn));
		CU_ASSERT_FATAL(fn < TIDE_MC_FN_COUNT);
		CU_ASSERT_STRING_EQUAL(tide_mc_fn_info(fn)->name, spec_ids[i].name);
		CU_ASSERT_EQUAL(tide_mc_fn_info(fn)->id, spec_ids[i].id);
		seen[fn]++;
	}
	for (unsigned fn = 0; fn < TIDE_MC_FN_COUNT; fn++) {
		const struct tide_mc_fn_info *fi = tide_mc_fn_info((enum tide_mc_fn)fn);

		/* Every stock function once; Tide's own are in no stock list. */
		CU_ASSERT_EQUAL(seen[fn], fi->tide_only ? 0u : 1u);
		CU_ASSERT_EQUAL(fi->tide_only, fn >= TIDE_MC_FN_TIDE_LEASE_GRANT &&
						       fn <= TIDE_MC_FN_TIDE_LEASE_RELEASE);
		CU_ASSERT_EQUAL(fi->has_codec, fn < TIDE_MC_FN_CODEC_COUNT);
		CU_ASSERT_PTR_NOT_NULL(fi->feature);
		CU_ASSERT_PTR_NOT_NULL(fi->off_answer);
		head_only += fi->head_only;
	}
	/* v0.3.12.post1 registers 60: no UnmountLocalDiskSegment, DynamicReplicaCopy*. */
	CU_ASSERT_EQUAL(head_only, 4);
	CU_ASSERT_TRUE(tide_mc_fn_info(TIDE_MC_FN_UNMOUNT_LOCAL_DISK_SEGMENT)->head_only);
	CU_ASSERT_PTR_NULL(tide_mc_fn_info(TIDE_MC_FN_COUNT));
}

static void
test_fn_from_id_unknown(void)
{
	enum tide_mc_fn fn = TIDE_MC_FN_PING;
	uint32_t calc = 0;

	CU_ASSERT_EQUAL(tide_mc_fn_from_id(0x12345678, &fn), -ENOENT);
	CU_ASSERT_EQUAL(fn, TIDE_MC_FN_PING); /* untouched */
	/* Declared client-side, never registered: a stock master answers errc 11. */
	TIDE_UT_OK(tide_mc_fn_id_of_name("CalcCacheStats", &calc));
	CU_ASSERT_EQUAL(tide_mc_fn_from_id(calc, &fn), -ENOENT);
	CU_ASSERT_EQUAL(tide_mc_fn_id_of_name(NULL, &calc), -EINVAL);
}

/* Tide's lease functions: ids distinct from every stock one (checked at init), and a
 * request / result round trip through the codec. */
static void
test_tide_lease_codec(void)
{
	struct tide_mc_buf b = {0};
	struct tide_mc_req rq, back;
	struct tide_mc_resp rs, rback;
	struct tide_mc_str keys[2] = {{(char *)"a", 1}, {(char *)"bb", 2}};
	uint64_t offs[2] = {0, 4096}, sizes[2] = {100, 5000};
	enum tide_mc_fn fn = TIDE_MC_FN_COUNT;
	uint32_t id = 0;

	TIDE_UT_OK(tide_mc_fn_id_of_name("TideLeaseCommit", &id));
	TIDE_UT_OK(tide_mc_fn_from_id(id, &fn));
	CU_ASSERT_EQUAL(fn, TIDE_MC_FN_TIDE_LEASE_COMMIT);
	memset(&rq, 0, sizeof(rq));
	rq.fn = TIDE_MC_FN_TIDE_LEASE_COMMIT;
	rq.u.lease_commit.client_id = (struct tide_mc_uuid){1, 2};
	rq.u.lease_commit.lease_id = 77;
	rq.u.lease_commit.keys = (struct tide_mc_str_vec){keys, 2};
	rq.u.lease_commit.offsets = (struct tide_mc_u64_vec){offs, 2};
	rq.u.lease_commit.sizes = (struct tide_mc_u64_vec){sizes, 2};
	rq.u.lease_commit.config.replica_num = 1;
	TIDE_UT_OK(tide_mc_req_encode(&rq, TIDE_MC_ENC_STOCK, &b));
	TIDE_UT_OK(tide_mc_req_decode(rq.fn, b.data, b.len, &back, NULL));
	CU_ASSERT_EQUAL(back.u.lease_commit.lease_id, 77);
	CU_ASSERT_EQUAL(back.u.lease_commit.client_id.second, 2);
	CU_ASSERT_EQUAL_FATAL(back.u.lease_commit.keys.n, 2);
	CU_ASSERT_EQUAL(back.u.lease_commit.keys.v[1].len, 2);
	CU_ASSERT_EQUAL(back.u.lease_commit.offsets.v[1], 4096);
	CU_ASSERT_EQUAL(back.u.lease_commit.sizes.v[1], 5000);
	CU_ASSERT_EQUAL(back.u.lease_commit.config.replica_num, 1);
	tide_mc_req_free(&back);

	memset(&rs, 0, sizeof(rs));
	rs.fn = TIDE_MC_FN_TIDE_LEASE_GRANT;
	rs.u.lease.ok = true;
	rs.u.lease.val.id = 9;
	rs.u.lease.val.ttl_ms = 30000;
	rs.u.lease.val.granule = 4096;
	rs.u.lease.val.buf.size = 1 << 20;
	rs.u.lease.val.buf.buffer_address = 0x7f0000001000;
	rs.u.lease.val.buf.protocol = (struct tide_mc_str){(char *)"tcp", 3};
	rs.u.lease.val.buf.transport_endpoint = (struct tide_mc_str){(char *)"h:1", 3};
	b.len = 0;
	TIDE_UT_OK(tide_mc_resp_encode(&rs, TIDE_MC_ENC_STOCK, &b));
	TIDE_UT_OK(tide_mc_resp_decode(rs.fn, b.data, b.len, &rback, NULL));
	CU_ASSERT_TRUE(rback.u.lease.ok);
	CU_ASSERT_EQUAL(rback.u.lease.val.id, 9);
	CU_ASSERT_EQUAL(rback.u.lease.val.granule, 4096);
	CU_ASSERT_EQUAL(rback.u.lease.val.buf.buffer_address, 0x7f0000001000);
	CU_ASSERT_STRING_EQUAL(rback.u.lease.val.buf.transport_endpoint.ptr, "h:1");
	tide_mc_resp_free(&rback);
	rs.u.lease.ok = false;
	rs.u.lease.err = TIDE_MC_EC_NO_AVAILABLE_HANDLE;
	b.len = 0;
	TIDE_UT_OK(tide_mc_resp_encode(&rs, TIDE_MC_ENC_STOCK, &b));
	TIDE_UT_OK(tide_mc_resp_decode(rs.fn, b.data, b.len, &rback, NULL));
	CU_ASSERT_FALSE(rback.u.lease.ok);
	CU_ASSERT_EQUAL(rback.u.lease.err, TIDE_MC_EC_NO_AVAILABLE_HANDLE);
	tide_mc_resp_free(&rback);
	tide_mc_buf_release(&b);
}

static void
test_req_hdr_roundtrip(void)
{
	/* Spec 1.6: ServiceReady, seq 0. */
	static const uint8_t want[20] = {0x15, 0,    0, 0, 0, 0, 0, 0, 0x56, 0xbb,
					 0x81, 0x7b, 0, 0, 0, 0, 0, 0, 0,    0};
	struct tide_mc_req_hdr h = {0}, p = {0};
	uint8_t out[20];

	h.magic = TIDE_MC_MAGIC;
	h.function_id = 0x7b81bb56;
	tide_mc_req_hdr_build(&h, out);
	CU_ASSERT_EQUAL(memcmp(out, want, 20), 0);

	h.seq_num = 0xa1b2c3d4;
	h.length = 0x01020304;
	h.attach_length = 7;
	tide_mc_req_hdr_build(&h, out);
	TIDE_UT_OK(tide_mc_req_hdr_parse(out, sizeof(out), &p, NULL));
	CU_ASSERT_EQUAL(memcmp(&p, &h, sizeof(h)), 0);
	CU_ASSERT_EQUAL(out[4], 0xd4); /* little-endian */
}

static void
test_req_hdr_errors(void)
{
	struct tide_mc_req_hdr h = {.magic = TIDE_MC_MAGIC}, p;
	struct tide_mc_err err = {0};
	uint8_t out[20];

	tide_mc_req_hdr_build(&h, out);
	for (size_t n = 0; n < 20; n++) {
		CU_ASSERT_EQUAL(tide_mc_req_hdr_parse(out, n, &p, &err), -EAGAIN);
	}
	out[0] = 0x16;
	CU_ASSERT_EQUAL(tide_mc_req_hdr_parse(out, 20, &p, &err), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "magic"));
	CU_ASSERT_EQUAL(err.errc, 0);
	out[0] = 0x15;
	out[1] = 1;
	CU_ASSERT_EQUAL(tide_mc_req_hdr_parse(out, 20, &p, &err), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "version"));
	out[1] = 0;
	out[2] = 1;
	CU_ASSERT_EQUAL(tide_mc_req_hdr_parse(out, 20, &p, &err), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "serialize_type"));
	CU_ASSERT_EQUAL(tide_mc_req_hdr_parse(NULL, 20, &p, &err), -EINVAL);
}

static void
test_resp_hdr_roundtrip(void)
{
	struct tide_mc_resp_hdr h = {.magic = TIDE_MC_MAGIC,
				     .err_code = 4,
				     .seq_num = 9,
				     .length = 0x14},
				p = {0};
	uint8_t out[16];

	tide_mc_resp_hdr_build(&h, out);
	CU_ASSERT_EQUAL(out[2], 4);
	CU_ASSERT_EQUAL(out[8], 0x14);
	TIDE_UT_OK(tide_mc_resp_hdr_parse(out, 16, &p, NULL));
	CU_ASSERT_EQUAL(memcmp(&p, &h, sizeof(h)), 0);
	CU_ASSERT_EQUAL(tide_mc_resp_hdr_parse(out, 15, &p, NULL), -EAGAIN);
	out[0] = 0;
	CU_ASSERT_EQUAL(tide_mc_resp_hdr_parse(out, 16, &p, NULL), -EPROTO);
}

/* Spec 1.5 verified dumps (release peer without literal). */
static void
test_err_frame_matches_spec(void)
{
	static const uint8_t bad_hash[] = {0x15, 0x00, 0x04, 0x00, 0x05, 0,    0,
					   0,    0x14, 0,    0,    0,    0,    0,
					   0,    0,    0x76, 0xfa, 0xcf, 0x9d, 0x0f};
	static const uint8_t not_reg_head[] = {0x15, 0x00, 0x0b, 0x00, 0x06, 0,    0,
					       0,    0x24, 0,    0,    0,    0,    0,
					       0,    0,    0x76, 0xfa, 0xcf, 0x9d, 0x1f};
	struct tide_mc_buf b = {0};

	TIDE_UT_OK(tide_mc_err_frame_encode(5, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS,
					    "invalid rpc arg", 0, &b));
	CU_ASSERT_EQUAL_FATAL(b.len, sizeof(bad_hash) + 15);
	CU_ASSERT_EQUAL(memcmp(b.data, bad_hash, sizeof(bad_hash)), 0);
	CU_ASSERT_EQUAL(memcmp(b.data + sizeof(bad_hash), "invalid rpc arg", 15), 0);
	b.len = 0;
	TIDE_UT_OK(tide_mc_err_frame_encode(6, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED,
					    "the rpc function not registered", 0, &b));
	CU_ASSERT_EQUAL_FATAL(b.len, sizeof(not_reg_head) + 31);
	CU_ASSERT_EQUAL(memcmp(b.data, not_reg_head, sizeof(not_reg_head)), 0);

	/* With the literal, as a non-NDEBUG peer: hash|1, metainfo 04, "80 0c 00". */
	b.len = 0;
	TIDE_UT_OK(tide_mc_err_frame_encode(6, 4, "x", TIDE_MC_ENC_STOCK, &b));
	{
		static const uint8_t want[] = {0x77, 0xfa, 0xcf, 0x9d, 0x04,
					       0x80, 0x0c, 0x00, 0x01, 'x'};
		CU_ASSERT_EQUAL_FATAL(b.len, 16 + sizeof(want));
		CU_ASSERT_EQUAL(memcmp(b.data + 16, want, sizeof(want)), 0);
		CU_ASSERT_EQUAL(b.data[8], sizeof(want));
	}
	CU_ASSERT_EQUAL(tide_mc_err_frame_encode(6, 0, "x", 0, &b), -EINVAL);
	tide_mc_buf_release(&b);
	CU_ASSERT_PTR_NULL(b.data);
}

static void
test_err_frame_decode_remote(void)
{
	struct tide_mc_buf b = {0};
	struct tide_mc_resp_hdr h;
	struct tide_mc_resp r;
	struct tide_mc_err err = {0};
	size_t used = 0;

	TIDE_UT_OK(tide_mc_err_frame_encode(3, 11, "the rpc function not registered",
					    TIDE_MC_ENC_STOCK, &b));
	CU_ASSERT_EQUAL(
		tide_mc_resp_frame_decode(TIDE_MC_FN_PING, b.data, b.len, &h, &r, &used, &err),
		-EREMOTEIO);
	CU_ASSERT_EQUAL(used, b.len);
	CU_ASSERT_EQUAL(h.seq_num, 3);
	CU_ASSERT_EQUAL(err.errc, 11);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the rpc function not registered"));

	/* Extended code: header 255, body pair<uint16_t,string> (hash 0x372be64c). */
	b.len = 0;
	TIDE_UT_OK(tide_mc_err_frame_encode(4, 1000, "big", 0, &b));
	CU_ASSERT_EQUAL(b.data[2], 255);
	CU_ASSERT_EQUAL(mc_get_le32(b.data + 16), 0x372be64c);
	CU_ASSERT_EQUAL(b.data[20], 0xe8); /* 1000 LE */
	CU_ASSERT_EQUAL(b.data[21], 0x03);
	CU_ASSERT_EQUAL(
		tide_mc_resp_frame_decode(TIDE_MC_FN_PING, b.data, b.len, &h, &r, &used, &err),
		-EREMOTEIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "1000: big"));
	tide_mc_buf_release(&b);
}

static void
frame(uint8_t *buf, uint32_t id, uint32_t len)
{
	struct tide_mc_req_hdr h = {
		.magic = TIDE_MC_MAGIC, .seq_num = 42, .function_id = id, .length = len};
	tide_mc_req_hdr_build(&h, buf);
}

static void
test_req_frame_errors(void)
{
	uint8_t buf[64] = {0};
	struct tide_mc_req_hdr h;
	struct tide_mc_req req;
	struct tide_mc_err err = {0};
	size_t used = 0;

	/* Unknown id -> errc 11, frame still consumed so the stream stays in sync. */
	frame(buf, 0x12345678, 4);
	CU_ASSERT_EQUAL(tide_mc_req_frame_decode(buf, 24, &h, &req, &used, &err), -ENOENT);
	CU_ASSERT_EQUAL(err.errc, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED);
	CU_ASSERT_EQUAL(used, 24);
	CU_ASSERT_EQUAL(h.seq_num, 42);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "0x12345678"));

	/* Registered, no codec (feature off) -> -ENOTSUP, errc 11 suggested. */
	frame(buf, tide_mc_fn_info(TIDE_MC_FN_COPY_START)->id, 0);
	CU_ASSERT_EQUAL(tide_mc_req_frame_decode(buf, 20, &h, &req, &used, &err), -ENOTSUP);
	CU_ASSERT_EQUAL(err.errc, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "CopyStart"));

	/* Wrong type hash -> errc 4. */
	frame(buf, tide_mc_fn_info(TIDE_MC_FN_PING)->id, 16 + 4);
	mc_put_le32(buf + 20, 0xdeadbeee);
	CU_ASSERT_EQUAL(tide_mc_req_frame_decode(buf, 40, &h, &req, &used, &err), -EBADMSG);
	CU_ASSERT_EQUAL(err.errc, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS);
	CU_ASSERT_EQUAL(err.offset, 20);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "type hash 0xdeadbeee"));

	/* Incomplete frame -> -EAGAIN at every length; bad magic -> -EPROTO. */
	for (size_t n = 0; n < 40; n++) {
		CU_ASSERT_EQUAL(tide_mc_req_frame_decode(buf, n, &h, &req, &used, &err), -EAGAIN);
		CU_ASSERT_EQUAL(used, 0);
	}
	buf[0] = 0x14;
	CU_ASSERT_EQUAL(tide_mc_req_frame_decode(buf, 40, &h, &req, &used, &err), -EPROTO);

	/* Zero-argument call: empty body. */
	frame(buf, tide_mc_fn_info(TIDE_MC_FN_SERVICE_READY)->id, 0);
	TIDE_UT_OK(tide_mc_req_frame_decode(buf, 20, &h, &req, &used, &err));
	CU_ASSERT_EQUAL(req.fn, TIDE_MC_FN_SERVICE_READY);
	tide_mc_req_free(&req);
}

static void
test_frame_encode_request(void)
{
	struct tide_mc_req req = {.fn = TIDE_MC_FN_PING};
	struct tide_mc_buf b = {0};
	struct tide_mc_req_hdr h;

	req.u.ping.id.first = 1;
	req.u.ping.id.second = 2;
	/* Two frames appended back to back, as a pipelining client does. */
	TIDE_UT_OK(tide_mc_req_frame_encode(&req, 1, 0, &b));
	TIDE_UT_OK(tide_mc_req_frame_encode(&req, 2, TIDE_MC_ENC_STOCK, &b));
	CU_ASSERT_EQUAL_FATAL(b.len, 20 + 20 + 20 + 28);
	TIDE_UT_OK(tide_mc_req_hdr_parse(b.data, b.len, &h, NULL));
	CU_ASSERT_EQUAL(h.function_id, 0xd6c2dae5);
	CU_ASSERT_EQUAL(h.length, 20);
	CU_ASSERT_EQUAL(mc_get_le32(b.data + 20), 0x3c6d83e0);
	TIDE_UT_OK(tide_mc_req_hdr_parse(b.data + 40, b.len - 40, &h, NULL));
	CU_ASSERT_EQUAL(h.seq_num, 2);
	CU_ASSERT_EQUAL(h.length, 28);
	CU_ASSERT_EQUAL(mc_get_le32(b.data + 60), 0x3c6d83e1);

	req.fn = TIDE_MC_FN_COPY_START;
	CU_ASSERT_EQUAL(tide_mc_req_frame_encode(&req, 3, 0, &b), -EINVAL);
	CU_ASSERT_EQUAL(b.len, 88); /* unchanged on failure */
	tide_mc_buf_release(&b);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_wire", NULL, NULL);

	CU_add_test(s, "test_fn_table_matches_spec", test_fn_table_matches_spec);
	CU_add_test(s, "test_fn_from_id_unknown", test_fn_from_id_unknown);
	CU_add_test(s, "test_tide_lease_codec", test_tide_lease_codec);
	CU_add_test(s, "test_req_hdr_roundtrip", test_req_hdr_roundtrip);
	CU_add_test(s, "test_req_hdr_errors", test_req_hdr_errors);
	CU_add_test(s, "test_resp_hdr_roundtrip", test_resp_hdr_roundtrip);
	CU_add_test(s, "test_err_frame_matches_spec", test_err_frame_matches_spec);
	CU_add_test(s, "test_err_frame_decode_remote", test_err_frame_decode_remote);
	CU_add_test(s, "test_req_frame_errors", test_req_frame_errors);
	CU_add_test(s, "test_frame_encode_request", test_frame_encode_request);
}

TIDE_UT_MAIN(register_tests)
