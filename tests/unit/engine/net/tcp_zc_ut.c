/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Zero-copy sends (tcp_zc.c): completion timing (acknowledged AND released
 * by the device), order (also when the device releases later sends first),
 * retransmitted references, a peer dying with frames in flight (timeout,
 * buffers freed inside their completions), mixing with copied
 * sends, abort/reset, devices with and without tx_attach, a device refusing
 * a second attach, stack destroy with sends outstanding, two stacks over a
 * lossy wire; TX checksum offload marking (copied and zero-copy frames).
 *
 * The fake device below wraps net_ut_common's: tx_attach records each piece,
 * tx_burst copies the pieces behind the frame's bytes (so the common parser
 * verifies checksums over the whole segment) and holds the references until
 * the test "completes" them, as a NIC's TX completion would.
 */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_ut_common.h"
#include "tide_ut.h"

enum { P_ATTACHED = 0, P_HELD, P_RELEASED };

struct zpiece {
	void *buf;
	const uint8_t *data;
	uint16_t len;
	uint8_t state;
	tide_net_ext_release_fn rel;
	void *arg;
};

struct zdev {
	struct ut_dev *base;
	struct zpiece *p;
	size_t np, pcap;
	unsigned attach_calls;
	int attach_ok_left;   /* -1: unlimited; else attaches allowed before refusing */
	bool offload_emulate; /* complete TX checksums as a NIC would */
	unsigned frames_ip_flag, frames_tcp_flag, frames;
	bool bad_offload_field;
};

static struct zdev zd;

static int
z_attach(void *dev, struct tide_net_buf *buf, const void *data, uint16_t len,
	 tide_net_ext_release_fn rel, void *arg)
{
	struct zdev *d = dev;

	d->attach_calls++;
	CU_ASSERT(len >= 1);
	if (d->attach_ok_left == 0) {
		return -ENOBUFS;
	}
	if (d->attach_ok_left > 0) {
		d->attach_ok_left--;
	}
	if (d->np == d->pcap) {
		d->pcap = d->pcap ? d->pcap * 2 : 64;
		d->p = realloc(d->p, d->pcap * sizeof(*d->p));
		CU_ASSERT_FATAL(d->p != NULL);
	}
	d->p[d->np++] = (struct zpiece){.buf = buf->handle,
					.data = data,
					.len = len,
					.state = P_ATTACHED,
					.rel = rel,
					.arg = arg};
	return 0;
}

static uint16_t
z_alloc(void *dev, struct tide_net_buf *bufs, uint16_t n, uint16_t size)
{
	struct zdev *d = dev;

	return ut_dev_ops.tx_alloc(d->base, bufs, n, size);
}

/* A NIC's checksum offload: the TCP field holds the pseudo-header sum. */
static void
z_offload(struct zdev *d, struct tide_net_buf *b, uint16_t flen)
{
	struct net_ipv4_hdr *ip = (struct net_ipv4_hdr *)(b->data + ETH_HLEN);
	struct net_tcp_hdr *th = (struct net_tcp_hdr *)(b->data + NET_HDRS_LEN);
	uint16_t tl = (uint16_t)(ntohs(ip->tot_len) - IP_HLEN);

	CU_ASSERT(flen >= NET_HDRS_LEN + TCP_HLEN);
	if (b->flags & TIDE_NET_TX_F_IP_CKSUM) {
		d->frames_ip_flag++;
		if (ip->csum != 0) {
			d->bad_offload_field = true;
		}
		ip->csum = net_cksum(ip, IP_HLEN);
	}
	if (b->flags & TIDE_NET_TX_F_TCP_CKSUM) {
		uint16_t want = (uint16_t)~net_cksum_fold(
			net_cksum_pseudo(ip->saddr, ip->daddr, IPPROTO_TCP_, tl));

		d->frames_tcp_flag++;
		if (th->csum != want) {
			d->bad_offload_field = true;
		}
		th->csum = net_cksum(th, tl); /* the field already holds the pseudo sum */
	}
}

static uint16_t
z_burst(void *dev, struct tide_net_buf *bufs, uint16_t n)
{
	struct zdev *d = dev;
	struct tide_net_buf copy[64];

	CU_ASSERT_FATAL(n <= 64);
	for (uint16_t i = 0; i < n; i++) {
		uint16_t off = bufs[i].len, ext = 0;

		copy[i] = bufs[i];
		for (size_t k = 0; k < d->np; k++) {
			struct zpiece *p = &d->p[k];

			if (p->state == P_ATTACHED && p->buf == bufs[i].handle) {
				CU_ASSERT_FATAL(off + p->len <= UT_FRAME_MAX);
				memcpy(bufs[i].data + off, p->data, p->len);
				off = (uint16_t)(off + p->len);
				ext = (uint16_t)(ext + p->len);
				p->state = P_HELD;
			}
		}
		CU_ASSERT_EQUAL(ext, bufs[i].ext_len);
		copy[i].len = off;
		copy[i].ext_len = 0;
		d->frames++;
		if (d->offload_emulate) {
			z_offload(d, &copy[i], off);
		} else {
			CU_ASSERT_EQUAL(bufs[i].flags, 0);
		}
	}
	return ut_dev_ops.tx_burst(d->base, copy, n);
}

static void
z_free(void *dev, void *const *handles, uint16_t n)
{
	struct zdev *d = dev;

	for (uint16_t i = 0; i < n; i++) {
		for (size_t k = 0; k < d->np; k++) {
			struct zpiece *p = &d->p[k];

			if (p->state == P_ATTACHED && p->buf == handles[i]) {
				p->state = P_RELEASED;
				p->rel(p->arg);
			}
		}
	}
	ut_dev_ops.free_bufs(d->base, handles, n);
}

static const struct tide_net_dev_ops z_ops_attach = {
	.tx_alloc = z_alloc, .tx_burst = z_burst, .free_bufs = z_free, .tx_attach = z_attach};
static const struct tide_net_dev_ops z_ops_copy = {
	.tx_alloc = z_alloc, .tx_burst = z_burst, .free_bufs = z_free};

/* The device finished with every frame it holds. */
static unsigned
zdev_complete(struct zdev *d)
{
	unsigned k = 0;

	for (size_t i = 0; i < d->np; i++) {
		if (d->p[i].state == P_HELD) {
			d->p[i].state = P_RELEASED;
			d->p[i].rel(d->p[i].arg);
			k++;
		}
	}
	return k;
}

static unsigned
z_complete(void)
{
	return zdev_complete(&zd);
}

static unsigned
z_held(void)
{
	unsigned k = 0;

	for (size_t i = 0; i < zd.np; i++) {
		k += zd.p[i].state != P_RELEASED;
	}
	return k;
}

static bool use_attach, use_offload;

static void
tweak(struct tide_net_opts *o)
{
	o->dev_ops = use_attach ? &z_ops_attach : &z_ops_copy;
	o->dev = &zd;
	if (use_offload) {
		o->tx_offloads = TIDE_NET_OFFLOAD_IPV4_CKSUM | TIDE_NET_OFFLOAD_TCP_CKSUM;
	}
}

struct fx {
	struct ut_env e;
	struct ut_app a;
	struct tide_net_conn *c;
	uint32_t iss, peer;
	uint16_t lport;
	uint8_t rx[1 << 20]; /* what the peer received, by offset from iss + 1 */
	uint32_t rx_hi;
};

static struct fx *
fx_new(bool attach, bool offload)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct tide_net_conn_info ci;

	CU_ASSERT_FATAL(f != NULL);
	memset(&zd, 0, sizeof(zd));
	zd.base = &f->e.dev;
	zd.attach_ok_left = -1;
	zd.offload_emulate = offload;
	use_attach = attach;
	use_offload = offload;
	ut_env_init(&f->e, tweak);
	ut_app_init(&f->a);
	f->peer = 7000;
	f->c = ut_active_open(&f->e, &f->a, f->peer, &f->iss);
	tide_net_conn_info(f->c, &ci);
	f->lport = ci.lport;
	return f;
}

static void
fx_free(struct fx *f)
{
	z_complete();
	ut_env_fini(&f->e);
	ut_app_fini(&f->a);
	free(zd.p);
	memset(&zd, 0, sizeof(zd));
	free(f);
}

/* Pop every transmitted frame into f->rx; returns data segments seen. */
static unsigned
fx_collect(struct fx *f)
{
	struct ut_tcp_out o;
	unsigned n = 0;

	while (ut_dev_pending(&f->e.dev) > 0) {
		if (ut_pop_tcp(&f->e, &o) != 0 || o.len == 0) {
			continue;
		}
		uint32_t off = o.seq - (f->iss + 1);

		CU_ASSERT_FATAL(off + o.len <= sizeof(f->rx));
		memcpy(f->rx + off, o.payload, o.len);
		if (off + o.len > f->rx_hi) {
			f->rx_hi = off + o.len;
		}
		n++;
	}
	return n;
}

static void
fx_ack(struct fx *f, uint32_t upto)
{
	ut_tcp_in(&f->e, &(struct ut_seg){.seq = f->peer + 1,
					  .ack = f->iss + 1 + upto,
					  .flags = TCPHDR_ACK,
					  .sport = 5000,
					  .dport = f->lport});
}

/* Completion recorder. */
struct done_log {
	int cookie[64], status[64];
	unsigned n;
};
static struct done_log dl;

static void
on_done(void *cookie, int status)
{
	if (dl.n < 64) {
		dl.cookie[dl.n] = (int)(intptr_t)cookie;
		dl.status[dl.n] = status;
		dl.n++;
	}
}

static uint8_t *
pattern(size_t n, unsigned seed)
{
	uint8_t *p = malloc(n);

	CU_ASSERT_FATAL(p != NULL);
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
	}
	return p;
}

/* ---- completion timing ---- */

static void
check_basic(bool attach)
{
	struct fx *f = fx_new(attach, false);
	uint8_t *d = pattern(10000, 1);
	unsigned segs;

	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 10000, on_done, (void *)1, f->e.now), 10000);
	CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 1);
	segs = fx_collect(f);
	CU_ASSERT(segs >= 7); /* 10000 / 1460, within the initial window */
	CU_ASSERT_EQUAL(f->rx_hi, 10000);
	CU_ASSERT_EQUAL(memcmp(f->rx, d, 10000), 0);
	if (attach) {
		CU_ASSERT_EQUAL(zd.np, segs); /* every full segment went by reference */
		CU_ASSERT_EQUAL(z_held(), segs);
	} else {
		CU_ASSERT_EQUAL(zd.np, 0);
	}
	/* Half acknowledged: no completion. */
	fx_ack(f, 5000);
	ut_advance(&f->e, 1000);
	CU_ASSERT_EQUAL(dl.n, 0);
	fx_ack(f, 10000);
	if (attach) {
		/* Acknowledged, but the device still holds the frames. */
		CU_ASSERT_EQUAL(dl.n, 0);
		ut_advance(&f->e, 1000);
		CU_ASSERT_EQUAL(dl.n, 0);
		CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 1);
		CU_ASSERT_EQUAL(z_complete(), segs);
		CU_ASSERT_EQUAL(dl.n, 0); /* made on the owner's next call */
		ut_advance(&f->e, 1);
	}
	CU_ASSERT_EQUAL(dl.n, 1);
	CU_ASSERT_EQUAL(dl.cookie[0], 1);
	CU_ASSERT_EQUAL(dl.status[0], 0);
	CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 0);
	tide_net_abort(f->c, f->e.now);
	fx_free(f);
	free(d);
}

static void
test_basic_with_attach(void)
{
	check_basic(true);
}

static void
test_basic_without_attach(void)
{
	check_basic(false);
}

/* Copied and zero-copy sends interleave in order; completions keep call order. */
static void
test_mixed_with_copy_sends(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t *a = pattern(100, 2), *z1 = pattern(3000, 3), *b = pattern(50, 4);
	uint8_t *z2 = pattern(300, 5), *z3 = pattern(5, 6), *c = pattern(2000, 7);
	uint8_t want[5455];
	size_t o = 0;

	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send(f->c, a, 100, f->e.now), 100);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, z1, 3000, on_done, (void *)1, f->e.now), 3000);
	CU_ASSERT_EQUAL(tide_net_send(f->c, b, 50, f->e.now), 50);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, z2, 300, on_done, (void *)2, f->e.now), 300);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, z3, 5, on_done, (void *)3, f->e.now), 5);
	CU_ASSERT_EQUAL(tide_net_send(f->c, c, 2000, f->e.now), 2000);
	memcpy(want + o, a, 100), o += 100;
	memcpy(want + o, z1, 3000), o += 3000;
	memcpy(want + o, b, 50), o += 50;
	memcpy(want + o, z2, 300), o += 300;
	memcpy(want + o, z3, 5), o += 5;
	memcpy(want + o, c, 2000), o += 2000;
	fx_collect(f);
	CU_ASSERT_EQUAL(f->rx_hi, o);
	CU_ASSERT_EQUAL(memcmp(f->rx, want, o), 0);
	CU_ASSERT(zd.np >= 1); /* z1's tail pieces at least */
	{
		struct tide_net_conn_info ci;

		tide_net_conn_info(f->c, &ci);
		CU_ASSERT_EQUAL(ci.snd_queued, o);
	}
	/* Acknowledge through z1 only. */
	fx_ack(f, 3100);
	z_complete();
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 1);
	CU_ASSERT_EQUAL(dl.cookie[0], 1);
	/* All of it. */
	fx_ack(f, (uint32_t)o);
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 3);
	CU_ASSERT_EQUAL(dl.cookie[1], 2);
	CU_ASSERT_EQUAL(dl.cookie[2], 3);
	CU_ASSERT_EQUAL(dl.status[1], 0);
	/* Copy sends work as before once the zero-copy data is gone. */
	CU_ASSERT_EQUAL(tide_net_send(f->c, a, 100, f->e.now), 100);
	fx_collect(f);
	CU_ASSERT_EQUAL(memcmp(f->rx + o, a, 100), 0);
	tide_net_abort(f->c, f->e.now);
	fx_free(f);
	free(a), free(z1), free(b), free(z2), free(z3), free(c);
}

/* A retransmission takes a second reference; completion waits for both copies. */
static void
test_retransmission_holds_completion(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t *d = pattern(1460, 8);
	struct ut_tcp_out o;

	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 1460, on_done, (void *)9, f->e.now), 1460);
	CU_ASSERT_EQUAL(ut_pop_tcp(&f->e, &o), 0);
	CU_ASSERT_EQUAL(o.len, 1460);
	CU_ASSERT_EQUAL(zd.np, 1);
	/* Lost: the RTO (initial 1 s) retransmits by reference again. */
	ut_advance(&f->e, 1100 * NS_PER_MS);
	CU_ASSERT_EQUAL(ut_pop_tcp(&f->e, &o), 0);
	CU_ASSERT_EQUAL(o.len, 1460);
	CU_ASSERT_EQUAL(memcmp(o.payload, d, 1460), 0);
	CU_ASSERT_EQUAL(zd.np, 2);
	CU_ASSERT_EQUAL(tide_net_stats(f->e.s)->tcp_rto_fired, 1);
	fx_ack(f, 1460);
	/* The device releases the first copy only: still held. */
	zd.p[0].state = P_RELEASED;
	zd.p[0].rel(zd.p[0].arg);
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 0);
	z_complete();
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 1);
	CU_ASSERT_EQUAL(dl.status[0], 0);
	tide_net_abort(f->c, f->e.now);
	fx_free(f);
	free(d);
}

static void
test_abort_with_pending(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t *d = pattern(200000, 9);

	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 100000, on_done, (void *)1, f->e.now), 100000);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d + 100000, 100000, on_done, (void *)2, f->e.now),
			100000);
	fx_collect(f);
	fx_ack(f, 2920);
	fx_collect(f);
	tide_net_abort(f->c, f->e.now);
	/* Device references remain: no completion yet. */
	CU_ASSERT_EQUAL(dl.n, 0);
	CU_ASSERT(z_complete() > 0);
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 2);
	CU_ASSERT_EQUAL(dl.cookie[0], 1);
	CU_ASSERT_EQUAL(dl.cookie[1], 2);
	CU_ASSERT_EQUAL(dl.status[0], -ECONNABORTED);
	CU_ASSERT_EQUAL(dl.status[1], -ECONNABORTED);
	CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 0);
	fx_free(f);
	free(d);
}

static void
test_reset_with_pending(void)
{
	struct fx *f = fx_new(false, false);
	uint8_t *d = pattern(5000, 10);

	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 5000, on_done, (void *)4, f->e.now), 5000);
	fx_collect(f);
	ut_tcp_in(&f->e, &(struct ut_seg){.seq = f->peer + 1,
					  .ack = f->iss + 1,
					  .flags = TCPHDR_RST | TCPHDR_ACK,
					  .sport = 5000,
					  .dport = f->lport});
	CU_ASSERT_EQUAL(dl.n, 1);
	CU_ASSERT_EQUAL(dl.status[0], -ECONNRESET);
	/* The handle is still the application's; sends now fail without a completion. */
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 10, on_done, (void *)5, f->e.now), -EPIPE);
	tide_net_close(f->c, f->e.now);
	CU_ASSERT_EQUAL(dl.n, 1);
	fx_free(f);
	free(d);
}

/* The device takes the first piece of a frame and refuses the second: the frame is
 * rebuilt by copy, and the reference it had taken is released. */
static void
test_attach_refused_midframe(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t *d = pattern(1000, 11);

	memset(&dl, 0, sizeof(dl));
	zd.attach_ok_left = 1;
	/* Two zero-copy pieces of >= 256 bytes in one segment. */
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 400, on_done, (void *)1, f->e.now), 400);
	fx_collect(f);
	CU_ASSERT_EQUAL(zd.np, 1);
	fx_ack(f, 400);
	z_complete();
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 1);
	/* Now: window of two pieces sent in one segment after a burst was held back. */
	zd.attach_ok_left = 1;
	zd.np = 0;
	{
		struct tide_net_conn_info ci;

		tide_net_conn_info(f->c, &ci);
		CU_ASSERT_EQUAL(ci.snd_queued, 0);
	}
	/* Queue both while the window is closed, so one segment carries both pieces. */
	ut_tcp_in(&f->e, &(struct ut_seg){.seq = f->peer + 1,
					  .ack = f->iss + 1 + 400,
					  .flags = TCPHDR_ACK,
					  .wnd_zero = true,
					  .sport = 5000,
					  .dport = f->lport});
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d + 400, 300, on_done, (void *)2, f->e.now), 300);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d + 700, 300, on_done, (void *)3, f->e.now), 300);
	fx_collect(f);
	ut_tcp_in(&f->e, &(struct ut_seg){.seq = f->peer + 1,
					  .ack = f->iss + 1 + 400,
					  .flags = TCPHDR_ACK,
					  .sport = 5000,
					  .dport = f->lport});
	fx_collect(f);
	CU_ASSERT(f->rx_hi >= 1000);
	CU_ASSERT_EQUAL(memcmp(f->rx, d, 1000), 0);
	CU_ASSERT_EQUAL(zd.attach_calls >= 3, true);
	/* The refused frame's first piece was released when the frame was freed. */
	CU_ASSERT_EQUAL(zd.np, 1);
	CU_ASSERT_EQUAL(zd.p[0].state, P_RELEASED);
	fx_ack(f, 1000);
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 3);
	CU_ASSERT_EQUAL(dl.cookie[2], 3);
	tide_net_abort(f->c, f->e.now);
	fx_free(f);
	free(d);
}

/*
 * Completion order: the device releases frames of later sends first and the
 * peer acknowledges in pieces; a send completes only when both its bytes are
 * acknowledged and every frame carrying them is released, and completions come
 * in call order even when a later send's conditions are met first.
 */
static void
test_completion_order_release_reversed(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t *d = pattern(4 * 3000, 21);
	unsigned segs;

	memset(&dl, 0, sizeof(dl));
	for (int i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d + 3000 * i, 3000, on_done,
						 (void *)(intptr_t)(i + 1), f->e.now),
				3000);
	}
	segs = fx_collect(f);
	CU_ASSERT(segs >= 8);
	CU_ASSERT_EQUAL(f->rx_hi, 12000);
	CU_ASSERT_EQUAL(memcmp(f->rx, d, 12000), 0);
	/* Everything acknowledged, nothing released: no completion. */
	fx_ack(f, 12000);
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 0);
	CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 4);
	/* Release the frames of sends 4, 3 and 2 (newest first): send 1 still blocks them. */
	for (size_t k = zd.np; k-- > 0;) {
		struct zpiece *p = &zd.p[k];

		if (p->state == P_HELD && p->data >= d + 3000) {
			p->state = P_RELEASED;
			p->rel(p->arg);
		}
	}
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 0);
	/* Send 1's frames go: all four complete, in call order, with status 0. */
	CU_ASSERT(z_complete() > 0);
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 4);
	for (unsigned i = 0; i < dl.n; i++) {
		CU_ASSERT_EQUAL(dl.cookie[i], (int)i + 1);
		CU_ASSERT_EQUAL(dl.status[i], 0);
	}
	CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 0);
	tide_net_abort(f->c, f->e.now);
	fx_free(f);
	free(d);
}

/* Completion callback of the peer-death test: the memory goes back at once. */
static uint8_t *pd_buf[8];
static int pd_status[8];
static unsigned pd_n;

static void
pd_done(void *cookie, int status)
{
	unsigned i = (unsigned)(intptr_t)cookie;

	CU_ASSERT_FATAL(i < 8);
	CU_ASSERT_PTR_NOT_NULL(pd_buf[i]);
	memset(pd_buf[i], 0xdd, 4000); /* the stack must not read it any more */
	free(pd_buf[i]);
	pd_buf[i] = NULL;
	pd_status[i] = status;
	pd_n++;
}

static void
pd_tweak(struct tide_net_opts *o)
{
	tweak(o);
	o->tcp_max_retries = 3;
	o->tcp_rto_min_us = 1000;
}

/*
 * The peer dies with zero-copy frames in flight: it never answers again.
 * Retransmissions take further references; the connection times out; every
 * send then completes with -ETIMEDOUT, but only once the device released the
 * frames it still held (original and retransmitted copies). The caller frees
 * each buffer inside its completion (ASan: no later access), and every device
 * buffer comes back (ut_env_fini).
 */
static void
test_peer_dies_with_frames_in_flight(void)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct ut_tcp_out o;
	unsigned frames = 0;
	bool closed = false;
	int reason = 0;

	CU_ASSERT_FATAL(f != NULL);
	memset(&zd, 0, sizeof(zd));
	memset(pd_status, 0, sizeof(pd_status));
	pd_n = 0;
	zd.base = &f->e.dev;
	zd.attach_ok_left = -1;
	use_attach = true;
	use_offload = false;
	ut_env_init(&f->e, pd_tweak);
	ut_app_init(&f->a);
	f->peer = 7000;
	f->c = ut_active_open(&f->e, &f->a, f->peer, &f->iss);
	{
		struct tide_net_conn_info ci;

		tide_net_conn_info(f->c, &ci);
		f->lport = ci.lport;
	}
	for (unsigned i = 0; i < 4; i++) {
		pd_buf[i] = pattern(4000, 30 + i);
		CU_ASSERT_EQUAL(tide_net_send_zc(f->c, pd_buf[i], 4000, pd_done,
						 (void *)(intptr_t)i, f->e.now),
				4000);
	}
	/* The first send is acknowledged; the peer then vanishes. */
	fx_collect(f);
	fx_ack(f, 4000);
	CU_ASSERT(z_complete() > 0);
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(pd_n, 1);
	CU_ASSERT_EQUAL(pd_status[0], 0);
	/* Retransmissions until the retry limit; the device keeps every frame. */
	for (unsigned t = 0; t < 200 && !closed; t++) {
		ut_advance(&f->e, 50 * NS_PER_MS);
		while (ut_pop_tcp(&f->e, &o) == 0) {
			frames++;
		}
		closed = ut_app_has(&f->a, TIDE_NET_EV_CLOSED, &reason);
	}
	CU_ASSERT_TRUE(closed);
	CU_ASSERT_EQUAL(reason, -ETIMEDOUT);
	CU_ASSERT(tide_net_stats(f->e.s)->tcp_retrans_segs > 0);
	CU_ASSERT(z_held() > 0); /* retransmitted copies */
	/* The connection is gone but the device still reads the memory: no completion. */
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(pd_n, 1);
	CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 3);
	z_complete();
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(pd_n, 4);
	for (unsigned i = 1; i < 4; i++) {
		CU_ASSERT_EQUAL(pd_status[i], -ETIMEDOUT);
		CU_ASSERT_PTR_NULL(pd_buf[i]);
	}
	CU_ASSERT_EQUAL(tide_net_zc_pending(f->e.s), 0);
	tide_net_close(f->c, f->e.now);
	ut_env_fini(&f->e);
	ut_app_fini(&f->a);
	free(zd.p);
	memset(&zd, 0, sizeof(zd));
	free(f);
}

static void
test_invalid_arguments(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t b[16] = {0};

	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, b, 0, on_done, NULL, f->e.now), -EINVAL);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, b, 16, NULL, NULL, f->e.now), -EINVAL);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, b, (size_t)TIDE_NET_ZC_MAX_QUEUED + 1, on_done, NULL,
					 f->e.now),
			-EINVAL);
	tide_net_abort(f->c, f->e.now);
	fx_free(f);
}

/* Destroy: sends the device released complete with -ECONNABORTED; held ones are
 * orphaned and freed by the device's last release (ASan checks the memory). */
static void
test_destroy_with_pending(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t *d = pattern(3000, 12);

	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 1460, on_done, (void *)1, f->e.now), 1460);
	fx_collect(f);
	tide_net_stack_destroy(f->e.s);
	f->e.s = NULL;
	CU_ASSERT_EQUAL(dl.n, 0);
	CU_ASSERT_EQUAL(z_complete(), 1); /* frees the orphan, no completion */
	CU_ASSERT_EQUAL(dl.n, 0);
	fx_free(f);
	free(d);

	f = fx_new(false, false);
	d = pattern(3000, 13);
	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 3000, on_done, (void *)2, f->e.now), 3000);
	fx_collect(f);
	tide_net_stack_destroy(f->e.s);
	f->e.s = NULL;
	CU_ASSERT_EQUAL(dl.n, 1);
	CU_ASSERT_EQUAL(dl.status[0], -ECONNABORTED);
	fx_free(f);
	free(d);
}

/* Orderly close with zero-copy data queued: it is still sent, then completes. */
static void
test_close_keeps_pending(void)
{
	struct fx *f = fx_new(true, false);
	uint8_t *d = pattern(4000, 14);
	struct ut_tcp_out o;
	bool fin = false;

	memset(&dl, 0, sizeof(dl));
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d, 4000, on_done, (void *)1, f->e.now), 4000);
	tide_net_close(f->c, f->e.now);
	while (ut_dev_pending(&f->e.dev) > 0) {
		if (ut_pop_tcp(&f->e, &o) == 0) {
			fin |= (o.flags & TCPHDR_FIN) != 0;
		}
	}
	CU_ASSERT_TRUE(fin);
	fx_ack(f, 4001);
	z_complete();
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 1);
	CU_ASSERT_EQUAL(dl.status[0], 0);
	fx_free(f);
	free(d);
}

/* ---- TX checksum offload ---- */

static void
test_tx_cksum_offload_marks_frames(void)
{
	struct fx *f = fx_new(true, true);
	uint8_t *d = pattern(6000, 15);

	memset(&dl, 0, sizeof(dl));
	zd.frames_ip_flag = zd.frames_tcp_flag = zd.frames = 0;
	CU_ASSERT_EQUAL(tide_net_send(f->c, d, 3000, f->e.now), 3000);
	CU_ASSERT_EQUAL(tide_net_send_zc(f->c, d + 3000, 3000, on_done, (void *)1, f->e.now), 3000);
	fx_collect(f); /* the parser verifies the checksums the "NIC" completed */
	CU_ASSERT_EQUAL(f->rx_hi, 6000);
	CU_ASSERT_EQUAL(memcmp(f->rx, d, 6000), 0);
	CU_ASSERT(zd.frames >= 5);
	CU_ASSERT_EQUAL(zd.frames_ip_flag, zd.frames);
	CU_ASSERT_EQUAL(zd.frames_tcp_flag, zd.frames);
	CU_ASSERT_FALSE(zd.bad_offload_field);
	fx_ack(f, 6000);
	z_complete();
	ut_advance(&f->e, 1);
	CU_ASSERT_EQUAL(dl.n, 1);
	tide_net_abort(f->c, f->e.now);
	fx_free(f);
	free(d);
}

/* ---- two stacks over a lossy wire ---- */

#define B2B_BYTES (4u << 20)
#define B2B_ZC    (64u << 10)

struct bside {
	struct ut_dev dev;
	struct zdev z;
	struct tide_net_stack *s;
	struct tide_net_conn *c;
	uint64_t rcvd, bad;
	bool connected, peer_fin, closed;
};

static uint8_t
bpat(uint64_t off)
{
	return (uint8_t)(off * 131 + (off >> 9) * 7 + 13);
}

static size_t
b_recv(struct tide_net_conn *c, void *arg, const uint8_t *data, size_t len)
{
	struct bside *sd = arg;

	(void)c;
	for (size_t i = 0; i < len; i++) {
		sd->bad += data[i] != bpat(sd->rcvd + i);
	}
	sd->rcvd += len;
	return len;
}

static void
b_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct bside *sd = arg;

	(void)c;
	(void)reason;
	sd->connected |= ev == TIDE_NET_EV_CONNECTED;
	sd->peer_fin |= ev == TIDE_NET_EV_PEER_CLOSED;
	sd->closed |= ev == TIDE_NET_EV_CLOSED;
}

static const struct tide_net_conn_cbs b_cbs = {.on_recv = b_recv, .on_event = b_event};

static int
b_accept(void *arg, struct tide_net_conn *c)
{
	struct bside *sd = arg;

	sd->c = c;
	sd->connected = true;
	tide_net_conn_set_cbs(c, &b_cbs, sd);
	return 0;
}

static uint64_t
brnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Move frames from -> to with loss, duplication and reordering (per mille); the
 * sending device is done with each frame once it is on the wire. */
static void
b_pump(struct bside *from, struct bside *to, struct ut_buf **held, uint64_t *rs, uint64_t now)
{
	struct tide_net_rx_pkt p[64];
	struct ut_buf *b;
	unsigned n = 0;

	if (*held != NULL) {
		p[n++] = (struct tide_net_rx_pkt){
			.data = (*held)->data, .len = (*held)->len, .handle = *held};
		*held = NULL;
	}
	while (n < 62 && (b = ut_dev_pop(&from->dev)) != NULL) {
		uint64_t r = brnd(rs) % 1000;

		from->dev.live--;
		to->dev.live++;
		if (r < 20) {
			to->dev.live--;
			free(b);
			continue;
		}
		if (*held == NULL && brnd(rs) % 1000 < 10) {
			*held = b;
			continue;
		}
		p[n++] = (struct tide_net_rx_pkt){.data = b->data, .len = b->len, .handle = b};
		if (brnd(rs) % 1000 < 5) {
			struct ut_buf *d = ut_buf_new();

			memcpy(d, b, sizeof(*d));
			to->dev.live++;
			p[n++] = (struct tide_net_rx_pkt){
				.data = d->data, .len = d->len, .handle = d};
		}
	}
	zdev_complete(&from->z);
	if (n > 0) {
		tide_net_rx_burst(to->s, p, (uint16_t)n, now);
	}
}

static void
b_init(struct bside *sd, bool attach, int id, uint64_t now)
{
	struct tide_net_opts o;

	memset(sd, 0, sizeof(*sd));
	sd->z.base = &sd->dev;
	sd->z.attach_ok_left = -1;
	tide_net_opts_init(&o, sizeof(o));
	o.dev_ops = attach ? &z_ops_attach : &z_ops_copy;
	o.dev = &sd->z;
	memcpy(o.mac, id == 0 ? ut_mac : ut_peer_mac, 6);
	o.ip = id == 0 ? UT_IP : UT_PEER_IP;
	o.tcp_time_wait_ms = 10;
	o.isn_secret = 77 + (uint64_t)id;
	CU_ASSERT_FATAL(tide_net_stack_create(&o, now, &sd->s) == 0);
}

static void
check_b2b_lossy(bool attach)
{
	static struct bside a, b;
	struct tide_net_listener *l;
	struct ut_buf *hab = NULL, *hba = NULL;
	uint64_t now = 1000 * NS_PER_MS, rs = 0x9e3779b97f4a7c15ull, sent = 0, steps = 0;
	uint8_t *src = malloc(B2B_BYTES);
	unsigned issued = 0;
	bool closing = false;

	CU_ASSERT_FATAL(src != NULL);
	for (uint64_t i = 0; i < B2B_BYTES; i++) {
		src[i] = bpat(i);
	}
	memset(&dl, 0, sizeof(dl));
	b_init(&a, attach, 0, now);
	b_init(&b, attach, 1, now);
	CU_ASSERT_FATAL(tide_net_listen(b.s, 7000, 4, b_accept, &b, &l) == 0);
	CU_ASSERT_FATAL(tide_net_connect(a.s, UT_PEER_IP, 7000, &b_cbs, &a, now, &a.c) == 0);
	while (steps++ < 4000000 && !a.closed) {
		now += 10 * NS_PER_US;
		/* A zero-copy send of 64 KiB then a 100-byte copy, two outstanding at most. */
		if (a.connected && sent < B2B_BYTES && issued - dl.n < 2) {
			ssize_t k = tide_net_send_zc(a.c, src + sent, B2B_ZC - 100, on_done,
						     (void *)(intptr_t)issued, now);

			CU_ASSERT_FATAL(k == B2B_ZC - 100);
			issued++;
			sent += B2B_ZC - 100;
			CU_ASSERT_EQUAL(tide_net_send(a.c, src + sent, 100, now), 100);
			sent += 100;
		}
		b_pump(&a, &b, &hab, &rs, now);
		b_pump(&b, &a, &hba, &rs, now);
		tide_net_timers_run(a.s, now);
		tide_net_timers_run(b.s, now);
		if (!closing && b.rcvd == B2B_BYTES && dl.n == issued) {
			closing = true;
			tide_net_close(a.c, now);
			tide_net_close(b.c, now);
		}
		if (closing && tide_net_stats(a.s)->tcp_conns == 0 &&
		    tide_net_stats(b.s)->tcp_conns == 0 && hab == NULL && hba == NULL &&
		    ut_dev_pending(&a.dev) == 0 && ut_dev_pending(&b.dev) == 0) {
			break;
		}
	}
	CU_ASSERT_EQUAL(b.rcvd, B2B_BYTES);
	CU_ASSERT_EQUAL(b.bad, 0);
	CU_ASSERT_EQUAL(issued, B2B_BYTES / B2B_ZC);
	CU_ASSERT_EQUAL(dl.n, issued > 64 ? 64 : issued);
	for (unsigned i = 0; i < dl.n; i++) {
		CU_ASSERT_EQUAL(dl.cookie[i], (int)i); /* call order */
		CU_ASSERT_EQUAL(dl.status[i], 0);
	}
	CU_ASSERT(tide_net_stats(a.s)->tcp_retrans_segs > 0);
	CU_ASSERT_EQUAL(tide_net_zc_pending(a.s), 0);
	if (attach) {
		CU_ASSERT(a.z.np > 0);
	}
	tide_net_listener_close(l, now);
	tide_net_stack_destroy(a.s);
	tide_net_stack_destroy(b.s);
	ut_dev_drain(&a.dev);
	ut_dev_drain(&b.dev);
	CU_ASSERT_EQUAL(a.dev.live, 0);
	CU_ASSERT_EQUAL(b.dev.live, 0);
	free(a.dev.q);
	free(b.dev.q);
	free(a.z.p);
	free(b.z.p);
	free(src);
}

static void
test_b2b_lossy_with_attach(void)
{
	check_b2b_lossy(true);
}

static void
test_b2b_lossy_without_attach(void)
{
	check_b2b_lossy(false);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("tcp_zc", NULL, NULL);

	CU_add_test(s, "basic_with_attach", test_basic_with_attach);
	CU_add_test(s, "basic_without_attach", test_basic_without_attach);
	CU_add_test(s, "mixed_with_copy_sends", test_mixed_with_copy_sends);
	CU_add_test(s, "retransmission_holds_completion", test_retransmission_holds_completion);
	CU_add_test(s, "abort_with_pending", test_abort_with_pending);
	CU_add_test(s, "reset_with_pending", test_reset_with_pending);
	CU_add_test(s, "attach_refused_midframe", test_attach_refused_midframe);
	CU_add_test(s, "completion_order_release_reversed", test_completion_order_release_reversed);
	CU_add_test(s, "peer_dies_with_frames_in_flight", test_peer_dies_with_frames_in_flight);
	CU_add_test(s, "invalid_arguments", test_invalid_arguments);
	CU_add_test(s, "destroy_with_pending", test_destroy_with_pending);
	CU_add_test(s, "close_keeps_pending", test_close_keeps_pending);
	CU_add_test(s, "tx_cksum_offload_marks_frames", test_tx_cksum_offload_marks_frames);
	CU_add_test(s, "b2b_lossy_with_attach", test_b2b_lossy_with_attach);
	CU_add_test(s, "b2b_lossy_without_attach", test_b2b_lossy_without_attach);
}

TIDE_UT_MAIN(register_tests)
