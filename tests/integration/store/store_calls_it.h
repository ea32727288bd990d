/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Store calls end to end, shared by store_client_it (two in-process stores)
 * and agent_it (clients attached to two agents), against the real master:
 *
 *   - soft pins of tide_store_rc (ABI 4) reach the master: its
 *     master_soft_pin_key_count gauge (/metrics) counts the objects put with
 *     ENABLE, through put, batch_put_from (lease and PutStart placement) and
 *     batch_put_parts, and an upsert with DISABLE takes one off;
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

#endif /* TIDE_STORE_CALLS_IT_H */
