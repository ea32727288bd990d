/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Same-host peers' shared buffers, mapped and copied with memcpy (te_shm.h).
 *
 * Bounds: one mapping per shared buffer of a peer, made on the buffer's first
 * use and kept until the set is freed (the segment closes or its descriptor
 * changes); at most TE_DESC_MAX_BUFS buffers per peer (the decoder's limit).
 * A copy costs a poll() of the peer's pidfd besides the memcpy, at most one per
 * ALIVE_RECHECK_NS per peer (copies in between reuse the answer). One filler
 * thread per peer (fill_main()), for at most FILL_MAX bytes of its buffers.
 * A copy of SPLIT_MIN bytes or more may start one helper thread (copy()).
 */
#include "te_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tide_clock.h"
#include "tide_log.h"
#include "tide_te.h"

/* Our page tables of a mapping are filled ahead per chunk of this size (populate()). */
#define CHUNK_SHIFT 18 /* 256 KiB */
#define CHUNK_PAGES ((1u << CHUNK_SHIFT) / 4096u)
/* The filler covers at most this much of one peer's buffers: page tables cost
 * 2 MiB per GiB mapped, so 16 MiB per peer at most; beyond it copies fill
 * their own chunks as before. */
#define FILL_MAX   (UINT64_C(8) << 30)
#define FILL_STACK (64u << 10)

enum map_state { MAP_UNTRIED, MAP_OK, MAP_FAILED_ };

struct shm_buf {
	uint64_t addr, len; /* in the peer's address space */
	int32_t fd;         /* the peer's descriptor number */
	uint64_t ino, off;  /* the file and where the buffer starts in it */
	_Atomic int state;  /* enum map_state; MAP_OK publishes base */
	uint8_t *base;      /* our mapping of [off, off + len) */
	/* One bit per 256 KiB chunk of the mapping: our page tables cover it
	 * (populate()); allocated with the mapping. */
	_Atomic uint64_t *filled;
};

struct te_shm {
	_Atomic uint32_t refs;
	pthread_mutex_t lock; /* mapping (first use of a buffer) */
	int32_t pid;
	int pidfd;                 /* -1: not opened yet (first mapping opens it) */
	_Atomic bool gone;         /* the peer exited */
	_Atomic uint64_t alive_ns; /* when the pidfd last said the peer runs (tide_mono_ns) */
	char seg[TE_NAME_MAX];
	uint32_t n;
	struct shm_buf *bufs; /* sorted by addr (the decoder sorts descriptors) */
	pthread_t filler;     /* fill_main(), started with the first mapping */
	bool filler_started;  /* under lock; read after by the last te_shm_put() */
	_Atomic bool stop;    /* the filler ends at its next chunk */
};

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host_id[80];

static void
host_id_init(void)
{
	char boot[64] = "";
	struct stat st;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f != NULL) {
		if (fgets(boot, sizeof(boot), f) == NULL)
			boot[0] = '\0';
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = '\0';
	/* The PID namespace: a pid names the same process only inside one. */
	if (boot[0] == '\0' || stat("/proc/self/ns/pid", &st) != 0)
		return;
	snprintf(host_id, sizeof(host_id), "%s/%" PRIu64, boot, (uint64_t)st.st_ino);
}

const char *
te_shm_host_id(void)
{
	pthread_once(&host_once, host_id_init);
	return host_id;
}

int
te_shm_open(const struct te_desc *d, const char *seg_name, struct te_shm **out)
{
	struct te_shm *m;
	uint32_t n = 0;

	*out = NULL;
	if (d->pid <= 0 || d->pid == (int32_t)getpid() || te_shm_host_id()[0] == '\0' ||
	    strcmp(d->host_id, te_shm_host_id()) != 0)
		return 0;
	for (uint32_t i = 0; i < d->nbufs; i++)
		n += d->bufs[i].shm;
	if (n == 0)
		return 0;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	m->bufs = calloc(n, sizeof(*m->bufs));
	if (m->bufs == NULL) {
		free(m);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < d->nbufs; i++) {
		const struct te_desc_buf *b = &d->bufs[i];

		if (!b->shm)
			continue;
		m->bufs[m->n++] = (struct shm_buf){.addr = b->addr,
						   .len = b->length,
						   .fd = b->shm_fd,
						   .ino = b->shm_ino,
						   .off = b->shm_off};
	}
	atomic_init(&m->refs, 1);
	pthread_mutex_init(&m->lock, NULL);
	m->pid = d->pid;
	m->pidfd = -1;
	snprintf(m->seg, sizeof(m->seg), "%s", seg_name);
	*out = m;
	return 0;
}

void
te_shm_get(struct te_shm *m)
{
	if (m != NULL)
		atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void
te_shm_put(struct te_shm *m)
{
	if (m == NULL || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (m->filler_started) {
		/* Bounded by one chunk's touches (a few hundred microseconds). */
		atomic_store(&m->stop, true);
		pthread_join(m->filler, NULL);
	}
	for (uint32_t i = 0; i < m->n; i++) {
		if (atomic_load(&m->bufs[i].state) == MAP_OK)
			munmap(m->bufs[i].base, (size_t)m->bufs[i].len);
		free(m->bufs[i].filled);
	}
	if (m->pidfd >= 0)
		close(m->pidfd);
	pthread_mutex_destroy(&m->lock);
	free(m->bufs);
	free(m);
}

/* The buffer holding [remote, remote + len), or NULL. */
static struct shm_buf *
find(const struct te_shm *m, uint64_t remote, uint64_t len)
{
	uint32_t lo = 0, hi = m->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (m->bufs[mid].addr + m->bufs[mid].len <= remote)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == m->n || remote < m->bufs[lo].addr || remote + len < remote ||
	    remote + len > m->bufs[lo].addr + m->bufs[lo].len)
		return NULL;
	return &m->bufs[lo];
}

bool
te_shm_covers(const struct te_shm *m, uint64_t remote, uint64_t len)
{
	return m != NULL && find(m, remote, len) != NULL;
}

/*
 * How long a "the peer runs" answer is reused. A peer can exit right after any
 * check, so a copy into its memory was never more than "the peer ran a moment
 * ago"; 100 us keeps that moment short while a batch of small copies pays one
 * poll() instead of one each (about 0.5 us per 4 KiB copy otherwise).
 */
#define ALIVE_RECHECK_NS (100 * 1000u)

/* The peer still runs (its pidfd is not readable). Caller holds nothing. */
static bool
peer_alive(struct te_shm *m)
{
	struct pollfd p = {.fd = m->pidfd, .events = POLLIN};
	uint64_t now;

	if (atomic_load_explicit(&m->gone, memory_order_relaxed))
		return false;
	now = tide_mono_ns();
	if (now - atomic_load_explicit(&m->alive_ns, memory_order_relaxed) < ALIVE_RECHECK_NS)
		return true;
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
		atomic_store(&m->gone, true);
		return false;
	}
	atomic_store_explicit(&m->alive_ns, now, memory_order_relaxed);
	return true;
}

static void *fill_main(void *arg);

/*
 * Map b (m->lock held). The pidfd comes first: it pins which process the pid
 * names, so the file opened next through /proc is that process's, and the
 * inode check then proves it is the advertised file. F_SEAL_SHRINK is
 * required: a file the owner could shrink would turn our copies into SIGBUS.
 */
static int
map_buf(struct te_shm *m, struct shm_buf *b, const char **why)
{
	char path[64];
	struct stat st;
	long pg = sysconf(_SC_PAGESIZE);
	int fd, seals;
	void *p;

	if (m->pidfd < 0) {
		m->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)m->pid, 0);
		if (m->pidfd < 0) {
			*why = "pidfd_open";
			return -errno;
		}
	}
	if (pg <= 0 || b->off % (uint64_t)pg != 0 || b->len > SIZE_MAX) {
		*why = "offset not page-aligned";
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%" PRId32 "/fd/%" PRId32, m->pid, b->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		*why = "open /proc/<pid>/fd/<n>";
		return -errno;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != b->ino || !S_ISREG(st.st_mode)) {
		*why = "not the advertised file (inode differs)";
		close(fd);
		return -ESTALE;
	}
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || (uint64_t)st.st_size < b->off ||
	    (uint64_t)st.st_size - b->off < b->len) {
		*why = "file not sealed against shrinking, or shorter than the buffer";
		close(fd);
		return -EINVAL;
	}
	b->filled = calloc((size_t)((b->len >> CHUNK_SHIFT) / 64 + 1), sizeof(*b->filled));
	if (b->filled == NULL) {
		close(fd);
		*why = "chunk map";
		return -ENOMEM;
	}
	p = mmap(NULL, (size_t)b->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)b->off);
	close(fd);
	if (p == MAP_FAILED) {
		free(b->filled);
		b->filled = NULL;
		*why = "mmap";
		return -errno;
	}
	if (!peer_alive(m)) {
		munmap(p, (size_t)b->len);
		free(b->filled);
		b->filled = NULL;
		*why = "the process exited";
		return -ECONNRESET;
	}
	b->base = p;
	atomic_store_explicit(&b->state, MAP_OK, memory_order_release);
	if (!m->filler_started) {
		pthread_attr_t at;

		/* A small stack: the filler needs a few hundred bytes, and a finished
		 * one keeps its stack until the set is freed (joined there). */
		if (pthread_attr_init(&at) == 0) {
			(void)pthread_attr_setstacksize(&at, FILL_STACK);
			if (pthread_create(&m->filler, &at, fill_main, m) == 0) {
				m->filler_started = true;
				(void)pthread_setname_np(m->filler, "tide-shmfill");
			}
			pthread_attr_destroy(&at);
		}
	}
	return 0;
}

/*
 * Our mapping is fresh where this process has not touched the peer's file yet:
 * a copy would take a page-table fault per 4 KiB page (shmem has no huge pages
 * unless the administrator enabled them for it), which held 64 MiB puts to
 * 1.9 GB/s. One madvise() fills the page tables of the range instead. It pins
 * and unpins every page, so asked again over filled tables it costs about a
 * fifth of the copy: each 256 KiB chunk is filled once, by the first copy that
 * covers the whole of it (a chunk only partly covered is left to faults until
 * one does), or ahead of any copy by the filler. Advice only: a kernel without
 * it leaves the faults.
 *
 * MADV_POPULATE_READ for writes too: a read fault on a shared mapping of a
 * memory file maps the page writable (shmem asks for no write notification),
 * so a write after it does not fault again, and it cost half of
 * MADV_POPULATE_WRITE here (113 against 218 ms per GiB of cached pages).
 */
static void
populate(struct shm_buf *b, uint64_t off, uint64_t len)
{
	uint64_t first = (off + (1u << CHUNK_SHIFT) - 1) >> CHUNK_SHIFT;
	uint64_t end = (off + len) >> CHUNK_SHIFT; /* chunks [first, end) are covered */
	uint64_t lo = UINT64_MAX, hi = 0;

	for (uint64_t c = first; c < end; c++) {
		uint64_t bit = UINT64_C(1) << (c & 63);

		if (atomic_load_explicit(&b->filled[c >> 6], memory_order_relaxed) & bit)
			continue;
		atomic_fetch_or_explicit(&b->filled[c >> 6], bit, memory_order_relaxed);
		if (lo == UINT64_MAX)
			lo = c;
		hi = c + 1;
	}
	if (lo == UINT64_MAX)
		return;
	/* One call from the first to the last chunk filled now (a filled one between
	 * costs a walk; a copy's chunks are contiguous, so there are few). */
	(void)madvise(b->base + (lo << CHUNK_SHIFT), (size_t)((hi - lo) << CHUNK_SHIFT),
		      MADV_POPULATE_READ);
}

/*
 * One chunk of b's mapping, filled by read accesses to those of its pages the
 * peer's file holds already (mincore()): a page the owner never touched is not
 * allocated here, since the owner's warm-up keeps a memory reserve we would
 * not. Each fault also maps the cached pages around it (the kernel's fault
 * around, 64 KiB), so most touches cost nothing. Faults, not madvise: a
 * SCHED_IDLE thread holding the process's mmap lock (which MADV_POPULATE_*
 * takes for the whole range) would stall every mmap of the process while it
 * waits for CPU; a fault holds only the mapping's own lock, for one page.
 * True when every page of the chunk was there (the chunk's bit is set).
 */
static bool
fill_chunk(struct shm_buf *b, uint64_t c)
{
	unsigned char in[CHUNK_PAGES];
	const volatile uint8_t *p = b->base + (c << CHUNK_SHIFT);
	uint32_t held = 0;

	if (mincore((void *)(uintptr_t)p, 1u << CHUNK_SHIFT, in) != 0)
		return false;
	for (uint32_t i = 0; i < CHUNK_PAGES; i++) {
		if (in[i] & 1) {
			(void)p[(size_t)i * 4096u];
			held++;
		}
	}
	if (held != CHUNK_PAGES)
		return false;
	atomic_fetch_or_explicit(&b->filled[c >> 6], UINT64_C(1) << (c & 63), memory_order_relaxed);
	return true;
}

/*
 * The filler: the page tables of the peer's mapped buffers, ahead of the
 * copies that would otherwise fill them. A reader's first copies into a
 * holder's segment paid about 1 us per 4 KiB page for it (a first 4 MiB put
 * took 1.6 ms, 0.47 ms once filled). It runs at SCHED_IDLE, so only on CPU
 * nothing else wants, and covers the buffers mapped when it reaches them (a
 * buffer mapped later is filled by its copies), FILL_MAX bytes at most; it
 * stops when the peer exits or the set is freed.
 */
static void *
fill_main(void *arg)
{
	struct te_shm *m = arg;
	struct sched_param sp = {0};
	uint64_t budget = FILL_MAX;

	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	for (uint32_t i = 0; i < m->n && budget > 0; i++) {
		struct shm_buf *b = &m->bufs[i];
		uint64_t chunks = b->len >> CHUNK_SHIFT;

		if (atomic_load_explicit(&b->state, memory_order_acquire) != MAP_OK)
			continue;
		for (uint64_t c = 0; c < chunks && budget > 0; c++) {
			if (atomic_load_explicit(&m->stop, memory_order_relaxed))
				return NULL;
			/* The owner's exit, every 64 MiB: its file stays valid while we
			 * map it, but filling it then is waste. */
			if ((c & 255) == 0 && !peer_alive(m))
				return NULL;
			budget -= 1u << CHUNK_SHIFT;
			if (atomic_load_explicit(&b->filled[c >> 6], memory_order_relaxed) &
			    (UINT64_C(1) << (c & 63)))
				continue;
			(void)fill_chunk(b, c);
		}
	}
	return NULL;
}

/*
 * memcpy, except where glibc's choice is slow: from 2 KiB up to its
 * non-temporal threshold it copies with `rep movsb`, and on the AMD EPYC
 * machines measured here that ran at 2.9 GB/s instead of 11-12 when the
 * destination's offset within a page lay 1-31 bytes past the source's (a
 * 16-byte-aligned malloc'd buffer against a page-aligned replica is the common
 * case: SGLang's and vLLM's 128 KiB pieces hit it). A loop of 256-byte
 * fixed-size copies (vector loads and stores) ran at 13-14 GB/s there.
 */
static void
copy_span(void *dst, const void *src, uint64_t len)
{
	uint64_t dist = ((uintptr_t)dst - (uintptr_t)src) & 4095;
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (len < 2048 || dist == 0 || dist >= 64) {
		memcpy(dst, src, (size_t)len);
		return;
	}
	for (; len >= 256; len -= 256, d += 256, s += 256)
		__builtin_memcpy(d, s, 256);
	memcpy(d, s, (size_t)len);
}

/*
 * A copy of SPLIT_MIN bytes or more runs on two CPUs: a helper thread copies
 * its second half. Below it one thread is faster: up to 8 MiB the copy runs
 * from cache in under 300 us, where starting and joining a thread costs about
 * 50. Measured on the 2-core VMs here: memcpy of 64 MiB between mapped pages
 * 7.6 -> 5.2 ms, and into a fresh destination (a bytes object get() returns:
 * a page fault per 4 KiB, which the two threads take in parallel) 41 -> 21 ms;
 * a store get_into of 64 MiB from a same-host holder 6.6 -> 4.6-5.2 ms.
 * Bounds: a helper per copy, fewer helpers at a time than the CPUs this process
 * may run on (none on one CPU); a copy that finds no free slot, or cannot start
 * a thread, copies alone. A thread per copy rather than a kept one: nothing to
 * stop at exit or to restart in a forked child.
 */
#define SPLIT_MIN   (UINT64_C(16) << 20)
#define SPLIT_STACK (64u << 10)

static _Atomic int split_running;

struct split_half {
	uint8_t *dst;
	const uint8_t *src;
	uint64_t len;
};

static void *
split_main(void *arg)
{
	struct split_half *h = arg;

	copy_span(h->dst, h->src, h->len);
	return NULL;
}

static bool
split_slot(void)
{
	cpu_set_t cpus;
	int n = 1;

	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
		n = CPU_COUNT(&cpus);
	if (atomic_fetch_add(&split_running, 1) < n - 1)
		return true;
	atomic_fetch_sub(&split_running, 1);
	return false;
}

static void
copy(void *dst, const void *src, uint64_t len)
{
	pthread_attr_t at;
	pthread_t t;
	bool started = false;

	if (len < SPLIT_MIN || !split_slot()) {
		copy_span(dst, src, len);
		return;
	}
	/* Split at a multiple of 4 KiB: the second half starts at the same page
	 * offsets as the whole, so copy_span() takes the same path for both. */
	uint64_t first = (len / 2) & ~UINT64_C(4095);
	struct split_half h = {(uint8_t *)dst + first, (const uint8_t *)src + first, len - first};

	if (pthread_attr_init(&at) == 0) {
		(void)pthread_attr_setstacksize(&at, SPLIT_STACK);
		started = pthread_create(&t, &at, split_main, &h) == 0;
		pthread_attr_destroy(&at);
	}
	copy_span(dst, src, started ? first : len);
	if (started)
		pthread_join(t, NULL);
	atomic_fetch_sub(&split_running, 1);
}

int
te_shm_copy(struct te_shm *m, uint8_t op, void *local, uint64_t remote, uint64_t len)
{
	struct shm_buf *b = find(m, remote, len);
	int st, rc = 0;

	if (b == NULL)
		return -ENOENT;
	st = atomic_load_explicit(&b->state, memory_order_acquire);
	if (st == MAP_FAILED_)
		return -ENOENT;
	if (st == MAP_UNTRIED) {
		const char *why = "";

		pthread_mutex_lock(&m->lock);
		st = atomic_load(&b->state);
		if (st == MAP_UNTRIED) {
			rc = map_buf(m, b, &why);
			if (rc != 0 && rc != -ECONNRESET) {
				atomic_store(&b->state, MAP_FAILED_);
				TIDE_LOG(INFO,
					 "segment '%s': buffer [0x%" PRIx64 ", +%" PRIu64
					 ") of process %" PRId32
					 " on this host cannot be mapped (%s: %s); it is reached "
					 "over the network",
					 m->seg, b->addr, b->len, m->pid, why, strerror(-rc));
			} else if (rc == 0) {
				TIDE_LOG(DEBUG,
					 "segment '%s': buffer [0x%" PRIx64 ", +%" PRIu64
					 ") of process %" PRId32 " mapped; copies bypass TCP",
					 m->seg, b->addr, b->len, m->pid);
			}
			st = atomic_load(&b->state);
		}
		pthread_mutex_unlock(&m->lock);
		if (rc == -ECONNRESET)
			return rc;
		if (st != MAP_OK)
			return -ENOENT;
	}
	if (!peer_alive(m))
		return -ECONNRESET;
	uint8_t *p = b->base + (remote - b->addr);
	populate(b, remote - b->addr, len);
	if (op == TIDE_TE_READ)
		copy(local, p, len);
	else
		copy(p, local, len);
	return 0;
}
