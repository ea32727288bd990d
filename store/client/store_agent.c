/* SPDX-License-Identifier: Apache-2.0 */
/* WIP placeholder: replaced by the agent client in this session. */
#include <errno.h>
#include "store_agent.h"

int
tide_agent_setup(const struct tide_store_cfg *cfg, struct tide_agent_conn **out)
{
	(void)cfg;
	(void)out;
	return 0;
}

void
tide_agent_close(struct tide_agent_conn *a)
{
	(void)a;
}

const char *
tide_agent_endpoint(const struct tide_agent_conn *a)
{
	(void)a;
	return "";
}

int
tide_agent_put(struct tide_agent_conn *a, const char *key, const void *buf, size_t len,
	       const struct tide_store_rc *rc)
{
	(void)a;
	(void)key;
	(void)buf;
	(void)len;
	(void)rc;
	return -ENOSYS;
}

int64_t
tide_agent_get_into(struct tide_agent_conn *a, const char *key, void *buf, size_t len)
{
	(void)a;
	(void)key;
	(void)buf;
	(void)len;
	return -ENOSYS;
}

int64_t
tide_agent_get_size(struct tide_agent_conn *a, const char *key)
{
	(void)a;
	(void)key;
	return -ENOSYS;
}

int
tide_agent_is_exist(struct tide_agent_conn *a, const char *key)
{
	(void)a;
	(void)key;
	return -ENOSYS;
}

int
tide_agent_remove(struct tide_agent_conn *a, const char *key, bool force)
{
	(void)a;
	(void)key;
	(void)force;
	return -ENOSYS;
}

int64_t
tide_agent_remove_all(struct tide_agent_conn *a, bool force)
{
	(void)a;
	(void)force;
	return -ENOSYS;
}

int
tide_agent_batch_put_from(struct tide_agent_conn *a, const char *const *keys,
			  const void *const *bufs, const size_t *lens, size_t n,
			  const struct tide_store_rc *rc, int *rcs)
{
	(void)a;
	(void)keys;
	(void)bufs;
	(void)lens;
	(void)n;
	(void)rc;
	(void)rcs;
	return -ENOSYS;
}

int
tide_agent_batch_get_into(struct tide_agent_conn *a, const char *const *keys, void *const *bufs,
			  const size_t *lens, size_t n, int64_t *sizes)
{
	(void)a;
	(void)keys;
	(void)bufs;
	(void)lens;
	(void)n;
	(void)sizes;
	return -ENOSYS;
}

int
tide_agent_get_into_ranges(struct tide_agent_conn *a, const char *const *keys, size_t nkeys,
			   struct tide_store_frag *frags, size_t nfrags)
{
	(void)a;
	(void)keys;
	(void)nkeys;
	(void)frags;
	(void)nfrags;
	return -ENOSYS;
}

int
tide_agent_batch_is_exist(struct tide_agent_conn *a, const char *const *keys, size_t n, int *out)
{
	(void)a;
	(void)keys;
	(void)n;
	(void)out;
	return -ENOSYS;
}

int
tide_agent_batch_remove(struct tide_agent_conn *a, const char *const *keys, size_t n, bool force,
			int *rcs)
{
	(void)a;
	(void)keys;
	(void)n;
	(void)force;
	(void)rcs;
	return -ENOSYS;
}

int64_t
tide_agent_remove_by_regex(struct tide_agent_conn *a, const char *pattern, bool force)
{
	(void)a;
	(void)pattern;
	(void)force;
	return -ENOSYS;
}

int
tide_agent_register_buffer(struct tide_agent_conn *a, void *ptr, size_t len)
{
	(void)a;
	(void)ptr;
	(void)len;
	return -ENOSYS;
}

int
tide_agent_unregister_buffer(struct tide_agent_conn *a, void *ptr)
{
	(void)a;
	(void)ptr;
	return -ENOSYS;
}

int
tide_agent_local_buffer(struct tide_agent_conn *a, void **base, size_t *len)
{
	(void)a;
	(void)base;
	(void)len;
	return -ENOSYS;
}

int
tide_agent_map_buffer(struct tide_agent_conn *a, size_t len, void **out)
{
	(void)a;
	(void)len;
	(void)out;
	return -ENOSYS;
}

int
tide_agent_unmap_buffer(struct tide_agent_conn *a, void *ptr)
{
	(void)a;
	(void)ptr;
	return -ENOSYS;
}

int
tide_agent_health_check(struct tide_agent_conn *a)
{
	(void)a;
	return -ENOSYS;
}
