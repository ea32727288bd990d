/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Receive interrupts on net_memif (pmd/eth/memif_intr.c), between two
 * processes with their own EAL: each end in turn arms its receive queue, and
 * a frame from the peer makes the armed descriptor readable within a bound;
 * disarmed, a frame leaves it quiet and is still received by polling. Both
 * directions, because the two ends receive on different rings (the server on
 * client-to-server rings, the client on server-to-client ones) whose
 * eventfds come from different sides of memif's handshake. Steps are paced
 * through pipes, and the server stops touching the port before the client
 * goes (memif's teardown needs that order).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "memif_it.h"
#include "tide_eth.h"
#include "tide_ut.h"

static char sock_path[108];

static int
eal_up(const char *role, const char *prefix)
{
	return memif_it_eal_up("memif_intr_it", sock_path, role, prefix, "", NULL);
}

static int
send_one(struct tide_eth_port *p, uint8_t tag)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(tide_eth_port_pool(p));
	uint64_t end = memif_it_now_ms() + 2000;
	uint8_t *d;

	if (m == NULL)
		return -ENOMEM;
	d = (uint8_t *)rte_pktmbuf_append(m, 64);
	memset(d, tag, 64);
	/* The ring may lack a free slot for a moment. */
	while (tide_eth_tx(p, 0, &m, 1) != 1) {
		if (memif_it_now_ms() > end) {
			rte_pktmbuf_free(m);
			return -EAGAIN;
		}
		usleep(1000);
	}
	return 0;
}

/* Poll the queue until one frame with this tag came (ms bound); 0 or -ETIMEDOUT. */
static int
recv_tag(struct tide_eth_port *p, uint8_t tag, uint64_t ms)
{
	struct rte_mbuf *pkts[8];
	uint64_t end = memif_it_now_ms() + ms;
	int found = -ETIMEDOUT;

	while (found != 0 && memif_it_now_ms() < end) {
		uint16_t n = tide_eth_rx(p, 0, pkts, 8);

		for (uint16_t i = 0; i < n; i++)
			if (*rte_pktmbuf_mtod(pkts[i], const uint8_t *) == tag)
				found = 0;
		rte_pktmbuf_free_bulk(pkts, n);
	}
	return found;
}

static bool
readable(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

static int
say(int fd, char c)
{
	return write(fd, &c, 1) == 1 ? 0 : -EIO;
}

static int
hear(int fd, char want)
{
	char c = 0;

	return read(fd, &c, 1) == 1 && c == want ? 0 : -EIO;
}

/*
 * The receiving side of one round: arm, let the peer send (tag), expect the
 * descriptor readable and the frame there; disarm, let it send again
 * (tag + 1), expect the descriptor quiet and the frame received by polling.
 * 0, or the failing step.
 */
static int
receive_round(struct tide_eth_port *p, int to_peer, int from_peer, uint8_t tag)
{
	struct tide_eth_rx_intr ri;
	struct rte_mbuf *pkts[8];
	int fd;

	if (tide_eth_rx_intr_open(p, 0, &ri) != 0)
		return 11;
	/* A receive burst hands the peer free slots (a memif client's rings start
	 * with none), as a poller's last look before sleeping does. */
	if (tide_eth_rx(p, 0, pkts, 8) != 0)
		return 10;
	fd = tide_eth_rx_intr_arm(&ri);

	if (fd < 0)
		return 1;
	if (readable(fd, 0))
		return 2; /* nothing sent yet */
	if (say(to_peer, 's') != 0 || hear(from_peer, 'k') != 0)
		return 3;
	if (!readable(fd, 5000))
		return 4;
	if (recv_tag(p, tag, 5000) != 0)
		return 5;
	tide_eth_rx_intr_disarm(&ri);
	if (readable(fd, 0))
		return 6; /* drained */
	if (say(to_peer, 's') != 0 || hear(from_peer, 'k') != 0)
		return 7;
	if (readable(fd, 300))
		return 8; /* masked: the peer must not have signalled */
	if (recv_tag(p, (uint8_t)(tag + 1), 5000) != 0)
		return 9;
	return 0;
}

/* The sending side of one round: two frames, each when asked. */
static int
send_round(struct tide_eth_port *p, int to_peer, int from_peer, uint8_t tag)
{
	for (int i = 0; i < 2; i++) {
		if (hear(from_peer, 's') != 0 || send_one(p, (uint8_t)(tag + i)) != 0 ||
		    say(to_peer, 'k') != 0)
			return 20 + i;
	}
	return 0;
}

/* Client: receives first, then sends. */
static int
client_main(int to_srv, int from_srv)
{
	struct tide_eth_port *p = NULL;
	struct tide_eth_rx_intr ri;
	uint64_t deadline = memif_it_now_ms() + 30000;
	int rc;

	while (access(sock_path, F_OK) != 0 && memif_it_now_ms() < deadline)
		usleep(10000);
	if (eal_up("client", "tide-memif-intr-c") != 0)
		return 40;
	if (tide_eth_port_open("net_memif0", NULL, &p) != 0)
		return 41;
	if (!memif_it_wait_link(p, 15000))
		return 42;
	if (tide_eth_rx_intr_open(p, 0, &ri) != 0)
		return 43;
	if (tide_eth_rx_intr_open(p, 1, &ri) != -EINVAL)
		return 44;
	rc = receive_round(p, to_srv, from_srv, 10);
	if (rc == 0)
		rc = send_round(p, to_srv, from_srv, 20);
	/* The server stopped polling before it says 'q'. */
	if (rc == 0 && hear(from_srv, 'q') != 0)
		rc = 45;
	tide_eth_port_close(p);
	tide_eal_fini();
	return rc;
}

static void
test_memif_rx_interrupts_both_ways(void)
{
	struct tide_eth_port *p = NULL;
	struct tide_eth_rx_intr ri;
	int c2s[2], s2c[2], status = -1, rc;
	pid_t child;

	snprintf(sock_path, sizeof(sock_path), "/tmp/tide-memif-intr-%d.sock", (int)getpid());
	unlink(sock_path);
	CU_ASSERT_FATAL(pipe(c2s) == 0 && pipe(s2c) == 0);
	/* Fork before either EAL exists: one EAL per address space. */
	child = fork();
	if (child == 0) {
		close(c2s[0]);
		close(s2c[1]);
		_exit(client_main(c2s[1], s2c[0]));
	}
	CU_ASSERT_FATAL(child > 0);
	close(c2s[1]);
	close(s2c[0]);
	TIDE_UT_OK(eal_up("server", "tide-memif-intr-s"));
	TIDE_UT_OK(tide_eth_port_open("net_memif0", NULL, &p));
	if (p == NULL) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return;
	}
	CU_ASSERT_TRUE(memif_it_wait_link(p, 15000));
	CU_ASSERT_EQUAL(tide_eth_rx_intr_open(p, 0, &ri), 0);
	rc = send_round(p, s2c[1], c2s[0], 10);
	if (rc == 0)
		rc = receive_round(p, s2c[1], c2s[0], 20);
	if (rc != 0)
		printf("\n  server failed at step %d\n", rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(say(s2c[1], 'q'), 0);
	CU_ASSERT_EQUAL(waitpid(child, &status, 0), child);
	CU_ASSERT_TRUE(WIFEXITED(status));
	if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
		printf("\n  client failed at step %d\n", WEXITSTATUS(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	tide_eth_port_close(p);
	tide_eal_fini();
	close(c2s[0]);
	close(s2c[1]);
	unlink(sock_path);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("memif_intr", NULL, NULL);

	CU_add_test(s, "memif_rx_interrupts_both_ways", test_memif_rx_interrupts_both_ways);
}

TIDE_UT_MAIN(register_tests)
