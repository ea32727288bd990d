/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tide_lcore.h"
#include "tide_ut.h"

static int
cpu0(void)
{
	cpu_set_t s;

	/* Any CPU this process may use: workers get pinned there. */
	CU_ASSERT_EQUAL_FATAL(sched_getaffinity(0, sizeof(s), &s), 0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s))
			return c;
	return 0;
}

static void
test_cpus_pick_parses_lists(void)
{
	int cpus[8];
	unsigned n = 0;
	char list[32];
	int c = cpu0();

	snprintf(list, sizeof(list), "%d", c);
	TIDE_UT_OK(tide_lcore_cpus_pick(list, 1, cpus, 8, &n));
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(cpus[0], c);
	CU_ASSERT_EQUAL(tide_lcore_cpus_pick("1-", 1, cpus, 8, &n), -EINVAL);
	CU_ASSERT_EQUAL(tide_lcore_cpus_pick("3-1", 1, cpus, 8, &n), -EINVAL);
	CU_ASSERT_EQUAL(tide_lcore_cpus_pick("a", 1, cpus, 8, &n), -EINVAL);
	CU_ASSERT_EQUAL(tide_lcore_cpus_pick("1,,2", 1, cpus, 8, &n), -EINVAL);
	/* A CPU this process cannot use is refused, not silently dropped. */
	CU_ASSERT_EQUAL(tide_lcore_cpus_pick("1000", 1, cpus, 8, &n), -ERANGE);
}

static void
test_cpus_pick_per_numa(void)
{
	int cpus[TIDE_LCORE_MAX];
	unsigned n = 0;
	cpu_set_t s;

	TIDE_UT_OK(tide_lcore_cpus_pick(NULL, 1, cpus, TIDE_LCORE_MAX, &n));
	CU_ASSERT_TRUE(n >= 1);
	sched_getaffinity(0, sizeof(s), &s);
	for (unsigned i = 0; i < n; i++)
		CU_ASSERT_TRUE(CPU_ISSET(cpus[i], &s));
	CU_ASSERT_EQUAL(tide_lcore_cpus_pick("", 0, cpus, TIDE_LCORE_MAX, &n), -EINVAL);
}

static void
test_group_create_rejects_bad_opts(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	int c = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	o.msg_ring_size = 1000;
	CU_ASSERT_EQUAL(tide_lcore_group_create(&o, &c, 1, &g), -EINVAL);
	tide_lcore_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(tide_lcore_group_create(&o, &c, 0, &g), -EINVAL);
	CU_ASSERT_PTR_NULL(g);
}

struct counter {
	atomic_uint_fast64_t polls;
	atomic_uint_fast64_t worked;
	uint64_t budget; /* pollers report work this many times */
	uint64_t last_now;
	int order_errors;
};

static int
count_poll(void *ctx, uint64_t now)
{
	struct counter *c = ctx;

	if (now < c->last_now)
		c->order_errors++; /* time must never go backwards */
	c->last_now = now;
	atomic_fetch_add(&c->polls, 1);
	if (atomic_load(&c->worked) < c->budget) {
		atomic_fetch_add(&c->worked, 1);
		return 1;
	}
	return 0;
}

static void
test_pollers_run_and_adaptive_idle_sleeps(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct tide_lcore_stats st;
	struct counter c = {.budget = 1000};
	int cpu = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(o.idle_yield_us, 2000);
	o.idle_spins = 16;
	o.idle_sleep_us = 200;
	o.idle_yield_us = 0; /* sleep as soon as the spins are spent */
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	TIDE_UT_OK(tide_lcore_poller_add(tide_lcore_get(g, 0), count_poll, &c));
	TIDE_UT_OK(tide_lcore_group_start(g));
	CU_ASSERT_EQUAL(tide_lcore_group_start(g), -EALREADY);
	usleep(100000);
	tide_lcore_group_stop(g);
	tide_lcore_stats_get(tide_lcore_get(g, 0), &st);
	CU_ASSERT_EQUAL(atomic_load(&c.worked), 1000);
	CU_ASSERT_TRUE(st.busy >= 1000);
	CU_ASSERT_TRUE(st.iterations > st.busy);
	/* 100 ms idle with 200 us sleeps: far fewer iterations than spinning. */
	CU_ASSERT_TRUE(st.sleeps > 10);
	CU_ASSERT_TRUE(st.iterations - st.busy < 16 * (st.sleeps + 1) + 16);
	CU_ASSERT_EQUAL(c.order_errors, 0);
	tide_lcore_group_destroy(g);
}

/* An idle spell shorter than idle_yield_us only yields: no sleep at all. */
static void
test_adaptive_idle_yields_before_sleeping(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct tide_lcore_stats st;
	struct counter c = {.budget = 10};
	int cpu = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	o.idle_spins = 16;
	o.idle_yield_us = 10000000; /* 10 s: longer than the test */
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	TIDE_UT_OK(tide_lcore_poller_add(tide_lcore_get(g, 0), count_poll, &c));
	TIDE_UT_OK(tide_lcore_group_start(g));
	usleep(50000);
	tide_lcore_group_stop(g);
	tide_lcore_stats_get(tide_lcore_get(g, 0), &st);
	CU_ASSERT_EQUAL(atomic_load(&c.worked), 10);
	CU_ASSERT_EQUAL(st.sleeps, 0);
	CU_ASSERT_TRUE(st.iterations - st.busy > 16);
	tide_lcore_group_destroy(g);
}

static void
mark_ran(void *arg)
{
	atomic_store((atomic_int *)arg, 1);
}

struct wake_poll {
	atomic_int flag; /* set by another thread, then tide_lcore_wake() */
	atomic_int seen;
};

static int
wake_poll_fn(void *ctx, uint64_t now)
{
	struct wake_poll *w = ctx;

	(void)now;
	if (atomic_load(&w->flag) && !atomic_load(&w->seen)) {
		atomic_store(&w->seen, 1);
		return 1;
	}
	return 0;
}

static bool
wait_int(atomic_int *v, double seconds)
{
	double end = tide_ut_now_s() + seconds;

	while (!atomic_load(v) && tide_ut_now_s() < end)
		usleep(1000);
	return atomic_load(v) != 0;
}

/*
 * A worker asleep for 5 s at a time still runs a posted message, and sees
 * work announced with tide_lcore_wake(), long before the sleep would end:
 * both cut the sleep short (counted in wakeups).
 */
static void
test_sleeping_worker_woken_by_post_and_wake(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct tide_lcore_stats st;
	struct wake_poll w = {0};
	atomic_int ran = 0;
	int cpu = cpu0();
	double t0;

	tide_lcore_opts_init(&o, sizeof(o));
	o.idle_spins = 4;
	o.idle_yield_us = 0;
	o.idle_sleep_us = 5000000;
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	TIDE_UT_OK(tide_lcore_poller_add(tide_lcore_get(g, 0), wake_poll_fn, &w));
	TIDE_UT_OK(tide_lcore_group_start(g));
	usleep(20000); /* asleep by now */
	t0 = tide_ut_now_s();
	TIDE_UT_OK(tide_lcore_post(tide_lcore_get(g, 0), mark_ran, &ran));
	CU_ASSERT_TRUE(wait_int(&ran, 2.0));
	usleep(20000); /* asleep again */
	atomic_store(&w.flag, 1);
	tide_lcore_wake(tide_lcore_get(g, 0));
	CU_ASSERT_TRUE(wait_int(&w.seen, 2.0));
	CU_ASSERT_TRUE(tide_ut_now_s() - t0 < 4.0); /* neither waited out a 5 s sleep */
	usleep(20000);
	t0 = tide_ut_now_s();
	tide_lcore_group_stop(g); /* wakes the sleeper rather than waiting 5 s */
	CU_ASSERT_TRUE(tide_ut_now_s() - t0 < 4.0);
	tide_lcore_stats_get(tide_lcore_get(g, 0), &st);
	CU_ASSERT_TRUE(st.wakeups >= 2);
	tide_lcore_group_destroy(g);
}

/*
 * A device queue with an interrupt, as memif's: the sender publishes work,
 * then writes the eventfd if the receiver armed it.
 */
struct irq_dev {
	atomic_int pending;
	atomic_bool armed;
	atomic_int arms, disarms, consumed;
	atomic_int fd; /* replaced by another when the "device" reconnects */
	int arm_rc;    /* 0: arm works; else what arm returns */
};

static int
irq_dev_poll(void *ctx, uint64_t now)
{
	struct irq_dev *d = ctx;
	int n = atomic_exchange(&d->pending, 0);

	(void)now;
	atomic_fetch_add(&d->consumed, n);
	return n;
}

static int
irq_dev_arm(void *ctx)
{
	struct irq_dev *d = ctx;

	atomic_fetch_add(&d->arms, 1);
	if (d->arm_rc != 0)
		return d->arm_rc;
	atomic_store(&d->armed, true);
	return atomic_load(&d->fd);
}

static void
irq_dev_disarm(void *ctx)
{
	struct irq_dev *d = ctx;
	uint64_t v;

	atomic_fetch_add(&d->disarms, 1);
	atomic_store(&d->armed, false);
	(void)!read(atomic_load(&d->fd), &v, sizeof(v));
}

static void
irq_dev_send(struct irq_dev *d)
{
	uint64_t one = 1;

	atomic_fetch_add(&d->pending, 1);
	if (atomic_load(&d->armed))
		(void)!write(atomic_load(&d->fd), &one, sizeof(one));
}

static uint64_t
irq_dev_next(void *ctx)
{
	(void)ctx;
	return UINT64_MAX; /* no timers: only the cap bounds a sleep */
}

static struct tide_lcore_group *
irq_worker(struct irq_dev *d)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct tide_lcore_irq irq = {
		.arm = irq_dev_arm, .disarm = irq_dev_disarm, .next_ns = irq_dev_next, .ctx = d};
	int cpu = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	CU_ASSERT_EQUAL(o.irq_after_us, 2000);
	o.irq_after_us = 20;
	o.idle_yield_us = 10000000; /* without the source: 10 s of yielding first */
	o.idle_sleep_us = 5000000;  /* capped at TIDE_LCORE_IRQ_SLEEP_MAX_US when armed */
	atomic_store(&d->fd, eventfd(0, EFD_NONBLOCK));
	CU_ASSERT_FATAL(atomic_load(&d->fd) >= 0);
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	TIDE_UT_OK(tide_lcore_poller_add(tide_lcore_get(g, 0), irq_dev_poll, d));
	TIDE_UT_OK(tide_lcore_irq_add(tide_lcore_get(g, 0), &irq));
	return g;
}

/*
 * With an interrupt source an idle worker sleeps after irq_after_us (not
 * after idle_yield_us of yielding), a frame ends the sleep through the
 * source's descriptor (counted in irq_wakeups), the work disarms the source
 * and the next idle spell arms it again.
 */
static void
test_irq_source_wakes_sleeper(void)
{
	struct irq_dev d = {.arm_rc = 0};
	struct tide_lcore_group *g = irq_worker(&d);
	struct tide_lcore_stats st;
	struct tide_lcore_irq bad = {.arm = NULL, .disarm = irq_dev_disarm};
	double t0;

	CU_ASSERT_EQUAL(tide_lcore_irq_add(tide_lcore_get(g, 0), &bad), -EINVAL);
	CU_ASSERT_EQUAL(tide_lcore_irq_add(tide_lcore_get(g, 0), NULL), -EINVAL);
	TIDE_UT_OK(tide_lcore_group_start(g));
	usleep(50000);
	tide_lcore_stats_get(tide_lcore_get(g, 0), &st);
	CU_ASSERT_TRUE(st.irq_sleeps >= 1);
	CU_ASSERT_TRUE(atomic_load(&d.armed));
	CU_ASSERT_TRUE(st.iterations < 10000); /* asleep (10 ms at most), not spinning */
	/* A frame sent just as a 10 ms sleep timed out is found by polling, not
	 * through the descriptor: send until three went through it (bounded). */
	for (int round = 1; round <= 12; round++) {
		tide_lcore_stats_get(tide_lcore_get(g, 0), &st);
		if (round > 3 && st.irq_wakeups >= 3)
			break;
		t0 = tide_ut_now_s();
		irq_dev_send(&d);
		while (atomic_load(&d.consumed) < round && tide_ut_now_s() - t0 < 3)
			usleep(100);
		CU_ASSERT_EQUAL(atomic_load(&d.consumed), round);
		CU_ASSERT_TRUE(tide_ut_now_s() - t0 < 1.0);
		usleep(20000); /* idle again: re-armed, asleep */
		CU_ASSERT_TRUE(atomic_load(&d.armed));
	}
	tide_lcore_group_stop(g);
	tide_lcore_stats_get(tide_lcore_get(g, 0), &st);
	CU_ASSERT_TRUE(st.irq_wakeups >= 3);
	CU_ASSERT_TRUE(atomic_load(&d.disarms) >= 3);
	CU_ASSERT_TRUE(atomic_load(&d.arms) >= 4);
	CU_ASSERT_FALSE(atomic_load(&d.armed)); /* stop disarms */
	tide_lcore_group_destroy(g);
	close(atomic_load(&d.fd));
}

/* A source that cannot arm (a link down): the worker yields as without one and
 * asks the source again only every 100 ms, not every iteration. */
static void
test_irq_source_arm_failure_falls_back(void)
{
	struct irq_dev d = {.arm_rc = -ENOTCONN};
	struct tide_lcore_group *g = irq_worker(&d);
	struct tide_lcore_stats st;

	TIDE_UT_OK(tide_lcore_group_start(g));
	usleep(150000);
	tide_lcore_group_stop(g);
	tide_lcore_stats_get(tide_lcore_get(g, 0), &st);
	CU_ASSERT_TRUE(atomic_load(&d.arms) >= 1 && atomic_load(&d.arms) <= 3);
	CU_ASSERT_EQUAL(st.sleeps, 0); /* yielding: idle_yield_us is 10 s */
	CU_ASSERT_EQUAL(st.irq_sleeps, 0);
	tide_lcore_group_destroy(g);
	close(atomic_load(&d.fd));
}

/* Send until n frames went through the descriptor (irq_wakeups grew by n), each consumed
 * within a second; at most 12 frames (one may land as a 10 ms sleep times out, and be
 * found by polling). */
static void
irq_send_until_woken(struct irq_dev *d, struct tide_lcore *lc, unsigned n)
{
	struct tide_lcore_stats st;
	uint64_t w0;
	double t0;

	tide_lcore_stats_get(lc, &st);
	w0 = st.irq_wakeups;
	for (int round = 1; round <= 12; round++) {
		int want = atomic_load(&d->consumed) + 1;

		tide_lcore_stats_get(lc, &st);
		if (st.irq_wakeups >= w0 + n)
			break;
		t0 = tide_ut_now_s();
		irq_dev_send(d);
		while (atomic_load(&d->consumed) < want && tide_ut_now_s() - t0 < 3)
			usleep(100);
		CU_ASSERT_EQUAL(atomic_load(&d->consumed), want);
		usleep(20000); /* idle again: re-armed, asleep */
	}
	tide_lcore_stats_get(lc, &st);
	CU_ASSERT_TRUE(st.irq_wakeups >= w0 + n);
}

/*
 * The device reconnects while the worker sleeps armed: its descriptor is closed and
 * another one takes its place (memif closes every queue eventfd at a disconnect). The
 * worker must neither spin on the closed one (ppoll says POLLNVAL at once) nor keep
 * sleeping on it: arming again before each sleep finds the new one, and frames wake it
 * through that.
 */
static void
test_irq_source_reconnect(void)
{
	struct irq_dev d = {.arm_rc = 0};
	struct tide_lcore_group *g = irq_worker(&d);
	struct tide_lcore *lc = tide_lcore_get(g, 0);
	struct tide_lcore_stats st0, st;
	int old, fresh;

	TIDE_UT_OK(tide_lcore_group_start(g));
	usleep(50000);
	tide_lcore_stats_get(lc, &st0);
	CU_ASSERT_TRUE(st0.irq_sleeps >= 1);
	fresh = eventfd(0, EFD_NONBLOCK);
	CU_ASSERT_FATAL(fresh >= 0);
	old = atomic_exchange(&d.fd, fresh);
	close(old);
	usleep(100000);
	tide_lcore_stats_get(lc, &st);
	/* Asleep: at most one iteration per 10 ms sleep and a few around each, not a spin. */
	CU_ASSERT_TRUE(st.iterations - st0.iterations < 2000);
	irq_send_until_woken(&d, lc, 3);
	tide_lcore_group_stop(g);
	tide_lcore_group_destroy(g);
	close(atomic_load(&d.fd));
}

/* A source that keeps giving a descriptor that was closed (a device that lost it): the
 * worker does not spin on it; it disarms and asks again only every 100 ms. */
static void
test_irq_source_dead_descriptor(void)
{
	struct irq_dev d = {.arm_rc = 0};
	struct tide_lcore_group *g = irq_worker(&d);
	int arms;

	TIDE_UT_OK(tide_lcore_group_start(g));
	usleep(50000);
	arms = atomic_load(&d.arms);
	close(atomic_load(&d.fd)); /* arm still returns its number */
	usleep(250000);
	tide_lcore_group_stop(g);
	/* About one arming per 100 ms (each one sleep, at once invalid, then a back-off);
	 * a spin would arm every iteration. */
	CU_ASSERT_TRUE(atomic_load(&d.arms) - arms <= 12);
	CU_ASSERT_TRUE(atomic_load(&d.disarms) >= 1);
	tide_lcore_group_destroy(g);
}

static void
irq_off_msg(void *arg)
{
	tide_lcore_irq_off(arg);
}

/* tide_lcore_irq_off (a poller without an interrupt joined): the source is disarmed and
 * never armed again; the worker goes back to the yield-then-sleep policy. */
static void
test_irq_off(void)
{
	struct irq_dev d = {.arm_rc = 0};
	struct tide_lcore_group *g = irq_worker(&d);
	struct tide_lcore *lc = tide_lcore_get(g, 0);
	struct tide_lcore_stats st0, st;
	int arms;

	TIDE_UT_OK(tide_lcore_group_start(g));
	usleep(50000);
	CU_ASSERT_TRUE(atomic_load(&d.armed));
	TIDE_UT_OK(tide_lcore_post(lc, irq_off_msg, lc));
	usleep(20000);
	CU_ASSERT_FALSE(atomic_load(&d.armed));
	arms = atomic_load(&d.arms);
	tide_lcore_stats_get(lc, &st0);
	irq_dev_send(&d); /* found by polling, as without sources */
	usleep(50000);
	tide_lcore_group_stop(g);
	tide_lcore_stats_get(lc, &st);
	CU_ASSERT_EQUAL(atomic_load(&d.arms), arms);
	CU_ASSERT_EQUAL(st.irq_sleeps, st0.irq_sleeps);
	CU_ASSERT_EQUAL(atomic_load(&d.consumed), 1);
	tide_lcore_group_destroy(g);
	close(atomic_load(&d.fd));
}

struct post_state {
	uint64_t next[4]; /* next expected value per producer */
	uint64_t got;
	int out_of_order;
	struct tide_lcore *lc;
	int producer;
	int on_wrong_thread;
};

struct post_msg {
	struct post_state *st;
	int producer;
	uint64_t value;
};

static struct post_msg msgs[4][20000];

static void
on_msg(void *arg)
{
	struct post_msg *m = arg;

	if (tide_lcore_current() != m->st->lc)
		m->st->on_wrong_thread++;
	if (m->st->next[m->producer] != m->value)
		m->st->out_of_order++;
	m->st->next[m->producer] = m->value + 1;
	m->st->got++;
}

struct producer_arg {
	struct post_state *st;
	int id;
	uint64_t retries;
};

static void *
producer(void *arg)
{
	struct producer_arg *p = arg;

	for (uint64_t i = 0; i < 20000; i++) {
		struct post_msg *m = &msgs[p->id][i];

		m->st = p->st;
		m->producer = p->id;
		m->value = i;
		while (tide_lcore_post(p->st->lc, on_msg, m) == -EAGAIN) {
			p->retries++;
			sched_yield();
		}
	}
	return NULL;
}

static void
test_post_from_many_threads_in_order(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct post_state st = {0};
	struct producer_arg pa[4];
	pthread_t th[4];
	int cpu = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	o.msg_ring_size = 64; /* small: producers must hit -EAGAIN and retry */
	o.idle = TIDE_LCORE_IDLE_BUSY;
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	st.lc = tide_lcore_get(g, 0);
	CU_ASSERT_EQUAL(tide_lcore_post(st.lc, NULL, NULL), -EINVAL);
	TIDE_UT_OK(tide_lcore_group_start(g));
	for (int i = 0; i < 4; i++) {
		pa[i] = (struct producer_arg){.st = &st, .id = i};
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, producer, &pa[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	tide_lcore_group_stop(g); /* runs what is still queued */
	CU_ASSERT_EQUAL(st.got, 4 * 20000);
	CU_ASSERT_EQUAL(st.out_of_order, 0);
	CU_ASSERT_EQUAL(st.on_wrong_thread, 0);
	tide_lcore_group_destroy(g);
}

static void
test_ring_full_returns_eagain_before_start(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct post_state st = {0};
	struct post_msg m = {.st = &st};
	int cpu = cpu0(), queued = 0;

	tide_lcore_opts_init(&o, sizeof(o));
	o.msg_ring_size = 8;
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	st.lc = tide_lcore_get(g, 0);
	while (tide_lcore_post(st.lc, on_msg, &m) == 0 && queued < 100)
		queued++;
	CU_ASSERT_EQUAL(queued, 8);
	tide_lcore_group_destroy(g); /* never started: messages are dropped with it */
}

static int
failing_init(void *arg, unsigned worker)
{
	(void)arg;
	return worker == 0 ? -ENODEV : 0;
}

static void
test_thread_init_failure_fails_start(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	int cpus[2] = {cpu0(), cpu0()};

	tide_lcore_opts_init(&o, sizeof(o));
	o.thread_init = failing_init;
	TIDE_UT_OK(tide_lcore_group_create(&o, cpus, 2, &g));
	CU_ASSERT_EQUAL(tide_lcore_group_start(g), -ENODEV);
	tide_lcore_group_destroy(g);
}

/* Pollers that log their id on each call, to check who runs and in which order. */
struct trace {
	char log[64];
	atomic_uint n;
	atomic_uint_fast64_t calls[4];
};

struct tracer {
	struct trace *t;
	int id;
	unsigned remove_after; /* 0: never; else remove itself on that call */
	int remove_rc;
};

static int
trace_poll(void *ctx, uint64_t now)
{
	struct tracer *tr = ctx;
	unsigned k = atomic_load(&tr->t->n);
	uint64_t calls = atomic_fetch_add(&tr->t->calls[tr->id], 1) + 1;

	(void)now;
	if (k < sizeof(tr->t->log) - 1) {
		tr->t->log[k] = (char)('A' + tr->id);
		atomic_store(&tr->t->n, k + 1);
	}
	if (tr->remove_after != 0 && calls == tr->remove_after)
		tr->remove_rc = tide_lcore_poller_remove(tide_lcore_current(), trace_poll, tr);
	return 0;
}

struct remove_msg {
	struct tide_lcore *lc;
	struct tracer *tr;
	int rc;
	atomic_bool done;
};

static void
remove_on_worker(void *arg)
{
	struct remove_msg *m = arg;

	m->rc = tide_lcore_poller_remove(m->lc, trace_poll, m->tr);
	atomic_store(&m->done, true);
}

static void
wait_calls(struct trace *t, int id, uint64_t atleast)
{
	for (int i = 0; i < 5000 && atomic_load(&t->calls[id]) < atleast; i++)
		usleep(1000);
	CU_ASSERT_TRUE(atomic_load(&t->calls[id]) >= atleast);
}

static void
test_poller_remove_before_start_keeps_order(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct trace t = {0};
	struct tracer tr[3] = {{.t = &t, .id = 0}, {.t = &t, .id = 1}, {.t = &t, .id = 2}};
	struct tide_lcore *lc;
	int cpu = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	o.idle = TIDE_LCORE_IDLE_BUSY;
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	lc = tide_lcore_get(g, 0);
	for (int i = 0; i < 3; i++)
		TIDE_UT_OK(tide_lcore_poller_add(lc, trace_poll, &tr[i]));
	CU_ASSERT_EQUAL(tide_lcore_poller_remove(lc, NULL, &tr[1]), -EINVAL);
	/* The pair must match: same function, other context is not it. */
	CU_ASSERT_EQUAL(tide_lcore_poller_remove(lc, count_poll, &tr[1]), -ENOENT);
	CU_ASSERT_EQUAL(tide_lcore_poller_remove(lc, trace_poll, &t), -ENOENT);
	TIDE_UT_OK(tide_lcore_poller_remove(lc, trace_poll, &tr[1]));
	CU_ASSERT_EQUAL(tide_lcore_poller_remove(lc, trace_poll, &tr[1]), -ENOENT);
	TIDE_UT_OK(tide_lcore_group_start(g));
	wait_calls(&t, 2, 40);
	tide_lcore_group_stop(g);
	CU_ASSERT_EQUAL(atomic_load(&t.calls[1]), 0);
	CU_ASSERT_EQUAL(atomic_load(&t.n), sizeof(t.log) - 1);
	for (unsigned i = 0; i < atomic_load(&t.n); i++)
		CU_ASSERT_EQUAL(t.log[i], i % 2 == 0 ? 'A' : 'C');

	/* After stop: remove A, add B back; B now runs after C. */
	TIDE_UT_OK(tide_lcore_poller_remove(lc, trace_poll, &tr[0]));
	TIDE_UT_OK(tide_lcore_poller_add(lc, trace_poll, &tr[1]));
	memset(t.log, 0, sizeof(t.log));
	atomic_store(&t.n, 0);
	atomic_store(&t.calls[0], 0);
	TIDE_UT_OK(tide_lcore_group_start(g));
	wait_calls(&t, 1, 40);
	tide_lcore_group_stop(g);
	CU_ASSERT_EQUAL(atomic_load(&t.calls[0]), 0);
	for (unsigned i = 0; i < atomic_load(&t.n); i++)
		CU_ASSERT_EQUAL(t.log[i], i % 2 == 0 ? 'C' : 'B');
	tide_lcore_group_destroy(g);
}

static void
test_poller_remove_on_worker(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct tide_lcore_stats st0, st1;
	struct trace t = {0};
	struct tracer tr[3] = {
		{.t = &t, .id = 0}, {.t = &t, .id = 1, .remove_after = 100}, {.t = &t, .id = 2}};
	struct remove_msg m = {0};
	struct tide_lcore *lc;
	uint64_t a_calls;
	int cpu = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	o.idle = TIDE_LCORE_IDLE_BUSY;
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	lc = tide_lcore_get(g, 0);
	for (int i = 0; i < 3; i++)
		TIDE_UT_OK(tide_lcore_poller_add(lc, trace_poll, &tr[i]));
	TIDE_UT_OK(tide_lcore_group_start(g));

	/* B removes itself from inside its 100th call: it is never called again. */
	wait_calls(&t, 2, 1000);
	CU_ASSERT_EQUAL(tr[1].remove_rc, 0);
	CU_ASSERT_EQUAL(atomic_load(&t.calls[1]), 100);

	/* A is removed by a message run on the worker, as an owner tearing down does. */
	m.lc = lc;
	m.tr = &tr[0];
	TIDE_UT_OK(tide_lcore_post(lc, remove_on_worker, &m));
	for (int i = 0; i < 5000 && !atomic_load(&m.done); i++)
		usleep(1000);
	CU_ASSERT_TRUE_FATAL(atomic_load(&m.done));
	CU_ASSERT_EQUAL(m.rc, 0);
	a_calls = atomic_load(&t.calls[0]);
	tide_lcore_stats_get(lc, &st0);
	wait_calls(&t, 2, atomic_load(&t.calls[2]) + 1000);
	tide_lcore_stats_get(lc, &st1);
	/* The worker keeps going with C alone; A never runs after the message returned. */
	CU_ASSERT_TRUE(st1.iterations > st0.iterations);
	CU_ASSERT_EQUAL(atomic_load(&t.calls[0]), a_calls);
	CU_ASSERT_EQUAL(atomic_load(&t.calls[1]), 100);

	/* Removing it again on the worker: -ENOENT. */
	atomic_store(&m.done, false);
	TIDE_UT_OK(tide_lcore_post(lc, remove_on_worker, &m));
	for (int i = 0; i < 5000 && !atomic_load(&m.done); i++)
		usleep(1000);
	CU_ASSERT_EQUAL(m.rc, -ENOENT);
	tide_lcore_group_stop(g);
	tide_lcore_group_destroy(g);
}

struct sync_probe {
	struct tide_lcore *lc;
	struct tide_lcore *ran_on; /* tide_lcore_current() inside the message */
	int self_rc;               /* tide_lcore_run_sync() on the worker itself */
	int runs;
};

static void
sync_probe(void *arg)
{
	struct sync_probe *p = arg;

	p->ran_on = tide_lcore_current();
	p->self_rc = tide_lcore_run_sync(p->lc, sync_probe, p); /* would wait for itself */
	p->runs++;
}

static void
test_run_sync(void)
{
	struct tide_lcore_opts o;
	struct tide_lcore_group *g = NULL;
	struct sync_probe p = {0};
	int cpu = cpu0();

	tide_lcore_opts_init(&o, sizeof(o));
	TIDE_UT_OK(tide_lcore_group_create(&o, &cpu, 1, &g));
	p.lc = tide_lcore_get(g, 0);
	CU_ASSERT_EQUAL(tide_lcore_run_sync(p.lc, NULL, NULL), -EINVAL);
	TIDE_UT_OK(tide_lcore_group_start(g));
	/* Returns only after the message ran, on the worker; the nested call on the
	 * worker itself is refused instead of waiting forever. */
	for (int i = 0; i < 200; i++)
		TIDE_UT_OK(tide_lcore_run_sync(p.lc, sync_probe, &p));
	CU_ASSERT_EQUAL(p.runs, 200);
	CU_ASSERT_PTR_EQUAL(p.ran_on, p.lc);
	CU_ASSERT_EQUAL(p.self_rc, -EDEADLK);
	tide_lcore_group_stop(g);
	tide_lcore_group_destroy(g);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("lcore", NULL, NULL);

	CU_add_test(s, "cpus_pick_parses_lists", test_cpus_pick_parses_lists);
	CU_add_test(s, "cpus_pick_per_numa", test_cpus_pick_per_numa);
	CU_add_test(s, "group_create_rejects_bad_opts", test_group_create_rejects_bad_opts);
	CU_add_test(s, "pollers_run_and_adaptive_idle_sleeps",
		    test_pollers_run_and_adaptive_idle_sleeps);
	CU_add_test(s, "adaptive_idle_yields_before_sleeping",
		    test_adaptive_idle_yields_before_sleeping);
	CU_add_test(s, "sleeping_worker_woken_by_post_and_wake",
		    test_sleeping_worker_woken_by_post_and_wake);
	CU_add_test(s, "post_from_many_threads_in_order", test_post_from_many_threads_in_order);
	CU_add_test(s, "ring_full_returns_eagain_before_start",
		    test_ring_full_returns_eagain_before_start);
	CU_add_test(s, "thread_init_failure_fails_start", test_thread_init_failure_fails_start);
	CU_add_test(s, "run_sync", test_run_sync);
	CU_add_test(s, "irq_source_wakes_sleeper", test_irq_source_wakes_sleeper);
	CU_add_test(s, "irq_source_arm_failure_falls_back", test_irq_source_arm_failure_falls_back);
	CU_add_test(s, "irq_source_reconnect", test_irq_source_reconnect);
	CU_add_test(s, "irq_source_dead_descriptor", test_irq_source_dead_descriptor);
	CU_add_test(s, "irq_off", test_irq_off);
	CU_add_test(s, "poller_remove_before_start_keeps_order",
		    test_poller_remove_before_start_keeps_order);
	CU_add_test(s, "poller_remove_on_worker", test_poller_remove_on_worker);
}

TIDE_UT_MAIN(register_tests)
