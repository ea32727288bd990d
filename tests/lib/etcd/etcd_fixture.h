/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Tests only: a real etcd (Debian's etcd-server) on free loopback ports with
 * its own data directory, started and stopped by the test.
 */
#ifndef TIDE_ETCD_FIXTURE_H
#define TIDE_ETCD_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

struct etcd_fixture {
	char dir[64];      /* data directory; its log is <dir>.log */
	char endpoint[64]; /* "127.0.0.1:<client port>" */
	uint16_t client_port, peer_port;
	pid_t pid; /* -1 when stopped */
};

/**
 * Pick ports and a data directory, start etcd and wait (deadline 30 s) until it
 * answers a read. \return 0; -errno (the etcd log is named on stderr).
 */
int etcd_fixture_start(struct etcd_fixture *f);
/** Start again after etcd_fixture_stop(), same ports and data. \return as start. */
int etcd_fixture_restart(struct etcd_fixture *f);
/** SIGTERM etcd and reap it (idempotent). */
void etcd_fixture_stop(struct etcd_fixture *f);
/** Stop and remove the data directory and log. */
void etcd_fixture_destroy(struct etcd_fixture *f);
/** A loopback TCP port free a moment ago (bound, then closed); 0 if none. */
uint16_t etcd_fixture_free_port(void);

#endif
