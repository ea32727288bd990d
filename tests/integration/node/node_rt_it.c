/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node runtime (engine/node/tide_node_rt.h) on real vdevs. An EAL
 * starts once per process, so every case runs its nodes in forked children
 * and checks their exit codes (and, for refusals, what they logged):
 * - two nodes over net_memif, each from its own node file: 8 MiB checked
 *   byte for byte across the link, no packet buffer left at destroy;
 * - the hooks: lcore_init once per lcore on that lcore with its own stack,
 *   lcore_poll on every lcore, max_lcores caps the node file's choice;
 * - refusals undo everything: TIDE_CSUM=offload on a port without the
 *   offloads (the log names the port's driver and each missing offload), a
 *   failing lcore_init (its errno comes back), no data address.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tide_lcore.h"
#include "tide_node_rt.h"
#include "tide_nodeenv.h"
#include "tide_ut.h"

#define PORT    7100
#define NBYTES  (8u << 20)
#define A_IP    "10.88.0.1"
#define A_IP_HO 0x0a580001u

static char sock_path[128];

static uint8_t
pat(uint64_t i)
{
	return (uint8_t)(i * 13 + (i >> 9));
}

/* A node file from KEY=VALUE strings only (NULL-terminated list). */
static int
load_env(struct tide_nodeenv *ne, const char *const *kv)
{
	char err[2048] = "";
	int rc = tide_nodeenv_load(ne, "/dev/null", (char *const *)kv, err, sizeof(err));

	if (rc != 0)
		fprintf(stderr, "node file refused:\n%s", err);
	return rc;
}

static int
wait_child(pid_t pid, int timeout_s)
{
	double deadline = tide_ut_now_s() + timeout_s;
	int st;

	while (tide_ut_now_s() < deadline) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -ETIMEDOUT;
}

/* ---- two nodes over memif ------------------------------------------------ */

struct xfer {
	bool server;
	struct tide_net_listener *ls;
	struct tide_net_conn *conn;
	uint64_t pos; /* bytes sent (client) or received and checked (server) */
	uint64_t bad;
	atomic_bool done;
	atomic_int err;
	bool fin_sent;
	uint64_t now; /* of the latest poll: callbacks have no clock of their own */
};

static size_t
x_recv(struct tide_net_conn *c, void *arg, const uint8_t *d, size_t n)
{
	struct xfer *x = arg;

	(void)c;
	for (size_t i = 0; i < n; i++)
		if (d[i] != pat(x->pos + i))
			x->bad++;
	x->pos += n;
	return n;
}

static void
x_event(struct tide_net_conn *c, void *arg, enum tide_net_event ev, int reason)
{
	struct xfer *x = arg;

	(void)c;
	if (ev == TIDE_NET_EV_PEER_CLOSED && !x->server) {
		/* The server closes once it has every byte: the client is done.
		 * (After its own close a connection reports nothing more.) */
		tide_net_close(x->conn, x->now);
		x->conn = NULL;
		atomic_store(&x->done, true);
	} else if (ev == TIDE_NET_EV_CLOSED) {
		if (reason != 0)
			atomic_store(&x->err, reason);
		x->conn = NULL;
		atomic_store(&x->done, true);
	}
}

static const struct tide_net_conn_cbs x_cbs = {.on_recv = x_recv, .on_event = x_event};

static int
x_accept(void *arg, struct tide_net_conn *conn)
{
	struct xfer *x = arg;

	x->conn = conn;
	tide_net_conn_set_cbs(conn, &x_cbs, x);
	return 0;
}

static int
x_init(void *arg, unsigned idx, struct tide_net_stack *st, uint64_t now)
{
	struct xfer *x = arg;

	(void)idx;
	if (x->server)
		return tide_net_listen(st, PORT, 4, x_accept, x, &x->ls);
	return tide_net_connect(st, A_IP_HO, PORT, &x_cbs, x, now, &x->conn);
}

static int
x_poll(void *arg, unsigned idx, uint64_t now)
{
	struct xfer *x = arg;
	static uint8_t chunk[65536];
	int work = 0;

	(void)idx;
	x->now = now;
	if (x->conn == NULL || x->fin_sent)
		return 0;
	if (x->server) {
		if (x->pos == NBYTES) {
			tide_net_close(x->conn, now);
			x->fin_sent = true;
			atomic_store(&x->done, true);
		}
		return 0;
	}
	while (x->pos < NBYTES) {
		size_t n = NBYTES - x->pos < sizeof(chunk) ? NBYTES - x->pos : sizeof(chunk);
		ssize_t k;

		for (size_t i = 0; i < n; i++)
			chunk[i] = pat(x->pos + i);
		k = tide_net_send(x->conn, chunk, n, now);
		if (k <= 0)
			break;
		x->pos += (uint64_t)k;
		work = 1;
	}
	return work;
}

/* One memif node; `to`/`from` carry the two-phase stop (DPDK 22.11 memif
 * crashes when one end is removed while the other still polls). */
static int
memif_node(bool server, int to, int from)
{
	char dev[256], ip[64], prefix[64];
	const char *kv[] = {dev,
			    ip,
			    "TIDE_DATA_NETMASK=255.255.255.0",
			    "TIDE_MTU=9000",
			    "TIDE_HUGEPAGES=off",
			    "TIDE_HUGEPAGE_MEM=128mb",
			    "TIDE_CSUM=elide",
			    "TIDE_IDLE=adaptive",
			    prefix,
			    server ? "TIDE_LCORES=1" : "TIDE_LCORES=0",
			    NULL};
	static struct tide_nodeenv ne;
	static struct xfer x;
	struct tide_node_rt_opts o = {
		.prog = "node_rt_it", .lcore_init = x_init, .lcore_poll = x_poll, .arg = &x};
	struct tide_node_rt *rt = NULL;
	double deadline;
	char b = 0;
	unsigned held;
	int rc;

	snprintf(dev, sizeof(dev),
		 "TIDE_DPDK_DEVICE=net_memif0,role=%s,socket=%s,socket-abstract=no,bsize=9216",
		 server ? "server" : "client", sock_path);
	snprintf(ip, sizeof(ip), "TIDE_DATA_IP=%s", server ? A_IP : "10.88.0.2");
	snprintf(prefix, sizeof(prefix), "TIDE_FILE_PREFIX=node-rt-it-%d", (int)getpid());
	if (load_env(&ne, kv) != 0)
		return 2;
	x.server = server;
	rc = tide_node_rt_start(&ne, &o, &rt);
	if (rc != 0 || rt == NULL)
		return 3;
	if (tide_node_rt_info(rt)->nlcores != 1 || strcmp(tide_node_rt_info(rt)->csum, "elided"))
		return 4;
	deadline = tide_ut_now_s() + 60;
	while (!atomic_load(&x.done) && tide_ut_now_s() < deadline)
		usleep(2000);
	usleep(50000); /* last ACKs and FINs */
	tide_node_rt_stop(rt);
	/* Two-phase: the server stops first, then the client, then both destroy. */
	if (server) {
		(void)!write(to, "s", 1);
		(void)!read(from, &b, 1);
	} else {
		(void)!read(from, &b, 1);
		(void)!write(to, "s", 1);
	}
	held = tide_node_rt_destroy(rt);
	if (!atomic_load(&x.done)) {
		fprintf(stderr, "%s: not done: %llu bytes, fin_sent %d\n",
			server ? "server" : "client", (unsigned long long)x.pos, x.fin_sent);
		return 5;
	}
	if (atomic_load(&x.err) != 0)
		return 6;
	if (x.pos != NBYTES || x.bad != 0)
		return 7;
	return held == 0 ? 0 : 8;
}

static void
test_two_memif_nodes(void)
{
	int ab[2], ba[2], rc_a, rc_b;
	pid_t a, b;

	snprintf(sock_path, sizeof(sock_path), "/tmp/node-rt-it-%d.sock", (int)getpid());
	unlink(sock_path);
	CU_ASSERT_FATAL(pipe(ab) == 0 && pipe(ba) == 0);
	a = fork();
	if (a == 0)
		exit(memif_node(true, ab[1], ba[0]));
	b = fork();
	if (b == 0)
		exit(memif_node(false, ba[1], ab[0]));
	rc_a = wait_child(a, 120);
	rc_b = wait_child(b, 120);
	if (rc_a != 0 || rc_b != 0)
		fprintf(stderr, "memif nodes: server exit %d, client exit %d\n", rc_a, rc_b);
	CU_ASSERT_EQUAL(rc_a, 0);
	CU_ASSERT_EQUAL(rc_b, 0);
	unlink(sock_path);
}

/* ---- hooks on two lcores ------------------------------------------------- */

struct hooks {
	atomic_int inits[TIDE_LCORE_MAX];
	atomic_uint_fast64_t polls[TIDE_LCORE_MAX];
	struct tide_net_stack *stacks[TIDE_LCORE_MAX];
	atomic_int wrong_thread;
	int fail_init; /* a negative errno lcore_init returns on lcore fail_idx */
	unsigned fail_idx;
	struct tide_node_rt *const *rtp; /* the caller's runtime pointer */
	atomic_int saw_null;             /* polls that found it NULL */
};

static int
h_init(void *arg, unsigned idx, struct tide_net_stack *st, uint64_t now)
{
	struct hooks *h = arg;
	struct tide_lcore *lc = tide_lcore_current();

	(void)now;
	if (lc == NULL || tide_lcore_index(lc) != idx || st == NULL)
		atomic_fetch_add(&h->wrong_thread, 1);
	h->stacks[idx] = st;
	atomic_fetch_add(&h->inits[idx], 1);
	return idx == h->fail_idx ? h->fail_init : 0;
}

static int
h_poll(void *arg, unsigned idx, uint64_t now)
{
	struct hooks *h = arg;
	struct tide_lcore *lc = tide_lcore_current();

	(void)now;
	if (lc == NULL || tide_lcore_index(lc) != idx)
		atomic_fetch_add(&h->wrong_thread, 1);
	/* Hooks may use the runtime: it is set before they run and stays set
	 * while any lcore runs, a failing start included. */
	if (*h->rtp == NULL)
		atomic_fetch_add(&h->saw_null, 1);
	atomic_fetch_add(&h->polls[idx], 1);
	return 0;
}

static int
ring_node(const char *csum, unsigned max_lcores, int fail_init, unsigned fail_idx, const char *ip)
{
	char csum_kv[64], prefix[64], ip_kv[64];
	const char *kv[] = {"TIDE_DPDK_DEVICE=net_ring0",
			    ip_kv,
			    "TIDE_HUGEPAGES=off",
			    "TIDE_HUGEPAGE_MEM=64mb",
			    "TIDE_LCORES=0-1",
			    "TIDE_IDLE=adaptive",
			    csum_kv,
			    prefix,
			    NULL};
	static struct tide_nodeenv ne;
	static struct hooks h;
	struct tide_node_rt_opts o = {.prog = "node_rt_it",
				      .max_lcores = max_lcores,
				      .lcore_init = h_init,
				      .lcore_poll = h_poll,
				      .arg = &h};
	static struct tide_node_rt *rt;
	const struct tide_node_rt_info *ri;
	unsigned want = max_lcores == 1 ? 1 : 2;
	double deadline;
	int rc;

	snprintf(csum_kv, sizeof(csum_kv), "TIDE_CSUM=%s", csum);
	snprintf(prefix, sizeof(prefix), "TIDE_FILE_PREFIX=node-rt-it-%d", (int)getpid());
	snprintf(ip_kv, sizeof(ip_kv), "TIDE_DATA_IP=%s", ip[0] != '\0' ? ip : A_IP);
	if (load_env(&ne, kv) != 0)
		return 2;
	if (ip[0] == '\0') {
		/* No data address (a caller that built its nodeenv by hand):
		 * refused before anything starts, *out untouched. */
		ne.data_ip_set = false;
		rt = (struct tide_node_rt *)&h; /* must come back NULL */
		rc = tide_node_rt_start(&ne, &o, &rt);
		return rc == -EINVAL && rt == NULL ? 0 : 3;
	}
	h.fail_init = fail_init;
	h.fail_idx = fail_idx;
	h.rtp = &rt;
	rc = tide_node_rt_start(&ne, &o, &rt);
	if (rc != 0) /* the errno, *out NULL, no hook saw it NULL while running */
		return rt == NULL && atomic_load(&h.saw_null) == 0 ? 100 + -rc : 4;
	ri = tide_node_rt_info(rt);
	if (ri->nlcores != want || ri->ip != 0x0a580001u || strcmp(ri->ip_str, "10.88.0.1"))
		return 5;
	deadline = tide_ut_now_s() + 10;
	for (unsigned i = 0; i < want; i++)
		while (atomic_load(&h.polls[i]) < 100 && tide_ut_now_s() < deadline)
			usleep(1000);
	tide_node_rt_stop(rt);
	for (unsigned i = 0; i < want; i++) {
		if (atomic_load(&h.inits[i]) != 1 || atomic_load(&h.polls[i]) < 100)
			return 6;
		if (tide_node_rt_stack(rt, i) != h.stacks[i])
			return 7;
	}
	if (want == 2 && h.stacks[0] == h.stacks[1])
		return 8;
	if (tide_node_rt_stack(rt, want) != NULL || atomic_load(&h.wrong_thread) != 0 ||
	    atomic_load(&h.saw_null) != 0)
		return 9;
	return tide_node_rt_destroy(rt) == 0 ? 0 : 10;
}

/* Run ring_node in a child; its stderr goes to `log` when non-NULL. */
static int
ring_child(const char *csum, unsigned max_lcores, int fail_init, unsigned fail_idx, const char *ip,
	   const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (log != NULL) {
			int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			if (fd >= 0)
				dup2(fd, 2);
		}
		exit(ring_node(csum, max_lcores, fail_init, fail_idx, ip));
	}
	return pid > 0 ? wait_child(pid, 60) : -1;
}

static void
test_hooks_two_lcores(void)
{
	CU_ASSERT_EQUAL(ring_child("auto", 0, 0, 0, A_IP, NULL), 0);
}

static void
test_max_lcores_caps(void)
{
	CU_ASSERT_EQUAL(ring_child("sw", 1, 0, 0, A_IP, NULL), 0);
}

static void
test_offload_refused_names_port_and_offload(void)
{
	char log[128], text[8192] = "";
	FILE *f;
	size_t n;

	snprintf(log, sizeof(log), "/tmp/node-rt-it-%d.log", (int)getpid());
	/* net_ring has no checksum offloads: start fails with -ENOTSUP. */
	CU_ASSERT_EQUAL(ring_child("offload", 0, 0, 0, A_IP, log), 100 + ENOTSUP);
	f = fopen(log, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "net_ring"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "tx-ipv4-checksum"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "TIDE_CSUM=offload"));
}

static void
test_failing_init_undoes(void)
{
	/* On lcore 1: lcore 0 already polls with its stack when the start fails. */
	CU_ASSERT_EQUAL(ring_child("auto", 0, -EADDRINUSE, 1, A_IP, NULL), 100 + EADDRINUSE);
	CU_ASSERT_EQUAL(ring_child("auto", 0, -EADDRINUSE, 0, A_IP, NULL), 100 + EADDRINUSE);
}

static void
test_no_data_ip_refused(void)
{
	CU_ASSERT_EQUAL(ring_child("auto", 0, 0, 0, "", NULL), 0);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("node_rt", NULL, NULL);

	CU_add_test(s, "two_memif_nodes", test_two_memif_nodes);
	CU_add_test(s, "hooks_two_lcores", test_hooks_two_lcores);
	CU_add_test(s, "max_lcores_caps", test_max_lcores_caps);
	CU_add_test(s, "offload_refused_names_port_and_offload",
		    test_offload_refused_names_port_and_offload);
	CU_add_test(s, "failing_init_undoes", test_failing_init_undoes);
	CU_add_test(s, "no_data_ip_refused", test_no_data_ip_refused);
}

TIDE_UT_MAIN(register_tests)
