/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the node agent's wire format as the agent server
 * reads it: agent_recv() (header checks, body, SCM_RIGHTS descriptors;
 * store/proto/agent_proto.c) and the request decoding of every operation
 * in store/agent/agent_server.c (counts, strings, replicate configs,
 * (region, offset, length) locations resolved against the client's mapped
 * regions, MAP/UNMAP of shared memory).
 *
 * The decoders are static and run in the per-client thread, so this file
 * #includes agent_server.c (as SPDK's unit tests include the file under
 * test) and runs the loop of client_main(): agent_recv() then dispatch(),
 * until the first error, then every region is unmapped as client_main()
 * does. The embedded store is fuzz_store_stub.c, which traps when a
 * request reaches it with memory outside the client's regions.
 *
 * Input: the byte stream a client sends (what store_agent.c writes). The
 * harness sends it on a UNIX socketpair one message at a time (the header's
 * length says where the next begins) and, like the client, attaches a
 * descriptor (an 8 MiB memfd sealed against shrinking) to every MAP
 * message; a message whose seq has bit 31 set carries 2 more descriptors,
 * bit 30 set 5 more (more than the receiver's control buffer holds). No
 * descriptor may leak.
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent_server.c"
#include "fuzz_store_stub.h"

#include "fuzz_common.h"

#define FZ_REGION_FD_LEN (8u << 20)
#define FZ_MAX_FDS       8

static struct tide_agent_server srv;
static int region_fd = -1;

/* Send one message's bytes with n descriptors attached. */
static void
send_msg(int sock, const uint8_t *p, size_t len, unsigned nfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * FZ_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {(void *)(uintptr_t)p, len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	int fds[FZ_MAX_FDS];

	if (nfd > 0) {
		struct cmsghdr *c;

		for (unsigned i = 0; i < nfd; i++)
			fds[i] = region_fd;
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfd);
	}
	TRAP_IF(sendmsg(sock, &m, MSG_NOSIGNAL) != (ssize_t)len);
}

/* Lowest free descriptor number: moves up when one leaks. */
static int
fd_probe(void)
{
	int fd = dup(0);

	close(fd);
	return fd;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tide_log_set_level(TIDE_LOG_ERR);
	signal(SIGPIPE, SIG_IGN);
	/* Sealed against shrinking, as store_agent.c makes them: the agent maps no other. */
	region_fd = memfd_create("agent-fuzz-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (region_fd < 0 || ftruncate(region_fd, FZ_REGION_FD_LEN) != 0 ||
	    fcntl(region_fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
		abort();
	srv.store = fz_store();
	pthread_mutex_init(&srv.lock, NULL);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct srv_client c = {.srv = &srv};
	int sv[2], fd0 = fd_probe();
	size_t off = 0;

	TRAP_IF(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0);
	c.sock = sv[0];
	/* As client_main() starts: the client's own session tables (the session ops look
	 * keys up there; without them an input reaching one read a bucket of NULL). */
	TRAP_IF(store_sess_init(&c.own_put, TIDE_STORE_SESSIONS_MAX) != 0 ||
		store_sess_init(&c.own_get, TIDE_STORE_SESSIONS_MAX) != 0);
	for (;;) {
		struct agent_hdr h;
		struct agent_rbuf rd;
		struct agent_wbuf w;
		uint8_t *body = NULL;
		size_t len = size - off;
		unsigned nfd = 0;
		int fd = -1, rc;

		/* One message: a header and the body it announces (or what is left). */
		if (len >= sizeof(h)) {
			memcpy(&h, data + off, sizeof(h));
			if (h.magic == AGENT_MAGIC && h.version == AGENT_VERSION &&
			    h.len <= AGENT_MAX_BODY && h.len <= len - sizeof(h))
				len = sizeof(h) + h.len;
			nfd = (h.op == AGENT_MAP) + (h.seq >> 31 ? 2 : 0) +
			      (h.seq >> 30 & 1 ? 5 : 0);
		}
		if (len > 0)
			send_msg(sv[1], data + off, len, nfd);
		off += len;
		if (off == size)
			shutdown(sv[1], SHUT_WR);
		rc = agent_recv(c.sock, &h, &body, &fd);
		if (rc != 0) {
			TRAP_IF(body != NULL || fd != -1);
			break;
		}
		agent_r_init(&rd, body, h.len);
		agent_w_init(&w);
		rc = dispatch(&c, &h, &rd, fd, &w);
		free(body);
		TRAP_IF(rc != 0 && rc != -EPROTO);
		TRAP_IF(rc == 0 && w.err == 0 && w.len > AGENT_MAX_BODY);
		agent_w_free(&w);
		if (rc != 0)
			break;
	}
	/* As client_main() ends: its sessions, the regions, then the socket. */
	sess_drop_all(&c);
	store_sess_fini(&c.own_put);
	store_sess_fini(&c.own_get);
	for (size_t i = 0; i < c.nregions; i++)
		region_unmap(&srv, &c.regions[i]);
	free(c.regions);
	close(sv[0]);
	close(sv[1]);
	TRAP_IF(fz_store_regions() != 0 || srv.st.regions_now != 0);
	TRAP_IF(fd_probe() != fd0);
	return 0;
}
