/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared fixtures for engine/net unit tests: a malloc-backed fake device
 * (with seeded loss/duplication/reordering for back-to-back links), a fake
 * clock, frame builders for a scripted peer, and parsers for what the stack
 * transmits. Every helper asserts checksums of the frames it parses.
 */
#ifndef NET_UT_COMMON_H
#define NET_UT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net_internal.h"
#include "tide_net.h"

#define UT_IP        0x0a000001u /* 10.0.0.1: the stack under test */
#define UT_PEER_IP   0x0a000002u /* 10.0.0.2: the scripted peer */
#define UT_FRAME_MAX 9100

extern const uint8_t ut_mac[6];
extern const uint8_t ut_peer_mac[6];

/** A device buffer: the handle the fake device hands out. */
struct ut_buf {
	uint16_t len;
	uint8_t data[UT_FRAME_MAX];
};

struct ut_dev {
	struct ut_buf **q; /* transmitted frames, oldest first */
	size_t qn, qcap, qhead;
	long live;            /* buffers allocated and not yet freed */
	unsigned alloc_fail;  /* fail this many tx_alloc calls */
	unsigned tx_refuse;   /* refuse this many frames in tx_burst */
	unsigned tx_bursts;   /* tx_burst calls */
	unsigned alloc_calls; /* tx_alloc calls */
};

extern const struct tide_net_dev_ops ut_dev_ops;

struct ut_buf *ut_buf_new(void);
void ut_buf_free(struct ut_dev *d, struct ut_buf *b);
/** Oldest transmitted frame (caller frees with ut_buf_free) or NULL. */
struct ut_buf *ut_dev_pop(struct ut_dev *d);
size_t ut_dev_pending(const struct ut_dev *d);
void ut_dev_drain(struct ut_dev *d);

/** Single-stack fixture: stack at UT_IP, peer at UT_PEER_IP already in its ARP cache. */
struct ut_env {
	struct ut_dev dev;
	struct tide_net_stack *s;
	uint64_t now;
};
typedef void (*ut_tweak_fn)(struct tide_net_opts *o);
void ut_env_init(struct ut_env *e, ut_tweak_fn tweak);
/** Destroys the stack and asserts every device buffer came back. */
void ut_env_fini(struct ut_env *e);
/** Deliver one frame (copied into a device buffer, freed by the stack). */
void ut_rx(struct ut_env *e, const uint8_t *frame, uint16_t len);
/** Advance the fake clock and run timers. */
int ut_advance(struct ut_env *e, uint64_t ns);

/** Frame builders: return the frame length. */
uint16_t ut_build_eth(uint8_t *f, const uint8_t *dst, const uint8_t *src, uint16_t type);
uint16_t ut_build_ipv4(uint8_t *f, uint32_t src, uint32_t dst, uint8_t proto, uint16_t l4len);
uint16_t ut_build_arp(uint8_t *f, uint16_t oper, const uint8_t *sha, uint32_t spa,
		      const uint8_t *tha, uint32_t tpa, const uint8_t *eth_dst);

/** A segment from the scripted peer. */
struct ut_seg {
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t wnd; /* raw header value; 0 means 65535 unless wnd_zero */
	bool wnd_zero;
	const void *data;
	uint16_t len;
	const uint8_t *opts;
	uint8_t optlen;
	uint16_t sport, dport; /* 0 = 5000 / 80 */
};
uint16_t ut_build_tcp(uint8_t *f, const struct ut_seg *sg);
void ut_tcp_in(struct ut_env *e, const struct ut_seg *sg);
/** Deliver n scripted segments in one tide_net_rx_burst call (one RX burst). */
void ut_tcp_in_burst(struct ut_env *e, const struct ut_seg *sg, unsigned n);

/** A parsed outgoing TCP segment. */
struct ut_tcp_out {
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t wnd;
	uint16_t sport, dport;
	uint32_t saddr, daddr;
	uint16_t len;
	uint8_t payload[UT_FRAME_MAX];
	struct tcp_opts opts;
	uint16_t frame_len;
	bool df;
};
/** Parse a frame the stack sent (asserting checksums). 0 = TCP; -1 = not TCP. */
int ut_parse_tcp(const struct ut_buf *b, struct ut_tcp_out *o);
/** Pop and parse the next TCP frame; -1 when the queue is empty or the frame is not TCP. */
int ut_pop_tcp(struct ut_env *e, struct ut_tcp_out *o);

/** Application recorder used as callbacks. */
struct ut_app {
	int events[64];
	int reasons[64];
	unsigned nev;
	uint8_t *rx;
	size_t rxn, rxcap;
	size_t consume_max; /* on_recv takes at most this much per call (SIZE_MAX: all) */
	struct tide_net_conn *accepted;
	int accept_rc;
	bool close_on_peer_fin;
	uint64_t *now;
};
extern const struct tide_net_conn_cbs ut_app_cbs;
void ut_app_init(struct ut_app *a);
void ut_app_fini(struct ut_app *a);
int ut_app_accept(void *arg, struct tide_net_conn *c);
bool ut_app_has(const struct ut_app *a, int ev, int *reason);

/** Full handshakes against the scripted peer (port 5000 <-> 80). */
struct tide_net_conn *ut_passive_open(struct ut_env *e, struct ut_app *a, uint32_t peer_isn,
				      uint32_t *our_iss, struct tide_net_listener **l);
struct tide_net_conn *ut_active_open(struct ut_env *e, struct ut_app *a, uint32_t peer_isn,
				     uint32_t *our_iss);

/** Timestamp option bytes (NOP NOP TS) for a peer segment. */
void ut_ts_opt(uint8_t out[12], uint32_t tsval, uint32_t tsecr);

/**
 * The peer's SYN (ISN peer_isn, from sport, 0 = 5000) offering MSS 1460 and
 * timestamps with tsval; the stack's answer is popped into *o.
 * \return what ut_pop_tcp() returns (0: a segment was popped).
 */
int ut_syn_ts(struct ut_env *e, uint32_t peer_isn, uint16_t sport, uint32_t tsval,
	      struct ut_tcp_out *o);

#endif /* NET_UT_COMMON_H */
