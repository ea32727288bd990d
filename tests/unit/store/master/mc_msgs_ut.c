/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of store/master/mc_msgs.c (the message descriptors and the body
 * API), end to end through the frame functions:
 *  - golden: every frame of the real capture (vectors/, extracted by
 *    vectors/extract_pcap.py) decodes and re-encodes to the same bytes, its
 *    type literal equals the one computed from the descriptors, and the body
 *    stripped of metainfo+literal decodes to the same struct;
 *  - the spec's worked examples (no literal) byte for byte;
 *  - every type hash of the spec's tables (HEAD and v0.3.12.post1);
 *  - property: random values of every message, both directions, both
 *    layouts, random width/literal flags, round-trip (seed printed; set
 *    TIDE_MC_SEED to replay);
 *  - negative: truncation at every offset, wrong hash, huge counts and
 *    lengths, random mutations: all rejected with a message, no crash/leak.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_internal.h"
#include "tide_mc_codec.h"
#include "tide_ut.h"

#ifndef MC_VECTORS_DIR
#error "MC_VECTORS_DIR must name tests/unit/store/master/vectors"
#endif

/* ---- helpers ---------------------------------------------------------------------------- */

/* Hex bytes with "quoted text" inline; spaces and '|' ignored. Returns the length. */
static size_t
unhex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = 0;

	while (*s) {
		if (*s == ' ' || *s == '|') {
			s++;
		} else if (*s == '"') {
			for (s++; *s && *s != '"'; s++) {
				CU_ASSERT_FATAL(n < cap);
				out[n++] = (uint8_t)*s;
			}
			s += *s == '"';
		} else {
			unsigned v = 0;

			CU_ASSERT_FATAL(n < cap);
			CU_ASSERT_FATAL(sscanf(s, "%2x", &v) == 1);
			out[n++] = (uint8_t)v;
			s += 2;
		}
	}
	return n;
}

static enum tide_mc_fn
fn_by_name(const char *name)
{
	for (unsigned fn = 0; fn < TIDE_MC_FN_COUNT; fn++) {
		if (strcmp(tide_mc_fn_info((enum tide_mc_fn)fn)->name, name) == 0) {
			return (enum tide_mc_fn)fn;
		}
	}
	return TIDE_MC_FN_COUNT;
}

static const struct mc_type *
root_type(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout l)
{
	const struct mc_root *r = mc_msg_root(fn, is_resp, l);

	return r ? r->type : NULL;
}

static bool
str_is(const struct tide_mc_str *s, const char *want)
{
	return s->len == strlen(want) && memcmp(s->ptr, want, s->len) == 0;
}

static struct tide_mc_str
S(const char *s) {
	return (struct tide_mc_str){.ptr = (char *)s, .len = strlen(s)};
}

/* ---- type hashes (spec 2.4 and the v0.3.12.post1 paragraph) ----------------------------- */

static void
test_type_hashes_match_spec(void)
{
	static const struct {
		enum tide_mc_fn fn;
		bool resp;
		enum tide_mc_layout l;
		uint32_t hash;
	} want[] = {
		{TIDE_MC_FN_SERVICE_READY, true, 0, 0x1cb3cc34},
		{TIDE_MC_FN_GET_FSDIR, true, 0, 0x1cb3cc34},
		{TIDE_MC_FN_GET_STORAGE_CONFIG, true, 0, 0x9cb568ea},
		{TIDE_MC_FN_PING, false, 0, 0x3c6d83e0},
		{TIDE_MC_FN_PING, true, 0, 0x742a8f52},
		{TIDE_MC_FN_EXIST_KEY, false, 0, 0x7cf91ed8},
		{TIDE_MC_FN_EXIST_KEY, true, 0, 0x90e800d2},
		{TIDE_MC_FN_BATCH_EXIST_KEY, false, 0, 0x00f78d62},
		{TIDE_MC_FN_BATCH_EXIST_KEY, true, 0, 0x2a5f8c5c},
		{TIDE_MC_FN_GET_REPLICA_LIST, false, 0, 0x7cf91ed8},
		{TIDE_MC_FN_GET_REPLICA_LIST, true, 0, 0x88c6276c},
		{TIDE_MC_FN_BATCH_GET_REPLICA_LIST, false, 0, 0x00f78d62},
		{TIDE_MC_FN_BATCH_GET_REPLICA_LIST, true, 0, 0x20c5453a},
		{TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX, false, 0, 0x7cf91ed8},
		{TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX, true, 0, 0x7343c040},
		{TIDE_MC_FN_PUT_START, false, 0, 0xe385bd0e},
		{TIDE_MC_FN_UPSERT_START, false, 0, 0xe385bd0e},
		{TIDE_MC_FN_PUT_START, true, 0, 0xc43927a6},
		{TIDE_MC_FN_PUT_END, false, 0, 0xd1819222},
		{TIDE_MC_FN_UPSERT_END, false, 0, 0xd1819222},
		{TIDE_MC_FN_PUT_END, true, 0, 0xaf2868cc},
		{TIDE_MC_FN_PUT_REVOKE, false, 0, 0x1b7a228a},
		{TIDE_MC_FN_UPSERT_REVOKE, false, 0, 0x1b7a228a},
		{TIDE_MC_FN_PUT_REVOKE, true, 0, 0xaf2868cc},
		{TIDE_MC_FN_BATCH_PUT_START, false, 0, 0x5870c0a4},
		{TIDE_MC_FN_BATCH_UPSERT_START, false, 0, 0x5870c0a4},
		{TIDE_MC_FN_BATCH_PUT_START, true, 0, 0xad006d02},
		{TIDE_MC_FN_BATCH_PUT_END, false, 0, 0xf57ea7c8},
		{TIDE_MC_FN_BATCH_PUT_END, true, 0, 0x39fc52ce},
		{TIDE_MC_FN_BATCH_PUT_REVOKE, false, 0, 0x94ee5d44},
		{TIDE_MC_FN_BATCH_PUT_REVOKE, true, 0, 0x39fc52ce},
		{TIDE_MC_FN_BATCH_UPSERT_END, false, 0, 0xdce93710},
		{TIDE_MC_FN_BATCH_UPSERT_REVOKE, false, 0, 0xd6091496},
		{TIDE_MC_FN_REMOVE, false, 0, 0x18e89fee},
		{TIDE_MC_FN_REMOVE, true, 0, 0xaf2868cc},
		{TIDE_MC_FN_REMOVE_BY_REGEX, false, 0, 0x18e89fee},
		{TIDE_MC_FN_REMOVE_BY_REGEX, true, 0, 0xb83381fe},
		{TIDE_MC_FN_REMOVE_ALL, false, 0, 0x48a6c274},
		{TIDE_MC_FN_REMOVE_ALL, true, 0, 0x86666834},
		{TIDE_MC_FN_BATCH_REMOVE, false, 0, 0x197a9ca0},
		{TIDE_MC_FN_BATCH_REMOVE, true, 0, 0x39fc52ce},
		{TIDE_MC_FN_MOUNT_SEGMENT, false, 0, 0x9ef70dae},
		{TIDE_MC_FN_MOUNT_SEGMENT, true, 0, 0xaf2868cc},
		{TIDE_MC_FN_REMOUNT_SEGMENT, false, 0, 0xc6c66b88},
		{TIDE_MC_FN_UNMOUNT_SEGMENT, false, 0, 0xd4c512e0},
		{TIDE_MC_FN_GRACEFUL_UNMOUNT_SEGMENT, false, 0, 0x8e092e9c},
		/* Not in the spec's table: MD5 of the literals fd 84 80 0c fd 04 04 89 89 ff 80
		 * 0c ff (tuple<vector<string>,UUID,string>) and 87 84 80 0c 01
		 * (expected<vector<string>,ErrorCode>), built from parts the hashes above check. */
		{TIDE_MC_FN_BATCH_REPLICA_CLEAR, false, 0, 0x472b2fa2},
		{TIDE_MC_FN_BATCH_REPLICA_CLEAR, true, 0, 0xe108bdea},
		/* v0.3.12.post1 */
		{TIDE_MC_FN_PUT_START, false, 1, 0x6920ea5c},
		{TIDE_MC_FN_BATCH_PUT_START, false, 1, 0x80485c74},
		{TIDE_MC_FN_PUT_END, false, 1, 0x1b7a228a},
		{TIDE_MC_FN_BATCH_PUT_END, false, 1, 0x94ee5d44},
		{TIDE_MC_FN_GET_REPLICA_LIST, true, 1, 0x75ecf440},
		{TIDE_MC_FN_BATCH_GET_REPLICA_LIST, true, 1, 0x0a20c6b8},
		{TIDE_MC_FN_PUT_START, true, 1, 0x12e5cdba},
		{TIDE_MC_FN_BATCH_PUT_START, true, 1, 0xac1d82a2},
		{TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX, true, 1, 0xf67fa572},
		{TIDE_MC_FN_EXIST_KEY, true, 1, 0x90e800d2},
		{TIDE_MC_FN_BATCH_UPSERT_END, false, 1, 0xdce93710},
	};
	const uint8_t *lit;
	size_t len;
	uint32_t h;

	for (size_t i = 0; i < MC_ARRAY_SIZE(want); i++) {
		h = 0;
		TIDE_UT_OK(tide_mc_type_hash(want[i].fn, want[i].resp, want[i].l, &h));
		if (h != want[i].hash) {
			fprintf(stderr, "%s %s layout %d: 0x%08x, spec 0x%08x\n",
				tide_mc_fn_info(want[i].fn)->name, want[i].resp ? "result" : "args",
				want[i].l, h, want[i].hash);
		}
		CU_ASSERT_EQUAL(h, want[i].hash);
	}
	CU_ASSERT_EQUAL(tide_mc_type_literal(TIDE_MC_FN_SERVICE_READY, false, 0, &lit, &len),
			-ENOENT);
	CU_ASSERT_EQUAL(tide_mc_type_literal(TIDE_MC_FN_COPY_START, false, 0, &lit, &len), -EINVAL);
	CU_ASSERT_EQUAL(tide_mc_type_hash(TIDE_MC_FN_PING, false, 2, &h), -EINVAL);
}

/* ---- golden: the capture ---------------------------------------------------------------- */

static const struct tide_mc_uuid cap_client = {7444150053293465496ull, 8278782726672222385ull};
static const struct tide_mc_uuid cap_segment = {306758337640020552ull, 2559670044879404672ull};

static bool
uuid_is(const struct tide_mc_uuid *u, const struct tide_mc_uuid *w)
{
	return u->first == w->first && u->second == w->second;
}

static void
check_capture_segment(const struct tide_mc_segment *s)
{
	CU_ASSERT_TRUE(uuid_is(&s->id, &cap_segment));
	CU_ASSERT_TRUE(str_is(&s->name, "127.0.0.1:13333"));
	CU_ASSERT_EQUAL(s->base, 140007897563136ull);
	CU_ASSERT_EQUAL(s->size, 536870912ull);
	CU_ASSERT_TRUE(str_is(&s->te_endpoint, "127.0.0.1:15366"));
	CU_ASSERT_TRUE(str_is(&s->protocol, "tcp"));
	CU_ASSERT_EQUAL(s->host_id.len, 0);
}

static void
check_capture_replica(const struct tide_mc_replica_desc *d, int32_t status)
{
	CU_ASSERT_EQUAL(d->id, 1);
	CU_ASSERT_EQUAL(d->kind, TIDE_MC_RK_MEMORY);
	CU_ASSERT_EQUAL(d->u.memory.size, 140);
	CU_ASSERT_EQUAL(d->u.memory.buffer_address, 140007897563136ull);
	CU_ASSERT_TRUE(str_is(&d->u.memory.protocol, "tcp"));
	CU_ASSERT_TRUE(str_is(&d->u.memory.transport_endpoint, "127.0.0.1:15366"));
	CU_ASSERT_EQUAL(d->status, status);
}

/* The decoded values the capture's text decode shows (mooncake-master-trace.txt). */
static void
check_capture_req(const struct tide_mc_req *r, unsigned conn, unsigned seq)
{
	switch (r->fn) {
	case TIDE_MC_FN_MOUNT_SEGMENT:
		check_capture_segment(&r->u.mount_segment.segment);
		CU_ASSERT_TRUE(uuid_is(&r->u.mount_segment.client_id, &cap_client));
		break;
	case TIDE_MC_FN_REMOUNT_SEGMENT:
		CU_ASSERT_EQUAL_FATAL(r->u.remount_segment.segments.n, 1);
		check_capture_segment(&r->u.remount_segment.segments.v[0]);
		CU_ASSERT_TRUE(uuid_is(&r->u.remount_segment.client_id, &cap_client));
		break;
	case TIDE_MC_FN_PING:
		CU_ASSERT_TRUE(uuid_is(&r->u.ping.id, &cap_client));
		break;
	case TIDE_MC_FN_GET_REPLICA_LIST:
	case TIDE_MC_FN_EXIST_KEY:
		CU_ASSERT_TRUE(str_is(&r->u.key.key, "smoke_key"));
		CU_ASSERT_TRUE(str_is(&r->u.key.tenant_id, "default"));
		CU_ASSERT_FALSE(r->layout_exact); /* same bytes in both layouts */
		break;
	case TIDE_MC_FN_REMOVE:
		CU_ASSERT_TRUE(str_is(&r->u.remove.key, "smoke_key"));
		/* conn 38228 removes without force (-706), conn 38244 with force. */
		CU_ASSERT_EQUAL(r->u.remove.force, conn == 38244);
		break;
	case TIDE_MC_FN_UNMOUNT_SEGMENT:
		CU_ASSERT_TRUE(uuid_is(&r->u.unmount_segment.segment_id, &cap_segment));
		CU_ASSERT_TRUE(uuid_is(&r->u.unmount_segment.client_id, &cap_client));
		break;
	case TIDE_MC_FN_PUT_START:
		CU_ASSERT_EQUAL(r->layout, TIDE_MC_LAYOUT_HEAD);
		CU_ASSERT_TRUE(r->layout_exact);
		CU_ASSERT_TRUE(uuid_is(&r->u.put_start.client_id, &cap_client));
		CU_ASSERT_TRUE(str_is(&r->u.put_start.key, "smoke_key"));
		CU_ASSERT_EQUAL(r->u.put_start.slice_length, 140);
		CU_ASSERT_EQUAL(r->u.put_start.config.replica_num, 1);
		CU_ASSERT_FALSE(r->u.put_start.config.soft_pin_ttl_ms.has);
		CU_ASSERT_FALSE(r->u.put_start.config.group_ids.has);
		CU_ASSERT_TRUE(str_is(&r->u.put_start.tenant_id, "default"));
		break;
	case TIDE_MC_FN_PUT_END:
		CU_ASSERT_EQUAL(r->layout, TIDE_MC_LAYOUT_HEAD);
		CU_ASSERT_TRUE(r->layout_exact);
		CU_ASSERT_TRUE(str_is(&r->u.put_end.meta.key, "smoke_key"));
		CU_ASSERT_FALSE(r->u.put_end.meta.object_checksum.has);
		CU_ASSERT_EQUAL(r->u.put_end.replica_type, TIDE_MC_REPLICA_ALL);
		break;
	case TIDE_MC_FN_FETCH_TASKS:
		CU_ASSERT_TRUE(uuid_is(&r->u.fetch_tasks.client_id, &cap_client));
		CU_ASSERT_EQUAL(r->u.fetch_tasks.batch_size, 16);
		break;
	default:
		break;
	}
	(void)seq;
}

static void
check_capture_resp(const struct tide_mc_resp *r, unsigned conn, unsigned seq)
{
	switch (r->fn) {
	case TIDE_MC_FN_SERVICE_READY:
		CU_ASSERT_TRUE(r->u.str.ok && str_is(&r->u.str.val, "2.0.0"));
		break;
	case TIDE_MC_FN_GET_STORAGE_CONFIG:
		CU_ASSERT_TRUE(r->u.storage_config.ok);
		CU_ASSERT_EQUAL(r->u.storage_config.val.fsdir.len, 0);
		CU_ASSERT_TRUE(r->u.storage_config.val.enable_disk_eviction);
		CU_ASSERT_EQUAL(r->u.storage_config.val.quota_bytes, 0);
		break;
	case TIDE_MC_FN_PING:
		CU_ASSERT_TRUE(r->u.ping.ok);
		CU_ASSERT_EQUAL(r->u.ping.val.view_version_id, 0);
		/* First Ping after the mount: NEED_REMOUNT; the later one: OK. */
		CU_ASSERT_EQUAL(r->u.ping.val.client_status,
				conn == 38228 ? TIDE_MC_CLIENT_NEED_REMOUNT : TIDE_MC_CLIENT_OK);
		break;
	case TIDE_MC_FN_REMOVE:
		if (conn == 38228) {
			CU_ASSERT_FALSE(r->u.status.ok);
			CU_ASSERT_EQUAL(r->u.status.err, TIDE_MC_EC_OBJECT_HAS_LEASE);
		} else {
			CU_ASSERT_TRUE(r->u.status.ok);
		}
		break;
	case TIDE_MC_FN_EXIST_KEY:
		CU_ASSERT_TRUE(r->u.exist.ok);
		CU_ASSERT_EQUAL(r->u.exist.val, conn == 38244); /* before / after the remove */
		break;
	case TIDE_MC_FN_GET_REPLICA_LIST:
		CU_ASSERT_EQUAL(r->layout, TIDE_MC_LAYOUT_HEAD);
		CU_ASSERT_TRUE(r->layout_exact);
		CU_ASSERT_TRUE_FATAL(r->u.replica_list.ok);
		CU_ASSERT_EQUAL_FATAL(r->u.replica_list.val.replicas.n, 1);
		check_capture_replica(&r->u.replica_list.val.replicas.v[0], TIDE_MC_RS_COMPLETE);
		CU_ASSERT_EQUAL(r->u.replica_list.val.lease_ttl_ms, 10000);
		CU_ASSERT_FALSE(r->u.replica_list.val.object_checksum.has);
		break;
	case TIDE_MC_FN_PUT_START:
		CU_ASSERT_TRUE_FATAL(r->u.put_start.ok);
		CU_ASSERT_EQUAL_FATAL(r->u.put_start.val.n, 1);
		check_capture_replica(&r->u.put_start.val.v[0], TIDE_MC_RS_PROCESSING);
		break;
	case TIDE_MC_FN_FETCH_TASKS:
		CU_ASSERT_TRUE(r->u.tasks.ok);
		CU_ASSERT_EQUAL(r->u.tasks.val.n, 0);
		break;
	case TIDE_MC_FN_MOUNT_SEGMENT:
	case TIDE_MC_FN_REMOUNT_SEGMENT:
	case TIDE_MC_FN_UNMOUNT_SEGMENT:
	case TIDE_MC_FN_PUT_END:
		CU_ASSERT_TRUE(r->u.status.ok);
		break;
	default:
		CU_FAIL("unexpected function in the capture");
	}
	(void)seq;
}

/* Body checks shared by requests and results; `u` is the decoded value. */
static void
golden_body(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout l, const uint8_t *body,
	    size_t blen, const void *u)
{
	const struct mc_type *t = root_type(fn, is_resp, l);
	union {
		struct tide_mc_req q;
		struct tide_mc_resp p;
	} again;
	struct tide_mc_buf plain = {0};
	struct tide_mc_err err = {0};
	const uint8_t *lit;
	size_t llen, skip;
	uint8_t *stripped;
	int rc;

	TIDE_UT_OK(tide_mc_type_literal(fn, is_resp, l, &lit, &llen));
	/* Release peers: hash bit 0, metainfo 0x04 (literal, width 1), literal, NUL. */
	CU_ASSERT_EQUAL_FATAL(body[0] & 1, 1);
	CU_ASSERT_EQUAL_FATAL(body[4], 0x04);
	CU_ASSERT_TRUE_FATAL(blen > 5 + llen);
	CU_ASSERT_EQUAL(memcmp(body + 5, lit, llen), 0);
	CU_ASSERT_EQUAL(body[5 + llen], 0);

	/* The same body without metainfo and literal, as an NDEBUG peer sends it. */
	skip = 5 + llen + 1;
	stripped = malloc(blen - skip + 4);
	CU_ASSERT_PTR_NOT_NULL_FATAL(stripped);
	mc_put_le32(stripped, mc_get_le32(body) & ~1u);
	memcpy(stripped + 4, body + skip, blen - skip);
	if (is_resp) {
		rc = tide_mc_resp_decode(fn, stripped, blen - skip + 4, &again.p, &err);
	} else {
		rc = tide_mc_req_decode(fn, stripped, blen - skip + 4, &again.q, &err);
	}
	if (rc != 0) {
		fprintf(stderr, "stripped %s: %s\n", tide_mc_fn_info(fn)->name, err.msg);
	}
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_TRUE(mc_equal(t, u, is_resp ? (void *)&again.p.u : (void *)&again.q.u));
	CU_ASSERT_EQUAL(is_resp ? again.p.layout : again.q.layout, l);
	/* ... and re-encoding without the literal gives exactly that body. */
	if (is_resp) {
		TIDE_UT_OK(tide_mc_resp_encode(&again.p, 0, &plain));
		tide_mc_resp_free(&again.p);
	} else {
		TIDE_UT_OK(tide_mc_req_encode(&again.q, 0, &plain));
		tide_mc_req_free(&again.q);
	}
	CU_ASSERT_EQUAL(plain.len, blen - skip + 4);
	CU_ASSERT_EQUAL(memcmp(plain.data, stripped, plain.len), 0);
	tide_mc_buf_release(&plain);
	free(stripped);
}

/* out holds exactly the len bytes at want. */
static void
expect_buf(const struct tide_mc_buf *out, const uint8_t *want, size_t len)
{
	CU_ASSERT_EQUAL(out->len, len);
	CU_ASSERT_EQUAL(memcmp(out->data, want, len < out->len ? len : out->len), 0);
}

/* A capture frame (file) decoded whole: rc 0 (else err says why) and every byte used. */
static void
expect_decoded(const char *file, int rc, const struct tide_mc_err *err, size_t used, size_t len)
{
	if (rc != 0) {
		fprintf(stderr, "%s: %s\n", file, err->msg);
	}
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL(used, len);
}

static void
test_golden_capture(void)
{
	char line[256], file[128], dir[8], name[64];
	unsigned conn, seq, nreq = 0, nresp = 0, fns_seen = 0;
	bool seen[TIDE_MC_FN_COUNT] = {0};
	FILE *m;

	m = fopen(MC_VECTORS_DIR "/manifest.txt", "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	while (fgets(line, sizeof(line), m) != NULL) {
		struct tide_mc_buf out = {0};
		struct tide_mc_err err = {0};
		enum tide_mc_fn fn;
		size_t len = 0, used = 0;
		uint8_t *buf;
		int rc;

		if (line[0] == '#' ||
		    sscanf(line, "%127s %7s %63s %u %u", file, dir, name, &conn, &seq) != 5) {
			continue;
		}
		fn = fn_by_name(name);
		CU_ASSERT_FATAL(fn < TIDE_MC_FN_CODEC_COUNT);
		buf = tide_ut_read_file(MC_VECTORS_DIR, file, &len);
		CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
		if (!seen[fn]) {
			seen[fn] = true;
			fns_seen++;
		}
		if (strcmp(dir, "req") == 0) {
			struct tide_mc_req_hdr h;
			struct tide_mc_req r;

			rc = tide_mc_req_frame_decode(buf, len, &h, &r, &used, &err);
			expect_decoded(file, rc, &err, used, len);
			CU_ASSERT_EQUAL(r.fn, fn);
			CU_ASSERT_EQUAL(h.seq_num, seq);
			check_capture_req(&r, conn, seq);
			TIDE_UT_OK(
				tide_mc_req_frame_encode(&r, h.seq_num, TIDE_MC_ENC_STOCK, &out));
			expect_buf(&out, buf, len);
			if (h.length > 0) {
				golden_body(fn, false, r.layout, buf + 20, h.length, &r.u);
			}
			tide_mc_req_free(&r);
			nreq++;
		} else {
			struct tide_mc_resp_hdr h;
			struct tide_mc_resp r;

			rc = tide_mc_resp_frame_decode(fn, buf, len, &h, &r, &used, &err);
			expect_decoded(file, rc, &err, used, len);
			CU_ASSERT_EQUAL(h.seq_num, seq);
			check_capture_resp(&r, conn, seq);
			TIDE_UT_OK(
				tide_mc_resp_frame_encode(&r, h.seq_num, TIDE_MC_ENC_STOCK, &out));
			expect_buf(&out, buf, len);
			golden_body(fn, true, r.layout, buf + 16, h.length, &r.u);
			tide_mc_resp_free(&r);
			nresp++;
		}
		tide_mc_buf_release(&out);
		free(buf);
	}
	fclose(m);
	CU_ASSERT_EQUAL(nreq, 15);
	CU_ASSERT_EQUAL(nresp, 15);
	CU_ASSERT_EQUAL(fns_seen, 12);
}

/* ---- the spec's worked examples (section 1.6, release peers without literal) ------------ */

/* A request (resp false: q) or a response (p) encodes to exactly the bytes of hex, which
 * decode back to an equal message. */
static void
expect_bytes(bool resp, const struct tide_mc_req *q, const struct tide_mc_resp *p, const char *hex)
{
	uint8_t want[512];
	size_t n = unhex(hex, want, sizeof(want));
	struct tide_mc_buf b = {0};
	struct tide_mc_err err = {0};
	struct tide_mc_req bq;
	struct tide_mc_resp bp;
	enum tide_mc_fn fn = resp ? p->fn : q->fn;
	const struct mc_type *t = root_type(fn, resp, resp ? p->layout : q->layout);

	TIDE_UT_OK(resp ? tide_mc_resp_encode(p, 0, &b) : tide_mc_req_encode(q, 0, &b));
	expect_buf(&b, want, n);
	if (resp) {
		TIDE_UT_OK(tide_mc_resp_decode(fn, want, n, &bp, &err));
		CU_ASSERT_TRUE(mc_equal(t, &p->u, &bp.u));
		tide_mc_resp_free(&bp);
	} else {
		TIDE_UT_OK(tide_mc_req_decode(fn, want, n, &bq, &err));
		CU_ASSERT_TRUE(mc_equal(t, &q->u, &bq.u));
		tide_mc_req_free(&bq);
	}
	tide_mc_buf_release(&b);
}

static void
test_spec_examples(void)
{
	struct tide_mc_uuid c12 = {1, 2};
	struct tide_mc_replica_desc d = {.id = 42, .kind = TIDE_MC_RK_MEMORY, .status = 2};
	struct tide_mc_req q;
	struct tide_mc_resp p;
	char key300[301], hex300[700];

	d.u.memory =
		(struct tide_mc_buffer_desc){5, 0x7f0000001000ull, S("tcp"), S("10.0.0.1:12345")};

	p = (struct tide_mc_resp){.fn = TIDE_MC_FN_SERVICE_READY};
	p.u.str = (struct tide_mc_exp_str){.ok = true, .val = S("2.0.0")};
	expect_bytes(true, NULL, &p, "34ccb31c 01 05 \"2.0.0\"");

	q = (struct tide_mc_req){.fn = TIDE_MC_FN_PING};
	q.u.ping.id = c12;
	expect_bytes(false, &q, NULL, "e0836d3c 0100000000000000 0200000000000000");
	p = (struct tide_mc_resp){.fn = TIDE_MC_FN_PING};
	p.u.ping = (struct tide_mc_exp_ping){.ok = true, .val = {7, TIDE_MC_CLIENT_NEED_REMOUNT}};
	expect_bytes(true, NULL, &p, "528f2a74 01 0700000000000000 02000000");

	p = (struct tide_mc_resp){.fn = TIDE_MC_FN_EXIST_KEY};
	p.u.exist = (struct tide_mc_exp_bool){.ok = false, .err = TIDE_MC_EC_OBJECT_NOT_FOUND};
	expect_bytes(true, NULL, &p, "d200e890 00 40fdffff");
	p.u.exist = (struct tide_mc_exp_bool){.ok = true, .val = true};
	expect_bytes(true, NULL, &p, "d200e890 01 01");
	q = (struct tide_mc_req){.fn = TIDE_MC_FN_EXIST_KEY};
	q.u.key = (struct tide_mc_key_req){S("yes"), S("default")};
	expect_bytes(false, &q, NULL, "d81ef97c 03\"yes\" 07\"default\"");

	/* A 300-byte key makes every length 2 bytes (metainfo 0x08). */
	memset(key300, 'k', 300);
	key300[300] = '\0';
	q.u.key.key = S(key300);
	snprintf(hex300, sizeof(hex300), "d91ef97c 08 2c01 \"%s\" 0700 \"default\"", key300);
	expect_bytes(false, &q, NULL, hex300);

	q = (struct tide_mc_req){.fn = TIDE_MC_FN_PUT_START};
	q.u.put_start.client_id = c12;
	q.u.put_start.key = S("key1");
	q.u.put_start.slice_length = 5;
	q.u.put_start.config.replica_num = 1;
	q.u.put_start.tenant_id = S("default");
	expect_bytes(false, &q, NULL,
		     "0ebd85e3 0100000000000000 0200000000000000 04\"key1\" 0500000000000000"
		     " 0100000000000000 0000000000000000 0000000000000000 00 00 00"
		     " 00 00 00 00 00 00 00 07\"default\"");
	p = (struct tide_mc_resp){.fn = TIDE_MC_FN_PUT_START};
	p.u.put_start = (struct tide_mc_exp_replicas){.ok = true, .val = {&d, 1}};
	expect_bytes(true, NULL, &p,
		     "a62739c4 01 01 2a00000000000000 00 0500000000000000 00100000007f0000"
		     " 03\"tcp\" 0e\"10.0.0.1:12345\" 02000000");

	d.status = TIDE_MC_RS_COMPLETE;
	p = (struct tide_mc_resp){.fn = TIDE_MC_FN_GET_REPLICA_LIST};
	p.u.replica_list =
		(struct tide_mc_exp_replica_list){.ok = true, .val = {{&d, 1}, 10000, {0}}};
	expect_bytes(true, NULL, &p,
		     "6c27c688 01 01 2a00000000000000 00 0500000000000000"
		     " 00100000007f0000 03\"tcp\" 0e\"10.0.0.1:12345\" 03000000"
		     " 1027000000000000 00");

	q = (struct tide_mc_req){.fn = TIDE_MC_FN_PUT_END};
	q.u.put_end.client_id = c12;
	q.u.put_end.meta.key = S("key1");
	q.u.put_end.replica_type = TIDE_MC_REPLICA_ALL;
	q.u.put_end.tenant_id = S("default");
	expect_bytes(false, &q, NULL,
		     "229281d1 0100000000000000 0200000000000000 04\"key1\" 00 04000000"
		     " 07\"default\"");
	p = (struct tide_mc_resp){.fn = TIDE_MC_FN_PUT_END};
	p.u.status.ok = true;
	expect_bytes(true, NULL, &p, "cc6828af 01");

	q = (struct tide_mc_req){.fn = TIDE_MC_FN_REMOVE_ALL};
	q.u.remove_all = (struct tide_mc_remove_all_req){true, S("default")};
	expect_bytes(false, &q, NULL, "74c2a648 01 07\"default\"");
	p = (struct tide_mc_resp){.fn = TIDE_MC_FN_REMOVE_ALL};
	p.u.removed = 3;
	expect_bytes(true, NULL, &p, "34686686 0300000000000000");

	q = (struct tide_mc_req){.fn = TIDE_MC_FN_MOUNT_SEGMENT};
	q.u.mount_segment.segment =
		(struct tide_mc_segment){{0xb, 0xc}, S("host-a:12345"), 0x7f0000000000ull,
					 1ull << 30, S("host-a:12345"), S("tcp"),
					 S("")};
	q.u.mount_segment.client_id = c12;
	expect_bytes(false, &q, NULL,
		     "ae0df79e 0b00000000000000 0c00000000000000 0c\"host-a:12345\""
		     " 00000000007f0000 0000004000000000 0c\"host-a:12345\" 03\"tcp\" 00"
		     " 0100000000000000 0200000000000000");

	/* BatchReplicaClear(object_keys, client_id, segment_name): no tenant_id. */
	{
		struct tide_mc_str keys[2] = {S("a"), S("bc")};

		q = (struct tide_mc_req){.fn = TIDE_MC_FN_BATCH_REPLICA_CLEAR};
		q.u.batch_replica_clear.keys = (struct tide_mc_str_vec){keys, 2};
		q.u.batch_replica_clear.client_id = c12;
		q.u.batch_replica_clear.segment_name = S("seg");
		expect_bytes(false, &q, NULL,
			     "a22f2b47 02 01\"a\" 02\"bc\" 0100000000000000"
			     " 0200000000000000 03\"seg\"");
		q.u.batch_replica_clear.keys = (struct tide_mc_str_vec){NULL, 0};
		q.u.batch_replica_clear.segment_name = S("");
		expect_bytes(false, &q, NULL, "a22f2b47 00 0100000000000000 0200000000000000 00");
		p = (struct tide_mc_resp){.fn = TIDE_MC_FN_BATCH_REPLICA_CLEAR};
		p.u.cleared = (struct tide_mc_exp_str_vec){.ok = true, .val = {keys + 1, 1}};
		expect_bytes(true, NULL, &p, "eabd08e1 01 01 02\"bc\"");
		p.u.cleared = (struct tide_mc_exp_str_vec){.ok = true};
		expect_bytes(true, NULL, &p, "eabd08e1 01 00");
		p.u.cleared = (struct tide_mc_exp_str_vec){.err = TIDE_MC_EC_INVALID_PARAMS};
		expect_bytes(true, NULL, &p, "eabd08e1 00 a8fdffff");
	}
}

/* ---- v0.3.12.post1 layouts -------------------------------------------------------------- */

static void
test_v0312_layouts(void)
{
	struct tide_mc_replica_desc d = {.id = 1, .kind = TIDE_MC_RK_DISK, .status = 3};
	struct tide_mc_buf b = {0};
	struct tide_mc_req q = {.fn = TIDE_MC_FN_PUT_END, .layout = TIDE_MC_LAYOUT_V0312}, back;
	struct tide_mc_resp p = {.fn = TIDE_MC_FN_GET_REPLICA_LIST, .layout = TIDE_MC_LAYOUT_V0312};
	struct tide_mc_resp pb;
	struct tide_mc_err err = {0};

	/* PutEnd at v0.3.12 = (UUID, string key, ReplicaType, string): PutRevoke's shape. */
	q.u.put_end.meta.key = S("k");
	q.u.put_end.meta.object_checksum = (struct tide_mc_opt_u64){true, 99}; /* not sent */
	q.u.put_end.replica_type = TIDE_MC_REPLICA_MEMORY;
	q.u.put_end.tenant_id = S("t");
	TIDE_UT_OK(tide_mc_req_encode(&q, TIDE_MC_ENC_STOCK, &b));
	CU_ASSERT_EQUAL(mc_get_le32(b.data), 0x1b7a228a | 1);
	TIDE_UT_OK(tide_mc_req_decode(TIDE_MC_FN_PUT_END, b.data, b.len, &back, &err));
	CU_ASSERT_EQUAL(back.layout, TIDE_MC_LAYOUT_V0312);
	CU_ASSERT_TRUE(back.layout_exact);
	CU_ASSERT_TRUE(str_is(&back.u.put_end.meta.key, "k"));
	CU_ASSERT_FALSE(back.u.put_end.meta.object_checksum.has);
	tide_mc_req_free(&back);

	/* GetReplicaList result without checksum, 4-alternative variant. */
	d.u.disk.file_path = S("/d/f");
	d.u.disk.object_size = 10;
	p.u.replica_list = (struct tide_mc_exp_replica_list){.ok = true, .val = {{&d, 1}, 5, {0}}};
	b.len = 0;
	TIDE_UT_OK(tide_mc_resp_encode(&p, 0, &b));
	CU_ASSERT_EQUAL(mc_get_le32(b.data), 0x75ecf440);
	TIDE_UT_OK(tide_mc_resp_decode(TIDE_MC_FN_GET_REPLICA_LIST, b.data, b.len, &pb, &err));
	CU_ASSERT_EQUAL(pb.layout, TIDE_MC_LAYOUT_V0312);
	CU_ASSERT_TRUE(pb.layout_exact);
	CU_ASSERT_TRUE(str_is(&pb.u.replica_list.val.replicas.v[0].u.disk.file_path, "/d/f"));
	tide_mc_resp_free(&pb);

	/* DistributedFS replicas do not exist at v0.3.12. */
	d.kind = TIDE_MC_RK_DFS;
	d.u.dfs = (struct tide_mc_dfs_desc){S("/x"), 1, 2, 3, 4};
	b.len = 0;
	CU_ASSERT_EQUAL(tide_mc_resp_encode(&p, 0, &b), -EINVAL);
	CU_ASSERT_EQUAL(b.len, 0);
	p.layout = TIDE_MC_LAYOUT_HEAD;
	TIDE_UT_OK(tide_mc_resp_encode(&p, 0, &b));
	p.layout = 2;
	CU_ASSERT_EQUAL(tide_mc_resp_encode(&p, 0, &b), -EINVAL);
	tide_mc_buf_release(&b);
}

/* ---- property: random values round-trip ------------------------------------------------- */

static uint64_t rng;

static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static size_t
rand_len(bool small)
{
	unsigned r = (unsigned)(rnd() % 1000);

	if (small || r < 850) {
		return rnd() % 21;
	}
	if (r < 970) {
		return 21 + rnd() % 280;
	}
	if (r < 998) {
		return 300 + rnd() % 700;
	}
	return 65536 + rnd() % 1000; /* 4-byte lengths */
}

static uint64_t
rand_int(void)
{
	switch (rnd() % 4) {
	case 0:
		return rnd() % 16;
	case 1:
		return UINT64_MAX - rnd() % 4;
	default:
		return rnd();
	}
}

static void
put_bool(uint8_t *v, bool b)
{
	memcpy(v, &b, sizeof(b));
}

static void
gen(const struct mc_type *t, uint8_t *v, unsigned depth, bool small)
{
	uint64_t x;
	size_t n;
	void *arr;

	switch (t->kind) {
	case MC_K_BOOL:
		put_bool(v, rnd() & 1);
		return;
	case MC_K_U8:
	case MC_K_U16:
	case MC_K_I32:
	case MC_K_U32:
	case MC_K_I64:
	case MC_K_U64:
		x = rand_int();
		memcpy(v, &x, t->size); /* little-endian host: the low bytes */
		return;
	case MC_K_VOID:
		return;
	case MC_K_STR: {
		struct tide_mc_str s = {.len = rand_len(small)};
		s.ptr = malloc(s.len + 1);
		for (size_t i = 0; i < s.len; i++) {
			s.ptr[i] = (char)rnd();
		}
		s.ptr[s.len] = '\0';
		memcpy(v, &s, sizeof(s));
		return;
	}
	case MC_K_VEC:
	case MC_K_MAP:
		if (depth < 3 && rnd() % 100 < 3) {
			n = 256 + rnd() % 64; /* 2-byte counts */
			small = true;
		} else {
			n = depth < 4 ? rnd() % 4 : rnd() % 2;
		}
		arr = n ? calloc(n, t->elem->size) : NULL;
		for (size_t i = 0; i < n; i++) {
			gen(t->elem, (uint8_t *)arr + i * t->elem->size, depth + 1, small);
		}
		memcpy(v, &arr, sizeof(arr));
		memcpy(v + sizeof(void *), &n, sizeof(n));
		return;
	case MC_K_OPT:
		put_bool(v, rnd() & 1);
		if (v[0]) {
			gen(t->elem, v + t->val_off, depth + 1, small);
		}
		return;
	case MC_K_VARIANT:
		v[t->idx_off] = (uint8_t)(rnd() % t->nfields);
		gen(t->fields[v[t->idx_off]].type, v + t->fields[v[t->idx_off]].off, depth + 1,
		    small);
		return;
	case MC_K_EXPECTED:
		put_bool(v, rnd() & 1);
		if (v[0]) {
			gen(t->elem, v + t->val_off, depth + 1, small);
		} else {
			int32_t e = -(int32_t)(rnd() % 2000);
			memcpy(v + t->err_off, &e, 4);
		}
		return;
	case MC_K_STRUCT:
	case MC_K_TRIVIAL:
	case MC_K_TRANSPARENT:
		for (unsigned i = 0; i < t->nfields; i++) {
			gen(t->fields[i].type, v + t->fields[i].off, depth + 1, small);
		}
		return;
	}
}

/* One round trip of a random value of (fn, dir, layout); returns 1 if it ran. */
static unsigned
roundtrip_one(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout l)
{
	const struct mc_root *r = mc_msg_root(fn, is_resp, l);
	unsigned flags = (rnd() & 1 ? TIDE_MC_ENC_LITERAL : 0) |
			 (rnd() & 1 ? (unsigned)(rnd() % 4) << 1 : 0);
	struct tide_mc_buf b1 = {0}, b2 = {0};
	struct tide_mc_err err = {0};
	union {
		struct tide_mc_req q;
		struct tide_mc_resp p;
	} a, c;
	void *au, *cu;
	bool exact;
	int rc;

	if (r == NULL) {
		return 0;
	}
	memset(&a, 0, sizeof(a));
	if (is_resp) {
		a.p.fn = fn;
		a.p.layout = l;
		au = &a.p.u;
		cu = &c.p.u;
	} else {
		a.q.fn = fn;
		a.q.layout = l;
		au = &a.q.u;
		cu = &c.q.u;
	}
	gen(r->type, au, 0, false);
	rc = is_resp ? tide_mc_resp_encode(&a.p, flags, &b1) : tide_mc_req_encode(&a.q, flags, &b1);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	/* Forced width honoured (metainfo present whenever width > 1 or literal). */
	if ((flags >> 1) & 3) {
		CU_ASSERT_EQUAL(b1.data[0] & 1, 1);
		CU_ASSERT_TRUE(((b1.data[4] >> 3) & 3) >= ((flags >> 1) & 3));
	}
	rc = is_resp ? tide_mc_resp_decode(fn, b1.data, b1.len, &c.p, &err)
		     : tide_mc_req_decode(fn, b1.data, b1.len, &c.q, &err);
	if (rc != 0) {
		fprintf(stderr, "round trip %s: %s\n", tide_mc_fn_info(fn)->name, err.msg);
	}
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	exact = is_resp ? c.p.layout_exact : c.q.layout_exact;
	if (exact) {
		CU_ASSERT_EQUAL(is_resp ? c.p.layout : c.q.layout, l);
	} else {
		CU_ASSERT_EQUAL(is_resp ? c.p.layout : c.q.layout, TIDE_MC_LAYOUT_HEAD);
	}
	CU_ASSERT_TRUE(mc_equal(r->type, au, cu));
	/* Canonical: re-encoding the decoded value gives the same bytes. */
	rc = is_resp ? tide_mc_resp_encode(&c.p, flags, &b2) : tide_mc_req_encode(&c.q, flags, &b2);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(b1.len, b2.len);
	CU_ASSERT_EQUAL(memcmp(b1.data, b2.data, b1.len < b2.len ? b1.len : b2.len), 0);
	if (is_resp) {
		tide_mc_resp_free(&a.p);
		tide_mc_resp_free(&c.p);
	} else {
		tide_mc_req_free(&a.q);
		tide_mc_req_free(&c.q);
	}
	tide_mc_buf_release(&b1);
	tide_mc_buf_release(&b2);
	return 1;
}

static void
test_property_roundtrip(void)
{
	const char *env = getenv("TIDE_MC_SEED");
	uint64_t seed =
		env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
	unsigned iters = 0;

	rng = seed ? seed : 1;
	printf("\nmc_msgs property seed: %llu (replay: TIDE_MC_SEED=%llu)\n",
	       (unsigned long long)seed, (unsigned long long)seed);
	for (unsigned round = 0; round < 60; round++) {
		for (unsigned fn = 0; fn < TIDE_MC_FN_CODEC_COUNT; fn++) {
			for (unsigned dir = 0; dir < 2; dir++) {
				for (unsigned l = 0; l < TIDE_MC_LAYOUT_COUNT; l++) {
					iters += roundtrip_one((enum tide_mc_fn)fn, dir,
							       (enum tide_mc_layout)l);
				}
			}
		}
	}
	printf("mc_msgs property iterations: %u\n", iters);
	CU_ASSERT_TRUE(iters > 7000);
}

/* ---- negative --------------------------------------------------------------------------- */

static void
test_truncation_and_hash(void)
{
	static const char *const frames[] = {
		"02_req_38228_s2_MountSegment.bin",      "04_req_38228_s4_ReMountSegment.bin",
		"18_req_38238_s0_PutStart.bin",          "21_req_38244_s1_PutEnd.bin",
		"20_req_38244_s0_FetchTasks.bin",        "06_req_38228_s6_Remove.bin",
		"14_resp_38228_s5_GetReplicaList.bin",   "19_resp_38238_s0_PutStart.bin",
		"10_resp_38228_s1_GetStorageConfig.bin", "12_resp_38228_s3_Ping.bin",
		"15_resp_38228_s6_Remove.bin",           "25_resp_38244_s0_FetchTasks.bin",
	};
	static const enum tide_mc_fn fns[] = {
		TIDE_MC_FN_MOUNT_SEGMENT,
		TIDE_MC_FN_REMOUNT_SEGMENT,
		TIDE_MC_FN_PUT_START,
		TIDE_MC_FN_PUT_END,
		TIDE_MC_FN_FETCH_TASKS,
		TIDE_MC_FN_REMOVE,
		TIDE_MC_FN_GET_REPLICA_LIST,
		TIDE_MC_FN_PUT_START,
		TIDE_MC_FN_GET_STORAGE_CONFIG,
		TIDE_MC_FN_PING,
		TIDE_MC_FN_REMOVE,
		TIDE_MC_FN_FETCH_TASKS,
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(frames); i++) {
		bool resp = strstr(frames[i], "_resp_") != NULL;
		size_t hl = resp ? 16 : 20, len = 0, blen;
		uint8_t *buf = tide_ut_read_file(MC_VECTORS_DIR, frames[i], &len), *body;
		struct tide_mc_err err;
		struct tide_mc_req q;
		struct tide_mc_resp p;
		int rc;

		CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
		body = buf + hl;
		blen = len - hl;
		for (size_t k = 0; k < blen; k++) {
			memset(&err, 0, sizeof(err));
			rc = resp ? tide_mc_resp_decode(fns[i], body, k, &p, &err)
				  : tide_mc_req_decode(fns[i], body, k, &q, &err);
			CU_ASSERT_EQUAL(rc, -EBADMSG);
			CU_ASSERT_EQUAL(err.errc, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS);
			CU_ASSERT_TRUE(err.offset <= k);
			CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, tide_mc_fn_info(fns[i])->name));
			CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, resp ? " result: " : " request: "));
		}
		/* Wrong hash -> errc 4 path, named. */
		body[2] ^= 0x40;
		rc = resp ? tide_mc_resp_decode(fns[i], body, blen, &p, &err)
			  : tide_mc_req_decode(fns[i], body, blen, &q, &err);
		CU_ASSERT_EQUAL(rc, -EBADMSG);
		CU_ASSERT_EQUAL(err.errc, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "type hash"));
		free(buf);
	}
}

static void
test_huge_counts(void)
{
	struct tide_mc_err err = {0};
	struct tide_mc_req q;
	uint8_t b[64];
	size_t n;

	/* BatchExistKey keys count 0xffffffff (width 4) with 8 bytes left. */
	n = unhex("638df700 10 ffffffff 0000000000000000", b, sizeof(b));
	CU_ASSERT_EQUAL(tide_mc_req_decode(TIDE_MC_FN_BATCH_EXIST_KEY, b, n, &q, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "keys: count 4294967295 of string"));
	CU_ASSERT_EQUAL(err.offset, 5);
	/* Width 8, count 2^64-1. */
	n = unhex("638df700 18 ffffffffffffffff 00", b, sizeof(b));
	CU_ASSERT_EQUAL(tide_mc_req_decode(TIDE_MC_FN_BATCH_EXIST_KEY, b, n, &q, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "count 18446744073709551615"));
	/* ExistKey key length 2^63 (width 8). */
	n = unhex("d91ef97c 18 0000000000000080 \"abc\"", b, sizeof(b));
	CU_ASSERT_EQUAL(tide_mc_req_decode(TIDE_MC_FN_EXIST_KEY, b, n, &q, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "key: string length 9223372036854775808 exceeds"));
	/* ReMountSegment: 200 segments claimed, none present (each needs >= 36 bytes). */
	n = unhex("896bc6c6 00 c8", b, sizeof(b));
	CU_ASSERT_EQUAL(tide_mc_req_decode(TIDE_MC_FN_REMOUNT_SEGMENT, b, n, &q, &err), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "segments: count 200 of Segment"));
	/* Variant index 7 in a PutStart result. */
	n = unhex("a62739c4 01 01 2a00000000000000 07 00000000000000000000000000000000", b,
		  sizeof(b));
	{
		struct tide_mc_resp p;
		CU_ASSERT_EQUAL(tide_mc_resp_decode(TIDE_MC_FN_PUT_START, b, n, &p, &err),
				-EBADMSG);
		CU_ASSERT_PTR_NOT_NULL(
			strstr(err.msg, "[0].descriptor_variant: variant index 7 out of range"));
	}
	CU_ASSERT_EQUAL(tide_mc_req_decode(TIDE_MC_FN_COUNT, b, n, &q, &err), -EINVAL);
	CU_ASSERT_EQUAL(tide_mc_req_decode(TIDE_MC_FN_MOVE_END, b, n, &q, &err), -ENOTSUP);
	CU_ASSERT_EQUAL(err.errc, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED);
}

/* Random corruption of golden bodies: never crash or leak; survivors round-trip. */
static void
test_mutations(void)
{
	static const char *const frames[] = {
		"02_req_38228_s2_MountSegment.bin", "18_req_38238_s0_PutStart.bin",
		"21_req_38244_s1_PutEnd.bin",       "14_resp_38228_s5_GetReplicaList.bin",
		"19_resp_38238_s0_PutStart.bin",
	};
	static const enum tide_mc_fn fns[] = {TIDE_MC_FN_MOUNT_SEGMENT, TIDE_MC_FN_PUT_START,
					      TIDE_MC_FN_PUT_END, TIDE_MC_FN_GET_REPLICA_LIST,
					      TIDE_MC_FN_PUT_START};
	unsigned ok = 0, bad = 0;

	rng = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < MC_ARRAY_SIZE(frames); i++) {
		bool resp = strstr(frames[i], "_resp_") != NULL;
		size_t hl = resp ? 16 : 20, len = 0;
		uint8_t *orig = tide_ut_read_file(MC_VECTORS_DIR, frames[i], &len),
			*m = malloc(len);

		CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
		for (unsigned it = 0; it < 2000; it++) {
			struct tide_mc_buf b = {0};
			struct tide_mc_err err;
			struct tide_mc_req q, q2;
			struct tide_mc_resp p, p2;
			size_t blen = len - hl;
			int rc;

			memcpy(m, orig + hl, blen);
			for (unsigned f = 0; f < 1 + rnd() % 3; f++) {
				/* Keep the hash mostly intact so mutations reach the payload. */
				size_t at = 4 + rnd() % (blen - 4);
				m[at] = rnd() % 4 ? (uint8_t)rnd() : m[at] ^ 1;
			}
			if (rnd() % 4 == 0) {
				blen = rnd() % blen;
			}
			rc = resp ? tide_mc_resp_decode(fns[i], m, blen, &p, &err)
				  : tide_mc_req_decode(fns[i], m, blen, &q, &err);
			if (rc != 0) {
				CU_ASSERT_EQUAL(rc, -EBADMSG);
				CU_ASSERT_NOT_EQUAL(err.msg[0], '\0');
				bad++;
				continue;
			}
			ok++;
			rc = resp ? tide_mc_resp_encode(&p, TIDE_MC_ENC_STOCK, &b)
				  : tide_mc_req_encode(&q, TIDE_MC_ENC_STOCK, &b);
			CU_ASSERT_EQUAL(rc, 0);
			rc = resp ? tide_mc_resp_decode(fns[i], b.data, b.len, &p2, &err)
				  : tide_mc_req_decode(fns[i], b.data, b.len, &q2, &err);
			CU_ASSERT_EQUAL_FATAL(rc, 0);
			if (resp) {
				CU_ASSERT_TRUE(
					mc_equal(root_type(fns[i], true, p.layout), &p.u, &p2.u));
				tide_mc_resp_free(&p);
				tide_mc_resp_free(&p2);
			} else {
				CU_ASSERT_TRUE(
					mc_equal(root_type(fns[i], false, q.layout), &q.u, &q2.u));
				tide_mc_req_free(&q);
				tide_mc_req_free(&q2);
			}
			tide_mc_buf_release(&b);
		}
		free(orig);
		free(m);
	}
	printf("\nmc_msgs mutations: %u decoded, %u rejected\n", ok, bad);
	CU_ASSERT_TRUE(ok > 0 && bad > 0);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_msgs", NULL, NULL);

	CU_add_test(s, "test_type_hashes_match_spec", test_type_hashes_match_spec);
	CU_add_test(s, "test_golden_capture", test_golden_capture);
	CU_add_test(s, "test_spec_examples", test_spec_examples);
	CU_add_test(s, "test_v0312_layouts", test_v0312_layouts);
	CU_add_test(s, "test_property_roundtrip", test_property_roundtrip);
	CU_add_test(s, "test_truncation_and_hash", test_truncation_and_hash);
	CU_add_test(s, "test_huge_counts", test_huge_counts);
	CU_add_test(s, "test_mutations", test_mutations);
}

TIDE_UT_MAIN(register_tests)
