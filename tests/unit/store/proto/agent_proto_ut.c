/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the agent wire format (store/proto/agent_proto.c):
 * writer/reader round trips and every way a reader refuses input, the
 * replicate-config encoding, and framed send/receive over a socketpair
 * including descriptor passing, bad headers, oversize bodies and EOF.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_proto.h"
#include "tide_store.h"
#include "tide_ut.h"

static void
test_scalars_round_trip(void)
{
	struct agent_wbuf w;
	struct agent_rbuf r;
	struct agent_loc l = {7, 1ull << 40, 12345}, l2;
	char *s;

	agent_w_init(&w);
	agent_w_u8(&w, 0xab);
	agent_w_u32(&w, 0xdeadbeef);
	agent_w_u64(&w, 0x0123456789abcdefull);
	agent_w_str(&w, "key/with/slashes");
	agent_w_str(&w, NULL); /* encodes as "" */
	agent_w_loc(&w, &l);
	CU_ASSERT_EQUAL(w.err, 0);
	CU_ASSERT_EQUAL(w.len, 1 + 4 + 8 + 4 + 16 + 4 + 20);

	agent_r_init(&r, w.p, w.len);
	CU_ASSERT_EQUAL(agent_r_u8(&r), 0xab);
	CU_ASSERT_EQUAL(agent_r_u32(&r), 0xdeadbeef);
	CU_ASSERT_EQUAL(agent_r_u64(&r), 0x0123456789abcdefull);
	s = agent_r_str(&r, 64);
	CU_ASSERT_STRING_EQUAL(s, "key/with/slashes");
	free(s);
	s = agent_r_str(&r, 64);
	CU_ASSERT_STRING_EQUAL(s, "");
	free(s);
	agent_r_loc(&r, &l2);
	CU_ASSERT_EQUAL(l2.region, 7);
	CU_ASSERT_EQUAL(l2.off, 1ull << 40);
	CU_ASSERT_EQUAL(l2.len, 12345);
	CU_ASSERT_FALSE(r.bad);
	CU_ASSERT_EQUAL(r.pos, r.len);
	/* One more byte than there is: bad, zero, and it stays bad. */
	CU_ASSERT_EQUAL(agent_r_u8(&r), 0);
	CU_ASSERT_TRUE(r.bad);
	agent_w_free(&w);
}

static void
test_reader_refuses(void)
{
	struct agent_wbuf w;
	struct agent_rbuf r;
	static const uint8_t nul_str[] = {3, 0, 0, 0, 'a', 0, 'b'};
	static const uint8_t long_len[] = {0xff, 0xff, 0xff, 0x7f, 'x'};

	/* A string longer than the caller's maximum. */
	agent_w_init(&w);
	agent_w_str(&w, "0123456789");
	agent_r_init(&r, w.p, w.len);
	CU_ASSERT_PTR_NULL(agent_r_str(&r, 9));
	CU_ASSERT_TRUE(r.bad);
	agent_r_init(&r, w.p, w.len);
	char *s = agent_r_str(&r, 10);
	CU_ASSERT_STRING_EQUAL(s, "0123456789");
	free(s);
	agent_w_free(&w);
	/* An embedded NUL would truncate a key: refused. */
	agent_r_init(&r, nul_str, sizeof(nul_str));
	CU_ASSERT_PTR_NULL(agent_r_str(&r, 64));
	CU_ASSERT_TRUE(r.bad);
	/* A length beyond the buffer. */
	agent_r_init(&r, long_len, sizeof(long_len));
	CU_ASSERT_PTR_NULL(agent_r_str(&r, 1u << 31));
	CU_ASSERT_TRUE(r.bad);
	/* Every truncation of a u64 is refused. */
	for (size_t n = 0; n < 8; n++) {
		uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};

		agent_r_init(&r, b, n);
		CU_ASSERT_EQUAL(agent_r_u64(&r), 0);
		CU_ASSERT_TRUE(r.bad);
	}
}

static void
test_rc_round_trip(void)
{
	const char *prefs[] = {"10.0.0.2:1", "10.0.0.3:2"};
	const char *groups[] = {"structured-a", "", "structured-b"};
	struct tide_store_rc rc = {
		.replica_num = 2,
		.with_hard_pin = true,
		.preferred_segment = "10.0.0.1:5",
		.preferred_segments = prefs,
		.n_preferred_segments = 2,
		.prefer_alloc_in_same_node = true,
		.group_ids = groups,
	};
	struct agent_wbuf w;
	struct agent_rbuf r;
	struct agent_rc out;

	agent_w_init(&w);
	agent_w_rc(&w, &rc, 3);
	agent_w_rc(&w, NULL, 3); /* defaults */
	agent_r_init(&r, w.p, w.len);
	agent_r_rc(&r, &out, 3);
	CU_ASSERT_FALSE(r.bad);
	CU_ASSERT_EQUAL(out.replica_num, 2);
	CU_ASSERT_TRUE(out.hard_pin);
	CU_ASSERT_TRUE(out.same_node);
	CU_ASSERT_STRING_EQUAL(out.preferred, "10.0.0.1:5");
	CU_ASSERT_EQUAL(out.n_prefs, 2);
	CU_ASSERT_STRING_EQUAL(out.prefs[1], "10.0.0.3:2");
	CU_ASSERT_PTR_NOT_NULL_FATAL(out.groups);
	CU_ASSERT_STRING_EQUAL(out.groups[0], "structured-a");
	CU_ASSERT_STRING_EQUAL(out.groups[1], "");
	CU_ASSERT_STRING_EQUAL(out.groups[2], "structured-b");
	agent_rc_free(&out, 3);
	agent_r_rc(&r, &out, 3);
	CU_ASSERT_FALSE(r.bad);
	CU_ASSERT_EQUAL(out.replica_num, 1);
	CU_ASSERT_FALSE(out.hard_pin);
	CU_ASSERT_STRING_EQUAL(out.preferred, "");
	CU_ASSERT_EQUAL(out.n_prefs, 0);
	CU_ASSERT_PTR_NULL(out.groups);
	agent_rc_free(&out, 3);
	CU_ASSERT_EQUAL(r.pos, r.len);
	/* Cut anywhere: always bad, never a crash or a leak (ASan checks). */
	for (size_t cut = 0; cut < w.len / 2; cut++) {
		agent_r_init(&r, w.p, cut);
		agent_r_rc(&r, &out, 3);
		CU_ASSERT_TRUE(r.bad);
		agent_rc_free(&out, 3);
	}
	agent_w_free(&w);
}

static void
test_send_recv_fd(void)
{
	int sv[2], fd, got_fd;
	struct agent_hdr h;
	uint8_t *body;
	char *p;

	TIDE_UT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	fd = memfd_create("agent-ut", 0);
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	TIDE_UT_OK(ftruncate(fd, 4096));
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CU_ASSERT_TRUE_FATAL(p != MAP_FAILED);
	strcpy(p, "shared");

	TIDE_UT_OK(agent_send(sv[0], AGENT_MAP, 42, "abc", 3, fd));
	TIDE_UT_OK(agent_recv(sv[1], &h, &body, &got_fd));
	CU_ASSERT_EQUAL(h.op, AGENT_MAP);
	CU_ASSERT_EQUAL(h.seq, 42);
	CU_ASSERT_EQUAL(h.len, 3);
	CU_ASSERT_EQUAL(memcmp(body, "abc", 3), 0);
	CU_ASSERT_TRUE_FATAL(got_fd >= 0);
	/* The received descriptor maps the same memory. */
	char *q = mmap(NULL, 4096, PROT_READ, MAP_SHARED, got_fd, 0);
	CU_ASSERT_TRUE_FATAL(q != MAP_FAILED);
	CU_ASSERT_STRING_EQUAL(q, "shared");
	munmap(q, 4096);
	close(got_fd);
	free(body);

	/* A descriptor the receiver does not want is closed, not leaked. */
	TIDE_UT_OK(agent_send(sv[0], AGENT_HELLO, 1, NULL, 0, fd));
	TIDE_UT_OK(agent_recv(sv[1], &h, &body, NULL));
	CU_ASSERT_EQUAL(h.len, 0);
	free(body);

	/* A large body arrives whole. */
	size_t big = 3u << 20;
	char *src = malloc(big);
	for (size_t i = 0; i < big; i++)
		src[i] = (char)(i * 7);
	if (fork() == 0) {
		_exit(agent_send(sv[0], AGENT_PUT, 9, src, big, -1) == 0 ? 0 : 1);
	}
	TIDE_UT_OK(agent_recv(sv[1], &h, &body, &got_fd));
	CU_ASSERT_EQUAL(got_fd, -1);
	CU_ASSERT_EQUAL(h.len, big);
	CU_ASSERT_EQUAL(memcmp(body, src, big), 0);
	free(body);
	free(src);

	munmap(p, 4096);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

static void
test_recv_refuses(void)
{
	int sv[2];
	struct agent_hdr h, bad;
	uint8_t *body;
	int fd;

	/* Wrong magic. */
	TIDE_UT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	bad = (struct agent_hdr){0x12345678, AGENT_VERSION, AGENT_HELLO, 0, 1};
	CU_ASSERT_EQUAL(write(sv[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
	CU_ASSERT_EQUAL(agent_recv(sv[1], &h, &body, &fd), -EPROTO);
	CU_ASSERT_PTR_NULL(body);
	/* Wrong version. */
	bad = (struct agent_hdr){AGENT_MAGIC, AGENT_VERSION + 1, AGENT_HELLO, 0, 1};
	CU_ASSERT_EQUAL(write(sv[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
	CU_ASSERT_EQUAL(agent_recv(sv[1], &h, &body, &fd), -EPROTO);
	/* A body larger than the bound is refused before allocating it. */
	bad = (struct agent_hdr){AGENT_MAGIC, AGENT_VERSION, AGENT_PUT, AGENT_MAX_BODY + 1, 1};
	CU_ASSERT_EQUAL(write(sv[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
	CU_ASSERT_EQUAL(agent_recv(sv[1], &h, &body, &fd), -EPROTO);
	CU_ASSERT_EQUAL(agent_send(sv[0], AGENT_PUT, 1, "x", AGENT_MAX_BODY + 1, -1), -EMSGSIZE);
	/* A header cut short by EOF, then a body cut short. */
	CU_ASSERT_EQUAL(write(sv[0], &bad, 5), 5);
	close(sv[0]);
	CU_ASSERT_EQUAL(agent_recv(sv[1], &h, &body, &fd), -ECONNRESET);
	close(sv[1]);
	TIDE_UT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	bad = (struct agent_hdr){AGENT_MAGIC, AGENT_VERSION, AGENT_PUT, 100, 1};
	CU_ASSERT_EQUAL(write(sv[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
	CU_ASSERT_EQUAL(write(sv[0], "abc", 3), 3);
	close(sv[0]);
	CU_ASSERT_EQUAL(agent_recv(sv[1], &h, &body, &fd), -ECONNRESET);
	CU_ASSERT_PTR_NULL(body);
	CU_ASSERT_EQUAL(fd, -1);
	/* Sending to a closed peer is an error, not a SIGPIPE. */
	CU_ASSERT_TRUE(agent_send(sv[1], AGENT_HELLO, 1, NULL, 0, -1) < 0);
	close(sv[1]);
}

static void
test_op_names(void)
{
	CU_ASSERT_STRING_EQUAL(agent_op_name(AGENT_PUT), "put");
	CU_ASSERT_STRING_EQUAL(agent_op_name(AGENT_HEALTH), "health");
	CU_ASSERT_STRING_EQUAL(agent_op_name(AGENT_PUT_SESS_START), "put_sess_start");
	CU_ASSERT_STRING_EQUAL(agent_op_name(AGENT_SESS_RANGES), "sess_ranges");
	CU_ASSERT_STRING_EQUAL(agent_op_name(AGENT_SESS_KEYS), "sess_keys");
	CU_ASSERT_STRING_EQUAL(agent_op_name(0), "?");
	CU_ASSERT_STRING_EQUAL(agent_op_name(AGENT_OP_MAX), "?");
	CU_ASSERT_STRING_EQUAL(agent_op_name(60000), "?");
}

/* agent_r_view: a string in place, refused as agent_r_str refuses one. */
static void
test_view(void)
{
	static const uint8_t body[] = {3, 0, 0, 0, 'a', 'b', 'c', 2, 0, 0, 0, 'x', 0, 9, 0, 0, 0};
	struct agent_rbuf r;
	const char *s;
	size_t len;

	agent_r_init(&r, body, sizeof(body));
	s = agent_r_view(&r, 3, &len);
	CU_ASSERT_FALSE(r.bad);
	CU_ASSERT_EQUAL(len, 3);
	CU_ASSERT_EQUAL(memcmp(s, "abc", 3), 0);
	s = agent_r_view(&r, 16, &len); /* holds a NUL */
	CU_ASSERT_TRUE(r.bad);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_STRING_EQUAL(s, "");
	agent_r_init(&r, body, sizeof(body));
	agent_r_view(&r, 2, &len); /* longer than max */
	CU_ASSERT_TRUE(r.bad);
	agent_r_init(&r, body + 13, 4); /* 9 bytes announced, none there */
	agent_r_view(&r, 16, &len);
	CU_ASSERT_TRUE(r.bad);
}

/* The soft pin travels as a trailer (AGENT_PUT_SOFT_PIN), only when asked for, and comes
 * back into the config the agent hands to the store. */
static void
test_soft_pin_trailer(void)
{
	struct tide_store_rc none = {.replica_num = 2};
	struct tide_store_rc on = {.soft_pin_action = TIDE_STORE_SOFT_PIN_ENABLE,
				   .soft_pin_ttl_ms = 90000};
	struct tide_store_rc ttl = {.soft_pin_ttl_ms = 5};
	struct tide_store_rc view;
	struct agent_wbuf w;
	struct agent_rbuf r;
	struct agent_rc out;

	CU_ASSERT_FALSE(agent_rc_soft_pin(NULL));
	CU_ASSERT_FALSE(agent_rc_soft_pin(&none));
	CU_ASSERT_TRUE(agent_rc_soft_pin(&on));
	CU_ASSERT_TRUE(agent_rc_soft_pin(&ttl)); /* sent: the master refuses it, not the wire */
	CU_ASSERT_EQUAL(AGENT_PUT_SOFT_PIN & TIDE_STORE_PUT_UPSERT, 0);
	agent_w_init(&w);
	agent_w_rc(&w, &on, 1);
	agent_w_soft_pin(&w, &on);
	CU_ASSERT_EQUAL_FATAL(w.err, 0);
	agent_r_init(&r, w.p, w.len);
	agent_r_rc(&r, &out, 1);
	CU_ASSERT_EQUAL(out.soft_pin_action, 0); /* not part of the config's bytes */
	agent_r_soft_pin(&r, &out);
	CU_ASSERT_FALSE(r.bad);
	CU_ASSERT_EQUAL(r.pos, r.len);
	view = agent_rc_view(&out);
	CU_ASSERT_EQUAL(view.soft_pin_action, TIDE_STORE_SOFT_PIN_ENABLE);
	CU_ASSERT_EQUAL(view.soft_pin_ttl_ms, 90000);
	CU_ASSERT_EQUAL(view.replica_num, 1);
	agent_rc_free(&out, 1);
	/* A short trailer is malformed. */
	agent_r_init(&r, w.p, w.len - 1);
	agent_r_rc(&r, &out, 1);
	agent_r_soft_pin(&r, &out);
	CU_ASSERT_TRUE(r.bad);
	agent_rc_free(&out, 1);
	agent_w_free(&w);
}

/* What agent_rc_ok() passes is what agent_r_rc() accepts: the limits of both sides agree. */
static void
test_rc_ok_matches_reader(void)
{
	char *big = malloc(AGENT_MAX_KEY + 2);
	const char *prefs[2] = {"a:1", NULL}, *groups[2] = {"g", NULL};
	const char **many = calloc(1025, sizeof(*many));
	struct tide_store_rc rc;
	struct agent_wbuf w;
	struct agent_rbuf r;
	struct agent_rc out;

	CU_ASSERT_FATAL(big != NULL && many != NULL);
	memset(big, 'x', AGENT_MAX_KEY + 1);
	big[AGENT_MAX_KEY + 1] = '\0';
	CU_ASSERT_TRUE(agent_rc_ok(NULL, 1));
	for (int c = 0; c < 8; c++) {
		bool want;

		memset(&rc, 0, sizeof(rc));
		rc.replica_num = 1;
		prefs[1] = groups[1] = "ok";
		switch (c) {
		case 1: /* the longest string taken */
			big[AGENT_MAX_KEY] = '\0';
			rc.preferred_segment = big;
			break;
		case 2: /* one byte more */
			big[AGENT_MAX_KEY] = 'x';
			rc.preferred_segment = big;
			break;
		case 3:
			prefs[1] = big;
			rc.preferred_segments = prefs;
			rc.n_preferred_segments = 2;
			break;
		case 4:
			groups[1] = big;
			rc.group_ids = groups;
			break;
		case 5:
			for (int i = 0; i < 1024; i++)
				many[i] = "s:1";
			rc.preferred_segments = many;
			rc.n_preferred_segments = 1024;
			break;
		case 6:
			for (int i = 0; i < 1025; i++)
				many[i] = "s:1";
			rc.preferred_segments = many;
			rc.n_preferred_segments = 1025;
			break;
		default:
			rc.preferred_segments = prefs;
			rc.n_preferred_segments = 2;
			rc.group_ids = groups;
			break;
		}
		want = agent_rc_ok(&rc, 2);
		CU_ASSERT_EQUAL(want, c != 2 && c != 3 && c != 4 && c != 6);
		agent_w_init(&w);
		agent_w_rc(&w, &rc, 2);
		CU_ASSERT_EQUAL_FATAL(w.err, 0);
		agent_r_init(&r, w.p, w.len);
		agent_r_rc(&r, &out, 2);
		CU_ASSERT_EQUAL(!r.bad, want);
		agent_rc_free(&out, 2);
		agent_w_free(&w);
	}
	free(big);
	free(many);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("agent_proto", NULL, NULL);

	CU_add_test(s, "scalars_round_trip", test_scalars_round_trip);
	CU_add_test(s, "reader_refuses", test_reader_refuses);
	CU_add_test(s, "rc_round_trip", test_rc_round_trip);
	CU_add_test(s, "soft_pin_trailer", test_soft_pin_trailer);
	CU_add_test(s, "view", test_view);
	CU_add_test(s, "rc_ok_matches_reader", test_rc_ok_matches_reader);
	CU_add_test(s, "send_recv_fd", test_send_recv_fd);
	CU_add_test(s, "recv_refuses", test_recv_refuses);
	CU_add_test(s, "op_names", test_op_names);
}

TIDE_UT_MAIN(register_tests)
