/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Internal to engine/te: TCP data framing, byte for byte.
 *
 * Every request starts with the same 24-byte header (Mooncake's SessionHeader):
 *
 *     bytes  0..7   u64 size, little-endian
 *     bytes  8..15  u64 addr, little-endian (absolute address in the server)
 *     byte  16      opcode
 *     bytes 17..23  padding
 *
 * Three framings share it, told apart by the opcode's high bits:
 * - v1 (opcode 0 READ, 1 WRITE): no status. WRITE is header + payload; READ is
 *   answered by `size` raw bytes. A refused address is a silent close.
 * - v2 (opcode 0x80|op): WRITE is header + payload, then an 8-byte status;
 *   READ is answered by an 8-byte status, then `size` bytes on OK. A refused
 *   address is status REJECTED, then close.
 * - native (tcp_proto_version 3, opcode 0x40|op): bytes 17..19 are zero and
 *   bytes 20..23 carry a u32 request id (LE). Replies are a 16-byte header
 *   {u64 status, u32 req_id, u32 reserved = 0} (READ on OK: followed by the
 *   data). HELLO (0x40|2, size 0, addr = the instance the client expects) is
 *   answered OK, or STALE and then close. A refused address is answered
 *   REJECTED (after reading and discarding a WRITE's payload) and the
 *   connection stays open. The server answers in request order.
 *
 * v1/v2 padding is ignored on decode (Mooncake sends zeros but never checks);
 * native reserved bytes must be zero. Nothing here allocates or does I/O.
 * Thread: every function is pure and may be called from any thread.
 */
#ifndef TE_FRAME_H
#define TE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TE_FRAME_HDR_LEN    24 /**< request header */
#define TE_FRAME_STATUS_LEN 8  /**< v2 status word */
#define TE_FRAME_REPLY_LEN  16 /**< native reply header */

/** Operations (the low bits of the opcode; READ/WRITE numbered as TIDE_TE_READ/WRITE). */
#define TE_FRAME_OP_READ  0
#define TE_FRAME_OP_WRITE 1
#define TE_FRAME_OP_HELLO 2 /**< native only */

#define TE_FRAME_OPC_V2     0x80 /**< v2 flag in the opcode byte */
#define TE_FRAME_OPC_NATIVE 0x40 /**< native flag in the opcode byte */

/** Status words ("MCTV" << 32 family). */
#define TE_FRAME_ST_OK       0x4D43545600000000ULL
#define TE_FRAME_ST_REJECTED (TE_FRAME_ST_OK | 1) /**< address refused */
#define TE_FRAME_ST_STALE    (TE_FRAME_ST_OK | 2) /**< native HELLO: instance mismatch */

/** A decoded request header. */
struct te_frame_hdr {
	uint64_t size;   /**< payload (WRITE) or reply data (READ) bytes; 0 for HELLO */
	uint64_t addr;   /**< remote address; HELLO: expected instance */
	uint8_t op;      /**< TE_FRAME_OP_* */
	uint8_t proto;   /**< TE_PROTO_V1, TE_PROTO_V2 or TE_PROTO_NATIVE */
	uint32_t req_id; /**< native only (0 otherwise) */
};

/** A decoded native reply header. */
struct te_frame_reply {
	uint64_t status; /**< TE_FRAME_ST_* */
	uint32_t req_id; /**< echo of the request's id */
};

/**
 * Encode a request header.
 * \param h    header; h->proto selects the opcode flag; req_id is written for native only.
 * \param out  24 bytes.
 * \return 0; -EINVAL unknown proto, unknown op, HELLO outside native, or HELLO with size != 0.
 */
int te_frame_hdr_encode(const struct te_frame_hdr *h, uint8_t out[TE_FRAME_HDR_LEN]);

/**
 * Decode a request header from the first bytes of buf.
 * \param buf  received bytes (may be shorter than a header).
 * \param len  bytes available at buf.
 * \param[out] h  filled on 0; untouched otherwise.
 * \return 0; -EAGAIN fewer than TE_FRAME_HDR_LEN bytes; -EPROTO unknown opcode (both
 *         flags set, unknown op, HELLO outside native), native reserved bytes 17..19 not
 *         zero, or HELLO with size != 0.
 */
int te_frame_hdr_decode(const uint8_t *buf, size_t len, struct te_frame_hdr *h);

/** Write a v2 status word (LE). */
void te_frame_status_encode(uint64_t status, uint8_t out[TE_FRAME_STATUS_LEN]);

/** Read a v2 status word (LE) from 8 bytes. */
uint64_t te_frame_status_decode(const uint8_t in[TE_FRAME_STATUS_LEN]);

/** Encode a native reply header (reserved word written as zero). */
void te_frame_reply_encode(const struct te_frame_reply *r, uint8_t out[TE_FRAME_REPLY_LEN]);

/**
 * Decode a native reply header.
 * \return 0; -EAGAIN fewer than TE_FRAME_REPLY_LEN bytes; -EPROTO reserved word not zero
 *         or a status outside TE_FRAME_ST_OK/REJECTED/STALE.
 */
int te_frame_reply_decode(const uint8_t *buf, size_t len, struct te_frame_reply *r);

/**
 * Map a status word to an errno.
 * \return 0 OK; -EFAULT REJECTED; -ESTALE STALE; -EPROTO anything else.
 */
int te_frame_status_err(uint64_t status);

#endif /* TE_FRAME_H */
