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

A member larger than chunk_bytes (default 64 MiB) is stored as chunks of chunk_bytes.
Members of 0 bytes are not stored (Mooncake refuses empty objects). Every write carries
a copy of the caller's ReplicateConfig with group_ids = ["structured-<uuid4hex>"].

Codecs (FieldSchema.codec) and what `get` returns for a field:

  typed_ragged    per sample a list / tuple / array of numbers, any rectangular shape,
                  or None (nullable). Members .data (rows concatenated), .offsets (int64,
                  n+1, in elements), .shapes (int64, each row's dims), .ndims (int16),
                  .nulls (bool). dtype: metadata "dtype", else that of array rows, else
                  from the Python values: bool, int64 or float64.
                  get -> list of n numpy arrays (1-D for 1-D rows; each row's own shape),
                  views into the result's buffers; None for a null row. Rows given as
                  torch tensors come back as torch tensors (torch.from_numpy).
  ndarray         per sample a scalar (or equal-shape rows): a list, tuple, range or
                  array. Members .data, .nulls. dtype: metadata "dtype", else inferred.
                  get -> numpy array of shape (n, ...) (a view); if the field is nullable
                  and has nulls: a list with None at the null rows. A torch tensor comes
                  back as a torch tensor.
  msgpack_ragged  per sample any msgpack-able value (str, bytes, int, float, bool, None,
                  list, dict; numpy values are stored as Python values). Members .data
                  (the rows' msgpack encodings concatenated), .offsets (int64, n+1, in
                  bytes), .nulls. get -> list of n Python objects (decoded copies; tuples
                  come back as lists, None stays None).
  ragged_tensor_dict  per sample None or a dict str -> array / tensor / list of numbers.
                  Members .null_mask (bool n) plus the five typed_ragged members of each
                  dict key (.<key>.data, ...). get -> list of n dicts (None for a None
                  row; a key missing in a row stays missing), values as typed_ragged rows.
  auto            with metadata section "meta_info" (as Miles sets it), or without a
                  schema: the value is not stored in the store; it travels in the ref
                  (export_ref embeds it, JSON-safe). get -> the value as given (a fresh
                  copy each get; tuples, numpy arrays and scalars, bytes, sets, non-str
                  dict keys and non-finite floats are preserved). With section
                  "non_tensor_batch" the codec is chosen from the value (ndarray for
                  scalars per sample, typed_ragged for numeric rows, else msgpack_ragged).

Fields keep their order. `get` returns a dict (a subclass, StructuredResult: pickling or
deep-copying it gives a plain dict of copies). Arrays from typed_ragged, ndarray and
ragged_tensor_dict are views into BufferPool leases when the store has one; call
`MooncakeBundleTransfer.release_result(value)` when done (Miles' ObjectStoreGetResult
does at __exit__): it removes those fields from the dict and returns the leases to the
pool. An array still referenced elsewhere stays valid; its lease goes back to the pool
when the last such array is garbage-collected. Other fields stay in the dict.

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
import base64
import bisect
import copy
import ctypes
import functools
import json
import math
import re
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
_VERSION = 1

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
    None rows); metadata: {"section": "meta_info" | "non_tensor_batch", "dtype": ...}."""
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
    return {"format": _REF_FORMAT, "version": _VERSION, "key_prefix": ref.key_prefix,
            "partition": ref.partition, "object_id": ref.object_id, "type": ref.type,
            "namespace": ref.namespace, "stage": ref.stage,
            "meta_info": copy.deepcopy(ref.meta_info)}


def import_ref(data):
    """The ref for a dict made by export_ref (a ref is returned as is)."""
    if isinstance(data, StructuredObjectRef):
        return data
    if not isinstance(data, dict) or data.get("format") != _REF_FORMAT:
        raise ValueError("import_ref: not a dict made by export_ref "
                         f"(format {data.get('format') if isinstance(data, dict) else None!r})")
    if data.get("version") != _VERSION:
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


def _enc(v, where):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int) and not isinstance(v, np.generic):
        return int(v)
    if isinstance(v, float):
        return float(v) if math.isfinite(v) else {_TAG: "float", "v": repr(float(v))}
    if isinstance(v, list):
        return [_enc(x, where) for x in v]
    if isinstance(v, tuple):
        return {_TAG: "tuple", "v": [_enc(x, where) for x in v]}
    if isinstance(v, (set, frozenset)):
        return {_TAG: "frozenset" if isinstance(v, frozenset) else "set",
                "v": [_enc(x, where) for x in v]}
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v) and _TAG not in v:
            return {k: _enc(x, where) for k, x in v.items()}
        return {_TAG: "dict", "v": [[_enc(k, where), _enc(x, where)] for k, x in v.items()]}
    if isinstance(v, (bytes, bytearray)):
        return {_TAG: "bytearray" if isinstance(v, bytearray) else "bytes", "v": _b64(v)}
    if isinstance(v, np.generic):
        if v.dtype.kind == "O":
            raise TypeError(f"{where}: numpy object scalars cannot be stored")
        return {_TAG: "npscalar", "dtype": v.dtype.str, "v": _b64(np.asarray(v).tobytes())}
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "O" or v.dtype.hasobject:
            return {_TAG: "ndarray-obj", "shape": list(v.shape),
                    "v": [_enc(x, where) for x in v.reshape(-1).tolist()]}
        return {_TAG: "ndarray", "dtype": v.dtype.str, "shape": list(v.shape),
                "v": _b64(np.ascontiguousarray(v).tobytes())}
    if _is_torch(v):
        arr, tdt = _tensor_numpy(v)
        return {_TAG: "tensor", "dtype": arr.dtype.str, "torch_dtype": tdt,
                "shape": list(arr.shape), "v": _b64(arr.tobytes())}
    raise TypeError(f"{where}: a {type(v).__module__}.{type(v).__qualname__} cannot be "
                    "carried in meta_info (JSON values, tuples, sets, bytes, numpy and "
                    "torch values can)")


def _dec(v):
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if not isinstance(v, dict):
        return v
    tag = v.get(_TAG)
    if tag is None:
        return {k: _dec(x) for k, x in v.items()}
    if tag == "float":
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
        return np.frombuffer(base64.b64decode(v["v"]), dtype=np.dtype(v["dtype"]))[0]
    if tag == "ndarray":
        return np.frombuffer(base64.b64decode(v["v"]), dtype=np.dtype(v["dtype"])) \
            .reshape(v["shape"]).copy()
    if tag == "ndarray-obj":
        out = np.empty(len(v["v"]), dtype=object)
        for i, x in enumerate(v["v"]):
            out[i] = _dec(x)
        return out.reshape(v["shape"])
    if tag == "tensor":
        arr = np.frombuffer(base64.b64decode(v["v"]), dtype=np.dtype(v["dtype"])) \
            .reshape(v["shape"]).copy()
        return _numpy_tensor(arr, v.get("torch_dtype"))
    raise ValueError(f"structured_object_store: unknown meta_info tag {tag!r}")


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

    def contiguous(self, offset=0, size=None):
        size = self.nbytes - offset if size is None else size
        if len(self.parts) == 1:
            return self.parts[0][offset:offset + size]
        out = np.empty(size, dtype=np.uint8)
        self.fill(out, offset)
        return out


def _as_rows(value, where):
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        raise TypeError(f"{where}: expected a sequence with one entry per sample, got "
                        f"{type(value).__name__}")
    if _is_torch(value):
        return list(value.unbind(0)) if value.dim() else [value]
    return list(value)


_NUMERIC = "biufc"


def _row_array(x, dtype, where):
    """(contiguous numpy array, came from torch, torch dtype name) for one ragged row."""
    tdt = None
    is_t = _is_torch(x)
    if is_t:
        x, tdt = _tensor_numpy(x)
        if tdt is not None and dtype is not None:
            raise TypeError(f"{where}: a {tdt} tensor cannot be cast to {dtype}")
    try:
        a = np.asarray(x) if dtype is None or tdt else np.asarray(x, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{where}: not a rectangular array of numbers ({e})") from None
    if a.dtype.kind not in _NUMERIC:
        raise ValueError(f"{where}: values of kind {a.dtype} are not numbers; use the "
                         "msgpack_ragged codec for them")
    return np.ascontiguousarray(a), is_t, tdt


def _ragged(rows, dtype, nullable, where, members, prefix):
    """Encode rows as typed_ragged members (appended to members); the field's meta."""
    n = len(rows)
    arrs, nulls, any_t, tdts = [], np.zeros(n, dtype=bool), False, set()
    for i, r in enumerate(rows):
        if r is None:
            if not nullable:
                raise ValueError(f"{where}: row {i} is None; declare the field "
                                 "FieldSchema(..., nullable=True)")
            nulls[i] = True
            arrs.append(None)
            continue
        a, is_t, tdt = _row_array(r, dtype, f"{where} row {i}")
        any_t |= is_t
        if tdt:
            tdts.add(tdt)
        arrs.append(a)
    if len(tdts) > 1:
        raise TypeError(f"{where}: rows mix torch dtypes {sorted(tdts)}")
    tdt = tdts.pop() if tdts else None
    if dtype is not None and not tdt:
        dt = np.dtype(dtype)
    else:
        present = {a.dtype for a in arrs if a is not None and (a.size or tdt)}
        dt = functools.reduce(np.promote_types, present) if present else np.dtype(np.int64)
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
    return {"rows": n, "dtype": dt.str, "torch": any_t, "torch_dtype": tdt,
            "elements": int(total)}


def _ndarray(value, dtype, nullable, where, members, prefix):
    is_t, tdt = False, None
    nulls = None
    if _is_torch(value):
        arr, tdt = _tensor_numpy(value)
        is_t = True
        if dtype is not None and not tdt:
            arr = arr.astype(np.dtype(dtype))
    elif isinstance(value, np.ndarray):
        arr = value if dtype is None else value.astype(np.dtype(dtype), copy=False)
    else:
        vals = list(value) if not isinstance(value, (int, float, bool, np.generic)) \
            else value
        if isinstance(vals, list) and any(v is None for v in vals):
            if not nullable:
                i = next(i for i, v in enumerate(vals) if v is None)
                raise ValueError(f"{where}: row {i} is None; declare the field "
                                 "FieldSchema(..., nullable=True)")
            nulls = np.array([v is None for v in vals], dtype=bool)
            present = [v for v in vals if v is not None]
            try:
                probe = np.asarray(present, dtype=dtype) if present else \
                    np.zeros(0, dtype=dtype or np.int64)
            except (ValueError, TypeError, OverflowError) as e:
                raise ValueError(f"{where}: not an array of numbers ({e})") from None
            fill = np.zeros(probe.shape[1:], dtype=probe.dtype)
            vals = [fill if v is None else v for v in vals]
            dtype = probe.dtype
        try:
            arr = np.asarray(vals, dtype=dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise ValueError(f"{where}: not an array of numbers ({e})") from None
    if arr.dtype.hasobject:
        raise ValueError(f"{where}: object values cannot use the ndarray codec; use "
                         "msgpack_ragged")
    arr = np.ascontiguousarray(arr)
    n = arr.shape[0] if arr.ndim else 0
    if nulls is None:
        nulls = np.zeros(n, dtype=bool)
    members.append((prefix + "data", _Source([arr])))
    members.append((prefix + "nulls", _Source([nulls])))
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "torch": is_t,
            "torch_dtype": tdt, "rows": n}


def _msgpack_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if _is_torch(o):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return list(o)
    raise TypeError(f"cannot msgpack a {type(o).__module__}.{type(o).__qualname__}")


def _msgpack_ragged(value, where, members, prefix):
    rows = _as_rows(value, where)
    n = len(rows)
    packer = msgpack.Packer(default=_msgpack_default, use_bin_type=True)
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
    names, null_mask = [], np.zeros(n, dtype=bool)
    for i, r in enumerate(rows):
        if r is None:
            null_mask[i] = True
            continue
        if not isinstance(r, dict):
            raise TypeError(f"{where} row {i}: expected a dict or None, got "
                            f"{type(r).__name__}")
        for k in r:
            if not isinstance(k, str):
                raise TypeError(f"{where} row {i}: dict keys must be str, got {k!r}")
            if k not in names:
                names.append(k)
    members.append((prefix + "null_mask", _Source([null_mask])))
    keys = []
    for k in names:
        col = [None if r is None else r.get(k) for r in rows]
        m = _ragged(col, dtype, True, f"{where}[{k!r}]", members, f"{prefix}{_safe(k)}.")
        m["name"] = k
        keys.append(m)
    return {"rows": n, "keys": keys}


def _infer_codec(value):
    """The codec for an 'auto' field placed in non_tensor_batch."""
    if isinstance(value, np.ndarray) or _is_torch(value):
        return "ndarray"
    rows = list(value)
    present = [r for r in rows if r is not None]
    if all(isinstance(r, (bool, int, float, np.generic)) for r in present):
        return "ndarray"
    if all(isinstance(r, np.ndarray) or _is_torch(r) or (
            isinstance(r, (list, tuple)) and all(isinstance(x, (bool, int, float, np.generic))
                                                 for x in r)) for r in present):
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
    n = m["rows"]
    dt = np.dtype(m["dtype"])
    offsets = bufs.small(prefix + "offsets", np.int64, n + 1).tolist()
    ndims = bufs.small(prefix + "ndims", np.int16, n).tolist()
    nulls = bufs.small(prefix + "nulls", np.bool_, n).tolist()
    shapes = bufs.small(prefix + "shapes", np.int64, sum(ndims)).tolist()
    data = bufs.arr(prefix + "data", dt, offsets[-1] if n else 0)
    out, si = [], 0
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
    return out


def _decode_ndarray(bufs, prefix, m, nullable):
    dt = np.dtype(m["dtype"])
    shape = m["shape"]
    count = int(np.prod(shape)) if shape else 1
    arr = bufs.arr(prefix + "data", dt, count).reshape(shape)
    nulls = bufs.small(prefix + "nulls", np.bool_, m["rows"])
    if m.get("torch"):
        arr = _numpy_tensor(arr, m.get("torch_dtype"))
    if nulls.any():
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
            out.append(msgpack.unpackb(data[offsets[i]:offsets[i + 1]], raw=False,
                                       strict_map_key=False, use_list=True))
    return out


def _decode_rtd(bufs, prefix, m):
    n = m["rows"]
    null_mask = bufs.small(prefix + "null_mask", np.bool_, n).tolist()
    rows = [None if z else {} for z in null_mask]
    for km in m["keys"]:
        col = _decode_ragged(bufs, f"{prefix}{_safe(km['name'])}.", km)
        for i, v in enumerate(col):
            if v is not None and rows[i] is not None:
                rows[i][km["name"]] = v
    return rows


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
        """Close the BufferPool this object made (if no lease is outstanding)."""
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
        if type != "dict":
            raise NotImplementedError(f"MooncakeBundleTransfer.put: type {type!r} (only "
                                      "'dict' is supported)")
        if not isinstance(value, dict):
            raise TypeError(f"MooncakeBundleTransfer.put: expected a dict, got "
                            f"{value.__class__.__name__}")
        if options:
            warnings.warn(f"MooncakeBundleTransfer.put: ignoring options {sorted(options)}",
                          stacklevel=2)
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
                m = _ragged(_as_rows(v, where), s.dtype, s.nullable, where, members, prefix)
            elif codec == "ndarray":
                if isinstance(v, (str, bytes, dict)):
                    raise TypeError(f"{where}: expected an array or a sequence")
                m = _ndarray(v, s.dtype, s.nullable, where, members, prefix)
            elif codec == "msgpack_ragged":
                m = _msgpack_ragged(v, where, members, prefix)
            else:
                m = _ragged_tensor_dict(v, s.dtype, where, members, prefix)
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
            self._put_blob(f"{ref_base}/meta", meta, config, gid)
            written.append(f"{ref_base}/meta")
            self._put_members(objects, config, gid, written)
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
        pool = self.buffer_pool() if self._has("batch_put_from") else None
        pending = []  # (key, lease, size)

        def flush():
            if not pending:
                return
            batch = pending[:]
            pending.clear()
            try:
                keys = [k for k, _, _ in batch]
                cfg = self._config(config, gid, len(keys))
                ptrs = [lease.ptr for _, lease, _ in batch]
                sizes = [sz for _, _, sz in batch]
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
                for _, lease, _ in batch:
                    _release_lease(lease)

        try:
            pend_bytes = 0
            for key, src, off, size in objects:
                lease = self._try_lease(pool, size)
                if lease is None and pending:
                    flush()
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
                pending.append((key, lease, size))
                pend_bytes += size
                if pend_bytes >= _BATCH_BYTES or len(pending) >= _BATCH_KEYS:
                    flush()
                    pend_bytes = 0
            flush()
        finally:
            for _, lease, _ in pending:
                _release_lease(lease)

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
        if man.get("format") != _FORMAT or man.get("version") != _VERSION:
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
                    result[name] = _decode_ndarray(bufs, prefix, f, f.get("nullable"))
                elif codec == "msgpack_ragged":
                    result[name] = _decode_msgpack(bufs, prefix, f)
                elif codec == "ragged_tensor_dict":
                    result[name] = _decode_rtd(bufs, prefix, f)
                else:
                    raise RuntimeError(f"structured_object_store: field {name!r}: unknown "
                                       f"codec {codec!r}")
                if codec != "msgpack_ragged":
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
