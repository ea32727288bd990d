/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Blocking master client over a non-blocking socket: every wait is a poll()
 * bounded by the call's deadline, so no call blocks longer than its timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tide_clock.h"
#include "tide_log.h"
#include "tide_addr.h"
#include "tide_mc_client.h"
#include "tide_sock.h"

struct tide_mc_client {
	int fd;
	int timeout_ms;
	uint32_t poll_us; /* busy poll before sleeping for an answer (set_poll_us) */
	unsigned enc_flags;
	uint32_t seq;
	bool broken;
	uint8_t *rbuf; /* received bytes not yet consumed: rbuf[roff..rlen) */
	size_t roff, rlen, rcap;
	struct tide_mc_buf wbuf;
};

static int64_t
mono_ms(void)
{
	return (int64_t)tide_mono_ms();
}

/* Wait for `ev` on fd until the deadline (engine/lib/addr's one deadline socket). */
static int
wait_fd(const struct tide_mc_client *c, short ev, int64_t deadline)
{
	/* Polling first spares a wake-up: a 4 KiB store get went 8,800 -> 16,300
	 * op/s with 40-60 us (20: 12,200; 100: no better than 60). */
	if (ev == POLLIN)
		(void)tide_sock_poll_briefly(c->fd, POLLIN, c->poll_us);
	return tide_sock_wait(c->fd, ev, deadline < 0 ? 0 : (uint64_t)deadline);
}

int
tide_mc_client_connect(const char *host, uint16_t port, int timeout_ms, struct tide_mc_client **out)
{
	struct tide_mc_client *c;
	int fd, rc;

	if (host == NULL || out == NULL || port == 0) {
		return -EINVAL;
	}
	if (timeout_ms <= 0) {
		timeout_ms = TIDE_MC_CLIENT_DEFAULT_TIMEOUT_MS;
	}
	/* IPv4 or IPv6, each address of a name in turn, TCP_NODELAY (engine/lib/addr). */
	rc = tide_sock_connect(host, port, tide_mono_ms() + (uint64_t)timeout_ms, &fd);
	if (rc != 0) {
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	c->timeout_ms = timeout_ms;
	c->enc_flags = TIDE_MC_ENC_STOCK;
	*out = c;
	return 0;
}

int
tide_mc_client_connect_addr(const char *addr, int timeout_ms, struct tide_mc_client **out)
{
	char host[256];
	uint16_t port;

	/* "host:port" or "[v6]:port" (engine/lib/addr, the one parser). */
	if (tide_addr_split(addr, host, sizeof(host), &port, 0, NULL) != 0) {
		return -EINVAL;
	}
	return tide_mc_client_connect(host, port, timeout_ms, out);
}

void
tide_mc_client_close(struct tide_mc_client *c)
{
	if (c == NULL) {
		return;
	}
	close(c->fd);
	free(c->rbuf);
	tide_mc_buf_release(&c->wbuf);
	free(c);
}

void
tide_mc_client_set_timeout(struct tide_mc_client *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : TIDE_MC_CLIENT_DEFAULT_TIMEOUT_MS;
}

void
tide_mc_client_set_poll_us(struct tide_mc_client *c, uint32_t us)
{
	c->poll_us = us;
}

void
tide_mc_client_set_enc_flags(struct tide_mc_client *c, unsigned flags)
{
	c->enc_flags = flags;
}

bool
tide_mc_client_connected(const struct tide_mc_client *c)
{
	return c != NULL && !c->broken;
}

uint32_t
tide_mc_client_next_seq(const struct tide_mc_client *c)
{
	return c->seq;
}

static int
send_all(struct tide_mc_client *c, const uint8_t *p, size_t len, int64_t deadline)
{
	ssize_t n;
	int rc;

	while (len > 0) {
		n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			rc = wait_fd(c, POLLOUT, deadline);
			if (rc != 0) {
				return rc;
			}
			continue;
		}
		return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

/* Make rbuf hold at least `want` unconsumed bytes. 0, -ETIMEDOUT, -ECONNRESET, -errno. */
static int
fill(struct tide_mc_client *c, size_t want, int64_t deadline)
{
	size_t need;
	uint8_t *p;
	ssize_t n;
	int rc;

	while (c->rlen - c->roff < want) {
		if (c->roff > 0) {
			memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
			c->rlen -= c->roff;
			c->roff = 0;
		}
		need = want > 65536 ? want : 65536;
		if (need > c->rcap) {
			p = realloc(c->rbuf, need);
			if (p == NULL) {
				return -ENOMEM;
			}
			c->rbuf = p;
			c->rcap = need;
		}
		n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n > 0) {
			c->rlen += (size_t)n;
			continue;
		}
		if (n == 0) {
			return -ECONNRESET;
		}
		if (errno == EINTR) {
			continue;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			return -errno;
		}
		rc = wait_fd(c, POLLIN, deadline);
		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

/* Next whole response frame: *frame points into rbuf (valid until the next read). */
static int
next_frame(struct tide_mc_client *c, const uint8_t **frame, size_t *len,
	   struct tide_mc_resp_hdr *hdr, int64_t deadline)
{
	size_t total;
	int rc;

	rc = fill(c, TIDE_MC_RESP_HDR_LEN, deadline);
	if (rc != 0) {
		return rc;
	}
	rc = tide_mc_resp_hdr_parse(c->rbuf + c->roff, c->rlen - c->roff, hdr, NULL);
	if (rc != 0) {
		return -EPROTO;
	}
	total = TIDE_MC_RESP_HDR_LEN + (size_t)hdr->length + hdr->attach_length;
	rc = fill(c, total, deadline);
	if (rc != 0) {
		return rc;
	}
	*frame = c->rbuf + c->roff;
	*len = total;
	c->roff += total;
	return 0;
}

static int
fail_conn(struct tide_mc_client *c, int rc)
{
	c->broken = true;
	return rc;
}

int
tide_mc_client_send_raw(struct tide_mc_client *c, const void *buf, size_t len)
{
	int rc;

	if (c == NULL || c->broken) {
		return -ENOTCONN;
	}
	rc = send_all(c, buf, len, mono_ms() + c->timeout_ms);
	return rc == 0 ? 0 : fail_conn(c, rc);
}

int
tide_mc_client_recv_raw(struct tide_mc_client *c, struct tide_mc_buf *out)
{
	struct tide_mc_resp_hdr hdr;
	const uint8_t *f;
	size_t len, cap;
	uint8_t *d;
	int rc;

	if (c == NULL || out == NULL || c->broken) {
		return -ENOTCONN;
	}
	rc = next_frame(c, &f, &len, &hdr, mono_ms() + c->timeout_ms);
	if (rc != 0) {
		return fail_conn(c, rc);
	}
	if (out->len + len > out->cap) {
		cap = out->len + len;
		d = realloc(out->data, cap);
		if (d == NULL) {
			return -ENOMEM;
		}
		out->data = d;
		out->cap = cap;
	}
	memcpy(out->data + out->len, f, len);
	out->len += len;
	return 0;
}

/* One non-blocking read into rbuf. 0 (data or nothing yet), -ECONNRESET, -errno. */
static int
try_recv(struct tide_mc_client *c, bool *progress)
{
	uint8_t *p;
	ssize_t n;

	if (c->roff > 0 && c->roff == c->rlen) {
		c->roff = c->rlen = 0;
	}
	if (c->rcap - c->rlen < 65536) {
		if (c->roff > 0) {
			memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
			c->rlen -= c->roff;
			c->roff = 0;
		}
		if (c->rcap - c->rlen < 65536) {
			p = realloc(c->rbuf, c->rlen + 65536);
			if (p == NULL) {
				return -ENOMEM;
			}
			c->rbuf = p;
			c->rcap = c->rlen + 65536;
		}
	}
	n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
	if (n > 0) {
		c->rlen += (size_t)n;
		*progress = true;
		return 0;
	}
	if (n == 0) {
		return -ECONNRESET;
	}
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
}

/* A whole frame already buffered: 1 (consumed, *frame valid until the next read), 0 none, -EPROTO.
 */
static int
take_frame(struct tide_mc_client *c, const uint8_t **frame, size_t *len,
	   struct tide_mc_resp_hdr *hdr)
{
	size_t avail = c->rlen - c->roff, total;

	if (avail < TIDE_MC_RESP_HDR_LEN) {
		return 0;
	}
	if (tide_mc_resp_hdr_parse(c->rbuf + c->roff, avail, hdr, NULL) != 0) {
		return -EPROTO;
	}
	total = TIDE_MC_RESP_HDR_LEN + (size_t)hdr->length + hdr->attach_length;
	if (avail < total) {
		return 0;
	}
	*frame = c->rbuf + c->roff;
	*len = total;
	c->roff += total;
	return 1;
}

int
tide_mc_client_call_batch(struct tide_mc_client *c, const struct tide_mc_req *reqs, size_t n,
			  struct tide_mc_resp *resps, int *rcs)
{
	struct tide_mc_resp_hdr hdr;
	struct tide_mc_err err;
	const uint8_t *f;
	size_t i, got = 0, len, consumed, idx, sent;
	struct pollfd pfd;
	bool progress;
	uint32_t base;
	int64_t deadline, left;
	int rc;

	if (c == NULL || (n > 0 && (reqs == NULL || resps == NULL || rcs == NULL))) {
		return -EINVAL;
	}
	if (c->broken) {
		for (i = 0; i < n; i++) {
			rcs[i] = -ENOTCONN;
		}
		return -ENOTCONN;
	}
	c->wbuf.len = 0;
	base = c->seq;
	for (i = 0; i < n; i++) {
		memset(&resps[i], 0, sizeof(resps[i]));
		rcs[i] = 1; /* pending */
		rc = tide_mc_req_frame_encode(&reqs[i], base + (uint32_t)i, c->enc_flags, &c->wbuf);
		if (rc != 0) {
			return rc;
		}
	}
	c->seq += (uint32_t)n;
	deadline = mono_ms() + c->timeout_ms;
	/*
	 * Send and receive together: a server that stops reading while its
	 * answers pile up (ours does, above a bound) would otherwise deadlock
	 * with a client that writes everything before reading anything.
	 */
	sent = 0;
	rc = 0;
	while (rc == 0 && got < n) {
		progress = false;
		if (sent < c->wbuf.len) {
			ssize_t k =
				send(c->fd, c->wbuf.data + sent, c->wbuf.len - sent, MSG_NOSIGNAL);

			if (k > 0) {
				sent += (size_t)k;
				progress = true;
			} else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
				   errno != EINTR) {
				rc = -errno;
				break;
			}
		}
		rc = try_recv(c, &progress);
		while (rc == 0 && (rc = take_frame(c, &f, &len, &hdr)) == 1) {
			rc = 0;
			progress = true;
			idx = (size_t)(hdr.seq_num - base);
			if (idx >= n || rcs[idx] != 1) {
				/* The stock client closes on an unknown seq too. */
				rc = -EPROTO;
				break;
			}
			rcs[idx] = tide_mc_resp_frame_decode(reqs[idx].fn, f, len, &hdr,
							     &resps[idx], &consumed, &err);
			got++;
		}
		if (rc != 0 || got == n || progress) {
			continue;
		}
		pfd.fd = c->fd;
		pfd.events = (short)(POLLIN | (sent < c->wbuf.len ? POLLOUT : 0));
		if (sent >= c->wbuf.len)
			(void)tide_sock_poll_briefly(c->fd, POLLIN, c->poll_us);
		left = deadline - mono_ms();
		if (left <= 0) {
			rc = -ETIMEDOUT;
		} else if (poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left) < 0 &&
			   errno != EINTR) {
			rc = -errno;
		}
	}
	if (rc != 0) {
		fail_conn(c, rc);
		for (i = 0; i < n; i++) {
			if (rcs[i] == 1) {
				rcs[i] = rc;
			}
		}
	}
	if (c->wbuf.cap > (1u << 20)) {
		tide_mc_buf_release(&c->wbuf);
	}
	return rc;
}

int
tide_mc_client_call(struct tide_mc_client *c, const struct tide_mc_req *req,
		    struct tide_mc_resp *resp, struct tide_mc_err *err)
{
	struct tide_mc_resp_hdr hdr;
	struct tide_mc_err e;
	const uint8_t *f;
	size_t len, consumed;
	int64_t deadline;
	uint32_t seq;
	int rc;

	if (c == NULL || req == NULL || resp == NULL) {
		return -EINVAL;
	}
	memset(resp, 0, sizeof(*resp));
	if (c->broken) {
		return -ENOTCONN;
	}
	c->wbuf.len = 0;
	seq = c->seq;
	rc = tide_mc_req_frame_encode(req, seq, c->enc_flags, &c->wbuf);
	if (rc != 0) {
		return rc;
	}
	c->seq++;
	deadline = mono_ms() + c->timeout_ms;
	rc = send_all(c, c->wbuf.data, c->wbuf.len, deadline);
	if (rc == 0) {
		rc = next_frame(c, &f, &len, &hdr, deadline);
	}
	if (rc == 0 && hdr.seq_num != seq) {
		rc = -EPROTO;
	}
	if (rc != 0) {
		return fail_conn(c, rc);
	}
	return tide_mc_resp_frame_decode(req->fn, f, len, &hdr, resp, &consumed,
					 err != NULL ? err : &e);
}

/* ------------------------------------------------------------------------------------------ */
/* Typed helpers                                                                               */
/* ------------------------------------------------------------------------------------------ */

static struct tide_mc_str
cstr(const char *s)
{
	struct tide_mc_str r = {(char *)s, s != NULL ? strlen(s) : 0};

	return r;
}

static const struct tide_mc_str tenant = {(char *)"default", 7};

static void
req_init(struct tide_mc_req *r, enum tide_mc_fn fn)
{
	memset(r, 0, sizeof(*r));
	r->fn = fn;
	r->layout = TIDE_MC_LAYOUT_HEAD;
}

/* Call whose result is an expected<void>. */
static int
call_status(struct tide_mc_client *c, const struct tide_mc_req *r, int32_t *ec)
{
	struct tide_mc_resp resp;
	int rc;

	rc = tide_mc_client_call(c, r, &resp, NULL);
	if (rc == 0) {
		if (ec != NULL) {
			*ec = resp.u.status.ok ? 0 : resp.u.status.err;
		}
		tide_mc_resp_free(&resp);
	}
	return rc;
}

int
tide_mc_client_service_ready(struct tide_mc_client *c, char *version, size_t vlen, int32_t *ec)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	size_t n;
	int rc;

	req_init(&r, TIDE_MC_FN_SERVICE_READY);
	rc = tide_mc_client_call(c, &r, &resp, NULL);
	if (rc != 0) {
		return rc;
	}
	if (ec != NULL) {
		*ec = resp.u.str.ok ? 0 : resp.u.str.err;
	}
	if (version != NULL && vlen > 0) {
		n = resp.u.str.ok ? resp.u.str.val.len : 0;
		n = n < vlen - 1 ? n : vlen - 1;
		if (n > 0) {
			memcpy(version, resp.u.str.val.ptr, n);
		}
		version[n] = '\0';
	}
	tide_mc_resp_free(&resp);
	return 0;
}

int
tide_mc_client_ping(struct tide_mc_client *c, const struct tide_mc_uuid *client, int32_t *status,
		    int32_t *ec)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int rc;

	req_init(&r, TIDE_MC_FN_PING);
	r.u.ping.id = *client;
	rc = tide_mc_client_call(c, &r, &resp, NULL);
	if (rc != 0) {
		return rc;
	}
	if (ec != NULL) {
		*ec = resp.u.ping.ok ? 0 : resp.u.ping.err;
	}
	if (status != NULL) {
		*status = resp.u.ping.ok ? resp.u.ping.val.client_status : 0;
	}
	tide_mc_resp_free(&resp);
	return 0;
}

int
tide_mc_client_mount(struct tide_mc_client *c, const struct tide_mc_segment *seg,
		     const struct tide_mc_uuid *client, int32_t *ec)
{
	struct tide_mc_req r;

	req_init(&r, TIDE_MC_FN_MOUNT_SEGMENT);
	r.u.mount_segment.segment = *seg;
	r.u.mount_segment.client_id = *client;
	return call_status(c, &r, ec);
}

int
tide_mc_client_remount(struct tide_mc_client *c, const struct tide_mc_segment *segs, size_t n,
		       const struct tide_mc_uuid *client, int32_t *ec)
{
	struct tide_mc_req r;

	req_init(&r, TIDE_MC_FN_REMOUNT_SEGMENT);
	r.u.remount_segment.segments.v = (struct tide_mc_segment *)segs;
	r.u.remount_segment.segments.n = n;
	r.u.remount_segment.client_id = *client;
	return call_status(c, &r, ec);
}

int
tide_mc_client_unmount(struct tide_mc_client *c, const struct tide_mc_uuid *segment,
		       const struct tide_mc_uuid *client, int32_t *ec)
{
	struct tide_mc_req r;

	req_init(&r, TIDE_MC_FN_UNMOUNT_SEGMENT);
	r.u.unmount_segment.segment_id = *segment;
	r.u.unmount_segment.client_id = *client;
	return call_status(c, &r, ec);
}

int
tide_mc_client_put_start(struct tide_mc_client *c, const struct tide_mc_uuid *client,
			 const char *key, uint64_t len, const struct tide_mc_replicate_config *cfg,
			 struct tide_mc_resp *out, int32_t *ec)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int rc;

	req_init(&r, TIDE_MC_FN_PUT_START);
	r.u.put_start.client_id = *client;
	r.u.put_start.key = cstr(key);
	r.u.put_start.slice_length = len;
	if (cfg != NULL) {
		r.u.put_start.config = *cfg;
	} else {
		r.u.put_start.config.replica_num = 1;
	}
	r.u.put_start.tenant_id = tenant;
	rc = tide_mc_client_call(c, &r, &resp, NULL);
	if (rc != 0) {
		return rc;
	}
	if (ec != NULL) {
		*ec = resp.u.put_start.ok ? 0 : resp.u.put_start.err;
	}
	if (out != NULL) {
		*out = resp;
	} else {
		tide_mc_resp_free(&resp);
	}
	return 0;
}

int
tide_mc_client_put_end(struct tide_mc_client *c, const struct tide_mc_uuid *client, const char *key,
		       int32_t *ec)
{
	struct tide_mc_req r;

	req_init(&r, TIDE_MC_FN_PUT_END);
	r.u.put_end.client_id = *client;
	r.u.put_end.meta.key = cstr(key);
	r.u.put_end.replica_type = TIDE_MC_REPLICA_ALL;
	r.u.put_end.tenant_id = tenant;
	return call_status(c, &r, ec);
}

int
tide_mc_client_put_revoke(struct tide_mc_client *c, const struct tide_mc_uuid *client,
			  const char *key, int32_t *ec)
{
	struct tide_mc_req r;

	req_init(&r, TIDE_MC_FN_PUT_REVOKE);
	r.u.put_revoke.client_id = *client;
	r.u.put_revoke.key = cstr(key);
	r.u.put_revoke.replica_type = TIDE_MC_REPLICA_ALL;
	r.u.put_revoke.tenant_id = tenant;
	return call_status(c, &r, ec);
}

int
tide_mc_client_get_replica_list(struct tide_mc_client *c, const char *key, struct tide_mc_resp *out,
				int32_t *ec)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int rc;

	req_init(&r, TIDE_MC_FN_GET_REPLICA_LIST);
	r.u.key.key = cstr(key);
	r.u.key.tenant_id = tenant;
	rc = tide_mc_client_call(c, &r, &resp, NULL);
	if (rc != 0) {
		return rc;
	}
	if (ec != NULL) {
		*ec = resp.u.replica_list.ok ? 0 : resp.u.replica_list.err;
	}
	if (out != NULL) {
		*out = resp;
	} else {
		tide_mc_resp_free(&resp);
	}
	return 0;
}

int
tide_mc_client_exist_key(struct tide_mc_client *c, const char *key, bool *exists, int32_t *ec)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int rc;

	req_init(&r, TIDE_MC_FN_EXIST_KEY);
	r.u.key.key = cstr(key);
	r.u.key.tenant_id = tenant;
	rc = tide_mc_client_call(c, &r, &resp, NULL);
	if (rc != 0) {
		return rc;
	}
	if (ec != NULL) {
		*ec = resp.u.exist.ok ? 0 : resp.u.exist.err;
	}
	if (exists != NULL) {
		*exists = resp.u.exist.ok && resp.u.exist.val;
	}
	tide_mc_resp_free(&resp);
	return 0;
}

int
tide_mc_client_remove(struct tide_mc_client *c, const char *key, bool force, int32_t *ec)
{
	struct tide_mc_req r;

	req_init(&r, TIDE_MC_FN_REMOVE);
	r.u.remove.key = cstr(key);
	r.u.remove.force = force;
	r.u.remove.tenant_id = tenant;
	return call_status(c, &r, ec);
}

int
tide_mc_client_remove_all(struct tide_mc_client *c, bool force, int64_t *removed)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int rc;

	req_init(&r, TIDE_MC_FN_REMOVE_ALL);
	r.u.remove_all.force = force;
	r.u.remove_all.tenant_id = tenant;
	rc = tide_mc_client_call(c, &r, &resp, NULL);
	if (rc == 0) {
		if (removed != NULL) {
			*removed = resp.u.removed;
		}
		tide_mc_resp_free(&resp);
	}
	return rc;
}
