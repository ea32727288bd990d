/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes the fuzz corpus (tests/fuzz/corpus/<target>/) from real traffic and
 * real files: `ninja -C build-fuzz fuzz-seeds` runs
 *     fuzz_seedgen <corpus dir> <source root>
 *
 * - te_srv_sess / te_cli_sess: a client and a server session back to back in
 *   memory for every scenario of fuzz_te.h; what the client sends is a
 *   server seed, what the server answers a client seed.
 * - te_desc: te_desc_encode of a TCP descriptor as the engine publishes it and
 *   of an RDMA one, te_rpcmeta_encode, te_rdma_hs_encode, and what stock
 *   Mooncake nodes publish (the samples of spec 6.3 the unit tests use).
 * - te_meta and mc_http: the real clients (te_meta in P2PHANDSHAKE and HTTP
 *   modes, te_http) talk to the real servers (a te_meta handshake daemon;
 *   tide_mc_server's metadata and admin ports) through a recording TCP relay.
 *   Requests to the daemon and replies from both servers are te_meta seeds
 *   (a client call that opens several connections gets its replies joined
 *   with FZ_SEP, the target's convention); HTTP requests are mc_http seeds.
 *   The Host header's ephemeral port is rewritten to 8080.
 * - agent: store_agent.c (the real client) attached to agent_server.c (over
 *   fuzz_store_stub.c) runs every operation; agent_recv is wrapped
 *   (-Wl,--wrap=agent_recv) to record each request the server reads.
 * - nodeenv: tools/node.env.sample and its tide_nodeenv_dump.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_proto.h"
#include "fuzz_store_stub.h"
#include "fuzz_te.h"
#include "store_agent.h"
#include "store_mc.h"
#include "te_meta.h"
#include "te_rdma.h"
#include "tide_agent_server.h"
#include "tide_mc_server.h"
#include "tide_nodeenv.h"

#define FZ_SEP "\n--tide-fuzz-next--\n"

int __wrap_agent_recv(int sock, struct agent_hdr *h, uint8_t **body, int *fd);
int __real_agent_recv(int sock, struct agent_hdr *h, uint8_t **body, int *fd);

static const char *out_dir;

static void
die(const char *what, int rc)
{
	fprintf(stderr, "fuzz_seedgen: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

/* ---------------------------------------------------------------- buffers */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void
buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (b->p == NULL)
			die("realloc", ENOMEM);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void
buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void
write_seed(const char *target, const char *name, const void *p, size_t n)
{
	char path[1024];
	FILE *f;

	if (n == 0)
		return; /* nothing was said: no seed */
	snprintf(path, sizeof(path), "%s/%s", out_dir, target);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die(path, errno);
	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0)
		die(path, errno);
	printf("  %s/%s (%zu bytes)\n", target, name, n);
}

/* --------------------------------------------------------- data sessions */

static uint8_t *mem;

static bool
chk(void *arg, uint64_t addr, uint64_t len)
{
	(void)arg;
	return fz_te_inside(mem, addr, len);
}

static void
rel(void *arg)
{
	(void)arg;
}

void
te_slice_done(struct te_slice *s, int err)
{
	(void)s;
	(void)err;
	abort();
}

struct gen_cli {
	const struct fz_te_scen *sc;
	struct te_cli_sess *c;
	struct te_slice sl[FZ_TE_MAX_TOTAL];
	uint8_t data[FZ_TE_MAX_TOTAL][4096];
	unsigned submitted;
};

static void
gen_done(void *arg, struct te_slice *s, int err)
{
	(void)arg;
	(void)s;
	(void)err;
}

static void
gen_refill(struct gen_cli *g)
{
	while (g->submitted < FZ_TE_TOTAL(g->sc)) {
		const struct fz_te_slice *d = &g->sc->s[g->submitted % g->sc->n];
		struct te_slice *s = &g->sl[g->submitted];

		if (!te_cli_sess_can_submit(g->c, d->len))
			break;
		if (d->len > sizeof(g->data[0]))
			die("slice too long for the generator", EINVAL);
		s->op = d->op;
		s->remote = FZ_TE_BASE + d->off;
		s->len = d->len;
		s->local = g->data[g->submitted];
		memset(s->local, 0x30 + (int)(g->submitted % 40), d->len);
		if (te_cli_sess_submit(g->c, s) != 0)
			die("submit", EINVAL);
		g->submitted++;
	}
}

static void
gen_sessions(void)
{
	static const struct te_srv_ctx ctx = {
		.check = chk, .release = rel, .instance = FZ_TE_INSTANCE};

	mem = fz_te_map();
	if (mem == NULL || (uintptr_t)mem != FZ_TE_BASE)
		die("the server memory must sit at FZ_TE_BASE", EADDRINUSE);
	for (size_t i = 0; i < FZ_TE_NSCENS; i++) {
		static struct gen_cli g;
		const struct fz_te_scen *sc = &fz_te_scens[i];
		struct te_cli_sess_cfg cfg = {
			.proto = sc->proto,
			.instance = sc->instance,
			.max_inflight = sc->max_inflight,
			.max_inflight_bytes = sc->max_inflight_bytes,
			.done = gen_done,
		};
		struct buf c2s = {0}, s2c = {0};
		struct te_srv_sess *s;
		size_t fed = 0;
		bool moved = true;

		fz_te_reset(mem);
		memset(&g, 0, sizeof(g));
		g.sc = sc;
		if (te_cli_sess_create(&cfg, &g.c) != 0 || te_srv_sess_create(&ctx, &s) != 0)
			die("session create", EINVAL);
		gen_refill(&g);
		while (moved && te_cli_sess_error(g.c) == 0) {
			struct iovec iov[8];
			unsigned n;

			moved = false;
			while ((n = te_cli_sess_tx_iov(g.c, iov, 8)) > 0) {
				size_t t = 0;

				for (unsigned k = 0; k < n; k++) {
					buf_add(&c2s, iov[k].iov_base, iov[k].iov_len);
					t += iov[k].iov_len;
				}
				te_cli_sess_tx_advance(g.c, t);
				gen_refill(&g);
				moved = true;
			}
			if (fed < c2s.len && te_srv_sess_close_reason(s) == 0) {
				size_t used = te_srv_sess_feed(s, c2s.p + fed, c2s.len - fed);

				fed += used;
				moved = moved || used > 0;
			}
			while ((n = te_srv_sess_tx_iov(s, iov, 8)) > 0) {
				size_t t = 0;

				for (unsigned k = 0; k < n; k++) {
					buf_add(&s2c, iov[k].iov_base, iov[k].iov_len);
					te_cli_sess_feed(g.c, iov[k].iov_base, iov[k].iov_len);
					t += iov[k].iov_len;
				}
				te_srv_sess_tx_advance(s, t);
				gen_refill(&g);
				moved = true;
			}
			if (te_srv_sess_close_reason(s) != 0)
				break; /* the server closes the connection */
		}
		write_seed("te_srv_sess", sc->name, c2s.p, c2s.len);
		write_seed("te_cli_sess", sc->name, s2c.p, s2c.len);
		te_cli_sess_destroy(g.c, -ECONNRESET);
		te_srv_sess_destroy(s);
		free(c2s.p);
		free(s2c.p);
	}
}

/* ------------------------------------------------------------ JSON encoders */

static struct te_desc_buf tcp_bufs[2] = {
	{.name = "10.0.0.1:12345", .addr = 0x7f3a40000000, .length = 1u << 30},
	{.name = "10.0.0.1:12345", .addr = 0x7f3a80000000, .length = 64u << 20},
};
static struct te_desc tcp_desc = {
	.name = "10.0.0.1:12345",
	.protocol = "tcp",
	.tcp_data_port = 40123,
	.tcp_proto_version = TE_PROTO_NATIVE,
	.timestamp = "2026-01-01 00:00:00",
	.instance = 0x5eed5eed12345678,
	.data_ip = "10.0.1.1",
	.nbufs = 2,
	.bufs = tcp_bufs,
};

static void
gen_json(void)
{
	static struct te_desc_buf rbufs[1] = {{.name = "cpu:0",
					       .addr = 0x7f0000000000,
					       .length = 1u << 30,
					       .nkeys = 2,
					       .rkey = {2097664, 2097665},
					       .lkey = {2097664, 2097665}}};
	struct te_desc rdma = {
		.name = "10.0.0.2:12345",
		.protocol = "rdma",
		.tcp_data_port = 40124,
		.tcp_proto_version = TE_PROTO_NATIVE,
		.timestamp = "2026-01-01 00:00:00",
		.instance = 0x1234,
		.nbufs = 1,
		.bufs = rbufs,
		.ndevs = 2,
		.devs = {{"mlx5_0", 0, "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02"},
			 {"mlx5_1", 7, "fe:80:00:00:00:00:00:00:02:02:c9:ff:fe:01:02:03"}},
	};
	struct te_rdma_hs hs = {
		.local_nic_path = "10.0.0.1:12345@mlx5_0",
		.peer_nic_path = "10.0.0.2:12345@mlx5_1",
		.has_lid = true,
		.local_gid = "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01",
		.nqp = 2,
		.qp_num = {1234, 1235},
	};
	/* What stock Mooncake nodes publish (spec 6.3; te_desc_ut.c's samples). */
	static const char mc_tcp[] =
		"{\"name\":\"10.0.0.1:12345\",\"protocol\":\"tcp\",\"tcp_data_port\":40123,"
		"\"timestamp\":\"2026-08-22 12:00:00\",\"devices\":[],"
		"\"priority_matrix\":{},\"buffers\":[{\"name\":\"10.0.0.1:12345\","
		"\"addr\":140737488355328,\"length\":1073741824,\"rkey\":[1],\"lkey\":[2]}]}";
	static const char mc_rdma[] =
		"{\"name\":\"10.0.0.2:12345\",\"protocol\":\"rdma\",\"tcp_data_port\":0,"
		"\"timestamp\":\"2026-08-22 12:00:00\",\"devices\":[{\"name\":\"mlx5_2\",\"lid\":0,"
		"\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02\"}],\"buffers\":[{"
		"\"name\":\"cpu:0\",\"addr\":140737488355328,\"length\":1073741824,\"rkey\":["
		"2097664],"
		"\"lkey\":[2097664]}],\"priority_matrix\":{\"cpu:0\":[[\"mlx5_2\"],[]]}}";
	char *j;

	if (te_desc_encode(&tcp_desc, &j) != 0)
		die("te_desc_encode", ENOMEM);
	write_seed("te_desc", "desc_tcp.json", j, strlen(j));
	free(j);
	if (te_desc_encode(&rdma, &j) != 0)
		die("te_desc_encode", ENOMEM);
	write_seed("te_desc", "desc_rdma.json", j, strlen(j));
	free(j);
	if (te_rpcmeta_encode("10.0.0.1", 12345, &j) != 0)
		die("te_rpcmeta_encode", ENOMEM);
	write_seed("te_desc", "rpc_meta.json", j, strlen(j));
	free(j);
	if (te_rdma_hs_encode(&hs, &j) != 0)
		die("te_rdma_hs_encode", ENOMEM);
	write_seed("te_desc", "rdma_connection.json", j, strlen(j));
	free(j);
	snprintf(hs.reply_msg, sizeof(hs.reply_msg), "no such device");
	if (te_rdma_hs_encode(&hs, &j) != 0)
		die("te_rdma_hs_encode", ENOMEM);
	write_seed("te_desc", "rdma_connection_refused.json", j, strlen(j));
	free(j);
	write_seed("te_desc", "mooncake_tcp.json", mc_tcp, sizeof(mc_tcp) - 1);
	write_seed("te_desc", "mooncake_rdma.json", mc_rdma, sizeof(mc_rdma) - 1);
	write_seed("te_desc", "segment_name", "10.0.0.1:12345", 14);
	write_seed("te_desc", "segment_name_v6", "[fd00::1]:12345", 15);
}

/* ------------------------------------------------------------ recording relay */

#define MAX_REC 64

struct relay {
	int lfd;
	uint16_t port, up_port;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned accepted, done;
	struct buf c2s[MAX_REC], s2c[MAX_REC];
	bool stop;
};

static int
tcp_connect(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		die("relay connect", errno);
	return fd;
}

/* Copy what fd has into to and rec; false at EOF or error (then to is shut for writing). */
static bool
pump(int from, int to, struct buf *rec)
{
	uint8_t b[65536];
	ssize_t n = recv(from, b, sizeof(b), 0);

	if (n <= 0) {
		shutdown(to, SHUT_WR);
		return false;
	}
	buf_add(rec, b, (size_t)n);
	for (ssize_t off = 0; off < n;) {
		ssize_t k = send(to, b + off, (size_t)(n - off), MSG_NOSIGNAL);

		if (k <= 0)
			return true; /* the other side went; keep draining this one */
		off += k;
	}
	return true;
}

static void *
relay_main(void *arg)
{
	struct relay *r = arg;

	for (;;) {
		int c = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC), u;
		bool c_open = true, u_open = true;
		unsigned i;

		if (c < 0) {
			if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
				return NULL;
			continue;
		}
		pthread_mutex_lock(&r->mu);
		i = r->accepted++;
		pthread_mutex_unlock(&r->mu);
		if (i >= MAX_REC)
			die("relay: too many connections", ENOSPC);
		u = tcp_connect(r->up_port);
		while (c_open || u_open) {
			struct pollfd p[2] = {{c_open ? c : -1, POLLIN, 0},
					      {u_open ? u : -1, POLLIN, 0}};

			if (poll(p, 2, 5000) <= 0)
				break;
			if (c_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
				c_open = pump(c, u, &r->c2s[i]);
			if (u_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
				u_open = pump(u, c, &r->s2c[i]);
		}
		close(c);
		close(u);
		pthread_mutex_lock(&r->mu);
		r->done++;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
}

static void
relay_start(struct relay *r, uint16_t up_port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);

	memset(r, 0, sizeof(*r));
	r->up_port = up_port;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(r->lfd, 16) != 0 || getsockname(r->lfd, (struct sockaddr *)&sa, &sl) != 0)
		die("relay listen", errno);
	r->port = ntohs(sa.sin_port);
	if (pthread_create(&r->th, NULL, relay_main, r) != 0)
		die("relay thread", EAGAIN);
}

/* Wait until every accepted connection is finished; returns how many there were. */
static unsigned
relay_settle(struct relay *r)
{
	unsigned n;

	pthread_mutex_lock(&r->mu);
	while (r->done < r->accepted)
		pthread_cond_wait(&r->cv, &r->mu);
	n = r->accepted;
	pthread_mutex_unlock(&r->mu);
	return n;
}

static void
relay_stop(struct relay *r)
{
	__atomic_store_n(&r->stop, true, __ATOMIC_RELEASE);
	shutdown(r->lfd, SHUT_RDWR);
	pthread_join(r->th, NULL);
	close(r->lfd);
	for (unsigned i = 0; i < MAX_REC; i++) {
		free(r->c2s[i].p);
		free(r->s2c[i].p);
	}
}

/* Append b with "Host: 127.0.0.1:<ephemeral>" made "Host: 127.0.0.1:8080" (stable seeds). */
static void
add_http(struct buf *o, const struct buf *b)
{
	const char *h = memmem(b->p, b->len, "\r\nHost: 127.0.0.1:", 18);

	if (h == NULL) {
		buf_add(o, b->p, b->len);
		return;
	}
	h += 18;
	buf_add(o, b->p, (size_t)((const uint8_t *)h - b->p));
	buf_str(o, "8080");
	while ((const uint8_t *)h < b->p + b->len && *h >= '0' && *h <= '9')
		h++;
	buf_add(o, h, (size_t)(b->p + b->len - (const uint8_t *)h));
}

static void
write_http(const char *target, const char *name, const struct buf *b)
{
	struct buf o = {0};

	add_http(&o, b);
	write_seed(target, name, o.p, o.len);
	free(o.p);
}

/* Replies of connections [a, b) joined with FZ_SEP (the te_meta_fuzz convention). */
static void
write_replies(const char *name, struct relay *r, unsigned a, unsigned b)
{
	struct buf o = {0};

	for (unsigned i = a; i < b; i++) {
		if (i > a)
			buf_str(&o, FZ_SEP);
		buf_add(&o, r->s2c[i].p, r->s2c[i].len);
	}
	write_seed("te_meta", name, o.p, o.len);
	free(o.p);
}

/* --------------------------------------------------------- handshake traffic */

static void
gen_handshake(void)
{
	struct te_meta *srv = NULL, *cli = NULL;
	struct te_desc *d = NULL;
	struct relay r;
	char err[256], host[TE_NAME_MAX], name[64], *reply, *hsj;
	size_t rlen;
	unsigned n;
	int rc;
	struct te_rdma_hs hs = {
		.local_nic_path = "10.0.0.1:12345@mlx5_0",
		.peer_nic_path = "10.0.0.2:12345@mlx5_0",
		.local_gid = "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01",
		.nqp = 2,
		.qp_num = {1234, 1235},
	};

	if ((rc = te_meta_open("P2PHANDSHAKE", "127.0.0.1", 0, 3000, &srv, err, sizeof(err))) !=
		    0 ||
	    (rc = te_meta_open("P2PHANDSHAKE", "127.0.0.1", 0, 3000, &cli, err, sizeof(err))) != 0)
		die(err, rc);
	relay_start(&r, te_meta_rpc_port(srv));
	snprintf(name, sizeof(name), "127.0.0.1:%u", (unsigned)r.port);

	/* Before anything is published: the "{}" answer. */
	rc = te_meta_fetch(cli, name, &d, host, sizeof(host), err, sizeof(err));
	if (rc != -ENOENT)
		die("fetch before publish", rc);
	n = relay_settle(&r);
	write_seed("te_meta", "hs_metadata_request_empty", r.c2s[0].p, r.c2s[0].len);
	write_replies("hs_metadata_reply_empty", &r, 0, 1);

	if ((rc = te_meta_publish(srv, &tcp_desc, NULL)) != 0 ||
	    (rc = te_meta_publish(cli, &tcp_desc, NULL)) != 0)
		die("publish", rc);
	rc = te_meta_fetch(cli, name, &d, host, sizeof(host), err, sizeof(err));
	if (rc != 0)
		die(err, rc);
	te_desc_free(d);
	relay_settle(&r);
	write_seed("te_meta", "hs_metadata_request", r.c2s[n].p, r.c2s[n].len);
	write_replies("hs_metadata_reply", &r, n, n + 1);
	/* A legacy untyped frame: u64 length, then the JSON (no type byte). */
	{
		struct buf o = {0};
		uint64_t len = r.c2s[n].len - 9;

		buf_add(&o, &len, 8);
		buf_add(&o, r.c2s[n].p + 9, (size_t)len);
		write_seed("te_meta", "hs_metadata_request_legacy", o.p, o.len);
		free(o.p);
	}
	n++;

	if (te_rdma_hs_encode(&hs, &hsj) != 0)
		die("te_rdma_hs_encode", ENOMEM);
	rc = te_meta_request(cli, name, TE_HS_CONNECTION, hsj, strlen(hsj), &reply, &rlen, err,
			     sizeof(err));
	if (rc != 0)
		die(err, rc);
	free(reply);
	free(hsj);
	relay_settle(&r);
	write_seed("te_meta", "hs_connection_request", r.c2s[n].p, r.c2s[n].len);
	write_replies("hs_connection_reply_refused", &r, n, n + 1);
	n++;
	rc = te_meta_request(cli, name, TE_HS_PROBE, "{}", 2, &reply, &rlen, err, sizeof(err));
	if (rc != 0)
		die(err, rc);
	free(reply);
	relay_settle(&r);
	write_seed("te_meta", "hs_probe_request", r.c2s[n].p, r.c2s[n].len);
	write_replies("hs_probe_reply", &r, n, n + 1);
	n++;
	rc = te_meta_request(cli, name, TE_HS_NOTIFY, "{}", 2, &reply, &rlen, err, sizeof(err));
	if (rc != 0)
		die(err, rc);
	free(reply);
	relay_settle(&r);
	write_seed("te_meta", "hs_notify_request", r.c2s[n].p, r.c2s[n].len);
	write_replies("hs_notify_reply", &r, n, n + 1);

	relay_stop(&r);
	te_meta_close(cli);
	te_meta_close(srv);
}

/* ---------------------------------------------------------- HTTP traffic */

static void
gen_http(void)
{
	struct tide_mc_server_opts o;
	struct tide_mc_server *ms;
	struct te_meta *m;
	struct te_desc *d = NULL;
	struct relay meta, admin;
	char url[128], err[256], host[TE_NAME_MAX], *body;
	size_t blen;
	unsigned a, b;
	struct buf flow = {0};
	static const char *const admin_paths[] = {"health", "metrics", "get_all_segments",
						  "query_key"};
	int rc;

	tide_mc_server_opts_init(&o, sizeof(o));
	o.rpc_address = "127.0.0.1";
	o.rpc_port = 0;
	o.rpc_thread_num = 1;
	o.enable_metrics = true;
	o.metrics_host = "127.0.0.1";
	o.metrics_port = 0;
	o.enable_http_metadata = true;
	o.http_metadata_host = "127.0.0.1";
	o.http_metadata_port = 0;
	rc = tide_mc_server_create(&o, &ms);
	if (rc != 0)
		die("tide_mc_server_create", rc);
	relay_start(&meta, tide_mc_server_metadata_port(ms));
	relay_start(&admin, tide_mc_server_metrics_port(ms));

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", (unsigned)meta.port);
	rc = te_meta_open(url, "127.0.0.1", 0, 3000, &m, err, sizeof(err));
	if (rc != 0)
		die(err, rc);
	/* Not published yet: 404s. */
	rc = te_meta_fetch(m, tcp_desc.name, &d, host, sizeof(host), err, sizeof(err));
	if (rc != -ENOENT)
		die("fetch before publish", rc);
	a = relay_settle(&meta);
	write_http("mc_http", "get_ram_missing", &meta.c2s[0]);
	write_replies("http_get_404", &meta, 0, a);
	/* Publish: PUT rpc_meta, PUT ram/<name>. */
	rc = te_meta_publish(m, &tcp_desc, "127.0.0.1");
	if (rc != 0)
		die("publish", rc);
	b = relay_settle(&meta);
	for (unsigned i = a; i < b; i++) {
		char nm[64];

		snprintf(nm, sizeof(nm), "put_%u", i - a);
		write_http("mc_http", nm, &meta.c2s[i]);
		snprintf(nm, sizeof(nm), "http_put_reply_%u", i - a);
		write_replies(nm, &meta, i, i + 1);
	}
	/* Fetch: GET ram/<name>, GET rpc_meta/<name>. */
	rc = te_meta_fetch(m, tcp_desc.name, &d, host, sizeof(host), err, sizeof(err));
	if (rc != 0)
		die(err, rc);
	te_desc_free(d);
	a = b;
	b = relay_settle(&meta);
	for (unsigned i = a; i < b; i++) {
		char nm[64];

		snprintf(nm, sizeof(nm), "get_%u", i - a);
		write_http("mc_http", nm, &meta.c2s[i]);
	}
	write_replies("http_fetch_replies", &meta, a, b);
	/* A conflicting rpc_meta (another instance, same name): 400. */
	{
		struct te_http *h;
		static const char other[] = "{\"ip_or_host_name\":\"10.9.9.9\",\"rpc_port\":1}";

		if (te_http_open(url, 3000, &h, err, sizeof(err)) != 0)
			die(err, EINVAL);
		rc = te_http_put(h, "mooncake/rpc_meta/10.0.0.1:12345", other, sizeof(other) - 1);
		if (rc != -EEXIST)
			die("conflicting rpc_meta", rc);
		te_http_close(h);
		a = b;
		b = relay_settle(&meta);
		write_http("mc_http", "put_rpc_meta_conflict", &meta.c2s[a]);
		write_replies("http_put_400", &meta, a, b);
	}
	/* Close: DELETE both keys. */
	te_meta_close(m);
	a = b;
	b = relay_settle(&meta);
	for (unsigned i = a; i < b; i++) {
		char nm[64];

		snprintf(nm, sizeof(nm), "delete_%u", i - a);
		write_http("mc_http", nm, &meta.c2s[i]);
		snprintf(nm, sizeof(nm), "http_delete_reply_%u", i - a);
		write_replies(nm, &meta, i, i + 1);
	}
	/* The whole metadata conversation as one mc_http input (parts persist). */
	for (unsigned i = 0; i < b; i++) {
		if (i > 0)
			buf_str(&flow, FZ_SEP);
		add_http(&flow, &meta.c2s[i]);
	}
	write_seed("mc_http", "metadata_session", flow.p, flow.len);
	free(flow.p);

	/* Admin port, with te_http's request shape. */
	for (size_t i = 0; i < sizeof(admin_paths) / sizeof(admin_paths[0]); i++) {
		struct te_http *h;
		char nm[64];

		snprintf(url, sizeof(url), "http://127.0.0.1:%u/%s", (unsigned)admin.port,
			 admin_paths[i]);
		if (te_http_open(url, 3000, &h, err, sizeof(err)) != 0)
			die(err, EINVAL);
		body = NULL;
		rc = te_http_get(h, "fuzz/key", &body, &blen);
		free(body);
		te_http_close(h);
		a = relay_settle(&admin) - 1;
		snprintf(nm, sizeof(nm), "admin_%s", admin_paths[i]);
		write_http("mc_http", nm, &admin.c2s[a]);
		snprintf(nm, sizeof(nm), "http_admin_%s_reply", admin_paths[i]);
		write_replies(nm, &admin, a, a + 1);
	}
	relay_stop(&admin);
	relay_stop(&meta);
	tide_mc_server_destroy(ms);
}

/* ------------------------------------------------------------ agent traffic */

struct msg {
	uint16_t op;
	struct buf b;
};
static struct msg msgs[256];
static size_t nmsgs;
static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;

int
__wrap_agent_recv(int sock, struct agent_hdr *h, uint8_t **body, int *fd)
{
	int rc = __real_agent_recv(sock, h, body, fd);

	/* The server passes fd (it accepts descriptors); the client does not. */
	if (rc == 0 && fd != NULL) {
		pthread_mutex_lock(&msg_lock);
		if (nmsgs < sizeof(msgs) / sizeof(msgs[0])) {
			msgs[nmsgs].op = h->op;
			buf_add(&msgs[nmsgs].b, h, sizeof(*h));
			buf_add(&msgs[nmsgs].b, *body, h->len);
			/* HELLO carries the client's pid: a fixed one keeps the seeds stable. */
			if (h->op == AGENT_HELLO && h->len >= 8)
				memcpy(msgs[nmsgs].b.p + sizeof(*h) + 4, &(uint32_t){4242}, 4);
			nmsgs++;
		}
		pthread_mutex_unlock(&msg_lock);
	}
	return rc;
}

/* store_replicas.c (linked for store_agent.c's replica lists) maps the master's
 * codes with store_mc_errno(), which lives with the master client this tool does
 * not link; the agent double answers no replica list, so no code reaches it. */
int
store_mc_errno(int32_t ec)
{
	return ec == 0 ? 0 : -EPROTO;
}

/* A request the client API has no call for in this harness (the session ops go
 * through the store's backend), recorded as the server would read it. */
static void
record_agent(uint16_t op, const struct agent_wbuf *w)
{
	struct agent_hdr h = {.magic = AGENT_MAGIC,
			      .version = AGENT_VERSION,
			      .op = op,
			      .len = (uint32_t)w->len,
			      .seq = 1000u + (uint32_t)nmsgs};

	if (w->err != 0)
		die("agent request", ENOMEM);
	pthread_mutex_lock(&msg_lock);
	if (nmsgs < sizeof(msgs) / sizeof(msgs[0])) {
		msgs[nmsgs].op = op;
		buf_add(&msgs[nmsgs].b, &h, sizeof(h));
		buf_add(&msgs[nmsgs].b, w->p, w->len);
		nmsgs++;
	}
	pthread_mutex_unlock(&msg_lock);
}

/*
 * The session ops (AGENT_PUT_SESS_START, AGENT_SESS_RANGES, AGENT_SESS_KEYS),
 * in the layouts agent_proto.h gives, against region 1 (the session's first
 * AGENT_MAP): start two keys with a soft pin, write and read ranges, end.
 */
static void
gen_agent_sessions(const char *const *keys)
{
	struct tide_store_rc rc = {.replica_num = 1,
				   .soft_pin_action = TIDE_STORE_SOFT_PIN_ENABLE,
				   .soft_pin_ttl_ms = 5000};
	struct agent_loc l0 = {.region = 1, .off = 0, .len = 64};
	struct agent_loc l1 = {.region = 1, .off = 64, .len = 32};
	struct agent_wbuf w;

	agent_w_init(&w);
	agent_w_u32(&w, 2);
	agent_w_u32(&w, AGENT_PUT_SOFT_PIN);
	agent_w_rc(&w, &rc, 2);
	agent_w_str(&w, keys[0]);
	agent_w_u64(&w, 96);
	agent_w_str(&w, keys[1]);
	agent_w_u64(&w, 64);
	agent_w_soft_pin(&w, &rc);
	record_agent(AGENT_PUT_SESS_START, &w);
	agent_w_free(&w);
	for (int dir = 0; dir < 2; dir++) {
		agent_w_init(&w);
		agent_w_u8(&w, dir ? AGENT_SESS_PUT : AGENT_SESS_GET);
		agent_w_u32(&w, 2);
		agent_w_str(&w, keys[0]);
		agent_w_u32(&w, 2);
		agent_w_loc(&w, &l0);
		agent_w_u64(&w, 0);
		agent_w_loc(&w, &l1);
		agent_w_u64(&w, 64);
		agent_w_str(&w, keys[1]);
		agent_w_u32(&w, 1);
		agent_w_loc(&w, &l0);
		agent_w_u64(&w, 0);
		record_agent(AGENT_SESS_RANGES, &w);
		agent_w_free(&w);
	}
	for (uint8_t what = AGENT_SESS_PUT_END; what <= AGENT_SESS_GET_END; what++) {
		agent_w_init(&w);
		agent_w_u8(&w, what);
		agent_w_u32(&w, 2);
		agent_w_str(&w, keys[0]);
		agent_w_str(&w, keys[1]);
		record_agent(AGENT_SESS_KEYS, &w);
		agent_w_free(&w);
	}
}

static void
gen_agent(void)
{
	char dir[64], path[128], why[256] = "agent attach";
	struct tide_agent_server *srv;
	struct tide_agent_conn *a;
	struct tide_store_cfg cfg = {
		.protocol = "tcp",
		.local_buffer_size = 64u << 10,
		.agent = TIDE_STORE_AGENT_REQUIRED,
	};
	const char *keys[3] = {"fuzz/a", "fuzz/b", "fuzz/c"};
	int rcs[3], ex[3];
	int64_t sizes[3];
	void *lb = NULL, *mb = NULL;
	size_t lblen, lens[3] = {64, 128, 256};
	uint8_t heap[512];
	struct tide_store_rc rc = {.replica_num = 2, .preferred_segment = "10.0.0.2:12345"};
	const char *groups[3] = {"g0", "g1", ""};
	const char *prefs[2] = {"10.0.0.3:12345", "10.0.0.4:12345"};
	struct tide_store_frag fr[2];
	int r;

	snprintf(dir, sizeof(dir), "/tmp/tide-fuzz-seedgen-%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	cfg.agent_socket = path;
	r = tide_agent_server_start(fz_store(), path, &srv);
	if (r != 0)
		die("agent server", r);
	if (tide_agent_setup(&cfg, NULL, &a, why, sizeof(why)) != 1)
		die(why, ECONNREFUSED);
	memset(heap, 0x42, sizeof(heap));
	if (tide_agent_local_buffer(a, &lb, &lblen) != 0 || tide_agent_map_buffer(a, 8192, &mb))
		die("agent buffers", ENOMEM);
	/* Puts: from the local buffer (a region), from the heap (bounced), batch, with configs. */
	(void)tide_agent_put(a, "fuzz/local", lb, 1024, NULL);
	(void)tide_agent_put(a, "fuzz/heap", heap, sizeof(heap), &rc);
	{
		const void *bufs[3] = {lb, (uint8_t *)lb + 64, heap};

		rc.preferred_segments = prefs;
		rc.n_preferred_segments = 2;
		rc.group_ids = groups;
		rc.with_hard_pin = true;
		rc.prefer_alloc_in_same_node = true;
		(void)tide_agent_batch_put_from(a, keys, bufs, lens, 3, &rc, rcs);
	}
	/* Gets: into a mapped buffer, into the heap, batch, ranges. */
	(void)tide_agent_get_into(a, "fuzz/local", mb, 1024);
	(void)tide_agent_get_into(a, "fuzz/heap", heap, sizeof(heap));
	{
		void *bufs[3] = {mb, (uint8_t *)mb + 64, heap};

		(void)tide_agent_batch_get_into(a, keys, bufs, lens, 3, sizes);
	}
	fr[0] = (struct tide_store_frag){.key = 0, .src_off = 0, .dst = mb, .len = 32};
	fr[1] = (struct tide_store_frag){.key = 2, .src_off = 16, .dst = heap, .len = 64};
	(void)tide_agent_get_into_ranges(a, keys, 3, fr, 2);
	(void)tide_agent_get_size(a, "fuzz/local");
	(void)tide_agent_is_exist(a, "fuzz/local");
	(void)tide_agent_batch_is_exist(a, keys, 3, ex);
	/* The newer ops: pieces in and out (one with a soft pin), replica lists. */
	{
		struct tide_store_part parts[4] = {
			{lb, 32}, {heap, 32}, {(uint8_t *)lb + 128, 64}, {heap + 64, 16}};
		size_t np[3] = {2, 1, 1};
		struct tide_store_rc pin = {.replica_num = 1,
					    .soft_pin_action = TIDE_STORE_SOFT_PIN_ENABLE,
					    .soft_pin_ttl_ms = 1000};
		struct tide_store_replicas *reps = NULL;

		(void)tide_agent_batch_put_parts(a, keys, parts, np, 3, NULL, 0, rcs);
		(void)tide_agent_batch_put_parts(a, keys, parts, np, 3, &pin, TIDE_STORE_PUT_UPSERT,
						 rcs);
		(void)tide_agent_batch_get_parts(a, keys, parts, np, 3, sizes);
		if (tide_agent_batch_get_replicas(a, keys, 3, &reps) == 0)
			tide_store_replicas_free(reps);
		(void)tide_agent_batch_replica_clear(a, keys, 3, "10.0.0.2:12345", ex);
	}
	(void)tide_agent_remove(a, "fuzz/local", false);
	(void)tide_agent_batch_remove(a, keys, 3, true, rcs);
	(void)tide_agent_remove_by_regex(a, "^fuzz/.*", false);
	(void)tide_agent_remove_all(a, true);
	(void)tide_agent_health_check(a);
	(void)tide_agent_unmap_buffer(a, mb);
	tide_agent_close(a);
	tide_agent_server_stop(srv);
	rmdir(dir);
	gen_agent_sessions(keys);

	/* The whole session, then per operation: the session's hello and maps, then it. */
	{
		struct buf all = {0};
		bool seen[AGENT_OP_MAX] = {false};

		for (size_t i = 0; i < nmsgs; i++)
			buf_add(&all, msgs[i].b.p, msgs[i].b.len);
		write_seed("agent", "session", all.p, all.len);
		free(all.p);
		for (size_t i = 0; i < nmsgs; i++) {
			uint16_t op = msgs[i].op;
			struct buf one = {0};
			char nm[64];

			if (op >= AGENT_OP_MAX || seen[op] || op == AGENT_HELLO || op == AGENT_MAP)
				continue;
			seen[op] = true;
			for (size_t j = 0; j < i; j++)
				if (msgs[j].op == AGENT_HELLO || msgs[j].op == AGENT_MAP)
					buf_add(&one, msgs[j].b.p, msgs[j].b.len);
			buf_add(&one, msgs[i].b.p, msgs[i].b.len);
			snprintf(nm, sizeof(nm), "%s", agent_op_name(op));
			write_seed("agent", nm, one.p, one.len);
			free(one.p);
		}
		for (size_t i = 0; i < nmsgs; i++)
			free(msgs[i].b.p);
	}
}

/* -------------------------------------------------------------- node files */

static void
gen_nodeenv(const char *src_root)
{
	char path[1024], err[4096];
	struct tide_nodeenv *ne = malloc(sizeof(*ne));
	char *const env[] = {NULL};
	struct buf b = {0};
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int c;

	snprintf(path, sizeof(path), "%s/tools/node.env.sample", src_root);
	f = fopen(path, "r");
	if (f == NULL || ne == NULL)
		die(path, errno);
	while ((c = fgetc(f)) != EOF) {
		uint8_t ch = (uint8_t)c;

		buf_add(&b, &ch, 1);
	}
	fclose(f);
	write_seed("nodeenv", "node.env.sample", b.p, b.len);
	free(b.p);
	if (tide_nodeenv_load(ne, path, env, err, sizeof(err)) != 0)
		die(err, EINVAL);
	f = open_memstream(&text, &len);
	if (f == NULL)
		die("open_memstream", errno);
	tide_nodeenv_dump(ne, f);
	fclose(f);
	write_seed("nodeenv", "node.env.sample.dump", text, len);
	free(text);
	free(ne);
}

int
main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s <corpus dir> <source root>\n", argv[0]);
		return 2;
	}
	out_dir = argv[1];
	signal(SIGPIPE, SIG_IGN);
	tide_log_set_level(TIDE_LOG_ERR);
	unsetenv("MC_METADATA_CLUSTER_ID");
	printf("fuzz_seedgen: writing %s\n", out_dir);
	gen_sessions();
	gen_json();
	gen_handshake();
	gen_http();
	gen_agent();
	gen_nodeenv(argv[2]);
	return 0;
}
