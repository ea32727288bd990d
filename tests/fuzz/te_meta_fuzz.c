/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the transfer engine's metadata wire (engine/te/meta):
 *
 * - The handshake daemon's frame parser (te_handshake.c on_readable(): u64
 *   length, type byte or legacy untyped JSON, body) and its reply framing.
 *   It lives inside the daemon's poll loop, so this file #includes
 *   te_handshake.c (as the unit tests of SPDK include the file under test)
 *   and drives one connection's handlers on a socketpair holding the input,
 *   with te_meta.c's real request handler (captured with
 *   -Wl,--wrap=te_hs_daemon_start) and an RDMA Connection handler that
 *   decodes the request as te_rdma.c does.
 * - The clients' reply parsers: te_hs_request() (handshake reply frame),
 *   te_http_get/put/del() (HTTP/1.1 status line, headers, Content-Length,
 *   chunked and close-delimited bodies), and te_meta_fetch() on top of them
 *   in both P2PHANDSHAKE and HTTP modes (descriptor and rpc_meta decoding).
 *   meta_sock_connect() is wrapped (-Wl,--wrap=meta_sock_connect): every
 *   connection a client opens is a socketpair whose far end already holds a
 *   server reply and is shut for writing, so nothing touches the network.
 *
 * Input convention: the input is one or more server replies separated by
 * FZ_SEP (connection i of a client call gets part i, the last part repeats);
 * the daemon gets the whole input as one connection's bytes.
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "te_handshake.c"
#include "te_rdma.h"

int __wrap_meta_sock_connect(const char *host, uint16_t port, int64_t deadline_ms, int *fd);
int __wrap_te_hs_daemon_start(const char *bind_ip, uint16_t port, te_hs_handler_fn fn, void *arg,
			      struct te_hs_daemon **out);
int __real_te_hs_daemon_start(const char *bind_ip, uint16_t port, te_hs_handler_fn fn, void *arg,
			      struct te_hs_daemon **out);

#include "fuzz_common.h"

#define FZ_SEP     "\n--tide-fuzz-next--\n"
#define FZ_MAXPART 8
#define FZ_MAXFD   16

/* The replies of the current input and the far ends opened for them. */
static const uint8_t *parts[FZ_MAXPART];
static size_t part_len[FZ_MAXPART], nparts, next_part;
static int far_fd[FZ_MAXFD];
static size_t nfar;

static struct te_meta *p2p, *http_meta; /* clients under test */
static struct te_http *http;
static struct te_hs_daemon hs; /* a daemon that only holds the real handler */

int
__wrap_te_hs_daemon_start(const char *bind_ip, uint16_t port, te_hs_handler_fn fn, void *arg,
			  struct te_hs_daemon **out)
{
	if (hs.fn == NULL) {
		hs.fn = fn;
		hs.arg = arg;
	}
	return __real_te_hs_daemon_start(bind_ip, port, fn, arg, out);
}

int
__wrap_meta_sock_connect(const char *host, uint16_t port, int64_t deadline_ms, int *fd)
{
	size_t i = next_part < nparts ? next_part++ : nparts - 1;
	int sv[2];

	(void)host;
	(void)port;
	(void)deadline_ms;
	if (nfar == FZ_MAXFD)
		return -ECONNREFUSED;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	if (part_len[i] > 0 &&
	    send(sv[1], parts[i], part_len[i], MSG_NOSIGNAL) != (ssize_t)part_len[i])
		__builtin_trap(); /* -max_len keeps every part within the socket buffer */
	shutdown(sv[1], SHUT_WR);
	far_fd[nfar++] = sv[1]; /* stays open until the call returned: the request lands there */
	*fd = sv[0];
	return 0;
}

static void
client_call_done(void)
{
	for (size_t i = 0; i < nfar; i++)
		close(far_fd[i]);
	nfar = 0;
	next_part = 0;
}

/* Connection requests: decoded as te_rdma.c's passive side does, answered in kind. */
static int
conn_handler(void *arg, uint8_t type, const char *json, size_t len, char **reply, size_t *reply_len)
{
	struct te_rdma_hs h;
	char err[128], seg[TE_NAME_MAX], dev[TE_DEV_NAME_MAX];
	int rc;

	(void)arg;
	TRAP_IF(type != TE_HS_CONNECTION || json[len] != '\0');
	rc = te_rdma_hs_decode(json, len, &h, err, sizeof(err));
	if (rc == 0 &&
	    te_rdma_nic_path_split(h.peer_nic_path, seg, sizeof(seg), dev, sizeof(dev)) != 0)
		snprintf(h.reply_msg, sizeof(h.reply_msg), "bad peer_nic_path");
	if (rc != 0)
		snprintf(h.reply_msg, sizeof(h.reply_msg), "%s", err);
	rc = te_rdma_hs_encode(&h, reply);
	if (rc == 0)
		*reply_len = strlen(*reply);
	return rc;
}

/* One daemon connection carrying the whole input. */
static void
daemon_conn(const uint8_t *data, size_t size)
{
	struct hs_conn c;
	uint8_t out[4096];
	size_t olen = 0, got = 0;
	bool keep;
	int sv[2];

	TRAP_IF(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0);
	if (size > 0)
		TRAP_IF(send(sv[1], data, size, MSG_NOSIGNAL) != (ssize_t)size);
	shutdown(sv[1], SHUT_WR);
	memset(&c, 0, sizeof(c));
	c.fd = sv[0];
	c.st = HS_LEN;
	c.deadline = INT64_MAX;
	snprintf(c.peer, sizeof(c.peer), "fuzz");
	keep = on_readable(&hs, &c);
	if (keep && c.st == HS_REPLY) {
		olen = c.olen;
		TRAP_IF(olen < 8 || olen > sizeof(out));
		keep = on_writable(&c, 1000);
		TRAP_IF(!keep || c.st != HS_LINGER);
		/* The reply: u64 length of what follows, then (typed) the request's type. */
		for (ssize_t n;
		     got < sizeof(out) && (n = recv(sv[1], out + got, sizeof(out) - got, 0)) > 0;)
			got += (size_t)n;
		TRAP_IF(got != olen || get_le64(out) != olen - 8);
		keep = on_readable(&hs, &c); /* linger: the rest, then EOF */
		TRAP_IF(keep);
	} else {
		TRAP_IF(keep); /* the input ends in EOF: only a dispatched request keeps it */
	}
	conn_free(&c); /* closes sv[0] */
	close(sv[1]);
}

static void
clients(void)
{
	struct te_desc *d = NULL;
	char host[TE_NAME_MAX], err[256], *reply = NULL, *body = NULL;
	size_t rlen = 0, blen = 0;
	static const char hs_req[] =
		"{\"protocol\":\"rdma\",\"local_nic_path\":\"10.0.0.1:12345@mlx5_0\","
		"\"local_lid\":0,\"local_gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\","
		"\"peer_nic_path\":\"10.0.0.2:12345@mlx5_0\",\"qp_num\":[1234,1235],"
		"\"reply_msg\":\"\"}";
	static const char rpc_meta[] = "{\"ip_or_host_name\":\"10.0.0.2\",\"rpc_port\":12345}";

	if (te_meta_fetch(p2p, "10.0.0.2:12345", &d, host, sizeof(host), err, sizeof(err)) == 0) {
		TRAP_IF(d == NULL || strcmp(host, "10.0.0.2") != 0);
		te_desc_free(d);
		d = NULL;
	}
	client_call_done();
	if (te_hs_request("10.0.0.2", 12345, TE_HS_CONNECTION, hs_req, sizeof(hs_req) - 1, 1000,
			  &reply, &rlen) == 0) {
		struct te_rdma_hs h;

		TRAP_IF(reply[rlen] != '\0');
		(void)te_rdma_hs_decode(reply, rlen, &h, err, sizeof(err));
		free(reply);
	}
	client_call_done();
	if (te_meta_fetch(http_meta, "10.0.0.2:12345", &d, host, sizeof(host), err, sizeof(err)) ==
	    0) {
		TRAP_IF(d == NULL || host[0] == '\0');
		te_desc_free(d);
	}
	client_call_done();
	if (te_http_get(http, "mooncake/ram/10.0.0.2:12345", &body, &blen) == 0) {
		TRAP_IF(body == NULL || body[blen] != '\0' || strlen(body) > blen);
		free(body);
	}
	client_call_done();
	(void)te_http_put(http, "mooncake/rpc_meta/10.0.0.2:12345", rpc_meta, sizeof(rpc_meta) - 1);
	client_call_done();
	(void)te_http_del(http, "mooncake/ram/10.0.0.2:12345");
	client_call_done();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct te_desc_buf buf = {.name = "cpu:0", .addr = 0x7f0000000000, .length = 1 << 20};
	struct te_desc self = {
		.name = "10.0.0.1:12345",
		.protocol = "tcp",
		.tcp_data_port = 40123,
		.tcp_proto_version = TE_PROTO_NATIVE,
		.timestamp = "2026-01-01 00:00:00",
		.instance = 0x1234,
		.nbufs = 1,
		.bufs = &buf,
	};
	char err[256];

	(void)argc;
	(void)argv;
	tide_log_set_level(TIDE_LOG_ERR);
	signal(SIGPIPE, SIG_IGN);
	unsetenv("MC_METADATA_CLUSTER_ID");
	if (te_meta_open("P2PHANDSHAKE", "127.0.0.1", 0, 1000, &p2p, err, sizeof(err)) != 0 ||
	    te_meta_open("http://10.0.0.2:8080/metadata", "127.0.0.1", 0, 1000, &http_meta, err,
			 sizeof(err)) != 0 ||
	    te_http_open("http://10.0.0.2:8080/metadata", 1000, &http, err, sizeof(err)) != 0 ||
	    te_meta_publish(p2p, &self, NULL) != 0 || hs.fn == NULL) {
		fprintf(stderr, "te_meta_fuzz: setup failed: %s\n", err);
		abort();
	}
	te_meta_set_conn_handler(p2p, conn_handler, NULL);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sep_len = sizeof(FZ_SEP) - 1;
	size_t off = 0;

	nparts = 0;
	while (nparts < FZ_MAXPART - 1) {
		const uint8_t *s = memmem(data + off, size - off, FZ_SEP, sep_len);

		if (s == NULL)
			break;
		parts[nparts] = data + off;
		part_len[nparts++] = (size_t)(s - (data + off));
		off = (size_t)(s - data) + sep_len;
	}
	parts[nparts] = data + off;
	part_len[nparts++] = size - off;
	next_part = 0;

	daemon_conn(data, size);
	clients();
	return 0;
}
