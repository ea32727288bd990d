/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client side of the per-node agent (store_agent.h). A process that attaches
 * runs no transfer engine and contributes no segment: the agent (tide-node)
 * owns both, and this file turns each store call into one request on the
 * agent's UNIX socket.
 *
 * Memory: the caller's buffers reach the agent through shared memory.
 * Regions (the local buffer, tide_store_map_buffer() regions, a staging area)
 * are memfds, sealed at their size (the agent refuses any other), mapped here
 * and sent to the agent once (SCM_RIGHTS); a request names (region, offset,
 * length), never an address. A buffer outside every region is bounced
 * through the staging area: one memcpy here, none in the agent. The staging
 * area grows to the largest bounced request and shrinks back after requests
 * above STAGING_KEEP.
 *
 * Failure: if the agent goes away, the failing call returns its socket error
 * (-ECONNRESET / -EPIPE); the next call reconnects once and maps every region
 * again (the descriptors are kept for that), so clients survive an agent
 * restart without being restarted themselves.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_proto.h"
#include "seg_warm.h"
#include "store_agent.h"
#include "store_backend.h"
#include "store_replicas.h"
#include "tide_log.h"
#include "tide_nodeenv.h"

/* Staging kept between calls; a bigger one (made for a large bounced
 * request) is unmapped after the call. */
#define STAGING_MIN  (4u << 20)
#define STAGING_KEEP (64u << 20)
/* Alignment of bounced pieces inside the staging area. */
#define BOUNCE_ALIGN 64u

enum region_kind { R_LOCAL, R_MAPPED, R_STAGING };

struct region {
	uint8_t *base;
	size_t len;
	int fd;      /* kept to map the region again after an agent restart */
	uint32_t id; /* the agent's id; valid while the connection lives */
	enum region_kind kind;
	bool live; /* slot in use */
};

struct tide_agent_conn {
	struct store_backend be; /* ops: store_agent_ops */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char endpoint[256];
	char protocol[16]; /* the agent's transport, from its hello */
	/* io_lock: the socket, seq, the staging area and region ids. One request
	 * is in flight per connection. */
	pthread_mutex_t io_lock;
	int sock; /* -1: reconnect before the next request */
	uint32_t seq;
	uint32_t gen; /* connections made so far: region ids are valid within one */
	/* reg_lock: the region table. */
	pthread_mutex_t reg_lock;
	struct region *regions;
	size_t nregions;
	int staging;                     /* index into regions, -1: none */
	struct tide_seg_warm *lbuf_warm; /* faulting the local buffer's start in */
};

/* ------------------------------------------------------------------ socket */

static int
sock_connect(const char *path, int *out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = -errno;
		close(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* One request/response on a live socket (io_lock held). The reply body is
 * returned in *body (free it). A socket error marks the connection dead. */
static int
exchange(struct tide_agent_conn *a, uint16_t op, const struct agent_wbuf *w, int fd, uint8_t **body,
	 size_t *len)
{
	struct agent_hdr h;
	uint32_t seq = ++a->seq;
	int rc;

	if (w->err != 0)
		return w->err;
	if (w->len > AGENT_MAX_BODY)
		return -E2BIG; /* refused before sending: the connection stays good */
	rc = agent_send(a->sock, op, seq, w->p, w->len, fd);
	if (rc == 0)
		rc = agent_recv(a->sock, &h, body, NULL);
	if (rc == 0 && (h.seq != seq || h.op != op)) {
		free(*body);
		*body = NULL;
		rc = -EPROTO;
	}
	if (rc != 0) {
		TIDE_LOG(WARN, "agent at %s: %s request failed: %s", a->path, agent_op_name(op),
			 strerror(-rc));
		close(a->sock);
		a->sock = -1;
		return rc;
	}
	*len = h.len;
	return 0;
}

/* MAP one region on the current connection (io_lock held). */
static int
map_one(struct tide_agent_conn *a, struct region *r)
{
	struct agent_wbuf w;
	struct agent_rbuf rd;
	uint8_t *body = NULL;
	size_t len;
	int rc;

	agent_w_init(&w);
	agent_w_u64(&w, r->len);
	rc = exchange(a, AGENT_MAP, &w, r->fd, &body, &len);
	agent_w_free(&w);
	if (rc != 0)
		return rc;
	agent_r_init(&rd, body, len);
	rc = (int32_t)agent_r_u32(&rd);
	r->id = agent_r_u32(&rd);
	if (rd.bad)
		rc = -EPROTO;
	free(body);
	return rc;
}

/* Connect, say hello and map every region again (io_lock held). */
static int
reconnect(struct tide_agent_conn *a)
{
	struct agent_wbuf w;
	struct agent_rbuf rd;
	uint8_t *body = NULL;
	size_t len, i;
	char *ep, *proto;
	int rc;

	rc = sock_connect(a->path, &a->sock);
	if (rc != 0) {
		a->sock = -1;
		return rc;
	}
	agent_w_init(&w);
	agent_w_u32(&w, AGENT_VERSION);
	agent_w_u32(&w, (uint32_t)getpid());
	rc = exchange(a, AGENT_HELLO, &w, -1, &body, &len);
	agent_w_free(&w);
	if (rc != 0)
		return rc;
	agent_r_init(&rd, body, len);
	rc = (int32_t)agent_r_u32(&rd);
	ep = agent_r_str(&rd, sizeof(a->endpoint) - 1);
	proto = agent_r_str(&rd, sizeof(a->protocol) - 1);
	if (rc == 0 && (ep == NULL || proto == NULL))
		rc = -EPROTO;
	if (rc == 0) {
		snprintf(a->endpoint, sizeof(a->endpoint), "%s", ep);
		snprintf(a->protocol, sizeof(a->protocol), "%s", proto);
	}
	free(ep);
	free(proto);
	free(body);
	pthread_mutex_lock(&a->reg_lock);
	for (i = 0; rc == 0 && i < a->nregions; i++)
		if (a->regions[i].live)
			rc = map_one(a, &a->regions[i]);
	pthread_mutex_unlock(&a->reg_lock);
	a->gen++;
	if (rc != 0 && a->sock >= 0) {
		close(a->sock);
		a->sock = -1;
	}
	return rc;
}

/* Reconnect if the last request found the agent gone (io_lock held). Region
 * ids change on reconnection, so a request must resolve its locations
 * after this and before its exchange, under the same hold of io_lock. */
static int
ensure(struct tide_agent_conn *a)
{
	int rc;

	if (a->sock >= 0)
		return 0;
	rc = reconnect(a);
	if (rc == 0)
		TIDE_LOG(INFO, "re-attached to the agent at %s", a->path);
	return rc;
}

/* A full request: reconnect if needed, then exchange (io_lock held). */
static int
call(struct tide_agent_conn *a, uint16_t op, const struct agent_wbuf *w, uint8_t **body,
     size_t *len)
{
	int rc = ensure(a);

	return rc != 0 ? rc : exchange(a, op, w, -1, body, len);
}

/* call() for a caller that holds nothing: takes io_lock around the exchange, and
 * frees the request w. */
static int
call_locked(struct tide_agent_conn *a, uint16_t op, struct agent_wbuf *w, uint8_t **body,
	    size_t *len)
{
	int err;

	pthread_mutex_lock(&a->io_lock);
	err = call(a, op, w, body, len);
	pthread_mutex_unlock(&a->io_lock);
	agent_w_free(w);
	return err;
}

/* ----------------------------------------------------------------- regions */

/* Create a shared region and map it into the agent. 0 and its index. */
static int
region_new(struct tide_agent_conn *a, size_t len, enum region_kind kind, size_t *idx)
{
	struct region r = {.len = len, .kind = kind, .live = true, .fd = -1};
	struct region *nr;
	size_t i;
	int rc;

	r.fd = memfd_create("tide-agent-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r.fd < 0)
		return -errno;
	/* Sealed at its size: the agent maps only regions nobody can shrink under
	 * it (a shrink would turn its next access into SIGBUS). */
	if (ftruncate(r.fd, (off_t)len) != 0 ||
	    fcntl(r.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		rc = -errno;
		close(r.fd);
		return rc;
	}
	/* MAP_NORESERVE: Miles asks for a 32 GiB local buffer and touches little. */
	r.base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, r.fd, 0);
	if (r.base == MAP_FAILED) {
		rc = -errno;
		close(r.fd);
		return rc;
	}
	rc = a->sock >= 0 ? map_one(a, &r) : -ENOTCONN;
	if (rc == -ENOTCONN)
		rc = reconnect(a) == 0 ? map_one(a, &r) : -ENOTCONN;
	if (rc != 0) {
		munmap(r.base, len);
		close(r.fd);
		return rc;
	}
	pthread_mutex_lock(&a->reg_lock);
	for (i = 0; i < a->nregions && a->regions[i].live; i++)
		;
	if (i == a->nregions) {
		nr = realloc(a->regions, (a->nregions + 1) * sizeof(*nr));
		if (nr == NULL) {
			pthread_mutex_unlock(&a->reg_lock);
			munmap(r.base, len);
			close(r.fd);
			return -ENOMEM; /* the agent unmaps it when we disconnect */
		}
		a->regions = nr;
		a->nregions++;
	}
	a->regions[i] = r;
	pthread_mutex_unlock(&a->reg_lock);
	*idx = i;
	return 0;
}

/* Unmap region idx here and in the agent (io_lock held). */
static int
region_drop(struct tide_agent_conn *a, size_t idx)
{
	struct region r;
	struct agent_wbuf w;
	uint8_t *body = NULL;
	size_t len;
	int rc = 0;

	pthread_mutex_lock(&a->reg_lock);
	r = a->regions[idx];
	a->regions[idx].live = false;
	pthread_mutex_unlock(&a->reg_lock);
	if (a->sock >= 0) {
		agent_w_init(&w);
		agent_w_u32(&w, r.id);
		rc = exchange(a, AGENT_UNMAP, &w, -1, &body, &len);
		agent_w_free(&w);
		free(body);
	}
	munmap(r.base, r.len);
	close(r.fd);
	return rc;
}

/* Where [p, p+len) lives: a region location, or false (bounce it). */
static bool
locate(struct tide_agent_conn *a, const void *p, uint64_t len, struct agent_loc *out)
{
	uintptr_t x = (uintptr_t)p;
	size_t i;
	bool found = false;

	pthread_mutex_lock(&a->reg_lock);
	for (i = 0; i < a->nregions && !found; i++) {
		const struct region *r = &a->regions[i];
		uintptr_t b = (uintptr_t)r->base;

		if (r->live && r->kind != R_STAGING && x >= b && len <= r->len &&
		    x - b <= r->len - len) {
			*out = (struct agent_loc){r->id, x - b, len};
			found = true;
		}
	}
	pthread_mutex_unlock(&a->reg_lock);
	return found;
}

/* Make the staging area at least need bytes (io_lock held). */
static int
staging_reserve(struct tide_agent_conn *a, size_t need)
{
	size_t idx, size = STAGING_MIN;
	int rc;

	if (a->staging >= 0 && a->regions[a->staging].len >= need)
		return 0;
	if (a->staging >= 0) {
		region_drop(a, (size_t)a->staging);
		a->staging = -1;
	}
	while (size < need)
		size *= 2;
	rc = region_new(a, size, R_STAGING, &idx);
	if (rc == 0)
		a->staging = (int)idx;
	return rc;
}

/* After a call: give back a staging area made for one outsized request. */
static void
staging_trim(struct tide_agent_conn *a)
{
	if (a->staging >= 0 && a->regions[a->staging].len > STAGING_KEEP) {
		region_drop(a, (size_t)a->staging);
		a->staging = -1;
	}
}

/*
 * Locations for n buffers; those outside every region get staging space
 * (bounced[i] = offset in staging + 1, else 0). Copies in when copy_in.
 * io_lock held.
 */
static int
plan(struct tide_agent_conn *a, const void *const *bufs, const uint64_t *lens, size_t n,
     bool copy_in, struct agent_loc *locs, uint64_t *bounced)
{
	uint64_t need = 0;
	size_t i;
	int rc = ensure(a);
	uint32_t gen = a->gen;

	if (rc != 0)
		return rc;
	for (i = 0; i < n; i++) {
		bounced[i] = 0;
		if (lens[i] == 0) {
			locs[i] = (struct agent_loc){UINT32_MAX, 0, 0};
			continue;
		}
		if (locate(a, bufs[i], lens[i], &locs[i]))
			continue;
		need = (need + BOUNCE_ALIGN - 1) & ~(uint64_t)(BOUNCE_ALIGN - 1);
		bounced[i] = need + 1;
		need += lens[i];
	}
	if (need == 0)
		return 0;
	if (need > SIZE_MAX / 2)
		return -ENOMEM;
	rc = staging_reserve(a, (size_t)need);
	if (rc != 0)
		return rc;
	if (a->gen != gen)
		return -ECONNRESET; /* re-attached meanwhile: the ids above are stale */
	const struct region *st = &a->regions[a->staging];
	for (i = 0; i < n; i++) {
		if (bounced[i] == 0)
			continue;
		locs[i] = (struct agent_loc){st->id, bounced[i] - 1, lens[i]};
		if (copy_in)
			memcpy(st->base + bounced[i] - 1, bufs[i], lens[i]);
	}
	return 0;
}

/* Copy bounced results back: got[i] bytes of item i (when >= 0). A size beyond the
 * item's buffer (lens[i]) is the agent's error, not ours to copy: -EPROTO for it. */
static void
unplan(struct tide_agent_conn *a, void *const *bufs, int64_t *got, const uint64_t *lens, size_t n,
       const uint64_t *bounced)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (got[i] > 0 && (uint64_t)got[i] > lens[i]) {
			TIDE_LOG_RATELIMIT(ERR, 10,
					   "agent answered %lld bytes for a %llu-byte buffer: "
					   "item ignored",
					   (long long)got[i], (unsigned long long)lens[i]);
			got[i] = -EPROTO;
			continue;
		}
		if (bounced[i] != 0 && got[i] > 0)
			memcpy(bufs[i], a->regions[a->staging].base + bounced[i] - 1,
			       (size_t)got[i]);
	}
}

/* ------------------------------------------------------------------- setup */

int
tide_store_nodeenv(struct tide_nodeenv **out)
{
	struct tide_nodeenv *ne = malloc(sizeof(*ne));
	char err[2048] = "";

	*out = NULL;
	if (ne == NULL)
		return -ENOMEM;
	if (tide_nodeenv_load(ne, NULL, NULL, err, sizeof(err)) != 0) {
		TIDE_LOG(ERR, "store setup: the node environment is not valid:\n%s", err);
		free(ne);
		return -EINVAL;
	}
	*out = ne;
	return 0;
}

static int
choose(const struct tide_store_cfg *cfg, struct tide_nodeenv **nep, int *mode, char *path,
       size_t plen)
{
	struct tide_nodeenv *own = NULL, *ne;
	int rc;

	*mode = cfg->agent;
	if (*mode < TIDE_STORE_AGENT_NODEENV || *mode > TIDE_STORE_AGENT_OFF) {
		TIDE_LOG(ERR, "store setup: agent mode %d is not one of enum tide_store_agent",
			 *mode);
		return -EINVAL;
	}
	if (*mode == TIDE_STORE_AGENT_OFF)
		return 0;
	if (cfg->agent_socket != NULL && cfg->agent_socket[0] != '\0' &&
	    *mode != TIDE_STORE_AGENT_NODEENV) {
		snprintf(path, plen, "%s", cfg->agent_socket);
		return 0;
	}
	if (nep == NULL)
		nep = &own;
	if (*nep == NULL) {
		rc = tide_store_nodeenv(nep);
		if (rc != 0)
			return rc;
	}
	ne = *nep;
	if (*mode == TIDE_STORE_AGENT_NODEENV)
		*mode = ne->agent == TIDE_NODEENV_AGENT_OFF    ? TIDE_STORE_AGENT_OFF
			: ne->agent == TIDE_NODEENV_AGENT_AUTO ? TIDE_STORE_AGENT_AUTO
							       : TIDE_STORE_AGENT_REQUIRED;
	snprintf(path, plen, "%s",
		 cfg->agent_socket && cfg->agent_socket[0] ? cfg->agent_socket : ne->agent_socket);
	free(own);
	return 0;
}

int
tide_agent_setup(const struct tide_store_cfg *cfg, struct tide_nodeenv **ne,
		 struct tide_agent_conn **out, char *why, size_t whylen)
{
	struct tide_agent_conn *a;
	char path[sizeof(a->path)];
	size_t idx;
	int mode, rc;

	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return -ENOMEM;
	rc = choose(cfg, ne, &mode, a->path, sizeof(a->path));
	if (rc != 0 || mode == TIDE_STORE_AGENT_OFF) {
		if (rc == 0 && why != NULL)
			snprintf(why, whylen, "TIDE_AGENT=off");
		free(a);
		return rc;
	}
	pthread_mutex_init(&a->io_lock, NULL);
	pthread_mutex_init(&a->reg_lock, NULL);
	a->be.ops = &store_agent_ops;
	a->staging = -1;
	a->sock = -1;
	pthread_mutex_lock(&a->io_lock);
	rc = reconnect(a);
	if (rc == 0 && cfg->local_buffer_size > 0) {
		rc = region_new(a, cfg->local_buffer_size, R_LOCAL, &idx);
		if (rc == 0)
			tide_lbuf_warm_start(a->regions[idx].base, a->regions[idx].len,
					     &a->lbuf_warm);
		if (rc != 0)
			TIDE_LOG(ERR,
				 "store setup: cannot share a %llu-byte local buffer with the "
				 "agent at %s: %s",
				 (unsigned long long)cfg->local_buffer_size, a->path,
				 strerror(-rc));
	}
	pthread_mutex_unlock(&a->io_lock);
	/* The agent's transport is the node's. Asking for RDMA on a node whose
	 * agent has none must not silently run on TCP (a node with RDMA still
	 * serves TCP peers, so the other way round is fine). */
	if (rc == 0 && cfg->protocol != NULL && strcmp(cfg->protocol, "rdma") == 0 &&
	    strcmp(a->protocol, "rdma") != 0) {
		TIDE_LOG(ERR,
			 "store setup: protocol 'rdma' asked for, but this node's agent at %s "
			 "runs '%s' (its node file's MOONCAKE_PROTOCOL); set "
			 "MOONCAKE_PROTOCOL=%s for this client, or give the node an RDMA device "
			 "and MOONCAKE_PROTOCOL=rdma in the node file",
			 a->path, a->protocol, a->protocol);
		rc = -EPROTONOSUPPORT;
		tide_agent_close(a);
		return rc;
	}
	if (rc == 0) {
		if (cfg->global_segment_size > 0)
			TIDE_LOG(INFO,
				 "attached to the node agent at %s (segment %s); this "
				 "process contributes no segment of its own (global_segment_"
				 "size %llu ignored: the agent owns the node's segment)",
				 a->path, a->endpoint,
				 (unsigned long long)cfg->global_segment_size);
		else
			TIDE_LOG(INFO, "attached to the node agent at %s (segment %s)", a->path,
				 a->endpoint);
		*out = a;
		return 1;
	}
	snprintf(path, sizeof(path), "%s", a->path);
	tide_agent_close(a);
	/* No socket file and nobody listening are the same to the caller: no
	 * agent (and -ENOENT would read as "no such object" in the store's codes). */
	if (rc == -ENOENT)
		rc = -ECONNREFUSED;
	if (mode == TIDE_STORE_AGENT_AUTO && rc == -ECONNREFUSED) {
		/* The caller logs the one line, once it knows the transport. */
		if (why != NULL)
			snprintf(why, whylen, "no node agent answers at %s (TIDE_AGENT=auto)",
				 path);
		return 0;
	}
	if (rc == -ECONNREFUSED)
		TIDE_LOG(ERR,
			 "store setup: no Tide node agent answers at %s. Start it on this node "
			 "(systemctl start tide-node, or tide-node --env <node file>), point "
			 "TIDE_AGENT_SOCKET at it, or set TIDE_AGENT=auto or off to run the "
			 "transfer engine inside this process",
			 path);
	else
		TIDE_LOG(ERR, "store setup: attaching to the node agent at %s failed: %s", path,
			 strerror(-rc));
	return rc;
}

void
tide_agent_close(struct tide_agent_conn *a)
{
	size_t i;

	if (a == NULL)
		return;
	tide_seg_warm_stop(a->lbuf_warm);
	for (i = 0; i < a->nregions; i++) {
		if (!a->regions[i].live)
			continue;
		munmap(a->regions[i].base, a->regions[i].len);
		close(a->regions[i].fd);
	}
	/* Closing the socket is the agent's cue to unmap our regions. */
	if (a->sock >= 0)
		close(a->sock);
	free(a->regions);
	pthread_mutex_destroy(&a->io_lock);
	pthread_mutex_destroy(&a->reg_lock);
	free(a);
}

const char *
tide_agent_endpoint(const struct tide_agent_conn *a)
{
	return a->endpoint;
}

const char *
tide_agent_protocol(const struct tide_agent_conn *a)
{
	return a->protocol;
}

/* -------------------------------------------------------------- operations */

/* Read "i32 rc, n x (i32|i64)" replies. */
static int
read_vec(const uint8_t *body, size_t len, size_t n, int *v32, int64_t *v64)
{
	struct agent_rbuf rd;
	int rc;
	size_t i;

	agent_r_init(&rd, body, len);
	rc = (int32_t)agent_r_u32(&rd);
	for (i = 0; i < n; i++) {
		if (v32)
			v32[i] = (int32_t)agent_r_u32(&rd);
		else
			v64[i] = (int64_t)agent_r_u64(&rd);
	}
	return rd.bad ? -EPROTO : rc;
}

static bool
keys_ok(const char *const *keys, size_t n)
{
	size_t i;

	if (keys == NULL || n == 0 || n > AGENT_MAX_BATCH)
		return false;
	for (i = 0; i < n; i++)
		if (keys[i] == NULL || keys[i][0] == '\0' || strlen(keys[i]) > AGENT_MAX_KEY)
			return false;
	return true;
}

/*
 * A put whose config carries a soft pin: AGENT_PUT has no room for it, so the
 * values go as one piece each through AGENT_PUT_PARTS (same placement and
 * results; n == 1 the single-key RPCs there too). Returns as
 * tide_agent_batch_put_from(): the first non-zero rcs[i] once the call ran.
 */
static int
put_soft_pinned(struct tide_agent_conn *a, const char *const *keys, const void *const *bufs,
		const size_t *lens, size_t n, const struct tide_store_rc *repl, int *rcs)
{
	struct tide_store_part *parts = calloc(n, sizeof(*parts));
	size_t *ones = calloc(n, sizeof(*ones)), i;
	int err = -ENOMEM;

	if (parts != NULL && ones != NULL) {
		for (i = 0; i < n; i++) {
			parts[i] = (struct tide_store_part){bufs[i], lens[i]};
			ones[i] = 1;
		}
		err = tide_agent_batch_put_parts(a, keys, parts, ones, n, repl, 0, rcs);
		for (i = 0; err == 0 && i < n; i++)
			err = rcs[i];
	}
	free(parts);
	free(ones);
	return err;
}

int
tide_agent_batch_put_from(struct tide_agent_conn *a, const char *const *keys,
			  const void *const *bufs, const size_t *lens, size_t n,
			  const struct tide_store_rc *repl, int *rcs)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	size_t blen, i;
	int err;

	if (!keys_ok(keys, n) || bufs == NULL || lens == NULL || rcs == NULL)
		return -EINVAL;
	if (!agent_rc_ok(repl, n)) {
		TIDE_LOG(ERR,
			 "put: a replicate config string longer than %u bytes, or more than "
			 "1024 preferred segments: refused",
			 AGENT_MAX_KEY);
		return -EINVAL;
	}
	if (agent_rc_soft_pin(repl))
		return put_soft_pinned(a, keys, bufs, lens, n, repl, rcs);
	struct agent_loc *locs = calloc(n, sizeof(*locs));
	uint64_t *bounced = calloc(n, sizeof(*bounced));
	uint64_t *l64 = calloc(n, sizeof(*l64));
	if (locs == NULL || bounced == NULL || l64 == NULL) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		l64[i] = lens[i];
	pthread_mutex_lock(&a->io_lock);
	err = plan(a, bufs, l64, n, true, locs, bounced);
	if (err == 0) {
		agent_w_init(&w);
		agent_w_u32(&w, (uint32_t)n);
		agent_w_rc(&w, repl, n);
		for (i = 0; i < n; i++) {
			agent_w_str(&w, keys[i]);
			agent_w_loc(&w, &locs[i]);
		}
		err = call(a, AGENT_PUT, &w, &body, &blen);
		agent_w_free(&w);
		if (err == 0)
			err = read_vec(body, blen, n, rcs, NULL);
		free(body);
	}
	staging_trim(a);
	pthread_mutex_unlock(&a->io_lock);
out:
	free(locs);
	free(bounced);
	free(l64);
	return err;
}

int
tide_agent_put(struct tide_agent_conn *a, const char *key, const void *buf, size_t len,
	       const struct tide_store_rc *repl)
{
	int one = 0, err;

	if (key == NULL || (buf == NULL && len > 0))
		return -EINVAL;
	err = tide_agent_batch_put_from(a, &key, &buf, &len, 1, repl, &one);
	return err == 0 || err == one ? one : err;
}

/*
 * A call's pieces (tide_store_part), checked and given the arrays plan() fills: every
 * piece becomes a location, inside a shared region as it is or in staging space.
 * Shared by the calls that move objects in pieces (put parts, get parts, session
 * ranges).
 */
struct parts_plan {
	size_t total;           /* pieces of all keys */
	const void **pb;        /* each piece's address */
	uint64_t *l64;          /* and length */
	struct agent_loc *locs; /* where the agent finds it */
	uint64_t *bounced;      /* staging offset + 1 of a copied piece, 0 when in place */
};

static void
parts_plan_free(struct parts_plan *pp)
{
	free(pp->pb);
	free(pp->l64);
	free(pp->locs);
	free(pp->bounced);
	memset(pp, 0, sizeof(*pp));
}

/* Check n keys' pieces (at most AGENT_MAX_PARTS in all; a NULL piece with bytes is
 * refused) and allocate pp's arrays. 0; -EINVAL (what names the call in the log
 * line); -ENOMEM. */
static int
parts_plan_init(struct parts_plan *pp, const struct tide_store_part *parts, const size_t *nparts,
		size_t n, const char *what)
{
	size_t total = 0;

	memset(pp, 0, sizeof(*pp));
	if (!store_parts_ok(parts, nparts, n, AGENT_MAX_PARTS, &total)) {
		TIDE_LOG(ERR,
			 "%s: pieces refused (more than %u in one call, or a NULL piece with "
			 "bytes)",
			 what, AGENT_MAX_PARTS);
		return -EINVAL;
	}
	/* One entry more than needed: calloc(0) may be NULL, which reads as no memory. */
	pp->total = total;
	pp->pb = calloc(total + 1, sizeof(*pp->pb));
	pp->l64 = calloc(total + 1, sizeof(*pp->l64));
	pp->locs = calloc(total + 1, sizeof(*pp->locs));
	pp->bounced = calloc(total + 1, sizeof(*pp->bounced));
	if (pp->pb == NULL || pp->l64 == NULL || pp->locs == NULL || pp->bounced == NULL) {
		parts_plan_free(pp);
		return -ENOMEM;
	}
	for (size_t k = 0; k < total; k++) {
		pp->pb[k] = parts[k].buf;
		pp->l64[k] = parts[k].len;
	}
	return 0;
}

/*
 * Values in pieces: every piece becomes a location of its own (inside a shared
 * region as it is, else bounced through the staging area like a whole buffer),
 * and the agent writes each to its offset: the value is never gathered here.
 * rcs is written only when the agent ran the call (its rc 0).
 */
int
tide_agent_batch_put_parts(struct tide_agent_conn *a, const char *const *keys,
			   const struct tide_store_part *parts, const size_t *nparts, size_t n,
			   const struct tide_store_rc *repl, unsigned flags, int *rcs)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	struct parts_plan pp;
	size_t blen, i, k;
	int err;

	/* Unknown flags are refused here, as in process: a stray AGENT_PUT_SOFT_PIN
	 * would make the agent look for a trailer that is not there. */
	if ((flags & ~TIDE_STORE_PUT_UPSERT) != 0 || !keys_ok(keys, n) || nparts == NULL ||
	    rcs == NULL)
		return -EINVAL;
	if (!agent_rc_ok(repl, n)) {
		TIDE_LOG(ERR,
			 "put: a replicate config string longer than %u bytes, or more than "
			 "1024 preferred segments: refused",
			 AGENT_MAX_KEY);
		return -EINVAL;
	}
	err = parts_plan_init(&pp, parts, nparts, n, "put");
	if (err != 0)
		return err;
	int *got = calloc(n, sizeof(*got));
	if (got == NULL) {
		err = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&a->io_lock);
	err = plan(a, pp.pb, pp.l64, pp.total, true, pp.locs, pp.bounced);
	if (err == 0) {
		agent_w_init(&w);
		agent_w_u32(&w, (uint32_t)n);
		agent_w_u32(&w, flags | (agent_rc_soft_pin(repl) ? AGENT_PUT_SOFT_PIN : 0));
		agent_w_rc(&w, repl, n);
		for (i = 0, k = 0; i < n; i++) {
			agent_w_str(&w, keys[i]);
			agent_w_u32(&w, (uint32_t)nparts[i]);
			for (size_t e = k + nparts[i]; k < e; k++)
				agent_w_loc(&w, &pp.locs[k]);
		}
		if (agent_rc_soft_pin(repl))
			agent_w_soft_pin(&w, repl);
		err = call(a, AGENT_PUT_PARTS, &w, &body, &blen);
		agent_w_free(&w);
		if (err == 0)
			err = read_vec(body, blen, n, got, NULL);
		free(body);
	}
	staging_trim(a);
	pthread_mutex_unlock(&a->io_lock);
	if (err == 0)
		memcpy(rcs, got, n * sizeof(*rcs));
out:
	parts_plan_free(&pp);
	free(got);
	return err;
}

int
tide_agent_batch_get_into(struct tide_agent_conn *a, const char *const *keys, void *const *bufs,
			  const size_t *lens, size_t n, int64_t *sizes)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	size_t blen, i;
	int err;

	if (!keys_ok(keys, n) || bufs == NULL || lens == NULL || sizes == NULL)
		return -EINVAL;
	struct agent_loc *locs = calloc(n, sizeof(*locs));
	uint64_t *bounced = calloc(n, sizeof(*bounced));
	uint64_t *l64 = calloc(n, sizeof(*l64));
	int64_t *got = calloc(n, sizeof(*got));
	if (locs == NULL || bounced == NULL || l64 == NULL || got == NULL) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		l64[i] = lens[i];
	pthread_mutex_lock(&a->io_lock);
	err = plan(a, (const void *const *)bufs, l64, n, false, locs, bounced);
	if (err == 0) {
		agent_w_init(&w);
		agent_w_u32(&w, (uint32_t)n);
		for (i = 0; i < n; i++) {
			agent_w_str(&w, keys[i]);
			agent_w_loc(&w, &locs[i]);
		}
		err = call(a, AGENT_GET, &w, &body, &blen);
		agent_w_free(&w);
		if (err == 0) {
			err = read_vec(body, blen, n, NULL, got);
			if (err != -EPROTO) {
				unplan(a, bufs, got, l64, n, bounced);
				memcpy(sizes, got, n * sizeof(*got));
			}
		}
		free(body);
	}
	staging_trim(a);
	pthread_mutex_unlock(&a->io_lock);
out:
	free(locs);
	free(bounced);
	free(l64);
	free(got);
	return err;
}

int64_t
tide_agent_get_into(struct tide_agent_conn *a, const char *key, void *buf, size_t len)
{
	int64_t size = 0;
	int err;

	if (key == NULL || (buf == NULL && len > 0))
		return -EINVAL;
	err = tide_agent_batch_get_into(a, &key, &buf, &len, 1, &size);
	return err == 0 || err == size ? size : err;
}

int
tide_agent_get_into_ranges(struct tide_agent_conn *a, const char *const *keys, size_t nkeys,
			   struct tide_store_frag *frags, size_t nfrags)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	size_t blen, i;
	int err;

	if (!keys_ok(keys, nkeys) || frags == NULL || nfrags == 0 || nfrags > AGENT_MAX_BATCH)
		return -EINVAL;
	struct agent_loc *locs = calloc(nfrags, sizeof(*locs));
	uint64_t *bounced = calloc(nfrags, sizeof(*bounced));
	uint64_t *l64 = calloc(nfrags, sizeof(*l64));
	int64_t *got = calloc(nfrags, sizeof(*got));
	const void **src = calloc(nfrags, sizeof(*src));
	void **dst = calloc(nfrags, sizeof(*dst));
	if (!locs || !bounced || !l64 || !got || !src || !dst) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < nfrags; i++) {
		l64[i] = frags[i].len;
		src[i] = dst[i] = frags[i].dst;
	}
	pthread_mutex_lock(&a->io_lock);
	err = plan(a, src, l64, nfrags, false, locs, bounced);
	if (err == 0) {
		agent_w_init(&w);
		agent_w_u32(&w, (uint32_t)nkeys);
		for (i = 0; i < nkeys; i++)
			agent_w_str(&w, keys[i]);
		agent_w_u32(&w, (uint32_t)nfrags);
		for (i = 0; i < nfrags; i++) {
			agent_w_u64(&w, frags[i].key);
			agent_w_u64(&w, frags[i].src_off);
			agent_w_loc(&w, &locs[i]);
		}
		err = call(a, AGENT_RANGES, &w, &body, &blen);
		agent_w_free(&w);
		if (err == 0) {
			err = read_vec(body, blen, nfrags, NULL, got);
			if (err != -EPROTO) {
				unplan(a, dst, got, l64, nfrags, bounced);
				for (i = 0; i < nfrags; i++)
					frags[i].result = got[i];
			}
		}
		free(body);
	}
	staging_trim(a);
	pthread_mutex_unlock(&a->io_lock);
out:
	free(locs);
	free(bounced);
	free(l64);
	free(got);
	free(src);
	free(dst);
	return err;
}

/*
 * Copy back what the agent read into bounced pieces: key i's object of sizes[i]
 * bytes fills its pieces in order. A size beyond the key's pieces is the agent's
 * error (-EPROTO for the key, nothing copied).
 */
static void
unplan_parts(struct tide_agent_conn *a, const struct tide_store_part *parts, const size_t *nparts,
	     size_t n, int64_t *sizes, const uint64_t *bounced)
{
	const uint8_t *st = a->staging >= 0 ? a->regions[a->staging].base : NULL;
	size_t i, k = 0;

	for (i = 0; i < n; k += nparts[i], i++) {
		uint64_t room = 0, off = 0, size;

		if (sizes[i] <= 0)
			continue;
		for (size_t j = k; j < k + nparts[i]; j++)
			room += parts[j].len; /* the agent was sent these: each fits a body */
		size = (uint64_t)sizes[i];
		if (size > room) {
			TIDE_LOG_RATELIMIT(
				ERR, 10,
				"agent answered %llu bytes for %llu bytes of pieces: key "
				"ignored",
				(unsigned long long)size, (unsigned long long)room);
			sizes[i] = -EPROTO;
			continue;
		}
		for (size_t j = k; j < k + nparts[i] && off < size; j++) {
			uint64_t take = size - off < parts[j].len ? size - off : parts[j].len;

			if (bounced[j] != 0 && take > 0 && st != NULL)
				memcpy((void *)(uintptr_t)parts[j].buf, st + bounced[j] - 1,
				       (size_t)take);
			off += take;
		}
	}
}

/*
 * Objects into pieces: every piece becomes a location (inside a shared region as
 * it is, else staging space, copied back after the reply), the agent reads each
 * key into its pieces. sizes is written only when the agent ran the call.
 */
int
tide_agent_batch_get_parts(struct tide_agent_conn *a, const char *const *keys,
			   const struct tide_store_part *parts, const size_t *nparts, size_t n,
			   int64_t *sizes)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	struct parts_plan pp;
	size_t blen, i, k;
	int err;

	if (!keys_ok(keys, n) || nparts == NULL || sizes == NULL)
		return -EINVAL;
	err = parts_plan_init(&pp, parts, nparts, n, "get");
	if (err != 0)
		return err;
	int64_t *got = calloc(n, sizeof(*got));
	if (got == NULL) {
		err = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&a->io_lock);
	err = plan(a, pp.pb, pp.l64, pp.total, false, pp.locs, pp.bounced);
	if (err == 0) {
		agent_w_init(&w);
		agent_w_u32(&w, (uint32_t)n);
		for (i = 0, k = 0; i < n; i++) {
			agent_w_str(&w, keys[i]);
			agent_w_u32(&w, (uint32_t)nparts[i]);
			for (size_t e = k + nparts[i]; k < e; k++)
				agent_w_loc(&w, &pp.locs[k]);
		}
		err = call(a, AGENT_GET_PARTS, &w, &body, &blen);
		agent_w_free(&w);
		if (err == 0) {
			err = read_vec(body, blen, n, NULL, got);
			if (err != -EPROTO) {
				unplan_parts(a, parts, nparts, n, got, pp.bounced);
				memcpy(sizes, got, n * sizeof(*got));
			}
		}
		free(body);
	}
	staging_trim(a);
	pthread_mutex_unlock(&a->io_lock);
out:
	parts_plan_free(&pp);
	free(got);
	return err;
}

/* Wire bytes of a replica without its strings' bytes: u64 id, u8 type, u32 status,
 * u64 size, u64 address, three u32 string lengths. */
#define REPLICA_MIN_BYTES 41u
/* A replica string's bound: the body's (the agent's store copied it from the master). */
#define REPLICA_MAX_STR AGENT_MAX_BODY

/*
 * The n keys' answers of an AGENT_REPLICAS reply after its rc. b NULL: count
 * (*nrep replicas, *strbytes string bytes with NULs, as store_replicas_str()
 * takes them); else fill b, allocated from that count. A replica count the body
 * cannot hold is malformed. Returns false when malformed.
 */
static bool
replicas_parse(struct agent_rbuf *rd, size_t n, struct store_replicas_blk *b, size_t *nrep,
	       size_t *strbytes)
{
	for (size_t i = 0; i < n; i++) {
		int err = (int32_t)agent_r_u32(rd);
		uint32_t m = agent_r_u32(rd);

		if (rd->bad || m > (rd->len - rd->pos) / REPLICA_MIN_BYTES || (err != 0 && m != 0))
			return false;
		if (b != NULL) {
			b->keys[i].err = err;
			b->keys[i].n = m;
			b->keys[i].v = m > 0 ? b->rep : NULL;
		}
		*nrep += m;
		for (uint32_t k = 0; k < m; k++) {
			struct tide_store_replica *r = b != NULL ? store_replicas_take(b) : NULL;
			struct tide_store_replica tmp;
			const char *s[3];
			size_t len[3];

			if (r == NULL)
				r = &tmp;
			r->id = agent_r_u64(rd);
			r->type = agent_r_u8(rd);
			r->status = (int32_t)agent_r_u32(rd);
			r->size = agent_r_u64(rd);
			r->buffer_address = agent_r_u64(rd);
			for (int j = 0; j < 3; j++) {
				s[j] = agent_r_view(rd, REPLICA_MAX_STR, &len[j]);
				*strbytes += len[j] > 0 ? len[j] + 1 : 0;
			}
			if (rd->bad)
				return false;
			if (b != NULL) {
				r->transport_endpoint = store_replicas_str(b, s[0], len[0]);
				r->protocol = store_replicas_str(b, s[1], len[1]);
				r->file_path = store_replicas_str(b, s[2], len[2]);
			}
		}
	}
	return true;
}

/* u32 n, then n x str key: the key list of the keys-only requests. */
static void
w_keys(struct agent_wbuf *w, const char *const *keys, size_t n)
{
	agent_w_u32(w, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		agent_w_str(w, keys[i]);
}

/* One request of [u8 flag (flag >= 0)] [str prefix (non-NULL)] u32 n, n x str key, answered
 * by i32 rc and n x i32 into v32; the caller has checked its arguments. */
static int
keys_send(struct tide_agent_conn *a, uint16_t op, int flag, const char *prefix,
	  const char *const *keys, size_t n, int *v32)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	size_t blen;
	int err;

	agent_w_init(&w);
	if (flag >= 0)
		agent_w_u8(&w, (uint8_t)flag);
	if (prefix != NULL)
		agent_w_str(&w, prefix);
	w_keys(&w, keys, n);
	err = call_locked(a, op, &w, &body, &blen);
	if (err == 0)
		err = read_vec(body, blen, n, v32, NULL);
	free(body);
	return err;
}

int64_t
tide_agent_batch_replica_clear(struct tide_agent_conn *a, const char *const *keys, size_t n,
			       const char *segment_name, int *cleared)
{
	size_t i;

	if (n > AGENT_MAX_BATCH || (n > 0 && (keys == NULL || cleared == NULL)) ||
	    (segment_name != NULL && strlen(segment_name) > AGENT_MAX_KEY))
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (keys[i] == NULL || strlen(keys[i]) > AGENT_MAX_KEY)
			return -EINVAL;
	return keys_send(a, AGENT_REPLICA_CLEAR, -1, segment_name != NULL ? segment_name : "", keys,
			 n, cleared);
}

/* One AGENT_REPLICAS request; the reply becomes the caller's block (store_replicas.h). */
int
tide_agent_batch_get_replicas(struct tide_agent_conn *a, const char *const *keys, size_t n,
			      struct tide_store_replicas **out)
{
	struct store_replicas_blk b;
	struct agent_wbuf w;
	struct agent_rbuf rd;
	uint8_t *body = NULL;
	size_t blen, nrep = 0, strbytes = 0;
	int err;

	if (!keys_ok(keys, n) || out == NULL)
		return -EINVAL;
	agent_w_init(&w);
	w_keys(&w, keys, n);
	err = call_locked(a, AGENT_REPLICAS, &w, &body, &blen);
	if (err != 0)
		return err;
	/* The body is ours now: parse it twice (count, fill) outside the lock. Counts are
	 * bounded by the body (at most 16 MiB), so they cannot overflow. */
	agent_r_init(&rd, body, blen);
	err = (int32_t)agent_r_u32(&rd);
	if (!rd.bad && err == 0) {
		size_t start = rd.pos;

		if (!replicas_parse(&rd, n, NULL, &nrep, &strbytes)) {
			err = -EPROTO;
		} else {
			err = store_replicas_alloc(&b, n, nrep, strbytes);
			rd.pos = start;
			nrep = strbytes = 0;
			if (err == 0 && !replicas_parse(&rd, n, &b, &nrep, &strbytes)) {
				free(b.keys); /* cannot happen: the same bytes parsed once */
				err = -EPROTO;
			} else if (err == 0) {
				*out = b.keys;
			}
		}
	} else if (rd.bad) {
		err = -EPROTO;
	}
	free(body);
	return err;
}

/* Requests without memory: keys (+ a flag) in, a vector or a scalar out. */
static int
keys_call(struct tide_agent_conn *a, uint16_t op, int flag, const char *const *keys, size_t n,
	  int *v32)
{
	if (!keys_ok(keys, n) || v32 == NULL)
		return -EINVAL;
	return keys_send(a, op, flag, NULL, keys, n, v32);
}

static int64_t
scalar_call(struct tide_agent_conn *a, uint16_t op, int flag, const char *str)
{
	struct agent_wbuf w;
	struct agent_rbuf rd;
	uint8_t *body = NULL;
	size_t blen;
	int64_t v;
	int err;

	agent_w_init(&w);
	if (flag >= 0)
		agent_w_u8(&w, (uint8_t)flag);
	if (str != NULL)
		agent_w_str(&w, str);
	err = call_locked(a, op, &w, &body, &blen);
	if (err != 0)
		return err;
	agent_r_init(&rd, body, blen);
	v = (int64_t)agent_r_u64(&rd);
	free(body);
	return rd.bad ? -EPROTO : v;
}

int
tide_agent_batch_is_exist(struct tide_agent_conn *a, const char *const *keys, size_t n, int *out)
{
	return keys_call(a, AGENT_EXIST, -1, keys, n, out);
}

int
tide_agent_is_exist(struct tide_agent_conn *a, const char *key)
{
	int v = 0, err;

	if (key == NULL)
		return -EINVAL;
	err = keys_call(a, AGENT_EXIST, -1, &key, 1, &v);
	return err != 0 ? err : v;
}

int
tide_agent_batch_remove(struct tide_agent_conn *a, const char *const *keys, size_t n, bool force,
			int *rcs)
{
	return keys_call(a, AGENT_REMOVE, force, keys, n, rcs);
}

int
tide_agent_remove(struct tide_agent_conn *a, const char *key, bool force)
{
	int v = 0, err;

	if (key == NULL)
		return -EINVAL;
	err = keys_call(a, AGENT_REMOVE, force, &key, 1, &v);
	return err == 0 || err == v ? v : err;
}

int64_t
tide_agent_get_size(struct tide_agent_conn *a, const char *key)
{
	if (key == NULL || key[0] == '\0' || strlen(key) > AGENT_MAX_KEY)
		return -EINVAL;
	return scalar_call(a, AGENT_SIZE, -1, key);
}

int64_t
tide_agent_remove_all(struct tide_agent_conn *a, bool force)
{
	return scalar_call(a, AGENT_REMOVE_ALL, force, NULL);
}

int64_t
tide_agent_remove_by_regex(struct tide_agent_conn *a, const char *pattern, bool force)
{
	if (pattern == NULL || strlen(pattern) > AGENT_MAX_KEY)
		return -EINVAL;
	return scalar_call(a, AGENT_REMOVE_REGEX, force, pattern);
}

int
tide_agent_health_check(struct tide_agent_conn *a)
{
	int64_t v = scalar_call(a, AGENT_HEALTH, -1, NULL);

	return v < 0 ? 2 : (int)v;
}

/* ----------------------------------------------------------------- buffers */

int
tide_agent_local_buffer(struct tide_agent_conn *a, void **base, size_t *len)
{
	size_t i;

	if (base == NULL || len == NULL)
		return -EINVAL;
	*base = NULL;
	*len = 0;
	pthread_mutex_lock(&a->reg_lock);
	for (i = 0; i < a->nregions; i++) {
		if (a->regions[i].live && a->regions[i].kind == R_LOCAL) {
			*base = a->regions[i].base;
			*len = a->regions[i].len;
		}
	}
	pthread_mutex_unlock(&a->reg_lock);
	return 0;
}

int
tide_agent_map_buffer(struct tide_agent_conn *a, size_t len, void **out)
{
	size_t idx;
	int rc;

	if (len == 0 || out == NULL)
		return -EINVAL;
	pthread_mutex_lock(&a->io_lock);
	rc = region_new(a, len, R_MAPPED, &idx);
	if (rc == 0)
		*out = a->regions[idx].base;
	pthread_mutex_unlock(&a->io_lock);
	return rc;
}

int
tide_agent_unmap_buffer(struct tide_agent_conn *a, void *ptr)
{
	size_t i;
	int rc = -ENOENT;

	pthread_mutex_lock(&a->io_lock);
	for (i = 0; i < a->nregions; i++) {
		if (a->regions[i].live && a->regions[i].kind == R_MAPPED &&
		    a->regions[i].base == ptr) {
			region_drop(a, i);
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&a->io_lock);
	return rc;
}

/* ------------------------------------------------------------------ backend */

struct store_backend *
tide_agent_backend(struct tide_agent_conn *a)
{
	return &a->be;
}

/* ---------------------------------------------------------------- sessions */

/*
 * Sessions run in the agent's store and belong to this connection (agent_proto.h):
 * if the agent restarts in between, they are gone with the old connection (the
 * agent revoked them) and the calls on their keys answer -ESRCH.
 */
static int
agent_put_sess_start(struct tide_agent_conn *a, const char *const *keys, const size_t *sizes,
		     size_t n, const struct tide_store_rc *repl, int *rcs)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	size_t blen, i;
	int err;

	if (!keys_ok(keys, n) || sizes == NULL || rcs == NULL)
		return -EINVAL;
	if (!agent_rc_ok(repl, n)) {
		TIDE_LOG(ERR,
			 "session start: a replicate config string longer than %u bytes, or "
			 "more than 1024 preferred segments: refused",
			 AGENT_MAX_KEY);
		return -EINVAL;
	}
	int *got = calloc(n, sizeof(*got));
	if (got == NULL)
		return -ENOMEM;
	agent_w_init(&w);
	agent_w_u32(&w, (uint32_t)n);
	agent_w_u32(&w, agent_rc_soft_pin(repl) ? AGENT_PUT_SOFT_PIN : 0);
	agent_w_rc(&w, repl, n);
	for (i = 0; i < n; i++) {
		agent_w_str(&w, keys[i]);
		agent_w_u64(&w, sizes[i]);
	}
	if (agent_rc_soft_pin(repl))
		agent_w_soft_pin(&w, repl);
	err = call_locked(a, AGENT_PUT_SESS_START, &w, &body, &blen);
	if (err == 0)
		err = read_vec(body, blen, n, got, NULL);
	if (err == 0)
		memcpy(rcs, got, n * sizeof(*rcs));
	free(body);
	free(got);
	return err;
}

/*
 * Ranged writes or reads: every piece becomes a location (a shared region as it
 * is, else staging space: copied in for a write, back for a read), sent with its
 * offset in the object. out is written only when the agent ran the call.
 */
static int
agent_sess_ranges(struct tide_agent_conn *a, bool put, const char *const *keys,
		  const struct tide_store_part *parts, const uint64_t *offs, const size_t *nparts,
		  size_t n, int64_t *out)
{
	struct agent_wbuf w;
	uint8_t *body = NULL;
	struct parts_plan pp;
	size_t blen, i, k;
	int err;

	if (!keys_ok(keys, n) || nparts == NULL || out == NULL)
		return -EINVAL;
	err = parts_plan_init(&pp, parts, nparts, n, "ranges");
	if (err == 0 && pp.total > 0 && offs == NULL) {
		parts_plan_free(&pp); /* pieces without their offsets */
		err = -EINVAL;
	}
	if (err != 0)
		return err;
	int64_t *got = calloc(n, sizeof(*got));
	if (got == NULL) {
		err = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&a->io_lock);
	err = plan(a, pp.pb, pp.l64, pp.total, put, pp.locs, pp.bounced);
	if (err == 0) {
		agent_w_init(&w);
		agent_w_u8(&w, put ? AGENT_SESS_PUT : AGENT_SESS_GET);
		agent_w_u32(&w, (uint32_t)n);
		for (i = 0, k = 0; i < n; i++) {
			agent_w_str(&w, keys[i]);
			agent_w_u32(&w, (uint32_t)nparts[i]);
			for (size_t e = k + nparts[i]; k < e; k++) {
				agent_w_loc(&w, &pp.locs[k]);
				agent_w_u64(&w, offs[k]);
			}
		}
		err = call(a, AGENT_SESS_RANGES, &w, &body, &blen);
		agent_w_free(&w);
		if (err == 0)
			err = read_vec(body, blen, n, NULL, got);
		free(body);
		for (i = 0, k = 0; err == 0 && i < n; k += nparts[i], i++) {
			uint64_t sum = 0;

			if (got[i] < 0)
				continue;
			for (size_t j = k; j < k + nparts[i]; j++)
				sum += pp.l64[j];
			/* A key read (or written) whole is every piece's bytes: anything else
			 * is the agent's error, and nothing of it is copied. */
			if ((uint64_t)got[i] != sum) {
				got[i] = -EPROTO;
				continue;
			}
			for (size_t j = k; !put && j < k + nparts[i]; j++)
				if (pp.bounced[j] != 0 && pp.l64[j] > 0)
					memcpy((void *)(uintptr_t)parts[j].buf,
					       a->regions[a->staging].base + pp.bounced[j] - 1,
					       (size_t)pp.l64[j]);
		}
	}
	staging_trim(a);
	pthread_mutex_unlock(&a->io_lock);
	if (err == 0)
		memcpy(out, got, n * sizeof(*out));
out:
	parts_plan_free(&pp);
	free(got);
	return err;
}

/* End, revoke, get start, get end: keys out, a code per key back. */
static int
agent_sess_keys(struct tide_agent_conn *a, enum agent_sess_what what, const char *const *keys,
		size_t n, int *rcs)
{
	int *got, err;

	if (!keys_ok(keys, n) || (rcs == NULL && what != AGENT_SESS_GET_END))
		return -EINVAL;
	got = calloc(n, sizeof(*got));
	if (got == NULL)
		return -ENOMEM;
	err = keys_call(a, AGENT_SESS_KEYS, (int)what, keys, n, got);
	if (err == 0 && rcs != NULL)
		memcpy(rcs, got, n * sizeof(*rcs));
	free(got);
	return err;
}

static struct tide_agent_conn *
conn_of(struct store_backend *b)
{
	return store_backend_of(b, struct tide_agent_conn, be);
}

static int
be_put(struct store_backend *b, const char *key, const void *buf, size_t len,
       const struct tide_store_rc *repl)
{
	return tide_agent_put(conn_of(b), key, buf, len, repl);
}

static int
be_batch_put(struct store_backend *b, const char *const *keys, const void *const *bufs,
	     const size_t *lens, size_t n, const struct tide_store_rc *repl, int *rcs)
{
	return tide_agent_batch_put_from(conn_of(b), keys, bufs, lens, n, repl, rcs);
}

static int
be_put_parts(struct store_backend *b, const char *const *keys, const struct tide_store_part *parts,
	     const size_t *nparts, size_t n, const struct tide_store_rc *repl, unsigned flags,
	     int *rcs)
{
	return tide_agent_batch_put_parts(conn_of(b), keys, parts, nparts, n, repl, flags, rcs);
}

static int64_t
be_get_into(struct store_backend *b, const char *key, void *buf, size_t len)
{
	return tide_agent_get_into(conn_of(b), key, buf, len);
}

/*
 * The agent answers sizes and reads, not both in one request: the size, then a
 * read into a block of that size. Objects are write-once, but a key may be
 * removed and put again with another size between the two requests, so the
 * pair is tried at most 3 times (-EAGAIN after that).
 */
static int
be_get_with(struct store_backend *b, const char *key, tide_store_alloc_fn alloc,
	    tide_store_release_fn release, void *arg, void **out, size_t *len)
{
	struct tide_agent_conn *a = conn_of(b);

	for (int tries = 0; tries < 3; tries++) {
		int64_t size = tide_agent_get_size(a, key), got;
		void *buf;

		if (size < 0)
			return (int)size;
		buf = alloc(arg, (size_t)size);
		if (buf == NULL)
			return -ENOMEM;
		got = tide_agent_get_into(a, key, buf, (size_t)size);
		if (got >= 0) {
			*out = buf;
			*len = (size_t)got;
			return 0;
		}
		if (release != NULL)
			release(arg, buf);
		if (got != -ENOBUFS)
			return (int)got;
	}
	return -EAGAIN;
}

static int64_t
be_get_size(struct store_backend *b, const char *key)
{
	return tide_agent_get_size(conn_of(b), key);
}

static int
be_batch_get_into(struct store_backend *b, const char *const *keys, void *const *bufs,
		  const size_t *lens, size_t n, int64_t *sizes)
{
	return tide_agent_batch_get_into(conn_of(b), keys, bufs, lens, n, sizes);
}

static int
be_get_replicas(struct store_backend *b, const char *const *keys, size_t n,
		struct tide_store_replicas **out)
{
	return tide_agent_batch_get_replicas(conn_of(b), keys, n, out);
}

static int
be_get_parts(struct store_backend *b, const char *const *keys, const struct tide_store_part *parts,
	     const size_t *nparts, size_t n, int64_t *sizes)
{
	return tide_agent_batch_get_parts(conn_of(b), keys, parts, nparts, n, sizes);
}

static int
be_get_into_ranges(struct store_backend *b, const char *const *keys, size_t nkeys,
		   struct tide_store_frag *frags, size_t nfrags)
{
	return tide_agent_get_into_ranges(conn_of(b), keys, nkeys, frags, nfrags);
}

static int
be_exist(struct store_backend *b, const char *key)
{
	return tide_agent_is_exist(conn_of(b), key);
}

static int
be_batch_exist(struct store_backend *b, const char *const *keys, size_t n, int *out)
{
	return tide_agent_batch_is_exist(conn_of(b), keys, n, out);
}

static int
be_remove(struct store_backend *b, const char *key, bool force)
{
	return tide_agent_remove(conn_of(b), key, force);
}

static int
be_batch_remove(struct store_backend *b, const char *const *keys, size_t n, bool force, int *rcs)
{
	return tide_agent_batch_remove(conn_of(b), keys, n, force, rcs);
}

static int64_t
be_remove_all(struct store_backend *b, bool force)
{
	return tide_agent_remove_all(conn_of(b), force);
}

static int64_t
be_replica_clear(struct store_backend *b, const char *const *keys, size_t n,
		 const char *segment_name, int *cleared)
{
	/* The agent makes the call: it is the writer the master knows for our objects. */
	return tide_agent_batch_replica_clear(conn_of(b), keys, n, segment_name, cleared);
}

static int64_t
be_remove_by_regex(struct store_backend *b, const char *pattern, bool force)
{
	return tide_agent_remove_by_regex(conn_of(b), pattern, force);
}

static int
be_local_buffer(struct store_backend *b, void **base, size_t *len)
{
	return tide_agent_local_buffer(conn_of(b), base, len);
}

static int
be_map_buffer(struct store_backend *b, size_t len, void **out)
{
	return tide_agent_map_buffer(conn_of(b), len, out);
}

static int
be_unmap_buffer(struct store_backend *b, void *ptr)
{
	return tide_agent_unmap_buffer(conn_of(b), ptr);
}

static int
be_health_check(struct store_backend *b)
{
	return tide_agent_health_check(conn_of(b));
}

static const char *
be_endpoint(const struct store_backend *b)
{
	return tide_agent_endpoint(store_backend_of(b, const struct tide_agent_conn, be));
}

static const char *
be_protocol(const struct store_backend *b)
{
	return tide_agent_protocol(store_backend_of(b, const struct tide_agent_conn, be));
}

/* The agent maps the caller's regions itself: registered buffers need nothing here
 * (register_memory NULL), memory outside every region is bounced (plan()). */
static int
be_put_sess_start(struct store_backend *b, const char *const *keys, const size_t *sizes, size_t n,
		  const struct tide_store_rc *repl, int *rcs)
{
	return agent_put_sess_start(conn_of(b), keys, sizes, n, repl, rcs);
}

static int
be_sess_ranges(struct store_backend *b, bool put, const char *const *keys,
	       const struct tide_store_part *parts, const uint64_t *offs, const size_t *nparts,
	       size_t n, int64_t *out)
{
	return agent_sess_ranges(conn_of(b), put, keys, parts, offs, nparts, n, out);
}

static int
be_put_sess_end(struct store_backend *b, const char *const *keys, size_t n, bool revoke, int *rcs)
{
	return agent_sess_keys(conn_of(b), revoke ? AGENT_SESS_PUT_REVOKE : AGENT_SESS_PUT_END,
			       keys, n, rcs);
}

static int
be_get_sess_start(struct store_backend *b, const char *const *keys, size_t n, int *rcs)
{
	return agent_sess_keys(conn_of(b), AGENT_SESS_GET_START, keys, n, rcs);
}

static int
be_get_sess_end(struct store_backend *b, const char *const *keys, size_t n)
{
	return agent_sess_keys(conn_of(b), AGENT_SESS_GET_END, keys, n, NULL);
}

const struct store_backend_ops store_agent_ops = {
	.name = "agent",
	.attached = true,
	.put = be_put,
	.batch_put = be_batch_put,
	.put_parts = be_put_parts,
	.get_into = be_get_into,
	.get_with = be_get_with,
	.get_size = be_get_size,
	.batch_get_into = be_batch_get_into,
	.get_into_ranges = be_get_into_ranges,
	.get_parts = be_get_parts,
	.get_replicas = be_get_replicas,
	.put_sess_start = be_put_sess_start,
	.sess_ranges = be_sess_ranges,
	.put_sess_end = be_put_sess_end,
	.get_sess_start = be_get_sess_start,
	.get_sess_end = be_get_sess_end,
	.exist = be_exist,
	.batch_exist = be_batch_exist,
	.remove = be_remove,
	.batch_remove = be_batch_remove,
	.remove_all = be_remove_all,
	.remove_by_regex = be_remove_by_regex,
	.replica_clear = be_replica_clear,
	.local_buffer = be_local_buffer,
	.map_buffer = be_map_buffer,
	.unmap_buffer = be_unmap_buffer,
	.health_check = be_health_check,
	.endpoint = be_endpoint,
	.protocol = be_protocol,
};
