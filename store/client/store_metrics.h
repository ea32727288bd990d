/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to store/client: the client's master-RPC metrics, under stock
 * Mooncake's names (its MasterClientMetric, client_metric.h):
 *
 *   mooncake_client_rpc_count{rpc_name}    counter: every master RPC this
 *       client started, answered or not (stock counts before it sends);
 *   mooncake_client_rpc_latency{rpc_name}  histogram in microseconds, stock's
 *       bucket bounds (kLatencyBucket): RPCs that got an answer, from asking
 *       the pool for a connection to the answer decoded.
 *
 * rpc_name is the master function's name (tide_mc_fn_info(): "PutStart",
 * "BatchGetReplicaList", ...; Tide's lease extension "TideLeaseGrant", ...).
 * and stock's TransferMetric (mooncake_transfer_read_bytes / _write_bytes
 * counters, mooncake_transfer_{batch_put,batch_get,get,put}_latency histograms
 * in microseconds, same buckets) for the in-process put and get paths.
 *
 * The storage is one struct store_metrics per master connection pool
 * (mc_pool.h): fixed arrays indexed by enum tide_mc_fn, relaxed atomics, so
 * recording an RPC is two clock reads and three atomic adds, no lock and no
 * allocation. MC_STORE_CLIENT_METRIC (read once at init, stock's parsing:
 * unset = on; 1/true/yes/on/enable = on; anything else = off) turns it off;
 * then nothing is counted and store_metrics_text() answers -EOPNOTSUPP.
 *
 * Thread: record and serialise from any thread at once; init before use.
 */
#ifndef TIDE_STORE_METRICS_H
#define TIDE_STORE_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide_clock.h"
#include "tide_mc_codec.h"

/* Stock's kLatencyBucket: 27 upper bounds in microseconds, 50 us to 20 s. */
#define STORE_METRICS_NBOUNDS 27

extern const uint32_t store_metrics_bounds_us[STORE_METRICS_NBOUNDS];

/* One histogram: n[i] counts values <= bounds[i] and > bounds[i-1]; n[NBOUNDS]
 * the values above every bound (+Inf). sum in microseconds. */
struct store_metrics_hist {
	atomic_uint_least64_t n[STORE_METRICS_NBOUNDS + 1];
	atomic_uint_least64_t sum;
};

/* Stock's TransferMetric latency histograms (mooncake_transfer_<kind>_latency). */
enum store_metrics_xfer {
	STORE_METRICS_XFER_BATCH_PUT,
	STORE_METRICS_XFER_BATCH_GET,
	STORE_METRICS_XFER_GET,
	STORE_METRICS_XFER_PUT,
	STORE_METRICS_XFER_COUNT
};

struct store_metrics {
	bool on; /* MC_STORE_CLIENT_METRIC at init */
	atomic_uint_least64_t rpc_count[TIDE_MC_FN_COUNT];
	struct store_metrics_hist rpc_latency[TIDE_MC_FN_COUNT];
	/* Stock's TransferMetric: bytes moved by this process's engine (replica
	 * transfers that completed; a put counts each replica written), and the time
	 * of a call's transfers in microseconds. */
	atomic_uint_least64_t read_bytes, write_bytes;
	struct store_metrics_hist xfer_latency[STORE_METRICS_XFER_COUNT];
};

/* Zero m and read MC_STORE_CLIENT_METRIC. Thread: the owner, before any use. */
void store_metrics_init(struct store_metrics *m);

/* Whether the value of MC_STORE_CLIENT_METRIC turns metrics on (NULL: unset, on). Thread: any. */
bool store_metrics_env_on(const char *v);

/* Index of the bucket of a value in microseconds (0..STORE_METRICS_NBOUNDS). Thread: any. */
size_t store_metrics_bucket(uint64_t us);

/* Stock's rpc_name of fn; "Unknown" for an id out of range. Thread: any. */
const char *store_metrics_rpc_name(enum tide_mc_fn fn);

/*
 * An RPC fn is about to be made: counted, and its start time returned for
 * store_metrics_rpc_end() (0 when m is NULL or off: nothing is recorded then).
 * Thread: any.
 */
static inline uint64_t
store_metrics_rpc_begin(struct store_metrics *m, enum tide_mc_fn fn)
{
	if (m == NULL || !m->on || (unsigned)fn >= TIDE_MC_FN_COUNT)
		return 0;
	atomic_fetch_add_explicit(&m->rpc_count[fn], 1, memory_order_relaxed);
	return tide_mono_ns();
}

/*
 * The RPC begun at t0 ended with rc (the master client's result: 0 answered,
 * whatever the business code; else the connection or the frame failed). Its
 * latency is observed only when answered, as stock's. Thread: any.
 */
void store_metrics_rpc_end(struct store_metrics *m, enum tide_mc_fn fn, uint64_t t0, int rc);

/* bytes were moved: read from replicas (write false) or written to them. m NULL: nothing.
 * Thread: any. */
static inline void
store_metrics_xfer_bytes(struct store_metrics *m, bool write, uint64_t bytes)
{
	if (m == NULL || !m->on || bytes == 0)
		return;
	atomic_fetch_add_explicit(write ? &m->write_bytes : &m->read_bytes, bytes,
				  memory_order_relaxed);
}

/* A call's transfers of kind took us microseconds. m NULL: nothing. Thread: any. */
void store_metrics_xfer_latency(struct store_metrics *m, enum store_metrics_xfer kind, uint64_t us);

/*
 * m as Prometheus text exposition (format 0.0.4), stock's layout: a metric
 * without samples is left out, HELP and TYPE lines before the samples, every
 * sample labelled client_mode (the given value), cluster_id when
 * MC_STORE_CLUSTER_ID is set, then rpc_name. m NULL: no samples ("").
 * The text and its NUL go to buf when len allows; *needed is their size.
 * Returns 0; -ENOBUFS buf too small (buf holds a truncated, NUL-terminated
 * prefix when len > 0); -EOPNOTSUPP metrics are off; -EINVAL needed NULL or
 * client_mode NULL. Thread: any (counters read one by one, relaxed).
 */
int store_metrics_text(const struct store_metrics *m, const char *client_mode, char *buf,
		       size_t len, size_t *needed);

#endif /* TIDE_STORE_METRICS_H */
