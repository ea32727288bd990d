"""`mooncake.buffer_pool`: Mooncake's public entry point for local-buffer pools.

BufferPool (alias RegisteredBufferPool) hands out leases of registered memory for
put_from/get_into: carved from the store's local buffer (local_buffer_size of setup),
then from overflow regions mapped on demand. mooncake.store exports the same classes, as
stock's does.

Threading: acquire/release from any thread; a lease pins its store (the C handle and the
memory the lease points into) until it is released.
"""
import bisect
import ctypes
import errno as _E
import gc
import operator
import threading
import time
import weakref

from mooncake._native import lib as _lib
from mooncake.store import (_CAPSULE_NAME, _STORES, _STORES_LOCK, MooncakeDistributedStore,
                            _pyapi)

__all__ = ["BufferPool", "RegisteredBufferPool", "BufferLease"]

_vp = ctypes.c_void_p

_GRAIN = 4096  # lease granularity: page-aligned leases
_POLL = 0.05  # a waiting acquire() also looks for leases dropped without release()


def _round(n, a):
    return (n + a - 1) // a * a


class _Extents:
    """First-fit allocator over [0, size): sorted free extents, merged on free."""

    def __init__(self, size):
        self.size = size
        self.starts = [0] if size else []
        self.lens = {0: size} if size else {}
        self.free = size

    def alloc(self, n):
        for i, s in enumerate(self.starts):
            ln = self.lens[s]
            if ln >= n:
                del self.lens[s]
                if ln == n:
                    del self.starts[i]
                else:
                    self.starts[i] = s + n
                    self.lens[s + n] = ln - n
                self.free -= n
                return s
        return None

    def release(self, off, n):
        self.free += n
        i = bisect.bisect_left(self.starts, off)
        end = off + n
        if i < len(self.starts) and self.starts[i] == end:
            n += self.lens.pop(end)
            del self.starts[i]
        if i > 0:
            p = self.starts[i - 1]
            if p + self.lens[p] == off:
                self.lens[p] += n
                return
        self.starts.insert(i, off)
        self.lens[off] = n

    def empty(self):
        return self.free == self.size


class _Region:
    """A mapped overflow region (tide_store_map_buffer), unmapped when its last lease
    is released."""

    def __init__(self, base, size):
        self.base = base
        self.ext = _Extents(size)


class _PoolTimeout(RuntimeError, TimeoutError):
    """BufferPool.acquire timed out (a RuntimeError, as Mooncake's, and a TimeoutError)."""


class BufferLease:
    """Memory leased from a BufferPool: ptr, size, buffer (a new writable memoryview each
    time), release(); a context manager that releases on exit."""

    __slots__ = ("_pool", "_ptr", "_size", "_alloc", "_region", "_off", "_view",
                 "_released", "__weakref__")

    def __init__(self, pool, ptr, size, alloc, region, off):
        self._pool = pool
        self._ptr = ptr
        self._size = size
        self._alloc = alloc
        self._region = region
        self._off = off
        self._released = False
        self._view = None  # weakref to the ctypes array every live view hangs on

    @property
    def ptr(self):
        if self._released:
            raise RuntimeError("buffer lease is closed")
        return self._ptr

    @property
    def size(self):
        return self._size

    @property
    def buffer(self):
        """A writable uint8 memoryview of the lease; while any such view (or a slice or
        an array over it) is alive the lease cannot be released, and it keeps the lease
        object alive."""
        if self._released:
            raise RuntimeError("buffer lease is closed")
        arr = self._view() if self._view is not None else None
        if arr is None:
            arr = (ctypes.c_ubyte * self._size).from_address(self._ptr)
            arr._lease = self
            self._view = weakref.ref(arr)
        return memoryview(arr).cast("B")

    def _views_alive(self):
        return self._view is not None and self._view() is not None

    def release(self):
        """Return the memory to the pool. Raises RuntimeError while memoryviews from
        .buffer (or arrays over them) are alive; a second call does nothing."""
        self._pool._release(self, check=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __del__(self):
        # May run inside any allocation (garbage collection), even while this thread
        # holds the pool's lock: queue it, the pool takes it back under its lock.
        if not self._released:
            self._pool._dropped.append(self)

    def __repr__(self):
        state = "released" if self._released else hex(self._ptr)
        return f"<BufferLease {state} size={self._size}>"


BufferLeaseView = memoryview


def _store_of(store):
    if isinstance(store, MooncakeDistributedStore):
        return store
    get = getattr(store, "_get_pyclient_capsule", None)
    if get is None:
        raise RuntimeError("BufferPool store parameter must be a MooncakeDistributedStore or "
                           "a store wrapper that implements _get_pyclient_capsule()")
    cap = get()
    if cap is None:
        raise RuntimeError("MooncakeDistributedStore is not initialized")
    if not _pyapi.PyCapsule_IsValid(cap, _CAPSULE_NAME):
        raise RuntimeError("store wrapper returned an unexpected PyClient capsule type")
    addr = _pyapi.PyCapsule_GetPointer(cap, _CAPSULE_NAME)
    with _STORES_LOCK:
        ref = _STORES.get(addr)
    s = ref() if ref is not None else None
    if s is None:
        raise RuntimeError("the capsule's store is closed")
    return s


class BufferPool:
    """Leases of registered memory for put_from/get_into: carved from the store's local
    buffer (local_buffer_size of setup), then from overflow regions mapped on demand
    (tide_store_map_buffer, in multiples of `alignment`, unmapped when unused).

    max_bytes: leased bytes at once (0: twice the local buffer; never less than it).
    min_size_class / max_size_class: validated (Mooncake's knobs); leases are rounded to
    4 KiB. alignment: overflow regions are multiples of it (a power of two). When
    exhausted, acquire() waits for a release (block_on_exhaustion, or block=True) up to
    timeout seconds (default_timeout; None = forever), else raises RuntimeError.
    max_regions: at most this many leases at once. prewarm is a no-op (the local buffer
    is mapped and registered at setup), as Mooncake's."""

    def __init__(self, store, max_bytes=0, min_size_class=64 * 1024, max_size_class=None,
                 alignment=8 * 1024 * 1024, block_on_exhaustion=True, default_timeout=None,
                 max_regions=None, prewarm_size=None, prewarm_count=0):
        st = _store_of(store)
        life = st._life
        if life is None or life.closing:
            raise RuntimeError("MooncakeDistributedStore is not initialized")
        max_bytes, min_size_class, alignment = (operator.index(max_bytes),
                                                operator.index(min_size_class),
                                                operator.index(alignment))
        if min_size_class <= 0 or alignment <= 0:
            raise RuntimeError("min_size_class and alignment must be positive")
        if alignment < ctypes.sizeof(_vp) or alignment & (alignment - 1):
            raise RuntimeError("alignment must be a power of two and at least sizeof(void*)")
        base, cap = st._lbuf
        if not cap:
            raise RuntimeError("BufferPool requires a store configured with a local buffer")
        if max_bytes < 0:
            raise RuntimeError("max_bytes must not be negative")
        self._max_bytes = 2 * cap if max_bytes == 0 else max(max_bytes, cap)
        self._max_size_class = (self._max_bytes if max_size_class is None
                                else operator.index(max_size_class))
        self._min_size_class = min_size_class
        self._alignment = alignment
        self._block = bool(block_on_exhaustion)
        self._timeout = None if default_timeout is None else float(default_timeout)
        self._max_regions = None if max_regions is None else operator.index(max_regions)
        self._store = st
        self._life = life
        with life.cv:
            if st._arena is None:
                # one allocator (and one condition) for the local buffer per store,
                # shared by every pool of that store
                st._arena = (_Region(base, cap - cap % _GRAIN),
                             threading.Condition(threading.Lock()))
        self._local, self._cv = st._arena
        self._regions = []
        self._dropped = []  # leases garbage-collected without release()
        self._used = 0
        self._active = 0
        self._closed = False
        self.stats = {"acquire": 0, "release": 0, "wait": 0, "overflow_map": 0,
                      "overflow_unmap": 0}
        if prewarm_size is not None and prewarm_count:
            self.prewarm(prewarm_size, prewarm_count)

    def acquire(self, size, block=None, timeout=None):
        """A lease of size bytes (page-aligned pointer)."""
        size = operator.index(size)
        if size < 0:
            raise RuntimeError("size must not be negative")
        should_block = self._block if block is None else bool(block)
        t = self._timeout if timeout is None else float(timeout)
        if t is not None and t < 0:
            raise RuntimeError("timeout must be non-negative")
        need = _round(max(size, 1), _GRAIN)
        if need > self._max_bytes:
            raise RuntimeError(f"requested buffer size {size} exceeds pool capacity "
                               f"{self._max_bytes}")
        deadline = None if t is None else time.monotonic() + t
        collected = False
        unpins = 0
        try:
            with self._cv:
                while True:
                    unpins += self._drain_locked()
                    if self._closed:
                        raise RuntimeError("buffer pool is closed")
                    lease = self._try_locked(size, need)
                    if lease is not None:
                        self.stats["acquire"] += 1
                        return lease
                    if not collected and (self._active or self._dropped):
                        # leases dropped without release() come back through __del__
                        collected = True
                        self._cv.release()
                        try:
                            gc.collect()
                        finally:
                            self._cv.acquire()
                        continue
                    if not should_block:
                        raise RuntimeError("buffer pool is exhausted")
                    self.stats["wait"] += 1
                    left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
                    if left <= 0:
                        raise _PoolTimeout("timed out waiting for buffer")
                    self._cv.wait(left)
        finally:
            for _ in range(unpins):
                self._life.unpin()

    buffer = acquire

    def _try_locked(self, size, need):
        if self._max_regions is not None and self._active >= self._max_regions:
            return None
        if self._used + need > self._max_bytes:
            return None
        if not self._life.pin():
            raise RuntimeError("the store is closed")
        try:
            region, off = None, None
            if need <= self._max_size_class:
                off = self._local.ext.alloc(need)
            if off is not None:
                region = self._local
            else:
                for r in self._regions:
                    off = r.ext.alloc(need)
                    if off is not None:
                        region = r
                        break
            if region is None:
                region = self._map_locked(need)
                if region is None:
                    self._life.unpin()
                    return None
                off = region.ext.alloc(need)
        except BaseException:
            self._life.unpin()
            raise
        self._used += need
        self._active += 1
        return BufferLease(self, region.base + off, size, need, region, off)

    def _map_locked(self, need):
        rsize = _round(need, self._alignment)
        h = self._life.h  # pinned by the caller
        p = _vp()
        r = _lib.tide_store_map_buffer(h, rsize, ctypes.byref(p))
        if r == -_E.ENOMEM:
            return None  # wait for releases
        if r != 0:
            raise RuntimeError(f"overflow buffer mapping failed: "
                               f"{_lib.tide_store_strerror(r).decode()}")
        self._life.pin()  # the region keeps the store alive until unmapped
        region = _Region(p.value, rsize)
        self._regions.append(region)
        self.stats["overflow_map"] += 1
        return region

    def _free_locked(self, lease):
        """Give a lease's memory back; the number of store pins to drop (after unlocking)."""
        lease._released = True
        lease._region.ext.release(lease._off, lease._alloc)
        self._used -= lease._alloc
        self._active -= 1
        unpins = 1
        region = lease._region
        if region is not self._local and region.ext.empty():
            self._regions.remove(region)
            _lib.tide_store_unmap_buffer(self._life.h, region.base)  # pinned: alive
            self.stats["overflow_unmap"] += 1
            unpins += 1
        self.stats["release"] += 1
        self._cv.notify_all()
        return unpins

    def _drain_locked(self):
        unpins = 0
        while self._dropped:
            lease = self._dropped.pop()
            if not lease._released:
                unpins += self._free_locked(lease)
        return unpins

    def _release(self, lease, check):
        with self._cv:
            if lease._released:
                return
            if check and lease._views_alive():
                raise RuntimeError("cannot release buffer while exported views exist")
            unpins = self._free_locked(lease) + self._drain_locked()
        for _ in range(unpins):
            self._life.unpin()

    def prewarm(self, size, count):
        """No-op (as Mooncake's): the local buffer is mapped and registered at setup."""
        operator.index(size)
        operator.index(count)

    def close(self):
        """Refuse further acquires. Raises RuntimeError while leases are active; a second
        call does nothing."""
        with self._cv:
            if self._closed:
                return
            unpins = self._drain_locked()
            if unpins:
                self._cv.release()
                try:
                    for _ in range(unpins):
                        self._life.unpin()
                finally:
                    self._cv.acquire()
            if self._active:
                raise RuntimeError("cannot close buffer pool with active leases")
            self._closed = True
            self._cv.notify_all()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


RegisteredBufferPool = BufferPool
RegisteredBufferLease = BufferLease
