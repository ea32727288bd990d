/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * gflags-style command lines for the programs that mirror Mooncake's
 * (mooncake_master, tide-bench, the stock-protocol peer): `--flag=v`,
 * `--flag v`, `-flag`, `--flag` / `--noflag` for booleans, `--help`.
 *
 * Two layers, so every program reads a command line the same way:
 *   - tide_flags_walk(): the one walk over argv, with the program's own flag
 *     table behind two callbacks (find a flag, give it a value), and the
 *     value parsers below;
 *   - tide_flags_parse(): a ready table of typed destinations on top of it,
 *     for the tools (mooncake_master keeps its own table: values in place,
 *     a config file and an environment behind the command line).
 * Sizes accept the node file's suffixes (4096, 64K, 64KiB, 1G...). Every error
 * names the flag and the bad value.
 */
#ifndef TIDE_FLAGS_H
#define TIDE_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tide_flag_type {
	TIDE_FLAG_BOOL,   /**< bool *dst */
	TIDE_FLAG_U64,    /**< uint64_t *dst, decimal within [min, max] */
	TIDE_FLAG_SIZE,   /**< uint64_t *dst, with size suffixes, within [min, max] */
	TIDE_FLAG_DOUBLE, /**< double *dst within [min, max] */
	TIDE_FLAG_STR,    /**< const char **dst (points into argv) */
};

struct tide_flag {
	const char *name;
	enum tide_flag_type type;
	void *dst;
	const char *help;
	double min, max;            /**< bounds for numbers (0, 0: unbounded) */
	const char *const *choices; /**< STR: NULL-terminated allowed values, or NULL */
};

/** How tide_flags_walk() reaches a program's flag table. */
struct tide_flags_walker {
	/* The flag called name[0..len), or NULL when there is none; *is_bool: it
	 * takes no value (--flag alone sets it, --noflag clears it). */
	void *(*find)(void *ctx, const char *name, size_t len, bool *is_bool);
	/* Give flag f the text v ("true"/"false" for a bare boolean): 0, or
	 * -EINVAL with the reason written to err (the walk then stops). */
	int (*set)(void *ctx, void *f, const char *v, char *err, size_t errlen);
	void *ctx;
	/* false: an unknown flag or a positional argument stops the walk with
	 * -EINVAL (the tools). true: each is logged as a warning and skipped, and an
	 * unknown flag takes the next item as its value unless it starts with '-'
	 * (gflags would stop; launchers written for stock mooncake_master pass
	 * flags of newer stock versions, and must still start it). */
	bool skip_unknown;
};

/**
 * Walk argv[1..argc) against w's table.
 * eturn 0; 1 when --help or -h was given and the table has no such flag
 *         (nothing after it is read); -EINVAL with the reason in err (unknown
 *         flag or positional argument unless skip_unknown, a value missing at
 *         the end, or w->set's refusal). Thread: any.
 */
int tide_flags_walk(int argc, char **argv, const struct tide_flags_walker *w, char *err,
		    size_t errlen);

/*
 * Value parsers shared by every flag table. Each returns 0 and stores the value,
 * or -EINVAL leaving *out untouched. Bounds: min == max == 0 means unbounded.
 */
/** A decimal integer within [min, max]. */
int tide_flags_parse_i64(const char *v, double min, double max, int64_t *out);
/** A decimal integer, not negative, within [min, max]. */
int tide_flags_parse_u64(const char *v, double min, double max, uint64_t *out);
/** A finite number within [min, max]. */
int tide_flags_parse_double(const char *v, double min, double max, double *out);
/** A duration in milliseconds: "250", "250ms", "30s", "5m", "2h" (what the
 *  stock master's duration flags accept). */
int tide_flags_parse_dur_ms(const char *v, uint64_t *out);

/**
 * Parse argv against flags[0..n). Positional arguments are refused.
 * \param[out] help  set when --help was given (nothing else is checked after it).
 * \param err        receives "--block_size: '12X' is not a size (...)" on failure.
 * \return 0; -EINVAL unknown flag, missing or bad value (err filled). Thread: any.
 */
int tide_flags_parse(const struct tide_flag *flags, size_t n, int argc, char **argv, bool *help,
		     char *err, size_t errlen);

/** Print one line per flag (name, default value, help) to stdout. Thread: any. */
void tide_flags_usage(const struct tide_flag *flags, size_t n);

#endif /* TIDE_FLAGS_H */
