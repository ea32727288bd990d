/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Pure codec of the Mooncake master protocol: coro_rpc frames carrying
 * struct_pack bodies (spec: /work/shared/spec/mooncake-master.md, sections 1-3).
 *
 * Bytes in, typed C structs out, and the reverse. No sockets, no threads.
 * Compatibility target: Mooncake HEAD 3b5a5941 (TIDE_MC_LAYOUT_HEAD); the
 * v0.3.12.post1 release layouts (TIDE_MC_LAYOUT_V0312) are accepted and
 * produced too. Both speak the same function ids and the same version string
 * "2.0.0"; they differ in a few struct layouts, told apart by the struct_pack
 * type hash of each body.
 *
 * Typical server loop:
 *   1. tide_mc_req_frame_decode() on the bytes read so far (-EAGAIN: read more).
 *      -EPROTO: close the connection. -ENOENT / -ENOTSUP / -EBADMSG: answer
 *      tide_mc_err_frame_encode(seq, err.errc, err.msg) and keep going.
 *   2. switch (req.fn) and read req.u.<message>.
 *   3. fill a struct tide_mc_resp (same fn, layout = req.layout) and
 *      tide_mc_resp_frame_encode() it, echoing hdr.seq_num.
 *   4. tide_mc_req_free(&req).
 * A client does the reverse with tide_mc_req_frame_encode() and
 * tide_mc_resp_frame_decode().
 *
 * Memory ownership: every decoder writes into a caller-provided struct, which
 * it zeroes first. Strings and arrays in a *decoded* struct are heap copies
 * owned by that struct (the input buffer may be freed right after the call)
 * and are released by tide_mc_req_free() / tide_mc_resp_free(). On failure a
 * decoder frees whatever it allocated and leaves the struct zeroed. Encoders
 * only read their input: a struct filled by the caller with borrowed pointers
 * is encoded and must NOT be passed to a _free function.
 *
 * Thread: all functions may be called from any thread at the same time; the
 * only shared state is the read-only table computed once by
 * tide_mc_codec_init() (called implicitly by every other function).
 */
#ifndef TIDE_MC_CODEC_H
#define TIDE_MC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* coro_rpc framing                                                                            */
/* ------------------------------------------------------------------------------------------ */

#define TIDE_MC_MAGIC        0x15 /**< first byte of every coro_rpc header */
#define TIDE_MC_REQ_HDR_LEN  20   /**< request header bytes */
#define TIDE_MC_RESP_HDR_LEN 16   /**< response header bytes */
/** Prefix of every function name hashed into a function id. */
#define TIDE_MC_FN_PREFIX "mooncake::WrappedMasterService::"

/** coro_rpc transport error codes (response header err_code), spec 1.5. */
enum tide_mc_errc {
	TIDE_MC_ERRC_OK = 0,
	TIDE_MC_ERRC_IO_ERROR = 1,
	TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS = 4, /**< body did not deserialize ("invalid rpc arg") */
	TIDE_MC_ERRC_RPC_THROW_EXCEPTION = 10,  /**< handler threw */
	TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED = 11, /**< unknown function id */
	TIDE_MC_ERRC_PROTOCOL_ERROR = 12,
	TIDE_MC_ERRC_MESSAGE_TOO_LARGE = 14,
	TIDE_MC_ERRC_EXTENDED = 255, /**< header value when the real code is > 255 */
};

/** Request header (20 bytes on the wire, little-endian, no padding). */
struct tide_mc_req_hdr {
	uint8_t magic;          /**< TIDE_MC_MAGIC */
	uint8_t version;        /**< 0; the server rejects > 0 */
	uint8_t serialize_type; /**< 0 = struct_pack, the only one supported */
	uint8_t msg_type;       /**< 0, not interpreted */
	uint32_t seq_num;       /**< echoed in the response */
	uint32_t function_id;   /**< MD5-derived id, see tide_mc_fn_id() */
	uint32_t length;        /**< body bytes following the header */
	uint32_t attach_length; /**< attachment bytes after the body; Mooncake sends 0 */
};

/** Response header (16 bytes on the wire). */
struct tide_mc_resp_hdr {
	uint8_t magic;          /**< TIDE_MC_MAGIC (the real client does not check it) */
	uint8_t version;        /**< 0 */
	uint8_t err_code;       /**< enum tide_mc_errc; 0 = body is the result */
	uint8_t msg_type;       /**< 0 */
	uint32_t seq_num;       /**< copied from the request */
	uint32_t length;        /**< body bytes */
	uint32_t attach_length; /**< 0 */
};

/**
 * What went wrong in a decode, for logs and for the error frame a server sends.
 * Every decoder takes an optional (may be NULL) pointer to one.
 */
struct tide_mc_err {
	uint8_t errc;  /**< coro_rpc errc a server should answer with (4, 11), or 0
			    when the connection must be closed (bad header) */
	size_t offset; /**< byte offset of the problem in the buffer given to the call
			    (frame functions: from the frame start) */
	char msg[256]; /**< what and where, e.g. "PutStart request: offset 57:
			    config.preferred_segments[3]: string length 300 exceeds the 12
			    bytes left" (the offset in the text is from the body start) */
};

/**
 * Parse a request header.
 * \param buf  At least `len` readable bytes.
 * \param len  Bytes available.
 * \param[out] out  Parsed header (valid on 0; on -EPROTO it holds the raw fields).
 * \param[out] err  Optional; filled on failure.
 * \return 0; -EAGAIN fewer than 20 bytes; -EPROTO bad magic, version > 0 or
 *         serialize_type != 0 (a stock server closes the connection); -EINVAL NULL args.
 * Thread: any.
 */
int tide_mc_req_hdr_parse(const void *buf, size_t len, struct tide_mc_req_hdr *out,
			  struct tide_mc_err *err);

/**
 * Write a request header (20 bytes) into `out`. Fields are copied verbatim.
 * Thread: any.
 */
void tide_mc_req_hdr_build(const struct tide_mc_req_hdr *h, uint8_t out[TIDE_MC_REQ_HDR_LEN]);

/**
 * Parse a response header.
 * \return 0; -EAGAIN fewer than 16 bytes; -EPROTO bad magic or version; -EINVAL NULL args.
 * Thread: any.
 */
int tide_mc_resp_hdr_parse(const void *buf, size_t len, struct tide_mc_resp_hdr *out,
			   struct tide_mc_err *err);

/** Write a response header (16 bytes) into `out`. Thread: any. */
void tide_mc_resp_hdr_build(const struct tide_mc_resp_hdr *h, uint8_t out[TIDE_MC_RESP_HDR_LEN]);

/* ------------------------------------------------------------------------------------------ */
/* Function table                                                                              */
/* ------------------------------------------------------------------------------------------ */

/**
 * Every handler a stock master registers at HEAD (64). The first ones (up to
 * TIDE_MC_FN_BATCH_REPLICA_CLEAR) have a codec here; the others are
 * known by id only, so a server can tell "registered, feature off" from
 * "unknown id" (see struct tide_mc_fn_info). Not registered anywhere, hence
 * absent: CalcCacheStats, ListTenantQuotaSnapshots, GetReplicaListForAdmin.
 */
enum tide_mc_fn {
	/* Seen in the reference capture. */
	TIDE_MC_FN_SERVICE_READY,
	TIDE_MC_FN_GET_STORAGE_CONFIG,
	TIDE_MC_FN_MOUNT_SEGMENT,
	TIDE_MC_FN_REMOUNT_SEGMENT,
	TIDE_MC_FN_UNMOUNT_SEGMENT,
	TIDE_MC_FN_PING,
	TIDE_MC_FN_EXIST_KEY,
	TIDE_MC_FN_GET_REPLICA_LIST,
	TIDE_MC_FN_PUT_START,
	TIDE_MC_FN_PUT_END,
	TIDE_MC_FN_REMOVE,
	TIDE_MC_FN_FETCH_TASKS,
	/* Not in the capture; layouts from the spec. */
	TIDE_MC_FN_GRACEFUL_UNMOUNT_SEGMENT,
	TIDE_MC_FN_BATCH_EXIST_KEY,
	TIDE_MC_FN_BATCH_GET_REPLICA_LIST,
	TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX,
	TIDE_MC_FN_PUT_REVOKE,
	TIDE_MC_FN_BATCH_PUT_START,
	TIDE_MC_FN_BATCH_PUT_END,
	TIDE_MC_FN_BATCH_PUT_REVOKE,
	TIDE_MC_FN_UPSERT_START,
	TIDE_MC_FN_UPSERT_END,
	TIDE_MC_FN_UPSERT_REVOKE,
	TIDE_MC_FN_BATCH_UPSERT_START,
	TIDE_MC_FN_BATCH_UPSERT_END,
	TIDE_MC_FN_BATCH_UPSERT_REVOKE,
	TIDE_MC_FN_BATCH_REMOVE,
	TIDE_MC_FN_REMOVE_BY_REGEX,
	TIDE_MC_FN_REMOVE_ALL,
	TIDE_MC_FN_GET_FSDIR,
	TIDE_MC_FN_BATCH_QUERY_IP,
	TIDE_MC_FN_QUERY_SEGMENT_STATUS,
	TIDE_MC_FN_QUERY_SEGMENT_STATUS_BY_ID,
	/* Tide's extension (one-round-trip puts), registered by Tide's master only:
	 * a stock master answers errc 11 (not registered) and a Tide client falls
	 * back to PutStart/PutEnd. */
	TIDE_MC_FN_TIDE_LEASE_GRANT,
	TIDE_MC_FN_TIDE_LEASE_COMMIT,
	TIDE_MC_FN_TIDE_LEASE_RELEASE,
	/* Replica administration (stock's batch_replica_clear); last of those with a codec. */
	TIDE_MC_FN_BATCH_REPLICA_CLEAR,
	/* Registered by a stock master, no codec (optional features). */
	TIDE_MC_FN_MOUNT_NOF_SEGMENT,
	TIDE_MC_FN_REMOUNT_NOF_SEGMENT,
	TIDE_MC_FN_UNMOUNT_NOF_SEGMENT,
	TIDE_MC_FN_GET_ALL_NOF_SEGMENTS,
	TIDE_MC_FN_GET_NOF_SEGMENTS_BY_NAME,
	TIDE_MC_FN_MOUNT_LOCAL_DISK_SEGMENT,
	TIDE_MC_FN_UNMOUNT_LOCAL_DISK_SEGMENT,
	TIDE_MC_FN_OFFLOAD_OBJECT_HEARTBEAT,
	TIDE_MC_FN_REPORT_SSD_CAPACITY,
	TIDE_MC_FN_NOTIFY_OFFLOAD_SUCCESS,
	TIDE_MC_FN_PROMOTION_OBJECT_HEARTBEAT,
	TIDE_MC_FN_PROMOTION_ALLOC_START,
	TIDE_MC_FN_NOTIFY_PROMOTION_SUCCESS,
	TIDE_MC_FN_NOTIFY_PROMOTION_FAILURE,
	TIDE_MC_FN_COPY_START,
	TIDE_MC_FN_COPY_END,
	TIDE_MC_FN_COPY_REVOKE,
	TIDE_MC_FN_MOVE_START,
	TIDE_MC_FN_MOVE_END,
	TIDE_MC_FN_MOVE_REVOKE,
	TIDE_MC_FN_DYNAMIC_REPLICA_COPY_START,
	TIDE_MC_FN_DYNAMIC_REPLICA_COPY_END,
	TIDE_MC_FN_DYNAMIC_REPLICA_COPY_REVOKE,
	TIDE_MC_FN_EVICT_DISK_REPLICA,
	TIDE_MC_FN_BATCH_EVICT_DISK_REPLICA,
	TIDE_MC_FN_POLL_REMOVE_ALL,
	TIDE_MC_FN_CREATE_COPY_TASK,
	TIDE_MC_FN_CREATE_MOVE_TASK,
	TIDE_MC_FN_QUERY_TASK,
	TIDE_MC_FN_MARK_TASK_TO_COMPLETE,
	TIDE_MC_FN_COUNT
};

/** Number of functions with a request/response codec (a prefix of enum tide_mc_fn). */
#define TIDE_MC_FN_CODEC_COUNT (TIDE_MC_FN_BATCH_REPLICA_CLEAR + 1)

/** Static facts about one registered function. */
struct tide_mc_fn_info {
	const char *name;       /**< "Ping"; the id hashes TIDE_MC_FN_PREFIX + name */
	uint32_t id;            /**< function id (MD5-BE32 of the qualified name) */
	bool has_codec;         /**< request and response structs exist here */
	bool head_only;         /**< registered at HEAD but not by v0.3.12.post1 */
	const char *feature;    /**< feature that uses it ("core", "nof", "offload", ...) */
	const char *off_answer; /**< what a stock master answers when that feature is off,
				     as far as the spec says (else "not specified") */
	bool tide_only;         /**< Tide's extension: no stock master registers it */
};

/**
 * Compute the id tables (MD5 via libcrypto EVP) once. Every other function
 * calls it implicitly; call it at start-up to catch failure early.
 * \return 0; -ENOTSUP MD5 unavailable (e.g. a FIPS-only libcrypto); -EOVERFLOW
 *         a descriptor's literal exceeds the internal bound (a table bug).
 * Thread: any; concurrent first calls are serialized (pthread_once).
 */
int tide_mc_codec_init(void);

/**
 * Static info of a function.
 * \return Pointer to a static entry; NULL if fn >= TIDE_MC_FN_COUNT or init failed.
 * Thread: any.
 */
const struct tide_mc_fn_info *tide_mc_fn_info(enum tide_mc_fn fn);

/**
 * Look a function up by wire id.
 * \param[out] out  The function on 0.
 * \return 0; -ENOENT the id is not registered by a stock master (answer errc 11);
 *         -ENOTSUP init failed.
 * Thread: any.
 */
int tide_mc_fn_from_id(uint32_t id, enum tide_mc_fn *out);

/**
 * Function id of an arbitrary name: MD5-BE32(TIDE_MC_FN_PREFIX + name).
 * \return 0 and *out set; -EINVAL NULL or too long a name; -ENOTSUP no MD5.
 * Thread: any.
 */
int tide_mc_fn_id_of_name(const char *name, uint32_t *out);

/* ------------------------------------------------------------------------------------------ */
/* Mooncake value types (HEAD names; spec 3.1)                                                 */
/* ------------------------------------------------------------------------------------------ */

/** Layout variant of the Mooncake types. */
enum tide_mc_layout {
	TIDE_MC_LAYOUT_HEAD = 0,  /**< Mooncake 3b5a5941 (the capture's version) */
	TIDE_MC_LAYOUT_V0312 = 1, /**< release v0.3.12.post1 */
	TIDE_MC_LAYOUT_COUNT
};

/** Mooncake ErrorCode values used by the store (int32 on the wire; spec 3.1 has all). */
enum tide_mc_error_code {
	TIDE_MC_EC_OK = 0,
	TIDE_MC_EC_INTERNAL_ERROR = -1,
	TIDE_MC_EC_SEGMENT_NOT_FOUND = -101,
	TIDE_MC_EC_SEGMENT_ALREADY_EXISTS = -102,
	TIDE_MC_EC_CLIENT_NOT_FOUND = -103,
	TIDE_MC_EC_NO_AVAILABLE_HANDLE = -200,
	TIDE_MC_EC_INVALID_VERSION = -300,
	TIDE_MC_EC_INVALID_KEY = -400,
	TIDE_MC_EC_INVALID_PARAMS = -600,
	TIDE_MC_EC_ILLEGAL_CLIENT = -601,
	TIDE_MC_EC_INVALID_WRITE = -700,
	TIDE_MC_EC_INVALID_REPLICA = -702,
	TIDE_MC_EC_REPLICA_IS_NOT_READY = -703,
	TIDE_MC_EC_OBJECT_NOT_FOUND = -704,
	TIDE_MC_EC_OBJECT_ALREADY_EXISTS = -705,
	TIDE_MC_EC_OBJECT_HAS_LEASE = -706,
	TIDE_MC_EC_LEASE_EXPIRED = -707,
	TIDE_MC_EC_OBJECT_HAS_REPLICATION_TASK = -708,
	TIDE_MC_EC_TRANSFER_FAIL = -800,
	TIDE_MC_EC_RPC_FAIL = -900,
	TIDE_MC_EC_UNAVAILABLE_IN_CURRENT_MODE = -1011,
	TIDE_MC_EC_NOT_SUPPORTED = -1012,
};

/** ReplicaType (int32). */
enum tide_mc_replica_type {
	TIDE_MC_REPLICA_MEMORY = 0,
	TIDE_MC_REPLICA_DISK = 1,
	TIDE_MC_REPLICA_LOCAL_DISK = 2,
	TIDE_MC_REPLICA_NOF_SSD = 3,
	TIDE_MC_REPLICA_ALL = 4,
	TIDE_MC_REPLICA_DFS = 100,
};

/** ReplicaStatus (int32). */
enum tide_mc_replica_status {
	TIDE_MC_RS_UNDEFINED = 0,
	TIDE_MC_RS_INITIALIZED = 1,
	TIDE_MC_RS_PROCESSING = 2,
	TIDE_MC_RS_COMPLETE = 3,
	TIDE_MC_RS_REMOVED = 4,
	TIDE_MC_RS_FAILED = 5,
};

/** ClientStatus (int32) in a Ping reply. */
enum tide_mc_client_status {
	TIDE_MC_CLIENT_UNDEFINED = 0,
	TIDE_MC_CLIENT_OK = 1,
	TIDE_MC_CLIENT_NEED_REMOUNT = 2,
};

/** SoftPinAction (uint8, HEAD only). */
enum tide_mc_soft_pin_action {
	TIDE_MC_SOFT_PIN_PRESERVE = 0,
	TIDE_MC_SOFT_PIN_ENABLE = 1,
	TIDE_MC_SOFT_PIN_DISABLE = 2,
};

/** Which alternative of Replica::Descriptor's variant is active (variant index). */
enum tide_mc_replica_kind {
	TIDE_MC_RK_MEMORY = 0,
	TIDE_MC_RK_NOF = 1,
	TIDE_MC_RK_DISK = 2,
	TIDE_MC_RK_LOCAL_DISK = 3,
	TIDE_MC_RK_DFS = 4, /**< HEAD only; encoding it in the V0312 layout fails (-EINVAL) */
};

/**
 * std::string. After a decode `ptr` is a heap copy of `len` bytes plus a NUL
 * (never NULL; it may hold embedded NULs, trust `len`). For encoding, `ptr`
 * may be NULL only when len == 0.
 */
struct tide_mc_str {
	char *ptr;
	size_t len;
};

/** UUID = std::pair<uint64_t, uint64_t>, 16 raw bytes. */
struct tide_mc_uuid {
	uint64_t first;
	uint64_t second;
};

/** std::optional<uint64_t>. */
struct tide_mc_opt_u64 {
	bool has;
	uint64_t val;
};

/* std::vector<T>: `v` points to `n` elements (NULL when n == 0 after a decode). */
struct tide_mc_str_vec {
	struct tide_mc_str *v;
	size_t n;
};
struct tide_mc_u64_vec {
	uint64_t *v;
	size_t n;
};
struct tide_mc_uuid_vec {
	struct tide_mc_uuid *v;
	size_t n;
};

/** std::optional<std::vector<std::string>>. */
struct tide_mc_opt_str_vec {
	bool has;
	struct tide_mc_str_vec val;
};

/** Segment (MountSegment argument). */
struct tide_mc_segment {
	struct tide_mc_uuid id;
	struct tide_mc_str name;        /**< client's local_hostname */
	uint64_t base;                  /**< virtual address of the buffer in the client */
	uint64_t size;                  /**< bytes */
	struct tide_mc_str te_endpoint; /**< transfer-engine segment name */
	struct tide_mc_str protocol;    /**< "tcp", "rdma", ... */
	struct tide_mc_str host_id;     /**< may be empty */
};
struct tide_mc_segment_vec {
	struct tide_mc_segment *v;
	size_t n;
};

/**
 * ReplicateConfig. Fields marked HEAD / V0312 exist in that layout only and
 * are ignored by (and left zero by) the other.
 */
struct tide_mc_replicate_config {
	uint64_t replica_num;
	uint64_t nof_replica_num;
	uint64_t dfs_replica_num;               /**< HEAD */
	uint8_t soft_pin_action;                /**< HEAD, enum tide_mc_soft_pin_action */
	struct tide_mc_opt_u64 soft_pin_ttl_ms; /**< HEAD */
	bool with_soft_pin;                     /**< V0312 */
	bool with_hard_pin;
	struct tide_mc_str_vec preferred_segments;
	struct tide_mc_str preferred_segment;
	struct tide_mc_str_vec preferred_nof_segments;
	bool prefer_alloc_in_same_node;
	uint8_t data_type; /**< ObjectDataType */
	struct tide_mc_str host_id;
	struct tide_mc_opt_str_vec group_ids;
};

/** AllocatedBuffer::Descriptor (memory and NoF replicas). */
struct tide_mc_buffer_desc {
	uint64_t size;           /**< object length */
	uint64_t buffer_address; /**< absolute address in the owning client */
	struct tide_mc_str protocol;
	struct tide_mc_str transport_endpoint;
};

/** DiskDescriptor. */
struct tide_mc_disk_desc {
	struct tide_mc_str file_path;
	uint64_t object_size;
};

/** LocalDiskDescriptor. */
struct tide_mc_local_disk_desc {
	struct tide_mc_uuid client_id;
	uint64_t object_size;
	struct tide_mc_str transport_endpoint;
};

/** DistributedFSDescriptor (HEAD only). */
struct tide_mc_dfs_desc {
	struct tide_mc_str file_path;
	uint64_t offset;
	uint64_t object_size;
	uint64_t aligned_size;
	int32_t shard_idx;
};

/** Replica::Descriptor. */
struct tide_mc_replica_desc {
	uint64_t id;
	uint8_t kind; /**< enum tide_mc_replica_kind: selects the member of `u` */
	union {
		struct tide_mc_buffer_desc memory;
		struct tide_mc_buffer_desc nof;
		struct tide_mc_disk_desc disk;
		struct tide_mc_local_disk_desc local_disk;
		struct tide_mc_dfs_desc dfs;
	} u;
	int32_t status; /**< enum tide_mc_replica_status */
};
struct tide_mc_replica_desc_vec {
	struct tide_mc_replica_desc *v;
	size_t n;
};

/** ObjectMeta (PutEnd argument at HEAD; V0312 sends only the key). */
struct tide_mc_object_meta {
	struct tide_mc_str key;
	struct tide_mc_opt_u64 object_checksum; /**< HEAD */
};
struct tide_mc_object_meta_vec {
	struct tide_mc_object_meta *v;
	size_t n;
};

/** PingResponse. */
struct tide_mc_ping_info {
	int64_t view_version_id;
	int32_t client_status; /**< enum tide_mc_client_status */
};

/** GetReplicaListResponse. */
struct tide_mc_replica_list {
	struct tide_mc_replica_desc_vec replicas;
	uint64_t lease_ttl_ms;
	struct tide_mc_opt_u64 object_checksum; /**< HEAD */
};

/**
 * TideLease (TideLeaseGrant result, Tide's extension): `buf.size` bytes at
 * `buf.buffer_address` of one segment that the client fills itself, then turns
 * into objects with TideLeaseCommit (offsets from the lease's start, multiples
 * of `granule`). The lease ends `ttl_ms` after its grant or last commit.
 */
struct tide_mc_lease {
	uint64_t id;
	uint64_t ttl_ms;
	uint64_t granule;
	struct tide_mc_buffer_desc buf;
};

/** GetStorageConfigResponse. */
struct tide_mc_storage_config {
	struct tide_mc_str fsdir;
	bool enable_disk_eviction;
	uint64_t quota_bytes;
};

/** TaskAssignment (FetchTasks result element). */
struct tide_mc_task_assignment {
	struct tide_mc_uuid id;
	int32_t type; /**< TaskType */
	struct tide_mc_str payload;
	int64_t created_at_ms_epoch;
	uint32_t max_retry_attempts;
};
struct tide_mc_task_assignment_vec {
	struct tide_mc_task_assignment *v;
	size_t n;
};

/** One entry of GetReplicaListByRegex's unordered_map<string, vector<Descriptor>>. */
struct tide_mc_regex_entry {
	struct tide_mc_str key;
	struct tide_mc_replica_desc_vec replicas;
};
struct tide_mc_regex_entry_vec {
	struct tide_mc_regex_entry *v;
	size_t n;
};

/** One entry of BatchQueryIp's unordered_map<UUID, vector<string>>. */
struct tide_mc_ip_entry {
	struct tide_mc_uuid client_id;
	struct tide_mc_str_vec ips;
};
struct tide_mc_ip_entry_vec {
	struct tide_mc_ip_entry *v;
	size_t n;
};

/*
 * tl::expected<T, ErrorCode>: `ok` true -> `val` is the value; false -> `err`
 * is the (negative) ErrorCode and `val` is unused.
 */
struct tide_mc_exp_void {
	bool ok;
	int32_t err;
};
struct tide_mc_exp_void_vec {
	struct tide_mc_exp_void *v;
	size_t n;
};
struct tide_mc_exp_bool {
	bool ok;
	int32_t err;
	bool val;
};
struct tide_mc_exp_bool_vec {
	struct tide_mc_exp_bool *v;
	size_t n;
};
struct tide_mc_exp_i64 {
	bool ok;
	int32_t err;
	int64_t val;
};
struct tide_mc_exp_i32 {
	bool ok;
	int32_t err;
	int32_t val;
};
struct tide_mc_exp_str {
	bool ok;
	int32_t err;
	struct tide_mc_str val;
};
struct tide_mc_exp_str_vec {
	bool ok;
	int32_t err;
	struct tide_mc_str_vec val;
};
struct tide_mc_exp_ping {
	bool ok;
	int32_t err;
	struct tide_mc_ping_info val;
};
struct tide_mc_exp_lease {
	bool ok;
	int32_t err;
	struct tide_mc_lease val;
};
struct tide_mc_exp_storage_config {
	bool ok;
	int32_t err;
	struct tide_mc_storage_config val;
};
struct tide_mc_exp_replica_list {
	bool ok;
	int32_t err;
	struct tide_mc_replica_list val;
};
struct tide_mc_exp_replica_list_vec {
	struct tide_mc_exp_replica_list *v;
	size_t n;
};
struct tide_mc_exp_replicas {
	bool ok;
	int32_t err;
	struct tide_mc_replica_desc_vec val;
};
struct tide_mc_exp_replicas_vec {
	struct tide_mc_exp_replicas *v;
	size_t n;
};
struct tide_mc_exp_regex_map {
	bool ok;
	int32_t err;
	struct tide_mc_regex_entry_vec val;
};
struct tide_mc_exp_ip_map {
	bool ok;
	int32_t err;
	struct tide_mc_ip_entry_vec val;
};
struct tide_mc_exp_tasks {
	bool ok;
	int32_t err;
	struct tide_mc_task_assignment_vec val;
};

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/** Ping(client_id); also QuerySegmentStatusById(segment_id) uses `id`. */
struct tide_mc_uuid_req {
	struct tide_mc_uuid id;
};
/** MountSegment(segment, client_id). */
struct tide_mc_mount_segment_req {
	struct tide_mc_segment segment;
	struct tide_mc_uuid client_id;
};
/** ReMountSegment(segments, client_id). */
struct tide_mc_remount_segment_req {
	struct tide_mc_segment_vec segments;
	struct tide_mc_uuid client_id;
};
/** UnmountSegment(segment_id, client_id); GracefulUnmountSegment adds grace_period_ms. */
struct tide_mc_unmount_segment_req {
	struct tide_mc_uuid segment_id;
	struct tide_mc_uuid client_id;
	uint64_t grace_period_ms; /**< GracefulUnmountSegment only */
};
/** ExistKey / GetReplicaList (key, tenant_id); GetReplicaListByRegex (key = regex). */
struct tide_mc_key_req {
	struct tide_mc_str key;
	struct tide_mc_str tenant_id;
};
/** BatchExistKey / BatchGetReplicaList (keys, tenant_id). */
struct tide_mc_keys_req {
	struct tide_mc_str_vec keys;
	struct tide_mc_str tenant_id;
};
/** PutStart / UpsertStart. */
struct tide_mc_put_start_req {
	struct tide_mc_uuid client_id;
	struct tide_mc_str key;
	uint64_t slice_length; /**< total value bytes */
	struct tide_mc_replicate_config config;
	struct tide_mc_str tenant_id;
};
/** PutEnd / UpsertEnd (V0312 sends meta.key only). */
struct tide_mc_put_end_req {
	struct tide_mc_uuid client_id;
	struct tide_mc_object_meta meta;
	int32_t replica_type; /**< enum tide_mc_replica_type */
	struct tide_mc_str tenant_id;
};
/** PutRevoke / UpsertRevoke. */
struct tide_mc_put_revoke_req {
	struct tide_mc_uuid client_id;
	struct tide_mc_str key;
	int32_t replica_type;
	struct tide_mc_str tenant_id;
};
/** BatchPutStart / BatchUpsertStart. */
struct tide_mc_batch_put_start_req {
	struct tide_mc_uuid client_id;
	struct tide_mc_str_vec keys;
	struct tide_mc_u64_vec slice_lengths;
	struct tide_mc_replicate_config config;
	struct tide_mc_str tenant_id;
};
/** BatchPutEnd (V0312: keys only) / BatchUpsertEnd (no replica_type on the wire). */
struct tide_mc_batch_put_end_req {
	struct tide_mc_uuid client_id;
	struct tide_mc_object_meta_vec metas;
	int32_t replica_type; /**< BatchPutEnd only */
	struct tide_mc_str tenant_id;
};
/** BatchPutRevoke / BatchUpsertRevoke (no replica_type on the wire). */
struct tide_mc_batch_put_revoke_req {
	struct tide_mc_uuid client_id;
	struct tide_mc_str_vec keys;
	int32_t replica_type; /**< BatchPutRevoke only */
	struct tide_mc_str tenant_id;
};
/** Remove / RemoveByRegex (key = regex). */
struct tide_mc_remove_req {
	struct tide_mc_str key;
	bool force;
	struct tide_mc_str tenant_id;
};
/** BatchRemove. */
struct tide_mc_batch_remove_req {
	struct tide_mc_str_vec keys;
	bool force;
	struct tide_mc_str tenant_id;
};
/** RemoveAll. */
struct tide_mc_remove_all_req {
	bool force;
	struct tide_mc_str tenant_id;
};
/** BatchQueryIp(client_ids). */
struct tide_mc_batch_query_ip_req {
	struct tide_mc_uuid_vec client_ids;
};
/** QuerySegmentStatus(segment_name). */
struct tide_mc_query_segment_status_req {
	struct tide_mc_str segment_name;
};
/** FetchTasks(client_id, batch_size). */
struct tide_mc_fetch_tasks_req {
	struct tide_mc_uuid client_id;
	uint64_t batch_size;
};

/** TideLeaseGrant(client_id, size, config) (Tide's extension). */
struct tide_mc_lease_grant_req {
	struct tide_mc_uuid client_id;
	uint64_t size;
	struct tide_mc_replicate_config config; /**< HEAD layout */
};
/** TideLeaseCommit(client_id, lease_id, keys, offsets, sizes, config) (Tide's extension). */
struct tide_mc_lease_commit_req {
	struct tide_mc_uuid client_id;
	uint64_t lease_id;
	struct tide_mc_str_vec keys;
	struct tide_mc_u64_vec offsets;         /**< from the lease's start, one per key */
	struct tide_mc_u64_vec sizes;           /**< object bytes, one per key */
	struct tide_mc_replicate_config config; /**< HEAD layout; group_ids: one per key */
};
/** TideLeaseRelease(client_id, lease_id) (Tide's extension). */
struct tide_mc_lease_release_req {
	struct tide_mc_uuid client_id;
	uint64_t lease_id;
};
/** BatchReplicaClear(object_keys, client_id, segment_name): no tenant on the wire. */
struct tide_mc_batch_replica_clear_req {
	struct tide_mc_str_vec keys;
	struct tide_mc_uuid client_id;
	struct tide_mc_str segment_name; /**< "" = every replica (the whole object) */
};

/**
 * A decoded (or to-be-encoded) request. ServiceReady, GetStorageConfig and
 * GetFsdir take no argument (empty body) and use no member of `u`.
 */
struct tide_mc_req {
	enum tide_mc_fn fn;
	/** Layout of the body. After a decode: the one whose type hash matched;
	    TIDE_MC_LAYOUT_HEAD when the body is the same in every layout, which
	    `layout_exact` = false then says. */
	enum tide_mc_layout layout;
	bool layout_exact;
	union {
		struct tide_mc_uuid_req ping;                       /**< Ping */
		struct tide_mc_uuid_req query_segment_status_by_id; /**< QuerySegmentStatusById */
		struct tide_mc_mount_segment_req mount_segment;
		struct tide_mc_remount_segment_req remount_segment;
		struct tide_mc_unmount_segment_req unmount_segment; /**< also GracefulUnmount */
		struct tide_mc_key_req key; /**< ExistKey, GetReplicaList, GetReplicaListByRegex */
		struct tide_mc_keys_req keys;             /**< BatchExistKey, BatchGetReplicaList */
		struct tide_mc_put_start_req put_start;   /**< PutStart, UpsertStart */
		struct tide_mc_put_end_req put_end;       /**< PutEnd, UpsertEnd */
		struct tide_mc_put_revoke_req put_revoke; /**< PutRevoke, UpsertRevoke */
		struct tide_mc_batch_put_start_req batch_put_start; /**< Batch{Put,Upsert}Start */
		struct tide_mc_batch_put_end_req batch_put_end;     /**< Batch{Put,Upsert}End */
		struct tide_mc_batch_put_revoke_req
			batch_put_revoke;         /**< Batch{Put,Upsert}Revoke */
		struct tide_mc_remove_req remove; /**< Remove, RemoveByRegex */
		struct tide_mc_batch_remove_req batch_remove;
		struct tide_mc_remove_all_req remove_all;
		struct tide_mc_batch_query_ip_req batch_query_ip;
		struct tide_mc_query_segment_status_req query_segment_status;
		struct tide_mc_fetch_tasks_req fetch_tasks;
		struct tide_mc_lease_grant_req lease_grant;
		struct tide_mc_lease_commit_req lease_commit;
		struct tide_mc_lease_release_req lease_release;
		struct tide_mc_batch_replica_clear_req batch_replica_clear;
	} u;
};

/* ------------------------------------------------------------------------------------------ */
/* Responses                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/** A decoded (or to-be-encoded) result; the member of `u` follows `fn`. */
struct tide_mc_resp {
	enum tide_mc_fn fn;
	enum tide_mc_layout layout; /**< as in struct tide_mc_req */
	bool layout_exact;
	union {
		/** ServiceReady, GetFsdir. */
		struct tide_mc_exp_str str;
		/** GetStorageConfig. */
		struct tide_mc_exp_storage_config storage_config;
		/** Ping. */
		struct tide_mc_exp_ping ping;
		/** ExistKey. */
		struct tide_mc_exp_bool exist;
		/** BatchExistKey. */
		struct tide_mc_exp_bool_vec batch_exist;
		/** MountSegment, ReMountSegment, UnmountSegment, GracefulUnmountSegment,
		    PutEnd, PutRevoke, UpsertEnd, UpsertRevoke, Remove, TideLeaseRelease. */
		struct tide_mc_exp_void status;
		/** BatchPut{End,Revoke}, BatchUpsert{End,Revoke}, BatchRemove, TideLeaseCommit. */
		struct tide_mc_exp_void_vec batch_status;
		/** GetReplicaList. */
		struct tide_mc_exp_replica_list replica_list;
		/** BatchGetReplicaList. */
		struct tide_mc_exp_replica_list_vec batch_replica_list;
		/** GetReplicaListByRegex. */
		struct tide_mc_exp_regex_map regex;
		/** PutStart, UpsertStart. */
		struct tide_mc_exp_replicas put_start;
		/** BatchPutStart, BatchUpsertStart. */
		struct tide_mc_exp_replicas_vec batch_put_start;
		/** RemoveByRegex (count). */
		struct tide_mc_exp_i64 count;
		/** RemoveAll: a bare `long`, not an expected. */
		int64_t removed;
		/** BatchQueryIp. */
		struct tide_mc_exp_ip_map ip_map;
		/** QuerySegmentStatus, QuerySegmentStatusById (SegmentStatus). */
		struct tide_mc_exp_i32 segment_status;
		/** FetchTasks. */
		struct tide_mc_exp_tasks tasks;
		/** TideLeaseGrant (TideLeaseCommit answers batch_status, TideLeaseRelease status).
		 */
		struct tide_mc_exp_lease lease;
		/** BatchReplicaClear: the keys cleared, in request order. */
		struct tide_mc_exp_str_vec cleared;
	} u;
};

/* ------------------------------------------------------------------------------------------ */
/* Bodies and frames                                                                           */
/* ------------------------------------------------------------------------------------------ */

/** Growable output buffer; start from {0}. Encoders append to it. */
struct tide_mc_buf {
	uint8_t *data; /**< malloc'd, owned by the buffer */
	size_t len;    /**< bytes written */
	size_t cap;    /**< bytes allocated */
};

/** Release a buffer's memory and zero it. NULL-safe. Thread: the buffer's owner. */
void tide_mc_buf_release(struct tide_mc_buf *buf);

/* Encoder flags. */
/** Put metainfo bit 2 and the type literal in the body, as a stock release build does. */
#define TIDE_MC_ENC_LITERAL (1u << 0)
/** Minimum container-length width (the natural minimum is used when larger). */
#define TIDE_MC_ENC_WIDTH_2 (1u << 1)
#define TIDE_MC_ENC_WIDTH_4 (2u << 1)
#define TIDE_MC_ENC_WIDTH_8 (3u << 1)
/** What a stock master / client sends: literal, smallest width. */
#define TIDE_MC_ENC_STOCK TIDE_MC_ENC_LITERAL

/**
 * Decode a request body (the bytes after the 20-byte header).
 * \param fn    Function the header's id maps to.
 * \param body  `len` bytes; not retained.
 * \param[out] out  Zeroed, then filled; free with tide_mc_req_free() on 0.
 * \param[out] err  Optional; on failure errc 4 (-EBADMSG) or 11 (-ENOTSUP), message, offset.
 * \return 0; -EBADMSG malformed body or type hash of no known layout (answer
 *         errc 4); -ENOTSUP fn has no codec (answer errc 11, or a feature-off
 *         reply); -EINVAL fn out of range or NULL args; -ENOMEM.
 * Trailing bytes after the value are ignored, as struct_pack does.
 * Thread: any.
 */
int tide_mc_req_decode(enum tide_mc_fn fn, const void *body, size_t len, struct tide_mc_req *out,
		       struct tide_mc_err *err);

/**
 * Append the struct_pack body of a request (no header) to `out`.
 * \param req    fn and layout select the shape; fields outside that layout are ignored.
 * \param flags  TIDE_MC_ENC_*.
 * \return 0; -EINVAL fn without codec, bad layout, unknown flag bits, NULL
 *         string/array pointer with a nonzero length, or a variant kind the
 *         layout lacks; -ENOTSUP codec init failed; -ENOMEM;
 *         -EMSGSIZE body would exceed 4 GiB - 1.
 * On failure `out->len` is unchanged.
 * Thread: any.
 */
int tide_mc_req_encode(const struct tide_mc_req *req, unsigned flags, struct tide_mc_buf *out);

/**
 * Release the heap memory of a decoded request and zero it. NULL-safe, idempotent.
 * Thread: the owner of `req`.
 */
void tide_mc_req_free(struct tide_mc_req *req);

/** Decode a result body. Same contract as tide_mc_req_decode(). Thread: any. */
int tide_mc_resp_decode(enum tide_mc_fn fn, const void *body, size_t len, struct tide_mc_resp *out,
			struct tide_mc_err *err);

/** Append the body of a result. Same contract as tide_mc_req_encode(). Thread: any. */
int tide_mc_resp_encode(const struct tide_mc_resp *resp, unsigned flags, struct tide_mc_buf *out);

/** Release a decoded result. NULL-safe, idempotent. Thread: the owner. */
void tide_mc_resp_free(struct tide_mc_resp *resp);

/**
 * Decode one complete request frame (header + body) from the start of `buf`.
 * \param[out] hdr       The header (valid whenever the header parsed, even if the body failed,
 *                       so the caller can echo seq_num in an error frame).
 * \param[out] req       The request on 0 (free with tide_mc_req_free()).
 * \param[out] consumed  Bytes of the frame (header + body + attachment) when the
 *                       header parsed and the frame is complete, whatever the body's fate.
 * \param[out] err       Optional; errc tells what to answer.
 * \return 0; -EAGAIN frame incomplete (read more); -EPROTO bad header (close);
 *         -ENOENT unknown function id (errc 11); -ENOTSUP registered function
 *         without codec (errc 11 or a feature-off reply); -EBADMSG body malformed
 *         (errc 4); -EINVAL NULL args; -ENOMEM.
 * Thread: any.
 */
int tide_mc_req_frame_decode(const void *buf, size_t len, struct tide_mc_req_hdr *hdr,
			     struct tide_mc_req *req, size_t *consumed, struct tide_mc_err *err);

/**
 * Append a complete request frame (header + body) for `req` with sequence number `seq`.
 * \return as tide_mc_req_encode(). Thread: any.
 */
int tide_mc_req_frame_encode(const struct tide_mc_req *req, uint32_t seq, unsigned flags,
			     struct tide_mc_buf *out);

/**
 * Append a complete success response frame (err_code 0) for `resp`.
 * \return as tide_mc_resp_encode(). Thread: any.
 */
int tide_mc_resp_frame_encode(const struct tide_mc_resp *resp, uint32_t seq, unsigned flags,
			      struct tide_mc_buf *out);

/**
 * Append a transport-error response frame, as coro_rpc builds it: errc <= 255
 * -> header err_code = errc, body struct_pack(std::string msg); errc > 255 ->
 * err_code 255, body struct_pack(std::pair<uint16_t, std::string>).
 * E.g. (seq, 4, "invalid rpc arg") or (seq, 11, "the rpc function not registered").
 * \param msg  NUL-terminated text; NULL means "".
 * \return 0; -EINVAL errc == 0; -ENOMEM. Thread: any.
 */
int tide_mc_err_frame_encode(uint32_t seq, uint16_t errc, const char *msg, unsigned flags,
			     struct tide_mc_buf *out);

/**
 * Decode one complete response frame to a request of function `fn`.
 * \param[out] hdr       Header (valid when it parsed).
 * \param[out] resp      Result on 0 (free with tide_mc_resp_free()).
 * \param[out] consumed  Frame bytes, as in tide_mc_req_frame_decode().
 * \param[out] err       Optional. For -EREMOTEIO: errc = the remote errc (low 8
 *                       bits when extended) and msg = the remote message.
 * \return 0; -EAGAIN incomplete; -EPROTO bad header; -EREMOTEIO the header
 *         carries a coro_rpc error (the real client then closes the connection);
 *         -EBADMSG malformed body; -ENOTSUP / -EINVAL / -ENOMEM as tide_mc_resp_decode().
 * Thread: any.
 */
int tide_mc_resp_frame_decode(enum tide_mc_fn fn, const void *buf, size_t len,
			      struct tide_mc_resp_hdr *hdr, struct tide_mc_resp *resp,
			      size_t *consumed, struct tide_mc_err *err);

/**
 * The struct_pack type literal of a request (`is_resp` false) or result body,
 * computed from the message descriptors (spec 2.3), without the trailing NUL.
 * \param[out] lit  Points to static storage valid for the process lifetime.
 * \param[out] len  Literal bytes.
 * \return 0; -ENOENT zero-argument request (no body); -EINVAL fn without codec
 *         or bad layout; -ENOTSUP init failed.
 * Thread: any.
 */
int tide_mc_type_literal(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout,
			 const uint8_t **lit, size_t *len);

/**
 * Type hash (MD5-BE32(literal) & ~1) of a request or result body; same
 * arguments and returns as tide_mc_type_literal().
 * Thread: any.
 */
int tide_mc_type_hash(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout, uint32_t *hash);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_MC_CODEC_H */
