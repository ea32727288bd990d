"""The processes of Miles' Mooncake rollout guide, for TestSuite_miles_guide.

Each role is one process, as in a Miles job: the guide's environment
(MOONCAKE_PROTOCOL, MOONCAKE_MASTER, MOONCAKE_DEVICE ...) plus Miles'
--mooncake-store-init-kwargs JSON in MILES_INIT_KWARGS. `MilesStore` builds
the setup() dict the way Miles' object store does (kwarg, else environment,
else Miles' default; the segment forced to 0 for processes that contribute
none), raises RuntimeError on a failed setup, and moves values with
mooncake.structured_object_store exactly as Miles calls it.

  holder   a training actor with LOCAL_RANK=0: contributes the node's segment,
           prints "holder ready <endpoint>", then reads every ref listed in
           --refs once the file appears, compares each value with what the
           rollout put (--seed), prints "holder verified N", and stays up until
           stdin closes (its segment holds the data).
  rollout  the rollout manager: no segment; puts --shards shards (Miles' field
           specs, ragged lists, numpy arrays, one MoE array over the chunk
           size) and writes their exported refs to --refs.
  reader   another trainer (LOCAL_RANK=1, no segment): reads and compares every ref.
  driver   removes every ref (cleanup_dataproto); the suite checks the master's
           key count.
  setup    only setup(); prints "setup rc=<rc>" or "setup error: <message>".
  inprocess  a holder (--device A) and a rollout manager (--device B) in ONE process
           (for the verbs double, which joins queue pairs only within a process):
           puts --shards shards, reads them back through the holder, compares,
           removes them; prints "inprocess verified N".

Uses only the imported `mooncake` package (whatever the interpreter finds:
the pip-installed one in the suite) and numpy.
"""
import argparse
import json
import os
import random
import sys
import time

import numpy

from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: F401
from mooncake.structured_object_store import (FieldSchema, MooncakeBundleTransfer,
                                              export_ref, import_ref)

GiB = 1 << 30
PREFIX = "miles-object-store"
# Field -> (codec, dtype): the shapes of Miles' rollout value spec used here.
SPEC = {"tokens": ("typed_ragged", None), "loss_masks": ("typed_ragged", None),
        "rollout_log_probs": ("typed_ragged", None),
        "rollout_routed_experts": ("typed_ragged", None),
        "response_lengths": ("ndarray", "int64"), "rewards": ("ndarray", "float32"),
        "sample_indices": ("ndarray", "int64"), "prompt": ("msgpack_ragged", None),
        "metadata": ("msgpack_ragged", None), "total_lengths": ("auto", None)}


def parse_size(v):
    """Miles' size parser: ints, or a number with kb/mb/gb/k/m/g (binary)."""
    if isinstance(v, int):
        return v
    s = str(v).strip().lower()
    for suf, mul in (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("k", 1 << 10),
                     ("m", 1 << 20), ("g", 1 << 30)):
        if s.endswith(suf):
            return int(float(s[:-len(suf)]) * mul)
    return int(float(s))


class MilesStore:
    """Miles' MooncakeObjectStore: setup dict from kwargs and env, then the helper."""

    def __init__(self, contribute_segment, **override):
        kw = json.loads(os.environ.get("MILES_INIT_KWARGS") or "{}")
        kw.update(override)
        env = os.environ
        cfg = {
            "local_hostname": kw.get("local_hostname") or env.get("MOONCAKE_LOCAL_HOSTNAME")
            or "127.0.0.1",
            "metadata_server": kw.get("metadata_server") or
            env.get("MOONCAKE_TE_META_DATA_SERVER") or "P2PHANDSHAKE",
            "local_buffer_size": parse_size(kw.get("local_buffer_size",
                                                   env.get("MOONCAKE_LOCAL_BUFFER_SIZE",
                                                           32 * GiB))),
            "protocol": kw.get("protocol") or env.get("MOONCAKE_PROTOCOL") or "rdma",
            "rdma_devices": kw.get("device_name") or env.get("MOONCAKE_DEVICE") or "",
            "master_server_addr": kw.get("master_server_address") or
            env.get("MOONCAKE_MASTER") or "",
            "global_segment_size": parse_size(kw.get("global_segment_size",
                                                     env.get("MOONCAKE_GLOBAL_SEGMENT_SIZE",
                                                             8 * GiB)))
            if contribute_segment else 0,
        }
        self.chunk_bytes = kw.get("chunk_bytes")
        self.store = MooncakeDistributedStore()
        rc = self.store.setup(cfg)
        if rc:
            raise RuntimeError(f"Mooncake store setup failed with rc={rc}")
        self.transfer = MooncakeBundleTransfer(self.store, key_prefix=PREFIX)

    def put(self, value):
        schemas = {}
        for f, (codec, dtype) in SPEC.items():
            if f in value:
                md = {"section": "meta_info" if codec == "auto" else "non_tensor_batch"}
                if dtype:
                    md["dtype"] = dtype
                schemas[f] = FieldSchema(codec, nullable=False, metadata=md)
        ref = self.transfer.put(value, type="dict", namespace="miles",
                                chunk_bytes=self.chunk_bytes, config=None,
                                field_schemas=schemas)
        return export_ref(ref)

    def get(self, box):
        return self.transfer.get(import_ref(box), type="dict")

    def release(self, value):
        MooncakeBundleTransfer.release_result(value)

    def remove(self, box):
        self.transfer.cleanup_dataproto(import_ref(box))


def shard(seed, i, moe_rows=0):
    """One DP shard of a rollout batch; content depends only on (seed, i)."""
    rng = random.Random(seed * 1000 + i)
    n = 6
    resp = [rng.randint(0, 40) for _ in range(n)]
    prm = [rng.randint(3, 30) for _ in range(n)]
    v = {
        "tokens": [[rng.randrange(152000) for _ in range(prm[k] + resp[k])] for k in range(n)],
        "loss_masks": [[1] * resp[k] for k in range(n)],
        "rollout_log_probs": [[-rng.random() * 5 for _ in range(resp[k])] for k in range(n)],
        "response_lengths": resp,
        "rewards": [rng.choice([0.0, 1.0]) for _ in range(n)],
        "sample_indices": list(range(i * n, i * n + n)),
        "prompt": [f"shard {i} sample {k}: \u4f60\u597d \u2713" for k in range(n)],
        "metadata": [{"turns": k, "tool": None if k % 2 else "calc"} for k in range(n)],
        "total_lengths": [prm[k] + resp[k] for k in range(n)],
    }
    if moe_rows:
        experts = numpy.random.default_rng(seed + i).integers(0, 64, size=(moe_rows, 24, 8),
                                                              dtype=numpy.int32)
        v["rollout_routed_experts"] = [experts]
    return v


def plain(x):
    """x in a form that compares equal only to a value of the same types and bits: each
    value tagged with its exact type, floats as their 64 bits (float.hex), arrays and
    numpy scalars as dtype, shape and bytes (what Ray's pickling would give back)."""
    t = type(x)
    if t is float:
        return ("float", x.hex())
    if t is list or t is tuple:
        return (t.__name__, [plain(y) for y in x])
    if t is dict:
        return ("dict", [(plain(k), plain(y)) for k, y in x.items()])
    if isinstance(x, (numpy.ndarray, numpy.generic)):
        return (t.__name__, x.dtype.str, numpy.shape(x), numpy.asarray(x).tobytes())
    return (t.__name__, x)  # None, bool, int, str, bytes, range


def compare(got, want, where):
    """Every field of want in got with the same types and bits (type-exact, as Miles'
    trainer code needs: lists stay lists, Python floats keep all 64 bits)."""
    def first_difference(g, w, path):
        if g[0] in ("list", "tuple", "dict") and g[0] == w[0] and len(g[1]) == len(w[1]):
            for i, (gi, wi) in enumerate(zip(g[1], w[1])):
                if gi != wi:
                    return first_difference(gi, wi, f"{path}[{i}]")
        return f"{path}: got {g[0]} {str(g[1:])[:60]}, put {w[0]} {str(w[1:])[:60]}"

    for f, w in want.items():
        if f not in got:
            raise AssertionError(f"{where}: field {f} missing")
        pg, pw = plain(got[f]), plain(w)
        if pg != pw:
            raise AssertionError(f"{where}: {first_difference(pg, pw, f)}")


def wait_file(path, deadline_s):
    end = time.monotonic() + deadline_s
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise SystemExit(f"no refs file {path} after {deadline_s} s")
        time.sleep(0.05)
    with open(path) as f:
        return json.load(f)


def read_all(store, refs, seed, moe_rows):
    for i, box in enumerate(refs):
        got = store.get(box)
        try:
            compare(got, shard(seed, i, moe_rows if i == 0 else 0), f"shard {i}")
        finally:
            store.release(got)
    return len(refs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["holder", "rollout", "reader", "driver", "setup",
                                     "inprocess"])
    ap.add_argument("--device", action="append", default=[],
                    help="inprocess: the holder's, then the rollout manager's device_name")
    ap.add_argument("--refs")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--moe-rows", type=int, default=0,
                    help="rows of the MoE int32 [rows, 24, 8] array in shard 0")
    a = ap.parse_args()
    if a.role == "setup":
        try:
            MilesStore(contribute_segment=True)
            print("setup rc=0", flush=True)
        except RuntimeError as e:
            print(f"setup error: {e}", flush=True)
            return 1
        return 0
    if a.role == "inprocess":
        holder = MilesStore(True, device_name=a.device[0])
        rollout = MilesStore(False, device_name=a.device[1])
        refs = [rollout.put(shard(a.seed, i, a.moe_rows if i == 0 else 0))
                for i in range(a.shards)]
        n = read_all(holder, refs, a.seed, a.moe_rows)
        for box in refs:
            rollout.remove(box)
        print(f"inprocess verified {n}", flush=True)
        rollout.store.close()
        holder.store.close()
        return 0
    if a.role == "holder":
        os.environ["LOCAL_RANK"] = "0"
        s = MilesStore(contribute_segment=True)
        print(f"holder ready {s.store.get_hostname()}", flush=True)
        refs = wait_file(a.refs, 120)
        print(f"holder verified {read_all(s, refs, a.seed, a.moe_rows)}", flush=True)
        sys.stdin.read()  # the segment stays until the suite is done with it
        s.store.close()
        return 0
    s = MilesStore(contribute_segment=False)
    if a.role == "rollout":
        refs = [s.put(shard(a.seed, i, a.moe_rows if i == 0 else 0)) for i in range(a.shards)]
        tmp = a.refs + ".tmp"
        with open(tmp, "w") as f:
            json.dump(refs, f)  # JSON-safe: they travel through Ray in Miles
        os.rename(tmp, a.refs)
        print(f"rollout put {len(refs)}", flush=True)
    elif a.role == "reader":
        print(f"reader verified {read_all(s, wait_file(a.refs, 60), a.seed, a.moe_rows)}",
              flush=True)
    else:
        refs = wait_file(a.refs, 60)
        for box in refs:
            s.remove(box)
        print(f"driver removed {len(refs)}", flush=True)
    s.store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
