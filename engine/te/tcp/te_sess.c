/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Push-driven TCP data sessions (contract in te_sess.h). Bounds: a session
 * holds at most one header, one status/reply header and, client side,
 * max_inflight records; nothing grows with peer input.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "te_sess.h"
#include "tide_log.h"

#define SRV_SCRATCH    4096             /* sink for the payload of a refused native WRITE */
#define SRV_OUTQ       TE_SRV_SESS_OUTQ /* replies kept before parsing stops (pipelined native) */
#define CLI_MAX_WINDOW 4096

/* ------------------------------------------------------------------------ */
/* Server                                                                   */

enum srv_state {
	SRV_HDR,     /* collecting a request header */
	SRV_WDATA,   /* WRITE payload into checked memory */
	SRV_DISCARD, /* skipping a refused native WRITE's payload */
	SRV_DEAD,    /* close now (err says why) */
};

/* One queued reply: a status word / reply header, then READ data. */
struct srv_out {
	uint8_t hdr[TE_FRAME_REPLY_LEN];
	uint32_t hlen;
	bool held; /* src is covered by a check() reference */
	const uint8_t *src;
	uint64_t src_len;
	uint64_t end; /* tx_pos after its last byte (set once handed to the transport) */
};

/*
 * Replies queue up (bounded by SRV_OUTQ) while later requests are parsed, so
 * one sendmsg carries many replies of a pipelined native stream. Input stops
 * when the queue is full or a reply that ends the connection is queued.
 */
struct te_srv_sess {
	struct te_srv_ctx ctx;
	enum srv_state st;
	int err;
	struct te_frame_hdr h;
	uint8_t hdr[TE_FRAME_HDR_LEN];
	uint32_t hlen;
	uint8_t *dst;     /* WRITE destination cursor */
	uint64_t rem;     /* WRITE / DISCARD bytes left */
	bool held_w;      /* a check() reference for the WRITE in progress */
	bool close_after; /* close once the queue drained */
	bool tx_hold;     /* te_srv_sess_tx_hold(): sent replies wait for tx_done() */
	/*
	 * Replies by counter: [od, oh) handed to the transport and still
	 * referenced by it (tx_hold only; od == oh otherwise), [oh, ot) to send.
	 */
	struct srv_out outq[SRV_OUTQ];
	uint32_t od, oh, ot;
	uint64_t o_off;  /* bytes of the head reply sent */
	uint64_t tx_pos; /* bytes accounted by tx_advance() since create */
	uint64_t nreq;   /* well-formed headers parsed */
	uint8_t proto;   /* framing of the latest of them, 0 before one */
	uint8_t scratch[SRV_SCRATCH];
};

int
te_srv_sess_create(const struct te_srv_ctx *ctx, struct te_srv_sess **out)
{
	struct te_srv_sess *s;

	if (ctx == NULL || ctx->check == NULL || ctx->release == NULL)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->ctx = *ctx;
	s->st = SRV_HDR;
	*out = s;
	return 0;
}

static void
srv_out_release(struct te_srv_sess *s, struct srv_out *o)
{
	if (o->held) {
		o->held = false;
		s->ctx.release(s->ctx.arg);
	}
}

/*
 * Drop the WRITE in progress and every reply not yet handed to the
 * transport. Replies it holds ([od, oh)) keep their references until
 * tx_done() or destroy: the transport may still be reading their memory.
 */
static void
srv_drop_queued(struct te_srv_sess *s)
{
	if (s->held_w) {
		s->held_w = false;
		s->ctx.release(s->ctx.arg);
	}
	for (uint32_t i = s->oh; i != s->ot; i++)
		srv_out_release(s, &s->outq[i % SRV_OUTQ]);
	s->ot = s->oh;
	s->o_off = 0;
}

void
te_srv_sess_destroy(struct te_srv_sess *s)
{
	if (s == NULL)
		return;
	srv_drop_queued(s);
	for (; s->od != s->oh; s->od++)
		srv_out_release(s, &s->outq[s->od % SRV_OUTQ]);
	free(s);
}

void
te_srv_sess_tx_hold(struct te_srv_sess *s, bool on)
{
	s->tx_hold = on;
}

uint64_t
te_srv_sess_tx_pos(const struct te_srv_sess *s)
{
	return s->tx_pos;
}

void
te_srv_sess_tx_done(struct te_srv_sess *s, uint64_t upto)
{
	while (s->od != s->oh && s->outq[s->od % SRV_OUTQ].end <= upto) {
		srv_out_release(s, &s->outq[s->od % SRV_OUTQ]);
		s->od++;
	}
}

/* Queue a reply for the current request: status word (v2) or reply header
 * (native), v1 none; then src_len bytes at src (READ). */
static void
srv_push(struct te_srv_sess *s, uint64_t status, const uint8_t *src, uint64_t src_len, bool held)
{
	struct srv_out *o = &s->outq[s->ot % SRV_OUTQ];

	o->hlen = 0;
	if (s->h.proto == TE_PROTO_V2) {
		te_frame_status_encode(status, o->hdr);
		o->hlen = TE_FRAME_STATUS_LEN;
	} else if (s->h.proto == TE_PROTO_NATIVE) {
		struct te_frame_reply r = {.status = status, .req_id = s->h.req_id};

		te_frame_reply_encode(&r, o->hdr);
		o->hlen = TE_FRAME_REPLY_LEN;
	}
	o->src = src;
	o->src_len = src_len;
	o->held = held;
	if (o->hlen == 0 && src_len == 0) {
		if (held)
			s->ctx.release(s->ctx.arg);
		return;
	}
	s->ot++;
}

static void
srv_next(struct te_srv_sess *s)
{
	s->hlen = 0;
	s->st = SRV_HDR;
}

static void
srv_die(struct te_srv_sess *s, int err)
{
	srv_drop_queued(s);
	s->err = err;
	s->st = SRV_DEAD;
}

static void
srv_write_done(struct te_srv_sess *s)
{
	if (s->held_w) {
		s->held_w = false;
		s->ctx.release(s->ctx.arg);
	}
	srv_push(s, TE_FRAME_ST_OK, NULL, 0, false); /* v1: nothing */
	srv_next(s);
}

/* Queue a reply that ends the connection once sent. */
static void
srv_push_final(struct te_srv_sess *s, uint64_t status, int err)
{
	s->err = err;
	s->close_after = true;
	srv_push(s, status, NULL, 0, false);
	srv_next(s);
}

static void
srv_on_header(struct te_srv_sess *s)
{
	struct te_frame_hdr *h = &s->h;
	bool ok;
	int rc;

	rc = te_frame_hdr_decode(s->hdr, TE_FRAME_HDR_LEN, h);
	if (rc < 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "malformed request header (opcode 0x%02x), closing",
				   s->hdr[16]);
		srv_die(s, -EPROTO);
		return;
	}
	s->proto = h->proto;
	s->nreq++;
	if (h->op == TE_FRAME_OP_HELLO) {
		if (h->addr == s->ctx.instance) {
			srv_push(s, TE_FRAME_ST_OK, NULL, 0, false);
			srv_next(s);
		} else {
			TIDE_LOG_RATELIMIT(
				NOTICE, 5, "hello for instance %016llx, we are %016llx: stale",
				(unsigned long long)h->addr, (unsigned long long)s->ctx.instance);
			srv_push_final(s, TE_FRAME_ST_STALE, -ESTALE);
		}
		return;
	}
	/* addr + size must not wrap even if check() forgets it. */
	ok = h->addr + h->size >= h->addr && s->ctx.check(s->ctx.arg, h->addr, h->size);
	if (s->ctx.count != NULL)
		s->ctx.count(s->ctx.arg, h->op, h->size, !ok);
	if (!ok) {
		TIDE_LOG_RATELIMIT(WARN, 5, "refused %s of %llu bytes at 0x%llx (v%u)",
				   h->op == TE_FRAME_OP_READ ? "READ" : "WRITE",
				   (unsigned long long)h->size, (unsigned long long)h->addr,
				   h->proto);
		switch (h->proto) {
		case TE_PROTO_V1:
			srv_die(s, -EFAULT);
			break;
		case TE_PROTO_V2:
			srv_push_final(s, TE_FRAME_ST_REJECTED, -EFAULT);
			break;
		default:
			/* Native keeps the connection: skip the payload, then say no. */
			if (h->op == TE_FRAME_OP_WRITE && h->size > 0) {
				s->rem = h->size;
				s->st = SRV_DISCARD;
			} else {
				srv_push(s, TE_FRAME_ST_REJECTED, NULL, 0, false);
				srv_next(s);
			}
			break;
		}
		return;
	}
	if (h->op == TE_FRAME_OP_WRITE) {
		s->held_w = true;
		s->dst = (uint8_t *)(uintptr_t)h->addr;
		s->rem = h->size;
		if (s->rem == 0)
			srv_write_done(s);
		else
			s->st = SRV_WDATA;
		return;
	}
	srv_push(s, TE_FRAME_ST_OK, (const uint8_t *)(uintptr_t)h->addr, h->size, true);
	srv_next(s);
}

size_t
te_srv_sess_rx_window(struct te_srv_sess *s, uint8_t **ptr)
{
	*ptr = NULL;
	switch (s->st) {
	case SRV_HDR:
		/* Stop parsing while the reply queue (held replies included) is full or
		 * the end is queued. */
		if (s->close_after || s->ot - s->od >= SRV_OUTQ)
			return 0;
		*ptr = s->hdr + s->hlen;
		return TE_FRAME_HDR_LEN - s->hlen;
	case SRV_WDATA:
		*ptr = s->dst;
		return s->rem > SIZE_MAX ? SIZE_MAX : (size_t)s->rem;
	case SRV_DISCARD:
		*ptr = s->scratch;
		return s->rem > SRV_SCRATCH ? SRV_SCRATCH : (size_t)s->rem;
	default:
		return 0;
	}
}

uint64_t
te_srv_sess_rx_payload(const struct te_srv_sess *s)
{
	return s->st == SRV_WDATA ? s->h.size : 0;
}

void
te_srv_sess_rx_advance(struct te_srv_sess *s, size_t n)
{
	if (n == 0)
		return;
	switch (s->st) {
	case SRV_HDR:
		s->hlen += (uint32_t)n;
		if (s->hlen == TE_FRAME_HDR_LEN)
			srv_on_header(s);
		break;
	case SRV_WDATA:
		s->dst += n;
		s->rem -= n;
		if (s->rem == 0)
			srv_write_done(s);
		break;
	case SRV_DISCARD:
		s->rem -= n;
		if (s->rem == 0) {
			srv_push(s, TE_FRAME_ST_REJECTED, NULL, 0, false);
			srv_next(s);
		}
		break;
	default:
		break;
	}
}

size_t
te_srv_sess_feed(struct te_srv_sess *s, const uint8_t *data, size_t len)
{
	size_t off = 0;

	while (off < len) {
		uint8_t *p;
		size_t w = te_srv_sess_rx_window(s, &p);

		if (w == 0)
			break;
		if (w > len - off)
			w = len - off;
		if (s->st != SRV_DISCARD)
			memcpy(p, data + off, w);
		te_srv_sess_rx_advance(s, w);
		off += w;
	}
	return off;
}

unsigned
te_srv_sess_tx_iov(struct te_srv_sess *s, struct iovec *iov, unsigned max)
{
	uint64_t skip = s->o_off;
	unsigned n = 0;

	if (s->st == SRV_DEAD)
		return 0;
	for (uint32_t i = s->oh; i != s->ot && n < max; i++, skip = 0) {
		const struct srv_out *o = &s->outq[i % SRV_OUTQ];

		if (skip < o->hlen) {
			iov[n].iov_base = (void *)(uintptr_t)(o->hdr + skip);
			iov[n].iov_len = o->hlen - skip;
			n++;
			skip = 0;
		} else {
			skip -= o->hlen;
		}
		if (n < max && skip < o->src_len) {
			uint64_t left = o->src_len - skip;

			iov[n].iov_base = (void *)(uintptr_t)(o->src + skip);
			iov[n].iov_len = left > SIZE_MAX ? SIZE_MAX : (size_t)left;
			n++;
		}
	}
	return n;
}

void
te_srv_sess_tx_advance(struct te_srv_sess *s, size_t n)
{
	while (n > 0 && s->oh != s->ot) {
		struct srv_out *o = &s->outq[s->oh % SRV_OUTQ];
		uint64_t left = o->hlen + o->src_len - s->o_off;

		if (n < left) {
			s->o_off += n;
			s->tx_pos += n;
			return;
		}
		n -= left;
		s->tx_pos += left;
		o->end = s->tx_pos;
		s->oh++;
		s->o_off = 0;
		if (!s->tx_hold) {
			srv_out_release(s, o);
			s->od = s->oh;
		}
	}
}

int
te_srv_sess_close_reason(const struct te_srv_sess *s)
{
	if (s->st == SRV_DEAD || (s->close_after && s->oh == s->ot))
		return s->err;
	return 0;
}

bool
te_srv_sess_idle(const struct te_srv_sess *s)
{
	return s->st == SRV_HDR && s->hlen == 0 && s->od == s->ot;
}

uint8_t
te_srv_sess_proto(const struct te_srv_sess *s, uint64_t *nreq)
{
	if (nreq != NULL)
		*nreq = s->nreq;
	return s->proto;
}

/* ------------------------------------------------------------------------ */
/* Client                                                                   */

struct cli_rec {
	struct te_slice *s;
	uint64_t tx_off; /* of header + payload */
	uint64_t tx_len;
	uint32_t id;
	uint8_t hdr[TE_FRAME_HDR_LEN];
};

enum cli_rx {
	RX_REPLY, /* expecting a status word / reply header (or nothing) */
	RX_DATA,  /* READ data for the head record */
};

struct te_cli_sess {
	struct te_cli_sess_cfg cfg;
	int err;
	/* records: [head, txi) sent, [txi, tail) waiting to be sent; counters mod 2^32 */
	struct cli_rec *ring;
	uint32_t cap;
	uint32_t head, txi, tail;
	uint64_t bytes;
	uint32_t next_id;
	/* HELLO (native): header out, then reply expected before any other */
	uint8_t hello[TE_FRAME_HDR_LEN];
	uint32_t hello_off; /* == TE_FRAME_HDR_LEN once sent */
	bool hello_wait;
	/* receive */
	enum cli_rx rx;
	uint8_t rbuf[TE_FRAME_REPLY_LEN];
	uint32_t rlen;
	uint64_t rx_off; /* READ data received into the head slice */
	uint8_t junk[1];
};

static struct cli_rec *
rec_at(const struct te_cli_sess *c, uint32_t i)
{
	return &c->ring[i % c->cap];
}

int
te_cli_sess_create(const struct te_cli_sess_cfg *cfg, struct te_cli_sess **out)
{
	struct te_cli_sess *c;
	uint32_t cap;

	if (cfg == NULL || cfg->done == NULL)
		return -EINVAL;
	switch (cfg->proto) {
	case TE_PROTO_V1:
	case TE_PROTO_V2:
		cap = 1; /* Mooncake servers answer one request at a time, in order */
		break;
	case TE_PROTO_NATIVE:
		if (cfg->max_inflight == 0 || cfg->max_inflight > CLI_MAX_WINDOW)
			return -EINVAL;
		cap = cfg->max_inflight;
		break;
	default:
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->ring = calloc(cap, sizeof(*c->ring));
	if (c->ring == NULL) {
		free(c);
		return -ENOMEM;
	}
	c->cfg = *cfg;
	c->cap = cap;
	c->next_id = 1; /* 0 is HELLO's */
	c->hello_off = TE_FRAME_HDR_LEN;
	if (cfg->proto == TE_PROTO_NATIVE && cfg->instance != 0) {
		struct te_frame_hdr h = {
			.op = TE_FRAME_OP_HELLO, .proto = TE_PROTO_NATIVE, .addr = cfg->instance};

		(void)te_frame_hdr_encode(&h, c->hello);
		c->hello_off = 0;
		c->hello_wait = true;
	}
	*out = c;
	return 0;
}

static uint32_t
cli_count(const struct te_cli_sess *c)
{
	return c->tail - c->head;
}

/* Pop the head record and report it. */
static void
cli_complete_head(struct te_cli_sess *c, int err)
{
	struct cli_rec *r = rec_at(c, c->head);
	struct te_slice *s = r->s;

	c->bytes -= s->len;
	if (c->txi == c->head)
		c->txi++;
	c->head++;
	r->s = NULL;
	c->rx = RX_REPLY;
	c->rlen = 0;
	c->rx_off = 0;
	c->cfg.done(c->cfg.arg, s, err);
}

void
te_cli_sess_fail(struct te_cli_sess *c, int err)
{
	if (c->err == 0)
		c->err = err;
	while (cli_count(c) > 0)
		cli_complete_head(c, err);
	c->hello_wait = false;
}

static void
cli_proto_error(struct te_cli_sess *c, const char *why)
{
	TIDE_LOG_RATELIMIT(WARN, 5, "malformed reply from peer (%s), failing %u slices", why,
			   cli_count(c));
	te_cli_sess_fail(c, -EPROTO);
}

void
te_cli_sess_destroy(struct te_cli_sess *c, int err)
{
	if (c == NULL)
		return;
	te_cli_sess_fail(c, err);
	free(c->ring);
	free(c);
}

bool
te_cli_sess_can_submit(const struct te_cli_sess *c, uint32_t len)
{
	if (c->err != 0 || cli_count(c) >= c->cap)
		return false;
	if (cli_count(c) == 0 || c->cfg.max_inflight_bytes == 0)
		return true;
	return c->bytes + len <= c->cfg.max_inflight_bytes;
}

int
te_cli_sess_submit(struct te_cli_sess *c, struct te_slice *s)
{
	struct te_frame_hdr h = {0};
	struct cli_rec *r;

	if (s->len == 0 || (s->op != TE_FRAME_OP_READ && s->op != TE_FRAME_OP_WRITE))
		return -EINVAL;
	if (c->err != 0)
		return -EPIPE;
	if (!te_cli_sess_can_submit(c, s->len))
		return -EBUSY;
	r = rec_at(c, c->tail);
	h.size = s->len;
	h.addr = s->remote;
	h.op = s->op;
	h.proto = (uint8_t)c->cfg.proto;
	if (c->cfg.proto == TE_PROTO_NATIVE) {
		h.req_id = c->next_id++;
		if (c->next_id == 0)
			c->next_id = 1;
	}
	(void)te_frame_hdr_encode(&h, r->hdr);
	r->s = s;
	r->id = h.req_id;
	r->tx_off = 0;
	r->tx_len = TE_FRAME_HDR_LEN + (s->op == TE_FRAME_OP_WRITE ? s->len : 0);
	c->tail++;
	c->bytes += s->len;
	return 0;
}

unsigned
te_cli_sess_tx_iov(struct te_cli_sess *c, struct iovec *iov, unsigned max)
{
	unsigned n = 0;

	if (c->err != 0)
		return 0;
	if (c->hello_off < TE_FRAME_HDR_LEN && n < max) {
		iov[n].iov_base = c->hello + c->hello_off;
		iov[n].iov_len = TE_FRAME_HDR_LEN - c->hello_off;
		n++;
	}
	for (uint32_t i = c->txi; i != c->tail && n < max; i++) {
		struct cli_rec *r = rec_at(c, i);

		if (r->tx_off < TE_FRAME_HDR_LEN) {
			iov[n].iov_base = r->hdr + r->tx_off;
			iov[n].iov_len = TE_FRAME_HDR_LEN - r->tx_off;
			n++;
		}
		if (r->s->op == TE_FRAME_OP_WRITE && n < max) {
			uint64_t done =
				r->tx_off > TE_FRAME_HDR_LEN ? r->tx_off - TE_FRAME_HDR_LEN : 0;

			iov[n].iov_base = r->s->local + done;
			iov[n].iov_len = r->s->len - done;
			n++;
		}
	}
	return n;
}

void
te_cli_sess_tx_advance(struct te_cli_sess *c, size_t n)
{
	if (c->err != 0)
		return;
	if (c->hello_off < TE_FRAME_HDR_LEN) {
		size_t k = TE_FRAME_HDR_LEN - c->hello_off;

		if (k > n)
			k = n;
		c->hello_off += (uint32_t)k;
		n -= k;
	}
	while (n > 0 && c->txi != c->tail) {
		struct cli_rec *r = rec_at(c, c->txi);
		uint64_t k = r->tx_len - r->tx_off;

		if (k > n)
			k = n;
		r->tx_off += k;
		n -= k;
		if (r->tx_off < r->tx_len)
			break;
		c->txi++;
		/* v1 WRITE: no reply exists, sent is all we will ever know. */
		if (c->cfg.proto == TE_PROTO_V1 && r->s->op == TE_FRAME_OP_WRITE &&
		    c->txi - 1 == c->head)
			cli_complete_head(c, 0);
	}
}

/* Does the head record expect a reply header / status word now? */
static uint32_t
cli_reply_len(const struct te_cli_sess *c)
{
	if (c->hello_wait)
		return TE_FRAME_REPLY_LEN;
	if (cli_count(c) == 0)
		return 0;
	switch (c->cfg.proto) {
	case TE_PROTO_V1:
		return 0;
	case TE_PROTO_V2:
		return TE_FRAME_STATUS_LEN;
	default:
		return TE_FRAME_REPLY_LEN;
	}
}

static bool
head_sent(const struct te_cli_sess *c)
{
	return c->txi != c->head;
}

/* A complete status word / reply header sits in rbuf. */
static void
cli_on_reply(struct te_cli_sess *c)
{
	struct cli_rec *r;
	uint64_t status;
	int err;

	c->rlen = 0;
	if (c->cfg.proto == TE_PROTO_V2) {
		status = te_frame_status_decode(c->rbuf);
		err = te_frame_status_err(status);
		if (err == -EFAULT) {
			/* The server closes after this; nothing else is in flight (window 1). */
			cli_complete_head(c, -EFAULT);
			te_cli_sess_fail(c, -EFAULT);
			return;
		}
		if (err != 0 || !head_sent(c)) {
			cli_proto_error(c,
					err != 0 ? "unknown v2 status" : "status before request");
			return;
		}
	} else {
		struct te_frame_reply rep;

		if (te_frame_reply_decode(c->rbuf, TE_FRAME_REPLY_LEN, &rep) < 0) {
			cli_proto_error(c, "bad reply header");
			return;
		}
		err = te_frame_status_err(rep.status);
		if (c->hello_wait) {
			if (rep.req_id != 0) {
				cli_proto_error(c, "reply before hello");
				return;
			}
			c->hello_wait = false;
			if (err != 0) {
				TIDE_LOG(NOTICE, "peer instance changed (hello: %s)",
					 err == -ESTALE ? "stale" : "refused");
				te_cli_sess_fail(c, err == -ESTALE ? -ESTALE : -EPROTO);
			}
			return;
		}
		r = rec_at(c, c->head);
		if (rep.req_id != r->id || !head_sent(c) || err == -ESTALE) {
			cli_proto_error(c, rep.req_id != r->id ? "request id out of order"
							       : "unexpected reply");
			return;
		}
		if (err != 0) {
			cli_complete_head(c, err); /* native: the connection survives */
			return;
		}
	}
	r = rec_at(c, c->head);
	if (r->s->op == TE_FRAME_OP_READ) {
		c->rx = RX_DATA;
		c->rx_off = 0;
	} else {
		cli_complete_head(c, 0);
	}
}

size_t
te_cli_sess_rx_window(struct te_cli_sess *c, uint8_t **ptr)
{
	uint32_t want;

	*ptr = NULL;
	if (c->err != 0)
		return 0;
	if (c->rx == RX_DATA) {
		struct cli_rec *r = rec_at(c, c->head);

		*ptr = r->s->local + c->rx_off;
		return r->s->len - c->rx_off;
	}
	want = cli_reply_len(c);
	if (want > 0) {
		*ptr = c->rbuf + c->rlen;
		return want - c->rlen;
	}
	/* v1 READ: the data is the whole reply, once the request is out. */
	if (c->cfg.proto == TE_PROTO_V1 && cli_count(c) > 0 && head_sent(c) &&
	    rec_at(c, c->head)->s->op == TE_FRAME_OP_READ) {
		c->rx = RX_DATA;
		c->rx_off = 0;
		return te_cli_sess_rx_window(c, ptr);
	}
	return 0;
}

uint64_t
te_cli_sess_rx_payload(const struct te_cli_sess *c)
{
	return c->err == 0 && c->rx == RX_DATA ? rec_at(c, c->head)->s->len : 0;
}

void
te_cli_sess_rx_advance(struct te_cli_sess *c, size_t n)
{
	if (n == 0 || c->err != 0)
		return;
	if (c->rx == RX_DATA) {
		struct cli_rec *r = rec_at(c, c->head);

		c->rx_off += n;
		if (c->rx_off == r->s->len)
			cli_complete_head(c, 0);
		return;
	}
	c->rlen += (uint32_t)n;
	if (c->rlen == cli_reply_len(c))
		cli_on_reply(c);
}

size_t
te_cli_sess_feed(struct te_cli_sess *c, const uint8_t *data, size_t len)
{
	size_t off = 0;

	while (off < len && c->err == 0) {
		uint8_t *p;
		size_t w = te_cli_sess_rx_window(c, &p);

		if (w == 0) {
			cli_proto_error(c, "bytes when no reply is due");
			break;
		}
		if (w > len - off)
			w = len - off;
		memcpy(p, data + off, w);
		te_cli_sess_rx_advance(c, w);
		off += w;
	}
	return off;
}

int
te_cli_sess_error(const struct te_cli_sess *c)
{
	return c->err;
}

uint32_t
te_cli_sess_inflight(const struct te_cli_sess *c)
{
	return cli_count(c);
}

uint64_t
te_cli_sess_inflight_bytes(const struct te_cli_sess *c)
{
	return c->bytes;
}
