/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tide-cluster: the project's main job, what the README's run command starts.
 *
 * Today it brings up a two-node cluster inside one process: the node file is
 * loaded, the EAL comes up on hugepages or --no-huge, two DPDK ports are
 * joined back to back by the net_ring PMD, and each node owns a memory
 * segment managed by the segment allocator. A rollout-like workload (shards
 * of ~37 objects, most <= 256 B, a few large) is written from one node into
 * the other's segment as Ethernet frames, the receiver places every fragment
 * at the offset its allocator handed out, and at the end every object is
 * compared byte for byte with its source. Half the objects are then removed,
 * as a training step does, and the allocator's state is printed.
 *
 * The frame format here is a placeholder for the transfer engine (which will
 * carry the same writes over the user-space TCP stack); the ports, memory,
 * allocator and configuration are the real components.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include "tide_clock.h"
#include "tide_eth.h"
#include "tide_eth_node.h"
#include "tide_log.h"
#include "tide_nodeenv.h"
#include "tide_seg.h"
#include "tide_rng.h"

#define ETHERTYPE_TIDE_DEMO 0x88B5      /* IEEE local experimental ethertype */
#define DEMO_MAGIC          0x54494445u /* "TIDE" */
#define BURST               32
#define MIB                 (1024.0 * 1024.0)

/* One write fragment: bytes [frag_off, frag_off + frag_len) of an object,
 * to be placed at seg_off + frag_off in the receiver's segment. */
struct demo_hdr {
	uint32_t magic;
	uint32_t obj;
	uint64_t seg_off;
	uint32_t obj_len;
	uint32_t frag_off;
	uint32_t frag_len;
	uint32_t pad;
} __attribute__((packed));

struct demo_obj {
	uint64_t seg_off; /* where the receiver's allocator put it */
	uint32_t len;
	uint32_t src_off; /* where its bytes are in the sender's buffer */
	uint32_t received;
	int dst; /* receiving node */
	bool live;
};

struct node {
	const char *name;
	struct tide_eth_port *port;
	struct tide_seg *seg;
	uint8_t *mem; /* the segment's memory */
	uint64_t size;
	uint8_t mac[6];
	uint64_t frames_rx, bytes_rx, rejected;
};

struct demo {
	struct node node[2];
	struct demo_obj *obj;
	uint32_t nobj;
	uint8_t *src; /* sender's local buffer holding every object's bytes */
	uint64_t src_len;
	uint32_t frag_max; /* payload bytes per frame */
};

/* Object sizes of one Miles rollout shard (miles-usage.md 1.5): a ~10 KB
 * manifest, a ~3 KB meta blob, and per ragged field a data member plus small
 * offsets/shapes/ndims/nulls members; the data members of long fields are the
 * large ones. Scaled by `big` so the demo stays quick. */
static uint32_t
shard_obj_size(uint32_t i, uint64_t *rng, uint32_t big)
{
	uint64_t r = tide_rng_next(rng);

	if (i == 0)
		return 10 * 1024 + (uint32_t)(r % 2048);
	if (i == 1)
		return 3 * 1024 + (uint32_t)(r % 1024);
	switch (i % 5) {
	case 0: /* .data of a ragged field */
		return 4096 + (uint32_t)(r % big);
	case 1: /* .offsets, int64 per row */
		return 8 * (65 + (uint32_t)(r % 64));
	default: /* .shapes, .ndims, .nulls: tiny */
		return 1 + (uint32_t)(r % 256);
	}
}

static int
node_init(struct node *n, const char *name, uint64_t seg_size)
{
	struct tide_seg_opts so;
	int rc;

	n->name = name;
	n->size = seg_size;
	/* Anonymous memory for now; the per-node agent will map the segment
	 * from hugepages and register it with the NIC. */
	n->mem = mmap(NULL, seg_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (n->mem == MAP_FAILED) {
		n->mem = NULL;
		TIDE_LOG(ERR, "%s: cannot map a %" PRIu64 " MiB segment: %s", name, seg_size >> 20,
			 strerror(errno));
		return -ENOMEM;
	}
	tide_seg_opts_init(&so, sizeof(so));
	so.size = seg_size;
	rc = tide_seg_create(&so, &n->seg);
	if (rc != 0)
		TIDE_LOG(ERR, "%s: segment allocator: %s", name, strerror(-rc));
	return rc;
}

static void
node_fini(struct node *n)
{
	tide_seg_destroy(n->seg);
	if (n->mem != NULL)
		munmap(n->mem, n->size);
}

/* Receive path of one node: validate each frame and place its payload. A
 * frame that does not fit a live allocation is counted and dropped; it
 * never touches memory outside the extent the allocator handed out. */
static unsigned
node_poll(struct demo *d, int self)
{
	struct node *n = &d->node[self];
	struct rte_mbuf *pkts[BURST];
	uint16_t k = tide_eth_rx(n->port, 0, pkts, BURST);

	for (uint16_t i = 0; i < k; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct rte_ether_hdr *eh;
		const struct demo_hdr *h;
		uint64_t alloc_len;

		if (rte_pktmbuf_data_len(m) < sizeof(*eh) + sizeof(*h))
			goto reject;
		eh = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
		h = (const struct demo_hdr *)(eh + 1);
		if (eh->ether_type != rte_cpu_to_be_16(ETHERTYPE_TIDE_DEMO) ||
		    h->magic != DEMO_MAGIC || h->obj >= d->nobj ||
		    rte_pktmbuf_data_len(m) < sizeof(*eh) + sizeof(*h) + h->frag_len)
			goto reject;
		if (tide_seg_alloc_size(n->seg, h->seg_off, &alloc_len) != 0 ||
		    (uint64_t)h->frag_off + h->frag_len > alloc_len ||
		    (uint64_t)h->frag_off + h->frag_len > h->obj_len)
			goto reject;
		memcpy(n->mem + h->seg_off + h->frag_off, h + 1, h->frag_len);
		d->obj[h->obj].received += h->frag_len;
		n->frames_rx++;
		n->bytes_rx += h->frag_len;
		continue;
reject:
		n->rejected++;
	}
	rte_pktmbuf_free_bulk(pkts, k);
	return k;
}

static struct rte_mbuf *
frame_build(struct demo *d, int from, uint32_t o, uint32_t frag_off)
{
	struct node *src = &d->node[from], *dst = &d->node[d->obj[o].dst];
	struct rte_mbuf *m = rte_pktmbuf_alloc(tide_eth_port_pool(src->port));
	uint32_t len = d->obj[o].len - frag_off;
	struct rte_ether_hdr *eh;
	struct demo_hdr *h;

	if (m == NULL)
		return NULL;
	if (len > d->frag_max)
		len = d->frag_max;
	eh = (struct rte_ether_hdr *)rte_pktmbuf_append(m, sizeof(*eh) + sizeof(*h) + len);
	if (eh == NULL) { /* frame larger than the mbuf's room */
		rte_pktmbuf_free(m);
		return NULL;
	}
	memcpy(eh->dst_addr.addr_bytes, dst->mac, 6);
	memcpy(eh->src_addr.addr_bytes, src->mac, 6);
	eh->ether_type = rte_cpu_to_be_16(ETHERTYPE_TIDE_DEMO);
	h = (struct demo_hdr *)(eh + 1);
	*h = (struct demo_hdr){.magic = DEMO_MAGIC,
			       .obj = o,
			       .seg_off = d->obj[o].seg_off,
			       .obj_len = d->obj[o].len,
			       .frag_off = frag_off,
			       .frag_len = len};
	memcpy(h + 1, d->src + d->obj[o].src_off + frag_off, len);
	return m;
}

/* Send every object destined to the other node from node `from`, polling
 * both receivers as we go. */
static int
transfer_all(struct demo *d, int from, uint64_t *frames)
{
	struct rte_mbuf *burst[BURST];
	uint32_t o = 0, frag = 0;
	uint64_t deadline = tide_mono_ns() + 30ull * 1000000000ull;

	while (o < d->nobj) {
		uint16_t n = 0, k;

		while (n < BURST && o < d->nobj) {
			if (d->obj[o].dst == from) {
				o++; /* not ours to send */
				continue;
			}
			burst[n] = frame_build(d, from, o, frag);
			if (burst[n] == NULL)
				break;
			n++;
			frag += d->frag_max;
			if (frag >= d->obj[o].len) {
				o++;
				frag = 0;
			}
		}
		k = tide_eth_tx(d->node[from].port, 0, burst, n);
		*frames += k;
		if (k < n) {
			/* Ring full: rewind to the first frame not taken. */
			struct demo_hdr *h =
				(struct demo_hdr *)(rte_pktmbuf_mtod(burst[k],
								     struct rte_ether_hdr *) +
						    1);

			o = h->obj;
			frag = h->frag_off;
			rte_pktmbuf_free_bulk(burst + k, n - k);
		}
		node_poll(d, 0);
		node_poll(d, 1);
		if (tide_mono_ns() > deadline) {
			TIDE_LOG(ERR, "transfer did not finish in 30 s (object %u of %u)", o,
				 d->nobj);
			return -ETIMEDOUT;
		}
	}
	/* Drain what is still in flight. */
	for (int idle = 0; idle < 1000;)
		idle = node_poll(d, 0) + node_poll(d, 1) == 0 ? idle + 1 : 0;
	return 0;
}

static void
print_seg(const struct node *n)
{
	struct tide_seg_stats st;

	tide_seg_stats_get(n->seg, &st);
	printf("  %-6s segment %6.1f MiB: %7.2f MiB used in %" PRIu64
	       " objects, largest free extent %.1f MiB, %" PRIu64
	       " free extents, fragmentation %.4f\n",
	       n->name, st.size / MIB, st.used / MIB, st.live_allocs, st.largest_free / MIB,
	       st.free_extents, st.fragmentation);
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: tide-cluster [--node-env FILE] [--shards N] [--seed S]\n"
		   "Bring up a two-node Tide cluster in this process (DPDK net_ring link),\n"
		   "write a rollout-like workload into the peer's segment and verify it.\n");
}

int
main(int argc, char **argv)
{
	static const struct option lopts[] = {{"node-env", required_argument, NULL, 'e'},
					      {"shards", required_argument, NULL, 's'},
					      {"seed", required_argument, NULL, 'S'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	struct demo d = {0};
	struct tide_nodeenv ne;
	struct tide_eal_opts eo;
	struct tide_eal_info ei;
	struct tide_eth_port_opts po = {0};
	struct tide_eth_port_stats ps[2];
	const char *env_path = NULL;
	char err[4096] = "", src[64];
	uint32_t shards = 64, per_shard = 37;
	uint64_t seed = 1, rng, frames = 0, bytes = 0, t0, t1, mismatched = 0, incomplete = 0;
	int rc, c, status = 1;

	while ((c = getopt_long(argc, argv, "e:s:S:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			env_path = optarg;
			break;
		case 's':
			shards = (uint32_t)strtoul(optarg, NULL, 10);
			if (shards == 0 || shards > 10000) {
				fprintf(stderr, "tide-cluster: --shards must be 1..10000\n");
				return 2;
			}
			break;
		case 'S':
			seed = strtoull(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}

	rc = tide_nodeenv_load(&ne, env_path, NULL, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "tide-cluster: node environment is not valid (%s):\n%s",
			strerror(-rc), err);
		return 1;
	}
	tide_log_set_level(ne.log_level);
	printf("tide-cluster: node file %s\n", ne.path[0] != '\0' ? ne.path : "(none, defaults)");
	tide_nodeenv_source_str(&ne, "MOONCAKE_GLOBAL_SEGMENT_SIZE", src, sizeof(src));
	printf("  segment size per node %.0f MiB (from %s), device %s, hugepages %s\n",
	       ne.global_segment_size / MIB, src, ne.dpdk_device[0] ? ne.dpdk_device : "(none)",
	       ne.hugepages == TIDE_NODEENV_HUGE_ON    ? "on"
	       : ne.hugepages == TIDE_NODEENV_HUGE_OFF ? "off"
						       : "auto");

	/* The two nodes use an in-process net_ring pair, not TIDE_DPDK_DEVICE. */
	tide_eth_node_eal_opts(&ne, "tide-cluster", false, &eo);
	rc = tide_eal_init(&eo, &ei);
	if (rc != 0) {
		fprintf(stderr, "tide-cluster: DPDK EAL did not start: %s\n", strerror(-rc));
		return 1;
	}
	printf("  DPDK EAL up: %s, %.0f MiB, %u lcore(s) [%s]\n",
	       ei.hugepages ? "hugepages" : "no hugepages (--no-huge)", ei.mem_bytes / MIB,
	       ei.lcores, ei.huge_reason);

	po.nb_rxd = (uint16_t)ne.rxd;
	po.nb_txd = (uint16_t)ne.txd;
	rc = tide_eth_ring_pair("tide_node_a", "tide_node_b", &po, &d.node[0].port,
				&d.node[1].port);
	if (rc != 0) {
		fprintf(stderr, "tide-cluster: cannot create the net_ring link: %s\n",
			strerror(-rc));
		goto out_eal;
	}
	for (int i = 0; i < 2; i++) {
		tide_eth_port_mac(d.node[i].port, d.node[i].mac);
		if (!tide_eth_port_link_up(d.node[i].port)) {
			fprintf(stderr, "tide-cluster: port %d link is down\n", i);
			goto out_ports;
		}
	}
	if (node_init(&d.node[0], "node-a", ne.global_segment_size) != 0 ||
	    node_init(&d.node[1], "node-b", ne.global_segment_size) != 0)
		goto out_nodes;
	printf("  two nodes up, joined by net_ring ports %u <-> %u\n",
	       tide_eth_port_id(d.node[0].port), tide_eth_port_id(d.node[1].port));

	/* Workload: shards of objects, placed alternately on the two nodes'
	 * segments (objects for node-a are sent by node-b and vice versa). */
	d.nobj = shards * per_shard;
	d.obj = calloc(d.nobj, sizeof(*d.obj));
	d.frag_max = (ne.mtu < RTE_MBUF_DEFAULT_DATAROOM ? ne.mtu : RTE_MBUF_DEFAULT_DATAROOM) -
		     (uint32_t)sizeof(struct demo_hdr);
	rng = seed;
	for (uint32_t i = 0; i < d.nobj; i++) {
		d.obj[i].len = shard_obj_size(i % per_shard, &rng, 256 * 1024);
		d.obj[i].src_off = (uint32_t)d.src_len;
		d.src_len += d.obj[i].len;
	}
	d.src = malloc(d.src_len);
	if (d.obj == NULL || d.src == NULL)
		goto out_nodes;
	for (uint64_t i = 0; i < d.src_len; i++)
		d.src[i] = (uint8_t)(tide_rng_next(&rng) >> 56);
	for (uint32_t i = 0; i < d.nobj; i++) {
		struct node *dst;

		d.obj[i].dst = (i / per_shard) % 2 == 0 ? 1 : 0;
		dst = &d.node[d.obj[i].dst];
		rc = tide_seg_alloc(dst->seg, d.obj[i].len, 64, &d.obj[i].seg_off);
		if (rc != 0) {
			fprintf(stderr, "tide-cluster: %s segment full at object %u (%s)\n",
				dst->name, i, strerror(-rc));
			goto out_nodes;
		}
		d.obj[i].live = true;
		bytes += d.obj[i].len;
	}

	t0 = tide_mono_ns();
	/* Each node in turn sends the objects destined to the other one. */
	for (int from = 0; from < 2; from++) {
		rc = transfer_all(&d, from, &frames);
		if (rc != 0)
			goto out_nodes;
	}
	t1 = tide_mono_ns();

	for (uint32_t i = 0; i < d.nobj; i++) {
		const struct node *dst = &d.node[d.obj[i].dst];

		if (d.obj[i].received != d.obj[i].len)
			incomplete++;
		else if (memcmp(dst->mem + d.obj[i].seg_off, d.src + d.obj[i].src_off,
				d.obj[i].len) != 0)
			mismatched++;
	}
	for (int i = 0; i < 2; i++)
		tide_eth_port_stats(d.node[i].port, &ps[i]);

	printf("\nworkload: %u shards x %u objects = %u objects, %.2f MiB (seed %" PRIu64 ")\n",
	       shards, per_shard, d.nobj, bytes / MIB, seed);
	printf("transfer: %" PRIu64 " frames in %.1f ms, %.1f MiB/s, %.0f objects/s\n", frames,
	       (t1 - t0) / 1e6, bytes / MIB / ((t1 - t0) / 1e9), d.nobj / ((t1 - t0) / 1e9));
	for (int i = 0; i < 2; i++)
		printf("  %-6s port: tx %" PRIu64 " / rx %" PRIu64 " packets, rx missed %" PRIu64
		       ", frames placed %" PRIu64 ", rejected %" PRIu64 "\n",
		       d.node[i].name, ps[i].opackets, ps[i].ipackets, ps[i].imissed,
		       d.node[i].frames_rx, d.node[i].rejected);
	printf("verify:   %u objects compared with their source: %" PRIu64 " incomplete, %" PRIu64
	       " mismatched\n",
	       d.nobj, incomplete, mismatched);
	print_seg(&d.node[0]);
	print_seg(&d.node[1]);

	/* A training step ends: remove every other shard, as the driver does. */
	for (uint32_t i = 0; i < d.nobj; i++) {
		if ((i / per_shard) % 4 < 2)
			continue;
		rc = tide_seg_free(d.node[d.obj[i].dst].seg, d.obj[i].seg_off);
		if (rc != 0) {
			fprintf(stderr, "tide-cluster: free of object %u failed: %s\n", i,
				strerror(-rc));
			goto out_nodes;
		}
		d.obj[i].live = false;
	}
	printf("after removing half of the shards:\n");
	print_seg(&d.node[0]);
	print_seg(&d.node[1]);

	if (incomplete == 0 && mismatched == 0 && d.node[0].rejected + d.node[1].rejected == 0) {
		printf("\nRESULT: OK: %u objects written across the link and verified byte for "
		       "byte\n",
		       d.nobj);
		status = 0;
	} else {
		printf("\nRESULT: FAILED: %" PRIu64 " incomplete, %" PRIu64
		       " mismatched objects, %" PRIu64 " frames rejected\n",
		       incomplete, mismatched, d.node[0].rejected + d.node[1].rejected);
	}

out_nodes:
	free(d.obj);
	free(d.src);
	node_fini(&d.node[0]);
	node_fini(&d.node[1]);
out_ports:
	tide_eth_port_close(d.node[0].port);
	tide_eth_port_close(d.node[1].port);
out_eal:
	tide_eal_fini();
	return status;
}
