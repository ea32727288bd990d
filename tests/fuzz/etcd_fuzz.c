/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the etcd client's reply handling (engine/lib/etcd/etcd.c,
 * compiled in). An etcd endpoint is a peer: whatever it answers, every call
 * must return 0 or a negative errno, leak nothing and read nothing out of
 * bounds. The HTTP exchange is replaced at link time (--wrap=tide_http_request):
 * the input's status comes back, and its body either collected (bounded by the
 * request's max_body, as the real client does) or fed to the request's sink in
 * chunks. No socket is opened.
 *
 * Input: byte 0 the call (get, put, create, delete, grant, keepalive, revoke,
 * wait_change, range, delete_range, txn_if_created, compact), byte 1 the status (0: 200, 1: 404, 2:
 * 500, else 200), byte 2 the chunk size (0: one chunk), then the reply body.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide_etcd.h"
#include "tide_http.h"

static const uint8_t *cur_body;
static size_t cur_len, cur_chunk;
static int cur_status;

int __wrap_tide_http_request(const struct tide_http_url *u, const struct tide_http_req *r,
			     int *status, char **body, size_t *len);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int
__wrap_tide_http_request(const struct tide_http_url *u, const struct tide_http_req *r, int *status,
			 char **body, size_t *len)
{
	size_t max = r->max_body != 0 && r->max_body < TIDE_HTTP_MAX_BODY ? r->max_body
									  : TIDE_HTTP_MAX_BODY;
	size_t off = 0;

	(void)u;
	*status = cur_status;
	if (cur_len > max)
		return -EMSGSIZE;
	if (r->sink == NULL) {
		char *b = malloc(cur_len + 1);

		if (b == NULL)
			return -ENOMEM;
		memcpy(b, cur_body, cur_len);
		b[cur_len] = '\0';
		if (body != NULL)
			*body = b;
		else
			free(b);
		if (len != NULL)
			*len = cur_len;
		return 0;
	}
	while (off < cur_len) {
		size_t k = cur_chunk != 0 && cur_chunk < cur_len - off ? cur_chunk : cur_len - off;
		/* A copy of exactly k bytes: reads past it are caught. */
		char *p = malloc(k);
		int rc;

		if (p == NULL)
			return -ENOMEM;
		memcpy(p, cur_body + off, k);
		rc = r->sink(r->arg, p, k);
		free(p);
		if (rc < 0)
			return rc;
		if (rc == 1)
			break;
		off += k;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct tide_etcd *e;
	static const int statuses[] = {200, 404, 500};
	static const struct tide_etcd_op ops[] = {
		{.type = TIDE_ETCD_OP_PUT,
		 .key = "k/a",
		 .key_len = 3,
		 .value = "v",
		 .value_len = 1,
		 .lease = 7},
		{.type = TIDE_ETCD_OP_DELETE,
		 .key = "k/",
		 .key_len = 2,
		 .range_end = "k0",
		 .range_end_len = 2},
	};
	struct tide_etcd_kv kv, *kvs = NULL;
	size_t nkv = 0;
	bool more = false;
	int64_t v = 0;
	int rc = 0;

	if (n < 3)
		return 0;
	if (e == NULL && tide_etcd_open("127.0.0.1:2379", 1000, &e) != 0)
		return 0;
	cur_status = d[1] < 3 ? statuses[d[1]] : 200;
	cur_chunk = d[2];
	cur_body = d + 3;
	cur_len = n - 3;
	switch (d[0] % 12) {
	case 0:
		rc = tide_etcd_get(e, "k", 1, &kv, &v);
		if (rc == 0 && (kv.key == NULL || kv.value == NULL || kv.key[kv.key_len] != '\0' ||
				kv.value[kv.value_len] != '\0'))
			__builtin_trap();
		tide_etcd_kv_clear(&kv);
		break;
	case 1:
		rc = tide_etcd_put(e, "k", 1, "v", 1, 7, &v);
		break;
	case 2:
		rc = tide_etcd_create(e, "k", 1, "v", 1, 7, &v);
		break;
	case 3:
		rc = tide_etcd_delete(e, "k", 1);
		break;
	case 4:
		rc = tide_etcd_lease_grant(e, 5, &v);
		if (rc == 0 && v <= 0)
			__builtin_trap();
		break;
	case 5:
		rc = tide_etcd_lease_keepalive(e, 7, &v);
		break;
	case 6:
		rc = tide_etcd_lease_revoke(e, 7);
		break;
	case 7:
		rc = tide_etcd_wait_change(e, "k", 1, 3, 1000, &v);
		if (rc > 1)
			__builtin_trap();
		break;
	case 8:
		/* [k/, k0) with limit 2: what comes back must be what was asked. */
		rc = tide_etcd_range(e, "k/", 2, "k0", 2, 2, &kvs, &nkv, &more, &v);
		if (rc != 0 && (kvs != NULL || nkv != 0 || more))
			__builtin_trap();
		if (rc == 0 && (nkv > 2 || (nkv == 0) != (kvs == NULL) || (more && nkv != 2)))
			__builtin_trap();
		for (size_t i = 0; rc == 0 && i < nkv; i++)
			if (kvs[i].key_len < 2 || memcmp(kvs[i].key, "k/", 2) != 0 ||
			    kvs[i].value[kvs[i].value_len] != '\0')
				__builtin_trap();
		tide_etcd_kvs_free(kvs, nkv);
		break;
	case 9:
		rc = tide_etcd_delete_range(e, "k/", 2, "k0", 2, &v);
		if (rc == 0 && v < 0)
			__builtin_trap();
		break;
	case 10:
		rc = tide_etcd_txn_if_created(e, "k", 1, 5, ops, 2, &v);
		break;
	default:
		rc = tide_etcd_compact(e, 5);
		break;
	}
	if (rc > 0 && d[0] % 12 != 7)
		__builtin_trap(); /* only wait_change answers 1 */
	return 0;
}
