/* SPDX-License-Identifier: Apache-2.0 */
/* Tests only: see etcd_fixture.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd_fixture.h"
#include "tide_etcd.h"

uint16_t
etcd_fixture_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint16_t p = 0;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		p = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return p;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
etcd_fixture_restart(struct etcd_fixture *f)
{
	char client_url[64], purl[64], cluster[96], log[96];
	struct tide_etcd *e = NULL;
	struct tide_etcd_kv kv;
	double deadline = now_s() + 30;
	int rc = -ETIMEDOUT;

	snprintf(client_url, sizeof(client_url), "http://127.0.0.1:%u", f->client_port);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%u", f->peer_port);
	snprintf(cluster, sizeof(cluster), "it=%s", purl);
	snprintf(log, sizeof(log), "%s.log", f->dir);
	f->pid = fork();
	if (f->pid == 0) {
		if (freopen(log, "a", stdout) != NULL)
			dup2(STDOUT_FILENO, STDERR_FILENO);
		execlp("etcd", "etcd", "--name", "it", "--data-dir", f->dir, "--listen-client-urls",
		       client_url, "--advertise-client-urls", client_url, "--listen-peer-urls",
		       purl, "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
		       "--log-level", "warn", (char *)NULL);
		fprintf(stderr, "etcd fixture: exec etcd: %s (Debian package etcd-server)\n",
			strerror(errno));
		_exit(127);
	}
	if (f->pid < 0)
		return -errno;
	if (tide_etcd_open(f->endpoint, 1000, &e) != 0)
		return -ENOMEM;
	while (now_s() < deadline) {
		int st;

		rc = tide_etcd_get(e, "probe", 5, &kv, NULL);
		if (rc == 0 || rc == -ENOENT) {
			tide_etcd_kv_clear(&kv);
			rc = 0;
			break;
		}
		if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
			fprintf(stderr, "etcd fixture: etcd exited (status %d); see %s\n", st, log);
			f->pid = -1;
			rc = -ECHILD;
			break;
		}
		usleep(50 * 1000);
	}
	tide_etcd_close(e);
	if (rc == -ETIMEDOUT)
		fprintf(stderr, "etcd fixture: etcd did not answer within 30 s; see %s\n", log);
	return rc;
}

int
etcd_fixture_start(struct etcd_fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->pid = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/tide-etcd-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -errno;
	f->client_port = etcd_fixture_free_port();
	f->peer_port = etcd_fixture_free_port();
	snprintf(f->endpoint, sizeof(f->endpoint), "127.0.0.1:%u", f->client_port);
	return etcd_fixture_restart(f);
}

void
etcd_fixture_stop(struct etcd_fixture *f)
{
	if (f->pid > 0) {
		kill(f->pid, SIGTERM);
		waitpid(f->pid, NULL, 0);
		f->pid = -1;
	}
}

void
etcd_fixture_destroy(struct etcd_fixture *f)
{
	char cmd[200];

	etcd_fixture_stop(f);
	if (f->dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s.log'", f->dir, f->dir);
		(void)!system(cmd);
	}
}
