/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Store calls end to end, shared by store_client_it (two in-process stores)
 * and agent_it (clients attached to two agents), against the real master:
 *
 *   - soft pins of tide_store_rc (ABI 4) reach the master: its
 *     master_soft_pin_key_count gauge (/metrics) counts the objects put with
 *     ENABLE, through put, batch_put_from (lease and PutStart placement) and
 *     batch_put_parts, and an upsert with DISABLE takes one off;
 *   - tide_store_batch_get_into_parts(): objects read into pieces from the heap
 *     (through an agent: bounced) and the reader's local buffer (shared), in
 *     order, pieces past the end untouched; -ENOBUFS, -ENOENT per key; refusals;
 *   - tide_store_batch_get_replicas(): an object of two replicas is two COMPLETE
 *     memory replicas on the two holders' segments; a missing key -ENOENT;
 *   - sessions (tide_store_batch_put_session_* / _get_session_*): objects of two
 *     replicas reserved, written from two buffers at offsets (heap: through an
 *     agent bounced; the writer's local buffer: shared), ended, read back whole
 *     by the other store and through its get session; every per-key code (a key
 *     without a session, a range past the size, a second start, an existing
 *     object, an end of an ended key, a lease-less read); a revoke leaves
 *     nothing; a writer that goes mid-session (closed, or its connection to the
 *     agent gone) leaves nothing reserved.
 *
 * Include it once, from a CUnit test file; it asserts with CUnit.
 */
#ifndef TIDE_STORE_CALLS_IT_H
#define TIDE_STORE_CALLS_IT_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tide_store.h"
#include "tide_ut.h"

/* A gauge or counter without labels from the master's /metrics on port; -1 when
 * the page or the name is missing. One request, the server closes after it. */
static long long
sc_metric(uint16_t port, const char *name)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct timeval tv = {.tv_sec = 5};
	char req[128], pat[160], *buf = NULL, *p;
	size_t len = 0, cap = 1 << 16;
	long long v = -1;
	ssize_t n;
	int fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	buf = malloc(cap);
	if (fd < 0 || buf == NULL)
		goto out;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		goto out;
	n = snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
	if (write(fd, req, (size_t)n) != n)
		goto out;
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 4096) {
			char *q = realloc(buf, cap * 2);

			if (q == NULL)
				goto out;
			buf = q;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	snprintf(pat, sizeof(pat), "\n%s ", name);
	p = strstr(buf, pat);
	if (p != NULL)
		v = strtoll(p + strlen(pat), NULL, 10);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return v;
}

/* Soft pins through w (keys under pfx), counted by the master on metrics_port. */
static void
soft_pin_check(struct tide_store *w, uint16_t metrics_port, const char *pfx)
{
	static const char *const gauge = "master_soft_pin_key_count";
	struct tide_store_rc on = {.soft_pin_action = TIDE_STORE_SOFT_PIN_ENABLE,
				   .soft_pin_ttl_ms = 600000};
	struct tide_store_rc on_default = {.soft_pin_action = TIDE_STORE_SOFT_PIN_ENABLE};
	struct tide_store_rc off = {.soft_pin_action = TIDE_STORE_SOFT_PIN_DISABLE};
	struct tide_store_rc bad = {.soft_pin_action = 3};
	struct tide_store_rc ttl_only = {.soft_pin_ttl_ms = 1000};
	char k[6][160];
	const char *bk[2] = {k[1], k[2]}, *pk[1] = {k[3]}, *rk[6];
	uint8_t v[4096];
	const void *bufs[2] = {v, v};
	size_t lens[2] = {sizeof(v), 100}, one = 1;
	struct tide_store_part part = {v, 512};
	int rcs[6];
	long long before = sc_metric(metrics_port, gauge);

	CU_ASSERT_FATAL(before >= 0);
	for (int i = 0; i < 6; i++) {
		snprintf(k[i], sizeof(k[i]), "%s/soft-pin-%d", pfx, i);
		rk[i] = k[i];
	}
	memset(v, 0x5a, sizeof(v));
	/* ENABLE with a ttl (a single put: a lease in process), then a batch and a put in
	 * pieces with the master's default ttl. */
	CU_ASSERT_EQUAL(tide_store_put(w, k[0], v, 256, &on), 0);
	CU_ASSERT_EQUAL(sc_metric(metrics_port, gauge), before + 1);
	CU_ASSERT_EQUAL(tide_store_batch_put_from(w, bk, bufs, lens, 2, &on_default, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(rcs[1], 0);
	CU_ASSERT_EQUAL(sc_metric(metrics_port, gauge), before + 3);
	CU_ASSERT_EQUAL(tide_store_batch_put_parts(w, pk, &part, &one, 1, &on, 0, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(sc_metric(metrics_port, gauge), before + 4);
	/* The defaults pin nothing. */
	CU_ASSERT_EQUAL(tide_store_put(w, k[4], v, 64, NULL), 0);
	CU_ASSERT_EQUAL(sc_metric(metrics_port, gauge), before + 4);
	/* An upsert with DISABLE takes the pin off. */
	CU_ASSERT_EQUAL(
		tide_store_batch_put_parts(w, rk, &part, &one, 1, &off, TIDE_STORE_PUT_UPSERT, rcs),
		0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(sc_metric(metrics_port, gauge), before + 3);
	/* Refused: an action outside the enum (here), a ttl without ENABLE (the master). */
	CU_ASSERT_EQUAL(tide_store_put(w, k[5], v, 64, &bad), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_put(w, k[5], v, 64, &ttl_only), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_is_exist(w, k[5]), 0);
	CU_ASSERT_EQUAL(sc_metric(metrics_port, gauge), before + 3);
	CU_ASSERT_EQUAL(tide_store_batch_remove(w, rk, 5, true, rcs), 0);
	CU_ASSERT_EQUAL(sc_metric(metrics_port, gauge), before);
}

/* Deterministic bytes of seed. */
static void
sc_fill(uint8_t *p, size_t n, unsigned seed)
{
	tide_ut_fill_lcg(p, n, seed * 2246822519u + 3, 1664525u, 1013904223u, 24);
}

/* Objects written by w, read by r into pieces; lbuf: r's local buffer (2 MiB at least),
 * or NULL for heap pieces only. */
static void
get_parts_check(struct tide_store *w, struct tide_store *r, const char *pfx, uint8_t *lbuf)
{
	enum { A = 10000, B = 300 };
	char ka[160], kb[160], km[160];
	uint8_t *src = malloc(A), *heap = malloc(4 * A), *d2 = lbuf ? lbuf + 4096 : heap + 3 * A;
	const char *keys[4] = {ka, km, kb, ka};
	int64_t sizes[4];
	size_t np[4] = {3, 1, 2, 2};
	int rcs[2];

	CU_ASSERT_FATAL(src != NULL && heap != NULL);
	snprintf(ka, sizeof(ka), "%s/get-parts-a", pfx);
	snprintf(kb, sizeof(kb), "%s/get-parts-b", pfx);
	snprintf(km, sizeof(km), "%s/get-parts-missing", pfx);
	sc_fill(src, A, 41);
	CU_ASSERT_EQUAL(tide_store_put(w, ka, src, A, NULL), 0);
	CU_ASSERT_EQUAL(tide_store_put(w, kb, src, B, NULL), 0);
	memset(heap, 0xee, 4 * A);
	memset(d2, 0xee, 8192);
	/* Key a: 3000 bytes to the heap, an empty piece, the rest (7000) into 8192 bytes of
	 * the local buffer; a missing key; key b (300 bytes) into 2 x 100 bytes; key a again
	 * into two heap pieces of exactly its size. */
	struct tide_store_part parts[8] = {
		{heap, 3000},       {NULL, 0},
		{d2, 8192},         {heap + 3000, 64},
		{heap + 4000, 100}, {heap + 4100, 100},
		{heap + A, 4000},   {heap + A + 4000, A - 4000},
	};
	CU_ASSERT_EQUAL(tide_store_batch_get_into_parts(r, keys, parts, np, 4, sizes), -ENOENT);
	CU_ASSERT_EQUAL(sizes[0], A);
	CU_ASSERT_EQUAL(sizes[1], -ENOENT);
	CU_ASSERT_EQUAL(sizes[2], -ENOBUFS);
	CU_ASSERT_EQUAL(sizes[3], A);
	CU_ASSERT_EQUAL(memcmp(heap, src, 3000), 0);
	CU_ASSERT_EQUAL(memcmp(d2, src + 3000, A - 3000), 0);
	CU_ASSERT_EQUAL(d2[A - 3000], 0xee); /* past the object: untouched */
	CU_ASSERT_EQUAL(heap[3000], 0xee);   /* the missing key's piece */
	CU_ASSERT_EQUAL(heap[4000], 0xee);   /* the short key's pieces: nothing read */
	CU_ASSERT_EQUAL(memcmp(heap + A, src, A), 0);
	/* Everything read: 0. */
	CU_ASSERT_EQUAL(tide_store_batch_get_into_parts(r, keys + 3, parts + 6, np + 3, 1, sizes),
			0);
	/* Refusals leave sizes alone. */
	sizes[0] = 77;
	CU_ASSERT_EQUAL(tide_store_batch_get_into_parts(r, keys, parts, NULL, 1, sizes), -EINVAL);
	parts[0].buf = NULL;
	CU_ASSERT_EQUAL(tide_store_batch_get_into_parts(r, keys, parts, np, 1, sizes), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_get_into_parts(r, keys, parts, np, 0, sizes), -EINVAL);
	CU_ASSERT_EQUAL(sizes[0], 77);
	keys[1] = kb;
	CU_ASSERT_EQUAL(tide_store_batch_remove(w, keys, 2, true, rcs), 0);
	free(src);
	free(heap);
}

/* w puts an object of 2 replicas (the cluster's two segments are ep0 and ep1); r
 * asks where it is, beside a missing key. */
static void
replicas_check(struct tide_store *w, struct tide_store *r, const char *pfx, const char *ep0,
	       const char *ep1)
{
	struct tide_store_rc two = {.replica_num = 2};
	struct tide_store_replicas *res = (void *)1;
	char k[160], km[160];
	const char *keys[3] = {k, km, k};
	uint8_t v[3000];
	int rcs[1];

	snprintf(k, sizeof(k), "%s/replicas", pfx);
	snprintf(km, sizeof(km), "%s/replicas-missing", pfx);
	sc_fill(v, sizeof(v), 5);
	CU_ASSERT_EQUAL_FATAL(tide_store_put(w, k, v, sizeof(v), &two), 0);
	CU_ASSERT_EQUAL_FATAL(tide_store_batch_get_replicas(r, keys, 3, &res), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(res);
	for (int i = 0; i < 3; i += 2) {
		CU_ASSERT_EQUAL(res[i].err, 0);
		CU_ASSERT_EQUAL_FATAL(res[i].n, 2);
		for (size_t j = 0; j < 2; j++) {
			const struct tide_store_replica *p = &res[i].v[j];

			CU_ASSERT_EQUAL(p->type, TIDE_STORE_REPLICA_MEMORY);
			CU_ASSERT_EQUAL(p->status, TIDE_STORE_REPLICA_COMPLETE);
			CU_ASSERT_EQUAL(p->size, sizeof(v));
			CU_ASSERT_NOT_EQUAL(p->buffer_address, 0);
			CU_ASSERT_STRING_EQUAL(p->protocol, "tcp");
			CU_ASSERT_STRING_EQUAL(p->file_path, "");
		}
		/* One on each segment, in either order. */
		CU_ASSERT_TRUE((strcmp(res[i].v[0].transport_endpoint, ep0) == 0 &&
				strcmp(res[i].v[1].transport_endpoint, ep1) == 0) ||
			       (strcmp(res[i].v[0].transport_endpoint, ep1) == 0 &&
				strcmp(res[i].v[1].transport_endpoint, ep0) == 0));
	}
	CU_ASSERT_EQUAL(res[1].err, -ENOENT);
	CU_ASSERT_EQUAL(res[1].n, 0);
	CU_ASSERT_PTR_NULL(res[1].v);
	tide_store_replicas_free(res);
	tide_store_replicas_free(NULL);
	/* Refusals: *out NULL. */
	res = (void *)1;
	CU_ASSERT_EQUAL(tide_store_batch_get_replicas(r, keys, 0, &res), -EINVAL);
	CU_ASSERT_PTR_NULL(res);
	CU_ASSERT_EQUAL(tide_store_batch_get_replicas(r, NULL, 1, &res), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_get_replicas(r, keys, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_remove(w, keys, 1, true, rcs), 0);
}

/* w writes two objects through put sessions (k1 of two replicas from two pieces, one in
 * lbuf when given, at offsets out of order; k2 one piece), ends them; r reads them back
 * whole and through a get session. Then every refusal, and a revoke. */
static void
session_check(struct tide_store *w, struct tide_store *r, const char *pfx, uint8_t *lbuf)
{
	enum { S1 = 10000, S2 = 3000, OA = 4000 };
	struct tide_store_rc two = {.replica_num = 2};
	char k1[160], k2[160], k3[160], km[160];
	const char *keys[2] = {k1, k2};
	size_t sizes[2] = {S1, S2};
	uint8_t *a = malloc(S1 - OA), *b = lbuf != NULL ? lbuf : malloc(OA), *c = malloc(S2);
	uint8_t *whole = malloc(S1), *g = calloc(1, 2000), *g2 = calloc(1, 1000);
	struct tide_store_part pp[3];
	uint64_t offs[3];
	size_t np[2];
	int64_t out[2];
	int rcs[2];

	CU_ASSERT_FATAL(a != NULL && b != NULL && c != NULL && whole != NULL && g != NULL &&
			g2 != NULL);
	snprintf(k1, sizeof(k1), "%s/sess-1", pfx);
	snprintf(k2, sizeof(k2), "%s/sess-2", pfx);
	snprintf(k3, sizeof(k3), "%s/sess-3", pfx);
	snprintf(km, sizeof(km), "%s/sess-missing", pfx);
	sc_fill(a, S1 - OA, 61);
	sc_fill(b, OA, 62);
	sc_fill(c, S2, 63);

	/* Start: both reserved; a second start of either is -EBUSY, nothing asked. */
	CU_ASSERT_EQUAL_FATAL(tide_store_batch_put_session_start(w, keys, sizes, 2, &two, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(rcs[1], 0);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, keys, sizes, 1, &two, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], -EBUSY);
	/* Not readable before the end. */
	CU_ASSERT_EQUAL(tide_store_is_exist(r, k1), 0);
	/* Writes: k1's second half first, then its first; k2 whole. */
	pp[0] = (struct tide_store_part){a, S1 - OA};
	offs[0] = OA;
	pp[1] = (struct tide_store_part){b, OA};
	offs[1] = 0;
	pp[2] = (struct tide_store_part){c, S2};
	offs[2] = 0;
	np[0] = 2;
	np[1] = 1;
	out[0] = out[1] = -1;
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, pp, offs, np, 2, out), 0);
	CU_ASSERT_EQUAL(out[0], S1);
	CU_ASSERT_EQUAL(out[1], S2);
	/* A range past the reserved size: -ERANGE, nothing of the key written. */
	offs[2] = 1;
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, &keys[1], &pp[2], &offs[2], &np[1], 1, out),
			0);
	CU_ASSERT_EQUAL(out[0], -ERANGE);
	offs[2] = 0;
	/* No pieces: Mooncake's INVALID_REPLICA (-EREMOTEIO). */
	np[0] = 0;
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, pp, offs, np, 1, out), 0);
	CU_ASSERT_EQUAL(out[0], -EREMOTEIO);
	/* End: both visible; ending again, or writing after, is -ESRCH. */
	CU_ASSERT_EQUAL(tide_store_batch_put_session_end(w, keys, 2, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(rcs[1], 0);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_end(w, keys, 1, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], -ESRCH);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_revoke(w, keys, 1, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], -ESRCH);
	np[0] = 2;
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, pp, offs, np, 1, out), 0);
	CU_ASSERT_EQUAL(out[0], -ESRCH);
	/* Every byte, read by the other store. */
	CU_ASSERT_EQUAL(tide_store_get_into(r, k1, whole, S1), S1);
	CU_ASSERT_EQUAL(memcmp(whole, b, OA), 0);
	CU_ASSERT_EQUAL(memcmp(whole + OA, a, S1 - OA), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(r, k2, whole, S1), S2);
	CU_ASSERT_EQUAL(memcmp(whole, c, S2), 0);
	/* An existing object cannot be reserved again. */
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, keys, sizes, 1, NULL, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], -EEXIST);

	/* Get sessions: k1's replica cached; a missing key -ENOENT. */
	{
		const char *gk[2] = {k1, km};
		struct tide_store_part gp[2] = {{g, 2000}, {g2, 1000}};
		uint64_t go[2] = {S1 - 2000, 100};
		size_t gn[2] = {2, 0};

		CU_ASSERT_EQUAL(tide_store_batch_get_session_start(r, gk, 2, rcs), 0);
		CU_ASSERT_EQUAL(rcs[0], 0);
		CU_ASSERT_EQUAL(rcs[1], -ENOENT);
		out[0] = out[1] = -1;
		CU_ASSERT_EQUAL(tide_store_batch_get_ranges(r, gk, gp, go, gn, 2, out), 0);
		CU_ASSERT_EQUAL(out[0], 3000);
		CU_ASSERT_EQUAL(out[1], -ESRCH);
		CU_ASSERT_EQUAL(memcmp(g, a + (S1 - 2000 - OA), 2000), 0);
		CU_ASSERT_EQUAL(memcmp(g2, b + 100, 1000), 0);
		/* Past the replica's size: -ERANGE. */
		go[1] = S1 - 999;
		CU_ASSERT_EQUAL(tide_store_batch_get_ranges(r, gk, gp, go, gn, 1, out), 0);
		CU_ASSERT_EQUAL(out[0], -ERANGE);
		CU_ASSERT_EQUAL(tide_store_batch_get_session_end(r, gk, 2), 0);
		CU_ASSERT_EQUAL(tide_store_batch_get_ranges(r, gk, gp, go, gn, 1, out), 0);
		CU_ASSERT_EQUAL(out[0], -ESRCH);
		/* The writer never started one. */
		go[1] = 100;
		CU_ASSERT_EQUAL(tide_store_batch_get_ranges(w, gk, gp, go, gn, 1, out), 0);
		CU_ASSERT_EQUAL(out[0], -ESRCH);
	}

	/* Revoke: the reservation goes, nothing is left, the key can start again. */
	keys[0] = k3;
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, keys, sizes, 1, NULL, rcs), 0);
	CU_ASSERT_EQUAL_FATAL(rcs[0], 0);
	np[0] = 1;
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, &pp[2], &offs[2], np, 1, out), 0);
	CU_ASSERT_EQUAL(out[0], S2);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_revoke(w, keys, 1, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(r, k3), 0);
	CU_ASSERT_EQUAL(tide_store_get_into(r, k3, whole, S1), -ENOENT);
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, &pp[2], &offs[2], np, 1, out), 0);
	CU_ASSERT_EQUAL(out[0], -ESRCH);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, keys, sizes, 1, NULL, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_revoke(w, keys, 1, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], 0);
	/* A size of 0 is refused per key. */
	sizes[0] = 0;
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, keys, sizes, 1, NULL, rcs), 0);
	CU_ASSERT_EQUAL(rcs[0], -EINVAL);

	/* Refusals of the whole call. */
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, keys, sizes, 0, NULL, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, NULL, sizes, 1, NULL, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(w, keys, NULL, 1, NULL, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, pp, NULL, np, 1, out), -EINVAL);
	pp[0].buf = NULL;
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, pp, offs, np, 1, out), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_get_ranges(w, keys, pp, offs, np, 1, out), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_end(w, keys, 0, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_revoke(w, keys, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_get_session_start(w, NULL, 1, rcs), -EINVAL);
	CU_ASSERT_EQUAL(tide_store_batch_get_session_end(w, keys, 0), -EINVAL);

	keys[0] = k1;
	CU_ASSERT_EQUAL(tide_store_batch_remove(w, keys, 2, true, rcs), 0);
	free(a);
	if (lbuf == NULL)
		free(b);
	free(c);
	free(whole);
	free(g);
	free(g2);
}

/* w (closed here) goes while its put session of key pfx/sess-gone is half written; o
 * then finds nothing reserved: a new session of the key starts (an object still
 * reserved would be -EEXIST until the master's discard timeout) within 5 s. */
static void
session_gone_check(struct tide_store *w, struct tide_store *o, const char *pfx)
{
	char k[160];
	const char *keys[1] = {k};
	size_t size = 8192;
	uint8_t v[4096];
	struct tide_store_part p = {v, sizeof(v)};
	uint64_t off = 0;
	size_t np = 1;
	int64_t out;
	int rc = -1;

	snprintf(k, sizeof(k), "%s/sess-gone", pfx);
	sc_fill(v, sizeof(v), 71);
	CU_ASSERT_EQUAL_FATAL(tide_store_batch_put_session_start(w, keys, &size, 1, NULL, &rc), 0);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL(tide_store_batch_put_ranges(w, keys, &p, &off, &np, 1, &out), 0);
	CU_ASSERT_EQUAL(out, (int64_t)sizeof(v));
	/* Another client sees the reservation. */
	CU_ASSERT_EQUAL(tide_store_batch_put_session_start(o, keys, &size, 1, NULL, &rc), 0);
	CU_ASSERT_NOT_EQUAL(rc, 0);
	tide_store_close(w);
	for (int i = 0; i < 50; i++) {
		CU_ASSERT_EQUAL(tide_store_batch_put_session_start(o, keys, &size, 1, NULL, &rc),
				0);
		if (rc == 0)
			break;
		usleep(100 * 1000);
	}
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(tide_store_is_exist(o, k), 0);
	CU_ASSERT_EQUAL(tide_store_batch_put_session_revoke(o, keys, 1, &rc), 0);
	CU_ASSERT_EQUAL(rc, 0);
}

#endif /* TIDE_STORE_CALLS_IT_H */
