"""Issue 19, "Miles' Mooncake guide works unchanged on Tide": the Python surface the guide
and Mooncake's own loaders touch, against Tide's mooncake_master.

  - mooncake.mooncake_config.MooncakeConfig: from_file, load_from_env,
    MOONCAKE_CONFIG_PATH, defaults, size strings, Mooncake's exceptions;
  - keys: str/bytes accepted, anything else a TypeError (as Mooncake's pybind11
    binding), for every keyed method, before and after setup();
  - protocol "rdma": refused on this machine (no RDMA device) with one line and -600,
    refused through a tcp-only node agent, and run in-process over the in-memory verbs
    double (pmd/verbs' test seam TIDETEST_VERBS_GLUE) with real puts and gets.

Environment (set by meson): STORE_TEST_MASTER_BIN, STORE_TEST_NODE_BIN, LIBTIDESTORE,
PYTHONPATH = store/python, and STORE_TEST_VDBL_SO = libtide_vdbl.so (only in builds
with the verbs path; the double's tests skip without it).
"""
import ctypes
import json
import logging
import os
import subprocess
import sys
import textwrap
import time

import numpy
import pytest

for k in [k for k in os.environ if k.startswith(("TIDE_", "MOONCAKE_"))]:
    del os.environ[k]
os.environ["MC_FORCE_TCP"] = "1"
os.environ["TIDE_AGENT"] = "off"  # in-process engine unless a test attaches to an agent

from mooncake.mooncake_config import (  # noqa: E402
    DEFAULT_GLOBAL_SEGMENT_SIZE, DEFAULT_LOCAL_BUFFER_SIZE, MooncakeConfig)
from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: E402
from ut_common import restore_env, start_master  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(scope="module")
def master():
    p, addr = start_master(timeout=10)
    yield addr
    p.terminate()
    p.wait(timeout=10)


def setup_dict(master, **kw):
    c = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
         "global_segment_size": 32 * MiB, "local_buffer_size": 4 * MiB,
         "protocol": "tcp", "rdma_devices": "", "master_server_addr": master}
    c.update(kw)
    return c


@pytest.fixture(scope="module")
def tcp_store(master):
    s = MooncakeDistributedStore()
    assert s.setup(setup_dict(master)) == 0
    yield s
    s.close()


def write_json(tmp_path, doc, name="mooncake.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(p)


def tide_lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


# =========================================================== MooncakeConfig: from_file

FULL = {"local_hostname": "node1", "metadata_server": "P2PHANDSHAKE",
        "global_segment_size": "2gb", "local_buffer_size": "512MB", "protocol": "RDMA",
        "device_name": "mlx5_0,mlx5_1", "master_server_address": "10.0.0.1:50051",
        "enable_ssd_offload": "yes", "ssd_offload_path": "/nvme/x", "tenant_id": "t1",
        "enable_client_http_server": "off", "client_http_port": "9400"}


def test_from_file_every_key(tmp_path):
    c = MooncakeConfig.from_file(write_json(tmp_path, FULL))
    assert (c.local_hostname, c.metadata_server, c.master_server_address) == \
        ("node1", "P2PHANDSHAKE", "10.0.0.1:50051")
    assert c.global_segment_size == 2 * GiB and c.local_buffer_size == 512 * MiB
    assert c.protocol == "rdma"  # lower-cased: the transports match names exactly
    assert c.device_name == "mlx5_0,mlx5_1"
    assert c.enable_ssd_offload is True and c.ssd_offload_path == "/nvme/x"
    assert c.tenant_id == "t1"
    assert c.enable_client_http_server is False and c.client_http_port == 9400


def test_from_file_defaults(tmp_path):
    c = MooncakeConfig.from_file(write_json(tmp_path, {
        "local_hostname": "h", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": "m:50051"}))
    assert c.global_segment_size == DEFAULT_GLOBAL_SEGMENT_SIZE == 3355443200
    assert c.local_buffer_size == DEFAULT_LOCAL_BUFFER_SIZE == GiB
    assert (c.protocol, c.device_name, c.tenant_id) == ("tcp", "", "default")
    assert (c.enable_ssd_offload, c.ssd_offload_path) == (False, "")
    assert (c.enable_client_http_server, c.client_http_port) == (False, 9300)
    # JSON null for the two optional strings means their defaults
    c = MooncakeConfig.from_file(write_json(tmp_path, {
        "local_hostname": "h", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": "m:50051", "ssd_offload_path": None, "tenant_id": None}))
    assert (c.ssd_offload_path, c.tenant_id) == ("", "default")


@pytest.mark.parametrize("text,expect", [
    (4096, 4096), ("4096", 4096), ("100b", 100), ("4k", 4 << 10), ("4KB", 4 << 10),
    ("3m", 3 * MiB), ("3 mb", 3 * MiB), ("2g", 2 * GiB), ("2GB", 2 * GiB),
    ("1t", 1 << 40), ("1tb", 1 << 40), ("1.5gb", 3 * GiB // 2), (" 8gb ", 8 * GiB),
    ("0", 0), (0, 0), ("1e3", 1000)])
def test_size_strings(tmp_path, text, expect):
    doc = dict(FULL, global_segment_size=text, local_buffer_size=text)
    c = MooncakeConfig.from_file(write_json(tmp_path, doc))
    assert c.global_segment_size == expect and c.local_buffer_size == expect


@pytest.mark.parametrize("bad", ["", "   ", "gb", "twelve", "12 parsecs", "1.2.3mb"])
def test_bad_size_is_value_error(tmp_path, bad):
    with pytest.raises(ValueError):
        MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, local_buffer_size=bad)))


@pytest.mark.parametrize("key", ["local_hostname", "metadata_server",
                                 "master_server_address"])
def test_from_file_required_keys(tmp_path, key):
    doc = {k: v for k, v in FULL.items() if k != key}
    with pytest.raises(ValueError, match=f"Missing required config field: {key}"):
        MooncakeConfig.from_file(write_json(tmp_path, doc))
    with pytest.raises(ValueError, match="must be a non-empty string"):
        MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, **{key: "  "})))


def test_from_file_errors(tmp_path, caplog):
    with pytest.raises(FileNotFoundError):
        MooncakeConfig.from_file(str(tmp_path / "absent.json"))
    with pytest.raises(json.JSONDecodeError):
        MooncakeConfig.from_file(write_json(tmp_path, "{not json"))
    with pytest.raises(ValueError, match="Invalid global_segment_size"):
        MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, global_segment_size=-1)))
    with pytest.raises(ValueError, match="Invalid protocol"):
        MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, protocol="  ")))
    with pytest.raises(ValueError, match="Invalid protocol"):
        MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, protocol=7)))
    with pytest.raises(ValueError, match="Invalid boolean value"):
        MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, enable_ssd_offload="maybe")))
    with pytest.raises(ValueError):
        MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, client_http_port="x")))
    # an unknown protocol is passed on with a warning, not refused
    with caplog.at_level(logging.WARNING, logger="mooncake.mooncake_config"):
        c = MooncakeConfig.from_file(write_json(tmp_path, dict(FULL, protocol="Carrier-Pigeon")))
    assert c.protocol == "carrier-pigeon"
    assert any("carrier-pigeon" in r.getMessage() for r in caplog.records)


# ====================================================== MooncakeConfig: load_from_env

ENV_KEYS = ("MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER", "MOONCAKE_LOCAL_HOSTNAME",
            "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_GLOBAL_SEGMENT_SIZE",
            "MOONCAKE_LOCAL_BUFFER_SIZE", "MOONCAKE_PROTOCOL", "MOONCAKE_DEVICE",
            "MOONCAKE_OFFLOAD_ENABLED", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
            "MOONCAKE_TENANT_ID", "MOONCAKE_ENABLE_CLIENT_HTTP_SERVER",
            "MOONCAKE_CLIENT_HTTP_PORT")


@pytest.fixture
def clean_env(monkeypatch):
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def test_load_from_env_needs_master(clean_env):
    with pytest.raises(ValueError, match="MOONCAKE_CONFIG_PATH.*MOONCAKE_MASTER"):
        MooncakeConfig.load_from_env()
    clean_env.setenv("MOONCAKE_MASTER", "")
    with pytest.raises(ValueError):
        MooncakeConfig.load_from_env()


def test_load_from_env_defaults(clean_env):
    clean_env.setenv("MOONCAKE_MASTER", "10.0.0.1:50051")
    c = MooncakeConfig.load_from_env()
    assert c.master_server_address == "10.0.0.1:50051"
    assert (c.local_hostname, c.metadata_server) == ("localhost", "P2PHANDSHAKE")
    assert (c.global_segment_size, c.local_buffer_size) == (3355443200, GiB)
    assert (c.protocol, c.device_name, c.tenant_id, c.client_http_port) == \
        ("tcp", "", "default", 9300)
    assert not c.enable_ssd_offload and not c.enable_client_http_server


def test_load_from_env_every_variable(clean_env):
    for k, v in {"MOONCAKE_MASTER": "m:1", "MOONCAKE_LOCAL_HOSTNAME": "10.0.0.2",
                 "MOONCAKE_TE_META_DATA_SERVER": "http://m:8080/metadata",
                 "MOONCAKE_GLOBAL_SEGMENT_SIZE": "8gb", "MOONCAKE_LOCAL_BUFFER_SIZE": "32G",
                 "MOONCAKE_PROTOCOL": "Rdma", "MOONCAKE_DEVICE": "mlx5_2",
                 "MOONCAKE_OFFLOAD_ENABLED": "1", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/o",
                 "MOONCAKE_TENANT_ID": "team", "MOONCAKE_ENABLE_CLIENT_HTTP_SERVER": "true",
                 "MOONCAKE_CLIENT_HTTP_PORT": "9555"}.items():
        clean_env.setenv(k, v)
    c = MooncakeConfig.load_from_env()
    assert (c.local_hostname, c.metadata_server) == ("10.0.0.2", "http://m:8080/metadata")
    assert (c.global_segment_size, c.local_buffer_size) == (8 * GiB, 32 * GiB)
    assert (c.protocol, c.device_name) == ("rdma", "mlx5_2")
    assert (c.enable_ssd_offload, c.ssd_offload_path) == (True, "/o")
    assert (c.tenant_id, c.enable_client_http_server, c.client_http_port) == \
        ("team", True, 9555)
    clean_env.setenv("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "sometimes")
    with pytest.raises(ValueError, match="Invalid boolean value"):
        MooncakeConfig.load_from_env()


def test_config_path_overrides_environment(clean_env, tmp_path):
    clean_env.setenv("MOONCAKE_MASTER", "from-env:1")
    clean_env.setenv("MOONCAKE_PROTOCOL", "rdma")
    clean_env.setenv("MOONCAKE_CONFIG_PATH", write_json(tmp_path, {
        "local_hostname": "from-file", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": "from-file:2", "global_segment_size": "1gb"}))
    c = MooncakeConfig.load_from_env()
    assert (c.local_hostname, c.master_server_address) == ("from-file", "from-file:2")
    assert (c.protocol, c.global_segment_size) == ("tcp", GiB)
    # set is set: an empty or dangling path is an error, never a fall-back to the env
    clean_env.setenv("MOONCAKE_CONFIG_PATH", str(tmp_path / "absent.json"))
    with pytest.raises(FileNotFoundError):
        MooncakeConfig.load_from_env()
    clean_env.setenv("MOONCAKE_CONFIG_PATH", "")
    with pytest.raises(FileNotFoundError):
        MooncakeConfig.load_from_env()
    clean_env.setenv("MOONCAKE_CONFIG_PATH", write_json(tmp_path, {"local_hostname": "h"}))
    with pytest.raises(ValueError, match="Missing required config field: metadata_server"):
        MooncakeConfig.load_from_env()


def test_guide_flow_config_path_to_store(clean_env, tmp_path, master):
    """MOONCAKE_CONFIG_PATH -> MooncakeConfig -> setup(dict) -> put/get, as
    mooncake_store_service builds its setup() call."""
    clean_env.setenv("MOONCAKE_CONFIG_PATH", write_json(tmp_path, {
        "local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": master, "global_segment_size": "16mb",
        "local_buffer_size": "4mb", "protocol": "TCP", "device_name": ""}))
    c = MooncakeConfig.load_from_env()
    s = MooncakeDistributedStore()
    assert s.setup({"local_hostname": c.local_hostname, "metadata_server": c.metadata_server,
                    "global_segment_size": c.global_segment_size,
                    "local_buffer_size": c.local_buffer_size, "protocol": c.protocol,
                    "rdma_devices": c.device_name,
                    "master_server_addr": c.master_server_address,
                    "enable_ssd_offload": c.enable_ssd_offload,
                    "ssd_offload_path": c.ssd_offload_path, "tenant_id": c.tenant_id,
                    "enable_client_http_server": c.enable_client_http_server,
                    "client_http_port": c.client_http_port}) == 0
    data = os.urandom(100000)
    assert s.put("guide/config-path", data) == 0
    assert s.get("guide/config-path") == data
    s.close()


def test_setup_does_not_read_config_path(clean_env, tmp_path, master):
    """Mooncake's setup() never reads MOONCAKE_CONFIG_PATH (only MooncakeConfig does):
    a file naming an unreachable master changes nothing."""
    clean_env.setenv("MOONCAKE_CONFIG_PATH", write_json(tmp_path, {
        "local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": "127.0.0.1:1", "protocol": "rdma"}))
    s = MooncakeDistributedStore()
    assert s.setup(setup_dict(master, global_segment_size=0)) == 0
    s.close()


# ===================================================================== key types

BAD_KEYS = [None, 12345, 1.5, ["a"], ("a",), {"a": 1}, object()]
BAD_KEY_LISTS = [None, 5, "abc", b"abc", (k for k in ["a"]), {"a"}, {"a": 1},
                 ["a", None], ["a", 1], [["a"]], [b"a", 2.0]]


def single_key_calls(s, key):
    buf = numpy.zeros(16, dtype=numpy.uint8)
    p = buf.ctypes.data
    return [lambda: s.put(key, b"v"), lambda: s.get(key), lambda: s.remove(key),
            lambda: s.remove(key, force=True), lambda: s.is_exist(key),
            lambda: s.get_size(key), lambda: s.remove_by_regex(key),
            lambda: s.put_from(key, p, 1), lambda: s.get_into(key, p, 16),
            lambda: s.get_into_ranges([p], [[key]], [[[0]]], [[[0]]], [[[1]]])]


def batch_key_calls(s, keys):
    buf = numpy.zeros(16, dtype=numpy.uint8)
    p = buf.ctypes.data
    return [lambda: s.batch_put_from(keys, [p], [1]), lambda: s.batch_get_into(keys, [p], [16]),
            lambda: s.batch_is_exist(keys), lambda: s.batch_remove(keys),
            lambda: s.batch_remove(keys, force=True),
            lambda: s.get_into_ranges([p], [keys], [[[0]]], [[[0]]], [[[1]]])]


def expect_type_errors(s):
    for key in BAD_KEYS:
        for i, call in enumerate(single_key_calls(s, key)):
            with pytest.raises(TypeError):
                call()
                pytest.fail(f"single-key call {i} accepted key {key!r}")
    for keys in BAD_KEY_LISTS:
        for i, call in enumerate(batch_key_calls(s, keys)):
            with pytest.raises(TypeError):
                call()
                pytest.fail(f"batch call {i} accepted keys {keys!r}")


def test_keys_type_errors_before_setup():
    expect_type_errors(MooncakeDistributedStore())


def test_keys_type_errors_after_setup(tcp_store):
    s = tcp_store
    expect_type_errors(s)
    # nothing was stored under the keys' str() forms (the old behaviour)
    for name in ("None", "12345", "1.5", "['a']", "('a',)", "{'a': 1}"):
        assert s.is_exist(name) == 0
    assert s.batch_is_exist(["None", "12345", "['a']"]) == [0, 0, 0]


def test_keys_accepted_types(tcp_store):
    s = tcp_store

    class Name(str):
        pass

    assert s.put("kt-str", b"1") == 0
    assert s.put(b"kt-bytes", b"2") == 0
    assert s.put(bytearray(b"kt-bytearray"), b"3") == 0
    assert s.put(Name("kt-sub"), b"4") == 0
    assert s.put("kt-ünï", b"5") == 0
    assert s.get(b"kt-str") == b"1" and s.get("kt-bytes") == b"2"
    assert s.get(bytearray(b"kt-sub")) == b"4" and s.get("kt-ünï".encode()) == b"5"
    # tuples and other sequences of str/bytes for batches, as pybind11's list caster
    assert s.batch_is_exist(("kt-str", b"kt-bytes", bytearray(b"kt-bytearray"), "no")) == \
        [1, 1, 1, 0]
    assert s.batch_is_exist(numpy.array(["kt-str", "kt-sub"])) == [1, 1]
    assert s.batch_is_exist([]) == []
    # NUL stays a bad argument (-600), not a TypeError
    assert s.put("kt\0nul", b"x") == -600
    assert s.batch_remove(["kt-str", "kt\0nul"]) == [-600, -600]
    assert s.batch_remove(("kt-str", b"kt-bytes", "kt-bytearray", "kt-sub", "kt-ünï"),
                          True) == [0] * 5


# ============================================ protocol rdma on this machine (no device)

def has_rdma_device():
    try:
        return bool(os.listdir("/sys/class/infiniband"))
    except OSError:
        return False


RDMA_PROBE = textwrap.dedent("""
    import os, sys
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                  "global_segment_size": 16 << 20, "local_buffer_size": 4 << 20,
                  "protocol": "rdma", "rdma_devices": sys.argv[2],
                  "master_server_addr": sys.argv[1]})
    print("RC", rc, s.health_check(), repr(s.get_hostname()), flush=True)
""")

REASONS = ("no RDMA device found", "cannot load libibverbs", "no verbs transport",
           "is not on this node", "no usable RDMA device")


@pytest.mark.parametrize("devices", ["", "mlx5_0"])
def test_rdma_without_device_fails_in_one_line(master, devices):
    """In a fresh process (the verbs glue loads once per process, and this one must be
    the real libibverbs): -600, one line naming what is missing and the tcp alternative,
    nothing repeated by the engine, store.client or mooncake.store."""
    if has_rdma_device():
        pytest.skip("this node has an RDMA device")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TIDETEST_", "VDBL_"))}  # the real libibverbs
    r = subprocess.run([sys.executable, "-c", RDMA_PROBE, master, devices], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # -600 INVALID_PARAMS, nothing half set up, no fall-back to tcp
    assert "RC -600 1 ''" in r.stdout, r.stdout + r.stderr
    lines = tide_lines(r.stderr)
    why = [ln for ln in lines if any(x in ln for x in REASONS)]
    assert len(why) == 1, r.stderr
    assert "protocol tcp" in why[0] or "MOONCAKE_PROTOCOL=tcp" in why[0], r.stderr
    if devices:
        assert "no RDMA device found" in why[0] or "'mlx5_0'" in why[0], r.stderr
    # the layers above the engine do not repeat it
    assert not [ln for ln in lines if "mooncake.store" in ln or "store.client" in ln], \
        r.stderr
    assert len(lines) == 1, r.stderr  # one line in all


def test_rdma_through_tcp_agent_is_refused(master, tmp_path, capfd):
    node = os.environ.get("STORE_TEST_NODE_BIN")
    if not node:
        pytest.fail("STORE_TEST_NODE_BIN not set (the tide-node binary; meson sets it)")
    sock = str(tmp_path / "agent.sock")
    env = dict(os.environ, MOONCAKE_MASTER=master, MOONCAKE_LOCAL_HOSTNAME="127.0.0.1",
               MOONCAKE_PROTOCOL="tcp", MOONCAKE_GLOBAL_SEGMENT_SIZE=str(64 * MiB),
               TIDE_NODE_ENV=os.devnull)
    env.pop("TIDE_AGENT", None)
    log = open(tmp_path / "agent.log", "w")
    p = subprocess.Popen([node, "--socket", sock], env=env, stdout=log,
                         stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(sock):
            assert p.poll() is None and time.monotonic() < deadline, \
                open(tmp_path / "agent.log").read()
            time.sleep(0.05)
        saved = {k: os.environ.get(k) for k in ("TIDE_AGENT", "TIDE_AGENT_SOCKET")}
        os.environ.update(TIDE_AGENT="required", TIDE_AGENT_SOCKET=sock)
        try:
            capfd.readouterr()
            s = MooncakeDistributedStore()
            assert s.setup(setup_dict(master, protocol="rdma", global_segment_size=0)) == -600
            assert s.health_check() == 1
            err = capfd.readouterr().err
            why = [ln for ln in tide_lines(err) if "protocol 'rdma'" in ln]
            assert len(why) == 1 and "runs 'tcp'" in why[0], err
            assert "mooncake.store" not in err, err
            # the same agent serves protocol tcp
            t = MooncakeDistributedStore()
            assert t.setup(setup_dict(master, global_segment_size=0)) == 0
            assert t.put("agent-tcp", b"fine") == 0 and t.get("agent-tcp") == b"fine"
            t.close()
        finally:
            restore_env(saved)
    finally:
        p.terminate()
        p.wait(timeout=10)
        log.close()


def test_unknown_protocol_is_refused(master, capfd):
    s = MooncakeDistributedStore()
    assert s.setup(setup_dict(master, protocol="dpdk")) == -600
    err = capfd.readouterr().err
    assert "protocol 'dpdk' is not supported" in err and "'tcp' or 'rdma'" in err


# ==================================== protocol rdma in-process over the verbs double

class VdblStats(ctypes.Structure):
    """struct vdbl_stats (tests/lib/verbs_double/vdbl.h)."""
    _fields_ = [(n, ctypes.c_uint) for n in (
        "open_device", "reg_mr", "dereg_mr", "create_qp", "destroy_qp", "modify_qp",
        "post_send_calls", "wrs_posted", "wrs_executed", "wcs_generated", "wcs_error",
        "live_ctx", "live_pd", "live_mr", "live_cq", "live_qp")]


@pytest.fixture(scope="module")
def vdbl():
    """pmd/verbs' test seam: the double's library instead of libibverbs, with two RoCE
    devices. Set before the first rdma setup of this process (the glue loads once)."""
    so = os.environ.get("STORE_TEST_VDBL_SO")
    if not so:
        pytest.skip("STORE_TEST_VDBL_SO not set (build without the verbs path)")
    os.environ["TIDETEST_VERBS_GLUE"] = so
    os.environ["VDBL_DEVICES"] = "dbl_a0:10.0.0.1,dbl_b0:10.0.0.2"
    lib = ctypes.CDLL(so)  # the same loaded copy pmd/verbs dlopen()s: shared state
    lib.vdbl_stats_get.argtypes = [ctypes.POINTER(VdblStats)]
    lib.vdbl_stats_get.restype = None

    def stats():
        st = VdblStats()
        lib.vdbl_stats_get(ctypes.byref(st))
        return st

    yield stats
    # Leave no devices behind for later tests of this process (e.g. a whole-directory
    # pytest run): rdma there must fail as on a node without a device.
    lib.vdbl_reset()
    for k in ("TIDETEST_VERBS_GLUE", "VDBL_DEVICES", "MOONCAKE_DEVICE"):
        os.environ.pop(k, None)


@pytest.fixture(scope="module")
def rdma_pair(master, vdbl):
    """A: contributes a segment, over dbl_a0. B: a pure client over dbl_b0, so every
    put and get of B crosses the double's RC queue pairs into A's segment."""
    a, b = MooncakeDistributedStore(), MooncakeDistributedStore()
    assert a.setup(setup_dict(master, protocol="rdma", rdma_devices="dbl_a0",
                              global_segment_size=64 * MiB, local_buffer_size=16 * MiB)) == 0
    assert b.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "rdma", "dbl_b0", master) == 0
    yield a, b
    b.close()
    a.close()


def pattern(n, seed):
    return numpy.random.default_rng(seed).integers(0, 256, n, dtype=numpy.uint8).tobytes()


def placed_on(store):
    """A ReplicateConfig placing on store's segment (other segments of this master, e.g.
    tcp_store's, are reachable over TCP and would bypass the double)."""
    cfg = ReplicateConfig()
    cfg.preferred_segment = store.get_hostname()
    return cfg


def test_rdma_double_put_get(rdma_pair, vdbl):
    a, b = rdma_pair
    assert a.health_check() == 0 and b.health_check() == 0
    assert a.get_hostname() and b.get_hostname() and a.get_hostname() != b.get_hostname()
    first = vdbl()
    sizes = [1, 255, 4095, 4096, 65537, MiB + 3, 8 * MiB]
    for i, n in enumerate(sizes):
        data = pattern(n, i)
        w0 = vdbl().wrs_executed
        assert b.put(f"rdma/b/{i}", data, config=placed_on(a)) == 0  # RDMA WRITE into A
        w1 = vdbl().wrs_executed
        assert b.get(f"rdma/b/{i}") == data  # RDMA READ back, every byte compared
        w2 = vdbl().wrs_executed
        assert w1 > w0 and w2 > w1, (n, w0, w1, w2)
        assert a.get(f"rdma/b/{i}") == data  # A reads its own segment
        assert b.get_size(f"rdma/b/{i}") == n and b.is_exist(f"rdma/b/{i}") == 1
    for i, n in enumerate(sizes):
        data = pattern(n, 100 + i)
        assert a.put(f"rdma/a/{i}", data, config=placed_on(a)) == 0
        w0 = vdbl().wrs_executed
        assert b.get(f"rdma/a/{i}") == data  # RDMA READ of A's put
        assert vdbl().wrs_executed > w0
    last = vdbl()
    # 8 MiB crossed in slices: many WRs, none failed
    assert last.wrs_executed - first.wrs_executed >= 3 * (8 * MiB) // (1 * MiB)
    assert last.wcs_error == first.wcs_error
    assert last.live_qp > 0
    assert b.batch_remove([f"rdma/{w}/{i}" for w in "ab" for i in range(len(sizes))],
                          True) == [0] * (2 * len(sizes))


def test_rdma_double_zero_copy_batches(rdma_pair, vdbl):
    a, b = rdma_pair
    n, count = 300000, 4
    src = numpy.frombuffer(pattern(n * count, 7), dtype=numpy.uint8).copy()
    dst = numpy.zeros(n * count, dtype=numpy.uint8)
    assert b.register_buffer(src.ctypes.data, src.nbytes) == 0
    assert b.register_buffer(dst.ctypes.data, dst.nbytes) == 0
    keys = [f"rdma/zc/{i}" for i in range(count)]
    before = vdbl()
    assert b.batch_put_from(keys, [src.ctypes.data + i * n for i in range(count)],
                            [n] * count, config=placed_on(a)) == [0] * count
    assert b.batch_get_into(keys, [dst.ctypes.data + i * n for i in range(count)],
                            [n] * count) == [n] * count
    assert numpy.array_equal(src, dst)
    part = numpy.zeros(64, dtype=numpy.uint8)
    assert b.get_into_ranges([part.ctypes.data], [[keys[1], keys[2]]],
                             [[[0, 16], [32]]], [[[5, 1000], [n - 32]]],
                             [[[16, 16], [32]]]) == [[[16, 16], [32]]]
    assert part.tobytes() == (src[n + 5:n + 21].tobytes() + src[n + 1000:n + 1016].tobytes()
                              + src[3 * n - 32:3 * n].tobytes())
    assert vdbl().wrs_executed > before.wrs_executed
    assert b.batch_remove(keys, True) == [0] * count
    assert b.unregister_buffer(src.ctypes.data) == 0
    assert b.unregister_buffer(dst.ctypes.data) == 0


def test_rdma_double_config_replicas(rdma_pair):
    a, b = rdma_pair
    cfg = placed_on(a)
    cfg.group_ids = ["structured-abc"]
    data = pattern(70000, 9)
    assert b.put("rdma/cfg", data, config=cfg) == 0
    assert b.get("rdma/cfg") == data
    assert b.remove("rdma/cfg", force=True) == 0
    assert b.get("rdma/cfg") == b""


def test_rdma_double_device_from_environment(master, vdbl, monkeypatch, capfd):
    """No rdma_devices key: MOONCAKE_DEVICE (the node environment) names the device."""
    monkeypatch.setenv("MOONCAKE_DEVICE", "dbl_b0")
    c = MooncakeDistributedStore()
    cfg = setup_dict(master, protocol="rdma", global_segment_size=0)
    del cfg["rdma_devices"]
    assert c.setup(cfg) == 0
    c.close()
    # an explicit rdma_devices wins over MOONCAKE_DEVICE
    monkeypatch.setenv("MOONCAKE_DEVICE", "mlx5_7")
    c = MooncakeDistributedStore()
    assert c.setup(setup_dict(master, protocol="rdma", rdma_devices="dbl_a0",
                              global_segment_size=0)) == 0
    c.close()
    capfd.readouterr()
    c = MooncakeDistributedStore()
    assert c.setup(cfg) == -600  # MOONCAKE_DEVICE=mlx5_7, which the node lacks
    err = capfd.readouterr().err
    why = [ln for ln in tide_lines(err) if "'mlx5_7'" in ln]
    assert len(why) == 1, err
    assert "dbl_a0, dbl_b0" in why[0] and "protocol tcp" in why[0], err
    assert not [ln for ln in tide_lines(err) if "mooncake.store" in ln or "store.client" in ln]


def test_rdma_double_missing_named_device(master, vdbl, capfd):
    capfd.readouterr()
    for devices in ("mlx5_9", "dbl_a0,mlx5_9"):
        c = MooncakeDistributedStore()
        assert c.setup(setup_dict(master, protocol="rdma", rdma_devices=devices,
                                  global_segment_size=0)) == -600
        assert c.health_check() == 1 and c.get_hostname() == ""
    err = capfd.readouterr().err
    why = [ln for ln in tide_lines(err) if "'mlx5_9'" in ln]
    assert len(why) == 2 and all("protocol tcp" in ln for ln in why), err
    # "auto-discovery" and "" are Mooncake's "every device"
    for devices in ("", "auto-discovery"):
        c = MooncakeDistributedStore()
        assert c.setup(setup_dict(master, protocol="rdma", rdma_devices=devices,
                                  global_segment_size=0)) == 0
        c.close()


def test_rdma_through_rdma_agent_over_double(master, tmp_path):
    """protocol rdma through a node agent (tide-node) that runs rdma: here over the
    double too (the seam works in any process), attached from this process."""
    so, node = os.environ.get("STORE_TEST_VDBL_SO"), os.environ.get("STORE_TEST_NODE_BIN")
    if not so or not node:
        pytest.skip("needs STORE_TEST_VDBL_SO and STORE_TEST_NODE_BIN")
    sock = str(tmp_path / "rdma-agent.sock")
    env = dict(os.environ, MOONCAKE_MASTER=master, MOONCAKE_LOCAL_HOSTNAME="127.0.0.1",
               MOONCAKE_PROTOCOL="rdma", MOONCAKE_DEVICE="dbl_n0",
               MOONCAKE_GLOBAL_SEGMENT_SIZE=str(64 * MiB), TIDE_NODE_ENV=os.devnull,
               TIDETEST_VERBS_GLUE=so, VDBL_DEVICES="dbl_n0:10.0.1.1")
    env.pop("TIDE_AGENT", None)
    log_path = tmp_path / "rdma-agent.log"
    log = open(log_path, "w")
    p = subprocess.Popen([node, "--socket", sock], env=env, stdout=log,
                         stderr=subprocess.STDOUT)
    saved = {k: os.environ.get(k) for k in ("TIDE_AGENT", "TIDE_AGENT_SOCKET")}
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(sock):
            assert p.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        os.environ.update(TIDE_AGENT="required", TIDE_AGENT_SOCKET=sock)
        c = MooncakeDistributedStore()
        assert c.setup(setup_dict(master, protocol="rdma", global_segment_size=0,
                                  local_buffer_size=8 * MiB)) == 0
        # On the agent's own segment: the double is in-memory, so it connects queue
        # pairs within one process only (the agent's), never to this process's devices.
        data = pattern(3 * MiB + 7, 11)
        assert c.put("rdma-agent/x", data, config=placed_on(c)) == 0
        assert c.get("rdma-agent/x") == data
        assert c.remove("rdma-agent/x", force=True) == 0
        c.close()
        assert "TEST SEAM" in log_path.read_text()  # the agent said loudly what it runs
    finally:
        restore_env(saved)
        p.terminate()
        p.wait(timeout=10)
        log.close()
