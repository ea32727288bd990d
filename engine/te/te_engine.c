/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transfer engine core: registered memory, segments (descriptor cache),
 * batches and request status. Data moves in the transports (te_xport.h);
 * this file only splits requests into slices and accounts for them.
 *
 * Locks, in the order they may nest: seg_lock (segment table: slot use and
 * names), then a segment's own lock (its descriptor and peer; held across a
 * descriptor fetch, so a slow or dead peer delays only requests to itself), then
 * mem_lock (registered buffers, a rwlock whose read side the data server
 * holds across each copy so unregister waits for copies in flight), then a
 * batch's lock (only to wake waiters). Slice completions take no lock
 * unless they end the last open request of a batch.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "te_meta.h"
#include "te_shm.h"
#include "te_xport.h"
#include "tide_clock.h"
#include "tide_log.h"
#include "tide_nodeenv.h"
#include "tide_te.h"

#define TE_MAX_SEGS    4096       /* open segments per engine */
#define TE_MAX_BATCHES 65536      /* live batches per engine */
#define TE_MAX_REQS    (1u << 20) /* requests per batch */
#define TE_SLICE_MIN   4096
#define TE_SLICE_MAX   (64u << 20)

#ifndef TE_HAVE_DPDK
#define TE_HAVE_DPDK 0
#endif
#ifndef TE_HAVE_RDMA
#define TE_HAVE_RDMA 0
#endif

struct te_mem {
	uint64_t addr, len;
	char location[64];
	/* tide_te_register_shared(): our duplicate of the memory file's descriptor
	 * (-1: a plain buffer), its inode and the buffer's offset in it. */
	int shm_fd;
	uint64_t shm_ino, shm_off;
};

/* A local buffer registered for the data path only (tide_te_register_local). */
struct te_lmem {
	uint64_t addr, len;
	bool covered; /* inside a segment buffer: uses its keys, nothing registered */
};

struct te_seg {
	pthread_mutex_t lock; /* desc, addr, peer, stale; see the file comment */
	bool used;
	bool stale;   /* a connection-level failure: fetch the descriptor before next use */
	uint32_t gen; /* bumped on every (re)open of the slot */
	char name[TE_NAME_MAX];
	struct te_desc *desc;
	struct te_peer_addr addr;
	struct te_xpeer *peer;
	const struct te_xport_ops *pops; /* transport the peer belongs to */
	struct te_xport *px;
	/* The peer's shared buffers when it runs on this host (te_shm.h); NULL:
	 * everything goes through pops. Replaced with the descriptor. */
	struct te_shm *shm;
};

struct te_task {
	struct te_batch *batch;
	struct te_slice *slices; /* malloc'd, nslices */
	uint32_t nslices;
	uint32_t seg_idx;
	uint32_t seg_gen;
	uint8_t op;
	uint64_t len;
	_Atomic uint32_t left;
	_Atomic int err;
	_Atomic uint64_t done_bytes;
	_Atomic int state; /* enum tide_te_state */
};

struct te_batch {
	struct tide_te *te;
	uint32_t cap, n;
	uint32_t gen;
	struct te_task *tasks;
	_Atomic uint32_t open; /* submitted requests not yet ended */
	/* Threads between dropping open and leaving the batch (their wake-up): a
	 * free waits for 0, so nobody locks a freed mutex (batch_open_drop). */
	_Atomic uint32_t waking;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

struct tide_te {
	struct tide_te_opts o;
	char metadata[1024];
	char name[TE_NAME_MAX];
	char host[TE_NAME_MAX - 8]; /* room for ":port" in a P2P name */
	/* Where the handshake and kernel data ports listen (listen_policy()),
	 * and who may connect to them; both fixed at create. */
	char bind_ip[INET6_ADDRSTRLEN];
	struct tide_cidr_list allow;
	/* MC_MIN_RPC_PORT..MC_MAX_RPC_PORT: where the handshake and kernel-TCP data ports
	 * are picked when the options leave them 0, as stock picks them. */
	uint16_t port_lo, port_hi;
	uint64_t instance;
	struct te_meta *meta;

	pthread_rwlock_t mem_lock;
	struct te_mem *mem; /* sorted by addr, disjoint */
	size_t nmem, capmem;
	struct te_lmem *lmem; /* local-only registrations, unsorted (few) */
	size_t nlmem, caplmem;

	pthread_mutex_t seg_lock;
	struct te_seg segs[TE_MAX_SEGS]; /* handle = index; 0 is the local segment */

	pthread_mutex_t batch_lock;
	struct te_batch **batches; /* TE_MAX_BATCHES slots */
	uint32_t batch_gen;
	/* Batches given back with requests still open (tide_te_batch_release): freed
	 * by the next batch allocation after they end. Taken before batch_lock. At
	 * most the live batches, since their requests end within io_timeout_ms. */
	pthread_mutex_t orphan_lock;
	tide_te_batch_t *orphans;
	size_t norphans, caporphans;
	_Atomic size_t norphans_hint; /* racy copy of norphans: skip the lock when 0 */

	const struct te_xport_ops *xops; /* TCP (kernel or user-space) */
	struct te_xport *x;
	bool shm_peers; /* kernel TCP and TIDE_SHM_PEERS: map same-host peers' shared buffers */
	uint16_t data_port;
	const struct te_xport_ops *rxops; /* RDMA, when installed */
	struct te_xport *rx;
	char rdma_devices[256];

	struct {
		_Atomic uint64_t reqs_submitted, reqs_completed, reqs_failed, reqs_timeout;
		_Atomic uint64_t bytes_read, bytes_written;
		_Atomic uint64_t srv_reads, srv_writes, srv_bytes, srv_rejected;
		_Atomic uint64_t desc_refreshes, conn_failures;
		_Atomic uint64_t conns_refused; /* data port; the daemon counts its own */
	} st;
};

void
tide_te_opts_init(struct tide_te_opts *opts, size_t opts_size)
{
	struct tide_te_opts d = {
		.opts_size = sizeof(d),
		.metadata = "P2PHANDSHAKE",
		.slice_size = 1u << 20,
		.conns_per_peer = 4,
		.io_threads = 2,
		.io_timeout_ms = 10000,
		.connect_timeout_ms = 3000,
	};
	memset(opts, 0, opts_size);
	memcpy(opts, &d, opts_size < sizeof(d) ? opts_size : sizeof(d));
}

const char *
tide_te_strerror(int err)
{
	switch (err) {
	case -EFAULT:
		return "address outside the peer's registered memory";
	case -ESTALE:
		return "peer restarted: its segment descriptor changed";
	case -ECANCELED:
		return "engine stopping or segment closed";
	case -EPROTONOSUPPORT:
		return "protocol or metadata scheme not supported";
	default:
		return strerror(err < 0 ? -err : err);
	}
}

/* ---- local address ---------------------------------------------------- */

/* First UP, non-loopback IPv4 address, as Mooncake picks its LAN address. */
static void
pick_host(char *host, size_t len)
{
	struct ifaddrs *ifs, *i;
	snprintf(host, len, "127.0.0.1");
	if (getifaddrs(&ifs) != 0) {
		return;
	}
	for (i = ifs; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) {
			continue;
		}
		inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, host,
			  (socklen_t)len);
		break;
	}
	freeifaddrs(ifs);
}

/*
 * The node environment (opts.node_env, else $TIDE_NODE_ENV, else the default
 * path), malloc'd into *out for the caller to free. A node file that does not
 * load is an error (logged), never a silent fall-back to the defaults.
 */
static int
node_env_load(const struct tide_te *te, struct tide_nodeenv **out)
{
	struct tide_nodeenv *ne = malloc(sizeof(*ne));
	char err[2048] = "";
	int rc;

	if (ne == NULL) {
		return -ENOMEM;
	}
	rc = tide_nodeenv_load(ne, te->o.node_env, NULL, err, sizeof(err));
	if (rc != 0) {
		TIDE_LOG(ERR, "node environment is not valid:\n%s", err);
		free(ne);
		return rc;
	}
	*out = ne;
	return 0;
}

/*
 * A port of [te->port_lo, te->port_hi] free on te->bind_ip; -EADDRINUSE when every
 * one is taken; another -errno when none can be (bind_ip is not an address of this
 * machine: the listener's own bind then says so). From a random start, so processes
 * starting together spread over the range; a probe socket with SO_REUSEADDR, as the
 * listeners set it. At most one bind per port of the range (2001 with the defaults).
 * The port may be taken between this probe and the listener's bind: the caller
 * picks again on -EADDRINUSE.
 */
static int
pick_port(const struct tide_te *te)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	uint32_t span = (uint32_t)te->port_hi - te->port_lo + 1, start = 0;
	int one = 1;

	if (te->port_lo == 0 || te->port_hi < te->port_lo ||
	    inet_pton(AF_INET, te->bind_ip, &a.sin_addr) != 1) {
		return -EINVAL;
	}
	if (getrandom(&start, sizeof(start), 0) != sizeof(start)) {
		start = (uint32_t)tide_mono_ns();
	}
	for (uint32_t i = 0; i < span; i++) {
		uint16_t port = (uint16_t)(te->port_lo + (start + i) % span);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

		if (fd < 0) {
			return -errno;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		a.sin_port = htons(port);
		err = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
		close(fd);
		if (err == 0) {
			return port;
		}
		if (err != EADDRINUSE && err != EACCES) {
			return -err; /* not an address of this machine, ...: no port will do */
		}
	}
	return -EADDRINUSE;
}

/*
 * Where the handshake and kernel-TCP data ports listen, and who may connect
 * (MC_TCP_BIND_ADDRESS and TIDE_ALLOW_NETS of the node file). By default the
 * engine listens only on the address it names itself by: peers, stock ones
 * included, reach it at the host of its segment name (P2P) or of its
 * rpc_meta entry (HTTP), so listening anywhere else would only expose the
 * ports on interfaces nobody uses. A name is resolved here, once, to its
 * first IPv4 address (what the data path's peers connect to); the data path
 * is IPv4, so a host without one is an error rather than a silent 0.0.0.0.
 * MC_TCP_BIND_ADDRESS=0.0.0.0 is the explicit way to listen everywhere.
 */
static int
listen_policy(struct tide_te *te)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	struct tide_nodeenv *ne;
	char err[256] = "";
	struct in_addr a;
	int rc;

	rc = node_env_load(te, &ne);
	if (rc != 0) {
		return rc;
	}
	/* Validated by the loader; a failure here would be a loader bug. */
	rc = tide_cidr_parse(ne->allow_nets, &te->allow, err, sizeof(err));
	if (rc != 0) {
		TIDE_LOG(ERR, "TIDE_ALLOW_NETS: %s", err);
		goto out;
	}
	te->port_lo = ne->min_rpc_port;
	te->port_hi = ne->max_rpc_port;
	if (ne->tcp_bind_address_set) {
		inet_ntop(AF_INET, &ne->tcp_bind_address, te->bind_ip, sizeof(te->bind_ip));
		goto out;
	}
	if (inet_pton(AF_INET, te->host, &a) == 1) {
		inet_ntop(AF_INET, &a, te->bind_ip, sizeof(te->bind_ip));
		goto out;
	}
	if (getaddrinfo(te->host, NULL, &hints, &res) != 0 || res == NULL) {
		TIDE_LOG(ERR,
			 "transfer engine: host '%s' has no IPv4 address to listen on; use an "
			 "address or a name that resolves to one, or set MC_TCP_BIND_ADDRESS",
			 te->host);
		rc = -EINVAL;
		goto out;
	}
	inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr, te->bind_ip,
		  sizeof(te->bind_ip));
	freeaddrinfo(res);
out:
	free(ne);
	return rc;
}

/* ---- registered memory ------------------------------------------------ */

/* Index of the first buffer whose end is above addr (nmem when none). */
static size_t
mem_find(const struct tide_te *te, uint64_t addr)
{
	size_t lo = 0, hi = te->nmem;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (te->mem[mid].addr + te->mem[mid].len <= addr) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

/* Caller holds mem_lock (either side). */
static bool
mem_contains(const struct tide_te *te, uint64_t addr, uint64_t len)
{
	size_t i = mem_find(te, addr);
	if (i == te->nmem || addr < te->mem[i].addr || addr + len < addr) {
		return false;
	}
	return addr + len <= te->mem[i].addr + te->mem[i].len;
}

/*
 * Data server hook: on success the read lock stays held until srv_release,
 * which a zero-copy transport calls only once the device released the frames
 * that carried the memory (te_xport.h). A polling thread holds many read
 * references at once and takes new ones while an unregister waits: that needs
 * the default (reader-preferring) glibc rwlock, or it would deadlock against
 * the waiting writer. At transport destroy a reference may be dropped by
 * another thread than the one that took it, which glibc allows for readers.
 */
static bool
srv_check(void *arg, uint64_t addr, uint64_t len)
{
	struct tide_te *te = arg;
	pthread_rwlock_rdlock(&te->mem_lock);
	if (mem_contains(te, addr, len)) {
		return true;
	}
	pthread_rwlock_unlock(&te->mem_lock);
	return false;
}

static void
srv_release(void *arg)
{
	struct tide_te *te = arg;
	pthread_rwlock_unlock(&te->mem_lock);
}

static void
srv_count(void *arg, uint8_t op, uint64_t bytes, bool rejected)
{
	struct tide_te *te = arg;
	if (rejected) {
		atomic_fetch_add_explicit(&te->st.srv_rejected, 1, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(op == TIDE_TE_READ ? &te->st.srv_reads : &te->st.srv_writes, 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&te->st.srv_bytes, bytes, memory_order_relaxed);
}

/* Our descriptor from the registered buffers; caller holds mem_lock. */
static int
build_desc(struct tide_te *te, struct te_desc *d)
{
	time_t now = time(NULL);
	struct tm tm;
	bool shared = false;
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", te->name);
	snprintf(d->protocol, sizeof(d->protocol), "tcp");
	d->tcp_data_port = te->data_port;
	d->tcp_proto_version = TE_PROTO_NATIVE;
	d->instance = te->instance;
	if (te->xops != NULL && te->xops->data_host != NULL) {
		te->xops->data_host(te->x, d->data_ip, sizeof(d->data_ip));
	}
	gmtime_r(&now, &tm);
	strftime(d->timestamp, sizeof(d->timestamp), "%Y-%m-%d %H:%M:%S", &tm);
	d->nbufs = (uint32_t)te->nmem;
	if (te->nmem == 0) {
		return te->rx != NULL ? te->rxops->describe(te->rx, d) : 0;
	}
	d->bufs = calloc(te->nmem, sizeof(*d->bufs));
	if (d->bufs == NULL) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < te->nmem; i++) {
		snprintf(d->bufs[i].name, sizeof(d->bufs[i].name), "%s", te->mem[i].location);
		d->bufs[i].addr = te->mem[i].addr;
		d->bufs[i].length = te->mem[i].len;
		if (te->mem[i].shm_fd >= 0) {
			d->bufs[i].shm = true;
			d->bufs[i].shm_fd = te->mem[i].shm_fd;
			d->bufs[i].shm_ino = te->mem[i].shm_ino;
			d->bufs[i].shm_off = te->mem[i].shm_off;
			shared = true;
		}
	}
	if (shared && te_shm_host_id()[0] != '\0') {
		d->pid = (int32_t)getpid();
		snprintf(d->host_id, sizeof(d->host_id), "%s", te_shm_host_id());
	}
	/* RDMA adds devices and every buffer's keys; the TCP port stays advertised, so
	 * a peer without RDMA still reaches us. */
	return te->rx != NULL ? te->rxops->describe(te->rx, d) : 0;
}

/* Publish the current descriptor. Only meaningful once a data port exists,
 * but P2P peers may ask before; they then see tcp_data_port 0... which the
 * decoder rejects, so we publish only after a transport is installed. */
static int
publish_now(struct tide_te *te)
{
	struct te_desc d;
	int rc;
	if (te->x == NULL) {
		return 0;
	}
	pthread_rwlock_rdlock(&te->mem_lock);
	rc = build_desc(te, &d);
	pthread_rwlock_unlock(&te->mem_lock);
	if (rc == 0) {
		rc = te_meta_publish(te->meta, &d, te->host);
		if (rc != 0) {
			TIDE_LOG(ERR, "publishing segment '%s' failed: %s", te->name,
				 tide_te_strerror(rc));
		}
	}
	free(d.bufs);
	return rc;
}

/* The daemon's refresh function (te_meta_set_refresh): P2P descriptors are built when
 * a peer asks for one. */
static int
publish_refresh(void *arg)
{
	return publish_now(arg);
}

/*
 * Publish the descriptor after a change: in P2P mode only marked stale (rebuilt on
 * the next Metadata request, so registering n buffers costs O(n log n), not O(n^2)
 * encodes); in HTTP and etcd mode written now, so the caller sees a failure.
 */
static int
publish(struct tide_te *te)
{
	if (te->x != NULL && te_meta_publish_later(te->meta)) {
		return 0;
	}
	return publish_now(te);
}

/*
 * Whether every page of [a, a + len) is mapped in this process. mincore() fails
 * with ENOMEM on a hole and touches nothing (no fault, no madvise side effect).
 * Bounded: one call per 4096 pages, with the residency vector on the stack.
 */
static bool
range_mapped(uint64_t a, uint64_t len)
{
	const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	unsigned char vec[4096];
	uint64_t p = a & ~(pg - 1), end = a + len;

	while (p < end) {
		uint64_t n = end - p < sizeof(vec) * pg ? end - p : sizeof(vec) * pg;

		if (mincore((void *)(uintptr_t)p, (size_t)n, vec) != 0 && errno == ENOMEM) {
			return false;
		}
		p += n;
	}
	return true;
}

/* Add a buffer to the sorted table (and to the RDMA devices); no publish. */
static int
register_mem_locked(struct tide_te *te, uint64_t a, size_t len, const char *location, int shm_fd,
		    uint64_t shm_ino, uint64_t shm_off)
{
	void *addr = (void *)(uintptr_t)a;
	size_t i;
	if (addr == NULL || len == 0 || a + len < a) {
		return -EINVAL;
	}
	if (!range_mapped(a, len)) {
		TIDE_LOG(ERR,
			 "register [0x%" PRIx64 ", +%zu): not mapped in this process (a device "
			 "pointer, or freed memory); the engine cannot read or write it",
			 a, len);
		return -EFAULT;
	}
	pthread_rwlock_wrlock(&te->mem_lock);
	i = mem_find(te, a);
	if (i < te->nmem && te->mem[i].addr < a + len) {
		pthread_rwlock_unlock(&te->mem_lock);
		return -EEXIST;
	}
	if (te->rx != NULL) {
		/* Once, here: every device gets keys for the whole buffer. */
		int rc = te->rxops->mem_reg(te->rx, a, len);

		if (rc != 0) {
			pthread_rwlock_unlock(&te->mem_lock);
			return rc;
		}
	}
	if (te->nmem == te->capmem) {
		size_t cap = te->capmem ? te->capmem * 2 : 16;
		struct te_mem *m = realloc(te->mem, cap * sizeof(*m));
		if (m == NULL) {
			if (te->rx != NULL) {
				te->rxops->mem_dereg(te->rx, a);
			}
			pthread_rwlock_unlock(&te->mem_lock);
			return -ENOMEM;
		}
		te->mem = m;
		te->capmem = cap;
	}
	memmove(&te->mem[i + 1], &te->mem[i], (te->nmem - i) * sizeof(*te->mem));
	te->mem[i].addr = a;
	te->mem[i].len = len;
	te->mem[i].shm_fd = shm_fd;
	te->mem[i].shm_ino = shm_ino;
	te->mem[i].shm_off = shm_off;
	/* Mooncake's "*" means "detect the NUMA node"; this build reports cpu:0. */
	snprintf(te->mem[i].location, sizeof(te->mem[i].location), "%s",
		 location == NULL || location[0] == '\0' || strcmp(location, "*") == 0 ? "cpu:0"
										       : location);
	te->nmem++;
	pthread_rwlock_unlock(&te->mem_lock);
	return 0;
}

/* tide_te_register() with, for a shared buffer, the file it maps (shm_fd >= 0,
 * owned by the engine from here on, closed on failure). */
static int
register_mem(struct tide_te *te, void *addr, size_t len, const char *location, int shm_fd,
	     uint64_t shm_ino, uint64_t shm_off)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;
	int rc = register_mem_locked(te, a, len, location, shm_fd, shm_ino, shm_off);

	if (rc != 0) {
		if (shm_fd >= 0) {
			close(shm_fd);
		}
		return rc;
	}
	return publish(te);
}

int
tide_te_register(struct tide_te *te, void *addr, size_t len, const char *location)
{
	return register_mem(te, addr, len, location, -1, 0, 0);
}

int
tide_te_register_shared(struct tide_te *te, void *addr, size_t len, const char *location, int fd,
			uint64_t offset)
{
	struct stat st;
	int seals, dup;

	if (fd < 0 || addr == NULL || len == 0) {
		return -EINVAL;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < offset ||
	    (uint64_t)st.st_size - offset < len || seals < 0 || !(seals & F_SEAL_SHRINK)) {
		TIDE_LOG(ERR,
			 "register_shared fd %d: not a memory file sealed against shrinking "
			 "(F_SEAL_SHRINK) that holds [%" PRIu64 ", +%zu)",
			 fd, offset, len);
		return -EINVAL;
	}
	dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0) {
		return -errno;
	}
	return register_mem(te, addr, len, location, dup, (uint64_t)st.st_ino, offset);
}

int
tide_te_unregister(struct tide_te *te, void *addr)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;
	size_t i;
	/* The write lock waits for every copy the data server has in progress. */
	pthread_rwlock_wrlock(&te->mem_lock);
	i = mem_find(te, a);
	if (i == te->nmem || te->mem[i].addr != a) {
		pthread_rwlock_unlock(&te->mem_lock);
		return -ENOENT;
	}
	int shm_fd = te->mem[i].shm_fd;
	memmove(&te->mem[i], &te->mem[i + 1], (te->nmem - i - 1) * sizeof(*te->mem));
	te->nmem--;
	if (shm_fd >= 0) {
		/* Peers that mapped the file keep their mapping of it (te_shm.h); what
		 * they write from now on reaches the file only, not this memory's
		 * next use. */
		close(shm_fd);
	}
	if (te->rx != NULL) {
		te->rxops->mem_dereg(te->rx, a);
	}
	pthread_rwlock_unlock(&te->mem_lock);
	return publish(te);
}

int
tide_te_register_local(struct tide_te *te, void *addr, size_t len)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;
	int rc = 0;

	if (addr == NULL || len == 0 || a + len < a) {
		return -EINVAL;
	}
	if (!range_mapped(a, len)) {
		TIDE_LOG(ERR, "register_local [0x%" PRIx64 ", +%zu): not mapped in this process", a,
			 len);
		return -EFAULT;
	}
	pthread_rwlock_wrlock(&te->mem_lock);
	for (size_t k = 0; k < te->nlmem; k++) {
		if (te->lmem[k].addr < a + len && a < te->lmem[k].addr + te->lmem[k].len) {
			pthread_rwlock_unlock(&te->mem_lock);
			return -EEXIST;
		}
	}
	if (te->nlmem == te->caplmem) {
		size_t cap = te->caplmem ? te->caplmem * 2 : 8;
		struct te_lmem *m = realloc(te->lmem, cap * sizeof(*m));

		if (m == NULL) {
			pthread_rwlock_unlock(&te->mem_lock);
			return -ENOMEM;
		}
		te->lmem = m;
		te->caplmem = cap;
	}
	struct te_lmem *lm = &te->lmem[te->nlmem];

	lm->addr = a;
	lm->len = len;
	lm->covered = mem_contains(te, a, len);
	if (!lm->covered) {
		size_t i = mem_find(te, a);

		if (i < te->nmem && te->mem[i].addr < a + len) {
			rc = -EEXIST; /* straddles a segment buffer */
		} else if (te->rx != NULL) {
			rc = te->rxops->mem_reg(te->rx, a, len);
		}
	}
	if (rc == 0) {
		te->nlmem++;
	}
	pthread_rwlock_unlock(&te->mem_lock);
	return rc;
}

int
tide_te_unregister_local(struct tide_te *te, void *addr)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;

	pthread_rwlock_wrlock(&te->mem_lock);
	for (size_t k = 0; k < te->nlmem; k++) {
		if (te->lmem[k].addr != a) {
			continue;
		}
		if (!te->lmem[k].covered && te->rx != NULL) {
			te->rxops->mem_dereg(te->rx, a);
		}
		te->lmem[k] = te->lmem[--te->nlmem];
		pthread_rwlock_unlock(&te->mem_lock);
		return 0;
	}
	pthread_rwlock_unlock(&te->mem_lock);
	return -ENOENT;
}

/* ---- engine ------------------------------------------------------------ */

static int
env_u32(const char *name, uint32_t lo, uint32_t hi, uint32_t *out)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;
	if (v == NULL || v[0] == '\0') {
		return 0;
	}
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || x < lo || x > hi) {
		TIDE_LOG(ERR, "%s='%s': expected an integer in %u..%u", name, v, lo, hi);
		return -EINVAL;
	}
	*out = (uint32_t)x;
	return 0;
}

int
tide_te_create(const struct tide_te_opts *opts, struct tide_te **out)
{
	struct tide_te *te;
	char err[256] = "";
	int rc;

	if (opts == NULL || out == NULL || opts->opts_size == 0) {
		return -EINVAL;
	}
	te = calloc(1, sizeof(*te));
	if (te == NULL) {
		return -ENOMEM;
	}
	tide_te_opts_init(&te->o, sizeof(te->o));
	memcpy(&te->o, opts, opts->opts_size < sizeof(te->o) ? opts->opts_size : sizeof(te->o));
	te->o.opts_size = sizeof(te->o);
	if (env_u32("MC_SLICE_SIZE", TE_SLICE_MIN, TE_SLICE_MAX, &te->o.slice_size) != 0 ||
	    env_u32("MC_TCP_PROTO", 1, 2, &te->o.force_proto) != 0) {
		free(te);
		return -EINVAL;
	}
	if (te->o.slice_size < TE_SLICE_MIN || te->o.slice_size > TE_SLICE_MAX ||
	    te->o.conns_per_peer == 0 || te->o.conns_per_peer > 64 || te->o.io_threads == 0 ||
	    te->o.io_threads > 64 || te->o.force_proto > 2 || te->o.io_timeout_ms == 0 ||
	    te->o.connect_timeout_ms == 0) {
		TIDE_LOG(ERR,
			 "transfer engine: option out of range (slice_size %u: %u..%u, "
			 "conns_per_peer %u: 1..64, io_threads %u: 1..64, force_proto %u: 0..2)",
			 te->o.slice_size, TE_SLICE_MIN, TE_SLICE_MAX, te->o.conns_per_peer,
			 te->o.io_threads, te->o.force_proto);
		free(te);
		return -EINVAL;
	}
	snprintf(te->metadata, sizeof(te->metadata), "%s",
		 te->o.metadata ? te->o.metadata : "P2PHANDSHAKE");
	te->o.metadata = te->metadata;
	if (te->o.host != NULL && te->o.host[0] != '\0') {
		snprintf(te->host, sizeof(te->host), "%s", te->o.host);
	} else {
		pick_host(te->host, sizeof(te->host));
	}
	te->o.host = te->host;
	te->o.local_server_name = NULL;
	te->o.node_env = NULL;
	if (opts->opts_size >= offsetof(struct tide_te_opts, node_env) + sizeof(opts->node_env)) {
		te->o.node_env = opts->node_env;
	}
	if (getrandom(&te->instance, sizeof(te->instance), 0) != sizeof(te->instance)) {
		te->instance = tide_mono_ns() ^ ((uint64_t)getpid() << 32);
	}
	te->instance |= 1; /* never 0, which means "not advertised" */
	pthread_rwlock_init(&te->mem_lock, NULL);
	pthread_mutex_init(&te->seg_lock, NULL);
	for (int i = 0; i < TE_MAX_SEGS; i++) {
		pthread_mutex_init(&te->segs[i].lock, NULL);
	}
	pthread_mutex_init(&te->batch_lock, NULL);
	pthread_mutex_init(&te->orphan_lock, NULL);
	te->batches = calloc(TE_MAX_BATCHES, sizeof(*te->batches));
	if (te->batches == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = listen_policy(te);
	if (rc != 0) {
		goto fail;
	}
	/* A port of the range when none was asked for; picked again if another process
	 * took it between the probe and the listener (a few tries: each is one bind). */
	for (int tries = 0;; tries++) {
		int port = opts->rpc_port != 0 ? opts->rpc_port : pick_port(te);

		if (port == -EADDRINUSE) {
			/* As stock: an engine on a port outside the range the operator opened
			 * (firewalls) would start but be unreachable. */
			TIDE_LOG(
				ERR,
				"transfer engine: no free port in MC_MIN_RPC_PORT..MC_MAX_RPC_PORT "
				"(%u..%u) on %s for the handshake port; widen the range",
				te->port_lo, te->port_hi, te->bind_ip);
			rc = -EADDRINUSE;
			goto fail;
		}
		if (port < 0) {
			port = 0; /* te_meta_open's own bind says what is wrong (address...) */
		}
		rc = te_meta_open(te->metadata, te->bind_ip, (uint16_t)port,
				  (int)te->o.connect_timeout_ms, &te->meta, err, sizeof(err));
		if (rc != -EADDRINUSE || opts->rpc_port != 0 || port == 0 || tries == 7) {
			break;
		}
	}
	if (rc == -EADDRNOTAVAIL) {
		TIDE_LOG(ERR,
			 "transfer engine: cannot listen on %s (host '%s'): not an address of this "
			 "machine; set MC_TCP_BIND_ADDRESS to one, or to 0.0.0.0 for every address",
			 te->bind_ip, te->host);
		goto fail;
	}
	if (rc != 0) {
		TIDE_LOG(ERR, "transfer engine: metadata '%s': %s", te->metadata,
			 err[0] ? err : tide_te_strerror(rc));
		goto fail;
	}
	/* Before anything is published: until now the daemon has nothing to tell. */
	te_meta_set_allow(te->meta, &te->allow);
	te_meta_set_refresh(te->meta, publish_refresh, te);
	if (opts->local_server_name != NULL && opts->local_server_name[0] != '\0') {
		snprintf(te->name, sizeof(te->name), "%s", opts->local_server_name);
	} else if (te_meta_is_p2p(te->meta)) {
		snprintf(te->name, sizeof(te->name), "%s:%u", te->host, te_meta_rpc_port(te->meta));
	} else {
		snprintf(te->name, sizeof(te->name), "%s", te->host);
	}
	te->segs[TIDE_TE_LOCAL_SEG].used = true;
	snprintf(te->segs[TIDE_TE_LOCAL_SEG].name, TE_NAME_MAX, "%s", te->name);
	te->o.rdma_devices = NULL;
	if (opts->opts_size >=
		    offsetof(struct tide_te_opts, rdma_devices) + sizeof(opts->rdma_devices) &&
	    opts->rdma_devices != NULL) {
		snprintf(te->rdma_devices, sizeof(te->rdma_devices), "%s", opts->rdma_devices);
		te->o.rdma_devices = te->rdma_devices;
	}
	TIDE_LOG(INFO, "transfer engine '%s': metadata %s, handshake port %s:%u%s", te->name,
		 te->metadata, te->bind_ip, te_meta_rpc_port(te->meta),
		 te->allow.n > 0 ? ", peers from TIDE_ALLOW_NETS only" : "");
	*out = te;
	return 0;
fail:
	te_meta_close(te->meta);
	free(te->batches);
	pthread_rwlock_destroy(&te->mem_lock);
	pthread_mutex_destroy(&te->seg_lock);
	pthread_mutex_destroy(&te->batch_lock);
	pthread_mutex_destroy(&te->orphan_lock);
	free(te);
	return rc;
}

/* What the TCP transport takes from the node file, read once per install. */
struct tcp_env {
	bool dpdk;        /* a DPDK device is named and MC_FORCE_TCP is not set */
	bool shm_peers;   /* TIDE_SHM_PEERS */
	uint32_t poll_us; /* TIDE_DATA_POLL_US */
};

/*
 * The node file's TCP settings. A node file that does not load is an error,
 * not a silent fall-back to kernel sockets.
 */
static int
tcp_env_load(const struct tide_te *te, struct tcp_env *e)
{
	struct tide_nodeenv *ne;
	int rc = node_env_load(te, &ne);

	if (rc == 0) {
		e->dpdk = ne->dpdk_device[0] != '\0' && !ne->force_tcp;
		e->shm_peers = ne->shm_peers;
		e->poll_us = ne->data_poll_us;
		free(ne);
	}
	return rc;
}

/* The transport config every transport shares. */
static void
xport_cfg(struct tide_te *te, struct te_xport_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->bind_ip = te->bind_ip;
	cfg->allow = &te->allow;
	cfg->refused = &te->st.conns_refused;
	cfg->data_port = te->o.data_port;
	cfg->conns_per_peer = te->o.conns_per_peer;
	cfg->io_threads = te->o.io_threads;
	cfg->io_timeout_ms = te->o.io_timeout_ms;
	cfg->connect_timeout_ms = te->o.connect_timeout_ms;
	cfg->slice_size = te->o.slice_size;
	cfg->srv.check = srv_check;
	cfg->srv.release = srv_release;
	cfg->srv.count = srv_count;
	cfg->srv.arg = te;
	cfg->srv.instance = te->instance;
	cfg->node_env = te->o.node_env;
	cfg->local_name = te->name;
}

/* Tests only (te_xport.h): the TCP transport to install instead of choosing one. */
static const struct te_xport_ops *_Atomic tcp_ops_override;

void
te_engine_tcp_ops_override(const struct te_xport_ops *ops)
{
	atomic_store(&tcp_ops_override, ops);
}

/* Kernel sockets, or the user-space stack when the node file names a DPDK device. */
static int
install_tcp(struct tide_te *te)
{
	struct te_xport_cfg cfg;
	const struct te_xport_ops *ops;
	struct tcp_env env = {0};
	bool dpdk;
	int rc;

	if (te->x != NULL) {
		return 0;
	}
	rc = tcp_env_load(te, &env);
	if (rc != 0) {
		return rc;
	}
	dpdk = env.dpdk;
	ops = &te_tcp_kernel_ops;
	if (atomic_load(&tcp_ops_override) != NULL) {
		ops = atomic_load(&tcp_ops_override);
	} else if (dpdk) {
#if TE_HAVE_DPDK
		ops = &te_tcp_dpdk_ops;
#else
		TIDE_LOG(ERR, "TIDE_DPDK_DEVICE is set but this build has no user-space TCP path");
		return -EPROTONOSUPPORT;
#endif
	}
	xport_cfg(te, &cfg);
	cfg.poll_us = env.poll_us;
	if (ops == &te_tcp_kernel_ops && cfg.data_port == 0) {
		/* The kernel data port from the range too (stock's TCP transport does). */
		for (int tries = 0;; tries++) {
			int port = pick_port(te);

			if (port == -EADDRINUSE) {
				TIDE_LOG(ERR,
					 "transfer engine: no free port in "
					 "MC_MIN_RPC_PORT..MC_MAX_RPC_"
					 "PORT (%u..%u) on %s for the kernel-TCP data port; widen "
					 "the "
					 "range",
					 te->port_lo, te->port_hi, te->bind_ip);
				rc = -EADDRINUSE;
				break;
			}
			cfg.data_port = port > 0 ? (uint16_t)port : 0;
			rc = ops->create(&cfg, &te->x);
			if (rc != -EADDRINUSE || port <= 0 || tries == 7) {
				break;
			}
		}
	} else {
		rc = ops->create(&cfg, &te->x);
	}
	if (rc != 0) {
		TIDE_LOG(ERR, "transport %s: start failed: %s", ops->name, tide_te_strerror(rc));
		te->x = NULL;
		return rc;
	}
	te->xops = ops;
	te->data_port = ops->data_port(te->x);
	te->shm_peers = strcmp(ops->name, "tcp-kernel") == 0 && env.shm_peers;
	TIDE_LOG(INFO, "transport %s: data port %u", ops->name, te->data_port);
	return 0;
}

/* TIDE_RDMA_AS_TCP: serve protocol rdma with TCP on a node without a device; false
 * when the node file does not load (the transport install that follows says why). */
static bool
rdma_as_tcp(const struct tide_te *te)
{
	struct tide_nodeenv *ne;
	bool yes;

	if (node_env_load(te, &ne) != 0) {
		return false;
	}
	yes = ne->rdma_as_tcp;
	free(ne);
	return yes;
}

#if TE_HAVE_RDMA
/* Handshake daemon thread: a peer's Connection request. */
static int
conn_handler(void *arg, uint8_t type, const char *json, size_t len, char **reply, size_t *reply_len)
{
	struct tide_te *te = arg;

	(void)type;
	return te->rxops->on_connection(te->rx, json, len, reply, reply_len);
}

static int
hook_conn_request(void *arg, const char *peer, const char *json, size_t len, char **reply,
		  size_t *reply_len)
{
	struct tide_te *te = arg;
	char err[256] = "";
	int rc = te_meta_request(te->meta, peer, TE_HS_CONNECTION, json, len, reply, reply_len, err,
				 sizeof(err));

	if (rc != 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "rdma: %s", err);
	}
	return rc;
}

static int
hook_fetch_desc(void *arg, const char *peer, struct te_desc **out)
{
	struct tide_te *te = arg;
	char host[TE_NAME_MAX], err[256] = "";
	int rc = te_meta_fetch(te->meta, peer, out, host, sizeof(host), err, sizeof(err));

	if (rc != 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "rdma: descriptor of %s: %s", peer,
				   err[0] ? err : tide_te_strerror(rc));
	}
	return rc;
}

/* Undo install_tcp() (a failed rdma install leaves nothing half-installed). */
static void
uninstall_tcp(struct tide_te *te)
{
	te->xops->destroy(te->x);
	te->x = NULL;
	te->xops = NULL;
	te->data_port = 0;
}

/*
 * RDMA next to TCP: TCP first (peers without RDMA use it), so that a
 * user-space TCP transport can lend its polling lcores and the CQs are polled
 * there, next to the packet rx, instead of on workers of their own; then the
 * verbs transport; then every buffer registered so far gets its keys, then the
 * descriptor advertises both. On failure a TCP transport started here is
 * destroyed again, so nothing is half-installed (a user-space one cannot be
 * started again in this process: the DPDK EAL starts once).
 */
static int
install_rdma(struct tide_te *te)
{
	struct te_xport_cfg cfg;
	struct te_xport *rx = NULL;
	bool tcp_here = te->x == NULL;
	int rc;

	if (te->rx != NULL) {
		return 0;
	}
	rc = install_tcp(te);
	if (rc != 0) {
		return rc;
	}
	xport_cfg(te, &cfg);
	cfg.rdma_devices = te->o.rdma_devices;
	cfg.absent_ok = rdma_as_tcp(te);
	cfg.meta.conn_request = hook_conn_request;
	cfg.meta.fetch_desc = hook_fetch_desc;
	cfg.meta.arg = te;
	cfg.shared_lcores = te->xops->lcores != NULL ? te->xops->lcores(te->x) : NULL;
	rc = te_rdma_ops.create(&cfg, &rx);
	if (rc != 0) {
		/* The transport logged the one line the user needs (what is missing, and
		 * the tcp alternative); this is for debugging only. */
		TIDE_LOG(INFO, "protocol 'rdma': transport start failed: %s", tide_te_strerror(rc));
		goto fail;
	}
	pthread_rwlock_wrlock(&te->mem_lock);
	for (size_t i = 0; i < te->nmem && rc == 0; i++) {
		rc = te_rdma_ops.mem_reg(rx, te->mem[i].addr, te->mem[i].len);
	}
	for (size_t k = 0; k < te->nlmem && rc == 0; k++) {
		if (!te->lmem[k].covered) {
			rc = te_rdma_ops.mem_reg(rx, te->lmem[k].addr, te->lmem[k].len);
		}
	}
	if (rc != 0) {
		pthread_rwlock_unlock(&te->mem_lock);
		TIDE_LOG(ERR, "rdma: registering existing buffers: %s", tide_te_strerror(rc));
		te_rdma_ops.destroy(rx);
		goto fail;
	}
	te->rxops = &te_rdma_ops;
	te->rx = rx;
	pthread_rwlock_unlock(&te->mem_lock);
	te_meta_set_conn_handler(te->meta, conn_handler, te);
	return 0;
fail:
	/* With TIDE_RDMA_AS_TCP the TCP transport started here is what will serve rdma
	 * (rdma_unavailable): keep it. A user-space one could not be started twice in
	 * one process anyway (the DPDK EAL starts once). */
	if (tcp_here && !(rc == -EPROTONOSUPPORT && cfg.absent_ok)) {
		uninstall_tcp(te);
	}
	return rc;
}
#endif

/*
 * "rdma" where this node has none (no libibverbs, no device, a build without
 * verbs): TCP when the node environment says TIDE_RDMA_AS_TCP=1, else the
 * error, with one line naming the key. Callers such as Miles' weight sync
 * hard-code "rdma", so on a node without RDMA the operator needs a switch
 * that does not mean editing the caller; off by default, because a silent
 * downgrade would hide a broken RDMA set-up on nodes that do have NICs.
 */
static int
rdma_unavailable(struct tide_te *te, int rc)
{
	if (!rdma_as_tcp(te)) {
		return rc; /* the transport's one line named the key */
	}
	rc = install_tcp(te);
	if (rc == 0) {
		TIDE_LOG(NOTICE,
			 "protocol 'rdma': no RDMA device on this node (or no verbs library); "
			 "serving it over %s because TIDE_RDMA_AS_TCP=1",
			 te->xops->name);
	}
	return rc;
}

int
tide_te_install_transport(struct tide_te *te, const char *proto)
{
	int rc;

	if (proto != NULL && strcmp(proto, "tcp") == 0) {
		/* Never touches verbs: no dlopen, no device probe. */
		rc = install_tcp(te);
	} else if (proto != NULL && strcmp(proto, "rdma") == 0) {
#if TE_HAVE_RDMA
		rc = install_rdma(te);
#else
		if (!rdma_as_tcp(te)) {
			TIDE_LOG(ERR, "protocol 'rdma': this build has no verbs transport (built "
				      "without libibverbs-dev); use protocol tcp "
				      "(MOONCAKE_PROTOCOL=tcp), or set TIDE_RDMA_AS_TCP=1 to serve "
				      "protocol rdma with TCP on this node");
		}
		rc = -EPROTONOSUPPORT;
#endif
		if (rc == -EPROTONOSUPPORT) {
			rc = rdma_unavailable(te, rc);
		}
	} else {
		TIDE_LOG(ERR, "protocol '%s' is not supported; use 'tcp' or 'rdma'",
			 proto ? proto : "(null)");
		return -EPROTONOSUPPORT;
	}
	return rc != 0 ? rc : publish(te);
}

const char *
tide_te_transport_name(const struct tide_te *te)
{
	return te->rx != NULL ? te->rxops->name : te->xops ? te->xops->name : "";
}

const char *
tide_te_local_name(const struct tide_te *te)
{
	return te->name;
}

void
tide_te_local_addr(const struct tide_te *te, char *host, size_t host_len, uint16_t *rpc_port,
		   uint16_t *data_port)
{
	if (host != NULL && host_len > 0) {
		snprintf(host, host_len, "%s", te->host);
	}
	if (rpc_port != NULL) {
		*rpc_port = te_meta_rpc_port(te->meta);
	}
	if (data_port != NULL) {
		*data_port = te->data_port;
	}
}

/* ---- segments ----------------------------------------------------------- */

/* Fetch name's descriptor and (re)build the segment's peer; caller holds sg->lock. */
/*
 * Install descriptor d (owned from here on) and the peer's shared buffers with
 * it. Same-host mapping is for the kernel-socket transport only: a user-space
 * TCP (tcp-dpdk) or RDMA node asked for its device path, and its suites and
 * benchmarks between processes of one host must measure that path. Caller
 * holds sg->lock.
 */
static void
seg_set_desc(struct tide_te *te, struct te_seg *sg, struct te_desc *d)
{
	struct te_shm *shm = NULL;

	if (te->shm_peers && !(te->rx != NULL && te_desc_is_rdma(d)) &&
	    te_shm_open(d, sg->name, &shm) != 0) {
		shm = NULL; /* -ENOMEM: the network still works */
	}
	te_shm_put(sg->shm);
	sg->shm = shm;
	te_desc_free(sg->desc);
	sg->desc = d;
}

static int
seg_load(struct tide_te *te, struct te_seg *sg)
{
	struct te_desc *d = NULL;
	struct te_peer_addr pa = {0};
	struct te_xpeer *peer = NULL;
	char err[256] = "";
	int rc;

	rc = te_meta_fetch(te->meta, sg->name, &d, pa.host, sizeof(pa.host), err, sizeof(err));
	if (rc != 0) {
		TIDE_LOG(ERR, "segment '%s': %s", sg->name, err[0] ? err : tide_te_strerror(rc));
		return rc;
	}
	if (sg->desc == NULL && d->nbufs == 0) {
		/* Opening a peer that is still starting: it publishes once its transport
		 * is installed and again when it registers memory. A segment with no
		 * buffer is not open yet; -ENOENT, like an unpublished one, so callers
		 * retry until their own deadline instead of holding an empty segment. */
		te_desc_free(d);
		TIDE_LOG(ERR, "segment '%s': peer has not registered a buffer yet", sg->name);
		return -ENOENT;
	}
	if (sg->desc != NULL && te_desc_equal(sg->desc, d) && sg->peer != NULL) {
		te_desc_free(d);
		sg->stale = false;
		return 0;
	}
	if (d->data_ip[0] != '\0') {
		/* The peer's data server has its own address (user-space stack). */
		snprintf(pa.host, sizeof(pa.host), "%s", d->data_ip);
	}
	pa.data_port = d->tcp_data_port;
	pa.instance = d->instance;
	pa.proto = d->tcp_proto_version >= TE_PROTO_NATIVE ? TE_PROTO_NATIVE
		   : d->tcp_proto_version >= TE_PROTO_V2   ? TE_PROTO_V2
							   : TE_PROTO_V1;
	if (te->o.force_proto != 0 && te->o.force_proto < pa.proto) {
		pa.proto = te->o.force_proto;
	}
	if (te->x == NULL) {
		te_desc_free(d);
		TIDE_LOG(ERR, "segment '%s': no transport installed", sg->name);
		return -ENOTCONN;
	}
	if (sg->peer != NULL && sg->pops == te->xops && !(te->rx != NULL && te_desc_is_rdma(d)) &&
	    pa.instance == sg->addr.instance && pa.data_port == sg->addr.data_port &&
	    pa.proto == sg->addr.proto && strcmp(pa.host, sg->addr.host) == 0) {
		/* The same peer process at the same data address registered or dropped
		 * buffers: a TCP peer keeps nothing of the descriptor, so its connections
		 * (and the slices on them, other threads' too) stay; only the bounds
		 * checked here change. A stock peer advertises no instance (0 == 0): its
		 * data address and port decide; a restart there comes with a new random
		 * data port, or breaks the connections, which marks the segment stale. */
		seg_set_desc(te, sg, d);
		sg->stale = false;
		return 0;
	}
	/* The best transport both ends have: RDMA when both advertise devices, else TCP. */
	snprintf(pa.name, sizeof(pa.name), "%s", sg->name);
	pa.desc = d;
	const struct te_xport_ops *pops = te->xops;
	struct te_xport *px = te->x;
	if (te->rx != NULL && te_desc_is_rdma(d)) {
		pops = te->rxops;
		px = te->rx;
	} else if (d->tcp_data_port == 0) {
		te_desc_free(d);
		TIDE_LOG(ERR,
			 "segment '%s' is reachable over RDMA only; install protocol 'rdma' here "
			 "(MOONCAKE_PROTOCOL=rdma) or give the peer a TCP transport",
			 sg->name);
		return -EPROTONOSUPPORT;
	}
	rc = pops->peer_open(px, &pa, &peer);
	pa.desc = NULL;
	if (rc != 0) {
		te_desc_free(d);
		return rc;
	}
	if (sg->peer != NULL) {
		/* The peer restarted or moved: nothing queued for the old instance may
		 * reach the new one. */
		sg->pops->peer_close(sg->px, sg->peer, -ESTALE);
		atomic_fetch_add_explicit(&te->st.desc_refreshes, 1, memory_order_relaxed);
		TIDE_LOG(NOTICE, "segment '%s': descriptor changed (peer restarted?); reloaded",
			 sg->name);
	}
	seg_set_desc(te, sg, d);
	sg->addr = pa;
	sg->peer = peer;
	sg->pops = pops;
	sg->px = px;
	sg->stale = false;
	return 0;
}

int
tide_te_open_segment(struct tide_te *te, const char *name, tide_te_seg_t *seg)
{
	int rc, free_slot = -1;
	if (name == NULL || name[0] == '\0' || strlen(name) >= TE_NAME_MAX || seg == NULL) {
		return -EINVAL;
	}
	if (strcmp(name, te->name) == 0) {
		*seg = TIDE_TE_LOCAL_SEG;
		return 0;
	}
again:
	pthread_mutex_lock(&te->seg_lock);
	for (int i = 1; i < TE_MAX_SEGS; i++) {
		if (te->segs[i].used && strcmp(te->segs[i].name, name) == 0) {
			struct te_seg *found = &te->segs[i];
			uint32_t gen = found->gen;
			bool ready;

			pthread_mutex_unlock(&te->seg_lock);
			/* Another thread may be opening it: its lock is held across the fetch.
			 * Hand out the handle only once loaded; if that open failed the slot
			 * was released (or reused for another name): look again. Each pass
			 * waits for one fetch, which ends within the metadata timeout. */
			pthread_mutex_lock(&found->lock);
			ready = found->used && found->gen == gen && found->desc != NULL &&
				strcmp(found->name, name) == 0;
			pthread_mutex_unlock(&found->lock);
			if (!ready) {
				sched_yield(); /* a failed open is releasing the slot */
				goto again;
			}
			*seg = i;
			return 0;
		}
		if (!te->segs[i].used && free_slot < 0) {
			free_slot = i;
		}
	}
	if (free_slot < 0) {
		pthread_mutex_unlock(&te->seg_lock);
		return -EMFILE;
	}
	struct te_seg *sg = &te->segs[free_slot];
	/* Reserve the slot, then fetch without the table lock. */
	pthread_mutex_lock(&sg->lock);
	memset(sg->name, 0, sizeof(sg->name));
	snprintf(sg->name, sizeof(sg->name), "%s", name);
	sg->used = true;
	sg->gen++;
	pthread_mutex_unlock(&te->seg_lock);
	rc = seg_load(te, sg);
	pthread_mutex_unlock(&sg->lock);
	if (rc == 0) {
		*seg = free_slot;
		return 0;
	}
	pthread_mutex_lock(&te->seg_lock);
	pthread_mutex_lock(&sg->lock);
	if (sg->desc == NULL) {
		sg->used = false;
	}
	pthread_mutex_unlock(&sg->lock);
	pthread_mutex_unlock(&te->seg_lock);
	return rc;
}

int
tide_te_segment_buffer(struct tide_te *te, tide_te_seg_t seg, uint32_t idx, uint64_t *addr,
		       uint64_t *len)
{
	int rc = -ENOENT;
	if (seg == TIDE_TE_LOCAL_SEG) {
		pthread_rwlock_rdlock(&te->mem_lock);
		if (idx < te->nmem) {
			*addr = te->mem[idx].addr;
			*len = te->mem[idx].len;
			rc = 0;
		}
		pthread_rwlock_unlock(&te->mem_lock);
		return rc;
	}
	if (seg < 0 || seg >= TE_MAX_SEGS) {
		return -ENOENT;
	}
	pthread_mutex_lock(&te->segs[seg].lock);
	if (te->segs[seg].used && te->segs[seg].desc != NULL && idx < te->segs[seg].desc->nbufs) {
		*addr = te->segs[seg].desc->bufs[idx].addr;
		*len = te->segs[seg].desc->bufs[idx].length;
		rc = 0;
	}
	pthread_mutex_unlock(&te->segs[seg].lock);
	return rc;
}

int
tide_te_close_segment(struct tide_te *te, tide_te_seg_t seg)
{
	struct te_seg *sg;
	if (seg == TIDE_TE_LOCAL_SEG) {
		return 0;
	}
	if (seg < 0 || seg >= TE_MAX_SEGS) {
		return -ENOENT;
	}
	pthread_mutex_lock(&te->seg_lock);
	sg = &te->segs[seg];
	pthread_mutex_lock(&sg->lock);
	if (!sg->used) {
		pthread_mutex_unlock(&sg->lock);
		pthread_mutex_unlock(&te->seg_lock);
		return -ENOENT;
	}
	if (sg->peer != NULL) {
		sg->pops->peer_close(sg->px, sg->peer, -ECANCELED);
	}
	te_desc_free(sg->desc);
	sg->desc = NULL;
	te_shm_put(sg->shm);
	sg->shm = NULL;
	sg->peer = NULL;
	sg->used = false;
	pthread_mutex_unlock(&sg->lock);
	pthread_mutex_unlock(&te->seg_lock);
	return 0;
}

int
tide_te_sync_segments(struct tide_te *te)
{
	int first = 0;
	for (int i = 1; i < TE_MAX_SEGS; i++) {
		struct te_seg *sg = &te->segs[i];
		pthread_mutex_lock(&sg->lock);
		if (sg->used) {
			int rc = seg_load(te, sg);
			if (rc != 0 && first == 0) {
				first = rc;
			}
		}
		pthread_mutex_unlock(&sg->lock);
	}
	return first;
}

/* ---- batches ------------------------------------------------------------ */

static struct te_batch *
batch_get(struct tide_te *te, tide_te_batch_t id)
{
	uint32_t idx = (uint32_t)(id & 0xffffffffu), gen = (uint32_t)(id >> 32);
	struct te_batch *b = NULL;
	if (idx >= TE_MAX_BATCHES) {
		return NULL;
	}
	pthread_mutex_lock(&te->batch_lock);
	if (te->batches[idx] != NULL && te->batches[idx]->gen == gen) {
		b = te->batches[idx];
	}
	pthread_mutex_unlock(&te->batch_lock);
	return b;
}

/* Free the given-back batches whose requests have all ended. */
static void
orphans_reap(struct tide_te *te)
{
	size_t k = 0;

	pthread_mutex_lock(&te->orphan_lock);
	for (size_t i = 0; i < te->norphans; i++) {
		if (tide_te_batch_free(te, te->orphans[i]) == -EBUSY) {
			te->orphans[k++] = te->orphans[i];
		}
	}
	te->norphans = k;
	atomic_store_explicit(&te->norphans_hint, k, memory_order_relaxed);
	pthread_mutex_unlock(&te->orphan_lock);
}

int
tide_te_batch_alloc(struct tide_te *te, uint32_t max_reqs, tide_te_batch_t *batch)
{
	struct te_batch *b;
	if (max_reqs == 0 || max_reqs > TE_MAX_REQS || batch == NULL) {
		return -EINVAL;
	}
	if (atomic_load_explicit(&te->norphans_hint, memory_order_relaxed) != 0) {
		orphans_reap(te);
	}
	b = calloc(1, sizeof(*b));
	if (b == NULL || (b->tasks = calloc(max_reqs, sizeof(*b->tasks))) == NULL) {
		free(b);
		return -ENOMEM;
	}
	b->te = te;
	b->cap = max_reqs;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	pthread_mutex_lock(&te->batch_lock);
	for (uint32_t i = 0; i < TE_MAX_BATCHES; i++) {
		if (te->batches[i] == NULL) {
			b->gen = ++te->batch_gen;
			te->batches[i] = b;
			*batch = ((uint64_t)b->gen << 32) | i;
			pthread_mutex_unlock(&te->batch_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&te->batch_lock);
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	free(b->tasks);
	free(b);
	return -ENOSPC;
}

static void
batch_destroy(struct te_batch *b)
{
	for (uint32_t i = 0; i < b->n; i++) {
		free(b->tasks[i].slices);
	}
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	free(b->tasks);
	free(b);
}

int
tide_te_batch_free(struct tide_te *te, tide_te_batch_t id)
{
	uint32_t idx = (uint32_t)(id & 0xffffffffu);
	struct te_batch *b = batch_get(te, id);
	if (b == NULL) {
		return -ENOENT;
	}
	if (atomic_load_explicit(&b->open, memory_order_acquire) != 0) {
		return -EBUSY;
	}
	pthread_mutex_lock(&te->batch_lock);
	te->batches[idx] = NULL;
	pthread_mutex_unlock(&te->batch_lock);
	/* A completion that dropped the last open request may still be waking
	 * waiters: it counted itself in waking before the drop, so it is seen here.
	 * The window is a lock, a broadcast and an unlock. */
	while (atomic_load_explicit(&b->waking, memory_order_acquire) != 0) {
		sched_yield();
	}
	batch_destroy(b);
	return 0;
}

/*
 * One open request (or the submit guard) ends: the last one wakes the waiters.
 * waking covers the wake-up, so tide_te_batch_free never frees the batch under
 * a thread that is about to lock its mutex.
 */
static void
batch_open_drop(struct te_batch *b)
{
	atomic_fetch_add_explicit(&b->waking, 1, memory_order_seq_cst);
	if (atomic_fetch_sub_explicit(&b->open, 1, memory_order_seq_cst) == 1) {
		pthread_mutex_lock(&b->lock);
		pthread_cond_broadcast(&b->cond);
		pthread_mutex_unlock(&b->lock);
	}
	atomic_fetch_sub_explicit(&b->waking, 1, memory_order_release);
}

static void
task_end(struct te_task *t, int err)
{
	struct te_batch *b = t->batch;
	struct tide_te *te = b->te;
	int state = err == 0            ? TIDE_TE_COMPLETED
		    : err == -ETIMEDOUT ? TIDE_TE_TIMEOUT
					: TIDE_TE_FAILED;
	if (err == 0) {
		atomic_fetch_add_explicit(&te->st.reqs_completed, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(t->op == TIDE_TE_READ ? &te->st.bytes_read
								: &te->st.bytes_written,
					  t->len, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(err == -ETIMEDOUT ? &te->st.reqs_timeout
							    : &te->st.reqs_failed,
					  1, memory_order_relaxed);
	}
	atomic_store_explicit(&t->err, err, memory_order_relaxed);
	atomic_store_explicit(&t->state, state, memory_order_release);
	batch_open_drop(b);
}

/* Connection-level errors mean the peer may have restarted or moved; a refused
 * address (-EFAULT: over RDMA, a stale rkey) that it re-registered its memory. */
static bool
err_needs_refresh(int err)
{
	return err == -ECONNREFUSED || err == -ECONNRESET || err == -EPIPE || err == -ESTALE ||
	       err == -EHOSTUNREACH || err == -ETIMEDOUT || err == -EFAULT;
}

void
te_slice_done(struct te_slice *s, int err)
{
	struct te_task *t = s->task;
	int expect = 0;
	if (err != 0) {
		atomic_compare_exchange_strong(&t->err, &expect, err);
		if (err_needs_refresh(err)) {
			struct tide_te *te = t->batch->te;
			atomic_fetch_add_explicit(&te->st.conn_failures, 1, memory_order_relaxed);
			/* A racy flag: the next submit to this segment re-fetches its
			 * descriptor before sending anything. */
			__atomic_store_n(&te->segs[t->seg_idx].stale, true, __ATOMIC_RELAXED);
		}
	} else {
		atomic_fetch_add_explicit(&t->done_bytes, s->len, memory_order_relaxed);
	}
	if (atomic_fetch_sub_explicit(&t->left, 1, memory_order_acq_rel) == 1) {
		task_end(t, atomic_load_explicit(&t->err, memory_order_relaxed));
	}
}

/* Same-process shortcut: the target is our own registered memory. */
static int
local_copy(struct tide_te *te, const struct tide_te_req *r)
{
	int rc = -EFAULT;
	pthread_rwlock_rdlock(&te->mem_lock);
	if (mem_contains(te, r->remote_addr, r->len)) {
		void *remote = (void *)(uintptr_t)r->remote_addr;
		if (r->op == TIDE_TE_READ) {
			memmove(r->local, remote, r->len);
		} else {
			memmove(remote, r->local, r->len);
		}
		rc = 0;
	}
	pthread_rwlock_unlock(&te->mem_lock);
	return rc;
}

/*
 * Descriptor fetches of one tide_te_submit() call: at most one per segment per call
 * (for the segment its requests last went to), so a batch of a thousand slices to a
 * peer that stopped answering costs one handshake timeout, not a thousand, and
 * requests outside the descriptor cost one fetch between them.
 */
struct submit_fetch {
	tide_te_seg_t seg; /* segment of the fetch below; -1 none */
	bool fetched;
	int rc; /* its result */
};

/* seg_load at most once per submit call and segment; the same result after that. */
static int
seg_load_once(struct tide_te *te, struct te_seg *sg, tide_te_seg_t idx, struct submit_fetch *f)
{
	if (f->seg == idx && f->fetched) {
		return f->rc;
	}
	f->seg = idx;
	f->fetched = true;
	f->rc = seg_load(te, sg);
	return f->rc;
}

/*
 * One request to a remote segment; caller holds sg->lock. Ends the task on any error.
 * inl non-NULL: the transport may take a one-slice request to run inline; *inl is
 * then its handle, for sg->pops->inline_run() once sg->lock is dropped.
 * shm non-NULL: a request inside a same-host peer's shared buffer is not sent;
 * *shm is then a reference to the peer's buffers, for shm_run() once sg->lock
 * is dropped (the copy does not hold up other callers of the segment).
 */
static void
submit_remote(struct tide_te *te, struct te_seg *sg, const struct tide_te_req *r, struct te_task *t,
	      struct submit_fetch *f, void **inl, struct te_shm **shm)
{
	int rc;
	if (!sg->used) {
		task_end(t, -ECANCELED); /* closed since the caller looked */
		return;
	}
	if (__atomic_load_n(&sg->stale, __ATOMIC_RELAXED) || sg->desc == NULL) {
		rc = seg_load_once(te, sg, r->seg, f);
		if (rc == 0 && sg->desc == NULL) {
			rc = -ENOTCONN;
		}
		if (rc != 0) {
			task_end(t, rc);
			return;
		}
	}
	if (r->len == 0) {
		task_end(t, 0);
		return;
	}
	if (!te_desc_contains(sg->desc, r->remote_addr, r->len) &&
	    (seg_load_once(te, sg, r->seg, f) != 0 || sg->desc == NULL ||
	     !te_desc_contains(sg->desc, r->remote_addr, r->len))) {
		/* Checked against a fresh descriptor before refusing: the peer may have
		 * registered the buffer after we opened it (SGLang registers a buffer per
		 * embedding and announces it out of band). One handshake round trip per
		 * such request; a request that is really outside costs one as well. */
		TIDE_LOG_RATELIMIT(WARN, 5,
				   "request to '%s' [0x%" PRIx64 ", +%" PRIu64
				   ") is outside its registered buffers: refused",
				   sg->name, r->remote_addr, r->len);
		task_end(t, -EFAULT);
		return;
	}
	if (shm != NULL && sg->shm != NULL && te_shm_covers(sg->shm, r->remote_addr, r->len)) {
		te_shm_get(sg->shm);
		*shm = sg->shm;
		atomic_store(&t->state, TIDE_TE_PENDING);
		return;
	}
	uint64_t ns = (r->len + te->o.slice_size - 1) / te->o.slice_size;
	t->slices = calloc(ns, sizeof(*t->slices));
	if (t->slices == NULL) {
		task_end(t, -ENOMEM);
		return;
	}
	t->nslices = (uint32_t)ns;
	atomic_store(&t->left, (uint32_t)ns);
	uint64_t now = tide_mono_ns();
	for (uint64_t k = 0; k < ns; k++) {
		struct te_slice *s = &t->slices[k];
		uint64_t off = k * te->o.slice_size;
		s->next = k + 1 < ns ? &t->slices[k + 1] : NULL;
		s->task = t;
		s->op = (uint8_t)r->op;
		s->local = (uint8_t *)r->local + off;
		s->remote = r->remote_addr + off;
		s->len = (uint32_t)(r->len - off < te->o.slice_size ? r->len - off
								    : te->o.slice_size);
		s->submitted_ns = now;
	}
	atomic_store(&t->state, TIDE_TE_PENDING);
	if (inl != NULL && ns == 1 && sg->pops->inline_begin != NULL) {
		*inl = sg->pops->inline_begin(sg->px, sg->peer, &t->slices[0]);
		if (*inl != NULL) {
			return;
		}
	}
	rc = sg->pops->submit(sg->px, sg->peer, &t->slices[0]);
	if (rc != 0) {
		atomic_store(&t->left, 0);
		task_end(t, rc);
	}
}

/*
 * Carry out request r of task t in a same-host peer's shared buffer (a
 * reference from submit_remote, dropped here). A buffer that turns out not to
 * be mappable sends the request over the network after all; a peer that
 * exited fails it as a broken connection does, and marks the segment for a
 * descriptor fetch.
 */
static void
shm_run(struct tide_te *te, struct te_seg *sg, const struct tide_te_req *r, struct te_task *t,
	struct te_shm *shm, struct submit_fetch *f)
{
	int rc = te_shm_copy(shm, (uint8_t)r->op, r->local, r->remote_addr, r->len);

	te_shm_put(shm);
	if (rc == -ENOENT) {
		pthread_mutex_lock(&sg->lock);
		submit_remote(te, sg, r, t, f, NULL, NULL);
		pthread_mutex_unlock(&sg->lock);
		return;
	}
	if (rc == 0) {
		atomic_store_explicit(&t->done_bytes, r->len, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&te->st.conn_failures, 1, memory_order_relaxed);
		__atomic_store_n(&sg->stale, true, __ATOMIC_RELAXED);
	}
	task_end(t, rc);
}

int
tide_te_submit(struct tide_te *te, tide_te_batch_t id, const struct tide_te_req *reqs, uint32_t n)
{
	struct te_batch *b = batch_get(te, id);
	if (b == NULL) {
		return -ENOENT;
	}
	if (n > b->cap - b->n) {
		return -ENOSPC;
	}
	for (uint32_t i = 0; i < n; i++) {
		if ((reqs[i].op != TIDE_TE_READ && reqs[i].op != TIDE_TE_WRITE) ||
		    reqs[i].seg < 0 || reqs[i].seg >= TE_MAX_SEGS ||
		    (reqs[i].len > 0 && reqs[i].local == NULL)) {
			return -EINVAL;
		}
	}
	pthread_mutex_lock(&te->seg_lock);
	for (uint32_t i = 0; i < n; i++) {
		if (!te->segs[reqs[i].seg].used) {
			pthread_mutex_unlock(&te->seg_lock);
			return -EINVAL;
		}
	}
	pthread_mutex_unlock(&te->seg_lock);
	struct submit_fetch fetch = {.seg = -1};
	/* One request into a fresh batch (the store's and most synchronous
	 * callers' shape): the transport may run it on this thread, sparing the
	 * hand-offs to and from its io threads (te_xport.h inline_begin). A batch
	 * filled by several calls keeps its requests overlapping: only its first
	 * call may. */
	bool try_inline = n == 1 && b->n == 0;

	/* A guard count: a request that ends at once must not let a waiter on
	 * another thread free the batch while this loop still fills it. */
	atomic_fetch_add_explicit(&b->open, 1, memory_order_acq_rel);
	for (uint32_t i = 0; i < n; i++) {
		const struct tide_te_req *r = &reqs[i];
		struct te_task *t = &b->tasks[b->n++];
		struct te_seg *sg = &te->segs[r->seg];
		int rc;

		memset(t, 0, sizeof(*t));
		t->batch = b;
		t->op = (uint8_t)r->op;
		t->len = r->len;
		t->seg_idx = (uint32_t)r->seg;
		atomic_store(&t->state, TIDE_TE_WAITING);
		atomic_fetch_add(&b->open, 1);
		atomic_fetch_add_explicit(&te->st.reqs_submitted, 1, memory_order_relaxed);
		if (r->seg == TIDE_TE_LOCAL_SEG) {
			rc = r->len == 0 ? 0 : local_copy(te, r);
			atomic_store(&t->done_bytes, rc == 0 ? r->len : 0);
			task_end(t, rc);
			continue;
		}
		void *inl = NULL;
		struct te_shm *shm = NULL;
		const struct te_xport_ops *iops = NULL;
		struct te_xport *ipx = NULL;

		pthread_mutex_lock(&sg->lock);
		submit_remote(te, sg, r, t, &fetch, try_inline ? &inl : NULL, &shm);
		if (inl != NULL) {
			iops = sg->pops;
			ipx = sg->px;
		}
		pthread_mutex_unlock(&sg->lock);
		if (inl != NULL) {
			/* Outside the segment lock: other callers of this segment go on;
			 * the transport keeps the peer open until this returns. */
			iops->inline_run(ipx, inl);
		}
		if (shm != NULL) {
			shm_run(te, sg, r, t, shm, &fetch);
		}
	}
	/* Drop the guard: only now may a waiter see the batch idle and free it. */
	batch_open_drop(b);
	return 0;
}

int
tide_te_status(struct tide_te *te, tide_te_batch_t id, uint32_t task_id, struct tide_te_status *st)
{
	struct te_batch *b = batch_get(te, id);
	if (b == NULL) {
		return -ENOENT;
	}
	memset(st, 0, sizeof(*st));
	if (task_id >= b->n) {
		st->state = TIDE_TE_INVALID;
		return 0;
	}
	struct te_task *t = &b->tasks[task_id];
	st->state = atomic_load_explicit(&t->state, memory_order_acquire);
	st->error = atomic_load_explicit(&t->err, memory_order_relaxed);
	st->transferred = atomic_load_explicit(&t->done_bytes, memory_order_relaxed);
	if (st->state == TIDE_TE_COMPLETED) {
		st->error = 0;
	}
	return 0;
}

int
tide_te_wait(struct tide_te *te, tide_te_batch_t id, int timeout_ms)
{
	struct te_batch *b = batch_get(te, id);
	struct timespec dl;
	int rc = 0;
	if (b == NULL) {
		return -ENOENT;
	}
	dl = tide_clock_deadline(CLOCK_REALTIME, timeout_ms >= 0 ? (uint64_t)timeout_ms : 0);
	pthread_mutex_lock(&b->lock);
	while (atomic_load_explicit(&b->open, memory_order_acquire) != 0 && rc == 0) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&b->cond, &b->lock);
		} else if (pthread_cond_timedwait(&b->cond, &b->lock, &dl) == ETIMEDOUT) {
			rc = atomic_load(&b->open) != 0 ? -ETIMEDOUT : 0;
		}
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}

int
tide_te_submit_v(struct tide_te *te, tide_te_batch_t batch, tide_te_seg_t seg, enum tide_te_op op,
		 const uint64_t *local, const uint64_t *remote, const uint64_t *len, uint32_t n)
{
	/* In chunks on the stack: a request array for a million slices would be a
	 * 40 MiB allocation for what the engine copies into its tasks anyway. */
	struct tide_te_req reqs[64];
	struct te_batch *b;

	if (n > 0 && (local == NULL || remote == NULL || len == NULL)) {
		return -EINVAL;
	}
	b = batch_get(te, batch);
	if (b == NULL) {
		return -ENOENT;
	}
	if (n > b->cap - b->n) {
		return -ENOSPC;
	}
	/* Every argument checked before the first chunk goes, so a bad slice anywhere
	 * refuses the whole call as tide_te_submit does (a segment closed by another
	 * thread between chunks is the one failure left midway: its requests end
	 * -ECANCELED and the chunks before keep running). */
	if ((op != TIDE_TE_READ && op != TIDE_TE_WRITE) || seg < 0 || seg >= TE_MAX_SEGS) {
		return -EINVAL;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (len[i] > 0 && local[i] == 0) {
			return -EINVAL;
		}
	}
	for (uint32_t i = 0; i < n;) {
		uint32_t k = 0;

		for (; k < 64 && i + k < n; k++) {
			reqs[k].op = op;
			reqs[k].local = (void *)(uintptr_t)local[i + k];
			reqs[k].seg = seg;
			reqs[k].remote_addr = remote[i + k];
			reqs[k].len = len[i + k];
		}
		int rc = tide_te_submit(te, batch, reqs, k);

		if (rc != 0) {
			/* Only a segment closed since the checks above: the requests of
			 * earlier chunks are running; the caller's wait and result see them. */
			return rc;
		}
		i += k;
	}
	return 0;
}

int
tide_te_batch_result(struct tide_te *te, tide_te_batch_t batch)
{
	struct te_batch *b = batch_get(te, batch);
	int first = 0;

	if (b == NULL) {
		return -ENOENT;
	}
	for (uint32_t i = 0; i < b->n; i++) {
		int st = atomic_load_explicit(&b->tasks[i].state, memory_order_acquire);

		if (st == TIDE_TE_WAITING || st == TIDE_TE_PENDING) {
			return -EINPROGRESS;
		}
		if (first == 0 && st == TIDE_TE_TIMEOUT) {
			first = -ETIMEDOUT;
		} else if (first == 0 && st == TIDE_TE_FAILED) {
			first = atomic_load_explicit(&b->tasks[i].err, memory_order_relaxed);
			if (first == 0) {
				first = -EIO;
			}
		}
	}
	return first;
}

int
tide_te_batch_release(struct tide_te *te, tide_te_batch_t batch)
{
	int rc = tide_te_batch_free(te, batch);

	if (rc != -EBUSY) {
		return rc;
	}
	pthread_mutex_lock(&te->orphan_lock);
	if (te->norphans == te->caporphans) {
		size_t cap = te->caporphans ? te->caporphans * 2 : 16;
		tide_te_batch_t *o = realloc(te->orphans, cap * sizeof(*o));

		if (o == NULL) {
			/* Cannot record it: the batch stays allocated (leaked until destroy,
			 * which frees every batch) rather than freed under its requests. */
			pthread_mutex_unlock(&te->orphan_lock);
			TIDE_LOG_RATELIMIT(WARN, 10,
					   "batch release: out of memory; kept until destroy");
			return 0;
		}
		te->orphans = o;
		te->caporphans = cap;
	}
	te->orphans[te->norphans++] = batch;
	atomic_store_explicit(&te->norphans_hint, te->norphans, memory_order_relaxed);
	pthread_mutex_unlock(&te->orphan_lock);
	return 0;
}

int
tide_te_transfer_sync(struct tide_te *te, tide_te_seg_t seg, enum tide_te_op op,
		      const uint64_t *local, const uint64_t *remote, const uint64_t *len,
		      uint32_t n, int timeout_ms)
{
	tide_te_batch_t b;
	int rc;

	if (n == 0 || n > TE_MAX_REQS) {
		return -EINVAL;
	}
	rc = tide_te_batch_alloc(te, n, &b);
	if (rc != 0) {
		return rc;
	}
	rc = tide_te_submit_v(te, b, seg, op, local, remote, len, n);
	if (rc == 0 || batch_get(te, b)->n > 0) {
		/* Wait even after a failed later chunk: earlier requests are running. */
		int w = tide_te_wait(te, b, timeout_ms);

		if (w != 0) {
			rc = w;
		} else if (rc == 0) {
			rc = tide_te_batch_result(te, b);
		}
	}
	tide_te_batch_release(te, b);
	return rc;
}

int
tide_te_notify(struct tide_te *te, const char *segment_name, const char *name, const char *msg)
{
	char err[512] = "";
	int rc;

	if (segment_name == NULL || segment_name[0] == '\0' ||
	    strlen(segment_name) >= TE_NAME_MAX || name == NULL || msg == NULL) {
		return -EINVAL;
	}
	rc = te_meta_notify(te->meta, segment_name, name, msg, err, sizeof(err));
	if (rc != 0) {
		TIDE_LOG_RATELIMIT(WARN, 5, "notify: %s", err[0] ? err : tide_te_strerror(rc));
	}
	return rc;
}

int
tide_te_get_notifies(struct tide_te *te, struct tide_te_notify **out, size_t *n)
{
	if (out == NULL || n == NULL) {
		return -EINVAL;
	}
	return te_meta_notifies_take(te->meta, out, n);
}

void
tide_te_notifies_free(struct tide_te_notify *v, size_t n)
{
	te_meta_notifies_free(v, n);
}

int
tide_te_probe(struct tide_te *te, const char *segment_name)
{
	char err[512] = "";
	int rc;

	if (segment_name == NULL || segment_name[0] == '\0' ||
	    strlen(segment_name) >= TE_NAME_MAX) {
		return -EINVAL;
	}
	rc = te_meta_probe(te->meta, segment_name, err, sizeof(err));
	if (rc != 0) {
		TIDE_LOG(INFO, "probe: %s", err[0] ? err : tide_te_strerror(rc));
	}
	return rc;
}

void
tide_te_stats_get(const struct tide_te *te, struct tide_te_stats *st)
{
#define RD(f) st->f = atomic_load_explicit(&te->st.f, memory_order_relaxed)
	RD(reqs_submitted);
	RD(reqs_completed);
	RD(reqs_failed);
	RD(reqs_timeout);
	RD(bytes_read);
	RD(bytes_written);
	RD(srv_reads);
	RD(srv_writes);
	RD(srv_bytes);
	RD(srv_rejected);
	RD(desc_refreshes);
	RD(conn_failures);
	RD(conns_refused);
#undef RD
	st->conns_refused += te_meta_refused(te->meta);
}

void
tide_te_destroy(struct tide_te *te)
{
	if (te == NULL) {
		return;
	}
	/* No descriptor rebuild from the daemon while the transports go away. */
	te_meta_set_refresh(te->meta, NULL, NULL);
	/* Peers, then the transport: they end every slice they own (-ECANCELED),
	 * so no completion runs after the batches are freed. */
	for (int i = 1; i < TE_MAX_SEGS; i++) {
		if (te->segs[i].peer != NULL) {
			te->segs[i].pops->peer_close(te->segs[i].px, te->segs[i].peer, -ECANCELED);
			te->segs[i].peer = NULL;
		}
	}
	if (te->rx != NULL) {
		/* Before TCP: it may poll on the user-space TCP transport's lcores.
		 * No Connection request may reach the transport once it is gone. */
		te_meta_set_conn_handler(te->meta, NULL, NULL);
		te->rxops->destroy(te->rx);
		te->rx = NULL;
	}
	if (te->x != NULL) {
		te->xops->destroy(te->x);
		te->x = NULL;
	}
	te_meta_close(te->meta);
	for (int i = 1; i < TE_MAX_SEGS; i++) {
		te_desc_free(te->segs[i].desc);
		te_shm_put(te->segs[i].shm);
	}
	for (uint32_t i = 0; i < TE_MAX_BATCHES; i++) {
		if (te->batches[i] != NULL) {
			batch_destroy(te->batches[i]);
		}
	}
	free(te->batches);
	free(te->orphans);
	pthread_mutex_destroy(&te->orphan_lock);
	for (size_t i = 0; i < te->nmem; i++) {
		if (te->mem[i].shm_fd >= 0) {
			close(te->mem[i].shm_fd);
		}
	}
	free(te->mem);
	free(te->lmem);
	pthread_rwlock_destroy(&te->mem_lock);
	pthread_mutex_destroy(&te->seg_lock);
	for (int i = 0; i < TE_MAX_SEGS; i++) {
		pthread_mutex_destroy(&te->segs[i].lock);
	}
	pthread_mutex_destroy(&te->batch_lock);
	free(te);
}
