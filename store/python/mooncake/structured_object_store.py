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
import concurrent.futures
import copy
import ctypes
import json
import sys
import threading
import time
import uuid
import warnings

import numpy as np

# Split by concern: names, schemas and refs; the codecs; this file, the bundle class.
from mooncake._structured_refs import (  # noqa: F401 (the public names are re-exported)
    DEFAULT_BUNDLE_CHUNK_BYTES, DEFAULT_KEY_PREFIX, FieldSchema,
    MISSING_OBJECT_ERROR, ObjectNotFoundError, StructuredObjectRef, _BATCH_BYTES,
    _BATCH_KEYS, _CONFIG_FIELDS, _DUPLICATE_REGISTRATION, _FORMAT, _READ_VERSIONS,
    _VERSION, _code_text, _rc, _schema, _status_error, export_ref, import_ref)
from mooncake._structured_codecs import (  # noqa: F401
    StructuredResult, _Arena, _Buffers, _Source, _as_rows, _dec, _decode_msgpack,
    _decode_ndarray, _decode_ragged, _decode_rtd, _enc, _holds_views, _infer_codec,
    _msgpack_rows, _ndarray, _ragged, _ragged_tensor_dict, _rebuild_outer, _safe,
    _set_outer)

__all__ = ["FieldSchema", "MooncakeBundleTransfer", "StructuredObjectRef", "StructuredResult",
           "ObjectNotFoundError", "export_ref", "import_ref", "DEFAULT_BUNDLE_CHUNK_BYTES"]
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
        that lie in one array as pointers into it, with no lease and no copy, and
        members spanning several arrays (Miles' MoE chunks: 64 MiB over a sample's
        arrays) as their pieces through batch_put_from_multi_buffers, with no copy
        either; the caller's value outlives the put."""
        pool = self.buffer_pool() if self._has("batch_put_from") else None
        in_place = pool is not None and self._puts_in_place()
        multi = in_place and self._has("batch_put_from_multi_buffers")
        pending = []  # (key, lease or None, size, address or [(address, size)])
        inflight = None  # the writer thread's batch (a Future)

        def call(name, keys, *args):
            cfg = self._config(config, gid, len(keys))
            fn = getattr(self.store, name)
            res = fn(keys, *args, config=cfg) if cfg is not None else fn(keys, *args)
            res = list(res) if res is not None else [0] * len(keys)
            if len(res) != len(keys):
                raise RuntimeError(f"structured_object_store: {name} returned "
                                   f"{len(res)} results for {len(keys)} keys")
            bad = None
            for k, r in zip(keys, res):
                if _rc(r) == 0:
                    written.append(k)
                elif bad is None:
                    bad = (k, _rc(r))
            if bad is not None:
                raise _status_error(name, bad[0], bad[1])

        def write(batch):
            try:
                one = [b for b in batch if not isinstance(b[3], list)]
                many = [b for b in batch if isinstance(b[3], list)]
                if one:
                    call("batch_put_from", [k for k, _, _, _ in one],
                         [ptr for _, _, _, ptr in one], [sz for _, _, sz, _ in one])
                if many:
                    call("batch_put_from_multi_buffers", [k for k, _, _, _ in many],
                         [[a for a, _ in pcs] for _, _, _, pcs in many],
                         [[n for _, n in pcs] for _, _, _, pcs in many])
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
                if ptr is None and multi and size:
                    ptr = src.pieces(off, size)
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
