/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to engine/te/rdma and its unit tests: Mooncake's Connection
 * handshake message (HandShakeDesc) and the transport's tunables.
 *
 * The active side sends {"protocol":"rdma","local_nic_path":"<our segment>@<our
 * device>","local_lid":N,"local_gid":"xx:..","peer_nic_path":"<peer segment>@<peer
 * device>","qp_num":[...],"reply_msg":""} to the peer's handshake daemon (type 0);
 * the passive side answers with the same fields from its point of view, or with a
 * non-empty reply_msg refusing. local_lid/local_gid are newer Mooncake fields; when
 * absent the passive side looks the device up in the caller's segment descriptor.
 */
#ifndef TE_RDMA_H
#define TE_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "te_meta.h"

#define TE_RDMA_MAX_QP_PER_EP 8 /* MC_NUM_QP_PER_EP upper bound */
#define TE_RDMA_NIC_PATH_MAX  (TE_NAME_MAX + TE_DEV_NAME_MAX)
#define TE_RDMA_REPLY_MAX     256

struct te_rdma_hs {
	char local_nic_path[TE_RDMA_NIC_PATH_MAX];
	char peer_nic_path[TE_RDMA_NIC_PATH_MAX];
	bool has_lid;
	uint16_t local_lid;
	char local_gid[TE_GID_STR_MAX]; /* "" when absent */
	uint32_t nqp;
	uint32_t qp_num[TE_RDMA_MAX_QP_PER_EP];
	char reply_msg[TE_RDMA_REPLY_MAX]; /* "" = accepted */
};

/* JSON text of h; *json malloc'd. 0; -ENOMEM. */
int te_rdma_hs_encode(const struct te_rdma_hs *h, char **json);

/*
 * Parse a Connection message (untrusted). Strings must fit their fields, qp_num
 * must be an array of at most TE_RDMA_MAX_QP_PER_EP u32 (absent = none), local_lid
 * 0..65535. Unknown keys are ignored.
 * 0; -EPROTO with err naming the field; -ENOMEM.
 */
int te_rdma_hs_decode(const char *json, size_t len, struct te_rdma_hs *h, char *err, size_t errlen);

/* Split "segment@device" at the last '@' (segment names may hold '@' only before it).
 * 0; -EINVAL no '@', empty part or a part too long. */
int te_rdma_nic_path_split(const char *path, char *seg, size_t seglen, char *dev, size_t devlen);

#endif /* TE_RDMA_H */
