/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segment allocator: TLSF over offsets, with an offset-keyed red-black tree
 * of live blocks. The design, bounds and fit guarantee are in tide_seg.h;
 * comments here say why a step is the way it is.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <bsd/sys/tree.h>

#include "tide_log.h"
#include "tide_seg.h"

#define SL_SHIFT TIDE_SEG_SL_SHIFT
#define SL_COUNT (1u << SL_SHIFT)
#define FL_COUNT TIDE_SEG_FL_COUNT

_Static_assert(FL_COUNT <= 64, "first-level bitmap is one u64");
_Static_assert(SL_COUNT == 64, "second-level bitmaps are one u64 each");

enum blk_state {
	BLK_FREE = 1, /* in a class list */
	BLK_USED = 2, /* in the live tree */
};

/*
 * One extent of the segment. A node is either free (linked in the list of
 * its size class) or used (linked in the live tree), never both, so the two
 * linkages share storage.
 */
struct blk {
	/* The key and the tree links first: a tree descent reads only these 24 bytes. */
	uint64_t off; /* first byte of the extent */
	union {
		struct {
			struct blk *next;
			struct blk *prev;
		} fl;             /* BLK_FREE: class list; next also chains spare nodes */
		RB_ENTRY(blk) rb; /* BLK_USED: live tree */
	} u;
	uint64_t size;         /* bytes, a non-zero multiple of the granule */
	struct blk *phys_prev; /* extent ending at off, NULL at offset 0 */
	struct blk *phys_next; /* extent starting at off + size, NULL at the end */
	uint32_t state;        /* enum blk_state */
};

RB_HEAD(blk_tree, blk);

struct tide_seg {
	/* Hot: read by every alloc/free. */
	uint64_t fl_map;           /* bit fl set iff sl_map[fl] != 0 */
	uint64_t sl_map[FL_COUNT]; /* bit sl set iff heads[fl][sl] != NULL */
	struct blk_tree live;      /* used blocks by offset */
	struct blk *spare;         /* released nodes (LIFO: the warmest is reused first) */
	uint32_t hw;               /* nodes[0..hw) have been handed out at least once */
	uint32_t max_blocks;
	uint64_t blocks_used;
	unsigned gshift; /* log2(granule) */
	uint64_t size;
	uint64_t used;
	uint64_t live_allocs;
	uint64_t free_extents;
	struct blk *first; /* block at offset 0 */
	struct blk *nodes; /* the block table, max_blocks nodes (mmap()ed) */
	size_t nodes_bytes;
	/* Cold counters. */
	uint64_t fail_nospc;
	uint64_t fail_nomem;
	uint64_t free_rejected;
	struct blk *heads[FL_COUNT][SL_COUNT];
};

static inline int
blk_cmp(const struct blk *a, const struct blk *b)
{
	return (a->off > b->off) - (a->off < b->off);
}

/*
 * RB_GENERATE_STATIC would need libbsd's __unused, which its cdefs.h leaves
 * undefined on Linux; give the same attributes directly.
 */
RB_GENERATE_INTERNAL(blk_tree, blk, u.rb, blk_cmp, __attribute__((unused)) static)

static inline unsigned
log2_u64(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

/*
 * Class of a size of u granules (u >= 1). Sizes below SL_COUNT granules get
 * one exact class each (fl 0); above, class fl covers [2^(fl+5), 2^(fl+6))
 * split into 64 equal steps, so sizes in one class differ by < 1/64.
 */
static inline void
mapping(uint64_t u, unsigned *fl, unsigned *sl)
{
	if (u < SL_COUNT) {
		*fl = 0;
		*sl = (unsigned)u;
	} else {
		unsigned l = log2_u64(u);

		*fl = l - (SL_SHIFT - 1);
		*sl = (unsigned)(u >> (l - SL_SHIFT)) - SL_COUNT;
	}
}

/* Round u up to the lower bound of a class, so every block in that class or above is >= u. */
static inline uint64_t
round_class(uint64_t u)
{
	if (u >= SL_COUNT)
		u += (UINT64_C(1) << (log2_u64(u) - SL_SHIFT)) - 1;
	return u;
}

static struct blk *
node_get(struct tide_seg *seg)
{
	struct blk *b = seg->spare;

	if (b != NULL)
		seg->spare = b->u.fl.next;
	else
		b = &seg->nodes[seg->hw++];
	seg->blocks_used++;
	return b;
}

static void
node_put(struct tide_seg *seg, struct blk *b)
{
	b->state = 0;
	b->u.fl.next = seg->spare;
	seg->spare = b;
	seg->blocks_used--;
}

static void
list_insert(struct tide_seg *seg, struct blk *b)
{
	unsigned fl, sl;
	struct blk *h;

	mapping(b->size >> seg->gshift, &fl, &sl);
	h = seg->heads[fl][sl];
	b->u.fl.next = h;
	b->u.fl.prev = NULL;
	if (h != NULL)
		h->u.fl.prev = b;
	seg->heads[fl][sl] = b;
	seg->sl_map[fl] |= UINT64_C(1) << sl;
	seg->fl_map |= UINT64_C(1) << fl;
	b->state = BLK_FREE;
	seg->free_extents++;
}

static void
list_remove(struct tide_seg *seg, struct blk *b)
{
	struct blk *next = b->u.fl.next;
	struct blk *prev = b->u.fl.prev;

	if (next != NULL)
		next->u.fl.prev = prev;
	if (prev != NULL) {
		prev->u.fl.next = next;
	} else {
		unsigned fl, sl;

		mapping(b->size >> seg->gshift, &fl, &sl);
		seg->heads[fl][sl] = next;
		if (next == NULL) {
			seg->sl_map[fl] &= ~(UINT64_C(1) << sl);
			if (seg->sl_map[fl] == 0)
				seg->fl_map &= ~(UINT64_C(1) << fl);
		}
	}
	seg->free_extents--;
}

/* Remove b (never the block at offset 0) from the address list. */
static void
phys_unlink(struct blk *b)
{
	b->phys_prev->phys_next = b->phys_next;
	if (b->phys_next != NULL)
		b->phys_next->phys_prev = b->phys_prev;
}

/* Good fit: head of the first non-empty class whose every block is >= u granules. O(1). */
static struct blk *
find_fit(const struct tide_seg *seg, uint64_t u)
{
	unsigned fl, sl;
	uint64_t sm, fm;

	mapping(round_class(u), &fl, &sl);
	if (fl >= FL_COUNT)
		return NULL;
	sm = seg->sl_map[fl] & (~UINT64_C(0) << sl);
	if (sm == 0) {
		fm = fl + 1 < FL_COUNT ? seg->fl_map & (~UINT64_C(0) << (fl + 1)) : 0;
		if (fm == 0)
			return NULL;
		fl = (unsigned)__builtin_ctzll(fm);
		sm = seg->sl_map[fl];
	}
	return seg->heads[fl][__builtin_ctzll(sm)];
}

/*
 * Second chance after find_fit() failed. Two cases where an extent fits
 * although no class at or above the rounded request has one: the head of
 * the request's own class may be big enough (an exact fit of a size that is
 * not a class boundary, e.g. the whole of a segment whose size is not a
 * power of two), and with a large alignment the padded request may exceed
 * every extent although one holds an aligned fit (align == segment size on
 * an empty segment is the extreme). Checks the head of each non-empty
 * class from the request's own class up: at most TIDE_SEG_CLASSES heads,
 * and with align <= granule only the one head, since every class above it
 * is then empty.
 */
static struct blk *
find_aligned_head(const struct tide_seg *seg, uint64_t bytes, uint64_t align)
{
	unsigned fl, sl;
	uint64_t sm, fm;

	mapping(bytes >> seg->gshift, &fl, &sl);
	sm = seg->sl_map[fl] & (~UINT64_C(0) << sl);
	for (;;) {
		while (sm != 0) {
			struct blk *b = seg->heads[fl][__builtin_ctzll(sm)];
			uint64_t start = (b->off + align - 1) & ~(align - 1);

			if (start - b->off <= b->size && b->size - (start - b->off) >= bytes)
				return b;
			sm &= sm - 1;
		}
		fm = fl + 1 < FL_COUNT ? seg->fl_map & (~UINT64_C(0) << (fl + 1)) : 0;
		if (fm == 0)
			return NULL;
		fl = (unsigned)__builtin_ctzll(fm);
		sm = seg->sl_map[fl];
	}
}

/*
 * Insert a block that just became used. Its in-order neighbours in the tree
 * are the nearest used blocks in address order, at most two steps away on
 * the address list (two free blocks are never adjacent). The predecessor p
 * either has no right child, and b becomes it; or p's right subtree starts
 * at the successor n, whose left child is then free for b. So no O(log n)
 * descent: only the rebalancing of RB_INSERT_COLOR (amortised O(1), at
 * most O(log n) rotations and recolourings) remains.
 */
static void
live_insert(struct tide_seg *seg, struct blk *b)
{
	struct blk *p = b->phys_prev, *n = b->phys_next;

	if (p != NULL && p->state != BLK_USED)
		p = p->phys_prev;
	if (n != NULL && n->state != BLK_USED)
		n = n->phys_next;
	if (p != NULL && RB_RIGHT(p, u.rb) == NULL) {
		RB_SET(b, p, u.rb);
		RB_RIGHT(p, u.rb) = b;
	} else if (n != NULL) {
		RB_SET(b, n, u.rb);
		RB_LEFT(n, u.rb) = b;
	} else {
		RB_SET(b, NULL, u.rb);
		RB_ROOT(&seg->live) = b;
	}
	blk_tree_RB_INSERT_COLOR(&seg->live, b);
}

static struct blk *
live_find(const struct tide_seg *seg, uint64_t off)
{
	struct blk *b = RB_ROOT(&seg->live);

	while (b != NULL) {
		if (off < b->off)
			b = RB_LEFT(b, u.rb);
		else if (off > b->off)
			b = RB_RIGHT(b, u.rb);
		else
			return b;
	}
	return NULL;
}

void
tide_seg_opts_init(struct tide_seg_opts *opts, size_t opts_size)
{
	struct tide_seg_opts d = {
		.opts_size = opts_size,
		.size = 0,
		.granule = TIDE_SEG_GRANULE_DEFAULT,
		.max_blocks = TIDE_SEG_MAX_BLOCKS_DEFAULT,
	};

	if (opts == NULL)
		return;
	if (opts_size > sizeof(d))
		opts_size = sizeof(d);
	memcpy(opts, &d, opts_size);
}

void
tide_seg_reset(struct tide_seg *seg)
{
	struct blk *b;

	memset(seg->heads, 0, sizeof(seg->heads));
	memset(seg->sl_map, 0, sizeof(seg->sl_map));
	seg->fl_map = 0;
	RB_INIT(&seg->live);
	seg->spare = NULL;
	seg->hw = 0;
	seg->blocks_used = 0;
	seg->used = 0;
	seg->live_allocs = 0;
	seg->free_extents = 0;

	b = node_get(seg);
	b->off = 0;
	b->size = seg->size;
	b->phys_prev = NULL;
	b->phys_next = NULL;
	seg->first = b;
	list_insert(seg, b);
}

int
tide_seg_create(const struct tide_seg_opts *opts, struct tide_seg **out)
{
	struct tide_seg *seg;

	if (opts == NULL || out == NULL || opts->opts_size < sizeof(*opts)) {
		TIDE_LOG(ERR, "create: missing opts/out or opts_size too small");
		return -EINVAL;
	}
	if (opts->granule < TIDE_SEG_GRANULE_MIN || opts->granule > TIDE_SEG_GRANULE_MAX ||
	    (opts->granule & (opts->granule - 1)) != 0) {
		TIDE_LOG(ERR, "create: granule %" PRIu32 " not a power of two in [%u, %u]",
			 opts->granule, TIDE_SEG_GRANULE_MIN, TIDE_SEG_GRANULE_MAX);
		return -EINVAL;
	}
	if (opts->size == 0 || opts->size > TIDE_SEG_SIZE_MAX ||
	    (opts->size & (opts->granule - 1)) != 0) {
		TIDE_LOG(ERR, "create: size %" PRIu64 " is 0, > 2^62 or not a multiple of %" PRIu32,
			 opts->size, opts->granule);
		return -EINVAL;
	}
	if (opts->max_blocks < 2 || opts->max_blocks > TIDE_SEG_MAX_BLOCKS_MAX) {
		TIDE_LOG(ERR, "create: max_blocks %" PRIu32 " outside [2, %u]", opts->max_blocks,
			 TIDE_SEG_MAX_BLOCKS_MAX);
		return -EINVAL;
	}

	seg = calloc(1, sizeof(*seg));
	if (seg == NULL)
		return -ENOMEM;
	/* Mapped, not malloc()ed: node_get() initialises every field a node's state
	 * needs, and a large table (the master's default is 4 Mi nodes, 288 MiB)
	 * should cost only the pages of nodes handed out. With MALLOC_PERTURB_ set
	 * (meson test) glibc writes every byte of a malloc() and zeroes every byte
	 * of a calloc(), even of fresh mmap()ed memory: seconds per segment on a
	 * loaded VM, which an HA leader rebuilding its table pays per segment. */
	seg->nodes_bytes = (size_t)opts->max_blocks * sizeof(struct blk);
	seg->nodes = mmap(NULL, seg->nodes_bytes, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (seg->nodes == MAP_FAILED)
		seg->nodes = NULL;
	if (seg->nodes == NULL) {
		TIDE_LOG(ERR, "create: cannot allocate %" PRIu32 " block nodes", opts->max_blocks);
		free(seg);
		return -ENOMEM;
	}
	seg->size = opts->size;
	seg->gshift = log2_u64(opts->granule);
	seg->max_blocks = opts->max_blocks;
	tide_seg_reset(seg);
	*out = seg;
	return 0;
}

void
tide_seg_destroy(struct tide_seg *seg)
{
	if (seg == NULL)
		return;
	if (seg->nodes != NULL)
		munmap(seg->nodes, seg->nodes_bytes);
	free(seg);
}

/*
 * Make [start, start + bytes) of the free block b a used block: the pad
 * before it and the rest after it stay free as blocks of their own. The
 * caller checked that the range lies inside b. -ENOMEM (nothing changed)
 * when the block table cannot hold the one or two new free nodes.
 */
static int
carve(struct tide_seg *seg, struct blk *b, uint64_t start, uint64_t bytes)
{
	uint64_t pad = start - b->off;
	uint64_t rem = b->size - pad - bytes;
	/* Neighbours of a free block are used (free ones merge), so pad and rem need new nodes. */
	unsigned nodes_needed = (pad != 0) + (rem != 0);

	if (seg->blocks_used + nodes_needed > seg->max_blocks) {
		seg->fail_nomem++;
		return -ENOMEM;
	}

	list_remove(seg, b);
	if (pad != 0) {
		struct blk *f = node_get(seg);

		f->off = b->off;
		f->size = pad;
		f->phys_prev = b->phys_prev;
		f->phys_next = b;
		if (f->phys_prev != NULL)
			f->phys_prev->phys_next = f;
		else
			seg->first = f;
		b->phys_prev = f;
		b->off = start;
		b->size -= pad;
		list_insert(seg, f);
	}
	if (rem != 0) {
		struct blk *r = node_get(seg);

		r->off = start + bytes;
		r->size = rem;
		r->phys_prev = b;
		r->phys_next = b->phys_next;
		if (r->phys_next != NULL)
			r->phys_next->phys_prev = r;
		b->phys_next = r;
		b->size = bytes;
		list_insert(seg, r);
	}
	b->state = BLK_USED;
	live_insert(seg, b);
	seg->used += bytes;
	seg->live_allocs++;
	return 0;
}

int
tide_seg_alloc(struct tide_seg *seg, uint64_t size, uint64_t align, uint64_t *off)
{
	uint64_t granule = UINT64_C(1) << seg->gshift;
	uint64_t bytes, need, start;
	struct blk *b;
	int rc;

	if (off == NULL || size == 0 || size > seg->size || align == 0 ||
	    (align & (align - 1)) != 0 || align > seg->size)
		return -EINVAL;
	/* size <= seg->size <= 2^62, so neither sum below can overflow. */
	bytes = (size + granule - 1) & ~(granule - 1);
	if (align < granule)
		align = granule;
	need = bytes + (align - granule);

	b = need <= seg->size ? find_fit(seg, need >> seg->gshift) : NULL;
	if (b == NULL)
		b = find_aligned_head(seg, bytes, align);
	if (b == NULL) {
		seg->fail_nospc++;
		return -ENOSPC;
	}

	start = (b->off + align - 1) & ~(align - 1);
	rc = carve(seg, b, start, bytes);
	if (rc != 0)
		return rc;
	*off = start;
	return 0;
}

/* The used block with the largest offset <= off, or NULL. O(log n). */
static struct blk *
live_floor(const struct tide_seg *seg, uint64_t off)
{
	struct blk *b = RB_ROOT(&seg->live), *best = NULL;

	while (b != NULL) {
		if (b->off <= off) {
			best = b;
			b = RB_RIGHT(b, u.rb);
		} else {
			b = RB_LEFT(b, u.rb);
		}
	}
	return best;
}

int
tide_seg_alloc_at(struct tide_seg *seg, uint64_t off, uint64_t size)
{
	uint64_t granule = UINT64_C(1) << seg->gshift;
	uint64_t bytes;
	struct blk *u, *b;

	if (size == 0 || size > seg->size || off >= seg->size || (off & (granule - 1)) != 0)
		return -EINVAL;
	bytes = (size + granule - 1) & ~(granule - 1);
	if (bytes > seg->size - off)
		return -EINVAL;
	/* The free block holding off follows the nearest used block at or before it
	 * (two free blocks are never adjacent), or is the first block. */
	u = live_floor(seg, off);
	if (u != NULL && off < u->off + u->size)
		return -EEXIST;
	b = u != NULL ? u->phys_next : seg->first;
	if (b == NULL || b->state != BLK_FREE || off < b->off || off + bytes > b->off + b->size)
		return -EEXIST;
	return carve(seg, b, off, bytes);
}

int
tide_seg_free(struct tide_seg *seg, uint64_t off)
{
	struct blk *b, *p, *n;

	if (off >= seg->size) {
		seg->free_rejected++;
		TIDE_LOG_RATELIMIT(WARN, 1,
				   "free: offset 0x%" PRIx64 " beyond segment size 0x%" PRIx64, off,
				   seg->size);
		return -EINVAL;
	}
	b = live_find(seg, off);
	if (b == NULL) {
		seg->free_rejected++;
		TIDE_LOG_RATELIMIT(
			WARN, 1,
			"free: offset 0x%" PRIx64 " is not a live allocation (double free?)", off);
		return -ENOENT;
	}
	RB_REMOVE(blk_tree, &seg->live, b);
	seg->used -= b->size;
	seg->live_allocs--;

	p = b->phys_prev;
	if (p != NULL && p->state == BLK_FREE) {
		list_remove(seg, p);
		p->size += b->size;
		phys_unlink(b);
		node_put(seg, b);
		b = p;
	}
	n = b->phys_next;
	if (n != NULL && n->state == BLK_FREE) {
		list_remove(seg, n);
		b->size += n->size;
		phys_unlink(n);
		node_put(seg, n);
	}
	list_insert(seg, b);
	return 0;
}

int
tide_seg_alloc_size(const struct tide_seg *seg, uint64_t off, uint64_t *size)
{
	const struct blk *b;

	if (size == NULL || off >= seg->size)
		return -EINVAL;
	b = live_find(seg, off);
	if (b == NULL)
		return -ENOENT;
	*size = b->size;
	return 0;
}

void
tide_seg_stats_get(const struct tide_seg *seg, struct tide_seg_stats *st)
{
	uint64_t largest = 0;

	if (seg->fl_map != 0) {
		unsigned fl = log2_u64(seg->fl_map);
		unsigned sl = log2_u64(seg->sl_map[fl]);
		const struct blk *b;

		for (b = seg->heads[fl][sl]; b != NULL; b = b->u.fl.next) {
			if (b->size > largest)
				largest = b->size;
		}
	}
	memset(st, 0, sizeof(*st));
	st->size = seg->size;
	st->used = seg->used;
	st->free = seg->size - seg->used;
	st->largest_free = largest;
	st->live_allocs = seg->live_allocs;
	st->free_extents = seg->free_extents;
	st->blocks_used = seg->blocks_used;
	st->max_blocks = seg->max_blocks;
	st->fragmentation = st->free == 0 ? 0.0 : 1.0 - (double)largest / (double)st->free;
	st->alloc_fail_nospc = seg->fail_nospc;
	st->alloc_fail_nomem = seg->fail_nomem;
	st->alloc_failures = seg->fail_nospc + seg->fail_nomem;
	st->free_rejected = seg->free_rejected;
}

#define CHECK(cond, ...)                                      \
	do {                                                  \
		if (!(cond)) {                                \
			TIDE_LOG(ERR, "check: " __VA_ARGS__); \
			return -EUCLEAN;                      \
		}                                             \
	} while (0)

/*
 * Black height of the subtree at b, or -1 when it breaks a red-black rule
 * (a red node with a red child, unequal black heights, a bad parent link).
 * Recursion depth <= 2*log2(n+1).
 */
static int
rb_black_height(const struct blk *b, const struct blk *parent)
{
	const struct blk *l, *r;
	int hl, hr;

	if (b == NULL)
		return 1;
	l = RB_LEFT(b, u.rb);
	r = RB_RIGHT(b, u.rb);
	if (RB_PARENT(b, u.rb) != parent)
		return -1;
	if (RB_COLOR(b, u.rb) == RB_RED && ((l != NULL && RB_COLOR(l, u.rb) == RB_RED) ||
					    (r != NULL && RB_COLOR(r, u.rb) == RB_RED)))
		return -1;
	hl = rb_black_height(l, b);
	hr = rb_black_height(r, b);
	if (hl < 0 || hl != hr)
		return -1;
	return hl + (RB_COLOR(b, u.rb) == RB_BLACK);
}

int
tide_seg_check(const struct tide_seg *seg)
{
	uint64_t granule = UINT64_C(1) << seg->gshift;
	uint64_t end = 0, n_free = 0, n_used = 0, used = 0, listed = 0, in_tree = 0;
	uint64_t last_off = 0;
	const struct blk *b, *prev = NULL;
	struct blk *t;
	unsigned fl, sl;

	CHECK(seg->first != NULL && seg->first->phys_prev == NULL, "no first block");
	for (b = seg->first; b != NULL; prev = b, b = b->phys_next) {
		CHECK(b->off == end, "block at 0x%" PRIx64 " expected 0x%" PRIx64, b->off, end);
		CHECK(b->phys_prev == prev, "bad back link at 0x%" PRIx64, b->off);
		CHECK(b->size != 0 && (b->size & (granule - 1)) == 0 &&
			      b->size <= seg->size - b->off,
		      "bad size 0x%" PRIx64 " at 0x%" PRIx64, b->size, b->off);
		CHECK(b->state == BLK_FREE || b->state == BLK_USED, "bad state at 0x%" PRIx64,
		      b->off);
		if (b->state == BLK_FREE) {
			CHECK(prev == NULL || prev->state != BLK_FREE,
			      "adjacent free blocks at 0x%" PRIx64, b->off);
			n_free++;
		} else {
			n_used++;
			used += b->size;
		}
		end = b->off + b->size;
		CHECK(n_free + n_used <= seg->blocks_used, "address list longer than block count");
	}
	CHECK(end == seg->size, "blocks end at 0x%" PRIx64 " not 0x%" PRIx64, end, seg->size);
	CHECK(n_free == seg->free_extents, "free extents %" PRIu64 " counted %" PRIu64,
	      seg->free_extents, n_free);
	CHECK(n_used == seg->live_allocs, "live %" PRIu64 " counted %" PRIu64, seg->live_allocs,
	      n_used);
	CHECK(used == seg->used, "used %" PRIu64 " counted %" PRIu64, seg->used, used);
	CHECK(n_free + n_used == seg->blocks_used, "blocks_used %" PRIu64 " counted %" PRIu64,
	      seg->blocks_used, n_free + n_used);

	for (fl = 0; fl < FL_COUNT; fl++) {
		CHECK(((seg->fl_map >> fl) & 1) == (seg->sl_map[fl] != 0), "fl bit %u wrong", fl);
		for (sl = 0; sl < SL_COUNT; sl++) {
			const struct blk *h = seg->heads[fl][sl];

			CHECK(((seg->sl_map[fl] >> sl) & 1) == (h != NULL), "sl bit %u/%u wrong",
			      fl, sl);
			CHECK(h == NULL || h->u.fl.prev == NULL, "list %u/%u head has prev", fl,
			      sl);
			for (b = h; b != NULL; b = b->u.fl.next) {
				unsigned bfl, bsl;

				CHECK(b->state == BLK_FREE, "used block 0x%" PRIx64 " in list",
				      b->off);
				mapping(b->size >> seg->gshift, &bfl, &bsl);
				CHECK(bfl == fl && bsl == sl, "block 0x%" PRIx64 " in wrong class",
				      b->off);
				CHECK(b->u.fl.next == NULL || b->u.fl.next->u.fl.prev == b,
				      "list %u/%u bad back link", fl, sl);
				CHECK(++listed <= n_free,
				      "free lists hold more than the free blocks");
			}
		}
	}
	CHECK(listed == n_free, "free lists hold %" PRIu64 " of %" PRIu64, listed, n_free);

	RB_FOREACH(t, blk_tree, (struct blk_tree *)&seg->live)
	{
		CHECK(t->state == BLK_USED, "free block 0x%" PRIx64 " in tree", t->off);
		CHECK(in_tree == 0 || t->off > last_off, "tree out of order at 0x%" PRIx64, t->off);
		last_off = t->off;
		CHECK(++in_tree <= n_used, "tree holds more than the used blocks");
	}
	CHECK(in_tree == n_used, "tree holds %" PRIu64 " of %" PRIu64, in_tree, n_used);
	CHECK(RB_ROOT(&seg->live) == NULL || RB_COLOR(RB_ROOT(&seg->live), u.rb) == RB_BLACK,
	      "tree root is red");
	CHECK(rb_black_height(RB_ROOT(&seg->live), NULL) > 0, "tree breaks a red-black rule");
	return 0;
}
