/* SPDX-License-Identifier: Apache-2.0 */
/* Integration-test helper: the real mooncake_master as a child (it_master.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "it_master.h"
#include "tide_mc_client.h"

uint16_t
it_free_port(void)
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

void
it_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

int64_t
it_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
it_master_start(struct it_master *m, const char *bin_env, const char *client_ttl_s)
{
	const char *bin = getenv(bin_env);
	struct tide_mc_client *c = NULL;
	char port_s[16], mport_s[16];
	uint16_t port = it_free_port();

	m->pid = -1;
	m->metrics_port = it_free_port();
	if (bin == NULL || port == 0 || m->metrics_port == 0) {
		fprintf(stderr, "%s not set or no free port\n", bin_env);
		return -1;
	}
	snprintf(port_s, sizeof(port_s), "%u", port);
	snprintf(mport_s, sizeof(mport_s), "%u", m->metrics_port);
	m->pid = fork();
	if (m->pid < 0)
		return -1;
	if (m->pid == 0) {
		/* Never outlive the test, even if it crashes. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execl(bin, "mooncake_master", "--rpc_port", port_s, "--rpc_address", "127.0.0.1",
		      "--metrics_port", mport_s, "--metrics_host", "127.0.0.1", "--client_ttl",
		      client_ttl_s, "--log_level", "warn", (char *)NULL);
		_exit(127);
	}
	snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%u", port);
	/* A deadline, not a number of tries: a loaded machine only takes longer. */
	int64_t start = it_now_ms(), deadline = start + IT_MASTER_START_MS;
	int st;

	for (;;) {
		if (tide_mc_client_connect_addr(m->addr, 1000, &c) == 0) {
			tide_mc_client_close(c);
			return 0;
		}
		if (waitpid(m->pid, &st, WNOHANG) == m->pid) {
			fprintf(stderr,
				"%s exited (status 0x%x) before accepting connections at %s\n", bin,
				(unsigned)st, m->addr);
			m->pid = -1;
			return -1;
		}
		if (it_now_ms() >= deadline)
			break;
		it_sleep_ms(50);
	}
	fprintf(stderr, "%s did not accept connections at %s within %d s (waited %.1f s)\n", bin,
		m->addr, IT_MASTER_START_MS / 1000, (double)(it_now_ms() - start) / 1000.0);
	return -1;
}

void
it_master_stop(struct it_master *m, int hard)
{
	int st;

	if (m->pid <= 0)
		return;
	kill(m->pid, hard ? SIGKILL : SIGTERM);
	waitpid(m->pid, &st, 0);
	m->pid = -1;
}
