/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <strings.h>
#include <time.h>

#include "tide_log.h"

int tide_log_cur_level = TIDE_LOG_NOTICE;

static const char *const level_names[] = {"error", "warn", "notice", "info", "debug"};
static const char *const level_tags[] = {"ERR ", "WARN", "NOTE", "INFO", "DBG "};

void
tide_log_set_level(enum tide_log_level level)
{
	int l = (int)level;

	if (l < TIDE_LOG_ERR)
		l = TIDE_LOG_ERR;
	if (l > TIDE_LOG_DEBUG)
		l = TIDE_LOG_DEBUG;
	__atomic_store_n(&tide_log_cur_level, l, __ATOMIC_RELAXED);
}

enum tide_log_level
tide_log_get_level(void)
{
	return (enum tide_log_level)__atomic_load_n(&tide_log_cur_level, __ATOMIC_RELAXED);
}

int
tide_log_level_parse(const char *name, enum tide_log_level *out)
{
	static const struct {
		const char *name;
		enum tide_log_level level;
	} aliases[] = {
		{"error", TIDE_LOG_ERR},    {"err", TIDE_LOG_ERR},       {"warn", TIDE_LOG_WARN},
		{"warning", TIDE_LOG_WARN}, {"notice", TIDE_LOG_NOTICE}, {"info", TIDE_LOG_INFO},
		{"debug", TIDE_LOG_DEBUG},
	};

	if (name == NULL)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		if (strcasecmp(name, aliases[i].name) == 0) {
			*out = aliases[i].level;
			return 0;
		}
	}
	return -EINVAL;
}

const char *
tide_log_level_name(enum tide_log_level level)
{
	if ((int)level < TIDE_LOG_ERR || (int)level > TIDE_LOG_DEBUG)
		return "?";
	return level_names[level];
}

void
tide_log_write(enum tide_log_level level, const char *component, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int l = (int)level;

	if (l < TIDE_LOG_ERR || l > TIDE_LOG_DEBUG)
		l = TIDE_LOG_ERR;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One fprintf per message: stdio locks the stream per call, so
	 * concurrent threads never interleave within a line. */
	fprintf(stderr, "tide %s %s: %s\n", level_tags[l], component, msg);
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool
tide_log_rl_pass(struct tide_log_rl *rl, unsigned interval_s)
{
	uint64_t now = mono_ns();

	if (now < rl->next_ns) {
		rl->suppressed++;
		return false;
	}
	rl->next_ns = now + (uint64_t)interval_s * 1000000000ull;
	if (rl->suppressed != 0) {
		tide_log_write(TIDE_LOG_NOTICE, "log", "%llu similar messages suppressed",
			       (unsigned long long)rl->suppressed);
		rl->suppressed = 0;
	}
	return true;
}
