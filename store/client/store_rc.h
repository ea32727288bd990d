/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: a tide_store_rc (tide_store.h) as Mooncake's
 * ReplicateConfig for PutStart / BatchPutStart. The result borrows the
 * caller's strings; nothing is allocated.
 */
#ifndef TIDE_STORE_RC_H
#define TIDE_STORE_RC_H

#include <stddef.h>
#include <string.h>

#include "tide_mc_codec.h"
#include "tide_store.h"

/* A borrowed C string as a codec string (NULL: empty). */
static inline struct tide_mc_str
tide_store_mstr(const char *p)
{
	struct tide_mc_str r = {(char *)p, p ? strlen(p) : 0};

	return r;
}

/*
 * Check rc for a call of nkeys keys (NULL: the defaults, fine). 0; -EINVAL a
 * NULL preferred segment, or a NULL among the first nkeys group ids (the
 * caller's array is shorter than the keys; entries past nkeys are never read).
 */
int tide_store_rc_check(const struct tide_store_rc *rc, size_t nkeys);

/* Entries the strs array of tide_store_rc_fill() needs. */
size_t tide_store_rc_nstrs(const struct tide_store_rc *rc, size_t nkeys);

/*
 * Fill out from rc (checked by tide_store_rc_check(); NULL: one replica and
 * nothing else). strs has tide_store_rc_nstrs() entries; out points into it
 * and into rc's strings, which must outlive out.
 */
void tide_store_rc_fill(const struct tide_store_rc *rc, size_t nkeys, struct tide_mc_str *strs,
			struct tide_mc_replicate_config *out);

#endif /* TIDE_STORE_RC_H */
