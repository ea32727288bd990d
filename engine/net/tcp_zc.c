/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The send queue with zero-copy sends (tide_net_send_zc).
 *
 * Copied bytes live in the connection's sbuf ring as before; a zero-copy
 * send is a reference to the caller's memory. While any zero-copy bytes are
 * queued, the queue is described by an array of chunks in sequence order
 * (copied runs and zero-copy pieces); when none are, the array is empty and
 * sbuf alone is the queue, so connections that never use zero-copy pay
 * nothing.
 *
 * A zero-copy send completes when the protocol is done with it (every byte
 * acknowledged, or the connection gone) and the device released every frame
 * segment referencing it. Device releases may happen on any thread (a peer
 * stack on another lcore frees the mbufs it received), so the reference
 * count is atomic and the owner polls it: completions are made from
 * net_leave() and tide_net_timers_run(), in call order per connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"

/*
 * Pieces shorter than this are copied into the frame: a device reference
 * (an mbuf and an atomic) costs more than copying a few hundred bytes, and
 * a frame carrying an attached piece is then always longer than ETH_ZLEN,
 * so padding never has to go behind an attached segment.
 */
#define ZC_ATTACH_MIN 256

/* Completions that wait behind an earlier one of the same connection are skipped; the
 * walk remembers this many blocked connections, then stops (the rest waits a call). */
#define ZC_BLOCKED_MAX 8

static struct tcp_chunk *
ch_at(const struct tide_net_conn *c, uint32_t i)
{
	return &c->chunks[(c->ch_head + i) % c->ch_cap];
}

static int
ch_reserve(struct tide_net_conn *c, uint32_t want)
{
	struct tcp_chunk *n;
	uint32_t cap = c->ch_cap ? c->ch_cap : 8;

	if (want <= c->ch_cap) {
		return 0;
	}
	while (cap < want) {
		cap *= 2;
	}
	n = malloc(cap * sizeof(*n));
	if (n == NULL) {
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->ch_n; i++) {
		n[i] = *ch_at(c, i);
	}
	free(c->chunks);
	c->chunks = n;
	c->ch_cap = cap;
	c->ch_head = 0;
	return 0;
}

static void
ch_push(struct tide_net_conn *c, uint32_t seq, uint32_t len, uint32_t pos, struct net_zc *zc)
{
	assert(c->ch_n < c->ch_cap);
	*ch_at(c, c->ch_n) = (struct tcp_chunk){.seq = seq, .len = len, .pos = pos, .zc = zc};
	c->ch_n++;
}

void
tcp_snd_append(struct tide_net_conn *c, const uint8_t *data, uint32_t n)
{
	uint32_t pos = c->sbuf_ctr + c->sbuf.len;

	tcp_ring_write(&c->sbuf, data, n);
	if (c->ch_n > 0) {
		struct tcp_chunk *last = ch_at(c, c->ch_n - 1);

		if (last->zc == NULL) {
			last->len += n;
		} else {
			/* tide_net_send_zc reserved this slot behind its chunk. */
			ch_push(c, tcp_snd_end(c), n, pos, NULL);
		}
	}
	c->snd_len += n;
}

static void
zc_finish(struct tide_net_stack *s, struct net_zc *z, int status)
{
	z->status = status;
	TAILQ_INSERT_TAIL(&s->zc_wait, z, link);
}

void
tcp_snd_drop(struct tide_net_conn *c, uint32_t n)
{
	assert(n <= c->snd_len);
	c->sbuf_seq += n;
	c->snd_len -= n;
	if (c->ch_n == 0) {
		tcp_ring_drop(&c->sbuf, n);
		c->sbuf_ctr += n;
		return;
	}
	while (n > 0) {
		struct tcp_chunk *ch = ch_at(c, 0);
		uint32_t k = n < ch->len ? n : ch->len;

		if (ch->zc == NULL) {
			tcp_ring_drop(&c->sbuf, k);
			c->sbuf_ctr += k;
		} else {
			c->zc_queued -= k;
		}
		n -= k;
		if (k < ch->len) {
			ch->seq += k;
			ch->len -= k;
			ch->pos += k;
			break;
		}
		if (ch->zc != NULL) {
			zc_finish(c->stack, ch->zc, 0);
		}
		c->ch_head = (c->ch_head + 1) % c->ch_cap;
		c->ch_n--;
	}
	if (c->zc_queued == 0) {
		/* Only copied runs are left: they are sbuf, in order, from its head. */
		c->ch_n = 0;
		c->ch_head = 0;
	}
}

void
tcp_snd_purge(struct tide_net_conn *c, int reason)
{
	int status = reason < 0 ? reason : -ECONNABORTED;

	for (uint32_t i = 0; i < c->ch_n; i++) {
		struct tcp_chunk *ch = ch_at(c, i);

		if (ch->zc != NULL) {
			zc_finish(c->stack, ch->zc, status);
		}
	}
	c->ch_n = 0;
	c->ch_head = 0;
	c->zc_queued = 0;
	c->snd_len = c->sbuf.len;
}

/* The device dropped one reference (any thread). */
static void
zc_release(void *arg)
{
	struct net_zc *z = arg;

	if (atomic_fetch_sub_explicit(&z->refs, 1, memory_order_acq_rel) == 1) {
		free(z); /* orphaned by tide_net_stack_destroy */
	}
}

struct piece {
	uint32_t seq, n;
	const struct tcp_chunk *ch;
};

/* The piece of chunk i that starts at seq and ends by end. */
static struct piece
piece_of(const struct tide_net_conn *c, uint32_t i, uint32_t seq, uint32_t end)
{
	const struct tcp_chunk *ch = ch_at(c, i);
	uint32_t ch_end = ch->seq + ch->len;

	return (struct piece){
		.seq = seq, .n = (before(end, ch_end) ? end : ch_end) - seq, .ch = ch};
}

static void
piece_copy(const struct tide_net_conn *c, const struct piece *p, uint8_t *dst)
{
	uint32_t rel = p->seq - p->ch->seq;

	if (p->ch->zc != NULL) {
		memcpy(dst, p->ch->zc->data + p->ch->pos + rel, p->n);
	} else {
		tcp_ring_read(&c->sbuf, p->ch->pos + rel - c->sbuf_ctr, dst, p->n);
	}
}

int
tcp_snd_fill(struct tide_net_conn *c, struct tide_net_buf *b, uint8_t *dst, uint32_t seq,
	     uint32_t len, bool attach, bool sum, uint32_t *csum, uint32_t *copied)
{
	struct tide_net_stack *s = c->stack;
	uint32_t end = seq + len, first, att_seq = end, run = 0, i, pseq;
	bool attached = false;

	if (c->ch_n == 0) {
		tcp_ring_read(&c->sbuf, seq - c->sbuf_seq, dst, len);
		if (sum) {
			*csum = net_cksum_add(*csum, dst, len);
		}
		*copied = len;
		return 0;
	}
	assert(!before(seq, c->sbuf_seq) && !after(end, tcp_snd_end(c)));
	/* Bounded by the chunks queued; a frame spans few, and the first is near the head
	 * unless a deep queue of small sends is in flight. */
	for (first = 0;
	     first + 1 < c->ch_n && !before(seq, ch_at(c, first)->seq + ch_at(c, first)->len);
	     first++) {
	}
	/* The trailing run of attachable zero-copy pieces goes by reference; everything
	 * before it is copied, since nothing can follow an attached segment in the buffer. */
	if (attach && s->ops->tx_attach != NULL) {
		for (i = first, pseq = seq; before(pseq, end); i++) {
			struct piece p = piece_of(c, i, pseq, end);

			if (p.ch->zc != NULL && p.n >= ZC_ATTACH_MIN) {
				if (run++ == 0) {
					att_seq = pseq;
				}
			} else {
				run = 0;
				att_seq = end;
			}
			pseq += p.n;
		}
		if (run > TIDE_NET_TX_EXT_MAX) {
			att_seq = end;
		}
	}
	*copied = 0;
	for (i = first, pseq = seq; before(pseq, end); i++) {
		struct piece p = piece_of(c, i, pseq, end);
		uint32_t off = pseq - seq;

		if (before(pseq, att_seq)) {
			piece_copy(c, &p, dst + *copied);
			if (sum) {
				*csum = net_cksum_add_at(*csum, dst + *copied, p.n, off);
			}
			*copied += p.n;
		} else {
			struct net_zc *z = p.ch->zc;
			const uint8_t *src = z->data + p.ch->pos + (pseq - p.ch->seq);

			atomic_fetch_add_explicit(&z->refs, 1, memory_order_relaxed);
			if (s->ops->tx_attach(s->dev, b, src, (uint16_t)p.n, zc_release, z) != 0) {
				atomic_fetch_sub_explicit(&z->refs, 1, memory_order_relaxed);
				if (attached) {
					return -EAGAIN;
				}
				/* Nothing attached yet: copy this piece and the rest. */
				att_seq = end;
				piece_copy(c, &p, dst + *copied);
				if (sum) {
					*csum = net_cksum_add_at(*csum, dst + *copied, p.n, off);
				}
				*copied += p.n;
			} else {
				attached = true;
				b->ext_len = (uint16_t)(b->ext_len + p.n);
				if (sum) {
					*csum = net_cksum_add_at(*csum, src, p.n, off);
				}
			}
		}
		pseq += p.n;
	}
	return 0;
}

void
net_zc_reap(struct tide_net_stack *s)
{
	uint64_t blocked[ZC_BLOCKED_MAX];
	unsigned nb = 0;
	struct net_zc *z, *next;

	if (s->zc_reaping) {
		return; /* a completion called back into the stack */
	}
	s->zc_reaping = true;
	for (z = TAILQ_FIRST(&s->zc_wait); z != NULL; z = next) {
		bool blk = false;

		for (unsigned i = 0; i < nb && !blk; i++) {
			blk = blocked[i] == z->conn_id;
		}
		if (!blk && atomic_load_explicit(&z->refs, memory_order_acquire) == 1) {
			/* Only the stack's reference is left, and no frame can take a new one:
			 * the record left its connection's queue. */
			struct net_zc *prev = TAILQ_PREV(z, net_zc_list, link);

			TAILQ_REMOVE(&s->zc_wait, z, link);
			s->zc_pending--;
			z->done(z->cookie, z->status);
			/* The callback may have appended to zc_wait (nothing is removed meanwhile:
			 * reaping does not nest), also after a z that was the tail: go on from
			 * what now follows z's predecessor. */
			next = prev != NULL ? TAILQ_NEXT(prev, link) : TAILQ_FIRST(&s->zc_wait);
			free(z);
			continue;
		}
		next = TAILQ_NEXT(z, link);
		if (!blk) {
			if (nb == ZC_BLOCKED_MAX) {
				break;
			}
			blocked[nb++] = z->conn_id;
		}
	}
	s->zc_reaping = false;
}

void
net_zc_destroy(struct tide_net_stack *s)
{
	struct net_zc *z;

	while ((z = TAILQ_FIRST(&s->zc_wait)) != NULL) {
		TAILQ_REMOVE(&s->zc_wait, z, link);
		s->zc_pending--;
		if (atomic_fetch_sub_explicit(&z->refs, 1, memory_order_acq_rel) == 1) {
			z->done(z->cookie, z->status);
			free(z);
		}
		/* Otherwise the device's last release frees it, with no completion. */
	}
}

ssize_t
tide_net_send_zc(struct tide_net_conn *c, const void *data, size_t len, tide_net_zc_done_fn done,
		 void *cookie, uint64_t now)
{
	struct tide_net_stack *s = c->stack;
	struct net_zc *z;

	if (len == 0 || len > TIDE_NET_ZC_MAX_QUEUED || data == NULL || done == NULL) {
		return -EINVAL;
	}
	if (!c->app_owned || c->fin_queued ||
	    !((1u << c->state) &
	      (TCPF_SYN_SENT | TCPF_SYN_RECV | TCPF_ESTABLISHED | TCPF_CLOSE_WAIT))) {
		return -EPIPE;
	}
	if (c->zc_queued + len > TIDE_NET_ZC_MAX_QUEUED) {
		c->want_write = true;
		return -EAGAIN;
	}
	/* Room for an opening copied run, this send, and a copied run behind it, so
	 * tcp_snd_append never allocates. */
	if (ch_reserve(c, c->ch_n + 3) != 0) {
		return -ENOMEM;
	}
	z = calloc(1, sizeof(*z));
	if (z == NULL) {
		return -ENOMEM;
	}
	z->data = data;
	z->len = (uint32_t)len;
	z->conn_id = c->id;
	z->done = done;
	z->cookie = cookie;
	atomic_init(&z->refs, 1);
	net_enter(s);
	if (c->ch_n == 0 && c->snd_len > 0) {
		ch_push(c, c->sbuf_seq, c->snd_len, c->sbuf_ctr, NULL);
	}
	ch_push(c, tcp_snd_end(c), (uint32_t)len, 0, z);
	c->snd_len += (uint32_t)len;
	c->zc_queued += (uint32_t)len;
	s->zc_pending++;
	tcp_write_xmit(c, now);
	net_leave(s);
	return (ssize_t)len;
}

size_t
tide_net_zc_pending(const struct tide_net_stack *s)
{
	return s->zc_pending;
}
