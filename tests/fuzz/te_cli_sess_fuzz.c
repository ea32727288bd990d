/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the transfer engine's TCP data framing, client side
 * (engine/te/tcp/te_sess.c, te_frame.c): the input is what a data server
 * answers (v2 status words, native reply headers, READ data).
 *
 * Every client scenario of fuzz_te.h (v1, v2, native with and without HELLO,
 * a byte-limited window) gets the input twice: pulled through
 * rx_window()/rx_advance() in pseudo-random pieces, refilling the window
 * after each piece as a transport does, and pushed whole with feed() after
 * filling the window once. Every slice taken must complete exactly once, in
 * order, with a documented error; once the session failed nothing may be
 * owned; READ data must land inside slice->local (ASan-checked heap).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_te.h"
#include "te_sess.h"
#include "tide_log.h"

#include "fuzz_common.h"

/* te_slice_done belongs to the engine core; sessions never call it. */
void
te_slice_done(struct te_slice *s, int err)
{
	(void)s;
	(void)err;
	__builtin_trap();
}

struct cli {
	const struct fz_te_scen *sc;
	struct te_cli_sess *c;
	struct te_slice sl[FZ_TE_MAX_TOTAL];
	unsigned submitted, completed;
};

static void
done_cb(void *arg, struct te_slice *s, int err)
{
	struct cli *st = arg;
	size_t i = (size_t)(s - st->sl);

	/* In submission order, once each, with a documented error. */
	TRAP_IF(i >= st->submitted || i != st->completed);
	TRAP_IF(err != 0 && err != -EFAULT && err != -ESTALE && err != -EPROTO &&
		err != -ECONNRESET);
	st->completed++;
	free(s->local);
	s->local = NULL;
}

static void
cli_start(struct cli *st, const struct fz_te_scen *sc)
{
	struct te_cli_sess_cfg cfg = {
		.proto = sc->proto,
		.instance = sc->instance,
		.max_inflight = sc->max_inflight,
		.max_inflight_bytes = sc->max_inflight_bytes,
		.done = done_cb,
		.arg = st,
	};

	memset(st, 0, sizeof(*st));
	st->sc = sc;
	TRAP_IF(te_cli_sess_create(&cfg, &st->c) != 0);
}

/* Take slices while the window has room. */
static void
refill(struct cli *st)
{
	while (st->submitted < FZ_TE_TOTAL(st->sc)) {
		const struct fz_te_slice *d = &st->sc->s[st->submitted % st->sc->n];
		struct te_slice *s = &st->sl[st->submitted];
		int rc;

		if (!te_cli_sess_can_submit(st->c, d->len))
			break;
		s->op = d->op;
		s->remote = FZ_TE_BASE + d->off;
		s->len = d->len;
		s->local = malloc(d->len);
		TRAP_IF(s->local == NULL);
		memset(s->local, 0x5a, d->len);
		st->submitted++;
		rc = te_cli_sess_submit(st->c, s);
		TRAP_IF(rc != 0);
	}
}

/* Send everything the session offers (v1 WRITEs complete here, so refill). */
static void
flush(struct cli *st)
{
	struct iovec iov[8];
	unsigned n;

	while ((n = te_cli_sess_tx_iov(st->c, iov, 8)) > 0) {
		size_t sent = 0;

		for (unsigned i = 0; i < n; i++) {
			TRAP_IF(iov[i].iov_len == 0);
			sent += iov[i].iov_len;
		}
		te_cli_sess_tx_advance(st->c, sent);
		refill(st);
	}
}

static void
cli_end(struct cli *st)
{
	if (te_cli_sess_error(st->c) != 0) {
		TRAP_IF(te_cli_sess_inflight(st->c) != 0 || te_cli_sess_inflight_bytes(st->c) != 0);
		TRAP_IF(te_cli_sess_can_submit(st->c, 1));
	}
	TRAP_IF(te_cli_sess_inflight(st->c) != st->submitted - st->completed);
	te_cli_sess_destroy(st->c, -ECONNRESET);
	TRAP_IF(st->completed != st->submitted);
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
pull_run(const struct fz_te_scen *sc, const uint8_t *data, size_t size, uint64_t seed)
{
	struct cli st;
	size_t off = 0;

	cli_start(&st, sc);
	refill(&st);
	for (;;) {
		uint8_t *p;
		size_t w, k;

		flush(&st);
		if (te_cli_sess_error(st.c) != 0 || off == size)
			break;
		w = te_cli_sess_rx_window(st.c, &p);
		if (w == 0) {
			/* Bytes nobody asked for: the session must fail, having taken them. */
			size_t used = te_cli_sess_feed(st.c, data + off, size - off);

			TRAP_IF(te_cli_sess_error(st.c) != -EPROTO || used > size - off);
			break;
		}
		TRAP_IF(p == NULL);
		k = 1 + (size_t)(rnd(&seed) % 61);
		if (k > w)
			k = w;
		if (k > size - off)
			k = size - off;
		memcpy(p, data + off, k);
		te_cli_sess_rx_advance(st.c, k);
		off += k;
		refill(&st);
	}
	cli_end(&st);
}

static void
push_run(const struct fz_te_scen *sc, const uint8_t *data, size_t size)
{
	struct cli st;
	size_t used;

	cli_start(&st, sc);
	refill(&st);
	flush(&st);
	used = te_cli_sess_feed(st.c, data, size);
	TRAP_IF(used > size || (used < size && te_cli_sess_error(st.c) == 0));
	flush(&st);
	cli_end(&st);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tide_log_set_level(TIDE_LOG_ERR);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ size;

	for (size_t i = 0; i < size && i < 64; i++)
		seed = (seed ^ data[i]) * 0x100000001b3ULL;
	if (seed == 0)
		seed = 1;
	for (size_t i = 0; i < FZ_TE_NSCENS; i++) {
		pull_run(&fz_te_scens[i], data, size, seed);
		push_run(&fz_te_scens[i], data, size);
	}
	return 0;
}
