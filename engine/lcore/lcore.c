/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Polling workers. Each worker is a pthread pinned to one CPU running
 * lcore_main(): drain messages, run pollers, account, maybe sleep.
 *
 * The message ring is a bounded multi-producer single-consumer queue in the
 * style of Vyukov's bounded MPMC queue: each slot carries a sequence number,
 * producers claim a slot by CAS on the tail, and the slot's sequence tells
 * the consumer when the payload is published. Memory is fixed at create.
 */
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>
#include <sys/eventfd.h>

#include "tide_clock.h"
#include "tide_lcore.h"
#include "tide_log.h"

/* Messages run per iteration: bounded so a flood of posts cannot starve the
 * pollers (the rest wait for the next iteration). */
#define MSG_BATCH 64

struct msg_slot {
	_Atomic uint64_t seq;
	tide_lcore_msg_fn fn;
	void *arg;
};

struct poller {
	tide_lcore_poll_fn fn;
	void *ctx;
};

struct tide_lcore {
	/* Hot: read every iteration by the worker. */
	atomic_bool stop;
	unsigned npollers;
	struct poller pollers[TIDE_LCORE_MAX_POLLERS];
	struct msg_slot *ring;
	uint64_t ring_mask;
	uint64_t head; /* consumer position, worker only */
	struct tide_lcore_stats stats;

	/* Producers: on its own cache line so posts do not bounce the worker's. */
	_Alignas(64) _Atomic uint64_t tail;

	/* Sleeping workers wait on wake_fd (an eventfd); producers write it
	 * only when `sleeping` is set. */
	_Alignas(64) atomic_bool sleeping;
	_Atomic uint64_t wakes; /* tide_lcore_wake calls, so none is missed */
	int wake_fd;

	/* Interrupt sources (worker only). */
	unsigned nirq;
	struct tide_lcore_irq irq[TIDE_LCORE_MAX_IRQS];
	int irq_fd[TIDE_LCORE_MAX_IRQS]; /* while armed */
	bool armed;
	bool irq_off;          /* an input without an interrupt joined (tide_lcore_irq_off) */
	bool irq_bad;          /* the last sleep found a descriptor invalid (closed) */
	uint64_t irq_retry_ns; /* an arm failed: not before this */

	_Alignas(64) struct tide_lcore_group *group;
	unsigned index;
	int cpu;
	pthread_t thread;
	bool running;
	int init_rc;
};

struct tide_lcore_group {
	struct tide_lcore_opts opts;
	unsigned n;
	bool started;
	pthread_mutex_t lock; /* start handshake only */
	pthread_cond_t cond;
	unsigned inited;
	struct tide_lcore *lc[TIDE_LCORE_MAX];
};

static __thread struct tide_lcore *cur_lcore;

void
tide_lcore_opts_init(struct tide_lcore_opts *opts, size_t opts_size)
{
	struct tide_lcore_opts d = {
		.opts_size = sizeof(d),
		.idle = TIDE_LCORE_IDLE_ADAPTIVE,
		.idle_sleep_us = 100,
		.idle_spins = 1024,
		.idle_yield_us = 2000,
		.irq_after_us = 2000,
		.msg_ring_size = 1024,
		.pin = true,
	};

	if (opts == NULL)
		return;
	if (opts_size > sizeof(d))
		opts_size = sizeof(d);
	d.opts_size = opts_size;
	memcpy(opts, &d, opts_size);
}

/* Parse "1-3,5" into a CPU set. */
static int
parse_list(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s != '\0') {
		char *end;
		unsigned long a, b;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		a = strtoul(s, &end, 10);
		b = a;
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -EINVAL;
			b = strtoul(s, &end, 10);
		}
		if (b < a || b >= CPU_SETSIZE)
			return b >= CPU_SETSIZE ? -ERANGE : -EINVAL;
		for (unsigned long c = a; c <= b; c++)
			CPU_SET(c, set);
		if (*end == ',')
			end++;
		else if (*end != '\0')
			return -EINVAL;
		s = end;
	}
	return CPU_COUNT(set) > 0 ? 0 : -EINVAL;
}

int
tide_lcore_cpus_pick(const char *list, unsigned per_numa, int *cpus, unsigned max, unsigned *n)
{
	cpu_set_t allowed, want;
	unsigned k = 0;
	int rc;

	if (cpus == NULL || n == NULL || max == 0)
		return -EINVAL;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
		return -errno;
	if (list != NULL && list[0] != '\0') {
		rc = parse_list(list, &want);
		if (rc != 0)
			return rc;
		for (int c = 0; c < CPU_SETSIZE; c++) {
			if (!CPU_ISSET(c, &want))
				continue;
			if (!CPU_ISSET(c, &allowed) || k == max)
				return -ERANGE;
			cpus[k++] = c;
		}
		*n = k;
		return 0;
	}
	if (per_numa == 0)
		return -EINVAL;
	/* Without libnuma support every CPU counts as node 0. */
	{
		int nodes = numa_available() < 0 ? 1 : numa_max_node() + 1;

		for (int node = 0; node < nodes; node++) {
			unsigned taken = 0;

			for (int c = CPU_SETSIZE - 1; c >= 0 && taken < per_numa; c--) {
				int cn;

				if (!CPU_ISSET(c, &allowed))
					continue;
				cn = numa_available() < 0 ? 0 : numa_node_of_cpu(c);
				if (cn != node)
					continue;
				if (k == max)
					return -ERANGE;
				cpus[k++] = c;
				taken++;
			}
		}
	}
	if (k == 0)
		return -ENODEV;
	*n = k;
	return 0;
}

int
tide_lcore_group_create(const struct tide_lcore_opts *opts, const int *cpus, unsigned n,
			struct tide_lcore_group **out)
{
	struct tide_lcore_group *g;
	struct tide_lcore_opts o;

	tide_lcore_opts_init(&o, sizeof(o));
	if (opts != NULL) {
		if (opts->opts_size < offsetof(struct tide_lcore_opts, idle_sleep_us))
			return -EINVAL;
		memcpy(&o, opts, opts->opts_size < sizeof(o) ? opts->opts_size : sizeof(o));
		/* A caller compiled before idle_yield_us existed keeps its default. */
		if (opts->opts_size <
		    offsetof(struct tide_lcore_opts, idle_yield_us) + sizeof(o.idle_yield_us))
			o.idle_yield_us = 2000;
		if (opts->opts_size <
		    offsetof(struct tide_lcore_opts, irq_after_us) + sizeof(o.irq_after_us))
			o.irq_after_us = 2000;
	}
	if (n == 0 || n > TIDE_LCORE_MAX || cpus == NULL || o.msg_ring_size < 2 ||
	    (o.msg_ring_size & (o.msg_ring_size - 1)) != 0 ||
	    (o.idle != TIDE_LCORE_IDLE_BUSY && o.idle != TIDE_LCORE_IDLE_ADAPTIVE))
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	g->opts = o;
	g->n = n;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	for (unsigned i = 0; i < n; i++) {
		struct tide_lcore *lc = aligned_alloc(64, sizeof(*lc));

		if (lc == NULL) {
			tide_lcore_group_destroy(g);
			return -ENOMEM;
		}
		memset(lc, 0, sizeof(*lc));
		lc->wake_fd = -1;
		g->lc[i] = lc;
		lc->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (lc->wake_fd < 0) {
			int rc = -errno;

			tide_lcore_group_destroy(g);
			return rc;
		}
		lc->ring = calloc(o.msg_ring_size, sizeof(*lc->ring));
		if (lc->ring == NULL) {
			tide_lcore_group_destroy(g);
			return -ENOMEM;
		}
		for (uint64_t s = 0; s < o.msg_ring_size; s++)
			atomic_init(&lc->ring[s].seq, s);
		lc->ring_mask = o.msg_ring_size - 1;
		lc->group = g;
		lc->index = i;
		lc->cpu = cpus[i];
	}
	*out = g;
	return 0;
}

struct tide_lcore *
tide_lcore_get(struct tide_lcore_group *g, unsigned i)
{
	return g != NULL && i < g->n ? g->lc[i] : NULL;
}

unsigned
tide_lcore_count(const struct tide_lcore_group *g)
{
	return g->n;
}

unsigned
tide_lcore_index(const struct tide_lcore *lc)
{
	return lc->index;
}

int
tide_lcore_cpu(const struct tide_lcore *lc)
{
	return lc->cpu;
}

int
tide_lcore_poller_add(struct tide_lcore *lc, tide_lcore_poll_fn fn, void *ctx)
{
	if (fn == NULL)
		return -EINVAL;
	if (lc->npollers == TIDE_LCORE_MAX_POLLERS)
		return -ENOSPC;
	lc->pollers[lc->npollers].fn = fn;
	lc->pollers[lc->npollers].ctx = ctx;
	lc->npollers++;
	return 0;
}

int
tide_lcore_irq_add(struct tide_lcore *lc, const struct tide_lcore_irq *irq)
{
	if (irq == NULL || irq->arm == NULL || irq->disarm == NULL)
		return -EINVAL;
	if (lc->nirq == TIDE_LCORE_MAX_IRQS)
		return -ENOSPC;
	lc->irq[lc->nirq++] = *irq;
	return 0;
}

static void irq_disarm(struct tide_lcore *lc, unsigned n);

void
tide_lcore_irq_off(struct tide_lcore *lc)
{
	if (lc->armed)
		irq_disarm(lc, lc->nirq);
	lc->irq_off = true;
}

int
tide_lcore_poller_remove(struct tide_lcore *lc, tide_lcore_poll_fn fn, void *ctx)
{
	if (fn == NULL)
		return -EINVAL;
	for (unsigned i = 0; i < lc->npollers; i++) {
		if (lc->pollers[i].fn != fn || lc->pollers[i].ctx != ctx)
			continue;
		/* Shift the rest down: pollers run in the order they were added. */
		memmove(&lc->pollers[i], &lc->pollers[i + 1],
			(lc->npollers - i - 1) * sizeof(lc->pollers[0]));
		lc->npollers--;
		return 0;
	}
	return -ENOENT;
}

int
tide_lcore_post(struct tide_lcore *lc, tide_lcore_msg_fn fn, void *arg)
{
	uint64_t pos = atomic_load_explicit(&lc->tail, memory_order_relaxed);

	if (fn == NULL)
		return -EINVAL;
	for (;;) {
		struct msg_slot *s = &lc->ring[pos & lc->ring_mask];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);

		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&lc->tail, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				s->fn = fn;
				s->arg = arg;
				atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
				tide_lcore_wake(lc);
				return 0;
			}
		} else if (dif < 0) {
			return -EAGAIN; /* the slot still holds a message from a lap ago */
		} else {
			pos = atomic_load_explicit(&lc->tail, memory_order_relaxed);
		}
	}
}

struct sync_msg {
	tide_lcore_msg_fn fn;
	void *arg;
	atomic_bool done;
};

static void
sync_trampoline(void *arg)
{
	struct sync_msg *m = arg;

	m->fn(m->arg);
	atomic_store(&m->done, true);
}

int
tide_lcore_run_sync(struct tide_lcore *lc, tide_lcore_msg_fn fn, void *arg)
{
	struct sync_msg m = {.fn = fn, .arg = arg};
	const struct timespec nap_full = {0, 100000}, nap_wait = {0, 50000};
	int rc;

	if (fn == NULL)
		return -EINVAL;
	if (tide_lcore_current() == lc)
		return -EDEADLK;
	while ((rc = tide_lcore_post(lc, sync_trampoline, &m)) == -EAGAIN)
		nanosleep(&nap_full, NULL);
	if (rc != 0)
		return rc;
	/* m lives on this stack: wait until the worker is done with it. */
	while (!atomic_load(&m.done))
		nanosleep(&nap_wait, NULL);
	return 0;
}

/* Run up to `max` queued messages; returns how many ran. */
static unsigned
msgs_run(struct tide_lcore *lc, unsigned max)
{
	unsigned n = 0;

	while (n < max) {
		struct msg_slot *s = &lc->ring[lc->head & lc->ring_mask];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		tide_lcore_msg_fn fn;
		void *arg;

		if (seq != lc->head + 1)
			break; /* empty, or a producer is still writing this slot */
		fn = s->fn;
		arg = s->arg;
		atomic_store_explicit(&s->seq, lc->head + lc->ring_mask + 1, memory_order_release);
		lc->head++;
		fn(arg);
		n++;
	}
	lc->stats.msgs += n;
	return n;
}

void
tide_lcore_wake(struct tide_lcore *lc)
{
	uint64_t one = 1;

	/* Pairs with idle_sleep: either the worker sees this wake counted
	 * (it read `wakes` before running its pollers) and does not sleep, or
	 * we see it sleeping and wake it. */
	atomic_fetch_add_explicit(&lc->wakes, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&lc->sleeping, memory_order_seq_cst))
		(void)!write(lc->wake_fd, &one, sizeof(one));
}

static bool
msg_pending(const struct tide_lcore *lc)
{
	const struct msg_slot *s = &lc->ring[lc->head & lc->ring_mask];

	return atomic_load_explicit(&s->seq, memory_order_acquire) == lc->head + 1;
}

/*
 * Sleep up to ns on the wake eventfd (pfd[0], filled here) and pfd[1..nextra]:
 * a message or tide_lcore_wake() ends it at once (the 50 us default timer slack
 * of a plain nanosleep made every sleep cost a request ~150 us). The wake
 * eventfd is drained; the others' revents are the caller's. Returns true when
 * the wake eventfd ended it.
 */
static bool
park(struct tide_lcore *lc, struct pollfd *pfd, unsigned nextra, uint64_t ns, uint64_t wakes_seen)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000),
			      .tv_nsec = (long)(ns % 1000000000)};
	uint64_t v;
	int n = 0;

	pfd[0] = (struct pollfd){.fd = lc->wake_fd, .events = POLLIN};
	atomic_store_explicit(&lc->sleeping, true, memory_order_seq_cst);
	/* A wake since this iteration began (work the pollers may have
	 * missed), a message, or stop: do not sleep. */
	if (atomic_load_explicit(&lc->wakes, memory_order_seq_cst) == wakes_seen &&
	    !msg_pending(lc) && !atomic_load_explicit(&lc->stop, memory_order_acquire))
		n = ppoll(pfd, 1 + nextra, &ts, NULL);
	atomic_store_explicit(&lc->sleeping, false, memory_order_relaxed);
	if (n <= 0 || !(pfd[0].revents & POLLIN))
		return false;
	(void)!read(lc->wake_fd, &v, sizeof(v));
	return true;
}

/* Sleep up to `us` on the wake eventfd (yield when 0). True when woken early. */
static bool
idle_sleep(struct tide_lcore *lc, uint32_t us, uint64_t wakes_seen)
{
	struct pollfd pfd[1];

	if (us == 0) {
		sched_yield();
		return false;
	}
	return park(lc, pfd, 0, (uint64_t)us * 1000, wakes_seen);
}

static void
irq_disarm(struct tide_lcore *lc, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		lc->irq[i].disarm(lc->irq[i].ctx);
	lc->armed = false;
}

/* How long an armed worker may sleep: until its sources' earliest timer, or
 * us when one cannot tell; at most TIDE_LCORE_IRQ_SLEEP_MAX_US. */
static uint64_t
irq_sleep_ns(struct tide_lcore *lc, uint32_t us, uint64_t now)
{
	uint64_t until = UINT64_MAX, max = (uint64_t)TIDE_LCORE_IRQ_SLEEP_MAX_US * 1000;

	for (unsigned i = 0; i < lc->nirq; i++) {
		uint64_t t;

		if (lc->irq[i].next_ns == NULL)
			return (uint64_t)us * 1000 < max ? (uint64_t)us * 1000 : max;
		t = lc->irq[i].next_ns(lc->irq[i].ctx);
		if (t < until)
			until = t;
	}
	if (until <= now)
		return 0;
	return until - now < max ? until - now : max;
}

/* Sources armed past their re-check iteration: sleep on them and the wake
 * eventfd for up to ns. Stays armed; a descriptor found invalid (closed under
 * us: a device reconnecting) is noted for the next arming (irq_idle). */
static void
irq_sleep(struct tide_lcore *lc, uint64_t ns, uint64_t wakes_seen)
{
	struct pollfd pfd[1 + TIDE_LCORE_MAX_IRQS];
	bool woke = false;

	for (unsigned i = 0; i < lc->nirq; i++)
		pfd[1 + i] = (struct pollfd){.fd = lc->irq_fd[i], .events = POLLIN};
	/* Counted as they begin: a long sleep shows while it lasts. */
	lc->stats.sleeps++;
	lc->stats.irq_sleeps++;
	if (park(lc, pfd, lc->nirq, ns, wakes_seen))
		lc->stats.wakeups++;
	/* A source's descriptor is drained by its receive path or its disarm. */
	for (unsigned i = 0; i < lc->nirq; i++) {
		if (pfd[1 + i].revents & POLLIN)
			woke = true;
		if (pfd[1 + i].revents & (POLLNVAL | POLLERR | POLLHUP))
			lc->irq_bad = true;
	}
	if (woke)
		lc->stats.irq_wakeups++;
}

/* Arm every source; *same: already armed, and each gave the descriptor it gave last time
 * (a changed one, stored in irq_fd, is a reconnected device: what arrived before it was
 * armed needs the re-check iteration). False, disarmed, when one cannot be armed. */
static bool
irq_arm_all(struct tide_lcore *lc, uint64_t now, bool *same)
{
	*same = true;
	for (unsigned i = 0; i < lc->nirq; i++) {
		int fd = lc->irq[i].arm(lc->irq[i].ctx);

		if (fd < 0) {
			/* A link down, say: retry later, not every iteration. */
			irq_disarm(lc, lc->armed ? lc->nirq : i);
			lc->irq_retry_ns = now + 100 * 1000000ull;
			return false;
		}
		if (!lc->armed || fd != lc->irq_fd[i])
			*same = false;
		lc->irq_fd[i] = fd;
	}
	lc->armed = true;
	return true;
}

/*
 * Idle past irq_after_us with sources: arm them (the next iteration is the
 * re-check), or, armed already and that iteration idle too, sleep. False when
 * a source could not be armed (the caller yields as without sources).
 */
static bool
irq_idle(struct tide_lcore *lc, uint32_t sleep_us, uint64_t wakes_seen, uint64_t now)
{
	bool was = lc->armed, same;
	uint64_t ns;

	/* Armed again before every sleep, not only the first: a device that reconnected
	 * meanwhile closed the descriptor we hold and masked its ring again. */
	if (!irq_arm_all(lc, now, &same))
		return false;
	if (lc->irq_bad) {
		lc->irq_bad = false;
		if (same) {
			/* The source still gives the descriptor that failed: sleeping on it
			 * would return at once, for ever. Ask again in 100 ms. */
			irq_disarm(lc, lc->nirq);
			lc->irq_retry_ns = now + 100 * 1000000ull;
			return false;
		}
	}
	if (!was || !same)
		return true; /* the next iteration is the re-check */
	ns = irq_sleep_ns(lc, sleep_us, now);
	if (ns != 0) /* else a timer is due: the next iteration runs it */
		irq_sleep(lc, ns, wakes_seen);
	return true;
}

static void *
lcore_main(void *arg)
{
	struct tide_lcore *lc = arg;
	struct tide_lcore_group *g = lc->group;
	uint64_t (*clock)(void) = g->opts.clock_ns != NULL ? g->opts.clock_ns : tide_mono_ns;
	uint32_t idle_iters = 0;
	uint64_t prev = clock(), idle_since = 0, idle_first = 0;
	uint64_t irq_after_ns = (uint64_t)g->opts.irq_after_us * 1000;
	bool use_irq = g->opts.idle == TIDE_LCORE_IDLE_ADAPTIVE && g->opts.idle_sleep_us > 0;
	int rc = 0;

	cur_lcore = lc;
	if (g->opts.pin) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(lc->cpu, &set);
		rc = -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	if (rc == 0 && g->opts.thread_init != NULL)
		rc = g->opts.thread_init(g->opts.thread_init_arg, lc->index);
	pthread_mutex_lock(&g->lock);
	lc->init_rc = rc;
	g->inited++;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	if (rc != 0)
		return NULL;

	while (!atomic_load_explicit(&lc->stop, memory_order_acquire)) {
		uint64_t wakes_seen = atomic_load_explicit(&lc->wakes, memory_order_seq_cst);
		uint64_t now = clock();
		int work = (int)msgs_run(lc, MSG_BATCH);

		for (unsigned i = 0; i < lc->npollers; i++)
			work += lc->pollers[i].fn(lc->pollers[i].ctx, now);
		lc->stats.iterations++;
		if (work > 0) {
			lc->stats.busy++;
			lc->stats.busy_ns += now - prev;
			idle_iters = 0;
		} else {
			lc->stats.idle_ns += now - prev;
			if (idle_first == 0)
				idle_first = now;
			if (use_irq && lc->nirq > 0 && !lc->irq_off && now >= lc->irq_retry_ns &&
			    now - idle_first >= irq_after_ns &&
			    irq_idle(lc, g->opts.idle_sleep_us, wakes_seen, now)) {
				/* Armed for the re-check, or slept on the sources. */
			} else if (g->opts.idle == TIDE_LCORE_IDLE_ADAPTIVE &&
				   ++idle_iters >= g->opts.idle_spins) {
				/*
				 * First yield: the CPU goes to whatever else is runnable
				 * on it, yet the worker answers within a time slice. Work
				 * arriving from the network (no interrupt to wake a
				 * sleeper on memif in DPDK 22.11) usually comes within
				 * a few hundred us (a batch's turnaround): sleeping
				 * then cost 25-35 % of 64 KiB read throughput. Only
				 * an idle spell past idle_yield_us sleeps.
				 */
				if (idle_since == 0)
					idle_since = now;
				if (now - idle_since < (uint64_t)g->opts.idle_yield_us * 1000) {
					sched_yield();
				} else {
					if (idle_sleep(lc, g->opts.idle_sleep_us, wakes_seen))
						lc->stats.wakeups++;
					lc->stats.sleeps++;
				}
			}
		}
		if (work > 0) {
			idle_since = 0;
			idle_first = 0;
			if (lc->armed)
				irq_disarm(lc, lc->nirq);
		}
		prev = now;
	}
	if (lc->armed)
		irq_disarm(lc, lc->nirq);
	/* Messages posted before stop still run, so nothing posted is lost. */
	while (msgs_run(lc, MSG_BATCH) > 0)
		;
	cur_lcore = NULL;
	return NULL;
}

int
tide_lcore_group_start(struct tide_lcore_group *g)
{
	int rc = 0;
	unsigned started = 0;

	if (g->started)
		return -EALREADY;
	g->inited = 0;
	for (unsigned i = 0; i < g->n; i++) {
		struct tide_lcore *lc = g->lc[i];

		atomic_store(&lc->stop, false);
		rc = -pthread_create(&lc->thread, NULL, lcore_main, lc);
		if (rc != 0) {
			TIDE_LOG(ERR, "worker %u: pthread_create: %s", i, strerror(-rc));
			break;
		}
		lc->running = true;
		started++;
	}
	pthread_mutex_lock(&g->lock);
	while (g->inited < started)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	for (unsigned i = 0; rc == 0 && i < started; i++) {
		if (g->lc[i]->init_rc != 0) {
			rc = g->lc[i]->init_rc;
			TIDE_LOG(ERR, "worker %u on CPU %d failed to start: %s", i, g->lc[i]->cpu,
				 strerror(-rc));
		}
	}
	g->started = true;
	if (rc != 0)
		tide_lcore_group_stop(g);
	return rc;
}

void
tide_lcore_group_stop(struct tide_lcore_group *g)
{
	if (g == NULL || !g->started)
		return;
	for (unsigned i = 0; i < g->n; i++) {
		atomic_store_explicit(&g->lc[i]->stop, true, memory_order_release);
		tide_lcore_wake(g->lc[i]); /* a sleeping worker sees stop now */
	}
	for (unsigned i = 0; i < g->n; i++) {
		if (g->lc[i]->running) {
			pthread_join(g->lc[i]->thread, NULL);
			g->lc[i]->running = false;
		}
	}
	g->started = false;
}

void
tide_lcore_group_destroy(struct tide_lcore_group *g)
{
	if (g == NULL)
		return;
	tide_lcore_group_stop(g);
	for (unsigned i = 0; i < g->n; i++) {
		if (g->lc[i] != NULL) {
			if (g->lc[i]->wake_fd >= 0)
				close(g->lc[i]->wake_fd);
			free(g->lc[i]->ring);
			free(g->lc[i]);
		}
	}
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
	free(g);
}

void
tide_lcore_stats_get(const struct tide_lcore *lc, struct tide_lcore_stats *st)
{
	*st = lc->stats;
}

struct tide_lcore *
tide_lcore_current(void)
{
	return cur_lcore;
}
