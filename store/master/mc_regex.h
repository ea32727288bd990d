/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the master table: the regular expressions of
 * GetReplicaListByRegex and RemoveByRegex, with the syntax the stock master
 * accepts and bounded cost.
 *
 * Syntax: the stock master compiles the pattern with
 * std::regex(pattern, std::regex::ECMAScript) and keeps a key when
 * std::regex_search finds a match anywhere in it. This is PCRE2 (8-bit, no
 * UTF, no JIT) set to behave as ECMAScript there: \d \w \s \b and their
 * negations, classes, (?:) (?=) (?!), lazy quantifiers, back-references
 * (one to a group that has not matched matches the empty string), \uhhhh
 * and \xhh escapes, "[^]" (any byte) and "[]" (nothing), '.' matching any
 * byte but '\n' and '\r', '$' only at the very end. A few PCRE2 extensions
 * (lookbehind, possessive quantifiers, inline flags) are accepted as well.
 * Keys are matched as bytes over their whole length, NULs included.
 *
 * Cost: every byte PCRE2 allocates for one expression (the compiled code,
 * the match data, the backtracking frames) comes out of a budget of
 * `memory` bytes; a pattern longer than MCT_REGEX_MAX_PATTERN or one that
 * does not compile within the budget is refused; one match may take at most
 * `match_limit` backtracking steps. So neither a pattern nor a key can make
 * one request take unbounded memory or time per key.
 *
 * Thread: a compiled expression is used by one thread at a time.
 */
#ifndef TIDE_MC_REGEX_H
#define TIDE_MC_REGEX_H

#include <stddef.h>
#include <stdint.h>

/** Longest pattern accepted (bytes). */
#define MCT_REGEX_MAX_PATTERN (64u << 10)

struct mct_regex;

/**
 * Compile a pattern (len bytes; NULs allowed, as in a std::string).
 * \param match_limit  Backtracking steps one search may take (>= 1).
 * \param memory       Bytes the expression may allocate, compiling and
 *                     matching (>= 16 KiB).
 * \param why          Receives the reason on failure (may be NULL).
 * \return 0; -EINVAL not a valid expression; -E2BIG longer than
 *         MCT_REGEX_MAX_PATTERN or too large for the budget; -ENOMEM.
 */
int mct_regex_compile(const char *pat, size_t len, uint32_t match_limit, uint64_t memory,
		      struct mct_regex **out, char *why, size_t whylen);

/**
 * Search the expression anywhere in s[0..n) (std::regex_search).
 * \return 1 found; 0 not found; -E2BIG a limit (steps, memory) was hit;
 *         -EINVAL another matching error.
 */
int mct_regex_search(struct mct_regex *re, const char *s, size_t n);

/** Free (NULL-safe). */
void mct_regex_free(struct mct_regex *re);

#endif /* TIDE_MC_REGEX_H */
