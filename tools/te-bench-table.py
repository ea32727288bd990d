#!/usr/bin/python3
"""The transfer engine benchmark tables (README): tide-bench pairs, same run.

Table 1. For each block size (4 KiB, 64 KiB, 1 MiB, 64 MiB) and operation (read,
write), with batch 32 (4 for 64 MiB: 256 MiB in flight either way) and one
initiator thread, runs a target and an initiator as two processes:
  - Tide over kernel sockets (loopback),
  - Tide over user-space TCP on DPDK net_memif (--no-huge, MTU 9000, the two
    processes' polling lcores on different CPUs),
  - with --duplex also over two one-way memif links per pair (TIDE_DPDK_RX_DEVICE:
    each process the zero-copy client of the link it receives on),
and prints MiB/s, batch latency, the ratio to Tide over kernel sockets in the
same run, and the ratio to stock Mooncake TE over kernel TCP loopback from
../shared/spec/reference-figures.md (2026-12-02, quiet 2-core VM, stock HEAD
3b5a5941 transfer_engine_bench, batch 32, 1 thread, connection pool off).

Table 2 (--mixed, or --only-mixed): mixed clusters. tide-stock-peer plays a
stock Mooncake initiator (one connection per slice, or with --pool four fixed
lanes; v2 framing) against (a) a Tide target over kernel sockets and (b)
tide-stock-peer's target, a one-thread server modelled on stock's; both named
127.0.0.1 (as stock's default hostname name resolves here) and, for Tide, also
the node's own address (what peers on other hosts use). Each row is the median
of --runs runs, alternating targets, with the initiator's and the target's CPU
time per slice.

Every row of both tables runs --runs times (default 3), the paths interleaved within each
run; cells are medians over the runs, and "vs kernel" is the median of the same-run ratios.

Writes the results (command, commit, date, load, every run's figures, the medians) as JSON
and draws them as a PNG (tools/benchplot.py): MiB/s against block size per path beside
stock's reference figures, batch latency p50/p99, and for the mixed table MiB/s and CPU time
per slice. By default BUILD_DIR/bench/te-bench.json and .png.

usage: tools/te-bench-table.py BUILD_DIR [--duration S] [--runs N] [--sizes 4K,64M]
                               [--mixed | --only-mixed] [--duplex] [--json FILE] [--png FILE]
No stock reference figure exists for 64 MiB: its "vs Mooncake" cell is "-".
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchplot  # noqa: E402

# ../shared/spec/reference-figures.md: stock TE, batch 32, 1 thread, pool off (read, write).
MOONCAKE_REF = {4096: (55, 55), 65536: (771, 708), 1 << 20: (1748, 1696)}
SIZES = [(4096, "4K"), (65536, "64K"), (1 << 20, "1M"), (64 << 20, "64M")]
PATH_LABEL = {"memif": "Tide user-space TCP (memif)",
              "memif-duplex": "Tide user-space TCP (two one-way memif links)",
              "kernel": "Tide over kernel TCP (loopback)"}
REF_LABEL = "stock Mooncake TE, kernel TCP, pool off (reference figures, 2026-12-02)"


def batch_for(bs):
    """Batch 32, except 64 MiB blocks: batch 4, so a batch (256 MiB) fits the buffers."""
    return 4 if bs >= 64 << 20 else 32


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDE_", "MOONCAKE_", "MC_"))}
    env.update(extra or {})
    return env


def start_ready(cmd, env, what):
    """Start a target process; wait (60 s deadline) for its "target 'NAME' ready" line."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        m = re.search(r"target '([^']+)' ready", line)
        if m:
            return p, m.group(1)
    p.kill()
    raise RuntimeError(f"{what} did not start within 60 s: " + (p.stdout.read() or ""))


def start_target(bench, args, env):
    return start_ready([bench, "--mode=target", "--buffer_size=256M", "--host=127.0.0.1", *args],
                       env, "tide-bench target")


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()


def parse(out):
    m = re.search(r"transport=(\S+).*?: ([\d.]+) MiB/s, (\d+) ops/s, batch latency p50 (\d+) us "
                  r"p99 (\d+) us", out)
    if not m:
        return None
    return {"transport": m.group(1), "mib_s": float(m.group(2)), "ops_s": int(m.group(3)),
            "p50_us": int(m.group(4)), "p99_us": int(m.group(5))}


def run_kernel(bench, op, bs, duration):
    t, name = start_target(bench, [], clean_env())
    try:
        r = subprocess.run([bench, "--mode=initiator", f"--segment_id={name}",
                            "--buffer_size=256M", f"--operation={op}", f"--block_size={bs}",
                            f"--batch_size={batch_for(bs)}", f"--duration={duration}",
                            "--host=127.0.0.1"],
                           capture_output=True, text=True, env=clean_env(), timeout=300)
    finally:
        stop(t)
    return parse(r.stdout), r.stdout + r.stderr


def memif_env(role, ip, cpu, tmp, n, duplex):
    """Node environment of one memif node: "server" or "client" of the one link, or with
    duplex two one-way links (a = server -> client) where each node sends on the link it
    serves and receives, as the zero-copy client, on the other."""
    sock = os.path.join(tmp, f"memif{n}.sock")
    # MTU 9000 (one frame per 9216-byte memif buffer); each process polls its own CPU.
    dev = f"net_memif0,role={role},socket={sock},socket-abstract=no,bsize=9216"
    env = {"TIDE_HUGEPAGES": "off", "TIDE_DPDK_DEVICE": dev,
           "TIDE_DATA_IP": ip, "TIDE_TCP_RTO_MIN_US": "5000", "TIDE_MTU": "9000",
           "TIDE_CSUM": "elide",  # memif on one host: no checksums
           "TIDE_LCORES": str(cpu % os.cpu_count()),
           "TIDE_FILE_PREFIX": f"tide-tebench-{role}-{os.getpid()}-{n}"}
    if duplex:
        tx, rx = ("a", "b") if role == "server" else ("b", "a")
        env["TIDE_DPDK_DEVICE"] = (f"net_memif0,role=server,socket={sock}.{tx},"
                                   "socket-abstract=no,bsize=9216")
        env["TIDE_DPDK_RX_DEVICE"] = (f"net_memif1,role=client,socket={sock}.{rx},"
                                      "socket-abstract=no,zero-copy=yes")
        # memif zero-copy shares the mempool's memory: one file per memseg list.
        env["TIDE_EAL_ARGS"] = "--single-file-segments"
    return clean_env(env)


def run_memif(bench, op, bs, duration, tmp, n, duplex=False):
    port = 21000 + (os.getpid() + n) % 20000
    # Either may start first (a memif client waits for its server); the initiator exits first.
    ini = subprocess.Popen([bench, "--mode=initiator", f"--segment_id=127.0.0.1:{port}",
                            "--buffer_size=256M", f"--operation={op}", f"--block_size={bs}",
                            f"--batch_size={batch_for(bs)}", f"--duration={duration}",
                            "--host=127.0.0.1", "--open_retry_s=30"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           env=memif_env("server", "10.92.0.1", 0, tmp, n, duplex))
    t, _ = start_target(bench, [f"--rpc_port={port}"],
                        memif_env("client", "10.92.0.2", 1, tmp, n, duplex))
    try:
        out, _ = ini.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        ini.kill()
        out, _ = ini.communicate()
    stop(t)
    return parse(out), out


def proc_cpu_s(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_stock_target(peer, host):
    return start_ready([peer, "--mode=target", "--buffer_size=256M", f"--host={host}"],
                       clean_env(), "tide-stock-peer target")


def run_peer(peer, target, name, op, bs, pool, duration):
    """One tide-stock-peer initiator run; returns a dict or None (and the output)."""
    c0 = proc_cpu_s(target.pid)
    r = subprocess.run([peer, "--mode=initiator", f"--segment_id={name}", f"--operation={op}",
                        f"--block_size={bs}", "--batch_size=32", f"--duration={duration}",
                        f"--pool={'true' if pool else 'false'}"],
                       capture_output=True, text=True, env=clean_env(), timeout=300)
    tcpu = proc_cpu_s(target.pid) - c0
    m = re.search(r": ([\d.]+) MiB/s, (\d+) slices/s, (\d+) connections, initiator CPU ([\d.]+) us "
                  r"per slice, (\d+) bytes", r.stdout)
    if r.returncode != 0 or not m:
        return None, r.stdout + r.stderr
    slices = int(m.group(5)) / bs
    return {"mib_s": float(m.group(1)), "slices_s": int(m.group(2)),
            "ini_us": float(m.group(4)), "tgt_us": tcpu * 1e6 / slices if slices else 0.0}, ""


def node_address():
    """The address tide-bench names a target by default (first non-loopback IPv4)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
    return m.group(1) if m else None


def mixed_table(build_dir, duration, runs):
    """The mixed-cluster rows: (every run's rows, their medians, failed)."""
    bench = os.path.join(build_dir, "tools", "te_bench", "tide-bench")
    peer = os.path.join(build_dir, "tools", "te_bench", "tide-stock-peer")
    addr = node_address()
    targets = []
    raw, failed = [], False
    try:
        t, name = start_target(bench, [], clean_env())
        targets.append(("tide kernel", t, name))
        t, name = start_stock_target(peer, "127.0.0.1")
        targets.append(("stock model", t, name))
        if addr:
            t, name = start_target(bench, [f"--host={addr}"], clean_env())
            targets.append((f"tide kernel @{addr}", t, name))
        for bs, label in [s for s in SIZES if s[0] in MOONCAKE_REF]:
            for op in ("read", "write"):
                for pool in (False, True):
                    for run in range(runs):
                        for kind, t, name in targets:
                            r, out = run_peer(peer, t, name, op, bs, pool, duration)
                            if r is None:
                                print(f"tide-stock-peer {kind} {op} {label} pool={pool}: "
                                      f"FAILED\n{out}", file=sys.stderr)
                                failed = True
                                continue
                            raw.append({"table": "mixed", "block": label, "bs": bs, "op": op,
                                        "pool": pool, "target": kind, "run": run, **r})
    finally:
        for _, t, _ in targets:
            stop(t)
    rows = benchplot.medians(raw, ["table", "block", "bs", "op", "pool", "target"])
    for r in rows:
        model = next((x for x in rows if x["block"] == r["block"] and x["op"] == r["op"] and
                      x["pool"] == r["pool"] and x["target"] == "stock model"), None)
        r["vs_model"] = r["mib_s"] / model["mib_s"] if model else None
        r["vs_stock"] = None if r["pool"] else \
            r["mib_s"] / MOONCAKE_REF[r["bs"]][0 if r["op"] == "read" else 1]
        r["pool_text"] = "on" if r["pool"] else "off"
    print(f"\nmixed cluster: tide-stock-peer as a stock initiator (batch 32, v2 framing), "
          f"median of {runs} runs of {duration:g} s; 'stock model' = tide-stock-peer's "
          "one-thread stock-style server; Mooncake = stock -> stock, pool off "
          "(../shared/spec/reference-figures.md, 2026-12-02)")
    print(f"{'block':>5} {'op':>5} {'pool':>4} {'target':>26} {'MiB/s':>8} {'slices/s':>9} "
          f"{'ini us/sl':>9} {'tgt us/sl':>9} {'vs model':>8} {'vs Mooncake':>11}")
    for r in rows:
        vs_m = f"{r['vs_model']:.2f}x" if r["vs_model"] else "-"
        vs_ref = f"{r['vs_stock']:.2f}x" if r["vs_stock"] else "-"
        print(f"{r['block']:>5} {r['op']:>5} {r['pool_text']:>4} "
              f"{r['target']:>26} {r['mib_s']:8.1f} {r['slices_s']:9.0f} {r['ini_us']:9.1f} "
              f"{r['tgt_us']:9.1f} {vs_m:>8} {vs_ref:>11}")
    return raw, rows, failed


def ref_points(op):
    """Stock's reference figures for one operation, as (block bytes, MiB/s) points."""
    return [[bs, ref[0 if op == "read" else 1]] for bs, ref in sorted(MOONCAKE_REF.items())]


def panels_and_tables(paths, mixed):
    """What the PNG draws and tools/bench-doc.py prints, as views of the medians."""
    panels, tables = [], []
    if paths:
        for op in ("read", "write"):
            series = [{"label": PATH_LABEL[p], "where": {"table": "main", "path": p, "op": op},
                       "color": i} for i, p in enumerate(paths)]
            series.append({"label": REF_LABEL, "points": ref_points(op), "color": 8})
            panels.append({"kind": "xy", "title": f"{op.upper()}: throughput (batch 32; "
                           "64 MiB: 4), median and range of runs", "x": "bs", "y": "mib_s",
                           "xlog2": True, "xlabel": "block size (log2)",
                           "ylabel": "throughput (MiB/s)", "series": series})
        for op in ("read", "write"):
            series = []
            for i, p in enumerate(paths):
                for q, style in (("p50_us", "-"), ("p99_us", "--")):
                    series.append({"label": f"{PATH_LABEL[p]}, {q[:3]}", "y": q,
                                   "where": {"table": "main", "path": p, "op": op},
                                   "color": i, "style": style})
            panels.append({"kind": "xy", "title": f"{op.upper()}: batch latency "
                           "percentiles (p50 solid, p99 dashed)", "x": "bs", "y": "p50_us",
                           "xlog2": True, "ylog": True, "xlabel": "block size (log2)",
                           "ylabel": "batch latency (µs, log)", "series": series})
        tables.append({"title": "", "where": {"table": "main"}, "columns": [
            {"key": "bs", "head": "block", "fmt": "size"},
            {"key": "op", "head": "op"},
            {"key": "path_label", "head": "path"},
            {"key": "mib_s", "head": "MiB/s", "fmt": ".0f"},
            {"key": "ops_s", "head": "ops/s", "fmt": "int"},
            {"key": "p50_us", "head": "p50 µs", "fmt": ".0f"},
            {"key": "p99_us", "head": "p99 µs", "fmt": ".0f"},
            {"key": "vs_kernel", "head": "vs kernel (same run)", "fmt": "x"},
            {"key": "vs_stock", "head": "vs stock Mooncake", "fmt": "x"},
            {"key": "n", "head": "runs", "fmt": "d"}]})
    if mixed:
        series = []
        for i, (tgt, lbl) in enumerate((("tide kernel", "Tide target (kernel sockets)"),
                                        ("stock model", "stock-model target"))):
            for pool, style in ((False, "-"), (True, "--")):
                series.append({"label": f"{lbl}, pool {'on' if pool else 'off'}",
                               "where": {"table": "mixed", "target": tgt, "op": "read",
                                         "pool": pool}, "color": i + 3, "style": style})
        series.append({"label": REF_LABEL, "points": ref_points("read"), "color": 8})
        panels.append({"kind": "xy", "title": "Stock-style initiator (tide-stock-peer), "
                       "READ, batch 32", "x": "bs", "y": "mib_s", "xlog2": True,
                       "xlabel": "block size (log2)", "ylabel": "throughput (MiB/s)",
                       "series": series})
        series = []
        for i, (tgt, lbl) in enumerate((("tide kernel", "Tide target"),
                                        ("stock model", "stock-model target"))):
            for key, who, style in (("tgt_us", "target", "-"), ("ini_us", "initiator", "--")):
                series.append({"label": f"{who} CPU, against {lbl}", "y": key,
                               "where": {"table": "mixed", "target": tgt, "op": "read",
                                         "pool": False}, "color": i + 3, "style": style})
        panels.append({"kind": "xy", "title": "Stock-style initiator, READ, pool off: "
                       "CPU time per slice", "x": "bs", "y": "tgt_us", "xlog2": True,
                       "ylog": True, "xlabel": "block size (log2)",
                       "ylabel": "CPU time per slice (µs, log)", "series": series})
        tables.append({"title": "", "where": {"table": "mixed"}, "columns": [
            {"key": "bs", "head": "block", "fmt": "size"},
            {"key": "op", "head": "op"},
            {"key": "pool_text", "head": "pool"},
            {"key": "target", "head": "target"},
            {"key": "mib_s", "head": "MiB/s", "fmt": ".0f"},
            {"key": "slices_s", "head": "slices/s", "fmt": "int"},
            {"key": "ini_us", "head": "initiator CPU µs/slice", "fmt": ".1f"},
            {"key": "tgt_us", "head": "target CPU µs/slice", "fmt": ".1f"},
            {"key": "vs_model", "head": "vs stock model", "fmt": "x"},
            {"key": "vs_stock", "head": "vs stock Mooncake", "fmt": "x"},
            {"key": "n", "head": "runs", "fmt": "d"}]})
    return panels, tables


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--duration", type=float, default=3.0)
    benchplot.add_output_args(ap)
    ap.add_argument("--mixed", action="store_true", help="also the mixed-cluster table")
    ap.add_argument("--only-mixed", action="store_true", help="only the mixed-cluster table")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per row of either table, interleaved (median; default 3)")
    ap.add_argument("--duplex", action="store_true",
                    help="also user-space TCP over two one-way memif links (TIDE_DPDK_RX_DEVICE, "
                         "each node the zero-copy client of the link it receives on)")
    ap.add_argument("--sizes", help="comma-separated subset of " +
                    ",".join(label for _, label in SIZES))
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    sizes = SIZES
    if a.sizes:
        want = a.sizes.upper().split(",")
        sizes = [(bs, label) for bs, label in SIZES if label in want]
        if len(sizes) != len(want):
            ap.error(f"--sizes: choose from {','.join(label for _, label in SIZES)}")
    json_path, png_path = benchplot.default_paths(a.build_dir, "te-bench", a.json, a.png)
    paths = [] if a.only_mixed else \
        (["memif", "memif-duplex", "kernel"] if a.duplex else ["memif", "kernel"])
    rec = benchplot.Recorder("te-bench", "Transfer engine: tide-bench initiator and target "
                             "as two processes, 1 initiator thread", params={
                                 "duration_s": a.duration, "runs": a.runs, "duplex": a.duplex,
                                 "sizes": [bs for bs, _ in sizes], "mixed": a.mixed or
                                 a.only_mixed, "batch": "32 (4 for 64 MiB blocks)",
                                 "stock_reference": {str(k): v for k, v in MOONCAKE_REF.items()}})
    bench = os.path.join(a.build_dir, "tools", "te_bench", "tide-bench")
    raw, failed = [], False
    tmp = tempfile.mkdtemp(prefix="tide-tebench-")
    n = 0
    for run in range(a.runs if paths else 0):
        for bs, label in sizes:
            for op in ("read", "write"):
                for kind in paths:
                    n += 1
                    if kind == "kernel":
                        res, out = run_kernel(bench, op, bs, a.duration)
                    else:
                        res, out = run_memif(bench, op, bs, a.duration, tmp, n,
                                             duplex=kind == "memif-duplex")
                    if res is None:
                        print(f"tide-bench {kind} {op} {label}: FAILED\n{out}", file=sys.stderr)
                        failed = True
                        continue
                    res.update({"table": "main", "path": kind, "op": op, "block": label,
                                "bs": bs, "run": run, "path_label": PATH_LABEL[kind]})
                    raw.append(res)
                    print(f"run {run + 1}/{a.runs} {label:>4} {op:>5} {kind:>12}: "
                          f"{res['mib_s']:.1f} MiB/s", flush=True)
    subprocess.run(["rm", "-rf", tmp], check=False)
    # Each run's ratio to the kernel-socket row of the same run; the median of those.
    for r in raw:
        kern = next((k for k in raw if k["path"] == "kernel" and k["run"] == r["run"] and
                     k["bs"] == r["bs"] and k["op"] == r["op"]), None)
        if kern and r["path"] != "kernel":
            r["vs_kernel"] = r["mib_s"] / kern["mib_s"]
    rows = benchplot.medians(raw, ["table", "path", "op", "block", "bs"])
    for r in rows:
        ref = MOONCAKE_REF.get(r["bs"])
        r["vs_stock"] = r["mib_s"] / ref[0 if r["op"] == "read" else 1] if ref else None
        r.setdefault("vs_kernel", None)
    if paths:
        print(f"\nbatch 32 (64 MiB: 4), 1 initiator thread, {a.duration:g} s per row, median "
              f"of {a.runs} run(s); Mooncake = stock TE over kernel TCP loopback "
              "(../shared/spec/reference-figures.md, 2026-12-02)")
        print(f"{'block':>5} {'op':>5} {'path':>22} {'MiB/s':>9} {'ops/s':>9} {'p50 us':>7} "
              f"{'p99 us':>7} {'vs Mooncake':>11} {'vs kernel':>9}")
        for bs, label in sizes:
            for op in ("read", "write"):
                for r in rows:
                    if r["block"] != label or r["op"] != op:
                        continue
                    vs_k = f"{r['vs_kernel']:.2f}x" if r["vs_kernel"] else "-"
                    vs_m = f"{r['vs_stock']:.1f}x" if r["vs_stock"] else "-"
                    path = r["transport"] + (" duplex" if r["path"] == "memif-duplex" else "")
                    print(f"{label:>5} {op:>5} {path:>22} {r['mib_s']:9.1f} "
                          f"{r['ops_s']:9.0f} {r['p50_us']:7.0f} {r['p99_us']:7.0f} "
                          f"{vs_m:>11} {vs_k:>9}")
    if a.mixed or a.only_mixed:
        mraw, mrows, mfailed = mixed_table(a.build_dir, a.duration, a.runs)
        raw += mraw
        rows += mrows
        failed = failed or mfailed
    panels, tables = panels_and_tables(paths, a.mixed or a.only_mixed)
    rec.finish(raw, rows, panels, tables, json_path=json_path, png_path=png_path, notes=[
        "MiB/s = 2^20 bytes per second moved by the initiator; batch latency = time from "
        "submitting a batch to its completion.",
        "Stock Mooncake figures are not measured in this run: they are stock TE "
        "(transfer_engine_bench, HEAD 3b5a5941) over kernel TCP loopback, batch 32, "
        "1 thread, connection pool off, on a quiet 2-core VM, 2026-12-02 "
        "(../shared/spec/reference-figures.md)."])
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
