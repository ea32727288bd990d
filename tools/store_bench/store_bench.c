/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-store-bench: put and get rates of the store API, per value size.
 *
 * A client (attached to a node agent with --agent, or embedded) puts objects
 * of each size for --duration seconds, optionally placing them on another
 * node's segment (--target, the preferred segment) so the bytes cross
 * between nodes, then reads them back for --duration seconds (cycling over
 * what it stored), comparing every read with its source. Values come
 * from and go to the client's local buffer (shared with the agent: the
 * zero-copy path Mooncake's BufferPool users take). A space budget bounds
 * what one size keeps stored: when it is reached the objects are removed
 * (untimed) and the put phase continues.
 *
 * Before the first size, --warmup seconds (default 1) of the same puts and
 * gets run and are not counted: the first calls of a fresh client pay for
 * the agent's and the transfer engine's connection set-up and for the first
 * touch of segment pages, which otherwise lands on whichever size is listed
 * first (it made the first row of the README's table look 30-50 % slower).
 *
 * One line per size, and with --json a machine-readable record per size.
 * Exit 1 on any failed operation or mismatch.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tide_nodeenv.h"
#include "tide_store.h"
#include "tide_clock.h"

#define MIB (1024.0 * 1024.0)

struct opts {
	const char *master, *agent, *target, *json, *label;
	uint64_t sizes[16];
	size_t nsizes;
	double duration;
	double warmup; /* seconds of uncounted puts/gets before the first size */
	uint64_t budget;
	unsigned batch;
	uint64_t segment; /* embedded only */
};

static void
fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(x >> (i % 8 * 8));
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
pct(double *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_dbl);
	return v[(size_t)(p * (double)(n - 1))];
}

struct result {
	uint64_t size;
	uint64_t puts, gets;
	double put_s, get_s;
	double put_p50_us, get_p50_us;
};

/* Remove keys [first, last) of this size (untimed). */
static int
remove_range(struct tide_store *s, const char *prefix, uint64_t first, uint64_t last)
{
	char key[128];
	int rc, bad = 0;

	for (uint64_t i = first; i < last; i++) {
		snprintf(key, sizeof(key), "%s/%" PRIu64, prefix, i);
		rc = tide_store_remove(s, key, true);
		if (rc != 0 && rc != -ENOENT)
			bad = rc;
	}
	return bad;
}

static int
bench_size(struct tide_store *s, const struct opts *o, uint64_t size, uint8_t *lb, size_t lblen,
	   struct result *res)
{
	const unsigned batch = o->batch;
	uint64_t keep = o->budget / size, stored = 0, base = 0, i;
	char prefix[96], keys[64][128];
	const char *kp[64];
	const void *bufs[64];
	void *dsts[64];
	size_t lens[64];
	int rcs[64];
	int64_t got[64];
	double *lat;
	size_t nlat = 0, latcap = 1u << 20;
	struct tide_store_rc rc = {.replica_num = 1, .preferred_segment = o->target};
	double t0, t, busy = 0;

	if (keep < batch)
		keep = batch;
	if (size * batch * 2 > lblen) {
		fprintf(stderr,
			"tide-store-bench: size %" PRIu64 " x batch %u needs a local buffer "
			"of %" PRIu64 " bytes (have %zu)\n",
			size, batch, size * batch * 2, lblen);
		return -ENOBUFS;
	}
	lat = malloc(latcap * sizeof(*lat));
	if (lat == NULL)
		return -ENOMEM;
	memset(res, 0, sizeof(*res));
	res->size = size;
	snprintf(prefix, sizeof(prefix), "tide-store-bench/%d/%" PRIu64, (int)getpid(), size);
	for (unsigned b = 0; b < batch; b++) {
		fill(lb + (size_t)b * size, size, size * 131 + b);
		kp[b] = keys[b];
		bufs[b] = lb + (size_t)b * size;
		dsts[b] = lb + (size_t)(batch + b) * size;
		lens[b] = size;
	}
	/* Put phase. */
	t0 = tide_mono_s();
	while (tide_mono_s() - t0 < o->duration) {
		if (stored - base + batch > keep) {
			int r = remove_range(s, prefix, base, stored);

			if (r != 0) {
				fprintf(stderr, "tide-store-bench: remove: %s\n",
					tide_store_strerror(r));
				free(lat);
				return r;
			}
			base = stored;
		}
		for (unsigned b = 0; b < batch; b++)
			snprintf(keys[b], sizeof(keys[b]), "%s/%" PRIu64, prefix, stored + b);
		t = tide_mono_s();
		int r = batch == 1 ? tide_store_put(s, kp[0], bufs[0], size, &rc)
				   : tide_store_batch_put_from(s, kp, bufs, lens, batch, &rc, rcs);
		t = tide_mono_s() - t;
		if (r != 0) {
			fprintf(stderr, "tide-store-bench: put of %" PRIu64 " B: %s\n", size,
				tide_store_strerror(r));
			free(lat);
			return r;
		}
		busy += t;
		if (nlat < latcap)
			lat[nlat++] = t * 1e6;
		stored += batch;
		res->puts += batch;
	}
	res->put_s = busy;
	res->put_p50_us = pct(lat, nlat, 0.5);
	/* Get phase: cycle over what is stored; every read is compared with its
	 * source (outside the timed call). */
	nlat = 0;
	busy = 0;
	t0 = tide_mono_s();
	for (i = base; tide_mono_s() - t0 < o->duration; i += batch) {
		if (i + batch > stored)
			i = base;
		for (unsigned b = 0; b < batch; b++)
			snprintf(keys[b], sizeof(keys[b]), "%s/%" PRIu64, prefix, i + b);
		t = tide_mono_s();
		int r = batch == 1
				? (int)((got[0] = tide_store_get_into(s, kp[0], dsts[0], size)) < 0
						? got[0]
						: 0)
				: tide_store_batch_get_into(s, kp, dsts, lens, batch, got);
		t = tide_mono_s() - t;
		if (r != 0) {
			fprintf(stderr, "tide-store-bench: get of %" PRIu64 " B: %s\n", size,
				tide_store_strerror(r));
			free(lat);
			return r;
		}
		busy += t;
		if (nlat < latcap)
			lat[nlat++] = t * 1e6;
		for (unsigned b = 0; b < batch; b++) {
			/* Put batches start at multiples of batch: object k came
			 * from source slot k % batch. */
			uint64_t slot = (i + b) % batch;

			if (got[b] != (int64_t)size ||
			    memcmp(dsts[b], lb + slot * size, size) != 0) {
				fprintf(stderr,
					"tide-store-bench: %s: read %" PRId64
					" bytes, content %s\n",
					keys[b], got[b], got[b] == (int64_t)size ? "differs" : "-");
				free(lat);
				return -EIO;
			}
		}
		res->gets += batch;
	}
	res->get_s = busy;
	res->get_p50_us = pct(lat, nlat, 0.5);
	free(lat);
	return remove_range(s, prefix, base, stored);
}

static int
parse_size(const char *s, uint64_t *out)
{
	return tide_nodeenv_parse_size(s, out);
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: tide-store-bench --master HOST:PORT (--agent SOCKET | --embedded)\n"
		   "         [--target SEGMENT] [--sizes 256,4kb,64kb,1mb,64mb] [--duration S]\n"
		   "         [--batch N] [--budget BYTES] [--segment BYTES] [--label TEXT] "
		   "[--json FILE]\n"
		   "         [--warmup S (default 1, 0 = none)]\n");
}

/*
 * One JSON line per size (JSON Lines), built with cJSON so any --label text
 * is escaped (a quote in it used to break the file). 0 or -ENOMEM.
 */
static int
json_row(FILE *f, const char *label, const struct result *r, unsigned batch, double pops,
	 double gops)
{
	cJSON *o = cJSON_CreateObject();
	char *txt;
	bool ok = o != NULL && cJSON_AddStringToObject(o, "label", label ? label : "") &&
		  cJSON_AddNumberToObject(o, "size", (double)r->size) &&
		  cJSON_AddNumberToObject(o, "batch", batch) &&
		  cJSON_AddNumberToObject(o, "put_ops", pops) &&
		  cJSON_AddNumberToObject(o, "put_mib", pops * (double)r->size / MIB) &&
		  cJSON_AddNumberToObject(o, "put_p50_us", r->put_p50_us) &&
		  cJSON_AddNumberToObject(o, "get_ops", gops) &&
		  cJSON_AddNumberToObject(o, "get_mib", gops * (double)r->size / MIB) &&
		  cJSON_AddNumberToObject(o, "get_p50_us", r->get_p50_us);

	txt = ok ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (txt == NULL)
		return -ENOMEM;
	fprintf(f, "%s\n", txt);
	cJSON_free(txt);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {{"master", required_argument, NULL, 'm'},
					   {"agent", required_argument, NULL, 'a'},
					   {"embedded", no_argument, NULL, 'e'},
					   {"target", required_argument, NULL, 't'},
					   {"sizes", required_argument, NULL, 's'},
					   {"duration", required_argument, NULL, 'd'},
					   {"batch", required_argument, NULL, 'b'},
					   {"budget", required_argument, NULL, 'B'},
					   {"segment", required_argument, NULL, 'S'},
					   {"label", required_argument, NULL, 'l'},
					   {"json", required_argument, NULL, 'j'},
					   {"warmup", required_argument, NULL, 'w'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	struct opts o = {
		.duration = 2.0, .warmup = 1.0, .budget = 256u << 20, .batch = 1, .label = ""};
	bool embedded = false;
	const char *sizes = "256,4kb,64kb,1mb,64mb";
	struct tide_store *s = NULL;
	struct tide_store_cfg cfg = {0};
	FILE *jf = NULL;
	void *lb;
	size_t lblen;
	int c, rc, status = 0;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			o.master = optarg;
			break;
		case 'a':
			o.agent = optarg;
			break;
		case 'e':
			embedded = true;
			break;
		case 't':
			o.target = optarg;
			break;
		case 's':
			sizes = optarg;
			break;
		case 'd':
			o.duration = atof(optarg);
			break;
		case 'b':
			o.batch = (unsigned)atoi(optarg);
			break;
		case 'B':
			if (parse_size(optarg, &o.budget) != 0 || o.budget == 0) {
				fprintf(stderr, "tide-store-bench: --budget '%s' is not a size\n",
					optarg);
				return 1;
			}
			break;
		case 'S':
			if (parse_size(optarg, &o.segment) != 0) {
				fprintf(stderr, "tide-store-bench: --segment '%s' is not a size\n",
					optarg);
				return 1;
			}
			break;
		case 'l':
			o.label = optarg;
			break;
		case 'j':
			o.json = optarg;
			break;
		case 'w':
			o.warmup = atof(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (o.master == NULL || (o.agent == NULL) == !embedded || o.batch < 1 || o.batch > 64 ||
	    !(o.duration > 0) || !(o.warmup >= 0)) {
		usage(stderr);
		return 1;
	}
	char *dup = strdup(sizes), *save = NULL;
	for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o.nsizes == 16 || parse_size(tok, &o.sizes[o.nsizes]) != 0 ||
		    o.sizes[o.nsizes] == 0) {
			fprintf(stderr, "tide-store-bench: --sizes: '%s' is not a size (or > 16)\n",
				tok);
			free(dup);
			return 1;
		}
		o.nsizes++;
	}
	free(dup);
	uint64_t maxsz = 0;
	for (size_t i = 0; i < o.nsizes; i++)
		maxsz = o.sizes[i] > maxsz ? o.sizes[i] : maxsz;

	cfg.local_hostname = "127.0.0.1";
	cfg.metadata_server = "P2PHANDSHAKE";
	cfg.protocol = "tcp";
	cfg.master_server_addr = o.master;
	cfg.local_buffer_size = maxsz * o.batch * 2;
	cfg.global_segment_size = embedded ? o.segment : 0;
	cfg.agent = embedded ? TIDE_STORE_AGENT_OFF : TIDE_STORE_AGENT_REQUIRED;
	cfg.agent_socket = o.agent;
	rc = tide_store_create(&s);
	if (rc == 0)
		rc = tide_store_setup(s, &cfg);
	if (rc != 0) {
		fprintf(stderr, "tide-store-bench: setup: %s\n", tide_store_strerror(rc));
		tide_store_close(s);
		return 1;
	}
	tide_store_local_buffer(s, &lb, &lblen);
	if (o.json != NULL && (jf = fopen(o.json, "a")) == NULL) {
		fprintf(stderr, "tide-store-bench: %s: %s\n", o.json, strerror(errno));
		tide_store_close(s);
		return 1;
	}
	printf("tide-store-bench: %s%s%s client on %s, objects on %s, batch %u\n", o.label,
	       o.label[0] ? ": " : "", embedded ? "embedded" : "attached", tide_store_endpoint(s),
	       o.target ? o.target : "(master's choice)", o.batch);
	printf("%10s %12s %10s %10s %12s %10s %10s\n", "size", "put ops/s", "put MiB/s",
	       "put p50us", "get ops/s", "get MiB/s", "get p50us");
	if (o.warmup > 0) {
		struct opts w = o;
		struct result r;

		w.duration = o.warmup / 2; /* put phase, then as long a get phase */
		rc = bench_size(s, &w, o.sizes[0], lb, lblen, &r);
		if (rc != 0) {
			tide_store_close(s);
			if (jf != NULL)
				fclose(jf);
			return 1;
		}
		printf("%10s %" PRIu64 " puts and %" PRIu64 " gets of %" PRIu64
		       " B in %.1f s, not counted\n",
		       "warm-up:", r.puts, r.gets, r.size, o.warmup);
	}
	for (size_t i = 0; i < o.nsizes; i++) {
		struct result r;

		rc = bench_size(s, &o, o.sizes[i], lb, lblen, &r);
		if (rc != 0) {
			status = 1;
			break;
		}
		double pops = r.put_s > 0 ? (double)r.puts / r.put_s : 0;
		double gops = r.get_s > 0 ? (double)r.gets / r.get_s : 0;
		printf("%10" PRIu64 " %12.0f %10.1f %10.1f %12.0f %10.1f %10.1f\n", r.size, pops,
		       pops * (double)r.size / MIB, r.put_p50_us, gops, gops * (double)r.size / MIB,
		       r.get_p50_us);
		fflush(stdout);
		if (jf != NULL && json_row(jf, o.label, &r, o.batch, pops, gops) != 0) {
			fprintf(stderr, "tide-store-bench: --json: out of memory\n");
			status = 1;
		}
	}
	if (jf != NULL)
		fclose(jf);
	tide_store_close(s);
	return status;
}
