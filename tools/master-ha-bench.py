#!/usr/bin/python3
"""What replicating the object table costs: tide-master-bench against a master
without HA and against an HA leader (--enable_ha, table journaled to etcd), in
the same run, alternating, median of --runs.

Usage: master-ha-bench.py BUILD_DIR [--runs 3] [--ops 3000] [--clients 2]

Starts its own etcd (Debian etcd-server) on free loopback ports with a data
directory under /tmp, and each master on free ports; everything is stopped at
the end. Prints one row per tide-master-bench operation: throughput without and
with HA, their ratio, and the master's CPU us per operation for both.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, want, deadline_s):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                body = r.read().decode()
                if want in body:
                    return body
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url}: no answer with {want!r} within {deadline_s} s")


ROW = re.compile(r"^(\S+(?:\+\S+)?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)")


def bench(build, port, pid, ops, clients):
    out = subprocess.run(
        [os.path.join(build, "tools/master/tide-master-bench"), "--master",
         f"127.0.0.1:{port}", "--master-pid", str(pid), "--ops", str(ops),
         "--mem-objects", "0", "--clients", str(clients)],
        capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"tide-master-bench failed:\n{out.stdout}\n{out.stderr}")
    rows = {}
    for line in out.stdout.splitlines():
        m = ROW.match(line)
        if m:
            if int(m.group(5)) != 0:
                raise SystemExit(f"errors in {m.group(1)}: {line}")
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(6)))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=2)
    a = ap.parse_args()
    for exe in ("etcd",):
        if shutil.which(exe) is None:
            raise SystemExit(f"{exe} not found: install the Debian package etcd-server")
    master = os.path.join(a.build, "tools/master/mooncake_master")
    tmp = tempfile.mkdtemp(prefix="tide-ha-bench-")
    cport, pport = free_port(), free_port()
    etcd = subprocess.Popen(
        ["etcd", "--data-dir", os.path.join(tmp, "etcd"), "--name", "default",
         "--listen-client-urls", f"http://127.0.0.1:{cport}",
         "--advertise-client-urls", f"http://127.0.0.1:{cport}",
         "--listen-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-cluster", f"default=http://127.0.0.1:{pport}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = {"off": [], "on": []}
    try:
        wait_http(f"http://127.0.0.1:{cport}/health", "true", 20)
        for run in range(a.runs):
            for mode in ("off", "on"):
                rport, hport = free_port(), free_port()
                args = [master, f"--rpc_port={rport}", f"--metrics_port={hport}",
                        "--metrics_host=127.0.0.1", "--log_level=warn"]
                if mode == "on":
                    args += ["--enable_ha", f"--etcd_endpoints=127.0.0.1:{cport}",
                             "--rpc_address=127.0.0.1",
                             f"--cluster_id=bench{run}"]
                p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(tmp, f"m-{mode}-{run}.log"), "w"))
                try:
                    wait_http(f"http://127.0.0.1:{hport}/health",
                              "leader" if mode == "on" else "OK", 20)
                    if mode == "on":
                        # The leader opens its RPC port once it replayed the (empty) log.
                        end = time.monotonic() + 20
                        while time.monotonic() < end:
                            try:
                                socket.create_connection(("127.0.0.1", rport), 1).close()
                                break
                            except OSError:
                                time.sleep(0.1)
                    results[mode].append(bench(a.build, rport, p.pid, a.ops, a.clients))
                finally:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=30)
    finally:
        etcd.terminate()
        etcd.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"tide-master-bench --mem-objects 0 --ops {a.ops} --clients {a.clients}; "
          f"median of {a.runs} runs, HA off and on alternating; etcd on loopback")
    print(f"{'operation':24} {'off ops/s':>12} {'on ops/s':>12} {'on/off':>7} "
          f"{'p50 off us':>11} {'p50 on us':>10} {'CPU us off':>11} {'CPU us on':>10}")
    for op in results["off"][0]:
        off = [r[op] for r in results["off"]]
        on = [r[op] for r in results["on"] if op in r]
        if not on:
            continue
        m = [statistics.median(x[i] for x in off) for i in range(3)]
        n = [statistics.median(x[i] for x in on) for i in range(3)]
        print(f"{op:24} {m[0]:12.0f} {n[0]:12.0f} {n[0] / m[0]:7.2f} "
              f"{m[1]:11.1f} {n[1]:10.1f} {m[2]:11.2f} {n[2]:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
