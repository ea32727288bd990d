/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Object table and segment manager of the Mooncake-compatible master
 * (spec: /work/shared/spec/mooncake-master.md, sections 3, 4.2-4.4, 9).
 *
 * Pure state and semantics: no sockets, no threads of its own, no clock.
 * Every call takes the current time as `now_ms` (any monotonic millisecond
 * clock; tests drive a fake one). The one exception is a resource bound,
 * not a semantic: the regex calls measure their matching time
 * (opts.regex_timeout_ms) on CLOCK_MONOTONIC. The server decodes a request
 * with the codec (tide_mc_codec.h), calls the matching function here, and
 * encodes the result; argument and result types are the codec's structs.
 *
 * Results. Business outcomes are Mooncake ErrorCodes, not errno: every
 * operation returns TIDE_MC_EC_OK (0) or a negative enum tide_mc_error_code,
 * which the server puts in the tl::expected of the reply as it is. A
 * failed malloc inside the table is reported as TIDE_MC_EC_INTERNAL_ERROR.
 * Batch operations return per-key results in a caller-provided array of n
 * elements and themselves return 0 (or INVALID_PARAMS on NULL arguments).
 *
 * Memory of results. Descriptors, strings and vectors that a call returns
 * are carved from a caller-owned struct tide_mc_table_arena: they are
 * copies (valid after the table lock is dropped and after the segment they
 * describe is unmounted) and stay valid until the arena is reset or
 * released. One arena per RPC thread, reset after each reply is encoded,
 * costs no malloc in steady state. These results are "borrowed" in the
 * codec's sense: encode them, never pass them to tide_mc_resp_free().
 *
 * Thread contract: internal lock. Every function on a table takes one
 * mutex for its whole duration, so any thread may call any function at any
 * time, concurrently. No I/O happens under the lock. Most calls hold it
 * for O(1) work plus O(#segments) for an allocation; O(#objects) scans run
 * under it for: RemoveAll, an unmount (or client expiry) of a segment that
 * holds replicas, an eviction round (only when usage exceeds the high
 * watermark or a put failed for space), and hash-table growth (amortised);
 * a tick also walks the live allocation leases (at most TIDE_MC_TABLE_LEASE_MAX).
 * The regex calls are the exception: they compile the pattern without the
 * lock, hold it for one copy of the keys, match without it, and take it
 * again per chunk of matches to act on them (one regex scan at a time per
 * table; the others wait for it). No pattern can hold the lock longer than
 * a copy of the keys.
 */
#ifndef TIDE_MC_TABLE_H
#define TIDE_MC_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_mc_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/** SegmentStatus returned by QuerySegmentStatus (int32 on the wire). */
enum tide_mc_segment_status {
	TIDE_MC_SEGMENT_UNDEFINED = 0,
	TIDE_MC_SEGMENT_OK = 1,         /**< mounted, allocatable */
	TIDE_MC_SEGMENT_UNMOUNTING = 2, /**< graceful unmount pending: readable, not allocatable */
};

/** Replicas one object can have; a larger replica_num is served best effort up to this. */
#define TIDE_MC_TABLE_MAX_REPLICAS 16u

/** Options for tide_mc_table_create(); fill with tide_mc_table_opts_init() first. */
struct tide_mc_table_opts {
	size_t opts_size;                 /**< sizeof(struct tide_mc_table_opts) */
	uint64_t default_kv_lease_ttl_ms; /**< read lease; default 10000 (--default_kv_lease_ttl) */
	uint64_t default_kv_soft_pin_ttl_ms;   /**< default 30 min */
	uint64_t max_kv_soft_pin_ttl_ms;       /**< default 24 h */
	bool allow_evict_soft_pinned_objects;  /**< default true */
	double eviction_ratio;                 /**< [0,1]; default 0.05 */
	double eviction_high_watermark_ratio;  /**< [0,1]; default 0.90 */
	uint64_t client_ttl_ms;                /**< default 10000 (--client_ttl 10 s) */
	uint64_t put_start_discard_timeout_ms; /**< default 30000: a PROCESSING key older than this
						    may be taken over by a new PutStart */
	uint64_t put_start_release_timeout_ms; /**< default 600000: discarded buffers are freed,
						    and PROCESSING objects reclaimed, after this */
	uint32_t seg_granule;                  /**< allocator granule; default 64 */
	uint32_t seg_max_blocks;               /**< allocator block table per segment; default 4 Mi
						    (about 2 M live objects per segment) */
	uint64_t seed;                         /**< hash key and placement PRNG; 0 = random */
	/**
	 * RL mode (Tide extension; mooncake_master --pin_unread or TIDE_PIN_UNREAD).
	 * When true, eviction never picks an object that has not been read since it
	 * was last written; such objects count as pinned (outside the eviction
	 * base), like hard-pinned ones. "Read" means its replica list was handed to
	 * a client by a successful GetReplicaList, BatchGetReplicaList (per key) or
	 * GetReplicaListByRegex: the calls that grant a read lease and return the
	 * descriptors a reader needs. ExistKey (which also grants a lease), the
	 * admin QueryKey and PutEnd do not count; PutStart/UpsertStart make the
	 * object unread again. When nothing evictable remains, PutStart answers
	 * NO_AVAILABLE_HANDLE as usual: backpressure until readers catch up or
	 * objects are removed. Default false (stock behaviour).
	 */
	bool pin_unread;
	/**
	 * Bounds of one GetReplicaListByRegex / RemoveByRegex (Tide; stock has
	 * none). A pattern that goes over one is answered INVALID_PARAMS, as
	 * stock answers a pattern std::regex refuses, and a log line says which.
	 */
	uint32_t regex_match_limit;  /**< backtracking steps per key; default 1e6
					  (--regex_match_limit) */
	uint64_t regex_memory_limit; /**< bytes to compile and match the pattern, >= 64 KiB;
					  default 16 MiB (--regex_memory_mb) */
	uint64_t regex_timeout_ms;   /**< matching time over the whole table; default 5000
					  (--regex_timeout) */
	/**
	 * Life of an allocation lease (Tide extension, tide_mc_table_lease_grant()):
	 * a lease ends this long after its grant or its last successful commit;
	 * default 30000, must be > 0.
	 */
	uint64_t lease_ttl_ms;
	/**
	 * A lease takes at most 1/lease_seg_share of its segment (rounded down to the granule,
	 * at least one granule): a few clients' 16 MiB leases must not hold a small segment
	 * between them for their TTL while other puts find it full. Default 8, must be > 0
	 * (1: a lease may take a whole segment).
	 */
	uint32_t lease_seg_share;
};

/** Defaults of the regex bounds (struct tide_mc_table_opts). */
#define TIDE_MC_TABLE_REGEX_MATCH_LIMIT 1000000u
#define TIDE_MC_TABLE_REGEX_MEMORY      (16u << 20)
#define TIDE_MC_TABLE_REGEX_MEMORY_MIN  (64u << 10)
#define TIDE_MC_TABLE_REGEX_TIMEOUT_MS  5000u

/** Per-operation counter index for struct tide_mc_table_metrics. */
enum tide_mc_table_op {
	TIDE_MC_TABLE_OP_MOUNT,
	TIDE_MC_TABLE_OP_REMOUNT,
	TIDE_MC_TABLE_OP_UNMOUNT,
	TIDE_MC_TABLE_OP_GRACEFUL_UNMOUNT,
	TIDE_MC_TABLE_OP_PING,
	TIDE_MC_TABLE_OP_PUT_START,
	TIDE_MC_TABLE_OP_PUT_END,
	TIDE_MC_TABLE_OP_PUT_REVOKE,
	TIDE_MC_TABLE_OP_UPSERT_START,
	TIDE_MC_TABLE_OP_UPSERT_END,
	TIDE_MC_TABLE_OP_UPSERT_REVOKE,
	TIDE_MC_TABLE_OP_BATCH_PUT_START,
	TIDE_MC_TABLE_OP_BATCH_PUT_END,
	TIDE_MC_TABLE_OP_BATCH_PUT_REVOKE,
	TIDE_MC_TABLE_OP_BATCH_UPSERT_START,
	TIDE_MC_TABLE_OP_BATCH_UPSERT_END,
	TIDE_MC_TABLE_OP_BATCH_UPSERT_REVOKE,
	TIDE_MC_TABLE_OP_GET_REPLICA_LIST,
	TIDE_MC_TABLE_OP_BATCH_GET_REPLICA_LIST,
	TIDE_MC_TABLE_OP_GET_REPLICA_LIST_BY_REGEX,
	TIDE_MC_TABLE_OP_EXIST_KEY,
	TIDE_MC_TABLE_OP_BATCH_EXIST_KEY,
	TIDE_MC_TABLE_OP_REMOVE,
	TIDE_MC_TABLE_OP_BATCH_REMOVE,
	TIDE_MC_TABLE_OP_REMOVE_BY_REGEX,
	TIDE_MC_TABLE_OP_REMOVE_ALL,
	TIDE_MC_TABLE_OP_BATCH_QUERY_IP,
	TIDE_MC_TABLE_OP_QUERY_SEGMENT_STATUS,
	TIDE_MC_TABLE_OP_LEASE_GRANT,         /**< Tide extension */
	TIDE_MC_TABLE_OP_LEASE_COMMIT,        /**< Tide extension; counts keys, as a batch */
	TIDE_MC_TABLE_OP_LEASE_RELEASE,       /**< Tide extension */
	TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR, /**< counts keys; a key not cleared is a failure */
	TIDE_MC_TABLE_OP_COUNT
};

/** Bucket bounds of the value-size histogram (stock's master_value_size_bytes), bytes. */
#define TIDE_MC_TABLE_VSIZE_BOUNDS 7
extern const uint64_t TIDE_MC_TABLE_VSIZE_BOUND[TIDE_MC_TABLE_VSIZE_BOUNDS];

/**
 * Counters and gauges for the Prometheus export. For single-key operations
 * `requests` counts calls and `failures` calls that returned an error; for
 * batch operations (BatchQueryIp: per client id) both count keys (a batch of
 * 8 with 2 failures adds 8 and 2) and `batch_calls`, `batch_failed_calls`,
 * `batch_partial_calls` count the calls as stock's master does (a call whose
 * every key failed, an empty one included, is a failed call; one with some
 * failed keys a partial success). Everything here only grows except the
 * gauges marked so.
 */
struct tide_mc_table_metrics {
	uint64_t keys;             /**< objects in the table (master_key_count) */
	uint64_t processing_keys;  /**< of which PROCESSING */
	uint64_t soft_pinned_keys; /**< objects with a soft pin set (master_soft_pin_key_count) */
	uint64_t hard_pinned_keys; /**< objects with a hard pin */
	uint64_t value_bytes;     /**< sum of object lengths x replicas (master_value_size_bytes) */
	uint64_t allocated_bytes; /**< granule-rounded bytes held in segments, incl. discarded
				       buffers awaiting release (master_allocated_bytes) */
	uint64_t capacity_bytes;  /**< sum of mounted segment sizes (master_total_capacity_bytes) */
	uint64_t segments;        /**< mounted segments, incl. those draining */
	uint64_t clients;         /**< clients with a live TTL (master_active_clients) */
	uint64_t ok_clients;      /**< of which remounted (Ping answers OK) */
	uint64_t discarded_buffers;    /**< buffers awaiting delayed release */
	uint64_t eviction_rounds;      /**< eviction rounds that evicted something */
	uint64_t evicted_keys;         /**< objects evicted */
	uint64_t evicted_bytes;        /**< object bytes times replicas evicted */
	uint64_t expired_clients;      /**< clients unmounted for missing Pings */
	uint64_t reclaimed_puts;       /**< PROCESSING objects reclaimed (dead writer or timeout) */
	uint64_t evict_skipped_unread; /**< pin_unread: unread objects an eviction round passed
					    over (once per object per round) */
	uint64_t eviction_attempts;    /**< eviction rounds run (by the watermark or a failed
					    allocation), whether they evicted or not */
	uint64_t requests[TIDE_MC_TABLE_OP_COUNT];
	uint64_t failures[TIDE_MC_TABLE_OP_COUNT];
	uint64_t batch_calls[TIDE_MC_TABLE_OP_COUNT];
	uint64_t batch_failed_calls[TIDE_MC_TABLE_OP_COUNT];
	uint64_t batch_partial_calls[TIDE_MC_TABLE_OP_COUNT];
	uint64_t alloc_failures;      /**< PutStart/UpsertStart keys (single, batch) refused for
					   want of space (NO_AVAILABLE_HANDLE) */
	uint64_t partial_allocations; /**< of the granted ones, placed with fewer replicas than
					   asked (best effort, as stock) */
	uint64_t put_discards;        /**< objects whose buffers were kept for delayed release:
					   a taken-over or preempted put, an upsert's old buffers */
	uint64_t put_releases;        /**< of those, objects whose first buffer was released */
	uint64_t put_discard_bytes;   /**< gauge: object bytes of those buffers still held */
	uint64_t gets;                /**< GetReplicaList lookups (single and per batch key) */
	uint64_t gets_found;          /**< of which answered with replicas */
	uint64_t gets_found_bytes;    /**< object bytes of those */
	uint64_t vsize_bucket[TIDE_MC_TABLE_VSIZE_BOUNDS + 1]; /**< objects created, by length:
								    bucket k counts lengths <=
								    bound k (not cumulative; the
								    last one, above every bound) */
	uint64_t vsize_sum;                                    /**< sum of their lengths */
	uint64_t leases;          /**< live allocation leases (Tide extension) */
	uint64_t leased_bytes;    /**< granule-rounded bytes of their unused parts (also counted
				       in allocated_bytes) */
	uint64_t discarded_bytes; /**< granule-rounded bytes of the buffers awaiting delayed
				     release (a taken-over put's, an expired lease's reserve; also
				     counted in allocated_bytes) */
};

/** One mounted segment, for /get_all_segments and similar listings. */
struct tide_mc_table_segment_info {
	struct tide_mc_uuid id;
	struct tide_mc_uuid client_id;
	struct tide_mc_str name;
	struct tide_mc_str te_endpoint;
	struct tide_mc_str protocol;
	uint64_t base;
	uint64_t size;  /**< bytes managed (size as mounted, rounded down to the granule) */
	uint64_t used;  /**< bytes allocated in it */
	int32_t status; /**< enum tide_mc_segment_status */
};

/**
 * Caller-owned bump allocator for results. Zero-initialise it ({0}) before
 * first use; the fields are private to the table.
 */
struct tide_mc_table_arena {
	void *chunk; /**< newest chunk (private) */
	size_t used; /**< bytes used in it (private) */
	size_t cap;  /**< its capacity (private) */
};

/** The table; opaque. */
struct tide_mc_table;

/**
 * Fill opts with the stock master's defaults (spec 4.1).
 * \param opts       Options to fill.
 * \param opts_size  sizeof(*opts) as the caller compiled it.
 * Thread: any.
 */
void tide_mc_table_opts_init(struct tide_mc_table_opts *opts, size_t opts_size);

/**
 * Create an empty table.
 * \param opts      Options (copied).
 * \param[out] out  The table on success.
 * \return 0; -EINVAL bad option (ratio outside [0,1], opts_size too small,
 *         granule not a power of two in the allocator's range, soft-pin
 *         default > max, release timeout <= discard timeout, lease_ttl_ms or lease_seg_share 0);
 *         -ENOMEM.
 * Thread: any. Ownership: destroy with tide_mc_table_destroy().
 */
int tide_mc_table_create(const struct tide_mc_table_opts *opts, struct tide_mc_table **out);

/**
 * Free the table, its objects and its segment allocators. NULL-safe.
 * Thread: the owner, when no other call on the table runs or follows.
 */
void tide_mc_table_destroy(struct tide_mc_table *t);

/**
 * Drop every result carved from the arena but keep its newest chunk for reuse.
 * Thread: the arena's owner.
 */
void tide_mc_table_arena_reset(struct tide_mc_table_arena *a);

/** Free all of the arena's memory and zero it. NULL-safe. Thread: the arena's owner. */
void tide_mc_table_arena_release(struct tide_mc_table_arena *a);

/* ------------------------------------------------------------------------------------------ */
/* Segments and clients (spec 3.4, 4.2)                                                        */
/* ------------------------------------------------------------------------------------------ */

/**
 * MountSegment: make [base, base+size) of a client allocatable. Refreshes
 * the client's TTL but does not make it OK: its next Ping answers
 * NEED_REMOUNT until it calls ReMountSegment.
 * \param seg     Segment (strings copied). Its size is rounded down to the granule.
 * \param client  Owner.
 * \return 0 (also when seg->id is already mounted: idempotent);
 *         INVALID_PARAMS base or size 0, size below one granule, NULL args;
 *         INTERNAL_ERROR out of memory.
 * Thread: any (internal lock).
 */
int tide_mc_table_mount_segment(struct tide_mc_table *t, const struct tide_mc_segment *seg,
				const struct tide_mc_uuid *client, uint64_t now_ms);

/**
 * ReMountSegment: re-register all of a client's segments and mark it OK.
 * Each segment either matches a mounted one exactly (same id, client, name,
 * base, size, endpoint, protocol) or is new and is mounted. Checked for all
 * before any is mounted.
 * \return 0; INVALID_PARAMS a segment id is mounted with other attributes or
 *         by another client, or an invalid new segment; INTERNAL_ERROR.
 * Thread: any (internal lock).
 */
int tide_mc_table_remount_segments(struct tide_mc_table *t, const struct tide_mc_segment *segs,
				   size_t n, const struct tide_mc_uuid *client, uint64_t now_ms);

/**
 * UnmountSegment: drop the segment's allocator now. Replicas in it are
 * dropped; objects left without any replica disappear (PROCESSING ones too);
 * delayed-release buffers in it are forgotten.
 * \return 0, also for an unknown segment id (idempotent, as stock).
 * Thread: any (internal lock). Cost: O(#objects) when the segment holds replicas.
 */
int tide_mc_table_unmount_segment(struct tide_mc_table *t, const struct tide_mc_uuid *segment_id,
				  const struct tide_mc_uuid *client, uint64_t now_ms);

/**
 * GracefulUnmountSegment: stop allocating in the segment at once (status
 * UNMOUNTING; its replicas stay readable) and unmount it at the first
 * tide_mc_table_tick() at or after now_ms + grace_period_ms; a zero grace
 * unmounts now.
 * \return 0, also for an unknown segment id.
 * Thread: any (internal lock).
 */
int tide_mc_table_graceful_unmount_segment(struct tide_mc_table *t,
					   const struct tide_mc_uuid *segment_id,
					   const struct tide_mc_uuid *client,
					   uint64_t grace_period_ms, uint64_t now_ms);

/**
 * Ping: refresh the client's TTL (creating its record if unknown).
 * \param[out] out  view_version_id 0; client_status OK if the client has
 *                  remounted since it became known, else NEED_REMOUNT.
 * \return 0; INVALID_PARAMS NULL args; INTERNAL_ERROR out of memory.
 * Thread: any (internal lock).
 */
int tide_mc_table_ping(struct tide_mc_table *t, const struct tide_mc_uuid *client, uint64_t now_ms,
		       struct tide_mc_ping_info *out);

/**
 * BatchQueryIp: for each client that has mounted segments, the distinct
 * hosts of their te_endpoints (text before the first ':'; empty endpoints
 * skipped). Clients without segments are left out of the map.
 * \param[out] out  Entries carved from `a`.
 * \return 0; INVALID_PARAMS NULL args; INTERNAL_ERROR.
 * Thread: any (internal lock).
 */
int tide_mc_table_batch_query_ip(struct tide_mc_table *t, const struct tide_mc_uuid *clients,
				 size_t n, struct tide_mc_table_arena *a,
				 struct tide_mc_ip_entry_vec *out);

/**
 * QuerySegmentStatus: status of the segment(s) with this name.
 * \param[out] status  OK if any segment of that name is allocatable, else UNMOUNTING.
 * \return 0; SEGMENT_NOT_FOUND no segment has that name.
 * Thread: any (internal lock).
 */
int tide_mc_table_query_segment_status(struct tide_mc_table *t, const struct tide_mc_str *name,
				       int32_t *status);

/**
 * List mounted segments (admin HTTP).
 * \param[out] out  Array of *n entries carved from `a`.
 * \return 0; INTERNAL_ERROR out of memory. Thread: any (internal lock).
 */
int tide_mc_table_segments_list(struct tide_mc_table *t, struct tide_mc_table_arena *a,
				struct tide_mc_table_segment_info **out, size_t *n);

/**
 * Periodic work; the server calls it every 10-100 ms. In order:
 * expire clients whose TTL passed (unmount all their segments, reclaim the
 * PROCESSING objects they started and free their buffers at once, and end
 * their allocation leases, so a writer that died mid-put leaves nothing
 * visible or allocated; puts of a writer the table never saw Ping or Mount
 * wait for the release timeout below); complete due graceful unmounts;
 * free discarded buffers whose release time passed; end allocation leases
 * whose deadline passed or whose segment is draining, freeing their unused
 * parts (tide_mc_table_lease_grant()); reclaim PROCESSING objects
 * older than put_start_release_timeout; run one eviction round if usage
 * exceeds eviction_high_watermark_ratio or a PutStart failed for space
 * since the last round (spec 4.3; hard-pinned objects, and with
 * opts.pin_unread unread ones, are never evicted). Usage here is allocated
 * bytes less the unused parts of allocation leases: a reservation is not data.
 * Thread: any (internal lock).
 */
void tide_mc_table_tick(struct tide_mc_table *t, uint64_t now_ms);

/**
 * Start every known client's TTL again at now_ms (a table rebuilt from a log
 * begins serving: its segments' owners get a whole TTL to ping it).
 * Thread: any (internal lock).
 */
void tide_mc_table_clients_refresh(struct tide_mc_table *t, uint64_t now_ms);

/** Copy the counters. Thread: any (internal lock). */
void tide_mc_table_metrics_get(struct tide_mc_table *t, struct tide_mc_table_metrics *m);

/** Name of an operation ("put_start", ...) for metric names; "unknown" if out of range. */
const char *tide_mc_table_op_name(enum tide_mc_table_op op);

/* ------------------------------------------------------------------------------------------ */
/* Writes (spec 3.3)                                                                           */
/* ------------------------------------------------------------------------------------------ */

/**
 * PutStart: allocate one contiguous buffer of `len` bytes per replica, each
 * on a segment of a different name, preferred names first (preferred_segment
 * if non-empty, else preferred_segments in order), then the others from a
 * random start. Best effort: succeeds with fewer than replica_num replicas if
 * at least one fits. The object is PROCESSING until PutEnd.
 * \param cfg  ReplicateConfig of either layout. soft_pin_action ENABLE (HEAD)
 *             or with_soft_pin (V0312) requests a soft pin, committed at
 *             PutEnd; group_ids, if present, must have exactly 1 element;
 *             tenant and host hints are ignored (single-tenant master).
 * \param[out] out  PROCESSING memory descriptors: size = len, buffer_address
 *                  = segment base + offset, protocol "tcp", transport_endpoint
 *                  = the segment's te_endpoint; carved from `a`.
 * \return 0; INVALID_PARAMS empty key, len 0, no replica requested, NoF or
 *         DFS replicas requested, bad soft-pin settings, group_ids size != 1;
 *         OBJECT_ALREADY_EXISTS the key has a COMPLETE replica, or is
 *         PROCESSING and started less than put_start_discard_timeout ago (an
 *         older one is taken over: its buffers are released later);
 *         NO_AVAILABLE_HANDLE nothing fits (eviction runs at the next tick);
 *         INTERNAL_ERROR.
 * Thread: any (internal lock).
 */
int tide_mc_table_put_start(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			    const struct tide_mc_str *key, uint64_t len,
			    const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			    struct tide_mc_table_arena *a, struct tide_mc_replica_desc_vec *out);

/**
 * PutEnd: mark the PROCESSING memory replicas COMPLETE, store the checksum,
 * commit a requested soft pin, and grant a read lease of 0 ms.
 * \param checksum     ObjectMeta.object_checksum, or NULL.
 * \param replica_type enum tide_mc_replica_type; MEMORY and ALL target the
 *                     memory replicas, other types target nothing.
 * \return 0 (also when already COMPLETE: idempotent retry); OBJECT_NOT_FOUND;
 *         ILLEGAL_CLIENT not the PutStart caller; INVALID_WRITE PROCESSING
 *         but replica_type targets no PROCESSING replica.
 * Thread: any (internal lock).
 */
int tide_mc_table_put_end(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			  const struct tide_mc_str *key, const struct tide_mc_opt_u64 *checksum,
			  int32_t replica_type, uint64_t now_ms);

/**
 * PutRevoke: free the PROCESSING replicas now and erase the key.
 * \return 0; OBJECT_NOT_FOUND; ILLEGAL_CLIENT; INVALID_WRITE not PROCESSING
 *         or replica_type targets no PROCESSING replica.
 * Thread: any (internal lock).
 */
int tide_mc_table_put_revoke(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			     const struct tide_mc_str *key, int32_t replica_type, uint64_t now_ms);

/**
 * UpsertStart: PutStart that replaces. Absent key: as PutStart. A PROCESSING
 * key is taken over at once (its buffers released later); if it had no
 * COMPLETE data it is then allocated afresh. A COMPLETE key of the same
 * length is rewritten in place: its replicas turn PROCESSING with the same
 * addresses and ids (unreadable until UpsertEnd). A COMPLETE key of another
 * length gets new buffers (old ones released later), keeping its hard pin
 * and a live soft pin. Leases do not block an upsert.
 * \return as tide_mc_table_put_start() minus OBJECT_ALREADY_EXISTS.
 * Thread: any (internal lock).
 */
int tide_mc_table_upsert_start(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			       const struct tide_mc_str *key, uint64_t len,
			       const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			       struct tide_mc_table_arena *a, struct tide_mc_replica_desc_vec *out);

/** UpsertEnd: same as tide_mc_table_put_end(). Thread: any (internal lock). */
int tide_mc_table_upsert_end(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			     const struct tide_mc_str *key, const struct tide_mc_opt_u64 *checksum,
			     int32_t replica_type, uint64_t now_ms);

/** UpsertRevoke: same as tide_mc_table_put_revoke(). Thread: any (internal lock). */
int tide_mc_table_upsert_revoke(struct tide_mc_table *t, const struct tide_mc_uuid *client,
				const struct tide_mc_str *key, int32_t replica_type,
				uint64_t now_ms);

/**
 * BatchPutStart / BatchUpsertStart (`upsert`): one start per key with the
 * same cfg, except that group_ids (if present) must have n_keys elements.
 * \param n_keys, n_lens  Sizes of the two request vectors; if they differ
 *                        (or group_ids does not match) every key gets INVALID_PARAMS.
 * \param[out] out        n_keys results (descriptors carved from `a`).
 * \return 0; INVALID_PARAMS NULL args.
 * Thread: any (internal lock).
 */
int tide_mc_table_batch_put_start(struct tide_mc_table *t, bool upsert,
				  const struct tide_mc_uuid *client, const struct tide_mc_str *keys,
				  size_t n_keys, const uint64_t *lens, size_t n_lens,
				  const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
				  struct tide_mc_table_arena *a, struct tide_mc_exp_replicas *out);

/**
 * BatchPutEnd / BatchUpsertEnd (`upsert`; use replica_type ALL): per-key PutEnd.
 * \param[out] out  n results.
 * \return 0; INVALID_PARAMS NULL args. Thread: any (internal lock).
 */
int tide_mc_table_batch_put_end(struct tide_mc_table *t, bool upsert,
				const struct tide_mc_uuid *client,
				const struct tide_mc_object_meta *metas, size_t n,
				int32_t replica_type, uint64_t now_ms,
				struct tide_mc_exp_void *out);

/**
 * BatchPutRevoke / BatchUpsertRevoke (`upsert`; use replica_type ALL): per-key PutRevoke.
 * \return 0; INVALID_PARAMS NULL args. Thread: any (internal lock).
 */
int tide_mc_table_batch_put_revoke(struct tide_mc_table *t, bool upsert,
				   const struct tide_mc_uuid *client,
				   const struct tide_mc_str *keys, size_t n, int32_t replica_type,
				   uint64_t now_ms, struct tide_mc_exp_void *out);

/* ------------------------------------------------------------------------------------------ */
/* Allocation leases (Tide extension, not in stock Mooncake): one-round-trip puts             */
/* ------------------------------------------------------------------------------------------ */

/*
 * A client takes a lease on free space in one segment, writes objects' bytes
 * into parts of it itself, and turns each part into a COMPLETE object with a
 * commit: one request per batch of objects instead of PutStart + PutEnd per
 * object. The unused parts of a lease stay allocated (they count in the
 * segment's usage and allocated_bytes, not in the eviction watermark) until they
 * are committed, released, or the lease ends: ttl_ms after its grant or
 * its last commit that committed a key (tide_mc_table_tick() frees it, and
 * any call naming it after its deadline finds it ended), when its segment
 * is unmounted or starts a graceful unmount, or when its client expires.
 * A lease with no unused part left ends at the end of the commit that used
 * its last part. Leases are not journaled: a table rebuilt from the journal
 * knows none (their committed objects are journaled as PutEnd's are), so a
 * server answers a grant once tide_mc_table_journal_free_seq() is durable,
 * and a commit once tide_mc_table_journal_seq() is, as for PutStart/PutEnd.
 */

/** Live leases a table holds at most; a grant beyond answers NO_AVAILABLE_HANDLE. */
#define TIDE_MC_TABLE_LEASE_MAX 4096u
/**
 * Unused parts (pieces) one lease can be split into; a commit that would
 * need more answers NO_AVAILABLE_HANDLE for that key. Committing objects
 * from the lease's start upwards, back to back, never splits it: one piece.
 */
#define TIDE_MC_TABLE_LEASE_PIECES 64u
/** After a lease expired or its client did, its unused space stays reserved this
 *  long past the lease's deadline (a write its holder placed may still be
 *  moving), then is free. */
#define TIDE_MC_TABLE_LEASE_GRACE_MS 60000u

/*
 * A lease granted by tide_mc_table_lease_grant() is the wire's struct tide_mc_lease
 * (tide_mc_codec.h): id nonzero and unique for the table's life; ttl_ms =
 * opts.lease_ttl_ms, the lease ending that long after its grant or its last
 * successful commit; granule, which commit offsets are multiples of and object
 * sizes are rounded up to; buf.buffer_address = segment base + allocator offset
 * of the lease's start, buf.size = the request rounded up to the granule, or
 * less: at most 1/opts.lease_seg_share of the segment (at least one granule),
 * buf.protocol (the segment's as mounted, "tcp" if it was mounted without one)
 * and buf.transport_endpoint, strings carved from the arena.
 */

/**
 * LeaseGrant: allocate one contiguous extent of `size` bytes (rounded up to
 * the granule; at most the segment's share, above) for `client` to fill,
 * placed as PutStart places one replica (cfg->preferred_segment, else
 * cfg->preferred_segments in order, then the other allocatable segments from
 * a random start). Not journaled.
 * \param cfg  NULL: one replica, no preference. Else replica_num must be 1,
 *             nof/dfs replica counts 0, group_ids absent or of 1 element;
 *             pins and the other fields are not read here (see commit).
 * \param[out] out  The lease; its strings are carved from `a`.
 * \return 0; INVALID_PARAMS NULL args, size 0, a cfg as above not met;
 *         NO_AVAILABLE_HANDLE nothing fits (no eviction round is asked for:
 *         the client's put falls back to PutStart, which asks), or
 *         TIDE_MC_TABLE_LEASE_MAX leases are live; INTERNAL_ERROR out of
 *         memory (nothing is held then).
 * Thread: any (internal lock). Cost: as PutStart's placement.
 */
int tide_mc_table_lease_grant(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			      uint64_t size, const struct tide_mc_replicate_config *cfg,
			      uint64_t now_ms, struct tide_mc_table_arena *a,
			      struct tide_mc_lease *out);

/**
 * LeaseCommit: for each i < n, key keys[i] of sizes[i] bytes, which the
 * client wrote at byte offsets[i] from the lease's start, becomes a COMPLETE
 * object with one memory replica there, as if PutStart had placed it there
 * and PutEnd had ended it: no checksum, a read lease of 0 ms, writer
 * `client`, hard pin if cfg->with_hard_pin, soft pin as PutStart + PutEnd
 * set it (ENABLE or with_soft_pin: until now + the pin's TTL), journaled
 * as PutEnd.
 * The object takes [offsets[i], offsets[i] + sizes[i] rounded up to the
 * granule) out of the lease; removing it later frees exactly that extent.
 * Keys are done in order, so a later key may use what an earlier one left.
 * A commit that committed at least one key moves the deadline to now + ttl.
 * \param cfg  NULL: no pins. Else group_ids absent or of n elements, soft-pin
 *             settings valid as for PutStart; replica counts and placement
 *             hints are not read (the lease decided the place).
 * \param[out] out  n per-key results: INVALID_PARAMS empty or NULL key,
 *                  size 0, offset not a multiple of the granule, or the
 *                  extent not wholly inside one unused part of the lease
 *                  (beyond it, or over a part already committed);
 *                  OBJECT_ALREADY_EXISTS the key exists (COMPLETE, or
 *                  PROCESSING in a PutStart), the part stays unused;
 *                  NO_AVAILABLE_HANDLE the lease would be split into more
 *                  than TIDE_MC_TABLE_LEASE_PIECES unused parts;
 *                  INTERNAL_ERROR out of memory or the segment's block table
 *                  is full. A key that fails changes nothing (but for an
 *                  allocator inconsistency, logged at ERR).
 * \return 0 (per-key results in out); INVALID_PARAMS t or client NULL, or
 *         n > 0 with keys, offsets, sizes or out NULL (out untouched), or
 *         a cfg as above not met (every out[i] set to INVALID_PARAMS);
 *         LEASE_EXPIRED the lease is unknown (never granted, released,
 *         ended as the section comment says) or granted to another client
 *         (every out[i] set to LEASE_EXPIRED). With n == 0 only the lease
 *         is checked (its deadline does not move).
 * Thread: any (internal lock). Cost: O(keys x TIDE_MC_TABLE_LEASE_PIECES)
 * plus, per key, a hash insert and up to four allocator operations.
 */
int tide_mc_table_lease_commit(struct tide_mc_table *t, const struct tide_mc_uuid *client,
			       uint64_t lease_id, const struct tide_mc_str *keys,
			       const uint64_t *offsets, const uint64_t *sizes, size_t n,
			       const struct tide_mc_replicate_config *cfg, uint64_t now_ms,
			       struct tide_mc_exp_void *out);

/**
 * LeaseRelease: free every unused part of the lease now and end it.
 * Committed objects are not touched.
 * \return 0; INVALID_PARAMS NULL args; LEASE_EXPIRED the lease is unknown
 *         (also when its last part was committed: it ended then) or granted
 *         to another client (it is left as it is).
 * Thread: any (internal lock). Cost: O(TIDE_MC_TABLE_LEASE_PIECES) allocator frees.
 */
int tide_mc_table_lease_release(struct tide_mc_table *t, const struct tide_mc_uuid *client,
				uint64_t lease_id, uint64_t now_ms);

/* ------------------------------------------------------------------------------------------ */
/* Reads and removal (spec 3.3)                                                                */
/* ------------------------------------------------------------------------------------------ */

/**
 * GetReplicaList: the COMPLETE replicas; grants a read lease
 * (lease = max(lease, now + default_kv_lease_ttl)).
 * \param[out] out  replicas carved from `a`, lease_ttl_ms = default_kv_lease_ttl,
 *                  object_checksum as stored by PutEnd.
 * \return 0; OBJECT_NOT_FOUND; REPLICA_IS_NOT_READY still PROCESSING.
 * Thread: any (internal lock).
 */
int tide_mc_table_get_replica_list(struct tide_mc_table *t, const struct tide_mc_str *key,
				   uint64_t now_ms, struct tide_mc_table_arena *a,
				   struct tide_mc_replica_list *out);

/**
 * Same as tide_mc_table_get_replica_list() but grants no lease and counts in
 * no metric: for the admin /query_key endpoint.
 * Thread: any (internal lock).
 */
int tide_mc_table_query_key(struct tide_mc_table *t, const struct tide_mc_str *key, uint64_t now_ms,
			    struct tide_mc_table_arena *a, struct tide_mc_replica_list *out);

/**
 * BatchGetReplicaList: per-key GetReplicaList.
 * \return 0; INVALID_PARAMS NULL args. Thread: any (internal lock).
 */
int tide_mc_table_batch_get_replica_list(struct tide_mc_table *t, const struct tide_mc_str *keys,
					 size_t n, uint64_t now_ms, struct tide_mc_table_arena *a,
					 struct tide_mc_exp_replica_list *out);

/**
 * GetReplicaListByRegex: every readable (COMPLETE) object whose key matches
 * the ECMAScript regular expression anywhere (std::regex_search, as stock;
 * dialect in mc_regex.h); each gets a read lease. Not atomic (as stock,
 * which locks shard by shard): an object written or removed during the
 * call may be left out.
 * \param[out] out  Entries carved from `a` (keys copied), in table order.
 * \return 0; INVALID_PARAMS the pattern does not compile, is longer than
 *         64 KiB, or goes over a bound of opts.regex_*; INTERNAL_ERROR.
 * Thread: any (internal lock). Cost: O(#objects), bounded per key.
 */
int tide_mc_table_get_replica_list_by_regex(struct tide_mc_table *t, const struct tide_mc_str *re,
					    uint64_t now_ms, struct tide_mc_table_arena *a,
					    struct tide_mc_regex_entry_vec *out);

/**
 * ExistKey: true if the key has a readable replica (then a lease is granted).
 * \param[out] exists  Result.
 * \return 0; INVALID_PARAMS NULL args. Thread: any (internal lock).
 */
int tide_mc_table_exist_key(struct tide_mc_table *t, const struct tide_mc_str *key, uint64_t now_ms,
			    bool *exists);

/**
 * BatchExistKey: per-key ExistKey.
 * \return 0; INVALID_PARAMS NULL args. Thread: any (internal lock).
 */
int tide_mc_table_batch_exist_key(struct tide_mc_table *t, const struct tide_mc_str *keys, size_t n,
				  uint64_t now_ms, struct tide_mc_exp_bool *out);

/**
 * Remove: erase the object and free its buffers.
 * \return 0; OBJECT_NOT_FOUND; OBJECT_HAS_LEASE !force and now < lease;
 *         REPLICA_IS_NOT_READY PROCESSING (even with force).
 * Thread: any (internal lock).
 */
int tide_mc_table_remove(struct tide_mc_table *t, const struct tide_mc_str *key, bool force,
			 uint64_t now_ms);

/**
 * BatchRemove: per-key Remove.
 * \return 0; INVALID_PARAMS NULL args. Thread: any (internal lock).
 */
int tide_mc_table_batch_remove(struct tide_mc_table *t, const struct tide_mc_str *keys, size_t n,
			       bool force, uint64_t now_ms, struct tide_mc_exp_void *out);

/**
 * BatchReplicaClear (stock's batch_replica_clear): for each key in order, drop
 * the object's replicas on the segments named `segment_name` (a segment's
 * Segment.name, as mounted; several segments may share it), or the whole
 * object when `segment_name` is empty or NULL. The buffers are freed at once.
 * A key is skipped, silently as stock, when it is empty, absent, written by
 * another client than `client` (the writer of its last PutStart), under a read
 * lease (now_ms < lease deadline), still being written (PROCESSING), or, with a
 * segment name, has no replica there. Pins do not protect an object here
 * (stock checks none). An object left without replicas is erased; one that
 * keeps some is journaled anew (an erase and a set).
 * \param[out] out  The keys cleared, in request order: an array carved from
 *                  `a` whose strings borrow `keys` (valid while both are).
 *                  Empty (v NULL, n 0) when none was.
 * eturn 0; INVALID_PARAMS NULL args; INTERNAL_ERROR the arena is out of
 *         memory (then nothing was cleared). Each key counts as one request of
 *         TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR, a skipped one as a failure.
 * Thread: any (internal lock). Cost: O(n x replicas).
 */
int tide_mc_table_batch_replica_clear(struct tide_mc_table *t, const struct tide_mc_uuid *client,
				      const struct tide_mc_str *keys, size_t n,
				      const struct tide_mc_str *segment_name, uint64_t now_ms,
				      struct tide_mc_table_arena *a, struct tide_mc_str_vec *out);

/**
 * RemoveByRegex: Remove every COMPLETE object whose key matches (ECMAScript,
 * search, as GetReplicaListByRegex) and that is unleased or `force`; others
 * are skipped. A pattern refused for a bound removes nothing.
 * \param[out] count  Objects removed.
 * \return 0; INVALID_PARAMS bad pattern or over a bound (see
 *         GetReplicaListByRegex). Thread: any (internal lock). Cost: O(#objects).
 */
int tide_mc_table_remove_by_regex(struct tide_mc_table *t, const struct tide_mc_str *re, bool force,
				  uint64_t now_ms, int64_t *count);

/**
 * RemoveAll: remove every COMPLETE object that is unleased or `force`.
 * \return Objects removed (the RPC returns this bare number).
 * Thread: any (internal lock). Cost: O(#objects).
 */
int64_t tide_mc_table_remove_all(struct tide_mc_table *t, bool force, uint64_t now_ms);

/* ------------------------------------------------------------------------------------------ */
/* Journal: the table's committed changes as records, for replication (store/master/ha)       */
/* ------------------------------------------------------------------------------------------ */

/**
 * Receives one journal record. Called with the table lock held, from the
 * thread whose call made the change (any RPC thread, or the tick): copy the
 * record and return at once, no I/O, no call back into the table. It cannot
 * refuse a record; a journal that cannot keep one must stop the master from
 * acknowledging anything after it.
 * \param seq  the record's number: the previous record's + 1.
 * \param rec  len bytes, valid only during the call.
 */
typedef void (*tide_mc_table_journal_fn)(void *ctx, uint64_t seq, const void *rec, size_t len);

/** Receives one record of a snapshot; non-zero stops the snapshot with that value. */
typedef int (*tide_mc_table_snapshot_fn)(void *ctx, const void *rec, size_t len);

/**
 * Start (fn non-NULL) or stop (NULL) journaling. Records describe the
 * changes a client was told of, and those the master made itself: a segment
 * mounted (MountSegment, a new one in ReMountSegment), a segment unmounted
 * (UnmountSegment, a graceful one coming due, client expiry), an object
 * COMPLETE (PutEnd, UpsertEnd and their batches: key, size, checksum, pins,
 * writer, replicas as segment id + offset) and a COMPLETE object erased
 * (Remove and its variants, eviction, replacement by an upsert, last replica
 * lost with its segment). Not journaled: PROCESSING objects (a put not yet
 * ended is not acknowledged), leases, reads (the pin_unread mark), delayed
 * releases, the draining state of a graceful unmount and client liveness.
 * \param last_seq  number of the last record already journaled (the next is
 *                  last_seq + 1): continue a log after replaying it.
 * \return 0; -EINVAL t NULL. Thread: any (internal lock).
 */
int tide_mc_table_journal_set(struct tide_mc_table *t, tide_mc_table_journal_fn fn, void *ctx,
			      uint64_t last_seq);

/**
 * Number of the last journal record emitted (0 before any). A reply built
 * after a change is durable once the journal has stored every record up to
 * the value read after the change. Thread: any (lock-free read).
 */
uint64_t tide_mc_table_journal_seq(const struct tide_mc_table *t);

/**
 * Number of the last journal record that released space (an object erased,
 * a segment unmounted); <= tide_mc_table_journal_seq(). A PutStart that
 * allocated may answer once this is durable: the space it hands out is then
 * free in every table a log replay can build, whatever records of other
 * objects are still on their way. Thread: any (lock-free read).
 */
uint64_t tide_mc_table_journal_free_seq(const struct tide_mc_table *t);

/**
 * Apply one journal or snapshot record to this table (a standby replaying
 * the log before it serves). Objects come back COMPLETE at the journaled
 * offsets, with a read lease of default_kv_lease_ttl from now_ms (a reader
 * of the old leader may still be reading them) and a soft pin's remaining
 * time from now_ms; a segment's owner is known again as a client that must
 * remount (its TTL starts at now_ms). Records are not journaled again.
 * \return 0; -EBADMSG a malformed or unknown record; -ENOENT an object on a
 *         segment that is not mounted; -EEXIST a segment id mounted with
 *         other attributes, or a replica overlapping allocated space;
 *         -ENOMEM. The table is unchanged on failure.
 * Thread: any (internal lock).
 */
int tide_mc_table_journal_apply(struct tide_mc_table *t, const void *rec, size_t len,
				uint64_t now_ms);

/**
 * The whole journaled state as records (every segment, then every COMPLETE
 * object), taken atomically: applied to an empty table in order, followed
 * by the journal's records after *seq, they rebuild this table.
 * \param[out] seq  the journal record number the snapshot includes.
 * \return 0; fn's non-zero value; -ENOMEM.
 * Thread: any. Holds the table lock for the whole walk: O(#objects), every
 * record copied once (about 100 ms per million objects here).
 */
int tide_mc_table_journal_snapshot(struct tide_mc_table *t, tide_mc_table_snapshot_fn fn, void *ctx,
				   uint64_t now_ms, uint64_t *seq);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_MC_TABLE_H */
