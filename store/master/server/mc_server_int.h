/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the master server (mc_server.c, mc_dispatch.c, mc_http.c):
 * the server, worker and control-thread structures. Not installed.
 */
#ifndef TIDE_MC_SERVER_INT_H
#define TIDE_MC_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "tide_cidr.h"
#include "tide_mc_server.h"

/* What an epoll event of the control thread refers to (first member of each tagged object). */
enum mc_ctl_kind {
	MC_CTL_RPC_LISTEN,
	MC_CTL_METRICS_LISTEN,
	MC_CTL_META_LISTEN,
	MC_CTL_TIMER,
	MC_CTL_STOP,
	MC_CTL_HTTP,
};

struct mc_ctl_tag {
	enum mc_ctl_kind kind;
};

/* Per-worker counters: one writer (the worker), relaxed atomic adds so readers never tear. */
struct mc_wstats {
	uint64_t closed_proto;
	uint64_t refused_large;
	uint64_t bad_body;
	uint64_t unknown_fn;
	uint64_t closed;
	struct tide_mc_server_fn_stats fn[TIDE_MC_FN_COUNT];
};

struct mc_conn;

struct mc_worker {
	struct tide_mc_server *s;
	unsigned idx;
	pthread_t th;
	bool started;
	int epfd;
	int evfd; /* wakes the worker: new connections or stop */
	pthread_mutex_t q_lock;
	int *q; /* accepted fds handed over by the control thread */
	size_t q_n, q_cap;
	struct mc_conn *conns; /* doubly linked list of owned connections */
	struct mc_conn *dead;  /* closed during this event batch: freed after it */
	bool oom;              /* the request being served ran out of memory (mc_dispatch) */
	struct tide_mc_table_arena arena;
	void *scratch; /* batch result arrays */
	size_t scratch_cap;
	struct mc_wstats st;
};

/* One entry of the HTTP metadata store: exact (percent-encoded) key -> body. */
struct mc_meta_ent {
	struct mc_meta_ent *next;
	char *key;
	char *val;
	size_t key_len, val_len;
};

#define MC_META_BUCKETS 256u

struct mc_http_conn;

struct tide_mc_server {
	struct tide_mc_server_opts o;
	char *rpc_address, *metrics_host, *meta_host, *fsdir; /* owned copies of o's strings */
	struct tide_mc_table *table;
	uint16_t rpc_port, metrics_port, meta_port;

	int ctl_epfd;
	int stop_evfd;
	int timerfd;
	int rpc_lfd, metrics_lfd, meta_lfd;
	struct mc_ctl_tag t_rpc, t_metrics, t_meta, t_timer, t_stop;
	bool rpc_listen_paused; /* EMFILE: re-armed at the next tick */
	pthread_t ctl_th;
	bool ctl_started;
	atomic_bool stopping;
	bool stopped;
	uint64_t start_ms;

	struct mc_worker *w;
	unsigned nw;
	unsigned next_w;
	atomic_uint_fast64_t accepted;

	struct mc_http_conn *http;      /* control-thread HTTP connections */
	struct mc_http_conn *http_dead; /* closed during this event batch: freed after it */
	size_t n_http;
	/* Control thread writes, any thread reads (relaxed): per port [0] admin, [1] metadata. */
	uint64_t http_open[2];
	uint64_t http_evicted, http_timed_out;
	uint64_t meta_bytes;        /* keys + values in the metadata store */
	bool http_listen_paused[2]; /* EMFILE: re-armed at the next tick */
	struct mc_meta_ent *meta[MC_META_BUCKETS];
	size_t meta_n;
	struct tide_mc_table_arena http_arena;
	struct tide_cidr_list allow; /* opts.allow_networks, parsed; n == 0: any peer */
	/* HA view for the admin port (tide_mc_server_set_ha); guarded by ha_lock. */
	pthread_mutex_t ha_lock;
	bool ha;
	char ha_role[16], ha_state[24], ha_leader[96];
	int64_t ha_view;
	uint64_t refused_net; /* control thread writes, any thread reads (relaxed) */
	/* Replies held until the journal is durable (tide_mc_server_hold_replies). */
	bool hold;
	uint64_t durable;        /* journal records stored; __atomic */
	uint64_t lease_until_us; /* HA: answer nothing after this (0: no bound); __atomic */
};

/*
 * mc_server.c: whether the peer of a just-accepted fd may stay (allow_networks).
 * When not, closes fd, counts and logs it (rate limited, naming port_name).
 * Control thread.
 */
bool mc_peer_allowed(struct tide_mc_server *s, int fd, const struct sockaddr_storage *ss,
		     socklen_t sl, const char *port_name);

/* mc_dispatch.c: execute one decoded request on the table and fill the result. */
void mc_dispatch(struct mc_worker *w, const struct tide_mc_req *req, struct tide_mc_resp *resp,
		 uint64_t now_ms);
/* True when the result (or any element of a batch result) is a failure. */
bool mc_resp_failed(const struct tide_mc_resp *resp);

/* mc_http.c: control-thread HTTP (admin port and metadata server). */
void mc_http_accept(struct tide_mc_server *s, int lfd, enum mc_ctl_kind which);
void mc_http_event(struct tide_mc_server *s, struct mc_http_conn *hc, uint32_t events);
void mc_http_close_all(struct tide_mc_server *s);
/* Free the connections closed since the last call: after each event batch, whose later
 * entries may still name them (a close never frees at once). */
void mc_http_reap(struct tide_mc_server *s);
/* Every tick: close connections past a deadline, re-arm paused listeners. */
void mc_http_tick(struct tide_mc_server *s, uint64_t now_ms);
void mc_meta_clear(struct tide_mc_server *s);

/* Relaxed add on a counter with a single writer. */
static inline void
mc_stat_add(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

#endif /* TIDE_MC_SERVER_INT_H */
