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
#include "store_rc.h"
#include "store_agent.h"
#include "tide_log.h"
#include "tide_mc_client.h"
#include "tide_addr.h"
#include "tide_clock.h"
#include "tide_etcd.h"
#include "tide_master_ha.h"
#include "tide_store.h"
#include "tide_te.h"

/* Host part of local_hostname, and the key/version bounds we copy into. */
#define HOST_MAX    256
#define VERSION_MAX 64
/* The heartbeat period, as Mooncake's (spec 4.2). */
#define HB_PERIOD_MS 1000
/* Consecutive failed Pings after which the heartbeat reconnects (spec 4.2). */
#define HB_MAX_FAILS 3
/* Wait bound for one transfer batch; the engine fails stalled requests within
 * its own io_timeout_ms (10 s) so this only guards against an engine bug. */
#define XFER_WAIT_MS 60000
/* health_check(): connect and answer bound, so a dead master is reported fast. */
#define HEALTH_TIMEOUT_MS 2000
/* How long an idempotent call waits for a new HA leader (lease TTL 2-5 s + election). */
#define FAILOVER_WAIT_MS 8000u
#define FAILOVER_STEP_MS 100u
/* Transfer requests kept on the stack; more go to the heap. */
#define XFER_INLINE 16
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
	struct tide_mc_pool mc; /* master connections (mc_pool.h) */
	struct tide_mc_uuid client_id;
	struct tide_mc_uuid seg_id;
	void *seg_base; /* NULL: nothing contributed */
	size_t seg_size;
	struct tide_seg_warm *seg_warm; /* faulting the segment in; NULL when not */
	bool seg_registered;
	bool mounted;
	/* Local buffer (caller staging) and extra mapped regions. */
	void *lbuf;
	size_t lbuf_len;
	pthread_mutex_t buf_lock; /* maps and reg */
	struct mapped *maps;
	struct tide_reg_table reg; /* tide_store_register_buffer() */
	/* Master found through etcd ("etcd://..." as the master address): the leader's
	 * master_view key, re-read when the master stops answering. NULL otherwise. */
	struct tide_etcd *etcd;
	char etcd_key[256];
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

/* Mooncake ErrorCode -> negative errno, as documented in tide_store.h. */
static int
ec_to_errno(int32_t ec)
{
	switch (ec) {
	case TIDE_MC_EC_OK:
		return 0;
	case TIDE_MC_EC_OBJECT_NOT_FOUND:
		return -ENOENT;
	case TIDE_MC_EC_OBJECT_ALREADY_EXISTS:
		return -EEXIST;
	case TIDE_MC_EC_NO_AVAILABLE_HANDLE:
		return -ENOSPC;
	case TIDE_MC_EC_REPLICA_IS_NOT_READY:
	case TIDE_MC_EC_INVALID_REPLICA:
		return -EAGAIN;
	case TIDE_MC_EC_OBJECT_HAS_LEASE:
	case TIDE_MC_EC_OBJECT_HAS_REPLICATION_TASK:
		return -EBUSY;
	case TIDE_MC_EC_INVALID_KEY:
	case TIDE_MC_EC_INVALID_PARAMS:
		return -EINVAL;
	case TIDE_MC_EC_INVALID_VERSION:
		return -EPROTO;
	case TIDE_MC_EC_SEGMENT_NOT_FOUND:
	case TIDE_MC_EC_CLIENT_NOT_FOUND:
	case TIDE_MC_EC_ILLEGAL_CLIENT:
		return -ENODEV;
	default:
		return -EREMOTEIO;
	}
}

/* rc from the master client, else the business code mapped. */
static int
mc_result(int rc, int32_t ec)
{
	return rc != 0 ? rc : ec_to_errno(ec);
}

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

static const struct tide_mc_str tenant_default = {(char *)"default", 7};

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

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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

int
tide_store_create(struct tide_store **out)
{
	struct tide_store *s;

	if (out == NULL)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	tide_mc_pool_init(&s->mc);
	pthread_mutex_init(&s->buf_lock, NULL);
	pthread_mutex_init(&s->hb_lock, NULL);
	pthread_cond_init(&s->hb_cond, NULL);
	*out = s;
	return 0;
}

/* ------------------------------------------------------------------------ master connections */

static void
req_init(struct tide_mc_req *r, enum tide_mc_fn fn)
{
	memset(r, 0, sizeof(*r));
	r->fn = fn;
	r->layout = TIDE_MC_LAYOUT_HEAD;
}

/* ---------------------------------------------------------------------------- heartbeat */

/*
 * The leader's address from etcd's master_view into the pool. 0; -ENOENT no
 * leader now (none elected, or a value that is not host:port); etcd's errors.
 */
static int
locate_master(struct tide_store *s)
{
	struct tide_etcd_kv kv;
	char old[TIDE_MC_POOL_ADDR_MAX];
	int rc = tide_etcd_get(s->etcd, s->etcd_key, strlen(s->etcd_key), &kv, NULL);

	if (rc != 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "master leader: etcd %s: %s", s->etcd_key,
				   rc == -ENOENT ? "no leader elected" : strerror(-rc));
		return rc;
	}
	if (!tide_master_ha_leader_valid(kv.value, kv.value_len)) {
		TIDE_LOG_RATELIMIT(WARN, 5, "master leader: %s holds \"%.64s\", not host:port",
				   s->etcd_key, kv.value);
		tide_etcd_kv_clear(&kv);
		return -ENOENT;
	}
	tide_mc_pool_master(&s->mc, old, sizeof(old));
	if (strcmp(old, kv.value) != 0) {
		TIDE_LOG(NOTICE, "master leader: %s (view %" PRId64 ")%s%s", kv.value,
			 kv.create_revision, old[0] ? ", was " : "", old);
		rc = tide_mc_pool_set_master(&s->mc, kv.value);
		/* The new leader answers the first Ping with NEED_REMOUNT: ping now. */
		pthread_mutex_lock(&s->hb_lock);
		s->hb_kick = true;
		pthread_cond_broadcast(&s->hb_cond);
		pthread_mutex_unlock(&s->hb_lock);
	}
	tide_etcd_kv_clear(&kv);
	return rc;
}

/* The pool's relocate hook: a connect to the master failed. */
static int
relocate_master(void *arg)
{
	return locate_master(arg);
}

/*
 * Whether an idempotent master call that failed with rc may be sent again:
 * the master is found through etcd, the connection broke or was refused (a
 * leader that died or stepped down), and the failover deadline has not
 * passed. Waits a step, looks the leader up again and returns true. *until
 * starts at 0 (the first failure sets it). Reads, PutEnd and BatchPutEnd go
 * through here: sent twice they change nothing more than once, and a PutEnd
 * whose put the old leader never made durable fails at the new one
 * (OBJECT_NOT_FOUND), so the put is revoked, never half visible.
 */
static bool
failover_retry(struct tide_store *s, int rc, uint64_t *until)
{
	uint64_t now = tide_mono_ns();

	if (s->etcd == NULL || (rc != -ECONNRESET && rc != -EPIPE && rc != -ECONNREFUSED &&
				rc != -ENOTCONN && rc != -ECONNABORTED))
		return false;
	if (*until == 0)
		*until = now + FAILOVER_WAIT_MS * 1000000ull;
	else if (now >= *until)
		return false;
	usleep(FAILOVER_STEP_MS * 1000u);
	(void)locate_master(s);
	return true;
}

static void
hb_ping_once(struct tide_store *s, int *fails)
{
	struct tide_mc_segment seg;
	char addr[TIDE_MC_POOL_ADDR_MAX];
	int32_t status = 0, ec = 0;
	int rc;

	tide_mc_pool_master(&s->mc, addr, sizeof(addr));
	/* Reconnect when the connection broke, or when the master moved (an HA
	 * leader found by a call or by the last round) while it looked fine. */
	if (s->hb_mc == NULL || !tide_mc_client_connected(s->hb_mc) ||
	    strcmp(addr, s->hb_addr) != 0) {
		tide_mc_client_close(s->hb_mc);
		s->hb_mc = NULL;
		/* Through etcd: the leader may have moved (spec: re-read master_view). */
		if (s->etcd != NULL && *fails > 0) {
			(void)locate_master(s);
			tide_mc_pool_master(&s->mc, addr, sizeof(addr));
		}
		rc = tide_mc_client_connect_addr(addr, 0, &s->hb_mc);
		if (rc != 0) {
			(*fails)++;
			TIDE_LOG(WARN, "heartbeat: reconnect to %s: %s", addr, strerror(-rc));
			return;
		}
		snprintf(s->hb_addr, sizeof(s->hb_addr), "%s", addr);
	}
	rc = tide_mc_client_ping(s->hb_mc, &s->client_id, &status, &ec);
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
		rc = tide_mc_client_remount(s->hb_mc, &seg, 1, &s->client_id, &ec);
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
	if (s->lbuf != NULL)
		munmap(s->lbuf, s->lbuf_len);
	s->lbuf = NULL;
	s->lbuf_len = 0;
	tide_reg_table_fini(&s->reg);
}

/* Undo whatever setup did; safe on a partly set-up store. */
static void
teardown(struct tide_store *s)
{
	struct tide_mc_pool_conn *m;
	int32_t ec;
	int rc;

	hb_stop(s);
	if (s->mounted) {
		m = tide_mc_pool_get(&s->mc, HEALTH_TIMEOUT_MS, &rc);
		if (m != NULL) {
			rc = tide_mc_client_unmount(m->c, &s->seg_id, &s->client_id, &ec);
			tide_mc_pool_put(m);
		}
		if (rc != 0 || ec != 0)
			TIDE_LOG(WARN, "unmount of our segment failed");
	}
	s->mounted = false;
	/* The engine goes before the memory: peers may still be copying into it. */
	tide_te_destroy(s->te);
	s->te = NULL;
	s->seg_registered = false;
	tide_seg_warm_stop(s->seg_warm);
	s->seg_warm = NULL;
	if (s->seg_base != NULL)
		munmap(s->seg_base, s->seg_size);
	s->seg_base = NULL;
	s->seg_size = 0;
	tide_mc_pool_close_all(&s->mc);
	buffers_release(s);
	free(s->hostname);
	free(s->proto);
	free(s->master);
	s->mc.relocate = NULL;
	tide_etcd_close(s->etcd);
	s->etcd = NULL;
	tide_mc_pool_set_master(&s->mc, "");
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

	m = tide_mc_pool_get(&s->mc, 0, &rc);
	if (m == NULL) {
		TIDE_LOG(ERR, "connect to master %s: %s", s->master, strerror(-rc));
		return rc;
	}
	rc = tide_mc_client_service_ready(m->c, version, sizeof(version), &ec);
	tide_mc_pool_put(m);
	if (rc != 0 || ec != 0) {
		TIDE_LOG(ERR, "master %s: ServiceReady failed (%d/%d)", s->master, rc, ec);
		return mc_result(rc, ec);
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
	m = tide_mc_pool_get(&s->mc, 0, &rc);
	if (m == NULL)
		return rc;
	rc = tide_mc_client_mount(m->c, &seg, &s->client_id, &ec);
	tide_mc_pool_put(m);
	if (rc != 0 || ec != 0) {
		TIDE_LOG(ERR, "MountSegment failed (%d/%d)", rc, ec);
		return mc_result(rc, ec);
	}
	s->mounted = true;
	return hb_start(s);
}

/*
 * The local buffer: address space only (MAP_NORESERVE); callers ask for tens
 * of GiB and touch little of it. Not registered with the engine: peers never
 * address it, and the engine reads and writes any local memory.
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

int
tide_store_setup(struct tide_store *s, const struct tide_store_cfg *cfg)
{
	struct tide_agent_conn *a = NULL;
	char why[160] = "";
	int rc;

	if (s == NULL || cfg == NULL || s->set_up || s->agent != NULL)
		return -EINVAL;
	rc = tide_agent_setup(cfg, &a, why, sizeof(why));
	if (rc < 0)
		return rc;
	if (rc == 1) {
		/* The agent runs the engine, the segment and the master calls; the
		 * registered-buffer bookkeeping stays here. */
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
	    cfg->master_server_addr == NULL)
		return -EINVAL;
	s->hostname = strdup(cfg->local_hostname);
	s->proto = strdup(cfg->protocol != NULL && cfg->protocol[0] ? cfg->protocol : "tcp");
	s->master = strdup(cfg->master_server_addr);
	if (s->hostname == NULL || s->proto == NULL || s->master == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	if (strncmp(s->master, "etcd://", 7) == 0) {
		const char *cid = getenv("MC_STORE_CLUSTER_ID");

		/* Stock's client reads the namespace from the environment only. */
		rc = tide_master_ha_key(cid, s->etcd_key, sizeof(s->etcd_key));
		if (rc == 0)
			rc = tide_etcd_open(s->master, 0, &s->etcd);
		if (rc != 0) {
			TIDE_LOG(ERR, "master address \"%s\": %s", s->master,
				 rc == -EINVAL ? "etcd endpoints are not host:port[;host:port...]"
					       : strerror(-rc));
			goto fail;
		}
		s->mc.relocate = relocate_master;
		s->mc.relocate_arg = s;
		rc = locate_master(s);
		if (rc != 0) {
			TIDE_LOG(ERR, "master address \"%s\": no leader at %s (%s)", s->master,
				 s->etcd_key, strerror(-rc));
			rc = -ENOTCONN;
			goto fail;
		}
	} else {
		rc = tide_mc_pool_set_master(&s->mc, s->master);
		if (rc != 0)
			goto fail;
	}
	rc = random_uuid(&s->client_id);
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
	tide_mc_pool_fini(&s->mc);
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
	m = tide_mc_pool_get(&s->mc, HEALTH_TIMEOUT_MS, &rc);
	if (m == NULL)
		return 2;
	tide_mc_client_set_timeout(m->c, HEALTH_TIMEOUT_MS);
	rc = tide_mc_client_service_ready(m->c, NULL, 0, &ec);
	tide_mc_client_set_timeout(m->c, 0);
	tide_mc_pool_put(m);
	return rc == 0 && ec == 0 ? 0 : 2;
}

/* ------------------------------------------------------------------------------ transfers */

/* One transfer of a call: in ep/raddr/local/len, out rc. */
struct xfer {
	const char *ep;
	uint64_t raddr;
	void *local;
	uint64_t len;
	int rc;
};

/*
 * The range lies in our own mounted segment: copy it here. The engine would
 * copy it too (same-process shortcut), but only after a batch alloc, submit,
 * wait, status and free; for a small object that is most of the work.
 */
static bool
self_copy(struct tide_store *s, enum tide_te_op op, const struct xfer *x, const char *self)
{
	uintptr_t base = (uintptr_t)s->seg_base;
	void *remote;

	if (s->seg_base == NULL || strcmp(x->ep, self) != 0 || x->raddr < base ||
	    x->len > s->seg_size || x->raddr - base > s->seg_size - x->len)
		return false;
	remote = (void *)(uintptr_t)x->raddr;
	if (op == TIDE_TE_READ)
		memcpy(x->local, remote, x->len);
	else
		memcpy(remote, x->local, x->len);
	return true;
}

/*
 * Move n ranges in one engine batch (ranges in our own segment are copied
 * directly). x[i].rc gets 0 or the request's error. Returns 0 when every
 * range moved, else the first error.
 */
static int
transfer(struct tide_store *s, enum tide_te_op op, struct xfer *x, size_t n)
{
	struct tide_te_req inl[XFER_INLINE], *reqs = inl;
	const char *self = tide_te_local_name(s->te);
	struct tide_te_status st;
	tide_te_batch_t b = 0;
	size_t i, nr = 0;
	uint32_t sub = 0;
	int first = 0, rc;
	bool have_b;

	for (i = 0; i < n; i++) {
		x[i].rc = 0;
		if (x[i].len == 0 || self_copy(s, op, &x[i], self))
			continue;
		x[i].rc = 1; /* for the engine */
		nr++;
	}
	if (nr == 0)
		return 0;
	if (nr > UINT32_MAX)
		return -EINVAL;
	if (nr > XFER_INLINE) {
		reqs = calloc(nr, sizeof(*reqs));
		if (reqs == NULL) {
			for (i = 0; i < n; i++)
				if (x[i].rc == 1)
					x[i].rc = -ENOMEM;
			return -ENOMEM;
		}
	}
	for (i = 0; i < n; i++) {
		if (x[i].rc != 1)
			continue;
		rc = tide_te_open_segment(s->te, x[i].ep, &reqs[sub].seg);
		if (rc != 0) {
			TIDE_LOG_RATELIMIT(WARN, 5, "open segment %s: %s", x[i].ep,
					   tide_te_strerror(rc));
			x[i].rc = rc;
			if (first == 0)
				first = rc;
			continue;
		}
		reqs[sub].op = op;
		reqs[sub].local = x[i].local;
		reqs[sub].remote_addr = x[i].raddr;
		reqs[sub].len = x[i].len;
		sub++;
	}
	if (sub == 0)
		goto out;
	rc = tide_te_batch_alloc(s->te, sub, &b);
	have_b = rc == 0;
	if (have_b) {
		rc = tide_te_submit(s->te, b, reqs, sub);
		if (rc == 0)
			rc = tide_te_wait(s->te, b, XFER_WAIT_MS);
		if (rc != 0) {
			/* Requests may still be in flight: the batch cannot be freed yet; the
			 * engine fails them within io_timeout_ms, so wait once more. */
			tide_te_wait(s->te, b, -1);
		}
	}
	for (i = 0, sub = 0; i < n; i++) {
		int xr = rc;

		if (x[i].rc != 1)
			continue;
		if (xr == 0) {
			xr = tide_te_status(s->te, b, sub, &st);
			if (xr == 0 && st.state != TIDE_TE_COMPLETED)
				xr = st.error != 0 ? st.error : -EIO;
		}
		sub++;
		x[i].rc = xr;
		if (xr != 0) {
			/* The handle stays open: other threads may be using it, and the engine
			 * fetches a restarted peer's descriptor again by itself. */
			TIDE_LOG_RATELIMIT(WARN, 5, "transfer with %s failed: %s", x[i].ep,
					   tide_te_strerror(xr));
			if (first == 0)
				first = xr;
		}
	}
	if (have_b)
		tide_te_batch_free(s->te, b);
out:
	if (reqs != inl)
		free(reqs);
	return first;
}

/* ---------------------------------------------------------------------------- operations */

static const struct tide_mc_buffer_desc *
complete_memory(const struct tide_mc_replica_desc *d)
{
	if (d->status != TIDE_MC_RS_COMPLETE ||
	    (d->kind != TIDE_MC_RK_MEMORY && d->kind != TIDE_MC_RK_NOF))
		return NULL;
	return &d->u.memory;
}

/*
 * Fill x[*nx..] with one write of buf per replica of v. 0; -EREMOTEIO the
 * master gave no replica, or one we cannot write (not memory, too small).
 */
static int
replica_writes(const struct tide_mc_replica_desc_vec *v, const void *buf, size_t len,
	       struct xfer *x, size_t *nx)
{
	if (v->n == 0)
		return -EREMOTEIO;
	for (size_t k = 0; k < v->n; k++) {
		const struct tide_mc_buffer_desc *bd = &v->v[k].u.memory;

		/* Only memory replicas exist at this master (spec 3.3). */
		if (v->v[k].kind != TIDE_MC_RK_MEMORY || bd->size < len)
			return -EREMOTEIO;
		x[*nx].ep = bd->transport_endpoint.ptr;
		x[*nx].raddr = bd->buffer_address;
		x[*nx].local = (void *)(uintptr_t)buf;
		x[*nx].len = len;
		(*nx)++;
	}
	return 0;
}

int
tide_store_put(struct tide_store *s, const char *key, const void *buf, size_t len,
	       const struct tide_store_rc *rc)
{
	struct tide_mc_str strs_inl[XFER_INLINE], *strs = strs_inl;
	struct xfer x_inl[XFER_INLINE], *x = x_inl;
	struct tide_mc_replicate_config cfg;
	const struct tide_mc_replica_desc_vec *v;
	struct tide_mc_resp resp;
	struct tide_mc_pool_conn *m;
	size_t nstrs, nx = 0;
	uint64_t until = 0;
	int32_t ec = 0;
	int ret, rc2;

	if (s != NULL && s->agent != NULL)
		return tide_agent_put(s->agent, key, buf, len, rc);
	/* A 0-byte object is refused by the master (INVALID_PARAMS): spare the trip. */
	if (!ready(s) || !key_ok(key) || buf == NULL || len == 0 || tide_store_rc_check(rc, 1) != 0)
		return -EINVAL;
	nstrs = tide_store_rc_nstrs(rc, 1);
	if (nstrs > XFER_INLINE) {
		strs = calloc(nstrs, sizeof(*strs));
		if (strs == NULL)
			return -ENOMEM;
	}
	tide_store_rc_fill(rc, 1, strs, &cfg);
	m = tide_mc_pool_get(&s->mc, 0, &ret);
	if (m != NULL) {
		ret = tide_mc_client_put_start(m->c, &s->client_id, key, len, &cfg, &resp, &ec);
		tide_mc_pool_put(m);
	}
	if (strs != strs_inl)
		free(strs);
	if (ret != 0)
		return ret;
	if (ec != 0) {
		tide_mc_resp_free(&resp);
		/* Spec 5.3 step 1: an existing key is a successful put. */
		return ec == TIDE_MC_EC_OBJECT_ALREADY_EXISTS ? 0 : ec_to_errno(ec);
	}
	v = &resp.u.put_start.val;
	if (v->n > XFER_INLINE) {
		x = calloc(v->n, sizeof(*x));
		if (x == NULL)
			ret = -ENOMEM;
	}
	if (ret == 0)
		ret = replica_writes(v, buf, len, x, &nx);
	if (ret == 0)
		ret = transfer(s, TIDE_TE_WRITE, x, nx);
	if (x != x_inl)
		free(x);
	tide_mc_resp_free(&resp);
	for (;;) {
		m = tide_mc_pool_get(&s->mc, 0, &rc2);
		if (m == NULL && ret == 0 && failover_retry(s, rc2, &until))
			continue;
		if (m == NULL) {
			/* The master dropped the connection: it revokes nothing by itself, but
			 * a later PutStart of the key discards the stale put (spec 3.3). */
			return ret != 0 ? ret : rc2;
		}
		if (ret != 0)
			break;
		rc2 = tide_mc_client_put_end(m->c, &s->client_id, key, &ec);
		if (rc2 != 0 && failover_retry(s, rc2, &until)) {
			tide_mc_pool_put(m);
			continue;
		}
		ret = mc_result(rc2, ec);
		if (ret != 0)
			TIDE_LOG_RATELIMIT(WARN, 5, "PutEnd %s failed: %s", key,
					   tide_store_strerror(ret));
		break;
	}
	if (ret != 0) {
		/* Nothing partly written (or not ended) may stay visible. */
		rc2 = tide_mc_client_put_revoke(m->c, &s->client_id, key, &ec);
		if (rc2 != 0 || ec != 0)
			TIDE_LOG_RATELIMIT(WARN, 5, "PutRevoke %s failed (%d/%d)", key, rc2, ec);
	}
	tide_mc_pool_put(m);
	return ret;
}

/* GetReplicaList; resp is valid (free it) when 0 is returned. */
static int
replica_list(struct tide_store *s, const char *key, struct tide_mc_resp *resp)
{
	struct tide_mc_pool_conn *m;
	int32_t ec = 0;
	int rc;

	uint64_t until = 0;

	if (!ready(s) || !key_ok(key))
		return -EINVAL;
	do {
		m = tide_mc_pool_get(&s->mc, 0, &rc);
		if (m != NULL) {
			rc = tide_mc_client_get_replica_list(m->c, key, resp, &ec);
			tide_mc_pool_put(m);
		}
	} while (rc != 0 && failover_retry(s, rc, &until));
	if (rc != 0)
		return rc;
	if (ec != 0) {
		tide_mc_resp_free(resp);
		return ec_to_errno(ec);
	}
	return 0;
}

/*
 * Read the first COMPLETE memory replica of resp into buf (len bytes there); a
 * replica that fails to transfer falls back to the next. t0: when the list was
 * asked for (the lease runs from then). Returns the size read or a negative errno.
 */
static int64_t
read_replica(struct tide_store *s, const struct tide_mc_resp *resp, void *buf, size_t len,
	     uint64_t t0)
{
	const struct tide_mc_buffer_desc *bd;
	int64_t ret = -EAGAIN;
	uint64_t lease;
	struct xfer x;
	int rc;

	for (size_t i = 0; i < resp->u.replica_list.val.replicas.n; i++) {
		bd = complete_memory(&resp->u.replica_list.val.replicas.v[i]);
		if (bd == NULL)
			continue;
		if (bd->size > len)
			return -ENOBUFS;
		x.ep = bd->transport_endpoint.ptr;
		x.raddr = bd->buffer_address;
		x.local = buf;
		x.len = bd->size;
		rc = transfer(s, TIDE_TE_READ, &x, 1);
		if (rc == 0) {
			/* Spec 5.4: past the lease the buffer may have been reused (LEASE_EXPIRED).
			 */
			lease = resp->u.replica_list.val.lease_ttl_ms;
			return lease != 0 && now_ms() - t0 > lease ? -ESTALE : (int64_t)bd->size;
		}
		/* Spec 5.4 picks the first COMPLETE replica; we also fall back on failure. */
		ret = rc;
	}
	return ret;
}

/* Size of the first COMPLETE memory replica of resp, or -EAGAIN if none. */
static int64_t
replica_size(const struct tide_mc_resp *resp)
{
	for (size_t i = 0; i < resp->u.replica_list.val.replicas.n; i++) {
		const struct tide_mc_buffer_desc *bd =
			complete_memory(&resp->u.replica_list.val.replicas.v[i]);

		if (bd != NULL)
			return (int64_t)bd->size;
	}
	return -EAGAIN;
}

int64_t
tide_store_get_into(struct tide_store *s, const char *key, void *buf, size_t len)
{
	struct tide_mc_resp resp;
	int64_t ret;
	uint64_t t0;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_get_into(s->agent, key, buf, len);
	if (buf == NULL && len > 0)
		return -EINVAL;
	t0 = now_ms();
	rc = replica_list(s, key, &resp);
	if (rc != 0)
		return rc;
	ret = read_replica(s, &resp, buf, len, t0);
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
agent_get(struct tide_store *s, const char *key, void **out, size_t *len)
{
	/* Objects are write-once, but a key may be removed and put again with
	 * another size between the two calls: retry a few times, then give up. */
	for (int tries = 0; tries < 3; tries++) {
		int64_t size = tide_agent_get_size(s->agent, key), got;
		void *buf;

		if (size < 0)
			return (int)size;
		buf = malloc(size > 0 ? (size_t)size : 1);
		if (buf == NULL)
			return -ENOMEM;
		got = tide_agent_get_into(s->agent, key, buf, (size_t)size);
		if (got >= 0) {
			*out = buf;
			*len = (size_t)got;
			return 0;
		}
		free(buf);
		if (got != -ENOBUFS)
			return (int)got;
	}
	return -EAGAIN;
}

int
tide_store_get(struct tide_store *s, const char *key, void **out, size_t *len)
{
	struct tide_mc_resp resp;
	int64_t size, got;
	uint64_t t0;
	void *buf;
	int rc;

	if (out == NULL || len == NULL)
		return -EINVAL;
	*out = NULL;
	*len = 0;
	if (s != NULL && s->agent != NULL)
		return agent_get(s, key, out, len);
	/* In process: one GetReplicaList gives the size and the location, so the
	 * buffer is sized from the same list it is read with (no size round trip,
	 * and no race with a remove and re-put in between). */
	t0 = now_ms();
	rc = replica_list(s, key, &resp);
	if (rc != 0)
		return rc;
	size = replica_size(&resp);
	buf = size >= 0 ? malloc(size > 0 ? (size_t)size : 1) : NULL;
	if (size < 0 || buf == NULL) {
		tide_mc_resp_free(&resp);
		return size < 0 ? (int)size : -ENOMEM;
	}
	got = read_replica(s, &resp, buf, (size_t)size, t0);
	tide_mc_resp_free(&resp);
	if (got < 0) {
		free(buf);
		return (int)got;
	}
	*out = buf;
	*len = (size_t)got;
	return 0;
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
	ret = replica_size(&resp);
	tide_mc_resp_free(&resp);
	return ret;
}

int
tide_store_is_exist(struct tide_store *s, const char *key)
{
	struct tide_mc_pool_conn *m;
	bool exists = false;
	uint64_t until = 0;
	int32_t ec = 0;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_is_exist(s->agent, key);
	if (!ready(s) || !key_ok(key))
		return -EINVAL;
	do {
		m = tide_mc_pool_get(&s->mc, 0, &rc);
		if (m != NULL) {
			rc = tide_mc_client_exist_key(m->c, key, &exists, &ec);
			tide_mc_pool_put(m);
		}
	} while (rc != 0 && failover_retry(s, rc, &until));
	rc = mc_result(rc, ec);
	if (rc == -ENOENT)
		return 0;
	return rc != 0 ? rc : exists ? 1 : 0;
}

int
tide_store_remove(struct tide_store *s, const char *key, bool force)
{
	struct tide_mc_pool_conn *m;
	int32_t ec = 0;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_remove(s->agent, key, force);
	if (!ready(s) || !key_ok(key))
		return -EINVAL;
	m = tide_mc_pool_get(&s->mc, 0, &rc);
	if (m == NULL)
		return rc;
	rc = tide_mc_client_remove(m->c, key, force, &ec);
	tide_mc_pool_put(m);
	return mc_result(rc, ec);
}

int64_t
tide_store_remove_all(struct tide_store *s, bool force)
{
	struct tide_mc_pool_conn *m;
	int64_t removed = 0;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_remove_all(s->agent, force);
	if (!ready(s))
		return -EINVAL;
	m = tide_mc_pool_get(&s->mc, 0, &rc);
	if (m == NULL)
		return rc;
	rc = tide_mc_client_remove_all(m->c, force, &removed);
	tide_mc_pool_put(m);
	if (rc != 0)
		return rc;
	return removed < 0 ? 0 : removed;
}

int64_t
tide_store_remove_by_regex(struct tide_store *s, const char *pattern, bool force)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	int64_t ret;
	int rc;

	if (s != NULL && s->agent != NULL)
		return tide_agent_remove_by_regex(s->agent, pattern, force);
	if (!ready(s) || !key_ok(pattern))
		return -EINVAL;
	req_init(&r, TIDE_MC_FN_REMOVE_BY_REGEX);
	r.u.remove.key = tide_store_mstr(pattern);
	r.u.remove.force = force;
	r.u.remove.tenant_id = tenant_default;
	rc = tide_mc_pool_call(&s->mc, &r, &resp);
	if (rc != 0)
		return rc;
	ret = resp.u.count.ok ? resp.u.count.val : ec_to_errno(resp.u.count.err);
	tide_mc_resp_free(&resp);
	return ret;
}

/* ------------------------------------------------------------------------------ batches */

/* Business result of one element of an expected<void> vector (missing: -EBADMSG). */
static int
vec_status(const struct tide_mc_resp *r, size_t i)
{
	if (i >= r->u.batch_status.n)
		return -EBADMSG;
	return r->u.batch_status.v[i].ok ? 0 : ec_to_errno(r->u.batch_status.v[i].err);
}

/*
 * BatchPutEnd for the keys with rcs[i] == 0 and pending[i], BatchPutRevoke for
 * the pending ones that failed; an End that fails turns rcs[i] into its error
 * and is revoked too. ks, metas and idx are n-entry scratch arrays.
 */
static void
batch_finish(struct tide_store *s, const char *const *keys, size_t n, const bool *pending, int *rcs,
	     struct tide_mc_str *ks, struct tide_mc_object_meta *metas, size_t *idx)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	size_t ne = 0, nr = 0, i;
	uint64_t until = 0;
	int rc;

	for (i = 0; i < n; i++) {
		if (pending[i] && rcs[i] == 0) {
			metas[ne].key = tide_store_mstr(keys[i]);
			metas[ne].object_checksum.has = false;
			metas[ne].object_checksum.val = 0;
			idx[ne++] = i;
		}
	}
	if (ne > 0) {
		req_init(&r, TIDE_MC_FN_BATCH_PUT_END);
		r.u.batch_put_end.client_id = s->client_id;
		r.u.batch_put_end.metas.v = metas;
		r.u.batch_put_end.metas.n = ne;
		r.u.batch_put_end.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.batch_put_end.tenant_id = tenant_default;
		do {
			rc = tide_mc_pool_call(&s->mc, &r, &resp);
		} while (rc != 0 && failover_retry(s, rc, &until));
		for (i = 0; i < ne; i++)
			rcs[idx[i]] = rc != 0 ? rc : vec_status(&resp, i);
		if (rc == 0)
			tide_mc_resp_free(&resp);
	}
	for (i = 0; i < n; i++)
		if (pending[i] && rcs[i] != 0)
			ks[nr++] = tide_store_mstr(keys[i]);
	/* Nothing partly stored (or not ended) may stay visible. */
	if (nr > 0) {
		req_init(&r, TIDE_MC_FN_BATCH_PUT_REVOKE);
		r.u.batch_put_revoke.client_id = s->client_id;
		r.u.batch_put_revoke.keys.v = ks;
		r.u.batch_put_revoke.keys.n = nr;
		r.u.batch_put_revoke.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.batch_put_revoke.tenant_id = tenant_default;
		rc = tide_mc_pool_call(&s->mc, &r, &resp);
		if (rc == 0)
			tide_mc_resp_free(&resp);
		else
			TIDE_LOG_RATELIMIT(WARN, 5, "BatchPutRevoke of %zu keys failed: %d", nr,
					   rc);
	}
}

static int
first_error(const int *rcs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (rcs[i] != 0)
			return rcs[i];
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
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	struct xfer *x = NULL;
	size_t *idx, *owner = NULL, nx = 0, cap = 0, nstrs, i, k;
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
	req_init(&r, TIDE_MC_FN_BATCH_PUT_START);
	r.u.batch_put_start.client_id = s->client_id;
	r.u.batch_put_start.keys.v = ks;
	r.u.batch_put_start.keys.n = n;
	r.u.batch_put_start.slice_lengths.v = slens;
	r.u.batch_put_start.slice_lengths.n = n;
	r.u.batch_put_start.config = cfg;
	r.u.batch_put_start.tenant_id = tenant_default;
	ret = tide_mc_pool_call(&s->mc, &r, &resp);
	if (ret != 0)
		goto out;
	for (i = 0; i < n; i++) {
		const struct tide_mc_exp_replicas *e =
			i < resp.u.batch_put_start.n ? &resp.u.batch_put_start.v[i] : NULL;

		rcs[i] = 0;
		if (e == NULL) {
			rcs[i] = -EBADMSG;
		} else if (!e->ok) {
			/* Spec 5.3: an existing key is a successful put. */
			rcs[i] = e->err == TIDE_MC_EC_OBJECT_ALREADY_EXISTS ? 0
									    : ec_to_errno(e->err);
		} else {
			pending[i] = true;
			cap += e->val.n;
		}
	}
	sc2.heap = NULL;
	if (cap > 0 && sc_init(&sc2, sc_size(cap, sizeof(*x)) + sc_size(cap, sizeof(*owner)))) {
		x = sc_take(&sc2, cap, sizeof(*x));
		owner = sc_take(&sc2, cap, sizeof(*owner));
	}
	for (i = 0; i < n; i++) {
		size_t mark = nx;

		if (!pending[i])
			continue;
		if (x == NULL) {
			rcs[i] = cap > 0 ? -ENOMEM : -EREMOTEIO;
			continue;
		}
		rcs[i] = replica_writes(&resp.u.batch_put_start.v[i].val, bufs[i], lens[i], x, &nx);
		if (rcs[i] != 0) {
			nx = mark; /* none of this key's replicas is written */
			continue;
		}
		for (k = mark; k < nx; k++)
			owner[k] = i;
	}
	if (nx > 0)
		transfer(s, TIDE_TE_WRITE, x, nx);
	for (k = 0; k < nx; k++)
		if (x[k].rc != 0 && rcs[owner[k]] == 0)
			rcs[owner[k]] = x[k].rc;
	free(sc2.heap);
	tide_mc_resp_free(&resp);
	batch_finish(s, keys, n, pending, rcs, ks, metas, idx);
	ret = first_error(rcs, n);
out:
	free(sc.heap);
	return ret;
}

/* BatchGetReplicaList of n keys; resp valid (free it) on 0. ks: n-entry scratch. */
static int
batch_replica_list(struct tide_store *s, const char *const *keys, size_t n, struct tide_mc_str *ks,
		   struct tide_mc_resp *resp)
{
	struct tide_mc_req r;
	uint64_t until = 0;
	int rc;

	for (size_t i = 0; i < n; i++)
		ks[i] = tide_store_mstr(keys[i]);
	req_init(&r, TIDE_MC_FN_BATCH_GET_REPLICA_LIST);
	r.u.keys.keys.v = ks;
	r.u.keys.keys.n = n;
	r.u.keys.tenant_id = tenant_default;
	do {
		rc = tide_mc_pool_call(&s->mc, &r, resp);
	} while (rc != 0 && failover_retry(s, rc, &until));
	return rc;
}

int
tide_store_batch_get_into(struct tide_store *s, const char *const *keys, void *const *bufs,
			  const size_t *lens, size_t n, int64_t *sizes)
{
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct scratch sc;
	struct xfer *x;
	size_t *owner, nx = 0, i, k;
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
	ret = batch_replica_list(s, keys, n, ks, &resp);
	if (ret != 0)
		goto out;
	for (i = 0; i < n; i++) {
		const struct tide_mc_exp_replica_list *e =
			i < resp.u.batch_replica_list.n ? &resp.u.batch_replica_list.v[i] : NULL;
		const struct tide_mc_buffer_desc *bd = NULL;

		sizes[i] = -EAGAIN;
		if (e == NULL) {
			sizes[i] = -EBADMSG;
			continue;
		}
		if (!e->ok) {
			sizes[i] = ec_to_errno(e->err);
			continue;
		}
		for (k = 0; k < e->val.replicas.n && bd == NULL; k++)
			bd = complete_memory(&e->val.replicas.v[k]);
		if (bd == NULL)
			continue;
		if (bd->size > lens[i]) {
			sizes[i] = -ENOBUFS;
			continue;
		}
		sizes[i] = (int64_t)bd->size;
		x[nx].ep = bd->transport_endpoint.ptr;
		x[nx].raddr = bd->buffer_address;
		x[nx].local = bufs[i];
		x[nx].len = bd->size;
		owner[nx++] = i;
	}
	if (nx > 0)
		transfer(s, TIDE_TE_READ, x, nx);
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

/* What get_into_ranges knows about one key. */
struct rkey {
	const struct tide_mc_replica_desc_vec *reps; /* NULL: err */
	uint64_t size;
	uint64_t lease_ms;
	int err;
};

/* The next COMPLETE memory replica at or after *from (advanced past it), or NULL. */
static const struct tide_mc_buffer_desc *
next_replica(const struct rkey *k, uint32_t *from)
{
	const struct tide_mc_buffer_desc *bd;

	while (*from < k->reps->n) {
		bd = complete_memory(&k->reps->v[(*from)++]);
		if (bd != NULL)
			return bd;
	}
	return NULL;
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
	const struct tide_mc_buffer_desc *bd;
	struct tide_mc_resp resp;
	struct tide_mc_str *ks;
	struct scratch sc;
	struct rkey *ki;
	struct xfer *x;
	uint32_t *next;
	bool *todo;
	size_t *owner, nx, i, f;
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
	t0 = now_ms();
	ret = batch_replica_list(s, keys, nkeys, ks, &resp);
	if (ret != 0)
		goto out;
	for (i = 0; i < nkeys; i++) {
		const struct tide_mc_exp_replica_list *e =
			i < resp.u.batch_replica_list.n ? &resp.u.batch_replica_list.v[i] : NULL;
		uint32_t from = 0;

		ki[i].reps = NULL;
		ki[i].err = e == NULL ? -EBADMSG : !e->ok ? ec_to_errno(e->err) : 0;
		if (ki[i].err != 0)
			continue;
		ki[i].reps = &e->val.replicas;
		ki[i].lease_ms = e->val.lease_ttl_ms;
		bd = next_replica(&ki[i], &from);
		if (bd == NULL) {
			ki[i].reps = NULL;
			ki[i].err = -EAGAIN; /* no COMPLETE replica */
			continue;
		}
		ki[i].size = bd->size;
	}
	/* Fragments that cannot be read are settled now; the others read in rounds. */
	for (f = 0; f < nfrags; f++) {
		struct tide_store_frag *fr = &frags[f];

		next[f] = 0;
		todo[f] = false;
		if (fr->key >= nkeys)
			fr->result = -EINVAL;
		else if (ki[fr->key].err != 0)
			fr->result = ki[fr->key].err;
		else if (fr->src_off > ki[fr->key].size || fr->len > ki[fr->key].size - fr->src_off)
			fr->result = -EINVAL;
		else if (fr->len == 0)
			fr->result = 0;
		else
			todo[f] = true;
	}
	for (;;) {
		nx = 0;
		for (f = 0; f < nfrags; f++) {
			if (!todo[f])
				continue;
			bd = next_replica(&ki[frags[f].key], &next[f]);
			if (bd == NULL) {
				todo[f] = false; /* every replica failed: keeps the last error */
				continue;
			}
			x[nx].ep = bd->transport_endpoint.ptr;
			x[nx].raddr = bd->buffer_address + frags[f].src_off;
			x[nx].local = frags[f].dst;
			x[nx].len = frags[f].len;
			owner[nx++] = f;
		}
		if (nx == 0)
			break;
		transfer(s, TIDE_TE_READ, x, nx);
		for (i = 0; i < nx; i++) {
			f = owner[i];
			frags[f].result = x[i].rc == 0 ? (int64_t)frags[f].len : x[i].rc;
			todo[f] = x[i].rc != 0;
		}
	}
	/* As get_into: past the read lease the bytes may come from a reused buffer. */
	for (f = 0; f < nfrags; f++) {
		struct tide_store_frag *fr = &frags[f];

		if (fr->result > 0 && fr->key < nkeys && ki[fr->key].lease_ms != 0 &&
		    now_ms() - t0 > ki[fr->key].lease_ms)
			fr->result = -ESTALE;
	}
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
	struct tide_mc_req r;
	struct scratch sc;
	int ret;

	if (!sc_init(&sc, sc_size(n, sizeof(*ks))))
		return -ENOMEM;
	ks = sc_take(&sc, n, sizeof(*ks));
	for (size_t i = 0; i < n; i++)
		ks[i] = tide_store_mstr(keys[i]);
	req_init(&r, fn);
	if (fn == TIDE_MC_FN_BATCH_REMOVE) {
		r.u.batch_remove.keys.v = ks;
		r.u.batch_remove.keys.n = n;
		r.u.batch_remove.force = force;
		r.u.batch_remove.tenant_id = tenant_default;
	} else {
		r.u.keys.keys.v = ks;
		r.u.keys.keys.n = n;
		r.u.keys.tenant_id = tenant_default;
	}
	ret = tide_mc_pool_call(&s->mc, &r, resp);
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
			out[i] = e->err == TIDE_MC_EC_OBJECT_NOT_FOUND ? 0 : ec_to_errno(e->err);
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
		rcs[i] = vec_status(&resp, i);
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

const char *
tide_store_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -ENOENT:
		return "no such object";
	case -EEXIST:
		return "object already exists";
	case -ENOSPC:
		return "no space in any segment (NO_AVAILABLE_HANDLE)";
	case -ENOBUFS:
		return "buffer too small for the object";
	case -EAGAIN:
		return "object not complete yet (no COMPLETE replica)";
	case -EBUSY:
		return "object has a lease or a replication task";
	case -EREMOTEIO:
		return "master reported an error";
	case -ENODEV:
		return "segment or client unknown to the master";
	case -EPROTO:
		return "master version mismatch";
	case -ESTALE:
		return "read lease expired during the read (LEASE_EXPIRED): data may be stale";
	default:
		return err < 0 ? tide_te_strerror(err) : "unknown error";
	}
}
