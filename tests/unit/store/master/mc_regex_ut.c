/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the master's regular expressions (store/master/mc_regex.c):
 * the ECMAScript dialect stock Mooncake clients write (std::regex default)
 * and the bounds on memory and backtracking.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_regex.h"
#include "tide_ut.h"

#define LIMIT  1000000u
#define MEMORY (16u << 20)

/* 1 match, 0 none, or the compile error. */
static int
search(const char *pat, const char *s, size_t n)
{
	struct mct_regex *re = NULL;
	char why[256];
	int rc = mct_regex_compile(pat, strlen(pat), LIMIT, MEMORY, &re, why, sizeof(why));

	if (rc != 0)
		return rc;
	rc = mct_regex_search(re, s, n);
	mct_regex_free(re);
	return rc;
}

static int
S(const char *pat, const char *s)
{
	return search(pat, s, strlen(s));
}

/* What std::regex(pattern, ECMAScript) + std::regex_search answer. */
static void
test_ecmascript_dialect(void)
{
	/* The classes POSIX ERE does not have (issue 20: key\d+ matched nothing). */
	CU_ASSERT_EQUAL(S("key\\d+", "key42"), 1);
	CU_ASSERT_EQUAL(S("key\\d+", "keyx"), 0);
	CU_ASSERT_EQUAL(S("^\\w+/\\d{2}$", "user_1/07"), 1);
	CU_ASSERT_EQUAL(S("^\\w+$", "a-b"), 0);
	CU_ASSERT_EQUAL(S("a\\sb", "a\tb"), 1);
	CU_ASSERT_EQUAL(S("\\D\\W\\S", "x-y"), 1);
	CU_ASSERT_EQUAL(S("\\bcat\\b", "a cat!"), 1);
	CU_ASSERT_EQUAL(S("\\bcat\\b", "concat"), 0);
	/* Search anywhere, anchors only where written. */
	CU_ASSERT_EQUAL(S("ab", "xxabyy"), 1);
	CU_ASSERT_EQUAL(S("^ab", "xxab"), 0);
	/* '$' is the very end only; '.' is not '\n' nor '\r'. */
	CU_ASSERT_EQUAL(S("a$", "a\n"), 0);
	CU_ASSERT_EQUAL(S("a.b", "a\nb"), 0);
	CU_ASSERT_EQUAL(S("a.b", "a\rb"), 0);
	CU_ASSERT_EQUAL(S("a.b", "a-b"), 1);
	CU_ASSERT_EQUAL(S("a[^]b", "a\nb"), 1);
	CU_ASSERT_EQUAL(S("a[]b", "ab"), 0);
	/* Groups, assertions, lazy quantifiers, back-references. */
	CU_ASSERT_EQUAL(S("^(?:ab)+$", "ababab"), 1);
	CU_ASSERT_EQUAL(S("foo(?=bar)", "foobar"), 1);
	CU_ASSERT_EQUAL(S("foo(?!bar)", "foobar"), 0);
	CU_ASSERT_EQUAL(S("^a.*?b$", "axxb"), 1);
	CU_ASSERT_EQUAL(S("^(\\w)\\1$", "zz"), 1);
	CU_ASSERT_EQUAL(S("^(\\w)\\1$", "zy"), 0);
	CU_ASSERT_EQUAL(S("^(a)?\\1b$", "b"), 1); /* unset group: matches empty */
	/* Escapes. */
	CU_ASSERT_EQUAL(S("\\u0041\\x42", "AB"), 1);
	CU_ASSERT_EQUAL(S("a\\.b", "a.b"), 1);
	CU_ASSERT_EQUAL(S("a\\.b", "axb"), 0);
	CU_ASSERT_EQUAL(S("a|b|c", "c"), 1);
	CU_ASSERT_EQUAL(S("[a-c]{2,3}", "xbcy"), 1);
	/* Keys are bytes, NULs included. */
	CU_ASSERT_EQUAL(search("a\\x00b", "a\0b", 3), 1);
	CU_ASSERT_EQUAL(search("^a.b$", "a\0b", 3), 1);
	/* Not an expression. */
	CU_ASSERT_EQUAL(S("(unclosed", "x"), -EINVAL);
	CU_ASSERT_EQUAL(S("a**", "x"), -EINVAL);
	CU_ASSERT_EQUAL(S("[z-a]", "x"), -EINVAL);
	/* The empty pattern matches everything (as std::regex). */
	CU_ASSERT_EQUAL(S("", "anything"), 1);
}

/* Issue 20: ((a{1,100}){1,100}){1,100} took glibc's regcomp to 1.17 GB. */
static void
test_bounded_compile(void)
{
	static const char nested[] = "((a{1,100}){1,100}){1,100}";
	struct mct_regex *re = NULL;
	long rss0 = tide_ut_rss_kib();
	double t0 = tide_ut_now_s();
	char why[256] = "";
	char *big;

	CU_ASSERT_EQUAL(
		mct_regex_compile(nested, strlen(nested), LIMIT, MEMORY, &re, why, sizeof(why)),
		-E2BIG);
	CU_ASSERT_PTR_NULL(re);
	CU_ASSERT(strlen(why) > 0);
	CU_ASSERT(tide_ut_now_s() - t0 < 1.0);
	CU_ASSERT(tide_ut_rss_kib() - rss0 < 32 * 1024);
	printf("\n    %s: refused in %.3f s (%s), RSS +%ld KiB\n", nested, tide_ut_now_s() - t0,
	       why, tide_ut_rss_kib() - rss0);

	/* Longer than MCT_REGEX_MAX_PATTERN. */
	big = malloc(MCT_REGEX_MAX_PATTERN + 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	memset(big, 'a', MCT_REGEX_MAX_PATTERN + 1);
	big[MCT_REGEX_MAX_PATTERN + 1] = '\0';
	CU_ASSERT_EQUAL(mct_regex_compile(big, MCT_REGEX_MAX_PATTERN + 1, LIMIT, MEMORY, &re, why,
					  sizeof(why)),
			-E2BIG);
	/* A valid 16 KiB alternation compiles in the default budget, not in 64 KiB. */
	for (size_t i = 0; i < 16384; i += 4)
		memcpy(big + i, i ? "|k\\d" : "(k\\d", 4);
	memcpy(big + 16384, ")", 2);
	CU_ASSERT_EQUAL(mct_regex_compile(big, strlen(big), LIMIT, MEMORY, &re, why, sizeof(why)),
			0);
	CU_ASSERT_EQUAL(mct_regex_search(re, "xk7", 3), 1);
	mct_regex_free(re);
	CU_ASSERT_EQUAL(
		mct_regex_compile(big, strlen(big), LIMIT, 64u << 10, &re, why, sizeof(why)),
		-E2BIG);
	free(big);
	/* Bad limits. */
	CU_ASSERT_EQUAL(mct_regex_compile("a", 1, 0, MEMORY, &re, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(mct_regex_compile("a", 1, LIMIT, 1024, &re, NULL, 0), -EINVAL);
}

/* Catastrophic backtracking stops at the match limit, quickly. */
static void
test_bounded_match(void)
{
	static const char pat[] = "^(a+)+$";
	char key[64];
	struct mct_regex *re = NULL;
	double t0;
	int rc;

	memset(key, 'a', 40);
	key[40] = 'b';
	TIDE_UT_OK(mct_regex_compile(pat, strlen(pat), LIMIT, MEMORY, &re, NULL, 0));
	t0 = tide_ut_now_s();
	rc = mct_regex_search(re, key, 41);
	CU_ASSERT_EQUAL(rc, -E2BIG);
	CU_ASSERT(tide_ut_now_s() - t0 < 2.0);
	printf("\n    ^(a+)+$ over 40 a's and a b: %d after %.3f s\n", rc, tide_ut_now_s() - t0);
	/* The same expression is still usable, and a short key is fine. */
	CU_ASSERT_EQUAL(mct_regex_search(re, "aaaa", 4), 1);
	CU_ASSERT_EQUAL(mct_regex_search(re, "aab", 3), 0);
	mct_regex_free(re);
	/* Deep recursion runs out of the memory budget, not of the stack. */
	{
		static const char deep[] = "^(a|b)*$";
		size_t n = 1u << 20;
		char *s = malloc(n);

		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		memset(s, 'a', n);
		TIDE_UT_OK(mct_regex_compile(deep, strlen(deep), 100000000u, 256u << 10, &re, NULL,
					     0));
		CU_ASSERT_EQUAL(mct_regex_search(re, s, n), -E2BIG);
		mct_regex_free(re);
		free(s);
	}
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_regex", NULL, NULL);

	CU_add_test(s, "ecmascript_dialect", test_ecmascript_dialect);
	CU_add_test(s, "bounded_compile", test_bounded_compile);
	CU_add_test(s, "bounded_match", test_bounded_match);
}

TIDE_UT_MAIN(register_tests)
