/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Polling workers: one run-to-completion loop per worker thread, each pinned
 * to one CPU, chosen per NUMA node.
 *
 * A worker runs its pollers in a fixed order, once per iteration, passing the
 * time read once at the top of the iteration. A poller returns > 0 when it did
 * work and 0 when it found none (the SPDK busy/idle contract). When a whole
 * iteration finds no work, the idle policy decides: BUSY spins (lowest
 * latency, one CPU burnt per worker); ADAPTIVE, after `idle_spins` empty
 * iterations, yields the CPU to any other runnable thread each iteration for
 * `idle_yield_us`, then sleeps `idle_sleep_us` at a time, so several
 * processes can share few cores. A sleeping worker wakes at once for a
 * message (tide_lcore_post) or a tide_lcore_wake() from another thread.
 *
 * Other threads never touch a worker's state: they post a message
 * (function + argument) to the worker's bounded MPSC ring, and the worker
 * runs it at the top of an iteration. Everything a worker owns (stacks,
 * connections, queues) is therefore single-threaded.
 *
 * No DPDK here: workers are pthreads. The owner may pass a thread_init hook
 * (e.g. one that registers the thread with the DPDK EAL so mempool caches
 * work) which runs on the worker before its first poll.
 */
#ifndef TIDE_LCORE_H
#define TIDE_LCORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most workers one group may have. */
#define TIDE_LCORE_MAX 64
/** Most pollers per worker. */
#define TIDE_LCORE_MAX_POLLERS 16

struct tide_lcore;
struct tide_lcore_group;

/** A poller: > 0 when it did work, 0 when idle. Runs on its worker only. */
typedef int (*tide_lcore_poll_fn)(void *ctx, uint64_t now_ns);

/** A message run on a worker. */
typedef void (*tide_lcore_msg_fn)(void *arg);

/** What a worker does when an iteration finds no work. */
enum tide_lcore_idle {
	TIDE_LCORE_IDLE_BUSY = 0,     /**< spin (with a CPU pause hint) */
	TIDE_LCORE_IDLE_ADAPTIVE = 1, /**< after idle_spins empty iterations: yield, then sleep */
};

/** Group options; fill with tide_lcore_opts_init() first. */
struct tide_lcore_opts {
	size_t opts_size;          /**< sizeof(struct tide_lcore_opts) as the caller knows it */
	enum tide_lcore_idle idle; /**< default ADAPTIVE */
	uint32_t idle_sleep_us;    /**< default 100; 0 = yield instead of sleeping */
	uint32_t idle_spins;       /**< empty iterations before sleeping; default 1024 */
	uint32_t msg_ring_size;    /**< messages per worker ring, power of two; default 1024 */
	bool pin;                  /**< pin each worker to its CPU; default true */
	/** Runs on each worker before its first iteration; non-zero fails the start. */
	int (*thread_init)(void *arg, unsigned worker);
	void *thread_init_arg; /**< passed to thread_init */
	/** Clock for `now_ns`; NULL = CLOCK_MONOTONIC. Tests pass a fake. */
	uint64_t (*clock_ns)(void);
	/** ADAPTIVE: how long an idle worker yields before it starts sleeping;
	 *  default 2000 (2 ms). Appended: callers compiled before it get the default. */
	uint32_t idle_yield_us;
	/** ADAPTIVE with interrupt sources (tide_lcore_irq_add()): how long a worker
	 *  is idle before it arms them and sleeps, instead of yielding for
	 *  idle_yield_us; default 2000 (the same: sources replace timed sleeps).
	 *  Appended. */
	uint32_t irq_after_us;
};

/** Counters of one worker; written by the worker only, racy to read. */
struct tide_lcore_stats {
	uint64_t iterations;  /**< loop iterations */
	uint64_t busy;        /**< iterations in which some poller did work */
	uint64_t sleeps;      /**< idle sleeps (ADAPTIVE) */
	uint64_t wakeups;     /**< sleeps cut short by a message or tide_lcore_wake() */
	uint64_t msgs;        /**< messages run */
	uint64_t busy_ns;     /**< time spent in iterations that did work */
	uint64_t idle_ns;     /**< time spent in iterations that did none, sleeps included */
	uint64_t irq_sleeps;  /**< sleeps with interrupt sources armed (also in sleeps) */
	uint64_t irq_wakeups; /**< of those, ended by a source's descriptor */
};

/** Most interrupt sources per worker. */
#define TIDE_LCORE_MAX_IRQS 4

/**
 * A source of a worker's work that can wake it while it sleeps (a device
 * receive queue's interrupt). A worker all of whose inputs have one (its
 * owner adds them only then: messages and tide_lcore_wake() need none, timers
 * are served by the bounded sleep) sleeps under ADAPTIVE idle once it has
 * been idle for irq_after_us: it arms every source, runs one more iteration
 * (for what arrived before arming), and if that found no work sleeps until a
 * source's descriptor is readable, a message or tide_lcore_wake() comes, or
 * the earliest of the sources' next_ns passes (idle_sleep_us when a source
 * has no next_ns; at most TIDE_LCORE_IRQ_SLEEP_MAX_US, which also bounds a
 * wake-up a source lost). It stays armed across sleeps (arming again before
 * each: a source whose descriptor changed gets another re-check iteration, one
 * that cannot arm or whose descriptor turns invalid is disarmed and asked again
 * 100 ms later); the first iteration that does work disarms.
 */
struct tide_lcore_irq {
	/** Arm; returns the descriptor that turns readable when work arrives, or
	 *  -errno when the source cannot interrupt now (the worker then yields as
	 *  without sources, and tries again 100 ms later). Runs on the worker. */
	int (*arm)(void *ctx);
	/** Disarm (and drain the descriptor). Runs on the worker. */
	void (*disarm)(void *ctx);
	/** Optional: the earliest time (the worker's clock, ns) its pollers have
	 *  timed work (UINT64_MAX: none). Runs on the worker. */
	uint64_t (*next_ns)(void *ctx);
	void *ctx;
};

/** Longest sleep with interrupt sources armed. */
#define TIDE_LCORE_IRQ_SLEEP_MAX_US 10000

/**
 * Fill opts with defaults.
 * \param opts_size  sizeof(*opts) as compiled by the caller.
 * Thread: any.
 */
void tide_lcore_opts_init(struct tide_lcore_opts *opts, size_t opts_size);

/**
 * Choose worker CPUs: the explicit list when `list` is non-empty (e.g.
 * "1-3,5"), else `per_numa` CPUs from each NUMA node that has CPUs, taken
 * from the highest-numbered CPU down (CPU 0 usually carries interrupts and
 * the main thread), limited to the CPUs this process may run on.
 * \param[out] cpus  up to `max` CPU ids
 * \param[out] n     how many were chosen (>= 1 on success)
 * \return 0; -EINVAL malformed list or per_numa 0; -ERANGE more than max CPUs
 *         or a CPU this process may not use; -ENODEV no usable CPU.
 * Thread: any.
 */
int tide_lcore_cpus_pick(const char *list, unsigned per_numa, int *cpus, unsigned max, unsigned *n);

/**
 * Create a group of `n` workers, worker i pinned to cpus[i]. Nothing runs
 * until tide_lcore_group_start().
 * \return 0; -EINVAL bad opts, n 0 or > TIDE_LCORE_MAX, ring size not a
 *         power of two; -ENOMEM.
 * Thread: any. Ownership: destroy with tide_lcore_group_destroy().
 */
int tide_lcore_group_create(const struct tide_lcore_opts *opts, const int *cpus, unsigned n,
			    struct tide_lcore_group **out);

/** Worker i of the group, or NULL when out of range. Thread: any. */
struct tide_lcore *tide_lcore_get(struct tide_lcore_group *g, unsigned i);

/** Number of workers. Thread: any. */
unsigned tide_lcore_count(const struct tide_lcore_group *g);

/** Index of a worker in its group. Thread: any. */
unsigned tide_lcore_index(const struct tide_lcore *lc);

/** CPU a worker is (to be) pinned to. Thread: any. */
int tide_lcore_cpu(const struct tide_lcore *lc);

/**
 * Add a poller to a worker. Pollers run in the order added.
 * \return 0; -ENOSPC TIDE_LCORE_MAX_POLLERS reached; -EINVAL fn NULL.
 * Thread: before tide_lcore_group_start() or after tide_lcore_group_stop(), or
 * on the worker itself (e.g. from a message) while it runs.
 */
int tide_lcore_poller_add(struct tide_lcore *lc, tide_lcore_poll_fn fn, void *ctx);

/**
 * Add an interrupt source (struct tide_lcore_irq; copied). Only under ADAPTIVE
 * idle with idle_sleep_us > 0 are sources used.
 * \return 0; -ENOSPC TIDE_LCORE_MAX_IRQS reached; -EINVAL irq, arm or disarm NULL.
 * Thread: as tide_lcore_poller_add().
 */
int tide_lcore_irq_add(struct tide_lcore *lc, const struct tide_lcore_irq *irq);

/**
 * An input without an interrupt joins the worker (a poller another component adds to
 * lcores it borrows, e.g. completion queues): its interrupt sources stop being used
 * (disarmed if armed) and idle spells go back to timed sleeps, for the worker's life.
 * Thread: as tide_lcore_poller_add().
 */
void tide_lcore_irq_off(struct tide_lcore *lc);

/**
 * Remove the poller added with this exact (fn, ctx) pair (the first one, if it
 * was added twice). The others keep their order. Once this returns on the
 * worker, the removed poller is never called again, so its ctx may be freed.
 * A poller may remove itself or another from inside its own call; a poller
 * after it may then miss that one iteration.
 * \return 0; -ENOENT no such poller on this worker; -EINVAL fn NULL.
 * Thread: as tide_lcore_poller_add(): before start, after stop, or on the
 * worker itself while it runs (e.g. from a message posted with
 * tide_lcore_post(); the poster waits for it to run before freeing ctx).
 */
int tide_lcore_poller_remove(struct tide_lcore *lc, tide_lcore_poll_fn fn, void *ctx);

/**
 * Start every worker thread. Returns after each ran its thread_init.
 * \return 0; -EALREADY started; -errno from pthread_create or pinning, or the
 *         value thread_init returned (workers already started are stopped).
 * Thread: the group's owner.
 */
int tide_lcore_group_start(struct tide_lcore_group *g);

/**
 * Post a message to a worker: fn(arg) runs on it at the top of an iteration,
 * in posting order per producer. Wait-free for producers except when racing
 * on the same slot.
 * \return 0; -EAGAIN the ring is full (the message was not queued; retry or
 *         fail the request); -EINVAL fn NULL.
 * Thread: any, including the worker itself.
 */
int tide_lcore_post(struct tide_lcore *lc, tide_lcore_msg_fn fn, void *arg);

/**
 * Wake the worker if it sleeps (ADAPTIVE idle), so work a producer queued by
 * its own means (not tide_lcore_post, which wakes by itself) is seen now
 * rather than after the sleep. Costs one atomic load when the worker is
 * awake. Call after the work is visible to the worker.
 * Thread: any.
 */
void tide_lcore_wake(struct tide_lcore *lc);

/**
 * Run fn(arg) on a running worker and wait until it returned (posting again
 * while the ring is full). For set-up and tear-down steps that must happen on
 * the worker (e.g. tide_lcore_poller_add/remove after start); not for the
 * data path: the caller sleeps in 50 us steps.
 * \return 0 after fn ran; -EINVAL fn NULL; -EDEADLK called on lc itself (it
 *         would wait for itself).
 * Thread: any thread but lc's own worker; lc must be running (else this waits).
 */
int tide_lcore_run_sync(struct tide_lcore *lc, tide_lcore_msg_fn fn, void *arg);

/**
 * Stop the workers after their current iteration (messages already posted
 * are run first) and join them. Idempotent.
 * Thread: the group's owner; never a worker.
 */
void tide_lcore_group_stop(struct tide_lcore_group *g);

/** Stop if running, then free. NULL is ignored. Thread: the group's owner. */
void tide_lcore_group_destroy(struct tide_lcore_group *g);

/** Copy a worker's counters (racy snapshot). Thread: any. */
void tide_lcore_stats_get(const struct tide_lcore *lc, struct tide_lcore_stats *st);

/** The worker the calling thread is, or NULL on a non-worker thread. Thread: any. */
struct tide_lcore *tide_lcore_current(void);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_LCORE_H */
