/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The per-node environment file: one `KEY=value` file configures a node.
 *
 * The same file is loaded by this library and sourced by the shell before
 * `ray start` (`set -a; . /etc/tide/node.env; set +a`), so Python processes
 * that read `MOONCAKE_*` from their environment see the same values. The
 * parser therefore accepts only lines whose meaning is identical under sh:
 * nothing is expanded or executed, and anything sh would read differently
 * (`$`, backticks, backslashes outside single quotes, unquoted whitespace,
 * spaces around `=`, unbalanced quotes) is rejected with `path:line:`.
 *
 * Precedence, per key: process environment > file > built-in default. Every
 * key remembers where its effective value came from. Unknown `TIDE_` keys
 * are errors (typos must not pass silently); other unknown keys are ignored.
 *
 * One declarative table in nodeenv.c drives the parser, the defaults, the
 * dump and the key listing; tide_nodeenv_nkeys()/key_name()/key_doc() expose it.
 *
 * Thread: loading reads `environ`; call it from the main thread during
 * start-up, before other threads change the environment. A loaded
 * `struct tide_nodeenv` is plain data: any thread may read it concurrently.
 */
#ifndef TIDE_NODEENV_H
#define TIDE_NODEENV_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tide_log.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Path read when neither an explicit path nor TIDE_NODE_ENV is given. */
#define TIDE_NODEENV_DEFAULT_PATH "/etc/tide/node.env"
/** Environment variable naming the node file (overrides the default path). */
#define TIDE_NODEENV_PATH_VAR "TIDE_NODE_ENV"
/** Upper bound on the number of keys in the table (origin[] is sized by it). */
#define TIDE_NODEENV_MAX_KEYS 64
/** Longest accepted file line in bytes, newline excluded. */
#define TIDE_NODEENV_MAX_LINE 4096

/** Size of the char arrays below; a value must be shorter (room for the NUL). */
#define TIDE_NODEENV_HOST_LEN   256
#define TIDE_NODEENV_PATHN_LEN  1024
#define TIDE_NODEENV_TEXT_LEN   1024
#define TIDE_NODEENV_SHORT_LEN  128
#define TIDE_NODEENV_PREFIX_LEN 33  /**< [A-Za-z0-9_-]{1,32} */
#define TIDE_NODEENV_SUN_LEN    108 /**< sizeof(sockaddr_un.sun_path) */

/** MOONCAKE_PROTOCOL. */
enum tide_nodeenv_protocol {
	TIDE_NODEENV_PROTO_TCP = 0,
	TIDE_NODEENV_PROTO_RDMA = 1,
};

/** TIDE_HUGEPAGES. */
enum tide_nodeenv_hugepages {
	TIDE_NODEENV_HUGE_AUTO = 0, /**< use hugepages when they can be reserved, else --no-huge */
	TIDE_NODEENV_HUGE_ON = 1,   /**< require hugepages; fail start-up without them */
	TIDE_NODEENV_HUGE_OFF = 2,  /**< always --no-huge */
};

/** TIDE_TCP_CC: the user-space TCP's congestion control (tide_net.h's values). */
enum tide_nodeenv_tcp_cc {
	TIDE_NODEENV_CC_NEWRENO = 0,  /**< RFC 5681 / 6582 */
	TIDE_NODEENV_CC_CUBIC = 1,    /**< RFC 9438 */
	TIDE_NODEENV_CC_WESTWOOD = 2, /**< Westwood+: ssthresh from the measured rate */
};

/** TIDE_IDLE: what a poller does when it finds no work. */
enum tide_nodeenv_idle {
	TIDE_NODEENV_IDLE_BUSY = 0,     /**< spin */
	TIDE_NODEENV_IDLE_ADAPTIVE = 1, /**< sleep TIDE_IDLE_SLEEP_US after idle streaks */
};

/** TIDE_FAULT `dir=`: which direction faults apply to. */
enum tide_nodeenv_fault_dir {
	TIDE_NODEENV_FAULT_BOTH = 0,
	TIDE_NODEENV_FAULT_RX = 1,
	TIDE_NODEENV_FAULT_TX = 2,
};

/** Parsed TIDE_FAULT (fault injection for tests). All zero = off. */
struct tide_nodeenv_fault {
	bool enabled;                    /**< TIDE_FAULT was non-empty */
	double drop;                     /**< probability in [0,1] of dropping a packet */
	double dup;                      /**< probability of duplicating a packet */
	double reorder;                  /**< probability of holding a packet back one slot */
	double corrupt;                  /**< probability of flipping a payload bit */
	uint32_t delay_us;               /**< added latency, 0..1000000 us */
	uint64_t seed;                   /**< PRNG seed (0 = pick one at start) */
	enum tide_nodeenv_fault_dir dir; /**< where faults apply; default both */
};

/**
 * TIDE_AGENT: how a store client process uses the per-node agent (tide-node).
 * Only store clients read it; the agent itself and the master ignore it.
 * Default: auto (a master-only cluster works as with stock Mooncake).
 */
enum tide_nodeenv_agent {
	/** Attach to the agent at TIDE_AGENT_SOCKET; setup fails, saying so, when none answers. */
	TIDE_NODEENV_AGENT_REQUIRED = 0,
	/** Attach when an agent answers, else run the engine embedded in the process. */
	TIDE_NODEENV_AGENT_AUTO = 1,
	/** Always run the engine (and the segment) embedded in the process. */
	TIDE_NODEENV_AGENT_OFF = 2,
};

/**
 * TIDE_CSUM: IPv4 header and TCP checksums of the user-space stack on the
 * DPDK port. Default: auto.
 */
enum tide_nodeenv_csum {
	/** The device's RX and TX checksum offloads where it has them, software otherwise. */
	TIDE_NODEENV_CSUM_AUTO = 0,
	/** Software always, even where the device could offload. */
	TIDE_NODEENV_CSUM_SW = 1,
	/** The device's, both ways; start-up fails naming the port and the missing offload. */
	TIDE_NODEENV_CSUM_OFFLOAD = 2,
	/**
	 * None computed, none verified: only on a net_memif or net_ring port
	 * (frames that stay in this host's memory), and the link's other end
	 * must elide too. Start-up fails on any other driver.
	 */
	TIDE_NODEENV_CSUM_ELIDE = 3,
};

/** Where a key's effective value came from. */
enum tide_nodeenv_src {
	TIDE_NODEENV_SRC_DEFAULT = 0,
	TIDE_NODEENV_SRC_FILE = 1,
	TIDE_NODEENV_SRC_ENV = 2,
};

/**
 * The effective node configuration. Fill it with tide_nodeenv_defaults() or
 * tide_nodeenv_load(); every string is NUL-terminated. Key names and meanings
 * are listed by `tide-env keys` and documented in tools/node.env.sample.
 */
struct tide_nodeenv {
	/* Mooncake-compatible, Mooncake's meanings. */
	char master[TIDE_NODEENV_HOST_LEN];          /**< MOONCAKE_MASTER host:port */
	char local_hostname[TIDE_NODEENV_HOST_LEN];  /**< MOONCAKE_LOCAL_HOSTNAME */
	enum tide_nodeenv_protocol protocol;         /**< MOONCAKE_PROTOCOL */
	char device[TIDE_NODEENV_HOST_LEN];          /**< MOONCAKE_DEVICE, comma list or "" */
	char metadata_server[TIDE_NODEENV_HOST_LEN]; /**< MOONCAKE_TE_META_DATA_SERVER */
	uint64_t global_segment_size;                /**< MOONCAKE_GLOBAL_SEGMENT_SIZE, bytes */
	uint64_t local_buffer_size;                  /**< MOONCAKE_LOCAL_BUFFER_SIZE, bytes */
	char config_path[TIDE_NODEENV_PATHN_LEN];    /**< MOONCAKE_CONFIG_PATH or "" */
	char tenant_id[TIDE_NODEENV_SHORT_LEN];      /**< MOONCAKE_TENANT_ID */
	bool force_tcp;                              /**< MC_FORCE_TCP */
	bool store_memcpy;                           /**< MC_STORE_MEMCPY */
	struct in_addr tcp_bind_address;             /**< MC_TCP_BIND_ADDRESS (network order) */
	bool tcp_bind_address_set;                   /**< false when MC_TCP_BIND_ADDRESS is "" */
	uint16_t min_rpc_port;                       /**< MC_MIN_RPC_PORT */
	uint16_t max_rpc_port;                       /**< MC_MAX_RPC_PORT, >= min_rpc_port */
	uint32_t rpc_timeout_ms;                     /**< MC_RPC_TIMEOUT_MS */
	uint32_t rpc_connect_timeout_ms;             /**< MC_RPC_CONNECT_TIMEOUT_MS */

	/* Tide's own. */
	char dpdk_device[TIDE_NODEENV_TEXT_LEN];    /**< TIDE_DPDK_DEVICE, "" = kernel TCP only */
	char dpdk_rx_device[TIDE_NODEENV_TEXT_LEN]; /**< TIDE_DPDK_RX_DEVICE, "" = receive on
							 dpdk_device too */
	struct in_addr data_ip;                     /**< TIDE_DATA_IP (network order) */
	bool data_ip_set;                           /**< false when TIDE_DATA_IP is "" */
	struct in_addr data_netmask;                /**< TIDE_DATA_NETMASK (network order) */
	uint8_t data_prefix_len;                    /**< the same mask as a prefix length */
	struct in_addr gateway;                     /**< TIDE_GATEWAY (network order) */
	bool gateway_set;                           /**< false when TIDE_GATEWAY is "" */
	uint8_t data_mac[6];                        /**< TIDE_DATA_MAC */
	bool data_mac_set;                          /**< false = use the port's own MAC */
	uint32_t lcores_per_numa;                   /**< TIDE_LCORES_PER_NUMA */
	char lcores[TIDE_NODEENV_HOST_LEN];         /**< TIDE_LCORES, e.g. "1-3,5", or "" */
	enum tide_nodeenv_hugepages hugepages;      /**< TIDE_HUGEPAGES */
	uint64_t hugepage_size;                     /**< TIDE_HUGEPAGE_SIZE: 2 MiB or 1 GiB */
	uint64_t hugepage_mem;                      /**< TIDE_HUGEPAGE_MEM, multiple of the page */
	uint32_t rxd;                               /**< TIDE_RXD, power of two */
	uint32_t txd;                               /**< TIDE_TXD, power of two */
	uint32_t mtu;                               /**< TIDE_MTU */
	enum tide_nodeenv_csum csum;                /**< TIDE_CSUM */
	uint32_t tcp_rto_min_us;                    /**< TIDE_TCP_RTO_MIN_US */
	uint32_t tcp_max_retries;                   /**< TIDE_TCP_MAX_RETRIES */
	enum tide_nodeenv_tcp_cc tcp_cc;            /**< TIDE_TCP_CC */
	bool tcp_hystart;                           /**< TIDE_TCP_HYSTART */
	bool tcp_pacing;                            /**< TIDE_TCP_PACING */
	bool tcp_sack_compress;                     /**< TIDE_TCP_SACK_COMPRESS */
	enum tide_nodeenv_idle idle;                /**< TIDE_IDLE */
	uint32_t idle_sleep_us;                     /**< TIDE_IDLE_SLEEP_US */
	bool idle_irq;                              /**< TIDE_IDLE_IRQ */
	struct tide_nodeenv_fault fault;            /**< TIDE_FAULT, parsed */
	char fault_spec[TIDE_NODEENV_HOST_LEN];     /**< TIDE_FAULT as written ("" = off) */
	enum tide_log_level log_level;              /**< TIDE_LOG_LEVEL */
	char file_prefix[TIDE_NODEENV_PREFIX_LEN];  /**< TIDE_FILE_PREFIX (EAL --file-prefix) */
	char eal_args[TIDE_NODEENV_TEXT_LEN];       /**< TIDE_EAL_ARGS, free text */
	char agent_socket[TIDE_NODEENV_SUN_LEN];    /**< TIDE_AGENT_SOCKET */
	char agent_socket_group[TIDE_NODEENV_HOST_LEN]; /**< TIDE_AGENT_SOCKET_GROUP, "" = own */
	enum tide_nodeenv_agent agent;                  /**< TIDE_AGENT */
	bool pin_unread;                                /**< TIDE_PIN_UNREAD (master RL mode) */
	bool put_lease;   /**< TIDE_PUT_LEASE (store clients: one-round-trip puts) */
	bool rdma_as_tcp; /**< TIDE_RDMA_AS_TCP (protocol rdma served by TCP without a device) */
	bool shm_peers;   /**< TIDE_SHM_PEERS (kernel TCP: map same-host peers' shared buffers) */
	uint32_t master_poll_us; /**< TIDE_MASTER_POLL_US (store clients: poll for answers) */
	uint32_t data_poll_us;   /**< TIDE_DATA_POLL_US (kernel TCP: poll for small answers) */
	/** TIDE_ALLOW_NETS as written: networks (tide_cidr.h syntax) that may connect to the
	 * transfer engine's ports; "" = any. Validated here; parse with tide_cidr_parse(). */
	char allow_nets[TIDE_NODEENV_TEXT_LEN];

	/* Provenance. */
	char path[TIDE_NODEENV_PATHN_LEN]; /**< file that was read, "" if none */
	struct {
		enum tide_nodeenv_src src; /**< default, file or environment */
		uint32_t line;             /**< 1-based file line when src is FILE, else 0 */
	} origin[TIDE_NODEENV_MAX_KEYS];   /**< indexed like tide_nodeenv_key_name() */
};

/**
 * Set every key to its built-in default and its source to DEFAULT; path = "".
 * \param ne  Structure to fill; every field is overwritten.
 * Thread: any.
 */
void tide_nodeenv_defaults(struct tide_nodeenv *ne);

/**
 * Build the effective configuration: defaults, then the node file, then the
 * environment, then cross-checks (TIDE_DPDK_DEVICE needs TIDE_DATA_IP,
 * MC_MIN_RPC_PORT <= MC_MAX_RPC_PORT, TIDE_GATEWAY inside the data subnet,
 * TIDE_HUGEPAGE_MEM a multiple of TIDE_HUGEPAGE_SIZE).
 *
 * Every error is reported, not only the first, one line each:
 * `<path>:<line>: <KEY>: <what is wrong and what would be valid>`, or
 * `environment: <KEY>: ...` for environment values. A bad value never
 * half-updates a field: the key keeps its lower-precedence value and source.
 * The process log level is not changed (callers apply ne->log_level).
 *
 * \param ne    Filled completely on every return, including errors.
 * \param path  File to read. NULL: the TIDE_NODE_ENV entry of env if set and
 *              non-empty, else TIDE_NODEENV_DEFAULT_PATH. A missing file is
 *              not an error only at the default path.
 * \param env   NULL-terminated "KEY=value" array like `environ`; NULL means
 *              the process `environ`. Tests pass their own array.
 * \param err   Buffer for error lines (each ends in '\n'; always NUL-terminated;
 *              when full, the text ends with "...\n"). May be NULL, in which
 *              case each error is logged at ERR level instead.
 * \param errlen  Size of err in bytes (0 behaves like err == NULL).
 * \return 0 on success;
 *         -ENOENT an explicitly named file (argument or TIDE_NODE_ENV) does not exist;
 *         -EIO the file exists but cannot be read (permissions, a directory, I/O error);
 *         -EINVAL any syntax, value or cross-check error (file or environment).
 *         -ENOENT and -EIO take precedence over -EINVAL; environment values
 *         and defaults are applied in every case.
 * Thread: reads environ when env is NULL; see the file comment.
 */
int tide_nodeenv_load(struct tide_nodeenv *ne, const char *path, char *const *env, char *err,
		      size_t errlen);

/**
 * Parse a boolean: 1/0, true/false, yes/no, on/off, t/f, y/n, any case. The one
 * boolean syntax of Tide (node file, tool flags, mooncake_master flags).
 * \return 0; -EINVAL anything else (or NULL arguments). Thread: any.
 */
int tide_nodeenv_parse_bool(const char *s, bool *out);

/**
 * Parse a size in Mooncake's dialect, case-insensitive: plain bytes
 * (`1073741824`) or a number with a suffix `b`, `k`/`kb`/`kib`, `m`/`mb`/`mib`, `g`/`gb`/`gib`,
 * `t`/`tb`/`tib` (binary: 1k = 1024). The one size syntax of Tide (node file, tool and
 * master flags). A decimal fraction is allowed (`3.125gb`,
 * at most 18 fraction digits) and rounded down to whole bytes. No sign, no
 * whitespace, no exponent.
 * \param s    NUL-terminated text.
 * \param[out] out  Bytes on success; untouched on failure.
 * \return 0; -EINVAL not a size (including NULL/empty); -ERANGE above UINT64_MAX bytes.
 * Thread: any.
 */
int tide_nodeenv_parse_size(const char *s, uint64_t *out);

/**
 * Parse a TIDE_FAULT specification: "" (off) or a comma list of
 * `drop=P,dup=P,reorder=P,corrupt=P,delay_us=N,seed=N,dir=rx|tx|both`
 * with probabilities P in [0,1]; each sub-key at most once.
 * \param s    NUL-terminated text.
 * \param[out] out  Parsed value on success; untouched on failure.
 * \param why  On failure, a message naming the offending sub-key (may be NULL).
 * \param whylen  Size of why.
 * \return 0; -EINVAL with why filled.
 * Thread: any.
 */
int tide_nodeenv_parse_fault(const char *s, struct tide_nodeenv_fault *out, char *why,
			     size_t whylen);

/**
 * Where a key's effective value came from.
 * \param ne   Loaded configuration.
 * \param key  Key name, e.g. "MOONCAKE_MASTER".
 * \param[out] src   Source (may be NULL).
 * \param[out] line  1-based line in ne->path when *src is FILE, else 0 (may be NULL).
 * \return 0; -ENOENT unknown key.
 * Thread: any.
 */
int tide_nodeenv_source(const struct tide_nodeenv *ne, const char *key, enum tide_nodeenv_src *src,
			uint32_t *line);

/**
 * The source as text: "default", "environment" or "<path>:<line>".
 * \param buf  Output, always NUL-terminated when len > 0 (truncated to fit).
 * \return 0; -ENOENT unknown key; -ENOSPC truncated.
 * Thread: any.
 */
int tide_nodeenv_source_str(const struct tide_nodeenv *ne, const char *key, char *buf, size_t len);

/**
 * A key's effective value as text in the form the file accepts back: sizes
 * in plain bytes, booleans as true/false, addresses dotted, "" for unset
 * optional values, enums by name, strings as stored.
 * \param buf  Output, always NUL-terminated when len > 0 (truncated to fit).
 * \return 0; -ENOENT unknown key; -ENOSPC truncated.
 * Thread: any.
 */
int tide_nodeenv_format(const struct tide_nodeenv *ne, const char *key, char *buf, size_t len);

/**
 * Write every key as `KEY=value  # source` in table order, quoted so that the
 * output is itself a valid node file (loading it gives the same values).
 * \param out  Stream to write to.
 * Thread: any (stdio locking is per call).
 */
void tide_nodeenv_dump(const struct tide_nodeenv *ne, FILE *out);

/** Number of keys in the table. Thread: any. */
size_t tide_nodeenv_nkeys(void);

/** Name of key i (< tide_nodeenv_nkeys()), NULL when out of range. Thread: any. */
const char *tide_nodeenv_key_name(size_t i);

/** One-line meaning of key i, NULL when out of range. Thread: any. */
const char *tide_nodeenv_key_doc(size_t i);

/**
 * Valid values of key i in words ("tcp | rdma", "576..9216"), NULL when out
 * of range. Enum names match case-insensitively and print in lower case.
 * Thread: any.
 */
const char *tide_nodeenv_key_type(size_t i);

/** Default of key i as file text ("" for empty), NULL when out of range. Thread: any. */
const char *tide_nodeenv_key_default(size_t i);

/** Index of a key by name. \return index, or -ENOENT. Thread: any. */
int tide_nodeenv_key_index(const char *key);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_NODEENV_H */
