/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "store_rc.h"

int
tide_store_rc_check(const struct tide_store_rc *rc, size_t nkeys)
{
	size_t i;

	if (rc == NULL)
		return 0;
	if (rc->n_preferred_segments > 0 && rc->preferred_segments == NULL)
		return -EINVAL;
	for (i = 0; i < rc->n_preferred_segments; i++)
		if (rc->preferred_segments[i] == NULL)
			return -EINVAL;
	for (i = 0; rc->group_ids != NULL && i < nkeys; i++)
		if (rc->group_ids[i] == NULL)
			return -EINVAL;
	return 0;
}

size_t
tide_store_rc_nstrs(const struct tide_store_rc *rc, size_t nkeys)
{
	return rc == NULL ? 0 : rc->n_preferred_segments + (rc->group_ids != NULL ? nkeys : 0);
}

void
tide_store_rc_fill(const struct tide_store_rc *rc, size_t nkeys, struct tide_mc_str *strs,
		   struct tide_mc_replicate_config *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	out->replica_num = 1;
	if (rc == NULL)
		return;
	if (rc->replica_num != 0)
		out->replica_num = rc->replica_num;
	out->with_hard_pin = rc->with_hard_pin;
	out->prefer_alloc_in_same_node = rc->prefer_alloc_in_same_node;
	out->preferred_segment = tide_store_mstr(rc->preferred_segment);
	if (rc->n_preferred_segments > 0) {
		for (i = 0; i < rc->n_preferred_segments; i++)
			strs[i] = tide_store_mstr(rc->preferred_segments[i]);
		out->preferred_segments.v = strs;
		out->preferred_segments.n = rc->n_preferred_segments;
		strs += rc->n_preferred_segments;
	}
	if (rc->group_ids != NULL) {
		for (i = 0; i < nkeys; i++)
			strs[i] = tide_store_mstr(rc->group_ids[i]);
		out->group_ids.has = true;
		out->group_ids.val.v = strs;
		out->group_ids.val.n = nkeys;
	}
}
