/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Same-host shared buffers (te_shm.c) against a real second process: a forked
 * child maps a sealed memfd and reports its descriptor number and inode; the
 * test maps it through /proc and copies both ways, then checks the refusals
 * (another host, our own pid, an unsealed file, a wrong inode, a range outside)
 * and that a child that exited fails copies with -ECONNRESET; that the
 * filler maps the pages the child holds without allocating the ones it never
 * touched; and that copies split over two threads move every byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "te_shm.h"
#include "tide_te.h"
#include "tide_ut.h"

#define LEN  (1u << 20)
#define BASE UINT64_C(0x7f1000000000) /* the child's buffer address, as advertised */

struct child {
	pid_t pid;
	uint32_t len; /* the memfd's size */
	int to_child; /* closing it lets the child exit */
	int fd;       /* the child's descriptor number */
	uint64_t ino;
};

/*
 * Fork a child that creates a memfd of len bytes (sealed against shrinking when
 * seal), fills its first fill bytes with byte i = i * 7 (the rest is never
 * touched: no pages), writes {fd, ino} to the pipe and waits for EOF on its
 * stdin pipe; then it checks that byte 100 is 0xAB (the test wrote it through
 * its mapping) and exits 0 if so, 3 if not.
 */
static struct child
spawn_sized(bool seal, uint32_t len, uint32_t fill)
{
	int up[2], down[2];
	struct child c = {0};

	CU_ASSERT_FATAL(pipe(up) == 0 && pipe(down) == 0);
	c.pid = fork();
	CU_ASSERT_FATAL(c.pid >= 0);
	if (c.pid == 0) {
		int fd = memfd_create("tide-shm-ut", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		struct stat st;
		uint64_t msg[2];
		uint8_t *p;
		char b;

		close(up[0]);
		close(down[1]);
		if (fd < 0 || ftruncate(fd, len) != 0 ||
		    (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) || fstat(fd, &st) != 0)
			_exit(2);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			_exit(2);
		for (uint32_t i = 0; i < fill; i++)
			p[i] = (uint8_t)(i * 7);
		msg[0] = (uint64_t)fd;
		msg[1] = (uint64_t)st.st_ino;
		if (write(up[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			_exit(2);
		while (read(down[0], &b, 1) > 0)
			;
		_exit(p[100] == 0xAB ? 0 : 3);
	}
	close(up[1]);
	close(down[0]);
	uint64_t msg[2];
	CU_ASSERT_FATAL(read(up[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	close(up[0]);
	c.to_child = down[1];
	c.len = len;
	c.fd = (int)msg[0];
	c.ino = msg[1];
	return c;
}

static struct child
spawn_filled(bool seal, uint32_t fill)
{
	return spawn_sized(seal, LEN, fill);
}

static struct child
spawn(bool seal)
{
	return spawn_filled(seal, LEN);
}

static int
reap(struct child *c)
{
	int st = 0;

	if (c->to_child >= 0)
		close(c->to_child);
	c->to_child = -1;
	CU_ASSERT(waitpid(c->pid, &st, 0) == c->pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A descriptor of the child's one buffer, as its engine would publish it. */
static void
desc_of(struct te_desc *d, struct te_desc_buf *b, const struct child *c)
{
	memset(d, 0, sizeof(*d));
	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "cpu:0");
	b->addr = BASE;
	b->length = c->len;
	b->shm = true;
	b->shm_fd = c->fd;
	b->shm_ino = c->ino;
	d->nbufs = 1;
	d->bufs = b;
	d->pid = (int32_t)c->pid;
	snprintf(d->host_id, sizeof(d->host_id), "%s", te_shm_host_id());
}

static void
test_copy_both_ways(void)
{
	struct child c = spawn(true);
	struct te_desc d;
	struct te_desc_buf b;
	struct te_shm *m = NULL;
	uint8_t buf[4096], one = 0xAB;

	CU_ASSERT_FATAL(te_shm_host_id()[0] != '\0');
	desc_of(&d, &b, &c);
	CU_ASSERT_EQUAL(te_shm_open(&d, "child", &m), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_TRUE(te_shm_covers(m, BASE, LEN));
	CU_ASSERT_FALSE(te_shm_covers(m, BASE + 1, LEN));
	CU_ASSERT_FALSE(te_shm_covers(m, BASE - 1, 2));
	/* Read a page from the middle: the child's pattern. */
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, buf, BASE + 8192, sizeof(buf)), 0);
	for (uint32_t i = 0; i < sizeof(buf); i++)
		if (buf[i] != (uint8_t)((8192 + i) * 7)) {
			CU_FAIL("read bytes differ from the child's");
			break;
		}
	/* A whole-buffer read (fills the page tables ahead, chunk by chunk). */
	uint8_t *all = malloc(LEN);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, all, BASE, LEN), 0);
	CU_ASSERT_EQUAL(all[LEN - 1], (uint8_t)((LEN - 1) * 7));
	free(all);
	/* Write one byte the child checks before it exits. */
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_WRITE, &one, BASE + 100, 1), 0);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, buf, BASE + LEN - 1, 2), -ENOENT);
	te_shm_get(m);
	te_shm_put(m);
	CU_ASSERT_EQUAL(reap(&c), 0);
	/* The child exited: its file is still mapped here, but copies fail as a broken
	 * connection would, once the last "it runs" answer (reused for 100 us) is old. */
	usleep(1000);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, buf, BASE, 16), -ECONNRESET);
	te_shm_put(m);
}

static void
test_not_same_host(void)
{
	struct child c = spawn(true);
	struct te_desc d;
	struct te_desc_buf b;
	struct te_shm *m = (struct te_shm *)1;

	desc_of(&d, &b, &c);
	snprintf(d.host_id, sizeof(d.host_id), "another-boot/1");
	CU_ASSERT_EQUAL(te_shm_open(&d, "x", &m), 0);
	CU_ASSERT_PTR_NULL(m);
	desc_of(&d, &b, &c);
	d.pid = (int32_t)getpid(); /* in-process peers use the local path, not this */
	CU_ASSERT_EQUAL(te_shm_open(&d, "x", &m), 0);
	CU_ASSERT_PTR_NULL(m);
	desc_of(&d, &b, &c);
	b.shm = false; /* nothing shared */
	CU_ASSERT_EQUAL(te_shm_open(&d, "x", &m), 0);
	CU_ASSERT_PTR_NULL(m);
	CU_ASSERT_FALSE(te_shm_covers(NULL, BASE, 1));
	CU_ASSERT(reap(&c) == 3); /* nobody wrote byte 100 */
}

/* A file that is not the advertised one, or not sealed, is left to the network. */
static void
test_refused_files(void)
{
	struct child c = spawn(false);
	struct te_desc d;
	struct te_desc_buf b;
	struct te_shm *m = NULL;
	uint8_t x;

	desc_of(&d, &b, &c);
	CU_ASSERT_EQUAL(te_shm_open(&d, "unsealed", &m), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, &x, BASE, 1), -ENOENT);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, &x, BASE, 1), -ENOENT); /* remembered */
	te_shm_put(m);
	CU_ASSERT(reap(&c) == 3);

	c = spawn(true);
	desc_of(&d, &b, &c);
	b.shm_ino++;
	CU_ASSERT_EQUAL(te_shm_open(&d, "wrong inode", &m), 0);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, &x, BASE, 1), -ENOENT);
	te_shm_put(m);
	desc_of(&d, &b, &c);
	b.shm_fd = 1000; /* no such descriptor in the child */
	CU_ASSERT_EQUAL(te_shm_open(&d, "no fd", &m), 0);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_WRITE, &x, BASE, 1), -ENOENT);
	te_shm_put(m);
	CU_ASSERT(reap(&c) == 3);
}

/* Rss of our mapping of the child's file (the pages our page tables map), in
 * KiB, from /proc/self/smaps; -1 if no such mapping. */
static long
mapped_kib(uint64_t ino)
{
	char line[256];
	long rss = -1;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "re");

	CU_ASSERT_FATAL(f != NULL);
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long lo, hi, inode;
		char perms[8];
		long v;

		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu", &lo, &hi, perms, &inode) == 4)
			in = inode == ino && hi - lo == LEN;
		else if (in && sscanf(line, "Rss: %ld kB", &v) == 1)
			rss = v;
	}
	fclose(f);
	return rss;
}

/*
 * The filler, started by the first mapping, maps every page the child's file
 * holds (its first half) ahead of any copy there, and allocates none of the
 * second half, which the child never touched (its warm-up would have kept a
 * memory reserve; the filler must not spend memory behind its back).
 */
static void
test_filler(void)
{
	struct child c = spawn_filled(true, LEN / 2);
	struct te_desc d;
	struct te_desc_buf b;
	struct te_shm *m = NULL;
	struct timespec t0, t;
	struct stat st;
	char path[64];
	uint8_t buf[16];
	long kib = -1;

	desc_of(&d, &b, &c);
	CU_ASSERT_EQUAL_FATAL(te_shm_open(&d, "child", &m), 0);
	/* 16 bytes: covers no whole chunk, so the copy fills nothing itself. */
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, buf, BASE + 4096, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(buf[0], (uint8_t)(4096 * 7));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* The filler runs at SCHED_IDLE: on a loaded machine it waits for CPU. */
	do {
		kib = mapped_kib(c.ino);
		if (kib >= (long)(LEN / 2 / 1024))
			break;
		usleep(10000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 20);
	CU_ASSERT_EQUAL(kib, (long)(LEN / 2 / 1024));
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)c.pid, c.fd);
	CU_ASSERT_FATAL(stat(path, &st) == 0);
	CU_ASSERT_EQUAL((uint64_t)st.st_blocks * 512, LEN / 2);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_WRITE, (uint8_t[]){0xAB}, BASE + 100, 1), 0);
	te_shm_put(m); /* stops and joins the filler, unmaps */
	CU_ASSERT_EQUAL(mapped_kib(c.ino), -1);
	CU_ASSERT_EQUAL(reap(&c), 0);
}

/*
 * Copies of 16 MiB and more run in two halves, one on a helper thread: a
 * 40 MiB read and write, at a destination offset 8 bytes past the source's
 * within a page (copy_span()'s loop) and aligned, move every byte.
 */
static void
test_split_copy(void)
{
	const uint32_t len = 40u << 20;
	struct child c = spawn_sized(true, len, len);
	struct te_desc d;
	struct te_desc_buf b;
	struct te_shm *m = NULL;
	uint8_t *buf = malloc(len + 4096);
	uint32_t bad = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	desc_of(&d, &b, &c);
	CU_ASSERT_EQUAL_FATAL(te_shm_open(&d, "child", &m), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	for (uint32_t shift = 0; shift <= 8; shift += 8) {
		uint8_t *dst = (uint8_t *)(((uintptr_t)buf + 4095) & ~(uintptr_t)4095) + shift;
		uint32_t n = len - 4096;

		memset(dst, 0, n);
		CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, dst, BASE + 4096, n), 0);
		for (uint32_t i = 0; i < n; i++)
			bad += dst[i] != (uint8_t)((4096 + i) * 7);
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* Write a different pattern over the whole file, read it back. */
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 13 + 1);
	buf[100] = 0xAB; /* the byte the child checks */
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_WRITE, buf, BASE, len), 0);
	memset(buf, 0, len);
	CU_ASSERT_EQUAL(te_shm_copy(m, TIDE_TE_READ, buf, BASE, len), 0);
	bad = 0;
	for (uint32_t i = 0; i < len; i++)
		bad += buf[i] != (i == 100 ? 0xAB : (uint8_t)(i * 13 + 1));
	CU_ASSERT_EQUAL(bad, 0);
	te_shm_put(m);
	free(buf);
	CU_ASSERT_EQUAL(reap(&c), 0);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("te_shm", NULL, NULL);

	CU_add_test(s, "copy_both_ways", test_copy_both_ways);
	CU_add_test(s, "not_same_host", test_not_same_host);
	CU_add_test(s, "refused_files", test_refused_files);
	CU_add_test(s, "filler", test_filler);
	CU_add_test(s, "split_copy", test_split_copy);
}

TIDE_UT_MAIN(register_tests)
