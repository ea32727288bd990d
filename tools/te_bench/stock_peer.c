/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-stock-peer: a peer that speaks Mooncake's TCP transport the way stock
 * Mooncake's TcpTransport does (shared/spec/mooncake-master.md 6.5), to measure
 * how a Tide target serves stock initiators, and the same initiator against a
 * target modelled on stock's server.
 *
 *   initiator: tide-stock-peer --mode=initiator --segment_id=HOST:RPC_PORT \
 *                  --operation=read --block_size=4096 --batch_size=32 [--pool]
 *   target:    tide-stock-peer --mode=target [--rpc_port=P] [--buffer_size=256M]
 *
 * Initiator, as stock with MC_TCP_ENABLE_CONNECTION_POOL unset (--pool=false):
 * for every slice the submitting thread resolves and connect()s a new socket
 * synchronously (TCP_NODELAY), then an I/O thread runs the session
 * asynchronously (header, payload; v2 status; data) and closes the socket. With
 * --pool, --lanes persistent connections per peer (stock: 4) each carry one
 * request at a time. The framing is v2 when the target's descriptor says
 * tcp_proto_version >= 2 (stock's rule) unless --proto=1. Batches of
 * --batch_size requests at consecutive offsets of the target's first buffer,
 * waited for as a whole; every status checked.
 *
 * Target, as stock's TcpTransport server: one thread accepts and serves every
 * connection (asio's single io_context); per request it reads the 24-byte
 * header, checks the address range, and answers per v1/v2 (status word then
 * data in 64 KiB writes for READ; payload then status for WRITE), then waits for
 * the next header on the same connection. Its descriptor is published over
 * P2PHANDSHAKE with tcp_proto_version 2.
 *
 * Bounds: at most MAX_BATCH slices in flight; one epoll loop per process side;
 * no allocation per slice. Output: one summary line with MiB/s, slices/s,
 * connections opened and the process's CPU time per slice.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "te_frame.h"
#include "te_meta.h"
#include "tide_clock.h"
#include "tide_flags.h"
#include "tide_log.h"

#define MAX_BATCH  1024
#define MAX_LANES  64
#define CHUNK      (64 * 1024) /* stock's getChunkSize() default */
#define EP_BATCH   64
#define TIMEOUT_MS 10000 /* a slice with no progress this long fails the run */

static const char *mode = "initiator";
static const char *segment_id = "";
static const char *operation = "read";
static const char *host = "127.0.0.1";
static uint64_t block_size = 4096, batch_size = 32, buffer_size = 256ull << 20;
static uint64_t rpc_port = 0, lanes = 4, proto = 0;
static double duration = 4;
static bool pool = false, verify = false;

static const char *const modes[] = {"target", "initiator", NULL};
static const char *const ops[] = {"read", "write", NULL};

static const struct tide_flag flag_tab[] = {
	{"mode", TIDE_FLAG_STR, &mode, "target or initiator", .choices = modes},
	{"segment_id", TIDE_FLAG_STR, &segment_id, "initiator: target's HOST:RPC_PORT"},
	{"operation", TIDE_FLAG_STR, &operation, "read or write", .choices = ops},
	{"block_size", TIDE_FLAG_SIZE, &block_size, "bytes per slice", 1, 64 << 20},
	{"batch_size", TIDE_FLAG_U64, &batch_size, "slices per batch", 1, MAX_BATCH},
	{"duration", TIDE_FLAG_DOUBLE, &duration, "initiator seconds", 0.1, 3600},
	{"pool", TIDE_FLAG_BOOL, &pool, "MC_TCP_ENABLE_CONNECTION_POOL=1: fixed lanes"},
	{"lanes", TIDE_FLAG_U64, &lanes, "lanes per peer with --pool (stock: 4)", 1, MAX_LANES},
	{"verify", TIDE_FLAG_BOOL, &verify,
	 "initiator: each round writes a pattern, reads it back, compares (needs v2)"},
	{"proto", TIDE_FLAG_U64, &proto, "1 forces v1 (MC_TCP_PROTO=1); 0 follows the descriptor",
	 0, 2},
	{"buffer_size", TIDE_FLAG_SIZE, &buffer_size, "target: registered bytes", 1 << 20,
	 1ull << 36},
	{"rpc_port", TIDE_FLAG_U64, &rpc_port, "target: handshake port (0 = ephemeral)", 0, 65535},
	{"host", TIDE_FLAG_STR, &host, "target: address peers reach us at"},
};

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double
cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* ------------------------------------------------------------------------ */
/* Initiator                                                                */

enum sess_state { S_FREE, S_SEND, S_STATUS, S_DATA };

/* One request on one connection (a one-shot socket or a lane). */
struct sess {
	int fd;
	enum sess_state st;
	bool lane;
	uint8_t hdr[TE_FRAME_HDR_LEN];
	uint8_t status[TE_FRAME_STATUS_LEN];
	size_t sent, got; /* of header + payload, of status / data */
	uint8_t *local;
	uint64_t len;
};

struct ini {
	int epfd, evfd;
	struct sockaddr_in sa;
	uint64_t raddr;
	bool v2, write;
	struct sess one[MAX_BATCH]; /* pool off: slot i = slice i of the batch */
	struct sess lane[MAX_LANES];
	/* the current batch */
	uint8_t *local;
	uint64_t roff;
	uint32_t next; /* pool: next slice to hand to a lane */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t done;
	int err;
	uint64_t conns;
	atomic_bool quit;
};

static void
sess_start(struct ini *in, struct sess *s, uint32_t i)
{
	struct te_frame_hdr h = {
		.size = block_size,
		.addr = in->raddr + in->roff + (uint64_t)i * block_size,
		.op = in->write ? TE_FRAME_OP_WRITE : TE_FRAME_OP_READ,
		.proto = in->v2 ? TE_PROTO_V2 : TE_PROTO_V1,
	};

	(void)te_frame_hdr_encode(&h, s->hdr);
	s->local = in->local + (uint64_t)i * block_size;
	s->len = block_size;
	s->sent = 0;
	s->got = 0;
	s->st = S_SEND;
}

static int
connect_one(struct ini *in)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	/* Stock: asio::connect() (blocking) then no_delay(true). */
	if (connect(fd, (struct sockaddr *)&in->sa, sizeof(in->sa)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (set_nonblock(fd) < 0) {
		close(fd);
		return -EIO;
	}
	in->conns++;
	return fd;
}

static void
batch_add_done(struct ini *in, int err)
{
	pthread_mutex_lock(&in->lock);
	in->done++;
	if (err != 0 && in->err == 0)
		in->err = err;
	pthread_cond_signal(&in->cond);
	pthread_mutex_unlock(&in->lock);
}

/* Pool: give an idle lane the batch's next slice; false when none is left. */
static bool
lane_take(struct ini *in, struct sess *s)
{
	uint32_t i;

	pthread_mutex_lock(&in->lock);
	i = in->next < batch_size ? in->next++ : UINT32_MAX;
	pthread_mutex_unlock(&in->lock);
	if (i == UINT32_MAX) {
		s->st = S_FREE;
		return false;
	}
	sess_start(in, s, i);
	return true;
}

/* Drive a session until it would block. Returns 1 done, 0 blocked, <0 error. */
static int
sess_io(struct ini *in, struct sess *s)
{
	for (;;) {
		ssize_t r;

		switch (s->st) {
		case S_SEND: {
			struct iovec iov[2];
			int n = 0;

			if (s->sent < TE_FRAME_HDR_LEN) {
				iov[n].iov_base = s->hdr + s->sent;
				iov[n++].iov_len = TE_FRAME_HDR_LEN - s->sent;
			}
			if (in->write) {
				size_t off =
					s->sent > TE_FRAME_HDR_LEN ? s->sent - TE_FRAME_HDR_LEN : 0;

				iov[n].iov_base = s->local + off;
				iov[n++].iov_len = s->len - off;
			}
			r = writev(s->fd, iov, n);
			if (r < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : -errno;
			s->sent += (size_t)r;
			if (s->sent < TE_FRAME_HDR_LEN + (in->write ? s->len : 0))
				continue;
			s->st = in->v2 ? S_STATUS : S_DATA;
			if (in->write && !in->v2)
				return 1; /* v1 WRITE: no reply */
			break;
		}
		case S_STATUS:
			r = read(s->fd, s->status + s->got, TE_FRAME_STATUS_LEN - s->got);
			if (r == 0)
				return -ECONNRESET;
			if (r < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : -errno;
			s->got += (size_t)r;
			if (s->got < TE_FRAME_STATUS_LEN)
				continue;
			if (te_frame_status_decode(s->status) != TE_FRAME_ST_OK)
				return -EFAULT;
			if (in->write)
				return 1;
			s->got = 0;
			s->st = S_DATA;
			break;
		case S_DATA:
			r = read(s->fd, s->local + s->got, s->len - s->got);
			if (r == 0)
				return -ECONNRESET;
			if (r < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : -errno;
			s->got += (size_t)r;
			if (s->got == s->len)
				return 1;
			break;
		case S_FREE:
			return 0;
		}
	}
}

static void
sess_event(struct ini *in, struct sess *s)
{
	for (;;) {
		int rc = sess_io(in, s);

		if (rc == 0)
			return;
		if (!s->lane || rc < 0) {
			/* One-shot: stock closes the socket when the session ends. */
			epoll_ctl(in->epfd, EPOLL_CTL_DEL, s->fd, NULL);
			close(s->fd);
			s->fd = -1;
			s->st = S_FREE;
			batch_add_done(in, rc < 0 ? rc : 0);
			return;
		}
		batch_add_done(in, 0);
		if (!lane_take(in, s))
			return;
	}
}

static void *
io_main(void *arg)
{
	struct ini *in = arg;
	struct epoll_event evs[EP_BATCH];

	while (!atomic_load(&in->quit)) {
		int n = epoll_wait(in->epfd, evs, EP_BATCH, 100);

		for (int i = 0; i < n; i++) {
			struct sess *s = evs[i].data.ptr;

			if (s == NULL) { /* pool: a batch was posted; start the idle lanes */
				uint64_t v;

				if (read(in->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					return NULL;
				for (unsigned l = 0; l < lanes; l++) {
					struct sess *ln = &in->lane[l];

					if (ln->fd >= 0 && ln->st == S_FREE && lane_take(in, ln))
						sess_event(in, ln);
				}
				continue;
			}
			sess_event(in, s);
		}
	}
	return NULL;
}

static int
ini_fetch(struct ini *in, char *err, size_t errlen)
{
	struct te_meta *m = NULL;
	struct te_desc *d = NULL;
	char h[256];
	int rc;

	rc = te_meta_open("P2PHANDSHAKE", NULL, 0, 3000, &m, err, errlen);
	if (rc == 0)
		rc = te_meta_fetch(m, segment_id, &d, h, sizeof(h), err, errlen);
	if (rc == 0 && (d->nbufs == 0 || d->tcp_data_port == 0)) {
		snprintf(err, errlen, "descriptor has no buffer or no tcp_data_port");
		rc = -EPROTO;
	}
	if (rc == 0) {
		in->sa.sin_family = AF_INET;
		in->sa.sin_port = htons(d->tcp_data_port);
		if (inet_pton(AF_INET, h, &in->sa.sin_addr) != 1) {
			snprintf(err, errlen, "host is not an IPv4 address");
			rc = -EINVAL;
		}
		in->raddr = d->bufs[0].addr;
		if (d->bufs[0].length < batch_size * block_size) {
			snprintf(err, errlen, "target buffer %" PRIu64 " B < one batch",
				 d->bufs[0].length);
			rc = -ENOSPC;
		}
		buffer_size = d->bufs[0].length;
		in->v2 = proto != 1 && d->tcp_proto_version >= TE_PROTO_V2;
	}
	te_desc_free(d);
	te_meta_close(m);
	return rc;
}

/* Run one batch: returns 0 or the first slice error. */
static int
run_batch(struct ini *in)
{
	int rc;

	pthread_mutex_lock(&in->lock);
	in->done = 0;
	in->err = 0;
	in->next = 0;
	pthread_mutex_unlock(&in->lock);
	if (!pool) {
		for (uint32_t i = 0; i < batch_size; i++) {
			struct sess *s = &in->one[i];
			struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = s};
			int fd = connect_one(in);

			if (fd < 0) {
				batch_add_done(in, fd);
				continue;
			}
			s->fd = fd;
			s->lane = false;
			sess_start(in, s, i);
			/* From here the I/O thread owns s. */
			if (epoll_ctl(in->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
				close(fd);
				batch_add_done(in, -errno);
			}
		}
	} else {
		uint64_t one = 1;

		for (uint32_t l = 0; l < lanes; l++) {
			struct sess *s = &in->lane[l];
			struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET,
						 .data.ptr = s};
			int fd;

			if (s->fd >= 0)
				continue;
			fd = connect_one(in);
			if (fd < 0)
				return fd;
			s->fd = fd;
			s->lane = true;
			s->st = S_FREE;
			/* From here the I/O thread owns s (it starts idle lanes). */
			if (epoll_ctl(in->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
				return -errno;
		}
		if (write(in->evfd, &one, sizeof(one)) < 0)
			return -errno;
	}
	uint64_t deadline = tide_mono_ns() + (uint64_t)TIMEOUT_MS * 1000000ULL;

	pthread_mutex_lock(&in->lock);
	while (in->done < batch_size && tide_mono_ns() < deadline) {
		struct timespec ts = tide_clock_deadline(CLOCK_REALTIME, 100);

		pthread_cond_timedwait(&in->cond, &in->lock, &ts);
	}
	rc = in->done < batch_size ? -ETIMEDOUT : in->err;
	pthread_mutex_unlock(&in->lock);
	return rc;
}

static int
initiator(void)
{
	struct ini *in = calloc(1, sizeof(*in));
	char err[256] = "";
	pthread_t io;
	uint8_t *src, *back;
	uint64_t slices = 0, mismatched = 0, t0, span, nbatch;
	double c0, secs, cpu;
	int rc;

	if (in == NULL)
		return 1;
	if (segment_id[0] == '\0') {
		fprintf(stderr, "tide-stock-peer: --segment_id is required in initiator mode\n");
		return 2;
	}
	rc = ini_fetch(in, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tide-stock-peer: segment '%s': %s (%s)\n", segment_id,
			strerror(-rc), err);
		return 1;
	}
	in->write = strcmp(operation, "write") == 0;
	if (verify && !in->v2) {
		fprintf(stderr,
			"tide-stock-peer: --verify needs v2 framing (the target's descriptor "
			"says v1, or --proto=1): v1 WRITEs are not acknowledged\n");
		return 2;
	}
	in->local = aligned_alloc(4096, (batch_size * block_size + 4095) & ~4095ULL);
	src = in->local;
	back = aligned_alloc(4096, (batch_size * block_size + 4095) & ~4095ULL);
	if (back == NULL)
		return 1;
	in->epfd = epoll_create1(EPOLL_CLOEXEC);
	in->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (in->local == NULL || in->epfd < 0 || in->evfd < 0)
		return 1;
	{
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

		if (epoll_ctl(in->epfd, EPOLL_CTL_ADD, in->evfd, &ev) < 0)
			return 1;
	}
	memset(in->local, 0x5a, batch_size * block_size);
	for (unsigned l = 0; l < MAX_LANES; l++)
		in->lane[l].fd = -1;
	pthread_mutex_init(&in->lock, NULL);
	pthread_cond_init(&in->cond, NULL);
	if (pthread_create(&io, NULL, io_main, in) != 0)
		return 1;
	span = batch_size * block_size;
	nbatch = buffer_size / span;
	c0 = cpu_s();
	t0 = tide_mono_ns();
	rc = 0;
	for (uint64_t b = 0; !stop && tide_mono_ns() - t0 < (uint64_t)(duration * 1e9); b++) {
		in->roff = (b % nbatch) * span;
		if (!verify) {
			rc = run_batch(in);
			if (rc != 0)
				break;
			slices += batch_size;
			continue;
		}
		/* v2 acknowledges a WRITE once applied, so the READ that follows on
		 * other connections sees it (v1 gives no such order). */
		for (uint64_t i = 0; i < span; i += 8) {
			uint64_t v = (in->roff + i) * 0x9E3779B97F4A7C15ULL ^ b;

			memcpy(in->local + i, &v, span - i < 8 ? span - i : 8);
		}
		in->write = true;
		rc = run_batch(in);
		in->write = false;
		in->local = back;
		if (rc == 0)
			rc = run_batch(in);
		in->local = src;
		if (rc != 0)
			break;
		if (memcmp(src, back, span) != 0) {
			mismatched++;
			break;
		}
		slices += 2 * batch_size;
	}
	secs = (double)(tide_mono_ns() - t0) / 1e9;
	cpu = cpu_s() - c0;
	atomic_store(&in->quit, true);
	pthread_join(io, NULL);
	for (unsigned l = 0; l < MAX_LANES; l++)
		if (in->lane[l].fd >= 0)
			close(in->lane[l].fd);
	if (rc != 0) {
		fprintf(stderr, "tide-stock-peer: a slice failed: %s\n", strerror(-rc));
		return 1;
	}
	if (mismatched != 0) {
		fprintf(stderr, "tide-stock-peer: data read back differs from what was written\n");
		return 1;
	}
	printf("tide-stock-peer: pool=%s lanes=%u framing=v%d operation=%s block_size=%" PRIu64
	       " batch_size=%" PRIu64 ": %.1f MiB/s, %.0f slices/s, %" PRIu64
	       " connections, initiator CPU %.1f us per slice, %" PRIu64 " bytes in %.2f s%s\n",
	       pool ? "on" : "off", pool ? (unsigned)lanes : 0, in->v2 ? 2 : 1,
	       verify ? "verify" : operation, block_size, batch_size,
	       (double)(slices * block_size) / secs / (1 << 20), (double)slices / secs, in->conns,
	       slices ? cpu * 1e6 / (double)slices : 0.0, slices * block_size, secs,
	       verify ? ", verified" : "");
	close(in->epfd);
	close(in->evfd);
	free(src);
	free(back);
	free(in);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Target: stock's server model, one thread                                 */

enum srv_state { R_HDR, R_BODY, W_STATUS, W_BODY };

struct srv {
	int fd;
	enum srv_state st;
	uint8_t hdr[TE_FRAME_HDR_LEN];
	uint8_t status[TE_FRAME_STATUS_LEN];
	size_t off;
	uint8_t *addr;
	uint64_t size;
	bool v2, read, reject;
};

static uint8_t *tbuf;
static uint64_t served, refused;

/* Drive a server connection until it blocks; false when it is to be closed. */
static bool
srv_io(struct srv *c)
{
	for (;;) {
		ssize_t r;

		switch (c->st) {
		case R_HDR:
			r = read(c->fd, c->hdr + c->off, TE_FRAME_HDR_LEN - c->off);
			if (r <= 0)
				return r < 0 && (errno == EAGAIN || errno == EINTR);
			c->off += (size_t)r;
			if (c->off < TE_FRAME_HDR_LEN)
				break;
			{
				struct te_frame_hdr h;

				/* The engine's decoder; only Mooncake's v1/v2 are served here. */
				if (te_frame_hdr_decode(c->hdr, TE_FRAME_HDR_LEN, &h) != 0 ||
				    h.proto == TE_PROTO_NATIVE)
					return false;
				c->v2 = h.proto == TE_PROTO_V2;
				c->read = h.op == TE_FRAME_OP_READ;
				c->size = h.size;
				c->addr = (uint8_t *)(uintptr_t)h.addr;
				c->off = 0;
				if (h.size == 0 || h.addr < (uintptr_t)tbuf ||
				    h.size > buffer_size ||
				    h.addr - (uintptr_t)tbuf > buffer_size - h.size) {
					refused++;
					if (!c->v2)
						return false;
					c->reject = true;
					te_frame_status_encode(TE_FRAME_ST_REJECTED, c->status);
					c->st = W_STATUS;
					break;
				}
				if (!c->read) {
					c->st = R_BODY;
				} else if (c->v2) {
					te_frame_status_encode(TE_FRAME_ST_OK, c->status);
					c->st = W_STATUS;
				} else {
					c->st = W_BODY;
				}
			}
			break;
		case R_BODY:
			r = read(c->fd, c->addr + c->off, c->size - c->off);
			if (r <= 0)
				return r < 0 && (errno == EAGAIN || errno == EINTR);
			c->off += (size_t)r;
			if (c->off < c->size)
				break;
			served++;
			c->off = 0;
			if (c->v2) {
				te_frame_status_encode(TE_FRAME_ST_OK, c->status);
				c->st = W_STATUS;
			} else {
				c->st = R_HDR;
			}
			break;
		case W_STATUS:
			r = send(c->fd, c->status + c->off, TE_FRAME_STATUS_LEN - c->off,
				 MSG_NOSIGNAL);
			if (r < 0)
				return errno == EAGAIN || errno == EINTR;
			c->off += (size_t)r;
			if (c->off < TE_FRAME_STATUS_LEN)
				break;
			c->off = 0;
			if (c->reject)
				return false; /* stock: status REJECTED, then close */
			c->st = c->read ? W_BODY : R_HDR;
			break;
		case W_BODY: {
			size_t k = c->size - c->off < CHUNK ? c->size - c->off : CHUNK;

			r = send(c->fd, c->addr + c->off, k, MSG_NOSIGNAL);
			if (r < 0)
				return errno == EAGAIN || errno == EINTR;
			c->off += (size_t)r;
			if (c->off < c->size)
				break;
			served++;
			c->off = 0;
			c->st = R_HDR;
			break;
		}
		}
	}
}

static int
target(void)
{
	struct te_meta *m = NULL;
	struct te_desc d = {0};
	struct te_desc_buf b = {0};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	char err[256] = "";
	int one = 1, lfd, epfd, rc;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

	tbuf = aligned_alloc(4096, buffer_size);
	if (tbuf == NULL)
		return 1;
	memset(tbuf, 0xa5, buffer_size);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	(void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 512) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		fprintf(stderr, "tide-stock-peer: data server: %s\n", strerror(errno));
		return 1;
	}
	rc = te_meta_open("P2PHANDSHAKE", host, (uint16_t)rpc_port, 3000, &m, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tide-stock-peer: handshake daemon: %s (%s)\n", strerror(-rc), err);
		return 1;
	}
	snprintf(d.name, sizeof(d.name), "%s:%u", host, te_meta_rpc_port(m));
	snprintf(d.protocol, sizeof(d.protocol), "tcp");
	d.tcp_data_port = ntohs(sa.sin_port);
	d.tcp_proto_version = TE_PROTO_V2;
	snprintf(b.name, sizeof(b.name), "cpu:0");
	b.addr = (uintptr_t)tbuf;
	b.length = buffer_size;
	d.nbufs = 1;
	d.bufs = &b;
	rc = te_meta_publish(m, &d, host);
	if (rc != 0) {
		fprintf(stderr, "tide-stock-peer: publish: %s\n", strerror(-rc));
		return 1;
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
	printf("tide-stock-peer: target '%s' ready: stock server model (one thread), data port %u, "
	       "buffer %p (%" PRIu64 " bytes)\n",
	       d.name, d.tcp_data_port, (void *)tbuf, buffer_size);
	fflush(stdout);
	while (!stop) {
		struct epoll_event evs[EP_BATCH];
		int n = epoll_wait(epfd, evs, EP_BATCH, 200);

		for (int i = 0; i < n; i++) {
			struct srv *c = evs[i].data.ptr;

			if (c == NULL) {
				int fd;

				while ((fd = accept4(lfd, NULL, NULL,
						     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event cev = {.events = EPOLLIN | EPOLLOUT |
									    EPOLLET};

					c = calloc(1, sizeof(*c));
					if (c == NULL) {
						close(fd);
						continue;
					}
					c->fd = fd;
					cev.data.ptr = c;
					(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
							 sizeof(one));
					epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev);
					if (!srv_io(c)) {
						close(fd);
						free(c);
					}
				}
				continue;
			}
			if (!srv_io(c)) {
				close(c->fd);
				free(c);
			}
		}
	}
	printf("tide-stock-peer: target served %" PRIu64 " requests, refused %" PRIu64 "\n", served,
	       refused);
	te_meta_close(m);
	close(lfd);
	close(epfd);
	free(tbuf);
	return 0;
}

int
main(int argc, char **argv)
{
	char err[256];
	bool help = false;

	if (tide_flags_parse(flag_tab, sizeof(flag_tab) / sizeof(flag_tab[0]), argc, argv, &help,
			     err, sizeof(err)) != 0) {
		fprintf(stderr, "tide-stock-peer: %s\n", err);
		return 2;
	}
	if (help) {
		printf("usage: tide-stock-peer --mode=target|initiator [flags]\n");
		tide_flags_usage(flag_tab, sizeof(flag_tab) / sizeof(flag_tab[0]));
		return 0;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	tide_log_set_level(TIDE_LOG_WARN);
	return strcmp(mode, "target") == 0 ? target() : initiator();
}
