/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fault injector between engine/net and a device queue (TIDE_FAULT_* of the node
 * file): it models a lossy wire, so a "dropped" TX frame still counts as taken by the
 * device (the stack must recover through retransmission, as it would on a real
 * network), and every decision comes from one seeded PRNG so a failing run can be
 * replayed. Drop, duplicate, reorder (one frame held behind the next), corrupt (one
 * bit of the first segment past the Ethernet header) and delay (every frame held
 * delay_us, at most DELAYQ_CAP frames; beyond that they drop, counted).
 */
#include <errno.h>
#include <stdlib.h>

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "eth_net_internal.h"
#include "tide_log.h"
#include "tide_rng.h"

#define DELAYQ_CAP 4096 /* frames; beyond it the delay queue drops (counted) */

struct delayed {
	uint64_t due;
	struct rte_mbuf *m;
	int dir;
};

struct tide_eth_delayq {
	struct delayed ring[DELAYQ_CAP];
	uint32_t head, len;
};

static bool
chance(struct tide_eth_netdev *nd, double p)
{
	if (p <= 0.0)
		return false;
	return (double)(tide_rng_next(&nd->rng) >> 11) * 0x1.0p-53 < p;
}

bool
eth_fault_on(const struct tide_eth_netdev *nd, int dir)
{
	const struct tide_eth_fault_opts *f = &nd->fault;

	if (!(dir == ETH_DIR_RX ? f->rx : f->tx))
		return false;
	return f->drop > 0 || f->dup > 0 || f->reorder > 0 || f->corrupt > 0 || f->delay_us > 0;
}

int
eth_fault_init(struct tide_eth_netdev *nd, const struct tide_eth_fault_opts *fault)
{
	if (fault->drop < 0 || fault->drop > 1 || fault->dup < 0 || fault->dup > 1 ||
	    fault->reorder < 0 || fault->reorder > 1 || fault->corrupt < 0 || fault->corrupt > 1)
		return -EINVAL;
	nd->fault = *fault;
	nd->rng = fault->seed;
	if (fault->delay_us > 0) {
		nd->dq = calloc(1, sizeof(*nd->dq));
		if (nd->dq == NULL)
			return -ENOMEM;
	}
	if (eth_fault_on(nd, ETH_DIR_RX) || eth_fault_on(nd, ETH_DIR_TX))
		TIDE_LOG(NOTICE,
			 "fault injection on port %u queue %u: drop %.4f dup %.4f reorder %.4f "
			 "corrupt %.4f delay %u us seed %llu (%s%s)",
			 nd->port != NULL ? tide_eth_port_id(nd->port) : 0, nd->queue, fault->drop,
			 fault->dup, fault->reorder, fault->corrupt, fault->delay_us,
			 (unsigned long long)fault->seed, fault->rx ? "rx" : "",
			 fault->tx ? " tx" : "");
	return 0;
}

void
eth_fault_fini(struct tide_eth_netdev *nd)
{
	for (int d = 0; d < 2; d++) {
		rte_pktmbuf_free(nd->held[d]);
		nd->held[d] = NULL;
	}
	if (nd->dq != NULL) {
		while (nd->dq->len > 0) {
			rte_pktmbuf_free(nd->dq->ring[nd->dq->head].m);
			nd->dq->head = (nd->dq->head + 1) % DELAYQ_CAP;
			nd->dq->len--;
		}
		free(nd->dq);
		nd->dq = NULL;
	}
}

uint16_t
eth_fault_apply(struct tide_eth_netdev *nd, int dir, struct rte_mbuf **in, uint16_t n,
		struct rte_mbuf **out)
{
	const struct tide_eth_fault_opts *f = &nd->fault;
	uint16_t k = 0;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = in[i];

		if (chance(nd, f->drop)) {
			rte_pktmbuf_free(m);
			nd->fault_stats.dropped++;
			continue;
		}
		/* Only the first segment is ever flipped: attached segments are the
		 * application's zero-copy memory, which the wire must not write. */
		if (chance(nd, f->corrupt) && rte_pktmbuf_data_len(m) > RTE_ETHER_HDR_LEN) {
			uint16_t span = rte_pktmbuf_data_len(m) - RTE_ETHER_HDR_LEN;
			uint64_t r = tide_rng_next(&nd->rng);
			uint8_t *p = rte_pktmbuf_mtod_offset(m, uint8_t *,
							     RTE_ETHER_HDR_LEN + (r % span));

			*p ^= (uint8_t)(1u << ((r >> 32) & 7));
			nd->fault_stats.corrupted++;
		}
		if (f->delay_us > 0 && nd->dq != NULL) {
			struct tide_eth_delayq *q = nd->dq;

			if (q->len == DELAYQ_CAP) {
				rte_pktmbuf_free(m);
				nd->fault_stats.dropped++;
				continue;
			}
			q->ring[(q->head + q->len) % DELAYQ_CAP] = (struct delayed){
				.due = nd->now + (uint64_t)f->delay_us * 1000, .m = m, .dir = dir};
			q->len++;
			nd->fault_stats.delayed++;
			continue;
		}
		if (chance(nd, f->dup)) {
			struct rte_mbuf *c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);

			if (c != NULL) {
				out[k++] = c;
				nd->fault_stats.duplicated++;
			}
		}
		if (nd->held[dir] == NULL && chance(nd, f->reorder)) {
			nd->held[dir] = m; /* goes out behind the next frame */
			nd->fault_stats.reordered++;
			continue;
		}
		out[k++] = m;
		if (nd->held[dir] != NULL) {
			out[k++] = nd->held[dir];
			nd->held[dir] = NULL;
		}
	}
	return k;
}

bool
eth_fault_due(struct tide_eth_netdev *nd, uint64_t now, struct rte_mbuf **m, int *dir)
{
	struct tide_eth_delayq *q = nd->dq;

	if (q == NULL || q->len == 0 || q->ring[q->head].due > now)
		return false;
	*m = q->ring[q->head].m;
	*dir = q->ring[q->head].dir;
	q->head = (q->head + 1) % DELAYQ_CAP;
	q->len--;
	return true;
}

uint64_t
tide_eth_netdev_next_due(const struct tide_eth_netdev *nd)
{
	const struct tide_eth_delayq *q = nd->dq;

	/* eth_fault_due releases from the head only, in order: its time is the next. */
	return q != NULL && q->len > 0 ? q->ring[q->head].due : UINT64_MAX;
}
