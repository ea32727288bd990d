/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Toeplitz hashing and RSS-aware local port selection.
 *
 * Toeplitz is linear over XOR: the hash of an input is the XOR, over its set
 * bits i, of the 32-bit key window starting at bit i. The picker uses that to
 * hash the fixed part of the reply tuple once and then add the 16 bits of each
 * candidate port with at most 16 XORs, so scanning the range is cheap.
 */
#include <errno.h>
#include <string.h>

#include "tide_eth_rss.h"

#define EPH_LO 49152u
#define EPH_HI 65535u
/* Bit offset of the destination port in the IPv4/TCP hash input
 * (src ip 32, dst ip 32, src port 16, dst port 16). */
#define DPORT_BIT 80u

const uint8_t tide_eth_rss_key_ms[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

const uint8_t tide_eth_rss_key_sym[40] = {
	0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
	0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
	0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
};

static unsigned
key_bit(const uint8_t *key, size_t key_len, size_t bit)
{
	if (bit / 8 >= key_len)
		return 0;
	return (key[bit / 8] >> (7 - bit % 8)) & 1u;
}

/* The 32 key bits starting at bit `bit`. */
static uint32_t
key_window(const uint8_t *key, size_t key_len, size_t bit)
{
	uint32_t w = 0;

	for (size_t i = 0; i < 32; i++)
		w = (w << 1) | key_bit(key, key_len, bit + i);
	return w;
}

uint32_t
tide_eth_toeplitz(const uint8_t *key, size_t key_len, const uint8_t *data, size_t len)
{
	uint32_t h = 0, w = key_window(key, key_len, 0);
	size_t bit = 32; /* next key bit to shift into the window */

	for (size_t i = 0; i < len; i++) {
		for (int b = 7; b >= 0; b--) {
			if (data[i] & (1u << b))
				h ^= w;
			w = (w << 1) | key_bit(key, key_len, bit++);
		}
	}
	return h;
}

/* Hash contribution of byte value v at input byte position pos: the XOR of
 * the key windows of its set bits. */
static void
lut_fill(struct tide_eth_rss *rss)
{
	for (unsigned pos = 0; pos < 12; pos++) {
		uint32_t w[8];

		for (unsigned b = 0; b < 8; b++)
			w[b] = key_window(rss->key, rss->key_len, pos * 8 + b);
		for (unsigned v = 0; v < 256; v++) {
			uint32_t h = 0;

			for (unsigned b = 0; b < 8; b++)
				if (v & (0x80u >> b))
					h ^= w[b];
			rss->lut[pos][v] = h;
		}
	}
}

static uint32_t
lut_word(const struct tide_eth_rss *rss, unsigned pos, uint32_t v)
{
	return rss->lut[pos][v >> 24] ^ rss->lut[pos + 1][(v >> 16) & 0xff] ^
	       rss->lut[pos + 2][(v >> 8) & 0xff] ^ rss->lut[pos + 3][v & 0xff];
}

uint32_t
tide_eth_rss_hash_v4tcp(const struct tide_eth_rss *rss, uint32_t sip, uint32_t dip, uint16_t sport,
			uint16_t dport)
{
	return lut_word(rss, 0, sip) ^ lut_word(rss, 4, dip) ^
	       lut_word(rss, 8, ((uint32_t)sport << 16) | dport);
}

uint32_t
tide_eth_rss_hash_v4(const struct tide_eth_rss *rss, uint32_t sip, uint32_t dip)
{
	return lut_word(rss, 0, sip) ^ lut_word(rss, 4, dip);
}

uint16_t
tide_eth_rss_queue(const struct tide_eth_rss *rss, uint32_t hash)
{
	/* NICs index the RETA with the hash's low bits; for the power-of-two
	 * sizes they all use, the modulo is the same thing. */
	return rss->reta[hash % rss->reta_size];
}

uint16_t
tide_eth_rss_reply_queue(const struct tide_eth_rss *rss, uint32_t lip, uint16_t lport, uint32_t rip,
			 uint16_t rport)
{
	return tide_eth_rss_queue(rss, tide_eth_rss_hash_v4tcp(rss, rip, lip, rport, lport));
}

int
tide_eth_rss_init(struct tide_eth_rss *rss, const uint8_t *key, size_t key_len, uint16_t reta_size,
		  uint16_t nb_queues)
{
	if (key == NULL && key_len == 0)
		key_len = sizeof(tide_eth_rss_key_sym);
	if (key_len < TIDE_ETH_RSS_KEY_MIN || key_len > TIDE_ETH_RSS_KEY_MAX || reta_size == 0 ||
	    reta_size > TIDE_ETH_RSS_RETA_MAX || nb_queues == 0)
		return -EINVAL;
	memset(rss, 0, sizeof(*rss));
	if (key != NULL) {
		memcpy(rss->key, key, key_len);
	} else {
		/* The 16-bit pattern repeated keeps the key symmetric at any length. */
		for (size_t i = 0; i < key_len; i++)
			rss->key[i] = tide_eth_rss_key_sym[i % 2];
	}
	rss->key_len = (uint8_t)key_len;
	lut_fill(rss);
	rss->reta_size = reta_size;
	rss->nb_queues = nb_queues;
	for (uint16_t i = 0; i < reta_size; i++)
		rss->reta[i] = i % nb_queues;
	return 0;
}

int
tide_eth_rss_picker_init(struct tide_eth_rss_picker *pk, const struct tide_eth_rss *rss,
			 uint16_t queue, uint32_t lip, uint16_t lo, uint16_t hi)
{
	uint32_t range;

	if (lo == 0 && hi == 0) {
		lo = EPH_LO;
		hi = EPH_HI;
	}
	if (rss == NULL || queue >= rss->nb_queues || lo == 0 || lo > hi)
		return -EINVAL;
	memset(pk, 0, sizeof(*pk));
	pk->rss = rss;
	pk->lip = lip;
	pk->queue = queue;
	pk->lo = lo;
	pk->hi = hi;
	range = (uint32_t)hi - lo + 1;
	pk->cursor = lo + (uint32_t)((uint64_t)range * queue / rss->nb_queues);
	/* Bit b of the port (b = 15 is its most significant) sits at input bit
	 * DPORT_BIT + 15 - b. */
	for (unsigned b = 0; b < 16; b++)
		pk->win[b] = key_window(rss->key, rss->key_len, DPORT_BIT + 15 - b);
	return 0;
}

int
tide_eth_rss_port_pick(void *arg, uint32_t rip, uint16_t rport, unsigned attempt, uint16_t *lport)
{
	struct tide_eth_rss_picker *pk = arg;
	const struct tide_eth_rss *rss = pk->rss;
	uint32_t range = (uint32_t)pk->hi - pk->lo + 1;
	uint32_t base = tide_eth_rss_hash_v4tcp(rss, rip, pk->lip, rport, 0);

	if (attempt == 0)
		pk->scanned = 0;
	while (pk->scanned < range) {
		uint32_t p = pk->cursor, h = base;

		pk->cursor = p == pk->hi ? pk->lo : p + 1;
		pk->scanned++;
		for (unsigned b = 0; b < 16; b++)
			if (p & (1u << b))
				h ^= pk->win[b];
		if (tide_eth_rss_queue(rss, h) == pk->queue) {
			*lport = (uint16_t)p;
			pk->picks++;
			return 0;
		}
		pk->rejected++;
	}
	return -EADDRNOTAVAIL;
}
