/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Linux baseline: the same protocol over kernel TCP on 127.0.0.1, one
 * thread per process pinned like the Tide worker, non-blocking sockets with
 * TCP_NODELAY driven by edge-triggered epoll, default (autotuned) buffers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_bench.h"

#define RXBUF (256u * 1024)

struct kside {
	struct nb_endpoint ep;
	int epfd, lfd;
	uint16_t port;
	uint8_t *rxbuf;
};

static uint64_t
tag(const struct nb_endpoint *ep, const struct nb_flow *f)
{
	return (uint64_t)(f - ep->flows) | (uint64_t)f->gen << 32;
}

static int
watch(struct kside *k, struct nb_flow *f)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				 .data.u64 = tag(&k->ep, f)};
	int one = 1;

	setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return epoll_ctl(k->epfd, EPOLL_CTL_ADD, f->fd, &ev) == 0 ? 0 : -errno;
}

static ssize_t
x_send(struct nb_endpoint *ep, struct nb_flow *f, const void *p, size_t n)
{
	ssize_t r;

	(void)ep;
	do
		r = send(f->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r >= 0)
		return r;
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

static int
x_connect(struct nb_endpoint *ep, struct nb_flow *f)
{
	struct kside *k = ep->xctx;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(k->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int rc;

	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->fd < 0)
		return -errno;
	/* Loopback connects complete at once; blocking keeps this simple. */
	if (connect(f->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = -errno;
		close(f->fd);
		f->fd = -1;
		return rc;
	}
	fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) | O_NONBLOCK);
	rc = watch(k, f);
	if (rc == 0)
		nb_on_connected(f);
	return rc;
}

static void
x_close(struct nb_endpoint *ep, struct nb_flow *f)
{
	struct kside *k = ep->xctx;

	if (f->fd < 0)
		return;
	epoll_ctl(k->epfd, EPOLL_CTL_DEL, f->fd, NULL);
	close(f->fd);
	f->fd = -1;
}

static const struct nb_xport_ops kernel_ops = {
	.send = x_send, .connect = x_connect, .close = x_close};

static void
accept_all(struct kside *k)
{
	for (;;) {
		int fd = accept4(k->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct nb_flow *f;

		if (fd < 0)
			return;
		f = nb_flow_alloc(&k->ep);
		if (f == NULL) {
			close(fd);
			continue;
		}
		f->fd = fd;
		if (watch(k, f) != 0)
			nb_on_error(f, -EIO);
	}
}

static void
flow_event(struct kside *k, struct nb_flow *f, uint32_t events)
{
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		while (f->in_use && !f->closed) {
			ssize_t r = recv(f->fd, k->rxbuf, RXBUF, MSG_DONTWAIT);

			if (r > 0) {
				nb_on_data(f, k->rxbuf, (size_t)r);
				continue;
			}
			if (r == 0) {
				nb_on_peer_closed(f);
				break;
			}
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				nb_on_error(f, -errno);
			break;
		}
	}
	if ((events & EPOLLOUT) && f->in_use && !f->closed)
		nb_on_writable(f);
}

static int
loop(struct kside *k, const struct nb_cfg *cfg)
{
	struct epoll_event evs[64];

	while (!__atomic_load_n(&k->ep.finished, __ATOMIC_ACQUIRE)) {
		int n = epoll_wait(k->epfd, evs, 64, 1);
		uint64_t now;

		if (n < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; i < n; i++) {
			uint64_t t = evs[i].data.u64;
			struct nb_flow *f;

			if (t == UINT64_MAX) {
				accept_all(k);
				continue;
			}
			f = &k->ep.flows[(uint32_t)t];
			if (f->gen == (uint32_t)(t >> 32))
				flow_event(k, f, evs[i].events);
		}
		now = nb_now_ns();
		nb_tick(&k->ep, now);
		if (now > cfg->deadline)
			return -ETIMEDOUT;
	}
	return 0;
}

int
nb_run_kernel(const struct nb_cfg *cfg, bool server)
{
	static struct kside k;
	struct nb_ctl_msg m = {0};
	cpu_set_t set;
	int rc = 0;

	CPU_ZERO(&set);
	CPU_SET(cfg->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	nb_endpoint_init(&k.ep, &kernel_ops, &k, !server, cfg->rows, cfg->nrows, cfg->warmup_s,
			 cfg->duration_s);
	k.rxbuf = malloc(RXBUF);
	k.epfd = epoll_create1(EPOLL_CLOEXEC);
	k.lfd = -1;
	k.port = cfg->port;
	if (k.rxbuf == NULL || k.epfd < 0)
		return -ENOMEM;
	if (server) {
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(sa);
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
		int one = 1;

		k.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		setsockopt(k.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (k.lfd < 0 || bind(k.lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    listen(k.lfd, 256) != 0 ||
		    getsockname(k.lfd, (struct sockaddr *)&sa, &len) != 0 ||
		    epoll_ctl(k.epfd, EPOLL_CTL_ADD, k.lfd, &ev) != 0) {
			rc = -errno;
			fprintf(stderr, "tide-net-bench: kernel listener: %s\n", strerror(errno));
			return rc;
		}
		m.port = ntohs(sa.sin_port);
	}
	m.type = NB_CTL_READY;
	nb_ctl_send(cfg->ctl, &m);
	rc = loop(&k, cfg);
	if (rc != 0 && k.ep.error == 0)
		k.ep.error = rc;
	for (unsigned i = 0; i < NB_MAX_FLOWS; i++)
		x_close(&k.ep, &k.ep.flows[i]);
	m.type = NB_CTL_RESULT;
	m.status = k.ep.error;
	memcpy(m.res, k.ep.res, sizeof(m.res));
	nb_ctl_send(cfg->ctl, &m);
	m.type = NB_CTL_QUIESCED;
	nb_ctl_send(cfg->ctl, &m);
	(void)nb_ctl_recv(cfg->ctl, &m, 30000);
	if (k.lfd >= 0)
		close(k.lfd);
	close(k.epfd);
	free(k.rxbuf);
	nb_endpoint_fini(&k.ep);
	return k.ep.error;
}
