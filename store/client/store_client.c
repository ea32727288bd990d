/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Store client core (spec mooncake-master.md section 5): placement through the
 * master, bytes through the transfer engine.
 *
 * Two master connections: `mc` for caller operations (serialised by `mc_lock`,
 * since a tide_mc_client belongs to one thread at a time) and `hb_mc` owned by
 * the heartbeat thread alone, so a slow put never delays a Ping past the
 * master's client TTL.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tide_log.h"
#include "tide_mc_client.h"
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

struct tide_store {
	bool set_up;
	char *hostname; /* local_hostname as given */
	char *proto;    /* "tcp" / "rdma" */
	char *master;   /* "host:port" */
	struct tide_te *te;
	struct tide_mc_client *mc;
	pthread_mutex_t mc_lock;
	struct tide_mc_uuid client_id;
	struct tide_mc_uuid seg_id;
	void *seg_base; /* NULL: nothing contributed */
	size_t seg_size;
	bool seg_registered;
	bool mounted;
	/* Heartbeat. */
	struct tide_mc_client *hb_mc;
	pthread_t hb_thread;
	bool hb_running;
	bool hb_stop;
	pthread_mutex_t hb_lock;
	pthread_cond_t hb_cond;
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

static struct tide_mc_str
mstr(const char *p)
{
	struct tide_mc_str r = {(char *)p, p ? strlen(p) : 0};

	return r;
}

static void
segment_fill(const struct tide_store *s, struct tide_mc_segment *seg)
{
	memset(seg, 0, sizeof(*seg));
	seg->id = s->seg_id;
	seg->name = mstr(s->hostname);
	seg->base = (uint64_t)(uintptr_t)s->seg_base;
	seg->size = s->seg_size;
	seg->te_endpoint = mstr(tide_te_local_name(s->te));
	seg->protocol = mstr(s->proto);
	seg->host_id = mstr("");
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
	pthread_mutex_init(&s->mc_lock, NULL);
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
	int32_t status = 0, ec = 0;
	int rc;

	if (s->hb_mc == NULL || !tide_mc_client_connected(s->hb_mc)) {
		tide_mc_client_close(s->hb_mc);
		s->hb_mc = NULL;
		rc = tide_mc_client_connect_addr(s->master, 0, &s->hb_mc);
		if (rc != 0) {
			(*fails)++;
			TIDE_LOG(WARN, "heartbeat: reconnect to %s: %s", s->master, strerror(-rc));
			return;
		}
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
		while (!s->hb_stop &&
		       pthread_cond_timedwait(&s->hb_cond, &s->hb_lock, &dl) != ETIMEDOUT) {
		}
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

/* Undo whatever setup did; safe on a partly set-up store. */
static void
teardown(struct tide_store *s)
{
	int32_t ec;

	hb_stop(s);
	if (s->mounted && s->mc != NULL) {
		if (tide_mc_client_unmount(s->mc, &s->seg_id, &s->client_id, &ec) != 0 || ec != 0)
			TIDE_LOG(WARN, "unmount of our segment failed");
	}
	s->mounted = false;
	/* The engine goes before the memory: peers may still be copying into it. */
	tide_te_destroy(s->te);
	s->te = NULL;
	s->seg_registered = false;
	if (s->seg_base != NULL)
		munmap(s->seg_base, s->seg_size);
	s->seg_base = NULL;
	s->seg_size = 0;
	tide_mc_client_close(s->mc);
	s->mc = NULL;
	free(s->hostname);
	free(s->proto);
	free(s->master);
	s->hostname = s->proto = s->master = NULL;
	s->set_up = false;
}

/* Split "host[:port]" (port 0 when absent). */
static int
split_hostport(const char *hp, char *host, size_t hlen, uint16_t *port)
{
	const char *colon = strrchr(hp, ':');
	size_t n = colon ? (size_t)(colon - hp) : strlen(hp);
	char *end;
	unsigned long p = 0;

	if (n == 0 || n >= hlen)
		return -EINVAL;
	memcpy(host, hp, n);
	host[n] = '\0';
	if (colon != NULL) {
		errno = 0;
		p = strtoul(colon + 1, &end, 10);
		if (errno != 0 || end == colon + 1 || *end != '\0' || p > 65535)
			return -EINVAL;
	}
	*port = (uint16_t)p;
	return 0;
}

static int
setup_master(struct tide_store *s)
{
	char version[VERSION_MAX];
	int32_t ec = 0;
	int rc;

	rc = tide_mc_client_connect_addr(s->master, 0, &s->mc);
	if (rc != 0) {
		TIDE_LOG(ERR, "connect to master %s: %s", s->master, strerror(-rc));
		return rc;
	}
	rc = tide_mc_client_service_ready(s->mc, version, sizeof(version), &ec);
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
		TIDE_LOG(ERR, "transport %s: %s", s->proto, tide_te_strerror(rc));
		return rc;
	}
	return 0;
}

static int
setup_segment(struct tide_store *s, uint64_t size)
{
	struct tide_mc_segment seg;
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
	rc = tide_mc_client_mount(s->mc, &seg, &s->client_id, &ec);
	if (rc != 0 || ec != 0) {
		TIDE_LOG(ERR, "MountSegment failed (%d/%d)", rc, ec);
		return mc_result(rc, ec);
	}
	s->mounted = true;
	return hb_start(s);
}

int
tide_store_setup(struct tide_store *s, const struct tide_store_cfg *cfg)
{
	int rc;

	if (s == NULL || cfg == NULL || s->set_up || cfg->local_hostname == NULL ||
	    cfg->metadata_server == NULL || cfg->master_server_addr == NULL)
		return -EINVAL;
	s->hostname = strdup(cfg->local_hostname);
	s->proto = strdup(cfg->protocol != NULL && cfg->protocol[0] ? cfg->protocol : "tcp");
	s->master = strdup(cfg->master_server_addr);
	if (s->hostname == NULL || s->proto == NULL || s->master == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = random_uuid(&s->client_id);
	if (rc == 0)
		rc = setup_master(s);
	if (rc == 0)
		rc = setup_engine(s, cfg);
	if (rc == 0)
		rc = setup_segment(s, cfg->global_segment_size);
	if (rc != 0)
		goto fail;
	s->set_up = true;
	TIDE_LOG(INFO, "store %s joined master %s (segment %zu bytes, endpoint %s)", s->hostname,
		 s->master, s->seg_size, tide_te_local_name(s->te));
	return 0;
fail:
	teardown(s);
	return rc;
}

void
tide_store_close(struct tide_store *s)
{
	if (s == NULL)
		return;
	teardown(s);
	pthread_cond_destroy(&s->hb_cond);
	pthread_mutex_destroy(&s->hb_lock);
	pthread_mutex_destroy(&s->mc_lock);
	free(s);
}

const char *
tide_store_endpoint(const struct tide_store *s)
{
	return s != NULL && s->te != NULL ? tide_te_local_name(s->te) : "";
}

/* ------------------------------------------------------------------------------ transfers */

/*
 * One batch of n requests, each against the named segment of the same index.
 * rcs[i] gets 0 or the request's error. Returns 0 when every request completed,
 * else the first error.
 */
static int transfer_reqs(struct tide_store *s, enum tide_te_op op, const char *const *ep,
			 const uint64_t *raddr, void *const *local, const uint64_t *len, uint32_t n,
			 int *rcs, struct tide_te_req *reqs);

static int
transfer(struct tide_store *s, enum tide_te_op op, const char *const *ep, const uint64_t *raddr,
	 void *const *local, const uint64_t *len, uint32_t n, int *rcs)
{
	struct tide_te_req *reqs = calloc(n ? n : 1, sizeof(*reqs));
	int rc = reqs ? transfer_reqs(s, op, ep, raddr, local, len, n, rcs, reqs) : -ENOMEM;

	free(reqs);
	return rc;
}

static int
transfer_reqs(struct tide_store *s, enum tide_te_op op, const char *const *ep,
	      const uint64_t *raddr, void *const *local, const uint64_t *len, uint32_t n, int *rcs,
	      struct tide_te_req *reqs)
{
	struct tide_te_status st;
	tide_te_batch_t b;
	int first = 0, rc;
	uint32_t i, sub = 0;

	for (i = 0; i < n; i++) {
		rcs[i] = tide_te_open_segment(s->te, ep[i], &reqs[sub].seg);
		if (rcs[i] != 0) {
			TIDE_LOG(WARN, "open segment %s: %s", ep[i], tide_te_strerror(rcs[i]));
			if (first == 0)
				first = rcs[i];
			continue;
		}
		reqs[sub].op = op;
		reqs[sub].local = local[i];
		reqs[sub].remote_addr = raddr[i];
		reqs[sub].len = len[i];
		sub++;
	}
	if (sub == 0)
		return first;
	rc = tide_te_batch_alloc(s->te, sub, &b);
	if (rc != 0)
		return rc;
	rc = tide_te_submit(s->te, b, reqs, sub);
	if (rc == 0)
		rc = tide_te_wait(s->te, b, XFER_WAIT_MS);
	if (rc != 0) {
		/* Requests may still be in flight: the batch cannot be freed yet; the
		 * engine fails them within io_timeout_ms, so wait once more. */
		tide_te_wait(s->te, b, -1);
		tide_te_batch_free(s->te, b);
		return rc;
	}
	for (i = 0, sub = 0; i < n; i++) {
		if (rcs[i] != 0)
			continue;
		rc = tide_te_status(s->te, b, sub, &st);
		if (rc == 0 && st.state != TIDE_TE_COMPLETED)
			rc = st.error != 0 ? st.error : -EIO;
		if (rc != 0) {
			/* The handle stays open: other threads may be using it, and the engine
			 * fetches a restarted peer's descriptor again by itself. */
			TIDE_LOG(WARN, "transfer with %s failed: %s", ep[i], tide_te_strerror(rc));
			rcs[i] = rc;
			if (first == 0)
				first = rc;
		}
		sub++;
	}
	tide_te_batch_free(s->te, b);
	return first;
}

/* ---------------------------------------------------------------------------- operations */

int
tide_store_put(struct tide_store *s, const char *key, const void *buf, size_t len,
	       unsigned replica_num)
{
	struct tide_mc_resp resp;
	int32_t ec = 0, ec2 = 0;
	int rc, rc2;
	size_t i, n;

	if (s == NULL || !s->set_up || key == NULL || key[0] == '\0' || replica_num == 0 ||
	    (buf == NULL && len > 0))
		return -EINVAL;
	pthread_mutex_lock(&s->mc_lock);
	rc = tide_mc_client_put_start(s->mc, &s->client_id, key, len, replica_num, &resp, &ec);
	pthread_mutex_unlock(&s->mc_lock);
	if (rc != 0)
		return rc;
	if (ec != 0) {
		tide_mc_resp_free(&resp);
		/* Spec 5.3 step 1: an existing key is a successful put. */
		return ec == TIDE_MC_EC_OBJECT_ALREADY_EXISTS ? 0 : ec_to_errno(ec);
	}
	n = resp.u.put_start.val.n;
	{
		const char *ep[n ? n : 1];
		uint64_t raddr[n ? n : 1], lens[n ? n : 1];
		void *loc[n ? n : 1];
		int rcs[n ? n : 1];
		uint32_t m = 0;

		rc = n == 0 ? -EREMOTEIO : 0;
		for (i = 0; i < n && rc == 0; i++) {
			const struct tide_mc_replica_desc *d = &resp.u.put_start.val.v[i];
			const struct tide_mc_buffer_desc *bd = &d->u.memory;

			if (d->kind != TIDE_MC_RK_MEMORY || bd->size < len) {
				/* Only memory replicas exist at this master (spec 3.3). */
				rc = -EREMOTEIO;
				break;
			}
			ep[m] = bd->transport_endpoint.ptr;
			raddr[m] = bd->buffer_address;
			loc[m] = (void *)(uintptr_t)buf;
			lens[m] = len;
			m++;
		}
		if (rc == 0)
			rc = transfer(s, TIDE_TE_WRITE, ep, raddr, loc, lens, m, rcs);
	}
	tide_mc_resp_free(&resp);
	pthread_mutex_lock(&s->mc_lock);
	if (rc == 0) {
		rc = mc_result(tide_mc_client_put_end(s->mc, &s->client_id, key, &ec), ec);
		if (rc != 0)
			TIDE_LOG(WARN, "PutEnd %s failed: %s", key, tide_store_strerror(rc));
	} else {
		/* Nothing partly written may stay visible. */
		rc2 = tide_mc_client_put_revoke(s->mc, &s->client_id, key, &ec2);
		if (rc2 != 0 || ec2 != 0)
			TIDE_LOG(WARN, "PutRevoke %s failed (%d/%d)", key, rc2, ec2);
	}
	pthread_mutex_unlock(&s->mc_lock);
	return rc;
}

/* GetReplicaList under the lock; resp is valid (free it) when 0 is returned. */
static int
replica_list(struct tide_store *s, const char *key, struct tide_mc_resp *resp)
{
	int32_t ec = 0;
	int rc;

	if (s == NULL || !s->set_up || key == NULL || key[0] == '\0')
		return -EINVAL;
	pthread_mutex_lock(&s->mc_lock);
	rc = tide_mc_client_get_replica_list(s->mc, key, resp, &ec);
	pthread_mutex_unlock(&s->mc_lock);
	if (rc != 0)
		return rc;
	if (ec != 0) {
		tide_mc_resp_free(resp);
		return ec_to_errno(ec);
	}
	return 0;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const struct tide_mc_buffer_desc *
complete_memory(const struct tide_mc_replica_desc *d)
{
	if (d->status != TIDE_MC_RS_COMPLETE ||
	    (d->kind != TIDE_MC_RK_MEMORY && d->kind != TIDE_MC_RK_NOF))
		return NULL;
	return &d->u.memory;
}

int64_t
tide_store_get_into(struct tide_store *s, const char *key, void *buf, size_t len)
{
	const struct tide_mc_buffer_desc *bd;
	struct tide_mc_resp resp;
	int64_t ret = -EAGAIN;
	uint64_t t0, lease;
	int rc;
	size_t i;

	if (buf == NULL && len > 0)
		return -EINVAL;
	t0 = now_ms();
	rc = replica_list(s, key, &resp);
	if (rc != 0)
		return rc;
	for (i = 0; i < resp.u.replica_list.val.replicas.n; i++) {
		bd = complete_memory(&resp.u.replica_list.val.replicas.v[i]);
		if (bd == NULL)
			continue;
		if (bd->size > len) {
			ret = -ENOBUFS;
			break;
		}
		{
			const char *ep = bd->transport_endpoint.ptr;
			uint64_t raddr = bd->buffer_address, l = bd->size;
			void *loc = buf;
			int one;

			rc = transfer(s, TIDE_TE_READ, &ep, &raddr, &loc, &l, 1, &one);
		}
		if (rc == 0) {
			/* Spec 5.4: past the lease the buffer may have been reused (LEASE_EXPIRED).
			 */
			lease = resp.u.replica_list.val.lease_ttl_ms;
			ret = lease != 0 && now_ms() - t0 > lease ? -ESTALE : (int64_t)bd->size;
			break;
		}
		/* Spec 5.4 picks the first COMPLETE replica; we also fall back on failure. */
		ret = rc;
	}
	tide_mc_resp_free(&resp);
	return ret;
}

int64_t
tide_store_get_size(struct tide_store *s, const char *key)
{
	const struct tide_mc_buffer_desc *bd;
	struct tide_mc_resp resp;
	int64_t ret = -EAGAIN;
	size_t i;
	int rc;

	rc = replica_list(s, key, &resp);
	if (rc != 0)
		return rc;
	for (i = 0; i < resp.u.replica_list.val.replicas.n; i++) {
		bd = complete_memory(&resp.u.replica_list.val.replicas.v[i]);
		if (bd != NULL) {
			ret = (int64_t)bd->size;
			break;
		}
	}
	tide_mc_resp_free(&resp);
	return ret;
}

int
tide_store_is_exist(struct tide_store *s, const char *key)
{
	bool exists = false;
	int32_t ec = 0;
	int rc;

	if (s == NULL || !s->set_up || key == NULL || key[0] == '\0')
		return -EINVAL;
	pthread_mutex_lock(&s->mc_lock);
	rc = tide_mc_client_exist_key(s->mc, key, &exists, &ec);
	pthread_mutex_unlock(&s->mc_lock);
	rc = mc_result(rc, ec);
	if (rc == -ENOENT)
		return 0;
	return rc != 0 ? rc : exists ? 1 : 0;
}

int
tide_store_remove(struct tide_store *s, const char *key, bool force)
{
	int32_t ec = 0;
	int rc;

	if (s == NULL || !s->set_up || key == NULL || key[0] == '\0')
		return -EINVAL;
	pthread_mutex_lock(&s->mc_lock);
	rc = tide_mc_client_remove(s->mc, key, force, &ec);
	pthread_mutex_unlock(&s->mc_lock);
	return mc_result(rc, ec);
}

int64_t
tide_store_remove_all(struct tide_store *s, bool force)
{
	int64_t removed = 0;
	int rc;

	if (s == NULL || !s->set_up)
		return -EINVAL;
	pthread_mutex_lock(&s->mc_lock);
	rc = tide_mc_client_remove_all(s->mc, force, &removed);
	pthread_mutex_unlock(&s->mc_lock);
	if (rc != 0)
		return rc;
	return removed < 0 ? 0 : removed;
}

/* ------------------------------------------------------------------------------ batches */

static const struct tide_mc_str tenant_default = {(char *)"default", 7};

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
 * the pending ones that failed; an End that fails turns rcs[i] into its error.
 */

/* One generic master RPC, serialised with every other call on the connection. */
static int
mc_call(struct tide_store *s, const struct tide_mc_req *r, struct tide_mc_resp *resp)
{
	int rc;
	pthread_mutex_lock(&s->mc_lock);
	rc = tide_mc_client_call(s->mc, r, resp, NULL);
	pthread_mutex_unlock(&s->mc_lock);
	return rc;
}

static void
batch_finish(struct tide_store *s, const char *const *keys, size_t n, const bool *pending, int *rcs,
	     struct tide_mc_str *ks, struct tide_mc_object_meta *metas, size_t *idx)
{
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	size_t ne = 0, nr = 0, i;
	int rc;

	for (i = 0; i < n; i++) {
		if (pending[i] && rcs[i] == 0) {
			metas[ne].key = mstr(keys[i]);
			metas[ne].object_checksum.has = false;
			idx[ne++] = i;
		}
	}
	if (ne > 0) {
		memset(&r, 0, sizeof(r));
		r.fn = TIDE_MC_FN_BATCH_PUT_END;
		r.layout = TIDE_MC_LAYOUT_HEAD;
		r.u.batch_put_end.client_id = s->client_id;
		r.u.batch_put_end.metas.v = metas;
		r.u.batch_put_end.metas.n = ne;
		r.u.batch_put_end.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.batch_put_end.tenant_id = tenant_default;
		rc = mc_call(s, &r, &resp);
		for (i = 0; i < ne; i++)
			rcs[idx[i]] = rc != 0 ? rc : vec_status(&resp, i);
		if (rc == 0)
			tide_mc_resp_free(&resp);
	}
	for (i = 0; i < n; i++)
		if (pending[i] && rcs[i] != 0 && nr < n)
			ks[nr++] = mstr(keys[i]);
	/* Ends that failed are revoked too: nothing partly stored stays visible. */
	if (nr > 0) {
		memset(&r, 0, sizeof(r));
		r.fn = TIDE_MC_FN_BATCH_PUT_REVOKE;
		r.layout = TIDE_MC_LAYOUT_HEAD;
		r.u.batch_put_revoke.client_id = s->client_id;
		r.u.batch_put_revoke.keys.v = ks;
		r.u.batch_put_revoke.keys.n = nr;
		r.u.batch_put_revoke.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.batch_put_revoke.tenant_id = tenant_default;
		rc = mc_call(s, &r, &resp);
		if (rc == 0)
			tide_mc_resp_free(&resp);
		else
			TIDE_LOG(WARN, "BatchPutRevoke of %zu keys failed: %d", nr, rc);
	}
}

int
tide_store_batch_put_from(struct tide_store *s, const char *const *keys, const void *const *bufs,
			  const size_t *lens, size_t n, unsigned replica_num, int *rcs)
{
	struct tide_mc_str *ks = NULL;
	struct tide_mc_object_meta *metas = NULL;
	uint64_t *slens = NULL, *raddr = NULL, *xlen = NULL;
	const char **ep = NULL;
	void **loc = NULL;
	size_t *owner = NULL, *idx = NULL, nx = 0, cap = 0, i, k;
	int *xrc = NULL, first = 0, rc;
	bool *pending = NULL;
	struct tide_mc_resp resp;
	struct tide_mc_req r;

	if (s == NULL || !s->set_up || keys == NULL || bufs == NULL || lens == NULL ||
	    rcs == NULL || n == 0 || n > UINT32_MAX || replica_num == 0)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (keys[i] == NULL || keys[i][0] == '\0' || (bufs[i] == NULL && lens[i] > 0))
			return -EINVAL;
	ks = calloc(n, sizeof(*ks));
	metas = calloc(n, sizeof(*metas));
	slens = calloc(n, sizeof(*slens));
	pending = calloc(n, sizeof(*pending));
	idx = calloc(n, sizeof(*idx));
	if (!ks || !metas || !slens || !pending || !idx) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		ks[i] = mstr(keys[i]);
		slens[i] = lens[i];
		rcs[i] = 0;
	}
	memset(&r, 0, sizeof(r));
	r.fn = TIDE_MC_FN_BATCH_PUT_START;
	r.layout = TIDE_MC_LAYOUT_HEAD;
	r.u.batch_put_start.client_id = s->client_id;
	r.u.batch_put_start.keys.v = ks;
	r.u.batch_put_start.keys.n = n;
	r.u.batch_put_start.slice_lengths.v = slens;
	r.u.batch_put_start.slice_lengths.n = n;
	r.u.batch_put_start.config.replica_num = replica_num;
	r.u.batch_put_start.tenant_id = tenant_default;
	rc = mc_call(s, &r, &resp);
	if (rc != 0)
		goto out;
	for (i = 0; i < n; i++) {
		const struct tide_mc_exp_replicas *e =
			i < resp.u.batch_put_start.n ? &resp.u.batch_put_start.v[i] : NULL;

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
	ep = calloc(cap + 1, sizeof(*ep));
	raddr = calloc(cap + 1, sizeof(*raddr));
	xlen = calloc(cap + 1, sizeof(*xlen));
	loc = calloc(cap + 1, sizeof(*loc));
	xrc = calloc(cap + 1, sizeof(*xrc));
	owner = calloc(cap + 1, sizeof(*owner));
	if (!ep || !raddr || !xlen || !loc || !xrc || !owner || cap > UINT32_MAX) {
		for (i = 0; i < n; i++)
			if (pending[i])
				rcs[i] = -ENOMEM;
	} else {
		for (i = 0; i < n; i++) {
			const struct tide_mc_replica_desc_vec *v;

			if (!pending[i])
				continue;
			v = &resp.u.batch_put_start.v[i].val;
			if (v->n == 0)
				rcs[i] = -EREMOTEIO;
			for (k = 0; k < v->n; k++) {
				const struct tide_mc_buffer_desc *bd = &v->v[k].u.memory;

				if (v->v[k].kind != TIDE_MC_RK_MEMORY || bd->size < lens[i]) {
					rcs[i] = -EREMOTEIO;
					continue;
				}
				ep[nx] = bd->transport_endpoint.ptr;
				raddr[nx] = bd->buffer_address;
				xlen[nx] = lens[i];
				loc[nx] = (void *)(uintptr_t)bufs[i];
				owner[nx++] = i;
			}
		}
		if (nx > 0)
			transfer(s, TIDE_TE_WRITE, ep, raddr, loc, xlen, (uint32_t)nx, xrc);
		for (k = 0; k < nx; k++)
			if (xrc[k] != 0 && rcs[owner[k]] == 0)
				rcs[owner[k]] = xrc[k];
	}
	batch_finish(s, keys, n, pending, rcs, ks, metas, idx);
	tide_mc_resp_free(&resp);
	for (i = 0; i < n && first == 0; i++)
		first = rcs[i];
	rc = first;
out:
	free(ks);
	free(metas);
	free(slens);
	free(pending);
	free(idx);
	free(ep);
	free(raddr);
	free(xlen);
	free(loc);
	free(xrc);
	free(owner);
	return rc;
}

int
tide_store_batch_get_into(struct tide_store *s, const char *const *keys, void *const *bufs,
			  const size_t *lens, size_t n, int64_t *sizes)
{
	struct tide_mc_str *ks = NULL;
	uint64_t *raddr = NULL, *xlen = NULL;
	const char **ep = NULL;
	size_t *owner = NULL, nx = 0, i, k;
	int *xrc = NULL, first = 0, rc;
	struct tide_mc_resp resp;
	struct tide_mc_req r;

	if (s == NULL || !s->set_up || keys == NULL || bufs == NULL || lens == NULL ||
	    sizes == NULL || n == 0 || n > UINT32_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (keys[i] == NULL || keys[i][0] == '\0' || (bufs[i] == NULL && lens[i] > 0))
			return -EINVAL;
	ks = calloc(n, sizeof(*ks));
	ep = calloc(n, sizeof(*ep));
	raddr = calloc(n, sizeof(*raddr));
	xlen = calloc(n, sizeof(*xlen));
	xrc = calloc(n, sizeof(*xrc));
	owner = calloc(n, sizeof(*owner));
	if (!ks || !ep || !raddr || !xlen || !xrc || !owner) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		ks[i] = mstr(keys[i]);
	memset(&r, 0, sizeof(r));
	r.fn = TIDE_MC_FN_BATCH_GET_REPLICA_LIST;
	r.layout = TIDE_MC_LAYOUT_HEAD;
	r.u.keys.keys.v = ks;
	r.u.keys.keys.n = n;
	r.u.keys.tenant_id = tenant_default;
	rc = mc_call(s, &r, &resp);
	if (rc != 0)
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
		ep[nx] = bd->transport_endpoint.ptr;
		raddr[nx] = bd->buffer_address;
		xlen[nx] = bd->size;
		owner[nx++] = i;
	}
	if (nx > 0) {
		void **loc = calloc(nx, sizeof(*loc));

		if (loc == NULL) {
			for (k = 0; k < nx; k++)
				xrc[k] = -ENOMEM;
		} else {
			for (k = 0; k < nx; k++)
				loc[k] = bufs[owner[k]];
			transfer(s, TIDE_TE_READ, ep, raddr, loc, xlen, (uint32_t)nx, xrc);
			free(loc);
		}
	}
	tide_mc_resp_free(&resp);
	/* A failed first replica: the single-key path tries the others. */
	for (k = 0; k < nx; k++)
		if (xrc[k] != 0)
			sizes[owner[k]] = tide_store_get_into(s, keys[owner[k]], bufs[owner[k]],
							      lens[owner[k]]);
	for (i = 0; i < n && first == 0; i++)
		first = sizes[i] < 0 ? (int)sizes[i] : 0;
	rc = first;
out:
	free(ks);
	free(ep);
	free(raddr);
	free(xlen);
	free(xrc);
	free(owner);
	return rc;
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
