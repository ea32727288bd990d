/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store_metrics.h"

/* Stock's kLatencyBucket (client_metric.h), microseconds: fine below 1 ms for RDMA round
 * trips, then a millisecond tail and long-tail safeguards up to 20 s. */
const uint32_t store_metrics_bounds_us[STORE_METRICS_NBOUNDS] = {
	50,    75,     125,    150,    200,     250,     300,     400,      500,
	750,   1000,   1500,   2000,   3000,    5000,    7000,    15000,    20000,
	50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000, 20000000,
};

bool
store_metrics_env_on(const char *v)
{
	size_t n;

	if (v == NULL)
		return true;
	/* Stock's TryParseBool: ASCII whitespace trimmed, case-insensitive words; a value it
	 * cannot parse turns metrics off. */
	while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r' || *v == '\f' || *v == '\v')
		v++;
	n = strlen(v);
	while (n > 0 && strchr(" \t\n\r\f\v", v[n - 1]) != NULL)
		n--;
	return (n == 1 && v[0] == '1') || (n == 4 && strncasecmp(v, "true", 4) == 0) ||
	       (n == 3 && strncasecmp(v, "yes", 3) == 0) ||
	       (n == 2 && strncasecmp(v, "on", 2) == 0) ||
	       (n == 6 && strncasecmp(v, "enable", 6) == 0);
}

void
store_metrics_init(struct store_metrics *m)
{
	memset(m, 0, sizeof(*m));
	m->on = store_metrics_env_on(getenv("MC_STORE_CLIENT_METRIC"));
}

size_t
store_metrics_bucket(uint64_t us)
{
	size_t lo = 0, hi = STORE_METRICS_NBOUNDS;

	/* The first bound >= us (a value equal to a bound is counted in it, Prometheus' le);
	 * binary search over 27 bounds: five comparisons. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (store_metrics_bounds_us[mid] < us)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const char *
store_metrics_rpc_name(enum tide_mc_fn fn)
{
	const struct tide_mc_fn_info *fi = tide_mc_fn_info(fn);

	return fi != NULL && fi->name != NULL ? fi->name : "Unknown";
}

void
store_metrics_rpc_end(struct store_metrics *m, enum tide_mc_fn fn, uint64_t t0, int rc)
{
	struct store_metrics_hist *h;
	uint64_t us;

	if (m == NULL || !m->on || rc != 0 || (unsigned)fn >= TIDE_MC_FN_COUNT)
		return;
	us = (tide_mono_ns() - t0) / 1000u;
	h = &m->rpc_latency[fn];
	atomic_fetch_add_explicit(&h->n[store_metrics_bucket(us)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, us, memory_order_relaxed);
}

void
store_metrics_xfer_latency(struct store_metrics *m, enum store_metrics_xfer kind, uint64_t us)
{
	struct store_metrics_hist *h;

	if (m == NULL || !m->on || (unsigned)kind >= STORE_METRICS_XFER_COUNT)
		return;
	h = &m->xfer_latency[kind];
	atomic_fetch_add_explicit(&h->n[store_metrics_bucket(us)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, us, memory_order_relaxed);
}

/* ------------------------------------------------------------------------------- the text */

/* Text being written into buf[0..len): off counts every byte asked for, written or not. */
struct text {
	char *buf;
	size_t len;
	size_t off;
};

static void __attribute__((format(printf, 2, 3))) put(struct text *t, const char *fmt, ...)
{
	size_t room = t->off < t->len ? t->len - t->off : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room > 0 ? t->buf + t->off : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->off += (size_t)n;
}

/* A label value with Prometheus' escapes (backslash, double quote, newline). */
static void
put_value(struct text *t, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\')
			put(t, "\\\\");
		else if (*v == '"')
			put(t, "\\\"");
		else if (*v == '\n')
			put(t, "\\n");
		else
			put(t, "%c", *v);
	}
}

/* The labels every sample of fn carries, without braces: stock's static labels in its
 * order (client_mode, cluster_id), then rpc_name. */
static void
put_labels(struct text *t, const char *mode, const char *cluster, enum tide_mc_fn fn)
{
	put(t, "client_mode=\"");
	put_value(t, mode);
	if (cluster != NULL && cluster[0] != '\0') {
		put(t, "\",cluster_id=\"");
		put_value(t, cluster);
	}
	put(t, "\",rpc_name=\"");
	put_value(t, store_metrics_rpc_name(fn));
	put(t, "\"");
}

/* Stock's static labels alone (client_mode, then cluster_id when set), without braces. */
static void
put_static_labels(struct text *t, const char *mode, const char *cluster)
{
	put(t, "client_mode=\"");
	put_value(t, mode);
	if (cluster != NULL && cluster[0] != '\0') {
		put(t, "\",cluster_id=\"");
		put_value(t, cluster);
	}
	put(t, "\"");
}

/* One histogram in stock's layout; nothing when it has no observation. */
static void
hist_text(struct text *t, const struct store_metrics_hist *h, const char *name, const char *help,
	  const char *mode, const char *cluster)
{
	uint64_t n[STORE_METRICS_NBOUNDS + 1], total = 0, cum = 0;

	for (size_t i = 0; i <= STORE_METRICS_NBOUNDS; i++) {
		n[i] = atomic_load_explicit(&h->n[i], memory_order_relaxed);
		total += n[i];
	}
	if (total == 0)
		return;
	put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t i = 0; i <= STORE_METRICS_NBOUNDS; i++) {
		cum += n[i];
		put(t, "%s_bucket{", name);
		put_static_labels(t, mode, cluster);
		if (i < STORE_METRICS_NBOUNDS)
			put(t, ",le=\"%" PRIu32 ".000000\"} %" PRIu64 "\n",
			    store_metrics_bounds_us[i], cum);
		else
			put(t, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
	}
	put(t, "%s_sum{", name);
	put_static_labels(t, mode, cluster);
	put(t, "} %" PRIu64 "\n", (uint64_t)atomic_load_explicit(&h->sum, memory_order_relaxed));
	put(t, "%s_count{", name);
	put_static_labels(t, mode, cluster);
	put(t, "} %" PRIu64 "\n", total);
}

/* Stock's TransferMetric, in its serialisation order (before the RPC metrics). */
static void
transfer_text(struct text *t, const struct store_metrics *m, const char *mode, const char *cluster)
{
	static const struct {
		const char *name, *help;
	} ctr[2] = {{"mooncake_transfer_read_bytes", "Total bytes read"},
		    {"mooncake_transfer_write_bytes", "Total bytes written"}},
	  hist[STORE_METRICS_XFER_COUNT] = {
		  [STORE_METRICS_XFER_BATCH_PUT] = {"mooncake_transfer_batch_put_latency",
						    "Batch Put transfer latency (us)"},
		  [STORE_METRICS_XFER_BATCH_GET] = {"mooncake_transfer_batch_get_latency",
						    "Batch Get transfer latency (us)"},
		  [STORE_METRICS_XFER_GET] = {"mooncake_transfer_get_latency",
					      "Get transfer latency (us)"},
		  [STORE_METRICS_XFER_PUT] = {"mooncake_transfer_put_latency",
					      "Put transfer latency (us)"},
	  };

	for (int k = 0; k < 2; k++) {
		uint64_t v = atomic_load_explicit(k ? &m->write_bytes : &m->read_bytes,
						  memory_order_relaxed);

		if (v == 0)
			continue;
		put(t, "# HELP %s %s\n# TYPE %s counter\n%s{", ctr[k].name, ctr[k].help,
		    ctr[k].name, ctr[k].name);
		put_static_labels(t, mode, cluster);
		put(t, "} %" PRIu64 "\n", v);
	}
	for (int k = 0; k < STORE_METRICS_XFER_COUNT; k++)
		hist_text(t, &m->xfer_latency[k], hist[k].name, hist[k].help, mode, cluster);
}

static void
rpc_count_text(struct text *t, const struct store_metrics *m, const char *mode, const char *cluster)
{
	bool head = false;

	for (unsigned f = 0; f < TIDE_MC_FN_COUNT; f++) {
		uint64_t v = atomic_load_explicit(&m->rpc_count[f], memory_order_relaxed);

		if (v == 0)
			continue;
		if (!head) {
			put(t, "# HELP mooncake_client_rpc_count Total number of RPC calls made by "
			       "the "
			       "client\n# TYPE mooncake_client_rpc_count counter\n");
			head = true;
		}
		put(t, "mooncake_client_rpc_count{");
		put_labels(t, mode, cluster, (enum tide_mc_fn)f);
		put(t, "} %" PRIu64 "\n", v);
	}
}

static void
rpc_latency_text(struct text *t, const struct store_metrics *m, const char *mode,
		 const char *cluster)
{
	bool head = false;

	for (unsigned f = 0; f < TIDE_MC_FN_COUNT; f++) {
		const struct store_metrics_hist *h = &m->rpc_latency[f];
		uint64_t n[STORE_METRICS_NBOUNDS + 1], total = 0, cum = 0;

		/* One snapshot of the buckets, so the cumulative counts never go down. */
		for (size_t i = 0; i <= STORE_METRICS_NBOUNDS; i++) {
			n[i] = atomic_load_explicit(&h->n[i], memory_order_relaxed);
			total += n[i];
		}
		if (total == 0)
			continue;
		if (!head) {
			put(t,
			    "# HELP mooncake_client_rpc_latency Latency of RPC calls made by the "
			    "client (in us)\n# TYPE mooncake_client_rpc_latency histogram\n");
			head = true;
		}
		for (size_t i = 0; i <= STORE_METRICS_NBOUNDS; i++) {
			cum += n[i];
			put(t, "mooncake_client_rpc_latency_bucket{");
			put_labels(t, mode, cluster, (enum tide_mc_fn)f);
			/* le as stock writes it (std::to_string of a double: six decimals). */
			if (i < STORE_METRICS_NBOUNDS)
				put(t, ",le=\"%" PRIu32 ".000000\"} %" PRIu64 "\n",
				    store_metrics_bounds_us[i], cum);
			else
				put(t, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
		}
		put(t, "mooncake_client_rpc_latency_sum{");
		put_labels(t, mode, cluster, (enum tide_mc_fn)f);
		put(t, "} %" PRIu64 "\n",
		    (uint64_t)atomic_load_explicit(&h->sum, memory_order_relaxed));
		put(t, "mooncake_client_rpc_latency_count{");
		put_labels(t, mode, cluster, (enum tide_mc_fn)f);
		put(t, "} %" PRIu64 "\n", total);
	}
}

int
store_metrics_text(const struct store_metrics *m, const char *client_mode, char *buf, size_t len,
		   size_t *needed)
{
	struct text t = {.buf = buf, .len = buf != NULL ? len : 0};
	const char *cluster = getenv("MC_STORE_CLUSTER_ID");

	if (needed == NULL || client_mode == NULL)
		return -EINVAL;
	*needed = 0;
	if (m != NULL && !m->on)
		return -EOPNOTSUPP;
	if (t.len > 0)
		t.buf[0] = '\0';
	if (m != NULL) {
		transfer_text(&t, m, client_mode, cluster);
		rpc_count_text(&t, m, client_mode, cluster);
		rpc_latency_text(&t, m, client_mode, cluster);
	}
	*needed = t.off + 1;
	return t.off < t.len ? 0 : -ENOBUFS;
}
