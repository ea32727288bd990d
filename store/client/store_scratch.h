/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the per-call arrays of a store call (keys as codec
 * strings, transfer lists, per-key results), on the stack up to
 * STORE_SCRATCH_INLINE bytes, else in one heap block: a small call allocates
 * nothing of its own.
 *
 * Use: size the whole call with store_sc_size() per array, store_sc_init() once,
 * carve each array with store_sc_take() in the same order, store_sc_fini() at
 * the end. The memory is zeroed. Thread: a scratch belongs to its call.
 */
#ifndef TIDE_STORE_SCRATCH_H
#define TIDE_STORE_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Bytes kept on the stack: the arrays of a call of a few dozen keys. */
#define STORE_SCRATCH_INLINE 4096

struct store_scratch {
	void *heap; /* NULL: the arrays are in inl */
	unsigned char *next;
	_Alignas(16) unsigned char inl[STORE_SCRATCH_INLINE];
};

/* Bytes n elements of elem bytes take, rounded to 16 (each array stays aligned). */
static inline size_t
store_sc_size(size_t n, size_t elem)
{
	return (n * elem + 15) & ~(size_t)15;
}

/* Room for bytes (the sum of store_sc_size()s): false when the heap block failed. */
static inline bool
store_sc_init(struct store_scratch *sc, size_t bytes)
{
	sc->heap = NULL;
	sc->next = sc->inl;
	if (bytes > sizeof(sc->inl)) {
		sc->heap = calloc(1, bytes);
		sc->next = sc->heap;
	} else {
		memset(sc->inl, 0, bytes);
	}
	return sc->next != NULL;
}

/* The next array of n elements of elem bytes (sized in store_sc_init()). */
static inline void *
store_sc_take(struct store_scratch *sc, size_t n, size_t elem)
{
	void *p = sc->next;

	sc->next += store_sc_size(n, elem);
	return p;
}

static inline void
store_sc_fini(struct store_scratch *sc)
{
	free(sc->heap);
	sc->heap = NULL;
}

#endif /* TIDE_STORE_SCRATCH_H */
