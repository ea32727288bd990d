/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store client against the real mooncake_master binary ($STORE_IT_MASTER_BIN)
 * on an ephemeral loopback port: two stores in this process, each contributing
 * a 64 MiB segment over P2PHANDSHAKE and kernel sockets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "it_master.h"
#include "put_parts_it.h"
#include "store_calls_it.h"
#include "tide_mc_client.h"
#include "tide_store.h"
#include "tide_ut.h"

/* Room for a 64 MiB object next to what the other cases leave behind. */
#define SEG_SIZE (128ull << 20)
/* A config of n replicas and nothing else. */
#define RC(n) (&(struct tide_store_rc){.replica_num = (n)})
/* Short enough that a store without a working heartbeat loses its segment
 * during the test (checked by heartbeat_keeps_segment). */
#define CLIENT_TTL_S "3"

static struct it_master master = {.pid = -1};
static char master_addr[64];
static uint16_t metrics_port;
static struct tide_store *sa, *sb;

static int
start_master(void)
{
	int rc = it_master_start(&master, "STORE_IT_MASTER_BIN", CLIENT_TTL_S);

	if (rc == 0) {
		snprintf(master_addr, sizeof(master_addr), "%s", master.addr);
		metrics_port = master.metrics_port;
	}
	return rc;
}

static int
new_store(struct tide_store **out, uint64_t seg)
{
	struct tide_store_cfg cfg = {
		.local_hostname = "127.0.0.1",
		.metadata_server = "P2PHANDSHAKE",
		.global_segment_size = seg,
		.local_buffer_size = 16u << 20,
		.protocol = "tcp",
		.master_server_addr = master_addr,
		.agent = TIDE_STORE_AGENT_OFF,
	};
	int rc = tide_store_create(out);

	if (rc == 0) {
		rc = tide_store_setup(*out, &cfg);
		if (rc != 0) {
			tide_store_close(*out);
			*out = NULL;
		}
	}
	return rc;
}

static int suite_clean(void);

static int
suite_init(void)
{
	/* Kernel sockets only, whatever the caller's environment says. */
	unsetenv("TIDE_DPDK_DEVICE");
	unsetenv("TIDE_NODE_ENV");
	setenv("MC_FORCE_TCP", "1", 1);
	/* CUnit skips the cleanup of a suite whose init failed: do it here. */
	if (start_master() != 0 || new_store(&sa, SEG_SIZE) != 0 || new_store(&sb, SEG_SIZE) != 0) {
		suite_clean();
		return -1;
	}
	return 0;
}

static int
suite_clean(void)
{
	tide_store_close(sa);
	tide_store_close(sb);
	sa = sb = NULL;
	it_master_stop(&master, 0);
	return 0;
}

static void
fill(unsigned char *p, size_t n, unsigned seed)
{
	tide_ut_fill_lcg(p, n, seed * 2654435761u + 1, 1103515245u, 12345u, 16);
}

/* Endpoints of an object's replicas, through a separate master connection. */
static size_t
replica_endpoints(const char *key, char eps[][64], size_t max)
{
	struct tide_mc_client *c = NULL;
	struct tide_mc_resp r;
	int32_t ec = -1;
	size_t n = 0;

	if (tide_mc_client_connect_addr(master_addr, 0, &c) != 0)
		return 0;
	if (tide_mc_client_get_replica_list(c, key, &r, &ec) == 0) {
		if (ec == 0) {
			for (size_t i = 0; i < r.u.replica_list.val.replicas.n && n < max; i++)
				snprintf(eps[n++], 64, "%s",
					 r.u.replica_list.val.replicas.v[i]
						 .u.memory.transport_endpoint.ptr);
		}
		tide_mc_resp_free(&r);
	}
	tide_mc_client_close(c);
	return n;
}

/* GET path from the master's admin HTTP server; the body, NUL-terminated (free it), or NULL. */
static char *
http_get(const char *path)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {2, 0};
	size_t len = 0, cap = 65536;
	char req[256], *buf = malloc(cap), *body;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_port = htons(metrics_port);
	if (fd < 0 || buf == NULL)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		goto fail;
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (write(fd, req, (size_t)n) != n)
		goto fail;
	/* The server closes after the answer. */
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 4096) {
			char *p = realloc(buf, cap * 2);

			if (p == NULL)
				goto fail;
			buf = p;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	close(fd);
	body = strstr(buf, "\r\n\r\n");
	if (body == NULL || strncmp(buf, "HTTP/1.1 200", 12) != 0) {
		free(buf);
		return NULL;
	}
	memmove(buf, body + 4, strlen(body + 4) + 1);
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* A gauge or counter from /metrics (no labels); -1 when absent. */
static long long
metric(const char *name)
{
	char *m = http_get("/metrics"), pat[128], *p;
	long long v = -1;

	if (m == NULL)
		return -1;
	snprintf(pat, sizeof(pat), "\n%s ", name);
	p = strstr(m, pat);
	if (p != NULL)
		v = strtoll(p + strlen(pat), NULL, 10);
	free(m);
	return v;
}

static void
roundtrip(struct tide_store *w, struct tide_store *r, const char *key, size_t len)
{
	unsigned char *src = malloc(len ? len : 1), *dst = malloc(len + 16);

	CU_ASSERT_FATAL(src != NULL && dst != NULL);
	fill(src, len, (unsigned)len);
	memset(dst, 0xee, len + 16);
	CU_ASSERT_EQUAL(tide_store_put(w, key, src, len, NULL), 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(r, key), 1);
	CU_ASSERT_EQUAL(tide_store_get_size(r, key), (int64_t)len);
	CU_ASSERT_EQUAL(tide_store_get_into(r, key, dst, len + 16), (int64_t)len);
	CU_ASSERT_EQUAL(memcmp(src, dst, len), 0);
	CU_ASSERT_EQUAL(dst[len], 0xee); /* nothing past the object */
	CU_ASSERT_EQUAL(tide_store_get_into(w, key, dst, len), (int64_t)len);
	CU_ASSERT_EQUAL(memcmp(src, dst, len), 0);
	free(src);
	free(dst);
}

static void
test_roundtrip_sizes(void)
{
	roundtrip(sa, sb, "rt-1", 1);
	roundtrip(sa, sb, "rt-4k", 4096);
	roundtrip(sb, sa, "rt-1m", 1u << 20);
	roundtrip(sa, sb, "rt-16m", 16u << 20);
}

/* Not a benchmark (two cores, shared): a plausibility figure for the report. */
static void
test_throughput_16m(void)
{
	size_t len = 16u << 20;
	unsigned char *src = malloc(len), *dst = malloc(len);
	char key[32];
	double t0, tput = 0, tget = 0;
	int rounds = 8;

	CU_ASSERT_FATAL(src != NULL && dst != NULL);
	fill(src, len, 99);
	for (int i = 0; i < rounds; i++) {
		snprintf(key, sizeof(key), "tp-%d", i);
		t0 = tide_ut_now_s();
		CU_ASSERT_EQUAL(tide_store_put(sa, key, src, len, NULL), 0);
		tput += tide_ut_now_s() - t0;
		t0 = tide_ut_now_s();
		CU_ASSERT_EQUAL(tide_store_get_into(sb, key, dst, len), (int64_t)len);
		tget += tide_ut_now_s() - t0;
		CU_ASSERT_EQUAL(memcmp(src, dst, len), 0);
		CU_ASSERT_EQUAL(tide_store_remove(sa, key, true), 0);
	}
	printf("\n    16 MiB x %d: put %.0f MiB/s, get %.0f MiB/s (either segment, loopback)\n",
	       rounds, 16.0 * rounds / tput, 16.0 * rounds / tget);
	free(src);
	free(dst);
}

static void
test_zero_length(void)
{
	char b = 0;

	/* The master refuses empty objects (INVALID_PARAMS), as Mooncake's. */
	CU_ASSERT_EQUAL(tide_store_put(sa, "zero", &b, 0, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "zero"), 0);
}

static void
test_put_exists_is_success(void)
{
	unsigned char a[100], b2[100], out[100];

	fill(a, sizeof(a), 7);
	fill(b2, sizeof(b2), 8);
	CU_ASSERT_EQUAL(tide_store_put(sa, "dup", a, sizeof(a), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_put(sb, "dup", b2, sizeof(b2), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "dup", out, sizeof(out)), 100);
	CU_ASSERT_EQUAL(memcmp(out, a, sizeof(a)), 0); /* the first value stays */
}

/* PutStart places at random: a put from a segment-less client (leases off, see
 * test_lease_puts) lands in sb's segment sooner or later, and reads back from both. */
static void
test_placed_in_other_segment(void)
{
	const char *epb = tide_store_endpoint(sb);
	unsigned char src[8192], dst[8192];
	char key[32], eps[4][64];
	struct tide_store *sc = NULL;
	int found = 0;

	CU_ASSERT_NOT_EQUAL(strcmp(tide_store_endpoint(sa), epb), 0);
	setenv("TIDE_PUT_LEASE", "0", 1);
	CU_ASSERT_EQUAL_FATAL(new_store(&sc, 0), 0);
	unsetenv("TIDE_PUT_LEASE");
	for (int i = 0; i < 64 && !found; i++) {
		snprintf(key, sizeof(key), "other-%d", i);
		fill(src, sizeof(src), (unsigned)i + 100);
		CU_ASSERT_EQUAL_FATAL(tide_store_put(sc, key, src, sizeof(src), NULL), 0);
		CU_ASSERT_EQUAL_FATAL(replica_endpoints(key, eps, 4), 1);
		if (strcmp(eps[0], epb) != 0)
			continue;
		found = 1;
		memset(dst, 0, sizeof(dst));
		CU_ASSERT_EQUAL(tide_store_get_into(sa, key, dst, sizeof(dst)), 8192);
		CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(dst)), 0);
		memset(dst, 0, sizeof(dst));
		CU_ASSERT_EQUAL(tide_store_get_into(sb, key, dst, sizeof(dst)), 8192);
		CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(dst)), 0);
	}
	CU_ASSERT(found);
	tide_store_close(sc);
}

/* Small one-replica puts take the lease path (one master round trip: a commit, no
 * PutStart); larger ones, several replicas or a preferred segment take PutStart;
 * TIDE_PUT_LEASE=0 turns the path off and any other value refuses set-up. */
static void
test_lease_puts(void)
{
	long long c0 = metric("tide_master_lease_commit_requests_total");
	long long p0 = metric("master_put_start_requests_total");
	unsigned char src[1000], dst[1000];
	struct tide_store *sc = NULL;
	struct tide_store_rc two = {.replica_num = 2};
	char key[32];

	CU_ASSERT(c0 >= 0 && p0 >= 0);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "lease-%d", i);
		fill(src, sizeof(src), (unsigned)i + 300);
		CU_ASSERT_EQUAL_FATAL(tide_store_put(sa, key, src, sizeof(src), NULL), 0);
		memset(dst, 0, sizeof(dst));
		CU_ASSERT_EQUAL(tide_store_get_into(sb, key, dst, sizeof(dst)), 1000);
		CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(dst)), 0);
	}
	CU_ASSERT_EQUAL(metric("tide_master_lease_commit_requests_total") - c0, 20);
	CU_ASSERT_EQUAL(metric("master_put_start_requests_total") - p0, 0);
	roundtrip(sa, sb, "lease-big", (1u << 20) + 1);
	fill(src, sizeof(src), 333);
	CU_ASSERT_EQUAL(tide_store_put(sa, "lease-two", src, sizeof(src), &two), 0);
	CU_ASSERT_EQUAL(metric("master_put_start_requests_total") - p0, 2);
	CU_ASSERT_EQUAL(metric("tide_master_lease_commit_requests_total") - c0, 20);

	/* A batch through the lease: one commit for every key, group ids kept per key. */
	{
		static unsigned char bb[8][3000], out[3000];
		const char *gids[8] = {"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"};
		const char *bk[8];
		const void *bp[8];
		size_t bl[8];
		char names[8][32];
		int brc[8];
		struct tide_store_rc grc = {.group_ids = gids};
		long long c1 = metric("tide_master_lease_commit_requests_total");
		long long b0 = metric("master_batch_put_start_requests_total");

		for (int i = 0; i < 8; i++) {
			snprintf(names[i], sizeof(names[i]), "lease-batch-%d", i);
			fill(bb[i], sizeof(bb[i]), (unsigned)i + 900);
			bk[i] = names[i];
			bp[i] = bb[i];
			bl[i] = sizeof(bb[i]) - (size_t)i;
		}
		CU_ASSERT_EQUAL(tide_store_batch_put_from(sa, bk, bp, bl, 8, &grc, brc), 0);
		CU_ASSERT_EQUAL(metric("tide_master_lease_commit_requests_total") - c1, 8);
		CU_ASSERT_EQUAL(metric("master_batch_put_start_requests_total") - b0, 0);
		for (int i = 0; i < 8; i++) {
			CU_ASSERT_EQUAL(brc[i], 0);
			CU_ASSERT_EQUAL(tide_store_get_into(sb, bk[i], out, sizeof(out)),
					(int64_t)bl[i]);
			CU_ASSERT_EQUAL(memcmp(out, bb[i], bl[i]), 0);
		}
		/* Again: every key exists, every put succeeds, nothing changes. */
		CU_ASSERT_EQUAL(tide_store_batch_put_from(sa, bk, bp, bl, 8, &grc, brc), 0);
		CU_ASSERT_EQUAL(tide_store_get_size(sb, bk[7]), (int64_t)bl[7]);
		c0 += 16;
	}

	setenv("TIDE_PUT_LEASE", "maybe", 1); /* not a boolean: set-up says so, and fails */
	CU_ASSERT_EQUAL(new_store(&sc, 0), -EINVAL);
	setenv("TIDE_PUT_LEASE", "0", 1);
	CU_ASSERT_EQUAL_FATAL(new_store(&sc, 0), 0);
	unsetenv("TIDE_PUT_LEASE");
	CU_ASSERT_EQUAL(tide_store_put(sc, "lease-off", src, sizeof(src), NULL), 0);
	CU_ASSERT_EQUAL(metric("master_put_start_requests_total") - p0, 3);
	CU_ASSERT_EQUAL(metric("tide_master_lease_commit_requests_total") - c0, 20);
	tide_store_close(sc);
}

static void
test_two_replicas(void)
{
	unsigned char src[300000], dst[300000];
	size_t n;
	char eps[4][64];

	fill(src, sizeof(src), 2);
	CU_ASSERT_EQUAL(tide_store_put(sb, "two", src, sizeof(src), RC(2)), 0);
	n = replica_endpoints("two", eps, 4);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_NOT_EQUAL(strcmp(eps[0], eps[1]), 0);
	CU_ASSERT(strcmp(eps[0], tide_store_endpoint(sa)) == 0 ||
		  strcmp(eps[1], tide_store_endpoint(sa)) == 0);
	CU_ASSERT(strcmp(eps[0], tide_store_endpoint(sb)) == 0 ||
		  strcmp(eps[1], tide_store_endpoint(sb)) == 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "two", dst, sizeof(dst)), (int64_t)sizeof(src));
	CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(src)), 0);
	/* Only two segments exist: placement is best effort (at least one), as Mooncake's. */
	CU_ASSERT_EQUAL(tide_store_put(sb, "three", src, 10, RC(3)), 0);
	CU_ASSERT_EQUAL(replica_endpoints("three", eps, 4), 2);
}

static void
test_batch(void)
{
	enum { N = 6 };
	static const size_t lens[N] = {1, 100, 4096, 65536, 1u << 20, 3u << 20};
	const char *keys[N] = {"b-0", "b-1", "b-2", "b-3", "b-4", "b-5"};
	unsigned char *src[N], *dst[N];
	size_t dlens[N];
	int64_t sizes[N];
	int rcs[N];

	for (int i = 0; i < N; i++) {
		src[i] = malloc(lens[i]);
		dst[i] = calloc(1, lens[i]);
		CU_ASSERT_FATAL(src[i] != NULL && dst[i] != NULL);
		fill(src[i], lens[i], 40u + (unsigned)i);
		dlens[i] = lens[i];
	}
	CU_ASSERT_EQUAL(
		tide_store_batch_put_from(sa, keys, (const void *const *)src, lens, N, RC(2), rcs),
		0);
	for (int i = 0; i < N; i++)
		CU_ASSERT_EQUAL(rcs[i], 0);
	CU_ASSERT_EQUAL(tide_store_batch_get_into(sb, keys, (void *const *)dst, dlens, N, sizes),
			0);
	for (int i = 0; i < N; i++) {
		CU_ASSERT_EQUAL(sizes[i], (int64_t)lens[i]);
		CU_ASSERT_EQUAL(memcmp(src[i], dst[i], lens[i]), 0);
	}
	/* Existing keys are a success again; a missing key and a short buffer are per key. */
	CU_ASSERT_EQUAL(
		tide_store_batch_put_from(sb, keys, (const void *const *)src, lens, N, NULL, rcs),
		0);
	keys[1] = "b-missing";
	dlens[2] = 10;
	CU_ASSERT_EQUAL(tide_store_batch_get_into(sa, keys, (void *const *)dst, dlens, N, sizes),
			-ENOENT);
	CU_ASSERT_EQUAL(sizes[0], 1);
	CU_ASSERT_EQUAL(sizes[1], -ENOENT);
	CU_ASSERT_EQUAL(sizes[2], -ENOBUFS);
	CU_ASSERT_EQUAL(sizes[5], (int64_t)lens[5]);
	CU_ASSERT_EQUAL(memcmp(src[5], dst[5], lens[5]), 0);
	for (int i = 0; i < N; i++) {
		free(src[i]);
		free(dst[i]);
	}
}

/* Values in pieces and upserts (put_parts_it.h), from heap and local-buffer pieces,
 * one replica and two. */
static void
test_put_parts(void)
{
	void *lb;
	size_t lblen;

	TIDE_UT_OK(tide_store_local_buffer(sa, &lb, &lblen));
	CU_ASSERT_FATAL(lblen >= (2u << 20));
	put_parts_check(sa, sb, "pp1", 1, lb);
	put_parts_check(sb, sa, "pp2", 2, NULL);
}

static void
test_missing_and_remove(void)
{
	unsigned char src[64], dst[64];

	CU_ASSERT_EQUAL(tide_store_get_into(sa, "nope", dst, sizeof(dst)), -ENOENT);
	CU_ASSERT_EQUAL(tide_store_get_size(sa, "nope"), -ENOENT);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "nope"), 0);
	CU_ASSERT_EQUAL(tide_store_remove(sa, "nope", false), -ENOENT);

	fill(src, sizeof(src), 3);
	CU_ASSERT_EQUAL(tide_store_put(sa, "rm", src, sizeof(src), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_remove(sb, "rm", false), 0); /* never read: no lease */
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "rm"), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "rm", dst, sizeof(dst)), -ENOENT);

	CU_ASSERT_EQUAL(tide_store_put(sa, "rm2", src, sizeof(src), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "rm2", dst, sizeof(dst)), 64);
	CU_ASSERT_EQUAL(tide_store_remove(sa, "rm2", false), -EBUSY); /* read lease */
	CU_ASSERT_EQUAL(tide_store_remove(sa, "rm2", true), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "rm2", dst, sizeof(dst)), -ENOENT);
}

static void
test_small_buffer(void)
{
	unsigned char src[1000], dst[1000];

	fill(src, sizeof(src), 4);
	CU_ASSERT_EQUAL(tide_store_put(sa, "small", src, sizeof(src), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "small", dst, 999), -ENOBUFS);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "small", dst, 1000), 1000);
}

/* The allocating get and put_from (Mooncake's names for the same calls). */
static void
test_get_allocating(void)
{
	unsigned char src[3000];
	void *out = (void *)1;
	size_t len = 7;

	long long lists;

	fill(src, sizeof(src), 44);
	CU_ASSERT_EQUAL(tide_store_put_from(sa, "alloc-get", src, sizeof(src), NULL), 0);
	lists = metric("master_get_replica_list_requests_total");
	TIDE_UT_OK(tide_store_get(sb, "alloc-get", &out, &len));
	/* size and location from one GetReplicaList: one master round trip */
	CU_ASSERT_EQUAL(metric("master_get_replica_list_requests_total"), lists + 1);
	CU_ASSERT_EQUAL(len, sizeof(src));
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_EQUAL(memcmp(out, src, sizeof(src)), 0);
	free(out);
	CU_ASSERT_EQUAL(tide_store_get(sb, "alloc-get-none", &out, &len), -ENOENT);
	CU_ASSERT_PTR_NULL(out);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(tide_store_get(sb, "alloc-get", NULL, &len), -EINVAL);
	TIDE_UT_OK(tide_store_remove(sa, "alloc-get", true));
}

/* tide_store_get_with: the caller's allocator, asked once for the object's size
 * (in process: one GetReplicaList), the bytes received into its block. */
struct get_with_ctx {
	unsigned allocs, releases;
	size_t last_size;
	unsigned char block[8192];
};

static void *
get_with_alloc(void *arg, size_t size)
{
	struct get_with_ctx *c = arg;

	c->allocs++;
	c->last_size = size;
	return size <= sizeof(c->block) ? c->block : NULL;
}

static void
get_with_release(void *arg, void *p)
{
	struct get_with_ctx *c = arg;

	CU_ASSERT_PTR_EQUAL(p, c->block);
	c->releases++;
}

static void
test_get_with(void)
{
	static unsigned char src[5000];
	struct get_with_ctx c = {0};
	void *out = NULL;
	size_t len = 0;

	fill(src, sizeof(src), 45);
	CU_ASSERT_EQUAL(tide_store_put_from(sa, "get-with", src, sizeof(src), NULL), 0);
	TIDE_UT_OK(tide_store_get_with(sb, "get-with", get_with_alloc, get_with_release, &c, &out,
				       &len));
	CU_ASSERT_EQUAL(c.allocs, 1);
	CU_ASSERT_EQUAL(c.releases, 0);
	CU_ASSERT_EQUAL(c.last_size, sizeof(src));
	CU_ASSERT_PTR_EQUAL(out, c.block);
	CU_ASSERT_EQUAL(len, sizeof(src));
	CU_ASSERT_EQUAL(memcmp(c.block, src, sizeof(src)), 0);
	/* No such key: the allocator is not asked. */
	CU_ASSERT_EQUAL(
		tide_store_get_with(sb, "get-with-none", get_with_alloc, NULL, &c, &out, &len),
		-ENOENT);
	CU_ASSERT_EQUAL(c.allocs, 1);
	CU_ASSERT_PTR_NULL(out);
	/* An allocator that fails (the object is larger than its block): -ENOMEM. */
	static unsigned char big[sizeof(c.block) + 1];

	TIDE_UT_OK(tide_store_put_from(sa, "get-with-big", big, sizeof(big), NULL));
	c.allocs = 0;
	CU_ASSERT_EQUAL(tide_store_get_with(sb, "get-with-big", get_with_alloc, get_with_release,
					    &c, &out, &len),
			-ENOMEM);
	CU_ASSERT_EQUAL(c.allocs, 1);
	CU_ASSERT_PTR_NULL(out);
	CU_ASSERT_EQUAL(tide_store_get_with(sb, "get-with", NULL, NULL, NULL, &out, &len), -EINVAL);
	TIDE_UT_OK(tide_store_remove(sa, "get-with", true));
	TIDE_UT_OK(tide_store_remove(sa, "get-with-big", true));
}

static void
test_no_space(void)
{
	size_t len = SEG_SIZE + 4096;
	unsigned char *src = calloc(1, len);

	CU_ASSERT_FATAL(src != NULL);
	CU_ASSERT_EQUAL(tide_store_put(sa, "huge", src, len, NULL), -ENOSPC);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "huge"), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "huge", src, len), -ENOENT);
	free(src);
	CU_ASSERT_STRING_EQUAL(tide_store_strerror(-ENOSPC),
			       "no space in any segment (NO_AVAILABLE_HANDLE)");
}

/*
 * Mount for client, over a new master connection (returned: close it), a segment id
 * named name of size bytes at base, whose transfer endpoint ep (64 bytes: set to
 * "127.0.0.1:<a free port>") nothing serves.
 */
static struct tide_mc_client *
mount_ghost(const struct tide_mc_uuid *client, const struct tide_mc_uuid *id, const char *name,
	    uint64_t base, uint64_t size, char *ep)
{
	struct tide_mc_client *c = NULL;
	int32_t ec = -1;

	snprintf(ep, 64, "127.0.0.1:%u", it_free_port());
	struct tide_mc_segment seg = {.id = *id,
				      .name = {(char *)name, strlen(name)},
				      .base = base,
				      .size = size,
				      .te_endpoint = {ep, strlen(ep)},
				      .protocol = {(char *)"tcp", 3}};

	CU_ASSERT_EQUAL_FATAL(tide_mc_client_connect_addr(master_addr, 0, &c), 0);
	CU_ASSERT_EQUAL(tide_mc_client_mount(c, &seg, client, &ec), 0);
	CU_ASSERT_EQUAL(ec, 0);
	return c;
}

/*
 * A third segment is mounted whose transfer-engine endpoint does not answer:
 * a put with three replicas must place one there, fail its write and revoke.
 */
static void
test_failed_write_revoked(void)
{
	static const struct tide_mc_uuid fake_client = {0x5eed, 0x1}, fake_seg = {0x5eed, 0x2};
	unsigned char src[4096], dst[4096];
	char ep[64];
	int32_t ec = -1;
	struct tide_mc_client *c =
		mount_ghost(&fake_client, &fake_seg, "ghost", 0x7f0000000000ull, SEG_SIZE, ep);

	fill(src, sizeof(src), 5);
	CU_ASSERT_TRUE(tide_store_put(sa, "ghosted", src, sizeof(src), RC(3)) < 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ghosted"), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "ghosted", dst, sizeof(dst)), -ENOENT);
	{
		const char *bk[2] = {"ghost-b0", "ghost-b1"};
		const void *bb[2] = {src, src};
		size_t bl[2] = {100, sizeof(src)};
		int brc[2];

		CU_ASSERT_TRUE(tide_store_batch_put_from(sb, bk, bb, bl, 2, RC(3), brc) < 0);
		CU_ASSERT_TRUE(brc[0] < 0 && brc[1] < 0);
		CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ghost-b0"), 0);
		CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ghost-b1"), 0);
	}
	/* The key is free again: a put the ghost cannot take part in succeeds. */
	CU_ASSERT_EQUAL(tide_mc_client_unmount(c, &fake_seg, &fake_client, &ec), 0);
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "ghosted", src, sizeof(src), RC(2)), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "ghosted", dst, sizeof(dst)), 4096);
	CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(dst)), 0);
	tide_mc_client_close(c);
}

/* With client_ttl 3 s, segments survive only if the heartbeat pings. */
static void
test_heartbeat_keeps_segment(void)
{
	unsigned char src[2048], dst[2048];
	char eps[4][64];

	fill(src, sizeof(src), 6);
	CU_ASSERT_EQUAL(tide_store_put(sb, "hb", src, sizeof(src), RC(2)), 0);
	it_sleep_ms(5000);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "hb"), 1);
	/* Both segments are still mounted. */
	CU_ASSERT_EQUAL(tide_store_put(sa, "hb2", src, sizeof(src), RC(2)), 0);
	CU_ASSERT_EQUAL(replica_endpoints("hb2", eps, 4), 2);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "hb", dst, sizeof(dst)), 2048);
	CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(dst)), 0);
}

static void
test_remove_all(void)
{
	unsigned char src[16] = {1};

	CU_ASSERT_EQUAL(tide_store_put(sa, "ra-1", src, sizeof(src), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "ra-2", src, sizeof(src), NULL), 0);
	CU_ASSERT_TRUE(tide_store_remove_all(sb, true) >= 2);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ra-1"), 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ra-2"), 0);
}

static void
test_bad_args(void)
{
	struct tide_store *s = NULL;
	struct tide_store_cfg cfg = {.agent = TIDE_STORE_AGENT_OFF};
	char b[4];

	CU_ASSERT_EQUAL(tide_store_create(NULL), -EINVAL);
	CU_ASSERT_EQUAL_FATAL(tide_store_create(&s), 0);
	CU_ASSERT_EQUAL(tide_store_put(s, "k", b, 4, NULL), -EINVAL); /* not set up */
	CU_ASSERT_EQUAL(tide_store_setup(s, &cfg), -EINVAL);
	cfg.local_hostname = "127.0.0.1";
	cfg.metadata_server = "P2PHANDSHAKE";
	cfg.master_server_addr = "127.0.0.1:1"; /* nobody listens */
	CU_ASSERT_TRUE(tide_store_setup(s, &cfg) < 0);
	CU_ASSERT_STRING_EQUAL(tide_store_endpoint(s), "");
	tide_store_close(s);
	CU_ASSERT_EQUAL(tide_store_put(sa, "", b, 4, NULL), -EINVAL);
	/* replica_num 0 means 1; a preferred-segment list without entries is refused. */
	CU_ASSERT_EQUAL(
		tide_store_put(sa, "k", b, 4, &(struct tide_store_rc){.n_preferred_segments = 1}),
		-EINVAL);
	CU_ASSERT_EQUAL(
		tide_store_put(sa, "k-rc0", b, 4, &(struct tide_store_rc){.replica_num = 0}), 0);
}

/* test_small_object_cost's calls, in the order they run; one key each. */
enum small_op { SO_RTT, SO_PUT, SO_BATCH_PUT, SO_GET, SO_RANGES, SO_BATCH_GET, SO_COUNT };

/* Call i of op: 256 bytes of src to "sp-<i>" (put) or "sb-<i>" (batch_put_from), read
 * back into dst; the round trip is a health check. */
static void
small_call(enum small_op op, int i, unsigned char *src, unsigned char *dst)
{
	const void *b1[1] = {src};
	size_t l1[1] = {256};
	struct tide_store_frag fr = {.key = 0, .src_off = 0, .dst = dst, .len = 256};
	void *d1[1] = {dst};
	const char *k1[1];
	int64_t sz1[1];
	char key[32];
	int rc1[1];

	snprintf(key, sizeof(key), "%s-%d", op == SO_PUT || op == SO_GET ? "sp" : "sb", i);
	k1[0] = key;
	switch (op) {
	case SO_RTT:
		CU_ASSERT_EQUAL(tide_store_health_check(sa), 0);
		break;
	case SO_PUT:
		CU_ASSERT_EQUAL(tide_store_put(sa, key, src, 256, NULL), 0);
		break;
	case SO_BATCH_PUT:
		CU_ASSERT_EQUAL(tide_store_batch_put_from(sa, k1, b1, l1, 1, RC(1), rc1), 0);
		break;
	case SO_GET:
		CU_ASSERT_EQUAL(tide_store_get_into(sb, key, dst, 256), 256);
		break;
	case SO_RANGES:
		CU_ASSERT_EQUAL(tide_store_get_into_ranges(sb, k1, 1, &fr, 1), 0);
		break;
	case SO_BATCH_GET:
		CU_ASSERT_EQUAL(tide_store_batch_get_into(sb, k1, d1, l1, 1, sz1), 0);
		break;
	case SO_COUNT:
		break;
	}
}

/* Not a benchmark: what a Miles shard costs per object (256 B, one key per call). */
static void
test_small_object_cost(void)
{
	enum { N = 2000 };
	unsigned char src[256], dst[256];
	double t0, t[SO_COUNT], treg;

	fill(src, sizeof(src), 11);
	/* The floor (SO_RTT): one master round trip (health_check is one ServiceReady). */
	for (int op = 0; op < SO_COUNT; op++) {
		t0 = tide_ut_now_s();
		for (int i = 0; i < N; i++)
			small_call((enum small_op)op, i, src, dst);
		t[op] = tide_ut_now_s() - t0;
		if (op == SO_GET || op == SO_RANGES)
			CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(dst)), 0);
	}
	t0 = tide_ut_now_s();
	for (int i = 0; i < 100000; i++) {
		CU_ASSERT_EQUAL(tide_store_register_buffer(sb, dst, sizeof(dst)), 0);
		CU_ASSERT_EQUAL(tide_store_unregister_buffer(sb, dst), 0);
	}
	treg = tide_ut_now_s() - t0;
	printf("\n    master round trip %.1f us; 256 B x %d: put %.1f us (%.0f/s), "
	       "batch_put_from(1 key) %.1f us (%.0f/s), "
	       "get_into %.1f us (%.0f/s), batch_get_into(1 key) %.1f us (%.0f/s), "
	       "get_into_ranges %.1f us (%.0f/s); register+unregister %.0f ns\n",
	       t[SO_RTT] / N * 1e6, N, t[SO_PUT] / N * 1e6, N / t[SO_PUT],
	       t[SO_BATCH_PUT] / N * 1e6, N / t[SO_BATCH_PUT], t[SO_GET] / N * 1e6, N / t[SO_GET],
	       t[SO_BATCH_GET] / N * 1e6, N / t[SO_BATCH_GET], t[SO_RANGES] / N * 1e6,
	       N / t[SO_RANGES], treg / 100000 * 1e9);
	CU_ASSERT_TRUE(tide_store_remove_by_regex(sa, "^s[pb]-", true) >= 2 * N);
}

static void
test_put_sizes_edges(void)
{
	size_t big = 64u << 20;
	unsigned char one = 0x5a, out[2] = {0}, *src, *dst;

	CU_ASSERT_EQUAL(tide_store_put(sa, "edge-0", &one, 0, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_put(sa, "edge-null", NULL, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_is_exist(sb, "edge-0"), 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "edge-1", &one, 1, RC(2)), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "edge-1", out, sizeof(out)), 1);
	CU_ASSERT_EQUAL(out[0], 0x5a);
	src = malloc(big);
	dst = malloc(big);
	CU_ASSERT_FATAL(src != NULL && dst != NULL);
	fill(src, big, 64);
	CU_ASSERT_EQUAL(tide_store_put(sb, "edge-64m", src, big, NULL), 0);
	CU_ASSERT_EQUAL(tide_store_get_size(sa, "edge-64m"), (int64_t)big);
	memset(dst, 0, big);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "edge-64m", dst, big), (int64_t)big);
	CU_ASSERT_EQUAL(memcmp(src, dst, big), 0);
	CU_ASSERT_EQUAL(tide_store_remove(sa, "edge-64m", true), 0);
	free(src);
	free(dst);
}

static void
test_group_ids(void)
{
	const char *keys[3] = {"grp-0", "grp-1", "grp-2"};
	const char *two[] = {"g1", "", NULL}, *three[] = {"g1", "g1", "g2", NULL};
	const char *one[] = {"g9", NULL}, *none[] = {NULL};
	unsigned char v[3][32];
	const void *bufs[3] = {v[0], v[1], v[2]};
	size_t lens[3] = {32, 32, 32};
	struct tide_store_rc rc = {.replica_num = 1, .group_ids = two};
	int rcs[3] = {1, 1, 1}, ex[3];

	for (int i = 0; i < 3; i++)
		fill(v[i], 32, 200u + (unsigned)i);
	/* Two ids (NULL-terminated) for three keys: every key refused, nothing stored. */
	CU_ASSERT_EQUAL(tide_store_batch_put_from(sa, keys, bufs, lens, 3, &rc, rcs), -EINVAL);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(rcs[i], -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_is_exist(sb, keys, 3, ex), 0);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(ex[i], 0);
	rc.group_ids = three;
	CU_ASSERT_EQUAL(tide_store_batch_put_from(sa, keys, bufs, lens, 3, &rc, rcs), 0);
	CU_ASSERT_EQUAL(tide_store_batch_is_exist(sb, keys, 3, ex), 0);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(ex[i], 1);
	/* A single put takes exactly one id. */
	rc.group_ids = one;
	CU_ASSERT_EQUAL(tide_store_put(sa, "grp-3", v[0], 32, &rc), 0);
	rc.group_ids = none;
	CU_ASSERT_EQUAL(tide_store_put(sa, "grp-4", v[0], 32, &rc), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "grp-4"), 0);
}

static void
test_hard_pin_forwarded(void)
{
	const char *keys[2] = {"pin-b0", "pin-b1"};
	unsigned char v[64];
	const void *bufs[2] = {v, v};
	size_t lens[2] = {64, 64};
	struct tide_store_rc rc = {.replica_num = 1, .with_hard_pin = true};
	long long before = metric("tide_master_hard_pin_key_count");
	int rcs[2];

	CU_ASSERT_FATAL(before >= 0);
	fill(v, sizeof(v), 77);
	CU_ASSERT_EQUAL(tide_store_put(sa, "pin-0", v, sizeof(v), &rc), 0);
	CU_ASSERT_EQUAL(metric("tide_master_hard_pin_key_count"), before + 1);
	CU_ASSERT_EQUAL(tide_store_batch_put_from(sb, keys, bufs, lens, 2, &rc, rcs), 0);
	CU_ASSERT_EQUAL(metric("tide_master_hard_pin_key_count"), before + 3);
	CU_ASSERT_EQUAL(tide_store_put(sa, "pin-no", v, sizeof(v), NULL), 0);
	CU_ASSERT_EQUAL(metric("tide_master_hard_pin_key_count"), before + 3);
	CU_ASSERT_EQUAL(tide_store_batch_remove(sa, keys, 2, true, rcs), 0);
	CU_ASSERT_EQUAL(tide_store_remove(sa, "pin-0", true), 0);
	CU_ASSERT_EQUAL(metric("tide_master_hard_pin_key_count"), before);
}

/* Soft pins (tide_store_rc, ABI 4) through the lease, PutStart and put_parts paths. */
static void
test_soft_pin_forwarded(void)
{
	soft_pin_check(sa, metrics_port, "it");
}

/* Objects into pieces (tide_store_batch_get_into_parts()), heap and local buffer. */
static void
test_get_parts(void)
{
	void *lb;
	size_t lblen;

	TIDE_UT_OK(tide_store_local_buffer(sb, &lb, &lblen));
	get_parts_check(sa, sb, "it", lblen >= (2u << 20) ? lb : NULL);
	get_parts_check(sb, sa, "it-heap", NULL);
}

/* Put and get sessions between the two stores (store_calls_it.h), writer's pieces
 * from its local buffer and from the heap; then a third store that closes with a put
 * session open (close revokes it). */
static void
test_sessions(void)
{
	struct tide_store *sc = NULL;
	void *lb;
	size_t lblen;

	TIDE_UT_OK(tide_store_local_buffer(sa, &lb, &lblen));
	session_check(sa, sb, "it", lblen >= (2u << 20) ? lb : NULL);
	session_check(sb, sa, "it-heap", NULL);
	TIDE_UT_OK(new_store(&sc, 0));
	CU_ASSERT_PTR_NOT_NULL_FATAL(sc);
	session_gone_check(sc, sb, "it");
}

/* Where an object of two replicas is (tide_store_batch_get_replicas()). */
static void
test_replicas(void)
{
	replicas_check(sa, sb, "it", tide_store_endpoint(sa), tide_store_endpoint(sb));
}

static void
test_preferred_segment(void)
{
	const char *epa = tide_store_endpoint(sa), *epb = tide_store_endpoint(sb);
	const char *list[2] = {"no-such-segment", epa};
	struct tide_store_rc rc = {.replica_num = 1};
	unsigned char v[512], out[512];
	char key[32], eps[4][64];
	const char *bk[1] = {key};
	const void *bb[1] = {v};
	size_t bl[1] = {sizeof(v)};
	int rcs[1];

	fill(v, sizeof(v), 31);
	for (int i = 0; i < 8; i++) {
		/* Written by sa, placed in sb's segment (a remote write), and back. */
		rc.preferred_segment = i % 2 ? epb : epa;
		snprintf(key, sizeof(key), "pref-%d", i);
		CU_ASSERT_EQUAL(tide_store_put(sa, key, v, sizeof(v), &rc), 0);
		CU_ASSERT_EQUAL_FATAL(replica_endpoints(key, eps, 4), 1);
		CU_ASSERT_STRING_EQUAL(eps[0], rc.preferred_segment);
		CU_ASSERT_EQUAL(tide_store_get_into(sb, key, out, sizeof(out)), 512);
		CU_ASSERT_EQUAL(memcmp(v, out, sizeof(v)), 0);
	}
	rc.preferred_segment = NULL;
	rc.preferred_segments = list;
	rc.n_preferred_segments = 2;
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "prefs-%d", i);
		CU_ASSERT_EQUAL(tide_store_batch_put_from(sb, bk, bb, bl, 1, &rc, rcs), 0);
		CU_ASSERT_EQUAL_FATAL(replica_endpoints(key, eps, 4), 1);
		CU_ASSERT_STRING_EQUAL(eps[0], epa);
	}
}

static void
test_ranges(void)
{
	enum { LA = 4096, LB = 1u << 20 };
	const char *keys[4] = {"rg-a", "rg-b", "rg-missing", "rg-c"};
	unsigned char *a = malloc(LA), *b = malloc(LB), c[100], *dst = calloc(1, 2u << 20);
	struct tide_store_rc ob = {.replica_num = 1, .preferred_segment = tide_store_endpoint(sb)};
	struct tide_store_frag fr[9];

	CU_ASSERT_FATAL(a != NULL && b != NULL && dst != NULL);
	fill(a, LA, 1);
	fill(b, LB, 2);
	fill(c, sizeof(c), 3);
	CU_ASSERT_EQUAL(tide_store_put(sa, "rg-a", a, LA, NULL), 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "rg-b", b, LB, &ob), 0);
	CU_ASSERT_EQUAL(tide_store_put(sb, "rg-c", c, sizeof(c), RC(2)), 0);
	memset(fr, 0, sizeof(fr));
	fr[0] = (struct tide_store_frag){0, 0, dst, 100, 0};
	fr[1] = (struct tide_store_frag){0, LA - 10, dst + 100, 10, 0};
	fr[2] = (struct tide_store_frag){1, 4096, dst + 200, 65536, 0};
	fr[3] = (struct tide_store_frag){1, LB - 300000, dst + 70000, 300000, 0};
	fr[4] = (struct tide_store_frag){0, LA - 10, dst + 400000, 11, 0}; /* 1 byte past the end */
	fr[5] = (struct tide_store_frag){2, 0, dst + 400100, 10, 0};       /* missing key */
	fr[6] = (struct tide_store_frag){7, 0, dst + 400200, 10, 0};       /* no such key index */
	fr[7] = (struct tide_store_frag){3, 1, dst + 400300, 99, 0};
	fr[8] = (struct tide_store_frag){1, LB, dst + 400400, 0, 0}; /* empty, at the end */
	CU_ASSERT_EQUAL(tide_store_get_into_ranges(sa, keys, 4, fr, 9), -EINVAL);
	CU_ASSERT_EQUAL(fr[0].result, 100);
	CU_ASSERT_EQUAL(fr[1].result, 10);
	CU_ASSERT_EQUAL(fr[2].result, 65536);
	CU_ASSERT_EQUAL(fr[3].result, 300000);
	CU_ASSERT_EQUAL(fr[4].result, -EINVAL);
	CU_ASSERT_EQUAL(fr[5].result, -ENOENT);
	CU_ASSERT_EQUAL(fr[6].result, -EINVAL);
	CU_ASSERT_EQUAL(fr[7].result, 99);
	CU_ASSERT_EQUAL(fr[8].result, 0);
	CU_ASSERT_EQUAL(memcmp(dst, a, 100), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 100, a + LA - 10, 10), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 200, b + 4096, 65536), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 70000, b + LB - 300000, 300000), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 400300, c + 1, 99), 0);
	/* Every fragment fine: 0; from the other store too. */
	CU_ASSERT_EQUAL(tide_store_get_into_ranges(sb, keys, 4, fr, 4), 0);
	/* Bad arguments leave the results alone. */
	fr[0].result = 12345;
	CU_ASSERT_EQUAL(tide_store_get_into_ranges(sa, keys, 0, fr, 1), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_get_into_ranges(sa, NULL, 4, fr, 1), -EINVAL);
	fr[0].dst = NULL;
	CU_ASSERT_EQUAL(tide_store_get_into_ranges(sa, keys, 4, fr, 1), -EINVAL);
	CU_ASSERT_EQUAL(fr[0].result, 12345);
	free(a);
	free(b);
	free(dst);
}

/*
 * A COMPLETE replica on a segment nobody serves, ahead of a good one: reads
 * fall back to the next replica (get_into_ranges and get_into).
 */
static void
test_ranges_replica_fallback(void)
{
	static const struct tide_mc_uuid ghost_client = {0x9057, 0x1}, ghost_seg = {0x9057, 0x2};
	const char *prefs[2] = {"ghost2", tide_store_endpoint(sa)};
	struct tide_mc_replicate_config cfg = {0};
	struct tide_mc_str pv[2];
	struct tide_mc_client *c;
	struct tide_mc_resp resp;
	unsigned char v[5000], out[5000];
	const char *keys[1] = {"fallback"};
	struct tide_store_frag fr[2] = {{0, 0, out, 1000, 0}, {0, 1000, out + 1000, 4000, 0}};
	char ep[64];
	int32_t ec = -1;
	size_t good = 0;

	c = mount_ghost(&ghost_client, &ghost_seg, "ghost2", 0x7e0000000000ull, 1u << 20, ep);
	/* PutStart as the ghost client: replicas on ghost2 first, then sa's segment. */
	pv[0].ptr = (char *)prefs[0];
	pv[0].len = strlen(prefs[0]);
	pv[1].ptr = (char *)prefs[1];
	pv[1].len = strlen(prefs[1]);
	cfg.replica_num = 2;
	cfg.preferred_segments.v = pv;
	cfg.preferred_segments.n = 2;
	CU_ASSERT_EQUAL_FATAL(
		tide_mc_client_put_start(c, &ghost_client, "fallback", sizeof(v), &cfg, &resp, &ec),
		0);
	CU_ASSERT_EQUAL_FATAL(ec, 0);
	CU_ASSERT_EQUAL_FATAL(resp.u.put_start.val.n, 2);
	fill(v, sizeof(v), 9);
	for (size_t i = 0; i < 2; i++) {
		const struct tide_mc_buffer_desc *bd = &resp.u.put_start.val.v[i].u.memory;

		/* sa's segment is this process's memory: write the good replica directly. */
		if (strcmp(bd->transport_endpoint.ptr, tide_store_endpoint(sa)) == 0) {
			memcpy((void *)(uintptr_t)bd->buffer_address, v, sizeof(v));
			good++;
		}
	}
	CU_ASSERT_EQUAL(good, 1);
	CU_ASSERT_STRING_EQUAL(resp.u.put_start.val.v[0].u.memory.transport_endpoint.ptr, ep);
	tide_mc_resp_free(&resp);
	CU_ASSERT_EQUAL(tide_mc_client_put_end(c, &ghost_client, "fallback", &ec), 0);
	CU_ASSERT_EQUAL(ec, 0);

	memset(out, 0, sizeof(out));
	CU_ASSERT_EQUAL(tide_store_get_into_ranges(sb, keys, 1, fr, 2), 0);
	CU_ASSERT_EQUAL(fr[0].result, 1000);
	CU_ASSERT_EQUAL(fr[1].result, 4000);
	CU_ASSERT_EQUAL(memcmp(out, v, sizeof(v)), 0);
	memset(out, 0, sizeof(out));
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "fallback", out, sizeof(out)), (int64_t)sizeof(v));
	CU_ASSERT_EQUAL(memcmp(out, v, sizeof(v)), 0);
	CU_ASSERT_EQUAL(tide_store_remove(sb, "fallback", true), 0);
	CU_ASSERT_EQUAL(tide_mc_client_unmount(c, &ghost_seg, &ghost_client, &ec), 0);
	tide_mc_client_close(c);
}

static void
test_batch_exist_remove(void)
{
	const char *keys[4] = {"bx-0", "bx-missing", "bx-2", "bx-3"};
	unsigned char v[10] = {1, 2, 3};
	int out[4], rcs[4];

	CU_ASSERT_EQUAL(tide_store_put(sa, "bx-0", v, sizeof(v), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_put(sb, "bx-2", v, sizeof(v), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "bx-3", v, sizeof(v), RC(2)), 0);
	/* bx-0 is read (leased): a non-forced remove is refused for it only. */
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "bx-0", v, sizeof(v)), 10);
	CU_ASSERT_EQUAL(tide_store_batch_remove(sa, keys, 4, false, rcs), -EBUSY);
	CU_ASSERT_EQUAL(rcs[0], -EBUSY);
	CU_ASSERT_EQUAL(rcs[1], -ENOENT);
	CU_ASSERT_EQUAL(rcs[2], 0);
	CU_ASSERT_EQUAL(rcs[3], 0);
	CU_ASSERT_EQUAL(tide_store_put(sb, "bx-2", v, sizeof(v), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "bx-3", v, sizeof(v), RC(2)), 0);
	/* Exists also leases the objects, as Mooncake's ExistKey. */
	CU_ASSERT_EQUAL(tide_store_batch_is_exist(sb, keys, 4, out), 0);
	CU_ASSERT_EQUAL(out[0], 1);
	CU_ASSERT_EQUAL(out[1], 0);
	CU_ASSERT_EQUAL(out[2], 1);
	CU_ASSERT_EQUAL(out[3], 1);
	CU_ASSERT_EQUAL(tide_store_batch_remove(sb, keys, 4, true, rcs), -ENOENT);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(rcs[1], -ENOENT);
	CU_ASSERT_EQUAL(rcs[2], 0);
	CU_ASSERT_EQUAL(rcs[3], 0);
	CU_ASSERT_EQUAL(tide_store_batch_is_exist(sa, keys, 4, out), 0);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(out[i], 0);
	CU_ASSERT_EQUAL(tide_store_batch_is_exist(sa, keys, 0, out), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_remove(sa, NULL, 1, true, rcs), -EINVAL);
}

static void
test_remove_by_regex(void)
{
	unsigned char v[8] = {7};
	const char *names[] = {"rx-a-1", "rx-a-2", "rx-a-33", "rx-b-1", "xrx-a-1"};

	for (int i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(tide_store_put(i % 2 ? sa : sb, names[i], v, sizeof(v), NULL), 0);
	CU_ASSERT_EQUAL(tide_store_remove_by_regex(sa, "^rx-a-[0-9]+$", true), 3);
	CU_ASSERT_EQUAL(tide_store_is_exist(sb, "rx-a-1"), 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(sb, "rx-b-1"), 1);
	CU_ASSERT_EQUAL(tide_store_is_exist(sb, "xrx-a-1"), 1);
	CU_ASSERT_EQUAL(tide_store_remove_by_regex(sb, "^rx-a-", true), 0);
	CU_ASSERT_EQUAL(tide_store_remove_by_regex(sb, "rx-", true), 2);
	CU_ASSERT_EQUAL(tide_store_remove_by_regex(sb, "(", true), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_remove_by_regex(sb, "", true), -EINVAL);
}

static void
test_register_buffers(void)
{
	enum { M = 1000 };
	static char pool[M * 8];

	CU_ASSERT_EQUAL(tide_store_register_buffer(sa, pool, 100), 0);
	CU_ASSERT_EQUAL(tide_store_register_buffer(sa, pool, 100), -EEXIST);
	CU_ASSERT_EQUAL(tide_store_register_buffer(sa, pool, 5), -EEXIST);
	CU_ASSERT_EQUAL(tide_store_register_buffer(sa, NULL, 100), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_register_buffer(sa, pool + 1, 0), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_unregister_buffer(sa, pool + 1), -ENOENT);
	CU_ASSERT_EQUAL(tide_store_unregister_buffer(sa, pool), 0);
	CU_ASSERT_EQUAL(tide_store_unregister_buffer(sa, pool), -ENOENT);
	/* Enough to grow the table several times; removal order differs from insertion. */
	for (int i = 0; i < M; i++)
		CU_ASSERT_EQUAL(tide_store_register_buffer(sa, pool + i * 8, 8), 0);
	for (int i = 0; i < M; i += 2)
		CU_ASSERT_EQUAL(tide_store_unregister_buffer(sa, pool + i * 8), 0);
	for (int i = 0; i < M; i++)
		CU_ASSERT_EQUAL(tide_store_register_buffer(sa, pool + i * 8, 8),
				i % 2 ? -EEXIST : 0);
	for (int i = M - 1; i >= 0; i--)
		CU_ASSERT_EQUAL(tide_store_unregister_buffer(sa, pool + i * 8), 0);
	CU_ASSERT_EQUAL(tide_store_unregister_buffer(sa, pool + 8), -ENOENT);
}

/* Pages of [p, p + len) the kernel reports resident (mincore). */
static size_t
resident_pages(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = len / pg, got = 0;
	unsigned char *v = calloc(n, 1);

	if (v == NULL || mincore(p, len, v) != 0) {
		free(v);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		got += v[i] & 1;
	free(v);
	return got;
}

static void
test_local_and_mapped_buffers(void)
{
	void *la = NULL, *lb = NULL, *m = NULL;
	size_t lla = 0, llb = 0, n = 3u << 20;
	double deadline = tide_ut_now_s() + 20;

	CU_ASSERT_EQUAL(tide_store_local_buffer(sa, &la, &lla), 0);
	CU_ASSERT_EQUAL(tide_store_local_buffer(sb, &lb, &llb), 0);
	CU_ASSERT_FATAL(la != NULL && lb != NULL);
	CU_ASSERT_EQUAL(lla, 16u << 20);
	CU_ASSERT_EQUAL(llb, 16u << 20);
	/* Nothing has touched sb's buffer yet: its idle-priority warm-up faults it
	 * in (the whole of it: under the 256 MiB bound), contents unchanged. */
	while (resident_pages(lb, llb) < llb / (size_t)sysconf(_SC_PAGESIZE) &&
	       tide_ut_now_s() < deadline)
		usleep(10 * 1000);
	CU_ASSERT_EQUAL(resident_pages(lb, llb), llb / (size_t)sysconf(_SC_PAGESIZE));
	CU_ASSERT_EQUAL(((const unsigned char *)lb)[llb - 1], 0);
	/* Staged in one store's local buffer, read into the other's. */
	fill(la, n, 17);
	CU_ASSERT_EQUAL(tide_store_put(sa, "lbuf", la, n, NULL), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "lbuf", (char *)lb + 4096, n), (int64_t)n);
	CU_ASSERT_EQUAL(memcmp(la, (char *)lb + 4096, n), 0);

	CU_ASSERT_EQUAL(tide_store_map_buffer(sb, 0, &m), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_map_buffer(sb, 1u << 20, &m), 0);
	CU_ASSERT_FATAL(m != NULL);
	CU_ASSERT_EQUAL(tide_store_register_buffer(sb, m, 1u << 20), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "lbuf", m, 1u << 20), -ENOBUFS);
	fill(m, 1u << 20, 18);
	CU_ASSERT_EQUAL(tide_store_put(sb, "mbuf", m, 1u << 20, RC(2)), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "mbuf", la, lla), 1 << 20);
	CU_ASSERT_EQUAL(memcmp(la, m, 1u << 20), 0);
	CU_ASSERT_EQUAL(tide_store_unregister_buffer(sb, m), 0);
	CU_ASSERT_EQUAL(tide_store_unmap_buffer(sb, m), 0);
	CU_ASSERT_EQUAL(tide_store_unmap_buffer(sb, m), -ENOENT);
	CU_ASSERT_EQUAL(tide_store_unmap_buffer(sb, la), -ENOENT);
	/* One left mapped: close unmaps it. */
	CU_ASSERT_EQUAL(tide_store_map_buffer(sa, 4096, &m), 0);
}

static void
test_health_and_unset(void)
{
	struct tide_store *s = NULL;
	char b[4] = {0};
	void *p;
	size_t l;
	int out[1];
	const char *k[1] = {"k"};
	struct tide_store_frag fr = {0, 0, b, 1, 0};

	CU_ASSERT_EQUAL(tide_store_health_check(NULL), 1);
	CU_ASSERT_EQUAL(tide_store_attached(NULL), 0);
	CU_ASSERT_EQUAL_FATAL(tide_store_create(&s), 0);
	CU_ASSERT_EQUAL(tide_store_health_check(s), 1);
	CU_ASSERT_EQUAL(tide_store_attached(s), 0);
	CU_ASSERT_EQUAL(tide_store_register_buffer(s, b, 4), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_unregister_buffer(s, b), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_local_buffer(s, &p, &l), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_map_buffer(s, 4096, &p), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_is_exist(s, k, 1, out), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_remove(s, k, 1, true, out), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_remove_by_regex(s, "k", true), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_get_into_ranges(s, k, 1, &fr, 1), -EINVAL);
	tide_store_close(s);
	CU_ASSERT_EQUAL(tide_store_health_check(sa), 0);
	CU_ASSERT_EQUAL(tide_store_health_check(sb), 0);
	CU_ASSERT_EQUAL(tide_store_attached(sa), 0);
}

/* Last: kills the master. */
static void
test_health_master_killed(void)
{
	CU_ASSERT_EQUAL(tide_store_health_check(sa), 0);
	it_master_stop(&master, 1);
	CU_ASSERT_EQUAL(tide_store_health_check(sa), 2);
	CU_ASSERT_EQUAL(tide_store_health_check(sb), 2);
	CU_ASSERT_TRUE(tide_store_is_exist(sa, "anything") < 0);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_client", suite_init, suite_clean);

	CU_add_test(s, "bad_args", test_bad_args);
	CU_add_test(s, "roundtrip_sizes", test_roundtrip_sizes);
	CU_add_test(s, "throughput_16m", test_throughput_16m);
	CU_add_test(s, "small_object_cost", test_small_object_cost);
	CU_add_test(s, "zero_length", test_zero_length);
	CU_add_test(s, "get_allocating", test_get_allocating);
	CU_add_test(s, "get_with", test_get_with);
	CU_add_test(s, "put_sizes_edges", test_put_sizes_edges);
	CU_add_test(s, "group_ids", test_group_ids);
	CU_add_test(s, "hard_pin_forwarded", test_hard_pin_forwarded);
	CU_add_test(s, "soft_pin_forwarded", test_soft_pin_forwarded);
	CU_add_test(s, "preferred_segment", test_preferred_segment);
	CU_add_test(s, "ranges", test_ranges);
	CU_add_test(s, "ranges_replica_fallback", test_ranges_replica_fallback);
	CU_add_test(s, "batch_exist_remove", test_batch_exist_remove);
	CU_add_test(s, "remove_by_regex", test_remove_by_regex);
	CU_add_test(s, "register_buffers", test_register_buffers);
	CU_add_test(s, "local_and_mapped_buffers", test_local_and_mapped_buffers);
	CU_add_test(s, "health_and_unset", test_health_and_unset);
	CU_add_test(s, "put_exists_is_success", test_put_exists_is_success);
	CU_add_test(s, "placed_in_other_segment", test_placed_in_other_segment);
	CU_add_test(s, "lease_puts", test_lease_puts);
	CU_add_test(s, "two_replicas", test_two_replicas);
	CU_add_test(s, "batch", test_batch);
	CU_add_test(s, "put_parts", test_put_parts);
	CU_add_test(s, "get_parts", test_get_parts);
	CU_add_test(s, "replicas", test_replicas);
	CU_add_test(s, "sessions", test_sessions);
	CU_add_test(s, "missing_and_remove", test_missing_and_remove);
	CU_add_test(s, "small_buffer", test_small_buffer);
	CU_add_test(s, "heartbeat_keeps_segment", test_heartbeat_keeps_segment);
	CU_add_test(s, "failed_write_revoked", test_failed_write_revoked);
	/* A failed allocation makes the master evict a few objects: keep it late. */
	CU_add_test(s, "no_space", test_no_space);
	CU_add_test(s, "remove_all", test_remove_all);
	CU_add_test(s, "health_master_killed", test_health_master_killed);
}

TIDE_UT_MAIN(register_tests)
