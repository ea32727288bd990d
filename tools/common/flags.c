/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_flags.h"
#include "tide_nodeenv.h"

static const struct tide_flag *
find(const struct tide_flag *flags, size_t n, const char *name, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0) {
			return &flags[i];
		}
	}
	return NULL;
}

static bool
in_range(const struct tide_flag *f, double v)
{
	return (f->min == 0 && f->max == 0) || (v >= f->min && v <= f->max);
}

static int
set(const struct tide_flag *f, const char *v, char *err, size_t errlen)
{
	char *end;
	switch (f->type) {
	case TIDE_FLAG_BOOL:
		/* The one boolean syntax (engine/nodeenv). */
		if (tide_nodeenv_parse_bool(v, (bool *)f->dst) != 0) {
			snprintf(err, errlen,
				 "--%s: '%s' is not a boolean (true/false, 1/0, yes/no, on/off, "
				 "t/f, y/n)",
				 f->name, v);
			return -EINVAL;
		}
		return 0;
	case TIDE_FLAG_U64: {
		unsigned long long x;
		errno = 0;
		x = strtoull(v, &end, 10);
		if (errno != 0 || end == v || *end != '\0' || v[0] == '-' ||
		    !in_range(f, (double)x)) {
			snprintf(err, errlen, "--%s: '%s' is not an integer in %.0f..%.0f", f->name,
				 v, f->min, f->max);
			return -EINVAL;
		}
		*(uint64_t *)f->dst = x;
		return 0;
	}
	case TIDE_FLAG_SIZE: {
		uint64_t x;
		if (tide_nodeenv_parse_size(v, &x) != 0 || !in_range(f, (double)x)) {
			snprintf(err, errlen,
				 "--%s: '%s' is not a size in %.0f..%.0f bytes (examples: 4096, "
				 "64K, 1MiB, 2G)",
				 f->name, v, f->min, f->max);
			return -EINVAL;
		}
		*(uint64_t *)f->dst = x;
		return 0;
	}
	case TIDE_FLAG_DOUBLE: {
		double x;
		errno = 0;
		x = strtod(v, &end);
		if (errno != 0 || end == v || *end != '\0' || !isfinite(x) || !in_range(f, x)) {
			snprintf(err, errlen, "--%s: '%s' is not a number in %g..%g", f->name, v,
				 f->min, f->max);
			return -EINVAL;
		}
		*(double *)f->dst = x;
		return 0;
	}
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
	*help = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *val = NULL;
		const struct tide_flag *f;
		size_t len;
		bool neg = false;

		if (strncmp(a, "--", 2) != 0 && !(a[0] == '-' && a[1] != '\0' && a[1] != '-')) {
			snprintf(err, errlen, "unexpected argument '%s' (flags start with --)", a);
			return -EINVAL;
		}
		name = a + (a[1] == '-' ? 2 : 1);
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		if (eq != NULL) {
			val = eq + 1;
		}
		if ((len == 4 && strncmp(name, "help", 4) == 0) || (len == 1 && name[0] == 'h')) {
			*help = true;
			return 0;
		}
		f = find(flags, n, name, len);
		if (f == NULL && len > 2 && strncmp(name, "no", 2) == 0) {
			f = find(flags, n, name + 2, len - 2);
			neg = f != NULL && f->type == TIDE_FLAG_BOOL && val == NULL;
			if (!neg) {
				f = NULL;
			}
		}
		if (f == NULL) {
			snprintf(err, errlen, "unknown flag '--%.*s' (see --help)", (int)len, name);
			return -EINVAL;
		}
		if (f->type == TIDE_FLAG_BOOL && val == NULL) {
			*(bool *)f->dst = !neg;
			continue;
		}
		if (val == NULL) {
			if (i + 1 >= argc) {
				snprintf(err, errlen, "--%s needs a value", f->name);
				return -EINVAL;
			}
			val = argv[++i];
		}
		if (set(f, val, err, errlen) != 0) {
			return -EINVAL;
		}
	}
	return 0;
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
