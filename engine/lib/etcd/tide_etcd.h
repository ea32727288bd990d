/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * A small etcd v3 client over etcd's JSON gateway (`POST /v3/...`, HTTP/1.1
 * through engine/lib/addr's HTTP client, one connection per call, bodies through
 * cJSON): the calls Mooncake's master
 * election, its clients' leader discovery and its transfer-engine metadata
 * make (see ../shared/spec/mooncake-ha-etcd.md, section 1.5), plus what
 * state kept under a key prefix needs (range reads and deletes, writes fenced
 * on a key's create_revision, compaction), and nothing else. Keys and values
 * are byte strings (base64 on the wire); int64 fields (revisions, lease ids,
 * TTLs) travel as JSON strings and are accepted as strings or numbers.
 *
 * Endpoints: "h1:2379;h2:2379" (also ',' separated, an optional "etcd://"
 * in front of the list and "http://" in front of each); on a transport error
 * (refused, reset, timeout) a call tries the next endpoint once round the
 * list, and the one that answered is tried first next time. A reply with an
 * HTTP status other than 200 is not retried elsewhere: it is etcd's answer.
 *
 * Errors: 0 or a negative errno. -ENOENT the key (or lease) does not exist;
 * -EEXIST a create found the key; -ECONNREFUSED no endpoint could be reached;
 * -ETIMEDOUT the call's deadline passed; -EPROTO etcd answered with an error
 * status (logged with its message); -EBADMSG the reply was not the JSON the
 * call expects; -ENOMEM; -EINVAL bad arguments.
 *
 * Threads: a handle is the endpoint list and a mutex: calls on one handle
 * from several threads are serialised, so a thread that
 * must not wait behind another's call (a watch) opens its own handle.
 */
#ifndef TIDE_ETCD_H
#define TIDE_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most endpoints in one list. */
#define TIDE_ETCD_MAX_ENDPOINTS 16

/** Most operations in one tide_etcd_txn_if_created() (etcd's own default cap,
 *  --max-txn-ops, is 128). */
#define TIDE_ETCD_TXN_MAX_OPS 64

struct tide_etcd;

/** One key-value as etcd returns it. Owned by the caller after a get
 *  (release with tide_etcd_kv_clear()) or a range (tide_etcd_kvs_free()).
 *  key and value are NUL-terminated for convenience (the NUL is not counted
 *  in the lengths). */
struct tide_etcd_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease; /**< 0: none */
};

/**
 * Parse an endpoint list into "http://host:port" base URLs.
 * \param list  "etcd://a:1;b:2", "a:1,b:2", "http://a:1" ...; spaces around
 *              entries are trimmed, empty entries dropped.
 * \param urls  out: up to max base URLs, each malloc()ed (free each).
 * \return the number of endpoints (>= 1); -EINVAL an empty list, an entry
 *         without host:port, a scheme other than http, or more than max.
 * Thread: any.
 */
int tide_etcd_parse_endpoints(const char *list, char **urls, int max);

/**
 * Open a handle. Nothing is sent until the first call.
 * \param endpoints   see tide_etcd_parse_endpoints().
 * \param timeout_ms  deadline of each call (connect included); 0 = 5000,
 *                    Mooncake's per-call timeout.
 * \return 0 with *out set; -EINVAL (bad list), -ENOMEM. *out is NULL on failure.
 * Thread: any.
 */
int tide_etcd_open(const char *endpoints, unsigned timeout_ms, struct tide_etcd **out);

/** Close a handle (NULL ignored). No call may be in progress. */
void tide_etcd_close(struct tide_etcd *e);

/** Base URL of the endpoint that answered last (for logs); valid until close. */
const char *tide_etcd_endpoint(const struct tide_etcd *e);

/**
 * Read one key (linearizable range).
 * \param out  filled on success (caller clears it); zeroed on failure.
 * \param header_rev  out, may be NULL: the store's revision at the read.
 * \return 0; -ENOENT absent (header_rev still set); see the file's errors.
 */
int tide_etcd_get(struct tide_etcd *e, const char *key, size_t key_len, struct tide_etcd_kv *out,
		  int64_t *header_rev);

/**
 * Write a key, attached to lease (0: none).
 * \param rev  out, may be NULL: the revision of the write.
 * \return 0; -ENOENT the lease does not exist; see the file's errors.
 */
int tide_etcd_put(struct tide_etcd *e, const char *key, size_t key_len, const void *value,
		  size_t value_len, int64_t lease, int64_t *rev);

/**
 * Create a key only if it does not exist (a transaction comparing its
 * create_revision with 0), attached to lease (0: none).
 * \param rev  out, may be NULL: on success the revision of the write, which is
 *             the key's create_revision (Mooncake's view_version).
 * \return 0 created; -EEXIST it exists (nothing written); see the file's errors.
 */
int tide_etcd_create(struct tide_etcd *e, const char *key, size_t key_len, const void *value,
		     size_t value_len, int64_t lease, int64_t *rev);

/**
 * Delete a key.
 * \return 0 deleted; -ENOENT there was none; see the file's errors.
 */
int tide_etcd_delete(struct tide_etcd *e, const char *key, size_t key_len);

/**
 * Read the keys in [key, range_end) in ascending key order (linearizable).
 * \param range_end  NULL or range_end_len 0: just key; "\0" (length 1): every
 *                   key >= key; see tide_etcd_prefix_end() for a prefix.
 * \param limit  most keys returned; 0: no limit (the reply stays bounded by
 *               the client's 32 MiB reply cap); < 0: -EINVAL.
 * \param kvs    out: a malloc()ed array of *n entries, NULL when *n == 0;
 *               owned by the caller, freed with tide_etcd_kvs_free(*kvs, *n).
 *               NULL and 0 on failure.
 * \param more   out, may be NULL: true if etcd has more keys in the range past
 *               the limit. To read the next page, call again with key set to
 *               the last key returned followed by one 0x00 byte.
 * \param header_rev  out, may be NULL: the store's revision at the read.
 * \return 0, also with *n == 0 (nothing in range); -EBADMSG also when the
 *         reply holds more keys than limit, a key outside the range or keys
 *         out of order; see the file's errors.
 */
int tide_etcd_range(struct tide_etcd *e, const char *key, size_t key_len, const char *range_end,
		    size_t range_end_len, int64_t limit, struct tide_etcd_kv **kvs, size_t *n,
		    bool *more, int64_t *header_rev);

/** Free an array a range returned (each entry, then the array). NULL ignored. Thread: any. */
void tide_etcd_kvs_free(struct tide_etcd_kv *kvs, size_t n);

/**
 * The range_end that selects every key starting with prefix (etcd's rule,
 * as clientv3's WithPrefix): drop the trailing 0xff bytes, then increment the
 * last byte. A prefix of only 0xff bytes has no such end: its range_end is
 * "\0" (length 1), "every key >= prefix".
 * \param out  room for prefix_len bytes (out == prefix is allowed); not
 *             NUL-terminated.
 * \return the length written, 1..prefix_len; 0 (nothing written) when
 *         prefix_len is 0 (every key is key "\0" with range_end "\0").
 * Thread: any.
 */
size_t tide_etcd_prefix_end(const char *prefix, size_t prefix_len, char *out);

/**
 * Delete every key in [key, range_end).
 * \param range_end  NULL or range_end_len 0: just key; "\0": every key >= key.
 * \param deleted  out, may be NULL: how many keys were deleted.
 * \return 0, also when there was none; see the file's errors.
 */
int tide_etcd_delete_range(struct tide_etcd *e, const char *key, size_t key_len,
			   const char *range_end, size_t range_end_len, int64_t *deleted);

/** What one operation of a transaction does. */
enum tide_etcd_op_type {
	TIDE_ETCD_OP_PUT,    /**< put key = value, attached to lease */
	TIDE_ETCD_OP_DELETE, /**< delete [key, range_end) */
};

/** One operation of tide_etcd_txn_if_created(); the pointers are only read
 *  during the call. */
struct tide_etcd_op {
	enum tide_etcd_op_type type;
	const char *key;
	size_t key_len;
	const void *value;     /**< PUT; NULL only with value_len 0 */
	size_t value_len;      /**< PUT */
	int64_t lease;         /**< PUT; 0: none */
	const char *range_end; /**< DELETE; NULL: just key, "\0": every key >= key */
	size_t range_end_len;  /**< DELETE */
};

/**
 * Atomically: if cmp_key's create_revision equals create_rev (0: the key
 * must not exist), apply ops in order; else write nothing. A fence: a
 * leader that won with create_revision R writes only while its key is the
 * one it created. etcd refuses a transaction that writes one key twice (two
 * puts, or a put inside a delete's range).
 * \param rev  out, may be NULL: on success the revision of the transaction
 *             (the revision of every write in it).
 * \return 0 applied; -ESTALE the comparison failed (nothing written);
 *         -ENOENT a put's lease does not exist (nothing written; checked only
 *         when the comparison holds); -EINVAL n == 0 or n >
 *         TIDE_ETCD_TXN_MAX_OPS, NULL or empty keys, an unknown type,
 *         create_rev or a lease < 0, or one key written twice (etcd's
 *         "duplicate key given in txn request"); see the file's errors.
 */
int tide_etcd_txn_if_created(struct tide_etcd *e, const char *cmp_key, size_t cmp_key_len,
			     int64_t create_rev, const struct tide_etcd_op *ops, size_t n,
			     int64_t *rev);

/**
 * Compact the key-value history up to revision rev: etcd keeps every old
 * revision until compacted; afterwards reads and watches at revisions < rev
 * fail ("required revision has been compacted"). Returns once etcd has
 * applied it; the disk space is freed in the background.
 * \return 0; also 0 when rev was already compacted; -EINVAL rev <= 0 or rev
 *         past the store's current revision (etcd's "required revision is a
 *         future revision"); see the file's errors.
 */
int tide_etcd_compact(struct tide_etcd *e, int64_t rev);

/**
 * Grant a lease of ttl_s seconds (1..9e9).
 * \param id  out: the lease id (> 0).
 */
int tide_etcd_lease_grant(struct tide_etcd *e, int64_t ttl_s, int64_t *id);

/**
 * Renew a lease once (one keepalive request and its reply).
 * \param ttl_s  out, may be NULL: the TTL etcd granted again.
 * \return 0; -ENOENT the lease expired or was revoked (etcd answers with no
 *         TTL); see the file's errors.
 */
int tide_etcd_lease_keepalive(struct tide_etcd *e, int64_t id, int64_t *ttl_s);

/**
 * Revoke a lease, deleting every key attached to it.
 * \return 0; also 0 when the lease no longer exists (nothing to release).
 */
int tide_etcd_lease_revoke(struct tide_etcd *e, int64_t id);

/**
 * Wait until key changes after revision after_rev (a put or a delete of it
 * with a revision > after_rev), or until timeout_ms passes. One watch
 * stream, closed before returning.
 * \param rev  out, may be NULL: the revision of the change seen.
 * \return 1 changed; 0 no change within timeout_ms; see the file's errors
 *         (-ETIMEDOUT is reserved for a failed connection, not a quiet key).
 */
int tide_etcd_wait_change(struct tide_etcd *e, const char *key, size_t key_len, int64_t after_rev,
			  unsigned timeout_ms, int64_t *rev);

/** Free what a get put in kv, and zero it. NULL ignored. Thread: any. */
void tide_etcd_kv_clear(struct tide_etcd_kv *kv);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_ETCD_H */
