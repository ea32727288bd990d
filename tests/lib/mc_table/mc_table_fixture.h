/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Tests only: the master object table (store/master/tide_mc_table.h) as the
 * table tests drive it: a table, segments, numbered objects put and removed,
 * and the comparison of a table with one rebuilt from its journal.
 *
 * Every function asserts with CUnit, so it runs in a CUnit test; all of them
 * run on the test's thread, and the tables passed in are the test's own.
 */
#ifndef TIDE_MC_TABLE_FIXTURE_H
#define TIDE_MC_TABLE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_mc_table.h"

/** Room for the longest object key a test names, and its NUL. */
#define MC_FIXTURE_KEY_MAX 1100

/**
 * A test's numbered objects. Object i is named
 * "<prefix><i, zero-padded to digits><suffix>", then 'k' up to pad_to bytes.
 */
struct mc_fixture_objects {
	char prefix[64];
	const char *suffix;               /* NULL: none */
	int digits;                       /* at least this many digits */
	size_t pad_to;                    /* 0: no padding; below MC_FIXTURE_KEY_MAX */
	const struct tide_mc_uuid *owner; /* the client that puts them */
	uint64_t csum_base;               /* odd objects carry csum_base + i; even ones none */
};

/** \p s (not copied) as a table string; s stays the caller's. */
struct tide_mc_str mc_fixture_str(const char *s);

/**
 * A new table: seed 7, segments of at most \p max_blocks blocks, other
 * options at their defaults. Fatal assertion if it cannot be created.
 * \return the table; the caller destroys it (tide_mc_table_destroy()).
 */
struct tide_mc_table *mc_fixture_table(uint32_t max_blocks);

/**
 * A segment description over [base, base + size) with protocol "tcp". Its
 * strings point at \p name and \p endpoint, which must outlive its use.
 */
struct tide_mc_segment mc_fixture_segment(struct tide_mc_uuid id, const char *name, uint64_t base,
					  uint64_t size, const char *endpoint);

/** Destroy *t (NULL-safe) and set it to NULL; release *a, the test's arena. */
void mc_fixture_destroy(struct tide_mc_table **t, struct tide_mc_table_arena *a);

/** The table's metrics now. */
struct tide_mc_table_metrics mc_fixture_metrics(struct tide_mc_table *t);

/** Tick at \p now with \p client kept alive (its Ping at the same time, asserted). */
void mc_fixture_tick_alive(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			   uint64_t now);

/**
 * Mount segment \p id of \p client at time 0 (its endpoint is its name) and
 * assert that the table took it.
 */
void mc_fixture_mount(struct tide_mc_table *t, struct tide_mc_uuid id, const char *name,
		      uint64_t base, uint64_t size, const struct tide_mc_uuid *client);

/**
 * Write object \p i's name into \p buf (\p n bytes, truncated to fit).
 * \return the name's length.
 */
size_t mc_fixture_key(const struct mc_fixture_objects *o, int i, char *buf, size_t n);

/**
 * PutStart of object \p i by o->owner at time 0 (\p len bytes, \p replicas
 * replicas, hard-pinned if \p hard_pin), and, when \p end and PutStart
 * succeeded, its PutEnd for every replica, asserted to succeed.
 * \return PutStart's code (0 or a TIDE_MC_EC_* value).
 */
int mc_fixture_put(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i, uint64_t len,
		   uint64_t replicas, bool hard_pin, bool end);

/** Remove object \p i (forced, time 0). \return tide_mc_table_remove()'s code. */
int mc_fixture_remove(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i);

/**
 * Query object \p i at time 0 into \p out (allocated in \p a).
 * \return 0, or TIDE_MC_EC_OBJECT_NOT_FOUND, also for a put not ended (never
 * acknowledged, so never journaled), or another TIDE_MC_EC_* value.
 */
int mc_fixture_query(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i,
		     struct tide_mc_table_arena *a, struct tide_mc_replica_list *out);

/** \return whether object \p i is in \p t (mc_fixture_query() returns 0). */
bool mc_fixture_has_key(struct tide_mc_table *t, const struct mc_fixture_objects *o, int i);

/**
 * \return whether object \p i reads the same from \p x and \p y: the same
 * query code and, when present, the same checksum and the same replicas
 * (kind, status, size, address, endpoint), in order.
 */
bool mc_fixture_same_key(struct tide_mc_table *x, struct tide_mc_table *y,
			 const struct mc_fixture_objects *o, int i);

/**
 * Assert that \p x and \p y list the same segments (by id: owner, extent,
 * status, name, endpoint) and, with \p usage and no put in flight in \p x, the
 * same bytes in use in each.
 */
void mc_fixture_assert_same_segments(struct tide_mc_table *x, struct tide_mc_table *y, bool usage);

/**
 * Assert that \p y, rebuilt from \p x's journal, reads as \p x: objects
 * 0..n-1 (mc_fixture_same_key(); the first three that differ are printed),
 * the counts of keys and hard-pinned keys without x's puts in flight, no put
 * in flight in \p y, the segments and capacity, the bytes allocated when
 * \p x has no put in flight, and mc_fixture_assert_same_segments() with usage.
 */
void mc_fixture_assert_same(struct tide_mc_table *x, struct tide_mc_table *y,
			    const struct mc_fixture_objects *o, int n);

#endif
