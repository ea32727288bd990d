/* SPDX-License-Identifier: Apache-2.0 */
/* A caller's replicate config as Mooncake's ReplicateConfig (store_repl.h). */
#include <errno.h>
#include <string.h>

#include "store_mc.h"
#include "store_repl.h"

/* The public enum is sent to the master as it is. */
_Static_assert((int)TIDE_STORE_SOFT_PIN_PRESERVE == (int)TIDE_MC_SOFT_PIN_PRESERVE &&
		       (int)TIDE_STORE_SOFT_PIN_ENABLE == (int)TIDE_MC_SOFT_PIN_ENABLE &&
		       (int)TIDE_STORE_SOFT_PIN_DISABLE == (int)TIDE_MC_SOFT_PIN_DISABLE,
	       "tide_store_soft_pin is Mooncake's SoftPinAction");

int
store_repl_check(const struct tide_store_rc *repl, size_t nkeys)
{
	size_t i;

	if (repl == NULL)
		return 0;
	/* The master would refuse it too (INVALID_PARAMS), after a round trip. */
	if (repl->soft_pin_action > TIDE_STORE_SOFT_PIN_DISABLE)
		return -EINVAL;
	if (repl->n_preferred_segments > 0 && repl->preferred_segments == NULL)
		return -EINVAL;
	for (i = 0; i < repl->n_preferred_segments; i++)
		if (repl->preferred_segments[i] == NULL)
			return -EINVAL;
	for (i = 0; repl->group_ids != NULL && i < nkeys; i++)
		if (repl->group_ids[i] == NULL)
			return -EINVAL;
	return 0;
}

size_t
store_repl_nstrs(const struct tide_store_rc *repl, size_t nkeys)
{
	return repl == NULL ? 0
			    : repl->n_preferred_segments + (repl->group_ids != NULL ? nkeys : 0);
}

void
store_repl_fill(const struct tide_store_rc *repl, size_t nkeys, struct tide_mc_str *strs,
		struct tide_mc_replicate_config *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	out->replica_num = 1;
	if (repl == NULL)
		return;
	if (repl->replica_num != 0)
		out->replica_num = repl->replica_num;
	out->with_hard_pin = repl->with_hard_pin;
	out->prefer_alloc_in_same_node = repl->prefer_alloc_in_same_node;
	/* Same values as the codec's enum (checked above); ttl 0 is stock's unset optional. */
	out->soft_pin_action = (uint8_t)repl->soft_pin_action;
	out->soft_pin_ttl_ms.has = repl->soft_pin_ttl_ms != 0;
	out->soft_pin_ttl_ms.val = repl->soft_pin_ttl_ms;
	out->preferred_segment = store_mc_str(repl->preferred_segment);
	if (repl->n_preferred_segments > 0) {
		for (i = 0; i < repl->n_preferred_segments; i++)
			strs[i] = store_mc_str(repl->preferred_segments[i]);
		out->preferred_segments.v = strs;
		out->preferred_segments.n = repl->n_preferred_segments;
		strs += repl->n_preferred_segments;
	}
	if (repl->group_ids != NULL) {
		for (i = 0; i < nkeys; i++)
			strs[i] = store_mc_str(repl->group_ids[i]);
		out->group_ids.has = true;
		out->group_ids.val.v = strs;
		out->group_ids.val.n = nkeys;
	}
}
