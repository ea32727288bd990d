/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/: the wire format between a store client attached to the
 * per-node agent (store_agent.c) and the agent (store/agent).
 *
 * Transport: a UNIX stream socket. Every message is a header followed by a
 * body of hdr.len bytes; requests and replies alternate on one connection
 * (one request in flight). File descriptors (shared-memory regions) travel as
 * SCM_RIGHTS ancillary data with the header of the MAP request; a region is
 * a memfd on tmpfs sealed with F_SEAL_SHRINK (else MAP answers -EPERM). A
 * descriptor on any other request is closed unused.
 *
 * Bodies are sequences of little-endian fixed-width integers and strings
 * (u32 length + bytes, no NUL). Memory is never sent by address: the client
 * names a region it mapped into the agent (MAP) and an offset in it.
 *
 * Bounds (both sides refuse larger): a body of AGENT_MAX_BODY bytes, a batch
 * of AGENT_MAX_BATCH keys or fragments, a key of AGENT_MAX_KEY bytes,
 * AGENT_MAX_PARTS pieces in one put of values in pieces.
 */
#ifndef TIDE_AGENT_PROTO_H
#define TIDE_AGENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_MAGIC       0x41444954u /* "TIDA" */
#define AGENT_VERSION     1u
#define AGENT_MAX_BODY    (16u << 20)
#define AGENT_MAX_BATCH   65536u
#define AGENT_MAX_KEY     4096u
#define AGENT_MAX_REGIONS 1024u
/* Pieces of one AGENT_PUT_PARTS: 20 bytes of location each, so their body fits. */
#define AGENT_MAX_PARTS (AGENT_MAX_BODY / 32u)

enum agent_op {
	AGENT_HELLO = 1,    /* u32 version, u32 pid -> i32 rc, str endpoint, str protocol */
	AGENT_MAP,          /* u64 len (+ sealed memfd) -> i32 rc, u32 region */
	AGENT_UNMAP,        /* u32 region -> i32 rc */
	AGENT_PUT,          /* u32 n, rc config, n x {str key, loc} -> i32 rc, n x i32 */
	AGENT_GET,          /* u32 n, n x {str key, loc} -> i32 rc, n x i64 */
	AGENT_RANGES,       /* u32 nk, nk x str, u32 nf, nf x {u64 key, u64 src_off, loc} ->
			       i32 rc, nf x i64 */
	AGENT_SIZE,         /* str key -> i64 */
	AGENT_EXIST,        /* u32 n, n x str -> i32 rc, n x i32 */
	AGENT_REMOVE,       /* u8 force, u32 n, n x str -> i32 rc, n x i32 */
	AGENT_REMOVE_ALL,   /* u8 force -> i64 */
	AGENT_REMOVE_REGEX, /* u8 force, str pattern -> i64 */
	AGENT_HEALTH,       /* -> i32 */
	/* tide_store_batch_put_parts(): u32 n, u32 flags, rc config,
	 * n x {str key, u32 np, np x loc} [, soft pin] -> i32 rc, n x i32. Newer than
	 * version 1's other ops (an older agent closes the connection on it);
	 * AGENT_MAX_PARTS pieces in all. flags are TIDE_STORE_PUT_* and
	 * AGENT_PUT_SOFT_PIN. */
	AGENT_PUT_PARTS,
	/* tide_store_batch_get_into_parts(): u32 n, n x {str key, u32 np, np x loc} ->
	 * i32 rc, n x i64 (sizes). Newer than AGENT_PUT_PARTS (an older agent closes
	 * the connection on it); AGENT_MAX_PARTS pieces in all. */
	AGENT_GET_PARTS,
	/* tide_store_batch_get_replicas(): u32 n, n x str key -> i32 rc, then (rc 0)
	 * n x {i32 err, u32 nrep, nrep x {u64 id, u8 type, u32 status, u64 size,
	 * u64 buffer_address, str endpoint, str protocol, str file_path}}. An answer
	 * larger than AGENT_MAX_BODY is rc -E2BIG alone. Newer than AGENT_GET_PARTS. */
	AGENT_REPLICAS,
	/*
	 * Sessions (tide_store_batch_put_session_* and _get_session_*), newer than
	 * AGENT_REPLICAS. A session belongs to the connection that started it: the
	 * agent answers -ESRCH for another connection's keys, and revokes (ends) the
	 * connection's sessions when it closes.
	 * AGENT_PUT_SESS_START: u32 n, u32 flags (AGENT_PUT_SOFT_PIN), rc config,
	 *   n x {str key, u64 size} [, soft pin] -> i32 rc, n x i32.
	 * AGENT_SESS_RANGES: u8 dir (AGENT_SESS_PUT / AGENT_SESS_GET), u32 n,
	 *   n x {str key, u32 np, np x {loc, u64 off}} -> i32 rc, n x i64;
	 *   AGENT_MAX_PARTS pieces in all.
	 * AGENT_SESS_KEYS: u8 what (enum agent_sess_what), u32 n, n x str key ->
	 *   i32 rc, n x i32 (AGENT_SESS_GET_END: zeros).
	 */
	AGENT_PUT_SESS_START,
	AGENT_SESS_RANGES,
	AGENT_SESS_KEYS,
	/* tide_store_batch_replica_clear(): str segment_name, u32 n, n x str key ->
	 * i32 (keys cleared, or -errno), n x i32 (1 cleared, 0 not). n may be 0 (the
	 * master counts an empty call, as stock's does). Newer than the session ops. */
	AGENT_REPLICA_CLEAR,
	AGENT_OP_MAX,
};

/*
 * Flag of AGENT_PUT_PARTS: the body ends with the config's soft pin (u8 action,
 * u64 ttl_ms; agent_w_soft_pin()). A config without one is sent without it, so
 * the bytes are what they were before soft pins; a put with one goes through
 * AGENT_PUT_PARTS (AGENT_PUT carries no flags). An agent older than the flag
 * passes it on to tide_store_batch_put_parts(), which refuses the call
 * (-EINVAL): the pin is never dropped silently.
 */
#define AGENT_PUT_SOFT_PIN 0x80000000u

/* AGENT_SESS_RANGES' direction. */
#define AGENT_SESS_PUT 1u
#define AGENT_SESS_GET 0u

/* What an AGENT_SESS_KEYS request asks. */
enum agent_sess_what {
	AGENT_SESS_PUT_END = 0,
	AGENT_SESS_PUT_REVOKE = 1,
	AGENT_SESS_GET_START = 2,
	AGENT_SESS_GET_END = 3,
};

/* A place in the client's memory: region id from MAP, offset, length. */
struct agent_loc {
	uint32_t region;
	uint64_t off;
	uint64_t len;
};

struct agent_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	uint32_t len; /* body bytes */
	uint32_t seq; /* echoed in the reply */
};

/* Growable output buffer; on allocation failure `err` sticks and writes stop. */
struct agent_wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

void agent_w_init(struct agent_wbuf *w);
void agent_w_free(struct agent_wbuf *w);
void agent_w_u8(struct agent_wbuf *w, uint8_t v);
void agent_w_u32(struct agent_wbuf *w, uint32_t v);
void agent_w_u64(struct agent_wbuf *w, uint64_t v);
void agent_w_str(struct agent_wbuf *w, const char *s);
void agent_w_loc(struct agent_wbuf *w, const struct agent_loc *l);

/* Reader over a received body; any short read sets `bad` and yields zeros. */
struct agent_rbuf {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};

void agent_r_init(struct agent_rbuf *r, const void *p, size_t len);
uint8_t agent_r_u8(struct agent_rbuf *r);
uint32_t agent_r_u32(struct agent_rbuf *r);
uint64_t agent_r_u64(struct agent_rbuf *r);
/* A string copied into a new NUL-terminated allocation (NULL and bad set when
 * short, longer than max, containing NUL, or out of memory). */
char *agent_r_str(struct agent_rbuf *r, size_t max);
void agent_r_loc(struct agent_rbuf *r, struct agent_loc *l);
/* A string of at most max bytes without NULs, in place: its first byte (not
 * NUL-terminated) and *len; "" and bad set when it is not one. */
const char *agent_r_view(struct agent_rbuf *r, size_t max, size_t *len);

/*
 * ReplicateConfig on the wire: u32 replica_num, u8 hard_pin, u8 same_node,
 * str preferred_segment, u32 n + n x str preferred_segments, u8 has_groups,
 * then (has_groups) n_keys x str group ids. repl NULL encodes the defaults.
 */
struct tide_store_rc;
void agent_w_rc(struct agent_wbuf *w, const struct tide_store_rc *repl, size_t n_keys);
/* Whether the agent takes repl (NULL: yes) for n_keys keys: strings of at most
 * AGENT_MAX_KEY bytes, at most 1024 preferred segments. A config beyond that is a
 * malformed request to the agent, which closes the connection: check it first. */
bool agent_rc_ok(const struct tide_store_rc *repl, size_t n_keys);

/* A decoded config that owns its strings (free with agent_rc_free()). */
struct agent_rc {
	unsigned replica_num;
	bool hard_pin, same_node;
	char *preferred;
	char **prefs;
	size_t n_prefs;
	char **groups; /* NULL: none; else n_keys entries */
	/* From the AGENT_PUT_SOFT_PIN trailer (agent_r_soft_pin()); else 0. */
	unsigned soft_pin_action;
	uint64_t soft_pin_ttl_ms;
};

/* Decode for a call with n_keys keys (bad set on any error). */
void agent_r_rc(struct agent_rbuf *r, struct agent_rc *out, size_t n_keys);
void agent_rc_free(struct agent_rc *repl, size_t n_keys);
/* The config as tide_store_rc, borrowing a's strings (valid while a is). */
struct tide_store_rc agent_rc_view(const struct agent_rc *a);

/* Whether repl asks for a soft pin other than the defaults (then the put carries
 * AGENT_PUT_SOFT_PIN and the trailer). */
bool agent_rc_soft_pin(const struct tide_store_rc *repl);
/* The trailer: u8 action, u64 ttl_ms (repl not NULL). */
void agent_w_soft_pin(struct agent_wbuf *w, const struct tide_store_rc *repl);
/* Read the trailer into out (bad set when short; the action is checked by the store). */
void agent_r_soft_pin(struct agent_rbuf *r, struct agent_rc *out);

/*
 * Send one message (header + body), with fd attached when fd >= 0.
 * Returns 0 or -errno (-EPIPE/-ECONNRESET peer gone). Retries EINTR and short writes.
 */
int agent_send(int sock, uint16_t op, uint32_t seq, const void *body, size_t len, int fd);

/*
 * Receive one message: header checked (magic, version, len <= AGENT_MAX_BODY),
 * body into *body (malloc'd; caller frees). If the header carried a
 * descriptor it lands in *fd (else -1; pass NULL to refuse descriptors, which
 * are then closed). Returns 0, -ECONNRESET on EOF, -EPROTO on a bad header,
 * -ENOMEM, or -errno.
 */
int agent_recv(int sock, struct agent_hdr *h, uint8_t **body, int *fd);

/* Name of an op for logs ("?" when out of range). */
const char *agent_op_name(unsigned op);

#endif /* TIDE_AGENT_PROTO_H */
