/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Tide logging: one process-wide level, messages to stderr.
 *
 * Every message names the component that logged it (the TIDE_LOG_COMPONENT
 * macro, set per library by meson) so a line reads
 * `tide ERR  store.seg: free of unknown offset 0x1000`.
 *
 * Thread: every function here may be called from any thread. A single
 * message is written with one stdio call, so lines never interleave.
 * Hot paths must use TIDE_LOG_RATELIMIT or counters, never plain TIDE_LOG.
 */
#ifndef TIDE_LOG_H
#define TIDE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Severity, most severe first; a message is printed when its level <= the set level. */
enum tide_log_level {
	TIDE_LOG_ERR = 0,
	TIDE_LOG_WARN = 1,
	TIDE_LOG_NOTICE = 2,
	TIDE_LOG_INFO = 3,
	TIDE_LOG_DEBUG = 4,
};

#ifndef TIDE_LOG_COMPONENT
#define TIDE_LOG_COMPONENT "tide"
#endif

/**
 * Set the process-wide level. Out-of-range values are clamped.
 * Thread: any.
 */
void tide_log_set_level(enum tide_log_level level);

/** Current process-wide level. Thread: any. */
enum tide_log_level tide_log_get_level(void);

/**
 * Parse a level name: "error"/"err", "warn"/"warning", "notice", "info",
 * "debug" (case-insensitive).
 * \return 0 and *out set; -EINVAL for any other string (out untouched).
 * Thread: any.
 */
int tide_log_level_parse(const char *name, enum tide_log_level *out);

/** Name of a level ("error", "warn", ...). Never NULL. Thread: any. */
const char *tide_log_level_name(enum tide_log_level level);

/**
 * Print one message if level is enabled. Prefer the TIDE_LOG macro.
 * Thread: any.
 */
void tide_log_write(enum tide_log_level level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** True when messages of this level are printed (cheap; check before formatting). */
static inline bool
tide_log_enabled(enum tide_log_level level)
{
	extern int tide_log_cur_level;
	return (int)level <= __atomic_load_n(&tide_log_cur_level, __ATOMIC_RELAXED);
}

#define TIDE_LOG(lvl, ...)                                                               \
	do {                                                                             \
		if (tide_log_enabled(TIDE_LOG_##lvl))                                    \
			tide_log_write(TIDE_LOG_##lvl, TIDE_LOG_COMPONENT, __VA_ARGS__); \
	} while (0)

/**
 * Like TIDE_LOG but prints at most once per `interval_s` seconds from this
 * call site, counting what it suppressed (reported with the next message).
 * For the data path: malformed packets, rejected requests.
 */
#define TIDE_LOG_RATELIMIT(lvl, interval_s, ...)                                                 \
	do {                                                                                     \
		static struct tide_log_rl tide_rl_;                                              \
		if (tide_log_enabled(TIDE_LOG_##lvl) && tide_log_rl_pass(&tide_rl_, interval_s)) \
			tide_log_write(TIDE_LOG_##lvl, TIDE_LOG_COMPONENT, __VA_ARGS__);         \
	} while (0)

/** Per-call-site rate-limit state; zero-initialised. */
struct tide_log_rl {
	uint64_t next_ns;    /**< monotonic time before which messages are suppressed */
	uint64_t suppressed; /**< messages dropped since the last one printed */
};

/**
 * Rate-limit decision for one call site; prints a "suppressed N" note when
 * passing after a quiet period. Racy by design between threads (a lost
 * update only lets one extra message through).
 * \return true when the message should be printed.
 */
bool tide_log_rl_pass(struct tide_log_rl *rl, unsigned interval_s);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_LOG_H */
