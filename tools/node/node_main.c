/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-node: the per-node agent. Started once per node (systemd unit
 * tools/node/tide-node.service, or in the foreground by hand), it reads the
 * node environment file, owns the node's transfer engine (the DPDK port and
 * pinned pollers when the file names a device, kernel sockets otherwise) and
 * the node's segment, mounts that segment at the master, and serves the
 * node's client processes on TIDE_AGENT_SOCKET (store/agent).
 *
 * Exit status: 0 after SIGTERM/SIGINT, 1 on a start-up error (printed). Either
 * way the last line says how it ended ("tide-node: stopped by SIGTERM after
 * ..." once everything is torn down, or "tide-node: failed: ...").
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_agent_server.h"
#include "tide_log.h"
#include "tide_nodeenv.h"
#include "tide_store.h"

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: tide-node [--env FILE] [--socket PATH] [--socket-group GROUP] "
		"[--foreground]\n"
		"  --env FILE            node environment file (default: $TIDE_NODE_ENV, else "
		"%s)\n"
		"  --socket PATH         serve clients here instead of TIDE_AGENT_SOCKET\n"
		"  --socket-group GROUP  the socket is 0660: besides root and the agent's user,\n"
		"                        members of GROUP (name or gid) may attach (default:\n"
		"                        TIDE_AGENT_SOCKET_GROUP, else the agent's own group)\n"
		"  --foreground          run in the foreground (the default; for systemd "
		"Type=simple)\n"
		"The agent reads MOONCAKE_MASTER, MOONCAKE_LOCAL_HOSTNAME, MOONCAKE_PROTOCOL,\n"
		"MOONCAKE_TE_META_DATA_SERVER and MOONCAKE_GLOBAL_SEGMENT_SIZE from the file\n"
		"(or the environment, which wins), mounts the segment and waits for clients.\n",
		TIDE_NODEENV_DEFAULT_PATH);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {{"env", required_argument, NULL, 'e'},
					     {"socket", required_argument, NULL, 's'},
					     {"socket-group", required_argument, NULL, 'g'},
					     {"foreground", no_argument, NULL, 'f'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	const char *env_path = NULL, *sock = NULL, *group = NULL;
	struct tide_agent_server_opts aopts;
	struct tide_agent_server *srv = NULL;
	struct tide_store *store = NULL;
	struct tide_nodeenv *ne;
	struct tide_store_cfg cfg = {0};
	char err[4096] = "";
	sigset_t sigs;
	int c, rc, sig;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			env_path = optarg;
			break;
		case 's':
			sock = optarg;
			break;
		case 'g':
			group = optarg;
			break;
		case 'f':
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "tide-node: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 1;
	}
	ne = malloc(sizeof(*ne));
	if (ne == NULL) {
		fprintf(stderr, "tide-node: failed: out of memory\n");
		return 1;
	}
	rc = tide_nodeenv_load(ne, env_path, NULL, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tide-node: failed: node environment %s is not valid:\n%s",
			ne->path[0] ? ne->path : "(defaults + environment)", err);
		free(ne);
		return 1;
	}
	tide_log_set_level(ne->log_level);
	if (ne->master[0] == '\0') {
		fprintf(stderr,
			"tide-node: failed: MOONCAKE_MASTER is not set (node file %s): the agent "
			"mounts the node's segment at a master; set MOONCAKE_MASTER=host:port\n",
			ne->path[0] ? ne->path : "none");
		free(ne);
		return 1;
	}
	/* The embedded transfer engine reads the node file by itself: make sure
	 * it reads this one. */
	if (ne->path[0] != '\0' && setenv("TIDE_NODE_ENV", ne->path, 1) != 0) {
		fprintf(stderr, "tide-node: failed: setenv TIDE_NODE_ENV: %s\n", strerror(errno));
		free(ne);
		return 1;
	}
	/* Blocked before any thread starts, so every thread inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	cfg.local_hostname = ne->local_hostname;
	cfg.metadata_server = ne->metadata_server;
	cfg.global_segment_size = ne->global_segment_size;
	cfg.local_buffer_size = 0;
	cfg.protocol = ne->protocol == TIDE_NODEENV_PROTO_RDMA ? "rdma" : "tcp";
	cfg.master_server_addr = ne->master;
	cfg.agent = TIDE_STORE_AGENT_OFF;
	rc = tide_store_create(&store);
	if (rc == 0)
		rc = tide_store_setup(store, &cfg);
	if (rc != 0) {
		fprintf(stderr, "tide-node: failed: cannot join the store at master %s: %s\n",
			ne->master, tide_store_strerror(rc));
		tide_store_close(store);
		free(ne);
		return 1;
	}
	if (sock == NULL)
		sock = ne->agent_socket;
	/* The command line wins over the node file, as --socket does. */
	if (group == NULL && ne->agent_socket_group[0] != '\0')
		group = ne->agent_socket_group;
	tide_agent_server_opts_init(&aopts, sizeof(aopts));
	aopts.socket_group = group;
	rc = tide_agent_server_start_opts(store, sock, &aopts, &srv);
	if (rc != 0) {
		if (rc == -ENOENT && group != NULL)
			fprintf(stderr,
				"tide-node: failed: cannot serve clients at %s: no group '%s' "
				"(%s)\n",
				sock, group,
				group == ne->agent_socket_group ? "TIDE_AGENT_SOCKET_GROUP"
								: "--socket-group");
		else
			fprintf(stderr, "tide-node: failed: cannot serve clients at %s: %s\n", sock,
				rc == -EADDRINUSE ? "another agent already answers there"
						  : strerror(-rc));
		tide_store_close(store);
		free(ne);
		return 1;
	}
	printf("tide-node: ready: segment %s (%" PRIu64 " bytes) at master %s; clients attach "
	       "at %s\n",
	       tide_store_endpoint(store), ne->global_segment_size, ne->master, sock);
	fflush(stdout);
	do {
		rc = sigwait(&sigs, &sig);
	} while (rc != 0);
	struct tide_agent_stats st;
	tide_agent_server_stats(srv, &st);
	printf("tide-node: signal %d: stopping (%" PRIu64 " clients served, %" PRIu64
	       " requests, %" PRIu64 " malformed, %" PRIu64 " connections refused)\n",
	       sig, st.clients_total, st.requests, st.bad_requests, st.refused_peers);
	fflush(stdout);
	tide_agent_server_stop(srv);
	tide_store_close(store);
	free(ne);
	/* Last, once the agent, the store and its engine (the DPDK port) are gone. */
	printf("tide-node: stopped by SIG%s after %" PRIu64 " requests from %" PRIu64 " clients\n",
	       sigabbrev_np(sig), st.requests, st.clients_total);
	return 0;
}
