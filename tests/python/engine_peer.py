#!/usr/bin/python3
"""A mooncake.engine.TransferEngine in a process of its own, for test_engine.py and the DTS
suite engine_py: the remote end of the integrations' call sequences (SGLang's decode rank,
vLLM's decode worker, a Miles rollout engine), or, in the DTS case, the Miles trainer too.

Run: engine_peer.py (no arguments). It reads one JSON object per line on stdin and answers
each with one JSON object per line on stdout: {"ok": true, ...} or {"ok": false, "error":
"<traceback>"}. Anything else the process prints (the engine's C logs, Python warnings)
goes to stderr: file descriptor 1 is pointed at 2 at start, and the answers go to a copy of
the original stdout. The test may SIGKILL it at any time (that is the point of a separate
process).

Requests ("op" and its fields):
  init      host, meta ("P2PHANDSHAKE"), proto, dev [, metadata_type: initialize_ext]
            -> rc, port (get_rpc_port()), name ("host:port"), transport (the data path)
  alloc     id, size [, seed: fill with pattern(seed, size)] -> addr (an arena: numpy
            bytes, zeroed unless seeded, kept until exit)
  register  addrs, lens [, batch: batch_register_memory, else one register_memory per
            buffer] -> rc (batch) or rcs (one per buffer)
  unregister addrs [, batch] -> rc or rcs
  fill      id, items: [{off, len, seed}] (each piece = pattern(seed, len)); zero: true
            first clears the arena
  verify    id, items (see verify()), rest_zero (default true) -> bad: [] or a
            description of the first mismatches
  notifies  -> list: [[name, msg], ...] (get_notifies())
  probe     peer -> rc (send_probe)
  xfer      kind: one of the TransferEngine method names below, args: its positional
            arguments -> rc (the call's return value)
  miles     Miles' trainer (for the DTS case): see miles_push(); -> rcs, secs, reg_secs
  stats     -> rss_kib of this process
  exit      delete the engine and exit 0
"""
import concurrent.futures
import json
import os
import sys
import time
import traceback

import numpy

XFER_KINDS = ("batch_transfer_sync_write", "batch_transfer_sync_read", "transfer_sync_write",
              "transfer_sync_read", "send_probe", "get_first_buffer_address")


def pattern(seed, n):
    """n bytes, a deterministic function of seed (a different stream for every seed, so a
    slice landing at the wrong place or carrying another slice's bytes is caught)."""
    gen = numpy.random.Generator(numpy.random.PCG64(seed))
    return numpy.frombuffer(gen.bytes(n), dtype=numpy.uint8)


class Arena:
    """A zeroed (or seeded) byte buffer whose address stays valid for the life of the
    object. Large arenas come from numpy.zeros (calloc: untouched pages are not
    resident)."""

    def __init__(self, size, seed=None):
        self.a = numpy.zeros(max(int(size), 1), dtype=numpy.uint8)
        self.addr = self.a.ctypes.data
        if seed is not None:
            self.a[:] = pattern(seed, self.a.size)

    def fill(self, off, n, seed):
        self.a[off:off + n] = pattern(seed, n)


def pieces(items):
    """Expand verify items into (dst_off, length, seed, slen, src_off) pieces. An item is
    {"off": destination offset in the arena, "len": bytes, "seed": the source's pattern
    seed, "slen": the source pattern's length (default src + len), "src": offset in that
    pattern (default 0), "count": pieces (default 1), "dstride"/"sstride": bytes between
    consecutive pieces' starts at the destination / in the source}."""
    out = []
    for it in items:
        off, n, seed = int(it["off"]), int(it["len"]), int(it["seed"])
        src = int(it.get("src", 0))
        count = int(it.get("count", 1))
        ds, ss = int(it.get("dstride", n)), int(it.get("sstride", n))
        slen = int(it.get("slen", src + ss * (count - 1) + n))
        for i in range(count):
            out.append((off + i * ds, n, seed, slen, src + i * ss))
    out.sort()
    return out


def verify(arr, items, rest_zero=True, limit=8):
    """Compare every byte of the uint8 array arr: each piece of items must hold its
    source pattern's bytes, and (rest_zero) every byte outside the pieces must be 0.
    Returns a list of at most `limit` mismatch descriptions ([] = every byte right)."""
    bad = []
    cache = {}
    pos = 0
    for off, n, seed, slen, src in pieces(items):
        if off < pos:
            raise ValueError(f"verify items overlap at offset {off}")
        if off + n > arr.size:
            raise ValueError(f"verify item [{off}, {off + n}) past the arena's {arr.size} B")
        if rest_zero and off > pos and arr[pos:off].any():
            first = pos + int(numpy.flatnonzero(arr[pos:off])[0])
            bad.append(f"byte {first} outside every slice is {int(arr[first])}, not 0 "
                       f"(gap [{pos}, {off}))")
        key = (seed, slen)
        if key not in cache:
            if len(cache) > 64:
                cache.clear()
            cache[key] = pattern(seed, slen)
        want = cache[key][src:src + n]
        got = arr[off:off + n]
        if not numpy.array_equal(got, want):
            diff = numpy.flatnonzero(got != want)
            bad.append(f"slice at {off} ({n} B, seed {seed}, source offset {src}): "
                       f"{diff.size} bytes differ, first at +{int(diff[0])} "
                       f"(got {int(got[diff[0]])}, want {int(want[diff[0]])})")
        pos = off + n
        if len(bad) >= limit:
            return bad
    if rest_zero and pos < arr.size and arr[pos:].any():
        first = pos + int(numpy.flatnonzero(arr[pos:])[0])
        bad.append(f"byte {first} after the last slice is {int(arr[first])}, not 0")
    return bad


# ------------------------------------------------------------------- Miles' trainer

def miles_sizes(n_small=800, seed=1):
    """Parameter sizes of a scaled-down model replica, in model order: an embedding of
    256 MiB, 4 x 16 MiB, 32 x 1 MiB, 200 x 128 KiB and n_small tensors of 4-32 KiB
    (4 KiB multiples), shuffled into one order (a 4 KiB parameter sits next to the
    embedding in the same bucket)."""
    rng = numpy.random.default_rng(seed)
    sizes = [256 << 20] + [16 << 20] * 4 + [1 << 20] * 32 + [128 << 10] * 200
    sizes += [int(k) * 4096 for k in rng.integers(1, 9, n_small)]
    order = rng.permutation(len(sizes))
    return [sizes[i] for i in order]


def miles_layout(sizes, ranks, align=64):
    """Where each parameter lives on its rollout rank: parameter i goes to rank i % ranks,
    packed in that rank's weight region with `align`-byte gaps (left zero). Returns
    (rank_of, offset_of, region_size_per_rank)."""
    rank_of, offset_of = [], []
    used = [0] * ranks
    for i, n in enumerate(sizes):
        r = i % ranks
        rank_of.append(r)
        offset_of.append(used[r])
        used[r] += (n + 2 * align - 1) // align * align  # at least one aligned gap
    return rank_of, offset_of, used


def miles_buckets(sizes, bucket_bytes):
    """Consecutive parameter indices grouped into buckets of about bucket_bytes (a bucket
    closes once it holds that much), as Miles' converted-tensor buckets."""
    out, cur, acc = [], [], 0
    for i, n in enumerate(sizes):
        cur.append(i)
        acc += n
        if acc >= bucket_bytes:
            out.append(cur)
            cur, acc = [], 0
    if cur:
        out.append(cur)
    return out


def miles_push(te, params, peers, dst_bases, rank_of, offset_of, workers=4,
               bucket_bytes=64 << 20):
    """One weight update as Miles' P2P path sends it: per bucket and rollout rank, one
    batch_transfer_sync_write(peer, [cpu ptr], [remote ptr], [bytes]) with one slice per
    parameter of the bucket, on a `workers`-thread pool (calls to different ranks run
    concurrently). params: list of numpy uint8 arrays. Returns (list of every call's
    return value, seconds)."""
    sizes = [p.size for p in params]
    calls = []
    for bucket in miles_buckets(sizes, bucket_bytes):
        for r, peer in enumerate(peers):
            idx = [i for i in bucket if rank_of[i] == r]
            if idx:
                calls.append((peer, [params[i].ctypes.data for i in idx],
                              [dst_bases[r] + offset_of[i] for i in idx],
                              [sizes[i] for i in idx]))
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futs = [pool.submit(te.batch_transfer_sync_write, *c) for c in calls]
        rcs = [f.result() for f in futs]
    return rcs, time.monotonic() - t0


def miles_verify_items(sizes, rank_of, offset_of, rank, seeds):
    return [{"off": offset_of[i], "len": sizes[i], "seed": seeds[i]}
            for i in range(len(sizes)) if rank_of[i] == rank]


# ------------------------------------------------------------------- the server

def transport_name(te):
    """The engine's preferred data path ("tcp-kernel", "tcp-dpdk", "rdma"), from
    tide_te_transport_name() on get_engine_ptr() (Tide's; "" where that is missing)."""
    import ctypes
    try:
        from mooncake._native import lib
        fn = lib.tide_te_transport_name
    except (ImportError, AttributeError):
        return ""
    fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    ptr = te.get_engine_ptr()
    return (fn(ptr) or b"").decode() if ptr else ""



class Peer:
    def __init__(self):
        self.te = None
        self.arenas = {}
        self.params = []

    def op_init(self, req):
        from mooncake.engine import TransferEngine
        self.te = TransferEngine()
        args = (req["host"], req.get("meta", "P2PHANDSHAKE"), req.get("proto", "tcp"),
                req.get("dev", ""))
        if "metadata_type" in req:
            rc = self.te.initialize_ext(*args, req["metadata_type"])
        else:
            rc = self.te.initialize(*args)
        if rc != 0:
            return {"rc": rc}
        port = self.te.get_rpc_port()
        host = req.get("name_host") or req["host"].split(":")[0]
        return {"rc": rc, "port": port, "name": f"{host}:{port}",
                "transport": transport_name(self.te)}

    def op_alloc(self, req):
        a = Arena(req["size"], req.get("seed"))
        self.arenas[req["id"]] = a
        return {"addr": a.addr}

    def op_register(self, req):
        if req.get("batch"):
            return {"rc": self.te.batch_register_memory(req["addrs"], req["lens"])}
        return {"rcs": [self.te.register_memory(a, n) for a, n in zip(req["addrs"],
                                                                       req["lens"])]}

    def op_unregister(self, req):
        if req.get("batch"):
            return {"rc": self.te.batch_unregister_memory(req["addrs"])}
        return {"rcs": [self.te.unregister_memory(a) for a in req["addrs"]]}

    def op_fill(self, req):
        a = self.arenas[req["id"]]
        if req.get("zero"):
            a.a[:] = 0
        for it in req.get("items", []):
            a.fill(int(it["off"]), int(it["len"]), int(it["seed"]))
        return {}

    def op_verify(self, req):
        a = self.arenas[req["id"]]
        return {"bad": verify(a.a, req["items"], req.get("rest_zero", True))}

    def op_notifies(self, req):
        return {"list": [[n.name, n.msg] for n in self.te.get_notifies()]}

    def op_probe(self, req):
        return {"rc": self.te.send_probe(req["peer"])}

    def op_xfer(self, req):
        if req["kind"] not in XFER_KINDS:
            raise ValueError(f"unknown kind {req['kind']!r}")
        return {"rc": getattr(self.te, req["kind"])(*req["args"])}

    def op_miles(self, req):
        """Miles' trainer: a CPU replica of req["sizes"] parameters, each filled with
        pattern(seeds[i]) and registered with its own register_memory call, pushed to the
        rollout ranks req["peers"] (weight regions at req["bases"]) by miles_push()."""
        sizes, seeds = req["sizes"], req["seeds"]
        rank_of, offset_of, _ = miles_layout(sizes, len(req["peers"]))
        if not self.params:
            self.params = [numpy.empty(n, dtype=numpy.uint8) for n in sizes]
            t0 = time.monotonic()
            rcs = [self.te.register_memory(p.ctypes.data, p.size) for p in self.params]
            reg_secs = time.monotonic() - t0
            if any(rcs):
                return {"reg_rcs": rcs, "reg_secs": reg_secs}
        else:
            reg_secs = 0.0
        for p, s in zip(self.params, seeds):
            p[:] = pattern(s, p.size)
        rcs, secs = miles_push(self.te, self.params, req["peers"], req["bases"], rank_of,
                               offset_of, workers=req.get("workers", 4),
                               bucket_bytes=req.get("bucket_bytes", 64 << 20))
        return {"rcs": rcs, "secs": secs, "reg_secs": reg_secs}

    def op_stats(self, req):
        with open("/proc/self/status") as f:
            rss = [ln for ln in f if ln.startswith("VmRSS:")]
        return {"rss_kib": int(rss[0].split()[1]) if rss else 0}


def main():
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the engine's logs and any print() go to stderr, never into answers
    sys.stdout = sys.stderr
    peer = Peer()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.get("op")
        if op == "exit":
            out.write(json.dumps({"ok": True}) + "\n")
            out.flush()
            peer.te = None
            break
        try:
            ans = getattr(peer, "op_" + op)(req)
            ans["ok"] = True
        except Exception:
            ans = {"ok": False, "error": traceback.format_exc()}
        out.write(json.dumps(ans) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
