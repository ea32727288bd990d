/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The RDMA transport's device contract: what engine/te/rdma needs from the
 * layer that owns the RDMA devices, as one table of functions a driver
 * registers. engine/te/rdma owns this header and calls only through the
 * table, so it is built (and walked by meson) before any device code;
 * pmd/verbs is the driver (pmd/verbs/rdma_driver.c, libibverbs behind its
 * glue table).
 *
 * Handles are opaque here: a driver defines `struct tide_rdma_devs` (the
 * devices opened for one transport), `struct tide_rdma_mr` (a buffer
 * registered with every one of them), `struct tide_rdma_cq` and
 * `struct tide_rdma_qp` (a completion queue and an RC queue pair of one
 * device); the transport only passes them back. Everything else crossing
 * the table is a plain type of this header: no verbs header is needed to
 * use it.
 *
 * Errors: every int function returns 0 (or a count where it says so) or a
 * negative errno, and logs what only the driver knows (the verbs call, the
 * device); the transport adds what it was doing.
 *
 * Threads: set-up (open, registration, CQ and QP life cycle) may run on any
 * thread; one QP is posted to by one thread at a time and one CQ polled by
 * one thread at a time (the worker that owns them). A driver keeps no state
 * a caller must lock for it.
 *
 * Linking: a driver registers itself from a constructor, and a static
 * library member that nothing references is left out of a link, constructor
 * included. pmd/verbs' meson dependency `tide_vrb_rdma_dep` therefore makes
 * the reference itself: it carries `-Wl,--undefined=tide_vrb_rdma_dev_ops`,
 * so every program and shared library that lists it, directly or through
 * `tide_store_dep`, keeps the driver. A program without it fails to install
 * protocol rdma with -EPROTONOSUPPORT and the log line "no verbs driver
 * linked into this program: link pmd/verbs (tide_vrb_rdma_dep)".
 */
#ifndef TIDE_RDMA_DEV_H
#define TIDE_RDMA_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most devices one tide_rdma_devs handle holds. */
#define TIDE_RDMA_DEV_MAX 16
/** A device name, NUL included (IBV_SYSFS_NAME_MAX). */
#define TIDE_RDMA_DEV_NAME_LEN 64
/** A device address as text, NUL included: Mooncake's GID form "xx:xx:...:xx". */
#define TIDE_RDMA_ADDR_STR_LEN 48
/** Most work requests one post() takes, and most completions one poll() returns. */
#define TIDE_RDMA_BURST_MAX 32

/** The devices opened for one transport. The driver's. */
struct tide_rdma_devs;
/** One buffer registered with every device of a tide_rdma_devs. The driver's. */
struct tide_rdma_mr;
/** A completion queue of one device. The driver's. */
struct tide_rdma_cq;
/** A reliable-connected queue pair of one device. The driver's. */
struct tide_rdma_qp;

/** What to open. Every field is the caller's to set. */
struct tide_rdma_dev_cfg {
	/** Comma list of device names ("mlx5_0,mlx5_1"; MOONCAKE_DEVICE); NULL or "":
	 * every device with an active port. Every listed name must exist and be up. */
	const char *devices;
	/** Port number on each device (MC_IB_PORT), 1..255. */
	uint8_t port;
	/** Address table index (MC_GID_INDEX), or -1: the driver picks one per device. */
	int gid_index;
	/** Upper bound on the path MTU in bytes (MC_MTU), at least 256: the path MTU is
	 * the largest of 256, 512, 1024, 2048 and 4096 not above it (and the device's). */
	unsigned max_mtu;
};

/** What the transport needs to know about one opened device. */
struct tide_rdma_dev_info {
	char name[TIDE_RDMA_DEV_NAME_LEN];
	/** Its address as descriptors and handshakes carry it (Mooncake's GID text). */
	char addr[TIDE_RDMA_ADDR_STR_LEN];
	uint16_t lid; /**< 0 on RoCE */
	int numa;     /**< NUMA node the device hangs off; -1 unknown */
};

/** A device address in binary (a GID), from addr_parse(). */
struct tide_rdma_addr {
	uint8_t raw[16];
};

/** The remote end of a queue pair (from the peer's descriptor and handshake). */
struct tide_rdma_remote {
	struct tide_rdma_addr addr;
	uint16_t lid; /**< 0 on RoCE */
	uint32_t qp_num;
};

/** A registered buffer's keys, index = device index in the handle. */
struct tide_rdma_keys {
	uint32_t lkey[TIDE_RDMA_DEV_MAX]; /**< for this node's work requests */
	uint32_t rkey[TIDE_RDMA_DEV_MAX]; /**< for peers' (advertised in the descriptor) */
};

/** One-sided operations. */
enum tide_rdma_wr_op {
	TIDE_RDMA_WR_READ,  /**< remote -> local */
	TIDE_RDMA_WR_WRITE, /**< local -> remote */
};

/** One work request: one contiguous local range, one remote range. */
struct tide_rdma_wr {
	uint64_t wr_id;  /**< the caller's, returned in its completion */
	uint64_t local;  /**< local address, inside a buffer registered on the QP's device */
	uint64_t remote; /**< remote address */
	uint32_t len;    /**< bytes */
	uint32_t lkey;   /**< the local buffer's key on the QP's device */
	uint32_t rkey;   /**< the remote buffer's key on the peer's device */
	uint8_t op;      /**< enum tide_rdma_wr_op */
	/** Whether a success produces a completion (an error always does). RC completes
	 * in order, so a signalled success also retires the unsignalled ones before it. */
	bool signaled;
};

/** One completion. */
struct tide_rdma_wc {
	uint64_t wr_id;  /**< the work request's */
	uint32_t qp_num; /**< the QP it ran on */
	/** 0 success; else the driver's own status code, for status_str() and logs. */
	int status;
	/** What the status means to the transport: 0; -EFAULT the peer refused the
	 * address or key; -ECONNRESET the connection is gone (retries exhausted,
	 * flushed); -EIO anything else. */
	int err;
};

/**
 * What an RDMA driver does for the transport. Every member must be set. The
 * transport calls open first and close last; every MR, CQ and QP is gone
 * before close. The table must outlive the process.
 */
struct tide_rdma_dev_ops {
	/** Short name for logs, e.g. "pmd/verbs". */
	const char *name;

	/**
	 * Open the devices cfg names (or every one with an active port), choose
	 * each one's address and prepare it for registration and queue pairs.
	 * \param[out] out  the handle, with at least one device; untouched on failure.
	 * \param err, errlen  on failure: what is missing and what to do (may be NULL).
	 * \return 0; -ELIBACC the verbs library cannot be loaded (rdma-core missing
	 *         or too old); -ENXIO this node has no RDMA device at all; -ENODEV a
	 *         named device is missing, or none has an active port; -EINVAL a
	 *         malformed list, port 0 or max_mtu below 256; -ENOMEM; other -errno
	 *         of the failed call.
	 * Thread: any. Ownership: closed by close().
	 */
	int (*open)(const struct tide_rdma_dev_cfg *cfg, struct tide_rdma_devs **out, char *err,
		    size_t errlen);

	/** Close every device. NULL ignored. Thread: any, once nothing else uses d. */
	void (*close)(struct tide_rdma_devs *d);

	/** Number of devices (1..TIDE_RDMA_DEV_MAX). Thread: any. */
	unsigned (*ndev)(const struct tide_rdma_devs *d);

	/**
	 * Describe device i.
	 * \return 0; -EINVAL i past the last device.
	 * Thread: any.
	 */
	int (*dev_info)(const struct tide_rdma_devs *d, unsigned i, struct tide_rdma_dev_info *out);

	/** Where the verbs come from, for logs ("libibverbs.so.1"). Thread: any. */
	const char *(*provider)(const struct tide_rdma_devs *d);

	/**
	 * Parse a device address as descriptors and handshakes carry it
	 * (tide_rdma_dev_info.addr's form). No device is touched.
	 * \return 0; -EINVAL not an address.
	 * Thread: any.
	 */
	int (*addr_parse)(const char *text, struct tide_rdma_addr *out);

	/**
	 * Register [addr, addr+len) with every device for local writes and remote
	 * reads and writes. Once per buffer, never per transfer.
	 * \param[out] keys  the buffer's keys on each device.
	 * \return 0; -EINVAL addr NULL or len 0; -ENOMEM; other -errno of the
	 *         registration (the ones already made are undone).
	 * Thread: any. Ownership: released by mr_dereg(); the memory stays the caller's.
	 */
	int (*mr_reg)(struct tide_rdma_devs *d, void *addr, size_t len, struct tide_rdma_mr **out,
		      struct tide_rdma_keys *keys);

	/** Deregister from every device; peers' accesses fail afterwards. NULL ignored.
	 * Thread: any, once no work request of the caller uses it. */
	void (*mr_dereg)(struct tide_rdma_devs *d, struct tide_rdma_mr *mr);

	/**
	 * Create a completion queue of at least cqe entries (clamped to what the
	 * device allows) on device dev.
	 * \return 0; -EINVAL dev out of range or cqe <= 0; other -errno.
	 * Thread: any. Ownership: destroyed by cq_destroy(), after its QPs.
	 */
	int (*cq_create)(struct tide_rdma_devs *d, unsigned dev, int cqe,
			 struct tide_rdma_cq **out);

	/** Destroy a CQ whose QPs are gone. \return 0 or -errno. NULL ignored (0). Thread: any. */
	int (*cq_destroy)(struct tide_rdma_devs *d, struct tide_rdma_cq *cq);

	/**
	 * Create an RC queue pair in RESET on device dev completing on cq, with
	 * room for `depth` outstanding work requests (clamped to what the device
	 * allows) of one local range each.
	 * \return 0; -EINVAL dev out of range, cq NULL or depth <= 0; other -errno.
	 * Thread: any. Ownership: destroyed by qp_destroy().
	 */
	int (*qp_create)(struct tide_rdma_devs *d, unsigned dev, struct tide_rdma_cq *cq, int depth,
			 struct tide_rdma_qp **out);

	/** The QP's number, as the peer's handshake names it. Thread: any. */
	uint32_t (*qp_num)(const struct tide_rdma_qp *qp);

	/**
	 * Connect a QP of device dev to `remote`, from whatever state it is in,
	 * with the attributes a stock Mooncake QP uses, so either end may be stock.
	 * \param why, whylen  which step failed (may be NULL).
	 * \return 0; -EINVAL; other -errno of the failing step.
	 * Thread: any; the QP is not posted to meanwhile.
	 */
	int (*qp_connect)(struct tide_rdma_devs *d, unsigned dev, struct tide_rdma_qp *qp,
			  const struct tide_rdma_remote *remote, char *why, size_t whylen);

	/**
	 * Move a QP to RESET: the device stops touching the memory of its
	 * outstanding work, which completes not at all.
	 * \return 0 or -errno. Thread: any; the QP is not posted to meanwhile.
	 */
	int (*qp_reset)(struct tide_rdma_devs *d, struct tide_rdma_qp *qp);

	/** Destroy a QP. \return 0 or -errno. NULL ignored (0). Thread: any, not while posting. */
	int (*qp_destroy)(struct tide_rdma_devs *d, struct tide_rdma_qp *qp);

	/**
	 * Post n work requests to a connected QP, in order (the data path: one
	 * call per burst).
	 * \param[out] posted  how many were posted before a failure (all of them
	 *             on success); those complete as usual, the rest never ran.
	 * \return 0; -EINVAL n is 0 or above TIDE_RDMA_BURST_MAX; -ENOMEM the send
	 *         queue is full; other -errno (QP not connected, in error).
	 * Thread: the QP's owner.
	 */
	int (*post)(struct tide_rdma_devs *d, struct tide_rdma_qp *qp,
		    const struct tide_rdma_wr *wr, unsigned n, unsigned *posted);

	/**
	 * Take up to n completions (n <= TIDE_RDMA_BURST_MAX) from a CQ, without
	 * waiting.
	 * \return completions written to wc (0 = none); -EINVAL n too large;
	 *         other -errno (the CQ is broken).
	 * Thread: the CQ's owner.
	 */
	int (*poll)(struct tide_rdma_devs *d, struct tide_rdma_cq *cq, struct tide_rdma_wc *wc,
		    unsigned n);

	/** Text of a completion's status ("remote access error ..."). Thread: any. */
	const char *(*status_str)(int status);
};

/**
 * Make `ops` the RDMA driver of every transport this process starts.
 * Registering the same table again is a no-op.
 * \return 0; -EINVAL ops NULL or a member unset; -EEXIST another driver is
 *         already registered.
 * Thread: a constructor, or the main thread before any transport starts.
 * Ownership: the table is borrowed for the life of the process.
 */
int tide_rdma_dev_register(const struct tide_rdma_dev_ops *ops);

/**
 * The registered driver.
 * \return the table; NULL when none is registered (no driver linked in).
 * Thread: any, once constructors have run.
 */
const struct tide_rdma_dev_ops *tide_rdma_dev_get(void);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_RDMA_DEV_H */
