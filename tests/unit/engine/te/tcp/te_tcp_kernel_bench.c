/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Micro-benchmark (not a test): two kernel-socket transports in one process
 * over loopback; keeps a window of slices in flight and reports MiB/s for
 * WRITE and READ at 4 KiB, 64 KiB and 1 MiB slices.
 *
 * usage: te_tcp_kernel_bench [seconds=2] [proto=3] [conns=4] [io_threads=2] [inflight_mib=64]
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "te_tcp_kernel.h"
#include "tide_ut.h"

#define SRV_LEN (256u << 20)

static uint8_t *srvmem;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct te_slice *done_list;
static uint64_t done_bytes;
static int errors;

/* The engine core's completion hook; here: hand the slice back to main. */
void
te_slice_done(struct te_slice *s, int err)
{
	pthread_mutex_lock(&mu);
	if (err != 0)
		errors++;
	else
		done_bytes += s->len;
	s->next = done_list;
	done_list = s;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

static bool
chk(void *arg, uint64_t addr, uint64_t len)
{
	(void)arg;
	return addr >= (uintptr_t)srvmem && addr + len <= (uintptr_t)srvmem + SRV_LEN;
}

static void
rel(void *arg)
{
	(void)arg;
}

static double
run(struct te_xport *cli, struct te_xpeer *peer, uint8_t op, uint32_t slice, uint32_t n,
    double secs, uint8_t *local)
{
	struct te_slice *sl = calloc(n, sizeof(*sl));
	uint32_t nslots = SRV_LEN / slice, next = 0;
	uint64_t bytes0;
	double t0, t1;
	int outstanding = (int)n;

	for (uint32_t i = 0; i < n; i++) {
		sl[i].op = op;
		sl[i].len = slice;
		sl[i].local = local + (size_t)(i % nslots) * slice % (SRV_LEN - slice + 1);
		sl[i].remote = (uintptr_t)srvmem + (uint64_t)(next++ % nslots) * slice;
		sl[i].next = i + 1 < n ? &sl[i + 1] : NULL;
	}
	pthread_mutex_lock(&mu);
	done_bytes = 0;
	errors = 0;
	done_list = NULL;
	pthread_mutex_unlock(&mu);
	t0 = tide_ut_now_s();
	bytes0 = 0;
	if (te_tcp_kernel_ops.submit(cli, peer, &sl[0]) != 0)
		return -1;
	for (;;) {
		struct te_slice *batch, *s;
		bool stop = tide_ut_now_s() - t0 >= secs;

		pthread_mutex_lock(&mu);
		while (done_list == NULL)
			pthread_cond_wait(&cv, &mu);
		batch = done_list;
		done_list = NULL;
		pthread_mutex_unlock(&mu);
		for (s = batch; s != NULL; s = s->next) {
			outstanding--;
			s->remote = (uintptr_t)srvmem + (uint64_t)(next++ % nslots) * slice;
		}
		if (stop) {
			if (outstanding == 0)
				break;
			continue;
		}
		for (s = batch; s != NULL; s = s->next)
			outstanding++;
		if (te_tcp_kernel_ops.submit(cli, peer, batch) != 0)
			return -1;
	}
	t1 = tide_ut_now_s();
	pthread_mutex_lock(&mu);
	bytes0 = done_bytes;
	pthread_mutex_unlock(&mu);
	free(sl);
	if (errors != 0)
		fprintf(stderr, "  %d slices failed\n", errors);
	return (double)bytes0 / (1024.0 * 1024.0) / (t1 - t0);
}

int
main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	uint32_t proto = argc > 2 ? (uint32_t)atoi(argv[2]) : 3;
	uint32_t conns = argc > 3 ? (uint32_t)atoi(argv[3]) : 4;
	uint32_t thr = argc > 4 ? (uint32_t)atoi(argv[4]) : 2;
	uint64_t inflight = (argc > 5 ? (uint64_t)atoi(argv[5]) : 64) << 20;
	static const uint32_t sizes[] = {4096, 65536, 1 << 20};
	struct te_xport_cfg c = {.bind_ip = "127.0.0.1",
				 .conns_per_peer = conns,
				 .io_threads = thr,
				 .io_timeout_ms = 10000,
				 .connect_timeout_ms = 3000,
				 .slice_size = 1 << 20,
				 .srv = {.check = chk, .release = rel, .instance = 42}};
	struct te_peer_addr a = {.host = "127.0.0.1", .proto = proto, .instance = 42};
	struct te_xport *srv, *cli;
	struct te_xpeer *peer;
	uint8_t *local;
	int rc;

	srvmem = malloc(SRV_LEN);
	local = malloc(SRV_LEN);
	if (srvmem == NULL || local == NULL)
		return 1;
	memset(srvmem, 1, SRV_LEN);
	memset(local, 2, SRV_LEN);
	rc = te_tcp_kernel_ops.create(&c, &srv);
	if (rc == 0)
		rc = te_tcp_kernel_ops.create(&c, &cli);
	if (rc != 0) {
		fprintf(stderr, "create: %s\n", strerror(-rc));
		return 1;
	}
	a.data_port = te_tcp_kernel_ops.data_port(srv);
	rc = te_tcp_kernel_ops.peer_open(cli, &a, &peer);
	if (rc != 0) {
		fprintf(stderr, "peer_open: %s\n", strerror(-rc));
		return 1;
	}
	printf("tcp-kernel loopback: proto v%u, %u conns, %u io threads per side, %.1fs per point, "
	       "%llu MiB in flight\n",
	       proto, conns, thr, secs, (unsigned long long)(inflight >> 20));
	printf("%10s %12s %12s\n", "slice", "WRITE MiB/s", "READ MiB/s");
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = (uint32_t)(inflight / sizes[i]);
		double w, r;

		if (n > 4096)
			n = 4096;
		if (n < 2 * conns)
			n = 2 * conns;
		w = run(cli, peer, 1, sizes[i], n, secs, local);
		r = run(cli, peer, 0, sizes[i], n, secs, local);
		printf("%9uK %12.0f %12.0f\n", sizes[i] / 1024, w, r);
	}
	te_tcp_kernel_ops.peer_close(cli, peer, -ECANCELED);
	te_tcp_kernel_ops.destroy(cli);
	te_tcp_kernel_ops.destroy(srv);
	free(srvmem);
	free(local);
	return 0;
}
