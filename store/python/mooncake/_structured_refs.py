"""Names, errors, field schemas and object refs of mooncake.structured_object_store
(which re-exports the public ones): the parts a reader of a ref needs without the codecs
or the transfer class."""
import copy
import re
from dataclasses import dataclass, field as _dc_field

import numpy as np

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

