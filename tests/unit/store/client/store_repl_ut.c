/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_repl.c: a tide_store_rc as Mooncake's ReplicateConfig.
 * Defaults (NULL and zeroed configs), every field carried over, the strings
 * array laid out as preferred segments then group ids, and the refusals
 * (NULL preferred segment, a group-id array shorter than the keys).
 */
#include <errno.h>
#include <string.h>

#include "store_repl.h"
#include "tide_ut.h"

static int
str_is(struct tide_mc_str s, const char *want)
{
	return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static void
test_defaults(void)
{
	struct tide_mc_replicate_config out;
	struct tide_store_rc zero = {0};

	CU_ASSERT_EQUAL(store_repl_check(NULL, 5), 0);
	CU_ASSERT_EQUAL(store_repl_nstrs(NULL, 5), 0);
	store_repl_fill(NULL, 5, NULL, &out);
	CU_ASSERT_EQUAL(out.replica_num, 1);
	CU_ASSERT_FALSE(out.with_hard_pin);
	CU_ASSERT_EQUAL(out.preferred_segments.n, 0);
	CU_ASSERT_FALSE(out.group_ids.has);
	/* A zeroed config is the same as none: replica_num 0 means 1. */
	CU_ASSERT_EQUAL(store_repl_check(&zero, 5), 0);
	CU_ASSERT_EQUAL(store_repl_nstrs(&zero, 5), 0);
	store_repl_fill(&zero, 5, NULL, &out);
	CU_ASSERT_EQUAL(out.replica_num, 1);
	CU_ASSERT_EQUAL(out.preferred_segment.len, 0);
	/* ... and stock's soft-pin defaults: PRESERVE, no ttl. */
	CU_ASSERT_EQUAL(out.soft_pin_action, TIDE_MC_SOFT_PIN_PRESERVE);
	CU_ASSERT_FALSE(out.soft_pin_ttl_ms.has);
}

/* Soft pins (ABI 4): the action as it is, a ttl of 0 as stock's unset optional. */
static void
test_soft_pin(void)
{
	struct tide_store_rc on = {.soft_pin_action = TIDE_STORE_SOFT_PIN_ENABLE,
				   .soft_pin_ttl_ms = 1234};
	struct tide_store_rc off = {.soft_pin_action = TIDE_STORE_SOFT_PIN_DISABLE};
	struct tide_store_rc bad = {.soft_pin_action = TIDE_STORE_SOFT_PIN_DISABLE + 1};
	struct tide_mc_replicate_config out;

	CU_ASSERT_EQUAL(store_repl_check(&on, 1), 0);
	store_repl_fill(&on, 1, NULL, &out);
	CU_ASSERT_EQUAL(out.soft_pin_action, TIDE_MC_SOFT_PIN_ENABLE);
	CU_ASSERT_TRUE(out.soft_pin_ttl_ms.has);
	CU_ASSERT_EQUAL(out.soft_pin_ttl_ms.val, 1234);
	CU_ASSERT_FALSE(out.with_soft_pin); /* the old layout's bool stays for the master */
	CU_ASSERT_EQUAL(store_repl_check(&off, 1), 0);
	store_repl_fill(&off, 1, NULL, &out);
	CU_ASSERT_EQUAL(out.soft_pin_action, TIDE_MC_SOFT_PIN_DISABLE);
	CU_ASSERT_FALSE(out.soft_pin_ttl_ms.has);
	CU_ASSERT_EQUAL(store_repl_check(&bad, 1), -EINVAL);
}

static void
test_every_field(void)
{
	static const char *const prefs[] = {"10.0.0.1:1", "10.0.0.2:2"};
	static const char *const groups[] = {"g0", "", "g2"};
	struct tide_store_rc repl = {.replica_num = 3,
				     .with_hard_pin = true,
				     .preferred_segment = "10.0.0.9:9",
				     .preferred_segments = prefs,
				     .n_preferred_segments = 2,
				     .prefer_alloc_in_same_node = true,
				     .group_ids = groups};
	struct tide_mc_str strs[5];
	struct tide_mc_replicate_config out;

	CU_ASSERT_EQUAL(store_repl_check(&repl, 3), 0);
	CU_ASSERT_EQUAL_FATAL(store_repl_nstrs(&repl, 3), 5);
	store_repl_fill(&repl, 3, strs, &out);
	CU_ASSERT_EQUAL(out.replica_num, 3);
	CU_ASSERT_TRUE(out.with_hard_pin);
	CU_ASSERT_TRUE(out.prefer_alloc_in_same_node);
	CU_ASSERT_TRUE(str_is(out.preferred_segment, "10.0.0.9:9"));
	CU_ASSERT_EQUAL_FATAL(out.preferred_segments.n, 2);
	CU_ASSERT_PTR_EQUAL(out.preferred_segments.v, strs);
	CU_ASSERT_TRUE(str_is(out.preferred_segments.v[0], "10.0.0.1:1"));
	CU_ASSERT_TRUE(str_is(out.preferred_segments.v[1], "10.0.0.2:2"));
	CU_ASSERT_TRUE(out.group_ids.has);
	CU_ASSERT_EQUAL_FATAL(out.group_ids.val.n, 3);
	CU_ASSERT_PTR_EQUAL(out.group_ids.val.v, strs + 2);
	CU_ASSERT_TRUE(str_is(out.group_ids.val.v[0], "g0"));
	CU_ASSERT_TRUE(str_is(out.group_ids.val.v[1], ""));
	CU_ASSERT_TRUE(str_is(out.group_ids.val.v[2], "g2"));
	/* Borrowed, not copied. */
	CU_ASSERT_PTR_EQUAL(out.preferred_segments.v[0].ptr, prefs[0]);
}

static void
test_group_ids_without_preferred(void)
{
	static const char *const groups[] = {"a"};
	struct tide_store_rc repl = {.group_ids = groups};
	struct tide_mc_str strs[1];
	struct tide_mc_replicate_config out;

	CU_ASSERT_EQUAL_FATAL(store_repl_nstrs(&repl, 1), 1);
	store_repl_fill(&repl, 1, strs, &out);
	CU_ASSERT_EQUAL(out.preferred_segments.n, 0);
	CU_ASSERT_PTR_EQUAL(out.group_ids.val.v, strs);
	CU_ASSERT_TRUE(str_is(out.group_ids.val.v[0], "a"));
}

static void
test_refusals(void)
{
	static const char *const prefs[] = {"10.0.0.1:1", NULL};
	static const char *const short_groups[] = {"g0", NULL}; /* fewer than the keys */
	struct tide_store_rc no_array = {.n_preferred_segments = 1};
	struct tide_store_rc null_pref = {.preferred_segments = prefs, .n_preferred_segments = 2};
	struct tide_store_rc groups = {.group_ids = short_groups};

	CU_ASSERT_EQUAL(store_repl_check(&no_array, 1), -EINVAL);
	CU_ASSERT_EQUAL(store_repl_check(&null_pref, 1), -EINVAL);
	CU_ASSERT_EQUAL(store_repl_check(&groups, 1), 0); /* entries past nkeys unread */
	CU_ASSERT_EQUAL(store_repl_check(&groups, 2), -EINVAL);
	CU_ASSERT_EQUAL(store_repl_check(&groups, 3), -EINVAL);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_repl", NULL, NULL);

	CU_add_test(s, "defaults", test_defaults);
	CU_add_test(s, "every_field", test_every_field);
	CU_add_test(s, "soft_pin", test_soft_pin);
	CU_add_test(s, "group_ids_without_preferred", test_group_ids_without_preferred);
	CU_add_test(s, "refusals", test_refusals);
}

TIDE_UT_MAIN(register_tests)
