/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two processes joined by net_memif (server and client over a UNIX socket and
 * shared memory), each with its own EAL. The parent sends numbered frames, the
 * child echoes them, the parent checks order and content. Teardown is two-phase
 * (a "bye" frame answered by "bye-ack" after the child stopped polling), as it
 * had to be before bursts held memif's lock (a client that vanished while the
 * server polled could unmap the rings under a burst: the third case). Both ends
 * also check the port's checksum policy (TIDE_CSUM): elision allowed, no
 * offloads. A second case closes both ends at the same instant, many times
 * over, in fresh processes: a port closed while its peer's disconnect is
 * handled on the EAL interrupt thread must not crash either side. A third
 * holds the port's burst lock (memif_intr.h) while the peer leaves: the
 * disconnect must leave the rings mapped until the lock is released (a burst
 * in progress finishes on mapped memory), unmap them afterwards, and later
 * bursts must find the link down and return nothing.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_spinlock.h>

#include "memif_intr.h"
#include "memif_it.h"
#include "tide_eth.h"
#include "tide_eth_net.h"
#include "tide_ut.h"

#define NFRAMES   20000
#define KIND_DATA 1
#define KIND_BYE  2
#define KIND_ACK  3

struct frame {
	uint32_t kind;
	uint32_t seq;
	uint8_t body[56];
};

static char sock_path[108];

static int
eal_up_args(const char *role, const char *prefix, const char *devargs, const char *eal_args)
{
	return memif_it_eal_up("eth_memif_it", sock_path, role, prefix, devargs, eal_args);
}

static int
eal_up(const char *role, const char *prefix)
{
	return eal_up_args(role, prefix, "", NULL);
}

static int
send_frame(struct tide_eth_port *p, uint32_t kind, uint32_t seq)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(tide_eth_port_pool(p));
	struct frame *f;

	if (m == NULL)
		return -ENOMEM;
	f = (struct frame *)rte_pktmbuf_append(m, sizeof(*f));
	f->kind = kind;
	f->seq = seq;
	for (size_t i = 0; i < sizeof(f->body); i++)
		f->body[i] = (uint8_t)(seq + i);
	if (tide_eth_tx(p, 0, &m, 1) != 1) {
		rte_pktmbuf_free(m);
		return -EAGAIN;
	}
	return 0;
}

/*
 * TIDE_CSUM on a memif port: elision is allowed (shared memory on one host),
 * the device has no checksum offload, so auto is software and offload is
 * refused. 0, or the first check that failed.
 */
static int
memif_checksum_modes(struct tide_eth_port *p)
{
	struct tide_eth_csum_plan plan;
	struct tide_eth_port_caps caps;

	tide_eth_port_caps(p, &caps);
	if (strcmp(caps.driver, "net_memif") != 0 || strcmp(tide_eth_port_name(p), "net_memif0"))
		return 1;
	if (tide_eth_port_csum(p, TIDE_ETH_CSUM_ELIDE, &plan) != 0 || !plan.elide)
		return 2;
	if (tide_eth_port_csum(p, TIDE_ETH_CSUM_AUTO, &plan) != 0 || plan.elide || plan.tx_ip ||
	    plan.tx_tcp || plan.rx_ip || plan.rx_tcp)
		return 3;
	if (tide_eth_port_csum(p, TIDE_ETH_CSUM_OFFLOAD, &plan) != -ENOTSUP)
		return 4;
	return 0;
}

/* Child: memif client, echoes every data frame until "bye". */
static int
child_main(void)
{
	struct tide_eth_port *p = NULL;
	struct rte_mbuf *pkts[32];
	uint64_t deadline = memif_it_now_ms() + 60000;
	bool bye = false;

	/* The server creates the socket; wait for it rather than racing. */
	while (access(sock_path, F_OK) != 0 && memif_it_now_ms() < deadline)
		usleep(10000);
	if (eal_up("client", "tide-memif-it-c") != 0)
		return 10;
	if (tide_eth_port_open("net_memif0", NULL, &p) != 0)
		return 11;
	if (memif_checksum_modes(p) != 0)
		return 20 + memif_checksum_modes(p);
	if (!memif_it_wait_link(p, 10000))
		return 12;
	while (!bye && memif_it_now_ms() < deadline) {
		uint16_t n = tide_eth_rx(p, 0, pkts, 32), k;

		for (uint16_t i = 0; i < n; i++) {
			const struct frame *f = rte_pktmbuf_mtod(pkts[i], const struct frame *);

			if (f->kind == KIND_BYE)
				bye = true;
		}
		/* Echo data frames in place; free the bye. */
		k = bye ? 0 : tide_eth_tx(p, 0, pkts, n);
		if (k < n)
			rte_pktmbuf_free_bulk(pkts + k, n - k);
	}
	/* Stop polling RX, then tell the server it may stop too. */
	while (send_frame(p, KIND_ACK, 0) != 0 && memif_it_now_ms() < deadline)
		;
	usleep(200000);
	tide_eth_port_close(p);
	tide_eal_fini();
	return bye ? 0 : 13;
}

static void
test_memif_two_processes_echo(void)
{
	struct tide_eth_port *p = NULL;
	struct rte_mbuf *pkts[32];
	uint32_t sent = 0, got = 0, bad = 0;
	uint64_t deadline;
	bool acked = false;
	int status = -1;
	pid_t child;

	snprintf(sock_path, sizeof(sock_path), "/tmp/tide-memif-it-%d.sock", (int)getpid());
	unlink(sock_path);
	/* Fork before either EAL exists: an EAL cannot be initialised twice in
	 * one address space, and the child must own a fresh one. */
	child = fork();
	if (child == 0)
		_exit(child_main());
	CU_ASSERT_FATAL(child > 0);
	TIDE_UT_OK(eal_up("server", "tide-memif-it-s"));
	TIDE_UT_OK(tide_eth_port_open("net_memif0", NULL, &p));
	if (p == NULL) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return;
	}
	CU_ASSERT_EQUAL(memif_checksum_modes(p), 0);
	CU_ASSERT_TRUE(memif_it_wait_link(p, 15000));
	deadline = memif_it_now_ms() + 60000;
	while (got < NFRAMES && memif_it_now_ms() < deadline) {
		uint16_t n;

		for (int i = 0; i < 32 && sent < NFRAMES && sent - got < 256; i++) {
			if (send_frame(p, KIND_DATA, sent) != 0)
				break;
			sent++;
		}
		n = tide_eth_rx(p, 0, pkts, 32);
		for (uint16_t i = 0; i < n; i++) {
			const struct frame *f = rte_pktmbuf_mtod(pkts[i], const struct frame *);

			if (f->kind != KIND_DATA || f->seq != got ||
			    f->body[5] != (uint8_t)(got + 5))
				bad++;
			got++;
		}
		rte_pktmbuf_free_bulk(pkts, n);
	}
	CU_ASSERT_EQUAL(got, NFRAMES);
	CU_ASSERT_EQUAL(bad, 0);
	/* Two-phase teardown: bye, then wait for the ack before stopping. */
	while (send_frame(p, KIND_BYE, 0) != 0 && memif_it_now_ms() < deadline)
		;
	while (!acked && memif_it_now_ms() < deadline) {
		uint16_t n = tide_eth_rx(p, 0, pkts, 32);

		for (uint16_t i = 0; i < n; i++)
			if (rte_pktmbuf_mtod(pkts[i], const struct frame *)->kind == KIND_ACK)
				acked = true;
		rte_pktmbuf_free_bulk(pkts, n);
	}
	CU_ASSERT_TRUE(acked);
	tide_eth_port_close(p);
	if (!acked)
		kill(child, SIGKILL);
	CU_ASSERT_EQUAL(waitpid(child, &status, 0), child);
	CU_ASSERT_TRUE(WIFEXITED(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	tide_eal_fini();
	unlink(sock_path);
}

#define RACE_ROUNDS 24

/* One end of a close race: bring the port up, say so on `ready`, wait for
 * the go byte on `go`, then close and exit at once. 0 or a step number. */
static int
race_end(const char *role, int round, int ready, int go)
{
	struct tide_eth_port *p = NULL;
	uint64_t deadline = memif_it_now_ms() + 30000;
	char prefix[64], b = 'r';

	snprintf(prefix, sizeof(prefix), "tide-memif-race-%s-%d-%d", role, (int)getppid(), round);
	if (strcmp(role, "client") == 0)
		while (access(sock_path, F_OK) != 0 && memif_it_now_ms() < deadline)
			usleep(1000);
	if (eal_up(role, prefix) != 0)
		return 2;
	if (tide_eth_port_open("net_memif0", NULL, &p) != 0)
		return 3;
	if (!memif_it_wait_link(p, 15000))
		return 4;
	if (write(ready, &b, 1) != 1 || read(go, &b, 1) != 1)
		return 5;
	/* Stagger by a few tens of microseconds, differently each round, so
	 * the two closes overlap at many relative offsets. */
	if (strcmp(role, "server") == 0)
		usleep((useconds_t)(round % 8) * 25);
	if (tide_eth_port_close(p) != 0)
		return 6;
	tide_eal_fini();
	return 0;
}

static pid_t
race_spawn(const char *role, int round, int ready, int go)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(race_end(role, round, ready, go));
	return pid;
}

static void
test_memif_close_races_peer_exit(void)
{
	unsigned crashed = 0, failed = 0;

	snprintf(sock_path, sizeof(sock_path), "/tmp/tide-memif-race-%d.sock", (int)getpid());
	for (int r = 0; r < RACE_ROUNDS; r++) {
		int ready[2], go[2], st[2] = {-1, -1};
		pid_t pid[2];
		char b;

		unlink(sock_path);
		CU_ASSERT_FATAL(pipe(ready) == 0 && pipe(go) == 0);
		pid[0] = race_spawn("server", r, ready[1], go[0]);
		pid[1] = race_spawn("client", r, ready[1], go[0]);
		CU_ASSERT_FATAL(pid[0] > 0 && pid[1] > 0);
		close(ready[1]);
		close(go[0]);
		/* Both up (or one died: read returns 0), then release both at once. */
		if (read(ready[0], &b, 1) == 1 && read(ready[0], &b, 1) == 1) {
			char two[2] = {'g', 'g'};

			CU_ASSERT_EQUAL(write(go[1], two, 2), 2);
		}
		close(go[1]);
		close(ready[0]);
		for (int i = 0; i < 2; i++) {
			CU_ASSERT_EQUAL(waitpid(pid[i], &st[i], 0), pid[i]);
			if (WIFSIGNALED(st[i])) {
				crashed++;
				fprintf(stderr, "round %d: %s killed by signal %d\n", r,
					i == 0 ? "server" : "client", WTERMSIG(st[i]));
			} else if (WEXITSTATUS(st[i]) != 0) {
				failed++;
				fprintf(stderr, "round %d: %s failed at step %d\n", r,
					i == 0 ? "server" : "client", WEXITSTATUS(st[i]));
			}
		}
	}
	unlink(sock_path);
	CU_ASSERT_EQUAL(crashed, 0);
	CU_ASSERT_EQUAL(failed, 0);
}

/* Mappings of memif regions in this process (memfd "memif_region_N"); -1 unreadable. */
static int
region_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "memif_region_") != NULL)
			n++;
	fclose(f);
	return n;
}

/*
 * Server of the lock test: hold the burst lock as a burst would, let the
 * client leave, and check that the disconnect (on our interrupt thread) took
 * the link down but left the rings mapped until the lock was released.
 * 0 or the step that failed.
 */
static int
held_server_main(int ready, int go)
{
	struct tide_eth_port *p = NULL;
	struct rte_mbuf *pkts[8], *m;
	rte_spinlock_t *lock = NULL;
	uint64_t end;
	char prefix[64], b = 'g';

	snprintf(prefix, sizeof(prefix), "tide-memif-held-s-%d", (int)getppid());
	if (eal_up("server", prefix) != 0 || tide_eth_port_open("net_memif0", NULL, &p) != 0)
		return 10;
	if (!memif_it_wait_link(p, 15000) || read(ready, &b, 1) != 1)
		return 11;
	if (tide_memif_burst_lock(tide_eth_port_id(p), &lock) != 0)
		return 12;
	if (region_maps() <= 0)
		return 13; /* connected: the client's regions are mapped here */
	rte_spinlock_lock(lock);
	if (write(go, &b, 1) != 1)
		return 14;
	/* The disconnect clears the link before it takes the lock. */
	end = memif_it_now_ms() + 10000;
	while (tide_eth_port_link_up(p) && memif_it_now_ms() < end)
		usleep(1000);
	if (tide_eth_port_link_up(p))
		return 15;
	usleep(300000);
	if (region_maps() <= 0)
		return 16; /* unmapped under a burst: the crash this lock prevents */
	rte_spinlock_unlock(lock);
	end = memif_it_now_ms() + 10000;
	while (region_maps() > 0 && memif_it_now_ms() < end)
		usleep(1000);
	if (region_maps() != 0)
		return 17;
	/* Bursts after the disconnect: nothing received, nothing taken. */
	if (tide_eth_rx(p, 0, pkts, 8) != 0)
		return 18;
	m = rte_pktmbuf_alloc(tide_eth_port_pool(p));
	if (m == NULL || rte_pktmbuf_append(m, 64) == NULL)
		return 19;
	if (tide_eth_tx(p, 0, &m, 1) != 0)
		return 20;
	rte_pktmbuf_free(m);
	if (tide_eth_port_close(p) != 0)
		return 21;
	tide_eal_fini();
	return 0;
}

static void
test_memif_disconnect_waits_for_burst_lock(void)
{
	int ready[2], go[2], st[2] = {-1, -1};
	pid_t pid[2];

	snprintf(sock_path, sizeof(sock_path), "/tmp/tide-memif-held-%d.sock", (int)getpid());
	unlink(sock_path);
	CU_ASSERT_FATAL(pipe(ready) == 0 && pipe(go) == 0);
	pid[0] = fork();
	if (pid[0] == 0)
		_exit(held_server_main(ready[0], go[1]));
	pid[1] = fork();
	if (pid[1] == 0)
		_exit(race_end("client", RACE_ROUNDS, ready[1], go[0])); /* up, ready, leave */
	CU_ASSERT_FATAL(pid[0] > 0 && pid[1] > 0);
	for (int i = 0; i < 4; i++)
		close(i < 2 ? ready[i] : go[i - 2]);
	for (int i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(waitpid(pid[i], &st[i], 0), pid[i]);
		if (!WIFEXITED(st[i]) || WEXITSTATUS(st[i]) != 0)
			fprintf(stderr, "%s: %s %d\n", i == 0 ? "server" : "client",
				WIFEXITED(st[i]) ? "failed at step" : "killed by signal",
				WIFEXITED(st[i]) ? WEXITSTATUS(st[i]) : WTERMSIG(st[i]));
		CU_ASSERT_TRUE(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0);
	}
	unlink(sock_path);
}

/*
 * A memif client in zero-copy mode gives its peer offsets into its one
 * mempool region, so a frame may not carry external buffers (registered
 * memory): the netdev must copy them, and refuse to be told to chain.
 * 0, or the step that failed.
 */
static int
zc_server_main(int done)
{
	struct tide_eth_port *p = NULL;
	char prefix[64], b;

	snprintf(prefix, sizeof(prefix), "tide-memif-zc-s-%d", (int)getppid());
	if (eal_up("server", prefix) != 0 || tide_eth_port_open("net_memif0", NULL, &p) != 0)
		return 2;
	(void)!read(done, &b, 1); /* EOF: the client is done */
	(void)tide_eth_port_close(p);
	tide_eal_fini();
	return 0;
}

static int
zc_client_main(void)
{
	struct tide_eth_netdev nd = {0};
	struct tide_eth_port *p = NULL;
	uint64_t deadline = memif_it_now_ms() + 30000;
	char prefix[64];
	int rc = 0;

	while (access(sock_path, F_OK) != 0 && memif_it_now_ms() < deadline)
		usleep(1000);
	snprintf(prefix, sizeof(prefix), "tide-memif-zc-c-%d", (int)getppid());
	/* --single-file-segments (memif zero-copy) cannot go with the EAL's
	 * --huge-unlink on hugepages; this check needs no hugepages. */
	setenv("TIDE_HUGEPAGES", "off", 1);
	if (eal_up_args("client", prefix, ",zero-copy=yes", "--single-file-segments") != 0)
		return 2;
	if (tide_eth_port_open("net_memif0", NULL, &p) != 0)
		return 3;
	/* Connected first: a client leaving mid-handshake trips DPDK 22.11's
	 * memif server (its interrupt thread panics on a closed fd). */
	if (!memif_it_wait_link(p, 15000))
		return 8;
	if (tide_eth_netdev_init(&nd, p, 0, NULL) != 0)
		rc = 4;
	else if (nd.tx_chain || !nd.tx_no_ext)
		rc = 5;
	else if (tide_eth_netdev_set_zc(&nd, TIDE_ETH_ZC_CHAIN) != -ENOTSUP)
		rc = 6;
	else if (tide_eth_netdev_set_zc(&nd, TIDE_ETH_ZC_AUTO) != 0 || nd.tx_chain)
		rc = 7;
	tide_eth_netdev_fini(&nd);
	/* memif zero-copy (22.11) keeps its RX ring's buffers at close: not ours to count. */
	(void)tide_eth_port_close(p);
	tide_eal_fini();
	return rc;
}

static void
test_memif_zero_copy_client_copies_external_buffers(void)
{
	int status = -1, sstatus = -1, done[2];
	pid_t pid, server;

	snprintf(sock_path, sizeof(sock_path), "/tmp/tide-memif-zc-%d.sock", (int)getpid());
	unlink(sock_path);
	CU_ASSERT_FATAL(pipe(done) == 0);
	server = fork();
	if (server == 0) {
		close(done[1]);
		_exit(zc_server_main(done[0]));
	}
	close(done[0]);
	pid = fork();
	if (pid == 0)
		_exit(zc_client_main());
	CU_ASSERT_FATAL(pid > 0 && server > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	close(done[1]);
	CU_ASSERT_EQUAL(waitpid(server, &sstatus, 0), server);
	if (!WIFEXITED(status) || !WIFEXITED(sstatus))
		fprintf(stderr, "zero-copy client: %s %d; server: %s %d\n",
			WIFEXITED(status) ? "exit" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
			WIFEXITED(sstatus) ? "exit" : "signal",
			WIFEXITED(sstatus) ? WEXITSTATUS(sstatus) : WTERMSIG(sstatus));
	CU_ASSERT_TRUE(WIFEXITED(status) && WIFEXITED(sstatus));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	CU_ASSERT_EQUAL(WEXITSTATUS(sstatus), 0);
	unlink(sock_path);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("pmd_eth_memif", NULL, NULL);

	/* First: its ends are forked from a process that never had an EAL. */
	CU_add_test(s, "memif_close_races_peer_exit", test_memif_close_races_peer_exit);
	CU_add_test(s, "memif_disconnect_waits_for_burst_lock",
		    test_memif_disconnect_waits_for_burst_lock);
	CU_add_test(s, "memif_zero_copy_client_copies_external_buffers",
		    test_memif_zero_copy_client_copies_external_buffers);
	CU_add_test(s, "memif_two_processes_echo", test_memif_two_processes_echo);
}

TIDE_UT_MAIN(register_tests)
