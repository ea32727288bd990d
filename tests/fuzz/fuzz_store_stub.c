/* SPDX-License-Identifier: Apache-2.0 */
/* Stand-in embedded store for the agent server (contract in fuzz_store_stub.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_store_stub.h"
#include "tide_store.h"

#include "fuzz_common.h"

#define MAX_REGIONS 4096

static struct {
	uint8_t *base;
	size_t len;
} reg[MAX_REGIONS];
static size_t nreg;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int marker;

struct tide_store *
fz_store(void)
{
	return (struct tide_store *)(void *)&marker;
}

size_t
fz_store_regions(void)
{
	size_t n;

	pthread_mutex_lock(&lock);
	n = nreg;
	pthread_mutex_unlock(&lock);
	return n;
}

static void
check_store(const struct tide_store *s)
{
	TRAP_IF(s != (const struct tide_store *)(const void *)&marker);
}

/* [p, p+len) inside one registered buffer (len 0: anything, as the store ignores it). */
static void
check_buf(const void *p, size_t len, bool write)
{
	const uint8_t *b = p;
	bool ok = false;

	if (len == 0)
		return;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nreg && !ok; i++)
		ok = b >= reg[i].base && len <= reg[i].len &&
		     (size_t)(b - reg[i].base) <= reg[i].len - len;
	pthread_mutex_unlock(&lock);
	TRAP_IF(!ok);
	/* Touch both ends: the mapping must be there. */
	if (write) {
		((volatile uint8_t *)b)[0] = 0x5a;
		((volatile uint8_t *)b)[len - 1] = 0xa5;
	} else {
		(void)((const volatile uint8_t *)b)[0];
		(void)((const volatile uint8_t *)b)[len - 1];
	}
}

static void
check_key(const char *k)
{
	TRAP_IF(k == NULL);
	(void)strlen(k);
}

static void
check_keys(const char *const *keys, size_t n)
{
	TRAP_IF(keys == NULL || n == 0 || n > 65536);
	for (size_t i = 0; i < n; i++)
		check_key(keys[i]);
}

static void
check_rc(const struct tide_store_rc *rc, size_t n)
{
	TRAP_IF(rc == NULL);
	if (rc->preferred_segment != NULL)
		(void)strlen(rc->preferred_segment);
	TRAP_IF(rc->n_preferred_segments > 0 && rc->preferred_segments == NULL);
	for (size_t i = 0; i < rc->n_preferred_segments; i++)
		check_key(rc->preferred_segments[i]);
	for (size_t i = 0; rc->group_ids != NULL && i < n; i++)
		if (rc->group_ids[i] != NULL)
			(void)strlen(rc->group_ids[i]);
}

int
tide_store_attached(const struct tide_store *s)
{
	check_store(s);
	return 0;
}

const char *
tide_store_endpoint(const struct tide_store *s)
{
	check_store(s);
	return "10.0.0.1:12345";
}

const char *
tide_store_protocol(const struct tide_store *s)
{
	check_store(s);
	return "tcp";
}

int
tide_store_register_buffer(struct tide_store *s, void *ptr, size_t len)
{
	int rc = 0;

	check_store(s);
	if (ptr == NULL || len == 0)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	if (nreg == MAX_REGIONS)
		rc = -ENOMEM;
	else
		reg[nreg++] = (typeof(reg[0])){ptr, len};
	pthread_mutex_unlock(&lock);
	return rc;
}

int
tide_store_unregister_buffer(struct tide_store *s, void *ptr)
{
	size_t i;

	check_store(s);
	pthread_mutex_lock(&lock);
	for (i = 0; i < nreg && reg[i].base != ptr; i++)
		;
	TRAP_IF(i == nreg); /* the agent only drops what it registered */
	reg[i] = reg[--nreg];
	pthread_mutex_unlock(&lock);
	return 0;
}

int
tide_store_put(struct tide_store *s, const char *key, const void *buf, size_t len,
	       const struct tide_store_rc *rc)
{
	check_store(s);
	check_key(key);
	check_buf(buf, len, false);
	check_rc(rc, 1);
	return key[0] == '\0' || len == 0 ? -EINVAL : 0;
}

int
tide_store_batch_put_from(struct tide_store *s, const char *const *keys, const void *const *bufs,
			  const size_t *lens, size_t n, const struct tide_store_rc *rc, int *rcs)
{
	check_store(s);
	check_keys(keys, n);
	TRAP_IF(bufs == NULL || lens == NULL || rcs == NULL);
	check_rc(rc, n);
	for (size_t i = 0; i < n; i++) {
		check_buf(bufs[i], lens[i], false);
		rcs[i] = 0;
	}
	return 0;
}

int
tide_store_batch_put_parts(struct tide_store *s, const char *const *keys,
			   const struct tide_store_part *parts, const size_t *nparts, size_t n,
			   const struct tide_store_rc *rc, unsigned flags, int *rcs)
{
	size_t k = 0;

	(void)flags;
	check_store(s);
	check_keys(keys, n);
	TRAP_IF(nparts == NULL || rcs == NULL);
	check_rc(rc, n);
	for (size_t i = 0; i < n; i++) {
		for (size_t e = k + nparts[i]; k < e; k++)
			check_buf(parts[k].buf, parts[k].len, false);
		rcs[i] = 0;
	}
	return 0;
}

int64_t
tide_store_get_into(struct tide_store *s, const char *key, void *buf, size_t len)
{
	check_store(s);
	check_key(key);
	check_buf(buf, len, true);
	return key[0] == '\0' ? -EINVAL : (int64_t)len;
}

int
tide_store_batch_get_into(struct tide_store *s, const char *const *keys, void *const *bufs,
			  const size_t *lens, size_t n, int64_t *sizes)
{
	check_store(s);
	check_keys(keys, n);
	TRAP_IF(bufs == NULL || lens == NULL || sizes == NULL);
	for (size_t i = 0; i < n; i++) {
		check_buf(bufs[i], lens[i], true);
		sizes[i] = (int64_t)lens[i];
	}
	return 0;
}

int64_t
tide_store_batch_replica_clear(struct tide_store *s, const char *const *keys, size_t n,
			       const char *segment_name, int *cleared)
{
	int64_t count = 0;

	check_store(s);
	TRAP_IF(segment_name == NULL || (n > 0 && (keys == NULL || cleared == NULL)));
	(void)strlen(segment_name);
	/* Every key read (check_keys), the even ones cleared. */
	if (n > 0)
		check_keys(keys, n);
	for (size_t i = 0; i < n; i++) {
		cleared[i] = (i & 1) == 0;
		count += cleared[i];
	}
	return count;
}

int
tide_store_batch_get_replicas(struct tide_store *s, const char *const *keys, size_t n,
			      struct tide_store_replicas **out)
{
	struct tide_store_replicas *r;
	struct tide_store_replica *rep;

	check_store(s);
	check_keys(keys, n);
	TRAP_IF(out == NULL);
	/* Every key one memory replica, the odd ones missing: the agent encodes both. */
	r = calloc(1, n * sizeof(*r) + n * sizeof(*rep));
	if (r == NULL)
		return -ENOMEM;
	rep = (struct tide_store_replica *)(void *)(r + n);
	for (size_t i = 0; i < n; i++) {
		if (i & 1) {
			r[i].err = -ENOENT;
			continue;
		}
		rep[i] = (struct tide_store_replica){.id = i,
						     .type = TIDE_STORE_REPLICA_MEMORY,
						     .status = TIDE_STORE_REPLICA_COMPLETE,
						     .size = 4096,
						     .buffer_address = 0x1000,
						     .transport_endpoint = "127.0.0.1:1",
						     .protocol = "tcp",
						     .file_path = ""};
		r[i].n = 1;
		r[i].v = &rep[i];
	}
	*out = r;
	return 0;
}

void
tide_store_replicas_free(struct tide_store_replicas *r)
{
	free(r);
}

int
tide_store_batch_get_into_parts(struct tide_store *s, const char *const *keys,
				const struct tide_store_part *parts, const size_t *nparts, size_t n,
				int64_t *sizes)
{
	size_t k = 0;

	check_store(s);
	check_keys(keys, n);
	TRAP_IF(nparts == NULL || sizes == NULL);
	for (size_t i = 0; i < n; i++) {
		sizes[i] = 0;
		for (size_t e = k + nparts[i]; k < e; k++) {
			check_buf(parts[k].buf, parts[k].len, true);
			sizes[i] += (int64_t)parts[k].len;
		}
	}
	return 0;
}

int
tide_store_get_into_ranges(struct tide_store *s, const char *const *keys, size_t nkeys,
			   struct tide_store_frag *frags, size_t nfrags)
{
	int ret = 0;

	check_store(s);
	check_keys(keys, nkeys);
	TRAP_IF(frags == NULL || nfrags == 0);
	for (size_t f = 0; f < nfrags; f++) {
		/* The store checks the index (documented -EINVAL per fragment). */
		if (frags[f].key >= nkeys) {
			frags[f].result = -EINVAL;
			ret = ret != 0 ? ret : -EINVAL;
			continue;
		}
		TRAP_IF(frags[f].len > SIZE_MAX);
		check_buf(frags[f].dst, (size_t)frags[f].len, true);
		frags[f].result = (int64_t)frags[f].len;
	}
	return ret;
}

int
tide_store_batch_is_exist(struct tide_store *s, const char *const *keys, size_t n, int *out)
{
	check_store(s);
	check_keys(keys, n);
	TRAP_IF(out == NULL);
	for (size_t i = 0; i < n; i++)
		out[i] = (int)(i & 1);
	return 0;
}

int
tide_store_remove(struct tide_store *s, const char *key, bool force)
{
	(void)force;
	check_store(s);
	check_key(key);
	return -ENOENT;
}

int
tide_store_batch_remove(struct tide_store *s, const char *const *keys, size_t n, bool force,
			int *rcs)
{
	(void)force;
	check_store(s);
	check_keys(keys, n);
	TRAP_IF(rcs == NULL);
	for (size_t i = 0; i < n; i++)
		rcs[i] = -ENOENT;
	return -ENOENT;
}

int64_t
tide_store_get_size(struct tide_store *s, const char *key)
{
	check_store(s);
	check_key(key);
	return 4096;
}

int64_t
tide_store_remove_all(struct tide_store *s, bool force)
{
	(void)force;
	check_store(s);
	return 0;
}

int64_t
tide_store_remove_by_regex(struct tide_store *s, const char *pattern, bool force)
{
	(void)force;
	check_store(s);
	check_key(pattern);
	return 0;
}

int
tide_store_health_check(struct tide_store *s)
{
	check_store(s);
	return 0;
}

/*
 * Sessions: every start succeeds (the agent then keeps the key as the
 * connection's), every range lies in a mapped region and moves its bytes, every
 * end and revoke succeeds. The agent's own key sets are store_sess.c's, built
 * into this target here (its meson entry names the stub and agent_proto.c only).
 */
#include "store_sess.c"

int
tide_store_batch_put_session_start(struct tide_store *s, const char *const *keys,
				   const size_t *sizes, size_t n, const struct tide_store_rc *repl,
				   int *rcs)
{
	check_store(s);
	check_keys(keys, n);
	check_rc(repl, n);
	TRAP_IF(sizes == NULL || rcs == NULL);
	for (size_t i = 0; i < n; i++)
		rcs[i] = sizes[i] == 0 ? -EINVAL : 0;
	return 0;
}

static int
stub_ranges(struct tide_store *s, const char *const *keys, const struct tide_store_part *parts,
	    const uint64_t *offs, const size_t *nparts, size_t n, int64_t *out, bool write)
{
	size_t k = 0;

	check_store(s);
	check_keys(keys, n);
	TRAP_IF(nparts == NULL || out == NULL);
	for (size_t i = 0; i < n; i++) {
		out[i] = 0;
		for (size_t e = k + nparts[i]; k < e; k++) {
			TRAP_IF(offs == NULL);
			(void)offs[k];
			check_buf(parts[k].buf, parts[k].len, write);
			out[i] += (int64_t)parts[k].len;
		}
	}
	return 0;
}

int
tide_store_batch_put_ranges(struct tide_store *s, const char *const *keys,
			    const struct tide_store_part *parts, const uint64_t *offs,
			    const size_t *nparts, size_t n, int64_t *out)
{
	return stub_ranges(s, keys, parts, offs, nparts, n, out, false);
}

int
tide_store_batch_get_ranges(struct tide_store *s, const char *const *keys,
			    const struct tide_store_part *parts, const uint64_t *offs,
			    const size_t *nparts, size_t n, int64_t *out)
{
	return stub_ranges(s, keys, parts, offs, nparts, n, out, true);
}

static int
stub_keys_rcs(struct tide_store *s, const char *const *keys, size_t n, int *rcs)
{
	check_store(s);
	check_keys(keys, n);
	TRAP_IF(rcs == NULL);
	memset(rcs, 0, n * sizeof(*rcs));
	return 0;
}

int
tide_store_batch_put_session_end(struct tide_store *s, const char *const *keys, size_t n, int *rcs)
{
	return stub_keys_rcs(s, keys, n, rcs);
}

int
tide_store_batch_put_session_revoke(struct tide_store *s, const char *const *keys, size_t n,
				    int *rcs)
{
	return stub_keys_rcs(s, keys, n, rcs);
}

int
tide_store_batch_get_session_start(struct tide_store *s, const char *const *keys, size_t n,
				   int *rcs)
{
	return stub_keys_rcs(s, keys, n, rcs);
}

int
tide_store_batch_get_session_end(struct tide_store *s, const char *const *keys, size_t n)
{
	check_store(s);
	check_keys(keys, n);
	return 0;
}
