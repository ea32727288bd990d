/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The benchmark protocol (see net_bench.h), transport-agnostic.
 *
 * Verification is cheap on purpose so it does not dominate the measurement:
 * the pattern is a pseudo-random buffer with a period that is not a power of
 * two, so every check is a memcmp against a hot buffer, and a lost,
 * duplicated or reordered byte shifts the stream against the pattern and is
 * caught on the next compare.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "net_bench.h"
#include "tide_clock.h"

enum { PH_IDLE, PH_CONNECTING, PH_RUN, PH_DRAIN, PH_GAP, PH_BYE_WAIT, PH_DONE };

#define CONNECT_TIMEOUT_NS (10ull * 1000000000ull)
#define DRAIN_TIMEOUT_NS   (10ull * 1000000000ull)
#define GAP_NS             (50ull * 1000000ull) /* between rows: the server settles */
#define OUT_CAP            (2 * NB_PP_MAX)
#define STREAM_CHUNK       (1u << 20)

uint8_t *nb_pattern;

int
nb_pattern_init(void)
{
	uint64_t s = 0x243f6a8885a308d3ull;

	if (nb_pattern != NULL)
		return 0;
	nb_pattern = malloc(2 * (size_t)NB_PAT_PERIOD);
	if (nb_pattern == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < NB_PAT_PERIOD; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		nb_pattern[i] = (uint8_t)(s >> 24);
	}
	memcpy(nb_pattern + NB_PAT_PERIOD, nb_pattern, NB_PAT_PERIOD);
	return 0;
}

uint64_t
nb_now_ns(void)
{
	return tide_mono_ns();
}

double
nb_cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static inline const uint8_t *
pat_at(uint64_t off)
{
	return nb_pattern + off % NB_PAT_PERIOD;
}

/* Bytes of p[0..n) that differ from the pattern from offset off. */
static uint64_t
pat_check(const uint8_t *p, size_t n, uint64_t off)
{
	uint64_t bad = 0;

	while (n > 0) {
		size_t k = n < NB_PAT_PERIOD ? n : NB_PAT_PERIOD;
		const uint8_t *q = pat_at(off);

		if (memcmp(p, q, k) != 0)
			for (size_t i = 0; i < k; i++)
				bad += p[i] != q[i];
		p += k;
		n -= k;
		off += k;
	}
	return bad;
}

static unsigned
hist_idx(uint64_t v)
{
	unsigned e;

	if (v < 64)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return (e - 5) * 64 + (unsigned)((v >> (e - 6)) & 63);
}

/* Midpoint of a histogram slot. */
static uint64_t
hist_value(unsigned idx)
{
	unsigned e, sub;

	if (idx < 64)
		return idx;
	e = idx / 64 + 5;
	sub = idx % 64;
	return ((64ull + sub) << (e - 6)) + ((1ull << (e - 6)) >> 1);
}

static uint64_t
hist_pct(const uint64_t *h, double q)
{
	uint64_t total = 0, acc = 0, want;

	for (unsigned i = 0; i < NB_HIST_SLOTS; i++)
		total += h[i];
	if (total == 0)
		return 0;
	want = (uint64_t)(q * (double)total);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < NB_HIST_SLOTS; i++) {
		acc += h[i];
		if (acc >= want)
			return hist_value(i);
	}
	return 0;
}

void
nb_endpoint_init(struct nb_endpoint *ep, const struct nb_xport_ops *ops, void *xctx, bool client,
		 const struct nb_row *rows, unsigned nrows, double warmup_s, double duration_s)
{
	memset(ep, 0, sizeof(*ep));
	ep->ops = ops;
	ep->xctx = xctx;
	ep->client = client;
	ep->rows = rows;
	ep->nrows = nrows;
	ep->warmup_ns = (uint64_t)(warmup_s * 1e9);
	ep->duration_ns = (uint64_t)(duration_s * 1e9);
	for (unsigned i = 0; i < NB_MAX_FLOWS; i++) {
		ep->flows[i].ep = ep;
		ep->flows[i].fd = -1;
	}
}

void
nb_endpoint_fini(struct nb_endpoint *ep)
{
	for (unsigned i = 0; i < NB_MAX_FLOWS; i++) {
		free(ep->flows[i].rxbuf);
		free(ep->flows[i].out);
		ep->flows[i].rxbuf = NULL;
		ep->flows[i].out = NULL;
	}
}

static void
flow_reset(struct nb_flow *f)
{
	struct nb_endpoint *ep = f->ep;
	uint8_t *rxbuf = f->rxbuf, *out = f->out;
	uint32_t gen = f->gen + 1;

	memset(f, 0, sizeof(*f));
	f->ep = ep;
	f->fd = -1;
	f->gen = gen;
	f->rxbuf = rxbuf;
	f->out = out;
}

struct nb_flow *
nb_flow_alloc(struct nb_endpoint *ep)
{
	for (unsigned i = 0; i < NB_MAX_FLOWS; i++) {
		struct nb_flow *f = &ep->flows[i];

		if (f->in_use)
			continue;
		if (f->out == NULL)
			f->out = malloc(OUT_CAP);
		if (f->out == NULL)
			return NULL;
		flow_reset(f);
		f->in_use = true;
		f->connected = true;
		return f;
	}
	return NULL;
}

static void
flow_close(struct nb_flow *f)
{
	if (!f->in_use || f->closed)
		return;
	f->closed = true;
	f->ep->ops->close(f->ep, f);
	if (!f->ep->client)
		f->in_use = false;
}

static void
fail(struct nb_endpoint *ep, int err)
{
	if (ep->error == 0)
		ep->error = err;
	if (ep->client && ep->cur < ep->nrows && ep->res[ep->cur].error == 0)
		ep->res[ep->cur].error = err;
}

/* Queue bytes behind what the transport has not taken yet, then flush. */
static void
out_flush(struct nb_flow *f)
{
	while (f->out_len > 0 && !f->closed) {
		ssize_t k = f->ep->ops->send(f->ep, f, f->out, f->out_len);

		if (k < 0) {
			nb_on_error(f, (int)k);
			return;
		}
		if (k == 0) {
			f->blocked = true;
			return;
		}
		memmove(f->out, f->out + k, f->out_len - (size_t)k);
		f->out_len -= (size_t)k;
	}
}

static bool
out_put(struct nb_flow *f, const void *p, size_t n)
{
	if (f->out_len + n > OUT_CAP)
		return false;
	memcpy(f->out + f->out_len, p, n);
	f->out_len += n;
	out_flush(f);
	return true;
}

/* ---- client ---- */

static uint64_t
row_pat0(unsigned row, unsigned flow)
{
	return ((uint64_t)row * 104729u + (uint64_t)flow * 7919u) % NB_PAT_PERIOD;
}

/* Push stream bytes until the transport refuses; when draining, stop at a
 * message boundary so every message sent is whole. */
static int
stream_push(struct nb_flow *f, bool draining)
{
	int work = 0;

	while (!f->blocked && !f->closed && f->out_len == 0) {
		uint64_t lim = STREAM_CHUNK;
		uint64_t off = f->pat0 + f->tx;
		size_t room = NB_PAT_PERIOD - (size_t)(off % NB_PAT_PERIOD);
		ssize_t k;

		if (draining) {
			uint64_t left = (f->size - f->tx % f->size) % f->size;

			if (left == 0)
				break;
			if (left < lim)
				lim = left;
		}
		if (room < lim)
			lim = room;
		k = f->ep->ops->send(f->ep, f, pat_at(off), (size_t)lim);
		if (k < 0) {
			nb_on_error(f, (int)k);
			break;
		}
		if ((uint64_t)k < lim)
			f->blocked = true;
		f->tx += (uint64_t)k;
		work += k > 0;
	}
	return work;
}

static void
pp_send(struct nb_flow *f)
{
	ssize_t k;

	f->pp_pat = f->pat0 + f->tx;
	f->pp_got = 0;
	f->pp_out = true;
	f->t_sent = nb_now_ns();
	f->tx += f->size;
	if (f->out_len > 0) {
		out_put(f, pat_at(f->pp_pat), f->size); /* behind the header */
		return;
	}
	/* A ping-pong message fits an empty send buffer; the out queue covers
	 * a transport that takes it in pieces anyway. */
	k = f->ep->ops->send(f->ep, f, pat_at(f->pp_pat), f->size);
	if (k < 0) {
		nb_on_error(f, (int)k);
		return;
	}
	if ((size_t)k < f->size) {
		memcpy(f->out, pat_at(f->pp_pat + (uint64_t)k), f->size - (size_t)k);
		f->out_len = f->size - (size_t)k;
		f->blocked = true;
	}
}

static void
client_start_row(struct nb_endpoint *ep, uint64_t now)
{
	const struct nb_row *r;
	static const struct nb_row bye = {NB_BYE, 8, 1};

	r = ep->cur < ep->nrows ? &ep->rows[ep->cur] : &bye;
	ep->nflows = r->flows;
	memset(ep->hist, 0, sizeof(ep->hist));
	ep->snap0 = ep->snap1 = false;
	for (unsigned i = 0; i < r->flows; i++) {
		struct nb_flow *f = &ep->flows[i];

		if (f->out == NULL)
			f->out = malloc(OUT_CAP);
		if (f->rxbuf == NULL)
			f->rxbuf = malloc(NB_PP_MAX);
		if (f->out == NULL || f->rxbuf == NULL) {
			fail(ep, -ENOMEM);
			return;
		}
		flow_reset(f);
		f->in_use = true;
		f->row = ep->cur;
		f->kind = r->kind;
		f->size = r->size;
		f->idx = i;
		f->pat0 = row_pat0(ep->cur, i);
		int rc = ep->ops->connect(ep, f);

		if (rc != 0) {
			fail(ep, rc);
			return;
		}
	}
	if (ep->cur < ep->nrows)
		ep->res[ep->cur].ran = true;
	ep->phase = PH_CONNECTING;
	ep->t_phase = now;
}

static void
client_begin_traffic(struct nb_endpoint *ep, uint64_t now)
{
	ep->win_start = now + ep->warmup_ns;
	ep->win_end = ep->win_start + ep->duration_ns;
	for (unsigned i = 0; i < ep->nflows; i++) {
		struct nb_flow *f = &ep->flows[i];
		struct nb_hdr h = {NB_MAGIC, f->row,     f->kind,       f->size,
				   f->idx,   ep->nflows, ep->win_start, ep->win_end};

		f->started = true;
		out_put(f, &h, sizeof(h));
		if (f->kind == NB_PINGPONG)
			pp_send(f);
		else if (f->kind == NB_STREAM)
			stream_push(f, false);
	}
	ep->phase = ep->cur < ep->nrows ? PH_RUN : PH_BYE_WAIT;
	ep->t_phase = now;
}

static void
client_snapshot(struct nb_endpoint *ep, uint64_t now, bool end)
{
	uint64_t acked = 0, msgs = 0;
	const struct nb_row *r = &ep->rows[ep->cur];
	struct nb_row_result *res = &ep->res[ep->cur];

	for (unsigned i = 0; i < ep->nflows; i++)
		acked += ep->flows[i].acked_msgs;
	msgs = r->kind == NB_STREAM ? acked : res->msgs;
	if (!end) {
		ep->t0 = now;
		ep->acked0 = acked;
		ep->cpu0 = nb_cpu_seconds();
		ep->snap0 = true;
		return;
	}
	ep->t1 = now;
	res->cpu_s = nb_cpu_seconds() - ep->cpu0;
	res->window_s = (double)(ep->t1 - ep->t0) / 1e9;
	if (r->kind == NB_STREAM) {
		res->msgs = msgs - ep->acked0;
		res->bytes = res->msgs * r->size;
	} else {
		res->bytes = res->msgs * r->size * 2;
		res->p50_ns = hist_pct(ep->hist, 0.50);
		res->p99_ns = hist_pct(ep->hist, 0.99);
	}
	ep->snap1 = true;
}

static bool
client_drained(struct nb_endpoint *ep)
{
	for (unsigned i = 0; i < ep->nflows; i++) {
		struct nb_flow *f = &ep->flows[i];

		if (f->kind == NB_STREAM &&
		    (f->tx % f->size != 0 || f->acked_msgs * f->size != f->tx || f->out_len > 0))
			return false;
		if (f->kind == NB_PINGPONG && f->pp_out)
			return false;
	}
	return true;
}

static void
client_finish_row(struct nb_endpoint *ep)
{
	struct nb_row_result *res = &ep->res[ep->cur];

	for (unsigned i = 0; i < ep->nflows; i++) {
		struct nb_flow *f = &ep->flows[i];

		if (f->kind == NB_STREAM) {
			res->verified += f->acked_msgs * f->size;
			if (f->peer_bad > res->bad)
				res->bad = f->peer_bad; /* the server reports the row's total */
		}
		flow_close(f);
	}
}

static int
client_tick(struct nb_endpoint *ep, uint64_t now)
{
	int work = 0;

	if (ep->error != 0 && ep->phase != PH_DONE) {
		for (unsigned i = 0; i < ep->nflows; i++)
			flow_close(&ep->flows[i]);
		ep->phase = PH_DONE;
		__atomic_store_n(&ep->finished, 1, __ATOMIC_RELEASE);
		return 0;
	}
	switch (ep->phase) {
	case PH_IDLE:
		client_start_row(ep, now);
		return 1;
	case PH_CONNECTING: {
		unsigned up = 0;

		for (unsigned i = 0; i < ep->nflows; i++)
			up += ep->flows[i].connected;
		if (up == ep->nflows) {
			client_begin_traffic(ep, now);
			return 1;
		}
		if (now - ep->t_phase > CONNECT_TIMEOUT_NS)
			fail(ep, -ETIMEDOUT);
		return 0;
	}
	case PH_RUN:
		if (!ep->snap0 && now >= ep->win_start)
			client_snapshot(ep, now, false);
		if (ep->snap0 && now >= ep->win_end) {
			client_snapshot(ep, now, true);
			ep->phase = PH_DRAIN;
			ep->t_phase = now;
		}
		for (unsigned i = 0; i < ep->nflows; i++)
			if (ep->flows[i].kind == NB_STREAM)
				work += stream_push(&ep->flows[i], ep->phase == PH_DRAIN);
		return work;
	case PH_DRAIN:
		for (unsigned i = 0; i < ep->nflows; i++)
			if (ep->flows[i].kind == NB_STREAM)
				work += stream_push(&ep->flows[i], true);
		if (client_drained(ep)) {
			client_finish_row(ep);
			ep->phase = PH_GAP;
			ep->t_phase = now;
		} else if (now - ep->t_phase > DRAIN_TIMEOUT_NS) {
			fail(ep, -ETIMEDOUT);
		}
		return work;
	case PH_GAP:
		if (now - ep->t_phase >= GAP_NS) {
			ep->cur++;
			ep->phase = PH_IDLE;
		}
		return 0;
	case PH_BYE_WAIT:
		if (ep->flows[0].bye_reply) {
			flow_close(&ep->flows[0]);
			ep->phase = PH_DONE;
			ep->t_phase = now;
			return 1;
		}
		if (now - ep->t_phase > CONNECT_TIMEOUT_NS)
			fail(ep, -ETIMEDOUT);
		return 0;
	case PH_DONE:
		/* Let the FIN exchange finish before the poller stops. */
		if (!ep->finished && now - ep->t_phase > GAP_NS)
			__atomic_store_n(&ep->finished, 1, __ATOMIC_RELEASE);
		return 0;
	}
	return 0;
}

static void
client_data(struct nb_flow *f, const uint8_t *p, size_t n)
{
	struct nb_endpoint *ep = f->ep;

	if (f->kind == NB_BYE) {
		f->bye_reply = n > 0;
		return;
	}
	if (f->kind == NB_STREAM) {
		while (n > 0) {
			size_t k = sizeof(f->ackbuf) - f->ackgot;

			if (k > n)
				k = n;
			memcpy(f->ackbuf + f->ackgot, p, k);
			f->ackgot += (unsigned)k;
			p += k;
			n -= k;
			if (f->ackgot == sizeof(f->ackbuf)) {
				uint32_t a[2];

				memcpy(a, f->ackbuf, sizeof(a));
				f->acked_msgs = a[0];
				f->peer_bad = a[1];
				f->ackgot = 0;
			}
		}
		return;
	}
	/* Ping-pong: the echo must be exactly what was sent. */
	if (!f->pp_out || f->pp_got + n > f->size) {
		fail(ep, -EPROTO);
		return;
	}
	memcpy(f->rxbuf + f->pp_got, p, n);
	f->pp_got += (uint32_t)n;
	if (f->pp_got < f->size)
		return;
	uint64_t now = nb_now_ns();
	struct nb_row_result *res = &ep->res[f->row];

	res->verified += f->size;
	if (memcmp(f->rxbuf, pat_at(f->pp_pat), f->size) != 0)
		res->bad += pat_check(f->rxbuf, f->size, f->pp_pat);
	f->pp_out = false;
	if (ep->snap0 && !ep->snap1 && f->t_sent >= ep->t0) {
		ep->hist[hist_idx(now - f->t_sent)]++;
		res->msgs++;
	}
	if (ep->phase == PH_RUN)
		pp_send(f);
}

/* ---- server ---- */

static void
server_header(struct nb_flow *f)
{
	struct nb_endpoint *ep = f->ep;
	struct nb_hdr h;

	memcpy(&h, f->hdr, sizeof(h));
	if (h.magic != NB_MAGIC || h.row >= NB_MAX_ROWS || h.size == 0 ||
	    (h.kind == NB_PINGPONG && h.size > NB_PP_MAX)) {
		ep->error = -EPROTO;
		flow_close(f);
		return;
	}
	f->row = h.row;
	f->kind = h.kind;
	f->size = h.size;
	f->idx = h.flow;
	f->pat0 = row_pat0(h.row, h.flow);
	if (h.kind == NB_BYE) {
		static const char reply[8] = "bye";

		ep->bye_seen = true;
		out_put(f, reply, sizeof(reply));
		return;
	}
	ep->res[h.row].ran = true;
	ep->srv_win[h.row][0] = h.win_start;
	ep->srv_win[h.row][1] = h.win_end;
}

static void
server_data(struct nb_flow *f, const uint8_t *p, size_t n)
{
	struct nb_endpoint *ep = f->ep;

	if (f->hdr_got < sizeof(f->hdr)) {
		size_t k = sizeof(f->hdr) - f->hdr_got;

		if (k > n)
			k = n;
		memcpy(f->hdr + f->hdr_got, p, k);
		f->hdr_got += (unsigned)k;
		p += k;
		n -= k;
		if (f->hdr_got < sizeof(f->hdr))
			return;
		server_header(f);
		if (f->closed)
			return;
	}
	if (n == 0 || f->kind == NB_BYE)
		return;
	struct nb_row_result *res = &ep->res[f->row];

	res->verified += n;
	res->bad += pat_check(p, n, f->pat0 + f->rx);
	f->rx += n;
	if (f->kind == NB_PINGPONG) {
		if (!out_put(f, p, n)) {
			ep->error = -ENOBUFS;
			flow_close(f);
		}
		return;
	}
	if (f->rx / f->size != f->msgs) {
		f->msgs = f->rx / f->size;
		f->ack_dirty = true;
	}
}

static void
server_ack(struct nb_flow *f)
{
	uint32_t a[2];

	/* Acks are cumulative: while an older one is still queued, wait and
	 * send the newest count once it has gone. */
	if (!f->ack_dirty || f->out_len > 0 || f->closed)
		return;
	a[0] = (uint32_t)f->msgs;
	a[1] = (uint32_t)f->ep->res[f->row].bad;
	f->ack_dirty = false;
	out_put(f, a, sizeof(a));
}

static int
server_tick(struct nb_endpoint *ep, uint64_t now)
{
	int work = 0;

	for (unsigned r = 0; r < NB_MAX_ROWS; r++) {
		if (!ep->res[r].ran || ep->srv_snapped[r] == 2)
			continue;
		if (ep->srv_snapped[r] == 0 && now >= ep->srv_win[r][0]) {
			ep->srv_cpu0[r] = nb_cpu_seconds();
			ep->srv_snapped[r] = 1;
		}
		if (ep->srv_snapped[r] == 1 && now >= ep->srv_win[r][1]) {
			ep->res[r].cpu_s = nb_cpu_seconds() - ep->srv_cpu0[r];
			ep->srv_snapped[r] = 2;
		}
	}
	for (unsigned i = 0; i < NB_MAX_FLOWS; i++) {
		struct nb_flow *f = &ep->flows[i];

		if (!f->in_use || f->closed)
			continue;
		if (f->out_len > 0 && !f->blocked)
			out_flush(f);
		if (f->ack_dirty) {
			server_ack(f);
			work++;
		}
	}
	return work;
}

/* ---- events ---- */

void
nb_on_connected(struct nb_flow *f)
{
	f->connected = true;
}

void
nb_on_data(struct nb_flow *f, const uint8_t *p, size_t n)
{
	if (!f->in_use || f->closed)
		return;
	if (f->ep->client)
		client_data(f, p, n);
	else
		server_data(f, p, n);
}

void
nb_on_writable(struct nb_flow *f)
{
	if (!f->in_use || f->closed || (f->ep->client && !f->started))
		return;
	f->blocked = false;
	out_flush(f);
	if (f->ep->client && f->kind == NB_STREAM && f->out_len == 0)
		stream_push(f, f->ep->phase == PH_DRAIN);
	else if (!f->ep->client)
		server_ack(f);
}

void
nb_on_peer_closed(struct nb_flow *f)
{
	struct nb_endpoint *ep = f->ep;

	if (!f->in_use || f->closed)
		return;
	if (ep->client) {
		/* The server only closes after us; earlier is a failure. */
		if (ep->phase != PH_DONE)
			fail(ep, -ECONNRESET);
		return;
	}
	if (f->kind == NB_STREAM && f->rx % f->size != 0)
		ep->res[f->row].bad += f->rx % f->size; /* a partial message was lost */
	bool bye = f->kind == NB_BYE;

	flow_close(f);
	if (bye)
		__atomic_store_n(&ep->finished, 1, __ATOMIC_RELEASE);
}

void
nb_on_error(struct nb_flow *f, int err)
{
	struct nb_endpoint *ep = f->ep;

	if (!f->in_use || f->closed)
		return;
	if (ep->client) {
		if (ep->phase != PH_DONE)
			fail(ep, err);
	} else if (!ep->bye_seen) {
		ep->error = ep->error != 0 ? ep->error : err;
	}
	flow_close(f);
}

int
nb_tick(struct nb_endpoint *ep, uint64_t now)
{
	return ep->client ? client_tick(ep, now) : server_tick(ep, now);
}

/* ---- coordinator channel ---- */

int
nb_ctl_send(int fd, const struct nb_ctl_msg *m)
{
	const uint8_t *p = (const uint8_t *)m;
	size_t left = sizeof(*m);

	while (left > 0) {
		ssize_t k = write(fd, p, left);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EPIPE;
		p += k;
		left -= (size_t)k;
	}
	return 0;
}

int
nb_ctl_recv(int fd, struct nb_ctl_msg *m, int timeout_ms)
{
	uint8_t *p = (uint8_t *)m;
	size_t got = 0;

	while (got < sizeof(*m)) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int rc = poll(&pfd, 1, timeout_ms);
		ssize_t k;

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc == 0)
			return -ETIMEDOUT;
		k = read(fd, p + got, sizeof(*m) - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EPIPE;
		got += (size_t)k;
	}
	return 0;
}
