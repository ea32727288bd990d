/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for engine/lib/nodeenv (nodeenv.c and nodeenv_value.c). Files are
 * written into a mkdtemp directory; the environment is always passed as an
 * explicit array so the process environment never leaks in. The sh
 * agreement tests run /bin/sh on the same files and compare.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tide_nodeenv.h"
#include "tide_ut.h"

#ifndef TIDE_SOURCE_ROOT
#error "TIDE_SOURCE_ROOT must name the source tree (set by meson)"
#endif

static char tmpdir[] = "/tmp/nodeenv_ut.XXXXXX";
static char *const no_env[] = {NULL};
static char errbuf[16384];

static int
suite_init(void)
{
	return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int
rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
suite_clean(void)
{
	return nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Write text to tmpdir/name; path receives the full path. */
static void
write_file(const char *name, const char *text, char *path, size_t n)
{
	FILE *f;

	snprintf(path, n, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

static char node_path[512];

/* Write text as tmpdir/node.env and load it explicitly. */
static int
load_text(const char *text, char *const *env, struct tide_nodeenv *ne)
{
	write_file("node.env", text, node_path, sizeof(node_path));
	return tide_nodeenv_load(ne, node_path, env, errbuf, sizeof(errbuf));
}

static unsigned
count_lines(const char *s)
{
	unsigned n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* err contains "<node_path>:<line>: <rest>" (rest may be a prefix of the message). */
static bool
has_file_err(unsigned line, const char *rest)
{
	char want[2048];

	snprintf(want, sizeof(want), "%s:%u: %s", node_path, line, rest);
	return strstr(errbuf, want) != NULL;
}

static void
fmt(const struct tide_nodeenv *ne, const char *key, char *buf, size_t n)
{
	CU_ASSERT_EQUAL(tide_nodeenv_format(ne, key, buf, n), 0);
}

/* ---- sizes ---- */

static void
test_parse_size_dialect(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
		{"0", 0},
		{"1073741824", UINT64_C(1073741824)},
		{"1b", 1},
		{"1k", 1024},
		{"1K", 1024},
		{"1kb", 1024},
		{"1KB", 1024},
		{"2mb", UINT64_C(2) << 20},
		{"2Mb", UINT64_C(2) << 20},
		{"8g", UINT64_C(8) << 30},
		{"8GB", UINT64_C(8) << 30},
		{"3.125gb", UINT64_C(3355443200)},
		{"16tb", UINT64_C(16) << 40},
		{"1.5k", 1536},
		{"0.5b", 0},
		{"1.0009765625k", 1025},
		{"1.9999b", 1},
		{"007mb", UINT64_C(7) << 20},
		{"18446744073709551615", UINT64_MAX},
		{"16777215tb", UINT64_C(16777215) << 40},
	};
	static const char *const bad[] = {
		"8gq", "-1",   " 8gb", "8gb ",  "8 gb", "",
		"1.",  ".5",   "1e3",  "0x10",  "+1",   "1.0000000000000000001",
		"gb",  "1kbb", "1..5", "1,5gb", "inf",  "nan",
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 12345;
		CU_ASSERT_EQUAL(tide_nodeenv_parse_size(good[i].s, &v), 0);
		CU_ASSERT_EQUAL(v, good[i].v);
		if (v != good[i].v)
			fprintf(stderr, "size '%s' -> %llu\n", good[i].s, (unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 12345;
		CU_ASSERT_EQUAL(tide_nodeenv_parse_size(bad[i], &v), -EINVAL);
		CU_ASSERT_EQUAL(v, 12345);
	}
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size(NULL, &v), -EINVAL);
}

static void
test_parse_size_overflow(void)
{
	uint64_t v = 7;

	/* The IEC spellings the tools' --help uses: one size syntax everywhere. */
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("64KiB", &v), 0);
	CU_ASSERT_EQUAL(v, 65536);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("1.5GiB", &v), 0);
	CU_ASSERT_EQUAL(v, 3ULL << 29);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("1mib", &v), 0);
	CU_ASSERT_EQUAL(v, 1ULL << 20);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("2TiB", &v), 0);
	CU_ASSERT_EQUAL(v, 2ULL << 40);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("1ki", &v), -EINVAL);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("18446744073709551616", &v), -ERANGE);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("16777216tb", &v), -ERANGE);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("16777215.9999999tb", &v), 0);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("17179869184gb", &v), -ERANGE);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("99999999999999999999999999999999", &v), -ERANGE);
	/* Malformed wins over too large: the user must fix the syntax first. */
	CU_ASSERT_EQUAL(tide_nodeenv_parse_size("99999999999999999999999gq", &v), -EINVAL);
}

/* ---- defaults and table ---- */

static void
test_defaults_match_spec(void)
{
	struct tide_nodeenv ne;
	char buf[256];

	tide_nodeenv_defaults(&ne);
	CU_ASSERT_STRING_EQUAL(ne.master, "127.0.0.1:50051");
	CU_ASSERT_STRING_EQUAL(ne.local_hostname, "localhost");
	CU_ASSERT_EQUAL(ne.protocol, TIDE_NODEENV_PROTO_TCP);
	CU_ASSERT_STRING_EQUAL(ne.device, "");
	CU_ASSERT_STRING_EQUAL(ne.metadata_server, "P2PHANDSHAKE");
	CU_ASSERT_EQUAL(ne.global_segment_size, UINT64_C(3355443200));
	CU_ASSERT_EQUAL(ne.local_buffer_size, UINT64_C(1073741824));
	CU_ASSERT_STRING_EQUAL(ne.tenant_id, "default");
	CU_ASSERT_FALSE(ne.force_tcp);
	CU_ASSERT_TRUE(ne.store_memcpy);
	CU_ASSERT_FALSE(ne.tcp_bind_address_set);
	CU_ASSERT_EQUAL(ne.min_rpc_port, 15000);
	CU_ASSERT_EQUAL(ne.max_rpc_port, 17000);
	CU_ASSERT_EQUAL(ne.rpc_timeout_ms, 30000);
	CU_ASSERT_EQUAL(ne.rpc_connect_timeout_ms, 30000);
	CU_ASSERT_STRING_EQUAL(ne.dpdk_device, "");
	CU_ASSERT_FALSE(ne.data_ip_set);
	CU_ASSERT_EQUAL(ne.data_netmask.s_addr, htonl(0xffffff00));
	CU_ASSERT_EQUAL(ne.data_prefix_len, 24);
	CU_ASSERT_FALSE(ne.gateway_set);
	CU_ASSERT_FALSE(ne.data_mac_set);
	CU_ASSERT_EQUAL(ne.lcores_per_numa, 1);
	CU_ASSERT_EQUAL(ne.hugepages, TIDE_NODEENV_HUGE_AUTO);
	CU_ASSERT_EQUAL(ne.hugepage_size, UINT64_C(2) << 20);
	CU_ASSERT_EQUAL(ne.hugepage_mem, UINT64_C(512) << 20);
	CU_ASSERT_EQUAL(ne.rxd, 1024);
	CU_ASSERT_EQUAL(ne.txd, 1024);
	CU_ASSERT_EQUAL(ne.mtu, 1500);
	CU_ASSERT_EQUAL(ne.idle, TIDE_NODEENV_IDLE_ADAPTIVE);
	CU_ASSERT_EQUAL(ne.idle_sleep_us, 100);
	CU_ASSERT_FALSE(ne.fault.enabled);
	CU_ASSERT_EQUAL(ne.log_level, TIDE_LOG_NOTICE);
	CU_ASSERT_STRING_EQUAL(ne.file_prefix, "tide");
	CU_ASSERT_STRING_EQUAL(ne.eal_args, "");
	CU_ASSERT_STRING_EQUAL(ne.agent_socket, "/run/tide/agent.sock");
	CU_ASSERT_EQUAL(ne.agent, TIDE_NODEENV_AGENT_AUTO);
	CU_ASSERT_FALSE(ne.pin_unread);
	CU_ASSERT_STRING_EQUAL(ne.path, "");
	for (size_t i = 0; i < tide_nodeenv_nkeys(); i++) {
		CU_ASSERT_EQUAL(ne.origin[i].src, TIDE_NODEENV_SRC_DEFAULT);
		CU_ASSERT_EQUAL(
			tide_nodeenv_source_str(&ne, tide_nodeenv_key_name(i), buf, sizeof(buf)),
			0);
		CU_ASSERT_STRING_EQUAL(buf, "default");
	}
}

static void
test_key_table_accessors(void)
{
	size_t n = tide_nodeenv_nkeys();
	struct tide_nodeenv ne;
	char buf[64];

	CU_ASSERT_TRUE(n >= 40 && n <= TIDE_NODEENV_MAX_KEYS);
	for (size_t i = 0; i < n; i++) {
		const char *name = tide_nodeenv_key_name(i);

		CU_ASSERT_PTR_NOT_NULL_FATAL(name);
		CU_ASSERT_PTR_NOT_NULL(tide_nodeenv_key_doc(i));
		CU_ASSERT_PTR_NOT_NULL(tide_nodeenv_key_type(i));
		CU_ASSERT_PTR_NOT_NULL(tide_nodeenv_key_default(i));
		CU_ASSERT_EQUAL(tide_nodeenv_key_index(name), (int)i);
	}
	CU_ASSERT_PTR_NULL(tide_nodeenv_key_name(n));
	CU_ASSERT_PTR_NULL(tide_nodeenv_key_doc(n));
	CU_ASSERT_EQUAL(tide_nodeenv_key_index("TIDE_NOPE"), -ENOENT);
	CU_ASSERT_EQUAL(tide_nodeenv_key_index(NULL), -ENOENT);
	tide_nodeenv_defaults(&ne);
	CU_ASSERT_EQUAL(tide_nodeenv_format(&ne, "NOPE", buf, sizeof(buf)), -ENOENT);
	CU_ASSERT_EQUAL(tide_nodeenv_source(&ne, "NOPE", NULL, NULL), -ENOENT);
	CU_ASSERT_EQUAL(tide_nodeenv_format(&ne, "TIDE_AGENT_SOCKET", buf, 5), -ENOSPC);
	CU_ASSERT_STRING_EQUAL(buf, "/run");
}

/* ---- file syntax ---- */

static void
test_load_syntax_accepted(void)
{
	static const struct {
		const char *text;
		const char *want; /* TIDE_EAL_ARGS */
	} cases[] = {
		{"TIDE_EAL_ARGS=--no-pci\n", "--no-pci"},
		{"export TIDE_EAL_ARGS=--no-pci\n", "--no-pci"},
		{"export\tTIDE_EAL_ARGS=x\n", "x"},
		{"   TIDE_EAL_ARGS=x   \n", "x"},
		{"TIDE_EAL_ARGS=x # trailing comment\n", "x"},
		{"TIDE_EAL_ARGS=x\t# tab then comment\n", "x"},
		{"TIDE_EAL_ARGS='--a --b'\n", "--a --b"},
		{"TIDE_EAL_ARGS=\"--a --b\"\n", "--a --b"},
		{"TIDE_EAL_ARGS='$HOME `id` \\n \"q\"'\n", "$HOME `id` \\n \"q\""},
		{"TIDE_EAL_ARGS=\"it's\"\n", "it's"},
		{"TIDE_EAL_ARGS='x' # c\n", "x"},
		{"TIDE_EAL_ARGS=\n", ""},
		{"TIDE_EAL_ARGS=''\n", ""},
		{"TIDE_EAL_ARGS=\"\"\n", ""},
		{"TIDE_EAL_ARGS=   # empty, then a comment\n", ""},
		{"TIDE_EAL_ARGS=a#b\n", "a#b"},
		{"TIDE_EAL_ARGS=#x\n", "#x"},
		{"TIDE_EAL_ARGS=--x=1,y=2:z@w%v+u\n", "--x=1,y=2:z@w%v+u"},
		{"# only a comment\n\n   \n\t\nTIDE_EAL_ARGS=x", "x"},
		{"TIDE_EAL_ARGS=x\nPATH=/bin:/usr/bin\nMC_SOMETHING_NEW=1\n", "x"},
	};
	struct tide_nodeenv ne;
	char v[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = load_text(cases[i].text, no_env, &ne);

		CU_ASSERT_EQUAL(rc, 0);
		if (rc != 0)
			fprintf(stderr, "case %zu: %s", i, errbuf);
		fmt(&ne, "TIDE_EAL_ARGS", v, sizeof(v));
		CU_ASSERT_STRING_EQUAL(v, cases[i].want);
	}
}

static void
test_load_syntax_rejected(void)
{
	static const struct {
		const char *text;
		const char *msg; /* expected after "<path>:1: " */
	} cases[] = {
		{"TIDE_MTU = 9000\n", "TIDE_MTU: space before '='"},
		{"TIDE_MTU =9000\n", "TIDE_MTU: space before '='"},
		{"TIDE_MTU= 9000\n", "TIDE_MTU: unquoted whitespace"},
		{"TIDE_EAL_ARGS=a b\n", "TIDE_EAL_ARGS: unquoted whitespace"},
		{"TIDE_EAL_ARGS=a\tb\n", "TIDE_EAL_ARGS: unquoted whitespace"},
		{"A=1 B=2\n", "A: unquoted whitespace"},
		{"TIDE_EAL_ARGS=$HOME\n", "TIDE_EAL_ARGS: '$' in an unquoted value"},
		{"TIDE_EAL_ARGS=${X}\n", "TIDE_EAL_ARGS: '$' in an unquoted value"},
		{"TIDE_EAL_ARGS=`id`\n", "TIDE_EAL_ARGS: '`' in an unquoted value"},
		{"TIDE_EAL_ARGS=a\\ b\n", "TIDE_EAL_ARGS: '\\' in an unquoted value"},
		{"TIDE_EAL_ARGS=\"$HOME\"\n", "TIDE_EAL_ARGS: '$' inside double quotes"},
		{"TIDE_EAL_ARGS=\"`id`\"\n", "TIDE_EAL_ARGS: '`' inside double quotes"},
		{"TIDE_EAL_ARGS=\"a\\\"b\"\n", "TIDE_EAL_ARGS: '\\' inside double quotes"},
		{"TIDE_EAL_ARGS='abc\n", "TIDE_EAL_ARGS: unbalanced single quote"},
		{"TIDE_EAL_ARGS=\"abc\n", "TIDE_EAL_ARGS: unbalanced double quote"},
		{"TIDE_EAL_ARGS=abc'\n", "TIDE_EAL_ARGS: quote inside an unquoted value"},
		{"TIDE_EAL_ARGS=a\"b\"\n", "TIDE_EAL_ARGS: quote inside an unquoted value"},
		{"TIDE_EAL_ARGS='a'b\n", "TIDE_EAL_ARGS: text right after the closing quote"},
		{"TIDE_EAL_ARGS='a'\"b\"\n", "TIDE_EAL_ARGS: text right after the closing quote"},
		{"TIDE_EAL_ARGS=a;b\n", "TIDE_EAL_ARGS: ';' is special to sh"},
		{"TIDE_EAL_ARGS=a|b\n", "TIDE_EAL_ARGS: '|' is special to sh"},
		{"TIDE_EAL_ARGS=a&\n", "TIDE_EAL_ARGS: '&' is special to sh"},
		{"TIDE_EAL_ARGS=>x\n", "TIDE_EAL_ARGS: '>' is special to sh"},
		{"TIDE_EAL_ARGS=(x)\n", "TIDE_EAL_ARGS: '(' is special to sh"},
		{"TIDE_EAL_ARGS=~/x\n", "TIDE_EAL_ARGS: '~' is special to sh"},
		{"TIDE_EAL_ARGS={a,b}\n", "TIDE_EAL_ARGS: '{' is special to sh"},
		{"TIDE_EAL_ARGS=a*\n", "TIDE_EAL_ARGS: '*' is special to sh"},
		{"1TIDE_MTU=9000\n", "'1TIDE_MTU' is not a valid key name"},
		{"TIDE-MTU=9000\n", "'TIDE-MTU' is not a valid key name"},
		{"TIDE.MTU=9000\n", "'TIDE.MTU' is not a valid key name"},
		{"=9000\n", "'' is not a valid key name"},
		{"echo hello\n", "not a KEY=value line"},
		{"export TIDE_MTU\n", "not a KEY=value line"},
		{"set -a\n", "not a KEY=value line"},
		{"TIDE_MTU=9000\r\n", "carriage return in line"},
		{"TIDE_MTU=90\00100\n", "control character 0x01"},
	};
	struct tide_nodeenv ne;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = load_text(cases[i].text, no_env, &ne);
		bool ok = has_file_err(1, cases[i].msg);

		CU_ASSERT_EQUAL(rc, -EINVAL);
		CU_ASSERT_TRUE(ok);
		CU_ASSERT_EQUAL(count_lines(errbuf), 1);
		if (!ok)
			fprintf(stderr, "case %zu: want '%s', got: %s", i, cases[i].msg, errbuf);
		/* A rejected line changes nothing. */
		CU_ASSERT_EQUAL(ne.mtu, 1500);
		CU_ASSERT_STRING_EQUAL(ne.eal_args, "");
	}
}

static void
test_load_line_limits(void)
{
	size_t n = TIDE_NODEENV_MAX_LINE + 64;
	char *text = malloc(n + 64);
	struct tide_nodeenv ne;
	FILE *f;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	memset(text, 'x', n);
	memcpy(text, "TIDE_EAL_ARGS=", 14);
	strcpy(text + n, "\nTIDE_MTU=9000\n");
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "line longer than 4096 bytes"));
	CU_ASSERT_EQUAL(ne.mtu, 9000); /* later lines still load */
	free(text);

	/* A NUL byte cannot be written by the shell-visible text; sh would drop it. */
	f = fopen(node_path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fwrite("TIDE_MTU=9\0"
	       "000\n",
	       1, 15, f);
	fclose(f);
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, node_path, no_env, errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "NUL byte in line"));
}

/* ---- error reporting ---- */

static void
test_load_error_format_exact(void)
{
	struct tide_nodeenv ne;
	char want[1024];

	CU_ASSERT_EQUAL(
		load_text("# line 1\n\n\n\n\n\nMOONCAKE_GLOBAL_SEGMENT_SIZE=8gq\n", no_env, &ne),
		-EINVAL);
	snprintf(want, sizeof(want),
		 "%s:7: MOONCAKE_GLOBAL_SEGMENT_SIZE: '8gq' is not a size (examples: 8gb, 512mb, "
		 "1073741824)\n",
		 node_path);
	CU_ASSERT_STRING_EQUAL(errbuf, want);
	CU_ASSERT_EQUAL(ne.global_segment_size, UINT64_C(3355443200));

	char *const env[] = {"MOONCAKE_GLOBAL_SEGMENT_SIZE=-1", NULL};

	CU_ASSERT_EQUAL(load_text("", env, &ne), -EINVAL);
	CU_ASSERT_STRING_EQUAL(errbuf, "environment: MOONCAKE_GLOBAL_SEGMENT_SIZE: '-1' is not a "
				       "size (examples: 8gb, 512mb, 1073741824)\n");
}

static void
test_load_collects_all_errors(void)
{
	char *const env[] = {"TIDE_RXD=1000", "TIDE_TYPO=1", NULL};
	struct tide_nodeenv ne;

	CU_ASSERT_EQUAL(load_text("TIDE_MTU=99999\n"
				  "MOONCAKE_PROTOCOL=dpdk\n"
				  "TIDE_MTU=1400\n"
				  "bad line\n"
				  "MC_FORCE_TCP=maybe\n",
				  env, &ne),
			-EINVAL);
	CU_ASSERT_EQUAL(count_lines(errbuf), 7);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_MTU: '99999' is out of range (valid: 576..9216)"));
	CU_ASSERT_TRUE(
		has_file_err(2, "MOONCAKE_PROTOCOL: 'dpdk' is not valid (valid: tcp | rdma)"));
	CU_ASSERT_TRUE(has_file_err(3, "TIDE_MTU: set again; first set at"));
	CU_ASSERT_TRUE(has_file_err(4, "not a KEY=value line"));
	CU_ASSERT_TRUE(has_file_err(5, "MC_FORCE_TCP: 'maybe' is not a boolean (valid: 1/0, "
				       "true/false, yes/no, on/off)"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(errbuf, "environment: TIDE_RXD: '1000' is not a power of two"));
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "environment: TIDE_TYPO: unknown key"));
	/* Every bad field kept its lower-precedence value. */
	CU_ASSERT_EQUAL(ne.mtu, 1500);
	CU_ASSERT_EQUAL(ne.protocol, TIDE_NODEENV_PROTO_TCP);
	CU_ASSERT_EQUAL(ne.rxd, 1024);
	CU_ASSERT_FALSE(ne.force_tcp);
}

static void
test_load_error_buffer_truncates_safely(void)
{
	struct tide_nodeenv ne;
	char small[48];
	size_t l;

	memset(small, 'Z', sizeof(small));
	write_file("node.env", "TIDE_MTU=1\nTIDE_RXD=1\nTIDE_TXD=1\nTIDE_IDLE=x\n", node_path,
		   sizeof(node_path));
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, node_path, no_env, small, sizeof(small)), -EINVAL);
	l = strnlen(small, sizeof(small));
	CU_ASSERT_TRUE(l < sizeof(small));
	CU_ASSERT_TRUE(l >= 4 && strcmp(small + l - 4, "...\n") == 0);

	/* No buffer: each error goes to the log (stderr, captured here). */
	char logpath[600], *logged;
	int saved, fd;
	FILE *lf;

	snprintf(logpath, sizeof(logpath), "%s/stderr.log", tmpdir);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, node_path, no_env, NULL, 0), -EINVAL);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	CU_ASSERT_EQUAL(ne.mtu, 1500);
	lf = fopen(logpath, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(lf);
	logged = calloc(1, 4096);
	CU_ASSERT_PTR_NOT_NULL_FATAL(logged);
	CU_ASSERT_TRUE(fread(logged, 1, 4095, lf) > 0);
	fclose(lf);
	CU_ASSERT_PTR_NOT_NULL(strstr(logged, "node.env:1: TIDE_MTU: '1' is out of range"));
	CU_ASSERT_PTR_NOT_NULL(strstr(logged, "node.env:4: TIDE_IDLE: 'x' is not valid"));
	free(logged);
}

/* ---- precedence, sources and key handling ---- */

static void
test_load_precedence_and_sources(void)
{
	char *const env[] = {"HOME=/root", "TIDE_MTU=9000", "MOONCAKE_PROTOCOL=rdma", NULL};
	enum tide_nodeenv_src src;
	struct tide_nodeenv ne;
	uint32_t line;
	char buf[600], want[600];

	CU_ASSERT_EQUAL(load_text("# node\nTIDE_MTU=1400\nTIDE_RXD=512\n", env, &ne), 0);
	CU_ASSERT_STRING_EQUAL(ne.path, node_path);
	/* environment beats file */
	CU_ASSERT_EQUAL(ne.mtu, 9000);
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_MTU", &src, &line));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_ENV);
	CU_ASSERT_EQUAL(line, 0);
	TIDE_UT_OK(tide_nodeenv_source_str(&ne, "TIDE_MTU", buf, sizeof(buf)));
	CU_ASSERT_STRING_EQUAL(buf, "environment");
	/* environment beats default */
	CU_ASSERT_EQUAL(ne.protocol, TIDE_NODEENV_PROTO_RDMA);
	/* file beats default */
	CU_ASSERT_EQUAL(ne.rxd, 512);
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_RXD", &src, &line));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_FILE);
	CU_ASSERT_EQUAL(line, 3);
	TIDE_UT_OK(tide_nodeenv_source_str(&ne, "TIDE_RXD", buf, sizeof(buf)));
	snprintf(want, sizeof(want), "%s:3", node_path);
	CU_ASSERT_STRING_EQUAL(buf, want);
	/* default */
	CU_ASSERT_EQUAL(ne.txd, 1024);
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_TXD", &src, &line));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_DEFAULT);
}

static void
test_load_env_empty_value_and_first_wins(void)
{
	char *const env[] = {"TIDE_DATA_IP=", "TIDE_MTU=2000", "TIDE_MTU=3000", NULL};
	struct tide_nodeenv ne;

	CU_ASSERT_EQUAL(load_text("TIDE_DATA_IP=10.0.0.1\n", env, &ne), 0);
	CU_ASSERT_FALSE(ne.data_ip_set); /* "" in the environment unsets it */
	CU_ASSERT_EQUAL(ne.mtu, 2000);   /* getenv() semantics */
}

static void
test_load_unknown_keys(void)
{
	char *const env_ok[] = {"PATH=/usr/bin",
				"HOME=/root",
				"MC_UNKNOWN_KNOB=1",
				"MOONCAKE_OFFLOAD_ENABLED=1",
				"TIDE_NODE_ENV=/x",
				"NOEQUALS",
				NULL};
	char *const env_bad[] = {"TIDE_MTUU=9000", NULL};
	struct tide_nodeenv ne;

	CU_ASSERT_EQUAL(
		load_text("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER=1\nFOO=bar\nMC_LOG_LEVEL=INFO\n",
			  env_ok, &ne),
		0);
	CU_ASSERT_STRING_EQUAL(errbuf, "");

	CU_ASSERT_EQUAL(load_text("TIDE_LCORE=1-3\n", no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_LCORE: unknown key (did you mean TIDE_LCORES?"));
	CU_ASSERT_EQUAL(load_text("TIDE_COMPLETELY_DIFFERENT=1\n", no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_COMPLETELY_DIFFERENT: unknown key ('tide-env keys'"));

	CU_ASSERT_EQUAL(load_text("", env_bad, &ne), -EINVAL);
	CU_ASSERT_STRING_EQUAL(errbuf, "environment: TIDE_MTUU: unknown key (did you mean "
				       "TIDE_MTU? 'tide-env keys' lists all)\n");
}

static void
test_load_duplicate_keys(void)
{
	struct tide_nodeenv ne;
	char want[4096];

	CU_ASSERT_EQUAL(
		load_text("TIDE_MTU=1400\nFOO=1\n\nexport TIDE_MTU=9000\nFOO=2\n", no_env, &ne),
		-EINVAL);
	snprintf(want, sizeof(want),
		 "%s:4: TIDE_MTU: set again; first set at %s:1 (remove one)\n"
		 "%s:5: FOO: set again; first set at %s:2 (remove one)\n",
		 node_path, node_path, node_path, node_path);
	CU_ASSERT_STRING_EQUAL(errbuf, want);
	CU_ASSERT_EQUAL(ne.mtu, 1400);
}

/* ---- which file ---- */

static void
test_load_path_resolution(void)
{
	char a[512], b[512], envvar[1024], missing[600];
	struct tide_nodeenv ne;

	write_file("a.env", "TIDE_MTU=1111\n", a, sizeof(a));
	write_file("b.env", "TIDE_MTU=2222\n", b, sizeof(b));
	snprintf(envvar, sizeof(envvar), "TIDE_NODE_ENV=%s", b);
	char *const env[] = {envvar, NULL};

	/* TIDE_NODE_ENV overrides the default path */
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, NULL, env, errbuf, sizeof(errbuf)), 0);
	CU_ASSERT_EQUAL(ne.mtu, 2222);
	CU_ASSERT_STRING_EQUAL(ne.path, b);
	/* an explicit path overrides TIDE_NODE_ENV */
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, a, env, errbuf, sizeof(errbuf)), 0);
	CU_ASSERT_EQUAL(ne.mtu, 1111);
	CU_ASSERT_STRING_EQUAL(ne.path, a);

	/* a missing explicit file is an error, from either source */
	snprintf(missing, sizeof(missing), "%s/missing.env", tmpdir);
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, missing, no_env, errbuf, sizeof(errbuf)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "missing.env: cannot open: No such file"));
	CU_ASSERT_STRING_EQUAL(ne.path, "");
	snprintf(envvar, sizeof(envvar), "TIDE_NODE_ENV=%s", missing);
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, NULL, env, errbuf, sizeof(errbuf)), -ENOENT);

	/* -ENOENT wins over -EINVAL, and the environment still applies */
	char *const env2[] = {"TIDE_MTU=4000", "TIDE_RXD=3", NULL};

	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, missing, env2, errbuf, sizeof(errbuf)), -ENOENT);
	CU_ASSERT_EQUAL(ne.mtu, 4000);
	CU_ASSERT_EQUAL(count_lines(errbuf), 2);

	/* a directory is unreadable, not missing */
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, tmpdir, no_env, errbuf, sizeof(errbuf)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "is a directory"));
}

static void
test_load_missing_default_path_ok(void)
{
	char *const env[] = {"TIDE_NODE_ENV=", "TIDE_MTU=1600", NULL};
	struct tide_nodeenv ne;
	int rc = tide_nodeenv_load(&ne, NULL, env, errbuf, sizeof(errbuf));

	if (access(TIDE_NODEENV_DEFAULT_PATH, F_OK) == 0) {
		/* This host has a real node file; only check it was the one read. */
		CU_ASSERT_STRING_EQUAL(ne.path, TIDE_NODEENV_DEFAULT_PATH);
		CU_ASSERT_NOT_EQUAL(rc, -ENOENT);
		return;
	}
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_STRING_EQUAL(errbuf, "");
	CU_ASSERT_STRING_EQUAL(ne.path, "");
	CU_ASSERT_EQUAL(ne.mtu, 1600);
}

/* ---- values by type ---- */

struct vcase {
	const char *key;
	const char *value;
	const char *formatted; /* NULL: must be rejected */
	const char *extra;     /* lines after it that satisfy cross-checks, or NULL */
};

static void
run_vcases(const struct vcase *c, size_t n)
{
	struct tide_nodeenv ne, def;
	char v[1200], text[1400];

	tide_nodeenv_defaults(&def);
	for (size_t i = 0; i < n; i++) {
		int rc;

		snprintf(text, sizeof(text), "%s='%s'\n%s", c[i].key, c[i].value,
			 c[i].extra != NULL ? c[i].extra : "");
		rc = load_text(text, no_env, &ne);
		fmt(&ne, c[i].key, v, sizeof(v));
		if (c[i].formatted != NULL) {
			CU_ASSERT_EQUAL(rc, 0);
			CU_ASSERT_STRING_EQUAL(v, c[i].formatted);
			if (rc != 0 || strcmp(v, c[i].formatted) != 0)
				fprintf(stderr, "%s='%s' -> rc %d '%s' %s", c[i].key, c[i].value,
					rc, v, errbuf);
		} else {
			char want[600], dv[1200];

			snprintf(want, sizeof(want), "%s: '%s' ", c[i].key, c[i].value);
			CU_ASSERT_EQUAL(rc, -EINVAL);
			CU_ASSERT_TRUE(has_file_err(1, want));
			if (!has_file_err(1, want))
				fprintf(stderr, "%s='%s' not rejected as expected: %s", c[i].key,
					c[i].value, errbuf);
			/* The field kept its default. */
			fmt(&def, c[i].key, dv, sizeof(dv));
			CU_ASSERT_STRING_EQUAL(v, dv);
		}
	}
}

static void
test_values_numbers_and_enums(void)
{
	static const struct vcase c[] = {
		{"TIDE_MTU", "576", "576"},
		{"TIDE_MTU", "9216", "9216"},
		{"TIDE_MTU", "0009000", "9000"},
		{"TIDE_MTU", "575", NULL},
		{"TIDE_MTU", "9217", NULL},
		{"TIDE_MTU", "+9000", NULL},
		{"TIDE_MTU", "-9000", NULL},
		{"TIDE_MTU", " 9000", NULL},
		{"TIDE_MTU", "9e3", NULL},
		{"TIDE_MTU", "0x2000", NULL},
		{"TIDE_MTU", "", NULL},
		{"TIDE_MTU", "99999999999999999999999", NULL},
		{"TIDE_RXD", "64", "64"},
		{"TIDE_RXD", "16384", "16384"},
		{"TIDE_RXD", "1000", NULL},
		{"TIDE_RXD", "32", NULL},
		{"TIDE_TXD", "32768", NULL},
		{"TIDE_LCORES_PER_NUMA", "0", NULL},
		{"TIDE_LCORES_PER_NUMA", "128", "128"},
		{"TIDE_IDLE_SLEEP_US", "0", "0"},
		{"TIDE_IDLE_SLEEP_US", "100001", NULL},
		{"MC_RPC_TIMEOUT_MS", "0", NULL},
		{"MC_RPC_TIMEOUT_MS", "3600000", "3600000"},
		{"MC_RPC_CONNECT_TIMEOUT_MS", "3600001", NULL},
		{"MC_MIN_RPC_PORT", "0", NULL},
		{"MC_MAX_RPC_PORT", "65535", "65535"},
		{"MC_MAX_RPC_PORT", "65536", NULL},
		{"MC_FORCE_TCP", "1", "true"},
		{"MC_FORCE_TCP", "YES", "true"},
		{"MC_FORCE_TCP", "On", "true"},
		{"MC_FORCE_TCP", "True", "true"},
		{"MC_STORE_MEMCPY", "0", "false"},
		{"MC_STORE_MEMCPY", "no", "false"},
		{"MC_STORE_MEMCPY", "OFF", "false"},
		{"MC_STORE_MEMCPY", "FALSE", "false"},
		{"MC_FORCE_TCP", "2", NULL},
		{"MC_FORCE_TCP", "", NULL},
		{"MOONCAKE_PROTOCOL", "rdma", "rdma"},
		{"MOONCAKE_PROTOCOL", "TCP", "tcp"},
		{"MOONCAKE_PROTOCOL", "Rdma", "rdma"},
		{"MOONCAKE_PROTOCOL", "dpdk", NULL},
		{"TIDE_HUGEPAGES", "off", "off"},
		{"TIDE_HUGEPAGES", "on", "on"},
		{"TIDE_HUGEPAGES", "AUTO", "auto"},
		{"TIDE_HUGEPAGES", "yes", NULL},
		{"TIDE_IDLE", "busy", "busy"},
		{"TIDE_IDLE", "sleep", NULL},
		{"TIDE_LOG_LEVEL", "debug", "debug"},
		{"TIDE_LOG_LEVEL", "WARN", "warn"},
		{"TIDE_LOG_LEVEL", "error", "error"},
		{"TIDE_LOG_LEVEL", "verbose", NULL},
		{"TIDE_AGENT", "required", "required"},
		{"TIDE_AGENT", "AUTO", "auto"},
		{"TIDE_AGENT", "off", "off"},
		{"TIDE_AGENT", "", NULL},
		{"TIDE_AGENT", "on", NULL},
		{"TIDE_AGENT", "embedded", NULL},
		{"TIDE_PIN_UNREAD", "1", "true"},
		{"TIDE_PIN_UNREAD", "yes", "true"},
		{"TIDE_PIN_UNREAD", "0", "false"},
		{"TIDE_PIN_UNREAD", "Off", "false"},
		{"TIDE_PIN_UNREAD", "", NULL},
		{"TIDE_PIN_UNREAD", "2", NULL},
		{"MOONCAKE_GLOBAL_SEGMENT_SIZE", "0", "0"},
		{"MOONCAKE_GLOBAL_SEGMENT_SIZE", "3.125gb", "3355443200"},
		{"MOONCAKE_LOCAL_BUFFER_SIZE", "16tb", "17592186044416"},
		{"MOONCAKE_LOCAL_BUFFER_SIZE", "20000000tb", NULL},
		{"TIDE_HUGEPAGE_SIZE", "1GB", "1073741824", "TIDE_HUGEPAGE_MEM=2gb\n"},
		{"TIDE_HUGEPAGE_SIZE", "2097152", "2097152"},
		{"TIDE_HUGEPAGE_SIZE", "4mb", NULL},
		{"TIDE_HUGEPAGE_SIZE", "4k", NULL},
		{"TIDE_HUGEPAGE_MEM", "1mb", NULL},
	};

	run_vcases(c, sizeof(c) / sizeof(c[0]));
}

static void
test_values_addresses(void)
{
	static const struct vcase c[] = {
		{"TIDE_DATA_IP", "10.0.0.2", "10.0.0.2"},
		{"TIDE_DATA_IP", "255.255.255.255", "255.255.255.255"},
		{"TIDE_DATA_IP", "", ""},
		{"TIDE_DATA_IP", "10.0.0.256", NULL},
		{"TIDE_DATA_IP", "10.0.0", NULL},
		{"TIDE_DATA_IP", "10.0.0.1.2", NULL},
		{"TIDE_DATA_IP", "010.0.0.1", NULL},
		{"TIDE_DATA_IP", "10.0.0.1/24", NULL},
		{"TIDE_DATA_IP", "host", NULL},
		{"MC_TCP_BIND_ADDRESS", "192.168.1.7", "192.168.1.7"},
		{"MC_TCP_BIND_ADDRESS", "::1", NULL},
		{"TIDE_DATA_NETMASK", "/16", "255.255.0.0"},
		{"TIDE_DATA_NETMASK", "/32", "255.255.255.255"},
		{"TIDE_DATA_NETMASK", "255.255.255.252", "255.255.255.252"},
		{"TIDE_DATA_NETMASK", "255.255.0.255", NULL},
		{"TIDE_DATA_NETMASK", "0.0.0.0", NULL},
		{"TIDE_DATA_NETMASK", "/0", NULL},
		{"TIDE_DATA_NETMASK", "/33", NULL},
		{"TIDE_DATA_NETMASK", "24", NULL},
		{"TIDE_DATA_NETMASK", "", NULL},
		{"TIDE_DATA_MAC", "02:00:00:aa:BB:0c", "02:00:00:aa:bb:0c"},
		{"TIDE_DATA_MAC", "", ""},
		{"TIDE_DATA_MAC", "01:00:5e:00:00:01", NULL},
		{"TIDE_DATA_MAC", "ff:ff:ff:ff:ff:ff", NULL},
		{"TIDE_DATA_MAC", "00:00:00:00:00:00", NULL},
		{"TIDE_DATA_MAC", "02:00:00:aa:bb", NULL},
		{"TIDE_DATA_MAC", "02-00-00-aa-bb-cc", NULL},
		{"TIDE_DATA_MAC", "2:0:0:aa:bb:cc", NULL},
		{"MOONCAKE_MASTER", "master.local:50051", "master.local:50051"},
		{"MOONCAKE_MASTER", "[::1]:50051", "[::1]:50051"},
		{"MOONCAKE_MASTER", "10.0.0.1:65535", "10.0.0.1:65535"},
		{"MOONCAKE_MASTER", ":50051", NULL},
		{"MOONCAKE_MASTER", "10.0.0.1", NULL},
		{"MOONCAKE_MASTER", "10.0.0.1:0", NULL},
		{"MOONCAKE_MASTER", "10.0.0.1:65536", NULL},
		{"MOONCAKE_MASTER", "10.0.0.1:port", NULL},
		{"MOONCAKE_MASTER", "", NULL},
		{"MOONCAKE_MASTER", "etcd://10.0.0.1:2379;e2:2379", "etcd://10.0.0.1:2379;e2:2379"},
		{"MOONCAKE_MASTER", "etcd://", NULL},
		{"MOONCAKE_MASTER", "etcd://e1", NULL},
		{"MOONCAKE_MASTER", "redis://r:6379", NULL},
		{"MOONCAKE_LOCAL_HOSTNAME", "node-1", "node-1"},
		{"MOONCAKE_LOCAL_HOSTNAME", "", NULL},
		{"MOONCAKE_LOCAL_HOSTNAME", "a b", NULL},
		{"MOONCAKE_TE_META_DATA_SERVER", "http://10.0.0.1:8080/metadata",
		 "http://10.0.0.1:8080/metadata"},
		{"MOONCAKE_TE_META_DATA_SERVER", "http://meta:8080", "http://meta:8080"},
		{"MOONCAKE_TE_META_DATA_SERVER", "http://meta/metadata", NULL},
		{"MOONCAKE_TE_META_DATA_SERVER", "etcd://10.0.0.1:2379", "etcd://10.0.0.1:2379"},
		{"MOONCAKE_TE_META_DATA_SERVER", "10.0.0.1:2379,h2:2379", "10.0.0.1:2379,h2:2379"},
		{"MOONCAKE_TE_META_DATA_SERVER", "etcd://a:1; http://b:2",
		 "etcd://a:1; http://b:2"},
		{"MOONCAKE_TE_META_DATA_SERVER", "etcd://", NULL},
		{"MOONCAKE_TE_META_DATA_SERVER", "etcd://a:1;b", NULL},
		{"MOONCAKE_TE_META_DATA_SERVER", "redis://r:6379", NULL},
		{"MOONCAKE_TE_META_DATA_SERVER", "p2phandshake", NULL},
		{"MOONCAKE_DEVICE", "mlx5_0,mlx5_1", "mlx5_0,mlx5_1"},
		{"MOONCAKE_DEVICE", "mlx5_0,", NULL},
		{"MOONCAKE_DEVICE", "mlx5 0", NULL},
	};

	run_vcases(c, sizeof(c) / sizeof(c[0]));
}

#define DATA_IP "TIDE_DATA_IP=10.0.0.2\n"

static void
test_values_devices_and_strings(void)
{
	static const struct vcase c[] = {
		{"TIDE_DPDK_DEVICE", "0000:3b:00.0", "0000:3b:00.0", DATA_IP},
		{"TIDE_DPDK_DEVICE", "3b:00.0", "3b:00.0", DATA_IP},
		{"TIDE_DPDK_DEVICE", "0000:AF:1f.7", "0000:AF:1f.7", DATA_IP},
		{"TIDE_DPDK_DEVICE", "3b:00.0,rxq_cqe_comp_en=0", "3b:00.0,rxq_cqe_comp_en=0",
		 DATA_IP},
		{"TIDE_DPDK_DEVICE", "net_ring0", "net_ring0", DATA_IP},
		{"TIDE_DPDK_DEVICE", "net_af_xdp12,iface=eth1", "net_af_xdp12,iface=eth1", DATA_IP},
		{"TIDE_DPDK_DEVICE", "net_memif0,role=server,socket=/tmp/m.sock,socket-abstract=no",
		 "net_memif0,role=server,socket=/tmp/m.sock,socket-abstract=no", DATA_IP},
		{"TIDE_DPDK_DEVICE", "3b:00", NULL},
		{"TIDE_DPDK_DEVICE", "3b:20.0", NULL},
		{"TIDE_DPDK_DEVICE", "3b:00.8", NULL},
		{"TIDE_DPDK_DEVICE", "000:3b:00.0", NULL},
		{"TIDE_DPDK_DEVICE", "net_ring", NULL},
		{"TIDE_DPDK_DEVICE", "net_0", NULL},
		{"TIDE_DPDK_DEVICE", "eth0", NULL},
		{"TIDE_DPDK_DEVICE", "net_ring0,", NULL},
		{"TIDE_DPDK_DEVICE", "net_ring0,key", NULL},
		{"TIDE_DPDK_DEVICE", "net_ring0,=v", NULL},
		{"TIDE_DPDK_DEVICE", "net_ring0,k=", NULL},
		{"TIDE_DPDK_DEVICE", "net_ring0 ,k=v", NULL},
		{"TIDE_LCORES", "1-3,5", "1-3,5"},
		{"TIDE_LCORES", "0", "0"},
		{"TIDE_LCORES", "1023", "1023"},
		{"TIDE_LCORES", "3-1", NULL},
		{"TIDE_LCORES", "1,1", NULL},
		{"TIDE_LCORES", "1-3,2", NULL},
		{"TIDE_LCORES", "1024", NULL},
		{"TIDE_LCORES", "1-", NULL},
		{"TIDE_LCORES", "1,,2", NULL},
		{"TIDE_LCORES", "a", NULL},
		{"TIDE_LCORES", "(1-3)@0", NULL},
		{"TIDE_FILE_PREFIX", "tide_A-1", "tide_A-1"},
		{"TIDE_FILE_PREFIX", "abcdefghijklmnopqrstuvwxyz012345",
		 "abcdefghijklmnopqrstuvwxyz012345"},
		{"TIDE_FILE_PREFIX", "abcdefghijklmnopqrstuvwxyz0123456", NULL},
		{"TIDE_FILE_PREFIX", "", NULL},
		{"TIDE_FILE_PREFIX", "a/b", NULL},
		{"TIDE_FILE_PREFIX", "a.b", NULL},
		{"MOONCAKE_TENANT_ID", "team a", "team a"},
		{"MOONCAKE_TENANT_ID", "", NULL},
		{"TIDE_EAL_ARGS", "--iova-mode=va --no-pci", "--iova-mode=va --no-pci"},
		{"MOONCAKE_CONFIG_PATH", "/etc/mooncake.json", "/etc/mooncake.json"},
		{"TIDE_AGENT_SOCKET", "", NULL},
	};
	char sock[200], text[300], want[300];
	struct tide_nodeenv ne;

	run_vcases(c, sizeof(c) / sizeof(c[0]));

	/* sun_path holds 107 bytes plus the NUL. */
	memset(sock, 'a', sizeof(sock));
	sock[0] = '/';
	sock[107] = '\0';
	snprintf(text, sizeof(text), "TIDE_AGENT_SOCKET=%s\n", sock);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), 0);
	CU_ASSERT_STRING_EQUAL(ne.agent_socket, sock);
	sock[107] = 'a';
	sock[108] = '\0';
	snprintf(text, sizeof(text), "TIDE_AGENT_SOCKET=%s\n", sock);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	snprintf(want, sizeof(want), "is too long (at most 107 bytes)");
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, want));
	CU_ASSERT_STRING_EQUAL(ne.agent_socket, "/run/tide/agent.sock");
}

static void
test_values_messages_say_what_is_valid(void)
{
	struct tide_nodeenv ne;

	CU_ASSERT_EQUAL(load_text("MOONCAKE_TE_META_DATA_SERVER=redis://10.0.0.1:6379\n"
				  "TIDE_HUGEPAGES=maybe\n"
				  "TIDE_HUGEPAGE_SIZE=4mb\n"
				  "TIDE_DATA_MAC=01:00:5e:00:00:01\n"
				  "TIDE_DPDK_DEVICE=eth0\n",
				  no_env, &ne),
			-EINVAL);
	CU_ASSERT_TRUE(has_file_err(1,
				    "MOONCAKE_TE_META_DATA_SERVER: 'redis://10.0.0.1:6379' uses "
				    "the unsupported scheme 'redis://' (supported: P2PHANDSHAKE, "
				    "http://host:port/path, etcd://host:port[;host:port...])"));
	CU_ASSERT_TRUE(has_file_err(2, "TIDE_HUGEPAGES: 'maybe' is not valid (valid: auto | on | "
				       "off)"));
	CU_ASSERT_TRUE(has_file_err(3, "TIDE_HUGEPAGE_SIZE: '4mb' is not a supported hugepage size "
				       "(valid: 2mb, 1gb)"));
	CU_ASSERT_TRUE(has_file_err(4, "TIDE_DATA_MAC: '01:00:5e:00:00:01' is a multicast"));
	CU_ASSERT_TRUE(has_file_err(5, "TIDE_DPDK_DEVICE: 'eth0' is not a DPDK device (valid: a "
				       "PCI address"));

	/* Control characters from the environment are escaped in messages. */
	char *const env[] = {"TIDE_EAL_ARGS=a\nb", NULL};

	CU_ASSERT_EQUAL(load_text("", env, &ne), -EINVAL);
	CU_ASSERT_STRING_EQUAL(errbuf, "environment: TIDE_EAL_ARGS: 'a\\x0ab' contains a control "
				       "character\n");
}

/* ---- the one boolean syntax ---- */

static void
test_parse_bool(void)
{
	static const char *const yes[] = {"1", "true", "TRUE", "yes", "On", "t", "Y"};
	static const char *const no[] = {"0", "false", "No", "off", "F", "n"};
	static const char *const bad[] = {"", "2", "truee", "ja", " 1", "1 "};
	bool b;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		b = false;
		CU_ASSERT_EQUAL(tide_nodeenv_parse_bool(yes[i], &b), 0);
		CU_ASSERT_TRUE(b);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		b = true;
		CU_ASSERT_EQUAL(tide_nodeenv_parse_bool(no[i], &b), 0);
		CU_ASSERT_FALSE(b);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(tide_nodeenv_parse_bool(bad[i], &b), -EINVAL);
	CU_ASSERT_EQUAL(tide_nodeenv_parse_bool(NULL, &b), -EINVAL);
}

/* ---- many keys: duplicates still found (the set behind the check grows) ---- */

static void
test_many_keys_duplicates(void)
{
	const unsigned n = 5000;
	size_t cap = (size_t)n * 32 + 64, off = 0;
	char *text = malloc(cap);
	struct tide_nodeenv ne;

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	/* Other programs' keys (ignored), then one of them again, then a Tide key twice. */
	for (unsigned i = 0; i < n; i++)
		off += (size_t)snprintf(text + off, cap - off, "OTHER_%u=%u\n", i, i);
	off += (size_t)snprintf(text + off, cap - off,
				"OTHER_4321=x\nTIDE_MTU=9000\nTIDE_MTU=1500\n");
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(n + 1, "OTHER_4321: set again; first set at"));
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, ":4322 (remove one)"));
	CU_ASSERT_TRUE(has_file_err(n + 3, "TIDE_MTU: set again"));
	CU_ASSERT_EQUAL(count_lines(errbuf), 2);
	free(text);
}

/* ---- TIDE_AGENT and TIDE_PIN_UNREAD ---- */

static void
test_agent_and_pin_unread(void)
{
	char *const env[] = {"TIDE_PIN_UNREAD=on", NULL};
	char *const bad_env[] = {"TIDE_AGENT=sometimes", NULL};
	struct tide_nodeenv ne;
	enum tide_nodeenv_src src;
	uint32_t line;
	int i;
	char buf[64];

	/* Table row: listed by `tide-env keys` with its valid values and default. */
	i = tide_nodeenv_key_index("TIDE_AGENT");
	CU_ASSERT_TRUE_FATAL(i >= 0);
	CU_ASSERT_STRING_EQUAL(tide_nodeenv_key_type((size_t)i), "required | auto | off");
	CU_ASSERT_STRING_EQUAL(tide_nodeenv_key_default((size_t)i), "auto");
	CU_ASSERT_PTR_NOT_NULL(strstr(tide_nodeenv_key_doc((size_t)i), "TIDE_AGENT_SOCKET"));
	i = tide_nodeenv_key_index("TIDE_PIN_UNREAD");
	CU_ASSERT_TRUE_FATAL(i >= 0);
	CU_ASSERT_STRING_EQUAL(tide_nodeenv_key_default((size_t)i), "false");
	CU_ASSERT_PTR_NOT_NULL(strstr(tide_nodeenv_key_doc((size_t)i), "-200"));

	/* File sets both; the environment overrides one of them. */
	CU_ASSERT_EQUAL(load_text("TIDE_AGENT=auto\nTIDE_PIN_UNREAD=false\n", env, &ne), 0);
	CU_ASSERT_EQUAL(ne.agent, TIDE_NODEENV_AGENT_AUTO);
	CU_ASSERT_TRUE(ne.pin_unread);
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_AGENT", &src, &line));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_FILE);
	CU_ASSERT_EQUAL(line, 1);
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_PIN_UNREAD", &src, &line));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_ENV);
	TIDE_UT_OK(tide_nodeenv_format(&ne, "TIDE_PIN_UNREAD", buf, sizeof(buf)));
	CU_ASSERT_STRING_EQUAL(buf, "true");

	CU_ASSERT_EQUAL(load_text("TIDE_AGENT=off\n", no_env, &ne), 0);
	CU_ASSERT_EQUAL(ne.agent, TIDE_NODEENV_AGENT_OFF);

	/* Errors say what would be valid; the key keeps its default. */
	CU_ASSERT_EQUAL(load_text("TIDE_PIN_UNREAD=maybe\n", bad_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_PIN_UNREAD: 'maybe' is not a boolean (valid: 1/0, "
				       "true/false, yes/no, on/off)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "environment: TIDE_AGENT: 'sometimes' is not valid "
					      "(valid: required | auto | off)\n"));
	CU_ASSERT_EQUAL(ne.agent, TIDE_NODEENV_AGENT_AUTO);
	CU_ASSERT_FALSE(ne.pin_unread);
}

/* ---- TIDE_ALLOW_NETS, TIDE_AGENT_SOCKET_GROUP ---- */

static void
test_allow_nets_and_socket_group(void)
{
	static const struct vcase c[] = {
		{"TIDE_ALLOW_NETS", "", ""},
		{"TIDE_ALLOW_NETS", "127.0.0.1/32", "127.0.0.1/32"},
		{"TIDE_ALLOW_NETS", "10.0.0.0/8,192.168.1.7,fd00::/8",
		 "10.0.0.0/8,192.168.1.7,fd00::/8"},
		{"TIDE_ALLOW_NETS", "10.0.0.0/8, ::1", "10.0.0.0/8, ::1"},
		{"TIDE_ALLOW_NETS", "10.0.0.1/8", NULL},
		{"TIDE_ALLOW_NETS", "10.0.0.0/8,node-b", NULL},
		{"TIDE_ALLOW_NETS", "10.0.0.0/8,", NULL},
		{"TIDE_ALLOW_NETS", "10.0.0.0/33", NULL},
		{"TIDE_AGENT_SOCKET_GROUP", "", ""},
		{"TIDE_AGENT_SOCKET_GROUP", "tide", "tide"},
		{"TIDE_AGENT_SOCKET_GROUP", "4242", "4242"},
		{"TIDE_AGENT_SOCKET_GROUP", "tide:x", NULL},
		{"TIDE_AGENT_SOCKET_GROUP", "a b", NULL},
		{"TIDE_AGENT_SOCKET_GROUP", "a,b", NULL},
	};
	char *const env[] = {"TIDE_ALLOW_NETS=10.1.0.0/16", NULL};
	char *const bad_env[] = {"TIDE_ALLOW_NETS=10.1.0.1/16", NULL};
	struct tide_nodeenv ne;
	enum tide_nodeenv_src src;
	int i;

	run_vcases(c, sizeof(c) / sizeof(c[0]));

	/* Defaults: any peer, the agent's own group. */
	tide_nodeenv_defaults(&ne);
	CU_ASSERT_STRING_EQUAL(ne.allow_nets, "");
	CU_ASSERT_STRING_EQUAL(ne.agent_socket_group, "");
	i = tide_nodeenv_key_index("TIDE_ALLOW_NETS");
	CU_ASSERT_TRUE_FATAL(i >= 0);
	CU_ASSERT_STRING_EQUAL(tide_nodeenv_key_default((size_t)i), "");
	CU_ASSERT_PTR_NOT_NULL(strstr(tide_nodeenv_key_doc((size_t)i), "Empty = any"));

	/* The error names the bad entry, by position and text, and the network meant. */
	CU_ASSERT_EQUAL(load_text("TIDE_ALLOW_NETS=127.0.0.1/32,10.0.0.1/8\n", no_env, &ne),
			-EINVAL);
	CU_ASSERT_TRUE(has_file_err(
		1, "TIDE_ALLOW_NETS: '127.0.0.1/32,10.0.0.1/8' is not a list of networks: entry 2 "
		   "'10.0.0.1/8' has bits set after /8 (the network is 10.0.0.0/8)"));
	CU_ASSERT_STRING_EQUAL(ne.allow_nets, "");

	/* The environment wins over the file, and is checked the same way. */
	CU_ASSERT_EQUAL(load_text("TIDE_ALLOW_NETS=127.0.0.1\n", env, &ne), 0);
	CU_ASSERT_STRING_EQUAL(ne.allow_nets, "10.1.0.0/16");
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_ALLOW_NETS", &src, NULL));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_ENV);
	CU_ASSERT_EQUAL(load_text("", bad_env, &ne), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "environment: TIDE_ALLOW_NETS: '10.1.0.1/16' is not "
					      "a list of networks: entry 1"));
}

/* ---- TIDE_CSUM ---- */

static void
test_csum_key(void)
{
	static const char memif[] = "TIDE_DPDK_DEVICE='net_memif0,role=server,socket=/tmp/m.sock,"
				    "socket-abstract=no'\nTIDE_DATA_IP=10.0.0.1\n";
	char *const env[] = {"TIDE_CSUM=ELIDE", NULL};
	char *const bad_env[] = {"TIDE_CSUM=none", NULL};
	struct tide_nodeenv ne;
	enum tide_nodeenv_src src;
	uint32_t line;
	char buf[64], text[512];
	int i;

	/* Table row: listed by `tide-env keys` with its valid values, default and doc. */
	i = tide_nodeenv_key_index("TIDE_CSUM");
	CU_ASSERT_TRUE_FATAL(i >= 0);
	CU_ASSERT_STRING_EQUAL(tide_nodeenv_key_type((size_t)i), "auto | sw | offload | elide");
	CU_ASSERT_STRING_EQUAL(tide_nodeenv_key_default((size_t)i), "auto");
	CU_ASSERT_PTR_NOT_NULL(strstr(tide_nodeenv_key_doc((size_t)i), "net_memif"));
	CU_ASSERT_PTR_NOT_NULL(strstr(tide_nodeenv_key_doc((size_t)i), "peer must elide"));
	tide_nodeenv_defaults(&ne);
	CU_ASSERT_EQUAL(ne.csum, TIDE_NODEENV_CSUM_AUTO);

	/* Every value, any case (enums match case-insensitively), printed in lower case. */
	CU_ASSERT_EQUAL(load_text("TIDE_CSUM=sw\n", no_env, &ne), 0);
	CU_ASSERT_EQUAL(ne.csum, TIDE_NODEENV_CSUM_SW);
	CU_ASSERT_EQUAL(load_text("TIDE_CSUM=Offload\n", no_env, &ne), 0);
	CU_ASSERT_EQUAL(ne.csum, TIDE_NODEENV_CSUM_OFFLOAD);
	TIDE_UT_OK(tide_nodeenv_format(&ne, "TIDE_CSUM", buf, sizeof(buf)));
	CU_ASSERT_STRING_EQUAL(buf, "offload");
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_CSUM", &src, &line));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_FILE);
	CU_ASSERT_EQUAL(line, 1);
	/* offload and sw are checked against the port at start-up, not here: a PCI NIC is fine. */
	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=3b:00.0\nTIDE_DATA_IP=10.0.0.1\n"
				  "TIDE_CSUM=offload\n",
				  no_env, &ne),
			0);

	/* elide on net_memif and net_ring; the environment overrides the file. */
	snprintf(text, sizeof(text), "%sTIDE_CSUM=elide\n", memif);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), 0);
	CU_ASSERT_EQUAL(ne.csum, TIDE_NODEENV_CSUM_ELIDE);
	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=net_ring0\nTIDE_DATA_IP=10.0.0.1\n"
				  "TIDE_CSUM=auto\n",
				  env, &ne),
			0);
	CU_ASSERT_EQUAL(ne.csum, TIDE_NODEENV_CSUM_ELIDE);
	TIDE_UT_OK(tide_nodeenv_source(&ne, "TIDE_CSUM", &src, &line));
	CU_ASSERT_EQUAL(src, TIDE_NODEENV_SRC_ENV);
	/* No DPDK device: nothing to elide on, nothing wrong. */
	CU_ASSERT_EQUAL(load_text("TIDE_CSUM=elide\n", no_env, &ne), 0);
	/* A fault spec that does not corrupt is fine with elision. */
	snprintf(text, sizeof(text), "%sTIDE_CSUM=elide\nTIDE_FAULT=drop=0.01,dup=0.01\n", memif);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), 0);

	/* elide on anything that leaves the host: refused, at the TIDE_CSUM line. */
	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=0000:3b:00.0\nTIDE_DATA_IP=10.0.0.1\n"
				  "TIDE_CSUM=elide\n",
				  no_env, &ne),
			-EINVAL);
	CU_ASSERT_TRUE(has_file_err(3, "TIDE_CSUM: 'elide' is only for a net_memif or net_ring "
				       "TIDE_DPDK_DEVICE (frames that stay in this host's memory), "
				       "not '0000:3b:00.0' (use auto)\n"));
	CU_ASSERT_EQUAL(count_lines(errbuf), 1);
	CU_ASSERT_EQUAL(load_text("TIDE_CSUM=elide\nTIDE_DATA_IP=10.0.0.1\n"
				  "TIDE_DPDK_DEVICE=net_af_packet0,iface=veth0\n",
				  no_env, &ne),
			-EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_CSUM: 'elide' is only for a net_memif or net_ring"));
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "not 'net_af_packet0,iface=veth0'"));
	/* Set from the environment, the error says so. */
	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=net_tap0\nTIDE_DATA_IP=10.0.0.1\n", env, &ne),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "environment: TIDE_CSUM: 'elide' is only for"));

	/* elide with a fault injector that corrupts: corruption would go unnoticed. */
	snprintf(text, sizeof(text), "%sTIDE_FAULT=corrupt=0.005,seed=3\nTIDE_CSUM=elide\n", memif);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(4, "TIDE_CSUM: 'elide' cannot be combined with TIDE_FAULT "
				       "corrupt=0.005: corrupted frames would be accepted, only "
				       "checksums catch them (use auto for fault runs)\n"));

	/* A bad value says what is valid; the key keeps its default. */
	CU_ASSERT_EQUAL(load_text("TIDE_CSUM=off\n", bad_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_CSUM: 'off' is not valid (valid: auto | sw | offload "
				       "| elide)\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "environment: TIDE_CSUM: 'none' is not valid"));
	CU_ASSERT_EQUAL(ne.csum, TIDE_NODEENV_CSUM_AUTO);
}

/* ---- TIDE_DPDK_RX_DEVICE ---- */

static void
test_dpdk_rx_device(void)
{
	static const char tx[] = "TIDE_DPDK_DEVICE='net_memif0,role=server,socket=/tmp/a.sock,"
				 "socket-abstract=no'\nTIDE_DATA_IP=10.0.0.1\n";
	struct tide_nodeenv ne;
	char text[512];
	int i = tide_nodeenv_key_index("TIDE_DPDK_RX_DEVICE");

	CU_ASSERT_TRUE_FATAL(i >= 0);
	CU_ASSERT_STRING_EQUAL(tide_nodeenv_key_default((size_t)i), "");
	CU_ASSERT_PTR_NOT_NULL(strstr(tide_nodeenv_key_doc((size_t)i), "zero-copy client"));
	tide_nodeenv_defaults(&ne);
	CU_ASSERT_STRING_EQUAL(ne.dpdk_rx_device, "");

	/* Two memif links, elided checksums on both. */
	snprintf(text, sizeof(text),
		 "%sTIDE_DPDK_RX_DEVICE=net_memif1,role=client,socket=/tmp/b.sock,"
		 "socket-abstract=no,zero-copy=yes\nTIDE_CSUM=elide\n",
		 tx);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), 0);
	CU_ASSERT_STRING_EQUAL(ne.dpdk_rx_device, "net_memif1,role=client,socket=/tmp/b.sock,"
						  "socket-abstract=no,zero-copy=yes");

	/* Without a device to transmit on: refused, at its own line. */
	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_RX_DEVICE=net_memif1\n", no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_DPDK_RX_DEVICE: 'net_memif1' needs TIDE_DPDK_DEVICE"));
	/* The same device twice (devargs aside). */
	snprintf(text, sizeof(text), "%sTIDE_DPDK_RX_DEVICE=net_memif0,role=client\n", tx);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(3, "TIDE_DPDK_RX_DEVICE: 'net_memif0,role=client' names the "
				       "same device as TIDE_DPDK_DEVICE"));
	/* A NIC on either side. */
	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=3b:00.0\nTIDE_DATA_IP=10.0.0.1\n"
				  "TIDE_DPDK_RX_DEVICE=net_memif1\n",
				  no_env, &ne),
			-EINVAL);
	CU_ASSERT_TRUE(has_file_err(3, "TIDE_DPDK_RX_DEVICE: 'net_memif1': a receive-only device "
				       "pairs two vdevs"));
	snprintf(text, sizeof(text), "%sTIDE_DPDK_RX_DEVICE=3b:00.0\n", tx);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "a receive-only device pairs two vdevs"));
	/* Not a device at all. */
	snprintf(text, sizeof(text), "%sTIDE_DPDK_RX_DEVICE=memif1\n", tx);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(3, "TIDE_DPDK_RX_DEVICE: 'memif1' is not a DPDK device"));
	/* Elision needs both devices on this host. */
	snprintf(text, sizeof(text),
		 "%sTIDE_DPDK_RX_DEVICE=net_af_packet0,iface=veth0\nTIDE_CSUM=elide\n", tx);
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(4, "TIDE_CSUM: 'elide' is only for a net_memif or net_ring "
				       "TIDE_DPDK_RX_DEVICE (frames that stay in this host's "
				       "memory), not 'net_af_packet0,iface=veth0' (use auto)\n"));
}

/* ---- TIDE_FAULT ---- */

static void
test_parse_fault(void)
{
	struct tide_nodeenv_fault f;
	char why[256];

	TIDE_UT_OK(tide_nodeenv_parse_fault(
		"drop=0.1,dup=0.02,reorder=0,corrupt=1,delay_us=50,seed=42,dir=rx", &f, why,
		sizeof(why)));
	CU_ASSERT_TRUE(f.enabled);
	CU_ASSERT_DOUBLE_EQUAL(f.drop, 0.1, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(f.dup, 0.02, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(f.reorder, 0.0, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(f.corrupt, 1.0, 1e-12);
	CU_ASSERT_EQUAL(f.delay_us, 50);
	CU_ASSERT_EQUAL(f.seed, 42);
	CU_ASSERT_EQUAL(f.dir, TIDE_NODEENV_FAULT_RX);

	TIDE_UT_OK(tide_nodeenv_parse_fault("dir=tx", &f, why, sizeof(why)));
	CU_ASSERT_EQUAL(f.dir, TIDE_NODEENV_FAULT_TX);
	CU_ASSERT_DOUBLE_EQUAL(f.drop, 0.0, 1e-12);
	TIDE_UT_OK(tide_nodeenv_parse_fault("drop=1.0,seed=18446744073709551615", &f, why,
					    sizeof(why)));
	CU_ASSERT_EQUAL(f.seed, UINT64_MAX);
	CU_ASSERT_EQUAL(f.dir, TIDE_NODEENV_FAULT_BOTH);
	TIDE_UT_OK(tide_nodeenv_parse_fault("", &f, why, sizeof(why)));
	CU_ASSERT_FALSE(f.enabled);
}

static void
test_parse_fault_errors_name_subkey(void)
{
	static const struct {
		const char *spec;
		const char *why;
	} bad[] = {
		{"drop=1.5", "drop='1.5', not a probability in [0,1]"},
		{"drop=1.01", "drop='1.01'"},
		{"dup=-0.1", "dup='-0.1'"},
		{"reorder=.5", "reorder='.5'"},
		{"corrupt=0.", "corrupt='0.'"},
		{"corrupt=abc", "corrupt='abc'"},
		{"lose=0.1",
		 "unknown sub-key 'lose' (valid: drop, dup, reorder, corrupt, delay_us, "
		 "seed, dir)"},
		{"drop=0.1,drop=0.2", "sub-key drop twice"},
		{"delay_us=abc", "delay_us='abc'"},
		{"delay_us=1000001", "delay_us='1000001'"},
		{"seed=-1", "seed='-1'"},
		{"seed=18446744073709551616", "seed='18446744073709551616'"},
		{"dir=up", "dir='up' (valid: rx, tx, both)"},
		{"drop", "'drop' without '='"},
		{"drop=0.1,", "empty element"},
		{",drop=0.1", "empty element"},
	};
	struct tide_nodeenv_fault f = {.delay_us = 777};
	struct tide_nodeenv ne;
	char why[256], text[300], want[300];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		CU_ASSERT_EQUAL(tide_nodeenv_parse_fault(bad[i].spec, &f, why, sizeof(why)),
				-EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].why));
		if (strstr(why, bad[i].why) == NULL)
			fprintf(stderr, "fault '%s': got '%s'\n", bad[i].spec, why);
		CU_ASSERT_EQUAL(f.delay_us, 777);
	}
	/* Through the loader: file and line, key, value, sub-key. */
	snprintf(text, sizeof(text), "TIDE_FAULT=drop=0.01,dir=sideways\n");
	CU_ASSERT_EQUAL(load_text(text, no_env, &ne), -EINVAL);
	snprintf(want, sizeof(want),
		 "TIDE_FAULT: 'drop=0.01,dir=sideways' has dir='sideways' (valid: rx, tx, both)");
	CU_ASSERT_TRUE(has_file_err(1, want));
	CU_ASSERT_FALSE(ne.fault.enabled);
	CU_ASSERT_STRING_EQUAL(ne.fault_spec, "");

	CU_ASSERT_EQUAL(load_text("TIDE_FAULT=drop=0.25,delay_us=10\n", no_env, &ne), 0);
	CU_ASSERT_TRUE(ne.fault.enabled);
	CU_ASSERT_DOUBLE_EQUAL(ne.fault.drop, 0.25, 1e-12);
	CU_ASSERT_EQUAL(ne.fault.delay_us, 10);
	CU_ASSERT_STRING_EQUAL(ne.fault_spec, "drop=0.25,delay_us=10");
}

/* ---- cross-checks ---- */

static void
test_cross_checks(void)
{
	struct tide_nodeenv ne;

	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=net_ring0\n", no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_DPDK_DEVICE: 'net_ring0' needs TIDE_DATA_IP"));
	CU_ASSERT_STRING_EQUAL(ne.dpdk_device, "net_ring0");

	char *const env[] = {"TIDE_DATA_IP=10.0.0.2", NULL};

	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=net_ring0\n", env, &ne), 0);

	CU_ASSERT_EQUAL(load_text("MC_MIN_RPC_PORT=17001\n", no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "MC_MIN_RPC_PORT: '17001' is above MC_MAX_RPC_PORT (17000, "
				       "from default)"));
	CU_ASSERT_EQUAL(load_text("MC_MIN_RPC_PORT=17000\n", no_env, &ne), 0);

	CU_ASSERT_EQUAL(load_text("TIDE_DATA_IP=10.0.0.2\nTIDE_DATA_NETMASK=/24\n"
				  "TIDE_GATEWAY=10.0.1.1\n",
				  no_env, &ne),
			-EINVAL);
	CU_ASSERT_TRUE(has_file_err(3, "TIDE_GATEWAY: '10.0.1.1' is outside the data subnet "
				       "10.0.0.0/24 (TIDE_DATA_IP 10.0.0.2)"));
	CU_ASSERT_EQUAL(load_text("TIDE_DATA_IP=10.0.0.2\nTIDE_DATA_NETMASK=/23\n"
				  "TIDE_GATEWAY=10.0.1.1\n",
				  no_env, &ne),
			0);
	CU_ASSERT_EQUAL(load_text("TIDE_GATEWAY=10.0.1.1\n", no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_GATEWAY: '10.0.1.1' needs TIDE_DATA_IP"));
	CU_ASSERT_EQUAL(load_text("TIDE_DATA_IP=10.0.0.2\nTIDE_GATEWAY=10.0.0.2\n", no_env, &ne),
			-EINVAL);
	CU_ASSERT_TRUE(has_file_err(2, "TIDE_GATEWAY: '10.0.0.2' is TIDE_DATA_IP itself"));

	CU_ASSERT_EQUAL(load_text("TIDE_HUGEPAGE_SIZE=1gb\n", no_env, &ne), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "default: TIDE_HUGEPAGE_MEM: '512mb' is not a "
					      "multiple of TIDE_HUGEPAGE_SIZE (1gb)"));
	CU_ASSERT_EQUAL(load_text("TIDE_HUGEPAGE_MEM=3mb\n", no_env, &ne), -EINVAL);
	CU_ASSERT_TRUE(has_file_err(1, "TIDE_HUGEPAGE_MEM: '3mb' is not a multiple of "
				       "TIDE_HUGEPAGE_SIZE (2mb)"));
	CU_ASSERT_EQUAL(load_text("TIDE_HUGEPAGE_SIZE=1gb\nTIDE_HUGEPAGE_MEM=2gb\n", no_env, &ne),
			0);

	/* All cross-check failures at once. */
	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=3b:00.0\nMC_MIN_RPC_PORT=20000\n"
				  "TIDE_GATEWAY=1.2.3.4\nTIDE_HUGEPAGE_MEM=5mb\n",
				  no_env, &ne),
			-EINVAL);
	CU_ASSERT_EQUAL(count_lines(errbuf), 4);
}

/* ---- dump and round trip ---- */

static void
assert_same_values(const struct tide_nodeenv *a, const struct tide_nodeenv *b)
{
	char va[1200], vb[1200];

	for (size_t i = 0; i < tide_nodeenv_nkeys(); i++) {
		const char *k = tide_nodeenv_key_name(i);

		fmt(a, k, va, sizeof(va));
		fmt(b, k, vb, sizeof(vb));
		CU_ASSERT_STRING_EQUAL(va, vb);
	}
}

static void
test_dump_round_trip(void)
{
	char *const env[] = {"TIDE_EAL_ARGS=--a 'b' c#d", "MOONCAKE_TENANT_ID=it's",
			     "TIDE_DATA_MAC=02:11:22:33:44:55", "TIDE_FAULT=drop=0.5,dir=tx", NULL};
	struct tide_nodeenv a, b;
	char path[512], line[1400], want[600];
	unsigned n = 0;
	FILE *f;

	CU_ASSERT_EQUAL(load_text("TIDE_DPDK_DEVICE=3b:00.0\nTIDE_DATA_IP=10.1.2.3\n"
				  "TIDE_DATA_NETMASK=/20\nTIDE_GATEWAY=10.1.0.1\n"
				  "MOONCAKE_GLOBAL_SEGMENT_SIZE=3.125gb\nMC_FORCE_TCP=yes\n",
				  env, &a),
			0);
	snprintf(want, sizeof(want), "# %s:2\n", node_path);
	snprintf(path, sizeof(path), "%s/dump.env", tmpdir);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	tide_nodeenv_dump(&a, f);
	fclose(f);

	f = fopen(path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		n++;
		if (strncmp(line, "TIDE_DATA_IP=", 13) == 0)
			CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
		if (strncmp(line, "MOONCAKE_GLOBAL_SEGMENT_SIZE=", 29) == 0)
			CU_ASSERT_PTR_NOT_NULL(strstr(line, "=3355443200 "));
		if (strncmp(line, "MOONCAKE_GLOBAL_SEGMENT_SIZE=", 29) == 0)
			CU_ASSERT_PTR_NOT_NULL(strstr(line, ":5 (3.125gb)\n"));
		if (strncmp(line, "TIDE_HUGEPAGE_SIZE=", 19) == 0)
			CU_ASSERT_PTR_NOT_NULL(strstr(line, "# default (2mb)\n"));
		if (strncmp(line, "TIDE_MTU=", 9) == 0)
			CU_ASSERT_PTR_NOT_NULL(strstr(line, "# default"));
		if (strncmp(line, "TIDE_EAL_ARGS=", 14) == 0)
			CU_ASSERT_PTR_NOT_NULL(strstr(line, "# environment"));
	}
	fclose(f);
	CU_ASSERT_EQUAL(n, tide_nodeenv_nkeys());

	CU_ASSERT_EQUAL(tide_nodeenv_load(&b, path, no_env, errbuf, sizeof(errbuf)), 0);
	if (errbuf[0] != '\0')
		fprintf(stderr, "%s", errbuf);
	assert_same_values(&a, &b);
	CU_ASSERT_STRING_EQUAL(b.eal_args, "--a 'b' c#d");
	CU_ASSERT_STRING_EQUAL(b.tenant_id, "it's");
	CU_ASSERT_EQUAL(b.data_prefix_len, 20);
}

/* ---- agreement with sh ---- */

/*
 * Source `path` with /bin/sh under an empty environment and return what sh
 * exported, as an environ-like array (only Tide's table keys). Caller frees
 * with free_env(). NULL when sh failed.
 */
static char **
sh_env(const char *path)
{
	char cmd[1024], *buf = NULL, **env;
	size_t len = 0, cap = 0, n = 0;
	FILE *p;
	int c, st;

	snprintf(cmd, sizeof(cmd),
		 "env -i /bin/sh -c 'set -a; . \"$1\"; set +a; exec env -0' sh '%s'", path);
	p = popen(cmd, "r");
	if (p == NULL)
		return NULL;
	while ((c = fgetc(p)) != EOF) {
		if (len + 1 >= cap) {
			cap = cap == 0 ? 4096 : cap * 2;
			buf = realloc(buf, cap);
			if (buf == NULL)
				abort();
		}
		buf[len++] = (char)c;
	}
	st = pclose(p);
	env = calloc(tide_nodeenv_nkeys() + 1, sizeof(*env));
	if (env == NULL || st != 0 || buf == NULL) {
		free(buf);
		free(env);
		return NULL;
	}
	for (size_t o = 0; o < len; o += strlen(buf + o) + 1) {
		const char *e = buf + o, *eq = strchr(e, '=');
		char name[128];

		if (eq == NULL || (size_t)(eq - e) >= sizeof(name))
			continue;
		memcpy(name, e, (size_t)(eq - e));
		name[eq - e] = '\0';
		if (tide_nodeenv_key_index(name) >= 0)
			env[n++] = strdup(e);
	}
	free(buf);
	return env;
}

static void
free_env(char **env)
{
	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		free(env[i]);
	free(env);
}

/* Load `path` ourselves and via sh's exported environment; values must match. */
static void
assert_sh_agrees(const char *path)
{
	struct tide_nodeenv mine, theirs;
	char empty[512];
	char **env = sh_env(path);

	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	CU_ASSERT_EQUAL(tide_nodeenv_load(&mine, path, no_env, errbuf, sizeof(errbuf)), 0);
	write_file("empty.env", "", empty, sizeof(empty));
	CU_ASSERT_EQUAL(tide_nodeenv_load(&theirs, empty, env, errbuf, sizeof(errbuf)), 0);
	assert_same_values(&mine, &theirs);
	free_env(env);
}

static void
test_sh_agrees_on_accepted_syntax(void)
{
	char path[512];

	write_file("sh.env",
		   "# comment\n"
		   "\n"
		   "   export TIDE_EAL_ARGS='--a $b `c` \\d \"e\" #f'   # trailing\n"
		   "MOONCAKE_TENANT_ID=\"it's a tenant\"\n"
		   "MOONCAKE_CONFIG_PATH=/etc/x#y=z,w@v%u+t:s\n"
		   "TIDE_LCORES=#1\n"
		   "MOONCAKE_DEVICE=\n"
		   "TIDE_FAULT=   # nothing\n"
		   "\tTIDE_MTU=9000\t\n"
		   "TIDE_DATA_MAC=''\n"
		   "MOONCAKE_LOCAL_HOSTNAME=\"node1\" # c\n",
		   path, sizeof(path));
	/* TIDE_LCORES='#1' is what sh reads too, and it is not an lcore list. */
	{
		struct tide_nodeenv ne;
		char **env = sh_env(path);

		CU_ASSERT_PTR_NOT_NULL_FATAL(env);
		CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, path, no_env, errbuf, sizeof(errbuf)),
				-EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "TIDE_LCORES: '#1' is not an lcore list"));
		for (size_t i = 0; env[i] != NULL; i++) {
			if (strncmp(env[i], "TIDE_LCORES=", 12) == 0)
				CU_ASSERT_STRING_EQUAL(env[i], "TIDE_LCORES=#1");
		}
		free_env(env);
	}
	write_file("sh.env",
		   "# comment\n"
		   "\n"
		   "   export TIDE_EAL_ARGS='--a $b `c` \\d \"e\" #f'   # trailing\n"
		   "MOONCAKE_TENANT_ID=\"it's a tenant\"\n"
		   "MOONCAKE_CONFIG_PATH=/etc/x#y=z,w@v%u+t:s\n"
		   "MOONCAKE_DEVICE=\n"
		   "TIDE_FAULT=   # nothing\n"
		   "\tTIDE_MTU=9000\t\n"
		   "TIDE_DATA_MAC=''\n"
		   "MOONCAKE_LOCAL_HOSTNAME=\"node1\" # c\n",
		   path, sizeof(path));
	assert_sh_agrees(path);
}

/* ---- the shipped sample ---- */

#define SAMPLE TIDE_SOURCE_ROOT "/tools/node.env.sample"

static void
test_sample_loads_and_documents_every_key(void)
{
	struct tide_nodeenv ne, def, un;
	char *text = tide_ut_read_file(NULL, SAMPLE, NULL), *uncommented, *o;
	char v[1200], dv[1200];

	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT_EQUAL(tide_nodeenv_load(&ne, SAMPLE, no_env, errbuf, sizeof(errbuf)), 0);
	if (errbuf[0] != '\0')
		fprintf(stderr, "%s", errbuf);
	CU_ASSERT_STRING_EQUAL(ne.master, "127.0.0.1:50051");
	CU_ASSERT_STRING_EQUAL(ne.local_hostname, "127.0.0.1");
	CU_ASSERT_EQUAL(ne.protocol, TIDE_NODEENV_PROTO_TCP);
	CU_ASSERT_STRING_EQUAL(ne.metadata_server, "P2PHANDSHAKE");
	CU_ASSERT_EQUAL(ne.global_segment_size, UINT64_C(256) << 20);
	CU_ASSERT_EQUAL(ne.local_buffer_size, UINT64_C(64) << 20);
	CU_ASSERT_STRING_EQUAL(ne.dpdk_device, "net_ring0");
	CU_ASSERT_EQUAL(ne.data_ip.s_addr, htonl(0x0a4d0001));
	CU_ASSERT_EQUAL(ne.data_prefix_len, 24);
	CU_ASSERT_EQUAL(ne.hugepages, TIDE_NODEENV_HUGE_AUTO);
	CU_ASSERT_EQUAL(ne.hugepage_mem, UINT64_C(256) << 20);
	CU_ASSERT_EQUAL(ne.lcores_per_numa, 1);
	CU_ASSERT_EQUAL(ne.idle, TIDE_NODEENV_IDLE_ADAPTIVE);
	CU_ASSERT_EQUAL(ne.log_level, TIDE_LOG_NOTICE);
	CU_ASSERT_STRING_EQUAL(ne.file_prefix, "tide-demo");

	/* Every key appears as an active or commented-out assignment. */
	for (size_t i = 0; i < tide_nodeenv_nkeys(); i++) {
		char want[128];
		const char *k = tide_nodeenv_key_name(i);

		snprintf(want, sizeof(want), "\n%s=", k);
		if (strstr(text, want) == NULL) {
			snprintf(want, sizeof(want), "\n#%s=", k);
			CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
			if (strstr(text, want) == NULL)
				fprintf(stderr, "sample lacks %s\n", k);
		}
	}

	/* Commented-out assignments show the defaults: uncomment them all and
	 * every key that was commented must still have its default value. */
	uncommented = malloc(strlen(text) + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(uncommented);
	o = uncommented;
	for (const char *p = text; *p != '\0'; p++) {
		if (*p == '#' && (p == text || p[-1] == '\n') &&
		    ((p[1] >= 'A' && p[1] <= 'Z') || p[1] == '_'))
			continue;
		*o++ = *p;
	}
	*o = '\0';
	write_file("uncommented.env", uncommented, node_path, sizeof(node_path));
	CU_ASSERT_EQUAL(tide_nodeenv_load(&un, node_path, no_env, errbuf, sizeof(errbuf)), 0);
	if (errbuf[0] != '\0')
		fprintf(stderr, "%s", errbuf);
	tide_nodeenv_defaults(&def);
	for (size_t i = 0; i < tide_nodeenv_nkeys(); i++) {
		const char *k = tide_nodeenv_key_name(i);
		char want[128];

		snprintf(want, sizeof(want), "\n#%s=", k);
		if (strstr(text, want) == NULL)
			continue;
		fmt(&un, k, v, sizeof(v));
		fmt(&def, k, dv, sizeof(dv));
		CU_ASSERT_STRING_EQUAL(v, dv);
	}
	free(uncommented);
	free(text);

	/* And sh reads the sample the same way. */
	assert_sh_agrees(SAMPLE);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("nodeenv", suite_init, suite_clean);

	CU_add_test(s, "parse_size_dialect", test_parse_size_dialect);
	CU_add_test(s, "parse_size_overflow", test_parse_size_overflow);
	CU_add_test(s, "defaults_match_spec", test_defaults_match_spec);
	CU_add_test(s, "key_table_accessors", test_key_table_accessors);
	CU_add_test(s, "load_syntax_accepted", test_load_syntax_accepted);
	CU_add_test(s, "load_syntax_rejected", test_load_syntax_rejected);
	CU_add_test(s, "load_line_limits", test_load_line_limits);
	CU_add_test(s, "load_error_format_exact", test_load_error_format_exact);
	CU_add_test(s, "load_collects_all_errors", test_load_collects_all_errors);
	CU_add_test(s, "load_error_buffer_truncates_safely",
		    test_load_error_buffer_truncates_safely);
	CU_add_test(s, "load_precedence_and_sources", test_load_precedence_and_sources);
	CU_add_test(s, "load_env_empty_value_and_first_wins",
		    test_load_env_empty_value_and_first_wins);
	CU_add_test(s, "load_unknown_keys", test_load_unknown_keys);
	CU_add_test(s, "load_duplicate_keys", test_load_duplicate_keys);
	CU_add_test(s, "load_path_resolution", test_load_path_resolution);
	CU_add_test(s, "load_missing_default_path_ok", test_load_missing_default_path_ok);
	CU_add_test(s, "values_numbers_and_enums", test_values_numbers_and_enums);
	CU_add_test(s, "values_addresses", test_values_addresses);
	CU_add_test(s, "values_devices_and_strings", test_values_devices_and_strings);
	CU_add_test(s, "values_messages_say_what_is_valid", test_values_messages_say_what_is_valid);
	CU_add_test(s, "agent_and_pin_unread", test_agent_and_pin_unread);
	CU_add_test(s, "many_keys_duplicates", test_many_keys_duplicates);
	CU_add_test(s, "parse_bool", test_parse_bool);
	CU_add_test(s, "csum_key", test_csum_key);
	CU_add_test(s, "dpdk_rx_device", test_dpdk_rx_device);
	CU_add_test(s, "allow_nets_and_socket_group", test_allow_nets_and_socket_group);
	CU_add_test(s, "parse_fault", test_parse_fault);
	CU_add_test(s, "parse_fault_errors_name_subkey", test_parse_fault_errors_name_subkey);
	CU_add_test(s, "cross_checks", test_cross_checks);
	CU_add_test(s, "dump_round_trip", test_dump_round_trip);
	CU_add_test(s, "sh_agrees_on_accepted_syntax", test_sh_agrees_on_accepted_syntax);
	CU_add_test(s, "sample_loads_and_documents_every_key",
		    test_sample_loads_and_documents_every_key);
}

TIDE_UT_MAIN(register_tests)
