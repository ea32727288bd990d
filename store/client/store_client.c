/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Store client core (spec mooncake-master.md section 5): the store's life
 * cycle and its public entry points. Set-up builds one backend
 * (store_backend.h): in process (store_inproc.c: placement through the master,
 * bytes through this process's transfer engine, every put one sequence in
 * store_put.c) or attached to the node's agent (store_agent.c); every call
 * after that is one call through the backend's ops.
 *
 * Master connections: a small pool for caller operations (each connection is
 * locked for one RPC at a time, never across a transfer, so concurrent callers
 * do not queue behind each other's data movement), and `hb_mc` owned by the
 * heartbeat thread alone, so a slow put never delays a Ping past the master's
 * client TTL. A pooled connection that broke is reopened by the next call.
 *
 * This file keeps the life cycle (setup, teardown, the heartbeat that keeps
 * the in-process segment mounted), the dispatch and the registered buffers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include "store_agent.h"
#include "store_backend.h"
#include "store_inproc.h"
#include "store_session.h"
#include "store_repl.h"
#include "tide_log.h"
#include "tide_mc_client.h"
#include "tide_nodeenv.h"
#include "tide_addr.h"
#include "tide_clock.h"
#include "tide_store.h"
#include "tide_te.h"

/* Host part of local_hostname, and the key/version bounds we copy into. */
#define HOST_MAX    256
#define VERSION_MAX 64
/* The heartbeat period, as Mooncake's (spec 4.2). */
#define HB_PERIOD_MS 1000
/* Consecutive failed Pings after which the heartbeat reconnects (spec 4.2). */
#define HB_MAX_FAILS 3
/* Registered-buffer table: initial slots (power of two), grown at half load. */
#define REG_INIT_CAP 64
/* Transfer-engine slice for store traffic (see setup_engine). */
#define STORE_SLICE_SIZE (256u << 10)
/* Registered buffers at least this long are also registered with the engine
 * (tide_te_register_local: an MR per device with RDMA, a record with TCP). */
#define REG_ENGINE_MIN (1u << 20)

struct tide_store {
	bool set_up;
	/* What the calls run on once set up: &ip.be, or the agent's (store_backend.h). */
	struct store_backend *be;
	/* Attached to the node's agent; NULL in process. Set-up and close only. */
	struct tide_agent_conn *agent;
	/* The in-process backend: set up here when no agent runs the calls. */
	struct store_inproc ip;
	char *hostname; /* local_hostname as given; the segment's name */
	char *master;   /* "host:port" */
	/* tide_store_set_rdma_devices(); NULL: MOONCAKE_DEVICE of the node environment. */
	char *rdma_devices;
	/* tide_store_set_engine(): the caller's engine, used as ip.te and never destroyed
	 * here; everything this store registers with it is unregistered at close. */
	struct tide_te *shared_te;
	struct tide_mc_uuid seg_id;
	struct tide_seg_warm *seg_warm; /* faulting the segment in; NULL when not */
	bool seg_registered;
	bool mounted;
	struct tide_seg_warm *lbuf_warm; /* faulting the local buffer's start in; NULL when not */
	pthread_mutex_t reg_lock;        /* reg */
	struct tide_reg_table reg;       /* tide_store_register_buffer(), both backends */
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
	seg->name = store_mc_str(s->hostname);
	seg->base = (uint64_t)(uintptr_t)s->ip.seg_base;
	seg->size = s->ip.seg_size;
	seg->te_endpoint = store_mc_str(tide_te_local_name(s->ip.te));
	seg->protocol = store_mc_str(s->ip.proto);
	seg->host_id = store_mc_str("");
}

static bool
ready(const struct tide_store *s)
{
	return s != NULL && s->set_up;
}

/* The set-up and heartbeat RPCs go straight to a connection, not through the pool's
 * call: counted here as the pool counts the others (stock counts every master RPC). */
static uint64_t
rpc_begin(struct tide_store *s, enum tide_mc_fn fn)
{
	return store_metrics_rpc_begin(&s->ip.mc.pool.metrics, fn);
}

static void
rpc_end(struct tide_store *s, enum tide_mc_fn fn, uint64_t t0, int rc)
{
	store_metrics_rpc_end(&s->ip.mc.pool.metrics, fn, t0, rc);
}

/* store_mc's moved hook: the master moved, so the heartbeat pings (and re-mounts) now. */
static void
hb_kick(void *arg)
{
	struct tide_store *s = arg;

	store_leases_moved(&s->ip.leases);
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
	if (store_sess_init(&s->ip.put_sess, TIDE_STORE_SESSIONS_MAX) != 0) {
		free(s);
		return -ENOMEM;
	}
	if (store_sess_init(&s->ip.get_sess, TIDE_STORE_SESSIONS_MAX) != 0) {
		store_sess_fini(&s->ip.put_sess);
		free(s);
		return -ENOMEM;
	}
	s->ip.be.ops = &store_inproc_ops;
	tide_mc_pool_init(&s->ip.mc.pool);
	store_leases_init(&s->ip.leases, true);
	s->ip.mc.moved = hb_kick;
	s->ip.mc.moved_arg = s;
	pthread_mutex_init(&s->ip.map_lock, NULL);
	pthread_mutex_init(&s->reg_lock, NULL);
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
	uint64_t t0;
	int rc;

	tide_mc_pool_master(&s->ip.mc.pool, addr, sizeof(addr));
	/* Reconnect when the connection broke, or when the master moved (an HA
	 * leader found by a call or by the last round) while it looked fine. */
	if (s->hb_mc == NULL || !tide_mc_client_connected(s->hb_mc) ||
	    strcmp(addr, s->hb_addr) != 0) {
		tide_mc_client_close(s->hb_mc);
		s->hb_mc = NULL;
		/* Through etcd: the leader may have moved (spec: re-read master_view). */
		if (s->ip.mc.etcd != NULL && *fails > 0) {
			(void)store_mc_locate(&s->ip.mc);
			tide_mc_pool_master(&s->ip.mc.pool, addr, sizeof(addr));
		}
		rc = tide_mc_client_connect_addr(addr, 0, &s->hb_mc);
		if (rc != 0) {
			(*fails)++;
			TIDE_LOG(WARN, "heartbeat: reconnect to %s: %s", addr, strerror(-rc));
			return;
		}
		snprintf(s->hb_addr, sizeof(s->hb_addr), "%s", addr);
	}
	t0 = rpc_begin(s, TIDE_MC_FN_PING);
	rc = tide_mc_client_ping(s->hb_mc, &s->ip.mc.client_id, &status, &ec);
	rpc_end(s, TIDE_MC_FN_PING, t0, rc);
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
		t0 = rpc_begin(s, TIDE_MC_FN_REMOUNT_SEGMENT);
		rc = tide_mc_client_remount(s->hb_mc, &seg, 1, &s->ip.mc.client_id, &ec);
		rpc_end(s, TIDE_MC_FN_REMOUNT_SEGMENT, t0, rc);
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
		dl = tide_clock_deadline(CLOCK_MONOTONIC, HB_PERIOD_MS);
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
	struct store_mapped *m, *next;

	for (m = s->ip.maps; m != NULL; m = next) {
		next = m->next;
		munmap(m->base, m->len);
		free(m);
	}
	s->ip.maps = NULL;
	tide_seg_warm_stop(s->lbuf_warm);
	s->lbuf_warm = NULL;
	if (s->ip.lbuf != NULL)
		munmap(s->ip.lbuf, s->ip.lbuf_len);
	s->ip.lbuf = NULL;
	s->ip.lbuf_len = 0;
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
		tide_te_unregister(s->ip.te, s->ip.seg_base);
	if (s->ip.lbuf != NULL)
		tide_te_unregister_local(s->ip.te, s->ip.lbuf);
	pthread_mutex_lock(&s->reg_lock);
	for (size_t i = 0; s->reg.t != NULL && i < s->reg.cap; i++) {
		if (s->reg.t[i].addr != 0 && s->reg.t[i].len >= REG_ENGINE_MIN)
			tide_te_unregister_local(s->ip.te, (void *)s->reg.t[i].addr);
	}
	pthread_mutex_unlock(&s->reg_lock);
	pthread_mutex_lock(&s->ip.map_lock);
	for (struct store_mapped *m = s->ip.maps; m != NULL; m = m->next)
		tide_te_unregister_local(s->ip.te, m->base);
	pthread_mutex_unlock(&s->ip.map_lock);
}

/* Undo whatever setup did; safe on a partly set-up store. */
static void
teardown(struct tide_store *s)
{
	struct tide_mc_pool_conn *m;
	int32_t ec;
	int rc;

	hb_stop(s);
	/* Reserved objects of sessions still open would wait for the master's discard
	 * timeout: give them back while the master connections are up. */
	if (s->set_up)
		store_session_close(&s->ip);
	store_leases_fini(&s->ip.leases, &s->ip.mc);
	if (s->mounted) {
		uint64_t t0 = rpc_begin(s, TIDE_MC_FN_UNMOUNT_SEGMENT);

		m = tide_mc_pool_get(&s->ip.mc.pool, STORE_HEALTH_TIMEOUT_MS, &rc);
		if (m != NULL) {
			rc = tide_mc_client_unmount(m->c, &s->seg_id, &s->ip.mc.client_id, &ec);
			tide_mc_pool_put(m);
		}
		rpc_end(s, TIDE_MC_FN_UNMOUNT_SEGMENT, t0, rc);
		if (rc != 0 || ec != 0)
			TIDE_LOG(WARN, "unmount of our segment failed");
	}
	s->mounted = false;
	if (s->ip.te != NULL && s->ip.te == s->shared_te)
		shared_engine_release(s);
	else
		tide_te_destroy(s->ip.te); /* before the memory: peers may still copy into it */
	s->ip.te = NULL;
	s->seg_registered = false;
	tide_seg_warm_stop(s->seg_warm);
	s->seg_warm = NULL;
	if (s->ip.seg_base != NULL)
		munmap(s->ip.seg_base, s->ip.seg_size);
	s->ip.seg_base = NULL;
	s->ip.seg_size = 0;
	store_mc_reset(&s->ip.mc);
	buffers_release(s);
	free(s->hostname);
	free(s->ip.proto);
	free(s->master);
	s->hostname = s->ip.proto = s->master = NULL;
	s->set_up = false;
}

/* Split "host[:port]" (port 0 when absent; "[v6]:port", bare IPv6): engine/lib/addr. */
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
	uint64_t t0;
	int rc;

	t0 = rpc_begin(s, TIDE_MC_FN_SERVICE_READY);
	m = tide_mc_pool_get(&s->ip.mc.pool, 0, &rc);
	if (m == NULL) {
		rpc_end(s, TIDE_MC_FN_SERVICE_READY, t0, rc);
		TIDE_LOG(ERR, "connect to master %s: %s", s->master, strerror(-rc));
		return rc;
	}
	rc = tide_mc_client_service_ready(m->c, version, sizeof(version), &ec);
	tide_mc_pool_put(m);
	rpc_end(s, TIDE_MC_FN_SERVICE_READY, t0, rc);
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
		s->ip.te = s->shared_te;
		if (!had_port) {
			free(s->hostname);
			s->hostname = strdup(tide_te_local_name(s->ip.te));
			if (s->hostname == NULL)
				return -ENOMEM;
		}
		/* An engine that runs already keeps its transport: installing another while
		 * its owner transfers is not allowed (tide_te_install_transport). The store
		 * moves its bytes over whatever the engine runs. */
		if (tide_te_transport_name(s->ip.te)[0] != '\0') {
			if (strcmp(s->ip.proto, "rdma") == 0 &&
			    strcmp(tide_te_transport_name(s->ip.te), "rdma") != 0)
				TIDE_LOG(
					NOTICE,
					"store: protocol rdma asked, but the given engine runs %s; "
					"the store uses that",
					tide_te_transport_name(s->ip.te));
			return 0;
		}
		rc = tide_te_install_transport(s->ip.te, s->ip.proto);
		if (rc != 0 && rc != -EPROTONOSUPPORT)
			TIDE_LOG(ERR, "transport %s on the given engine: %s", s->ip.proto,
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
	rc = tide_te_create(&o, &s->ip.te);
	if (rc != 0) {
		TIDE_LOG(ERR, "transfer engine: %s", tide_te_strerror(rc));
		return rc;
	}
	if (!had_port) {
		free(s->hostname);
		s->hostname = strdup(p2p ? tide_te_local_name(s->ip.te) : name);
		if (s->hostname == NULL)
			return -ENOMEM;
	}
	rc = tide_te_install_transport(s->ip.te, s->ip.proto);
	if (rc != 0) {
		/* A protocol this node cannot run was explained by the engine already (what
		 * is missing, and the tcp alternative): one line is enough. */
		if (rc != -EPROTONOSUPPORT)
			TIDE_LOG(ERR, "transport %s: %s", s->ip.proto, tide_te_strerror(rc));
		return rc;
	}
	return 0;
}

/*
 * The segment's backing file when this process's engine runs kernel-socket TCP:
 * a memory file sealed against shrinking, which engines of other processes on
 * this host map to copy objects in and out with memcpy instead of loopback TCP
 * (tide_te_register_shared). -1: plain anonymous memory (user-space TCP and RDMA
 * move the bytes on their device; or memfd_create failed, logged at DEBUG). Such
 * memory is shmem: no transparent huge pages unless the administrator enabled
 * them for shmem, which seg_warm's touching ahead makes up for.
 */
static int
segment_file(struct tide_store *s, uint64_t size)
{
	int fd;

	if (strcmp(tide_te_transport_name(s->ip.te), "tcp-kernel") != 0)
		return -1;
	fd = memfd_create("tide-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		TIDE_LOG(DEBUG, "segment: memfd_create: %s; anonymous memory", strerror(errno));
		return -1;
	}
	if (ftruncate(fd, (off_t)size) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		TIDE_LOG(DEBUG, "segment: sizing or sealing its file: %s; anonymous memory",
			 strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int
setup_segment(struct tide_store *s, uint64_t size)
{
	struct tide_mc_segment seg;
	struct tide_mc_pool_conn *m;
	int32_t ec = 0;
	uint64_t t0;
	void *p;
	int rc, fd;

	if (size == 0)
		return 0;
	if (size > SIZE_MAX)
		return -EINVAL;
	fd = segment_file(s, size);
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
		 (fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS) | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	s->ip.seg_base = p;
	s->ip.seg_size = (size_t)size;
	/* Huge pages and faulting in ahead: fresh segment memory otherwise costs
	 * puts a page fault per 4 KiB (seg_warm.h). Best effort. */
	rc = tide_seg_warm_start(p, (size_t)size & ~((size_t)sysconf(_SC_PAGESIZE) - 1), 0,
				 &s->seg_warm);
	if (rc != 0)
		TIDE_LOG(DEBUG, "segment warm-up not started: %s", strerror(-rc));
	if (fd >= 0) {
		/* The engine keeps its own duplicate of the file for same-host peers. */
		rc = tide_te_register_shared(s->ip.te, p, (size_t)size, "cpu:0", fd, 0);
		close(fd);
	} else {
		rc = tide_te_register(s->ip.te, p, (size_t)size, "cpu:0");
	}
	if (rc != 0) {
		TIDE_LOG(ERR, "register global segment: %s", tide_te_strerror(rc));
		return rc;
	}
	s->seg_registered = true;
	rc = random_uuid(&s->seg_id);
	if (rc != 0)
		return rc;
	segment_fill(s, &seg);
	t0 = rpc_begin(s, TIDE_MC_FN_MOUNT_SEGMENT);
	m = tide_mc_pool_get(&s->ip.mc.pool, 0, &rc);
	if (m == NULL) {
		rpc_end(s, TIDE_MC_FN_MOUNT_SEGMENT, t0, rc);
		return rc;
	}
	rc = tide_mc_client_mount(m->c, &seg, &s->ip.mc.client_id, &ec);
	tide_mc_pool_put(m);
	rpc_end(s, TIDE_MC_FN_MOUNT_SEGMENT, t0, rc);
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
	s->ip.lbuf = p;
	s->ip.lbuf_len = (size_t)lbuf_size;
	tide_lbuf_warm_start(p, s->ip.lbuf_len, &s->lbuf_warm);
	return 0;
}

/* Why the engine of this process runs the transport it runs (for the setup log line). */
static const char *
transport_why(const struct tide_store *s)
{
	const char *t = tide_te_transport_name(s->ip.te);

	if (strcmp(s->ip.proto, "rdma") == 0)
		return "protocol rdma";
	if (strcmp(t, "tcp-dpdk") == 0)
		return "the node file gives this process TIDE_DPDK_DEVICE";
	return "the node file gives this process no TIDE_DPDK_DEVICE, or MC_FORCE_TCP is set";
}

/* The in-process client's keys of the node environment, loaded into *ne unless set-up
 * already read it: TIDE_PUT_LEASE (store_lease.h; off keeps every put on
 * PutStart/PutEnd) and TIDE_MASTER_POLL_US (mc_pool.h). 0, or -EINVAL when the node
 * environment is not valid. */
static int
inproc_env(struct tide_store *s, struct tide_nodeenv **ne)
{
	int rc = *ne == NULL ? tide_store_nodeenv(ne) : 0;

	if (rc != 0)
		return rc;
	s->ip.leases.mode = (*ne)->put_lease ? 0 : -1;
	s->ip.mc.pool.poll_us = (*ne)->master_poll_us;
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
		s->be = tide_agent_backend(a);
		s->set_up = true;
		return 0;
	}
	if (cfg->local_hostname == NULL || cfg->metadata_server == NULL ||
	    cfg->master_server_addr == NULL) {
		free(ne);
		return -EINVAL;
	}
	rc = inproc_env(s, &ne);
	free(ne);
	if (rc != 0)
		return rc;
	s->hostname = strdup(cfg->local_hostname);
	s->ip.proto = strdup(cfg->protocol != NULL && cfg->protocol[0] ? cfg->protocol : "tcp");
	s->master = strdup(cfg->master_server_addr);
	if (s->hostname == NULL || s->ip.proto == NULL || s->master == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	/* "host:port", or "etcd://..." to follow the HA leader (store_mc.h). */
	rc = store_mc_set_master(&s->ip.mc, s->master);
	if (rc != 0)
		goto fail;
	rc = random_uuid(&s->ip.mc.client_id);
	if (rc == 0)
		rc = setup_master(s);
	if (rc == 0)
		rc = setup_buffers(s, cfg->local_buffer_size);
	if (rc == 0)
		rc = setup_engine(s, cfg);
	/* The local buffer is what pools carve leases from: registered once with
	 * the engine, so with RDMA transfers use it in place (no staging). */
	if (rc == 0 && s->ip.lbuf != NULL)
		rc = tide_te_register_local(s->ip.te, s->ip.lbuf, s->ip.lbuf_len);
	if (rc == 0)
		rc = setup_segment(s, cfg->global_segment_size);
	if (rc != 0)
		goto fail;
	s->be = &s->ip.be;
	s->set_up = true;
	/* One line, at the default level: which data path this process runs and why. */
	TIDE_LOG(NOTICE, "store: %s; this process runs the transfer engine itself over %s (%s)",
		 why[0] ? why : "embedded", tide_te_transport_name(s->ip.te), transport_why(s));
	TIDE_LOG(INFO, "store %s joined master %s (segment %zu bytes, endpoint %s)", s->hostname,
		 s->master, s->ip.seg_size, tide_te_local_name(s->ip.te));
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
		{"tide_store_part", sizeof(struct tide_store_part)},
		{"tide_store_replica", sizeof(struct tide_store_replica)},
		{"tide_store_replicas", sizeof(struct tide_store_replicas)},
		{"tide_te_opts", sizeof(struct tide_te_opts)},
		{"tide_te_notify", sizeof(struct tide_te_notify)},
		{"tide_te_req", sizeof(struct tide_te_req)},
		{"tide_te_status", sizeof(struct tide_te_status)},
		{"tide_te_stats", sizeof(struct tide_te_stats)},
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
	/* The agent's life cycle is its own (store_agent.h); the in-process one is below. */
	if (s->agent != NULL) {
		tide_agent_close(s->agent);
		s->agent = NULL;
		tide_reg_table_fini(&s->reg);
	} else {
		teardown(s);
	}
	s->be = NULL;
	pthread_cond_destroy(&s->hb_cond);
	pthread_mutex_destroy(&s->hb_lock);
	pthread_mutex_destroy(&s->reg_lock);
	pthread_mutex_destroy(&s->ip.map_lock);
	pthread_mutex_destroy(&s->ip.leases.mu);
	tide_mc_pool_fini(&s->ip.mc.pool);
	store_sess_fini(&s->ip.put_sess);
	store_sess_fini(&s->ip.get_sess);
	free(s->rdma_devices);
	free(s);
}

/* ---------------------------------------------------------------------------- dispatch */

/*
 * Every call below is "not set up" (answered here, as before set-up and after a
 * failed one) or one call through s->be->ops; each op checks its own arguments.
 */

const char *
tide_store_endpoint(const struct tide_store *s)
{
	return ready(s) ? s->be->ops->endpoint(s->be) : "";
}

const char *
tide_store_protocol(const struct tide_store *s)
{
	return ready(s) ? s->be->ops->protocol(s->be) : "";
}

int
tide_store_attached(const struct tide_store *s)
{
	return ready(s) && s->be->ops->attached;
}

int
tide_store_health_check(struct tide_store *s)
{
	return ready(s) ? s->be->ops->health_check(s->be) : 1;
}

int
tide_store_metrics_text(struct tide_store *s, char *buf, size_t len, size_t *needed)
{
	if (!ready(s) || needed == NULL)
		return -EINVAL;
	/* Attached, the agent makes the master RPCs: this pool made none (stock's dummy client). */
	return store_metrics_text(&s->ip.mc.pool.metrics, s->be->ops->attached ? "dummy" : "real",
				  buf, len, needed);
}

int
tide_store_put(struct tide_store *s, const char *key, const void *buf, size_t len,
	       const struct tide_store_rc *repl)
{
	return ready(s) ? s->be->ops->put(s->be, key, buf, len, repl) : -EINVAL;
}

int
tide_store_put_from(struct tide_store *s, const char *key, const void *buf, size_t len,
		    const struct tide_store_rc *repl)
{
	return tide_store_put(s, key, buf, len, repl);
}

int
tide_store_batch_put_from(struct tide_store *s, const char *const *keys, const void *const *bufs,
			  const size_t *lens, size_t n, const struct tide_store_rc *repl, int *rcs)
{
	return ready(s) ? s->be->ops->batch_put(s->be, keys, bufs, lens, n, repl, rcs) : -EINVAL;
}

int
tide_store_batch_put_parts(struct tide_store *s, const char *const *keys,
			   const struct tide_store_part *parts, const size_t *nparts, size_t n,
			   const struct tide_store_rc *repl, unsigned flags, int *rcs)
{
	return ready(s) ? s->be->ops->put_parts(s->be, keys, parts, nparts, n, repl, flags, rcs)
			: -EINVAL;
}

int64_t
tide_store_get_into(struct tide_store *s, const char *key, void *buf, size_t len)
{
	return ready(s) ? s->be->ops->get_into(s->be, key, buf, len) : -EINVAL;
}

int
tide_store_get_with(struct tide_store *s, const char *key, tide_store_alloc_fn alloc,
		    tide_store_release_fn release, void *arg, void **out, size_t *len)
{
	if (out == NULL || len == NULL || alloc == NULL)
		return -EINVAL;
	*out = NULL;
	*len = 0;
	return ready(s) ? s->be->ops->get_with(s->be, key, alloc, release, arg, out, len) : -EINVAL;
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
	return ready(s) ? s->be->ops->get_size(s->be, key) : -EINVAL;
}

int
tide_store_batch_get_replicas(struct tide_store *s, const char *const *keys, size_t n,
			      struct tide_store_replicas **out)
{
	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	return ready(s) ? s->be->ops->get_replicas(s->be, keys, n, out) : -EINVAL;
}

/* One block (store_replicas.h): one free. */
void
tide_store_replicas_free(struct tide_store_replicas *r)
{
	free(r);
}

int
tide_store_batch_get_into_parts(struct tide_store *s, const char *const *keys,
				const struct tide_store_part *parts, const size_t *nparts, size_t n,
				int64_t *sizes)
{
	return ready(s) ? s->be->ops->get_parts(s->be, keys, parts, nparts, n, sizes) : -EINVAL;
}

int
tide_store_batch_put_session_start(struct tide_store *s, const char *const *keys,
				   const size_t *sizes, size_t n, const struct tide_store_rc *repl,
				   int *rcs)
{
	return ready(s) ? s->be->ops->put_sess_start(s->be, keys, sizes, n, repl, rcs) : -EINVAL;
}

int
tide_store_batch_put_ranges(struct tide_store *s, const char *const *keys,
			    const struct tide_store_part *parts, const uint64_t *offs,
			    const size_t *nparts, size_t n, int64_t *out)
{
	return ready(s) ? s->be->ops->sess_ranges(s->be, true, keys, parts, offs, nparts, n, out)
			: -EINVAL;
}

int
tide_store_batch_put_session_end(struct tide_store *s, const char *const *keys, size_t n, int *rcs)
{
	return ready(s) ? s->be->ops->put_sess_end(s->be, keys, n, false, rcs) : -EINVAL;
}

int
tide_store_batch_put_session_revoke(struct tide_store *s, const char *const *keys, size_t n,
				    int *rcs)
{
	return ready(s) ? s->be->ops->put_sess_end(s->be, keys, n, true, rcs) : -EINVAL;
}

int
tide_store_batch_get_session_start(struct tide_store *s, const char *const *keys, size_t n,
				   int *rcs)
{
	return ready(s) ? s->be->ops->get_sess_start(s->be, keys, n, rcs) : -EINVAL;
}

int
tide_store_batch_get_ranges(struct tide_store *s, const char *const *keys,
			    const struct tide_store_part *parts, const uint64_t *offs,
			    const size_t *nparts, size_t n, int64_t *out)
{
	return ready(s) ? s->be->ops->sess_ranges(s->be, false, keys, parts, offs, nparts, n, out)
			: -EINVAL;
}

int
tide_store_batch_get_session_end(struct tide_store *s, const char *const *keys, size_t n)
{
	return ready(s) ? s->be->ops->get_sess_end(s->be, keys, n) : -EINVAL;
}

int
tide_store_batch_get_into(struct tide_store *s, const char *const *keys, void *const *bufs,
			  const size_t *lens, size_t n, int64_t *sizes)
{
	return ready(s) ? s->be->ops->batch_get_into(s->be, keys, bufs, lens, n, sizes) : -EINVAL;
}

int
tide_store_get_into_ranges(struct tide_store *s, const char *const *keys, size_t nkeys,
			   struct tide_store_frag *frags, size_t nfrags)
{
	return ready(s) ? s->be->ops->get_into_ranges(s->be, keys, nkeys, frags, nfrags) : -EINVAL;
}

int
tide_store_is_exist(struct tide_store *s, const char *key)
{
	return ready(s) ? s->be->ops->exist(s->be, key) : -EINVAL;
}

int64_t
tide_store_batch_replica_clear(struct tide_store *s, const char *const *keys, size_t n,
			       const char *segment_name, int *cleared)
{
	size_t i;

	if (!ready(s) || (n > 0 && (keys == NULL || cleared == NULL)))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (keys[i] == NULL)
			return -EINVAL;
	}
	return s->be->ops->replica_clear(s->be, keys, n, segment_name, cleared);
}

int
tide_store_batch_is_exist(struct tide_store *s, const char *const *keys, size_t n, int *out)
{
	return ready(s) ? s->be->ops->batch_exist(s->be, keys, n, out) : -EINVAL;
}

int
tide_store_remove(struct tide_store *s, const char *key, bool force)
{
	return ready(s) ? s->be->ops->remove(s->be, key, force) : -EINVAL;
}

int
tide_store_batch_remove(struct tide_store *s, const char *const *keys, size_t n, bool force,
			int *rcs)
{
	return ready(s) ? s->be->ops->batch_remove(s->be, keys, n, force, rcs) : -EINVAL;
}

int64_t
tide_store_remove_all(struct tide_store *s, bool force)
{
	return ready(s) ? s->be->ops->remove_all(s->be, force) : -EINVAL;
}

int64_t
tide_store_remove_by_regex(struct tide_store *s, const char *pattern, bool force)
{
	return ready(s) ? s->be->ops->remove_by_regex(s->be, pattern, force) : -EINVAL;
}

int
tide_store_local_buffer(struct tide_store *s, void **base, size_t *len)
{
	return ready(s) ? s->be->ops->local_buffer(s->be, base, len) : -EINVAL;
}

int
tide_store_map_buffer(struct tide_store *s, size_t len, void **out)
{
	return ready(s) ? s->be->ops->map_buffer(s->be, len, out) : -EINVAL;
}

int
tide_store_unmap_buffer(struct tide_store *s, void *ptr)
{
	return ready(s) ? s->be->ops->unmap_buffer(s->be, ptr) : -ENOENT;
}

/* ------------------------------------------------------------------------------ buffers */

/* Registered buffers: the table (reg_table.h) under reg_lock, for both backends. */
int
tide_store_register_buffer(struct tide_store *s, void *ptr, size_t len)
{
	int rc;

	if (!ready(s) || ptr == NULL || len == 0)
		return -EINVAL;
	pthread_mutex_lock(&s->reg_lock);
	rc = tide_reg_table_add(&s->reg, (uintptr_t)ptr, len);
	pthread_mutex_unlock(&s->reg_lock);
	/* Large buffers (an agent's client regions, a caller's own pools) are
	 * registered with the engine once, so RDMA moves them in place. Small
	 * ones stay bookkeeping: Miles registers a few-KiB bytearray per GET,
	 * and a NIC registration per GET costs more than the engine's staging
	 * copy. A range already covered (inside the local buffer) is fine. */
	if (rc == 0 && len >= REG_ENGINE_MIN && s->be->ops->register_memory != NULL) {
		int r = s->be->ops->register_memory(s->be, ptr, len);

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
	pthread_mutex_lock(&s->reg_lock);
	rc = tide_reg_table_del(&s->reg, (uintptr_t)ptr, &len);
	/* Under the lock: a register of the same address right after must not
	 * lose its engine record to this one. */
	if (rc == 0 && len >= REG_ENGINE_MIN && s->be->ops->unregister_memory != NULL)
		s->be->ops->unregister_memory(s->be, ptr);
	pthread_mutex_unlock(&s->reg_lock);
	return rc;
}
