/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/flags.c: the one gflags walk and the value parsers every program uses. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tide_flags.h"
#include "tide_ut.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void
test_value_parsers(void)
{
	int64_t i = 7;
	uint64_t u = 7, ms = 7;
	double d = 7;

	TIDE_UT_OK(tide_flags_parse_i64("-12", -100, 100, &i));
	CU_ASSERT_EQUAL(i, -12);
	CU_ASSERT_EQUAL(tide_flags_parse_i64("101", -100, 100, &i), -EINVAL);
	CU_ASSERT_EQUAL(tide_flags_parse_i64("", 0, 0, &i), -EINVAL);
	CU_ASSERT_EQUAL(tide_flags_parse_i64("12x", 0, 0, &i), -EINVAL);
	CU_ASSERT_EQUAL(i, -12); /* untouched on error */
	TIDE_UT_OK(tide_flags_parse_u64("18446744073709551615", 0, 0, &u));
	CU_ASSERT_EQUAL(u, UINT64_MAX);
	CU_ASSERT_EQUAL(tide_flags_parse_u64("-1", 0, 0, &u), -EINVAL);
	CU_ASSERT_EQUAL(tide_flags_parse_u64("18446744073709551616", 0, 0, &u), -EINVAL);
	TIDE_UT_OK(tide_flags_parse_double("0.25", 0, 1, &d));
	CU_ASSERT_DOUBLE_EQUAL(d, 0.25, 1e-12);
	CU_ASSERT_EQUAL(tide_flags_parse_double("nan", 0, 0, &d), -EINVAL);
	CU_ASSERT_EQUAL(tide_flags_parse_double("inf", 0, 0, &d), -EINVAL);
	CU_ASSERT_EQUAL(tide_flags_parse_double("1.5", 0, 1, &d), -EINVAL);
	TIDE_UT_OK(tide_flags_parse_dur_ms("250", &ms));
	CU_ASSERT_EQUAL(ms, 250);
	TIDE_UT_OK(tide_flags_parse_dur_ms("250ms", &ms));
	CU_ASSERT_EQUAL(ms, 250);
	TIDE_UT_OK(tide_flags_parse_dur_ms("30s", &ms));
	CU_ASSERT_EQUAL(ms, 30000);
	TIDE_UT_OK(tide_flags_parse_dur_ms("5m", &ms));
	CU_ASSERT_EQUAL(ms, 300000);
	TIDE_UT_OK(tide_flags_parse_dur_ms("2h", &ms));
	CU_ASSERT_EQUAL(ms, 7200000);
	CU_ASSERT_EQUAL(tide_flags_parse_dur_ms("2d", &ms), -EINVAL);
	CU_ASSERT_EQUAL(tide_flags_parse_dur_ms("-1s", &ms), -EINVAL);
	CU_ASSERT_EQUAL(tide_flags_parse_dur_ms("18446744073709551615h", &ms), -EINVAL);
	CU_ASSERT_EQUAL(ms, 7200000);
}

/* A table of typed destinations (tide_flags_parse). */
static bool f_bool;
static uint64_t f_u64, f_size;
static double f_dbl;
static const char *f_str;
static const char *const modes[] = {"target", "initiator", NULL};
static const struct tide_flag tab[] = {
	{"verbose", TIDE_FLAG_BOOL, &f_bool, "b", 0, 0, NULL},
	{"threads", TIDE_FLAG_U64, &f_u64, "u", 1, 64, NULL},
	{"block_size", TIDE_FLAG_SIZE, &f_size, "s", 1, 1ULL << 30, NULL},
	{"ratio", TIDE_FLAG_DOUBLE, &f_dbl, "d", 0, 1, NULL},
	{"mode", TIDE_FLAG_STR, &f_str, "m", 0, 0, modes},
};

static int
parse(int argc, char **argv, bool *help, char *err, size_t errlen)
{
	return tide_flags_parse(tab, sizeof(tab) / sizeof(tab[0]), argc, argv, help, err, errlen);
}

static void
test_table_forms(void)
{
	char err[256] = "";
	bool help = true;
	char *ok[] = {"prog",  "--verbose",  "--threads=4", "--block_size",
		      "64KiB", "-ratio=0.5", "--mode",      "initiator"};

	TIDE_UT_OK(parse(ARGC(ok), ok, &help, err, sizeof(err)));
	CU_ASSERT(f_bool && f_u64 == 4 && f_size == 65536 && f_dbl == 0.5 && !help);
	CU_ASSERT_STRING_EQUAL(f_str, "initiator");
	char *neg[] = {"prog", "--noverbose"};
	TIDE_UT_OK(parse(ARGC(neg), neg, &help, err, sizeof(err)));
	CU_ASSERT(!f_bool);
	char *bval[] = {"prog", "--verbose=yes"};
	TIDE_UT_OK(parse(ARGC(bval), bval, &help, err, sizeof(err)));
	CU_ASSERT(f_bool);
	char *h[] = {"prog", "--threads=2", "--help", "--bogus"};
	TIDE_UT_OK(parse(ARGC(h), h, &help, err, sizeof(err)));
	CU_ASSERT(help && f_u64 == 2);
	char *h1[] = {"prog", "-h"};
	TIDE_UT_OK(parse(ARGC(h1), h1, &help, err, sizeof(err)));
	CU_ASSERT(help);
}

static void
test_table_refusals_name_the_flag(void)
{
	struct {
		char *argv[3];
		const char *want;
	} cases[] = {
		{{"prog", "--block_size=12X"}, "--block_size: '12X' is not a size"},
		{{"prog", "--threads=0"}, "--threads: '0' is not an integer in 1..64"},
		{{"prog", "--ratio=2"}, "--ratio: '2' is not a number"},
		{{"prog", "--mode=both"}, "--mode: 'both' is not one of: target initiator"},
		{{"prog", "--verbose=maybe"}, "--verbose: 'maybe' is not a boolean"},
		{{"prog", "--no_such_flag=1"}, "unknown flag '--no_such_flag'"},
		{{"prog", "--nothreads"}, "unknown flag '--nothreads'"},
		{{"prog", "stray"}, "unexpected argument 'stray'"},
		{{"prog", "--threads"}, "flag '--threads' is missing its value"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";
		bool help;
		int argc = cases[i].argv[2] != NULL ? 3 : 2;

		CU_ASSERT_EQUAL(parse(argc, cases[i].argv, &help, err, sizeof(err)), -EINVAL);
		if (strstr(err, cases[i].want) == NULL)
			CU_FAIL_FATAL("refusal text does not say what was wrong");
	}
}

/* A program's own table behind the walker (what mooncake_master does). */
struct own {
	int found, set;
	char last[64];
};

static void *
own_find(void *ctx, const char *name, size_t len, bool *is_bool)
{
	struct own *o = ctx;

	o->found++;
	if (len == 4 && strncmp(name, "port", 4) == 0) {
		*is_bool = false;
		return o;
	}
	if (len == 6 && strncmp(name, "enable", 6) == 0) {
		*is_bool = true;
		return &o->set;
	}
	return NULL;
}

static int
own_set(void *ctx, void *f, const char *v, char *err, size_t errlen)
{
	struct own *o = ctx;

	if (strcmp(v, "bad") == 0) {
		snprintf(err, errlen, "illegal value '%s'", v);
		return -EINVAL;
	}
	o->set++;
	snprintf(o->last, sizeof(o->last), "%s=%s", f == o ? "port" : "enable", v);
	return 0;
}

static void
test_walker_skip_unknown(void)
{
	struct own o = {0};
	struct tide_flags_walker w = {
		.find = own_find, .set = own_set, .ctx = &o, .skip_unknown = true};
	char err[128] = "";
	/* Unknown flags of newer stock masters (with or without a value), a positional
	 * argument: skipped, not fatal; the known ones still land. */
	char *argv[] = {"master",     "--future_flag", "42",    "--other=1",  "positional",
			"--noenable", "--port",        "50051", "--flag_last"};

	TIDE_UT_OK(tide_flags_walk(ARGC(argv), argv, &w, err, sizeof(err)));
	CU_ASSERT_EQUAL(o.set, 2);
	CU_ASSERT_STRING_EQUAL(o.last, "port=50051");
	char *bad[] = {"master", "--port=bad"};
	CU_ASSERT_EQUAL(tide_flags_walk(ARGC(bad), bad, &w, err, sizeof(err)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "illegal value 'bad'");
	char *missing[] = {"master", "--port"};
	CU_ASSERT_EQUAL(tide_flags_walk(ARGC(missing), missing, &w, err, sizeof(err)), -EINVAL);
	char *h[] = {"master", "-h"};
	CU_ASSERT_EQUAL(tide_flags_walk(ARGC(h), h, &w, err, sizeof(err)), 1);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("flags", NULL, NULL);

	CU_add_test(s, "value_parsers", test_value_parsers);
	CU_add_test(s, "table_forms", test_table_forms);
	CU_add_test(s, "table_refusals_name_the_flag", test_table_refusals_name_the_flag);
	CU_add_test(s, "walker_skip_unknown", test_walker_skip_unknown);
}

TIDE_UT_MAIN(register_tests)
