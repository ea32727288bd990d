/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/: the bookkeeping of put and get sessions (Mooncake's
 * batch_put_session_* and batch_get_session_*), with no I/O: a table of
 * sessions keyed by object key, each holding the replicas its transfers go to
 * (a put session: every replica BatchPutStart reserved; a get session: the one
 * COMPLETE memory replica the lookup chose) and the bytes those transfers may
 * touch.
 *
 * Life of an entry:
 *   reserve (a placeholder: the key is taken, not usable)  ->  fill (usable)
 *   use / done (a transfer in flight holds it; any number at once)
 *   seal (no new use; waits for the uses in flight)  ->  unlink
 * A placeholder lets a start refuse a second start of the same key before the
 * master is asked, and bounds the table before anything is reserved there.
 * unlink takes an entry out at once; it is freed by the last done().
 *
 * The agent keeps one table per client connection as the set of keys that
 * connection opened (entries without replicas).
 *
 * Bounds: at most max entries (placeholders included; store_sess_reserve()
 * answers -ENOSPC beyond), at most STORE_SESS_MAX_REPS replicas an entry.
 * Thread: any; one mutex per table, never held across I/O.
 */
#ifndef TIDE_STORE_SESS_H
#define TIDE_STORE_SESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Replicas one session remembers (a master gives a put at most a few). */
#define STORE_SESS_MAX_REPS 64u

/* One replica: where the object's bytes are in its holder's segment. */
struct store_sess_rep {
	const char *ep; /* transfer-engine segment name (owned by the entry) */
	uint64_t addr;  /* the object's first byte there */
};

struct store_sess {
	struct store_sess *next; /* hash chain */
	char *key;               /* owned, inside this allocation */
	uint64_t hash;
	bool ready;    /* filled; false: a placeholder */
	bool sealed;   /* an end or revoke is finishing it: no new use */
	bool unlinked; /* out of the table: freed by the last done() */
	bool waiter;   /* a seal waits on it: freed by that seal */
	unsigned users;
	uint64_t size;         /* bytes a transfer may touch: [0, size) */
	uint64_t lease_end_ms; /* get: the read lease's end (store_xfer_now_ms()); 0: none */
	size_t nrep;
	struct store_sess_rep rep[];
};

struct store_sess_tab {
	pthread_mutex_t lock;
	pthread_cond_t cv; /* a use ended */
	struct store_sess **b;
	size_t nb; /* buckets, a power of two */
	size_t n, max;
};

/* An empty table of at most max entries. 0; -ENOMEM. */
int store_sess_init(struct store_sess_tab *t, size_t max);
/* Free every entry (none may be in use) and the table. */
void store_sess_fini(struct store_sess_tab *t);

/* Take key as a placeholder. 0; -EBUSY key has an entry (ready or not); -ENOSPC the
 * table holds max entries; -ENOMEM. */
int store_sess_reserve(struct store_sess_tab *t, const char *key);
/*
 * Make key's placeholder a session of size bytes over reps (nrep, at most
 * STORE_SESS_MAX_REPS; endpoints copied). 0; -ESRCH no placeholder; -EINVAL too
 * many replicas or an endpoint NULL; -ENOMEM. On an error the placeholder is gone.
 */
int store_sess_fill(struct store_sess_tab *t, const char *key, uint64_t size,
		    const struct store_sess_rep *reps, size_t nrep, uint64_t lease_end_ms);
/* reserve + fill: replace whatever key had (a get session starts over), unless it is
 * sealed or a placeholder (-EBUSY). Same errors as both. */
int store_sess_put(struct store_sess_tab *t, const char *key, uint64_t size,
		   const struct store_sess_rep *reps, size_t nrep, uint64_t lease_end_ms);

/*
 * Hold key's ready, unsealed session for a transfer. NULL with *err: -ESRCH none
 * (or a placeholder, or sealed); -ESTALE its lease ended at now_ms (the entry is
 * unlinked). Release with store_sess_done().
 */
struct store_sess *store_sess_use(struct store_sess_tab *t, const char *key, uint64_t now_ms,
				  int *err);
void store_sess_done(struct store_sess_tab *t, struct store_sess *s);

/* Seal key's ready session and wait for its uses to end. 0; -ESRCH none (or a
 * placeholder); -EBUSY sealed already (another end or revoke is finishing it). */
int store_sess_seal(struct store_sess_tab *t, const char *key);
/* Take key's entry (any state) out of the table. true when there was one. */
bool store_sess_unlink(struct store_sess_tab *t, const char *key);
/* Whether key has a ready entry. */
bool store_sess_has(struct store_sess_tab *t, const char *key);

/* The keys of the ready entries, copied into one block (*out: the pointers, then the
 * strings; free(*out) frees them all). Returns how many; 0 with *out NULL when none
 * or no memory. */
size_t store_sess_keys(struct store_sess_tab *t, char ***out);

/* Whether [off, off + len) lies in [0, size) (Mooncake's is_object_range_overflow,
 * negated). */
static inline bool
store_sess_in_range(uint64_t off, uint64_t len, uint64_t size)
{
	return len <= size && off <= size - len;
}

#endif /* TIDE_STORE_SESS_H */
