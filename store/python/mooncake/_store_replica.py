"""Stock's replica descriptors (mooncake-integration/store/store_py.cpp over replica.h):
ReplicaStatus, Descriptor (AllocatedBuffer::Descriptor), MemoryDescriptor, DiskDescriptor
and ReplicaDescriptor, and the calls that return them, get_replica_desc and
batch_get_replica_desc, over tide_store_batch_get_replicas() (one BatchGetReplicaList
for the call; the library's result block is copied into these objects and freed before
the call returns). Also stock's replica administration, batch_replica_clear(keys,
segment_name=""), over tide_store_batch_replica_clear() (one BatchReplicaClear).

As stock: get_replica_desc(key) is a list of ReplicaDescriptor, [] when the key is
missing or the lookup failed; batch_get_replica_desc(keys) a dict key -> list holding
only the keys that were found. vLLM's tier logging calls is_memory_replica(),
is_disk_replica() and is_local_disk_replica() on them.

A mixin of mooncake.store.MooncakeDistributedStore: it uses the store's _enter/_leave.
"""
import ctypes
import enum
import os
import sys

from mooncake._native import abi as _abi, lib as _lib
from mooncake._store_base import _BadArg, _kb, _seq

__all__ = ["ReplicaStatus", "Descriptor", "MemoryDescriptor", "DiskDescriptor",
           "ReplicaDescriptor"]

_MEMORY, _NOF, _DISK, _LOCAL_DISK, _DFS = (
    _abi.TIDE_STORE_REPLICA_MEMORY, _abi.TIDE_STORE_REPLICA_NOF, _abi.TIDE_STORE_REPLICA_DISK,
    _abi.TIDE_STORE_REPLICA_LOCAL_DISK, _abi.TIDE_STORE_REPLICA_DFS)


class ReplicaStatus(enum.IntEnum):
    """Stock's ReplicaStatus (replica.h), names and values."""
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5

    def __str__(self):  # pybind11's enum str: "ReplicaStatus.COMPLETE"
        return f"{type(self).__name__}.{self.name}"


class Descriptor:
    """Stock's Descriptor (AllocatedBuffer::Descriptor): where a memory replica's bytes
    are: size, buffer_address (in the holder's segment), transport_endpoint (the holder's
    transfer-engine segment name)."""

    __slots__ = ("size", "buffer_address", "transport_endpoint")

    def __init__(self, size=0, buffer_address=0, transport_endpoint=""):
        self.size = size
        self.buffer_address = buffer_address
        self.transport_endpoint = transport_endpoint

    def __repr__(self):
        return (f"<Descriptor size={self.size} buffer_address={self.buffer_address} "
                f"transport_endpoint={self.transport_endpoint}>")


class MemoryDescriptor:
    """Stock's MemoryDescriptor: buffer_descriptor, a Descriptor."""

    __slots__ = ("buffer_descriptor",)

    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor

    def __repr__(self):
        return f"<MemoryDescriptor buffer_descriptor={self.buffer_descriptor!r}>"


class DiskDescriptor:
    """Stock's DiskDescriptor: file_path, object_size."""

    __slots__ = ("file_path", "object_size")

    def __init__(self, file_path="", object_size=0):
        self.file_path = file_path
        self.object_size = object_size

    def __repr__(self):
        return f"<DiskDescriptor file_path={self.file_path} object_size={self.object_size}>"


class ReplicaDescriptor:
    """Stock's ReplicaDescriptor (Replica::Descriptor): status, the is_*_replica()
    predicates and the typed getters, which raise RuntimeError for another kind (stock's
    std::runtime_error). NoF replicas answer False to all three predicates, as stock's."""

    __slots__ = ("status", "_type", "_desc")

    def __init__(self, rtype, status, desc):
        try:
            self.status = ReplicaStatus(status)
        except ValueError:
            self.status = status  # a status this package does not know: kept as the int
        self._type = rtype
        self._desc = desc

    def is_memory_replica(self):
        return self._type == _MEMORY

    def is_disk_replica(self):
        return self._type == _DISK

    def is_local_disk_replica(self):
        return self._type == _LOCAL_DISK

    def get_memory_descriptor(self):
        if self._type != _MEMORY:
            raise RuntimeError("Expected MemoryDescriptor")
        return self._desc

    def get_disk_descriptor(self):
        if self._type != _DISK:
            raise RuntimeError("Expected DiskDescriptor")
        return self._desc

    def __repr__(self):
        kind = {_MEMORY: "memory", _NOF: "nof", _DISK: "disk", _LOCAL_DISK: "local_disk",
                _DFS: "dfs"}.get(self._type, "?")
        return f"<ReplicaDescriptor {kind} status={self.status} {self._desc!r}>"


def _replica(p):
    """A ReplicaDescriptor from one struct tide_store_replica (strings copied)."""
    ep, path = p.transport_endpoint or b"", p.file_path or b""
    ep, path = ep.decode(errors="replace"), path.decode(errors="replace")
    if p.type in (_MEMORY, _NOF):
        desc = MemoryDescriptor(Descriptor(p.size, p.buffer_address, ep))
    elif p.type in (_DISK, _DFS):
        desc = DiskDescriptor(path, p.size)
    else:  # local disk: stock's LocalDiskDescriptor has no Python class; keep its fields
        desc = Descriptor(p.size, 0, ep)
    return ReplicaDescriptor(p.type, p.status, desc)


class _ReplicaCalls:
    """get_replica_desc and batch_get_replica_desc on MooncakeDistributedStore."""

    def _replicas(self, keys, what):
        """[(key as given, [ReplicaDescriptor] or None for a key not found/failed)];
        [] before setup or when the call failed as a whole (stock logs and answers empty
        then too)."""
        _seq(keys, what)
        ks = [_kb(k, what) for k in keys]
        if not ks or any(b"\0" in b for b in ks):
            return []
        h = self._enter()
        if h is None:
            return []
        out = ctypes.POINTER(_abi.tide_store_replicas)()
        try:
            arr = (ctypes.c_char_p * len(ks))(*ks)
            if _lib.tide_store_batch_get_replicas(h, arr, len(ks), ctypes.byref(out)) != 0:
                return []
            try:
                res = []
                for i, k in enumerate(keys):
                    e = out[i]
                    res.append((k, None if e.err != 0 else
                                [_replica(e.v[j]) for j in range(e.n)]))
                return res
            finally:
                _lib.tide_store_replicas_free(out)
        except _BadArg:
            return []
        finally:
            self._leave()

    def get_replica_desc(self, key):
        """The replicas of key as stock's ReplicaDescriptor list; [] when the key is
        missing (or not complete yet, or on an error), as stock."""
        res = self._replicas([key], "get_replica_desc")
        return (res[0][1] or []) if res else []

    def batch_get_replica_desc(self, keys):
        """{key: [ReplicaDescriptor]} for the keys found; a missing key (or one whose
        lookup failed) is not in the dict, as stock."""
        out = {}
        for k, reps in self._replicas(keys, "batch_get_replica_desc"):
            if reps is not None:
                out[k.decode(errors="surrogateescape") if isinstance(k, (bytes, bytearray))
                    else k] = reps
        return out

    def batch_replica_clear(self, keys, segment_name=""):
        """Stock's batch_replica_clear: ask the master to clear the replicas of keys this
        client wrote, those on the segments named segment_name (a client's
        local_hostname), or the whole objects when it is "". The master skips, silently,
        keys absent, written by another client, under a read lease (read in the last
        default_kv_lease_ttl) or still being written, and with a segment name those with
        no replica there. Through a node agent the agent is the writer the master knows.
        Returns the keys cleared (str), in the order given; [] before setup or when the
        call failed (stock logs and answers empty; so does this, on stderr)."""
        what = "batch_replica_clear"
        _seq(keys, what)
        ks = [_kb(k, what) for k in keys]
        if not isinstance(segment_name, (str, bytes, bytearray)):
            raise TypeError(f"{what}(): segment_name must be str, not "
                            f"{type(segment_name).__name__}")
        seg = _kb(segment_name, what)
        if b"\0" in seg:
            return []  # no segment has such a name
        # A key holding a NUL byte names no object (puts refuse them): never sent.
        idx = [i for i, b in enumerate(ks) if b"\0" not in b]
        h = self._enter()
        if h is None:
            return []
        try:
            n = len(idx)
            arr = (ctypes.c_char_p * max(n, 1))(*(ks[i] for i in idx))
            out = (ctypes.c_int * max(n, 1))()
            r = _lib.tide_store_batch_replica_clear(h, arr, n, seg, out)
        except _BadArg:
            return []
        finally:
            self._leave()
        if r < 0:
            print(f"mooncake.store: batch_replica_clear failed: {os.strerror(-r)}",
                  file=sys.stderr)
            return []
        res = []
        for j, i in enumerate(idx):
            if out[j]:
                k = keys[i]
                res.append(k.decode(errors="surrogateescape")
                           if isinstance(k, (bytes, bytearray)) else k)
        return res
