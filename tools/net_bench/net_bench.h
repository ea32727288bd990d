/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-net-bench internals: the benchmark protocol, shared by both
 * transports (Tide's user-space stack over net_memif, and Linux kernel TCP
 * over loopback), so both run exactly the same message pattern.
 *
 * Per row the client opens `flows` connections and sends a header on each
 * (struct nb_hdr). Stream rows then send pattern bytes continuously; the
 * server verifies every byte and answers each complete message with an
 * 8-byte cumulative ack. Ping-pong rows send one message and wait for the
 * echo. The header carries the measurement window as CLOCK_MONOTONIC
 * times, so both processes take their CPU snapshots over the same window.
 *
 * Everything here runs on one thread per process (the transport's poller
 * or event loop); nothing locks.
 */
#ifndef TIDE_NET_BENCH_H
#define TIDE_NET_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NB_MAX_ROWS   16
#define NB_MAX_FLOWS  64
#define NB_MAGIC      0x54424e31u /* "TBN1" */
#define NB_PP_MAX     65536       /* largest ping-pong message */
#define NB_HIST_SLOTS 3776        /* log-linear, 64 sub-buckets per power of two */

enum nb_kind { NB_STREAM = 1, NB_PINGPONG = 2, NB_BYE = 3 };

struct nb_row {
	enum nb_kind kind;
	uint32_t size;  /* message bytes */
	uint32_t flows; /* connections */
};

/* First bytes on every connection, client to server. */
struct nb_hdr {
	uint32_t magic, row, kind, size, flow, nflows;
	uint64_t win_start, win_end; /* CLOCK_MONOTONIC ns */
};

/* What one process measured for one row; sent to the coordinator. */
struct nb_row_result {
	double window_s; /* client: measured window length */
	uint64_t bytes;  /* client: payload bytes acknowledged in the window */
	uint64_t msgs;   /* client: messages (stream) or round trips (ping-pong) in window */
	uint64_t p50_ns, p99_ns;
	double cpu_s;      /* this process: user+sys CPU over the window */
	uint64_t verified; /* bytes checked against the pattern (whole row) */
	uint64_t bad;      /* bytes that did not match, or were lost */
	int error;         /* 0, or -errno of a failed connection / timeout */
	bool ran;
};

struct nb_endpoint;
struct nb_flow;

/* What the protocol needs from a transport. */
struct nb_xport_ops {
	/* Non-blocking send; returns bytes accepted (0 when full) or -errno. */
	ssize_t (*send)(struct nb_endpoint *ep, struct nb_flow *f, const void *p, size_t n);
	/* Start connecting flow f; nb_on_connected() follows. 0 or -errno. */
	int (*connect)(struct nb_endpoint *ep, struct nb_flow *f);
	/* Orderly close; the flow is not used by the transport afterwards. */
	void (*close)(struct nb_endpoint *ep, struct nb_flow *f);
};

struct nb_flow {
	struct nb_endpoint *ep;
	void *conn; /* Tide connection */
	int fd;     /* kernel socket */
	uint32_t gen;
	bool in_use, connected, closed, blocked;
	uint32_t row, kind, size, idx;
	uint64_t pat0; /* pattern offset of stream byte 0 */
	/* client */
	uint64_t tx, acked_msgs, peer_bad;
	uint8_t ackbuf[8];
	unsigned ackgot;
	uint64_t t_sent, pp_pat;
	uint32_t pp_got;
	bool pp_out, bye_reply, started;
	uint8_t *rxbuf; /* ping-pong reply (client) */
	/* server */
	uint8_t hdr[sizeof(struct nb_hdr)];
	unsigned hdr_got;
	uint64_t rx, msgs;
	bool ack_dirty;
	uint8_t *out; /* echo and ack bytes not yet accepted by the transport */
	size_t out_len;
};

struct nb_endpoint {
	const struct nb_xport_ops *ops;
	void *xctx;
	bool client;
	const struct nb_row *rows;
	unsigned nrows;
	uint64_t warmup_ns, duration_ns;
	struct nb_flow flows[NB_MAX_FLOWS];
	struct nb_row_result res[NB_MAX_ROWS];
	/* client progress */
	unsigned cur, nflows;
	int phase;
	uint64_t t_phase, win_start, win_end, t0, t1, acked0, msgs0;
	double cpu0;
	bool snap0, snap1;
	uint64_t hist[NB_HIST_SLOTS];
	/* server progress: per-row window snapshots */
	uint64_t srv_win[NB_MAX_ROWS][2];
	double srv_cpu0[NB_MAX_ROWS];
	uint8_t srv_snapped[NB_MAX_ROWS];
	bool bye_seen;
	int finished; /* 1 once the endpoint is done (client: bye answered; server: bye flow closed)
		       */
	int error;
};

/* Pattern: byte at stream offset s of a flow is nb_pattern[(pat0 + s) % NB_PAT_PERIOD];
 * nb_pattern holds two periods so any run up to one period is contiguous. */
#define NB_PAT_PERIOD ((1u << 20) + 4093u)
extern uint8_t *nb_pattern;
int nb_pattern_init(void);

uint64_t nb_now_ns(void);
double nb_cpu_seconds(void);

void nb_endpoint_init(struct nb_endpoint *ep, const struct nb_xport_ops *ops, void *xctx,
		      bool client, const struct nb_row *rows, unsigned nrows, double warmup_s,
		      double duration_s);
/* Server: a new connection arrived; returns its flow or NULL (no slot). */
struct nb_flow *nb_flow_alloc(struct nb_endpoint *ep);
/* Transport events. on_data always consumes everything it is given. */
void nb_on_connected(struct nb_flow *f);
void nb_on_data(struct nb_flow *f, const uint8_t *p, size_t n);
void nb_on_writable(struct nb_flow *f);
void nb_on_peer_closed(struct nb_flow *f);
void nb_on_error(struct nb_flow *f, int err);
/* Periodic progress; returns > 0 when it did work. */
int nb_tick(struct nb_endpoint *ep, uint64_t now);
/* Free per-flow buffers. */
void nb_endpoint_fini(struct nb_endpoint *ep);

/* Transports: run one endpoint until it finishes. Both return 0 or -errno. */
struct nb_cfg {
	const struct nb_row *rows;
	unsigned nrows;
	double warmup_s, duration_s;
	int cpu;             /* CPU of this process's polling thread */
	bool adaptive;       /* Tide: adaptive idle instead of busy polling */
	unsigned mtu;        /* Tide: IP MTU */
	uint32_t sockbuf;    /* Tide: send/receive buffer per connection */
	uint32_t rto_min_us; /* Tide: RTO floor; 0 = the stack's default */
	bool zc;             /* Tide: send pattern bytes with tide_net_send_zc */
	bool elide;          /* Tide: TIDE_CSUM=elide (no checksums) instead of auto */
	const char *dir;     /* temp dir for the memif socket */
	uint16_t port;       /* kernel: server port (client side) */
	int ctl;             /* coordinator socket */
	uint64_t deadline;   /* abort the run after this CLOCK_MONOTONIC time */
};

/* Control messages child -> coordinator and back. */
enum nb_ctl { NB_CTL_READY = 1, NB_CTL_RESULT, NB_CTL_QUIESCED, NB_CTL_GO };
struct nb_ctl_msg {
	uint32_t type;
	uint32_t port;  /* READY (kernel): the listening port */
	int32_t status; /* RESULT: 0 or -errno */
	int32_t huge;   /* READY (tide): 1 hugepages, 0 not */
	struct nb_row_result res[NB_MAX_ROWS];
};
int nb_ctl_send(int fd, const struct nb_ctl_msg *m);
int nb_ctl_recv(int fd, struct nb_ctl_msg *m, int timeout_ms);

int nb_run_tide(const struct nb_cfg *cfg, bool server);
int nb_run_kernel(const struct nb_cfg *cfg, bool server);

#endif /* TIDE_NET_BENCH_H */
