/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_flags.h"
#include "tide_log.h"
#include "tide_nodeenv.h"

/* ------------------------------------------------------------------ value parsers */

static bool
in_range(double min, double max, double v)
{
	return (min == 0 && max == 0) || (v >= min && v <= max);
}

int
tide_flags_parse_i64(const char *v, double min, double max, int64_t *out)
{
	char *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno != 0 || !in_range(min, max, (double)x))
		return -EINVAL;
	*out = x;
	return 0;
}

int
tide_flags_parse_u64(const char *v, double min, double max, uint64_t *out)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno != 0 || v[0] == '-' ||
	    !in_range(min, max, (double)x))
		return -EINVAL;
	*out = x;
	return 0;
}

int
tide_flags_parse_double(const char *v, double min, double max, double *out)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (*v == '\0' || *end != '\0' || errno != 0 || !isfinite(x) || !in_range(min, max, x))
		return -EINVAL;
	*out = x;
	return 0;
}

int
tide_flags_parse_dur_ms(const char *v, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t ms;
	} units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
	unsigned long long n;
	char *end;

	if (*v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			if (n > UINT64_MAX / units[i].ms)
				return -EINVAL;
			*out = (uint64_t)n * units[i].ms;
			return 0;
		}
	}
	return -EINVAL;
}

/* ------------------------------------------------------------------------ the walk */

int
tide_flags_walk(int argc, char **argv, const struct tide_flags_walker *w, char *err, size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *val;
		bool is_bool = false, neg = false;
		size_t len;
		void *f;

		if (a[0] != '-' || a[1] == '\0') {
			if (w->skip_unknown) {
				TIDE_LOG(WARN, "ignoring positional argument '%s'", a);
				continue;
			}
			snprintf(err, errlen, "unexpected argument '%s' (flags start with --)", a);
			return -EINVAL;
		}
		name = a + 1 + (a[1] == '-');
		eq = strchr(name, '=');
		len = eq != NULL ? (size_t)(eq - name) : strlen(name);
		val = eq != NULL ? eq + 1 : NULL;
		f = w->find(w->ctx, name, len, &is_bool);
		if (f == NULL && val == NULL && len > 2 && strncmp(name, "no", 2) == 0) {
			/* --noflag: only for booleans, and only without a value. */
			f = w->find(w->ctx, name + 2, len - 2, &is_bool);
			neg = f != NULL && is_bool;
			if (!neg)
				f = NULL;
		}
		if (f == NULL) {
			if ((len == 4 && strncmp(name, "help", 4) == 0) ||
			    (len == 1 && name[0] == 'h'))
				return 1;
			if (!w->skip_unknown) {
				snprintf(err, errlen, "unknown flag '--%.*s' (see --help)",
					 (int)len, name);
				return -EINVAL;
			}
			if (val == NULL && i + 1 < argc && argv[i + 1][0] != '-')
				val = argv[++i];
			TIDE_LOG(WARN, "unknown flag --%.*s%s%s ignored", (int)len, name,
				 val != NULL ? "=" : "", val != NULL ? val : "");
			continue;
		}
		if (val == NULL) {
			if (is_bool) {
				val = neg ? "false" : "true";
			} else if (i + 1 < argc) {
				val = argv[++i];
			} else {
				snprintf(err, errlen, "flag '--%.*s' is missing its value",
					 (int)len, name);
				return -EINVAL;
			}
		}
		if (w->set(w->ctx, f, val, err, errlen) != 0)
			return -EINVAL;
	}
	return 0;
}

/* ------------------------------------------------- a table of typed destinations */

struct table {
	const struct tide_flag *flags;
	size_t n;
};

static void *
table_find(void *ctx, const char *name, size_t len, bool *is_bool)
{
	const struct table *t = ctx;

	for (size_t i = 0; i < t->n; i++) {
		if (strlen(t->flags[i].name) == len && strncmp(t->flags[i].name, name, len) == 0) {
			*is_bool = t->flags[i].type == TIDE_FLAG_BOOL;
			return (void *)&t->flags[i];
		}
	}
	return NULL;
}

static int
table_set(void *ctx, void *fp, const char *v, char *err, size_t errlen)
{
	const struct tide_flag *f = fp;

	(void)ctx;
	switch (f->type) {
	case TIDE_FLAG_BOOL:
		/* The one boolean syntax (engine/lib/nodeenv). */
		if (tide_nodeenv_parse_bool(v, (bool *)f->dst) != 0) {
			snprintf(err, errlen,
				 "--%s: '%s' is not a boolean (true/false, 1/0, yes/no, on/off, "
				 "t/f, y/n)",
				 f->name, v);
			return -EINVAL;
		}
		return 0;
	case TIDE_FLAG_U64:
		if (tide_flags_parse_u64(v, f->min, f->max, (uint64_t *)f->dst) != 0) {
			snprintf(err, errlen, "--%s: '%s' is not an integer in %.0f..%.0f", f->name,
				 v, f->min, f->max);
			return -EINVAL;
		}
		return 0;
	case TIDE_FLAG_SIZE: {
		uint64_t x;
		if (tide_nodeenv_parse_size(v, &x) != 0 || !in_range(f->min, f->max, (double)x)) {
			snprintf(err, errlen,
				 "--%s: '%s' is not a size in %.0f..%.0f bytes (examples: 4096, "
				 "64K, 1MiB, 2G)",
				 f->name, v, f->min, f->max);
			return -EINVAL;
		}
		*(uint64_t *)f->dst = x;
		return 0;
	}
	case TIDE_FLAG_DOUBLE:
		if (tide_flags_parse_double(v, f->min, f->max, (double *)f->dst) != 0) {
			snprintf(err, errlen, "--%s: '%s' is not a number in %g..%g", f->name, v,
				 f->min, f->max);
			return -EINVAL;
		}
		return 0;
	case TIDE_FLAG_STR:
		if (f->choices != NULL) {
			size_t i;
			for (i = 0; f->choices[i] != NULL; i++) {
				if (strcmp(f->choices[i], v) == 0) {
					break;
				}
			}
			if (f->choices[i] == NULL) {
				int off = snprintf(err, errlen,
						   "--%s: '%s' is not one of:", f->name, v);
				for (i = 0;
				     f->choices[i] != NULL && off > 0 && (size_t)off < errlen;
				     i++) {
					off += snprintf(err + off, errlen - (size_t)off, " %s",
							f->choices[i]);
				}
				return -EINVAL;
			}
		}
		*(const char **)f->dst = v;
		return 0;
	}
	return -EINVAL;
}

int
tide_flags_parse(const struct tide_flag *flags, size_t n, int argc, char **argv, bool *help,
		 char *err, size_t errlen)
{
	struct table t = {flags, n};
	struct tide_flags_walker w = {.find = table_find, .set = table_set, .ctx = &t};
	int rc = tide_flags_walk(argc, argv, &w, err, errlen);

	*help = rc == 1;
	return rc < 0 ? rc : 0;
}

void
tide_flags_usage(const struct tide_flag *flags, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct tide_flag *f = &flags[i];
		char def[64];
		switch (f->type) {
		case TIDE_FLAG_BOOL:
			snprintf(def, sizeof(def), "%s", *(bool *)f->dst ? "true" : "false");
			break;
		case TIDE_FLAG_U64:
		case TIDE_FLAG_SIZE:
			snprintf(def, sizeof(def), "%" PRIu64, *(uint64_t *)f->dst);
			break;
		case TIDE_FLAG_DOUBLE:
			snprintf(def, sizeof(def), "%g", *(double *)f->dst);
			break;
		case TIDE_FLAG_STR:
			snprintf(def, sizeof(def), "%s",
				 *(const char **)f->dst ? *(const char **)f->dst : "");
			break;
		}
		printf("  --%-22s %s (default: %s)\n", f->name, f->help, def);
	}
}
