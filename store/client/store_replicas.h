/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the result of tide_store_batch_get_replicas(), one
 * heap block laid out as
 *
 *     [n x struct tide_store_replicas][nrep x struct tide_store_replica][strings]
 *
 * so the caller frees it with one call (tide_store_replicas_free()). Both
 * backends build it in two passes over their answer (the master's, or the
 * agent's reply): count the replicas and string bytes, allocate, fill.
 *
 * Thread: a block being built belongs to its call.
 */
#ifndef TIDE_STORE_REPLICAS_H
#define TIDE_STORE_REPLICAS_H

#include <stddef.h>

#include "tide_mc_codec.h"
#include "tide_store.h"

struct store_replicas_blk {
	struct tide_store_replicas *keys; /* the block; n entries */
	struct tide_store_replica *rep, *rep_end;
	char *str, *str_end;
};

/*
 * Allocate for n keys, nrep replicas and strbytes bytes of strings (their NULs
 * included), zeroed. 0; -ENOMEM (also when the sizes overflow).
 */
int store_replicas_alloc(struct store_replicas_blk *b, size_t n, size_t nrep, size_t strbytes);

/* The next of the nrep replicas (zeroed, strings ""), or NULL past the last. */
struct tide_store_replica *store_replicas_take(struct store_replicas_blk *b);

/* len bytes of p and a NUL copied into the block's strings: the copy, or "" when
 * len is 0 or the counted room is used up (never NULL). */
const char *store_replicas_str(struct store_replicas_blk *b, const char *p, size_t len);

/* String bytes a replica of d takes in the block (its NULs included). */
size_t store_replicas_strbytes(const struct tide_mc_replica_desc *d);

/* Fill *out (a new block) from BatchGetReplicaList's answer r for n keys: a key
 * the master answered no element for gets -EBADMSG. 0; -ENOMEM. */
int store_replicas_from_mc(const struct tide_mc_exp_replica_list_vec *r, size_t n,
			   struct tide_store_replicas **out);

#endif /* TIDE_STORE_REPLICAS_H */
