"""The store calls SGLang, vLLM and LMCache make, replayed against a real mooncake_master,
in-process (TIDE_AGENT=off) and through a tide-node agent: multi-buffer batches, buffer
handles, put_parts, put_batch/get_batch, the upsert family, the tensor calls in stock's
[TensorMetadata][data] layout, and MooncakeHostMemAllocator. Every byte read is compared
with what was written, and return values are checked against stock's
(../shared/spec/integration-call-sequences.md section 1).

Environment (set by meson): STORE_TEST_MASTER_BIN, STORE_TEST_NODE_BIN, LIBTIDESTORE,
PYTHONPATH = store/python. Needs python3-numpy and python3-torch (tools/install-deps.sh).
"""
import ctypes
import mmap
import os
import re
import struct
import urllib.request

import numpy
import pytest
import torch

import test_store as ts  # noqa: E402 (its environment set-up runs first)
from ut_common import free_port, restore_env  # noqa: E402
from mooncake.store import (BufferHandle, Descriptor, MemoryDescriptor,  # noqa: E402
                            MooncakeDistributedStore, MooncakeHostMemAllocator,
                            ReplicaDescriptor, ReplicaStatus, ReplicateConfig, SoftPinAction)

KiB, MiB = 1 << 10, 1 << 20
NOT_FOUND, INVALID, NO_SPACE = -704, -600, -200


METRICS_PORT = free_port()  # the master's /metrics (the last --metrics_port wins)


@pytest.fixture(scope="module")
def master():
    p, addr = ts.start_master(extra=["--eviction_ratio=0", f"--metrics_port={METRICS_PORT}"])
    yield addr
    p.terminate()
    p.wait(timeout=10)


agents = ts.agents  # the two-agent fixture of test_store.py (module scope here too)


pair = ts.pair_each_way  # (writer, reader), in process and through agents


def buf(n, seed=None):
    """A numpy byte buffer of n bytes (random when seed is given) and its address."""
    arr = numpy.zeros(max(n, 1), dtype=numpy.uint8)
    if seed is not None:
        arr[:n] = numpy.random.default_rng(seed).integers(0, 256, n, dtype=numpy.uint8)
    return arr, arr.ctypes.data


# ------------------------------------------------------------------- SGLang HiCache

def test_sglang_hicache_sequence(pair):
    w, r = pair
    # Warm-up (mooncake_store.py l.622-646): 4 KiB of zeros, exists == 1, get equal.
    warm = "sglang_mooncake_store_warmup_key" + os.urandom(4).hex()
    assert w.put(warm, bytes(4096)) == 0
    assert r.is_exist(warm) == 1 and r.get(warm) == bytes(4096)
    # Pages: K and V key per page, one host buffer per key, registered.
    pages, size = 16, 64 * KiB
    keys = [f"{os.urandom(8).hex()}_0_{kv}" for _ in range(pages) for kv in "kv"]
    src, sa = buf(len(keys) * size, seed=1)
    dst, da = buf(len(keys) * size)
    assert w.register_buffer(sa, src.nbytes) == 0 and r.register_buffer(da, dst.nbytes) == 0
    assert r.batch_is_exist(keys) == [0] * len(keys)
    half = keys[: len(keys) // 2]
    cfg = ReplicateConfig()
    cfg.group_ids = [f"sglang-hicache:{k}" for k in half]
    assert w.batch_put_from(half, [sa + i * size for i in range(len(half))],
                            [size] * len(half), cfg) == [0] * len(half)
    ex = r.batch_is_exist(keys)
    assert ex == [1] * len(half) + [0] * (len(keys) - len(half))
    got = r.batch_get_into(half, [da + i * size for i in range(len(half))], [size] * len(half))
    assert got == [size] * len(half)  # each > 0: the page counts as loaded
    assert bytes(dst[: len(half) * size]) == bytes(src[: len(half) * size])
    # DeepSeek-V4 C4 pool: several pointers per key, multi-buffer calls.
    mkeys = [f"c4-{os.urandom(6).hex()}" for _ in range(4)]
    parts = [4 * KiB, 12 * KiB, 48 * KiB]
    ptrs = [[sa + k * 64 * KiB + sum(parts[:j]) for j in range(3)] for k in range(4)]
    sizes = [parts] * 4
    assert w.batch_put_from_multi_buffers(mkeys, ptrs, sizes) == [0] * 4
    dptrs = [[da + k * 64 * KiB + sum(parts[:j]) for j in range(3)] for k in range(4)]
    dst[:] = 0
    assert r.batch_get_into_multi_buffers(mkeys, dptrs, sizes) == [64 * KiB] * 4
    assert bytes(dst[: 4 * 64 * KiB]) == bytes(src[: 4 * 64 * KiB])
    assert r.get(mkeys[2]) == bytes(src[2 * 64 * KiB: 3 * 64 * KiB])
    w.unregister_buffer(sa)
    r.unregister_buffer(da)


# ------------------------------------------------------------- vLLM store connector

def test_vllm_store_connector_sequence(pair):
    w, r = pair
    nkeys, nseg, blk = 8, 16, 4 * KiB
    keys = [f"model@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@{os.urandom(8).hex()}"
            for _ in range(nkeys)]
    src, sa = buf(nkeys * nseg * blk, seed=2)
    dst, da = buf(nkeys * nseg * blk)
    w.register_buffer(sa, src.nbytes)
    r.register_buffer(da, dst.nbytes)
    # Segments are strided per layer, not contiguous per key (the KV cache layout).
    addr = [[sa + (s * nkeys + k) * blk for s in range(nseg)] for k in range(nkeys)]
    cfg = ReplicateConfig()
    cfg.preferred_segment = r.get_hostname()
    assert r.batch_is_exist(keys) == [0] * nkeys
    assert w.batch_put_from_multi_buffers(keys, addr, [[blk] * nseg] * nkeys, cfg) == \
        [0] * nkeys
    assert r.batch_is_exist(keys) == [1] * nkeys
    # Load: key list rotated by tp_rank, every entry >= 0.
    rot = keys[3:] + keys[:3]
    order = list(range(3, nkeys)) + list(range(3))
    daddr = [[da + (s * nkeys + k) * blk for s in range(nseg)] for k in order]
    got = r.batch_get_into_multi_buffers(rot, daddr, [[blk] * nseg] * nkeys)
    assert got == [nseg * blk] * nkeys
    assert bytes(dst) == bytes(src)
    # Full store: -200 for the key that does not fit, which vLLM reads as backpressure.
    # Every piece is real memory (one 8 MiB buffer, 64 times): a client may read its
    # pieces before the master says there is no room (through an agent they are staged
    # first), and 8 MiB read from a 1-byte array faults when the heap ends sooner.
    huge, ha = buf(8 * MiB, seed=3)
    big = w.batch_put_from_multi_buffers(["too-big-" + os.urandom(4).hex()], [[ha] * 64],
                                         [[8 * MiB] * 64])
    assert big == [NO_SPACE]
    w.unregister_buffer(sa)
    r.unregister_buffer(da)


def test_multi_buffer_edges(pair):
    w, r = pair
    k = "mb-edge-" + os.urandom(4).hex()
    src, sa = buf(10_000, seed=4)
    assert w.batch_put_from_multi_buffers([k], [[sa, sa + 3000]], [[3000, 7000]]) == [0]
    # Buffers larger than the object: the object's size, filled in order.
    d, a = buf(16_384)
    assert r.batch_get_into_multi_buffers([k], [[a, a + 8192]], [[8192, 8192]]) == [10_000]
    assert bytes(d[:10_000]) == bytes(src[:10_000])
    # Buffers smaller than the object: -600, as stock.
    assert r.batch_get_into_multi_buffers([k], [[a, a + 4096]], [[4096, 4096]]) == [INVALID]
    # Missing key, a key whose lists differ in length, outer lists of another length.
    m = "mb-missing-" + os.urandom(4).hex()
    assert r.batch_get_into_multi_buffers([m, k], [[a], [a]], [[100], [10_000]]) == \
        [NOT_FOUND, 10_000]
    assert w.batch_put_from_multi_buffers([m, m + "x"], [[sa, sa], [sa]], [[1], [1]]) == \
        [INVALID, 0]
    assert w.batch_put_from_multi_buffers([m], [[sa], [sa]], [[1], [1]]) == [INVALID]
    assert w.batch_put_from_multi_buffers([m], [[0]], [[10]]) == [INVALID]  # null pointer
    assert r.get(m + "x") == bytes(src[:1])


# ---------------------------------------------------------------------- sessions

def test_put_and_get_sessions(pair):
    """Stock's session calls (real_client.cpp batch_put_session_* / batch_get_session_*):
    reserve, ranged writes from two buffers at offsets into two replicas, end, read back
    every byte whole and through a get session; stock's codes for every refusal; a
    revoke leaves nothing."""
    w, r = pair
    tag = os.urandom(4).hex()
    k1, k2, k3 = f"sess-1-{tag}", f"sess-2-{tag}", f"sess-3-{tag}"
    missing = f"sess-missing-{tag}"
    src, sa = buf(10_000, seed=21)
    two = ReplicateConfig()
    two.replica_num = 2
    assert w.batch_put_session_start([k1, k2], [10_000, 3000], two) == [0, 0]
    # A second start of a key in a session: -600, as stock.
    assert w.batch_put_session_start([k1], [10_000]) == [INVALID]
    assert r.is_exist(k1) == 0
    # Key 1 from two buffers, second half first; key 2 from the start of src.
    assert w.batch_put_from_multi_buffer_ranges(
        [k1, k2], [[sa + 4000, sa], [sa]], [[6000, 4000], [3000]],
        [[4000, 0], [0]]) == [10_000, 3000]
    # Past the reserved size, a key never started, lists of another length: -600.
    assert w.batch_put_from_multi_buffer_ranges([k2], [[sa]], [[3000]], [[1]]) == [INVALID]
    assert w.batch_put_from_multi_buffer_ranges([missing], [[sa]], [[1]], [[0]]) == [INVALID]
    assert w.batch_put_from_multi_buffer_ranges([k2], [[sa, sa]], [[1]], [[0]]) == [INVALID]
    assert w.batch_put_from_multi_buffer_ranges([k1, k2], [[sa]], [[1]], [[0]]) == \
        [INVALID, INVALID]
    # No buffers: stock's INVALID_REPLICA.
    assert w.batch_put_from_multi_buffer_ranges([k2], [[]], [[]], [[]]) == [-702]
    # End: readable; an end or revoke of a key without a session is -600.
    assert w.batch_put_session_end([k1, k2, missing]) == [0, 0, INVALID]
    assert w.batch_put_session_end([k1]) == [INVALID]
    assert w.batch_put_session_revoke([k1]) == [INVALID]
    assert w.batch_put_from_multi_buffer_ranges([k1], [[sa]], [[1]], [[0]]) == [INVALID]
    assert r.get(k1) == bytes(src[:10_000])
    assert r.get(k2) == bytes(src[:3000])
    assert len(r.get_replica_desc(k1)) == 2
    # An existing object cannot be reserved: OBJECT_ALREADY_EXISTS.
    assert w.batch_put_session_start([k1], [10_000]) == [-705]
    assert w.batch_put_session_start([k1, k2], [1]) == [INVALID, INVALID]

    # Get session: ranges from the cached replica.
    d, da = buf(3000)
    assert r.batch_get_session_start([k1, missing]) == [0, NOT_FOUND]
    assert r.batch_get_into_multi_buffer_ranges(
        [k1, missing], [[da, da + 2000], [da]], [[2000, 1000], [10]],
        [[8000, 100], [0]]) == [3000, INVALID]
    assert bytes(d[:2000]) == bytes(src[8000:10_000])
    assert bytes(d[2000:3000]) == bytes(src[100:1100])
    assert r.batch_get_into_multi_buffer_ranges([k1], [[da]], [[1000]], [[9001]]) == [INVALID]
    assert w.batch_get_into_multi_buffer_ranges([k1], [[da]], [[10]], [[0]]) == [INVALID]
    assert r.batch_get_session_end([k1, missing]) == 0
    assert r.batch_get_session_end([]) == 0
    assert r.batch_get_into_multi_buffer_ranges([k1], [[da]], [[10]], [[0]]) == [INVALID]
    assert r.batch_get_session_start([]) == []

    # Revoke: nothing stays, the key can be reserved again.
    assert w.batch_put_session_start([k3], [4096]) == [0]
    assert w.batch_put_from_multi_buffer_ranges([k3], [[sa]], [[4096]], [[0]]) == [4096]
    assert w.batch_put_session_revoke([k3]) == [0]
    assert r.is_exist(k3) == 0
    assert w.batch_put_session_start([k3], [4096]) == [0]
    assert w.batch_put_session_revoke([k3, missing]) == [0, INVALID]
    assert w.remove(k1, force=True) == 0 and w.remove(k2, force=True) == 0


def test_sessions_on_a_closed_store(master):
    """Not set up: [] (and -1 for batch_get_session_end), as stock's binding."""
    s = MooncakeDistributedStore()
    assert s.batch_put_session_start(["k"], [1]) == []
    assert s.batch_put_from_multi_buffer_ranges(["k"], [[1]], [[1]], [[0]]) == []
    assert s.batch_put_session_end(["k"]) == []
    assert s.batch_put_session_revoke(["k"]) == []
    assert s.batch_get_session_start(["k"]) == []
    assert s.batch_get_into_multi_buffer_ranges(["k"], [[1]], [[1]], [[0]]) == []
    assert s.batch_get_session_end(["k"]) == -1


# ---------------------------------------------------------------------- soft pins

def soft_pinned():
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as f:
        text = f.read().decode()
    return int(re.search(r"^master_soft_pin_key_count (\d+)$", text, re.M).group(1))


def test_soft_pin_action(pair):
    """ReplicateConfig.soft_pin_action/soft_pin_ttl_ms reach the master: its
    master_soft_pin_key_count counts what was put with ENABLE (put, batch_put_from,
    put_parts), an upsert with DISABLE takes the pin off; stock's enum and defaults."""
    w, r = pair
    assert [(a.name, int(a)) for a in SoftPinAction] == \
        [("PRESERVE", 0), ("ENABLE", 1), ("DISABLE", 2)]
    assert str(SoftPinAction.ENABLE) == "SoftPinAction.ENABLE"
    cfg = ReplicateConfig()
    assert cfg.soft_pin_action == SoftPinAction.PRESERVE and cfg.soft_pin_ttl_ms is None
    assert str(cfg) == ("ReplicateConfig: { replica_num: 1, nof_replica_num: 0, "
                        "dfs_replica_num: 0, soft_pin_action: PRESERVE, soft_pin_ttl_ms: "
                        "default, with_hard_pin: 0, preferred_segments: [], "
                        "preferred_nof_segments: [], prefer_alloc_in_same_node: 0, "
                        "data_type: UNKNOWN }")
    tag = os.urandom(4).hex()
    keys = [f"soft-pin-{tag}-{i}" for i in range(5)]
    src, sa = buf(8 * KiB, seed=9)
    before = soft_pinned()
    cfg.soft_pin_action, cfg.soft_pin_ttl_ms = SoftPinAction.ENABLE, 600_000
    assert "soft_pin_action: ENABLE, soft_pin_ttl_ms: 600000" in str(cfg)
    assert w.put(keys[0], bytes(src[:300]), cfg) == 0
    assert soft_pinned() == before + 1
    cfg.soft_pin_ttl_ms = None  # the master's default ttl
    assert w.batch_put_from(keys[1:3], [sa, sa + 4 * KiB], [4 * KiB, 4 * KiB], cfg) == [0, 0]
    assert w.put_parts(keys[3], bytes(src[:10]), bytes(src[10:20]), config=cfg) == 0
    assert soft_pinned() == before + 4
    assert w.put(keys[4], b"plain") == 0
    assert soft_pinned() == before + 4
    off = ReplicateConfig()
    off.soft_pin_action = SoftPinAction.DISABLE
    assert w.upsert(keys[0], bytes(src[:300]), off) == 0
    assert soft_pinned() == before + 3
    assert r.get(keys[0]) == bytes(src[:300])
    # Refused as stock's master refuses them: a ttl of 0, a ttl without ENABLE.
    bad = ReplicateConfig()
    bad.soft_pin_action, bad.soft_pin_ttl_ms = SoftPinAction.ENABLE, 0
    assert w.put(keys[0] + "x", b"v", bad) == INVALID
    bad.soft_pin_action, bad.soft_pin_ttl_ms = SoftPinAction.PRESERVE, 1000
    assert w.put(keys[0] + "x", b"v", bad) == INVALID
    assert r.is_exist(keys[0] + "x") == 0
    assert soft_pinned() == before + 3
    assert w.batch_remove(keys, force=True) == [0] * 5
    assert soft_pinned() == before


# ------------------------------------------------------------- replica descriptors

def test_replica_descriptors(pair):
    """get_replica_desc / batch_get_replica_desc as stock's bindings answer them: an object
    put with 2 replicas has 2 COMPLETE memory descriptors on the two holders' segments; a
    missing key is [] alone and absent from the batch's dict. vLLM's tier logging calls
    the predicates through getattr on every descriptor of the dict."""
    w, r = pair
    k = "replica-desc-" + os.urandom(4).hex()
    missing = k + "-missing"
    data = os.urandom(5000)
    cfg = ReplicateConfig()
    cfg.replica_num = 2
    # Other tests' stores hold segments in this cluster too: place on the two holders.
    cfg.preferred_segments = [w.get_hostname(), r.get_hostname()]
    assert w.put(k, data, cfg) == 0
    reps = r.get_replica_desc(k)
    assert len(reps) == 2 and all(isinstance(d, ReplicaDescriptor) for d in reps)
    eps = []
    for d in reps:
        assert d.is_memory_replica() and not d.is_disk_replica()
        assert not d.is_local_disk_replica()
        assert d.status == ReplicaStatus.COMPLETE and str(d.status) == "ReplicaStatus.COMPLETE"
        md = d.get_memory_descriptor()
        assert isinstance(md, MemoryDescriptor)
        b = md.buffer_descriptor
        assert isinstance(b, Descriptor) and b.size == len(data) and b.buffer_address > 0
        assert repr(b) == (f"<Descriptor size={len(data)} buffer_address={b.buffer_address} "
                           f"transport_endpoint={b.transport_endpoint}>")
        with pytest.raises(RuntimeError):
            d.get_disk_descriptor()
        eps.append(b.transport_endpoint)
    assert sorted(eps) == sorted([w.get_hostname(), r.get_hostname()])
    assert r.get_replica_desc(missing) == []
    got = r.batch_get_replica_desc([k, missing])
    assert isinstance(got, dict) and list(got) == [k]
    tiers = {"memory": 0, "disk": 0, "local_disk": 0}
    for descs in got.values():
        for d in descs:
            for tier in tiers:
                if getattr(d, f"is_{tier}_replica")():
                    tiers[tier] += 1
    assert tiers == {"memory": 2, "disk": 0, "local_disk": 0}
    assert r.batch_get_replica_desc([missing]) == {} and r.batch_get_replica_desc([]) == {}
    with pytest.raises(TypeError):
        r.batch_get_replica_desc(k)
    assert w.remove(k, force=True) == 0
    assert r.get_replica_desc(k) == []


# ----------------------------------------------------------- batch_replica_clear

def replica_clear_counters():
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as f:
        text = f.read().decode()
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r"^master_batch_replica_clear_(\w+)_total (\d+)$", text, re.M)}


def test_batch_replica_clear(master):
    """Stock's batch_replica_clear(keys, segment_name=""): the keys cleared, in order. With
    a segment name only the replicas there go (an object keeps the others); without, whole
    objects. Kept: keys missing, written by another client, read in the last lease TTL
    (10 s); pins do not protect (stock checks none). The master counts it under stock's
    master_batch_replica_clear_* names."""
    w, r = ts.mk(master), ts.mk(master)
    try:
        tag = os.urandom(4).hex()
        two, one, leased, other, pinned, missing = (
            f"rc-{tag}-{n}" for n in ("two", "one", "leased", "other", "pinned", "missing"))
        wh, rh = w.get_hostname(), r.get_hostname()
        cfg = ReplicateConfig()
        cfg.replica_num = 2
        cfg.preferred_segments = [wh, rh]
        assert w.put(two, b"2" * 3000, cfg) == 0
        cfg = ReplicateConfig()
        cfg.preferred_segment = wh
        assert w.put(one, b"1" * 100, cfg) == 0
        assert w.put(leased, b"L" * 100, cfg) == 0
        assert r.put(other, b"o" * 100, cfg) == 0
        cfg.with_hard_pin = True
        assert w.put(pinned, b"p" * 100, cfg) == 0
        assert r.get(leased) == b"L" * 100  # a read lease of 10 s
        before = replica_clear_counters()

        # On r's segment: only "two" has a replica there; it keeps the one on w's.
        assert w.batch_replica_clear([two, one, leased, other, missing], rh) == [two]
        reps = r.get_replica_desc(two)  # (a read: "two" is leased from now on)
        assert [d.get_memory_descriptor().buffer_descriptor.transport_endpoint
                for d in reps] == [wh]
        assert r.get(two) == b"2" * 3000
        # Whole objects: the pinned one goes too; the leased, missing and r's stay.
        assert w.batch_replica_clear([one, pinned, leased, other, missing]) == [one, pinned]
        assert w.batch_replica_clear([two], segment_name="") == []  # leased by the read
        # Its writer may clear "other"; bytes keys come back as str, as stock's std::string.
        assert r.batch_replica_clear([other.encode()]) == [other]
        assert [w.is_exist(k) for k in (two, one, leased, other, pinned)] == [1, 0, 1, 0, 0]
        assert r.get(leased) == b"L" * 100
        assert w.batch_replica_clear([]) == []
        assert w.batch_replica_clear([missing], "no-such-segment") == []
        with pytest.raises(TypeError):
            w.batch_replica_clear(two)
        with pytest.raises(TypeError):
            w.batch_replica_clear([two], 5)
        after = replica_clear_counters()
        # Calls: 5 keys/1 cleared, 5/2, 1/0, 1/1, 0/0, 1/0 (partial, partial, failed, ok,
        # failed: an empty batch counts as failed, as stock's, failed).
        assert {k: after[k] - before.get(k, 0) for k in after} == {
            "requests": 6, "items": 13, "failed_items": 9, "failures": 3,
            "partial_successes": 2}
        assert w.remove(two, force=True) == 0 and w.remove(leased, force=True) == 0
    finally:
        r.close()
        w.close()
    assert MooncakeDistributedStore().batch_replica_clear(["k"]) == []  # not set up


def test_batch_replica_clear_through_agent(master, agents):
    """Through a node agent (AGENT_REPLICA_CLEAR) the agent is the writer the master
    knows: what its clients put, a client of it may clear; an object another agent wrote
    stays."""
    s, t = ts.mk_attached(master, agents[0]), ts.mk_attached(master, agents[1])
    try:
        tag = os.urandom(4).hex()
        mine, theirs = f"rc-agent-{tag}-mine", f"rc-agent-{tag}-theirs"
        assert s.put(mine, b"x" * 64) == 0 and t.put(theirs, b"y" * 64) == 0
        assert s.batch_replica_clear([theirs, mine]) == [mine]
        assert s.is_exist(mine) == 0 and s.is_exist(theirs) == 1
        assert s.batch_replica_clear([]) == []
        assert t.batch_replica_clear([theirs], "no-such-segment") == []
        assert t.remove(theirs, force=True) == 0
    finally:
        t.close()
        s.close()


# ------------------------------------------------------------------------- LMCache

def test_lmcache_sequence(pair):
    w, r = pair
    cfg = ReplicateConfig()
    cfg.replica_num = 1
    chunk = torch.arange(64 * KiB, dtype=torch.int16).to(torch.bfloat16)
    payload = chunk.view(torch.uint8).numpy().tobytes()
    # Optimized mode: put_from of a pinned chunk.
    k1 = "lmcache@" + os.urandom(6).hex()
    src, sa = buf(len(payload))
    src[:] = numpy.frombuffer(payload, dtype=numpy.uint8)
    assert w.put_from(k1, sa, len(payload), cfg) == 0
    # Legacy mode: put_parts(key, 28-byte header, kv bytes), then batch_get_buffer.
    k2 = "lmcache-legacy@" + os.urandom(6).hex()
    header = struct.pack("<iiiiiii", len(payload), 3, 2, 32, 1024, 0, 0)
    assert len(header) == 28
    assert w.put_parts(k2, header, payload) == 0
    miss = "lmcache-miss@" + os.urandom(6).hex()
    hs = r.batch_get_buffer([k2, miss, k1])
    assert hs[1] is None
    h = hs[0]
    assert isinstance(h, BufferHandle) and h.size() == len(h) == 28 + len(payload)
    view = memoryview(h)
    assert len(view) == len(payload) + 28 and bytes(view[:28]) == header
    t = torch.frombuffer(h, dtype=torch.bfloat16, offset=28, count=len(payload) // 2)
    assert torch.equal(t.view(torch.int16), chunk.view(torch.int16))
    assert ctypes.string_at(hs[2].ptr(), hs[2].size()) == payload
    del hs, h, view, t
    # batch_get_into into a larger buffer: the object's true length (> 0).
    big, ba = buf(len(payload) + 4096)
    assert r.batch_get_into([k1], [ba], [big.nbytes]) == [len(payload)]
    assert bytes(big[: len(payload)]) == payload
    # is_exist: 0, not -1, for "not found" (LMCache reads the int as a bool).
    assert r.is_exist(miss) == 0 and r.is_exist(k1) == 1
    assert r.get_buffer(miss) is None


def test_buffer_handles_give_memory_back(pair):
    """Handles are leases of the local buffer: many more than fit at once are fine as
    long as they are dropped."""
    w, r = pair
    k = "handle-" + os.urandom(4).hex()
    data = os.urandom(3 * MiB)
    assert w.put(k, data) == 0
    for _ in range(40):  # 120 MiB through a 16 MiB local buffer
        h = r.get_buffer(k)
        assert h is not None and bytes(memoryview(h)[-100:]) == data[-100:]
        del h


# ----------------------------------------------------------------- batches, upserts

def test_put_batch_get_batch(pair):
    w, r = pair
    keys = [f"pb-{os.urandom(4).hex()}-{i}" for i in range(5)]
    vals = [os.urandom(100 + 1000 * i) for i in range(5)]
    vals[2] = bytearray(vals[2])
    vals[3] = numpy.frombuffer(vals[3], dtype=numpy.uint8)
    assert w.put_batch(keys, vals) == 0
    got = r.get_batch(keys + ["pb-missing-" + os.urandom(4).hex()])
    assert got[:5] == [bytes(v) for v in vals] and got[5] == b""
    assert w.put_batch(keys[:2], vals[:1]) == INVALID


def test_upsert_family(pair):
    w, r = pair
    k = "ups-" + os.urandom(4).hex()
    v1, v2, v3 = os.urandom(4 * KiB), os.urandom(4 * KiB), os.urandom(MiB + 17)
    assert w.upsert(k, v1) == 0 and r.get(k) == v1  # a missing key is created
    assert w.put(k, v2) == 0 and r.get(k) == v1     # put keeps an existing key
    assert w.upsert(k, v2) == 0 and r.get(k) == v2  # same size
    assert w.upsert(k, v3) == 0 and r.get(k) == v3  # another size
    src, sa = buf(8 * KiB, seed=5)
    assert w.upsert_from(k, sa, 5000) == 0 and r.get(k) == bytes(src[:5000])
    assert w.upsert_parts(k, b"ab", memoryview(b"cd"), bytearray(b"ef")) == 0
    assert r.get(k) == b"abcdef"
    ks = [k, k + "-b"]
    assert w.upsert_batch(ks, [b"one", b"two!"]) == 0
    assert r.get_batch(ks) == [b"one", b"two!"]
    assert w.batch_upsert_from(ks, [sa, sa + 100], [10, 20]) == [0, 0]
    assert r.get_batch(ks) == [bytes(src[:10]), bytes(src[100:120])]
    assert w.upsert(k, b"") == INVALID and w.upsert("", b"x") == INVALID


def test_put_parts_edges(pair):
    w, r = pair
    k = "parts-" + os.urandom(4).hex()
    assert w.put_parts(k) == INVALID
    assert w.put_parts(k, b"", b"") == INVALID
    assert w.put_parts(k, b"", b"x", b"") == 0 and r.get(k) == b"x"
    assert w.put_parts(k, b"y") == 0 and r.get(k) == b"x"  # existing key kept


# -------------------------------------------------------------------------- tensors

DTYPES = [torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16, torch.int32,
          torch.int64, torch.bool, torch.float16, torch.bfloat16]
CODES = {torch.float32: 0, torch.float64: 1, torch.int8: 2, torch.uint8: 3, torch.int16: 4,
         torch.int32: 6, torch.int64: 8, torch.bool: 10, torch.float16: 11,
         torch.bfloat16: 12}


def stock_object(t, kind=0, gshape=None, axes=()):
    """The bytes stock's put_tensor stores for t, packed here independently of Tide's
    code: TensorObjectHeader, TensorLayoutMetadata (mooncake-integration/
    integration_utils.h at 3b5a5941), then the tensor's bytes."""
    shape = list(t.shape)
    g = list(gshape or shape)
    data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    head = struct.pack("<IHHiiIIQQ", 0x4D4F4F4E, 1, 304, CODES[t.dtype], len(shape), kind,
                       0, 304, len(data))
    lay = struct.pack("<8q", *(g + [-1] * (8 - len(g)))) + \
        struct.pack("<8q", *(shape + [-1] * (8 - len(shape)))) + \
        struct.pack("<II", len(axes), 0)
    for a in axes:
        lay += struct.pack("<iiiiiiq", *a)
    lay += bytes(32 * (4 - len(axes)))
    assert len(head) + len(lay) == 304
    return head + lay + data


@pytest.fixture(scope="module")
def tpair(master):
    a, b = ts.mk(master), ts.mk(master)
    yield a, b
    b.close()
    a.close()


def test_tensor_round_trip_and_stock_layout(tpair):
    w, r = tpair
    g = torch.Generator().manual_seed(7)
    for i, dt in enumerate(DTYPES):
        for shape in [(3, 5, 7), (), (0, 4), (1,)]:
            if dt.is_floating_point:
                t = torch.randn(shape, generator=g).to(dt)
            else:
                t = torch.randint(0, 2 if dt == torch.bool else 100, shape, generator=g).to(dt)
            k = f"tensor-{i}-{len(shape)}-{os.urandom(3).hex()}"
            assert w.put_tensor(k, t) == 0
            assert r.get(k) == stock_object(t), f"{dt} {shape}: not stock's bytes"
            back = r.get_tensor(k)
            assert back.dtype == dt and tuple(back.shape) == shape
            assert torch.equal(back, t)
    # A non-contiguous tensor is stored as its contiguous copy.
    t = torch.arange(24, dtype=torch.int32).reshape(4, 6).t()
    assert w.put_tensor("tensor-nc", t) == 0
    assert torch.equal(r.get_tensor("tensor-nc"), t)
    # A stock object written byte for byte (by another client) reads back as a tensor.
    t = torch.randn(2, 3, generator=g)
    assert w.put("tensor-from-stock", stock_object(t)) == 0
    assert torch.equal(r.get_tensor("tensor-from-stock"), t)
    # numpy in, torch out.
    a = numpy.arange(12, dtype=numpy.float64).reshape(3, 4)
    assert w.put_tensor("tensor-np", a) == 0
    assert numpy.array_equal(r.get_tensor("tensor-np").numpy(), a)
    # Not a tensor object, missing, not a tensor argument.
    assert w.put("tensor-not", b"x" * 400) == 0
    assert r.get_tensor("tensor-not") is None
    assert r.get_tensor("tensor-missing-" + os.urandom(3).hex()) is None
    assert w.put_tensor("tensor-bad", [1, 2, 3]) == INVALID


def test_tensor_into_from_batches_upserts(tpair):
    w, r = tpair
    ts_ = [torch.full((256,), float(i)) for i in range(4)]
    keys = [f"tb-{os.urandom(3).hex()}-{i}" for i in range(4)]
    assert w.batch_put_tensor(keys, ts_) == [0] * 4
    got = r.batch_get_tensor(keys + ["tb-missing"])
    assert all(torch.equal(a, b) for a, b in zip(got, ts_)) and got[4] is None
    # get_tensor_into: a tensor over the caller's buffer (no copy).
    d, da = buf(304 + 1024)
    t = r.get_tensor_into(keys[1], da, d.nbytes)
    assert torch.equal(t, ts_[1])
    d[304:308] = numpy.frombuffer(struct.pack("<f", 42.0), dtype=numpy.uint8)
    assert t[0].item() == 42.0
    bs = [buf(304 + 1024) for _ in keys]
    outs = r.batch_get_tensor_into(keys, [b[1] for b in bs], [b[0].nbytes for b in bs])
    assert all(torch.equal(a, b) for a, b in zip(outs, ts_))
    assert r.batch_get_tensor_into(keys, [0] * 4, [10] * 4) == [INVALID] * 4
    # put_tensor_from: a buffer already holding [TensorMetadata][data].
    obj = stock_object(torch.arange(10, dtype=torch.int64))
    s, sa = buf(len(obj))
    s[:] = numpy.frombuffer(obj, dtype=numpy.uint8)
    assert w.put_tensor_from("tf-" + keys[0], sa, len(obj)) == 0
    assert torch.equal(r.get_tensor("tf-" + keys[0]), torch.arange(10, dtype=torch.int64))
    assert w.put_tensor_from("tf-bad", sa + 1, len(obj) - 1) == INVALID
    assert w.batch_put_tensor_from(["tf2-" + keys[0]], [sa], [len(obj)]) == [0]
    # Upserts replace, whatever the new size.
    assert w.upsert_tensor(keys[0], torch.ones(3, 3)) == 0
    assert torch.equal(r.get_tensor(keys[0]), torch.ones(3, 3))
    assert w.batch_upsert_tensor(keys[:2], [torch.zeros(5), torch.ones(7)]) == [0, 0]
    assert torch.equal(r.get_tensor(keys[1]), torch.ones(7))
    assert w.upsert_tensor_from(keys[2], sa, len(obj)) == 0
    assert torch.equal(r.get_tensor(keys[2]), torch.arange(10, dtype=torch.int64))
    cfg = ReplicateConfig()
    cfg.preferred_segment = r.get_hostname()
    assert w.pub_tensor("pub-" + keys[0], torch.ones(2), cfg) == 0
    assert w.upsert_pub_tensor("pub-" + keys[0], torch.zeros(2), cfg) == 0
    assert torch.equal(r.get_tensor("pub-" + keys[0]), torch.zeros(2))


def test_tensor_parallel_shards(tpair):
    w, r = tpair
    t = torch.arange(4 * 8 * 3, dtype=torch.float32).reshape(4, 8, 3)
    k = "tp-" + os.urandom(3).hex()
    assert w.put_tensor_with_tp(k, t, tp_size=4, split_dim=1) == 0
    for rank in range(4):
        shard = t.narrow(1, rank * 2, 2)
        assert torch.equal(r.get_tensor_with_tp(k, tp_rank=rank, tp_size=4), shard)
        axis = (1, 0, rank, 4, 1, 0, 2)  # TP, axis 0, rank, count, split_dim, -, extent
        assert r.get(f"{k}_tp_{rank}") == stock_object(shard.contiguous(), kind=1,
                                                        gshape=[4, 8, 3], axes=[axis])
    assert w.put_tensor_with_tp(k + "u", t, tp_size=3, split_dim=1) == INVALID  # 8 % 3
    got = r.batch_get_tensor_with_tp([k], tp_rank=2, tp_size=4)
    assert torch.equal(got[0], t.narrow(1, 4, 2))
    assert w.batch_put_tensor_with_tp([k + "b"], [t], tp_size=2, split_dim=0) == [0]
    assert torch.equal(r.get_tensor_with_tp(k + "b", tp_rank=1, tp_size=2), t[2:])
    assert r.get_tensor_with_tp(k + "b", tp_rank=0, tp_size=1) is None  # only shards stored


def test_tensor_through_agent(master, agents):
    w, r = ts.mk_attached(master, agents[0]), ts.mk_attached(master, agents[1])
    try:
        t = torch.randn(33, 17).to(torch.bfloat16)
        assert w.put_tensor("agent-tensor", t) == 0
        assert torch.equal(r.get_tensor("agent-tensor").view(torch.int16), t.view(torch.int16))
    finally:
        r.close()
        w.close()


# ------------------------------------------------------------------ host memory pool

def test_host_mem_allocator(pair):
    w, r = pair
    al = MooncakeHostMemAllocator()
    n = 4 * MiB
    addr = al.alloc(n)
    mem = (ctypes.c_ubyte * n).from_address(addr)
    data = os.urandom(n)
    ctypes.memmove(addr, data, n)
    # Shared memory: the same pages through the descriptor (what another process maps).
    with mmap.mmap(al.fd(addr), n) as again:
        assert again[:4096] == data[:4096] and again[-10:] == data[-10:]
    assert w.register_buffer(addr, n) == 0
    k = "hostmem-" + os.urandom(4).hex()
    assert w.put_from(k, addr, n) == 0
    ctypes.memset(addr, 0, n)
    assert w.get_into(k, addr, n) == n and bytes(mem) == data
    assert w.unregister_buffer(addr) == 0
    del mem
    assert al.free(addr) == 0 and al.free(addr) == -1
    with pytest.raises(ValueError):
        al.alloc(0)


def test_methods_exist_with_stock_names():
    """Every call this file replays is an attribute of the class (no AttributeError at
    first use in SGLang, vLLM or LMCache)."""
    for name in ["batch_put_from_multi_buffers", "batch_get_into_multi_buffers", "put_parts",
                 "get_buffer", "batch_get_buffer", "get_batch", "put_batch", "upsert",
                 "upsert_from", "upsert_parts", "upsert_batch", "batch_upsert_from",
                 "put_tensor", "get_tensor", "batch_put_tensor", "batch_get_tensor",
                 "pub_tensor", "get_tensor_into", "put_tensor_from", "upsert_tensor",
                 "put_tensor_with_tp", "get_tensor_with_tp", "batch_put_tensor_with_tp",
                 "batch_get_tensor_with_tp", "get_replica_desc", "batch_get_replica_desc",
                 "batch_put_session_start", "batch_put_from_multi_buffer_ranges",
                 "batch_put_session_end", "batch_put_session_revoke",
                 "batch_get_session_start", "batch_get_into_multi_buffer_ranges",
                 "batch_get_session_end", "batch_replica_clear"]:
        assert callable(getattr(MooncakeDistributedStore, name)), name


def test_setup_dummy_attaches_to_the_agent(master, agents):
    """SGLang's standalone storage: host pool from MooncakeHostMemAllocator, setup_dummy,
    register_buffer, then the HiCache calls through the agent."""
    saved = {k: os.environ.get(k) for k in ("MOONCAKE_MASTER", "TIDE_AGENT_SOCKET")}
    os.environ["MOONCAKE_MASTER"] = master
    try:
        al = MooncakeHostMemAllocator()
        pool = al.alloc(2 * MiB)
        s = MooncakeDistributedStore()
        assert s.setup_dummy(2 * MiB, 16 * MiB, agents[0]) == 0
        assert s.register_buffer(pool, 2 * MiB) == 0
        data = os.urandom(MiB)
        ctypes.memmove(pool, data, MiB)
        k = "dummy-" + os.urandom(4).hex()
        assert s.batch_put_from([k], [pool], [MiB]) == [0]
        assert s.batch_get_into([k], [pool + MiB], [MiB]) == [MiB]
        assert ctypes.string_at(pool + MiB, MiB) == data
        s.unregister_buffer(pool)
        s.close()
        # stock's "host:port" form: the node file's (here the environment's) socket.
        os.environ["TIDE_AGENT_SOCKET"] = agents[1]
        s = MooncakeDistributedStore()
        assert s.setup_dummy(0, 16 * MiB, "127.0.0.1:50052") == 0
        assert s.get(k) == data
        s.close()
        al.free(pool)
        s = MooncakeDistributedStore()
        assert s.setup_dummy(0, 16 * MiB, "/nonexistent/agent.sock") != 0
    finally:
        restore_env(saved)


# ------------------------------------------------------------------- put_from_with_metadata

def test_put_from_with_metadata(pair, capfd):
    """Stock's layout: one object, the metadata bytes first, then the data, each written from
    its own buffer; size 0 stores nothing and answers 0; prefer_alloc_in_same_node is -1; a
    null address with bytes is -600; metadata of 0 bytes stores the data alone."""
    w, r = pair
    meta, ma = buf(300, seed=7)
    data, da = buf(200 * KiB + 5, seed=8)
    k = "pfwm-" + os.urandom(4).hex()
    assert w.put_from_with_metadata(k, da, ma, 200 * KiB + 5, 300) == 0
    assert r.get(k) == bytes(meta[:300]) + bytes(data[:200 * KiB + 5])
    assert r.get_size(k) == 300 + 200 * KiB + 5
    k0 = k + "-nometa"
    assert w.put_from_with_metadata(k0, da, 0, 1000, 0) == 0
    assert r.get(k0) == bytes(data[:1000])
    k1 = k + "-empty"
    assert w.put_from_with_metadata(k1, da, ma, 0, 300) == 0
    assert "empty data" in capfd.readouterr().err
    assert r.is_exist(k1) == 0
    same = ReplicateConfig()
    same.prefer_alloc_in_same_node = True
    assert w.put_from_with_metadata(k + "-same", da, ma, 10, 10, same) == -1
    assert "prefer_alloc_in_same_node" in capfd.readouterr().err
    assert w.put_from_with_metadata(k + "-null", 0, ma, 10, 10) == -600
    assert w.put_from_with_metadata(k + "-neg", da, ma, -1, 10) == -600
    assert r.is_exist(k + "-same") == 0 and r.is_exist(k + "-null") == 0
    # A key that exists keeps its object, whatever put answers (as put_from does).
    assert w.put_from_with_metadata(k, da, ma, 10, 10) == w.put_from(k, da, 20)
    assert r.get_size(k) == 300 + 200 * KiB + 5
