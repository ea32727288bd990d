/* SPDX-License-Identifier: Apache-2.0 */
/**
 * \file
 * The replicated object table of HA masters: the leader's table journal
 * (tide_mc_table.h) kept in etcd, so the next leader rebuilds the table
 * before it serves and no acknowledged change is lost on a failover.
 *
 * Keys, under `tide-store/<cluster>/` (Tide's own prefix: a stock master
 * reads none of it, and Mooncake's `mooncake-store/...` keys are left alone):
 *  - `log/<first seq, 20 digits>`: a batch of consecutive records, written
 *    by one transaction (group commit). Value: "TJL1", u64 first seq,
 *    u32 count, then count x (u32 length, record). Little-endian.
 *  - `snap/<seq, 20 digits>-<view, 20 digits>/<chunk, 6 digits>`: the table
 *    as of record <seq>, written by the leader of <view>, in chunks of up to
 *    TIDE_MASTER_LOG_VALUE_MAX bytes: "TJS1", u32 count, then count x (u32
 *    length, record).
 *  - `snap_head`: "TJH1", u64 seq, u32 chunks, i64 view: the snapshot to
 *    start from.
 * Every write is a transaction that holds only while the writer's
 * master_view key still has the create_revision it won with (its view): a
 * leader that lost its lease, however late it wakes, writes nothing.
 *
 * Guarantees (with tide_mc_server_hold_replies): a reply is sent only after
 * every journal record made before it is in etcd, so any change a client
 * was told of (and anything a reply let it see) survives a failover; a put
 * not yet ended is not journaled and fails at the new leader (PutEnd:
 * OBJECT_NOT_FOUND). Cost: one etcd transaction per batch of records; a
 * batch takes what arrived while the previous one was in flight.
 */
#ifndef TIDE_MASTER_LOG_H
#define TIDE_MASTER_LOG_H

#include <stdint.h>

#include "tide_mc_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest etcd value written (etcd's default request limit is 1.5 MiB). */
#define TIDE_MASTER_LOG_VALUE_MAX (1u << 20)
/** Records between snapshots when the options say 0. */
#define TIDE_MASTER_LOG_SNAPSHOT_RECORDS 100000u

struct tide_master_log_opts {
	const char *endpoints;     /**< etcd endpoint list */
	const char *cluster_id;    /**< NULL/"": "mooncake_cluster" */
	const char *fence_key;     /**< the master_view key this leader holds */
	int64_t fence_rev;         /**< its create_revision (the view version) */
	uint64_t snapshot_records; /**< records between snapshots; 0: the default */
	/** Every record up to seq is in etcd. Writer thread. */
	void (*durable)(void *arg, uint64_t seq);
	/** The log cannot go on (fenced: another leader; or a record lost to
	 *  memory): stop serving. Writer thread, or the thread of the table
	 *  call that lost a record; called once. */
	void (*failed)(void *arg, int err);
	void *arg;
};

struct tide_master_log;

/**
 * Rebuild an empty table from etcd: the newest snapshot, then the log
 * records after it. A record that does not apply, or a gap in the numbers,
 * ends the replay there (logged at ERR with what was kept and skipped); the
 * log is then rewritten as a snapshot once the writer starts.
 * \param[out] last_seq  number of the last record in etcd (the journal goes
 *                       on from there).
 * \param[out] damaged   set when the replay ended early.
 * \return 0; -ESTALE the fence no longer holds; etcd's errors (tide_etcd.h).
 * Thread: the caller's; the table must not be in use yet.
 */
int tide_master_log_replay(const struct tide_master_log_opts *o, struct tide_mc_table *t,
			   uint64_t *last_seq, bool *damaged);

/**
 * Journal the table into etcd from now on: sets the table's journal
 * (numbered after last_seq) and starts the writer thread. With
 * snapshot_now (after a damaged replay) a snapshot is written first.
 * \return 0; -ENOMEM; -EAGAIN no thread; etcd open errors.
 * Thread: any. Ownership: stop with tide_master_log_stop().
 */
int tide_master_log_start(const struct tide_master_log_opts *o, struct tide_mc_table *t,
			  uint64_t last_seq, bool snapshot_now, struct tide_master_log **out);

/**
 * Stop journaling (the table's journal is unset), stop the writer (records
 * not yet written are dropped: their replies were never sent) and free the
 * log. NULL-safe. Thread: not the writer; no callback runs after it returns.
 */
void tide_master_log_stop(struct tide_master_log *l);

/** Counters for logs and tests. */
struct tide_master_log_stats {
	uint64_t records;   /**< records written */
	uint64_t batches;   /**< transactions written */
	uint64_t snapshots; /**< snapshots written */
	uint64_t durable;   /**< last record number in etcd */
};

/** Read the counters. Thread: any. */
void tide_master_log_stats_get(struct tide_master_log *l, struct tide_master_log_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_MASTER_LOG_H */
