/* SPDX-License-Identifier: Apache-2.0 */
/* TCP data framing v1/v2/native; layout in te_frame.h. */
#include <errno.h>
#include <string.h>

#include "te_frame.h"
#include "te_meta.h"

static void
put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void
put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int
te_frame_hdr_encode(const struct te_frame_hdr *h, uint8_t out[TE_FRAME_HDR_LEN])
{
	uint8_t opc;

	switch (h->proto) {
	case TE_PROTO_V1:
		opc = 0;
		break;
	case TE_PROTO_V2:
		opc = TE_FRAME_OPC_V2;
		break;
	case TE_PROTO_NATIVE:
		opc = TE_FRAME_OPC_NATIVE;
		break;
	default:
		return -EINVAL;
	}
	if (h->op > TE_FRAME_OP_HELLO)
		return -EINVAL;
	if (h->op == TE_FRAME_OP_HELLO && (h->proto != TE_PROTO_NATIVE || h->size != 0))
		return -EINVAL;
	memset(out, 0, TE_FRAME_HDR_LEN);
	put_le64(out, h->size);
	put_le64(out + 8, h->addr);
	out[16] = opc | h->op;
	if (h->proto == TE_PROTO_NATIVE)
		put_le32(out + 20, h->req_id);
	return 0;
}

int
te_frame_hdr_decode(const uint8_t *buf, size_t len, struct te_frame_hdr *h)
{
	struct te_frame_hdr d = {0};
	uint8_t opc;

	if (len < TE_FRAME_HDR_LEN)
		return -EAGAIN;
	opc = buf[16];
	d.size = get_le64(buf);
	d.addr = get_le64(buf + 8);
	switch (opc & (TE_FRAME_OPC_V2 | TE_FRAME_OPC_NATIVE)) {
	case 0:
		d.proto = TE_PROTO_V1;
		break;
	case TE_FRAME_OPC_V2:
		d.proto = TE_PROTO_V2;
		break;
	case TE_FRAME_OPC_NATIVE:
		d.proto = TE_PROTO_NATIVE;
		break;
	default:
		return -EPROTO;
	}
	d.op = opc & (uint8_t) ~(TE_FRAME_OPC_V2 | TE_FRAME_OPC_NATIVE);
	if (d.op > TE_FRAME_OP_HELLO)
		return -EPROTO;
	if (d.proto == TE_PROTO_NATIVE) {
		if (buf[17] != 0 || buf[18] != 0 || buf[19] != 0)
			return -EPROTO;
		d.req_id = get_le32(buf + 20);
		if (d.op == TE_FRAME_OP_HELLO && d.size != 0)
			return -EPROTO;
	} else if (d.op == TE_FRAME_OP_HELLO) {
		return -EPROTO;
	}
	*h = d;
	return 0;
}

void
te_frame_status_encode(uint64_t status, uint8_t out[TE_FRAME_STATUS_LEN])
{
	put_le64(out, status);
}

uint64_t
te_frame_status_decode(const uint8_t in[TE_FRAME_STATUS_LEN])
{
	return get_le64(in);
}

void
te_frame_reply_encode(const struct te_frame_reply *r, uint8_t out[TE_FRAME_REPLY_LEN])
{
	put_le64(out, r->status);
	put_le32(out + 8, r->req_id);
	put_le32(out + 12, 0);
}

int
te_frame_reply_decode(const uint8_t *buf, size_t len, struct te_frame_reply *r)
{
	uint64_t st;

	if (len < TE_FRAME_REPLY_LEN)
		return -EAGAIN;
	st = get_le64(buf);
	if (get_le32(buf + 12) != 0)
		return -EPROTO;
	if (st != TE_FRAME_ST_OK && st != TE_FRAME_ST_REJECTED && st != TE_FRAME_ST_STALE)
		return -EPROTO;
	r->status = st;
	r->req_id = get_le32(buf + 8);
	return 0;
}

int
te_frame_status_err(uint64_t status)
{
	switch (status) {
	case TE_FRAME_ST_OK:
		return 0;
	case TE_FRAME_ST_REJECTED:
		return -EFAULT;
	case TE_FRAME_ST_STALE:
		return -ESTALE;
	default:
		return -EPROTO;
	}
}
