/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two kernel-socket transports in one process over loopback: one serves a
 * "registered" buffer, the other initiates. te_slice_done() is the engine
 * core's; this file defines its own to record completions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "te_frame.h"
#include "te_tcp_kernel.h"
#include "tide_ut.h"

#define SRV_LEN (32u << 20)
#define MAX_SL  4096

static uint8_t *srvmem;
static uint8_t *forbidden;
static int holds;
static uint64_t srv_rejects;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static struct te_slice sl[MAX_SL];
static int sl_err[MAX_SL];
static int sl_ndone[MAX_SL];
static int ndone, nstray;

void
te_slice_done(struct te_slice *s, int err)
{
	size_t i = (size_t)(s - sl);

	pthread_mutex_lock(&mu);
	if (i < MAX_SL) {
		sl_err[i] = err;
		sl_ndone[i]++;
	} else {
		nstray++;
	}
	ndone++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static bool
chk(void *arg, uint64_t addr, uint64_t len)
{
	uint64_t lo = (uintptr_t)srvmem;

	(void)arg;
	if (addr < lo || addr + len > lo + SRV_LEN || addr + len < addr)
		return false;
	__atomic_add_fetch(&holds, 1, __ATOMIC_RELAXED);
	return true;
}

static bool
chk_none(void *arg, uint64_t addr, uint64_t len)
{
	(void)arg;
	(void)addr;
	(void)len;
	return false;
}

static void
rel(void *arg)
{
	(void)arg;
	__atomic_sub_fetch(&holds, 1, __ATOMIC_RELAXED);
}

static void
cnt(void *arg, uint8_t op, uint64_t bytes, bool rejected)
{
	(void)arg;
	(void)op;
	(void)bytes;
	if (rejected)
		__atomic_add_fetch(&srv_rejects, 1, __ATOMIC_RELAXED);
}

#define SRV_INSTANCE 0xabcdef0123456789ULL

static uint64_t
ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
reset_done(void)
{
	pthread_mutex_lock(&mu);
	memset(sl, 0, sizeof(sl));
	memset(sl_err, 0x7f, sizeof(sl_err));
	memset(sl_ndone, 0, sizeof(sl_ndone));
	ndone = 0;
	nstray = 0;
	pthread_mutex_unlock(&mu);
}

/* Wait until n completions; returns the elapsed ms or -1 on timeout. */
static long
wait_done(int n, int timeout_ms)
{
	uint64_t t0 = ms_now();
	long r;

	pthread_mutex_lock(&mu);
	while (ndone < n && ms_now() - t0 < (uint64_t)timeout_ms) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&cv, &mu, &ts);
	}
	r = ndone >= n ? (long)(ms_now() - t0) : -1;
	pthread_mutex_unlock(&mu);
	return r;
}

static void
cfg_init(struct te_xport_cfg *c, bool serving)
{
	memset(c, 0, sizeof(*c));
	c->bind_ip = "127.0.0.1";
	c->conns_per_peer = 4;
	c->io_threads = 2;
	c->io_timeout_ms = 3000;
	c->connect_timeout_ms = 1000;
	c->slice_size = 1 << 20;
	c->srv.check = serving ? chk : chk_none;
	c->srv.release = rel;
	c->srv.count = cnt;
	c->srv.instance = serving ? SRV_INSTANCE : 1;
}

struct pair {
	struct te_xport *srv, *cli;
	struct te_xpeer *peer;
};

static void
pair_open(struct pair *p, uint32_t proto, uint64_t instance, uint32_t conns)
{
	struct te_xport_cfg c;
	struct te_peer_addr a = {.proto = proto, .instance = instance};

	cfg_init(&c, true);
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &p->srv));
	cfg_init(&c, false);
	c.conns_per_peer = conns;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &p->cli));
	strcpy(a.host, "127.0.0.1");
	a.data_port = te_tcp_kernel_ops.data_port(p->srv);
	CU_ASSERT_NOT_EQUAL(a.data_port, 0);
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(p->cli, &a, &p->peer));
	reset_done();
}

static void
pair_close(struct pair *p)
{
	if (p->peer != NULL)
		te_tcp_kernel_ops.peer_close(p->cli, p->peer, -ECANCELED);
	te_tcp_kernel_ops.destroy(p->cli);
	if (p->srv != NULL)
		te_tcp_kernel_ops.destroy(p->srv);
	CU_ASSERT_EQUAL(__atomic_load_n(&holds, __ATOMIC_RELAXED), 0);
}

static void
mk(int i, uint8_t op, uint8_t *local, uint64_t remote, uint32_t len)
{
	sl[i].next = NULL;
	sl[i].op = op;
	sl[i].local = local;
	sl[i].remote = remote;
	sl[i].len = len;
}

/* Link slices [a, b) and submit them in one call. */
static int
submit_range(struct pair *p, int a, int b)
{
	for (int i = a; i < b; i++)
		sl[i].next = i + 1 < b ? &sl[i + 1] : NULL;
	return te_tcp_kernel_ops.submit(p->cli, p->peer, &sl[a]);
}

static void
fill(uint8_t *b, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (uint8_t)x;
	}
}

/* WRITE len bytes in slices of slice bytes, READ them back, compare. */
static void
write_read(uint32_t proto, uint64_t inst, uint32_t conns)
{
	struct pair p;
	uint32_t len = 3u << 20, slice = 64 * 1024;
	int n = (int)(len / slice);
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	uint64_t base = (uintptr_t)srvmem + 4096;

	fill(src, len, proto);
	pair_open(&p, proto, inst, conns);
	for (int i = 0; i < n; i++)
		mk(i, 1, src + (size_t)i * slice, base + (uint64_t)i * slice, slice);
	TIDE_UT_OK(submit_range(&p, 0, n));
	CU_ASSERT(wait_done(n, 20000) >= 0);
	for (int i = 0; i < n; i++)
		CU_ASSERT_EQUAL(sl_err[i], 0);
	reset_done();
	for (int i = 0; i < n; i++)
		mk(i, 0, dst + (size_t)i * slice, base + (uint64_t)i * slice, slice);
	TIDE_UT_OK(submit_range(&p, 0, n));
	CU_ASSERT(wait_done(n, 20000) >= 0);
	for (int i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(sl_err[i], 0);
		CU_ASSERT_EQUAL(sl_ndone[i], 1);
	}
	CU_ASSERT_EQUAL(memcmp(src, dst, len), 0);
	pair_close(&p);
	free(src);
	free(dst);
}

static void
test_write_read_v1(void)
{
	/* v1 WRITEs complete when sent; one connection keeps READ behind WRITE */
	write_read(1, 0, 1);
}

static void
test_write_read_v2(void)
{
	write_read(2, 0, 4);
}

static void
test_write_read_native(void)
{
	write_read(3, SRV_INSTANCE, 4);
	write_read(3, 0, 2); /* no HELLO */
}

/* 1000 slices of random sizes over 4 connections, WRITE then READ back. */
static void
many_random(uint32_t proto)
{
	enum { N = 1000 };
	struct pair p;
	uint32_t off[N], len[N], at = 0;
	uint8_t *src = malloc(SRV_LEN), *dst = calloc(1, SRV_LEN);

	fill(src, SRV_LEN, 77 + proto);
	for (int i = 0; i < N; i++) {
		len[i] = 1 + (uint32_t)rand() % (48 * 1024);
		off[i] = at;
		at += len[i];
	}
	CU_ASSERT_FATAL(at <= SRV_LEN);
	pair_open(&p, proto, proto == 3 ? SRV_INSTANCE : 0, 4);
	for (int i = 0; i < N; i++)
		mk(i, 1, src + off[i], (uintptr_t)srvmem + off[i], len[i]);
	/* several submit calls, as the core does per request */
	for (int i = 0; i < N; i += 100)
		TIDE_UT_OK(submit_range(&p, i, i + 100));
	CU_ASSERT(wait_done(N, 30000) >= 0);
	CU_ASSERT_EQUAL(te_tcp_kernel_peer_conns_up(p.peer), 4);
	for (int i = 0; i < N; i++)
		CU_ASSERT_EQUAL(sl_err[i], 0);
	reset_done();
	for (int i = 0; i < N; i++)
		mk(i, 0, dst + off[i], (uintptr_t)srvmem + off[i], len[i]);
	TIDE_UT_OK(submit_range(&p, 0, N));
	CU_ASSERT(wait_done(N, 30000) >= 0);
	for (int i = 0; i < N; i++)
		CU_ASSERT_EQUAL(sl_err[i], 0);
	CU_ASSERT_EQUAL(memcmp(src, dst, at), 0);
	CU_ASSERT_EQUAL(nstray, 0);
	pair_close(&p);
	free(src);
	free(dst);
}

static void
test_many_random_native(void)
{
	many_random(3);
}

static void
test_many_random_v2(void)
{
	many_random(2);
}

static void
test_refused_address(void)
{
	uint8_t buf[4096], back[4096], copy[4096];

	fill(forbidden, 4096, 5);
	memcpy(copy, forbidden, sizeof(copy));
	for (uint32_t proto = 2; proto <= 3; proto++) {
		struct pair p;

		pair_open(&p, proto, 0, 2);
		memset(buf, 0x11, sizeof(buf));
		mk(0, 1, buf, (uintptr_t)forbidden, sizeof(buf));
		mk(1, 0, buf, (uintptr_t)forbidden, sizeof(buf));
		mk(2, 0, buf, (uintptr_t)srvmem + SRV_LEN - 100, 101); /* one byte over */
		for (int i = 0; i < 3; i++) {
			sl[i].next = NULL;
			TIDE_UT_OK(te_tcp_kernel_ops.submit(p.cli, p.peer, &sl[i]));
			CU_ASSERT(wait_done(i + 1, 5000) >= 0);
			CU_ASSERT_EQUAL(sl_err[i], -EFAULT);
		}
		CU_ASSERT_EQUAL(buf[0], 0x11);
		/* a large refused WRITE: the server answers (v2: and closes) mid-payload */
		{
			uint8_t *big = calloc(1, 8u << 20);

			reset_done();
			mk(0, 1, big, (uintptr_t)forbidden, 8u << 20);
			TIDE_UT_OK(submit_range(&p, 0, 1));
			CU_ASSERT(wait_done(1, 5000) >= 0);
			CU_ASSERT_EQUAL(sl_err[0], -EFAULT);
			free(big);
			reset_done();
		}
		/* the peer is still usable (v2 reconnects; native kept the connection) */
		mk(3, 1, buf, (uintptr_t)srvmem, sizeof(buf));
		mk(4, 0, back, (uintptr_t)srvmem, sizeof(back));
		sl[3].next = NULL;
		TIDE_UT_OK(te_tcp_kernel_ops.submit(p.cli, p.peer, &sl[3]));
		CU_ASSERT(wait_done(1, 5000) >= 0);
		sl[4].next = NULL;
		TIDE_UT_OK(te_tcp_kernel_ops.submit(p.cli, p.peer, &sl[4]));
		CU_ASSERT(wait_done(2, 5000) >= 0);
		CU_ASSERT_EQUAL(sl_err[3], 0);
		CU_ASSERT_EQUAL(sl_err[4], 0);
		CU_ASSERT_EQUAL(memcmp(buf, back, sizeof(buf)), 0);
		pair_close(&p);
	}
	/* v1: the server closes silently; a READ sees the reset */
	{
		struct pair p;

		pair_open(&p, 1, 0, 1);
		mk(0, 0, buf, (uintptr_t)forbidden, 64);
		TIDE_UT_OK(submit_range(&p, 0, 1));
		CU_ASSERT(wait_done(1, 5000) >= 0);
		CU_ASSERT_EQUAL(sl_err[0], -ECONNRESET);
		pair_close(&p);
	}
	CU_ASSERT_EQUAL(memcmp(forbidden, copy, sizeof(copy)), 0);
}

static void
test_stale_instance(void)
{
	struct pair p;
	uint8_t buf[1024];

	memset(srvmem, 0, 1024);
	memset(buf, 0xee, sizeof(buf));
	pair_open(&p, 3, SRV_INSTANCE + 1, 2);
	mk(0, 1, buf, (uintptr_t)srvmem, sizeof(buf));
	mk(1, 1, buf, (uintptr_t)srvmem, sizeof(buf));
	TIDE_UT_OK(submit_range(&p, 0, 2));
	CU_ASSERT(wait_done(2, 5000) >= 0);
	CU_ASSERT_EQUAL(sl_err[0], -ESTALE);
	CU_ASSERT_EQUAL(sl_err[1], -ESTALE);
	CU_ASSERT_EQUAL(srvmem[0], 0);
	pair_close(&p);
}

static uint16_t
closed_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&sa, &l) == 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void
test_connect_refused(void)
{
	struct te_xport_cfg c;
	struct te_xport *x;
	struct te_xpeer *peer;
	struct te_peer_addr a = {.proto = 2};
	uint8_t buf[64];

	cfg_init(&c, false);
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	strcpy(a.host, "127.0.0.1");
	a.data_port = closed_port();
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(x, &a, &peer));
	reset_done();
	for (int i = 0; i < 10; i++)
		mk(i, (uint8_t)(i & 1), buf, 0x1000, sizeof(buf));
	for (int i = 0; i < 10; i++)
		sl[i].next = i + 1 < 10 ? &sl[i + 1] : NULL;
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	CU_ASSERT(wait_done(10, 5000) >= 0);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(sl_err[i], -ECONNREFUSED);
	CU_ASSERT(te_tcp_kernel_conn_failures(x) >= 1);
	/* the next submit tries again (and fails the same way) */
	reset_done();
	mk(0, 0, buf, 0x1000, 8);
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	CU_ASSERT(wait_done(1, 5000) >= 0);
	CU_ASSERT_EQUAL(sl_err[0], -ECONNREFUSED);
	/* bad arguments */
	mk(1, 7, buf, 0x1000, 8);
	CU_ASSERT_EQUAL(te_tcp_kernel_ops.submit(x, peer, &sl[1]), -EINVAL);
	a.proto = 9;
	CU_ASSERT_EQUAL(te_tcp_kernel_ops.peer_open(x, &a, &peer), -EINVAL);
	te_tcp_kernel_ops.destroy(x); /* closes the still open peer */
	c.conns_per_peer = 0;
	CU_ASSERT_EQUAL(te_tcp_kernel_ops.create(&c, &x), -EINVAL);
}

static void
test_port_in_use(void)
{
	struct te_xport_cfg c;
	struct te_xport *a, *b;

	cfg_init(&c, true);
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &a));
	c.data_port = te_tcp_kernel_ops.data_port(a);
	CU_ASSERT_EQUAL(te_tcp_kernel_ops.create(&c, &b), -EADDRINUSE);
	c.data_port = 0;
	c.bind_ip = "localhost"; /* a name resolves too */
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &b));
	te_tcp_kernel_ops.destroy(b);
	te_tcp_kernel_ops.destroy(a);
}

/* The server transport goes away mid-batch: every slice ends, within bounded time. */
static void
test_server_destroyed_mid_batch(void)
{
	enum { N = 400 };
	const uint32_t slice = 64 * 1024;
	uint8_t *src = malloc(slice), *rd = malloc((size_t)N / 2 * slice);

	fill(src, slice, 3);
	for (uint32_t proto = 1; proto <= 3; proto++) {
		struct pair p;
		int ok = 0, bad = 0;
		long ms;

		pair_open(&p, proto, 0, 4);
		/* WRITEs into the lower half, READs from the upper half, no range shared */
		for (int i = 0; i < N; i++) {
			uint64_t at = (uint64_t)(i / 2) * slice + (i & 1 ? SRV_LEN / 2 : 0);

			mk(i, i & 1 ? 0 : 1, i & 1 ? rd + (size_t)(i / 2) * slice : src,
			   (uintptr_t)srvmem + at, slice);
		}
		TIDE_UT_OK(submit_range(&p, 0, N));
		CU_ASSERT(wait_done(20, 10000) >= 0);
		te_tcp_kernel_ops.destroy(p.srv);
		p.srv = NULL;
		ms = wait_done(N, 10000);
		CU_ASSERT(ms >= 0 && ms < 5000);
		for (int i = 0; i < N; i++) {
			CU_ASSERT_EQUAL(sl_ndone[i], 1);
			if (sl_err[i] == 0)
				ok++;
			else
				bad++;
		}
		CU_ASSERT(ok >= 20);
		CU_ASSERT_EQUAL(ok + bad, N);
		pair_close(&p);
	}
	free(src);
	free(rd);
}

/* After the peer came back on the same port, the next submit reconnects. */
static void
test_reconnect_after_restart(void)
{
	struct pair p;
	struct te_xport_cfg c;
	uint8_t buf[8192], back[8192];
	uint16_t port;

	fill(buf, sizeof(buf), 11);
	pair_open(&p, 3, SRV_INSTANCE, 2);
	port = te_tcp_kernel_ops.data_port(p.srv);
	mk(0, 1, buf, (uintptr_t)srvmem, sizeof(buf));
	TIDE_UT_OK(submit_range(&p, 0, 1));
	CU_ASSERT(wait_done(1, 5000) >= 0);
	CU_ASSERT_EQUAL(sl_err[0], 0);
	te_tcp_kernel_ops.destroy(p.srv);
	/* the loss is noticed (EOF) and the next slice fails: nobody listens */
	usleep(50 * 1000);
	reset_done();
	mk(0, 0, back, (uintptr_t)srvmem, sizeof(back));
	TIDE_UT_OK(submit_range(&p, 0, 1));
	CU_ASSERT(wait_done(1, 5000) >= 0);
	CU_ASSERT(sl_err[0] == -ECONNREFUSED || sl_err[0] == -ECONNRESET);
	/* the peer restarts on the same port (same instance: a plain restart of the server) */
	cfg_init(&c, true);
	c.data_port = port;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &p.srv));
	reset_done();
	mk(0, 1, buf, (uintptr_t)srvmem + 100, sizeof(buf));
	TIDE_UT_OK(submit_range(&p, 0, 1));
	CU_ASSERT(wait_done(1, 5000) >= 0);
	CU_ASSERT_EQUAL(sl_err[0], 0);
	reset_done();
	mk(0, 0, back, (uintptr_t)srvmem + 100, sizeof(back));
	TIDE_UT_OK(submit_range(&p, 0, 1));
	CU_ASSERT(wait_done(1, 5000) >= 0);
	CU_ASSERT_EQUAL(sl_err[0], 0);
	CU_ASSERT_EQUAL(memcmp(buf, back, sizeof(buf)), 0);
	pair_close(&p);
}

/* Submitters on several threads at once into one peer. */
struct submitter {
	struct te_xport *x;
	struct te_xpeer *peer;
	int first, n;
	uint8_t *local;
};

static void *
submit_thread(void *arg)
{
	struct submitter *sb = arg;

	for (int i = sb->first; i < sb->first + sb->n; i += 10) {
		for (int j = i; j < i + 10; j++)
			sl[j].next = j + 1 < i + 10 ? &sl[j + 1] : NULL;
		if (te_tcp_kernel_ops.submit(sb->x, sb->peer, &sl[i]) != 0)
			return (void *)1;
	}
	return NULL;
}

static void
test_concurrent_submitters(void)
{
	enum { T = 4, PER = 250 };
	struct pair p;
	pthread_t th[T];
	struct submitter sb[T];
	uint8_t *src = malloc(T * PER * 4096), *dst = calloc(1, T * PER * 4096);

	fill(src, T * PER * 4096, 21);
	pair_open(&p, 3, SRV_INSTANCE, 4);
	for (int i = 0; i < T * PER; i++)
		mk(i, 1, src + (size_t)i * 4096, (uintptr_t)srvmem + (uint64_t)i * 4096, 4096);
	for (int t = 0; t < T; t++) {
		sb[t] = (struct submitter){.x = p.cli, .peer = p.peer, .first = t * PER, .n = PER};
		CU_ASSERT_FATAL(pthread_create(&th[t], NULL, submit_thread, &sb[t]) == 0);
	}
	for (int t = 0; t < T; t++) {
		void *r;

		pthread_join(th[t], &r);
		CU_ASSERT_PTR_NULL(r);
	}
	CU_ASSERT(wait_done(T * PER, 20000) >= 0);
	for (int i = 0; i < T * PER; i++)
		CU_ASSERT_EQUAL(sl_err[i], 0);
	reset_done();
	for (int i = 0; i < T * PER; i++)
		mk(i, 0, dst + (size_t)i * 4096, (uintptr_t)srvmem + (uint64_t)i * 4096, 4096);
	for (int t = 0; t < T; t++)
		CU_ASSERT_FATAL(pthread_create(&th[t], NULL, submit_thread, &sb[t]) == 0);
	for (int t = 0; t < T; t++)
		pthread_join(th[t], NULL);
	CU_ASSERT(wait_done(T * PER, 20000) >= 0);
	for (int i = 0; i < T * PER; i++)
		CU_ASSERT_EQUAL(sl_ndone[i], 1);
	CU_ASSERT_EQUAL(memcmp(src, dst, T * PER * 4096), 0);
	pair_close(&p);
	free(src);
	free(dst);
}

/* ---- byte-level conformance against hand-made peers ---- */

static int silent_server(uint16_t *port);

static int
raw_connect(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {.tv_sec = 3};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static bool
send_all(int fd, const void *b, size_t n)
{
	const uint8_t *p = b;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* Returns bytes received before EOF/timeout (n on success). */
static size_t
recv_all(int fd, void *b, size_t n)
{
	uint8_t *p = b;
	size_t got = 0;

	while (got < n) {
		ssize_t k = recv(fd, p + got, n - got, 0);

		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

static bool
raw_hdr(int fd, uint8_t opc, uint64_t addr, uint64_t size, uint32_t req_id)
{
	uint8_t h[TE_FRAME_HDR_LEN] = {0};

	for (int i = 0; i < 8; i++) {
		h[i] = (uint8_t)(size >> (8 * i));
		h[8 + i] = (uint8_t)(addr >> (8 * i));
	}
	h[16] = opc;
	for (int i = 0; i < 4; i++)
		h[20 + i] = (uint8_t)(req_id >> (8 * i));
	return send_all(fd, h, sizeof(h));
}

/* A stock Mooncake client's bytes against our data server. */
static void
test_wire_mooncake_client(void)
{
	struct te_xport_cfg c;
	struct te_xport *x;
	uint8_t pat[100], in[200], st[TE_FRAME_REPLY_LEN];
	uint64_t at = (uintptr_t)srvmem + 777;
	uint16_t port;
	int fd;

	cfg_init(&c, true);
	c.io_timeout_ms = 300;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	port = te_tcp_kernel_ops.data_port(x);
	fill(pat, sizeof(pat), 99);
	fd = raw_connect(port);
	/* v1 WRITE (no reply), v1 READ back on the same connection */
	CU_ASSERT(raw_hdr(fd, 0x01, at, sizeof(pat), 0) && send_all(fd, pat, sizeof(pat)));
	CU_ASSERT(raw_hdr(fd, 0x00, at, sizeof(pat), 0));
	CU_ASSERT_EQUAL(recv_all(fd, in, sizeof(pat)), sizeof(pat));
	CU_ASSERT_EQUAL(memcmp(in, pat, sizeof(pat)), 0);
	/* v2 WRITE: status after the payload; v2 READ: status, then data */
	pat[0] ^= 0xff;
	CU_ASSERT(raw_hdr(fd, 0x81, at, sizeof(pat), 0) && send_all(fd, pat, sizeof(pat)));
	CU_ASSERT_EQUAL(recv_all(fd, st, 8), 8);
	CU_ASSERT_EQUAL(tide_ut_get_le64(st), 0x4D43545600000000ULL);
	CU_ASSERT(raw_hdr(fd, 0x80, at, sizeof(pat), 0));
	CU_ASSERT_EQUAL(recv_all(fd, st, 8), 8);
	CU_ASSERT_EQUAL(tide_ut_get_le64(st), 0x4D43545600000000ULL);
	CU_ASSERT_EQUAL(recv_all(fd, in, sizeof(pat)), sizeof(pat));
	CU_ASSERT_EQUAL(memcmp(in, pat, sizeof(pat)), 0);
	/* native READ on the same port: 16-byte reply echoing the id, then data */
	CU_ASSERT(raw_hdr(fd, 0x40, at, 10, 0xdeadbeef));
	CU_ASSERT_EQUAL(recv_all(fd, st, 16), 16);
	CU_ASSERT_EQUAL(tide_ut_get_le64(st), 0x4D43545600000000ULL);
	CU_ASSERT_EQUAL(st[8], 0xef);
	CU_ASSERT_EQUAL(st[11], 0xde);
	CU_ASSERT_EQUAL(recv_all(fd, in, 10), 10);
	CU_ASSERT_EQUAL(memcmp(in, pat, 10), 0);
	/* v2 refused: status |1, then the server closes */
	CU_ASSERT(raw_hdr(fd, 0x80, (uintptr_t)forbidden, 10, 0));
	CU_ASSERT_EQUAL(recv_all(fd, st, 8), 8);
	CU_ASSERT_EQUAL(tide_ut_get_le64(st), 0x4D43545600000001ULL);
	CU_ASSERT_EQUAL(recv_all(fd, in, 1), 0);
	close(fd);
	/* v1 refused: silent close */
	fd = raw_connect(port);
	CU_ASSERT(raw_hdr(fd, 0x00, (uintptr_t)forbidden, 10, 0));
	CU_ASSERT_EQUAL(recv_all(fd, in, 1), 0);
	close(fd);
	/* malformed opcode: closed without a reply */
	fd = raw_connect(port);
	CU_ASSERT(raw_hdr(fd, 0x33, at, 10, 0));
	CU_ASSERT_EQUAL(recv_all(fd, in, 1), 0);
	close(fd);
	/* stalled mid-WRITE: closed after io_timeout_ms, the check reference dropped */
	fd = raw_connect(port);
	CU_ASSERT(raw_hdr(fd, 0x81, at, 1000, 0) && send_all(fd, pat, 10));
	usleep(100 * 1000);
	CU_ASSERT_EQUAL(__atomic_load_n(&holds, __ATOMIC_RELAXED), 1);
	CU_ASSERT_EQUAL(recv_all(fd, in, 1), 0);
	CU_ASSERT_EQUAL(__atomic_load_n(&holds, __ATOMIC_RELAXED), 0);
	close(fd);
	te_tcp_kernel_ops.destroy(x);
}

/*
 * A stock initiator's pooled lanes (v2, sequential, one peer address) end on
 * one thread: the two accepted on the other move after their second request,
 * mid-stream, and every byte still lands. One-shot and native connections stay.
 */
static void
test_stock_lanes_move_home(void)
{
	enum { LANES = 4, ROUNDS = 20, LEN = 3000 };
	struct te_xport_cfg c;
	struct te_xport *x;
	uint8_t pat[LEN], in[LEN], st[TE_FRAME_REPLY_LEN];
	int fd[LANES], one;
	uint16_t port;

	cfg_init(&c, true);
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	port = te_tcp_kernel_ops.data_port(x);
	/* one-shot: one request, then the client closes */
	one = raw_connect(port);
	CU_ASSERT(raw_hdr(one, 0x80, (uintptr_t)srvmem, 10, 0));
	CU_ASSERT_EQUAL(recv_all(one, st, 8), 8);
	CU_ASSERT_EQUAL(recv_all(one, in, 10), 10);
	close(one);
	for (int l = 0; l < LANES; l++)
		fd[l] = raw_connect(port);
	for (int r = 0; r < ROUNDS; r++) {
		for (int l = 0; l < LANES; l++) {
			uint64_t at = (uintptr_t)srvmem + (uint64_t)l * LEN;

			fill(pat, sizeof(pat), (uint32_t)(r * LANES + l));
			CU_ASSERT(raw_hdr(fd[l], 0x81, at, LEN, 0) && send_all(fd[l], pat, LEN));
			CU_ASSERT_EQUAL(recv_all(fd[l], st, 8), 8);
			CU_ASSERT_EQUAL(tide_ut_get_le64(st), 0x4D43545600000000ULL);
			CU_ASSERT(raw_hdr(fd[l], 0x80, at, LEN, 0));
			CU_ASSERT_EQUAL(recv_all(fd[l], st, 8), 8);
			CU_ASSERT_EQUAL(recv_all(fd[l], in, LEN), LEN);
			CU_ASSERT_EQUAL(memcmp(in, pat, LEN), 0);
		}
	}
	/* accepted round-robin over two threads: two of the four lanes moved */
	CU_ASSERT_EQUAL(te_tcp_kernel_srv_moves(x), 2);
	for (int l = 0; l < LANES; l++)
		close(fd[l]);
	/* native requests on a reused connection keep their thread */
	one = raw_connect(port);
	for (int r = 0; r < 4; r++) {
		CU_ASSERT(raw_hdr(one, 0x40, (uintptr_t)srvmem, 10, (uint32_t)r));
		CU_ASSERT_EQUAL(recv_all(one, st, 16), 16);
		CU_ASSERT_EQUAL(recv_all(one, in, 10), 10);
	}
	close(one);
	CU_ASSERT_EQUAL(te_tcp_kernel_srv_moves(x), 2);
	te_tcp_kernel_ops.destroy(x);
}

/* Out of descriptors: the data server pauses instead of spinning, then recovers. */
static void
test_accept_emfile(void)
{
	enum { K = 4 };
	struct te_xport_cfg c;
	struct te_xport *x;
	struct rlimit old, low;
	double cpu0;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fds[K], probe;
	long cpu_us;

	cfg_init(&c, true);
	c.io_threads = 1;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	sa.sin_port = htons(te_tcp_kernel_ops.data_port(x));
	for (int i = 0; i < K; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		CU_ASSERT_FATAL(fds[i] >= 0);
	}
	probe = open("/dev/null", O_RDONLY);
	CU_ASSERT_FATAL(probe >= 0);
	close(probe);
	CU_ASSERT_FATAL(getrlimit(RLIMIT_NOFILE, &old) == 0);
	low = old;
	low.rlim_cur = (rlim_t)probe; /* no descriptor above the ones open now */
	CU_ASSERT_FATAL(setrlimit(RLIMIT_NOFILE, &low) == 0);
	for (int i = 0; i < K; i++)
		CU_ASSERT(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cpu0 = tide_ut_cpu_s();
	usleep(300 * 1000);
	cpu_us = (long)((tide_ut_cpu_s() - cpu0) * 1e6);
	CU_ASSERT_FATAL(setrlimit(RLIMIT_NOFILE, &old) == 0);
	CU_ASSERT(cpu_us < 150000); /* a spinning listener would burn ~300 ms */
	/* every queued connection is served once descriptors are back */
	for (int i = 0; i < K; i++) {
		uint8_t st[TE_FRAME_REPLY_LEN], d[8];
		struct timeval tv = {.tv_sec = 3};

		(void)setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		CU_ASSERT(raw_hdr(fds[i], 0x40, (uintptr_t)srvmem, sizeof(d), (uint32_t)i));
		CU_ASSERT_EQUAL(recv_all(fds[i], st, sizeof(st)), sizeof(st));
		CU_ASSERT_EQUAL(tide_ut_get_le64(st), 0x4D43545600000000ULL);
		CU_ASSERT_EQUAL(recv_all(fds[i], d, sizeof(d)), sizeof(d));
		close(fds[i]);
	}
	te_tcp_kernel_ops.destroy(x);
}

/*
 * The data port listens only on its bind address, and a peer outside the
 * allowlist is closed at accept: a valid READ from 127.0.0.2 (local on
 * Linux, like all of 127/8) gets no byte back, the same READ from 127.0.0.1
 * is served.
 */
static void
test_allowlist(void)
{
	struct te_xport_cfg c;
	struct te_xport *x;
	struct tide_cidr_list allow;
	_Atomic uint64_t refused = 0;
	uint8_t st[TE_FRAME_REPLY_LEN], d[8];
	uint16_t port;
	long t0;
	int fd;

	TIDE_UT_OK(tide_cidr_parse("127.0.0.1/32", &allow, NULL, 0));
	cfg_init(&c, true);
	c.allow = &allow;
	c.refused = &refused;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	port = te_tcp_kernel_ops.data_port(x);

	CU_ASSERT_EQUAL(tide_ut_connect_from("127.0.0.1", "127.0.0.2", port, 2000), -ECONNREFUSED);

	fd = tide_ut_connect_from("127.0.0.2", "127.0.0.1", port, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(raw_hdr(fd, 0x40, (uintptr_t)srvmem, sizeof(d), 1));
	t0 = ms_now();
	CU_ASSERT_EQUAL(recv_all(fd, st, sizeof(st)), 0);
	CU_ASSERT(ms_now() - t0 < 1000); /* closed, not left to time out */
	close(fd);
	CU_ASSERT_EQUAL(atomic_load(&refused), 1);

	fd = tide_ut_connect_from("127.0.0.1", "127.0.0.1", port, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(raw_hdr(fd, 0x40, (uintptr_t)srvmem, sizeof(d), 2));
	CU_ASSERT_EQUAL(recv_all(fd, st, sizeof(st)), sizeof(st));
	CU_ASSERT_EQUAL(tide_ut_get_le64(st), 0x4D43545600000000ULL);
	CU_ASSERT_EQUAL(recv_all(fd, d, sizeof(d)), sizeof(d));
	close(fd);
	CU_ASSERT_EQUAL(atomic_load(&refused), 1);
	te_tcp_kernel_ops.destroy(x);
}

/* A sequential Mooncake-style v1/v2 server (one connection), written from the spec. */
struct mc_server {
	int lfd;
	uint8_t *mem;
	uint64_t base, len;
	int served;
	int die_at; /* close on receiving the die_at-th request, unanswered; 0: never */
};

static void *
mc_server_main(void *arg)
{
	struct mc_server *m = arg;
	int fd = accept(m->lfd, NULL, NULL);
	uint8_t h[TE_FRAME_HDR_LEN], st[8];

	int one = 1;

	if (fd < 0)
		return NULL;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* as Mooncake */
	while (recv_all(fd, h, sizeof(h)) == sizeof(h)) {
		uint64_t size = tide_ut_get_le64(h), addr = tide_ut_get_le64(h + 8);
		bool v2 = h[16] & 0x80, write = h[16] & 1;

		if (addr < m->base || addr + size > m->base + m->len)
			break; /* v1: silent close (v2 would send |1 first) */
		if (m->die_at != 0 && m->served + 1 == m->die_at)
			break;
		for (int i = 0; i < 8; i++)
			st[i] = (uint8_t)(0x4D43545600000000ULL >> (8 * i));
		if (write) {
			if (recv_all(fd, m->mem + (addr - m->base), size) != size)
				break;
			if (v2 && !send_all(fd, st, 8))
				break;
		} else {
			if (v2 && !send_all(fd, st, 8))
				break;
			if (!send_all(fd, m->mem + (addr - m->base), size))
				break;
		}
		m->served++;
	}
	close(fd);
	return NULL;
}

static void
wire_mooncake_server(uint32_t proto)
{
	enum { N = 60 };
	struct mc_server m = {.base = 0x7f0000000000ULL, .len = 1 << 20};
	struct te_xport_cfg c;
	struct te_xport *x;
	struct te_xpeer *peer;
	struct te_peer_addr a = {.proto = proto};
	uint8_t *src = malloc(N * 1000), *dst = calloc(1, N * 1000);
	pthread_t th;

	m.mem = calloc(1, m.len);
	m.lfd = silent_server(&a.data_port);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, mc_server_main, &m) == 0);
	cfg_init(&c, false);
	c.conns_per_peer = 1;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	strcpy(a.host, "127.0.0.1");
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(x, &a, &peer));
	fill(src, N * 1000, 5 + proto);
	reset_done();
	for (int i = 0; i < N; i++) {
		mk(i, 1, src + i * 1000, m.base + (uint64_t)i * 1000, 1000);
		mk(N + i, 0, dst + i * 1000, m.base + (uint64_t)i * 1000, 1000);
	}
	for (int i = 0; i < 2 * N; i++)
		sl[i].next = i + 1 < 2 * N ? &sl[i + 1] : NULL;
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	CU_ASSERT(wait_done(2 * N, 10000) >= 0);
	for (int i = 0; i < 2 * N; i++)
		CU_ASSERT_EQUAL(sl_err[i], 0);
	CU_ASSERT_EQUAL(memcmp(src, dst, N * 1000), 0);
	te_tcp_kernel_ops.peer_close(x, peer, -ECANCELED);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(m.served, 2 * N);
	te_tcp_kernel_ops.destroy(x);
	close(m.lfd);
	free(m.mem);
	free(src);
	free(dst);
}

static void
test_wire_mooncake_server(void)
{
	wire_mooncake_server(1);
	wire_mooncake_server(2);
}

/* A "server" that accepts (via the backlog) but never answers. */
static int
silent_server(uint16_t *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CU_ASSERT_FATAL(listen(fd, 16) == 0);
	CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&sa, &l) == 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static void
test_io_timeout_and_cancel(void)
{
	struct te_xport_cfg c;
	struct te_xport *x;
	struct te_xpeer *peer;
	struct te_peer_addr a = {.proto = 3};
	uint8_t buf[64];
	uint16_t port;
	int lfd = silent_server(&port);
	long ms;

	cfg_init(&c, false);
	c.io_timeout_ms = 300;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	strcpy(a.host, "127.0.0.1");
	a.data_port = port;
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(x, &a, &peer));
	reset_done();
	for (int i = 0; i < 8; i++)
		mk(i, 0, buf, 0x1000, sizeof(buf));
	for (int i = 0; i < 8; i++)
		sl[i].next = i + 1 < 8 ? &sl[i + 1] : NULL;
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	ms = wait_done(8, 5000);
	CU_ASSERT(ms >= 250 && ms < 2000);
	for (int i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(sl_err[i], -ETIMEDOUT);
	/* peer_close ends stuck slices with the given error, at once */
	te_tcp_kernel_ops.peer_close(x, peer, -ECANCELED);
	c.io_timeout_ms = 60000;
	te_tcp_kernel_ops.destroy(x);
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(x, &a, &peer));
	reset_done();
	for (int i = 0; i < 8; i++) {
		mk(i, (uint8_t)(i & 1), buf, 0x1000, sizeof(buf));
		sl[i].next = i + 1 < 8 ? &sl[i + 1] : NULL;
	}
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	usleep(100 * 1000);
	CU_ASSERT_EQUAL(ndone, 0);
	te_tcp_kernel_ops.peer_close(x, peer, -EPIPE);
	CU_ASSERT_EQUAL(ndone, 8);
	for (int i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(sl_err[i], -EPIPE);
	/* destroy with slices still owned: -ECANCELED */
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(x, &a, &peer));
	reset_done();
	for (int i = 0; i < 8; i++) {
		mk(i, (uint8_t)(i & 1), buf, 0x1000, sizeof(buf));
		sl[i].next = i + 1 < 8 ? &sl[i + 1] : NULL;
	}
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	usleep(50 * 1000);
	te_tcp_kernel_ops.destroy(x);
	CU_ASSERT_EQUAL(ndone, 8);
	for (int i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(sl_err[i], -ECANCELED);
	close(lfd);
}

/* ------------------------------------------------------------------------ */
/* Inline requests (inline_begin / inline_run on the calling thread)        */

/* Run slice i inline if the transport takes it; true when it did. */
static bool
run_inline(struct te_xport *x, struct te_xpeer *peer, int i)
{
	void *h;

	sl[i].next = NULL;
	h = te_tcp_kernel_ops.inline_begin(x, peer, &sl[i]);
	if (h == NULL)
		return false;
	te_tcp_kernel_ops.inline_run(x, h);
	return true;
}

/* As run_inline, retrying while the owner thread is busy with the slot (it
 * may still be inside the call that completed the previous request). */
static bool
run_inline_retry(struct te_xport *x, struct te_xpeer *peer, int i)
{
	for (int k = 0; k < 200; k++) {
		if (run_inline(x, peer, i))
			return true;
		usleep(1000);
	}
	return false;
}

/* The owner counts a lost connection right after failing its slices. */
static uint64_t
failures_settled(struct te_xport *x, uint64_t want)
{
	for (int k = 0; k < 200 && te_tcp_kernel_conn_failures(x) < want; k++)
		usleep(1000);
	return te_tcp_kernel_conn_failures(x);
}

/* Wait until slice i completed (any thread); its error, or 1 on timeout. */
static int
wait_slice(int i, int timeout_ms)
{
	uint64_t t0 = ms_now();
	int err = 1;

	pthread_mutex_lock(&mu);
	while (sl_ndone[i] == 0 && ms_now() - t0 < (uint64_t)timeout_ms) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 5 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&cv, &mu, &ts);
	}
	if (sl_ndone[i] > 0)
		err = sl_err[i];
	pthread_mutex_unlock(&mu);
	return err;
}

/* Small WRITEs and READs inline on warm connections, every framing; a large
 * slice, a cold peer and a peer with queued work go through the io threads. */
static void
inline_basic(uint32_t proto, uint64_t inst, uint32_t conns)
{
	enum { N = 300 };
	struct pair p;
	uint32_t len = N * 4096;
	uint8_t *src = malloc(len), *dst = calloc(1, len), *big = malloc(1 << 20);
	uint64_t base = (uintptr_t)srvmem + 8192;
	int taken = 0;

	fill(src, len, 40 + proto);
	pair_open(&p, proto, inst, conns);
	/* no connection yet: not taken, nothing touched */
	mk(0, 1, src, base, 4096);
	CU_ASSERT_FALSE(run_inline(p.cli, p.peer, 0));
	CU_ASSERT_EQUAL(ndone, 0);
	TIDE_UT_OK(submit_range(&p, 0, 1));
	CU_ASSERT_EQUAL(wait_slice(0, 5000), 0);
	reset_done();
	for (int i = 0; i < N; i++) {
		uint32_t l = 1 + (uint32_t)rand() % 4096;

		mk(i, 1, src + (size_t)i * 4096, base + (uint64_t)i * 4096, l);
		if (run_inline(p.cli, p.peer, i)) {
			taken++;
			/* done on return, on this thread */
			CU_ASSERT_EQUAL(sl_ndone[i], 1);
		} else {
			TIDE_UT_OK(submit_range(&p, i, i + 1));
		}
		CU_ASSERT_EQUAL(wait_slice(i, 5000), 0);
		mk(N + i, 0, dst + (size_t)i * 4096, base + (uint64_t)i * 4096, l);
		if (run_inline(p.cli, p.peer, N + i))
			taken++;
		else
			TIDE_UT_OK(submit_range(&p, N + i, N + i + 1));
		CU_ASSERT_EQUAL(wait_slice(N + i, 5000), 0);
		CU_ASSERT_EQUAL(memcmp(src + (size_t)i * 4096, dst + (size_t)i * 4096, l), 0);
	}
	/* The connection is idle between requests: nearly every one goes inline
	 * (the owner's timer tick may hold the slot at the moment we try). */
	CU_ASSERT(taken >= 2 * N * 9 / 10);
	for (int i = 0; i < 2 * N; i++)
		CU_ASSERT_EQUAL(sl_ndone[i], 1);
	/* A large slice is not taken: the io threads move it. */
	reset_done();
	mk(0, 0, big, base, 1 << 20);
	CU_ASSERT_FALSE(run_inline(p.cli, p.peer, 0));
	TIDE_UT_OK(submit_range(&p, 0, 1));
	CU_ASSERT_EQUAL(wait_slice(0, 5000), 0);
	/* Inline after io-thread work still works (epoll re-armed, slots idle). */
	mk(1, 0, dst, base, 4096);
	CU_ASSERT_TRUE(run_inline_retry(p.cli, p.peer, 1));
	CU_ASSERT_EQUAL(sl_err[1], 0);
	CU_ASSERT_EQUAL(te_tcp_kernel_conn_failures(p.cli), 0);
	CU_ASSERT_EQUAL(nstray, 0);
	pair_close(&p);
	free(src);
	free(dst);
	free(big);
}

static void
test_inline_basic(void)
{
	inline_basic(3, SRV_INSTANCE, 2);
	inline_basic(2, 0, 1);
	inline_basic(1, 0, 1); /* v1 WRITE ends when sent */
}

struct inl_worker {
	struct pair *p;
	int first, n;
	uint8_t *src, *dst;
	uint64_t base;
	int taken, errs;
};

static void *
inl_worker_main(void *arg)
{
	struct inl_worker *w = arg;

	for (int k = 0; k < w->n; k++) {
		int i = w->first + 2 * k;
		uint32_t l = 1 + (uint32_t)(i * 7919) % 8192;
		size_t off = (size_t)(i / 2) * 8192;

		mk(i, 1, w->src + off, w->base + off, l);
		if (run_inline(w->p->cli, w->p->peer, i))
			w->taken++;
		else
			TIDE_UT_OK(te_tcp_kernel_ops.submit(w->p->cli, w->p->peer, &sl[i]));
		w->errs += wait_slice(i, 10000) != 0;
		mk(i + 1, 0, w->dst + off, w->base + off, l);
		if (run_inline(w->p->cli, w->p->peer, i + 1))
			w->taken++;
		else
			TIDE_UT_OK(te_tcp_kernel_ops.submit(w->p->cli, w->p->peer, &sl[i + 1]));
		w->errs += wait_slice(i + 1, 10000) != 0;
	}
	return NULL;
}

/* Threads on one peer, inline where a slot is idle, through the io threads
 * otherwise, plus a batch streaming meanwhile: every slice ends once, with
 * the right bytes. */
static void
test_inline_concurrent(void)
{
	enum { T = 4, K = 150, NB = 200 };
	struct pair p;
	struct inl_worker w[T];
	pthread_t th[T];
	uint8_t *src = malloc(SRV_LEN / 2), *dst = calloc(1, SRV_LEN / 2), *bb = malloc(NB * 4096);
	uint64_t base = (uintptr_t)srvmem;
	int taken = 0;

	fill(src, SRV_LEN / 2, 99);
	pair_open(&p, 3, SRV_INSTANCE, 2);
	mk(MAX_SL - 1, 1, src, base, 64);
	TIDE_UT_OK(submit_range(&p, MAX_SL - 1, MAX_SL));
	CU_ASSERT_EQUAL(wait_slice(MAX_SL - 1, 5000), 0);
	for (int t = 0; t < T; t++) {
		w[t] = (struct inl_worker){
			.p = &p, .first = t * 2 * K, .n = K, .src = src, .dst = dst, .base = base};
		CU_ASSERT_FATAL(pthread_create(&th[t], NULL, inl_worker_main, &w[t]) == 0);
	}
	/* a batch of READs from the upper half while the threads run */
	for (int i = 0; i < NB; i++)
		mk(2 * T * K + i, 0, bb + (size_t)i * 4096, base + SRV_LEN / 2 + (uint64_t)i * 4096,
		   4096);
	TIDE_UT_OK(submit_range(&p, 2 * T * K, 2 * T * K + NB));
	for (int t = 0; t < T; t++) {
		pthread_join(th[t], NULL);
		CU_ASSERT_EQUAL(w[t].errs, 0);
		taken += w[t].taken;
	}
	for (int i = 0; i < NB; i++)
		CU_ASSERT_EQUAL(wait_slice(2 * T * K + i, 10000), 0);
	for (int i = 0; i < 2 * T * K + NB; i++)
		CU_ASSERT_EQUAL(sl_ndone[i], 1);
	for (int i = 0; i < 2 * T * K; i += 2) {
		size_t off = (size_t)(i / 2) * 8192;
		uint32_t l = 1 + (uint32_t)(i * 7919) % 8192;

		CU_ASSERT_EQUAL(memcmp(src + off, dst + off, l), 0);
	}
	CU_ASSERT(taken > 0);
	CU_ASSERT_EQUAL(te_tcp_kernel_conn_failures(p.cli), 0);
	CU_ASSERT_EQUAL(nstray, 0);
	pair_close(&p);
	free(src);
	free(dst);
	free(bb);
}

/* A v1 peer that accepts and never answers: a v1 WRITE (done when sent)
 * brings the connection up; an inline READ then times out as the io threads
 * would time it out, and the connection is counted lost. */
static void
test_inline_timeout(void)
{
	struct te_xport_cfg c;
	struct te_xport *x;
	struct te_xpeer *peer;
	struct te_peer_addr a = {.proto = 1};
	uint8_t buf[64] = {0};
	uint16_t port;
	int lfd = silent_server(&port);
	uint64_t t0;

	cfg_init(&c, false);
	c.io_timeout_ms = 300;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	strcpy(a.host, "127.0.0.1");
	a.data_port = port;
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(x, &a, &peer));
	reset_done();
	mk(0, 1, buf, 0x1000, sizeof(buf));
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	CU_ASSERT_EQUAL(wait_slice(0, 5000), 0);
	mk(1, 0, buf, 0x1000, sizeof(buf));
	t0 = ms_now();
	CU_ASSERT_TRUE_FATAL(run_inline_retry(x, peer, 1));
	CU_ASSERT(ms_now() - t0 >= 290 && ms_now() - t0 < 2000);
	CU_ASSERT_EQUAL(wait_slice(1, 5000), -ETIMEDOUT);
	CU_ASSERT_EQUAL(sl_ndone[1], 1);
	CU_ASSERT_EQUAL(failures_settled(x, 1), 1);
	/* The next request reconnects (through the io threads). */
	mk(2, 1, buf, 0x1000, sizeof(buf));
	CU_ASSERT_FALSE(run_inline(x, peer, 2));
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[2]));
	CU_ASSERT_EQUAL(wait_slice(2, 5000), 0);
	te_tcp_kernel_ops.peer_close(x, peer, -ECANCELED);
	te_tcp_kernel_ops.destroy(x);
	close(lfd);
}

struct closer {
	struct te_xport *x;
	struct te_xpeer *peer;
	int delay_ms;
};

static void *
closer_main(void *arg)
{
	struct closer *c = arg;

	usleep((useconds_t)c->delay_ms * 1000);
	te_tcp_kernel_ops.peer_close(c->x, c->peer, -EPIPE);
	return NULL;
}

/* peer_close while a caller waits inline on a peer that never answers: the
 * caller returns within INLINE_CHECK_MS and the request ends with close's err. */
static void
test_inline_peer_close(void)
{
	struct te_xport_cfg c;
	struct closer cl;
	struct te_peer_addr a = {.proto = 1};
	uint8_t buf[64] = {0};
	uint16_t port;
	int lfd = silent_server(&port);
	pthread_t th;
	uint64_t t0;

	cfg_init(&c, false);
	c.io_timeout_ms = 60000;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &cl.x));
	strcpy(a.host, "127.0.0.1");
	a.data_port = port;
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(cl.x, &a, &cl.peer));
	reset_done();
	mk(0, 1, buf, 0x1000, sizeof(buf));
	TIDE_UT_OK(te_tcp_kernel_ops.submit(cl.x, cl.peer, &sl[0]));
	CU_ASSERT_EQUAL(wait_slice(0, 5000), 0);
	cl.delay_ms = 100;
	CU_ASSERT_FATAL(pthread_create(&th, NULL, closer_main, &cl) == 0);
	mk(1, 0, buf, 0x1000, sizeof(buf));
	t0 = ms_now();
	CU_ASSERT_TRUE(run_inline_retry(cl.x, cl.peer, 1));
	CU_ASSERT(ms_now() - t0 < 1000);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(sl_ndone[1], 1);
	CU_ASSERT_EQUAL(sl_err[1], -EPIPE);
	te_tcp_kernel_ops.destroy(cl.x);
	close(lfd);
}

/* The peer dies mid request: a v2 server that closes on the second request
 * unanswered. The inline READ fails -ECONNRESET, exactly once, and the
 * connection is counted lost. */
static void
test_inline_peer_dies(void)
{
	struct mc_server m = {.base = 0x7f0000000000ULL, .len = 1 << 20, .die_at = 2};
	struct te_xport_cfg c;
	struct te_xport *x;
	struct te_xpeer *peer;
	struct te_peer_addr a = {.proto = 2};
	uint8_t buf[4096];
	pthread_t th;

	m.mem = calloc(1, m.len);
	m.lfd = silent_server(&a.data_port);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, mc_server_main, &m) == 0);
	cfg_init(&c, false);
	c.conns_per_peer = 1;
	TIDE_UT_OK(te_tcp_kernel_ops.create(&c, &x));
	strcpy(a.host, "127.0.0.1");
	TIDE_UT_OK(te_tcp_kernel_ops.peer_open(x, &a, &peer));
	reset_done();
	fill(buf, sizeof(buf), 3);
	mk(0, 1, buf, m.base, sizeof(buf));
	TIDE_UT_OK(te_tcp_kernel_ops.submit(x, peer, &sl[0]));
	CU_ASSERT_EQUAL(wait_slice(0, 5000), 0);
	mk(1, 0, buf, m.base, sizeof(buf));
	CU_ASSERT_TRUE(run_inline_retry(x, peer, 1));
	CU_ASSERT_EQUAL(wait_slice(1, 5000), -ECONNRESET);
	CU_ASSERT_EQUAL(sl_ndone[1], 1);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(m.served, 1);
	CU_ASSERT_EQUAL(failures_settled(x, 1), 1);
	CU_ASSERT_EQUAL(nstray, 0);
	te_tcp_kernel_ops.peer_close(x, peer, -ECANCELED);
	te_tcp_kernel_ops.destroy(x);
	close(m.lfd);
	free(m.mem);
}

static int
suite_init(void)
{
	srand(4242);
	srvmem = malloc(SRV_LEN);
	forbidden = malloc(4096);
	return srvmem == NULL || forbidden == NULL;
}

static int
suite_fini(void)
{
	free(srvmem);
	free(forbidden);
	return 0;
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_tcp_kernel", suite_init, suite_fini);

	CU_add_test(s, "write_read_v1", test_write_read_v1);
	CU_add_test(s, "write_read_v2", test_write_read_v2);
	CU_add_test(s, "write_read_native", test_write_read_native);
	CU_add_test(s, "many_random_native", test_many_random_native);
	CU_add_test(s, "many_random_v2", test_many_random_v2);
	CU_add_test(s, "refused_address", test_refused_address);
	CU_add_test(s, "stale_instance", test_stale_instance);
	CU_add_test(s, "connect_refused", test_connect_refused);
	CU_add_test(s, "port_in_use", test_port_in_use);
	CU_add_test(s, "server_destroyed_mid_batch", test_server_destroyed_mid_batch);
	CU_add_test(s, "io_timeout_and_cancel", test_io_timeout_and_cancel);
	CU_add_test(s, "reconnect_after_restart", test_reconnect_after_restart);
	CU_add_test(s, "concurrent_submitters", test_concurrent_submitters);
	CU_add_test(s, "wire_mooncake_client", test_wire_mooncake_client);
	CU_add_test(s, "wire_mooncake_server", test_wire_mooncake_server);
	CU_add_test(s, "stock_lanes_move_home", test_stock_lanes_move_home);
	CU_add_test(s, "accept_emfile", test_accept_emfile);
	CU_add_test(s, "allowlist", test_allowlist);
	CU_add_test(s, "inline_basic", test_inline_basic);
	CU_add_test(s, "inline_concurrent", test_inline_concurrent);
	CU_add_test(s, "inline_timeout", test_inline_timeout);
	CU_add_test(s, "inline_peer_close", test_inline_peer_close);
	CU_add_test(s, "inline_peer_dies", test_inline_peer_dies);
}

TIDE_UT_MAIN(register_tests)
