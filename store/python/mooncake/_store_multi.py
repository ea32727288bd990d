"""The calls of stock's MooncakeDistributedStore that take or give an object in pieces, or
replace one: multi-buffer batches (SGLang HiCache, vLLM's store connector), put_parts and
buffer handles (LMCache), put_batch/get_batch and the upsert family (scripts and
services), and MooncakeHostMemAllocator (SGLang's host KV pool).

Every put here is one tide_store_batch_put_parts() call: the pieces are written from
where they are, straight to the replicas (no gather copy in this process), and an upsert
is the same call with TIDE_STORE_PUT_UPSERT (Mooncake's Upsert RPCs: an existing key gets
the new value). Multi-buffer gets are one tide_store_batch_get_into_parts() call, read
straight into the buffers. Return values and codes are stock's, per method below.

A mixin of mooncake.store.MooncakeDistributedStore: it uses the store's _enter/_leave
(calls in flight against close) and _batch.
"""
import ctypes
import functools
import operator
import os
import sys
import threading

from mooncake._native import abi as _abi, lib as _lib
from mooncake._store_base import (_BadArg, _E, _INVALID_PARAMS, _NO_RELEASE, _SENTINEL_I64,
                                  _SENTINEL_INT, _UNTOUCHED, _buffer, _cp, _key, _keys,
                                  _mc_code, _ptr, _rc, _regroup, _seq, _size, _sz, _vp)

__all__ = ["BufferHandle", "MooncakeHostMemAllocator"]

_Part = _abi.tide_store_part


def _parts_arrays(groups):
    """(struct tide_store_part array, size_t nparts array) for per-key lists of (ptr, len)."""
    flat = [pl for g in groups for pl in g]
    parts = (_Part * max(1, len(flat)))()
    for i, (p, n) in enumerate(flat):
        parts[i].buf, parts[i].len = p, n
    nparts = (_sz * max(1, len(groups)))(*[len(g) for g in groups])
    return parts, nparts


# ------------------------------------------------------------------------ BufferHandle

class BufferHandle:
    """An object read into registered memory of the store (stock's BufferHandle): ptr(),
    size(), len(), and the 1-D unsigned-byte buffer protocol (memoryview(h),
    numpy.frombuffer(h), torch.frombuffer(h)) over that memory, no copy. The memory is a
    lease of the store's local buffer, given back when the handle and every view of it are
    gone (a view keeps the handle alive)."""

    __slots__ = ()

    def ptr(self):
        return ctypes.addressof(self)

    def size(self):
        return ctypes.sizeof(self)

    def __repr__(self):
        return f"BufferHandle(ptr={self.ptr():#x}, size={self.size()})"


@functools.lru_cache(maxsize=512)
def _handle_type(n):
    """The BufferHandle type of n bytes: a ctypes byte array (which gives the buffer
    protocol) with BufferHandle's methods."""
    return type("BufferHandle", (BufferHandle, ctypes.c_ubyte * n), {"__slots__": ()})


def _make_handle(lease, n):
    h = _handle_type(n).from_address(lease.ptr)
    # from_address does not own the memory: the handle holds the lease (ctypes instances
    # keep a dict) and the lease's finalizer gives it back once the handle is gone.
    h.__dict__["_lease"] = lease
    return h


_alloc_tls = threading.local()


@_abi.tide_store_alloc_fn
def _lease_alloc_cb(arg, size):
    """tide_store_get_with's allocator for get_buffer: a lease of the store's local
    buffer of the object's size, or NULL (the get then fails with -ENOMEM). Runs on the
    calling thread; like store.py's _get_alloc_cb it must return whatever happens."""
    try:
        lease = _alloc_tls.pool.acquire(max(1, size), block=False)
        _alloc_tls.lease = lease
        return lease.ptr
    except BaseException as e:  # noqa: B036 (reported by the caller)
        _alloc_tls.exc = e
        return None


# ------------------------------------------------------------------ host memory for pools

class MooncakeHostMemAllocator:
    """Stock's host-memory allocator for KV pools (SGLang HiCache): alloc(size) returns the
    address of `size` bytes of shared memory (a memfd mapped MAP_SHARED, so another
    process given its descriptor can map the same pages); free(address) unmaps it (0, or
    -1 for an address this allocator did not give out). fd(address) is the memfd."""

    _PROT_RW, _MAP_SHARED = 0x3, 0x01

    def __init__(self):
        self._lock = threading.Lock()
        self._maps = {}
        libc = ctypes.CDLL(None, use_errno=True)
        self._mmap = libc.mmap
        self._mmap.restype = _vp
        self._mmap.argtypes = [_vp, _sz, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_long]
        self._munmap = libc.munmap
        self._munmap.restype = ctypes.c_int
        self._munmap.argtypes = [_vp, _sz]

    def alloc(self, size):
        size = operator.index(size)
        if size <= 0:
            raise ValueError("MooncakeHostMemAllocator.alloc: size must be positive")
        fd = os.memfd_create("mooncake-host-mem", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            addr = self._mmap(None, size, self._PROT_RW, self._MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                err = ctypes.get_errno()
                raise MemoryError(f"MooncakeHostMemAllocator.alloc({size}): mmap: "
                                  f"{os.strerror(err)}")
        except BaseException:
            os.close(fd)
            raise
        with self._lock:
            self._maps[addr] = (fd, size)
        return addr

    def free(self, addr):
        with self._lock:
            ent = self._maps.pop(operator.index(addr), None)
        if ent is None:
            return -1
        fd, size = ent
        self._munmap(addr, size)
        os.close(fd)
        return 0

    def fd(self, addr):
        with self._lock:
            ent = self._maps.get(operator.index(addr))
        return -1 if ent is None else ent[0]


# -------------------------------------------------------------------------- the calls

class _MultiCalls:
    """The methods above, on MooncakeDistributedStore (see the module's docstring)."""

    # ------------------------------------------------------------- puts in parts
    def _put_groups(self, what, keys, groups, config, upsert):
        """Store len(keys) objects, key i being the concatenation of groups[i], a list of
        (address, length) or None (that key -600). Per key 0 or a negative code."""
        n, karr = _keys(keys, what)
        if karr is not None and len(groups) != n:
            return [_INVALID_PARAMS] * n
        bad = [g is None or not g or any(ln < 0 or (ln and not p) for p, ln in g) or
               sum(ln for _, ln in g) == 0 for g in (groups if karr is not None else [])]

        def call(h, karr):
            # Results go through _mc_code: a key refused here is -EINVAL (-600 there).
            ok = [i for i in range(n) if not bad[i]]
            if not ok:
                return 0, [-_E.EINVAL] * n
            sub = karr if len(ok) == n else (_cp * len(ok))(*[karr[i] for i in ok])
            parts, nparts = _parts_arrays([[(p, ln) for p, ln in groups[i] if ln]
                                           for i in ok])
            rc, keep = _rc(_regroup(config, ok, n), len(ok))
            out = (ctypes.c_int * len(ok))(*([_SENTINEL_INT] * len(ok)))
            r = _lib.tide_store_batch_put_parts(
                h, sub, parts, nparts, len(ok), None if rc is None else ctypes.byref(rc),
                _abi.TIDE_STORE_PUT_UPSERT if upsert else 0, out)
            del keep, parts
            res = [-_E.EINVAL] * n
            for j, i in enumerate(ok):
                res[i] = _UNTOUCHED if out[j] == _SENTINEL_INT else out[j]
            return r, res
        return self._batch(n, karr, _INVALID_PARAMS, call, _mc_code)

    def _one_put(self, what, key, group, config, upsert):
        if _key(key, what) is None:
            return _INVALID_PARAMS
        return self._put_groups(what, [key], [group], config, upsert)[0]

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes, config=None):
        """Key i's value is the concatenation of the buffers all_buffer_ptrs[i] (addresses)
        of all_sizes[i] bytes. Per key 0 or a negative code (-200 no space, -600 bad
        arguments: lists of different lengths, a null address, nothing to store)."""
        return self._put_groups("batch_put_from_multi_buffers", keys,
                                _groups(keys, all_buffer_ptrs, all_sizes), config, False)

    def put_parts(self, key, *parts, config=None):
        """Store the concatenation of parts (any contiguous buffers) under key: 0 or a
        negative code."""
        group, keep = _buffer_group(parts)
        r = self._one_put("put_parts", key, group, config, False)
        del keep
        return r

    def put_from_with_metadata(self, key, buffer_ptr, metadata_buffer_ptr, size,
                               metadata_size, config=None):
        """Store one object: metadata_size bytes at metadata_buffer_ptr, then size bytes at
        buffer_ptr (stock's layout, metadata first), written from both buffers in place.
        0 or a negative code. As stock: size 0 stores nothing and returns 0 (warned);
        config.prefer_alloc_in_same_node is refused with -1."""
        if config is not None and getattr(config, "prefer_alloc_in_same_node", False):
            print("mooncake.store: put_from_with_metadata: prefer_alloc_in_same_node is not "
                  "supported", file=sys.stderr)
            return -1
        try:
            n, m = _size(size), _size(metadata_size)
            group = [(_ptr(metadata_buffer_ptr), m), (_ptr(buffer_ptr), n)]
        except _BadArg:
            return _INVALID_PARAMS
        if n == 0:
            print(f"mooncake.store: put_from_with_metadata {key!r}: empty data, nothing "
                  "stored", file=sys.stderr)
            return 0
        if any(ln and not p for p, ln in group):
            return _INVALID_PARAMS
        return self._one_put("put_from_with_metadata", key, [g for g in group if g[1]],
                             config, False)

    def upsert_parts(self, key, *parts, config=None):
        """put_parts, replacing an existing value."""
        group, keep = _buffer_group(parts)
        r = self._one_put("upsert_parts", key, group, config, True)
        del keep
        return r

    def upsert(self, key, value, config=None):
        """put(), replacing an existing value (any size): 0 or a negative code."""
        group, keep = _buffer_group([value])
        r = self._one_put("upsert", key, group, config, True)
        del keep
        return r

    def upsert_from(self, key, buffer_ptr, size, config=None):
        """put_from(), replacing an existing value: 0 or a negative code."""
        try:
            group = [(_ptr(buffer_ptr), _size(size))]
        except _BadArg:
            return _INVALID_PARAMS
        return self._one_put("upsert_from", key, group, config, True)

    def batch_upsert_from(self, keys, buffer_ptrs, sizes, config=None):
        """batch_put_from(), replacing existing values: per key 0 or a negative code."""
        return self._put_groups("batch_upsert_from", keys,
                                _groups(keys, [[p] for p in buffer_ptrs],
                                        [[s] for s in sizes]), config, True)

    def put_batch(self, keys, values, config=None):
        """Store values[i] (any contiguous buffers) under keys[i]: 0 when every key was
        stored, else the first key's negative code (stock returns one code)."""
        return self._values_batch("put_batch", keys, values, config, False)

    def upsert_batch(self, keys, values, config=None):
        """put_batch, replacing existing values: one code."""
        return self._values_batch("upsert_batch", keys, values, config, True)

    def _values_batch(self, what, keys, values, config, upsert):
        _seq(keys, what)
        _seq(values, what, "values")
        vals, klist = list(values), list(keys)
        if len(vals) != len(klist) or not klist:
            return _INVALID_PARAMS
        groups, keeps = [], []
        for v in vals:
            g, k = _buffer_group([v])
            groups.append(g)
            keeps.append(k)
        res = self._put_groups(what, klist, groups, config, upsert)
        del keeps
        return next((r for r in res if r != 0), 0)

    # ------------------------------------------------------------------ gets
    def get_batch(self, keys):
        """The objects' bytes, one entry per key (b"" for a missing key or an error)."""
        _seq(keys, "get_batch")
        return [self.get(k) for k in keys]

    def _handle_pool(self):
        pool = self.__dict__.get("_hpool")
        if pool is None:
            from mooncake.buffer_pool import BufferPool
            with self._setup_lock:
                pool = self.__dict__.get("_hpool")
                if pool is None:
                    pool = BufferPool(self, block_on_exhaustion=False)
                    self.__dict__["_hpool"] = pool
        return pool

    def get_buffer(self, key):
        """The object read into the store's registered local buffer, as a BufferHandle
        (buffer protocol, ptr(), size()); None when it does not exist, on error, or when
        the local buffer (local_buffer_size of setup) cannot hold it now."""
        k = _key(key, "get_buffer")
        if k is None:
            return None
        h = self._enter()
        if h is None:
            return None
        try:
            try:
                pool = self._handle_pool()
            except RuntimeError as e:
                print(f"mooncake.store: get_buffer: {e}", file=sys.stderr)
                return None
            return self._get_handle(h, k, pool)
        finally:
            self._leave()

    def batch_get_buffer(self, keys):
        """get_buffer for each key: a BufferHandle or None per key."""
        _seq(keys, "batch_get_buffer")
        return [self.get_buffer(k) for k in keys]

    @staticmethod
    def _get_handle(h, k, pool):
        p, n = _vp(), _sz()
        saved = tuple(getattr(_alloc_tls, a, None) for a in ("pool", "lease", "exc"))
        _alloc_tls.pool, _alloc_tls.lease, _alloc_tls.exc = pool, None, None
        try:
            rc = _lib.tide_store_get_with(h, k, _lease_alloc_cb, _NO_RELEASE, None,
                                          ctypes.byref(p), ctypes.byref(n))
            lease, exc = _alloc_tls.lease, _alloc_tls.exc
        finally:
            _alloc_tls.pool, _alloc_tls.lease, _alloc_tls.exc = saved
        if exc is not None and not isinstance(exc, (RuntimeError, MemoryError)):
            if lease is not None:
                lease.release()
            raise exc
        if rc != 0 or lease is None:
            if lease is not None:
                lease.release()
            if rc == -_E.ENOMEM or exc is not None:
                print(f"mooncake.store: get_buffer {k.decode(errors='replace')!r}: the "
                      "local buffer cannot hold the object now (local_buffer_size of "
                      "setup)", file=sys.stderr)
            return None
        return _make_handle(lease, n.value)

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     prefer_alloc_in_same_node=False):
        """Read key i into the buffers all_buffer_ptrs[i] of all_sizes[i] bytes, filling
        them in order (one tide_store_batch_get_into_parts() call: one lookup and one
        engine batch, the bytes land in the buffers). Per key the object's size (bytes
        read), or a negative code: -704 missing, -600 the buffers together are smaller
        than the object (stock's answer) or bad arguments."""
        del prefer_alloc_in_same_node  # a placement hint for puts; reads take any replica
        n, karr = _keys(keys, "batch_get_into_multi_buffers")
        groups = _groups(keys, all_buffer_ptrs, all_sizes) if karr is not None else []
        if karr is None or len(groups) != n:
            return [_INVALID_PARAMS] * n
        bad = [g is None or any(ln < 0 or (ln and not p) for p, ln in g) for g in groups]

        def call(h, karr):
            # A key refused here is -EINVAL for _mc_code (-600); the others go to C.
            ok = [i for i in range(n) if not bad[i]]
            if not ok:
                return 0, [-_E.EINVAL] * n
            sub = karr if len(ok) == n else (_cp * len(ok))(*[karr[i] for i in ok])
            parts, nparts = _parts_arrays([groups[i] for i in ok])
            out = (ctypes.c_int64 * len(ok))(*([_SENTINEL_I64] * len(ok)))
            r = _lib.tide_store_batch_get_into_parts(h, sub, parts, nparts, len(ok), out)
            del parts
            res = [-_E.EINVAL] * n
            for j, i in enumerate(ok):
                res[i] = _UNTOUCHED if out[j] == _SENTINEL_I64 else out[j]
            return r, res

        def code(v):
            return v if v >= 0 else _mc_code(v)
        return self._batch(n, karr, _INVALID_PARAMS, call, code)


def _groups(keys, all_ptrs, all_sizes):
    """Per key a list of (address, length), or None for a key whose lists are unusable;
    [] when the outer lists do not have one entry per key."""
    try:
        nk = len(keys)
        ptrs, sizes = list(all_ptrs), list(all_sizes)
    except TypeError:
        return []
    if len(ptrs) != nk or len(sizes) != nk:
        return []
    out = []
    for p, s in zip(ptrs, sizes):
        try:
            p, s = list(p), list(s)
            if len(p) != len(s):
                out.append(None)
                continue
            out.append([(operator.index(a), operator.index(b)) for a, b in zip(p, s)])
        except TypeError:
            out.append(None)
    return out


def _buffer_group(values):
    """[(address, length)] of buffers and what keeps them alive; None for a bad buffer."""
    group, keep = [], []
    for v in values:
        try:
            p, n, k = _buffer(v)
        except (_BadArg, TypeError):
            return None, keep
        keep.append(k)
        group.append((p or 0, n))
    return group, keep
