#!/usr/bin/python3
"""Tide's master /metrics against stock Mooncake's: names, types, labels and counts (issue 34).

Starts a real mooncake_master (MASTER_BIN), drives it over the stock protocol with a small
coro_rpc/struct_pack client written here (batch puts and gets with failing items, an upsert
that discards a put, an allocation failure that runs an eviction round), scrapes /metrics and
checks:
  - every exported metric is either in tests/python/data/stock_master_metrics.txt with the
    same type and label set, or named tide_*;
  - the counters moved by exactly what the calls should have done (stock's semantics: a
    batch counts calls, items, failed items, all-failed calls and partial successes);
  - docs/operations.md's metrics map lists every stock metric once, says "yes" exactly for
    the exported ones, and lists every tide_ metric exported.
Standard library only; run by meson as the 'master_metrics' test.
"""
import hashlib
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.request

from ut_common import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STOCK_LIST = os.path.join(HERE, "data", "stock_master_metrics.txt")
OPERATIONS_MD = os.path.join(REPO, "docs", "operations.md")

SEG_SIZE = 16 << 20
SMALL = 4096
CLIENT = (0x7469646574657374, 0x34)  # "tidetest", issue 34
SEGMENT = (0x7365676d656e74, 0x1)

# struct_pack type hashes of the argument tuples at Mooncake 3b5a5941 (spec 2.4; the C
# codec's tables, checked by mc_msgs_ut, hold the same values).
H_PING = 0x3c6d83e0
H_MOUNT = 0x9ef70dae
H_PUT_START = 0xe385bd0e  # PutStart and UpsertStart
H_PUT_END = 0xd1819222
H_BATCH_PUT_START = 0x5870c0a4
H_BATCH_PUT_END = 0xf57ea7c8
H_BATCH_PUT_REVOKE = 0x94ee5d44
H_KEYS_TENANT = 0x00f78d62  # BatchGetReplicaList and BatchExistKey
# BatchReplicaClear's tuple<vector<string>,UUID,string>: not in the spec's table; the C
# codec derives it from the literal fd 84 80 0c fd 04 04 89 89 ff 80 0c ff (mc_msgs_ut).
H_BATCH_REPLICA_CLEAR = 0x472b2fa2


def fn_id(name):
    """coro_rpc function id: first 4 bytes of MD5 of the qualified name, big-endian."""
    d = hashlib.md5(f"mooncake::WrappedMasterService::{name}".encode()).digest()
    return int.from_bytes(d[:4], "big")


# ------------------------------------------------------------------ struct_pack, width 1

def s_str(b):
    b = b.encode() if isinstance(b, str) else b
    assert len(b) < 256, "1-byte lengths only"
    return bytes([len(b)]) + b


def s_vec(items, enc):
    assert len(items) < 256
    return bytes([len(items)]) + b"".join(enc(x) for x in items)


def s_uuid(u):
    return struct.pack("<QQ", *u)


def s_u64(v):
    return struct.pack("<Q", v)


REPLICATE_CONFIG = (s_u64(1) + s_u64(0) + s_u64(0)  # replica_num, nof, dfs
                    + b"\0" + b"\0" + b"\0"         # soft_pin_action, soft_pin_ttl_ms, hard pin
                    + b"\0" + b"\0" + b"\0"         # preferred_segments, _segment, nof ones
                    + b"\0" + b"\0" + b"\0" + b"\0")  # same node, data_type, host_id, group_ids
TENANT = s_str("default")
MEMORY = struct.pack("<i", 0)  # ReplicaType::MEMORY


class Reader:
    """Decoder of a struct_pack result body (any length width the metainfo declares)."""

    def __init__(self, body):
        self.b, self.o = body, 4
        head = struct.unpack_from("<I", body)[0]
        self.w = 1
        if head & 1:
            m = body[4]
            self.o = 5
            if m & 3:
                self.o += 2 << ((m & 3) - 1)
            if m & 4:
                self.o = body.index(b"\0", self.o) + 1
            self.w = 1 << ((m >> 3) & 3)

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0]

    def length(self):
        v = int.from_bytes(self.b[self.o:self.o + self.w], "little")
        self.o += self.w
        return v

    def string(self):
        n = self.length()
        self.o += n
        return self.b[self.o - n:self.o]

    def descriptor(self):
        self.take("Q")
        kind = self.take("B")
        assert kind == 0, f"replica kind {kind}: only memory replicas expected"
        self.take("Q"), self.take("Q"), self.string(), self.string()
        self.take("i")

    def expected(self, value):
        """(True, value) or (False, error code)."""
        if self.take("B"):
            return True, value()
        return False, self.take("i")


def descriptors(r):
    return [r.descriptor() for _ in range(r.length())]


def replica_list(r):
    reps = descriptors(r)
    r.take("Q")
    if r.take("B"):
        r.take("Q")
    return reps


class Master:
    """mooncake_master on free ports, with one coro_rpc connection."""

    def __init__(self, binary, extra):
        self.rpc_port, self.http_port = free_port(), free_port()
        self.p = subprocess.Popen([binary, f"--rpc_port={self.rpc_port}",
                                   f"--metrics_port={self.http_port}", *extra],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.s = socket.create_connection(("127.0.0.1", self.rpc_port), 1)
                break
            except OSError:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(f"mooncake_master did not accept on {self.rpc_port}: "
                                     f"{self.p.stderr.read().decode(errors='replace')}")
                time.sleep(0.05)
        self.s.settimeout(10)
        self.seq = 0

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait(timeout=10)

    def call(self, fn, hash_, args):
        self.seq += 1
        body = struct.pack("<I", hash_) + args
        self.s.sendall(struct.pack("<BBBBIIII", 0x15, 0, 0, 0, self.seq, fn_id(fn), len(body), 0)
                       + body)
        hdr = self.recv(16)
        _magic, _ver, err, _mt, seq, length, attach = struct.unpack("<BBBBIII", hdr)
        out = self.recv(length + attach)
        if err or seq != self.seq:
            raise AssertionError(f"{fn}: coro_rpc error {err}, seq {seq}/{self.seq}: {out!r}")
        return Reader(out)

    def recv(self, n):
        b = b""
        while len(b) < n:
            chunk = self.s.recv(n - len(b))
            if not chunk:
                raise AssertionError("master closed the connection")
            b += chunk
        return b

    # --- the calls
    def mount(self):
        seg = (s_uuid(SEGMENT) + s_str("tide-metrics-test") + s_u64(0x7f0000000000)
               + s_u64(SEG_SIZE) + s_str("127.0.0.1:1") + s_str("tcp") + s_str(""))
        ok, err = self.call("MountSegment", H_MOUNT, seg + s_uuid(CLIENT)).expected(lambda: None)
        assert ok, f"MountSegment: {err}"

    def ping(self):
        self.call("Ping", H_PING, s_uuid(CLIENT))

    def put_start(self, key, size, upsert=False):
        r = self.call("UpsertStart" if upsert else "PutStart", H_PUT_START,
                      s_uuid(CLIENT) + s_str(key) + s_u64(size) + REPLICATE_CONFIG + TENANT)
        return r.expected(lambda: descriptors(r))[0]

    def put_end(self, key):
        r = self.call("PutEnd", H_PUT_END,
                      s_uuid(CLIENT) + s_str(key) + b"\0" + MEMORY + TENANT)
        return r.expected(lambda: None)[0]

    def batch_put_start(self, keys, size):
        r = self.call("BatchPutStart", H_BATCH_PUT_START,
                      s_uuid(CLIENT) + s_vec(keys, s_str) + s_vec([size] * len(keys), s_u64)
                      + REPLICATE_CONFIG + TENANT)
        return [r.expected(lambda: descriptors(r))[0] for _ in range(r.length())]

    def batch_put_end(self, keys):
        r = self.call("BatchPutEnd", H_BATCH_PUT_END,
                      s_uuid(CLIENT) + s_vec(keys, lambda k: s_str(k) + b"\0") + MEMORY + TENANT)
        return [r.expected(lambda: None)[0] for _ in range(r.length())]

    def batch_put_revoke(self, keys):
        r = self.call("BatchPutRevoke", H_BATCH_PUT_REVOKE,
                      s_uuid(CLIENT) + s_vec(keys, s_str) + MEMORY + TENANT)
        return [r.expected(lambda: None)[0] for _ in range(r.length())]

    def batch_get(self, keys):
        r = self.call("BatchGetReplicaList", H_KEYS_TENANT, s_vec(keys, s_str) + TENANT)
        return [r.expected(lambda: replica_list(r))[0] for _ in range(r.length())]

    def batch_exist(self, keys):
        r = self.call("BatchExistKey", H_KEYS_TENANT, s_vec(keys, s_str) + TENANT)
        return [r.expected(lambda: r.take("B"))[1] for _ in range(r.length())]

    def batch_replica_clear(self, keys, segment=""):
        r = self.call("BatchReplicaClear", H_BATCH_REPLICA_CLEAR,
                      s_vec(keys, s_str) + s_uuid(CLIENT) + s_str(segment))
        ok, v = r.expected(lambda: [r.string().decode() for _ in range(r.length())])
        assert ok, f"BatchReplicaClear: {v}"
        return v

    # --- /metrics
    def scrape(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=5) as f:
            return f.read().decode()


# ------------------------------------------------------------------ exposition parsing

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def parse(text):
    """({name: type}, [(sample name, {label: value}, value)]), failing on malformed lines."""
    types, samples = {}, []
    for ln in text.splitlines():
        if ln.startswith("# TYPE "):
            _, _, name, typ = ln.split(" ")
            assert name not in types, f"TYPE of {name} given twice"
            types[name] = typ
        elif ln.startswith("#") or not ln:
            continue
        else:
            m = SAMPLE.match(ln)
            assert m, f"malformed sample line: {ln!r}"
            labels = dict(LABEL.findall(m.group(2) or ""))
            samples.append((m.group(1), labels, float(m.group(3))))
    return types, samples


def family(name, types):
    """The metric a sample belongs to (a histogram's _bucket/_sum/_count are its own)."""
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[:-len(suffix)]) == "histogram":
            return name[:-len(suffix)]
    raise AssertionError(f"sample {name} has no # TYPE line")


def load_stock():
    stock = {}
    with open(STOCK_LIST) as f:
        for ln in f:
            if ln.startswith("#") or not ln.strip():
                continue
            name, typ, labels, _src = ln.split()
            stock[name] = (typ, frozenset() if labels == "-" else frozenset(labels.split(",")))
    return stock


def check_names(text, stock):
    """Every exported metric: stock's name with stock's type and labels, or tide_*."""
    types, samples = parse(text)
    for name, typ in types.items():
        if name.startswith("tide_"):
            continue
        assert name in stock, f"{name}: neither a stock metric nor tide_-prefixed"
        assert typ == stock[name][0], f"{name}: type {typ}, stock's is {stock[name][0]}"
    seen = set()
    for name, labels, _v in samples:
        fam = family(name, types)
        seen.add(fam)
        if fam.startswith("tide_"):
            continue
        keys = set(labels) - ({"le"} if name.endswith("_bucket") else set())
        assert keys == stock[fam][1], f"{name}: labels {sorted(keys)}, stock's {sorted(stock[fam][1])}"
    assert seen == set(types), f"TYPE without samples: {sorted(set(types) - seen)}"
    return types, samples


def values(samples):
    """{name or name{labels}: value}; unlabelled samples by bare name."""
    out = {}
    for name, labels, v in samples:
        key = name if not labels else name + "{" + ",".join(
            f'{k}="{labels[k]}"' for k in sorted(labels)) + "}"
        out[key] = v
    return out


def check_docs(types, stock):
    """docs/operations.md's map: one row per stock metric, "yes" iff exported; every tide_
    metric exported in the Tide-only table."""
    text = open(OPERATIONS_MD).read()
    start = text.index("<!-- metrics-map:start -->")
    end = text.index("<!-- metrics-map:end -->")
    rows = {}
    tide_rows = set()
    for ln in text[start:end].splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        if name.startswith("tide_"):
            tide_rows.add(name)
            continue
        assert name not in rows, f"operations.md lists {name} twice"
        rows[name] = cells[1]
    assert set(rows) == set(stock), (
        f"operations.md metrics map: missing {sorted(set(stock) - set(rows))}, "
        f"not stock's {sorted(set(rows) - set(stock))}")
    exported = {n for n in types if not n.startswith("tide_")}
    said_yes = {n for n, c in rows.items() if c.startswith("yes")}
    assert said_yes == exported, (
        f"operations.md says exported but is not: {sorted(said_yes - exported)}; "
        f"exported but not said: {sorted(exported - said_yes)}")
    tide = {n for n in types if n.startswith("tide_")}
    assert tide_rows == tide, (f"operations.md Tide-only table: missing {sorted(tide - tide_rows)}, "
                               f"not exported {sorted(tide_rows - tide)}")


def delta(a, b, name):
    return b.get(name, 0) - a.get(name, 0)


def wait_for(m, cond, what, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        v = values(parse(m.scrape())[1])
        if cond(v):
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        m.ping()
        time.sleep(0.1)


def main():
    binary = os.environ.get("MASTER_BIN") or os.path.join(REPO, "build", "tools", "master",
                                                           "mooncake_master")
    stock = load_stock()
    # Discard after 1 s, release 1 s later; reads lease objects for a minute so the eviction
    # round takes an unread one; eviction on.
    m = Master(binary, ["--put_start_discard_timeout_sec=1", "--put_start_release_timeout_sec=2",
                        "--default_kv_lease_ttl=60000", "--eviction_ratio=0.05",
                        "--client_ttl=60"])
    try:
        run(m, stock)
    finally:
        m.stop()
    print("master_metrics: ok")


def run(m, stock):
    m.mount()
    m.ping()
    v0 = values(check_names(m.scrape(), stock)[1])

    # Batches, stock's semantics: calls, items, failed items, all-failed calls, partials.
    assert m.batch_put_start(["k0", "k1", "k2", "k3"], SMALL) == [True] * 4
    assert m.batch_put_end(["k0", "k1", "k2"]) == [True] * 3
    assert m.batch_put_start(["k0", "k4", "k5"], SMALL) == [False, True, True]  # k0 exists
    assert m.batch_put_end(["k4", "nokey"]) == [True, False]
    assert m.batch_put_revoke(["k3", "k5"]) == [True, True]
    assert m.batch_put_revoke(["nokey"]) == [False]
    assert m.batch_get(["k0", "k1", "nokey"]) == [True, True, False]
    assert m.batch_get(["nokey1", "nokey2"]) == [False, False]
    assert m.batch_exist(["k0", "nokey"]) == [1, 0]
    assert m.batch_exist([]) == []  # stock counts an empty batch as a failed call
    v1 = values(check_names(m.scrape(), stock)[1])
    want = {
        "master_batch_put_start_requests_total": 2, "master_batch_put_start_items_total": 7,
        "master_batch_put_start_failed_items_total": 1,
        "master_batch_put_start_failures_total": 0,
        "master_batch_put_start_partial_successes_total": 1,
        "master_batch_put_end_requests_total": 2, "master_batch_put_end_items_total": 5,
        "master_batch_put_end_failed_items_total": 1, "master_batch_put_end_failures_total": 0,
        "master_batch_put_end_partial_successes_total": 1,
        "master_batch_put_revoke_requests_total": 2, "master_batch_put_revoke_items_total": 3,
        "master_batch_put_revoke_failed_items_total": 1,
        "master_batch_put_revoke_failures_total": 1,
        "master_batch_put_revoke_partial_successes_total": 0,
        "master_batch_get_replica_list_requests_total": 2,
        "master_batch_get_replica_list_items_total": 5,
        "master_batch_get_replica_list_failed_items_total": 3,
        "master_batch_get_replica_list_failures_total": 1,
        "master_batch_get_replica_list_partial_successes_total": 1,
        "master_batch_exist_key_requests_total": 2, "master_batch_exist_key_items_total": 2,
        "master_batch_exist_key_failed_items_total": 0,
        "master_batch_exist_key_failures_total": 1,
        "master_batch_exist_key_partial_successes_total": 0,
        "total_get_nums_": 5, "valid_get_nums_": 2, "mem_cache_hit_nums_": 2,
        "mem_cache_hit_bytes_total": 2 * SMALL,
        "master_put_start_requests_total": 0, "master_get_replica_list_requests_total": 0,
    }
    for name, d in want.items():
        assert delta(v0, v1, name) == d, f"{name}: moved by {delta(v0, v1, name)}, want {d}"
    assert v1["master_key_count"] == 4  # k0 k1 k2 k4
    assert v1['segment_total_capacity_bytes{segment="tide-metrics-test"}'] == SEG_SIZE
    assert v1['segment_allocated_bytes{segment="tide-metrics-test"}'] >= 4 * SMALL

    # An upsert preempting an unfinished put discards its buffer, released 2 s later.
    assert m.put_start("u", SMALL) is True
    assert m.put_start("u", 2 * SMALL, upsert=True) is True
    assert m.put_end("u") is True
    v2 = values(check_names(m.scrape(), stock)[1])
    assert delta(v1, v2, "master_put_start_discard_cnt") == 1
    assert delta(v1, v2, "master_put_start_release_cnt") == 0
    assert v2["master_put_start_discarded_staging_size"] == SMALL
    assert delta(v1, v2, "master_put_start_requests_total") == 2  # stock counts the upsert too
    assert delta(v1, v2, "tide_master_upsert_start_requests_total") == 1
    assert delta(v1, v2, "master_put_end_requests_total") == 1
    v3 = wait_for(m, lambda v: v.get("master_put_start_release_cnt", 0) > v2.get(
        "master_put_start_release_cnt", 0), "the discarded buffer's release")
    assert delta(v2, v3, "master_put_start_release_cnt") == 1
    assert v3["master_put_start_discarded_staging_size"] == 0

    # A put that does not fit fails allocation and runs an eviction round.
    assert m.put_start("big0", 12 << 20) is True and m.put_end("big0") is True
    assert m.put_start("big1", 8 << 20) is False
    v4 = wait_for(m, lambda v: v.get("master_attempted_evictions_total", 0) >
                  v3.get("master_attempted_evictions_total", 0), "an eviction round")
    assert delta(v3, v4, "master_put_start_alloc_failures_total") == 1
    assert delta(v3, v4, "master_put_start_failures_total") == 1
    assert delta(v3, v4, "master_attempted_evictions_total") == 1
    assert delta(v3, v4, "master_successful_evictions_total") == 1
    assert delta(v3, v4, "master_attempted_evictions_mem") == 1
    evicted = delta(v3, v4, "master_evicted_key_count")
    assert evicted >= 1 and delta(v3, v4, "master_evicted_key_count_mem") == evicted
    sizes = {"k0": SMALL, "k1": SMALL, "k2": SMALL, "k4": SMALL, "u": 2 * SMALL, "big0": 12 << 20}
    keys = list(sizes)
    gone = [k for k, e in zip(keys, m.batch_exist(keys)) if not e]
    assert len(gone) == evicted, f"{evicted} evicted by the counters, gone: {gone}"
    assert not {"k0", "k1"} & set(gone), "a read object (lease 60 s) was evicted"
    assert delta(v3, v4, "master_evicted_size_bytes") == sum(sizes[k] for k in gone)

    # Objects created: k0..k5, u twice, big0 (big1 got no space).
    assert delta(v0, v4, "master_value_size_bytes_count") == 9
    assert delta(v0, v4, 'master_value_size_bytes_bucket{le="4096"}') == 7
    assert delta(v0, v4, 'master_value_size_bytes_bucket{le="65536"}') == 8
    assert delta(v0, v4, 'master_value_size_bytes_bucket{le="16777216"}') == 9
    assert delta(v0, v4, "master_value_size_bytes_sum") == 7 * SMALL + 2 * SMALL + (12 << 20)

    # BatchReplicaClear, stock's wire and counters: k0 is leased (read above), c1 gone by
    # the third call; an empty batch is a failed call.
    for k in ("c0", "c1"):
        assert m.put_start(k, SMALL) is True and m.put_end(k) is True
    assert m.batch_replica_clear(["c0", "k0", "nokey"]) == ["c0"]
    assert m.batch_replica_clear(["c1"], "tide-metrics-test") == ["c1"]
    assert m.batch_replica_clear(["c1"]) == []
    assert m.batch_replica_clear([]) == []
    assert m.batch_exist(["c0", "c1", "k0"]) == [0, 0, 1]
    v5 = values(check_names(m.scrape(), stock)[1])
    for name, d in {"requests": 4, "items": 5, "failed_items": 3, "failures": 2,
                    "partial_successes": 1}.items():
        name = f"master_batch_replica_clear_{name}_total"
        assert delta(v4, v5, name) == d, f"{name}: moved by {delta(v4, v5, name)}, want {d}"

    types, _ = check_names(m.scrape(), stock)
    check_docs(types, stock)
    shared = sum(1 for n in types if not n.startswith("tide_"))
    print(f"master_metrics: {shared} stock metric names exported, "
          f"{len(types) - shared} tide_ ones, of {len(stock)} in stock's list")


if __name__ == "__main__":
    sys.exit(main())
