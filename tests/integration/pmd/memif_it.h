/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the memif integration tests share: a clock, an EAL with one
 * net_memif0 vdev on a filesystem socket, and a bounded wait for the link.
 * Each test process (parent and forked child) brings up its own EAL.
 */
#ifndef TIDE_MEMIF_IT_H
#define TIDE_MEMIF_IT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tide_eth.h"

static inline uint64_t
memif_it_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The EAL of one end: net_memif0 in `role` on `sock` plus `devargs` (starting
 * with a comma, or ""), one lcore, 128 MiB, hugepages when TIDE_HUGEPAGES=auto.
 * Returns tide_eal_init()'s result. Once per process.
 */
static inline int
memif_it_eal_up(const char *prog, const char *sock, const char *role, const char *prefix,
		const char *devargs, const char *eal_args)
{
	static char vdev[256];
	struct tide_eal_opts o = {0};
	const char *huge = getenv("TIDE_HUGEPAGES");

	snprintf(vdev, sizeof(vdev), "net_memif0,role=%s,socket=%s,socket-abstract=no%s", role,
		 sock, devargs);
	o.extra_args = eal_args;
	o.prog = prog;
	o.file_prefix = prefix;
	o.lcores = "0";
	o.huge = huge != NULL && strcmp(huge, "auto") == 0 ? TIDE_EAL_HUGE_AUTO : TIDE_EAL_HUGE_OFF;
	o.mem_bytes = 128u << 20;
	o.vdevs[0] = vdev;
	return tide_eal_init(&o, NULL);
}

/* Whether the port's link came up within ms. */
static inline bool
memif_it_wait_link(struct tide_eth_port *p, uint64_t ms)
{
	uint64_t end = memif_it_now_ms() + ms;

	while (!tide_eth_port_link_up(p) && memif_it_now_ms() < end)
		usleep(10000);
	return tide_eth_port_link_up(p);
}

#endif /* TIDE_MEMIF_IT_H */
