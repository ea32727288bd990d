/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names of the counters in struct tide_net_stats, in declaration order, so
 * tools (DPDK telemetry, tide-net) can export every counter without
 * listing them again. The struct is all uint64_t, which the assert pins.
 */
#include "tide_net.h"

static const char *const stats_names[] = {
	"rx_frames",
	"rx_bytes",
	"tx_frames",
	"tx_bytes",
	"eth_rx_short",
	"eth_rx_not_ours",
	"eth_rx_ipv6",
	"eth_rx_unknown_type",
	"tx_nobufs",
	"tx_dropped",
	"tx_deferred",
	"arp_rx",
	"arp_rx_bad",
	"arp_rx_requests",
	"arp_rx_replies",
	"arp_rx_not_ours",
	"arp_tx_requests",
	"arp_tx_replies",
	"arp_tx_gratuitous",
	"arp_expired",
	"arp_pending_dropped",
	"arp_unreachable",
	"ip_rx",
	"ip_rx_bad_hdr",
	"ip_rx_bad_len",
	"ip_rx_bad_csum",
	"ip_rx_frags",
	"ip_rx_not_ours",
	"ip_rx_bad_proto",
	"ip_tx",
	"icmp_rx",
	"icmp_rx_bad",
	"icmp_rx_echo",
	"icmp_tx_echo_reply",
	"icmp_rx_other",
	"tcp_rx_segs",
	"tcp_tx_segs",
	"tcp_rx_bad_csum",
	"tcp_rx_bad_hdr",
	"tcp_rx_no_conn",
	"tcp_rst_tx",
	"tcp_rst_rx",
	"tcp_rx_out_of_window",
	"tcp_rx_paws",
	"tcp_rx_bad_ack",
	"tcp_rx_dup_bytes",
	"tcp_rx_ooo_segs",
	"tcp_rx_ooo_dropped",
	"tcp_rx_orphan_bytes",
	"tcp_challenge_acks",
	"tcp_challenge_limited",
	"tcp_retrans_segs",
	"tcp_rto_fired",
	"tcp_fast_retrans",
	"tcp_dup_acks",
	"tcp_window_probes",
	"tcp_keepalive_probes",
	"tcp_delayed_acks",
	"tcp_listen_overflow",
	"tcp_accept_refused",
	"tcp_conn_refused",
	"tcp_conn_timeouts",
	"tcp_conn_resets",
	"tcp_conn_nomem",
	"tcp_active_opens",
	"tcp_passive_opens",
	"tcp_conns",
	"tcp_sack_blocks_tx",
	"tcp_sack_blocks_rx",
	"tcp_dsack_tx",
	"tcp_dsack_rx",
	"tcp_sack_rejected",
	"tcp_sack_recoveries",
	"tcp_sack_retrans_segs",
	"tcp_lost_retrans",
	"tcp_spurious_retrans",
	"tcp_sack_sb_overflow",
	"tcp_tlp_probes",
	"tcp_tx_blocked",
	"tcp_tx_cwr",
	"tcp_syncookies_sent",
	"tcp_syncookies_ok",
	"tcp_syncookies_failed",
};

_Static_assert(sizeof(struct tide_net_stats) ==
		       sizeof(stats_names) / sizeof(stats_names[0]) * sizeof(uint64_t),
	       "struct tide_net_stats changed: update stats_names[] in net_stats.c");

const char *const *
tide_net_stats_names(size_t *n)
{
	*n = sizeof(stats_names) / sizeof(stats_names[0]);
	return stats_names;
}
