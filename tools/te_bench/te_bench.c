/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-bench: the transfer engine benchmark, with Mooncake's
 * transfer_engine_bench flags, so the same command line runs against either.
 *
 *   target:    tide-bench --mode=target [--metadata_server=P2PHANDSHAKE]
 *   initiator: tide-bench --mode=initiator --segment_id=<target name> \
 *                  --operation=write --block_size=65536 --batch_size=32
 *
 * The target registers --buffer_size bytes and serves until SIGINT/SIGTERM. The initiator splits
 * the target's first buffer between --threads threads; each loops: allocate a batch, submit
 * --batch_size requests of --block_size bytes at consecutive offsets, wait, check every status.
 * With --verify it writes a pattern, reads it back into a second area and compares, and fails on
 * the first mismatch. Prints a progress line each second (stderr), a summary line (stdout) and,
 * with --report=FILE, a JSON report.
 *
 * Every run ends, once the engine is destroyed, with one line saying how: "done: ..." and
 * "stopped by SIGTERM ..." (exit 0, stdout), "peer gone after N bytes (ERRNO: ...)" and
 * "failed: ..." (exit 1, stderr). Bad flags exit 2.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tide_flags.h"
#include "tide_log.h"
#include "tide_te.h"
#include "tide_clock.h"

static const char *mode = "initiator";
static const char *protocol = "tcp";
static const char *metadata = "P2PHANDSHAKE";
static const char *local_name = "";
static const char *segment_id = "";
static const char *operation = "read";
static const char *report = "";
static const char *device_name = "";
static const char *log_level = "notice";
static uint64_t block_size = 65536, batch_size = 128, threads = 1, buffer_size = 1ull << 30;
static uint64_t rpc_port = 0, data_port = 0, conns = 4, io_threads = 2, slice_size = 0;
static const char *host = "";
static double duration = 10, open_retry_s = 0;
static bool verify = false, auto_discovery = false, use_vram = false;
static const char *backend = "classic", *report_unit = "MB";
static uint64_t gpu_id = 0;

static const char *const modes[] = {"target", "initiator", NULL};
static const char *const ops[] = {"read", "write", NULL};
static const char *const protos[] = {"tcp", "rdma", NULL};
static const char *const backends[] = {"classic", NULL};

static const struct tide_flag flag_tab[] = {
	{"mode", TIDE_FLAG_STR, &mode, "target or initiator", .choices = modes},
	{"protocol", TIDE_FLAG_STR, &protocol, "transport", .choices = protos},
	{"metadata_server", TIDE_FLAG_STR, &metadata, "P2PHANDSHAKE or http://host:port/metadata"},
	{"local_server_name", TIDE_FLAG_STR, &local_name, "our segment name (default host:port)"},
	{"segment_id", TIDE_FLAG_STR, &segment_id, "target's segment name (initiator)"},
	{"operation", TIDE_FLAG_STR, &operation, "read or write", .choices = ops},
	{"block_size", TIDE_FLAG_SIZE, &block_size, "bytes per request", 1, 1ull << 30},
	{"batch_size", TIDE_FLAG_U64, &batch_size, "requests per batch", 1, 1 << 20},
	{"threads", TIDE_FLAG_U64, &threads, "initiator threads", 1, 256},
	{"duration", TIDE_FLAG_DOUBLE, &duration,
	 "initiator seconds (a target serves until SIGINT/SIGTERM)", 0, 86400},
	{"buffer_size", TIDE_FLAG_SIZE, &buffer_size, "registered bytes", 4096, 1ull << 40},
	{"report", TIDE_FLAG_STR, &report, "write a JSON report to this file"},
	{"verify", TIDE_FLAG_BOOL, &verify, "write a pattern, read it back, compare"},
	{"rpc_port", TIDE_FLAG_U64, &rpc_port, "handshake port (0 = ephemeral)", 0, 65535},
	{"data_port", TIDE_FLAG_U64, &data_port, "data port (0 = ephemeral)", 0, 65535},
	{"conns_per_peer", TIDE_FLAG_U64, &conns, "data connections per peer", 1, 64},
	{"io_threads", TIDE_FLAG_U64, &io_threads, "kernel-socket I/O threads", 1, 64},
	{"slice_size", TIDE_FLAG_SIZE, &slice_size, "slice bytes (0 = engine default)", 0,
	 64 << 20},
	{"device_name", TIDE_FLAG_STR, &device_name, "RDMA devices (accepted; tcp ignores it)"},
	{"auto_discovery", TIDE_FLAG_BOOL, &auto_discovery, "accepted; tcp ignores it"},
	{"backend", TIDE_FLAG_STR, &backend, "Mooncake backend; only classic exists here",
	 .choices = backends},
	{"report_unit", TIDE_FLAG_STR, &report_unit, "accepted; results are printed in MiB/s"},
	{"use_vram", TIDE_FLAG_BOOL, &use_vram, "GPU memory: not supported (must be false)"},
	{"gpu_id", TIDE_FLAG_U64, &gpu_id, "accepted with --use_vram=false", 0, 1024},
	{"host", TIDE_FLAG_STR, &host, "address peers reach our handshake daemon at"},
	{"open_retry_s", TIDE_FLAG_DOUBLE, &open_retry_s,
	 "initiator: keep retrying --segment_id this long (target still starting)", 0, 600},
	{"log_level", TIDE_FLAG_STR, &log_level, "error|warn|notice|info|debug"},
};

/* stop: the initiator's threads end their loops (duration, a failure, a signal);
 * stop_sig: the signal that asked for it, 0 if none did. */
static volatile sig_atomic_t stop, stop_sig;
static void
on_signal(int sig)
{
	stop_sig = sig;
	stop = 1;
}

/* How a run ended: the exit status and the line main prints once all is torn down. */
struct outcome {
	int status;
	char line[320];
};

static void outcome_set(struct outcome *oc, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
outcome_set(struct outcome *oc, int status, const char *fmt, ...)
{
	va_list ap;

	oc->status = status;
	va_start(ap, fmt);
	vsnprintf(oc->line, sizeof(oc->line), fmt, ap);
	va_end(ap);
}

/* Errors that mean the peer went away (process gone, link down, reset), not a local fault. */
static bool
peer_gone_err(int err)
{
	switch (err) {
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -ECONNABORTED:
	case -ETIMEDOUT:
	case -EPIPE:
	case -ENOTCONN:
	case -EHOSTUNREACH:
	case -ENOLINK:
	case -ESTALE:
		return true;
	default:
		return false;
	}
}

static const char *
errname(int err)
{
	const char *n = strerrorname_np(err < 0 ? -err : err);

	return n != NULL ? n : "?";
}

static void *
map_buffer(uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- initiator ---------------------------------------------------------- */

#define LAT_MAX (1u << 20) /* batch latencies kept per thread */

struct worker {
	pthread_t tid;
	unsigned idx;
	struct tide_te *te;
	tide_te_seg_t seg;
	uint64_t remote, local_off, span; /* this thread's region */
	uint8_t *local;                   /* initiator buffer */
	_Atomic uint64_t bytes, reqs;
	uint64_t failed;
	int first_err;
	bool mismatch;
	double *lat; /* seconds per batch */
	uint32_t nlat;
};

static uint8_t *local_buf;

static void
fill_pattern(uint8_t *p, uint64_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (uint64_t i = 0; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (uint64_t i = len & ~7ull; i < len; i++) {
		p[i] = (uint8_t)(seed + i);
	}
}

/* Submit n requests of op and wait; returns 0 when all completed. */
static int
run_batch(struct worker *w, enum tide_te_op op, uint8_t *local, uint64_t remote, uint64_t n)
{
	struct tide_te_req reqs[1024];
	tide_te_batch_t b;
	int rc = tide_te_batch_alloc(w->te, (uint32_t)n, &b), result = 0;
	if (rc != 0) {
		return rc;
	}
	for (uint64_t k = 0; k < n;) {
		uint32_t m = 0;
		for (; m < 1024 && k < n; m++, k++) {
			reqs[m] = (struct tide_te_req){.op = op,
						       .local = local + k * block_size,
						       .seg = w->seg,
						       .remote_addr = remote + k * block_size,
						       .len = block_size};
		}
		rc = tide_te_submit(w->te, b, reqs, m);
		if (rc != 0) {
			result = rc;
			break;
		}
	}
	tide_te_wait(w->te, b, -1);
	for (uint32_t k = 0; k < n && result == 0; k++) {
		struct tide_te_status st;
		tide_te_status(w->te, b, k, &st);
		if (st.state != TIDE_TE_COMPLETED) {
			result = st.error != 0 ? st.error : -EIO;
		}
	}
	tide_te_batch_free(w->te, b);
	return result;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	enum tide_te_op op = strcmp(operation, "write") == 0 ? TIDE_TE_WRITE : TIDE_TE_READ;
	uint64_t per_batch = batch_size * block_size, off = 0, iter = 0;
	/* --verify reads back into the upper half of this thread's local region. */
	uint64_t span = verify ? w->span / 2 : w->span;

	while (!stop) {
		double t0 = tide_mono_s();
		int rc;
		if (off + per_batch > span) {
			off = 0;
		}
		if (verify) {
			uint8_t *src = w->local + w->local_off + off;
			uint8_t *back = w->local + w->local_off + span + off;
			fill_pattern(src, per_batch, (w->idx + 1) * 1000003ull + iter);
			memset(back, 0, per_batch);
			rc = run_batch(w, TIDE_TE_WRITE, src, w->remote + off, batch_size);
			if (rc == 0) {
				rc = run_batch(w, TIDE_TE_READ, back, w->remote + off, batch_size);
			}
			if (rc == 0 && memcmp(src, back, per_batch) != 0) {
				w->mismatch = true;
				stop = 1;
				break;
			}
		} else {
			rc = run_batch(w, op, w->local + w->local_off + off, w->remote + off,
				       batch_size);
		}
		if (rc != 0) {
			w->failed++;
			if (w->first_err == 0) {
				w->first_err = rc;
			}
			stop = 1;
			break;
		}
		if (w->nlat < LAT_MAX) {
			w->lat[w->nlat++] = tide_mono_s() - t0;
		}
		atomic_fetch_add(&w->bytes, per_batch * (verify ? 2 : 1));
		atomic_fetch_add(&w->reqs, batch_size * (verify ? 2 : 1));
		off += per_batch;
		iter++;
	}
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
run_initiator(struct tide_te *te, struct outcome *oc)
{
	tide_te_seg_t seg;
	uint64_t raddr, rlen, per;
	struct worker *ws;
	double t0, last, elapsed;
	uint64_t total_bytes = 0, total_reqs = 0, last_bytes = 0, failed = 0;
	int rc, err = 0;
	bool mismatch = false;

	if (segment_id[0] == '\0') {
		outcome_set(oc, 2,
			    "failed: --segment_id is required in initiator mode (the target prints "
			    "its name)");
		return;
	}
	double give_up = tide_mono_s() + open_retry_s;
	while ((rc = tide_te_open_segment(te, segment_id, &seg)) != 0 && tide_mono_s() < give_up &&
	       !stop) {
		usleep(200000);
	}
	if (rc != 0 && stop_sig != 0) {
		outcome_set(oc, 0, "stopped by SIG%s before segment '%s' opened, 0 bytes",
			    sigabbrev_np(stop_sig), segment_id);
		return;
	}
	if (rc != 0) {
		outcome_set(oc, 1, "failed: open segment '%s': %s", segment_id,
			    tide_te_strerror(rc));
		return;
	}
	rc = tide_te_segment_buffer(te, seg, 0, &raddr, &rlen);
	if (rc != 0) {
		outcome_set(oc, 1, "failed: segment '%s' has no registered buffer", segment_id);
		tide_te_close_segment(te, seg);
		return;
	}
	if (rlen > buffer_size) {
		rlen = buffer_size;
	}
	per = rlen / threads;
	if (per < batch_size * block_size * (verify ? 2 : 1)) {
		outcome_set(oc, 2,
			    "failed: a batch (%" PRIu64 " x %" PRIu64 " B%s) does not fit in a "
			    "thread's share of the buffers (%" PRIu64 " B): lower --batch_size, "
			    "--block_size or --threads, or raise --buffer_size",
			    batch_size, block_size, verify ? ", twice for --verify" : "", per);
		tide_te_close_segment(te, seg);
		return;
	}
	ws = calloc(threads, sizeof(*ws));
	for (unsigned i = 0; i < threads; i++) {
		ws[i].idx = i;
		ws[i].te = te;
		ws[i].seg = seg;
		ws[i].remote = raddr + i * per;
		ws[i].local = local_buf;
		ws[i].local_off = i * per;
		ws[i].span = per;
		ws[i].lat = malloc(LAT_MAX * sizeof(double));
	}
	t0 = last = tide_mono_s();
	for (unsigned i = 0; i < threads; i++) {
		pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]);
	}
	while (!stop) {
		usleep(50000);
		double t = tide_mono_s();
		if (t - t0 >= duration) {
			stop = 1;
		}
		if (t - last >= 1.0 || stop) {
			uint64_t b = 0;
			for (unsigned i = 0; i < threads; i++) {
				b += atomic_load(&ws[i].bytes);
			}
			fprintf(stderr, "tide-bench: %5.1f s  %9.1f MiB/s\n", t - t0,
				(double)(b - last_bytes) / (t - last) / 1048576.0);
			last_bytes = b;
			last = t;
		}
	}
	elapsed = tide_mono_s() - t0;
	/* The signal that ended the loop, if one did (not one that came after it). */
	int ended_by = stop_sig;
	uint32_t nl = 0;
	double *all;
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(ws[i].tid, NULL);
		total_bytes += ws[i].bytes;
		total_reqs += ws[i].reqs;
		failed += ws[i].failed;
		mismatch |= ws[i].mismatch;
		if (err == 0) {
			err = ws[i].first_err;
		}
		nl += ws[i].nlat;
	}
	all = malloc((nl + 1) * sizeof(double));
	nl = 0;
	for (unsigned i = 0; i < threads; i++) {
		memcpy(all + nl, ws[i].lat, ws[i].nlat * sizeof(double));
		nl += ws[i].nlat;
		free(ws[i].lat);
	}
	qsort(all, nl, sizeof(double), cmp_double);
	double p50 = nl ? all[nl / 2] * 1e6 : 0, p99 = nl ? all[(nl * 99) / 100] * 1e6 : 0;
	double mibs = (double)total_bytes / elapsed / 1048576.0;
	double opss = (double)total_reqs / elapsed;
	printf("tide-bench: transport=%s operation=%s block_size=%" PRIu64 " batch_size=%" PRIu64
	       " threads=%" PRIu64 "%s: %.1f MiB/s, %.0f ops/s, batch latency p50 %.0f us p99 "
	       "%.0f us, %" PRIu64 " bytes in %.2f s%s\n",
	       tide_te_transport_name(te), verify ? "verify" : operation, block_size, batch_size,
	       threads, verify ? " (write + read back + compare)" : "", mibs, opss, p50, p99,
	       total_bytes, elapsed,
	       mismatch ? ", DATA MISMATCH"
	       : failed ? ", FAILED"
	       : verify ? ", verified"
			: "");
	if (err != 0) {
		printf("tide-bench: first failure: %s\n", tide_te_strerror(err));
	}
	if (report[0] != '\0') {
		FILE *f = fopen(report, "w");
		if (f == NULL) {
			fprintf(stderr, "tide-bench: --report %s: %s\n", report, strerror(errno));
		} else {
			fprintf(f,
				"{\"tool\":\"tide-bench\",\"transport\":\"%s\",\"operation\":\"%"
				"s\","
				"\"block_size\":%" PRIu64 ",\"batch_size\":%" PRIu64
				",\"threads\":%" PRIu64 ",\"duration_s\":%.3f,\"bytes\":%" PRIu64
				",\"mib_per_s\":%.1f,\"ops_per_s\":%.0f,\"batch_p50_us\":%.1f,"
				"\"batch_p99_us\":%.1f,\"failed_batches\":%" PRIu64
				",\"verified\":%s,\"mismatch\":%s}\n",
				tide_te_transport_name(te), verify ? "verify" : operation,
				block_size, batch_size, threads, elapsed, total_bytes, mibs, opss,
				p50, p99, failed, verify && !mismatch && !failed ? "true" : "false",
				mismatch ? "true" : "false");
			fclose(f);
		}
	}
	free(all);
	free(ws);
	tide_te_close_segment(te, seg);
	if (mismatch)
		outcome_set(oc, 1, "failed: data mismatch after %" PRIu64 " bytes", total_bytes);
	else if (failed && peer_gone_err(err))
		outcome_set(oc, 1, "peer gone after %" PRIu64 " bytes (%s: %s)", total_bytes,
			    errname(err), tide_te_strerror(err));
	else if (failed)
		outcome_set(oc, 1, "failed after %" PRIu64 " bytes: %s", total_bytes,
			    tide_te_strerror(err));
	else if (ended_by != 0)
		outcome_set(oc, 0, "stopped by SIG%s after %" PRIu64 " bytes in %.2f s%s",
			    sigabbrev_np(ended_by), total_bytes, elapsed,
			    verify ? ", verified" : "");
	else if (total_bytes == 0)
		outcome_set(oc, 1, "failed: no batch completed in %.2f s", elapsed);
	else
		outcome_set(oc, 0, "done: %" PRIu64 " bytes in %.2f s%s", total_bytes, elapsed,
			    verify ? ", verified" : "");
}

/* ---- main --------------------------------------------------------------- */

int
main(int argc, char **argv)
{
	struct tide_te_opts o;
	struct tide_te *te;
	struct outcome oc = {.status = 1};
	enum tide_log_level lvl;
	char err[256], lhost[256];
	uint16_t rp, dp;
	bool help;
	int rc;

	if (tide_flags_parse(flag_tab, sizeof(flag_tab) / sizeof(flag_tab[0]), argc, argv, &help,
			     err, sizeof(err)) != 0) {
		fprintf(stderr, "tide-bench: %s\n", err);
		return 2;
	}
	if (help) {
		printf("usage: tide-bench --mode=target|initiator [flags]\n");
		tide_flags_usage(flag_tab, sizeof(flag_tab) / sizeof(flag_tab[0]));
		return 0;
	}
	if (use_vram) {
		fprintf(stderr,
			"tide-bench: --use_vram: GPU memory is not supported by this build; "
			"drop the flag to use host memory\n");
		return 2;
	}
	if (tide_log_level_parse(log_level, &lvl) != 0) {
		fprintf(stderr,
			"tide-bench: --log_level: '%s' is not one of error, warn, notice, "
			"info, debug\n",
			log_level);
		return 2;
	}
	tide_log_set_level(lvl);
	/* Before the engine starts its threads and the EAL: a SIGTERM at any time
	 * after this ends the run through the same teardown. */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	tide_te_opts_init(&o, sizeof(o));
	o.metadata = metadata;
	o.local_server_name = local_name;
	o.host = host[0] ? host : NULL;
	o.rpc_port = (uint16_t)rpc_port;
	o.data_port = (uint16_t)data_port;
	o.conns_per_peer = (uint32_t)conns;
	o.io_threads = (uint32_t)io_threads;
	if (slice_size != 0) {
		o.slice_size = (uint32_t)slice_size;
	}
	rc = tide_te_create(&o, &te);
	if (rc != 0) {
		fprintf(stderr, "tide-bench: failed: engine: %s\n", tide_te_strerror(rc));
		return 1;
	}
	rc = tide_te_install_transport(te, protocol);
	if (rc != 0) {
		fprintf(stderr, "tide-bench: failed: transport '%s': %s\n", protocol,
			tide_te_strerror(rc));
		tide_te_destroy(te);
		return 1;
	}
	local_buf = map_buffer(buffer_size);
	if (local_buf == NULL) {
		fprintf(stderr, "tide-bench: failed: cannot map --buffer_size %" PRIu64 " bytes\n",
			buffer_size);
		tide_te_destroy(te);
		return 1;
	}
	/* Every page present before a peer can see the buffer and before the clock
	 * starts: first-touch faults (65,536 of them for 256 MiB, slow on a
	 * paravirtualised VM) are set-up, not transfer cost. The target fills its
	 * buffer with a pattern, the initiator with its own. */
	memset(local_buf, strcmp(mode, "target") == 0 ? 0xA5 : 0x5A, buffer_size);
	rc = tide_te_register(te, local_buf, buffer_size, "cpu:0");
	if (rc != 0) {
		fprintf(stderr, "tide-bench: failed: register: %s\n", tide_te_strerror(rc));
		tide_te_destroy(te);
		munmap(local_buf, buffer_size);
		return 1;
	}
	tide_te_local_addr(te, lhost, sizeof(lhost), &rp, &dp);
	if (strcmp(mode, "target") == 0) {
		printf("tide-bench: target '%s' ready: transport %s, handshake port %u, data port "
		       "%u, buffer 0x%" PRIxPTR " (%" PRIu64 " bytes)\n",
		       tide_te_local_name(te), tide_te_transport_name(te), rp, dp,
		       (uintptr_t)local_buf, buffer_size);
		fflush(stdout);
		while (!stop) {
			usleep(100000);
		}
		struct tide_te_stats st;
		tide_te_stats_get(te, &st);
		printf("tide-bench: target served %" PRIu64 " reads, %" PRIu64 " writes, %" PRIu64
		       " bytes, refused %" PRIu64 "\n",
		       st.srv_reads, st.srv_writes, st.srv_bytes, st.srv_rejected);
		/* A target serves until told to stop: its peers come and go. */
		outcome_set(&oc, 0, "stopped by SIG%s after serving %" PRIu64 " bytes",
			    sigabbrev_np(stop_sig), st.srv_bytes);
	} else {
		run_initiator(te, &oc);
	}
	/*
	 * No tide_te_unregister first: it waits until no peer request holds the
	 * buffer, and a zero-copy read served to a peer that vanished (a memif
	 * initiator that exited before our last frames left) is held until its
	 * connection ends: at TCP's retry limit, and while the link stays down
	 * not at all (refused frames stay queued). Destroy ends every connection
	 * and releases what they held; the buffer is unmapped after that.
	 */
	tide_te_destroy(te);
	munmap(local_buf, buffer_size);
	/* Last, once the engine (and its DPDK port, on tcp-dpdk) is gone. */
	fflush(stdout);
	fprintf(oc.status == 0 ? stdout : stderr, "tide-bench: %s\n", oc.line);
	return oc.status;
}
