"""The *_with_parallelism tensor calls (stock's unified parallel tensor IO) against a real
mooncake_master, in process (TIDE_AGENT=off) and through tide-node agents: shards written
by one client under stock's key names and in stock's byte layout (headers and manifests
packed here independently of mooncake._store_parallel), read back by another client as
stored, as another rank's shard of another TP size, and as the full tensor; the _from,
batch and upsert forms; refused requests (-600 and one line; None for reads).

Environment (set by meson): STORE_TEST_MASTER_BIN, STORE_TEST_NODE_BIN, LIBTIDESTORE,
PYTHONPATH = store/python. Needs python3-numpy and python3-torch.
"""
import os
import struct
from types import SimpleNamespace

import numpy
import pytest
import torch

import test_store as ts  # noqa: E402 (its environment set-up runs first)
from mooncake.store import (MooncakeDistributedStore, ParallelAxis,  # noqa: E402
                            ReadTarget, ReplicateConfig, TensorParallelism)
from test_store_calls import stock_object  # noqa: E402

INVALID = -600
DP, TP, EP, PP = 0, 1, 2, 3


master = ts.master  # test_store.py's master, eviction off (module scope here too)


agents = ts.agents  # test_store.py's two tide-node agents (module scope here too)


pair = ts.pair_each_way  # (writer, reader), in process and through agents


def uniq(prefix):
    return f"{prefix}-{os.urandom(4).hex()}"


def axis(kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
    a = ParallelAxis()
    a.kind, a.rank, a.size = kind, rank, size
    a.split_dim, a.expert_id, a.stage_id = split_dim, expert_id, stage_id
    return a


def par(*axes):
    p = TensorParallelism()
    p.axes = list(axes)
    return p


def target(mode, parallelism=None):
    t = ReadTarget()
    t.mode = mode
    t.parallelism = parallelism
    return t


def manifest(code, gshape, split, count):
    """stock's WriterShardManifest bytes (store_py_internal.h at 3b5a5941)."""
    dims = list(gshape) + [-1] * (8 - len(gshape))
    return struct.pack("<IHHiiiii", 0x574D414E, 1, 96, code, len(gshape), split, count, 0) + \
        bytes(4) + struct.pack("<8q", *dims)


def host(data):
    """A numpy buffer holding data, and its address."""
    arr = numpy.frombuffer(bytearray(data), dtype=numpy.uint8).copy()
    return arr, arr.ctypes.data


def same(a, b):
    return a is not None and a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and \
        torch.equal(a, b)


# ------------------------------------------------------------------- the classes

def test_request_classes():
    a = ParallelAxis()
    assert (a.kind, a.rank, a.size, a.split_dim, a.expert_id, a.stage_id) == \
        ("", 0, 1, None, None, None)
    with pytest.raises(TypeError):
        a.rank = "1"
    with pytest.raises(TypeError):
        a.kind = 1
    p = TensorParallelism()
    assert p.axes == []
    p.axes.append(axis("tp", 0, 2, 0))  # a copy, as stock's bound vector
    assert p.axes == []
    p.axes = [axis("tp", 1, 2, 0)]
    p.axes[0].rank = 0
    assert p.axes[0].rank == 1
    with pytest.raises(TypeError):
        p.axes = [1]
    t = ReadTarget()
    assert t.mode == "as_stored" and t.parallelism is None
    t.mode = "FULL"
    assert t.mode == "full"
    with pytest.raises(RuntimeError):
        t.mode = "everything"
    with pytest.raises(TypeError):
        t.parallelism = [axis("tp", 0, 1, 0)]


# --------------------------------------------------------------------- full objects

def test_full_tensor_round_trip(pair):
    w, r = pair
    k = uniq("pf")
    t = torch.arange(30, dtype=torch.int32).reshape(5, 6)
    assert w.put_tensor_with_parallelism(k, t) == 0
    assert r.get(k) == stock_object(t)
    assert same(r.get_tensor_with_parallelism(k), t)
    assert same(r.get_tensor_with_parallelism(k, target("as_stored")), t)
    # full without a parallelism and no writer manifest: the object itself
    assert same(r.get_tensor_with_parallelism(k, target("full")), t)
    d = numpy.zeros(304 + t.numel() * 4, dtype=numpy.uint8)
    got = r.get_tensor_with_parallelism_into(k, d.ctypes.data, d.nbytes)
    assert same(got, t) and bytes(d) == stock_object(t)
    assert w.upsert_tensor_with_parallelism(k, torch.ones(2, dtype=torch.float64)) == 0
    assert same(r.get_tensor_with_parallelism(k), torch.ones(2, dtype=torch.float64))
    cfg = ReplicateConfig()
    cfg.preferred_segment = r.get_hostname()
    assert w.put_tensor_with_parallelism(k + "c", t, None, cfg) == 0
    assert same(r.get_tensor_with_parallelism(k + "c"), t)


# ------------------------------------------------------------------------ TP shards

def test_tp_shards_by_rank_read_by_other_tp_sizes(pair):
    """Four ranks store their shard (dimension 1 split in four); readers of TP size 4, 2
    and 1 (full) get their part, every byte compared."""
    w, r = pair
    k = uniq("tp")
    t = torch.randn(4, 8, 3, generator=torch.Generator().manual_seed(1))
    for rank in range(4):
        shard = t.narrow(1, rank * 2, 2).contiguous()
        assert w.put_tensor_with_parallelism(k, shard, par(axis("tp", rank, 4, 1))) == 0
        assert r.get(f"{k}_tp_{rank}") == stock_object(
            shard, kind=1, gshape=[4, 8, 3], axes=[(TP, 0, rank, 4, 1, 0, 2)])
    assert r.get(f"{k}__parallelism_manifest") == manifest(0, [4, 8, 3], 1, 4)
    # the same layout: the stored shard
    got = r.get_tensor_with_parallelism(k, target("shard", par(axis("tp", 3, 4, 1))))
    assert same(got, t.narrow(1, 6, 2).contiguous())
    # TP size 2: rank 1 rebuilt from stored ranks 2 and 3, with a shard header
    want = t.narrow(1, 4, 4).contiguous()
    got = r.get_tensor_with_parallelism(k, target("shard", par(axis("tp", 1, 2, 1))))
    assert same(got, want)
    d = numpy.zeros(304 + want.numel() * 4 + 16, dtype=numpy.uint8)
    got = r.get_tensor_with_parallelism_into(k, d.ctypes.data, d.nbytes,
                                             target("shard", par(axis("tp", 1, 2, 1))))
    assert same(got, want)
    assert bytes(d[:304 + want.numel() * 4]) == stock_object(
        want, kind=1, gshape=[4, 8, 3], axes=[(TP, 0, 1, 2, 1, 0, 4)])
    # the whole tensor, any TP rank in the request
    full = target("full", par(axis("tp", 0, 2, 1)))
    assert same(r.get_tensor_with_parallelism(k, full), t)
    d = numpy.zeros(304 + t.numel() * 4, dtype=numpy.uint8)
    assert same(r.get_tensor_with_parallelism_into(k, d.ctypes.data, d.nbytes, full), t)
    assert bytes(d) == stock_object(t)
    # a buffer too small for the rebuilt tensor
    assert r.get_tensor_with_parallelism_into(k, d.ctypes.data, 400, full) is None
    # split_dim other than the stored one
    assert r.get_tensor_with_parallelism(k, target("full", par(axis("tp", 0, 2, 0)))) \
        is None


def test_shards_of_the_tp_calls_read_through_parallelism(pair, capsys):
    """put_tensor_with_tp's shards (no manifest) read by the unified calls: the "_tp_"
    keys give the layout, any TP size that divides the dimension reads its rank."""
    w, r = pair
    k = uniq("legacy")
    t = torch.arange(2 * 12, dtype=torch.int16).reshape(2, 12)
    assert w.put_tensor_with_tp(k, t, tp_size=6, split_dim=1) == 0
    for size in (6, 3, 2):
        for rank in range(size):
            got = r.get_tensor_with_parallelism(
                k, target("shard", par(axis("tp", rank, size, 1))))
            n = 12 // size
            assert same(got, t[:, rank * n:(rank + 1) * n].contiguous()), (size, rank)
    got = r.batch_get_tensor_with_parallelism(
        [k, k], [target("full", par(axis("tp", 0, 4, 1))),
                 target("shard", par(axis("tp", 1, 4, 1)))])
    assert same(got[0], t) and same(got[1], t[:, 3:6].contiguous())
    # Without a manifest, a TP size of 1 looks under the key itself (stock's
    # resolve_tp_read_key), where put_tensor_with_tp stored nothing.
    assert r.get_tensor_with_parallelism(k, target("shard", par(axis("tp", 0, 1, 1)))) \
        is None
    # 12 columns do not split evenly in 5 or 7: no rebuild; stock's last resort is the
    # object under "<key>_tp_<rank>" as stored (rank 0 of 6 here; none for rank 6).
    got = r.get_tensor_with_parallelism(k, target("shard", par(axis("tp", 0, 5, 1))))
    assert same(got, t[:, :2].contiguous())
    capsys.readouterr()
    assert r.get_tensor_with_parallelism(k, target("shard", par(axis("tp", 6, 7, 1)))) \
        is None
    assert "uniform" in capsys.readouterr().err


def test_tp_with_other_axes_takes_the_full_tensor(pair):
    """DP x TP: each writer passes its DP replica's full tensor; the TP rank's shard is
    cut and stored under the axis-named key (DP before TP, whatever the given order)."""
    w, r = pair
    k = uniq("dptp")
    ts_ = [torch.arange(48, dtype=torch.int64).reshape(6, 8) + 100 * dp for dp in range(2)]
    for dp in range(2):
        for tp in range(2):
            p = par(axis("tp", tp, 2, 0), axis("dp", dp, 2))
            assert w.put_tensor_with_parallelism(k, ts_[dp], p) == 0
            shard = ts_[dp][tp * 3:(tp + 1) * 3].contiguous()
            assert r.get(f"{k}__dp_{dp}of2__tp_{tp}of2_sd0") == stock_object(
                shard, kind=1, gshape=[6, 8],
                axes=[(TP, 0, tp, 2, 0, 0, 3), (DP, 1, dp, 2, -1, 0, 0)])
    assert r.get(f"{k}__parallelism_manifest") == manifest(8, [6, 8], 0, 2)
    got = r.get_tensor_with_parallelism(
        k, target("shard", par(axis("dp", 1, 2), axis("tp", 0, 2, 0))))
    assert same(got, ts_[1][:3].contiguous())
    # TP size 1 of DP replica 1 (another layout): rebuilt from the two stored shards
    got = r.get_tensor_with_parallelism(
        k, target("shard", par(axis("dp", 1, 2), axis("tp", 0, 1, 0))))
    assert same(got, ts_[1])
    got = r.get_tensor_with_parallelism(
        k, target("full", par(axis("tp", 1, 2, 0), axis("dp", 0, 2))))
    assert same(got, ts_[0])


def test_axes_without_tp_store_the_tensor_as_given(pair):
    w, r = pair
    k = uniq("eppp")
    t = torch.arange(12, dtype=torch.float16).reshape(3, 4)
    p = par(axis("pp", 0, 2, stage_id=1), axis("ep", 1, 4, expert_id=3))
    assert w.put_tensor_with_parallelism(k, t, p) == 0
    assert r.get(f"{k}__ep_1of4_eid3__pp_0of2_sid1") == stock_object(
        t, kind=1, axes=[(PP, 0, 0, 2, -1, 1, 0), (EP, 1, 1, 4, -1, 3, 0)])
    assert r.is_exist(f"{k}__parallelism_manifest") == 0
    got = r.get_tensor_with_parallelism(
        k, target("shard", par(axis("ep", 1, 4, expert_id=3), axis("pp", 0, 2, stage_id=1))))
    assert same(got, t)
    # another expert: nothing stored; full needs a TP axis
    assert r.get_tensor_with_parallelism(
        k, target("shard", par(axis("ep", 2, 4, expert_id=3), axis("pp", 0, 2, stage_id=1)))) \
        is None
    assert r.get_tensor_with_parallelism(k, target("full", p)) is None


def test_writer_partitions(pair):
    w, r = pair
    k = uniq("wp")
    t = torch.arange(6 * 4, dtype=torch.uint8).reshape(6, 4)
    for rank in range(3):
        wp = SimpleNamespace(rank=rank, size=3, split_dim=0)
        assert w.put_tensor_with_parallelism(k, t, writer_partition=wp) == 0
        assert r.get(f"{k}__writer_{rank}of3_sd0") == stock_object(
            t[2 * rank:2 * rank + 2].contiguous(), kind=1, gshape=[6, 4],
            axes=[(TP, 0, rank, 3, 0, 0, 2)])
    assert r.get(f"{k}__writer_manifest") == manifest(3, [6, 4], 0, 3)
    assert same(r.get_tensor_with_parallelism(k, target("full")), t)
    # a one-axis TP shard request finds the writer shard
    got = r.get_tensor_with_parallelism(k, target("shard", par(axis("tp", 2, 3, 0))))
    assert same(got, t[4:].contiguous())
    # batch form, numpy in
    k2 = uniq("wpb")
    a = numpy.arange(16, dtype=numpy.float32).reshape(2, 8)
    wps = [SimpleNamespace(rank=i, size=2, split_dim=1) for i in range(2)]
    assert w.batch_put_tensor_with_parallelism([k2, k2], [a, a], writer_partitions=wps) == \
        [0, 0]
    assert same(r.get_tensor_with_parallelism(k2, target("full")), torch.from_numpy(a))
    # upserting one shard changes that part of the rebuilt tensor
    b = a + 1000
    assert w.upsert_tensor_with_parallelism(k2, b, writer_partition=wps[1]) == 0
    want = numpy.concatenate([a[:, :4], b[:, 4:]], axis=1)
    assert same(r.get_tensor_with_parallelism(k2, target("full")), torch.from_numpy(want))


# ----------------------------------------------------------------------- _from forms

def test_from_forms(pair):
    w, r = pair
    t = torch.randn(4, 6, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    obj = stock_object(t)
    buf, ptr = host(obj)
    # without a parallelism: the object as is
    k = uniq("fr")
    assert w.put_tensor_with_parallelism_from(k, ptr, len(obj)) == 0
    assert r.get(k) == obj
    # one TP axis: every rank's shard of the buffer's full tensor (no manifest)
    k = uniq("frtp")
    assert w.put_tensor_with_parallelism_from(k, ptr, len(obj),
                                              par(axis("tp", 0, 3, 1))) == 0
    for rank in range(3):
        assert r.get(f"{k}_tp_{rank}") == stock_object(
            t[:, 2 * rank:2 * rank + 2].contiguous(), kind=1, gshape=[4, 6],
            axes=[(TP, 0, rank, 3, 1, 0, 2)])
    assert r.is_exist(f"{k}__parallelism_manifest") == 0
    got = r.get_tensor_with_parallelism(k, target("full", par(axis("tp", 0, 3, 1))))
    assert same(got, t)
    got = r.get_tensor_with_parallelism(k, target("shard", par(axis("tp", 1, 3, 1))))
    assert same(got, t[:, 2:4].contiguous())
    # a writer partition of the buffer
    k = uniq("frwp")
    wp = SimpleNamespace(rank=1, size=2, split_dim=0)
    assert w.put_tensor_with_parallelism_from(k, ptr, len(obj), writer_partition=wp) == 0
    assert r.get(f"{k}__writer_1of2_sd0") == stock_object(
        t[2:].contiguous(), kind=1, gshape=[4, 6], axes=[(TP, 0, 1, 2, 0, 0, 2)])
    assert r.get(f"{k}__writer_manifest") == manifest(12, [4, 6], 0, 2)
    # DP only: the object relabelled
    k = uniq("frdp")
    assert w.put_tensor_with_parallelism_from(k, ptr, len(obj), par(axis("dp", 1, 2))) == 0
    assert r.get(f"{k}__dp_1of2") == stock_object(t, kind=1,
                                                  axes=[(DP, 0, 1, 2, -1, 0, 0)])
    # batches and upserts
    o2 = stock_object(torch.arange(8, dtype=torch.int16))
    b2, p2 = host(o2)
    ks = [uniq("frb"), uniq("frb")]
    assert w.batch_put_tensor_with_parallelism_from(ks, [ptr, p2], [len(obj), len(o2)]) == \
        [0, 0]
    assert r.get(ks[0]) == obj and r.get(ks[1]) == o2
    assert w.batch_upsert_tensor_with_parallelism_from(ks, [p2, ptr], [len(o2), len(obj)]) \
        == [0, 0]
    assert r.get(ks[0]) == o2 and r.get(ks[1]) == obj
    assert w.batch_put_tensor_with_parallelism_from(
        ks, [ptr, p2], [len(obj), len(o2)], [par(axis("tp", 0, 2, 0)), None]) == [0, 0]
    assert same(r.get_tensor_with_parallelism(ks[0], target("shard",
                                                            par(axis("tp", 1, 2, 0)))),
                t[2:].contiguous())
    assert w.upsert_tensor_with_parallelism_from(ks[1], ptr, len(obj)) == 0
    assert r.get(ks[1]) == obj
    assert w.batch_upsert_tensor_with_parallelism_from(
        [ks[1]], [p2], [len(o2)], writer_partitions=[SimpleNamespace(rank=0, size=2,
                                                                     split_dim=0)]) == [0]
    # one writer shard of two: no full set, so (as stock) the object under the key itself
    assert same(r.get_tensor_with_parallelism(ks[1], target("full")), t)
    assert w.upsert_tensor_with_parallelism_from(
        ks[1], p2, len(o2), writer_partition=SimpleNamespace(rank=1, size=2, split_dim=0)) \
        == 0
    assert same(r.get_tensor_with_parallelism(ks[1], target("full")),
                torch.arange(8, dtype=torch.int16))
    del buf, b2


# ---------------------------------------------------------------------- batches

def test_batches(pair):
    w, r = pair
    ks = [uniq("bt") for _ in range(3)]
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    pars = [None, par(axis("tp", 1, 2, 0)), par(axis("dp", 0, 2), axis("tp", 1, 2, 1))]
    tensors = [t, t[2:].contiguous(), t]
    assert w.batch_put_tensor_with_parallelism(ks, tensors, pars) == [0, 0, 0]
    assert r.get(ks[1] + "_tp_1") == stock_object(t[2:].contiguous(), kind=1, gshape=[4, 6],
                                                  axes=[(TP, 0, 1, 2, 0, 0, 2)])
    tg = [None, target("shard", par(axis("tp", 1, 2, 0))),
          target("shard", par(axis("tp", 1, 2, 1), axis("dp", 0, 2)))]
    got = r.batch_get_tensor_with_parallelism(ks, tg)
    assert same(got[0], t) and same(got[1], t[2:].contiguous())
    assert same(got[2], t[:, 3:].contiguous())
    assert [same(a, b) for a, b in zip(r.batch_get_tensor_with_parallelism(ks[:1]), [t])] \
        == [True]
    bufs = [numpy.zeros(304 + 96, dtype=numpy.uint8) for _ in ks]
    got = r.batch_get_tensor_with_parallelism_into(ks, [b.ctypes.data for b in bufs],
                                                   [b.nbytes for b in bufs], tg)
    assert same(got[0], t) and same(got[1], t[2:].contiguous())
    assert same(got[2], t[:, 3:].contiguous())
    got = r.batch_get_tensor_with_parallelism_into(ks[:1], [bufs[0].ctypes.data],
                                                   [bufs[0].nbytes])
    assert same(got[0], t)
    assert w.batch_upsert_tensor_with_parallelism(ks[:2], [t + 1, t[2:] + 1], pars[:2]) == \
        [0, 0]
    assert same(r.get_tensor_with_parallelism(ks[0]), t + 1)
    assert same(r.get_tensor_with_parallelism(ks[1], tg[1]), t[2:] + 1)
    assert w.batch_put_tensor_with_parallelism([], []) == []
    cfg = ReplicateConfig()
    cfg.group_ids = ["g-a", "g-b"]
    assert w.batch_put_tensor_with_parallelism(
        [uniq("bg"), uniq("bg")], [t, t[:2].contiguous()],
        [None, par(axis("tp", 0, 2, 0))], cfg) == [0, 0]


# ------------------------------------------------------------------- bad requests

def test_refused_requests(pair, capsys):
    w, r = pair
    k = uniq("bad")
    t = torch.zeros(4, 4)
    capsys.readouterr()

    def refused(rc, words):
        err = capsys.readouterr().err
        assert rc == INVALID and words in err and err.count("\n") >= 1, (rc, err)

    refused(w.put_tensor_with_parallelism(k, t, 5), "must be a TensorParallelism")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("tp", 2, 2, 0))),
            "rank 2 is outside size 2")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("tp", 0, 2))), "needs split_dim")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("dp", 0, 2, 0))),
            "takes no split_dim")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("ep", 0, 2))), "needs expert_id")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("xp", 0, 2))), "unsupported")
    refused(w.put_tensor_with_parallelism(k, t, par()), "cannot be empty")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("dp", 0, 2), axis("dp", 1, 2))),
            "two dp axes")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("tp", 0, 2, 5))), "outside")
    refused(w.put_tensor_with_parallelism(k, t, par(axis("tp", 0, 3, 0), axis("dp", 0, 1))),
            "does not split evenly")
    refused(w.put_tensor_with_parallelism(
        k, t, par(axis("tp", 0, 2, 0)), writer_partition=SimpleNamespace(
            rank=0, size=2, split_dim=0)), "cannot be combined")
    refused(w.put_tensor_with_parallelism(k, t, writer_partition=(0, 2, 0)),
            "must provide rank, size, and split_dim")
    refused(w.put_tensor_with_parallelism(k, t, writer_partition=SimpleNamespace(
        rank=3, size=2, split_dim=0)), "invalid writer partition")
    refused(w.put_tensor_with_parallelism(k, [1, 2], par(axis("dp", 0, 1))),
            "expected a torch tensor")
    axis_like = SimpleNamespace(kind="tp", rank="0", size=2, split_dim=0)
    refused(w.put_tensor_with_parallelism(k, t, SimpleNamespace(axes=[axis_like])),
            "must be an int")
    junk, jp = host(b"\x01" * 400)
    refused(w.put_tensor_with_parallelism_from(k, jp, 400), "does not hold a Mooncake tensor")
    refused(w.put_tensor_with_parallelism_from(k, 0, 400, par(axis("tp", 0, 2, 0))), "null")
    assert r.is_exist(k) == 0 and r.is_exist(k + "_tp_0") == 0
    with pytest.raises(TypeError):
        w.put_tensor_with_parallelism(7, t)
    # batches: whole-call refusals give every key -600
    ks = [k + "a", k + "b"]
    assert w.batch_put_tensor_with_parallelism(ks, [t]) == [INVALID] * 2
    assert w.batch_put_tensor_with_parallelism(ks, [t, t], (None, None)) == [INVALID] * 2
    assert "must be a list" in capsys.readouterr().err
    assert w.batch_put_tensor_with_parallelism(ks, [t, t], [None]) == [INVALID] * 2
    assert w.batch_put_tensor_with_parallelism(ks, [t, t], [None, None], None,
                                               [None, None]) == [INVALID] * 2
    cfg = ReplicateConfig()
    cfg.group_ids = ["only-one"]
    assert w.batch_put_tensor_with_parallelism(ks, [t, t], None, cfg) == [INVALID] * 2
    assert w.batch_put_tensor_with_parallelism_from(ks, [jp, jp], [400, 400]) == \
        [INVALID] * 2
    # per key: one bad request, one good
    assert w.batch_put_tensor_with_parallelism(
        ks, [t, t], [par(axis("tp", 5, 2, 0)), None]) == [INVALID, 0]
    capsys.readouterr()
    # reads: None and a line
    assert r.get_tensor_with_parallelism(uniq("missing")) is None
    assert r.get_tensor_with_parallelism(
        uniq("missing"), target("full", par(axis("tp", 0, 2, 0)))) is None
    assert "no" in capsys.readouterr().err
    assert r.get_tensor_with_parallelism(ks[1], "full") is None
    assert "must be a ReadTarget" in capsys.readouterr().err
    assert r.get_tensor_with_parallelism(ks[1], target("shard")) is None
    assert "parallelism is required" in capsys.readouterr().err
    assert r.get_tensor_with_parallelism(ks[1], target("shard", par(axis("tp", 4, 2, 0)))) \
        is None
    assert "outside size" in capsys.readouterr().err
    assert r.get_tensor_with_parallelism(ks[1], target("as_stored",
                                                       par(axis("tp", 0, 1, 0)))) is None
    assert r.batch_get_tensor_with_parallelism(ks, [None]) == [None, None]
    assert r.batch_get_tensor_with_parallelism_into(ks, [1], [1]) == [None, None]
    assert r.get_tensor_with_parallelism_into(ks[1], 0, 100) is None


def test_methods_before_setup():
    s = MooncakeDistributedStore()
    t = torch.zeros(2)
    assert s.put_tensor_with_parallelism("k", t) == INVALID
    assert s.put_tensor_with_parallelism("k", t, par(axis("tp", 0, 1, 0))) == INVALID
    assert s.get_tensor_with_parallelism("k") is None
    assert s.batch_put_tensor_with_parallelism(["k"], [t]) == [INVALID]
