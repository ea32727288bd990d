/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agent wire format (agent_proto.h): buffer writer/reader and framed
 * send/receive with SCM_RIGHTS. Both ends trust nothing they read: every
 * length is checked against what is left and against the protocol bounds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent_proto.h"
#include "tide_store.h"

void
agent_w_init(struct agent_wbuf *w)
{
	memset(w, 0, sizeof(*w));
}

void
agent_w_free(struct agent_wbuf *w)
{
	free(w->p);
	memset(w, 0, sizeof(*w));
}

static void
w_put(struct agent_wbuf *w, const void *src, size_t n)
{
	if (w->err != 0 || n == 0)
		return;
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		uint8_t *np;

		while (cap < w->len + n)
			cap *= 2;
		np = realloc(w->p, cap);
		if (np == NULL) {
			w->err = -ENOMEM;
			return;
		}
		w->p = np;
		w->cap = cap;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
}

/* The wire is little-endian; so is every host this builds for (x86-64,
 * aarch64 LE), which the static assertion below pins. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "agent wire is little-endian");

void
agent_w_u8(struct agent_wbuf *w, uint8_t v)
{
	w_put(w, &v, 1);
}

void
agent_w_u32(struct agent_wbuf *w, uint32_t v)
{
	w_put(w, &v, 4);
}

void
agent_w_u64(struct agent_wbuf *w, uint64_t v)
{
	w_put(w, &v, 8);
}

void
agent_w_str(struct agent_wbuf *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	agent_w_u32(w, (uint32_t)n);
	w_put(w, s, n);
}

void
agent_w_loc(struct agent_wbuf *w, const struct agent_loc *l)
{
	agent_w_u32(w, l->region);
	agent_w_u64(w, l->off);
	agent_w_u64(w, l->len);
}

void
agent_r_init(struct agent_rbuf *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->pos = 0;
	r->bad = false;
}

static bool
r_get(struct agent_rbuf *r, void *dst, size_t n)
{
	if (r->bad || r->len - r->pos < n) {
		r->bad = true;
		memset(dst, 0, n);
		return false;
	}
	memcpy(dst, r->p + r->pos, n);
	r->pos += n;
	return true;
}

uint8_t
agent_r_u8(struct agent_rbuf *r)
{
	uint8_t v;

	r_get(r, &v, 1);
	return v;
}

uint32_t
agent_r_u32(struct agent_rbuf *r)
{
	uint32_t v;

	r_get(r, &v, 4);
	return v;
}

uint64_t
agent_r_u64(struct agent_rbuf *r)
{
	uint64_t v;

	r_get(r, &v, 8);
	return v;
}

char *
agent_r_str(struct agent_rbuf *r, size_t max)
{
	uint32_t n = agent_r_u32(r);
	char *s;

	if (r->bad || n > max || r->len - r->pos < n || memchr(r->p + r->pos, '\0', n) != NULL) {
		r->bad = true;
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (s == NULL) {
		r->bad = true;
		return NULL;
	}
	memcpy(s, r->p + r->pos, n);
	s[n] = '\0';
	r->pos += n;
	return s;
}

const char *
agent_r_view(struct agent_rbuf *r, size_t max, size_t *len)
{
	uint32_t n = agent_r_u32(r);
	const char *s;

	*len = 0;
	if (r->bad || n > max || r->len - r->pos < n || memchr(r->p + r->pos, '\0', n) != NULL) {
		r->bad = true;
		return "";
	}
	s = (const char *)r->p + r->pos;
	r->pos += n;
	*len = n;
	return s;
}

void
agent_r_loc(struct agent_rbuf *r, struct agent_loc *l)
{
	l->region = agent_r_u32(r);
	l->off = agent_r_u64(r);
	l->len = agent_r_u64(r);
}

void
agent_w_rc(struct agent_wbuf *w, const struct tide_store_rc *repl, size_t n_keys)
{
	size_t i;

	agent_w_u32(w, repl && repl->replica_num ? repl->replica_num : 1);
	agent_w_u8(w, repl && repl->with_hard_pin);
	agent_w_u8(w, repl && repl->prefer_alloc_in_same_node);
	agent_w_str(w, repl ? repl->preferred_segment : NULL);
	agent_w_u32(w, repl && repl->preferred_segments ? (uint32_t)repl->n_preferred_segments : 0);
	for (i = 0; repl && repl->preferred_segments && i < repl->n_preferred_segments; i++)
		agent_w_str(w, repl->preferred_segments[i]);
	agent_w_u8(w, repl && repl->group_ids);
	for (i = 0; repl && repl->group_ids && i < n_keys; i++)
		agent_w_str(w, repl->group_ids[i]);
}

/* Preferred segments a config may name; more is a malformed request. */
#define RC_MAX_PREFS 1024u

static bool
str_ok(const char *s)
{
	return s == NULL || strnlen(s, AGENT_MAX_KEY + 1) <= AGENT_MAX_KEY;
}

bool
agent_rc_ok(const struct tide_store_rc *repl, size_t n_keys)
{
	size_t i;

	if (repl == NULL)
		return true;
	if (!str_ok(repl->preferred_segment) ||
	    (repl->preferred_segments != NULL && repl->n_preferred_segments > RC_MAX_PREFS))
		return false;
	for (i = 0; repl->preferred_segments != NULL && i < repl->n_preferred_segments; i++)
		if (!str_ok(repl->preferred_segments[i]))
			return false;
	for (i = 0; repl->group_ids != NULL && i < n_keys; i++)
		if (!str_ok(repl->group_ids[i]))
			return false;
	return true;
}

void
agent_r_rc(struct agent_rbuf *r, struct agent_rc *out, size_t n_keys)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	out->replica_num = agent_r_u32(r);
	out->hard_pin = agent_r_u8(r) != 0;
	out->same_node = agent_r_u8(r) != 0;
	out->preferred = agent_r_str(r, AGENT_MAX_KEY);
	out->n_prefs = agent_r_u32(r);
	if (r->bad || out->n_prefs > RC_MAX_PREFS) {
		r->bad = true;
		out->n_prefs = 0;
		return;
	}
	out->prefs = calloc(out->n_prefs ? out->n_prefs : 1, sizeof(char *));
	if (out->prefs == NULL) {
		r->bad = true;
		out->n_prefs = 0;
		return;
	}
	for (i = 0; i < out->n_prefs && !r->bad; i++)
		out->prefs[i] = agent_r_str(r, AGENT_MAX_KEY);
	if (agent_r_u8(r) == 0 || r->bad || n_keys > AGENT_MAX_BATCH)
		return;
	out->groups = calloc(n_keys ? n_keys : 1, sizeof(char *));
	if (out->groups == NULL) {
		r->bad = true;
		return;
	}
	for (i = 0; i < n_keys && !r->bad; i++)
		out->groups[i] = agent_r_str(r, AGENT_MAX_KEY);
}

void
agent_rc_free(struct agent_rc *repl, size_t n_keys)
{
	size_t i;

	free(repl->preferred);
	for (i = 0; repl->prefs && i < repl->n_prefs; i++)
		free(repl->prefs[i]);
	free(repl->prefs);
	for (i = 0; repl->groups && i < n_keys; i++)
		free(repl->groups[i]);
	free(repl->groups);
	memset(repl, 0, sizeof(*repl));
}

struct tide_store_rc
agent_rc_view(const struct agent_rc *a)
{
	struct tide_store_rc rc = {
		.replica_num = a->replica_num,
		.with_hard_pin = a->hard_pin,
		.preferred_segment = a->preferred,
		.preferred_segments = (const char *const *)a->prefs,
		.n_preferred_segments = a->n_prefs,
		.prefer_alloc_in_same_node = a->same_node,
		.group_ids = (const char *const *)a->groups,
		.soft_pin_action = a->soft_pin_action,
		.soft_pin_ttl_ms = a->soft_pin_ttl_ms,
	};

	return rc;
}

bool
agent_rc_soft_pin(const struct tide_store_rc *repl)
{
	return repl != NULL && (repl->soft_pin_action != 0 || repl->soft_pin_ttl_ms != 0);
}

void
agent_w_soft_pin(struct agent_wbuf *w, const struct tide_store_rc *repl)
{
	/* An action beyond a byte is out of the enum: sent as 255, refused by the store. */
	agent_w_u8(w,
		   repl->soft_pin_action > UINT8_MAX ? UINT8_MAX : (uint8_t)repl->soft_pin_action);
	agent_w_u64(w, repl->soft_pin_ttl_ms);
}

void
agent_r_soft_pin(struct agent_rbuf *r, struct agent_rc *out)
{
	out->soft_pin_action = agent_r_u8(r);
	out->soft_pin_ttl_ms = agent_r_u64(r);
}

int
agent_send(int sock, uint16_t op, uint32_t seq, const void *body, size_t len, int fd)
{
	struct agent_hdr h = {AGENT_MAGIC, AGENT_VERSION, op, (uint32_t)len, seq};
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)(uintptr_t)body, len}};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
	size_t left = sizeof(h) + len;

	if (len > AGENT_MAX_BODY)
		return -EMSGSIZE;
	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	while (left > 0) {
		ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		left -= (size_t)n;
		/* The descriptor went with the first bytes; advance the iovecs. */
		m.msg_control = NULL;
		m.msg_controllen = 0;
		while (n > 0 && m.msg_iovlen > 0) {
			size_t take =
				(size_t)n < m.msg_iov->iov_len ? (size_t)n : m.msg_iov->iov_len;

			m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + take;
			m.msg_iov->iov_len -= take;
			n -= (ssize_t)take;
			if (m.msg_iov->iov_len == 0) {
				m.msg_iov++;
				m.msg_iovlen--;
			}
		}
	}
	return 0;
}

/* Read exactly n bytes; the first recvmsg may carry a descriptor. */
static int
recv_full(int sock, void *dst, size_t n, int *fd)
{
	size_t got = 0;

	while (got < n) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * 4)];
			struct cmsghdr align;
		} u;
		struct iovec iov = {(char *)dst + got, n - got};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		struct cmsghdr *c;
		ssize_t k;

		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		k = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -ECONNRESET;
		for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfd; i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				/* Keep the first one when wanted; close any other. */
				if (fd != NULL && *fd < 0)
					*fd = f;
				else
					close(f);
			}
		}
		got += (size_t)k;
	}
	return 0;
}

int
agent_recv(int sock, struct agent_hdr *h, uint8_t **body, int *fd)
{
	int rc;

	*body = NULL;
	if (fd != NULL)
		*fd = -1;
	rc = recv_full(sock, h, sizeof(*h), fd);
	if (rc != 0)
		goto fail;
	if (h->magic != AGENT_MAGIC || h->version != AGENT_VERSION || h->len > AGENT_MAX_BODY) {
		rc = -EPROTO;
		goto fail;
	}
	*body = malloc(h->len ? h->len : 1);
	if (*body == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = recv_full(sock, *body, h->len, NULL);
	if (rc == 0)
		return 0;
	free(*body);
	*body = NULL;
fail:
	if (fd != NULL && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

const char *
agent_op_name(unsigned op)
{
	static const char *const names[AGENT_OP_MAX] = {
		[AGENT_HELLO] = "hello",
		[AGENT_MAP] = "map",
		[AGENT_UNMAP] = "unmap",
		[AGENT_PUT] = "put",
		[AGENT_GET] = "get",
		[AGENT_RANGES] = "ranges",
		[AGENT_SIZE] = "size",
		[AGENT_EXIST] = "exist",
		[AGENT_REMOVE] = "remove",
		[AGENT_REMOVE_ALL] = "remove_all",
		[AGENT_REMOVE_REGEX] = "remove_regex",
		[AGENT_HEALTH] = "health",
		[AGENT_PUT_PARTS] = "put_parts",
		[AGENT_GET_PARTS] = "get_parts",
		[AGENT_REPLICAS] = "replicas",
		[AGENT_PUT_SESS_START] = "put_sess_start",
		[AGENT_SESS_RANGES] = "sess_ranges",
		[AGENT_SESS_KEYS] = "sess_keys",
		[AGENT_REPLICA_CLEAR] = "replica_clear",
	};

	return op < AGENT_OP_MAX && names[op] ? names[op] : "?";
}
