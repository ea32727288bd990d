/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Master server: listening sockets, the control thread (accept, HTTP, tick)
 * and the RPC workers (framing, pipelining, backpressure).
 *
 * Bounds: a connection buffers at most one frame of input beyond what it
 * has parsed (header + max_frame_body) and stops reading while more than
 * MC_WBUF_HIGH bytes of answers wait to be sent, so a client that pipelines
 * without reading cannot grow the server's memory without bound.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "mc_server_int.h"
#include "tide_log.h"
#include "tide_clock.h"
#include "tide_sock.h"

#define MC_RCHUNK    (64u << 10) /* bytes read per read() */
#define MC_WBUF_HIGH (4u << 20)  /* stop reading above this many unsent bytes */
#define MC_DRAIN_MAX (1u << 20)  /* input discarded after a refusal before closing */
#define MC_EPOLL_EVS 64
#define MC_BACKLOG   1024

const uint32_t TIDE_MC_SERVER_LAT_BOUNDS_US[11] = {5,   10,   25,    50,     100,    250,
						   500, 1000, 10000, 100000, 1000000};

struct mc_conn {
	struct mc_conn *prev, *next;
	int fd;
	uint32_t evmask; /* currently registered epoll events */
	bool draining;   /* refused: flush answers, discard input, then close */
	size_t drained;
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct tide_mc_buf wbuf;
	size_t woff;       /* bytes of wbuf already sent */
	uint64_t hold_seq; /* journal record the newest reply waits for (hold) */
	bool eof;          /* the peer sent all it will: answer what is buffered, then close */
	bool closed;       /* on w->dead: events still in the batch are ignored */
};

uint64_t
tide_mc_server_now_ms(void)
{
	return tide_mono_ms();
}

void
tide_mc_server_opts_init(struct tide_mc_server_opts *opts, size_t opts_size)
{
	struct tide_mc_server_opts o;

	memset(&o, 0, sizeof(o));
	o.opts_size = sizeof(o);
	o.rpc_address = "0.0.0.0";
	o.rpc_port = 50051;
	o.rpc_thread_num = 2;
	o.enable_metrics = true;
	o.metrics_host = "0.0.0.0";
	o.metrics_port = 9003;
	o.enable_http_metadata = false;
	o.http_metadata_host = "0.0.0.0";
	o.http_metadata_port = 8080;
	o.max_frame_body = TIDE_MC_SERVER_MAX_FRAME_BODY;
	o.tick_ms = 100;
	o.fsdir = "";
	o.enable_disk_eviction = true;
	o.quota_bytes = 0;
	o.http_admin_max_conns = TIDE_MC_HTTP_ADMIN_MAX_CONNS;
	o.http_metadata_max_conns = TIDE_MC_HTTP_METADATA_MAX_CONNS;
	o.http_max_body = TIDE_MC_HTTP_MAX_BODY;
	o.http_metadata_max_bytes = TIDE_MC_HTTP_METADATA_MAX_BYTES;
	o.http_header_timeout_ms = TIDE_MC_HTTP_HEADER_TIMEOUT_MS;
	o.http_body_timeout_ms = TIDE_MC_HTTP_BODY_TIMEOUT_MS;
	o.http_idle_timeout_ms = TIDE_MC_HTTP_IDLE_TIMEOUT_MS;
	tide_mc_table_opts_init(&o.table, sizeof(o.table));
	o.allow_networks = "";
	if (opts == NULL) {
		return;
	}
	memcpy(opts, &o, opts_size < sizeof(o) ? opts_size : sizeof(o));
	if (opts_size >= sizeof(size_t)) {
		opts->opts_size = opts_size;
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Sockets                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static int
listen_on(const char *host, uint16_t port, int *fd_out, uint16_t *port_out)
{
	/* An IPv4 or IPv6 literal ("0.0.0.0", "::1"): engine/lib/addr's listener. */
	int rc = tide_sock_listen(host, port, MC_BACKLOG, fd_out, port_out);

	if (rc == -EINVAL)
		TIDE_LOG(ERR, "'%s' is not an IPv4 or IPv6 address", host);
	else if (rc != 0)
		TIDE_LOG(ERR, "cannot listen on %s:%u: %s", host, port, strerror(-rc));
	return rc;
}

static int
epoll_add(int epfd, int fd, uint32_t ev, void *ptr)
{
	struct epoll_event e = {.events = ev, .data.ptr = ptr};

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) == 0 ? 0 : -errno;
}

/* ------------------------------------------------------------------------------------------ */
/* RPC connections (worker threads)                                                            */
/* ------------------------------------------------------------------------------------------ */

static void
conn_close(struct mc_worker *w, struct mc_conn *c)
{
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		w->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	/* Freed after the event batch (conns_reap): release_held may close a connection
	 * whose own event comes later in the same batch. */
	c->closed = true;
	c->next = w->dead;
	w->dead = c;
	mc_stat_add(&w->st.closed, 1);
}

static void
conns_reap(struct mc_worker *w)
{
	struct mc_conn *c;

	while ((c = w->dead) != NULL) {
		w->dead = c->next;
		free(c->rbuf);
		tide_mc_buf_release(&c->wbuf);
		free(c);
	}
}

static size_t
wpending(const struct mc_conn *c)
{
	return c->wbuf.len - c->woff;
}

/* Whether the buffered replies may go: the journal stored what they report. */
static bool
released(const struct tide_mc_server *s, const struct mc_conn *c)
{
	return !s->hold || c->hold_seq <= __atomic_load_n(&s->durable, __ATOMIC_ACQUIRE);
}

/* Register the events the connection's state calls for. */
static int
conn_rearm(struct mc_worker *w, struct mc_conn *c)
{
	uint32_t ev = 0;
	struct epoll_event e;

	if (wpending(c) > 0 && released(w->s, c)) {
		ev |= EPOLLOUT;
	}
	/* Reading, and the peer's half-close with it: watched alone, a half-close under
	 * backpressure (no read to consume it) would report on every wait. After end of
	 * input, only the answers are left. */
	if (!c->eof && (c->draining ? wpending(c) == 0 : wpending(c) <= MC_WBUF_HIGH)) {
		ev |= EPOLLIN | EPOLLRDHUP;
	}
	if (ev == c->evmask) {
		return 0;
	}
	e.events = ev;
	e.data.ptr = c;
	if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &e) != 0) {
		return -errno;
	}
	c->evmask = ev;
	return 0;
}

/* Send what is pending and released. 0 ok (maybe partial), -errno the connection is dead. */
static int
conn_flush(const struct tide_mc_server *s, struct mc_conn *c)
{
	ssize_t n;

	while (wpending(c) > 0 && released(s, c)) {
		n = send(c->fd, c->wbuf.data + c->woff, wpending(c), MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				break;
			}
			return -errno;
		}
		c->woff += (size_t)n;
	}
	if (c->woff == c->wbuf.len) {
		c->wbuf.len = 0;
		c->woff = 0;
		/* A burst's large answer buffer is not kept by an idle connection. */
		if (c->wbuf.cap > (1u << 20)) {
			tide_mc_buf_release(&c->wbuf);
		}
	}
	return 0;
}

static void
account(struct mc_worker *w, enum tide_mc_fn fn, bool failed, uint64_t us)
{
	struct tide_mc_server_fn_stats *f = &w->st.fn[fn];
	unsigned b = 0;

	while (b < 11 && us > TIDE_MC_SERVER_LAT_BOUNDS_US[b]) {
		b++;
	}
	mc_stat_add(&f->calls, 1);
	if (failed) {
		mc_stat_add(&f->failures, 1);
	}
	mc_stat_add(&f->lat_sum_us, us);
	mc_stat_add(&f->lat_bucket[b], 1);
}

/* A PutStart reply, or a batch's, whose keys were all placed (none already existed), or
 * a granted lease. */
static bool
placed_only(const struct tide_mc_resp *resp)
{
	size_t i;

	if (resp->fn == TIDE_MC_FN_PUT_START || resp->fn == TIDE_MC_FN_UPSERT_START) {
		return resp->u.put_start.ok;
	}
	if (resp->fn == TIDE_MC_FN_TIDE_LEASE_GRANT) {
		return resp->u.lease.ok; /* space only, as a placed PutStart */
	}
	if (resp->fn != TIDE_MC_FN_BATCH_PUT_START && resp->fn != TIDE_MC_FN_BATCH_UPSERT_START) {
		return false;
	}
	for (i = 0; i < resp->u.batch_put_start.n; i++) {
		if (!resp->u.batch_put_start.v[i].ok) {
			return false;
		}
	}
	return true;
}

/*
 * The journal record a reply must wait for (read after the call, so it covers
 * every record the call made and any made before). Two answers reveal less
 * than the whole table: a Ping (liveness is not journaled) and a PutStart
 * that placed every key, which hands out only space; that space must be free
 * in any table a replay can build, so it waits for the last release, not for
 * other objects' completions. Everything else, failures included (an
 * OBJECT_ALREADY_EXISTS tells the writer its put is done), waits for all.
 */
static uint64_t
hold_for(const struct tide_mc_table *t, const struct tide_mc_resp *resp)
{
	if (resp->fn == TIDE_MC_FN_PING) {
		return 0;
	}
	if (placed_only(resp)) {
		return tide_mc_table_journal_free_seq(t);
	}
	return tide_mc_table_journal_seq(t);
}

/*
 * Answer one complete frame at rbuf[off..off+len). Returns 0, or -errno when
 * the connection must close at once (answer could not be built).
 */
static int
serve_frame(struct mc_worker *w, struct mc_conn *c, const uint8_t *p, size_t len)
{
	struct tide_mc_req_hdr hdr;
	struct tide_mc_req req;
	struct tide_mc_resp resp;
	struct tide_mc_err err;
	size_t consumed = 0;
	uint64_t t0 = tide_mono_us();
	uint64_t until = __atomic_load_n(&w->s->lease_until_us, __ATOMIC_ACQUIRE);
	int rc;

	if (until != 0 && t0 >= until) {
		/* Not certain to lead any more: a successor may be serving. */
		TIDE_LOG_RATELIMIT(WARN, 5, "HA lease not renewed in time: closing connections");
		return -ESTALE;
	}
	rc = tide_mc_req_frame_decode(p, len, &hdr, &req, &consumed, &err);
	switch (rc) {
	case 0:
		break;
	case -ENOENT:
	case -ENOTSUP:
		/* Unknown id, or a registered optional feature this master does not have. */
		mc_stat_add(&w->st.unknown_fn, 1);
		TIDE_LOG_RATELIMIT(INFO, 10, "function id 0x%08x: %s", hdr.function_id, err.msg);
		return tide_mc_err_frame_encode(hdr.seq_num, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED,
						"the rpc function not registered",
						TIDE_MC_ENC_STOCK, &c->wbuf);
	case -EBADMSG:
		mc_stat_add(&w->st.bad_body, 1);
		TIDE_LOG_RATELIMIT(INFO, 10, "bad request body: %s", err.msg);
		return tide_mc_err_frame_encode(hdr.seq_num, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS,
						"invalid rpc arg", TIDE_MC_ENC_STOCK, &c->wbuf);
	default:
		return rc < 0 ? rc : -EPROTO;
	}
	if (w->s->o.no_tide_ext && tide_mc_fn_info(req.fn)->tide_only) {
		/* Configured to look like a stock master: Tide's functions do not exist. */
		tide_mc_req_free(&req);
		mc_stat_add(&w->st.unknown_fn, 1);
		return tide_mc_err_frame_encode(hdr.seq_num, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED,
						"the rpc function not registered",
						TIDE_MC_ENC_STOCK, &c->wbuf);
	}

	w->oom = false;
	mc_dispatch(w, &req, &resp, tide_mc_server_now_ms());
	if (w->oom) {
		/* An empty result for n keys would read as n answers missing, not as an error. */
		TIDE_LOG_RATELIMIT(ERR, 10, "%s: out of memory for the result",
				   tide_mc_fn_info(req.fn)->name);
		rc = tide_mc_err_frame_encode(hdr.seq_num, TIDE_MC_ERRC_RPC_THROW_EXCEPTION,
					      "out of memory", TIDE_MC_ENC_STOCK, &c->wbuf);
	} else {
		rc = tide_mc_resp_frame_encode(&resp, hdr.seq_num, TIDE_MC_ENC_STOCK, &c->wbuf);
	}
	if (rc != 0) {
		/* A result the codec refuses is a server bug; say so like a throwing handler. */
		TIDE_LOG_RATELIMIT(ERR, 10, "cannot encode the %s result: %d",
				   tide_mc_fn_info(req.fn)->name, rc);
		rc = tide_mc_err_frame_encode(hdr.seq_num, TIDE_MC_ERRC_RPC_THROW_EXCEPTION,
					      "result encoding failed", TIDE_MC_ENC_STOCK,
					      &c->wbuf);
	}
	if (w->s->hold) {
		uint64_t need = hold_for(w->s->table, &resp);

		/* Replies on a connection leave in order: never below the one before. */
		if (need > c->hold_seq) {
			c->hold_seq = need;
		}
	}
	account(w, req.fn, mc_resp_failed(&resp), tide_mono_us() - t0);
	tide_mc_req_free(&req);
	tide_mc_table_arena_reset(&w->arena);
	return rc;
}

/*
 * Parse and answer every complete frame buffered, stopping early under
 * backpressure. Returns 0, or -errno to close now.
 */
static int
conn_process(struct mc_worker *w, struct mc_conn *c)
{
	struct tide_mc_req_hdr hdr;
	size_t off = 0, avail;
	uint64_t body;
	int rc = 0;

	while (!c->draining && wpending(c) <= MC_WBUF_HIGH) {
		avail = c->rlen - off;
		rc = tide_mc_req_hdr_parse(c->rbuf + off, avail, &hdr, NULL);
		if (rc == -EAGAIN) {
			rc = 0;
			break;
		}
		if (rc != 0) {
			mc_stat_add(&w->st.closed_proto, 1);
			TIDE_LOG_RATELIMIT(INFO, 10,
					   "bad request header (magic 0x%02x version %u "
					   "serialize %u): closing",
					   hdr.magic, hdr.version, hdr.serialize_type);
			return -EPROTO;
		}
		body = (uint64_t)hdr.length + hdr.attach_length;
		if (body > w->s->o.max_frame_body) {
			mc_stat_add(&w->st.refused_large, 1);
			TIDE_LOG_RATELIMIT(WARN, 10,
					   "request of %llu body bytes exceeds %u: refused",
					   (unsigned long long)body, w->s->o.max_frame_body);
			rc = tide_mc_err_frame_encode(hdr.seq_num, TIDE_MC_ERRC_MESSAGE_TOO_LARGE,
						      "message too large", TIDE_MC_ENC_STOCK,
						      &c->wbuf);
			c->draining = true;
			off = c->rlen;
			break;
		}
		if (avail < TIDE_MC_REQ_HDR_LEN + body) {
			break;
		}
		rc = serve_frame(w, c, c->rbuf + off, TIDE_MC_REQ_HDR_LEN + (size_t)body);
		if (rc != 0) {
			return rc;
		}
		off += TIDE_MC_REQ_HDR_LEN + (size_t)body;
	}
	if (off > 0) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
	return rc;
}

/* Room for the next read: the current frame whole, or at least one chunk. */
static int
conn_reserve(struct mc_worker *w, struct mc_conn *c)
{
	struct tide_mc_req_hdr hdr;
	size_t need = c->rlen + MC_RCHUNK, frame;
	uint8_t *p;

	if (tide_mc_req_hdr_parse(c->rbuf, c->rlen, &hdr, NULL) == 0) {
		frame = TIDE_MC_REQ_HDR_LEN + (size_t)hdr.length + hdr.attach_length;
		if (frame <= TIDE_MC_REQ_HDR_LEN + (size_t)w->s->o.max_frame_body && frame > need) {
			need = frame;
		}
	}
	if (need <= c->rcap) {
		return 0;
	}
	p = realloc(c->rbuf, need);
	if (p == NULL) {
		return -ENOMEM;
	}
	c->rbuf = p;
	c->rcap = need;
	return 0;
}

/* Read what is available (bounded per event for fairness). 0 ok, -errno / -ECONNRESET to close. */
static int
conn_read(struct mc_worker *w, struct mc_conn *c)
{
	char sink[4096];
	size_t budget = 4 * MC_RCHUNK;
	ssize_t n;
	int rc;

	if (c->eof) {
		return 0;
	}
	if (c->draining) {
		n = recv(c->fd, sink, sizeof(sink), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			return -ECONNRESET;
		}
		if (n > 0) {
			c->drained += (size_t)n;
		}
		return c->drained > MC_DRAIN_MAX ? -EMSGSIZE : 0;
	}
	while (budget > 0 && wpending(c) <= MC_WBUF_HIGH) {
		size_t room;

		rc = conn_reserve(w, c);
		if (rc != 0) {
			return rc;
		}
		room = c->rcap - c->rlen;
		n = recv(c->fd, c->rbuf + c->rlen, room, 0);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				return 0;
			}
			return -errno;
		}
		if (n == 0) {
			/* Half-closed: the requests already sent still get their answers. */
			c->eof = true;
			return conn_process(w, c);
		}
		c->rlen += (size_t)n;
		budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
		rc = conn_process(w, c);
		if (rc != 0 || c->draining) {
			return rc;
		}
		/* A read that left room emptied the socket: the next recv would only say
		 * EAGAIN (a syscall per request, a fifth of the master's work for one
		 * small RPC). Epoll is level-triggered: more data wakes us again. */
		if ((size_t)n < room) {
			return 0;
		}
	}
	return 0;
}

static void
conn_event(struct mc_worker *w, struct mc_conn *c, uint32_t ev)
{
	int rc = 0;

	if (ev & EPOLLOUT) {
		rc = conn_flush(w->s, c);
		/* Backpressure released: answer what was left buffered. */
		if (rc == 0 && !c->draining && c->rlen > 0) {
			rc = conn_process(w, c);
		}
	}
	if (rc == 0 && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))) {
		rc = conn_read(w, c);
	}
	if (rc == 0) {
		rc = conn_flush(w->s, c);
	}
	/* After end of input: answer what is buffered (backpressure may have left whole
	 * requests), send it as the journal releases it, close once all is sent. */
	while (rc == 0 && c->eof && wpending(c) == 0) {
		size_t before = c->rlen;

		rc = conn_process(w, c);
		if (rc == 0) {
			rc = conn_flush(w->s, c);
		}
		/* Nothing left to answer (a partial request is dropped): close. */
		if (rc == 0 && wpending(c) == 0 && c->rlen == before) {
			rc = -ECONNRESET;
		}
	}
	if (rc == 0 && c->draining && wpending(c) == 0) {
		shutdown(c->fd, SHUT_WR);
	}
	if (rc == 0) {
		rc = conn_rearm(w, c);
	}
	if (rc != 0) {
		conn_close(w, c);
	}
}

static void
worker_adopt(struct mc_worker *w)
{
	struct mc_conn *c;
	int one = 1;
	size_t i, n;
	int *q;

	pthread_mutex_lock(&w->q_lock);
	q = w->q;
	n = w->q_n;
	w->q = NULL;
	w->q_n = 0;
	w->q_cap = 0;
	pthread_mutex_unlock(&w->q_lock);

	for (i = 0; i < n; i++) {
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(q[i]);
			continue;
		}
		c->fd = q[i];
		(void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->evmask = EPOLLIN | EPOLLRDHUP;
		if (epoll_add(w->epfd, c->fd, c->evmask, c) != 0) {
			close(c->fd);
			free(c);
			continue;
		}
		c->next = w->conns;
		if (w->conns != NULL) {
			w->conns->prev = c;
		}
		w->conns = c;
	}
	free(q);
}

/* The journal moved on (or a wake for new connections): send replies it released. */
static void
release_held(struct mc_worker *w)
{
	struct mc_conn *c = w->conns, *next;

	if (!w->s->hold) {
		return;
	}
	for (; c != NULL; c = next) {
		next = c->next; /* conn_event may close c */
		if (wpending(c) > 0 && released(w->s, c) && !(c->evmask & EPOLLOUT)) {
			conn_event(w, c, EPOLLOUT);
		}
	}
}

static void *
worker_main(void *arg)
{
	struct mc_worker *w = arg;
	struct epoll_event evs[MC_EPOLL_EVS];
	uint64_t v;
	int n, i;

	while (!atomic_load(&w->s->stopping)) {
		n = epoll_wait(w->epfd, evs, MC_EPOLL_EVS, -1);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			TIDE_LOG(ERR, "worker %u: epoll_wait: %s", w->idx, strerror(errno));
			break;
		}
		for (i = 0; i < n; i++) {
			struct mc_conn *c = evs[i].data.ptr;

			if (c == NULL) {
				if (read(w->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
					TIDE_LOG(ERR, "worker %u: eventfd: %s", w->idx,
						 strerror(errno));
				}
				worker_adopt(w);
				release_held(w);
				continue;
			}
			if (!c->closed) {
				conn_event(w, c, evs[i].events);
			}
		}
		conns_reap(w);
	}
	while (w->conns != NULL) {
		conn_close(w, w->conns);
	}
	conns_reap(w);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Control thread                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void
handoff(struct tide_mc_server *s, int fd)
{
	struct mc_worker *w = &s->w[s->next_w];
	uint64_t one = 1;
	int *q;

	s->next_w = (s->next_w + 1) % s->nw;
	pthread_mutex_lock(&w->q_lock);
	if (w->q_n == w->q_cap) {
		q = realloc(w->q, (w->q_cap ? w->q_cap * 2 : 16) * sizeof(*q));
		if (q == NULL) {
			pthread_mutex_unlock(&w->q_lock);
			close(fd);
			return;
		}
		w->q = q;
		w->q_cap = w->q_cap ? w->q_cap * 2 : 16;
	}
	w->q[w->q_n++] = fd;
	pthread_mutex_unlock(&w->q_lock);
	if (write(w->evfd, &one, sizeof(one)) < 0) {
		TIDE_LOG_RATELIMIT(ERR, 10, "cannot wake worker %u: %s", w->idx, strerror(errno));
	}
}

bool
mc_peer_allowed(struct tide_mc_server *s, int fd, const struct sockaddr_storage *ss, socklen_t sl,
		const char *port_name)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (tide_cidr_allows(&s->allow, (const struct sockaddr *)ss, sl)) {
		return true;
	}
	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip, sizeof(ip));
	} else if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip, sizeof(ip));
	}
	/* Counted before the close, so a peer that sees the close sees the count. */
	mc_stat_add(&s->refused_net, 1);
	close(fd);
	TIDE_LOG_RATELIMIT(WARN, 10,
			   "%s port: connection from %s refused (not in --allow_networks)",
			   port_name, ip);
	return false;
}

static void
accept_rpc(struct tide_mc_server *s)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd;

	for (;;) {
		sl = sizeof(ss);
		fd = accept4(s->rpc_lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0 && !mc_peer_allowed(s, fd, &ss, sl, "RPC")) {
			continue;
		}
		if (fd >= 0) {
			atomic_fetch_add(&s->accepted, 1);
			handoff(s, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED) {
			continue;
		}
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			/* Level-triggered: pause the listener until the next tick instead of
			 * spinning. */
			TIDE_LOG_RATELIMIT(WARN, 10, "accept: %s; pausing the RPC listener",
					   strerror(errno));
			epoll_ctl(s->ctl_epfd, EPOLL_CTL_DEL, s->rpc_lfd, NULL);
			s->rpc_listen_paused = true;
		}
		return;
	}
}

static void
on_tick(struct tide_mc_server *s)
{
	uint64_t v;

	if (read(s->timerfd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
		TIDE_LOG_RATELIMIT(ERR, 10, "timerfd: %s", strerror(errno));
	}
	/* A deferred server (an HA standby, or a leader rebuilding its table) leaves the
	 * table alone: expiring clients or evicting there would be changes no journal
	 * records. */
	if (__atomic_load_n(&s->rpc_lfd, __ATOMIC_ACQUIRE) >= 0) {
		tide_mc_table_tick(s->table, tide_mc_server_now_ms());
	}
	if (s->rpc_listen_paused && epoll_add(s->ctl_epfd, s->rpc_lfd, EPOLLIN, &s->t_rpc) == 0) {
		s->rpc_listen_paused = false;
	}
	mc_http_tick(s, tide_mc_server_now_ms());
}

static void *
ctl_main(void *arg)
{
	struct tide_mc_server *s = arg;
	struct epoll_event evs[MC_EPOLL_EVS];
	struct mc_ctl_tag *tag;
	int n, i;

	while (!atomic_load(&s->stopping)) {
		n = epoll_wait(s->ctl_epfd, evs, MC_EPOLL_EVS, -1);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			TIDE_LOG(ERR, "control: epoll_wait: %s", strerror(errno));
			break;
		}
		for (i = 0; i < n; i++) {
			tag = evs[i].data.ptr;
			switch (tag->kind) {
			case MC_CTL_RPC_LISTEN:
				accept_rpc(s);
				break;
			case MC_CTL_METRICS_LISTEN:
				mc_http_accept(s, s->metrics_lfd, MC_CTL_METRICS_LISTEN);
				break;
			case MC_CTL_META_LISTEN:
				mc_http_accept(s, s->meta_lfd, MC_CTL_META_LISTEN);
				break;
			case MC_CTL_TIMER:
				on_tick(s);
				break;
			case MC_CTL_STOP:
				break;
			case MC_CTL_HTTP:
				mc_http_event(s, (struct mc_http_conn *)tag, evs[i].events);
				break;
			}
		}
		mc_http_reap(s);
	}
	mc_http_close_all(s);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Life cycle                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static int
check_opts(const struct tide_mc_server_opts *o)
{
	if (o->opts_size < sizeof(*o)) {
		TIDE_LOG(ERR, "server options: opts_size %zu < %zu", o->opts_size, sizeof(*o));
		return -EINVAL;
	}
	if (o->rpc_thread_num < 1 || o->rpc_thread_num > TIDE_MC_SERVER_MAX_THREADS) {
		TIDE_LOG(ERR, "rpc_thread_num %u outside 1..%u", o->rpc_thread_num,
			 TIDE_MC_SERVER_MAX_THREADS);
		return -EINVAL;
	}
	if (o->tick_ms < 1 || o->tick_ms > 1000) {
		TIDE_LOG(ERR, "tick_ms %u outside 1..1000", o->tick_ms);
		return -EINVAL;
	}
	if (o->max_frame_body < 1024) {
		TIDE_LOG(ERR, "max_frame_body %u below 1024", o->max_frame_body);
		return -EINVAL;
	}
	return 0;
}

static char *
dup_or(const char *s, const char *dflt)
{
	return strdup(s != NULL ? s : dflt);
}

static void
close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void
wake(int evfd)
{
	uint64_t one = 1;

	if (evfd >= 0 && write(evfd, &one, sizeof(one)) < 0) {
		TIDE_LOG(ERR, "eventfd write: %s", strerror(errno));
	}
}

void
tide_mc_server_stop(struct tide_mc_server *s)
{
	unsigned i;

	if (s == NULL || s->stopped) {
		return;
	}
	atomic_store(&s->stopping, true);
	wake(s->stop_evfd);
	if (s->ctl_started) {
		pthread_join(s->ctl_th, NULL);
	}
	close_fd(&s->rpc_lfd);
	close_fd(&s->metrics_lfd);
	close_fd(&s->meta_lfd);
	for (i = 0; i < s->nw; i++) {
		wake(s->w[i].evfd);
	}
	for (i = 0; i < s->nw; i++) {
		if (s->w[i].started) {
			pthread_join(s->w[i].th, NULL);
		}
	}
	/* Connections accepted but never adopted. */
	for (i = 0; i < s->nw; i++) {
		while (s->w[i].q_n > 0) {
			close(s->w[i].q[--s->w[i].q_n]);
		}
	}
	s->stopped = true;
}

void
tide_mc_server_destroy(struct tide_mc_server *s)
{
	unsigned i;

	if (s == NULL) {
		return;
	}
	tide_mc_server_stop(s);
	for (i = 0; i < s->nw; i++) {
		close_fd(&s->w[i].epfd);
		close_fd(&s->w[i].evfd);
		free(s->w[i].q);
		free(s->w[i].scratch);
		tide_mc_table_arena_release(&s->w[i].arena);
		pthread_mutex_destroy(&s->w[i].q_lock);
	}
	free(s->w);
	close_fd(&s->ctl_epfd);
	close_fd(&s->stop_evfd);
	close_fd(&s->timerfd);
	mc_meta_clear(s);
	tide_mc_table_arena_release(&s->http_arena);
	tide_mc_table_destroy(s->table);
	free(s->rpc_address);
	free(s->metrics_host);
	free(s->meta_host);
	free(s->fsdir);
	pthread_mutex_destroy(&s->ha_lock);
	free(s);
}

static int
setup_ctl(struct tide_mc_server *s)
{
	struct itimerspec its;
	int rc;

	s->ctl_epfd = epoll_create1(EPOLL_CLOEXEC);
	s->stop_evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (s->ctl_epfd < 0 || s->stop_evfd < 0 || s->timerfd < 0) {
		return -errno;
	}
	memset(&its, 0, sizeof(its));
	its.it_interval.tv_sec = s->o.tick_ms / 1000;
	its.it_interval.tv_nsec = (long)(s->o.tick_ms % 1000) * 1000000L;
	its.it_value = its.it_interval;
	if (timerfd_settime(s->timerfd, 0, &its, NULL) != 0) {
		return -errno;
	}
	rc = s->rpc_lfd >= 0 ? epoll_add(s->ctl_epfd, s->rpc_lfd, EPOLLIN, &s->t_rpc) : 0;
	if (rc == 0) {
		rc = epoll_add(s->ctl_epfd, s->timerfd, EPOLLIN, &s->t_timer);
	}
	if (rc == 0) {
		rc = epoll_add(s->ctl_epfd, s->stop_evfd, EPOLLIN, &s->t_stop);
	}
	if (rc == 0 && s->metrics_lfd >= 0) {
		rc = epoll_add(s->ctl_epfd, s->metrics_lfd, EPOLLIN, &s->t_metrics);
	}
	if (rc == 0 && s->meta_lfd >= 0) {
		rc = epoll_add(s->ctl_epfd, s->meta_lfd, EPOLLIN, &s->t_meta);
	}
	return rc;
}

static int
setup_workers(struct tide_mc_server *s)
{
	struct mc_worker *w;
	unsigned i;
	int rc;

	s->w = calloc(s->o.rpc_thread_num, sizeof(*s->w));
	if (s->w == NULL) {
		return -ENOMEM;
	}
	for (i = 0; i < s->o.rpc_thread_num; i++) {
		w = &s->w[i];
		w->s = s;
		w->idx = i;
		w->epfd = -1;
		w->evfd = -1;
		pthread_mutex_init(&w->q_lock, NULL);
		s->nw++;
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (w->epfd < 0 || w->evfd < 0) {
			return -errno;
		}
		rc = epoll_add(w->epfd, w->evfd, EPOLLIN, NULL);
		if (rc != 0) {
			return rc;
		}
	}
	for (i = 0; i < s->nw; i++) {
		rc = pthread_create(&s->w[i].th, NULL, worker_main, &s->w[i]);
		if (rc != 0) {
			return -rc;
		}
		s->w[i].started = true;
	}
	return 0;
}

int
tide_mc_server_create(const struct tide_mc_server_opts *opts, struct tide_mc_server **out)
{
	struct tide_mc_server *s;
	int rc;

	if (opts == NULL || out == NULL) {
		return -EINVAL;
	}
	rc = check_opts(opts);
	if (rc != 0) {
		return rc;
	}
	rc = tide_mc_codec_init();
	if (rc != 0) {
		TIDE_LOG(ERR, "codec init failed: %d", rc);
		return rc;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		return -ENOMEM;
	}
	s->o = *opts;
	s->ctl_epfd = s->stop_evfd = s->timerfd = -1;
	s->rpc_lfd = s->metrics_lfd = s->meta_lfd = -1;
	s->t_rpc.kind = MC_CTL_RPC_LISTEN;
	s->t_metrics.kind = MC_CTL_METRICS_LISTEN;
	s->t_meta.kind = MC_CTL_META_LISTEN;
	s->t_timer.kind = MC_CTL_TIMER;
	s->t_stop.kind = MC_CTL_STOP;
	s->start_ms = tide_mc_server_now_ms();
	pthread_mutex_init(&s->ha_lock, NULL);
	s->rpc_address = dup_or(opts->rpc_address, "0.0.0.0");
	s->metrics_host = dup_or(opts->metrics_host, "0.0.0.0");
	s->meta_host = dup_or(opts->http_metadata_host, "0.0.0.0");
	s->fsdir = dup_or(opts->fsdir, "");
	if (s->rpc_address == NULL || s->metrics_host == NULL || s->meta_host == NULL ||
	    s->fsdir == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	s->o.rpc_address = s->rpc_address;
	s->o.metrics_host = s->metrics_host;
	s->o.http_metadata_host = s->meta_host;
	s->o.fsdir = s->fsdir;
	s->o.allow_networks = NULL; /* parsed into s->allow; the caller's string is not kept */
	{
		char why[256];

		rc = tide_cidr_parse(opts->allow_networks, &s->allow, why, sizeof(why));
		if (rc != 0) {
			TIDE_LOG(ERR, "allow_networks: %s", why);
			rc = -EINVAL;
			goto fail;
		}
	}

	rc = tide_mc_table_create(&opts->table, &s->table);
	if (rc != 0) {
		TIDE_LOG(ERR, "object table: invalid options (%d)", rc);
		goto fail;
	}
	s->rpc_port = opts->rpc_port;
	if (!opts->defer_rpc) {
		rc = listen_on(s->rpc_address, opts->rpc_port, &s->rpc_lfd, &s->rpc_port);
		if (rc != 0) {
			goto fail;
		}
	}
	if (opts->enable_metrics) {
		rc = listen_on(s->metrics_host, opts->metrics_port, &s->metrics_lfd,
			       &s->metrics_port);
		if (rc != 0) {
			goto fail;
		}
	}
	if (opts->enable_http_metadata) {
		rc = listen_on(s->meta_host, opts->http_metadata_port, &s->meta_lfd, &s->meta_port);
		if (rc != 0) {
			goto fail;
		}
	}
	rc = setup_ctl(s);
	if (rc == 0) {
		rc = setup_workers(s);
	}
	if (rc == 0) {
		rc = -pthread_create(&s->ctl_th, NULL, ctl_main, s);
		s->ctl_started = rc == 0;
	}
	if (rc != 0) {
		goto fail;
	}
	*out = s;
	return 0;
fail:
	tide_mc_server_destroy(s);
	return rc;
}

int
tide_mc_server_start_rpc(struct tide_mc_server *s)
{
	int fd = -1, rc;
	uint16_t port = 0;

	if (s == NULL || s->stopped) {
		return -EINVAL;
	}
	if (__atomic_load_n(&s->rpc_lfd, __ATOMIC_ACQUIRE) >= 0) {
		return -EALREADY;
	}
	rc = listen_on(s->rpc_address, s->o.rpc_port, &fd, &port);
	if (rc != 0) {
		return rc;
	}
	s->rpc_port = port;
	/* Clients known from a rebuilt table get a whole TTL from now to ping. */
	tide_mc_table_clients_refresh(s->table, tide_mc_server_now_ms());
	/* Published before the control thread can see an event for it. */
	__atomic_store_n(&s->rpc_lfd, fd, __ATOMIC_RELEASE);
	rc = epoll_add(s->ctl_epfd, fd, EPOLLIN, &s->t_rpc);
	if (rc != 0) {
		TIDE_LOG(ERR, "RPC listener: epoll: %s", strerror(-rc));
	}
	return rc;
}

int
tide_mc_server_hold_replies(struct tide_mc_server *s, uint64_t durable)
{
	if (s == NULL || __atomic_load_n(&s->rpc_lfd, __ATOMIC_ACQUIRE) >= 0) {
		return -EINVAL;
	}
	__atomic_store_n(&s->durable, durable, __ATOMIC_RELEASE);
	s->hold = true;
	return 0;
}

void
tide_mc_server_set_lease_deadline(struct tide_mc_server *s, uint64_t deadline_us)
{
	__atomic_store_n(&s->lease_until_us, deadline_us, __ATOMIC_RELEASE);
}

void
tide_mc_server_set_durable(struct tide_mc_server *s, uint64_t seq)
{
	uint64_t cur = __atomic_load_n(&s->durable, __ATOMIC_RELAXED);

	while (cur < seq && !__atomic_compare_exchange_n(&s->durable, &cur, seq, false,
							 __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
	}
	for (unsigned i = 0; i < s->nw; i++) {
		wake(s->w[i].evfd);
	}
}

int
tide_mc_server_set_ha(struct tide_mc_server *s, const struct tide_mc_ha_view *v)
{
	if (s == NULL || v == NULL || v->role == NULL || v->state == NULL) {
		return -EINVAL;
	}
	pthread_mutex_lock(&s->ha_lock);
	s->ha = true;
	snprintf(s->ha_role, sizeof(s->ha_role), "%s", v->role);
	snprintf(s->ha_state, sizeof(s->ha_state), "%s", v->state);
	snprintf(s->ha_leader, sizeof(s->ha_leader), "%s",
		 v->leader_address != NULL ? v->leader_address : "");
	s->ha_view = v->view_version;
	pthread_mutex_unlock(&s->ha_lock);
	return 0;
}

uint16_t
tide_mc_server_rpc_port(const struct tide_mc_server *s)
{
	return s->rpc_port;
}

uint16_t
tide_mc_server_metrics_port(const struct tide_mc_server *s)
{
	return s->metrics_port;
}

uint16_t
tide_mc_server_metadata_port(const struct tide_mc_server *s)
{
	return s->meta_port;
}

struct tide_mc_table *
tide_mc_server_table(struct tide_mc_server *s)
{
	return s->table;
}

static uint64_t
ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void
tide_mc_server_stats_get(struct tide_mc_server *s, struct tide_mc_server_stats *out)
{
	uint64_t closed = 0;
	unsigned i, f, b;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < s->nw; i++) {
		const struct mc_wstats *st = &s->w[i].st;

		closed += ld(&st->closed);
		out->closed_proto += ld(&st->closed_proto);
		out->refused_large += ld(&st->refused_large);
		out->bad_body += ld(&st->bad_body);
		out->unknown_fn += ld(&st->unknown_fn);
		for (f = 0; f < TIDE_MC_FN_COUNT; f++) {
			out->fn[f].calls += ld(&st->fn[f].calls);
			out->fn[f].failures += ld(&st->fn[f].failures);
			out->fn[f].lat_sum_us += ld(&st->fn[f].lat_sum_us);
			for (b = 0; b < 12; b++) {
				out->fn[f].lat_bucket[b] += ld(&st->fn[f].lat_bucket[b]);
			}
		}
	}
	out->accepted = atomic_load(&s->accepted);
	out->open = out->accepted >= closed ? out->accepted - closed : 0;
	out->http_open[0] = ld(&s->http_open[0]);
	out->http_open[1] = ld(&s->http_open[1]);
	out->http_evicted = ld(&s->http_evicted);
	out->http_timed_out = ld(&s->http_timed_out);
	out->metadata_bytes = ld(&s->meta_bytes);
	out->refused_net = ld(&s->refused_net);
}
