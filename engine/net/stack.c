/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stack lifecycle, the RX burst entry, timer dispatch and TX batching.
 *
 * TX buffers come from the device in bulk (tx_alloc of NET_TX_BURST) and
 * built frames leave in bulk (tx_burst of up to NET_TX_BURST), so the
 * device sees one indirect call per burst in each direction.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "net_internal.h"
#include "tide_log.h"

void
tide_net_opts_init(struct tide_net_opts *o, size_t size)
{
	struct tide_net_opts d;

	memset(&d, 0, sizeof(d));
	d.opts_size = sizeof(d);
	d.netmask = 0xffffff00u;
	d.mtu = 1500;
	d.arp_timeout_ms = 60000;
	d.arp_retry_ms = 1000;
	d.arp_retries = 3;
	d.arp_gratuitous = true;
	d.tcp_rto_init_us = 1000000;
	d.tcp_rto_min_us = 1000;
	d.tcp_rto_max_us = 60000000;
	d.tcp_delack_us = 500;
	d.tcp_time_wait_ms = 60000;
	d.tcp_fin_wait2_ms = 60000;
	d.tcp_sndbuf = 256 * 1024;
	d.tcp_rcvbuf = 256 * 1024;
	d.tcp_syn_retries = 6;
	d.tcp_max_retries = 15;
	d.tcp_nagle = false;
	d.tcp_timestamps = true;
	d.tcp_wscale = true;
	d.tcp_sack = true;
	d.tcp_keepalive = false;
	d.tcp_keepalive_idle_ms = 7200000;
	d.tcp_keepalive_intvl_ms = 75000;
	d.tcp_keepalive_probes = 9;
	d.tcp_challenge_ack_limit = 1000;
	d.tcp_max_ooo_segs = 256;
	d.tcp_cc = TIDE_NET_CC_NEWRENO;
	d.tcp_hystart = true;
	d.tcp_pacing = false;
	d.tcp_sack_compress = true;
	if (size > sizeof(d)) {
		memset(o, 0, size);
		size = sizeof(d);
	}
	memcpy(o, &d, size);
	o->opts_size = size;
}

static int
opts_check(const struct tide_net_opts *o)
{
	static const uint8_t zero[ETH_ALEN];

	if (o->opts_size != sizeof(*o) || o->dev_ops == NULL || o->dev_ops->tx_alloc == NULL ||
	    o->dev_ops->tx_burst == NULL || o->dev_ops->free_bufs == NULL) {
		return -EINVAL;
	}
	if (memcmp(o->mac, zero, ETH_ALEN) == 0 || (o->mac[0] & 1) || o->ip == 0) {
		return -EINVAL;
	}
	if (o->mtu < 576 || o->mtu > 9000 || o->tcp_sndbuf < 4096 || o->tcp_rcvbuf < 4096 ||
	    o->tcp_sndbuf > (1u << 30) || o->tcp_rcvbuf > (1u << 30)) {
		return -EINVAL;
	}
	if (o->tcp_rto_min_us == 0 || o->tcp_rto_min_us > o->tcp_rto_max_us ||
	    o->tcp_rto_init_us < o->tcp_rto_min_us || o->tcp_rto_init_us > o->tcp_rto_max_us) {
		return -EINVAL;
	}
	if (o->arp_timeout_ms == 0 || o->arp_retry_ms == 0 || o->arp_retries == 0 ||
	    o->tcp_max_ooo_segs == 0 ||
	    (o->tcp_cc != TIDE_NET_CC_NEWRENO && o->tcp_cc != TIDE_NET_CC_CUBIC &&
	     o->tcp_cc != TIDE_NET_CC_WESTWOOD)) {
		return -EINVAL;
	}
	return 0;
}

int
tide_net_stack_create(const struct tide_net_opts *opts, uint64_t now, struct tide_net_stack **out)
{
	struct tide_net_stack *s;
	int rc;

	(void)now; /* nothing is stamped at creation (the ISN secret no longer uses the clock) */
	if (opts == NULL || out == NULL) {
		return -EINVAL;
	}
	rc = opts_check(opts);
	if (rc != 0) {
		TIDE_LOG(ERR, "stack create: invalid options");
		return rc;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		return -ENOMEM;
	}
	s->o = *opts;
	s->ops = opts->dev_ops;
	s->dev = opts->dev;
	s->frame_cap = (uint16_t)(opts->mtu + ETH_HLEN);
	for (unsigned i = 0; i < NET_CONN_BUCKETS; i++) {
		LIST_INIT(&s->conn_hash[i]);
	}
	TAILQ_INIT(&s->conns);
	TAILQ_INIT(&s->graveyard);
	TAILQ_INIT(&s->tx_blocked);
	TAILQ_INIT(&s->ack_owed);
	LIST_INIT(&s->listeners);
	TAILQ_INIT(&s->zc_wait);
	s->timer_next = UINT64_MAX;
	s->next_eport = 49152;
	if (opts->cksum_elide) {
		TIDE_LOG(INFO, "stack %u.%u.%u.%u: checksums elided (none computed, none verified)",
			 opts->ip >> 24, (opts->ip >> 16) & 255, (opts->ip >> 8) & 255,
			 opts->ip & 255);
	}
	/* RFC 6528: the ISN secret must be unguessable. A fixed isn_secret is
	 * for reproducible tests only; otherwise 128 bits from the kernel's
	 * CSPRNG (the MAC, address and clock it used to be derived from are
	 * all visible to a peer). */
	if (opts->isn_secret != 0) {
		s->isn_key[0] = opts->isn_secret;
		s->isn_key[1] = ~opts->isn_secret;
	} else if (getrandom(s->isn_key, sizeof(s->isn_key), 0) != (ssize_t)sizeof(s->isn_key)) {
		TIDE_LOG(ERR, "stack create: getrandom for the ISN secret: %s", strerror(errno));
		free(s);
		return -EIO;
	}
	if (opts->arp_gratuitous) {
		static const uint8_t bcast[ETH_ALEN] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
		static const uint8_t zero[ETH_ALEN];

		/* RFC 5227 announcement: request with sender = target = our address. */
		if (net_arp_send(s, 1, zero, opts->ip, bcast) == 0) {
			s->st.arp_tx_gratuitous++;
		}
		net_tx_flush(s);
	}
	*out = s;
	return 0;
}

void
tide_net_stack_destroy(struct tide_net_stack *s)
{
	struct tide_net_conn *c;
	struct tide_net_listener *l;
	void *h[NET_TX_BURST];

	if (s == NULL) {
		return;
	}
	TAILQ_FOREACH(c, &s->conns, link)
	{
		c->app_owned = false;
		if (!c->dead) {
			tcp_done(c, 0);
		}
	}
	net_conns_reap(s);
	while ((l = LIST_FIRST(&s->listeners)) != NULL) {
		LIST_REMOVE(l, link);
		free(l);
	}
	net_arp_destroy(s);
	for (uint16_t i = 0; i < s->txq_n; i++) {
		h[i] = s->txq[i].handle;
	}
	if (s->txq_n > 0) {
		s->ops->free_bufs(s->dev, h, s->txq_n);
	}
	for (uint16_t i = 0; i < s->cache_n; i++) {
		h[i] = s->cache[i].handle;
	}
	if (s->cache_n > 0) {
		s->ops->free_bufs(s->dev, h, s->cache_n);
	}
	/* After the queued frames went back: sends only they referenced can complete. */
	net_zc_destroy(s);
	free(s);
}

int
net_txbuf_get(struct tide_net_stack *s, struct tide_net_buf *b)
{
	if (s->cache_n == 0) {
		uint16_t n = s->ops->tx_alloc(s->dev, s->cache, NET_TX_BURST, s->frame_cap);
		s->cache_n = n > NET_TX_BURST ? NET_TX_BURST : n;
		if (s->cache_n == 0) {
			s->st.tx_nobufs++;
			return -ENOBUFS;
		}
	}
	*b = s->cache[--s->cache_n];
	b->len = 0;
	b->ext_len = 0;
	b->flags = 0;
	assert(b->cap >= s->frame_cap);
	return 0;
}

void
net_txbuf_put(struct tide_net_stack *s, struct tide_net_buf *b)
{
	/* A buffer with attached segments goes back to the device, which releases them. */
	if (s->cache_n < NET_TX_BURST && b->ext_len == 0) {
		s->cache[s->cache_n++] = *b;
		return;
	}
	s->ops->free_bufs(s->dev, &b->handle, 1);
}

void
net_tx_flush(struct tide_net_stack *s)
{
	uint16_t n = s->txq_n, sent;

	if (n == 0) {
		return;
	}
	s->txq_n = 0;
	sent = s->ops->tx_burst(s->dev, s->txq, n);
	if (sent > n) {
		sent = n;
	}
	for (uint16_t i = 0; i < sent; i++) {
		s->st.tx_bytes += (uint64_t)s->txq[i].len + s->txq[i].ext_len;
	}
	s->st.tx_frames += sent;
	if (sent < n) {
		/* A full device ring is backpressure, not loss: keep the refused
		 * frames, in order, for the next flush (the next poll). Freeing them
		 * made every full ring look like wire loss, and when the
		 * retransmissions met a full ring too the RTO doubled into stalls
		 * of 100 ms to 2 s on memif. */
		memmove(&s->txq[0], &s->txq[sent], (size_t)(n - sent) * sizeof(s->txq[0]));
		s->txq_n = (uint16_t)(n - sent);
		s->st.tx_deferred += n - sent;
	}
}

void
net_tx_enqueue(struct tide_net_stack *s, struct tide_net_buf *b)
{
	if (b->len + b->ext_len < ETH_ZLEN) {
		assert(b->ext_len == 0); /* attached pieces are long (tcp_zc.c) */
		memset(b->data + b->len, 0, ETH_ZLEN - b->len);
		b->len = ETH_ZLEN;
	}
	if (s->txq_n == NET_TX_BURST) {
		/* Full of frames the device refused: one more try, then this frame
		 * is lost as on the wire (TCP retransmits it); bounded memory. */
		net_tx_flush(s);
		if (s->txq_n == NET_TX_BURST) {
			s->st.tx_dropped++;
			s->ops->free_bufs(s->dev, &b->handle, 1);
			return;
		}
	}
	s->txq[s->txq_n++] = *b;
	if (s->txq_n == NET_TX_BURST) {
		net_tx_flush(s);
	}
}

uint16_t
tide_net_rx_burst(struct tide_net_stack *s, const struct tide_net_rx_pkt *pkts, uint16_t n,
		  uint64_t now)
{
	void *h[NET_TX_BURST];
	uint16_t nh = 0;
	/* Elision: every frame is taken as verified, exactly as if the device said so. */
	uint16_t trust =
		s->o.cksum_elide ? TIDE_NET_RX_F_IP_CSUM_GOOD | TIDE_NET_RX_F_L4_CSUM_GOOD : 0;

	/* Entered like every public call, so a callback that closes a
	 * connection (its own, in its CLOSED event) only marks it dead: it is
	 * freed at the matching net_leave, after the segment that triggered
	 * the callback is done with it. */
	net_enter(s);
	s->in_rx_burst = true;
	for (uint16_t i = 0; i < n; i++) {
		s->st.rx_frames++;
		s->st.rx_bytes += pkts[i].len;
		/* TCP input may keep an out-of-order frame whole instead of copying
		 * it (rx_kept); such a frame is freed when its hole fills. */
		s->rx_handle = pkts[i].handle;
		s->rx_kept = false;
		net_eth_input(s, pkts[i].data, pkts[i].len, (uint16_t)(pkts[i].flags | trust), now);
		s->rx_handle = NULL;
		if (pkts[i].handle != NULL && !s->rx_kept) {
			h[nh++] = pkts[i].handle;
			if (nh == NET_TX_BURST) {
				s->ops->free_bufs(s->dev, h, nh);
				nh = 0;
			}
		}
	}
	if (nh > 0) {
		s->ops->free_bufs(s->dev, h, nh);
	}
	s->in_rx_burst = false;
	tcp_ack_owed_flush(s, now);
	net_tx_resume(s, now);
	net_leave(s); /* reaps dead connections and flushes TX */
	return n;
}

/*
 * Bounded by the list length at entry: a connection that blocks again goes
 * to the tail and the walk stops as soon as the device is full again, so a
 * device that refuses everything costs one flush per call.
 */
void
net_tx_resume(struct tide_net_stack *s, uint64_t now)
{
	struct tide_net_conn *c;

	while ((c = TAILQ_FIRST(&s->tx_blocked)) != NULL && !net_tx_full(s)) {
		tcp_tx_unblock(c);
		tcp_write_xmit(c, now);
	}
}

int
tide_net_timers_run(struct tide_net_stack *s, uint64_t now)
{
	struct tide_net_conn *c, *tmp;
	int fired = 0;

	if (!TAILQ_EMPTY(&s->zc_wait) || s->txq_n > 0 || !TAILQ_EMPTY(&s->tx_blocked)) {
		/* Devices release zero-copy frames on their own time, perhaps on
		 * another thread: completions are polled here as well; frames a
		 * full device ring refused are offered again, and connections it
		 * stopped go on once it takes them (net_leave flushes). */
		net_enter(s);
		net_tx_resume(s, now);
		net_leave(s);
	}
	if (now < s->timer_next) {
		return 0;
	}
	/*
	 * One pass over every connection and ARP slot, only when some deadline
	 * is due: O(conns) per due instant. A timer wheel replaces this when
	 * connection counts grow past a few thousand per lcore.
	 */
	s->timer_next = UINT64_MAX;
	net_enter(s);
	fired += net_arp_timers(s, now);
	/* Dead connections stay on s->conns until the reap below, so a callback
	 * that aborts another connection cannot break this walk. */
	for (c = TAILQ_FIRST(&s->conns); c != NULL; c = tmp) {
		tmp = TAILQ_NEXT(c, link);
		if (!c->dead) {
			fired += tcp_conn_timers(c, now);
		}
	}
	net_leave(s); /* reaps dead connections and flushes TX */
	return fired;
}

uint64_t
tide_net_next_timer(const struct tide_net_stack *s)
{
	/* As tide_net_timers_run's first test: that work is due at once. */
	if (!TAILQ_EMPTY(&s->zc_wait) || s->txq_n > 0 || !TAILQ_EMPTY(&s->tx_blocked))
		return 0;
	return s->timer_next;
}

const struct tide_net_stats *
tide_net_stats(const struct tide_net_stack *s)
{
	return &s->st;
}
