/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target over the transfer engine's JSON metadata decoders, which
 * parse what peers and the metadata server publish:
 * - te_desc_decode (segment descriptors, TCP and RDMA; engine/te/meta/te_desc.c),
 * - te_rpcmeta_decode (the rpc_meta record naming a handshake daemon),
 * - te_rdma_hs_decode (the RDMA Connection handshake message, te_rdma_hs.c)
 *   and te_rdma_nic_path_split on the NIC paths it carries,
 * - meta_split_hostport (segment names "host:port" from the master's replica
 *   lists are split this way to reach a P2P handshake daemon).
 * Whatever decodes must re-encode and decode to an equal value; a decoded
 * descriptor must contain each of its buffers, survive dup and normalize.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"
#include "te_meta.h"
#include "te_rdma.h"
#include "tide_log.h"

#include "fuzz_common.h"

static void
desc(const char *j, size_t n)
{
	struct te_desc *d = NULL, *back = NULL, *dup = NULL;
	char err[256], *json = NULL;

	if (te_desc_decode(j, n, &d, err, sizeof(err)) != 0)
		return;
	TRAP_IF(d == NULL);
	for (uint32_t i = 0; i < d->nbufs; i++) {
		TRAP_IF(d->bufs[i].length == 0 || d->bufs[i].name[0] == '\0');
		TRAP_IF(!te_desc_contains(d, d->bufs[i].addr, d->bufs[i].length));
		TRAP_IF(i > 0 && d->bufs[i].addr <= d->bufs[i - 1].addr);
		TRAP_IF(te_desc_is_rdma(d) && d->bufs[i].nkeys != d->ndevs);
	}
	TRAP_IF(te_desc_encode(d, &json) != 0);
	TRAP_IF(te_desc_decode(json, strlen(json), &back, err, sizeof(err)) != 0);
	TRAP_IF(!te_desc_equal(d, back));
	TRAP_IF(te_desc_dup(d, &dup) != 0);
	TRAP_IF(te_desc_normalize(dup, err, sizeof(err)) != 0);
	TRAP_IF(!te_desc_equal(d, dup));
	free(json);
	te_desc_free(back);
	te_desc_free(dup);
	te_desc_free(d);
}

static void
rpcmeta(const char *j, size_t n)
{
	char host[TE_NAME_MAX], host2[TE_NAME_MAX], err[256], *json = NULL;
	uint16_t port, port2;

	if (te_rpcmeta_decode(j, n, host, sizeof(host), &port, err, sizeof(err)) != 0)
		return;
	TRAP_IF(host[0] == '\0' || port == 0);
	TRAP_IF(te_rpcmeta_encode(host, port, &json) != 0);
	TRAP_IF(te_rpcmeta_decode(json, strlen(json), host2, sizeof(host2), &port2, err,
				  sizeof(err)) != 0);
	TRAP_IF(strcmp(host, host2) != 0 || port != port2);
	free(json);
}

static void
nic_path(const char *path)
{
	char seg[TE_NAME_MAX], dev[TE_DEV_NAME_MAX];

	if (te_rdma_nic_path_split(path, seg, sizeof(seg), dev, sizeof(dev)) == 0)
		TRAP_IF(seg[0] == '\0' || dev[0] == '\0' || strchr(dev, '@') != NULL);
}

static void
rdma_hs(const char *j, size_t n)
{
	struct te_rdma_hs h, back;
	char err[256], *json = NULL;

	if (te_rdma_hs_decode(j, n, &h, err, sizeof(err)) != 0)
		return;
	TRAP_IF(h.nqp > TE_RDMA_MAX_QP_PER_EP);
	nic_path(h.local_nic_path);
	nic_path(h.peer_nic_path);
	TRAP_IF(te_rdma_hs_encode(&h, &json) != 0);
	TRAP_IF(te_rdma_hs_decode(json, strlen(json), &back, err, sizeof(err)) != 0);
	/* local_lid is always written, so has_lid may turn true. */
	TRAP_IF(strcmp(h.local_nic_path, back.local_nic_path) != 0 ||
		strcmp(h.peer_nic_path, back.peer_nic_path) != 0 ||
		strcmp(h.local_gid, back.local_gid) != 0 ||
		strcmp(h.reply_msg, back.reply_msg) != 0 || h.local_lid != back.local_lid ||
		h.nqp != back.nqp || memcmp(h.qp_num, back.qp_num, h.nqp * sizeof(h.qp_num[0])));
	free(json);
}

static void
hostport(const char *s)
{
	char host[TE_NAME_MAX];
	uint16_t port = 0;

	if (meta_split_hostport(s, host, sizeof(host), &port) == 0)
		TRAP_IF(host[0] == '\0' || port == 0 || strlen(host) >= strlen(s));
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tide_log_set_level(TIDE_LOG_ERR);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy: the decoders must not read past len. */
	char *j = malloc(size ? size : 1);
	char *z = malloc(size + 1);

	TRAP_IF(j == NULL || z == NULL);
	memcpy(j, data, size);
	desc(j, size);
	rpcmeta(j, size);
	rdma_hs(j, size);
	memcpy(z, data, size);
	z[size] = '\0';
	hostport(z);
	nic_path(z);
	free(z);
	free(j);
	return 0;
}
