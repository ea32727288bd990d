/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the Mooncake master codec decoders (store/master).
 *
 * Each input is tried as: a stream of request frames (the server path,
 * including the error frame a server would answer), a response frame and a
 * bare result body for every function with a codec (the client path), and a
 * bare request body for every function. Whatever decodes must re-encode and
 * decode to an equal value, with and without the literal and at width 8;
 * anything else traps. ASan/UBSan/LSan catch overreads, UB and leaks.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mc_internal.h"
#include "tide_mc_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned flag_sets[] = {0, TIDE_MC_ENC_STOCK, TIDE_MC_ENC_WIDTH_8};

static void
req_roundtrip(const struct tide_mc_req *r)
{
	const struct mc_root *root = mc_msg_root(r->fn, false, r->layout);

	for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
		struct tide_mc_buf b = {0};
		struct tide_mc_req back;

		if (tide_mc_req_encode(r, flag_sets[i], &b) != 0) {
			__builtin_trap();
		}
		if (tide_mc_req_decode(r->fn, b.data, b.len, &back, NULL) != 0) {
			__builtin_trap();
		}
		if (root != NULL && !mc_equal(root->type, &r->u, &back.u)) {
			__builtin_trap();
		}
		tide_mc_req_free(&back);
		tide_mc_buf_release(&b);
	}
}

static void
resp_roundtrip(const struct tide_mc_resp *r)
{
	const struct mc_root *root = mc_msg_root(r->fn, true, r->layout);

	for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
		struct tide_mc_buf b = {0};
		struct tide_mc_resp back;

		if (tide_mc_resp_frame_encode(r, 7, flag_sets[i], &b) != 0) {
			__builtin_trap();
		}
		if (tide_mc_resp_decode(r->fn, b.data + TIDE_MC_RESP_HDR_LEN,
					b.len - TIDE_MC_RESP_HDR_LEN, &back, NULL) != 0) {
			__builtin_trap();
		}
		if (!mc_equal(root->type, &r->u, &back.u)) {
			__builtin_trap();
		}
		tide_mc_resp_free(&back);
		tide_mc_buf_release(&b);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (tide_mc_codec_init() != 0) {
		abort();
	}
	/* Server path: consecutive request frames. */
	while (off < size) {
		struct tide_mc_req_hdr h;
		struct tide_mc_req r;
		struct tide_mc_err err = {0};
		struct tide_mc_buf out = {0};
		size_t used = 0;
		int rc = tide_mc_req_frame_decode(data + off, size - off, &h, &r, &used, &err);

		if (rc == 0) {
			req_roundtrip(&r);
			tide_mc_req_free(&r);
		} else if (err.errc != 0) {
			if (tide_mc_err_frame_encode(h.seq_num, err.errc, err.msg,
						     TIDE_MC_ENC_STOCK, &out) != 0) {
				__builtin_trap();
			}
			tide_mc_buf_release(&out);
		}
		if (used == 0) {
			break;
		}
		off += used;
	}
	/* Client path and bare bodies, for every function with a codec. */
	for (unsigned fn = 0; fn < TIDE_MC_FN_CODEC_COUNT; fn++) {
		struct tide_mc_resp_hdr h;
		struct tide_mc_resp p;
		struct tide_mc_req q;
		struct tide_mc_err err;
		size_t used;

		if (tide_mc_resp_frame_decode((enum tide_mc_fn)fn, data, size, &h, &p, &used,
					      &err) == 0) {
			resp_roundtrip(&p);
			tide_mc_resp_free(&p);
		}
		if (tide_mc_resp_decode((enum tide_mc_fn)fn, data, size, &p, &err) == 0) {
			resp_roundtrip(&p);
			tide_mc_resp_free(&p);
		}
		if (tide_mc_req_decode((enum tide_mc_fn)fn, data, size, &q, &err) == 0) {
			req_roundtrip(&q);
			tide_mc_req_free(&q);
		}
	}
	return 0;
}
