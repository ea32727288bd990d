/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Holding the EAL interrupt thread: see intr_hold.h for why.
 *
 * The source is an eventfd of type RTE_INTR_HANDLE_EXT, for which the EAL
 * reads nothing and calls us; we drain the counter ourselves. Callers are
 * serialised by one mutex, held from enter to leave. A visit reads the
 * latest ticket when it starts and publishes it when it returns, so a waiter
 * knows a visit began after its request and has finished.
 *
 * Bounds: a parked interrupt thread gives up after HOLD_MAX_MS even if
 * nobody calls leave, so a caller that crashed or forgot cannot wedge every
 * driver's interrupt handling for good.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* The interrupt-instance accessors are experimental in DPDK 22.11 (used here
 * and in memif_intr.c). */
#define ALLOW_EXPERIMENTAL_API 1
#include <rte_interrupts.h>

#include "intr_hold.h"
#include "tide_log.h"
#include "tide_clock.h"

#define HOLD_MAX_MS 30000 /* longest a hold parks the interrupt thread */
#define SYNC_ROUNDS 3     /* see tide_intr_hold_sync */

static struct {
	pthread_mutex_t lock; /* one enter..leave or sync at a time */
	pthread_mutex_t init_lock;
	bool ready;
	int efd;
	struct rte_intr_handle *ih;
	atomic_uint_fast64_t ticket; /* last request */
	atomic_uint_fast64_t done;   /* ticket of the latest finished visit */
	atomic_uint_fast64_t visits;
	atomic_bool want_hold;
	atomic_bool parked;
} h = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.init_lock = PTHREAD_MUTEX_INITIALIZER,
	.efd = -1,
};

/* Runs on the interrupt thread. */
static void
hold_cb(void *arg)
{
	uint64_t v, t = atomic_load(&h.ticket);

	(void)arg;
	(void)!read(h.efd, &v, sizeof(v)); /* EAGAIN: a coalesced wake, fine */
	atomic_fetch_add(&h.visits, 1);
	if (atomic_load(&h.want_hold)) {
		uint64_t until = tide_mono_ms() + HOLD_MAX_MS;

		atomic_store(&h.parked, true);
		while (atomic_load(&h.want_hold)) {
			if (tide_mono_ms() > until) {
				TIDE_LOG(ERR,
					 "interrupt thread held for %d ms with no release; "
					 "letting it go",
					 HOLD_MAX_MS);
				break;
			}
			usleep(20);
		}
		atomic_store(&h.parked, false);
	}
	atomic_store(&h.done, t);
}

int
tide_intr_hold_init(void)
{
	int rc = 0;

	pthread_mutex_lock(&h.init_lock);
	if (h.ready)
		goto out;
	h.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (h.efd < 0) {
		rc = -errno;
		goto out;
	}
	h.ih = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
	if (h.ih == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	if (rte_intr_type_set(h.ih, RTE_INTR_HANDLE_EXT) != 0 ||
	    rte_intr_fd_set(h.ih, h.efd) != 0) {
		rc = -EINVAL;
		goto fail;
	}
	rc = rte_intr_callback_register(h.ih, hold_cb, NULL);
	if (rc != 0)
		goto fail;
	h.ready = true;
	goto out;
fail:
	if (h.ih != NULL)
		rte_intr_instance_free(h.ih);
	h.ih = NULL;
	close(h.efd);
	h.efd = -1;
	TIDE_LOG(WARN, "cannot register the interrupt-thread hold: %d", rc);
out:
	pthread_mutex_unlock(&h.init_lock);
	return rc;
}

/* Ask for a visit; returns its ticket. Caller holds h.lock. */
static uint64_t
request_visit(void)
{
	uint64_t one = 1, t = atomic_fetch_add(&h.ticket, 1) + 1;

	(void)!write(h.efd, &one, sizeof(one));
	return t;
}

static bool
wait_until(atomic_uint_fast64_t *what, uint64_t at_least, uint64_t deadline)
{
	while (atomic_load(what) < at_least) {
		if (tide_mono_ms() > deadline)
			return false;
		usleep(20);
	}
	return true;
}

static int
usable(void)
{
	if (!h.ready)
		return -ENODEV;
	if (rte_thread_is_intr())
		return -EDEADLK;
	return 0;
}

int
tide_intr_hold_enter(unsigned deadline_ms)
{
	uint64_t deadline = tide_mono_ms() + deadline_ms;
	int rc = usable();

	if (rc != 0)
		return rc;
	pthread_mutex_lock(&h.lock);
	atomic_store(&h.want_hold, true);
	request_visit();
	while (!atomic_load(&h.parked)) {
		if (tide_mono_ms() > deadline) {
			/* A late visit sees want_hold false and goes on at once. */
			atomic_store(&h.want_hold, false);
			pthread_mutex_unlock(&h.lock);
			return -ETIMEDOUT;
		}
		usleep(20);
	}
	return 0;
}

void
tide_intr_hold_leave(void)
{
	uint64_t deadline = tide_mono_ms() + HOLD_MAX_MS;

	atomic_store(&h.want_hold, false);
	/* So the next enter cannot mistake this visit's parked flag for its own. */
	while (atomic_load(&h.parked) && tide_mono_ms() < deadline)
		usleep(20);
	pthread_mutex_unlock(&h.lock);
}

/*
 * Why SYNC_ROUNDS visits: a visit's event can share an epoll batch with the
 * rebuild request (the EAL's pipe) and run before it, and a stray wake (a
 * timed-out enter) can put the first visit in a batch collected before the
 * request was made. Each round starts after the previous visit returned, and
 * the EAL reports an fd once per batch, so the third visit runs in a batch
 * collected after a batch that held the request, i.e. after the rebuild.
 */
int
tide_intr_hold_sync(unsigned deadline_ms)
{
	uint64_t deadline = tide_mono_ms() + deadline_ms;
	int rc = usable();

	if (rc != 0)
		return rc;
	pthread_mutex_lock(&h.lock);
	for (int i = 0; i < SYNC_ROUNDS && rc == 0; i++) {
		uint64_t t = request_visit();

		if (!wait_until(&h.done, t, deadline))
			rc = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&h.lock);
	return rc;
}

uint64_t
tide_intr_hold_visits(void)
{
	return atomic_load(&h.visits);
}
