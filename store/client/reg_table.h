/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the registered-buffer table of a store handle.
 *
 * tide_store_register_buffer() records (address, length) pairs; Miles
 * registers and unregisters a buffer around every GET, so both are O(1): an
 * open-addressing table keyed by start address, linear probing, power-of-two
 * capacity kept at least twice the count, backward-shift deletion (no
 * tombstones, so probes stay short however many registrations came and
 * went). No allocation until the table outgrows half of its first capacity.
 * Not thread-safe: the store holds its buffer lock around every call.
 */
#ifndef TIDE_REG_TABLE_H
#define TIDE_REG_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct tide_reg_ent {
	uintptr_t addr; /* 0 = free slot */
	size_t len;
};

struct tide_reg_table {
	struct tide_reg_ent *t;
	size_t cap, n;
};

/*
 * Empty table with room for cap / 2 entries before it grows; cap a power of
 * two >= 2. Returns 0, -EINVAL (cap), -ENOMEM.
 */
int tide_reg_table_init(struct tide_reg_table *rt, size_t cap);

/* Free the slots; the table is empty and unusable until init. NULL-safe. */
void tide_reg_table_fini(struct tide_reg_table *rt);

/*
 * Record [addr, addr + len). Returns 0; -EINVAL addr 0 or len 0; -EEXIST addr
 * is recorded already (the table is unchanged); -ENOMEM growing failed (the
 * table is unchanged).
 */
int tide_reg_table_add(struct tide_reg_table *rt, uintptr_t addr, size_t len);

/*
 * Forget addr; its length goes to *len when len is not NULL. Returns 0;
 * -ENOENT not recorded.
 */
int tide_reg_table_del(struct tide_reg_table *rt, uintptr_t addr, size_t *len);

/* Length recorded for addr, 0 when none. */
size_t tide_reg_table_len(const struct tide_reg_table *rt, uintptr_t addr);

#endif /* TIDE_REG_TABLE_H */
