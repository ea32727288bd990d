/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the seam between the store's public calls and the
 * place they run, as engine/te/te_xport.h is between the engine and a transport.
 *
 * Two backends implement it:
 *   - in-process (store_inproc.c): the master places, this process's transfer
 *     engine moves the bytes, this process contributes the segment;
 *   - agent (store_agent.c): every call is one request to the node's agent
 *     (tide-node), which runs the in-process backend for all the node's clients.
 *
 * store_client.c owns the life cycle: tide_store_setup() builds exactly one
 * backend and tide_store_close() destroys it; in between every public call is
 * "not set up" (answered by store_client.c) or one call through be->ops. Which
 * backend runs is never tested anywhere else.
 *
 * Every op has the arguments, results and errors of the tide_store_X() it
 * serves (tide_store.h) and checks its own arguments: the agent's protocol
 * bounds keys and batches more tightly than a master does, so the two refuse
 * different things. Registered buffers are store_client.c's bookkeeping for
 * both backends; a backend whose engine wants large buffers registered too
 * says so with register_memory.
 *
 * Thread: an op may run on any thread at once, as the tide_store_X() it serves,
 * between the end of set-up and the start of close.
 * Ownership: a backend belongs to the store that set it up; ops never free it.
 */
#ifndef TIDE_STORE_BACKEND_H
#define TIDE_STORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_store.h"

struct store_backend_ops;

/*
 * The head of a backend's state. A backend embeds it in its own struct and gets
 * back to that struct with store_backend_of().
 */
struct store_backend {
	const struct store_backend_ops *ops;
};

/* The struct of type `type` whose member `member` is the backend head b. */
#define store_backend_of(b, type, member) ((type *)(void *)((char *)(b)-offsetof(type, member)))

struct store_backend_ops {
	const char *name; /* "in-process", "agent" */
	/* The calls run in the node's agent (tide_store_attached()). */
	bool attached;

	/* Objects: tide_store_put(), tide_store_batch_put_from(). */
	int (*put)(struct store_backend *b, const char *key, const void *buf, size_t len,
		   const struct tide_store_rc *repl);
	int (*batch_put)(struct store_backend *b, const char *const *keys, const void *const *bufs,
			 const size_t *lens, size_t n, const struct tide_store_rc *repl, int *rcs);
	/* tide_store_batch_put_parts() (values in pieces; flags TIDE_STORE_PUT_*). */
	int (*put_parts)(struct store_backend *b, const char *const *keys,
			 const struct tide_store_part *parts, const size_t *nparts, size_t n,
			 const struct tide_store_rc *repl, unsigned flags, int *rcs);

	/* tide_store_get_into(), tide_store_get_with() (out and len checked and
	 * cleared by the caller, alloc not NULL), tide_store_get_size(). */
	int64_t (*get_into)(struct store_backend *b, const char *key, void *buf, size_t len);
	int (*get_with)(struct store_backend *b, const char *key, tide_store_alloc_fn alloc,
			tide_store_release_fn release, void *arg, void **out, size_t *len);
	int64_t (*get_size)(struct store_backend *b, const char *key);
	/* tide_store_batch_get_into(), tide_store_get_into_ranges(). */
	int (*batch_get_into)(struct store_backend *b, const char *const *keys, void *const *bufs,
			      const size_t *lens, size_t n, int64_t *sizes);
	int (*get_into_ranges)(struct store_backend *b, const char *const *keys, size_t nkeys,
			       struct tide_store_frag *frags, size_t nfrags);
	/* tide_store_batch_get_replicas() (out checked and cleared by the caller; a new
	 * block of store_replicas.h on 0). */
	int (*get_replicas)(struct store_backend *b, const char *const *keys, size_t n,
			    struct tide_store_replicas **out);
	/* tide_store_batch_get_into_parts() (objects into pieces). */
	int (*get_parts)(struct store_backend *b, const char *const *keys,
			 const struct tide_store_part *parts, const size_t *nparts, size_t n,
			 int64_t *sizes);

	/* Sessions: tide_store_batch_put_session_start(), _put_ranges(),
	 * _put_session_end() and _revoke() (revoke true), _get_session_start(),
	 * _get_ranges(), _get_session_end(). */
	int (*put_sess_start)(struct store_backend *b, const char *const *keys, const size_t *sizes,
			      size_t n, const struct tide_store_rc *repl, int *rcs);
	int (*sess_ranges)(struct store_backend *b, bool put, const char *const *keys,
			   const struct tide_store_part *parts, const uint64_t *offs,
			   const size_t *nparts, size_t n, int64_t *out);
	int (*put_sess_end)(struct store_backend *b, const char *const *keys, size_t n, bool revoke,
			    int *rcs);
	int (*get_sess_start)(struct store_backend *b, const char *const *keys, size_t n, int *rcs);
	int (*get_sess_end)(struct store_backend *b, const char *const *keys, size_t n);

	/* tide_store_is_exist(), tide_store_batch_is_exist(). */
	int (*exist)(struct store_backend *b, const char *key);
	int (*batch_exist)(struct store_backend *b, const char *const *keys, size_t n, int *out);
	/* tide_store_remove(), tide_store_batch_remove(), tide_store_remove_all(),
	 * tide_store_remove_by_regex(). */
	int (*remove)(struct store_backend *b, const char *key, bool force);
	int (*batch_remove)(struct store_backend *b, const char *const *keys, size_t n, bool force,
			    int *rcs);
	int64_t (*remove_all)(struct store_backend *b, bool force);
	int64_t (*remove_by_regex)(struct store_backend *b, const char *pattern, bool force);
	/* tide_store_batch_replica_clear(): keys checked non-NULL; segment_name NULL: whole. */
	int64_t (*replica_clear)(struct store_backend *b, const char *const *keys, size_t n,
				 const char *segment_name, int *cleared);

	/* Memory: tide_store_local_buffer(), tide_store_map_buffer(),
	 * tide_store_unmap_buffer(). */
	int (*local_buffer)(struct store_backend *b, void **base, size_t *len);
	int (*map_buffer)(struct store_backend *b, size_t len, void **out);
	int (*unmap_buffer)(struct store_backend *b, void *ptr);
	/*
	 * Optional (NULL: the memory needs nothing here, another process moves it).
	 * register_memory: a registered buffer large enough to be worth it is
	 * registered with the engine that moves the bytes (0; -EEXIST covered
	 * already, which is fine; the engine's errors). unregister_memory: undo it
	 * (nothing to undo is fine).
	 */
	int (*register_memory)(struct store_backend *b, void *ptr, size_t len);
	void (*unregister_memory)(struct store_backend *b, void *ptr);

	/* tide_store_health_check() (0 healthy, 2 not answering). */
	int (*health_check)(struct store_backend *b);
	/* tide_store_endpoint(), tide_store_protocol(): valid until close. */
	const char *(*endpoint)(const struct store_backend *b);
	const char *(*protocol)(const struct store_backend *b);
};

/*
 * The pieces of n keys, checked as every op taking struct tide_store_part checks them:
 * at most max pieces in all (a backend's bound; in process, what fits the caller's
 * memory), the array present when a piece is counted, no NULL piece with bytes.
 * true with *total the count; false is the op's -EINVAL. Thread: any.
 */
static inline bool
store_parts_ok(const struct tide_store_part *parts, const size_t *nparts, size_t n, size_t max,
	       size_t *total)
{
	size_t t = 0;

	if (nparts == NULL)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (nparts[i] > max - t)
			return false;
		t += nparts[i];
	}
	if (t > 0 && parts == NULL)
		return false;
	for (size_t k = 0; k < t; k++)
		if (parts[k].buf == NULL && parts[k].len > 0)
			return false;
	*total = t;
	return true;
}

/* In process the pieces are an array of the caller's: their count fits its memory. */
#define STORE_PARTS_MAX (SIZE_MAX / sizeof(struct tide_store_part))

/* The two backends (store_inproc.c, store_agent.c). */
extern const struct store_backend_ops store_inproc_ops;
extern const struct store_backend_ops store_agent_ops;

#endif /* TIDE_STORE_BACKEND_H */
