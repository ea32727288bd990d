"""`mooncake.store`: Mooncake's store API (MooncakeDistributedStore, ReplicateConfig,
BufferPool) over Tide's C store client, libtidestore.so, loaded with ctypes.

Only methods that fully work are exposed: Mooncake's structured-object helper picks its
path by which attributes exist, so a method whose C function is missing from the loaded
library is left out of the class (never a stub returning an error). With the full
library the surface is Mooncake's P1 set:

  setup, put, get, remove, is_exist, get_size, close, get_hostname, health_check,
  put_from, batch_put_from, get_into, batch_get_into, get_into_ranges,
  register_buffer, unregister_buffer, batch_remove, batch_is_exist,
  remove_by_regex, remove_all, _get_pyclient_capsule, and the BufferPool class.

Return codes are Mooncake's ErrorCode values. The C library returns 0/sizes or a
negative errno; it is mapped here:

  -ENOENT  -> -704 OBJECT_NOT_FOUND     -ENOSPC -> -200 NO_AVAILABLE_HANDLE (store full)
  -EINVAL  -> -600 INVALID_PARAMS       -ENOMEM -> -600 (Mooncake: "allocation failed")
  -ENOBUFS -> -600 INVALID_PARAMS: the destination of get_into/batch_get_into is smaller
              than the object. Mooncake reports a too-small destination as a bad
              argument; -10 BUFFER_OVERFLOW is its code for its own staging buffer
              running out, which cannot happen here (no staging copy).
  -EEXIST  -> -600 from register_buffer (a duplicate registration, as Mooncake; the
              helper relies on it), -705 OBJECT_ALREADY_EXISTS elsewhere
  -ENOENT from unregister_buffer -> -600 (not a registered buffer: a bad argument)
  -EPROTONOSUPPORT -> -600 (a protocol this node cannot run, e.g. "rdma" without a device,
              or "rdma" asked of a node agent that runs tcp)
  -EPROTO  -> -300 INVALID_VERSION      -EAGAIN -> -703 REPLICA_IS_NOT_READY
  -EBUSY   -> -706 OBJECT_HAS_LEASE     -ESTALE -> -707 LEASE_EXPIRED
  -ENODEV  -> -101 SEGMENT_NOT_FOUND    -EIO, -EFAULT -> -800 TRANSFER_FAIL
  -ECONNREFUSED, -ETIMEDOUT, -ECONNRESET, -ENOTCONN, -EPIPE, -ECONNABORTED,
  -EHOSTUNREACH, -ENETUNREACH -> -900 RPC_FAIL
  anything else -> -1 INTERNAL_ERROR
  batch_is_exist reports any error as -1 (Mooncake's list[1/0/-1]).

Keys are str (sent as UTF-8), bytes or bytearray, what Mooncake's pybind11 binding takes
for std::string; any other key (None, int, a list ...), or a batch's keys that are not a
sequence of those (a str, a generator, a set ...), raises TypeError, as it does there,
before and after setup() alike. A key holding a NUL byte is a bad argument (-600).

Before setup() and after close(): int methods return -600, get() b"", list methods a
list of -600 (batch_is_exist: -1), health_check() 1, get_hostname() "",
_get_pyclient_capsule() None. close() may be called any number of times.

Threading: every call releases the GIL (ctypes) and may run from any thread. close()
waits for calls in progress; if BufferPool leases are still held, the C store (and the
memory the leases point into) is torn down when the last lease is released.

The library is found through $LIBTIDESTORE, next to this package (libtidestore.so), or
by the dynamic loader (ldconfig, e.g. after `meson install`), and bound with the
declarations the build generated from its headers (see mooncake._native).
"""
import ctypes
import operator
import os
import re
import sys
import threading
import weakref

__all__ = ["MooncakeDistributedStore", "ReplicateConfig"]

# Mooncake ErrorCode values (mooncake-store types.h).
_OK = 0
_INTERNAL_ERROR = -1
_SEGMENT_NOT_FOUND = -101
_NO_AVAILABLE_HANDLE = -200
_INVALID_VERSION = -300
_INVALID_PARAMS = -600
_REPLICA_IS_NOT_READY = -703
_OBJECT_NOT_FOUND = -704
_OBJECT_ALREADY_EXISTS = -705
_OBJECT_HAS_LEASE = -706
_LEASE_EXPIRED = -707
_TRANSFER_FAIL = -800
_RPC_FAIL = -900

_E = __import__("errno")
# get(): first read attempt into a buffer of this size (see get()).
_GET_GUESS = 64 << 10

_ERRNO_TO_MC = {
    _E.ENOENT: _OBJECT_NOT_FOUND,
    _E.ENOSPC: _NO_AVAILABLE_HANDLE,
    _E.EINVAL: _INVALID_PARAMS,
    _E.ENOMEM: _INVALID_PARAMS,
    _E.ENOBUFS: _INVALID_PARAMS,  # the caller's buffer is smaller than the object
    _E.EPROTONOSUPPORT: _INVALID_PARAMS,  # e.g. protocol "rdma" where the node has none
    _E.EEXIST: _OBJECT_ALREADY_EXISTS,
    _E.EPROTO: _INVALID_VERSION,
    _E.EAGAIN: _REPLICA_IS_NOT_READY,
    _E.EBUSY: _OBJECT_HAS_LEASE,
    _E.ESTALE: _LEASE_EXPIRED,
    _E.ENODEV: _SEGMENT_NOT_FOUND,
    _E.EIO: _TRANSFER_FAIL,
    _E.EFAULT: _TRANSFER_FAIL,
    _E.ECONNREFUSED: _RPC_FAIL,
    _E.ETIMEDOUT: _RPC_FAIL,
    _E.ECONNRESET: _RPC_FAIL,
    _E.ENOTCONN: _RPC_FAIL,
    _E.EPIPE: _RPC_FAIL,
    _E.ECONNABORTED: _RPC_FAIL,
    _E.EHOSTUNREACH: _RPC_FAIL,
    _E.ENETUNREACH: _RPC_FAIL,
}


def _mc_code(rc, override=None):
    """Mooncake code for a C result (0 for any non-negative result)."""
    if rc >= 0:
        return 0
    if override and -rc in override:
        return override[-rc]
    return _ERRNO_TO_MC.get(-rc, _INTERNAL_ERROR)


_REGISTER_CODES = {_E.EEXIST: _INVALID_PARAMS}
_UNREGISTER_CODES = {_E.ENOENT: _INVALID_PARAMS}


from mooncake._native import abi as _abi, lib as _lib  # noqa: E402

_vp = ctypes.c_void_p
_cp = ctypes.c_char_p
_sz = ctypes.c_size_t

# The C structs, as the build declared them from tide_store.h (mooncake._native checked
# their sizes against the library's).
_Cfg = _abi.tide_store_cfg
_RC = _abi.tide_store_rc  # Mooncake's ReplicateConfig
_Frag = _abi.tide_store_frag  # one fragment of get_into_ranges

# PyCapsule through the C API (PyDLL: called with the GIL held).
_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [_vp, _cp, _vp]
_pyapi.PyCapsule_GetPointer.restype = _vp
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, _cp]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, _cp]
_CAPSULE_NAME = b"mooncake.PyClient.shared_ptr"  # kept alive: capsules point at it

# get(): the C client sizes the object, then asks for the destination; it gets the
# inside of a fresh bytes object (PyBytes_FromStringAndSize(NULL, n), which the C API
# provides for filling before anyone else sees it), so the socket fills the bytes get()
# returns: one copy per byte, one allocation per call, and no second buffer to fault in.
_pyapi.PyBytes_FromStringAndSize.restype = ctypes.py_object
_pyapi.PyBytes_FromStringAndSize.argtypes = [_vp, ctypes.c_ssize_t]
_BYTES_DATA = bytes.__basicsize__ - 1  # offset of ob_sval in a bytes object
_get_tls = threading.local()


_NO_RELEASE = _abi.tide_store_release_fn()  # a NULL release function


@_abi.tide_store_alloc_fn
def _get_alloc_cb(arg, size):
    """tide_store_get_with's allocator; runs on the calling thread (holding the GIL).
    It must return a pointer or NULL whatever happens: an exception escaping a ctypes
    callback leaves C with an undefined return value. So everything (MemoryError, a
    KeyboardInterrupt delivered here) is caught, kept, and raised again by get()."""
    try:
        b = _pyapi.PyBytes_FromStringAndSize(None, size)
        _get_tls.obj = b
        return id(b) + _BYTES_DATA
    except BaseException as e:  # noqa: B036 (re-raised by the caller)
        _get_tls.exc = e
        return None

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def _parse_size(v, what):
    """Mooncake accepts ints and strings like '512MB', '4gb', '1.5GiB' (binary units)."""
    if isinstance(v, bool):
        raise ValueError(f"{what}: {v!r} is not a size")
    if isinstance(v, int):
        if v < 0:
            raise ValueError(f"{what}: {v} is negative")
        return v
    m = _SIZE_RE.match(str(v))
    if not m:
        raise ValueError(f"{what}: {v!r} is not a size (examples: 4096, 512MB, 4gb)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


class ReplicateConfig:
    """Mooncake's ReplicateConfig. replica_num, with_hard_pin, preferred_segment(s),
    prefer_alloc_in_same_node and group_ids go to the master with every put; the
    other fields are kept for compatibility (no NoF/DFS tiers, no soft-pin policy)."""

    def __init__(self):
        self.replica_num = 1
        self.group_ids = None
        self.with_hard_pin = False
        self.with_soft_pin = False
        self.preferred_segment = ""
        self.preferred_segments = []
        self.prefer_alloc_in_same_node = False
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.preferred_nof_segments = []
        self.data_type = 0

    def __repr__(self):
        return (f"ReplicateConfig(replica_num={self.replica_num}, "
                f"with_hard_pin={self.with_hard_pin}, "
                f"preferred_segment={self.preferred_segment!r}, "
                f"preferred_segments={self.preferred_segments!r}, "
                f"prefer_alloc_in_same_node={self.prefer_alloc_in_same_node}, "
                f"group_ids={self.group_ids!r})")

    __str__ = __repr__


class _BadArg(Exception):
    pass


_pyapi_seq = ctypes.pythonapi.PySequence_Check
_pyapi_seq.restype = ctypes.c_int
_pyapi_seq.argtypes = [ctypes.py_object]


def _key_type_error(what, k):
    return TypeError(f"{what}(): a key must be str or bytes (as Mooncake's binding, "
                     f"std::string), not {type(k).__name__}")


def _kb(k, what):
    """A key's bytes: str (UTF-8), bytes or bytearray, what Mooncake's pybind11 binding
    converts to std::string; anything else is the TypeError pybind11 raises."""
    if isinstance(k, str):
        try:
            return k.encode()
        except UnicodeEncodeError:  # lone surrogates: pybind11 cannot convert them either
            raise _key_type_error(what, k) from None
    if isinstance(k, (bytes, bytearray)):
        return bytes(k)
    raise _key_type_error(what, k)


def _key(k, what):
    """One key as bytes for C, or None when it holds a NUL byte (C strings cannot carry
    it: a bad argument, -600). TypeError for a key of another type."""
    b = _kb(k, what)
    return None if b"\0" in b else b


def _seq(x, what, name="keys"):
    """x must be what pybind11 converts to a std::vector: a sequence (list, tuple, ...)
    that is not a str or bytes; else TypeError (generators, sets and dicts too)."""
    if type(x) is list or type(x) is tuple:
        return
    if isinstance(x, (str, bytes)) or not _pyapi_seq(x):
        raise TypeError(f"{what}(): {name} must be a list of str, not {type(x).__name__}")


def _keys(keys, what):
    """(n, C array of the keys) for a batch call; the array is None when a key holds a
    NUL byte (every key then gets -600). TypeError as Mooncake's binding for anything
    but a sequence of str/bytes."""
    _seq(keys, what)
    ks = [_kb(k, what) for k in keys]
    for b in ks:
        if b"\0" in b:
            return len(ks), None
    return len(ks), (_cp * len(ks))(*ks)


def _ptr(p):
    p = operator.index(p)
    if p < 0:
        raise _BadArg("negative pointer")
    return p


def _size(n):
    n = operator.index(n)
    if n < 0:
        raise _BadArg("negative size")
    return n


def _ptrs_sizes(ptrs, sizes, n):
    """ctypes arrays for n (address, size) pairs; a NULL address with a size is refused."""
    ptrs, sizes = [_ptr(p) for p in ptrs], [_size(x) for x in sizes]
    if len(ptrs) != n or len(sizes) != n:
        raise _BadArg("keys, buffer_ptrs and sizes differ in length")
    if any(not p and x for p, x in zip(ptrs, sizes)):
        raise _BadArg("NULL buffer")
    return (_vp * n)(*[p or None for p in ptrs]), (_sz * n)(*sizes)


def _strs(items):
    if not items:
        return None, None
    bs = [str(x).encode() for x in items]
    return (_cp * len(bs))(*bs), bs


def _rc(config, nkeys=None):
    """(struct tide_store_rc or None, keepalive) for a ReplicateConfig-like object.
    For a batch (nkeys given) group_ids must have nkeys entries; a single put uses the
    first entry. Empty or None = ungrouped."""
    if config is None:
        return None, None
    g = lambda name, dflt: getattr(config, name, dflt)  # noqa: E731
    replicas = g("replica_num", 1)
    replicas = 1 if replicas is None else operator.index(replicas)
    if replicas < 0:
        raise _BadArg("replica_num is negative")
    rc = _RC()
    rc.replica_num = replicas
    rc.with_hard_pin = bool(g("with_hard_pin", False))
    pseg = g("preferred_segment", "") or ""
    keep = []
    if pseg:
        b = str(pseg).encode()
        keep.append(b)
        rc.preferred_segment = b
    arr, bs = _strs(g("preferred_segments", None))
    if arr is not None:
        keep += [arr, bs]
        rc.preferred_segments = arr
        rc.n_preferred_segments = len(bs)
    rc.prefer_alloc_in_same_node = bool(g("prefer_alloc_in_same_node", False))
    groups = g("group_ids", None)
    if groups:
        groups = list(groups)
        if nkeys is None:
            groups = groups[:1]
        elif len(groups) != nkeys:
            raise _BadArg(f"group_ids has {len(groups)} entries for {nkeys} keys")
        arr, bs = _strs(["" if x is None else x for x in groups])
        keep += [arr, bs]
        rc.group_ids = arr
    return rc, keep


def _buffer(value):
    """(address, nbytes, keepalive) for any contiguous buffer, without copying
    writable buffers and bytes."""
    if isinstance(value, bytes):
        return (ctypes.cast(_cp(value), _vp).value if value else None), len(value), value
    mv = memoryview(value)
    if not mv.contiguous:
        raise _BadArg("value must be a contiguous buffer")
    n = mv.nbytes
    if n == 0:
        return None, 0, mv
    if mv.readonly:
        data = mv.tobytes()  # ctypes cannot point into read-only memory without a copy
        return ctypes.cast(_cp(data), _vp).value, n, data
    mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    arr = (ctypes.c_char * n).from_buffer(mv)
    return ctypes.addressof(arr), n, arr


class _Life:
    """The C handle's lifetime: calls in flight and memory pins (BufferPool leases and
    mapped regions) keep it alive; close() stops new calls, waits for calls in flight
    and frees the handle once nothing is pinned."""

    def __init__(self, h, engine=None):
        self.h = h
        # setup(engine=...): the C store runs on that engine until the handle is freed,
        # which may be after the store object is gone (leases pin the handle).
        self.engine = engine
        self.cv = threading.Condition(threading.Lock())
        if engine is not None:
            engine._add_user(self.engine_gone)
        self.busy = 0
        self.pins = 0
        self.closing = False
        self.freed = False

    def enter(self):
        with self.cv:
            if self.closing:
                return None
            self.busy += 1
            return self.h

    def leave(self):
        with self.cv:
            self.busy -= 1
            last = self.closing and self.busy == 0
            if last:
                self.cv.notify_all()
        if last:
            self._maybe_free()

    def pin(self):
        with self.cv:
            if self.closing:
                return False
            self.pins += 1
            return True

    def unpin(self):
        with self.cv:
            self.pins -= 1
        self._maybe_free()

    def close(self):
        with self.cv:
            self.closing = True
            while self.busy:
                self.cv.wait()
        self._maybe_free()

    def _maybe_free(self):
        with self.cv:
            if not self.closing or self.busy or self.pins or self.freed:
                return
            self.freed = True
        _lib.tide_store_close(self.h)
        if self.engine is not None:
            self.engine._remove_user(self.engine_gone)

    def engine_gone(self):
        """The shared engine is being destroyed (interpreter exit): free the C store now,
        pins or not, so it gives back what it registered while the engine exists."""
        with self.cv:
            self.closing = True
            if self.freed:
                return
            self.freed = True
        _lib.tide_store_close(self.h)


_STORES = {}  # C handle address -> weakref(MooncakeDistributedStore), for capsules
_STORES_LOCK = threading.Lock()


class MooncakeDistributedStore:
    """Mooncake's distributed store client, backed by Tide."""

    def __init__(self):
        self._life = None
        self._hostname = ""
        self._lbuf = (0, 0)
        self._arena = None  # the local buffer's allocator, shared by BufferPools
        self._setup_lock = threading.Lock()

    # ---------------------------------------------------------------- lifecycle

    def setup(self, *args, **kwargs):
        """setup(config: dict) or setup(local_hostname, metadata_server, global_segment_size,
        local_buffer_size, protocol, rdma_devices, master_server_addr, ...). 0 on success.

        protocol: "tcp" or "rdma" (Mooncake's names; others are refused with -600). With
        "rdma" this process runs the verbs transport itself, or, attached to the node's
        agent (TIDE_AGENT), the agent must run rdma; a node without an RDMA device fails
        with -600 and one line saying what is missing (never a silent fall-back to tcp).
        rdma_devices: Mooncake's comma list of this node's device names; "" (or
        "auto-discovery") every device with an active port; a dict without the key takes
        MOONCAKE_DEVICE of the node environment (file, then process environment).
        A key missing from the dict falls back to its MOONCAKE_* variable (Tide's
        addition; Mooncake's setup() reads no environment, and neither reads
        MOONCAKE_CONFIG_PATH: that file is for mooncake.mooncake_config.MooncakeConfig)."""
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            c = dict(args[0])
        else:
            names = ["local_hostname", "metadata_server", "global_segment_size",
                     "local_buffer_size", "protocol", "rdma_devices", "master_server_addr",
                     "engine"]
            c = dict(zip(names, args))
            c.update(kwargs)
        env = os.environ
        try:
            host = str(c.get("local_hostname") or env.get("MOONCAKE_LOCAL_HOSTNAME") or "localhost")
            meta = str(c.get("metadata_server") or env.get("MOONCAKE_TE_META_DATA_SERVER")
                       or "P2PHANDSHAKE")
            gss = _parse_size(c.get("global_segment_size",
                                    env.get("MOONCAKE_GLOBAL_SEGMENT_SIZE", 16 << 20)),
                              "global_segment_size")
            lbs = _parse_size(c.get("local_buffer_size",
                                    env.get("MOONCAKE_LOCAL_BUFFER_SIZE", 16 << 20)),
                              "local_buffer_size")
            proto = str(c.get("protocol") or env.get("MOONCAKE_PROTOCOL") or "tcp")
            master = str(c.get("master_server_addr") or env.get("MOONCAKE_MASTER")
                         or "127.0.0.1:50051")
            devices = c.get("rdma_devices")
            if devices is not None:
                devices = str(devices).strip()
                if devices == "auto-discovery":  # Mooncake's spelling of "auto"
                    devices = ""
        except ValueError as e:
            print(f"mooncake.store: setup: {e}", file=sys.stderr)
            return _INVALID_PARAMS
        engine = c.get("engine")
        engine_ptr = None
        if engine is not None:
            # mooncake.engine's TransferEngine.get_engine(): run on that engine.
            from mooncake.engine import InnerTransferEngine
            if not isinstance(engine, InnerTransferEngine):
                print("mooncake.store: setup: engine must come from "
                      "mooncake.engine.TransferEngine.get_engine()", file=sys.stderr)
                return _INVALID_PARAMS
            engine_ptr = engine._ptr()
            if not engine_ptr:
                print("mooncake.store: setup: the engine given is not initialized",
                      file=sys.stderr)
                return _INVALID_PARAMS
        if proto not in ("tcp", "rdma"):
            print(f"mooncake.store: setup: protocol {proto!r} is not supported by Tide; use "
                  "'tcp' or 'rdma' (MOONCAKE_PROTOCOL)", file=sys.stderr)
            return _INVALID_PARAMS
        with self._setup_lock:
            if self._life is not None and not self._life.closing:
                return _INVALID_PARAMS
            h = _vp()
            rc = _lib.tide_store_create(ctypes.byref(h))
            if rc != 0:
                return _mc_code(rc)
            if devices is not None:
                rc = _lib.tide_store_set_rdma_devices(h, devices.encode())
                if rc != 0:
                    _lib.tide_store_close(h)
                    return _mc_code(rc)
            if engine_ptr is not None:
                rc = _lib.tide_store_set_engine(h, engine_ptr)
                if rc != 0:
                    _lib.tide_store_close(h)
                    return _mc_code(rc)
            # agent 0: the node file's TIDE_AGENT decides; agent_socket NULL: its socket.
            cfg = _Cfg(host.encode(), meta.encode(), gss, lbs, proto.encode(), master.encode(),
                       0, None)
            rc = _lib.tide_store_setup(h, ctypes.byref(cfg))
            if rc != 0:
                # -EPROTONOSUPPORT: a transport this node (or its agent) cannot run; the
                # C layer printed the one line that says what is missing and that
                # protocol tcp is the alternative. Anything else: the C layer logged which
                # step refused (the agent's socket, the master, the segment ...); this line
                # only gives the result, without pinning it on the master.
                if rc != -_E.EPROTONOSUPPORT:
                    print(f"mooncake.store: setup failed: "
                          f"{_lib.tide_store_strerror(rc).decode()} (the line above says "
                          "which step)", file=sys.stderr)
                _lib.tide_store_close(h)
                return _mc_code(rc)
            self._hostname = (_lib.tide_store_endpoint(h) or b"").decode()
            self._lbuf = (0, 0)
            self._arena = None
            base, n = _vp(), _sz()
            if _lib.tide_store_local_buffer(h, ctypes.byref(base), ctypes.byref(n)) == 0:
                self._lbuf = (base.value or 0, n.value if base.value else 0)
            self._life = _Life(h, engine)
            with _STORES_LOCK:
                _STORES[h.value] = weakref.ref(self)
        return 0

    def _enter(self):
        life = self._life
        return None if life is None else life.enter()

    def _leave(self):
        self._life.leave()

    def close(self):
        """Leave the cluster (objects held in this client's segment vanish). 0; calling it
        again is a no-op."""
        with self._setup_lock:
            life = self._life
            if life is None or life.closing:
                return 0
            life.close()
            with _STORES_LOCK:
                _STORES.pop(life.h.value, None)
            self._hostname = ""
        return 0

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def health_check(self):
        """0 healthy, 1 not set up or closed, 2 the master (or the node agent) does not
        answer."""
        h = self._enter()
        if h is None:
            return 1
        try:
            return int(_lib.tide_store_health_check(h))
        finally:
            self._leave()

    def get_hostname(self):
        """This client's segment name ("host:port"); "" before setup and after close."""
        return self._hostname

    # ---------------------------------------------------------------- bytes API

    def put(self, key, value, config=None):
        """Store value (any contiguous buffer; its bytes) under key. 0, or -200 when the
        store is full, -600 on bad arguments (0 bytes, empty key)."""
        k = _key(key, "put")
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            ptr, n, keep = _buffer(value)
            rc, keep_rc = _rc(config)
            r = _lib.tide_store_put(h, k, ptr, n, None if rc is None else ctypes.byref(rc))
            del keep, keep_rc
            return _mc_code(r)
        except _BadArg:
            return _INVALID_PARAMS
        finally:
            self._leave()

    def get(self, key):
        """The object's bytes; b"" when it does not exist or on error (as Mooncake)."""
        k = _key(key, "get")
        if k is None:
            return b""
        h = self._enter()
        if h is None:
            return b""
        try:
            if not _lib.tide_store_attached(h):
                # In process, tide_store_get sizes its buffer from the same
                # GetReplicaList it reads with: one master round trip at any size.
                return self._get_alloc(h, k)
            # Through an agent, most objects Miles reads with get() are small
            # (manifests, meta): one read into a guess-sized buffer is one agent call
            # instead of two (size, then read); larger ones take the allocating get.
            buf = ctypes.create_string_buffer(_GET_GUESS)
            got = _lib.tide_store_get_into(h, k, buf, _GET_GUESS)
            if got >= 0:
                return buf.raw[:got]
            if got != -_E.ENOBUFS:
                return b""
            return self._get_alloc(h, k)
        finally:
            self._leave()

    @staticmethod
    def _get_alloc(h, k):
        """The bytes, received straight into the bytes object returned, or b"" on any
        error (as Mooncake's get)."""
        p, n = _vp(), _sz()
        # Saved and restored around the call: a get() run inside the callback (a
        # finalizer, a signal handler) must not take this call's object.
        saved = (getattr(_get_tls, "obj", None), getattr(_get_tls, "exc", None))
        _get_tls.obj = _get_tls.exc = None
        try:
            rc = _lib.tide_store_get_with(h, k, _get_alloc_cb, _NO_RELEASE, None, ctypes.byref(p),
                                          ctypes.byref(n))
            b, exc = _get_tls.obj, _get_tls.exc
        finally:
            _get_tls.obj, _get_tls.exc = saved
        if exc is not None and not isinstance(exc, MemoryError):
            raise exc  # e.g. KeyboardInterrupt during the get
        if rc != 0 or b is None:
            return b""
        # Through an agent the object may have shrunk between its size and its read.
        return b if n.value == len(b) else b[:n.value]

    def remove(self, key, force=False):
        """0, -704 when the key does not exist, -706 when leased (force False)."""
        k = _key(key, "remove")
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            return _mc_code(_lib.tide_store_remove(h, k, bool(force)))
        finally:
            self._leave()

    def is_exist(self, key):
        """1 exists, 0 not, negative on error."""
        k = _key(key, "is_exist")
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            r = _lib.tide_store_is_exist(h, k)
            return r if r >= 0 else _mc_code(r)
        finally:
            self._leave()

    def get_size(self, key):
        """Object size in bytes, or a negative code (-704 missing)."""
        k = _key(key, "get_size")
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            r = _lib.tide_store_get_size(h, k)
            return r if r >= 0 else _mc_code(r)
        finally:
            self._leave()

    def remove_all(self, force=False):
        """Number of objects removed, or a negative code."""
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            r = _lib.tide_store_remove_all(h, bool(force))
            return r if r >= 0 else _mc_code(r)
        finally:
            self._leave()

    def remove_by_regex(self, pattern, force=False):
        """Remove every key matching the regular expression (evaluated by the master);
        the number removed, or a negative code (-600 bad pattern)."""
        k = _key(pattern, "remove_by_regex")
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            r = _lib.tide_store_remove_by_regex(h, k, bool(force))
            return r if r >= 0 else _mc_code(r)
        finally:
            self._leave()

    # ------------------------------------------------------------ batches

    def _batch(self, n, karr, fill, call, mapper):
        """Run a per-key C batch call over the keys karr (_keys(); None: a bad key, every
        entry gets fill); entries the call left untouched (bad arguments, a connection
        error before any key) get the call's own code."""
        h = self._enter()
        if h is None:
            return [fill] * n
        try:
            if n == 0:
                return []
            if karr is None:
                return [fill] * n
            r, out = call(h, karr)
            return [mapper(r if v is _UNTOUCHED else v) for v in out]
        except _BadArg:
            return [fill] * n
        finally:
            self._leave()

    def batch_put_from(self, keys, buffer_ptrs, sizes, config=None):
        """Store len(keys) objects from raw memory (ptrs are integer addresses). Per key 0
        or a negative code; config.group_ids, if set, must have one entry per key (else
        every key gets -600)."""
        n, karr = _keys(keys, "batch_put_from")

        def call(h, karr):
            parr, sarr = _ptrs_sizes(buffer_ptrs, sizes, n)
            rc, keep = _rc(config, n)
            out = (ctypes.c_int * n)(*([_SENTINEL_INT] * n))
            r = _lib.tide_store_batch_put_from(h, karr, parr, sarr, n,
                                               None if rc is None else ctypes.byref(rc), out)
            del keep
            return r, [_UNTOUCHED if v == _SENTINEL_INT else v for v in out]
        return self._batch(n, karr, _INVALID_PARAMS, call, _mc_code)

    def put_from(self, key, buffer_ptr, size, config=None):
        """Store size bytes at address buffer_ptr under key. 0 or a negative code."""
        k = _key(key, "put_from")
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            p, n = _ptr(buffer_ptr), _size(size)
            if not p and n:
                return _INVALID_PARAMS
            rc, keep = _rc(config)
            r = _lib.tide_store_put(h, k, p or None, n, None if rc is None else ctypes.byref(rc))
            del keep
            return _mc_code(r)
        except _BadArg:
            return _INVALID_PARAMS
        finally:
            self._leave()

    def get_into(self, key, buffer_ptr, size):
        """Read the object into size bytes at buffer_ptr: its size, or a negative code
        (-704 missing, -600 buffer smaller than the object)."""
        k = _key(key, "get_into")
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            p, n = _ptr(buffer_ptr), _size(size)
            if not p and n:
                return _INVALID_PARAMS
            r = _lib.tide_store_get_into(h, k, p or None, n)
            return r if r >= 0 else _mc_code(r)
        except _BadArg:
            return _INVALID_PARAMS
        finally:
            self._leave()

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        """get_into for each key: per key its size or a negative code."""
        n, karr = _keys(keys, "batch_get_into")

        def call(h, karr):
            parr, sarr = _ptrs_sizes(buffer_ptrs, sizes, n)
            out = (ctypes.c_int64 * n)(*([_SENTINEL_I64] * n))
            r = _lib.tide_store_batch_get_into(h, karr, parr, sarr, n, out)
            return r, [_UNTOUCHED if v == _SENTINEL_I64 else v for v in out]
        return self._batch(n, karr, _INVALID_PARAMS, call,
                           lambda v: v if v >= 0 else _mc_code(v))

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
                        all_sizes):
        """Read byte ranges of objects into buffers, in one master round trip.

        For buffer b, key k (all_keys[b][k]) and fragment f: copy all_sizes[b][k][f] bytes
        from offset all_src_offsets[b][k][f] of the object to buffer_ptrs[b] +
        all_dst_offsets[b][k][f]. Returns result[b][k][f]: the bytes read, or a negative
        code for that fragment (-704 missing key, -600 range outside the object or a
        negative offset/size); the other fragments still succeed."""
        _seq(all_keys, "get_into_ranges", "all_keys")
        nb = len(buffer_ptrs)
        if not (len(all_keys) == len(all_dst_offsets) == len(all_src_offsets)
                == len(all_sizes) == nb):
            raise ValueError("get_into_ranges: buffer_ptrs, all_keys, all_dst_offsets, "
                             "all_src_offsets and all_sizes must have one entry per buffer")
        shape = []
        kbytes = []  # per buffer, each key's bytes (None: holds a NUL byte, -600)
        for b in range(nb):
            _seq(all_keys[b], "get_into_ranges", "all_keys[b]")
            kbytes.append([_key(key, "get_into_ranges") for key in all_keys[b]])
            nk = len(all_keys[b])
            if not (len(all_dst_offsets[b]) == len(all_src_offsets[b])
                    == len(all_sizes[b]) == nk):
                raise ValueError(f"get_into_ranges: buffer {b}: all_keys, all_dst_offsets, "
                                 "all_src_offsets and all_sizes must have one entry per key")
            row = []
            for k in range(nk):
                nf = len(all_sizes[b][k])
                if not (len(all_dst_offsets[b][k]) == len(all_src_offsets[b][k]) == nf):
                    raise ValueError(f"get_into_ranges: buffer {b} key {k}: dst, src and "
                                     "sizes must have one entry per fragment")
                row.append(nf)
            shape.append(row)
        result = [[[_INVALID_PARAMS] * nf for nf in row] for row in shape]
        h = self._enter()
        if h is None:
            return result
        try:
            kidx, klist, frags, where = {}, [], [], []
            for b in range(nb):
                base = operator.index(buffer_ptrs[b])
                for k, kb in enumerate(kbytes[b]):
                    if kb is None:
                        continue
                    i = kidx.get(kb)
                    if i is None:
                        i = kidx[kb] = len(klist)
                        klist.append(kb)
                    for f in range(shape[b][k]):
                        d = operator.index(all_dst_offsets[b][k][f])
                        s = operator.index(all_src_offsets[b][k][f])
                        n = operator.index(all_sizes[b][k][f])
                        if d < 0 or s < 0 or n < 0 or base <= 0:
                            continue
                        frags.append((i, s, base + d, n))
                        where.append((b, k, f))
            if not frags:
                return result
            nf = len(frags)
            arr = (_Frag * nf)()
            for j, (i, s, d, n) in enumerate(frags):
                fr = arr[j]
                fr.key, fr.src_off, fr.dst, fr.len, fr.result = i, s, d, n, _SENTINEL_I64
            karr = (_cp * len(klist))(*klist)
            r = _lib.tide_store_get_into_ranges(h, karr, len(klist), arr, nf)
            for j, (b, k, f) in enumerate(where):
                v = arr[j].result
                if v == _SENTINEL_I64:
                    v = r if r < 0 else -_E.EIO
                result[b][k][f] = v if v >= 0 else _mc_code(v)
            return result
        finally:
            self._leave()

    def batch_is_exist(self, keys):
        """Per key: 1 exists, 0 does not, -1 error."""
        n, karr = _keys(keys, "batch_is_exist")

        def call(h, karr):
            out = (ctypes.c_int * n)(*([_SENTINEL_INT] * n))
            r = _lib.tide_store_batch_is_exist(h, karr, n, out)
            return r, [_UNTOUCHED if v == _SENTINEL_INT else v for v in out]
        return self._batch(n, karr, -1, call, lambda v: v if v >= 0 else -1)

    def batch_remove(self, keys, force=False):
        """Per key: 0 removed, -704 missing, -706 leased (force False), other codes."""
        n, karr = _keys(keys, "batch_remove")

        def call(h, karr):
            out = (ctypes.c_int * n)(*([_SENTINEL_INT] * n))
            r = _lib.tide_store_batch_remove(h, karr, n, bool(force), out)
            return r, [_UNTOUCHED if v == _SENTINEL_INT else v for v in out]
        return self._batch(n, karr, _INVALID_PARAMS, call, _mc_code)

    # ------------------------------------------------------ registered memory

    def register_buffer(self, buffer_ptr, size):
        """Declare [ptr, ptr+size) as memory puts read from and gets write into. 0; -600 on
        a duplicate registration of ptr or a bad argument."""
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            r = _lib.tide_store_register_buffer(h, _ptr(buffer_ptr) or None, _size(size))
            return _mc_code(r, _REGISTER_CODES)
        except _BadArg:
            return _INVALID_PARAMS
        finally:
            self._leave()

    def unregister_buffer(self, buffer_ptr):
        """Undo register_buffer(ptr). 0; -600 when ptr is not registered."""
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            r = _lib.tide_store_unregister_buffer(h, _ptr(buffer_ptr) or None)
            return _mc_code(r, _UNREGISTER_CODES)
        except _BadArg:
            return _INVALID_PARAMS
        finally:
            self._leave()

    def _tide_puts_in_place(self):
        """True when this client runs the transfer engine itself (not attached to an
        agent): batch_put_from then sends from any memory as it is (kernel sockets
        writev from it, user-space TCP frames point into it; RDMA copies memory that is
        not registered through its staging area, one copy as a lease would be), so a
        caller need not copy its data into a BufferPool lease first. False before
        setup, after close and through an agent (whose transfers read only shared
        memory: the local buffer)."""
        h = self._enter()
        if h is None:
            return False
        try:
            return not _lib.tide_store_attached(h)
        finally:
            self._leave()

    def _get_pyclient_capsule(self):
        """A PyCapsule named "mooncake.PyClient.shared_ptr" holding this client's C handle
        (struct tide_store *; not a C++ shared_ptr: only Tide's BufferPool reads it). None
        before setup, after close, or without a local buffer (so Mooncake's helper does not
        build a BufferPool that could not allocate)."""
        life = self._life
        if life is None or life.closing or not self._lbuf[1]:
            return None
        return _pyapi.PyCapsule_New(life.h.value, _CAPSULE_NAME, None)


_UNTOUCHED = object()
_SENTINEL_INT = -(1 << 31)
_SENTINEL_I64 = -(1 << 63)

_POOL_NAMES = ("BufferPool", "RegisteredBufferPool", "BufferLease", "RegisteredBufferLease")


def __getattr__(name):
    """BufferPool lives in mooncake.buffer_pool, which imports this module; mooncake.store
    exports it too, as stock's does, loaded at first use so either may be imported first."""
    if name in _POOL_NAMES:
        from mooncake import buffer_pool
        return getattr(buffer_pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ += ["BufferPool", "RegisteredBufferPool", "BufferLease"]
