"""How mooncake.structured_object_store turns field values into store members and back:
the JSON-safe encoding of `auto` fields, the column codecs (typed_ragged, ndarray,
msgpack_ragged, ragged_tensor_dict) and their decoders. No store calls here: the bundle
class (structured_object_store.py) moves what these functions produce."""
import array
import base64
import bisect
import copy
import itertools
import math
import mmap
import struct
import threading

import msgpack
import numpy as np

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

    def pieces(self, offset, size):
        """[(address, nbytes)] of bytes [offset, offset + size), one per part they span,
        in order: a store that takes a value in pieces sends them where they are."""
        out, end = [], offset + size
        i = max(bisect.bisect_right(self.starts, offset) - 1, 0)
        while i < len(self.parts) and self.starts[i] < end:
            p, s = self.parts[i], self.starts[i]
            a, b = max(offset, s), min(end, s + p.nbytes)
            if a < b:
                out.append((p.__array_interface__["data"][0] + a - s, b - a))
            i += 1
        return out

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

