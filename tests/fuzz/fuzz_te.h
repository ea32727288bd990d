/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the TCP data-session fuzz targets (te_srv_sess_fuzz.c,
 * te_cli_sess_fuzz.c) and the seed generator (fuzz_seedgen.c): where the
 * server's "registered" memory lives and which slices the client sessions
 * carry, so that the committed corpus (frames the sessions emitted) still
 * names valid addresses and request ids when it is replayed.
 *
 * The server dereferences request addresses, so its memory sits at a fixed
 * address (FZ_TE_BASE) in every process: two registered ranges with an
 * inaccessible page between and around them, so a write or read that
 * strays out of a checked range faults even though mmap memory is not
 * tracked by ASan.
 */
#ifndef FUZZ_TE_H
#define FUZZ_TE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "te_sess.h"

#define FZ_TE_PAGE     4096u
#define FZ_TE_BASE     UINT64_C(0x2a0000000000) /* high user memory, clear of ASan's ranges */
#define FZ_TE_A_OFF    0u                       /* registered range A: [BASE, BASE + 32 KiB) */
#define FZ_TE_A_LEN    32768u
#define FZ_TE_B_OFF    36864u /* range B after one guard page */
#define FZ_TE_B_LEN    16384u
#define FZ_TE_MAP_LEN  57344u                       /* A, guard, B, guard */
#define FZ_TE_INSTANCE UINT64_C(0x7469646566757a7a) /* the server's tide_instance */

/* One slice of a client scenario: op, offset from FZ_TE_BASE, length. */
struct fz_te_slice {
	uint8_t op;
	uint64_t off;
	uint32_t len;
};

#define FZ_TE_MAX_SLICES 12

/* A client session configuration and the slices it submits, in order. */
struct fz_te_scen {
	const char *name;
	uint32_t proto;
	uint64_t instance; /* HELLO (native); 0 none */
	uint32_t max_inflight;
	uint64_t max_inflight_bytes;
	unsigned n;
	struct fz_te_slice s[FZ_TE_MAX_SLICES];
	unsigned repeat; /* the list is submitted this many times (0 = once) */
};

/* Slices a scenario submits in all; slice i is s[i % n]. */
#define FZ_TE_TOTAL(sc) ((sc)->n * ((sc)->repeat > 1 ? (sc)->repeat : 1))
#define FZ_TE_MAX_TOTAL 48

#define R TE_FRAME_OP_READ
#define W TE_FRAME_OP_WRITE
/* Offsets outside both ranges: refused by the server. */
#define FZ_TE_OUT (FZ_TE_A_LEN + 100u)
static const struct fz_te_scen fz_te_scens[] = {
	{"v1", TE_PROTO_V1, 0, 1, 0, 4, {{R, 0, 64}, {W, 128, 32}, {R, 4096, 16}, {W, 40000, 8}}},
	{"v1_refused", TE_PROTO_V1, 0, 1, 0, 2, {{W, 64, 16}, {R, FZ_TE_OUT, 16}}},
	{"v2", TE_PROTO_V2, 0, 1, 0, 4, {{R, 0, 64}, {W, 128, 32}, {R, 36864, 100}, {W, 8, 1}}},
	{"v2_refused", TE_PROTO_V2, 0, 1, 0, 3, {{R, 512, 8}, {W, FZ_TE_OUT, 32}, {R, 0, 8}}},
	{"native_hello",
	 TE_PROTO_NATIVE,
	 FZ_TE_INSTANCE,
	 8,
	 0,
	 8,
	 {{R, 0, 64},
	  {W, 256, 48},
	  {R, 256, 48},
	  {W, FZ_TE_OUT, 16},
	  {R, FZ_TE_OUT, 16},
	  {W, 36864 + 16000, 384},
	  {R, 1024, 2048},
	  {W, 32760, 8}}},
	{"native_window",
	 TE_PROTO_NATIVE,
	 0,
	 3,
	 96,
	 10,
	 {{W, 0, 40},
	  {R, 0, 40},
	  {W, 40, 40},
	  {R, 40, 40},
	  {W, 80, 200},
	  {R, 80, 200},
	  {W, 40000, 12},
	  {R, 40000, 12},
	  {R, 7, 1},
	  {W, 9, 1}}},
	{"native_stale",
	 TE_PROTO_NATIVE,
	 FZ_TE_INSTANCE ^ 1,
	 4,
	 0,
	 3,
	 {{R, 0, 16}, {W, 16, 16}, {R, 32, 16}}},
	/* More requests in flight than the server queues replies (32). */
	{"native_pipeline", TE_PROTO_NATIVE, FZ_TE_INSTANCE, 48, 0, 2, {{R, 0, 8}, {W, 64, 8}}, 24},
};
#undef R
#undef W
#define FZ_TE_NSCENS (sizeof(fz_te_scens) / sizeof(fz_te_scens[0]))

/*
 * Map the server memory at FZ_TE_BASE (guard pages PROT_NONE). Returns the
 * base; when the fixed address is taken the memory goes elsewhere and
 * the corpus only reaches the refusal paths (a warning says so).
 */
static inline uint8_t *
fz_te_map(void)
{
	size_t total = FZ_TE_MAP_LEN + 2 * FZ_TE_PAGE;
	uint8_t *p = mmap((void *)(uintptr_t)(FZ_TE_BASE - FZ_TE_PAGE), total, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED || (uintptr_t)p != FZ_TE_BASE - FZ_TE_PAGE) {
		if (p != MAP_FAILED)
			munmap(p, total);
		fprintf(stderr, "fuzz_te: 0x%llx is taken; memory goes elsewhere\n",
			(unsigned long long)FZ_TE_BASE);
		p = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			 0);
		if (p == MAP_FAILED)
			return NULL;
	}
	p += FZ_TE_PAGE;
	if (mprotect(p + FZ_TE_A_OFF, FZ_TE_A_LEN, PROT_READ | PROT_WRITE) != 0 ||
	    mprotect(p + FZ_TE_B_OFF, FZ_TE_B_LEN, PROT_READ | PROT_WRITE) != 0)
		return NULL;
	return p;
}

/* Is [addr, addr + len) inside one registered range of the memory at base? */
static inline bool
fz_te_inside(const uint8_t *base, uint64_t addr, uint64_t len)
{
	static const uint64_t off[2] = {FZ_TE_A_OFF, FZ_TE_B_OFF};
	static const uint64_t lim[2] = {FZ_TE_A_LEN, FZ_TE_B_LEN};

	for (int i = 0; i < 2; i++) {
		uint64_t lo = (uintptr_t)base + off[i];

		if (addr >= lo && addr - lo <= lim[i] && len <= lim[i] - (addr - lo) &&
		    (len > 0 || addr - lo < lim[i]))
			return true;
	}
	return false;
}

/* Fill the registered ranges with a pattern (the same before every run). */
static inline void
fz_te_reset(uint8_t *base)
{
	static uint8_t pristine[FZ_TE_A_LEN + FZ_TE_B_LEN];
	static bool made;

	if (!made) {
		for (uint32_t i = 0; i < sizeof(pristine); i++)
			pristine[i] = (uint8_t)(i * 7 + 1);
		made = true;
	}
	memcpy(base + FZ_TE_A_OFF, pristine, FZ_TE_A_LEN);
	memcpy(base + FZ_TE_B_OFF, pristine + FZ_TE_A_LEN, FZ_TE_B_LEN);
}

#endif /* FUZZ_TE_H */
