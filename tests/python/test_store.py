"""mooncake.store (Tide's drop-in) against Tide's mooncake_master: stores in one process,
embedded (TIDE_AGENT=off: own transfer engine and segment), over kernel sockets
(P2PHANDSHAKE). Debian python3 + python3-pytest + python3-numpy.

Environment (set by meson): STORE_TEST_MASTER_BIN = mooncake_master,
LIBTIDESTORE = libtidestore.so, PYTHONPATH = store/python.
"""
import copy
import ctypes
import gc
import json
import os
import subprocess
import sys
import threading
import time

import numpy
import pytest

for k in [k for k in os.environ if k.startswith(("TIDE_", "MOONCAKE_"))]:
    del os.environ[k]
os.environ["MC_FORCE_TCP"] = "1"
LIB = os.environ["LIBTIDESTORE"]  # set by meson: the build's libtidestore.so
os.environ["TIDE_AGENT"] = "off"  # embedded: no tide-node agent in this test

import mooncake  # noqa: E402
import mooncake.buffer_pool  # noqa: E402
from mooncake.store import BufferPool, MooncakeDistributedStore, ReplicateConfig  # noqa: E402
from ut_common import restore_env, start_master  # noqa: E402

SEG = 96 << 20   # holds a 64 MiB object
LBUF = 16 << 20  # local buffer (BufferPool's first region)
MiB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def master():
    # Eviction off: test_full_store_is_backpressure's refused allocation asks for an
    # eviction round (as stock's master does), which would evict whatever unleased
    # objects the tests around it hold. Eviction is tested in mc_table_ut.
    p, addr = start_master(extra=["--eviction_ratio=0"])
    yield addr
    p.terminate()
    p.wait(timeout=10)


def mk(master, seg=SEG, lbuf=LBUF):
    s = MooncakeDistributedStore()
    rc = s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                  "global_segment_size": seg, "local_buffer_size": lbuf, "protocol": "tcp",
                  "rdma_devices": "", "master_server_addr": master})
    assert rc == 0
    return s


@pytest.fixture(scope="module")
def pair(master):
    a, b = mk(master), mk(master)
    yield a, b
    b.close()
    a.close()


def nbuf(n, fill=None):
    """A numpy byte buffer and its address."""
    arr = numpy.zeros(max(n, 1), dtype=numpy.uint8)
    if fill is not None:
        arr[:n] = numpy.frombuffer(fill, dtype=numpy.uint8)
    return arr, arr.ctypes.data


def pattern(n, seed):
    return numpy.random.default_rng(seed).integers(0, 256, n, dtype=numpy.uint8).tobytes()


# ----------------------------------------------------------------------- P0 surface

def test_round_trip_sizes_and_buffer_types(pair):
    a, b = pair
    for i, n in enumerate([1, 255, 4096, 1 << 20, 16 << 20]):
        data = os.urandom(n)
        assert a.put(f"rt-{i}", data) == 0
        assert b.get(f"rt-{i}") == data
        assert a.get(f"rt-{i}") == data
        assert a.get_size(f"rt-{i}") == n
        assert b.is_exist(f"rt-{i}") == 1
    arr = numpy.arange(1000, dtype=numpy.uint8)
    assert a.put("np", arr) == 0
    assert b.get("np") == arr.tobytes()
    assert a.put("ba", bytearray(b"xyz")) == 0
    assert b.get("ba") == b"xyz"
    assert a.put("mv", memoryview(b"abcdef")[1:4]) == 0
    assert b.get("mv") == b"bcd"
    f32 = numpy.ones(10, dtype=numpy.float32)
    assert a.put("f32", f32) == 0
    assert b.get("f32") == f32.tobytes()


def test_large_get_refills_only_dropped_objects(pair):
    """get() of 8 MiB and more refills a bytes object it returned before, but only one
    the caller has dropped: an object still held keeps its bytes, and a refilled one
    hashes as its new contents."""
    a, b = pair
    n = 9 << 20
    one, two = pattern(n, 1), pattern(n, 2)
    assert a.put("big-1", one) == 0 and a.put("big-2", two) == 0
    held = b.get("big-1")
    assert held == one
    h1 = hash(held)
    got = b.get("big-2")
    assert got is not held and got == two
    assert held == one and hash(held) == h1  # held: never written again
    view = memoryview(got)  # a view holds it too
    again = b.get("big-1")
    assert again is not got and again == one and view.tobytes() == two
    del view
    addr = id(got)
    del got  # now only the store's cache holds it
    third = b.get("big-2")
    assert id(third) == addr and third == two
    assert hash(third) == hash(bytes(two))
    bad = b.get("no-such-big")  # a failed get leaves the cache alone
    assert bad == b""
    assert b.get("big-2") == two and third == two
    assert a.remove("big-1", True) == 0 and a.remove("big-2", True) == 0


def test_missing_remove_and_codes(pair):
    a, b = pair
    assert a.get("nope") == b""
    assert a.is_exist("nope") == 0
    assert a.get_size("nope") == -704
    assert a.remove("nope") == -704
    assert a.put("gone", b"1234") == 0
    assert b.remove("gone", force=True) == 0
    assert a.get("gone") == b""
    assert a.put("", b"x") == -600
    assert a.put("empty", b"") == -600
    assert a.put("nul\0key", b"x") == -600


def test_replicate_config(pair):
    a, b = pair
    cfg = ReplicateConfig()
    cfg.replica_num = 2
    cfg.group_ids = ["structured-1234"]
    cfg.with_hard_pin = True
    cfg.preferred_segment = b.get_hostname()
    cfg.preferred_segments = [a.get_hostname()]
    cfg.prefer_alloc_in_same_node = True
    cfg2 = copy.copy(cfg)
    assert cfg2.replica_num == 2 and cfg2.group_ids == ["structured-1234"]
    # str() is stock's operator<< (replica.h): "name: value", bools as 1/0.
    text = str(cfg2)
    assert text.startswith("ReplicateConfig: { replica_num: 2, ") and text.endswith(" }")
    assert f"with_hard_pin: 1, preferred_segments: [{a.get_hostname()}], preferred_segment " \
        f"(deprecated): {b.get_hostname()}, " in text
    assert "group_ids: [structured-1234]" in text and repr(cfg2) == text
    data = os.urandom(70000)
    assert a.put("rep2", data, config=cfg2) == 0
    assert b.get("rep2") == data
    assert b.remove("rep2", force=True) == 0


def test_full_store_is_backpressure(pair):
    a, b = pair
    assert a.put("huge", b"\0" * (2 * SEG + 4096)) == -200
    assert a.get("huge") == b""
    big, p = nbuf(2 * SEG + 4096)
    assert a.put_from("huge", p, big.nbytes) == -200
    assert a.batch_put_from(["huge", "small-next-to-huge"], [p, p], [big.nbytes, 10]) \
        in ([-200, 0], [-200, -200])
    a.remove("small-next-to-huge", force=True)


def test_setup_errors(master):
    s = MooncakeDistributedStore()
    assert s.setup({"local_hostname": "127.0.0.1", "master_server_addr": master,
                    "protocol": "rdma", "global_segment_size": 0}) != 0
    assert s.setup({"local_hostname": "127.0.0.1", "master_server_addr": master,
                    "global_segment_size": "12 parsecs"}) == -600
    assert s.setup({"local_hostname": "127.0.0.1", "master_server_addr": "127.0.0.1:1",
                    "global_segment_size": 0}) != 0
    # never set up: Mooncake's "client is not initialized" answers
    assert s.put("k", b"v") == -600
    assert s.get("k") == b""
    assert s.health_check() == 1
    assert s.get_hostname() == ""
    assert s._get_pyclient_capsule() is None
    with pytest.raises(RuntimeError):
        BufferPool(s)


def test_positional_setup_and_pure_client(master, pair):
    a, _ = pair
    c = MooncakeDistributedStore()
    assert c.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0
    assert c.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == -600
    assert a.put("from-a", b"hello") == 0
    assert c.get("from-a") == b"hello"
    assert c.put("from-c", b"world") == 0
    assert a.get("from-c") == b"world"
    assert c.health_check() == 0
    c.close()


# ----------------------------------------------------------------------- P1 surface

P1 = ["setup", "put", "get", "remove", "is_exist", "get_size", "close", "get_hostname",
      "health_check", "put_from", "batch_put_from", "get_into", "batch_get_into",
      "get_into_ranges", "register_buffer", "unregister_buffer", "batch_remove",
      "batch_is_exist", "remove_by_regex", "remove_all", "_get_pyclient_capsule"]


def test_surface_and_capsule(pair):
    a, _ = pair
    for m in P1:
        assert callable(getattr(a, m)), m
    # never a half API: stock's structured helper picks its path by getattr, so a family is
    # either all there (the tensor calls test_store_calls.py replays) or absent
    for m in ["put_tensor", "pub_tensor", "get_tensor", "batch_put_tensor", "batch_get_tensor",
              "setup_dummy", "put_tensor_with_parallelism", "get_tensor_with_parallelism"]:
        assert callable(getattr(a, m)), m
    for m in ["init_all"]:
        assert not hasattr(a, m)
    cap = a._get_pyclient_capsule()
    assert type(cap).__name__ == "PyCapsule"
    api = ctypes.pythonapi
    api.PyCapsule_IsValid.restype = ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    assert api.PyCapsule_IsValid(cap, b"mooncake.PyClient.shared_ptr") == 1
    assert mooncake.buffer_pool.BufferPool is BufferPool
    assert mooncake.buffer_pool.RegisteredBufferPool is BufferPool
    assert mooncake.BufferPool is BufferPool
    host, port = a.get_hostname().rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert a.health_check() == 0


def test_put_from_get_into_sizes(pair):
    a, b = pair
    for n in [1, 256, 4097, 64 * MiB]:
        data = pattern(n, n)
        src, sp = nbuf(n, data)
        assert a.put_from(f"pf-{n}", sp, n) == 0
        dst, dp = nbuf(n)
        assert b.get_into(f"pf-{n}", dp, n) == n
        assert dst[:n].tobytes() == data
        if n > 1:
            # destination too small: nothing read, -600 (Mooncake's INVALID_PARAMS)
            assert b.get_into(f"pf-{n}", dp, n - 1) == -600
        assert b.get_size(f"pf-{n}") == n
        assert a.remove(f"pf-{n}", force=True) == 0
    src, sp = nbuf(16)
    assert a.put_from("pf-zero", sp, 0) == -600
    assert a.put_from("", sp, 4) == -600
    assert a.put_from("pf-null", 0, 4) == -600
    assert a.put_from("pf-neg", sp, -1) == -600
    dst, dp = nbuf(16)
    assert a.get_into("missing-key", dp, 16) == -704
    assert a.get_into("", dp, 16) == -600


def test_put_from_with_config_and_existing_key(pair):
    a, b = pair
    cfg = ReplicateConfig()
    cfg.group_ids = ["structured-pf"]
    src, sp = nbuf(300, b"x" * 300)
    assert a.put_from("pf-cfg", sp, 300, config=cfg) == 0
    # write-once: a second put of the key keeps the first value (0, as Mooncake)
    src2, sp2 = nbuf(300, b"y" * 300)
    assert a.put_from("pf-cfg", sp2, 300, config=cfg) == 0
    assert b.get("pf-cfg") == b"x" * 300
    assert a.remove("pf-cfg", force=True) == 0


def test_batch_put_from_and_batch_get_into(pair):
    a, b = pair
    sizes = [1, 100, 5000, 1 << 20]
    datas = [pattern(n, 7 + n) for n in sizes]
    bufs = [nbuf(n, d) for n, d in zip(sizes, datas)]
    keys = [f"bp-{i}" for i in range(len(sizes))]
    cfg = ReplicateConfig()
    cfg.group_ids = ["structured-abc"] * len(keys)
    assert a.batch_put_from(keys, [p for _, p in bufs], sizes, config=cfg) == [0] * 4
    outs = [nbuf(n) for n in sizes]
    got = b.batch_get_into(keys, [p for _, p in outs], sizes)
    assert got == sizes
    for (arr, _), d, n in zip(outs, datas, sizes):
        assert arr[:n].tobytes() == d
    # missing key, too-small destination, good key: per-key results
    small, sp = nbuf(10)
    big, bp = nbuf(5000)
    assert b.batch_get_into(["bp-missing", "bp-2", "bp-1"], [bp, sp, bp], [5000, 10, 5000]) \
        == [-704, -600, 100]
    # one Miles-style call per key
    assert a.batch_put_from(["bp-single"], [bufs[1][1]], [100], config=ReplicateConfig()) == [0]
    assert b.get("bp-single") == datas[1]
    assert a.batch_put_from([], [], []) == []
    assert b.batch_get_into([], [], []) == []
    assert a.batch_remove(keys + ["bp-single"], True) == [0] * 5


def test_batch_put_from_bad_arguments(pair):
    a, _ = pair
    src, sp = nbuf(64, b"z" * 64)
    cfg = ReplicateConfig()
    cfg.group_ids = ["g1"]  # one group for two keys: every key -600, nothing stored
    assert a.batch_put_from(["bg-1", "bg-2"], [sp, sp], [64, 64], config=cfg) == [-600, -600]
    assert a.batch_is_exist(["bg-1", "bg-2"]) == [0, 0]
    assert a.batch_put_from(["bg-1", "bg-2"], [sp], [64, 64]) == [-600, -600]
    assert a.batch_put_from(["bg-1", "bg-2"], [sp, sp], [64]) == [-600, -600]
    # a zero-length object fails only its own key
    r = a.batch_put_from(["bg-0", "bg-ok"], [sp, sp], [0, 64])
    assert r == [-600, 0]
    assert a.remove("bg-ok", force=True) == 0


def test_get_into_ranges_partial_success(pair):
    a, b = pair
    d1 = pattern(10000, 1)
    d2 = pattern(3000, 2)
    assert a.put("gr-1", d1) == 0
    assert a.put("gr-2", d2) == 0
    out0, p0 = nbuf(20000)
    out1, p1 = nbuf(4096)
    res = b.get_into_ranges(
        [p0, p1],
        [["gr-1", "gr-2", "gr-missing"], ["gr-2"]],
        [[[0, 5000], [10000], [0]], [[0, 100]]],
        [[[0, 5000], [0], [0]], [[2999, 0]]],
        [[[5000, 5000], [3000], [10]], [[1, 0]]])
    assert res == [[[5000, 5000], [3000], [-704]], [[1, 0]]]
    assert out0[:10000].tobytes() == d1
    assert out0[10000:13000].tobytes() == d2
    assert out1[0] == d2[2999]
    # a fragment beyond the object's end, and a negative offset: -600 for those only
    res = b.get_into_ranges([p0], [["gr-2"]], [[[0, 10, 20]]], [[[2990, 0, -1]]],
                            [[[100, 10, 5]]])
    assert res == [[[-600, 10, -600]]]
    assert out0[10:20].tobytes() == d2[:10]
    # chunked member gathered in one call (the helper's >64 MiB path, scaled down)
    chunks = [pattern(4096 + i, 50 + i) for i in range(3)]
    for i, c in enumerate(chunks):
        assert a.put(f"gr-chunk/{i}", c) == 0
    whole, pw = nbuf(sum(len(c) for c in chunks))
    offs = [0, len(chunks[0]), len(chunks[0]) + len(chunks[1])]
    res = b.get_into_ranges([pw], [[f"gr-chunk/{i}" for i in range(3)]],
                            [[[o] for o in offs]], [[[0]] * 3], [[[len(c)] for c in chunks]])
    assert res == [[[len(c)] for c in chunks]]
    assert whole.tobytes() == b"".join(chunks)
    assert b.get_into_ranges([], [], [], [], []) == []
    with pytest.raises(ValueError):
        b.get_into_ranges([p0], [["gr-1"]], [[[0]]], [[[0]]], [[[1, 2]]])
    assert a.batch_remove(["gr-1", "gr-2"] + [f"gr-chunk/{i}" for i in range(3)], True) \
        == [0] * 5


def test_register_buffer(pair):
    a, b = pair
    buf = bytearray(4096)
    p = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
    assert a.register_buffer(p, len(buf)) == 0
    assert a.register_buffer(p, len(buf)) == -600  # duplicate, as Mooncake
    assert a.put("rb", b"registered") == 0
    assert a.batch_get_into(["rb"], [p], [len(buf)]) == [10]
    assert bytes(buf[:10]) == b"registered"
    assert a.unregister_buffer(p) == 0
    assert a.unregister_buffer(p) == -600
    assert a.register_buffer(0, 10) == -600
    assert a.register_buffer(p, 0) == -600
    assert a.remove("rb", force=True) == 0


def test_exist_remove_batches_and_leases(pair):
    a, b = pair
    for i in range(3):
        assert a.put(f"ex-{i}", b"v" * (i + 1)) == 0
    assert b.batch_is_exist(["ex-0", "ex-x", "ex-2"]) == [1, 0, 1]
    assert b.batch_is_exist([]) == []
    assert b.get("ex-1") == b"vv"  # takes a read lease
    assert b.batch_remove(["ex-1"]) == [-706]
    assert b.remove("ex-1") == -706
    assert b.batch_remove(["ex-0", "ex-1", "ex-missing"], force=True) == [0, 0, -704]
    assert b.batch_remove([]) == []
    assert a.batch_is_exist(["ex-0", "ex-1", "ex-2"]) == [0, 0, 1]
    assert a.remove("ex-2", force=True) == 0


def test_remove_by_regex(pair):
    a, b = pair
    for i in range(5):
        assert a.put(f"rx/job7/{i}", b"x") == 0
    assert a.put("rx/job8/0", b"y") == 0
    assert b.remove_by_regex("^rx/job7/", True) == 5
    assert b.batch_is_exist([f"rx/job7/{i}" for i in range(5)] + ["rx/job8/0"]) \
        == [0] * 5 + [1]
    assert b.remove_by_regex("^rx/nothing", True) == 0
    assert b.remove_by_regex("(", True) == -600
    assert b.remove("rx/job8/0", force=True) == 0


def test_remove_all_own_master():
    p, addr = start_master()
    try:
        s = mk(addr, seg=8 << 20, lbuf=1 << 20)
        for i in range(7):
            assert s.put(f"ra-{i}", b"q" * 10) == 0
        assert s.remove_all(True) == 7
        assert s.is_exist("ra-0") == 0
        assert s.remove_all(True) == 0
        s.close()
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_close_twice_and_methods_after_close(master):
    s = mk(master, seg=8 << 20, lbuf=1 << 20)
    assert s.put("ac-k", b"v") == 0
    assert s.close() == 0
    assert s.close() == 0
    src, sp = nbuf(8)
    assert s.health_check() == 1
    assert s.get_hostname() == ""
    assert s.put("ac-k", b"v") == -600
    assert s.get("ac-k") == b""
    assert s.put_from("ac-k", sp, 8) == -600
    assert s.get_into("ac-k", sp, 8) == -600
    assert s.is_exist("ac-k") == -600
    assert s.get_size("ac-k") == -600
    assert s.remove("ac-k") == -600
    assert s.batch_put_from(["x", "y"], [sp, sp], [1, 1]) == [-600, -600]
    assert s.batch_get_into(["x"], [sp], [8]) == [-600]
    assert s.batch_is_exist(["x", "y"]) == [-1, -1]
    assert s.batch_remove(["x"], True) == [-600]
    assert s.get_into_ranges([sp], [["x"]], [[[0]]], [[[0]]], [[[1]]]) == [[[-600]]]
    assert s.register_buffer(sp, 8) == -600
    assert s.unregister_buffer(sp) == -600
    assert s.remove_by_regex(".*") == -600
    assert s.remove_all() == -600
    assert s._get_pyclient_capsule() is None
    with pytest.raises(RuntimeError):
        BufferPool(s)


def test_threads(pair):
    a, b = pair
    errors = []

    def worker(t):
        try:
            for i in range(40):
                k = f"th-{t}-{i}"
                d = pattern(100 + 37 * i, t * 1000 + i)
                assert a.put(k, d) == 0
                out, p = nbuf(len(d))
                assert b.get_into(k, p, len(d)) == len(d)
                assert out.tobytes() == d
                assert b.batch_remove([k], True) == [0]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


# ----------------------------------------------------------------------- BufferPool

def test_buffer_pool_acquire_release_round_trip(pair):
    a, b = pair
    pool = BufferPool(a)
    lease = pool.acquire(1000)
    assert lease.size == 1000 and lease.ptr % 4096 == 0
    mv = lease.buffer
    assert isinstance(mv, memoryview) and mv.nbytes == 1000 and mv.format == "B"
    data = pattern(1000, 3)
    mv[:] = data
    del mv
    cfg = ReplicateConfig()
    cfg.group_ids = ["structured-pool"]
    assert a.batch_put_from(["bpool-1"], [lease.ptr], [lease.size], config=cfg) == [0]
    lease.release()
    lease.release()  # second release: no-op
    with pytest.raises(RuntimeError):
        lease.ptr
    rpool = BufferPool(b)
    with rpool.buffer(1000) as r:
        assert b.get_into_ranges([r.ptr], [["bpool-1"]], [[[0]]], [[[0]]], [[[1000]]]) \
            == [[[1000]]]
        assert bytes(r.buffer) == data
    with pytest.raises(RuntimeError):
        r.ptr
    z = pool.acquire(0)
    assert z.size == 0 and bytes(z.buffer) == b""
    z.release()
    pool.close()
    pool.close()
    rpool.close()
    with pytest.raises(RuntimeError):
        pool.acquire(10)
    assert a.remove("bpool-1", force=True) == 0


def test_buffer_pool_release_with_live_views(pair):
    a, _ = pair
    pool = BufferPool(a)
    lease = pool.acquire(4096)
    arr = numpy.frombuffer(lease.buffer, dtype=numpy.uint8)
    with pytest.raises(RuntimeError):
        lease.release()
    del arr
    part = lease.buffer[10:20]
    with pytest.raises(RuntimeError):
        lease.release()
    del part
    lease.release()
    pool.close()


def test_buffer_pool_exhaustion_timeout_and_wakeup(pair):
    a, _ = pair
    # max_bytes below twice the local buffer is raised to the local buffer (Mooncake)
    pool = BufferPool(a, max_bytes=1, max_regions=None)
    assert pool._max_bytes == LBUF
    l1 = pool.acquire(LBUF - 4096)
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(8192, block=False)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        pool.acquire(8192, timeout=0.2)
    assert 0.15 < time.monotonic() - t0 < 3
    with pytest.raises(RuntimeError):  # the timeout is also a RuntimeError (Mooncake)
        pool.acquire(8192, timeout=0)
    with pytest.raises(RuntimeError, match="exceeds"):
        pool.acquire(LBUF + 1)
    with pytest.raises(RuntimeError):
        pool.acquire(1, timeout=-1)
    got = []
    th = threading.Thread(target=lambda: got.append(pool.acquire(8192, timeout=10)))
    th.start()
    time.sleep(0.2)
    assert not got
    l1.release()
    th.join(10)
    assert got and got[0].size == 8192
    with pytest.raises(RuntimeError, match="active leases"):
        pool.close()
    got[0].release()
    pool.close()


def test_buffer_pool_overflow_regions(pair):
    a, b = pair
    pool = BufferPool(a)  # max 2 x the local buffer
    big = [pool.acquire(12 * MiB) for _ in range(2)]  # the second one overflows
    assert pool.stats["overflow_map"] == 1
    for i, l in enumerate(big):
        d = pattern(l.size, 90 + i)
        l.buffer[:] = d
        assert a.put_from(f"ovf-{i}", l.ptr, l.size) == 0
    with pytest.raises(TimeoutError):
        pool.acquire(12 * MiB, timeout=0.1)
    for l in big:
        l.release()
    assert pool.stats["overflow_unmap"] == 1
    for i in range(2):
        assert b.get(f"ovf-{i}") == pattern(12 * MiB, 90 + i)
    # larger than max_size_class: straight to an overflow region
    p2 = BufferPool(a, max_size_class=MiB)
    l = p2.acquire(2 * MiB)
    assert p2.stats["overflow_map"] == 1
    l.release()
    p2.close()
    # max_regions caps the leases at once
    p3 = BufferPool(a, max_regions=2, block_on_exhaustion=False)
    x, y = p3.acquire(10), p3.acquire(10)
    with pytest.raises(RuntimeError):
        p3.acquire(10)
    x.release()
    y.release()
    p3.close()
    pool.close()
    assert a.batch_remove(["ovf-0", "ovf-1"], True) == [0, 0]


def test_buffer_pool_dropped_lease_is_reclaimed(pair):
    a, _ = pair
    pool = BufferPool(a, block_on_exhaustion=False)
    lease = pool.acquire(LBUF)
    lease2 = pool.acquire(LBUF)  # overflow
    del lease, lease2  # never released
    gc.collect()
    again = pool.acquire(2 * LBUF - 4096)
    again.release()
    pool.close()


def test_buffer_pool_arguments(pair):
    a, _ = pair
    with pytest.raises(RuntimeError):
        BufferPool(a, alignment=3)
    with pytest.raises(RuntimeError):
        BufferPool(a, min_size_class=0)
    with pytest.raises(RuntimeError):
        BufferPool(object())
    p = BufferPool(a, prewarm_size=1 << 20, prewarm_count=4, default_timeout=1.0)
    p.prewarm(4096, 2)
    p.close()


class _Wrapper:
    """A store wrapper (as TransferQueue's) that only offers the capsule."""

    def __init__(self, store):
        self._s = store

    def _get_pyclient_capsule(self):
        return self._s._get_pyclient_capsule()


def test_buffer_pool_through_capsule_wrapper(pair):
    a, _ = pair
    pool = BufferPool(_Wrapper(a))
    with pool.acquire(100) as l:
        l.buffer[:3] = b"abc"
    pool.close()


def test_store_close_with_leases_outstanding(master):
    s = mk(master, seg=8 << 20, lbuf=1 << 20)
    pool = BufferPool(s)
    lease = pool.acquire(4096)
    assert s.close() == 0
    assert s.put("after", b"x") == -600
    lease.buffer[:4] = b"safe"  # memory stays mapped until the last lease goes
    with pytest.raises(RuntimeError):
        pool.acquire(10)
    lease.release()
    pool.close()


def test_no_local_buffer_no_capsule(master):
    s = mk(master, seg=0, lbuf=0)
    assert s._get_pyclient_capsule() is None
    with pytest.raises(RuntimeError):
        BufferPool(s)
    s.close()


# ------------------------------------------------------------ the Miles pattern script

def test_miles_pattern_roles(master, tmp_path):
    """tools/miles_pattern.py: writer, reader and driver, as separate processes."""
    seg_holder = mk(master, seg=256 << 20, lbuf=1 << 20)  # capacity (the writer is a pure client)
    try:
        env = dict(os.environ, MOONCAKE_MASTER=master, MOONCAKE_LOCAL_HOSTNAME="127.0.0.1",
                   MOONCAKE_PROTOCOL="tcp", MOONCAKE_GLOBAL_SEGMENT_SIZE="0",
                   MOONCAKE_LOCAL_BUFFER_SIZE="64mb", PYTHONPATH=os.pathsep.join(
                       [os.path.join(REPO, "store", "python"), os.environ.get("PYTHONPATH", "")]))
        script = os.path.join(REPO, "tools", "miles_pattern.py")
        handle = str(tmp_path / "handle.json")

        def run(*args):
            r = subprocess.run([sys.executable, script, *args], env=env, capture_output=True,
                               text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            return r.stdout

        out = run("writer", "--shards", "3", "--handle", handle, "--seed", "5",
                  "--big-chunks", "1", "--chunk-mib", "2")
        assert "writer:" in out and "ops/s" in out and "MiB/s" in out
        h = json.load(open(handle))
        assert len(h["shards"]) == 3
        nobj = sum(len(s["objects"]) for s in h["shards"])
        assert nobj >= 3 * 40
        out = run("reader", "--handle", handle)
        assert "reader:" in out and "verified" in out
        out = run("driver", "--handle", handle)
        assert "driver:" in out
        keys = [o["key"] for s in h["shards"] for o in s["objects"]]
        assert seg_holder.batch_is_exist(keys) == [0] * len(keys)
        # a reader after removal fails with a clear message
        r = subprocess.run([sys.executable, script, "reader", "--handle", handle], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and "missing" in (r.stdout + r.stderr)
    finally:
        seg_holder.close()


def test_close_while_calls_in_flight(master):
    s = mk(master, seg=8 << 20, lbuf=1 << 20)
    assert s.put("cf-k", b"z" * 1000) == 0
    stop, errors = threading.Event(), []
    per_thread = [[] for _ in range(3)]

    def reader(results):
        out, p = nbuf(1000)
        try:
            # Run until stopped and until this thread saw a call after close.
            while not stop.is_set() or not results or results[-1] != -600:
                results.append(s.get_into("cf-k", p, 1000))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=reader, args=(r,)) for r in per_thread]
    for t in ts:
        t.start()
    time.sleep(0.2)
    assert s.close() == 0  # waits for the calls in flight
    stop.set()
    for t in ts:
        t.join(timeout=30)
        assert not t.is_alive()
    assert not errors
    # Per thread: whole reads while open, then only "not initialized" after
    # close, never a read after a refusal (threads interleave freely).
    for results in per_thread:
        assert results[-1] == -600 and set(results) <= {1000, -600}
        first_refusal = results.index(-600)
        assert all(r == -600 for r in results[first_refusal:])
    assert any(1000 in results for results in per_thread)


# ------------------------------------------------------------ through the node agent

@pytest.fixture(scope="module")
def agents(master, tmp_path_factory):
    """Two tide-node agents (two "nodes") on this master, each owning a segment."""
    node = os.environ.get("STORE_TEST_NODE_BIN")
    if not node:
        pytest.fail("STORE_TEST_NODE_BIN not set (the tide-node binary; meson sets it)")
    d = tmp_path_factory.mktemp("agents")
    procs, socks = [], []
    for i in range(2):
        sock = str(d / f"agent{i}.sock")
        env = dict(os.environ, MOONCAKE_MASTER=master, MOONCAKE_LOCAL_HOSTNAME="127.0.0.1",
                   MOONCAKE_PROTOCOL="tcp", MOONCAKE_GLOBAL_SEGMENT_SIZE=str(256 << 20),
                   TIDE_NODE_ENV=os.devnull)
        env.pop("TIDE_AGENT", None)
        log = open(d / f"agent{i}.log", "w")
        procs.append(subprocess.Popen([node, "--socket", sock], env=env, stdout=log,
                                      stderr=subprocess.STDOUT))
        socks.append(sock)
    deadline = time.monotonic() + 15
    for i, (sock, p) in enumerate(zip(socks, procs)):
        while not os.path.exists(sock):
            assert p.poll() is None, open(d / f"agent{i}.log").read()
            assert time.monotonic() < deadline, \
                f"tide-node {i} did not create {sock} within 15 s: " + \
                open(d / f"agent{i}.log").read()
            time.sleep(0.05)
    yield socks
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=10)


def mk_attached(master, sock, lbuf=LBUF):
    """A store attached to the agent at sock (TIDE_AGENT=required for this setup)."""
    saved = {k: os.environ.get(k) for k in ("TIDE_AGENT", "TIDE_AGENT_SOCKET")}
    os.environ["TIDE_AGENT"] = "required"
    os.environ["TIDE_AGENT_SOCKET"] = sock
    try:
        return mk(master, seg=0, lbuf=lbuf)
    finally:
        restore_env(saved)


@pytest.fixture(scope="module", params=["in-process", "agent"])
def pair_each_way(request, master):
    """(writer, reader): two stores of one cluster, in process or each on its agent; the
    call-family test files take it as their `pair` (pair = ts.pair_each_way)."""
    if request.param == "in-process":
        a, b = mk(master), mk(master)
    else:
        socks = request.getfixturevalue("agents")
        a, b = mk_attached(master, socks[0]), mk_attached(master, socks[1])
    yield a, b
    b.close()
    a.close()


def test_agent_round_trip_and_pool(master, agents):
    a = mk_attached(master, agents[0])
    b = mk_attached(master, agents[1])
    try:
        assert a.health_check() == 0 and b.health_check() == 0
        assert a.get_hostname() and a.get_hostname() != b.get_hostname()
        data = pattern(300000, 11)
        assert a.put("ag-1", data) == 0
        assert b.get("ag-1") == data
        # leases live in shared memory the agent maps: moved without a copy
        pa, pb = BufferPool(a), BufferPool(b)
        with pa.acquire(len(data)) as l:
            l.buffer[:] = data
            cfg = ReplicateConfig()
            cfg.group_ids = ["structured-agent"]
            assert a.batch_put_from(["ag-2"], [l.ptr], [l.size], config=cfg) == [0]
        with pb.acquire(len(data)) as r:
            assert b.get_into_ranges([r.ptr], [["ag-2"]], [[[0]]], [[[0]]],
                                     [[[len(data)]]]) == [[[len(data)]]]
            assert bytes(r.buffer) == data
        # overflow regions mapped through the agent
        big = [pa.acquire(12 * MiB) for _ in range(2)]
        assert pa.stats["overflow_map"] == 1
        big[1].buffer[:5] = b"hello"
        assert a.put_from("ag-ovf", big[1].ptr, 5) == 0
        for l in big:
            l.release()
        assert pa.stats["overflow_unmap"] == 1
        assert b.get("ag-ovf") == b"hello"
        # heap memory: register_buffer, bounced through the agent's staging
        heap = bytearray(len(data))
        hp = ctypes.addressof((ctypes.c_char * len(heap)).from_buffer(heap))
        assert b.register_buffer(hp, len(heap)) == 0
        assert b.register_buffer(hp, len(heap)) == -600
        assert b.batch_get_into(["ag-1", "ag-missing"], [hp, hp], [len(heap), 10]) \
            == [len(data), -704]
        assert bytes(heap) == data
        assert b.unregister_buffer(hp) == 0
        assert b.batch_remove(["ag-1", "ag-2", "ag-ovf", "ag-x"], True) == [0, 0, 0, -704]
        assert b.batch_is_exist(["ag-1", "ag-2"]) == [0, 0]
        pa.close()
        pb.close()
    finally:
        a.close()
        b.close()
    assert a.health_check() == 1


def test_agent_miles_pattern_two_nodes(master, agents, tmp_path):
    """Writer attached to node 0, reader to node 1, driver to node 0."""
    script = os.path.join(REPO, "tools", "miles_pattern.py")
    handle = str(tmp_path / "h.json")
    base = dict(os.environ, MOONCAKE_MASTER=master, MOONCAKE_LOCAL_HOSTNAME="127.0.0.1",
                MOONCAKE_PROTOCOL="tcp", MOONCAKE_LOCAL_BUFFER_SIZE="128mb",
                TIDE_AGENT="required")

    def run(node, *args):
        env = dict(base, TIDE_AGENT_SOCKET=agents[node])
        r = subprocess.run([sys.executable, script, *args], env=env, capture_output=True,
                           text=True, timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    assert "writer:" in run(0, "writer", "--shards", "4", "--big-chunks", "1",
                            "--chunk-mib", "8", "--handle", handle)
    assert "every byte verified" in run(1, "reader", "--handle", handle)
    assert "none left" in run(0, "driver", "--handle", handle)


def test_binary_interface_checked(tmp_path):
    """The package binds the library with the declarations the build generated from the
    same headers (tide_abi.py beside it), exports nothing but those functions, and refuses
    a library whose interface version or struct sizes differ from its declarations'."""
    import shutil
    from mooncake import _native
    assert _native.lib.tide_store_abi_version() == _native.ABI_VERSION
    assert os.path.dirname(_native.abi_path) == os.path.dirname(os.path.realpath(LIB))
    for name, cls in _native.abi.STRUCTS.items():
        assert _native.lib.tide_store_abi_sizeof(name.encode()) == ctypes.sizeof(cls), name
    assert {"tide_store_cfg", "tide_store_rc", "tide_store_frag", "tide_te_opts",
            "tide_te_notify"} <= set(_native.abi.STRUCTS)
    assert _native.lib.tide_store_abi_sizeof(b"no_such_struct") == 0
    # The version script: the dynamic symbol table holds exactly the declared functions.
    nm = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True,
                        check=True).stdout
    exported = {ln.split()[-1] for ln in nm.splitlines() if ln.split()[1:2] == ["T"]}
    assert exported == set(_native.abi.FUNCTIONS), sorted(exported ^ set(_native.abi.FUNCTIONS))

    gen = open(os.path.join(os.path.dirname(os.path.realpath(LIB)), "tide_abi.py")).read()

    def load(abi_text):
        d = tmp_path / f"lib{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        shutil.copy(LIB, d / "libtidestore.so")
        if abi_text is not None:
            (d / "tide_abi.py").write_text(abi_text)
        env = dict(os.environ, LIBTIDESTORE=str(d / "libtidestore.so"))
        r = subprocess.run([sys.executable, "-c", "import mooncake.store"], env=env,
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stderr

    assert load(gen) == (0, "")
    rc, err = load(None)
    assert rc != 0 and "no tide_abi.py beside" in err, err
    rc, err = load(gen.replace("TIDE_STORE_ABI_VERSION = ", "TIDE_STORE_ABI_VERSION = 9"))
    assert rc != 0 and "binary interface version" in err, err
    grown = gen.replace('    ("replica_num", ctypes.c_uint),',
                        '    ("replica_num", ctypes.c_uint),\n    ("extra", ctypes.c_uint64),')
    assert grown != gen
    rc, err = load(grown)
    assert rc != 0 and "struct tide_store_rc is" in err, err
    rc, err = load(gen + '\nFUNCTIONS["tide_store_no_such_call"] = (None, [])\n')
    assert rc != 0 and "lacks tide_store_no_such_call" in err, err
