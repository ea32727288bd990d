/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of store/master/mc_pack.c: MD5 hash, literal grammar, length
 * width selection, metainfo/literal/compat handling and the decoder's
 * rejections, on synthetic descriptors and on the named Mooncake types.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_internal.h"
#include "tide_mc_codec.h"
#include "tide_ut.h"

/* A synthetic message: {string s; vector<uint64> v; optional<uint64> o; bool b;
 * variant<uint64, string> var; expected<uint32> e}. */
struct syn {
	struct tide_mc_str s;
	struct tide_mc_u64_vec v;
	struct tide_mc_opt_u64 o;
	bool b;
	uint8_t var_idx;
	union {
		uint64_t n;
		struct tide_mc_str s;
	} var;
	struct {
		bool ok;
		int32_t err;
		uint32_t val;
	} e;
};

static const struct mc_type s_u64 = {.kind = MC_K_U64, .name = "u64", .size = 8};
static const struct mc_type s_u32 = {.kind = MC_K_U32, .name = "u32", .size = 4};
static const struct mc_type s_bool = {.kind = MC_K_BOOL, .name = "bool", .size = sizeof(bool)};
static const struct mc_type s_str = {
	.kind = MC_K_STR, .name = "string", .size = sizeof(struct tide_mc_str)};
static const struct mc_type s_vec = {.kind = MC_K_VEC,
				     .name = "vector<u64>",
				     .size = sizeof(struct tide_mc_u64_vec),
				     .elem = &s_u64};
static const struct mc_type s_opt = {.kind = MC_K_OPT,
				     .name = "optional<u64>",
				     .size = sizeof(struct tide_mc_opt_u64),
				     .elem = &s_u64,
				     .val_off = offsetof(struct tide_mc_opt_u64, val)};
static const struct mc_field s_alts[] = {
	{"n", offsetof(struct syn, var.n), &s_u64},
	{"s", offsetof(struct syn, var.s), &s_str},
};
static const struct mc_type s_var = {.kind = MC_K_VARIANT,
				     .name = "variant",
				     .size = sizeof(struct syn),
				     .fields = s_alts,
				     .nfields = 2,
				     .idx_off = offsetof(struct syn, var_idx)};
static const struct mc_type s_exp = {
	.kind = MC_K_EXPECTED,
	.name = "expected<u32>",
	.size = 12,
	.elem = &s_u32,
	.val_off = offsetof(struct syn, e.val) - offsetof(struct syn, e),
	.err_off = offsetof(struct syn, e.err) - offsetof(struct syn, e)};
static const struct mc_field s_fields[] = {
	{"s", offsetof(struct syn, s), &s_str},
	{"v", offsetof(struct syn, v), &s_vec},
	{"o", offsetof(struct syn, o), &s_opt},
	{"b", offsetof(struct syn, b), &s_bool},
	{"var", 0, &s_var},
	{"e", offsetof(struct syn, e), &s_exp},
};
static const struct mc_type s_syn = {.kind = MC_K_STRUCT,
				     .name = "syn",
				     .size = sizeof(struct syn),
				     .fields = s_fields,
				     .nfields = MC_ARRAY_SIZE(s_fields)};
static struct mc_root syn_root = {.type = &s_syn};

static void
syn_fill(struct syn *x, size_t slen, size_t vlen)
{
	memset(x, 0, sizeof(*x));
	x->s.len = slen;
	x->s.ptr = malloc(slen + 1);
	memset(x->s.ptr, 'a', slen);
	x->v.n = vlen;
	x->v.v = calloc(vlen ? vlen : 1, 8);
	for (size_t i = 0; i < vlen; i++) {
		x->v.v[i] = i * 0x0101010101ull;
	}
	x->o.has = true;
	x->o.val = 77;
	x->b = true;
	x->var_idx = 1;
	x->var.s.ptr = strdup("alt");
	x->var.s.len = 3;
	x->e.ok = false;
	x->e.err = -704;
}

static void
test_md5_and_literals(void)
{
	static const uint8_t lit_syn[] = {0xfd, 0x80, 0x0c, 0x84, 0x04, 0x85, 0x04, 0x0b, 0x86,
					  0x04, 0x80, 0x0c, 0xff, 0x87, 0x02, 0x01, 0xff};
	uint8_t lit[64];
	size_t len = 0;
	uint32_t h = 0;

	/* Spec 2.3: MD5("80 0c") = 9dcffa76 ... */
	TIDE_UT_OK(mc_md5_be32("\x80\x0c", 2, &h));
	CU_ASSERT_EQUAL(h, 0x9dcffa76);
	TIDE_UT_OK(tide_mc_fn_id_of_name("ServiceReady", &h));
	CU_ASSERT_EQUAL(h, 0x7b81bb56);

	TIDE_UT_OK(mc_literal(&s_syn, lit, sizeof(lit), &len));
	CU_ASSERT_EQUAL_FATAL(len, sizeof(lit_syn));
	CU_ASSERT_EQUAL(memcmp(lit, lit_syn, len), 0);
	len = 0;
	CU_ASSERT_EQUAL(mc_literal(&s_syn, lit, 5, &len), -EOVERFLOW);
}

/* Hashes of the named sub-types, spec 2.3/2.4 ("verified against the compiled library"). */
static void
test_named_type_hashes(void)
{
	static const struct {
		const char *name;
		uint32_t hash;
	} want[] = {
		{"UUID", 0x3c6d83e0},
		{"Segment", 0xd27f53e2},
		{"ReplicateConfig", 0xea05cf4e},
		{"ReplicateConfig(v0.3.12)", 0x2626ea60},
		{"Replica::Descriptor", 0x8ad08892},
		{"Replica::Descriptor(v0.3.12)", 0x965c564c},
		{"ObjectMeta", 0xc19fe54a},
		{"PingResponse", 0xf44b3fee},
		{"GetReplicaListResponse", 0xd7db95a6},
		{"string", 0x9dcffa76},
		{"pair<uint16,string>", 0x372be64c},
	};
	static const uint8_t uuid_lit[] = {0xfd, 0x04, 0x04, 0x89, 0x89, 0xff};

	TIDE_UT_OK(tide_mc_codec_init());
	for (size_t i = 0; i < MC_ARRAY_SIZE(want); i++) {
		struct mc_root r = {.type = mc_type_by_name(want[i].name)};

		CU_ASSERT_PTR_NOT_NULL_FATAL(r.type);
		TIDE_UT_OK(mc_root_init(&r));
		if (r.hash != want[i].hash) {
			fprintf(stderr, "%s: hash 0x%08x, spec 0x%08x\n", want[i].name, r.hash,
				want[i].hash);
		}
		CU_ASSERT_EQUAL(r.hash, want[i].hash);
		if (strcmp(want[i].name, "UUID") == 0) {
			CU_ASSERT_EQUAL(r.lit_len, sizeof(uuid_lit));
			CU_ASSERT_EQUAL(memcmp(r.lit, uuid_lit, sizeof(uuid_lit)), 0);
		}
	}
	CU_ASSERT_PTR_NULL(mc_type_by_name("NoSuchType"));
}

/* Widths: natural width follows the largest container; flags can force it up. */
static void
test_width_selection(void)
{
	static const struct {
		size_t slen, vlen;
		unsigned flags;
		unsigned width;
	} cases[] = {
		{3, 2, 0, 1},
		{255, 2, 0, 1},
		{256, 2, 0, 2},
		{3, 300, 0, 2},
		{65535, 0, 0, 2},
		{65536, 0, 0, 4},
		{3, 2, TIDE_MC_ENC_WIDTH_2, 2},
		{3, 2, TIDE_MC_ENC_WIDTH_4, 4},
		{3, 2, TIDE_MC_ENC_WIDTH_8, 8},
		{300, 2, TIDE_MC_ENC_WIDTH_4 | TIDE_MC_ENC_LITERAL, 4},
		{65536, 2, TIDE_MC_ENC_WIDTH_2, 4},
	};

	TIDE_UT_OK(mc_root_init(&syn_root));
	for (size_t i = 0; i < MC_ARRAY_SIZE(cases); i++) {
		struct tide_mc_buf b = {0};
		struct syn x, y = {0};
		struct tide_mc_err err = {0};
		const struct mc_root *roots[1] = {&syn_root};
		size_t which = 9, fixed;
		unsigned w = cases[i].width;
		bool lit = cases[i].flags & TIDE_MC_ENC_LITERAL;

		syn_fill(&x, cases[i].slen, cases[i].vlen);
		TIDE_UT_OK(mc_encode(&syn_root, &x, cases[i].flags, &b));
		/* hash, meta?, literal?, s, v, o(1+8), b(1), var(1 + w + 3), e(1+4) */
		fixed = 4 + ((w != 1 || lit) ? 1 : 0) + (lit ? syn_root.lit_len + 1 : 0) + w +
			cases[i].slen + w + 8 * cases[i].vlen + 9 + 1 + 1 + w + 3 + 5;
		CU_ASSERT_EQUAL(b.len, fixed);
		CU_ASSERT_EQUAL(b.data[0] & 1, (w != 1 || lit) ? 1 : 0);
		if (w != 1 || lit) {
			unsigned code = w == 1 ? 0 : w == 2 ? 1 : w == 4 ? 2 : 3;
			CU_ASSERT_EQUAL(b.data[4], (lit ? 4 : 0) | code << 3);
		}
		TIDE_UT_OK(mc_decode(roots, 1, b.data, b.len, &y, &which, "syn", "", &err));
		CU_ASSERT_EQUAL(which, 0);
		CU_ASSERT_TRUE(mc_equal(&s_syn, &x, &y));
		mc_free(&s_syn, &x);
		mc_free(&s_syn, &y);
		tide_mc_buf_release(&b);
	}
}

/* Encode a small syn, then corrupt it in targeted ways. */
static size_t
syn_small(struct tide_mc_buf *b, unsigned flags)
{
	struct syn x;

	syn_fill(&x, 2, 1);
	b->len = 0;
	CU_ASSERT_EQUAL(mc_encode(&syn_root, &x, flags, b), 0);
	mc_free(&s_syn, &x);
	return b->len;
}

static int
syn_decode(const uint8_t *p, size_t n, struct tide_mc_err *err)
{
	const struct mc_root *roots[1] = {&syn_root};
	struct syn y;
	size_t which;
	int rc;

	memset(&y, 0, sizeof(y));
	rc = mc_decode(roots, 1, p, n, &y, &which, "syn", "", err);
	if (rc == 0) {
		mc_free(&s_syn, &y);
	} else {
		/* On failure the value is zeroed again (nothing left to free). */
		static const struct syn zero;
		CU_ASSERT_EQUAL(memcmp(&y, &zero, sizeof(y)), 0);
	}
	return rc;
}

static void
test_decoder_rejects(void)
{
	struct tide_mc_buf b = {0};
	struct tide_mc_err err;
	size_t n;
	/* Layout without literal, width 1: hash(4) s(1+2) v(1+8) o(1+8) b(1) var(1+1+3) e(1+4) */
	const size_t off_v = 7, off_o = 16, off_b = 25, off_var = 26, off_e = 31;

	TIDE_UT_OK(mc_root_init(&syn_root));
	n = syn_small(&b, 0);
	CU_ASSERT_EQUAL_FATAL(n, 36);
	TIDE_UT_OK(syn_decode(b.data, n, &err));
	/* Trailing bytes are ignored, as struct_pack does. */
	CU_ASSERT_PTR_NOT_NULL_FATAL(mc_buf_reserve(&b, 3));
	TIDE_UT_OK(syn_decode(b.data, n + 3, &err));

	/* Truncation at every offset. */
	for (size_t k = 0; k < n; k++) {
		memset(&err, 0, sizeof(err));
		CU_ASSERT_EQUAL(syn_decode(b.data, k, &err), -EBADMSG);
		CU_ASSERT_EQUAL(err.errc, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS);
		CU_ASSERT_TRUE(err.offset <= k);
		CU_ASSERT_NOT_EQUAL(err.msg[0], '\0');
	}

	b.data[off_b] = 2;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "b: bool byte is 0x02"));
	CU_ASSERT_EQUAL(err.offset, off_b);
	b.data[off_b] = 1;

	b.data[off_var] = 2;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "variant index 2 out of range"));
	b.data[off_var] = 1;

	b.data[off_o] = 3;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "o: optional has_value byte is 0x03"));
	b.data[off_o] = 1;

	b.data[off_e] = 7;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "expected has_value"));
	b.data[off_e] = 0;

	/* Count that cannot fit the remaining bytes: rejected before allocating. */
	b.data[off_v] = 0xff;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "v: count 255 of u64 needs at least 2040 bytes"));
	CU_ASSERT_EQUAL(err.offset, off_v);
	b.data[off_v] = 1;

	/* String longer than what is left. */
	b.data[4] = 200;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "s: string length 200 exceeds"));
	b.data[4] = 2;

	/* Hash mismatch, reported with the wanted hash. */
	b.data[1] ^= 0x10;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "matches no known layout"));
	CU_ASSERT_EQUAL(err.offset, 0);
	b.data[1] ^= 0x10;
	TIDE_UT_OK(syn_decode(b.data, n, &err));
	tide_mc_buf_release(&b);
}

static void
test_metainfo_handling(void)
{
	struct tide_mc_buf b = {0};
	struct tide_mc_err err;
	uint8_t tmp[256];
	size_t n, ll;

	TIDE_UT_OK(mc_root_init(&syn_root));
	ll = syn_root.lit_len;
	n = syn_small(&b, TIDE_MC_ENC_LITERAL);
	CU_ASSERT_EQUAL_FATAL(n, 36 + 1 + ll + 1);
	TIDE_UT_OK(syn_decode(b.data, n, &err));

	/* Unknown metainfo bits. */
	b.data[4] |= 0x40;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unknown bits"));
	b.data[4] &= (uint8_t)~0x40;

	/* A literal that differs from ours (same hash): rejected, as struct_pack does. */
	b.data[5 + 3] ^= 1;
	CU_ASSERT_EQUAL(syn_decode(b.data, n, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "type literal"));
	CU_ASSERT_EQUAL(err.offset, 5 + 3);
	b.data[5 + 3] ^= 1;

	/* Literal without NUL. */
	memcpy(tmp, b.data, 5 + ll);
	CU_ASSERT_EQUAL(syn_decode(tmp, 5 + ll, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "NUL"));

	/* Metainfo 0x00 with hash bit 0 (explicit width 1): accepted. */
	n = syn_small(&b, 0);
	memcpy(tmp, b.data, 4);
	tmp[0] |= 1;
	tmp[4] = 0;
	memcpy(tmp + 5, b.data + 4, n - 4);
	TIDE_UT_OK(syn_decode(tmp, n + 1, &err));

	/* Compatible-size field (bits 1:0 = 1 -> 2 bytes) is skipped. */
	tmp[4] = 1;
	tmp[5] = 0;
	tmp[6] = 0;
	memcpy(tmp + 7, b.data + 4, n - 4);
	TIDE_UT_OK(syn_decode(tmp, n + 3, &err));
	CU_ASSERT_EQUAL(syn_decode(tmp, 6, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "compatible size"));
	tide_mc_buf_release(&b);
}

static void
test_encoder_rejects(void)
{
	struct tide_mc_buf b = {0};
	struct syn x;

	TIDE_UT_OK(mc_root_init(&syn_root));
	syn_fill(&x, 2, 1);
	x.var_idx = 5;
	CU_ASSERT_EQUAL(mc_encode(&syn_root, &x, 0, &b), -EINVAL);
	x.var_idx = 1;
	free(x.s.ptr);
	x.s.ptr = NULL;
	CU_ASSERT_EQUAL(mc_encode(&syn_root, &x, 0, &b), -EINVAL);
	x.s.len = 0; /* NULL with length 0 is an empty string */
	TIDE_UT_OK(mc_encode(&syn_root, &x, 0, &b));
	CU_ASSERT_EQUAL(b.data[4], 0);
	free(x.v.v);
	x.v.v = NULL;
	CU_ASSERT_EQUAL(mc_encode(&syn_root, &x, 0, &b), -EINVAL);
	x.v.n = 0;
	mc_free(&s_syn, &x);
	tide_mc_buf_release(&b);
}

static void
test_min_wire(void)
{
	/* s(w) v(w) o(1) b(1) var(1 + min(8, w)) e(1 + min(4, 4)) */
	CU_ASSERT_EQUAL(mc_min_wire(&s_syn, 1), 1 + 1 + 1 + 1 + 2 + 5);
	CU_ASSERT_EQUAL(mc_min_wire(&s_syn, 8), 8 + 8 + 1 + 1 + 9 + 5);
	CU_ASSERT_EQUAL(mc_min_wire(mc_type_by_name("UUID"), 1), 16);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_pack", NULL, NULL);

	CU_add_test(s, "test_md5_and_literals", test_md5_and_literals);
	CU_add_test(s, "test_named_type_hashes", test_named_type_hashes);
	CU_add_test(s, "test_width_selection", test_width_selection);
	CU_add_test(s, "test_decoder_rejects", test_decoder_rejects);
	CU_add_test(s, "test_metainfo_handling", test_metainfo_handling);
	CU_add_test(s, "test_encoder_rejects", test_encoder_rejects);
	CU_add_test(s, "test_min_wire", test_min_wire);
}

TIDE_UT_MAIN(register_tests)
