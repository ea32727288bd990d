/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the transfer engine's TCP data framing, server side
 * (engine/te/tcp/te_sess.c, te_frame.c): the input is what a peer sends on a
 * data connection (v1, v2 or native requests, WRITE payloads, HELLO).
 *
 * The bytes go into a server session whose check() admits two registered
 * ranges at a fixed address (fuzz_te.h), twice: pushed with feed() and
 * drained whole, and pulled through rx_window()/rx_advance() in pseudo-random
 * pieces with partial tx_advance(). Both runs must consume the same bytes,
 * end with the same close reason, send the same number of bytes (unless the
 * session died, which drops queued replies) and leave the same memory. Every
 * check() must be matched by one release() (none held after destroy), output
 * must stop once the session ended, and the frame decoders must re-encode
 * what they accept. Writes outside the checked ranges hit guard pages.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_te.h"
#include "te_frame.h"
#include "te_sess.h"
#include "tide_log.h"

#include "fuzz_common.h"

static uint8_t *mem;
static int holds;                 /* check() references not yet released */
static uint8_t sink[FZ_TE_A_LEN]; /* where "sent" bytes are copied (ASan checks the reads) */

/* te_slice_done belongs to the engine core; sessions never call it. */
void
te_slice_done(struct te_slice *s, int err)
{
	(void)s;
	(void)err;
	__builtin_trap();
}

static bool
chk(void *arg, uint64_t addr, uint64_t len)
{
	(void)arg;
	if (!fz_te_inside(mem, addr, len))
		return false;
	holds++;
	return true;
}

static void
rel(void *arg)
{
	(void)arg;
	TRAP_IF(holds <= 0);
	holds--;
}

static void
cnt(void *arg, uint8_t op, uint64_t bytes, bool rejected)
{
	(void)arg;
	(void)bytes;
	(void)rejected;
	TRAP_IF(op != TE_FRAME_OP_READ && op != TE_FRAME_OP_WRITE);
}

static const struct te_srv_ctx ctx = {
	.check = chk, .release = rel, .count = cnt, .instance = FZ_TE_INSTANCE};

struct run {
	size_t consumed;
	uint64_t sent;
	int reason;
};

/* xorshift64, seeded from the input so runs are reproducible. */
static uint64_t
rnd(uint64_t *st)
{
	*st ^= *st << 13;
	*st ^= *st >> 7;
	*st ^= *st << 17;
	return *st;
}

/* Send up to budget bytes of what tx_iov() offers (all when budget is SIZE_MAX). */
static uint64_t
drain(struct te_srv_sess *s, size_t budget)
{
	struct iovec iov[8];
	uint64_t total = 0;
	unsigned n;

	while (budget > 0 && (n = te_srv_sess_tx_iov(s, iov, 8)) > 0) {
		size_t sent = 0;

		for (unsigned i = 0; i < n && sent < budget; i++) {
			size_t k = iov[i].iov_len < budget - sent ? iov[i].iov_len : budget - sent;
			const uint8_t *p = iov[i].iov_base;

			TRAP_IF(iov[i].iov_len == 0);
			for (size_t j = 0; j < k; j += sizeof(sink))
				memcpy(sink, p + j, k - j < sizeof(sink) ? k - j : sizeof(sink));
			sent += k;
		}
		te_srv_sess_tx_advance(s, sent);
		total += sent;
		budget -= sent;
	}
	return total;
}

static void
push_run(const uint8_t *data, size_t size, struct run *out)
{
	struct te_srv_sess *s;
	size_t off = 0;

	TRAP_IF(te_srv_sess_create(&ctx, &s) != 0);
	memset(out, 0, sizeof(*out));
	for (;;) {
		size_t used = te_srv_sess_feed(s, data + off, size - off);
		uint64_t n;

		TRAP_IF(used > size - off);
		off += used;
		n = drain(s, SIZE_MAX);
		out->sent += n;
		if (te_srv_sess_close_reason(s) != 0 || off == size)
			break;
		/* Input refused, nothing to send, yet not closed: a stuck session. */
		TRAP_IF(used == 0 && n == 0);
	}
	out->reason = te_srv_sess_close_reason(s);
	out->consumed = off;
	if (out->reason != 0) {
		struct iovec iov[1];

		TRAP_IF(te_srv_sess_feed(s, data, size) != 0 && size > 0);
		TRAP_IF(te_srv_sess_tx_iov(s, iov, 1) != 0);
	} else {
		TRAP_IF(off != size);
		TRAP_IF(te_srv_sess_idle(s) && holds != 0);
	}
	te_srv_sess_destroy(s);
	TRAP_IF(holds != 0);
}

static void
pull_run(const uint8_t *data, size_t size, uint64_t seed, struct run *out)
{
	struct te_srv_sess *s;
	size_t off = 0;

	TRAP_IF(te_srv_sess_create(&ctx, &s) != 0);
	memset(out, 0, sizeof(*out));
	while (te_srv_sess_close_reason(s) == 0) {
		uint8_t *p;
		size_t w = te_srv_sess_rx_window(s, &p), k;

		if (w == 0) {
			uint64_t n = drain(s, SIZE_MAX);

			out->sent += n;
			if (n == 0)
				break; /* nothing wanted, nothing to send: the session ended */
			continue;
		}
		if (off == size)
			break;
		TRAP_IF(p == NULL);
		k = 1 + (size_t)(rnd(&seed) % 97);
		if (k > w)
			k = w;
		if (k > size - off)
			k = size - off;
		memcpy(p, data + off, k);
		te_srv_sess_rx_advance(s, k);
		off += k;
		out->sent += drain(s, (size_t)(rnd(&seed) % 200));
	}
	out->sent += drain(s, SIZE_MAX);
	out->reason = te_srv_sess_close_reason(s);
	out->consumed = off;
	te_srv_sess_destroy(s);
	TRAP_IF(holds != 0);
}

/* The frame decoders: whatever decodes re-encodes to the same header. */
static void
frames(const uint8_t *data, size_t size)
{
	struct te_frame_hdr h, h2;
	struct te_frame_reply r, r2;
	uint8_t out[TE_FRAME_HDR_LEN];

	if (te_frame_hdr_decode(data, size, &h) == 0) {
		TRAP_IF(te_frame_hdr_encode(&h, out) != 0);
		TRAP_IF(te_frame_hdr_decode(out, sizeof(out), &h2) != 0);
		TRAP_IF(h.size != h2.size || h.addr != h2.addr || h.op != h2.op ||
			h.proto != h2.proto || h.req_id != h2.req_id);
		/* Bytes 0..16 always round-trip; native ones all 24. */
		TRAP_IF(memcmp(out, data, h.proto == TE_PROTO_NATIVE ? 24 : 17) != 0);
	}
	if (te_frame_reply_decode(data, size, &r) == 0) {
		te_frame_reply_encode(&r, out);
		TRAP_IF(memcmp(out, data, TE_FRAME_REPLY_LEN) != 0);
		TRAP_IF(te_frame_reply_decode(out, TE_FRAME_REPLY_LEN, &r2) != 0);
		TRAP_IF(r2.status != r.status || r2.req_id != r.req_id);
		TRAP_IF(te_frame_status_err(r.status) == -EPROTO);
	}
	if (size >= TE_FRAME_STATUS_LEN) {
		uint64_t st = te_frame_status_decode(data);

		te_frame_status_encode(st, out);
		TRAP_IF(memcmp(out, data, TE_FRAME_STATUS_LEN) != 0);
	}
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tide_log_set_level(TIDE_LOG_ERR);
	mem = fz_te_map();
	if (mem == NULL)
		abort();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *after = malloc(FZ_TE_MAP_LEN);
	struct run a, b;
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ size;

	TRAP_IF(after == NULL);
	for (size_t i = 0; i < size && i < 64; i++)
		seed = (seed ^ data[i]) * 0x100000001b3ULL;
	if (seed == 0)
		seed = 1;
	frames(data, size);

	fz_te_reset(mem);
	push_run(data, size, &a);
	memcpy(after, mem + FZ_TE_A_OFF, FZ_TE_A_LEN);
	memcpy(after + FZ_TE_A_LEN, mem + FZ_TE_B_OFF, FZ_TE_B_LEN);

	fz_te_reset(mem);
	pull_run(data, size, seed, &b);
	TRAP_IF(a.consumed != b.consumed || a.reason != b.reason);
	TRAP_IF(a.reason != 0 && a.reason != -EFAULT && a.reason != -ESTALE && a.reason != -EPROTO);
	if (a.reason == 0 || a.reason == -ESTALE)
		TRAP_IF(a.sent != b.sent);
	TRAP_IF(memcmp(after, mem + FZ_TE_A_OFF, FZ_TE_A_LEN) != 0 ||
		memcmp(after + FZ_TE_A_LEN, mem + FZ_TE_B_OFF, FZ_TE_B_LEN) != 0);
	free(after);
	return 0;
}
