/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * Receive-side scaling as Tide predicts it: the Toeplitz hash a NIC computes
 * over a received IPv4/TCP frame, the redirection table (RETA) that maps the
 * hash to an RX queue, and a local-port picker for active opens that only
 * returns ports whose *reply* tuple lands on the connecting lcore's queue (as
 * F-Stack, mTCP and Machnet do), so a connection lives on one lcore.
 *
 * Everything here is pure computation: no EAL, no device. A port exposes the
 * key and RETA it actually programmed (or, for devices without RSS, the ones
 * its software steering uses) through tide_eth_port_rss().
 *
 * Addresses and ports are host byte order throughout; the hash is computed
 * over their network byte order representation, as the NIC sees them.
 */
#ifndef TIDE_ETH_RSS_H
#define TIDE_ETH_RSS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Longest hash key kept (i40e uses 52 bytes, most NICs 40). */
#define TIDE_ETH_RSS_KEY_MAX 64
/** Largest redirection table kept (ice has 512 entries per VSI in 22.11). */
#define TIDE_ETH_RSS_RETA_MAX 512
/** Default RETA size for software steering and devices that do not report one. */
#define TIDE_ETH_RSS_RETA_DEFAULT 128
/** Shortest key that covers an IPv4/TCP tuple (12 bytes of input + 4). */
#define TIDE_ETH_RSS_KEY_MIN 16

/** The Microsoft RSS verification key (40 bytes), the default of most NICs. */
extern const uint8_t tide_eth_rss_key_ms[40];

/**
 * The symmetric key 0x6d5a repeated (40 bytes): hash(a, b, pa, pb) equals
 * hash(b, a, pb, pa), so both directions of a connection, and both ends of
 * a link whose ports use the same RETA, pick the same queue index.
 */
extern const uint8_t tide_eth_rss_key_sym[40];

/** A hash key and redirection table. */
struct tide_eth_rss {
	uint8_t key[TIDE_ETH_RSS_KEY_MAX];
	uint8_t key_len;                      /**< bytes used in key, TIDE_ETH_RSS_KEY_MIN.._MAX */
	uint16_t nb_queues;                   /**< queues the RETA spreads over, >= 1 */
	uint16_t reta_size;                   /**< entries used in reta, 1.._RETA_MAX */
	uint16_t reta[TIDE_ETH_RSS_RETA_MAX]; /**< queue of hash % reta_size */
	/**
	 * Private, filled by tide_eth_rss_init() from the key: the hash
	 * contribution of each value of each of the 12 IPv4/TCP input bytes, so
	 * a hash costs 12 lookups instead of 96 bit steps. Re-run
	 * tide_eth_rss_init() after changing the key.
	 */
	uint32_t lut[12][256];
};

/**
 * Fill `rss` with `key` (NULL = tide_eth_rss_key_sym, repeated to key_len
 * when key_len > 40) and a RETA of `reta_size` entries spread round-robin
 * over `nb_queues` (entry i -> queue i % nb_queues).
 * \param key_len  bytes of key to keep; 0 = 40 (or the length of a given key
 *                 must be passed explicitly).
 * \return 0; -EINVAL key_len outside TIDE_ETH_RSS_KEY_MIN..MAX, reta_size 0
 *         or above TIDE_ETH_RSS_RETA_MAX, nb_queues 0, or key given with key_len 0.
 * Thread: any.
 */
int tide_eth_rss_init(struct tide_eth_rss *rss, const uint8_t *key, size_t key_len,
		      uint16_t reta_size, uint16_t nb_queues);

/**
 * The Toeplitz hash of `len` bytes of input under `key`.
 * \param key_len  must be at least len + 4 (shorter keys are padded with zero
 *                 bits, which is not what a NIC does).
 * \return the 32-bit hash. Thread: any.
 */
uint32_t tide_eth_toeplitz(const uint8_t *key, size_t key_len, const uint8_t *data, size_t len);

/**
 * The NIC's IPv4/TCP hash of a received frame: Toeplitz over
 * (source ip, destination ip, source port, destination port), in that order.
 * \return the hash. Thread: any.
 */
uint32_t tide_eth_rss_hash_v4tcp(const struct tide_eth_rss *rss, uint32_t sip, uint32_t dip,
				 uint16_t sport, uint16_t dport);

/**
 * The NIC's IPv4 (2-tuple) hash, used for non-TCP and fragmented frames.
 * \return the hash. Thread: any.
 */
uint32_t tide_eth_rss_hash_v4(const struct tide_eth_rss *rss, uint32_t sip, uint32_t dip);

/** The queue the RETA maps `hash` to. Thread: any. */
uint16_t tide_eth_rss_queue(const struct tide_eth_rss *rss, uint32_t hash);

/**
 * The queue that receives the frames of a connection from (rip, rport) to
 * (lip, lport): the RETA entry of the reply tuple's hash.
 * \return queue index < rss->nb_queues. Thread: any.
 */
uint16_t tide_eth_rss_reply_queue(const struct tide_eth_rss *rss, uint32_t lip, uint16_t lport,
				  uint32_t rip, uint16_t rport);

/**
 * State of one lcore's local-port picker. Zero-initialise, then
 * tide_eth_rss_picker_init(); pass as tide_net_opts.port_arg with
 * tide_eth_rss_port_pick as tide_net_opts.port_pick.
 */
struct tide_eth_rss_picker {
	const struct tide_eth_rss *rss; /**< must outlive the picker */
	uint32_t lip;                   /**< our address */
	uint16_t queue;                 /**< the queue our lcore polls */
	uint16_t lo, hi;                /**< ephemeral range, inclusive */
	/* Private. */
	uint32_t cursor;   /* next port to try, lo..hi */
	uint32_t scanned;  /* ports examined since attempt 0 */
	uint32_t win[16];  /* Toeplitz key windows of the 16 destination-port bits */
	uint64_t picks;    /* ports returned */
	uint64_t rejected; /* ports examined and skipped (hash to another queue) */
};

/**
 * Prepare a picker for `queue` of `rss` and local address `lip`, choosing
 * ports in [lo, hi] (0, 0 = 49152..65535). The first port tried is spread
 * by queue so lcores start in different parts of the range.
 * \return 0; -EINVAL rss NULL, queue >= rss->nb_queues, lo 0 or lo > hi.
 * Thread: any (the picker is then owned by the stack's thread).
 */
int tide_eth_rss_picker_init(struct tide_eth_rss_picker *pk, const struct tide_eth_rss *rss,
			     uint16_t queue, uint32_t lip, uint16_t lo, uint16_t hi);

/**
 * A tide_net_port_pick_fn: the next port p of the range, walking on from the
 * previous pick, whose reply tuple (rip, lip, rport, p) hashes to the
 * picker's queue. `attempt` 0 starts a new search; each further attempt
 * (the stack found the 4-tuple in use) continues it.
 * \param arg  a struct tide_eth_rss_picker *.
 * \return 0 and *lport set; -EADDRNOTAVAIL the search examined the whole
 *         range since attempt 0 (no more ports of this queue), or no port of
 *         the range maps to the queue.
 * Thread: the picker's owner.
 */
int tide_eth_rss_port_pick(void *arg, uint32_t rip, uint16_t rport, unsigned attempt,
			   uint16_t *lport);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_ETH_RSS_H */
