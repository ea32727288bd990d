/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Minimal HTTP/1.1 on the control thread: the admin port (/health,
 * /metrics, /get_all_segments, /query_key) and the transfer-engine metadata
 * server (/metadata?key=, spec 6.2). One request per connection, answered
 * with "Connection: close": the clients (curl in the transfer engine,
 * Prometheus, scripts) all handle that, and it keeps the state machine to
 * read -> answer -> close.
 *
 * Bounds (tide_mc_server.h, "HTTP"): request head <= MC_HTTP_MAX_HEAD
 * (413 beyond), body <= http_max_body (413 from its Content-Length, before
 * any of it is read; the buffer grows to the announced size, never past
 * it), metadata store <= http_metadata_max_bytes (507). Each port has its
 * own connection cap; at the cap the least recently active connection of
 * that port is closed to let the new one in, so a flood of idle
 * connections cannot shut /health out. Every tick closes connections past
 * their head, body or idle deadline. Accepts are taken in batches so a
 * connection flood cannot starve the requests already in. Query values are
 * used exactly as sent, still percent-encoded, as the stock server matches
 * keys.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc_server_int.h"
#include "tide_log.h"

#define MC_HTTP_MAX_HEAD     (16u << 10)
#define MC_HTTP_ACCEPT_BATCH 32u /* accepts per listener event */

struct mc_http_conn {
	struct mc_ctl_tag tag; /* first: the control thread's epoll tag */
	struct mc_http_conn *prev, *next;
	int fd;
	enum mc_ctl_kind port; /* MC_CTL_METRICS_LISTEN or MC_CTL_META_LISTEN */
	char *rbuf;
	size_t rlen, rcap;
	size_t want;    /* head + body bytes once the head is parsed; 0 before */
	bool continued; /* "100 Continue" sent */
	bool answered;
	bool closed; /* on s->http_dead: events still in the batch are ignored */
	struct tide_mc_buf out;
	size_t woff;
	uint64_t t_accept, t_head, t_last; /* ms: accepted, head complete, last byte moved */
};

/* ------------------------------------------------------------------------------------------ */
/* Limits                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Index of a port in the per-port counters: 0 admin, 1 metadata. */
static unsigned
port_idx(enum mc_ctl_kind k)
{
	return k == MC_CTL_META_LISTEN;
}

static const char *
port_name(unsigned p)
{
	return p ? "metadata" : "admin";
}

/* An option, or its default when 0 (servers built by hand, e.g. the fuzz target). */
static uint64_t
opt_or(uint64_t v, uint64_t def)
{
	return v ? v : def;
}

static uint64_t
max_conns(const struct tide_mc_server *s, unsigned p)
{
	return p ? opt_or(s->o.http_metadata_max_conns, TIDE_MC_HTTP_METADATA_MAX_CONNS)
		 : opt_or(s->o.http_admin_max_conns, TIDE_MC_HTTP_ADMIN_MAX_CONNS);
}

static uint64_t
max_body(const struct tide_mc_server *s, unsigned p)
{
	uint64_t b = opt_or(s->o.http_max_body, TIDE_MC_HTTP_MAX_BODY);

	return p == 0 && b > TIDE_MC_HTTP_ADMIN_MAX_BODY ? TIDE_MC_HTTP_ADMIN_MAX_BODY : b;
}

/* Counters other threads read (relaxed); only the control thread writes. */
static void
stat_add(uint64_t *c, int64_t d)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + (uint64_t)d, __ATOMIC_RELAXED);
}

struct http_req {
	char method[8];
	const char *path; /* NUL-terminated copies inside rbuf */
	size_t path_len;
	const char *query;
	size_t query_len;
	const char *body;
	size_t body_len;
};

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static int
buf_put(struct tide_mc_buf *b, const void *p, size_t n)
{
	size_t cap;
	uint8_t *d;

	if (n == 0) {
		return 0;
	}
	if (b->len + n > b->cap) {
		cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n) {
			cap *= 2;
		}
		d = realloc(b->data, cap);
		if (d == NULL) {
			return -ENOMEM;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

static int __attribute__((format(printf, 2, 3)))
buf_printf(struct tide_mc_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0) {
		return -EINVAL;
	}
	if ((size_t)n < sizeof(tmp)) {
		return buf_put(b, tmp, (size_t)n);
	}
	/* Long lines (segment names, keys) are rare: format twice. */
	{
		char *big = malloc((size_t)n + 1);
		int rc;

		if (big == NULL) {
			return -ENOMEM;
		}
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		rc = buf_put(b, big, (size_t)n);
		free(big);
		return rc;
	}
}

static const char *
status_text(int code)
{
	switch (code) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 411:
		return "Length Required";
	case 413:
		return "Payload Too Large";
	case 507:
		return "Insufficient Storage";
	case 500:
		return "Internal Server Error";
	default:
		return "Error";
	}
}

static void
respond(struct mc_http_conn *hc, int code, const char *ctype, const void *body, size_t len)
{
	hc->out.len = 0;
	hc->woff = 0;
	if (buf_printf(&hc->out,
		       "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		       "Connection: close\r\n\r\n",
		       code, status_text(code), ctype, len) != 0 ||
	    buf_put(&hc->out, body, len) != 0) {
		hc->out.len = 0;
	}
	hc->answered = true;
}

static void
respond_text(struct mc_http_conn *hc, int code, const char *text)
{
	respond(hc, code, "text/plain", text, strlen(text));
}

/* ------------------------------------------------------------------------------------------ */
/* Admin endpoints                                                                             */
/* ------------------------------------------------------------------------------------------ */

static void
metric(struct tide_mc_buf *b, const char *name, const char *type, const char *help, uint64_t v)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name,
		   v);
}

/* A Prometheus label value: backslash, quote and newline escaped (names come from clients). */
static void
label_value(struct tide_mc_buf *b, const char *p, size_t len)
{
	size_t i, run = 0;

	for (i = 0; i < len; i++) {
		if (p[i] != '\\' && p[i] != '"' && p[i] != '\n') {
			continue;
		}
		buf_put(b, p + run, i - run);
		buf_put(b, p[i] == '\n' ? "\\n" : p[i] == '"' ? "\\\"" : "\\\\", 2);
		run = i + 1;
	}
	buf_put(b, p + run, len - run);
}

/*
 * Stock's per-RPC counters, from Tide's per-operation ones. Stock counts an
 * upsert in the put counters of the same step (UpsertStart in put_start,
 * BatchUpsertEnd in batch_put_end, ...), a GracefulUnmountSegment as an
 * UnmountSegment and each key of a BatchRemove as a Remove; `also` is that
 * second operation (TIDE_MC_TABLE_OP_COUNT: none). `batch`: stock's five
 * batch counters (calls, failed calls, partial successes, keys, failed keys).
 */
static const struct stock_op {
	const char *name;
	enum tide_mc_table_op op, also;
	bool batch;
} stock_ops[] = {
	{"mount_segment", TIDE_MC_TABLE_OP_MOUNT, TIDE_MC_TABLE_OP_COUNT, false},
	{"remount_segment", TIDE_MC_TABLE_OP_REMOUNT, TIDE_MC_TABLE_OP_COUNT, false},
	{"unmount_segment", TIDE_MC_TABLE_OP_UNMOUNT, TIDE_MC_TABLE_OP_GRACEFUL_UNMOUNT, false},
	{"ping", TIDE_MC_TABLE_OP_PING, TIDE_MC_TABLE_OP_COUNT, false},
	{"put_start", TIDE_MC_TABLE_OP_PUT_START, TIDE_MC_TABLE_OP_UPSERT_START, false},
	{"put_end", TIDE_MC_TABLE_OP_PUT_END, TIDE_MC_TABLE_OP_UPSERT_END, false},
	{"put_revoke", TIDE_MC_TABLE_OP_PUT_REVOKE, TIDE_MC_TABLE_OP_UPSERT_REVOKE, false},
	{"get_replica_list", TIDE_MC_TABLE_OP_GET_REPLICA_LIST, TIDE_MC_TABLE_OP_COUNT, false},
	{"get_replica_list_by_regex", TIDE_MC_TABLE_OP_GET_REPLICA_LIST_BY_REGEX,
	 TIDE_MC_TABLE_OP_COUNT, false},
	{"exist_key", TIDE_MC_TABLE_OP_EXIST_KEY, TIDE_MC_TABLE_OP_COUNT, false},
	{"remove", TIDE_MC_TABLE_OP_REMOVE, TIDE_MC_TABLE_OP_BATCH_REMOVE, false},
	{"remove_by_regex", TIDE_MC_TABLE_OP_REMOVE_BY_REGEX, TIDE_MC_TABLE_OP_COUNT, false},
	{"remove_all", TIDE_MC_TABLE_OP_REMOVE_ALL, TIDE_MC_TABLE_OP_COUNT, false},
	{"batch_put_start", TIDE_MC_TABLE_OP_BATCH_PUT_START, TIDE_MC_TABLE_OP_BATCH_UPSERT_START,
	 true},
	{"batch_put_end", TIDE_MC_TABLE_OP_BATCH_PUT_END, TIDE_MC_TABLE_OP_BATCH_UPSERT_END, true},
	{"batch_put_revoke", TIDE_MC_TABLE_OP_BATCH_PUT_REVOKE,
	 TIDE_MC_TABLE_OP_BATCH_UPSERT_REVOKE, true},
	{"batch_get_replica_list", TIDE_MC_TABLE_OP_BATCH_GET_REPLICA_LIST, TIDE_MC_TABLE_OP_COUNT,
	 true},
	{"batch_exist_key", TIDE_MC_TABLE_OP_BATCH_EXIST_KEY, TIDE_MC_TABLE_OP_COUNT, true},
	{"batch_query_ip", TIDE_MC_TABLE_OP_BATCH_QUERY_IP, TIDE_MC_TABLE_OP_COUNT, true},
	{"batch_replica_clear", TIDE_MC_TABLE_OP_BATCH_REPLICA_CLEAR, TIDE_MC_TABLE_OP_COUNT, true},
};

/* v[op] plus v[also] when there is one. */
static uint64_t
op_sum(const uint64_t *v, const struct stock_op *so)
{
	return v[so->op] + (so->also < TIDE_MC_TABLE_OP_COUNT ? v[so->also] : 0);
}

static void
counter(struct tide_mc_buf *b, const char *name, uint64_t v)
{
	buf_printf(b, "# TYPE %s counter\n%s %" PRIu64 "\n", name, name, v);
}

/* Stock's names for what stock measures too (tests/python/data/stock_master_metrics.txt
 * lists them; docs/operations.md maps each). */
static void
render_stock(struct tide_mc_server *s, struct tide_mc_buf *b, const struct tide_mc_table_metrics *m)
{
	struct tide_mc_table_segment_info *v;
	char name[96];
	uint64_t cum, alloc, cap;
	size_t n, i, j, k;

	metric(b, "master_allocated_bytes", "gauge", "Bytes allocated in segments.",
	       m->allocated_bytes);
	metric(b, "master_total_capacity_bytes", "gauge", "Mounted segment bytes.",
	       m->capacity_bytes);
	/* Per segment name, as stock labels them (a name mounted twice is summed):
	 * O(segments^2) per scrape, for the few hundred segments a master holds. */
	if (tide_mc_table_segments_list(s->table, &s->http_arena, &v, &n) != 0) {
		n = 0;
	}
	for (k = 0; k < 2; k++) {
		const char *mn = k ? "segment_total_capacity_bytes" : "segment_allocated_bytes";

		buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", mn,
			   k ? "Bytes of the segments mounted under this name."
			     : "Bytes allocated in the segments mounted under this name.",
			   mn);
		for (i = 0; i < n; i++) {
			for (j = 0; j < i; j++) {
				if (v[j].name.len == v[i].name.len &&
				    memcmp(v[j].name.ptr, v[i].name.ptr, v[i].name.len) == 0) {
					break;
				}
			}
			if (j < i) {
				continue; /* summed at its first occurrence */
			}
			alloc = cap = 0;
			for (j = i; j < n; j++) {
				if (v[j].name.len == v[i].name.len &&
				    memcmp(v[j].name.ptr, v[i].name.ptr, v[i].name.len) == 0) {
					alloc += v[j].used;
					cap += v[j].size;
				}
			}
			buf_printf(b, "%s{segment=\"", mn);
			label_value(b, v[i].name.ptr, v[i].name.len);
			buf_printf(b, "\"} %" PRIu64 "\n", k ? cap : alloc);
		}
	}
	metric(b, "master_key_count", "gauge", "Objects in the table.", m->keys);
	metric(b, "master_soft_pin_key_count", "gauge", "Soft-pinned objects.",
	       m->soft_pinned_keys);
	metric(b, "master_active_clients", "gauge", "Clients with a live TTL.", m->clients);
	buf_printf(b, "# HELP master_value_size_bytes Lengths of the objects created.\n"
		      "# TYPE master_value_size_bytes histogram\n");
	cum = 0;
	for (k = 0; k <= TIDE_MC_TABLE_VSIZE_BOUNDS; k++) {
		cum += m->vsize_bucket[k];
		if (k < TIDE_MC_TABLE_VSIZE_BOUNDS) {
			buf_printf(b,
				   "master_value_size_bytes_bucket{le=\"%" PRIu64 "\"} %" PRIu64
				   "\n",
				   TIDE_MC_TABLE_VSIZE_BOUND[k], cum);
		} else {
			buf_printf(b, "master_value_size_bytes_bucket{le=\"+Inf\"} %" PRIu64 "\n",
				   cum);
		}
	}
	buf_printf(b,
		   "master_value_size_bytes_sum %" PRIu64 "\nmaster_value_size_bytes_count %" PRIu64
		   "\n",
		   m->vsize_sum, cum);
	for (i = 0; i < sizeof(stock_ops) / sizeof(stock_ops[0]); i++) {
		const struct stock_op *so = &stock_ops[i];

		if (!so->batch) {
			snprintf(name, sizeof(name), "master_%s_requests_total", so->name);
			counter(b, name, op_sum(m->requests, so));
			snprintf(name, sizeof(name), "master_%s_failures_total", so->name);
			counter(b, name, op_sum(m->failures, so));
			continue;
		}
		snprintf(name, sizeof(name), "master_%s_requests_total", so->name);
		counter(b, name, op_sum(m->batch_calls, so));
		snprintf(name, sizeof(name), "master_%s_failures_total", so->name);
		counter(b, name, op_sum(m->batch_failed_calls, so));
		snprintf(name, sizeof(name), "master_%s_partial_successes_total", so->name);
		counter(b, name, op_sum(m->batch_partial_calls, so));
		snprintf(name, sizeof(name), "master_%s_items_total", so->name);
		counter(b, name, op_sum(m->requests, so));
		snprintf(name, sizeof(name), "master_%s_failed_items_total", so->name);
		counter(b, name, op_sum(m->failures, so));
	}
	counter(b, "master_put_start_alloc_failures_total", m->alloc_failures);
	counter(b, "master_put_start_partial_allocations_total", m->partial_allocations);
	/* Memory is Tide's only tier: the _mem eviction counters equal the totals. */
	counter(b, "master_attempted_evictions_total", m->eviction_attempts);
	counter(b, "master_successful_evictions_total", m->eviction_rounds);
	counter(b, "master_evicted_key_count", m->evicted_keys);
	counter(b, "master_evicted_size_bytes", m->evicted_bytes);
	counter(b, "master_attempted_evictions_mem", m->eviction_attempts);
	counter(b, "master_successful_evictions_mem", m->eviction_rounds);
	counter(b, "master_evicted_key_count_mem", m->evicted_keys);
	counter(b, "master_evicted_size_bytes_mem", m->evicted_bytes);
	counter(b, "master_put_start_discard_cnt", m->put_discards);
	counter(b, "master_put_start_release_cnt", m->put_releases);
	metric(b, "master_put_start_discarded_staging_size", "gauge",
	       "Object bytes of discarded puts' buffers not yet released.", m->put_discard_bytes);
	/* Store-observed reads (GetReplicaList, single and per batch key): every replica
	 * is in memory here, so each read that found one is a memory hit. */
	counter(b, "total_get_nums_", m->gets);
	counter(b, "valid_get_nums_", m->gets_found);
	counter(b, "mem_cache_hit_nums_", m->gets_found);
	counter(b, "mem_cache_hit_bytes_total", m->gets_found_bytes);
	metric(b, "mem_cache_nums_", "gauge", "Objects with COMPLETE memory replicas.",
	       m->keys - m->processing_keys);
}

/* Tide's own quantities, under tide_ (no stock metric has them). */
static void
render_tide(struct tide_mc_server *s, struct tide_mc_buf *b, const struct tide_mc_table_metrics *m)
{
	static const enum tide_mc_table_op own[] = {
		TIDE_MC_TABLE_OP_GRACEFUL_UNMOUNT,     TIDE_MC_TABLE_OP_UPSERT_START,
		TIDE_MC_TABLE_OP_UPSERT_END,           TIDE_MC_TABLE_OP_UPSERT_REVOKE,
		TIDE_MC_TABLE_OP_BATCH_UPSERT_START,   TIDE_MC_TABLE_OP_BATCH_UPSERT_END,
		TIDE_MC_TABLE_OP_BATCH_UPSERT_REVOKE,  TIDE_MC_TABLE_OP_BATCH_REMOVE,
		TIDE_MC_TABLE_OP_QUERY_SEGMENT_STATUS, TIDE_MC_TABLE_OP_LEASE_GRANT,
		TIDE_MC_TABLE_OP_LEASE_COMMIT,         TIDE_MC_TABLE_OP_LEASE_RELEASE,
	};
	struct tide_mc_server_stats *st;
	const struct tide_mc_fn_info *fi;
	char name[96];
	uint64_t cum;
	unsigned f, k;
	size_t i;

	metric(b, "tide_master_processing_key_count", "gauge", "Objects still being written.",
	       m->processing_keys);
	metric(b, "tide_master_hard_pin_key_count", "gauge", "Hard-pinned objects.",
	       m->hard_pinned_keys);
	metric(b, "tide_master_value_size_bytes", "gauge", "Object bytes times replicas.",
	       m->value_bytes);
	metric(b, "tide_master_lease_count", "gauge",
	       "Allocation leases held by clients (Tide's one-round-trip puts).", m->leases);
	metric(b, "tide_master_leased_bytes", "gauge",
	       "Unused bytes of those leases (part of master_allocated_bytes).", m->leased_bytes);
	metric(b, "tide_master_discarded_bytes", "gauge",
	       "Bytes of buffers awaiting delayed release, leases' included (part of "
	       "master_allocated_bytes).",
	       m->discarded_bytes);
	metric(b, "tide_master_segment_count", "gauge", "Mounted segments.", m->segments);
	metric(b, "tide_master_discarded_buffers", "gauge",
	       "Buffers awaiting delayed release, leases' included.", m->discarded_buffers);
	metric(b, "tide_master_expired_clients_total", "counter",
	       "Clients expired for missing pings.", m->expired_clients);
	metric(b, "tide_master_reclaimed_puts_total", "counter", "Abandoned puts reclaimed.",
	       m->reclaimed_puts);
	metric(b, "tide_master_evict_skipped_unread_total", "counter",
	       "Unread objects kept by eviction (pin_unread).", m->evict_skipped_unread);
	metric(b, "tide_master_uptime_seconds", "gauge", "Seconds since start.",
	       (tide_mc_server_now_ms() - s->start_ms) / 1000u);
	/* Operations stock folds into another's counters, or has not: as Tide counts them
	 * (a batch's keys, as the _items_ counters do). */
	for (i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		const char *n = tide_mc_table_op_name(own[i]);

		snprintf(name, sizeof(name), "tide_master_%s_requests_total", n);
		counter(b, name, m->requests[own[i]]);
		snprintf(name, sizeof(name), "tide_master_%s_failures_total", n);
		counter(b, name, m->failures[own[i]]);
	}

	st = malloc(sizeof(*st));
	if (st == NULL) {
		return;
	}
	tide_mc_server_stats_get(s, st);
	metric(b, "tide_master_rpc_connections_accepted_total", "counter",
	       "RPC connections accepted.", st->accepted);
	metric(b, "tide_master_rpc_connections", "gauge", "RPC connections open.", st->open);
	buf_printf(b, "# HELP tide_master_http_connections HTTP connections open per port.\n"
		      "# TYPE tide_master_http_connections gauge\n");
	buf_printf(b, "tide_master_http_connections{port=\"admin\"} %" PRIu64 "\n",
		   st->http_open[0]);
	buf_printf(b, "tide_master_http_connections{port=\"metadata\"} %" PRIu64 "\n",
		   st->http_open[1]);
	metric(b, "tide_master_http_evicted_connections_total", "counter",
	       "HTTP connections closed at a port's cap for a new one.", st->http_evicted);
	metric(b, "tide_master_http_timed_out_connections_total", "counter",
	       "HTTP connections closed by a head, body or idle deadline.", st->http_timed_out);
	metric(b, "tide_master_refused_connections_total", "counter",
	       "Connections closed at accept on any port: peer outside --allow_networks.",
	       st->refused_net);
	metric(b, "tide_master_http_metadata_bytes", "gauge", "Metadata store keys + values.",
	       st->metadata_bytes);
	buf_printf(b, "# TYPE tide_master_rpc_refused_frames_total counter\n");
	buf_printf(b, "tide_master_rpc_refused_frames_total{reason=\"bad_header\"} %" PRIu64 "\n",
		   st->closed_proto);
	buf_printf(b, "tide_master_rpc_refused_frames_total{reason=\"too_large\"} %" PRIu64 "\n",
		   st->refused_large);
	buf_printf(b, "tide_master_rpc_refused_frames_total{reason=\"bad_body\"} %" PRIu64 "\n",
		   st->bad_body);
	buf_printf(b,
		   "tide_master_rpc_refused_frames_total{reason=\"not_registered\"} %" PRIu64 "\n",
		   st->unknown_fn);
	buf_printf(b, "# HELP tide_master_rpc_latency_microseconds Server time per RPC.\n"
		      "# TYPE tide_master_rpc_latency_microseconds histogram\n");
	for (f = 0; f < TIDE_MC_FN_CODEC_COUNT; f++) {
		fi = tide_mc_fn_info(f);
		if (fi == NULL) {
			continue;
		}
		cum = 0;
		for (k = 0; k < 12; k++) {
			cum += st->fn[f].lat_bucket[k];
			if (k < 11) {
				buf_printf(b,
					   "tide_master_rpc_latency_microseconds_bucket{rpc=\"%s\","
					   "le=\"%u\"} %" PRIu64 "\n",
					   fi->name, TIDE_MC_SERVER_LAT_BOUNDS_US[k], cum);
			} else {
				buf_printf(b,
					   "tide_master_rpc_latency_microseconds_bucket{rpc=\"%s\","
					   "le=\"+Inf\"} %" PRIu64 "\n",
					   fi->name, cum);
			}
		}
		buf_printf(b, "tide_master_rpc_latency_microseconds_sum{rpc=\"%s\"} %" PRIu64 "\n",
			   fi->name, st->fn[f].lat_sum_us);
		buf_printf(b,
			   "tide_master_rpc_latency_microseconds_count{rpc=\"%s\"} %" PRIu64 "\n",
			   fi->name, st->fn[f].calls);
	}
	buf_printf(b, "# TYPE tide_master_rpc_failures_total counter\n");
	for (f = 0; f < TIDE_MC_FN_CODEC_COUNT; f++) {
		fi = tide_mc_fn_info(f);
		if (fi != NULL) {
			buf_printf(b, "tide_master_rpc_failures_total{rpc=\"%s\"} %" PRIu64 "\n",
				   fi->name, st->fn[f].failures);
		}
	}
	free(st);
}

static void
render_metrics(struct tide_mc_server *s, struct tide_mc_buf *b)
{
	struct tide_mc_table_metrics m;

	tide_mc_table_metrics_get(s->table, &m);
	render_stock(s, b, &m);
	render_tide(s, b, &m);
}

static void
render_segments(struct tide_mc_server *s, struct tide_mc_buf *b)
{
	struct tide_mc_table_segment_info *v;
	size_t n, i;

	if (tide_mc_table_segments_list(s->table, &s->http_arena, &v, &n) != 0) {
		return;
	}
	for (i = 0; i < n; i++) {
		buf_printf(b, "%.*s\n", (int)v[i].name.len, v[i].name.ptr);
	}
}

/* Value of query parameter `name`, exactly as sent (not percent-decoded). */
static bool
query_value(const struct http_req *r, const char *name, const char **val, size_t *len)
{
	size_t nl = strlen(name), i = 0, j;

	while (i < r->query_len) {
		j = i;
		while (j < r->query_len && r->query[j] != '&') {
			j++;
		}
		if (j - i > nl && memcmp(r->query + i, name, nl) == 0 && r->query[i + nl] == '=') {
			*val = r->query + i + nl + 1;
			*len = j - i - nl - 1;
			return true;
		}
		i = j + 1;
	}
	return false;
}

static void
render_key(struct tide_mc_server *s, struct mc_http_conn *hc, const struct http_req *r)
{
	struct tide_mc_replica_list rl;
	struct tide_mc_buf b = {0};
	struct tide_mc_str key;
	const char *kp;
	size_t i;
	int rc;

	if (!query_value(r, "key", &kp, &key.len) || key.len == 0) {
		respond_text(hc, 400, "Missing key parameter");
		return;
	}
	key.ptr = (char *)kp;
	rc = tide_mc_table_query_key(s->table, &key, tide_mc_server_now_ms(), &s->http_arena, &rl);
	if (rc != 0) {
		buf_printf(&b, "key %.*s: error %d\n", (int)key.len, key.ptr, rc);
		respond(hc, 404, "text/plain", b.data, b.len);
		tide_mc_buf_release(&b);
		return;
	}
	for (i = 0; i < rl.replicas.n; i++) {
		const struct tide_mc_replica_desc *d = &rl.replicas.v[i];

		if (d->kind == TIDE_MC_RK_MEMORY) {
			buf_printf(&b,
				   "replica %" PRIu64 " memory %.*s 0x%" PRIx64 " size %" PRIu64
				   " status %d\n",
				   d->id, (int)d->u.memory.transport_endpoint.len,
				   d->u.memory.transport_endpoint.ptr, d->u.memory.buffer_address,
				   d->u.memory.size, d->status);
		} else {
			buf_printf(&b, "replica %" PRIu64 " kind %u status %d\n", d->id, d->kind,
				   d->status);
		}
	}
	respond(hc, 200, "text/plain", b.data, b.len);
	tide_mc_buf_release(&b);
}

/*
 * /health, /role, /ha_status, /leader: stock's answers (mooncake-ha-etcd.md
 * 1.4). Without HA, /health keeps answering "OK" and the others say what a
 * non-HA stock master says: leader, serving.
 */
static void
serve_ha(struct tide_mc_server *s, struct mc_http_conn *hc, const char *path, struct tide_mc_buf *b)
{
	char role[16], state[24], leader[96];
	int64_t view;
	bool ha;

	pthread_mutex_lock(&s->ha_lock);
	ha = s->ha;
	snprintf(role, sizeof(role), "%s", ha ? s->ha_role : "leader");
	snprintf(state, sizeof(state), "%s", ha ? s->ha_state : "serving");
	snprintf(leader, sizeof(leader), "%s", ha ? s->ha_leader : "");
	view = ha ? s->ha_view : 0;
	pthread_mutex_unlock(&s->ha_lock);
	if (strcmp(path, "/role") == 0) {
		respond_text(hc, 200, role);
	} else if (strcmp(path, "/ha_status") == 0) {
		respond_text(hc, 200, state);
	} else if (strcmp(path, "/leader") == 0) {
		if (leader[0] != '\0') {
			buf_printf(b,
				   "{\"present\":true,\"leader_address\":\"%s\",\"view_version\":"
				   "%" PRId64 "}",
				   leader, view);
		} else {
			buf_printf(b, "{\"present\":false}");
		}
		respond(hc, 200, "application/json", b->data, b->len);
	} else if (!ha) {
		respond_text(hc, 200, "OK");
	} else {
		buf_printf(b,
			   "{\"status\":\"ok\",\"role\":\"%s\",\"ha_state\":\"%s\",\"service_"
			   "ready\":%s",
			   role, state, strcmp(state, "serving") == 0 ? "true" : "false");
		if (leader[0] != '\0') {
			buf_printf(b, ",\"leader_address\":\"%s\",\"view_version\":%" PRId64,
				   leader, view);
		}
		buf_printf(b, "}");
		respond(hc, 200, "application/json", b->data, b->len);
	}
}

static void
serve_admin(struct tide_mc_server *s, struct mc_http_conn *hc, const struct http_req *r)
{
	struct tide_mc_buf b = {0};

	if (strcmp(r->method, "GET") != 0) {
		respond_text(hc, 405, "method not allowed");
		return;
	}
	if (strcmp(r->path, "/health") == 0 || strcmp(r->path, "/role") == 0 ||
	    strcmp(r->path, "/ha_status") == 0 || strcmp(r->path, "/leader") == 0) {
		serve_ha(s, hc, r->path, &b);
	} else if (strcmp(r->path, "/metrics") == 0) {
		render_metrics(s, &b);
		respond(hc, 200, "text/plain; version=0.0.4", b.data, b.len);
	} else if (strcmp(r->path, "/get_all_segments") == 0) {
		render_segments(s, &b);
		respond(hc, 200, "text/plain", b.data, b.len);
	} else if (strcmp(r->path, "/query_key") == 0) {
		render_key(s, hc, r);
	} else {
		respond_text(hc, 404, "not found");
	}
	tide_mc_buf_release(&b);
	tide_mc_table_arena_reset(&s->http_arena);
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata server                                                                             */
/* ------------------------------------------------------------------------------------------ */

static unsigned
meta_bucket(const char *k, size_t n)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < n; i++) {
		h = (h ^ (uint8_t)k[i]) * 16777619u;
	}
	return h % MC_META_BUCKETS;
}

static struct mc_meta_ent **
meta_find(struct tide_mc_server *s, const char *k, size_t n)
{
	struct mc_meta_ent **pp = &s->meta[meta_bucket(k, n)];

	while (*pp != NULL && !((*pp)->key_len == n && memcmp((*pp)->key, k, n) == 0)) {
		pp = &(*pp)->next;
	}
	return pp;
}

static void
meta_free(struct mc_meta_ent *e)
{
	free(e->key);
	free(e->val);
	free(e);
}

void
mc_meta_clear(struct tide_mc_server *s)
{
	struct mc_meta_ent *e;
	unsigned i;

	for (i = 0; i < MC_META_BUCKETS; i++) {
		while ((e = s->meta[i]) != NULL) {
			s->meta[i] = e->next;
			meta_free(e);
		}
	}
	s->meta_n = 0;
	__atomic_store_n(&s->meta_bytes, 0, __ATOMIC_RELAXED);
}

static char *
memdup0(const char *p, size_t n)
{
	char *d = malloc(n + 1);

	if (d != NULL) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
}

static void
serve_meta(struct tide_mc_server *s, struct mc_http_conn *hc, const struct http_req *r)
{
	struct mc_meta_ent **pp, *e;
	const char *key;
	size_t klen;
	int64_t grow;
	char *v;

	if (strcmp(r->path, "/health") == 0 && strcmp(r->method, "GET") == 0) {
		respond_text(hc, 200, "OK");
		return;
	}
	if (strcmp(r->path, "/metadata") != 0) {
		respond_text(hc, 404, "not found");
		return;
	}
	if (!query_value(r, "key", &key, &klen) || klen == 0) {
		respond_text(hc, 400, "Missing key parameter");
		return;
	}
	pp = meta_find(s, key, klen);
	if (strcmp(r->method, "GET") == 0) {
		if (*pp == NULL) {
			respond_text(hc, 404, "metadata not found");
		} else {
			respond(hc, 200, "application/json", (*pp)->val, (*pp)->val_len);
		}
	} else if (strcmp(r->method, "PUT") == 0) {
		/* The stock server refuses to overwrite a handshake address with another one. */
		if (*pp != NULL && memmem(key, klen, "rpc_meta", 8) != NULL &&
		    !((*pp)->val_len == r->body_len &&
		      memcmp((*pp)->val, r->body, r->body_len) == 0)) {
			respond_text(hc, 400, "Duplicate rpc_meta key not allowed");
			return;
		}
		/* The store is bounded as a whole, not only per value. */
		grow = *pp != NULL ? (int64_t)r->body_len - (int64_t)(*pp)->val_len
				   : (int64_t)(klen + r->body_len);
		if (grow > 0 &&
		    s->meta_bytes + (uint64_t)grow >
			    opt_or(s->o.http_metadata_max_bytes, TIDE_MC_HTTP_METADATA_MAX_BYTES)) {
			TIDE_LOG_RATELIMIT(WARN, 10,
					   "metadata store full (%" PRIu64 " bytes); PUT refused",
					   s->meta_bytes);
			respond_text(hc, 507, "metadata store full");
			return;
		}
		v = memdup0(r->body, r->body_len);
		if (v == NULL) {
			respond_text(hc, 500, "out of memory");
			return;
		}
		if (*pp != NULL) {
			free((*pp)->val);
			(*pp)->val = v;
			(*pp)->val_len = r->body_len;
		} else {
			e = calloc(1, sizeof(*e));
			if (e == NULL || (e->key = memdup0(key, klen)) == NULL) {
				free(e);
				free(v);
				respond_text(hc, 500, "out of memory");
				return;
			}
			e->key_len = klen;
			e->val = v;
			e->val_len = r->body_len;
			*pp = e;
			s->meta_n++;
		}
		stat_add(&s->meta_bytes, grow);
		respond_text(hc, 200, "metadata updated");
	} else if (strcmp(r->method, "DELETE") == 0) {
		if (*pp == NULL) {
			respond_text(hc, 404, "metadata not found");
		} else {
			e = *pp;
			*pp = e->next;
			stat_add(&s->meta_bytes, -(int64_t)(e->key_len + e->val_len));
			meta_free(e);
			s->meta_n--;
			respond_text(hc, 200, "metadata deleted");
		}
	} else {
		respond_text(hc, 405, "method not allowed");
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Connections                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static void
http_close(struct tide_mc_server *s, struct mc_http_conn *hc)
{
	epoll_ctl(s->ctl_epfd, EPOLL_CTL_DEL, hc->fd, NULL);
	close(hc->fd);
	if (hc->prev != NULL) {
		hc->prev->next = hc->next;
	} else {
		s->http = hc->next;
	}
	if (hc->next != NULL) {
		hc->next->prev = hc->prev;
	}
	stat_add(&s->http_open[port_idx(hc->port)], -1);
	s->n_http--;
	/* Freed after the event batch: an accept's eviction or the tick may close a
	 * connection whose own event comes later in the same batch. */
	hc->closed = true;
	hc->next = s->http_dead;
	s->http_dead = hc;
}

void
mc_http_reap(struct tide_mc_server *s)
{
	struct mc_http_conn *hc;

	while ((hc = s->http_dead) != NULL) {
		s->http_dead = hc->next;
		free(hc->rbuf);
		tide_mc_buf_release(&hc->out);
		free(hc);
	}
}

void
mc_http_close_all(struct tide_mc_server *s)
{
	while (s->http != NULL) {
		http_close(s, s->http);
	}
	mc_http_reap(s);
}

/* Close the least recently active connection of port p (the oldest of equals). */
static void
evict_one(struct tide_mc_server *s, unsigned p, uint64_t now)
{
	struct mc_http_conn *hc, *victim = NULL;

	for (hc = s->http; hc != NULL; hc = hc->next) {
		if (port_idx(hc->port) == p && (victim == NULL || hc->t_last <= victim->t_last)) {
			victim = hc;
		}
	}
	if (victim == NULL) {
		return;
	}
	TIDE_LOG_RATELIMIT(WARN, 10,
			   "HTTP %s port: %" PRIu64 " connections open; closing the least recently "
			   "active one (quiet for %" PRIu64 " ms) for a new one",
			   port_name(p), max_conns(s, p), now - victim->t_last);
	http_close(s, victim);
	stat_add(&s->http_evicted, 1);
}

static int
listener_fd(const struct tide_mc_server *s, unsigned p)
{
	return p ? s->meta_lfd : s->metrics_lfd;
}

void
mc_http_accept(struct tide_mc_server *s, int lfd, enum mc_ctl_kind which)
{
	unsigned p = port_idx(which);
	uint64_t now = tide_mc_server_now_ms();
	struct epoll_event e;
	struct mc_http_conn *hc;
	int fd;

	/* A batch at a time: the listener is level-triggered, and the requests
	   already in get their turn between batches. */
	for (unsigned i = 0; i < MC_HTTP_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		/* Before the cap: a refused peer can never evict an allowed one. */
		if (fd >= 0 && !mc_peer_allowed(s, fd, &ss, sl, port_name(p))) {
			continue;
		}
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED) {
				continue;
			}
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Pause instead of spinning on a listener we cannot drain. */
				TIDE_LOG_RATELIMIT(WARN, 10,
						   "HTTP %s port: accept: %s; pausing it a tick",
						   port_name(p), strerror(errno));
				epoll_ctl(s->ctl_epfd, EPOLL_CTL_DEL, lfd, NULL);
				s->http_listen_paused[p] = true;
			}
			return;
		}
		if (s->http_open[p] >= max_conns(s, p)) {
			evict_one(s, p, now);
		}
		hc = calloc(1, sizeof(*hc));
		if (hc == NULL) {
			close(fd);
			continue;
		}
		hc->tag.kind = MC_CTL_HTTP;
		hc->fd = fd;
		hc->port = which;
		hc->t_accept = hc->t_last = now;
		e.events = EPOLLIN | EPOLLRDHUP;
		e.data.ptr = hc;
		if (epoll_ctl(s->ctl_epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
			close(fd);
			free(hc);
			continue;
		}
		hc->next = s->http;
		if (s->http != NULL) {
			s->http->prev = hc;
		}
		s->http = hc;
		s->n_http++;
		stat_add(&s->http_open[p], 1);
	}
}

/* Whether hc is past one of its deadlines at now. */
static bool
expired(const struct tide_mc_server *s, const struct mc_http_conn *hc, uint64_t now)
{
	if (now - hc->t_last >= opt_or(s->o.http_idle_timeout_ms, TIDE_MC_HTTP_IDLE_TIMEOUT_MS)) {
		return true;
	}
	if (hc->answered) {
		return false;
	}
	if (hc->t_head == 0) {
		return now - hc->t_accept >=
		       opt_or(s->o.http_header_timeout_ms, TIDE_MC_HTTP_HEADER_TIMEOUT_MS);
	}
	return now - hc->t_head >= opt_or(s->o.http_body_timeout_ms, TIDE_MC_HTTP_BODY_TIMEOUT_MS);
}

void
mc_http_tick(struct tide_mc_server *s, uint64_t now_ms)
{
	struct mc_http_conn *hc, *next;
	struct epoll_event e;
	unsigned p;

	for (hc = s->http; hc != NULL; hc = next) {
		next = hc->next;
		if (expired(s, hc, now_ms)) {
			/* Counted first: a peer that sees the close also sees the count. */
			stat_add(&s->http_timed_out, 1);
			http_close(s, hc);
		}
	}
	for (p = 0; p < 2; p++) {
		if (!s->http_listen_paused[p]) {
			continue;
		}
		e.events = EPOLLIN;
		e.data.ptr = p ? &s->t_meta : &s->t_metrics;
		if (epoll_ctl(s->ctl_epfd, EPOLL_CTL_ADD, listener_fd(s, p), &e) == 0) {
			s->http_listen_paused[p] = false;
		}
	}
}

/* Header value (trimmed) of `name` within head[0..len), or NULL. */
static const char *
header(const char *head, size_t len, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	const char *p = memchr(head, '\n', len), *end = head + len, *eol, *v;

	while (p != NULL && p + 1 < end) {
		p++;
		eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == NULL) {
			break;
		}
		if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			v = p + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t')) {
				v++;
			}
			*vlen = (size_t)(eol - v);
			while (*vlen > 0 && (v[*vlen - 1] == '\r' || v[*vlen - 1] == ' ')) {
				(*vlen)--;
			}
			return v;
		}
		p = eol;
	}
	return NULL;
}

/*
 * Try to parse a complete request from rbuf. 1 parsed (r filled), 0 need
 * more, or an HTTP status to answer with.
 */
static int
parse(struct mc_http_conn *hc, struct http_req *r, bool *want_continue, uint64_t body_max,
      uint64_t now)
{
	char *head_end, *sp1, *sp2, *q, *eol;
	size_t head_len, vlen;
	unsigned long long clen = 0;
	const char *v;

	head_end = memmem(hc->rbuf, hc->rlen, "\r\n\r\n", 4);
	if (head_end == NULL) {
		return hc->rlen > MC_HTTP_MAX_HEAD ? 413 : 0;
	}
	head_len = (size_t)(head_end - hc->rbuf) + 4;
	v = header(hc->rbuf, head_len, "Content-Length", &vlen);
	if (v != NULL) {
		char num[24];

		if (vlen == 0 || vlen >= sizeof(num)) {
			return 400;
		}
		memcpy(num, v, vlen);
		num[vlen] = '\0';
		if (strspn(num, "0123456789") != vlen) {
			return 400;
		}
		clen = strtoull(num, NULL, 10);
		if (clen > body_max) {
			return 413;
		}
	} else if (header(hc->rbuf, head_len, "Transfer-Encoding", &vlen) != NULL) {
		return 411;
	}
	if (hc->want == 0) {
		/* From here the body has its own deadline and reads stop at its end. */
		hc->want = head_len + (size_t)clen;
		hc->t_head = now;
	}
	if (hc->rlen < head_len + clen) {
		v = header(hc->rbuf, head_len, "Expect", &vlen);
		*want_continue = v != NULL && vlen == 12 && strncasecmp(v, "100-continue", 12) == 0;
		return 0;
	}

	/* Request line: METHOD SP target SP version. */
	eol = memchr(hc->rbuf, '\r', head_len);
	*eol = '\0';
	sp1 = strchr(hc->rbuf, ' ');
	if (sp1 == NULL || (size_t)(sp1 - hc->rbuf) >= sizeof(r->method)) {
		return 400;
	}
	sp2 = strchr(sp1 + 1, ' ');
	if (sp2 == NULL) {
		return 400;
	}
	memcpy(r->method, hc->rbuf, (size_t)(sp1 - hc->rbuf));
	r->method[sp1 - hc->rbuf] = '\0';
	*sp2 = '\0';
	r->path = sp1 + 1;
	q = strchr(sp1 + 1, '?');
	if (q != NULL) {
		*q = '\0';
		r->query = q + 1;
		r->query_len = strlen(q + 1);
	} else {
		r->query = "";
		r->query_len = 0;
	}
	r->path_len = strlen(r->path);
	r->body = hc->rbuf + head_len;
	r->body_len = (size_t)clen;
	return 1;
}

/*
 * Read what the socket has, up to the request's end (its head + body once
 * the head is known, else one byte past the head bound): the buffer never
 * grows past what the request announced. 0 (EAGAIN or all read), -errno,
 * -ECONNRESET at EOF.
 */
static int
http_read(struct mc_http_conn *hc, uint64_t now)
{
	size_t cap, room, target;
	ssize_t n;
	char *p;

	for (;;) {
		cap = hc->want ? hc->want : MC_HTTP_MAX_HEAD + 1;
		if (hc->rlen >= cap) {
			return 0;
		}
		if (hc->rcap < hc->rlen + 4096 + 1 && hc->rcap < cap + 1) {
			target = hc->rcap * 2 > hc->rlen + 4096 + 1 ? hc->rcap * 2
								    : hc->rlen + 4096 + 1;
			if (target > cap + 1) {
				target = cap + 1;
			}
			p = realloc(hc->rbuf, target);
			if (p == NULL) {
				return -ENOMEM;
			}
			hc->rbuf = p;
			hc->rcap = target;
		}
		room = hc->rcap - hc->rlen - 1;
		if (room > cap - hc->rlen) {
			room = cap - hc->rlen;
		}
		n = recv(hc->fd, hc->rbuf + hc->rlen, room, 0);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		}
		if (n == 0) {
			return -ECONNRESET;
		}
		hc->rlen += (size_t)n;
		hc->rbuf[hc->rlen] = '\0';
		hc->t_last = now;
	}
}

void
mc_http_event(struct tide_mc_server *s, struct mc_http_conn *hc, uint32_t events)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	uint64_t now = tide_mc_server_now_ms();
	struct epoll_event e;
	struct http_req r;
	bool want_continue = false;
	ssize_t n;
	int rc;

	if (hc->closed) {
		return;
	}
	if (!hc->answered && (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))) {
		rc = http_read(hc, now);
		memset(&r, 0, sizeof(r));
		if (hc->rlen > 0) {
			int st =
				parse(hc, &r, &want_continue, max_body(s, port_idx(hc->port)), now);

			if (st == 1) {
				if (hc->port == MC_CTL_META_LISTEN) {
					serve_meta(s, hc, &r);
				} else {
					serve_admin(s, hc, &r);
				}
			} else if (st > 1) {
				respond_text(hc, st, status_text(st));
			} else if (want_continue && !hc->continued) {
				hc->continued = true;
				(void)send(hc->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL);
			}
		}
		if (!hc->answered && rc != 0) {
			http_close(s, hc);
			return;
		}
		if (hc->answered) {
			e.events = EPOLLOUT;
			e.data.ptr = hc;
			if (epoll_ctl(s->ctl_epfd, EPOLL_CTL_MOD, hc->fd, &e) != 0) {
				http_close(s, hc);
				return;
			}
		}
	}
	if (hc->answered) {
		while (hc->woff < hc->out.len) {
			n = send(hc->fd, hc->out.data + hc->woff, hc->out.len - hc->woff,
				 MSG_NOSIGNAL);
			if (n < 0) {
				if (errno == EINTR) {
					continue;
				}
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					return;
				}
				break;
			}
			hc->woff += (size_t)n;
			hc->t_last = now;
		}
		http_close(s, hc);
	}
}
