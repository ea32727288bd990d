/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Receive interrupts of net_memif queues (memif_intr.h): the queue's eventfd
 * and its ring's MASK_INT flag, and the device's control channel lock that
 * orders bursts with a peer's disconnect, reached through the PMD's private
 * structures of DPDK 22.11, every pointer checked against public state before
 * use.
 */
/* rte_intr_fd_get() is experimental in 22.11. */
#define ALLOW_EXPERIMENTAL_API 1

#include "memif_intr.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_spinlock.h>
#include <rte_version.h>

#include "memif_publish.h"
#include "tide_eth.h"
#include "tide_log.h"

#if RTE_VERSION >= RTE_VERSION_NUM(22, 11, 0, 0) && RTE_VERSION < RTE_VERSION_NUM(22, 12, 0, 0)

/*
 * Leading fields of DPDK 22.11's struct rte_eth_dev and rte_eth_dev_data
 * (lib/ethdev/ethdev_driver.h; checked on 22.11.11), struct memif_region, pmd_process_private,
 * pmd_internals and memif_queue (drivers/net/memif/rte_eth_memif.h) and
 * memif_ring_t (drivers/net/memif/memif.h, the memif shared-memory layout).
 * Only what is read here; nothing past the last field named is assumed.
 */
struct m_eth_dev_data {
	char name[RTE_ETH_NAME_MAX_LEN];
	void **rx_queues;
	void **tx_queues;
	uint16_t nb_rx_queues;
	uint16_t nb_tx_queues;
	struct rte_eth_dev_sriov sriov; /* public type (rte_ethdev.h) */
	void *dev_private;              /* memif: struct pmd_internals */
};

struct m_eth_dev {
	void *burst_fns[6]; /* rx/tx burst, tx prepare, rx queue count, rx/tx desc status */
	struct m_eth_dev_data *data;
	void *process_private;
};

struct m_region {
	void *addr;
	uint64_t region_size;
	int fd;
	uint32_t pkt_buffer_offset;
};

#define M_MAX_REGIONS 256

struct m_proc_private {
	struct m_region *regions[M_MAX_REGIONS];
	uint16_t regions_num;
};

#define M_FLAG_CONNECTED (1u << 1)
#define M_SECRET_SIZE    24 /* ETH_MEMIF_SECRET_SIZE */
#define M_DEFAULT_SOCKET "/run/memif.sock"

struct m_pmd {
	uint32_t id;
	int role;
	uint32_t flags;
	char *socket_filename; /* the socket= devarg, or M_DEFAULT_SOCKET */
	char secret[M_SECRET_SIZE];
	void *cc;
	rte_spinlock_t cc_lock; /* memif_disconnect holds it between flag and unmap */
};

/* Where 22.11.11's memif_disconnect takes the lock: "xchg %eax,0x38(%rbx)" with
 * rbx = dev_private, after "andl $0xfffffffc,0x8(%rbx)" cleared the flags. */
_Static_assert(offsetof(struct m_pmd, flags) == 8, "memif pmd_internals.flags");
_Static_assert(offsetof(struct m_pmd, cc_lock) == 0x38, "memif pmd_internals.cc_lock");

struct m_queue {
	struct rte_mempool *mempool;
	void *pmd_unset; /* 22.11 leaves it NULL on receive queues: dev_private instead */
	int type;        /* memif_ring_type_t */
	uint16_t region;
	uint16_t in_port;
	uint32_t ring_offset;
	uint16_t last_head;
	uint16_t last_tail;
	struct rte_mbuf **buffers;
	uint64_t n_pkts;
	uint64_t n_bytes;
	struct rte_intr_handle *intr_handle;
	uint8_t log2_ring_size;
};

#define M_COOKIE   0x3E31F20u
#define M_MASK_INT 1u

struct m_ring {
	uint32_t cookie;
	uint16_t flags;
	uint16_t head;
};

/* Exported by librte_ethdev (its INTERNAL version node); declared in
 * ethdev_driver.h, which Debian's libdpdk-dev does not install. */
struct rte_eth_dev *rte_eth_dev_allocated(const char *name);

/* The memif device behind port_id, or why not (a static string). */
static const char *
resolve_dev(uint16_t port_id, struct m_eth_dev **devp)
{
	char name[RTE_ETH_NAME_MAX_LEN];
	struct m_eth_dev *dev;
	struct rte_eth_dev_info di;

	if (rte_eth_dev_info_get(port_id, &di) != 0 ||
	    rte_eth_dev_get_name_by_port(port_id, name) != 0)
		return "no such port";
	if (di.driver_name == NULL || strcmp(di.driver_name, "net_memif") != 0)
		return "not a net_memif port";
	dev = (struct m_eth_dev *)(void *)rte_eth_dev_allocated(name);
	if (dev == NULL || dev->data == NULL ||
	    strncmp(dev->data->name, name, sizeof(dev->data->name)) != 0)
		return "the device is not found by its name";
	if (dev->data->dev_private == NULL)
		return "the device has no private data";
	*devp = dev;
	return NULL;
}

/* The device and queue behind (port_id, q), or why not (a static string). */
static const char *
resolve(uint16_t port_id, uint16_t q, struct m_eth_dev **devp, struct m_queue **mqp)
{
	struct m_eth_dev *dev;
	struct m_queue *mq;
	const char *why = resolve_dev(port_id, &dev);

	if (why != NULL)
		return why;
	if (dev->data->rx_queues == NULL || q >= dev->data->nb_rx_queues)
		return "no such receive queue";
	mq = dev->data->rx_queues[q];
	/* The public fast-path table holds the same queue pointer once started. */
	if (mq == NULL || (void *)mq != rte_eth_fp_ops[port_id].rxq.data[q])
		return "the queue differs from the fast-path table's";
	if (mq->in_port != port_id || mq->intr_handle == NULL)
		return "the queue's fields do not match this port";
	*devp = dev;
	*mqp = mq;
	return NULL;
}

static bool
connected(const struct m_eth_dev *dev)
{
	const struct m_pmd *pmd = dev->data->dev_private;

	return __atomic_load_n(&pmd->flags, __ATOMIC_ACQUIRE) & M_FLAG_CONNECTED;
}

static rte_spinlock_t *
lock_of(const struct m_eth_dev *dev)
{
	return &((struct m_pmd *)dev->data->dev_private)->cc_lock;
}

int
tide_memif_burst_lock(uint16_t port_id, rte_spinlock_t **out)
{
	struct rte_eth_dev_info di;
	struct m_eth_dev *dev = NULL;
	const struct m_pmd *pmd;
	const char *why = resolve_dev(port_id, &dev), *args, *sock = NULL;
	size_t len = 0;

	if (why == NULL) {
		/* The PMD keeps its own copy of the socket path: equal to the devarg
		 * only if every field up to it sits where the mirror says. */
		pmd = dev->data->dev_private;
		args = rte_eth_dev_info_get(port_id, &di) == 0 ? tide_memif_devargs(&di) : NULL;
		if (args != NULL)
			sock = tide_memif_arg_find(args, "socket", &len);
		if (sock == NULL) {
			sock = M_DEFAULT_SOCKET;
			len = strlen(M_DEFAULT_SOCKET);
		}
		if (args == NULL || pmd->socket_filename == NULL ||
		    strlen(pmd->socket_filename) != len ||
		    memcmp(pmd->socket_filename, sock, len) != 0)
			why = "its socket path differs from the devargs' (another layout)";
		else if (pmd->cc_lock.locked != 0 && pmd->cc_lock.locked != 1)
			why = "its control channel lock is neither free nor taken";
	}
	if (why != NULL) {
		TIDE_LOG(WARN,
			 "port %u: bursts are not ordered with a memif peer's disconnect (%s): "
			 "a peer that leaves while this port is polled may crash this process",
			 port_id, why);
		return -ENOTSUP;
	}
	*out = lock_of(dev);
	return 0;
}

/* The queue's ring while the link is up and its cookie checks out, else NULL. */
static struct m_ring *
ring_of(const struct m_eth_dev *dev, const struct m_queue *mq)
{
	const struct m_proc_private *pp = dev->process_private;
	const struct m_region *r;
	struct m_ring *ring;

	if (!connected(dev))
		return NULL;
	if (pp == NULL || mq->region >= pp->regions_num || mq->region >= M_MAX_REGIONS)
		return NULL;
	r = pp->regions[mq->region];
	if (r == NULL || r->addr == NULL ||
	    (uint64_t)mq->ring_offset + sizeof(*ring) > r->region_size)
		return NULL;
	ring = (struct m_ring *)(void *)((char *)r->addr + mq->ring_offset);
	return ring->cookie == M_COOKIE ? ring : NULL;
}

int
tide_memif_rxq_intr_open(uint16_t port_id, uint16_t q, struct tide_eth_rx_intr *out)
{
	static atomic_bool logged;
	struct m_eth_dev *dev;
	struct m_queue *mq;
	const char *why = resolve(port_id, q, &dev, &mq);

	if (why == NULL) {
		rte_spinlock_lock(lock_of(dev));
		if (connected(dev) && ring_of(dev, mq) == NULL)
			why = "the connected queue's ring does not check out";
		rte_spinlock_unlock(lock_of(dev));
	}
	if (why != NULL) {
		if (!atomic_exchange(&logged, true))
			TIDE_LOG(NOTICE,
				 "port %u queue %u: no receive interrupts (%s); idle pollers "
				 "yield and sleep on timers",
				 port_id, q, why);
		return -ENOTSUP;
	}
	*out = (struct tide_eth_rx_intr){.port_id = port_id, .queue = q, .dev = dev, .rxq = mq};
	return 0;
}

int
tide_memif_rxq_arm(const struct tide_eth_rx_intr *ri)
{
	const struct m_queue *mq = ri->rxq;
	rte_spinlock_t *lock = lock_of(ri->dev);
	struct m_ring *ring;
	int fd;

	/* The ring stays mapped while we hold the lock (memif_intr.h). */
	rte_spinlock_lock(lock);
	ring = ring_of(ri->dev, mq);
	fd = rte_intr_fd_get(mq->intr_handle);
	if (ring != NULL && fd >= 0) {
		/* Only the receiver writes its rings' flags. */
		__atomic_store_n(&ring->flags, (uint16_t)(ring->flags & ~M_MASK_INT),
				 __ATOMIC_RELAXED);
		/* The flag store before the caller's next look at the ring's head. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	rte_spinlock_unlock(lock);
	return ring != NULL && fd >= 0 ? fd : -ENOTCONN;
}

void
tide_memif_rxq_disarm(const struct tide_eth_rx_intr *ri)
{
	const struct m_queue *mq = ri->rxq;
	rte_spinlock_t *lock = lock_of(ri->dev);
	struct m_ring *ring;
	int fd;
	uint64_t v;

	rte_spinlock_lock(lock);
	ring = ring_of(ri->dev, mq);
	fd = rte_intr_fd_get(mq->intr_handle);
	/* No descriptor: the queue is not part of this connection, and its ring fields may be
	 * another queue's (left from an earlier one): leave every ring alone. */
	if (ring != NULL && fd >= 0) {
		__atomic_store_n(&ring->flags, (uint16_t)(ring->flags | M_MASK_INT),
				 __ATOMIC_RELAXED);
		/* Non-blocking (memif makes them EFD_NONBLOCK): empty or not, at once. */
		(void)!read(fd, &v, sizeof(v));
	}
	rte_spinlock_unlock(lock);
}

#else /* another DPDK than 22.11: the private layout is unknown */

int
tide_memif_burst_lock(uint16_t port_id, rte_spinlock_t **out)
{
	(void)out;
	TIDE_LOG(WARN,
		 "port %u: bursts are not ordered with a memif peer's disconnect (DPDK %s): a "
		 "peer that leaves while this port is polled may crash this process",
		 port_id, rte_version());
	return -ENOTSUP;
}

int
tide_memif_rxq_intr_open(uint16_t port_id, uint16_t q, struct tide_eth_rx_intr *out)
{
	(void)port_id;
	(void)q;
	(void)out;
	return -ENOTSUP;
}

int
tide_memif_rxq_arm(const struct tide_eth_rx_intr *ri)
{
	(void)ri;
	return -ENOTSUP;
}

void
tide_memif_rxq_disarm(const struct tide_eth_rx_intr *ri)
{
	(void)ri;
}

#endif
