/* SPDX-License-Identifier: Apache-2.0 */
/* Segment descriptor and rpc_meta JSON: round trips, every rejection rule, contains/equal. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "te_meta.h"
#include "tide_ut.h"

static char err[256];

static int
dec(const char *json, struct te_desc **out)
{
	err[0] = '\0';
	return te_desc_decode(json, strlen(json), out, err, sizeof(err));
}

/* Decoding must fail with -EPROTO and an err text containing `field`. */
static void
expect_reject(const char *json, const char *field)
{
	struct te_desc *d = NULL;
	int rc = dec(json, &d);

	CU_ASSERT_EQUAL(rc, -EPROTO);
	CU_ASSERT_PTR_NULL(d);
	if (strstr(err, field) == NULL) {
		printf("\n  json %.120s\n  err '%s' lacks '%s'\n", json, err, field);
		CU_FAIL("err text does not name the field");
	}
	te_desc_free(d);
}

static struct te_desc *
mk(uint32_t n)
{
	struct te_desc *d = calloc(1, sizeof(*d));

	snprintf(d->name, sizeof(d->name), "10.0.0.1:12345");
	snprintf(d->protocol, sizeof(d->protocol), "tcp");
	snprintf(d->timestamp, sizeof(d->timestamp), "2026-08-22 12:00:00");
	d->tcp_data_port = 40123;
	d->tcp_proto_version = 2;
	d->instance = UINT64_C(0x0123456789abcdef);
	d->nbufs = n;
	d->bufs = calloc(n ? n : 1, sizeof(*d->bufs));
	return d;
}

static void
test_roundtrip(void)
{
	struct te_desc *d = mk(3), *back = NULL;
	char *json = NULL;

	/* Unsorted on purpose; one address above 2^53 (string form), one exactly 2^53-1. */
	d->bufs[0] = (struct te_desc_buf){"b0", UINT64_C(0x7f0000001000), 4096};
	d->bufs[1] = (struct te_desc_buf){"b1", UINT64_C(0x1000), 1};
	d->bufs[2] = (struct te_desc_buf){"b2", UINT64_C(0xfff0000000000000), UINT64_C(0xffffff)};
	TIDE_UT_OK(te_desc_encode(d, &json));
	CU_ASSERT_PTR_NOT_NULL_FATAL(json);
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"name\":\"10.0.0.1:12345\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"protocol\":\"tcp\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"tcp_data_port\":40123"));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"tcp_proto_version\":2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"timestamp\":\"2026-08-22 12:00:00\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"tide_instance\":\"0123456789abcdef\""));
	/* Exact integer, not exponent form. */
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"addr\":139637976731648"));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"addr\":\"18442240474082181120\""));
	TIDE_UT_OK(te_desc_decode(json, strlen(json), &back, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL_FATAL(back);
	CU_ASSERT_EQUAL(back->nbufs, 3);
	CU_ASSERT_EQUAL(back->bufs[0].addr, 0x1000);
	CU_ASSERT_STRING_EQUAL(back->bufs[0].name, "b1");
	CU_ASSERT_EQUAL(back->bufs[1].addr, UINT64_C(0x7f0000001000));
	CU_ASSERT_EQUAL(back->bufs[2].addr, UINT64_C(0xfff0000000000000));
	CU_ASSERT_EQUAL(back->bufs[2].length, UINT64_C(0xffffff));
	CU_ASSERT_STRING_EQUAL(back->timestamp, d->timestamp);
	CU_ASSERT_STRING_EQUAL(back->protocol, "tcp");
	CU_ASSERT_FALSE(te_desc_equal(d, back)); /* d is unsorted */
	TIDE_UT_OK(te_desc_normalize(d, err, sizeof(err)));
	CU_ASSERT_TRUE(te_desc_equal(d, back));
	free(json);
	te_desc_free(back);
	te_desc_free(d);
}

static void
test_exact_limit(void)
{
	struct te_desc *d = mk(2), *back = NULL;
	uint64_t lim = UINT64_C(1) << 53;
	char *json = NULL;

	d->bufs[0] = (struct te_desc_buf){"a", lim - 2, 1};
	d->bufs[1] = (struct te_desc_buf){"b", lim, 1};
	TIDE_UT_OK(te_desc_encode(d, &json));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"addr\":9007199254740990"));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"addr\":\"9007199254740992\""));
	TIDE_UT_OK(te_desc_decode(json, strlen(json), &back, err, sizeof(err)));
	CU_ASSERT_TRUE(te_desc_equal(d, back));
	free(json);
	te_desc_free(back);
	te_desc_free(d);
}

static void
test_mooncake_sample(void)
{
	/* Stock Mooncake output (spec 6.3) plus RDMA-only keys, no version, no instance. */
	const char *j =
		"{\"name\":\"10.0.0.1:12345\",\"protocol\":\"tcp\",\"tcp_data_port\":40123,"
		"\"timestamp\":\"2026-08-22 12:00:00\",\"devices\":[],"
		"\"priority_matrix\":{},\"buffers\":[{\"name\":\"10.0.0.1:12345\","
		"\"addr\":140737488355328,\"length\":1073741824,\"rkey\":[1],\"lkey\":[2]}]}";
	struct te_desc *d = NULL;

	TIDE_UT_OK(dec(j, &d));
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL(d->tcp_proto_version, TE_PROTO_V1);
	CU_ASSERT_EQUAL(d->instance, 0);
	CU_ASSERT_EQUAL(d->tcp_data_port, 40123);
	CU_ASSERT_EQUAL(d->nbufs, 1);
	CU_ASSERT_EQUAL(d->bufs[0].addr, UINT64_C(140737488355328));
	CU_ASSERT_EQUAL(d->bufs[0].length, UINT64_C(1073741824));
	te_desc_free(d);
	/* No buffers key, null buffers, empty array: all zero buffers. */
	TIDE_UT_OK(dec("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":1}", &d));
	CU_ASSERT_EQUAL(d->nbufs, 0);
	te_desc_free(d);
	TIDE_UT_OK(dec("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":65535,"
		       "\"buffers\":null}",
		       &d));
	CU_ASSERT_EQUAL(d->tcp_data_port, 65535);
	te_desc_free(d);
	TIDE_UT_OK(dec("{\"name\":\"n\",\"protocol\":\"rdma\",\"tcp_data_port\":1,\"buffers\":[],"
		       "\"tide_instance\":\"FF\",\"timestamp\":"
		       "\"0123456789012345678901234567890123456789\"}",
		       &d));
	CU_ASSERT_EQUAL(d->instance, 0xff);
	CU_ASSERT_STRING_EQUAL(d->protocol, "rdma");
	CU_ASSERT_EQUAL(strlen(d->timestamp), sizeof(d->timestamp) - 1); /* truncated */
	te_desc_free(d);
	/* Decimal-string addr/length of any u64 size. */
	TIDE_UT_OK(dec("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":1,\"buffers\":[{"
		       "\"name\":\"x\",\"addr\":\"18446744073709551614\",\"length\":\"1\"}]}",
		       &d));
	CU_ASSERT_EQUAL(d->bufs[0].addr, UINT64_MAX - 1);
	te_desc_free(d);
}

#define HDR       "\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":9"
#define BUF(a, l) "{\"name\":\"x\",\"addr\":" a ",\"length\":" l "}"
#define ONE(a, l) "{" HDR ",\"buffers\":[" BUF(a, l) "]}"

static void
test_missing(void)
{
	expect_reject("{\"protocol\":\"tcp\",\"tcp_data_port\":9}", "name: missing");
	expect_reject("{\"name\":\"n\",\"tcp_data_port\":9}", "protocol: missing");
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\"}", "tcp_data_port: missing");
	expect_reject("{" HDR ",\"buffers\":[{\"addr\":1,\"length\":1}]}",
		      "buffers[0].name: missing");
	expect_reject("{" HDR ",\"buffers\":[" BUF("1", "1") ",{\"name\":\"y\",\"length\":1}]}",
		      "buffers[1].addr: missing");
	expect_reject("{" HDR ",\"buffers\":[{\"name\":\"y\",\"addr\":1}]}",
		      "buffers[0].length: missing");
	expect_reject("{\"name\":\"\",\"protocol\":\"tcp\",\"tcp_data_port\":9}", "name: empty");
	expect_reject("{" HDR ",\"buffers\":[{\"name\":\"\",\"addr\":1,\"length\":1}]}",
		      "buffers[0].name: empty");
	expect_reject(ONE("0", "1"), "buffers[0].addr: zero");
	expect_reject(ONE("1", "0"), "buffers[0].length: zero");
	expect_reject(ONE("\"0\"", "1"), "buffers[0].addr: zero");
}

static void
test_types(void)
{
	expect_reject("{\"name\":5,\"protocol\":\"tcp\",\"tcp_data_port\":9}",
		      "name: not a string");
	expect_reject("{\"name\":\"n\",\"protocol\":[],\"tcp_data_port\":9}", "protocol: not a");
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":\"9\"}",
		      "tcp_data_port: not a number");
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":null}",
		      "tcp_data_port: not a number");
	expect_reject("{" HDR ",\"tcp_proto_version\":\"2\"}", "tcp_proto_version: not a number");
	expect_reject("{" HDR ",\"timestamp\":5}", "timestamp: not a string");
	expect_reject("{" HDR ",\"buffers\":{}}", "buffers: not an array");
	expect_reject("{" HDR ",\"buffers\":\"x\"}", "buffers: not an array");
	expect_reject("{" HDR ",\"buffers\":[5]}", "buffers[0]: not an object");
	expect_reject(ONE("true", "1"), "buffers[0].addr: not a number or decimal string");
	expect_reject(ONE("1", "[1]"), "buffers[0].length: not a number");
	expect_reject(ONE("\"0x10\"", "1"), "buffers[0].addr: string is not a decimal");
	expect_reject(ONE("\"-5\"", "1"), "buffers[0].addr: string is not a decimal");
	expect_reject(ONE("\" 5\"", "1"), "buffers[0].addr: string is not a decimal");
	expect_reject(ONE("\"\"", "1"), "buffers[0].addr: empty string");
	expect_reject("{" HDR ",\"tide_instance\":5}", "tide_instance");
	expect_reject("{" HDR ",\"tide_instance\":\"xyz\"}", "tide_instance");
	expect_reject("{" HDR ",\"tide_instance\":\"\"}", "tide_instance");
	expect_reject("{" HDR ",\"tide_instance\":\"00112233445566778\"}", "tide_instance");
}

static void
test_ranges(void)
{
	char big[400];

	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":0}", "tcp_data_port");
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":65536}",
		      "tcp_data_port");
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":-1}",
		      "tcp_data_port: negative");
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":80.5}",
		      "tcp_data_port: not an integer");
	expect_reject("{" HDR ",\"tcp_proto_version\":0}", "tcp_proto_version");
	expect_reject("{" HDR ",\"tcp_proto_version\":4294967296}", "tcp_proto_version");
	expect_reject(ONE("-4096", "1"), "buffers[0].addr: negative");
	expect_reject(ONE("4096.5", "1"), "buffers[0].addr: not an integer");
	expect_reject(ONE("1e300", "1"), "buffers[0].addr: number >= 2^53");
	expect_reject(ONE("9007199254740992", "1"), "buffers[0].addr: number >= 2^53");
	expect_reject(ONE("9007199254740993", "1"), "buffers[0].addr: number >= 2^53");
	expect_reject(ONE("1", "\"18446744073709551616\""), "buffers[0].length: out of range");
	expect_reject(ONE("1", "\"99999999999999999999999\""), "buffers[0].length: out of range");
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcpxxxxxxxxxxxxxxx\",\"tcp_data_port\":9}",
		      "protocol: longer than 15");
	memset(big, 'a', sizeof(big));
	memcpy(big, "{\"name\":\"", 9);
	snprintf(big + 9 + 256, sizeof(big) - 9 - 256,
		 "\",\"protocol\":\"tcp\",\"tcp_data_port\":9}");
	expect_reject(big, "name: longer than 255");
	/* 255 bytes is fine. */
	{
		struct te_desc *d = NULL;

		memmove(big + 9 + 255, big + 9 + 256, strlen(big + 9 + 256) + 1);
		TIDE_UT_OK(dec(big, &d));
		CU_ASSERT_EQUAL(d != NULL ? strlen(d->name) : 0, 255);
		te_desc_free(d);
	}
}

static void
test_wrap(void)
{
	struct te_desc *d = NULL;

	/* addr + length == 2^64: the end does not fit. */
	expect_reject(ONE("\"18446744073709551606\"", "10"), "wraps");
	expect_reject(ONE("\"18446744073709551615\"", "\"18446744073709551615\""), "wraps");
	expect_reject(ONE("4096", "\"18446744073709551615\""), "wraps");
	TIDE_UT_OK(dec(ONE("\"18446744073709551606\"", "9"), &d));
	CU_ASSERT_TRUE(d != NULL && te_desc_contains(d, UINT64_MAX - 1, 1));
	CU_ASSERT_FALSE(d != NULL && te_desc_contains(d, UINT64_MAX - 1, 2));
	te_desc_free(d);
}

static void
test_overlap(void)
{
	struct te_desc *d = NULL;

	expect_reject("{" HDR ",\"buffers\":[" BUF("200", "10") "," BUF("100", "50") "," BUF(
			      "149", "10") "]}",
		      "overlaps");
	expect_reject("{" HDR ",\"buffers\":[" BUF("100", "1") "," BUF("100", "1") "]}",
		      "overlaps");
	/* Contained entirely. */
	expect_reject("{" HDR ",\"buffers\":[" BUF("100", "100") "," BUF("120", "1") "]}",
		      "buffers[1]: overlaps buffers[0]");
	/* Adjacent is fine. */
	TIDE_UT_OK(dec("{" HDR ",\"buffers\":[" BUF("150", "10") "," BUF("100", "50") "]}", &d));
	CU_ASSERT_TRUE(d != NULL && d->nbufs == 2 && d->bufs[0].addr == 100);
	CU_ASSERT_TRUE(d != NULL && !te_desc_contains(d, 149, 2));
	te_desc_free(d);
}

/* JSON with n buffers (non-overlapping, 4 KiB apart). */
static char *
many(uint32_t n)
{
	size_t cap = 128 + (size_t)n * 64, off;
	char *j = malloc(cap);

	off = (size_t)snprintf(j, cap, "{" HDR ",\"buffers\":[");
	for (uint32_t i = 0; i < n; i++)
		off += (size_t)snprintf(j + off, cap - off,
					"%s{\"name\":\"b\",\"addr\":%u,\"length\":4096}",
					i ? "," : "", 4096 * (i + 1));
	snprintf(j + off, cap - off, "]}");
	return j;
}

static void
test_huge_count(void)
{
	struct te_desc *d = NULL;
	char *j;

	j = many(TE_DESC_MAX_BUFS + 1);
	expect_reject(j, "buffers: 65537 entries");
	free(j);
	j = many(TE_DESC_MAX_BUFS);
	TIDE_UT_OK(dec(j, &d));
	CU_ASSERT_TRUE(d != NULL && d->nbufs == TE_DESC_MAX_BUFS);
	CU_ASSERT_TRUE(d != NULL && te_desc_contains(d, 4096 * 65536, 4096));
	CU_ASSERT_TRUE(d != NULL && !te_desc_contains(d, 4096 * 65537, 1));
	te_desc_free(d);
	free(j);
}

static void
test_malformed(void)
{
	struct te_desc *d = NULL;
	static const char *bad[] = {
		"",
		"{",
		"{\"name\":\"n\",",
		"[]",
		"\"str\"",
		"5",
		"null",
		"{" HDR "} junk",
		"{" HDR "}{}",
		"{\"name\":\"n\" \"protocol\":\"tcp\"}",
		"{'name':'n'}",
	};
	char deep[4100];
	char nul[] = "{" HDR "}\0{}";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_reject(bad[i], "json");
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = '\0';
	expect_reject(deep, "json");
	err[0] = '\0';
	CU_ASSERT_EQUAL(te_desc_decode(nul, sizeof(nul) - 1, &d, err, sizeof(err)), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "NUL"));
	CU_ASSERT_EQUAL(te_desc_decode(NULL, 0, &d, NULL, 0), -EPROTO);
	/* Not NUL-terminated but exact length: accepted. */
	TIDE_UT_OK(te_desc_decode(nul, strlen(nul), &d, NULL, 0));
	te_desc_free(d);
	/* Trailing whitespace is fine. */
	TIDE_UT_OK(dec("{" HDR "} \n", &d));
	te_desc_free(d);
}

static bool
linear_contains(const struct te_desc *d, uint64_t a, uint64_t l)
{
	for (uint32_t i = 0; i < d->nbufs; i++) {
		const struct te_desc_buf *b = &d->bufs[i];

		if (a >= b->addr && a - b->addr < b->length && l <= b->length - (a - b->addr))
			return true;
	}
	return false;
}

static void
test_contains(void)
{
	struct te_desc *d = mk(3);
	uint64_t seed = 42;

	d->bufs[0] = (struct te_desc_buf){"a", 0x3000, 0x100};
	d->bufs[1] = (struct te_desc_buf){"b", 0x1000, 0x1000};
	d->bufs[2] = (struct te_desc_buf){"c", 0x2000, 0x800};
	TIDE_UT_OK(te_desc_normalize(d, err, sizeof(err)));
	CU_ASSERT_TRUE(te_desc_contains(d, 0x1000, 0x1000));
	CU_ASSERT_TRUE(te_desc_contains(d, 0x1fff, 1));
	CU_ASSERT_TRUE(te_desc_contains(d, 0x1fff, 0));
	CU_ASSERT_FALSE(te_desc_contains(d, 0x1fff, 2)); /* straddles into the adjacent buffer */
	CU_ASSERT_FALSE(te_desc_contains(d, 0xfff, 1));
	CU_ASSERT_FALSE(te_desc_contains(d, 0, 0));
	CU_ASSERT_FALSE(te_desc_contains(d, 0x2800, 0)); /* gap */
	CU_ASSERT_TRUE(te_desc_contains(d, 0x30ff, 1));
	CU_ASSERT_FALSE(te_desc_contains(d, 0x3100, 0));
	CU_ASSERT_FALSE(te_desc_contains(d, UINT64_MAX, 0));
	CU_ASSERT_FALSE(te_desc_contains(d, 0x1800, UINT64_MAX)); /* no overflow */
	/* Randomised against a linear scan. */
	for (int i = 0; i < 20000; i++) {
		uint64_t a, l;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		a = (seed >> 33) % 0x3400;
		l = (seed >> 13) % 0x1200;
		if (i % 50 == 0)
			l = UINT64_MAX - (seed & 7);
		CU_ASSERT_EQUAL(te_desc_contains(d, a, l), linear_contains(d, a, l));
	}
	d->nbufs = 0;
	CU_ASSERT_FALSE(te_desc_contains(d, 0x1000, 0));
	te_desc_free(d);
}

/* An RDMA descriptor as Tide publishes it: devices, per-buffer keys, priority matrix. */
static void
test_rdma_roundtrip(void)
{
	struct te_desc *a = mk(2), *b = NULL;
	char *j = NULL;

	snprintf(a->protocol, sizeof(a->protocol), "rdma");
	a->ndevs = 2;
	a->devs[0] = (struct te_desc_dev){"mlx5_0", 0,
					  "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01"};
	a->devs[1] = (struct te_desc_dev){"mlx5_1", 7,
					  "fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:02"};
	a->bufs[0] = (struct te_desc_buf){"cpu:0", 0x1000, 10, 2, {11, 12}, {21, 22}};
	a->bufs[1] = (struct te_desc_buf){"cpu:1", 0x2000, 10, 2, {13, UINT32_MAX}, {23, 24}};
	TIDE_UT_OK(te_desc_encode(a, &j));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"devices\":[{\"name\":\"mlx5_0\",\"lid\":0,"));
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"rkey\":[13,4294967295],\"lkey\":[23,24]"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(j, "\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\",\"mlx5_1\"],[]],"));
	TIDE_UT_OK(dec(j, &b));
	CU_ASSERT_TRUE(te_desc_is_rdma(b));
	CU_ASSERT_TRUE(te_desc_equal(a, b));
	CU_ASSERT_EQUAL(b->devs[1].lid, 7);
	CU_ASSERT_EQUAL(b->bufs[1].rkey[1], UINT32_MAX);
	b->bufs[1].rkey[0]++;
	CU_ASSERT_FALSE(te_desc_equal(a, b)); /* re-registered: new keys */
	b->bufs[1].rkey[0]--;
	b->devs[0].gid[0] = '1';
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	free(j);
	te_desc_free(b);
	te_desc_free(a);
}

/* What a stock Mooncake RDMA node publishes (no tcp_proto_version, tcp_data_port 0). */
static void
test_rdma_mooncake_sample(void)
{
	const char *j =
		"{\"name\":\"10.0.0.2:12345\",\"protocol\":\"rdma\",\"tcp_data_port\":0,"
		"\"timestamp\":\"2026-08-22 12:00:00\",\"devices\":[{\"name\":\"mlx5_2\",\"lid\":0,"
		"\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02\"}],\"buffers\":[{"
		"\"name\":"
		"\"cpu:0\",\"addr\":140737488355328,\"length\":1073741824,\"rkey\":[2097664],"
		"\"lkey\":[2097664]}],\"priority_matrix\":{\"cpu:0\":[[\"mlx5_2\"],[]]}}";
	struct te_desc *d = NULL;

	TIDE_UT_OK(dec(j, &d));
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_TRUE(te_desc_is_rdma(d));
	CU_ASSERT_EQUAL(d->tcp_data_port, 0);
	CU_ASSERT_EQUAL(d->ndevs, 1);
	CU_ASSERT_STRING_EQUAL(d->devs[0].name, "mlx5_2");
	CU_ASSERT_EQUAL(d->bufs[0].nkeys, 1);
	CU_ASSERT_EQUAL(d->bufs[0].rkey[0], 2097664);
	te_desc_free(d);
	/* tcp_data_port may be absent in an RDMA descriptor, not in a TCP one. */
	TIDE_UT_OK(dec("{\"name\":\"n\",\"protocol\":\"rdma\"}", &d));
	CU_ASSERT_FALSE(te_desc_is_rdma(d)); /* no devices: not usable for RDMA */
	te_desc_free(d);
	expect_reject("{\"name\":\"n\",\"protocol\":\"tcp\"}", "tcp_data_port");
}

static void
test_rdma_rejects(void)
{
#define DEV  "\"devices\":[{\"name\":\"d0\",\"lid\":0,\"gid\":\"g\"}]"
#define HEAD "{\"name\":\"n\",\"protocol\":\"rdma\",\"tcp_data_port\":1,"
	expect_reject(HEAD "\"buffers\":[{\"name\":\"x\",\"addr\":1,\"length\":1,\"rkey\":[1],"
			   "\"lkey\":[1]}]}",
		      "devices");
	expect_reject(HEAD DEV ",\"buffers\":[{\"name\":\"x\",\"addr\":1,\"length\":1}]}",
		      "buffers[0].rkey");
	expect_reject(HEAD DEV ",\"buffers\":[{\"name\":\"x\",\"addr\":1,\"length\":1,"
			       "\"rkey\":[1,2],\"lkey\":[1,2]}]}",
		      "buffers[0].rkey");
	expect_reject(HEAD DEV ",\"buffers\":[{\"name\":\"x\",\"addr\":1,\"length\":1,"
			       "\"rkey\":[1],\"lkey\":[]}]}",
		      "buffers[0].lkey");
	expect_reject(HEAD DEV ",\"buffers\":[{\"name\":\"x\",\"addr\":1,\"length\":1,"
			       "\"rkey\":[4294967296],\"lkey\":[1]}]}",
		      "buffers[0].rkey[0]");
	expect_reject(HEAD "\"devices\":[{\"name\":\"d0\",\"lid\":0}]}", "devices[0].gid");
	expect_reject(HEAD "\"devices\":[{\"name\":\"\",\"gid\":\"g\"}]}", "devices[0].name");
	expect_reject(HEAD "\"devices\":[{\"name\":\"d\",\"gid\":\"g\",\"lid\":65536}]}",
		      "devices[0].lid");
	expect_reject(HEAD "\"devices\":{}}", "devices");
	{
		char big[2048];
		size_t off = (size_t)snprintf(big, sizeof(big), HEAD "\"devices\":[");

		for (int i = 0; i <= TE_DESC_MAX_DEVS; i++)
			off += (size_t)snprintf(big + off, sizeof(big) - off,
						"%s{\"name\":\"d%d\",\"gid\":\"g\"}", i ? "," : "",
						i);
		snprintf(big + off, sizeof(big) - off, "]}");
		expect_reject(big, "devices");
	}
#undef DEV
#undef HEAD
}

/* Tide's same-host extension: tide_pid, tide_host and a buffer's tide_shm round-trip and
 * take part in equality; a stock descriptor has none; bad values are refused by name. */
static void
test_shm_fields(void)
{
	struct te_desc *d = mk(2), *back = NULL;
	char *json = NULL;

	d->bufs[0] = (struct te_desc_buf){"plain", 0x1000, 4096};
	d->bufs[1] = (struct te_desc_buf){"seg", 0x200000, 1 << 20};
	d->bufs[1].shm = true;
	d->bufs[1].shm_fd = 17;
	d->bufs[1].shm_ino = UINT64_C(123456789);
	d->bufs[1].shm_off = 8192;
	d->pid = 4242;
	snprintf(d->host_id, sizeof(d->host_id), "b00t-1d/4026531836");
	TIDE_UT_OK(te_desc_encode(d, &json));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"tide_pid\":4242"));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"tide_host\":\"b00t-1d/4026531836\""));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(json, "\"tide_shm\":{\"fd\":17,\"ino\":123456789,\"off\":8192}"));
	TIDE_UT_OK(te_desc_decode(json, strlen(json), &back, err, sizeof(err)));
	CU_ASSERT_EQUAL(back->pid, 4242);
	CU_ASSERT_STRING_EQUAL(back->host_id, d->host_id);
	CU_ASSERT_FALSE(back->bufs[0].shm);
	CU_ASSERT_TRUE(back->bufs[1].shm);
	CU_ASSERT_EQUAL(back->bufs[1].shm_fd, 17);
	CU_ASSERT_EQUAL(back->bufs[1].shm_ino, 123456789);
	CU_ASSERT_EQUAL(back->bufs[1].shm_off, 8192);
	CU_ASSERT_TRUE(te_desc_equal(d, back));
	back->bufs[1].shm_ino++; /* the peer re-created its file */
	CU_ASSERT_FALSE(te_desc_equal(d, back));
	back->bufs[1].shm_ino--;
	back->pid++; /* another process */
	CU_ASSERT_FALSE(te_desc_equal(d, back));
	free(json);
	te_desc_free(back);
	back = NULL;
	/* Without a pid nothing is written: what a stock peer sees is unchanged. */
	d->pid = 0;
	d->bufs[1].shm = false;
	TIDE_UT_OK(te_desc_encode(d, &json));
	CU_ASSERT_PTR_NULL(strstr(json, "tide_pid"));
	CU_ASSERT_PTR_NULL(strstr(json, "tide_shm"));
	free(json);
	te_desc_free(d);
#define HEAD "{\"name\":\"n\",\"protocol\":\"tcp\",\"tcp_data_port\":1,"
#define SBUF "\"buffers\":[{\"name\":\"x\",\"addr\":4096,\"length\":1,"
	expect_reject(HEAD "\"tide_pid\":0}", "tide_pid");
	expect_reject(HEAD "\"tide_pid\":2147483648}", "tide_pid");
	expect_reject(HEAD "\"tide_pid\":7}", "tide_host");
	expect_reject(HEAD "\"tide_pid\":7,\"tide_host\":\"\"}", "tide_host");
	expect_reject(HEAD SBUF "\"tide_shm\":1}]}", "buffers[0].tide_shm");
	expect_reject(HEAD SBUF "\"tide_shm\":{\"ino\":1,\"off\":0}}]}", "buffers[0].tide_shm.fd");
	expect_reject(HEAD SBUF "\"tide_shm\":{\"fd\":-1,\"ino\":1,\"off\":0}}]}",
		      "buffers[0].tide_shm.fd");
	expect_reject(HEAD SBUF "\"tide_shm\":{\"fd\":2147483648,\"ino\":1,\"off\":0}}]}",
		      "buffers[0].tide_shm.fd");
	expect_reject(HEAD SBUF "\"tide_shm\":{\"fd\":3,\"off\":0}}]}", "buffers[0].tide_shm.ino");
	expect_reject(HEAD SBUF "\"tide_shm\":{\"fd\":3,\"ino\":1}}]}", "buffers[0].tide_shm.off");
#undef SBUF
#undef HEAD
}

static void
test_equal_dup_normalize(void)
{
	struct te_desc *a = mk(2), *b = NULL;

	a->bufs[0] = (struct te_desc_buf){"x", 0x1000, 10};
	a->bufs[1] = (struct te_desc_buf){"y", 0x2000, 10};
	TIDE_UT_OK(te_desc_dup(a, &b));
	CU_ASSERT_PTR_NOT_EQUAL(a->bufs, b->bufs);
	CU_ASSERT_TRUE(te_desc_equal(a, b));
	snprintf(b->timestamp, sizeof(b->timestamp), "other");
	CU_ASSERT_TRUE(te_desc_equal(a, b)); /* informational field */
	snprintf(b->protocol, sizeof(b->protocol), "rdma");
	CU_ASSERT_FALSE(te_desc_equal(a, b)); /* decides the transport */
	snprintf(b->protocol, sizeof(b->protocol), "%s", a->protocol);
	b->instance++;
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	b->instance--;
	b->tcp_data_port++;
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	b->tcp_data_port--;
	b->tcp_proto_version = 1;
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	b->tcp_proto_version = 2;
	b->name[0] = 'X';
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	b->name[0] = '1';
	b->bufs[1].length = 11;
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	b->bufs[1].length = 10;
	b->bufs[1].name[0] = 'z';
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	b->bufs[1].name[0] = 'y';
	b->nbufs = 1;
	CU_ASSERT_FALSE(te_desc_equal(a, b));
	b->nbufs = 2;
	CU_ASSERT_TRUE(te_desc_equal(a, b));
	/* normalize rejects what decode rejects. */
	b->bufs[1].addr = 0x1005;
	CU_ASSERT_EQUAL(te_desc_normalize(b, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "overlaps"));
	b->bufs[1].addr = UINT64_MAX - 5;
	CU_ASSERT_EQUAL(te_desc_normalize(b, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "buffers[1]: addr + length wraps"));
	b->bufs[1].addr = 0;
	CU_ASSERT_EQUAL(te_desc_normalize(b, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "buffers[1].addr: zero"));
	te_desc_free(a);
	te_desc_free(b);
	te_desc_free(NULL);
}

static void
test_rpcmeta(void)
{
	char host[64], *j = NULL;
	uint16_t port = 0;

	TIDE_UT_OK(te_rpcmeta_encode("10.1.2.3", 12345, &j));
	CU_ASSERT_STRING_EQUAL(j, "{\"ip_or_host_name\":\"10.1.2.3\",\"rpc_port\":12345}");
	TIDE_UT_OK(te_rpcmeta_decode(j, strlen(j), host, sizeof(host), &port, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(host, "10.1.2.3");
	CU_ASSERT_EQUAL(port, 12345);
	free(j);
#define RPC_BAD(js, field)                                                                        \
	do {                                                                                      \
		err[0] = '\0';                                                                    \
		CU_ASSERT_EQUAL(te_rpcmeta_decode(js, strlen(js), host, sizeof(host), &port, err, \
						  sizeof(err)),                                   \
				-EPROTO);                                                         \
		CU_ASSERT_PTR_NOT_NULL(strstr(err, field));                                       \
	} while (0)
	RPC_BAD("{\"rpc_port\":1}", "ip_or_host_name: missing");
	RPC_BAD("{\"ip_or_host_name\":\"h\"}", "rpc_port: missing");
	RPC_BAD("{\"ip_or_host_name\":\"h\",\"rpc_port\":0}", "rpc_port");
	RPC_BAD("{\"ip_or_host_name\":\"h\",\"rpc_port\":70000}", "rpc_port");
	RPC_BAD("{\"ip_or_host_name\":\"h\",\"rpc_port\":\"80\"}", "rpc_port: not a number");
	RPC_BAD("{\"ip_or_host_name\":\"\",\"rpc_port\":80}", "ip_or_host_name: empty");
	RPC_BAD("{\"ip_or_host_name\":1,\"rpc_port\":80}", "ip_or_host_name: not a string");
	RPC_BAD("[1]", "json");
	RPC_BAD("{\"ip_or_host_name\":\"0123456789012345678901234567890123456789012345678901234"
		"56789012345678901234567890\",\"rpc_port\":80}",
		"ip_or_host_name: longer than 63");
}

/* Random mutations of a valid descriptor: decode never crashes, returns 0 or -EPROTO, and
 * whatever it accepts satisfies the invariants and survives a re-encode. */
static void
test_mutations(void)
{
	struct te_desc *d = mk(3), *out = NULL, *back = NULL;
	char *json = NULL, *m;
	uint64_t seed = 7;
	size_t n;
	unsigned accepted = 0;

	d->bufs[0] = (struct te_desc_buf){"a", 0x1000, 0x100};
	d->bufs[1] = (struct te_desc_buf){"b", 0x2000, 0x100};
	d->bufs[2] = (struct te_desc_buf){"c", 0x3000, 0x100};
	TIDE_UT_OK(te_desc_encode(d, &json));
	n = strlen(json);
	m = malloc(n + 1);
	for (int it = 0; it < 20000; it++) {
		size_t len = n;
		int rc;

		memcpy(m, json, n + 1);
		for (int k = 0; k < 1 + it % 4; k++) {
			size_t pos;

			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			pos = (size_t)(seed >> 33) % len;
			switch ((seed >> 20) % 3) {
			case 0: /* replace with a JSON-ish byte */
				m[pos] = "0123456789{}[]\",:-.eE\" x"[(seed >> 8) % 24];
				break;
			case 1: /* truncate */
				len = pos + 1;
				break;
			default: /* random byte */
				m[pos] = (char)(seed >> 40);
				break;
			}
		}
		rc = te_desc_decode(m, len, &out, NULL, 0);
		CU_ASSERT(rc == 0 || rc == -EPROTO);
		if (rc != 0)
			continue;
		accepted++;
		for (uint32_t i = 0; i < out->nbufs; i++) {
			CU_ASSERT(out->bufs[i].addr != 0 && out->bufs[i].length != 0);
			CU_ASSERT(out->bufs[i].length <= UINT64_MAX - out->bufs[i].addr);
			if (i > 0)
				CU_ASSERT(out->bufs[i - 1].addr + out->bufs[i - 1].length <=
					  out->bufs[i].addr);
		}
		{
			char *j2 = NULL;

			TIDE_UT_OK(te_desc_encode(out, &j2));
			TIDE_UT_OK(te_desc_decode(j2, strlen(j2), &back, NULL, 0));
			CU_ASSERT(back != NULL && te_desc_equal(out, back));
			te_desc_free(back);
			back = NULL;
			free(j2);
		}
		te_desc_free(out);
		out = NULL;
	}
	/* Some mutations (digits in numbers, names) keep the text valid. */
	CU_ASSERT(accepted > 0);
	free(m);
	free(json);
	te_desc_free(d);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_desc", NULL, NULL);

	CU_add_test(s, "roundtrip", test_roundtrip);
	CU_add_test(s, "exact_limit_2^53", test_exact_limit);
	CU_add_test(s, "mooncake_sample", test_mooncake_sample);
	CU_add_test(s, "rdma_roundtrip", test_rdma_roundtrip);
	CU_add_test(s, "rdma_mooncake_sample", test_rdma_mooncake_sample);
	CU_add_test(s, "rdma_rejects", test_rdma_rejects);
	CU_add_test(s, "missing_fields", test_missing);
	CU_add_test(s, "wrong_types", test_types);
	CU_add_test(s, "ranges", test_ranges);
	CU_add_test(s, "wrap_2^64", test_wrap);
	CU_add_test(s, "overlap", test_overlap);
	CU_add_test(s, "huge_count", test_huge_count);
	CU_add_test(s, "malformed", test_malformed);
	CU_add_test(s, "contains", test_contains);
	CU_add_test(s, "shm_fields", test_shm_fields);
	CU_add_test(s, "equal_dup_normalize", test_equal_dup_normalize);
	CU_add_test(s, "rpcmeta", test_rpcmeta);
	CU_add_test(s, "random_mutations", test_mutations);
}

TIDE_UT_MAIN(register_tests)
