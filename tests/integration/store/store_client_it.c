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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tide_mc_client.h"
#include "tide_store.h"
#include "tide_ut.h"

#define SEG_SIZE (64ull << 20)
/* Short enough that a store without a working heartbeat loses its segment
 * during the test (checked by heartbeat_keeps_segment). */
#define CLIENT_TTL_S "3"

static pid_t master_pid = -1;
static char master_addr[64];
static struct tide_store *sa, *sb;

static uint16_t
free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	uint16_t port = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &l) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int
start_master(void)
{
	const char *bin = getenv("STORE_IT_MASTER_BIN");
	struct tide_mc_client *c = NULL;
	char port_s[16];
	uint16_t port = free_port();

	if (bin == NULL || port == 0) {
		fprintf(stderr, "STORE_IT_MASTER_BIN not set or no free port\n");
		return -1;
	}
	snprintf(port_s, sizeof(port_s), "%u", port);
	master_pid = fork();
	if (master_pid < 0)
		return -1;
	if (master_pid == 0) {
		/* Never outlive the test, even if it crashes. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execl(bin, "mooncake_master", "--rpc_port", port_s, "--rpc_address", "127.0.0.1",
		      "--metrics_port", "0", "--metrics_host", "127.0.0.1", "--client_ttl",
		      CLIENT_TTL_S, "--log_level", "warn", (char *)NULL);
		_exit(127);
	}
	snprintf(master_addr, sizeof(master_addr), "127.0.0.1:%u", port);
	for (int i = 0; i < 100; i++) {
		if (tide_mc_client_connect_addr(master_addr, 1000, &c) == 0) {
			tide_mc_client_close(c);
			return 0;
		}
		sleep_ms(50);
	}
	return -1;
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
	int st;

	tide_store_close(sa);
	tide_store_close(sb);
	sa = sb = NULL;
	if (master_pid > 0) {
		kill(master_pid, SIGTERM);
		waitpid(master_pid, &st, 0);
		master_pid = -1;
	}
	return 0;
}

static void
fill(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (unsigned char)(x >> 16);
	}
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

static void
roundtrip(struct tide_store *w, struct tide_store *r, const char *key, size_t len)
{
	unsigned char *src = malloc(len ? len : 1), *dst = malloc(len + 16);

	CU_ASSERT_FATAL(src != NULL && dst != NULL);
	fill(src, len, (unsigned)len);
	memset(dst, 0xee, len + 16);
	CU_ASSERT_EQUAL(tide_store_put(w, key, src, len, 1), 0);
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

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
		t0 = now_s();
		CU_ASSERT_EQUAL(tide_store_put(sa, key, src, len, 1), 0);
		tput += now_s() - t0;
		t0 = now_s();
		CU_ASSERT_EQUAL(tide_store_get_into(sb, key, dst, len), (int64_t)len);
		tget += now_s() - t0;
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
	CU_ASSERT_EQUAL(tide_store_put(sa, "zero", &b, 0, 1), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "zero"), 0);
}

static void
test_put_exists_is_success(void)
{
	unsigned char a[100], b2[100], out[100];

	fill(a, sizeof(a), 7);
	fill(b2, sizeof(b2), 8);
	CU_ASSERT_EQUAL(tide_store_put(sa, "dup", a, sizeof(a), 1), 0);
	CU_ASSERT_EQUAL(tide_store_put(sb, "dup", b2, sizeof(b2), 1), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "dup", out, sizeof(out)), 100);
	CU_ASSERT_EQUAL(memcmp(out, a, sizeof(a)), 0); /* the first value stays */
}

static void
test_placed_in_other_segment(void)
{
	const char *epb = tide_store_endpoint(sb);
	unsigned char src[8192], dst[8192];
	char key[32], eps[4][64];
	int found = 0;

	CU_ASSERT_NOT_EQUAL(strcmp(tide_store_endpoint(sa), epb), 0);
	for (int i = 0; i < 64 && !found; i++) {
		snprintf(key, sizeof(key), "other-%d", i);
		fill(src, sizeof(src), (unsigned)i + 100);
		CU_ASSERT_EQUAL_FATAL(tide_store_put(sa, key, src, sizeof(src), 1), 0);
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
}

static void
test_two_replicas(void)
{
	unsigned char src[300000], dst[300000];
	size_t n;
	char eps[4][64];

	fill(src, sizeof(src), 2);
	CU_ASSERT_EQUAL(tide_store_put(sb, "two", src, sizeof(src), 2), 0);
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
	CU_ASSERT_EQUAL(tide_store_put(sb, "three", src, 10, 3), 0);
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
		tide_store_batch_put_from(sa, keys, (const void *const *)src, lens, N, 2, rcs), 0);
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
		tide_store_batch_put_from(sb, keys, (const void *const *)src, lens, N, 1, rcs), 0);
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

static void
test_missing_and_remove(void)
{
	unsigned char src[64], dst[64];

	CU_ASSERT_EQUAL(tide_store_get_into(sa, "nope", dst, sizeof(dst)), -ENOENT);
	CU_ASSERT_EQUAL(tide_store_get_size(sa, "nope"), -ENOENT);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "nope"), 0);
	CU_ASSERT_EQUAL(tide_store_remove(sa, "nope", false), -ENOENT);

	fill(src, sizeof(src), 3);
	CU_ASSERT_EQUAL(tide_store_put(sa, "rm", src, sizeof(src), 1), 0);
	CU_ASSERT_EQUAL(tide_store_remove(sb, "rm", false), 0); /* never read: no lease */
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "rm"), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "rm", dst, sizeof(dst)), -ENOENT);

	CU_ASSERT_EQUAL(tide_store_put(sa, "rm2", src, sizeof(src), 1), 0);
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
	CU_ASSERT_EQUAL(tide_store_put(sa, "small", src, sizeof(src), 1), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "small", dst, 999), -ENOBUFS);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "small", dst, 1000), 1000);
}

static void
test_no_space(void)
{
	size_t len = SEG_SIZE + 4096;
	unsigned char *src = calloc(1, len);

	CU_ASSERT_FATAL(src != NULL);
	CU_ASSERT_EQUAL(tide_store_put(sa, "huge", src, len, 1), -ENOSPC);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "huge"), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "huge", src, len), -ENOENT);
	free(src);
	CU_ASSERT_STRING_EQUAL(tide_store_strerror(-ENOSPC),
			       "no space in any segment (NO_AVAILABLE_HANDLE)");
}

/*
 * A third segment is mounted whose transfer-engine endpoint does not answer:
 * a put with three replicas must place one there, fail its write and revoke.
 */
static void
test_failed_write_revoked(void)
{
	static const struct tide_mc_uuid fake_client = {0x5eed, 0x1}, fake_seg = {0x5eed, 0x2};
	uint16_t dead = free_port(); /* nothing listens there once free_port returns */
	struct tide_mc_client *c = NULL;
	struct tide_mc_segment seg = {0};
	unsigned char src[4096], dst[4096];
	char ep[64];
	int32_t ec = -1;

	snprintf(ep, sizeof(ep), "127.0.0.1:%u", dead);
	seg.id = fake_seg;
	seg.name.ptr = (char *)"ghost";
	seg.name.len = 5;
	seg.base = 0x7f0000000000ull;
	seg.size = SEG_SIZE;
	seg.te_endpoint.ptr = ep;
	seg.te_endpoint.len = strlen(ep);
	seg.protocol.ptr = (char *)"tcp";
	seg.protocol.len = 3;
	CU_ASSERT_EQUAL_FATAL(tide_mc_client_connect_addr(master_addr, 0, &c), 0);
	CU_ASSERT_EQUAL(tide_mc_client_mount(c, &seg, &fake_client, &ec), 0);
	CU_ASSERT_EQUAL(ec, 0);

	fill(src, sizeof(src), 5);
	CU_ASSERT_TRUE(tide_store_put(sa, "ghosted", src, sizeof(src), 3) < 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ghosted"), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(sb, "ghosted", dst, sizeof(dst)), -ENOENT);
	{
		const char *bk[2] = {"ghost-b0", "ghost-b1"};
		const void *bb[2] = {src, src};
		size_t bl[2] = {100, sizeof(src)};
		int brc[2];

		CU_ASSERT_TRUE(tide_store_batch_put_from(sb, bk, bb, bl, 2, 3, brc) < 0);
		CU_ASSERT_TRUE(brc[0] < 0 && brc[1] < 0);
		CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ghost-b0"), 0);
		CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ghost-b1"), 0);
	}
	/* The key is free again: a put the ghost cannot take part in succeeds. */
	CU_ASSERT_EQUAL(tide_mc_client_unmount(c, &fake_seg, &fake_client, &ec), 0);
	CU_ASSERT_EQUAL(ec, 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "ghosted", src, sizeof(src), 2), 0);
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
	CU_ASSERT_EQUAL(tide_store_put(sb, "hb", src, sizeof(src), 2), 0);
	sleep_ms(5000);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "hb"), 1);
	/* Both segments are still mounted. */
	CU_ASSERT_EQUAL(tide_store_put(sa, "hb2", src, sizeof(src), 2), 0);
	CU_ASSERT_EQUAL(replica_endpoints("hb2", eps, 4), 2);
	CU_ASSERT_EQUAL(tide_store_get_into(sa, "hb", dst, sizeof(dst)), 2048);
	CU_ASSERT_EQUAL(memcmp(src, dst, sizeof(dst)), 0);
}

static void
test_remove_all(void)
{
	unsigned char src[16] = {1};

	CU_ASSERT_EQUAL(tide_store_put(sa, "ra-1", src, sizeof(src), 1), 0);
	CU_ASSERT_EQUAL(tide_store_put(sa, "ra-2", src, sizeof(src), 1), 0);
	CU_ASSERT_TRUE(tide_store_remove_all(sb, true) >= 2);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ra-1"), 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(sa, "ra-2"), 0);
}

static void
test_bad_args(void)
{
	struct tide_store *s = NULL;
	struct tide_store_cfg cfg = {0};
	char b[4];

	CU_ASSERT_EQUAL(tide_store_create(NULL), -EINVAL);
	CU_ASSERT_EQUAL_FATAL(tide_store_create(&s), 0);
	CU_ASSERT_EQUAL(tide_store_put(s, "k", b, 4, 1), -EINVAL); /* not set up */
	CU_ASSERT_EQUAL(tide_store_setup(s, &cfg), -EINVAL);
	cfg.local_hostname = "127.0.0.1";
	cfg.metadata_server = "P2PHANDSHAKE";
	cfg.master_server_addr = "127.0.0.1:1"; /* nobody listens */
	CU_ASSERT_TRUE(tide_store_setup(s, &cfg) < 0);
	CU_ASSERT_STRING_EQUAL(tide_store_endpoint(s), "");
	tide_store_close(s);
	CU_ASSERT_EQUAL(tide_store_put(sa, "", b, 4, 1), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_put(sa, "k", b, 4, 0), -EINVAL);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_client", suite_init, suite_clean);

	CU_add_test(s, "bad_args", test_bad_args);
	CU_add_test(s, "roundtrip_sizes", test_roundtrip_sizes);
	CU_add_test(s, "throughput_16m", test_throughput_16m);
	CU_add_test(s, "zero_length", test_zero_length);
	CU_add_test(s, "put_exists_is_success", test_put_exists_is_success);
	CU_add_test(s, "placed_in_other_segment", test_placed_in_other_segment);
	CU_add_test(s, "two_replicas", test_two_replicas);
	CU_add_test(s, "batch", test_batch);
	CU_add_test(s, "missing_and_remove", test_missing_and_remove);
	CU_add_test(s, "small_buffer", test_small_buffer);
	CU_add_test(s, "heartbeat_keeps_segment", test_heartbeat_keeps_segment);
	CU_add_test(s, "failed_write_revoked", test_failed_write_revoked);
	/* A failed allocation makes the master evict a few objects: keep it late. */
	CU_add_test(s, "no_space", test_no_space);
	CU_add_test(s, "remove_all", test_remove_all);
}

TIDE_UT_MAIN(register_tests)
