/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>

#include "reg_table.h"

/* Fibonacci hashing: registered buffers are page- or allocator-aligned, so
 * their low bits say little; the product's high half mixes them all. */
static size_t
reg_home(uintptr_t addr, size_t cap)
{
	return (size_t)(((uint64_t)addr * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

/* Slot of addr, or the free slot where it would go (the table is never full:
 * n < cap / 2 + 1). */
static size_t
reg_find(const struct tide_reg_ent *t, size_t cap, uintptr_t addr)
{
	size_t i = reg_home(addr, cap);

	while (t[i].addr != 0 && t[i].addr != addr)
		i = (i + 1) & (cap - 1);
	return i;
}

int
tide_reg_table_init(struct tide_reg_table *rt, size_t cap)
{
	if (cap < 2 || (cap & (cap - 1)) != 0)
		return -EINVAL;
	rt->t = calloc(cap, sizeof(*rt->t));
	if (rt->t == NULL)
		return -ENOMEM;
	rt->cap = cap;
	rt->n = 0;
	return 0;
}

void
tide_reg_table_fini(struct tide_reg_table *rt)
{
	if (rt == NULL)
		return;
	free(rt->t);
	rt->t = NULL;
	rt->cap = rt->n = 0;
}

static int
reg_grow(struct tide_reg_table *rt)
{
	size_t cap = rt->cap * 2;
	struct tide_reg_ent *t = calloc(cap, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < rt->cap; i++)
		if (rt->t[i].addr != 0)
			t[reg_find(t, cap, rt->t[i].addr)] = rt->t[i];
	free(rt->t);
	rt->t = t;
	rt->cap = cap;
	return 0;
}

int
tide_reg_table_add(struct tide_reg_table *rt, uintptr_t addr, size_t len)
{
	size_t i;

	if (addr == 0 || len == 0)
		return -EINVAL;
	i = reg_find(rt->t, rt->cap, addr);
	if (rt->t[i].addr != 0)
		return -EEXIST;
	if ((rt->n + 1) * 2 > rt->cap) {
		int rc = reg_grow(rt);

		if (rc != 0)
			return rc;
		i = reg_find(rt->t, rt->cap, addr);
	}
	rt->t[i].addr = addr;
	rt->t[i].len = len;
	rt->n++;
	return 0;
}

int
tide_reg_table_del(struct tide_reg_table *rt, uintptr_t addr, size_t *len)
{
	size_t cap = rt->cap, i, j, h;

	if (addr == 0)
		return -ENOENT;
	i = reg_find(rt->t, cap, addr);
	if (rt->t[i].addr == 0)
		return -ENOENT;
	if (len != NULL)
		*len = rt->t[i].len;
	/* Backward-shift deletion: an entry after the hole moves into it unless
	 * its home lies cyclically in (i, j], where a probe from home would
	 * reach it without crossing the hole. */
	for (j = (i + 1) & (cap - 1); rt->t[j].addr != 0; j = (j + 1) & (cap - 1)) {
		h = reg_home(rt->t[j].addr, cap);
		if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) {
			rt->t[i] = rt->t[j];
			i = j;
		}
	}
	rt->t[i].addr = 0;
	rt->t[i].len = 0;
	rt->n--;
	return 0;
}

size_t
tide_reg_table_len(const struct tide_reg_table *rt, uintptr_t addr)
{
	size_t i;

	if (addr == 0 || rt->t == NULL)
		return 0;
	i = reg_find(rt->t, rt->cap, addr);
	return rt->t[i].addr == addr ? rt->t[i].len : 0;
}
