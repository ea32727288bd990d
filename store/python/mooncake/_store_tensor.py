"""Stock MooncakeDistributedStore's tensor calls, on CPU torch tensors (Debian's
python3-torch) and numpy arrays.

An object holds a tensor in stock's layout, so a stock reader and a Tide reader decode
the same bytes: a 304-byte TensorMetadata, then the tensor's bytes (C order):

  header (40 B): magic u32 0x4d4f4f4e, version u16 1, header_size u16 304, dtype i32,
                 ndim i32, layout_kind u32 (0 full, 1 shard), reserved u32,
                 data_offset u64 304, data_bytes u64
  layout (264 B): global_shape i64[8], local_shape i64[8] (unused dims -1),
                 axis_count u32, reserved u32, 4 axes of (kind, axis_index, shard_rank,
                 shard_count, split_dim, reserved) i32 and reserved1 i64

all little-endian. dtype codes are stock's: float32 0, float64 1, int8 2, uint8 3, int16 4,
uint16 5, int32 6, uint32 7, int64 8, uint64 9, bool 10, float16 11, bfloat16 12,
float8_e4m3fn 13, float8_e5m2 14. A tensor-parallel shard (the *_with_tp calls) is stored
under "<key>_tp_<rank>" with layout_kind 1 and one TP axis (kind 1), as stock does.

Puts write the metadata and the tensor's own memory as two parts of one object (no copy
of the tensor in this process). get_tensor receives the object straight into the memory
of the tensor it returns; get_tensor_into returns a tensor over the caller's buffer.
A tensor on a GPU is refused with one line saying so (Tide has no GPU path), as is a
dtype the caller's torch lacks. Without torch installed, gets return numpy arrays.
"""
import ctypes
import struct
import sys
import threading

from mooncake._native import abi as _abi, lib as _lib
from mooncake._store_base import (_INVALID_PARAMS, _NO_RELEASE, _key, _regroup, _seq, _sz,
                                  _vp)

MAGIC, VERSION = 0x4D4F4F4E, 1
_HEAD = struct.Struct("<IHHiiIIQQ")
_LAYOUT = struct.Struct("<8q8qII" + "iiiiiiq" * 4)
META_SIZE = _HEAD.size + _LAYOUT.size  # 304, stock's sizeof(TensorMetadata)
MAX_DIMS, MAX_AXES = 8, 4
FULL, SHARD = 0, 1
AXIS_TP = 1
# stock's TensorDtype: (code, item size, torch name, numpy name)
_DTYPES = [
    (0, 4, "float32", "float32"), (1, 8, "float64", "float64"), (2, 1, "int8", "int8"),
    (3, 1, "uint8", "uint8"), (4, 2, "int16", "int16"), (5, 2, "uint16", "uint16"),
    (6, 4, "int32", "int32"), (7, 4, "uint32", "uint32"), (8, 8, "int64", "int64"),
    (9, 8, "uint64", "uint64"), (10, 1, "bool", "bool"), (11, 2, "float16", "float16"),
    (12, 2, "bfloat16", None), (13, 1, "float8_e4m3fn", None), (14, 1, "float8_e5m2", None),
]
_BY_CODE = {d[0]: d for d in _DTYPES}


def _say(what, msg):
    print(f"mooncake.store: {what}: {msg}", file=sys.stderr)


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _code_of(obj):
    """stock's dtype code of a torch tensor's or numpy array's dtype, or None."""
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        name = str(obj.dtype).replace("torch.", "")
        return next((d[0] for d in _DTYPES if d[2] == name), None)
    name = str(getattr(obj, "dtype", ""))
    return next((d[0] for d in _DTYPES if d[3] == name), None)


class _Info:
    """A tensor to store: dtype code, shape, the address and length of its bytes, and
    the contiguous object those bytes belong to (kept alive during the put)."""
    __slots__ = ("code", "shape", "addr", "nbytes", "owner")


def _info(what, t):
    """_Info of a CPU torch tensor or numpy array, or None after saying why not."""
    torch = _torch()
    if torch is not None and isinstance(t, torch.Tensor):
        if t.device.type != "cpu":
            _say(what, f"a tensor on {t.device} cannot be stored: Tide has no GPU path; "
                 "move it to the CPU first (tensor.cpu())")
            return None
        c = t.contiguous()
        addr, nbytes = c.data_ptr(), c.numel() * c.element_size()
    else:
        try:
            import numpy as np
        except ImportError:
            np = None
        if np is None or not isinstance(t, np.ndarray):
            _say(what, f"expected a torch tensor or a numpy array, not {type(t).__name__}")
            return None
        c = np.ascontiguousarray(t)
        addr, nbytes = c.ctypes.data, c.nbytes
    code = _code_of(c)
    if code is None:
        _say(what, f"dtype {c.dtype} has no Mooncake tensor code")
        return None
    if len(c.shape) > MAX_DIMS:
        _say(what, f"{len(c.shape)} dimensions; Mooncake tensors have at most {MAX_DIMS}")
        return None
    i = _Info()
    i.code, i.shape, i.addr, i.nbytes, i.owner = code, tuple(c.shape), addr, nbytes, c
    return i


def pack_meta(code, global_shape, local_shape, nbytes, kind=FULL, axes=()):
    """The 304 metadata bytes (stock's BuildTensorMetadata, data_bytes = nbytes)."""
    def dims(s):
        return list(s) + [-1] * (MAX_DIMS - len(s))
    head = _HEAD.pack(MAGIC, VERSION, META_SIZE, code, len(global_shape), kind, 0,
                      META_SIZE, nbytes)
    ax = []
    for a in list(axes)[:MAX_AXES]:
        ax += list(a)
    ax += [0] * (7 * (MAX_AXES - len(axes)))
    return head + _LAYOUT.pack(*dims(global_shape), *dims(local_shape), len(axes), 0, *ax)


def parse_meta(buf, total):
    """(code, local shape, data offset, data bytes) of an object of total bytes whose
    first META_SIZE bytes are buf, or None when they are not a valid stock tensor header
    (stock's ValidateTensorMetadata)."""
    if total < META_SIZE or len(buf) < META_SIZE:
        return None
    magic, ver, hsize, code, ndim, kind, _, off, nbytes = _HEAD.unpack_from(buf, 0)
    lay = _LAYOUT.unpack_from(buf, _HEAD.size)
    gshape, lshape, naxes = lay[0:8], lay[8:16], lay[16]
    if (magic != MAGIC or ver != VERSION or hsize != META_SIZE or code not in _BY_CODE or
            not 0 <= ndim <= MAX_DIMS or naxes > MAX_AXES or kind > SHARD or
            not META_SIZE <= off <= total or nbytes != total - off):
        return None
    if any(d < 0 for d in gshape[:ndim] + lshape[:ndim]) or \
            any(d != -1 for d in gshape[ndim:] + lshape[ndim:]):
        return None
    n = _BY_CODE[code][1]
    for d in lshape[:ndim]:
        n *= d
    if n != nbytes:
        return None
    for a in range(naxes):
        kind_a, _, rank, count, split, _, _ = lay[18 + 7 * a: 25 + 7 * a]
        if not 0 <= kind_a <= 4 or count <= 0 or not 0 <= rank < count or \
                not -1 <= split < ndim:
            return None
    return code, tuple(lshape[:ndim]), off, nbytes


def _as_tensor(what, raw, info):
    """The tensor (torch if importable, else numpy) viewing raw (a 1-D uint8 torch
    tensor or numpy array over the whole object) as info's dtype and shape."""
    code, shape, off, nbytes = info
    _, _, tname, nname = _BY_CODE[code]
    torch = _torch()
    if torch is not None and isinstance(raw, torch.Tensor):
        dt = getattr(torch, tname, None)
        if dt is None:
            _say(what, f"the object holds {tname}, which this torch ({torch.__version__}) "
                 "lacks")
            return None
        return raw[off:off + nbytes].view(dt).reshape(shape)
    import numpy as np
    if nname is None:
        _say(what, f"the object holds {tname}, which numpy lacks (install python3-torch)")
        return None
    return raw[off:off + nbytes].view(np.dtype(nname)).reshape(shape)


_tls = threading.local()


def fresh_bytes(n):
    """A fresh uint8 tensor of n bytes (at least 1), or a numpy array without torch, and
    its address."""
    torch = _torch()
    if torch is not None:
        raw = torch.empty(max(1, n), dtype=torch.uint8)
        return raw, raw.data_ptr()
    import numpy as np
    raw = np.empty(max(1, n), dtype=np.uint8)
    return raw, raw.ctypes.data


@_abi.tide_store_alloc_fn
def _tensor_alloc_cb(arg, size):
    """tide_store_get_with's allocator for get_tensor: a fresh uint8 tensor (or numpy
    array) of the object's size, which the object is received into. Must return."""
    try:
        raw, addr = fresh_bytes(size)
        _tls.raw = raw
        return addr
    except BaseException as e:  # noqa: B036 (raised again by the caller)
        _tls.exc = e
        return None


def _raw_over(ptr, n):
    """A 1-D uint8 tensor (numpy array without torch) over n bytes at ptr, no copy."""
    arr = (ctypes.c_ubyte * max(1, n)).from_address(ptr)
    torch = _torch()
    if torch is not None:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.frombuffer(arr, dtype=torch.uint8, count=n) if n else \
                torch.empty(0, dtype=torch.uint8)
    import numpy as np
    return np.frombuffer(arr, dtype=np.uint8, count=n)


def _tp_key(key, rank):
    return f"{key}_tp_{rank}"


class _TensorCalls:
    """The tensor methods of MooncakeDistributedStore (see the module's docstring)."""

    # -------------------------------------------------------------------- puts
    def _put_infos(self, what, keys, infos, metas, config, upsert):
        """One put (or upsert) of len(keys) tensors: per key 0 or a negative code."""
        groups = []
        for info, meta in zip(infos, metas):
            if info is None:
                groups.append(None)
                continue
            g = [(ctypes.cast(ctypes.c_char_p(meta), _vp).value, META_SIZE)]
            if info.nbytes:
                g.append((info.addr, info.nbytes))
            groups.append(g)
        return self._put_groups(what, keys, groups, config, upsert)

    def _put_tensors(self, what, keys, tensors, config, upsert):
        _seq(keys, what)
        tensors = list(tensors)
        if len(tensors) != len(keys) or not keys:
            return [_INVALID_PARAMS] * len(keys)
        infos = [_info(what, t) for t in tensors]
        metas = [None if i is None else pack_meta(i.code, i.shape, i.shape, i.nbytes)
                 for i in infos]
        return self._put_infos(what, list(keys), infos, metas, config, upsert)

    def put_tensor(self, key, tensor):
        """Store a CPU tensor (or numpy array) in stock's layout: 0 or a negative code."""
        return self._put_tensors("put_tensor", [key], [tensor], None, False)[0]

    def pub_tensor(self, key, tensor, config=None):
        """put_tensor with a ReplicateConfig: 0 or a negative code."""
        return self._put_tensors("pub_tensor", [key], [tensor], config, False)[0]

    def upsert_tensor(self, key, tensor):
        """put_tensor, replacing an existing value: 0 or a negative code."""
        return self._put_tensors("upsert_tensor", [key], [tensor], None, True)[0]

    def upsert_pub_tensor(self, key, tensor, config=None):
        return self._put_tensors("upsert_pub_tensor", [key], [tensor], config, True)[0]

    def batch_put_tensor(self, keys, tensors_list):
        """put_tensor for each pair: per key 0 or a negative code."""
        return self._put_tensors("batch_put_tensor", keys, tensors_list, None, False)

    def batch_pub_tensor(self, keys, tensors_list, config=None):
        return self._put_tensors("batch_pub_tensor", keys, tensors_list, config, False)

    def batch_upsert_tensor(self, keys, tensors_list):
        return self._put_tensors("batch_upsert_tensor", keys, tensors_list, None, True)

    def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
        return self._put_tensors("batch_upsert_pub_tensor", keys, tensors_list, config, True)

    def _put_from_checked(self, what, keys, ptrs, sizes, upsert):
        """put_tensor_from and its forms: the buffers must already hold a valid tensor
        object ([metadata][data]); else every key -600, as stock."""
        _seq(keys, what)
        ptrs, sizes = list(ptrs), list(sizes)
        if not (len(keys) == len(ptrs) == len(sizes)):
            return [_INVALID_PARAMS] * len(keys)
        for p, n in zip(ptrs, sizes):
            if not p or n < META_SIZE or parse_meta(ctypes.string_at(p, META_SIZE), n) is None:
                _say(what, "a buffer does not hold a Mooncake tensor ([TensorMetadata][data])")
                return [_INVALID_PARAMS] * len(keys)
        return self._put_groups(what, list(keys), [[(p, n)] for p, n in zip(ptrs, sizes)],
                                None, upsert)

    def put_tensor_from(self, key, buffer_ptr, size):
        """Store size bytes at buffer_ptr, which hold [TensorMetadata][data]: 0 or a code."""
        return self._put_from_checked("put_tensor_from", [key], [buffer_ptr], [size], False)[0]

    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
        if not len(keys):
            return []
        return self._put_from_checked("batch_put_tensor_from", keys, buffer_ptrs, sizes, False)

    def upsert_tensor_from(self, key, buffer_ptr, size):
        return self._put_from_checked("upsert_tensor_from", [key], [buffer_ptr], [size],
                                      True)[0]

    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
        if not len(keys):
            return []
        return self._put_from_checked("batch_upsert_tensor_from", keys, buffer_ptrs, sizes,
                                      True)

    # ------------------------------------------------------------------- gets
    def _get_raw(self, what, key):
        """(raw, head) for the object under key, received straight into a fresh uint8
        tensor (numpy array without torch): raw covers the whole object, head is its first
        META_SIZE bytes (b"" when shorter). None when the key is missing or on error."""
        k = _key(key, what)
        if k is None:
            return None
        h = self._enter()
        if h is None:
            return None
        try:
            p, n = _vp(), _sz()
            saved = (getattr(_tls, "raw", None), getattr(_tls, "exc", None))
            _tls.raw = _tls.exc = None
            try:
                rc = _lib.tide_store_get_with(h, k, _tensor_alloc_cb, _NO_RELEASE, None,
                                              ctypes.byref(p), ctypes.byref(n))
                raw, exc = _tls.raw, _tls.exc
            finally:
                _tls.raw, _tls.exc = saved
            if exc is not None and not isinstance(exc, MemoryError):
                raise exc
            if rc != 0 or raw is None:
                return None
            head = ctypes.string_at(p.value, META_SIZE) if n.value >= META_SIZE else b""
            return raw[:n.value], head
        finally:
            self._leave()

    def get_tensor(self, key):
        """The tensor stored under key (received straight into its memory), or None when
        the key is missing, on error, or when the object is not a tensor."""
        got = self._get_raw("get_tensor", key)
        if got is None:
            return None
        raw, head = got
        info = parse_meta(head, len(raw))
        if info is None:
            _say("get_tensor", f"{key!r} does not hold a Mooncake tensor")
            return None
        return _as_tensor("get_tensor", raw, info)

    def batch_get_tensor(self, keys):
        """get_tensor for each key: a tensor or None per key."""
        _seq(keys, "batch_get_tensor")
        return [self.get_tensor(k) for k in keys]

    def get_tensor_into(self, key, buffer_ptr, size):
        """Read the tensor object into size bytes at buffer_ptr and return a tensor over
        that memory (no copy), or None."""
        n = self.get_into(key, buffer_ptr, size)
        return self._tensor_at("get_tensor_into", key, buffer_ptr, n)

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        """get_tensor_into for each key: a tensor or None per key (-600 per key when the
        lists differ in length or a pointer is null, as stock)."""
        _seq(keys, "batch_get_tensor_into")
        ptrs, sizes = list(buffer_ptrs), list(sizes)
        if not (len(keys) == len(ptrs) == len(sizes)) or any(not p for p in ptrs):
            return [_INVALID_PARAMS] * len(keys)
        got = self.batch_get_into(keys, ptrs, sizes)
        return [self._tensor_at("batch_get_tensor_into", k, p, n)
                for k, p, n in zip(keys, ptrs, got)]

    @staticmethod
    def _tensor_at(what, key, ptr, n):
        if not isinstance(n, int) or n < META_SIZE:
            if isinstance(n, int) and 0 <= n < META_SIZE:
                _say(what, f"{key!r} is too short to be a Mooncake tensor")
            return None
        info = parse_meta(ctypes.string_at(ptr, META_SIZE), n)
        if info is None:
            _say(what, f"{key!r} does not hold a Mooncake tensor")
            return None
        return _as_tensor(what, _raw_over(ptr, n), info)

    # -------------------------------------------------------- tensor parallelism
    def _tp_put(self, what, base_keys, tensors, tp_size, split_dim, config, upsert):
        """Each tensor split evenly along split_dim into tp_size shards, stored under
        <key>_tp_<rank> in one batch; per base key 0 or the first failing shard's code."""
        _seq(base_keys, what)
        tensors = list(tensors)
        if len(tensors) != len(base_keys) or not base_keys:
            return [_INVALID_PARAMS] * len(base_keys)
        keys, infos, metas, owner = [], [], [], []
        res = [_INVALID_PARAMS] * len(base_keys)
        for b, (key, t) in enumerate(zip(base_keys, tensors)):
            full = _info(what, t)
            if full is None:
                continue
            shape = full.shape
            if not 0 <= split_dim < len(shape) or shape[split_dim] % tp_size:
                _say(what, f"{key!r}: dimension {split_dim} of shape {shape} does not split "
                     f"evenly into {tp_size} shards")
                continue
            step = shape[split_dim] // tp_size
            for rank in range(tp_size):
                shard = full.owner.narrow(split_dim, rank * step, step) \
                    if hasattr(full.owner, "narrow") else \
                    full.owner.take(range(rank * step, (rank + 1) * step), axis=split_dim)
                si = _info(what, shard)
                local = list(shape)
                local[split_dim] = step
                axis = (AXIS_TP, 0, rank, tp_size, split_dim, 0, step)
                keys.append(_tp_key(key, rank))
                infos.append(si)
                metas.append(pack_meta(full.code, shape, local, si.nbytes, SHARD, [axis]))
                owner.append(b)
            res[b] = 0
        if keys:
            out = self._put_infos(what, keys, infos, metas,
                                  _regroup(config, owner, len(base_keys)), upsert)
            for b, r in zip(owner, out):
                if r != 0 and res[b] == 0:
                    res[b] = r
        return res

    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        """tp_size 1: put_tensor. Else the tensor's tp_size shards along split_dim, each
        under <key>_tp_<rank>: 0, or the first failing shard's code."""
        if tp_size <= 1:
            return self.put_tensor(key, tensor)
        return self._tp_put("put_tensor_with_tp", [key], [tensor], tp_size, split_dim, None,
                            False)[0]

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1,
                                 split_dim=0):
        if tp_size <= 1:
            return self.batch_put_tensor(base_keys, tensors_list)
        return self._tp_put("batch_put_tensor_with_tp", base_keys, tensors_list, tp_size,
                            split_dim, None, False)

    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1,
                           split_dim=0):
        if tp_size <= 1:
            return self.pub_tensor(key, tensor, config)
        return self._tp_put("pub_tensor_with_tp", [key], [tensor], tp_size, split_dim,
                            config, False)[0]

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0,
                                 tp_size=1, split_dim=0):
        if tp_size <= 1:
            return self.batch_pub_tensor(base_keys, tensors_list, config)
        return self._tp_put("batch_pub_tensor_with_tp", base_keys, tensors_list, tp_size,
                            split_dim, config, False)

    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        """tp_size 1: get_tensor(key); else the shard get_tensor(<key>_tp_<tp_rank>)."""
        return self.get_tensor(key if tp_size <= 1 else _tp_key(key, tp_rank))

    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        _seq(base_keys, "batch_get_tensor_with_tp")
        keys = base_keys if tp_size <= 1 else [_tp_key(k, tp_rank) for k in base_keys]
        return self.batch_get_tensor(keys)

    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1,
                                split_dim=0):
        return self.get_tensor_into(key if tp_size <= 1 else _tp_key(key, tp_rank),
                                    buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0,
                                      tp_size=1):
        _seq(base_keys, "batch_get_tensor_with_tp_into")
        keys = base_keys if tp_size <= 1 else [_tp_key(k, tp_rank) for k in base_keys]
        return self.batch_get_tensor_into(keys, buffer_ptrs, sizes)

    def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1,
                                split_dim=0):
        """A full tensor object at buffer_ptr ([metadata][data]), stored as put_tensor_with_tp
        stores it."""
        if tp_size <= 1:
            return self.put_tensor_from(key, buffer_ptr, size)
        t = self._tensor_at("put_tensor_with_tp_from", key, buffer_ptr, size) \
            if buffer_ptr else None
        if t is None:
            return _INVALID_PARAMS
        return self.put_tensor_with_tp(key, t, tp_rank, tp_size, split_dim)

    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0,
                                      tp_size=1, split_dim=0):
        if tp_size <= 1:
            return self.batch_put_tensor_from(base_keys, buffer_ptrs, sizes)
        _seq(base_keys, "batch_put_tensor_with_tp_from")
        ptrs, sizes = list(buffer_ptrs), list(sizes)
        if not (len(base_keys) == len(ptrs) == len(sizes)) or not base_keys:
            return [_INVALID_PARAMS] * len(base_keys)
        return [self.put_tensor_with_tp_from(k, p, n, tp_rank, tp_size, split_dim)
                for k, p, n in zip(base_keys, ptrs, sizes)]
