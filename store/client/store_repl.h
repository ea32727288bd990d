/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: a replicate config as the caller gives it
 * (struct tide_store_rc of tide_store.h, "repl" wherever this client holds
 * one, so it does not read as a return code) turned into Mooncake's
 * ReplicateConfig for PutStart, BatchPutStart and the lease calls. The result
 * borrows the caller's strings; nothing is allocated.
 *
 * Thread: any; nothing here keeps state.
 */
#ifndef TIDE_STORE_REPL_H
#define TIDE_STORE_REPL_H

#include <stddef.h>

#include "tide_mc_codec.h"
#include "tide_store.h"

/*
 * Check repl for a call of nkeys keys (NULL: the defaults, fine). 0; -EINVAL
 * a soft-pin action outside enum tide_store_soft_pin, a NULL preferred segment,
 * or a NULL among the first nkeys group ids (the caller's array is shorter than
 * the keys; entries past nkeys are never read).
 */
int store_repl_check(const struct tide_store_rc *repl, size_t nkeys);

/* Entries the strs array of store_repl_fill() needs. */
size_t store_repl_nstrs(const struct tide_store_rc *repl, size_t nkeys);

/*
 * Fill out from repl (checked by store_repl_check(); NULL: one replica and
 * nothing else). strs has store_repl_nstrs() entries; out points into it and
 * into repl's strings, which must outlive out.
 */
void store_repl_fill(const struct tide_store_rc *repl, size_t nkeys, struct tide_mc_str *strs,
		     struct tide_mc_replicate_config *out);

#endif /* TIDE_STORE_REPL_H */
