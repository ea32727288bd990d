/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segment warm-up: transparent huge pages, then a SCHED_IDLE thread faulting
 * the segment in ahead of the puts that would otherwise pay for it (see
 * seg_warm.h for the figures).
 */
#include "seg_warm.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tide_log.h"

/* Memory checked once per step; a step is tens of ms, which bounds how long
 * tide_seg_warm_stop() waits. */
#define WARM_STEP (32u << 20)
/* Default reserve: an eighth of the machine's memory, at least this. */
#define WARM_RESERVE_MIN (1ull << 30)

struct tide_seg_warm {
	char *base;
	size_t len;
	size_t page;
	uint64_t reserve; /* 0: the default, computed from MemTotal */
	pthread_t thread;
	atomic_bool stop;
	atomic_bool done;
	atomic_size_t progress;
};

/* MemAvailable and MemTotal in bytes from /proc/meminfo; false if unreadable. */
static bool
meminfo(uint64_t *avail, uint64_t *total)
{
	char line[128];
	unsigned long long v;
	int found = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (f == NULL)
		return false;
	while (found < 2 && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
			*avail = (uint64_t)v << 10;
			found++;
		} else if (sscanf(line, "MemTotal: %llu kB", &v) == 1) {
			*total = (uint64_t)v << 10;
			found++;
		}
	}
	fclose(f);
	return found == 2;
}

/*
 * Fault [p, p + n) in by a write access to every page that leaves its
 * contents alone: an atomic add of zero, so a put copying into the same page
 * at the same moment loses nothing (a plain store of zero would). Why not
 * MADV_POPULATE_WRITE: it holds the process's mmap lock for the whole range,
 * and a thread at SCHED_IDLE that is preempted holding it stalls every
 * mmap/munmap of the process (numpy's large allocations) behind a pending
 * writer; a fault holds only the segment's own VMA lock, for one page.
 * With transparent huge pages only the first touch of each 2 MiB faults.
 */
static void
touch(char *p, size_t n, size_t page)
{
	for (size_t o = 0; o < n; o += page)
		__atomic_fetch_add((uint64_t *)(void *)(p + o), 0, __ATOMIC_RELAXED);
}

static void *
warm_main(void *arg)
{
	struct tide_seg_warm *w = arg;
	struct sched_param sp = {0};
	uint64_t avail = 0, total = 0, reserve = w->reserve;
	size_t off = 0, n;
	const char *why = NULL;

	/* Only idle CPU: a node's pollers, agent and master come first. */
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	while (off < w->len && !atomic_load_explicit(&w->stop, memory_order_relaxed)) {
		n = w->len - off < WARM_STEP ? w->len - off : WARM_STEP;
		if (!meminfo(&avail, &total)) {
			why = "/proc/meminfo is unreadable";
			break;
		}
		if (reserve == 0) {
			reserve = total / 8 > WARM_RESERVE_MIN ? total / 8 : WARM_RESERVE_MIN;
		}
		if (avail < reserve + n) {
			why = "the machine's available memory reached the reserve";
			break;
		}
		touch(w->base + off, n, w->page);
		off += n;
		atomic_store_explicit(&w->progress, off, memory_order_relaxed);
	}
	if (why != NULL) {
		TIDE_LOG(INFO,
			 "warm-up stopped at %zu of %zu MiB (%s); the rest faults in on "
			 "first use",
			 off >> 20, w->len >> 20, why);
	}
	atomic_store_explicit(&w->done, true, memory_order_release);
	return NULL;
}

int
tide_seg_warm_start(void *base, size_t len, uint64_t reserve, struct tide_seg_warm **out)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct tide_seg_warm *w;
	int rc;

	if (base == NULL || len == 0 || out == NULL || pg <= 0 ||
	    ((uintptr_t)base | len) % (size_t)pg != 0)
		return -EINVAL;
	/* Best effort: EINVAL where THP is compiled out, and the range still works. */
	(void)madvise(base, len, MADV_HUGEPAGE);
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->base = base;
	w->len = len;
	w->page = (size_t)pg;
	w->reserve = reserve;
	atomic_init(&w->stop, false);
	atomic_init(&w->done, false);
	atomic_init(&w->progress, 0);
	rc = pthread_create(&w->thread, NULL, warm_main, w);
	if (rc != 0) {
		free(w);
		return -rc;
	}
	(void)pthread_setname_np(w->thread, "tide-segwarm");
	*out = w;
	return 0;
}

void
tide_seg_warm_stop(struct tide_seg_warm *w)
{
	if (w == NULL)
		return;
	atomic_store_explicit(&w->stop, true, memory_order_relaxed);
	pthread_join(w->thread, NULL);
	free(w);
}

size_t
tide_seg_warm_progress(struct tide_seg_warm *w, int *done)
{
	if (done != NULL)
		*done = atomic_load_explicit(&w->done, memory_order_acquire);
	return atomic_load_explicit(&w->progress, memory_order_relaxed);
}

void
tide_lbuf_warm_start(void *base, size_t len, struct tide_seg_warm **out)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t n = len < TIDE_LBUF_WARM_MAX ? len : (size_t)TIDE_LBUF_WARM_MAX;
	int rc;

	*out = NULL;
	if (pg <= 0)
		return;
	n &= ~((size_t)pg - 1);
	if (n == 0)
		return;
	rc = tide_seg_warm_start(base, n, 0, out);
	if (rc != 0) {
		*out = NULL;
		TIDE_LOG(DEBUG, "local buffer warm-up not started: %s", strerror(-rc));
	}
}
