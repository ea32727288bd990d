/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/client/store_sess.c: the bookkeeping of put and get sessions. Each
 * state's answers (placeholder, ready, sealed, unlinked while in use), the
 * bound, a get session's lease, replacement, growth past the first buckets,
 * the key listing, the range check at its edges, and a seal that waits for a
 * transfer on another thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_sess.h"
#include "tide_ut.h"

static const struct store_sess_rep two[2] = {{"10.0.0.1:1", 0x1000}, {"10.0.0.2:2", 0x2000}};

static void
test_life(void)
{
	struct store_sess_tab t;
	struct store_sess *s;
	int err = 1;

	TIDE_UT_OK(store_sess_init(&t, 4));
	/* Nothing yet: every lookup is -ESRCH. */
	CU_ASSERT_PTR_NULL(store_sess_use(&t, "k", 1, &err));
	CU_ASSERT_EQUAL(err, -ESRCH);
	CU_ASSERT_EQUAL(store_sess_seal(&t, "k"), -ESRCH);
	CU_ASSERT_FALSE(store_sess_has(&t, "k"));
	/* A placeholder takes the key but is not usable. */
	TIDE_UT_OK(store_sess_reserve(&t, "k"));
	CU_ASSERT_EQUAL(store_sess_reserve(&t, "k"), -EBUSY);
	CU_ASSERT_FALSE(store_sess_has(&t, "k"));
	CU_ASSERT_PTR_NULL(store_sess_use(&t, "k", 1, &err));
	CU_ASSERT_EQUAL(err, -ESRCH);
	CU_ASSERT_EQUAL(store_sess_seal(&t, "k"), -ESRCH);
	CU_ASSERT_EQUAL(store_sess_put(&t, "k", 1, NULL, 0, 0), -EBUSY);
	/* Filled: usable, with its replicas copied. */
	TIDE_UT_OK(store_sess_fill(&t, "k", 100, two, 2, 0));
	CU_ASSERT_EQUAL(store_sess_fill(&t, "k", 100, two, 2, 0), -ESRCH);
	CU_ASSERT_TRUE(store_sess_has(&t, "k"));
	s = store_sess_use(&t, "k", 1, &err);
	CU_ASSERT_FATAL(s != NULL);
	CU_ASSERT_EQUAL(err, 0);
	CU_ASSERT_EQUAL(s->size, 100);
	CU_ASSERT_EQUAL(s->nrep, 2);
	CU_ASSERT_STRING_EQUAL(s->rep[1].ep, "10.0.0.2:2");
	CU_ASSERT_PTR_NOT_EQUAL(s->rep[1].ep, two[1].ep);
	CU_ASSERT_EQUAL(s->rep[1].addr, 0x2000);
	CU_ASSERT_STRING_EQUAL(s->key, "k");
	/* Unlinked while in use: gone from the table, freed by the last done(). */
	CU_ASSERT_TRUE(store_sess_unlink(&t, "k"));
	CU_ASSERT_FALSE(store_sess_unlink(&t, "k"));
	CU_ASSERT_EQUAL(s->size, 100);
	store_sess_done(&t, s);
	CU_ASSERT_EQUAL(t.n, 0);
	/* Sealed: no new use, a second seal is -EBUSY, unlink ends it. */
	TIDE_UT_OK(store_sess_put(&t, "k", 8, two, 1, 0));
	TIDE_UT_OK(store_sess_seal(&t, "k"));
	CU_ASSERT_EQUAL(store_sess_seal(&t, "k"), -EBUSY);
	CU_ASSERT_PTR_NULL(store_sess_use(&t, "k", 1, &err));
	CU_ASSERT_EQUAL(err, -ESRCH);
	CU_ASSERT_EQUAL(store_sess_put(&t, "k", 8, two, 1, 0), -EBUSY);
	CU_ASSERT_TRUE(store_sess_unlink(&t, "k"));
	/* A fill that fails drops the placeholder. */
	TIDE_UT_OK(store_sess_reserve(&t, "bad"));
	CU_ASSERT_EQUAL(store_sess_fill(&t, "bad", 1, NULL, 1, 0), -EINVAL);
	CU_ASSERT_EQUAL(t.n, 0);
	TIDE_UT_OK(store_sess_reserve(&t, "bad"));
	CU_ASSERT_EQUAL(store_sess_fill(&t, "bad", 1, two, STORE_SESS_MAX_REPS + 1, 0), -EINVAL);
	CU_ASSERT_EQUAL(t.n, 0);
	store_sess_fini(&t);
}

static void
test_bound_and_replace(void)
{
	struct store_sess_tab t;
	struct store_sess *old, *s;
	int err;

	TIDE_UT_OK(store_sess_init(&t, 2));
	TIDE_UT_OK(store_sess_reserve(&t, "a"));
	TIDE_UT_OK(store_sess_put(&t, "b", 1, two, 1, 0));
	CU_ASSERT_EQUAL(store_sess_reserve(&t, "c"), -ENOSPC);
	CU_ASSERT_EQUAL(store_sess_put(&t, "c", 1, two, 1, 0), -ENOSPC);
	/* Replacing b needs no room; the old entry lives on for its user. */
	old = store_sess_use(&t, "b", 1, &err);
	CU_ASSERT_FATAL(old != NULL);
	TIDE_UT_OK(store_sess_put(&t, "b", 2, &two[1], 1, 0));
	s = store_sess_use(&t, "b", 1, &err);
	CU_ASSERT_FATAL(s != NULL);
	CU_ASSERT_EQUAL(s->size, 2);
	CU_ASSERT_EQUAL(old->size, 1);
	CU_ASSERT_STRING_EQUAL(old->rep[0].ep, "10.0.0.1:1");
	store_sess_done(&t, old);
	store_sess_done(&t, s);
	CU_ASSERT_EQUAL(t.n, 2);
	TIDE_UT_OK(store_sess_fill(&t, "a", 3, NULL, 0, 0));
	store_sess_fini(&t);
}

static void
test_lease(void)
{
	struct store_sess_tab t;
	struct store_sess *s;
	int err;

	TIDE_UT_OK(store_sess_init(&t, 8));
	TIDE_UT_OK(store_sess_put(&t, "g", 10, two, 1, 1000));
	s = store_sess_use(&t, "g", 999, &err);
	CU_ASSERT_FATAL(s != NULL);
	store_sess_done(&t, s);
	/* At the lease's end the session is dropped and says so once. */
	CU_ASSERT_PTR_NULL(store_sess_use(&t, "g", 1000, &err));
	CU_ASSERT_EQUAL(err, -ESTALE);
	CU_ASSERT_PTR_NULL(store_sess_use(&t, "g", 1000, &err));
	CU_ASSERT_EQUAL(err, -ESRCH);
	CU_ASSERT_EQUAL(t.n, 0);
	store_sess_fini(&t);
}

static void
test_many_and_keys(void)
{
	enum { N = 5000 };
	struct store_sess_tab t;
	char key[32], **keys = NULL;
	size_t n, bad = 0;

	TIDE_UT_OK(store_sess_init(&t, N));
	for (unsigned i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "key-%u", i);
		bad += store_sess_put(&t, key, i + 1, two, 2, 0) != 0;
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(t.nb >= N);
	CU_ASSERT_EQUAL(store_sess_reserve(&t, "one-more"), -ENOSPC);
	for (unsigned i = 0; i < N; i += 2) {
		snprintf(key, sizeof(key), "key-%u", i);
		bad += !store_sess_unlink(&t, key);
	}
	TIDE_UT_OK(store_sess_reserve(&t, "placeholder"));
	for (unsigned i = 0; i < N; i++) {
		struct store_sess *s;
		int err;

		snprintf(key, sizeof(key), "key-%u", i);
		s = store_sess_use(&t, key, 1, &err);
		bad += (i % 2 == 0) != (s == NULL);
		if (s != NULL) {
			bad += s->size != i + 1;
			store_sess_done(&t, s);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* The listing has the ready entries only, each once. */
	n = store_sess_keys(&t, &keys);
	CU_ASSERT_EQUAL(n, N / 2);
	for (size_t i = 0; keys != NULL && i < n; i++)
		bad += strncmp(keys[i], "key-", 4) != 0 || atoi(keys[i] + 4) % 2 != 1;
	CU_ASSERT_EQUAL(bad, 0);
	free(keys);
	store_sess_fini(&t);
	TIDE_UT_OK(store_sess_init(&t, 1));
	CU_ASSERT_EQUAL(store_sess_keys(&t, &keys), 0);
	CU_ASSERT_PTR_NULL(keys);
	store_sess_fini(&t);
}

static void
test_range(void)
{
	CU_ASSERT_TRUE(store_sess_in_range(0, 0, 0));
	CU_ASSERT_TRUE(store_sess_in_range(0, 10, 10));
	CU_ASSERT_TRUE(store_sess_in_range(10, 0, 10));
	CU_ASSERT_TRUE(store_sess_in_range(4, 6, 10));
	CU_ASSERT_FALSE(store_sess_in_range(11, 0, 10));
	CU_ASSERT_FALSE(store_sess_in_range(5, 6, 10));
	CU_ASSERT_FALSE(store_sess_in_range(0, 11, 10));
	CU_ASSERT_FALSE(store_sess_in_range(UINT64_MAX, 2, 10));
	CU_ASSERT_FALSE(store_sess_in_range(2, UINT64_MAX, 10));
}

struct sealer {
	struct store_sess_tab *t;
	int rc;
	volatile int done;
};

static void *
seal_main(void *arg)
{
	struct sealer *z = arg;

	z->rc = store_sess_seal(z->t, "w");
	__atomic_store_n(&z->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A seal waits for the transfer in flight, which finishes on its entry. */
static void
test_seal_waits(void)
{
	struct store_sess_tab t;
	struct sealer z = {.t = &t};
	struct store_sess *s;
	pthread_t th;
	int err;

	TIDE_UT_OK(store_sess_init(&t, 4));
	TIDE_UT_OK(store_sess_put(&t, "w", 64, two, 2, 0));
	s = store_sess_use(&t, "w", 1, &err);
	CU_ASSERT_FATAL(s != NULL);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, seal_main, &z) == 0);
	nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
	CU_ASSERT_EQUAL(__atomic_load_n(&z.done, __ATOMIC_ACQUIRE), 0);
	/* Sealed meanwhile: no new use. */
	CU_ASSERT_PTR_NULL(store_sess_use(&t, "w", 1, &err));
	CU_ASSERT_EQUAL(err, -ESRCH);
	store_sess_done(&t, s);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(z.rc, 0);
	CU_ASSERT_TRUE(store_sess_unlink(&t, "w"));
	store_sess_fini(&t);
}

static void
register_tests(void)
{
	CU_pSuite s = CU_add_suite("store_sess", NULL, NULL);

	CU_add_test(s, "life", test_life);
	CU_add_test(s, "bound_and_replace", test_bound_and_replace);
	CU_add_test(s, "lease", test_lease);
	CU_add_test(s, "many_and_keys", test_many_and_keys);
	CU_add_test(s, "range", test_range);
	CU_add_test(s, "seal_waits", test_seal_waits);
}

TIDE_UT_MAIN(register_tests)
