/* SPDX-License-Identifier: Apache-2.0 */
/*
 * struct_pack primitives and the descriptor engine: type literal, hash,
 * encoder, decoder, destructor and equality, all driven by struct mc_type
 * nodes (spec sections 2.1-2.3).
 *
 * Decoder bounds: every read is checked against the bytes left; a length is
 * rejected when it exceeds them, and an element count when count * (smallest
 * wire size of one element, >= 1 byte) exceeds them, BEFORE anything is
 * allocated. So one decode allocates at most (input bytes) x (largest C
 * element size / 1) bytes of arrays plus (input bytes + #strings) of string
 * copies. Type nesting is fixed by the static descriptors (depth <= ~10), so
 * the recursion is bounded too.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "mc_internal.h"
#include "tide_buf.h"
#include "tide_log.h"

#define MC_PATH_MAX 16

int
mc_md5_be32(const void *p, size_t n, uint32_t *out)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dl = 0;
	const EVP_MD *md = EVP_md5();

	if (md == NULL || EVP_Digest(p, n, d, &dl, md, NULL) != 1 || dl != 16) {
		return -ENOTSUP;
	}
	*out = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
	return 0;
}

void
mc_err_set(struct tide_mc_err *err, uint8_t errc, size_t offset, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL) {
		return;
	}
	err->errc = errc;
	err->offset = offset;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

uint8_t *
mc_buf_reserve(struct tide_mc_buf *b, size_t n)
{
	void *p = b->data;

	if (tide_grow(&p, &b->cap, b->len, n, 256, 0) != 0) {
		return NULL;
	}
	b->data = p;
	return b->data + b->len;
}

void
tide_mc_buf_release(struct tide_mc_buf *buf)
{
	if (buf == NULL) {
		return;
	}
	free(buf->data);
	buf->data = NULL;
	buf->len = 0;
	buf->cap = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Type literal                                                                              */
/* ---------------------------------------------------------------------------------------- */

static int
lit_put(uint8_t *out, size_t cap, size_t *len, uint8_t b)
{
	if (*len >= cap) {
		return -EOVERFLOW;
	}
	out[(*len)++] = b;
	return 0;
}

static int
lit_fields(const struct mc_type *t, uint8_t *out, size_t cap, size_t *len)
{
	for (unsigned i = 0; i < t->nfields; i++) {
		int rc = mc_literal(t->fields[i].type, out, cap, len);
		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

/* struct_pack size literal: values below 127 are one byte n + 129 (spec 2.3). */
static int
lit_size(uint8_t n, uint8_t *out, size_t cap, size_t *len)
{
	if (n >= 127) {
		return -EOVERFLOW;
	}
	return lit_put(out, cap, len, (uint8_t)(n + 129));
}

int
mc_literal(const struct mc_type *t, uint8_t *out, size_t cap, size_t *len)
{
	int rc;

	switch (t->kind) {
	case MC_K_BOOL:
		return lit_put(out, cap, len, 0x0b);
	case MC_K_U8:
		return lit_put(out, cap, len, 0x06);
	case MC_K_U16:
		return lit_put(out, cap, len, 0x08);
	case MC_K_I32:
		return lit_put(out, cap, len, 0x01);
	case MC_K_U32:
		return lit_put(out, cap, len, 0x02);
	case MC_K_I64:
		return lit_put(out, cap, len, 0x03);
	case MC_K_U64:
		return lit_put(out, cap, len, 0x04);
	case MC_K_VOID:
		return lit_put(out, cap, len, 0xfa);
	case MC_K_STR:
		rc = lit_put(out, cap, len, 0x80);
		return rc ? rc : lit_put(out, cap, len, 0x0c);
	case MC_K_VEC:
		rc = lit_put(out, cap, len, 0x84);
		return rc ? rc : mc_literal(t->elem, out, cap, len);
	case MC_K_MAP:
		rc = lit_put(out, cap, len, 0x82);
		return rc ? rc : mc_literal(t->elem, out, cap, len);
	case MC_K_OPT:
		rc = lit_put(out, cap, len, 0x85);
		return rc ? rc : mc_literal(t->elem, out, cap, len);
	case MC_K_VARIANT:
		rc = lit_put(out, cap, len, 0x86);
		rc = rc ? rc : lit_fields(t, out, cap, len);
		return rc ? rc : lit_put(out, cap, len, 0xff);
	case MC_K_EXPECTED:
		/* The error type is always ErrorCode (int32_t). */
		rc = lit_put(out, cap, len, 0x87);
		rc = rc ? rc : mc_literal(t->elem, out, cap, len);
		return rc ? rc : lit_put(out, cap, len, 0x01);
	case MC_K_STRUCT:
		rc = lit_put(out, cap, len, 0xfd);
		rc = rc ? rc : lit_fields(t, out, cap, len);
		return rc ? rc : lit_put(out, cap, len, 0xff);
	case MC_K_TRIVIAL:
		rc = lit_put(out, cap, len, 0xfd);
		rc = rc ? rc : lit_fields(t, out, cap, len);
		rc = rc ? rc : lit_size(t->pack_align, out, cap, len);
		rc = rc ? rc : lit_size(t->align, out, cap, len);
		return rc ? rc : lit_put(out, cap, len, 0xff);
	case MC_K_TRANSPARENT:
		return lit_fields(t, out, cap, len);
	}
	return -EINVAL;
}

int
mc_root_init(struct mc_root *r)
{
	int rc;

	r->lit_len = 0;
	rc = mc_literal(r->type, r->lit, sizeof(r->lit), &r->lit_len);
	if (rc != 0) {
		return rc;
	}
	rc = mc_md5_be32(r->lit, r->lit_len, &r->hash);
	if (rc != 0) {
		return rc;
	}
	r->hash &= ~1u;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* C object access                                                                           */
/* ---------------------------------------------------------------------------------------- */

/* Every tide_mc_*_vec is {T *v; size_t n;} (static_asserts in mc_msgs.c). */
static void
vec_get(const uint8_t *obj, uint8_t **data, size_t *n)
{
	void *p;

	memcpy(&p, obj, sizeof(p));
	memcpy(n, obj + sizeof(void *), sizeof(*n));
	*data = p;
}

static void
vec_set(uint8_t *obj, void *data, size_t n)
{
	memcpy(obj, &data, sizeof(data));
	memcpy(obj + sizeof(void *), &n, sizeof(n));
}

static bool
get_bool(const uint8_t *p)
{
	bool b;

	memcpy(&b, p, sizeof(b));
	return b;
}

static void
set_bool(uint8_t *p, bool b)
{
	memcpy(p, &b, sizeof(b));
}

/* ---------------------------------------------------------------------------------------- */
/* Encoder                                                                                   */
/* ---------------------------------------------------------------------------------------- */

struct enc_size {
	uint64_t fixed; /* bytes that do not depend on the length width */
	uint64_t nlens; /* number of length prefixes */
	uint64_t maxn;  /* largest container length in the message */
};

static int
size_walk(const struct mc_type *t, const uint8_t *v, struct enc_size *s)
{
	const struct tide_mc_str *str;
	uint8_t *data;
	size_t n;
	int rc;

	switch (t->kind) {
	case MC_K_BOOL:
	case MC_K_U8:
		s->fixed += 1;
		return 0;
	case MC_K_U16:
		s->fixed += 2;
		return 0;
	case MC_K_I32:
	case MC_K_U32:
		s->fixed += 4;
		return 0;
	case MC_K_I64:
	case MC_K_U64:
		s->fixed += 8;
		return 0;
	case MC_K_VOID:
		return 0;
	case MC_K_STR:
		str = (const struct tide_mc_str *)v;
		if (str->ptr == NULL && str->len != 0) {
			return -EINVAL;
		}
		s->nlens++;
		s->fixed += str->len;
		s->maxn = str->len > s->maxn ? str->len : s->maxn;
		return 0;
	case MC_K_VEC:
	case MC_K_MAP:
		vec_get(v, &data, &n);
		if (data == NULL && n != 0) {
			return -EINVAL;
		}
		s->nlens++;
		s->maxn = n > s->maxn ? n : s->maxn;
		for (size_t i = 0; i < n; i++) {
			rc = size_walk(t->elem, data + i * t->elem->size, s);
			if (rc != 0) {
				return rc;
			}
		}
		return 0;
	case MC_K_OPT:
		s->fixed += 1;
		return get_bool(v) ? size_walk(t->elem, v + t->val_off, s) : 0;
	case MC_K_VARIANT:
		if (v[t->idx_off] >= t->nfields) {
			return -EINVAL;
		}
		s->fixed += 1;
		return size_walk(t->fields[v[t->idx_off]].type, v + t->fields[v[t->idx_off]].off,
				 s);
	case MC_K_EXPECTED:
		s->fixed += 1;
		if (!get_bool(v)) {
			s->fixed += 4;
			return 0;
		}
		return size_walk(t->elem, v + t->val_off, s);
	case MC_K_STRUCT:
	case MC_K_TRIVIAL:
	case MC_K_TRANSPARENT:
		for (unsigned i = 0; i < t->nfields; i++) {
			rc = size_walk(t->fields[i].type, v + t->fields[i].off, s);
			if (rc != 0) {
				return rc;
			}
		}
		return 0;
	}
	return -EINVAL;
}

struct wr {
	uint8_t *p;
	unsigned w; /* length width in bytes */
};

static void
put_uint(struct wr *w, uint64_t x, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++) {
		*w->p++ = (uint8_t)(x >> (8 * i));
	}
}

/* Only called after size_walk() accepted the same value, so it cannot fail. */
static void
enc_walk(const struct mc_type *t, const uint8_t *v, struct wr *w)
{
	const struct tide_mc_str *str;
	uint8_t *data;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	size_t n;

	switch (t->kind) {
	case MC_K_BOOL:
		*w->p++ = get_bool(v) ? 1 : 0;
		return;
	case MC_K_U8:
		*w->p++ = v[0];
		return;
	case MC_K_U16:
		memcpy(&u16, v, 2);
		put_uint(w, u16, 2);
		return;
	case MC_K_I32:
	case MC_K_U32:
		memcpy(&u32, v, 4);
		put_uint(w, u32, 4);
		return;
	case MC_K_I64:
	case MC_K_U64:
		memcpy(&u64, v, 8);
		put_uint(w, u64, 8);
		return;
	case MC_K_VOID:
		return;
	case MC_K_STR:
		str = (const struct tide_mc_str *)v;
		put_uint(w, str->len, w->w);
		if (str->len != 0) {
			memcpy(w->p, str->ptr, str->len);
		}
		w->p += str->len;
		return;
	case MC_K_VEC:
	case MC_K_MAP:
		vec_get(v, &data, &n);
		put_uint(w, n, w->w);
		for (size_t i = 0; i < n; i++) {
			enc_walk(t->elem, data + i * t->elem->size, w);
		}
		return;
	case MC_K_OPT:
		*w->p++ = get_bool(v) ? 1 : 0;
		if (get_bool(v)) {
			enc_walk(t->elem, v + t->val_off, w);
		}
		return;
	case MC_K_VARIANT:
		*w->p++ = v[t->idx_off];
		enc_walk(t->fields[v[t->idx_off]].type, v + t->fields[v[t->idx_off]].off, w);
		return;
	case MC_K_EXPECTED:
		*w->p++ = get_bool(v) ? 1 : 0;
		if (get_bool(v)) {
			enc_walk(t->elem, v + t->val_off, w);
		} else {
			memcpy(&u32, v + t->err_off, 4);
			put_uint(w, u32, 4);
		}
		return;
	case MC_K_STRUCT:
	case MC_K_TRIVIAL:
	case MC_K_TRANSPARENT:
		for (unsigned i = 0; i < t->nfields; i++) {
			enc_walk(t->fields[i].type, v + t->fields[i].off, w);
		}
		return;
	}
}

/* Width code c: lengths take 1 << c bytes; metainfo bits 4:3 (spec 2.1). */
static unsigned
width_code(uint64_t maxn)
{
	if (maxn < (1ull << 8)) {
		return 0;
	}
	if (maxn < (1ull << 16)) {
		return 1;
	}
	if (maxn < (1ull << 32)) {
		return 2;
	}
	return 3;
}

int
mc_encode(const struct mc_root *r, const void *val, unsigned flags, struct tide_mc_buf *out)
{
	struct enc_size s = {0};
	struct wr w;
	unsigned code, forced;
	bool lit, meta;
	uint64_t total;
	uint8_t *start;
	int rc;

	rc = size_walk(r->type, val, &s);
	if (rc != 0) {
		return rc;
	}
	code = width_code(s.maxn);
	forced = (flags >> 1) & 3;
	code = forced > code ? forced : code;
	w.w = 1u << code;
	lit = (flags & TIDE_MC_ENC_LITERAL) != 0;
	/* A stock peer sends metainfo whenever it has something to say in it. */
	meta = lit || code != 0;
	total = 4 + (meta ? 1 : 0) + (lit ? r->lit_len + 1 : 0) + s.fixed + s.nlens * w.w;
	if (total > UINT32_MAX) {
		return -EMSGSIZE;
	}
	start = mc_buf_reserve(out, (size_t)total);
	if (start == NULL) {
		return -ENOMEM;
	}
	w.p = start;
	mc_put_le32(w.p, r->hash | (meta ? 1u : 0u));
	w.p += 4;
	if (meta) {
		*w.p++ = (uint8_t)((lit ? 0x04 : 0) | code << 3);
	}
	if (lit) {
		memcpy(w.p, r->lit, r->lit_len);
		w.p += r->lit_len;
		*w.p++ = 0;
	}
	enc_walk(r->type, val, &w);
	if ((uint64_t)(w.p - start) != total) {
		TIDE_LOG(ERR, "encoder size mismatch for %s: wrote %zu, sized %llu", r->type->name,
			 (size_t)(w.p - start), (unsigned long long)total);
		return -EFAULT;
	}
	out->len += (size_t)total;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder                                                                                   */
/* ---------------------------------------------------------------------------------------- */

struct dec {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	unsigned w;
	const char *what, *what_sfx;
	struct tide_mc_err *err;
	struct {
		const char *name;
		size_t idx;
		bool is_idx;
	} path[MC_PATH_MAX];
	unsigned depth;
};

static void
dec_push_name(struct dec *d, const char *name)
{
	if (d->depth < MC_PATH_MAX) {
		d->path[d->depth].name = name;
		d->path[d->depth].is_idx = false;
	}
	d->depth++;
}

static void
dec_push_idx(struct dec *d, size_t idx)
{
	if (d->depth < MC_PATH_MAX) {
		d->path[d->depth].idx = idx;
		d->path[d->depth].is_idx = true;
	}
	d->depth++;
}

static void
dec_pop(struct dec *d)
{
	d->depth--;
}

static int dec_fail(struct dec *d, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
dec_fail(struct dec *d, int rc, const char *fmt, ...)
{
	char path[128], detail[160];
	size_t used = 0;
	va_list ap;

	if (d->err == NULL) {
		return rc;
	}
	path[0] = '\0';
	for (unsigned i = 0; i < d->depth && i < MC_PATH_MAX && used < sizeof(path); i++) {
		int k;
		if (d->path[i].is_idx) {
			k = snprintf(path + used, sizeof(path) - used, "[%zu]", d->path[i].idx);
		} else {
			k = snprintf(path + used, sizeof(path) - used, "%s%s", used ? "." : "",
				     d->path[i].name);
		}
		if (k < 0) {
			break;
		}
		used += (size_t)k;
	}
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	mc_err_set(d->err, TIDE_MC_ERRC_INVALID_RPC_ARGUMENTS, d->pos, "%s%s: offset %zu: %s: %s",
		   d->what, d->what_sfx, d->pos, path[0] ? path : "<root>", detail);
	return rc;
}

static size_t
dec_left(const struct dec *d)
{
	return d->len - d->pos;
}

static int
dec_need(struct dec *d, size_t n, const char *what)
{
	if (dec_left(d) < n) {
		return dec_fail(d, -EBADMSG, "truncated: %s needs %zu bytes, %zu left", what, n,
				dec_left(d));
	}
	return 0;
}

static uint64_t
dec_uint(struct dec *d, unsigned bytes)
{
	uint64_t x = 0;

	for (unsigned i = 0; i < bytes; i++) {
		x |= (uint64_t)d->buf[d->pos + i] << (8 * i);
	}
	d->pos += bytes;
	return x;
}

/* A 0/1 byte: bool, optional has_value, expected has_value. */
static int
dec_flag(struct dec *d, const char *what, bool *out)
{
	int rc = dec_need(d, 1, what);

	if (rc != 0) {
		return rc;
	}
	if (d->buf[d->pos] > 1) {
		return dec_fail(d, -EBADMSG, "%s byte is 0x%02x, not 0 or 1", what, d->buf[d->pos]);
	}
	*out = d->buf[d->pos++] != 0;
	return 0;
}

size_t
mc_min_wire(const struct mc_type *t, unsigned w)
{
	size_t s = 0, m;

	switch (t->kind) {
	case MC_K_BOOL:
	case MC_K_U8:
		return 1;
	case MC_K_U16:
		return 2;
	case MC_K_I32:
	case MC_K_U32:
		return 4;
	case MC_K_I64:
	case MC_K_U64:
		return 8;
	case MC_K_VOID:
		return 0;
	case MC_K_STR:
	case MC_K_VEC:
	case MC_K_MAP:
		return w;
	case MC_K_OPT:
		return 1;
	case MC_K_VARIANT:
		m = SIZE_MAX;
		for (unsigned i = 0; i < t->nfields; i++) {
			size_t a = mc_min_wire(t->fields[i].type, w);
			m = a < m ? a : m;
		}
		return 1 + (m == SIZE_MAX ? 0 : m);
	case MC_K_EXPECTED:
		m = mc_min_wire(t->elem, w);
		return 1 + (m < 4 ? m : 4);
	case MC_K_STRUCT:
	case MC_K_TRIVIAL:
	case MC_K_TRANSPARENT:
		for (unsigned i = 0; i < t->nfields; i++) {
			s += mc_min_wire(t->fields[i].type, w);
		}
		return s;
	}
	return 1;
}

static int dec_walk(struct dec *d, const struct mc_type *t, uint8_t *v);

static int
dec_fields(struct dec *d, const struct mc_type *t, uint8_t *v)
{
	for (unsigned i = 0; i < t->nfields; i++) {
		int rc;

		dec_push_name(d, t->fields[i].name);
		rc = dec_walk(d, t->fields[i].type, v + t->fields[i].off);
		if (rc != 0) {
			return rc;
		}
		dec_pop(d);
	}
	return 0;
}

static int
dec_str(struct dec *d, uint8_t *v)
{
	struct tide_mc_str s;
	uint64_t n;
	int rc;

	rc = dec_need(d, d->w, "string length");
	if (rc != 0) {
		return rc;
	}
	n = dec_uint(d, d->w);
	if (n > dec_left(d)) {
		d->pos -= d->w;
		return dec_fail(d, -EBADMSG, "string length %llu exceeds the %zu bytes left",
				(unsigned long long)n, dec_left(d) - d->w);
	}
	s.len = (size_t)n;
	s.ptr = malloc(s.len + 1);
	if (s.ptr == NULL) {
		return dec_fail(d, -ENOMEM, "out of memory for a %zu-byte string", s.len);
	}
	memcpy(s.ptr, d->buf + d->pos, s.len);
	s.ptr[s.len] = '\0';
	d->pos += s.len;
	memcpy(v, &s, sizeof(s));
	return 0;
}

static int
dec_vec(struct dec *d, const struct mc_type *t, uint8_t *v)
{
	size_t min = mc_min_wire(t->elem, d->w);
	uint8_t *arr;
	uint64_t n;
	int rc;

	rc = dec_need(d, d->w, "element count");
	if (rc != 0) {
		return rc;
	}
	n = dec_uint(d, d->w);
	/* min >= 1 for every element type in the tables (checked at init). */
	if (min == 0 || n > dec_left(d) / min) {
		d->pos -= d->w;
		return dec_fail(d, -EBADMSG,
				"count %llu of %s needs at least %llu bytes, only %zu left",
				(unsigned long long)n, t->elem->name,
				(unsigned long long)n * (min ? min : 1), dec_left(d) - d->w);
	}
	if (n == 0) {
		return 0;
	}
	arr = calloc((size_t)n, t->elem->size);
	if (arr == NULL) {
		return dec_fail(d, -ENOMEM, "out of memory for %llu x %s", (unsigned long long)n,
				t->elem->name);
	}
	/* Attach first: a failure below is cleaned up by freeing the whole root. */
	vec_set(v, arr, (size_t)n);
	for (size_t i = 0; i < n; i++) {
		dec_push_idx(d, i);
		rc = dec_walk(d, t->elem, arr + i * t->elem->size);
		if (rc != 0) {
			return rc;
		}
		dec_pop(d);
	}
	return 0;
}

static int
dec_walk(struct dec *d, const struct mc_type *t, uint8_t *v)
{
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	bool flag;
	uint8_t idx;
	int rc;

	switch (t->kind) {
	case MC_K_BOOL:
		rc = dec_flag(d, "bool", &flag);
		if (rc == 0) {
			set_bool(v, flag);
		}
		return rc;
	case MC_K_U8:
		rc = dec_need(d, 1, t->name);
		if (rc == 0) {
			v[0] = d->buf[d->pos++];
		}
		return rc;
	case MC_K_U16:
		rc = dec_need(d, 2, t->name);
		if (rc == 0) {
			u16 = (uint16_t)dec_uint(d, 2);
			memcpy(v, &u16, 2);
		}
		return rc;
	case MC_K_I32:
	case MC_K_U32:
		rc = dec_need(d, 4, t->name);
		if (rc == 0) {
			u32 = (uint32_t)dec_uint(d, 4);
			memcpy(v, &u32, 4);
		}
		return rc;
	case MC_K_I64:
	case MC_K_U64:
		rc = dec_need(d, 8, t->name);
		if (rc == 0) {
			u64 = dec_uint(d, 8);
			memcpy(v, &u64, 8);
		}
		return rc;
	case MC_K_VOID:
		return 0;
	case MC_K_STR:
		return dec_str(d, v);
	case MC_K_VEC:
	case MC_K_MAP:
		return dec_vec(d, t, v);
	case MC_K_OPT:
		rc = dec_flag(d, "optional has_value", &flag);
		if (rc != 0) {
			return rc;
		}
		set_bool(v, flag);
		return flag ? dec_walk(d, t->elem, v + t->val_off) : 0;
	case MC_K_VARIANT:
		rc = dec_need(d, 1, "variant index");
		if (rc != 0) {
			return rc;
		}
		idx = d->buf[d->pos];
		if (idx >= t->nfields) {
			return dec_fail(d, -EBADMSG,
					"variant index %u out of range (%u alternatives)", idx,
					t->nfields);
		}
		d->pos++;
		v[t->idx_off] = idx;
		dec_push_name(d, t->fields[idx].name);
		rc = dec_walk(d, t->fields[idx].type, v + t->fields[idx].off);
		if (rc == 0) {
			dec_pop(d);
		}
		return rc;
	case MC_K_EXPECTED:
		rc = dec_flag(d, "expected has_value", &flag);
		if (rc != 0) {
			return rc;
		}
		set_bool(v, flag);
		if (flag) {
			return dec_walk(d, t->elem, v + t->val_off);
		}
		rc = dec_need(d, 4, "ErrorCode");
		if (rc == 0) {
			u32 = (uint32_t)dec_uint(d, 4);
			memcpy(v + t->err_off, &u32, 4);
		}
		return rc;
	case MC_K_STRUCT:
	case MC_K_TRIVIAL:
	case MC_K_TRANSPARENT:
		return dec_fields(d, t, v);
	}
	return dec_fail(d, -EBADMSG, "internal: unknown descriptor kind %d", (int)t->kind);
}

/* Header: hash, optional metainfo, optional compatible size, optional literal (spec 2.1). */
static int
dec_head(struct dec *d, const struct mc_root *const *roots, size_t n, size_t *which)
{
	char want[96];
	size_t used = 0, i;
	uint32_t h;
	uint8_t m;
	int rc;

	rc = dec_need(d, 4, "type hash");
	if (rc != 0) {
		return rc;
	}
	h = (uint32_t)dec_uint(d, 4);
	for (i = 0; i < n; i++) {
		if ((roots[i]->hash >> 1) == (h >> 1)) {
			break;
		}
	}
	if (i == n) {
		want[0] = '\0';
		for (size_t k = 0; k < n && used < sizeof(want); k++) {
			int c = snprintf(want + used, sizeof(want) - used, "%s0x%08x",
					 k ? " or " : "", roots[k]->hash);
			used += c > 0 ? (size_t)c : 0;
		}
		d->pos = 0;
		return dec_fail(d, -EBADMSG, "type hash 0x%08x matches no known layout (want %s)",
				h, want);
	}
	*which = i;
	d->w = 1;
	if ((h & 1) == 0) {
		return 0;
	}
	rc = dec_need(d, 1, "metainfo");
	if (rc != 0) {
		return rc;
	}
	m = d->buf[d->pos];
	if (m & 0xe0) {
		return dec_fail(d, -EBADMSG, "metainfo 0x%02x has unknown bits 7:5 set", m);
	}
	d->pos++;
	if (m & 3) {
		/* Compatible-fields total size; Mooncake types have none, skip it. */
		unsigned sz = 1u << (m & 3);
		rc = dec_need(d, sz, "compatible size");
		if (rc != 0) {
			return rc;
		}
		d->pos += sz;
	}
	if (m & 4) {
		const struct mc_root *r = roots[i];
		const uint8_t *nul = memchr(d->buf + d->pos, 0, dec_left(d));
		size_t llen;

		if (nul == NULL) {
			return dec_fail(d, -EBADMSG, "type literal has no NUL terminator");
		}
		llen = (size_t)(nul - (d->buf + d->pos));
		if (llen != r->lit_len || memcmp(d->buf + d->pos, r->lit, llen) != 0) {
			size_t k = 0;
			while (k < llen && k < r->lit_len && d->buf[d->pos + k] == r->lit[k]) {
				k++;
			}
			d->pos += k;
			return dec_fail(
				d, -EBADMSG,
				"type literal (%zu bytes) differs from the expected %zu-byte "
				"literal at byte %zu (hash collision or foreign layout)",
				llen, r->lit_len, k);
		}
		d->pos += llen + 1;
	}
	d->w = 1u << ((m >> 3) & 3);
	return 0;
}

int
mc_decode(const struct mc_root *const *roots, size_t n, const void *body, size_t len, void *val,
	  size_t *which, const char *what, const char *what_sfx, struct tide_mc_err *err)
{
	struct dec d = {.buf = body, .len = len, .what = what, .what_sfx = what_sfx, .err = err};
	const struct mc_type *t;
	size_t i = 0;
	int rc;

	rc = dec_head(&d, roots, n, &i);
	if (rc != 0) {
		return rc;
	}
	t = roots[i]->type;
	rc = dec_walk(&d, t, val);
	if (rc != 0) {
		mc_free(t, val);
		memset(val, 0, t->size);
		return rc;
	}
	*which = i;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Destructor and equality                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* True when values of t own no heap memory (skips walking scalar arrays). */
static bool
plain(const struct mc_type *t)
{
	switch (t->kind) {
	case MC_K_BOOL:
	case MC_K_U8:
	case MC_K_U16:
	case MC_K_I32:
	case MC_K_U32:
	case MC_K_I64:
	case MC_K_U64:
	case MC_K_VOID:
		return true;
	case MC_K_TRIVIAL:
		return true;
	default:
		return false;
	}
}

void
mc_free(const struct mc_type *t, void *val)
{
	uint8_t *v = val, *data;
	struct tide_mc_str s;
	size_t n;

	switch (t->kind) {
	case MC_K_STR:
		memcpy(&s, v, sizeof(s));
		free(s.ptr);
		return;
	case MC_K_VEC:
	case MC_K_MAP:
		vec_get(v, &data, &n);
		if (data != NULL && !plain(t->elem)) {
			for (size_t i = 0; i < n; i++) {
				mc_free(t->elem, data + i * t->elem->size);
			}
		}
		free(data);
		return;
	case MC_K_OPT:
		if (get_bool(v)) {
			mc_free(t->elem, v + t->val_off);
		}
		return;
	case MC_K_VARIANT:
		if (v[t->idx_off] < t->nfields) {
			mc_free(t->fields[v[t->idx_off]].type, v + t->fields[v[t->idx_off]].off);
		}
		return;
	case MC_K_EXPECTED:
		if (get_bool(v)) {
			mc_free(t->elem, v + t->val_off);
		}
		return;
	case MC_K_STRUCT:
	case MC_K_TRANSPARENT:
		for (unsigned i = 0; i < t->nfields; i++) {
			mc_free(t->fields[i].type, v + t->fields[i].off);
		}
		return;
	default:
		return;
	}
}

bool
mc_equal(const struct mc_type *t, const void *a_, const void *b_)
{
	const uint8_t *a = a_, *b = b_;
	const struct tide_mc_str *sa, *sb;
	uint8_t *da, *db;
	size_t na, nb;

	switch (t->kind) {
	case MC_K_BOOL:
		return get_bool(a) == get_bool(b);
	case MC_K_U8:
		return a[0] == b[0];
	case MC_K_U16:
		return memcmp(a, b, 2) == 0;
	case MC_K_I32:
	case MC_K_U32:
		return memcmp(a, b, 4) == 0;
	case MC_K_I64:
	case MC_K_U64:
		return memcmp(a, b, 8) == 0;
	case MC_K_VOID:
		return true;
	case MC_K_STR:
		sa = (const struct tide_mc_str *)a;
		sb = (const struct tide_mc_str *)b;
		return sa->len == sb->len &&
		       (sa->len == 0 || memcmp(sa->ptr, sb->ptr, sa->len) == 0);
	case MC_K_VEC:
	case MC_K_MAP:
		vec_get(a, &da, &na);
		vec_get(b, &db, &nb);
		if (na != nb) {
			return false;
		}
		for (size_t i = 0; i < na; i++) {
			if (!mc_equal(t->elem, da + i * t->elem->size, db + i * t->elem->size)) {
				return false;
			}
		}
		return true;
	case MC_K_OPT:
		if (get_bool(a) != get_bool(b)) {
			return false;
		}
		return !get_bool(a) || mc_equal(t->elem, a + t->val_off, b + t->val_off);
	case MC_K_VARIANT:
		if (a[t->idx_off] != b[t->idx_off] || a[t->idx_off] >= t->nfields) {
			return false;
		}
		return mc_equal(t->fields[a[t->idx_off]].type, a + t->fields[a[t->idx_off]].off,
				b + t->fields[a[t->idx_off]].off);
	case MC_K_EXPECTED:
		if (get_bool(a) != get_bool(b)) {
			return false;
		}
		if (get_bool(a)) {
			return mc_equal(t->elem, a + t->val_off, b + t->val_off);
		}
		return memcmp(a + t->err_off, b + t->err_off, 4) == 0;
	case MC_K_STRUCT:
	case MC_K_TRIVIAL:
	case MC_K_TRANSPARENT:
		for (unsigned i = 0; i < t->nfields; i++) {
			if (!mc_equal(t->fields[i].type, a + t->fields[i].off,
				      b + t->fields[i].off)) {
				return false;
			}
		}
		return true;
	}
	return false;
}
