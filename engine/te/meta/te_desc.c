/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segment descriptor and rpc_meta JSON (Mooncake transfer_metadata.cpp field
 * names). Peer input is untrusted: every field is type- and range-checked and
 * the error text names the field.
 *
 * u64 numbers (buffer addr/length): JSON numbers reach cJSON as doubles, exact
 * only below 2^53. Decoding accepts a number when it is integral, >= 0 and
 * < 2^53 (a double of 2^53 or more may be a rounded neighbour, so it is
 * rejected rather than guessed), or a string of 1..20 decimal digits that fits
 * in u64. Encoding writes the exact decimal integer as a JSON number when the
 * value is < 2^53 (what stock Mooncake writes and reads) and a decimal string
 * otherwise (Tide peers read it back exactly; stock Mooncake would reject it,
 * but x86-64 and arm64 user addresses are far below 2^53).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "tide_log.h"

#define EXACT_LIMIT (UINT64_C(1) << 53)

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Exact decimal text of v, as a JSON number (< 2^53) or a string. NULL on ENOMEM. */
static cJSON *
u64_item(uint64_t v)
{
	char txt[24];

	snprintf(txt, sizeof(txt), "%" PRIu64, v);
	/* Raw keeps every digit; cJSON's own double printer may switch to exponent form. */
	return v < EXACT_LIMIT ? cJSON_CreateRaw(txt) : cJSON_CreateString(txt);
}

static bool
add(cJSON *obj, const char *key, cJSON *item)
{
	if (item == NULL)
		return false;
	if (!cJSON_AddItemToObject(obj, key, item)) {
		cJSON_Delete(item);
		return false;
	}
	return true;
}

/* [k0, k1, ...] as exact JSON numbers. NULL on ENOMEM. */
static cJSON *
keys_item(const uint32_t *keys, uint32_t n)
{
	cJSON *arr = cJSON_CreateArray();

	for (uint32_t i = 0; arr != NULL && i < n; i++) {
		cJSON *it = u64_item(keys[i]);

		if (it == NULL || !cJSON_AddItemToArray(arr, it)) {
			cJSON_Delete(it);
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

/* A shared buffer's "tide_shm": {"fd": n, "ino": n, "off": n}. */
static bool
encode_shm(cJSON *o, const struct te_desc_buf *b)
{
	cJSON *shm = cJSON_CreateObject();
	char fd[16];

	if (shm == NULL || !cJSON_AddItemToObject(o, "tide_shm", shm)) {
		cJSON_Delete(shm);
		return false;
	}
	snprintf(fd, sizeof(fd), "%" PRId32, b->shm_fd);
	return add(shm, "fd", cJSON_CreateRaw(fd)) && add(shm, "ino", u64_item(b->shm_ino)) &&
	       add(shm, "off", u64_item(b->shm_off));
}

/* "devices" and Mooncake's "priority_matrix": for every buffer location, every device
 * preferred (Tide spreads over all devices itself). */
static bool
encode_rdma(cJSON *root, const struct te_desc *desc)
{
	cJSON *devs = cJSON_CreateArray(), *pm;
	bool ok = add(root, "devices", devs);

	for (uint32_t i = 0; ok && i < desc->ndevs; i++) {
		cJSON *o = cJSON_CreateObject();
		char lid[8];

		ok = o != NULL && cJSON_AddItemToArray(devs, o);
		if (!ok) {
			cJSON_Delete(o);
			break;
		}
		snprintf(lid, sizeof(lid), "%u", (unsigned)desc->devs[i].lid);
		ok = add(o, "name", cJSON_CreateString(desc->devs[i].name)) &&
		     add(o, "lid", cJSON_CreateRaw(lid)) &&
		     add(o, "gid", cJSON_CreateString(desc->devs[i].gid));
	}
	pm = ok ? cJSON_CreateObject() : NULL;
	ok = ok && add(root, "priority_matrix", pm);
	for (uint32_t b = 0; ok && b < desc->nbufs; b++) {
		cJSON *entry, *pref, *avail;

		if (cJSON_GetObjectItemCaseSensitive(pm, desc->bufs[b].name) != NULL)
			continue;
		entry = cJSON_CreateArray();
		ok = add(pm, desc->bufs[b].name, entry);
		pref = ok ? cJSON_CreateArray() : NULL;
		ok = ok && pref != NULL && cJSON_AddItemToArray(entry, pref);
		for (uint32_t i = 0; ok && i < desc->ndevs; i++) {
			cJSON *n = cJSON_CreateString(desc->devs[i].name);

			ok = n != NULL && cJSON_AddItemToArray(pref, n);
			if (!ok)
				cJSON_Delete(n);
		}
		avail = ok ? cJSON_CreateArray() : NULL;
		ok = ok && avail != NULL && cJSON_AddItemToArray(entry, avail);
	}
	return ok;
}

bool
te_desc_is_rdma(const struct te_desc *d)
{
	return strcmp(d->protocol, "rdma") == 0 && d->ndevs > 0;
}

int
te_desc_encode(const struct te_desc *desc, char **json)
{
	cJSON *root, *arr;
	char inst[20], num[16];
	bool rdma = strcmp(desc->protocol, "rdma") == 0;
	bool ok;

	root = cJSON_CreateObject();
	if (root == NULL)
		return -ENOMEM;
	snprintf(inst, sizeof(inst), "%016" PRIx64, desc->instance);
	ok = add(root, "name", cJSON_CreateString(desc->name)) &&
	     add(root, "protocol", cJSON_CreateString(desc->protocol));
	snprintf(num, sizeof(num), "%u", (unsigned)desc->tcp_data_port);
	ok = ok && add(root, "tcp_data_port", cJSON_CreateRaw(num));
	/* 0 means "unset": write Mooncake's default so the decoder's 1.. range holds. */
	snprintf(num, sizeof(num), "%" PRIu32,
		 desc->tcp_proto_version != 0 ? desc->tcp_proto_version : TE_PROTO_V1);
	ok = ok && add(root, "tcp_proto_version", cJSON_CreateRaw(num)) &&
	     add(root, "timestamp", cJSON_CreateString(desc->timestamp)) &&
	     add(root, "tide_instance", cJSON_CreateString(inst));
	if (ok && desc->data_ip[0] != '\0')
		ok = add(root, "tide_data_ip", cJSON_CreateString(desc->data_ip));
	if (ok && desc->pid > 0 && desc->host_id[0] != '\0') {
		snprintf(num, sizeof(num), "%" PRId32, desc->pid);
		ok = add(root, "tide_pid", cJSON_CreateRaw(num)) &&
		     add(root, "tide_host", cJSON_CreateString(desc->host_id));
	}
	arr = ok ? cJSON_CreateArray() : NULL;
	ok = ok && add(root, "buffers", arr);
	for (uint32_t i = 0; ok && i < desc->nbufs; i++) {
		const struct te_desc_buf *b = &desc->bufs[i];
		cJSON *o = cJSON_CreateObject();

		ok = o != NULL && cJSON_AddItemToArray(arr, o);
		if (!ok) {
			cJSON_Delete(o);
			break;
		}
		ok = add(o, "name", cJSON_CreateString(b->name)) &&
		     add(o, "addr", u64_item(b->addr)) && add(o, "length", u64_item(b->length));
		if (ok && rdma)
			ok = add(o, "rkey", keys_item(b->rkey, b->nkeys)) &&
			     add(o, "lkey", keys_item(b->lkey, b->nkeys));
		if (ok && b->shm)
			ok = encode_shm(o, b);
	}
	if (ok && rdma)
		ok = encode_rdma(root, desc);
	*json = ok ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return *json != NULL ? 0 : -ENOMEM;
}

/* Parse untrusted JSON text of exactly len bytes; rejects embedded NULs and trailing junk. */
static cJSON *
parse(const char *json, size_t len, char *err, size_t errlen)
{
	const char *end = NULL;
	cJSON *root;

	if (json == NULL || len == 0) {
		seterr(err, errlen, "json: empty");
		return NULL;
	}
	if (memchr(json, '\0', len) != NULL) {
		seterr(err, errlen, "json: embedded NUL");
		return NULL;
	}
	/* cJSON's own trailing-text check wants the NUL inside len; check the end here. */
	root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (root == NULL) {
		seterr(err, errlen, "json: malformed");
		return NULL;
	}
	while (end < json + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
		end++;
	if (end != json + len) {
		seterr(err, errlen, "json: trailing text at offset %zu", (size_t)(end - json));
		cJSON_Delete(root);
		return NULL;
	}
	if (!cJSON_IsObject(root)) {
		seterr(err, errlen, "json: not an object");
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

/*
 * String member into dst[dstlen]. required: absent is an error; otherwise absent
 * leaves dst untouched and returns 0. Over-long: error unless truncate.
 */
static int
get_str(const cJSON *obj, const char *key, const char *path, char *dst, size_t dstlen,
	bool required, bool nonempty, bool truncate, char *err, size_t errlen)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	size_t n;

	if (it == NULL) {
		if (!required)
			return 0;
		seterr(err, errlen, "%s%s: missing", path, key);
		return -EPROTO;
	}
	if (!cJSON_IsString(it) || it->valuestring == NULL) {
		seterr(err, errlen, "%s%s: not a string", path, key);
		return -EPROTO;
	}
	n = strlen(it->valuestring);
	if (nonempty && n == 0) {
		seterr(err, errlen, "%s%s: empty", path, key);
		return -EPROTO;
	}
	if (n >= dstlen) {
		if (!truncate) {
			seterr(err, errlen, "%s%s: longer than %zu bytes", path, key, dstlen - 1);
			return -EPROTO;
		}
		n = dstlen - 1;
	}
	memcpy(dst, it->valuestring, n);
	dst[n] = '\0';
	return 0;
}

/* Unsigned integer from a JSON number (integral, < 2^53) or a decimal string. */
static int
item_u64(const cJSON *it, bool allow_string, uint64_t *out, const char **why)
{
	if (cJSON_IsNumber(it)) {
		double d = it->valuedouble;

		if (!isfinite(d) || d != floor(d)) {
			*why = "not an integer";
			return -EPROTO;
		}
		if (d < 0) {
			*why = "negative";
			return -EPROTO;
		}
		if (d >= (double)EXACT_LIMIT) {
			*why = "number >= 2^53 (not exact; send a decimal string)";
			return -EPROTO;
		}
		*out = (uint64_t)d;
		return 0;
	}
	if (allow_string && cJSON_IsString(it) && it->valuestring != NULL) {
		const char *s = it->valuestring;
		uint64_t v = 0;
		size_t i;

		for (i = 0; s[i] != '\0'; i++) {
			unsigned dig = (unsigned)(s[i] - '0');

			if (s[i] < '0' || s[i] > '9') {
				*why = "string is not a decimal integer";
				return -EPROTO;
			}
			if (v > (UINT64_MAX - dig) / 10) {
				*why = "out of range (> 2^64-1)";
				return -EPROTO;
			}
			v = v * 10 + dig;
		}
		if (i == 0) {
			*why = "empty string";
			return -EPROTO;
		}
		*out = v;
		return 0;
	}
	*why = allow_string ? "not a number or decimal string" : "not a number";
	return -EPROTO;
}

static int
get_u64(const cJSON *obj, const char *key, const char *path, bool allow_string, bool *present,
	uint64_t *out, char *err, size_t errlen)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	const char *why = NULL;

	*present = it != NULL;
	if (it == NULL)
		return 0;
	if (item_u64(it, allow_string, out, &why) < 0) {
		seterr(err, errlen, "%s%s: %s", path, key, why);
		return -EPROTO;
	}
	return 0;
}

/* get_u64() of a key that must be there ("<path><key>: missing" otherwise). */
static int
need_u64(const cJSON *obj, const char *key, const char *path, bool allow_string, uint64_t *out,
	 char *err, size_t errlen)
{
	bool present;
	int rc = get_u64(obj, key, path, allow_string, &present, out, err, errlen);

	if (rc == 0 && !present) {
		seterr(err, errlen, "%s%s: missing", path, key);
		rc = -EPROTO;
	}
	return rc;
}

static int
hex_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];
		unsigned dig;

		if (i >= 16)
			return -EPROTO;
		if (c >= '0' && c <= '9')
			dig = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			dig = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			dig = (unsigned)(c - 'A' + 10);
		else
			return -EPROTO;
		v = v << 4 | dig;
	}
	if (i == 0)
		return -EPROTO;
	*out = v;
	return 0;
}

struct sort_ent {
	struct te_desc_buf b;
	uint32_t idx; /* position in the peer's array, for error texts */
};

static int
cmp_ent(const void *a, const void *b)
{
	const struct sort_ent *x = a, *y = b;

	if (x->b.addr != y->b.addr)
		return x->b.addr < y->b.addr ? -1 : 1;
	return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* Sort ents by addr and reject overlaps. Entries are already non-empty and non-wrapping. */
static int
sort_check(struct sort_ent *e, uint32_t n, char *err, size_t errlen)
{
	qsort(e, n, sizeof(*e), cmp_ent);
	for (uint32_t i = 1; i < n; i++) {
		if (e[i - 1].b.addr + e[i - 1].b.length > e[i].b.addr) {
			seterr(err, errlen,
			       "buffers[%" PRIu32 "]: overlaps buffers[%" PRIu32 "] ([0x%" PRIx64
			       ", +%" PRIu64 ") vs [0x%" PRIx64 ", +%" PRIu64 "))",
			       e[i].idx, e[i - 1].idx, e[i].b.addr, e[i].b.length, e[i - 1].b.addr,
			       e[i - 1].b.length);
			return -EPROTO;
		}
	}
	return 0;
}

static int
check_buf(const struct te_desc_buf *b, uint32_t i, char *err, size_t errlen)
{
	if (b->name[0] == '\0') {
		seterr(err, errlen, "buffers[%" PRIu32 "].name: empty", i);
		return -EPROTO;
	}
	if (b->addr == 0) {
		seterr(err, errlen, "buffers[%" PRIu32 "].addr: zero", i);
		return -EPROTO;
	}
	if (b->length == 0) {
		seterr(err, errlen, "buffers[%" PRIu32 "].length: zero", i);
		return -EPROTO;
	}
	if (b->length > UINT64_MAX - b->addr) {
		seterr(err, errlen, "buffers[%" PRIu32 "]: addr + length wraps past 2^64", i);
		return -EPROTO;
	}
	return 0;
}

/* A buffer's optional "tide_shm" object (te_meta.h). */
static int
decode_shm(const cJSON *buf, struct te_desc_buf *b, const char *path, char *err, size_t errlen)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(buf, "tide_shm");
	char sub[48];
	uint64_t fd = 0;
	int rc;

	if (o == NULL || cJSON_IsNull(o))
		return 0;
	if (!cJSON_IsObject(o)) {
		seterr(err, errlen, "%stide_shm: not an object", path);
		return -EPROTO;
	}
	snprintf(sub, sizeof(sub), "%stide_shm.", path);
	rc = need_u64(o, "fd", sub, false, &fd, err, errlen);
	if (rc == 0 && fd > INT32_MAX) {
		seterr(err, errlen, "%sfd: > 2^31-1", sub);
		rc = -EPROTO;
	}
	if (rc == 0)
		rc = need_u64(o, "ino", sub, true, &b->shm_ino, err, errlen);
	if (rc == 0)
		rc = need_u64(o, "off", sub, true, &b->shm_off, err, errlen);
	if (rc != 0)
		return rc;
	b->shm = true;
	b->shm_fd = (int32_t)fd;
	return 0;
}

/* A u32 array of exactly `want` entries (one key per device). */
static int
get_keys(const cJSON *obj, const char *key, const char *path, uint32_t *out, uint32_t *n,
	 uint32_t want, char *err, size_t errlen)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key), *it;
	uint32_t i = 0;

	if (arr == NULL || !cJSON_IsArray(arr)) {
		seterr(err, errlen, "%s%s: %s", path, key,
		       arr == NULL ? "missing" : "not an array");
		return -EPROTO;
	}
	if ((uint32_t)cJSON_GetArraySize(arr) != want) {
		seterr(err, errlen, "%s%s: %d keys for %" PRIu32 " devices", path, key,
		       cJSON_GetArraySize(arr), want);
		return -EPROTO;
	}
	cJSON_ArrayForEach(it, arr)
	{
		const char *why = NULL;
		uint64_t v;

		if (item_u64(it, false, &v, &why) < 0 || v > UINT32_MAX) {
			seterr(err, errlen, "%s%s[%" PRIu32 "]: %s", path, key, i,
			       why ? why : "> 2^32-1");
			return -EPROTO;
		}
		out[i++] = (uint32_t)v;
	}
	*n = i;
	return 0;
}

static int
decode_devices(const cJSON *root, struct te_desc *d, char *err, size_t errlen)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "devices"), *it;
	int cnt;

	if (arr == NULL || cJSON_IsNull(arr))
		return 0; /* checked against the buffers in decode_bufs */
	if (!cJSON_IsArray(arr)) {
		seterr(err, errlen, "devices: not an array");
		return -EPROTO;
	}
	cnt = cJSON_GetArraySize(arr);
	if (cnt > TE_DESC_MAX_DEVS) {
		seterr(err, errlen, "devices: %d entries (limit %d)", cnt, TE_DESC_MAX_DEVS);
		return -EPROTO;
	}
	cJSON_ArrayForEach(it, arr)
	{
		struct te_desc_dev *dv = &d->devs[d->ndevs];
		char path[32];
		uint64_t lid = 0;
		bool present;
		int rc;

		snprintf(path, sizeof(path), "devices[%" PRIu32 "].", d->ndevs);
		if (!cJSON_IsObject(it)) {
			seterr(err, errlen, "devices[%" PRIu32 "]: not an object", d->ndevs);
			return -EPROTO;
		}
		rc = get_str(it, "name", path, dv->name, sizeof(dv->name), true, true, false, err,
			     errlen);
		if (rc == 0)
			rc = get_str(it, "gid", path, dv->gid, sizeof(dv->gid), true, true, false,
				     err, errlen);
		if (rc == 0)
			rc = get_u64(it, "lid", path, false, &present, &lid, err, errlen);
		if (rc != 0)
			return rc;
		if (lid > 65535) {
			seterr(err, errlen, "%slid: %" PRIu64 " > 65535", path, lid);
			return -EPROTO;
		}
		dv->lid = (uint16_t)lid;
		d->ndevs++;
	}
	return 0;
}

static int
decode_bufs(const cJSON *arr, struct te_desc *d, char *err, size_t errlen)
{
	bool rdma = strcmp(d->protocol, "rdma") == 0;
	struct sort_ent *ents;
	const cJSON *it;
	uint32_t n = 0;
	int cnt, rc = 0;

	cnt = cJSON_GetArraySize(arr);
	if (cnt < 0 || cnt > TE_DESC_MAX_BUFS) {
		seterr(err, errlen, "buffers: %d entries (limit %d)", cnt, TE_DESC_MAX_BUFS);
		return -EPROTO;
	}
	if (cnt == 0)
		return 0;
	if (rdma && d->ndevs == 0) {
		seterr(err, errlen, "devices: none, but %d RDMA buffers need keys", cnt);
		return -EPROTO;
	}
	ents = calloc((size_t)cnt, sizeof(*ents));
	if (ents == NULL)
		return -ENOMEM;
	cJSON_ArrayForEach(it, arr)
	{
		struct te_desc_buf *b = &ents[n].b;
		char path[32];

		snprintf(path, sizeof(path), "buffers[%" PRIu32 "].", n);
		ents[n].idx = n;
		if (!cJSON_IsObject(it)) {
			seterr(err, errlen, "buffers[%" PRIu32 "]: not an object", n);
			rc = -EPROTO;
			break;
		}
		rc = get_str(it, "name", path, b->name, sizeof(b->name), true, true, false, err,
			     errlen);
		if (rc == 0)
			rc = need_u64(it, "addr", path, true, &b->addr, err, errlen);
		if (rc == 0)
			rc = need_u64(it, "length", path, true, &b->length, err, errlen);
		if (rc == 0)
			rc = check_buf(b, n, err, errlen);
		if (rc == 0 && rdma) {
			rc = get_keys(it, "rkey", path, b->rkey, &b->nkeys, d->ndevs, err, errlen);
			if (rc == 0) {
				uint32_t nl = 0;

				rc = get_keys(it, "lkey", path, b->lkey, &nl, d->ndevs, err,
					      errlen);
			}
		}
		if (rc == 0)
			rc = decode_shm(it, b, path, err, errlen);
		if (rc != 0)
			break;
		n++;
	}
	if (rc == 0)
		rc = sort_check(ents, n, err, errlen);
	if (rc == 0) {
		d->bufs = malloc((size_t)n * sizeof(*d->bufs));
		if (d->bufs == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0) {
		for (uint32_t i = 0; i < n; i++)
			d->bufs[i] = ents[i].b;
		d->nbufs = n;
	}
	free(ents);
	return rc;
}

static int
decode_root(const cJSON *root, struct te_desc *d, char *err, size_t errlen)
{
	const cJSON *it;
	uint64_t v;
	bool present, rdma;
	int rc;

	rc = get_str(root, "name", "", d->name, sizeof(d->name), true, true, false, err, errlen);
	if (rc == 0)
		rc = get_str(root, "protocol", "", d->protocol, sizeof(d->protocol), true, true,
			     false, err, errlen);
	if (rc != 0)
		return rc;
	rdma = strcmp(d->protocol, "rdma") == 0;
	rc = get_u64(root, "tcp_data_port", "", false, &present, &v, err, errlen);
	if (rc != 0)
		return rc;
	if (!present && !rdma) {
		seterr(err, errlen, "tcp_data_port: missing");
		return -EPROTO;
	}
	if (!present || (rdma && v == 0)) {
		v = 0; /* an RDMA-only node */
	} else if (v == 0 || v > 65535) {
		seterr(err, errlen, "tcp_data_port: %" PRIu64 " not in 1..65535", v);
		return -EPROTO;
	}
	d->tcp_data_port = (uint16_t)v;
	rc = get_u64(root, "tcp_proto_version", "", false, &present, &v, err, errlen);
	if (rc != 0)
		return rc;
	if (present && (v == 0 || v > UINT32_MAX)) {
		seterr(err, errlen, "tcp_proto_version: %" PRIu64 " out of range", v);
		return -EPROTO;
	}
	d->tcp_proto_version = present ? (uint32_t)v : TE_PROTO_V1;
	/* Informational only: a long or odd timestamp is truncated, never fatal. */
	rc = get_str(root, "timestamp", "", d->timestamp, sizeof(d->timestamp), false, false, true,
		     err, errlen);
	if (rc != 0)
		return rc;
	it = cJSON_GetObjectItemCaseSensitive(root, "tide_instance");
	if (it != NULL) {
		if (!cJSON_IsString(it) || it->valuestring == NULL ||
		    hex_u64(it->valuestring, &d->instance) != 0) {
			seterr(err, errlen, "tide_instance: not a string of 1..16 hex digits");
			return -EPROTO;
		}
	}
	it = cJSON_GetObjectItemCaseSensitive(root, "tide_data_ip");
	if (it != NULL) {
		struct in_addr ia;

		if (!cJSON_IsString(it) || it->valuestring == NULL ||
		    strlen(it->valuestring) >= sizeof(d->data_ip) ||
		    inet_pton(AF_INET, it->valuestring, &ia) != 1) {
			seterr(err, errlen, "tide_data_ip: not an IPv4 address");
			return -EPROTO;
		}
		snprintf(d->data_ip, sizeof(d->data_ip), "%s", it->valuestring);
	}
	rc = get_u64(root, "tide_pid", "", false, &present, &v, err, errlen);
	if (rc != 0)
		return rc;
	if (present) {
		if (v == 0 || v > INT32_MAX) {
			seterr(err, errlen, "tide_pid: %" PRIu64 " not in 1..2^31-1", v);
			return -EPROTO;
		}
		d->pid = (int32_t)v;
		rc = get_str(root, "tide_host", "", d->host_id, sizeof(d->host_id), true, true,
			     false, err, errlen);
		if (rc != 0)
			return rc;
	}
	if (rdma) {
		rc = decode_devices(root, d, err, errlen);
		if (rc != 0)
			return rc;
	}
	it = cJSON_GetObjectItemCaseSensitive(root, "buffers");
	if (it == NULL || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsArray(it)) {
		seterr(err, errlen, "buffers: not an array");
		return -EPROTO;
	}
	return decode_bufs(it, d, err, errlen);
}

int
te_desc_decode(const char *json, size_t len, struct te_desc **out, char *err, size_t errlen)
{
	struct te_desc *d;
	cJSON *root;
	int rc;

	root = parse(json, len, err, errlen);
	if (root == NULL)
		return -EPROTO;
	d = calloc(1, sizeof(*d));
	if (d == NULL) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	rc = decode_root(root, d, err, errlen);
	cJSON_Delete(root);
	if (rc != 0) {
		te_desc_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void
te_desc_free(struct te_desc *desc)
{
	if (desc == NULL)
		return;
	free(desc->bufs);
	free(desc);
}

int
te_desc_normalize(struct te_desc *desc, char *err, size_t errlen)
{
	struct sort_ent *e;
	int rc = 0;

	if (desc->nbufs > TE_DESC_MAX_BUFS) {
		seterr(err, errlen, "buffers: %" PRIu32 " entries (limit %d)", desc->nbufs,
		       TE_DESC_MAX_BUFS);
		return -EINVAL;
	}
	if (desc->nbufs == 0)
		return 0;
	e = malloc((size_t)desc->nbufs * sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < desc->nbufs && rc == 0; i++) {
		e[i].b = desc->bufs[i];
		e[i].idx = i;
		rc = check_buf(&e[i].b, i, err, errlen);
	}
	if (rc == 0)
		rc = sort_check(e, desc->nbufs, err, errlen);
	if (rc == 0) {
		for (uint32_t i = 0; i < desc->nbufs; i++)
			desc->bufs[i] = e[i].b;
	}
	free(e);
	return rc == 0 ? 0 : -EINVAL;
}

int
te_desc_dup(const struct te_desc *desc, struct te_desc **out)
{
	struct te_desc *d = malloc(sizeof(*d));

	if (d == NULL)
		return -ENOMEM;
	*d = *desc;
	d->bufs = NULL;
	if (desc->nbufs > 0) {
		d->bufs = malloc((size_t)desc->nbufs * sizeof(*d->bufs));
		if (d->bufs == NULL) {
			free(d);
			return -ENOMEM;
		}
		memcpy(d->bufs, desc->bufs, (size_t)desc->nbufs * sizeof(*d->bufs));
	}
	*out = d;
	return 0;
}

bool
te_desc_contains(const struct te_desc *desc, uint64_t addr, uint64_t len)
{
	uint32_t lo = 0, hi = desc->nbufs;
	const struct te_desc_buf *b;
	uint64_t off;

	/* Find the last buffer whose addr <= addr: invariant bufs[<lo] <= addr < bufs[>=hi]. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (desc->bufs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	b = &desc->bufs[lo - 1];
	off = addr - b->addr;
	if (off >= b->length)
		return false;
	return len <= b->length - off;
}

bool
te_desc_equal(const struct te_desc *a, const struct te_desc *b)
{
	if (strcmp(a->name, b->name) != 0 || a->tcp_data_port != b->tcp_data_port ||
	    a->tcp_proto_version != b->tcp_proto_version || a->instance != b->instance ||
	    strcmp(a->data_ip, b->data_ip) != 0 || a->nbufs != b->nbufs ||
	    strcmp(a->protocol, b->protocol) != 0 || a->ndevs != b->ndevs || a->pid != b->pid ||
	    strcmp(a->host_id, b->host_id) != 0)
		return false;
	for (uint32_t i = 0; i < a->ndevs; i++) {
		if (strcmp(a->devs[i].name, b->devs[i].name) != 0 ||
		    strcmp(a->devs[i].gid, b->devs[i].gid) != 0 || a->devs[i].lid != b->devs[i].lid)
			return false;
	}
	for (uint32_t i = 0; i < a->nbufs; i++) {
		const struct te_desc_buf *x = &a->bufs[i], *y = &b->bufs[i];

		if (x->addr != y->addr || x->length != y->length || strcmp(x->name, y->name) != 0 ||
		    x->nkeys != y->nkeys ||
		    memcmp(x->rkey, y->rkey, x->nkeys * sizeof(x->rkey[0])) != 0 ||
		    memcmp(x->lkey, y->lkey, x->nkeys * sizeof(x->lkey[0])) != 0 ||
		    x->shm != y->shm ||
		    (x->shm && (x->shm_fd != y->shm_fd || x->shm_ino != y->shm_ino ||
				x->shm_off != y->shm_off)))
			return false;
	}
	return true;
}

int
te_rpcmeta_encode(const char *host, uint16_t port, char **json)
{
	cJSON *root = cJSON_CreateObject();
	char num[8];
	bool ok;

	if (root == NULL)
		return -ENOMEM;
	snprintf(num, sizeof(num), "%u", (unsigned)port);
	ok = add(root, "ip_or_host_name", cJSON_CreateString(host)) &&
	     add(root, "rpc_port", cJSON_CreateRaw(num));
	*json = ok ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return *json != NULL ? 0 : -ENOMEM;
}

int
te_rpcmeta_decode(const char *json, size_t len, char *host, size_t host_len, uint16_t *port,
		  char *err, size_t errlen)
{
	cJSON *root;
	uint64_t v = 0;
	int rc;

	root = parse(json, len, err, errlen);
	if (root == NULL)
		return -EPROTO;
	rc = get_str(root, "ip_or_host_name", "", host, host_len, true, true, false, err, errlen);
	if (rc == 0)
		rc = need_u64(root, "rpc_port", "", false, &v, err, errlen);
	if (rc == 0 && (v == 0 || v > 65535)) {
		seterr(err, errlen, "rpc_port: %" PRIu64 " not in 1..65535", v);
		rc = -EPROTO;
	}
	if (rc == 0)
		*port = (uint16_t)v;
	cJSON_Delete(root);
	return rc;
}
