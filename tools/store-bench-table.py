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
median over the runs, and "vs kernel" divides the memif row by the kernel-socket
row of the same size and batch (put/get). tide-store-bench warms each client
up for 1 s (uncounted) before the first size.

TIDE_PUT_LEASE (one-round-trip puts of objects up to 1 MiB) is on in both node
files unless --put-lease off; run both ways for the extension's A/B.

usage: tools/store-bench-table.py BUILD_DIR [--duration S] [--runs N] [--json FILE]
                                  [--put-lease on|off]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import storecluster  # noqa: E402

GIB = 1024.0
# (put, get) reference per size: ops/s for 256 B/4 KiB, MiB/s for the rest.
# ../shared/spec/reference-figures.md (2026-12-02), midpoints of its ranges.
MOONCAKE_REF = {256: None, 4096: ("ops", 4600, 6250), 65536: ("mib", 226, 349),
                1 << 20: ("mib", 937, 1136), 64 << 20: ("mib", 1341, 1073)}


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


def ratio(row, which):
    ref = MOONCAKE_REF.get(row["size"])
    if ref is None:
        return "-"
    kind, put, get = ref
    val = row[f"{which}_ops"] if kind == "ops" else row[f"{which}_mib"]
    return f"{val / (put if which == 'put' else get):.1f}x"


def median_rows(runs):
    """One row per (label, size): the median of each throughput over the runs;
    the p50 columns are those of the run whose put (get) rate is the median."""
    by = {}
    for rows in runs:
        for r in rows:
            by.setdefault((r["label"], r["size"]), []).append(r)
    out = []
    for (label, size), rs in by.items():
        m = dict(rs[0])
        for which in ("put", "get"):
            rs.sort(key=lambda r: r[f"{which}_ops"])
            mid = rs[len(rs) // 2]
            for k in ("ops", "mib", "p50_us"):
                m[f"{which}_{k}"] = mid[f"{which}_{k}"]
        m["runs"] = len(rs)
        out.append(m)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per transport, interleaved; cells are medians (default 3)")
    ap.add_argument("--json")
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
    runs = []
    # Interleave the transports (memif, kernel, memif, ...) so a slow spell of
    # this shared VM lands on both columns rather than on one.
    for n in range(a.runs):
        for t in transports:
            print(f"== run {n + 1}/{a.runs}: {t}", flush=True)
            jpath = os.path.join("/tmp", f"tide-store-bench-{os.getpid()}-{t}.jsonl")
            try:
                runs.append(run(a.build_dir, t, a.duration, jpath, a.put_lease == "on", node))
            finally:
                if os.path.exists(jpath):
                    os.unlink(jpath)
    rows = median_rows(runs)
    kern = {(r["label"].split("/")[1], r["size"]): r for r in rows
            if r["label"].startswith("kernel/")}
    print(f"\nclient attached to node A, objects on node B, {a.duration:g} s per phase, "
          f"one-round-trip puts (TIDE_PUT_LEASE) {a.put_lease}, "
          f"{' '.join(a.node) + ', ' if a.node else ''}"
          f"median of {a.runs} run(s) per cell; Mooncake = stock Python client over kernel "
          "TCP (reference figures); vs kernel = this row / the kernel-socket row, same run")
    print(f"{'path':>12} {'size':>9} {'put ops/s':>10} {'put MiB/s':>10} {'get ops/s':>10} "
          f"{'get MiB/s':>10} {'put p50us':>9} {'get p50us':>9} {'put vs MC':>9} "
          f"{'get vs MC':>9} {'vs kernel':>11}")
    for r in rows:
        k = kern.get((r["label"].split("/")[1], r["size"]))
        vk = "-" if k is None or k is r else \
            f"{r['put_ops'] / k['put_ops']:.2f}/{r['get_ops'] / k['get_ops']:.2f}"
        print(f"{r['label']:>12} {r['size']:>9} {r['put_ops']:10.0f} {r['put_mib']:10.1f} "
              f"{r['get_ops']:10.0f} {r['get_mib']:10.1f} {r['put_p50_us']:9.0f} "
              f"{r['get_p50_us']:9.0f} {ratio(r, 'put'):>9} {ratio(r, 'get'):>9} {vk:>11}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "median": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
