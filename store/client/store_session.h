/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the in-process backend's sessions
 * (tide_store_batch_put_session_* and _get_session_*, tide_store.h), on the
 * bookkeeping of store_sess.h: the tables live in struct store_inproc
 * (put_sess, get_sess). Results and errors are those of the tide_store_X()
 * each serves; arguments are checked here.
 *
 * Thread: any; the tables lock themselves and no lock is held across a master
 * call or a transfer.
 */
#ifndef TIDE_STORE_SESSION_H
#define TIDE_STORE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store_inproc.h"
#include "tide_store.h"

int store_session_put_start(struct store_inproc *ip, const char *const *keys, const size_t *sizes,
			    size_t n, const struct tide_store_rc *repl, int *rcs);
/* put: tide_store_batch_put_ranges(); else tide_store_batch_get_ranges(). */
int store_session_ranges(struct store_inproc *ip, bool put, const char *const *keys,
			 const struct tide_store_part *parts, const uint64_t *offs,
			 const size_t *nparts, size_t n, int64_t *out);
/* revoke: tide_store_batch_put_session_revoke(); else _end(). */
int store_session_put_end(struct store_inproc *ip, const char *const *keys, size_t n, bool revoke,
			  int *rcs);
int store_session_get_start(struct store_inproc *ip, const char *const *keys, size_t n, int *rcs);
int store_session_get_end(struct store_inproc *ip, const char *const *keys, size_t n);

/* At close, before the segment goes: revoke every put session still open (one
 * BatchPutRevoke; failures are logged: the master's discard timeout covers them). */
void store_session_close(struct store_inproc *ip);

#endif /* TIDE_STORE_SESSION_H */
