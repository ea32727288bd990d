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
import sys
import threading
import weakref

from mooncake import _client_http
from mooncake._native import abi as _abi, lib as _lib
from mooncake._store_base import (  # noqa: F401 (ReplicateConfig, SoftPinAction re-exported)
    ReplicateConfig, SoftPinAction, _SENTINEL_I64, _SENTINEL_INT, _UNTOUCHED, _BadArg, _CAPSULE_NAME, _Cfg, _E, _Frag, _GET_GUESS, _INVALID_PARAMS,
    _Life, _NO_RELEASE, _REGISTER_CODES, _STORES, _STORES_LOCK, _UNREGISTER_CODES, _buffer,
    _cp, _KEEP_MIN, _get_alloc_cb, _get_tls, _key, _keys, _mc_code, _parse_size, _ptr,
    _ptrs_sizes, _recycler, _pyapi, _rc, _seq, _size, _sz, _vp)

from mooncake._store_multi import BufferHandle, MooncakeHostMemAllocator, _MultiCalls
from mooncake._store_parallel import ParallelAxis, ReadTarget, TensorParallelism, _ParallelCalls  # noqa: F401,E501
from mooncake._store_replica import (Descriptor, DiskDescriptor, MemoryDescriptor,
                                     ReplicaDescriptor, ReplicaStatus, _ReplicaCalls)
from mooncake._store_session import _SessionCalls
from mooncake._store_tensor import _TensorCalls

__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "SoftPinAction", "BufferHandle",
           "MooncakeHostMemAllocator", "ReplicaStatus", "Descriptor", "MemoryDescriptor",
           "DiskDescriptor", "ReplicaDescriptor"]


def _count_or_code(r):
    """A C result that is a count or size when not negative, else Mooncake's code."""
    return r if r >= 0 else _mc_code(r)


class MooncakeDistributedStore(_MultiCalls, _TensorCalls, _ParallelCalls, _ReplicaCalls,
                               _SessionCalls):
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
            # Stock's client HTTP server (_client_http.py): /metrics, /metrics/summary, /health.
            http_on = _client_http.parse_bool(c.get("enable_client_http_server", False))
            http_port = _client_http.parse_port(c.get("client_http_port",
                                                      _client_http.DEFAULT_PORT))
            if http_port is None or (http_on and not 0 < http_port < 65536):
                raise ValueError(f"invalid client_http_port {c.get('client_http_port')!r}")
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
            # agent 0: the node file's TIDE_AGENT decides; agent_socket NULL: its socket
            # (setup_dummy asks for the agent and may name its socket).
            agent, sock = c.get("_agent", 0), c.get("_agent_socket")
            cfg = _Cfg(host.encode(), meta.encode(), gss, lbs, proto.encode(), master.encode(),
                       agent, sock.encode() if sock else None)
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
            self._http = _client_http.start(self, http_port) if http_on else None
        return 0

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address):
        """Stock's standalone client (SGLang's standalone storage): a client that owns no
        segment and runs no transfer engine, served by a long-lived process that does. In
        Tide that process is the node's agent (tide-node): this attaches to it
        (TIDE_AGENT=required for this store). server_address names the agent's UNIX
        socket when it is a path ("/run/tide/agent.sock" or "unix:/..."); stock's
        "host:port" of a RealClient service cannot be served, so any other value takes the
        node file's TIDE_AGENT_SOCKET, and this says so. mem_pool_size is the caller's
        host pool (MooncakeHostMemAllocator memory it registers with register_buffer); it
        needs no set-up here. 0, or -600 / the setup's code when no agent answers."""
        try:
            lbs = _parse_size(local_buffer_size, "local_buffer_size")
            _parse_size(mem_pool_size, "mem_pool_size")
        except ValueError as e:
            print(f"mooncake.store: setup_dummy: {e}", file=sys.stderr)
            return _INVALID_PARAMS
        addr = str(server_address or "")
        sock = addr[5:] if addr.startswith("unix:") else addr if addr.startswith("/") else None
        if addr and sock is None:
            print(f"mooncake.store: setup_dummy: {addr!r} is not a UNIX socket path; Tide's "
                  "standalone clients attach to the node agent, at the node file's "
                  "TIDE_AGENT_SOCKET", file=sys.stderr)
        env = os.environ
        return self.setup({"local_hostname": env.get("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
                           "global_segment_size": 0, "local_buffer_size": lbs,
                           "_agent": _abi.TIDE_STORE_AGENT_REQUIRED, "_agent_socket": sock})

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
            _client_http.stop(self.__dict__.pop("_http", None))
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
        if b is not None and len(b) >= _KEEP_MIN:
            _recycler.keep(b)  # refilled by a later get once the caller drops it
        if exc is not None and not isinstance(exc, MemoryError):
            raise exc  # e.g. KeyboardInterrupt during the get
        if rc != 0 or b is None:
            return b""
        # Through an agent the object may have shrunk between its size and its read.
        return b if n.value == len(b) else b[:n.value]

    def _keyed(self, what, key, call):
        """call(C handle, key bytes) for a one-key method: -600 for a bad key or a store
        that is not set up; the call runs between _enter and _leave."""
        k = _key(key, what)
        if k is None:
            return _INVALID_PARAMS
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            return call(h, k)
        finally:
            self._leave()

    def remove(self, key, force=False):
        """0, -704 when the key does not exist, -706 when leased (force False)."""
        return self._keyed("remove", key,
                           lambda h, k: _mc_code(_lib.tide_store_remove(h, k, bool(force))))

    def is_exist(self, key):
        """1 exists, 0 not, negative on error."""
        return self._keyed("is_exist", key,
                           lambda h, k: _count_or_code(_lib.tide_store_is_exist(h, k)))

    def get_size(self, key):
        """Object size in bytes, or a negative code (-704 missing)."""
        return self._keyed("get_size", key,
                           lambda h, k: _count_or_code(_lib.tide_store_get_size(h, k)))

    def remove_all(self, force=False):
        """Number of objects removed, or a negative code."""
        h = self._enter()
        if h is None:
            return _INVALID_PARAMS
        try:
            return _count_or_code(_lib.tide_store_remove_all(h, bool(force)))
        finally:
            self._leave()

    def remove_by_regex(self, pattern, force=False):
        """Remove every key matching the regular expression (evaluated by the master);
        the number removed, or a negative code (-600 bad pattern)."""
        return self._keyed("remove_by_regex", pattern, lambda h, k: _count_or_code(
            _lib.tide_store_remove_by_regex(h, k, bool(force))))

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
            return _count_or_code(_lib.tide_store_get_into(h, k, p or None, n))
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



_POOL_NAMES = ("BufferPool", "RegisteredBufferPool", "BufferLease", "RegisteredBufferLease")


def __getattr__(name):
    """BufferPool lives in mooncake.buffer_pool, which imports this module; mooncake.store
    exports it too, as stock's does, loaded at first use so either may be imported first."""
    if name in _POOL_NAMES:
        from mooncake import buffer_pool
        return getattr(buffer_pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ += ["BufferPool", "RegisteredBufferPool", "BufferLease"]
