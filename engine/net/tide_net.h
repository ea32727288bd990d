/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Tide's user-space TCP/IP stack: Ethernet, ARP, IPv4, ICMP echo and TCP
 * (RFC 9293 with RFC 5961, 6298, 6528, 6582, 7323, SYN cookies as RFC 4987 describes
 * them, and SACK: RFC 2018, 2883, 6675, with RFC 8985 tail loss probes),
 * with no device code.
 *
 * The stack is pure protocol. Frames come in as (data, len, opaque handle)
 * through tide_net_rx_burst(); frames go out through a `struct
 * tide_net_dev_ops` table the owner supplies (allocate TX buffers in bulk,
 * transmit a burst, free handles in bulk), so the same code runs over DPDK
 * mbufs in production and over malloc'd buffers in unit tests. The stack
 * never reads a clock: every entry point takes `now`, a monotonic time in
 * nanoseconds, and timers only fire from tide_net_timers_run().
 *
 * Threading: one stack instance per lcore. A stack, its listeners and its
 * connections are owned by the thread that created the stack; every
 * function below must be called from that thread only, and every callback
 * is made on it. The stack has no global mutable state, so independent
 * stacks may run on different threads. Counters (tide_net_stats()) are
 * written only by the owner and may be read racily by any thread.
 *
 * Memory: the stack allocates with malloc (connection blocks, send and
 * receive rings, out-of-order segments). In-order payload is handed to
 * on_recv straight from the received frame (the application copies it once,
 * to its destination); only bytes on_recv does not take are copied into the
 * receive ring. The stack may keep a received frame past tide_net_rx_burst()
 * when its payload arrived out of order (at most 256 frames per stack; beyond
 * that such payload is copied): it frees the handle through free_bufs, on its
 * own thread, once the hole is filled or the connection ends.
 * tide_net_send() copies into the send ring; tide_net_send_zc() instead
 * references the caller's memory until a completion callback says it is
 * free, and frames carry it by reference when the device offers tx_attach.
 *
 * TX batching: built frames are queued inside the stack and handed to
 * tx_burst once per burst (32 frames) and at the end of every public entry
 * point, so a poll loop sees one indirect call per burst, not per packet.
 */
#ifndef TIDE_NET_H
#define TIDE_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tide_net_dev.h" /* the device contract: buffers, device ops, receive entry */

#ifdef __cplusplus
extern "C" {
#endif

struct tide_net_conn;
struct tide_net_listener;

/** Congestion control algorithms. */
enum tide_net_cc {
	TIDE_NET_CC_NEWRENO = 0, /**< RFC 5681 + RFC 6582 */
	TIDE_NET_CC_CUBIC = 1,   /**< RFC 9438 */
	/** Westwood+: on loss, ssthresh from the measured delivery rate times the least
	 *  RTT (never below NewReno's half), so random loss costs little of the rate */
	TIDE_NET_CC_WESTWOOD = 2,
};

/** Stack options. Initialise with tide_net_opts_init(), then set what you need. */
struct tide_net_opts {
	size_t opts_size; /**< sizeof(struct tide_net_opts), set by tide_net_opts_init */

	const struct tide_net_dev_ops *dev_ops; /**< required */
	void *dev;                              /**< first argument of every dev_ops call */

	uint8_t mac[6];   /**< our MAC (required, unicast) */
	uint32_t ip;      /**< our IPv4 address, host byte order (required) */
	uint32_t netmask; /**< host byte order; default 255.255.255.0 */
	uint32_t gateway; /**< next hop off-subnet, host byte order; 0 = none (off-subnet fails) */
	uint16_t mtu;     /**< IP MTU, 576..9000; default 1500 */

	uint32_t arp_timeout_ms; /**< resolved entry lifetime; default 60000 */
	uint32_t arp_retry_ms;   /**< request retransmit interval; default 1000 */
	uint8_t arp_retries;     /**< requests before pending frames are dropped; default 3 */
	bool arp_gratuitous;     /**< announce our address at create; default true */

	uint32_t
		tcp_rto_init_us; /**< RTO before the first RTT sample; default 1000000 (RFC 6298) */
	uint32_t tcp_rto_min_us; /**< RTO floor; default 1000 (datacenter; RFC 6298 says 1 s) */
	uint32_t tcp_rto_max_us; /**< RTO ceiling; default 60000000 */
	uint32_t tcp_delack_us;  /**< delayed-ACK timeout; default 500; 0 = ACK every segment */
	uint32_t tcp_time_wait_ms; /**< TIME_WAIT (2*MSL) duration; default 60000 */
	uint32_t tcp_fin_wait2_ms; /**< orphaned FIN_WAIT_2 lifetime; default 60000 */
	uint32_t tcp_sndbuf;       /**< send buffer bytes per connection; default 256 KiB */
	uint32_t tcp_rcvbuf;       /**< receive buffer bytes per connection; default 256 KiB */
	uint8_t tcp_syn_retries;   /**< SYN / SYN-ACK retransmissions; default 6 */
	uint8_t tcp_max_retries;   /**< data retransmissions before ETIMEDOUT; default 15 */
	bool tcp_nagle;            /**< Nagle's algorithm; default false (off) */
	bool tcp_timestamps;       /**< offer RFC 7323 timestamps; default true */
	bool tcp_wscale;           /**< offer RFC 7323 window scaling; default true */
	bool tcp_sack;      /**< offer SACK-permitted; when both sides agree, send SACK blocks and
			       recover      from losses with them (RFC 2018, 6675); default true */
	bool tcp_keepalive; /**< keepalive; default false */
	uint32_t tcp_keepalive_idle_ms;   /**< idle before the first probe; default 7200000 */
	uint32_t tcp_keepalive_intvl_ms;  /**< between probes; default 75000 */
	uint8_t tcp_keepalive_probes;     /**< unanswered probes before ETIMEDOUT; default 9 */
	uint32_t tcp_challenge_ack_limit; /**< challenge ACKs per second per stack; default 1000 */
	uint16_t tcp_max_ooo_segs;        /**< out-of-order segments held per connection, at least
					     tcp_rcvbuf / 1024; default 256 */
	enum tide_net_cc tcp_cc;          /**< congestion control; default NEWRENO */
	uint64_t isn_secret; /**< RFC 6528 ISN key for tests; 0 (the default) = 128 random bits from
				getrandom() */

	tide_net_port_pick_fn port_pick; /**< NULL = sequential ephemeral ports 49152..65535 */
	void *port_arg;                  /**< passed to port_pick */

	/**
	 * TIDE_NET_OFFLOAD_* the device performs on transmit; default 0 (the
	 * stack computes every checksum). With a bit set the stack leaves that
	 * checksum to the device and marks each frame with TIDE_NET_TX_F_*.
	 */
	uint32_t tx_offloads;

	/**
	 * Checksum elision; default false. Only for a link whose two ends share
	 * trusted memory on one host (net_memif between processes, net_ring in
	 * one), the trust Linux loopback gives itself when it skips checksums.
	 * When true the stack computes no checksum and verifies none:
	 *  - transmit: the IPv4 header checksum and the TCP and ICMP checksum
	 *    fields go out as 0 (not a partial sum), no TIDE_NET_TX_F_* flag
	 *    is set and tx_offloads is ignored;
	 *  - receive: every frame is handled as if the device had set
	 *    TIDE_NET_RX_F_IP_CSUM_GOOD | TIDE_NET_RX_F_L4_CSUM_GOOD.
	 * Both ends must elide: a peer that verifies drops every frame of ours
	 * (its IPv4 header checksum check fails first).
	 */
	bool cksum_elide;

	/**
	 * HyStart++ (RFC 9406) in the first slow start; default true. A round
	 * whose least RTT rose by a threshold over the round before's (an eighth
	 * of it, within 250 us..16 ms) ends the doubling before the queue it
	 * measures overflows: a quarter of the growth for 5 rounds, then
	 * congestion avoidance.
	 */
	bool tcp_hystart;

	/**
	 * Pacing; default false. Data segments leave spread over the smoothed
	 * RTT, at twice the window's rate in slow start and 1.2 times it in
	 * congestion avoidance (Linux's factors), in bursts of at most an eighth
	 * of the RTT's worth (two segments at least), instead of a window at the
	 * device's rate: a shallow queue that several flows share then sees
	 * their segments interleaved rather than one flow's train.
	 */
	bool tcp_pacing;

	/**
	 * SACK compression; default true. While data arrive out of order, an ACK
	 * that would only report more of the run the previous SACK reported (the
	 * sender already knows of the hole) waits up to a quarter of the smoothed
	 * RTT (1 ms at most) or 44 such segments, as Linux's tcp_comp_sack, so a
	 * sender in recovery handles a few ACKs that each report much instead of
	 * one per segment. A new hole, a filled one and in-order data are
	 * acknowledged as before.
	 */
	bool tcp_sack_compress;
};

/** Counters for everything dropped, refused or retransmitted; u64, racy reads. */
struct tide_net_stats {
	/* Ethernet */
	uint64_t rx_frames, rx_bytes, tx_frames, tx_bytes;
	uint64_t eth_rx_short;        /**< shorter than an Ethernet header */
	uint64_t eth_rx_not_ours;     /**< destination neither our MAC nor broadcast */
	uint64_t eth_rx_ipv6;         /**< IPv6 frames (not supported) */
	uint64_t eth_rx_unknown_type; /**< other ethertypes, VLAN tags included */
	uint64_t tx_nobufs;           /**< tx_alloc returned nothing: frame not built */
	uint64_t tx_dropped;          /**< dropped: the TX queue was full of refused frames */
	uint64_t tx_deferred;         /**< tx_burst refused the frame; kept for the next flush */
	/* ARP */
	uint64_t arp_rx, arp_rx_bad, arp_rx_requests, arp_rx_replies, arp_rx_not_ours;
	uint64_t arp_tx_requests, arp_tx_replies, arp_tx_gratuitous;
	uint64_t arp_expired;         /**< cache entries that timed out */
	uint64_t arp_pending_dropped; /**< frames dropped: queue full or resolution failed */
	uint64_t arp_unreachable;     /**< off-subnet destination with no gateway */
	/* IPv4 */
	uint64_t ip_rx, ip_rx_bad_hdr, ip_rx_bad_len, ip_rx_bad_csum;
	uint64_t ip_rx_frags;     /**< fragments (not reassembled) */
	uint64_t ip_rx_not_ours;  /**< destination is not our address */
	uint64_t ip_rx_bad_proto; /**< neither ICMP nor TCP */
	uint64_t ip_tx;
	/* ICMP */
	uint64_t icmp_rx, icmp_rx_bad, icmp_rx_echo, icmp_tx_echo_reply, icmp_rx_other;
	/* TCP */
	uint64_t tcp_rx_segs, tcp_tx_segs;
	uint64_t tcp_rx_bad_csum, tcp_rx_bad_hdr;
	uint64_t tcp_rx_no_conn; /**< no connection or listener: RST sent (unless RST) */
	uint64_t tcp_rst_tx, tcp_rst_rx;
	uint64_t tcp_rx_out_of_window;  /**< unacceptable segments (answered with an ACK) */
	uint64_t tcp_rx_paws;           /**< dropped by PAWS (RFC 7323) */
	uint64_t tcp_rx_bad_ack;        /**< ACK for data never sent, or too old (RFC 5961 s5) */
	uint64_t tcp_rx_dup_bytes;      /**< payload bytes already received */
	uint64_t tcp_rx_ooo_segs;       /**< out-of-order segments queued */
	uint64_t tcp_rx_ooo_dropped;    /**< out-of-order segments dropped (queue full) */
	uint64_t tcp_rx_orphan_bytes;   /**< payload for connections the application closed */
	uint64_t tcp_challenge_acks;    /**< RFC 5961 challenge ACKs sent */
	uint64_t tcp_challenge_limited; /**< challenge ACKs suppressed by the rate limit */
	uint64_t tcp_retrans_segs;      /**< segments retransmitted (any cause) */
	uint64_t tcp_rto_fired, tcp_fast_retrans, tcp_dup_acks;
	uint64_t tcp_window_probes, tcp_keepalive_probes, tcp_delayed_acks;
	uint64_t tcp_listen_overflow; /**< SYNs beyond a full backlog (answered by cookie) */
	uint64_t tcp_accept_refused;  /**< accept callback refused the connection */
	uint64_t tcp_conn_refused;    /**< active opens answered with RST */
	uint64_t tcp_conn_timeouts;   /**< connections failed by retransmission/keepalive limit */
	uint64_t tcp_conn_resets;     /**< connections reset by the peer */
	uint64_t tcp_conn_nomem;      /**< connections not created: allocation failed */
	uint64_t tcp_active_opens, tcp_passive_opens, tcp_conns;
	/* SACK (RFC 2018, 2883, 6675); appended after the fields above, whose offsets stay put. */
	uint64_t tcp_sack_blocks_tx;  /**< SACK blocks sent (D-SACK blocks included) */
	uint64_t tcp_sack_blocks_rx;  /**< valid SACK blocks received (D-SACK excluded) */
	uint64_t tcp_dsack_tx;        /**< D-SACK blocks sent: duplicate data received */
	uint64_t tcp_dsack_rx;        /**< D-SACK blocks received */
	uint64_t tcp_sack_rejected;   /**< SACK blocks ignored: inverted, beyond snd_max, too old */
	uint64_t tcp_sack_recoveries; /**< SACK loss recovery episodes (RFC 6675) entered */
	uint64_t tcp_sack_retrans_segs; /**< segments retransmitted from the SACK scoreboard */
	uint64_t tcp_lost_retrans;      /**< retransmissions detected lost again (SACK) */
	uint64_t tcp_spurious_retrans;  /**< D-SACKs for data we had retransmitted */
	uint64_t tcp_sack_sb_overflow;  /**< SACK ranges forgotten: scoreboard full */
	uint64_t tcp_tlp_probes;        /**< tail loss probes sent (RFC 8985 7, SACK only) */
	uint64_t tcp_tx_blocked; /**< sends stopped by a full device, resumed when it drains */
	uint64_t tcp_tx_cwr;     /**< window reductions for a full device (local congestion) */
	/* SYN cookies (RFC 4987); appended, the offsets above stay put. */
	uint64_t tcp_syncookies_sent;   /**< SYN-ACKs with a cookie: backlog full or no memory */
	uint64_t tcp_syncookies_ok;     /**< connections created from a valid cookie */
	uint64_t tcp_syncookies_failed; /**< ACKs to a listener lately sending cookies that carried
					   none valid (answered with RST) */
	/* HyStart++ (RFC 9406); appended. */
	uint64_t tcp_hystart_css;   /**< entries into conservative slow start (a rising RTT);
				       a slow start that resumed may enter again */
	uint64_t tcp_hystart_exits; /**< slow starts HyStart++ ended (avoidance, no loss first) */
	/* Pacing; appended. */
	uint64_t tcp_paced; /**< sends the pacer held back to a later instant (tcp_pacing) */
	/* SACK compression; appended. */
	uint64_t tcp_sack_held; /**< ACKs that would only have reported more of a SACKed
				   run, held for a later one (tcp_sack_compress) */
};

/** TCP states, numbered as Linux include/net/tcp_states.h. */
enum tide_net_tcp_state {
	TIDE_NET_TCP_ESTABLISHED = 1,
	TIDE_NET_TCP_SYN_SENT,
	TIDE_NET_TCP_SYN_RECV,
	TIDE_NET_TCP_FIN_WAIT1,
	TIDE_NET_TCP_FIN_WAIT2,
	TIDE_NET_TCP_TIME_WAIT,
	TIDE_NET_TCP_CLOSE,
	TIDE_NET_TCP_CLOSE_WAIT,
	TIDE_NET_TCP_LAST_ACK,
	TIDE_NET_TCP_LISTEN,
	TIDE_NET_TCP_CLOSING,
};

/** Connection events (see tide_net_conn_cbs.on_event). */
enum tide_net_event {
	TIDE_NET_EV_CONNECTED = 1, /**< active open completed (reason 0) */
	TIDE_NET_EV_WRITABLE, /**< send space freed after tide_net_send() accepted less than asked
			       */
	TIDE_NET_EV_PEER_CLOSED, /**< peer sent FIN: no more bytes will arrive (reason 0) */
	/**
	 * Terminal: the connection is gone. reason: -ECONNRESET (peer reset),
	 * -ECONNREFUSED (active open refused), -ETIMEDOUT (retransmission or
	 * keepalive limit). The handle stays valid until tide_net_close() or
	 * tide_net_abort(), which the application must still call.
	 */
	TIDE_NET_EV_CLOSED,
};

/** Per-connection callbacks; both are optional. */
struct tide_net_conn_cbs {
	/**
	 * In-order bytes. Copy what you can; return how many bytes you consumed
	 * (0..len). Bytes not consumed stay in the receive buffer (shrinking the
	 * advertised window) and are offered again only after
	 * tide_net_recv_resume(). NULL: bytes accumulate for tide_net_recv().
	 */
	size_t (*on_recv)(struct tide_net_conn *conn, void *arg, const uint8_t *data, size_t len);
	/** State events; see enum tide_net_event. */
	void (*on_event)(struct tide_net_conn *conn, void *arg, enum tide_net_event ev, int reason);
};

/**
 * Accept callback of a listener, made when a handshake completes.
 * Set the connection's callbacks with tide_net_conn_set_cbs() inside it.
 * \return 0 to accept (the application now owns conn and must eventually
 *         close or abort it); -errno to refuse (the stack resets and frees it).
 */
typedef int (*tide_net_accept_fn)(void *arg, struct tide_net_conn *conn);

/** Connection snapshot for tools and tests. */
struct tide_net_conn_info {
	enum tide_net_tcp_state state;
	uint32_t lip, rip;     /**< host byte order */
	uint16_t lport, rport; /**< host byte order */
	uint32_t mss;          /**< payload bytes per segment (options excluded) */
	uint32_t cwnd, ssthresh, snd_wnd, rcv_wnd;
	uint64_t srtt_ns, rto_ns;
	uint32_t snd_queued; /**< bytes queued to send, zero-copy included (unacked + unsent) */
	uint32_t rcv_queued; /**< bytes received in order but not consumed */
	bool ts_ok, ws_ok, sack_ok;
};

/**
 * Fill opts with defaults (documented on each field).
 * \param size  sizeof(*opts) as the caller compiled it.
 * Thread: any.
 */
void tide_net_opts_init(struct tide_net_opts *opts, size_t size);

/**
 * Create a stack. Sends a gratuitous ARP when opts->arp_gratuitous.
 * \param opts  copied; opts->dev_ops must outlive the stack.
 * \param now   monotonic ns.
 * \param[out] out  the stack; untouched on failure.
 * \return 0; -EINVAL missing or out-of-range option; -ENOMEM.
 * Thread: the thread that will own the stack. Ownership: tide_net_stack_destroy().
 */
int tide_net_stack_create(const struct tide_net_opts *opts, uint64_t now,
			  struct tide_net_stack **out);

/**
 * Destroy a stack: frees every connection and listener without sending
 * anything and no callbacks; frees cached and queued TX buffers through
 * free_bufs. Handles held by the application become invalid. NULL is ignored.
 * Thread: owner.
 */
void tide_net_stack_destroy(struct tide_net_stack *stack);

/**
 * Fire due timers (retransmission, persist, delayed ACK, keepalive,
 * TIME_WAIT, ARP retry and expiry). Cheap when nothing is due.
 * \return number of timers fired (0 = idle).
 * Thread: owner.
 */
int tide_net_timers_run(struct tide_net_stack *stack, uint64_t now);

/**
 * Earliest time tide_net_timers_run() may have work (UINT64_MAX: none): now (0) while
 * frames a full device refused, connections it stopped or zero-copy completions are
 * pending (timers_run offers and polls them), else the earliest protocol timer.
 * Thread: owner.
 */
uint64_t tide_net_next_timer(const struct tide_net_stack *stack);

/**
 * Look up the ARP cache. \return 0 and mac set; -ENOENT not resolved.
 * Thread: owner.
 */
int tide_net_arp_lookup(const struct tide_net_stack *stack, uint32_t ip, uint8_t mac[6]);

/**
 * Listen on a local port.
 * \param backlog  connections allowed in SYN_RECV at once (1..65535). Further SYNs
 *                 (tcp_listen_overflow), and SYNs that find no memory, are answered
 *                 with a SYN cookie and keep nothing (RFC 4987 3.6): the ACK that
 *                 returns a valid cookie creates the connection, which then has no
 *                 window scaling or SACK unless the peer offered timestamps. A
 *                 half-open connection gives its slot up after 5 SYN-ACK retries.
 * \param accept   called on the owner thread when a handshake completes.
 * \param[out] out the listener.
 * \return 0; -EINVAL port 0, backlog 0 or accept NULL; -EADDRINUSE already
 *         listening on port; -ENOMEM.
 * Thread: owner. Ownership: tide_net_listener_close().
 */
int tide_net_listen(struct tide_net_stack *stack, uint16_t port, uint32_t backlog,
		    tide_net_accept_fn accept, void *arg, struct tide_net_listener **out);

/**
 * Stop listening; handshakes in progress are reset. Accepted connections are
 * not affected. NULL is ignored. Thread: owner.
 */
void tide_net_listener_close(struct tide_net_listener *l, uint64_t now);

/**
 * Open a connection (sends a SYN, or queues it behind ARP resolution).
 * \param ip,port  remote address and port, host byte order.
 * \param cbs      callbacks (copied; may be NULL), arg passed to them.
 * \param[out] out the connection; TIDE_NET_EV_CONNECTED or TIDE_NET_EV_CLOSED follows.
 * \return 0; -EINVAL ip or port 0; -EADDRNOTAVAIL no free local port;
 *         -ENETUNREACH off-subnet without gateway; -ENOMEM; an error from port_pick.
 * Thread: owner. Ownership: the application closes or aborts the handle.
 */
int tide_net_connect(struct tide_net_stack *stack, uint32_t ip, uint16_t port,
		     const struct tide_net_conn_cbs *cbs, void *arg, uint64_t now,
		     struct tide_net_conn **out);

/** Replace the callbacks and their argument (cbs may be NULL). Thread: owner. */
void tide_net_conn_set_cbs(struct tide_net_conn *conn, const struct tide_net_conn_cbs *cbs,
			   void *arg);

/**
 * Copy up to len bytes into the send buffer and transmit what the windows allow.
 * \return bytes accepted (0..len; less than len when the buffer is full, and
 *         TIDE_NET_EV_WRITABLE follows once space frees up); -EPIPE after close or
 *         when the connection is gone. Bytes sent during the handshake are queued and
 *         leave when it completes.
 * Thread: owner (callbacks included).
 */
ssize_t tide_net_send(struct tide_net_conn *conn, const void *data, size_t len, uint64_t now);

/**
 * Completion of a zero-copy send (tide_net_send_zc()), made on the owner
 * thread from inside a tide_net_* call on the stack (any entry point,
 * tide_net_timers_run() included). From the moment it starts, the stack and
 * the device no longer reference the memory: the caller may reuse or free
 * it. It may call any tide_net_* function on the stack except
 * tide_net_stack_destroy(); completions made by tide_net_stack_destroy()
 * itself must not call into the stack at all.
 * \param cookie  the value passed to tide_net_send_zc()
 * \param status  0: every byte was acknowledged by the peer. -ECONNABORTED
 *                (tide_net_abort(), or the stack was destroyed), -ECONNRESET,
 *                -ETIMEDOUT, -ECONNREFUSED: the connection ended first; some
 *                bytes may not have been delivered.
 */
typedef void (*tide_net_zc_done_fn)(void *cookie, int status);

/** Most bytes a connection may have queued through tide_net_send_zc() at once. */
#define TIDE_NET_ZC_MAX_QUEUED (1u << 29)

/**
 * Zero-copy send: queue len bytes at data behind everything sent before on
 * this connection (tide_net_send() and tide_net_send_zc() calls may be
 * mixed freely; the peer receives the bytes in call order). The bytes are
 * not copied into the send buffer: each frame references them through
 * tide_net_dev_ops.tx_attach when the device has it, and copies them into
 * the frame when it does not (or for pieces too small to be worth a
 * reference).
 *
 * Contract: the memory must stay valid and unmodified until done(cookie, ...)
 * is called. done is called exactly once, on the owner thread, after every
 * byte was acknowledged by the peer AND the device released every frame
 * that referenced it (retransmitted copies included); or, if the connection
 * ends first (abort, reset, timeout), with a negative status once the
 * device released every frame. Completions of one connection come in call
 * order. The device may release frames on another thread (after a peer on
 * another lcore consumed them, say): the completion then waits for the next
 * tide_net_* call on the stack, so keep calling tide_net_timers_run() while
 * sends are outstanding. tide_net_close() does not cancel them: they
 * complete when acknowledged. tide_net_stack_destroy() calls done(cookie,
 * -ECONNABORTED) for sends the device no longer references; sends a device
 * still holds at that point get no completion, and their memory must stay
 * valid until the device is closed.
 *
 * \param data,len  the bytes; len 1..TIDE_NET_ZC_MAX_QUEUED
 * \param done      completion callback (required); cookie is its argument
 * \return len (all bytes are accepted, or none); -EINVAL len 0 or done NULL;
 *         -EPIPE after close or when the connection is gone (done is not
 *         called); -EAGAIN the connection already has TIDE_NET_ZC_MAX_QUEUED
 *         bytes queued (TIDE_NET_EV_WRITABLE follows when acknowledgments
 *         free space); -ENOMEM (done is not called).
 * Thread: owner (callbacks included).
 */
ssize_t tide_net_send_zc(struct tide_net_conn *conn, const void *data, size_t len,
			 tide_net_zc_done_fn done, void *cookie, uint64_t now);

/**
 * Zero-copy sends of the stack not yet completed (queued, in flight, or
 * waiting for the device to release frames). Thread: owner.
 */
size_t tide_net_zc_pending(const struct tide_net_stack *stack);

/** Free space in the send buffer (0 when not sendable). Thread: owner. */
size_t tide_net_send_space(const struct tide_net_conn *conn);

/**
 * Copy up to len received in-order bytes out of the receive buffer (for
 * callers without on_recv, or after on_recv consumed less than offered).
 * \return bytes copied (0 when none). Thread: owner.
 */
size_t tide_net_recv(struct tide_net_conn *conn, void *buf, size_t len, uint64_t now);

/**
 * Offer buffered bytes to on_recv again and send a window update if the
 * window opened. Thread: owner (not from inside on_recv).
 */
void tide_net_recv_resume(struct tide_net_conn *conn, uint64_t now);

/**
 * Orderly close: queued bytes are still sent, then FIN. The handle is
 * released: no further callbacks, do not use it again. The stack finishes
 * the shutdown (FIN_WAIT, TIME_WAIT) on its own. Bytes that arrive after
 * close are discarded (tcp_rx_orphan_bytes).
 * Thread: owner; may be called from the connection's own callbacks.
 */
void tide_net_close(struct tide_net_conn *conn, uint64_t now);

/**
 * Abortive close: send RST (when synchronized), drop buffers, release the
 * handle. Thread: owner; may be called from the connection's callbacks.
 */
void tide_net_abort(struct tide_net_conn *conn, uint64_t now);

/** Snapshot of a connection. Thread: owner. */
void tide_net_conn_info(const struct tide_net_conn *conn, struct tide_net_conn_info *info);

/** "ESTABLISHED", "SYN_SENT", ... ("?" for unknown values). Thread: any. */
const char *tide_net_tcp_state_name(enum tide_net_tcp_state state);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_NET_H */
