/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/mc_pool.c against loopback sockets of the test's own (no
 * master): a refused connect leaves nothing locked; concurrent callers get
 * distinct connections and a fifth waits for one to come back; a connection
 * the peer closed fails its call and is reopened by the next get.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_pool.h"
#include "tide_ut.h"

/* A listening socket on 127.0.0.1; its "host:port" goes to addr. */
static int
listener(char *addr, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
		return -1;
	snprintf(addr, len, "127.0.0.1:%u", ntohs(sa.sin_port));
	return fd;
}

static void
test_refused_connect_unlocks(void)
{
	struct tide_mc_pool p;
	char addr[64];
	int fd = listener(addr, sizeof(addr)), err = 0;

	CU_ASSERT_FATAL(fd >= 0);
	close(fd); /* nothing listens there now */
	tide_mc_pool_init(&p);
	TIDE_UT_OK(tide_mc_pool_set_master(&p, addr));
	/* More gets than connections: each must fail, none may block. */
	for (int i = 0; i < 3 * TIDE_MC_POOL_N; i++) {
		err = 0;
		CU_ASSERT_PTR_NULL(tide_mc_pool_get(&p, 500, &err));
		CU_ASSERT_EQUAL(err, -ECONNREFUSED);
	}
	TIDE_UT_OK(tide_mc_pool_set_master(&p, "no-port"));
	CU_ASSERT_PTR_NULL(tide_mc_pool_get(&p, 500, &err));
	CU_ASSERT_EQUAL(err, -EINVAL);
	tide_mc_pool_fini(&p);
}

struct waiter {
	struct tide_mc_pool *p;
	struct tide_mc_pool_conn *got;
	int err;
};

static void *
wait_get(void *arg)
{
	struct waiter *w = arg;

	w->got = tide_mc_pool_get(w->p, 1000, &w->err);
	return NULL;
}

static void
test_concurrent_callers_share_the_pool(void)
{
	struct tide_mc_pool p;
	struct tide_mc_pool_conn *held[TIDE_MC_POOL_N];
	struct waiter w = {.p = &p};
	pthread_t t;
	char addr[64];
	int fd = listener(addr, sizeof(addr)), err = 0;

	CU_ASSERT_FATAL(fd >= 0);
	tide_mc_pool_init(&p);
	TIDE_UT_OK(tide_mc_pool_set_master(&p, addr));
	for (int i = 0; i < TIDE_MC_POOL_N; i++) {
		held[i] = tide_mc_pool_get(&p, 1000, &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(held[i]);
		for (int j = 0; j < i; j++)
			CU_ASSERT_PTR_NOT_EQUAL(held[i], held[j]);
	}
	/* A fifth caller waits on a busy connection until it is given back. */
	CU_ASSERT_FATAL(pthread_create(&t, NULL, wait_get, &w) == 0);
	usleep(100000);
	CU_ASSERT_PTR_NULL(w.got);
	for (int i = 0; i < TIDE_MC_POOL_N; i++)
		tide_mc_pool_put(held[i]);
	pthread_join(t, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w.got);
	CU_ASSERT_TRUE(w.got->c != NULL && tide_mc_client_connected(w.got->c));
	tide_mc_pool_put(w.got);
	tide_mc_pool_fini(&p);
	close(fd);
}

static void
test_broken_connection_is_reopened(void)
{
	struct tide_mc_pool p;
	struct tide_mc_pool_conn *m;
	struct tide_mc_req r;
	struct tide_mc_resp resp;
	char addr[64];
	int fd = listener(addr, sizeof(addr)), err = 0, peer, rc;

	CU_ASSERT_FATAL(fd >= 0);
	tide_mc_pool_init(&p);
	TIDE_UT_OK(tide_mc_pool_set_master(&p, addr));
	m = tide_mc_pool_get(&p, 1000, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	tide_mc_pool_put(m);
	/* The "master" accepts and hangs up: the call on that connection fails. */
	peer = accept(fd, NULL, NULL);
	CU_ASSERT_FATAL(peer >= 0);
	close(peer);
	memset(&r, 0, sizeof(r));
	r.fn = TIDE_MC_FN_SERVICE_READY;
	r.layout = TIDE_MC_LAYOUT_HEAD;
	rc = tide_mc_pool_call(&p, &r, &resp);
	CU_ASSERT_TRUE(rc == -ECONNRESET || rc == -EPIPE || rc == -ENOTCONN);
	/* The next get opens a fresh connection in its place. */
	m = tide_mc_pool_get(&p, 1000, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_TRUE(tide_mc_client_connected(m->c));
	peer = accept(fd, NULL, NULL);
	CU_ASSERT(peer >= 0);
	tide_mc_pool_put(m);
	tide_mc_pool_fini(&p);
	if (peer >= 0)
		close(peer);
	close(fd);
}

/* A new master address (an HA failover): connections to the old one are
 * dropped as they are taken, the next get connects to the new one. */
static void
test_master_moves(void)
{
	struct tide_mc_pool p;
	struct tide_mc_pool_conn *m;
	char a1[64], a2[64], cur[TIDE_MC_POOL_ADDR_MAX], big[300];
	int f1 = listener(a1, sizeof(a1)), f2 = listener(a2, sizeof(a2)), err = 0, peer;

	CU_ASSERT_FATAL(f1 >= 0 && f2 >= 0);
	tide_mc_pool_init(&p);
	TIDE_UT_OK(tide_mc_pool_set_master(&p, a1));
	m = tide_mc_pool_get(&p, 1000, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	tide_mc_pool_put(m);
	peer = accept(f1, NULL, NULL);
	CU_ASSERT(peer >= 0);
	TIDE_UT_OK(tide_mc_pool_set_master(&p, a2));
	tide_mc_pool_master(&p, cur, sizeof(cur));
	CU_ASSERT_STRING_EQUAL(cur, a2);
	/* The same slot: its connection to a1 is replaced by one to a2. */
	m = tide_mc_pool_get(&p, 1000, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_TRUE(tide_mc_client_connected(m->c));
	tide_mc_pool_put(m);
	int peer2 = accept(f2, NULL, NULL);
	CU_ASSERT(peer2 >= 0);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CU_ASSERT_EQUAL(tide_mc_pool_set_master(&p, big), -ENAMETOOLONG);
	tide_mc_pool_fini(&p);
	if (peer >= 0)
		close(peer);
	if (peer2 >= 0)
		close(peer2);
	close(f1);
	close(f2);
}

struct reloc {
	struct tide_mc_pool *p;
	const char *to; /* NULL: the lookup finds nothing */
	int calls;
};

/* What the store client's etcd lookup does: point the pool at the leader. */
static int
reloc_hook(void *arg)
{
	struct reloc *r = arg;

	r->calls++;
	return r->to != NULL ? tide_mc_pool_set_master(r->p, r->to) : -ENOENT;
}

/* A refused connect asks the relocate hook once; a new address is tried at once. */
static void
test_relocate_on_refused_connect(void)
{
	struct tide_mc_pool p;
	struct tide_mc_pool_conn *m;
	struct reloc r = {.p = &p};
	char dead[64], live[64];
	int fd = listener(dead, sizeof(dead)), lfd, err = 0, peer;

	CU_ASSERT_FATAL(fd >= 0);
	close(fd); /* nothing listens at dead */
	lfd = listener(live, sizeof(live));
	CU_ASSERT_FATAL(lfd >= 0);
	tide_mc_pool_init(&p);
	p.relocate = reloc_hook;
	p.relocate_arg = &r;
	TIDE_UT_OK(tide_mc_pool_set_master(&p, dead));
	/* The lookup finds nothing new: the connect's error stands, asked once. */
	CU_ASSERT_PTR_NULL(tide_mc_pool_get(&p, 500, &err));
	CU_ASSERT_EQUAL(err, -ECONNREFUSED);
	CU_ASSERT_EQUAL(r.calls, 1);
	/* The lookup moves the pool: the same get connects to the new master. */
	r.to = live;
	m = tide_mc_pool_get(&p, 1000, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_TRUE(tide_mc_client_connected(m->c));
	CU_ASSERT_EQUAL(r.calls, 2);
	tide_mc_pool_put(m);
	peer = accept(lfd, NULL, NULL);
	CU_ASSERT(peer >= 0);
	tide_mc_pool_fini(&p);
	if (peer >= 0)
		close(peer);
	close(lfd);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("mc_pool", NULL, NULL);

	CU_add_test(s, "refused_connect_unlocks", test_refused_connect_unlocks);
	CU_add_test(s, "concurrent_callers_share_the_pool", test_concurrent_callers_share_the_pool);
	CU_add_test(s, "broken_connection_is_reopened", test_broken_connection_is_reopened);
	CU_add_test(s, "master_moves", test_master_moves);
	CU_add_test(s, "relocate_on_refused_connect", test_relocate_on_refused_connect);
}

TIDE_UT_MAIN(register_tests)
