/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ECMAScript-compatible, bounded regular expressions for the master table
 * (mc_regex.h), on PCRE2. glibc's regcomp() used before took POSIX ERE (so
 * "key\d+" matched nothing) and had no bound: a nested counted repetition
 * such as ((a{1,100}){1,100}){1,100} made it expand a million-state
 * automaton, 1.17 GB in 2.8 s under the table lock.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "mc_regex.h"

/* Allocation budget shared by everything PCRE2 allocates for one expression. */
struct re_mem {
	uint64_t used, cap;
};

struct mct_regex {
	struct re_mem mem; /* first: outlives every context allocated from it */
	pcre2_general_context *gcx;
	pcre2_compile_context *ccx;
	pcre2_match_context *mcx;
	pcre2_code *code;
	pcre2_match_data *md;
};

/* Size header in front of each block: 16 bytes keep malloc's alignment. */
#define RE_HDR 16u

static void *
re_malloc(PCRE2_SIZE n, void *data)
{
	struct re_mem *m = data;
	uint8_t *p;

	if (n > m->cap - m->used)
		return NULL;
	p = malloc(n + RE_HDR);
	if (p == NULL)
		return NULL;
	memcpy(p, &n, sizeof(n));
	m->used += n;
	return p + RE_HDR;
}

static void
re_free(void *block, void *data)
{
	struct re_mem *m = data;
	uint8_t *p = block;
	PCRE2_SIZE n;

	if (p == NULL)
		return;
	p -= RE_HDR;
	memcpy(&n, p, sizeof(n));
	m->used -= n;
	free(p);
}

void
mct_regex_free(struct mct_regex *re)
{
	if (re == NULL)
		return;
	pcre2_match_data_free(re->md);
	pcre2_code_free(re->code);
	pcre2_match_context_free(re->mcx);
	pcre2_compile_context_free(re->ccx);
	pcre2_general_context_free(re->gcx);
	free(re);
}

/* Out of the budget, or a compiled program past PCRE2's own size limits. */
static bool
compile_too_big(int err)
{
	return err == PCRE2_ERROR_PATTERN_TOO_LARGE || err == PCRE2_ERROR_HEAP_FAILED ||
	       err == PCRE2_ERROR_PATTERN_TOO_COMPLICATED ||
	       err == PCRE2_ERROR_PATTERN_STRING_TOO_LONG;
}

int
mct_regex_compile(const char *pat, size_t len, uint32_t match_limit, uint64_t memory,
		  struct mct_regex **out, char *why, size_t whylen)
{
	/* The ECMAScript dialect of std::regex; see mc_regex.h. */
	const uint32_t opts = PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS |
			      PCRE2_MATCH_UNSET_BACKREF | PCRE2_NEVER_UTF | PCRE2_NEVER_UCP |
			      PCRE2_NEVER_BACKSLASH_C;
	struct mct_regex *re;
	PCRE2_UCHAR msg[160];
	PCRE2_SIZE off = 0;
	int err = 0;

	*out = NULL;
	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if (len > MCT_REGEX_MAX_PATTERN) {
		if (why != NULL)
			snprintf(why, whylen, "pattern longer than %u bytes",
				 MCT_REGEX_MAX_PATTERN);
		return -E2BIG;
	}
	if (match_limit == 0 || memory < (16u << 10))
		return -EINVAL;
	re = calloc(1, sizeof(*re));
	if (re == NULL)
		return -ENOMEM;
	re->mem.cap = memory;
	re->gcx = pcre2_general_context_create(re_malloc, re_free, &re->mem);
	if (re->gcx != NULL)
		re->ccx = pcre2_compile_context_create(re->gcx);
	if (re->ccx != NULL)
		re->mcx = pcre2_match_context_create(re->gcx);
	if (re->mcx == NULL) {
		mct_regex_free(re);
		return -ENOMEM;
	}
	pcre2_set_newline(re->ccx, PCRE2_NEWLINE_ANYCRLF);
	pcre2_set_max_pattern_length(re->ccx, MCT_REGEX_MAX_PATTERN);
	pcre2_set_match_limit(re->mcx, match_limit);
	/* The backtracking frames also count in the budget; this limit only
	   makes PCRE2 say so (HEAPLIMIT) before asking for more. */
	pcre2_set_heap_limit(re->mcx,
			     (uint32_t)(memory >> 10 < UINT32_MAX ? memory >> 10 : UINT32_MAX));
	re->code =
		pcre2_compile((PCRE2_SPTR)(pat != NULL ? pat : ""), len, opts, &err, &off, re->ccx);
	if (re->code == NULL) {
		pcre2_get_error_message(err, msg, sizeof(msg));
		if (why != NULL)
			snprintf(why, whylen, "%s (at offset %zu)", (const char *)msg, (size_t)off);
		mct_regex_free(re);
		return compile_too_big(err) ? -E2BIG : -EINVAL;
	}
	re->md = pcre2_match_data_create(1, re->gcx);
	if (re->md == NULL) {
		if (why != NULL)
			snprintf(why, whylen, "no memory left in the budget to match");
		mct_regex_free(re);
		return -E2BIG;
	}
	*out = re;
	return 0;
}

int
mct_regex_search(struct mct_regex *re, const char *s, size_t n)
{
	int rc = pcre2_match(re->code, (PCRE2_SPTR)(s != NULL ? s : ""), n, 0, 0, re->md, re->mcx);

	if (rc >= 0)
		return 1;
	switch (rc) {
	case PCRE2_ERROR_NOMATCH:
	case PCRE2_ERROR_PARTIAL:
		return 0;
	case PCRE2_ERROR_MATCHLIMIT:
	case PCRE2_ERROR_DEPTHLIMIT:
	case PCRE2_ERROR_HEAPLIMIT:
	case PCRE2_ERROR_NOMEMORY:
		return -E2BIG;
	default:
		return -EINVAL;
	}
}
