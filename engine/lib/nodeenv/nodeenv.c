/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node environment file: key table, line lexer, layered loading.
 *
 * Everything about a key lives in one row of `keys[]`; the defaults, the
 * parser, format/dump and `tide-env keys` all read that row, so adding a key
 * is one line here plus its struct field.
 */
#include <assert.h>
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodeenv_internal.h"
#include "tide_log.h"
#include "tide_nodeenv.h"

extern char **environ;

enum ktype {
	T_STR,      /* char[size]; min = minimum length (0 or 1) */
	T_SIZE,     /* uint64_t bytes, Mooncake size dialect, bounds min..max */
	T_BOOL,     /* bool */
	T_U32,      /* uint32_t decimal, bounds min..max */
	T_PORT,     /* uint16_t decimal 1..65535 */
	T_ENUM,     /* enum (int-sized), names[] */
	T_IPV4,     /* struct in_addr at off, bool "set" at off2; "" = unset */
	T_NETMASK,  /* struct in_addr at off, uint8_t prefix length at off2 */
	T_MAC,      /* uint8_t[6] at off, bool "set" at off2; "" = unset */
	T_LOGLEVEL, /* enum tide_log_level */
	T_FAULT,    /* char[size] spec at off, struct tide_nodeenv_fault at off2 */
};

struct key_def {
	const char *name;
	enum ktype type;
	size_t off;
	size_t size; /* sizeof the field at off: checked against the type once */
	size_t off2;
	const char *def; /* default as file text, parsed by the same code as the file */
	uint64_t min, max;
	const char *const *names; /* T_ENUM, indexed by enum value */
	int (*check)(const char *v, uint64_t num, char *why, size_t n);
	const char *valid; /* what a value may be, in words: errors and `tide-env keys` */
	const char *doc;
};

#define FLD(f) \
	.off = offsetof(struct tide_nodeenv, f), .size = sizeof(((struct tide_nodeenv *)0)->f)
#define FLD2(f) .off2 = offsetof(struct tide_nodeenv, f)
#define NOLIMIT .max = UINT64_MAX
#define SIZE_EX "size: bytes or a number with b/k/kb/m/mb/g/gb/t/tb, e.g. 8gb, 512mb, 1073741824"
#define MB2     (UINT64_C(2) << 20)

static const char *const protocol_names[] = {"tcp", "rdma", NULL};
static const char *const huge_names[] = {"auto", "on", "off", NULL};
static const char *const idle_names[] = {"busy", "adaptive", NULL};
static const char *const tcp_cc_names[] = {"newreno", "cubic", "westwood", NULL};
static const char *const agent_names[] = {"required", "auto", "off", NULL};
static const char *const csum_names[] = {"auto", "sw", "offload", "elide", NULL};

_Static_assert(sizeof(enum tide_nodeenv_protocol) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum tide_nodeenv_hugepages) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum tide_nodeenv_idle) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum tide_nodeenv_agent) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum tide_nodeenv_csum) == sizeof(int), "enum fields are int-sized");
_Static_assert(sizeof(enum tide_log_level) == sizeof(int), "enum fields are int-sized");

static const struct key_def keys[] = {
	/* Mooncake-compatible: same names and meanings as Mooncake's. */
	{.name = "MOONCAKE_MASTER",
	 .type = T_STR,
	 FLD(master),
	 .def = "127.0.0.1:50051",
	 .min = 1,
	 .check = ne_chk_master,
	 .valid = "host:port, port 1..65535, or etcd://host:port[;host:port...]",
	 .doc = "Address of the master (mooncake_master --port), or the etcd its HA leader is "
		"elected in (the leader's address is read from mooncake-store/<MC_STORE_CLUSTER_ID "
		"or mooncake_cluster>/master_view); every node must agree."},
	{.name = "MOONCAKE_LOCAL_HOSTNAME",
	 .type = T_STR,
	 FLD(local_hostname),
	 .def = "localhost",
	 .min = 1,
	 .check = ne_chk_hostname,
	 .valid = "host name or address",
	 .doc = "This node's kernel-network address, also its segment name. Not the DPDK port's "
		"IP."},
	{.name = "MOONCAKE_PROTOCOL",
	 .type = T_ENUM,
	 FLD(protocol),
	 .def = "tcp",
	 .names = protocol_names,
	 .valid = "tcp | rdma",
	 .doc = "Transport Mooncake clients ask for; tcp runs over DPDK when TIDE_DPDK_DEVICE is "
		"set."},
	{.name = "MOONCAKE_DEVICE",
	 .type = T_STR,
	 FLD(device),
	 .def = "",
	 .check = ne_chk_devlist,
	 .valid = "comma list of RDMA device names, or empty",
	 .doc = "RDMA devices (Mooncake rdma_devices), e.g. mlx5_0,mlx5_1; empty = auto."},
	{.name = "MOONCAKE_TE_META_DATA_SERVER",
	 .type = T_STR,
	 FLD(metadata_server),
	 .def = "P2PHANDSHAKE",
	 .min = 1,
	 .check = ne_chk_metadata,
	 .valid = "P2PHANDSHAKE | http://host:port/path | etcd://host:port[;host:port...]",
	 .doc = "Transfer-engine metadata service; P2PHANDSHAKE needs none."},
	{.name = "MOONCAKE_GLOBAL_SEGMENT_SIZE",
	 .type = T_SIZE,
	 FLD(global_segment_size),
	 .def = "3355443200",
	 NOLIMIT,
	 .valid = SIZE_EX,
	 .doc = "Memory this node contributes to the shared pool (Mooncake default 3.125gb)."},
	{.name = "MOONCAKE_LOCAL_BUFFER_SIZE",
	 .type = T_SIZE,
	 FLD(local_buffer_size),
	 .def = "1073741824",
	 NOLIMIT,
	 .valid = SIZE_EX,
	 .doc = "Per-client staging buffer registered with the transfer engine."},
	{.name = "MOONCAKE_CONFIG_PATH",
	 .type = T_STR,
	 FLD(config_path),
	 .def = "",
	 .valid = "path, or empty",
	 .doc = "Mooncake JSON config file; when set, Mooncake's loaders read it instead."},
	{.name = "MOONCAKE_TENANT_ID",
	 .type = T_STR,
	 FLD(tenant_id),
	 .def = "default",
	 .min = 1,
	 .valid = "non-empty string",
	 .doc = "Tenant (key namespace) of this node's clients."},
	{.name = "MC_FORCE_TCP",
	 .type = T_BOOL,
	 FLD(force_tcp),
	 .def = "false",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "Force the kernel-TCP transport and skip DPDK even if a device is set."},
	{.name = "MC_STORE_MEMCPY",
	 .type = T_BOOL,
	 FLD(store_memcpy),
	 .def = "true",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "Copy with memcpy when the replica is on this node instead of the network."},
	{.name = "MC_TCP_BIND_ADDRESS",
	 .type = T_IPV4,
	 FLD(tcp_bind_address),
	 FLD2(tcp_bind_address_set),
	 .def = "",
	 .valid = "IPv4 address, or empty (auto)",
	 .doc = "Listen address of the transfer engine's handshake and kernel-TCP data ports; "
		"empty = the address the engine names itself by (MOONCAKE_LOCAL_HOSTNAME); "
		"0.0.0.0 = every address (stock Mooncake)."},
	{.name = "MC_MIN_RPC_PORT",
	 .type = T_PORT,
	 FLD(min_rpc_port),
	 .def = "15000",
	 .min = 1,
	 .max = 65535,
	 .valid = "1..65535, <= MC_MAX_RPC_PORT",
	 .doc = "Lowest port of the handshake / kernel-TCP data port range."},
	{.name = "MC_MAX_RPC_PORT",
	 .type = T_PORT,
	 FLD(max_rpc_port),
	 .def = "17000",
	 .min = 1,
	 .max = 65535,
	 .valid = "1..65535, >= MC_MIN_RPC_PORT",
	 .doc = "Highest port of the handshake / kernel-TCP data port range."},
	{.name = "MC_RPC_TIMEOUT_MS",
	 .type = T_U32,
	 FLD(rpc_timeout_ms),
	 .def = "30000",
	 .min = 1,
	 .max = 3600000,
	 .valid = "1..3600000 (ms)",
	 .doc = "Timeout of one client-to-master RPC."},
	{.name = "MC_RPC_CONNECT_TIMEOUT_MS",
	 .type = T_U32,
	 FLD(rpc_connect_timeout_ms),
	 .def = "30000",
	 .min = 1,
	 .max = 3600000,
	 .valid = "1..3600000 (ms)",
	 .doc = "Timeout of connecting to the master."},

	/* Tide's own. */
	{.name = "TIDE_DPDK_DEVICE",
	 .type = T_STR,
	 FLD(dpdk_device),
	 .def = "",
	 .check = ne_chk_dpdk_device,
	 .valid = "PCI address (0000:3b:00.0, 3b:00.0) or vdev (net_ring0, "
		  "net_memif0,role=server,...), or empty",
	 .doc = "The data-plane DPDK port; empty = no DPDK, kernel TCP only."},
	{.name = "TIDE_DPDK_RX_DEVICE",
	 .type = T_STR,
	 FLD(dpdk_rx_device),
	 .def = "",
	 .check = ne_chk_dpdk_device,
	 .valid = "vdev (net_memif1,role=client,zero-copy=yes,...), or empty",
	 .doc = "A second vdev to receive on; TIDE_DPDK_DEVICE then only transmits. Two "
		"one-way memif links, this node the zero-copy client of the one it receives "
		"on, copy each byte once per side; empty = receive on TIDE_DPDK_DEVICE."},
	{.name = "TIDE_DATA_IP",
	 .type = T_IPV4,
	 FLD(data_ip),
	 FLD2(data_ip_set),
	 .def = "",
	 .valid = "IPv4 address, or empty",
	 .doc = "IPv4 address of the DPDK port; required when TIDE_DPDK_DEVICE is set."},
	{.name = "TIDE_DATA_NETMASK",
	 .type = T_NETMASK,
	 FLD(data_netmask),
	 FLD2(data_prefix_len),
	 .def = "255.255.255.0",
	 .valid = "contiguous dotted mask (255.255.255.0) or /N (1..32)",
	 .doc = "Netmask of the data subnet."},
	{.name = "TIDE_GATEWAY",
	 .type = T_IPV4,
	 FLD(gateway),
	 FLD2(gateway_set),
	 .def = "",
	 .valid = "IPv4 address inside the data subnet, or empty",
	 .doc = "Next hop for peers outside the data subnet; empty = none."},
	{.name = "TIDE_DATA_MAC",
	 .type = T_MAC,
	 FLD(data_mac),
	 FLD2(data_mac_set),
	 .def = "",
	 .valid = "unicast MAC aa:bb:cc:dd:ee:ff, or empty",
	 .doc = "MAC to use on the DPDK port; empty = the port's own."},
	{.name = "TIDE_LCORES_PER_NUMA",
	 .type = T_U32,
	 FLD(lcores_per_numa),
	 .def = "1",
	 .min = 1,
	 .max = 128,
	 .valid = "1..128",
	 .doc = "Data-path lcores per NUMA node that has a port (when TIDE_LCORES is empty)."},
	{.name = "TIDE_LCORES",
	 .type = T_STR,
	 FLD(lcores),
	 .def = "",
	 .check = ne_chk_lcores,
	 .valid = "lcore list like 1-3,5 (ids 0..1023), or empty",
	 .doc = "Explicit data-path lcores; overrides TIDE_LCORES_PER_NUMA."},
	{.name = "TIDE_HUGEPAGES",
	 .type = T_ENUM,
	 FLD(hugepages),
	 .def = "auto",
	 .names = huge_names,
	 .valid = "auto | on | off",
	 .doc = "auto: hugepages when they can be reserved, else --no-huge; on: required; off: "
		"never."},
	{.name = "TIDE_HUGEPAGE_SIZE",
	 .type = T_SIZE,
	 FLD(hugepage_size),
	 .def = "2mb",
	 .min = MB2,
	 NOLIMIT,
	 .check = ne_chk_hugepage_size,
	 .valid = "2mb | 1gb",
	 .doc = "Hugepage size to reserve."},
	{.name = "TIDE_HUGEPAGE_MEM",
	 .type = T_SIZE,
	 FLD(hugepage_mem),
	 .def = "512mb",
	 .min = MB2,
	 NOLIMIT,
	 .valid = "size, a multiple of TIDE_HUGEPAGE_SIZE",
	 .doc = "Hugepage memory DPDK reserves (mbuf pools, rings)."},
	{.name = "TIDE_RXD",
	 .type = T_U32,
	 FLD(rxd),
	 .def = "1024",
	 .min = 64,
	 .max = 16384,
	 .check = ne_chk_pow2,
	 .valid = "power of two 64..16384",
	 .doc = "RX descriptors per queue."},
	{.name = "TIDE_TXD",
	 .type = T_U32,
	 FLD(txd),
	 .def = "1024",
	 .min = 64,
	 .max = 16384,
	 .check = ne_chk_pow2,
	 .valid = "power of two 64..16384",
	 .doc = "TX descriptors per queue."},
	{.name = "TIDE_MTU",
	 .type = T_U32,
	 FLD(mtu),
	 .def = "1500",
	 .min = 576,
	 .max = 9216,
	 .valid = "576..9216",
	 .doc = "MTU of the DPDK port; all peers must agree."},
	{.name = "TIDE_CSUM",
	 .type = T_ENUM,
	 FLD(csum),
	 .def = "auto",
	 .names = csum_names,
	 .valid = "auto | sw | offload | elide",
	 .doc = "IPv4/TCP checksums of the user-space stack: auto = the port's offloads where "
		"it has them, else software; sw = software; offload = the port's, start-up "
		"fails without them; elide = none computed or verified, net_memif/net_ring "
		"only, and the peer must elide too."},
	{.name = "TIDE_TCP_RTO_MIN_US",
	 .type = T_U32,
	 FLD(tcp_rto_min_us),
	 .def = "1000",
	 .min = 200,
	 .max = 1000000,
	 .valid = "200..1000000 (microseconds)",
	 .doc = "Floor of the user-space TCP retransmission timeout; 1000 suits a datacenter "
		"of Tide peers, use 200000 when peers are Linux hosts (delayed ACKs)."},
	{.name = "TIDE_TCP_MAX_RETRIES",
	 .type = T_U32,
	 FLD(tcp_max_retries),
	 .def = "15",
	 .min = 3,
	 .max = 30,
	 .valid = "3..30",
	 .doc = "Retransmissions of one segment (with exponential backoff) before a connection "
		"to a silent peer fails with a timeout."},
	{.name = "TIDE_TCP_CC",
	 .type = T_ENUM,
	 FLD(tcp_cc),
	 .def = "newreno",
	 .names = tcp_cc_names,
	 .valid = "newreno | cubic | westwood",
	 .doc = "Congestion control of the user-space TCP's senders: newreno halves the window "
		"per loss episode; cubic (RFC 9438); westwood sets it from the measured delivery "
		"rate times the least RTT (never below newreno's half), so random loss costs "
		"less rate."},
	{.name = "TIDE_TCP_HYSTART",
	 .type = T_BOOL,
	 FLD(tcp_hystart),
	 .def = "true",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "HyStart++ (RFC 9406) in each connection's first slow start: a rise of the "
		"round's least RTT (an eighth of it, at least 250 us) ends the doubling before "
		"the queue it measures overflows."},
	{.name = "TIDE_TCP_PACING",
	 .type = T_BOOL,
	 FLD(tcp_pacing),
	 .def = "false",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "Pacing of the user-space TCP's senders: data segments leave spread over the "
		"RTT (twice the window's rate in slow start, 1.2 times after) in bursts of an "
		"eighth of the RTT, not a window at once, so flows that share a shallow queue "
		"lose less."},
	{.name = "TIDE_TCP_SACK_COMPRESS",
	 .type = T_BOOL,
	 FLD(tcp_sack_compress),
	 .def = "true",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "SACK compression of the user-space TCP's receivers: while data arrive out of "
		"order, ACKs that only report more of an already reported run wait up to a "
		"quarter of the RTT or 44 segments (as Linux's), so a sender in recovery "
		"handles a few ACKs instead of one per segment."},
	{.name = "TIDE_IDLE",
	 .type = T_ENUM,
	 FLD(idle),
	 .def = "adaptive",
	 .names = idle_names,
	 .valid = "busy | adaptive",
	 .doc = "Idle policy of pollers: spin, or (adaptive) yield the CPU for 2 ms, then sleep "
		"TIDE_IDLE_SLEEP_US at a time; work submitted wakes a sleeper."},
	{.name = "TIDE_IDLE_SLEEP_US",
	 .type = T_U32,
	 FLD(idle_sleep_us),
	 .def = "100",
	 .max = 100000,
	 .valid = "0..100000 (us)",
	 .doc = "Sleep of an idle poller under TIDE_IDLE=adaptive."},
	{.name = "TIDE_IDLE_IRQ",
	 .type = T_BOOL,
	 FLD(idle_irq),
	 .def = "true",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "TIDE_IDLE=adaptive on a device whose receive queues can interrupt (net_memif, "
		"one queue per lcore): an idle poller that has yielded its CPU for 2 ms sleeps "
		"until the next frame or its next timer instead of waking every "
		"TIDE_IDLE_SLEEP_US. false = timed sleeps."},
	{.name = "TIDE_FAULT",
	 .type = T_FAULT,
	 FLD(fault_spec),
	 FLD2(fault),
	 .def = "",
	 .valid = "empty, or drop=P,dup=P,reorder=P,corrupt=P,delay_us=N,seed=N,dir=rx|tx|both",
	 .doc = "Fault injection for tests (P in [0,1]); empty = off."},
	{.name = "TIDE_LOG_LEVEL",
	 .type = T_LOGLEVEL,
	 FLD(log_level),
	 .def = "notice",
	 .valid = "error | warn | notice | info | debug",
	 .doc = "Log level of Tide processes."},
	{.name = "TIDE_FILE_PREFIX",
	 .type = T_STR,
	 FLD(file_prefix),
	 .def = "tide",
	 .min = 1,
	 .check = ne_chk_file_prefix,
	 .valid = "1..32 of A-Z a-z 0-9 _ -",
	 .doc = "DPDK --file-prefix; distinct per DPDK process group on one host."},
	{.name = "TIDE_EAL_ARGS",
	 .type = T_STR,
	 FLD(eal_args),
	 .def = "",
	 .valid = "free text (quote it in the file)",
	 .doc = "Extra DPDK EAL arguments appended to the derived ones."},
	{.name = "TIDE_AGENT_SOCKET",
	 .type = T_STR,
	 FLD(agent_socket),
	 .def = "/run/tide/agent.sock",
	 .min = 1,
	 .valid = "UNIX socket path, < 108 bytes",
	 .doc = "Socket of the per-node agent that clients attach to."},
	{.name = "TIDE_AGENT_SOCKET_GROUP",
	 .type = T_STR,
	 FLD(agent_socket_group),
	 .def = "",
	 .check = ne_chk_group,
	 .valid = "group name or numeric gid, or empty (the agent's own group)",
	 .doc = "Group of the agent socket (mode 0660): root, the agent's user and members of "
		"this group may attach; tide-node --socket-group overrides it."},
	{.name = "TIDE_AGENT",
	 .type = T_ENUM,
	 FLD(agent),
	 .def = "auto",
	 .names = agent_names,
	 .valid = "required | auto | off",
	 .doc = "How store clients use the per-node agent: auto = attach if one answers at "
		"TIDE_AGENT_SOCKET, else run the transfer engine in the client's own process "
		"(a master-only cluster, as stock Mooncake); required = attach or fail setup; "
		"off = always in-process."},
	{.name = "TIDE_PIN_UNREAD",
	 .type = T_BOOL,
	 FLD(pin_unread),
	 .def = "false",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "RL mode of mooncake_master: never evict an object that has not been read yet; "
		"a full store answers -200 (NO_AVAILABLE_HANDLE) as backpressure instead."},
	{.name = "TIDE_PUT_LEASE",
	 .type = T_BOOL,
	 FLD(put_lease),
	 .def = "true",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "Store clients: put small objects in one master round trip, in space the master "
		"leases to the client ahead (Tide's extension; a stock master does not offer it "
		"and puts take PutStart and PutEnd). false = always PutStart and PutEnd."},
	{.name = "TIDE_RDMA_AS_TCP",
	 .type = T_BOOL,
	 FLD(rdma_as_tcp),
	 .def = "false",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "On a node without an RDMA device, serve transfer engines that ask for protocol "
		"rdma (Miles' P2P weight sync hard-codes it) with Tide's TCP path, user-space when "
		"TIDE_DPDK_DEVICE is set, logged once at initialize. false = rdma fails there, as "
		"stock Mooncake's does."},
	{.name = "TIDE_MASTER_POLL_US",
	 .type = T_U32,
	 FLD(master_poll_us),
	 .def = "50",
	 .min = 0,
	 .max = 1000,
	 .valid = "0..1000 (microseconds)",
	 .doc = "Store clients poll for each answer of the master this long before sleeping: "
		"waking a sleeping thread costs tens of microseconds on a VM, more than the "
		"master takes to answer a small call. At most this much CPU per call; 0 = sleep "
		"at once."},
	{.name = "TIDE_DATA_POLL_US",
	 .type = T_U32,
	 FLD(data_poll_us),
	 .def = "50",
	 .min = 0,
	 .max = 1000,
	 .valid = "0..1000 (microseconds)",
	 .doc = "Transfer engines on kernel TCP: a caller waiting for the answer to a small "
		"request (64 KiB or less, sent from its own thread) polls this long before "
		"sleeping; the answer over loopback or a LAN often comes sooner than a "
		"sleeping thread wakes on a VM. At most this much CPU per request; 0 = sleep "
		"at once."},
	{.name = "TIDE_SHM_PEERS",
	 .type = T_BOOL,
	 FLD(shm_peers),
	 .def = "true",
	 .valid = "boolean: 1/0, true/false, yes/no, on/off",
	 .doc = "Transfer engines on kernel TCP: reach a peer process on this host (same user, "
		"same PID namespace) by mapping its store segment (a sealed memory file) and "
		"copying with memcpy, one copy per byte, instead of through loopback TCP. false = "
		"always TCP (what two hosts use). User-space TCP and RDMA never map."},
	{.name = "TIDE_ALLOW_NETS",
	 .type = T_STR,
	 FLD(allow_nets),
	 .def = "",
	 .check = ne_chk_allow_nets,
	 .valid = "comma list of networks (10.0.0.0/8, 192.168.1.7, fd00::/8), or empty",
	 .doc = "Peers allowed to connect to the transfer engine's handshake and data ports; "
		"a connection from any other address is closed at once. Empty = any (as "
		"stock Mooncake)."},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))
_Static_assert(NKEYS <= TIDE_NODEENV_MAX_KEYS, "raise TIDE_NODEENV_MAX_KEYS");

/* ---- error collection ---- */

struct errs {
	char *buf;
	size_t len;
	size_t used;
	unsigned n;
	bool full;
};

static const char trunc_mark[] = "...\n";

static void errs_add(struct errs *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
errs_add(struct errs *e, const char *fmt, ...)
{
	char line[2048];
	size_t l;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	e->n++;
	if (e->buf == NULL || e->len == 0) {
		TIDE_LOG(ERR, "%s", line);
		return;
	}
	if (e->full)
		return;
	l = strlen(line);
	/* Keep room for the truncation mark so a cut list always says so. */
	if (e->used + l + 1 + (sizeof(trunc_mark) - 1) < e->len) {
		memcpy(e->buf + e->used, line, l);
		e->used += l;
		e->buf[e->used++] = '\n';
		e->buf[e->used] = '\0';
		return;
	}
	e->full = true;
	if (e->used + sizeof(trunc_mark) <= e->len) {
		memcpy(e->buf + e->used, trunc_mark, sizeof(trunc_mark));
		e->used += sizeof(trunc_mark) - 1;
	}
}

/* A value for an error message: control bytes escaped, long values cut. */
static const char *
show(const char *v, char *buf, size_t n)
{
	size_t o = 0;

	for (const char *p = v; *p != '\0' && o + 8 < n; p++) {
		unsigned char c = (unsigned char)*p;

		if (o > 120) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	buf[o] = '\0';
	return buf;
}

/* ---- applying one value to one key ---- */

static void
put_int(void *p, int v)
{
	memcpy(p, &v, sizeof(v));
}

static int
get_int(const void *p)
{
	int v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static bool
has_ctl(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p != '\0'; p++) {
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			return true;
	}
	return false;
}

static void
describe_range(const struct key_def *k, char *buf, size_t n)
{
	char lo[32], hi[32];

	if (k->type != T_SIZE) {
		snprintf(buf, n, "%s", k->valid);
		return;
	}
	ne_size_human(k->min, lo, sizeof(lo));
	ne_size_human(k->max, hi, sizeof(hi));
	if (k->max == UINT64_MAX)
		snprintf(buf, n, "at least %s", lo);
	else
		snprintf(buf, n, "%s..%s", lo, hi);
}

/*
 * Parse v as key k and store it in ne. On failure nothing in ne changes and
 * why holds the tail of the message ("is not a size (...)").
 */
static int
apply(struct tide_nodeenv *ne, const struct key_def *k, const char *v, char *why, size_t n)
{
	char *base = (char *)ne;
	char range[160];
	uint64_t num = 0;
	int rc;

	if (has_ctl(v)) {
		ne_why(why, n, "contains a control character");
		return -EINVAL;
	}
	switch (k->type) {
	case T_STR:
		if (strlen(v) >= k->size) {
			ne_why(why, n, "is too long (at most %zu bytes)", k->size - 1);
			return -EINVAL;
		}
		if (k->min > 0 && *v == '\0') {
			ne_why(why, n, "is empty (valid: %s)", k->valid);
			return -EINVAL;
		}
		if (k->check != NULL && k->check(v, 0, why, n) != 0)
			return -EINVAL;
		memcpy(base + k->off, v, strlen(v) + 1);
		return 0;
	case T_SIZE:
		rc = tide_nodeenv_parse_size(v, &num);
		if (rc == -ERANGE) {
			ne_why(why, n, "is too large (above 2^64 bytes)");
			return -EINVAL;
		}
		if (rc != 0) {
			ne_why(why, n, "is not a size (examples: 8gb, 512mb, 1073741824)");
			return -EINVAL;
		}
		if (num < k->min || num > k->max) {
			describe_range(k, range, sizeof(range));
			ne_why(why, n, "is out of range (valid: %s)", range);
			return -EINVAL;
		}
		if (k->check != NULL && k->check(v, num, why, n) != 0)
			return -EINVAL;
		memcpy(base + k->off, &num, sizeof(num));
		return 0;
	case T_BOOL: {
		bool b;

		if (ne_parse_bool(v, &b) != 0) {
			ne_why(why, n, "is not a boolean (valid: 1/0, true/false, yes/no, on/off)");
			return -EINVAL;
		}
		memcpy(base + k->off, &b, sizeof(b));
		return 0;
	}
	case T_U32:
	case T_PORT:
		rc = ne_parse_u64(v, strlen(v), &num);
		if (rc == -EINVAL) {
			ne_why(why, n, "is not a decimal integer (valid: %s)", k->valid);
			return -EINVAL;
		}
		if (rc != 0 || num < k->min || num > k->max) {
			ne_why(why, n, "is out of range (valid: %s)", k->valid);
			return -EINVAL;
		}
		if (k->check != NULL && k->check(v, num, why, n) != 0)
			return -EINVAL;
		if (k->type == T_PORT) {
			uint16_t p = (uint16_t)num;

			memcpy(base + k->off, &p, sizeof(p));
		} else {
			uint32_t u = (uint32_t)num;

			memcpy(base + k->off, &u, sizeof(u));
		}
		return 0;
	case T_ENUM:
		/* Case-insensitive: Mooncake's MooncakeConfig lower-cases the protocol. */
		for (int i = 0; k->names[i] != NULL; i++) {
			if (strcasecmp(v, k->names[i]) == 0) {
				put_int(base + k->off, i);
				return 0;
			}
		}
		ne_why(why, n, "is not valid (valid: %s)", k->valid);
		return -EINVAL;
	case T_IPV4: {
		struct in_addr a = {0};
		bool set = *v != '\0';

		if (set && ne_parse_ipv4(v, &a) != 0) {
			ne_why(why, n, "is not an IPv4 address (valid: %s, e.g. 10.0.0.2)",
			       k->valid);
			return -EINVAL;
		}
		memcpy(base + k->off, &a, sizeof(a));
		memcpy(base + k->off2, &set, sizeof(set));
		return 0;
	}
	case T_NETMASK: {
		struct in_addr m;
		uint8_t prefix;

		if (ne_parse_netmask(v, &m, &prefix) != 0) {
			ne_why(why, n, "is not a netmask (valid: %s)", k->valid);
			return -EINVAL;
		}
		memcpy(base + k->off, &m, sizeof(m));
		memcpy(base + k->off2, &prefix, sizeof(prefix));
		return 0;
	}
	case T_MAC: {
		uint8_t mac[6] = {0};
		bool set = *v != '\0';

		if (set && ne_parse_mac(v, mac, why, n) != 0)
			return -EINVAL;
		memcpy(base + k->off, mac, sizeof(mac));
		memcpy(base + k->off2, &set, sizeof(set));
		return 0;
	}
	case T_LOGLEVEL: {
		enum tide_log_level l;

		if (tide_log_level_parse(v, &l) != 0) {
			ne_why(why, n, "is not a log level (valid: %s)", k->valid);
			return -EINVAL;
		}
		put_int(base + k->off, (int)l);
		return 0;
	}
	case T_FAULT: {
		struct tide_nodeenv_fault f;

		if (strlen(v) >= k->size) {
			ne_why(why, n, "is too long (at most %zu bytes)", k->size - 1);
			return -EINVAL;
		}
		if (tide_nodeenv_parse_fault(v, &f, why, n) != 0)
			return -EINVAL;
		memcpy(base + k->off, v, strlen(v) + 1);
		memcpy(base + k->off2, &f, sizeof(f));
		return 0;
	}
	}
	ne_why(why, n, "has an unknown type");
	return -EINVAL;
}

/* The field size each type expects; a mismatch is a table bug. */
static size_t
type_size(enum ktype t)
{
	switch (t) {
	case T_SIZE:
		return sizeof(uint64_t);
	case T_BOOL:
		return sizeof(bool);
	case T_U32:
		return sizeof(uint32_t);
	case T_PORT:
		return sizeof(uint16_t);
	case T_ENUM:
	case T_LOGLEVEL:
		return sizeof(int);
	case T_IPV4:
	case T_NETMASK:
		return sizeof(struct in_addr);
	case T_MAC:
		return 6;
	case T_STR:
	case T_FAULT:
		break;
	}
	return 0;
}

void
tide_nodeenv_defaults(struct tide_nodeenv *ne)
{
	char why[256];

	memset(ne, 0, sizeof(*ne));
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key_def *k = &keys[i];
		size_t want = type_size(k->type);

		if ((want != 0 && want != k->size) || apply(ne, k, k->def, why, sizeof(why)) != 0) {
			/* A table bug, caught by every unit test run. */
			TIDE_LOG(ERR, "key table: %s: bad default or field size: %s", k->name, why);
			abort();
		}
		ne->origin[i].src = TIDE_NODEENV_SRC_DEFAULT;
		ne->origin[i].line = 0;
	}
}

/* ---- lookup helpers ---- */

static int
find_key(const char *name, size_t len)
{
	for (size_t i = 0; i < NKEYS; i++) {
		if (strlen(keys[i].name) == len && memcmp(keys[i].name, name, len) == 0)
			return (int)i;
	}
	return -1;
}

int
tide_nodeenv_key_index(const char *key)
{
	int i = key != NULL ? find_key(key, strlen(key)) : -1;

	return i >= 0 ? i : -ENOENT;
}

size_t
tide_nodeenv_nkeys(void)
{
	return NKEYS;
}

const char *
tide_nodeenv_key_name(size_t i)
{
	return i < NKEYS ? keys[i].name : NULL;
}

const char *
tide_nodeenv_key_doc(size_t i)
{
	return i < NKEYS ? keys[i].doc : NULL;
}

const char *
tide_nodeenv_key_type(size_t i)
{
	return i < NKEYS ? keys[i].valid : NULL;
}

const char *
tide_nodeenv_key_default(size_t i)
{
	return i < NKEYS ? keys[i].def : NULL;
}

/* Edit distance, for "did you mean" on unknown TIDE_ keys; names are short. */
static size_t
edit_distance(const char *a, size_t la, const char *b)
{
	size_t lb = strlen(b), row[64], prev, tmp;

	if (la >= 64 || lb >= 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t best = prev + (a[i - 1] != b[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb];
}

static void
unknown_key(struct errs *e, const char *where, const char *name, size_t len)
{
	static const char path_var[] = TIDE_NODEENV_PATH_VAR;
	size_t best = SIZE_MAX, bi = 0;

	if (len < 5 || memcmp(name, "TIDE_", 5) != 0 ||
	    (len == sizeof(path_var) - 1 && memcmp(name, path_var, len) == 0)) {
		TIDE_LOG(DEBUG, "%s: ignoring %.*s (not a Tide key)", where, (int)len, name);
		return;
	}
	for (size_t i = 0; i < NKEYS; i++) {
		size_t d = edit_distance(name, len, keys[i].name);

		if (d < best) {
			best = d;
			bi = i;
		}
	}
	if (best <= 3)
		errs_add(e, "%s: %.*s: unknown key (did you mean %s? 'tide-env keys' lists all)",
			 where, (int)len, name, keys[bi].name);
	else
		errs_add(e, "%s: %.*s: unknown key ('tide-env keys' lists all)", where, (int)len,
			 name);
}

/* ---- the line lexer ---- */

struct assign {
	const char *key;
	size_t keylen;
	char *value; /* NUL-terminated, quotes removed */
};

static bool
is_name_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool
is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static bool
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Lex one line in place. Returns 0 for a blank or comment line, 1 for an
 * assignment (a filled), -1 with why filled for anything sh could read
 * differently. Accepts exactly: [blanks] [export blanks] NAME=VALUE [blanks
 * [#comment]], VALUE being unquoted, '...' or "..." as a whole.
 */
static int
lex_line(char *line, struct assign *a, char *why, size_t n)
{
	char *p = line, *v;

	for (unsigned char *c = (unsigned char *)line; *c != '\0'; c++) {
		if (*c == '\r') {
			ne_why(why, n, "carriage return in line (DOS line endings? run dos2unix)");
			return -1;
		}
		if ((*c < 0x20 && *c != '\t') || *c == 0x7f) {
			ne_why(why, n, "control character 0x%02x in line", *c);
			return -1;
		}
	}
	while (is_blank(*p))
		p++;
	if (*p == '\0' || *p == '#')
		return 0;
	if (strncmp(p, "export", 6) == 0 && is_blank(p[6])) {
		p += 6;
		while (is_blank(*p))
			p++;
	}
	a->key = p;
	while (is_name_char(*p))
		p++;
	a->keylen = (size_t)(p - a->key);
	if (*p != '=' || a->keylen == 0 || !is_name_start(*a->key)) {
		char *eq = strchr(a->key, '=');
		char *q = p;

		while (is_blank(*q))
			q++;
		if (a->keylen > 0 && is_name_start(*a->key) && *q == '=')
			ne_why(why, n, "%.*s: space before '=' (write KEY=value, no spaces)",
			       (int)a->keylen, a->key);
		else if (eq != NULL)
			ne_why(why, n,
			       "'%.*s' is not a valid key name (valid: letters, digits and _, not "
			       "starting with a digit)",
			       (int)(eq - a->key), a->key);
		else
			ne_why(why, n, "not a KEY=value line (commands are not allowed)");
		return -1;
	}
	p++;
	v = p;
	if (*p == '\'') {
		char *close = strchr(p + 1, '\'');

		if (close == NULL) {
			ne_why(why, n, "%.*s: unbalanced single quote", (int)a->keylen, a->key);
			return -1;
		}
		*close = '\0';
		a->value = p + 1;
		p = close + 1;
	} else if (*p == '"') {
		char *q = p + 1;

		for (; *q != '"'; q++) {
			if (*q == '\0') {
				ne_why(why, n, "%.*s: unbalanced double quote", (int)a->keylen,
				       a->key);
				return -1;
			}
			if (*q == '$' || *q == '`' || *q == '\\') {
				ne_why(why, n,
				       "%.*s: '%c' inside double quotes is expanded by sh; use "
				       "single "
				       "quotes for a literal value",
				       (int)a->keylen, a->key, *q);
				return -1;
			}
		}
		*q = '\0';
		a->value = p + 1;
		p = q + 1;
	} else {
		for (; *p != '\0' && !is_blank(*p); p++) {
			if (*p == '$' || *p == '`' || *p == '\\') {
				ne_why(why, n,
				       "%.*s: '%c' in an unquoted value is expanded by sh; use "
				       "single "
				       "quotes for a literal value",
				       (int)a->keylen, a->key, *p);
				return -1;
			}
			if (*p == '\'' || *p == '"') {
				ne_why(why, n,
				       "%.*s: quote inside an unquoted value; quote the whole "
				       "value",
				       (int)a->keylen, a->key);
				return -1;
			}
			/* Operators, tilde, globs and braces: bash brace-expands
			 * `export K={a,b}`, other shells may glob export's words. */
			if (strchr(";&|<>()~{}*?[", *p) != NULL) {
				ne_why(why, n, "%.*s: '%c' is special to sh; quote the value",
				       (int)a->keylen, a->key, *p);
				return -1;
			}
		}
		a->value = v;
		if (*p != '\0')
			*p++ = '\0';
		else
			return 1;
		goto rest;
	}
	if (*p != '\0' && !is_blank(*p)) {
		ne_why(why, n, "%.*s: text right after the closing quote; quote the whole value",
		       (int)a->keylen, a->key);
		return -1;
	}
rest:
	while (is_blank(*p))
		p++;
	if (*p != '\0' && *p != '#') {
		ne_why(why, n,
		       "%.*s: unquoted whitespace in the value (sh would run '%s' as a command); "
		       "quote the value",
		       (int)a->keylen, a->key, p);
		return -1;
	}
	return 1;
}

/* ---- loading ---- */

struct seen {
	char *name;
	size_t len;
	uint32_t line;
};

/*
 * Names already set in the file, for the duplicate check: an open-addressing
 * table of indices into the seen[] array (power-of-two size, at most half
 * full), so a file of n lines costs O(n), not O(n^2) (40k unknown keys took
 * 1.7 s with a linear scan per line).
 */
struct seen_set {
	struct seen *v;
	size_t n, cap;
	size_t *slot; /* index + 1; 0 = empty */
	size_t nslot;
};

static uint64_t
name_hash(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ULL;
	return h;
}

/* Index of name in the set, or SIZE_MAX. */
static size_t
seen_find(const struct seen_set *ss, const char *name, size_t len)
{
	if (ss->nslot == 0)
		return SIZE_MAX;
	for (size_t i = name_hash(name, len) & (ss->nslot - 1);; i = (i + 1) & (ss->nslot - 1)) {
		size_t k = ss->slot[i];

		if (k == 0)
			return SIZE_MAX;
		if (ss->v[k - 1].len == len && memcmp(ss->v[k - 1].name, name, len) == 0)
			return k - 1;
	}
}

static void
seen_place(struct seen_set *ss, size_t idx)
{
	size_t i = name_hash(ss->v[idx].name, ss->v[idx].len) & (ss->nslot - 1);

	while (ss->slot[i] != 0)
		i = (i + 1) & (ss->nslot - 1);
	ss->slot[i] = idx + 1;
}

/* Add a name first seen at line; 0 or -ENOMEM. */
static int
seen_add(struct seen_set *ss, const char *name, size_t len, uint32_t line)
{
	if (ss->n == ss->cap) {
		size_t ncap = ss->cap == 0 ? 16 : ss->cap * 2;
		struct seen *nv = realloc(ss->v, ncap * sizeof(*nv));

		if (nv == NULL)
			return -ENOMEM;
		ss->v = nv;
		ss->cap = ncap;
	}
	if (2 * (ss->n + 1) > ss->nslot) {
		size_t nn = ss->nslot == 0 ? 32 : ss->nslot * 2;
		size_t *ns = calloc(nn, sizeof(*ns));

		if (ns == NULL)
			return -ENOMEM;
		free(ss->slot);
		ss->slot = ns;
		ss->nslot = nn;
		for (size_t i = 0; i < ss->n; i++)
			seen_place(ss, i);
	}
	ss->v[ss->n].name = strndup(name, len);
	if (ss->v[ss->n].name == NULL)
		return -ENOMEM;
	ss->v[ss->n].len = len;
	ss->v[ss->n].line = line;
	seen_place(ss, ss->n);
	ss->n++;
	return 0;
}

static void
seen_free(struct seen_set *ss)
{
	for (size_t i = 0; i < ss->n; i++)
		free(ss->v[i].name);
	free(ss->v);
	free(ss->slot);
}

static int
load_file(struct tide_nodeenv *ne, const char *path, bool is_default, struct errs *e)
{
	struct seen_set seen = {0};
	size_t bufcap = 0;
	char *buf = NULL;
	uint32_t lineno = 0;
	struct stat st;
	ssize_t got;
	FILE *f;
	int rc = 0;

	f = fopen(path, "re");
	if (f == NULL) {
		int er = errno;

		if (er == ENOENT && is_default) {
			TIDE_LOG(INFO, "%s: not found; using the environment and defaults", path);
			return 0;
		}
		errs_add(e, "%s: cannot open: %s", path, strerror(er));
		return er == ENOENT ? -ENOENT : -EIO;
	}
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		errs_add(e, "%s: cannot read: is a directory", path);
		fclose(f);
		return -EIO;
	}
	snprintf(ne->path, sizeof(ne->path), "%s", path);
	while ((got = getline(&buf, &bufcap, f)) >= 0) {
		size_t len = (size_t)got;
		char why[512], vshow[160];
		struct assign a;
		int ki, lx;

		lineno++;
		if (len > 0 && buf[len - 1] == '\n')
			buf[--len] = '\0';
		if (len > TIDE_NODEENV_MAX_LINE) {
			errs_add(e, "%s:%u: line longer than %d bytes", path, lineno,
				 TIDE_NODEENV_MAX_LINE);
			rc = -EINVAL;
			continue;
		}
		if (strlen(buf) != len) {
			errs_add(e, "%s:%u: NUL byte in line", path, lineno);
			rc = -EINVAL;
			continue;
		}
		lx = lex_line(buf, &a, why, sizeof(why));
		if (lx < 0) {
			errs_add(e, "%s:%u: %s", path, lineno, why);
			rc = -EINVAL;
			continue;
		}
		if (lx == 0)
			continue;

		/* Duplicates are errors for every key: sh would silently take the last. */
		size_t s = seen_find(&seen, a.key, a.keylen);

		if (s != SIZE_MAX) {
			errs_add(e, "%s:%u: %.*s: set again; first set at %s:%u (remove one)", path,
				 lineno, (int)a.keylen, a.key, path, seen.v[s].line);
			rc = -EINVAL;
			continue;
		}
		if (seen_add(&seen, a.key, a.keylen, lineno) != 0)
			goto nomem;

		ki = find_key(a.key, a.keylen);
		if (ki < 0) {
			char where[64 + TIDE_NODEENV_PATHN_LEN];
			unsigned before = e->n;

			snprintf(where, sizeof(where), "%s:%u", path, lineno);
			unknown_key(e, where, a.key, a.keylen);
			if (e->n != before)
				rc = -EINVAL;
			continue;
		}
		if (apply(ne, &keys[ki], a.value, why, sizeof(why)) != 0) {
			errs_add(e, "%s:%u: %s: '%s' %s", path, lineno, keys[ki].name,
				 show(a.value, vshow, sizeof(vshow)), why);
			rc = -EINVAL;
			continue;
		}
		ne->origin[ki].src = TIDE_NODEENV_SRC_FILE;
		ne->origin[ki].line = lineno;
	}
	if (ferror(f)) {
		errs_add(e, "%s: read error after line %u", path, lineno);
		rc = -EIO;
	}
	goto out;
nomem:
	errs_add(e, "%s: out of memory", path);
	rc = -EIO;
out:
	seen_free(&seen);
	free(buf);
	fclose(f);
	return rc;
}

static int
load_env(struct tide_nodeenv *ne, char *const *env, struct errs *e)
{
	bool done[NKEYS] = {false};
	int rc = 0;

	for (size_t i = 0; env[i] != NULL; i++) {
		const char *kv = env[i], *eq = strchr(kv, '=');
		char why[512], vshow[160];
		int ki;

		if (eq == NULL)
			continue;
		ki = find_key(kv, (size_t)(eq - kv));
		if (ki < 0) {
			unsigned before = e->n;

			unknown_key(e, "environment", kv, (size_t)(eq - kv));
			if (e->n != before)
				rc = -EINVAL;
			continue;
		}
		/* getenv() semantics: the first entry of a name wins. */
		if (done[ki])
			continue;
		done[ki] = true;
		if (apply(ne, &keys[ki], eq + 1, why, sizeof(why)) != 0) {
			errs_add(e, "environment: %s: '%s' %s", keys[ki].name,
				 show(eq + 1, vshow, sizeof(vshow)), why);
			rc = -EINVAL;
			continue;
		}
		ne->origin[ki].src = TIDE_NODEENV_SRC_ENV;
		ne->origin[ki].line = 0;
	}
	return rc;
}

static void
where_str(const struct tide_nodeenv *ne, size_t i, char *buf, size_t n)
{
	switch (ne->origin[i].src) {
	case TIDE_NODEENV_SRC_FILE:
		snprintf(buf, n, "%s:%u", ne->path, ne->origin[i].line);
		break;
	case TIDE_NODEENV_SRC_ENV:
		snprintf(buf, n, "environment");
		break;
	default:
		snprintf(buf, n, "default");
		break;
	}
}

static size_t
idx(const char *name)
{
	int i = find_key(name, strlen(name));

	assert(i >= 0);
	return (size_t)i;
}

/* Rules that span keys; reported at the location of the key that must change. */
static int
cross_check(const struct tide_nodeenv *ne, struct errs *e)
{
	char w[64 + TIDE_NODEENV_PATHN_LEN], w2[64 + TIDE_NODEENV_PATHN_LEN];
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN], c[INET_ADDRSTRLEN];
	char s1[32], s2[32], vshow[160];
	int rc = 0;

	if (ne->dpdk_device[0] != '\0' && !ne->data_ip_set) {
		where_str(ne, idx("TIDE_DPDK_DEVICE"), w, sizeof(w));
		errs_add(e,
			 "%s: TIDE_DPDK_DEVICE: '%s' needs TIDE_DATA_IP (the port's IPv4 address, "
			 "e.g. 10.0.0.2)",
			 w, show(ne->dpdk_device, vshow, sizeof(vshow)));
		rc = -EINVAL;
	}
	if (ne->dpdk_rx_device[0] != '\0') {
		size_t dl = strcspn(ne->dpdk_device, ","), rl = strcspn(ne->dpdk_rx_device, ",");

		where_str(ne, idx("TIDE_DPDK_RX_DEVICE"), w, sizeof(w));
		if (ne->dpdk_device[0] == '\0') {
			errs_add(e,
				 "%s: TIDE_DPDK_RX_DEVICE: '%s' needs TIDE_DPDK_DEVICE (the device "
				 "to transmit on)",
				 w, show(ne->dpdk_rx_device, vshow, sizeof(vshow)));
			rc = -EINVAL;
		} else if (strncmp(ne->dpdk_rx_device, "net_", 4) != 0 ||
			   strncmp(ne->dpdk_device, "net_", 4) != 0) {
			errs_add(e,
				 "%s: TIDE_DPDK_RX_DEVICE: '%s': a receive-only device pairs two "
				 "vdevs (net_memif...), not a PCI device",
				 w, show(ne->dpdk_rx_device, vshow, sizeof(vshow)));
			rc = -EINVAL;
		} else if (dl == rl && strncmp(ne->dpdk_device, ne->dpdk_rx_device, dl) == 0) {
			errs_add(e,
				 "%s: TIDE_DPDK_RX_DEVICE: '%s' names the same device as "
				 "TIDE_DPDK_DEVICE (give the second link its own name, e.g. "
				 "net_memif1)",
				 w, show(ne->dpdk_rx_device, vshow, sizeof(vshow)));
			rc = -EINVAL;
		}
	}
	if (ne->min_rpc_port > ne->max_rpc_port) {
		where_str(ne, idx("MC_MIN_RPC_PORT"), w, sizeof(w));
		where_str(ne, idx("MC_MAX_RPC_PORT"), w2, sizeof(w2));
		errs_add(e, "%s: MC_MIN_RPC_PORT: '%u' is above MC_MAX_RPC_PORT (%u, from %s)", w,
			 ne->min_rpc_port, ne->max_rpc_port, w2);
		rc = -EINVAL;
	}
	if (ne->gateway_set) {
		where_str(ne, idx("TIDE_GATEWAY"), w, sizeof(w));
		inet_ntop(AF_INET, &ne->gateway, a, sizeof(a));
		if (!ne->data_ip_set) {
			errs_add(e, "%s: TIDE_GATEWAY: '%s' needs TIDE_DATA_IP", w, a);
			rc = -EINVAL;
		} else {
			uint32_t m = ne->data_netmask.s_addr;
			struct in_addr net = {.s_addr = ne->data_ip.s_addr & m};

			inet_ntop(AF_INET, &net, b, sizeof(b));
			inet_ntop(AF_INET, &ne->data_ip, c, sizeof(c));
			if ((ne->gateway.s_addr & m) != net.s_addr) {
				errs_add(e,
					 "%s: TIDE_GATEWAY: '%s' is outside the data subnet %s/%u "
					 "(TIDE_DATA_IP %s)",
					 w, a, b, ne->data_prefix_len, c);
				rc = -EINVAL;
			} else if (ne->gateway.s_addr == ne->data_ip.s_addr) {
				errs_add(e, "%s: TIDE_GATEWAY: '%s' is TIDE_DATA_IP itself", w, a);
				rc = -EINVAL;
			}
		}
	}
	if (ne->csum == TIDE_NODEENV_CSUM_ELIDE) {
		const char *devs[2] = {ne->dpdk_device, ne->dpdk_rx_device};
		const char *names[2] = {"TIDE_DPDK_DEVICE", "TIDE_DPDK_RX_DEVICE"};

		where_str(ne, idx("TIDE_CSUM"), w, sizeof(w));
		/* The driver is the vdev name's prefix; a PCI device is a NIC. */
		for (int i = 0; i < 2; i++) {
			const char *d = devs[i];

			if (d[0] != '\0' && strncmp(d, "net_memif", 9) != 0 &&
			    strncmp(d, "net_ring", 8) != 0) {
				errs_add(e,
					 "%s: TIDE_CSUM: 'elide' is only for a net_memif or "
					 "net_ring %s (frames that stay in this host's memory), "
					 "not '%s' (use auto)",
					 w, names[i], show(d, vshow, sizeof(vshow)));
				rc = -EINVAL;
			}
		}
		if (ne->fault.corrupt > 0) {
			errs_add(e,
				 "%s: TIDE_CSUM: 'elide' cannot be combined with TIDE_FAULT "
				 "corrupt=%g: corrupted frames would be accepted, only checksums "
				 "catch them (use auto for fault runs)",
				 w, ne->fault.corrupt);
			rc = -EINVAL;
		}
	}
	if (ne->hugepage_size != 0 && ne->hugepage_mem % ne->hugepage_size != 0) {
		where_str(ne, idx("TIDE_HUGEPAGE_MEM"), w, sizeof(w));
		ne_size_human(ne->hugepage_mem, s1, sizeof(s1));
		ne_size_human(ne->hugepage_size, s2, sizeof(s2));
		errs_add(e,
			 "%s: TIDE_HUGEPAGE_MEM: '%s' is not a multiple of TIDE_HUGEPAGE_SIZE (%s)",
			 w, s1, s2);
		rc = -EINVAL;
	}
	return rc;
}

int
tide_nodeenv_load(struct tide_nodeenv *ne, const char *path, char *const *env, char *err,
		  size_t errlen)
{
	struct errs e = {.buf = err, .len = errlen};
	const char *use = path;
	bool is_default = false;
	int frc, erc, crc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (env == NULL)
		env = environ;
	tide_nodeenv_defaults(ne);
	if (use == NULL) {
		static const char var[] = TIDE_NODEENV_PATH_VAR "=";

		for (size_t i = 0; env[i] != NULL; i++) {
			if (strncmp(env[i], var, sizeof(var) - 1) == 0) {
				use = env[i] + sizeof(var) - 1;
				break;
			}
		}
		/* An empty TIDE_NODE_ENV means "unset", as shells treat it. */
		if (use == NULL || *use == '\0') {
			use = TIDE_NODEENV_DEFAULT_PATH;
			is_default = true;
		}
	}
	frc = load_file(ne, use, is_default, &e);
	erc = load_env(ne, env, &e);
	crc = cross_check(ne, &e);
	if (frc == -ENOENT || frc == -EIO)
		return frc;
	if (frc != 0 || erc != 0 || crc != 0)
		return -EINVAL;
	return 0;
}

/* ---- queries and output ---- */

int
tide_nodeenv_source(const struct tide_nodeenv *ne, const char *key, enum tide_nodeenv_src *src,
		    uint32_t *line)
{
	int i = tide_nodeenv_key_index(key);

	if (i < 0)
		return i;
	if (src != NULL)
		*src = ne->origin[i].src;
	if (line != NULL)
		*line = ne->origin[i].line;
	return 0;
}

int
tide_nodeenv_source_str(const struct tide_nodeenv *ne, const char *key, char *buf, size_t len)
{
	char tmp[64 + TIDE_NODEENV_PATHN_LEN];
	int i = tide_nodeenv_key_index(key);

	if (i < 0)
		return i;
	where_str(ne, (size_t)i, tmp, sizeof(tmp));
	if (len == 0)
		return -ENOSPC;
	return (size_t)snprintf(buf, len, "%s", tmp) >= len ? -ENOSPC : 0;
}

static int
format_idx(const struct tide_nodeenv *ne, size_t i, char *buf, size_t len)
{
	const struct key_def *k = &keys[i];
	const char *base = (const char *)ne;
	char tmp[TIDE_NODEENV_TEXT_LEN];

	switch (k->type) {
	case T_STR:
	case T_FAULT:
		snprintf(tmp, sizeof(tmp), "%s", base + k->off);
		break;
	case T_SIZE: {
		uint64_t v;

		memcpy(&v, base + k->off, sizeof(v));
		snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
		break;
	}
	case T_BOOL: {
		bool b;

		memcpy(&b, base + k->off, sizeof(b));
		snprintf(tmp, sizeof(tmp), "%s", b ? "true" : "false");
		break;
	}
	case T_U32: {
		uint32_t u;

		memcpy(&u, base + k->off, sizeof(u));
		snprintf(tmp, sizeof(tmp), "%" PRIu32, u);
		break;
	}
	case T_PORT: {
		uint16_t p;

		memcpy(&p, base + k->off, sizeof(p));
		snprintf(tmp, sizeof(tmp), "%u", (unsigned)p);
		break;
	}
	case T_ENUM: {
		int v = get_int(base + k->off), nn = 0;

		while (k->names[nn] != NULL)
			nn++;
		snprintf(tmp, sizeof(tmp), "%s", v >= 0 && v < nn ? k->names[v] : "?");
		break;
	}
	case T_IPV4:
	case T_NETMASK: {
		bool set = true;

		if (k->type == T_IPV4)
			memcpy(&set, base + k->off2, sizeof(set));
		tmp[0] = '\0';
		if (set)
			inet_ntop(AF_INET, base + k->off, tmp, sizeof(tmp));
		break;
	}
	case T_MAC: {
		const uint8_t *m = (const uint8_t *)(base + k->off);
		bool set;

		memcpy(&set, base + k->off2, sizeof(set));
		tmp[0] = '\0';
		if (set)
			snprintf(tmp, sizeof(tmp), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1],
				 m[2], m[3], m[4], m[5]);
		break;
	}
	case T_LOGLEVEL:
		snprintf(tmp, sizeof(tmp), "%s",
			 tide_log_level_name((enum tide_log_level)get_int(base + k->off)));
		break;
	}
	if (len == 0)
		return -ENOSPC;
	return (size_t)snprintf(buf, len, "%s", tmp) >= len ? -ENOSPC : 0;
}

int
tide_nodeenv_format(const struct tide_nodeenv *ne, const char *key, char *buf, size_t len)
{
	int i = tide_nodeenv_key_index(key);

	if (i < 0) {
		if (len > 0)
			buf[0] = '\0';
		return i;
	}
	return format_idx(ne, (size_t)i, buf, len);
}

/* Characters that mean the same to sh and to lex_line outside quotes. */
static bool
plain_value(const char *v)
{
	for (const char *p = v; *p != '\0'; p++) {
		if (!(is_name_char(*p) || strchr("./:,=@%+-", *p) != NULL))
			return false;
	}
	return true;
}

void
tide_nodeenv_dump(const struct tide_nodeenv *ne, FILE *out)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key_def *k = &keys[i];
		char val[TIDE_NODEENV_TEXT_LEN], src[64 + TIDE_NODEENV_PATHN_LEN];
		char line[TIDE_NODEENV_TEXT_LEN + 256], extra[48] = "";
		int w;

		format_idx(ne, i, val, sizeof(val));
		where_str(ne, i, src, sizeof(src));
		if (k->type == T_SIZE) {
			uint64_t v;
			char h[32];

			memcpy(&v, (const char *)ne + k->off, sizeof(v));
			ne_size_human(v, h, sizeof(h));
			if (strcmp(h, val) != 0)
				snprintf(extra, sizeof(extra), " (%s)", h);
		}
		if (plain_value(val))
			w = snprintf(line, sizeof(line), "%s=%s", k->name, val);
		else if (strchr(val, '\'') == NULL)
			w = snprintf(line, sizeof(line), "%s='%s'", k->name, val);
		else if (strpbrk(val, "$`\\\"") == NULL)
			w = snprintf(line, sizeof(line), "%s=\"%s\"", k->name, val);
		else
			w = snprintf(
				line, sizeof(line),
				"# %s: value has both ' and one of $`\\\" and cannot be written "
				"in a node file",
				k->name);
		fprintf(out, "%-*s  # %s%s\n", w < 44 ? 44 : w, line, src, extra);
	}
}
