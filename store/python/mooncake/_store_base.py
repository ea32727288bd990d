"""The ground mooncake.store stands on: Mooncake's return codes and the errno map, the
ctypes types of libtidestore (from mooncake._native's generated declarations), argument
conversion shared by every call (keys, pointer lists, ReplicateConfig), and a store's C
handle's lifetime (_Life). mooncake.store and its call families (_store_multi.py,
_store_tensor.py) import from here; nothing here imports them."""
import collections
import ctypes
import enum
import operator
import re
import sys
import threading

from mooncake._native import abi as _abi, lib as _lib

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


# A bytes object of this size or more is fresh memory on every call (glibc maps
# allocations above 32 MiB and unmaps them when freed), and filling it faults once per
# 4 KiB page: a 64 MiB get ran at 23 op/s against 140 into a reused buffer. Transparent
# huge pages (where the kernel offers them only on request, "madvise") fault once per
# 2 MiB. Only the whole 2 MiB pages inside the object are asked for.
_HUGE_GET = 8 << 20
_HUGE = 2 << 20
_MADV_HUGEPAGE = 14
_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [_vp, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.restype = ctypes.c_int


def _huge(addr, size):
    lo = (addr + _HUGE - 1) & ~(_HUGE - 1)
    hi = (addr + size) & ~(_HUGE - 1)
    if hi > lo:
        _libc.madvise(lo, hi - lo, _MADV_HUGEPAGE)  # advice only: failure changes nothing


class _Recycler:
    """Large bytes objects get() returned (_KEEP_MIN and more), kept so that a later get()
    of the same size can fill one again once nobody else holds it.

    Why: a bytes object of 32 MiB or more is an mmap of its own, so every such get()
    writes into pages never touched before. On a VM whose host reclaims the guest's free
    memory, that first touch cost 100-280 ms per 64 MiB (against 6.5 ms for the copy into
    mapped pages), whatever the store; a reader that gets and drops objects one by one
    paid it on every call. (From 1 MiB, where glibc's heap serves the objects, it was
    measured too: 4 MiB gets lost their rare 2-5 ms stalls but took 5 % longer at the
    median, so smaller objects are left to glibc.) An object whose only reference is ours
    cannot be seen by anyone, so refilling it is as safe as CPython reusing its own free
    objects; its cached hash is reset. At most `cap` bytes and `count` objects are kept (256 MiB, a
    quarter of the local buffer every client registers by default; 8, so a get scans
    little), oldest dropped first: memory a process keeps after its large gets. Objects
    kept but still held by their caller cost nothing extra while held."""

    def __init__(self, cap, count):
        self._objs = collections.deque()
        self._bytes = 0
        self._cap = cap
        self._count = count
        self._lock = threading.Lock()

    def take(self, size):
        """A kept object of exactly size bytes that only this cache holds, or None."""
        with self._lock:
            for i in range(len(self._objs)):
                o = self._objs[i]
                # References: the deque, o, and getrefcount's argument.
                if len(o) == size and sys.getrefcount(o) == 3:
                    del self._objs[i]
                    self._bytes -= size
                    ctypes.c_ssize_t.from_address(id(o) + _BYTES_HASH).value = -1
                    return o
            return None

    def keep(self, o):
        if self._cap <= 0 or len(o) > self._cap:
            return
        with self._lock:
            self._objs.append(o)
            self._bytes += len(o)
            while self._bytes > self._cap or len(self._objs) > self._count:
                self._bytes -= len(self._objs.popleft())


_KEEP_MIN = _HUGE_GET


# ob_shash sits just before ob_sval (CPython's PyBytesObject); checked here once, since a
# refilled object must not keep the hash of its old contents.
_BYTES_HASH = _BYTES_DATA - ctypes.sizeof(ctypes.c_ssize_t)
_probe = bytes(range(40))
assert ctypes.c_ssize_t.from_address(id(_probe) + _BYTES_HASH).value == -1
hash(_probe)
assert ctypes.c_ssize_t.from_address(id(_probe) + _BYTES_HASH).value == hash(_probe)
del _probe
_recycler = _Recycler(256 << 20, 8)


@_abi.tide_store_alloc_fn
def _get_alloc_cb(arg, size):
    """tide_store_get_with's allocator; runs on the calling thread (holding the GIL).
    It must return a pointer or NULL whatever happens: an exception escaping a ctypes
    callback leaves C with an undefined return value. So everything (MemoryError, a
    KeyboardInterrupt delivered here) is caught, kept, and raised again by get()."""
    try:
        b = _recycler.take(size) if size >= _KEEP_MIN else None
        if b is None:
            b = _pyapi.PyBytes_FromStringAndSize(None, size)
            if size >= _HUGE_GET:
                _huge(id(b) + _BYTES_DATA, size)
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


class SoftPinAction(enum.IntEnum):
    """Stock's SoftPinAction (replica.h): what a put or upsert does to the object's soft
    pin. PRESERVE keeps it (a new object has none), ENABLE pins it for soft_pin_ttl_ms
    (None: the master's --default_kv_soft_pin_ttl), DISABLE clears it."""
    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2

    def __str__(self):  # pybind11's enum str: "SoftPinAction.ENABLE"
        return f"{type(self).__name__}.{self.name}"


# ObjectDataType's names (stock types.h), for ReplicateConfig's __str__.
_DATA_TYPES = ["UNKNOWN", "KVCACHE", "TENSOR", "WEIGHT", "SAMPLE", "ACTIVATION", "GRADIENT",
               "OPTIMIZER_STATE", "METADATA", "GENERAL"]


class ReplicateConfig:
    """Mooncake's ReplicateConfig. replica_num, with_hard_pin, soft_pin_action,
    soft_pin_ttl_ms, preferred_segment(s), prefer_alloc_in_same_node and group_ids go to
    the master with every put; the other fields are kept for compatibility (no NoF/DFS
    tiers). with_soft_pin (stock's older bool) True with soft_pin_action PRESERVE asks for
    ENABLE, as the master reads that older layout."""

    def __init__(self):
        self.replica_num = 1
        self.group_ids = None
        self.with_hard_pin = False
        self.with_soft_pin = False
        self.soft_pin_action = SoftPinAction.PRESERVE
        self.soft_pin_ttl_ms = None  # stock's std::optional<uint64_t>: None = the default
        self.preferred_segment = ""
        self.preferred_segments = []
        self.prefer_alloc_in_same_node = False
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.preferred_nof_segments = []
        self.data_type = 0

    def __str__(self):
        """Stock's operator<< (replica.h), field for field."""
        def name(v, names):
            try:
                i = int(v)
            except (TypeError, ValueError):
                return str(v)
            return names[i] if 0 <= i < len(names) else "UNKNOWN"

        def lst(v):
            return ", ".join(str(x) for x in (v or []))

        ttl = self.soft_pin_ttl_ms
        s = (f"ReplicateConfig: {{ replica_num: {self.replica_num}, "
             f"nof_replica_num: {self.nof_replica_num}, "
             f"dfs_replica_num: {self.dfs_replica_num}, "
             f"soft_pin_action: {name(self.soft_pin_action, ['PRESERVE', 'ENABLE', 'DISABLE'])}, "
             f"soft_pin_ttl_ms: {'default' if ttl is None else ttl}, "
             f"with_hard_pin: {int(bool(self.with_hard_pin))}, "
             f"preferred_segments: [{lst(self.preferred_segments)}]")
        if self.preferred_segment:
            s += f", preferred_segment (deprecated): {self.preferred_segment}"
        s += (f", preferred_nof_segments: [{lst(self.preferred_nof_segments)}]"
              f", prefer_alloc_in_same_node: {int(bool(self.prefer_alloc_in_same_node))}"
              f", data_type: {name(self.data_type, _DATA_TYPES)}")
        host = getattr(self, "host_id", "")
        if host:
            s += f", host_id: {host}"
        if self.group_ids is not None:
            s += f", group_ids: [{lst(self.group_ids)}]"
        return s + " }"

    __repr__ = __str__


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
    rc.soft_pin_action, rc.soft_pin_ttl_ms = _soft_pin(g)
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


def _soft_pin(g):
    """(action, ttl in ms, 0 = unset) of a config's soft-pin fields (g reads one). A
    ttl of 0 or less is a bad argument: stock sends it and its master refuses it
    (INVALID_PARAMS), while 0 in the C struct means "unset"."""
    action = g("soft_pin_action", SoftPinAction.PRESERVE)
    action = SoftPinAction.PRESERVE if action is None else operator.index(action)
    if action not in tuple(SoftPinAction):
        raise _BadArg(f"soft_pin_action {action} is not a SoftPinAction")
    if action == SoftPinAction.PRESERVE and g("with_soft_pin", False):
        action = SoftPinAction.ENABLE
    ttl = g("soft_pin_ttl_ms", None)
    if ttl is not None:
        ttl = operator.index(ttl)
        if ttl <= 0:
            raise _BadArg("soft_pin_ttl_ms must be positive")
    return int(action), ttl or 0


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


# A batch call's per-key results start as these, so an entry the C call never reached
# (it failed before that key) is told apart from a result.
_UNTOUCHED = object()
_SENTINEL_INT = -(1 << 31)
_SENTINEL_I64 = -(1 << 63)


def _regroup(config, idx, n):
    """config for the keys idx of a call made for n keys: its per-key group_ids (stock's)
    taken at idx (an index may repeat: a key split into shards), the config itself when
    it has no per-key groups or idx is every key in order."""
    groups = getattr(config, "group_ids", None) if config is not None else None
    if not groups or len(groups) != n or list(idx) == list(range(n)):
        return config
    import copy
    c = copy.copy(config)
    c.group_ids = [groups[i] for i in idx]
    return c
