/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "tide_log.h"
#include "tide_ut.h"

static void
test_level_parse_accepts_names(void)
{
	enum tide_log_level l = TIDE_LOG_ERR;

	TIDE_UT_OK(tide_log_level_parse("DEBUG", &l));
	CU_ASSERT_EQUAL(l, TIDE_LOG_DEBUG);
	TIDE_UT_OK(tide_log_level_parse("warning", &l));
	CU_ASSERT_EQUAL(l, TIDE_LOG_WARN);
	TIDE_UT_OK(tide_log_level_parse("err", &l));
	CU_ASSERT_EQUAL(l, TIDE_LOG_ERR);
}

static void
test_level_parse_rejects_unknown(void)
{
	enum tide_log_level l = TIDE_LOG_INFO;

	CU_ASSERT_EQUAL(tide_log_level_parse("verbose", &l), -EINVAL);
	CU_ASSERT_EQUAL(tide_log_level_parse("", &l), -EINVAL);
	CU_ASSERT_EQUAL(tide_log_level_parse(NULL, &l), -EINVAL);
	CU_ASSERT_EQUAL(l, TIDE_LOG_INFO);
}

static void
test_set_level_clamps_and_gates(void)
{
	tide_log_set_level((enum tide_log_level)99);
	CU_ASSERT_EQUAL(tide_log_get_level(), TIDE_LOG_DEBUG);
	tide_log_set_level(TIDE_LOG_WARN);
	CU_ASSERT_TRUE(tide_log_enabled(TIDE_LOG_ERR));
	CU_ASSERT_FALSE(tide_log_enabled(TIDE_LOG_INFO));
	CU_ASSERT_STRING_EQUAL(tide_log_level_name(TIDE_LOG_NOTICE), "notice");
	tide_log_set_level(TIDE_LOG_NOTICE);
}

static void
test_ratelimit_suppresses_within_interval(void)
{
	struct tide_log_rl rl = {0};

	CU_ASSERT_TRUE(tide_log_rl_pass(&rl, 60));
	CU_ASSERT_FALSE(tide_log_rl_pass(&rl, 60));
	CU_ASSERT_FALSE(tide_log_rl_pass(&rl, 60));
	CU_ASSERT_EQUAL(rl.suppressed, 2);
	rl.next_ns = 0; /* the interval has elapsed */
	CU_ASSERT_TRUE(tide_log_rl_pass(&rl, 60));
	CU_ASSERT_EQUAL(rl.suppressed, 0);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("log", NULL, NULL);

	CU_add_test(s, "level_parse_accepts_names", test_level_parse_accepts_names);
	CU_add_test(s, "level_parse_rejects_unknown", test_level_parse_rejects_unknown);
	CU_add_test(s, "set_level_clamps_and_gates", test_set_level_clamps_and_gates);
	CU_add_test(s, "ratelimit_suppresses_within_interval",
		    test_ratelimit_suppresses_within_interval);
}

TIDE_UT_MAIN(register_tests)
