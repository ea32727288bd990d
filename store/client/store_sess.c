/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Session bookkeeping (store_sess.h): a chained hash table under one mutex.
 * An entry is one allocation: the struct, its replicas, then the key and the
 * endpoints' bytes, so fill() and free are one malloc and one free each.
 *
 * Buckets: 1024 to start, doubled while the table holds more entries than
 * buckets, so a lookup walks about one entry; max bounds both (an entry at
 * most a few hundred bytes: the default 65536 sessions stay under ~32 MiB).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_sess.h"

#define SESS_BUCKETS0 1024u

/* FNV-1a: keys are short strings; the table only needs them spread. */
static uint64_t
key_hash(const char *key)
{
	uint64_t h = 1469598103934665603ull;

	for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

int
store_sess_init(struct store_sess_tab *t, size_t max)
{
	memset(t, 0, sizeof(*t));
	t->b = calloc(SESS_BUCKETS0, sizeof(*t->b));
	if (t->b == NULL)
		return -ENOMEM;
	t->nb = SESS_BUCKETS0;
	t->max = max;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cv, NULL);
	return 0;
}

void
store_sess_fini(struct store_sess_tab *t)
{
	if (t->b == NULL)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		struct store_sess *s = t->b[i], *nx;

		for (; s != NULL; s = nx) {
			nx = s->next;
			free(s);
		}
	}
	free(t->b);
	t->b = NULL;
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->lock);
}

/* The link that points at key's entry (lock held); *link NULL: none. */
static struct store_sess **
find(struct store_sess_tab *t, const char *key, uint64_t h)
{
	struct store_sess **pp = &t->b[h & (t->nb - 1)];

	while (*pp != NULL && ((*pp)->hash != h || strcmp((*pp)->key, key) != 0))
		pp = &(*pp)->next;
	return pp;
}

/* Double the buckets when entries outnumber them (lock held). No memory: keep the
 * chains longer, which is slower, never wrong. */
static void
grow(struct store_sess_tab *t)
{
	size_t nb = t->nb * 2;
	struct store_sess **b;

	if (t->n <= t->nb || nb > SIZE_MAX / sizeof(*b))
		return;
	b = calloc(nb, sizeof(*b));
	if (b == NULL)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		struct store_sess *s = t->b[i], *nx;

		for (; s != NULL; s = nx) {
			nx = s->next;
			s->next = b[s->hash & (nb - 1)];
			b[s->hash & (nb - 1)] = s;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
}

/* A new entry for key: nrep replicas, endpoints copied after the key. */
static struct store_sess *
entry_new(const char *key, uint64_t h, const struct store_sess_rep *reps, size_t nrep)
{
	size_t klen = strlen(key) + 1, sz = sizeof(struct store_sess) + nrep * sizeof(*reps) + klen;
	struct store_sess *s;
	char *p;

	for (size_t i = 0; i < nrep; i++) {
		size_t el = strlen(reps[i].ep) + 1;

		if (el > SIZE_MAX - sz)
			return NULL;
		sz += el;
	}
	s = calloc(1, sz);
	if (s == NULL)
		return NULL;
	p = (char *)&s->rep[nrep];
	memcpy(p, key, klen);
	s->key = p;
	p += klen;
	for (size_t i = 0; i < nrep; i++) {
		size_t el = strlen(reps[i].ep) + 1;

		memcpy(p, reps[i].ep, el);
		s->rep[i] = (struct store_sess_rep){p, reps[i].addr};
		p += el;
	}
	s->nrep = nrep;
	s->hash = h;
	return s;
}

/* Take *pp's entry out (lock held); freed now when nobody uses it. */
static void
unlink_at(struct store_sess_tab *t, struct store_sess **pp)
{
	struct store_sess *s = *pp;

	*pp = s->next;
	t->n--;
	s->next = NULL;
	s->unlinked = true;
	if (s->users == 0 && !s->waiter)
		free(s);
}

int
store_sess_reserve(struct store_sess_tab *t, const char *key)
{
	uint64_t h = key_hash(key);
	struct store_sess **pp, *s;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	pp = find(t, key, h);
	if (*pp != NULL) {
		rc = -EBUSY;
	} else if (t->n >= t->max) {
		rc = -ENOSPC;
	} else if ((s = entry_new(key, h, NULL, 0)) == NULL) {
		rc = -ENOMEM;
	} else {
		*pp = s;
		t->n++;
		grow(t);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static bool
reps_ok(const struct store_sess_rep *reps, size_t nrep)
{
	if (nrep > STORE_SESS_MAX_REPS || (nrep > 0 && reps == NULL))
		return false;
	for (size_t i = 0; i < nrep; i++)
		if (reps[i].ep == NULL)
			return false;
	return true;
}

int
store_sess_fill(struct store_sess_tab *t, const char *key, uint64_t size,
		const struct store_sess_rep *reps, size_t nrep, uint64_t lease_end_ms)
{
	uint64_t h = key_hash(key);
	struct store_sess **pp, *s = NULL;
	int rc = 0;

	/* Built before the lock: copying endpoints is no reason to stall the table. */
	if (!reps_ok(reps, nrep))
		rc = -EINVAL;
	else if ((s = entry_new(key, h, reps, nrep)) == NULL)
		rc = -ENOMEM;
	pthread_mutex_lock(&t->lock);
	pp = find(t, key, h);
	if (*pp == NULL || (*pp)->ready) {
		free(s);
		rc = -ESRCH;
	} else if (rc != 0) {
		unlink_at(t, pp);
	} else {
		s->ready = true;
		s->size = size;
		s->lease_end_ms = lease_end_ms;
		s->next = (*pp)->next;
		free(*pp); /* a placeholder is never used */
		*pp = s;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int
store_sess_put(struct store_sess_tab *t, const char *key, uint64_t size,
	       const struct store_sess_rep *reps, size_t nrep, uint64_t lease_end_ms)
{
	uint64_t h = key_hash(key);
	struct store_sess **pp, *s;
	int rc = 0;

	if (!reps_ok(reps, nrep))
		return -EINVAL;
	s = entry_new(key, h, reps, nrep);
	if (s == NULL)
		return -ENOMEM;
	s->ready = true;
	s->size = size;
	s->lease_end_ms = lease_end_ms;
	pthread_mutex_lock(&t->lock);
	pp = find(t, key, h);
	if (*pp != NULL && (!(*pp)->ready || (*pp)->sealed)) {
		rc = -EBUSY;
	} else {
		if (*pp != NULL)
			unlink_at(t, pp); /* transfers holding the old one finish on it */
		if (t->n >= t->max) {
			rc = -ENOSPC;
		} else {
			pp = find(t, key, h);
			*pp = s;
			t->n++;
			grow(t);
			s = NULL;
		}
	}
	pthread_mutex_unlock(&t->lock);
	free(s);
	return rc;
}

struct store_sess *
store_sess_use(struct store_sess_tab *t, const char *key, uint64_t now_ms, int *err)
{
	uint64_t h = key_hash(key);
	struct store_sess **pp, *s = NULL;

	pthread_mutex_lock(&t->lock);
	pp = find(t, key, h);
	if (*pp == NULL || !(*pp)->ready || (*pp)->sealed) {
		*err = -ESRCH;
	} else if ((*pp)->lease_end_ms != 0 && now_ms >= (*pp)->lease_end_ms) {
		unlink_at(t, pp);
		*err = -ESTALE;
	} else {
		s = *pp;
		s->users++;
		*err = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return s;
}

void
store_sess_done(struct store_sess_tab *t, struct store_sess *s)
{
	pthread_mutex_lock(&t->lock);
	s->users--;
	if (s->users == 0) {
		if (s->unlinked && !s->waiter)
			free(s);
		else
			pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&t->lock);
}

int
store_sess_seal(struct store_sess_tab *t, const char *key)
{
	uint64_t h = key_hash(key);
	struct store_sess **pp, *s;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	pp = find(t, key, h);
	s = *pp;
	if (s == NULL || !s->ready) {
		rc = -ESRCH;
	} else if (s->sealed) {
		rc = -EBUSY;
	} else {
		s->sealed = true;
		s->waiter = true; /* keeps s allocated while we wait, unlinked or not */
		while (s->users > 0)
			pthread_cond_wait(&t->cv, &t->lock);
		s->waiter = false;
		if (s->unlinked) {
			/* Taken out meanwhile (not by a sealer: there is one): gone. */
			free(s);
			rc = -ESRCH;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

bool
store_sess_unlink(struct store_sess_tab *t, const char *key)
{
	uint64_t h = key_hash(key);
	struct store_sess **pp;
	bool had;

	pthread_mutex_lock(&t->lock);
	pp = find(t, key, h);
	had = *pp != NULL;
	if (had)
		unlink_at(t, pp);
	pthread_mutex_unlock(&t->lock);
	return had;
}

bool
store_sess_has(struct store_sess_tab *t, const char *key)
{
	uint64_t h = key_hash(key);
	struct store_sess *s;
	bool has;

	pthread_mutex_lock(&t->lock);
	s = *find(t, key, h);
	has = s != NULL && s->ready;
	pthread_mutex_unlock(&t->lock);
	return has;
}

size_t
store_sess_keys(struct store_sess_tab *t, char ***out)
{
	size_t n = 0, bytes = 0, i;
	char **v = NULL, *p;

	*out = NULL;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nb; i++)
		for (struct store_sess *s = t->b[i]; s != NULL; s = s->next)
			if (s->ready) {
				n++;
				bytes += strlen(s->key) + 1;
			}
	if (n > 0)
		v = malloc(n * sizeof(*v) + bytes);
	if (v != NULL) {
		p = (char *)&v[n];
		n = 0;
		for (i = 0; i < t->nb; i++)
			for (struct store_sess *s = t->b[i]; s != NULL; s = s->next) {
				size_t kl;

				if (!s->ready)
					continue;
				kl = strlen(s->key) + 1;
				memcpy(p, s->key, kl);
				v[n++] = p;
				p += kl;
			}
	} else {
		n = 0;
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	return n;
}
