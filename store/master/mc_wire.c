/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coro_rpc framing (spec 1.1-1.5): request/response headers, the function-id
 * table of every handler a stock master registers, error frames, and the
 * frame-level wrappers around the body codec of mc_msgs.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_internal.h"
#include "tide_log.h"

/*
 * Registered handlers at HEAD (ms/src/rpc_service.cpp:1727-1877). Ids are
 * computed at init from the names, never typed in; the unit test checks them
 * against the spec's table. `off_answer` only records what the spec or the
 * capture shows; nothing is invented.
 */
#define NOSPEC   "not specified by the spec (minimal masters leave it unregistered -> errc 11)"
#define TIDE_EXT "not registered by a stock master (errc 11): Tide clients fall back to PutStart"
static struct tide_mc_fn_info fn_table[TIDE_MC_FN_COUNT] = {
	[TIDE_MC_FN_SERVICE_READY] = {"ServiceReady", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_GET_STORAGE_CONFIG] = {"GetStorageConfig", 0, true, false, "core",
					   "always served"},
	[TIDE_MC_FN_MOUNT_SEGMENT] = {"MountSegment", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_REMOUNT_SEGMENT] = {"ReMountSegment", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_UNMOUNT_SEGMENT] = {"UnmountSegment", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_PING] = {"Ping", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_EXIST_KEY] = {"ExistKey", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_GET_REPLICA_LIST] = {"GetReplicaList", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_PUT_START] = {"PutStart", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_PUT_END] = {"PutEnd", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_REMOVE] = {"Remove", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_FETCH_TASKS] = {"FetchTasks", 0, true, false, "task manager",
				    "expected ok, empty vector (capture, default master flags)"},
	[TIDE_MC_FN_GRACEFUL_UNMOUNT_SEGMENT] = {"GracefulUnmountSegment", 0, true, false, "core",
						 "always served"},
	[TIDE_MC_FN_BATCH_EXIST_KEY] = {"BatchExistKey", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_BATCH_GET_REPLICA_LIST] = {"BatchGetReplicaList", 0, true, false, "core",
					       "always served"},
	[TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX] = {"GetReplicaListByRegex", 0, true, false, "core",
						  "always served"},
	[TIDE_MC_FN_PUT_REVOKE] = {"PutRevoke", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_BATCH_PUT_START] = {"BatchPutStart", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_BATCH_PUT_END] = {"BatchPutEnd", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_BATCH_PUT_REVOKE] = {"BatchPutRevoke", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_UPSERT_START] = {"UpsertStart", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_UPSERT_END] = {"UpsertEnd", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_UPSERT_REVOKE] = {"UpsertRevoke", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_BATCH_UPSERT_START] = {"BatchUpsertStart", 0, true, false, "core",
					   "always served"},
	[TIDE_MC_FN_BATCH_UPSERT_END] = {"BatchUpsertEnd", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_BATCH_UPSERT_REVOKE] = {"BatchUpsertRevoke", 0, true, false, "core",
					    "always served"},
	[TIDE_MC_FN_BATCH_REMOVE] = {"BatchRemove", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_REMOVE_BY_REGEX] = {"RemoveByRegex", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_REMOVE_ALL] = {"RemoveAll", 0, true, false, "core", "always served"},
	[TIDE_MC_FN_GET_FSDIR] = {"GetFsdir", 0, true, false, "core",
				  "expected ok, \"\" when --root_fs_dir is unset"},
	[TIDE_MC_FN_BATCH_QUERY_IP] = {"BatchQueryIp", 0, true, false, "client ip query", NOSPEC},
	[TIDE_MC_FN_QUERY_SEGMENT_STATUS] = {"QuerySegmentStatus", 0, true, false, "segment drain",
					     NOSPEC},
	[TIDE_MC_FN_QUERY_SEGMENT_STATUS_BY_ID] = {"QuerySegmentStatusById", 0, true, false,
						   "segment drain", NOSPEC},
	[TIDE_MC_FN_TIDE_LEASE_GRANT] = {"TideLeaseGrant", 0, true, false, "tide lease", TIDE_EXT,
					 true},
	[TIDE_MC_FN_TIDE_LEASE_COMMIT] = {"TideLeaseCommit", 0, true, false, "tide lease", TIDE_EXT,
					  true},
	[TIDE_MC_FN_TIDE_LEASE_RELEASE] = {"TideLeaseRelease", 0, true, false, "tide lease",
					   TIDE_EXT, true},
	[TIDE_MC_FN_BATCH_REPLICA_CLEAR] = {"BatchReplicaClear", 0, true, false, "replica clear",
					    "always served"},
	[TIDE_MC_FN_MOUNT_NOF_SEGMENT] = {"MountNoFSegment", 0, false, false, "nof", NOSPEC},
	[TIDE_MC_FN_REMOUNT_NOF_SEGMENT] = {"ReMountNoFSegment", 0, false, false, "nof", NOSPEC},
	[TIDE_MC_FN_UNMOUNT_NOF_SEGMENT] = {"UnmountNoFSegment", 0, false, false, "nof", NOSPEC},
	[TIDE_MC_FN_GET_ALL_NOF_SEGMENTS] = {"GetAllNoFSegments", 0, false, false, "nof", NOSPEC},
	[TIDE_MC_FN_GET_NOF_SEGMENTS_BY_NAME] = {"GetNoFSegmentsByName", 0, false, false, "nof",
						 NOSPEC},
	[TIDE_MC_FN_MOUNT_LOCAL_DISK_SEGMENT] = {"MountLocalDiskSegment", 0, false, false,
						 "offload", NOSPEC},
	[TIDE_MC_FN_UNMOUNT_LOCAL_DISK_SEGMENT] = {"UnmountLocalDiskSegment", 0, false, true,
						   "offload", NOSPEC},
	[TIDE_MC_FN_OFFLOAD_OBJECT_HEARTBEAT] = {"OffloadObjectHeartbeat", 0, false, false,
						 "offload", NOSPEC},
	[TIDE_MC_FN_REPORT_SSD_CAPACITY] = {"ReportSsdCapacity", 0, false, false, "offload",
					    NOSPEC},
	[TIDE_MC_FN_NOTIFY_OFFLOAD_SUCCESS] = {"NotifyOffloadSuccess", 0, false, false, "offload",
					       NOSPEC},
	[TIDE_MC_FN_PROMOTION_OBJECT_HEARTBEAT] = {"PromotionObjectHeartbeat", 0, false, false,
						   "promotion", NOSPEC},
	[TIDE_MC_FN_PROMOTION_ALLOC_START] = {"PromotionAllocStart", 0, false, false, "promotion",
					      NOSPEC},
	[TIDE_MC_FN_NOTIFY_PROMOTION_SUCCESS] = {"NotifyPromotionSuccess", 0, false, false,
						 "promotion", NOSPEC},
	[TIDE_MC_FN_NOTIFY_PROMOTION_FAILURE] = {"NotifyPromotionFailure", 0, false, false,
						 "promotion", NOSPEC},
	[TIDE_MC_FN_COPY_START] = {"CopyStart", 0, false, false, "replication", NOSPEC},
	[TIDE_MC_FN_COPY_END] = {"CopyEnd", 0, false, false, "replication", NOSPEC},
	[TIDE_MC_FN_COPY_REVOKE] = {"CopyRevoke", 0, false, false, "replication", NOSPEC},
	[TIDE_MC_FN_MOVE_START] = {"MoveStart", 0, false, false, "replication", NOSPEC},
	[TIDE_MC_FN_MOVE_END] = {"MoveEnd", 0, false, false, "replication", NOSPEC},
	[TIDE_MC_FN_MOVE_REVOKE] = {"MoveRevoke", 0, false, false, "replication", NOSPEC},
	[TIDE_MC_FN_DYNAMIC_REPLICA_COPY_START] = {"DynamicReplicaCopyStart", 0, false, true,
						   "dynamic replication", NOSPEC},
	[TIDE_MC_FN_DYNAMIC_REPLICA_COPY_END] = {"DynamicReplicaCopyEnd", 0, false, true,
						 "dynamic replication", NOSPEC},
	[TIDE_MC_FN_DYNAMIC_REPLICA_COPY_REVOKE] = {"DynamicReplicaCopyRevoke", 0, false, true,
						    "dynamic replication", NOSPEC},
	[TIDE_MC_FN_EVICT_DISK_REPLICA] = {"EvictDiskReplica", 0, false, false, "offload", NOSPEC},
	[TIDE_MC_FN_BATCH_EVICT_DISK_REPLICA] = {"BatchEvictDiskReplica", 0, false, false,
						 "offload", NOSPEC},
	[TIDE_MC_FN_POLL_REMOVE_ALL] = {"PollRemoveAll", 0, false, false, "async remove-all",
					NOSPEC},
	[TIDE_MC_FN_CREATE_COPY_TASK] = {"CreateCopyTask", 0, false, false, "task manager", NOSPEC},
	[TIDE_MC_FN_CREATE_MOVE_TASK] = {"CreateMoveTask", 0, false, false, "task manager", NOSPEC},
	[TIDE_MC_FN_QUERY_TASK] = {"QueryTask", 0, false, false, "task manager", NOSPEC},
	[TIDE_MC_FN_MARK_TASK_TO_COMPLETE] = {"MarkTaskToComplete", 0, false, false, "task manager",
					      NOSPEC},
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = -EAGAIN;

int
tide_mc_fn_id_of_name(const char *name, uint32_t *out)
{
	char q[160];
	int n;

	if (name == NULL || out == NULL) {
		return -EINVAL;
	}
	n = snprintf(q, sizeof(q), "%s%s", TIDE_MC_FN_PREFIX, name);
	if (n < 0 || (size_t)n >= sizeof(q)) {
		return -EINVAL;
	}
	return mc_md5_be32(q, (size_t)n, out);
}

static void
codec_init_once(void)
{
	int rc;

	for (unsigned i = 0; i < TIDE_MC_FN_COUNT; i++) {
		if (fn_table[i].name == NULL ||
		    fn_table[i].has_codec != (i < TIDE_MC_FN_CODEC_COUNT)) {
			TIDE_LOG(ERR, "function table entry %u is inconsistent", i);
			init_rc = -EINVAL;
			return;
		}
		rc = tide_mc_fn_id_of_name(fn_table[i].name, &fn_table[i].id);
		if (rc != 0) {
			TIDE_LOG(ERR,
				 "MD5 unavailable in libcrypto (%d): cannot derive function ids",
				 rc);
			init_rc = -ENOTSUP;
			return;
		}
		for (unsigned j = 0; j < i; j++) {
			if (fn_table[j].id == fn_table[i].id) {
				TIDE_LOG(ERR, "function ids of %s and %s collide", fn_table[j].name,
					 fn_table[i].name);
				init_rc = -EINVAL;
				return;
			}
		}
	}
	init_rc = mc_msgs_init();
}

int
tide_mc_codec_init(void)
{
	pthread_once(&init_once, codec_init_once);
	return init_rc;
}

const struct tide_mc_fn_info *
tide_mc_fn_info(enum tide_mc_fn fn)
{
	if (tide_mc_codec_init() != 0 || (unsigned)fn >= TIDE_MC_FN_COUNT) {
		return NULL;
	}
	return &fn_table[fn];
}

int
tide_mc_fn_from_id(uint32_t id, enum tide_mc_fn *out)
{
	if (tide_mc_codec_init() != 0) {
		return -ENOTSUP;
	}
	/* 64 entries: a linear scan costs less than the body decode that follows. */
	for (unsigned i = 0; i < TIDE_MC_FN_COUNT; i++) {
		if (fn_table[i].id == id) {
			if (out != NULL) {
				*out = (enum tide_mc_fn)i;
			}
			return 0;
		}
	}
	return -ENOENT;
}

/* ---------------------------------------------------------------------------------------- */
/* Headers                                                                                   */
/* ---------------------------------------------------------------------------------------- */

int
tide_mc_req_hdr_parse(const void *buf, size_t len, struct tide_mc_req_hdr *out,
		      struct tide_mc_err *err)
{
	const uint8_t *p = buf;

	if (buf == NULL || out == NULL) {
		return -EINVAL;
	}
	if (len < TIDE_MC_REQ_HDR_LEN) {
		mc_err_set(err, 0, len, "request header: %zu of 20 bytes", len);
		return -EAGAIN;
	}
	out->magic = p[0];
	out->version = p[1];
	out->serialize_type = p[2];
	out->msg_type = p[3];
	out->seq_num = mc_get_le32(p + 4);
	out->function_id = mc_get_le32(p + 8);
	out->length = mc_get_le32(p + 12);
	out->attach_length = mc_get_le32(p + 16);
	if (out->magic != TIDE_MC_MAGIC) {
		mc_err_set(err, 0, 0, "request header: bad magic 0x%02x (want 0x15)", out->magic);
		return -EPROTO;
	}
	if (out->version != 0) {
		mc_err_set(err, 0, 1, "request header: unsupported version %u", out->version);
		return -EPROTO;
	}
	if (out->serialize_type != 0) {
		mc_err_set(err, 0, 2, "request header: serialize_type %u is not struct_pack (0)",
			   out->serialize_type);
		return -EPROTO;
	}
	return 0;
}

void
tide_mc_req_hdr_build(const struct tide_mc_req_hdr *h, uint8_t out[TIDE_MC_REQ_HDR_LEN])
{
	out[0] = h->magic;
	out[1] = h->version;
	out[2] = h->serialize_type;
	out[3] = h->msg_type;
	mc_put_le32(out + 4, h->seq_num);
	mc_put_le32(out + 8, h->function_id);
	mc_put_le32(out + 12, h->length);
	mc_put_le32(out + 16, h->attach_length);
}

int
tide_mc_resp_hdr_parse(const void *buf, size_t len, struct tide_mc_resp_hdr *out,
		       struct tide_mc_err *err)
{
	const uint8_t *p = buf;

	if (buf == NULL || out == NULL) {
		return -EINVAL;
	}
	if (len < TIDE_MC_RESP_HDR_LEN) {
		mc_err_set(err, 0, len, "response header: %zu of 16 bytes", len);
		return -EAGAIN;
	}
	out->magic = p[0];
	out->version = p[1];
	out->err_code = p[2];
	out->msg_type = p[3];
	out->seq_num = mc_get_le32(p + 4);
	out->length = mc_get_le32(p + 8);
	out->attach_length = mc_get_le32(p + 12);
	if (out->magic != TIDE_MC_MAGIC) {
		mc_err_set(err, 0, 0, "response header: bad magic 0x%02x (want 0x15)", out->magic);
		return -EPROTO;
	}
	if (out->version != 0) {
		mc_err_set(err, 0, 1, "response header: unsupported version %u", out->version);
		return -EPROTO;
	}
	return 0;
}

void
tide_mc_resp_hdr_build(const struct tide_mc_resp_hdr *h, uint8_t out[TIDE_MC_RESP_HDR_LEN])
{
	out[0] = h->magic;
	out[1] = h->version;
	out[2] = h->err_code;
	out[3] = h->msg_type;
	mc_put_le32(out + 4, h->seq_num);
	mc_put_le32(out + 8, h->length);
	mc_put_le32(out + 12, h->attach_length);
}

/* ---------------------------------------------------------------------------------------- */
/* Frames                                                                                    */
/* ---------------------------------------------------------------------------------------- */

/* Shift a body-relative error offset to the frame. */
static void
err_rebase(struct tide_mc_err *err, size_t hdr_len)
{
	if (err != NULL) {
		err->offset += hdr_len;
	}
}

int
tide_mc_req_frame_decode(const void *buf, size_t len, struct tide_mc_req_hdr *hdr,
			 struct tide_mc_req *req, size_t *consumed, struct tide_mc_err *err)
{
	enum tide_mc_fn fn;
	uint64_t total;
	int rc;

	if (buf == NULL || hdr == NULL || req == NULL || consumed == NULL) {
		return -EINVAL;
	}
	memset(req, 0, sizeof(*req));
	*consumed = 0;
	rc = tide_mc_req_hdr_parse(buf, len, hdr, err);
	if (rc != 0) {
		return rc;
	}
	total = (uint64_t)TIDE_MC_REQ_HDR_LEN + hdr->length + hdr->attach_length;
	if (len < total) {
		mc_err_set(err, 0, len, "request frame: %zu of %llu bytes", len,
			   (unsigned long long)total);
		return -EAGAIN;
	}
	*consumed = (size_t)total;
	rc = tide_mc_fn_from_id(hdr->function_id, &fn);
	if (rc == -ENOENT) {
		mc_err_set(err, TIDE_MC_ERRC_FUNCTION_NOT_REGISTERED, 8,
			   "request: function id 0x%08x is not registered", hdr->function_id);
		return rc;
	}
	if (rc != 0) {
		return rc;
	}
	rc = tide_mc_req_decode(fn, (const uint8_t *)buf + TIDE_MC_REQ_HDR_LEN, hdr->length, req,
				err);
	if (rc != 0) {
		err_rebase(err, TIDE_MC_REQ_HDR_LEN);
	}
	return rc;
}

int
tide_mc_req_frame_encode(const struct tide_mc_req *req, uint32_t seq, unsigned flags,
			 struct tide_mc_buf *out)
{
	struct tide_mc_req_hdr h = {.magic = TIDE_MC_MAGIC, .seq_num = seq};
	size_t start;
	int rc;

	if (req == NULL || out == NULL) {
		return -EINVAL;
	}
	rc = tide_mc_codec_init();
	if (rc != 0) {
		return rc;
	}
	if ((unsigned)req->fn >= TIDE_MC_FN_CODEC_COUNT) {
		return -EINVAL;
	}
	start = out->len;
	if (mc_buf_reserve(out, TIDE_MC_REQ_HDR_LEN) == NULL) {
		return -ENOMEM;
	}
	out->len += TIDE_MC_REQ_HDR_LEN;
	rc = tide_mc_req_encode(req, flags, out);
	if (rc != 0) {
		out->len = start;
		return rc;
	}
	h.function_id = fn_table[req->fn].id;
	h.length = (uint32_t)(out->len - start - TIDE_MC_REQ_HDR_LEN);
	/* Header last: the body may have moved the buffer. */
	tide_mc_req_hdr_build(&h, out->data + start);
	return 0;
}

int
tide_mc_resp_frame_encode(const struct tide_mc_resp *resp, uint32_t seq, unsigned flags,
			  struct tide_mc_buf *out)
{
	struct tide_mc_resp_hdr h = {.magic = TIDE_MC_MAGIC, .seq_num = seq};
	size_t start;
	int rc;

	if (resp == NULL || out == NULL) {
		return -EINVAL;
	}
	start = out->len;
	if (mc_buf_reserve(out, TIDE_MC_RESP_HDR_LEN) == NULL) {
		return -ENOMEM;
	}
	out->len += TIDE_MC_RESP_HDR_LEN;
	rc = tide_mc_resp_encode(resp, flags, out);
	if (rc != 0) {
		out->len = start;
		return rc;
	}
	h.length = (uint32_t)(out->len - start - TIDE_MC_RESP_HDR_LEN);
	tide_mc_resp_hdr_build(&h, out->data + start);
	return 0;
}

int
tide_mc_err_frame_encode(uint32_t seq, uint16_t errc, const char *msg, unsigned flags,
			 struct tide_mc_buf *out)
{
	struct tide_mc_resp_hdr h = {.magic = TIDE_MC_MAGIC, .seq_num = seq};
	struct tide_mc_str s = {.ptr = (char *)(msg ? msg : ""), .len = msg ? strlen(msg) : 0};
	size_t start;
	int rc;

	if (out == NULL || errc == 0 || (flags & ~7u) != 0) {
		return -EINVAL;
	}
	rc = tide_mc_codec_init();
	if (rc != 0) {
		return rc;
	}
	start = out->len;
	if (mc_buf_reserve(out, TIDE_MC_RESP_HDR_LEN) == NULL) {
		return -ENOMEM;
	}
	out->len += TIDE_MC_RESP_HDR_LEN;
	if (errc <= 255 && errc != TIDE_MC_ERRC_EXTENDED) {
		h.err_code = (uint8_t)errc;
		rc = mc_encode(mc_err_str_root(), &s, flags, out);
	} else {
		struct mc_err_pair pair = {.code = errc, .msg = s};

		h.err_code = TIDE_MC_ERRC_EXTENDED;
		rc = mc_encode(mc_err_pair_root(), &pair, flags, out);
	}
	if (rc != 0) {
		out->len = start;
		return rc;
	}
	h.length = (uint32_t)(out->len - start - TIDE_MC_RESP_HDR_LEN);
	tide_mc_resp_hdr_build(&h, out->data + start);
	return 0;
}

/* Decode the body of a frame whose header carries a coro_rpc error. */
static int
remote_error(const struct tide_mc_resp_hdr *hdr, const uint8_t *body, struct tide_mc_err *err)
{
	struct tide_mc_err sub = {0};
	struct mc_err_pair pair = {0};
	const struct mc_root *r;
	size_t which;
	int rc;

	if (hdr->err_code == TIDE_MC_ERRC_EXTENDED) {
		r = mc_err_pair_root();
		rc = mc_decode(&r, 1, body, hdr->length, &pair, &which, "error body", "", &sub);
	} else {
		r = mc_err_str_root();
		rc = mc_decode(&r, 1, body, hdr->length, &pair.msg, &which, "error body", "", &sub);
		pair.code = hdr->err_code;
	}
	if (rc != 0) {
		mc_err_set(err, hdr->err_code, TIDE_MC_RESP_HDR_LEN,
			   "remote coro_rpc error %u, undecodable body: %s", hdr->err_code,
			   sub.msg);
	} else {
		mc_err_set(err, (uint8_t)(pair.code > 255 ? TIDE_MC_ERRC_EXTENDED : pair.code), 2,
			   "remote coro_rpc error %u: %.*s", pair.code,
			   (int)(pair.msg.len > 200 ? 200 : pair.msg.len), pair.msg.ptr);
		free(pair.msg.ptr);
	}
	return -EREMOTEIO;
}

int
tide_mc_resp_frame_decode(enum tide_mc_fn fn, const void *buf, size_t len,
			  struct tide_mc_resp_hdr *hdr, struct tide_mc_resp *resp, size_t *consumed,
			  struct tide_mc_err *err)
{
	const uint8_t *body = (const uint8_t *)buf + TIDE_MC_RESP_HDR_LEN;
	uint64_t total;
	int rc;

	if (buf == NULL || hdr == NULL || resp == NULL || consumed == NULL) {
		return -EINVAL;
	}
	memset(resp, 0, sizeof(*resp));
	resp->fn = fn;
	*consumed = 0;
	rc = tide_mc_resp_hdr_parse(buf, len, hdr, err);
	if (rc != 0) {
		return rc;
	}
	total = (uint64_t)TIDE_MC_RESP_HDR_LEN + hdr->length + hdr->attach_length;
	if (len < total) {
		mc_err_set(err, 0, len, "response frame: %zu of %llu bytes", len,
			   (unsigned long long)total);
		return -EAGAIN;
	}
	*consumed = (size_t)total;
	rc = tide_mc_codec_init();
	if (rc != 0) {
		return rc;
	}
	if (hdr->err_code != 0) {
		return remote_error(hdr, body, err);
	}
	rc = tide_mc_resp_decode(fn, body, hdr->length, resp, err);
	if (rc != 0) {
		err_rebase(err, TIDE_MC_RESP_HDR_LEN);
	}
	return rc;
}
