/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * gflags-style command lines for the tools that mirror Mooncake programs:
 * `--flag=v`, `--flag v`, `--flag` / `--noflag` for booleans. A table of
 * flags with typed destinations; sizes accept the node file's suffixes
 * (4096, 64K, 64KiB, 1G...). Every error names the flag and the bad value.
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
