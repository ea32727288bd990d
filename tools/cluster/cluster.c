/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-cluster: step 1 of the project's main job (tools/local_cluster.sh): a
 * two-node Tide cluster on one machine, each part real, the data checked.
 *
 * Processes. tide-cluster loads the node file (--node-env FILE, else
 * TIDE_NODE_ENV or /etc/tide/node.env, else the built-in defaults) and forks:
 * the parent is node-a, the child node-b, each with its own node runtime
 * (tide_node_rt.h: EAL, port, one polling lcore, one user-space TCP stack).
 * The node file drives both (hugepages or --no-huge, lcores, MTU, TCP, idle
 * policy, faults). On top of it each node gets environment overrides
 * (tide_nodeenv_load()'s env array, which wins over the file and the
 * process environment): its own TIDE_FILE_PREFIX (the file's plus -a or
 * -b), a data address (10.79.0.1 or .2, /24, no gateway, the port's own MAC)
 * and one end of a net_memif link whose socket lives in a private temporary
 * directory (node-a the memif server, node-b the client). Checksums are
 * elided, as on every memif link between Tide processes of one host, except
 * when TIDE_FAULT corrupts frames: then software checksums catch it.
 *
 * Data. Each node owns a memory segment (MOONCAKE_GLOBAL_SEGMENT_SIZE of
 * anonymous memory) managed by the segment allocator (store/seg) and serves
 * it on TCP port 7100 with a small store protocol: PUT (the store allocates
 * the object and places its bytes straight from the received segments,
 * answering the offset), GET (the bytes of a live allocation), DEL (free) and
 * STAT (the allocator's counters, after its consistency check). A
 * rollout-like workload (shards of 37 objects, most <= 256 B, a few large;
 * fixed by --seed) is split by shard: node-a writes the even shards into
 * node-b's segment while node-b writes the odd ones into node-a's, each over
 * its own connection. Each writer then reads every object back and compares
 * it byte for byte with its source, asks for the allocator's state, removes
 * half of the shards (as a training step does) and asks again.
 *
 * End. Both nodes stop polling, then exchange their reports over a
 * socketpair, and only then remove their end of the memif link (DPDK 22.11's
 * memif must not see its peer vanish while polling). The parent prints one
 * summary and exits 0 only when every object of both nodes was verified,
 * every removal succeeded, both allocators passed their check, no packet
 * buffer leaked and node-b exited 0. Every wait has a deadline on the
 * monotonic clock; the child is always reaped, and killed first when it
 * does not end in time.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tide_clock.h"
#include "tide_eth.h"
#include "tide_eth_node.h"
#include "tide_lcore.h"
#include "tide_log.h"
#include "tide_net.h"
#include "tide_node_rt.h"
#include "tide_nodeenv.h"
#include "tide_rng.h"
#include "tide_seg.h"

#define MIB             (1024.0 * 1024.0)
#define NS_PER_S        1000000000ull
#define STORE_PORT      7100
#define NODE_IP(i)      (0x0a4f0001u + (uint32_t)(i)) /* 10.79.0.1, 10.79.0.2 */
#define PER_SHARD       37
#define BIG_SPAN        (256 * 1024) /* spread of the large objects' sizes */
#define START_LIMIT_S   60           /* for node-a's memif server to appear */
#define CONNECT_LIMIT_S 15           /* from a node's start to its writer's connection */
#define RUN_LIMIT_S     30           /* plus the workload at RUN_MIN_RATE */
#define RUN_MIN_RATE    (20 << 20)   /* bytes/s each way, written and read back */
#define PEER_GRACE_S    5            /* to finish this node's part once its peer failed */
#define STOP_LIMIT_S    30           /* for the peer's report once this node stopped */
#define REAP_LIMIT_S    30           /* for node-b to exit after the exchange */
#define LINK_CHECK_NS   1000000ull   /* link-state queries while waiting to connect */

/* ---- the workload ---------------------------------------------------------- */

/* Object sizes of one Miles rollout shard (miles-usage.md 1.5): a ~10 KB
 * manifest, a ~3 KB meta blob, and per ragged field a data member plus small
 * offsets/shapes/ndims/nulls members; the data members of long fields are the
 * large ones. Scaled by `big` so the run stays quick. */
static uint32_t
shard_obj_size(uint32_t i, uint64_t *rng, uint32_t big)
{
	uint64_t r = tide_rng_next(rng);

	if (i == 0)
		return 10 * 1024 + (uint32_t)(r % 2048);
	if (i == 1)
		return 3 * 1024 + (uint32_t)(r % 1024);
	switch (i % 5) {
	case 0: /* .data of a ragged field */
		return 4096 + (uint32_t)(r % big);
	case 1: /* .offsets, int64 per row */
		return 8 * (65 + (uint32_t)(r % 64));
	default: /* .shapes, .ndims, .nulls: tiny */
		return 1 + (uint32_t)(r % 256);
	}
}

/* Node i writes shards s with s % 2 == i into the other node's segment. */
static unsigned
shard_writer(uint32_t shard)
{
	return shard % 2;
}

/* A training step removes every other pair of shards, half of each node's. */
static bool
shard_removed(uint32_t shard)
{
	return shard % 4 >= 2;
}

/* The bytes of object `id`, the same in any process for a given seed. */
static void
obj_fill(uint8_t *p, uint32_t len, uint64_t seed, uint32_t id)
{
	uint64_t rng = seed ^ (0x9e3779b97f4a7c15ull * (id + 1ull));

	for (uint32_t i = 0; i < len; i += 8) {
		uint64_t v = tide_rng_next(&rng);

		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* ---- the store protocol ------------------------------------------------------ */

/*
 * Every request and answer starts with the same 24-byte header, fields
 * little-endian: op, status (answers: 0 or -errno), object id (echoed),
 * length, offset. Requests: PUT (len bytes follow), GET (off, len), DEL (off),
 * STAT. Answers, in request order: PUT (off where the object was placed), GET
 * (len bytes follow when status is 0), DEL, STAT (STAT_LEN bytes follow).
 */
enum op { OP_PUT = 1, OP_GET, OP_DEL, OP_STAT };

#define MSG_LEN    24
#define STAT_LEN   48         /* six u64: size, used, live, largest free, extents, frag ppb */
#define INLINE_MAX 4096       /* payload copied next to its header, not sent on its own */
#define STAGE_LEN  (16384)    /* requests or answers batched into one send */
#define OBJ_MAX    (1u << 30) /* largest PUT a store accepts */

struct msg {
	uint32_t op;
	int32_t status;
	uint32_t obj;
	uint32_t len;
	uint64_t off;
};

static void
msg_pack(uint8_t *b, uint32_t op, int32_t status, uint32_t obj, uint32_t len, uint64_t off)
{
	uint32_t w[4] = {htole32(op), htole32((uint32_t)status), htole32(obj), htole32(len)};
	uint64_t o = htole64(off);

	memcpy(b, w, sizeof(w));
	memcpy(b + sizeof(w), &o, sizeof(o));
}

static void
msg_unpack(const uint8_t *b, struct msg *m)
{
	uint32_t w[4];
	uint64_t o;

	memcpy(w, b, sizeof(w));
	memcpy(&o, b + sizeof(w), sizeof(o));
	m->op = le32toh(w[0]);
	m->status = (int32_t)le32toh(w[1]);
	m->obj = le32toh(w[2]);
	m->len = le32toh(w[3]);
	m->off = le64toh(o);
}

/*
 * Both ends read 24-byte headers that TCP may split anywhere: take what d[0..n)
 * holds of the one in hdr (*got bytes of it so far). Returns the bytes taken;
 * the header is whole once *got reaches MSG_LEN.
 */
static size_t
msg_hdr_take(uint8_t *hdr, uint32_t *got, const uint8_t *d, size_t n)
{
	size_t k = MSG_LEN - *got < n ? MSG_LEN - *got : n;

	memcpy(hdr + *got, d, k);
	*got += (uint32_t)k;
	return k;
}

/* The allocator's state as a writer learns it from a STAT answer. */
struct seg_snap {
	uint64_t size, used, live, largest_free, free_extents;
	double frag;
};

static void
stat_pack(uint8_t *b, const struct tide_seg_stats *st)
{
	uint64_t v[6] = {htole64(st->size),         htole64(st->used),
			 htole64(st->live_allocs),  htole64(st->largest_free),
			 htole64(st->free_extents), htole64((uint64_t)(st->fragmentation * 1e9))};

	memcpy(b, v, sizeof(v));
}

static void
stat_unpack(const uint8_t *b, struct seg_snap *s)
{
	uint64_t v[6];

	memcpy(v, b, sizeof(v));
	s->size = le64toh(v[0]);
	s->used = le64toh(v[1]);
	s->live = le64toh(v[2]);
	s->largest_free = le64toh(v[3]);
	s->free_extents = le64toh(v[4]);
	s->frag = (double)le64toh(v[5]) / 1e9;
}

/* ---- a node's state -------------------------------------------------------- */

/* One object a node writes into its peer's segment. */
struct obj {
	uint32_t id; /* in the whole workload */
	uint32_t shard;
	uint32_t len;
	uint64_t src_off; /* where its bytes are in the writer's source buffer */
	uint64_t off;     /* where the peer's store placed it */
	bool put_ok;
};

/* What a writer found; the same in its node's report. */
struct wr_result {
	uint32_t nobj, put_failed, verified, incomplete, mismatched, removed, remove_failed;
	uint32_t nstat, stat_failed;
	int32_t put_err;             /* the first PUT's refusal */
	struct seg_snap peer_seg[2]; /* the peer's segment after the writes, after the removal */
	uint64_t bytes, put_ns, get_ns;
};

/*
 * The writer's session is one sequence of requests, answered in order:
 * PUT of each object (0..n-1), GET of each (n..2n-1), STAT (2n), DEL of each
 * removed object, STAT (total-1). Requests are sent ahead of their answers,
 * up to tx_limit: GETs only once every PUT is answered (they need the
 * offsets), DELs only once every GET is (the objects are verified first).
 */
struct writer {
	struct tide_net_conn *conn;
	struct obj *obj;
	uint32_t n;
	uint8_t *src;
	uint32_t *rm; /* indices into obj[] of the objects removed */
	uint32_t nrm;
	uint32_t total, tx_req, tx_limit, rx_req;
	bool connect_sent, done;
	uint64_t next_link_check;
	/* Requests staged for one send; a large PUT's rest goes from src. */
	uint8_t stage[STAGE_LEN];
	size_t stage_len, stage_sent;
	const uint8_t *big;
	uint64_t big_left;
	/* The answer being received. */
	uint8_t rx_hdr[MSG_LEN];
	uint32_t rx_hdr_got;
	struct msg ans;
	uint64_t rx_pay_len, rx_pay_got;
	bool rx_diff;
	uint8_t stat_buf[STAT_LEN];
	struct wr_result res;
	uint64_t t_put0, t_put1, t_get0, t_get1;
};

/* The node's segment, served to the peer's writer over one connection. */
struct store {
	struct tide_net_conn *conn;
	struct tide_seg *seg;
	uint8_t *mem;
	uint64_t size;
	uint8_t hdr[MSG_LEN];
	uint32_t hdr_got;
	struct msg req;
	uint64_t pay_left; /* PUT bytes still to come */
	uint8_t *pay_dst;  /* where they go; NULL: discarded (the allocation failed) */
	int put_rc;
	/* Answers not yet taken by the send buffer; a large GET's bytes follow. */
	uint8_t out[STAGE_LEN];
	size_t out_len;
	const uint8_t *get_src;
	uint64_t get_left;
	bool held, peer_closed, done;
	uint64_t puts, gets, dels, refused;
};

/* What a node tells the parent (node-b over the socketpair). */
struct node_report {
	int32_t status; /* 0: this node's part verified; else the first failure's -errno */
	char why[256];
	int32_t pid, cpu;
	bool up, hugepages;
	char csum[48];
	struct wr_result wr; /* the objects this node wrote into its peer's segment */
	/* Store: requests of the peer's writer. */
	uint64_t st_puts, st_gets, st_dels, st_refused;
	/* Stack and port. */
	uint64_t tcp_tx_segs, tcp_rx_segs, tcp_retrans, port_opackets, port_ipackets, port_imissed;
};

struct node {
	unsigned idx;
	const char *name, *peer_name;
	const char *sock; /* the memif socket */
	struct tide_nodeenv ne;
	struct tide_node_rt *rt;
	struct tide_net_stack *stack;
	struct tide_net_listener *listener;
	uint64_t now; /* this lcore iteration's clock, for callbacks */
	uint64_t seed;
	struct writer wr;
	struct store st;
	uint64_t t_closed, linger_ns;
	bool failed;  /* written by the lcore while it runs, by main once it stopped */
	int wait_err; /* why node_wait() gave up (main thread), 0: it did not */
	char wait_why[256];
	atomic_bool connected, finished;
	struct node_report rep;
};

/* The first failure of a node is the one reported. */
static void __attribute__((format(printf, 3, 4)))
node_fail(struct node *nd, int err, const char *fmt, ...)
{
	va_list ap;

	if (nd->failed)
		return;
	nd->failed = true;
	nd->rep.status = err < 0 ? err : -EIO;
	va_start(ap, fmt);
	vsnprintf(nd->rep.why, sizeof(nd->rep.why), fmt, ap);
	va_end(ap);
}

/* ---- the store: this node's segment, served to the peer ------------------- */

static void
store_flush(struct store *s, uint64_t now)
{
	while (s->out_len > 0) {
		ssize_t k = tide_net_send(s->conn, s->out, s->out_len, now);

		if (k <= 0)
			return;
		memmove(s->out, s->out + k, s->out_len - (size_t)k);
		s->out_len -= (size_t)k;
	}
	while (s->get_left > 0) {
		ssize_t k = tide_net_send(s->conn, s->get_src, s->get_left, now);

		if (k <= 0)
			return;
		s->get_src += k;
		s->get_left -= (uint64_t)k;
	}
}

/* Room for any one answer: a request is taken only when its answer fits. */
static bool
store_room(struct store *s, uint64_t now)
{
	if (s->get_left > 0 || s->out_len + MSG_LEN + INLINE_MAX > sizeof(s->out))
		store_flush(s, now);
	return s->get_left == 0 && s->out_len + MSG_LEN + INLINE_MAX <= sizeof(s->out);
}

static void
store_answer(struct store *s, int32_t status, uint32_t len, uint64_t off)
{
	msg_pack(s->out + s->out_len, s->req.op, status, s->req.obj, len, off);
	s->out_len += MSG_LEN;
}

/* A complete request header: act on it (PUT bytes follow it). */
static int
store_request(struct store *s)
{
	uint64_t alen;
	int rc;

	msg_unpack(s->hdr, &s->req);
	switch (s->req.op) {
	case OP_PUT:
		if (s->req.len == 0 || s->req.len > OBJ_MAX)
			return -EPROTO;
		s->put_rc = tide_seg_alloc(s->seg, s->req.len, 64, &s->req.off);
		s->pay_dst = s->put_rc == 0 ? s->mem + s->req.off : NULL;
		s->pay_left = s->req.len;
		return 0;
	case OP_GET:
		s->gets++;
		/* Only bytes of a live allocation leave the segment. */
		rc = s->req.len == 0 ? -EINVAL : tide_seg_alloc_size(s->seg, s->req.off, &alen);
		if (rc == 0 && s->req.len > alen)
			rc = -ERANGE;
		if (rc != 0) {
			s->refused++;
			store_answer(s, rc, 0, s->req.off);
		} else if (s->req.len <= INLINE_MAX) {
			store_answer(s, 0, s->req.len, s->req.off);
			memcpy(s->out + s->out_len, s->mem + s->req.off, s->req.len);
			s->out_len += s->req.len;
		} else {
			store_answer(s, 0, s->req.len, s->req.off);
			s->get_src = s->mem + s->req.off;
			s->get_left = s->req.len;
		}
		return 0;
	case OP_DEL:
		s->dels++;
		rc = tide_seg_free(s->seg, s->req.off);
		if (rc != 0)
			s->refused++;
		store_answer(s, rc, 0, s->req.off);
		return 0;
	case OP_STAT: {
		struct tide_seg_stats st;

		/* The allocator's invariants are checked whenever its state is asked. */
		rc = tide_seg_check(s->seg);
		tide_seg_stats_get(s->seg, &st);
		store_answer(s, rc, STAT_LEN, 0);
		stat_pack(s->out + s->out_len, &st);
		s->out_len += STAT_LEN;
		return 0;
	}
	default:
		return -EPROTO;
	}
}

static size_t
store_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct node *nd = arg;
	struct store *s = &nd->st;
	size_t used = 0;

	(void)c;
	while (used < n) {
		if (s->pay_left > 0) {
			size_t k = s->pay_left < n - used ? (size_t)s->pay_left : n - used;

			if (s->pay_dst != NULL) {
				memcpy(s->pay_dst, d + used, k);
				s->pay_dst += k;
			}
			s->pay_left -= k;
			used += k;
			if (s->pay_left == 0) {
				s->puts++;
				if (s->put_rc != 0)
					s->refused++;
				store_answer(s, s->put_rc, 0, s->put_rc == 0 ? s->req.off : 0);
			}
			continue;
		}
		/* Backpressure: the rest waits in the stack until store_progress()
		 * resumes it, and the peer's window closes meanwhile. */
		if (s->hdr_got == 0 && !store_room(s, nd->now)) {
			s->held = true;
			break;
		}
		used += msg_hdr_take(s->hdr, &s->hdr_got, d + used, n - used);
		if (s->hdr_got < MSG_LEN)
			break;
		s->hdr_got = 0;
		if (store_request(s) != 0) {
			node_fail(nd, -EPROTO,
				  "%s's store: request %u from %s's writer is not one of the "
				  "protocol",
				  nd->name, s->req.op, nd->peer_name);
			tide_net_abort(s->conn, nd->now);
			s->conn = NULL;
			return n;
		}
	}
	store_flush(s, nd->now);
	return used;
}

static void
store_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct node *nd = arg;
	struct store *s = &nd->st;

	(void)c;
	if (ev == TIDE_NET_EV_PEER_CLOSED) {
		s->peer_closed = true; /* store_progress() closes once everything is answered */
	} else if (ev == TIDE_NET_EV_CLOSED && !s->done) {
		node_fail(nd, reason != 0 ? reason : -ECONNRESET,
			  "%s's store: the connection from %s's writer ended: %s", nd->name,
			  nd->peer_name, strerror(reason != 0 ? -reason : ECONNRESET));
		tide_net_abort(s->conn, nd->now);
		s->conn = NULL;
	}
}

static int
store_accept(void *arg, struct tide_net_conn *conn)
{
	static const struct tide_net_conn_cbs cbs = {.on_recv = store_recv,
						     .on_event = store_event};
	struct node *nd = arg;

	if (nd->st.conn != NULL || nd->st.done)
		return -EBUSY; /* one writer per store */
	nd->st.conn = conn;
	tide_net_conn_set_cbs(conn, &cbs, nd);
	return 0;
}

/* Every iteration (level-triggered): send what waits, resume a held receive,
 * and close once the peer's writer closed and everything is answered. */
static int
store_progress(struct node *nd, uint64_t now)
{
	struct store *s = &nd->st;
	struct tide_net_conn_info ci;

	if (s->conn == NULL)
		return 0;
	store_flush(s, now);
	if (s->held && store_room(s, now)) {
		s->held = false;
		tide_net_recv_resume(s->conn, now);
		return 1;
	}
	if (!s->peer_closed || s->held || s->out_len > 0 || s->get_left > 0)
		return 0;
	tide_net_conn_info(s->conn, &ci);
	if (ci.rcv_queued > 0)
		return 0;
	if (s->pay_left > 0 || s->hdr_got > 0) {
		node_fail(nd, -EPROTO, "%s's store: %s's writer closed in the middle of a request",
			  nd->name, nd->peer_name);
		tide_net_abort(s->conn, now);
	} else {
		tide_net_close(s->conn, now);
	}
	s->conn = NULL;
	s->done = true;
	return 1;
}

/* ---- the writer: this node's objects, into the peer's segment ------------- */

/* Request k of the session (see struct writer): its op and object index. */
static uint32_t
req_of(const struct writer *w, uint32_t k, uint32_t *i)
{
	*i = UINT32_MAX;
	if (k < w->n) {
		*i = k;
		return OP_PUT;
	}
	if (k < 2 * w->n) {
		*i = k - w->n;
		return OP_GET;
	}
	if (k > 2 * w->n && k - 2 * w->n - 1 < w->nrm) {
		*i = w->rm[k - 2 * w->n - 1];
		return OP_DEL;
	}
	return OP_STAT;
}

/* Stage request tx_req (and more small ones after it) for one send. */
static void
writer_stage(struct writer *w)
{
	w->stage_len = w->stage_sent = 0;
	while (w->tx_req < w->tx_limit && w->stage_len + MSG_LEN + INLINE_MAX <= sizeof(w->stage)) {
		uint8_t *b = w->stage + w->stage_len;
		uint32_t i, op = req_of(w, w->tx_req, &i);
		const struct obj *o = i != UINT32_MAX ? &w->obj[i] : NULL;
		uint32_t len = o != NULL ? o->len : 0;

		/* A failed PUT has no offset: its GET asks for one no allocation
		 * has, and the store refuses it (the object counts as not placed). */
		msg_pack(b, op, 0, o != NULL ? o->id : 0, op == OP_DEL ? 0 : len,
			 op == OP_PUT              ? 0
			 : o == NULL || !o->put_ok ? UINT64_MAX
						   : o->off);
		w->stage_len += MSG_LEN;
		w->tx_req++;
		if (op != OP_PUT)
			continue;
		if (len <= INLINE_MAX) {
			memcpy(w->stage + w->stage_len, w->src + o->src_off, len);
			w->stage_len += len;
			continue;
		}
		w->big = w->src + o->src_off;
		w->big_left = len;
		break; /* its bytes follow the stage */
	}
}

/* Every iteration (level-triggered): fill the send buffer with requests. */
static int
writer_progress(struct node *nd, uint64_t now)
{
	struct writer *w = &nd->wr;
	int work = 0;

	if (w->conn == NULL || !atomic_load_explicit(&nd->connected, memory_order_relaxed))
		return 0;
	for (;;) {
		ssize_t k;

		if (w->stage_sent < w->stage_len) {
			k = tide_net_send(w->conn, w->stage + w->stage_sent,
					  w->stage_len - w->stage_sent, now);
			if (k > 0)
				w->stage_sent += (size_t)k;
		} else if (w->big_left > 0) {
			k = tide_net_send(w->conn, w->big, w->big_left, now);
			if (k > 0) {
				w->big += k;
				w->big_left -= (uint64_t)k;
			}
		} else if (w->tx_req < w->tx_limit) {
			writer_stage(w);
			continue;
		} else {
			return work;
		}
		if (k < 0) {
			node_fail(nd, (int)k, "%s's writer: send to %s failed: %s", nd->name,
				  nd->peer_name, strerror((int)-k));
			return work;
		}
		if (k == 0)
			return work; /* the send buffer is full: ACKs bring us back */
		work++;
	}
}

/* Raise the send limit at the session's two barriers; close at its end. */
static void
writer_advance(struct node *nd, uint64_t now)
{
	struct writer *w = &nd->wr;

	if (w->rx_req == w->n && w->tx_limit == w->n) {
		/* Every PUT answered: read everything back, then the state. The
		 * objects to remove are known now (only placed ones count). */
		for (uint32_t i = 0; i < w->n; i++)
			if (shard_removed(w->obj[i].shard) && w->obj[i].put_ok)
				w->rm[w->nrm++] = i;
		w->total = 2 * w->n + 2 + w->nrm;
		w->tx_limit = 2 * w->n + 1;
		w->t_get0 = now;
	}
	if (w->rx_req == 2 * w->n + 1 && w->tx_limit == 2 * w->n + 1)
		w->tx_limit = w->total; /* verified: remove, then the state again */
	if (w->total != 0 && w->rx_req == w->total && !w->done) {
		tide_net_close(w->conn, now);
		w->conn = NULL;
		w->done = true;
	}
}

/* The answer to request rx_req is complete. */
static void
writer_answered(struct node *nd, uint64_t now)
{
	struct writer *w = &nd->wr;
	uint32_t i, op = req_of(w, w->rx_req, &i);

	switch (op) {
	case OP_PUT:
		w->obj[i].put_ok = w->ans.status == 0;
		w->obj[i].off = w->ans.off;
		if (w->ans.status != 0 && w->res.put_failed++ == 0)
			w->res.put_err = w->ans.status;
		if (i + 1 == w->n)
			w->t_put1 = now;
		break;
	case OP_GET:
		if (!w->obj[i].put_ok)
			; /* counted as not placed */
		else if (w->ans.status != 0)
			w->res.incomplete++;
		else if (w->rx_diff)
			w->res.mismatched++;
		else
			w->res.verified++;
		if (i + 1 == w->n)
			w->t_get1 = now;
		break;
	case OP_DEL:
		if (w->ans.status == 0)
			w->res.removed++;
		else
			w->res.remove_failed++;
		break;
	default:
		if (w->ans.status != 0)
			w->res.stat_failed++;
		stat_unpack(w->stat_buf, &w->res.peer_seg[w->res.nstat < 2 ? w->res.nstat : 1]);
		w->res.nstat++;
		break;
	}
	w->rx_req++;
	w->rx_hdr_got = 0;
	writer_advance(nd, now);
}

/* A complete answer header: check it belongs to the next request. */
static int
writer_answer_hdr(struct writer *w)
{
	uint32_t i, op = req_of(w, w->rx_req, &i);
	uint32_t id = i != UINT32_MAX ? w->obj[i].id : 0;

	msg_unpack(w->rx_hdr, &w->ans);
	if (w->rx_req >= w->tx_req || w->ans.op != op || w->ans.obj != id)
		return -EPROTO;
	w->rx_pay_got = 0;
	w->rx_diff = false;
	w->rx_pay_len = 0;
	if (op == OP_GET && w->ans.status == 0) {
		if (w->ans.len != w->obj[i].len)
			return -EPROTO;
		w->rx_pay_len = w->ans.len;
	} else if (op == OP_STAT) {
		if (w->ans.len != STAT_LEN)
			return -EPROTO;
		w->rx_pay_len = STAT_LEN;
	}
	return 0;
}

static size_t
writer_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct node *nd = arg;
	struct writer *w = &nd->wr;
	size_t used = 0;

	(void)c;
	while (used < n && !w->done) {
		size_t k;

		if (w->rx_hdr_got < MSG_LEN) {
			used += msg_hdr_take(w->rx_hdr, &w->rx_hdr_got, d + used, n - used);
			if (w->rx_hdr_got < MSG_LEN)
				break;
			if (writer_answer_hdr(w) != 0) {
				node_fail(
					nd, -EPROTO,
					"%s's writer: answer %u from %s's store (op %u, object %u) "
					"does not match request %u",
					nd->name, w->rx_req, nd->peer_name, w->ans.op, w->ans.obj,
					w->rx_req);
				tide_net_abort(w->conn, nd->now);
				w->conn = NULL;
				return n;
			}
		} else {
			uint64_t left = w->rx_pay_len - w->rx_pay_got;

			k = left < n - used ? (size_t)left : n - used;
			if (w->ans.op == OP_GET) {
				uint32_t i;

				(void)req_of(w, w->rx_req, &i);
				/* Byte for byte against the source. */
				if (memcmp(d + used, w->src + w->obj[i].src_off + w->rx_pay_got,
					   k) != 0)
					w->rx_diff = true;
			} else {
				memcpy(w->stat_buf + w->rx_pay_got, d + used, k);
			}
			w->rx_pay_got += k;
			used += k;
		}
		if (w->rx_pay_got == w->rx_pay_len)
			writer_answered(nd, nd->now);
	}
	return n; /* bytes after the last answer are the peer's error, caught above */
}

static void
writer_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct node *nd = arg;
	struct writer *w = &nd->wr;

	(void)c;
	if (ev == TIDE_NET_EV_CONNECTED) {
		atomic_store_explicit(&nd->connected, true, memory_order_relaxed);
		w->t_put0 = nd->now;
		writer_advance(nd, nd->now); /* a writer with no objects goes on at once */
	} else if (ev == TIDE_NET_EV_PEER_CLOSED && !w->done) {
		node_fail(nd, -ECONNRESET,
			  "%s's writer: %s's store closed the connection after %u of %u answers",
			  nd->name, nd->peer_name, w->rx_req, w->total);
		tide_net_abort(w->conn, nd->now);
		w->conn = NULL;
	} else if (ev == TIDE_NET_EV_CLOSED && !w->done) {
		int err = reason != 0 ? reason : -ECONNRESET;

		if (!atomic_load_explicit(&nd->connected, memory_order_relaxed))
			node_fail(nd, err, "%s's writer: no connection to %s's store: %s", nd->name,
				  nd->peer_name, strerror(-err));
		else
			node_fail(nd, err, "%s's writer: connection to %s's store lost: %s",
				  nd->name, nd->peer_name, strerror(-err));
		tide_net_abort(w->conn, nd->now);
		w->conn = NULL;
	}
}

/* Connect once the link is up, so the first SYN (and ARP) is not lost to a
 * link still coming up, which would cost a 1 s retransmission. */
static int
writer_connect(struct node *nd, uint64_t now)
{
	static const struct tide_net_conn_cbs cbs = {.on_recv = writer_recv,
						     .on_event = writer_event};
	struct writer *w = &nd->wr;
	int rc;

	if (now < w->next_link_check)
		return 0;
	w->next_link_check = now + LINK_CHECK_NS;
	if (!tide_eth_port_link_up(tide_eth_node_port(tide_node_rt_port(nd->rt))))
		return 0;
	w->connect_sent = true;
	rc = tide_net_connect(nd->stack, NODE_IP(1 - nd->idx), STORE_PORT, &cbs, nd, now, &w->conn);
	if (rc != 0) {
		w->conn = NULL;
		node_fail(nd, rc, "%s's writer: cannot connect to %s: %s", nd->name, nd->peer_name,
			  strerror(-rc));
	}
	return 1;
}

/* ---- runtime hooks (on the node's polling lcore) --------------------------- */

static int
node_lcore_init(void *arg, unsigned idx, struct tide_net_stack *stack, uint64_t now)
{
	struct node *nd = arg;

	(void)idx;
	nd->stack = stack;
	nd->now = now;
	return tide_net_listen(stack, STORE_PORT, 4, store_accept, nd, &nd->listener);
}

static void
node_lcore_pre(void *arg, unsigned idx, uint64_t now)
{
	(void)idx;
	((struct node *)arg)->now = now;
}

static int
node_lcore_poll(void *arg, unsigned idx, uint64_t now)
{
	struct node *nd = arg;
	int work = 0;

	(void)idx;
	if (atomic_load_explicit(&nd->finished, memory_order_relaxed))
		return 0;
	if (!nd->failed && !nd->wr.connect_sent)
		work += writer_connect(nd, now);
	if (!nd->failed)
		work += writer_progress(nd, now);
	if (!nd->failed)
		work += store_progress(nd, now);
	/* Done once both sides closed and the stack let the connections go (or
	 * linger_ns passed: a last lost ACK must not hold the run); at once on
	 * a failure. */
	if (!nd->failed) {
		if (!nd->wr.done || !nd->st.done)
			return work;
		if (nd->t_closed == 0)
			nd->t_closed = now;
		if (tide_net_stats(nd->stack)->tcp_conns > 0 && now - nd->t_closed < nd->linger_ns)
			return work;
	}
	atomic_store_explicit(&nd->finished, true, memory_order_release);
	return work + 1;
}

/* On the lcore before it stops: a failed node resets what it still holds,
 * so its peer learns at once instead of at its deadline. */
static void
node_lcore_teardown(void *arg)
{
	struct node *nd = arg;
	uint64_t now = tide_mono_ns();

	if (nd->wr.conn != NULL)
		tide_net_abort(nd->wr.conn, now);
	nd->wr.conn = NULL;
	if (nd->st.conn != NULL)
		tide_net_abort(nd->st.conn, now);
	nd->st.conn = NULL;
	tide_net_listener_close(nd->listener, now);
	nd->listener = NULL;
}

/* ---- the control channel between the two processes ------------------------ */

struct ctl {
	int fd;
	bool peer_done; /* peer's report received: it stopped polling */
	bool peer_gone; /* its end closed without a report */
	struct node_report peer;
};

/* Wait up to timeout_ms for the peer's report (or its end closing); once
 * either came, just sleep that long. */
static void
ctl_poll(struct ctl *c, int timeout_ms)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	ssize_t k;

	if (c->peer_done || c->peer_gone) {
		(void)poll(NULL, 0, timeout_ms);
		return;
	}
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return;
	k = recv(c->fd, &c->peer, sizeof(c->peer), 0);
	if (k == (ssize_t)sizeof(c->peer))
		c->peer_done = true;
	else if (k >= 0 || (errno != EINTR && errno != EAGAIN))
		c->peer_gone = true; /* closed, or not a report */
}

static void
ctl_send(struct ctl *c, const struct node_report *r)
{
	if (!c->peer_gone && send(c->fd, r, sizeof(*r), MSG_NOSIGNAL) != (ssize_t)sizeof(*r))
		c->peer_gone = true;
}

/* ---- one node, start to end ------------------------------------------------- */

static int
node_prepare(struct node *nd, const uint32_t *lens, uint32_t nobj)
{
	struct tide_seg_opts so;
	uint64_t src_len = 0;
	int rc;

	nd->st.size = nd->ne.global_segment_size;
	if (nd->st.size < 64) {
		node_fail(nd, -EINVAL, "%s: MOONCAKE_GLOBAL_SEGMENT_SIZE %" PRIu64 " is too small",
			  nd->name, nd->st.size);
		return -EINVAL;
	}
	nd->st.size &= ~63ull; /* a multiple of the allocator's granule */
	/* Anonymous memory: a node that runs for real maps its segment from
	 * hugepages and registers it with the transfer engine. */
	nd->st.mem = mmap(NULL, nd->st.size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (nd->st.mem == MAP_FAILED) {
		nd->st.mem = NULL;
		node_fail(nd, -ENOMEM, "%s: cannot map a %" PRIu64 " MiB segment: %s", nd->name,
			  nd->st.size >> 20, strerror(errno));
		return -ENOMEM;
	}
	tide_seg_opts_init(&so, sizeof(so));
	so.size = nd->st.size;
	rc = tide_seg_create(&so, &nd->st.seg);
	if (rc != 0) {
		node_fail(nd, rc, "%s: segment allocator: %s", nd->name, strerror(-rc));
		return rc;
	}
	for (uint32_t id = 0; id < nobj; id++)
		nd->wr.n += shard_writer(id / PER_SHARD) == nd->idx;
	nd->wr.obj = calloc(nd->wr.n + 1, sizeof(*nd->wr.obj));
	nd->wr.rm = calloc(nd->wr.n + 1, sizeof(*nd->wr.rm));
	if (nd->wr.obj == NULL || nd->wr.rm == NULL) {
		node_fail(nd, -ENOMEM, "%s: out of memory for the workload", nd->name);
		return -ENOMEM;
	}
	for (uint32_t id = 0, i = 0; id < nobj; id++) {
		if (shard_writer(id / PER_SHARD) != nd->idx)
			continue;
		nd->wr.obj[i] = (struct obj){
			.id = id, .shard = id / PER_SHARD, .len = lens[id], .src_off = src_len};
		src_len += lens[id];
		i++;
	}
	nd->wr.res.bytes = src_len;
	nd->wr.src = malloc(src_len + 1);
	if (nd->wr.src == NULL) {
		node_fail(nd, -ENOMEM, "%s: out of memory for %" PRIu64 " MiB of objects", nd->name,
			  src_len >> 20);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nd->wr.n; i++)
		obj_fill(nd->wr.src + nd->wr.obj[i].src_off, nd->wr.obj[i].len, nd->seed,
			 nd->wr.obj[i].id);
	nd->wr.tx_limit = nd->wr.n; /* the PUTs first */
	return 0;
}

static void
node_release(struct node *nd)
{
	free(nd->wr.obj);
	free(nd->wr.rm);
	free(nd->wr.src);
	tide_seg_destroy(nd->st.seg);
	if (nd->st.mem != NULL)
		munmap(nd->st.mem, nd->st.size);
}

/*
 * Wait for the node to finish, fail or time out. A peer that failed after
 * starting leaves this node PEER_GRACE_S to end its own part (its result is
 * worth reporting too; a peer that reset the connections ends it sooner); a
 * peer that never started, or is gone, ends the wait at once.
 */
static void
node_wait(struct node *nd, struct ctl *c)
{
	uint64_t t0 = tide_mono_ns(), connect_by = t0 + CONNECT_LIMIT_S * NS_PER_S, run_by = 0;
	uint64_t run_ns = (RUN_LIMIT_S + 2 * nd->wr.res.bytes / RUN_MIN_RATE) * NS_PER_S;
	uint64_t grace_by = 0;

	while (!atomic_load_explicit(&nd->finished, memory_order_acquire)) {
		uint64_t now = tide_mono_ns();

		if (!atomic_load_explicit(&nd->connected, memory_order_relaxed)) {
			if (now > connect_by) {
				nd->wait_err = -ETIMEDOUT;
				snprintf(nd->wait_why, sizeof(nd->wait_why),
					 "%s's writer: no TCP connection to %s (10.79.0.%u:%u) "
					 "within %d s",
					 nd->name, nd->peer_name, 2 - nd->idx, STORE_PORT,
					 CONNECT_LIMIT_S);
				return;
			}
		} else if (run_by == 0) {
			run_by = now + run_ns;
		} else if (now > run_by) {
			nd->wait_err = -ETIMEDOUT;
			snprintf(nd->wait_why, sizeof(nd->wait_why),
				 "%s: the workload did not finish within %.0f s", nd->name,
				 run_ns / 1e9);
			return;
		}
		ctl_poll(c, 2);
		if (c->peer_gone) {
			nd->wait_err = -EPIPE;
			snprintf(nd->wait_why, sizeof(nd->wait_why), "%s: %s is gone", nd->name,
				 nd->peer_name);
			return;
		}
		if (c->peer_done && c->peer.status != 0 && c->peer.up && grace_by == 0)
			grace_by = now + PEER_GRACE_S * NS_PER_S;
		if (c->peer_done && c->peer.status != 0 && (!c->peer.up || now > grace_by)) {
			nd->wait_err = -ECANCELED;
			snprintf(nd->wait_why, sizeof(nd->wait_why), "%s: stopped: %s failed",
				 nd->name, nd->peer_name);
			return;
		}
	}
}

static void
node_report_fill(struct node *nd)
{
	struct node_report *r = &nd->rep;
	const struct writer *w = &nd->wr;
	const struct tide_node_rt_info *ri = tide_node_rt_info(nd->rt);
	const struct tide_net_stats *ns = tide_net_stats(nd->stack);
	struct tide_eth_port_stats ps = {0};

	r->up = true;
	r->cpu = ri->cpus[0];
	r->hugepages = ri->hugepages;
	snprintf(r->csum, sizeof(r->csum), "%s", ri->csum);
	r->wr = w->res;
	r->wr.nobj = w->n;
	r->wr.put_ns = w->t_put1 > w->t_put0 ? w->t_put1 - w->t_put0 : 0;
	r->wr.get_ns = w->t_get1 > w->t_get0 ? w->t_get1 - w->t_get0 : 0;
	r->st_puts = nd->st.puts;
	r->st_gets = nd->st.gets;
	r->st_dels = nd->st.dels;
	r->st_refused = nd->st.refused;
	if (ns != NULL) {
		r->tcp_tx_segs = ns->tcp_tx_segs;
		r->tcp_rx_segs = ns->tcp_rx_segs;
		r->tcp_retrans = ns->tcp_retrans_segs;
	}
	if (tide_eth_port_stats(tide_eth_node_port(tide_node_rt_port(nd->rt)), &ps) == 0) {
		r->port_opackets = ps.opackets;
		r->port_ipackets = ps.ipackets;
		r->port_imissed = ps.imissed;
	}
	if (nd->failed)
		return;
	/* Finished without a fault: the numbers must show it too. */
	if (w->res.put_failed != 0)
		node_fail(nd, -ENOSPC,
			  "%s's writer: %s's store did not place %u of %u objects (%s)%s", nd->name,
			  nd->peer_name, w->res.put_failed, w->n, strerror(-w->res.put_err),
			  w->res.put_err == -ENOSPC
				  ? ": segment full, raise MOONCAKE_GLOBAL_SEGMENT_SIZE"
				  : "");
	else if (w->res.verified != w->n)
		node_fail(nd, -EIO,
			  "%s's writer: %u of %u objects read back wrong (%u incomplete, %u "
			  "mismatched)",
			  nd->name, w->n - w->res.verified, w->n, w->res.incomplete,
			  w->res.mismatched);
	else if (w->res.removed != w->nrm)
		node_fail(nd, -EIO, "%s's writer: %s's store refused %u of %u removals", nd->name,
			  nd->peer_name, w->nrm - w->res.removed, w->nrm);
	else if (w->res.nstat != 2 || w->res.stat_failed != 0)
		node_fail(nd, -EUCLEAN, "%s's writer: %s's segment allocator failed its check",
			  nd->name, nd->peer_name);
}

/*
 * node-b (the memif client) starts once node-a's server socket exists: the
 * server publishes it only when its port started, and a client that finds it
 * connects at once instead of retrying (and logging each refusal).
 */
static int
node_await_server(struct node *nd, struct ctl *c)
{
	uint64_t by = tide_mono_ns() + START_LIMIT_S * NS_PER_S;
	struct stat st;

	while (stat(nd->sock, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		ctl_poll(c, 2);
		if (c->peer_gone || c->peer_done) {
			node_fail(nd, -ECANCELED, "%s: not started: %s failed first", nd->name,
				  nd->peer_name);
			return -ECANCELED;
		}
		if (tide_mono_ns() > by) {
			node_fail(nd, -ETIMEDOUT,
				  "%s: %s's memif server did not appear within %d s", nd->name,
				  nd->peer_name, START_LIMIT_S);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/*
 * Run node nd in this process: its runtime, the workload, the two-phase stop
 * with the peer. Fills nd->rep; returns 0 when this node's part verified.
 */
static int
node_run(struct node *nd, struct ctl *c, const uint32_t *lens, uint32_t nobj)
{
	struct tide_node_rt_opts ro = {0};
	uint64_t stop_by;
	unsigned held;
	int rc;

	nd->rep.pid = (int32_t)getpid();
	nd->rep.cpu = -1;
	rc = node_prepare(nd, lens, nobj);
	if (rc == 0 && nd->idx == 1)
		rc = node_await_server(nd, c);
	if (rc == 0) {
		ro.prog = "tide-cluster";
		ro.max_lcores = 1; /* the writer and the store share the node's stack */
		ro.time_wait_ms = 20;
		ro.lcore_init = node_lcore_init;
		ro.lcore_pre = node_lcore_pre;
		ro.lcore_poll = node_lcore_poll;
		ro.arg = nd;
		rc = tide_node_rt_start(&nd->ne, &ro, &nd->rt);
		if (rc != 0)
			node_fail(nd, rc,
				  "%s: user-space TCP did not start: %s (see the log above)",
				  nd->name, strerror(-rc));
	}
	if (rc != 0) {
		ctl_send(c, &nd->rep);
		node_release(nd);
		return rc;
	}
	/* After both closes, time for the last FIN and ACK to be retransmitted
	 * should they be lost: 4.5 RTO floors (one probe, two RTOs), as tide-net. */
	nd->linger_ns = (uint64_t)nd->ne.tcp_rto_min_us * 4500;
	nd->linger_ns = nd->linger_ns < 50000000ull     ? 50000000ull
			: nd->linger_ns > 2000000000ull ? 2000000000ull
							: nd->linger_ns;
	node_wait(nd, c);
	(void)tide_lcore_run_sync(tide_lcore_get(tide_node_rt_lcores(nd->rt), 0),
				  node_lcore_teardown, nd);
	/* Phase one: stop polling, then tell the peer (with the report). */
	tide_node_rt_stop(nd->rt);
	/* node_wait's reason (a deadline, the peer), unless the lcore had one. */
	if (nd->wait_err != 0)
		node_fail(nd, nd->wait_err, "%s", nd->wait_why);
	node_report_fill(nd);
	ctl_send(c, &nd->rep);
	/* Phase two: once the peer stopped too, either end may go. */
	stop_by = tide_mono_ns() + STOP_LIMIT_S * NS_PER_S;
	while (!c->peer_done && !c->peer_gone && tide_mono_ns() < stop_by)
		ctl_poll(c, 10);
	if (!c->peer_done && !c->peer_gone)
		node_fail(nd, -ETIMEDOUT, "%s: %s did not stop within %d s", nd->name,
			  nd->peer_name, STOP_LIMIT_S);
	nd->stack = NULL;
	held = tide_node_rt_destroy(nd->rt);
	nd->rt = NULL;
	if (held != 0)
		node_fail(nd, -EIO, "%s: %u packet buffers leaked", nd->name, held);
	node_release(nd);
	return nd->rep.status;
}

/* ---- the parent: set-up, node-b, summary ----------------------------------- */

/* Node i's configuration: the node file, then this process's environment,
 * under the overrides that make it one end of the memif pair. */
static int
node_env(const char *path, const struct tide_nodeenv *base, unsigned i, const char *sock,
	 struct tide_nodeenv *ne)
{
	static char kv[9][TIDE_NODEENV_TEXT_LEN + 32];
	extern char **environ;
	size_t nenv = 0, k = 0;
	char **env, bsize[32] = "", err[4096] = "";
	int rc;

	for (char **e = environ; *e != NULL; e++)
		nenv++;
	/* A memif buffer holds a whole frame (memif's default holds 2048 bytes). */
	if (base->mtu + 14 > 2048)
		snprintf(bsize, sizeof(bsize), ",bsize=%u", (base->mtu + 14 + 1023) & ~1023u);
	snprintf(kv[k++], sizeof(kv[0]),
		 "TIDE_DPDK_DEVICE=net_memif0,role=%s,socket=%s,socket-abstract=no%s",
		 i == 0 ? "server" : "client", sock, bsize);
	snprintf(kv[k++], sizeof(kv[0]), "TIDE_DPDK_RX_DEVICE=");
	snprintf(kv[k++], sizeof(kv[0]), "TIDE_DATA_IP=10.79.0.%u", i + 1);
	snprintf(kv[k++], sizeof(kv[0]), "TIDE_DATA_NETMASK=255.255.255.0");
	snprintf(kv[k++], sizeof(kv[0]), "TIDE_GATEWAY=");
	snprintf(kv[k++], sizeof(kv[0]), "TIDE_DATA_MAC=");
	/* The prefix is at most 32 characters: keep room for the suffix. */
	snprintf(kv[k++], sizeof(kv[0]), "TIDE_FILE_PREFIX=%.30s-%c", base->file_prefix,
		 i == 0 ? 'a' : 'b');
	snprintf(kv[k++], sizeof(kv[0]), "TIDE_CSUM=%s", base->fault.corrupt > 0 ? "sw" : "elide");
	env = calloc(nenv + k + 1, sizeof(*env));
	if (env == NULL)
		return -ENOMEM;
	/* The first entry of a name wins (getenv's rule): the overrides first. */
	for (size_t j = 0; j < k; j++)
		env[j] = kv[j];
	for (size_t j = 0; j < nenv; j++)
		env[k + j] = environ[j];
	rc = tide_nodeenv_load(ne, path, env, err, sizeof(err));
	free(env);
	if (rc != 0)
		fprintf(stderr, "tide-cluster: node-%c's settings are not valid (%s):\n%s",
			i == 0 ? 'a' : 'b', strerror(-rc), err);
	return rc;
}

/* Wait for pid until deadline_ns; then kill it and wait. "" when it exited
 * 0, else how it ended. */
static void
reap(pid_t pid, uint64_t deadline_ns, char *how, size_t len)
{
	int st = 0;
	pid_t r;

	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && tide_mono_ns() < deadline_ns)
		usleep(2000);
	if (r == 0) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, &st, 0);
		snprintf(how, len, "node-b (pid %d) did not exit in time and was killed", (int)pid);
	} else if (r < 0) {
		snprintf(how, len, "node-b (pid %d) could not be waited for: %s", (int)pid,
			 strerror(errno));
	} else if (WIFSIGNALED(st)) {
		snprintf(how, len, "node-b (pid %d) was killed by SIG%s", (int)pid,
			 sigabbrev_np(WTERMSIG(st)) != NULL ? sigabbrev_np(WTERMSIG(st)) : "?");
	} else if (WEXITSTATUS(st) != 0) {
		snprintf(how, len, "node-b (pid %d) exited with status %d", (int)pid,
			 WEXITSTATUS(st));
	} else {
		how[0] = '\0';
	}
}

static void
print_seg(const char *name, const struct wr_result *by, unsigned k)
{
	const struct seg_snap *s = &by->peer_seg[k];

	if (by->nstat <= k) {
		printf("  %-6s segment: state not known (its writer did not get that far)\n", name);
		return;
	}
	printf("  %-6s segment %6.1f MiB: %7.2f MiB used in %" PRIu64
	       " objects, largest free extent %.1f MiB, %" PRIu64
	       " free extents, fragmentation %.4f\n",
	       name, s->size / MIB, s->used / MIB, s->live, s->largest_free / MIB, s->free_extents,
	       s->frag);
}

static void
print_summary(const struct node_report *r, uint32_t shards, uint32_t nobj, uint64_t bytes,
	      uint64_t seed)
{
	static const char *const name[2] = {"node-a", "node-b"};
	const struct wr_result *a = &r[0].wr, *b = &r[1].wr;

	for (int i = 0; i < 2; i++)
		if (r[i].up)
			printf("  %s: pid %d, 10.79.0.%d, memif %s, polling CPU %d, %s, checksums "
			       "%s\n",
			       name[i], r[i].pid, i + 1, i == 0 ? "server" : "client", r[i].cpu,
			       r[i].hugepages ? "hugepages" : "no hugepages", r[i].csum);
	printf("\nworkload: %u shards x %u objects = %u objects, %.2f MiB (seed %" PRIu64 ")\n",
	       shards, PER_SHARD, nobj, bytes / MIB, seed);
	if (!r[0].up || !r[1].up)
		return; /* nothing moved */
	for (int i = 0; i < 2; i++) {
		const struct wr_result *w = &r[i].wr;
		double put_s = w->put_ns / 1e9, get_s = w->get_ns / 1e9;

		printf("%s %s -> %s: %u objects, %.2f MiB written in %.1f ms (%.1f MiB/s, %.0f "
		       "objects/s), read back in %.1f ms (%.1f MiB/s)\n",
		       i == 0 ? "transfer:" : "         ", name[i], name[1 - i], w->nobj,
		       w->bytes / MIB, put_s * 1e3, put_s > 0 ? w->bytes / MIB / put_s : 0,
		       put_s > 0 ? w->nobj / put_s : 0, get_s * 1e3,
		       get_s > 0 ? w->bytes / MIB / get_s : 0);
	}
	for (int i = 0; i < 2; i++)
		printf("  %-6s tcp: %" PRIu64 " segments out, %" PRIu64 " in, %" PRIu64
		       " retransmitted; port: tx %" PRIu64 " / rx %" PRIu64
		       " packets, rx missed %" PRIu64 "; store: %" PRIu64 " puts, %" PRIu64
		       " gets, %" PRIu64 " removes, %" PRIu64 " refused\n",
		       name[i], r[i].tcp_tx_segs, r[i].tcp_rx_segs, r[i].tcp_retrans,
		       r[i].port_opackets, r[i].port_ipackets, r[i].port_imissed, r[i].st_puts,
		       r[i].st_gets, r[i].st_dels, r[i].st_refused);
	printf("verify:   %u objects read back over TCP and compared with their source: %u "
	       "verified, %u not placed, %u incomplete, %u mismatched\n",
	       nobj, a->verified + b->verified, a->put_failed + b->put_failed,
	       a->incomplete + b->incomplete, a->mismatched + b->mismatched);
	/* Each segment's state is what the other node's writer asked for. */
	print_seg(name[0], b, 0);
	print_seg(name[1], a, 0);
	printf("after removing half of the shards (%u objects removed, %u removals refused):\n",
	       a->removed + b->removed, a->remove_failed + b->remove_failed);
	print_seg(name[0], b, 1);
	print_seg(name[1], a, 1);
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: tide-cluster [--node-env FILE] [--shards N] [--seed S]\n"
		   "Bring up a two-node Tide cluster on this machine: two processes, each a\n"
		   "node runtime with a segment, joined by user-space TCP over net_memif;\n"
		   "write a rollout-like workload into each other's segments, read it back\n"
		   "and verify it byte for byte. Exits 0 only when everything verified.\n");
}

int
main(int argc, char **argv)
{
	static const struct option lopts[] = {{"node-env", required_argument, NULL, 'e'},
					      {"shards", required_argument, NULL, 's'},
					      {"seed", required_argument, NULL, 'S'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	static struct node nodes[2];
	struct tide_nodeenv base;
	struct node_report rep[2];
	struct ctl ctl = {.fd = -1};
	const char *env_path = NULL;
	char err[4096] = "", src[TIDE_NODEENV_PATHN_LEN + 16], dir[] = "/tmp/tide-cluster-XXXXXX",
	     sock[128];
	char child_how[160] = "";
	uint32_t shards = 64, nobj, *lens = NULL;
	uint64_t seed = 1, rng, bytes = 0, t0 = tide_mono_ns();
	int rc, c, sv[2], status = 1;
	pid_t child;

	while ((c = getopt_long(argc, argv, "e:s:S:h", lopts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'e':
			env_path = optarg;
			break;
		case 's':
			shards = (uint32_t)strtoul(optarg, &end, 10);
			if (*end != '\0' || shards == 0 || shards > 10000) {
				fprintf(stderr, "tide-cluster: --shards must be 1..10000\n");
				return 2;
			}
			break;
		case 'S':
			seed = strtoull(optarg, &end, 10);
			if (*end != '\0' || optarg[0] == '\0') {
				fprintf(stderr, "tide-cluster: --seed must be a number\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	rc = tide_nodeenv_load(&base, env_path, NULL, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tide-cluster: node environment is not valid (%s):\n%s",
			strerror(-rc), err);
		return 1;
	}
	tide_log_set_level(base.log_level);
	printf("tide-cluster: node file %s\n",
	       base.path[0] != '\0' ? base.path : "(none, defaults)");
	tide_nodeenv_source_str(&base, "MOONCAKE_GLOBAL_SEGMENT_SIZE", src, sizeof(src));
	printf("  segment size per node %.0f MiB (from %s), hugepages %s, MTU %u, lcores %s\n",
	       base.global_segment_size / MIB, src,
	       base.hugepages == TIDE_NODEENV_HUGE_ON    ? "on"
	       : base.hugepages == TIDE_NODEENV_HUGE_OFF ? "off"
							 : "auto",
	       base.mtu, base.lcores[0] != '\0' ? base.lcores : "(TIDE_LCORES_PER_NUMA)");

	if (mkdtemp(dir) == NULL) {
		fprintf(stderr,
			"tide-cluster: cannot create a directory for the memif socket: %s\n",
			strerror(errno));
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/memif.sock", dir);
	for (unsigned i = 0; i < 2; i++) {
		nodes[i].idx = i;
		nodes[i].name = i == 0 ? "node-a" : "node-b";
		nodes[i].peer_name = i == 0 ? "node-b" : "node-a";
		nodes[i].seed = seed;
		nodes[i].sock = sock;
		if (node_env(env_path, &base, i, sock, &nodes[i].ne) != 0)
			goto out_dir;
	}
	printf("  two nodes, two processes: user-space TCP on port %u over net_memif (%s)\n",
	       STORE_PORT, sock);

	/* The workload's sizes, the same for both nodes (each fills its own). */
	nobj = shards * PER_SHARD;
	lens = malloc(nobj * sizeof(*lens));
	if (lens == NULL)
		goto out_dir;
	rng = seed;
	for (uint32_t i = 0; i < nobj; i++) {
		lens[i] = shard_obj_size(i % PER_SHARD, &rng, BIG_SPAN);
		bytes += lens[i];
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		fprintf(stderr, "tide-cluster: socketpair: %s\n", strerror(errno));
		goto out_dir;
	}
	fflush(NULL);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "tide-cluster: fork: %s\n", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		goto out_dir;
	}
	if (child == 0) {
		pid_t parent = getppid();

		/* node-b never outlives node-a, however node-a ends. */
		close(sv[0]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(1);
		ctl.fd = sv[1];
		rc = node_run(&nodes[1], &ctl, lens, nobj);
		if (rc != 0)
			fprintf(stderr, "tide-cluster: %s\n", nodes[1].rep.why);
		close(ctl.fd);
		free(lens);
		fflush(NULL);
		exit(rc == 0 ? 0 : 1);
	}
	close(sv[1]);
	ctl.fd = sv[0];
	(void)node_run(&nodes[0], &ctl, lens, nobj);
	if (!nodes[0].rep.up) {
		/* node-b may wait up to a minute for a memif server that never came. */
		kill(child, SIGTERM);
		reap(child, tide_mono_ns() + 5 * NS_PER_S, child_how, sizeof(child_how));
		if (!ctl.peer_done)
			snprintf(child_how, sizeof(child_how), "node-b (pid %d) stopped with it",
				 (int)child);
	} else {
		reap(child, tide_mono_ns() + REAP_LIMIT_S * NS_PER_S, child_how, sizeof(child_how));
	}
	close(ctl.fd);

	rep[0] = nodes[0].rep;
	memset(&rep[1], 0, sizeof(rep[1]));
	if (ctl.peer_done)
		rep[1] = ctl.peer;
	else if (child_how[0] == '\0')
		snprintf(child_how, sizeof(child_how), "node-b (pid %d) sent no report",
			 (int)child);
	print_summary(rep, shards, nobj, bytes, seed);
	if (rep[0].status == 0 && rep[1].status == 0 && child_how[0] == '\0') {
		printf("\nRESULT: OK: %u objects written over user-space TCP between two nodes, "
		       "read back and verified byte for byte (%.2f s)\n",
		       nobj, (tide_mono_ns() - t0) / 1e9);
		status = 0;
	} else {
		const char *sep = "";

		printf("\nRESULT: FAILED: ");
		if (rep[0].status != 0) {
			printf("%s", rep[0].why);
			sep = "; ";
		}
		if (rep[1].status != 0) {
			printf("%s%s", sep, rep[1].why);
			sep = "; ";
		}
		if (child_how[0] != '\0')
			printf("%s%s", sep, child_how);
		printf("\n");
	}
out_dir:
	free(lens);
	unlink(sock);
	rmdir(dir);
	return status;
}
