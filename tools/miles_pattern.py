#!/usr/bin/env python3
"""Miles' rollout-data traffic over `mooncake.store`, without Miles or Ray.

Does, call for call, what Miles does through Mooncake's structured-object helper when the
full fast-path API exists (miles-usage.md section 1.3):

  writer  (the rollout manager): per shard, put(meta) and put(manifest), then for every
          member BufferPool.acquire + copy + batch_put_from([key], [ptr], [size], config)
          with config.group_ids = ["structured-<uuid>"]; on a failure batch_remove of the
          shard's written keys. Writes a JSON handle file (keys, sizes, CRC32 per object).
  reader  (a trainer): per shard, get(manifest); register_buffer + batch_get_into +
          unregister_buffer for the meta blob; then per member a BufferPool lease and one
          get_into_ranges (a chunked member's chunks gathered in one call). Every byte is
          compared with its expected content.
  driver  (train.py after the step): per shard get(manifest), then batch_remove(all_keys,
          True) (0 and -704 are success), each failing key retried with remove(key, True);
          finally batch_is_exist must report every key gone.

Content is derived from (seed, key), so any reader verifies without the writer. Each role
prints one summary line (objects, MiB, ops/s, MiB/s) and exits non-zero with a message
naming the shard and key on any mismatch or error.

Configuration comes from the environment as in Miles (`--init-kwargs` JSON first, like
--mooncake-store-init-kwargs, then MOONCAKE_MASTER, MOONCAKE_LOCAL_HOSTNAME,
MOONCAKE_TE_META_DATA_SERVER, MOONCAKE_PROTOCOL, MOONCAKE_DEVICE,
MOONCAKE_GLOBAL_SEGMENT_SIZE, MOONCAKE_LOCAL_BUFFER_SIZE, LOCAL_RANK) and goes to
MooncakeDistributedStore.setup(dict) with Mooncake's keys. As in Miles, the writer and the
driver contribute no segment; a reader contributes MOONCAKE_GLOBAL_SEGMENT_SIZE when
LOCAL_RANK is unset or 0. With a node agent (TIDE_AGENT=required|auto) the agent owns the
node's segment and the segment size is ignored.

  MOONCAKE_MASTER=10.0.0.1:50051 python3 tools/miles_pattern.py writer --shards 16 \\
      --handle /tmp/step1.json
  python3 tools/miles_pattern.py reader --handle /tmp/step1.json
  python3 tools/miles_pattern.py driver --handle /tmp/step1.json
"""
import argparse
import ctypes
import hashlib
import json
import os
import random
import re
import socket
import sys
import time
import uuid
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "store", "python"))

MiB = 1 << 20
PREFIX = "miles-object-store/default"
BLOCK = 1 << 20

# Miles' fields (train_data_conversion.py) and the members each codec writes.
TYPED_RAGGED = ["tokens", "loss_masks", "rollout_log_probs", "teacher_log_probs"]
NDARRAY = ["partition", "response_lengths", "rewards", "truncated", "sample_indices",
           "rollout_ids"]
MSGPACK_RAGGED = ["prompt", "metadata"]


class Failure(Exception):
    pass


class Timed:
    """Wraps the store or a pool: time spent inside their calls (what the store costs,
    without content generation and verification)."""
    spent = 0.0

    def __init__(self, obj):
        self._obj = obj

    def __getattr__(self, name):
        f = getattr(self._obj, name)
        if not callable(f):
            return f

        def call(*a, **kw):
            t = time.perf_counter()
            try:
                return f(*a, **kw)
            finally:
                Timed.spent += time.perf_counter() - t
        return call


def fail(msg):
    raise Failure(msg)


# ------------------------------------------------------------------ configuration

def parse_size(v):
    """Miles' _parse_size: ints, or a number with k|kb|m|mb|g|gb (binary)."""
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(k|kb|m|mb|g|gb)?\s*", str(v), re.IGNORECASE)
    if not m:
        fail(f"{v!r} is not a size (examples: 1073741824, 512mb, 4gb)")
    mult = {None: 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30,
            "gb": 1 << 30}[m.group(2).lower() if m.group(2) else None]
    return int(float(m.group(1)) * mult)


def node_ip(master):
    """Miles uses the Ray node IP; here: the address that routes to the master."""
    host = master.rsplit(":", 1)[0] if master else "127.0.0.1"
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((host, 9))
        ip = s.getsockname()[0]
        s.close()
        return ip
    except OSError:
        return "127.0.0.1"


def store_config(kwargs, contribute):
    """Miles' _mooncake_store_config: kwarg or env, Mooncake's setup() keys."""
    env = os.environ
    master = kwargs.get("master_server_address") or env.get("MOONCAKE_MASTER", "")
    if not master:
        fail("no master: set MOONCAKE_MASTER=host:port (or master_server_address in "
             "--init-kwargs)")
    seg = kwargs.get("global_segment_size", env.get("MOONCAKE_GLOBAL_SEGMENT_SIZE", "1gb"))
    return {
        "local_hostname": kwargs.get("local_hostname") or env.get("MOONCAKE_LOCAL_HOSTNAME")
        or node_ip(master),
        "metadata_server": kwargs.get("metadata_server")
        or env.get("MOONCAKE_TE_META_DATA_SERVER") or "P2PHANDSHAKE",
        "local_buffer_size": parse_size(kwargs.get(
            "local_buffer_size", env.get("MOONCAKE_LOCAL_BUFFER_SIZE", "512mb"))),
        "protocol": kwargs.get("protocol") or env.get("MOONCAKE_PROTOCOL") or "tcp",
        "rdma_devices": kwargs.get("device_name") or env.get("MOONCAKE_DEVICE") or "",
        "master_server_addr": master,
        "global_segment_size": parse_size(seg) if contribute else 0,
    }


def open_store(args, contribute):
    from mooncake.store import MooncakeDistributedStore
    kwargs = json.loads(args.init_kwargs) if args.init_kwargs else {}
    if args.contribute is not None:
        contribute = args.contribute
    cfg = store_config(kwargs, contribute)
    store = MooncakeDistributedStore()
    rc = store.setup(cfg)
    if rc != 0:
        fail(f"setup failed ({rc}) with {json.dumps(cfg)}; is mooncake_master running at "
             f"{cfg['master_server_addr']}, and the node agent (or TIDE_AGENT=off)?")
    needed = ["batch_put_from", "get_into_ranges", "batch_get_into", "register_buffer",
              "unregister_buffer", "batch_remove", "batch_is_exist", "_get_pyclient_capsule"]
    missing = [m for m in needed if not hasattr(store, m)]
    if missing:
        fail(f"mooncake.store lacks the fast-path API: {missing}")
    return Timed(store)


def make_pool(store):
    from mooncake.store import BufferPool
    if store._get_pyclient_capsule() is None:
        fail("the store has no local buffer (set MOONCAKE_LOCAL_BUFFER_SIZE)")
    return Timed(BufferPool(store._obj))


# ------------------------------------------------------------------ content

def content(seed, key, size):
    """Deterministic bytes for (seed, key): random 1 MiB block, rotated per MiB."""
    h = hashlib.blake2b(f"{seed}\0{key}".encode(), digest_size=8).digest()
    r = random.Random(int.from_bytes(h, "little"))
    if size <= BLOCK:
        return r.randbytes(size)
    base = r.randbytes(BLOCK)
    parts, left, i = [], size, 0
    while left > 0:
        k = (i * 4099) % BLOCK
        blk = base[k:] + base[:k]
        parts.append(blk[:left] if left < BLOCK else blk)
        left -= BLOCK
        i += 1
    return b"".join(parts)


def shard_layout(rng, big_chunks, chunk_bytes):
    """[(member name, size, nchunks)] for one shard: Miles' codecs over S samples."""
    s = rng.choice([2, 8, 32])
    lens = [rng.randint(512, 4096) for _ in range(s)]  # prompt + response tokens
    t = sum(lens)
    out = []
    for f in TYPED_RAGGED:
        out += [(f"{f}.data", 8 * t, 0), (f"{f}.offsets", 8 * (s + 1), 0),
                (f"{f}.shapes", 8 * s, 0), (f"{f}.ndims", 2 * s, 0), (f"{f}.nulls", s, 0)]
    for f in NDARRAY:
        out += [(f"{f}.data", 8 * s, 0), (f"{f}.nulls", s, 0)]
    for f in MSGPACK_RAGGED:
        out += [(f"{f}.data", sum(rng.randint(50, 400) for _ in range(s)), 0),
                (f"{f}.offsets", 8 * (s + 1), 0), (f"{f}.nulls", s, 0)]
    if big_chunks:
        out.append(("rollout_routed_experts.data", big_chunks * chunk_bytes, big_chunks))
    return out


def crc(b):
    return zlib.crc32(b) & 0xFFFFFFFF


# ------------------------------------------------------------------ roles

def writer(args):
    from mooncake.store import ReplicateConfig
    store = open_store(args, contribute=False)
    pool = make_pool(store)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)
    chunk_bytes = args.chunk_mib * MiB
    shards, nobj, nbytes = [], 0, 0
    t0 = time.monotonic()
    for si in range(args.shards):
        sid = uuid.uuid4().hex
        base = f"{PREFIX}/{sid}"
        rc = ReplicateConfig()
        rc.replica_num = args.replicas
        rc.group_ids = [f"structured-{sid}"]
        layout = shard_layout(rng, args.big_chunks, chunk_bytes)
        members = []
        for name, size, nchunks in layout:
            key = f"{base}/buffer/non_tensor_batch.{name}"
            if nchunks:
                chunks = [{"key": f"{key}/chunk/{i}", "size": chunk_bytes}
                          for i in range(nchunks)]
                members.append({"name": name, "size": size, "chunks": chunks})
            else:
                members.append({"name": name, "size": size, "key": key})
        meta = json.dumps({"type": "dict", "namespace": "miles", "shard": si,
                           "fields": {m["name"]: {"codec": "typed_ragged", "nullable": False,
                                                  "metadata": {"section": "non_tensor_batch"}}
                                      for m in members},
                           "pad": "m" * 2000}).encode()
        manifest = json.dumps({"version": 1, "group": rc.group_ids[0], "meta": f"{base}/meta",
                               "members": members, "pad": "x" * 6000}).encode()
        objects = [{"key": f"{base}/manifest", "size": len(manifest), "crc": crc(manifest),
                    "kind": "manifest"},
                   {"key": f"{base}/meta", "size": len(meta), "crc": crc(meta), "kind": "meta"}]
        written = []

        def put_fail(msg):
            if written:
                store.batch_remove(written, True)
            fail(f"writer: shard {si}: {msg}")

        for o, data in ((objects[1], meta), (objects[0], manifest)):
            r = store.put(o["key"], memoryview(data), config=rc)
            if r != 0:
                put_fail(f"put {o['key']} -> {r}")
            written.append(o["key"])
        for m in members:
            parts = m["chunks"] if "chunks" in m else [m]
            for p in parts:
                data = content(seed, p["key"], p["size"])
                lease = pool.acquire(p["size"])
                view = lease.buffer
                view[:] = data
                del view
                res = store.batch_put_from([p["key"]], [lease.ptr], [p["size"]], config=rc)
                lease.release()
                if res != [0]:
                    put_fail(f"batch_put_from {p['key']} ({p['size']} B) -> {res}")
                written.append(p["key"])
                objects.append({"key": p["key"], "size": p["size"], "crc": crc(data),
                                "kind": "chunk" if "chunks" in m else "member"})
        shards.append({"uuid": sid, "manifest": f"{base}/manifest", "meta": f"{base}/meta",
                       "objects": objects})
        nobj += len(objects)
        nbytes += sum(o["size"] for o in objects)
    dt, st = time.monotonic() - t0, Timed.spent
    tmp = args.handle + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"version": 1, "seed": seed, "shards": shards}, f)
    os.replace(tmp, args.handle)
    pool.close()
    store.close()
    return summary("writer", nobj, nbytes, dt, st, f"{args.shards} shards, handle {args.handle}")


def reader(args):
    store = open_store(args, contribute=os.environ.get("LOCAL_RANK", "0") == "0")
    pool = make_pool(store)
    h = load_handle(args.handle)
    seed = h["seed"]
    nobj, nbytes = 0, 0
    t0 = time.monotonic()
    for _ in range(args.repeat):
        for si, sh in enumerate(h["shards"]):
            objs = {o["key"]: o for o in sh["objects"]}
            # manifest: a plain get
            man = store.get(sh["manifest"])
            check_blob(si, objs[sh["manifest"]], man, "manifest")
            members = json.loads(man)["members"]
            # meta: register a bytearray, batch_get_into, unregister (as the helper)
            mo = objs[sh["meta"]]
            buf = bytearray(mo["size"])
            ptr = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
            r = store.register_buffer(ptr, len(buf))
            if r not in (0, -600):
                fail(f"reader: shard {si}: register_buffer -> {r}")
            got = store.batch_get_into([sh["meta"]], [ptr], [len(buf)])
            store.unregister_buffer(ptr)
            if got != [mo["size"]]:
                check_result(si, sh["meta"], got[0], mo["size"])
            check_blob(si, mo, bytes(buf), "meta")
            nobj += 2
            nbytes += len(man) + len(buf)
            # members: one lease and one get_into_ranges each
            for m in members:
                parts = m["chunks"] if "chunks" in m else [m]
                keys = [p["key"] for p in parts]
                for k, p in zip(keys, parts):
                    if k not in objs or objs[k]["size"] != p["size"]:
                        fail(f"reader: shard {si}: manifest and handle disagree on {k}")
                offs, o = [], 0
                for p in parts:
                    offs.append(o)
                    o += p["size"]
                with pool.acquire(m["size"]) as lease:
                    res = store.get_into_ranges([lease.ptr], [keys], [[[x] for x in offs]],
                                                [[[0]] * len(parts)],
                                                [[[p["size"]] for p in parts]])
                    view = lease.buffer
                    got = [bytes(view[off:off + p["size"]]) for off, p in zip(offs, parts)]
                    del view
                for k, p, data, r in zip(keys, parts, got, res[0]):
                    check_result(si, k, r[0], p["size"])
                    if crc(data) != objs[k]["crc"] or data != content(seed, k, p["size"]):
                        fail(f"reader: MISMATCH in shard {si}: {k} ({p['size']} B) "
                             f"differs from its expected content")
                nobj += len(parts)
                nbytes += m["size"]
    dt, st = time.monotonic() - t0, Timed.spent
    pool.close()
    store.close()
    return summary("reader", nobj, nbytes, dt, st,
                   f"{len(h['shards'])} shards x {args.repeat}, every byte verified")


def driver(args):
    store = open_store(args, contribute=False)
    h = load_handle(args.handle)
    keys, retried, nbytes = [], 0, 0
    t0 = time.monotonic()
    for si, sh in enumerate(h["shards"]):
        man = store.get(sh["manifest"])
        if man:
            m = json.loads(man)
            skeys = [sh["manifest"], m["meta"]]
            for mem in m["members"]:
                skeys += [c["key"] for c in mem["chunks"]] if "chunks" in mem else [mem["key"]]
        else:  # already removed (or lost): the handle still names every key
            skeys = [o["key"] for o in sh["objects"]]
        res = store.batch_remove(skeys, True)
        for k, r in zip(skeys, res):
            if r in (0, -704):
                continue
            retried += 1
            r2 = store.remove(k, True)
            if r2 not in (0, -704):
                fail(f"driver: shard {si}: remove {k} -> {r} then {r2}")
        keys += skeys
        nbytes += sum(o["size"] for o in sh["objects"])
    dt, st = time.monotonic() - t0, Timed.spent
    left = [k for k, e in zip(keys, store.batch_is_exist(keys)) if e != 0]
    if left:
        fail(f"driver: {len(left)} objects still exist after removal, e.g. {left[0]}")
    store.close()
    return summary("driver", len(keys), nbytes, dt, st,
                   f"{len(h['shards'])} shards removed, {retried} retried, none left")


# ------------------------------------------------------------------ helpers

def load_handle(path):
    try:
        with open(path) as f:
            h = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read handle {path}: {e}")
    if h.get("version") != 1:
        fail(f"{path}: not a miles_pattern handle")
    return h


def check_result(si, key, r, size):
    if r == -704:
        fail(f"reader: shard {si}: object missing (-704): {key}")
    if r != size:
        fail(f"reader: shard {si}: {key}: read returned {r}, expected {size} bytes")


def check_blob(si, obj, data, what):
    if not data:
        fail(f"reader: shard {si}: {what} missing (get returned b''): {obj['key']}")
    if len(data) != obj["size"] or crc(data) != obj["crc"]:
        fail(f"reader: MISMATCH in shard {si}: {what} {obj['key']}: {len(data)} B, "
             f"crc {crc(data):08x}, expected {obj['size']} B crc {obj['crc']:08x}")


def summary(role, n, nbytes, dt, st, extra):
    dt, st = max(dt, 1e-9), max(st, 1e-9)
    if role == "driver":  # removals move no bytes: a MiB/s would mean nothing
        print(f"{role}: {n} objects ({nbytes / MiB:.2f} MiB) removed in {dt:.3f} s: "
              f"{n / dt:.0f} ops/s; in store calls {st:.3f} s: {n / st:.0f} ops/s ({extra})",
              flush=True)
        return 0
    print(f"{role}: {n} objects, {nbytes / MiB:.2f} MiB in {dt:.3f} s: {n / dt:.0f} ops/s, "
          f"{nbytes / MiB / dt:.1f} MiB/s; in store calls {st:.3f} s: {n / st:.0f} ops/s, "
          f"{nbytes / MiB / st:.1f} MiB/s ({extra})", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", choices=["writer", "reader", "driver"])
    ap.add_argument("--handle", default="miles_handle.json", help="handle file (JSON)")
    ap.add_argument("--shards", type=int, default=8, help="writer: DP shards to write")
    ap.add_argument("--seed", type=int, default=None, help="writer: layout/content seed")
    ap.add_argument("--big-chunks", type=int, default=0,
                    help="writer: chunks of the routed-experts member per shard (MoE R3)")
    ap.add_argument("--chunk-mib", type=int, default=64, help="writer: chunk size (MiB)")
    ap.add_argument("--replicas", type=int, default=1, help="writer: replica_num")
    ap.add_argument("--repeat", type=int, default=1, help="reader: passes over the handle")
    ap.add_argument("--init-kwargs", default=None,
                    help="JSON like Miles' --mooncake-store-init-kwargs (wins over env)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--contribute", dest="contribute", action="store_true", default=None,
                   help="contribute MOONCAKE_GLOBAL_SEGMENT_SIZE (default: as Miles)")
    g.add_argument("--no-contribute", dest="contribute", action="store_false")
    args = ap.parse_args()
    try:
        return {"writer": writer, "reader": reader, "driver": driver}[args.role](args)
    except Failure as e:
        print(f"miles_pattern: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
