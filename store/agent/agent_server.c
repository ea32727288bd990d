/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-node agent server (tide_agent_server.h). One thread accepts; one thread
 * per client connection reads a request, runs it on the embedded store and
 * answers. A node runs about ten clients (Miles: eight trainers, the rollout
 * manager, the driver), so a thread each is cheap and lets a slow transfer of
 * one client never delay another's.
 *
 * Everything a client sends is checked: the header by agent_recv(), every
 * length by the reader, every (region, offset, length) against the region
 * the client mapped. A malformed request is logged with the client's pid and
 * closes that connection; nothing else is affected.
 *
 * Hostile clients (what keeps one from hurting the agent or the others):
 *  - who: the socket is 0660 (owner and socket group), and each connection's
 *    kernel credentials (SO_PEERCRED) are checked against the same rule, so
 *    a socket chmod'ed by hand or passed on does not widen access;
 *  - shared memory: a region is accepted only as a memfd sealed against
 *    shrinking (F_SEAL_SHRINK) and on tmpfs (not hugetlbfs, whose pages can
 *    run out). A file the client could truncate under our mapping would turn
 *    the next transfer into or out of it into SIGBUS, killing the agent and
 *    every object in its segment;
 *  - descriptors: every descriptor a request carries is closed on every
 *    path, the refusals included (one per request at most is kept, by MAP,
 *    and only as the mapping it becomes).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "agent_proto.h"
#include "store_sess.h"
#include "tide_agent_server.h"
#include "tide_log.h"

struct srv_region {
	uint8_t *base;
	size_t len;
	bool live;
};

struct srv_client {
	struct tide_agent_server *srv;
	int sock;
	uint32_t pid; /* from SO_PEERCRED (the hello's own claim when unknown) */
	bool hello;
	pthread_t th;
	bool done; /* thread finished; joined by the reaper */
	struct srv_region *regions;
	size_t nregions;
	/* Keys of the sessions this connection started (store_sess.h as a key set); the
	 * client thread's alone. Revoked / ended when the connection goes. */
	struct store_sess_tab own_put, own_get;
	struct srv_client *next;
};

struct tide_agent_server {
	struct tide_store *store;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lsock;
	pthread_t accept_th;
	pthread_mutex_t lock; /* clients list, stats, stop */
	struct srv_client *clients;
	bool stop;
	struct tide_agent_stats st;
	uid_t uid; /* the agent's effective uid: its peers with it are let in */
	gid_t gid; /* the socket's group: peers in it are let in */
};

/* --------------------------------------------------------------- regions */

static void
region_unmap(struct tide_agent_server *srv, struct srv_region *r)
{
	if (!r->live)
		return;
	tide_store_unregister_buffer(srv->store, r->base);
	munmap(r->base, r->len);
	r->live = false;
	pthread_mutex_lock(&srv->lock);
	srv->st.regions_now--;
	pthread_mutex_unlock(&srv->lock);
}

/* Whether fd may back a region: a memfd on tmpfs sealed against shrinking
 * (0), or the -errno to answer. Logs why not. */
static int
region_fd_ok(const struct srv_client *c, int fd)
{
	struct statfs fs;
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		TIDE_LOG(WARN,
			 "client pid %u: MAP of a region %s; refused (a shrink under the "
			 "agent's mapping would crash it: memfd_create(MFD_ALLOW_SEALING), then "
			 "F_ADD_SEALS F_SEAL_SHRINK)",
			 c->pid,
			 seals < 0 ? "that is not a memfd" : "not sealed against shrinking");
		return -EPERM;
	}
	if (fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
		TIDE_LOG(WARN, "client pid %u: MAP of a region not on tmpfs (hugetlbfs?); refused",
			 c->pid);
		return -EPERM;
	}
	return 0;
}

/* MAP: owns fd (a descriptor or -1) and closes it on every path. */
/* A reply of a call's code r, then one 32-bit result per key (codes). */
static void
reply_i32s(struct agent_wbuf *w, int r, const int *v, size_t n)
{
	agent_w_u32(w, (uint32_t)r);
	for (size_t i = 0; i < n; i++)
		agent_w_u32(w, (uint32_t)v[i]);
}

/* A reply of a call's code r, then one 64-bit result per key (sizes or codes). */
static void
reply_i64s(struct agent_wbuf *w, int r, const int64_t *v, size_t n)
{
	agent_w_u32(w, (uint32_t)r);
	for (size_t i = 0; i < n; i++)
		agent_w_u64(w, (uint64_t)v[i]);
}

static int
op_map(struct srv_client *c, struct agent_rbuf *rd, int fd, struct agent_wbuf *w)
{
	uint64_t len = agent_r_u64(rd);
	struct stat sb;
	size_t i = 0;
	int rc = 0;
	void *p;

	if (rd->bad || fd < 0) {
		if (fd >= 0)
			close(fd);
		return -EPROTO;
	}
	rc = region_fd_ok(c, fd);
	if (rc != 0)
		goto reply;
	/* The region must be as long as the client says; sealed, it stays so. */
	if (len == 0 || len > SIZE_MAX / 2 || fstat(fd, &sb) != 0 || (uint64_t)sb.st_size < len) {
		rc = -EINVAL;
		goto reply;
	}
	for (i = 0; i < c->nregions && c->regions[i].live; i++)
		;
	if (i == c->nregions) {
		if (c->nregions >= AGENT_MAX_REGIONS) {
			rc = -EMFILE;
			goto reply;
		}
		struct srv_region *nr = realloc(c->regions, (c->nregions + 1) * sizeof(*nr));
		if (nr == NULL) {
			rc = -ENOMEM;
			goto reply;
		}
		c->regions = nr;
		c->regions[c->nregions++].live = false;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto reply;
	}
	rc = tide_store_register_buffer(c->srv->store, p, len);
	if (rc != 0) {
		munmap(p, len);
		goto reply;
	}
	c->regions[i] = (struct srv_region){p, len, true};
	pthread_mutex_lock(&c->srv->lock);
	c->srv->st.regions_now++;
	pthread_mutex_unlock(&c->srv->lock);
reply:
	close(fd);
	agent_w_u32(w, (uint32_t)rc);
	agent_w_u32(w, rc == 0 ? (uint32_t)i : UINT32_MAX);
	return 0;
}

static int
op_unmap(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	uint32_t id = agent_r_u32(rd);

	if (rd->bad)
		return -EPROTO;
	if (id >= c->nregions || !c->regions[id].live) {
		agent_w_u32(w, (uint32_t)-ENOENT);
		return 0;
	}
	region_unmap(c->srv, &c->regions[id]);
	agent_w_u32(w, 0);
	return 0;
}

/* Translate a location; false when it is outside what the client mapped. */
static bool
resolve(const struct srv_client *c, const struct agent_loc *l, void **out)
{
	const struct srv_region *r;

	if (l->len == 0) {
		*out = NULL;
		if (l->region == UINT32_MAX)
			return true;
	}
	if (l->region >= c->nregions)
		return false;
	r = &c->regions[l->region];
	if (!r->live || l->off > r->len || l->len > r->len - l->off)
		return false;
	*out = r->base + l->off;
	return true;
}

/* ---------------------------------------------------------------- key ops */

/* n keys (each read into keys[i]); false when malformed. */
static char **
read_keys(struct agent_rbuf *rd, size_t n)
{
	char **keys = calloc(n ? n : 1, sizeof(char *));
	size_t i;

	if (keys == NULL) {
		rd->bad = true;
		return NULL;
	}
	for (i = 0; i < n && !rd->bad; i++)
		keys[i] = agent_r_str(rd, AGENT_MAX_KEY);
	return keys;
}

static void
free_keys(char **keys, size_t n)
{
	size_t i;

	for (i = 0; keys && i < n; i++)
		free(keys[i]);
	free(keys);
}

/* The n {key, location} pairs of a put or get, resolved to the client's memory. */
struct key_locs {
	char **keys;
	void **bufs;
	size_t *lens;
};

/* Read them; false (rd->bad set) when malformed, out of the client's regions
 * or out of memory. Free with key_locs_free() either way. */
static bool
key_locs_read(const struct srv_client *c, struct agent_rbuf *rd, size_t n, struct key_locs *kl)
{
	kl->keys = calloc(n, sizeof(*kl->keys));
	kl->bufs = calloc(n, sizeof(*kl->bufs));
	kl->lens = calloc(n, sizeof(*kl->lens));
	if (kl->keys == NULL || kl->bufs == NULL || kl->lens == NULL)
		rd->bad = true;
	for (size_t i = 0; i < n && !rd->bad; i++) {
		struct agent_loc l;

		kl->keys[i] = agent_r_str(rd, AGENT_MAX_KEY);
		agent_r_loc(rd, &l);
		if (!rd->bad && !resolve(c, &l, &kl->bufs[i]))
			rd->bad = true;
		kl->lens[i] = l.len;
	}
	return !rd->bad;
}

static void
key_locs_free(struct key_locs *kl, size_t n)
{
	free_keys(kl->keys, n);
	free(kl->bufs);
	free(kl->lens);
}

static int
op_put(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	struct agent_rc arc;
	struct tide_store_rc rc;
	uint32_t n;
	size_t i;
	int err = -EPROTO, r;

	/* The key count comes first: the config carries one group id per key. */
	n = agent_r_u32(rd);
	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH)
		return -EPROTO;
	agent_r_rc(rd, &arc, n);
	struct key_locs kl;
	int *rcs = calloc(n, sizeof(*rcs));
	if (!key_locs_read(c, rd, n, &kl) || rcs == NULL)
		goto out;
	rc = agent_rc_view(&arc);
	if (n == 1) {
		rcs[0] = tide_store_put(c->srv->store, kl.keys[0], kl.bufs[0], kl.lens[0], &rc);
		r = rcs[0];
	} else {
		r = tide_store_batch_put_from(c->srv->store, (const char *const *)kl.keys,
					      (const void *const *)kl.bufs, kl.lens, n, &rc, rcs);
		if (r == -EINVAL) /* refused as a whole: rcs untouched */
			for (i = 0; i < n; i++)
				rcs[i] = rcs[i] ? rcs[i] : -EINVAL;
	}
	reply_i32s(w, r, rcs, n);
	err = 0;
out:
	agent_rc_free(&arc, n);
	key_locs_free(&kl, n);
	free(rcs);
	return err;
}

/* A location on the wire: u32 region, u64 offset, u64 length. */
#define LOC_BYTES 20u

/* The n {key, pieces} entries of a put or get in pieces, resolved to the client's memory. */
struct key_parts {
	char **keys;
	size_t *nparts;
	struct tide_store_part *parts;
	uint64_t *offs; /* with_off: each piece's offset in its object; else NULL */
};

/*
 * Read n x {str key, u32 np, np x loc}; false (rd->bad set) when malformed, out
 * of the client's regions or out of memory. Pieces are bounded by
 * AGENT_MAX_PARTS and by the body they came in (LOC_BYTES each there), so the
 * array grows only as far as the body carries it. Free with key_parts_free()
 * either way.
 */
static bool
key_parts_read(const struct srv_client *c, struct agent_rbuf *rd, size_t n, struct key_parts *kp,
	       bool with_off)
{
	const size_t pbytes = LOC_BYTES + (with_off ? 8u : 0u);
	struct tide_store_part *np_;
	size_t i, total = 0, cap = 0;

	kp->parts = NULL;
	kp->offs = NULL;
	kp->keys = calloc(n, sizeof(*kp->keys));
	kp->nparts = calloc(n, sizeof(*kp->nparts));
	if (kp->keys == NULL || kp->nparts == NULL)
		rd->bad = true;
	for (i = 0; i < n && !rd->bad; i++) {
		uint32_t np;

		kp->keys[i] = agent_r_str(rd, AGENT_MAX_KEY);
		np = agent_r_u32(rd);
		if (rd->bad || np > AGENT_MAX_PARTS - total || np > (rd->len - rd->pos) / pbytes) {
			rd->bad = true;
			break;
		}
		if (total + np > cap) {
			cap = total + np > 2 * cap ? total + np : 2 * cap;
			np_ = realloc(kp->parts, cap * sizeof(*kp->parts));
			if (np_ == NULL) {
				rd->bad = true;
				break;
			}
			kp->parts = np_;
			if (with_off) {
				uint64_t *no = realloc(kp->offs, cap * sizeof(*kp->offs));

				if (no == NULL) {
					rd->bad = true;
					break;
				}
				kp->offs = no;
			}
		}
		for (uint32_t k = 0; k < np && !rd->bad; k++) {
			struct agent_loc l;
			void *p = NULL;

			agent_r_loc(rd, &l);
			if (with_off)
				kp->offs[total + k] = agent_r_u64(rd);
			if (!rd->bad && !resolve(c, &l, &p))
				rd->bad = true;
			kp->parts[total + k] = (struct tide_store_part){p, l.len};
		}
		kp->nparts[i] = np;
		total += np;
	}
	return !rd->bad;
}

static void
key_parts_free(struct key_parts *kp, size_t n)
{
	free_keys(kp->keys, n);
	free(kp->nparts);
	free(kp->parts);
	free(kp->offs);
}

/* A put of values in pieces (tide_store_batch_put_parts()): every piece is
 * resolved to the client's memory and the store writes each where it is. */
static int
op_put_parts(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	struct key_parts kp = {0};
	struct agent_rc arc;
	struct tide_store_rc rc;
	uint32_t n, flags;
	int err = -EPROTO, r;

	n = agent_r_u32(rd);
	flags = agent_r_u32(rd);
	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH)
		return -EPROTO;
	agent_r_rc(rd, &arc, n);
	int *rcs = calloc(n, sizeof(*rcs));
	if (rcs == NULL || !key_parts_read(c, rd, n, &kp, false))
		goto out;
	/* The soft pin comes last, where an agent without it never looks. */
	if ((flags & AGENT_PUT_SOFT_PIN) != 0) {
		agent_r_soft_pin(rd, &arc);
		flags &= ~AGENT_PUT_SOFT_PIN;
	}
	if (rd->bad)
		goto out;
	rc = agent_rc_view(&arc);
	/* rcs stays zero when the call failed as a whole: the client reads only rc then. */
	r = tide_store_batch_put_parts(c->srv->store, (const char *const *)kp.keys, kp.parts,
				       kp.nparts, n, &rc, flags, rcs);
	reply_i32s(w, r, rcs, n);
	err = 0;
out:
	agent_rc_free(&arc, n);
	key_parts_free(&kp, n);
	free(rcs);
	return err;
}

/* Objects into pieces (tide_store_batch_get_into_parts()): the store reads each key
 * straight into the client's pieces. */
static int
op_get_parts(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	struct key_parts kp = {0};
	uint32_t n = agent_r_u32(rd);
	size_t i;
	int err = -EPROTO, r;

	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH)
		return -EPROTO;
	int64_t *sizes = calloc(n, sizeof(*sizes));
	if (sizes == NULL || !key_parts_read(c, rd, n, &kp, false))
		goto out;
	for (i = 0; i < n; i++)
		sizes[i] = -EINVAL;
	r = tide_store_batch_get_into_parts(c->srv->store, (const char *const *)kp.keys, kp.parts,
					    kp.nparts, n, sizes);
	reply_i64s(w, r, sizes, n);
	err = 0;
out:
	key_parts_free(&kp, n);
	free(sizes);
	return err;
}

/* Where objects are (tide_store_batch_get_replicas()): the store's block, encoded. */
static int
op_replicas(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	struct tide_store_replicas *res = NULL;
	uint32_t n = agent_r_u32(rd);
	char **keys;
	size_t i, k;
	int r;

	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH)
		return -EPROTO;
	keys = read_keys(rd, n);
	if (rd->bad) {
		free_keys(keys, n);
		return -EPROTO;
	}
	r = tide_store_batch_get_replicas(c->srv->store, (const char *const *)keys, n, &res);
	agent_w_u32(w, (uint32_t)r);
	for (i = 0; r == 0 && i < n; i++) {
		agent_w_u32(w, (uint32_t)res[i].err);
		agent_w_u32(w, (uint32_t)res[i].n);
		for (k = 0; k < res[i].n; k++) {
			const struct tide_store_replica *p = &res[i].v[k];

			agent_w_u64(w, p->id);
			agent_w_u8(w, (uint8_t)p->type);
			agent_w_u32(w, (uint32_t)p->status);
			agent_w_u64(w, p->size);
			agent_w_u64(w, p->buffer_address);
			agent_w_str(w, p->transport_endpoint);
			agent_w_str(w, p->protocol);
			agent_w_str(w, p->file_path);
		}
	}
	/* Bounded by the keys (AGENT_MAX_BATCH) but not by their replicas: an answer that
	 * does not fit one reply is refused as a whole, not cut. */
	if (w->err == 0 && w->len > AGENT_MAX_BODY) {
		w->len = 0;
		agent_w_u32(w, (uint32_t)-E2BIG);
	}
	tide_store_replicas_free(res);
	free_keys(keys, n);
	return 0;
}

static int
op_get(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	uint32_t n = agent_r_u32(rd);
	size_t i;
	int err = -EPROTO, r;

	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH)
		return -EPROTO;
	struct key_locs kl;
	int64_t *sizes = calloc(n, sizeof(*sizes));
	if (!key_locs_read(c, rd, n, &kl) || sizes == NULL)
		goto out;
	if (n == 1) {
		sizes[0] = tide_store_get_into(c->srv->store, kl.keys[0], kl.bufs[0], kl.lens[0]);
		r = sizes[0] < 0 ? (int)sizes[0] : 0;
	} else {
		for (i = 0; i < n; i++)
			sizes[i] = -EINVAL;
		r = tide_store_batch_get_into(c->srv->store, (const char *const *)kl.keys,
					      (void *const *)kl.bufs, kl.lens, n, sizes);
	}
	reply_i64s(w, r, sizes, n);
	err = 0;
out:
	key_locs_free(&kl, n);
	free(sizes);
	return err;
}

static int
op_ranges(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	uint32_t nk = agent_r_u32(rd), nf = 0;
	struct tide_store_frag *f = NULL;
	char **keys = NULL;
	size_t i;
	int err = -EPROTO, r;

	if (rd->bad || nk == 0 || nk > AGENT_MAX_BATCH)
		return -EPROTO;
	keys = read_keys(rd, nk);
	nf = agent_r_u32(rd);
	if (rd->bad || nf == 0 || nf > AGENT_MAX_BATCH)
		goto out;
	f = calloc(nf, sizeof(*f));
	if (f == NULL)
		goto out;
	for (i = 0; i < nf && !rd->bad; i++) {
		struct agent_loc l;

		f[i].key = agent_r_u64(rd);
		f[i].src_off = agent_r_u64(rd);
		agent_r_loc(rd, &l);
		if (!rd->bad && !resolve(c, &l, &f[i].dst))
			rd->bad = true;
		f[i].len = l.len;
		f[i].result = -EINVAL;
	}
	if (rd->bad)
		goto out;
	r = tide_store_get_into_ranges(c->srv->store, (const char *const *)keys, nk, f, nf);
	agent_w_u32(w, (uint32_t)r);
	for (i = 0; i < nf; i++)
		agent_w_u64(w, (uint64_t)f[i].result);
	err = 0;
out:
	free_keys(keys, nk);
	free(f);
	return err;
}

static int
op_keys(struct srv_client *c, uint16_t op, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	bool force = op == AGENT_REMOVE ? agent_r_u8(rd) != 0 : false;
	uint32_t n = agent_r_u32(rd);
	int r, *v;

	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH)
		return -EPROTO;
	char **keys = read_keys(rd, n);
	v = calloc(n, sizeof(*v));
	if (rd->bad || v == NULL) {
		free_keys(keys, n);
		free(v);
		return -EPROTO;
	}
	if (op == AGENT_EXIST)
		r = tide_store_batch_is_exist(c->srv->store, (const char *const *)keys, n, v);
	else if (n == 1)
		r = v[0] = tide_store_remove(c->srv->store, keys[0], force);
	else
		r = tide_store_batch_remove(c->srv->store, (const char *const *)keys, n, force, v);
	reply_i32s(w, r, v, n);
	free_keys(keys, n);
	free(v);
	return 0;
}

/* AGENT_REPLICA_CLEAR: the client's keys to the store's batch_replica_clear. */
static int
op_replica_clear(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	char *seg = agent_r_str(rd, AGENT_MAX_KEY);
	uint32_t n = agent_r_u32(rd);
	char **keys;
	int64_t r;
	int *v;

	if (rd->bad || n > AGENT_MAX_BATCH) {
		free(seg);
		return -EPROTO;
	}
	keys = read_keys(rd, n);
	v = calloc(n ? n : 1, sizeof(*v));
	if (rd->bad || v == NULL) {
		free_keys(keys, n);
		free(v);
		free(seg);
		return -EPROTO;
	}
	r = tide_store_batch_replica_clear(c->srv->store, (const char *const *)keys, n, seg, v);
	/* At most AGENT_MAX_BATCH keys cleared: the count fits the i32. */
	reply_i32s(w, (int)r, v, n);
	free_keys(keys, n);
	free(v);
	free(seg);
	return 0;
}

static int
op_scalar(struct srv_client *c, uint16_t op, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	struct tide_store *s = c->srv->store;
	bool force = false;
	char *str = NULL;
	int64_t v;

	if (op == AGENT_REMOVE_ALL || op == AGENT_REMOVE_REGEX)
		force = agent_r_u8(rd) != 0;
	if (op == AGENT_SIZE || op == AGENT_REMOVE_REGEX)
		str = agent_r_str(rd, AGENT_MAX_KEY);
	if (rd->bad) {
		free(str);
		return -EPROTO;
	}
	switch (op) {
	case AGENT_SIZE:
		v = tide_store_get_size(s, str);
		break;
	case AGENT_REMOVE_ALL:
		v = tide_store_remove_all(s, force);
		break;
	case AGENT_REMOVE_REGEX:
		v = tide_store_remove_by_regex(s, str, force);
		break;
	default: /* AGENT_HEALTH */
		v = tide_store_health_check(s);
		break;
	}
	free(str);
	agent_w_u64(w, (uint64_t)v);
	return 0;
}

static int
op_hello(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	uint32_t ver = agent_r_u32(rd), pid = agent_r_u32(rd);

	if (rd->bad)
		return -EPROTO;
	if (c->pid == 0)
		c->pid = pid; /* the kernel's word is kept when there is one */
	if (ver != AGENT_VERSION) {
		agent_w_u32(w, (uint32_t)-EPROTO);
		agent_w_str(w, "");
		agent_w_str(w, "");
		return 0;
	}
	c->hello = true;
	agent_w_u32(w, 0);
	agent_w_str(w, tide_store_endpoint(c->srv->store));
	agent_w_str(w, tide_store_protocol(c->srv->store));
	return 0;
}

/* ---------------------------------------------------------------- sessions */

/* Session requests have no op of their own here: AGENT_SESS_KEYS carries the what. */
static struct store_sess_tab *
own_tab(struct srv_client *c, bool put)
{
	return put ? &c->own_put : &c->own_get;
}

/* Put sessions start in the store; those that started are this connection's. */
static int
op_put_sess_start(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	struct agent_rc arc;
	struct tide_store_rc rc;
	uint32_t n, flags;
	size_t i;
	int err = -EPROTO, r;

	n = agent_r_u32(rd);
	flags = agent_r_u32(rd);
	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH)
		return -EPROTO;
	agent_r_rc(rd, &arc, n);
	char **keys = calloc(n, sizeof(*keys));
	size_t *sizes = calloc(n, sizeof(*sizes));
	int *rcs = calloc(n, sizeof(*rcs));
	if (keys == NULL || sizes == NULL || rcs == NULL)
		goto out;
	for (i = 0; i < n && !rd->bad; i++) {
		keys[i] = agent_r_str(rd, AGENT_MAX_KEY);
		sizes[i] = (size_t)agent_r_u64(rd);
	}
	if ((flags & AGENT_PUT_SOFT_PIN) != 0)
		agent_r_soft_pin(rd, &arc);
	if (rd->bad || (flags & ~AGENT_PUT_SOFT_PIN) != 0)
		goto out;
	rc = agent_rc_view(&arc);
	r = tide_store_batch_put_session_start(c->srv->store, (const char *const *)keys, sizes, n,
					       &rc, rcs);
	for (i = 0; r == 0 && i < n; i++) {
		int o;

		if (rcs[i] != 0)
			continue;
		o = store_sess_put(&c->own_put, keys[i], 0, NULL, 0, 0);
		if (o != 0) {
			/* A session nobody could end: give it back at once. */
			int rr = 0;

			(void)tide_store_batch_put_session_revoke(
				c->srv->store, (const char *const *)&keys[i], 1, &rr);
			rcs[i] = o == -ENOSPC ? -EMFILE : o;
		}
	}
	reply_i32s(w, r, rcs, n);
	err = 0;
out:
	agent_rc_free(&arc, n);
	free_keys(keys, n);
	free(sizes);
	free(rcs);
	return err;
}

/*
 * Ranged writes or reads: the keys this connection holds a session of go to the
 * store (pieces resolved to the client's memory, as for the puts in pieces); the
 * others are -ESRCH without it.
 */
static int
op_sess_ranges(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	struct key_parts kp = {0};
	uint8_t dir = agent_r_u8(rd);
	bool put = dir == AGENT_SESS_PUT;
	uint32_t n = agent_r_u32(rd);
	size_t i, k, m = 0, mp = 0;
	int err = -EPROTO, r = 0;

	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH ||
	    (dir != AGENT_SESS_PUT && dir != AGENT_SESS_GET))
		return -EPROTO;
	int64_t *out = calloc(n, sizeof(*out));
	int64_t *sout = calloc(n, sizeof(*sout));
	const char **skeys = calloc(n, sizeof(*skeys));
	size_t *snp = calloc(n, sizeof(*snp)), *sidx = calloc(n, sizeof(*sidx));
	if (out == NULL || sout == NULL || skeys == NULL || snp == NULL || sidx == NULL ||
	    !key_parts_read(c, rd, n, &kp, true))
		goto out;
	/* Owned keys first, their pieces moved down in place (they keep their order). */
	for (i = 0, k = 0; i < n; k += kp.nparts[i], i++) {
		if (!store_sess_has(own_tab(c, put), kp.keys[i])) {
			out[i] = -ESRCH;
			continue;
		}
		for (size_t j = k; j < k + kp.nparts[i]; j++, mp++) {
			kp.parts[mp] = kp.parts[j];
			kp.offs[mp] = kp.offs[j];
		}
		skeys[m] = kp.keys[i];
		snp[m] = kp.nparts[i];
		sidx[m++] = i;
	}
	if (m > 0) {
		r = put ? tide_store_batch_put_ranges(c->srv->store, skeys, kp.parts, kp.offs, snp,
						      m, sout)
			: tide_store_batch_get_ranges(c->srv->store, skeys, kp.parts, kp.offs, snp,
						      m, sout);
		for (k = 0; k < m; k++)
			out[sidx[k]] = r == 0 ? sout[k] : r;
	}
	reply_i64s(w, r, out, n);
	err = 0;
out:
	key_parts_free(&kp, n);
	free(out);
	free(sout);
	free(skeys);
	free(snp);
	free(sidx);
	return err;
}

/* End, revoke or get end of this connection's keys (others: -ESRCH), or get start. */
static int
sess_keys_run(struct srv_client *c, enum agent_sess_what what, char **keys, size_t n, int *rcs)
{
	struct tide_store *s = c->srv->store;
	bool put = what == AGENT_SESS_PUT_END || what == AGENT_SESS_PUT_REVOKE;
	size_t i, m = 0;
	int r = 0;

	if (what == AGENT_SESS_GET_START) {
		r = tide_store_batch_get_session_start(s, (const char *const *)keys, n, rcs);
		for (i = 0; r == 0 && i < n; i++) {
			if (rcs[i] == 0 &&
			    store_sess_put(&c->own_get, keys[i], 0, NULL, 0, 0) != 0) {
				(void)tide_store_batch_get_session_end(
					s, (const char *const *)&keys[i], 1);
				rcs[i] = -EMFILE;
			} else if (rcs[i] != 0) {
				store_sess_unlink(&c->own_get, keys[i]);
			}
		}
		return r;
	}
	const char **sk = calloc(n, sizeof(*sk));
	size_t *sidx = calloc(n, sizeof(*sidx));
	int *src = calloc(n, sizeof(*src));
	if (sk == NULL || sidx == NULL || src == NULL) {
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		rcs[i] = put ? -ESRCH : 0;
		if (store_sess_has(own_tab(c, put), keys[i])) {
			sk[m] = keys[i];
			sidx[m++] = i;
		}
	}
	if (m > 0) {
		if (put)
			r = what == AGENT_SESS_PUT_END
				    ? tide_store_batch_put_session_end(s, sk, m, src)
				    : tide_store_batch_put_session_revoke(s, sk, m, src);
		else
			r = tide_store_batch_get_session_end(s, sk, m);
		for (i = 0; r == 0 && i < m; i++) {
			if (put)
				rcs[sidx[i]] = src[i];
			/* Over unless another end of ours is finishing it (-EBUSY). */
			if (!put || src[i] != -EBUSY)
				store_sess_unlink(own_tab(c, put), sk[i]);
		}
	}
out:
	free(sk);
	free(sidx);
	free(src);
	return r;
}

static int
op_sess_keys(struct srv_client *c, struct agent_rbuf *rd, struct agent_wbuf *w)
{
	uint8_t what = agent_r_u8(rd);
	uint32_t n = agent_r_u32(rd);
	int r, *v;

	if (rd->bad || n == 0 || n > AGENT_MAX_BATCH || what > AGENT_SESS_GET_END)
		return -EPROTO;
	char **keys = read_keys(rd, n);
	v = calloc(n, sizeof(*v));
	if (rd->bad || v == NULL) {
		free_keys(keys, n);
		free(v);
		return -EPROTO;
	}
	r = sess_keys_run(c, (enum agent_sess_what)what, keys, n, v);
	reply_i32s(w, r, v, n);
	free_keys(keys, n);
	free(v);
	return 0;
}

/* The connection is gone: what it reserved goes back, what it cached is forgotten. */
static void
sess_drop_all(struct srv_client *c)
{
	for (int put = 1; put >= 0; put--) {
		char **keys = NULL;
		size_t n = store_sess_keys(own_tab(c, put), &keys);

		for (size_t i = 0; i < n; i += AGENT_MAX_BATCH) {
			size_t m = n - i < AGENT_MAX_BATCH ? n - i : AGENT_MAX_BATCH;
			int *rcs = calloc(m, sizeof(*rcs));

			if (rcs != NULL)
				(void)sess_keys_run(
					c, put ? AGENT_SESS_PUT_REVOKE : AGENT_SESS_GET_END,
					keys + i, m, rcs);
			free(rcs);
		}
		if (n > 0)
			TIDE_LOG(INFO, "client pid %u detached with %zu %s sessions open: %s",
				 c->pid, n, put ? "put" : "get", put ? "revoked" : "ended");
		free(keys);
	}
}

/* ------------------------------------------------------------- connection */

/* Run one request. Owns fd (-1 or the descriptor the request carried): only
 * a MAP after hello takes it further (and closes it too); every other
 * request, refused or not, has it closed here first. */
static int
dispatch(struct srv_client *c, const struct agent_hdr *h, struct agent_rbuf *rd, int fd,
	 struct agent_wbuf *w)
{
	if (h->op == AGENT_MAP && c->hello)
		return op_map(c, rd, fd, w);
	if (fd >= 0)
		close(fd);
	if (h->op != AGENT_HELLO && !c->hello)
		return -EPROTO; /* hello first */
	switch (h->op) {
	case AGENT_HELLO:
		return op_hello(c, rd, w);
	case AGENT_UNMAP:
		return op_unmap(c, rd, w);
	case AGENT_PUT:
		return op_put(c, rd, w);
	case AGENT_PUT_PARTS:
		return op_put_parts(c, rd, w);
	case AGENT_GET_PARTS:
		return op_get_parts(c, rd, w);
	case AGENT_REPLICAS:
		return op_replicas(c, rd, w);
	case AGENT_PUT_SESS_START:
		return op_put_sess_start(c, rd, w);
	case AGENT_SESS_RANGES:
		return op_sess_ranges(c, rd, w);
	case AGENT_SESS_KEYS:
		return op_sess_keys(c, rd, w);
	case AGENT_REPLICA_CLEAR:
		return op_replica_clear(c, rd, w);
	case AGENT_GET:
		return op_get(c, rd, w);
	case AGENT_RANGES:
		return op_ranges(c, rd, w);
	case AGENT_EXIST:
	case AGENT_REMOVE:
		return op_keys(c, h->op, rd, w);
	case AGENT_SIZE:
	case AGENT_REMOVE_ALL:
	case AGENT_REMOVE_REGEX:
	case AGENT_HEALTH:
		return op_scalar(c, h->op, rd, w);
	default:
		return -EPROTO;
	}
}

static void *
client_main(void *arg)
{
	struct srv_client *c = arg;
	struct tide_agent_server *srv = c->srv;
	bool own = store_sess_init(&c->own_put, TIDE_STORE_SESSIONS_MAX) == 0;
	size_t i;

	if (own && store_sess_init(&c->own_get, TIDE_STORE_SESSIONS_MAX) != 0) {
		store_sess_fini(&c->own_put);
		own = false;
	}
	for (; own;) {
		struct agent_hdr h;
		struct agent_rbuf rd;
		struct agent_wbuf w;
		uint8_t *body = NULL;
		int fd = -1, rc;

		rc = agent_recv(c->sock, &h, &body, &fd);
		if (rc != 0) {
			if (rc != -ECONNRESET)
				TIDE_LOG(WARN, "client pid %u: %s; closing it", c->pid,
					 rc == -EPROTO ? "not an agent protocol header"
						       : strerror(-rc));
			break;
		}
		agent_r_init(&rd, body, h.len);
		agent_w_init(&w);
		rc = dispatch(c, &h, &rd, fd, &w);
		free(body);
		if (rc == 0 && w.err != 0) {
			/* No reply could be built: closing tells the client (which waits
			 * for one without a deadline); skipping it would hang it. */
			TIDE_LOG(ERR, "client pid %u: cannot build the %s reply: %s; closing it",
				 c->pid, agent_op_name(h.op), strerror(-w.err));
			rc = w.err;
		} else if (rc == 0) {
			rc = agent_send(c->sock, h.op, h.seq, w.p, w.len, -1);
		} else if (rc == -EPROTO) {
			TIDE_LOG(WARN, "client pid %u: malformed %s request (%u bytes); closing it",
				 c->pid, agent_op_name(h.op), h.len);
		}
		agent_w_free(&w);
		pthread_mutex_lock(&srv->lock);
		if (rc == -EPROTO)
			srv->st.bad_requests++;
		else
			srv->st.requests++;
		pthread_mutex_unlock(&srv->lock);
		if (rc != 0)
			break;
	}
	if (!own) {
		TIDE_LOG(WARN, "client pid %u: no memory for its sessions; closing it", c->pid);
	} else {
		/* Gone mid-session (exited, crashed, or closed): its reservations would
		 * otherwise wait for the master's put-start discard timeout. */
		sess_drop_all(c);
		store_sess_fini(&c->own_put);
		store_sess_fini(&c->own_get);
	}
	/* The operation in progress (if any) has finished: nothing of ours still
	 * touches the client's memory, so the regions can go. */
	for (i = 0; i < c->nregions; i++)
		region_unmap(srv, &c->regions[i]);
	/* The peer sees EOF now; the descriptor itself is closed by the reaper
	 * (closing it here could race with a stop() shutting it down). */
	shutdown(c->sock, SHUT_RDWR);
	TIDE_LOG(INFO, "client pid %u detached", c->pid);
	pthread_mutex_lock(&srv->lock);
	srv->st.clients_now--;
	c->done = true;
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/* Join and free finished clients (lock held; none of them holds it). */
static void
reap(struct tide_agent_server *srv, bool all)
{
	struct srv_client **pp = &srv->clients, *c;

	while ((c = *pp) != NULL) {
		if (!c->done && !all) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		pthread_mutex_unlock(&srv->lock);
		if (!c->done)
			shutdown(c->sock, SHUT_RDWR);
		pthread_join(c->th, NULL);
		pthread_mutex_lock(&srv->lock);
		close(c->sock);
		free(c->regions);
		free(c);
	}
}

/*
 * Whether the peer on s may attach: the same rule as the socket file's 0660
 * (root, the agent's own user, a member of the socket's group), checked on
 * the kernel's credentials of the connecting process. Sets *pid.
 */
static bool
peer_allowed(const struct tide_agent_server *srv, int s, uint32_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	gid_t groups[256];

	*pid = 0;
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr))
		return false;
	*pid = (uint32_t)cr.pid;
	if (cr.uid == 0 || cr.uid == srv->uid || cr.gid == srv->gid)
		return true;
	/* Supplementary groups (Linux >= 4.13). */
	len = sizeof(groups);
	if (getsockopt(s, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
		return false;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == srv->gid)
			return true;
	return false;
}

static void *
accept_main(void *arg)
{
	struct tide_agent_server *srv = arg;

	for (;;) {
		int s = accept4(srv->lsock, NULL, NULL, SOCK_CLOEXEC);
		struct srv_client *c;
		uint32_t pid;

		if (s < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			pthread_mutex_lock(&srv->lock);
			bool stop = srv->stop;
			pthread_mutex_unlock(&srv->lock);
			if (stop)
				return NULL;
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
				TIDE_LOG(WARN, "agent accept: %s; retrying", strerror(errno));
				usleep(100000);
				continue;
			}
			TIDE_LOG(ERR, "agent accept: %s; no new clients", strerror(errno));
			return NULL;
		}
		if (!peer_allowed(srv, s, &pid)) {
			TIDE_LOG_RATELIMIT(WARN, 10,
					   "agent: pid %u is neither root, the agent's user nor in "
					   "the socket's group %u; refused",
					   pid, (unsigned)srv->gid);
			pthread_mutex_lock(&srv->lock);
			srv->st.refused_peers++;
			pthread_mutex_unlock(&srv->lock);
			close(s);
			continue;
		}
		pthread_mutex_lock(&srv->lock);
		reap(srv, false);
		if (srv->stop || srv->st.clients_now >= TIDE_AGENT_MAX_CLIENTS) {
			if (!srv->stop)
				TIDE_LOG(WARN, "agent: %d clients attached already; refusing one",
					 TIDE_AGENT_MAX_CLIENTS);
			pthread_mutex_unlock(&srv->lock);
			close(s);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			pthread_mutex_unlock(&srv->lock);
			close(s);
			continue;
		}
		c->srv = srv;
		c->sock = s;
		c->pid = pid;
		if (pthread_create(&c->th, NULL, client_main, c) != 0) {
			pthread_mutex_unlock(&srv->lock);
			TIDE_LOG(WARN, "agent: cannot start a client thread; refusing the client");
			close(s);
			free(c);
			continue;
		}
		c->next = srv->clients;
		srv->clients = c;
		srv->st.clients_now++;
		srv->st.clients_total++;
		pthread_mutex_unlock(&srv->lock);
	}
}

/* mkdir -p of path's parent directory. */
static int
make_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *p;

	snprintf(dir, sizeof(dir), "%s", path);
	p = strrchr(dir, '/');
	if (p == NULL || p == dir)
		return 0;
	*p = '\0';
	for (p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

void
tide_agent_server_opts_init(struct tide_agent_server_opts *opts, size_t opts_size)
{
	struct tide_agent_server_opts d = {.opts_size = sizeof(d), .socket_group = NULL};

	if (opts == NULL)
		return;
	if (opts_size > sizeof(d))
		opts_size = sizeof(d);
	d.opts_size = opts_size;
	memcpy(opts, &d, opts_size);
}

/* gid of a group name or number; -ENOENT when there is no such group. */
static int
group_gid(const char *name, gid_t *out)
{
	struct group gr, *res = NULL;
	size_t cap = 16384;
	unsigned long n;
	char *buf, *end;
	int rc;

	/* Directory-backed groups can have long member lists: grow on ERANGE. */
	for (;;) {
		buf = malloc(cap);
		if (buf == NULL)
			return -ENOMEM;
		rc = getgrnam_r(name, &gr, buf, cap, &res);
		if (rc != ERANGE || cap >= (16u << 20))
			break;
		free(buf);
		cap *= 4;
	}
	if (rc == 0 && res != NULL) {
		*out = res->gr_gid;
		free(buf);
		return 0;
	}
	free(buf);
	errno = 0;
	n = strtoul(name, &end, 10);
	if (*name != '\0' && *end == '\0' && errno == 0 && n < (gid_t)-1) {
		*out = (gid_t)n;
		return 0;
	}
	return -ENOENT;
}

int
tide_agent_server_start_opts(struct tide_store *store, const char *path,
			     const struct tide_agent_server_opts *opts,
			     struct tide_agent_server **out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct tide_agent_server *srv;
	gid_t gid = getegid();
	int rc, probe;

	if (store == NULL || path == NULL || out == NULL || tide_store_attached(store) ||
	    (opts != NULL && opts->opts_size < sizeof(*opts)))
		return -EINVAL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (opts != NULL && opts->socket_group != NULL && opts->socket_group[0] != '\0') {
		rc = group_gid(opts->socket_group, &gid);
		if (rc != 0) {
			if (rc == -ENOENT)
				TIDE_LOG(ERR, "agent: socket group '%s' does not exist",
					 opts->socket_group);
			return rc;
		}
	}
	strcpy(sa.sun_path, path);
	rc = make_parent(path);
	if (rc != 0)
		return rc;
	/* A socket file nobody answers on is left over from a killed agent. */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -errno;
	if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		return -EADDRINUSE;
	}
	close(probe);
	unlink(path);
	srv = calloc(1, sizeof(*srv));
	if (srv == NULL)
		return -ENOMEM;
	srv->store = store;
	srv->uid = geteuid();
	srv->gid = gid;
	snprintf(srv->path, sizeof(srv->path), "%s", path);
	pthread_mutex_init(&srv->lock, NULL);
	srv->lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv->lsock < 0) {
		rc = -errno;
		goto fail;
	}
	/* Nobody can connect before listen(): the mode and group are final by then
	 * (the group is set even when it is ours: a setgid directory gives its own). */
	if (bind(srv->lsock, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chown(path, (uid_t)-1, gid) != 0 || chmod(path, 0660) != 0 ||
	    listen(srv->lsock, 64) != 0) {
		rc = -errno;
		goto fail;
	}
	rc = -pthread_create(&srv->accept_th, NULL, accept_main, srv);
	if (rc != 0)
		goto fail;
	*out = srv;
	return 0;
fail:
	if (srv->lsock >= 0) {
		close(srv->lsock);
		unlink(path);
	}
	pthread_mutex_destroy(&srv->lock);
	free(srv);
	return rc;
}

int
tide_agent_server_start(struct tide_store *store, const char *path, struct tide_agent_server **out)
{
	return tide_agent_server_start_opts(store, path, NULL, out);
}

void
tide_agent_server_stats(struct tide_agent_server *srv, struct tide_agent_stats *st)
{
	pthread_mutex_lock(&srv->lock);
	*st = srv->st;
	pthread_mutex_unlock(&srv->lock);
}

void
tide_agent_server_stop(struct tide_agent_server *srv)
{
	if (srv == NULL)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->stop = true;
	pthread_mutex_unlock(&srv->lock);
	/* shutdown() wakes the blocked accept(). */
	shutdown(srv->lsock, SHUT_RDWR);
	pthread_join(srv->accept_th, NULL);
	close(srv->lsock);
	unlink(srv->path);
	pthread_mutex_lock(&srv->lock);
	reap(srv, true);
	pthread_mutex_unlock(&srv->lock);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}
