/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide_buf.h"

int
tide_grow(void **p, size_t *cap, size_t len, size_t extra, size_t first, size_t limit)
{
	size_t need, ncap;
	void *np;

	if (limit == 0)
		limit = SIZE_MAX;
	if (extra > limit || len > limit - extra)
		return -E2BIG;
	need = len + extra;
	if (need <= *cap)
		return 0;
	ncap = *cap != 0 ? *cap : (first != 0 ? first : 64);
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	/* Doubling may overshoot the limit: the limit itself is room enough. */
	if (ncap > limit)
		ncap = limit;
	np = realloc(*p, ncap);
	if (np == NULL)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

int
tide_buf_reserve(struct tide_buf *b, size_t extra, size_t limit)
{
	void *p = b->p;
	int rc = tide_grow(&p, &b->cap, b->len, extra, 256, limit);

	b->p = p;
	return rc;
}

int
tide_buf_append(struct tide_buf *b, const void *data, size_t n, size_t limit)
{
	int rc;

	if (n == SIZE_MAX)
		return -E2BIG;
	rc = tide_buf_reserve(b, n + 1, limit);
	if (rc != 0)
		return rc;
	if (n != 0)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

void
tide_buf_free(struct tide_buf *b)
{
	if (b == NULL)
		return;
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
