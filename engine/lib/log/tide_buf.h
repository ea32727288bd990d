/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The one growable byte buffer of the tree (HTTP bodies, etcd replies, the master's
 * journal records, encoded frames): capacity doubles from a first size and never
 * exceeds a limit the caller states, so a peer cannot make it grow without end.
 */
#ifndef TIDE_BUF_H
#define TIDE_BUF_H

#include <stddef.h>

/** A growable buffer. Zero-initialise; release with tide_buf_free(). */
struct tide_buf {
	char *p;    /**< malloc'd, owned by the buffer; NULL while empty */
	size_t len; /**< bytes used */
	size_t cap; /**< bytes allocated */
};

/**
 * Room for `extra` more bytes after `len` in the block *p of *cap bytes: the block
 * grows (realloc) by doubling, from `first` bytes when empty, to at most `limit`
 * bytes in all (0: no limit but SIZE_MAX). For containers whose fields are named
 * otherwise; struct tide_buf users call tide_buf_reserve().
 * \return 0 (*p, *cap updated if it grew); -E2BIG len + extra exceeds limit (nothing
 *         changed); -ENOMEM (nothing changed). Thread: the buffer's owner.
 */
int tide_grow(void **p, size_t *cap, size_t len, size_t extra, size_t first, size_t limit);

/** tide_grow() on b: room for extra more bytes, b->len + extra <= limit (0: none). */
int tide_buf_reserve(struct tide_buf *b, size_t extra, size_t limit);

/**
 * Append n bytes and keep a NUL after them (not counted in len), so text can be read
 * as a C string. 0; -E2BIG past limit (0: none; the NUL counts); -ENOMEM.
 */
int tide_buf_append(struct tide_buf *b, const void *data, size_t n, size_t limit);

/** Free b's memory and zero it. NULL-safe. */
void tide_buf_free(struct tide_buf *b);

#endif /* TIDE_BUF_H */
