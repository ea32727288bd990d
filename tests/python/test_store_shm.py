"""Same-host peers (TIDE_SHM_PEERS): a store client whose engine runs kernel TCP maps the
segment of a holder process on this host (a sealed memory file) and copies with memcpy
instead of going through loopback TCP. Holder and clients are separate processes, as in
Miles' guide's set-up; every byte is compared.

  * the default maps the holder's segment (the client's /proc/self/maps shows the file)
    and every call family moves the right bytes;
  * TIDE_SHM_PEERS=false keeps to TCP (nothing mapped), same bytes;
  * a holder the client may not open (not dumpable) is reached over TCP, same bytes;
  * a holder that is killed: reads and writes fail as with a broken connection, never
    returning the dead holder's bytes or reporting a write into its memory as done.

Environment (set by meson): STORE_TEST_MASTER_BIN, LIBTIDESTORE, PYTHONPATH.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

if __name__ != "__main__":  # roles keep what the test gave them (TIDE_SHM_PEERS)
    for k in [k for k in os.environ if k.startswith(("TIDE_", "MOONCAKE_"))]:
        del os.environ[k]
    os.environ["MC_FORCE_TCP"] = "1"
    os.environ["TIDE_AGENT"] = "off"

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
SIZES = [4096, 64 << 10, MiB, 5 * MiB + 17]
PR_SET_DUMPABLE = 4


def setup_store(master, seg):
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", seg, 16 * MiB, "tcp", "", master)
    if rc != 0:
        raise SystemExit(f"setup failed: {rc}")
    return s


def mapped_segments():
    """Mappings of a holder's segment file in this process."""
    with open("/proc/self/maps") as f:
        return [ln for ln in f if "memfd:tide-segment" in ln]


# ------------------------------------------------------------------ child roles

def role_holder(master, mode):
    if mode == "nodump":
        # The kernel then refuses other processes /proc/<pid>/fd of this one.
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise SystemExit(f"prctl: errno {ctypes.get_errno()}")
    s = setup_store(master, 64 * MiB)
    print("ready", flush=True)
    sys.stdin.read()
    s.close()


def role_client(master, tag, drop=False):
    """Put and read back every size through each call family; print what happened.
    drop: run as nobody (a root client may open any process's files)."""
    if drop and os.getuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    s = setup_store(master, 0)
    out = {"bad": [], "mapped": 0}
    dst = ctypes.create_string_buffer(max(SIZES))
    da = ctypes.addressof(dst)
    if s.register_buffer(da, max(SIZES)) != 0:
        raise SystemExit("register_buffer")
    for n in SIZES:
        pat = os.urandom(n)
        k = f"{tag}-{n}"
        if s.put(k, pat) != 0:
            out["bad"].append(f"put {n}")
            continue
        if s.get(k) != pat:
            out["bad"].append(f"get {n}")
        ctypes.memset(da, 0, n)
        if s.get_into(k, da, n) != n or dst.raw[:n] != pat:
            out["bad"].append(f"get_into {n}")
        src = ctypes.create_string_buffer(pat, n)
        if s.put_from(k + "-f", ctypes.addressof(src), n) != 0:
            out["bad"].append(f"put_from {n}")
        elif s.get(k + "-f") != pat:
            out["bad"].append(f"get after put_from {n}")
    keys = [f"{tag}-b{i}" for i in range(8)]
    vals = [os.urandom(3000 + 997 * i) for i in range(8)]
    if s.put_batch(keys, vals) != 0:
        out["bad"].append("put_batch")
    got = s.get_batch(keys)
    if list(got) != vals:
        out["bad"].append("get_batch")
    out["mapped"] = len(mapped_segments())
    s.unregister_buffer(da)
    s.close()
    print(json.dumps(out), flush=True)


# ------------------------------------------------------------------ harness

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
from storecluster import end_role as end  # noqa: E402 (close stdin, wait, kill past 30 s)

if __name__ != "__main__":
    from test_store import master  # noqa: E402,F401 (the fixture: a master, eviction off)


def spawn(args, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), *args], env=e,
                            stdout=subprocess.PIPE, text=True, **kw)


def expect_ready(p, what, deadline_s=60):
    t0 = time.monotonic()
    line = p.stdout.readline()
    assert line.strip() == "ready", f"{what}: {line!r} after {time.monotonic() - t0:.1f} s"


def holder(master, mode="plain"):
    p = spawn(["holder", master, mode], stdin=subprocess.PIPE)
    expect_ready(p, "holder")
    return p


def client(master, tag, env=None, drop=False):
    p = spawn(["client", master, tag] + (["drop"] if drop else []), env)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_same_host_segment_is_mapped(master):
    h = holder(master)
    try:
        r = client(master, "map")
        assert r["bad"] == []
        assert r["mapped"] >= 1, "the holder's segment was not mapped"
    finally:
        end(h)


def test_shm_peers_false_keeps_tcp(master):
    h = holder(master)
    try:
        r = client(master, "tcp", {"TIDE_SHM_PEERS": "false"})
        assert r["bad"] == [] and r["mapped"] == 0, r
    finally:
        end(h)


def test_unopenable_holder_is_reached_over_tcp(master):
    h = holder(master, "nodump")
    try:
        # Not dumpable: another process of the same user may not open its files; a
        # root client could, so the client runs as nobody then.
        r = client(master, "nodump", drop=True)
        assert r["bad"] == [] and r["mapped"] == 0, r
    finally:
        end(h)


def test_killed_holder_fails_like_a_broken_connection(master):
    h = holder(master)
    s = setup_store(master, 0)
    try:
        pat = os.urandom(MiB)
        assert s.put("dead-1", pat) == 0
        assert s.get("dead-1") == pat
        assert mapped_segments(), "not mapped: this case would test TCP"
        h.send_signal(signal.SIGKILL)
        h.wait(timeout=30)
        # The master still lists the object until the holder's lease runs out; the read
        # must fail rather than hand back what the dead process's file still holds.
        assert s.get("dead-1") == b""
        buf = ctypes.create_string_buffer(MiB)
        assert s.get_into("dead-1", ctypes.addressof(buf), MiB) < 0
        # A put placed in the dead holder's segment must not be reported stored.
        assert s.put("dead-2", pat) != 0
    finally:
        s.close()
        end(h)


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "holder":
        role_holder(sys.argv[2], sys.argv[3])
    elif role == "client":
        role_client(sys.argv[2], sys.argv[3], drop=sys.argv[4:] == ["drop"])
    else:
        raise SystemExit(f"unknown role {role}")
