"""mooncake.store (Tide's drop-in) against Tide's mooncake_master, two stores in
one process over kernel sockets (P2PHANDSHAKE). Debian python3 + python3-pytest.

Environment (set by meson): STORE_TEST_MASTER_BIN = mooncake_master,
LIBTIDESTORE = libtidestore.so, PYTHONPATH = store/python.
"""
import copy
import os
import socket
import subprocess
import time

import numpy
import pytest

for k in [k for k in os.environ if k.startswith(("TIDE_", "MOONCAKE_"))]:
    del os.environ[k]
os.environ["MC_FORCE_TCP"] = "1"

from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: E402

SEG = 32 << 20


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


@pytest.fixture(scope="module")
def master():
    port = free_port()
    p = subprocess.Popen([os.environ["STORE_TEST_MASTER_BIN"], f"--rpc_port={port}",
                          "--metrics_port=0"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"127.0.0.1:{port}"
    p.terminate()
    p.wait(timeout=10)


def mk(master, seg=SEG):
    s = MooncakeDistributedStore()
    rc = s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                  "global_segment_size": seg, "local_buffer_size": "16MB", "protocol": "tcp",
                  "rdma_devices": "", "master_server_addr": master})
    assert rc == 0
    return s


@pytest.fixture(scope="module")
def pair(master):
    a, b = mk(master), mk(master)
    yield a, b
    b.close()
    a.close()


def test_round_trip_sizes_and_buffer_types(pair):
    a, b = pair
    for i, n in enumerate([1, 255, 4096, 1 << 20, 16 << 20]):
        data = os.urandom(n)
        assert a.put(f"rt-{i}", data) == 0
        assert b.get(f"rt-{i}") == data
        assert a.get(f"rt-{i}") == data
        assert a.get_size(f"rt-{i}") == n
        assert b.is_exist(f"rt-{i}") == 1
    arr = numpy.arange(1000, dtype=numpy.uint8)
    assert a.put("np", arr) == 0
    assert b.get("np") == arr.tobytes()
    assert a.put("ba", bytearray(b"xyz")) == 0
    assert b.get("ba") == b"xyz"
    assert a.put("mv", memoryview(b"abcdef")[1:4]) == 0
    assert b.get("mv") == b"bcd"
    f32 = numpy.ones(10, dtype=numpy.float32)
    assert a.put("f32", f32) == 0
    assert b.get("f32") == f32.tobytes()


def test_missing_remove_and_codes(pair):
    a, b = pair
    assert a.get("nope") == b""
    assert a.is_exist("nope") == 0
    assert a.get_size("nope") == -704
    assert a.remove("nope") == -704
    assert a.put("gone", b"1234") == 0
    assert b.remove("gone", force=True) == 0
    assert a.get("gone") == b""
    assert a.put("", b"x") == -600
    assert a.put("empty", b"") == -600


def test_replicate_config(pair):
    a, b = pair
    cfg = ReplicateConfig()
    cfg.replica_num = 2
    cfg.group_ids = ["structured-1234"]
    cfg2 = copy.copy(cfg)
    assert cfg2.replica_num == 2
    data = os.urandom(70000)
    assert a.put("rep2", data, config=cfg2) == 0
    assert b.get("rep2") == data


def test_full_store_is_backpressure(pair):
    a, b = pair
    assert a.put("huge", b"\0" * (2 * SEG + 4096)) == -200
    assert a.get("huge") == b""


def test_setup_errors(master):
    s = MooncakeDistributedStore()
    assert s.setup({"local_hostname": "127.0.0.1", "master_server_addr": master,
                    "protocol": "rdma", "global_segment_size": 0}) != 0
    assert s.setup({"local_hostname": "127.0.0.1", "master_server_addr": master,
                    "global_segment_size": "12 parsecs"}) == -600
    assert s.setup({"local_hostname": "127.0.0.1", "master_server_addr": "127.0.0.1:1",
                    "global_segment_size": 0}) != 0
    with pytest.raises(RuntimeError):
        s.put("k", b"v")


def test_positional_setup_and_pure_client(master, pair):
    a, _ = pair
    c = MooncakeDistributedStore()
    assert c.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0
    assert a.put("from-a", b"hello") == 0
    assert c.get("from-a") == b"hello"
    assert c.put("from-c", b"world") == 0
    assert a.get("from-c") == b"world"
    assert c.health_check() == 0
    c.close()
