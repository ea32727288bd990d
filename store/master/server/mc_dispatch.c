/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request -> table call -> result, for every function with a codec. Results
 * borrow memory from the worker's arena (descriptors) and scratch buffer
 * (per-key arrays of batch calls); both are reused after the reply is
 * encoded, so the steady state allocates nothing here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mc_server_int.h"
#include "tide_log.h"

/* A batch result array of n elements of `size` bytes; NULL when n is 0 or memory is short.
 * An empty batch still goes to the table, which counts it as stock's master does. */
static void *
scratch(struct mc_worker *w, size_t n, size_t size)
{
	size_t need;
	void *p;

	if (n == 0 || n > SIZE_MAX / size) {
		return NULL;
	}
	need = n * size;
	if (need > w->scratch_cap) {
		p = realloc(w->scratch, need);
		if (p == NULL) {
			w->oom = true; /* serve_frame answers an error, not an empty result */
			return NULL;
		}
		w->scratch = p;
		w->scratch_cap = need;
	}
	memset(w->scratch, 0, need);
	return w->scratch;
}

static void
set_void(struct tide_mc_exp_void *e, int rc)
{
	e->ok = rc == 0;
	e->err = rc;
}

/* A stock master answers QuerySegmentStatusById from its segment map; the table lists segments. */
static int
segment_status_by_id(struct mc_worker *w, const struct tide_mc_uuid *id, int32_t *status)
{
	struct tide_mc_table_segment_info *v;
	size_t n, i;
	int rc;

	rc = tide_mc_table_segments_list(w->s->table, &w->arena, &v, &n);
	if (rc != 0) {
		return rc;
	}
	for (i = 0; i < n; i++) {
		if (v[i].id.first == id->first && v[i].id.second == id->second) {
			*status = v[i].status;
			return 0;
		}
	}
	return TIDE_MC_EC_SEGMENT_NOT_FOUND;
}

static void
dispatch_batch(struct mc_worker *w, const struct tide_mc_req *req, struct tide_mc_resp *resp,
	       uint64_t now)
{
	struct tide_mc_table *t = w->s->table;
	bool upsert = false;
	size_t n;

	switch (req->fn) {
	case TIDE_MC_FN_BATCH_EXIST_KEY: {
		struct tide_mc_exp_bool *out;

		n = req->u.keys.keys.n;
		out = scratch(w, n, sizeof(*out));
		if (out != NULL || n == 0) {
			tide_mc_table_batch_exist_key(t, req->u.keys.keys.v, n, now, out);
			resp->u.batch_exist.v = out;
			resp->u.batch_exist.n = n;
		}
		break;
	}
	case TIDE_MC_FN_BATCH_GET_REPLICA_LIST: {
		struct tide_mc_exp_replica_list *out;

		n = req->u.keys.keys.n;
		out = scratch(w, n, sizeof(*out));
		if (out != NULL || n == 0) {
			tide_mc_table_batch_get_replica_list(t, req->u.keys.keys.v, n, now,
							     &w->arena, out);
			resp->u.batch_replica_list.v = out;
			resp->u.batch_replica_list.n = n;
		}
		break;
	}
	case TIDE_MC_FN_BATCH_UPSERT_START:
		upsert = true;
		/* fall through */
	case TIDE_MC_FN_BATCH_PUT_START: {
		const struct tide_mc_batch_put_start_req *r = &req->u.batch_put_start;
		struct tide_mc_exp_replicas *out;

		n = r->keys.n;
		out = scratch(w, n, sizeof(*out));
		if (out != NULL || n == 0) {
			tide_mc_table_batch_put_start(t, upsert, &r->client_id, r->keys.v, n,
						      r->slice_lengths.v, r->slice_lengths.n,
						      &r->config, now, &w->arena, out);
			resp->u.batch_put_start.v = out;
			resp->u.batch_put_start.n = n;
		}
		break;
	}
	case TIDE_MC_FN_TIDE_LEASE_COMMIT: {
		const struct tide_mc_lease_commit_req *r = &req->u.lease_commit;
		struct tide_mc_exp_void *out;

		n = r->keys.n;
		out = scratch(w, n, sizeof(*out));
		if (out == NULL) {
			break;
		}
		if (r->offsets.n != n || r->sizes.n != n) {
			for (size_t i = 0; i < n; i++) {
				set_void(&out[i], TIDE_MC_EC_INVALID_PARAMS);
			}
		} else {
			tide_mc_table_lease_commit(t, &r->client_id, r->lease_id, r->keys.v,
						   r->offsets.v, r->sizes.v, n, &r->config, now,
						   out);
		}
		resp->u.batch_status.v = out;
		resp->u.batch_status.n = n;
		break;
	}
	case TIDE_MC_FN_BATCH_UPSERT_END:
		upsert = true;
		/* fall through */
	case TIDE_MC_FN_BATCH_PUT_END: {
		const struct tide_mc_batch_put_end_req *r = &req->u.batch_put_end;
		struct tide_mc_exp_void *out;

		n = r->metas.n;
		out = scratch(w, n, sizeof(*out));
		if (out != NULL || n == 0) {
			tide_mc_table_batch_put_end(t, upsert, &r->client_id, r->metas.v, n,
						    upsert ? TIDE_MC_REPLICA_ALL : r->replica_type,
						    now, out);
			resp->u.batch_status.v = out;
			resp->u.batch_status.n = n;
		}
		break;
	}
	case TIDE_MC_FN_BATCH_UPSERT_REVOKE:
		upsert = true;
		/* fall through */
	case TIDE_MC_FN_BATCH_PUT_REVOKE: {
		const struct tide_mc_batch_put_revoke_req *r = &req->u.batch_put_revoke;
		struct tide_mc_exp_void *out;

		n = r->keys.n;
		out = scratch(w, n, sizeof(*out));
		if (out != NULL || n == 0) {
			tide_mc_table_batch_put_revoke(
				t, upsert, &r->client_id, r->keys.v, n,
				upsert ? TIDE_MC_REPLICA_ALL : r->replica_type, now, out);
			resp->u.batch_status.v = out;
			resp->u.batch_status.n = n;
		}
		break;
	}
	case TIDE_MC_FN_BATCH_REMOVE: {
		const struct tide_mc_batch_remove_req *r = &req->u.batch_remove;
		struct tide_mc_exp_void *out;

		n = r->keys.n;
		out = scratch(w, n, sizeof(*out));
		if (out != NULL || n == 0) {
			tide_mc_table_batch_remove(t, r->keys.v, n, r->force, now, out);
			resp->u.batch_status.v = out;
			resp->u.batch_status.n = n;
		}
		break;
	}
	default:
		break;
	}
}

void
mc_dispatch(struct mc_worker *w, const struct tide_mc_req *req, struct tide_mc_resp *resp,
	    uint64_t now)
{
	struct tide_mc_table *t = w->s->table;
	struct tide_mc_server *s = w->s;
	int rc;

	memset(resp, 0, sizeof(*resp));
	resp->fn = req->fn;
	resp->layout = req->layout;
	resp->layout_exact = req->layout_exact;

	switch (req->fn) {
	case TIDE_MC_FN_SERVICE_READY:
		resp->u.str.ok = true;
		resp->u.str.val.ptr = (char *)TIDE_MC_SERVER_VERSION;
		resp->u.str.val.len = strlen(TIDE_MC_SERVER_VERSION);
		break;
	case TIDE_MC_FN_GET_FSDIR:
		resp->u.str.ok = true;
		resp->u.str.val.ptr = s->fsdir;
		resp->u.str.val.len = strlen(s->fsdir);
		break;
	case TIDE_MC_FN_GET_STORAGE_CONFIG:
		resp->u.storage_config.ok = true;
		resp->u.storage_config.val.fsdir.ptr = s->fsdir;
		resp->u.storage_config.val.fsdir.len = strlen(s->fsdir);
		resp->u.storage_config.val.enable_disk_eviction = s->o.enable_disk_eviction;
		resp->u.storage_config.val.quota_bytes = s->o.quota_bytes;
		break;
	case TIDE_MC_FN_MOUNT_SEGMENT:
		rc = tide_mc_table_mount_segment(t, &req->u.mount_segment.segment,
						 &req->u.mount_segment.client_id, now);
		set_void(&resp->u.status, rc);
		break;
	case TIDE_MC_FN_REMOUNT_SEGMENT:
		rc = tide_mc_table_remount_segments(t, req->u.remount_segment.segments.v,
						    req->u.remount_segment.segments.n,
						    &req->u.remount_segment.client_id, now);
		set_void(&resp->u.status, rc);
		break;
	case TIDE_MC_FN_UNMOUNT_SEGMENT:
		rc = tide_mc_table_unmount_segment(t, &req->u.unmount_segment.segment_id,
						   &req->u.unmount_segment.client_id, now);
		set_void(&resp->u.status, rc);
		break;
	case TIDE_MC_FN_GRACEFUL_UNMOUNT_SEGMENT:
		rc = tide_mc_table_graceful_unmount_segment(
			t, &req->u.unmount_segment.segment_id, &req->u.unmount_segment.client_id,
			req->u.unmount_segment.grace_period_ms, now);
		set_void(&resp->u.status, rc);
		break;
	case TIDE_MC_FN_PING:
		rc = tide_mc_table_ping(t, &req->u.ping.id, now, &resp->u.ping.val);
		resp->u.ping.ok = rc == 0;
		resp->u.ping.err = rc;
		break;
	case TIDE_MC_FN_EXIST_KEY:
		rc = tide_mc_table_exist_key(t, &req->u.key.key, now, &resp->u.exist.val);
		resp->u.exist.ok = rc == 0;
		resp->u.exist.err = rc;
		break;
	case TIDE_MC_FN_GET_REPLICA_LIST:
		rc = tide_mc_table_get_replica_list(t, &req->u.key.key, now, &w->arena,
						    &resp->u.replica_list.val);
		resp->u.replica_list.ok = rc == 0;
		resp->u.replica_list.err = rc;
		break;
	case TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX:
		rc = tide_mc_table_get_replica_list_by_regex(t, &req->u.key.key, now, &w->arena,
							     &resp->u.regex.val);
		resp->u.regex.ok = rc == 0;
		resp->u.regex.err = rc;
		break;
	case TIDE_MC_FN_PUT_START:
	case TIDE_MC_FN_UPSERT_START: {
		const struct tide_mc_put_start_req *r = &req->u.put_start;

		if (req->fn == TIDE_MC_FN_PUT_START) {
			rc = tide_mc_table_put_start(t, &r->client_id, &r->key, r->slice_length,
						     &r->config, now, &w->arena,
						     &resp->u.put_start.val);
		} else {
			rc = tide_mc_table_upsert_start(t, &r->client_id, &r->key, r->slice_length,
							&r->config, now, &w->arena,
							&resp->u.put_start.val);
		}
		resp->u.put_start.ok = rc == 0;
		resp->u.put_start.err = rc;
		break;
	}
	case TIDE_MC_FN_PUT_END:
	case TIDE_MC_FN_UPSERT_END: {
		const struct tide_mc_put_end_req *r = &req->u.put_end;

		if (req->fn == TIDE_MC_FN_PUT_END) {
			rc = tide_mc_table_put_end(t, &r->client_id, &r->meta.key,
						   &r->meta.object_checksum, r->replica_type, now);
		} else {
			rc = tide_mc_table_upsert_end(t, &r->client_id, &r->meta.key,
						      &r->meta.object_checksum, r->replica_type,
						      now);
		}
		set_void(&resp->u.status, rc);
		break;
	}
	case TIDE_MC_FN_PUT_REVOKE:
	case TIDE_MC_FN_UPSERT_REVOKE: {
		const struct tide_mc_put_revoke_req *r = &req->u.put_revoke;

		if (req->fn == TIDE_MC_FN_PUT_REVOKE) {
			rc = tide_mc_table_put_revoke(t, &r->client_id, &r->key, r->replica_type,
						      now);
		} else {
			rc = tide_mc_table_upsert_revoke(t, &r->client_id, &r->key, r->replica_type,
							 now);
		}
		set_void(&resp->u.status, rc);
		break;
	}
	case TIDE_MC_FN_REMOVE:
		rc = tide_mc_table_remove(t, &req->u.remove.key, req->u.remove.force, now);
		set_void(&resp->u.status, rc);
		break;
	case TIDE_MC_FN_REMOVE_BY_REGEX:
		rc = tide_mc_table_remove_by_regex(t, &req->u.remove.key, req->u.remove.force, now,
						   &resp->u.count.val);
		resp->u.count.ok = rc == 0;
		resp->u.count.err = rc;
		break;
	case TIDE_MC_FN_REMOVE_ALL:
		resp->u.removed = tide_mc_table_remove_all(t, req->u.remove_all.force, now);
		break;
	case TIDE_MC_FN_BATCH_QUERY_IP:
		rc = tide_mc_table_batch_query_ip(t, req->u.batch_query_ip.client_ids.v,
						  req->u.batch_query_ip.client_ids.n, &w->arena,
						  &resp->u.ip_map.val);
		resp->u.ip_map.ok = rc == 0;
		resp->u.ip_map.err = rc;
		break;
	case TIDE_MC_FN_QUERY_SEGMENT_STATUS:
		rc = tide_mc_table_query_segment_status(
			t, &req->u.query_segment_status.segment_name, &resp->u.segment_status.val);
		resp->u.segment_status.ok = rc == 0;
		resp->u.segment_status.err = rc;
		break;
	case TIDE_MC_FN_QUERY_SEGMENT_STATUS_BY_ID:
		rc = segment_status_by_id(w, &req->u.query_segment_status_by_id.id,
					  &resp->u.segment_status.val);
		resp->u.segment_status.ok = rc == 0;
		resp->u.segment_status.err = rc;
		break;
	case TIDE_MC_FN_FETCH_TASKS:
		/* The task manager is off: a stock master answers an empty list (capture). */
		resp->u.tasks.ok = true;
		break;
	case TIDE_MC_FN_TIDE_LEASE_GRANT: {
		const struct tide_mc_lease_grant_req *r = &req->u.lease_grant;

		rc = tide_mc_table_lease_grant(t, &r->client_id, r->size, &r->config, now,
					       &w->arena, &resp->u.lease.val);
		resp->u.lease.ok = rc == 0;
		resp->u.lease.err = rc;
		break;
	}
	case TIDE_MC_FN_TIDE_LEASE_RELEASE:
		rc = tide_mc_table_lease_release(t, &req->u.lease_release.client_id,
						 req->u.lease_release.lease_id, now);
		set_void(&resp->u.status, rc);
		break;
	case TIDE_MC_FN_BATCH_REPLICA_CLEAR: {
		const struct tide_mc_batch_replica_clear_req *r = &req->u.batch_replica_clear;

		/* The cleared keys borrow the request's strings, freed after the reply. */
		rc = tide_mc_table_batch_replica_clear(t, &r->client_id, r->keys.v, r->keys.n,
						       &r->segment_name, now, &w->arena,
						       &resp->u.cleared.val);
		resp->u.cleared.ok = rc == 0;
		resp->u.cleared.err = rc;
		break;
	}
	default:
		dispatch_batch(w, req, resp, now);
		break;
	}
}

bool
mc_resp_failed(const struct tide_mc_resp *resp)
{
	size_t i;

	switch (resp->fn) {
	case TIDE_MC_FN_SERVICE_READY:
	case TIDE_MC_FN_GET_FSDIR:
		return !resp->u.str.ok;
	case TIDE_MC_FN_GET_STORAGE_CONFIG:
		return !resp->u.storage_config.ok;
	case TIDE_MC_FN_PING:
		return !resp->u.ping.ok;
	case TIDE_MC_FN_EXIST_KEY:
		return !resp->u.exist.ok;
	case TIDE_MC_FN_GET_REPLICA_LIST:
		return !resp->u.replica_list.ok;
	case TIDE_MC_FN_GET_REPLICA_LIST_BY_REGEX:
		return !resp->u.regex.ok;
	case TIDE_MC_FN_PUT_START:
	case TIDE_MC_FN_UPSERT_START:
		return !resp->u.put_start.ok;
	case TIDE_MC_FN_REMOVE_BY_REGEX:
		return !resp->u.count.ok;
	case TIDE_MC_FN_REMOVE_ALL:
		return false;
	case TIDE_MC_FN_BATCH_QUERY_IP:
		return !resp->u.ip_map.ok;
	case TIDE_MC_FN_QUERY_SEGMENT_STATUS:
	case TIDE_MC_FN_QUERY_SEGMENT_STATUS_BY_ID:
		return !resp->u.segment_status.ok;
	case TIDE_MC_FN_FETCH_TASKS:
		return !resp->u.tasks.ok;
	case TIDE_MC_FN_TIDE_LEASE_GRANT:
		return !resp->u.lease.ok;
	case TIDE_MC_FN_BATCH_REPLICA_CLEAR:
		return !resp->u.cleared.ok;
	case TIDE_MC_FN_BATCH_EXIST_KEY:
		for (i = 0; i < resp->u.batch_exist.n; i++) {
			if (!resp->u.batch_exist.v[i].ok) {
				return true;
			}
		}
		return false;
	case TIDE_MC_FN_BATCH_GET_REPLICA_LIST:
		for (i = 0; i < resp->u.batch_replica_list.n; i++) {
			if (!resp->u.batch_replica_list.v[i].ok) {
				return true;
			}
		}
		return false;
	case TIDE_MC_FN_BATCH_PUT_START:
	case TIDE_MC_FN_BATCH_UPSERT_START:
		for (i = 0; i < resp->u.batch_put_start.n; i++) {
			if (!resp->u.batch_put_start.v[i].ok) {
				return true;
			}
		}
		return false;
	case TIDE_MC_FN_BATCH_PUT_END:
	case TIDE_MC_FN_BATCH_UPSERT_END:
	case TIDE_MC_FN_BATCH_PUT_REVOKE:
	case TIDE_MC_FN_BATCH_UPSERT_REVOKE:
	case TIDE_MC_FN_BATCH_REMOVE:
	case TIDE_MC_FN_TIDE_LEASE_COMMIT:
		for (i = 0; i < resp->u.batch_status.n; i++) {
			if (!resp->u.batch_status.v[i].ok) {
				return true;
			}
		}
		return false;
	default:
		return !resp->u.status.ok;
	}
}
