/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "mc_pool.h"
#include "tide_log.h"

void
tide_mc_pool_init(struct tide_mc_pool *p)
{
	memset(p, 0, sizeof(*p));
	store_metrics_init(&p->metrics);
	pthread_mutex_init(&p->addr_lock, NULL);
	for (int i = 0; i < TIDE_MC_POOL_N; i++)
		pthread_mutex_init(&p->conns[i].lock, NULL);
}

int
tide_mc_pool_set_master(struct tide_mc_pool *p, const char *addr)
{
	if (strlen(addr) >= sizeof(p->master))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&p->addr_lock);
	if (strcmp(p->master, addr) != 0) {
		snprintf(p->master, sizeof(p->master), "%s", addr);
		p->gen++;
	}
	pthread_mutex_unlock(&p->addr_lock);
	return 0;
}

void
tide_mc_pool_master(struct tide_mc_pool *p, char *buf, size_t len)
{
	pthread_mutex_lock(&p->addr_lock);
	snprintf(buf, len, "%s", p->master);
	pthread_mutex_unlock(&p->addr_lock);
}

void
tide_mc_pool_close_all(struct tide_mc_pool *p)
{
	for (int i = 0; i < TIDE_MC_POOL_N; i++) {
		tide_mc_client_close(p->conns[i].c);
		p->conns[i].c = NULL;
	}
}

void
tide_mc_pool_fini(struct tide_mc_pool *p)
{
	tide_mc_pool_close_all(p);
	for (int i = 0; i < TIDE_MC_POOL_N; i++)
		pthread_mutex_destroy(&p->conns[i].lock);
	pthread_mutex_destroy(&p->addr_lock);
}

struct tide_mc_pool_conn *
tide_mc_pool_get(struct tide_mc_pool *p, int timeout_ms, int *err)
{
	struct tide_mc_pool_conn *m = NULL;
	char addr[TIDE_MC_POOL_ADDR_MAX];
	unsigned gen;
	int rc;

	for (int i = 0; i < TIDE_MC_POOL_N && m == NULL; i++)
		if (pthread_mutex_trylock(&p->conns[i].lock) == 0)
			m = &p->conns[i];
	if (m == NULL) {
		m = &p->conns[atomic_fetch_add_explicit(&p->rr, 1, memory_order_relaxed) %
			      TIDE_MC_POOL_N];
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_lock(&p->addr_lock);
	snprintf(addr, sizeof(addr), "%s", p->master);
	gen = p->gen;
	pthread_mutex_unlock(&p->addr_lock);
	if (m->c != NULL && (!tide_mc_client_connected(m->c) || m->gen != gen)) {
		tide_mc_client_close(m->c);
		m->c = NULL;
	}
	if (m->c == NULL) {
		rc = addr[0] != '\0' ? tide_mc_client_connect_addr(addr, timeout_ms, &m->c)
				     : -EINVAL;
		/* The master may have moved (HA): look it up once and try the new address. */
		if (rc != 0 && p->relocate != NULL && p->relocate(p->relocate_arg) == 0) {
			pthread_mutex_lock(&p->addr_lock);
			bool moved = p->gen != gen;

			snprintf(addr, sizeof(addr), "%s", p->master);
			gen = p->gen;
			pthread_mutex_unlock(&p->addr_lock);
			if (moved)
				rc = tide_mc_client_connect_addr(addr, timeout_ms, &m->c);
		}
		if (rc != 0) {
			m->c = NULL;
			pthread_mutex_unlock(&m->lock);
			TIDE_LOG_RATELIMIT(WARN, 5, "connect to master %s: %s",
					   addr[0] != '\0' ? addr : "(none)", strerror(-rc));
			*err = rc;
			return NULL;
		}
		m->gen = gen;
		tide_mc_client_set_poll_us(m->c, p->poll_us);
		/* The timeout bounded the connect only; calls keep the client's default. */
		if (timeout_ms > 0)
			tide_mc_client_set_timeout(m->c, 0);
	}
	return m;
}

void
tide_mc_pool_put(struct tide_mc_pool_conn *m)
{
	pthread_mutex_unlock(&m->lock);
}

int
tide_mc_pool_call(struct tide_mc_pool *p, const struct tide_mc_req *r, struct tide_mc_resp *resp)
{
	/* Counted before the connection is asked for, as stock counts before it sends. */
	uint64_t t0 = store_metrics_rpc_begin(&p->metrics, r->fn);
	struct tide_mc_pool_conn *m;
	int rc;

	m = tide_mc_pool_get(p, 0, &rc);
	if (m != NULL) {
		rc = tide_mc_client_call(m->c, r, resp, NULL);
		tide_mc_pool_put(m);
	}
	store_metrics_rpc_end(&p->metrics, r->fn, t0, rc);
	return rc;
}
