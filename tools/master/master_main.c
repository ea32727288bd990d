/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_master: the Mooncake-compatible master as a program. Flags follow
 * the stock binary (gflags syntax: --flag=v, --flag v, --flag / --noflag for
 * booleans; a JSON --config_path file sets the same keys, the command line
 * wins). Unknown flags warn and are ignored so launchers written for the stock
 * master keep working; a bad value of a known flag is refused (exit 1).
 * Tide extension: --pin_unread (RL mode); when neither the command line nor
 * the config file sets it, TIDE_PIN_UNREAD from the environment does (the
 * master is started with the node file exported). Tide bounds against
 * hostile peers (stock has none): --regex_* (GetReplicaListByRegex,
 * RemoveByRegex), --http_* (admin port, metadata server) and
 * --allow_networks (who may connect to any port; default: anyone, as stock).
 * Foreground, logs on stderr, exits 0 on SIGTERM/SIGINT after a clean stop.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tide_cidr.h"
#include "tide_flags.h"
#include "tide_log.h"
#include "tide_nodeenv.h"
#include "tide_master_ha.h"
#include "tide_master_log.h"
#include "tide_mc_server.h"

enum ftype {
	F_BOOL,
	F_INT,    /* int64 within [min, max] */
	F_DOUBLE, /* within [min, max] */
	F_STR,
	F_DUR_MS, /* milliseconds; accepts ms/s/m/h suffixes */
	F_IGNORED_BOOL,
	F_IGNORED_VAL,
};

struct flag {
	const char *name;
	enum ftype type;
	const char *help;
	double min, max;
	/* value */
	bool b;
	int64_t i;
	double d;
	const char *s;
	uint64_t ms;
	bool set;       /* given on the command line (beats the config file) */
	bool from_file; /* set by the config file (beats the environment) */
};

static char empty[] = "";

/* Indexes into flags[] (keep in order). */
enum {
	FL_RPC_PORT,
	FL_PORT,
	FL_RPC_ADDRESS,
	FL_RPC_THREAD_NUM,
	FL_MAX_THREADS,
	FL_METRICS_PORT,
	FL_METRICS_HOST,
	FL_LEASE_TTL,
	FL_SOFT_PIN_TTL,
	FL_MAX_SOFT_PIN_TTL,
	FL_ALLOW_EVICT_SOFT,
	FL_EVICTION_RATIO,
	FL_EVICTION_HWM,
	FL_CLIENT_TTL,
	FL_DISCARD_TIMEOUT,
	FL_RELEASE_TIMEOUT,
	FL_HTTP_META,
	FL_HTTP_META_PORT,
	FL_HTTP_META_HOST,
	FL_ROOT_FS_DIR,
	FL_CLUSTER_ID,
	FL_DISK_EVICTION,
	FL_QUOTA_BYTES,
	FL_CONFIG_PATH,
	FL_LOG_LEVEL,
	FL_MAX_FRAME_MB,
	FL_PIN_UNREAD,
	FL_REGEX_MATCH_LIMIT,
	FL_REGEX_MEMORY_MB,
	FL_REGEX_TIMEOUT,
	FL_HTTP_ADMIN_CONNS,
	FL_HTTP_META_CONNS,
	FL_HTTP_MAX_BODY_KB,
	FL_HTTP_META_MAX_MB,
	FL_HTTP_HEADER_TIMEOUT,
	FL_HTTP_BODY_TIMEOUT,
	FL_HTTP_IDLE_TIMEOUT,
	FL_ALLOW_NETWORKS,
	FL_ENABLE_HA,
	FL_HA_BACKEND_TYPE,
	FL_HA_CONNSTRING,
	FL_ETCD_ENDPOINTS,
	FL_HA_LEASE_TTL,
	FL_PUT_LEASES,
	FL_LEASE_SHARE,
	FL_HELP,
	FL_FIRST_IGNORED,
};

static struct flag flags[] = {
	[FL_RPC_PORT] = {"rpc_port", F_INT, "RPC port (wins over --port when > 0)", 0, 65535},
	[FL_PORT] = {"port", F_INT, "deprecated RPC port", 0, 65535, .i = 50051},
	[FL_RPC_ADDRESS] = {"rpc_address", F_STR, "IPv4 or IPv6 address to bind", .s = "0.0.0.0"},
	[FL_RPC_THREAD_NUM] = {"rpc_thread_num", F_INT,
			       "RPC worker threads; 0 = min(max_threads, CPUs)", 0,
			       TIDE_MC_SERVER_MAX_THREADS},
	[FL_MAX_THREADS] = {"max_threads", F_INT, "bound for rpc_thread_num 0", 1, 1024, .i = 16},
	[FL_METRICS_PORT] = {"metrics_port", F_INT, "admin HTTP port (0 = ephemeral)", 0, 65535,
			     .i = 9003},
	[FL_METRICS_HOST] = {"metrics_host", F_STR, "admin HTTP address", .s = "0.0.0.0"},
	[FL_LEASE_TTL] = {"default_kv_lease_ttl", F_DUR_MS, "read lease (ms, or 10s, 1m...)", 0, 0,
			  .ms = 10000},
	[FL_SOFT_PIN_TTL] = {"default_kv_soft_pin_ttl", F_DUR_MS, "soft pin TTL (ms)", 0, 0,
			     .ms = 30 * 60 * 1000},
	[FL_MAX_SOFT_PIN_TTL] = {"max_kv_soft_pin_ttl", F_DUR_MS, "max soft pin TTL (ms)", 0, 0,
				 .ms = 24 * 3600 * 1000},
	[FL_ALLOW_EVICT_SOFT] = {"allow_evict_soft_pinned_objects", F_BOOL,
				 "evict soft-pinned objects when needed", .b = true},
	[FL_EVICTION_RATIO] = {"eviction_ratio", F_DOUBLE, "fraction evicted per round", 0, 1,
			       .d = 0.05},
	[FL_EVICTION_HWM] = {"eviction_high_watermark_ratio", F_DOUBLE,
			     "usage that triggers eviction", 0, 1, .d = 0.90},
	[FL_CLIENT_TTL] = {"client_ttl", F_INT, "client liveness TTL (s)", 1, 86400 * 365, .i = 10},
	[FL_DISCARD_TIMEOUT] = {"put_start_discard_timeout_sec", F_INT,
				"a stale PutStart may be taken over after (s)", 1, 86400 * 365,
				.i = 30},
	[FL_RELEASE_TIMEOUT] = {"put_start_release_timeout_sec", F_INT,
				"stale PutStart buffers freed after (s)", 1, 86400 * 365, .i = 600},
	[FL_HTTP_META] = {"enable_http_metadata_server", F_BOOL,
			  "serve the transfer-engine HTTP metadata store"},
	[FL_HTTP_META_PORT] = {"http_metadata_server_port", F_INT,
			       "metadata server port (0 = ephemeral)", 0, 65535, .i = 8080},
	[FL_HTTP_META_HOST] = {"http_metadata_server_host", F_STR, "metadata server address",
			       .s = "0.0.0.0"},
	[FL_ROOT_FS_DIR] = {"root_fs_dir", F_STR, "storage tier root (GetFsdir)", .s = empty},
	[FL_CLUSTER_ID] = {"cluster_id", F_STR, "cluster id (GetFsdir)", .s = "mooncake_cluster"},
	[FL_DISK_EVICTION] = {"enable_disk_eviction", F_BOOL, "GetStorageConfig value", .b = true},
	[FL_QUOTA_BYTES] = {"quota_bytes", F_INT, "GetStorageConfig value", 0, 9.2e18},
	[FL_CONFIG_PATH] = {"config_path", F_STR, "JSON file with the same keys", .s = empty},
	[FL_LOG_LEVEL] = {"log_level", F_STR, "error|warn|notice|info|debug", .s = "notice"},
	[FL_MAX_FRAME_MB] = {"max_request_mb", F_INT, "largest request body accepted (MiB)", 1,
			     4095, .i = TIDE_MC_SERVER_MAX_FRAME_BODY >> 20},
	[FL_PUT_LEASES] = {"tide_put_leases", F_BOOL,
			   "Tide: grant allocation leases (one-round-trip puts of Tide clients); "
			   "false answers them as a stock master does (not registered)",
			   .b = true},
	[FL_LEASE_SHARE] = {"tide_lease_segment_share", F_INT,
			    "Tide: an allocation lease takes at most 1/N of its segment", 1,
			    UINT32_MAX, .i = 8},
	[FL_PIN_UNREAD] = {"pin_unread", F_BOOL,
			   "Tide: never evict unread objects, answer NO_AVAILABLE_HANDLE "
			   "instead (RL mode); default TIDE_PIN_UNREAD, else false"},
	[FL_REGEX_MATCH_LIMIT] = {"regex_match_limit", F_INT,
				  "Tide: backtracking steps a regex may take per key", 1,
				  4294967295.0, .i = TIDE_MC_TABLE_REGEX_MATCH_LIMIT},
	[FL_REGEX_MEMORY_MB] = {"regex_memory_mb", F_INT,
				"Tide: memory one regex may take to compile and match (MiB)", 1,
				4096, .i = TIDE_MC_TABLE_REGEX_MEMORY >> 20},
	[FL_REGEX_TIMEOUT] = {"regex_timeout", F_DUR_MS,
			      "Tide: matching time of one regex request (ms, or 5s...)", 1,
			      86400000, .ms = TIDE_MC_TABLE_REGEX_TIMEOUT_MS},
	[FL_HTTP_ADMIN_CONNS] = {"http_admin_max_connections", F_INT,
				 "Tide: admin HTTP connections; at the cap the least recently "
				 "active one makes room",
				 1, 65536, .i = TIDE_MC_HTTP_ADMIN_MAX_CONNS},
	[FL_HTTP_META_CONNS] = {"http_metadata_max_connections", F_INT,
				"Tide: metadata server connections (as above)", 1, 65536,
				.i = TIDE_MC_HTTP_METADATA_MAX_CONNS},
	[FL_HTTP_MAX_BODY_KB] = {"http_max_body_kb", F_INT,
				 "Tide: largest HTTP body, e.g. a metadata value (KiB)", 1, 1048576,
				 .i = TIDE_MC_HTTP_MAX_BODY >> 10},
	[FL_HTTP_META_MAX_MB] = {"http_metadata_max_mb", F_INT,
				 "Tide: metadata store size, keys + values (MiB)", 1, 1048576,
				 .i = (int64_t)(TIDE_MC_HTTP_METADATA_MAX_BYTES >> 20)},
	[FL_HTTP_HEADER_TIMEOUT] = {"http_header_timeout", F_DUR_MS,
				    "Tide: an HTTP request head must arrive within (ms)", 1,
				    86400000, .ms = TIDE_MC_HTTP_HEADER_TIMEOUT_MS},
	[FL_HTTP_BODY_TIMEOUT] = {"http_body_timeout", F_DUR_MS,
				  "Tide: its body within, after the head (ms)", 1, 86400000,
				  .ms = TIDE_MC_HTTP_BODY_TIMEOUT_MS},
	[FL_HTTP_IDLE_TIMEOUT] =
		{"http_idle_timeout", F_DUR_MS,
		 "Tide: an HTTP connection with no byte moving is closed after (ms)", 1, 86400000,
		 .ms = TIDE_MC_HTTP_IDLE_TIMEOUT_MS},
	[FL_ALLOW_NETWORKS] = {"allow_networks", F_STR,
			       "Tide: peers allowed on the RPC, admin and metadata ports, e.g. "
			       "10.0.0.0/8,192.168.1.7,fd00::/8 (others are closed at accept); "
			       "empty = any",
			       .s = empty},
	[FL_ENABLE_HA] =
		{"enable_ha", F_BOOL,
		 "elect one leader among masters through etcd (master_view key and lease); "
		 "standbys refuse RPC connections until elected"},
	[FL_HA_BACKEND_TYPE] = {"ha_backend_type", F_STR, "HA backend: etcd (the only one)",
				.s = "etcd"},
	[FL_HA_CONNSTRING] = {"ha_backend_connstring", F_STR,
			      "etcd endpoints, e.g. 10.0.0.1:2379;10.0.0.2:2379 (wins over "
			      "etcd_endpoints)",
			      .s = empty},
	[FL_ETCD_ENDPOINTS] = {"etcd_endpoints", F_STR, "etcd endpoints (legacy alias)",
			       .s = empty},
	[FL_HA_LEASE_TTL] = {"ha_lease_ttl_s", F_INT,
			     "Tide: master_view lease TTL in seconds (stock: 5, fixed); a crashed "
			     "leader is replaced within about this",
			     2, 60, .i = TIDE_MASTER_HA_DEFAULT_TTL_S},
	[FL_HELP] = {"help", F_BOOL, "print the flags and exit"},
	/* Stock flags of features this master does not implement: accepted, warned, ignored. */
	[FL_FIRST_IGNORED] = {"rpc_interface", F_IGNORED_VAL},
	{"rpc_conn_timeout_seconds", F_IGNORED_VAL},
	{"rpc_enable_tcp_no_delay", F_IGNORED_BOOL},
	{"enable_metric_reporting", F_IGNORED_BOOL},
	{"memory_allocator", F_IGNORED_VAL},
	{"allocation_strategy", F_IGNORED_VAL},
	{"enable_metadata_cleanup_on_timeout", F_IGNORED_BOOL},
	{"enable_offload", F_IGNORED_BOOL},
	{"offload_on_evict", F_IGNORED_BOOL},
	{"promotion_on_hit", F_IGNORED_BOOL},
	{"enable_multi_tenants", F_IGNORED_BOOL},
	{"enable_snapshot", F_IGNORED_BOOL},
	{"enable_snapshot_restore", F_IGNORED_BOOL},
	{"enable_oplog", F_IGNORED_BOOL},
	{"enable_cxl", F_IGNORED_BOOL},
	{"enable_kv_events", F_IGNORED_BOOL},
	{"dynamic_replication_mode", F_IGNORED_VAL},
	{"cluster_ns", F_IGNORED_VAL},
};

#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

static struct flag *
find_flag(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < N_FLAGS; i++) {
		if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0) {
			return &flags[i];
		}
	}
	return NULL;
}

/*
 * Set a flag from text (the command line's, origin "", or the config file's). 0, or
 * -EINVAL with why in err: gflags' own wording, which launchers of the stock master
 * may look for.
 */
static int
set_flag(struct flag *f, const char *v, const char *origin, char *err, size_t errlen)
{
	switch (f->type) {
	case F_BOOL:
		if (tide_nodeenv_parse_bool(v, &f->b) != 0) {
			snprintf(err, errlen,
				 "illegal value '%s' specified for bool flag '%s'%s "
				 "(expected true/false, 1/0, yes/no, on/off, t/f or y/n)",
				 v, f->name, origin);
			return -EINVAL;
		}
		return 0;
	case F_INT:
		if (tide_flags_parse_i64(v, f->min, f->max, &f->i) != 0) {
			snprintf(err, errlen,
				 "illegal value '%s' specified for integer flag '%s'%s "
				 "(expected an integer in %.0f..%.0f)",
				 v, f->name, origin, f->min, f->max);
			return -EINVAL;
		}
		return 0;
	case F_DOUBLE:
		if (tide_flags_parse_double(v, f->min, f->max, &f->d) != 0) {
			snprintf(err, errlen,
				 "illegal value '%s' specified for double flag '%s'%s "
				 "(expected a number in [%g, %g])",
				 v, f->name, origin, f->min, f->max);
			return -EINVAL;
		}
		return 0;
	case F_DUR_MS: {
		uint64_t ms;
		/* min/max, when set, bound the value (the stock duration flags have none). */
		if (tide_flags_parse_dur_ms(v, &ms) != 0 ||
		    (f->max > 0 && ((double)ms < f->min || (double)ms > f->max))) {
			snprintf(err, errlen,
				 "illegal value '%s' specified for duration flag '%s'%s "
				 "(expected milliseconds, or a number with ms/s/m/h%s)",
				 v, f->name, origin, f->max > 0 ? ", not 0" : "");
			return -EINVAL;
		}
		f->ms = ms;
		return 0;
	}
	case F_STR:
		f->s = v;
		return 0;
	case F_IGNORED_BOOL:
	case F_IGNORED_VAL:
		TIDE_LOG(WARN, "--%s=%s: this Mooncake feature is not implemented here; ignored",
			 f->name, v);
		return 0;
	}
	return -EINVAL;
}

static void *
walk_find(void *ctx, const char *name, size_t len, bool *is_bool)
{
	struct flag *f = find_flag(name, len);

	(void)ctx;
	if (f != NULL)
		*is_bool = f->type == F_BOOL || f->type == F_IGNORED_BOOL;
	return f;
}

static int
walk_set(void *ctx, void *fp, const char *v, char *err, size_t errlen)
{
	struct flag *f = fp;

	(void)ctx;
	if (set_flag(f, v, "", err, errlen) != 0)
		return -EINVAL;
	f->set = true;
	return 0;
}

/* The command line, read as every Tide program reads one (tools/common/flags.c); an
 * unknown flag is a warning, not an error, as launchers of the stock master expect. */
static int
parse_args(int argc, char **argv)
{
	struct tide_flags_walker w = {.find = walk_find, .set = walk_set, .skip_unknown = true};
	char err[512];
	int rc = tide_flags_walk(argc, argv, &w, err, sizeof(err));

	if (rc == 1) /* the table has --help: only a "-h" gets here */
		flags[FL_HELP].b = true;
	else if (rc < 0)
		fprintf(stderr, "ERROR: %s\n", err);
	return rc < 0 ? rc : 0;
}

/* Apply the config file's keys for flags not given on the command line. */
static int
load_config(const char *path)
{
	char num[64], origin[512], err[1024];
	cJSON *root, *it;
	struct flag *f;
	const char *key, *v;
	FILE *fp;
	long sz;
	char *text;
	int rc = 0;

	fp = fopen(path, "rb");
	if (fp == NULL) {
		fprintf(stderr, "ERROR: --config_path %s: %s\n", path, strerror(errno));
		return -errno;
	}
	fseek(fp, 0, SEEK_END);
	sz = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	text = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
	if (text == NULL || fread(text, 1, (size_t)sz, fp) != (size_t)sz) {
		fprintf(stderr, "ERROR: --config_path %s: cannot read\n", path);
		free(text);
		fclose(fp);
		return -EIO;
	}
	fclose(fp);
	text[sz] = '\0';
	root = cJSON_Parse(text);
	if (root == NULL || !cJSON_IsObject(root)) {
		fprintf(stderr, "ERROR: --config_path %s: not a JSON object\n", path);
		cJSON_Delete(root);
		free(text);
		return -EINVAL;
	}
	free(text);
	snprintf(origin, sizeof(origin), " in %s", path);
	cJSON_ArrayForEach(it, root)
	{
		key = it->string;
		if (strcmp(key, "client_live_ttl_sec") == 0) {
			key = "client_ttl";
		}
		f = find_flag(key, strlen(key));
		if (f == NULL) {
			TIDE_LOG(WARN, "%s: unknown key '%s' ignored", path, it->string);
			continue;
		}
		if (f->set || f == &flags[FL_CONFIG_PATH]) {
			continue;
		}
		if (cJSON_IsBool(it)) {
			v = cJSON_IsTrue(it) ? "true" : "false";
		} else if (cJSON_IsNumber(it)) {
			if (it->valuedouble == floor(it->valuedouble) &&
			    fabs(it->valuedouble) < 9e15) {
				snprintf(num, sizeof(num), "%.0f", it->valuedouble);
			} else {
				snprintf(num, sizeof(num), "%.17g", it->valuedouble);
			}
			v = num;
		} else if (cJSON_IsString(it)) {
			v = it->valuestring;
		} else {
			fprintf(stderr, "ERROR: %s: key '%s' must be a string, number or bool\n",
				path, it->string);
			rc = -EINVAL;
			break;
		}
		if (f->type == F_STR) {
			/* Strings must outlive the JSON tree. */
			v = strdup(v);
			if (v == NULL) {
				rc = -ENOMEM;
				break;
			}
		}
		rc = set_flag(f, v, origin, err, sizeof(err));
		if (rc != 0) {
			fprintf(stderr, "ERROR: %s\n", err);
			break;
		}
		f->from_file = true;
	}
	cJSON_Delete(root);
	return rc;
}

/*
 * TIDE_PIN_UNREAD applies when neither the command line nor the config file
 * set --pin_unread. Sets *origin to where the value came from. 0, or -EINVAL
 * after printing why (a node-file value that tide-env check would refuse).
 */
static int
pin_unread_from_env(const char **origin)
{
	struct flag *f = &flags[FL_PIN_UNREAD];
	const char *v;

	*origin = f->set ? "command line" : f->from_file ? "config file" : "default";
	if (f->set || f->from_file) {
		return 0;
	}
	v = getenv("TIDE_PIN_UNREAD");
	if (v == NULL) {
		return 0;
	}
	if (tide_nodeenv_parse_bool(v, &f->b) != 0) {
		fprintf(stderr,
			"ERROR: illegal value '%s' in environment variable TIDE_PIN_UNREAD "
			"(expected 1/0, true/false, yes/no or on/off; or pass --pin_unread)\n",
			v);
		return -EINVAL;
	}
	*origin = "environment TIDE_PIN_UNREAD";
	return 0;
}

static void
usage(void)
{
	size_t i;

	fprintf(stderr, "usage: mooncake_master [--flag=value ...]\n\nflags:\n");
	for (i = 0; i < FL_FIRST_IGNORED; i++) {
		fprintf(stderr, "  --%-36s %s\n", flags[i].name, flags[i].help);
	}
	fprintf(stderr, "\naccepted and ignored (features not implemented):");
	for (i = FL_FIRST_IGNORED; i < N_FLAGS; i++) {
		fprintf(stderr, "%s --%s", i == FL_FIRST_IGNORED ? "" : ",", flags[i].name);
	}
	fprintf(stderr, "\n");
}

/* --- HA (--enable_ha) ------------------------------------------------------------ */

struct ha_ctx {
	struct tide_mc_server_opts *o;
	struct tide_mc_server *s;
	struct tide_master_log *log; /* while leading: the table's journal in etcd */
	const char *endpoints, *cluster_id;
	atomic_bool log_failed;
	atomic_bool stop;
	sigset_t set;
	char self[96];
};

/* Waits for SIGTERM/SIGINT and tells the election to stop. */
static void *
ha_signal_main(void *arg)
{
	struct ha_ctx *c = arg;
	int sig;

	do {
		sig = sigwaitinfo(&c->set, NULL);
	} while (sig < 0 && errno == EINTR);
	TIDE_LOG(NOTICE, "%s received: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	atomic_store(&c->stop, true);
	return NULL;
}

static void
ha_log_durable(void *arg, uint64_t seq)
{
	struct ha_ctx *c = arg;

	tide_mc_server_set_durable(c->s, seq);
}

static void
ha_log_failed(void *arg, int err)
{
	struct ha_ctx *c = arg;

	TIDE_LOG(ERR, "HA: the table journal stopped (%s): leaving the leadership", strerror(-err));
	atomic_store(&c->log_failed, true);
}

static void
ha_lease(void *arg, uint64_t deadline_ns)
{
	struct ha_ctx *c = arg;

	if (c->s != NULL)
		tide_mc_server_set_lease_deadline(c->s, deadline_ns / 1000u);
}

static bool
ha_healthy(void *arg)
{
	struct ha_ctx *c = arg;

	return !atomic_load(&c->log_failed);
}

/* Won: rebuild the table from etcd, journal it there from now on, and only then
 * open the RPC port, with every reply held until what it reports is in etcd. */
static int
ha_serve(void *arg, const char *key, int64_t view)
{
	struct ha_ctx *c = arg;
	struct tide_mc_table *t = tide_mc_server_table(c->s);
	struct tide_master_log_opts lo = {.endpoints = c->endpoints,
					  .cluster_id = c->cluster_id,
					  .fence_key = key,
					  .fence_rev = view,
					  .durable = ha_log_durable,
					  .failed = ha_log_failed,
					  .arg = c};
	uint64_t last = 0;
	bool damaged = false;
	int rc;

	atomic_store(&c->log_failed, false);
	rc = tide_master_log_replay(&lo, t, &last, &damaged);
	/* What the log held is durable; what the journal numbers after it is not yet. */
	if (rc == 0)
		rc = tide_mc_server_hold_replies(c->s, last);
	if (rc == 0)
		rc = tide_master_log_start(&lo, t, last, damaged, &c->log);
	/* /health says leader by the time the RPC port accepts (clients and
	 * launchers check one, then the other). */
	if (rc == 0) {
		struct tide_mc_ha_view v = {.role = "leader",
					    .state = "serving",
					    .leader_address = c->self,
					    .view_version = view};

		(void)tide_mc_server_set_ha(c->s, &v);
		rc = tide_mc_server_start_rpc(c->s);
	}
	if (rc == 0)
		TIDE_LOG(NOTICE, "leader: serving RPC on %s", c->self);
	return rc;
}

/* Lost the lease: stop serving and start again from an empty table (what
 * this master knew may be stale once another one has served). */
static void
ha_unserve(void *arg)
{
	struct ha_ctx *c = arg;
	int rc;

	if (atomic_load(&c->stop)) {
		/* Stop serving before the election revokes the lease: a successor must
		 * not serve while this one still answers. main() frees the server. */
		tide_mc_server_stop(c->s);
		tide_master_log_stop(c->log);
		c->log = NULL;
		return;
	}
	/* Stop answering first: once the journal stops taking records, a change would
	 * still be made in the table and acknowledged with no record of it. The writers
	 * only wake the stopped server's workers (eventfds stay open until destroy). */
	tide_mc_server_stop(c->s);
	tide_master_log_stop(c->log);
	c->log = NULL;
	tide_mc_server_destroy(c->s);
	c->s = NULL;
	rc = tide_mc_server_create(c->o, &c->s);
	if (rc != 0) {
		TIDE_LOG(ERR, "cannot restart as a standby: %s", strerror(-rc));
		atomic_store(&c->stop, true);
	}
}

static void
ha_status(void *arg, const struct tide_master_ha_status *st)
{
	struct ha_ctx *c = arg;
	struct tide_mc_ha_view v = {.role = st->role,
				    .state = st->state,
				    .leader_address = st->leader,
				    .view_version = st->view_version};

	if (c->s != NULL)
		(void)tide_mc_server_set_ha(c->s, &v);
}

/* Resolve the HA flags; 0, or 1 after printing what is wrong. */
static int
ha_flags(const struct tide_mc_server_opts *o, const char **endpoints)
{
	const char *cs = flags[FL_HA_CONNSTRING].s, *ep = flags[FL_ETCD_ENDPOINTS].s;

	if (strcmp(flags[FL_HA_BACKEND_TYPE].s, "etcd") != 0) {
		fprintf(stderr, "ERROR: --ha_backend_type=%s: only etcd is supported\n",
			flags[FL_HA_BACKEND_TYPE].s);
		return 1;
	}
	if (cs[0] != '\0' && ep[0] != '\0' && strcmp(cs, ep) != 0)
		TIDE_LOG(WARN, "--ha_backend_connstring (%s) wins over --etcd_endpoints (%s)", cs,
			 ep);
	*endpoints = cs[0] != '\0' ? cs : ep;
	if ((*endpoints)[0] == '\0') {
		fprintf(stderr, "ERROR: --enable_ha needs --etcd_endpoints (or "
				"--ha_backend_connstring)\n");
		return 1;
	}
	if (strcmp(o->rpc_address, "0.0.0.0") == 0) {
		fprintf(stderr,
			"ERROR: --enable_ha publishes --rpc_address:--rpc_port for clients "
			"to dial; give the address they reach this master at, not 0.0.0.0\n");
		return 1;
	}
	if (o->rpc_port == 0) {
		fprintf(stderr, "ERROR: --enable_ha needs a fixed --rpc_port (it is published)\n");
		return 1;
	}
	return 0;
}

static int
run_ha(struct tide_mc_server_opts *o, sigset_t *set)
{
	struct tide_master_ha_ops ops = {.serve = ha_serve,
					 .unserve = ha_unserve,
					 .status = ha_status,
					 .healthy = ha_healthy,
					 .lease = ha_lease};
	struct tide_master_ha_opts ho = {0};
	struct tide_mc_ha_view v0 = {.role = "standby", .state = "starting"};
	struct ha_ctx c = {.o = o, .set = *set};
	pthread_t sig_th;
	int rc;

	if (ha_flags(o, &ho.endpoints) != 0)
		return 1;
	snprintf(c.self, sizeof(c.self), "%s:%u", o->rpc_address, o->rpc_port);
	ho.cluster_id = flags[FL_CLUSTER_ID].s;
	ho.self = c.self;
	c.endpoints = ho.endpoints;
	c.cluster_id = ho.cluster_id;
	atomic_init(&c.log_failed, false);
	ho.ttl_s = (unsigned)flags[FL_HA_LEASE_TTL].i;
	o->defer_rpc = true;
	atomic_init(&c.stop, false);
	rc = tide_mc_server_create(o, &c.s);
	if (rc != 0) {
		fprintf(stderr, "mooncake_master: cannot start: %s\n", strerror(-rc));
		return 1;
	}
	(void)tide_mc_server_set_ha(c.s, &v0);
	TIDE_LOG(NOTICE, "mooncake_master (tide) standby; metrics HTTP on %s:%u", o->metrics_host,
		 tide_mc_server_metrics_port(c.s));
	rc = -pthread_create(&sig_th, NULL, ha_signal_main, &c);
	if (rc == 0) {
		rc = tide_master_ha_run(&ho, &ops, &c, &c.stop);
		if (rc != 0) {
			fprintf(stderr, "mooncake_master: HA: %s\n",
				rc == -EINVAL ? "bad --etcd_endpoints or --rpc_address"
					      : strerror(-rc));
			pthread_kill(sig_th, SIGTERM);
		}
		pthread_join(sig_th, NULL);
	}
	tide_mc_server_destroy(c.s);
	TIDE_LOG(NOTICE, "stopped");
	return rc == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	struct tide_mc_server_opts o;
	struct tide_mc_server *s = NULL;
	enum tide_log_level lvl;
	const char *pin_origin;
	char fsdir[4096] = "";
	sigset_t set;
	uint32_t allow_n = 0;
	long ncpu;
	int sig, rc;

	if (parse_args(argc, argv) != 0) {
		fprintf(stderr, "mooncake_master: see --help\n");
		return 1;
	}
	if (flags[FL_HELP].b) {
		usage();
		return 0;
	}
	if (flags[FL_CONFIG_PATH].s[0] != '\0' && load_config(flags[FL_CONFIG_PATH].s) != 0) {
		return 1;
	}
	if (pin_unread_from_env(&pin_origin) != 0) {
		return 1;
	}
	if (tide_log_level_parse(flags[FL_LOG_LEVEL].s, &lvl) != 0) {
		fprintf(stderr,
			"ERROR: illegal value '%s' specified for flag 'log_level' "
			"(expected error, warn, notice, info or debug)\n",
			flags[FL_LOG_LEVEL].s);
		return 1;
	}
	tide_log_set_level(lvl);

	tide_mc_server_opts_init(&o, sizeof(o));
	o.rpc_port = (uint16_t)(flags[FL_RPC_PORT].i > 0 ? flags[FL_RPC_PORT].i : flags[FL_PORT].i);
	o.rpc_address = flags[FL_RPC_ADDRESS].s;
	if (flags[FL_RPC_THREAD_NUM].i > 0) {
		o.rpc_thread_num = (unsigned)flags[FL_RPC_THREAD_NUM].i;
	} else {
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		ncpu = ncpu < 1 ? 1 : ncpu;
		ncpu = ncpu < flags[FL_MAX_THREADS].i ? ncpu : flags[FL_MAX_THREADS].i;
		o.rpc_thread_num = (unsigned)(ncpu < (long)TIDE_MC_SERVER_MAX_THREADS
						      ? ncpu
						      : (long)TIDE_MC_SERVER_MAX_THREADS);
	}
	o.metrics_port = (uint16_t)flags[FL_METRICS_PORT].i;
	o.metrics_host = flags[FL_METRICS_HOST].s;
	o.enable_http_metadata = flags[FL_HTTP_META].b;
	o.http_metadata_port = (uint16_t)flags[FL_HTTP_META_PORT].i;
	o.http_metadata_host = flags[FL_HTTP_META_HOST].s;
	o.max_frame_body = (uint32_t)flags[FL_MAX_FRAME_MB].i << 20;
	if (flags[FL_ROOT_FS_DIR].s[0] != '\0') {
		snprintf(fsdir, sizeof(fsdir), "%s/%s", flags[FL_ROOT_FS_DIR].s,
			 flags[FL_CLUSTER_ID].s);
	}
	o.fsdir = fsdir;
	o.enable_disk_eviction = flags[FL_DISK_EVICTION].b;
	o.quota_bytes = (uint64_t)flags[FL_QUOTA_BYTES].i;
	o.table.default_kv_lease_ttl_ms = flags[FL_LEASE_TTL].ms;
	o.table.default_kv_soft_pin_ttl_ms = flags[FL_SOFT_PIN_TTL].ms;
	o.table.max_kv_soft_pin_ttl_ms = flags[FL_MAX_SOFT_PIN_TTL].ms;
	o.table.allow_evict_soft_pinned_objects = flags[FL_ALLOW_EVICT_SOFT].b;
	o.table.eviction_ratio = flags[FL_EVICTION_RATIO].d;
	o.table.eviction_high_watermark_ratio = flags[FL_EVICTION_HWM].d;
	o.table.client_ttl_ms = (uint64_t)flags[FL_CLIENT_TTL].i * 1000u;
	o.table.put_start_discard_timeout_ms = (uint64_t)flags[FL_DISCARD_TIMEOUT].i * 1000u;
	o.table.put_start_release_timeout_ms = (uint64_t)flags[FL_RELEASE_TIMEOUT].i * 1000u;
	o.table.pin_unread = flags[FL_PIN_UNREAD].b;
	o.no_tide_ext = !flags[FL_PUT_LEASES].b;
	o.table.lease_seg_share = (uint32_t)flags[FL_LEASE_SHARE].i;
	o.table.regex_match_limit = (uint32_t)flags[FL_REGEX_MATCH_LIMIT].i;
	o.table.regex_memory_limit = (uint64_t)flags[FL_REGEX_MEMORY_MB].i << 20;
	o.table.regex_timeout_ms = flags[FL_REGEX_TIMEOUT].ms;
	o.http_admin_max_conns = (uint32_t)flags[FL_HTTP_ADMIN_CONNS].i;
	o.http_metadata_max_conns = (uint32_t)flags[FL_HTTP_META_CONNS].i;
	o.http_max_body = (uint32_t)flags[FL_HTTP_MAX_BODY_KB].i << 10;
	o.http_metadata_max_bytes = (uint64_t)flags[FL_HTTP_META_MAX_MB].i << 20;
	o.http_header_timeout_ms = (uint32_t)flags[FL_HTTP_HEADER_TIMEOUT].ms;
	o.http_body_timeout_ms = (uint32_t)flags[FL_HTTP_BODY_TIMEOUT].ms;
	o.http_idle_timeout_ms = (uint32_t)flags[FL_HTTP_IDLE_TIMEOUT].ms;
	{
		struct tide_cidr_list allow;
		char why[256];

		/* Refused here, as every other bad flag value, before any port opens. */
		if (tide_cidr_parse(flags[FL_ALLOW_NETWORKS].s, &allow, why, sizeof(why)) != 0) {
			fprintf(stderr,
				"ERROR: illegal value '%s' specified for flag 'allow_networks': "
				"%s\n",
				flags[FL_ALLOW_NETWORKS].s, why);
			return 1;
		}
		o.allow_networks = flags[FL_ALLOW_NETWORKS].s;
		allow_n = allow.n;
	}

	/* Many client connections (a pool per client): use the hard fd limit. */
	{
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			(void)setrlimit(RLIMIT_NOFILE, &rl);
		}
	}

	/* Threads inherit the mask: only this thread receives the stop signals. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (flags[FL_ENABLE_HA].b) {
		return run_ha(&o, &set);
	}
	rc = tide_mc_server_create(&o, &s);
	if (rc != 0) {
		fprintf(stderr, "mooncake_master: cannot start: %s\n", strerror(-rc));
		return 1;
	}
	TIDE_LOG(NOTICE, "mooncake_master (tide) serving RPC on %s:%u with %u threads",
		 o.rpc_address, tide_mc_server_rpc_port(s), o.rpc_thread_num);
	TIDE_LOG(NOTICE, "metrics HTTP on %s:%u", o.metrics_host, tide_mc_server_metrics_port(s));
	if (o.enable_http_metadata) {
		TIDE_LOG(NOTICE, "HTTP metadata server on %s:%u", o.http_metadata_host,
			 tide_mc_server_metadata_port(s));
	}
	if (allow_n > 0) {
		TIDE_LOG(NOTICE, "peers allowed on every port: %s (%u networks)",
			 flags[FL_ALLOW_NETWORKS].s, allow_n);
	}
	TIDE_LOG(NOTICE,
		 "lease %" PRIu64 " ms, client ttl %" PRId64
		 " s, eviction ratio %g, high watermark %g",
		 o.table.default_kv_lease_ttl_ms, flags[FL_CLIENT_TTL].i, o.table.eviction_ratio,
		 o.table.eviction_high_watermark_ratio);
	TIDE_LOG(NOTICE, "pin_unread %s (%s)%s", o.table.pin_unread ? "on" : "off", pin_origin,
		 o.table.pin_unread ? ": unread objects are never evicted; a full store answers "
				      "NO_AVAILABLE_HANDLE"
				    : "");

	do {
		sig = sigwaitinfo(&set, NULL);
	} while (sig < 0 && errno == EINTR);
	TIDE_LOG(NOTICE, "%s received: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	tide_mc_server_destroy(s);
	TIDE_LOG(NOTICE, "stopped");
	return 0;
}
