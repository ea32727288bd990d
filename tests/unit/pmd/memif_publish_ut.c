/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of pmd/eth/memif_publish.c: which --vdev strings get a private
 * start-up socket path (filesystem memif servers only), the rewritten string
 * byte for byte, the bounds (path length, table size), and publishing and
 * withdrawing a real listening socket: a client connects only once it is
 * published, a newer server's file is never removed, stale files are
 * replaced. No EAL.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "memif_publish.h"
#include "tide_ut.h"

static char dir[] = "/tmp/memif_publish_ut.XXXXXX";

static int
suite_init(void)
{
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int
suite_clean(void)
{
	return rmdir(dir);
}

/* un filled with path; false (and errno ENAMETOOLONG) when path does not fit sun_path. */
static bool
un_at(struct sockaddr_un *un, const char *path)
{
	size_t n = strlen(path);

	if (n >= sizeof(un->sun_path)) {
		errno = ENAMETOOLONG;
		return false;
	}
	memcpy(un->sun_path, path, n + 1);
	return true;
}

/* A listening unix socket bound at path (what the PMD does at probe). */
static int
listen_at(const char *path)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	int fd;

	if (!un_at(&un, path))
		return -1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&un, sizeof(un)) != 0 || listen(fd, 1) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static bool
can_connect(const char *path)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	int fd;
	bool ok;

	if (!un_at(&un, path))
		return false;
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&un, sizeof(un)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static void
test_devargs_whole_keys(void)
{
	static const char args[] = "role=server,xzero-copy=yes,socket=/a,b,zero-copy=no,rsize=12";
	size_t len = 0;
	const char *v;

	v = tide_memif_arg_find(args, "socket", &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	CU_ASSERT_EQUAL(len, 2);
	CU_ASSERT_EQUAL(strncmp(v, "/a", len), 0);
	v = tide_memif_arg_find(args, "rsize", &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	CU_ASSERT_STRING_EQUAL(v, "12");
	CU_ASSERT_TRUE(tide_memif_arg_is(args, "role", "server"));
	CU_ASSERT_FALSE(tide_memif_arg_is(args, "role", "serve"));
	/* Whole keys only: "xzero-copy=yes" is not zero-copy=yes. */
	CU_ASSERT_FALSE(tide_memif_arg_is(args, "zero-copy", "yes"));
	CU_ASSERT_TRUE(tide_memif_arg_is(args, "zero-copy", "no"));
	CU_ASSERT_PTR_NULL(tide_memif_arg_find(args, "b", &len)); /* a bare word has no value */
	CU_ASSERT_PTR_NULL(tide_memif_arg_find(args, "secret", &len));
	CU_ASSERT_PTR_NULL(tide_memif_arg_find(NULL, "role", &len));
	CU_ASSERT_PTR_NULL(tide_memif_arg_find("", "role", &len));
	CU_ASSERT_FALSE(tide_memif_arg_is(NULL, "role", "server"));
}

static void
test_rewrite_only_filesystem_servers(void)
{
	static const char *const unchanged[] = {
		"net_ring0",
		"net_memif0",
		"net_memif0,role=client,socket=/tmp/x.sock,socket-abstract=no",
		"net_memif0,role=server,socket=/tmp/x.sock", /* abstract by default */
		"net_memif0,role=server,socket=/tmp/x.sock,socket-abstract=yes",
		"net_memif0,role=server,socket-abstract=no", /* the PMD's default path */
		"net_memif0,role=server,socket=,socket-abstract=no",
		"net_af_packet0,iface=veth0,role=server,socket=/tmp/x,socket-abstract=no",
		"net_memif0,role=servers,socket=/tmp/x.sock,socket-abstract=no",
		"net_memif0,xrole=server,socket=/tmp/x.sock,socket-abstract=no",
	};
	char out[512];

	for (size_t i = 0; i < sizeof(unchanged) / sizeof(unchanged[0]); i++) {
		CU_ASSERT_EQUAL(tide_memif_vdev_rewrite(unchanged[i], out, sizeof(out)), 0);
		CU_ASSERT_STRING_EQUAL(out, unchanged[i]);
	}
	/* Nothing remembered: publishing and withdrawing are no-ops. */
	CU_ASSERT_EQUAL(tide_memif_publish("net_memif0"), 0);
	tide_memif_unpublish("net_memif0");
	tide_memif_forget("net_memif0");
	/* Too small a buffer for the copy. */
	CU_ASSERT_EQUAL(tide_memif_vdev_rewrite("net_ring0", out, 5), -E2BIG);
}

static void
test_rewrite_exact(void)
{
	char out[512], want[512];

	snprintf(want, sizeof(want),
		 "net_memif3,role=server,socket=/run/t/a.sock.%d.starting,socket-abstract=no,"
		 "bsize=9216",
		 (int)getpid());
	CU_ASSERT_EQUAL(tide_memif_vdev_rewrite("net_memif3,role=server,socket=/run/t/a.sock,"
						"socket-abstract=no,bsize=9216",
						out, sizeof(out)),
			1);
	CU_ASSERT_STRING_EQUAL(out, want);
	/* Socket last, keys in another order. */
	snprintf(want, sizeof(want),
		 "net_memif4,socket-abstract=no,role=server,socket=/run/t/b.sock.%d.starting",
		 (int)getpid());
	CU_ASSERT_EQUAL(tide_memif_vdev_rewrite("net_memif4,socket-abstract=no,role=server,"
						"socket=/run/t/b.sock",
						out, sizeof(out)),
			1);
	CU_ASSERT_STRING_EQUAL(out, want);
	/* The rewritten string must fit the caller's buffer. */
	CU_ASSERT_EQUAL(tide_memif_vdev_rewrite("net_memif5,role=server,socket=/run/t/c.sock,"
						"socket-abstract=no",
						out, 60),
			-E2BIG);
	tide_memif_forget_all();
}

static void
test_rewrite_bounds(void)
{
	char vdev[300], out[512];
	int n = 0;

	/* A path with no room for the private suffix within sun_path. */
	snprintf(vdev, sizeof(vdev), "net_memif0,role=server,socket=/tmp/%0100d,socket-abstract=no",
		 0);
	CU_ASSERT_EQUAL(tide_memif_vdev_rewrite(vdev, out, sizeof(out)), -E2BIG);
	/* At most eight servers remembered. */
	for (int i = 0; i < 9; i++) {
		snprintf(vdev, sizeof(vdev),
			 "net_memif%d,role=server,socket=/tmp/s%d,socket-abstract=no", i, i);
		n = tide_memif_vdev_rewrite(vdev, out, sizeof(out));
		CU_ASSERT_EQUAL(n, i < 8 ? 1 : -ENOSPC);
	}
	tide_memif_forget_all();
	CU_ASSERT_EQUAL(tide_memif_vdev_rewrite(vdev, out, sizeof(out)), 1);
	tide_memif_forget_all();
}

/* Private path until started, then the configured one; withdrawn before close. */
static void
test_publish_lifecycle(void)
{
	char vdev[256], out[512], path[128], tmp[160];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/m.sock", dir);
	snprintf(tmp, sizeof(tmp), "%s.%d.starting", path, (int)getpid());
	/* A stale file from a crashed run at the configured path. */
	fd = listen_at(path);
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	close(fd);
	CU_ASSERT_FALSE(can_connect(path));

	snprintf(vdev, sizeof(vdev), "net_memif0,role=server,socket=%s,socket-abstract=no", path);
	CU_ASSERT_EQUAL_FATAL(tide_memif_vdev_rewrite(vdev, out, sizeof(out)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, tmp));
	fd = listen_at(tmp); /* the PMD's probe */
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	CU_ASSERT_FALSE(can_connect(path)); /* not started: clients find nothing to talk to */
	TIDE_UT_OK(tide_memif_publish("net_memif0"));
	CU_ASSERT_TRUE(can_connect(path));
	CU_ASSERT_EQUAL(stat(tmp, &st), -1);
	TIDE_UT_OK(tide_memif_publish("net_memif0")); /* once is enough */

	/* Before close: back to the private name, where the PMD unlinks it. */
	tide_memif_unpublish("net_memif0");
	CU_ASSERT_EQUAL(stat(path, &st), -1);
	CU_ASSERT_EQUAL(stat(tmp, &st), 0);
	/* A PMD that leaves its file: forget removes it. */
	tide_memif_forget("net_memif0");
	CU_ASSERT_EQUAL(stat(tmp, &st), -1);
	close(fd);
}

/* A newer server published the same path meanwhile: its file stays. */
static void
test_unpublish_keeps_newer_server(void)
{
	char vdev[256], out[512], path[128], tmp[160];
	struct stat st;
	int fd, fd2;

	snprintf(path, sizeof(path), "%s/n.sock", dir);
	snprintf(tmp, sizeof(tmp), "%s.%d.starting", path, (int)getpid());
	snprintf(vdev, sizeof(vdev), "net_memif1,role=server,socket=%s,socket-abstract=no", path);
	CU_ASSERT_EQUAL_FATAL(tide_memif_vdev_rewrite(vdev, out, sizeof(out)), 1);
	fd = listen_at(tmp);
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	TIDE_UT_OK(tide_memif_publish("net_memif1"));
	CU_ASSERT_EQUAL(unlink(path), 0);
	fd2 = listen_at(path); /* another process's server */
	CU_ASSERT_TRUE_FATAL(fd2 >= 0);
	tide_memif_unpublish("net_memif1");
	tide_memif_forget("net_memif1");
	CU_ASSERT_EQUAL(stat(path, &st), 0);
	CU_ASSERT_TRUE(can_connect(path));
	close(fd);
	close(fd2);
	CU_ASSERT_EQUAL(unlink(path), 0);

	/* Publishing fails cleanly when the private file is gone. */
	CU_ASSERT_EQUAL_FATAL(tide_memif_vdev_rewrite(vdev, out, sizeof(out)), 1);
	CU_ASSERT_EQUAL(tide_memif_publish("net_memif1"), -ENOENT);
	tide_memif_forget("net_memif1");
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("memif_publish", suite_init, suite_clean);

	CU_add_test(s, "devargs_whole_keys", test_devargs_whole_keys);
	CU_add_test(s, "rewrite_only_filesystem_servers", test_rewrite_only_filesystem_servers);
	CU_add_test(s, "rewrite_exact", test_rewrite_exact);
	CU_add_test(s, "rewrite_bounds", test_rewrite_bounds);
	CU_add_test(s, "publish_lifecycle", test_publish_lifecycle);
	CU_add_test(s, "unpublish_keeps_newer_server", test_unpublish_keeps_newer_server);
}

TIDE_UT_MAIN(register_tests)
