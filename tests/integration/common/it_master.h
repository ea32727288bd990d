/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Integration-test helper: run the real mooncake_master binary as a child
 * process on free loopback ports and wait until it accepts RPCs.
 */
#ifndef TIDE_IT_MASTER_H
#define TIDE_IT_MASTER_H

#include <stdint.h>
#include <sys/types.h>

struct it_master {
	pid_t pid;     /* -1 when not running */
	char addr[64]; /* "127.0.0.1:<rpc port>" */
	uint16_t metrics_port;
};

/* A loopback TCP port nothing listens on right now (0 on failure). */
uint16_t it_free_port(void);

void it_sleep_ms(long ms);

/* CLOCK_MONOTONIC in milliseconds, for the deadlines of readiness waits. */
int64_t it_now_ms(void);

/* How long it_master_start() waits for the master to accept connections. */
#define IT_MASTER_START_MS 30000

/*
 * Start the binary named by the environment variable bin_env with
 * --rpc_port/--metrics_port on 127.0.0.1, --client_ttl client_ttl_s and
 * --log_level warn; the child dies with the test (PR_SET_PDEATHSIG).
 * Returns 0 once a master client connects (within IT_MASTER_START_MS), else -1
 * (message on stderr: the master exited, or the deadline passed).
 */
int it_master_start(struct it_master *m, const char *bin_env, const char *client_ttl_s);

/* SIGTERM (or SIGKILL when hard) and reap. Safe when not running. */
void it_master_stop(struct it_master *m, int hard);

#endif /* TIDE_IT_MASTER_H */
