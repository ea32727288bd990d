"""`mooncake.engine`: Mooncake's TransferEngine API over Tide's transfer engine (the C
engine of engine/te/tide_te.h, in the same libtidestore.so as mooncake.store).

Same names, signatures, return codes and threading as stock Mooncake's pybind11
module, so SGLang's PD backend, vLLM's MooncakeConnector and Miles' P2P weight sync
run unchanged:

  TransferEngine: initialize, initialize_ext, get_rpc_port, register_memory,
    unregister_memory, batch_register_memory, batch_unregister_memory,
    transfer_sync_write/read, transfer_sync, batch_transfer_sync_write/read,
    batch_transfer_sync, batch_transfer_async_write/read, batch_transfer_async,
    get_batch_transfer_status, transfer_submit_write, transfer_check_status,
    allocate_managed_buffer, free_managed_buffer, write_bytes_to_buffer,
    read_bytes_from_buffer, get_first_buffer_address, get_local_topology,
    get_notifies, send_probe, get_engine, get_engine_ptr, warmup_efa_segment.
  TransferOpcode (Read, Write), TransferNotify(name, msg), InnerTransferEngine.

Protocols: "tcp" (Tide's user-space TCP when the node file names a DPDK device, kernel
sockets otherwise) and "rdma". On a node without an RDMA device "rdma" fails, as in
stock, unless the node file (or environment) sets TIDE_RDMA_AS_TCP=1: then the engine
serves it over TCP and says so once. Metadata: "P2PHANDSHAKE", "http://...", and etcd
("etcd://h:p" or a bare "h:p", as stock reads a string without a scheme).

Return codes, as stock's: transfers return 0 or -1 (never raise for a peer that cannot
be opened, lists of unequal length, a failed slice or a passed deadline); async
submissions return a batch id, 0 on failure; transfer_check_status 1 done, 0 pending,
-1 failed, -2 timed out; registration 0, -1 (bad argument, including memory this
process has not mapped: a device pointer) or -7 (overlaps a registered buffer).
The deadline of a synchronous transfer is MC_TRANSFER_TIMEOUT seconds (default 30,
at least 5) plus 1 ns per byte, read when the TransferEngine is created.

Threading: every method may be called from any thread at once; every call into the
engine releases the GIL (ctypes), so a pool of threads transfers in parallel.

No GPU path: the *_on_cuda methods raise RuntimeError, and memory the engine cannot
reach (not mapped in this process) is refused at registration.
"""
import array
import ctypes
import enum
import errno as _E
import json
import os
import sys
import threading
import time
import weakref

from mooncake._native import abi as _abi, lib as _lib

__all__ = ["TransferEngine", "TransferOpcode", "TransferNotify", "InnerTransferEngine"]

SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False
SUPPORT_INTRA_NVLINK = False

_vp = ctypes.c_void_p
_cp = ctypes.c_char_p
_u64 = ctypes.c_uint64
_P = ctypes.POINTER


# struct tide_te_opts (its first field is its size: the C side copies only the bytes a
# binding declares, so an older binding stays safe against a longer struct) and struct
# tide_te_notify, as the build declared them from tide_te.h.
_Opts = _abi.tide_te_opts
_Notify = _abi.tide_te_notify

_libc = ctypes.CDLL(None)
_libc.malloc.restype = _vp
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.restype = None
_libc.free.argtypes = [_vp]

# Stock's error codes (mooncake-transfer-engine/include/error.h) where stock returns one.
_ERR_INVALID_ARGUMENT = -1
_ERR_ADDRESS_OVERLAPPED = -7

_TE_READ, _TE_WRITE = _abi.TIDE_TE_READ, _abi.TIDE_TE_WRITE
_INT_MAX = (1 << 31) - 1
_TE_MAX_REQS = 1 << 20  # requests per batch (TE_MAX_REQS in te_engine.c)
_P2P = "P2PHANDSHAKE"

# allocate_managed_buffer's size classes, as stock's: 8 KiB .. 256 MiB, each class
# split from the next larger one; larger requests get a buffer of their own.
_SLAB_KB = [8 << i for i in range(16)]
_CHUNK = _SLAB_KB[-1] << 10


def _warn(msg):
    print(f"mooncake.engine: {msg}", file=sys.stderr)


def _errstr(rc):
    return _lib.tide_te_strerror(rc).decode(errors="replace")


class TransferOpcode(enum.IntEnum):
    """Read: remote -> local; Write: local -> remote (stock's TransferOpcode)."""
    Read = 0
    Write = 1


# pybind11's export_values(): the values at module level too.
Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """A notification sent to the peer after a transfer (stock's TransferNotify)."""

    __slots__ = ("name", "msg")

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __repr__(self):
        return f"TransferNotify(name={self.name!r}, msg={self.msg!r})"


class InnerTransferEngine:
    """What get_engine() returns: the engine as an opaque handle, for
    MooncakeDistributedStore.setup(..., engine=...) so the store runs on this engine.
    It keeps its TransferEngine alive."""

    __slots__ = ("_owner", "__weakref__")

    def __init__(self, owner):
        self._owner = owner

    def _ptr(self):
        return self._owner._te

    def _add_user(self, close):
        """A store runs on this engine: close (a bound method, held weakly) is called
        before the engine goes."""
        self._owner._state["users"].append(weakref.WeakMethod(close))

    def _remove_user(self, close):
        users = self._owner._state["users"]
        users[:] = [r for r in users if r() is not None and r() != close]


def _u64_array(values, what):
    """A C uint64_t array of an int sequence, built through array.array (about 4x
    faster than ctypes' constructor at batch 1024); TypeError/OverflowError name it."""
    try:
        a = array.array("Q", values)
    except TypeError:
        raise TypeError(f"{what}: expected a sequence of ints") from None
    except OverflowError:
        raise OverflowError(f"{what}: a value is negative or above 2**64-1") from None
    if not a:
        return (_u64 * 0)()
    return (_u64 * len(a)).from_buffer(a)


def _destroy(state):
    """Engine teardown (weakref.finalize: runs once, at GC or interpreter exit). Stores
    set up on this engine (setup(engine=...)) are closed first: at exit the finalizer
    runs before their own teardown, which would otherwise reach a freed engine."""
    for ref in list(state.get("users", ())):
        close = ref()  # weak: a store that is gone already gave its registrations back
        if close is None:
            continue
        try:
            close()
        except Exception:  # a store that cannot close must not keep the engine alive
            pass
    state["users"] = []
    te = state.get("te")
    if te:
        state["te"] = None
        _lib.tide_te_destroy(te)
    for p in list(state.get("chunks", ())) + list(state.get("large", ())):
        _libc.free(p)
    state["chunks"] = []
    state["large"] = set()


class TransferEngine:
    """Mooncake's TransferEngine (mooncake.engine) on Tide's engine."""

    TransferOpcode = TransferOpcode

    def __init__(self):
        t = os.environ.get("MC_TRANSFER_TIMEOUT")
        try:
            secs = max(5, int(t)) if t else 30
        except ValueError:
            _warn(f"MC_TRANSFER_TIMEOUT={t!r} is not an integer; using 30 s")
            secs = 30
        self._timeout_ns = secs * 1_000_000_000
        self._lock = threading.Lock()      # segment cache, async table, managed buffers
        self._state = {"te": None, "chunks": [], "large": set(), "users": []}
        self._fin = weakref.finalize(self, _destroy, self._state)
        self._segs = {}                    # peer name -> segment handle
        self._opening = {}                 # peer name -> lock of the thread opening it
        self._async = {}                   # batch id -> deadline (monotonic ns)
        self._free = [[] for _ in _SLAB_KB]  # per class: free block addresses
        self._large = self._state["large"]  # managed buffers above the largest class
        self._given = {}                   # managed block address -> its size class

    @property
    def _te(self):
        return self._state["te"]

    # ---- set-up -------------------------------------------------------------------

    def initialize(self, local_hostname, metadata_server, protocol, device_name):
        """Start the engine: 0, or -1 (the reason is logged)."""
        meta = str(metadata_server)
        return self._init(local_hostname, meta, protocol, device_name)

    def initialize_ext(self, local_hostname, metadata_server, protocol, device_name,
                       metadata_type):
        """initialize() with the metadata scheme given apart ("http", "etcd")."""
        meta = str(metadata_server)
        if meta != _P2P and "://" not in meta:
            meta = f"{metadata_type}://{meta}"
        return self._init(local_hostname, meta, protocol, device_name)

    def _init(self, local_hostname, meta, protocol, device_name):
        if self._te is not None:
            _warn("initialize: this TransferEngine is already initialized; create another")
            return -1
        proto = str(protocol or "")
        if proto not in ("tcp", "rdma"):
            _warn(f"initialize: protocol {proto!r} is not supported by Tide; use 'tcp' or "
                  "'rdma'")
            return -1
        host, port = _split_host(str(local_hostname or ""))
        o = _Opts()
        _lib.tide_te_opts_init(ctypes.byref(o), ctypes.sizeof(o))
        o.metadata = meta.encode()
        # Stock names itself host:rpc_port in P2P mode and local_hostname otherwise; the
        # port of local_hostname binds the handshake daemon only with its legacy switch.
        o.local_server_name = None if meta == _P2P else str(local_hostname).encode()
        o.host = host.encode() if host else None
        if port and os.environ.get("MC_LEGACY_RPC_PORT_BINDING"):
            o.rpc_port = port
        devices = str(device_name or "").strip()
        o.rdma_devices = devices.encode() if devices else None
        # A request with no progress for MC_TRANSFER_TIMEOUT ends TIMEOUT in the engine
        # (what transfer_check_status reports as -2, and what bounds an async batch).
        o.io_timeout_ms = min(_INT_MAX, self._timeout_ns // 1_000_000)
        te = _vp()
        rc = _lib.tide_te_create(ctypes.byref(o), ctypes.byref(te))
        if rc != 0:
            _warn(f"initialize: engine start failed: {_errstr(rc)} (the line above says why)")
            return -1
        rc = _lib.tide_te_install_transport(te, proto.encode())
        if rc != 0:
            _lib.tide_te_destroy(te)
            if rc != -_E.EPROTONOSUPPORT:  # that one was explained by the engine
                _warn(f"initialize: protocol {proto}: {_errstr(rc)}")
            return -1
        self._state["te"] = te.value
        return 0

    def get_rpc_port(self):
        """The handshake daemon's port; peers name this engine "host:port" (P2P)."""
        te = self._te
        if te is None:
            return -1
        port = ctypes.c_uint16()
        _lib.tide_te_local_addr(te, None, 0, ctypes.byref(port), None)
        return port.value

    def get_engine(self):
        return InnerTransferEngine(self)

    def get_engine_ptr(self):
        return self._te or 0

    def get_local_topology(self, device_name=None):
        """This node's topology as stock prints it: {"cpu:N": [[preferred RDMA devices],
        [other RDMA devices]]} per NUMA node, from sysfs (no device: empty lists)."""
        want = {d for d in str(device_name or "").split(",") if d}
        nodes = sorted(int(n[4:]) for n in _listdir("/sys/devices/system/node")
                       if n.startswith("node") and n[4:].isdigit()) or [0]
        near = {n: [] for n in nodes}
        devs = [d for d in sorted(_listdir("/sys/class/infiniband")) if not want or d in want]
        for d in devs:
            try:
                with open(f"/sys/class/infiniband/{d}/device/numa_node") as f:
                    n = int(f.read().strip())
            except (OSError, ValueError):
                n = -1
            near.setdefault(n if n >= 0 else nodes[0], []).append(d)
        topo = {f"cpu:{n}": [near.get(n, []), [d for d in devs if d not in near.get(n, [])]]
                for n in nodes}
        return json.dumps(topo)

    # ---- memory -------------------------------------------------------------------

    def register_memory(self, buffer_addr, capacity, location="*"):
        """Make [buffer_addr, +capacity) readable and writable by peers: 0, -1, -7."""
        te = self._te
        if te is None:
            return _ERR_INVALID_ARGUMENT
        rc = _lib.tide_te_register(te, int(buffer_addr), int(capacity),
                                   str(location).encode())
        if rc == -_E.EEXIST:
            return _ERR_ADDRESS_OVERLAPPED
        if rc not in (0, -_E.EINVAL, -_E.EFAULT, -_E.ENOMEM):
            # Registered here but not published (HTTP or etcd metadata failed): undo it,
            # so a failed call leaves nothing behind, as the caller will assume.
            _lib.tide_te_unregister(te, int(buffer_addr))
        return 0 if rc == 0 else _ERR_INVALID_ARGUMENT

    def unregister_memory(self, buffer_addr):
        te = self._te
        if te is None:
            return _ERR_INVALID_ARGUMENT
        return 0 if _lib.tide_te_unregister(te, int(buffer_addr)) == 0 else _ERR_INVALID_ARGUMENT

    def batch_register_memory(self, buffer_addresses, capacities, location="*"):
        """register_memory of each pair; on a failure the ones registered here are undone."""
        if len(buffer_addresses) != len(capacities):
            return _ERR_INVALID_ARGUMENT
        done = []
        for a, n in zip(buffer_addresses, capacities):
            rc = self.register_memory(a, n, location)
            if rc != 0:
                for d in done:
                    self.unregister_memory(d)
                return rc
            done.append(a)
        return 0

    def batch_unregister_memory(self, buffer_addresses):
        rc = 0
        for a in buffer_addresses:
            r = self.unregister_memory(a)
            rc = rc or r
        return rc

    def allocate_managed_buffer(self, length):
        """A registered buffer of at least length bytes from the engine's pool; 0 on
        failure. Give it back with free_managed_buffer(addr, length)."""
        length = int(length)
        cls = _class_of(length)
        with self._lock:
            if cls < 0:
                p = self._raw_buffer(length)
                if p:
                    self._large.add(p)
                return p
            if not self._free[cls] and not self._split(cls):
                return 0
            p = self._free[cls].pop()
            self._given[p] = cls
            return p

    def free_managed_buffer(self, buffer_addr, length):
        addr, cls = int(buffer_addr), _class_of(int(length))
        with self._lock:
            if self._te is None:
                return _ERR_INVALID_ARGUMENT
            if cls < 0:
                if addr not in self._large:
                    return _ERR_INVALID_ARGUMENT
                self._large.discard(addr)
                _lib.tide_te_unregister(self._te, addr)
                _libc.free(addr)
                return 0
            if self._given.pop(addr, None) != cls:
                # Not handed out by allocate_managed_buffer, already freed, or freed with
                # another size class: refusing keeps two callers off one block.
                return _ERR_INVALID_ARGUMENT
            self._free[cls].append(addr)
        return 0

    def _raw_buffer(self, n):
        te = self._te
        if te is None:
            return 0
        p = _libc.malloc(n)
        if not p:
            return 0
        if self.register_memory(p, n) != 0:  # leaves nothing registered on failure
            _libc.free(p)
            return 0
        return p

    def _split(self, cls):
        """Refill class cls from the next larger class (a new chunk at the top). Lock held."""
        if cls == len(_SLAB_KB) - 1:
            p = self._raw_buffer(_CHUNK)
            if not p:
                return False
            self._state["chunks"].append(p)
            self._free[cls].append(p)
            return True
        if not self._free[cls + 1] and not self._split(cls + 1):
            return False
        p = self._free[cls + 1].pop()
        self._free[cls] += [p + (_SLAB_KB[cls] << 10), p]
        return True

    def write_bytes_to_buffer(self, dest_address, src_ptr, length):
        """Copy `length` bytes of src_ptr (bytes, bytearray, memoryview or str) to
        dest_address; ValueError when src_ptr is shorter (stock would read past it)."""
        src = src_ptr.encode() if isinstance(src_ptr, str) else src_ptr
        n = int(length)
        if isinstance(src, int) or len(memoryview(src).cast("B")) < n:
            raise ValueError(f"write_bytes_to_buffer: source shorter than length {n}")
        if isinstance(src, bytes):
            ctypes.memmove(int(dest_address), src, n)
        else:
            ctypes.memmove(int(dest_address), (ctypes.c_char * n).from_buffer_copy(
                memoryview(src).cast("B")[:n]), n)
        return 0

    def read_bytes_from_buffer(self, source_address, length):
        return ctypes.string_at(int(source_address), int(length))

    def get_first_buffer_address(self, segment_name):
        """Address of the first buffer the named engine registered; 0 if none."""
        seg = self._segment(str(segment_name))
        if seg is None:
            return 0
        a, n = _u64(), _u64()
        if _lib.tide_te_segment_buffer(self._te, seg, 0, ctypes.byref(a), ctypes.byref(n)) != 0:
            return 0
        return a.value

    # ---- transfers ----------------------------------------------------------------

    def _segment(self, name):
        """The open segment of peer `name` (opened once, then cached); None on failure.
        One opener per name at a time (as stock opens under its lock): the others wait
        for its result instead of racing it for a half-opened slot."""
        te = self._te
        if te is None:
            return None
        with self._lock:
            seg = self._segs.get(name)
            if seg is not None:
                return seg
            opening = self._opening.setdefault(name, threading.Lock())
        with opening:
            with self._lock:
                seg = self._segs.get(name)
            if seg is not None:
                return seg
            h = ctypes.c_int64()
            rc = _lib.tide_te_open_segment(te, name.encode(), ctypes.byref(h))
            with self._lock:
                self._opening.pop(name, None)
                if rc == 0:
                    self._segs[name] = h.value
        if rc != 0:
            _warn(f"cannot open segment {name!r}: {_errstr(rc)}")
            return None
        return h.value

    def _forget(self, name, seg, rc):
        """After a failure that says the handle is gone (closed, or no longer the
        peer's), drop it from the cache so the next call opens the peer again."""
        if rc not in (-_E.ECANCELED, -_E.EINVAL, -_E.ENOENT):
            return
        with self._lock:
            if self._segs.get(name) == seg:
                del self._segs[name]

    def _arrays(self, buffers, peer_buffer_addresses, lengths):
        if not (len(buffers) == len(peer_buffer_addresses) == len(lengths)):
            _warn("buffers, peer_buffer_addresses and lengths have different sizes")
            return None
        if len(buffers) > _TE_MAX_REQS:
            _warn(f"{len(buffers)} slices in one batch; at most {_TE_MAX_REQS}")
            return None
        try:
            return (_u64_array(buffers, "buffers"),
                    _u64_array(peer_buffer_addresses, "peer_buffer_addresses"),
                    _u64_array(lengths, "lengths"))
        except (TypeError, OverflowError) as e:
            _warn(str(e))
            return None

    def _timeout_ms(self, total):
        """The deadline of a call moving `total` bytes, in ms, clamped to a C int."""
        return min(_INT_MAX, int((self._timeout_ns + total) // 1_000_000) + 1)

    def _sync(self, target, arrays, opcode, notify):
        te = self._te
        if te is None or arrays is None:
            return -1
        src, dst, lens = arrays
        n = len(src)
        if n == 0:
            return 0
        seg = self._segment(str(target))
        if seg is None:
            return -1
        op = _TE_READ if int(opcode) == TransferOpcode.Read else _TE_WRITE
        rc = _lib.tide_te_transfer_sync(te, seg, op, src, dst, lens, n,
                                        self._timeout_ms(sum(lens)))
        if rc != 0:
            self._forget(str(target), seg, rc)
            _warn(f"transfer to {target}: {_errstr(rc)}"
                  + (" (MC_TRANSFER_TIMEOUT)" if rc == -_E.ETIMEDOUT else ""))
            return -1
        if notify is not None:
            # As stock: the transfer succeeded; a notify that cannot be delivered is
            # only reported.
            r = _lib.tide_te_notify(te, str(target).encode(), str(notify.name).encode(),
                                    str(notify.msg).encode())
            if r != 0:
                _warn(f"notify to {target}: {_errstr(r)}")
        return 0

    def transfer_sync_write(self, target_hostname, buffer, peer_buffer_address, length,
                            transport_hint=""):
        return self._sync(target_hostname, self._arrays([buffer], [peer_buffer_address],
                                                        [length]), TransferOpcode.Write, None)

    def transfer_sync_read(self, target_hostname, buffer, peer_buffer_address, length,
                           transport_hint=""):
        return self._sync(target_hostname, self._arrays([buffer], [peer_buffer_address],
                                                        [length]), TransferOpcode.Read, None)

    def transfer_sync(self, target_hostname, buffer, peer_buffer_address, length, opcode,
                      notify=None, transport_hint=""):
        return self._sync(target_hostname, self._arrays([buffer], [peer_buffer_address],
                                                        [length]), opcode, notify)

    def batch_transfer_sync_write(self, target_hostname, buffers, peer_buffer_addresses,
                                  lengths, transport_hint=""):
        return self._sync(target_hostname,
                          self._arrays(buffers, peer_buffer_addresses, lengths),
                          TransferOpcode.Write, None)

    def batch_transfer_sync_read(self, target_hostname, buffers, peer_buffer_addresses,
                                 lengths, transport_hint=""):
        return self._sync(target_hostname,
                          self._arrays(buffers, peer_buffer_addresses, lengths),
                          TransferOpcode.Read, None)

    def batch_transfer_sync(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                            opcode, notify=None, transport_hint=""):
        return self._sync(target_hostname,
                          self._arrays(buffers, peer_buffer_addresses, lengths), opcode, notify)

    def _submit(self, target, arrays, opcode):
        """Start a batch; its id (non-zero), or 0 on failure."""
        te = self._te
        if te is None or arrays is None:
            return 0
        src, dst, lens = arrays
        seg = self._segment(str(target))
        if seg is None:
            return 0
        b = _u64()
        rc = _lib.tide_te_batch_alloc(te, max(1, len(src)), ctypes.byref(b))
        if rc == 0:
            op = _TE_READ if int(opcode) == TransferOpcode.Read else _TE_WRITE
            rc = _lib.tide_te_submit_v(te, b, seg, op, src, dst, lens, len(src))
            if rc != 0:
                _lib.tide_te_batch_release(te, b)
                self._forget(str(target), seg, rc)
        if rc != 0:
            _warn(f"submit to {target}: {_errstr(rc)}")
            return 0
        with self._lock:
            self._async[b.value] = time.monotonic_ns() + self._timeout_ns + sum(lens)
        return b.value

    def batch_transfer_async_write(self, target_hostname, buffers, peer_buffer_addresses,
                                   lengths, transport_hint=""):
        return self._submit(target_hostname,
                            self._arrays(buffers, peer_buffer_addresses, lengths),
                            TransferOpcode.Write)

    def batch_transfer_async_read(self, target_hostname, buffers, peer_buffer_addresses,
                                  lengths, transport_hint=""):
        return self._submit(target_hostname,
                            self._arrays(buffers, peer_buffer_addresses, lengths),
                            TransferOpcode.Read)

    def batch_transfer_async(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                             opcode, transport_hint=""):
        return self._submit(target_hostname,
                            self._arrays(buffers, peer_buffer_addresses, lengths), opcode)

    def transfer_submit_write(self, target_hostname, buffer, peer_buffer_address, length,
                              transport_hint=""):
        return self._submit(target_hostname,
                            self._arrays([buffer], [peer_buffer_address], [length]),
                            TransferOpcode.Write)

    def _take(self, batch_id):
        with self._lock:
            return self._async.pop(int(batch_id), None)

    def get_batch_transfer_status(self, batch_ids):
        """Wait for every batch: 0 all completed; -1 one failed, timed out or is unknown
        (the rest are then given up, as stock does). Each id can be waited for once."""
        te = self._te
        ids = [int(b) for b in batch_ids]
        deadlines = [self._take(b) for b in ids]
        if te is None:
            return -1
        failed = any(d is None for d in deadlines)
        for b, dl in zip(ids, deadlines):
            if dl is None:
                continue
            if not failed:
                left_ms = max(0, (dl - time.monotonic_ns()) // 1_000_000)
                rc = _lib.tide_te_wait(te, b, int(min(left_ms, _INT_MAX)))
                if rc == 0:
                    rc = _lib.tide_te_batch_result(te, b)
                if rc != 0:
                    _warn(f"batch {b:#x}: {_errstr(rc)}")
                    failed = True
            _lib.tide_te_batch_release(te, b)
        return -1 if failed else 0

    def transfer_check_status(self, batch_id):
        """1 completed, 0 still running, -1 failed (or unknown id), -2 the engine timed
        it out (no progress for its io timeout). A batch that ended (1, -1, -2) is given
        back: its id is unknown afterwards."""
        te, b = self._te, int(batch_id)
        with self._lock:
            dl = self._async.get(b)
        if te is None or dl is None:
            return -1
        rc = _lib.tide_te_batch_result(te, b)
        if rc == -_E.EINPROGRESS:
            return 0  # as stock: pending until the engine ends it (io_timeout_ms bounds that)
        self._take(b)
        _lib.tide_te_batch_release(te, b)
        if rc == 0:
            return 1
        return -2 if rc == -_E.ETIMEDOUT else -1

    # ---- notifications and probes ----------------------------------------------------

    def get_notifies(self):
        """Notifications received since the last call, oldest first."""
        te = self._te
        if te is None:
            return []
        v, n = _P(_Notify)(), ctypes.c_size_t()
        if _lib.tide_te_get_notifies(te, ctypes.byref(v), ctypes.byref(n)) != 0:
            return []
        try:
            return [TransferNotify(v[i].name.decode(errors="replace"),
                                   v[i].msg.decode(errors="replace"))
                    for i in range(n.value)]
        finally:
            _lib.tide_te_notifies_free(v, n)

    def send_probe(self, peer_server_name):
        """0 when the named engine answers, -1 otherwise."""
        te = self._te
        if te is None:
            return -1
        return 0 if _lib.tide_te_probe(te, str(peer_server_name).encode()) == 0 else -1

    def warmup_efa_segment(self, segment_name):
        return 0  # stock without EFA: nothing to warm up

    # ---- GPU entry points: none in Tide ------------------------------------------------

    def _no_gpu(self, *args, **kwargs):
        raise RuntimeError("mooncake.engine: Tide has no GPU path (SUPPORT_CUDA is False); "
                           "use the host-memory transfer methods")

    transfer_write_on_cuda = _no_gpu
    transfer_read_on_cuda = _no_gpu
    batch_transfer_write_on_cuda = _no_gpu
    batch_transfer_read_on_cuda = _no_gpu


def _class_of(n):
    """Slab class of a request of n bytes (stock's findClassId); -1 above 256 MiB."""
    for i, kb in enumerate(_SLAB_KB):
        if n <= kb << 10:
            return i
    return -1


def _split_host(s):
    """"host", "host:port", "[v6]" or "[v6]:port" -> (host, port or 0)."""
    if s.startswith("["):
        end = s.find("]")
        host, rest = s[1:end], s[end + 1:]
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else 0
    if s.count(":") == 1:
        host, port = s.split(":")
        return host, int(port) if port.isdigit() else 0
    return s, 0


def _listdir(p):
    try:
        return os.listdir(p)
    except OSError:
        return []
