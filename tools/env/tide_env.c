/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-env: check, list and query the per-node environment file.
 *
 * Exit status: 0 success; 1 the configuration has errors (all printed to
 * stderr) or the key is unknown; 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_nodeenv.h"

/* Every error line of a file full of mistakes: 64 KiB is ~500 lines. */
#define ERRBUF_LEN (64 * 1024)

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: tide-env check [FILE]      load and print every effective key with its "
		"source\n"
		"       tide-env get KEY [FILE]    print one effective value (for scripts)\n"
		"       tide-env keys              list every key with its type, default and "
		"meaning\n"
		"       tide-env --help\n"
		"\n"
		"FILE defaults to $%s, else %s (a missing default file is not an error).\n"
		"Precedence: environment > file > built-in default.\n"
		"Exit status: 0 ok, 1 configuration errors (printed to stderr), 2 usage.\n",
		TIDE_NODEENV_PATH_VAR, TIDE_NODEENV_DEFAULT_PATH);
}

static int
load(struct tide_nodeenv *ne, const char *path)
{
	char *err = malloc(ERRBUF_LEN);
	int rc;

	if (err == NULL) {
		fprintf(stderr, "tide-env: out of memory\n");
		return 1;
	}
	rc = tide_nodeenv_load(ne, path, NULL, err, ERRBUF_LEN);
	if (rc != 0) {
		fputs(err, stderr);
		fprintf(stderr, "tide-env: configuration has errors (%s)\n", strerror(-rc));
	}
	free(err);
	return rc == 0 ? 0 : 1;
}

static int
cmd_check(const char *path)
{
	struct tide_nodeenv *ne = malloc(sizeof(*ne));
	int rc;

	if (ne == NULL) {
		fprintf(stderr, "tide-env: out of memory\n");
		return 1;
	}
	rc = load(ne, path);
	if (rc == 0) {
		if (ne->path[0] != '\0')
			printf("# effective node environment; file: %s\n", ne->path);
		else
			printf("# effective node environment; no file (environment and defaults "
			       "only)\n");
		tide_nodeenv_dump(ne, stdout);
	}
	free(ne);
	return rc;
}

static int
cmd_get(const char *key, const char *path)
{
	char val[TIDE_NODEENV_TEXT_LEN];
	struct tide_nodeenv *ne;
	int rc;

	if (tide_nodeenv_key_index(key) < 0) {
		fprintf(stderr, "tide-env: %s: unknown key ('tide-env keys' lists all)\n", key);
		return 1;
	}
	ne = malloc(sizeof(*ne));
	if (ne == NULL) {
		fprintf(stderr, "tide-env: out of memory\n");
		return 1;
	}
	rc = load(ne, path);
	if (rc == 0) {
		tide_nodeenv_format(ne, key, val, sizeof(val));
		printf("%s\n", val);
	}
	free(ne);
	return rc;
}

static int
cmd_keys(void)
{
	for (size_t i = 0; i < tide_nodeenv_nkeys(); i++) {
		const char *def = tide_nodeenv_key_default(i);

		printf("%s\n    valid:   %s\n    default: %s\n    %s\n", tide_nodeenv_key_name(i),
		       tide_nodeenv_key_type(i), def[0] != '\0' ? def : "(empty)",
		       tide_nodeenv_key_doc(i));
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (cmd == NULL) {
		usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "check") == 0 && argc <= 3)
		return cmd_check(argc == 3 ? argv[2] : NULL);
	if (strcmp(cmd, "get") == 0 && (argc == 3 || argc == 4))
		return cmd_get(argv[2], argc == 4 ? argv[3] : NULL);
	if (strcmp(cmd, "keys") == 0 && argc == 2)
		return cmd_keys();
	usage(stderr);
	return 2;
}
