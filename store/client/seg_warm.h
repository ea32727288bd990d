/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: faulting a contributed segment in ahead of use.
 *
 * A segment is anonymous memory handed out by the master piece by piece. On
 * first touch every page faults, and on a paravirtualised VM that is what a
 * put into fresh segment memory costs: 192 MiB through batch_put_from ran at
 * 335 MiB/s into fresh 4 KiB pages and at 18 GB/s into the same memory once
 * touched. Transparent huge pages take a fault per 2 MiB instead of per
 * 4 KiB (510 MiB/s fresh), and touching the range beforehand, from a thread
 * that runs on idle CPU, leaves nothing for the put to pay.
 */
#ifndef TIDE_SEG_WARM_H
#define TIDE_SEG_WARM_H

#include <stddef.h>
#include <stdint.h>

struct tide_seg_warm;

/*
 * Ask for transparent huge pages over [base, base + len) (madvise
 * MADV_HUGEPAGE; ignored where the kernel has none), then start a thread at
 * SCHED_IDLE priority (it runs only on otherwise idle CPU) that faults the
 * range in from its start (a write access to each page that keeps its
 * contents), 32 MiB at a time, and stops early, logging once, when the
 * system's MemAvailable would fall below `reserve` bytes (0: the default, an
 * eighth of MemTotal and at least 1 GiB) or /proc/meminfo is unreadable.
 * base/len: page-aligned anonymous memory the caller owns and keeps mapped
 * until tide_seg_warm_stop() returned.
 * Returns 0 (*out set) or a negative errno (-EINVAL: base or len not
 * page-aligned, or len 0; -ENOMEM; or pthread_create's error); on error
 * nothing runs and the memory is still usable as it was.
 * Any thread; one call per range.
 */
int tide_seg_warm_start(void *base, size_t len, uint64_t reserve, struct tide_seg_warm **out);

/*
 * Stop the thread (it finishes at most the 32 MiB step it is in), wait for
 * it and free w. What was faulted in stays. NULL-safe. Any thread but the
 * warm-up's own; once per tide_seg_warm_start().
 */
void tide_seg_warm_stop(struct tide_seg_warm *w);

/*
 * Bytes faulted in so far, from the start of the range; done (may be NULL)
 * is set when the thread has finished (whole range or memory limit).
 * Any thread.
 */
size_t tide_seg_warm_progress(struct tide_seg_warm *w, int *done);

/*
 * A client's local buffer, warmed only at its start: BufferPool leases are
 * carved first-fit from the lowest address, so a reader's first gets land
 * there, and on this VM class a fault into memory the host reclaimed while the
 * machine sat idle costs about 2.5 ms per MiB (a Miles trainer's first get of
 * a step ran at 373-381 MiB/s against 1165 with its buffer touched
 * beforehand). Bounded: callers ask for buffers of tens of GiB and use little.
 */
#define TIDE_LBUF_WARM_MAX (256ull << 20)

/*
 * tide_seg_warm_start() over the first min(len, TIDE_LBUF_WARM_MAX) bytes of
 * the local buffer [base, base + len) (anonymous or a shared memfd mapping;
 * page-aligned base). Best effort: on failure (logged at DEBUG) *out stays
 * NULL and the buffer works as before. Any thread.
 */
void tide_lbuf_warm_start(void *base, size_t len, struct tide_seg_warm **out);

#endif /* TIDE_SEG_WARM_H */
