/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the master's HTTP server (store/master/server/
 * mc_http.c): request head and body framing (Content-Length, Expect,
 * Transfer-Encoding refusal, size limits), the request line and query, and
 * both ports' endpoints: the metadata server (/metadata?key= GET, PUT,
 * DELETE; /health) and the admin port (/health, /metrics,
 * /get_all_segments, /query_key?key=).
 *
 * The parser is static and runs inside the control thread's epoll handler,
 * so this file #includes mc_http.c (as SPDK's unit tests include the file
 * under test) and drives the real accept and event functions, unchanged, on
 * UNIX stream sockets: a server built by hand around a real object table
 * (one mounted segment, one object), one connection per request.
 *
 * Input convention: one or more requests separated by FZ_SEP, each sent on
 * its own connection to both ports, once in one write and once in
 * pseudo-random pieces; the metadata store persists across the parts of one
 * input (a PUT is seen by the next part's GET) and is cleared after it.
 * Every answer must be one well-formed HTTP/1.1 reply whose Content-Length
 * matches its body, after at most one "100 Continue". Each input ends with
 * no connection open or awaiting reap and the store empty: what an input
 * allocates it frees, so libFuzzer's per-input leak check stays on.
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "mc_http.c"

#include "fuzz_common.h"

#define FZ_SEP     "\n--tide-fuzz-next--\n"
#define FZ_MAXPART 8
#define FZ_RESP    (1u << 20)

static struct tide_mc_server *srv;
static int lfd[2];
static struct sockaddr_un addr[2];
static const enum mc_ctl_kind kind[2] = {MC_CTL_META_LISTEN, MC_CTL_METRICS_LISTEN};
static uint8_t *resp;

static struct tide_mc_str
S(const char *s) {
	return (struct tide_mc_str){(char *)s, strlen(s)};
}

/* A table with something to show: one segment, one complete object. */
static void
populate(struct tide_mc_table *t)
{
	static const struct tide_mc_uuid client = {0x1111, 0x2222};
	struct tide_mc_segment seg = {
		.id = {0x3333, 0x4444},
		.name = S("10.0.0.1"),
		.base = 0x7f0000000000,
		.size = 64u << 20,
		.te_endpoint = S("10.0.0.1:12345"),
		.protocol = S("tcp"),
		.host_id = S(""),
	};
	struct tide_mc_replicate_config cfg = {.replica_num = 1};
	struct tide_mc_replica_desc_vec d;
	struct tide_mc_table_arena a = {0};
	struct tide_mc_str key = S("fuzz/key");

	if (tide_mc_table_mount_segment(t, &seg, &client, 0) != 0 ||
	    tide_mc_table_put_start(t, &client, &key, 4096, &cfg, 0, &a, &d) != 0 ||
	    tide_mc_table_put_end(t, &client, &key, NULL, TIDE_MC_REPLICA_ALL, 0) != 0)
		abort();
	tide_mc_table_arena_release(&a);
}

static int
listener(const char *name, struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* Abstract namespace: nothing on disk, gone with the process. */
	snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "tide-mc-http-fuzz-%d-%s",
		 (int)getpid(), name);
	if (fd < 0 || bind(fd, (struct sockaddr *)sa, sizeof(*sa)) != 0 || listen(fd, 16) != 0)
		abort();
	return fd;
}

/* Check one connection's output: [100 Continue] and one complete reply, or nothing. */
static void
check_reply(const uint8_t *r, size_t n)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	const char *end, *cl;
	unsigned long long clen;

	if (n >= sizeof(cont) - 1 && memcmp(r, cont, sizeof(cont) - 1) == 0) {
		r += sizeof(cont) - 1;
		n -= sizeof(cont) - 1;
	}
	if (n == 0)
		return; /* closed without an answer: input ended early */
	TRAP_IF(n < 12 || memcmp(r, "HTTP/1.1 ", 9) != 0);
	end = memmem(r, n, "\r\n\r\n", 4);
	TRAP_IF(end == NULL);
	cl = memmem(r, (size_t)(end - (const char *)r), "\r\nContent-Length: ", 18);
	TRAP_IF(cl == NULL);
	clen = strtoull(cl + 18, NULL, 10);
	TRAP_IF((size_t)(end + 4 - (const char *)r) + clen != n);
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One request on a new connection to port p, sent whole (seed 0) or in pieces. */
static void
one_conn(int p, const uint8_t *req, size_t len, uint64_t seed)
{
	size_t off = 0, got = 0, before = srv->n_http;
	struct mc_http_conn *hc;
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	TRAP_IF(c < 0 || connect(c, (struct sockaddr *)&addr[p], sizeof(addr[p])) != 0);
	mc_http_accept(srv, lfd[p], kind[p]);
	TRAP_IF(srv->n_http != before + 1);
	hc = srv->http;
	for (int rounds = 0; srv->n_http > before; rounds++) {
		ssize_t n;

		TRAP_IF(rounds > 100000);
		if (off < len) {
			size_t k = seed == 0 ? len - off : 1 + (size_t)(rnd(&seed) % 300);

			if (k > len - off)
				k = len - off;
			n = send(c, req + off, k, MSG_NOSIGNAL);
			TRAP_IF(n <= 0);
			off += (size_t)n;
			if (off == len)
				shutdown(c, SHUT_WR);
		} else if (len == 0 && rounds == 0) {
			shutdown(c, SHUT_WR);
		}
		mc_http_event(srv, hc, EPOLLIN | EPOLLOUT);
		/* What the control loop does after each epoll batch: http_close only
		 * queues a connection on http_dead. Unreaped, every connection's
		 * buffers (~100 KB an input) stayed reachable, so LeakSanitizer saw
		 * nothing and RSS grew to the limit. hc is not used once closed. */
		mc_http_reap(srv);
		while (got < FZ_RESP && (n = recv(c, resp + got, FZ_RESP - got, 0)) > 0)
			got += (size_t)n;
	}
	while (got < FZ_RESP) {
		ssize_t n = recv(c, resp + got, FZ_RESP - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(c);
	check_reply(resp, got);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct tide_mc_table_opts o;

	(void)argc;
	(void)argv;
	tide_log_set_level(TIDE_LOG_ERR);
	signal(SIGPIPE, SIG_IGN);
	srv = calloc(1, sizeof(*srv));
	resp = malloc(FZ_RESP);
	if (srv == NULL || resp == NULL || tide_mc_codec_init() != 0)
		abort();
	tide_mc_table_opts_init(&o, sizeof(o));
	o.seed = 1;
	if (tide_mc_table_create(&o, &srv->table) != 0)
		abort();
	populate(srv->table);
	srv->start_ms = tide_mc_server_now_ms();
	srv->ctl_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->ctl_epfd < 0)
		abort();
	lfd[0] = listener("meta", &addr[0]);
	lfd[1] = listener("admin", &addr[1]);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sep_len = sizeof(FZ_SEP) - 1;
	size_t off = 0;
	unsigned part = 0;

	for (;;) {
		const uint8_t *s = part + 1 < FZ_MAXPART
					   ? memmem(data + off, size - off, FZ_SEP, sep_len)
					   : NULL;
		size_t len = s != NULL ? (size_t)(s - (data + off)) : size - off;
		uint64_t seed = 0x9e3779b97f4a7c15ULL ^ len;

		for (size_t i = 0; i < len && i < 64; i++)
			seed = (seed ^ data[off + i]) * 0x100000001b3ULL;
		if (seed == 0)
			seed = 1;
		one_conn(0, data + off, len, part % 2 ? seed : 0);
		one_conn(1, data + off, len, part % 2 ? 0 : seed);
		if (s == NULL)
			break;
		off = (size_t)(s - data) + sep_len;
		part++;
	}
	TRAP_IF(srv->n_http != 0 || srv->http != NULL || srv->http_dead != NULL);
	mc_meta_clear(srv);
	return 0;
}
