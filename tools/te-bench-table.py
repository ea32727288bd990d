#!/usr/bin/python3
"""The transfer engine benchmark table (README): tide-bench pairs, same run.

For each block size (4 KiB, 64 KiB, 1 MiB) and operation (read, write), with
batch 32 and one initiator thread, runs a target and an initiator as two
processes:
  - Tide over kernel sockets (loopback),
  - Tide over user-space TCP on DPDK net_memif (--no-huge, MTU 9000, the two
    processes' polling lcores on different CPUs),
and prints MiB/s, batch latency, and the ratio to stock Mooncake TE over
kernel TCP loopback on this machine class (the issue's reference figures,
batch 32, 1 thread: 49-73 MiB/s at 4 KiB, 674-1039 MiB/s at 64 KiB, about
1720 MiB/s at 1 MiB). Ratios use the upper end of each reference range.

usage: tools/te-bench-table.py BUILD_DIR [--duration S] [--json FILE]
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

MOONCAKE_REF = {4096: (49, 73), 65536: (674, 1039), 1 << 20: (1720, 1720)}
SIZES = [(4096, "4K"), (65536, "64K"), (1 << 20, "1M")]


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDE_", "MOONCAKE_", "MC_"))}
    env.update(extra or {})
    return env


def start_target(bench, args, env):
    p = subprocess.Popen([bench, "--mode=target", "--buffer_size=256M", "--host=127.0.0.1",
                          *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        m = re.search(r"target '([^']+)' ready", line)
        if m:
            return p, m.group(1)
    p.kill()
    raise RuntimeError("target did not start: " + (p.stdout.read() or ""))


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
                            "--batch_size=32", f"--duration={duration}", "--host=127.0.0.1"],
                           capture_output=True, text=True, env=clean_env(), timeout=300)
    finally:
        stop(t)
    return parse(r.stdout), r.stdout + r.stderr


def run_memif(bench, op, bs, duration, tmp, n):
    sock = os.path.join(tmp, f"memif{n}.sock")
    port = 21000 + (os.getpid() + n) % 20000

    def env(role, ip, cpu):
        # MTU 9000 (one frame per 9216-byte memif buffer); each process polls its own CPU.
        return clean_env({"TIDE_HUGEPAGES": "off",
                          "TIDE_DPDK_DEVICE": f"net_memif0,role={role},socket={sock},"
                                              "socket-abstract=no,bsize=9216",
                          "TIDE_DATA_IP": ip, "TIDE_TCP_RTO_MIN_US": "5000", "TIDE_MTU": "9000",
                          "TIDE_LCORES": str(cpu % os.cpu_count()),
                          "TIDE_FILE_PREFIX": f"tide-tebench-{role}-{os.getpid()}-{n}"})
    # The memif server (initiator) must exist first and exit first (DPDK 22.11 memif).
    ini = subprocess.Popen([bench, "--mode=initiator", f"--segment_id=127.0.0.1:{port}",
                            "--buffer_size=256M", f"--operation={op}", f"--block_size={bs}",
                            "--batch_size=32", f"--duration={duration}", "--host=127.0.0.1",
                            "--open_retry_s=30"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env("server", "10.92.0.1", 0))
    time.sleep(1.0)
    t, _ = start_target(bench, [f"--rpc_port={port}"], env("client", "10.92.0.2", 1))
    try:
        out, _ = ini.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        ini.kill()
        out, _ = ini.communicate()
    stop(t)
    return parse(out), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    bench = os.path.join(a.build_dir, "tools", "te_bench", "tide-bench")
    rows, failed = [], False
    tmp = tempfile.mkdtemp(prefix="tide-tebench-")
    n = 0
    for bs, label in SIZES:
        for op in ("read", "write"):
            for kind in ("memif", "kernel"):
                n += 1
                if kind == "kernel":
                    res, out = run_kernel(bench, op, bs, a.duration)
                else:
                    res, out = run_memif(bench, op, bs, a.duration, tmp, n)
                if res is None:
                    print(f"tide-bench {kind} {op} {label}: FAILED\n{out}", file=sys.stderr)
                    failed = True
                    continue
                res.update({"path": kind, "op": op, "block": label})
                rows.append(res)
    print(f"\nbatch 32, 1 initiator thread, {a.duration:g} s per row; Mooncake = stock TE over "
          "kernel TCP loopback (reference figures, upper end)")
    print(f"{'block':>5} {'op':>5} {'path':>22} {'MiB/s':>9} {'ops/s':>9} {'p50 us':>7} "
          f"{'p99 us':>7} {'vs Mooncake':>11} {'vs kernel':>9}")
    for bs, label in SIZES:
        for op in ("read", "write"):
            kern = next((r for r in rows if r["block"] == label and r["op"] == op and
                         r["path"] == "kernel"), None)
            for r in rows:
                if r["block"] != label or r["op"] != op:
                    continue
                ref = MOONCAKE_REF[bs][1]
                vs_k = f"{r['mib_s'] / kern['mib_s']:.2f}x" if kern else "-"
                print(f"{label:>5} {op:>5} {r['transport']:>22} {r['mib_s']:9.1f} "
                      f"{r['ops_s']:9d} {r['p50_us']:7d} {r['p99_us']:7d} "
                      f"{r['mib_s'] / ref:10.1f}x {vs_k:>9}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    subprocess.run(["rm", "-rf", tmp], check=False)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
