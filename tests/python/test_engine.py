"""mooncake.engine (Tide's drop-in for Mooncake's TransferEngine) replaying the call
sequences of the real integrations (/work/shared/spec/integration-call-sequences.md
sections 1, 2.1, 2.2, 3.1, 5, 6): this process is the initiator (SGLang's prefill rank,
vLLM's prefill worker, Miles' trainer); the receivers are engine_peer.py processes, which
compare every byte they received with what was sent (and check that no byte outside the
slices changed). Peers are separate processes so that a test can kill or stop one in the
middle of a batch. Everything runs on loopback over kernel sockets, P2PHANDSHAKE.

Environment (set by meson): LIBTIDESTORE = libtidestore.so, PYTHONPATH = store/python,
STORE_TEST_MASTER_BIN = mooncake_master (for the store sharing an engine).
Debian python3 + python3-pytest + python3-numpy.
"""
import concurrent.futures
import ctypes
import inspect
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import numpy
import pytest

for _k in [k for k in os.environ if k.startswith(("TIDE_", "MOONCAKE_", "MC_"))]:
    del os.environ[_k]
# Read by TransferEngine() (stock: its constructor): the sync calls' deadline is this many
# seconds (at least 5) plus 1 ns per byte.
os.environ["MC_TRANSFER_TIMEOUT"] = "5"
os.environ["TIDE_AGENT"] = "off"  # the store in test_store_shares_the_engine is embedded

from engine_peer import Arena, miles_layout, miles_push, miles_sizes, \
    miles_verify_items, pattern  # noqa: E402  (this directory; numpy only at import)
import mooncake.engine as mce  # noqa: E402
from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode  # noqa: E402
from ut_common import free_port, start_master  # noqa: E402

HOST = "127.0.0.1"
PY = "/usr/bin/python3"
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine_peer.py")
KiB, MiB = 1 << 10, 1 << 20
TIMEOUT_S = 5     # MC_TRANSFER_TIMEOUT above
SLACK_S = 3.0     # scheduling on 2 shared cores, the peer's exit, the kernel's RST
TIMINGS = {}


def deadline_s(nbytes):
    """How long a sync call may take to fail: MC_TRANSFER_TIMEOUT plus 1 ns per byte."""
    return TIMEOUT_S + nbytes / 1e9


def have_rdma_device():
    d = "/sys/class/infiniband"
    return os.path.isdir(d) and bool(os.listdir(d))


# ------------------------------------------------------------------------ peers

class PeerProc:
    """engine_peer.py in its own process; call(op, **fields) sends one request and returns
    the answer, failing the test (with the peer's stderr) when the peer answers an error,
    dies, or says nothing for `timeout` seconds."""

    def __init__(self, env_extra=None, tag="peer"):
        env = dict(os.environ)
        env.update(env_extra or {})
        self.tag = tag
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen([PY, PEER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, env=env)
        self.pending = b""
        self.name = None

    def stderr_tail(self, n=4000):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-n:]

    def _readline(self, timeout, what):
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.tag}: no answer to {what} within {timeout} s; "
                                     f"stderr:\n{self.stderr_tail()}")
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AssertionError(f"{self.tag} exited ({self.p.wait()}) during {what}; "
                                     f"stderr:\n{self.stderr_tail()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line

    def call(self, op, timeout=60, **kw):
        try:
            self.p.stdin.write((json.dumps({"op": op, **kw}) + "\n").encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            raise AssertionError(f"{self.tag} is gone ({self.p.wait()}) before {op}; "
                                 f"stderr:\n{self.stderr_tail()}") from None
        ans = json.loads(self._readline(timeout, op))
        if not ans.pop("ok", False):
            raise AssertionError(f"{self.tag} {op}: {ans.get('error')}\nstderr:\n"
                                 f"{self.stderr_tail()}")
        return ans

    def init(self, proto="tcp", host=HOST, **kw):
        ans = self.call("init", host=host, meta="P2PHANDSHAKE", proto=proto, dev="", **kw)
        assert ans["rc"] == 0, f"{self.tag}: initialize(... {proto!r}) = {ans['rc']}\n" \
                               f"{self.stderr_tail()}"
        self.name, self.port, self.transport = ans["name"], ans["port"], ans["transport"]
        return self

    def arena(self, aid, size, seed=None, register="batch"):
        """An arena of `size` bytes in the peer, registered whole (batch or single call)."""
        addr = self.call("alloc", id=aid, size=size, seed=seed)["addr"]
        if register == "batch":
            assert self.call("register", addrs=[addr], lens=[size], batch=True)["rc"] == 0
        elif register == "single":
            assert self.call("register", addrs=[addr], lens=[size])["rcs"] == [0]
        return addr

    def verify(self, aid, items, rest_zero=True, what=""):
        bad = self.call("verify", id=aid, items=items, rest_zero=rest_zero,
                        timeout=120)["bad"]
        assert bad == [], f"{self.tag} {aid} {what}: " + "; ".join(bad)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()

    def close(self):
        if self.p.poll() is None:
            try:
                self.call("exit", timeout=20)
            except AssertionError:
                pass
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.err.close()


@pytest.fixture
def peers():
    """Start peers with peers.start(...); every one is stopped after the test."""
    started = []

    class Starter:
        def start(self, proto="tcp", env_extra=None, tag="peer", **kw):
            p = PeerProc(env_extra, tag)
            started.append(p)
            return p.init(proto, **kw)
    yield Starter()
    for p in started:
        if p.p.poll() is None:
            os.kill(p.p.pid, signal.SIGCONT)  # a test that failed while it was stopped
        p.close()


@pytest.fixture(scope="module")
def te():
    """SGLang's shared engine: one per process, protocol tcp, device ""."""
    e = TransferEngine()
    assert e.initialize(HOST, "P2PHANDSHAKE", "tcp", "") == 0
    yield e


def name_of(e):
    return f"{HOST}:{e.get_rpc_port()}"


def local(n, seed=None):
    return Arena(n, seed)


# ------------------------------------------------------------------ (a) API shape

STOCK_METHODS = [
    "initialize", "initialize_ext", "get_rpc_port", "allocate_managed_buffer",
    "free_managed_buffer", "transfer_sync_write", "transfer_sync_read",
    "batch_transfer_sync_write", "batch_transfer_sync_read", "batch_transfer_async_write",
    "batch_transfer_async_read", "transfer_sync", "batch_transfer_sync",
    "batch_transfer_async", "get_batch_transfer_status", "transfer_submit_write",
    "transfer_check_status", "write_bytes_to_buffer", "read_bytes_from_buffer",
    "register_memory", "unregister_memory", "batch_register_memory",
    "batch_unregister_memory", "get_local_topology", "get_first_buffer_address",
    "warmup_efa_segment", "get_notifies", "send_probe", "get_engine", "get_engine_ptr"]
CUDA_METHODS = ["transfer_write_on_cuda", "transfer_read_on_cuda",
                "batch_transfer_write_on_cuda", "batch_transfer_read_on_cuda"]
ONE = ["target_hostname", "buffer", "peer_buffer_address", "length"]
MANY = ["target_hostname", "buffers", "peer_buffer_addresses", "lengths"]
# Stock's pybind11 keyword names and defaults (transfer_engine_py.cpp, PYBIND11_MODULE):
# callers may pass any of these by keyword.
STOCK_SIGNATURES = {
    "transfer_sync_write": (ONE + ["transport_hint"], {"transport_hint": ""}),
    "transfer_sync_read": (ONE + ["transport_hint"], {"transport_hint": ""}),
    "batch_transfer_sync_write": (MANY + ["transport_hint"], {"transport_hint": ""}),
    "batch_transfer_sync_read": (MANY + ["transport_hint"], {"transport_hint": ""}),
    "batch_transfer_async_write": (MANY + ["transport_hint"], {"transport_hint": ""}),
    "batch_transfer_async_read": (MANY + ["transport_hint"], {"transport_hint": ""}),
    "transfer_sync": (ONE + ["opcode", "notify", "transport_hint"],
                      {"notify": None, "transport_hint": ""}),
    "batch_transfer_sync": (MANY + ["opcode", "notify", "transport_hint"],
                            {"notify": None, "transport_hint": ""}),
    "batch_transfer_async": (MANY + ["opcode", "transport_hint"], {"transport_hint": ""}),
    "transfer_submit_write": (ONE + ["transport_hint"], {"transport_hint": ""}),
    "register_memory": (["buffer_addr", "capacity", "location"], {"location": "*"}),
    "batch_register_memory": (["buffer_addresses", "capacities", "location"],
                              {"location": "*"}),
    "get_local_topology": (["device_name"], {"device_name": None}),
    "send_probe": (["peer_server_name"], {}),
    "warmup_efa_segment": (["segment_name"], {}),
}


def test_api_shape_and_local_calls(te, monkeypatch):
    """Names, keyword names and defaults as stock's pybind11 module; the calls that need
    no peer: failures are return codes, never exceptions."""
    missing = [m for m in STOCK_METHODS if not callable(getattr(TransferEngine, m, None))]
    assert missing == [], f"TransferEngine lacks {missing}"
    sig_bad = []
    for m, (names, defaults) in STOCK_SIGNATURES.items():
        ps = list(inspect.signature(getattr(TransferEngine, m)).parameters.values())[1:]
        got = [p.name for p in ps]
        got_def = {p.name: p.default for p in ps if p.default is not inspect.Parameter.empty}
        if got != names or got_def != defaults:
            sig_bad.append(f"{m}{tuple(got)} defaults {got_def}, stock {tuple(names)} "
                           f"defaults {defaults}")
    assert sig_bad == [], "\n".join(sig_bad)

    # TransferOpcode: stock's arithmetic enum, exported at module level, also an attribute
    # of TransferEngine.
    assert int(TransferOpcode.Read) == 0 and int(TransferOpcode.Write) == 1
    assert TransferEngine.TransferOpcode is TransferOpcode
    assert mce.Read == TransferOpcode.Read and mce.Write == TransferOpcode.Write
    n = TransferNotify("room-1", "payload")
    assert (n.name, n.msg) == ("room-1", "payload")
    n.msg = "changed"
    assert n.msg == "changed"
    n2 = TransferNotify(name="a", msg="b")
    assert (n2.name, n2.msg) == ("a", "b")
    assert (TransferNotify().name, TransferNotify().msg) == ("", "")

    port = te.get_rpc_port()
    assert isinstance(port, int) and 0 < port < 65536
    assert isinstance(te.get_engine_ptr(), int) and te.get_engine_ptr() != 0
    assert te.get_engine() is not None
    topo = te.get_local_topology()
    assert isinstance(topo, str)
    json.loads(topo)
    json.loads(te.get_local_topology(""))
    assert te.warmup_efa_segment(name_of(te)) == 0

    # Protocols Tide does not have: -1 (one log line), no exception.
    for proto in ("nvlink", "efa", "ascend", "bogus"):
        assert TransferEngine().initialize(HOST, "P2PHANDSHAKE", proto, "") == -1, proto
    # rdma on a node without an RDMA device, without TIDE_RDMA_AS_TCP: -1.
    if not have_rdma_device():
        monkeypatch.delenv("TIDE_RDMA_AS_TCP", raising=False)
        assert TransferEngine().initialize(HOST, "P2PHANDSHAKE", "rdma", "") == -1
    # initialize_ext with P2PHANDSHAKE (stock ignores metadata_type for it)
    e2 = TransferEngine()
    assert e2.initialize_ext(HOST, "P2PHANDSHAKE", "tcp", "", "P2PHANDSHAKE") == 0
    assert e2.get_rpc_port() > 0 and e2.get_rpc_port() != port

    # Registration: ok, keyword names, location tag, undo; unknown address refused.
    a = local(1 * MiB)
    assert te.register_memory(a.addr, 1 * MiB) == 0
    assert te.unregister_memory(a.addr) == 0
    assert te.register_memory(buffer_addr=a.addr, capacity=1 * MiB, location="cpu:0") == 0
    assert te.unregister_memory(a.addr) == 0
    assert te.unregister_memory(a.addr) != 0  # no longer registered
    bs = [local(64 * KiB) for _ in range(8)]
    assert te.batch_register_memory([b.addr for b in bs], [64 * KiB] * 8) == 0
    assert te.batch_unregister_memory([b.addr for b in bs]) == 0
    assert te.batch_register_memory(buffer_addresses=[b.addr for b in bs],
                                    capacities=[64 * KiB] * 8, location="*") == 0
    assert te.batch_unregister_memory([b.addr for b in bs]) == 0

    # Memory the engine cannot reach: a mapping that was just unmapped.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    hole = libc.mmap(None, 1 * MiB, 3, 0x22, -1, 0)  # PROT_READ|WRITE, PRIVATE|ANONYMOUS
    assert hole not in (None, ctypes.c_void_p(-1).value)
    assert libc.munmap(hole, 1 * MiB) == 0
    assert te.register_memory(hole, 1 * MiB) != 0
    ok = local(64 * KiB)
    assert te.batch_register_memory([ok.addr, hole], [64 * KiB, 1 * MiB]) != 0
    te.unregister_memory(ok.addr)  # whichever way a refused batch left it
    assert te.register_memory(ok.addr, 64 * KiB) == 0  # still usable
    assert te.unregister_memory(ok.addr) == 0

    # Managed buffers: registered, readable and writable through the engine's helpers.
    for size in (4 * KiB, 100 * KiB, 64 * MiB):
        addr = te.allocate_managed_buffer(size)
        assert isinstance(addr, int) and addr != 0, size
        data = pattern(size, size).tobytes()
        assert te.write_bytes_to_buffer(addr, data, size) == 0
        assert te.read_bytes_from_buffer(addr, size) == data
        assert te.free_managed_buffer(addr, size) == 0

    # GPU entry points: one clear error.
    for m in CUDA_METHODS:
        with pytest.raises(Exception) as ei:
            if m.startswith("batch"):
                getattr(te, m)(name_of(te), [a.addr], [a.addr], [16], 0)
            else:
                getattr(te, m)(name_of(te), a.addr, a.addr, 16, 0)
        text = str(ei.value).lower()
        assert "cuda" in text or "gpu" in text, f"{m}: {ei.value!r}"


# ------------------------------------------------------------ (a) failure contract

def test_failure_contract(te, peers):
    """-1 (0 for the async ids), never an exception: unknown peer, unequal lists, a slice
    outside the peer's registered memory, a peer killed in the middle of a batch (within
    MC_TRANSFER_TIMEOUT + 1 ns/B), a stopped peer (the deadline); send_probe non-zero while
    the peer is down and 0 once it is back on the same address; after every failure the
    engine still moves bytes."""
    good = peers.start(tag="good")
    g_main = good.arena("main", 16 * MiB)
    g_scratch = good.arena("scratch", 192 * MiB)
    src = local(64 * MiB, seed=11)
    assert te.register_memory(src.addr, 64 * MiB) == 0
    good_items = []

    def still_usable(seed, what):
        """A 1 MiB + 4 KiB write into good's main arena at a fresh place; every byte
        compared."""
        off = (len(good_items) * 2 + 1) * MiB
        blob = local(1 * MiB + 4 * KiB, seed)
        rc = te.batch_transfer_sync_write(good.name, [blob.addr, blob.addr + MiB],
                                          [g_main + off, g_main + off + MiB],
                                          [1 * MiB, 4 * KiB])
        assert rc == 0, f"after {what}: a good transfer returned {rc}"
        good_items.append({"off": off, "len": MiB + 4 * KiB, "seed": seed})
        good.verify("main", good_items, what=f"after {what}")

    still_usable(100, "start")

    # Unknown peers: nothing listens there.
    t0 = time.monotonic()
    for bad in (f"{HOST}:1", f"{HOST}:{free_port()}"):
        assert te.batch_transfer_sync_write(bad, [src.addr], [src.addr], [4096]) == -1, bad
        assert te.batch_transfer_sync_read(bad, [src.addr], [src.addr], [4096]) == -1, bad
        assert te.transfer_sync_write(bad, src.addr, src.addr, 4096) == -1, bad
        assert te.transfer_sync_read(bad, src.addr, src.addr, 4096) == -1, bad
        assert te.transfer_sync(bad, src.addr, src.addr, 4096, TransferOpcode.Write) == -1
        assert te.batch_transfer_sync(bad, [src.addr], [src.addr], [4096],
                                      TransferOpcode.Read) == -1
        assert te.batch_transfer_async_write(bad, [src.addr], [src.addr], [4096]) == 0
        assert te.transfer_submit_write(bad, src.addr, src.addr, 4096) == 0
        assert te.send_probe(bad) != 0
        assert te.get_first_buffer_address(bad) == 0
    assert time.monotonic() - t0 < 2 * deadline_s(0), "refused peers took a deadline each"
    still_usable(101, "unknown peers")

    # Lists of unequal length: -1 / 0, nothing moves.
    for bufs, dsts, lens in (([src.addr] * 2, [g_scratch], [4096] * 2),
                             ([src.addr], [g_scratch], [4096] * 2),
                             ([src.addr] * 2, [g_scratch] * 2, [4096])):
        assert te.batch_transfer_sync_write(good.name, bufs, dsts, lens) == -1
        assert te.batch_transfer_sync_read(good.name, bufs, dsts, lens) == -1
        assert te.batch_transfer_sync(good.name, bufs, dsts, lens, TransferOpcode.Write) == -1
        assert te.batch_transfer_async_write(good.name, bufs, dsts, lens) == 0
        assert te.batch_transfer_async(good.name, bufs, dsts, lens, TransferOpcode.Read) == 0
    good.verify("scratch", [], what="after the refused unequal lists")
    still_usable(102, "unequal lists")

    # Slices outside what the peer registered: refused (-1), the peer's memory untouched.
    assert te.batch_transfer_sync_write(good.name, [src.addr], [g_main + 16 * MiB - 100],
                                        [4096]) == -1
    assert te.transfer_sync_write(good.name, src.addr, 4096, 4096) == -1
    assert te.batch_transfer_sync_read(good.name, [src.addr], [g_scratch + 192 * MiB],
                                       [1]) == -1
    still_usable(103, "out-of-range slices")

    # A stopped peer (SIGSTOP): nothing completes or fails; each call ends at its deadline
    # (MC_TRANSFER_TIMEOUT + 1 ns/B): the sync batch with -1, get_batch_transfer_status of
    # an async batch with -1, transfer_check_status of a transfer_submit_write with -2;
    # the engine goes on once the peer runs again. Each moves 64 MiB into its own part of
    # scratch, more than the kernel buffers, so none can complete while the peer is stopped.
    n = 64 * MiB
    os.kill(good.p.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        bid = te.transfer_submit_write(good.name, src.addr, g_scratch, n)
        bid2 = te.batch_transfer_async_write(good.name, [src.addr], [g_scratch + n], [n])
        assert bid != 0 and bid2 != 0, (bid, bid2)
        waited = []
        th = threading.Thread(target=lambda: waited.append(
            (te.get_batch_transfer_status([bid2]), time.monotonic() - t0)))
        th.start()
        rc = te.batch_transfer_sync_write(good.name, [src.addr], [g_scratch + 2 * n], [n])
        took = time.monotonic() - t0
        polls = []
        end = t0 + deadline_s(n) + SLACK_S
        while time.monotonic() < end:
            st = te.transfer_check_status(bid)
            polls.append(st)
            if st != 0:
                break
            time.sleep(0.01)
        st_took = time.monotonic() - t0
        th.join(deadline_s(n) + SLACK_S)
    finally:
        os.kill(good.p.pid, signal.SIGCONT)
    TIMINGS["stopped peer: sync -1 after"] = took
    assert rc == -1, f"a stopped peer's batch returned {rc}"
    assert deadline_s(n) - 1.0 <= took <= deadline_s(n) + SLACK_S, \
        f"a stopped peer's batch failed after {took:.2f} s, deadline {deadline_s(n):.2f} s"
    assert polls[-1] == -2 and set(polls[:-1]) <= {0}, \
        f"transfer_check_status on a stopped peer: {polls[-3:]} after {st_took:.2f} s"
    assert deadline_s(n) - 1.0 <= st_took <= deadline_s(n) + SLACK_S, st_took
    assert len(waited) == 1 and waited[0][0] == -1, \
        f"get_batch_transfer_status on a stopped peer: {waited}"
    assert deadline_s(n) - 1.0 <= waited[0][1] <= deadline_s(n) + SLACK_S, waited
    good.call("stats")  # answers again
    still_usable(104, "a stopped peer's deadline")

    # A peer killed in the middle of a batch. Its handshake port is fixed (same name after
    # the restart below) the way stock fixes it: MC_LEGACY_RPC_PORT_BINDING and "ip:port".
    vport = free_port()
    venv = {"MC_LEGACY_RPC_PORT_BINDING": "1"}
    victim = peers.start(tag="victim", env_extra=venv, host=f"{HOST}:{vport}")
    assert victim.name == f"{HOST}:{vport}", victim.name
    v_dst = victim.arena("dst", 64 * MiB)
    assert te.send_probe(victim.name) == 0
    assert te.get_first_buffer_address(victim.name) == v_dst
    # Four threads (Miles' pool), each writing its quarter of dst as 4 x 4 MiB slices per
    # call, over and over; the peer is killed once every thread has finished a call.
    quarter = 16 * MiB
    bufs = [src.addr + i * 4 * MiB for i in range(16)]
    dsts = [v_dst + i * 4 * MiB for i in range(16)]
    calls = [[] for _ in range(4)]  # per thread: (start, end, rc)
    errors = []

    def writer(k):
        sl = slice(4 * k, 4 * k + 4)
        try:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                t = time.monotonic()
                rc = te.batch_transfer_sync_write(victim.name, bufs[sl], dsts[sl],
                                                  [4 * MiB] * 4)
                calls[k].append((t, time.monotonic(), rc))
                if rc != 0:
                    return
        except BaseException as e:  # the contract: never an exception
            errors.append(e)
    ths = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for th in ths:
        th.start()
    deadline = time.monotonic() + 30
    while not all(calls) and time.monotonic() < deadline and all(t.is_alive() for t in ths):
        time.sleep(0.005)
    assert all(c and c[0][2] == 0 for c in calls), \
        f"the first batches to the victim: {[c[:1] for c in calls]} {errors}"
    time.sleep(0.02)
    t_kill = time.monotonic()
    victim.kill()
    for th in ths:
        th.join(max(0.0, t_kill + deadline_s(quarter) + SLACK_S + 5 - time.monotonic()))
    assert not any(th.is_alive() for th in ths), "a batch to a killed peer did not return"
    assert errors == [], f"exception instead of -1: {errors!r}"
    TIMINGS["killed peer: -1 after (slowest of 4 threads)"] = \
        max(c[-1][1] for c in calls) - t_kill
    for k, c in enumerate(calls):
        t_start, t_end, rc = c[-1]
        assert rc == -1, f"thread {k}: {c[-3:]}"
        assert t_end - t_kill <= deadline_s(quarter) + SLACK_S, \
            f"thread {k}: -1 came {t_end - t_kill:.2f} s after the kill"
    assert any(c[-1][0] < t_kill for c in calls), "no failed batch was in flight at the kill"
    still_usable(105, "a peer killed mid-batch")

    # Probe: non-zero while down; 0 once a new process answers on the same address, and
    # transfers go to the new process's memory (its descriptor is fetched again).
    assert te.send_probe(victim.name) != 0
    assert te.batch_transfer_sync_write(victim.name, bufs[:1], dsts[:1], [4 * MiB]) == -1
    bid = te.batch_transfer_async_write(victim.name, bufs[:1], dsts[:1], [4 * MiB])
    assert bid == 0 or te.get_batch_transfer_status([bid]) == -1  # refused now or later
    victim2 = peers.start(tag="victim-restarted", env_extra=venv, host=f"{HOST}:{vport}")
    assert victim2.name == victim.name
    deadline = time.monotonic() + 10
    while te.send_probe(victim2.name) != 0:
        assert time.monotonic() < deadline, "send_probe != 0 10 s after the peer restarted"
        time.sleep(0.05)
    v2 = victim2.arena("dst", 8 * MiB)
    rc = te.batch_transfer_sync_write(victim2.name, [src.addr, src.addr + 5 * MiB],
                                      [v2, v2 + 5 * MiB], [3 * MiB, 1 * MiB])
    assert rc == 0, f"a write to the restarted peer returned {rc}"
    victim2.verify("dst", [{"off": 0, "len": 3 * MiB, "seed": 11, "slen": 64 * MiB},
                           {"off": 5 * MiB, "len": 1 * MiB, "seed": 11, "slen": 64 * MiB,
                            "src": 5 * MiB}], what="after the restart")
    still_usable(106, "the restart")
    assert te.unregister_memory(src.addr) == 0


def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((HOST, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_rpc_port_range(monkeypatch):
    """Stock picks the P2P handshake port in [MC_MIN_RPC_PORT, MC_MAX_RPC_PORT] (default
    15000-17000; firewalls are opened for that range); equal bounds fix it."""
    bad = []
    e = TransferEngine()
    assert e.initialize(HOST, "P2PHANDSHAKE", "tcp", "") == 0
    if not 15000 <= e.get_rpc_port() <= 17000:
        bad.append(f"no MC_*_RPC_PORT: port {e.get_rpc_port()}, not in 15000-17000")
    # Two free neighbours: the range holds the handshake port and, as in stock, the
    # kernel-TCP data port too.
    port = free_port()
    while not port_free(port + 1):
        port = free_port()
    monkeypatch.setenv("MC_MIN_RPC_PORT", str(port))
    monkeypatch.setenv("MC_MAX_RPC_PORT", str(port + 1))
    e2 = TransferEngine()
    assert e2.initialize(HOST, "P2PHANDSHAKE", "tcp", "") == 0
    if e2.get_rpc_port() not in (port, port + 1):
        bad.append(f"MC_MIN_RPC_PORT..MC_MAX_RPC_PORT={port}..{port + 1}: "
                   f"port {e2.get_rpc_port()}")
    # A range with no free port: initialize fails, as stock's does (an engine outside
    # the range the firewall opens would be unreachable).
    monkeypatch.setenv("MC_MIN_RPC_PORT", str(e2.get_rpc_port()))
    monkeypatch.setenv("MC_MAX_RPC_PORT", str(e2.get_rpc_port()))
    e3 = TransferEngine()
    if e3.initialize(HOST, "P2PHANDSHAKE", "tcp", "") != -1:
        bad.append("a range with no free port did not fail initialize")
    assert bad == [], "; ".join(bad)


# ------------------------------------------------------------ (b) Miles P2P weights

def test_miles_p2p_weight_sync(peers, monkeypatch):
    """Miles' trainer (a new engine, initialize(ip, "P2PHANDSHAKE", "rdma", "") with
    TIDE_RDMA_AS_TCP=1), 1,000+ register_memory calls (one per CPU replica parameter,
    4 KiB to 256 MiB, ~390 MiB), two weight updates pushed to two rollout ranks (each
    registered as two large regions) by 4 threads of batch_transfer_sync_write, one call
    per bucket and rank; every byte compared at the ranks after each update."""
    monkeypatch.setenv("TIDE_RDMA_AS_TCP", "1")
    sizes = miles_sizes()
    ranks = 2
    rank_of, offset_of, region = miles_layout(sizes, ranks)
    rollouts, bases = [], []
    for r in range(ranks):
        p = peers.start(proto="rdma", env_extra={"TIDE_RDMA_AS_TCP": "1"}, tag=f"rollout{r}")
        base = p.call("alloc", id="w", size=region[r])["addr"]
        # two merged allocator runs, split at a parameter boundary near the middle
        mine = sorted(offset_of[i] for i in range(len(sizes)) if rank_of[i] == r)
        split = next((o for o in mine if o >= region[r] // 2), mine[-1])
        rcs = p.call("register", addrs=[base, base + split],
                     lens=[split, region[r] - split])["rcs"]
        assert rcs == [0, 0], rcs
        assert p.transport == "tcp-kernel", p.transport  # rdma served over TCP
        rollouts.append(p)
        bases.append(base)
    trainer = TransferEngine()
    assert trainer.initialize(HOST, "P2PHANDSHAKE", "rdma", "") == 0
    params = [numpy.empty(n, dtype=numpy.uint8) for n in sizes]
    seeds = [1000 + i for i in range(len(sizes))]
    for prm, s in zip(params, seeds):
        prm[:] = pattern(s, prm.size)
    t0 = time.monotonic()
    rcs = [trainer.register_memory(prm.ctypes.data, prm.size) for prm in params]
    TIMINGS["miles: register_memory x%d" % len(params)] = time.monotonic() - t0
    assert len(params) >= 1000 and sum(sizes) >= 300 * MiB
    assert [i for i, rc in enumerate(rcs) if rc != 0] == []
    assert time.monotonic() - t0 < 20, "1,000 register_memory calls took over 20 s"
    names = [p.name for p in rollouts]
    for step in (1, 2):
        if step == 2:
            seeds = [5000 + i for i in range(len(sizes))]
            for prm, s in zip(params, seeds):
                prm[:] = pattern(s, prm.size)
        rcs, secs = miles_push(trainer, params, names, bases, rank_of, offset_of, workers=4,
                               bucket_bytes=16 * MiB)
        TIMINGS[f"miles: update {step} ({sum(sizes) >> 20} MiB, {len(rcs)} calls)"] = secs
        assert rcs and all(rc == 0 for rc in rcs), f"update {step}: {rcs}"
        for r, p in enumerate(rollouts):
            p.verify("w", miles_verify_items(sizes, rank_of, offset_of, r, seeds),
                     what=f"update {step}")
    assert trainer.send_probe(names[0]) == 0
    del trainer
    del params


# ------------------------------------------------------------------- (c) SGLang PD

L = 8                  # layers on this rank
P = 16                 # page size (tokens)
HEADS, HEAD_DIM, DT = 8, 64, 2
ROW = HEADS * HEAD_DIM * DT      # 1 KiB per token
ITEM = P * ROW                   # item_len: 16 KiB per page
PAGES = 128
AUX_ROWS = [64, 64, 64, 64, 512, 512, 64, 64, 14336, 64, 128, 256]  # 12 MetadataBuffers
SLOTS = 16


def runs(src_pages, dst_pages):
    """SGLang's page runs: maximal groups consecutive on both sides."""
    out = []
    for s, d in zip(src_pages, dst_pages):
        if out and s == out[-1][0] + out[-1][2] and d == out[-1][1] + out[-1][2]:
            out[-1][2] += 1
        else:
            out.append([s, d, 1])
    return out


def test_sglang_pd(te, peers):
    """SGLang PD on one shared engine (this process = prefill): batch_register_memory of
    the 2L KV buffers and the 12 aux buffers on both sides; per chunk one
    batch_transfer_sync_write of 2L x page-run slices; the TP-mismatch case (2L concurrent
    calls of ~1000 x 256 B slices, twice); the aux call (12 slices of 64 B-14 KB);
    send_probe; transfer_sync / batch_transfer_sync with a TransferNotify and
    get_notifies() at the decode side; RL release/resume: batch_unregister_memory and
    batch_register_memory of the same addresses on both sides (a write while the decode
    side has them unregistered is refused)."""
    dec = peers.start(tag="decode")
    kv_size = PAGES * ITEM
    d_kv = [dec.call("alloc", id=f"kv{i}", size=kv_size)["addr"] for i in range(2 * L)]
    d_aux = [dec.call("alloc", id=f"aux{i}", size=SLOTS * r)["addr"]
             for i, r in enumerate(AUX_ROWS)]
    mm_tokens = 2 * 63 * P
    d_mm = [dec.call("alloc", id=f"mm{i}", size=mm_tokens * 256)["addr"]
            for i in range(2 * L)]
    assert dec.call("register", addrs=d_kv, lens=[kv_size] * (2 * L), batch=True)["rc"] == 0
    assert dec.call("register", addrs=d_aux, lens=[SLOTS * r for r in AUX_ROWS],
                    batch=True)["rc"] == 0
    assert dec.call("register", addrs=d_mm, lens=[mm_tokens * 256] * (2 * L),
                    batch=True)["rc"] == 0

    kv = [local(kv_size, seed=200 + i) for i in range(2 * L)]   # K of all layers, then V
    aux = [local(SLOTS * r, seed=300 + i) for i, r in enumerate(AUX_ROWS)]
    assert te.batch_register_memory([b.addr for b in kv], [kv_size] * (2 * L)) == 0
    assert te.batch_register_memory([b.addr for b in aux],
                                    [SLOTS * r for r in AUX_ROWS]) == 0
    kv_items = [[] for _ in range(2 * L)]

    def send_chunk(src_pages, dst_pages):
        rs = runs(src_pages, dst_pages)
        bufs, dsts, lens = [], [], []
        for i in range(2 * L):
            for s, d, n in rs:
                bufs.append(kv[i].addr + s * ITEM)
                dsts.append(d_kv[i] + d * ITEM)
                lens.append(n * ITEM)
                kv_items[i].append({"off": d * ITEM, "len": n * ITEM, "seed": 200 + i,
                                    "slen": kv_size, "src": s * ITEM})
        return te.batch_transfer_sync_write(dec.name, bufs, dsts, lens), len(bufs)

    def verify_kv(what):
        for i in range(2 * L):
            dec.verify(f"kv{i}", kv_items[i], what=what)

    # A request of 40 pages in two chunks; runs of 10, 15, 15 on both sides.
    src_pages = list(range(10, 20)) + list(range(30, 45)) + list(range(60, 75))
    dst_pages = list(range(3, 13)) + list(range(50, 65)) + list(range(90, 105))
    t0 = time.monotonic()
    for a, b in ((0, 25), (25, 40)):
        rc, nslices = send_chunk(src_pages[a:b], dst_pages[a:b])
        assert rc == 0, f"KV chunk [{a}, {b}) ({nslices} slices): {rc}"
    TIMINGS["sglang: KV, 2 chunks"] = time.monotonic() - t0
    verify_kv("KV chunks")

    # Attention-TP mismatch: decode rank 1 of 4 holds heads 2-3: per layer and K/V one
    # call, one 256 B slice per token (63 pages = 1008 tokens), 2L calls at once, twice.
    hoff = 2 * HEAD_DIM * DT
    mm_items = [[] for _ in range(2 * L)]
    t0 = time.monotonic()
    for req in range(2):
        sp = [(7 * k + 5 * req) % PAGES for k in range(63)]  # prefill pages, scattered
        calls = []
        for i in range(2 * L):
            bufs, dsts = [], []
            for k, page in enumerate(sp):
                dtok0 = (req * 63 + k) * P
                for t in range(P):
                    bufs.append(kv[i].addr + (page * P + t) * ROW + hoff)
                    dsts.append(d_mm[i] + (dtok0 + t) * 256)
                mm_items[i].append({"off": dtok0 * 256, "len": 256, "count": P,
                                    "dstride": 256, "seed": 200 + i, "slen": kv_size,
                                    "src": page * P * ROW + hoff, "sstride": ROW})
            calls.append((dec.name, bufs, dsts, [256] * len(bufs)))
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            rcs = list(pool.map(lambda c: te.batch_transfer_sync_write(*c), calls))
        assert rcs == [0] * (2 * L), f"TP-mismatch request {req}: {rcs}"
    TIMINGS["sglang: TP mismatch, 2 x 16 calls x 1008 x 256 B"] = time.monotonic() - t0
    for i in range(2 * L):
        dec.verify(f"mm{i}", mm_items[i], what="TP mismatch")

    # Last chunk's aux: one call, one slice per aux buffer, prefill slot 5 -> decode slot 9.
    aux_items = [[] for _ in AUX_ROWS]
    bufs = [b.addr + 5 * r for b, r in zip(aux, AUX_ROWS)]
    dsts = [d + 9 * r for d, r in zip(d_aux, AUX_ROWS)]
    assert te.batch_transfer_sync_write(dec.name, bufs, dsts, list(AUX_ROWS)) == 0
    for i, r in enumerate(AUX_ROWS):
        aux_items[i].append({"off": 9 * r, "len": r, "seed": 300 + i, "slen": SLOTS * r,
                             "src": 5 * r})
        dec.verify(f"aux{i}", aux_items[i], what="aux")

    # Probe (the failed-session blacklist's recovery), then notifies.
    assert te.send_probe(dec.name) == 0
    assert dec.call("notifies")["list"] == []
    rc = te.transfer_sync(dec.name, kv[0].addr + 100 * ITEM, d_kv[0] + 106 * ITEM, ITEM,
                          TransferOpcode.Write, TransferNotify("room-42", "kv-done"))
    assert rc == 0
    kv_items[0].append({"off": 106 * ITEM, "len": ITEM, "seed": 200, "slen": kv_size,
                        "src": 100 * ITEM})
    rc = te.batch_transfer_sync(dec.name, [aux[0].addr, aux[1].addr],
                                [d_aux[0] + 2 * 64, d_aux[1] + 2 * 64], [64, 64],
                                TransferOpcode.Write, notify=TransferNotify("room-43", "aux"))
    assert rc == 0
    aux_items[0].append({"off": 128, "len": 64, "seed": 300, "slen": SLOTS * 64})
    aux_items[1].append({"off": 128, "len": 64, "seed": 301, "slen": SLOTS * 64})
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        got += dec.call("notifies")["list"]
        time.sleep(0.02)
    assert sorted(got) == [["room-42", "kv-done"], ["room-43", "aux"]], got
    assert dec.call("notifies")["list"] == []  # taken
    # A read with a notify (opcode Read): bytes come back, the notify goes.
    back = local(ITEM)
    assert te.transfer_sync(dec.name, back.addr, d_kv[0] + 106 * ITEM, ITEM,
                            TransferOpcode.Read, TransferNotify("room-44", "")) == 0
    assert bytes(back.a) == bytes(kv[0].a[100 * ITEM:101 * ITEM])
    deadline = time.monotonic() + 10
    got = []
    while not got and time.monotonic() < deadline:
        got = dec.call("notifies")["list"]
        time.sleep(0.02)
    assert got == [["room-44", ""]]
    verify_kv("after the notifies")
    for i in (0, 1):
        dec.verify(f"aux{i}", aux_items[i], what="after the notifies")

    # RL memory release/resume, both sides, same addresses.
    mine = [b.addr for b in kv] + [b.addr for b in aux]
    assert te.batch_unregister_memory(mine) == 0
    assert dec.call("unregister", addrs=d_kv, batch=True)["rc"] == 0
    rc = te.batch_transfer_sync_write(dec.name, [kv[0].addr], [d_kv[0] + 125 * ITEM], [ITEM])
    assert rc == -1, f"a write into memory the decode side unregistered returned {rc}"
    assert dec.call("register", addrs=d_kv, lens=[kv_size] * (2 * L), batch=True)["rc"] == 0
    assert te.batch_register_memory(mine, [kv_size] * (2 * L) +
                                    [SLOTS * r for r in AUX_ROWS]) == 0
    rc, _ = send_chunk(list(range(110, 118)), list(range(110, 118)))
    assert rc == 0, f"KV after re-registration: {rc}"
    verify_kv("after re-registration")
    assert te.batch_unregister_memory(mine) == 0


def test_sglang_epd_peer_registers_late(te, peers):
    """SGLang encoder disaggregation on the shared engine: the receiver registers a buffer
    per embedding and sends its address; the sender (whose engine opened the receiver's
    segment earlier) registers its source, transfer_sync_write (one slice), unregisters.
    A buffer the peer registered after its descriptor was fetched must be writable (stock:
    TCP does not check, RDMA fetches the descriptor again)."""
    enc = peers.start(tag="embedding-receiver")
    first = enc.arena("first", 64 * KiB, register="single")
    one = local(64 * KiB, seed=351)
    assert te.transfer_sync_write(enc.name, one.addr, first, 64 * KiB) == 0
    for k in range(3):
        emb_n = 3 * MiB + 512 * (k + 1)
        d_emb = enc.arena(f"emb{k}", emb_n, register="single")
        emb = local(emb_n, seed=350 + 10 * k)
        assert te.register_memory(emb.addr, emb_n) == 0
        rc = te.transfer_sync_write(enc.name, emb.addr, d_emb, emb_n)
        assert rc == 0, f"embedding {k}: a write into a buffer the peer registered after " \
                        f"this engine opened it returned {rc}"
        assert te.unregister_memory(emb.addr) == 0
        enc.verify(f"emb{k}", [{"off": 0, "len": emb_n, "seed": 350 + 10 * k}],
                   what=f"embedding {k}")
    enc.verify("first", [{"off": 0, "len": 64 * KiB, "seed": 351}])


# ------------------------------------------------------------------- (d) vLLM

def test_vllm_connector(te, peers):
    """vLLM MooncakeConnector: batch_register_memory of 2L region tensors on both sides;
    20 rounds on a 10-thread pool, each one batch_transfer_sync_write of regions x
    coalesced block runs; then the async sequence: batch_transfer_async_write +
    get_batch_transfer_status, batch_transfer_async(opcode) and
    batch_transfer_async_read, transfer_submit_write + transfer_check_status polled to a
    deadline; the sync reads; every byte compared. The sync call releases the GIL."""
    dec = peers.start(tag="vllm-decode")
    nblocks, blen = 64, P * ROW
    rsize = nblocks * blen
    regions = 2 * L
    d_reg = [dec.call("alloc", id=f"r{i}", size=rsize)["addr"] for i in range(regions)]
    assert dec.call("register", addrs=d_reg, lens=[rsize] * regions, batch=True)["rc"] == 0
    d_big = dec.arena("big", 64 * MiB)
    src = [local(rsize, seed=400 + i) for i in range(regions)]
    assert te.batch_register_memory([s.addr for s in src], [rsize] * regions) == 0
    items = [[] for _ in range(regions)]

    def add(i, sblk, dblk, n):
        items[i].append({"off": dblk * blen, "len": n * blen, "seed": 400 + i,
                         "slen": rsize, "src": sblk * blen})

    rounds = []
    for k in range(20):  # 3 decode blocks per round: 0..59; prefill blocks scattered
        sblocks = [(5 * k) % nblocks, (5 * k + 1) % nblocks, (5 * k + 9) % nblocks]
        dblocks = [3 * k, 3 * k + 1, 3 * k + 2]
        bufs, dsts, lens = [], [], []
        for i in range(regions):
            for s, d, n in runs(sblocks, dblocks):
                bufs.append(src[i].addr + s * blen)
                dsts.append(d_reg[i] + d * blen)
                lens.append(n * blen)
                add(i, s, d, n)
        rounds.append((dec.name, bufs, dsts, lens))
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        rcs = list(pool.map(lambda c: te.batch_transfer_sync_write(*c), rounds))
    TIMINGS["vllm: 20 rounds on 10 threads"] = time.monotonic() - t0
    assert rcs == [0] * 20, rcs

    # The GIL is released during a sync call: another Python thread keeps running.
    big = local(64 * MiB, seed=7)
    ticks = [0]
    done = threading.Event()
    res = []

    def bg():
        res.append(te.batch_transfer_sync_write(dec.name, [big.addr], [d_big], [64 * MiB]))
        done.set()
    th = threading.Thread(target=bg)
    t0 = time.monotonic()
    th.start()
    while not done.is_set():
        ticks[0] += 1
    th.join()
    took = time.monotonic() - t0
    assert res == [0]
    assert ticks[0] > 1000 or took < 0.05, \
        f"the main thread ran {ticks[0]} loops in the {took:.3f} s of a sync call"
    dec.verify("big", [{"off": 0, "len": 64 * MiB, "seed": 7}], what="GIL check")

    # Async: blocks 60-61 by batch_transfer_async_write, 62 by batch_transfer_async(Write),
    # both waited with one get_batch_transfer_status; block 63 of region 0 by
    # transfer_submit_write, polled with transfer_check_status.
    def block_lists(blk, sblk):
        b, d, n = [], [], []
        for i in range(regions):
            b.append(src[i].addr + sblk * blen)
            d.append(d_reg[i] + blk * blen)
            n.append(blen)
            add(i, sblk, blk, 1)
        return b, d, n
    b1 = block_lists(60, 7)
    id1 = te.batch_transfer_async_write(dec.name, *b1)
    b2 = block_lists(61, 8)
    id1b = te.batch_transfer_async_write(dec.name, *b2)
    b3 = block_lists(62, 9)
    id2 = te.batch_transfer_async(dec.name, *b3, TransferOpcode.Write)
    assert 0 not in (id1, id1b, id2), (id1, id1b, id2)
    assert te.get_batch_transfer_status([id1, id1b, id2]) == 0
    bid = te.transfer_submit_write(dec.name, src[0].addr + 11 * blen, d_reg[0] + 63 * blen,
                                   blen)
    assert bid != 0
    add(0, 11, 63, 1)
    deadline = time.monotonic() + deadline_s(blen)
    while True:
        st = te.transfer_check_status(bid)
        if st != 0 or time.monotonic() > deadline:
            break
        time.sleep(0.001)
    assert st == 1, f"transfer_check_status = {st}"
    for i in range(regions):
        dec.verify(f"r{i}", items[i], what="rounds + async")

    # Reads back: sync (batch and single) and async, compared with what was sent.
    back = local(3 * blen)
    assert te.batch_transfer_sync_read(dec.name, [back.addr, back.addr + blen],
                                       [d_reg[1] + 60 * blen, d_reg[1]], [blen, blen]) == 0
    assert te.transfer_sync_read(dec.name, back.addr + 2 * blen, d_reg[2] + 62 * blen,
                                 blen) == 0
    want = numpy.concatenate([src[1].a[7 * blen:8 * blen], src[1].a[0:blen],
                              src[2].a[9 * blen:10 * blen]])
    assert numpy.array_equal(back.a, want)
    back.a[:] = 0
    rid = te.batch_transfer_async_read(dec.name, [back.addr], [d_reg[3] + 61 * blen], [blen])
    rid2 = te.batch_transfer_async(dec.name, [back.addr + blen], [d_reg[3] + 60 * blen],
                                   [blen], TransferOpcode.Read)
    assert 0 not in (rid, rid2)
    assert te.get_batch_transfer_status([rid, rid2]) == 0
    assert numpy.array_equal(back.a[:blen], src[3].a[8 * blen:9 * blen])
    assert numpy.array_equal(back.a[blen:2 * blen], src[3].a[7 * blen:8 * blen])
    # keyword names, as a caller may pass them
    assert te.batch_transfer_sync_write(target_hostname=dec.name, buffers=[src[4].addr],
                                        peer_buffer_addresses=[d_reg[4] + 63 * blen],
                                        lengths=[blen], transport_hint="") == 0
    add(4, 0, 63, 1)
    dec.verify("r4", items[4], what="keyword call")
    assert te.batch_unregister_memory([s.addr for s in src]) == 0


# ---------------------------------------------------- (e) the store sharing the engine

def test_store_shares_the_engine():
    """SGLang HiCache with the shared TE: setup(local_hostname="ip:port" of the engine,
    ..., engine=te.get_engine()) (keyword), and a second pair with the engine as the 8th
    positional argument; the store's segment is the engine's (same name); put/get,
    batch_put_from/batch_get_into, SGLang's warm-up; the engine still transfers while the
    store uses it and after the store closed."""
    from mooncake.store import MooncakeDistributedStore
    master, maddr = start_master(extra=["--eviction_ratio=0"])
    stores = []
    try:
        ea, eb = TransferEngine(), TransferEngine()
        assert ea.initialize(HOST, "P2PHANDSHAKE", "tcp", "") == 0
        assert eb.initialize(HOST, "P2PHANDSHAKE", "tcp", "") == 0
        na, nb = name_of(ea), name_of(eb)
        tgt, blob = local(2 * MiB), local(2 * MiB, seed=61)
        assert eb.register_memory(tgt.addr, 2 * MiB) == 0  # for ea's own transfers below
        a, b = MooncakeDistributedStore(), MooncakeDistributedStore()
        stores += [a, b]
        assert a.setup(na, "P2PHANDSHAKE", 64 * MiB, 16 * MiB, "tcp", "", maddr,
                       engine=ea.get_engine()) == 0
        assert b.setup(nb, "P2PHANDSHAKE", 64 * MiB, 16 * MiB, "tcp", "", maddr,
                       eb.get_engine()) == 0
        assert a.get_hostname() == na and b.get_hostname() == nb
        # SGLang's warm-up
        key = "sglang_mooncake_store_warmup_key" + uuid.uuid4().hex
        assert a.put(key, bytes(4096)) == 0
        assert a.is_exist(key) == 1 and b.is_exist(key) == 1
        assert b.get(key) == bytes(4096)
        for i, n in enumerate((1, 4096, 3 * MiB + 17)):
            data = pattern(50 + i, n).tobytes()
            assert a.put(f"a-{i}", data) == 0
            assert b.get(f"a-{i}") == data
            assert b.put(f"b-{i}", data[::-1]) == 0
            assert a.get(f"b-{i}") == data[::-1]
        # zero-copy batch calls from buffers registered with the store
        n = 256 * KiB
        sbuf, dbuf = local(8 * n, seed=60), local(8 * n)
        assert a.register_buffer(sbuf.addr, 8 * n) == 0
        assert b.register_buffer(dbuf.addr, 8 * n) == 0
        keys = [f"page-{i}" for i in range(8)]
        assert a.batch_put_from(keys, [sbuf.addr + i * n for i in range(8)], [n] * 8) == [0] * 8
        assert b.batch_get_into(keys, [dbuf.addr + i * n for i in range(8)], [n] * 8) == [n] * 8
        assert numpy.array_equal(sbuf.a, dbuf.a)
        # the engine itself, while the store uses it: ea writes into memory eb registered
        assert ea.batch_transfer_sync_write(nb, [blob.addr], [tgt.addr], [2 * MiB]) == 0
        assert numpy.array_equal(tgt.a, blob.a)
        assert ea.send_probe(nb) == 0
        for k in keys:
            assert a.remove(k, force=True) == 0
        assert a.unregister_buffer(sbuf.addr) == 0 and b.unregister_buffer(dbuf.addr) == 0
        assert a.close() == 0
        tgt.a[:] = 0
        assert ea.batch_transfer_sync_write(nb, [blob.addr], [tgt.addr], [2 * MiB]) == 0, \
            "the shared engine stopped working when the store closed"
        assert numpy.array_equal(tgt.a, blob.a)
        assert eb.unregister_memory(tgt.addr) == 0
    finally:
        for s in stores:
            s.close()
        master.terminate()
        master.wait(timeout=10)


def test_zz_timings():
    """Not a check: the timings measured above (shown with pytest -s)."""
    for k, v in TIMINGS.items():
        print(f"  {k}: {v:.2f} s")
