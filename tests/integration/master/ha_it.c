/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_master --enable_ha against a real etcd: three masters elect one
 * leader (master_view = its address, only its RPC port accepts, /health says
 * who leads); kill -9 of the leader and a clean stop of the next each hand
 * over to another within a bound (printed); etcd stopped: the leader stops
 * serving within its lease; etcd back: a leader again.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_fixture.h"
#include "tide_etcd.h"
#include "tide_store.h"
#include "tide_ut.h"

#define N   3
#define KEY "mooncake-store/mooncake_cluster/master_view"

static struct etcd_fixture fx;
static pid_t pid[N];
static uint16_t rpc_port[N], http_port[N];

static void
start_master(int i)
{
	char ep[96], rp[32], hp[32];

	snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", fx.endpoint);
	snprintf(rp, sizeof(rp), "--rpc_port=%u", rpc_port[i]);
	snprintf(hp, sizeof(hp), "--metrics_port=%u", http_port[i]);
	pid[i] = fork();
	if (pid[i] == 0) {
		execl(MOONCAKE_MASTER, "mooncake_master", "--enable_ha", ep, rp, hp,
		      "--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1", "--log_level=warn",
		      (char *)NULL);
		_exit(127);
	}
}

static void
stop_master(int i, int sig)
{
	if (pid[i] > 0) {
		kill(pid[i], sig);
		waitpid(pid[i], NULL, 0);
		pid[i] = -1;
	}
}

static bool
accepts(uint16_t port)
{
	int fd = tide_ut_connect_from("127.0.0.1", "127.0.0.1", port, 500);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* GET path on the admin port; the body into out. */
static int
http_get(uint16_t port, const char *path, char *out, size_t n)
{
	char req[128];
	size_t got = 0;
	ssize_t r;
	int fd = tide_ut_connect_from("127.0.0.1", "127.0.0.1", port, 2000);
	char *body;

	if (fd < 0)
		return fd;
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	(void)!write(fd, req, strlen(req));
	while (got < n - 1 && (r = read(fd, out + got, n - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(fd);
	body = strstr(out, "\r\n\r\n");
	if (body == NULL)
		return -EPROTO;
	memmove(out, body + 4, strlen(body + 4) + 1);
	return 0;
}

/* The leader named in etcd (index), or -1. */
static int
leader_in_etcd(void)
{
	struct tide_etcd *e = NULL;
	struct tide_etcd_kv kv;
	int who = -1;

	if (tide_etcd_open(fx.endpoint, 1000, &e) != 0)
		return -1;
	if (tide_etcd_get(e, KEY, strlen(KEY), &kv, NULL) == 0) {
		for (int i = 0; i < N; i++) {
			char want[32];

			snprintf(want, sizeof(want), "127.0.0.1:%u", rpc_port[i]);
			if (strcmp(kv.value, want) == 0)
				who = i;
		}
		tide_etcd_kv_clear(&kv);
	}
	tide_etcd_close(e);
	return who;
}

/* Wait (deadline) until exactly one live master serves and etcd names it. */
static int
wait_leader(double deadline_s, int not )
{
	double deadline = tide_ut_now_s() + deadline_s;

	while (tide_ut_now_s() < deadline) {
		int who = leader_in_etcd();

		if (who >= 0 && who != not &&pid[who] > 0 && accepts(rpc_port[who]))
			return who;
		usleep(20 * 1000);
	}
	return -1;
}

static int
suite_init(void)
{
	if (etcd_fixture_start(&fx) != 0)
		return -1;
	for (int i = 0; i < N; i++) {
		rpc_port[i] = etcd_fixture_free_port();
		http_port[i] = etcd_fixture_free_port();
		start_master(i);
	}
	return 0;
}

static int
suite_clean(void)
{
	for (int i = 0; i < N; i++)
		stop_master(i, SIGKILL);
	etcd_fixture_destroy(&fx);
	return 0;
}

static void
test_one_leader(void)
{
	char body[2048], want[64];
	int who = wait_leader(15, -1), standbys = 0;

	CU_ASSERT_FATAL(who >= 0);
	TIDE_UT_OK(http_get(http_port[who], "/health", body, sizeof(body)));
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"role\":\"leader\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"ha_state\":\"serving\""));
	snprintf(want, sizeof(want), "\"leader_address\":\"127.0.0.1:%u\"", rpc_port[who]);
	for (int i = 0; i < N; i++) {
		if (i == who)
			continue;
		CU_ASSERT(!accepts(rpc_port[i])); /* standbys refuse RPC, as stock's */
		/* A standby may still be starting (its admin port not up yet), or have lost
		 * the race and not yet read the key: it names the leader within a deadline. */
		double deadline = tide_ut_now_s() + 15;
		int hr;

		do {
			hr = http_get(http_port[i], "/health", body, sizeof(body));
		} while ((hr != 0 || strstr(body, want) == NULL) && tide_ut_now_s() < deadline &&
			 usleep(50 * 1000) == 0);
		TIDE_UT_OK(hr);
		CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"role\":\"standby\""));
		CU_ASSERT_PTR_NOT_NULL(strstr(body, want));
		TIDE_UT_OK(http_get(http_port[i], "/role", body, sizeof(body)));
		CU_ASSERT_STRING_EQUAL(body, "standby");
		standbys++;
	}
	CU_ASSERT_EQUAL(standbys, N - 1);
}

static void
test_failover_after_kill_and_stop(void)
{
	int old = wait_leader(5, -1), next, third;
	double t0, t;

	CU_ASSERT_FATAL(old >= 0);
	t0 = tide_ut_now_s();
	stop_master(old, SIGKILL); /* its lease must expire first */
	next = wait_leader(15, old);
	t = tide_ut_now_s() - t0;
	CU_ASSERT_FATAL(next >= 0);
	printf("\n  failover after kill -9 of the leader: %.2f s (lease 2 s)\n", t);
	CU_ASSERT(t < 10.0);
	/* A clean stop revokes the lease: the last one takes over at once. */
	t0 = tide_ut_now_s();
	stop_master(next, SIGTERM);
	third = wait_leader(15, next);
	t = tide_ut_now_s() - t0;
	CU_ASSERT_FATAL(third >= 0);
	printf("  failover after SIGTERM of the leader: %.2f s\n", t);
	CU_ASSERT(t < 5.0);
	/* The stopped ones come back as standbys. */
	start_master(old);
	start_master(next);
}

static void
test_etcd_down_and_back(void)
{
	int who = wait_leader(15, -1);
	double deadline;
	bool refused = false;

	CU_ASSERT_FATAL(who >= 0);
	etcd_fixture_stop(&fx);
	/* No renewal: the leader stops serving within its lease (2 s) and a margin. */
	deadline = tide_ut_now_s() + 8;
	while (!refused && tide_ut_now_s() < deadline) {
		refused = !accepts(rpc_port[who]);
		usleep(50 * 1000);
	}
	CU_ASSERT(refused);
	for (int i = 0; i < N; i++)
		if (pid[i] > 0)
			CU_ASSERT(!accepts(rpc_port[i]));
	CU_ASSERT_EQUAL_FATAL(etcd_fixture_restart(&fx), 0);
	CU_ASSERT(wait_leader(20, -1) >= 0);
}

/* A store client given etcd://... finds the leader, and after a kill -9 of it
 * follows the new one: a get issued at the kill waits for the next leader and
 * reads what the old one acknowledged (the table is replicated through
 * etcd), and puts go on once the client found it. */
static void
test_client_follows_the_leader(void)
{
	struct tide_store *s = NULL;
	struct tide_store_cfg cfg = {0};
	struct tide_store_rc rc = {.replica_num = 1};
	char master[96], val[4096], back[4096];
	int who = wait_leader(15, -1), next, r = -1;
	double t0, t;

	CU_ASSERT_FATAL(who >= 0);
	memset(val, 'v', sizeof(val));
	snprintf(master, sizeof(master), "etcd://127.0.0.1:1;%s", fx.endpoint);
	cfg.local_hostname = "127.0.0.1";
	cfg.metadata_server = "P2PHANDSHAKE";
	cfg.protocol = "tcp";
	cfg.master_server_addr = master;
	cfg.local_buffer_size = 1u << 20;
	cfg.global_segment_size = 16u << 20;
	cfg.agent = TIDE_STORE_AGENT_OFF;
	TIDE_UT_OK(tide_store_create(&s));
	TIDE_UT_OK(tide_store_setup(s, &cfg));
	TIDE_UT_OK(tide_store_put(s, "before", val, sizeof(val), &rc));
	CU_ASSERT_EQUAL(tide_store_get_into(s, "before", back, sizeof(back)),
			(int64_t)sizeof(back));
	t0 = tide_ut_now_s();
	stop_master(who, SIGKILL);
	/* A read is idempotent: the client waits for the next leader and asks it. */
	memset(back, 0, sizeof(back));
	CU_ASSERT_EQUAL(tide_store_get_into(s, "before", back, sizeof(back)),
			(int64_t)sizeof(back));
	CU_ASSERT(memcmp(back, val, sizeof(val)) == 0);
	printf("\n  a get issued at kill -9 of the leader returned after %.2f s",
	       tide_ut_now_s() - t0);
	next = wait_leader(15, who);
	CU_ASSERT_FATAL(next >= 0);
	/* Calls fail until the client has found the new leader and re-mounted. */
	while (tide_ut_now_s() - t0 < 20 &&
	       (r = tide_store_put(s, "after", val, sizeof(val), &rc)) != 0)
		usleep(50 * 1000);
	t = tide_ut_now_s() - t0;
	TIDE_UT_OK(r);
	printf("\n  client put again %.2f s after kill -9 of the leader\n", t);
	memset(back, 0, sizeof(back));
	CU_ASSERT_EQUAL(tide_store_get_into(s, "after", back, sizeof(back)), (int64_t)sizeof(back));
	CU_ASSERT(memcmp(back, val, sizeof(val)) == 0);
	/* The table is replicated: what the old leader acknowledged is still there. */
	memset(back, 0, sizeof(back));
	CU_ASSERT_EQUAL(tide_store_get_into(s, "before", back, sizeof(back)),
			(int64_t)sizeof(back));
	CU_ASSERT(memcmp(back, val, sizeof(val)) == 0);
	tide_store_close(s);
	start_master(who);
	/* No leader in etcd: setup says so instead of hanging. */
	TIDE_UT_OK(tide_store_create(&s));
	snprintf(master, sizeof(master), "etcd://127.0.0.1:1");
	CU_ASSERT_NOT_EQUAL(tide_store_setup(s, &cfg), 0);
	tide_store_close(s);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("master_ha_it", suite_init, suite_clean);

	CU_add_test(s, "one_leader", test_one_leader);
	CU_add_test(s, "failover_after_kill_and_stop", test_failover_after_kill_and_stop);
	CU_add_test(s, "etcd_down_and_back", test_etcd_down_and_back);
	CU_add_test(s, "client_follows_the_leader", test_client_follows_the_leader);
}

TIDE_UT_MAIN(register_tests)
