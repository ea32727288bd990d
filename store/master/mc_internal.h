/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Internals of the Mooncake master codec, shared by mc_wire.c, mc_pack.c,
 * mc_msgs.c, their unit tests and the fuzzer. Not a public contract.
 *
 * Descriptor language: every wire type is a `struct mc_type` node that says
 * both how it is laid out in C (offsets into the tide_mc_* structs) and what
 * it is in struct_pack terms. One generic engine (mc_pack.c) derives from the
 * nodes the type literal, the type hash, the encoder, the decoder, the
 * destructor and an equality test, so a layout change is an edit of one
 * field list in mc_msgs.c.
 */
#ifndef MC_INTERNAL_H
#define MC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_mc_codec.h"

#define MC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/** Longest type literal any message produces, plus slack; checked at init. */
#define MC_LIT_MAX 256

enum mc_kind {
	MC_K_BOOL,     /**< bool, 1 byte 0/1, literal 0b */
	MC_K_U8,       /**< uint8_t / 1-byte enum, literal 06 */
	MC_K_U16,      /**< uint16_t, literal 08 */
	MC_K_I32,      /**< int32_t / plain enum class, literal 01 */
	MC_K_U32,      /**< uint32_t, literal 02 */
	MC_K_I64,      /**< int64_t / long, literal 03 */
	MC_K_U64,      /**< uint64_t / size_t / uintptr_t, literal 04 */
	MC_K_VOID,     /**< monostate / expected<void>: no bytes, literal fa */
	MC_K_STR,      /**< struct tide_mc_str: length + bytes, literal 80 0c */
	MC_K_VEC,      /**< {T *v; size_t n}: count + elements, literal 84 T */
	MC_K_MAP,      /**< as VEC, elem is a 2-field TRANSPARENT pair, literal 82 K V */
	MC_K_OPT,      /**< {bool has @0; T val @val_off}: flag + T, literal 85 T */
	MC_K_VARIANT,  /**< u8 index @idx_off, alternative i at fields[i].off, literal 86 .. ff */
	MC_K_EXPECTED, /**< {bool ok @0; int32 err @err_off; T val @val_off}, literal 87 T 01 */
	MC_K_STRUCT,   /**< member-wise (YLT_REFL / tuple / aggregate), literal fd .. ff */
	MC_K_TRIVIAL,  /**< trivially-copyable pair, literal fd .. size(pack) size(align) ff */
	MC_K_TRANSPARENT, /**< fields inline, literal = their literals concatenated; used for
			       map pairs and for projections (V0312 ObjectMeta = its key) */
};

struct mc_type;

/** One member of a STRUCT/TRIVIAL/TRANSPARENT, or one alternative of a VARIANT. */
struct mc_field {
	const char *name; /**< for error paths */
	size_t off;       /**< offset from the start of the enclosing C object */
	const struct mc_type *type;
};

/** One wire type and its C representation. */
struct mc_type {
	enum mc_kind kind;
	const char *name;              /**< C-ish name for messages */
	size_t size;                   /**< sizeof the C object (array element stride) */
	const struct mc_type *elem;    /**< VEC/MAP element, OPT/EXPECTED value */
	const struct mc_field *fields; /**< STRUCT/TRIVIAL/TRANSPARENT members, VARIANT alts */
	uint8_t nfields;
	size_t val_off;     /**< OPT/EXPECTED value offset */
	size_t err_off;     /**< EXPECTED error offset (int32) */
	size_t idx_off;     /**< VARIANT index offset (uint8_t) */
	uint8_t pack_align; /**< TRIVIAL literal tail */
	uint8_t align;      /**< TRIVIAL literal tail */
};

/** A message body type with its derived literal and hash (computed at init). */
struct mc_root {
	const struct mc_type *type;
	uint8_t lit[MC_LIT_MAX];
	size_t lit_len;
	uint32_t hash; /**< even: MD5-BE32(lit) & ~1 */
};

/* ---- mc_pack.c: primitives and the descriptor engine ---- */

/** MD5-BE32 of a byte string (first 4 digest bytes, big-endian). 0 / -ENOTSUP. */
int mc_md5_be32(const void *p, size_t n, uint32_t *out);

/** Append the literal of `t` at out[*len]; -EOVERFLOW past `cap`. */
int mc_literal(const struct mc_type *t, uint8_t *out, size_t cap, size_t *len);

/** Fill r->lit / lit_len / hash from r->type. 0, -EOVERFLOW, -ENOTSUP. */
int mc_root_init(struct mc_root *r);

/** Reserve `n` more bytes at the end of `b`; returns the write pointer or NULL (ENOMEM). */
uint8_t *mc_buf_reserve(struct tide_mc_buf *b, size_t n);

/**
 * Append struct_pack(val) with root type r to `out`.
 * \return 0, -EINVAL (bad value), -ENOMEM, -EMSGSIZE.
 */
int mc_encode(const struct mc_root *r, const void *val, unsigned flags, struct tide_mc_buf *out);

/**
 * Decode a body whose hash must match one of roots[0..n) (hash bit 0 ignored).
 * `val` must be zeroed and at least roots[i]->type->size bytes. On failure
 * everything allocated is freed and `val` is zeroed again.
 * \param what, what_sfx  Message name for errors, in two parts so that a decode that succeeds
 *        formats nothing ("PutStart", " request").
 * \param[out] which  Index of the first matching root.
 * \return 0; -EBADMSG (err->errc = 4); -ENOMEM.
 */
int mc_decode(const struct mc_root *const *roots, size_t n, const void *body, size_t len, void *val,
	      size_t *which, const char *what, const char *what_sfx, struct tide_mc_err *err);

/** Free heap memory owned by a value of type `t` (zeroed parts are fine). */
void mc_free(const struct mc_type *t, void *val);

/** Deep equality of two values of type `t`, looking only at described fields. */
bool mc_equal(const struct mc_type *t, const void *a, const void *b);

/** Smallest number of wire bytes a value of `t` can take with length width w. */
size_t mc_min_wire(const struct mc_type *t, unsigned w);

/** printf into err (NULL-safe), recording errc and offset. */
void mc_err_set(struct tide_mc_err *err, uint8_t errc, size_t offset, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Little-endian helpers. */
static inline uint32_t
mc_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void
mc_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* ---- mc_msgs.c: the message table ---- */

/** Per function with a codec: request / result roots per layout (NULL req = no body). */
struct mc_msg {
	const char *name;
	const struct mc_type *req[TIDE_MC_LAYOUT_COUNT];
	const struct mc_type *resp[TIDE_MC_LAYOUT_COUNT];
};

/** Indexed by enum tide_mc_fn, TIDE_MC_FN_CODEC_COUNT entries. */
extern const struct mc_msg mc_msgs[TIDE_MC_FN_CODEC_COUNT];

/** Compute every root literal and hash; called once from tide_mc_codec_init(). */
int mc_msgs_init(void);

/** Root of a message direction/layout after init; NULL for zero-argument requests. */
const struct mc_root *mc_msg_root(enum tide_mc_fn fn, bool is_resp, enum tide_mc_layout layout);

/** C form of std::pair<uint16_t, std::string> (extended coro_rpc error body). */
struct mc_err_pair {
	uint16_t code;
	struct tide_mc_str msg;
};

/** A named sub-type descriptor ("UUID", "ReplicateConfig", ...) for tests; NULL if unknown. */
const struct mc_type *mc_type_by_name(const char *name);

/** Root of std::string, for coro_rpc error bodies. */
const struct mc_root *mc_err_str_root(void);

/** Root of std::pair<uint16_t, std::string>, for extended error bodies. */
const struct mc_root *mc_err_pair_root(void);

#endif /* MC_INTERNAL_H */
