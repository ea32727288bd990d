/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine core over real kernel sockets on loopback: two engines in one
 * process, P2PHANDSHAKE metadata, the kernel-socket transport.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "te_sess.h"
#include "te_xport.h"
#include "te_ut.h"
#include "tide_te.h"
#include "tide_ut.h"

#define MIB (1u << 20)

static struct tide_te *
mk(uint32_t io_timeout_ms, uint16_t rpc_port)
{
	struct tide_te_opts o;
	struct tide_te *te = NULL;
	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	o.slice_size = 256 * 1024;
	o.io_timeout_ms = io_timeout_ms;
	o.connect_timeout_ms = 1000;
	o.rpc_port = rpc_port;
	CU_ASSERT_FATAL(tide_te_create(&o, &te) == 0);
	CU_ASSERT_FATAL(tide_te_install_transport(te, "tcp") == 0);
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(te), "tcp-kernel");
	return te;
}

static void
fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)(i * 31 + seed + (i >> 12));
	}
}

static void
test_options(void)
{
	struct tide_te_opts o;
	struct tide_te *te = NULL;
	tide_te_opts_init(&o, sizeof(o));
	o.metadata = "redis://127.0.0.1:6379";
	CU_ASSERT(tide_te_create(&o, &te) == -EPROTONOSUPPORT);
	tide_te_opts_init(&o, sizeof(o));
	o.slice_size = 12;
	CU_ASSERT(tide_te_create(&o, &te) == -EINVAL);
	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	CU_ASSERT_FATAL(tide_te_create(&o, &te) == 0);
	CU_ASSERT(tide_te_install_transport(te, "rdma") == -EPROTONOSUPPORT);
	CU_ASSERT(tide_te_install_transport(te, "carrier-pigeon") == -EPROTONOSUPPORT);
	CU_ASSERT(tide_te_install_transport(te, "tcp") == 0);
	CU_ASSERT(tide_te_install_transport(te, "tcp") == 0);
	/* The P2P name is host:rpc_port. */
	char host[64];
	uint16_t rp, dp;
	tide_te_local_addr(te, host, sizeof(host), &rp, &dp);
	char want[96];
	snprintf(want, sizeof(want), "%s:%u", host, rp);
	CU_ASSERT_STRING_EQUAL(tide_te_local_name(te), want);
	CU_ASSERT(dp != 0);
	tide_te_destroy(te);
}

static void
test_register(void)
{
	struct tide_te *te = mk(5000, 0);
	uint8_t *buf = malloc(3 * 4096);
	CU_ASSERT(tide_te_register(te, NULL, 10, "*") == -EINVAL);
	CU_ASSERT(tide_te_register(te, buf, 0, "*") == -EINVAL);
	CU_ASSERT(tide_te_register(te, (void *)(uintptr_t)(UINT64_MAX - 10), 100, "*") == -EINVAL);
	CU_ASSERT(tide_te_register(te, buf + 4096, 4096, "*") == 0);
	CU_ASSERT(tide_te_register(te, buf, 4097, "*") == -EEXIST);
	CU_ASSERT(tide_te_register(te, buf + 8191, 2, "*") == -EEXIST);
	CU_ASSERT(tide_te_register(te, buf, 4096, "cpu:0") == 0);
	CU_ASSERT(tide_te_register(te, buf + 8192, 4096, "*") == 0);
	uint64_t a, l;
	CU_ASSERT(tide_te_segment_buffer(te, TIDE_TE_LOCAL_SEG, 1, &a, &l) == 0);
	CU_ASSERT(a == (uintptr_t)buf + 4096 && l == 4096);
	CU_ASSERT(tide_te_unregister(te, buf + 1) == -ENOENT);
	CU_ASSERT(tide_te_unregister(te, buf + 4096) == 0);
	CU_ASSERT(tide_te_unregister(te, buf + 4096) == -ENOENT);
	CU_ASSERT(tide_te_unregister(te, buf) == 0);
	CU_ASSERT(tide_te_unregister(te, buf + 8192) == 0);
	tide_te_destroy(te);
	free(buf);
}

static void
test_local_segment(void)
{
	struct tide_te *te = mk(5000, 0);
	uint8_t *seg = calloc(1, MIB), *src = malloc(4096), *dst = malloc(4096);
	tide_te_seg_t s;
	fill(src, 4096, 7);
	CU_ASSERT(tide_te_register(te, seg, MIB, "*") == 0);
	CU_ASSERT(tide_te_open_segment(te, tide_te_local_name(te), &s) == 0);
	CU_ASSERT(s == TIDE_TE_LOCAL_SEG);
	struct tide_te_status st = te_ut_one(te, TIDE_TE_WRITE, src, s, (uintptr_t)seg + 100, 4096);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED && st.transferred == 4096);
	st = te_ut_one(te, TIDE_TE_READ, dst, s, (uintptr_t)seg + 100, 4096);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	CU_ASSERT(memcmp(src, dst, 4096) == 0);
	st = te_ut_one(te, TIDE_TE_WRITE, src, s, (uintptr_t)seg + MIB - 10, 4096);
	CU_ASSERT(st.state == TIDE_TE_FAILED && st.error == -EFAULT);
	tide_te_destroy(te);
	free(seg);
	free(src);
	free(dst);
}

/* Many requests of several slices each, write then read back. */
static void
test_remote_roundtrip(void)
{
	struct tide_te *a = mk(5000, 0), *b = mk(5000, 0);
	const size_t n = 3 * MIB + 123;
	uint8_t *seg = calloc(1, 8 * MIB), *src = malloc(n), *back = calloc(1, n);
	tide_te_seg_t s;
	fill(src, n, 3);
	CU_ASSERT_FATAL(tide_te_register(a, seg, 8 * MIB, "*") == 0);
	CU_ASSERT_FATAL(tide_te_open_segment(b, tide_te_local_name(a), &s) == 0);
	CU_ASSERT(s != TIDE_TE_LOCAL_SEG);
	uint64_t ra, rl;
	CU_ASSERT(tide_te_segment_buffer(b, s, 0, &ra, &rl) == 0);
	CU_ASSERT(ra == (uintptr_t)seg && rl == 8 * MIB);

	struct tide_te_status st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg + 17, n);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED && st.transferred == n);
	CU_ASSERT(memcmp(seg + 17, src, n) == 0);
	st = te_ut_one(b, TIDE_TE_READ, back, s, (uintptr_t)seg + 17, n);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	CU_ASSERT(memcmp(back, src, n) == 0);

	/* A batch of 64 small requests: every one completes, each in its place. */
	struct tide_te_req reqs[64];
	tide_te_batch_t bt;
	CU_ASSERT_FATAL(tide_te_batch_alloc(b, 64, &bt) == 0);
	for (unsigned i = 0; i < 64; i++) {
		reqs[i] = (struct tide_te_req){.op = TIDE_TE_WRITE,
					       .local = src + i * 1000,
					       .seg = s,
					       .remote_addr = (uintptr_t)seg + 4 * MIB + i * 4096,
					       .len = 1000 + i};
	}
	CU_ASSERT(tide_te_submit(b, bt, reqs, 32) == 0);
	CU_ASSERT(tide_te_submit(b, bt, reqs + 32, 32) == 0);
	CU_ASSERT(tide_te_submit(b, bt, reqs, 1) == -ENOSPC);
	CU_ASSERT(tide_te_wait(b, bt, 30000) == 0);
	for (unsigned i = 0; i < 64; i++) {
		struct tide_te_status s2;
		CU_ASSERT(tide_te_status(b, bt, i, &s2) == 0);
		CU_ASSERT(s2.state == TIDE_TE_COMPLETED);
		CU_ASSERT(memcmp(seg + 4 * MIB + i * 4096, src + i * 1000, 1000 + i) == 0);
	}
	struct tide_te_status s3;
	CU_ASSERT(tide_te_status(b, bt, 64, &s3) == 0 && s3.state == TIDE_TE_INVALID);
	CU_ASSERT(tide_te_batch_free(b, bt) == 0);
	CU_ASSERT(tide_te_batch_free(b, bt) == -ENOENT);

	struct tide_te_stats sa;
	tide_te_stats_get(a, &sa);
	CU_ASSERT(sa.srv_writes > 0 && sa.srv_reads > 0);
	CU_ASSERT(sa.srv_rejected == 0);
	tide_te_destroy(b);
	tide_te_destroy(a);
	free(seg);
	free(src);
	free(back);
}

/*
 * One small request into a fresh batch runs on the submitting thread once a
 * connection is up (te_xport.h inline_begin): it has ended when tide_te_submit
 * returns. Then the peer goes away: small requests fail, none hangs.
 */
static void
test_inline_small(void)
{
	struct tide_te *a = mk(2000, 0), *b = mk(2000, 0);
	uint8_t *seg = calloc(1, MIB), *src = malloc(MIB), *back = calloc(1, MIB);
	tide_te_seg_t s;
	int ended = 0;

	fill(src, MIB, 9);
	CU_ASSERT_FATAL(tide_te_register(a, seg, MIB, "*") == 0);
	CU_ASSERT_FATAL(tide_te_open_segment(b, tide_te_local_name(a), &s) == 0);
	struct tide_te_status st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg, 4096);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	for (unsigned i = 0; i < 100; i++) {
		size_t off = (size_t)i * 4096, len = 1 + i * 37 % 4096;
		struct tide_te_req r = {.op = TIDE_TE_WRITE,
					.local = src + off,
					.seg = s,
					.remote_addr = (uintptr_t)seg + off,
					.len = len};

		/* a WRITE, then a READ of it back, each one request in a fresh batch */
		for (int k = 0; k < 2; k++) {
			tide_te_batch_t bt;

			CU_ASSERT_FATAL(tide_te_batch_alloc(b, 1, &bt) == 0);
			CU_ASSERT(tide_te_submit(b, bt, &r, 1) == 0);
			CU_ASSERT(tide_te_status(b, bt, 0, &st) == 0);
			ended += st.state == TIDE_TE_COMPLETED;
			CU_ASSERT(tide_te_wait(b, bt, 10000) == 0);
			CU_ASSERT(tide_te_batch_result(b, bt) == 0);
			CU_ASSERT(tide_te_batch_free(b, bt) == 0);
			r.op = TIDE_TE_READ;
			r.local = back + off;
		}
		CU_ASSERT(memcmp(back + off, src + off, len) == 0);
	}
	/* Idle connections between requests: (nearly) all ended inside submit. */
	CU_ASSERT(ended >= 180);
	tide_te_destroy(a);
	for (unsigned i = 0; i < 3; i++) {
		st = te_ut_one(b, TIDE_TE_READ, back, s, (uintptr_t)seg, 4096);
		CU_ASSERT(st.state == TIDE_TE_FAILED || st.state == TIDE_TE_TIMEOUT);
		CU_ASSERT(st.error != 0);
	}
	tide_te_destroy(b);
	free(seg);
	free(src);
	free(back);
}

/* Memory this process has not mapped (a device pointer, a freed region) is refused
 * at registration, not found out by the first peer that copies into it. */
static void
test_register_unmapped(void)
{
	struct tide_te *te = mk(5000, 0);
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *p = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CU_ASSERT_FATAL(p != MAP_FAILED);
	CU_ASSERT(munmap(p + pg, pg) == 0); /* a hole in the middle */
	CU_ASSERT(tide_te_register(te, p, 3 * pg, "*") == -EFAULT);
	CU_ASSERT(tide_te_register_local(te, p + 10, 2 * pg) == -EFAULT);
	CU_ASSERT(tide_te_register(te, (void *)(uintptr_t)0x1000, 4096, "*") == -EFAULT);
	CU_ASSERT(tide_te_register(te, p + 2 * pg, pg, "*") == 0); /* mapped: fine */
	CU_ASSERT(tide_te_register_local(te, p, pg) == 0);
	CU_ASSERT(tide_te_unregister(te, p + 2 * pg) == 0);
	CU_ASSERT(tide_te_unregister_local(te, p) == 0);
	tide_te_destroy(te);
	munmap(p, pg);
	munmap(p + 2 * pg, pg);
}

/* tide_te_transfer_sync and the array submit: one call per batch, every byte placed;
 * errors come back as the first failed request's. */
static void
test_transfer_sync(void)
{
	struct tide_te *a = mk(5000, 0), *b = mk(5000, 0);
	const unsigned n = 200; /* more than one 64-request chunk of tide_te_submit_v */
	uint8_t *seg = calloc(1, 4 * MIB), *src = malloc(n * 1024), *back = calloc(1, n * 1024);
	uint64_t loc[200], rem[200], len[200];
	tide_te_seg_t s;
	tide_te_batch_t bt;

	fill(src, n * 1024, 5);
	CU_ASSERT_FATAL(tide_te_register(a, seg, 4 * MIB, "*") == 0);
	CU_ASSERT_FATAL(tide_te_open_segment(b, tide_te_local_name(a), &s) == 0);
	for (unsigned i = 0; i < n; i++) {
		loc[i] = (uintptr_t)src + i * 1024;
		rem[i] = (uintptr_t)seg + i * 4096;
		len[i] = 1 + (i * 7) % 1024;
	}
	CU_ASSERT(tide_te_transfer_sync(b, s, TIDE_TE_WRITE, loc, rem, len, n, 30000) == 0);
	for (unsigned i = 0; i < n; i++) {
		CU_ASSERT(memcmp(seg + i * 4096, src + i * 1024, len[i]) == 0);
		loc[i] = (uintptr_t)back + i * 1024;
	}
	CU_ASSERT(tide_te_transfer_sync(b, s, TIDE_TE_READ, loc, rem, len, n, 30000) == 0);
	for (unsigned i = 0; i < n; i++) {
		CU_ASSERT(memcmp(back + i * 1024, src + i * 1024, len[i]) == 0);
	}
	/* One slice outside the peer's buffers: the batch fails with its error. */
	rem[n - 1] = (uintptr_t)seg + 4 * MIB - 10;
	CU_ASSERT(tide_te_transfer_sync(b, s, TIDE_TE_WRITE, loc, rem, len, n, 30000) == -EFAULT);
	CU_ASSERT(tide_te_transfer_sync(b, s, TIDE_TE_WRITE, loc, rem, len, 0, 30000) == -EINVAL);
	CU_ASSERT(tide_te_transfer_sync(b, s, 7, loc, rem, len, 1, 30000) == -EINVAL);

	/* batch_result: in progress until waited, then the outcome; release frees. */
	CU_ASSERT_FATAL(tide_te_batch_alloc(b, 4, &bt) == 0);
	CU_ASSERT(tide_te_batch_result(b, bt) == 0); /* nothing submitted */
	CU_ASSERT(tide_te_submit_v(b, bt, s, TIDE_TE_WRITE, loc, rem, len, 5) == -ENOSPC);
	CU_ASSERT(tide_te_submit_v(b, bt, s, TIDE_TE_WRITE, NULL, rem, len, 1) == -EINVAL);
	CU_ASSERT(tide_te_submit_v(b, bt, s, TIDE_TE_WRITE, loc, rem, len, 2) == 0);
	CU_ASSERT(tide_te_wait(b, bt, 30000) == 0);
	CU_ASSERT(tide_te_batch_result(b, bt) == 0);
	CU_ASSERT(tide_te_batch_release(b, bt) == 0);
	CU_ASSERT(tide_te_batch_result(b, bt) == -ENOENT);
	CU_ASSERT(tide_te_batch_release(b, bt) == -ENOENT);

	/* Released while its requests run (a 3 MiB write): the id is gone at once and
	 * the batch is freed by a later allocation once they end; nothing leaks (ASan). */
	loc[0] = (uintptr_t)calloc(1, 3 * MIB);
	rem[0] = (uintptr_t)seg;
	len[0] = 3 * MIB;
	CU_ASSERT_FATAL(tide_te_batch_alloc(b, 1, &bt) == 0);
	CU_ASSERT(tide_te_submit_v(b, bt, s, TIDE_TE_WRITE, loc, rem, len, 1) == 0);
	CU_ASSERT(tide_te_batch_release(b, bt) == 0);
	CU_ASSERT(tide_te_transfer_sync(b, s, TIDE_TE_WRITE, loc, rem, len, 1, 30000) == 0);

	/* The released batch's write may still be reading its source: the second
	 * transfer can finish first on another of the peer's connections. Only the
	 * engine's end (which ends every request) frees the caller from it. */
	tide_te_destroy(b);
	free((void *)(uintptr_t)loc[0]);
	tide_te_destroy(a);
	free(seg);
	free(src);
	free(back);
}

/* A buffer the peer registers after we opened it is found (the descriptor is
 * fetched again before a request is refused), and the connections stay. */
static void
test_peer_registers_late(void)
{
	struct tide_te *a = mk(5000, 0), *b = mk(5000, 0);
	uint8_t *x = calloc(1, MIB), *y = calloc(1, MIB), *src = malloc(4096);
	struct tide_te_stats st0, st1;
	tide_te_seg_t s;

	fill(src, 4096, 9);
	CU_ASSERT_FATAL(tide_te_register(a, x, MIB, "*") == 0);
	CU_ASSERT_FATAL(tide_te_open_segment(b, tide_te_local_name(a), &s) == 0);
	CU_ASSERT(te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)x, 4096).state ==
		  TIDE_TE_COMPLETED);
	tide_te_stats_get(b, &st0);
	CU_ASSERT_FATAL(tide_te_register(a, y, MIB, "*") == 0);
	CU_ASSERT(te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)y + 100, 4096).state ==
		  TIDE_TE_COMPLETED);
	CU_ASSERT(memcmp(y + 100, src, 4096) == 0);
	tide_te_stats_get(b, &st1);
	CU_ASSERT(st1.desc_refreshes == st0.desc_refreshes); /* not taken for a restart */
	CU_ASSERT(st1.conn_failures == st0.conn_failures);
	/* Really outside: still refused, after the fetch. */
	CU_ASSERT(te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)y + MIB, 4096).error == -EFAULT);
	/* Unregistered on the peer: refused from the fresh descriptor too. */
	CU_ASSERT(tide_te_unregister(a, y) == 0);
	CU_ASSERT(te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)y, 4096).error == -EFAULT);
	tide_te_destroy(b);
	tide_te_destroy(a);
	free(x);
	free(y);
	free(src);
}

/* MC_MIN_RPC_PORT..MC_MAX_RPC_PORT: the handshake and kernel data ports come from the
 * range when the options leave them 0, as stock picks them. */
static void
test_port_range(void)
{
	struct tide_te_opts o;
	struct tide_te *te = NULL, *te2 = NULL;
	uint16_t rpc = 0, data = 0, rpc2 = 0, data2 = 0;
	char lo[16], hi[16];
	unsigned p;

	/* Four free ports (the range), below the ephemeral range: inside it, a connection
	 * another test opens meanwhile could take one of them (seen once in CI). */
	p = tide_ut_free_port_run(4);
	CU_ASSERT_FATAL(p != 0);
	snprintf(lo, sizeof(lo), "%u", p);
	snprintf(hi, sizeof(hi), "%u", p + 3);
	setenv("MC_MIN_RPC_PORT", lo, 1);
	setenv("MC_MAX_RPC_PORT", hi, 1);
	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	CU_ASSERT_FATAL(tide_te_create(&o, &te) == 0);
	CU_ASSERT_FATAL(tide_te_install_transport(te, "tcp") == 0);
	tide_te_local_addr(te, NULL, 0, &rpc, &data);
	CU_ASSERT(rpc >= p && rpc <= p + 3);
	CU_ASSERT(data >= p && data <= p + 3 && data != rpc);
	/* A second engine takes the two ports left. */
	CU_ASSERT_FATAL(tide_te_create(&o, &te2) == 0);
	CU_ASSERT_FATAL(tide_te_install_transport(te2, "tcp") == 0);
	tide_te_local_addr(te2, NULL, 0, &rpc2, &data2);
	CU_ASSERT(rpc2 >= p && rpc2 <= p + 3 && rpc2 != rpc && rpc2 != data);
	CU_ASSERT(data2 >= p && data2 <= p + 3 && data2 != rpc && data2 != data && data2 != rpc2);
	tide_te_destroy(te2);
	tide_te_destroy(te);
	unsetenv("MC_MIN_RPC_PORT");
	unsetenv("MC_MAX_RPC_PORT");
}

/* Mooncake's Notify and Probe handshake messages, both directions of one pair. */
static void
test_notify_probe(void)
{
	struct tide_te *a = mk(5000, 0), *b = mk(5000, 0);
	struct tide_te_notify *v = NULL;
	size_t n = 99;
	char dead[64];

	CU_ASSERT(tide_te_get_notifies(a, &v, &n) == 0);
	CU_ASSERT(n == 0 && v == NULL);
	CU_ASSERT(tide_te_notify(b, tide_te_local_name(a), "kv", "room 7 done") == 0);
	CU_ASSERT(tide_te_notify(b, tide_te_local_name(a), "", "quote \" and \\ kept") == 0);
	CU_ASSERT(tide_te_get_notifies(a, &v, &n) == 0);
	CU_ASSERT_FATAL(n == 2);
	CU_ASSERT_STRING_EQUAL(v[0].name, "kv");
	CU_ASSERT_STRING_EQUAL(v[0].msg, "room 7 done");
	CU_ASSERT_STRING_EQUAL(v[1].name, "");
	CU_ASSERT_STRING_EQUAL(v[1].msg, "quote \" and \\ kept");
	tide_te_notifies_free(v, n);
	CU_ASSERT(tide_te_get_notifies(a, &v, &n) == 0 && n == 0); /* taken once */
	CU_ASSERT(tide_te_notify(b, NULL, "x", "y") == -EINVAL);

	CU_ASSERT(tide_te_probe(b, tide_te_local_name(a)) == 0);
	CU_ASSERT(tide_te_probe(a, tide_te_local_name(b)) == 0);
	CU_ASSERT(tide_te_probe(a, "no-port") == -EINVAL);
	/* A port nobody listens on: the peer is down. The socket stays bound (not
	 * listening) through the probes, so no other process can take the port. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	CU_ASSERT_FATAL(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
			getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(dead, sizeof(dead), "127.0.0.1:%u", ntohs(sa.sin_port));
	CU_ASSERT(tide_te_probe(a, dead) == -ECONNREFUSED);
	CU_ASSERT(tide_te_notify(a, dead, "x", "y") == -ECONNREFUSED);
	close(fd);
	tide_te_destroy(b);
	tide_te_destroy(a);
}

/* "rdma" on this machine (no RDMA device): refused, unless TIDE_RDMA_AS_TCP=1 serves
 * it with the TCP path. */
static void
test_rdma_as_tcp(void)
{
	struct tide_te_opts o;
	struct tide_te *te = NULL;

	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	unsetenv("TIDE_RDMA_AS_TCP");
	CU_ASSERT_FATAL(tide_te_create(&o, &te) == 0);
	CU_ASSERT(tide_te_install_transport(te, "rdma") == -EPROTONOSUPPORT);
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(te), "");
	tide_te_destroy(te);
	setenv("TIDE_RDMA_AS_TCP", "1", 1);
	CU_ASSERT_FATAL(tide_te_create(&o, &te) == 0);
	CU_ASSERT(tide_te_install_transport(te, "rdma") == 0);
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(te), "tcp-kernel");
	tide_te_destroy(te);
	setenv("TIDE_RDMA_AS_TCP", "maybe", 1); /* a bad value is an error, not "off" */
	te = NULL;
	CU_ASSERT(tide_te_create(&o, &te) == -EINVAL);
	CU_ASSERT(te == NULL);
	unsetenv("TIDE_RDMA_AS_TCP");
}

/* Outside the registered buffers: refused by the initiator (descriptor) and
 * never touching memory. */
static void
test_bounds(void)
{
	struct tide_te *a = mk(5000, 0), *b = mk(5000, 0);
	uint8_t *mem = calloc(1, 3 * MIB), *src = malloc(MIB);
	uint8_t *seg = mem + MIB; /* guard MiB on each side */
	tide_te_seg_t s;
	fill(src, MIB, 9);
	CU_ASSERT_FATAL(tide_te_register(a, seg, MIB, "*") == 0);
	CU_ASSERT_FATAL(tide_te_open_segment(b, tide_te_local_name(a), &s) == 0);
	struct tide_te_status st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg + MIB - 1, 2);
	CU_ASSERT(st.state == TIDE_TE_FAILED && st.error == -EFAULT);
	st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg - 1, 2);
	CU_ASSERT(st.state == TIDE_TE_FAILED && st.error == -EFAULT);
	st = te_ut_one(b, TIDE_TE_READ, src, s, UINT64_MAX - 5, 100);
	CU_ASSERT(st.state == TIDE_TE_FAILED && st.error == -EFAULT);
	for (size_t i = 0; i < MIB; i++) {
		if (mem[i] != 0 || mem[2 * MIB + i] != 0) {
			CU_FAIL("guard byte changed");
			break;
		}
	}
	/* Zero-length requests complete at once. */
	st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg, 0);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	/* Bad handles. */
	struct tide_te_req r = {.op = TIDE_TE_WRITE, .local = src, .seg = 999, .len = 1};
	tide_te_batch_t bt;
	CU_ASSERT(tide_te_batch_alloc(b, 0, &bt) == -EINVAL);
	CU_ASSERT_FATAL(tide_te_batch_alloc(b, 4, &bt) == 0);
	CU_ASSERT(tide_te_submit(b, bt, &r, 1) == -EINVAL);
	r.seg = s;
	r.op = 7;
	CU_ASSERT(tide_te_submit(b, bt, &r, 1) == -EINVAL);
	CU_ASSERT(tide_te_submit(b, bt + 1, &r, 1) == -ENOENT);
	CU_ASSERT(tide_te_batch_free(b, bt) == 0);
	CU_ASSERT(tide_te_open_segment(b, "127.0.0.1:1", &s) != 0);
	tide_te_destroy(b);
	tide_te_destroy(a);
	free(mem);
	free(src);
}

/* The target goes away: requests end (FAILED or TIMEOUT) within a bound;
 * a restarted target with the same name is picked up and the stale
 * address is refused, not written. */
static void
test_peer_restart(void)
{
	struct tide_te *a = mk(2000, 0), *b = mk(2000, 0);
	uint8_t *seg1 = calloc(1, MIB), *seg2 = calloc(1, 2 * MIB), *src = malloc(MIB);
	char name[256];
	uint16_t rp;
	tide_te_seg_t s;
	fill(src, MIB, 1);
	CU_ASSERT_FATAL(tide_te_register(a, seg1, MIB, "*") == 0);
	snprintf(name, sizeof(name), "%s", tide_te_local_name(a));
	tide_te_local_addr(a, NULL, 0, &rp, NULL);
	CU_ASSERT_FATAL(tide_te_open_segment(b, name, &s) == 0);
	struct tide_te_status st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg1, MIB);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	tide_te_destroy(a);

	st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg1, MIB);
	CU_ASSERT(st.state == TIDE_TE_FAILED || st.state == TIDE_TE_TIMEOUT);
	CU_ASSERT(st.error != 0);

	/* Same name (rpc port), different memory. */
	a = mk(2000, rp);
	CU_ASSERT_STRING_EQUAL(tide_te_local_name(a), name);
	CU_ASSERT_FATAL(tide_te_register(a, seg2, 2 * MIB, "*") == 0);
	st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg1, MIB);
	/* seg1 is not inside the new descriptor unless malloc put seg2 around it. */
	if ((uintptr_t)seg1 < (uintptr_t)seg2 ||
	    (uintptr_t)seg1 + MIB > (uintptr_t)seg2 + 2 * MIB) {
		CU_ASSERT(st.state == TIDE_TE_FAILED && st.error == -EFAULT);
	}
	st = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg2 + 5, MIB);
	CU_ASSERT(st.state == TIDE_TE_COMPLETED);
	CU_ASSERT(memcmp(seg2 + 5, src, MIB) == 0);
	struct tide_te_stats sb;
	tide_te_stats_get(b, &sb);
	CU_ASSERT(sb.desc_refreshes >= 1);
	tide_te_destroy(b);
	tide_te_destroy(a);
	free(seg1);
	free(seg2);
	free(src);
}

/*
 * A zero-copy transport holding a READ reply (the DPDK one, while the device
 * still has frames referencing registered memory): the engine's own check()
 * and release() hooks, driven through a server session in tx_hold mode by a
 * stand-in transport installed with te_engine_tcp_ops_override().
 */
static struct te_xport_cfg hold_cfg;
static int hold_dummy;

static int
hold_create(const struct te_xport_cfg *cfg, struct te_xport **out)
{
	hold_cfg = *cfg;
	*out = (struct te_xport *)(void *)&hold_dummy;
	return 0;
}

static uint16_t
hold_data_port(const struct te_xport *x)
{
	(void)x;
	return 9; /* never connected to */
}

static int
hold_peer_open(struct te_xport *x, const struct te_peer_addr *a, struct te_xpeer **out)
{
	(void)x;
	(void)a;
	(void)out;
	return -ENOTSUP;
}

static void
hold_peer_close(struct te_xport *x, struct te_xpeer *p, int err)
{
	(void)x;
	(void)p;
	(void)err;
}

static int
hold_submit(struct te_xport *x, struct te_xpeer *p, struct te_slice *head)
{
	(void)x;
	(void)p;
	(void)head;
	return -ENOTSUP;
}

static void
hold_destroy(struct te_xport *x)
{
	(void)x;
}

static const struct te_xport_ops hold_ops = {
	.name = "tcp-hold-test",
	.create = hold_create,
	.data_port = hold_data_port,
	.peer_open = hold_peer_open,
	.peer_close = hold_peer_close,
	.submit = hold_submit,
	.destroy = hold_destroy,
};

struct unreg_arg {
	struct tide_te *te;
	void *addr;
	atomic_int rc;
	atomic_bool done;
};

static void *
unreg_thread(void *p)
{
	struct unreg_arg *u = p;
	atomic_store(&u->rc, tide_te_unregister(u->te, u->addr));
	atomic_store(&u->done, true);
	return NULL;
}

static void
test_unregister_waits_for_held_reply(void)
{
	struct tide_te_opts o;
	struct tide_te *te = NULL;
	uint8_t *buf = malloc(MIB), hdr[TE_FRAME_HDR_LEN];
	struct te_frame_hdr h = {
		.size = 64 * 1024, .op = TE_FRAME_OP_READ, .proto = TE_PROTO_NATIVE, .req_id = 1};
	struct te_srv_sess *s = NULL;
	struct iovec iov[4];
	struct unreg_arg u = {0};
	pthread_t t;
	size_t tot = 0;
	unsigned n;

	CU_ASSERT_FATAL(buf != NULL);
	fill(buf, MIB, 3);
	tide_te_opts_init(&o, sizeof(o));
	o.host = "127.0.0.1";
	te_engine_tcp_ops_override(&hold_ops);
	CU_ASSERT_FATAL(tide_te_create(&o, &te) == 0);
	CU_ASSERT_FATAL(tide_te_install_transport(te, "tcp") == 0);
	te_engine_tcp_ops_override(NULL);
	CU_ASSERT_STRING_EQUAL(tide_te_transport_name(te), "tcp-hold-test");
	CU_ASSERT_FATAL(tide_te_register(te, buf, MIB, "*") == 0);

	/* A READ of 64 KiB at buf + 4096 arrives; its reply leaves by reference. */
	CU_ASSERT_FATAL(te_srv_sess_create(&hold_cfg.srv, &s) == 0);
	te_srv_sess_tx_hold(s, true);
	h.addr = (uintptr_t)buf + 4096;
	CU_ASSERT_FATAL(te_frame_hdr_encode(&h, hdr) == 0);
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, hdr, sizeof(hdr)), sizeof(hdr));
	n = te_srv_sess_tx_iov(s, iov, 4);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_PTR_EQUAL(iov[1].iov_base, buf + 4096);
	tot = iov[0].iov_len + iov[1].iov_len;
	te_srv_sess_tx_advance(s, tot);

	/* Unregister while the "device" still references the reply: it waits. */
	u.te = te;
	u.addr = buf;
	atomic_store(&u.rc, 1);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, unreg_thread, &u) == 0);
	usleep(200 * 1000);
	CU_ASSERT_FALSE(atomic_load(&u.done));
	CU_ASSERT_EQUAL(memcmp(iov[1].iov_base, buf + 4096, 16), 0); /* still ours to read */
	/* The device released the frames: the reference goes, the unregister ends. */
	te_srv_sess_tx_done(s, te_srv_sess_tx_pos(s));
	pthread_join(t, NULL);
	CU_ASSERT_TRUE(atomic_load(&u.done));
	CU_ASSERT_EQUAL(atomic_load(&u.rc), 0);

	/* Now unregistered: the same request is refused and holds nothing. */
	CU_ASSERT_EQUAL(te_srv_sess_feed(s, hdr, sizeof(hdr)), sizeof(hdr));
	n = te_srv_sess_tx_iov(s, iov, 4);
	CU_ASSERT_EQUAL(n, 1); /* REJECTED status, no data */
	te_srv_sess_tx_advance(s, iov[0].iov_len);
	CU_ASSERT_TRUE(te_srv_sess_idle(s) == false); /* held until tx_done */
	te_srv_sess_tx_done(s, te_srv_sess_tx_pos(s));
	CU_ASSERT_TRUE(te_srv_sess_idle(s));
	te_srv_sess_destroy(s);
	tide_te_destroy(te);
	free(buf);
}

/* ---- where the engine listens, and who may connect ---------------------- */

/* An engine on kernel sockets with host and node file (NULL: $TIDE_NODE_ENV). */
static int
mk_env(const char *host, const char *node_env, struct tide_te **out)
{
	struct tide_te_opts o;
	int rc;

	tide_te_opts_init(&o, sizeof(o));
	o.host = host;
	o.node_env = node_env;
	o.connect_timeout_ms = 1000;
	*out = NULL;
	rc = tide_te_create(&o, out);
	if (rc == 0) {
		rc = tide_te_install_transport(*out, "tcp");
	}
	return rc;
}

static void
node_file(char *path, const char *text)
{
	int fd = mkstemp(path);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

/* Whether dst:port accepts a connection from 127.0.0.1 (closed again at once). */
static bool
listens(const char *dst, uint16_t port)
{
	int fd = tide_ut_connect_from("127.0.0.1", dst, port, 2000);

	if (fd < 0) {
		return false;
	}
	close(fd);
	return true;
}

/* The handshake and data ports listen on the engine's host only, unless the
 * node file's MC_TCP_BIND_ADDRESS says otherwise. 127.0.0.2 is local on Linux
 * (all of 127/8), so it stands for "another interface of this host". */
static void
test_listen_address(void)
{
	char path[] = "/tmp/te_engine_ut_env.XXXXXX";
	struct tide_te *te;
	char host[64];
	uint16_t rp, dp;

	CU_ASSERT_FATAL(mk_env("127.0.0.1", NULL, &te) == 0);
	tide_te_local_addr(te, host, sizeof(host), &rp, &dp);
	CU_ASSERT(listens("127.0.0.1", rp) && listens("127.0.0.1", dp));
	CU_ASSERT(!listens("127.0.0.2", rp));
	CU_ASSERT(!listens("127.0.0.2", dp));
	tide_te_destroy(te);

	/* A name listens on its (first IPv4) address. */
	CU_ASSERT_FATAL(mk_env("localhost", NULL, &te) == 0);
	tide_te_local_addr(te, host, sizeof(host), &rp, &dp);
	CU_ASSERT_STRING_EQUAL(host, "localhost");
	CU_ASSERT(listens("127.0.0.1", rp) && listens("127.0.0.1", dp));
	CU_ASSERT(!listens("127.0.0.2", rp));
	tide_te_destroy(te);

	/* The explicit opt-in: every address, as stock Mooncake. */
	node_file(path, "MC_TCP_BIND_ADDRESS=0.0.0.0\n");
	CU_ASSERT_FATAL(mk_env("127.0.0.1", path, &te) == 0);
	tide_te_local_addr(te, host, sizeof(host), &rp, &dp);
	CU_ASSERT(listens("127.0.0.2", rp) && listens("127.0.0.2", dp));
	tide_te_destroy(te);
	unlink(path);

	/* A host that is not ours: refused at create, not silently widened. */
	CU_ASSERT(mk_env("192.0.2.1", NULL, &te) == -EADDRNOTAVAIL);
	CU_ASSERT_PTR_NULL(te);
	/* A node file that does not load fails create (it names the listen policy). */
	strcpy(path, "/tmp/te_engine_ut_env.XXXXXX");
	node_file(path, "TIDE_ALLOW_NETS=10.0.0.1/8\n");
	CU_ASSERT(mk_env("127.0.0.1", path, &te) == -EINVAL);
	unlink(path);
}

/* TIDE_ALLOW_NETS: a peer from elsewhere is closed at accept on both ports and
 * counted; an allowed peer moves data as before. */
static void
test_allow_nets(void)
{
	char path[] = "/tmp/te_engine_ut_env.XXXXXX";
	struct tide_te *a, *b;
	struct tide_te_stats st;
	uint8_t *seg = calloc(1, MIB), *src = malloc(4096), buf[64];
	tide_te_seg_t s;
	char host[64];
	uint16_t rp, dp;
	int fd;

	fill(src, 4096, 9);
	node_file(path, "TIDE_ALLOW_NETS=127.0.0.1/32\n");
	CU_ASSERT_FATAL(mk_env("127.0.0.1", path, &a) == 0);
	CU_ASSERT_FATAL(mk_env("127.0.0.1", NULL, &b) == 0);
	unlink(path);
	CU_ASSERT_FATAL(tide_te_register(a, seg, MIB, "*") == 0);
	tide_te_local_addr(a, host, sizeof(host), &rp, &dp);

	/* From 127.0.0.2: the handshake daemon and the data server close at once. */
	fd = tide_ut_connect_from("127.0.0.2", "127.0.0.1", rp, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(write(fd, "\x01\0\0\0\0\0\0\0\x01", 9) == 9); /* a Metadata request */
	CU_ASSERT(recv(fd, buf, sizeof(buf), 0) <= 0);
	close(fd);
	fd = tide_ut_connect_from("127.0.0.2", "127.0.0.1", dp, 2000);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(recv(fd, buf, sizeof(buf), 0) <= 0);
	close(fd);
	tide_te_stats_get(a, &st);
	CU_ASSERT_EQUAL(st.conns_refused, 2);

	/* From 127.0.0.1: the descriptor, then a WRITE. */
	CU_ASSERT_FATAL(tide_te_open_segment(b, tide_te_local_name(a), &s) == 0);
	struct tide_te_status r = te_ut_one(b, TIDE_TE_WRITE, src, s, (uintptr_t)seg + 8, 4096);
	CU_ASSERT(r.state == TIDE_TE_COMPLETED);
	CU_ASSERT(memcmp(seg + 8, src, 4096) == 0);
	tide_te_stats_get(a, &st);
	CU_ASSERT_EQUAL(st.conns_refused, 2);
	tide_te_stats_get(b, &st);
	CU_ASSERT_EQUAL(st.conns_refused, 0);
	tide_te_destroy(b);
	tide_te_destroy(a);
	free(seg);
	free(src);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_engine", NULL, NULL);
	CU_add_test(s, "options", test_options);
	CU_add_test(s, "register", test_register);
	CU_add_test(s, "local_segment", test_local_segment);
	CU_add_test(s, "inline_small", test_inline_small);
	CU_add_test(s, "remote_roundtrip", test_remote_roundtrip);
	CU_add_test(s, "bounds", test_bounds);
	CU_add_test(s, "peer_restart", test_peer_restart);
	CU_add_test(s, "unregister_waits_for_held_reply", test_unregister_waits_for_held_reply);
	CU_add_test(s, "listen_address", test_listen_address);
	CU_add_test(s, "allow_nets", test_allow_nets);
	CU_add_test(s, "register_unmapped", test_register_unmapped);
	CU_add_test(s, "transfer_sync", test_transfer_sync);
	CU_add_test(s, "notify_probe", test_notify_probe);
	CU_add_test(s, "peer_registers_late", test_peer_registers_late);
	CU_add_test(s, "port_range", test_port_range);
	CU_add_test(s, "rdma_as_tcp", test_rdma_as_tcp);
}

TIDE_UT_MAIN(register_tests)
