/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the get sequences of the in-process backend, the
 * same shape as a put's (store_put.h), read instead of written:
 *
 *     locate n objects (one master round trip)  ->  read n (engine batches)
 *
 * One key (tide_store_get_into(), _get_with(), _get_size()): GetReplicaList,
 * then the first COMPLETE replica, the next one when a transfer fails. n keys:
 * BatchGetReplicaList, then one engine batch of every key's first COMPLETE
 * replica (tide_store_batch_get_into(): a key whose read failed is got again on
 * its own, which tries the other replicas), or rounds of one batch each, round
 * r reading every still-failing fragment from its key's r-th COMPLETE replica
 * (tide_store_get_into_ranges(), and tide_store_batch_get_into_parts(), whose
 * pieces become fragments once the sizes are known).
 *
 * Results and errors are those of the tide_store_X() each serves (tide_store.h);
 * arguments are checked by the caller. Thread: any; nothing is kept between calls.
 */
#ifndef TIDE_STORE_GET_H
#define TIDE_STORE_GET_H

#include <stddef.h>
#include <stdint.h>

#include "store_mc.h"
#include "store_xfer.h"
#include "tide_store.h"

/* What a get runs against: the master, and where the reads run. */
struct store_get_ctx {
	struct store_mc *mc;
	struct store_xfer_eng eng;
};

/* Where one key's bytes land. */
struct store_get_dst {
	/* alloc NULL: the caller's buffer (len bytes). Else set by store_get_one() to the
	 * block alloc gave for the object's size, when the read succeeded. */
	void *buf;
	size_t len;
	/* Asked once, for the object's size, after the lookup; NULL: buf is given. */
	tide_store_alloc_fn alloc;
	/* Given back a block alloc gave when the read then failed (NULL: the caller's). */
	tide_store_release_fn release;
	void *arg;
};

/*
 * Locate key (valid) and read it into dst; dst NULL: locate only. Returns the
 * object's size, or as tide_store_get_into() (-ENOENT, -ENOBUFS, -EAGAIN,
 * -ESTALE, transfer and master errors); -ENOMEM alloc gave nothing.
 */
int64_t store_get_one(const struct store_get_ctx *c, const char *key, struct store_get_dst *dst);

/* tide_store_batch_get_into() of n valid keys into valid buffers. */
int store_get_batch(const struct store_get_ctx *c, const char *const *keys, void *const *bufs,
		    const size_t *lens, size_t n, int64_t *sizes);

/* tide_store_batch_get_into_parts() of n valid keys into valid pieces (total
 * entries of parts, nparts[i] for key i). */
int store_get_parts(const struct store_get_ctx *c, const char *const *keys,
		    const struct tide_store_part *parts, const size_t *nparts, size_t n,
		    size_t total, int64_t *sizes);

/* tide_store_get_into_ranges() of valid keys and fragments. */
int store_get_ranges(const struct store_get_ctx *c, const char *const *keys, size_t nkeys,
		     struct tide_store_frag *frags, size_t nfrags);

#endif /* TIDE_STORE_GET_H */
