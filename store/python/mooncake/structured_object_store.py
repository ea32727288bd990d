"""`mooncake.structured_object_store`: Tide's structured-object helper over `mooncake.store`.

Covers what Miles uses of Mooncake's helper of the same name: `FieldSchema`,
`MooncakeBundleTransfer` (put / get / release_result / cleanup_dataproto), `export_ref`
and `import_ref`. Written for Tide; it shares Mooncake's key layout and call pattern, not
its code.

One `put` stores a flat dict of per-sample fields as several store objects:

  <key_prefix>/<partition>/<uuid4hex>/meta       JSON: field descriptions
  <key_prefix>/<partition>/<uuid4hex>/buffer/non_tensor_batch.<field>.<part>
  <key_prefix>/<partition>/<uuid4hex>/buffer/non_tensor_batch.<field>.<part>/chunk/<i>
  <key_prefix>/<partition>/<uuid4hex>/manifest   JSON: every key and size (written last)

The manifest and meta are Tide's own format ("tide-structured"); stock Mooncake's helper
writes another, undocumented one, so neither reads the other's objects (import_ref
names a stock handle as such).

A member larger than chunk_bytes (default 64 MiB) is stored as chunks of chunk_bytes.
Members of 0 bytes are not stored (Mooncake refuses empty objects). Every write carries
a copy of the caller's ReplicateConfig with group_ids = ["structured-<uuid4hex>"].

Every value comes back with the type and the bits it was put with (manifest and meta
version 2; version 1 objects are still read, with their arrays): a list of ints is a
list of ints, a Python float the same 64 bits (NaN sign and payload too), a bool a
bool, None None, a tuple a tuple, nested lists and dicts keep their shape (dicts their
key order), numpy arrays and scalars their dtype and shape, str, bytes and big ints as
they were. A value that would come back as another type is refused (ValueError in
msgpack rows, TypeError in meta_info): subclasses such as IntEnum, OrderedDict or a str
subclass. FieldSchema "dtype" is how Python numbers are stored when it holds every
value exactly (else int64, float64 or bool; get turns them back into the same Python
numbers); arrays and tensors keep their own dtype.

Codecs (FieldSchema.codec), what they take and how they store it:

  typed_ragged    per sample a list of numbers (any rectangular nesting of lists), a
                  numpy array, a torch tensor, or None (nullable). Members .data (rows
                  concatenated), .offsets (int64, n+1, in elements), .shapes (int64,
                  each row's dims), .ndims (int16), .nulls (bool). When every row is of
                  one form (meta row_type): lists of one Python number type ("list":
                  rebuilt with tolist() in C), arrays of one dtype ("ndarray": views
                  into the result's buffers) or tensors of one dtype ("tensor"). Other
                  mixes (tuples, numpy scalars, ints beside floats, lists beside arrays,
                  ints over 64 bits) are stored as msgpack rows instead (meta layout
                  "msgpack": members .data, .offsets, .nulls), exact but slower.
  ndarray         a numpy array or torch tensor (stored as is; get: a view), or per
                  sample a Python number or None (nullable), as a list, tuple or range
                  (range(start, stop, step) comes back as that range), or equal-shape
                  lists of numbers, or one Python / numpy scalar. Members .data, .nulls.
                  Python numbers of one type: one array, get rebuilds them with one
                  tolist(); any other mix: msgpack rows (layout "msgpack").
  msgpack_ragged  per sample any value built from None, bool, int, float, str, bytes,
                  list, dict (any hashable keys), tuple, set, frozenset, ints of any
                  size, numpy scalars and arrays, torch tensors. Members .data (the rows'
                  msgpack encodings concatenated), .offsets (int64, n+1, in bytes),
                  .nulls. Types msgpack lacks travel as msgpack extension types. get ->
                  decoded copies. (bytearray and memoryview come back as bytes.)
  ragged_tensor_dict  per sample None or a dict str -> typed_ragged row. Members
                  .null_mask (bool n) plus the typed_ragged members of each dict key
                  (.<key>.data, ...). A key missing in a row stays missing, a key with
                  the value None comes back None, each row keeps its key order.
  auto            with metadata section "meta_info" (as Miles sets it), or without a
                  schema: the value is not stored in the store; it travels in the ref
                  (export_ref embeds it, JSON-safe). get -> a fresh copy each get. With
                  section "non_tensor_batch" the codec is chosen from the value (ndarray
                  for numbers per sample, typed_ragged for numeric rows, else
                  msgpack_ragged).

The field's value itself may be a list (the usual), a tuple, a 1-D numpy object array,
or (typed_ragged) a numeric numpy array or tensor whose rows are the samples: get gives
the same container back. Any other sequence comes back as a list.

Fields keep their order. `get` returns a dict (a subclass, StructuredResult: pickling or
deep-copying it gives a plain dict of copies). Arrays and tensors from typed_ragged,
ndarray and ragged_tensor_dict are views into BufferPool leases when the store has one;
call `MooncakeBundleTransfer.release_result(value)` when done (Miles' ObjectStoreGetResult
does at __exit__): it removes the fields holding such views from the dict and returns the
leases to the pool. An array still referenced elsewhere stays valid; its lease goes back
to the pool when the last such array is garbage-collected. Lists and other copies stay in
the dict (their leases went back before get returned).

Store paths are chosen by the attributes the store has (getattr), so any
Mooncake-compatible store works, down to one with only put / get / remove:

  put: meta and manifest with put(key, memoryview, config=); members through
       BufferPool leases + batch_put_from(keys, ptrs, sizes, config) when the store has
       batch_put_from and _get_pyclient_capsule() is not None, up to 64 MiB or 256 keys
       per call (else, or for an object the pool cannot lease, put per object).
       On any failure: batch_remove(written, True) (or remove per key), then raise.
  get: get(manifest); the meta blob with register_buffer + batch_get_into +
       unregister_buffer (else get); members into BufferPool leases (else registered
       numpy memory, else get) with one get_into_ranges call (else batch_get_into).
  cleanup_dataproto: get(manifest), batch_remove(all keys, True) (else remove per key);
       0 and -704 count as success; a key still failing is retried with remove(key,
       True); anything else raises RuntimeError.

Errors: a negative store status raises RuntimeError naming the key and the Mooncake
code (ObjectNotFoundError, also a LookupError, for -704 and for a missing manifest).
"""
import array
import base64
import bisect
import concurrent.futures
import copy
import ctypes
import itertools
import json
import math
import mmap
import re
import struct
import sys
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field as _dc_field

import msgpack
import numpy as np

__all__ = ["FieldSchema", "MooncakeBundleTransfer", "StructuredObjectRef", "StructuredResult",
           "ObjectNotFoundError", "export_ref", "import_ref", "DEFAULT_BUNDLE_CHUNK_BYTES"]

DEFAULT_BUNDLE_CHUNK_BYTES = 64 << 20
DEFAULT_KEY_PREFIX = "mooncake-structured"
MISSING_OBJECT_ERROR = -704
_DUPLICATE_REGISTRATION = -600

CODECS = ("auto", "typed_ragged", "ndarray", "msgpack_ragged", "ragged_tensor_dict")
SECTIONS = ("meta_info", "non_tensor_batch")
_FORMAT = "tide-structured"
_REF_FORMAT = "tide-structured-ref"
# Manifest and meta version. 2: values come back with the types they were put with
# (row_type, outer, layout "msgpack", msgpack extension types). Version 1 objects are
# still read (arrays where version 2 gives lists). The ref's own layout is unchanged.
_VERSION = 2
_READ_VERSIONS = (1, 2)
_REF_VERSION = 1

# Batched member writes: at most this many bytes / keys in one batch_put_from.
_BATCH_BYTES = 64 << 20
_BATCH_KEYS = 256

_CODE_NAMES = {
    -1: "INTERNAL_ERROR", -10: "BUFFER_OVERFLOW", -100: "SHARD_INDEX_OUT_OF_RANGE",
    -101: "SEGMENT_NOT_FOUND", -102: "SEGMENT_ALREADY_EXISTS", -103: "CLIENT_NOT_FOUND",
    -200: "NO_AVAILABLE_HANDLE", -300: "INVALID_VERSION", -400: "INVALID_KEY",
    -500: "WRITE_FAIL", -600: "INVALID_PARAMS", -601: "ILLEGAL_CLIENT",
    -700: "INVALID_WRITE", -701: "INVALID_READ", -702: "INVALID_REPLICA",
    -703: "REPLICA_IS_NOT_READY", -704: "OBJECT_NOT_FOUND", -705: "OBJECT_ALREADY_EXISTS",
    -706: "OBJECT_HAS_LEASE", -707: "LEASE_EXPIRED", -800: "TRANSFER_FAIL",
    -801: "CHECKSUM_MISMATCH", -900: "RPC_FAIL", -901: "RPC_TIMEOUT",
}

# Fields copied when the caller's ReplicateConfig cannot be copied with copy.copy.
_CONFIG_FIELDS = ("data_type", "group_ids", "nof_replica_num", "prefer_alloc_in_same_node",
                  "preferred_nof_segments", "preferred_segment", "preferred_segments",
                  "replica_num", "with_hard_pin", "with_soft_pin")


class ObjectNotFoundError(RuntimeError, LookupError):
    """A structured object (or one of its store objects) does not exist."""


def _code_text(rc):
    return f"Mooncake code {rc} ({_CODE_NAMES.get(rc, 'error')})"


def _status_error(op, key, rc):
    cls = ObjectNotFoundError if rc == MISSING_OBJECT_ERROR else RuntimeError
    return cls(f"structured_object_store: {op} {key!r} failed: {_code_text(rc)}")


def _rc(v):
    return 0 if v is None else int(v)


# ------------------------------------------------------------------ schema

@dataclass(frozen=True)
class FieldSchema:
    """How one field of the put dict is stored. codec: one of CODECS; nullable: None rows
    allowed (typed_ragged, ndarray; msgpack_ragged and ragged_tensor_dict always take
    None rows); metadata: {"section": "meta_info" | "non_tensor_batch", "dtype": ...}.
    dtype stores Python numbers when it holds all of them exactly; it never changes
    the type of what get returns."""
    codec: str = "auto"
    nullable: bool = False
    metadata: dict = None

    def __post_init__(self):
        if self.codec not in CODECS:
            raise ValueError(f"FieldSchema: unknown codec {self.codec!r} (one of {CODECS})")
        md = dict(self.metadata or {})
        sec = md.get("section")
        if sec is not None and sec not in SECTIONS:
            raise ValueError(f"FieldSchema: section {sec!r} is not one of {SECTIONS}")
        if md.get("dtype") is not None:
            np.dtype(md["dtype"])  # raises TypeError on an unknown dtype
        object.__setattr__(self, "metadata", md)

    @property
    def section(self):
        return self.metadata.get("section")

    @property
    def dtype(self):
        return self.metadata.get("dtype")


def _schema(name, s):
    if s is None:
        return FieldSchema("auto")
    if isinstance(s, FieldSchema):
        return s
    if isinstance(s, str):
        return FieldSchema(s)
    if isinstance(s, dict):
        return FieldSchema(**s)
    codec = getattr(s, "codec", None)
    if codec is not None:  # a FieldSchema-like object (another module's class)
        return FieldSchema(codec, bool(getattr(s, "nullable", False)),
                           getattr(s, "metadata", None))
    raise TypeError(f"field_schemas[{name!r}]: {type(s).__name__} is not a FieldSchema")


# ------------------------------------------------------------------ refs

@dataclass(frozen=True)
class StructuredObjectRef:
    """Names one stored dict. meta_info holds the auto fields, JSON-safe encoded."""
    key_prefix: str
    partition: str
    object_id: str
    type: str = "dict"
    namespace: str = None
    stage: str = None
    meta_info: dict = _dc_field(default_factory=dict)

    @property
    def base_key(self):
        return f"{self.key_prefix}/{self.partition}/{self.object_id}"

    @property
    def manifest_key(self):
        return self.base_key + "/manifest"


def export_ref(ref):
    """A JSON-safe dict for ref (json.dumps works with allow_nan=False)."""
    if isinstance(ref, dict):
        ref = import_ref(ref)
    if not isinstance(ref, StructuredObjectRef):
        raise TypeError(f"export_ref: {type(ref).__name__} is not a StructuredObjectRef")
    return {"format": _REF_FORMAT, "version": _REF_VERSION, "key_prefix": ref.key_prefix,
            "partition": ref.partition, "object_id": ref.object_id, "type": ref.type,
            "namespace": ref.namespace, "stage": ref.stage,
            "meta_info": copy.deepcopy(ref.meta_info)}


def import_ref(data):
    """The ref for a dict made by export_ref (a ref is returned as is)."""
    if isinstance(data, StructuredObjectRef):
        return data
    if isinstance(data, dict) and "stage_refs" in data and "format" not in data:
        raise ValueError("import_ref: a handle made by stock Mooncake's helper; Tide's "
                         "helper reads only objects Tide's helper wrote (put them with "
                         "mooncake.structured_object_store from Tide's package)")
    if not isinstance(data, dict) or data.get("format") != _REF_FORMAT:
        raise ValueError("import_ref: not a dict made by export_ref "
                         f"(format {data.get('format') if isinstance(data, dict) else None!r})")
    if data.get("version") != _REF_VERSION:
        raise ValueError(f"import_ref: unsupported version {data.get('version')!r}")
    try:
        key_prefix, partition, oid = data["key_prefix"], data["partition"], data["object_id"]
    except KeyError as e:
        raise ValueError(f"import_ref: missing {e.args[0]!r}") from None
    if not re.fullmatch(r"[0-9a-f]{32}", str(oid)):
        raise ValueError(f"import_ref: bad object_id {oid!r}")
    meta_info = data.get("meta_info") or {}
    if not isinstance(meta_info, dict):
        raise ValueError("import_ref: meta_info is not a dict")
    return StructuredObjectRef(str(key_prefix), str(partition), str(oid),
                               str(data.get("type") or "dict"), data.get("namespace"),
                               data.get("stage"), copy.deepcopy(meta_info))


# ------------------------------------------------- JSON-safe values (auto fields)

_TAG = "$tide"


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _tensor_numpy(t):
    """(numpy array, torch dtype name numpy cannot hold or None) for a torch tensor."""
    t = t.detach().cpu().contiguous()
    try:
        return t.numpy(), None
    except TypeError:  # bfloat16 and the float8 types: keep the bits
        name = str(t.dtype).replace("torch.", "")
        torch = _torch()
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.view(bits).numpy(), name


def _numpy_tensor(arr, torch_dtype):
    torch = _torch()
    if torch is None:
        if torch_dtype:
            raise RuntimeError(f"structured_object_store: {torch_dtype} data needs torch")
        return arr
    if not arr.flags.writeable:
        arr = arr.copy()
    t = torch.from_numpy(arr)
    return t.view(getattr(torch, torch_dtype)) if torch_dtype else t


def _b64(b):
    return base64.b64encode(bytes(b)).decode("ascii")


def _type_name(v):
    return f"{type(v).__module__}.{type(v).__qualname__}"


def _enc(v, where):
    # Exact types only: a subclass (IntEnum, OrderedDict, a str subclass) would come back
    # as its base class, so it is refused rather than changed silently.
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        if math.isfinite(v):
            return v  # JSON writes repr(): the same 64 bits come back
        return {_TAG: "f64", "v": struct.pack("<d", v).hex()}  # NaN sign and payload kept
    if t is list:
        return [_enc(x, where) for x in v]
    if t is tuple:
        return {_TAG: "tuple", "v": [_enc(x, where) for x in v]}
    if t is set or t is frozenset:
        return {_TAG: t.__name__, "v": [_enc(x, where) for x in v]}
    if t is dict:
        if all(type(k) is str for k in v) and _TAG not in v:
            return {k: _enc(x, where) for k, x in v.items()}
        return {_TAG: "dict", "v": [[_enc(k, where), _enc(x, where)] for k, x in v.items()]}
    if t is bytes or t is bytearray:
        return {_TAG: t.__name__, "v": _b64(v)}
    if isinstance(v, np.generic):
        if v.dtype.hasobject:
            raise TypeError(f"{where}: numpy object scalars cannot be stored")
        return {_TAG: "npscalar", "dtype": v.dtype.str, "v": _b64(np.asarray(v).tobytes())}
    if t is np.ndarray:
        if v.dtype.hasobject:
            return {_TAG: "ndarray-obj", "shape": list(v.shape),
                    "v": [_enc(x, where) for x in v.reshape(-1).tolist()]}
        return {_TAG: "ndarray", "dtype": v.dtype.str, "shape": list(v.shape),
                "v": _b64(np.ascontiguousarray(v).tobytes())}
    if _is_torch(v):
        arr, tdt = _tensor_numpy(v)
        return {_TAG: "tensor", "dtype": arr.dtype.str, "torch_dtype": tdt,
                "shape": list(arr.shape), "v": _b64(arr.tobytes())}
    raise TypeError(f"{where}: a {_type_name(v)} cannot be carried in meta_info with its "
                    "type (None, bool, int, float, str, bytes, bytearray, list, tuple, "
                    "dict, set, frozenset, numpy and torch values can; subclasses of "
                    "them cannot)")


def _dec(v):
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if not isinstance(v, dict):
        return v
    tag = v.get(_TAG)
    if tag is None:
        return {k: _dec(x) for k, x in v.items()}
    if tag == "f64":
        return struct.unpack("<d", bytes.fromhex(v["v"]))[0]
    if tag == "float":  # version 1 refs
        return float(v["v"])
    if tag == "tuple":
        return tuple(_dec(x) for x in v["v"])
    if tag == "set":
        return {_dec(x) for x in v["v"]}
    if tag == "frozenset":
        return frozenset(_dec(x) for x in v["v"])
    if tag == "dict":
        return {_dec(k): _dec(x) for k, x in v["v"]}
    if tag == "bytes":
        return base64.b64decode(v["v"])
    if tag == "bytearray":
        return bytearray(base64.b64decode(v["v"]))
    if tag == "npscalar":
        return _np_value(v["dtype"], (), base64.b64decode(v["v"]))
    if tag == "ndarray":
        return _np_value(v["dtype"], v["shape"], base64.b64decode(v["v"]))
    if tag == "ndarray-obj":
        return _object_array([_dec(x) for x in v["v"]], v["shape"])
    if tag == "tensor":
        arr = _np_value(v["dtype"], v["shape"], base64.b64decode(v["v"]))
        return _numpy_tensor(arr, v.get("torch_dtype"))
    raise ValueError(f"structured_object_store: unknown meta_info tag {tag!r}")


def _np_value(dtype, shape, raw):
    """A numpy scalar (shape ()) or a writable array (a copy) from its bytes; works for
    every dtype, zero-size ones ('<U0') included."""
    arr = np.ndarray(tuple(shape), dtype=np.dtype(dtype), buffer=raw)
    return arr[()] if not arr.ndim else arr.copy()


def _object_array(items, shape):
    """A numpy object array holding items as they are (numpy would unpack lists)."""
    out = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        out[i] = x
    return out.reshape(shape)


# ------------------------------------------------------------------ encoding

def _safe(name):
    """A key segment for a field or dict-key name: [A-Za-z0-9_-] kept, the rest %XX
    (so '.' and '/' inside names cannot collide with the layout)."""
    return "".join(c if (c.isascii() and (c.isalnum() or c in "_-")) else
                   "".join(f"%{b:02X}" for b in c.encode()) for c in str(name))


class _Source:
    """The bytes of one member: contiguous numpy parts, concatenated."""
    __slots__ = ("parts", "starts", "nbytes")

    def __init__(self, parts):
        self.parts = [p.reshape(-1).view(np.uint8) for p in parts if p.nbytes]
        self.starts, n = [], 0
        for p in self.parts:
            self.starts.append(n)
            n += p.nbytes
        self.nbytes = n

    def fill(self, dst, offset):
        """Copy bytes [offset, offset + len(dst)) into the uint8 array dst."""
        end = offset + dst.nbytes
        i = max(bisect.bisect_right(self.starts, offset) - 1, 0)
        while i < len(self.parts) and self.starts[i] < end:
            p, s = self.parts[i], self.starts[i]
            a, b = max(offset, s), min(end, s + p.nbytes)
            if a < b:
                dst[a - offset:b - offset] = p[a - s:b - s]
            i += 1

    def address(self, offset, size):
        """The address of bytes [offset, offset + size) when they lie in one part (so
        a store can send them where they are), else None."""
        i = max(bisect.bisect_right(self.starts, offset) - 1, 0)
        if i >= len(self.parts) or offset + size > self.starts[i] + self.parts[i].nbytes:
            return None
        return self.parts[i].__array_interface__["data"][0] + offset - self.starts[i]

    def contiguous(self, offset=0, size=None):
        size = self.nbytes - offset if size is None else size
        if len(self.parts) == 1:
            return self.parts[0][offset:offset + size]
        out = np.empty(size, dtype=np.uint8)
        self.fill(out, offset)
        return out


def _as_rows(value, where, arrays=False):
    """The rows of a field's value; arrays: a numeric array's rows as arrays (0-d ones
    for a 1-D array), for typed_ragged, which keeps them as arrays."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        raise TypeError(f"{where}: expected a sequence with one entry per sample, got "
                        f"{type(value).__name__}")
    if _is_torch(value):
        return list(value.unbind(0)) if value.dim() else [value]
    if arrays and isinstance(value, np.ndarray) and not value.dtype.hasobject:
        if not value.ndim:
            raise TypeError(f"{where}: a 0-d array has no rows")
        return [value[i, ...] for i in range(len(value))]  # 0-d arrays, not scalars
    return list(value)


def _outer(value):
    """What holds a field's rows, when get must rebuild more than a list: None (a list;
    also for any other sequence), "tuple", "ndarray" / "tensor" (numeric, rebuilt whole
    from the data member), "object" (a 1-D numpy object array)."""
    t = type(value)
    if t is list:
        return None
    if t is tuple:
        return "tuple"
    if isinstance(value, np.ndarray):
        return "object" if value.dtype.hasobject else "ndarray"
    if _is_torch(value):
        return "tensor"
    return None


def _set_outer(m, value):
    outer = _outer(value)
    if outer is None:
        return m
    if outer in ("ndarray", "tensor"):
        if m.get("layout") or m.get("row_type") not in ("ndarray", "tensor"):
            outer = None  # rows kept their own types: a list of them comes back
        else:
            m["shape"] = list(value.shape)
    elif outer == "object" and value.ndim != 1:
        raise TypeError("a numpy object array holding a field's rows must be 1-D")
    if outer is not None:
        m["outer"] = outer
    return m


def _rebuild_outer(rows, m):
    outer = m.get("outer")
    if outer == "tuple":
        return tuple(rows)
    if outer == "object":
        return _object_array(rows, (len(rows),))
    return rows


_NUMERIC = "biufc"
_NONE = type(None)
# Python numbers kept by the typed layouts: their type, the dtype they are read into,
# the dtype kinds that can hold them, and the array module code that converts a flat
# list of them in C.
_PY_KIND = {int: "int", float: "float", bool: "bool"}
_KIND_DTYPE = {"int": np.dtype(np.int64), "float": np.dtype(np.float64),
               "bool": np.dtype(np.bool_)}
_KIND_HOLDERS = {"int": "iu", "float": "f", "bool": "b"}
_ARRAY_CODE = {"int": "q", "float": "d"}
# get: rows of lists at least this long on average get one tolist() each (measured:
# 32 rows of ~3000 int64 take 1.8 ms that way, 2.8 ms as one tolist() sliced).
_ROW_TOLIST = 32


def _leaf_kind(row):
    """For a list row: "int", "float" or "bool" when every number in it (and in the lists
    nested in it) has exactly that type, "" when it holds no number, None otherwise
    (tuples, numpy scalars, mixed types...). Scans in C (map), never per element."""
    kinds = {*map(type, row)}
    while len(kinds) == 1 and list in kinds:
        row = list(itertools.chain.from_iterable(row))
        kinds = {*map(type, row)}
    if not kinds:
        return ""
    if len(kinds) == 1:
        return _PY_KIND.get(kinds.pop())
    return None


class _Arena:
    """Scratch memory that list rows are packed into during one put, kept across puts.

    Why: a row converted into memory of its own costs a page fault per 4 KiB when the
    allocator has just given those pages back, and on a paravirtualised VM that was most
    of a Miles dense shard's encode time (32 rows of about 3,000 ints: 8.6 ms per field,
    1.8 ms with pages kept mapped). Pages of the chunks here stay mapped, and
    struct.pack_into writes the machine numbers in place (about half array.array's time
    per element). One put at a time uses it (begin returns False to a concurrent put,
    which allocates as before); chunks past _KEEP bytes are dropped at end. Chunks are
    anonymous mappings on transparent huge pages where the kernel has them, not
    bytearrays: bytearray(n) writes n zeros, which in a process's first put faulted
    every 4 KiB of them in (15 of a first dense shard's 34 ms)."""

    _CHUNK = 4 << 20
    _KEEP = 64 << 20
    _HUGE = 2 << 20

    def __init__(self):
        self._chunks = []
        self._i = self._off = 0
        self._lock = threading.Lock()

    def begin(self):
        if not self._lock.acquire(blocking=False):
            return False
        self._i = self._off = 0
        return True

    def end(self):
        kept = 0
        for i, c in enumerate(self._chunks):
            kept += len(c)
            if kept > self._KEEP:
                del self._chunks[i:]
                break
        self._lock.release()

    @classmethod
    def _chunk(cls, n):
        """n writable bytes starting on a 2 MiB boundary of an anonymous mapping
        (unmapped once the last view of it goes)."""
        m = mmap.mmap(-1, n + cls._HUGE)
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except (AttributeError, OSError, ValueError):
            pass  # no THP here: 4 KiB pages
        addr = np.frombuffer(m, dtype=np.uint8, count=1).__array_interface__["data"][0]
        off = -addr % cls._HUGE
        return memoryview(m)[off:off + n]

    def take(self, nbytes):
        """A writable memoryview of nbytes (8-byte aligned), valid until the next begin."""
        step = (nbytes + 7) & ~7
        while self._i < len(self._chunks):
            c = self._chunks[self._i]
            if self._off + step <= len(c):
                self._off += step
                return memoryview(c)[self._off - step:self._off - step + nbytes]
            self._i, self._off = self._i + 1, 0
        self._chunks.append(self._chunk(max(self._CHUNK, step)))
        self._i, self._off = len(self._chunks) - 1, step
        return memoryview(self._chunks[-1])[:nbytes]


def _list_array(row, kind, where, arena=None):
    """row (lists of Python numbers of one kind) as a numpy array of the kind's dtype
    (in arena memory when one is given and the row is flat); None when an int does not
    fit int64."""
    dt = _KIND_DTYPE[kind or "int"]
    try:
        if kind in _ARRAY_CODE and row and type(row[0]) is not list:
            if arena is not None:
                mv = arena.take(dt.itemsize * len(row))
                try:
                    struct.pack_into(f"={len(row)}{_ARRAY_CODE[kind]}", mv, 0, *row)
                except struct.error:
                    return None  # an int beyond int64 (the only error a number can give)
                return np.frombuffer(mv, dtype=dt)
            return np.frombuffer(array.array(_ARRAY_CODE[kind], row), dtype=dt)
        return np.asarray(row, dtype=dt)
    except OverflowError:
        return None
    except ValueError as e:
        raise ValueError(f"{where}: not a rectangular array of numbers ({e})") from None


def _narrow(arrs, kind, dtype):
    """The dtype to store Python numbers of kind in: the schema's dtype when every value
    converts to it and back bit for bit, else the kind's own (int64, float64, bool)."""
    native = _KIND_DTYPE[kind or "int"]
    if dtype is None:
        return native
    dt = np.dtype(dtype)
    if dt == native or dt.kind not in (_KIND_HOLDERS[kind] if kind else "biuf"):
        return native
    with np.errstate(all="ignore"):
        for a in arrs:
            if a is None or not a.size:
                continue
            back = a.astype(dt).astype(native)
            if kind == "float":
                same = np.array_equal(back.view(np.int64), a.view(np.int64))
            else:
                same = np.array_equal(back, a)
            if not same:
                return native
    return dt


def _check_numeric(r, where):
    """Raise unless r is a rectangular array of numbers (for rows stored as msgpack)."""
    if _is_torch(r):
        return
    try:
        a = np.asarray(r)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: not a rectangular array of numbers ({e})") from None
    if a.dtype.kind not in _NUMERIC:
        raise ValueError(f"{where}: values of kind {a.dtype} are not numbers; use the "
                         "msgpack_ragged codec for them")


def _ragged(rows, dtype, nullable, where, members, prefix, arena=None):
    """Encode rows as typed_ragged members (appended to members); the field's meta.

    Fast layout, when every non-null row is of one form: lists of Python numbers of one
    type (row_type "list": get rebuilds them with one tolist()), numpy arrays of one
    dtype ("ndarray": get returns views) or torch tensors of one dtype ("tensor").
    Any other mix (tuples, numpy scalars, ints beside floats, lists beside arrays,
    arrays of several dtypes) keeps its types through the msgpack layout instead."""
    n = len(rows)
    nulls = np.zeros(n, dtype=bool)
    arrs = []
    form, kind, rdt, tdt = None, "", None, None
    for i, r in enumerate(rows):
        if r is None:
            if not nullable:
                raise ValueError(f"{where}: row {i} is None; declare the field "
                                 "FieldSchema(..., nullable=True)")
            nulls[i] = True
            arrs.append(None)
            continue
        if type(r) is list:
            k = _leaf_kind(r)
            if k is None or form not in (None, "list") or (k and kind and k != kind):
                return _ragged_msgpack(rows, nullable, where, members, prefix)
            a = _list_array(r, k, f"{where} row {i}", arena)
            if a is None:
                return _ragged_msgpack(rows, nullable, where, members, prefix)
            form, kind = "list", kind or k
        elif isinstance(r, np.ndarray):
            if r.dtype.kind not in _NUMERIC:
                raise ValueError(f"{where} row {i}: values of kind {r.dtype} are not "
                                 "numbers; use the msgpack_ragged codec for them")
            if form not in (None, "ndarray") or (rdt is not None and r.dtype != rdt):
                return _ragged_msgpack(rows, nullable, where, members, prefix)
            a, form, rdt = np.ascontiguousarray(r), "ndarray", r.dtype
        elif _is_torch(r):
            a, t_name = _tensor_numpy(r)
            if form not in (None, "tensor") or (rdt is not None and
                                                (a.dtype != rdt or t_name != tdt)):
                return _ragged_msgpack(rows, nullable, where, members, prefix)
            form, rdt, tdt = "tensor", a.dtype, t_name
        else:
            return _ragged_msgpack(rows, nullable, where, members, prefix)
        arrs.append(a)
    if form in ("ndarray", "tensor"):
        dt = rdt
    else:
        form = "list"
        dt = _narrow(arrs, kind, dtype)
    rows_out, shapes, ndims = [], [], np.zeros(n, dtype=np.int16)
    offsets = np.zeros(n + 1, dtype=np.int64)
    total = 0
    for i, a in enumerate(arrs):
        if a is not None:
            if a.dtype != dt:
                a = a.astype(dt)
            rows_out.append(a)
            shapes.extend(a.shape)
            ndims[i] = a.ndim
            total += a.size
        offsets[i + 1] = total
    members.append((prefix + "data", _Source(rows_out)))
    members.append((prefix + "offsets", _Source([offsets])))
    members.append((prefix + "shapes", _Source([np.asarray(shapes, dtype=np.int64)])))
    members.append((prefix + "ndims", _Source([ndims])))
    members.append((prefix + "nulls", _Source([nulls])))
    return {"rows": n, "dtype": dt.str, "row_type": form, "torch": form == "tensor",
            "torch_dtype": tdt, "elements": int(total)}


def _ragged_msgpack(rows, nullable, where, members, prefix):
    """typed_ragged rows the fast layout cannot hold with their types: checked to be
    numbers, then stored as the msgpack_ragged members (.data, .offsets, .nulls)."""
    for i, r in enumerate(rows):
        if r is None:
            if not nullable:
                raise ValueError(f"{where}: row {i} is None; declare the field "
                                 "FieldSchema(..., nullable=True)")
        else:
            _check_numeric(r, f"{where} row {i}")
    m = _msgpack_rows(rows, where, members, prefix)
    m["layout"] = "msgpack"
    return m


def _ndarray(value, dtype, nullable, where, members, prefix):
    """Encode an ndarray-codec field; its meta. An array or tensor is stored with its
    own dtype and shape (get: a view). A Python scalar, a range, or a list / tuple of
    Python numbers of one type (or of equal-shape lists of them, None for a null row)
    is stored in the schema dtype when that holds every value exactly, else int64,
    float64 or bool, and comes back as the same Python value. Anything else (numpy
    scalars, ints beside floats, arrays as rows) keeps its types as msgpack rows."""
    rng = None
    if _is_torch(value):
        arr, tdt = _tensor_numpy(value)
        return _ndarray_members(arr, None, "tensor", tdt, members, prefix)
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        if value.dtype.kind not in _NUMERIC:
            raise ValueError(f"{where}: values of kind {value.dtype} cannot use the "
                             "ndarray codec; use msgpack_ragged")
        return _ndarray_members(np.ascontiguousarray(value), None, "ndarray", None,
                                members, prefix)
    if isinstance(value, np.generic):
        if value.dtype.kind not in _NUMERIC:
            raise ValueError(f"{where}: a {value.dtype} scalar cannot use the ndarray "
                             "codec")
        m = _ndarray_members(np.asarray(value), None, "ndarray", None, members, prefix)
        m["outer"] = "npscalar"
        return m
    t = type(value)
    if t in _PY_KIND:
        arr = _list_array([value], _PY_KIND[t], where)
        if arr is None:
            raise ValueError(f"{where}: {value} does not fit int64")
        arr = arr.reshape(())
        dt = _narrow([arr], _PY_KIND[t], dtype)
        m = _ndarray_members(arr.astype(dt), None, "list", None, members, prefix)
        m["outer"] = "scalar"
        return m
    if t is range:
        rng = [value.start, value.stop, value.step]
        vals = value
    elif isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        raise TypeError(f"{where}: expected an array or a sequence")
    else:
        vals = value if t is list or t is tuple else list(value)
    kinds = {*map(type, vals)}
    nulls = None
    present = vals
    if _NONE in kinds:
        if not nullable:
            i = next(i for i, v in enumerate(vals) if v is None)
            raise ValueError(f"{where}: row {i} is None; declare the field "
                             "FieldSchema(..., nullable=True)")
        nulls = np.fromiter((v is None for v in vals), dtype=bool, count=len(vals))
        present = [v for v in vals if v is not None]
        kinds.discard(_NONE)
    if len(kinds) == 1 and list in kinds:
        kind = _leaf_kind(present)
    elif len(kinds) == 1:
        kind = _PY_KIND.get(next(iter(kinds)))
    else:
        kind = None if kinds else ""
    arr = None
    if kind is not None:
        if t is range:
            try:
                arr = np.arange(value.start, value.stop, value.step, dtype=np.int64)
            except (OverflowError, ValueError):
                arr = None
        else:
            arr = _list_array(present, kind, where)
    if arr is None:  # the types need msgpack rows
        for i, v in enumerate(present):
            _check_numeric(v, f"{where} row {i}")
        try:
            np.asarray(present)  # one array of numbers, as the codec promises
        except (ValueError, TypeError) as e:
            raise ValueError(f"{where}: not an array of numbers ({e})") from None
        m = _msgpack_rows(list(vals), where, members, prefix)
        m["layout"] = "msgpack"
        return _set_outer(m, value)
    dt = _narrow([arr], kind, dtype)
    if nulls is not None:
        full = np.zeros((len(vals),) + arr.shape[1:], dtype=dt)
        full[~nulls] = arr
        arr = full
    m = _ndarray_members(arr.astype(dt, copy=False), nulls, "list", None, members, prefix)
    if rng is not None:
        m.update(outer="range", range=rng)
        return m
    return _set_outer(m, value)


def _ndarray_members(arr, nulls, form, tdt, members, prefix):
    n = arr.shape[0] if arr.ndim else 0
    if nulls is None:
        nulls = np.zeros(n, dtype=bool)
    members.append((prefix + "data", _Source([arr])))
    members.append((prefix + "nulls", _Source([nulls])))
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "row_type": form,
            "torch": form == "tensor", "torch_dtype": tdt, "rows": n}


# msgpack extension types: the values msgpack has no type of its own for, so that they
# come back as they went in (use_bin_type + strict_types: everything else is exact).
_EXT_TUPLE, _EXT_SET, _EXT_FROZENSET, _EXT_BIGINT = 1, 2, 3, 4
_EXT_NPSCALAR, _EXT_NDARRAY, _EXT_OBJARRAY, _EXT_TENSOR = 5, 6, 7, 8


def _mp_pack(v):
    return msgpack.packb(v, default=_mp_default, use_bin_type=True, strict_types=True)


def _mp_default(o):
    t = type(o)
    if t is tuple:
        return msgpack.ExtType(_EXT_TUPLE, _mp_pack(list(o)))
    if t is set:
        return msgpack.ExtType(_EXT_SET, _mp_pack(list(o)))
    if t is frozenset:
        return msgpack.ExtType(_EXT_FROZENSET, _mp_pack(list(o)))
    if t is int:  # beyond 64 bits
        return msgpack.ExtType(_EXT_BIGINT, str(o).encode())
    if isinstance(o, np.generic) and not o.dtype.hasobject:
        return msgpack.ExtType(_EXT_NPSCALAR, _mp_pack([o.dtype.str, o.tobytes()]))
    if t is np.ndarray:
        if o.dtype.hasobject:
            return msgpack.ExtType(_EXT_OBJARRAY,
                                   _mp_pack([list(o.shape), o.reshape(-1).tolist()]))
        return msgpack.ExtType(_EXT_NDARRAY, _mp_pack(
            [o.dtype.str, list(o.shape), np.ascontiguousarray(o).tobytes()]))
    if _is_torch(o):
        arr, tdt = _tensor_numpy(o)
        return msgpack.ExtType(_EXT_TENSOR, _mp_pack(
            [arr.dtype.str, tdt, list(arr.shape), arr.tobytes()]))
    raise TypeError(f"a {_type_name(o)} cannot be stored with its type (msgpack rows hold "
                    "None, bool, int, float, str, bytes, list, dict, tuple, set, "
                    "frozenset, numpy and torch values; subclasses of them, such as "
                    "IntEnum or OrderedDict, cannot)")


def _mp_ext(code, data):
    if code == _EXT_TUPLE:
        return tuple(_mp_unpack(data))
    if code == _EXT_SET:
        return set(_mp_unpack(data))
    if code == _EXT_FROZENSET:
        return frozenset(_mp_unpack(data))
    if code == _EXT_BIGINT:
        return int(data.decode())
    if code == _EXT_NPSCALAR:
        dt, raw = _mp_unpack(data)
        return _np_value(dt, (), raw)
    if code == _EXT_NDARRAY:
        dt, shape, raw = _mp_unpack(data)
        return _np_value(dt, shape, raw)
    if code == _EXT_OBJARRAY:
        shape, items = _mp_unpack(data)
        return _object_array(items, shape)
    if code == _EXT_TENSOR:
        dt, tdt, shape, raw = _mp_unpack(data)
        return _numpy_tensor(_np_value(dt, shape, raw), tdt)
    raise ValueError(f"structured_object_store: unknown msgpack extension type {code}")


def _mp_unpack(b):
    return msgpack.unpackb(b, raw=False, strict_map_key=False, use_list=True,
                           ext_hook=_mp_ext)


def _msgpack_rows(rows, where, members, prefix):
    """Encode rows (None: a null row) as the msgpack_ragged members; the field's meta."""
    n = len(rows)
    packer = msgpack.Packer(default=_mp_default, use_bin_type=True, strict_types=True)
    parts, nulls = [], np.zeros(n, dtype=bool)
    offsets = np.zeros(n + 1, dtype=np.int64)
    total = 0
    for i, r in enumerate(rows):
        if r is None:
            nulls[i] = True
        else:
            try:
                b = packer.pack(r)
            except (TypeError, ValueError, OverflowError) as e:
                raise ValueError(f"{where} row {i}: {e}") from None
            parts.append(np.frombuffer(b, dtype=np.uint8))
            total += len(b)
        offsets[i + 1] = total
    members.append((prefix + "data", _Source(parts)))
    members.append((prefix + "offsets", _Source([offsets])))
    members.append((prefix + "nulls", _Source([nulls])))
    return {"rows": n}


def _ragged_tensor_dict(value, dtype, where, members, prefix):
    rows = _as_rows(value, where)
    n = len(rows)
    names, index, null_mask, orders = [], {}, np.zeros(n, dtype=bool), []
    for i, r in enumerate(rows):
        if r is None:
            null_mask[i] = True
            continue
        if not isinstance(r, dict):
            raise TypeError(f"{where} row {i}: expected a dict or None, got "
                            f"{type(r).__name__}")
        pos = []
        for k in r:
            if type(k) is not str:
                raise TypeError(f"{where} row {i}: dict keys must be str, got {k!r}")
            j = index.get(k)
            if j is None:
                j = index[k] = len(names)
                names.append(k)
            pos.append(j)
        if pos != sorted(pos):  # this row's keys in another order than first seen
            orders.append([i, pos])
    members.append((prefix + "null_mask", _Source([null_mask])))
    keys, missing = [], object()
    for k in names:
        col, none_rows = [], []
        for i, r in enumerate(rows):
            v = missing if r is None else r.get(k, missing)
            if v is None:
                none_rows.append(i)  # present with the value None
            col.append(None if v is missing else v)
        m = _ragged(col, dtype, True, f"{where}[{k!r}]", members, f"{prefix}{_safe(k)}.")
        m["name"] = k
        if none_rows:
            m["none_rows"] = none_rows
        keys.append(m)
    out = {"rows": n, "keys": keys}
    if orders:
        out["orders"] = orders
    return out


def _infer_codec(value):
    """The codec for an 'auto' field placed in non_tensor_batch."""
    if isinstance(value, np.ndarray) and not value.dtype.hasobject or _is_torch(value):
        return "ndarray"
    rows = list(value)
    kinds = {*map(type, rows)} - {_NONE}
    if kinds and all(k in _PY_KIND or issubclass(k, (np.number, np.bool_)) for k in kinds):
        return "ndarray"
    present = [r for r in rows if r is not None]
    if kinds and all((type(r) is list and _leaf_kind(r) is not None) or
                     type(r) is np.ndarray or _is_torch(r) for r in present):
        return "typed_ragged"
    return "msgpack_ragged"


# ------------------------------------------------------------------ results

class StructuredResult(dict):
    """The dict `get` returns. Holds the BufferPool leases its arrays point into until
    MooncakeBundleTransfer.release_result(value). Pickles and deep-copies as a plain
    dict of copies."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._tide_leases = []
        self._tide_lease_fields = []

    def __reduce__(self):
        return (dict, (copy.deepcopy(dict(self)),))

    def __deepcopy__(self, memo):
        return copy.deepcopy(dict(self), memo)

    def __copy__(self):
        return dict(self)


def _view(buf, dtype, count, offset=0):
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset)


class _Buffers:
    """Where one get's members landed: name -> (buffer object, size). A buffer is a
    writable memoryview (a lease or registered numpy memory) or bytes."""

    def __init__(self):
        self.by_name = {}

    def arr(self, name, dtype, count=None):
        buf, size = self.by_name.get(name, (None, 0))
        dt = np.dtype(dtype)
        if count is None:
            count = size // dt.itemsize
        if count == 0:
            return np.zeros(0, dtype=dt)
        if buf is None or count * dt.itemsize > size:
            raise RuntimeError(f"structured_object_store: member {name} is shorter than "
                               "its description")
        return _view(buf, dt, count)

    def small(self, name, dtype, count=None):
        """A copy (for offsets, shapes, nulls...; their leases are released early)."""
        return self.arr(name, dtype, count).copy()


def _decode_ragged(bufs, prefix, m):
    if m.get("layout") == "msgpack":
        return _rebuild_outer(_decode_msgpack(bufs, prefix, m), m)
    n = m["rows"]
    dt = np.dtype(m["dtype"])
    form = m.get("row_type", "ndarray")  # version 1 metas: arrays
    offsets = bufs.small(prefix + "offsets", np.int64, n + 1).tolist()
    data = bufs.arr(prefix + "data", dt, offsets[-1] if n else 0)
    if m.get("outer") in ("ndarray", "tensor"):  # the whole array, as it was put
        data = data.reshape(m["shape"])
        return _numpy_tensor(data, m.get("torch_dtype")) if m.get("torch") else data
    ndims = bufs.small(prefix + "ndims", np.int16, n).tolist()
    nulls = bufs.small(prefix + "nulls", np.bool_, n).tolist()
    shapes = bufs.small(prefix + "shapes", np.int64, sum(ndims)).tolist()
    out, si = [], 0
    if form == "list":
        # Python numbers are made by tolist() in C, never per element here. Long rows:
        # one tolist() per row. Short rows (under _ROW_TOLIST elements on average):
        # one tolist() for the whole field, sliced, since a numpy slice per row costs
        # more than a second pass over few elements.
        per_row = offsets[-1] >= _ROW_TOLIST * max(n, 1) if n else True
        flat = None if per_row or 1 not in ndims else data.tolist()
        for i in range(n):
            nd = ndims[i]
            si += nd
            if nulls[i]:
                out.append(None)
            elif nd == 1 and flat is not None:
                out.append(flat[offsets[i]:offsets[i + 1]])
            elif nd == 1:
                out.append(data[offsets[i]:offsets[i + 1]].tolist())
            else:
                out.append(data[offsets[i]:offsets[i + 1]].reshape(shapes[si - nd:si])
                           .tolist())
        return _rebuild_outer(out, m)
    for i in range(n):
        nd = ndims[i]
        shape = shapes[si:si + nd]
        si += nd
        if nulls[i]:
            out.append(None)
            continue
        row = data[offsets[i]:offsets[i + 1]]
        if nd != 1:
            row = row.reshape(shape)
        if m.get("torch"):
            row = _numpy_tensor(row, m.get("torch_dtype"))
        out.append(row)
    return _rebuild_outer(out, m)


def _decode_ndarray(bufs, prefix, m):
    if m.get("layout") == "msgpack":
        return _rebuild_outer(_decode_msgpack(bufs, prefix, m), m)
    form = m.get("row_type", "ndarray")  # version 1 metas: an array
    outer = m.get("outer")
    if outer == "range":
        return range(*m["range"])
    dt = np.dtype(m["dtype"])
    shape = m["shape"]
    count = int(np.prod(shape)) if shape else 1
    arr = bufs.arr(prefix + "data", dt, count).reshape(shape)
    nulls = bufs.small(prefix + "nulls", np.bool_, m["rows"])
    if form == "list":
        out = arr.tolist()  # Python numbers (nested lists for rows of lists)
        if outer == "scalar":
            return out
        for i in np.flatnonzero(nulls).tolist():
            out[i] = None
        return _rebuild_outer(out, m)
    if outer == "npscalar":
        return arr[()]
    if m.get("torch"):
        arr = _numpy_tensor(arr, m.get("torch_dtype"))
    if nulls.any():  # version 1: a list with None at the null rows
        return [None if z else arr[i] for i, z in enumerate(nulls.tolist())]
    return arr


def _decode_msgpack(bufs, prefix, m):
    n = m["rows"]
    offsets = bufs.small(prefix + "offsets", np.int64, n + 1).tolist()
    nulls = bufs.small(prefix + "nulls", np.bool_, n).tolist()
    data = bufs.arr(prefix + "data", np.uint8, offsets[-1] if n else 0)
    out = []
    for i in range(n):
        if nulls[i]:
            out.append(None)
        else:
            out.append(_mp_unpack(data[offsets[i]:offsets[i + 1]]))
    return out


def _decode_rtd(bufs, prefix, m):
    n = m["rows"]
    null_mask = bufs.small(prefix + "null_mask", np.bool_, n).tolist()
    rows = [None if z else {} for z in null_mask]
    for km in m["keys"]:
        name = km["name"]
        col = _decode_ragged(bufs, f"{prefix}{_safe(name)}.", km)
        none_rows = set(km.get("none_rows", ()))
        for i, v in enumerate(col):
            if rows[i] is not None and (v is not None or i in none_rows):
                rows[i][name] = v
    names = [km["name"] for km in m["keys"]]
    for i, pos in m.get("orders", ()):
        rows[i] = {names[j]: rows[i][names[j]] for j in pos}
    return _rebuild_outer(rows, m)


def _holds_views(codec, m):
    """Whether a decoded field points into the members' buffers (arrays and tensors of
    the typed layouts), so its leases must stay until release_result."""
    if codec == "ragged_tensor_dict":
        return any(_holds_views("typed_ragged", km) for km in m["keys"])
    if codec not in ("typed_ragged", "ndarray") or m.get("layout"):
        return False
    return m.get("row_type", "ndarray") != "list" and m.get("outer") != "npscalar"


# ------------------------------------------------------------------ transfer

class MooncakeBundleTransfer:
    """Puts and gets flat dicts of per-sample fields as structured objects in a
    Mooncake-compatible store (see the module docstring)."""

    def __init__(self, store, key_prefix=DEFAULT_KEY_PREFIX, buffer_pool=None,
                 chunk_bytes=None, **options):
        if store is None:
            raise ValueError("MooncakeBundleTransfer: store is None")
        key_prefix = str(key_prefix).strip("/")
        if not key_prefix:
            raise ValueError("MooncakeBundleTransfer: empty key_prefix")
        if options:
            warnings.warn(f"MooncakeBundleTransfer: ignoring options {sorted(options)}",
                          stacklevel=2)
        self.store = store
        self.key_prefix = key_prefix
        self.chunk_bytes = self._chunk(chunk_bytes)
        self._pool = buffer_pool
        self._own_pool = False
        self._pool_lock = threading.Lock()
        self._arena = _Arena()
        self._writer_pool = None

    # ------------------------------------------------------------ store paths

    def _has(self, name):
        return callable(getattr(self.store, name, None))

    @staticmethod
    def _chunk(chunk_bytes):
        if chunk_bytes is None:
            return DEFAULT_BUNDLE_CHUNK_BYTES
        c = int(chunk_bytes)
        if c <= 0:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes!r}")
        return c

    def buffer_pool(self):
        """The BufferPool used for leases (made on first use), or None when the store
        has no _get_pyclient_capsule (or it returns None) or no BufferPool class."""
        if self._pool is not None:
            return self._pool
        with self._pool_lock:
            if self._pool is not None:
                return self._pool
            cap = getattr(self.store, "_get_pyclient_capsule", None)
            if cap is None or cap() is None:
                return None
            cls = _store_class(self.store, "BufferPool")
            if cls is None:
                return None
            try:
                self._pool = cls(self.store)
            except Exception as e:  # no pool: plain paths
                warnings.warn(f"MooncakeBundleTransfer: no BufferPool ({e}); using "
                              "put/get without leases", stacklevel=3)
                return None
            self._own_pool = True
            return self._pool

    def close(self):
        """Close the BufferPool this object made (if no lease is outstanding) and stop
        the member writer thread."""
        with self._pool_lock:
            writer, self._writer_pool = self._writer_pool, None
        if writer is not None:
            writer.shutdown(wait=True)
        pool, self._pool = (self._pool, None) if self._own_pool else (None, self._pool)
        if pool is not None:
            try:
                pool.close()
            except Exception:
                pass

    def _try_lease(self, pool, size):
        if pool is None:
            return None
        try:
            return pool.acquire(size, block=False)
        except Exception:
            return None

    def _config(self, config, gid, n):
        """A copy of config (a new ReplicateConfig if None) with n group ids."""
        if config is None:
            cls = _store_class(self.store, "ReplicateConfig")
            if cls is None:
                return None
            cfg = cls()
        else:
            try:
                cfg = copy.copy(config)
            except TypeError:
                cfg = type(config)()
                for f in _CONFIG_FIELDS:
                    if hasattr(config, f):
                        try:
                            setattr(cfg, f, copy.copy(getattr(config, f)))
                        except (AttributeError, TypeError):
                            pass
        cfg.group_ids = [gid] * n
        return cfg

    def _put_blob(self, key, data, config, gid):
        cfg = self._config(config, gid, 1)
        mv = memoryview(data).cast("B")
        rc = self.store.put(key, mv) if cfg is None else self.store.put(key, mv, config=cfg)
        if _rc(rc) != 0:
            raise _status_error("put", key, _rc(rc))

    def _remove_keys(self, keys):
        """Remove keys (force); {key: code} of the ones that still fail."""
        keys = list(keys)
        if not keys:
            return {}
        if self._has("batch_remove"):
            res = self.store.batch_remove(keys, True)
            res = list(res) if res is not None else [0] * len(keys)
            if len(res) != len(keys):
                res = [None] * len(keys)
            todo = [k for k, r in zip(keys, res) if r is None or _rc(r) not in (0, -704)]
        else:
            todo = keys
        failed = {}
        for k in todo:
            r = _rc(self.store.remove(k, True))
            if r not in (0, MISSING_OBJECT_ERROR):
                failed[k] = r
        return failed

    # ------------------------------------------------------------ put

    def put(self, value, type="dict", namespace=None, chunk_bytes=None, config=None,
            field_schemas=None, partition="default", stage=None, **options):
        """Store value (a dict of fields) and return a StructuredObjectRef. Raises
        RuntimeError (nothing left behind) if the store refuses any object."""
        arena = self._arena if self._arena.begin() else None
        try:
            return self._put(value, type, namespace, chunk_bytes, config, field_schemas,
                             partition, stage, options, arena)
        finally:
            if arena is not None:
                arena.end()

    def _put(self, value, type, namespace, chunk_bytes, config, field_schemas, partition,
             stage, options, arena):
        if type != "dict":
            raise NotImplementedError(f"MooncakeBundleTransfer.put: type {type!r} (only "
                                      "'dict' is supported)")
        if not isinstance(value, dict):
            raise TypeError(f"MooncakeBundleTransfer.put: expected a dict, got "
                            f"{value.__class__.__name__}")
        if options:
            warnings.warn(f"MooncakeBundleTransfer.put: ignoring options {sorted(options)}",
                          stacklevel=3)
        chunk = self._chunk(chunk_bytes) if chunk_bytes is not None else self.chunk_bytes
        schemas = {k: _schema(k, s) for k, s in (field_schemas or {}).items()}
        partition = _safe(partition or "default")
        oid = uuid.uuid4().hex
        ref_base = f"{self.key_prefix}/{partition}/{oid}"
        gid = f"structured-{oid}"

        # Encode everything before the first write: a bad value writes nothing.
        meta_info, fields, members = {}, [], []
        for name, v in value.items():
            if not isinstance(name, str):
                raise TypeError(f"MooncakeBundleTransfer.put: field names must be str, "
                                f"got {name!r}")
            s = schemas.get(name) or FieldSchema("auto")
            codec, section = s.codec, s.section
            if codec == "auto" and (section != "non_tensor_batch" or v is None or
                                    isinstance(v, (str, bytes, dict)) or
                                    not hasattr(v, "__len__")):
                meta_info[name] = _enc(v, f"field {name!r}")
                fields.append({"name": name, "codec": "auto", "section": "meta_info"})
                continue
            if codec == "auto":
                codec = _infer_codec(v)
            where = f"field {name!r} ({codec})"
            prefix = f"non_tensor_batch.{_safe(name)}."
            if codec == "typed_ragged":
                m = _set_outer(_ragged(_as_rows(v, where, arrays=True), s.dtype, s.nullable,
                                       where, members, prefix, arena), v)
            elif codec == "ndarray":
                if isinstance(v, (str, bytes, dict)):
                    raise TypeError(f"{where}: expected an array or a sequence")
                m = _ndarray(v, s.dtype, s.nullable, where, members, prefix)
            elif codec == "msgpack_ragged":
                m = _set_outer(_msgpack_rows(_as_rows(v, where), where, members, prefix), v)
            else:
                m = _set_outer(_ragged_tensor_dict(v, s.dtype, where, members, prefix), v)
            m.update(name=name, codec=codec, section="non_tensor_batch",
                     nullable=bool(s.nullable))
            fields.append(m)

        meta = json.dumps({"format": _FORMAT, "version": _VERSION, "type": "dict",
                           "fields": fields}, separators=(",", ":")).encode()
        # store objects: (key, source, offset, size)
        objects, manifest_members = [], []
        for mname, src in members:
            key = f"{ref_base}/buffer/{mname}"
            if src.nbytes == 0:
                manifest_members.append({"name": mname, "size": 0})
            elif src.nbytes <= chunk:
                objects.append((key, src, 0, src.nbytes))
                manifest_members.append({"name": mname, "size": src.nbytes, "key": key})
            else:
                chunks = []
                for i, off in enumerate(range(0, src.nbytes, chunk)):
                    ck = f"{key}/chunk/{i}"
                    sz = min(chunk, src.nbytes - off)
                    objects.append((ck, src, off, sz))
                    chunks.append({"key": ck, "size": sz})
                manifest_members.append({"name": mname, "size": src.nbytes, "chunks": chunks})
        manifest = json.dumps({
            "format": _FORMAT, "version": _VERSION, "object_id": oid, "group_id": gid,
            "type": "dict", "namespace": namespace, "stage": stage, "created": time.time(),
            "chunk_bytes": chunk, "meta": {"key": f"{ref_base}/meta", "size": len(meta)},
            "members": manifest_members}, separators=(",", ":")).encode()

        written = []
        try:
            # The meta rides in the members' first batch (one store call less per put);
            # the manifest, which makes the object visible, still goes last and alone.
            meta_src = _Source([np.frombuffer(meta, dtype=np.uint8)])
            self._put_members([(f"{ref_base}/meta", meta_src, 0, len(meta))] + objects,
                              config, gid, written)
            self._put_blob(f"{ref_base}/manifest", manifest, config, gid)
            written.append(f"{ref_base}/manifest")
        except BaseException:
            try:
                self._remove_keys(written)
            except Exception:
                pass
            raise
        return StructuredObjectRef(self.key_prefix, partition, oid, "dict", namespace,
                                   stage, meta_info)

    def _put_members(self, objects, config, gid, written):
        """Write objects ((key, source, offset, size)) through BufferPool leases and
        batch_put_from, appending each key written to written. A full batch goes to a
        writer thread while this thread copies the next one into its leases (the store
        call and numpy's copy both run without the GIL): for Miles' 150 MiB MoE batch the
        copy of each 64 MiB chunk overlaps the write of the one before. One batch is in
        flight at a time; the last one is written on this thread. A store that sends
        from any memory as it is (Tide's, in process: _tide_puts_in_place) gets members
        that lie in one array as pointers into it, with no lease and no copy; the
        caller's value outlives the put."""
        pool = self.buffer_pool() if self._has("batch_put_from") else None
        in_place = pool is not None and self._puts_in_place()
        pending = []  # (key, lease or None, size, address)
        inflight = None  # the writer thread's batch (a Future)

        def write(batch):
            try:
                keys = [k for k, _, _, _ in batch]
                cfg = self._config(config, gid, len(keys))
                ptrs = [ptr for _, _, _, ptr in batch]
                sizes = [sz for _, _, sz, _ in batch]
                res = (self.store.batch_put_from(keys, ptrs, sizes, config=cfg)
                       if cfg is not None else self.store.batch_put_from(keys, ptrs, sizes))
                res = list(res) if res is not None else [0] * len(keys)
                if len(res) != len(keys):
                    raise RuntimeError(f"structured_object_store: batch_put_from returned "
                                       f"{len(res)} results for {len(keys)} keys")
                bad = None
                for k, r in zip(keys, res):
                    if _rc(r) == 0:
                        written.append(k)
                    elif bad is None:
                        bad = (k, _rc(r))
                if bad is not None:
                    raise _status_error("batch_put_from", bad[0], bad[1])
            finally:
                for _, lease, _, _ in batch:
                    if lease is not None:
                        _release_lease(lease)

        def drain():
            """Wait for the batch in flight; its error, if any, is raised here."""
            nonlocal inflight
            if inflight is not None:
                f, inflight = inflight, None
                f.result()

        def flush(background):
            nonlocal inflight
            drain()  # first: should it raise, pending's leases are still ours to free
            if not pending:
                return
            batch = pending[:]
            pending.clear()
            if background:
                inflight = self._writer().submit(write, batch)
            else:
                write(batch)

        try:
            pend_bytes = 0
            for key, src, off, size in objects:
                ptr = src.address(off, size) if in_place and size else None
                if ptr is not None:
                    pending.append((key, None, size, ptr))
                    pend_bytes += size
                    if pend_bytes >= _BATCH_BYTES or len(pending) >= _BATCH_KEYS:
                        flush(True)
                        pend_bytes = 0
                    continue
                lease = self._try_lease(pool, size)
                if lease is None and (pending or inflight is not None):
                    flush(False)
                    pend_bytes = 0
                    lease = self._try_lease(pool, size)
                if lease is None:  # no pool, or no room: a plain put from our memory
                    self._put_blob(key, src.contiguous(off, size), config, gid)
                    written.append(key)
                    continue
                try:
                    mv = lease.buffer
                    dst = np.frombuffer(mv, dtype=np.uint8, count=size)
                    src.fill(dst, off)
                    del dst, mv
                except BaseException:
                    _release_lease(lease)
                    raise
                pending.append((key, lease, size, lease.ptr))
                pend_bytes += size
                if pend_bytes >= _BATCH_BYTES or len(pending) >= _BATCH_KEYS:
                    flush(True)
                    pend_bytes = 0
            flush(False)
        finally:
            if inflight is not None:
                try:
                    inflight.result()  # its leases go back in write's finally
                except BaseException:
                    pass  # the caller's exception, raised already, is the one to report
            for _, lease, _, _ in pending:
                if lease is not None:
                    _release_lease(lease)

    def _puts_in_place(self):
        f = getattr(self.store, "_tide_puts_in_place", None)
        try:
            return bool(f()) if callable(f) else False
        except Exception:
            return False

    def _writer(self):
        """The thread that writes full member batches while the next is filled."""
        with self._pool_lock:
            if self._writer_pool is None:
                self._writer_pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="mooncake-structured-put")
            return self._writer_pool

    # ------------------------------------------------------------ get

    def _manifest(self, ref):
        key = ref.manifest_key
        raw = self.store.get(key)
        if raw is None or len(raw) == 0:
            raise ObjectNotFoundError(f"structured_object_store: object {ref.base_key} not "
                                      f"found (no manifest {key!r}; removed, or never "
                                      "written)")
        try:
            man = json.loads(bytes(raw))
        except ValueError as e:
            raise RuntimeError(f"structured_object_store: {key!r} is not a manifest "
                               f"({e})") from None
        if man.get("format") != _FORMAT or man.get("version") not in _READ_VERSIONS:
            raise RuntimeError(f"structured_object_store: {key!r}: unsupported manifest "
                               f"format {man.get('format')!r} v{man.get('version')!r}")
        return man

    def _get_meta(self, key, size):
        st = self.store
        if self._has("register_buffer") and self._has("batch_get_into") and \
                self._has("unregister_buffer"):
            buf = bytearray(size)
            ptr = ctypes.addressof((ctypes.c_char * size).from_buffer(buf))
            rc = _rc(st.register_buffer(ptr, size))
            if rc not in (0, _DUPLICATE_REGISTRATION):
                raise _status_error("register_buffer for", key, rc)
            try:
                got = st.batch_get_into([key], [ptr], [size])
            finally:
                if rc == 0:
                    st.unregister_buffer(ptr)
            got = _rc(got[0]) if got else -1
            if got != size:
                raise _status_error("batch_get_into", key, got) if got < 0 else \
                    RuntimeError(f"structured_object_store: {key!r}: read {got} bytes, "
                                 f"expected {size}")
            return bytes(buf)
        raw = st.get(key)
        if raw is None or len(raw) == 0:
            raise ObjectNotFoundError(f"structured_object_store: {key!r} not found")
        return bytes(raw)

    def get(self, ref, type="dict"):
        """The dict stored under ref (a StructuredObjectRef, or export_ref's dict). See
        the module docstring for what each field becomes; release with
        MooncakeBundleTransfer.release_result(value). Raises ObjectNotFoundError if the
        object (or any of its parts) is gone, RuntimeError on other store errors."""
        if type != "dict":
            raise NotImplementedError(f"MooncakeBundleTransfer.get: type {type!r} (only "
                                      "'dict' is supported)")
        ref = import_ref(ref)
        man = self._manifest(ref)
        meta = json.loads(self._get_meta(man["meta"]["key"], man["meta"]["size"]))
        result = StructuredResult()
        bufs = _Buffers()
        leases = {}  # member name -> lease
        try:
            self._read_members(man["members"], bufs, leases)
            lease_fields = []
            for f in meta["fields"]:
                name = f["name"]
                if f["codec"] == "auto":
                    if name not in ref.meta_info:
                        raise RuntimeError(f"structured_object_store: the ref lacks "
                                           f"meta_info field {name!r}")
                    result[name] = _dec(ref.meta_info[name])
                    continue
                prefix = f"non_tensor_batch.{_safe(name)}."
                codec = f["codec"]
                if codec == "typed_ragged":
                    result[name] = _decode_ragged(bufs, prefix, f)
                elif codec == "ndarray":
                    result[name] = _decode_ndarray(bufs, prefix, f)
                elif codec == "msgpack_ragged":
                    result[name] = _rebuild_outer(_decode_msgpack(bufs, prefix, f), f)
                elif codec == "ragged_tensor_dict":
                    result[name] = _decode_rtd(bufs, prefix, f)
                else:
                    raise RuntimeError(f"structured_object_store: field {name!r}: unknown "
                                       f"codec {codec!r}")
                if _holds_views(codec, f):
                    lease_fields.append(name)
            for name in ref.meta_info:  # auto fields the meta does not list
                if name not in result:
                    result[name] = _dec(ref.meta_info[name])
        except BaseException:
            result.clear()
            bufs.by_name.clear()
            for lease in leases.values():
                _release_lease(lease)
            raise
        # Only the leases data views point into stay with the result.
        bufs.by_name.clear()
        keep = []
        for lease in leases.values():
            if not _release_lease(lease):
                keep.append(lease)
        result._tide_leases = keep
        result._tide_lease_fields = lease_fields
        return result

    def _read_members(self, members, bufs, leases):
        st = self.store
        pool = self.buffer_pool() if (self._has("get_into_ranges") or
                                      self._has("batch_get_into")) else None
        todo = [m for m in members if m["size"] > 0]
        for m in members:
            if m["size"] == 0:
                bufs.by_name[m["name"]] = (None, 0)
        pooled, heap = [], []
        for m in todo:
            lease = self._try_lease(pool, m["size"])
            if lease is None:
                heap.append(m)
            else:
                leases[m["name"]] = lease
                pooled.append((m, lease.ptr))
        if pooled:
            self._read_into(pooled)
            for m, _ in pooled:
                bufs.by_name[m["name"]] = (leases[m["name"]].buffer, m["size"])
        if not heap:
            return
        direct = self._has("register_buffer") and self._has("unregister_buffer") and (
            self._has("get_into_ranges") or self._has("batch_get_into"))
        if direct:
            arrays = [np.empty(m["size"], dtype=np.uint8) for m in heap]
            regs = []
            try:
                for a in arrays:
                    rc = _rc(st.register_buffer(a.ctypes.data, a.nbytes))
                    if rc not in (0, _DUPLICATE_REGISTRATION):
                        raise _status_error("register_buffer for", heap[0].get("key") or
                                            heap[0]["name"], rc)
                    if rc == 0:
                        regs.append(a.ctypes.data)
                self._read_into([(m, a.ctypes.data) for m, a in zip(heap, arrays)])
            finally:
                for p in regs:
                    st.unregister_buffer(p)
            for m, a in zip(heap, arrays):
                bufs.by_name[m["name"]] = (memoryview(a), m["size"])
            return
        for m in heap:  # minimal store: get() per object
            parts = m["chunks"] if "chunks" in m else [{"key": m["key"], "size": m["size"]}]
            out = bytearray()
            for p in parts:
                raw = st.get(p["key"])
                if raw is None or len(raw) != p["size"]:
                    if raw is None or len(raw) == 0:
                        raise ObjectNotFoundError(f"structured_object_store: {p['key']!r} "
                                                  "not found")
                    raise RuntimeError(f"structured_object_store: {p['key']!r}: "
                                       f"{len(raw)} bytes, expected {p['size']}")
                out += raw
            bufs.by_name[m["name"]] = (memoryview(out), m["size"])

    def _read_into(self, targets):
        """Read members (manifest entries) into registered memory at the given
        addresses: one get_into_ranges call for all of them, else batch_get_into."""
        st = self.store
        plan = []  # per target: [(key, dst offset, size)]
        for m, _ in targets:
            parts = m["chunks"] if "chunks" in m else [{"key": m["key"], "size": m["size"]}]
            off, row = 0, []
            for p in parts:
                row.append((p["key"], off, p["size"]))
                off += p["size"]
            plan.append(row)
        if self._has("get_into_ranges"):
            res = st.get_into_ranges([ptr for _, ptr in targets],
                                     [[k for k, _, _ in row] for row in plan],
                                     [[[d] for _, d, _ in row] for row in plan],
                                     [[[0] for _ in row] for row in plan],
                                     [[[n] for _, _, n in row] for row in plan])
            for row, rb in zip(plan, res):
                for (k, _, n), rk in zip(row, rb):
                    got = _rc(rk[0]) if rk else -1
                    if got != n:
                        raise _status_error("get_into_ranges", k, got) if got < 0 else \
                            RuntimeError(f"structured_object_store: {k!r}: read {got} "
                                         f"bytes, expected {n}")
            return
        keys, ptrs, sizes = [], [], []
        for (_, base), row in zip(targets, plan):
            for k, d, n in row:
                keys.append(k)
                ptrs.append(base + d)
                sizes.append(n)
        res = st.batch_get_into(keys, ptrs, sizes)
        for k, n, got in zip(keys, sizes, res):
            got = _rc(got)
            if got != n:
                raise _status_error("batch_get_into", k, got) if got < 0 else \
                    RuntimeError(f"structured_object_store: {k!r}: read {got} bytes, "
                                 f"expected {n}")

    @staticmethod
    def release_result(value):
        """Give back what get's value holds: removes its lease-backed fields (typed_ragged,
        ndarray, ragged_tensor_dict) from the dict and returns the leases to the pool. An
        array still referenced elsewhere keeps its lease until it is garbage-collected.
        Any other value (a plain dict, None) is ignored; a second call does nothing."""
        if not isinstance(value, StructuredResult):
            return
        leases, value._tide_leases = value._tide_leases, []
        names, value._tide_lease_fields = value._tide_lease_fields, []
        for name in names:
            value.pop(name, None)
        while leases:
            _release_lease(leases.pop())

    # ------------------------------------------------------------ remove

    def cleanup_dataproto(self, ref):
        """Remove every store object of ref (force). A ref whose manifest is already gone
        counts as removed. Raises RuntimeError naming the keys that could not be
        removed."""
        ref = import_ref(ref)
        try:
            man = self._manifest(ref)
        except ObjectNotFoundError:
            return
        keys = [man["meta"]["key"]]
        for m in man["members"]:
            if "chunks" in m:
                keys += [c["key"] for c in m["chunks"]]
            elif m.get("key"):
                keys.append(m["key"])
        keys.append(ref.manifest_key)  # last: the object stays findable until the end
        failed = self._remove_keys(keys)
        if failed:
            k, rc = next(iter(failed.items()))
            raise RuntimeError(f"structured_object_store: removing {ref.base_key}: "
                               f"{len(failed)} of {len(keys)} objects could not be removed, "
                               f"e.g. {k!r}: {_code_text(rc)}")

    remove = cleanup_dataproto


def _store_class(store, name):
    """mooncake.store.<name>, else <name> from the store's own module, else None."""
    try:
        import mooncake.store as ms
        cls = getattr(ms, name, None)
    except ImportError:
        cls = None
    if cls is None:
        cls = getattr(sys.modules.get(type(store).__module__), name, None)
    return cls


def _release_lease(lease):
    """Return a lease to its pool; True if it went back, False while views of it are
    alive (the pool then takes it back when the last view is garbage-collected)."""
    try:
        lease.release()
        return True
    except RuntimeError:
        return False
