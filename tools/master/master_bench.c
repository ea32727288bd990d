/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-master-bench: drive a Mooncake master over the wire (ours or a stock
 * one) with N client connections, one thread each, and report ops/s and
 * p50/p99 latency per operation, single and batched, plus the master's
 * resident memory per live object. By default it starts its own
 * mooncake_master (the one next to this binary) on an ephemeral port.
 *
 * Each thread works on its own key range, so phases measure the master, not
 * contention on keys. Batched rates are in keys/s (batch size x batches/s),
 * as the stock master_bench reports them; latency is per RPC (a batch).
 * With the master's pid (its own, or --master-pid) it also prints the
 * master's CPU time (its threads' schedstat) per op or key over each
 * phase, which includes one ping per second from a liveness thread, and the kernel's share
 * of it (system time). The first phase, Ping, does no table work: its CPU per request is the
 * floor of any single request (mostly the kernel's TCP, wake-up and system-call costs).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tide_clock.h"
#include "tide_log.h"
#include "tide_mc_client.h"

#define MAX_CLIENTS 64
#define MAX_BATCH   4096

static struct {
	char master[256];
	const char *master_bin;
	unsigned clients;
	unsigned ops;
	unsigned batch;
	uint64_t value_size;
	unsigned mem_objects;
	unsigned master_threads;
	pid_t master_pid;
} cfg = {.clients = 2,
	 .ops = 20000,
	 .batch = 128,
	 .value_size = 4096,
	 .mem_objects = 1000000,
	 .master_threads = 2};

static const struct tide_mc_uuid bench_client = {0x7469646562656e63ull, 0x68ull};
static const struct tide_mc_str tenant = {(char *)"default", 7};
static volatile int stop_pinger;
static bool spawned; /* the master is our child: stop it at the end */

enum phase {
	PH_PING, /* the cheapest RPC: the floor a single request costs the master */
	PH_PUT,
	PH_GET,
	PH_EXIST,
	PH_REMOVE,
	PH_BPUT,
	PH_BGET,
	PH_BEXIST,
	PH_BREMOVE,
	PH_LPUT,  /* Tide's lease extension: one TideLeaseCommit per put */
	PH_BLPUT, /* ... one per batch */
	PH_COUNT
};

static const char *const phase_name[PH_COUNT] = {
	"Ping (floor)", "PutStart+PutEnd",   "GetReplicaList",      "ExistKey",
	"Remove",       "BatchPutStart+End", "BatchGetReplicaList", "BatchExistKey",
	"BatchRemove",  "LeaseCommit (put)", "LeaseCommit (batch)",
};

/*
 * Stock mooncake_master under Mooncake's own master_bench (2 clients x 2 threads, 8 segments,
 * batch 128, 4 KiB values) on a quiet 2-core VM: ../shared/spec/reference-figures.md,
 * 2026-12-02; throughput is the midpoint of each range (keys/s for batches), CPU the master's
 * time per request (per key for batches). Phases without a figure are 0.
 */
static const struct {
	double kps, cpu_us;
} stock[PH_COUNT] = {
	[PH_PUT] = {16050.0, 37.4},
	[PH_GET] = {29450.0, 23.4},
	[PH_BPUT] = {142500.0, 11.3},
	[PH_BGET] = {322000.0, 3.6},
	/* A put through a lease does what stock's PutStart + PutEnd does. */
	[PH_LPUT] = {16050.0, 37.4},
	[PH_BLPUT] = {142500.0, 11.3},
};

struct worker {
	unsigned idx;
	enum phase ph;
	struct tide_mc_client *c;
	uint64_t *lat_ns; /* one per RPC (pair for puts) */
	size_t n_lat;
	uint64_t keys; /* keys processed */
	uint64_t errors;
	bool no_lease; /* the master has no lease extension (a stock one) */
	char (*keys_buf)[40];
	struct tide_mc_str *keys_str;
	struct tide_mc_object_meta *metas;
	uint64_t *lens;
};

/* ------------------------------------------------------------------------------------------ */

static int
call1(struct tide_mc_client *c, struct tide_mc_req *r, bool *failed)
{
	struct tide_mc_resp resp;
	size_t i;
	int rc;

	rc = tide_mc_client_call(c, r, &resp, NULL);
	if (rc != 0) {
		*failed = true;
		return rc;
	}
	switch (r->fn) {
	case TIDE_MC_FN_PING:
		*failed = !resp.u.ping.ok;
		break;
	case TIDE_MC_FN_PUT_START:
		*failed = !resp.u.put_start.ok;
		break;
	case TIDE_MC_FN_GET_REPLICA_LIST:
		*failed = !resp.u.replica_list.ok;
		break;
	case TIDE_MC_FN_EXIST_KEY:
		*failed = !resp.u.exist.ok || !resp.u.exist.val;
		break;
	case TIDE_MC_FN_BATCH_PUT_START:
		for (i = 0; i < resp.u.batch_put_start.n; i++) {
			*failed |= !resp.u.batch_put_start.v[i].ok;
		}
		break;
	case TIDE_MC_FN_BATCH_GET_REPLICA_LIST:
		for (i = 0; i < resp.u.batch_replica_list.n; i++) {
			*failed |= !resp.u.batch_replica_list.v[i].ok;
		}
		break;
	case TIDE_MC_FN_BATCH_EXIST_KEY:
		for (i = 0; i < resp.u.batch_exist.n; i++) {
			*failed |= !resp.u.batch_exist.v[i].ok || !resp.u.batch_exist.v[i].val;
		}
		break;
	case TIDE_MC_FN_BATCH_PUT_END:
	case TIDE_MC_FN_BATCH_REMOVE:
	case TIDE_MC_FN_TIDE_LEASE_COMMIT:
		for (i = 0; i < resp.u.batch_status.n; i++) {
			*failed |= !resp.u.batch_status.v[i].ok;
		}
		break;
	default:
		*failed = !resp.u.status.ok;
		break;
	}
	tide_mc_resp_free(&resp);
	return 0;
}

static void
set_key(struct worker *w, unsigned i, unsigned slot)
{
	int n = snprintf(w->keys_buf[slot], sizeof(w->keys_buf[slot]), "bench-%u-%u", w->idx, i);

	w->keys_str[slot].ptr = w->keys_buf[slot];
	w->keys_str[slot].len = (size_t)n;
	w->metas[slot].key = w->keys_str[slot];
	w->metas[slot].object_checksum.has = false;
	w->lens[slot] = cfg.value_size;
}

/*
 * The lease phases: one lease for every key of the phase (granted before the
 * clock of the first commit starts, as a client holds one ahead), then
 * commits of one key (PH_LPUT) or a batch (PH_BLPUT) at consecutive offsets:
 * what a put costs the master with the extension. A master without it (a
 * stock one) answers the grant with an error frame: w->no_lease.
 */
static void
lease_phase(struct worker *w)
{
	unsigned b = w->ph == PH_LPUT ? 1 : cfg.batch, nb = cfg.ops / b, i, j;
	uint64_t offs[MAX_BATCH], t0, id;
	struct tide_mc_resp resp;
	struct tide_mc_req r;
	bool failed;
	int n;

	memset(&r, 0, sizeof(r));
	r.fn = TIDE_MC_FN_TIDE_LEASE_GRANT;
	r.u.lease_grant.client_id = bench_client;
	r.u.lease_grant.size = (uint64_t)nb * b * cfg.value_size;
	r.u.lease_grant.config.replica_num = 1;
	if (tide_mc_client_call(w->c, &r, &resp, NULL) != 0) {
		w->no_lease = true;
		return;
	}
	if (!resp.u.lease.ok) {
		w->errors++;
		tide_mc_resp_free(&resp);
		return;
	}
	id = resp.u.lease.val.id;
	tide_mc_resp_free(&resp);
	for (i = 0; i < nb; i++) {
		for (j = 0; j < b; j++) {
			n = snprintf(w->keys_buf[j], sizeof(w->keys_buf[j]), "lease-%u-%u-%u",
				     (unsigned)w->ph, w->idx, i * b + j);
			w->keys_str[j].ptr = w->keys_buf[j];
			w->keys_str[j].len = (size_t)n;
			w->lens[j] = cfg.value_size;
			offs[j] = ((uint64_t)i * b + j) * cfg.value_size;
		}
		memset(&r, 0, sizeof(r));
		r.fn = TIDE_MC_FN_TIDE_LEASE_COMMIT;
		r.u.lease_commit.client_id = bench_client;
		r.u.lease_commit.lease_id = id;
		r.u.lease_commit.keys.v = w->keys_str;
		r.u.lease_commit.keys.n = b;
		r.u.lease_commit.offsets.v = offs;
		r.u.lease_commit.offsets.n = b;
		r.u.lease_commit.sizes.v = w->lens;
		r.u.lease_commit.sizes.n = b;
		r.u.lease_commit.config.replica_num = 1;
		failed = false;
		t0 = tide_mono_ns();
		if (call1(w->c, &r, &failed) != 0)
			return;
		w->lat_ns[w->n_lat++] = tide_mono_ns() - t0;
		w->errors += failed;
		w->keys += b;
	}
	memset(&r, 0, sizeof(r));
	r.fn = TIDE_MC_FN_TIDE_LEASE_RELEASE;
	r.u.lease_release.client_id = bench_client;
	r.u.lease_release.lease_id = id;
	if (tide_mc_client_call(w->c, &r, &resp, NULL) == 0)
		tide_mc_resp_free(&resp);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct tide_mc_req r;
	unsigned i, j, nb, b = cfg.batch;
	uint64_t t0;
	bool failed;

	if (w->ph >= PH_LPUT) {
		lease_phase(w);
		return NULL;
	}
	if (w->ph < PH_BPUT) {
		for (i = 0; i < cfg.ops; i++) {
			set_key(w, i, 0);
			memset(&r, 0, sizeof(r));
			failed = false;
			t0 = tide_mono_ns();
			switch (w->ph) {
			case PH_PING:
				r.fn = TIDE_MC_FN_PING;
				r.u.ping.id = bench_client;
				break;
			case PH_PUT:
				r.fn = TIDE_MC_FN_PUT_START;
				r.u.put_start.client_id = bench_client;
				r.u.put_start.key = w->keys_str[0];
				r.u.put_start.slice_length = cfg.value_size;
				r.u.put_start.config.replica_num = 1;
				r.u.put_start.tenant_id = tenant;
				if (call1(w->c, &r, &failed) != 0) {
					return NULL;
				}
				memset(&r, 0, sizeof(r));
				r.fn = TIDE_MC_FN_PUT_END;
				r.u.put_end.client_id = bench_client;
				r.u.put_end.meta.key = w->keys_str[0];
				r.u.put_end.replica_type = TIDE_MC_REPLICA_ALL;
				r.u.put_end.tenant_id = tenant;
				break;
			case PH_GET:
				r.fn = TIDE_MC_FN_GET_REPLICA_LIST;
				r.u.key.key = w->keys_str[0];
				r.u.key.tenant_id = tenant;
				break;
			case PH_EXIST:
				r.fn = TIDE_MC_FN_EXIST_KEY;
				r.u.key.key = w->keys_str[0];
				r.u.key.tenant_id = tenant;
				break;
			default:
				r.fn = TIDE_MC_FN_REMOVE;
				r.u.remove.key = w->keys_str[0];
				r.u.remove.force = true;
				r.u.remove.tenant_id = tenant;
				break;
			}
			if (call1(w->c, &r, &failed) != 0) {
				return NULL;
			}
			w->lat_ns[w->n_lat++] = tide_mono_ns() - t0;
			w->errors += failed;
			w->keys++;
		}
		return NULL;
	}
	nb = cfg.ops / b;
	for (i = 0; i < nb; i++) {
		for (j = 0; j < b; j++) {
			set_key(w, cfg.ops + i * b + j, j);
		}
		memset(&r, 0, sizeof(r));
		failed = false;
		t0 = tide_mono_ns();
		switch (w->ph) {
		case PH_BPUT:
			r.fn = TIDE_MC_FN_BATCH_PUT_START;
			r.u.batch_put_start.client_id = bench_client;
			r.u.batch_put_start.keys.v = w->keys_str;
			r.u.batch_put_start.keys.n = b;
			r.u.batch_put_start.slice_lengths.v = w->lens;
			r.u.batch_put_start.slice_lengths.n = b;
			r.u.batch_put_start.config.replica_num = 1;
			r.u.batch_put_start.tenant_id = tenant;
			if (call1(w->c, &r, &failed) != 0) {
				return NULL;
			}
			memset(&r, 0, sizeof(r));
			r.fn = TIDE_MC_FN_BATCH_PUT_END;
			r.u.batch_put_end.client_id = bench_client;
			r.u.batch_put_end.metas.v = w->metas;
			r.u.batch_put_end.metas.n = b;
			r.u.batch_put_end.replica_type = TIDE_MC_REPLICA_ALL;
			r.u.batch_put_end.tenant_id = tenant;
			break;
		case PH_BGET:
		case PH_BEXIST:
			r.fn = w->ph == PH_BGET ? TIDE_MC_FN_BATCH_GET_REPLICA_LIST
						: TIDE_MC_FN_BATCH_EXIST_KEY;
			r.u.keys.keys.v = w->keys_str;
			r.u.keys.keys.n = b;
			r.u.keys.tenant_id = tenant;
			break;
		default:
			r.fn = TIDE_MC_FN_BATCH_REMOVE;
			r.u.batch_remove.keys.v = w->keys_str;
			r.u.batch_remove.keys.n = b;
			r.u.batch_remove.force = true;
			r.u.batch_remove.tenant_id = tenant;
			break;
		}
		if (call1(w->c, &r, &failed) != 0) {
			return NULL;
		}
		w->lat_ns[w->n_lat++] = tide_mono_ns() - t0;
		w->errors += failed;
		w->keys += b;
	}
	return NULL;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct result {
	double kps;
	double p50_us, p99_us;
	double cpu_us;  /* master CPU time (its threads' schedstat) per op or key; < 0 unknown */
	double sys_pct; /* the kernel's share of the master's CPU time (utime/stime); < 0 unknown */
	uint64_t errors;
};

/*
 * CPU time of every thread of a process, in seconds, from each thread's
 * /proc/PID/task/TID/schedstat (nanoseconds on a CPU): utime and stime tick
 * at 10 ms, too coarse for a batched phase that lasts a few ms. Threads that
 * exited meanwhile are not counted (the master's workers live as long as it
 * does). < 0 when unreadable.
 */
static double
proc_cpu_s(pid_t pid)
{
	char path[96], buf[128];
	struct dirent *d;
	double total = 0;
	DIR *dir;

	if (pid <= 0) {
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (dir == NULL) {
		return -1;
	}
	while ((d = readdir(dir)) != NULL) {
		unsigned long long ns;
		ssize_t n;
		int fd;

		if (d->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/schedstat", (int)pid, d->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			continue;
		}
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			if (sscanf(buf, "%llu", &ns) == 1) {
				total += (double)ns / 1e9;
			}
		}
	}
	closedir(dir);
	return total;
}

/*
 * The master's user and system time in clock ticks (fields 14 and 15 of /proc/PID/stat, after
 * the command name, which may hold spaces: parse from its closing parenthesis). Ticks are
 * 10 ms, so the split is good to a few percent over a single-request phase (about half a
 * second) and meaningless over a batched one of a few ms. -1 when unreadable.
 */
static int
proc_ticks(pid_t pid, unsigned long long *ut, unsigned long long *st)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	if (pid <= 0) {
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0) {
		return -1;
	}
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* After ") ": state, then fields 4..13, then utime and stime. */
	if (p == NULL ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", ut, st) != 2) {
		return -1;
	}
	return 0;
}

static int
run_phase(struct worker *ws, enum phase ph, struct result *res)
{
	pthread_t th[MAX_CLIENTS];
	uint64_t t0, t1, keys = 0, *all;
	unsigned long long u0 = 0, s0 = 0, u1 = 0, s1 = 0;
	int tk0, tk1;
	double c0, c1;
	size_t n = 0, k;
	unsigned i;

	for (i = 0; i < cfg.clients; i++) {
		ws[i].ph = ph;
		ws[i].n_lat = 0;
		ws[i].keys = 0;
		ws[i].errors = 0;
		ws[i].no_lease = false;
	}
	tk0 = proc_ticks(cfg.master_pid, &u0, &s0);
	c0 = proc_cpu_s(cfg.master_pid);
	t0 = tide_mono_ns();
	for (i = 0; i < cfg.clients; i++) {
		if (pthread_create(&th[i], NULL, worker_main, &ws[i]) != 0) {
			return -EAGAIN;
		}
	}
	for (i = 0; i < cfg.clients; i++) {
		pthread_join(th[i], NULL);
	}
	t1 = tide_mono_ns();
	c1 = proc_cpu_s(cfg.master_pid);
	tk1 = proc_ticks(cfg.master_pid, &u1, &s1);
	for (i = 0; i < cfg.clients; i++) {
		n += ws[i].n_lat;
		keys += ws[i].keys;
	}
	all = malloc((n ? n : 1) * sizeof(*all));
	if (all == NULL) {
		return -ENOMEM;
	}
	memset(res, 0, sizeof(*res));
	for (i = 0, k = 0; i < cfg.clients; i++) {
		memcpy(all + k, ws[i].lat_ns, ws[i].n_lat * sizeof(*all));
		k += ws[i].n_lat;
		res->errors += ws[i].errors;
	}
	qsort(all, n, sizeof(*all), cmp_u64);
	res->kps = (double)keys / ((double)(t1 - t0) / 1e9);
	res->cpu_us = c0 >= 0 && c1 >= 0 && keys > 0 ? (c1 - c0) * 1e6 / (double)keys : -1;
	/* Fewer than 20 ticks (200 ms) is too coarse to split. */
	res->sys_pct = tk0 == 0 && tk1 == 0 && (u1 - u0) + (s1 - s0) >= 20
			       ? 100.0 * (double)(s1 - s0) / (double)((u1 - u0) + (s1 - s0))
			       : -1;
	if (n > 0) {
		res->p50_us = (double)all[n / 2] / 1000.0;
		res->p99_us = (double)all[(n * 99) / 100] / 1000.0;
	}
	free(all);
	if (ws[0].no_lease)
		return -ENOTSUP;
	return keys == (uint64_t)cfg.clients * (ph < PH_BPUT || ph == PH_LPUT
							? cfg.ops
							: cfg.ops / cfg.batch * cfg.batch)
		       ? 0
		       : -EIO;
}

/* ------------------------------------------------------------------------------------------ */

static void *
pinger(void *arg)
{
	struct tide_mc_client *c = arg;
	int32_t st, ec;
	unsigned i;

	while (!stop_pinger) {
		(void)tide_mc_client_ping(c, &bench_client, &st, &ec);
		for (i = 0; i < 10 && !stop_pinger; i++) {
			usleep(100000);
		}
	}
	return NULL;
}

static long
rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL) {
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) {
			break;
		}
	}
	fclose(f);
	return kb;
}

/* Put cfg.mem_objects small objects in batches from one connection. */
static int
fill_objects(struct tide_mc_client *c, unsigned count)
{
	enum { B = 256 };
	static char kb[B][40];
	static struct tide_mc_str ks[B];
	static struct tide_mc_object_meta ms[B];
	static uint64_t ls[B];
	struct tide_mc_req r;
	unsigned i, j, n;
	bool failed;
	int rc;

	for (i = 0; i < count; i += n) {
		n = count - i < B ? count - i : B;
		for (j = 0; j < n; j++) {
			ks[j].ptr = kb[j];
			ks[j].len =
				(size_t)snprintf(kb[j], sizeof(kb[j]), "mem-object-%08u", i + j);
			ms[j].key = ks[j];
			ls[j] = 64;
		}
		memset(&r, 0, sizeof(r));
		r.fn = TIDE_MC_FN_BATCH_PUT_START;
		r.u.batch_put_start.client_id = bench_client;
		r.u.batch_put_start.keys.v = ks;
		r.u.batch_put_start.keys.n = n;
		r.u.batch_put_start.slice_lengths.v = ls;
		r.u.batch_put_start.slice_lengths.n = n;
		r.u.batch_put_start.config.replica_num = 1;
		r.u.batch_put_start.tenant_id = tenant;
		failed = false;
		rc = call1(c, &r, &failed);
		if (rc != 0 || failed) {
			return rc != 0 ? rc : -ENOSPC;
		}
		memset(&r, 0, sizeof(r));
		r.fn = TIDE_MC_FN_BATCH_PUT_END;
		r.u.batch_put_end.client_id = bench_client;
		r.u.batch_put_end.metas.v = ms;
		r.u.batch_put_end.metas.n = n;
		r.u.batch_put_end.replica_type = TIDE_MC_REPLICA_ALL;
		r.u.batch_put_end.tenant_id = tenant;
		rc = call1(c, &r, &failed);
		if (rc != 0 || failed) {
			return rc != 0 ? rc : -EIO;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------ */

static uint16_t
pick_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	uint16_t port = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0) {
		port = ntohs(sa.sin_port);
	}
	if (fd >= 0) {
		close(fd);
	}
	return port;
}

static int
spawn_master(void)
{
	static char bin[PATH_MAX + 32];
	char self[PATH_MAX], port_s[16], thr_s[16];
	ssize_t n;
	char *slash;
	uint16_t port = pick_port();
	pid_t pid;

	if (cfg.master_bin == NULL) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0) {
			return -errno;
		}
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash != NULL) {
			*slash = '\0';
		}
		snprintf(bin, sizeof(bin), "%s/mooncake_master", self);
		cfg.master_bin = bin;
	}
	snprintf(port_s, sizeof(port_s), "%u", port);
	snprintf(thr_s, sizeof(thr_s), "%u", cfg.master_threads);
	pid = fork();
	if (pid < 0) {
		return -errno;
	}
	if (pid == 0) {
		execl(cfg.master_bin, "mooncake_master", "--rpc_port", port_s, "--rpc_address",
		      "127.0.0.1", "--metrics_port", "0", "--metrics_host", "127.0.0.1",
		      "--rpc_thread_num", thr_s, "--client_ttl", "3600", "--log_level", "warn",
		      (char *)NULL);
		_exit(127);
	}
	cfg.master_pid = pid;
	spawned = true;
	snprintf(cfg.master, sizeof(cfg.master), "127.0.0.1:%u", port);
	printf("started %s (pid %d) on %s with %u RPC threads\n", cfg.master_bin, (int)pid,
	       cfg.master, cfg.master_threads);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr,
		"usage: tide-master-bench [--master HOST:PORT [--master-pid PID]] [--master-bin "
		"PATH]\n"
		"  [--clients N (2)] [--ops N per client per phase (20000)] [--batch N (128)]\n"
		"  [--value-size BYTES (4096)] [--mem-objects N (1000000; 0 skips)]\n"
		"  [--master-threads N (2, for the master it starts)]\n");
}

static int
parse(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--help") == 0) {
			usage();
			exit(0);
		}
		if (v == NULL) {
			fprintf(stderr, "%s needs a value\n", a);
			return -EINVAL;
		}
		i++;
		if (strcmp(a, "--master") == 0) {
			snprintf(cfg.master, sizeof(cfg.master), "%s", v);
		} else if (strcmp(a, "--master-pid") == 0) {
			cfg.master_pid = (pid_t)atoi(v);
		} else if (strcmp(a, "--master-bin") == 0) {
			cfg.master_bin = v;
		} else if (strcmp(a, "--clients") == 0) {
			cfg.clients = (unsigned)atoi(v);
		} else if (strcmp(a, "--ops") == 0) {
			cfg.ops = (unsigned)atoi(v);
		} else if (strcmp(a, "--batch") == 0) {
			cfg.batch = (unsigned)atoi(v);
		} else if (strcmp(a, "--value-size") == 0) {
			cfg.value_size = strtoull(v, NULL, 10);
		} else if (strcmp(a, "--mem-objects") == 0) {
			cfg.mem_objects = (unsigned)atoi(v);
		} else if (strcmp(a, "--master-threads") == 0) {
			cfg.master_threads = (unsigned)atoi(v);
		} else {
			fprintf(stderr, "unknown option %s\n", a);
			usage();
			return -EINVAL;
		}
	}
	if (cfg.clients < 1 || cfg.clients > MAX_CLIENTS || cfg.batch < 1 ||
	    cfg.batch > MAX_BATCH || cfg.ops < cfg.batch || cfg.value_size < 1 ||
	    cfg.master_threads < 1) {
		fprintf(stderr, "bad option values (clients 1..%d, batch 1..4096 <= ops)\n",
			MAX_CLIENTS);
		return -EINVAL;
	}
	return 0;
}

/* How long to wait for the master to accept connections (it may still be starting). */
#define CONNECT_WAIT_S 30

/* Connect, retrying until a deadline (not a number of tries: a loaded machine only takes
 * longer); says what it waited for when the deadline passes. */
static int
connect_retry(struct tide_mc_client **c)
{
	uint64_t start = tide_mono_ns(), deadline = start + CONNECT_WAIT_S * 1000000000ull;
	int rc;

	for (;;) {
		rc = tide_mc_client_connect_addr(cfg.master, 2000, c);
		if (rc == 0) {
			return 0;
		}
		if (tide_mono_ns() >= deadline) {
			break;
		}
		usleep(25000);
	}
	fprintf(stderr, "timed out after %.1f s waiting for mooncake_master at %s to accept: %s\n",
		(double)(tide_mono_ns() - start) / 1e9, cfg.master, strerror(-rc));
	return rc;
}

int
main(int argc, char **argv)
{
	static struct worker ws[MAX_CLIENTS];
	struct tide_mc_client *ctl = NULL, *pc = NULL;
	struct tide_mc_segment seg;
	struct result res[PH_COUNT];
	pthread_t pth;
	unsigned i, p;
	int32_t ec = 0;
	int64_t removed;
	long before, after;
	int rc, ret = 0;
	char ver[16];

	signal(SIGPIPE, SIG_IGN);
	tide_log_set_level(TIDE_LOG_WARN);
	if (parse(argc, argv) != 0) {
		return 2;
	}
	if (cfg.master[0] == '\0' && spawn_master() != 0) {
		fprintf(stderr, "cannot start mooncake_master\n");
		return 1;
	}
	rc = connect_retry(&ctl);
	if (rc != 0 || tide_mc_client_connect_addr(cfg.master, 5000, &pc) != 0) {
		fprintf(stderr, "cannot connect to %s: %s\n", cfg.master, strerror(-rc));
		ret = 1;
		goto out;
	}
	if (tide_mc_client_service_ready(ctl, ver, sizeof(ver), &ec) != 0) {
		fprintf(stderr, "ServiceReady failed\n");
		ret = 1;
		goto out;
	}
	/* One big segment at a fake address: the master never touches the memory. */
	memset(&seg, 0, sizeof(seg));
	seg.id.first = 0x5e6;
	seg.id.second = (uint64_t)getpid();
	seg.name.ptr = (char *)"bench-host:12345";
	seg.name.len = strlen(seg.name.ptr);
	seg.base = 0x100000000000ull;
	seg.size = 256ull << 30;
	seg.te_endpoint = seg.name;
	seg.protocol.ptr = (char *)"tcp";
	seg.protocol.len = 3;
	if (tide_mc_client_mount(ctl, &seg, &bench_client, &ec) != 0 || ec != 0 ||
	    tide_mc_client_remount(ctl, &seg, 1, &bench_client, &ec) != 0 || ec != 0) {
		fprintf(stderr, "MountSegment failed (%d)\n", ec);
		ret = 1;
		goto out;
	}
	stop_pinger = 0;
	pthread_create(&pth, NULL, pinger, pc);

	printf("master %s (version %s): %u clients x %u ops, batch %u, value %" PRIu64 " B\n",
	       cfg.master, ver, cfg.clients, cfg.ops, cfg.batch, cfg.value_size);
	for (i = 0; i < cfg.clients; i++) {
		ws[i].idx = i;
		ws[i].lat_ns = malloc(cfg.ops * sizeof(uint64_t));
		ws[i].keys_buf = malloc(cfg.batch * sizeof(*ws[i].keys_buf));
		ws[i].keys_str = calloc(cfg.batch, sizeof(struct tide_mc_str));
		ws[i].metas = calloc(cfg.batch, sizeof(struct tide_mc_object_meta));
		ws[i].lens = calloc(cfg.batch, sizeof(uint64_t));
		if (ws[i].lat_ns == NULL || ws[i].keys_buf == NULL || ws[i].keys_str == NULL ||
		    ws[i].metas == NULL || ws[i].lens == NULL || connect_retry(&ws[i].c) != 0) {
			fprintf(stderr, "client %u: setup failed\n", i);
			ret = 1;
			goto stop;
		}
	}
	printf("\n%-22s %12s %10s %10s %8s %9s %6s  %s\n", "operation", "ops|keys/s", "p50 us",
	       "p99 us", "errors", "master us", "sys %",
	       "vs stock (throughput; master CPU per op)");
	for (p = 0; p < PH_COUNT; p++) {
		char ratio[96] = "", cpu[16] = "-", sys[16] = "-";

		rc = run_phase(ws, (enum phase)p, &res[p]);
		if (rc == -ENOTSUP) {
			printf("%-22s not served: the master has no lease extension (a stock "
			       "one)\n",
			       phase_name[p]);
			continue;
		}
		if (res[p].cpu_us >= 0) {
			snprintf(cpu, sizeof(cpu), "%.2f", res[p].cpu_us);
		}
		if (res[p].sys_pct >= 0) {
			snprintf(sys, sizeof(sys), "%.0f", res[p].sys_pct);
		}
		if (stock[p].kps > 0) {
			int o = snprintf(ratio, sizeof(ratio), "%.2fx of %.0f/s",
					 res[p].kps / stock[p].kps, stock[p].kps);

			if (res[p].cpu_us > 0) {
				snprintf(ratio + o, sizeof(ratio) - (size_t)o,
					 "; %.1fx less CPU than %.1f us",
					 stock[p].cpu_us / res[p].cpu_us, stock[p].cpu_us);
			}
		}
		printf("%-22s %12.0f %10.1f %10.1f %8" PRIu64 " %9s %6s  %s%s\n", phase_name[p],
		       res[p].kps, res[p].p50_us, res[p].p99_us, res[p].errors, cpu, sys, ratio,
		       rc != 0 ? " (incomplete: connection lost)" : "");
		if (rc != 0 || res[p].errors != 0) {
			ret = 1;
		}
	}

	if (cfg.mem_objects > 0) {
		if (cfg.master_pid <= 0) {
			printf("\nmemory: skipped (give --master-pid for an external master)\n");
		} else {
			before = rss_kb(cfg.master_pid);
			rc = fill_objects(ctl, cfg.mem_objects);
			after = rss_kb(cfg.master_pid);
			if (rc != 0 || before < 0 || after < 0) {
				printf("\nmemory: fill failed (%d)\n", rc);
				ret = 1;
			} else {
				printf("\nmemory: %u live objects (64 B values, 19 B keys): RSS "
				       "%ld -> "
				       "%ld KiB, %.1f bytes per object\n",
				       cfg.mem_objects, before, after,
				       (double)(after - before) * 1024.0 / cfg.mem_objects);
			}
			(void)tide_mc_client_remove_all(ctl, true, &removed);
		}
	}
stop:
	stop_pinger = 1;
	pthread_join(pth, NULL);
	(void)tide_mc_client_unmount(ctl, &seg.id, &bench_client, &ec);
	for (i = 0; i < cfg.clients; i++) {
		tide_mc_client_close(ws[i].c);
		free(ws[i].lat_ns);
		free(ws[i].keys_buf);
		free(ws[i].keys_str);
		free(ws[i].metas);
		free(ws[i].lens);
	}
out:
	tide_mc_client_close(ctl);
	tide_mc_client_close(pc);
	if (spawned) {
		int st = 0;

		kill(cfg.master_pid, SIGTERM);
		waitpid(cfg.master_pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "master exited abnormally (status 0x%x)\n", st);
			ret = 1;
		}
	}
	return ret;
}
