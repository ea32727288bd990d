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

usage: tools/te-bench-table.py BUILD_DIR [--duration S] [--json FILE] [--sizes 4K,64M]
                                         [--mixed | --only-mixed] [--runs N]
No stock reference figure exists for 64 MiB: its "vs Mooncake" cell is "-".
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

# ../shared/spec/reference-figures.md: stock TE, batch 32, 1 thread, pool off (read, write).
MOONCAKE_REF = {4096: (55, 55), 65536: (771, 708), 1 << 20: (1748, 1696)}
SIZES = [(4096, "4K"), (65536, "64K"), (1 << 20, "1M"), (64 << 20, "64M")]


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
    bench = os.path.join(build_dir, "tools", "te_bench", "tide-bench")
    peer = os.path.join(build_dir, "tools", "te_bench", "tide-stock-peer")
    addr = node_address()
    targets = []
    try:
        t, name = start_target(bench, [], clean_env())
        targets.append(("tide kernel", t, name))
        t, name = start_stock_target(peer, "127.0.0.1")
        targets.append(("stock model", t, name))
        if addr:
            t, name = start_target(bench, [f"--host={addr}"], clean_env())
            targets.append((f"tide kernel @{addr}", t, name))
        rows, failed = [], False
        for bs, label in [s for s in SIZES if s[0] in MOONCAKE_REF]:
            for op in ("read", "write"):
                for pool in (False, True):
                    res = {k: [] for k, _, _ in targets}
                    for _ in range(runs):
                        for kind, t, name in targets:
                            r, out = run_peer(peer, t, name, op, bs, pool, duration)
                            if r is None:
                                print(f"tide-stock-peer {kind} {op} {label} pool={pool}: "
                                      f"FAILED\n{out}", file=sys.stderr)
                                failed = True
                                continue
                            res[kind].append(r)
                    for kind, vals in res.items():
                        if not vals:
                            continue
                        med = sorted(vals, key=lambda v: v["mib_s"])[len(vals) // 2]
                        rows.append({"block": label, "bs": bs, "op": op, "pool": pool,
                                     "target": kind, "runs": len(vals), **med})
    finally:
        for _, t, _ in targets:
            stop(t)
    print(f"\nmixed cluster: tide-stock-peer as a stock initiator (batch 32, v2 framing), "
          f"median of {runs} runs of {duration:g} s; 'stock model' = tide-stock-peer's "
          "one-thread stock-style server; Mooncake = stock -> stock, pool off "
          "(../shared/spec/reference-figures.md, 2026-12-02)")
    print(f"{'block':>5} {'op':>5} {'pool':>4} {'target':>26} {'MiB/s':>8} {'slices/s':>9} "
          f"{'ini us/sl':>9} {'tgt us/sl':>9} {'vs model':>8} {'vs Mooncake':>11}")
    for r in rows:
        model = next((x for x in rows if x["block"] == r["block"] and x["op"] == r["op"] and
                      x["pool"] == r["pool"] and x["target"] == "stock model"), None)
        vs_m = f"{r['mib_s'] / model['mib_s']:.2f}x" if model else "-"
        ref = MOONCAKE_REF[r["bs"]][0 if r["op"] == "read" else 1]
        vs_ref = f"{r['mib_s'] / ref:.2f}x" if not r["pool"] else "-"
        print(f"{r['block']:>5} {r['op']:>5} {'on' if r['pool'] else 'off':>4} "
              f"{r['target']:>26} {r['mib_s']:8.1f} {r['slices_s']:9d} {r['ini_us']:9.1f} "
              f"{r['tgt_us']:9.1f} {vs_m:>8} {vs_ref:>11}")
    return rows, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--json")
    ap.add_argument("--mixed", action="store_true", help="also the mixed-cluster table")
    ap.add_argument("--only-mixed", action="store_true", help="only the mixed-cluster table")
    ap.add_argument("--runs", type=int, default=3, help="mixed table: runs per row (median)")
    ap.add_argument("--duplex", action="store_true",
                    help="also user-space TCP over two one-way memif links (TIDE_DPDK_RX_DEVICE, "
                         "each node the zero-copy client of the link it receives on)")
    ap.add_argument("--sizes", help="comma-separated subset of " +
                    ",".join(label for _, label in SIZES))
    a = ap.parse_args()
    sizes = SIZES
    if a.sizes:
        want = a.sizes.upper().split(",")
        sizes = [(bs, label) for bs, label in SIZES if label in want]
        if len(sizes) != len(want):
            ap.error(f"--sizes: choose from {','.join(label for _, label in SIZES)}")
    if a.only_mixed:
        rows, failed = mixed_table(a.build_dir, a.duration, a.runs)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
        return 1 if failed else 0
    bench = os.path.join(a.build_dir, "tools", "te_bench", "tide-bench")
    rows, failed = [], False
    tmp = tempfile.mkdtemp(prefix="tide-tebench-")
    n = 0
    for bs, label in sizes:
        for op in ("read", "write"):
            for kind in ("memif", "memif-duplex", "kernel") if a.duplex else ("memif", "kernel"):
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
                res.update({"path": kind, "op": op, "block": label})
                rows.append(res)
    print(f"\nbatch 32 (64 MiB: 4), 1 initiator thread, {a.duration:g} s per row; Mooncake = stock TE over "
          "kernel TCP loopback (../shared/spec/reference-figures.md, 2026-12-02)")
    print(f"{'block':>5} {'op':>5} {'path':>22} {'MiB/s':>9} {'ops/s':>9} {'p50 us':>7} "
          f"{'p99 us':>7} {'vs Mooncake':>11} {'vs kernel':>9}")
    for bs, label in sizes:
        for op in ("read", "write"):
            kern = next((r for r in rows if r["block"] == label and r["op"] == op and
                         r["path"] == "kernel"), None)
            for r in rows:
                if r["block"] != label or r["op"] != op:
                    continue
                ref = MOONCAKE_REF.get(bs, (0, 0))[0 if op == "read" else 1]
                vs_k = f"{r['mib_s'] / kern['mib_s']:.2f}x" if kern else "-"
                vs_m = f"{r['mib_s'] / ref:.1f}x" if ref else "-"
                path = r["transport"] + (" duplex" if r["path"] == "memif-duplex" else "")
                print(f"{label:>5} {op:>5} {path:>22} {r['mib_s']:9.1f} "
                      f"{r['ops_s']:9d} {r['p50_us']:7d} {r['p99_us']:7d} "
                      f"{vs_m:>11} {vs_k:>9}")
    if a.mixed:
        mrows, mfailed = mixed_table(a.build_dir, a.duration, a.runs)
        rows += mrows
        failed = failed or mfailed
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    subprocess.run(["rm", "-rf", tmp], check=False)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
