/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the node-file parser (engine/lib/nodeenv/nodeenv.c and
 * the value parsers of nodeenv_value.c).
 *
 * The input is loaded as a node file (through a memfd, so the real
 * getline/lexer path runs), and again, line by line, as environment entries
 * over an empty file. A file that loads cleanly must dump to a file that
 * loads cleanly to the same values (tide_nodeenv_dump promises a valid node
 * file), and every key must format and report its source. The input as one
 * string also goes through the size and TIDE_FAULT parsers.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tide_nodeenv.h"

#include "fuzz_common.h"

#define MAX_ENV 64

static int file_fd = -1, dump_fd = -1, empty_fd = -1;
static char file_path[64], dump_path[64], empty_path[64];
static struct tide_nodeenv *ne, *ne2;
static char err[16384];

static void
put_file(int fd, const void *p, size_t n)
{
	TRAP_IF(ftruncate(fd, 0) != 0);
	TRAP_IF(n > 0 && pwrite(fd, p, n, 0) != (ssize_t)n);
}

/* Can tide_nodeenv_dump write this value back (see its quoting rules)? */
static bool
dumpable(const char *v)
{
	return strchr(v, '\'') == NULL || strpbrk(v, "$`\\\"") == NULL;
}

static void
check_keys(const struct tide_nodeenv *e)
{
	for (size_t i = 0; i < tide_nodeenv_nkeys(); i++) {
		const char *k = tide_nodeenv_key_name(i);
		char v[TIDE_NODEENV_TEXT_LEN], src[TIDE_NODEENV_PATHN_LEN + 64];
		enum tide_nodeenv_src s;
		uint32_t line;

		TRAP_IF(k == NULL || tide_nodeenv_key_index(k) != (int)i);
		TRAP_IF(tide_nodeenv_format(e, k, v, sizeof(v)) != 0);
		TRAP_IF(tide_nodeenv_source(e, k, &s, &line) != 0);
		TRAP_IF((s == TIDE_NODEENV_SRC_FILE) != (line != 0));
		TRAP_IF(tide_nodeenv_source_str(e, k, src, sizeof(src)) < 0);
	}
}

/* A clean load dumps to a file that loads to the same values. */
static void
round_trip(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	char *const env[] = {NULL};
	int rc;

	TRAP_IF(f == NULL);
	tide_nodeenv_dump(ne, f);
	TRAP_IF(fclose(f) != 0);
	put_file(dump_fd, text, len);
	rc = tide_nodeenv_load(ne2, dump_path, env, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "dump does not load back:\n%s\n--- dump:\n%s\n", err, text);
		__builtin_trap();
	}
	for (size_t i = 0; i < tide_nodeenv_nkeys(); i++) {
		const char *k = tide_nodeenv_key_name(i);
		char a[TIDE_NODEENV_TEXT_LEN], b[TIDE_NODEENV_TEXT_LEN];

		TRAP_IF(tide_nodeenv_format(ne, k, a, sizeof(a)) != 0);
		TRAP_IF(tide_nodeenv_format(ne2, k, b, sizeof(b)) != 0);
		if (dumpable(a) && strcmp(a, b) != 0) {
			fprintf(stderr, "%s: '%s' dumped, loaded back as '%s'\n", k, a, b);
			__builtin_trap();
		}
	}
	free(text);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tide_log_set_level(TIDE_LOG_ERR);
	file_fd = memfd_create("nodeenv-fuzz", MFD_CLOEXEC);
	dump_fd = memfd_create("nodeenv-dump", MFD_CLOEXEC);
	empty_fd = memfd_create("nodeenv-empty", MFD_CLOEXEC);
	ne = malloc(sizeof(*ne));
	ne2 = malloc(sizeof(*ne2));
	if (file_fd < 0 || dump_fd < 0 || empty_fd < 0 || ne == NULL || ne2 == NULL)
		abort();
	snprintf(file_path, sizeof(file_path), "/proc/self/fd/%d", file_fd);
	snprintf(dump_path, sizeof(dump_path), "/proc/self/fd/%d", dump_fd);
	snprintf(empty_path, sizeof(empty_path), "/proc/self/fd/%d", empty_fd);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *const no_env[] = {NULL};
	char *env[MAX_ENV + 1], *z = malloc(size + 1), *save = NULL, *line;
	struct tide_nodeenv_fault fault;
	uint64_t bytes;
	size_t n = 0;
	int rc;

	TRAP_IF(z == NULL);
	/* As a node file. */
	put_file(file_fd, data, size);
	rc = tide_nodeenv_load(ne, file_path, no_env, err, sizeof(err));
	TRAP_IF(rc != 0 && rc != -EINVAL);
	TRAP_IF((rc == 0) != (err[0] == '\0'));
	check_keys(ne);
	if (rc == 0)
		round_trip();

	/* As environment entries (first MAX_ENV lines), over an empty file. */
	memcpy(z, data, size);
	z[size] = '\0';
	for (line = strtok_r(z, "\n", &save); line != NULL && n < MAX_ENV;
	     line = strtok_r(NULL, "\n", &save))
		env[n++] = line;
	env[n] = NULL;
	rc = tide_nodeenv_load(ne, empty_path, env, err, sizeof(err));
	TRAP_IF(rc != 0 && rc != -EINVAL);
	check_keys(ne);

	/* As one value. */
	memcpy(z, data, size);
	if (tide_nodeenv_parse_size(z, &bytes) == 0)
		TRAP_IF(z[0] == '\0');
	(void)tide_nodeenv_parse_fault(z, &fault, err, sizeof(err));
	free(z);
	return 0;
}
