/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Master election on etcd (see tide_master_ha.h). One loop on the caller's
 * thread: read master_view; if a leader holds it, wait for the key to change
 * (a watch, at most 500 ms at a time so a stop is seen); if it is absent,
 * grant a lease and create the key on it; the winner serves and renews the
 * lease every TTL/3 until a renewal fails past its deadline or it is told to
 * stop.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tide_addr.h"
#include "tide_clock.h"
#include "tide_etcd.h"
#include "tide_log.h"
#include "tide_master_ha.h"

#define WAIT_STEP_MS 500u /* longest wait between looks at *stop */
#define RETRY_MS     500u /* after an etcd error */
/* Per etcd call. A renewal stuck this long can return after the leader's
 * deadline, even after etcd expired the lease: the leader's server stops
 * answering at the deadline by itself (ops->lease), and its journal's writes
 * are fenced, so the late step-down here changes nothing a client sees. */
#define ETCD_CALL_MS 1000u

struct ha {
	const struct tide_master_ha_ops *ops;
	void *arg;
	atomic_bool *stop;
	struct tide_etcd *e;
	char key[256];
	const char *self;
	unsigned ttl_s;
	char last_state[24], last_leader[TIDE_MASTER_HA_LEADER_MAX];
	int64_t last_view;
};

int
tide_master_ha_cluster_path(const char *root, const char *cluster_id, const char *leaf, char *buf,
			    size_t len)
{
	const char *c =
		cluster_id != NULL && cluster_id[0] != '\0' ? cluster_id : "mooncake_cluster";
	size_t n = strlen(c);
	int w;

	/* Mooncake strips one trailing '/'. */
	if (n > 0 && c[n - 1] == '/')
		n--;
	w = snprintf(buf, len, "%s/%.*s/%s", root, (int)n, c, leaf);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int
tide_master_ha_key(const char *cluster_id, char *buf, size_t len)
{
	return tide_master_ha_cluster_path("mooncake-store", cluster_id, "master_view", buf, len);
}

static bool
stopping(const struct ha *h)
{
	return atomic_load(h->stop);
}

static bool
unhealthy(const struct ha *h)
{
	return h->ops->healthy != NULL && !h->ops->healthy(h->arg);
}

/* Sleep ms in steps, returning early on stop. */
static void
nap(const struct ha *h, unsigned ms)
{
	while (ms > 0 && !stopping(h)) {
		unsigned step = ms < 100 ? ms : 100;

		usleep(step * 1000u);
		ms -= step;
	}
}

bool
tide_master_ha_leader_valid(const char *v, size_t n)
{
	char buf[TIDE_MASTER_HA_LEADER_MAX];
	uint16_t port = 0;

	if (n == 0 || n >= sizeof(buf) || strncmp(v, "__mooncake_service_warming__", 28) == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && strchr(".:-_[]", v[i]) == NULL)
			return false;
	memcpy(buf, v, n);
	buf[n] = '\0';
	return tide_addr_split(buf, NULL, 0, &port, 0, NULL) == 0 && port != 0;
}

static void
report(struct ha *h, const char *role, const char *state, const char *leader, int64_t view)
{
	struct tide_master_ha_status st = {
		.role = role, .state = state, .leader = leader, .view_version = view};

	if (strcmp(state, h->last_state) == 0 && strcmp(leader, h->last_leader) == 0 &&
	    view == h->last_view)
		return;
	if (strcmp(state, h->last_state) != 0 || strcmp(leader, h->last_leader) != 0)
		TIDE_LOG(NOTICE, "HA: %s (%s)%s%s, view %" PRId64, role, state,
			 leader[0] ? ", leader " : "", leader, view);
	snprintf(h->last_state, sizeof(h->last_state), "%s", state);
	snprintf(h->last_leader, sizeof(h->last_leader), "%s", leader);
	h->last_view = view;
	if (h->ops->status != NULL)
		h->ops->status(h->arg, &st);
}

/*
 * Lease timing. A renewal is sent every TTL/6; the leader counts on its lease
 * until TTL - TTL/4 after the send time of the last renewal etcd
 * acknowledged. etcd expires a lease TTL after it *received* that renewal, so
 * the leader always stops first (by TTL/4, for clock rate differences and
 * the time etcd takes to count a renewal); and between renewals there is
 * TTL - TTL/4 - TTL/6 (1.17 s at the default 2 s) for one to get through on
 * a loaded machine before the leader gives up.
 */
static uint64_t
lease_period_ns(const struct ha *h)
{
	return (uint64_t)h->ttl_s * 1000000000ull / 6;
}

static uint64_t
lease_deadline_ns(const struct ha *h, uint64_t sent)
{
	uint64_t ttl = (uint64_t)h->ttl_s * 1000000000ull;

	return sent + ttl - ttl / 4;
}

/*
 * Renews the lease from the moment it is granted until the leadership ends,
 * on its own thread: serve() rebuilds the table from etcd first, which can
 * take longer than a TTL on a loaded machine (4-5 s under meson's
 * MALLOC_PERTURB_, which fills every allocation), and a lease that lapses
 * meanwhile hands the leadership to the next master, which rebuilds too.
 */
struct keeper {
	struct ha *h;
	int64_t lease;
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	_Atomic uint64_t deadline; /* CLOCK_MONOTONIC ns */
	atomic_bool lost;          /* etcd said the lease is gone */
};

static void *
keeper_main(void *arg)
{
	struct keeper *k = arg;
	struct ha *h = k->h;
	uint64_t next = tide_mono_ns();

	for (;;) {
		uint64_t now = tide_mono_ns();
		struct timespec ts;
		bool stop;

		if (now >= next) {
			int rc = tide_etcd_lease_keepalive(h->e, k->lease, NULL);

			if (rc == 0) {
				atomic_store(&k->deadline, lease_deadline_ns(h, now));
				next = now + lease_period_ns(h);
				if (h->ops->lease != NULL)
					h->ops->lease(h->arg, lease_deadline_ns(h, now));
			} else if (rc == -ENOENT) {
				atomic_store(&k->lost, true);
				break;
			} else {
				/* Try again soon, until the deadline. */
				next = tide_mono_ns() + 100000000ull;
				TIDE_LOG_RATELIMIT(WARN, 5, "HA: lease renewal failed: %s",
						   strerror(-rc));
			}
		}
		/* next is CLOCK_MONOTONIC ns, the clock the condition variable waits on. */
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		pthread_mutex_lock(&k->lock);
		if (!k->stop)
			pthread_cond_timedwait(&k->cond, &k->lock, &ts);
		stop = k->stop;
		pthread_mutex_unlock(&k->lock);
		if (stop)
			break;
	}
	return NULL;
}

static int
keeper_start(struct keeper *k, struct ha *h, int64_t lease, uint64_t granted)
{
	pthread_condattr_t ca;
	int rc;

	memset(k, 0, sizeof(*k));
	k->h = h;
	k->lease = lease;
	atomic_store(&k->deadline, lease_deadline_ns(h, granted));
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&k->th, NULL, keeper_main, k);
	if (rc != 0) {
		pthread_cond_destroy(&k->cond);
		pthread_mutex_destroy(&k->lock);
	}
	return rc;
}

static void
keeper_stop(struct keeper *k)
{
	pthread_mutex_lock(&k->lock);
	k->stop = true;
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->th, NULL);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
}

/*
 * Serve while the lease lives (the keeper renews it). Returns when stopping
 * (lease revoked) or when the lease is lost (etcd refused a renewal, or none
 * was acknowledged before the deadline) or the master is unhealthy. The
 * keeper is stopped before unserve(), so ops->lease never races with it.
 */
static void
lead(struct ha *h, struct keeper *k, int64_t view)
{
	bool unhealthy_exit = false;
	int rc;

	report(h, "leader", "serving", h->self, view);
	while (!stopping(h)) {
		if (atomic_load(&k->lost)) {
			TIDE_LOG(ERR, "HA: etcd says lease %" PRId64 " expired: stepping down",
				 k->lease);
			break;
		}
		if (tide_mono_ns() >= atomic_load(&k->deadline)) {
			TIDE_LOG(ERR, "HA: no lease renewal acknowledged in time: stepping down");
			break;
		}
		if (unhealthy(h)) {
			TIDE_LOG(ERR, "HA: this master cannot go on leading: stepping down");
			unhealthy_exit = true;
			break;
		}
		nap(h, 50);
	}
	keeper_stop(k);
	h->ops->unserve(h->arg);
	if (unhealthy_exit) {
		/* Hand over now; this master waits before it campaigns again. */
		(void)tide_etcd_lease_revoke(h->e, k->lease);
		nap(h, 1000);
	} else if (stopping(h)) {
		/* Hand over at once: revoking deletes master_view. */
		rc = tide_etcd_lease_revoke(h->e, k->lease);
		if (rc != 0)
			TIDE_LOG(WARN, "HA: revoking lease %" PRId64 ": %s (it expires in %u s)",
				 k->lease, strerror(-rc), h->ttl_s);
	}
}

int
tide_master_ha_run(const struct tide_master_ha_opts *o, const struct tide_master_ha_ops *ops,
		   void *arg, atomic_bool *stop)
{
	struct ha h = {.ops = ops, .arg = arg, .stop = stop, .last_view = -1};
	int rc;

	if (o == NULL || ops == NULL || ops->serve == NULL || ops->unserve == NULL ||
	    stop == NULL || o->self == NULL ||
	    !tide_master_ha_leader_valid(o->self, strlen(o->self)))
		return -EINVAL;
	rc = tide_master_ha_key(o->cluster_id, h.key, sizeof(h.key));
	if (rc != 0)
		return -EINVAL;
	rc = tide_etcd_open(o->endpoints, ETCD_CALL_MS, &h.e);
	if (rc != 0)
		return rc;
	h.self = o->self;
	h.ttl_s = o->ttl_s != 0 ? o->ttl_s : TIDE_MASTER_HA_DEFAULT_TTL_S;
	TIDE_LOG(NOTICE, "HA: electing on %s key %s as %s, lease %u s", o->endpoints, h.key, h.self,
		 h.ttl_s);
	while (!stopping(&h)) {
		struct tide_etcd_kv kv;
		int64_t hrev = 0, lease = 0, rev = 0;
		struct keeper k;
		uint64_t granted;

		rc = tide_etcd_get(h.e, h.key, strlen(h.key), &kv, &hrev);
		if (rc == 0) {
			bool ok = tide_master_ha_leader_valid(kv.value, kv.value_len);

			report(&h, "standby", "standby", ok ? kv.value : "",
			       ok ? kv.create_revision : 0);
			tide_etcd_kv_clear(&kv);
			/* Until the key changes (deleted when the leader's lease ends). */
			rc = tide_etcd_wait_change(h.e, h.key, strlen(h.key), hrev, WAIT_STEP_MS,
						   NULL);
			if (rc < 0)
				nap(&h, RETRY_MS);
			continue;
		}
		if (rc != -ENOENT) {
			report(&h, "standby", "etcd_unreachable", "", 0);
			nap(&h, RETRY_MS);
			continue;
		}
		report(&h, "standby", "candidate", "", 0);
		granted = tide_mono_ns(); /* the lease runs at most from here */
		rc = tide_etcd_lease_grant(h.e, h.ttl_s, &lease);
		if (rc == 0)
			rc = tide_etcd_create(h.e, h.key, strlen(h.key), h.self, strlen(h.self),
					      lease, &rev);
		if (rc != 0) {
			if (lease != 0)
				(void)tide_etcd_lease_revoke(h.e, lease);
			if (rc != -EEXIST)
				nap(&h, RETRY_MS);
			continue;
		}
		TIDE_LOG(NOTICE, "HA: elected (view %" PRId64 ", lease %" PRId64 ")", rev, lease);
		if (ops->lease != NULL)
			ops->lease(arg, lease_deadline_ns(&h, granted));
		rc = keeper_start(&k, &h, lease, granted);
		if (rc == 0) {
			rc = ops->serve(arg, h.key, rev);
			if (rc != 0)
				keeper_stop(&k);
		}
		if (rc != 0) {
			TIDE_LOG(ERR, "HA: cannot serve: %s; releasing leadership", strerror(-rc));
			ops->unserve(arg);
			(void)tide_etcd_lease_revoke(h.e, lease);
			nap(&h, 1000);
			continue;
		}
		lead(&h, &k, rev);
	}
	tide_etcd_close(h.e);
	return 0;
}
