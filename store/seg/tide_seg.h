/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Segment allocator: manages the address range of one memory segment.
 *
 * Each node contributes a segment; the master places objects in it. This
 * module hands out and takes back *offsets* in [0, size). It never reads or
 * writes the segment's memory, so it works for remote segments, for
 * segments not mapped in this process and for segments of any size up to
 * TIDE_SEG_SIZE_MAX.
 *
 * Algorithm: TLSF-style two-level segregated fit over offsets.
 *  - Sizes are counted in granules (opts.granule bytes, a power of two; every
 *    request rounds up to it, every offset is a multiple of it).
 *  - First level: log2 class of the size in granules; second level: 64
 *    linear subdivisions of each class (a u64 bitmap per first level, one u64
 *    bitmap of first levels). A search rounds the request up to the next
 *    class boundary and takes the head of the first non-empty list at or
 *    above it (two ctz), so it never walks a list: O(1).
 *  - Every extent (free or allocated) is a block node in a table preallocated
 *    at create time (opts.max_blocks nodes); blocks form an address-ordered
 *    doubly-linked list, and a freed extent merges at once with free
 *    neighbours, so two free extents are never adjacent.
 *  - free() takes an offset. Allocated blocks sit in an intrusive red-black
 *    tree keyed by offset (<bsd/sys/tree.h>), so free, tide_seg_alloc_size()
 *    and the rejection of bad offsets cost O(log n) in the worst case, n =
 *    live allocations (depth <= 2*log2(n+1): <= 40 compares at 1M live).
 *    alloc inserts without a descent: the new block's tree neighbours are
 *    its nearest used address neighbours, found in O(1) on the address list.
 *    Why a tree: an open-addressing hash index (linear probing, 4x
 *    max_blocks slots) was measured on tools/seg_bench's rollout mix and was
 *    no faster (~170 ns per alloc+free pair for both on this 2-core box;
 *    the hash only won on batches of 1024 equal objects), and its worst case
 *    is bounded only by the table size, not by log n. The tree gives a
 *    deterministic bound at the same cost.
 *
 * Bounds: alloc and free do no malloc and touch O(1) nodes plus one tree
 * operation: O(log n) worst case. When the O(1) search finds nothing, a
 * second chance checks the head (only the head) of each non-empty class
 * from the request's own class up: at most TIDE_SEG_CLASSES heads, in
 * practice one. It catches exact fits of sizes that are not class
 * boundaries (the whole of a 1000 MiB segment) and large alignments.
 *
 * Fit guarantee (what a failure means): let need = round_up(size, granule)
 * plus (align - granule) when align > granule. tide_seg_alloc() fails with
 * -ENOSPC only if no free extent is >= need rounded up to its size class,
 * and that rounding adds less than need/64 + granule. So when the free
 * extents are all smaller than need + need/64 + granule the failure is
 * legitimate; otherwise it cannot happen. Requests below 64 granules have
 * exact classes: they fail only when no extent >= need exists.
 *
 * Thread: a segment is owned by one thread at a time. No function here
 * locks; the caller serialises every call on the same segment (the master
 * holds its object-table lock around them). Different segments are
 * independent and may be used from different threads concurrently.
 */
#ifndef TIDE_SEG_H
#define TIDE_SEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Largest segment size accepted by tide_seg_create() (4 EiB). */
#define TIDE_SEG_SIZE_MAX (UINT64_C(1) << 62)
/** Smallest and largest granule accepted (bytes; a power of two). */
#define TIDE_SEG_GRANULE_MIN 8u
#define TIDE_SEG_GRANULE_MAX (1u << 20)
/** Default granule: one cache line, so objects never share one. */
#define TIDE_SEG_GRANULE_DEFAULT 64u
/** Default capacity of the block table (free extents + live allocations). */
#define TIDE_SEG_MAX_BLOCKS_DEFAULT (1u << 20)
/** Largest block table accepted (nodes; each node is 72 bytes). */
#define TIDE_SEG_MAX_BLOCKS_MAX (1u << 30)
/** Second-level subdivisions per first-level class (log2). */
#define TIDE_SEG_SL_SHIFT 6
/** First-level classes: enough for TIDE_SEG_SIZE_MAX in 8-byte granules. */
#define TIDE_SEG_FL_COUNT 58
/** Number of size classes (free lists). */
#define TIDE_SEG_CLASSES (TIDE_SEG_FL_COUNT << TIDE_SEG_SL_SHIFT)

/** An allocator for one segment; opaque. */
struct tide_seg;

/** Options for tide_seg_create(); fill with tide_seg_opts_init() first. */
struct tide_seg_opts {
	size_t opts_size;    /**< sizeof(struct tide_seg_opts) as the caller knows it */
	uint64_t size;       /**< segment size in bytes: a multiple of granule, no default */
	uint32_t granule;    /**< minimum unit in bytes, power of two in [MIN, MAX]; default 64 */
	uint32_t max_blocks; /**< block table capacity, >= 2; default 1 Mi nodes */
};

/** Counters of one segment; see tide_seg_stats_get(). All sizes in bytes. */
struct tide_seg_stats {
	uint64_t size;             /**< segment size */
	uint64_t used;             /**< bytes in live allocations (granule-rounded sizes) */
	uint64_t free;             /**< size - used */
	uint64_t largest_free;     /**< largest free extent (exact) */
	uint64_t live_allocs;      /**< live allocations */
	uint64_t free_extents;     /**< free extents (never two adjacent) */
	uint64_t blocks_used;      /**< block table nodes in use: live_allocs + free_extents */
	uint64_t max_blocks;       /**< block table capacity */
	double fragmentation;      /**< 1 - largest_free / free; 0 when free == 0 */
	uint64_t alloc_failures;   /**< failed allocs of valid requests: nospc + nomem */
	uint64_t alloc_fail_nospc; /**< allocs that failed with -ENOSPC */
	uint64_t alloc_fail_nomem; /**< allocs that failed with -ENOMEM (block table full) */
	uint64_t free_rejected;    /**< frees rejected with -ENOENT or -EINVAL */
};

/**
 * Fill opts with defaults (granule 64, max_blocks 1 Mi, size 0 which the
 * caller must set).
 * \param opts       Options to fill.
 * \param opts_size  sizeof(*opts) as compiled by the caller; fields beyond it are not written.
 * Thread: any.
 */
void tide_seg_opts_init(struct tide_seg_opts *opts, size_t opts_size);

/**
 * Create an allocator for a segment of opts->size bytes, all free.
 * Allocates the block table (max_blocks nodes of 72 bytes, touched lazily)
 * and the class heads; nothing is allocated after this call.
 * \param opts       Options (see tide_seg_opts_init()); copied, not kept.
 * \param[out] out   New allocator on success; untouched on failure.
 * \return 0; -EINVAL opts NULL, opts_size too small, size 0, size not a
 *         multiple of granule or > TIDE_SEG_SIZE_MAX, granule not a power of
 *         two in range, max_blocks < 2 or > TIDE_SEG_MAX_BLOCKS_MAX;
 *         -ENOMEM the tables cannot be allocated.
 * Thread: any. Ownership: the caller destroys it with tide_seg_destroy().
 */
int tide_seg_create(const struct tide_seg_opts *opts, struct tide_seg **out);

/**
 * Free the allocator and its tables. Live allocations are forgotten.
 * \param seg  Allocator, or NULL (no-op).
 * Thread: the owner; no other call on seg may run or follow.
 */
void tide_seg_destroy(struct tide_seg *seg);

/**
 * Forget every allocation: the whole segment becomes one free extent.
 * Counters of failures are kept. O(TIDE_SEG_CLASSES), no allocation.
 * \param seg  Allocator.
 * Thread: the owner (caller serialises).
 */
void tide_seg_reset(struct tide_seg *seg);

/**
 * Allocate size bytes aligned to align.
 * The extent reserved is size rounded up to the granule; its offset is a
 * multiple of max(align, granule).
 * \param seg       Allocator.
 * \param size      Bytes, 1 .. segment size.
 * \param align     Power of two, 1 .. segment size.
 * \param[out] off  Offset of the extent on success; untouched on failure.
 * \return 0; -EINVAL size 0, size > segment size, align not a power of two
 *         or > segment size, off NULL; -ENOSPC no free extent fits (see
 *         the fit guarantee in the file comment); -ENOMEM an extent fits
 *         but splitting it needs block-table nodes and the table is full
 *         (free something or create with a larger max_blocks).
 *         Nothing changes on failure except the failure counters.
 * Thread: the owner (caller serialises). Cost: O(log n) worst case.
 */
int tide_seg_alloc(struct tide_seg *seg, uint64_t size, uint64_t align, uint64_t *off);

/**
 * Reserve the extent [off, off + size rounded up to the granule): the one a
 * table being rebuilt from a log or a snapshot knows a replica occupies.
 * \param seg   Allocator.
 * \param off   Offset, a multiple of the granule.
 * \param size  Bytes, 1 .. segment size - off.
 * \return 0; -EINVAL size 0, off unaligned, the extent runs past the end;
 *         -EEXIST part of the extent is already allocated; -ENOMEM the
 *         block table is full (see tide_seg_alloc()). Nothing changes on
 *         failure except the failure counters.
 * Thread: the owner (caller serialises). Cost: O(log n) worst case.
 */
int tide_seg_alloc_at(struct tide_seg *seg, uint64_t off, uint64_t size);

/**
 * Free the live allocation that starts at off and merge it with its free
 * neighbours.
 * \param seg  Allocator.
 * \param off  Offset returned by tide_seg_alloc().
 * \return 0; -EINVAL off >= segment size (cannot belong to this segment);
 *         -ENOENT off is inside the segment but not the start of a live
 *         allocation (double free, interior or never-allocated offset).
 *         A rejected free changes nothing but the free_rejected counter.
 * Thread: the owner (caller serialises). Cost: O(log n) worst case.
 */
int tide_seg_free(struct tide_seg *seg, uint64_t off);

/**
 * Size of the extent reserved by the live allocation at off (the requested
 * size rounded up to the granule).
 * \param seg        Allocator.
 * \param off        Offset returned by tide_seg_alloc().
 * \param[out] size  Extent size on success; untouched on failure.
 * \return 0; -EINVAL off >= segment size or size NULL; -ENOENT off is not
 *         the start of a live allocation.
 * Thread: the owner (caller serialises). Cost: O(log n) worst case.
 */
int tide_seg_alloc_size(const struct tide_seg *seg, uint64_t off, uint64_t *size);

/**
 * Read the counters. Finding the largest free extent takes two bitmap
 * lookups (O(1)) to find the top non-empty class, then a walk of that one
 * class's list for the exact maximum (extents in one class differ by under
 * 1/64, and there are rarely more than a few at the top).
 * \param seg       Allocator.
 * \param[out] st   Filled completely.
 * Thread: the owner (caller serialises).
 */
void tide_seg_stats_get(const struct tide_seg *seg, struct tide_seg_stats *st);

/**
 * Check every internal invariant: the blocks tile [0, size) in address
 * order, no two free blocks are adjacent, every free block is in the list
 * of its class and the bitmaps match, the tree holds exactly the live
 * blocks, and the counters match. O(blocks); for tests and debugging.
 * \param seg  Allocator.
 * \return 0 consistent; -EUCLEAN an invariant is broken (logged at ERR).
 * Thread: the owner (caller serialises).
 */
int tide_seg_check(const struct tide_seg *seg);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_SEG_H */
