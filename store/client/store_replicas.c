/* SPDX-License-Identifier: Apache-2.0 */
/* tide_store_batch_get_replicas()'s one-block result (store_replicas.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_mc.h"
#include "store_replicas.h"

/* The public enums carry the master's values as they are. */
_Static_assert((int)TIDE_STORE_REPLICA_MEMORY == (int)TIDE_MC_RK_MEMORY &&
		       (int)TIDE_STORE_REPLICA_NOF == (int)TIDE_MC_RK_NOF &&
		       (int)TIDE_STORE_REPLICA_DISK == (int)TIDE_MC_RK_DISK &&
		       (int)TIDE_STORE_REPLICA_LOCAL_DISK == (int)TIDE_MC_RK_LOCAL_DISK &&
		       (int)TIDE_STORE_REPLICA_DFS == (int)TIDE_MC_RK_DFS,
	       "tide_store_replica_type is the master's variant index");
_Static_assert((int)TIDE_STORE_REPLICA_COMPLETE == (int)TIDE_MC_RS_COMPLETE &&
		       (int)TIDE_STORE_REPLICA_FAILED == (int)TIDE_MC_RS_FAILED,
	       "tide_store_replica_status is Mooncake's ReplicaStatus");

/* Sizes are summed saturating: a saturated total fails to allocate (-ENOMEM). */
static size_t
add_sat(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t
mul_sat(size_t a, size_t b)
{
	return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

int
store_replicas_alloc(struct store_replicas_blk *b, size_t n, size_t nrep, size_t strbytes)
{
	/* The replica array follows the keys' at its own alignment (both hold 8-byte
	 * members); the strings need none. */
	size_t keys = mul_sat(n, sizeof(struct tide_store_replicas));
	size_t reps = mul_sat(nrep, sizeof(struct tide_store_replica));
	size_t total = add_sat(add_sat(keys, reps), strbytes);
	char *p;

	_Static_assert(sizeof(struct tide_store_replicas) % _Alignof(struct tide_store_replica) ==
			       0,
		       "the replicas follow the keys aligned");
	if (total == SIZE_MAX)
		return -ENOMEM;
	p = calloc(1, total ? total : 1);
	if (p == NULL)
		return -ENOMEM;
	b->keys = (struct tide_store_replicas *)(void *)p;
	b->rep = (struct tide_store_replica *)(void *)(p + keys);
	b->rep_end = b->rep + nrep;
	b->str = p + keys + reps;
	b->str_end = b->str + strbytes;
	return 0;
}

struct tide_store_replica *
store_replicas_take(struct store_replicas_blk *b)
{
	struct tide_store_replica *r;

	if (b->rep == b->rep_end)
		return NULL;
	r = b->rep++;
	r->transport_endpoint = r->protocol = r->file_path = "";
	return r;
}

const char *
store_replicas_str(struct store_replicas_blk *b, const char *p, size_t len)
{
	char *s = b->str;

	if (len == 0 || (size_t)(b->str_end - b->str) <= len)
		return "";
	memcpy(s, p, len);
	s[len] = '\0';
	b->str += len + 1;
	return s;
}

/* A codec string's bytes in the block: len + NUL, none when empty. */
static size_t
str_bytes(const struct tide_mc_str *s)
{
	return s->len == 0 ? 0 : add_sat(s->len, 1);
}

size_t
store_replicas_strbytes(const struct tide_mc_replica_desc *d)
{
	switch (d->kind) {
	case TIDE_MC_RK_MEMORY:
	case TIDE_MC_RK_NOF:
		return add_sat(str_bytes(&d->u.memory.transport_endpoint),
			       str_bytes(&d->u.memory.protocol));
	case TIDE_MC_RK_DISK:
		return str_bytes(&d->u.disk.file_path);
	case TIDE_MC_RK_LOCAL_DISK:
		return str_bytes(&d->u.local_disk.transport_endpoint);
	case TIDE_MC_RK_DFS:
		return str_bytes(&d->u.dfs.file_path);
	default:
		return 0;
	}
}

/* One replica of the master's into r (its strings copied into b). */
static void
fill_one(struct store_replicas_blk *b, const struct tide_mc_replica_desc *d,
	 struct tide_store_replica *r)
{
	const struct tide_mc_buffer_desc *m = d->kind == TIDE_MC_RK_NOF ? &d->u.nof : &d->u.memory;

	r->id = d->id;
	r->type = d->kind;
	r->status = d->status;
	switch (d->kind) {
	case TIDE_MC_RK_MEMORY:
	case TIDE_MC_RK_NOF:
		r->size = m->size;
		r->buffer_address = m->buffer_address;
		r->transport_endpoint =
			store_replicas_str(b, m->transport_endpoint.ptr, m->transport_endpoint.len);
		r->protocol = store_replicas_str(b, m->protocol.ptr, m->protocol.len);
		break;
	case TIDE_MC_RK_DISK:
		r->size = d->u.disk.object_size;
		r->file_path =
			store_replicas_str(b, d->u.disk.file_path.ptr, d->u.disk.file_path.len);
		break;
	case TIDE_MC_RK_LOCAL_DISK:
		r->size = d->u.local_disk.object_size;
		r->transport_endpoint =
			store_replicas_str(b, d->u.local_disk.transport_endpoint.ptr,
					   d->u.local_disk.transport_endpoint.len);
		break;
	case TIDE_MC_RK_DFS:
		r->size = d->u.dfs.object_size;
		r->file_path =
			store_replicas_str(b, d->u.dfs.file_path.ptr, d->u.dfs.file_path.len);
		break;
	default:
		break; /* the codec decodes only these kinds */
	}
}

int
store_replicas_from_mc(const struct tide_mc_exp_replica_list_vec *r, size_t n,
		       struct tide_store_replicas **out)
{
	struct store_replicas_blk b;
	size_t nrep = 0, strbytes = 0, i, k;
	int rc;

	/* Pass 1: what the block holds. */
	for (i = 0; i < n && i < r->n; i++) {
		const struct tide_mc_exp_replica_list *e = &r->v[i];

		if (!e->ok)
			continue;
		nrep = add_sat(nrep, e->val.replicas.n);
		for (k = 0; k < e->val.replicas.n; k++)
			strbytes =
				add_sat(strbytes, store_replicas_strbytes(&e->val.replicas.v[k]));
	}
	rc = store_replicas_alloc(&b, n, nrep, strbytes);
	if (rc != 0)
		return rc;
	/* Pass 2: fill it. */
	for (i = 0; i < n; i++) {
		const struct tide_mc_exp_replica_list *e = i < r->n ? &r->v[i] : NULL;
		struct tide_store_replicas *key = &b.keys[i];

		if (e == NULL) {
			key->err = -EBADMSG;
			continue;
		}
		if (!e->ok) {
			key->err = store_mc_errno(e->err);
			continue;
		}
		key->n = e->val.replicas.n;
		key->v = key->n > 0 ? b.rep : NULL;
		for (k = 0; k < key->n; k++)
			fill_one(&b, &e->val.replicas.v[k], store_replicas_take(&b));
	}
	*out = b.keys;
	return 0;
}
