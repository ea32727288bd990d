#!/usr/bin/python3
"""Miles' rollout flow over `mooncake.structured_object_store`, timed, against stock's figures.

The shapes and processes of the "Miles rollout flow on stock Mooncake" entry of
../shared/spec/reference-figures.md (2026-12-02): per step 4 dense DP shards of 32 samples
(prompts 512 tokens, responses 1800-3600; Miles' ROLLOUT_DATA_VALUE_SPEC fields as Python
lists, as Miles puts them) and one 32-sample MoE batch whose `rollout_routed_experts` are int32
[T-1, 48, 8] arrays (about 150 MiB, split into 64 MiB chunks); a master, a holder process with
the only segment, a writer (the rollout manager), two readers (trainers; shards split between
them, read at the same time) and a driver (cleanup), as separate processes that live across
steps as Miles' do, kernel TCP, no node agent.

  put MiB/s  payload bytes of the step / the writer's time in MooncakeBundleTransfer.put
  get MiB/s  the same bytes / the wall time from the first reader's first get to the last
             reader's last release_result (both readers run at once)

Payload bytes are the values' own (8 bytes per Python int or float, the arrays' nbytes), not
the stored objects' sizes. Every value read is compared with what was put (type and bits)
after its timing. Data generation and process start-up are outside every timing.

  /usr/bin/python3 tools/miles-bench.py BUILD_DIR [--steps 4] [--runs 3] [--json F] [--png F]

Prints each step's rates, then medians over the runs' first steps (processes, leases and the
holder's segment fresh) and over all later steps, and the median over runs of steps 0 and 1
taken together (bytes over summed time: how the reference measured stock, 333 MB per two
steps), each with its ratio against the reference figures' midpoints for this machine
class (2026-12-06: put 496 MiB/s, get 394 MiB/s; stock ran faster there than in the
2026-12-02 entry, 316 / 165, and this VM is of the 2026-12-06 class).

Writes the results (command, commit, date, load, every step's figures, the medians) as JSON
and draws them as a PNG (tools/benchplot.py): put and get MiB/s per measure and per step
beside stock's figures, and the writer's time per put; by default
BUILD_DIR/bench/miles-bench.json and .png.
"""
import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3"
MiB = 1 << 20
sys.path.insert(0, os.path.join(REPO, "store", "python"))
sys.path.insert(0, HERE)
import benchplot  # noqa: E402  (results file and picture)
import storecluster  # noqa: E402  (free ports, clean environments, the master)
# reference-figures.md, 2026-12-06 section (the faster 2-core VM, the class of this one), row
# "Miles' object store flow (dense shards + MoE chunks)": put 459-532 MiB/s, get 393-395 MiB/s;
# the midpoints. (The 2026-12-02 entry, a slower VM: put 294-338, get 153-177.)
STOCK_PUT, STOCK_GET = 495.5, 394.0
REF = "../shared/spec/reference-figures.md (2026-12-06, stock Python layer, kernel TCP)"
DENSE_SHARDS, SAMPLES, PROMPT = 4, 32, 512
LAYERS, TOPK = 48, 8
PREFIX = "miles-object-store"

# Miles' ROLLOUT_DATA_VALUE_SPEC (train_data_conversion.py) for the fields sent here.
SPEC = {"tokens": ("typed_ragged", None), "loss_masks": ("typed_ragged", None),
        "rollout_log_probs": ("typed_ragged", None),
        "rollout_routed_experts": ("typed_ragged", None),
        "partition": ("ndarray", "int64"), "response_lengths": ("ndarray", "int64"),
        "rewards": ("ndarray", "float32"), "truncated": ("ndarray", "int64"),
        "sample_indices": ("ndarray", "int64"), "total_lengths": ("auto", None)}


def shard(step, idx):
    """Shard idx of a step (DENSE_SHARDS is the MoE batch), the same in every process."""
    import numpy
    rng = random.Random(step * 1000 + idx)
    resp = [rng.randint(1800, 3600) for _ in range(SAMPLES)]
    part = list(range(idx, idx + SAMPLES * (DENSE_SHARDS + 1), DENSE_SHARDS + 1))
    v = {
        "partition": part,
        "tokens": [[rng.randrange(152000) for _ in range(PROMPT + r)] for r in resp],
        "loss_masks": [[1] * (r - 1) + [0] for r in resp],
        "rollout_log_probs": [[-rng.random() * 7 for _ in range(r)] for r in resp],
        "response_lengths": resp,
        "rewards": [rng.random() - 0.25 for _ in resp],
        "truncated": [int(rng.random() < 0.2) for _ in resp],
        "sample_indices": part,
        "total_lengths": [PROMPT + r for r in resp],
    }
    if idx == DENSE_SHARDS:
        g = numpy.random.default_rng(step * 1000 + idx)
        v["rollout_routed_experts"] = [g.integers(0, 256, (PROMPT + r - 1, LAYERS, TOPK),
                                                  dtype=numpy.int32) for r in resp]
    return v


def payload_bytes(v):
    n = 0
    for f, x in v.items():
        if f == "rollout_routed_experts":
            n += sum(a.nbytes for a in x)
        elif x and isinstance(x[0], list):
            n += 8 * sum(len(r) for r in x)
        else:
            n += 8 * len(x)
    return n


def schemas(v):
    from mooncake.structured_object_store import FieldSchema
    out = {}
    for f, (codec, dtype) in SPEC.items():
        if f in v:
            md = {"section": "meta_info" if codec == "auto" else "non_tensor_batch"}
            if dtype:
                md["dtype"] = dtype
            out[f] = FieldSchema(codec=codec, nullable=False, metadata=md)
    return out


def same(got, want, where):
    """type(a) is type(b) and equal bits, recursively (numpy arrays by dtype, shape, bytes)."""
    import numpy
    if type(got) is not type(want) and not (isinstance(got, dict) and isinstance(want, dict)):
        raise AssertionError(f"{where}: {type(got).__name__} for {type(want).__name__}")
    if isinstance(want, numpy.ndarray):
        if got.dtype != want.dtype or got.shape != want.shape or \
                got.tobytes() != want.tobytes():
            raise AssertionError(f"{where}: array differs")
    elif isinstance(want, dict):
        for k in want:
            same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        if len(got) != len(want):
            raise AssertionError(f"{where}: {len(got)} items for {len(want)}")
        if want and not isinstance(want[0], (list, numpy.ndarray)):
            if got != want or any(type(a) is not type(b) for a, b in zip(got, want)):
                raise AssertionError(f"{where}: values differ")
        else:
            for i, (a, b) in enumerate(zip(got, want)):
                same(a, b, f"{where}[{i}]")
    elif got != want:
        raise AssertionError(f"{where}: {got!r} for {want!r}")


def open_store(master, segment):
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", segment, 1 << 30, "tcp", "", master)
    if rc != 0:
        raise SystemExit(f"setup against {master} failed: {rc}")
    return s


@contextlib.contextmanager
def bundle(master):
    """A MooncakeBundleTransfer over a store of no segment of its own, closed after."""
    from mooncake.structured_object_store import MooncakeBundleTransfer
    s = open_store(master, 0)
    t = MooncakeBundleTransfer(s, key_prefix=PREFIX)
    try:
        yield t
    finally:
        t.close()
        s.close()


def role_holder(a):
    s = open_store(a.master, 2 << 30)
    print("ready", flush=True)
    sys.stdin.read()  # until the orchestrator closes our stdin
    s.close()


def steps_from_stdin():
    """(step, refs path) per line until stdin closes: the roles live across steps, as
    Miles' rollout manager, trainers and driver do."""
    print("ready", flush=True)
    for line in sys.stdin:
        step, refs = line.split()
        yield int(step), refs


def role_writer(a):
    from mooncake.structured_object_store import export_ref
    with bundle(a.master) as t:
        for step, path in steps_from_stdin():
            values = [shard(step, i) for i in range(DENSE_SHARDS + 1)]
            nbytes = sum(payload_bytes(v) for v in values)
            refs, each = [], []
            for v in values:
                sc = schemas(v)
                t0 = time.perf_counter()
                ref = t.put(v, type="dict", namespace="miles", partition="default",
                            stage="rollout", config=None, field_schemas=sc)
                each.append(time.perf_counter() - t0)
                refs.append(export_ref(ref))
            with open(path, "w") as f:
                json.dump({"refs": refs, "bytes": nbytes}, f)
            print(json.dumps({"put_s": sum(each), "bytes": nbytes,
                              "dense_ms": 1e3 * statistics.mean(each[:DENSE_SHARDS]),
                              "moe_ms": 1e3 * each[DENSE_SHARDS]}), flush=True)


def role_reader(a):
    from mooncake.structured_object_store import MooncakeBundleTransfer, import_ref
    with bundle(a.master) as t:
        for step, path in steps_from_stdin():
            with open(path) as f:
                refs = json.load(f)["refs"]
            mine = [i for i in range(len(refs)) if i % 2 == a.reader]
            t0 = time.time()
            got = [t.get(import_ref(refs[i]), type="dict") for i in mine]
            t1 = time.time()
            for i, g in zip(mine, got):
                same(dict(g), shard(step, i), f"step {step} shard {i}")
                MooncakeBundleTransfer.release_result(g)
            print(json.dumps({"t0": t0, "t1": t1}), flush=True)


def role_driver(a):
    from mooncake.structured_object_store import import_ref
    with bundle(a.master) as t:
        for _, path in steps_from_stdin():
            with open(path) as f:
                for r in json.load(f)["refs"]:
                    t.cleanup_dataproto(import_ref(r))
            print("{}", flush=True)


def child(args, env, **kw):
    return storecluster.spawn_role(__file__, args, env, **kw)


expect_line = storecluster.expect_line


def run_once(build, steps, tmp, run):
    env = storecluster.clean_env({
        "LIBTIDESTORE": os.path.join(build, "store", "client", "libtidestore.so"),
        "TIDE_AGENT": "off", "TIDE_NODE_ENV": os.devnull, "MC_FORCE_TCP": "1",
        "TIDE_LOG_LEVEL": "warn"})
    master, addr = storecluster.start_master(
        os.path.join(build, "tools", "master", "mooncake_master"), env, subprocess.DEVNULL)
    holder = None
    roles = []
    rows = []
    try:
        holder = child(["holder", "--master", addr], env, stdin=subprocess.PIPE)
        if expect_line(holder, "holder") != "ready":
            raise SystemExit("holder did not set up")
        writer = child(["writer", "--master", addr], env, stdin=subprocess.PIPE)
        readers = [child(["reader", "--master", addr, "--reader", str(r)], env,
                         stdin=subprocess.PIPE) for r in (0, 1)]
        driver = child(["driver", "--master", addr], env, stdin=subprocess.PIPE)
        roles = [writer] + readers + [driver]
        for p in roles:
            if expect_line(p, "a role") != "ready":
                raise SystemExit("a role did not set up")

        def order(procs, step, refs):
            for p in procs:
                p.stdin.write(f"{step} {refs}\n")
                p.stdin.flush()

        for step in range(steps):
            refs = os.path.join(tmp, f"refs-{run}-{step}.json")
            order([writer], step, refs)
            wres = json.loads(expect_line(writer, "writer", 600))
            order(readers, step, refs)
            res = [json.loads(expect_line(r, "reader (a value that did not come back as put?)",
                                          600)) for r in readers]
            get_s = max(x["t1"] for x in res) - min(x["t0"] for x in res)
            order([driver], step, refs)
            expect_line(driver, "driver", 120)
            mib = wres["bytes"] / MiB
            rows.append((mib / wres["put_s"], mib / get_s, wres["dense_ms"], wres["moe_ms"],
                         mib, wres["put_s"], get_s))
            print(f"run {run} step {step}: {mib:.1f} MiB, put {rows[-1][0]:.0f} MiB/s "
                  f"(a dense shard {wres['dense_ms']:.1f} ms, the MoE batch "
                  f"{wres['moe_ms']:.1f} ms), get {rows[-1][1]:.0f} MiB/s", flush=True)
        for p in roles:
            p.stdin.close()
            if p.wait(timeout=60) != 0:
                raise SystemExit(f"a role exited with {p.returncode}")
    finally:
        for p in roles:
            if p.poll() is None:
                p.kill()
                p.wait()
        if holder is not None:
            storecluster.end_role(holder)
        storecluster.stop(master, 30)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("role_or_build")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--master")
    ap.add_argument("--reader", type=int, default=0)
    benchplot.add_output_args(ap)
    a = ap.parse_args()
    roles = {"holder": role_holder, "writer": role_writer, "reader": role_reader,
             "driver": role_driver}
    if a.role_or_build in roles:
        roles[a.role_or_build](a)
        return
    build = os.path.abspath(a.role_or_build)
    if a.steps < 2:
        raise SystemExit("--steps must be at least 2 (the first step of a run is reported apart)")
    json_path, png_path = benchplot.default_paths(build, "miles-bench", a.json, a.png)
    rec = benchplot.Recorder("miles-bench", "Miles' rollout flow over "
                             "mooncake.structured_object_store, kernel TCP, no agent", params={
                                 "steps": a.steps, "runs": a.runs, "stock_put_mib_s": STOCK_PUT,
                                 "stock_get_mib_s": STOCK_GET})
    first, rows, pairs, raw = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="tide-miles-bench-") as tmp:
        for run in range(a.runs):
            r = run_once(build, a.steps, tmp, run)
            first.append(r[0])
            rows += r[1:]
            # The reference's own measure: the first two steps of fresh processes, bytes
            # over time summed (stock: 333 MB per two steps).
            mib = r[0][4] + r[1][4]
            pairs.append((mib / (r[0][5] + r[1][5]), mib / (r[0][6] + r[1][6])))
            for step, x in enumerate(r):
                raw.append({"run": run, "step": step, "measure": MEASURES[0 if step == 0 else 1],
                            "put_mib_s": x[0], "get_mib_s": x[1], "dense_ms": x[2],
                            "moe_ms": x[3], "mib": x[4], "put_s": x[5], "get_s": x[6]})
            raw.append({"run": run, "step": "0+1", "measure": MEASURES[2],
                        "put_mib_s": pairs[-1][0], "get_mib_s": pairs[-1][1], "mib": mib,
                        "put_s": r[0][5] + r[1][5], "get_s": r[0][6] + r[1][6]})
    for what, rs in (("first steps (fresh processes and segment)", first),
                     ("later steps", rows)):
        put = statistics.median(r[0] for r in rs)
        get = statistics.median(r[1] for r in rs)
        print(f"median of {len(rs)} {what}: put {put:.0f} MiB/s ({put / STOCK_PUT:.1f}x "
              f"stock), get {get:.0f} MiB/s ({get / STOCK_GET:.1f}x stock); writer per put: "
              f"dense shard {statistics.median(r[2] for r in rs):.1f} ms, MoE batch "
              f"{statistics.median(r[3] for r in rs):.1f} ms")
    put = statistics.median(p[0] for p in pairs)
    get = statistics.median(p[1] for p in pairs)
    print(f"median of {len(pairs)} runs' first two steps together (the reference's measure): "
          f"put {put:.0f} MiB/s ({put / STOCK_PUT:.1f}x stock), get {get:.0f} MiB/s "
          f"({get / STOCK_GET:.1f}x stock)")
    print(f"stock = midpoints of {REF}")
    finish(rec, raw, json_path, png_path)


MEASURES = ("first step of each run", "later steps", "steps 0+1 together (reference measure)")


def finish(rec, raw, json_path, png_path):
    """The medians by measure and by step, the panels and the table; writes JSON and PNG."""
    by_measure = benchplot.medians([dict(r, view="measure") for r in raw], ["view", "measure"])
    by_step = benchplot.medians([dict(r, view="step") for r in raw
                                 if isinstance(r["step"], int)], ["view", "step"])
    for r in by_measure + by_step:
        r["put_vs_stock"] = r["put_mib_s"] / STOCK_PUT
        r["get_vs_stock"] = r["get_mib_s"] / STOCK_GET
    hl = [{"label": f"stock Mooncake put, {STOCK_PUT:.0f} MiB/s (reference midpoint)",
           "y": STOCK_PUT, "color": COLORS_PUT_GET[0]},
          {"label": f"stock Mooncake get, {STOCK_GET:.0f} MiB/s (reference midpoint)",
           "y": STOCK_GET, "color": COLORS_PUT_GET[1]}]
    panels = [
        {"kind": "bar", "title": "Put and get throughput per measure (median, range of runs)",
         "x": "measure", "y": "put_mib_s", "xlabel": "measure",
         "ylabel": "payload throughput (MiB/s)", "hlines": hl, "series": [
             {"label": "Tide put (writer's time in put)", "where": {"view": "measure"},
              "y": "put_mib_s", "color": COLORS_PUT_GET[0]},
             {"label": "Tide get (two readers, wall time)", "where": {"view": "measure"},
              "y": "get_mib_s", "color": COLORS_PUT_GET[1]}]},
        {"kind": "xy", "title": "Per step (median over runs, range of runs)", "x": "step",
         "xint": True,
         "y": "put_mib_s", "xlabel": "step (0 = fresh processes and segment)",
         "ylabel": "payload throughput (MiB/s)", "hlines": hl, "series": [
             {"label": "Tide put", "where": {"view": "step"}, "y": "put_mib_s",
              "color": COLORS_PUT_GET[0]},
             {"label": "Tide get", "where": {"view": "step"}, "y": "get_mib_s",
              "color": COLORS_PUT_GET[1]}]},
        {"kind": "bar", "title": "Writer's time per put (latency)", "x": "measure",
         "y": "dense_ms", "xlabel": "measure", "ylabel": "time per put (ms)",
         "series": [
             {"label": "a dense shard (~2 MiB of Python lists)", "y": "dense_ms",
              "where": {"view": "measure"}, "color": 2},
             {"label": "the MoE batch (~150 MiB of int32 arrays)", "y": "moe_ms",
              "where": {"view": "measure"}, "color": 4}]}]
    tables = [{"title": "", "where": {"view": "measure"}, "columns": [
        {"key": "measure", "head": "measure"},
        {"key": "put_mib_s", "head": "put MiB/s", "fmt": ".0f"},
        {"key": "get_mib_s", "head": "get MiB/s", "fmt": ".0f"},
        {"key": "put_vs_stock", "head": "put vs stock", "fmt": "x"},
        {"key": "get_vs_stock", "head": "get vs stock", "fmt": "x"},
        {"key": "dense_ms", "head": "dense shard put ms", "fmt": ".1f"},
        {"key": "moe_ms", "head": "MoE batch put ms", "fmt": ".1f"},
        {"key": "n", "head": "steps (or runs)", "fmt": "d"}]}]
    rec.finish(raw, by_measure + by_step, panels, tables, json_path=json_path,
               png_path=png_path, notes=[
                   "Payload bytes are the values' own (8 bytes per Python int or float, the "
                   "arrays' nbytes); put MiB/s = payload / the writer's time in "
                   "MooncakeBundleTransfer.put; get MiB/s = payload / wall time from the first "
                   "reader's first get to the last reader's last release_result.",
                   f"Stock figures are not measured in this run: midpoints of {REF}."])


COLORS_PUT_GET = ("#1f77b4", "#d62728")


if __name__ == "__main__":
    main()
