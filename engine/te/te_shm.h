/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to engine/te: reaching a same-host peer's shared buffers directly.
 *
 * A buffer registered with tide_te_register_shared() is the mapping of a
 * memory file (memfd) of its process; the descriptor names the file (the
 * owner's descriptor number, inode and offset) and the owner (host identity
 * and process id). A peer on the same host and in the same PID namespace maps
 * the file itself (opening /proc/<pid>/fd/<n>, which the kernel allows to
 * processes that may trace the owner: same user) and copies with memcpy, one
 * copy per byte and no system call for the data, where the kernel-socket path
 * copies each byte twice and crosses the loopback stack. Anything that does
 * not hold (another host, another user, a file that is not the advertised one)
 * leaves the request to the network transport, as before.
 *
 * The mapping is of the file, not of the owner's address space: what the owner
 * later unmaps or reuses is never written through it, and a peer that still
 * writes after the owner unregistered the buffer writes into the file that no
 * longer backs anything of the owner's. The owner's exit is checked before each
 * copy (a pidfd), so a vanished peer fails requests as a broken connection would.
 */
#ifndef TE_SHM_H
#define TE_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "te_meta.h" /* meta/ */

/*
 * This process's host identity, "<boot id>/<PID namespace inode>" (two
 * processes with equal identities see the same /proc), or "" when /proc
 * does not say. Computed once. Thread: any.
 */
const char *te_shm_host_id(void);

struct te_shm; /* one peer's shared buffers and their mappings */

/*
 * The shared buffers of peer descriptor d, if it runs on this host in another
 * process (d->pid, d->host_id equal to ours) and advertises any; *out NULL
 * otherwise (use the network). Nothing is mapped yet. The set holds one
 * reference. Returns 0 (*out set or NULL) or -ENOMEM.
 * Thread: any; d is only read.
 */
int te_shm_open(const struct te_desc *d, const char *seg_name, struct te_shm **out);

/* References: te_shm_get() adds one; te_shm_put() drops one and frees the set
 * (unmapping everything) with the last. NULL-safe. Thread: any. */
void te_shm_get(struct te_shm *m);
void te_shm_put(struct te_shm *m);

/* Whether [remote, remote + len) lies in one of the peer's shared buffers
 * (not whether it can be mapped). Thread: any. */
bool te_shm_covers(const struct te_shm *m, uint64_t remote, uint64_t len);

/*
 * Copy len bytes between local memory and the peer's [remote, remote + len):
 * op TIDE_TE_READ copies into local, TIDE_TE_WRITE out of it. Maps the buffer
 * on first use (once; a buffer that cannot be mapped is remembered and logged
 * once).
 * Returns 0 copied; -ENOENT not covered or not mappable (send it over the
 * network; nothing was touched); -ECONNRESET the peer process has exited
 * (nothing was copied; an exit is noticed by the first copy more than 100 us
 * after the previous check of the peer, which copies in between reuse).
 * Thread: any; concurrent copies are fine (the caller orders overlapping ones).
 * A copy of 16 MiB or more may run its second half on a helper thread it
 * starts and joins before returning (while the process has a spare CPU).
 */
int te_shm_copy(struct te_shm *m, uint8_t op, void *local, uint64_t remote, uint64_t len);

#endif /* TE_SHM_H */
