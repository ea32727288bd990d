/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Server and client sessions wired back to back in memory: byte pipes in both
 * directions, fed byte by byte, in random chunks, or through the zero-copy
 * rx_window path, with partial "sends".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "te_sess.h"
#include "tide_ut.h"

#define MEM_LEN (256 * 1024)

/* te_slice_done belongs to the engine core; sessions never call it. */
void
te_slice_done(struct te_slice *s, int err)
{
	(void)s;
	(void)err;
	CU_FAIL("sessions must report through their done callback");
}

/* ---- server memory and hooks ---- */
static uint8_t *mem;       /* "registered" */
static uint8_t *forbidden; /* not registered: must never change or leak */
static int holds, checks, rejects;

static bool
chk(void *arg, uint64_t addr, uint64_t len)
{
	uint64_t lo = (uintptr_t)mem;

	(void)arg;
	if (addr >= lo && addr + len <= lo + MEM_LEN && addr + len >= addr) {
		holds++;
		checks++;
		return true;
	}
	return false;
}

static void
rel(void *arg)
{
	(void)arg;
	holds--;
}

static void
cnt(void *arg, uint8_t op, uint64_t bytes, bool rejected)
{
	(void)arg;
	(void)op;
	(void)bytes;
	if (rejected)
		rejects++;
}

static const struct te_srv_ctx srv_ctx = {
	.check = chk, .release = rel, .count = cnt, .instance = 0x1111222233334444ULL};

/* ---- completions ---- */
#define MAX_SL 4096
static struct te_slice sl[MAX_SL];
static int sl_err[MAX_SL];
static int sl_done_n[MAX_SL];
static int ndone;

static void
done_cb(void *arg, struct te_slice *s, int err)
{
	size_t i = (size_t)(s - sl);

	(void)arg;
	CU_ASSERT_FATAL(i < MAX_SL);
	sl_err[i] = err;
	sl_done_n[i]++;
	ndone++;
}

/* ---- byte pipes ---- */
struct pipe {
	uint8_t *b;
	size_t len, cap;
};

static void
pipe_put(struct pipe *p, const void *d, size_t n)
{
	if (n == 0)
		return;
	if (p->len + n > p->cap) {
		p->cap = (p->len + n) * 2 + 64;
		p->b = realloc(p->b, p->cap);
		CU_ASSERT_FATAL(p->b != NULL);
	}
	memcpy(p->b + p->len, d, n);
	p->len += n;
}

static void
pipe_eat(struct pipe *p, size_t n)
{
	memmove(p->b, p->b + n, p->len - n);
	p->len -= n;
}

enum chunking { BYTE, RANDOM, BULK };
struct harness {
	struct te_srv_sess *srv;
	struct te_cli_sess *cli;
	struct pipe c2s, s2c;
	enum chunking ch;
	bool zero_copy; /* use rx_window/rx_advance on both ends */
	bool srv_closed;
};

static size_t
chunk(const struct harness *h, size_t avail)
{
	size_t n;

	if (avail == 0)
		return 0;
	switch (h->ch) {
	case BYTE:
		return 1;
	case RANDOM:
		n = 1 + (size_t)rand() % 3000;
		return n < avail ? n : avail;
	default:
		return avail;
	}
}

/* Copy up to limit bytes of an iovec list into a pipe; returns bytes taken. */
static size_t
drain_iov(struct pipe *p, const struct iovec *iov, unsigned n, size_t limit)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < limit; i++) {
		size_t k = iov[i].iov_len < limit - done ? iov[i].iov_len : limit - done;

		pipe_put(p, iov[i].iov_base, k);
		done += k;
	}
	return done;
}

static size_t
srv_push(struct harness *h, size_t n)
{
	if (!h->zero_copy)
		return te_srv_sess_feed(h->srv, h->c2s.b, n);
	size_t off = 0;
	while (off < n) {
		uint8_t *p;
		size_t w = te_srv_sess_rx_window(h->srv, &p);

		if (w == 0)
			break;
		if (w > n - off)
			w = n - off;
		memcpy(p, h->c2s.b + off, w);
		te_srv_sess_rx_advance(h->srv, w);
		off += w;
	}
	return off;
}

static size_t
cli_push(struct harness *h, size_t n)
{
	if (!h->zero_copy)
		return te_cli_sess_feed(h->cli, h->s2c.b, n);
	size_t off = 0;
	while (off < n) {
		uint8_t *p;
		size_t w = te_cli_sess_rx_window(h->cli, &p);

		if (w == 0) /* unexpected bytes: the feed path reports them */
			return off + te_cli_sess_feed(h->cli, h->s2c.b + off, n - off);
		if (w > n - off)
			w = n - off;
		memcpy(p, h->s2c.b + off, w);
		/* READ data: the payload size is a whole READ's (one whose buffer holds
		 * p; buffers of pipelined slices may overlap), not what is left of it */
		uint64_t pl = te_cli_sess_rx_payload(h->cli);
		bool whole = pl == 0;

		for (int i = 0; !whole && i < MAX_SL; i++) {
			uint8_t *l = sl[i].local;

			whole = sl[i].op == TE_FRAME_OP_READ && p >= l && p < l + sl[i].len &&
				pl == sl[i].len;
		}
		CU_ASSERT(whole);
		te_cli_sess_rx_advance(h->cli, w);
		off += w;
	}
	return off;
}

/* Move bytes until nothing moves. A server close is an EOF for the client. */
static void
pump(struct harness *h)
{
	struct iovec iov[16];
	bool moved = true;
	int guard = 0;

	while (moved && guard++ < 10000000) {
		unsigned n;
		size_t k;

		moved = false;
		if (te_cli_sess_error(h->cli) == 0 &&
		    (n = te_cli_sess_tx_iov(h->cli, iov, 16)) > 0) {
			k = drain_iov(&h->c2s, iov, n, chunk(h, SIZE_MAX / 2));
			te_cli_sess_tx_advance(h->cli, k);
			moved = true;
		}
		if (!h->srv_closed && h->c2s.len > 0) {
			k = srv_push(h, chunk(h, h->c2s.len));
			pipe_eat(&h->c2s, k);
			moved |= k > 0;
		}
		if (!h->srv_closed && (n = te_srv_sess_tx_iov(h->srv, iov, 16)) > 0) {
			k = drain_iov(&h->s2c, iov, n, chunk(h, SIZE_MAX / 2));
			te_srv_sess_tx_advance(h->srv, k);
			moved = true;
		}
		if (h->s2c.len > 0 && te_cli_sess_error(h->cli) == 0) {
			k = cli_push(h, chunk(h, h->s2c.len));
			pipe_eat(&h->s2c, k);
			moved |= k > 0;
		}
		if (!h->srv_closed && te_srv_sess_close_reason(h->srv) != 0) {
			h->srv_closed = true;
			moved = true;
		}
		if (h->srv_closed && h->s2c.len == 0 && te_cli_sess_error(h->cli) == 0 &&
		    te_cli_sess_inflight(h->cli) > 0) {
			te_cli_sess_fail(h->cli, -ECONNRESET); /* what a transport does on EOF */
			moved = true;
		}
	}
	CU_ASSERT(guard < 10000000);
}

static void
h_open(struct harness *h, uint32_t proto, uint64_t inst, uint32_t window, enum chunking ch, bool zc)
{
	struct te_cli_sess_cfg cc = {.proto = proto,
				     .instance = inst,
				     .max_inflight = window,
				     .max_inflight_bytes = 0,
				     .done = done_cb};

	memset(h, 0, sizeof(*h));
	h->ch = ch;
	h->zero_copy = zc;
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &h->srv));
	TIDE_UT_OK(te_cli_sess_create(&cc, &h->cli));
	memset(sl, 0, sizeof(sl));
	memset(sl_err, 0x7f, sizeof(sl_err));
	memset(sl_done_n, 0, sizeof(sl_done_n));
	ndone = 0;
	checks = 0;
}

static void
h_close(struct harness *h)
{
	te_cli_sess_destroy(h->cli, -ECANCELED);
	te_srv_sess_destroy(h->srv);
	free(h->c2s.b);
	free(h->s2c.b);
	CU_ASSERT_EQUAL(holds, 0); /* every check() reference released */
}

static void
fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static void
mk(int i, uint8_t op, uint8_t *local, uint64_t remote, uint32_t len)
{
	sl[i].op = op;
	sl[i].local = local;
	sl[i].remote = remote;
	sl[i].len = len;
}

/* WRITE a pattern, READ it back, for one framing and chunking. */
static void
write_read(uint32_t proto, enum chunking ch, bool zc)
{
	struct harness h;
	uint32_t len = ch == BYTE ? 700 : 40000;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	uint64_t at = (uintptr_t)mem + 1000;

	fill(src, len, proto + ch);
	memset(mem, 0, MEM_LEN);
	h_open(&h, proto, proto == 3 ? srv_ctx.instance : 0, 8, ch, zc);
	mk(0, TE_FRAME_OP_WRITE, src, at, len);
	TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[0]));
	if (proto != 3)
		CU_ASSERT_FALSE(te_cli_sess_can_submit(h.cli, 1)); /* one in flight */
	pump(&h);
	CU_ASSERT_EQUAL(sl_err[0], 0);
	CU_ASSERT_EQUAL(memcmp(mem + 1000, src, len), 0);
	mk(1, TE_FRAME_OP_READ, dst, at, len);
	TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[1]));
	pump(&h);
	CU_ASSERT_EQUAL(sl_err[1], 0);
	CU_ASSERT_EQUAL(memcmp(dst, src, len), 0);
	CU_ASSERT_EQUAL(ndone, 2);
	CU_ASSERT_EQUAL(te_cli_sess_inflight(h.cli), 0);
	CU_ASSERT_EQUAL(te_srv_sess_close_reason(h.srv), 0);
	CU_ASSERT_TRUE(te_srv_sess_idle(h.srv));
	h_close(&h);
	free(src);
	free(dst);
}

static void
test_write_read_all_framings(void)
{
	for (uint32_t proto = 1; proto <= 3; proto++) {
		write_read(proto, BYTE, false);
		write_read(proto, BYTE, true);
		write_read(proto, RANDOM, false);
		write_read(proto, RANDOM, true);
		write_read(proto, BULK, false);
	}
}

/* Out-of-range requests: the forbidden buffer is never touched nor leaked. */
static void
test_refused_v1(void)
{
	struct harness h;
	uint8_t buf[64];

	fill(forbidden, 4096, 9);
	/* WRITE: silent close; v1 has no reply so the client only learns of the EOF later */
	h_open(&h, 1, 0, 1, RANDOM, false);
	memset(buf, 0xaa, sizeof(buf));
	mk(0, TE_FRAME_OP_WRITE, buf, (uintptr_t)forbidden, sizeof(buf));
	TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[0]));
	pump(&h);
	CU_ASSERT_EQUAL(te_srv_sess_close_reason(h.srv), -EFAULT);
	CU_ASSERT_EQUAL(forbidden[0], (uint8_t)(9 * 131));
	CU_ASSERT_EQUAL(rejects, 1);
	h_close(&h);
	/* READ: silent close -> the client sees a reset */
	h_open(&h, 1, 0, 1, BYTE, false);
	mk(0, TE_FRAME_OP_READ, buf, (uintptr_t)forbidden, sizeof(buf));
	TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[0]));
	pump(&h);
	CU_ASSERT_EQUAL(sl_err[0], -ECONNRESET);
	CU_ASSERT_EQUAL(h.s2c.len, 0);
	CU_ASSERT_NOT_EQUAL(buf[0], forbidden[0]);
	h_close(&h);
	rejects = 0;
}

static void
test_refused_v2(void)
{
	struct harness h;
	uint8_t buf[5000];

	for (int op = 0; op < 2; op++) {
		for (int zc = 0; zc < 2; zc++) {
			h_open(&h, 2, 0, 1, zc ? RANDOM : BYTE, zc);
			memset(buf, 0x55, sizeof(buf));
			mk(0, (uint8_t)op, buf, (uintptr_t)forbidden, sizeof(buf));
			TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[0]));
			pump(&h);
			CU_ASSERT_EQUAL(sl_err[0], -EFAULT);
			CU_ASSERT_EQUAL(sl_done_n[0], 1);
			CU_ASSERT_EQUAL(te_cli_sess_error(h.cli), -EFAULT);
			CU_ASSERT_EQUAL(te_srv_sess_close_reason(h.srv), -EFAULT);
			CU_ASSERT_EQUAL(forbidden[1], (uint8_t)(9 * 131 + 7));
			CU_ASSERT_EQUAL(buf[0], 0x55);
			/* a failed session takes nothing more */
			mk(1, 0, buf, (uintptr_t)mem, 8);
			CU_ASSERT_EQUAL(te_cli_sess_submit(h.cli, &sl[1]), -EPIPE);
			h_close(&h);
		}
	}
}

/* Native: error reply, the connection survives (documented choice). */
static void
test_refused_native_survives(void)
{
	struct harness h;
	uint8_t w[3000], r[3000], bad[3000];

	fill(w, sizeof(w), 3);
	memset(r, 0, sizeof(r));
	memset(bad, 0x77, sizeof(bad));
	h_open(&h, 3, 0, 16, RANDOM, false);
	mk(0, TE_FRAME_OP_WRITE, bad, (uintptr_t)forbidden, sizeof(bad)); /* refused */
	mk(1, TE_FRAME_OP_WRITE, w, (uintptr_t)mem, sizeof(w));
	mk(2, TE_FRAME_OP_READ, bad, (uintptr_t)forbidden + 8, 100); /* refused */
	mk(3, TE_FRAME_OP_READ, r, (uintptr_t)mem, sizeof(r));
	mk(4, TE_FRAME_OP_WRITE, w, (uintptr_t)mem + MEM_LEN - 10, 11); /* one byte over */
	for (int i = 0; i < 5; i++)
		TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[i]));
	pump(&h);
	CU_ASSERT_EQUAL(sl_err[0], -EFAULT);
	CU_ASSERT_EQUAL(sl_err[1], 0);
	CU_ASSERT_EQUAL(sl_err[2], -EFAULT);
	CU_ASSERT_EQUAL(sl_err[3], 0);
	CU_ASSERT_EQUAL(sl_err[4], -EFAULT);
	CU_ASSERT_EQUAL(memcmp(r, w, sizeof(w)), 0);
	CU_ASSERT_EQUAL(bad[0], 0x77);
	CU_ASSERT_EQUAL(forbidden[2], (uint8_t)(9 * 131 + 14));
	CU_ASSERT_EQUAL(te_cli_sess_error(h.cli), 0);
	CU_ASSERT_EQUAL(te_srv_sess_close_reason(h.srv), 0);
	h_close(&h);
}

static void
test_hello(void)
{
	struct harness h;
	uint8_t w[512];

	memset(mem, 0, 1024);
	memset(w, 0xab, sizeof(w));
	/* stale: the WRITE pipelined behind HELLO must not land */
	h_open(&h, 3, 0x9999, 8, BYTE, false);
	mk(0, TE_FRAME_OP_WRITE, w, (uintptr_t)mem, sizeof(w));
	mk(1, TE_FRAME_OP_READ, w, (uintptr_t)mem, sizeof(w));
	TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[0]));
	TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[1]));
	pump(&h);
	CU_ASSERT_EQUAL(sl_err[0], -ESTALE);
	CU_ASSERT_EQUAL(sl_err[1], -ESTALE);
	CU_ASSERT_EQUAL(te_cli_sess_error(h.cli), -ESTALE);
	CU_ASSERT_EQUAL(te_srv_sess_close_reason(h.srv), -ESTALE);
	CU_ASSERT_EQUAL(mem[0], 0);
	CU_ASSERT_EQUAL(checks, 0);
	h_close(&h);
	/* matching instance */
	h_open(&h, 3, srv_ctx.instance, 8, RANDOM, true);
	mk(0, TE_FRAME_OP_WRITE, w, (uintptr_t)mem, sizeof(w));
	TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[0]));
	pump(&h);
	CU_ASSERT_EQUAL(sl_err[0], 0);
	CU_ASSERT_EQUAL(mem[511], 0xab);
	{
		uint64_t nreq = 0;

		/* HELLO and the WRITE, both native */
		CU_ASSERT_EQUAL(te_srv_sess_proto(h.srv, &nreq), TE_PROTO_NATIVE);
		CU_ASSERT_EQUAL(nreq, 2);
	}
	h_close(&h);
}

/* Many pipelined native requests of random sizes and ops; window by count and bytes. */
static void
pipelined(enum chunking ch, bool zc, uint64_t win_bytes)
{
	enum { N = 1500 };
	struct harness h;
	struct te_cli_sess_cfg cc = {
		.proto = 3, .max_inflight = 32, .max_inflight_bytes = win_bytes, .done = done_cb};
	uint8_t *local = malloc(MEM_LEN), *back = calloc(1, MEM_LEN);
	int next = 0, peak = 0;

	fill(local, MEM_LEN, 77);
	memset(mem, 0, MEM_LEN);
	h_open(&h, 3, 0, 32, ch, zc);
	te_cli_sess_destroy(h.cli, -ECANCELED);
	TIDE_UT_OK(te_cli_sess_create(&cc, &h.cli));
	/* first pass WRITEs chunks at random offsets, second READs them into back */
	uint32_t off[N], len[N];
	for (int i = 0; i < N; i++) {
		len[i] = 1 + (uint32_t)rand() % 4000;
		off[i] = (uint32_t)rand() % (MEM_LEN - len[i]);
	}
	while (next < 2 * N) {
		while (next < 2 * N) {
			int i = next % N;
			uint8_t op = next < N ? TE_FRAME_OP_WRITE : TE_FRAME_OP_READ;

			if (!te_cli_sess_can_submit(h.cli, len[i]))
				break;
			if (next == N && te_cli_sess_inflight(h.cli) > 0)
				break; /* READs after every WRITE landed */
			mk(next, op, op == TE_FRAME_OP_WRITE ? local + off[i] : back + off[i],
			   (uintptr_t)mem + off[i], len[i]);
			TIDE_UT_OK(te_cli_sess_submit(h.cli, &sl[next]));
			next++;
		}
		if ((int)te_cli_sess_inflight(h.cli) > peak)
			peak = (int)te_cli_sess_inflight(h.cli);
		CU_ASSERT(win_bytes == 0 || te_cli_sess_inflight(h.cli) == 1 ||
			  te_cli_sess_inflight_bytes(h.cli) <= win_bytes);
		pump(&h);
	}
	CU_ASSERT_EQUAL(ndone, 2 * N);
	for (int i = 0; i < 2 * N; i++)
		CU_ASSERT_EQUAL(sl_err[i], 0);
	/* READ back = what the later WRITE to those bytes left: compare to mem */
	for (int i = 0; i < N; i++)
		CU_ASSERT_EQUAL(memcmp(back + off[i], mem + off[i], len[i]), 0);
	/* each byte of mem written came from local at the same offset */
	for (int i = 0; i < N; i++)
		CU_ASSERT_EQUAL(memcmp(mem + off[i], local + off[i], len[i]), 0);
	CU_ASSERT(peak > 1);
	CU_ASSERT(peak <= 32);
	h_close(&h);
	free(local);
	free(back);
}

static void
test_pipelined_native(void)
{
	pipelined(BULK, false, 0);
	pipelined(RANDOM, true, 0);
	pipelined(RANDOM, false, 16384);
}

static void
test_window_limits(void)
{
	struct te_cli_sess *c;
	struct te_cli_sess_cfg cc = {
		.proto = 3, .max_inflight = 2, .max_inflight_bytes = 100, .done = done_cb};
	uint8_t b[200];

	TIDE_UT_OK(te_cli_sess_create(&cc, &c));
	memset(sl, 0, sizeof(sl));
	ndone = 0;
	mk(0, 0, b, 0x1000, 200); /* one slice always fits */
	CU_ASSERT_TRUE(te_cli_sess_can_submit(c, 200));
	TIDE_UT_OK(te_cli_sess_submit(c, &sl[0]));
	mk(1, 0, b, 0x1000, 1);
	CU_ASSERT_EQUAL(te_cli_sess_submit(c, &sl[1]), -EBUSY);
	mk(2, 5, b, 0x1000, 1);
	CU_ASSERT_EQUAL(te_cli_sess_submit(c, &sl[2]), -EINVAL);
	mk(2, 0, b, 0x1000, 0);
	CU_ASSERT_EQUAL(te_cli_sess_submit(c, &sl[2]), -EINVAL);
	CU_ASSERT_EQUAL(te_cli_sess_inflight(c), 1);
	CU_ASSERT_EQUAL(te_cli_sess_inflight_bytes(c), 200);
	te_cli_sess_destroy(c, -ECANCELED);
	CU_ASSERT_EQUAL(ndone, 1);
	CU_ASSERT_EQUAL(sl_err[0], -ECANCELED);
	cc.max_inflight = 0;
	CU_ASSERT_EQUAL(te_cli_sess_create(&cc, &c), -EINVAL);
	cc.max_inflight = 5000;
	CU_ASSERT_EQUAL(te_cli_sess_create(&cc, &c), -EINVAL);
	cc.max_inflight = 4;
	cc.proto = 9;
	CU_ASSERT_EQUAL(te_cli_sess_create(&cc, &c), -EINVAL);
	cc.proto = 1;
	cc.done = NULL;
	CU_ASSERT_EQUAL(te_cli_sess_create(&cc, &c), -EINVAL);
}

/* A client with slices in flight fed crafted replies. */
static struct te_cli_sess *
cli_with(uint32_t proto, int n, uint8_t op, uint8_t *buf)
{
	struct te_cli_sess *c;
	struct te_cli_sess_cfg cc = {.proto = proto, .max_inflight = 8, .done = done_cb};
	struct iovec iov[32];
	unsigned k;
	size_t tot = 0;

	TIDE_UT_OK(te_cli_sess_create(&cc, &c));
	memset(sl, 0, sizeof(sl));
	memset(sl_err, 0x7f, sizeof(sl_err));
	memset(sl_done_n, 0, sizeof(sl_done_n));
	ndone = 0;
	for (int i = 0; i < n; i++) {
		mk(i, op, buf, 0x5000, 16);
		TIDE_UT_OK(te_cli_sess_submit(c, &sl[i]));
	}
	k = te_cli_sess_tx_iov(c, iov, 32);
	for (unsigned i = 0; i < k; i++)
		tot += iov[i].iov_len;
	te_cli_sess_tx_advance(c, tot); /* everything "sent" */
	return c;
}

static void
test_malformed_replies(void)
{
	uint8_t buf[16], b[64];
	struct te_frame_reply r;
	struct te_cli_sess *c;

	/* v2: unknown status word */
	c = cli_with(2, 1, TE_FRAME_OP_READ, buf);
	te_frame_status_encode(0x1234, b);
	CU_ASSERT_EQUAL(te_cli_sess_feed(c, b, 8), 8);
	CU_ASSERT_EQUAL(sl_err[0], -EPROTO);
	CU_ASSERT_EQUAL(te_cli_sess_error(c), -EPROTO);
	te_cli_sess_destroy(c, -ECANCELED);
	CU_ASSERT_EQUAL(sl_done_n[0], 1); /* exactly once */
	/* native: request id out of order fails every slice */
	c = cli_with(3, 3, TE_FRAME_OP_WRITE, buf);
	r.status = TE_FRAME_ST_OK;
	r.req_id = 2;
	te_frame_reply_encode(&r, b);
	(void)te_cli_sess_feed(c, b, TE_FRAME_REPLY_LEN);
	CU_ASSERT_EQUAL(ndone, 3);
	CU_ASSERT_EQUAL(sl_err[0], -EPROTO);
	CU_ASSERT_EQUAL(sl_err[2], -EPROTO);
	te_cli_sess_destroy(c, -ECANCELED);
	CU_ASSERT_EQUAL(ndone, 3);
	/* native: reserved word */
	c = cli_with(3, 1, TE_FRAME_OP_WRITE, buf);
	r.req_id = 1;
	te_frame_reply_encode(&r, b);
	b[15] = 9;
	(void)te_cli_sess_feed(c, b, TE_FRAME_REPLY_LEN);
	CU_ASSERT_EQUAL(sl_err[0], -EPROTO);
	te_cli_sess_destroy(c, -ECANCELED);
	/* native: STALE outside HELLO */
	c = cli_with(3, 1, TE_FRAME_OP_WRITE, buf);
	r.status = TE_FRAME_ST_STALE;
	te_frame_reply_encode(&r, b);
	(void)te_cli_sess_feed(c, b, TE_FRAME_REPLY_LEN);
	CU_ASSERT_EQUAL(sl_err[0], -EPROTO);
	te_cli_sess_destroy(c, -ECANCELED);
	/* v1 WRITE has no reply: any byte is a protocol error */
	c = cli_with(1, 1, TE_FRAME_OP_WRITE, buf);
	CU_ASSERT_EQUAL(sl_err[0], 0); /* completed when sent */
	CU_ASSERT_EQUAL(te_cli_sess_feed(c, b, 1), 0);
	CU_ASSERT_EQUAL(te_cli_sess_error(c), -EPROTO);
	te_cli_sess_destroy(c, -ECANCELED);
	/* native: reply with nothing in flight */
	c = cli_with(3, 0, TE_FRAME_OP_WRITE, buf);
	CU_ASSERT_EQUAL(te_cli_sess_feed(c, b, 16), 0);
	CU_ASSERT_EQUAL(te_cli_sess_error(c), -EPROTO);
	te_cli_sess_destroy(c, -ECANCELED);
	/* native: a reply before the request was fully sent */
	{
		struct te_cli_sess_cfg cc = {.proto = 3, .max_inflight = 8, .done = done_cb};

		TIDE_UT_OK(te_cli_sess_create(&cc, &c));
		ndone = 0;
		mk(0, TE_FRAME_OP_WRITE, buf, 0x5000, 16);
		TIDE_UT_OK(te_cli_sess_submit(c, &sl[0]));
		te_cli_sess_tx_advance(c, 10);
		r.status = TE_FRAME_ST_OK;
		r.req_id = 1;
		te_frame_reply_encode(&r, b);
		(void)te_cli_sess_feed(c, b, TE_FRAME_REPLY_LEN);
		CU_ASSERT_EQUAL(sl_err[0], -EPROTO);
		CU_ASSERT_EQUAL(ndone, 1);
		te_cli_sess_destroy(c, -ECANCELED);
	}
	/* READ data never overflows the slice: extra bytes are a protocol error */
	c = cli_with(1, 1, TE_FRAME_OP_READ, buf);
	memset(b, 0x3c, sizeof(b));
	CU_ASSERT_EQUAL(te_cli_sess_feed(c, b, 20), 16);
	CU_ASSERT_EQUAL(sl_err[0], 0);
	CU_ASSERT_EQUAL(buf[15], 0x3c);
	CU_ASSERT_EQUAL(te_cli_sess_error(c), -EPROTO);
	te_cli_sess_destroy(c, -ECANCELED);
}

static void
test_server_malformed_and_teardown(void)
{
	struct te_srv_sess *s;
	uint8_t b[TE_FRAME_HDR_LEN] = {0};
	struct te_frame_hdr h = {.size = 100, .addr = (uintptr_t)mem, .op = 1, .proto = 2};
	uint64_t nreq = 99;
	uint8_t *p;

	CU_ASSERT_EQUAL(te_srv_sess_create(&(struct te_srv_ctx){.check = chk}, &s), -EINVAL);
	/* bad opcode: close without a reply, no check made */
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &s));
	b[16] = 0x23;
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, b, sizeof(b)), sizeof(b));
	CU_ASSERT_EQUAL(te_srv_sess_close_reason(s), -EPROTO);
	CU_ASSERT_EQUAL(te_srv_sess_proto(s, &nreq), 0); /* a malformed header is no request */
	CU_ASSERT_EQUAL(nreq, 0);
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, b, sizeof(b)), 0);
	CU_ASSERT_EQUAL(te_srv_sess_rx_window(s, &p), 0);
	te_srv_sess_destroy(s);
	/* connection lost mid-WRITE: the reference is dropped on destroy */
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &s));
	CU_ASSERT_EQUAL(te_srv_sess_proto(s, NULL), 0);
	TIDE_UT_OK(te_frame_hdr_encode(&h, b));
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, b, sizeof(b)), sizeof(b));
	CU_ASSERT_EQUAL(te_srv_sess_proto(s, &nreq), 2); /* v2, the first request */
	CU_ASSERT_EQUAL(nreq, 1);
	CU_ASSERT_EQUAL(holds, 1);
	CU_ASSERT_FALSE(te_srv_sess_idle(s));
	CU_ASSERT_EQUAL(te_srv_sess_rx_window(s, &p), 100);
	CU_ASSERT_PTR_EQUAL(p, mem);
	/* the payload's whole size, also once part of it arrived */
	CU_ASSERT_EQUAL(te_srv_sess_rx_payload(s), 100);
	te_srv_sess_rx_advance(s, 60);
	CU_ASSERT_EQUAL(te_srv_sess_rx_window(s, &p), 40);
	CU_ASSERT_EQUAL(te_srv_sess_rx_payload(s), 100);
	te_srv_sess_destroy(s);
	CU_ASSERT_EQUAL(holds, 0);
	/* a wrapping range is refused even if check() would not notice */
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &s));
	h.addr = UINT64_MAX - 10;
	h.op = 0;
	TIDE_UT_OK(te_frame_hdr_encode(&h, b));
	(void)te_srv_sess_feed(s, b, sizeof(b));
	CU_ASSERT_EQUAL(holds, 0);
	te_srv_sess_destroy(s);
}

/* A pipelined native stream is answered with batched replies; the queue is bounded. */
static void
test_server_reply_queue(void)
{
	enum { N = 100 };
	struct te_srv_sess *s;
	uint8_t *in = malloc((size_t)N * TE_FRAME_HDR_LEN);
	struct iovec iov[128];
	size_t off = 0, k, tot = 0;
	unsigned n;

	for (int i = 0; i < N; i++) {
		struct te_frame_hdr h = {.size = 8,
					 .addr = (uintptr_t)mem + 8 * (uint64_t)i,
					 .op = 0,
					 .proto = 3,
					 .req_id = (uint32_t)i + 1};

		TIDE_UT_OK(te_frame_hdr_encode(&h, in + (size_t)i * TE_FRAME_HDR_LEN));
	}
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &s));
	k = te_srv_sess_feed(s, in, (size_t)N * TE_FRAME_HDR_LEN);
	CU_ASSERT_EQUAL(k, 32 * TE_FRAME_HDR_LEN); /* stops at 32 queued replies */
	CU_ASSERT_EQUAL(holds, 32);
	CU_ASSERT_FALSE(te_srv_sess_idle(s));
	n = te_srv_sess_tx_iov(s, iov, 128);
	CU_ASSERT_EQUAL(n, 64); /* header + data per reply */
	for (unsigned i = 0; i < n; i++)
		tot += iov[i].iov_len;
	CU_ASSERT_EQUAL(tot, 32 * (TE_FRAME_REPLY_LEN + 8));
	CU_ASSERT_PTR_EQUAL(iov[1].iov_base, mem);
	/* a partial send keeps the rest, and releases only what fully left */
	te_srv_sess_tx_advance(s, TE_FRAME_REPLY_LEN + 8 + 3);
	CU_ASSERT_EQUAL(holds, 31);
	n = te_srv_sess_tx_iov(s, iov, 1);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(iov[0].iov_len, TE_FRAME_REPLY_LEN - 3);
	off = k;
	/* the rest is parsed once room frees */
	te_srv_sess_tx_advance(s, tot - (TE_FRAME_REPLY_LEN + 8 + 3));
	CU_ASSERT_EQUAL(holds, 0);
	k = te_srv_sess_feed(s, in + off, (size_t)N * TE_FRAME_HDR_LEN - off);
	CU_ASSERT_EQUAL(k, 32 * TE_FRAME_HDR_LEN);
	/* connection lost with replies queued: references dropped */
	te_srv_sess_destroy(s);
	CU_ASSERT_EQUAL(holds, 0);
	free(in);
}

/*
 * tx_hold (zero-copy transports): READ replies the transport has sent keep
 * their check() references and queue slots until tx_done() covers them; input
 * stops while held and queued replies fill the queue; a malformed request or
 * a lost connection drops queued replies at once but held ones only when the
 * transport says so (tx_done) or the session is destroyed.
 */
static void
test_server_tx_hold(void)
{
	enum { N = 40, SZ = 3000 };
	struct te_srv_sess *s;
	uint8_t *in = malloc((size_t)N * TE_FRAME_HDR_LEN);
	struct iovec iov[128];
	uint64_t end[N], pos = 0;
	size_t k, tot = 0;
	unsigned n;

	for (int i = 0; i < N; i++) {
		struct te_frame_hdr h = {.size = SZ,
					 .addr = (uintptr_t)mem + SZ * (uint64_t)i,
					 .op = 0,
					 .proto = 3,
					 .req_id = (uint32_t)i + 1};

		TIDE_UT_OK(te_frame_hdr_encode(&h, in + (size_t)i * TE_FRAME_HDR_LEN));
	}
	holds = 0;
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &s));
	te_srv_sess_tx_hold(s, true);
	CU_ASSERT_EQUAL(te_srv_sess_tx_pos(s), 0);
	k = te_srv_sess_feed(s, in, (size_t)N * TE_FRAME_HDR_LEN);
	CU_ASSERT_EQUAL(k, TE_SRV_SESS_OUTQ * TE_FRAME_HDR_LEN);
	CU_ASSERT_EQUAL(holds, TE_SRV_SESS_OUTQ);
	n = te_srv_sess_tx_iov(s, iov, 128);
	CU_ASSERT_EQUAL(n, 2 * TE_SRV_SESS_OUTQ);
	for (unsigned i = 0; i < n; i++)
		tot += iov[i].iov_len;
	for (int i = 0; i < TE_SRV_SESS_OUTQ; i++) {
		pos += TE_FRAME_REPLY_LEN + SZ;
		end[i] = pos;
	}
	/* Everything "sent" (by reference): nothing released, the queue stays full. */
	te_srv_sess_tx_advance(s, tot);
	CU_ASSERT_EQUAL(te_srv_sess_tx_pos(s), tot);
	CU_ASSERT_EQUAL(tot, end[TE_SRV_SESS_OUTQ - 1]);
	CU_ASSERT_EQUAL(holds, TE_SRV_SESS_OUTQ);
	CU_ASSERT_EQUAL(te_srv_sess_tx_iov(s, iov, 128), 0);
	CU_ASSERT_FALSE(te_srv_sess_idle(s));
	{
		uint8_t *p;

		CU_ASSERT_EQUAL(te_srv_sess_rx_window(s, &p), 0);
	}
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, in + k, TE_FRAME_HDR_LEN), 0);
	/* A position inside reply 3 releases 0..2 only, oldest first. */
	te_srv_sess_tx_done(s, end[2] + 5);
	CU_ASSERT_EQUAL(holds, TE_SRV_SESS_OUTQ - 3);
	te_srv_sess_tx_done(s, end[1]); /* going back is harmless */
	CU_ASSERT_EQUAL(holds, TE_SRV_SESS_OUTQ - 3);
	/* Room for three more requests. */
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, in + k, (size_t)N * TE_FRAME_HDR_LEN - k),
			3 * TE_FRAME_HDR_LEN);
	k += 3 * TE_FRAME_HDR_LEN;
	CU_ASSERT_EQUAL(holds, TE_SRV_SESS_OUTQ);
	/* One of them half sent, then a malformed request: queued replies are dropped
	 * (the half-sent one too), held ones stay referenced. */
	n = te_srv_sess_tx_iov(s, iov, 128);
	CU_ASSERT_EQUAL(n, 6);
	CU_ASSERT_PTR_EQUAL(iov[1].iov_base, mem + (size_t)SZ * TE_SRV_SESS_OUTQ);
	te_srv_sess_tx_advance(s, TE_FRAME_REPLY_LEN + 10);
	te_srv_sess_tx_done(s, end[TE_SRV_SESS_OUTQ - 2]);
	CU_ASSERT_EQUAL(holds, 1 + 3); /* reply 31 held, 32..34 queued */
	{
		uint8_t junk[TE_FRAME_HDR_LEN];

		memset(junk, 0xee, sizeof(junk));
		CU_ASSERT_EQUAL(te_srv_sess_feed(s, junk, sizeof(junk)), sizeof(junk));
	}
	CU_ASSERT_EQUAL(te_srv_sess_close_reason(s), -EPROTO);
	CU_ASSERT_EQUAL(holds, 1); /* the device may still read reply 31 */
	CU_ASSERT_EQUAL(te_srv_sess_tx_iov(s, iov, 128), 0);
	te_srv_sess_tx_done(s, end[TE_SRV_SESS_OUTQ - 1]);
	CU_ASSERT_EQUAL(holds, 0);
	te_srv_sess_destroy(s);
	CU_ASSERT_EQUAL(holds, 0);

	/* Destroyed while the transport holds replies: every reference comes back. */
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &s));
	te_srv_sess_tx_hold(s, true);
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, in, 5 * TE_FRAME_HDR_LEN), 5 * TE_FRAME_HDR_LEN);
	n = te_srv_sess_tx_iov(s, iov, 4);
	te_srv_sess_tx_advance(s, iov[0].iov_len + iov[1].iov_len + iov[2].iov_len);
	CU_ASSERT_EQUAL(holds, 5);
	te_srv_sess_tx_done(s, te_srv_sess_tx_pos(s));
	CU_ASSERT_EQUAL(holds, 4); /* reply 0 done; reply 1 is only half sent */
	te_srv_sess_destroy(s);
	CU_ASSERT_EQUAL(holds, 0);
	free(in);
}

/*
 * The loop te_sess.h shows for a push stack (DPDK side): the server is fed
 * through an on_recv-style call that may consume less, its "send" accepts at
 * most 100 bytes per call, and held input is offered again on resume.
 */
struct push_conn {
	struct te_srv_sess *s;
	struct pipe out;    /* what "send" accepted */
	size_t send_budget; /* bytes send() still accepts before "WRITABLE" */
	bool held, resume;
};

static size_t
push_send(struct push_conn *pc, const void *d, size_t n)
{
	size_t k = n < pc->send_budget ? n : pc->send_budget;

	pipe_put(&pc->out, d, k);
	pc->send_budget -= k;
	return k;
}

static void
push_flush(struct push_conn *pc)
{
	struct iovec iov[16];
	unsigned n;

	while ((n = te_srv_sess_tx_iov(pc->s, iov, 16)) > 0) {
		size_t sent = 0;
		bool short_send = false;

		for (unsigned i = 0; i < n; i++) {
			size_t k = push_send(pc, iov[i].iov_base, iov[i].iov_len);

			sent += k;
			if (k < iov[i].iov_len) {
				short_send = true;
				break;
			}
		}
		te_srv_sess_tx_advance(pc->s, sent);
		if (short_send)
			return; /* wait for WRITABLE */
	}
	if (pc->held)
		pc->resume = true;
}

static size_t
push_on_recv(struct push_conn *pc, const uint8_t *data, size_t len)
{
	size_t used = te_srv_sess_feed(pc->s, data, len);

	pc->held = used < len;
	push_flush(pc);
	return used;
}

static void
test_push_stack_driver(void)
{
	enum { N = 200 };
	struct push_conn pc = {0};
	struct pipe in = {0};
	size_t len = 0;
	int replies = 0, loops = 0;

	memset(mem, 0, MEM_LEN);
	TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &pc.s));
	/* 200 pipelined native WRITEs of 40 bytes, then one READ of all of it */
	for (int i = 0; i < N; i++) {
		struct te_frame_hdr h = {.size = 40,
					 .addr = (uintptr_t)mem + 40 * (uint64_t)i,
					 .op = 1,
					 .proto = 3,
					 .req_id = (uint32_t)i};
		uint8_t hb[TE_FRAME_HDR_LEN], pay[40];

		TIDE_UT_OK(te_frame_hdr_encode(&h, hb));
		memset(pay, i & 0xff, sizeof(pay));
		pipe_put(&in, hb, sizeof(hb));
		pipe_put(&in, pay, sizeof(pay));
	}
	{
		struct te_frame_hdr h = {
			.size = 40 * N, .addr = (uintptr_t)mem, .op = 0, .proto = 3, .req_id = N};
		uint8_t hb[TE_FRAME_HDR_LEN];

		TIDE_UT_OK(te_frame_hdr_encode(&h, hb));
		pipe_put(&in, hb, sizeof(hb));
	}
	len = in.len;
	/* the stack delivers in 1500-byte segments; held bytes wait for a resume */
	while (in.len > 0 && loops++ < 100000) {
		size_t seg = in.len < 1500 ? in.len : 1500;
		size_t used = push_on_recv(&pc, in.b, seg);

		pipe_eat(&in, used);
		while (pc.held && !pc.resume) { /* WRITABLE events until flushed */
			pc.send_budget = 100;
			push_flush(&pc);
		}
		pc.resume = false;
		pc.send_budget = 100;
	}
	while (te_srv_sess_tx_iov(pc.s, (struct iovec[1]){0}, 1) > 0) {
		pc.send_budget = 100;
		push_flush(&pc);
	}
	CU_ASSERT_EQUAL(in.len, 0);
	CU_ASSERT(len > 0);
	/* N reply headers, then the READ reply with the data */
	for (size_t off = 0; off + TE_FRAME_REPLY_LEN <= pc.out.len && replies < N;
	     off += TE_FRAME_REPLY_LEN) {
		struct te_frame_reply r;

		TIDE_UT_OK(te_frame_reply_decode(pc.out.b + off, TE_FRAME_REPLY_LEN, &r));
		CU_ASSERT_EQUAL(r.req_id, (uint32_t)replies);
		CU_ASSERT_EQUAL(r.status, TE_FRAME_ST_OK);
		replies++;
	}
	CU_ASSERT_EQUAL(replies, N);
	CU_ASSERT_EQUAL(pc.out.len, (size_t)(N + 1) * TE_FRAME_REPLY_LEN + 40 * N);
	CU_ASSERT_EQUAL(pc.out.b[(N + 1) * TE_FRAME_REPLY_LEN + 40 * 7], 7);
	CU_ASSERT_EQUAL(mem[40 * 199 + 39], 199);
	te_srv_sess_destroy(pc.s);
	CU_ASSERT_EQUAL(holds, 0);
	free(in.b);
	free(pc.out.b);
}

/* Random bytes into both ends: no crash, no leak, references balanced. */
static void
test_fuzz(void)
{
	uint8_t junk[4096], buf[4096];

	for (int round = 0; round < 300; round++) {
		struct te_srv_sess *s;
		struct te_cli_sess *c;
		struct iovec iov[4];
		size_t n = 1 + (size_t)rand() % sizeof(junk), off = 0;

		for (size_t i = 0; i < n; i++)
			junk[i] = (uint8_t)rand();
		/* sometimes a valid opcode byte so parsing goes deeper */
		if (n > 16 && (round & 1))
			junk[16] = (uint8_t)(0x40 | (round % 3));
		TIDE_UT_OK(te_srv_sess_create(&srv_ctx, &s));
		while (off < n) {
			size_t k = te_srv_sess_feed(s, junk + off, n - off);
			unsigned m = te_srv_sess_tx_iov(s, iov, 4);

			if (k == 0 && m == 0)
				break;
			for (unsigned i = 0; i < m; i++)
				te_srv_sess_tx_advance(s, iov[i].iov_len);
			off += k;
		}
		te_srv_sess_destroy(s);
		CU_ASSERT_EQUAL(holds, 0);
		uint32_t proto = 1 + (uint32_t)round % 3;
		int nsl = proto == 3 ? 1 + round % 4 : 1;

		c = cli_with(proto, nsl, (uint8_t)(round & 1), buf);
		(void)te_cli_sess_feed(c, junk, n);
		te_cli_sess_destroy(c, -ECANCELED);
		for (int i = 0; i < nsl; i++)
			CU_ASSERT_EQUAL(sl_done_n[i], 1);
	}
}

static int
suite_init(void)
{
	srand(12345);
	mem = malloc(MEM_LEN);
	forbidden = malloc(4096);
	return mem == NULL || forbidden == NULL;
}

static int
suite_fini(void)
{
	free(mem);
	free(forbidden);
	return 0;
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_sess", suite_init, suite_fini);

	CU_add_test(s, "write_read_all_framings", test_write_read_all_framings);
	CU_add_test(s, "refused_v1", test_refused_v1);
	CU_add_test(s, "refused_v2", test_refused_v2);
	CU_add_test(s, "refused_native_survives", test_refused_native_survives);
	CU_add_test(s, "hello", test_hello);
	CU_add_test(s, "pipelined_native", test_pipelined_native);
	CU_add_test(s, "window_limits", test_window_limits);
	CU_add_test(s, "malformed_replies", test_malformed_replies);
	CU_add_test(s, "server_malformed_and_teardown", test_server_malformed_and_teardown);
	CU_add_test(s, "server_reply_queue", test_server_reply_queue);
	CU_add_test(s, "server_tx_hold", test_server_tx_hold);
	CU_add_test(s, "push_stack_driver", test_push_stack_driver);
	CU_add_test(s, "fuzz", test_fuzz);
}

TIDE_UT_MAIN(register_tests)
