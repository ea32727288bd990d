"""The store client's metrics and stock's opt-in client HTTP server (issue 34).

A real mooncake_master and two stores in this process (test_store.py's fixtures), one
with enable_client_http_server: puts and gets, then GET /metrics, /metrics/summary and
/health over HTTP, checking stock's names, types, help texts, labels and bucket bounds,
counters that moved by exactly the RPCs the calls make, and the port released by close().
The stock facts are checked against stock's source when a clone of it is at hand
(STOCK_GIT_DIR, default /work/.mirror/kvcache-ai+Mooncake/repo), else the copies below.
Run by meson's python_store test (the whole directory).
"""
import ctypes
import json
import os
import re
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

import test_store as ts  # noqa: E402 (its environment set-up runs first)
from mooncake import _client_http  # noqa: E402
from ut_common import free_port  # noqa: E402

# Stock at 3b5a5941 (mooncake-store/include/client_metric.h, MasterClientMetric): name,
# Prometheus type, label, help text; and kLatencyBucket.
STOCK_COMMIT = "3b5a594133958449a1feaf1c9e0fc1b553e34a28"
STOCK_RPC_METRICS = {
    "mooncake_client_rpc_count": ("counter", "rpc_name",
                                  "Total number of RPC calls made by the client"),
    "mooncake_client_rpc_latency": ("histogram", "rpc_name",
                                    "Latency of RPC calls made by the client (in us)"),
}
# Stock's TransferMetric (same file): name, type, help; labels are the static ones only.
STOCK_TRANSFER_METRICS = {
    "mooncake_transfer_read_bytes": ("counter", "Total bytes read"),
    "mooncake_transfer_write_bytes": ("counter", "Total bytes written"),
    "mooncake_transfer_batch_put_latency": ("histogram", "Batch Put transfer latency (us)"),
    "mooncake_transfer_batch_get_latency": ("histogram", "Batch Get transfer latency (us)"),
    "mooncake_transfer_get_latency": ("histogram", "Get transfer latency (us)"),
    "mooncake_transfer_put_latency": ("histogram", "Put transfer latency (us)"),
}
STOCK_BOUNDS = (50, 75, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000,
                7000, 15000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000,
                10000000, 20000000)
STOCK_GIT = os.environ.get("STOCK_GIT_DIR", "/work/.mirror/kvcache-ai+Mooncake/repo")
BIG = 2 << 20  # above the lease's largest object: PutStart + PutEnd, one each


def http_get(port, path):
    """(status, content type, body) of GET path."""
    try:
        r = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
        return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def parse(text):
    """({name: type}, {name: help}, [(sample name, {label: value}, value)])."""
    types, helps, samples = {}, {}, []
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)$", line)
        if m:
            types[m.group(1)] = m.group(2)
            continue
        m = re.match(r"# HELP (\S+) (.*)$", line)
        if m:
            helps[m.group(1)] = m.group(2)
            continue
        m = re.match(r"(\w+)\{(.*)\} (\S+)$", line)
        assert m, f"not a labelled sample: {line!r}"
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        samples.append((m.group(1), labels, float(m.group(3))))
    return types, helps, samples


def counts(samples):
    return {lb["rpc_name"]: v for n, lb, v in samples if n == "mooncake_client_rpc_count"}


def hist_counts(samples):
    return {lb["rpc_name"]: v for n, lb, v in samples
            if n == "mooncake_client_rpc_latency_count"}


def mk_http(master, port, **extra):
    s = ts.MooncakeDistributedStore()
    cfg = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
           "global_segment_size": ts.SEG, "local_buffer_size": ts.LBUF, "protocol": "tcp",
           "rdma_devices": "", "master_server_addr": master,
           "enable_client_http_server": True, "client_http_port": port}
    cfg.update(extra)
    return s, s.setup(cfg)


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
        return False
    except ConnectionRefusedError:
        return True


master = ts.master  # test_store.py's master, eviction off (module scope here too)


def transfer(samples):
    """{name: value} of the transfer metrics' unlabelled-by-rpc samples (counters, and
    histograms' _count and _sum)."""
    return {n: v for n, lb, v in samples if n.startswith("mooncake_transfer_") and
            not n.endswith("_bucket")}


def test_metrics_names_types_labels_and_counts(master):
    pa, pb = free_port(), free_port()
    a, rc = mk_http(master, pa)
    assert rc == 0
    b, rc = mk_http(master, pb, enable_client_http_server="on", client_http_port=str(pb))
    assert rc == 0
    try:
        status, ctype, text = http_get(pa, "/metrics")
        assert (status, ctype) == (200, "text/plain; version=0.0.4")
        base_a = counts(parse(text)[2])
        base_b = counts(parse(http_get(pb, "/metrics")[2])[2])

        value = ts.pattern(BIG, 34)
        assert a.put("cm-big-0", value) == 0
        assert a.put("cm-big-1", value) == 0
        for _ in range(3):
            assert b.get("cm-big-0") == value
        assert b.is_exist("cm-big-1") == 1
        assert b.is_exist("cm-missing") == 0
        assert b.batch_is_exist(["cm-big-0", "cm-missing"]) == [1, 0]
        b.remove("cm-missing")

        _types, _helps, sa = parse(http_get(pa, "/metrics")[2])
        types, helps, sb = parse(http_get(pb, "/metrics")[2])
        da = {k: v - base_a.get(k, 0) for k, v in counts(sa).items()}
        db = {k: v - base_b.get(k, 0) for k, v in counts(sb).items()}
        # Exactly the RPCs the calls make, each counted on the client that made it.
        assert da.get("PutStart") == 2 and da.get("PutEnd") == 2, da
        assert not da.get("GetReplicaList") and not da.get("ExistKey"), da
        assert db.get("GetReplicaList") == 3, db
        assert db.get("ExistKey") == 2 and db.get("BatchExistKey") == 1, db
        assert db.get("Remove") == 1, db
        assert not db.get("PutStart") and not db.get("PutEnd"), db
        # Answered RPCs all have a latency: the histogram counts them too.
        ha = hist_counts(sa)
        assert ha["PutStart"] == counts(sa)["PutStart"]
        assert hist_counts(sb)["GetReplicaList"] == counts(sb)["GetReplicaList"]

        # The set-up RPCs are counted as stock counts them: one ServiceReady, one
        # MountSegment per store (in the baseline already), and the heartbeat's Pings.
        assert counts(sa)["ServiceReady"] == 1 and counts(sa)["MountSegment"] == 1
        assert counts(sa).get("Ping", 0) >= 0
        # Transfer metrics: exact bytes (one replica each), one latency per call.
        ta, tb = transfer(sa), transfer(sb)
        assert ta["mooncake_transfer_write_bytes"] == 2 * BIG, ta
        assert "mooncake_transfer_read_bytes" not in ta, ta
        assert tb["mooncake_transfer_read_bytes"] == 3 * BIG, tb
        assert "mooncake_transfer_write_bytes" not in tb, tb
        assert ta["mooncake_transfer_put_latency_count"] == 2, ta
        assert tb["mooncake_transfer_get_latency_count"] == 3, tb
        assert "mooncake_transfer_batch_get_latency_count" not in tb, tb

        # Stock's names, types and help texts; nothing else exported.
        for name, (typ, _label, help_) in STOCK_RPC_METRICS.items():
            assert types[name] == typ and helps[name] == help_
        for name in set(types) - set(STOCK_RPC_METRICS):
            assert name in STOCK_TRANSFER_METRICS, name
            assert (types[name], helps[name]) == STOCK_TRANSFER_METRICS[name], name
        assert {"mooncake_transfer_read_bytes", "mooncake_transfer_get_latency"} <= set(types)
        # Labels: stock's static client_mode, then rpc_name (RPC metrics only); le on
        # buckets only.
        for name, labels, _v in sb:
            want = {"client_mode"} | ({"le"} if name.endswith("_bucket") else set())
            if name.startswith("mooncake_client_rpc_"):
                want.add("rpc_name")
            assert set(labels) == want, (name, labels)
            assert labels["client_mode"] == "real"
        les = [lb["le"] for n, lb, _v in sb
               if n == "mooncake_client_rpc_latency_bucket" and lb["rpc_name"] == "ExistKey"]
        assert les == [f"{b:.6f}" for b in STOCK_BOUNDS] + ["+Inf"]
        cum = [v for n, lb, v in sb
               if n == "mooncake_client_rpc_latency_bucket" and lb["rpc_name"] == "ExistKey"]
        assert cum == sorted(cum) and cum[-1] == hist_counts(sb)["ExistKey"]

        status, ctype, summary = http_get(pb, "/metrics/summary")
        assert status == 200 and ctype.startswith("text/plain")
        assert "=== RPC Metrics Summary ===" in summary
        assert re.search(r"^GetReplicaList: count=\d+, p95<\d+μs, max<\d+μs$", summary, re.M)
        status, ctype, body = http_get(pb, "/health")
        assert (status, ctype) == (200, "application/json")
        assert json.loads(body) == {"status": "healthy", "code": 0}
        assert http_get(pb, "/nothing")[0] == 404
    finally:
        b.close()
        a.close()
    # close() stopped the servers and released their ports: nothing answers, and the
    # ports can be bound again at once.
    for port in (pa, pb):
        assert refused(port)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.close()


def test_session_moves_are_counted(master):
    """The session calls' ranged moves are batch moves to stock's transfer metrics: their
    bytes in read/write_bytes (each replica written counts) and one batch latency per
    call, as every other call's moves are counted (in one place, store_xfer_run)."""
    pa, pb = free_port(), free_port()
    a, rc = mk_http(master, pa)
    assert rc == 0
    b, rc = mk_http(master, pb)
    assert rc == 0
    try:
        key = "cm-sess-" + os.urandom(4).hex()
        src = ctypes.create_string_buffer(ts.pattern(10_000, 7), 10_000)
        dst = ctypes.create_string_buffer(3000)
        sa, da = ctypes.addressof(src), ctypes.addressof(dst)
        ta0 = transfer(parse(http_get(pa, "/metrics")[2])[2])
        tb0 = transfer(parse(http_get(pb, "/metrics")[2])[2])
        assert a.batch_put_session_start([key], [10_000]) == [0]
        assert a.batch_put_from_multi_buffer_ranges(
            [key], [[sa + 4000, sa]], [[6000, 4000]], [[4000, 0]]) == [10_000]
        assert a.batch_put_session_end([key]) == [0]
        assert b.batch_get_session_start([key]) == [0]
        assert b.batch_get_into_multi_buffer_ranges(
            [key], [[da, da + 2000]], [[2000, 1000]], [[8000, 100]]) == [3000]
        assert b.batch_get_session_end([key]) == 0
        assert dst.raw[:2000] == src.raw[8000:10_000] and dst.raw[2000:] == src.raw[100:1100]
        ta = transfer(parse(http_get(pa, "/metrics")[2])[2])
        tb = transfer(parse(http_get(pb, "/metrics")[2])[2])

        def delta(now, then, name):
            return now.get(name, 0) - then.get(name, 0)
        assert delta(ta, ta0, "mooncake_transfer_write_bytes") == 10_000, ta
        assert delta(ta, ta0, "mooncake_transfer_batch_put_latency_count") == 1, ta
        assert delta(tb, tb0, "mooncake_transfer_read_bytes") == 3000, tb
        assert delta(tb, tb0, "mooncake_transfer_batch_get_latency_count") == 1, tb
        assert delta(tb, tb0, "mooncake_transfer_get_latency_count") == 0, tb
    finally:
        b.close()
        a.close()


def test_http_server_options(master):
    port = free_port()
    # Off by default and when asked off in stock's words: nothing listens.
    for extra in ({"enable_client_http_server": False}, {"enable_client_http_server": "no"},
                  {"enable_client_http_server": "0"}):
        s, rc = mk_http(master, port, **extra)
        assert rc == 0
        assert refused(port)
        s.close()
    s = ts.mk(master)
    assert refused(port)
    s.close()
    # A port that is no integer fails setup (enabled or not); out of range only enabled.
    for extra, want in (({"client_http_port": "abc"}, -600),
                        ({"client_http_port": "abc", "enable_client_http_server": False}, -600),
                        ({"client_http_port": 0}, -600),
                        ({"client_http_port": 70000}, -600),
                        ({"client_http_port": 70000, "enable_client_http_server": False}, 0)):
        s, rc = mk_http(master, port, **extra)
        assert rc == want, extra
        s.close()
    # A port taken: the store works without the server, as stock's.
    busy = socket.socket()
    busy.bind(("0.0.0.0", port))
    busy.listen(1)
    try:
        s, rc = mk_http(master, port)
        assert rc == 0
        assert s.health_check() == 0
        s.close()
    finally:
        busy.close()
    # Positional form with stock's keyword arguments.
    s = ts.MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", ts.SEG, ts.LBUF, "tcp", "", master,
                   enable_client_http_server=True, client_http_port=port) == 0
    try:
        assert http_get(port, "/health")[0] == 200
    finally:
        s.close()
    assert refused(port)


def test_metrics_turned_off(master, monkeypatch):
    port = free_port()
    monkeypatch.setenv("MC_STORE_CLIENT_METRIC", "0")
    s, rc = mk_http(master, port)
    monkeypatch.delenv("MC_STORE_CLIENT_METRIC")
    assert rc == 0
    try:
        assert s.put("cm-off", b"z" * 64) == 0
        assert http_get(port, "/metrics") == (503, "text/plain", "metrics not available")
        assert http_get(port, "/metrics/summary")[0] == 503
        assert http_get(port, "/health")[0] == 200
    finally:
        s.close()


def test_summary_as_stocks():
    """Stock's summary arithmetic: p95 is the first bound whose cumulative count reaches
    count*95/100 (integer), max the highest bound with data."""
    text = "".join(
        f'mooncake_client_rpc_latency_bucket{{client_mode="real",rpc_name="PutEnd",'
        f'le="{b:.6f}"}} {c}\n' for b, c in zip(STOCK_BOUNDS, [0] * 3 + [19] * 10 + [20] * 14))
    text += ('mooncake_client_rpc_latency_bucket{client_mode="real",rpc_name="PutEnd",'
             'le="+Inf"} 20\n')
    out = _client_http.summary(text)
    assert "PutEnd: count=20, p95<150μs, max<3000μs" in out
    assert "No RPC calls recorded" in _client_http.summary("")


def _stock(path):
    return subprocess.run(["git", f"--git-dir={STOCK_GIT}", "show", f"{STOCK_COMMIT}:{path}"],
                          check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(not os.path.isdir(STOCK_GIT), reason="no clone of stock Mooncake")
def test_stock_facts_from_source():
    """The copies above against stock's source: MasterClientMetric's members (ylt type ->
    Prometheus type), names, help texts, label; kLatencyBucket; and every rpc_name Tide
    can emit for a stock function is one of stock's RpcNameTraits values."""
    h = re.sub(r"//[^\n]*", "", _stock("mooncake-store/include/client_metric.h"))
    cls = h[h.index("struct MasterClientMetric"):]
    cls = cls[:cls.index("\n};")]
    assert re.search(r'rpc_names\s*=\s*\{\s*"rpc_name"\s*\}', cls)
    members = dict((m, t) for t, m in re.findall(r"ylt::metric::(\w+)\s+(\w+)\s*;", cls))
    found = {}
    for member, name, help_ in re.findall(r'(\w+)\(\s*"([^"]+)",\s*"([^"]+)"', cls):
        typ = {"hybrid_counter_1t": "counter", "hybrid_histogram_1t": "histogram"}[members[member]]
        found[name] = (typ, "rpc_name", help_)
    assert found == STOCK_RPC_METRICS
    buckets = h[h.index("kLatencyBucket = {"):]
    buckets = buckets[:buckets.index("}")]
    assert tuple(int(x) for x in re.findall(r"\d+", buckets)) == STOCK_BOUNDS
    names = set(re.findall(r'value = "(\w+)"', _stock("mooncake-store/src/master_client.cpp")))
    for tide in ("PutStart", "PutEnd", "PutRevoke", "UpsertStart", "UpsertEnd", "UpsertRevoke",
                 "GetReplicaList", "BatchGetReplicaList", "ExistKey", "BatchExistKey",
                 "Remove", "RemoveAll", "RemoveByRegex", "BatchRemove", "BatchPutStart",
                 "BatchPutEnd", "BatchPutRevoke", "BatchUpsertStart", "BatchUpsertEnd",
                 "BatchUpsertRevoke"):
        assert tide in names, tide
