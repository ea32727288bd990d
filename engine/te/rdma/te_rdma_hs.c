/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mooncake's Connection handshake message (TransferHandshakeUtil field names).
 * Peer input is untrusted: types and sizes are checked and the error names
 * the field.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "te_rdma.h"

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int
te_rdma_hs_encode(const struct te_rdma_hs *h, char **json)
{
	cJSON *root = cJSON_CreateObject(), *arr;
	bool ok = root != NULL;

	ok = ok && cJSON_AddStringToObject(root, "protocol", "rdma") != NULL &&
	     cJSON_AddStringToObject(root, "local_nic_path", h->local_nic_path) != NULL &&
	     cJSON_AddNumberToObject(root, "local_lid", h->local_lid) != NULL &&
	     cJSON_AddStringToObject(root, "local_gid", h->local_gid) != NULL &&
	     cJSON_AddStringToObject(root, "peer_nic_path", h->peer_nic_path) != NULL;
	arr = ok ? cJSON_AddArrayToObject(root, "qp_num") : NULL;
	ok = ok && arr != NULL;
	for (uint32_t i = 0; ok && i < h->nqp; i++) {
		cJSON *n = cJSON_CreateNumber(h->qp_num[i]);

		ok = n != NULL && cJSON_AddItemToArray(arr, n);
		if (!ok) {
			cJSON_Delete(n);
		}
	}
	ok = ok && cJSON_AddStringToObject(root, "reply_msg", h->reply_msg) != NULL;
	*json = ok ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return *json != NULL ? 0 : -ENOMEM;
}

static int
get_str(const cJSON *root, const char *key, char *dst, size_t dstlen, char *err, size_t errlen)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);

	dst[0] = '\0';
	if (it == NULL || cJSON_IsNull(it)) {
		return 0;
	}
	if (!cJSON_IsString(it) || it->valuestring == NULL) {
		seterr(err, errlen, "%s: not a string", key);
		return -EPROTO;
	}
	if (strlen(it->valuestring) >= dstlen) {
		seterr(err, errlen, "%s: longer than %zu bytes", key, dstlen - 1);
		return -EPROTO;
	}
	snprintf(dst, dstlen, "%s", it->valuestring);
	return 0;
}

static bool
as_u32(const cJSON *it, uint32_t *out)
{
	double d;

	if (!cJSON_IsNumber(it)) {
		return false;
	}
	d = it->valuedouble;
	if (!isfinite(d) || d < 0 || d > UINT32_MAX || d != floor(d)) {
		return false;
	}
	*out = (uint32_t)d;
	return true;
}

int
te_rdma_hs_decode(const char *json, size_t len, struct te_rdma_hs *h, char *err, size_t errlen)
{
	const cJSON *it;
	cJSON *root;
	int rc;

	memset(h, 0, sizeof(*h));
	if (json == NULL || len == 0 || memchr(json, '\0', len) != NULL) {
		seterr(err, errlen, "json: empty or embedded NUL");
		return -EPROTO;
	}
	root = cJSON_ParseWithLength(json, len);
	if (root == NULL || !cJSON_IsObject(root)) {
		seterr(err, errlen, "json: malformed or not an object");
		cJSON_Delete(root);
		return -EPROTO;
	}
	rc = get_str(root, "local_nic_path", h->local_nic_path, sizeof(h->local_nic_path), err,
		     errlen);
	if (rc == 0) {
		rc = get_str(root, "peer_nic_path", h->peer_nic_path, sizeof(h->peer_nic_path), err,
			     errlen);
	}
	if (rc == 0) {
		rc = get_str(root, "local_gid", h->local_gid, sizeof(h->local_gid), err, errlen);
	}
	if (rc == 0) {
		rc = get_str(root, "reply_msg", h->reply_msg, sizeof(h->reply_msg), err, errlen);
		if (rc != 0) {
			/* An over-long refusal is still a refusal: keep its start. */
			it = cJSON_GetObjectItemCaseSensitive(root, "reply_msg");
			if (cJSON_IsString(it)) {
				snprintf(h->reply_msg, sizeof(h->reply_msg), "%s", it->valuestring);
				rc = 0;
			}
		}
	}
	it = cJSON_GetObjectItemCaseSensitive(root, "local_lid");
	if (rc == 0 && it != NULL) {
		uint32_t v;

		if (!as_u32(it, &v) || v > 65535) {
			seterr(err, errlen, "local_lid: not an integer in 0..65535");
			rc = -EPROTO;
		} else {
			h->has_lid = true;
			h->local_lid = (uint16_t)v;
		}
	}
	it = cJSON_GetObjectItemCaseSensitive(root, "qp_num");
	if (rc == 0 && it != NULL) {
		const cJSON *q;

		if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) > TE_RDMA_MAX_QP_PER_EP) {
			seterr(err, errlen, "qp_num: not an array of at most %d QP numbers",
			       TE_RDMA_MAX_QP_PER_EP);
			rc = -EPROTO;
		} else {
			cJSON_ArrayForEach(q, it)
			{
				if (!as_u32(q, &h->qp_num[h->nqp])) {
					seterr(err, errlen, "qp_num[%" PRIu32 "]: not a u32",
					       h->nqp);
					rc = -EPROTO;
					break;
				}
				h->nqp++;
			}
		}
	}
	cJSON_Delete(root);
	return rc;
}

int
te_rdma_nic_path_split(const char *path, char *seg, size_t seglen, char *dev, size_t devlen)
{
	const char *at = strrchr(path, '@');
	size_t sl;

	if (at == NULL || at == path || at[1] == '\0') {
		return -EINVAL;
	}
	sl = (size_t)(at - path);
	if (sl >= seglen || strlen(at + 1) >= devlen) {
		return -EINVAL;
	}
	memcpy(seg, path, sl);
	seg[sl] = '\0';
	snprintf(dev, devlen, "%s", at + 1);
	return 0;
}
