#!/usr/bin/python3
"""The Python transfer engine (mooncake.engine) against the C engine, same run.

Part 1, the table. For each block size (4 KiB, 64 KiB, 1 MiB, 64 MiB), operation (read,
write) and path, batch 32 (4 for 64 MiB: a batch fits the 256 MiB buffers), one initiator
thread, two initiators take turns against the same kind of target, a tide-bench target
process (the C engine, 256 MiB registered), started afresh for every measurement:
  C       tide-bench --mode=initiator (tide_te_batch_alloc/submit/wait per batch),
  Python  this script's initiator: mooncake.engine.TransferEngine, initialize(127.0.0.1,
          "P2PHANDSHAKE", "tcp", ""), one register_memory of 256 MiB, then
          batch_transfer_sync_write or _read(peer, srcs, dsts, lens) in a loop (the lists of
          addresses are built before the clock starts, so what is timed is the API call).
Paths: kernel sockets on loopback, and Tide's user-space TCP on DPDK net_memif (--no-huge,
MTU 9000, checksums elided, the initiator's polling lcore on CPU 0 and the target's on
CPU 1), the node environment given to each process as TIDE_* variables, as
tools/te-bench-table.py does. Printed per row: MiB/s of both, Python/C, the Python overhead
per batch (1/py_batches_per_s - 1/c_batches_per_s, in us), the initiator process's CPU time
(utime + stime from /proc/PID/stat, all its threads, the polling lcore included) per GiB
moved over the steady part of the run (between its first and last progress lines), and the
ratio of each to stock Mooncake's TCP transport figures of ../shared/spec/reference-figures.md
(--stock-ref names the set: 2026-12-02 by default, the same as te-bench-table.py). Goal:
Python within 5 % of C at 64 KiB and above.

Part 2, the weight sync (Miles' P2P weight update). A "rollout" process registers one
region holding every parameter (zeroed, resident); a "trainer" process holds the parameters
as separate numpy arrays (--ws-total bytes, a few thousand tensors by default: Miles' size
mix, mostly 4 KiB-3 MiB with some 16-256 MiB, deterministic contents, rewritten before every
sync outside the clock) and registers each with register_memory. Both run with
TIDE_RDMA_AS_TCP=1 and initialize(127.0.0.1, "P2PHANDSHAKE", "rdma", ""), as Miles and
SGLang call it. A sync pushes every parameter: buckets of consecutive parameters
(--ws-bucket bytes each, Miles' update buffer), one batch_transfer_sync_write per bucket
(one slice per parameter), on a pool of 4 threads; timed from the first call to the last
return. The first sync (connections opened) is reported apart; then --runs timed syncs,
median. After the first and the last sync the receiver's CRC32 of every parameter is
compared with the sender's. Kernel sockets and user-space TCP (trainer on CPU 0, rollout on
CPU 1) in the same run. Compared with stock's Python TransferEngine over kernel TCP on this
machine class, about 1.2 GiB/s for 1,200 parameters of 4 KiB-3 MiB from 4 threads (the
issue's figure); goals >= 5x that over user-space TCP and >= 2x over kernel sockets.

Writes the results (command, commit, date, /proc/loadavg before and after, every run's
figures, the medians) as JSON and draws them as one PNG (tools/benchplot.py): throughput
against block size (log2) per initiator and path beside stock's figures, Python/C per block
size, and the weight sync's GiB/s and seconds per sync as bars. By default
BUILD_DIR/bench/engine-py-bench.json and .png.

If initialize(..., "rdma", "") fails on a path (engines before commit ce91690 did over
user-space TCP: their RDMA attempt tore down the DPDK transport it had started, and the EAL
starts once per process), that path's weight sync is measured with protocol "tcp" instead,
labelled so in its row, the notes and the verdict, and the failure is recorded in the JSON.

usage: tools/engine-py-bench.py BUILD_DIR [--duration S] [--runs N] [--sizes 4K,64K,1M,64M]
           [--paths kernel,memif] [--ws-total 2G] [--ws-bucket 512M] [--ws-threads 4]
           [--no-table | --no-weight-sync] [--stock-ref 2026-12-02] [--json F] [--png F]
Exit status 1 when a measurement failed or a checksum differed (the goals are reported,
not enforced).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
BUFFER = 256 * MiB  # registered by every table initiator and target
sys.path.insert(0, HERE)
import benchplot  # noqa: E402  (results file and pictures)

SIZES = [(4096, "4K"), (65536, "64K"), (1 << 20, "1M"), (64 << 20, "64M")]
PATHS = ("kernel", "memif")
PATH_TEXT = {"kernel": "kernel TCP (loopback)", "memif": "user-space TCP (memif)"}
IMPL_TEXT = {"c": "C engine (tide-bench)", "py": "Python mooncake.engine"}
# ../shared/spec/reference-figures.md: stock TE (transfer_engine_bench, HEAD 3b5a5941) over
# kernel TCP loopback, batch 32, 1 thread, connection pool off; (read, write) MiB/s.
STOCK_REFS = {
    "2026-12-02": ("stock Mooncake TE, kernel TCP, pool off (reference-figures.md, "
                   "2026-12-02, quiet 2-core VM)",
                   {4096: (55, 55), 65536: (771, 708), 1 << 20: (1748, 1696)}),
    "2026-12-06": ("stock Mooncake TE, kernel TCP, pool off (reference-figures.md, "
                   "2026-12-06, faster quiet 2-core VM)",
                   {4096: (55, 55), 65536: (876, 853), 1 << 20: (2234, 2195)}),
}
# The issue's figure for stock's Python TransferEngine, Miles-sized parameters, kernel TCP.
STOCK_WS_GIB_S = 1.2
STOCK_WS_TEXT = ("stock Python TransferEngine, kernel TCP, 1,200 parameters of 4 KiB-3 MiB, "
                 "4 threads: about 1.2 GiB/s (the issue's figure, not measured here; "
                 "reference-figures.md, 2026-12-06, lists ~1260 MiB/s)")
WS_GOALS = {"memif": 5.0, "kernel": 2.0}  # times STOCK_WS_GIB_S
PY_GOAL = 0.95  # Python / C at 64 KiB and above
WS_ALIGN = 512  # bytes between parameters in the rollout's region
FILL_K = 0x9E3779B97F4A7C15


def batch_for(bs):
    return 4 if bs >= 64 * MiB else 32


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)I?B?", s.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"{s!r}: a size such as 4096, 64K, 512M, 2G")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


# ------------------------------------------------------------ process environments

def clean_env(build, extra=None):
    """The caller's environment without Tide/Mooncake settings, with this build's
    libtidestore.so and the repository's mooncake package, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDE_", "MOONCAKE_", "MC_"))}
    env["LIBTIDESTORE"] = os.path.join(build, "store", "client", "libtidestore.so")
    pp = os.path.join(REPO, "store", "python")
    env["PYTHONPATH"] = pp + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def memif_env(build, role, ip, cpu, sock, tag, extra=None):
    """One node of a single memif link: "server" (starts first) or "client"; polling
    lcore on `cpu`; the same settings as te-bench-table.py's memif rows."""
    env = {"TIDE_HUGEPAGES": "off",
           "TIDE_DPDK_DEVICE": f"net_memif0,role={role},socket={sock},socket-abstract=no,"
                               "bsize=9216",
           "TIDE_DATA_IP": ip, "TIDE_TCP_RTO_MIN_US": "5000", "TIDE_MTU": "9000",
           "TIDE_CSUM": "elide", "TIDE_LCORES": str(cpu % os.cpu_count()),
           "TIDE_FILE_PREFIX": f"tide-epb-{role}-{os.getpid()}-{tag}"}
    env.update(extra or {})
    return clean_env(build, env)


def remove_runtime_dirs():
    """DPDK's runtime directories of this run's processes (TIDE_FILE_PREFIX tide-epb-*-PID-*:
    a config file and the memory-segment arrays each, left behind when a process exits)."""
    bases = {"/var/run/dpdk", "/run/dpdk"}
    if os.environ.get("XDG_RUNTIME_DIR"):
        bases.add(os.path.join(os.environ["XDG_RUNTIME_DIR"], "dpdk"))
    for base in bases:
        for d in glob.glob(os.path.join(base, f"tide-epb-*-{os.getpid()}-*")):
            shutil.rmtree(d, ignore_errors=True)


def proc_cpu_s(pid):
    """utime + stime of a process (every thread), in seconds; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(p, sig=signal.SIGTERM, timeout=30):
    """Ends a child: sig, then SIGKILL after timeout (its output is read elsewhere)."""
    if p.poll() is None:
        p.send_signal(sig)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def free_port():
    """A TCP port free on 127.0.0.1 now (the memif target's handshake port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ part 1: table

PROGRESS = re.compile(r"^[\w-]+: +([\d.]+) s +([\d.]+) MiB/s\s*$")
SUMMARY = re.compile(r"transport=(\S+) operation=(\S+) block_size=(\d+) batch_size=(\d+) "
                     r"threads=\d+.*?: ([\d.]+) MiB/s, (\d+) ops/s, batch latency p50 (\d+) us "
                     r"p99 (\d+) us, (\d+) bytes in ([\d.]+) s(.*)$", re.M)  # not the last line


def start_target(bench, env, extra):
    """A tide-bench target; (process, its name) once it prints "target 'NAME' ready"."""
    p = subprocess.Popen([bench, "--mode=target", f"--buffer_size={BUFFER}",
                          "--host=127.0.0.1", *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"target '([^']+)' ready", line)
        if m:
            # Drain the rest of its output in the background (it must never block on a pipe).
            threading.Thread(target=p.stdout.read, daemon=True).start()
            return p, m.group(1)
    p.kill()
    p.wait()
    raise RuntimeError("tide-bench target did not start within 60 s:\n" + "".join(seen))


def follow_initiator(ini, tgt, timeout):
    """Reads the initiator's merged output to its end, sampling both processes' CPU time
    at every progress line. Returns (summary dict or None, output text)."""
    timer = threading.Timer(timeout, ini.kill)
    timer.start()
    lines, samples = [], []
    try:
        for line in ini.stdout:
            lines.append(line)
            m = PROGRESS.match(line.strip())
            if m:
                samples.append((float(m.group(1)), float(m.group(2)), proc_cpu_s(ini.pid),
                                proc_cpu_s(tgt.pid) if tgt else None))
        ini.wait()
    finally:
        timer.cancel()
    out = "".join(lines)
    m = SUMMARY.search(out)
    if ini.returncode != 0 or not m or "FAILED" in m.group(11) or "MISMATCH" in m.group(11):
        return None, out
    r = {"transport": m.group(1), "mib_s": float(m.group(5)), "ops_s": int(m.group(6)),
         "p50_us": int(m.group(7)), "p99_us": int(m.group(8)), "bytes": int(m.group(9)),
         "secs": float(m.group(10)), "cpu_s_per_gib": None, "tgt_cpu_s_per_gib": None,
         "cpu_window_s": None}
    # CPU per GiB over the steady part: from the first progress line to the last, the bytes
    # of that window from the lines' own rates and times.
    if len(samples) >= 2 and samples[0][2] is not None and samples[-1][2] is not None:
        moved = sum(samples[i][1] * (samples[i][0] - samples[i - 1][0]) * MiB
                    for i in range(1, len(samples)))
        if moved > 0:
            r["cpu_window_s"] = round(samples[-1][0] - samples[0][0], 2)
            r["cpu_s_per_gib"] = (samples[-1][2] - samples[0][2]) / (moved / GiB)
            if samples[0][3] is not None and samples[-1][3] is not None:
                r["tgt_cpu_s_per_gib"] = (samples[-1][3] - samples[0][3]) / (moved / GiB)
    return r, out


def initiator_cmd(impl, bench, peer, op, bs, duration):
    flags = [f"--segment_id={peer}", f"--buffer_size={BUFFER}", f"--operation={op}",
             f"--block_size={bs}", f"--batch_size={batch_for(bs)}", f"--duration={duration}",
             "--open_retry_s=30"]
    if impl == "c":
        return [bench, "--mode=initiator", "--host=127.0.0.1", *flags]
    return [PY, os.path.abspath(__file__), "_initiator", *flags]


def measure(build, impl, path, op, bs, duration, tmp, n):
    """One initiator run against a fresh tide-bench target; (dict or None, output)."""
    bench = os.path.join(build, "tools", "te_bench", "tide-bench")
    timeout = duration + 120
    if path == "kernel":
        tgt, name = start_target(bench, clean_env(build), [])
        try:
            ini = subprocess.Popen(initiator_cmd(impl, bench, name, op, bs, duration),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=clean_env(build))
            return follow_initiator(ini, tgt, timeout)
        finally:
            stop(tgt)
    # memif: the initiator is the link's server and starts first; the target (client) is
    # named by the handshake port given to it; the initiator ends first, then the target.
    sock = os.path.join(tmp, f"memif{n}.sock")
    port = free_port()
    ini = subprocess.Popen(initiator_cmd(impl, bench, f"127.0.0.1:{port}", op, bs, duration),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=memif_env(build, "server", "10.92.0.1", 0, sock, n))
    tgt = None
    try:
        tgt, _ = start_target(bench, memif_env(build, "client", "10.92.0.2", 1, sock, n),
                              [f"--rpc_port={port}"])
        return follow_initiator(ini, tgt, timeout)
    except RuntimeError as e:
        ini.kill()
        return None, str(e) + "\ninitiator:\n" + ini.communicate()[0]
    finally:
        if ini.poll() is None:
            stop(ini, signal.SIGKILL)
        if tgt is not None:
            stop(tgt)


def run_table(a, sizes, paths, tmp):
    """Every run's rows (one per initiator) and whether one failed."""
    raw, failed, n = [], False, 0
    for run in range(a.runs):
        for bs, label in sizes:
            for op in ("read", "write"):
                for path in paths:
                    # Alternate which initiator goes first, run by run.
                    for impl in (("c", "py") if run % 2 == 0 else ("py", "c")):
                        n += 1
                        res, out = measure(a.build_dir, impl, path, op, bs, a.duration, tmp, n)
                        what = f"run {run + 1}/{a.runs} {label:>3} {op:>5} {path:>6} {impl:>2}"
                        if res is None:
                            print(f"{what}: FAILED\n{out}", file=sys.stderr, flush=True)
                            failed = True
                            continue
                        res.update({"table": "main", "impl": impl, "path": path, "op": op,
                                    "block": label, "bs": bs, "batch": batch_for(bs),
                                    "run": run, "series": f"{impl}-{path}"})
                        raw.append(res)
                        cpu = (f", CPU {res['cpu_s_per_gib']:.3f} s/GiB"
                               if res["cpu_s_per_gib"] is not None else "")
                        print(f"{what}: {res['mib_s']:9.1f} MiB/s ({res['transport']}){cpu}",
                              flush=True)
    # Same-run comparisons, on the Python rows.
    for r in raw:
        if r["impl"] != "py":
            continue
        c = next((x for x in raw if x["impl"] == "c" and x["run"] == r["run"] and
                  x["path"] == r["path"] and x["op"] == r["op"] and x["bs"] == r["bs"]), None)
        r["vs_c"] = r["mib_s"] / c["mib_s"] if c else None
        per_batch = r["bs"] * r["batch"]
        r["overhead_us"] = ((per_batch / (r["mib_s"] * MiB) - per_batch / (c["mib_s"] * MiB))
                            * 1e6 if c else None)
    return raw, failed


def table_rows(raw, stock):
    rows = benchplot.medians(raw, ["table", "impl", "path", "op", "block", "bs", "batch"])
    for r in rows:
        ref = stock.get(r["bs"])
        r["vs_stock"] = r["mib_s"] / ref[0 if r["op"] == "read" else 1] if ref else None
        r["label"] = f"{IMPL_TEXT[r['impl']]}, {PATH_TEXT[r['path']]}"
        if r["impl"] == "py":
            r.setdefault("vs_c", None)
            r.setdefault("overhead_us", None)
            r["goal_applies"] = r["bs"] >= 65536
            r["goal_met"] = (r["vs_c"] >= PY_GOAL if r["goal_applies"] and r["vs_c"]
                             else None)
        r["goal_text"] = ("-" if r.get("goal_met") is None else
                          "met" if r["goal_met"] else "NOT met")
    return rows


def print_table(rows, sizes, paths, a, stock_text):
    def f(v, spec, none="-"):
        return none if v is None else format(v, spec)

    print(f"\nPython mooncake.engine vs the C engine (tide-bench), both against a tide-bench "
          f"target; batch 32 (64 MiB: 4), 1 initiator thread, {a.duration:g} s per row, "
          f"median of {a.runs} run(s); Py/C and Py +us/batch are medians of same-run "
          f"values.\nstock = {stock_text}")
    print(f"{'block':>5} {'op':>5} {'path':>6} {'C MiB/s':>9} {'Py MiB/s':>9} {'Py/C':>6} "
          f"{'Py +us/batch':>12} {'C CPU s/GiB':>11} {'Py CPU s/GiB':>12} {'C/stock':>7} "
          f"{'Py/stock':>8}  goal (Py >= 0.95 C)")
    for bs, label in sizes:
        for op in ("read", "write"):
            for path in paths:
                c = next((r for r in rows if r["impl"] == "c" and r["bs"] == bs and
                          r["op"] == op and r["path"] == path), None)
                p = next((r for r in rows if r["impl"] == "py" and r["bs"] == bs and
                          r["op"] == op and r["path"] == path), None)
                if c is None and p is None:
                    continue
                goal = "-"
                if p is not None and p["goal_applies"]:
                    goal = "-" if p["goal_met"] is None else ("met" if p["goal_met"]
                                                              else "NOT met")
                print(f"{label:>5} {op:>5} {path:>6} "
                      f"{f(c and c['mib_s'], '9.1f'):>9} {f(p and p['mib_s'], '9.1f'):>9} "
                      f"{f(p and p['vs_c'], '6.3f'):>6} "
                      f"{f(p and p['overhead_us'], '12.1f'):>12} "
                      f"{f(c and c['cpu_s_per_gib'], '11.3f'):>11} "
                      f"{f(p and p['cpu_s_per_gib'], '12.3f'):>12} "
                      f"{f(c and c['vs_stock'], '6.2f') + ('x' if c and c['vs_stock'] else ''):>7} "
                      f"{f(p and p['vs_stock'], '6.2f') + ('x' if p and p['vs_stock'] else ''):>8}"
                      f"  {goal}")
    judged = [r for r in rows if r["impl"] == "py" and r.get("goal_applies")]
    met = [r for r in judged if r["goal_met"]]
    miss = [r for r in judged if not r["goal_met"]]
    verdict = ("no row at 64 KiB or above measured" if not judged else
               "MET" if not miss else "NOT MET")
    print(f"goal, Python within 5 % of C at 64 KiB and above: {verdict} "
          f"({len(met)} of {len(judged)} rows)"
          + ("; below: " + ", ".join(f"{r['block']} {r['op']} {r['path']} "
                                      f"{'-' if r['vs_c'] is None else format(r['vs_c'], '.3f')}"
                                      for r in miss) if miss else ""))
    return verdict


# ----------------------------------------------- the Python initiator (child process)

def py_initiator(argv):
    """tide-bench's initiator loop through mooncake.engine: the same flags, the same
    progress lines (stderr, each second) and summary line (stdout)."""
    ap = argparse.ArgumentParser(prog="engine-py-bench _initiator")
    ap.add_argument("--segment_id", required=True)
    ap.add_argument("--buffer_size", type=int, default=BUFFER)
    ap.add_argument("--operation", choices=("read", "write"), default="read")
    ap.add_argument("--block_size", type=int, default=65536)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--open_retry_s", type=float, default=0.0)
    ap.add_argument("--protocol", default="tcp")
    # Diagnosis only (what part of a Python call costs what): "engine" is the public API;
    # "ctypes-sync" calls tide_te_transfer_sync and "ctypes-batch" tide_te_batch_alloc,
    # submit_v, wait, result and release directly, with arrays built before the clock.
    ap.add_argument("--api", choices=("engine", "ctypes-sync", "ctypes-batch"),
                    default="engine")
    a = ap.parse_args(argv)
    import numpy
    from mooncake.engine import TransferEngine
    te = TransferEngine()
    if te.initialize("127.0.0.1", "P2PHANDSHAKE", a.protocol, "") != 0:
        print("engine-py-bench: initialize failed", file=sys.stderr)
        return 1
    buf = numpy.full(a.buffer_size, 0x5A, dtype=numpy.uint8)  # every page present
    base = buf.ctypes.data
    if te.register_memory(base, a.buffer_size) != 0:
        print("engine-py-bench: register_memory failed", file=sys.stderr)
        return 1
    peer = a.segment_id
    give_up = time.monotonic() + a.open_retry_s
    remote = te.get_first_buffer_address(peer)
    while not remote and time.monotonic() < give_up:
        time.sleep(0.2)
        remote = te.get_first_buffer_address(peer)
    if not remote:
        print(f"engine-py-bench: open segment '{peer}' failed", file=sys.stderr)
        return 1
    bs, nb = a.block_size, a.batch_size
    per_batch = bs * nb
    if per_batch > a.buffer_size:
        print("engine-py-bench: a batch does not fit in the buffer", file=sys.stderr)
        return 2
    # The batches walk the whole buffer as tide-bench's do; lists built before the clock.
    npos = a.buffer_size // per_batch
    srcs = [[base + k * per_batch + j * bs for j in range(nb)] for k in range(npos)]
    dsts = [[remote + k * per_batch + j * bs for j in range(nb)] for k in range(npos)]
    lens = [bs] * nb
    xfer = te.batch_transfer_sync_write if a.operation == "write" else \
        te.batch_transfer_sync_read
    if a.api != "engine":
        xfer, srcs, dsts, lens = raw_xfer(te, a.api, a.operation, peer, srcs, dsts, lens)
    try:
        from mooncake.engine import _lib  # the transport's name, for the summary line
        transport = _lib.tide_te_transport_name(te.get_engine_ptr()).decode()
    except Exception:  # noqa: BLE001 (a name only)
        transport = "?"
    lat = []
    moved = last_moved = k = 0
    failed = False
    clock = time.perf_counter
    t0 = last = clock()
    while True:
        s = clock()
        rc = xfer(peer, srcs[k], dsts[k], lens)
        e = clock()
        if rc != 0:
            failed = True
            break
        lat.append(e - s)
        moved += per_batch
        k = k + 1 if k + 1 < npos else 0
        if e - last >= 1.0 or e - t0 >= a.duration:
            print(f"engine-py-bench: {e - t0:5.1f} s  "
                  f"{(moved - last_moved) / (e - last) / MiB:9.1f} MiB/s",
                  file=sys.stderr, flush=True)
            last, last_moved = e, moved
            if e - t0 >= a.duration:
                break
    elapsed = clock() - t0
    lat.sort()
    p50 = lat[len(lat) // 2] * 1e6 if lat else 0
    p99 = lat[len(lat) * 99 // 100] * 1e6 if lat else 0
    print(f"engine-py-bench: transport={transport} operation={a.operation} block_size={bs} "
          f"batch_size={nb} threads=1: {moved / elapsed / MiB:.1f} MiB/s, "
          f"{moved / bs / elapsed:.0f} ops/s, batch latency p50 {p50:.0f} us p99 {p99:.0f} us, "
          f"{moved} bytes in {elapsed:.2f} s{', FAILED' if failed else ''}", flush=True)
    te.unregister_memory(base)
    return 1 if failed or moved == 0 else 0


def raw_xfer(te, api, op, peer, srcs, dsts, lens):
    """The --api diagnosis: a transfer function over the C entry points themselves, with
    the address lists turned into C arrays once; returns (xfer, srcs, dsts, lens)."""
    import ctypes
    from mooncake import engine as eng
    u64 = ctypes.c_uint64
    arr = (lambda v: (u64 * len(v))(*v))
    srcs, dsts, lens = [arr(v) for v in srcs], [arr(v) for v in dsts], arr(lens)
    h, seg, code = te.get_engine_ptr(), te._segment(peer), 1 if op == "write" else 0
    lib, n = eng._lib, len(lens)

    if api == "ctypes-sync":
        def xfer(_peer, s, d, ln):
            return lib.tide_te_transfer_sync(h, seg, code, s, d, ln, n, 60000)
        return xfer, srcs, dsts, lens

    def xfer(_peer, s, d, ln):  # noqa: F811 (the other api)
        b = u64()
        rc = lib.tide_te_batch_alloc(h, n, ctypes.byref(b))
        if rc == 0:
            rc = lib.tide_te_submit_v(h, b, seg, code, s, d, ln, n)
            if rc == 0:
                rc = lib.tide_te_wait(h, b, 60000) or lib.tide_te_batch_result(h, b)
            lib.tide_te_batch_release(h, b)
        return rc
    return xfer, srcs, dsts, lens


# ------------------------------------------------------------ part 2: weight sync

def ws_sizes(total, seed=7):
    """Parameter sizes of about `total` bytes in model order, Miles' mix: up to half the
    bytes in large tensors (embedding and output 256 MiB, then 128/64/32/16 MiB ones, while
    they fit), the rest small ones: a third 4-16 KiB (norms, biases), the others
    log-uniform 64 KiB-3 MiB (projection shards), 4 KiB multiples; shuffled."""
    import numpy
    rng = numpy.random.default_rng(seed)
    large, budget = [], total // 2
    for mib in (256, 256, 128, 64, 64, 32, 32, 32, 16, 16, 16, 16):
        if sum(large) + mib * MiB <= budget:
            large.append(mib * MiB)
    small, left = [], total - sum(large)
    while left >= 4096:
        if rng.random() < 1 / 3:
            n = int(rng.integers(1, 5)) * 4096
        else:
            n = int(numpy.exp(rng.uniform(numpy.log(64 * KiB), numpy.log(3 * MiB))))
            n = max(4096, n // 4096 * 4096)
        n = min(n, left // 4096 * 4096)
        small.append(n)
        left -= n
    sizes = large + small
    return [sizes[i] for i in rng.permutation(len(sizes))]


def ws_layout(sizes):
    """Offsets of the parameters in the rollout's region (WS_ALIGN apart) and its size."""
    offs, pos = [], 0
    for n in sizes:
        offs.append(pos)
        pos += (n + WS_ALIGN - 1) // WS_ALIGN * WS_ALIGN
    return offs, pos


def ws_buckets(sizes, bucket):
    """Consecutive parameter indices in buckets of about `bucket` bytes (a bucket closes
    once it holds that much), as Miles' converted-tensor buckets."""
    out, cur, acc = [], [], 0
    for i, n in enumerate(sizes):
        cur.append(i)
        acc += n
        if acc >= bucket:
            out.append(cur)
            cur, acc = [], 0
    if cur:
        out.append(cur)
    return out


def last_error(*logs):
    """The first FATAL or ERR line of each log (what a failed start said first)."""
    found = []
    for lg in logs:
        lg.flush()
        lg.seek(0)
        first = next((ln.strip() for ln in lg if " ERR " in ln or "FATAL" in ln), None)
        if first:
            found.append(f"{os.path.basename(lg.name)}: {first}")
    return "; ".join(found) or "no ERR line logged"


class WsWorker:
    """The child side of a weight-sync process (rollout or trainer): one JSON request a
    line on stdin, one JSON answer a line on the original stdout (fd 1 is pointed at
    stderr, so the engine's own printing stays out of the answers)."""

    def __init__(self):
        self.te = None
        self.region = None
        self.params = []
        self.pool = None
        self.base = None

    def op_init(self, q):
        from mooncake.engine import TransferEngine
        self.te = TransferEngine()
        rc = self.te.initialize(q["host"], "P2PHANDSHAKE", q["proto"], "")
        if rc != 0:
            return {"rc": rc}
        try:
            from mooncake.engine import _lib
            transport = _lib.tide_te_transport_name(self.te.get_engine_ptr()).decode()
        except Exception:  # noqa: BLE001 (a name only)
            transport = "?"
        return {"rc": 0, "name": f"{q['host']}:{self.te.get_rpc_port()}",
                "transport": transport}

    def op_region(self, q):
        import numpy
        self.region = numpy.zeros(q["size"], dtype=numpy.uint8)
        self.region.fill(0)  # resident, as a GPU's weights are
        t0 = time.monotonic()
        rc = self.te.register_memory(self.region.ctypes.data, self.region.size)
        return {"rc": rc, "addr": self.region.ctypes.data, "reg_s": time.monotonic() - t0}

    def op_params(self, q):
        import numpy
        sizes = ws_sizes(q["total"], q["seed"])
        self.params = [numpy.empty(n, dtype=numpy.uint8) for n in sizes]
        self.base = numpy.arange(max(sizes) // 8, dtype=numpy.uint64)
        self.fill(0)  # resident before registration, as pinned tensors are
        t0 = time.monotonic()
        rcs = [self.te.register_memory(p.ctypes.data, p.size) for p in self.params]
        reg_s = time.monotonic() - t0
        self.pool = concurrent.futures.ThreadPoolExecutor(q["threads"])
        bad = [i for i, rc in enumerate(rcs) if rc != 0]
        return {"n": len(sizes), "bytes": sum(sizes), "reg_s": reg_s, "bad": bad[:8],
                "nbad": len(bad)}

    def fill(self, gen):
        """Parameter i of generation gen: 64-bit words j*K + c(i, gen), distinct for every
        parameter and generation (a misplaced or stale slice changes its CRC)."""
        import numpy
        k = numpy.uint64(FILL_K)
        for i, p in enumerate(self.params):
            w = p.view(numpy.uint64)
            numpy.multiply(self.base[:w.size], k, out=w)
            w += numpy.uint64(((i + 1) * 0xC2B2AE3D27D4EB4F + gen * 0x165667B19E3779F9)
                              & 0xFFFFFFFFFFFFFFFF)

    def op_fill(self, q):
        t0 = time.monotonic()
        self.fill(q["gen"])
        return {"s": time.monotonic() - t0}

    def op_push(self, q):
        sizes = [p.size for p in self.params]
        offs, _ = ws_layout(sizes)
        peer, base = q["peer"], q["base"]
        buckets = ws_buckets(sizes, q["bucket"])
        c0, t0 = os.times(), time.perf_counter()
        futs = [self.pool.submit(self.te.batch_transfer_sync_write, peer,
                                 [self.params[i].ctypes.data for i in b],
                                 [base + offs[i] for i in b], [sizes[i] for i in b])
                for b in buckets]
        rcs = [f.result() for f in futs]
        secs = time.perf_counter() - t0
        c1 = os.times()
        return {"secs": secs, "calls": len(buckets), "rcs_bad": sum(1 for r in rcs if r != 0),
                "cpu_s": (c1.user - c0.user) + (c1.system - c0.system)}

    def op_crc(self, q):
        if self.region is not None:
            sizes = ws_sizes(q["total"], q["seed"])
            offs, _ = ws_layout(sizes)
            return {"crcs": [zlib.crc32(self.region[o:o + n]) for o, n in zip(offs, sizes)]}
        return {"crcs": [zlib.crc32(p) for p in self.params]}

    def serve(self):
        out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        for line in sys.stdin:
            q = json.loads(line)
            if q["op"] == "exit":
                out.write(json.dumps({"ok": True}) + "\n")
                out.flush()
                os._exit(0)  # the engine's threads are not waited for
            try:
                ans = {"ok": True, **getattr(self, "op_" + q["op"])(q)}
            except Exception as e:  # noqa: BLE001 (reported to the parent)
                import traceback
                ans = {"ok": False, "error": f"{e!r}\n{traceback.format_exc()}"}
            out.write(json.dumps(ans) + "\n")
            out.flush()
        return 0


class Child:
    """The parent side of a WsWorker process."""

    def __init__(self, what, env, log):
        self.what = what
        self.log = log
        self.p = subprocess.Popen([PY, os.path.abspath(__file__), "_ws_worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                  text=True, env=env)
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line)
        self.q.put(None)

    def send(self, op, **kw):
        self.p.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.p.stdin.flush()

    def recv(self, timeout=600):
        try:
            line = self.q.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"{self.what}: no answer within {timeout} s") from None
        if line is None:
            raise RuntimeError(f"{self.what}: exited (status {self.p.wait()})")
        ans = json.loads(line)
        if not ans.get("ok"):
            raise RuntimeError(f"{self.what}: {ans.get('error')}")
        return ans

    def call(self, op, timeout=600, **kw):
        self.send(op, **kw)
        return self.recv(timeout)

    def close(self):
        if self.p.poll() is None:
            try:
                self.call("exit", timeout=30)
            except (RuntimeError, OSError, ValueError):
                pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def ws_path(a, path, tmp, logs, proto="rdma"):
    """The weight sync over one path: (rows, failed, info); info["init_error"] says why
    initialize() failed when it did."""
    extra = {"TIDE_RDMA_AS_TCP": "1"}
    if path == "kernel":
        tr_env = ro_env = clean_env(a.build_dir, extra)
    else:
        sock = os.path.join(tmp, f"ws-{path}.sock")
        tr_env = memif_env(a.build_dir, "server", "10.92.0.1", 0, sock, "ws", extra)
        ro_env = memif_env(a.build_dir, "client", "10.92.0.2", 1, sock, "ws", extra)
    tr_log = open(os.path.join(tmp, f"trainer-{path}-{proto}.log"), "w+")
    ro_log = open(os.path.join(tmp, f"rollout-{path}-{proto}.log"), "w+")
    logs += [tr_log, ro_log]
    # The trainer is the memif server: it starts first and ends first.
    tr = Child(f"trainer ({path})", tr_env, tr_log)
    ro = Child(f"rollout ({path})", ro_env, ro_log)
    rows, failed = [], False
    sizes = ws_sizes(a.ws_total, a.ws_seed)
    _, region = ws_layout(sizes)
    info = {"path": path, "tensors": len(sizes), "bytes": sum(sizes), "protocol": proto,
            "calls": len(ws_buckets(sizes, a.ws_bucket))}
    try:
        tr.send("init", host="127.0.0.1", proto=proto)
        ro.send("init", host="127.0.0.1", proto=proto)
        ti, ri = tr.recv(120), ro.recv(120)
        if ti["rc"] != 0 or ri["rc"] != 0:
            info["init_error"] = (f"initialize(127.0.0.1, P2PHANDSHAKE, {proto}, ''): "
                                  f"trainer {ti['rc']}, rollout {ri['rc']}; "
                                  + last_error(tr_log, ro_log))
            raise RuntimeError(info["init_error"])
        info["transport"] = ti["transport"]
        reg = ro.call("region", size=region)
        if reg["rc"] != 0:
            raise RuntimeError(f"rollout register_memory of {region} B: {reg['rc']}")
        pr = tr.call("params", total=a.ws_total, seed=a.ws_seed, threads=a.ws_threads)
        if pr["nbad"]:
            raise RuntimeError(f"trainer register_memory failed for {pr['nbad']} parameters "
                               f"(first indices {pr['bad']})")
        info["register_s"] = pr["reg_s"]
        print(f"weight sync, {path}: {len(sizes)} tensors, {sum(sizes) / GiB:.2f} GiB, "
              f"{info['calls']} calls per sync, protocol {proto}, transport "
              f"{ti['transport']}; "
              f"{len(sizes)} register_memory calls took {pr['reg_s']:.3f} s", flush=True)
        for gen in range(a.runs + 1):
            if gen:
                tr.call("fill", gen=gen)
            r = tr.call("push", peer=ri["name"], base=reg["addr"], bucket=a.ws_bucket)
            ok = r["rcs_bad"] == 0
            verified = None
            if ok and gen in (0, a.runs):
                tr.send("crc")
                ro.send("crc", total=a.ws_total, seed=a.ws_seed)
                want, got = tr.recv()["crcs"], ro.recv()["crcs"]
                bad = [i for i, (x, y) in enumerate(zip(want, got)) if x != y]
                verified = not bad and len(want) == len(got) == len(sizes)
                print(f"  sync {gen}: receiver's CRC32 of {len(got)} parameters "
                      + ("equal the sender's" if verified else
                         f"DIFFER for {len(bad)} (first {bad[:5]})"), flush=True)
                if not verified:
                    failed = True
            if not ok:
                failed = True
                print(f"  sync {gen}: {r['rcs_bad']} of {r['calls']} "
                      "batch_transfer_sync_write calls FAILED", flush=True)
                continue
            row = {"table": "ws", "path": path, "kind": "first" if gen == 0 else "timed",
                   "run": gen, "secs": r["secs"], "gib_s": info["bytes"] / GiB / r["secs"],
                   "calls": r["calls"], "tensors": len(sizes), "bytes": info["bytes"],
                   "trainer_cpu_s_per_gib": r["cpu_s"] / (info["bytes"] / GiB),
                   "transport": ti["transport"], "protocol": proto, "verified": verified,
                   "register_s": pr["reg_s"],
                   "label": f"Tide, {PATH_TEXT[path]}" +
                            ("" if proto == "rdma" else f" (protocol {proto})")}
            rows.append(row)
            print(f"  sync {gen}{' (first)' if gen == 0 else ''}: {r['secs']:.3f} s, "
                  f"{row['gib_s']:.2f} GiB/s, trainer CPU "
                  f"{row['trainer_cpu_s_per_gib']:.3f} s/GiB", flush=True)
    except (RuntimeError, OSError, ValueError) as e:
        failed = True
        print(f"weight sync, {path}: FAILED: {e}", file=sys.stderr, flush=True)
        for lg in (tr_log, ro_log):
            lg.flush()
            lg.seek(0)
            print(f"--- {lg.name} (end):\n" + lg.read()[-3000:], file=sys.stderr)
    finally:
        tr.close()
        ro.close()
    return rows, failed, info


def ws_rows(raw):
    rows = benchplot.medians([r for r in raw if r["kind"] == "timed"],
                             ["table", "path", "kind"])
    rows += benchplot.medians([r for r in raw if r["kind"] == "first"],
                              ["table", "path", "kind"])
    for r in rows:
        checked = [x["verified"] for x in raw if x["path"] == r["path"] and
                   x["kind"] == r["kind"] and x["verified"] is not None]
        r["verified"] = all(checked) if checked else None
        r["vs_stock"] = r["gib_s"] / STOCK_WS_GIB_S
        r["goal_x"] = WS_GOALS[r["path"]]
        r["goal_met"] = r["vs_stock"] >= r["goal_x"] if r["kind"] == "timed" else None
        r["goal_text"] = (f"{r['goal_x']:g}x: " + ("met" if r["goal_met"] else "NOT met")
                          if r["kind"] == "timed" else "-")
        r["checksums"] = ("-" if r["verified"] is None else
                          "equal" if r["verified"] else "DIFFER")
    for r in rows:
        first = next((f for f in rows if f["path"] == r["path"] and f["kind"] == "first"), None)
        r["first_secs"] = first["secs"] if first else None
    return rows


def print_ws(rows, infos, a):
    print(f"\nweight sync (Miles' P2P update): trainer -> rollout, {a.ws_threads} threads of "
          f"batch_transfer_sync_write, buckets of {benchplot.size_label(a.ws_bucket)}, "
          f"protocol rdma served over TCP (TIDE_RDMA_AS_TCP=1) unless a line says otherwise; "
          f"median of {a.runs} sync(s) "
          f"after the first.\nstock = {STOCK_WS_TEXT}")
    print(f"{'path':>24} {'tensors':>7} {'GiB':>6} {'calls':>5} {'s/sync':>8} {'GiB/s':>7} "
          f"{'first s':>8} {'reg s':>7} {'vs stock':>8} {'goal':>5}  verdict")
    verdicts = {}
    for info in infos:
        p = info["path"]
        t = next((r for r in rows if r["path"] == p and r["kind"] == "timed"), None)
        f0 = next((r for r in rows if r["path"] == p and r["kind"] == "first"), None)
        if t is None:
            print(f"{PATH_TEXT[p]:>24}  FAILED")
            verdicts[p] = "FAILED"
            continue
        verdicts[p] = ("met" if t["goal_met"] else "NOT met") + (
            f" (protocol {info['protocol']}: rdma did not start)"
            if info["protocol"] != "rdma" else "")
        print(f"{PATH_TEXT[p]:>24} {info['tensors']:>7} {info['bytes'] / GiB:6.2f} "
              f"{info['calls']:>5} {t['secs']:8.3f} {t['gib_s']:7.2f} "
              f"{f0['secs'] if f0 else float('nan'):8.3f} {info.get('register_s', 0):7.3f} "
              f"{t['vs_stock']:7.2f}x {t['goal_x']:4.0f}x  {verdicts[p]}")
    return verdicts


# ------------------------------------------------------------------ the document

def panels(paths, stock_label, stock, ws):
    out = []
    for op in ("read", "write"):
        series = []
        for i, (impl, path) in enumerate((i, p) for p in paths for i in ("c", "py")):
            series.append({"label": f"{IMPL_TEXT[impl]}, {PATH_TEXT[path]}",
                           "where": {"table": "main", "impl": impl, "path": path, "op": op},
                           "color": {"kernel": 0, "memif": 2}[path] + (1 if impl == "py" else 0),
                           "style": "-" if impl == "c" else "--"})
        series.append({"label": stock_label, "color": 8,
                       "points": [[bs, v[0 if op == "read" else 1]]
                                  for bs, v in sorted(stock.items())]})
        out.append({"kind": "xy", "title": f"{op.upper()}: batch 32 (64 MiB: 4), 1 initiator "
                    "thread; median, range of runs", "x": "bs", "y": "mib_s",
                    "xlog2": True, "xlabel": "block size (log2)",
                    "ylabel": "throughput (MiB/s)", "series": series})
    if paths:
        out.append({"kind": "xy", "title": "Python / C throughput, same run (median of runs)",
                    "x": "bs", "y": "vs_c", "xlog2": True, "xlabel": "block size (log2)",
                    "ylabel": "ratio (Python MiB/s / C MiB/s)",
                    "series": [{"label": f"{op}, {PATH_TEXT[path]}",
                                "where": {"table": "main", "impl": "py", "path": path,
                                          "op": op},
                                "color": {"kernel": 1, "memif": 3}[path],
                                "style": "-" if op == "read" else "--"}
                               for path in paths for op in ("read", "write")],
                    "hlines": [{"label": "goal at 64 KiB and above: 0.95", "y": PY_GOAL,
                                "color": "#555555"}]})
    if ws:
        out.append({"kind": "bar", "title": "Weight sync (Miles' P2P update): GiB/s, "
                    "median of syncs after the first", "x": "label", "y": "gib_s",
                    "xlabel": "path", "ylabel": "throughput (GiB/s)",
                    "series": [{"label": "Tide: 4 threads of batch_transfer_sync_write",
                                "where": {"table": "ws", "kind": "timed"}, "color": 2}],
                    "hlines": [{"label": "stock Python TE over kernel TCP, about 1.2 GiB/s "
                                "(the issue's figure)", "y": STOCK_WS_GIB_S, "color": "#555555"},
                               {"label": "goal over kernel sockets (2x stock)",
                                "y": STOCK_WS_GIB_S * WS_GOALS["kernel"], "color": "#1f77b4"},
                               {"label": "goal over user-space TCP (5x stock)",
                                "y": STOCK_WS_GIB_S * WS_GOALS["memif"], "color": "#d62728"}]})
        out.append({"kind": "bar", "title": "Weight sync: seconds per sync (first sync "
                    "and median of the others)", "x": "label", "y": "secs", "xlabel": "path",
                    "ylabel": "time per sync (s)",
                    "series": [{"label": "first sync (connections opened)",
                                "where": {"table": "ws", "kind": "first"}, "color": 9},
                               {"label": "median of the later syncs",
                                "where": {"table": "ws", "kind": "timed"}, "color": 2}]})
    return out


def tables():
    return [
        {"title": "", "where": {"table": "main"}, "columns": [
            {"key": "bs", "head": "block", "fmt": "size"},
            {"key": "op", "head": "op"},
            {"key": "label", "head": "initiator, path"},
            {"key": "mib_s", "head": "MiB/s", "fmt": ".0f"},
            {"key": "vs_c", "head": "Python / C", "fmt": ".3f"},
            {"key": "overhead_us", "head": "Python +µs/batch", "fmt": ".1f"},
            {"key": "cpu_s_per_gib", "head": "initiator CPU s/GiB", "fmt": ".3f"},
            {"key": "vs_stock", "head": "vs stock", "fmt": "x"},
            {"key": "goal_text", "head": "goal: Python >= 0.95 C (64 KiB+)"},
            {"key": "n", "head": "runs", "fmt": "d"}]},
        {"title": "", "where": {"table": "ws", "kind": "timed"}, "columns": [
            {"key": "label", "head": "path"},
            {"key": "protocol", "head": "protocol"},
            {"key": "tensors", "head": "tensors", "fmt": "int"},
            {"key": "bytes", "head": "bytes", "fmt": "size"},
            {"key": "calls", "head": "calls per sync", "fmt": "int"},
            {"key": "secs", "head": "s per sync", "fmt": ".3f"},
            {"key": "gib_s", "head": "GiB/s", "fmt": ".2f"},
            {"key": "first_secs", "head": "first sync s", "fmt": ".3f"},
            {"key": "register_s", "head": "register_memory s (all)", "fmt": ".2f"},
            {"key": "trainer_cpu_s_per_gib", "head": "trainer CPU s/GiB", "fmt": ".3f"},
            {"key": "vs_stock", "head": "vs stock (1.2 GiB/s)", "fmt": "x"},
            {"key": "goal_text", "head": "goal"},
            {"key": "checksums", "head": "CRC32 at receiver"},
            {"key": "n", "head": "syncs", "fmt": "d"}]}]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_initiator":
        return py_initiator(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "_ws_worker":
        return WsWorker().serve()
    # SIGTERM ends the run through the finally blocks: children stopped, files removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description="mooncake.engine (Python) against the C engine")
    ap.add_argument("build_dir")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per table run")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per table row and timed syncs per path (median; default 3)")
    ap.add_argument("--sizes", help="table block sizes, a subset of " +
                    ",".join(label for _, label in SIZES))
    ap.add_argument("--paths", default="kernel,memif", help="kernel,memif (default both)")
    ap.add_argument("--ws-total", type=parse_size, default=2 * GiB,
                    help="weight-sync bytes of parameters (default 2G)")
    ap.add_argument("--ws-bucket", type=parse_size, default=512 * MiB,
                    help="bytes per bucket, one call each (default 512M, Miles' update buffer)")
    ap.add_argument("--ws-threads", type=int, default=4, help="trainer's pool (default 4)")
    ap.add_argument("--ws-seed", type=int, default=7, help="the size mix's seed")
    ap.add_argument("--no-table", action="store_true", help="only the weight sync")
    ap.add_argument("--no-weight-sync", action="store_true", help="only the table")
    ap.add_argument("--stock-ref", choices=sorted(STOCK_REFS), default="2026-12-02",
                    help="the reference-figures.md set to compare the table with")
    benchplot.add_output_args(ap)
    a = ap.parse_args()
    if a.runs < 1 or a.duration <= 0 or a.ws_threads < 1 or a.ws_total < 4096:
        ap.error("--runs, --duration and --ws-threads must be positive, --ws-total >= 4K")
    sizes = SIZES
    if a.sizes:
        want = a.sizes.upper().split(",")
        sizes = [(bs, label) for bs, label in SIZES if label in want]
        if len(sizes) != len(want):
            ap.error(f"--sizes: choose from {','.join(label for _, label in SIZES)}")
    paths = [p for p in PATHS if p in a.paths.split(",")]
    if not paths or len(paths) != len(a.paths.split(",")):
        ap.error("--paths: kernel, memif or both")
    a.build_dir = os.path.abspath(a.build_dir)
    for f in (os.path.join(a.build_dir, "tools", "te_bench", "tide-bench"),
              os.path.join(a.build_dir, "store", "client", "libtidestore.so")):
        if not os.path.exists(f):
            ap.error(f"{f} is missing: build first (ninja -C {a.build_dir})")
    json_path, png_path = benchplot.default_paths(a.build_dir, "engine-py-bench", a.json, a.png)
    stock_label, stock = STOCK_REFS[a.stock_ref]
    rec = benchplot.Recorder("engine-py-bench", "Python mooncake.engine against the C engine "
                             "(tide-bench), same run; Miles' weight sync", params={
                                 "duration_s": a.duration, "runs": a.runs, "paths": paths,
                                 "sizes": [bs for bs, _ in sizes] if not a.no_table else [],
                                 "batch": "32 (4 for 64 MiB blocks)", "initiator_threads": 1,
                                 "target": "tide-bench --mode=target (C engine), 256 MiB, "
                                           "a fresh process per measurement",
                                 "stock_reference": {"set": a.stock_ref, "label": stock_label,
                                                     "mib_s_read_write": {str(k): v for k, v
                                                                          in stock.items()}},
                                 "weight_sync": None if a.no_weight_sync else {
                                     "total_bytes": a.ws_total, "bucket_bytes": a.ws_bucket,
                                     "threads": a.ws_threads, "seed": a.ws_seed,
                                     "protocol": "rdma (TIDE_RDMA_AS_TCP=1)",
                                     "stock_gib_s": STOCK_WS_GIB_S, "stock": STOCK_WS_TEXT,
                                     "goals_x_stock": WS_GOALS}})
    print(f"load before: {open('/proc/loadavg').read().strip()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="tide-epb-")
    raw, rows, failed, logs = [], [], False, []
    verdict, ws_verdicts, ws_init_errors = None, {}, {}
    try:
        if not a.no_table:
            traw, tfail = run_table(a, sizes, paths, tmp)
            raw += traw
            failed |= tfail
            trows = table_rows(traw, stock)
            rows += trows
            verdict = print_table(trows, sizes, paths, a, stock_label)
        if not a.no_weight_sync:
            wraw, infos = [], []
            for path in paths:
                r, f, info = ws_path(a, path, tmp, logs)
                if info.get("init_error"):
                    # Measured all the same, with protocol tcp over the same path, and said
                    # so everywhere (the row's label, the notes, the verdict).
                    ws_init_errors[path] = info["init_error"]
                    print(f"weight sync, {path}: protocol rdma did not start (above); "
                          "measuring with protocol tcp over the same path instead",
                          file=sys.stderr, flush=True)
                    r, f, info = ws_path(a, path, tmp, logs, proto="tcp")
                    info["rdma_error"] = ws_init_errors[path]
                wraw += r
                failed |= f
                infos.append(info)
            raw += wraw
            wrows = ws_rows(wraw)
            rows += wrows
            ws_verdicts = print_ws(wrows, infos, a)
    finally:
        for lg in logs:
            lg.close()
        shutil.rmtree(tmp, ignore_errors=True)
        remove_runtime_dirs()
    print(f"load after: {open('/proc/loadavg').read().strip()}", flush=True)
    notes = [
        "MiB/s = 2^20 bytes per second moved by the initiator; CPU s/GiB = the initiator "
        "process's utime + stime (/proc/PID/stat, all threads, the DPDK polling lcore "
        "included on the memif path) between its first and last progress lines, per GiB "
        "moved in that window.",
        "Python / C and Python +us/batch (1/python_batches_per_s - 1/c_batches_per_s) are "
        "computed within each run, then their median over the runs is taken: not the same as "
        "the ratio of the median MiB/s when runs scatter.",
        "Both initiators run against a tide-bench target (the C engine), a fresh process per "
        "measurement.",
        f"Stock figures are not measured here: {stock_label}; {STOCK_WS_TEXT}."]
    if verdict:
        notes.append(f"Goal, Python within 5 % of C at 64 KiB and above: {verdict}.")
    for p, e in ws_init_errors.items():
        notes.append(f"Weight sync over {PATH_TEXT[p]}: initialize(..., 'rdma', '') with "
                     f"TIDE_RDMA_AS_TCP=1 failed ({e}); that row was measured with "
                     "protocol 'tcp' over the same path.")
    for p, v in ws_verdicts.items():
        notes.append(f"Weight-sync goal over {PATH_TEXT[p]} (>= {WS_GOALS[p]:g}x stock's "
                     f"1.2 GiB/s): {v}.")
    pan = panels(paths if not a.no_table else [], stock_label, stock, not a.no_weight_sync)
    skip = {"main"} if a.no_table else {"ws"} if a.no_weight_sync else set()
    doc = rec.finish(raw, rows, pan, [t for t in tables() if t["where"]["table"] not in skip],
                     notes=notes, json_path=json_path, png_path=None,
                     params={"goals": {"python_vs_c": verdict, "weight_sync": ws_verdicts},
                             "weight_sync_rdma_errors": ws_init_errors})
    # One picture of every panel (what tools/bench-doc.py --replot draws from the JSON).
    benchplot.plot(doc, png_path)
    print(f"picture: {png_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
