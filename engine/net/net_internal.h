/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to engine/net: wire formats, the stack and connection bodies,
 * and the functions the layers call on each other. Only the engine/net sources and
 * their unit tests include this. TCP names follow Linux (tcp_v4_rcv,
 * tcp_rcv_state_process, tcp_ack, tcp_data_queue, tcp_write_xmit, ...).
 *
 * Addresses and ports are host byte order everywhere except inside wire
 * headers. Times are monotonic nanoseconds.
 */
#ifndef NET_INTERNAL_H
#define NET_INTERNAL_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>

#include "tide_net.h"

#define NET_PACKED __attribute__((packed))

/* ---- wire formats ---------------------------------------------------- */

#define ETH_ALEN       6
#define ETH_HLEN       14
#define ETH_ZLEN       60 /* minimum frame without FCS; shorter TX frames are padded */
#define ETH_P_IP       0x0800
#define ETH_P_ARP      0x0806
#define ETH_P_IPV6     0x86dd
#define IP_HLEN        20
#define IPPROTO_ICMP_  1
#define IPPROTO_TCP_   6
#define IP_DF          0x4000
#define IP_MF          0x2000
#define IP_OFFMASK     0x1fff
#define IP_TTL_DEFAULT 64
#define TCP_HLEN       20
#define TCP_MAX_OPTLEN 40
#define NET_HDRS_LEN   (ETH_HLEN + IP_HLEN) /* L4 header offset in a built frame */

struct net_eth_hdr {
	uint8_t dst[ETH_ALEN];
	uint8_t src[ETH_ALEN];
	uint16_t type; /* ethertype, network order */
} NET_PACKED;
static_assert(sizeof(struct net_eth_hdr) == 14, "eth header");

struct net_arp_hdr {
	uint16_t htype; /* 1 = Ethernet */
	uint16_t ptype; /* 0x0800 */
	uint8_t hlen;   /* 6 */
	uint8_t plen;   /* 4 */
	uint16_t oper;  /* 1 request, 2 reply */
	uint8_t sha[ETH_ALEN];
	uint32_t spa; /* network order */
	uint8_t tha[ETH_ALEN];
	uint32_t tpa; /* network order */
} NET_PACKED;
static_assert(sizeof(struct net_arp_hdr) == 28, "arp header");

struct net_ipv4_hdr {
	uint8_t ver_ihl; /* version << 4 | header length in words */
	uint8_t tos;
	uint16_t tot_len;
	uint16_t id;
	uint16_t frag_off; /* flags (DF, MF) and fragment offset */
	uint8_t ttl;
	uint8_t proto;
	uint16_t csum;
	uint32_t saddr;
	uint32_t daddr;
} NET_PACKED;
static_assert(sizeof(struct net_ipv4_hdr) == 20, "ipv4 header");

struct net_icmp_hdr {
	uint8_t type; /* 8 echo request, 0 echo reply */
	uint8_t code;
	uint16_t csum;
	uint16_t id;
	uint16_t seq;
} NET_PACKED;
static_assert(sizeof(struct net_icmp_hdr) == 8, "icmp header");

struct net_tcp_hdr {
	uint16_t sport;
	uint16_t dport;
	uint32_t seq;
	uint32_t ack;
	uint8_t doff;  /* data offset in words << 4; low nibble reserved */
	uint8_t flags; /* TCPHDR_* */
	uint16_t window;
	uint16_t csum;
	uint16_t urg;
} NET_PACKED;
static_assert(sizeof(struct net_tcp_hdr) == 20, "tcp header");

#define TCPHDR_FIN 0x01
#define TCPHDR_SYN 0x02
#define TCPHDR_RST 0x04
#define TCPHDR_PSH 0x08
#define TCPHDR_ACK 0x10
#define TCPHDR_URG 0x20

#define TCPOPT_EOL       0
#define TCPOPT_NOP       1
#define TCPOPT_MSS       2
#define TCPOPT_WINDOW    3
#define TCPOPT_SACK_PERM 4
#define TCPOPT_SACK      5
#define TCPOPT_TIMESTAMP 8

/* ---- checksums (cksum.c) --------------------------------------------- */

/** One's-complement sum of buf[0..len) added to sum (not folded). */
uint32_t net_cksum_add(uint32_t sum, const void *buf, size_t len);
/** Fold a partial sum to 16 bits and complement: the value to store. */
uint16_t net_cksum_fold(uint32_t sum);
/** net_cksum_add for bytes that start at offset off of the summed stream (odd offsets swap). */
uint32_t net_cksum_add_at(uint32_t sum, const void *buf, size_t len, size_t off);
/** Internet checksum of buf (RFC 1071); 0 over a buffer that embeds a valid checksum. */
uint16_t net_cksum(const void *buf, size_t len);
/** Partial sum of the IPv4 pseudo-header; saddr/daddr in network order. */
uint32_t net_cksum_pseudo(uint32_t saddr_be, uint32_t daddr_be, uint8_t proto, uint16_t l4len);

/* ---- stack ----------------------------------------------------------- */

#define NET_TX_BURST 32 /* frames queued before a tx_burst call */
/* In-order segments one ACK may cover within an RX burst (the ACK goes at
 * the burst's end, or at once past this): about GRO's 64 KiB at MTU 9000. */
#define NET_ACK_STRETCH 8
/* SACK compression (tcp_sack_compress): segments that only extend the run the
 * last SACK reported, at most, before an ACK goes (Linux's tcp_comp_sack_nr),
 * and the longest wait for one (its tcp_comp_sack_delay_ns). */
#define NET_SACK_COMPRESS_SEGS   44
#define NET_SACK_COMPRESS_MAX_NS (1000 * NS_PER_US)
#define NET_ARP_SLOTS            64 /* ARP cache entries (linear scan; hit cache in front) */
/* Frames queued per unresolved next hop, oldest dropped past it: enough for the
 * SYNs of a burst of connects (16 at once lost 12 SYNs to a 1 s retransmission
 * with 4); Linux keeps about 100 frames (unres_qlen_bytes). 64 hops x 32 frames
 * bounds what the cache can hold of the device's buffers. */
#define NET_ARP_PENDING  32
#define NET_CONN_BUCKETS 1024 /* connection hash buckets (power of two) */
/* Received frames the stack may keep at once (out-of-order payload held in
 * place, not copied); past it, out-of-order payload is copied. Bounded well
 * below any RX pool so the device never starves for buffers. */
#define NET_RX_KEEP_MAX 256

enum arp_state { ARP_FREE = 0, ARP_INCOMPLETE, ARP_REACHABLE };

struct net_arp_entry {
	uint32_t ip;
	uint8_t mac[ETH_ALEN];
	uint8_t state;   /* enum arp_state */
	uint8_t retries; /* requests sent while INCOMPLETE */
	uint8_t npend;
	uint64_t deadline; /* REACHABLE: expiry; INCOMPLETE: next retry */
	struct tide_net_buf pend[NET_ARP_PENDING];
};

struct tide_net_listener {
	struct tide_net_stack *stack;
	LIST_ENTRY(tide_net_listener) link;
	uint16_t port;
	uint32_t backlog;
	uint32_t pending; /* SYN_RECV children */
	tide_net_accept_fn accept;
	void *arg;
	/* Last SYN answered with a cookie (tcp_syncookie.c): an ACK is checked as
	 * one only within TCP_SYNCOOKIE_VALID_NS of it. */
	uint64_t cookie_sent_at;
	bool cookie_sent;
};

/*
 * One tide_net_send_zc() call (tcp_zc.c). refs counts the stack's own
 * reference (dropped at completion) plus one per frame segment the device
 * holds; the device drops its references from any thread, so refs is
 * atomic and the last holder frees the record.
 */
struct net_zc {
	TAILQ_ENTRY(net_zc) link; /* stack->zc_wait once the protocol is done with it */
	const uint8_t *data;
	uint32_t len;
	int status;       /* completion status, set when it enters zc_wait */
	uint64_t conn_id; /* completions of one connection keep their order */
	tide_net_zc_done_fn done;
	void *cookie;
	atomic_uint refs;
};
TAILQ_HEAD(net_zc_list, net_zc);

/*
 * A run of the send queue (tcp_zc.c): bytes copied into sbuf, or a piece of
 * a zero-copy send. Only kept while zero-copy data is queued; otherwise
 * sbuf holds the whole queue and the chunk array is empty.
 */
struct tcp_chunk {
	uint32_t seq, len;
	uint32_t pos;      /* copy: sbuf byte counter of seq; zero-copy: offset in zc->data */
	struct net_zc *zc; /* NULL: copied bytes */
};

struct tcp_cc_ops;
LIST_HEAD(tcp_conn_list, tide_net_conn);
TAILQ_HEAD(tcp_conn_tailq, tide_net_conn);

struct tide_net_stack {
	struct tide_net_opts o;
	const struct tide_net_dev_ops *ops;
	void *dev;
	struct tide_net_stats st;
	uint16_t frame_cap; /* mtu + ETH_HLEN */
	uint16_t ip_id;

	/* Built frames waiting for tx_burst, and a cache of empty TX buffers. */
	uint16_t txq_n, cache_n;
	struct tide_net_buf txq[NET_TX_BURST];
	struct tide_net_buf cache[NET_TX_BURST];

	struct net_arp_entry arp[NET_ARP_SLOTS];
	unsigned arp_hit; /* last slot that resolved */

	struct tcp_conn_list conn_hash[NET_CONN_BUCKETS];
	struct tcp_conn_tailq conns;      /* every live connection (timer scan) */
	struct tcp_conn_tailq graveyard;  /* freed at the end of the entry point */
	struct tcp_conn_tailq tx_blocked; /* data to send, stopped by a full device */
	struct tcp_conn_tailq ack_owed;   /* in-order data to ACK at the end of this RX burst */
	bool in_rx_burst;                 /* tide_net_rx_burst is feeding frames */
	LIST_HEAD(, tide_net_listener) listeners;
	uint64_t timer_next; /* lower bound of every armed deadline */
	unsigned busy;       /* public entry points in progress (callbacks re-enter) */
	uint16_t next_eport;
	uint64_t isn_key[2];   /* RFC 6528 secret: SipHash-2-4 key, random unless tests fix it */
	uint64_t chack_second; /* start of the challenge-ACK rate window */
	uint32_t chack_count;

	/* Zero-copy sends (tcp_zc.c). */
	struct net_zc_list zc_wait; /* protocol done, completion not yet made */
	size_t zc_pending;          /* records not completed (queued, in flight, waiting) */
	bool zc_reaping;            /* net_zc_reap is making completions */
	uint64_t next_conn_id;

	/*
	 * The received frame being processed (tide_net_rx_burst): its device
	 * handle, or NULL when the caller offers none. TCP input sets rx_kept to
	 * keep the frame (its payload queued out of order, in place); the burst
	 * then does not free it, and whoever drops the queued segment frees the
	 * handle through free_bufs. rx_kept_n counts the frames kept.
	 */
	void *rx_handle;
	bool rx_kept;
	uint32_t rx_kept_n;

	/* Timeouts found spurious and undone (Eifel, tcp_rto_undo); not yet a public counter. */
	uint64_t rto_undone;

	/* Unit-test hook: when set, every new connection's ISN is isn_fixed. */
	bool isn_fixed_on;
	uint32_t isn_fixed;
};

/** A TX buffer able to hold frame_cap bytes. \return 0; -ENOBUFS (counted). */
int net_txbuf_get(struct tide_net_stack *s, struct tide_net_buf *b);
/** Give an unsent TX buffer back (cache or free_bufs). */
void net_txbuf_put(struct tide_net_stack *s, struct tide_net_buf *b);
/** Queue a complete frame for tx_burst (flushes when the burst is full). */
void net_tx_enqueue(struct tide_net_stack *s, struct tide_net_buf *b);
/** Hand queued frames to the device. */
void net_tx_flush(struct tide_net_stack *s);
/**
 * True when the device refused a whole burst and still does: a sender
 * should stop building frames (they would be dropped) and wait on
 * stack->tx_blocked (tcp_tx_block) for net_tx_resume.
 */
static inline bool
net_tx_full(struct tide_net_stack *s)
{
	if (s->txq_n < NET_TX_BURST) {
		return false;
	}
	net_tx_flush(s);
	return s->txq_n == NET_TX_BURST;
}
/** Offer the device's room to connections stopped by net_tx_full, in order. Inside an entry. */
void net_tx_resume(struct tide_net_stack *s, uint64_t now);
/** Note a timer deadline so tide_net_timers_run() does not sleep past it. */
static inline void
net_timer_note(struct tide_net_stack *s, uint64_t deadline)
{
	if (deadline != 0 && deadline < s->timer_next) {
		s->timer_next = deadline;
	}
}

/* eth.c */
void net_eth_input(struct tide_net_stack *s, const uint8_t *data, uint16_t len, uint16_t flags,
		   uint64_t now);
/** Fill the Ethernet header and queue the frame (len = whole frame length). */
void net_eth_output(struct tide_net_stack *s, struct tide_net_buf *b, const uint8_t *dst,
		    uint16_t type);

/* arp.c */
void net_arp_input(struct tide_net_stack *s, const uint8_t *data, uint16_t len, uint64_t now);
/** Resolve next hop for IPv4 frame b (len set) and send it, or queue it while resolving. */
void net_arp_output(struct tide_net_stack *s, struct tide_net_buf *b, uint32_t nexthop,
		    uint64_t now);
int net_arp_send(struct tide_net_stack *s, uint16_t oper, const uint8_t *tha, uint32_t tpa,
		 const uint8_t *eth_dst);
int net_arp_timers(struct tide_net_stack *s, uint64_t now);
void net_arp_destroy(struct tide_net_stack *s);

/* ipv4.c */
void net_ipv4_input(struct tide_net_stack *s, const uint8_t *data, uint16_t len, uint16_t flags,
		    uint64_t now);
/**
 * Fill the IPv4 header of frame b (L4 data of l4len bytes already at
 * NET_HDRS_LEN) and send it toward dst. Returns -ENETUNREACH when dst is
 * off-subnet with no gateway (frame freed, counted), else 0.
 */
int net_ipv4_output(struct tide_net_stack *s, struct tide_net_buf *b, uint32_t dst, uint8_t proto,
		    uint16_t l4len, uint64_t now);
/** Next hop for dst, 0 when unreachable. */
uint32_t net_ipv4_nexthop(const struct tide_net_stack *s, uint32_t dst);

/* icmp.c */
void net_icmp_input(struct tide_net_stack *s, const struct net_ipv4_hdr *ip, const uint8_t *data,
		    uint16_t len, uint16_t flags, uint64_t now);

/* ---- TCP ------------------------------------------------------------- */

#define TCP_ESTABLISHED TIDE_NET_TCP_ESTABLISHED
#define TCP_SYN_SENT    TIDE_NET_TCP_SYN_SENT
#define TCP_SYN_RECV    TIDE_NET_TCP_SYN_RECV
#define TCP_FIN_WAIT1   TIDE_NET_TCP_FIN_WAIT1
#define TCP_FIN_WAIT2   TIDE_NET_TCP_FIN_WAIT2
#define TCP_TIME_WAIT   TIDE_NET_TCP_TIME_WAIT
#define TCP_CLOSE       TIDE_NET_TCP_CLOSE
#define TCP_CLOSE_WAIT  TIDE_NET_TCP_CLOSE_WAIT
#define TCP_LAST_ACK    TIDE_NET_TCP_LAST_ACK
#define TCP_LISTEN      TIDE_NET_TCP_LISTEN
#define TCP_CLOSING     TIDE_NET_TCP_CLOSING

#define TCPF_ESTABLISHED (1u << TCP_ESTABLISHED)
#define TCPF_SYN_SENT    (1u << TCP_SYN_SENT)
#define TCPF_SYN_RECV    (1u << TCP_SYN_RECV)
#define TCPF_FIN_WAIT1   (1u << TCP_FIN_WAIT1)
#define TCPF_FIN_WAIT2   (1u << TCP_FIN_WAIT2)
#define TCPF_TIME_WAIT   (1u << TCP_TIME_WAIT)
#define TCPF_CLOSE       (1u << TCP_CLOSE)
#define TCPF_CLOSE_WAIT  (1u << TCP_CLOSE_WAIT)
#define TCPF_LAST_ACK    (1u << TCP_LAST_ACK)
#define TCPF_LISTEN      (1u << TCP_LISTEN)
#define TCPF_CLOSING     (1u << TCP_CLOSING)

/* States in which our side may still transmit data. */
#define TCPF_CAN_SEND \
	(TCPF_ESTABLISHED | TCPF_CLOSE_WAIT | TCPF_FIN_WAIT1 | TCPF_CLOSING | TCPF_LAST_ACK)
/* States in which peer data is accepted (RFC 9293 3.10.7.4, seventh step). */
#define TCPF_CAN_RECV (TCPF_ESTABLISHED | TCPF_FIN_WAIT1 | TCPF_FIN_WAIT2)

/* Sequence arithmetic modulo 2^32 (RFC 9293 3.4), Linux names. */
static inline bool
before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}
static inline bool
after(uint32_t a, uint32_t b)
{
	return before(b, a);
}
/* lo <= x <= hi */
static inline bool
between(uint32_t x, uint32_t lo, uint32_t hi)
{
	return hi - lo >= x - lo;
}

#define TCP_SACK_WIRE_MAX 4  /* blocks one SACK option can carry (40 bytes of options) */
#define TCP_SB_MAX        32 /* SACKed ranges a sender remembers per connection */
#define TCP_RTX_LOG_MAX   64 /* recovery retransmissions watched for a second loss */
#define TCP_DUPTHRESH     3  /* RFC 6675 DupThresh */

/** A SACK block, [start, end) in sequence space. */
struct tcp_sack_blk {
	uint32_t start, end;
};

/** Options of one segment, parsed once. */
struct tcp_opts {
	uint16_t mss;
	uint8_t wscale;
	bool has_mss, has_wscale, sack_ok, has_ts;
	uint8_t num_sacks; /* SACK blocks, as sent (not validated) */
	uint32_t tsval, tsecr;
	struct tcp_sack_blk sacks[TCP_SACK_WIRE_MAX];
};

/** A retransmission made during SACK recovery: [start, end) sent when snd_max was mark. */
struct tcp_rtx_ent {
	uint32_t start, end, mark;
	bool relost;   /* detected lost again; waiting to be sent once more */
	uint64_t sent; /* ns */
};

/** One received segment, parsed once and shared by every state's handling. */
struct tcp_seg {
	uint32_t seq;
	uint32_t ack;
	uint32_t wnd; /* raw header window (unscaled) */
	uint8_t flags;
	const uint8_t *payload;
	uint32_t len;     /* payload bytes */
	uint32_t seg_len; /* len + SYN + FIN (sequence space used) */
	struct tcp_opts opts;
	uint32_t saddr, daddr; /* host order */
	uint16_t sport, dport;
};

/**
 * Out-of-order receive queue entry: [seq, seq + len) at ptr, which is either
 * data[] (copied) or the payload inside a received frame the stack kept
 * (handle, freed with the entry through free_bufs).
 */
struct tcp_ooo {
	struct tcp_ooo *next;
	uint32_t seq;
	uint32_t len;
	const uint8_t *ptr;
	void *handle;
	uint8_t data[];
};

/** A byte ring (send or receive buffer). */
struct tcp_ring {
	uint8_t *buf;
	uint32_t cap, head, len;
};

/** Congestion control. Loss recovery (NewReno) is common code in tcp_input.c. */
struct tcp_cc_ops {
	const char *name;
	void (*init)(struct tide_net_conn *c);
	/** New data acked outside recovery: grow cwnd (slow start / avoidance). */
	void (*cong_avoid)(struct tide_net_conn *c, uint32_t acked, uint64_t now);
	/** Loss detected: return the new ssthresh. */
	uint32_t (*ssthresh)(struct tide_net_conn *c, uint64_t now);
	/** Optional: acked bytes of new data were cumulatively acknowledged (every such
	 *  ACK, in recovery too), before the window is adjusted. */
	void (*on_ack)(struct tide_net_conn *c, uint32_t acked, uint64_t now);
};
extern const struct tcp_cc_ops tcp_newreno_ops;
extern const struct tcp_cc_ops tcp_cubic_ops;
extern const struct tcp_cc_ops tcp_westwood_ops;

/** CUBIC state (RFC 9438), in cc_priv. */
struct tcp_cubic {
	uint64_t epoch_start; /* ns; 0 = no epoch */
	uint32_t w_max;       /* bytes */
	uint32_t k_us;        /* time to reach w_max */
	uint32_t w_est;       /* Reno-friendly estimate, bytes */
	uint32_t ack_bytes;
};

/** Westwood+ state (Mascolo et al., 2001; Grieco and Mascolo, 2004), in cc_priv. */
struct tcp_westwood {
	uint64_t win_start; /* ns: start of the current sampling interval; 0 = none yet */
	uint64_t bk;        /* bytes acknowledged since win_start */
	uint64_t bw_ns;     /* first filter stage, bytes per second */
	uint64_t bw;        /* the bandwidth estimate, bytes per second (second stage) */
	uint64_t reno_acc;  /* NewReno's byte counter (avoidance) */
};

/**
 * HyStart++ (RFC 9406) state, tcp_cc.c. The first TCP_HS_SAMPLES segments sent in
 * each round are timed (seq: their end; at: when sent) in a ring that holds two
 * rounds' worth (a round's stamps are acknowledged in the next round).
 */
#define TCP_HS_SAMPLES 8
#define TCP_HS_RING    (2 * TCP_HS_SAMPLES)
struct tcp_hystart {
	uint32_t window_end; /* the round ends when this is acknowledged */
	uint32_t seq[TCP_HS_RING];
	uint64_t at[TCP_HS_RING];
	uint8_t head, n;                      /* the ring's oldest stamp, stamps in it */
	uint8_t taken;                        /* stamps taken this round */
	uint8_t samples;                      /* RTT samples this round */
	uint8_t css_rounds;                   /* rounds completed in conservative slow start */
	bool css;                             /* in conservative slow start */
	uint64_t cur_min, last_min, css_base; /* ns; UINT64_MAX = none */
};

struct tide_net_conn {
	struct tide_net_stack *stack;
	LIST_ENTRY(tide_net_conn) hash_link;
	TAILQ_ENTRY(tide_net_conn) link;       /* stack->conns, until reaped */
	TAILQ_ENTRY(tide_net_conn) grave_link; /* stack->graveyard once dead */
	TAILQ_ENTRY(tide_net_conn) txb_link;   /* stack->tx_blocked while tx_blocked */
	TAILQ_ENTRY(tide_net_conn) ack_link;   /* stack->ack_owed while ack_owed */
	struct tide_net_listener *listener;    /* passive open still in SYN_RECV */

	uint32_t lip, rip;
	uint16_t lport, rport;
	uint8_t state;
	bool hashed;
	bool app_owned;  /* the application holds the handle */
	bool dead;       /* in the graveyard */
	bool active;     /* we sent the first SYN */
	bool fin_queued; /* application closed: FIN follows the data */
	bool ts_ok, ws_ok, sack_ok;
	bool ack_now;    /* send an ACK after this input */
	bool want_write; /* send() accepted less than asked: WRITABLE due */
	bool rcv_held;   /* on_recv consumed less than offered */
	bool ooo_fin;    /* a FIN was seen past a hole, at ooo_fin_seq */
	bool rtt_timing;
	bool in_recovery;
	bool closed_notified;
	bool tx_blocked; /* on stack->tx_blocked: resumed when the device takes frames */
	bool ack_owed;   /* on stack->ack_owed: one ACK at the end of the RX burst */

	/* send sequence space (RFC 9293 3.3.1) */
	uint32_t iss, snd_una, snd_nxt;
	uint32_t snd_max; /* highest sequence sent + 1 (snd_nxt rewinds on RTO) */
	uint32_t snd_wnd, max_snd_wnd, snd_wl1, snd_wl2;
	uint32_t sbuf_seq; /* sequence of the first queued byte */
	uint32_t snd_len;  /* bytes queued (copied + zero-copy) from sbuf_seq */
	struct tcp_ring sbuf;
	uint32_t sbuf_ctr;        /* sbuf byte counter of sbuf's head (tcp_chunk.pos) */
	struct tcp_chunk *chunks; /* ring of ch_cap; ch_n in use from ch_head */
	uint32_t ch_cap, ch_head, ch_n;
	uint32_t zc_queued; /* zero-copy bytes queued */
	uint64_t id;        /* stack-unique, for completion order */
	uint8_t snd_wscale, rcv_wscale;
	uint16_t mss;      /* payload per segment, timestamp option deducted */
	uint16_t peer_mss; /* from the peer's SYN (536 when absent) */

	/* receive sequence space */
	uint32_t irs, rcv_nxt;
	uint32_t rcv_adv;   /* right edge last advertised */
	uint32_t rcv_acked; /* ACK field of the latest segment sent with ACK */
	struct tcp_ring rbuf;
	struct tcp_ooo *ooo;
	uint32_t ooo_n;
	/* The last out-of-order entry and the start of the run it ends, or NULL
	 * when not known (tcp_ooo_tail recomputes it): data mostly arrives past
	 * the last entry, and the newest SACK block is mostly that run, so the
	 * per-segment work does not walk a queue of hundreds of entries. */
	struct tcp_ooo *ooo_tail;
	uint32_t ooo_tail_run;
	uint32_t ooo_fin_seq;
	uint8_t delack_segs;
	uint8_t sack_segs; /* out-of-order segments since the last ACK, SACKed by the next */
	bool sack_owed;    /* the ACK owed at the RX burst's end reports out-of-order growth */

	/* RFC 7323 */
	uint32_t ts_off; /* added to the clock in every TSval (7.1), a keyed hash of the 4-tuple */
	uint32_t ts_recent;
	uint32_t ts_last; /* highest TSval sent (tcp_tsval_at) */
	bool ts_sent;

	/* RFC 6298 */
	uint64_t srtt, rttvar, rto; /* ns */
	uint64_t rtt_min;           /* ns: the least RTT sample so far; 0 = none */
	uint64_t rtt_last;          /* ns: the latest RTT sample; 0 = none */
	uint32_t rtt_seq;
	uint64_t rtt_start;
	uint8_t backoff;
	uint8_t retries;
	uint8_t probes;      /* zero-window probes since the window closed */
	uint8_t probes_out;  /* of those, sent since the peer last acknowledged anything */
	uint8_t keep_probes; /* unanswered keepalive probes */

	/* congestion control */
	uint32_t cwnd, ssthresh, recover, dupacks;
	/* RFC 7661 (cwnd validation), simplified as Linux does: the window
	 * grows only while it limits what is sent. max_flight is the most sent
	 * and unacknowledged since cwnd_mark was acknowledged (about one RTT);
	 * cwnd_limited says a send stopped because of cwnd in that time. */
	uint32_t max_flight, cwnd_mark;
	/* RFC 6937 proportional rate reduction, during SACK recovery: bytes the
	 * receiver got since it began (prr_delivered), bytes sent since (prr_out),
	 * and the flight when it began (recover_fs). */
	uint32_t prr_delivered, prr_out, recover_fs;
	uint32_t cwr_mark; /* window reduced for a full device until this is acked */
	bool cwnd_limited;
	struct tcp_hystart hs;
	const struct tcp_cc_ops *cc;
	union {
		struct tcp_cubic cubic;
		struct tcp_westwood westwood;
		uint64_t raw[6];
	} cc_priv;

	/*
	 * SACK sender (tcp_sack.c): SACKed ranges above snd_una, sorted and
	 * disjoint (never adjacent), with RFC 6675 HighRxt. loss_state is the
	 * recovery that follows an RTO: every unSACKed byte below recover is lost.
	 */
	struct tcp_sack_blk sb[TCP_SB_MAX];
	uint8_t sb_n;
	bool loss_state;
	uint32_t high_rxt;
	/*
	 * RACK by time for original transmissions (RFC 8985 6.2, simplified):
	 * data sent before data the peer SACKed is lost once that SACK is a
	 * reordering window old, however few segments were SACKed (DupThresh
	 * never comes with a window of two or three). Below rack_lost every
	 * unSACKed byte is lost; rack_seq is the next such edge, SACKed at
	 * rack_seen and waiting for its window (rack_seen 0: none waits).
	 */
	uint32_t rack_lost, rack_seq;
	uint64_t rack_seen;
	uint32_t rtx_high; /* end of the latest retransmission (spurious-retransmit check) */
	struct tcp_rtx_ent rtx[TCP_RTX_LOG_MAX];
	uint8_t rtx_n;

	/*
	 * SACK receiver: sequence numbers of the latest out-of-order arrivals,
	 * newest first (the first block reports the newest, RFC 2018 4), and a
	 * D-SACK (RFC 2883) owed to the next ACK.
	 */
	uint32_t sack_anchor[TCP_SACK_WIRE_MAX];
	uint8_t sack_anchor_n;
	bool dsack_pending;
	struct tcp_sack_blk dsack;

	/*
	 * Spurious timeout detection (Eifel, RFC 3522) and response (RFC 4015),
	 * timestamp connections only: the TSval of the episode's first timeout
	 * retransmission and the window before it. An ACK that advances snd_una
	 * while echoing an older TSval acknowledges the original transmission:
	 * the timeout was spurious (a peer or link briefly stalled), so the
	 * window is restored and the rest of the flight is not resent.
	 */
	bool rto_undo;
	uint32_t rto_tsval;
	uint32_t undo_cwnd, undo_ssthresh;

	/* timers: absolute ns deadlines, 0 = not armed */
	uint64_t t_rto;     /* retransmission (SYN included) */
	uint64_t t_persist; /* zero-window probe */
	uint64_t t_delack;
	uint64_t t_keep;
	uint64_t t_wait; /* TIME_WAIT, orphaned FIN_WAIT_2 */
	uint64_t t_tlp;  /* tail loss probe (SACK connections) */
	uint64_t t_rack; /* RACK reordering window ends (SACK connections) */
	uint64_t t_pace; /* the pacer lets the next data segment go (tcp_pacing) */
	/* Pacing: the instant the next data segment is due; 0 = at once. */
	uint64_t pace_next;
	bool tlp_done; /* the episode's probes are spent, or the RTO fired, since new data was
			  last acknowledged or SACKed: no probe until it is (RFC 8985 7.3) */
	uint8_t tlp_n; /* probes sent in this episode (tcp_tlp_fire) */

	struct tide_net_conn_cbs cbs;
	void *arg;
};

/* tcp_conn.c */
struct tide_net_conn *tcp_lookup(struct tide_net_stack *s, uint32_t lip, uint16_t lport,
				 uint32_t rip, uint16_t rport);
struct tide_net_listener *tcp_lookup_listener(struct tide_net_stack *s, uint16_t port);
/** Receive window scale for a receive buffer of rcvbuf bytes (RFC 7323 2.3). */
uint8_t tcp_rcv_wscale_for(uint32_t rcvbuf);
/** Start c's send sequence space at iss: nothing sent, every sequence mark at iss. */
void tcp_set_iss(struct tide_net_conn *c, uint32_t iss);
/** Allocate a connection in CLOSE, hashed on its 4-tuple. NULL on ENOMEM (counted). */
struct tide_net_conn *tcp_conn_alloc(struct tide_net_stack *s, uint32_t rip, uint16_t lport,
				     uint16_t rport, uint64_t now);
void tcp_set_state(struct tide_net_conn *c, int state);
/** Enter CLOSE: stop timers, notify (reason) if the application owns it, free when not. */
void tcp_done(struct tide_net_conn *c, int reason);
void tcp_event(struct tide_net_conn *c, enum tide_net_event ev, int reason);
void net_conns_reap(struct tide_net_stack *s);
/* Entry/exit of public functions: the outermost exit reaps dead connections
 * and flushes TX, so a callback that closes a connection never frees memory
 * its caller is still using. */
static inline void
net_enter(struct tide_net_stack *s)
{
	s->busy++;
}
void net_leave(struct tide_net_stack *s);
/* SipHash-2-4 of (m0, m1) under the 128-bit key k (RFC 6528's F()). Pure. */
uint64_t tcp_siphash_2u64(const uint64_t k[2], uint64_t m0, uint64_t m1);
uint32_t tcp_new_isn(struct tide_net_stack *s, uint32_t lip, uint16_t lport, uint32_t rip,
		     uint16_t rport, uint64_t now);
/** RFC 7323 7.1 TSval offset of a 4-tuple: a keyed hash, so a peer learns no clock. Pure. */
uint32_t tcp_ts_offset(const struct tide_net_stack *s, uint32_t lip, uint16_t lport, uint32_t rip,
		       uint16_t rport);
uint32_t tcp_ring_free(const struct tcp_ring *r);
void tcp_ring_write(struct tcp_ring *r, const uint8_t *src, uint32_t n);
void tcp_ring_read(const struct tcp_ring *r, uint32_t off, uint8_t *dst, uint32_t n);
void tcp_ring_drop(struct tcp_ring *r, uint32_t n);
/** Offer rbuf to on_recv until it refuses or rbuf is empty. */
void tcp_rcv_deliver_buffered(struct tide_net_conn *c);
/** The last out-of-order entry (NULL: queue empty), with ooo_tail_run set; O(1) when cached. */
struct tcp_ooo *tcp_ooo_tail(struct tide_net_conn *c);
/** Free an out-of-order entry, giving a kept frame back to the device. */
void tcp_ooo_free(struct tide_net_stack *s, struct tcp_ooo *o);

/* tcp_input.c */
void tcp_v4_rcv(struct tide_net_stack *s, const struct net_ipv4_hdr *ip, const uint8_t *data,
		uint16_t len, uint16_t flags, uint64_t now);
/** Parse TCP options [opt, opt+len). Returns 0 or -EINVAL on a malformed option. */
int tcp_parse_options(const uint8_t *opt, uint32_t len, bool syn, struct tcp_opts *o);
/** Receive window we can accept right now (bytes). */
uint32_t tcp_rcv_wnd(const struct tide_net_conn *c);

/* tcp_output.c */
/** Send one segment: [seq, seq+len) of sbuf, with flags; SYN gets options. */
int tcp_transmit(struct tide_net_conn *c, uint32_t seq, uint32_t len, uint8_t flags, uint64_t now);
void tcp_write_xmit(struct tide_net_conn *c, uint64_t now);
/**
 * May an ACK grow c's window (RFC 7661, as Linux's tcp_is_cwnd_limited)? In
 * slow start while cwnd < 2 x the most in flight lately, else only if a send
 * was held back by cwnd lately. A sender stopped by a full device or by the
 * application is not using its window, and growing it only lets more queue
 * in the device when it drains. Also starts a new measuring period once
 * cwnd_mark is acknowledged.
 */
static inline bool
tcp_cwnd_validated(struct tide_net_conn *c)
{
	bool ok = c->cwnd < c->ssthresh ? c->cwnd < 2 * c->max_flight : c->cwnd_limited;

	if (!before(c->snd_una, c->cwnd_mark)) {
		c->cwnd_mark = c->snd_nxt;
		c->max_flight = c->snd_nxt - c->snd_una;
		c->cwnd_limited = false;
	}
	return ok;
}
/** Park c until the device takes frames again (net_tx_resume); idempotent. */
void tcp_tx_block(struct tide_net_conn *c);
/** Take c off the blocked list (it closed, or is resumed). */
void tcp_tx_unblock(struct tide_net_conn *c);
/** Take c off the owed-ACK list (it closed); idempotent. */
void tcp_ack_unowe(struct tide_net_conn *c);
/** Send the ACKs owed for in-order data of the RX burst just fed. */
void tcp_ack_owed_flush(struct tide_net_stack *s, uint64_t now);
void tcp_send_ack(struct tide_net_conn *c, uint64_t now);
/** RST for a segment with no connection (RFC 9293 3.10.7.1). */
void tcp_send_reset(struct tide_net_stack *s, const struct tcp_seg *seg, uint64_t now);
/** RST on a synchronized connection (abort, timeout). */
void tcp_send_active_reset(struct tide_net_conn *c, uint64_t now);
/** RFC 5961 challenge ACK, rate-limited per stack. */
void tcp_send_challenge_ack(struct tide_net_conn *c, uint64_t now);
/** Send a probe (window or keepalive): an ACK carrying snd_una - 1. */
void tcp_send_probe(struct tide_net_conn *c, uint64_t now);
void tcp_send_synack(struct tide_net_conn *c, uint64_t now);
struct tcp_cookie_opts;
/**
 * SYN-ACK for syn without a connection (SYN cookies): sequence iss, the
 * options ck says; TSval ck->tsval when ck->ts.
 */
void tcp_send_synack_cookie(struct tide_net_stack *s, const struct tcp_seg *syn, uint32_t iss,
			    const struct tcp_cookie_opts *ck, uint64_t now);
void tcp_send_syn(struct tide_net_conn *c, uint64_t now);
/** Send a window update when the application freed enough receive space. */
void tcp_window_update(struct tide_net_conn *c, uint64_t now);
/** Send one new segment regardless of cwnd (a probe). Returns 0, or -1 when none may go. */
int tcp_xmit_one_new(struct tide_net_conn *c, uint64_t now);
/** Bytes of data in sbuf not yet sent. */
uint32_t tcp_unsent(const struct tide_net_conn *c);
/** Sequence number after the last queued byte. */
static inline uint32_t
tcp_snd_end(const struct tide_net_conn *c)
{
	return c->sbuf_seq + c->snd_len;
}
/** Sequence number of our FIN (valid when fin_queued). */
static inline uint32_t
tcp_fin_seq(const struct tide_net_conn *c)
{
	return tcp_snd_end(c);
}

/* tcp_zc.c */
/** Copy n bytes (n <= tcp_ring_free(&c->sbuf)) to the end of the send queue. */
void tcp_snd_append(struct tide_net_conn *c, const uint8_t *data, uint32_t n);
/** The first n queued bytes were acknowledged: drop them, finishing zero-copy sends. */
void tcp_snd_drop(struct tide_net_conn *c, uint32_t n);
/**
 * Put the queued bytes [seq, seq+len) into frame b: copied to dst (the
 * payload's place in b), or attached after it. *copied gets the bytes written
 * at dst; the rest were attached (b->ext_len). When sum is set, *csum gets
 * the payload's checksum added (attached bytes included).
 * \return 0; -EAGAIN the device refused a later segment after accepting an
 *         earlier one: the frame is unusable (the caller frees it) and must be
 *         rebuilt with attach off.
 */
int tcp_snd_fill(struct tide_net_conn *c, struct tide_net_buf *b, uint8_t *dst, uint32_t seq,
		 uint32_t len, bool attach, bool sum, uint32_t *csum, uint32_t *copied);
/** The connection is closing (reason < 0) or freed: hand its zero-copy sends to completion. */
void tcp_snd_purge(struct tide_net_conn *c, int reason);
/** Make the completions that are due (device released every frame). */
void net_zc_reap(struct tide_net_stack *s);
/** Stack destroy: complete what may be, orphan what the device still holds. */
void net_zc_destroy(struct tide_net_stack *s);

/* tcp_sack.c */
/** Receiver: remember an out-of-order arrival at seq (queued or duplicate). */
void tcp_sack_rcv_note(struct tide_net_conn *c, uint32_t seq);
/** Receiver: duplicate data [start, end) arrived; the next ACK reports it as a D-SACK. */
void tcp_sack_rcv_dsack(struct tide_net_conn *c, uint32_t start, uint32_t end);
/**
 * Receiver: does out-of-order data at seq continue the run the newest SACK
 * block reports (so the sender has heard of the hole below it)?
 */
bool tcp_sack_rcv_extends(struct tide_net_conn *c, uint32_t seq);
/**
 * Receiver: the blocks the next ACK carries, at most max (<= TCP_SACK_WIRE_MAX):
 * the pending D-SACK first, then out-of-order runs, newest arrival first, then the
 * others in sequence order. Consumes nothing. Returns the block count.
 */
uint8_t tcp_sack_rcv_blocks(struct tide_net_conn *c, struct tcp_sack_blk *out, uint8_t max);
/** Receiver: option bytes a data segment must leave free for SACK blocks (0 when none). */
uint32_t tcp_sack_rcv_optlen(const struct tide_net_conn *c);
/**
 * Sender: merge the segment's SACK blocks into the scoreboard, with ack the
 * segment's cumulative ACK (already validated). Returns bytes newly SACKed.
 */
uint32_t tcp_sack_update(struct tide_net_conn *c, const struct tcp_opts *o, uint32_t ack);
/** Sender: forget ranges at or below snd_una. */
void tcp_sack_clean(struct tide_net_conn *c);
/** Sender: drop the scoreboard and recovery state. */
void tcp_sack_reset(struct tide_net_conn *c);
/** Sender: bytes SACKed inside [from, to). */
uint32_t tcp_sack_sacked_in(const struct tide_net_conn *c, uint32_t from, uint32_t to);
/** Sender: unSACKed bytes below the returned sequence are lost (RFC 6675 IsLost). */
uint32_t tcp_sack_lost_edge(const struct tide_net_conn *c);
/** Sender: RFC 6675 pipe, bytes estimated in flight. */
uint32_t tcp_sack_pipe(const struct tide_net_conn *c);
/**
 * Sender: RFC 6675 NextSeg rule 1 (and lost retransmissions first): the next
 * retransmission of at most smss bytes. Returns false when nothing is lost.
 */
bool tcp_sack_next_rtx(const struct tide_net_conn *c, uint32_t smss, uint32_t *seq, uint32_t *len,
		       uint8_t *flags, int *relost);
/** Sender: send what tcp_sack_next_rtx chose and account for it. */
int tcp_sack_retransmit(struct tide_net_conn *c, uint32_t seq, uint32_t len, uint8_t flags,
			int relost, uint64_t now);
/** Sender: after an ACK, enter SACK recovery if IsLost(snd_una), or find lost retransmissions. */
void tcp_sack_check_loss(struct tide_net_conn *c, uint64_t now);
/**
 * Sender, in SACK recovery: an ACK reported `delivered` more bytes received (the
 * cumulative ACK's advance plus the change in SACKed bytes). Sets cwnd to pipe
 * plus what RFC 6937's proportional rate reduction lets go for it.
 */
void tcp_sack_prr(struct tide_net_conn *c, uint32_t delivered);
/** Sender: the retransmission timer fired (RFC 6675 5.1); SACKed data is kept. */
void tcp_sack_on_rto(struct tide_net_conn *c);
/** Sender: (re)arm the tail loss probe when data is out (RFC 8985 7.2). */
void tcp_tlp_arm(struct tide_net_conn *c, uint64_t now);
/** Sender: the probe timer fired: one new segment, else the last unSACKed one. */
void tcp_tlp_fire(struct tide_net_conn *c, uint64_t now);
/** Sender: new data was SACKed at now: what was sent before it may be lost (RACK). */
void tcp_rack_sacked(struct tide_net_conn *c, uint64_t now);
/** Sender: a reordering window ended (t_rack): mark what it covered lost and resend. */
void tcp_rack_timer(struct tide_net_conn *c, uint64_t now);
/** Sender: SACK recovery (fast or after RTO) is running. */
static inline bool
tcp_sack_recovering(const struct tide_net_conn *c)
{
	return c->sack_ok && (c->in_recovery || c->loss_state);
}

/* tcp_timer.c */
/**
 * The TSval a segment of c sent at `now` carries: 1 ms ticks, never below one
 * c already sent. Callers pass clocks read at different moments (a poll's
 * start, a callback's own read), so a later segment can bring an earlier
 * `now`; a TSval that went back would be dropped by the peer's PAWS check
 * (RFC 7323 5.3) and the segment recovered as loss. The per-connection
 * offset (RFC 7323 7.1) is constant, so the comparison modulo 2^32 holds.
 */
static inline uint32_t
tcp_tsval_at(struct tide_net_conn *c, uint64_t now)
{
	uint32_t v = (uint32_t)(now / 1000000ull) + c->ts_off;

	if (c->ts_sent && (int32_t)(v - c->ts_last) < 0) {
		return c->ts_last;
	}
	c->ts_sent = true;
	c->ts_last = v;
	return v;
}
/** An ACK answered the original transmission, not the timeout's: undo the timeout. */
void tcp_rto_undo(struct tide_net_conn *c);
void tcp_rearm_rto(struct tide_net_conn *c, uint64_t now);
void tcp_arm(struct tide_net_conn *c, uint64_t *timer, uint64_t deadline);
void tcp_clear_timers(struct tide_net_conn *c);
void tcp_rtt_sample(struct tide_net_conn *c, uint64_t rtt_ns);
void tcp_keepalive_reset(struct tide_net_conn *c, uint64_t now);
void tcp_time_wait(struct tide_net_conn *c, uint64_t now);
/** Fire the due timers of c. Returns how many fired. */
int tcp_conn_timers(struct tide_net_conn *c, uint64_t now);

/* tcp_syncookie.c */

/*
 * SYN cookies (RFC 4987 3.6): a listener whose backlog is full answers a SYN
 * with a SYN-ACK whose ISS encodes the handshake, and keeps nothing; the ACK
 * that returns the cookie creates the connection.
 */
#define TCP_SYNCOOKIE_SLOT_NS  (64ull * 1000000000ull)     /* time counter step */
#define TCP_SYNCOOKIE_VALID_NS (2 * TCP_SYNCOOKIE_SLOT_NS) /* ACKs checked after a cookie */
#define TCP_SYNACK_RETRIES     5 /* SYN-ACKs resent before a half-open entry goes (~63 s) */

/** What a cookie carries besides the 4-tuple: from the SYN, settled against our options. */
struct tcp_cookie_opts {
	uint16_t mss;   /* peer MSS, rounded down to the cookie's table */
	bool ts;        /* timestamps: wscale and SACK ride in TSval's low bits */
	bool ws;        /* window scaling (ts only) */
	bool sack;      /* SACK permitted (ts only) */
	uint8_t wscale; /* peer's shift when ws */
	uint32_t tsval; /* our TSval carrying them (ts only) */
	uint32_t tsecr; /* the peer's TSval to echo (ts only) */
};

/**
 * Cookie for SYN syn at now: the ISS to send and, in *ck, the options the
 * SYN-ACK offers (what the ACK will bring back).
 */
uint32_t tcp_syncookie_make(const struct tide_net_stack *s, const struct tcp_seg *syn, uint64_t now,
			    struct tcp_cookie_opts *ck);
/**
 * Is ack (an ACK at a listener) the answer to a cookie made in this or the
 * previous time slot? On success *ck holds the options the cookie and the
 * echoed TSval carry. \return 0; -EINVAL not a valid cookie.
 */
int tcp_syncookie_check(const struct tide_net_stack *s, const struct tcp_seg *ack, uint64_t now,
			struct tcp_cookie_opts *ck);

/* tcp_cc.c */
const struct tcp_cc_ops *tcp_cc_get(enum tide_net_cc cc);
/** HyStart++: new data ending at end went out at now (times the round's first segments). */
void tcp_hystart_sent(struct tide_net_conn *c, uint32_t end, uint64_t now);
/** HyStart++: an ACK moved snd_una to ack at now; called before the window grows. */
void tcp_hystart_acked(struct tide_net_conn *c, uint32_t ack, uint64_t now);
/**
 * Pacing: may a data segment leave at now? False when the pacer holds it back:
 * c->t_pace is then armed for the instant it may (tcp_pacing only).
 */
bool tcp_pace_ok(struct tide_net_conn *c, uint64_t now);
/** Pacing: a data segment of len bytes left at now; the next is due one len later. */
void tcp_pace_sent(struct tide_net_conn *c, uint32_t len, uint64_t now);

#define NS_PER_US 1000ull
#define NS_PER_MS 1000000ull

#endif /* NET_INTERNAL_H */
