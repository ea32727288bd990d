#!/usr/bin/python3
"""`mooncake.store` in Miles' guide's own set-up, timed: a master, no node file, no agent.

Each process runs the transfer engine in-process over kernel TCP, as a user who follows
Miles' guide gets: `mooncake_master`, a holder process that mounts the only segment
(global_segment_size 3 GiB), and a client process (global_segment_size 0) that puts
objects (every one lands in the holder's segment, across the two processes), gets them
back (every byte compared, outside the timing), and removes them. Per size and call:

  put/get      batch 1: put(key, bytes), get(key) -> bytes (what Miles' rollout store calls)
  from/into    batch 1: put_from / get_into with registered buffers (zero-copy calls)
  batch32      batch_put_from / batch_get_into, 32 keys a call, registered buffers
  batch64      the same with 64 keys a call (the page batches below, one buffer per page)
  multi64      batch_put_from_multi_buffers / batch_get_into_multi_buffers, 64 keys a call,
               each key's page in 8 strided pieces (SGLang HiCache's and vLLM's layout:
               one piece per layer group), on the same registered memory as batch64

Holder and client run on one host, so by default the client's engine maps the holder's
segment (a sealed memory file, TIDE_SHM_PEERS) and copies with memcpy; --tcp-only turns
that off and measures the loopback TCP path two hosts would use. The cells start once the
holder's segment warm-up (a thread faulting the 3 GiB in at idle priority) has ended, as
in a holder that has been serving for a while; the time it took is printed.

Sizes 4 KiB-64 MiB; each cell moves --mib MiB (at least one call, at most --max-ops calls).
Runs --runs times (default 5) with fresh processes; prints the median and min-max of the
runs for ops/s and MiB/s, and CPU microseconds per op (client + holder + master, from
/proc, so the work the holder's engine does serving the bytes counts too).

Stock: with --stock-pythonpath DIR (a directory where `import mooncake.store` finds stock
Mooncake's package) and --stock-master BIN, stock runs the same roles in the same run and
every row gets a ratio to it. Otherwise the ratios are against stock's batch-1 put/get
figures in ../shared/spec/reference-figures.md (2026-12-06 section, quiet 2-core VM,
midpoints), and the output says so. Stock was measured at 4 KiB-4 MiB; a larger row is
compared with its 4 MiB MiB/s, and a larger `get` with that plus the copy stock's get()
makes into a fresh bytes object after its transfer (`pybind11::bytes(ptr, size)` in its
store_py.cpp), timed in the same cell (the `stock_copy_ms` column). Beside batch-1 rows of 4-64 KiB it prints the floor kernel TCP
sets: one master round trip and one data round trip per op, 1 / (2 x RTT) ops/s, with the
RTT of a loopback TCP ping-pong between two processes measured in the same run.

  /usr/bin/python3 tools/store-py-bench.py BUILD_DIR [--runs 5] [--sizes 4k,64k,1m,4m,64m]
      [--calls put,from,batch32] [--mib 256] [--stock-pythonpath DIR --stock-master BIN]
      [--json F] [--png F]

Writes JSON and a PNG through tools/benchplot.py (default BUILD_DIR/bench/store-py-bench.*).
"""
import argparse
import ctypes
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3"
MiB = 1 << 20
sys.path.insert(0, HERE)
import benchplot  # noqa: E402
import storecluster  # noqa: E402

# ../shared/spec/reference-figures.md, 2026-12-06 section: stock's Python store, batch 1,
# holder + client, kernel TCP, ops/s ranges -> midpoints (put, get).
REF_OPS = {4096: ((3608 + 3731) / 2, (6150 + 6313) / 2),
           65536: ((3198 + 3360) / 2, (5652 + 6067) / 2),
           1 << 20: ((1035 + 1048) / 2, (1576 + 1613) / 2),
           4 << 20: ((409 + 459) / 2, (411 + 436) / 2)}
REF = "reference-figures.md 2026-12-06 (stock 3b5a5941, batch 1 put/get, midpoints)"
CALLS = {"put": "put/get (bytes), batch 1", "from": "put_from/get_into, batch 1",
         "batch32": "batch_put_from/batch_get_into, batch 32",
         "batch64": "batch_put_from/batch_get_into, batch 64",
         "multi64": "batch_*_multi_buffers, batch 64, 8 pieces a key"}
BATCH = {"put": 1, "from": 1, "batch32": 32, "batch64": 64, "multi64": 64}
PIECES = 8
HOLDER_SEGMENT = 3 << 30


def parse_size(s):
    s = s.strip().lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(s[-1:], 1)
    return int(s.rstrip("kmg")) * mult


# ------------------------------------------------------------------ child roles

def role_setup(master, gss):
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", gss, 0, "tcp", "", master)
    if rc != 0:
        print(f"setup failed: {rc}", flush=True)
        sys.exit(1)
    return s


def role_holder(master):
    s = role_setup(master, HOLDER_SEGMENT)
    print("ready", flush=True)
    sys.stdin.read()  # until the orchestrator closes our stdin
    s.close()


def role_client(master):
    s = role_setup(master, 0)
    print("ready", flush=True)
    for line in sys.stdin:
        call, size, nops, tag = line.split()
        size, nops = int(size), int(nops)
        print(json.dumps(client_cell(s, call, size, nops, tag)), flush=True)
    s.close()


def client_cell(s, call, size, nops, tag):
    batch = BATCH[call]
    ncalls = max(1, nops // batch)
    keys = [f"spb-{tag}-{i}" for i in range(ncalls * batch)]
    pattern = os.urandom(size)
    out = {"ok": True}
    if call == "put":
        t0 = time.perf_counter()
        for k in keys:
            if s.put(k, pattern) != 0:
                return {"ok": False, "why": f"put {k}"}
        t1 = time.perf_counter()
        # Each object is compared and dropped before the next get (outside the
        # timing), as a reader consuming objects one by one does. Keeping every
        # result alive would time the caller's fresh memory instead: each get's bytes
        # then land in pages never touched before (first-touch faults, about 2 ms per
        # MiB on this VM class), whatever the store.
        tget, bad = 0.0, 0
        for k in keys:
            tg = time.perf_counter()
            g = s.get(k)
            tget += time.perf_counter() - tg
            bad += g != pattern
        del g
        t2 = t1 + tget
        if size > max(REF_OPS):
            # What stock's get() does after its transfer (store_py.cpp: it returns
            # pybind11::bytes(ptr, size) of its client buffer): copy the object into
            # a fresh bytes object. Timed with the gets' liveness (the last result
            # held while the next is made), for ratios() at sizes stock's reference
            # figures do not reach.
            held = ctypes.create_string_buffer(pattern, size)
            view = memoryview(held)
            last = [None]
            tc = time.perf_counter()
            for _ in keys:
                last[0] = bytes(view)
            out["copy_s"] = time.perf_counter() - tc
            del last, view, held
    else:
        # One registered source (the pattern, repeated per key of a call) and one
        # registered destination per key of a call, as a caller of the zero-copy API has.
        src = ctypes.create_string_buffer(pattern, size * batch)
        for j in range(1, batch):
            ctypes.memmove(ctypes.addressof(src) + j * size, pattern, size)
        dst = ctypes.create_string_buffer(size * batch)
        sa, da = ctypes.addressof(src), ctypes.addressof(dst)
        if s.register_buffer(sa, size * batch) != 0 or s.register_buffer(da, size * batch) != 0:
            return {"ok": False, "why": "register_buffer"}
        groups = [keys[i:i + batch] for i in range(0, len(keys), batch)]
        sptrs = [sa + j * size for j in range(batch)]
        dptrs = [da + j * size for j in range(batch)]
        sizes = [size] * batch
        if call == "multi64":
            # Piece p of key j at offset (p * batch + j) * piece: a key's pieces are
            # strided through the region, as layers of a paged KV cache are.
            piece = size // PIECES
            spieces = [[sa + (p * batch + j) * piece for p in range(PIECES)]
                       for j in range(batch)]
            dpieces = [[da + (p * batch + j) * piece for p in range(PIECES)]
                       for j in range(batch)]
            psizes = [[piece] * PIECES] * batch
        bad = 0
        t0 = time.perf_counter()
        for g in groups:
            if batch == 1:
                rc = s.put_from(g[0], sa, size)
            elif call == "multi64":
                rc = min(s.batch_put_from_multi_buffers(g, spieces, psizes))
            else:
                rc = min(s.batch_put_from(g, sptrs, sizes))
            if rc != 0:
                return {"ok": False, "why": f"put {g[0]}: {rc}"}
        t1 = time.perf_counter()
        tget = 0.0
        for g in groups:
            tg = time.perf_counter()
            if batch == 1:
                r = [s.get_into(g[0], da, size)]
            elif call == "multi64":
                r = s.batch_get_into_multi_buffers(g, dpieces, psizes)
            else:
                r = s.batch_get_into(g, dptrs, sizes)
            tget += time.perf_counter() - tg
            if any(x != size for x in r):
                return {"ok": False, "why": f"get {g[0]}: {r[:4]}"}
            if dst.raw != src.raw:  # compared outside the timing
                bad += 1
        t2 = t1 + tget
        s.unregister_buffer(sa)
        s.unregister_buffer(da)
    for k in keys:
        s.remove(k, True)
    out.update({"ops": len(keys), "put_s": t1 - t0, "get_s": t2 - t1, "bad": bad,
                "t0": t0, "t1": t1, "t2": t2})
    return out


def role_echo(port_file):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    with open(port_file, "w") as f:
        f.write(str(srv.getsockname()[1]))
    c, _ = srv.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(64)
        if not b:
            return
        c.sendall(b)


# ------------------------------------------------------------------ orchestration

def child(args, env, **kw):
    return storecluster.spawn_role(__file__, args, env, **kw)


expect_line = storecluster.expect_line


def cpu_s(pid):
    """utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loopback_rtt_us(env, tmp):
    """Median round trip of 64-byte messages over loopback TCP between two processes."""
    pf = os.path.join(tmp, "echo.port")
    echo = subprocess.Popen([PY, os.path.abspath(__file__), "echo", pf], env=env)
    try:
        deadline = time.monotonic() + 10
        while not (os.path.exists(pf) and os.path.getsize(pf)):
            if time.monotonic() > deadline:
                raise SystemExit("echo server did not start")
            time.sleep(0.01)
        c = socket.create_connection(("127.0.0.1", int(open(pf).read())))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg, lat = b"x" * 64, []
        for _ in range(3000):
            t = time.perf_counter()
            c.sendall(msg)
            got = 0
            while got < len(msg):
                got += len(c.recv(64))
            lat.append(time.perf_counter() - t)
        c.close()
        return statistics.median(lat[500:]) * 1e6
    finally:
        echo.wait(timeout=10)


def warm_wait(pid, deadline_s):
    """Wait until the holder's segment warm-up thread (tide-segwarm, faulting the segment in
    at idle priority) has ended; seconds waited, or None when it never ran (stock). A holder
    in service is long past it; a cell measured during it shares the CPUs with it."""
    t0 = time.monotonic()
    seen = False
    while time.monotonic() - t0 < deadline_s:
        try:
            names = []
            for t in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{t}/comm") as f:
                        names.append(f.read().strip())
                except OSError:
                    pass
        except OSError:
            return None
        if "tide-segwarm" not in names:
            return time.monotonic() - t0 if seen or time.monotonic() - t0 > 0.5 else None
        seen = True
        time.sleep(0.1)
    raise SystemExit(f"the holder's segment warm-up still runs after {deadline_s} s")


def one_run(build, args, run, tmp, stock=False):
    if stock:
        env = storecluster.clean_env({"PYTHONPATH": args.stock_pythonpath})
        master_bin = args.stock_master
    else:
        env = storecluster.clean_env({
            "LIBTIDESTORE": os.path.join(build, "store", "client", "libtidestore.so"),
            "PYTHONPATH": os.path.join(REPO, "store", "python"),
            "TIDE_NODE_ENV": os.devnull, "TIDE_AGENT": "off", "MC_FORCE_TCP": "1",
            "TIDE_LOG_LEVEL": "warn", "TIDE_SHM_PEERS": "0" if args.tcp_only else "1"})
        master_bin = os.path.join(build, "tools", "master", "mooncake_master")
    # Tide's master on an ephemeral metrics port (9003 may be taken); stock's as it comes.
    master, addr = storecluster.start_master(master_bin, env, subprocess.DEVNULL,
                                             *([] if stock else ["--metrics_port", "0"]))
    procs, rows = [], []
    try:
        holder = child(["holder", addr], env, stdin=subprocess.PIPE)
        procs.append(holder)
        if expect_line(holder, "holder", 120) != "ready":
            raise SystemExit("holder did not set up")
        warm = warm_wait(holder.pid, 300)
        if warm is not None:
            print(f"run {run}: the holder's segment warm-up ended after {warm:.1f} s; "
                  "cells start now", flush=True)
        client = child(["client", addr], env, stdin=subprocess.PIPE)
        procs.append(client)
        if expect_line(client, "client", 120) != "ready":
            raise SystemExit("client did not set up")
        pids = [client.pid, holder.pid, master.pid]
        for call in args.calls:
            for size in args.sizes:
                nops = max(BATCH[call], min(args.max_ops, (args.mib * MiB) // size))
                c0 = [cpu_s(p) for p in pids]
                client.stdin.write(f"{call} {size} {nops} r{run}\n")
                client.stdin.flush()
                res = json.loads(expect_line(client, f"client ({call} {size})", 900))
                c1 = [cpu_s(p) for p in pids]
                if not res["ok"] or res["bad"]:
                    raise SystemExit(f"{call} {size}: {res.get('why') or 'bytes differ'}")
                n = res["ops"]
                # CPU of the whole cell (put, get, the uncounted compare and remove) split
                # by the two timed phases' share of the cell's wall time.
                cpu = sum(b - a for a, b in zip(c0, c1))
                row = {"run": run, "stack": "stock" if stock else "tide", "call": call,
                       "size": size, "ops": n,
                       "put_ops": n / res["put_s"], "get_ops": n / res["get_s"],
                       "put_mib": n * size / MiB / res["put_s"],
                       "get_mib": n * size / MiB / res["get_s"],
                       "cpu_us_per_op": cpu / (2 * n) * 1e6}
                if "copy_s" in res:
                    row["stock_copy_ms"] = res["copy_s"] / n * 1e3
                rows.append(row)
                print(f"run {run} {row['stack']} {call:7s} {benchplot.size_label(size):>7s}: "
                      f"put {row['put_ops']:8.0f} op/s {row['put_mib']:8.1f} MiB/s, get "
                      f"{row['get_ops']:8.0f} op/s {row['get_mib']:8.1f} MiB/s, "
                      f"{row['cpu_us_per_op']:.0f} us CPU/op", flush=True)
        client.stdin.close()
        if client.wait(timeout=60) != 0:
            raise SystemExit(f"client exited {client.returncode}")
    finally:
        for p in procs:
            storecluster.end_role(p)
        storecluster.stop(master)
    return rows


def ratios(meds, stock_meds, floor_ops):
    for m in meds:
        if m["stack"] != "tide":
            continue
        ref = None
        st = [x for x in stock_meds if x["call"] == m["call"] and x["size"] == m["size"]]
        if st:
            ref = (st[0]["put_ops"], st[0]["get_ops"])
        elif m["call"] == "put" and not stock_meds:
            if m["size"] in REF_OPS:
                ref = REF_OPS[m["size"]]
            elif m["size"] > (4 << 20):
                # Beyond stock's largest figure (4 MiB): its MiB/s there, and for get
                # the copy into a fresh bytes object its get() makes besides (timed in
                # this run: at 4 MiB that object reuses glibc's heap, from 32 MiB it is
                # fresh memory, a page fault per 4 KiB; Tide's get receives into it).
                r4 = REF_OPS[4 << 20]
                put_s = m["size"] / ((4 << 20) * r4[0])
                get_s = m["size"] / ((4 << 20) * r4[1]) + m.get("stock_copy_ms", 0) / 1e3
                ref = (1 / put_s, 1 / get_s)
        m["put_vs_stock"] = m["put_ops"] / ref[0] if ref else None
        m["get_vs_stock"] = m["get_ops"] / ref[1] if ref else None
        m["floor_ops"] = floor_ops if BATCH[m["call"]] == 1 and m["size"] <= 65536 else None
        for k in ("put_ops", "get_ops", "put_mib", "get_mib"):
            m[f"{k}_range"] = f"{m['min'][k]:,.0f}-{m['max'][k]:,.0f}"


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("holder", "client", "echo"):
        {"holder": role_holder, "client": role_client, "echo": role_echo}[sys.argv[1]](
            sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="4k,64k,1m,4m,64m")
    ap.add_argument("--calls", default="put,from,batch32")
    ap.add_argument("--mib", type=int, default=256, help="MiB per cell (default 256)")
    ap.add_argument("--max-ops", type=int, default=4096, help="calls per cell at most")
    ap.add_argument("--tcp-only", action="store_true",
                    help="TIDE_SHM_PEERS=0: the client reaches the holder's segment over "
                         "loopback TCP, not by mapping it (the path between two hosts)")
    ap.add_argument("--stock-pythonpath")
    ap.add_argument("--stock-master")
    benchplot.add_output_args(ap)
    args = ap.parse_args()
    args.sizes = [parse_size(x) for x in args.sizes.split(",")]
    args.calls = [c for c in args.calls.split(",")]
    for c in args.calls:
        if c not in CALLS:
            ap.error(f"--calls: {c!r} is not one of {', '.join(CALLS)}")
    if bool(args.stock_pythonpath) != bool(args.stock_master):
        ap.error("--stock-pythonpath and --stock-master go together")
    build = os.path.abspath(args.build)
    name = "store-py-bench-tcp" if args.tcp_only else "store-py-bench"
    path = ("loopback TCP between the processes (TIDE_SHM_PEERS=0)" if args.tcp_only else
            "the client maps the holder's segment (same host, TIDE_SHM_PEERS=1)")
    jpath, ppath = benchplot.default_paths(build, name, args.json, args.png)
    rec = benchplot.Recorder(name, "mooncake.store in Miles' guide's set-up "
                             f"(master only, kernel TCP, holder + client): {path}",
                             params={"runs": args.runs, "sizes": args.sizes,
                                     "calls": args.calls, "mib": args.mib,
                                     "tcp_only": args.tcp_only})
    import tempfile
    rows = []
    with tempfile.TemporaryDirectory(prefix="spb-") as tmp:
        rtt = loopback_rtt_us(storecluster.clean_env(), tmp)
        floor = 1e6 / (2 * rtt)
        print(f"loopback TCP ping-pong RTT {rtt:.1f} us: batch-1 floor {floor:,.0f} op/s "
              "(one master and one data round trip per op)", flush=True)
        for run in range(args.runs):
            rows += one_run(build, args, run, tmp)
            if args.stock_pythonpath:
                rows += one_run(build, args, run, tmp, stock=True)
    meds = benchplot.medians(rows, ["stack", "call", "size"])
    stock_meds = [m for m in meds if m["stack"] == "stock"]
    ratios(meds, stock_meds, floor)
    against = ("stock Mooncake in this run (--stock-pythonpath)" if stock_meds else REF)
    print(f"\nmedians of {args.runs} runs (min-max); vs stock: {against}")
    print(f"{'call':8s} {'size':>7s} {'put op/s (min-max)':>26s} {'get op/s (min-max)':>26s} "
          f"{'put MiB/s':>9s} {'get MiB/s':>9s} {'CPU us/op':>9s} {'put/stk':>7s} "
          f"{'get/stk':>7s} {'floor':>7s}")
    for m in meds:
        if m["stack"] != "tide":
            continue

        def x(v):
            return f"{v:.2f}x" if v else "-"
        print(f"{m['call']:8s} {benchplot.size_label(m['size']):>7s} "
              f"{m['put_ops']:9,.0f} ({m['put_ops_range']:>14s}) "
              f"{m['get_ops']:9,.0f} ({m['get_ops_range']:>14s}) {m['put_mib']:9.1f} "
              f"{m['get_mib']:9.1f} {m['cpu_us_per_op']:9.0f} {x(m['put_vs_stock']):>7s} "
              f"{x(m['get_vs_stock']):>7s} "
              f"{(format(m['floor_ops'], ',.0f') if m['floor_ops'] else '-'):>7s}")
    panels = []
    for which in ("put", "get"):
        series = [{"label": f"Tide {CALLS[c]}", "where": {"stack": "tide", "call": c},
                   "y": f"{which}_mib", "color": i} for i, c in enumerate(args.calls)]
        if stock_meds:
            series += [{"label": f"stock {CALLS[c]}", "where": {"stack": "stock", "call": c},
                        "y": f"{which}_mib", "style": "--", "color": i}
                       for i, c in enumerate(args.calls)]
        else:
            k = 0 if which == "put" else 1
            series.append({"label": f"stock put/get, batch 1 ({REF})", "points": [
                [sz, REF_OPS[sz][k] * sz / MiB] for sz in sorted(REF_OPS)], "color": 0})
        panels.append({"kind": "xy", "title": f"{which}: MiB/s (median, range of runs)",
                       "x": "size", "y": f"{which}_mib", "xlog2": True, "ylog": True,
                       "xlabel": "value size", "ylabel": "MiB/s", "series": series})
    cols = [{"key": "call", "head": "call"}, {"key": "size", "head": "size", "fmt": "size"},
            {"key": "put_ops", "head": "put op/s", "fmt": "int"},
            {"key": "put_ops_range", "head": "(min-max)"},
            {"key": "get_ops", "head": "get op/s", "fmt": "int"},
            {"key": "get_ops_range", "head": "(min-max)"},
            {"key": "put_mib", "head": "put MiB/s", "fmt": ".1f"},
            {"key": "get_mib", "head": "get MiB/s", "fmt": ".1f"},
            {"key": "cpu_us_per_op", "head": "CPU us/op", "fmt": ".0f"},
            {"key": "put_vs_stock", "head": "put vs stock", "fmt": "x"},
            {"key": "get_vs_stock", "head": "get vs stock", "fmt": "x"},
            {"key": "floor_ops", "head": "kernel floor op/s", "fmt": "int"},
            {"key": "stock_copy_ms", "head": "stock's get copy ms", "fmt": ".1f"}]
    notes = [f"data path: {path}", f"vs stock: {against}",
             f"loopback TCP ping-pong RTT {rtt:.1f} us; batch-1 floor 1/(2 RTT) = "
             f"{floor:,.0f} op/s"]
    rec.finish(rows, meds, panels=panels,
               tables=[{"title": "", "where": {"stack": "tide"}, "columns": cols}],
               notes=notes, json_path=jpath, png_path=ppath,
               params={"rtt_us": rtt, "against": against})


if __name__ == "__main__":
    main()
