/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel-socket TCP transport (te_tcp_kernel_ops, seam in te_xport.h).
 *
 * Threads: io_threads epoll loops. Thread 0 also owns the listener and hands
 * accepted connections out round-robin. A server connection that stock-framed
 * (v1/v2) requests reuse (a pooled lane) moves, after its second request, to
 * its peer's home thread: a stock initiator's lanes are sequential, and spread
 * over threads each one sleeps between requests, so every request paid a
 * cross-CPU wake-up (pooled 64 KiB reads 0.77x a one-thread server, same run). A peer has
 * conns_per_peer client "slots"; slot i of the n-th opened peer is owned by thread (n + i) %
 * io_threads for its whole life, so a peer's connections run on several
 * threads and only the owner ever touches a slot's socket and session, except
 * while a caller has borrowed an idle slot for one small request ("Inline
 * requests" below: the caller sends and receives it itself).
 *
 * Slices: submit() appends to the peer's mutex-protected queue and kicks
 * (eventfd) the owners of the slots that should work; an UP slot pulls its
 * share of the queue into its session's window (native: pipelined; v1/v2:
 * one at a time, as Mooncake servers are sequential). Connections open
 * lazily with a non-blocking connect bounded by connect_timeout_ms.
 *
 * Failure: a slot that loses its connection fails its own slices; when no
 * slot of the peer is up or connecting any more, the queued slices fail too
 * (with the same error), so nothing waits on a dead peer. The next submit
 * reconnects. A connection with slices in flight and no byte moved for
 * io_timeout_ms is cut with -ETIMEDOUT; a server connection stuck mid-request
 * that long is closed (it may hold a check() reference).
 *
 * Bounds: per connection one 64 KiB staging buffer, at most IOV_BATCH iovecs
 * per sendmsg, RX_BUDGET reads per wake-up (level-triggered epoll resumes).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "te_sess.h"
#include "te_tcp_kernel.h"
#include "te_xport.h"
#include "tide_sock.h"
#include "tide_clock.h"
#include "tide_log.h"

#define STAGE_LEN        (64 * 1024)
#define IOV_BATCH        64
#define RX_BUDGET        16
#define IO_ROUNDS        32 /* pull+send rounds per turn */
#define EP_BATCH         64
#define TICK_MS          20
#define MAX_IO_THREADS   64
#define BORROW_WAIT_NS   10000 /* own_borrow: once per inline_begin */
#define MAX_CONNS        64
#define NATIVE_WINDOW    64           /* slices in flight per native connection */
#define NATIVE_WIN_BYTES (8ULL << 20) /* and bytes (at least 2 slices) */
#define LISTEN_BACKLOG   512
#define NOTSENT_LOWAT    (64 * 1024)
#define DEF_CONNECT_MS   3000 /* connect_timeout_ms 0 */
#define ACCEPT_PAUSE_MS  100
/* Payloads from this size on are read straight into place even at the cost of
 * one more read() per request (for the header): a copy of >= 32 KiB costs
 * more than a system call. Smaller requests are read in batches through the
 * staging area. */
#define BIG_PAYLOAD (32 * 1024)

enum conn_kind { K_EVFD, K_LISTEN, K_SRV, K_SLOT };

/* Common head of everything registered in an epoll set. */
struct conn {
	enum conn_kind kind;
	int fd;
	uint32_t ev; /* registered mask; 0 = not registered */
	struct io_thread *th;
};

struct srv_conn {
	struct conn c;
	struct te_srv_sess *sess;
	uint8_t *stage;
	size_t st_off, st_len; /* staged bytes the session did not take yet */
	bool big;              /* the last payload was >= BIG_PAYLOAD */
	bool placed;           /* srv_place() decided (at most once) */
	uint32_t peer_hash;    /* of the peer's address: its home thread */
	uint64_t progress_ns;
	struct srv_conn *next, *prev;
};

enum slot_state { SLOT_IDLE, SLOT_CONNECTING, SLOT_UP };

struct slot {
	struct conn c;
	struct te_xpeer *peer;
	enum slot_state st;
	struct te_cli_sess *sess;
	uint8_t *stage;
	uint64_t deadline_ns; /* connect */
	uint64_t progress_ns;
	bool acked; /* peer_close handled */
	bool big;   /* the last READ data was >= BIG_PAYLOAD */
	bool listed;
	struct slot *lnext, *lprev; /* owner's list of slots with a socket */
	/* cross-thread kick */
	atomic_bool kicked;    /* queued in the owner's kick list */
	atomic_bool servicing; /* the owner is inside slot_service() */
	struct slot *knext;
	/* Who may touch the slot now: OWN_* bits (see "Inline requests"). */
	atomic_uint own;
	int hb_err; /* a borrower handed the connection back broken: slot_down(hb_err) */
};

struct te_xpeer {
	struct te_xport *x;
	struct te_peer_addr addr;
	struct sockaddr_in sa;
	pthread_mutex_t lock; /* queue, counters, closing */
	pthread_cond_t cond;
	struct te_slice *qhead, *qtail;
	uint32_t qlen;
	uint32_t n_up, n_connecting;
	bool closing;
	int close_err;
	uint32_t acks;
	atomic_uint borrows; /* slots borrowed by callers (inline); peer_close waits for 0 */
	uint32_t nslots;
	struct slot *slots;
	struct te_xpeer *next, *prev; /* x->peers */
};

struct io_thread {
	struct te_xport *x;
	uint32_t idx;
	pthread_t tid;
	bool started;
	int epfd;
	struct conn evc;
	pthread_mutex_t lock; /* kicks, adopt */
	struct slot *kicks;
	struct srv_conn *adopt;
	struct slot *slots; /* listed slots (owner only) */
	struct srv_conn *srvs;
	atomic_bool stop;
};

struct te_xport {
	struct te_xport_cfg cfg;
	struct conn lc; /* listener, on thread 0 */
	uint16_t port;
	uint32_t nth;
	struct io_thread *th;
	pthread_mutex_t lock; /* peers, peer_seq */
	struct te_xpeer *peers;
	uint32_t peer_seq;
	uint32_t accept_rr;
	uint64_t accept_resume_ns; /* listener paused until (thread 0 only); 0: running */
	atomic_uint_fast64_t conn_failures;
	atomic_uint_fast64_t srv_moves;
};

static _Thread_local struct io_thread *cur_thread;

static void
ep_set(struct conn *c, uint32_t ev)
{
	struct epoll_event e = {.events = ev, .data.ptr = c};
	int op;

	if (ev == c->ev)
		return;
	if (ev == 0) {
		(void)epoll_ctl(c->th->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		c->ev = 0;
		return;
	}
	op = c->ev == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
	if (epoll_ctl(c->th->epfd, op, c->fd, &e) == 0)
		c->ev = ev;
	else
		TIDE_LOG(ERR, "epoll_ctl(fd %d): %s", c->fd, strerror(errno));
}

static void
wake(struct io_thread *t)
{
	uint64_t one = 1;

	if (write(t->evc.fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		TIDE_LOG(ERR, "eventfd write: %s", strerror(errno));
}

static void
kick(struct slot *sl)
{
	struct io_thread *t = sl->c.th;

	if (atomic_exchange(&sl->kicked, true))
		return;
	pthread_mutex_lock(&t->lock);
	sl->knext = t->kicks;
	t->kicks = sl;
	pthread_mutex_unlock(&t->lock);
	wake(t);
}

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() atomic_signal_fence(memory_order_seq_cst)
#endif

/*
 * Slot ownership (slot.own). OWN_IO: the owner thread is inside a slot entry
 * point (an epoll event, a kick, its timers); OWN_CALLER: a caller thread
 * borrowed the slot for an inline request; OWN_MISSED: the owner found it
 * borrowed and skipped, so the borrower kicks it on return. The owner never
 * waits for a borrower; a borrower waits at most BORROW_WAIT_NS for the owner.
 */
#define OWN_IO     1u
#define OWN_CALLER 2u
#define OWN_MISSED 4u

/* Owner thread: may it work on sl now? false: borrowed (noted, it will be kicked). */
static bool
own_enter(struct slot *sl)
{
	unsigned v = atomic_load(&sl->own);

	for (;;) {
		if (v & OWN_CALLER) {
			if (atomic_compare_exchange_weak(&sl->own, &v, v | OWN_MISSED))
				return false;
		} else if (atomic_compare_exchange_weak(&sl->own, &v, v | OWN_IO)) {
			return true;
		}
	}
}

static void
own_leave(struct slot *sl)
{
	atomic_fetch_and(&sl->own, ~OWN_IO);
}

/*
 * A caller takes an idle slot (neither the owner nor another caller inside).
 * With wait_ns, it waits that long for the owner to leave: the owner completes
 * a request from inside slot_rx and leaves a few microseconds later, so a
 * caller that got its previous reply from the owner would otherwise find it
 * still inside and fall back to the io threads again and again.
 */
static bool
own_borrow(struct slot *sl, uint64_t wait_ns)
{
	uint64_t until = 0;

	for (unsigned k = 0;; k++) {
		unsigned v = atomic_load_explicit(&sl->own, memory_order_relaxed);

		if (v == 0 && atomic_compare_exchange_strong(&sl->own, &v, OWN_CALLER))
			return true;
		if ((v & OWN_CALLER) || wait_ns == 0)
			return false;
		if ((k & 15) == 0) {
			uint64_t now = tide_mono_ns();

			if (until == 0)
				until = now + wait_ns;
			else if (now >= until)
				return false;
		}
		cpu_relax();
	}
}

/* The borrower gives sl back; the owner gets a kick when it skipped work
 * meanwhile or must continue (force). The peer is still pinned by borrows. */
static void
own_return(struct slot *sl, bool force)
{
	unsigned v = atomic_exchange(&sl->own, 0u);

	if ((v & OWN_MISSED) || force)
		kick(sl);
}

static void
fail_list(struct te_slice *s, int err)
{
	while (s != NULL) {
		struct te_slice *n = s->next;

		s->next = NULL;
		te_slice_done(s, err);
		s = n;
	}
}

static int
sock_err(int e)
{
	switch (e) {
	case EPIPE:
	case ECONNRESET:
	case ECONNABORTED:
		return -ECONNRESET;
	case ENETUNREACH:
	case EHOSTDOWN:
		return -EHOSTUNREACH;
	default:
		return -e;
	}
}

/* ------------------------------------------------------------------------ */
/* Client slots                                                             */

static void
slot_list(struct slot *sl)
{
	struct io_thread *t = sl->c.th;

	if (sl->listed)
		return;
	sl->listed = true;
	sl->lprev = NULL;
	sl->lnext = t->slots;
	if (t->slots != NULL)
		t->slots->lprev = sl;
	t->slots = sl;
}

static void
slot_unlist(struct slot *sl)
{
	struct io_thread *t = sl->c.th;

	if (!sl->listed)
		return;
	if (sl->lprev != NULL)
		sl->lprev->lnext = sl->lnext;
	else
		t->slots = sl->lnext;
	if (sl->lnext != NULL)
		sl->lnext->lprev = sl->lprev;
	sl->listed = false;
}

static void
sess_done(void *arg, struct te_slice *s, int err)
{
	(void)arg;
	s->next = NULL;
	te_slice_done(s, err);
}

static void
slot_close_fd(struct slot *sl)
{
	if (sl->c.fd >= 0) {
		ep_set(&sl->c, 0);
		close(sl->c.fd);
		sl->c.fd = -1;
	}
	slot_unlist(sl);
}

/*
 * The slot's connection ended (or never came up) with err. Fails the slot's own
 * slices; the peer's queue fails too when no other slot can still serve it.
 * A v2 refusal (-EFAULT) is a normal close: the queue stays and we reconnect.
 */
static void
slot_down(struct slot *sl, int err)
{
	struct te_xpeer *p = sl->peer;
	struct te_slice *q = NULL;
	enum slot_state was = sl->st;
	bool again = false;

	if (sl->sess != NULL) {
		te_cli_sess_destroy(sl->sess, err);
		sl->sess = NULL;
	}
	slot_close_fd(sl);
	sl->st = SLOT_IDLE;
	pthread_mutex_lock(&p->lock);
	if (was == SLOT_UP)
		p->n_up--;
	else if (was == SLOT_CONNECTING)
		p->n_connecting--;
	if (err == -EFAULT && !p->closing) {
		again = p->qlen > 0;
	} else if (p->n_up == 0 && p->n_connecting == 0) {
		q = p->qhead;
		p->qhead = p->qtail = NULL;
		p->qlen = 0;
	}
	pthread_mutex_unlock(&p->lock);
	if (err != -EFAULT && err != -ECANCELED)
		atomic_fetch_add(&p->x->conn_failures, 1);
	if (err != -EFAULT && err != -ECANCELED)
		TIDE_LOG_RATELIMIT(WARN, 5, "%s:%u (v%u): connection %s: %s", p->addr.host,
				   p->addr.data_port, p->addr.proto,
				   was == SLOT_UP ? "lost" : "failed", strerror(-err));
	fail_list(q, err);
	if (again)
		kick(sl);
}

static void slot_io(struct slot *sl);
static int slot_rx_raw(struct slot *sl);

static void
slot_up(struct slot *sl)
{
	struct te_xpeer *p = sl->peer;
	struct te_xport *x = p->x;
	struct te_cli_sess_cfg cc = {
		.proto = p->addr.proto,
		.instance = p->addr.proto == TE_PROTO_NATIVE ? p->addr.instance : 0,
		.max_inflight = NATIVE_WINDOW,
		.max_inflight_bytes = NATIVE_WIN_BYTES,
		.done = sess_done,
	};
	int rc;

	if (cc.max_inflight_bytes < 2ULL * x->cfg.slice_size)
		cc.max_inflight_bytes = 2ULL * x->cfg.slice_size;
	if (sl->stage == NULL)
		sl->stage = malloc(STAGE_LEN); /* kept until peer_close */
	rc = sl->stage == NULL ? -ENOMEM : te_cli_sess_create(&cc, &sl->sess);
	if (rc < 0) {
		slot_down(sl, rc);
		return;
	}
	pthread_mutex_lock(&p->lock);
	p->n_connecting--;
	p->n_up++;
	pthread_mutex_unlock(&p->lock);
	sl->st = SLOT_UP;
	sl->progress_ns = tide_mono_ns();
	ep_set(&sl->c, EPOLLIN);
	slot_io(sl);
}

/*
 * Options of every data socket. TCP_NOTSENT_LOWAT: a large sendmsg on a young
 * connection would queue up to the send buffer beyond the peer's window, and
 * the peer's ACKs would then transmit it from the receiver's recvmsg (loopback
 * runs the whole path in the ACK's context), doubling the reader's CPU per
 * byte; capped, the sender transmits its own data as the window opens. One-shot
 * 1 MiB reads by a stock initiator: 2.3 -> 4.4 GiB/s on loopback.
 */
static void
data_sock_opts(int fd)
{
	int one = 1, lowat = NOTSENT_LOWAT;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
}

static void
slot_connect(struct slot *sl)
{
	struct te_xpeer *p = sl->peer;
	int fd, rc;
	uint32_t cto;

	pthread_mutex_lock(&p->lock);
	p->n_connecting++;
	pthread_mutex_unlock(&p->lock);
	sl->st = SLOT_CONNECTING;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		slot_down(sl, -errno);
		return;
	}
	data_sock_opts(fd);
	sl->c.fd = fd;
	slot_list(sl);
	rc = connect(fd, (const struct sockaddr *)&p->sa, sizeof(p->sa));
	if (rc == 0) {
		slot_up(sl);
		return;
	}
	if (errno != EINPROGRESS) {
		slot_down(sl, sock_err(errno));
		return;
	}
	cto = p->x->cfg.connect_timeout_ms != 0 ? p->x->cfg.connect_timeout_ms : DEF_CONNECT_MS;
	sl->deadline_ns = tide_mono_ns() + (uint64_t)cto * 1000000ULL;
	ep_set(&sl->c, EPOLLOUT);
}

static void
slot_connected(struct slot *sl)
{
	int err = 0;
	socklen_t el = sizeof(err);

	if (getsockopt(sl->c.fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err != 0) {
		slot_down(sl, sock_err(err));
		return;
	}
	slot_up(sl);
}

/* Take this slot's share of the peer queue into the session window. */
static void
slot_pull(struct slot *sl)
{
	struct te_xpeer *p = sl->peer;
	struct te_slice *take = NULL, **tail = &take;
	uint32_t share, n = 0;

	if (sl->st != SLOT_UP || te_cli_sess_error(sl->sess) != 0)
		return;
	pthread_mutex_lock(&p->lock);
	/* Leave work for the other slots so one request spreads over connections. */
	share = (p->qlen + p->nslots - 1) / p->nslots;
	if (share == 0)
		share = 1;
	while (p->qhead != NULL && n < share && te_cli_sess_can_submit(sl->sess, p->qhead->len)) {
		struct te_slice *s = p->qhead;

		p->qhead = s->next;
		if (p->qhead == NULL)
			p->qtail = NULL;
		p->qlen--;
		s->next = NULL;
		if (te_cli_sess_submit(sl->sess, s) < 0) {
			/* validated in submit(); cannot happen, but never lose a slice */
			*tail = s;
			tail = &s->next;
		}
		n++;
	}
	pthread_mutex_unlock(&p->lock);
	fail_list(take, -EINVAL);
}

/*
 * Send what the session has, touching neither epoll nor the slot's state (the
 * inline path runs it on a borrowed slot). \return 1 all sent, 0 the socket
 * is full, -errno the connection must go down with it.
 */
static int
slot_tx_raw(struct slot *sl)
{
	struct iovec iov[IOV_BATCH];
	unsigned n;

	while ((n = te_cli_sess_tx_iov(sl->sess, iov, IOV_BATCH)) > 0) {
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
		ssize_t r = sendmsg(sl->c.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno, rc;

			if (e == EAGAIN || e == EWOULDBLOCK)
				return 0;
			/* A v2 server refuses a WRITE with a status and closes while we are
			 * still sending: read what arrived first so the slice gets -EFAULT. */
			rc = slot_rx_raw(sl);
			return rc < 0 ? rc : sock_err(e);
		}
		sl->progress_ns = tide_mono_ns();
		te_cli_sess_tx_advance(sl->sess, (size_t)r);
	}
	return 1;
}

/* Send what the session has; returns false when the connection went down. */
static bool
slot_tx(struct slot *sl)
{
	int rc = slot_tx_raw(sl);

	if (rc < 0) {
		slot_down(sl, rc);
		return false;
	}
	ep_set(&sl->c, rc == 0 ? EPOLLIN | EPOLLOUT : EPOLLIN);
	return true;
}

/*
 * Receive into the session (READ data straight into slice->local) until the
 * socket is drained or RX_BUDGET reads. Touches neither epoll nor the slot's
 * state. \return 0, or -errno: the connection must go down with it (the
 * session's own error once it failed; it completed its slices then).
 */
static int
slot_rx_raw(struct slot *sl)
{
	for (int i = 0; i < RX_BUDGET; i++) {
		struct iovec iov[2];
		uint8_t *p;
		size_t w = te_cli_sess_rx_window(sl->sess, &p);
		uint64_t payload;
		int n = 0;
		ssize_t r, got;

		if (w > 0) {
			iov[n].iov_base = p;
			iov[n++].iov_len = w;
		}
		/* From the READ's size: a remainder below BIG_PAYLOAD must not flip it
		 * (that let every next payload start in the staging area). */
		payload = te_cli_sess_rx_payload(sl->sess);
		if (payload > 0)
			sl->big = payload >= BIG_PAYLOAD;
		/* As on the server: after a large READ, stop at the next reply header. */
		if (!(sl->big && w > 0 && w <= TE_FRAME_REPLY_LEN)) {
			iov[n].iov_base = sl->stage;
			iov[n++].iov_len = STAGE_LEN;
		}
		r = readv(sl->c.fd, iov, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return sock_err(errno);
		}
		if (r == 0)
			return -ECONNRESET;
		sl->progress_ns = tide_mono_ns();
		got = r;
		if (w > 0) {
			size_t k = (size_t)r < w ? (size_t)r : w;

			te_cli_sess_rx_advance(sl->sess, k);
			r -= (ssize_t)k;
		}
		if (r > 0)
			(void)te_cli_sess_feed(sl->sess, sl->stage, (size_t)r);
		if (te_cli_sess_error(sl->sess) != 0)
			return te_cli_sess_error(sl->sess);
		if ((size_t)got < w + STAGE_LEN)
			return 0; /* short read: the socket is drained */
	}
	return 0;
}

/* Receive; returns false when the connection went down. */
static bool
slot_rx(struct slot *sl)
{
	int rc = slot_rx_raw(sl);

	if (rc < 0) {
		slot_down(sl, rc);
		return false;
	}
	return true;
}

/*
 * Pull and send; repeats while sending completes slices (v1 WRITE: no reply
 * will wake us) and frees room. After IO_ROUNDS the slot re-kicks itself so
 * other connections of this thread get a turn.
 */
static void
slot_io(struct slot *sl)
{
	for (int round = 0; sl->st == SLOT_UP; round++) {
		uint32_t n0 = te_cli_sess_inflight(sl->sess), n1;

		if (round == IO_ROUNDS) {
			kick(sl);
			return;
		}
		slot_pull(sl);
		n1 = te_cli_sess_inflight(sl->sess);
		if (!slot_tx(sl))
			return;
		if (n1 == n0 || te_cli_sess_inflight(sl->sess) == n1)
			break;
	}
}

static void
slot_event_locked(struct slot *sl, uint32_t ev)
{
	if (sl->st == SLOT_CONNECTING) {
		if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			slot_connected(sl);
		return;
	}
	if (sl->st != SLOT_UP)
		return;
	if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
		if (!slot_rx(sl))
			return;
	}
	slot_io(sl);
}

/* Owner thread: an epoll event. Events of a borrowed slot are dropped: its fd
 * is out of the epoll set meanwhile and level-triggered readiness comes back
 * when the borrower returns it. */
static void
slot_event(struct slot *sl, uint32_t ev)
{
	if (!own_enter(sl))
		return;
	slot_event_locked(sl, ev);
	own_leave(sl);
}

static void
slot_service_locked(struct slot *sl)
{
	struct te_xpeer *p = sl->peer;
	bool closing, work;
	int hb = sl->hb_err;

	sl->hb_err = 0;
	pthread_mutex_lock(&p->lock);
	closing = p->closing;
	work = p->qlen > 0;
	pthread_mutex_unlock(&p->lock);
	/* A borrower's connection broke: end it as slot_rx/slot_tx would have
	 * (unless closing, which fails everything with close_err anyway). */
	if (hb != 0 && !closing && sl->st == SLOT_UP) {
		slot_down(sl, hb);
		return;
	}
	if (closing) {
		if (sl->acked)
			return;
		if (sl->st != SLOT_IDLE) {
			if (sl->sess != NULL) {
				te_cli_sess_destroy(sl->sess, p->close_err);
				sl->sess = NULL;
			}
			slot_close_fd(sl);
			pthread_mutex_lock(&p->lock);
			if (sl->st == SLOT_UP)
				p->n_up--;
			else
				p->n_connecting--;
			pthread_mutex_unlock(&p->lock);
			sl->st = SLOT_IDLE;
		}
		sl->acked = true;
		pthread_mutex_lock(&p->lock);
		p->acks++;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		return;
	}
	if (sl->st == SLOT_IDLE && work)
		slot_connect(sl);
	else if (sl->st == SLOT_UP)
		slot_io(sl);
}

/* Owner thread: a kick (new work, peer_close, a borrower returning the slot).
 * Skipped while borrowed: OWN_MISSED makes the borrower kick again. */
static void
slot_service(struct slot *sl)
{
	if (!own_enter(sl))
		return;
	slot_service_locked(sl);
	own_leave(sl);
}

/* ------------------------------------------------------------------------ */
/* Server connections                                                       */

/* Take sc off its thread's list (the thread that owns it calls). */
static void
srv_unlink(struct srv_conn *sc)
{
	struct io_thread *t = sc->c.th;

	if (sc->prev != NULL)
		sc->prev->next = sc->next;
	else if (t->srvs == sc)
		t->srvs = sc->next;
	if (sc->next != NULL)
		sc->next->prev = sc->prev;
}

static void
srv_free(struct srv_conn *sc)
{
	srv_unlink(sc);
	/* References first: once the peer sees the close, nothing is held. */
	te_srv_sess_destroy(sc->sess);
	ep_set(&sc->c, 0);
	close(sc->c.fd);
	free(sc->stage);
	free(sc);
}

/*
 * The client closed first (stock Mooncake's connection-per-slice initiators do
 * after every slice). A plain close would answer with a FIN and leave the
 * client's end in TIME_WAIT for 60 s; with one connection per slice that
 * exhausts its ephemeral ports within seconds (Linux reuses TIME_WAIT ports
 * only on loopback addresses), after which every connect() scans the port
 * range and slows 10-40x. When the request is complete and the client has
 * acknowledged every byte we sent (SIOCOUTQ 0: its FIN acknowledges
 * everything it read), nothing can be lost, so close with a reset instead:
 * the client's socket, already closed by the application, goes straight to
 * CLOSED and its port is free. Otherwise close normally.
 */
static void
srv_eof(struct srv_conn *sc)
{
	int queued = -1;

	if (te_srv_sess_idle(sc->sess) && sc->st_len == 0 &&
	    ioctl(sc->c.fd, SIOCOUTQ, &queued) == 0 && queued == 0) {
		struct linger lg = {.l_onoff = 1, .l_linger = 0};

		(void)setsockopt(sc->c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	srv_free(sc);
}

static void
srv_adopt(struct io_thread *t, struct srv_conn *sc)
{
	sc->c.th = t;
	sc->prev = NULL;
	sc->next = t->srvs;
	if (t->srvs != NULL)
		t->srvs->prev = sc;
	t->srvs = sc;
	sc->progress_ns = tide_mono_ns();
	ep_set(&sc->c, EPOLLIN);
}

/*
 * Between requests (nothing staged, nothing owed): move a reused stock-framed
 * connection to its peer's home thread. Native peers pipeline and keep the
 * round-robin spread. Returns true if the connection now belongs to another
 * thread (the caller must not touch it again).
 */
static bool
srv_place(struct srv_conn *sc)
{
	struct io_thread *t = sc->c.th, *home;
	uint64_t nreq;
	uint8_t proto = te_srv_sess_proto(sc->sess, &nreq);

	if (proto == 0 || nreq < 2)
		return false; /* a one-shot connection never pays a move */
	sc->placed = true;
	home = &t->x->th[sc->peer_hash % t->x->nth];
	if (proto == TE_PROTO_NATIVE || home == t)
		return false;
	srv_unlink(sc);
	ep_set(&sc->c, 0);
	atomic_fetch_add(&t->x->srv_moves, 1);
	pthread_mutex_lock(&home->lock);
	sc->next = home->adopt;
	home->adopt = sc;
	pthread_mutex_unlock(&home->lock);
	wake(home);
	return true;
}

/*
 * Drive one server connection until it blocks: flush output, feed staged
 * input, read more. Returns with the epoll mask matching what it waits for.
 */
static void
srv_io(struct srv_conn *sc)
{
	struct iovec iov[IOV_BATCH];
	int reads = 0;

	for (;;) {
		uint64_t payload;
		unsigned n;
		uint8_t *p;
		size_t w;
		ssize_t r;
		int why;

		while ((n = te_srv_sess_tx_iov(sc->sess, iov, IOV_BATCH)) > 0) {
			struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};

			r = sendmsg(sc->c.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					ep_set(&sc->c, EPOLLOUT);
					return;
				}
				srv_free(sc);
				return;
			}
			sc->progress_ns = tide_mono_ns();
			te_srv_sess_tx_advance(sc->sess, (size_t)r);
		}
		why = te_srv_sess_close_reason(sc->sess);
		if (why != 0) {
			srv_free(sc);
			return;
		}
		if (sc->st_len > 0) {
			size_t k = te_srv_sess_feed(sc->sess, sc->stage + sc->st_off, sc->st_len);

			sc->st_off += k;
			sc->st_len -= k;
			if (k > 0)
				continue;
		}
		if (sc->st_len > 0)
			continue; /* feed stopped for output: loop sends it */
		if (!sc->placed && te_srv_sess_idle(sc->sess) && srv_place(sc))
			return;
		if (reads++ >= RX_BUDGET) {
			ep_set(&sc->c, EPOLLIN); /* level-triggered: more comes back */
			return;
		}
		w = te_srv_sess_rx_window(sc->sess, &p);
		n = 0;
		if (w > 0) {
			iov[n].iov_base = p;
			iov[n++].iov_len = w;
		}
		/* From the WRITE's size, not the remainder of a partly read payload:
		 * a small remainder cleared it, the next header read took up to 64 KiB
		 * of payload into the staging area, and every pooled 64 KiB WRITE paid
		 * a second copy (a third of the server's CPU). */
		payload = te_srv_sess_rx_payload(sc->sess);
		if (payload > 0)
			sc->big = payload >= BIG_PAYLOAD;
		/* After a large payload, stop at the next header so that its payload
		 * too lands in place (the staging area would cost a copy). */
		if (!(sc->big && w > 0 && w <= TE_FRAME_HDR_LEN)) {
			iov[n].iov_base = sc->stage;
			iov[n++].iov_len = STAGE_LEN;
		}
		r = readv(sc->c.fd, iov, (int)n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ep_set(&sc->c, EPOLLIN);
				return;
			}
			srv_free(sc);
			return;
		}
		if (r == 0) {
			srv_eof(sc);
			return;
		}
		sc->progress_ns = tide_mono_ns();
		if (w > 0) {
			size_t k = (size_t)r < w ? (size_t)r : w;

			te_srv_sess_rx_advance(sc->sess, k);
			r -= (ssize_t)k;
		}
		sc->st_off = 0;
		sc->st_len = (size_t)r;
	}
}

/* FNV-1a over the peer's address (not its port): all its connections agree. */
static uint32_t
peer_hash(const struct sockaddr *sa, socklen_t len)
{
	const uint8_t *p = NULL;
	size_t n = 0;
	uint32_t h = 2166136261u;

	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		p = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
		n = sizeof(struct in_addr);
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		p = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		n = sizeof(struct in6_addr);
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* A peer outside TIDE_ALLOW_NETS: closed before a byte is read. */
static void
refuse_peer(struct te_xport *x, int fd, const struct sockaddr *sa)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, ip,
			  sizeof(ip));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, ip,
			  sizeof(ip));
	if (x->cfg.refused != NULL)
		atomic_fetch_add_explicit(x->cfg.refused, 1, memory_order_relaxed);
	close(fd);
	TIDE_LOG_RATELIMIT(WARN, 5,
			   "data port: connection from %s refused (not in TIDE_ALLOW_NETS)", ip);
}

static void
do_accept(struct te_xport *x)
{
	for (;;) {
		int fd;
		struct srv_conn *sc;
		struct io_thread *t;

		struct sockaddr_in6 sa;
		socklen_t salen = sizeof(sa);

		fd = accept4(x->lc.fd, (struct sockaddr *)&sa, &salen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
				return;
			/* Out of descriptors or memory: the listener would stay readable
			 * and spin; pause it for a while (thread_timers re-arms it). */
			TIDE_LOG_RATELIMIT(WARN, 5, "accept: %s; pausing the data server %d ms",
					   strerror(errno), ACCEPT_PAUSE_MS);
			ep_set(&x->lc, 0);
			x->accept_resume_ns = tide_mono_ns() + ACCEPT_PAUSE_MS * 1000000ULL;
			return;
		}
		if (!tide_cidr_allows(x->cfg.allow, (struct sockaddr *)&sa, salen)) {
			refuse_peer(x, fd, (struct sockaddr *)&sa);
			continue;
		}
		data_sock_opts(fd);
		sc = calloc(1, sizeof(*sc));
		if (sc != NULL)
			sc->stage = malloc(STAGE_LEN);
		if (sc == NULL || sc->stage == NULL ||
		    te_srv_sess_create(&x->cfg.srv, &sc->sess) < 0) {
			TIDE_LOG_RATELIMIT(ERR, 5, "no memory for a data connection");
			if (sc != NULL)
				free(sc->stage);
			free(sc);
			close(fd);
			continue;
		}
		sc->c.kind = K_SRV;
		sc->c.fd = fd;
		sc->peer_hash = peer_hash((const struct sockaddr *)&sa, salen);
		t = &x->th[x->accept_rr++ % x->nth];
		if (t == cur_thread) {
			srv_adopt(t, sc);
			srv_io(sc);
			continue;
		}
		pthread_mutex_lock(&t->lock);
		sc->next = t->adopt;
		t->adopt = sc;
		pthread_mutex_unlock(&t->lock);
		wake(t);
	}
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */

static void
thread_timers(struct io_thread *t, uint64_t now)
{
	struct te_xport *x = t->x;
	uint64_t io_to = (uint64_t)x->cfg.io_timeout_ms * 1000000ULL;
	struct slot *sl, *sn;
	struct srv_conn *sc, *scn;

	if (t->idx == 0 && x->accept_resume_ns != 0 && now >= x->accept_resume_ns) {
		x->accept_resume_ns = 0;
		ep_set(&x->lc, EPOLLIN);
	}
	for (sl = t->slots; sl != NULL; sl = sn) {
		sn = sl->lnext;
		/* Borrowed: the borrower bounds its request by io_timeout_ms itself. */
		if (!own_enter(sl))
			continue;
		if (sl->st == SLOT_CONNECTING && now > sl->deadline_ns) {
			slot_down(sl, -ETIMEDOUT);
		} else if (sl->st == SLOT_UP) {
			if (te_cli_sess_inflight(sl->sess) == 0) {
				sl->progress_ns = now;
				/* Safety net: an idle slot picks up work no kick reached it for
				 * (e.g. queued while it was not among the kicked slots). */
				slot_io(sl);
			} else if (io_to > 0 && now - sl->progress_ns > io_to)
				slot_down(sl, -ETIMEDOUT);
		}
		own_leave(sl);
	}
	for (sc = t->srvs; sc != NULL; sc = scn) {
		scn = sc->next;
		if (te_srv_sess_idle(sc->sess) && sc->st_len == 0)
			sc->progress_ns = now;
		else if (io_to > 0 && now - sc->progress_ns > io_to) {
			TIDE_LOG_RATELIMIT(WARN, 5, "data connection stuck mid-request, closing");
			srv_free(sc);
		}
	}
}

static void
thread_drain(struct io_thread *t)
{
	struct slot *k;
	struct srv_conn *a;
	uint64_t v;

	if (read(t->evc.fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		TIDE_LOG(ERR, "eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&t->lock);
	k = t->kicks;
	t->kicks = NULL;
	a = t->adopt;
	t->adopt = NULL;
	pthread_mutex_unlock(&t->lock);
	while (a != NULL) {
		struct srv_conn *n = a->next;

		srv_adopt(t, a);
		srv_io(a);
		a = n;
	}
	while (k != NULL) {
		struct slot *n = k->knext;

		/* servicing goes up before kicked goes down: peer_close() waits
		 * until both are clear, so it never frees a slot in use. */
		atomic_store(&k->servicing, true);
		atomic_store(&k->kicked, false);
		slot_service(k);
		atomic_store(&k->servicing, false);
		k = n;
	}
}

/* Sleep without a tick while nothing on this thread can time out. */
static bool
thread_needs_tick(const struct io_thread *t)
{
	return t->slots != NULL || t->srvs != NULL || (t->idx == 0 && t->x->accept_resume_ns != 0);
}

static void *
thread_main(void *arg)
{
	struct io_thread *t = arg;
	struct epoll_event evs[EP_BATCH];
	uint64_t next_tick = tide_mono_ns();

	cur_thread = t;
	while (!atomic_load(&t->stop)) {
		int n = epoll_wait(t->epfd, evs, EP_BATCH, thread_needs_tick(t) ? TICK_MS : -1);
		bool drain = false;
		uint64_t now;

		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			switch (c->kind) {
			case K_EVFD:
				/* After the batch: a drained peer_close may free slots that
				 * still have events in evs[]. */
				drain = true;
				break;
			case K_LISTEN:
				do_accept(t->x);
				break;
			case K_SRV:
				srv_io((struct srv_conn *)c);
				break;
			case K_SLOT:
				slot_event((struct slot *)c, evs[i].events);
				break;
			}
		}
		if (drain)
			thread_drain(t);
		now = tide_mono_ns();
		if (now >= next_tick) {
			thread_timers(t, now);
			next_tick = now + TICK_MS * 1000000ULL;
		}
	}
	/* Anything peer_close did not take is ours to end. */
	thread_drain(t);
	while (t->srvs != NULL)
		srv_free(t->srvs);
	cur_thread = NULL;
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* te_xport_ops                                                             */

static int
resolve(const char *host, uint16_t port, struct sockaddr_in *sa)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
		return 0;
	if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
		return -EHOSTUNREACH;
	sa->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}

static int
listen_open(struct te_xport *x)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(x->cfg.data_port)};
	socklen_t sl = sizeof(sa);
	int one = 1, fd;

	if (x->cfg.bind_ip != NULL && x->cfg.bind_ip[0] != '\0') {
		if (resolve(x->cfg.bind_ip, x->cfg.data_port, &sa) < 0) {
			TIDE_LOG(ERR, "bind_ip '%s': not an IPv4 address or resolvable name",
				 x->cfg.bind_ip);
			return -EINVAL;
		}
	} else {
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, LISTEN_BACKLOG) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		int e = errno;

		TIDE_LOG(ERR, "data server on port %u: %s", x->cfg.data_port, strerror(e));
		close(fd);
		return -e;
	}
	x->lc.kind = K_LISTEN;
	x->lc.fd = fd;
	x->port = ntohs(sa.sin_port);
	return 0;
}

static void
xport_free(struct te_xport *x)
{
	for (uint32_t i = 0; i < x->nth; i++) {
		struct io_thread *t = &x->th[i];

		if (t->started) {
			atomic_store(&t->stop, true);
			wake(t);
			pthread_join(t->tid, NULL);
		}
		if (t->epfd >= 0)
			close(t->epfd);
		if (t->evc.fd >= 0)
			close(t->evc.fd);
		pthread_mutex_destroy(&t->lock);
	}
	if (x->lc.fd >= 0)
		close(x->lc.fd);
	pthread_mutex_destroy(&x->lock);
	free(x->th);
	free(x);
}

static int
kernel_create(const struct te_xport_cfg *cfg, struct te_xport **out)
{
	struct te_xport *x;
	int rc;

	if (cfg == NULL || out == NULL || cfg->conns_per_peer == 0 ||
	    cfg->conns_per_peer > MAX_CONNS || cfg->io_threads == 0 ||
	    cfg->io_threads > MAX_IO_THREADS || cfg->slice_size == 0 || cfg->srv.check == NULL ||
	    cfg->srv.release == NULL)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return -ENOMEM;
	x->cfg = *cfg;
	x->lc.fd = -1;
	pthread_mutex_init(&x->lock, NULL);
	x->th = calloc(cfg->io_threads, sizeof(*x->th));
	if (x->th == NULL) {
		free(x);
		return -ENOMEM;
	}
	x->nth = cfg->io_threads;
	for (uint32_t i = 0; i < x->nth; i++) {
		struct io_thread *t = &x->th[i];

		t->x = x;
		t->idx = i;
		t->epfd = -1;
		t->evc.fd = -1;
		t->evc.kind = K_EVFD;
		t->evc.th = t;
		pthread_mutex_init(&t->lock, NULL);
	}
	rc = listen_open(x);
	if (rc < 0)
		goto fail;
	x->lc.th = &x->th[0];
	for (uint32_t i = 0; i < x->nth; i++) {
		struct io_thread *t = &x->th[i];

		t->epfd = epoll_create1(EPOLL_CLOEXEC);
		t->evc.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (t->epfd < 0 || t->evc.fd < 0) {
			rc = -errno;
			goto fail;
		}
		ep_set(&t->evc, EPOLLIN);
		if (t->evc.ev == 0) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	ep_set(&x->lc, EPOLLIN);
	for (uint32_t i = 0; i < x->nth; i++) {
		rc = -pthread_create(&x->th[i].tid, NULL, thread_main, &x->th[i]);
		if (rc < 0)
			goto fail;
		x->th[i].started = true;
	}
	TIDE_LOG(INFO, "tcp-kernel: data server on port %u, %u io threads, %u conns/peer", x->port,
		 x->nth, cfg->conns_per_peer);
	*out = x;
	return 0;
fail:
	xport_free(x);
	return rc;
}

static uint16_t
kernel_data_port(const struct te_xport *x)
{
	return x->port;
}

static int
kernel_peer_open(struct te_xport *x, const struct te_peer_addr *addr, struct te_xpeer **out)
{
	struct te_xpeer *p;
	uint32_t seq;
	int rc;

	if (addr == NULL || addr->data_port == 0 ||
	    (addr->proto != TE_PROTO_V1 && addr->proto != TE_PROTO_V2 &&
	     addr->proto != TE_PROTO_NATIVE))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->addr = *addr;
	p->addr.host[sizeof(p->addr.host) - 1] = '\0';
	rc = resolve(p->addr.host, addr->data_port, &p->sa);
	if (rc < 0) {
		TIDE_LOG(WARN, "cannot resolve peer host '%s'", p->addr.host);
		free(p);
		return rc;
	}
	/* v1 WRITEs are never acknowledged: only one connection keeps a READ from
	 * overtaking the WRITE before it (the server runs a connection in order). */
	p->nslots = addr->proto == TE_PROTO_V1 ? 1 : x->cfg.conns_per_peer;
	p->slots = calloc(p->nslots, sizeof(*p->slots));
	if (p->slots == NULL) {
		free(p);
		return -ENOMEM;
	}
	p->x = x;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	atomic_init(&p->borrows, 0u);
	pthread_mutex_lock(&x->lock);
	seq = x->peer_seq++;
	p->next = x->peers;
	if (x->peers != NULL)
		x->peers->prev = p;
	x->peers = p;
	pthread_mutex_unlock(&x->lock);
	for (uint32_t i = 0; i < p->nslots; i++) {
		struct slot *sl = &p->slots[i];

		sl->c.kind = K_SLOT;
		sl->c.fd = -1;
		sl->c.th = &x->th[(seq + i) % x->nth];
		sl->peer = p;
		atomic_init(&sl->kicked, false);
		atomic_init(&sl->servicing, false);
		atomic_init(&sl->own, 0u);
	}
	*out = p;
	return 0;
}

static void
kernel_peer_close(struct te_xport *x, struct te_xpeer *p, int err)
{
	struct te_slice *q;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->lock);
	p->closing = true;
	p->close_err = err;
	q = p->qhead;
	p->qhead = p->qtail = NULL;
	p->qlen = 0;
	pthread_mutex_unlock(&p->lock);
	fail_list(q, err);
	for (uint32_t i = 0; i < p->nslots; i++) {
		struct slot *sl = &p->slots[i];

		if (sl->c.th == cur_thread) {
			/* Called from our own io thread: do it inline, once a borrower
			 * (which sees closing within INLINE_CHECK_MS) gave the slot back. */
			while (atomic_load(&sl->own) & OWN_CALLER) {
				struct timespec ts = {0, 100000};

				nanosleep(&ts, NULL);
			}
			slot_service(sl);
		} else {
			kick(sl);
		}
	}
	pthread_mutex_lock(&p->lock);
	while (p->acks < p->nslots)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	/* A borrower's last act is its kick, then dropping borrows (bounded by
	 * INLINE_CHECK_MS once it sees closing): after this, any kick it made is
	 * visible in kicked/servicing below. */
	while (atomic_load(&p->borrows) != 0) {
		struct timespec ts = {0, 100000};

		nanosleep(&ts, NULL);
	}
	/* Our own kicks may have queued a slot twice: wait until no thread holds one. */
	for (uint32_t i = 0; i < p->nslots; i++) {
		struct slot *sl = &p->slots[i];

		while (sl->c.th != cur_thread &&
		       (atomic_load(&sl->kicked) || atomic_load(&sl->servicing))) {
			struct timespec ts = {0, 100000};

			nanosleep(&ts, NULL);
		}
	}
	pthread_mutex_lock(&x->lock);
	if (p->prev != NULL)
		p->prev->next = p->next;
	else
		x->peers = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	pthread_mutex_unlock(&x->lock);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	for (uint32_t i = 0; i < p->nslots; i++)
		free(p->slots[i].stage);
	free(p->slots);
	free(p);
}

static int
kernel_submit(struct te_xport *x, struct te_xpeer *p, struct te_slice *head)
{
	struct te_slice *s, *last = NULL;
	uint32_t n = 0, wanted;

	(void)x;
	if (p == NULL || head == NULL)
		return -EINVAL;
	for (s = head; s != NULL; s = s->next) {
		if (s->len == 0 || (s->op != TE_FRAME_OP_READ && s->op != TE_FRAME_OP_WRITE))
			return -EINVAL;
		last = s;
		n++;
	}
	pthread_mutex_lock(&p->lock);
	if (p->closing) {
		pthread_mutex_unlock(&p->lock);
		return -ESHUTDOWN;
	}
	if (p->qtail != NULL)
		p->qtail->next = head;
	else
		p->qhead = head;
	p->qtail = last;
	p->qlen += n;
	wanted = p->qlen < p->nslots ? p->qlen : p->nslots;
	pthread_mutex_unlock(&p->lock);
	for (uint32_t i = 0; i < wanted; i++)
		kick(&p->slots[i]);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Inline requests                                                          */

/*
 * Why: a small request through the io threads costs hand-offs, not network
 * time. The caller queues it and writes the owner's eventfd; the owner wakes,
 * sends, sleeps in epoll, wakes on the reply, reads it and signals the
 * caller's condvar. 4 KiB READs measured ~190 us per op against an 18 us
 * loopback ping-pong. Run inline, the caller sends the request and reads the
 * reply itself (sendmsg, poll, readv): no thread but the caller wakes.
 *
 * When (kernel_inline_begin, under the core's segment lock): a single slice
 * of at most INLINE_MAX bytes, a slot of the peer that is UP with nothing in
 * flight, a session that has not failed, nothing queued for the peer (queued
 * work goes first, in order) and the peer not closing. Otherwise the core
 * submits normally. The core asks only for a submit call of one request into
 * a fresh batch (tide_te_submit), so batches keep pipelining over the io
 * threads; that submit call then returns with the request ended.
 *
 * Ownership: slot.own (own_enter .. own_return). The borrower CASes 0 ->
 * OWN_CALLER; the owner enters every slot entry point (epoll event, kick,
 * timers) with own_enter, which fails while borrowed and sets OWN_MISSED.
 * Neither side waits for the other. While borrowed:
 * - epoll: the borrower takes the fd out of the owner's set (EPOLL_CTL_DEL),
 *   so the reply wakes only the borrower's poll(); events the owner already
 *   fetched are dropped by own_enter. Returning it re-adds EPOLLIN, and
 *   level-triggered epoll reports whatever arrived meanwhile (EOF included).
 * - the session and its state machine are driven by the same functions the
 *   owner uses (slot_tx_raw, slot_rx_raw), which touch neither epoll nor the
 *   slot's state, lists or counters; only the owner ever changes sl->st.
 * - timers: skipped for the slot; the borrower applies io_timeout_ms itself
 *   (no byte moved that long: -ETIMEDOUT, as thread_timers would).
 * - kicks (new work for the slot, peer_close): skipped with OWN_MISSED; the
 *   borrower kicks on return, so nothing is lost.
 * - peer_close: the borrower polls in steps of at most INLINE_CHECK_MS and
 *   returns the slot as soon as it sees closing, with the request still in
 *   flight; the owner then fails it with close_err, as for any slot. borrows
 *   pins the peer (and its slots) until the borrower's last touch.
 * Errors: the borrower never calls slot_down (it changes lists and counters
 * of the owner). A broken connection (send/receive error, EOF, a failed
 * session, the timeout) is returned with hb_err, out of epoll, and kicked;
 * the owner's slot_service does slot_down(hb_err): the same error, log,
 * counters and queue failing as when the owner finds the loss itself. A v2
 * -EFAULT refusal still reconnects for queued work. A send that would block
 * (a WRITE larger than the socket's free space) polls for POLLOUT as well.
 * Bounds: one request per borrow, INLINE_MAX bytes; the caller blocks at most
 * io_timeout_ms without progress (forever when 0, as the owner's timer).
 */
#define INLINE_MAX      (64 * 1024)
#define INLINE_CHECK_MS 5

static void *
kernel_inline_begin(struct te_xport *x, struct te_xpeer *p, struct te_slice *s)
{
	(void)x;
	if (p == NULL || s == NULL || s->next != NULL || s->len == 0 || s->len > INLINE_MAX ||
	    (s->op != TE_FRAME_OP_READ && s->op != TE_FRAME_OP_WRITE))
		return NULL;
	atomic_fetch_add(&p->borrows, 1u);
	/* Any free slot; then, once, wait briefly for the first busy owner to leave. */
	for (uint32_t i = 0, busy = p->nslots; i <= p->nslots; i++) {
		struct slot *sl;
		bool ok;

		if (i == p->nslots) {
			if (busy == p->nslots)
				break;
			sl = &p->slots[busy];
			if (!own_borrow(sl, BORROW_WAIT_NS))
				break;
		} else {
			sl = &p->slots[i];
			if (!own_borrow(sl, 0)) {
				if (busy == p->nslots && atomic_load(&sl->own) == OWN_IO)
					busy = i;
				continue;
			}
		}
		ok = sl->st == SLOT_UP && te_cli_sess_error(sl->sess) == 0 &&
		     te_cli_sess_inflight(sl->sess) == 0;
		if (ok) {
			pthread_mutex_lock(&p->lock);
			ok = !p->closing && p->qlen == 0;
			pthread_mutex_unlock(&p->lock);
		}
		if (ok && te_cli_sess_submit(sl->sess, s) == 0)
			return sl;
		own_return(sl, false);
	}
	atomic_fetch_sub(&p->borrows, 1u);
	return NULL;
}

static bool
peer_closing(struct te_xpeer *p)
{
	bool c;

	pthread_mutex_lock(&p->lock);
	c = p->closing;
	pthread_mutex_unlock(&p->lock);
	return c;
}

static void
kernel_inline_run(struct te_xport *x, void *h)
{
	struct slot *sl = h;
	struct te_xpeer *p = sl->peer;
	uint64_t io_to = (uint64_t)x->cfg.io_timeout_ms * 1000000ULL;
	int err = 0;

	ep_set(&sl->c, 0);
	sl->progress_ns = tide_mono_ns();
	for (;;) {
		struct pollfd pf = {.fd = sl->c.fd, .events = POLLIN};
		int rc = slot_tx_raw(sl), ms = INLINE_CHECK_MS;
		uint64_t now;

		if (rc < 0) {
			err = rc;
			break;
		}
		if (te_cli_sess_inflight(sl->sess) == 0)
			break; /* a v1 WRITE ends when sent */
		if (rc == 0)
			pf.events |= POLLOUT;
		now = tide_mono_ns();
		if (io_to > 0) {
			uint64_t idle = now - sl->progress_ns;

			if (idle > io_to) {
				err = -ETIMEDOUT;
				break;
			}
			if ((io_to - idle) / 1000000ULL + 1 < (uint64_t)ms)
				ms = (int)((io_to - idle) / 1000000ULL + 1);
		}
		/* The answer to a small request often comes sooner than this thread
		 * would wake from poll(): poll for it first (bounded by poll_us). */
		if (pf.events == POLLIN)
			(void)tide_sock_poll_briefly(sl->c.fd, POLLIN, x->cfg.poll_us);
		rc = poll(&pf, 1, ms);
		if (rc < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		if (rc > 0 && (pf.revents & (POLLIN | POLLERR | POLLHUP))) {
			int r = slot_rx_raw(sl);

			if (r < 0) {
				err = r;
				break;
			}
			if (te_cli_sess_inflight(sl->sess) == 0)
				break;
		}
		if (peer_closing(p))
			break; /* the owner fails the request with close_err */
	}
	if (err == 0)
		ep_set(&sl->c, EPOLLIN);
	else
		sl->hb_err = err;
	own_return(sl, err != 0 || te_cli_sess_inflight(sl->sess) != 0);
	atomic_fetch_sub(&p->borrows, 1u);
}

static void
kernel_destroy(struct te_xport *x)
{
	if (x == NULL)
		return;
	for (;;) {
		struct te_xpeer *p;

		pthread_mutex_lock(&x->lock);
		p = x->peers;
		pthread_mutex_unlock(&x->lock);
		if (p == NULL)
			break;
		kernel_peer_close(x, p, -ECANCELED);
	}
	xport_free(x);
}

const struct te_xport_ops te_tcp_kernel_ops = {
	.name = "tcp-kernel",
	.create = kernel_create,
	.data_port = kernel_data_port,
	.peer_open = kernel_peer_open,
	.peer_close = kernel_peer_close,
	.submit = kernel_submit,
	.destroy = kernel_destroy,
	.inline_begin = kernel_inline_begin,
	.inline_run = kernel_inline_run,
};

uint32_t
te_tcp_kernel_peer_conns_up(struct te_xpeer *p)
{
	uint32_t n;

	pthread_mutex_lock(&p->lock);
	n = p->n_up;
	pthread_mutex_unlock(&p->lock);
	return n;
}

uint64_t
te_tcp_kernel_conn_failures(const struct te_xport *x)
{
	return atomic_load(&x->conn_failures);
}

uint64_t
te_tcp_kernel_srv_moves(const struct te_xport *x)
{
	return atomic_load(&x->srv_moves);
}
