"""Stock MooncakeDistributedStore's unified parallel tensor calls (the *_with_parallelism
family) and the request classes stock's mooncake.store exports for them: ParallelAxis,
TensorParallelism and ReadTarget.

A write names the stored object by its parallel axes; a read says what it wants back.
Objects are stock's [TensorMetadata][data] (see mooncake._store_tensor), under stock's
key names, so stock and Tide read each other's shards:

  parallelism=None                   the full tensor under key
  one TP axis                        the caller's shard (its global shape is inferred:
                                     split dimension x size) under "<key>_tp_<rank>",
                                     and a manifest under "<key>__parallelism_manifest"
  TP and other axes                  the caller's full tensor, cut to the shard of the TP
                                     rank, under key + "__<axis>" per axis in the order
                                     DP, TP, EP, PP ("tp_1of4_sd0", "dp_0of2",
                                     "ep_1of4_eid3", "pp_0of2_sid1"), and the manifest
  no TP axis (DP, EP, PP only)       the tensor as given, under the axis-named key
  writer_partition (rank, size,      the full tensor cut to that shard, under
  split_dim attributes)              "<key>__writer_<r>of<s>_sd<d>", and a manifest under
                                     "<key>__writer_manifest"

The _from forms take a buffer holding a full tensor object; with a TP axis they store
every TP rank's shard (no manifest), as stock does.

The manifest is stock's WriterShardManifest (96 bytes, little-endian): magic u32
0x574d414e, version u16 1, header_size u16 96, dtype, ndim, split_dim, shard_count and a
reserved i32, 4 bytes of padding, then the global shape as i64[8] (unused dims -1).

Reads take a ReadTarget (None: as stored): "as_stored" is get_tensor(key); "shard" with
a parallelism returns the stored shard when one matches every axis, else rebuilds the
requested TP shard from the stored shards of another TP size (found through the
manifest, the "_tp_" keys or the axis-named keys); "full" with a parallelism rebuilds
the whole tensor from its TP shards, and "full" without one from the writer-partition
shards (the object under key when there is no writer manifest). Shard and full results
carry stock's metadata: a shard header naming the requested axes, or a full header.

Return codes: writes 0 or a negative Mooncake code (-600 for any bad request: a type,
an axis rule, a rank outside its size, a split that is not even, a buffer that does not
hold a tensor object; batches give -600 to every key when the lists disagree). Reads
return a tensor, or None (missing key, bad request, mismatched layout). Every refusal
prints one line saying why, as the other tensor calls do.
"""
import ctypes
import struct

from mooncake._store_base import _INVALID_PARAMS, _kb, _regroup, _seq, _vp
from mooncake._store_tensor import (_BY_CODE, FULL, META_SIZE, SHARD, _HEAD, _LAYOUT,
                                    _as_tensor, _info, _raw_over, _say, fresh_bytes,
                                    pack_meta, parse_meta)

_DP, _TP, _EP, _PP = 0, 1, 2, 3  # stock's LayoutAxisKind
_KINDS = {"dp": _DP, "tp": _TP, "ep": _EP, "pp": _PP}
_NAMES = {v: k for k, v in _KINDS.items()}
_MODES = ("as_stored", "shard", "full")

_MANIFEST = struct.Struct("<IHHiiiii4x8q")
_MANIFEST_MAGIC, _MANIFEST_VERSION = 0x574D414E, 1


class _No(Exception):
    """A request refused; its text is the line printed."""


def _int(v, name):
    """v as pybind11's int caster takes it (int or bool), else TypeError."""
    if not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    return int(v)


def _opt_int(v, name):
    return None if v is None else _int(v, name)


# ------------------------------------------------------------------ request classes

class ParallelAxis:
    """One axis of a shard's identity (stock's mooncake.store.ParallelAxis): kind "tp",
    "dp", "ep" or "pp", rank and size on that axis, split_dim (TP only), expert_id (EP
    only, required there), stage_id (PP only, required there)."""

    __slots__ = ("_kind", "_rank", "_size", "_split_dim", "_expert_id", "_stage_id")

    def __init__(self):
        self._kind, self._rank, self._size = "", 0, 1
        self._split_dim = self._expert_id = self._stage_id = None

    def _copy(self):
        c = ParallelAxis()
        for s in ParallelAxis.__slots__:
            setattr(c, s, getattr(self, s))
        return c

    @property
    def kind(self):
        return self._kind

    @kind.setter
    def kind(self, v):
        if not isinstance(v, str):
            raise TypeError(f"ParallelAxis.kind must be a str, not {type(v).__name__}")
        self._kind = v

    rank = property(lambda self: self._rank,
                    lambda self, v: setattr(self, "_rank", _int(v, "ParallelAxis.rank")))
    size = property(lambda self: self._size,
                    lambda self, v: setattr(self, "_size", _int(v, "ParallelAxis.size")))
    split_dim = property(lambda self: self._split_dim, lambda self, v: setattr(
        self, "_split_dim", _opt_int(v, "ParallelAxis.split_dim")))
    expert_id = property(lambda self: self._expert_id, lambda self, v: setattr(
        self, "_expert_id", _opt_int(v, "ParallelAxis.expert_id")))
    stage_id = property(lambda self: self._stage_id, lambda self, v: setattr(
        self, "_stage_id", _opt_int(v, "ParallelAxis.stage_id")))

    def __repr__(self):
        return (f"ParallelAxis(kind={self._kind!r}, rank={self._rank}, size={self._size}, "
                f"split_dim={self._split_dim}, expert_id={self._expert_id}, "
                f"stage_id={self._stage_id})")


class TensorParallelism:
    """An ordered list of ParallelAxis (stock's mooncake.store.TensorParallelism). As in
    stock (a bound std::vector), reading axes gives a copy: assign a whole list."""

    __slots__ = ("_axes",)

    def __init__(self):
        self._axes = []

    @property
    def axes(self):
        return [a._copy() for a in self._axes]

    @axes.setter
    def axes(self, v):
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise TypeError("TensorParallelism.axes must be a list of ParallelAxis")
        v = list(v)
        for a in v:
            if not isinstance(a, ParallelAxis):
                raise TypeError("TensorParallelism.axes must be a list of ParallelAxis, "
                                f"not of {type(a).__name__}")
        self._axes = [a._copy() for a in v]

    def __repr__(self):
        return f"TensorParallelism(axes={self._axes!r})"


class ReadTarget:
    """What a read returns (stock's mooncake.store.ReadTarget): mode "as_stored" (the
    default), "shard" (the shard parallelism names) or "full"; parallelism None or a
    TensorParallelism. An unknown mode raises RuntimeError, as stock."""

    __slots__ = ("_mode", "_parallelism")

    def __init__(self):
        self._mode, self._parallelism = "as_stored", None

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, v):
        if not isinstance(v, str):
            raise TypeError(f"ReadTarget.mode must be a str, not {type(v).__name__}")
        if v.lower() not in _MODES:
            raise RuntimeError("Unsupported ReadTarget mode")
        self._mode = v.lower()

    @property
    def parallelism(self):
        return self._parallelism

    @parallelism.setter
    def parallelism(self, v):
        if v is not None and not isinstance(v, TensorParallelism):
            raise TypeError("ReadTarget.parallelism must be a TensorParallelism or None, "
                            f"not {type(v).__name__}")
        self._parallelism = v

    def __repr__(self):
        return f"ReadTarget(mode={self._mode!r}, parallelism={self._parallelism!r})"


# ------------------------------------------------------- requests as plain tuples

class _Ax(tuple):
    """(kind code, rank, size, split_dim, expert_id, stage_id); None for unset."""
    __slots__ = ()
    kind = property(lambda s: s[0])
    rank = property(lambda s: s[1])
    size = property(lambda s: s[2])
    split = property(lambda s: s[3])

    def with_rank(self, rank, size=None):
        return _Ax((self[0], rank, self[2] if size is None else size) + self[3:])


def _attr_int(obj, name, optional):
    v = getattr(obj, name, None)
    if v is None and optional:
        return None
    if not isinstance(v, int):
        raise _No(f"{name} must be an int, not {type(v).__name__}")
    return int(v)


def _parse_axis(obj):
    """stock's parse_parallel_axis_spec, on any object with those attributes."""
    if not all(hasattr(obj, a) for a in ("kind", "rank", "size")):
        raise _No("ParallelAxis must provide kind, rank, and size")
    kind = obj.kind
    if not isinstance(kind, str) or kind.lower() not in _KINDS:
        raise _No(f"unsupported parallel axis kind {kind!r} (tp, dp, ep or pp)")
    return _Ax((_KINDS[kind.lower()], _attr_int(obj, "rank", False),
                _attr_int(obj, "size", False), _attr_int(obj, "split_dim", True),
                _attr_int(obj, "expert_id", True), _attr_int(obj, "stage_id", True)))


def _parse_parallelism(obj):
    """The axes of a TensorParallelism-like object (None stays None)."""
    if obj is None:
        return None
    if not hasattr(obj, "axes"):
        raise _No(f"parallelism must be a TensorParallelism, not {type(obj).__name__}")
    axes = obj.axes
    if isinstance(axes, (str, bytes)) or not hasattr(axes, "__iter__"):
        raise _No("TensorParallelism.axes must be a list of ParallelAxis")
    return [_parse_axis(a) for a in axes]


def _validate(axes):
    """stock's validate_parallelism_spec: at most four axes of distinct kinds, each rank
    within [0, size); TP needs split_dim, EP expert_id, PP stage_id; only TP splits."""
    if axes is None:
        raise _No("parallelism is required")
    if not axes:
        raise _No("parallelism axes cannot be empty")
    if len(axes) > 4:
        raise _No(f"{len(axes)} axes; at most 4")
    seen = set()
    for a in axes:
        name = _NAMES[a.kind]
        if a.size <= 0 or not 0 <= a.rank < a.size:
            raise _No(f"{name} axis: rank {a.rank} is outside size {a.size}")
        if a.kind in seen:
            raise _No(f"two {name} axes (each kind at most once)")
        seen.add(a.kind)
        if a.kind == _TP and a.split is None:
            raise _No("a tp axis needs split_dim")
        if a.kind != _TP and a.split is not None:
            raise _No(f"a {name} axis takes no split_dim")
        if a.kind == _EP and a[4] is None:
            raise _No("an ep axis needs expert_id")
        if a.kind == _PP and a[5] is None:
            raise _No("a pp axis needs stage_id")
    return axes


def _canon(axes):
    return sorted(axes, key=lambda a: a.kind)


def _tp_index(axes):
    return next((i for i, a in enumerate(axes) if a.kind == _TP), None)


def _single_tp(axes):
    return len(axes) == 1 and axes[0].kind == _TP


def _key_for(base, axes):
    """stock's get_parallelism_key_name: "<key>_tp_<rank>" for one TP axis, else one
    "__<kind>_<rank>of<size>[_sd<d>][_eid<e>][_sid<s>]" per axis, in DP, TP, EP, PP
    order. base is the key's bytes."""
    if _single_tp(axes):
        return base + b"_tp_%d" % axes[0].rank
    out = base
    for a in _canon(axes):
        out += b"__%s_%dof%d" % (_NAMES[a.kind].encode(), a.rank, a.size)
        for tag, v in ((b"_sd", a[3]), (b"_eid", a[4]), (b"_sid", a[5])):
            if v is not None:
                out += tag + b"%d" % v
    return out


def _writer_key(base, rank, size, split):
    return base + b"__writer_%dof%d_sd%d" % (rank, size, split)


def _writer_manifest_key(base):
    return base + b"__writer_manifest"


def _manifest_key(base):
    return base + b"__parallelism_manifest"


def _layout_axes(axes, local):
    """The stored LayoutAxis tuples of axes (in their order) for a shard of shape local:
    split extent in reserved1, expert or stage id in reserved0."""
    out = []
    for i, a in enumerate(axes):
        split = -1 if a.split is None else a.split
        if a.split is not None and not 0 <= a.split < len(local):
            raise _No(f"split_dim {a.split} is outside a {len(local)}-dimensional tensor")
        res0 = a[4] if a.kind == _EP else a[5] if a.kind == _PP else 0
        out.append((a.kind, i, a.rank, a.size, split, res0 or 0,
                    local[a.split] if a.split is not None else 0))
    return out


def _shard_meta(code, gshape, local, nbytes, axes):
    return pack_meta(code, gshape, local, nbytes, SHARD, _layout_axes(axes, local))


def _manifest(code, gshape, split, count):
    dims = list(gshape) + [-1] * (8 - len(gshape))
    return _MANIFEST.pack(_MANIFEST_MAGIC, _MANIFEST_VERSION, _MANIFEST.size, code,
                          len(gshape), split, count, 0, *dims)


def _parse_manifest(b):
    """(dtype code, global shape, split_dim, shard count) of a manifest's bytes, or None."""
    if len(b) < _MANIFEST.size:
        return None
    magic, ver, hsize, code, ndim, split, count, _, *dims = _MANIFEST.unpack_from(b, 0)
    if magic != _MANIFEST_MAGIC or ver != _MANIFEST_VERSION or hsize != _MANIFEST.size or \
            not 0 <= ndim <= 8 or count <= 0 or not 0 <= split < ndim:
        return None
    shape = dims[:ndim]
    if any(d < 0 for d in shape):
        return None
    return code, shape, split, count


class _Meta:
    """A tensor object's parsed metadata."""
    __slots__ = ("code", "kind", "gshape", "lshape", "axes", "off", "nbytes")


def _meta(head, total=None):
    """_Meta of an object whose first META_SIZE bytes are head (total: its size; None
    takes it from the header, for a prefix read), or None when not a tensor object."""
    if len(head) < META_SIZE:
        return None
    h = _HEAD.unpack_from(head, 0)
    if total is None:
        total = h[7] + h[8]
    if parse_meta(head, total) is None:
        return None
    lay = _LAYOUT.unpack_from(head, _HEAD.size)
    m = _Meta()
    ndim = h[4]
    m.code, m.kind, m.off, m.nbytes = h[3], h[5], h[7], h[8]
    m.gshape, m.lshape = list(lay[0:ndim]), list(lay[8:8 + ndim])
    m.axes = [lay[18 + 7 * i: 25 + 7 * i] for i in range(lay[16])]
    return m


def _stored_axes(m):
    """stock's parallelism_from_metadata, canonical order; None for a full object."""
    if m.kind != SHARD:
        return None
    out = []
    for kind, _, rank, count, split, res0, _ in m.axes:
        out.append(_Ax((kind, rank, count, None if split < 0 else split,
                        res0 if kind == _EP else None, res0 if kind == _PP else None)))
    return _canon(out)


def _stored_tp(m):
    """The first stored TP LayoutAxis of m, or None."""
    return next((a for a in m.axes if a[0] == _TP), None)


def _tp_compatible(req, m):
    """stock's resolve_tp_compatible_parallelism_from_metadata: the stored axes when they
    agree with req (canonical) on every axis but the TP axis's rank and size."""
    st = _stored_axes(m)
    if st is None or len(st) != len(req):
        return None
    i = _tp_index(req)
    if i is None or i != _tp_index(st):
        return None
    for j, (a, b) in enumerate(zip(req, st)):
        if (a[0], a[3], a[4], a[5]) != (b[0], b[3], b[4], b[5]) if j == i else a != b:
            return None
    return st


def _same_but_tp_rank(lhs, rhs):
    """stock's parallelism_specs_equal_by_kind(..., allow_tp_rank_mismatch=True)."""
    if len(lhs) != len(rhs):
        return False
    by_kind = {a.kind: a for a in rhs}
    for a in lhs:
        b = by_kind.get(a.kind)
        if b is None:
            return False
        if (a[0] == _TP and (a[2:] != b[2:])) or (a[0] != _TP and a != b):
            return False
    return True


def _shard_range(dim, rank, count):
    start = dim * rank // count
    return start, dim * (rank + 1) // count - start


def _narrow(t, dim, start, n):
    """A contiguous copy of t[..., start:start+n, ...] along dim (torch or numpy)."""
    if hasattr(t, "narrow"):
        return t.narrow(dim, start, n).contiguous()
    import numpy as np
    idx = (slice(None),) * dim + (slice(start, start + n),)
    return np.ascontiguousarray(t[idx])


def _addr(b):
    return ctypes.cast(ctypes.c_char_p(b), _vp).value


class _Source:
    __slots__ = ("key", "meta")

    def __init__(self, key, meta):
        self.key, self.meta = key, meta


# ------------------------------------------------------------------------ the calls

class _ParallelCalls:
    """The *_with_parallelism methods of MooncakeDistributedStore (see the module's
    docstring)."""

    # ------------------------------------------------------------- write plumbing
    def _pput(self, what, key, parts, config, upsert):
        """One object from parts (bytes or (address, length)): 0 or a negative code."""
        group, keep = [], []
        for p in parts:
            if isinstance(p, bytes):
                keep.append(p)
                group.append((_addr(p), len(p)))
            elif p[1]:
                group.append(p)
        r = self._put_groups(what, [key], [group], config, upsert)[0]
        del keep
        return r

    def _write_manifest(self, what, key, blob, config, upsert):
        return self._pput(what, key, [blob], config, upsert)

    def _route(self, parallelism, writer_partition):
        """("full", None) | ("writer", (rank, size, split)) | ("tp", axes) |
        ("generic", axes), after stock's checks (_No when refused)."""
        if writer_partition is not None:
            if parallelism is not None:
                raise _No("writer_partition cannot be combined with parallelism")
            w = writer_partition
            if not all(hasattr(w, a) for a in ("rank", "size", "split_dim")):
                raise _No("writer_partition must provide rank, size, and split_dim")
            rank, size, split = (_attr_int(w, a, False) for a in ("rank", "size",
                                                                  "split_dim"))
            if size <= 0 or not 0 <= rank < size or split < 0:
                raise _No(f"invalid writer partition (rank {rank}, size {size}, "
                          f"split_dim {split})")
            return "writer", (rank, size, split)
        if parallelism is None:
            return "full", None
        axes = _validate(_parse_parallelism(parallelism))
        return ("tp" if _tp_index(axes) is not None else "generic"), axes

    @staticmethod
    def _even(shape, split, count):
        if not 0 <= split < len(shape) or count <= 0:
            raise _No(f"split_dim {split} is outside shape {tuple(shape)}")
        if shape[split] % count:
            raise _No(f"dimension {split} of shape {tuple(shape)} does not split evenly "
                      f"into {count} shards (only uniform sharding)")

    def _write_tensor(self, what, key, tensor, parallelism, config, writer_partition,
                      upsert):
        """put/upsert_tensor_with_parallelism: 0 or a negative code."""
        base = _kb(key, what)
        try:
            route, req = self._route(parallelism, writer_partition)
            if route == "full":
                return self._put_tensors(what, [key], [tensor], config, upsert)[0]
            full = _info(what, tensor)
            if full is None:
                return _INVALID_PARAMS
            shape = list(full.shape)
            if route == "writer":
                rank, size, split = req
                self._even(shape, split, size)
                start, n = _shard_range(shape[split], rank, size)
                sh = _info(what, _narrow(full.owner, split, start, n))
                ax = [_Ax((_TP, rank, size, split, None, None))]
                meta = _shard_meta(full.code, shape, list(sh.shape), sh.nbytes, ax)
                r = self._pput(what, _writer_key(base, rank, size, split),
                               [meta, (sh.addr, sh.nbytes)], config, upsert)
                if r == 0:
                    r = self._write_manifest(what, _writer_manifest_key(base),
                                             _manifest(full.code, shape, split, size),
                                             config, upsert)
                return r
            if route == "generic":
                meta = _shard_meta(full.code, shape, shape, full.nbytes, req)
                return self._pput(what, _key_for(base, req), [meta, (full.addr, full.nbytes)],
                                  config, upsert)
            tp = req[_tp_index(req)]
            if len(req) == 1:
                # One TP axis: the tensor is the caller's shard (stock keeps that form).
                if not 0 <= tp.split < len(shape):
                    raise _No(f"split_dim {tp.split} is outside shape {tuple(shape)}")
                gshape = list(shape)
                gshape[tp.split] *= tp.size
                meta = _shard_meta(full.code, gshape, shape, full.nbytes, req)
                shard = full
            else:
                # TP with other axes: the tensor is the full one, cut to the TP rank's shard.
                self._even(shape, tp.split, tp.size)
                gshape = shape
                start, n = _shard_range(shape[tp.split], tp.rank, tp.size)
                shard = _info(what, _narrow(full.owner, tp.split, start, n))
                meta = _shard_meta(full.code, shape, list(shard.shape), shard.nbytes, req)
            r = self._pput(what, _key_for(base, req), [meta, (shard.addr, shard.nbytes)],
                           config, upsert)
            if r == 0:
                r = self._write_manifest(what, _manifest_key(base),
                                         _manifest(full.code, gshape, tp.split, tp.size),
                                         config, upsert)
            return r
        except _No as e:
            _say(what, f"{key!r}: {e}")
            return _INVALID_PARAMS

    @staticmethod
    def _buffer_meta(what, ptr, size):
        """The _Meta of the tensor object at ptr (size bytes); _No when it is not one."""
        if not isinstance(ptr, int) or not isinstance(size, int):
            raise _No("buffer_ptr and size must be ints")
        if not ptr or size < META_SIZE:
            raise _No("the buffer is null or smaller than a tensor header")
        m = _meta(ctypes.string_at(ptr, META_SIZE), size)
        if m is None:
            raise _No("the buffer does not hold a Mooncake tensor ([TensorMetadata][data])")
        return m

    @staticmethod
    def _cut_plan(m, ptr, split, rank, count):
        """stock's build_raw_tensor_shard_write_plan: (local shape, bytes, [(address,
        length)]) of shard rank of count along split of the full tensor object m at ptr."""
        g, loc = m.gshape, m.lshape
        if not 0 <= rank < count:
            raise _No(f"rank {rank} is outside size {count}")
        _ParallelCalls._even(g, split, count)
        if any(i != split and g[i] != loc[i] for i in range(len(g))):
            raise _No("the buffer's local shape differs from its global shape outside "
                      "split_dim")
        numel = 1
        for d in loc:
            numel *= d
        if (numel == 0 and m.nbytes) or (numel and m.nbytes % numel):
            raise _No("the buffer's byte count does not match its shape")
        es = m.nbytes // numel if numel else 0
        start, n = _shard_range(g[split], rank, count)
        shard = list(g)
        shard[split] = n
        nbytes = es
        for d in shard:
            nbytes *= d
        before = after = 1
        for d in g[:split]:
            before *= d
        for d in g[split + 1:]:
            after *= d
        row = n * after * es
        ranges = []
        if n and es:
            for s in range(before):
                off = m.off + (s * g[split] + start) * after * es
                if off + row > m.off + m.nbytes:
                    raise _No("the buffer holds a shard, not the full tensor to cut")
                ranges.append((ptr + off, row))
        return shard, nbytes, ranges

    def _write_from(self, what, key, ptr, size, parallelism, config, writer_partition,
                    upsert):
        """put/upsert_tensor_with_parallelism_from: 0 or a negative code."""
        base = _kb(key, what)
        try:
            route, req = self._route(parallelism, writer_partition)
            m = self._buffer_meta(what, ptr, size)
            if route == "full":
                return self._pput(what, key, [(ptr, size)], config, upsert)
            if route == "writer":
                rank, count, split = req
                shard, nbytes, ranges = self._cut_plan(m, ptr, split, rank, count)
                meta = _shard_meta(m.code, m.gshape, shard, nbytes,
                                   [_Ax((_TP, rank, count, split, None, None))])
                r = self._pput(what, _writer_key(base, rank, count, split),
                               [meta] + ranges, config, upsert)
                if r == 0:
                    r = self._write_manifest(what, _writer_manifest_key(base),
                                             _manifest(m.code, m.gshape, split, count),
                                             config, upsert)
                return r
            if route == "generic":
                meta = _shard_meta(m.code, m.gshape, m.lshape, m.nbytes, req)
                return self._pput(what, _key_for(base, req), [meta, (ptr + m.off, m.nbytes)],
                                  config, upsert)
            # A TP axis: the buffer's full tensor cut into every TP rank's shard.
            i = _tp_index(req)
            tp = req[i]
            for rank in range(tp.size):
                axes = list(req)
                axes[i] = tp.with_rank(rank)
                shard, nbytes, ranges = self._cut_plan(m, ptr, tp.split, rank, tp.size)
                meta = _shard_meta(m.code, m.gshape, shard, nbytes, axes)
                r = self._pput(what, _key_for(base, axes), [meta] + ranges, config, upsert)
                if r != 0:
                    return r
            return 0
        except _No as e:
            _say(what, f"{key!r}: {e}")
            return _INVALID_PARAMS

    def _write_batch(self, what, keys, values, requests, config, writer_partitions,
                     one, direct):
        """The batch forms: stock's list checks, then one(i, request, per-key config) for
        each key, or direct() when neither list is given."""
        _seq(keys, what)
        keys = list(keys)
        n = len(keys)
        bad = [_INVALID_PARAMS] * n
        groups = getattr(config, "group_ids", None) if config is not None else None
        if groups is not None and len(groups) != n:
            _say(what, f"group_ids has {len(groups)} entries for {n} keys")
            return bad
        if requests is not None and writer_partitions is not None:
            _say(what, "writer_partitions cannot be combined with parallelisms")
            return bad
        if len(values) != n:
            _say(what, f"{len(values)} values for {n} keys")
            return bad
        if requests is None and writer_partitions is None:
            return direct() if n else []
        lst, name = (requests, "parallelisms") if requests is not None else \
            (writer_partitions, "writer_partitions")
        if type(lst) is not list:
            _say(what, f"{name} must be a list or None, not {type(lst).__name__}")
            return bad
        if len(lst) != n:
            _say(what, f"{len(lst)} {name} for {n} keys")
            return bad
        return [one(i, lst[i], _regroup(config, [i], n)) for i in range(n)]

    def _write_tensor_batch(self, what, keys, tensors_list, parallelisms, config,
                            writer_partitions, upsert):
        tensors = list(tensors_list)
        wp = writer_partitions is not None
        return self._write_batch(
            what, keys, tensors, parallelisms, config, writer_partitions,
            lambda i, req, cfg: self._write_tensor(what, keys[i], tensors[i],
                                                   None if wp else req, cfg,
                                                   req if wp else None, upsert),
            lambda: self._put_tensors(what, list(keys), tensors, config, upsert))

    def _write_from_batch(self, what, keys, buffer_ptrs, sizes, parallelisms, config,
                          writer_partitions, upsert):
        ptrs, sizes = list(buffer_ptrs), list(sizes)
        wp = writer_partitions is not None

        def direct():
            if len(sizes) != len(ptrs):
                _say(what, "keys, buffer_ptrs and sizes must have the same length")
                return [_INVALID_PARAMS] * len(ptrs)
            try:
                for p, s in zip(ptrs, sizes):
                    self._buffer_meta(what, p, s)
            except _No as e:
                _say(what, str(e))
                return [_INVALID_PARAMS] * len(ptrs)
            return self._put_groups(what, list(keys), [[(p, s)] for p, s in zip(ptrs, sizes)],
                                    config, upsert)

        def one(i, req, cfg):
            if i >= len(sizes):
                return _INVALID_PARAMS
            return self._write_from(what, keys[i], ptrs[i], sizes[i], None if wp else req,
                                    cfg, req if wp else None, upsert)
        return self._write_batch(what, keys, ptrs, parallelisms, config, writer_partitions,
                                 one, direct)

    # -------------------------------------------------------------------- writes
    def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                    writer_partition=None):
        """Store tensor as the object its parallelism names (see the module's docstring):
        0 or a negative code (-600 for a refused request)."""
        return self._write_tensor("put_tensor_with_parallelism", key, tensor, parallelism,
                                  config, writer_partition, False)

    def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                       writer_partition=None):
        """put_tensor_with_parallelism, replacing existing objects: 0 or a negative code."""
        return self._write_tensor("upsert_tensor_with_parallelism", key, tensor,
                                  parallelism, config, writer_partition, True)

    def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                          config=None, writer_partitions=None):
        """put_tensor_with_parallelism per key (parallelisms or writer_partitions: a list,
        one entry per key, None entries store full tensors): per key 0 or a code; -600 for
        every key when the lists differ in length or both lists are given."""
        return self._write_tensor_batch("batch_put_tensor_with_parallelism", keys,
                                        tensors_list, parallelisms, config,
                                        writer_partitions, False)

    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                             config=None, writer_partitions=None):
        """batch_put_tensor_with_parallelism, replacing existing objects."""
        return self._write_tensor_batch("batch_upsert_tensor_with_parallelism", keys,
                                        tensors_list, parallelisms, config,
                                        writer_partitions, True)

    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                         config=None, writer_partition=None):
        """Store the tensor object ([TensorMetadata][data]) of size bytes at buffer_ptr:
        as is without a parallelism; with a TP axis, every TP rank's shard of it; with a
        writer_partition, that shard. 0 or a negative code (-600: not a tensor object, a
        refused request)."""
        return self._write_from("put_tensor_with_parallelism_from", key, buffer_ptr, size,
                                parallelism, config, writer_partition, False)

    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                            config=None, writer_partition=None):
        """put_tensor_with_parallelism_from, replacing existing objects."""
        return self._write_from("upsert_tensor_with_parallelism_from", key, buffer_ptr,
                                size, parallelism, config, writer_partition, True)

    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                               parallelisms=None, config=None,
                                               writer_partitions=None):
        """put_tensor_with_parallelism_from per key: per key 0 or a negative code (-600
        for every key when the lists differ in length, both request lists are given, or,
        without requests, any buffer is not a tensor object)."""
        return self._write_from_batch("batch_put_tensor_with_parallelism_from", keys,
                                      buffer_ptrs, sizes, parallelisms, config,
                                      writer_partitions, False)

    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                                  parallelisms=None, config=None,
                                                  writer_partitions=None):
        """batch_put_tensor_with_parallelism_from, replacing existing objects."""
        return self._write_from_batch("batch_upsert_tensor_with_parallelism_from", keys,
                                      buffer_ptrs, sizes, parallelisms, config,
                                      writer_partitions, True)

    # -------------------------------------------------------------- read plumbing
    def _metas(self, keys):
        """The _Meta of each key's object from one read of every header (None for a key
        that is missing or holds no tensor)."""
        n = len(keys)
        if not n:
            return []
        scratch = ctypes.create_string_buffer(n * META_SIZE)
        base = ctypes.addressof(scratch)
        got = self.get_into_ranges([base], [list(keys)],
                                   [[[i * META_SIZE] for i in range(n)]],
                                   [[[0] for _ in range(n)]],
                                   [[[META_SIZE] for _ in range(n)]])[0]
        raw = scratch.raw
        return [_meta(raw[i * META_SIZE:(i + 1) * META_SIZE]) if got[i][0] == META_SIZE
                else None for i in range(n)]

    def _sources(self, keys):
        metas = self._metas(keys)
        for k, m in zip(keys, metas):
            if m is None:
                raise _No(f"no tensor shard under {k.decode(errors='replace')!r}")
        return [_Source(k, m) for k, m in zip(keys, metas)]

    def _tp_sources(self, base, axes):
        """stock's load_parallelism_full_reconstruction_sources: (sources, global shape,
        split_dim, dtype code) of the TP shards that together hold the tensor axes name
        (any TP rank), found through the parallelism manifest, else the "_tp_" keys (one
        TP axis), else the axis-named keys of the requested TP size."""
        tp = next((a for a in axes if a.kind == _TP), None)
        if tp is None:
            raise _No("reconstruction needs a tp axis")
        canon = _canon(axes)
        ti = _tp_index(canon)
        man = _parse_manifest(self.get(_manifest_key(base)))
        if man is not None:
            code, g, split, count = man
            try:
                if tp.split is not None and tp.split != split:
                    raise _No("split_dim mismatch")
                if g[split] % tp.size or g[split] % count:
                    raise _No("only uniform sharding")
                wanted = []
                for r in range(count):
                    a = list(canon)
                    a[ti] = canon[ti].with_rank(r, count)
                    wanted.append(a)
                srcs = self._sources([_key_for(base, a) for a in wanted])
                for a, s in zip(wanted, srcs):
                    st = _tp_compatible(a, s.meta)
                    if st is None or not _same_but_tp_rank(a, st):
                        raise _No("shard metadata mismatch")
                return srcs, g, split, code
            except _No:
                pass  # as stock: try the layouts below
        if _single_tp(canon):
            first = base + b"_tp_0" if tp.size > 1 else base
            m0 = self._metas([first])[0]
            st0 = _stored_tp(m0) if m0 is not None and m0.kind == SHARD else None
            if st0 is None:
                raise _No("no shard matched the requested layout for TP rank 0")
            split, count = st0[4], st0[3]
            if tp.split != split:
                raise _No(f"split_dim {tp.split} differs from the stored {split}")
            g = m0.gshape
            if not 0 <= split < len(g) or g[split] % tp.size or g[split] % count:
                raise _No("only uniform sharding is supported")
            keys = [base + b"_tp_%d" % r if count > 1 else base for r in range(count)]
            srcs = self._sources(keys)
            for r, s in enumerate(srcs):
                st = _stored_tp(s.meta)
                if s.meta.kind != SHARD or st is None or st[2] != r or st[3] != count or \
                        st[4] != split:
                    raise _No(f"shard metadata mismatch for TP rank {r}")
            return srcs, g, split, m0.code
        keys = []
        for r in range(tp.size):
            a = list(canon)
            a[ti] = canon[ti].with_rank(r)
            keys.append(_key_for(base, a))
        srcs = self._sources(keys)
        for r, s in enumerate(srcs):
            a = list(canon)
            a[ti] = canon[ti].with_rank(r)
            st = _tp_compatible(a, s.meta)
            if st is None or not _same_but_tp_rank(canon, st):
                raise _No(f"shard metadata mismatch for TP rank {r}")
        st = _stored_tp(srcs[0].meta)
        split, g = st[4], srcs[0].meta.gshape
        if tp.split != split:
            raise _No(f"split_dim {tp.split} differs from the stored {split}")
        if g[split] % tp.size:
            raise _No("only uniform sharding is supported")
        return srcs, g, split, srcs[0].meta.code

    def _writer_sources(self, base):
        """stock's load_writer_shard_reconstruction: the writer-partition shards named by
        "<key>__writer_manifest"; _No when there is no usable set."""
        man = _parse_manifest(self.get(_writer_manifest_key(base)))
        if man is None:
            raise _No("no writer manifest")
        code, g, split, count = man
        srcs = self._sources([_writer_key(base, r, count, split) for r in range(count)])
        for r, s in enumerate(srcs):
            st = _stored_axes(s.meta)
            if st is None or not _single_tp(st) or st[0][1:4] != (r, count, split):
                raise _No(f"writer shard metadata mismatch for rank {r}")
        return srcs, g, split, code

    @staticmethod
    def _plan(srcs, g, split, code, start, extent, target_meta):
        """stock's build_reconstructed_tensor_into_plan_from_sources: (header, total
        bytes, {key: [(dst offset, src offset, length)]}) to assemble rows [start,
        start+extent) of dimension split of the tensor from its shards."""
        if not 0 <= split < len(g):
            raise _No("invalid split_dim")
        if start < 0 or extent < 0 or start + extent > g[split]:
            raise _No("invalid target shard range")
        m0 = srcs[0].meta
        es = _BY_CODE[m0.code][1]
        expect = es
        for d in m0.lshape:
            expect *= d
        if expect != m0.nbytes:
            raise _No("invalid shard tensor byte size")
        before = after = 1
        for d in g[:split]:
            before *= d
        for d in g[split + 1:]:
            after *= d
        nbytes = before * extent * after * es
        frags, covered = {}, [False] * extent
        for s in srcs:
            m, st = s.meta, _stored_tp(s.meta)
            if len(m.lshape) != len(g) or \
                    any(i != split and m.lshape[i] != g[i] for i in range(len(g))):
                raise _No("shard shape mismatch")
            if m.kind != SHARD or st is None or st[4] != split or g[split] % st[3]:
                raise _No("missing or uneven TP shard metadata")
            s_start, s_ext = _shard_range(g[split], st[2], st[3])
            if m.lshape[split] != s_ext:
                raise _No("shard extent mismatch")
            lo, hi = max(s_start, start), min(s_start + s_ext, start + extent)
            if hi <= lo:
                continue
            for j in range(lo - start, hi - start):
                covered[j] = True
            row = (hi - lo) * after * es
            out = frags.setdefault(s.key, [])
            for b in range(before):
                out.append((META_SIZE + (b * extent + lo - start) * after * es,
                            m.off + (b * s_ext + lo - s_start) * after * es, row))
        if not all(covered):
            raise _No("the shards do not cover the requested range")
        head = pack_meta(code, g, target_meta[0], nbytes, target_meta[1], target_meta[2])
        return head, META_SIZE + nbytes, frags

    def _gather(self, ptr, head, frags):
        """Read every fragment to ptr (all or nothing), then write the header: True."""
        keys = list(frags)
        if keys:
            got = self.get_into_ranges([ptr], [keys],
                                       [[[f[0] for f in frags[k]] for k in keys]],
                                       [[[f[1] for f in frags[k]] for k in keys]],
                                       [[[f[2] for f in frags[k]] for k in keys]])[0]
            for k, res in zip(keys, got):
                if [r for r in res] != [f[2] for f in frags[k]]:
                    raise _No("a shard could not be read")
        ctypes.memmove(ptr, head, META_SIZE)
        return True

    def _assemble(self, what, srcs, g, split, code, start, extent, target, ptr=None,
                  size=None):
        """The tensor rebuilt from srcs into a fresh buffer (ptr None) or into size bytes
        at ptr."""
        head, total, frags = self._plan(srcs, g, split, code, start, extent, target)
        if ptr is None:
            raw, p = fresh_bytes(total)
            self._gather(p, head, frags)
            return _as_tensor(what, raw[:total], parse_meta(head, total))
        if total > size:
            raise _No(f"the buffer ({size} bytes) is smaller than the tensor ({total})")
        self._gather(ptr, head, frags)
        return _as_tensor(what, _raw_over(ptr, total), parse_meta(head, total))

    def _read(self, what, key, target, ptr=None, size=None):
        """get_tensor_with_parallelism(_into): a tensor or None."""
        base = _kb(key, what)
        try:
            if ptr is not None:
                if not isinstance(ptr, int) or not isinstance(size, int) or not ptr or \
                        size < 0:
                    raise _No("buffer_ptr must be a non-null address and size a count")
            if target is None:
                mode, axes = "as_stored", None
            else:
                if not hasattr(target, "mode") or not hasattr(target, "parallelism"):
                    raise _No("target must be a ReadTarget (mode and parallelism), not "
                              f"{type(target).__name__}")
                mode = target.mode
                if not isinstance(mode, str) or mode.lower() not in _MODES:
                    raise _No(f"unsupported ReadTarget mode {mode!r}")
                mode = mode.lower()
                axes = _parse_parallelism(target.parallelism)

            def whole(k):
                if ptr is None:
                    return self.get_tensor(k)
                return self.get_tensor_into(k, ptr, size)

            if axes is None and mode == "as_stored":
                return whole(key)
            if axes is None and mode == "full":
                try:
                    srcs, g, split, code = self._writer_sources(base)
                except _No:
                    return whole(key)  # no writer-partition set: the object itself
                return self._assemble(what, srcs, g, split, code, 0, g[split],
                                      (g, FULL, ()), ptr, size)
            axes = _validate(axes)
            if mode == "shard":
                return self._read_shard(what, key, base, axes, ptr, size, whole)
            if mode == "full":
                if _tp_index(axes) is None:
                    raise _No("full reconstruction needs a tp axis")
                srcs, g, split, code = self._tp_sources(base, axes)
                return self._assemble(what, srcs, g, split, code, 0, g[split],
                                      (g, FULL, ()), ptr, size)
            raise _No("mode as_stored takes no parallelism")
        except _No as e:
            _say(what, f"{key!r}: {e}")
            return None

    def _read_shard(self, what, key, base, axes, ptr, size, whole):
        """The stored shard matching axes exactly, else the TP shard rebuilt from shards
        of another TP size."""
        canon = _canon(axes)
        tried = [_key_for(base, axes)]
        if _single_tp(axes):
            a = axes[0]
            tried.append(_writer_key(base, a.rank, a.size, a.split))
        for k in tried:
            if ptr is None:
                got = self._get_raw(what, k)
                m = _meta(got[1], len(got[0])) if got is not None else None
            else:
                m = self._metas([k])[0]
            if m is None or _stored_axes(m) != canon:
                continue
            if ptr is None:
                return _as_tensor(what, got[0], parse_meta(got[1], len(got[0])))
            return self.get_tensor_into(k, ptr, size)
        if _tp_index(axes) is None:
            raise _No("no stored shard matches the requested parallelism")
        tp = axes[_tp_index(axes)]
        try:
            srcs, g, split, code = self._tp_sources(base, axes)
            start, extent = _shard_range(g[split], tp.rank, tp.size)
            local = list(g)
            local[split] = extent
            return self._assemble(what, srcs, g, split, code, start, extent,
                                  (local, SHARD, _layout_axes(axes, local)), ptr, size)
        except _No:
            if ptr is None and _single_tp(axes):
                # stock's last resort: the "_tp_" object as it is
                got = self.get_tensor(key if tp.size <= 1 else tried[0])
                if got is not None:
                    return got
            raise

    # --------------------------------------------------------------------- reads
    def get_tensor_with_parallelism(self, key, target=None):
        """The tensor target asks for (None: the object as stored; see the module's
        docstring), or None: missing key, a refused request, shards that do not match."""
        return self._read("get_tensor_with_parallelism", key, target)

    def batch_get_tensor_with_parallelism(self, keys, targets=None):
        """get_tensor_with_parallelism per key (targets: None, or a list with one
        ReadTarget or None per key; otherwise every entry is None)."""
        what = "batch_get_tensor_with_parallelism"
        _seq(keys, what)
        keys = list(keys)
        if targets is None:
            return self.batch_get_tensor(keys)
        if type(targets) is not list or len(targets) != len(keys):
            _say(what, "targets must be a list with one entry per key")
            return [None] * len(keys)
        return [self._read(what, k, t) for k, t in zip(keys, targets)]

    def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
        """get_tensor_with_parallelism into size bytes at buffer_ptr: a tensor over that
        memory (the object, or the rebuilt [TensorMetadata][data]), or None (also when
        the buffer is too small)."""
        return self._read("get_tensor_with_parallelism_into", key, target, buffer_ptr, size)

    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes,
                                               targets=None):
        """get_tensor_with_parallelism_into per key: a tensor or None per key (all None
        when the lists differ in length)."""
        what = "batch_get_tensor_with_parallelism_into"
        _seq(keys, what)
        keys, ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
        if not (len(keys) == len(ptrs) == len(sizes)):
            _say(what, "keys, buffer_ptrs, and sizes must have the same length")
            return [None] * len(keys)
        if targets is not None and (type(targets) is not list or len(targets) != len(keys)):
            _say(what, "targets must be a list with one entry per key")
            return [None] * len(keys)
        targets = targets if targets is not None else [None] * len(keys)
        return [self._read(what, k, t, p, n)
                for k, p, n, t in zip(keys, ptrs, sizes, targets)]
