#!/usr/bin/python3
"""The store benchmark table (README): put/get between two nodes, same run.

For each transport between the two node agents (Tide's user-space TCP on DPDK
net_memif, and kernel sockets), starts mooncake_master + two tide-node agents
(tools/storecluster.py) and runs tide-store-bench as a client of node A
placing every object on node B's segment (preferred segment), so each put
and each get crosses between the nodes. Values of 256 B, 4 KiB, 64 KiB,
1 MiB and 64 MiB, one call per object (batch 1, as Mooncake's Python
put/get), plus batch 32 for the small sizes (batch_put_from /
batch_get_into with 32 keys). Prints ops/s, MiB/s, p50 latency and the ratio
to stock Mooncake's Python client, batch 1, kernel TCP, holder and client as
two processes, from ../shared/spec/reference-figures.md (quiet 2-core VM,
2026-12-02; the midpoint of each range): 4 KiB 4.6k puts/s and 6.25k gets/s,
64 KiB 226 / 349 MiB/s, 1 MiB 937 / 1136 MiB/s; 64 MiB is compared with the
4 MiB figure (1341 / 1073 MiB/s), the largest there.

Each transport runs --runs times (default 3), interleaved; every cell is the
median over the runs (each p50 too), and "vs kernel" is the median over the runs
of the memif row divided by the kernel-socket row of the same run, size and batch
(put/get ops). tide-store-bench warms each client
up for 1 s (uncounted) before the first size.

TIDE_PUT_LEASE (one-round-trip puts of objects up to 1 MiB) is on in both node
files unless --put-lease off; run both ways for the extension's A/B.

Writes the results (command, commit, date, load, every run's figures, the medians) as JSON
and draws them as a PNG (tools/benchplot.py): put and get MiB/s against value size per path
and batch beside stock's figures, and p50 latency; by default BUILD_DIR/bench/store-bench.json
and .png.

usage: tools/store-bench-table.py BUILD_DIR [--duration S] [--runs N] [--put-lease on|off]
                                  [--transports memif,kernel] [--node KEY=VALUE]
                                  [--json FILE] [--png FILE]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchplot  # noqa: E402
import storecluster  # noqa: E402

# (put, get) reference per size: ops/s for 256 B/4 KiB, MiB/s for the rest.
# ../shared/spec/reference-figures.md (2026-12-02), midpoints of its ranges.
MOONCAKE_REF = {256: None, 4096: ("ops", 4600, 6250), 65536: ("mib", 226, 349),
                1 << 20: ("mib", 937, 1136), 64 << 20: ("mib", 1341, 1073)}
# The same midpoints as (value bytes, put MiB/s, get MiB/s) at the sizes stock measured
# (the 64 MiB rows above are compared with stock's largest, 4 MiB).
STOCK_MIB = [(4096, 4600 * 4096 / (1 << 20), 6250 * 4096 / (1 << 20)), (65536, 226, 349),
             (1 << 20, 937, 1136), (4 << 20, 1341, 1073)]
PATH_LABEL = {"memif": "Tide user-space TCP (memif) between agents",
              "kernel": "Tide over kernel TCP between agents"}
REF_LABEL = "stock Mooncake Python client, batch 1, kernel TCP (reference figures, 2026-12-02)"


def run(build, transport, duration, jpath, put_lease=True, node=None):
    rows = []
    extra = dict(node or {})
    if not put_lease:
        extra["TIDE_PUT_LEASE"] = "false"
    with storecluster.LocalStoreCluster(build, transport, segment="768mb",
                                        node_extra=extra) as c:
        a, b = c.nodes
        bench = os.path.join(c.build, "tools", "store_bench", "tide-store-bench")
        for batch, sizes in ((1, "256,4kb,64kb,1mb,64mb"), (32, "256,4kb")):
            label = f"{transport}/b{batch}"
            r = subprocess.run([bench, "--master", c.master_addr, "--agent", a.sock,
                                "--target", b.segment, "--sizes", sizes, "--batch", str(batch),
                                "--duration", str(duration), "--label", label, "--json", jpath],
                               capture_output=True, text=True, env=a.client_env(), timeout=900)
            print(r.stdout, end="")
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                raise RuntimeError(f"tide-store-bench {label} failed")
    with open(jpath) as f:
        for line in f:
            rows.append(json.loads(line))
    return rows


def vs_stock(row, which):
    """This row's put or get over stock's batch-1 figure (ops/s at 4 KiB, MiB/s above), or
    None where stock has no figure."""
    ref = MOONCAKE_REF.get(row["size"])
    if ref is None:
        return None
    kind, put, get = ref
    val = row[f"{which}_ops"] if kind == "ops" else row[f"{which}_mib"]
    return val / (put if which == "put" else get)


def ratio_text(v):
    return "-" if v is None else f"{v:.1f}x"


def panels_and_tables(transports):
    panels = []
    for which in ("put", "get"):
        series = []
        for i, t in enumerate(transports):
            for batch, style in ((1, "-"), (32, "--")):
                series.append({"label": f"{PATH_LABEL.get(t, t)}, batch {batch}",
                               "where": {"transport": t, "batch": batch}, "color": i,
                               "style": style})
        series.append({"label": REF_LABEL, "color": 8, "points": [
            [size, put if which == "put" else get] for size, put, get in STOCK_MIB]})
        panels.append({"kind": "xy", "title": f"{which.upper()}: throughput (median, range of "
                       "runs)", "x": "size",
                       "y": f"{which}_mib", "xlog2": True, "ylog": True,
                       "xlabel": "value size (log2)", "ylabel": "throughput (MiB/s, log)",
                       "series": series})
    series = []
    for i, t in enumerate(transports):
        for which, style in (("put", "-"), ("get", "--")):
            series.append({"label": f"{PATH_LABEL.get(t, t)}, {which}", "y": f"{which}_p50_us",
                           "where": {"transport": t, "batch": 1}, "color": i, "style": style})
    panels.append({"kind": "xy", "title": "Batch 1: p50 latency of one put (solid) and one "
                   "get (dashed)", "x": "size", "y": "put_p50_us", "xlog2": True, "ylog": True,
                   "xlabel": "value size (log2)", "ylabel": "p50 latency (µs, log)",
                   "series": series})
    table = {"title": "", "columns": [
        {"key": "path_label", "head": "agents joined by"},
        {"key": "batch", "head": "batch", "fmt": "d"},
        {"key": "size", "head": "value", "fmt": "size"},
        {"key": "put_ops", "head": "puts/s", "fmt": "int"},
        {"key": "put_mib", "head": "put MiB/s", "fmt": ".1f"},
        {"key": "get_ops", "head": "gets/s", "fmt": "int"},
        {"key": "get_mib", "head": "get MiB/s", "fmt": ".1f"},
        {"key": "put_p50_us", "head": "put p50 µs", "fmt": ".0f"},
        {"key": "get_p50_us", "head": "get p50 µs", "fmt": ".0f"},
        {"key": "put_vs_stock", "head": "put vs stock", "fmt": "x"},
        {"key": "get_vs_stock", "head": "get vs stock", "fmt": "x"},
        {"key": "put_vs_kernel", "head": "put vs kernel", "fmt": "x"},
        {"key": "get_vs_kernel", "head": "get vs kernel", "fmt": "x"},
        {"key": "n", "head": "runs", "fmt": "d"}]}
    return panels, [table]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per transport, interleaved; cells are medians (default 3)")
    benchplot.add_output_args(ap)
    ap.add_argument("--transports", default="memif,kernel")
    ap.add_argument("--put-lease", choices=("on", "off"), default="on",
                    help="TIDE_PUT_LEASE of both node files: one-round-trip puts (default on)")
    ap.add_argument("--node", action="append", default=[], metavar="KEY=VALUE",
                    help="one more node-file line for both nodes (e.g. TIDE_IDLE_IRQ=false); "
                         "repeatable")
    a = ap.parse_args()
    node = {}
    for kv in a.node:
        k, sep, v = kv.partition("=")
        if not sep or not k.startswith("TIDE_"):
            ap.error(f"--node {kv!r}: want TIDE_KEY=VALUE")
        node[k] = v
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    transports = a.transports.split(",")
    json_path, png_path = benchplot.default_paths(a.build_dir, "store-bench", a.json, a.png)
    rec = benchplot.Recorder("store-bench", "Store: tide-store-bench, client attached to node "
                             "A's agent, objects on node B's segment", params={
                                 "duration_s": a.duration, "runs": a.runs,
                                 "transports": transports, "put_lease": a.put_lease,
                                 "node": node, "stock_reference": {
                                     str(k): v for k, v in MOONCAKE_REF.items()}})
    raw = []
    # Interleave the transports (memif, kernel, memif, ...) so a slow spell of
    # this shared VM lands on both columns rather than on one.
    for n in range(a.runs):
        for t in transports:
            print(f"== run {n + 1}/{a.runs}: {t}", flush=True)
            jpath = os.path.join("/tmp", f"tide-store-bench-{os.getpid()}-{t}.jsonl")
            try:
                for r in run(a.build_dir, t, a.duration, jpath, a.put_lease == "on", node):
                    r.update({"run": n, "transport": t, "path_label": PATH_LABEL.get(t, t)})
                    raw.append(r)
            finally:
                if os.path.exists(jpath):
                    os.unlink(jpath)
    # Each run's ratio to the kernel-socket row of the same run, size and batch.
    for r in raw:
        k = next((x for x in raw if x["transport"] == "kernel" and x["run"] == r["run"] and
                  x["size"] == r["size"] and x["batch"] == r["batch"]), None)
        if k is not None and r["transport"] != "kernel":
            for which in ("put", "get"):
                r[f"{which}_vs_kernel"] = r[f"{which}_ops"] / k[f"{which}_ops"]
    rows = benchplot.medians(raw, ["label", "transport", "batch", "size"])
    for r in rows:
        for which in ("put", "get"):
            r[f"{which}_vs_stock"] = vs_stock(r, which)
            r.setdefault(f"{which}_vs_kernel", None)
    print(f"\nclient attached to node A, objects on node B, {a.duration:g} s per phase, "
          f"one-round-trip puts (TIDE_PUT_LEASE) {a.put_lease}, "
          f"{' '.join(a.node) + ', ' if a.node else ''}"
          f"median of {a.runs} run(s) per cell; Mooncake = stock Python client over kernel "
          "TCP (reference figures); vs kernel = median of the same-run ratios to the "
          "kernel-socket row")
    print(f"{'path':>12} {'size':>9} {'put ops/s':>10} {'put MiB/s':>10} {'get ops/s':>10} "
          f"{'get MiB/s':>10} {'put p50us':>9} {'get p50us':>9} {'put vs MC':>9} "
          f"{'get vs MC':>9} {'vs kernel':>11}")
    for r in rows:
        vk = "-" if r["put_vs_kernel"] is None else \
            f"{r['put_vs_kernel']:.2f}/{r['get_vs_kernel']:.2f}"
        print(f"{r['label']:>12} {r['size']:>9} {r['put_ops']:10.0f} {r['put_mib']:10.1f} "
              f"{r['get_ops']:10.0f} {r['get_mib']:10.1f} {r['put_p50_us']:9.0f} "
              f"{r['get_p50_us']:9.0f} {ratio_text(r['put_vs_stock']):>9} "
              f"{ratio_text(r['get_vs_stock']):>9} {vk:>11}")
    panels, tables = panels_and_tables(transports)
    rec.finish(raw, rows, panels, tables, json_path=json_path, png_path=png_path, notes=[
        "Batch 1: one put or get call per object; batch 32: batch_put_from / batch_get_into "
        "with 32 keys; p50 is per call (per batch of 32 for batch 32).",
        "Stock figures are not measured in this run: stock Mooncake's Python client, batch 1, "
        "kernel TCP, holder and client as two processes, quiet 2-core VM, 2026-12-02, "
        "midpoints of its ranges (../shared/spec/reference-figures.md); 64 MiB rows are "
        "compared with its largest value, 4 MiB."])
    return 0

if __name__ == "__main__":
    sys.exit(main())
