#!/usr/bin/python3
"""User-space TCP against Linux kernel TCP: runs tide-net-bench once, keeps its figures.

tide-net-bench (tools/net_bench) forks a pair of Tide endpoints (each its own EAL and
polling lcore, net_memif between them, MTU 9000) and a pair of kernel-TCP endpoints over
loopback (TCP_NODELAY, epoll, one thread each, pinned to the same two CPUs), alternating
the systems within each repetition, with the same message pattern: streams of messages of
each --sizes size over 1 and --flows connections (goodput counts only messages the receiver
verified byte for byte), and ping-pong of each --pp-sizes size on one connection (rate,
round-trip p50 and p99). It reports the CPU time both endpoints used per GB moved; Tide's
workers busy-poll, so theirs is two CPUs for the whole window.

This script runs it with --report, reads every repetition's figures back, and writes them
(command, commit, date, load, every repetition, medians, same-repetition ratios to kernel
TCP) as JSON and draws them as a PNG (tools/benchplot.py): goodput against message size
per system beside CPU per GB, and ping-pong rate and RTT percentiles. By default
BUILD_DIR/bench/net-bench.json and .png.

usage: tools/net-bench-table.py BUILD_DIR [--duration S] [--warmup S] [--repeat N]
            [--sizes 64k,1m] [--pp-sizes 64,4k] [--flows N] [--elide] [--zc] [--adaptive]
            [--json FILE] [--png FILE]
The options are tide-net-bench's own, passed through (its defaults when left out).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchplot  # noqa: E402

GBIT_TO_MIB = 1e9 / 8 / (1 << 20)  # Gbit/s -> MiB/s
SIZE = re.compile(r"^(\d+)(B|KiB|MiB|GiB)$")
UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def system_label(system, zc):
    zc_text = ", zero-copy sends" if zc else ""
    return {"tide": f"Tide user-space TCP (memif, software checksums{zc_text})",
            "tide-elide": f"Tide user-space TCP (memif, checksums elided{zc_text})",
            "tide-adaptive": f"Tide user-space TCP (memif, adaptive idle{zc_text})",
            "kernel": "Linux kernel TCP (loopback)"}.get(system, system)


def parse_size(text):
    m = SIZE.match(text)
    if not m:
        raise ValueError(f"tide-net-bench row size {text!r}")
    return int(m.group(1)) * UNIT[m.group(2)]


def metric(name):
    """A report row's name -> (kind, size, flows, field)."""
    w = name.split()
    if w[0] == "goodput":
        return "stream", parse_size(w[1]), int(w[2][1:]), "gbit_s"
    if w[0] == "CPU/GB":
        return "stream", parse_size(w[1]), int(w[2][1:]), "cpu_s_per_gb"
    if w[0] == "ping-pong":
        return "pingpong", parse_size(w[2]), 1, "msg_s"
    if w[0] == "RTT":
        return "pingpong", parse_size(w[2]), 1, f"rtt_{w[1]}_us"
    raise ValueError(f"tide-net-bench row {name!r}")


def raw_rows(report, zc):
    """One row per (system, repetition, kind, size, flows) with every figure of it."""
    rows = {}
    for row in report["rows"]:
        kind, size, flows, field = metric(row["name"])
        for system, cell in row.items():
            if not isinstance(cell, dict):
                continue
            for rep, v in enumerate(cell["values"]):
                r = rows.setdefault((system, rep, kind, size, flows), {
                    "system": system, "system_label": system_label(system, zc), "run": rep,
                    "kind": kind, "size": size, "flows": flows})
                ok = report["runs"][system][rep]["ok"]
                r[field] = v if ok else None
                r["others_cpu"] = report["runs"][system][rep]["others_cpu"]
    out = list(rows.values())
    for r in out:
        if r.get("gbit_s") is not None:
            r["mib_s"] = r["gbit_s"] * GBIT_TO_MIB
    # Same-repetition ratios to kernel TCP (the systems alternate within a repetition).
    for r in out:
        k = rows.get(("kernel", r["run"], r["kind"], r["size"], r["flows"]))
        if k is None or r["system"] == "kernel":
            continue
        for f in ("gbit_s", "msg_s", "rtt_p50_us", "rtt_p99_us", "cpu_s_per_gb"):
            if r.get(f) is not None and k.get(f):
                r[f + "_vs_kernel"] = r[f] / k[f]
    return out


def panels_and_tables(systems, flows, zc):
    def streams(y):
        """One series per system and flow count (1 flow solid, more dashed)."""
        out = []
        for i, s in enumerate(systems):
            for fl, style in ((1, "-"), (flows, "--"))[:2 if flows > 1 else 1]:
                out.append({"label": f"{system_label(s, zc)}, {fl} flow{'s' if fl > 1 else ''}",
                            "where": {"system": s, "kind": "stream", "flows": fl}, "y": y,
                            "color": i, "style": style})
        return out

    def pingpong(ys):
        """One series per system and field (the first solid, the second dashed)."""
        return [{"label": system_label(s, zc) + suffix, "y": y, "color": i, "style": style,
                 "where": {"system": s, "kind": "pingpong"}}
                for i, s in enumerate(systems)
                for (y, suffix), style in zip(ys, ("-", "--"))]

    panels = [
        {"kind": "xy", "title": "Stream goodput (verified bytes), median and range of "
         "repetitions", "x": "size", "y": "mib_s", "xlog2": True,
         "xlabel": "message size (log2)", "ylabel": "goodput (MiB/s)",
         "series": streams("mib_s")},
        {"kind": "xy", "title": "CPU time of both endpoints per GB moved", "x": "size",
         "y": "cpu_s_per_gb", "xlog2": True, "xlabel": "message size (log2)",
         "ylabel": "CPU seconds per GB (both endpoints)",
         "series": streams("cpu_s_per_gb")},
        {"kind": "xy", "title": "Ping-pong round-trip time: p50 (solid), p99 (dashed)",
         "x": "size", "y": "rtt_p50_us", "xlog2": True, "ylog": True,
         "xlabel": "message size (log2)", "ylabel": "round-trip time (µs, log)",
         "series": pingpong([("rtt_p50_us", ", p50"), ("rtt_p99_us", ", p99")])},
        {"kind": "xy", "title": "Ping-pong rate, one connection", "x": "size", "y": "msg_s",
         "xlog2": True, "ylog": True, "xlabel": "message size (log2)",
         "ylabel": "round trips per second (log)",
         "series": pingpong([("msg_s", "")])}]
    tables = [
        {"title": "Streams:", "where": {"kind": "stream"}, "columns": [
            {"key": "size", "head": "message", "fmt": "size"},
            {"key": "flows", "head": "flows", "fmt": "d"},
            {"key": "system_label", "head": "system"},
            {"key": "gbit_s", "head": "Gbit/s", "fmt": ".1f"},
            {"key": "mib_s", "head": "MiB/s", "fmt": ".0f"},
            {"key": "cpu_s_per_gb", "head": "CPU s/GB", "fmt": ".2f"},
            {"key": "gbit_s_vs_kernel", "head": "goodput vs kernel", "fmt": "x"},
            {"key": "cpu_s_per_gb_vs_kernel", "head": "CPU/GB vs kernel", "fmt": "x"},
            {"key": "n", "head": "repetitions", "fmt": "d"}]},
        {"title": "Ping-pong, one connection:", "where": {"kind": "pingpong"}, "columns": [
            {"key": "size", "head": "message", "fmt": "size"},
            {"key": "system_label", "head": "system"},
            {"key": "msg_s", "head": "round trips/s", "fmt": "int"},
            {"key": "rtt_p50_us", "head": "RTT p50 µs", "fmt": ".1f"},
            {"key": "rtt_p99_us", "head": "RTT p99 µs", "fmt": ".1f"},
            {"key": "msg_s_vs_kernel", "head": "rate vs kernel", "fmt": "x"},
            {"key": "rtt_p50_us_vs_kernel", "head": "p50 vs kernel", "fmt": "x"},
            {"key": "n", "head": "repetitions", "fmt": "d"}]}]
    return panels, tables


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    for opt in ("--duration", "--warmup", "--repeat", "--sizes", "--pp-sizes", "--flows",
                "--mtu", "--cpus"):
        ap.add_argument(opt)
    for flag in ("--elide", "--zc", "--adaptive"):
        ap.add_argument(flag, action="store_true")
    benchplot.add_output_args(ap)
    a = ap.parse_args()
    exe = os.path.join(a.build_dir, "tools", "net_bench", "tide-net-bench")
    if not os.access(exe, os.X_OK):
        ap.error(f"{exe}: not built")
    json_path, png_path = benchplot.default_paths(a.build_dir, "net-bench", a.json, a.png)
    args = []
    for opt in ("duration", "warmup", "repeat", "sizes", "pp_sizes", "flows", "mtu", "cpus"):
        v = getattr(a, opt)
        if v is not None:
            args += [f"--{opt.replace('_', '-')}", v]
    args += [f"--{f}" for f in ("elide", "zc", "adaptive") if getattr(a, f)]
    rec = benchplot.Recorder("net-bench", "User-space TCP (Tide on net_memif) against Linux "
                             "kernel TCP (loopback): tide-net-bench, two processes, one CPU each",
                             params={"tide_net_bench_args": args})
    with tempfile.TemporaryDirectory(prefix="tide-net-bench-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        cmd = [exe, *args, "--report", report_path]
        print("+ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
        if not os.path.exists(report_path):
            print(f"tide-net-bench exited {rc} without a report", file=sys.stderr)
            return 1
        with open(report_path) as f:
            report = json.load(f)
    raw = raw_rows(report, a.zc)
    rows = benchplot.medians(raw, ["system", "kind", "size", "flows"])
    for r in rows:
        for f in ("gbit_s_vs_kernel", "cpu_s_per_gb_vs_kernel", "msg_s_vs_kernel",
                  "rtt_p50_us_vs_kernel"):
            if r["kind"] == ("stream" if f[0] in "gc" else "pingpong"):
                r.setdefault(f, None)
    systems = list(report["runs"])
    panels, tables = panels_and_tables(systems, report["config"]["flows"], a.zc)
    rec.finish(raw, rows, panels, tables, json_path=json_path, png_path=png_path,
               params={"config": report["config"], "exit_status": rc,
                       "pairs": report["runs"]},
               notes=["MiB/s = tide-net-bench's goodput in Gbit/s x 10^9 / 8 / 2^20.",
                      "CPU s/GB: CPU seconds of both endpoints per 10^9 bytes moved; Tide's "
                      "workers busy-poll, so theirs is two CPUs for the whole window.",
                      "others_cpu in each row: CPUs' worth of time other processes used "
                      "during that pair (the machine's load, measured by tide-net-bench)."])
    return rc


if __name__ == "__main__":
    sys.exit(main())
