/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stacks published to DPDK telemetry: /tide/net/stats,<index> answers a stack's
 * counters (engine/net), its injector's and checksum choices, and the port's. The
 * telemetry thread reads them under publish_lock; workers never take it (their
 * counters are read racily).
 */
#include <errno.h>
#include <stdlib.h>

#include <pthread.h>

#include <rte_telemetry.h>

#include "eth_net_internal.h"
#include "tide_log.h"

#define PUBLISH_MAX 16
static pthread_mutex_t publish_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct tide_eth_netdev *nd;
	const struct tide_net_stack *stack;
} published[PUBLISH_MAX];
static bool publish_cmd_registered;

static int
telemetry_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	unsigned long idx = 0;
	const char *const *names;
	const uint64_t *v;
	size_t n;
	int rc = 0;

	(void)cmd;
	if (params != NULL && *params != '\0') {
		char *end;

		idx = strtoul(params, &end, 10);
		if (*end != '\0')
			return -EINVAL;
	}
	if (idx >= PUBLISH_MAX)
		return -EINVAL;
	pthread_mutex_lock(&publish_lock);
	if (published[idx].stack == NULL) {
		rc = -ENODEV;
		goto out;
	}
	names = tide_net_stats_names(&n);
	/* struct tide_net_stats is n consecutive uint64_t (asserted in engine/net). */
	v = (const uint64_t *)(const void *)tide_net_stats(published[idx].stack);
	rte_tel_data_start_dict(d);
	for (size_t i = 0; i < n; i++)
		rte_tel_data_add_dict_u64(d, names[i], v[i]);
	{
		const struct tide_eth_fault_stats *f = &published[idx].nd->fault_stats;
		struct tide_eth_port_stats ps;

		rte_tel_data_add_dict_u64(d, "fault_dropped", f->dropped);
		rte_tel_data_add_dict_u64(d, "fault_duplicated", f->duplicated);
		rte_tel_data_add_dict_u64(d, "fault_reordered", f->reordered);
		rte_tel_data_add_dict_u64(d, "fault_corrupted", f->corrupted);
		rte_tel_data_add_dict_u64(d, "fault_delayed", f->delayed);
		/* Checksum handling (TIDE_CSUM): elided, or what the device does. */
		rte_tel_data_add_dict_u64(d, "csum_elided", published[idx].nd->csum.elide);
		rte_tel_data_add_dict_u64(d, "csum_tx_offload",
					  (uint64_t)published[idx].nd->csum.tx_ip |
						  (uint64_t)published[idx].nd->csum.tx_tcp << 1);
		rte_tel_data_add_dict_u64(d, "csum_rx_offload", published[idx].nd->rx_trust);
		if (tide_eth_port_stats(published[idx].nd->port, &ps) == 0) {
			rte_tel_data_add_dict_u64(d, "port_ipackets", ps.ipackets);
			rte_tel_data_add_dict_u64(d, "port_opackets", ps.opackets);
			rte_tel_data_add_dict_u64(d, "port_imissed", ps.imissed);
			rte_tel_data_add_dict_u64(d, "port_ierrors", ps.ierrors);
			rte_tel_data_add_dict_u64(d, "port_oerrors", ps.oerrors);
			rte_tel_data_add_dict_u64(d, "port_rx_nombuf", ps.rx_nombuf);
		}
	}
out:
	pthread_mutex_unlock(&publish_lock);
	return rc;
}

int
tide_eth_netdev_publish(struct tide_eth_netdev *nd, const struct tide_net_stack *stack,
			unsigned *index)
{
	int rc = -ENOSPC;

	pthread_mutex_lock(&publish_lock);
	if (!publish_cmd_registered) {
		rc = rte_telemetry_register_cmd("/tide/net/stats", telemetry_stats,
						"Tide user-space stack counters. Parameter: stack "
						"index (default 0)");
		if (rc != 0)
			goto out;
		publish_cmd_registered = true;
	}
	rc = -ENOSPC;
	for (unsigned i = 0; i < PUBLISH_MAX; i++) {
		if (published[i].stack == NULL) {
			published[i].nd = nd;
			published[i].stack = stack;
			*index = i;
			rc = 0;
			break;
		}
	}
out:
	pthread_mutex_unlock(&publish_lock);
	return rc;
}

void
eth_telemetry_forget(struct tide_eth_netdev *nd)
{
	pthread_mutex_lock(&publish_lock);
	for (unsigned i = 0; i < PUBLISH_MAX; i++)
		if (published[i].nd == nd) {
			published[i].nd = NULL;
			published[i].stack = NULL;
		}
	pthread_mutex_unlock(&publish_lock);
}
