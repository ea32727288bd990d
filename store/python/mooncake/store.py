"""`mooncake.store`: MooncakeDistributedStore and ReplicateConfig over Tide.

Only methods that fully work are exposed (Mooncake's structured-object helper
picks its path by which attributes exist): setup, put, get, remove, is_exist,
get_size, close, get_hostname, health_check. Return codes are Mooncake's
(0 or a negative ErrorCode: -200 no space, -600 bad arguments, -704 missing).

The library is found through $LIBTIDESTORE, next to this package, or in a
build tree of the repository (build*/store/client/libtidestore.so).
"""
import ctypes
import glob
import os
import re
import sys

__all__ = ["MooncakeDistributedStore", "ReplicateConfig"]

# Mooncake ErrorCode values (mooncake-store types.h).
_OK = 0
_INTERNAL_ERROR = -1
_NO_AVAILABLE_HANDLE = -200
_INVALID_VERSION = -300
_INVALID_KEY = -400
_INVALID_PARAMS = -600
_REPLICA_IS_NOT_READY = -703
_OBJECT_NOT_FOUND = -704
_OBJECT_HAS_LEASE = -706
_LEASE_EXPIRED = -707
_TRANSFER_FAIL = -800
_RPC_FAIL = -900

_ERRNO_TO_MC = {
    0: _OK,
    2: _OBJECT_NOT_FOUND,      # ENOENT
    28: _NO_AVAILABLE_HANDLE,  # ENOSPC
    22: _INVALID_PARAMS,       # EINVAL
    71: _INVALID_VERSION,      # EPROTO
    11: _REPLICA_IS_NOT_READY, # EAGAIN
    16: _OBJECT_HAS_LEASE,     # EBUSY
    116: _LEASE_EXPIRED,       # ESTALE
    5: _TRANSFER_FAIL,         # EIO
    14: _TRANSFER_FAIL,        # EFAULT
    105: _INVALID_PARAMS,      # ENOBUFS (caller's buffer too small)
    111: _RPC_FAIL,            # ECONNREFUSED
    110: _RPC_FAIL,            # ETIMEDOUT
    104: _RPC_FAIL,            # ECONNRESET
}


def _mc_code(rc):
    if rc >= 0:
        return 0
    return _ERRNO_TO_MC.get(-rc, _INTERNAL_ERROR)


def _find_lib():
    env = os.environ.get("LIBTIDESTORE")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.path.join(here, "libtidestore.so")]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    cands += sorted(glob.glob(os.path.join(repo, "build*", "store", "client", "libtidestore.so")))
    for c in cands:
        if os.path.exists(c):
            return c
    raise ImportError("mooncake.store: libtidestore.so not found; set LIBTIDESTORE or build "
                      "Tide (meson setup build && ninja -C build)")


_lib = ctypes.CDLL(_find_lib())


class _Cfg(ctypes.Structure):
    _fields_ = [("local_hostname", ctypes.c_char_p), ("metadata_server", ctypes.c_char_p),
                ("global_segment_size", ctypes.c_uint64), ("local_buffer_size", ctypes.c_uint64),
                ("protocol", ctypes.c_char_p), ("master_server_addr", ctypes.c_char_p)]


_vp = ctypes.c_void_p
_lib.tide_store_create.argtypes = [ctypes.POINTER(_vp)]
_lib.tide_store_create.restype = ctypes.c_int
_lib.tide_store_setup.argtypes = [_vp, ctypes.POINTER(_Cfg)]
_lib.tide_store_setup.restype = ctypes.c_int
_lib.tide_store_put.argtypes = [_vp, ctypes.c_char_p, _vp, ctypes.c_size_t, ctypes.c_uint]
_lib.tide_store_put.restype = ctypes.c_int
_lib.tide_store_get_into.argtypes = [_vp, ctypes.c_char_p, _vp, ctypes.c_size_t]
_lib.tide_store_get_into.restype = ctypes.c_int64
_lib.tide_store_get_size.argtypes = [_vp, ctypes.c_char_p]
_lib.tide_store_get_size.restype = ctypes.c_int64
_lib.tide_store_is_exist.argtypes = [_vp, ctypes.c_char_p]
_lib.tide_store_is_exist.restype = ctypes.c_int
_lib.tide_store_remove.argtypes = [_vp, ctypes.c_char_p, ctypes.c_bool]
_lib.tide_store_remove.restype = ctypes.c_int
_lib.tide_store_endpoint.argtypes = [_vp]
_lib.tide_store_endpoint.restype = ctypes.c_char_p
_lib.tide_store_close.argtypes = [_vp]
_lib.tide_store_close.restype = None
_lib.tide_store_strerror.argtypes = [ctypes.c_int]
_lib.tide_store_strerror.restype = ctypes.c_char_p

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
    """Mooncake's ReplicateConfig. replica_num is honoured; the placement hints are
    accepted and kept (Tide's master places replicas on distinct segments)."""

    def __init__(self):
        self.replica_num = 1
        self.group_ids = None
        self.with_hard_pin = False
        self.with_soft_pin = False
        self.preferred_segment = ""
        self.preferred_segments = []
        self.prefer_alloc_in_same_node = False
        self.nof_replica_num = 0
        self.data_type = 0

    def __repr__(self):
        return f"ReplicateConfig(replica_num={self.replica_num})"


def _buffer(value):
    """(ctypes pointer, nbytes, keepalive) for any 1-D byte buffer."""
    mv = memoryview(value)
    if not mv.contiguous:
        raise ValueError("value must be a contiguous buffer")
    mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    n = mv.nbytes
    if n == 0:
        return None, 0, mv
    if mv.readonly:
        data = bytes(mv)  # ctypes cannot point into read-only memory without a copy
        return ctypes.cast(ctypes.c_char_p(data), _vp), n, data
    arr = (ctypes.c_char * n).from_buffer(mv)
    return ctypes.cast(arr, _vp), n, arr


class MooncakeDistributedStore:
    """Mooncake's distributed store client, backed by Tide."""

    def __init__(self):
        self._h = None
        self._hostname = ""

    def setup(self, *args, **kwargs):
        """setup(config: dict) or setup(local_hostname, metadata_server, global_segment_size,
        local_buffer_size, protocol, rdma_devices, master_server_addr, ...). 0 on success."""
        if len(args) == 1 and isinstance(args[0], dict):
            c = dict(args[0])
        else:
            names = ["local_hostname", "metadata_server", "global_segment_size",
                     "local_buffer_size", "protocol", "rdma_devices", "master_server_addr"]
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
        except ValueError as e:
            print(f"mooncake.store: setup: {e}", file=sys.stderr)
            return _INVALID_PARAMS
        if proto != "tcp":
            print(f"mooncake.store: setup: protocol {proto!r} is not available in this build "
                  "(no verbs transport); set protocol 'tcp' (MOONCAKE_PROTOCOL=tcp)",
                  file=sys.stderr)
            return _INVALID_PARAMS
        if self._h is not None:
            return _INVALID_PARAMS
        h = _vp()
        rc = _lib.tide_store_create(ctypes.byref(h))
        if rc != 0:
            return _mc_code(rc)
        cfg = _Cfg(host.encode(), meta.encode(), gss, lbs, proto.encode(), master.encode())
        rc = _lib.tide_store_setup(h, ctypes.byref(cfg))
        if rc != 0:
            print(f"mooncake.store: setup with master {master}: "
                  f"{_lib.tide_store_strerror(rc).decode()}", file=sys.stderr)
            _lib.tide_store_close(h)
            return _mc_code(rc)
        self._h = h
        self._hostname = (_lib.tide_store_endpoint(h) or b"").decode()
        return 0

    def _ready(self):
        if self._h is None:
            raise RuntimeError("mooncake.store: call setup() first")

    def put(self, key, value, config=None):
        """Store value (any 1-D byte buffer) under key. 0, or -200 when the store is full,
        -600 on bad arguments."""
        self._ready()
        replicas = 1 if config is None else int(getattr(config, "replica_num", 1) or 1)
        ptr, n, keep = _buffer(value)
        rc = _lib.tide_store_put(self._h, str(key).encode(), ptr, n, replicas)
        del keep
        return _mc_code(rc)

    def get(self, key):
        """The object's bytes; b"" when it does not exist (as Mooncake)."""
        self._ready()
        k = str(key).encode()
        for _ in range(3):
            size = _lib.tide_store_get_size(self._h, k)
            if size <= 0:
                return b""
            buf = ctypes.create_string_buffer(size)
            got = _lib.tide_store_get_into(self._h, k, buf, size)
            if got >= 0:
                return buf.raw[:got]
            if got != -105:  # ENOBUFS: replaced by a larger object meanwhile; retry
                return b""
        return b""

    def remove(self, key, force=False):
        """0, or -704 when the key does not exist."""
        self._ready()
        return _mc_code(_lib.tide_store_remove(self._h, str(key).encode(), bool(force)))

    def is_exist(self, key):
        """1 exists, 0 not, negative on error."""
        self._ready()
        rc = _lib.tide_store_is_exist(self._h, str(key).encode())
        return rc if rc >= 0 else _mc_code(rc)

    def get_size(self, key):
        """Object size in bytes, or a negative code (-704 missing)."""
        self._ready()
        rc = _lib.tide_store_get_size(self._h, str(key).encode())
        return rc if rc >= 0 else _mc_code(rc)

    def get_hostname(self):
        return self._hostname

    def health_check(self):
        """0 healthy, 1 not set up."""
        return 0 if self._h is not None else 1

    def close(self):
        if self._h is not None:
            _lib.tide_store_close(self._h)
            self._h = None
        return 0

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
