/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * pmd/verbs: the only code that reaches an RDMA device. Every verbs call goes
 * through one table of function pointers (struct tide_vrb_ops), the way
 * DPDK's mlx5 driver wraps libibverbs in its glue table, so:
 *
 * - the binary runs on hosts without rdma-core: libibverbs.so.1 is dlopen()ed
 *   the first time a caller asks for the table (tide_vrb_glue_get()), never at
 *   start-up, and a missing library is an error with a message, not a crash;
 * - unit tests install an in-memory double (tests/lib/verbs_double) with
 *   tide_vrb_glue_set() and exercise the same code paths CI has no device for;
 * - processes a test cannot reach with tide_vrb_glue_set() (a Python test
 *   loading libtidestore.so, tide-node) get the double through the test seam
 *   TIDETEST_VERBS_GLUE, see tide_vrb_glue_get().
 *
 * On top of the table this layer does the slow-path work every RDMA user
 * repeats: device discovery (a comma list such as MOONCAKE_DEVICE, or every
 * device with an active port), port and GID selection (RoCE v2 IPv4-mapped
 * GID preferred, as Mooncake does), the device's NUMA node, one protection
 * domain per device, memory regions registered once with every device, RC
 * queue pairs and their RESET -> INIT -> RTR -> RTS transitions, and
 * completion queues. The data path (post_send, poll_cq) is called through
 * the table, one indirect call per burst.
 *
 * The transfer engine's RDMA transport does not include this header: it
 * calls the driver table it owns (engine/te/rdma/tide_rdma_dev.h), which
 * rdma_driver.c implements over these functions (tide_vrb_rdma.h).
 *
 * Errors: every tide_vrb_* function returns 0 or -errno. The table itself
 * keeps libibverbs' conventions (NULL + errno, or a positive errno) and is
 * converted once, here or next to the data-path call.
 *
 * Threading: discovery, registration and QP set-up may run on any thread;
 * one QP is driven (post/poll) by one thread at a time. The layer keeps no
 * global state other than the glue table.
 */
#ifndef TIDE_VRB_H
#define TIDE_VRB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most devices one tide_vrb handle opens. */
#define TIDE_VRB_MAX_DEVS 16
/** Text of a GID: 16 bytes as "xx:xx:...:xx" (47 chars) plus NUL, Mooncake's form. */
#define TIDE_VRB_GID_STR_LEN 48
/** Device names (IBV_SYSFS_NAME_MAX). */
#define TIDE_VRB_NAME_LEN 64

/**
 * The verbs glue: libibverbs' entry points the engine uses, plus two facts
 * libibverbs has no call for (read from sysfs in production). Field names
 * follow the ibv_* function they stand for and keep its return convention.
 */
struct tide_vrb_ops {
	const char *name; /**< "libibverbs.so.1" or the double's name, for logs */
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	/** RoCE version of a GID entry: 2 (RoCE v2), 1 (RoCE v1 or IB), -errno unknown. */
	int (*gid_roce_version)(struct ibv_context *ctx, uint8_t port, int index);
	/** NUMA node the device hangs off, -1 unknown. */
	int (*device_numa_node)(struct ibv_device *dev);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	/* Data path: one call per burst. */
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
};

/**
 * The glue table: the test override when one is set, else libibverbs.so.1,
 * dlopen()ed on the first call (later calls return the cached result).
 *
 * Test seam, never for production: when the environment variable
 * TIDETEST_VERBS_GLUE names a shared library (read with secure_getenv(), so
 * ignored in setuid processes), that library is dlopen()ed instead of
 * libibverbs and its `const struct tide_vrb_ops *tide_vrb_test_glue(void)`
 * gives the table (tests/lib/verbs_double builds libtide_vdbl.so for this).
 * Its use is logged at WARN; a seam that does not load fails like a missing
 * libibverbs (-ENOENT, or -ENOSYS for an incomplete table), never falling back
 * to the real library.
 *
 * \param[out] out  The table; valid until process exit.
 * \param err, errlen  On failure, what is missing and what to do (may be NULL).
 * \return 0; -ENOENT libibverbs.so.1 (or the TIDETEST_VERBS_GLUE library) cannot be
 *         loaded (rdma-core not installed); -ENOSYS it lacks an entry point this
 *         layer needs.
 * Thread: any (the first load is serialised).
 */
int tide_vrb_glue_get(const struct tide_vrb_ops **out, char *err, size_t errlen);

/**
 * Install a table in place of libibverbs (tests), or NULL to go back to it.
 * Thread: any, while no tide_vrb handle is open.
 */
void tide_vrb_glue_set(const struct tide_vrb_ops *ops);

/**
 * How many times this process tried to dlopen libibverbs or the
 * TIDETEST_VERBS_GLUE library (0 when nothing asked for verbs). Tests use it
 * to prove that the TCP path never touches verbs.
 * Thread: any.
 */
unsigned tide_vrb_glue_dlopen_count(void);

/** Discovery options. Fill with tide_vrb_cfg_init(). */
struct tide_vrb_cfg {
	size_t cfg_size;
	/** Comma list of device names ("mlx5_0,mlx5_1"; MOONCAKE_DEVICE); NULL or "": every
	 * device with an active port. Every listed name must exist and have an active port. */
	const char *devices;
	/** Port number on each device (MC_IB_PORT). Default 1. */
	uint8_t port;
	/** GID index (MC_GID_INDEX); -1 (default): pick one per device, see tide_vrb_open(). */
	int gid_index;
	/** Upper bound on the path MTU (MC_MTU as an ibv_mtu value). Default IBV_MTU_4096. */
	enum ibv_mtu max_mtu;
};

/** Fill cfg with defaults. Thread: any. */
void tide_vrb_cfg_init(struct tide_vrb_cfg *cfg, size_t cfg_size);

/** One opened device: read-only after tide_vrb_open(). */
struct tide_vrb_dev {
	char name[TIDE_VRB_NAME_LEN];
	unsigned idx; /**< position in the handle (= index in descriptors' rkey arrays) */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port;
	uint8_t link_layer; /**< IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
	uint16_t lid;       /**< 0 on RoCE */
	int gid_index;
	union ibv_gid gid;
	char gid_str[TIDE_VRB_GID_STR_LEN];
	enum ibv_mtu mtu; /**< min(active MTU, cfg max_mtu) */
	int numa;         /**< -1 unknown */
	int max_qp_wr;
	int max_cqe;
	int max_qp_rd_atom;
};

struct tide_vrb;

/**
 * Open the devices: list them through the glue, keep the ones cfg names (all
 * with an active port when none are named), query port and device, choose the
 * GID and allocate a protection domain on each.
 *
 * GID choice with gid_index -1: on InfiniBand index 0; on RoCE the first RoCE v2
 * entry holding an IPv4-mapped address (::ffff:a.b.c.d), else the first RoCE v2
 * entry, else the first non-zero entry (what Mooncake's auto-detection picks).
 *
 * \param[out] out  Handle with >= 1 device.
 * \param err, errlen  On failure: which device or call failed and what to set.
 * \return 0; -ENODEV no device at all, a named device missing, or no active port
 *         (err lists what exists); -EINVAL malformed list or more than
 *         TIDE_VRB_MAX_DEVS names; -ENOENT/-ENOSYS glue not loadable; -errno of the
 *         failed verbs call; -ENOMEM.
 * Thread: any. Ownership: tide_vrb_close().
 */
int tide_vrb_open(const struct tide_vrb_ops *ops, const struct tide_vrb_cfg *cfg,
		  struct tide_vrb **out, char *err, size_t errlen);

/** Close every device (PDs, contexts). Every MR, CQ and QP must be gone. NULL ignored. */
void tide_vrb_close(struct tide_vrb *v);

/** Number of devices (>= 1). Thread: any. */
unsigned tide_vrb_ndev(const struct tide_vrb *v);

/** Device i, or NULL past the last. Thread: any. */
const struct tide_vrb_dev *tide_vrb_dev(const struct tide_vrb *v, unsigned i);

/** Index of the device named name, or -ENODEV. Thread: any. */
int tide_vrb_dev_find(const struct tide_vrb *v, const char *name);

/** The glue table the handle was opened with. Thread: any. */
const struct tide_vrb_ops *tide_vrb_ops_of(const struct tide_vrb *v);

/** One buffer registered with every device of a handle. */
struct tide_vrb_mr {
	void *addr;
	size_t len;
	unsigned n;
	struct ibv_mr *mr[TIDE_VRB_MAX_DEVS]; /**< index = device index */
};

/**
 * Register [addr, addr+len) with every device (local write, remote read and
 * write). Called once per buffer, never per transfer.
 * \return 0; -EINVAL addr NULL or len 0; -errno of reg_mr (the ones already made
 *         are undone); -ENOMEM.
 * Thread: any. Ownership: tide_vrb_mr_dereg().
 */
int tide_vrb_mr_reg(struct tide_vrb *v, void *addr, size_t len, struct tide_vrb_mr **out);

/** Deregister from every device and free. Remote accesses fail afterwards. NULL ignored. */
void tide_vrb_mr_dereg(struct tide_vrb *v, struct tide_vrb_mr *mr);

/**
 * Create a completion queue of at least cqe entries on device dev (clamped to
 * the device's max_cqe). \return 0; -EINVAL; -errno of create_cq.
 */
int tide_vrb_cq_create(struct tide_vrb *v, unsigned dev, int cqe, struct ibv_cq **out);

/** Destroy a CQ (its QPs must be gone). \return 0 or -errno. NULL ignored (0). */
int tide_vrb_cq_destroy(struct tide_vrb *v, struct ibv_cq *cq);

/**
 * Create an RC queue pair in RESET on device dev, send and receive on cq,
 * send queue depth `depth` (clamped to max_qp_wr), one SGE, no signal-all.
 * \return 0; -EINVAL; -errno of create_qp.
 */
int tide_vrb_qp_create(struct tide_vrb *v, unsigned dev, struct ibv_cq *cq, int depth,
		       void *qp_context, struct ibv_qp **out);

/** The remote end of a queue pair (from the peer's descriptor and handshake). */
struct tide_vrb_remote {
	union ibv_gid gid;
	uint16_t lid; /**< 0 on RoCE */
	uint32_t qp_num;
};

/**
 * Move a QP through RESET -> INIT -> RTR -> RTS towards remote (PSN 0 both
 * ways, global routing with the device's GID index, path MTU the device's,
 * timeout 14, retry 7, RNR retry 7, 16 outstanding reads), from any state.
 * \param why, whylen  Which transition failed (may be NULL).
 * \return 0; -errno of the failing modify_qp.
 * Thread: any; the QP must not be posted to meanwhile.
 */
int tide_vrb_qp_connect(struct tide_vrb *v, unsigned dev, struct ibv_qp *qp,
			const struct tide_vrb_remote *remote, char *why, size_t whylen);

/** Move a QP to RESET (outstanding work is dropped without completions). \return 0 or -errno. */
int tide_vrb_qp_reset(struct tide_vrb *v, struct ibv_qp *qp);

/** Destroy a QP. \return 0 or -errno. NULL ignored (0). */
int tide_vrb_qp_destroy(struct tide_vrb *v, struct ibv_qp *qp);

/** Format a GID as Mooncake's "xx:xx:...". buf holds TIDE_VRB_GID_STR_LEN bytes. */
void tide_vrb_gid_format(const union ibv_gid *gid, char *buf);

/** Parse Mooncake's GID text (16 hex bytes separated by ':'). \return 0; -EINVAL. */
int tide_vrb_gid_parse(const char *s, union ibv_gid *gid);

/** Name of a work completion status ("remote access error", ...). Thread: any. */
const char *tide_vrb_wc_status_str(enum ibv_wc_status st);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_VRB_H */
