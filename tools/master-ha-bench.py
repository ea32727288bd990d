#!/usr/bin/python3
"""What replicating the object table costs: tide-master-bench against a master
without HA and against an HA leader (--enable_ha, table journaled to etcd), in
the same run, alternating, median of --runs.

Usage: master-ha-bench.py BUILD_DIR [--runs 3] [--ops 3000] [--clients 2]
                           [--json FILE] [--png FILE]

Starts its own etcd (Debian etcd-server) on free loopback ports with a data
directory under /tmp, and each master on free ports; everything is stopped at
the end. Prints one row per tide-master-bench operation: throughput without and
with HA, their ratio, p50 and p99 latency, and the master's CPU us per operation for
both. Writes the results (command, commit, date, load, every run's figures, the medians)
as JSON and draws them as a PNG (tools/benchplot.py): throughput, latency percentiles and
master CPU per operation, HA off beside HA on; by default BUILD_DIR/bench/master-ha-bench.json
and .png.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchplot  # noqa: E402

HA_LABEL = {"off": "master without HA", "on": "HA leader (table journaled to etcd)"}


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


# operation, ops|keys/s, p50 us, p99 us, errors, master CPU us per op ("-" when unknown)
ROW = re.compile(r"^(\S.*?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+|-)\s")


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
            cpu = None if m.group(6) == "-" else float(m.group(6))
            rows[m.group(1)] = {"ops_s": float(m.group(2)), "p50_us": float(m.group(3)),
                                "p99_us": float(m.group(4)), "cpu_us": cpu}
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=2)
    benchplot.add_output_args(ap)
    a = ap.parse_args()
    for exe in ("etcd",):
        if shutil.which(exe) is None:
            raise SystemExit(f"{exe} not found: install the Debian package etcd-server")
    master = os.path.join(a.build, "tools/master/mooncake_master")
    json_path, png_path = benchplot.default_paths(a.build, "master-ha-bench", a.json, a.png)
    rec = benchplot.Recorder("master-ha-bench", "Master: tide-master-bench against a master "
                             "without HA and an HA leader (etcd on loopback)", params={
                                 "runs": a.runs, "ops": a.ops, "clients": a.clients,
                                 "mem_objects": 0})
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

    raw = []
    for mode in ("off", "on"):
        for run, res in enumerate(results[mode]):
            for op, r in res.items():
                raw.append({"op": op, "ha": mode, "ha_label": HA_LABEL[mode], "run": run, **r})
    rows = benchplot.medians(raw, ["op", "ha"])
    for r in rows:
        off = next((x for x in rows if x["op"] == r["op"] and x["ha"] == "off"), None)
        r["on_off"] = r["ops_s"] / off["ops_s"] if r["ha"] == "on" and off else None
    print(f"tide-master-bench --mem-objects 0 --ops {a.ops} --clients {a.clients}; "
          f"median of {a.runs} runs, HA off and on alternating; etcd on loopback")
    print(f"{'operation':24} {'off ops/s':>12} {'on ops/s':>12} {'on/off':>7} "
          f"{'p50 off us':>11} {'p50 on us':>10} {'CPU us off':>11} {'CPU us on':>10}")
    cpu = lambda r: "-" if r.get("cpu_us") is None else f"{r['cpu_us']:.2f}"  # noqa: E731
    for m in [r for r in rows if r["ha"] == "off"]:
        n = next((x for x in rows if x["op"] == m["op"] and x["ha"] == "on"), None)
        if n is None:
            continue
        print(f"{m['op']:24} {m['ops_s']:12.0f} {n['ops_s']:12.0f} {n['on_off']:7.2f} "
              f"{m['p50_us']:11.1f} {n['p50_us']:10.1f} {cpu(m):>11} {cpu(n):>10}")
    def series(y):
        return [{"label": HA_LABEL[h], "where": {"ha": h}, "y": y, "color": i}
                for i, h in enumerate(("off", "on"))]

    latency = [{"label": f"{HA_LABEL[h]}, {y[:3]}", "where": {"ha": h}, "y": y, "color": i,
                "hatch": hatch}
               for i, h in enumerate(("off", "on"))
               for y, hatch in (("p50_us", None), ("p99_us", "//"))]
    panels = [
        {"kind": "bar", "title": "Throughput per operation (batch operations: keys/s), "
         "median and range", "x": "op", "y": "ops_s", "ylog": True, "xrotate": 30,
         "xlabel": "tide-master-bench operation", "ylabel": "operations/s (keys/s; log)",
         "series": series("ops_s")},
        {"kind": "bar", "title": "Latency per request: p50 (plain), p99 (hatched)", "x": "op",
         "y": "p50_us", "ylog": True, "xrotate": 30, "xlabel": "tide-master-bench operation",
         "ylabel": "latency (µs, log)", "series": latency},
        {"kind": "bar", "title": "Master CPU time per operation (per key for batches)",
         "x": "op", "y": "cpu_us", "ylog": True, "xrotate": 30,
         "xlabel": "tide-master-bench operation", "ylabel": "master CPU per op (µs, log)",
         "series": series("cpu_us")}]
    tables = [{"title": "", "columns": [
        {"key": "op", "head": "operation"},
        {"key": "ha_label", "head": "master"},
        {"key": "ops_s", "head": "ops/s (keys/s)", "fmt": "int"},
        {"key": "on_off", "head": "HA on / off", "fmt": "x"},
        {"key": "p50_us", "head": "p50 µs", "fmt": ".0f"},
        {"key": "p99_us", "head": "p99 µs", "fmt": ".0f"},
        {"key": "cpu_us", "head": "master CPU µs/op", "fmt": ".2f"},
        {"key": "n", "head": "runs", "fmt": "d"}]}]
    rec.finish(raw, rows, panels, tables, json_path=json_path, png_path=png_path, notes=[
        "Master CPU per operation: the master process's utime + stime over the phase "
        "divided by its operations (keys for batch operations).",
        "etcd (Debian etcd-server) runs on loopback with its data directory under /tmp."])
    return 0


if __name__ == "__main__":
    sys.exit(main())
