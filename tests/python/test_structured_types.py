"""mooncake.structured_object_store gives every value back with the type and the bits it was
put with (issue 15), over Tide's mooncake_master: in-process stores and tide-node agents.

A property test builds randomized Miles rollout batches (every field of Miles'
ROLLOUT_DATA_VALUE_SPEC: ragged lengths, empty rows, zero-length responses, masked tool
spans, None rows and fields, non-ASCII prompts, arbitrary float bit patterns, an MoE
array over the chunk size) and runs Miles' flow on them: the rollout manager puts one
object per DP shard (split_train_data_by_dp) and one whole batch (delay-split), refs
travel as JSON (export_ref / import_ref), trainers get inside `with ObjectStoreGetResult`
and run process_rollout_data_shard, the driver removes everything. Each value is compared
with assert_same: type(got) is type(want) all the way down, floats by their 64 bits.

Uses the fixtures of test_store.py; Debian python3-pytest, python3-numpy, python3-msgpack.
"""
import collections
import copy
import enum
import json
import math
import random
import struct

import numpy
import pytest

from test_store import agents, master, mk_attached, pair  # noqa: F401
from test_structured import Minimal, ObjectStoreGetResult, Traced, assert_same
from mooncake.structured_object_store import (FieldSchema, MooncakeBundleTransfer,
                                              export_ref, import_ref)

PREFIX = "miles-object-store"
CHUNK = 16 * 1024  # small chunks: sample 0's MoE array alone is over this

# Miles' ROLLOUT_DATA_VALUE_SPEC (miles/ray/rollout/train_data_conversion.py at 31f1ca9).
VALUE_SPEC = {
    **{f: ("typed_ragged", None) for f in (
        "tokens", "loss_masks", "rollout_log_probs", "teacher_log_probs", "opd_reverse_kl",
        "rollout_routed_experts", "rollout_indexer_topk")},
    **{f: ("ndarray", "int64") for f in (
        "partition", "seq_witness_ids", "response_lengths", "truncated", "round_number",
        "sample_indices", "rollout_ids", "rollout_mask_sums")},
    "rewards": ("ndarray", "float32"),
    "multimodal_train_inputs": ("ragged_tensor_dict", None),
    **{f: ("msgpack_ragged", None) for f in ("prompt", "metadata", "weight_versions")},
    **{f: ("auto", None) for f in (
        "raw_reward", "total_lengths", "dynamic_global_batch_size", "num_microbatches",
        "micro_batch_indices", "num_rollouts")},
}
PER_SAMPLE = ["tokens", "multimodal_train_inputs", "response_lengths", "rewards", "truncated",
              "loss_masks", "round_number", "sample_indices", "rollout_ids",
              "rollout_mask_sums", "rollout_log_probs", "rollout_routed_experts",
              "rollout_indexer_topk", "prompt", "teacher_log_probs", "opd_reverse_kl",
              "seq_witness_ids", "weight_versions", "adapter_slots"]
BATCH_GLOBAL = ["raw_reward", "total_lengths", "dynamic_global_batch_size", "step_slots",
                "step_adapter_names", "step_adapter_batch_sizes", "prompt_group_sizes"]


def schemas_for(value, nullable=False):
    """Miles' _field_schemas_for_value (fields without a ValueSpec get none: auto)."""
    out = {}
    for f, (codec, dtype) in VALUE_SPEC.items():
        if f in value:
            md = {"section": "meta_info" if codec == "auto" else "non_tensor_batch"}
            if dtype is not None:
                md["dtype"] = dtype
            out[f] = FieldSchema(codec=codec, nullable=nullable and codec != "auto",
                                 metadata=md)
    return out


# ------------------------------------------------------------------ generators

def any_float(rng):
    """A float64 of any kind: ordinary, signed zero, subnormal, infinite, a NaN with a
    random sign and payload, or 64 random bits."""
    r = rng.random()
    if r < 0.55:
        return -rng.random() * 8
    if r < 0.7:
        return rng.choice([0.0, -0.0, 5e-324, -2.2250738585072014e-308, math.inf, -math.inf,
                           1.7976931348623157e308, 1 / 3, 0.1])
    if r < 0.8:
        bits = 0x7FF8000000000000 | rng.getrandbits(51) | (rng.getrandbits(1) << 63)
    else:
        bits = rng.getrandbits(64)
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


TEXT = ["question", "答案是", "ünïcödé", "🙂🚀", "e\u0301", "\u200b", "x\x00y", "ok", "\n\t"]


def any_text(rng, n=4):
    return "".join(rng.choice(TEXT) for _ in range(rng.randint(0, n)))


def odd_metadata(rng):
    """Train metadata with what msgpack has no type of its own for."""
    return {"t": (1, "a", (2.5, None)), "s": {1, 2}, "fs": frozenset(["x"]),
            "np": numpy.float32(rng.random()), "npi": numpy.int16(-3), "big": 1 << 80,
            "neg_big": -(1 << 70), "u64": (1 << 64) - 1, "b": bytes([0, 255]),
            "ikeys": {1: "one", (2, 3): "tuple key"}, "arr": numpy.arange(3, dtype=numpy.uint8),
            "objarr": numpy.array([1, "a", None], dtype=object)}


def rollout_batch(rng, n, moe_layers=4, odd=False, nulls=False):
    """Miles' train_data (convert_samples_to_train_data) for n samples."""
    P = [40] + [rng.randint(1, 40) for _ in range(n - 1)]
    R = [60] + [0 if rng.random() < 0.15 else rng.randint(1, 60)  # 0: no response
                for _ in range(n - 1)]
    d = {"tokens": [], "loss_masks": [], "rollout_log_probs": [], "teacher_log_probs": [],
         "opd_reverse_kl": [], "rollout_routed_experts": [], "rollout_indexer_topk": []}
    for p, r in zip(P, R):
        d["tokens"].append([rng.randrange(152000) for _ in range(p + r)])
        mask, lp = [], []
        while len(mask) < r:  # model turns, then tool observations (masked, log-prob 0.0)
            k = min(rng.randint(1, 20), r - len(mask))
            tool = rng.random() < 0.3
            mask += [0 if tool else 1] * k
            lp += [0.0] * k if tool else [any_float(rng) for _ in range(k)]
        d["loss_masks"].append(mask)
        d["rollout_log_probs"].append(lp)
        d["teacher_log_probs"].append([-rng.random() for _ in range(r)])
        d["opd_reverse_kl"].append([rng.random() * 1e-3 for _ in range(r)])
        rows = max(p + r - 1, 0)
        d["rollout_routed_experts"].append(
            numpy.random.default_rng(rng.getrandbits(32)).integers(
                0, 64, (rows, moe_layers, 8), dtype=numpy.int32))
        d["rollout_indexer_topk"].append(
            numpy.random.default_rng(rng.getrandbits(32)).integers(
                0, 2048, (rows, 16), dtype=numpy.int32))
    # rewards: torch float32 .tolist() values (float32-exact) or any float64
    f32 = rng.random() < 0.5
    raw = [rng.choice([0, 1, 0.5, 1.0, any_float(rng)]) for _ in range(n)]  # ints and floats
    d.update({
        "response_lengths": R,
        "rewards": [float(numpy.float32(rng.random() - 0.5)) if f32 else any_float(rng)
                    for _ in range(n)],
        "raw_reward": raw,
        "truncated": [1 if rng.random() < 0.2 else 0 for _ in range(n)],
        "sample_indices": list(range(n)),
        "rollout_ids": [i // 2 for i in range(n)],
        "round_number": [rng.randint(0, 3) for _ in range(n)],
        "seq_witness_ids": [rng.getrandbits(63) for _ in range(n)],
        "prompt": [any_text(rng) if rng.random() < 0.7 else
                   [{"role": "user", "content": any_text(rng)}] for _ in range(n)],
        "metadata": [{"raw_reward": raw[i], "source": any_text(rng, 2), "turns": [1, 2],
                      "extra": None, "ok": True, "score": any_float(rng)}
                     for i in range(n)],
        "weight_versions": [[f"v{rng.randint(1, 9)}"] * rng.randint(0, 2) for _ in range(n)],
        "multimodal_train_inputs": [
            None if rng.random() < 0.5 else
            {"pixel_values": numpy.random.default_rng(i).random((rng.randint(0, 4), 6),
                                                                dtype=numpy.float32),
             "image_grid_thw": [[1, 2, rng.randint(1, 4)]]} for i in range(n)],
        "dynamic_global_batch_size": rng.choice([None, n]),
        "adapter_slots": [i % 3 for i in range(n)],
        "step_slots": [0, 2],
        "step_adapter_batch_sizes": {0: n, 2: 1},
        "prompt_group_sizes": [2] * (n // 2) + [n % 2] * (n % 2),
    })
    d["rollout_mask_sums"] = [sum(m) for m in d["loss_masks"]]
    if odd:  # values whose types the fast layouts do not hold: they must survive too
        k = rng.randrange(n)
        d["rewards"][k] = rng.choice([1, True, numpy.float32(0.25)])
        d["loss_masks"][k] = [bool(x) for x in d["loss_masks"][k]]
        d["rollout_log_probs"][k] = d["rollout_log_probs"][k] + [0]  # an int among floats
        d["tokens"][k] = numpy.asarray(d["tokens"][k], dtype=numpy.int64)
        d["truncated"] = [bool(x) for x in d["truncated"]]
        d["metadata"][k] = odd_metadata(rng)
        d["weight_versions"][k] = ("v1", "v2")
        if d["multimodal_train_inputs"][k] is not None:
            d["multimodal_train_inputs"][k]["image_grid_thw"] = None  # present, None
            d["multimodal_train_inputs"][k] = dict(reversed(
                d["multimodal_train_inputs"][k].items()))  # another key order
    if nulls:  # nullable schemas: None rows in typed_ragged and ndarray fields
        for f in ("tokens", "rollout_log_probs", "rewards", "response_lengths",
                  "rollout_routed_experts"):
            d[f][rng.randrange(n)] = None
    return d


def split_by_dp(rng, data, dp):
    """Miles' split_train_data_by_dp_raw + _package_shards: range partitions, or lists
    (balance_data, multi-LoRA sorting)."""
    n = len(data["tokens"])
    data["total_lengths"] = [0 if t is None else len(t) for t in data["tokens"]]
    if rng.random() < 0.5:
        parts = [range(i, n, dp) for i in range(dp)]
    else:
        order = list(range(n))
        rng.shuffle(order)
        parts = [sorted(order[i::dp]) for i in range(dp)]
    shards = []
    for part in parts:
        s = {"partition": part}
        for k in PER_SAMPLE:
            if k in data:
                s[k] = [data[k][j] for j in part]
        for k in BATCH_GLOBAL:
            if k in data:
                s[k] = data[k]
        if "adapter_slots" in s:
            s["n_adapters"] = 3
        shards.append(s)
    return shards


def process_rollout_data_shard(rollout_data):
    """Miles' trainer side: drop partition, reorder the batch-global total_lengths."""
    partition = rollout_data.pop("partition")
    total_lengths = rollout_data["total_lengths"]
    rollout_data["total_lengths"] = [total_lengths[i] for i in partition]
    return rollout_data


def check_result(got, want, where):
    assert type(got) is not dict and isinstance(got, dict)  # StructuredResult
    assert list(got) == list(want), f"{where}: fields {list(got)} where {list(want)}"
    for f in want:
        assert_same(got[f], want[f], f"{where}.{f}")


# ------------------------------------------------------------------ the flow

def miles_flow(writer_store, reader_stores, driver_store, seed, n=None):
    """Miles' rollout manager, trainers and driver over the given stores."""
    rng = random.Random(seed)
    n = n or rng.randint(2, 24)
    odd, nulls = seed % 3 == 1, seed % 4 == 2
    data = rollout_batch(rng, n, moe_layers=rng.choice([16, 24]), odd=odd, nulls=nulls)
    dp = rng.randint(1, 4)
    shards = split_by_dp(rng, data, dp)
    whole = {k: v for k, v in data.items()}  # --delay-split-train-data-by-dp: one object
    whole["partition"] = list(range(n))
    values = shards + [whole]
    wants = copy.deepcopy(values)

    w = Traced(writer_store)
    writer = MooncakeBundleTransfer(w, key_prefix=PREFIX)
    boxes = []
    for v in values:
        ref = writer.put(v, type="dict", namespace="miles", chunk_bytes=CHUNK, config=None,
                         field_schemas=schemas_for(v, nullable=nulls))
        boxes.append(json.loads(json.dumps(export_ref(ref), allow_nan=False)))  # via Ray
    for v, want in zip(values, wants):
        assert_same(v, want, "the caller's value after put")  # untouched
    keys = w.written_keys()
    assert any("rollout_routed_experts.data/chunk/" in k for k in keys)

    for reader_store in reader_stores:
        reader = MooncakeBundleTransfer(reader_store, key_prefix=PREFIX)
        for i, (box, want) in enumerate(zip(boxes, wants)):
            where = f"seed {seed} object {i}"
            with ObjectStoreGetResult(reader.get(import_ref(box), type="dict"),
                                      MooncakeBundleTransfer.release_result) as got:
                check_result(got, want, where)
                experts = [r for r in got["rollout_routed_experts"] if r is not None]
                assert all(not r.flags.owndata for r in experts), \
                    f"{where}: MoE rows are copies, not views"
                if i < len(shards):  # a DP shard: the trainer-side completion
                    done = process_rollout_data_shard(got)
                    expect = process_rollout_data_shard(copy.deepcopy(want))
                    for f in expect:
                        assert_same(done[f], expect[f], f"{where} processed.{f}")
                views = bool(experts)
                del experts
            if views:
                assert "rollout_routed_experts" not in got  # array views left with release
            assert_same(got["prompt"], want["prompt"], f"{where} after release")
        pool = reader.buffer_pool()
        if pool is not None:
            assert pool._active == 0

    driver = MooncakeBundleTransfer(driver_store, key_prefix=PREFIX)
    for box in boxes:
        driver.cleanup_dataproto(import_ref(box))
    if hasattr(writer_store, "batch_is_exist"):
        assert writer_store.batch_is_exist(keys) == [0] * len(keys)
    else:
        assert all(len(writer_store.get(k)) == 0 for k in keys)
    writer.close()


@pytest.mark.parametrize("seed", range(24))
def test_miles_flow_in_process(pair, seed):
    a, b = pair
    miles_flow(a, [b, a], a, seed)


@pytest.mark.parametrize("seed", range(100, 106))
def test_miles_flow_through_agents(master, agents, seed):
    a = mk_attached(master, agents[0])
    b = mk_attached(master, agents[1])
    try:
        miles_flow(a, [b], b, seed)
    finally:
        a.close()
        b.close()


def test_miles_flow_minimal_store(pair):
    """Only put / get / remove: the same types come back."""
    a, b = pair
    miles_flow(Minimal(a), [Minimal(b)], Minimal(a), seed=7, n=6)


# ------------------------------------------------------------------ what is stored

def stored_fields(store, ref):
    meta = json.loads(store.get(f"{ref.base_key}/meta"))
    assert meta["version"] == 2
    return {f["name"]: f for f in meta["fields"]}


def test_storage_dtypes_and_views(pair):
    """Python numbers go to the schema's dtype when it holds them exactly, else to
    int64 / float64 / bool; arrays keep their dtype and come back as views."""
    a, b = pair
    t = MooncakeBundleTransfer(a, key_prefix="types-dt")
    f32 = [0.5, -1.25, float(numpy.float32(0.1))]
    value = {"rewards": f32, "rewards64": [0.1, 0.5, 1 / 3], "i32": [[1, 2], [3]],
             "i32big": [[1, 1 << 40], []], "flags": [True, False, True],
             "experts": [numpy.ones((3, 2, 2), numpy.int32), numpy.zeros((0, 2, 2), numpy.int32)],
             "grid": numpy.arange(6, dtype=numpy.float16).reshape(2, 3),
             "partition": range(1, 9, 3), "scalar": 2.5}
    nd32 = FieldSchema("ndarray", metadata={"dtype": "float32"})
    tr32 = FieldSchema("typed_ragged", metadata={"dtype": "int32"})
    schemas = {"rewards": nd32, "rewards64": nd32, "i32": tr32, "i32big": tr32,
               "flags": FieldSchema("ndarray", metadata={"dtype": "int64"}),
               "experts": FieldSchema("typed_ragged", metadata={"dtype": "int64"}),
               "grid": FieldSchema("ndarray", metadata={"dtype": "int64"}),
               "partition": FieldSchema("ndarray", metadata={"dtype": "int64"}),
               "scalar": FieldSchema("ndarray")}
    ref = t.put(value, field_schemas=schemas)
    st = stored_fields(a, ref)
    assert {k: st[k]["dtype"] for k in value} == {
        "rewards": "<f4", "rewards64": "<f8", "i32": "<i4", "i32big": "<i8", "flags": "|b1",
        "experts": "<i4", "grid": "<f2", "partition": "<i8", "scalar": "<f8"}
    assert st["partition"]["outer"] == "range" and st["scalar"]["outer"] == "scalar"
    got = MooncakeBundleTransfer(b, key_prefix="types-dt").get(export_ref(ref))
    for f in value:
        assert_same(got[f], value[f], f)
    assert not got["experts"][0].flags.owndata and not got["grid"].flags.owndata
    MooncakeBundleTransfer.release_result(got)
    assert sorted(set(value) - set(got)) == ["experts", "grid"]
    t.cleanup_dataproto(ref)


def test_puts_from_threads_share_one_transfer(pair):
    """Puts on one transfer from several threads at once: list rows are packed into the
    transfer's scratch arena by one put at a time (the others pack into memory of their
    own), and the arena is reused by the next put; every value still comes back exact,
    including a row of ints beyond int64 (msgpack layout) beside packed rows."""
    import threading
    a, b = pair
    t = MooncakeBundleTransfer(a, key_prefix="types-thr")
    tr = FieldSchema("typed_ragged")
    values, refs, errors = {}, {}, []

    def worker(w):
        rng = random.Random(w)
        try:
            for i in range(6):
                v = {"tokens": [[rng.randrange(-(1 << 40), 1 << 40) for _ in range(
                                  rng.randrange(0, 3000))] for _ in range(8)],
                     "lp": [[-rng.random() * 7 for _ in range(rng.randrange(0, 3000))]
                            for _ in range(8)],
                     "big": [[1 << 63, w, i]] if i % 3 == 0 else [[w, i]]}
                refs[(w, i)] = t.put(v, field_schemas={"tokens": tr, "lp": tr, "big": tr})
                values[(w, i)] = v
        except BaseException as e:  # reported below, with the worker's number
            errors.append((w, e))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors and len(refs) == 24, errors
    reader = MooncakeBundleTransfer(b, key_prefix="types-thr")
    for k, ref in refs.items():
        got = reader.get(export_ref(ref))
        for f in values[k]:
            assert_same(got[f], values[k][f], f"{k} {f}")
        MooncakeBundleTransfer.release_result(got)
        t.cleanup_dataproto(ref)


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


def test_odd_values_per_codec(pair):
    """One value of each kind per codec (the README's table), type-exact."""
    a, b = pair
    t = MooncakeBundleTransfer(a, key_prefix="types-odd")
    nan = struct.unpack("<d", struct.pack("<Q", 0xFFF4000000000123))[0]
    value = {
        # typed_ragged
        "tr_int": [[1, -2, (1 << 63) - 1], [], [0]],
        "tr_float": [[nan, -0.0, 5e-324, math.inf], []],
        "tr_bool": [[True, False], []],
        "tr_nested": [[[1, 2], [3, 4]], [[5, 6]], []],
        "tr_arrays": [numpy.arange(4, dtype=numpy.uint16).reshape(2, 2),
                      numpy.zeros(0, numpy.uint16)],
        "tr_mixed": [[1, 2.5, True], (3, 4), [numpy.float32(0.5)], numpy.arange(2)],
        "tr_u64": [[1 << 63, 5]],
        "tr_tuple": ([1, 2], [3]),
        "tr_2d": numpy.arange(12, dtype=numpy.int8).reshape(3, 4),
        "tr_1d": numpy.arange(3, dtype=numpy.float64),
        "tr_nulls": [None, [1.5], None],
        # ndarray
        "nd_floats": [nan, 0.1, -0.0],
        "nd_ints_floats": [1, 0.5, 0, True],
        "nd_npscalars": [numpy.int8(1), numpy.float16(2)],
        "nd_rows": [[1, 2], [3, 4]],
        "nd_tuple": (1, 2, 3),
        "nd_nulls": [None, 2.5, None],
        "nd_npscalar": numpy.float32(1.5),
        "nd_scalar_bool": True,
        "nd_empty": [],
        "nd_objarr": numpy.array([1, 2.5, None], dtype=object),
        # msgpack_ragged
        "mp": ["héllo 你好 🙂", b"\x00\xff", None, 1 << 90, nan, (1, [2, (3,)]), {1, 2},
               {"k": {2: [None, True, 1.0]}}, numpy.arange(3, dtype=numpy.int16),
               numpy.bool_(True), frozenset(), [], {}],
        "mp_np": [numpy.str_(""), numpy.datetime64("2026-12-02"), numpy.complex64(1j),
                  numpy.zeros((2, 0), numpy.float32)],
        "mp_tuple": (None, "x"),
        # ragged_tensor_dict
        "rtd": [{"a": [1, 2], "b": numpy.ones(2, numpy.float32), "c": None},
                None, {"c": [[1.5]], "a": []}, {}],
        # auto (meta_info, carried in the ref)
        "auto": {"nan": nan, "np": numpy.float64(0.1), "t": (1,), "b": bytearray(b"x"),
                 "ik": {1: 2}, "s": "plain str"},
    }
    codec = {"tr": "typed_ragged", "nd": "ndarray", "mp": "msgpack_ragged",
             "rtd": "ragged_tensor_dict"}
    nb = {"section": "non_tensor_batch"}
    schemas = {k: FieldSchema(codec[k.split("_")[0]], nullable=True, metadata=nb)
               for k in value if k != "auto"}
    ref = t.put(value, field_schemas=schemas)
    st = stored_fields(a, ref)
    assert st["tr_mixed"]["layout"] == "msgpack" and st["nd_ints_floats"]["layout"] == "msgpack"
    assert st["tr_int"]["row_type"] == "list" and st["tr_arrays"]["row_type"] == "ndarray"
    assert st["tr_2d"]["outer"] == "ndarray" and st["tr_tuple"]["outer"] == "tuple"
    got = MooncakeBundleTransfer(b, key_prefix="types-odd").get(
        json.loads(json.dumps(export_ref(ref))))
    for f in value:
        assert_same(got[f], value[f], f)
    MooncakeBundleTransfer.release_result(got)
    t.cleanup_dataproto(ref)


def test_values_that_cannot_keep_their_type_are_refused(pair):
    """Subclasses would come back as their base class: refused, nothing written."""
    a, _ = pair
    w = Traced(a)
    t = MooncakeBundleTransfer(w, key_prefix="types-refused")
    mp = FieldSchema("msgpack_ragged")
    for bad in (Color.RED, Name("x"), collections.OrderedDict(a=1), [collections.deque()]):
        with pytest.raises(ValueError, match="cannot be stored with its type"):
            t.put({"m": [bad]}, field_schemas={"m": mp})
    for bad in (Color.RED, collections.OrderedDict(a=1), Name("x")):
        with pytest.raises(TypeError, match="cannot be carried in meta_info"):
            t.put({"x": bad})
    with pytest.raises(ValueError, match="msgpack_ragged"):
        t.put({"s": [["a", "b"]]}, field_schemas={"s": FieldSchema("typed_ragged")})
    with pytest.raises(ValueError, match="nullable"):
        t.put({"s": [[1], None]}, field_schemas={"s": FieldSchema("typed_ragged")})
    assert w.calls == []
    stock_handle = {"type": "mooncake_dataproto_ref", "version": 3, "kind": "bundle_stages",
                    "stage_refs": {"rollout": {"manifest_key": "x/manifest"}}}
    with pytest.raises(ValueError, match="stock Mooncake"):
        import_ref(stock_handle)


def test_version_1_objects_are_still_read(pair):
    """An object written before issue 15 (manifest and meta version 1, no row_type):
    read as then, typed_ragged rows and ndarray fields as numpy arrays."""
    a, b = pair
    t = MooncakeBundleTransfer(a, key_prefix="types-v1")
    ref = t.put({"x": [[1, 2], [3]], "y": [1.5, 2.5], "p": ["a"]},
                field_schemas={"x": FieldSchema("typed_ragged"),
                               "y": FieldSchema("ndarray", metadata={"dtype": "float32"}),
                               "p": FieldSchema("msgpack_ragged")})
    for key, fix in ((f"{ref.base_key}/meta", True), (f"{ref.base_key}/manifest", False)):
        raw = a.get(key)
        doc = json.loads(raw)
        doc["version"] = 1
        for f in doc.get("fields", []) if fix else []:
            f.pop("row_type", None)
        new = json.dumps(doc, separators=(",", ":")).encode()
        new += b" " * (len(raw) - len(new))  # the manifest records the meta's size
        assert a.remove(key, True) == 0
        assert a.put(key, new) == 0
    got = MooncakeBundleTransfer(b, key_prefix="types-v1").get(ref)
    assert [r.tolist() for r in got["x"]] == [[1, 2], [3]]
    assert isinstance(got["x"][0], numpy.ndarray) and got["x"][0].dtype == numpy.int64
    # v2 stored y as float32 (1.5, 2.5 are exact there); v1 readers see that array
    assert got["y"].dtype == numpy.float32 and got["y"].tolist() == [1.5, 2.5]
    assert got["p"] == ["a"]
    MooncakeBundleTransfer.release_result(got)
    t.cleanup_dataproto(ref)
