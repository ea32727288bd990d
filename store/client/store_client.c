/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Store client core (spec mooncake-master.md section 5): placement through the
 * master, bytes through the transfer engine; or, when the node runs an agent,
 * a thin forwarder to it (store_agent.h).
 *
 * Master connections: a small pool for caller operations (each connection is
 * locked for one RPC at a time, never across a transfer, so concurrent callers
 * do not queue behind each other's data movement), and `hb_mc` owned by the
 * heartbeat thread alone, so a slow put never delays a Ping past the master's
 * client TTL. A pooled connection that broke is reopened by the next call.
 *
 * Small objects: a 256 B put costs two master round trips and one transfer.
 * The calls keep their arrays on the stack up to a typical size (no malloc
 * per call apart from the decoded answers), and a replica in this process's
 * own segment is copied with memcpy without going through an engine batch.
 *
 * This file keeps the store's life cycle (setup, teardown, the heartbeat),
 * the public entry points and the registered buffers; the master calls are
 * store_mc.c, the transfer planning and execution store_xfer.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mc_pool.h"
#include "reg_table.h"
#include "seg_warm.h"
#include "store_lease.h"
#include "store_rc.h"
#include "store_agent.h"
#include "store_mc.h"
#include "store_xfer.h"
#include "tide_log.h"
#include "tide_mc_client.h"
#include "tide_nodeenv.h"
#include "tide_addr.h"
#include "tide_store.h"
#include "tide_te.h"

/* Host part of local_hostname, and the key/version bounds we copy into. */
#define HOST_MAX    256
#define VERSION_MAX 64
/* The heartbeat period, as Mooncake's (spec 4.2). */
#define HB_PERIOD_MS 1000
/* Consecutive failed Pings after which the heartbeat reconnects (spec 4.2). */
#define HB_MAX_FAILS 3
/* health_check(): connect and answer bound, so a dead master is reported fast. */
#define HEALTH_TIMEOUT_MS 2000
/* Per-call scratch kept on the stack (key and request arrays of a typical call). */
#define SCRATCH_INLINE 4096
/* Registered-buffer table: initial slots (power of two), grown at half load. */
#define REG_INIT_CAP 64
/* Transfer-engine slice for store traffic (see setup_engine). */
#define STORE_SLICE_SIZE (256u << 10)
/* Registered buffers at least this long are also registered with the engine
 * (tide_te_register_local: an MR per device with RDMA, a record with TCP). */
#define REG_ENGINE_MIN (1u << 20)

/* A tide_store_map_buffer() region. */
struct mapped {
	void *base;
	size_t len;
	struct mapped *next;
};

struct tide_store {
	bool set_up;
	/* Attached to the node's agent: every call forwards there, nothing below is used. */
	struct tide_agent_conn *agent;
	char *hostname; /* local_hostname as given */
	char *proto;    /* "tcp" / "rdma" */
	char *master;   /* "host:port" */
	/* tide_store_set_rdma_devices(); NULL: MOONCAKE_DEVICE of the node environment. */
	char *rdma_devices;
	struct tide_te *te;
	/* tide_store_set_engine(): the caller's engine, used as te and never destroyed
	 * here; everything this store registers with it is unregistered at close. */
	struct tide_te *shared_te;
	struct store_mc mc; /* master connections, client id, HA leader lookup (store_mc.h) */
	struct store_leases leases; /* one-round-trip puts (store_lease.h) */
	struct tide_mc_uuid seg_id;
	void *seg_base; /* NULL: nothing contributed */
	size_t seg_size;
	struct tide_seg_warm *seg_warm; /* faulting the segment in; NULL when not */
	bool seg_registered;
	bool mounted;
	/* Local buffer (caller staging) and extra mapped regions. */
	void *lbuf;
	size_t lbuf_len;
	struct tide_seg_warm *lbuf_warm; /* faulting its start in; NULL when not */
	pthread_mutex_t buf_lock;        /* maps and reg */
	struct mapped *maps;
	struct tide_reg_table reg; /* tide_store_register_buffer() */
	/* Heartbeat. */
	struct tide_mc_client *hb_mc;
	pthread_t hb_thread;
	bool hb_running;
	bool hb_stop;
	pthread_mutex_t hb_lock;
	pthread_cond_t hb_cond;
	bool hb_kick; /* ping now (the master moved): re-mount without waiting a period */
	char hb_addr[TIDE_MC_POOL_ADDR_MAX]; /* where hb_mc is connected (heartbeat thread) */
};

static int
random_uuid(struct tide_mc_uuid *u)
{
	uint64_t v[2];
	size_t got = 0;

	while (got < sizeof(v)) {
		ssize_t n = getrandom((char *)v + got, sizeof(v) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	u->first = v[0];
	u->second = v[1];
	return 0;
}

static void
segment_fill(const struct tide_store *s, struct tide_mc_segment *seg)
{
	memset(seg, 0, sizeof(*seg));
	seg->id = s->seg_id;
	seg->name = tide_store_mstr(s->hostname);
	seg->base = (uint64_t)(uintptr_t)s->seg_base;
	seg->size = s->seg_size;
	seg->te_endpoint = tide_store_mstr(tide_te_local_name(s->te));
	seg->protocol = tide_store_mstr(s->proto);
	seg->host_id = tide_store_mstr("");
}

static bool
ready(const struct tide_store *s)
{
	return s != NULL && s->set_up;
}

static bool
key_ok(const char *key)
{
	return key != NULL && key[0] != '\0';
}

/* Whether every one of n keys is a valid key (n in 1..UINT32_MAX). */
static bool
keys_ok(const char *const *keys, size_t n)
{
	if (keys == NULL || n == 0 || n > UINT32_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!key_ok(keys[i]))
			return false;
	return true;
}

/*
 * Per-call arrays: on the stack up to SCRATCH_INLINE bytes, else one heap
 * block. Carve with sc_take() after sizing the whole call with sc_size().
 */
struct scratch {
	void *heap;
	unsigned char *next;
	_Alignas(16) unsigned char inl[SCRATCH_INLINE];
};

static size_t
sc_size(size_t n, size_t elem)
{
	return (n * elem + 15) & ~(size_t)15;
}

static bool
sc_init(struct scratch *sc, size_t bytes)
{
	sc->heap = NULL;
	sc->next = sc->inl;
	if (bytes > sizeof(sc->inl)) {
		sc->heap = calloc(1, bytes);
		sc->next = sc->heap;
	}
	return sc->next != NULL;
}

static void *
sc_take(struct scratch *sc, size_t n, size_t elem)
{
	void *p = sc->next;

	sc->next += sc_size(n, elem);
	return p;
}

/* store_mc's moved hook: the master moved, so the heartbeat pings (and re-mounts) now. */
static void
hb_kick(void *arg)
{
	struct tide_store *s = arg;

	store_leases_moved(&s->leases);
	pthread_mutex_lock(&s->hb_lock);
	s->hb_kick = true;
	pthread_cond_broadcast(&s->hb_cond);
	pthread_mutex_unlock(&s->hb_lock);
}

int
tide_store_create(struct tide_store **out)
{
	struct tide_store *s;

	if (out == NULL)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	tide_mc_pool_init(&s->mc.pool);
	store_leases_init(&s->leases, true);
	s->mc.moved = hb_kick;
	s->mc.moved_arg = s;
	pthread_mutex_init(&s->buf_lock, NULL);
	pthread_mutex_init(&s->hb_lock, NULL);
	pthread_cond_init(&s->hb_cond, NULL);
	*out = s;
	return 0;
}

/* ---------------------------------------------------------------------------- heartbeat */

static void
hb_ping_once(struct tide_store *s, int *fails)
{
	struct tide_mc_segment seg;
	char addr[TIDE_MC_POOL_ADDR_MAX];
	int32_t status = 0, ec = 0;
	int rc;

	tide_mc_pool_master(&s->mc.pool, addr, sizeof(addr));
	/* Reconnect when the connection broke, or when the master moved (an HA
	 * leader found by a call or by the last round) while it looked fine. */
	if (s->hb_mc == NULL || !tide_mc_client_connected(s->hb_mc) ||
	    strcmp(addr, s->hb_addr) != 0) {
		tide_mc_client_close(s->hb_mc);
		s->hb_mc = NULL;
		/* Through etcd: the leader may have moved (spec: re-read master_view). */
		if (s->mc.etcd != NULL && *fails > 0) {
			(void)store_mc_locate(&s->mc);
			tide_mc_pool_master(&s->mc.pool, addr, sizeof(addr));
		}
		rc = tide_mc_client_connect_addr(addr, 0, &s->hb_mc);
		if (rc != 0) {
			(*fails)++;
			TIDE_LOG(WARN, "heartbeat: reconnect to %s: %s", addr, strerror(-rc));
			return;
		}
		snprintf(s->hb_addr, sizeof(s->hb_addr), "%s", addr);
	}
	rc = tide_mc_client_ping(s->hb_mc, &s->mc.client_id, &status, &ec);
	if (rc != 0 || ec != 0) {
		(*fails)++;
		TIDE_LOG(WARN, "heartbeat: ping failed (%d/%d)", rc, ec);
		if (*fails >= HB_MAX_FAILS) {
			/* Spec 4.2: reconnect after three failures; the next round does it. */
			tide_mc_client_close(s->hb_mc);
			s->hb_mc = NULL;
			*fails = 0;
		}
		return;
	}
	*fails = 0;
	if (status == TIDE_MC_CLIENT_NEED_REMOUNT) {
		segment_fill(s, &seg);
		rc = tide_mc_client_remount(s->hb_mc, &seg, 1, &s->mc.client_id, &ec);
		if (rc != 0 || ec != 0)
			TIDE_LOG(WARN, "heartbeat: remount failed (%d/%d)", rc, ec);
		else
			TIDE_LOG(DEBUG, "heartbeat: remounted segment");
	}
}

static void *
hb_main(void *arg)
{
	struct tide_store *s = arg;
	struct timespec dl;
	int fails = 0;

	pthread_mutex_lock(&s->hb_lock);
	while (!s->hb_stop) {
		pthread_mutex_unlock(&s->hb_lock);
		hb_ping_once(s, &fails);
		pthread_mutex_lock(&s->hb_lock);
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += HB_PERIOD_MS / 1000;
		while (!s->hb_stop && !s->hb_kick &&
		       pthread_cond_timedwait(&s->hb_cond, &s->hb_lock, &dl) != ETIMEDOUT) {
		}
		s->hb_kick = false;
	}
	pthread_mutex_unlock(&s->hb_lock);
	return NULL;
}

static int
hb_start(struct tide_store *s)
{
	pthread_condattr_t ca;
	int rc;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&s->hb_cond);
	pthread_cond_init(&s->hb_cond, &ca);
	pthread_condattr_destroy(&ca);
	s->hb_stop = false;
	rc = pthread_create(&s->hb_thread, NULL, hb_main, s);
	if (rc != 0)
		return -rc;
	s->hb_running = true;
	return 0;
}

static void
hb_stop(struct tide_store *s)
{
	if (!s->hb_running)
		return;
	pthread_mutex_lock(&s->hb_lock);
	s->hb_stop = true;
	pthread_cond_broadcast(&s->hb_cond);
	pthread_mutex_unlock(&s->hb_lock);
	pthread_join(s->hb_thread, NULL);
	s->hb_running = false;
	tide_mc_client_close(s->hb_mc);
	s->hb_mc = NULL;
}

/* ------------------------------------------------------------------------- setup / close */

static void
buffers_release(struct tide_store *s)
{
	struct mapped *m, *next;

	for (m = s->maps; m != NULL; m = next) {
		next = m->next;
		munmap(m->base, m->len);
		free(m);
	}
	s->maps = NULL;
	tide_seg_warm_stop(s->lbuf_warm);
	s->lbuf_warm = NULL;
	if (s->lbuf != NULL)
		munmap(s->lbuf, s->lbuf_len);
	s->lbuf = NULL;
	s->lbuf_len = 0;
	tide_reg_table_fini(&s->reg);
}

/*
 * Give back what this store registered with a caller's engine (tide_store_set_engine),
 * which outlives the store: the segment (unregistering waits for peers' copies into
 * it, as destroying the engine would), the local buffer, large registered buffers and
 * mapped regions. What was never registered answers -ENOENT, which is fine.
 */
static void
shared_engine_release(struct tide_store *s)
{
	if (s->seg_registered)
		tide_te_unregister(s->te, s->seg_base);
	if (s->lbuf != NULL)
		tide_te_unregister_local(s->te, s->lbuf);
	pthread_mutex_lock(&s->buf_lock);
	for (size_t i = 0; s->reg.t != NULL && i < s->reg.cap; i++) {
		if (s->reg.t[i].addr != 0 && s->reg.t[i].len >= REG_ENGINE_MIN)
			tide_te_unregister_local(s->te, (void *)s->reg.t[i].addr);
	}
	for (struct mapped *m = s->maps; m != NULL; m = m->next)
		tide_te_unregister_local(s->te, m->base);
	pthread_mutex_unlock(&s->buf_lock);
}

/* Undo whatever setup did; safe on a partly set-up store. */
static void
teardown(struct tide_store *s)
{
	struct tide_mc_pool_conn *m;
	int32_t ec;
	int rc;

	hb_stop(s);
	store_leases_fini(&s->leases, &s->mc);
	if (s->mounted) {
		m = tide_mc_pool_get(&s->mc.pool, HEALTH_TIMEOUT_MS, &rc);
		if (m != NULL) {
			rc = tide_mc_client_unmount(m->c, &s->seg_id, &s->mc.client_id, &ec);
			tide_mc_pool_put(m);
		}
		if (rc != 0 || ec != 0)
			TIDE_LOG(WARN, "unmount of our segment failed");
	}
	s->mounted = false;
	if (s->te != NULL && s->te == s->shared_te)
		shared_engine_release(s);
	else
		tide_te_destroy(s->te); /* before the memory: peers may still copy into it */
	s->te = NULL;
	s->seg_registered = false;
	tide_seg_warm_stop(s->seg_warm);
	s->seg_warm = NULL;
	if (s->seg_base != NULL)
		munmap(s->seg_base, s->seg_size);
	s->seg_base = NULL;
	s->seg_size = 0;
	store_mc_reset(&s->mc);
	buffers_release(s);
	free(s->hostname);
	free(s->proto);
	free(s->master);
	s->hostname = s->proto = s->master = NULL;
	s->set_up = false;
}

/* Split "host[:port]" (port 0 when absent; "[v6]:port", bare IPv6): engine/addr. */
static int
split_hostport(const char *hp, char *host, size_t hlen, uint16_t *port)
{
	return tide_addr_split(hp, host, hlen, port, TIDE_ADDR_PORT_OPTIONAL, NULL) == 0 ? 0
											 : -EINVAL;
}

static int
setup_master(struct tide_store *s)
{
	char version[VERSION_MAX];
	struct tide_mc_pool_conn *m;
	int32_t ec = 0;
	int rc;

	m = tide_mc_pool_get(&s->mc.pool, 0, &rc);
	if (m == NULL) {
		TIDE_LOG(ERR, "connect to master %s: %s", s->master, strerror(-rc));
		return rc;
	}
	rc = tide_mc_client_service_ready(m->c, version, sizeof(version), &ec);
	tide_mc_pool_put(m);
	if (rc != 0 || ec != 0) {
		TIDE_LOG(ERR, "master %s: ServiceReady failed (%d/%d)", s->master, rc, ec);
		return store_mc_result(rc, ec);
	}
	/* Spec 5.2 step 2: the stock client refuses any other version string. */
	if (strcmp(version, "2.0.0") != 0) {
		TIDE_LOG(ERR, "master %s: version \"%s\", expected \"2.0.0\"", s->master, version);
		return -EPROTO;
	}
	return 0;
}

/* An unused TCP port on host (0 when none): the kernel picks, we release it. */
static uint16_t
free_port(const char *host)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t l = sizeof(a);
	uint16_t port = 0;
	int fd;

	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		a.sin_addr.s_addr = htonl(INADDR_ANY);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &l) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/*
 * The segment name must be unique per client (the master places replicas of
 * one object on distinct names), so a bare host gets a port as in Mooncake
 * (spec 5.2 step 1): in P2P mode the engine's own rpc port, else a free one.
 */
static int
setup_engine(struct tide_store *s, const struct tide_store_cfg *cfg)
{
	struct tide_te_opts o;
	char host[HOST_MAX], name[HOST_MAX + 8];
	uint16_t port;
	bool p2p, had_port;
	int rc;

	rc = split_hostport(cfg->local_hostname, host, sizeof(host), &port);
	if (rc != 0) {
		TIDE_LOG(ERR, "bad local_hostname \"%s\"", cfg->local_hostname);
		return rc;
	}
	had_port = port != 0;
	p2p = strcmp(cfg->metadata_server, "P2PHANDSHAKE") == 0;
	if (!had_port && !p2p) {
		port = free_port(host);
		if (port == 0)
			return -EADDRNOTAVAIL;
	}
	if (s->shared_te != NULL) {
		/* The caller's engine (SGLang shares one between its KV transfers and the
		 * store): its name is the segment's endpoint; a bare host takes that name. */
		s->te = s->shared_te;
		if (!had_port) {
			free(s->hostname);
			s->hostname = strdup(tide_te_local_name(s->te));
			if (s->hostname == NULL)
				return -ENOMEM;
		}
		rc = tide_te_install_transport(s->te, s->proto);
		if (rc != 0 && rc != -EPROTONOSUPPORT)
			TIDE_LOG(ERR, "transport %s on the given engine: %s", s->proto,
				 tide_te_strerror(rc));
		return rc;
	}
	snprintf(name, sizeof(name), "%s:%u", host, port);
	tide_te_opts_init(&o, sizeof(o));
	o.metadata = cfg->metadata_server;
	/* P2P: the engine names itself host:rpc_port, as Mooncake does (spec 5.2 step 5). */
	o.local_server_name = p2p ? NULL : name;
	o.host = host;
	o.rpc_port = port;
	/* A store moves one object per call far more often than a stream of
	 * them: 256 KiB slices spread a 1 MiB object over four connections. One
	 * 1 MiB slice left single 1 MiB reads at about half the rate
	 * (tools/store-bench-table.py, kernel sockets: ~0.5 vs ~1.0 GiB/s).
	 * MC_SLICE_SIZE still overrides. */
	o.slice_size = STORE_SLICE_SIZE;
	o.rdma_devices = s->rdma_devices;
	rc = tide_te_create(&o, &s->te);
	if (rc != 0) {
		TIDE_LOG(ERR, "transfer engine: %s", tide_te_strerror(rc));
		return rc;
	}
	if (!had_port) {
		free(s->hostname);
		s->hostname = strdup(p2p ? tide_te_local_name(s->te) : name);
		if (s->hostname == NULL)
			return -ENOMEM;
	}
	rc = tide_te_install_transport(s->te, s->proto);
	if (rc != 0) {
		/* A protocol this node cannot run was explained by the engine already (what
		 * is missing, and the tcp alternative): one line is enough. */
		if (rc != -EPROTONOSUPPORT)
			TIDE_LOG(ERR, "transport %s: %s", s->proto, tide_te_strerror(rc));
		return rc;
	}
	return 0;
}

static int
setup_segment(struct tide_store *s, uint64_t size)
{
	struct tide_mc_segment seg;
	struct tide_mc_pool_conn *m;
	int32_t ec = 0;
	void *p;
	int rc;

	if (size == 0)
		return 0;
	if (size > SIZE_MAX)
		return -EINVAL;
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	s->seg_base = p;
	s->seg_size = (size_t)size;
	/* Huge pages and faulting in ahead: fresh segment memory otherwise costs
	 * puts a page fault per 4 KiB (seg_warm.h). Best effort. */
	rc = tide_seg_warm_start(p, (size_t)size & ~((size_t)sysconf(_SC_PAGESIZE) - 1), 0,
				 &s->seg_warm);
	if (rc != 0)
		TIDE_LOG(DEBUG, "segment warm-up not started: %s", strerror(-rc));
	rc = tide_te_register(s->te, p, (size_t)size, "cpu:0");
	if (rc != 0) {
		TIDE_LOG(ERR, "register global segment: %s", tide_te_strerror(rc));
		return rc;
	}
	s->seg_registered = true;
	rc = random_uuid(&s->seg_id);
	if (rc != 0)
		return rc;
	segment_fill(s, &seg);
	m = tide_mc_pool_get(&s->mc.pool, 0, &rc);
	if (m == NULL)
		return rc;
	rc = tide_mc_client_mount(m->c, &seg, &s->mc.client_id, &ec);
	tide_mc_pool_put(m);
	if (rc != 0 || ec != 0) {
		TIDE_LOG(ERR, "MountSegment failed (%d/%d)", rc, ec);
		return store_mc_result(rc, ec);
	}
	s->mounted = true;
	return hb_start(s);
}

/*
 * The local buffer: address space only (MAP_NORESERVE); callers ask for tens
 * of GiB and touch little of it. Not registered with the engine: peers never
 * address it, and the engine reads and writes any local memory.
 * Its start is faulted in ahead (tide_lbuf_warm_start()).
 */
static int
setup_buffers(struct tide_store *s, uint64_t lbuf_size)
{
	void *p;

	int rc = tide_reg_table_init(&s->reg, REG_INIT_CAP);

	if (rc != 0)
		return rc;
	if (lbuf_size == 0)
		return 0;
	if (lbuf_size > SIZE_MAX)
		return -EINVAL;
	p = mmap(NULL, (size_t)lbuf_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		TIDE_LOG(ERR, "local buffer of %" PRIu64 " bytes: %s", lbuf_size, strerror(errno));
		return -ENOMEM;
	}
	/* Huge pages where leases are touched: a fault per 2 MiB, not per 4 KiB. */
	(void)madvise(p, (size_t)lbuf_size, MADV_HUGEPAGE);
	s->lbuf = p;
	s->lbuf_len = (size_t)lbuf_size;
	tide_lbuf_warm_start(p, s->lbuf_len, &s->lbuf_warm);
	return 0;
}

/* Why the engine of this process runs the transport it runs (for the setup log line). */
static const char *
transport_why(const struct tide_store *s)
{
	const char *t = tide_te_transport_name(s->te);

	if (strcmp(s->proto, "rdma") == 0)
		return "protocol rdma";
	if (strcmp(t, "tcp-dpdk") == 0)
		return "the node file gives this process TIDE_DPDK_DEVICE";
	return "the node file gives this process no TIDE_DPDK_DEVICE, or MC_FORCE_TCP is set";
}

/* TIDE_PUT_LEASE of the node environment (store_lease.h), loaded into *ne unless set-up
 * already read it: off keeps every put on PutStart/PutEnd. 0, or -EINVAL when the node
 * environment is not valid. */
static int
put_lease_env(struct store_leases *L, struct tide_nodeenv **ne)
{
	int rc = *ne == NULL ? tide_store_nodeenv(ne) : 0;

	if (rc != 0)
		return rc;
	L->mode = (*ne)->put_lease ? 0 : -1;
	return 0;
}

int
tide_store_setup(struct tide_store *s, const struct tide_store_cfg *cfg)
{
	struct tide_agent_conn *a = NULL;
	struct tide_nodeenv *ne = NULL; /* the node file, read once for the set-up */
	struct tide_store_cfg c_engine; /* cfg with the agent off, when an engine was given */
	char why[160] = "";
	int rc;

	if (s == NULL || cfg == NULL || s->set_up || s->agent != NULL)
		return -EINVAL;
	if (s->shared_te != NULL) {
		/* The caller's engine runs in this process: an agent would leave it idle. */
		if (cfg->agent == TIDE_STORE_AGENT_REQUIRED) {
			TIDE_LOG(ERR, "setup: an engine was given (engine=...) but the agent is "
				      "required; pass one or the other");
			return -EINVAL;
		}
		c_engine = *cfg;
		c_engine.agent = TIDE_STORE_AGENT_OFF;
		cfg = &c_engine;
	}
	rc = tide_agent_setup(cfg, &ne, &a, why, sizeof(why));
	if (rc < 0) {
		free(ne);
		return rc;
	}
	if (rc == 1) {
		/* The agent runs the engine, the segment and the master calls; the
		 * registered-buffer bookkeeping stays here. */
		free(ne);
		rc = tide_reg_table_init(&s->reg, REG_INIT_CAP);
		if (rc != 0) {
			tide_agent_close(a);
			return rc;
		}
		s->agent = a;
		s->set_up = true;
		return 0;
	}
	if (cfg->local_hostname == NULL || cfg->metadata_server == NULL ||
	    cfg->master_server_addr == NULL) {
		free(ne);
		return -EINVAL;
	}
	rc = put_lease_env(&s->leases, &ne);
	free(ne);
	if (rc != 0)
		return rc;
	s->hostname = strdup(cfg->local_hostname);
	s->proto = strdup(cfg->protocol != NULL && cfg->protocol[0] ? cfg->protocol : "tcp");
	s->master = strdup(cfg->master_server_addr);
	if (s->hostname == NULL || s->proto == NULL || s->master == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	/* "host:port", or "etcd://..." to follow the HA leader (store_mc.h). */
	rc = store_mc_set_master(&s->mc, s->master);
	if (rc != 0)
		goto fail;
	rc = random_uuid(&s->mc.client_id);
	if (rc == 0)
		rc = setup_master(s);
	if (rc == 0)
		rc = setup_buffers(s, cfg->local_buffer_size);
	if (rc == 0)
		rc = setup_engine(s, cfg);
	/* The local buffer is what pools carve leases from: registered once with
	 * the engine, so with RDMA transfers use it in place (no staging). */
	if (rc == 0 && s->lbuf != NULL)
		rc = tide_te_register_local(s->te, s->lbuf, s->lbuf_len);
	if (rc == 0)
		rc = setup_segment(s, cfg->global_segment_size);
	if (rc != 0)
		goto fail;
	s->set_up = true;
	/* One line, at the default level: which data path this process runs and why. */
	TIDE_LOG(NOTICE, "store: %s; this process runs the transfer engine itself over %s (%s)",
		 why[0] ? why : "embedded", tide_te_transport_name(s->te), transport_why(s));
	TIDE_LOG(INFO, "store %s joined master %s (segment %zu bytes, endpoint %s)", s->hostname,
		 s->master, s->seg_size, tide_te_local_name(s->te));
	return 0;
fail:
	teardown(s);
	return rc;
}

unsigned
tide_store_abi_version(void)
{
	return TIDE_STORE_ABI_VERSION;
}

size_t
tide_store_abi_sizeof(const char *type)
{
	static const struct {
		const char *name;
		size_t size;
	} types[] = {
		{"tide_store_cfg", sizeof(struct tide_store_cfg)},
		{"tide_store_rc", sizeof(struct tide_store_rc)},
		{"tide_store_frag", sizeof(struct tide_store_frag)},
		{"tide_te_opts", sizeof(struct tide_te_opts)},
		{"tide_te_notify", sizeof(struct tide_te_notify)},
	};

	for (size_t i = 0; type != NULL && i < sizeof(types) / sizeof(types[0]); i++) {
		if (strcmp(type, types[i].name) == 0)
			return types[i].size;
	}
	return 0;
}

int
tide_store_set_engine(struct tide_store *s, struct tide_te *te)
{
	if (s == NULL || s->set_up)
		return -EINVAL;
	s->shared_te = te;
	return 0;
}

int
tide_store_set_rdma_devices(struct tide_store *s, const char *devices)
{
	char *d = NULL;

	if (s == NULL || s->set_up)
		return -EINVAL;
	if (devices != NULL) {
		d = strdup(devices);
		if (d == NULL)
			return -ENOMEM;
	}
	free(s->rdma_devices);
	s->rdma_devices = d;
	return 0;
}

void
tide_store_close(struct tide_store *s)
{
	if (s == NULL)
		return;
	if (s->agent != NULL) {
		tide_agent_close(s->agent);
		s->agent = NULL;
		tide_reg_table_fini(&s->reg);
	} else {
		teardown(s);
	}
	pthread_cond_destroy(&s->hb_cond);
	pthread_mutex_destroy(&s->hb_lock);
	pthread_mutex_destroy(&s->buf_lock);
	pthread_mutex_destroy(&s->leases.mu);
	tide_mc_pool_fini(&s->mc.pool);
	free(s->rdma_devices);
	free(s);
}

const char *
tide_store_endpoint(const struct tide_store *s)
{
	if (s != NULL && s->agent != NULL)
		return tide_agent_endpoint(s->agent);
	return s != NULL && s->te != NULL ? tide_te_local_name(s->te) : "";
}

const char *
tide_store_protocol(const struct tide_store *s)
{
	if (s != NULL && s->agent != NULL)
		return tide_agent_protocol(s->agent);
	return ready(s) && s->proto != NULL ? s->proto : "";
}

int
tide_store_attached(const struct tide_store *s)
{
	return s != NULL && s->agent != NULL;
}

int
tide_store_health_check(struct tide_store *s)
{
	struct tide_mc_pool_conn *m;
	int32_t ec = 0;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_health_check(s->agent);
	if (!ready(s))
		return 1;
	/* ServiceReady: no side effect at the master (a Ping would register a client). */
	m = tide_mc_pool_get(&s->mc.pool, HEALTH_TIMEOUT_MS, &rc);
	if (m == NULL)
		return 2;
	tide_mc_client_set_timeout(m->c, HEALTH_TIMEOUT_MS);
	rc = tide_mc_client_service_ready(m->c, NULL, 0, &ec);
	tide_mc_client_set_timeout(m->c, 0);
	tide_mc_pool_put(m);
	return rc == 0 && ec == 0 ? 0 : 2;
}

/* ---------------------------------------------------------------------------- operations */

/* Where this store's transfers run (store_xfer.h). */
static struct store_xfer_eng
xfer_eng(const struct tide_store *s)
{
	struct store_xfer_eng e = {.te = s->te, .seg_base = s->seg_base, .seg_size = s->seg_size};

	return e;
}

/* A put the lease path can take: one replica, placed anywhere or on one preferred
 * segment, small enough that a master round trip is a large part of its cost
 * (store_lease.h). */
static bool
lease_eligible(const struct tide_store_rc *rc, size_t len)
{
	return len <= STORE_LEASE_MAX_OBJ &&
	       (rc == NULL || (rc->replica_num <= 1 && rc->n_preferred_segments == 0 &&
			       !rc->prefer_alloc_in_same_node));
}

/* One master round trip: place in our lease, write, commit. -EAGAIN: nothing was
 * stored, put it the plain way. */
static int
lease_put(struct tide_store *s, const char *key, const void *buf, size_t len,
	  const struct tide_store_rc *rc, const struct tide_mc_replicate_config *cfg)
{
	struct store_lease *l;
	struct store_xfer x;
	struct store_xfer_eng e = xfer_eng(s);
	uint64_t off;
	int ret;

	if (store_lease_place(&s->leases, &s->mc, rc != NULL ? rc->preferred_segment : NULL, len,
			      &l, &off) != 0)
		return -EAGAIN;
	x = (struct store_xfer){
		.ep = l->ep, .raddr = l->addr + off, .local = (void *)buf, .len = len};
	ret = store_xfer_run(&e, TIDE_TE_WRITE, &x, 1);
	if (ret != 0) {
		/* Its segment may be gone: the next put gets a lease elsewhere. */
		store_lease_giveback(&s->leases, &s->mc, l, off, len, true);
		return ret == -EAGAIN ? -EIO : ret;
	}
	return store_lease_commit(&s->leases, &s->mc, l, key, off, len, cfg);
}

int
tide_store_put(struct tide_store *s, const char *key, const void *buf, size_t len,
	       const struct tide_store_rc *rc)
{
	struct tide_mc_str strs_inl[STORE_XFER_INLINE], *strs = strs_inl;
	struct store_xfer x_inl[STORE_XFER_INLINE], *x = x_inl;
	struct store_xfer_eng e;
	struct tide_mc_replicate_config cfg;
	const struct tide_mc_replica_desc_vec *v;
	struct tide_mc_resp resp;
	size_t nstrs, nx = 0;
	int ret;

	if (s != NULL && s->agent != NULL)
		return tide_agent_put(s->agent, key, buf, len, rc);
	/* A 0-byte object is refused by the master (INVALID_PARAMS): spare the trip. */
	if (!ready(s) || !key_ok(key) || buf == NULL || len == 0 || tide_store_rc_check(rc, 1) != 0)
		return -EINVAL;
	nstrs = tide_store_rc_nstrs(rc, 1);
	if (nstrs > STORE_XFER_INLINE) {
		strs = calloc(nstrs, sizeof(*strs));
		if (strs == NULL)
			return -ENOMEM;
	}
	tide_store_rc_fill(rc, 1, strs, &cfg);
	ret = lease_eligible(rc, len) ? lease_put(s, key, buf, len, rc, &cfg) : -EAGAIN;
	if (ret == -EAGAIN) /* no lease: PutStart, the write, PutEnd */
		ret = store_mc_put_start(&s->mc, key, len, &cfg, &resp);
	else if (ret == 0)
		ret = 1; /* stored through the lease */
	if (strs != strs_inl)
		free(strs);
	if (ret != 0) {
		/* Spec 5.3 step 1: an existing key (1) is a successful put. */
		return ret == 1 ? 0 : ret;
	}
	v = &resp.u.put_start.val;
	if (v->n > STORE_XFER_INLINE) {
		x = calloc(v->n, sizeof(*x));
		if (x == NULL)
			ret = -ENOMEM;
	}
	if (ret == 0)
		ret = store_xfer_replica_writes(v, buf, len, x, &nx);
	if (ret == 0) {
		e = xfer_eng(s);
		ret = store_xfer_run(&e, TIDE_TE_WRITE, x, nx);
	}
	if (x != x_inl)
		free(x);
	tide_mc_resp_free(&resp);
	/* PutEnd, or PutRevoke of whatever failed. */
	return store_mc_put_end(&s->mc, key, ret);
}

/* GetReplicaList; resp is valid (free it) when 0 is returned. */
static int
replica_list(struct tide_store *s, const char *key, struct tide_mc_resp *resp)
{
	if (!ready(s) || !key_ok(key))
		return -EINVAL;
	return store_mc_replica_list(&s->mc, key, resp);
}

int64_t
tide_store_get_into(struct tide_store *s, const char *key, void *buf, size_t len)
{
	struct store_xfer_eng e;
	struct tide_mc_resp resp;
	int64_t ret;
	uint64_t t0;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_get_into(s->agent, key, buf, len);
	if (buf == NULL && len > 0)
		return -EINVAL;
	t0 = store_xfer_now_ms();
	rc = replica_list(s, key, &resp);
	if (rc != 0)
		return rc;
	e = xfer_eng(s);
	ret = store_xfer_read_replica(&e, &resp.u.replica_list.val, buf, len, t0);
	tide_mc_resp_free(&resp);
	return ret;
}

int
tide_store_put_from(struct tide_store *s, const char *key, const void *buf, size_t len,
		    const struct tide_store_rc *rc)
{
	return tide_store_put(s, key, buf, len, rc);
}

/* Through an agent: its size, then a read into a buffer of that size. */
static int
agent_get(struct tide_store *s, const char *key, tide_store_alloc_fn alloc,
	  tide_store_release_fn release, void *arg, void **out, size_t *len)
{
	/* Objects are write-once, but a key may be removed and put again with
	 * another size between the two calls: retry a few times, then give up. */
	for (int tries = 0; tries < 3; tries++) {
		int64_t size = tide_agent_get_size(s->agent, key), got;
		void *buf;

		if (size < 0)
			return (int)size;
		buf = alloc(arg, (size_t)size);
		if (buf == NULL)
			return -ENOMEM;
		got = tide_agent_get_into(s->agent, key, buf, (size_t)size);
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

int
tide_store_get_with(struct tide_store *s, const char *key, tide_store_alloc_fn alloc,
		    tide_store_release_fn release, void *arg, void **out, size_t *len)
{
	struct store_xfer_eng e;
	struct tide_mc_resp resp;
	int64_t size, got;
	uint64_t t0;
	void *buf;
	int rc;

	if (out == NULL || len == NULL || alloc == NULL)
		return -EINVAL;
	*out = NULL;
	*len = 0;
	if (s != NULL && s->agent != NULL)
		return agent_get(s, key, alloc, release, arg, out, len);
	/* In process: one GetReplicaList gives the size and the location, so the
	 * buffer is sized from the same list it is read with (no size round trip,
	 * and no race with a remove and re-put in between). */
	t0 = store_xfer_now_ms();
	rc = replica_list(s, key, &resp);
	if (rc != 0)
		return rc;
	size = store_xfer_replica_size(&resp.u.replica_list.val);
	buf = size >= 0 ? alloc(arg, (size_t)size) : NULL;
	if (size < 0 || buf == NULL) {
		tide_mc_resp_free(&resp);
		return size < 0 ? (int)size : -ENOMEM;
	}
	e = xfer_eng(s);
	got = store_xfer_read_replica(&e, &resp.u.replica_list.val, buf, (size_t)size, t0);
	tide_mc_resp_free(&resp);
	if (got < 0) {
		if (release != NULL)
			release(arg, buf);
		return (int)got;
	}
	*out = buf;
	*len = (size_t)got;
	return 0;
}

/* tide_store_get's allocator: malloc, at least 1 byte so an empty object is not NULL. */
static void *
get_malloc(void *arg, size_t size)
{
	(void)arg;
	return malloc(size > 0 ? size : 1);
}

static void
get_free(void *arg, void *p)
{
	(void)arg;
	free(p);
}

int
tide_store_get(struct tide_store *s, const char *key, void **out, size_t *len)
{
	return tide_store_get_with(s, key, get_malloc, get_free, NULL, out, len);
}

int64_t
tide_store_get_size(struct tide_store *s, const char *key)
{
	struct tide_mc_resp resp;
	int64_t ret;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_get_size(s->agent, key);
	rc = replica_list(s, key, &resp);
	if (rc != 0)
		return rc;
	ret = store_xfer_replica_size(&resp.u.replica_list.val);
	tide_mc_resp_free(&resp);
	return ret;
}

int
tide_store_is_exist(struct tide_store *s, const char *key)
{
	if (s != NULL && s->agent != NULL)
		return tide_agent_is_exist(s->agent, key);
	if (!ready(s) || !key_ok(key))
		return -EINVAL;
	return store_mc_exist_key(&s->mc, key);
}

int
tide_store_remove(struct tide_store *s, const char *key, bool force)
{
	if (s != NULL && s->agent != NULL)
		return tide_agent_remove(s->agent, key, force);
	if (!ready(s) || !key_ok(key))
		return -EINVAL;
	return store_mc_remove(&s->mc, key, force);
}

int64_t
tide_store_remove_all(struct tide_store *s, bool force)
{
	if (s != NULL && s->agent != NULL)
		return tide_agent_remove_all(s->agent, force);
	if (!ready(s))
		return -EINVAL;
	return store_mc_remove_all(&s->mc, force);
}

int64_t
tide_store_remove_by_regex(struct tide_store *s, const char *pattern, bool force)
{
	if (s != NULL && s->agent != NULL)
		return tide_agent_remove_by_regex(s->agent, pattern, force);
	if (!ready(s) || !key_ok(pattern))
		return -EINVAL;
	return store_mc_remove_by_regex(&s->mc, pattern, force);
}

/* ------------------------------------------------------------------------------ batches */

static int
first_error(const int *rcs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (rcs[i] != 0)
			return rcs[i];
	return 0;
}

/*
 * A batch through one lease: every key placed in the same lease, written in one
 * engine batch, committed in one call (one master round trip for the batch).
 * Returns -EAGAIN when nothing was done (a key does not fit a lease, the keys
 * did not all land in one, no lease to be had): the caller takes the plain
 * path. Else 0 and rcs[] filled; a key the lease could not take after its
 * write (the lease ended) is put again on its own.
 */
static int
lease_batch(struct tide_store *s, const char *const *keys, const void *const *bufs,
	    const size_t *lens, size_t n, const struct tide_store_rc *rc,
	    const struct tide_mc_replicate_config *cfg, struct tide_mc_str *ks, int *rcs)
{
	struct tide_mc_replicate_config sub = *cfg;
	struct store_xfer_eng e = xfer_eng(s);
	struct store_lease *l = NULL, *li;
	struct store_xfer *x;
	struct scratch sc;
	struct tide_mc_str *gids = NULL;
	uint64_t *offs, *clens, total = 0;
	size_t i, m, *owner;
	int *res;

	for (i = 0; i < n; i++) {
		if (lens[i] == 0 || lens[i] > STORE_LEASE_MAX_OBJ)
			return -EAGAIN;
		total += lens[i];
	}
	/* More than half a lease would rarely fit in the current one: plain. The lease
	 * may be smaller than asked for (a share of a small segment). */
	if (total > store_lease_room(&s->leases, rc != NULL ? rc->preferred_segment : NULL) / 2)
		return -EAGAIN;
	if (!sc_init(&sc, sc_size(n, sizeof(*offs)) * 2 + sc_size(n, sizeof(*x)) +
				  sc_size(n, sizeof(*owner)) + sc_size(n, sizeof(*res)) +
				  sc_size(n, sizeof(*gids))))
		return -EAGAIN;
	offs = sc_take(&sc, n, sizeof(*offs));
	clens = sc_take(&sc, n, sizeof(*clens));
	x = sc_take(&sc, n, sizeof(*x));
	owner = sc_take(&sc, n, sizeof(*owner));
	res = sc_take(&sc, n, sizeof(*res));
	gids = sc_take(&sc, n, sizeof(*gids));
	for (i = 0; i < n; i++) {
		int prc = store_lease_place(&s->leases, &s->mc,
					    rc != NULL ? rc->preferred_segment : NULL, lens[i], &li,
					    &offs[i]);

		if (prc == 0 && l != NULL && li != l) {
			store_lease_giveback(&s->leases, &s->mc, li, offs[i], lens[i], false);
			prc = -EAGAIN;
		}
		if (prc != 0) {
			/* Not all in one lease: everything back, the plain way. */
			while (i-- > 0)
				store_lease_giveback(&s->leases, &s->mc, l, offs[i], lens[i],
						     false);
			free(sc.heap);
			return -EAGAIN;
		}
		l = li;
		x[i] = (struct store_xfer){.ep = l->ep,
					   .raddr = l->addr + offs[i],
					   .local = (void *)bufs[i],
					   .len = lens[i]};
	}
	store_xfer_run(&e, TIDE_TE_WRITE, x, n);
	/* Written keys to commit (m of them, in order); a failed write ends its key. */
	for (i = m = 0; i < n; i++) {
		if (x[i].rc != 0) {
			rcs[i] = x[i].rc == -EAGAIN ? -EIO : x[i].rc;
			store_lease_giveback(&s->leases, &s->mc, l, offs[i], lens[i], true);
			continue;
		}
		owner[m] = i;
		ks[m] = tide_store_mstr(keys[i]);
		offs[m] = offs[i];
		clens[m] = lens[i];
		if (cfg->group_ids.has)
			gids[m] = cfg->group_ids.val.v[i];
		m++;
	}
	if (m > 0) {
		sub.group_ids.val.v = cfg->group_ids.has ? gids : NULL;
		sub.group_ids.val.n = cfg->group_ids.has ? m : 0;
		store_lease_commit_n(&s->leases, &s->mc, l, ks, offs, clens, m, &sub, res);
	}
	for (size_t k = 0; k < m; k++) {
		i = owner[k];
		rcs[i] = res[k];
		if (res[k] == -EAGAIN) {
			/* The lease ended under us: this key on its own (a new lease, or
			 * PutStart), with its own group id. */
			struct tide_store_rc one = rc != NULL ? *rc : (struct tide_store_rc){0};

			if (rc != NULL && rc->group_ids != NULL)
				one.group_ids = &rc->group_ids[i];
			rcs[i] = tide_store_put(s, keys[i], bufs[i], lens[i],
						rc != NULL ? &one : NULL);
		}
	}
	free(sc.heap);
	return 0;
}

int
tide_store_batch_put_from(struct tide_store *s, const char *const *keys, const void *const *bufs,
			  const size_t *lens, size_t n, const struct tide_store_rc *rc, int *rcs)
{
	struct tide_mc_replicate_config cfg;
	struct tide_mc_object_meta *metas;
	struct tide_mc_str *ks, *strs;
	struct scratch sc, sc2;
	struct store_xfer_eng e;
	struct tide_mc_resp resp;
	struct store_xfer *x = NULL;
	size_t *idx, *owner = NULL, nx, cap, nstrs, i, k;
	uint64_t *slens;
	bool *pending;
	int ret;

	if (s != NULL && s->agent != NULL)
		return tide_agent_batch_put_from(s->agent, keys, bufs, lens, n, rc, rcs);
	if (!ready(s) || keys == NULL || bufs == NULL || lens == NULL || rcs == NULL || n == 0 ||
	    n > UINT32_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!key_ok(keys[i]) || (bufs[i] == NULL && lens[i] > 0))
			return -EINVAL;
	if (tide_store_rc_check(rc, n) != 0) {
		/* e.g. fewer group ids than keys: every key is refused. */
		for (i = 0; i < n; i++)
			rcs[i] = -EINVAL;
		return -EINVAL;
	}
	nstrs = tide_store_rc_nstrs(rc, n);
	if (!sc_init(&sc, sc_size(n, sizeof(*ks)) + sc_size(n, sizeof(*slens)) +
				  sc_size(n, sizeof(*pending)) + sc_size(n, sizeof(*metas)) +
				  sc_size(n, sizeof(*idx)) + sc_size(nstrs, sizeof(*strs))))
		return -ENOMEM;
	ks = sc_take(&sc, n, sizeof(*ks));
	slens = sc_take(&sc, n, sizeof(*slens));
	pending = sc_take(&sc, n, sizeof(*pending));
	metas = sc_take(&sc, n, sizeof(*metas));
	idx = sc_take(&sc, n, sizeof(*idx));
	strs = sc_take(&sc, nstrs, sizeof(*strs));
	for (i = 0; i < n; i++) {
		ks[i] = tide_store_mstr(keys[i]);
		slens[i] = lens[i];
		pending[i] = false;
	}
	tide_store_rc_fill(rc, n, strs, &cfg);
	if (lease_eligible(rc, 0) && lease_batch(s, keys, bufs, lens, n, rc, &cfg, ks, rcs) == 0) {
		ret = first_error(rcs, n);
		goto out;
	}
	ret = store_mc_batch_put_start(&s->mc, ks, slens, n, &cfg, &resp);
	if (ret != 0)
		goto out;
	cap = store_xfer_put_replicas(&resp.u.batch_put_start, n, rcs, pending);
	sc2.heap = NULL;
	if (cap > 0 && sc_init(&sc2, sc_size(cap, sizeof(*x)) + sc_size(cap, sizeof(*owner)))) {
		x = sc_take(&sc2, cap, sizeof(*x));
		owner = sc_take(&sc2, cap, sizeof(*owner));
	}
	nx = store_xfer_plan_puts(&resp.u.batch_put_start, bufs, lens, n, pending, rcs, x, cap,
				  owner);
	if (nx > 0) {
		e = xfer_eng(s);
		store_xfer_run(&e, TIDE_TE_WRITE, x, nx);
	}
	for (k = 0; k < nx; k++)
		if (x[k].rc != 0 && rcs[owner[k]] == 0)
			rcs[owner[k]] = x[k].rc;
	free(sc2.heap);
	tide_mc_resp_free(&resp);
	store_mc_batch_finish(&s->mc, keys, n, pending, rcs, ks, metas, idx);
	ret = first_error(rcs, n);
out:
	free(sc.heap);
	return ret;
}

int
tide_store_batch_get_into(struct tide_store *s, const char *const *keys, void *const *bufs,
			  const size_t *lens, size_t n, int64_t *sizes)
{
	struct store_xfer_eng e;
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct scratch sc;
	struct store_xfer *x;
	size_t *owner, nx, i, k;
	int ret;

	if (s != NULL && s->agent != NULL)
		return tide_agent_batch_get_into(s->agent, keys, bufs, lens, n, sizes);
	if (!ready(s) || keys == NULL || bufs == NULL || lens == NULL || sizes == NULL || n == 0 ||
	    n > UINT32_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!key_ok(keys[i]) || (bufs[i] == NULL && lens[i] > 0))
			return -EINVAL;
	if (!sc_init(&sc,
		     sc_size(n, sizeof(*ks)) + sc_size(n, sizeof(*x)) + sc_size(n, sizeof(*owner))))
		return -ENOMEM;
	ks = sc_take(&sc, n, sizeof(*ks));
	x = sc_take(&sc, n, sizeof(*x));
	owner = sc_take(&sc, n, sizeof(*owner));
	ret = store_mc_batch_replica_list(&s->mc, keys, n, ks, &resp);
	if (ret != 0)
		goto out;
	nx = store_xfer_plan_gets(&resp.u.batch_replica_list, bufs, lens, n, sizes, x, owner);
	if (nx > 0) {
		e = xfer_eng(s);
		store_xfer_run(&e, TIDE_TE_READ, x, nx);
	}
	tide_mc_resp_free(&resp);
	/* A failed first replica: the single-key path tries the others. */
	for (k = 0; k < nx; k++)
		if (x[k].rc != 0)
			sizes[owner[k]] = tide_store_get_into(s, keys[owner[k]], bufs[owner[k]],
							      lens[owner[k]]);
	ret = 0;
	for (i = 0; i < n && ret == 0; i++)
		ret = sizes[i] < 0 ? (int)sizes[i] : 0;
out:
	free(sc.heap);
	return ret;
}

/*
 * One BatchGetReplicaList, then rounds of one engine batch each: round r
 * reads every still-failing fragment from its key's r-th COMPLETE replica,
 * so the number of rounds is bounded by the replica count (a handful).
 */
int
tide_store_get_into_ranges(struct tide_store *s, const char *const *keys, size_t nkeys,
			   struct tide_store_frag *frags, size_t nfrags)
{
	struct store_xfer_eng e;
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct scratch sc;
	struct store_rkey *ki;
	struct store_xfer *x;
	uint32_t *next;
	bool *todo;
	size_t *owner, nx, f;
	uint64_t t0;
	int ret;

	if (s != NULL && s->agent != NULL)
		return tide_agent_get_into_ranges(s->agent, keys, nkeys, frags, nfrags);
	if (!ready(s) || frags == NULL || nfrags == 0 || nfrags > UINT32_MAX ||
	    !keys_ok(keys, nkeys))
		return -EINVAL;
	for (f = 0; f < nfrags; f++)
		if (frags[f].dst == NULL && frags[f].len > 0)
			return -EINVAL;
	if (!sc_init(&sc, sc_size(nkeys, sizeof(*ks)) + sc_size(nkeys, sizeof(*ki)) +
				  sc_size(nfrags, sizeof(*next)) + sc_size(nfrags, sizeof(*todo)) +
				  sc_size(nfrags, sizeof(*x)) + sc_size(nfrags, sizeof(*owner))))
		return -ENOMEM;
	ks = sc_take(&sc, nkeys, sizeof(*ks));
	ki = sc_take(&sc, nkeys, sizeof(*ki));
	next = sc_take(&sc, nfrags, sizeof(*next));
	todo = sc_take(&sc, nfrags, sizeof(*todo));
	x = sc_take(&sc, nfrags, sizeof(*x));
	owner = sc_take(&sc, nfrags, sizeof(*owner));
	t0 = store_xfer_now_ms();
	ret = store_mc_batch_replica_list(&s->mc, keys, nkeys, ks, &resp);
	if (ret != 0)
		goto out;
	store_xfer_rkeys(&resp.u.batch_replica_list, nkeys, ki);
	/* Fragments that cannot be read are settled now; the others read in rounds. */
	store_xfer_frags_settle(ki, nkeys, frags, nfrags, next, todo);
	e = xfer_eng(s);
	while ((nx = store_xfer_frags_round(ki, frags, nfrags, next, todo, x, owner)) > 0) {
		store_xfer_run(&e, TIDE_TE_READ, x, nx);
		store_xfer_frags_done(x, owner, nx, frags, todo);
	}
	store_xfer_frags_lease(ki, nkeys, frags, nfrags, t0);
	tide_mc_resp_free(&resp);
	ret = 0;
	for (f = 0; f < nfrags && ret == 0; f++)
		ret = frags[f].result < 0 ? (int)frags[f].result : 0;
out:
	free(sc.heap);
	return ret;
}

/* BatchExistKey or BatchRemove of n valid keys; resp valid (free it) on 0. */
static int
batch_keys_call(struct tide_store *s, enum tide_mc_fn fn, const char *const *keys, size_t n,
		bool force, struct tide_mc_resp *resp)
{
	struct tide_mc_str *ks;
	struct scratch sc;
	int ret;

	if (!sc_init(&sc, sc_size(n, sizeof(*ks))))
		return -ENOMEM;
	ks = sc_take(&sc, n, sizeof(*ks));
	ret = store_mc_batch_keys(&s->mc, fn, keys, n, force, ks, resp);
	free(sc.heap);
	return ret;
}

int
tide_store_batch_is_exist(struct tide_store *s, const char *const *keys, size_t n, int *out)
{
	struct tide_mc_resp resp;
	int ret;

	if (s != NULL && s->agent != NULL)
		return tide_agent_batch_is_exist(s->agent, keys, n, out);
	if (!ready(s) || out == NULL || !keys_ok(keys, n))
		return -EINVAL;
	ret = batch_keys_call(s, TIDE_MC_FN_BATCH_EXIST_KEY, keys, n, false, &resp);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < n; i++) {
		const struct tide_mc_exp_bool *e =
			i < resp.u.batch_exist.n ? &resp.u.batch_exist.v[i] : NULL;

		if (e == NULL)
			out[i] = -EBADMSG;
		else if (e->ok)
			out[i] = e->val ? 1 : 0;
		else
			out[i] = e->err == TIDE_MC_EC_OBJECT_NOT_FOUND ? 0 : store_mc_errno(e->err);
	}
	tide_mc_resp_free(&resp);
	return 0;
}

int
tide_store_batch_remove(struct tide_store *s, const char *const *keys, size_t n, bool force,
			int *rcs)
{
	struct tide_mc_resp resp;
	int ret;

	if (s != NULL && s->agent != NULL)
		return tide_agent_batch_remove(s->agent, keys, n, force, rcs);
	if (!ready(s) || rcs == NULL || !keys_ok(keys, n))
		return -EINVAL;
	ret = batch_keys_call(s, TIDE_MC_FN_BATCH_REMOVE, keys, n, force, &resp);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < n; i++)
		rcs[i] = store_mc_vec_status(&resp, i);
	tide_mc_resp_free(&resp);
	return first_error(rcs, n);
}

/* ------------------------------------------------------------------------------ buffers */

/* Registered buffers: the table (reg_table.h) under buf_lock. */
int
tide_store_register_buffer(struct tide_store *s, void *ptr, size_t len)
{
	int rc;

	if (!ready(s) || ptr == NULL || len == 0)
		return -EINVAL;
	pthread_mutex_lock(&s->buf_lock);
	rc = tide_reg_table_add(&s->reg, (uintptr_t)ptr, len);
	pthread_mutex_unlock(&s->buf_lock);
	/* Large buffers (an agent's client regions, a caller's own pools) are
	 * registered with the engine once, so RDMA moves them in place. Small
	 * ones stay bookkeeping: Miles registers a few-KiB bytearray per GET,
	 * and a NIC registration per GET costs more than the engine's staging
	 * copy. A range already covered (inside the local buffer) is fine. */
	if (rc == 0 && len >= REG_ENGINE_MIN && s->agent == NULL) {
		int r = tide_te_register_local(s->te, ptr, len);

		if (r != 0 && r != -EEXIST) {
			tide_store_unregister_buffer(s, ptr);
			rc = r;
		}
	}
	return rc;
}

int
tide_store_unregister_buffer(struct tide_store *s, void *ptr)
{
	size_t len = 0;
	int rc;

	if (!ready(s))
		return -EINVAL;
	if (ptr == NULL)
		return -ENOENT;
	pthread_mutex_lock(&s->buf_lock);
	rc = tide_reg_table_del(&s->reg, (uintptr_t)ptr, &len);
	/* Under the lock: a register of the same address right after must not
	 * lose its engine record to this one. */
	if (rc == 0 && len >= REG_ENGINE_MIN && s->agent == NULL)
		tide_te_unregister_local(s->te, ptr); /* -ENOENT: it was covered */
	pthread_mutex_unlock(&s->buf_lock);
	return rc;
}

int
tide_store_local_buffer(struct tide_store *s, void **base, size_t *len)
{
	if (s != NULL && s->agent != NULL)
		return tide_agent_local_buffer(s->agent, base, len);
	if (!ready(s) || base == NULL || len == NULL)
		return -EINVAL;
	*base = s->lbuf;
	*len = s->lbuf_len;
	return 0;
}

int
tide_store_map_buffer(struct tide_store *s, size_t len, void **out)
{
	struct mapped *m;
	void *p;

	if (s != NULL && s->agent != NULL)
		return tide_agent_map_buffer(s->agent, len, out);
	if (!ready(s) || len == 0 || out == NULL)
		return -EINVAL;
	m = malloc(sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		 0);
	if (p == MAP_FAILED) {
		free(m);
		return -ENOMEM;
	}
	int rc = tide_te_register_local(s->te, p, len);
	if (rc != 0) {
		munmap(p, len);
		free(m);
		return rc;
	}
	m->base = p;
	m->len = len;
	pthread_mutex_lock(&s->buf_lock);
	m->next = s->maps;
	s->maps = m;
	pthread_mutex_unlock(&s->buf_lock);
	*out = p;
	return 0;
}

int
tide_store_unmap_buffer(struct tide_store *s, void *ptr)
{
	struct mapped **pp, *m = NULL;

	if (s != NULL && s->agent != NULL)
		return tide_agent_unmap_buffer(s->agent, ptr);
	if (!ready(s))
		return -ENOENT;
	pthread_mutex_lock(&s->buf_lock);
	for (pp = &s->maps; *pp != NULL; pp = &(*pp)->next) {
		if ((*pp)->base == ptr) {
			m = *pp;
			*pp = m->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->buf_lock);
	if (m == NULL)
		return -ENOENT;
	tide_te_unregister_local(s->te, m->base);
	munmap(m->base, m->len);
	free(m);
	return 0;
}
