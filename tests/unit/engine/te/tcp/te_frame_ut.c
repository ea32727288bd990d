/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "te_frame.h"
#include "te_meta.h"
#include "tide_ut.h"

/* Mooncake v2 WRITE of 0x1000 bytes at 0x7f0000001000, as on the wire. */
static const uint8_t v2_write[TE_FRAME_HDR_LEN] = {
	0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* size */
	0x00, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, /* addr */
	0x81, 0,    0,    0,    0,    0,    0,    0,
};

static void
test_encode_known_bytes(void)
{
	struct te_frame_hdr h = {.size = 0x1000,
				 .addr = 0x7f0000001000ULL,
				 .op = TE_FRAME_OP_WRITE,
				 .proto = TE_PROTO_V2,
				 .req_id = 99};
	uint8_t out[TE_FRAME_HDR_LEN];

	TIDE_UT_OK(te_frame_hdr_encode(&h, out));
	/* req_id is not written outside native */
	CU_ASSERT_EQUAL(memcmp(out, v2_write, sizeof(out)), 0);
	h.proto = TE_PROTO_V1;
	h.op = TE_FRAME_OP_READ;
	TIDE_UT_OK(te_frame_hdr_encode(&h, out));
	CU_ASSERT_EQUAL(out[16], 0x00);
	h.proto = TE_PROTO_NATIVE;
	h.req_id = 0x01020304;
	TIDE_UT_OK(te_frame_hdr_encode(&h, out));
	CU_ASSERT_EQUAL(out[16], 0x40);
	CU_ASSERT_EQUAL(out[17] | out[18] | out[19], 0);
	CU_ASSERT_EQUAL(out[20], 0x04);
	CU_ASSERT_EQUAL(out[23], 0x01);
}

static void
test_roundtrip_every_opcode(void)
{
	static const uint32_t protos[] = {TE_PROTO_V1, TE_PROTO_V2, TE_PROTO_NATIVE};
	static const uint8_t opc_base[] = {0x00, 0x80, 0x40};

	for (unsigned p = 0; p < 3; p++) {
		for (uint8_t op = 0; op <= TE_FRAME_OP_HELLO; op++) {
			struct te_frame_hdr h = {.size = op == TE_FRAME_OP_HELLO ? 0
										 : 0xdeadbeef01ULL,
						 .addr = 0xfedcba9876543210ULL,
						 .op = op,
						 .proto = (uint8_t)protos[p],
						 .req_id = 0xa5a5a5a5};
			struct te_frame_hdr d;
			uint8_t out[TE_FRAME_HDR_LEN];
			int rc = te_frame_hdr_encode(&h, out);

			if (op == TE_FRAME_OP_HELLO && protos[p] != TE_PROTO_NATIVE) {
				CU_ASSERT_EQUAL(rc, -EINVAL);
				continue;
			}
			TIDE_UT_OK(rc);
			CU_ASSERT_EQUAL(out[16], opc_base[p] | op);
			TIDE_UT_OK(te_frame_hdr_decode(out, sizeof(out), &d));
			CU_ASSERT_EQUAL(d.size, h.size);
			CU_ASSERT_EQUAL(d.addr, h.addr);
			CU_ASSERT_EQUAL(d.op, op);
			CU_ASSERT_EQUAL(d.proto, protos[p]);
			CU_ASSERT_EQUAL(d.req_id, protos[p] == TE_PROTO_NATIVE ? 0xa5a5a5a5 : 0);
		}
	}
}

static void
test_decode_rejects_bad_opcodes(void)
{
	uint8_t b[TE_FRAME_HDR_LEN];
	struct te_frame_hdr d = {.size = 77};

	/* Every opcode byte: only 0,1, 0x80,0x81, 0x40,0x41,0x42 are valid. */
	for (unsigned opc = 0; opc < 256; opc++) {
		bool valid = opc == 0 || opc == 1 || opc == 0x80 || opc == 0x81 || opc == 0x40 ||
			     opc == 0x41 || opc == 0x42;
		int rc;

		memset(b, 0, sizeof(b));
		b[16] = (uint8_t)opc;
		rc = te_frame_hdr_decode(b, sizeof(b), &d);
		CU_ASSERT_EQUAL(rc, valid ? 0 : -EPROTO);
	}
	/* a failed decode leaves the output untouched */
	memset(b, 0, sizeof(b));
	b[16] = 0xc1;
	d.size = 77;
	CU_ASSERT_EQUAL(te_frame_hdr_decode(b, sizeof(b), &d), -EPROTO);
	CU_ASSERT_EQUAL(d.size, 77);
}

static void
test_decode_reserved_bits(void)
{
	uint8_t b[TE_FRAME_HDR_LEN];
	struct te_frame_hdr d;

	/* v1/v2 padding is ignored (Mooncake never checks it) */
	memcpy(b, v2_write, sizeof(b));
	memset(b + 17, 0xee, 7);
	TIDE_UT_OK(te_frame_hdr_decode(b, sizeof(b), &d));
	CU_ASSERT_EQUAL(d.req_id, 0);
	b[16] = 0x00;
	TIDE_UT_OK(te_frame_hdr_decode(b, sizeof(b), &d));
	/* native: bytes 17..19 must be zero, 20..23 are the id */
	for (int i = 17; i < 20; i++) {
		memset(b, 0, sizeof(b));
		b[16] = 0x41;
		b[i] = 1;
		CU_ASSERT_EQUAL(te_frame_hdr_decode(b, sizeof(b), &d), -EPROTO);
	}
	memset(b, 0, sizeof(b));
	b[16] = 0x41;
	memset(b + 20, 0xff, 4);
	TIDE_UT_OK(te_frame_hdr_decode(b, sizeof(b), &d));
	CU_ASSERT_EQUAL(d.req_id, 0xffffffffu);
	/* HELLO carries no payload */
	memset(b, 0, sizeof(b));
	b[16] = 0x42;
	b[0] = 1;
	CU_ASSERT_EQUAL(te_frame_hdr_decode(b, sizeof(b), &d), -EPROTO);
	struct te_frame_hdr h = {.op = TE_FRAME_OP_HELLO, .proto = TE_PROTO_NATIVE, .size = 1};
	CU_ASSERT_EQUAL(te_frame_hdr_encode(&h, b), -EINVAL);
	h.op = 3;
	h.size = 0;
	CU_ASSERT_EQUAL(te_frame_hdr_encode(&h, b), -EINVAL);
	h.op = 0;
	h.proto = 4;
	CU_ASSERT_EQUAL(te_frame_hdr_encode(&h, b), -EINVAL);
}

static void
test_decode_truncated(void)
{
	struct te_frame_hdr d;
	struct te_frame_reply r;
	uint8_t rb[TE_FRAME_REPLY_LEN] = {0};

	for (size_t n = 0; n < TE_FRAME_HDR_LEN; n++)
		CU_ASSERT_EQUAL(te_frame_hdr_decode(v2_write, n, &d), -EAGAIN);
	TIDE_UT_OK(te_frame_hdr_decode(v2_write, TE_FRAME_HDR_LEN, &d));
	te_frame_status_encode(TE_FRAME_ST_OK, rb);
	for (size_t n = 0; n < TE_FRAME_REPLY_LEN; n++)
		CU_ASSERT_EQUAL(te_frame_reply_decode(rb, n, &r), -EAGAIN);
}

static void
test_status_words(void)
{
	uint8_t b[TE_FRAME_STATUS_LEN];
	static const uint8_t ok_le[8] = {0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d};

	te_frame_status_encode(TE_FRAME_ST_OK, b);
	CU_ASSERT_EQUAL(memcmp(b, ok_le, 8), 0);
	CU_ASSERT_EQUAL(te_frame_status_decode(b), TE_FRAME_ST_OK);
	te_frame_status_encode(TE_FRAME_ST_REJECTED, b);
	CU_ASSERT_EQUAL(b[0], 1);
	CU_ASSERT_EQUAL(te_frame_status_decode(b), 0x4D43545600000001ULL);
	CU_ASSERT_EQUAL(te_frame_status_err(TE_FRAME_ST_OK), 0);
	CU_ASSERT_EQUAL(te_frame_status_err(TE_FRAME_ST_REJECTED), -EFAULT);
	CU_ASSERT_EQUAL(te_frame_status_err(TE_FRAME_ST_STALE), -ESTALE);
	CU_ASSERT_EQUAL(te_frame_status_err(TE_FRAME_ST_OK | 3), -EPROTO);
	CU_ASSERT_EQUAL(te_frame_status_err(0), -EPROTO);
}

static void
test_native_reply(void)
{
	struct te_frame_reply r = {.status = TE_FRAME_ST_STALE, .req_id = 0xcafef00d}, d;
	uint8_t b[TE_FRAME_REPLY_LEN];

	te_frame_reply_encode(&r, b);
	CU_ASSERT_EQUAL(b[0], 2);
	CU_ASSERT_EQUAL(b[8], 0x0d);
	CU_ASSERT_EQUAL(b[12] | b[13] | b[14] | b[15], 0);
	TIDE_UT_OK(te_frame_reply_decode(b, sizeof(b), &d));
	CU_ASSERT_EQUAL(d.status, TE_FRAME_ST_STALE);
	CU_ASSERT_EQUAL(d.req_id, 0xcafef00d);
	/* reserved word */
	b[14] = 1;
	CU_ASSERT_EQUAL(te_frame_reply_decode(b, sizeof(b), &d), -EPROTO);
	/* unknown status */
	r.status = TE_FRAME_ST_OK | 7;
	te_frame_reply_encode(&r, b);
	CU_ASSERT_EQUAL(te_frame_reply_decode(b, sizeof(b), &d), -EPROTO);
	r.status = 0;
	te_frame_reply_encode(&r, b);
	CU_ASSERT_EQUAL(te_frame_reply_decode(b, sizeof(b), &d), -EPROTO);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_frame", NULL, NULL);

	CU_add_test(s, "encode_known_bytes", test_encode_known_bytes);
	CU_add_test(s, "roundtrip_every_opcode", test_roundtrip_every_opcode);
	CU_add_test(s, "decode_rejects_bad_opcodes", test_decode_rejects_bad_opcodes);
	CU_add_test(s, "decode_reserved_bits", test_decode_reserved_bits);
	CU_add_test(s, "decode_truncated", test_decode_truncated);
	CU_add_test(s, "status_words", test_status_words);
	CU_add_test(s, "native_reply", test_native_reply);
}

TIDE_UT_MAIN(register_tests)
