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

usage: tools/store-bench-table.py BUILD_DIR [--duration S] [--json FILE]
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


def run(build, transport, duration, jpath):
    rows = []
    with storecluster.LocalStoreCluster(build, transport, segment="768mb") as c:
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--json")
    ap.add_argument("--transports", default="memif,kernel")
    a = ap.parse_args()
    rows = []
    for t in a.transports.split(","):
        jpath = os.path.join("/tmp", f"tide-store-bench-{os.getpid()}-{t}.jsonl")
        try:
            rows += run(a.build_dir, t, a.duration, jpath)
        finally:
            if os.path.exists(jpath):
                os.unlink(jpath)
    print(f"\nclient attached to node A, objects on node B, {a.duration:g} s per phase; "
          "Mooncake = stock Python client over kernel TCP (reference figures)")
    print(f"{'path':>12} {'size':>9} {'put ops/s':>10} {'put MiB/s':>10} {'get ops/s':>10} "
          f"{'get MiB/s':>10} {'put p50us':>9} {'get p50us':>9} {'put vs MC':>9} "
          f"{'get vs MC':>9}")
    for r in rows:
        print(f"{r['label']:>12} {r['size']:>9} {r['put_ops']:10.0f} {r['put_mib']:10.1f} "
              f"{r['get_ops']:10.0f} {r['get_mib']:10.1f} {r['put_p50_us']:9.0f} "
              f"{r['get_p50_us']:9.0f} {ratio(r, 'put'):>9} {ratio(r, 'get'):>9}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
