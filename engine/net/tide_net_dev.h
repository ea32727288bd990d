/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The user-space stack's device contract: all that device glue (pmd/eth, the
 * unit tests' fake devices) needs from engine/net, and nothing of the socket
 * API. Frames leave through a `struct tide_net_dev_ops` table the glue fills
 * (buffers allocated in bulk, bursts transmitted, handles freed in bulk,
 * external segments attached) and come in through tide_net_rx_burst(); the
 * glue may choose active-open ports (tide_net_port_pick_fn) and publish the
 * stack's counters. tide_net.h includes this header; the rest of the stack's
 * API (options, connections, timers) is there.
 *
 * Threading: as tide_net.h says for the stack: every call on the stack's
 * owner thread, every device callback made on it, counters readable racily
 * from any thread.
 */
#ifndef TIDE_NET_DEV_H
#define TIDE_NET_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tide_net_stack; /* one per polling thread (tide_net.h) */
struct tide_net_stats; /* its counters: n consecutive uint64_t (tide_net_stats_names()) */

/**
 * A device-owned transmit buffer, as the stack sees it. The frame is
 * data[0..len) followed by the ext_len bytes of the segments attached with
 * tide_net_dev_ops.tx_attach (in attach order); ext_len is 0 when nothing
 * was attached, and then len is the whole frame.
 */
struct tide_net_buf {
	void *handle;     /**< device packet (an mbuf in production); opaque to the stack */
	uint8_t *data;    /**< first byte of the Ethernet frame (after any device headroom) */
	uint16_t cap;     /**< bytes writable at data */
	uint16_t len;     /**< bytes at data, set by the stack before tx_burst */
	uint16_t ext_len; /**< bytes attached after data[0..len) (0 = none) */
	uint16_t flags;   /**< TIDE_NET_TX_F_* requests for the device, set by the stack */
};

/**
 * TX offload requests in tide_net_buf.flags, only set when the matching
 * tide_net_opts.tx_offloads bit is on (never under tide_net_opts.cksum_elide,
 * when the fields stay 0). The frame is always Ethernet (14
 * bytes, no VLAN) + IPv4 (20 bytes, no options) + TCP.
 */
/** The IPv4 header checksum field is 0: the device computes it. */
#define TIDE_NET_TX_F_IP_CKSUM 0x1
/** The TCP checksum field holds the pseudo-header sum: the device completes it. */
#define TIDE_NET_TX_F_TCP_CKSUM 0x2

/** Device TX offloads the stack may use (tide_net_opts.tx_offloads). */
#define TIDE_NET_OFFLOAD_IPV4_CKSUM 0x1 /**< IPv4 header checksum */
#define TIDE_NET_OFFLOAD_TCP_CKSUM  0x2 /**< TCP checksum over IPv4 */

/**
 * Release callback the stack passes to tide_net_dev_ops.tx_attach. The
 * device calls it exactly once per successful attach, from any thread, when
 * no packet references the attached bytes any more.
 */
typedef void (*tide_net_ext_release_fn)(void *arg);

/** One received frame. */
struct tide_net_rx_pkt {
	const uint8_t *data; /**< first byte of the Ethernet header */
	uint16_t len;        /**< frame length without FCS */
	uint16_t flags;      /**< TIDE_NET_RX_F_* offload results */
	void *handle;        /**< device packet, freed by the stack through free_bufs */
};

/** The device verified the IPv4 header checksum (skip the software check). */
#define TIDE_NET_RX_F_IP_CSUM_GOOD 0x1
/** The device verified the TCP/ICMP checksum (skip the software check). */
#define TIDE_NET_RX_F_L4_CSUM_GOOD 0x2

/**
 * Device callbacks. All are called on the stack's thread, at most once per
 * burst of packets (the stack keeps a small cache of TX buffers).
 */
struct tide_net_dev_ops {
	/**
	 * Allocate up to n TX buffers each able to hold `size` bytes of frame;
	 * fill handle, data and cap of bufs[0..ret). Return how many were
	 * allocated (0 when out of buffers).
	 */
	uint16_t (*tx_alloc)(void *dev, struct tide_net_buf *bufs, uint16_t n, uint16_t size);
	/**
	 * Transmit bufs[0..n) (bufs[i].len bytes each). Return how many the
	 * device took, which it now owns; the stack keeps the rest, in order,
	 * and offers them again first at its next flush (tx_deferred). Only
	 * when its queue of NET_TX_BURST frames is still full of refused frames
	 * does a new frame get freed with free_bufs (tx_dropped).
	 */
	uint16_t (*tx_burst)(void *dev, struct tide_net_buf *bufs, uint16_t n);
	/** Free n handles: received packets, or TX buffers never transmitted. */
	void (*free_bufs)(void *dev, void *const *handles, uint16_t n);
	/**
	 * Optional (NULL: the stack copies zero-copy payload into the frame at
	 * transmit time). Append len bytes at data to the frame in buf as an
	 * external segment, referenced, not copied: after data[0..buf->len) and
	 * the segments attached before. The stack calls it only while building
	 * a frame (before tx_burst), at most TIDE_NET_TX_EXT_MAX times per
	 * buffer, and adds len to buf->ext_len itself on success.
	 * \return 0: attached; the device now holds one reference and calls
	 *         release(arg) exactly once (any thread) when nothing references
	 *         data any more: after the frame left the wire, or when the
	 *         buffer is freed (free_bufs, dropped by tx_burst or the device).
	 *         -errno: nothing attached, release is never called for it, and
	 *         the stack copies the bytes instead.
	 */
	int (*tx_attach)(void *dev, struct tide_net_buf *buf, const void *data, uint16_t len,
			 tide_net_ext_release_fn release, void *arg);
};

/** External segments one frame may carry (tide_net_dev_ops.tx_attach calls per buffer). */
#define TIDE_NET_TX_EXT_MAX 4

/**
 * Local port picker for active opens, so the glue can choose a port whose
 * RSS hash of the reply tuple lands on this lcore's queue.
 * \param arg       tide_net_opts.port_arg
 * \param rip,rport remote address and port (host byte order)
 * \param attempt   0 for the first call; the stack calls again with
 *                  attempt+1 (up to 64 times) when the returned port's
 *                  4-tuple is already in use
 * \param[out] lport chosen local port (host byte order, non-zero)
 * \return 0, or -errno to fail the connect with that error.
 */
typedef int (*tide_net_port_pick_fn)(void *arg, uint32_t rip, uint16_t rport, unsigned attempt,
				     uint16_t *lport);

/**
 * Process a burst of received frames, then free every handle with one
 * free_bufs call and flush the frames the burst produced.
 * \return n (every frame is consumed, counted or dropped).
 * Thread: owner.
 */
uint16_t tide_net_rx_burst(struct tide_net_stack *stack, const struct tide_net_rx_pkt *pkts,
			   uint16_t n, uint64_t now);

/**
 * Names of the counters of struct tide_net_stats in declaration order (the
 * struct is n consecutive uint64_t), for exporting them generically.
 * \param[out] n  number of names. Thread: any.
 */
const char *const *tide_net_stats_names(size_t *n);

/** Counters; the pointer is valid for the stack's lifetime. Thread: any (racy reads). */
const struct tide_net_stats *tide_net_stats(const struct tide_net_stack *stack);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_NET_DEV_H */
