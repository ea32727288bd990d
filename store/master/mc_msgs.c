/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Message descriptors: the ONE description of every Mooncake master message
 * (spec 2.3/2.4/3.1/3.2), from which mc_pack.c derives literals, hashes and
 * the codec. A layout change is an edit of one field list below; where HEAD
 * and v0.3.12.post1 differ both are described and the type hash picks one.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mc_internal.h"
#include "tide_log.h"

/* ---- descriptor language ---------------------------------------------------------------- */

#define PRIM(id, k, ctype) \
	static const struct mc_type id = {.kind = k, .name = #ctype, .size = sizeof(ctype)}

/** Field `m` of C struct S, encoded as type t. */
#define FLD(S, m, t)                     \
	{                                \
#m, offsetof(S, m), &(t) \
	}

#define STRUCT_T(id, nm, S, flds)                              \
	static const struct mc_type id = {.kind = MC_K_STRUCT, \
					  .name = nm,          \
					  .size = sizeof(S),   \
					  .fields = flds,      \
					  .nfields = MC_ARRAY_SIZE(flds)}

/** Fields inline without fd/ff: map pairs and projections. */
#define INLINE_T(id, nm, S, flds)                                   \
	static const struct mc_type id = {.kind = MC_K_TRANSPARENT, \
					  .name = nm,               \
					  .size = sizeof(S),        \
					  .fields = flds,           \
					  .nfields = MC_ARRAY_SIZE(flds)}

#define VEC_LIKE(id, k, nm, S, e)                                                \
	static_assert(offsetof(S, v) == 0 && offsetof(S, n) == sizeof(void *) && \
			      sizeof(S) == 2 * sizeof(void *),                   \
		      #S " must be {T *v; size_t n;}");                          \
	static const struct mc_type id = {.kind = k, .name = nm, .size = sizeof(S), .elem = &(e)}

#define VEC_T(id, nm, S, e) VEC_LIKE(id, MC_K_VEC, nm, S, e)
#define MAP_T(id, nm, S, e) VEC_LIKE(id, MC_K_MAP, nm, S, e)

#define OPT_T(id, nm, S, e)                                                   \
	static_assert(offsetof(S, has) == 0, #S " must start with bool has"); \
	static const struct mc_type id = {.kind = MC_K_OPT,                   \
					  .name = nm,                         \
					  .size = sizeof(S),                  \
					  .elem = &(e),                       \
					  .val_off = offsetof(S, val)}

#define EXP_T(id, nm, S, e)                                                 \
	static_assert(offsetof(S, ok) == 0, #S " must start with bool ok"); \
	static const struct mc_type id = {.kind = MC_K_EXPECTED,            \
					  .name = nm,                       \
					  .size = sizeof(S),                \
					  .elem = &(e),                     \
					  .val_off = offsetof(S, val),      \
					  .err_off = offsetof(S, err)}

/* ---- primitives ------------------------------------------------------------------------- */

PRIM(t_bool, MC_K_BOOL, bool);
PRIM(t_u8, MC_K_U8, uint8_t);
PRIM(t_u16, MC_K_U16, uint16_t);
PRIM(t_i32, MC_K_I32, int32_t);
PRIM(t_u32, MC_K_U32, uint32_t);
PRIM(t_i64, MC_K_I64, int64_t);
PRIM(t_u64, MC_K_U64, uint64_t);
static const struct mc_type t_void = {.kind = MC_K_VOID, .name = "void", .size = 0};
static const struct mc_type t_str = {
	.kind = MC_K_STR, .name = "string", .size = sizeof(struct tide_mc_str)};

/* ErrorCode, ReplicaType, ReplicaStatus, ClientStatus, TaskType, SegmentStatus:
 * `enum class X` without a base = int32. SoftPinAction, ObjectDataType: uint8. */
#define t_enum32 t_i32
#define t_enum8  t_u8

/* ---- common types ----------------------------------------------------------------------- */

/* UUID = std::pair<uint64_t, uint64_t>: trivially copyable, literal fd 04 04 89 89 ff. */
static const struct mc_field uuid_f[] = {
	FLD(struct tide_mc_uuid, first, t_u64),
	FLD(struct tide_mc_uuid, second, t_u64),
};
static const struct mc_type t_uuid = {.kind = MC_K_TRIVIAL,
				      .name = "UUID",
				      .size = sizeof(struct tide_mc_uuid),
				      .fields = uuid_f,
				      .nfields = MC_ARRAY_SIZE(uuid_f),
				      .pack_align = 8,
				      .align = 8};

VEC_T(t_str_vec, "vector<string>", struct tide_mc_str_vec, t_str);
VEC_T(t_u64_vec, "vector<uint64>", struct tide_mc_u64_vec, t_u64);
VEC_T(t_uuid_vec, "vector<UUID>", struct tide_mc_uuid_vec, t_uuid);
OPT_T(t_opt_u64, "optional<uint64>", struct tide_mc_opt_u64, t_u64);
OPT_T(t_opt_str_vec, "optional<vector<string>>", struct tide_mc_opt_str_vec, t_str_vec);

#define S struct tide_mc_segment
static const struct mc_field segment_f[] = {
	FLD(S, id, t_uuid),     FLD(S, name, t_str),        FLD(S, base, t_u64),
	FLD(S, size, t_u64),    FLD(S, te_endpoint, t_str), FLD(S, protocol, t_str),
	FLD(S, host_id, t_str),
};
#undef S
STRUCT_T(t_segment, "Segment", struct tide_mc_segment, segment_f);
VEC_T(t_segment_vec, "vector<Segment>", struct tide_mc_segment_vec, t_segment);

#define S struct tide_mc_replicate_config
static const struct mc_field rc_head_f[] = {
	FLD(S, replica_num, t_u64),
	FLD(S, nof_replica_num, t_u64),
	FLD(S, dfs_replica_num, t_u64),
	FLD(S, soft_pin_action, t_enum8),
	FLD(S, soft_pin_ttl_ms, t_opt_u64),
	FLD(S, with_hard_pin, t_bool),
	FLD(S, preferred_segments, t_str_vec),
	FLD(S, preferred_segment, t_str),
	FLD(S, preferred_nof_segments, t_str_vec),
	FLD(S, prefer_alloc_in_same_node, t_bool),
	FLD(S, data_type, t_enum8),
	FLD(S, host_id, t_str),
	FLD(S, group_ids, t_opt_str_vec),
};
static const struct mc_field rc_v0312_f[] = {
	FLD(S, replica_num, t_u64),
	FLD(S, nof_replica_num, t_u64),
	FLD(S, with_soft_pin, t_bool),
	FLD(S, with_hard_pin, t_bool),
	FLD(S, preferred_segments, t_str_vec),
	FLD(S, preferred_segment, t_str),
	FLD(S, preferred_nof_segments, t_str_vec),
	FLD(S, prefer_alloc_in_same_node, t_bool),
	FLD(S, data_type, t_enum8),
	FLD(S, host_id, t_str),
	FLD(S, group_ids, t_opt_str_vec),
};
#undef S
STRUCT_T(t_rc_head, "ReplicateConfig", struct tide_mc_replicate_config, rc_head_f);
STRUCT_T(t_rc_v0312, "ReplicateConfig(v0.3.12)", struct tide_mc_replicate_config, rc_v0312_f);

#define S struct tide_mc_buffer_desc
static const struct mc_field buffer_f[] = {
	FLD(S, size, t_u64),
	FLD(S, buffer_address, t_u64),
	FLD(S, protocol, t_str),
	FLD(S, transport_endpoint, t_str),
};
#undef S
STRUCT_T(t_buffer_desc, "AllocatedBuffer::Descriptor", struct tide_mc_buffer_desc, buffer_f);

/* MemoryDescriptor / NoFDescriptor = { AllocatedBuffer::Descriptor buffer_descriptor; }. */
static const struct mc_field wrapped_buffer_f[] = {
	{"buffer_descriptor", 0, &t_buffer_desc},
};
STRUCT_T(t_mem_desc, "MemoryDescriptor", struct tide_mc_buffer_desc, wrapped_buffer_f);
STRUCT_T(t_nof_desc, "NoFDescriptor", struct tide_mc_buffer_desc, wrapped_buffer_f);

#define S struct tide_mc_disk_desc
static const struct mc_field disk_f[] = {
	FLD(S, file_path, t_str),
	FLD(S, object_size, t_u64),
};
#undef S
STRUCT_T(t_disk_desc, "DiskDescriptor", struct tide_mc_disk_desc, disk_f);

#define S struct tide_mc_local_disk_desc
static const struct mc_field local_disk_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, object_size, t_u64),
	FLD(S, transport_endpoint, t_str),
};
#undef S
STRUCT_T(t_local_disk_desc, "LocalDiskDescriptor", struct tide_mc_local_disk_desc, local_disk_f);

#define S struct tide_mc_dfs_desc
static const struct mc_field dfs_f[] = {
	FLD(S, file_path, t_str),    FLD(S, offset, t_u64),    FLD(S, object_size, t_u64),
	FLD(S, aligned_size, t_u64), FLD(S, shard_idx, t_i32),
};
#undef S
STRUCT_T(t_dfs_desc, "DistributedFSDescriptor", struct tide_mc_dfs_desc, dfs_f);

/* Replica::Descriptor's variant: index byte in `kind`, alternatives in the union `u`. */
#define S struct tide_mc_replica_desc
static const struct mc_field variant_head_f[] = {
	{"memory", offsetof(S, u.memory), &t_mem_desc},
	{"nof", offsetof(S, u.nof), &t_nof_desc},
	{"disk", offsetof(S, u.disk), &t_disk_desc},
	{"local_disk", offsetof(S, u.local_disk), &t_local_disk_desc},
	{"dfs", offsetof(S, u.dfs), &t_dfs_desc},
};
static const struct mc_type t_variant_head = {.kind = MC_K_VARIANT,
					      .name = "variant<Memory,NoF,Disk,LocalDisk,DFS>",
					      .size = sizeof(S),
					      .fields = variant_head_f,
					      .nfields = MC_ARRAY_SIZE(variant_head_f),
					      .idx_off = offsetof(S, kind)};
/* v0.3.12.post1 has no DistributedFSDescriptor alternative. */
static const struct mc_type t_variant_v0312 = {.kind = MC_K_VARIANT,
					       .name = "variant<Memory,NoF,Disk,LocalDisk>",
					       .size = sizeof(S),
					       .fields = variant_head_f,
					       .nfields = 4,
					       .idx_off = offsetof(S, kind)};
static const struct mc_field replica_head_f[] = {
	FLD(S, id, t_u64),
	{"descriptor_variant", 0, &t_variant_head},
	FLD(S, status, t_enum32),
};
static const struct mc_field replica_v0312_f[] = {
	FLD(S, id, t_u64),
	{"descriptor_variant", 0, &t_variant_v0312},
	FLD(S, status, t_enum32),
};
#undef S
STRUCT_T(t_replica_head, "Replica::Descriptor", struct tide_mc_replica_desc, replica_head_f);
STRUCT_T(t_replica_v0312, "Replica::Descriptor(v0.3.12)", struct tide_mc_replica_desc,
	 replica_v0312_f);
VEC_T(t_replicas_head, "vector<Replica::Descriptor>", struct tide_mc_replica_desc_vec,
      t_replica_head);
VEC_T(t_replicas_v0312, "vector<Replica::Descriptor>", struct tide_mc_replica_desc_vec,
      t_replica_v0312);

#define S struct tide_mc_object_meta
static const struct mc_field object_meta_f[] = {
	FLD(S, key, t_str),
	FLD(S, object_checksum, t_opt_u64),
};
/* v0.3.12.post1 sends a bare key where HEAD sends ObjectMeta. */
static const struct mc_field object_meta_key_f[] = {
	FLD(S, key, t_str),
};
#undef S
STRUCT_T(t_object_meta, "ObjectMeta", struct tide_mc_object_meta, object_meta_f);
INLINE_T(t_object_meta_key, "ObjectMeta.key", struct tide_mc_object_meta, object_meta_key_f);
VEC_T(t_object_meta_vec, "vector<ObjectMeta>", struct tide_mc_object_meta_vec, t_object_meta);
VEC_T(t_object_key_vec, "vector<string>", struct tide_mc_object_meta_vec, t_object_meta_key);

#define S struct tide_mc_ping_info
static const struct mc_field ping_info_f[] = {
	FLD(S, view_version_id, t_i64),
	FLD(S, client_status, t_enum32),
};
#undef S
STRUCT_T(t_ping_info, "PingResponse", struct tide_mc_ping_info, ping_info_f);

#define S struct tide_mc_replica_list
static const struct mc_field grl_head_f[] = {
	FLD(S, replicas, t_replicas_head),
	FLD(S, lease_ttl_ms, t_u64),
	FLD(S, object_checksum, t_opt_u64),
};
static const struct mc_field grl_v0312_f[] = {
	FLD(S, replicas, t_replicas_v0312),
	FLD(S, lease_ttl_ms, t_u64),
};
#undef S
STRUCT_T(t_grl_head, "GetReplicaListResponse", struct tide_mc_replica_list, grl_head_f);
STRUCT_T(t_grl_v0312, "GetReplicaListResponse(v0.3.12)", struct tide_mc_replica_list, grl_v0312_f);

#define S struct tide_mc_storage_config
static const struct mc_field storage_config_f[] = {
	FLD(S, fsdir, t_str),
	FLD(S, enable_disk_eviction, t_bool),
	FLD(S, quota_bytes, t_u64),
};
#undef S
STRUCT_T(t_storage_config, "GetStorageConfigResponse", struct tide_mc_storage_config,
	 storage_config_f);

#define S struct tide_mc_task_assignment
static const struct mc_field task_f[] = {
	FLD(S, id, t_uuid),
	FLD(S, type, t_enum32),
	FLD(S, payload, t_str),
	FLD(S, created_at_ms_epoch, t_i64),
	FLD(S, max_retry_attempts, t_u32),
};
#undef S
STRUCT_T(t_task, "TaskAssignment", struct tide_mc_task_assignment, task_f);
VEC_T(t_task_vec, "vector<TaskAssignment>", struct tide_mc_task_assignment_vec, t_task);

#define S struct tide_mc_regex_entry
static const struct mc_field regex_head_f[] = {
	FLD(S, key, t_str),
	FLD(S, replicas, t_replicas_head),
};
static const struct mc_field regex_v0312_f[] = {
	FLD(S, key, t_str),
	FLD(S, replicas, t_replicas_v0312),
};
#undef S
INLINE_T(t_regex_pair_head, "pair<string,vector<Replica::Descriptor>>", struct tide_mc_regex_entry,
	 regex_head_f);
INLINE_T(t_regex_pair_v0312, "pair<string,vector<Replica::Descriptor>>", struct tide_mc_regex_entry,
	 regex_v0312_f);
MAP_T(t_regex_map_head, "unordered_map<string,vector<Replica::Descriptor>>",
      struct tide_mc_regex_entry_vec, t_regex_pair_head);
MAP_T(t_regex_map_v0312, "unordered_map<string,vector<Replica::Descriptor>>",
      struct tide_mc_regex_entry_vec, t_regex_pair_v0312);

#define S struct tide_mc_ip_entry
static const struct mc_field ip_pair_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, ips, t_str_vec),
};
#undef S
INLINE_T(t_ip_pair, "pair<UUID,vector<string>>", struct tide_mc_ip_entry, ip_pair_f);
MAP_T(t_ip_map, "unordered_map<UUID,vector<string>>", struct tide_mc_ip_entry_vec, t_ip_pair);

/* ---- results: tl::expected<T, ErrorCode> and vectors of them ---------------------------- */

static_assert(offsetof(struct tide_mc_exp_void, ok) == 0, "exp_void layout");
static const struct mc_type t_exp_void = {.kind = MC_K_EXPECTED,
					  .name = "expected<void>",
					  .size = sizeof(struct tide_mc_exp_void),
					  .elem = &t_void,
					  .val_off = 0,
					  .err_off = offsetof(struct tide_mc_exp_void, err)};
VEC_T(t_exp_void_vec, "vector<expected<void>>", struct tide_mc_exp_void_vec, t_exp_void);
EXP_T(t_exp_bool, "expected<bool>", struct tide_mc_exp_bool, t_bool);
VEC_T(t_exp_bool_vec, "vector<expected<bool>>", struct tide_mc_exp_bool_vec, t_exp_bool);
EXP_T(t_exp_i64, "expected<long>", struct tide_mc_exp_i64, t_i64);
EXP_T(t_exp_i32, "expected<SegmentStatus>", struct tide_mc_exp_i32, t_enum32);
EXP_T(t_exp_str, "expected<string>", struct tide_mc_exp_str, t_str);
EXP_T(t_exp_str_vec, "expected<vector<string>>", struct tide_mc_exp_str_vec, t_str_vec);
EXP_T(t_exp_ping, "expected<PingResponse>", struct tide_mc_exp_ping, t_ping_info);
EXP_T(t_exp_storage_config, "expected<GetStorageConfigResponse>", struct tide_mc_exp_storage_config,
      t_storage_config);
EXP_T(t_exp_grl_head, "expected<GetReplicaListResponse>", struct tide_mc_exp_replica_list,
      t_grl_head);
EXP_T(t_exp_grl_v0312, "expected<GetReplicaListResponse>", struct tide_mc_exp_replica_list,
      t_grl_v0312);
VEC_T(t_exp_grl_vec_head, "vector<expected<GetReplicaListResponse>>",
      struct tide_mc_exp_replica_list_vec, t_exp_grl_head);
VEC_T(t_exp_grl_vec_v0312, "vector<expected<GetReplicaListResponse>>",
      struct tide_mc_exp_replica_list_vec, t_exp_grl_v0312);
EXP_T(t_exp_replicas_head, "expected<vector<Replica::Descriptor>>", struct tide_mc_exp_replicas,
      t_replicas_head);
EXP_T(t_exp_replicas_v0312, "expected<vector<Replica::Descriptor>>", struct tide_mc_exp_replicas,
      t_replicas_v0312);
VEC_T(t_exp_replicas_vec_head, "vector<expected<vector<Replica::Descriptor>>>",
      struct tide_mc_exp_replicas_vec, t_exp_replicas_head);
VEC_T(t_exp_replicas_vec_v0312, "vector<expected<vector<Replica::Descriptor>>>",
      struct tide_mc_exp_replicas_vec, t_exp_replicas_v0312);
EXP_T(t_exp_regex_head, "expected<unordered_map<string,vector<Replica::Descriptor>>>",
      struct tide_mc_exp_regex_map, t_regex_map_head);
EXP_T(t_exp_regex_v0312, "expected<unordered_map<string,vector<Replica::Descriptor>>>",
      struct tide_mc_exp_regex_map, t_regex_map_v0312);
EXP_T(t_exp_ip_map, "expected<unordered_map<UUID,vector<string>>>", struct tide_mc_exp_ip_map,
      t_ip_map);
EXP_T(t_exp_tasks, "expected<vector<TaskAssignment>>", struct tide_mc_exp_tasks, t_task_vec);
/* Tide's extension: TideLease and its expected (no stock counterpart; the names
 * only feed the type hash, which both Tide ends compute the same way). */
#define S struct tide_mc_lease
static const struct mc_field lease_f[] = {
	FLD(S, id, t_u64),
	FLD(S, ttl_ms, t_u64),
	FLD(S, granule, t_u64),
	FLD(S, buf, t_buffer_desc),
};
#undef S
STRUCT_T(t_lease, "TideLease", struct tide_mc_lease, lease_f);
EXP_T(t_exp_lease, "expected<TideLease>", struct tide_mc_exp_lease, t_lease);
/* RemoveAll returns a bare `long`. */
static const struct mc_type t_long = {.kind = MC_K_I64, .name = "long", .size = sizeof(int64_t)};

/* ---- requests: the argument tuple of each RPC (spec 3.2) -------------------------------- */

/* Single-argument RPCs send the bare argument (Ping: UUID, BatchQueryIp: vector<UUID>,
 * QuerySegmentStatus: string); the tide_mc_*_req wrapper has it at offset 0. */
static_assert(offsetof(struct tide_mc_uuid_req, id) == 0 &&
		      sizeof(struct tide_mc_uuid_req) == sizeof(struct tide_mc_uuid),
	      "bare UUID argument");
static_assert(offsetof(struct tide_mc_batch_query_ip_req, client_ids) == 0, "bare vector<UUID>");
static_assert(offsetof(struct tide_mc_query_segment_status_req, segment_name) == 0, "bare str");

#define S struct tide_mc_mount_segment_req
static const struct mc_field mount_f[] = {FLD(S, segment, t_segment), FLD(S, client_id, t_uuid)};
#undef S
STRUCT_T(t_mount_req, "tuple<Segment,UUID>", struct tide_mc_mount_segment_req, mount_f);

#define S struct tide_mc_remount_segment_req
static const struct mc_field remount_f[] = {FLD(S, segments, t_segment_vec),
					    FLD(S, client_id, t_uuid)};
#undef S
STRUCT_T(t_remount_req, "tuple<vector<Segment>,UUID>", struct tide_mc_remount_segment_req,
	 remount_f);

#define S struct tide_mc_unmount_segment_req
static const struct mc_field unmount_f[] = {FLD(S, segment_id, t_uuid), FLD(S, client_id, t_uuid)};
static const struct mc_field graceful_f[] = {FLD(S, segment_id, t_uuid), FLD(S, client_id, t_uuid),
					     FLD(S, grace_period_ms, t_u64)};
#undef S
STRUCT_T(t_unmount_req, "tuple<UUID,UUID>", struct tide_mc_unmount_segment_req, unmount_f);
STRUCT_T(t_graceful_req, "tuple<UUID,UUID,uint64>", struct tide_mc_unmount_segment_req, graceful_f);

#define S struct tide_mc_key_req
static const struct mc_field key_f[] = {FLD(S, key, t_str), FLD(S, tenant_id, t_str)};
#undef S
STRUCT_T(t_key_req, "tuple<string,string>", struct tide_mc_key_req, key_f);

#define S struct tide_mc_keys_req
static const struct mc_field keys_f[] = {FLD(S, keys, t_str_vec), FLD(S, tenant_id, t_str)};
#undef S
STRUCT_T(t_keys_req, "tuple<vector<string>,string>", struct tide_mc_keys_req, keys_f);

#define S struct tide_mc_put_start_req
static const struct mc_field put_start_head_f[] = {
	FLD(S, client_id, t_uuid), FLD(S, key, t_str),       FLD(S, slice_length, t_u64),
	FLD(S, config, t_rc_head), FLD(S, tenant_id, t_str),
};
static const struct mc_field put_start_v0312_f[] = {
	FLD(S, client_id, t_uuid),  FLD(S, key, t_str),       FLD(S, slice_length, t_u64),
	FLD(S, config, t_rc_v0312), FLD(S, tenant_id, t_str),
};
#undef S
STRUCT_T(t_put_start_head, "PutStart args", struct tide_mc_put_start_req, put_start_head_f);
STRUCT_T(t_put_start_v0312, "PutStart args(v0.3.12)", struct tide_mc_put_start_req,
	 put_start_v0312_f);

#define S struct tide_mc_put_end_req
static const struct mc_field put_end_head_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, meta, t_object_meta),
	FLD(S, replica_type, t_enum32),
	FLD(S, tenant_id, t_str),
};
static const struct mc_field put_end_v0312_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, meta, t_object_meta_key),
	FLD(S, replica_type, t_enum32),
	FLD(S, tenant_id, t_str),
};
#undef S
STRUCT_T(t_put_end_head, "PutEnd args", struct tide_mc_put_end_req, put_end_head_f);
STRUCT_T(t_put_end_v0312, "PutEnd args(v0.3.12)", struct tide_mc_put_end_req, put_end_v0312_f);

#define S struct tide_mc_put_revoke_req
static const struct mc_field put_revoke_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, key, t_str),
	FLD(S, replica_type, t_enum32),
	FLD(S, tenant_id, t_str),
};
#undef S
STRUCT_T(t_put_revoke_req, "PutRevoke args", struct tide_mc_put_revoke_req, put_revoke_f);

#define S struct tide_mc_batch_put_start_req
static const struct mc_field batch_put_start_head_f[] = {
	FLD(S, client_id, t_uuid), FLD(S, keys, t_str_vec),  FLD(S, slice_lengths, t_u64_vec),
	FLD(S, config, t_rc_head), FLD(S, tenant_id, t_str),
};
static const struct mc_field batch_put_start_v0312_f[] = {
	FLD(S, client_id, t_uuid),  FLD(S, keys, t_str_vec),  FLD(S, slice_lengths, t_u64_vec),
	FLD(S, config, t_rc_v0312), FLD(S, tenant_id, t_str),
};
#undef S
STRUCT_T(t_batch_put_start_head, "BatchPutStart args", struct tide_mc_batch_put_start_req,
	 batch_put_start_head_f);
STRUCT_T(t_batch_put_start_v0312, "BatchPutStart args(v0.3.12)", struct tide_mc_batch_put_start_req,
	 batch_put_start_v0312_f);

#define S struct tide_mc_batch_put_end_req
static const struct mc_field batch_put_end_head_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, metas, t_object_meta_vec),
	FLD(S, replica_type, t_enum32),
	FLD(S, tenant_id, t_str),
};
static const struct mc_field batch_put_end_v0312_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, metas, t_object_key_vec),
	FLD(S, replica_type, t_enum32),
	FLD(S, tenant_id, t_str),
};
static const struct mc_field batch_upsert_end_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, metas, t_object_meta_vec),
	FLD(S, tenant_id, t_str),
};
#undef S
STRUCT_T(t_batch_put_end_head, "BatchPutEnd args", struct tide_mc_batch_put_end_req,
	 batch_put_end_head_f);
STRUCT_T(t_batch_put_end_v0312, "BatchPutEnd args(v0.3.12)", struct tide_mc_batch_put_end_req,
	 batch_put_end_v0312_f);
STRUCT_T(t_batch_upsert_end, "BatchUpsertEnd args", struct tide_mc_batch_put_end_req,
	 batch_upsert_end_f);

#define S struct tide_mc_batch_put_revoke_req
static const struct mc_field batch_put_revoke_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, keys, t_str_vec),
	FLD(S, replica_type, t_enum32),
	FLD(S, tenant_id, t_str),
};
static const struct mc_field batch_upsert_revoke_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, keys, t_str_vec),
	FLD(S, tenant_id, t_str),
};
#undef S
STRUCT_T(t_batch_put_revoke, "BatchPutRevoke args", struct tide_mc_batch_put_revoke_req,
	 batch_put_revoke_f);
STRUCT_T(t_batch_upsert_revoke, "BatchUpsertRevoke args", struct tide_mc_batch_put_revoke_req,
	 batch_upsert_revoke_f);

#define S struct tide_mc_remove_req
static const struct mc_field remove_f[] = {FLD(S, key, t_str), FLD(S, force, t_bool),
					   FLD(S, tenant_id, t_str)};
#undef S
STRUCT_T(t_remove_req, "tuple<string,bool,string>", struct tide_mc_remove_req, remove_f);

#define S struct tide_mc_batch_remove_req
static const struct mc_field batch_remove_f[] = {FLD(S, keys, t_str_vec), FLD(S, force, t_bool),
						 FLD(S, tenant_id, t_str)};
#undef S
STRUCT_T(t_batch_remove_req, "tuple<vector<string>,bool,string>", struct tide_mc_batch_remove_req,
	 batch_remove_f);

#define S struct tide_mc_remove_all_req
static const struct mc_field remove_all_f[] = {FLD(S, force, t_bool), FLD(S, tenant_id, t_str)};
#undef S
STRUCT_T(t_remove_all_req, "tuple<bool,string>", struct tide_mc_remove_all_req, remove_all_f);

#define S struct tide_mc_fetch_tasks_req
static const struct mc_field fetch_tasks_f[] = {FLD(S, client_id, t_uuid),
						FLD(S, batch_size, t_u64)};
#undef S
STRUCT_T(t_fetch_tasks_req, "tuple<UUID,size_t>", struct tide_mc_fetch_tasks_req, fetch_tasks_f);

/* ---- coro_rpc error bodies -------------------------------------------------------------- */

/* ---- the message table ------------------------------------------------------------------ */

#define NOARG              \
	{                  \
		NULL, NULL \
	}
#define SAME(t)            \
	{                  \
		&(t), &(t) \
	}
#define S struct tide_mc_lease_grant_req
static const struct mc_field lease_grant_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, size, t_u64),
	FLD(S, config, t_rc_head),
};
#undef S
STRUCT_T(t_lease_grant_req, "TideLeaseGrant args", struct tide_mc_lease_grant_req, lease_grant_f);

#define S struct tide_mc_lease_commit_req
static const struct mc_field lease_commit_f[] = {
	FLD(S, client_id, t_uuid),  FLD(S, lease_id, t_u64),  FLD(S, keys, t_str_vec),
	FLD(S, offsets, t_u64_vec), FLD(S, sizes, t_u64_vec), FLD(S, config, t_rc_head),
};
#undef S
STRUCT_T(t_lease_commit_req, "TideLeaseCommit args", struct tide_mc_lease_commit_req,
	 lease_commit_f);

#define S struct tide_mc_lease_release_req
static const struct mc_field lease_release_f[] = {
	FLD(S, client_id, t_uuid),
	FLD(S, lease_id, t_u64),
};
#undef S
STRUCT_T(t_lease_release_req, "TideLeaseRelease args", struct tide_mc_lease_release_req,
	 lease_release_f);

#define S struct tide_mc_batch_replica_clear_req
static const struct mc_field batch_replica_clear_f[] = {
	FLD(S, keys, t_str_vec),
	FLD(S, client_id, t_uuid),
	FLD(S, segment_name, t_str),
};
#undef S
STRUCT_T(t_batch_replica_clear_req, "tuple<vector<string>,UUID,string>",
	 struct tide_mc_batch_replica_clear_req, batch_replica_clear_f);

#define BOTH(h, v)         \
	{                  \
		&(h), &(v) \
	}
#define MSG(fn, nm, rq, rs) [fn] = {nm, rq, rs}

const struct mc_msg mc_msgs[TIDE_MC_FN_CODEC_COUNT] = {
	MSG(TIDE_MC_FN_SERVICE_READY, "ServiceReady", NOARG, SAME(t_exp_str)),
	MSG(TIDE_MC_FN_GET_STORAGE_CONFIG, "GetStorageConfig", NOARG, SAME(t_exp_storage_config)),
	MSG(TIDE_MC_FN_MOUNT_SEGMENT, "MountSegment", SAME(t_mount_req), SAME(t_exp_void)),
	MSG(TIDE_MC_FN_REMOUNT_SEGMENT, "ReMountSegment", SAME(t_remount_req), SAME(t_exp_void)),
	MSG(TIDE_MC_FN_UNMOUNT_SEGMENT, "UnmountSegment", SAME(t_unmount_req), SAME(t_exp_void)),
	MSG(TIDE_MC_FN_PING, "Ping", SAME(t_uuid), SAME(t_exp_ping)),
	MSG(TIDE_MC_FN_EXIST_KEY, "ExistKey", SAME(t_key_req), SAME(t_exp_bool)),
	MSG(TIDE_MC_FN_GET_REPLICA_LIST, "GetReplicaList", SAME(t_key_req),
	    BOTH(t_exp_grl_head, t_exp_grl_v0312)),
	MSG(TIDE_MC_FN_PUT_START, "PutStart", BOTH(t_put_start_head, t_put_start_v0312),
	    BOTH(t_exp_replicas_head, t_exp_replicas_v0312)),
	MSG(TIDE_MC_FN_PUT_END, "PutEnd", BOTH(t_put_end_head, t_put_end_v0312), SAME(t_exp_void)),
	MSG(TIDE_MC_FN_REMOVE, "Remove", SAME(t_remove_req), SAME(t_exp_void)),
	MSG(TIDE_MC_FN_FETCH_TASKS, "FetchTasks", SAME(t_fetch_tasks_req), SAME(t_exp_tasks)),
	MSG(TIDE_MC_FN_GRACEFUL_UNMOUNT_SEGMENT, "GracefulUnmountSegment", SAME(t_graceful_req),
	    SAME(t_exp_void)),
	MSG(TIDE_MC_FN_BATCH_EXIST_KEY, "BatchExistKey", SAME(t_keys_req), SAME(t_exp_bool_vec)),
	MSG(TIDE_MC_FN_BATCH_GET_REPLICA_LIST, "BatchGetReplicaList", SAME(t_keys_req),
	    BOTH(t_exp_grl_vec_head, t_exp_grl_vec_v0312)),
	MSG(TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX, "GetReplicaListByRegex", SAME(t_key_req),
	    BOTH(t_exp_regex_head, t_exp_regex_v0312)),
	MSG(TIDE_MC_FN_PUT_REVOKE, "PutRevoke", SAME(t_put_revoke_req), SAME(t_exp_void)),
	MSG(TIDE_MC_FN_BATCH_PUT_START, "BatchPutStart",
	    BOTH(t_batch_put_start_head, t_batch_put_start_v0312),
	    BOTH(t_exp_replicas_vec_head, t_exp_replicas_vec_v0312)),
	MSG(TIDE_MC_FN_BATCH_PUT_END, "BatchPutEnd",
	    BOTH(t_batch_put_end_head, t_batch_put_end_v0312), SAME(t_exp_void_vec)),
	MSG(TIDE_MC_FN_BATCH_PUT_REVOKE, "BatchPutRevoke", SAME(t_batch_put_revoke),
	    SAME(t_exp_void_vec)),
	MSG(TIDE_MC_FN_UPSERT_START, "UpsertStart", BOTH(t_put_start_head, t_put_start_v0312),
	    BOTH(t_exp_replicas_head, t_exp_replicas_v0312)),
	MSG(TIDE_MC_FN_UPSERT_END, "UpsertEnd", BOTH(t_put_end_head, t_put_end_v0312),
	    SAME(t_exp_void)),
	MSG(TIDE_MC_FN_UPSERT_REVOKE, "UpsertRevoke", SAME(t_put_revoke_req), SAME(t_exp_void)),
	MSG(TIDE_MC_FN_BATCH_UPSERT_START, "BatchUpsertStart",
	    BOTH(t_batch_put_start_head, t_batch_put_start_v0312),
	    BOTH(t_exp_replicas_vec_head, t_exp_replicas_vec_v0312)),
	MSG(TIDE_MC_FN_BATCH_UPSERT_END, "BatchUpsertEnd", SAME(t_batch_upsert_end),
	    SAME(t_exp_void_vec)),
	MSG(TIDE_MC_FN_BATCH_UPSERT_REVOKE, "BatchUpsertRevoke", SAME(t_batch_upsert_revoke),
	    SAME(t_exp_void_vec)),
	MSG(TIDE_MC_FN_BATCH_REMOVE, "BatchRemove", SAME(t_batch_remove_req), SAME(t_exp_void_vec)),
	MSG(TIDE_MC_FN_REMOVE_BY_REGEX, "RemoveByRegex", SAME(t_remove_req), SAME(t_exp_i64)),
	MSG(TIDE_MC_FN_REMOVE_ALL, "RemoveAll", SAME(t_remove_all_req), SAME(t_long)),
	MSG(TIDE_MC_FN_GET_FSDIR, "GetFsdir", NOARG, SAME(t_exp_str)),
	MSG(TIDE_MC_FN_BATCH_QUERY_IP, "BatchQueryIp", SAME(t_uuid_vec), SAME(t_exp_ip_map)),
	MSG(TIDE_MC_FN_QUERY_SEGMENT_STATUS, "QuerySegmentStatus", SAME(t_str), SAME(t_exp_i32)),
	MSG(TIDE_MC_FN_QUERY_SEGMENT_STATUS_BY_ID, "QuerySegmentStatusById", SAME(t_uuid),
	    SAME(t_exp_i32)),
	MSG(TIDE_MC_FN_TIDE_LEASE_GRANT, "TideLeaseGrant", SAME(t_lease_grant_req),
	    SAME(t_exp_lease)),
	MSG(TIDE_MC_FN_TIDE_LEASE_COMMIT, "TideLeaseCommit", SAME(t_lease_commit_req),
	    SAME(t_exp_void_vec)),
	MSG(TIDE_MC_FN_TIDE_LEASE_RELEASE, "TideLeaseRelease", SAME(t_lease_release_req),
	    SAME(t_exp_void)),
	MSG(TIDE_MC_FN_BATCH_REPLICA_CLEAR, "BatchReplicaClear", SAME(t_batch_replica_clear_req),
	    SAME(t_exp_str_vec)),
};

/* ---- derived tables --------------------------------------------------------------------- */

static struct mc_root roots[TIDE_MC_FN_CODEC_COUNT][2][TIDE_MC_LAYOUT_COUNT];
static struct mc_root err_str_root = {.type = &t_str};
static const struct mc_field err_pair_f[] = {
	FLD(struct mc_err_pair, code, t_u16),
	FLD(struct mc_err_pair, msg, t_str),
};
STRUCT_T(t_err_pair, "pair<uint16,string>", struct mc_err_pair, err_pair_f);
static struct mc_root err_pair_root = {.type = &t_err_pair};

/* Every array element must take >= 1 wire byte, or the decoder's count bound breaks. */
static int
check_elems(const struct mc_type *t)
{
	switch (t->kind) {
	case MC_K_VEC:
	case MC_K_MAP:
		if (mc_min_wire(t->elem, 1) == 0 ||
		    (t->kind == MC_K_MAP &&
		     (t->elem->kind != MC_K_TRANSPARENT || t->elem->nfields != 2))) {
			return -EINVAL;
		}
		return check_elems(t->elem);
	case MC_K_OPT:
	case MC_K_EXPECTED:
		return check_elems(t->elem);
	case MC_K_VARIANT:
	case MC_K_STRUCT:
	case MC_K_TRIVIAL:
	case MC_K_TRANSPARENT:
		for (unsigned i = 0; i < t->nfields; i++) {
			int rc = check_elems(t->fields[i].type);
			if (rc != 0) {
				return rc;
			}
		}
		return 0;
	default:
		return 0;
	}
}

int
mc_msgs_init(void)
{
	int rc;

	for (unsigned fn = 0; fn < TIDE_MC_FN_CODEC_COUNT; fn++) {
		if (mc_msgs[fn].name == NULL) {
			TIDE_LOG(ERR, "message table has no entry for function %u", fn);
			return -EINVAL;
		}
		for (unsigned dir = 0; dir < 2; dir++) {
			for (unsigned l = 0; l < TIDE_MC_LAYOUT_COUNT; l++) {
				const struct mc_type *t =
					dir ? mc_msgs[fn].resp[l] : mc_msgs[fn].req[l];
				struct mc_root *r = &roots[fn][dir][l];

				r->type = t;
				if (t == NULL) {
					continue;
				}
				rc = check_elems(t);
				rc = rc ? rc : mc_root_init(r);
				if (rc != 0) {
					TIDE_LOG(ERR, "%s %s: descriptor error %d",
						 mc_msgs[fn].name, dir ? "result" : "request", rc);
					return rc;
				}
			}
		}
	}
	rc = mc_root_init(&err_str_root);
	return rc ? rc : mc_root_init(&err_pair_root);
}

const struct mc_root *
mc_msg_root(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout)
{
	if ((unsigned)fn >= TIDE_MC_FN_CODEC_COUNT || (unsigned)layout >= TIDE_MC_LAYOUT_COUNT) {
		return NULL;
	}
	return roots[fn][is_resp][layout].type ? &roots[fn][is_resp][layout] : NULL;
}

const struct mc_root *
mc_err_str_root(void)
{
	return &err_str_root;
}

const struct mc_root *
mc_err_pair_root(void)
{
	return &err_pair_root;
}

const struct mc_type *
mc_type_by_name(const char *name)
{
	static const struct mc_type *const named[] = {
		&t_uuid,           &t_segment,     &t_rc_head,   &t_rc_v0312, &t_replica_head,
		&t_replica_v0312,  &t_object_meta, &t_ping_info, &t_grl_head, &t_grl_v0312,
		&t_storage_config, &t_task,        &t_str,       &t_err_pair, &t_buffer_desc,
	};

	for (size_t i = 0; i < MC_ARRAY_SIZE(named); i++) {
		if (strcmp(named[i]->name, name) == 0) {
			return named[i];
		}
	}
	return NULL;
}

/* ---- public body API -------------------------------------------------------------------- */

static int
fn_check(enum tide_mc_fn fn, struct tide_mc_err *err)
{
	int rc = tide_mc_codec_init();

	if (rc != 0) {
		mc_err_set(err, 0, 0, "codec init failed (%d)", rc);
		return -ENOTSUP;
	}
	if ((unsigned)fn >= TIDE_MC_FN_COUNT) {
		mc_err_set(err, 0, 0, "function %u out of range", (unsigned)fn);
		return -EINVAL;
	}
	if ((unsigned)fn >= TIDE_MC_FN_CODEC_COUNT) {
		mc_err_set(err, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED, 0,
			   "%s is registered by Mooncake but has no codec here",
			   tide_mc_fn_info(fn)->name);
		return -ENOTSUP;
	}
	return 0;
}

static int
body_decode(enum tide_mc_fn fn, bool is_resp, const void *body, size_t len, void *u,
	    enum tide_mc_layout *layout, bool *exact, struct tide_mc_err *err)
{
	const struct mc_root *r[TIDE_MC_LAYOUT_COUNT];
	size_t which = 0;
	unsigned same = 0;
	int rc;

	rc = fn_check(fn, err);
	if (rc != 0) {
		return rc;
	}
	for (unsigned l = 0; l < TIDE_MC_LAYOUT_COUNT; l++) {
		r[l] = mc_msg_root(fn, is_resp, (enum tide_mc_layout)l);
	}
	*layout = TIDE_MC_LAYOUT_HEAD;
	*exact = false;
	if (r[0] == NULL) {
		/* Zero-argument call: the body is empty; extra bytes are ignored like trailing
		 * bytes of any body. */
		return 0;
	}
	if (body == NULL && len != 0) {
		return -EINVAL;
	}
	/* The name is formatted only if decoding fails (it was 2 % of a Ping's master CPU). */
	rc = mc_decode(r, TIDE_MC_LAYOUT_COUNT, body ? body : "", len, u, &which, mc_msgs[fn].name,
		       is_resp ? " result" : " request", err);
	if (rc != 0) {
		return rc;
	}
	for (unsigned l = 0; l < TIDE_MC_LAYOUT_COUNT; l++) {
		same += r[l]->hash == r[which]->hash;
	}
	*layout = (enum tide_mc_layout)which;
	*exact = same == 1;
	return 0;
}

static int
body_encode(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout, const void *u,
	    unsigned flags, struct tide_mc_buf *out)
{
	const struct mc_root *r;
	int rc;

	if (out == NULL) {
		return -EINVAL;
	}
	rc = tide_mc_codec_init();
	if (rc != 0) {
		return rc;
	}
	if ((unsigned)fn >= TIDE_MC_FN_CODEC_COUNT || (unsigned)layout >= TIDE_MC_LAYOUT_COUNT ||
	    (flags & ~7u) != 0) {
		return -EINVAL;
	}
	r = mc_msg_root(fn, is_resp, layout);
	if (r == NULL) {
		return 0; /* zero-argument request: empty body */
	}
	return mc_encode(r, u, flags, out);
}

static void
body_free(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout, void *u)
{
	const struct mc_root *r;

	if (tide_mc_codec_init() != 0) {
		return;
	}
	r = mc_msg_root(fn, is_resp, layout);
	if (r != NULL) {
		mc_free(r->type, u);
	}
}

int
tide_mc_req_decode(enum tide_mc_fn fn, const void *body, size_t len, struct tide_mc_req *out,
		   struct tide_mc_err *err)
{
	if (out == NULL) {
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	out->fn = fn;
	return body_decode(fn, false, body, len, &out->u, &out->layout, &out->layout_exact, err);
}

int
tide_mc_req_encode(const struct tide_mc_req *req, unsigned flags, struct tide_mc_buf *out)
{
	if (req == NULL) {
		return -EINVAL;
	}
	return body_encode(req->fn, false, req->layout, &req->u, flags, out);
}

void
tide_mc_req_free(struct tide_mc_req *req)
{
	if (req == NULL) {
		return;
	}
	body_free(req->fn, false, req->layout, &req->u);
	memset(&req->u, 0, sizeof(req->u));
}

int
tide_mc_resp_decode(enum tide_mc_fn fn, const void *body, size_t len, struct tide_mc_resp *out,
		    struct tide_mc_err *err)
{
	if (out == NULL) {
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	out->fn = fn;
	return body_decode(fn, true, body, len, &out->u, &out->layout, &out->layout_exact, err);
}

int
tide_mc_resp_encode(const struct tide_mc_resp *resp, unsigned flags, struct tide_mc_buf *out)
{
	if (resp == NULL) {
		return -EINVAL;
	}
	return body_encode(resp->fn, true, resp->layout, &resp->u, flags, out);
}

void
tide_mc_resp_free(struct tide_mc_resp *resp)
{
	if (resp == NULL) {
		return;
	}
	body_free(resp->fn, true, resp->layout, &resp->u);
	memset(&resp->u, 0, sizeof(resp->u));
}

int
tide_mc_type_literal(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout,
		     const uint8_t **lit, size_t *len)
{
	const struct mc_root *r;

	if (tide_mc_codec_init() != 0) {
		return -ENOTSUP;
	}
	if ((unsigned)fn >= TIDE_MC_FN_CODEC_COUNT || (unsigned)layout >= TIDE_MC_LAYOUT_COUNT ||
	    lit == NULL || len == NULL) {
		return -EINVAL;
	}
	r = mc_msg_root(fn, is_resp, layout);
	if (r == NULL) {
		return -ENOENT;
	}
	*lit = r->lit;
	*len = r->lit_len;
	return 0;
}

int
tide_mc_type_hash(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout, uint32_t *hash)
{
	const uint8_t *lit;
	size_t len;
	int rc;

	if (hash == NULL) {
		return -EINVAL;
	}
	rc = tide_mc_type_literal(fn, is_resp, layout, &lit, &len);
	if (rc == 0) {
		*hash = mc_msg_root(fn, is_resp, layout)->hash;
	}
	return rc;
}
