/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-seg-bench: the segment allocator (store/seg) against glibc
 * malloc/free on the same pre-generated operation sequences.
 *
 * Every workload is generated first as a list of operations (alloc id
 * size | free id), then replayed against tide_seg_alloc/free and against
 * malloc/free in the same process: one untimed warm-up replay of each, then
 * --runs timed replays alternating the two, keeping the best. The figure is
 * ns per alloc+free pair: replay time / number of allocs (every sequence
 * frees everything it allocated). Neither side touches the memory it gets:
 * this measures allocator bookkeeping only (malloc does write its own chunk
 * headers, which is part of its cost).
 *
 * Workloads:
 *  - fixed 64 B, 4 KiB, 1 MiB: "pair" = alloc then free at once;
 *    "batch" = alloc 1024, then free the 1024 in allocation order.
 *  - rollout mix: shards modelled on miles-usage.md section 1.5, see
 *    gen_shard() below. Objects of a shard are put together; a step puts
 *    --dp shards (default about a segment's worth); each shard is freed one or two steps later
 * (async training keeps 2 batches alive, 3 briefly; section 1.6). When the live bytes would pass
 * 90% of the segment (the master's eviction high watermark, section 1.6), the oldest shards are
 * freed first, so the segment stays at ~90% fill. After --ops operations every live shard is freed.
 * Generation runs past --ops until the fill is back at ~90%; the fragmentation line is taken there,
 * before the final drain.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide_clock.h"
#include "tide_seg.h"
#include "tide_nodeenv.h"
#include "tide_rng.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

#define FREE_OP  UINT64_MAX /* op.size of a free */
#define BATCH    1024u
#define FILL_PCT 90u

struct op {
	uint64_t size; /* bytes to allocate, or FREE_OP */
	uint32_t id;   /* object id, dense from 0 */
};

struct seq {
	struct op *ops;
	size_t n, cap;
	uint32_t ids;     /* objects allocated */
	size_t mark;      /* ops before the final drain */
	uint64_t bytes;   /* sum of allocated sizes */
	uint64_t small;   /* objects <= 256 B */
	uint64_t largest; /* largest object */
};

struct bench_opts {
	uint64_t ops;
	uint64_t seed;
	uint64_t seg_size;
	unsigned runs;
	unsigned dp; /* 0: one segment's worth of shards per step */
};

static uint64_t rng_state;

static uint64_t
rng(void)
{
	return tide_rng_next(&rng_state);
}

static uint64_t
rng_range(uint64_t lo, uint64_t hi)
{
	return lo + rng() % (hi - lo + 1);
}

static void
seq_push(struct seq *s, uint64_t size, uint32_t id)
{
	if (s->n == s->cap) {
		s->cap = s->cap != 0 ? s->cap * 2 : 1 << 16;
		s->ops = realloc(s->ops, s->cap * sizeof(s->ops[0]));
		if (s->ops == NULL) {
			fprintf(stderr, "tide-seg-bench: out of memory for the op sequence\n");
			exit(1);
		}
	}
	s->ops[s->n].size = size;
	s->ops[s->n].id = id;
	s->n++;
	if (size != FREE_OP) {
		s->bytes += size;
		s->small += size <= 256;
		if (size > s->largest)
			s->largest = size;
	}
}

static uint32_t
seq_alloc(struct seq *s, uint64_t size)
{
	uint32_t id = s->ids++;

	seq_push(s, size, id);
	return id;
}

static void
seq_free(struct seq *s, uint32_t id)
{
	seq_push(s, FREE_OP, id);
}

static void
gen_fixed_pair(struct seq *s, uint64_t size, uint64_t ops)
{
	uint64_t i;

	for (i = 0; i + 2 <= ops; i += 2)
		seq_free(s, seq_alloc(s, size));
	s->mark = s->n;
}

static void
gen_fixed_batch(struct seq *s, uint64_t size, uint64_t ops, unsigned batch)
{
	uint64_t done = 0;

	while (done + 2 * batch <= ops) {
		uint32_t first = s->ids;
		unsigned i;

		for (i = 0; i < batch; i++)
			seq_alloc(s, size);
		for (i = 0; i < batch; i++)
			seq_free(s, first + i);
		done += 2 * batch;
	}
	s->mark = s->n;
}

/*
 * One DP shard of a rollout step, after miles-usage.md section 1.5:
 *
 *  scenario (weight)        objects  bytes     what
 *  docs example (45%)         34     ~17.7 KB  manifest ~9.7 KB, meta ~3 KB,
 *                                              32 scalars/small tensors 16-256 B
 *  dense GRPO (45%)           34     ~2.2 MiB  32 samples, P=512, R uniform 1800-3600:
 *                                              tokens 8(P+R)*32 (~0.8 MiB), loss mask
 *                                              and log-probs 8R*32 each (~0.7 MiB),
 *                                              5 per-sample arrays 1-16 KiB,
 *                                              24 scalars 16-256 B, meta ~3 KB,
 *                                              manifest ~10 KB
 *  MoE with R3 (10%)          41     ~150 MiB  dense GRPO + routed experts
 *                                              4(P+R)*48*8*32 bytes, written as 64 MiB
 *                                              chunks (3: 64, 64, rest), + 4 small
 *
 * So ~71% of objects are <= 256 B and the largest is 64 MiB; by bytes the
 * MoE chunks dominate. Objects are put in field order, then meta, then the
 * manifest, as put_bundle does. Returns the shard's bytes; ids go to out.
 */
static uint64_t
gen_shard(struct seq *s, uint32_t *out, unsigned *n_out)
{
	uint64_t p = rng() % 100, bytes = 0, sz;
	unsigned n = 0, i;

#define PUT(size_expr)                       \
	do {                                 \
		sz = (size_expr);            \
		out[n++] = seq_alloc(s, sz); \
		bytes += sz;                 \
	} while (0)

	if (p < 45) {
		for (i = 0; i < 32; i++)
			PUT(rng_range(16, 256));
		PUT(rng_range(2500, 3500));  /* meta */
		PUT(rng_range(8000, 11500)); /* manifest */
	} else {
		uint64_t prompt = 512, resp = rng_range(1800, 3600), samples = 32;

		for (i = 0; i < 24; i++) {
			PUT(rng_range(16, 256));
			if (i == 4)
				PUT(8 * (prompt + resp) * samples); /* tokens.data */
			if (i == 8)
				PUT(8 * resp * samples); /* loss_mask.data */
			if (i == 12)
				PUT(8 * resp * samples); /* log_probs.data */
			if (i % 5 == 1)
				PUT(rng_range(KiB, 16 * KiB)); /* per-sample arrays */
		}
		if (p >= 90) {
			uint64_t r3 = 4 * (prompt + resp) * 48 * 8 * samples;

			while (r3 > 0) {
				uint64_t c = r3 > 64 * MiB ? 64 * MiB : r3;

				PUT(c);
				r3 -= c;
			}
			for (i = 0; i < 4; i++)
				PUT(rng_range(16, 256));
		}
		PUT(rng_range(2500, 3500));
		PUT(rng_range(8000, 11500));
	}
#undef PUT
	*n_out = n;
	return bytes;
}

#define SHARD_MAX 64

struct shard {
	uint32_t ids[SHARD_MAX];
	unsigned n;
	uint64_t bytes;
	uint64_t free_step; /* step at whose start it is freed */
};

static void
shard_free(struct seq *s, struct shard *sh)
{
	unsigned i;

	for (i = 0; i < sh->n; i++)
		seq_free(s, sh->ids[i]);
}

static void
gen_rollout(struct seq *s, const struct bench_opts *o)
{
	uint64_t limit = o->seg_size / 100 * FILL_PCT, live = 0, step;
	/* Live shards in put order: a ring buffer, oldest at head. */
	size_t cap = 1 << 16, head = 0, count = 0, i;
	struct shard *ring = calloc(cap, sizeof(*ring));

	if (ring == NULL) {
		fprintf(stderr, "tide-seg-bench: out of memory\n");
		exit(1);
	}
	/*
	 * Run past --ops until the fill is back near the watermark, so the
	 * fragmentation snapshot is taken at ~90% fill, not just after the
	 * frees at a step boundary. Give up on that at 4x --ops (a segment
	 * the steps never fill).
	 */
#define DONE() (s->n >= o->ops && (live >= limit / 100 * 97 || s->n >= 4 * o->ops))
	for (step = 0; !DONE(); step++) {
		/* Shards whose lifetime ended: freed at the start of this step, in any order. */
		for (i = 0; i < count; i++) {
			struct shard *sh = &ring[(head + i) % cap];

			if (sh->n != 0 && sh->free_step <= step) {
				shard_free(s, sh);
				live -= sh->bytes;
				sh->n = 0;
			}
		}
		while (count > 0 && ring[head].n == 0) {
			head = (head + 1) % cap;
			count--;
		}
		for (unsigned d = 0; d < o->dp && !DONE(); d++) {
			struct shard sh;

			sh.bytes = gen_shard(s, sh.ids, &sh.n);
			sh.free_step = step + 1 + rng() % 2;
			/* Over the watermark: evict the oldest live shards first. */
			while (live + sh.bytes > limit && count > 0) {
				struct shard *old = &ring[head];

				if (old->n != 0) {
					shard_free(s, old);
					live -= old->bytes;
				}
				head = (head + 1) % cap;
				count--;
			}
			if (count == cap) {
				fprintf(stderr, "tide-seg-bench: too many live shards\n");
				exit(1);
			}
			ring[(head + count) % cap] = sh;
			count++;
			live += sh.bytes;
		}
	}
#undef DONE
	s->mark = s->n;
	for (i = 0; i < count; i++) {
		struct shard *sh = &ring[(head + i) % cap];

		if (sh->n != 0)
			shard_free(s, sh);
	}
	free(ring);
}

/* Replays ops [0, end); returns the failed allocs. offs is indexed by id. */
static uint64_t
replay_tide(struct tide_seg *seg, const struct seq *s, size_t end, uint64_t *offs)
{
	uint64_t fails = 0;
	size_t i;

	for (i = 0; i < end; i++) {
		const struct op *op = &s->ops[i];

		if (op->size != FREE_OP) {
			if (tide_seg_alloc(seg, op->size, 1, &offs[op->id]) != 0) {
				offs[op->id] = UINT64_MAX;
				fails++;
			}
		} else if (offs[op->id] != UINT64_MAX) {
			tide_seg_free(seg, offs[op->id]);
		}
	}
	return fails;
}

static uint64_t
replay_malloc(const struct seq *s, void **ptrs)
{
	uint64_t fails = 0;
	size_t i;

	for (i = 0; i < s->n; i++) {
		const struct op *op = &s->ops[i];

		if (op->size != FREE_OP) {
			ptrs[op->id] = malloc(op->size);
			fails += ptrs[op->id] == NULL;
		} else {
			free(ptrs[op->id]);
		}
	}
	return fails;
}

struct result {
	double tide_ns;
	double malloc_ns;
	uint64_t tide_fails;
	uint64_t malloc_fails;
};

static struct result
measure(struct tide_seg *seg, const struct seq *s, unsigned runs)
{
	struct result r = {.tide_ns = 1e30, .malloc_ns = 1e30};
	uint64_t *offs = malloc(s->ids * sizeof(*offs));
	void **ptrs = malloc(s->ids * sizeof(*ptrs));
	unsigned i;

	if (offs == NULL || ptrs == NULL) {
		fprintf(stderr, "tide-seg-bench: out of memory\n");
		exit(1);
	}
	/* Warm-up: page in both id arrays, the block table and malloc's arenas. */
	tide_seg_reset(seg);
	replay_tide(seg, s, s->n, offs);
	replay_malloc(s, ptrs);
	for (i = 0; i < runs; i++) {
		uint64_t t0, t1;
		double ns;

		tide_seg_reset(seg);
		t0 = tide_mono_ns();
		r.tide_fails = replay_tide(seg, s, s->n, offs);
		t1 = tide_mono_ns();
		ns = (double)(t1 - t0) / s->ids;
		if (ns < r.tide_ns)
			r.tide_ns = ns;

		t0 = tide_mono_ns();
		r.malloc_fails = replay_malloc(s, ptrs);
		t1 = tide_mono_ns();
		ns = (double)(t1 - t0) / s->ids;
		if (ns < r.malloc_ns)
			r.malloc_ns = ns;
	}
	free(offs);
	free(ptrs);
	return r;
}

static void
row(const char *name, const struct seq *s, const struct result *r)
{
	printf("%-30s %9" PRIu32 " %10.1f %10.1f %8.2f", name, s->ids, r->tide_ns, r->malloc_ns,
	       r->tide_ns / r->malloc_ns);
	if (r->tide_fails != 0 || r->malloc_fails != 0)
		printf("   (failed allocs: tide %" PRIu64 ", malloc %" PRIu64 ")", r->tide_fails,
		       r->malloc_fails);
	printf("\n");
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: tide-seg-bench [--ops N] [--seed S] [--segment-size SIZE] [--runs R]"
		   " [--dp D]\n"
		   "  --ops N            operations per workload (default 1000000)\n"
		   "  --seed S           generator seed (default 1)\n"
		   "  --segment-size SZ  segment bytes, suffixes K M G T (default 4G)\n"
		   "  --runs R           timed runs, best kept (default 5)\n"
		   "  --dp D             rollout shards per step (default: segment size / 16 MiB,\n"
		   "                     about one segment's worth per step, in [8, 65536])\n");
}

static int
parse_args(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{"ops", required_argument, NULL, 'o'},
		{"seed", required_argument, NULL, 's'},
		{"segment-size", required_argument, NULL, 'z'},
		{"runs", required_argument, NULL, 'r'},
		{"dp", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		uint64_t v;

		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == '?' || tide_nodeenv_parse_size(optarg, &v) != 0) {
			usage(stderr);
			return -EINVAL;
		}
		switch (c) {
		case 'o':
			o->ops = v;
			break;
		case 's':
			o->seed = v;
			break;
		case 'z':
			o->seg_size = v;
			break;
		case 'r':
			o->runs = v == 0 || v > 1000 ? 0 : (unsigned)v;
			break;
		case 'd':
			if (v == 0 || v > 65536) {
				usage(stderr);
				return -EINVAL;
			}
			o->dp = (unsigned)v;
			break;
		}
	}
	if (optind != argc || o->ops < 2 || o->ops > (UINT64_C(1) << 31) || o->runs == 0 ||
	    o->seg_size < MiB || o->seg_size % 64 != 0) {
		usage(stderr);
		fprintf(stderr, "tide-seg-bench: ops in [2, 2^31], runs > 0, segment size "
				">= 1M and a multiple of 64\n");
		return -EINVAL;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct bench_opts o = {.ops = 1000000, .seed = 1, .seg_size = 4 * GiB, .runs = 5, .dp = 0};
	static const uint64_t fixed[] = {64, 4 * KiB, MiB};
	struct tide_seg_opts so;
	struct tide_seg *seg;
	struct tide_seg_stats st;
	struct result r;
	struct seq s;
	uint64_t *offs, fails;
	unsigned i;
	int rc;

	if (parse_args(argc, argv, &o) != 0)
		return 2;
	if (o.dp == 0) {
		uint64_t dp = o.seg_size / (16 * MiB);

		o.dp = dp < 8 ? 8 : dp > 65536 ? 65536 : (unsigned)dp;
	}
	tide_seg_opts_init(&so, sizeof(so));
	so.size = o.seg_size;
	rc = tide_seg_create(&so, &seg);
	if (rc != 0) {
		fprintf(stderr, "tide-seg-bench: tide_seg_create: %s\n", strerror(-rc));
		return 1;
	}

	printf("tide-seg-bench: segment %" PRIu64 " B, granule %" PRIu32 ", max_blocks %" PRIu32
	       ", ops %" PRIu64 ", seed %" PRIu64 ", best of %u runs\n",
	       o.seg_size, so.granule, so.max_blocks, o.ops, o.seed, o.runs);
	printf("%-30s %9s %10s %10s %8s\n", "workload", "pairs", "tide ns", "malloc ns",
	       "tide/mlc");

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		char name[64];
		unsigned batch = BATCH;

		if (fixed[i] > o.seg_size)
			continue;
		memset(&s, 0, sizeof(s));
		gen_fixed_pair(&s, fixed[i], o.ops);
		r = measure(seg, &s, o.runs);
		snprintf(name, sizeof(name), "fixed %" PRIu64 " B pair", fixed[i]);
		row(name, &s, &r);
		free(s.ops);

		while ((uint64_t)batch * fixed[i] > o.seg_size / 100 * FILL_PCT)
			batch /= 2;
		if (batch == 0 || 2 * (uint64_t)batch > o.ops)
			continue;
		memset(&s, 0, sizeof(s));
		gen_fixed_batch(&s, fixed[i], o.ops, batch);
		r = measure(seg, &s, o.runs);
		snprintf(name, sizeof(name), "fixed %" PRIu64 " B batch %u", fixed[i], batch);
		row(name, &s, &r);
		free(s.ops);
	}

	memset(&s, 0, sizeof(s));
	rng_state = o.seed;
	gen_rollout(&s, &o);
	r = measure(seg, &s, o.runs);
	row("rollout mix (90% fill)", &s, &r);

	/* Fragmentation: replay up to the end of --ops, before the final drain. */
	offs = malloc(s.ids * sizeof(*offs));
	if (offs == NULL)
		return 1;
	/* A fresh allocator, so its failure counters cover this one replay. */
	tide_seg_destroy(seg);
	rc = tide_seg_create(&so, &seg);
	if (rc != 0) {
		fprintf(stderr, "tide-seg-bench: tide_seg_create: %s\n", strerror(-rc));
		return 1;
	}
	fails = replay_tide(seg, &s, s.mark, offs);
	tide_seg_stats_get(seg, &st);
	printf("\nrollout mix: %" PRIu32 " objects, %.1f%% <= 256 B, largest %" PRIu64
	       " B, mean %.0f B, %u shards per step\n",
	       s.ids, 100.0 * (double)s.small / s.ids, s.largest, (double)s.bytes / s.ids, o.dp);
	printf("after %zu ops: fill %.1f%%, live %" PRIu64 ", free %" PRIu64 " B in %" PRIu64
	       " extents, largest free %" PRIu64 " B, fragmentation (1 - largest/free) %.4f,"
	       " failed allocs %" PRIu64 " (-ENOSPC %" PRIu64 ", -ENOMEM %" PRIu64
	       ", the rest -EINVAL: larger than the segment)\n",
	       s.mark, 100.0 * (double)st.used / st.size, st.live_allocs, st.free, st.free_extents,
	       st.largest_free, st.fragmentation, fails, st.alloc_fail_nospc, st.alloc_fail_nomem);
	rc = tide_seg_check(seg);
	free(offs);
	free(s.ops);
	tide_seg_destroy(seg);
	if (rc != 0) {
		fprintf(stderr, "tide-seg-bench: allocator check failed: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
