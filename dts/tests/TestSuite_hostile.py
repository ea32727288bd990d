"""Functional suite: hostile peers cannot crash, stall or exhaust a Tide service (issue 20).

Topology: one host, loopback. One `mooncake_master` (RPC, admin HTTP port and the HTTP
metadata server, short HTTP deadlines) and one `tide-node` agent on kernel TCP whose
segment is mounted at that master. Every peer here is written in Python from the wire
formats (store/client/agent_proto.h, /work/shared/spec/mooncake-master.md sections 1-2):
the hostile ones and the valid client each case ends with, so the suite runs unchanged
under sanitizers (where Python cannot load libtidestore).

Each case measures the attacked process in /proc before and after (VmRSS, open fds),
checks that it is still running and serves a valid client, and bounds the growth:
  1. agent: a memfd mapped, shrunk to 0, then PUT from (was SIGBUS: agent and segment lost);
  2. agent: descriptors passed with refused requests (was one fd leaked per request);
  3. master: regex patterns that exploded glibc's regcomp, catastrophic backtracking,
     and the ECMAScript syntax stock clients write (was 1.17 GB in 2.8 s, table locked);
  4. master HTTP: hundreds of idle connections on both ports, slow and oversized bodies
     (was: /health refused and metadata lookups EOF while 256 were held);
  5. Tide's user-space TCP stack (tide-net on af_packet over a veth into a namespace of its
     own): a SYN flood past the listen backlog (was: every later client refused for ~127 s).
  6. who may connect: the master's --allow_networks and the node's TIDE_ALLOW_NETS close a
     connection from another address at accept, and the node listens on its host only (was:
     the engine's handshake and data ports on 0.0.0.0, any peer could read the segment).
"""
import fcntl
import mmap
import os
import re
import signal
import socket
import struct
import subprocess
import time

from framework.test_suite import TestSuite

# Agent protocol (store/client/agent_proto.h).
AGENT_MAGIC = 0x41444954
AGENT_VERSION = 1
OP_HELLO, OP_MAP, OP_PUT, OP_GET, OP_HEALTH = 1, 2, 4, 5, 12
EPERM = 1

# coro_rpc (spec 1.1-1.4, 2.4): function ids and argument type hashes.
FN_SERVICE_READY = 0x7b81bb56
FN_GET_BY_REGEX = 0xfe6af93c
FN_REMOVE_BY_REGEX = 0xfccc1fd3
HASH_STR_STR = 0x7cf91ed8
HASH_STR_BOOL_STR = 0x18e89fee
EC_INVALID_PARAMS = -600

# Bounds on growth across one case (ASan builds included).
RSS_GROWTH_KB = 64 * 1024
FD_GROWTH = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_usage(pid):
    """(VmRSS KiB, open fds) of a process, from /proc."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionResetError("peer closed")
        buf += chunk
    return buf


def sealed_memfd(size, seal=True):
    fd = os.memfd_create("tide-dts", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if seal else 0))
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


class AgentConn:
    """A client of the node agent, speaking its wire format."""

    def __init__(self, path, timeout=10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.seq = 0

    def close(self):
        self.s.close()

    def send(self, op, body=b"", fd=None):
        self.seq += 1
        msg = struct.pack("<IHHII", AGENT_MAGIC, AGENT_VERSION, op, len(body), self.seq) + body
        if fd is None:
            self.s.sendall(msg)
        else:
            socket.send_fds(self.s, [msg], [fd])

    def recv(self):
        magic, _ver, op, length, seq = struct.unpack("<IHHII", recv_exact(self.s, 16))
        if magic != AGENT_MAGIC or seq != self.seq:
            raise AssertionError(f"bad reply header magic {magic:#x} seq {seq}")
        return op, recv_exact(self.s, length)

    def call(self, op, body=b"", fd=None):
        self.send(op, body, fd)
        return self.recv()[1]

    def closed_by_peer(self, timeout=10):
        """True when the agent closed this connection (EOF or reset)."""
        self.s.settimeout(timeout)
        try:
            return self.s.recv(1) == b""
        except ConnectionResetError:
            return True

    @staticmethod
    def s32(b, off=0):
        return struct.unpack_from("<i", b, off)[0]

    def hello(self):
        body = self.call(OP_HELLO, struct.pack("<II", AGENT_VERSION, os.getpid()))
        if self.s32(body) != 0:
            raise AssertionError(f"hello refused: {self.s32(body)}")

    def map(self, fd, size):
        body = self.call(OP_MAP, struct.pack("<Q", size), fd)
        rc, region = struct.unpack_from("<iI", body)
        return rc, region

    @staticmethod
    def _key_loc(key, region, off, size):
        k = key.encode()
        return struct.pack("<I", len(k)) + k + struct.pack("<IQQ", region, off, size)

    def put(self, key, region, off, size):
        # u32 n, replicate config (defaults), {key, loc}
        rc_cfg = struct.pack("<IBBIIB", 1, 0, 0, 0, 0, 0)
        body = self.call(OP_PUT, struct.pack("<I", 1) + rc_cfg +
                         self._key_loc(key, region, off, size))
        return self.s32(body), self.s32(body, 4)

    def get(self, key, region, off, size):
        body = self.call(OP_GET, struct.pack("<I", 1) + self._key_loc(key, region, off, size))
        return self.s32(body), struct.unpack_from("<q", body, 4)[0]

    def health(self):
        return struct.unpack("<q", self.call(OP_HEALTH))[0]


def sp_value_offset(body):
    """Offset of the value after a struct_pack root's type hash and metainfo (spec 2.5)."""
    h = struct.unpack_from("<I", body)[0]
    off = 4
    if h & 1:
        m = body[off]
        off += 1
        if m & 3:
            off += 2 << ((m & 3) - 1)
        if m & 4:
            off = body.index(b"\0", off) + 1
    return off


def rpc_str(s):
    b = s.encode() if isinstance(s, str) else s
    if len(b) > 255:
        raise ValueError("1-byte lengths only")
    return bytes([len(b)]) + b


class MasterRpc:
    """coro_rpc requests to the master, one at a time."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.seq = 0

    def close(self):
        self.s.close()

    def call(self, fn, body=b""):
        self.seq += 1
        self.s.sendall(struct.pack("<BBBBIIII", 0x15, 0, 0, 0, self.seq, fn, len(body), 0) + body)
        _magic, _ver, err, _mt, seq, length, attach = struct.unpack(
            "<BBBBIII", recv_exact(self.s, 16))
        if seq != self.seq:
            raise AssertionError(f"answer seq {seq}, expected {self.seq}")
        return err, recv_exact(self.s, length + attach)

    def service_ready(self):
        err, body = self.call(FN_SERVICE_READY)
        # expected<string>: has_value 1, then "2.0.0"
        return err == 0 and body[sp_value_offset(body)] == 1 and body.endswith(b"2.0.0")

    def get_by_regex(self, pattern):
        """(ok, error code or None, body) of GetReplicaListByRegex."""
        err, body = self.call(FN_GET_BY_REGEX,
                              struct.pack("<I", HASH_STR_STR) + rpc_str(pattern) + rpc_str(""))
        if err != 0:
            raise AssertionError(f"coro_rpc error {err}")
        off = sp_value_offset(body)
        if body[off] == 1:
            return True, None, body
        return False, struct.unpack_from("<i", body, off + 1)[0], body

    def remove_by_regex(self, pattern, force=True):
        """(ok, count or error code) of RemoveByRegex."""
        err, body = self.call(FN_REMOVE_BY_REGEX,
                              struct.pack("<I", HASH_STR_BOOL_STR) + rpc_str(pattern) +
                              bytes([1 if force else 0]) + rpc_str(""))
        if err != 0:
            raise AssertionError(f"coro_rpc error {err}")
        off = sp_value_offset(body)
        if body[off] == 1:
            return True, struct.unpack_from("<q", body, off + 1)[0]
        return False, struct.unpack_from("<i", body, off + 1)[0]


def http_request(port, method, target, body=b"", timeout=5):
    """One HTTP/1.1 request on a new connection: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
                  .encode() + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    if not data:
        return None, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


class TestHostile(TestSuite):
    @classmethod
    def set_up_all(cls):
        cls.procs = []
        cls.rpc_port = free_port()
        cls.master_log = os.path.join(cls.tmp, "master.log")
        log = open(cls.master_log, "w")
        env = cls.tool_env()
        cls.master = subprocess.Popen(
            [cls.tool("master/mooncake_master"), "--rpc_port", str(cls.rpc_port),
             "--rpc_address", "127.0.0.1", "--metrics_port", "0", "--metrics_host", "127.0.0.1",
             "--enable_http_metadata_server", "--http_metadata_server_port", "0",
             "--http_metadata_server_host", "127.0.0.1",
             # Short deadlines so the case can watch them act.
             "--http_header_timeout=2s", "--http_idle_timeout=1s", "--http_body_timeout=3s"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
        cls.procs.append((cls.master, log))
        cls.wait_until(lambda: cls.alive(cls.master, cls.master_log) and
                       "HTTP metadata server on" in cls.read(cls.master_log),
                       30, "mooncake_master to serve its ports")
        text = cls.read(cls.master_log)
        cls.admin_port = int(re.search(r"metrics HTTP on [0-9.]+:(\d+)", text).group(1))
        cls.meta_port = int(re.search(r"HTTP metadata server on [0-9.]+:(\d+)", text).group(1))

        cls.sock = os.path.join(cls.tmp, "agent.sock")
        node_env = cls.write("node.env", "\n".join([
            f"MOONCAKE_MASTER=127.0.0.1:{cls.rpc_port}",
            "MOONCAKE_LOCAL_HOSTNAME=127.0.0.1",
            "MOONCAKE_PROTOCOL=tcp",
            "MOONCAKE_TE_META_DATA_SERVER=P2PHANDSHAKE",
            "MOONCAKE_GLOBAL_SEGMENT_SIZE=64mb",
            f"TIDE_AGENT_SOCKET={cls.sock}",
            "TIDE_LOG_LEVEL=warn",
            "MC_FORCE_TCP=1",
        ]) + "\n")
        cls.agent_log = os.path.join(cls.tmp, "agent.log")
        log = open(cls.agent_log, "w")
        cls.agent = subprocess.Popen(
            [cls.tool("node/tide-node"), "--env", node_env, "--foreground"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
        cls.procs.append((cls.agent, log))
        cls.wait_until(lambda: cls.alive(cls.agent, cls.agent_log) and
                       "tide-node: ready" in cls.read(cls.agent_log), 60, "tide-node to be ready")

    @classmethod
    def tear_down_all(cls):
        for p, log in reversed(cls.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()

    @staticmethod
    def read(path):
        with open(path) as f:
            return f.read()

    @classmethod
    def alive(cls, p, log):
        if p.poll() is not None:
            raise AssertionError(f"process exited {p.returncode}:\n{cls.read(log)[-4000:]}")
        return True

    def bounded(self, what, before, after):
        print(f"\n    {what}: VmRSS {before[0]} -> {after[0]} KiB, fds {before[1]} -> {after[1]}",
              end="", flush=True)
        self.verify(after[0] - before[0] < RSS_GROWTH_KB,
                    f"{what}: RSS grew {after[0] - before[0]} KiB")
        self.verify(after[1] - before[1] <= FD_GROWTH,
                    f"{what}: {after[1] - before[1]} more open fds")

    # -- a valid agent client ----------------------------------------------------------------

    def agent_client(self, size=1 << 20):
        """A hello'd connection with one sealed region mapped: (conn, memfd, mmap, region)."""
        c = AgentConn(self.sock)
        c.hello()
        fd = sealed_memfd(size)
        m = mmap.mmap(fd, size)
        rc, region = c.map(fd, size)
        self.verify(rc == 0, f"MAP of a sealed memfd refused: {rc}")
        return c, fd, m, region

    def roundtrip(self, key, payload):
        """Put then get payload through a fresh valid client; returns what came back."""
        c, fd, m, region = self.agent_client()
        try:
            m[0:len(payload)] = payload
            rc, krc = c.put(key, region, 0, len(payload))
            self.verify(rc == 0 and krc == 0, f"put {key}: {rc} {krc}")
            m[0:len(payload)] = b"\0" * len(payload)
            rc, got = c.get(key, region, 4096, len(payload))
            self.verify(rc == 0 and got == len(payload), f"get {key}: {rc} {got}")
            self.verify(c.health() == 0, "agent health")
            return bytes(m[4096:4096 + len(payload)])
        finally:
            c.close()
            m.close()
            os.close(fd)

    # -- 1 -----------------------------------------------------------------------------------

    def test_1_agent_survives_shrunk_region(self):
        """Steps: a valid client stores an object; 20 hostile clients each MAP an unsealed
        memfd, shrink it to 0 and ask for a PUT from it; one more tries a plain file and one
        shrinks a sealed memfd.
        Verify: MAP of anything but a sealed memfd is refused (-EPERM), a sealed one cannot
        shrink; the agent is still running, the earlier object reads back intact, a new
        client stores and reads; agent RSS and fds bounded."""
        keep = os.urandom(65536)
        self.verify(self.roundtrip("hostile/keep", keep) == keep, "object before the attack")
        before = proc_usage(self.agent.pid)
        for _ in range(20):
            c = AgentConn(self.sock)
            c.hello()
            fd = sealed_memfd(1 << 20, seal=False)
            rc, _region = c.map(fd, 1 << 20)
            self.verify(rc == -EPERM, f"MAP of an unsealed memfd answered {rc}")
            os.ftruncate(fd, 0)
            try:
                answered = c.put("hostile/sigbus", 0, 0, 4096)
            except (ConnectionResetError, BrokenPipeError):
                answered = None
            self.verify(answered is None, f"PUT from a refused region answered {answered}")
            self.verify(c.closed_by_peer(), "the hostile connection stays open")
            c.close()
            os.close(fd)
        c = AgentConn(self.sock)
        c.hello()
        with open("/proc/self/exe", "rb") as f:
            rc, _ = c.map(f.fileno(), 4096)
        self.verify(rc == -EPERM, f"MAP of a regular file answered {rc}")
        fd = sealed_memfd(1 << 20)
        self.verify(c.map(fd, 1 << 20)[0] == 0, "MAP of a sealed memfd")
        try:
            os.ftruncate(fd, 0)
            self.fail("a sealed memfd shrank")
        except PermissionError:
            pass
        c.close()
        os.close(fd)
        self.alive(self.agent, self.agent_log)
        # Back to what it held before: the refused clients are gone (reaped at an accept).
        self.verify(self.roundtrip("hostile/after", b"x" * 8192) == b"x" * 8192, "new client")
        self.verify(self.roundtrip("hostile/keep", keep) == keep, "object after the attack")
        after = self.wait_until(
            lambda: (lambda u: u if u[1] <= before[1] + FD_GROWTH else None)(
                proc_usage(self.agent.pid)), 10, "the agent to release the hostile clients")
        self.bounded("agent, shrunk regions", before, after)
        self.verify("not sealed against shrinking" in self.read(self.agent_log),
                    "the refusal is logged")

    # -- 2 -----------------------------------------------------------------------------------

    def test_2_agent_closes_passed_fds(self):
        """Steps: 200 connections each pass a descriptor with a request the agent refuses:
        before HELLO, a MAP with a malformed body, an unknown op, a descriptor on a HEALTH.
        Verify: the agent's open fds return to where they were (was +200); it still serves a
        valid client; RSS bounded."""
        self.verify(self.roundtrip("hostile/fd0", b"a" * 4096) == b"a" * 4096, "before")
        before = proc_usage(self.agent.pid)
        for i in range(200):
            c = AgentConn(self.sock)
            fd = sealed_memfd(4096)
            kind = i % 4
            if kind == 0:
                c.send(OP_MAP, struct.pack("<Q", 4096), fd)       # before hello
            elif kind == 1:
                c.hello()
                c.send(OP_MAP, b"\x01", fd)                        # body too short
            elif kind == 2:
                c.hello()
                c.send(77, b"", fd)                                # no such op
            else:
                c.hello()
                self.verify(struct.unpack("<q", c.call(OP_HEALTH, b"", fd))[0] == 0,
                            "HEALTH with a descriptor")            # served; fd closed
                c.send(OP_MAP, b"", fd)                            # then a malformed MAP
            self.verify(c.closed_by_peer(), f"refused request {kind} left the connection open")
            c.close()
            os.close(fd)
        self.alive(self.agent, self.agent_log)
        self.verify(self.roundtrip("hostile/fd1", b"b" * 4096) == b"b" * 4096, "after")
        after = self.wait_until(
            lambda: (lambda u: u if u[1] <= before[1] + FD_GROWTH else None)(
                proc_usage(self.agent.pid)), 10,
            f"the agent's fds to come back to {before[1]} (now {proc_usage(self.agent.pid)[1]})")
        self.bounded("agent, 200 refused requests with descriptors", before, after)

    # -- 3 -----------------------------------------------------------------------------------

    def test_3_master_regex_bounded(self):
        """Steps: store hostile/key0..9 and a key of 30 'a's through the agent; send
        GetReplicaListByRegex and RemoveByRegex with ((a{1,100}){1,100}){1,100}, with a
        catastrophically backtracking pattern and with a syntax error; then the ECMAScript
        patterns a stock client writes.
        Verify: each hostile pattern is INVALID_PARAMS within 2 s and removes nothing; master
        RSS grows less than 64 MiB (was 1.17 GB); key\\d+ matches the ten keys, and
        RemoveByRegex ^hostile/key\\d+$ removes exactly them; ServiceReady still answers."""
        for i in range(10):
            self.roundtrip(f"hostile/key{i}", b"k" * 1024)
        self.roundtrip("hostile/" + "a" * 30, b"a" * 1024)
        rpc = MasterRpc(self.rpc_port)
        try:
            before = proc_usage(self.master.pid)
            # Nested counted repetition (glibc: 1.17 GB), catastrophic backtracking on the
            # 30-'a' key, a syntax error (INVALID_PARAMS as stock).
            for pattern in ["((a{1,100}){1,100}){1,100}", r"^hostile/(a+)+[bc]", "(unclosed"]:
                t0 = time.monotonic()
                ok, ec, _ = rpc.get_by_regex(pattern)
                self.verify(not ok and ec == EC_INVALID_PARAMS,
                            f"GetReplicaListByRegex {pattern[:40]!r}: ok={ok} ec={ec}")
                ok, ec = rpc.remove_by_regex(pattern)
                self.verify(not ok and ec == EC_INVALID_PARAMS,
                            f"RemoveByRegex {pattern[:40]!r}: ok={ok} ec={ec}")
                self.verify(time.monotonic() - t0 < 2.0,
                            f"{pattern[:40]!r} took {time.monotonic() - t0:.2f} s")
            after = proc_usage(self.master.pid)
            self.alive(self.master, self.master_log)
            self.verify(rpc.service_ready(), "ServiceReady after the hostile patterns")
            ok, _, body = rpc.get_by_regex(r"hostile/key\d+")
            self.verify(ok and all(f"hostile/key{i}".encode() in body for i in range(10)),
                        "key\\d+ matches the keys (ECMAScript, as stock)")
            ok, n = rpc.remove_by_regex(r"^hostile/key\d+$")
            self.verify(ok and n == 10, f"RemoveByRegex ^hostile/key\\d+$: ok={ok} n={n}")
            ok, _, body = rpc.get_by_regex(r"^hostile/a{30}$")
            self.verify(ok and b"hostile/" + b"a" * 30 in body, "the long key is still there")
        finally:
            rpc.close()
        self.bounded("master, hostile regexes", before, after)
        status, _ = http_request(self.admin_port, "GET", "/health")
        self.verify(status == 200, f"/health {status}")

    # -- 4 -----------------------------------------------------------------------------------

    def test_4_master_http_flood(self):
        """Steps: hold 300 silent connections to the admin port and 300 to the metadata port;
        ask /health on both, PUT and GET a metadata value; then 20 connections announce a
        4 MiB body and trickle it; one announces 100 MiB; keep our ends of all open.
        Verify: every valid request is answered (the least recently active connection makes
        room); the 100 MiB body is refused with 413 at once; the master closes the silent
        and trickling connections by their deadlines (its fds come back while we still hold
        ours); RSS bounded; /metrics counts evictions and timeouts."""
        before = proc_usage(self.master.pid)
        held = []
        try:
            for port in (self.admin_port, self.meta_port):
                for _ in range(300):
                    held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            t0 = time.monotonic()
            status, body = http_request(self.admin_port, "GET", "/health")
            self.verify(status == 200 and body == b"OK", f"admin /health: {status} {body!r}")
            status, body = http_request(self.meta_port, "GET", "/health")
            self.verify(status == 200, f"metadata /health: {status}")
            status, _ = http_request(self.meta_port, "PUT", "/metadata?key=hostile%2Fseg",
                                     b'{"ok":1}')
            self.verify(status == 200, f"metadata PUT: {status}")
            status, body = http_request(self.meta_port, "GET", "/metadata?key=hostile%2Fseg")
            self.verify(status == 200 and body == b'{"ok":1}', f"metadata GET: {status} {body!r}")
            print(f"\n    answered within {time.monotonic() - t0:.2f} s while 600 idle "
                  "connections were held", end="", flush=True)
            for _ in range(20):
                s = socket.create_connection(("127.0.0.1", self.meta_port), timeout=5)
                s.sendall(b"PUT /metadata?key=slow HTTP/1.1\r\nContent-Length: 4194304\r\n\r\n"
                          + b"x" * 1000)
                held.append(s)
            with socket.create_connection(("127.0.0.1", self.meta_port), timeout=5) as s:
                s.sendall(b"PUT /metadata?key=huge HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n")
                self.verify(s.recv(64).startswith(b"HTTP/1.1 413"), "100 MiB body not refused")
            for s in held[-20:]:
                s.sendall(b"x" * 100)
            during = proc_usage(self.master.pid)
            # The server closes them all while we still hold our ends.
            after = self.wait_until(
                lambda: (lambda u: u if u[1] <= before[1] + FD_GROWTH else None)(
                    proc_usage(self.master.pid)), 15,
                "the master to close the idle and trickling connections")
            self.alive(self.master, self.master_log)
            status, body = http_request(self.admin_port, "GET", "/metrics")
            self.verify(status == 200, f"/metrics {status}")
            text = body.decode()
            evicted = int(re.search(r"tide_master_http_evicted_connections_total (\d+)", text).group(1))
            timed = int(re.search(r"tide_master_http_timed_out_connections_total (\d+)", text).group(1))
            print(f"\n    during: VmRSS {during[0]} KiB, fds {during[1]}; "
                  f"{evicted} evicted, {timed} closed by deadlines", end="", flush=True)
            self.verify(evicted >= 600 - 64 - 256, f"{evicted} evicted")
            self.verify(timed >= 20, f"{timed} closed by a deadline")
        finally:
            for s in held:
                s.close()
        self.bounded("master, HTTP flood", before, after)
        rpc = MasterRpc(self.rpc_port)
        try:
            self.verify(rpc.service_ready(), "ServiceReady after the flood")
        finally:
            rpc.close()

    # -- 5 -----------------------------------------------------------------------------------

    def test_5_tide_stack_syn_flood(self):
        """Steps: tide-net (Tide's user-space stack, DPDK af_packet over a veth into a network
        namespace; listen backlog 128) sinks TCP; scapy in the namespace sends 1000 SYNs in
        about 1 s from 20 spoofed addresses of the subnet (nobody answers ARP for them, so
        every half-open connection keeps its backlog slot, as in a real flood); then a Linux
        socket from the namespace connects and sends 1 MiB; tools/tide-stats.py reads the
        live counters.
        Verify: the client connects at once (under 0.9 s: no SYN of it was dropped, Linux
        would resend one only after 1 s) with timestamps and window scaling, and its bytes
        arrive intact; the counters show the backlog overflowed, at least 800 SYNs answered
        with a cookie and one connection made from a cookie; tide-net exits 0 on SIGTERM."""
        if os.geteuid() != 0:
            self.skip("needs root for network namespaces")
        tag = os.getpid() % 100000
        ns, veth, peer_if = f"tide-hf{tag}", f"thf{tag}a", f"thf{tag}b"
        subnet = f"10.97.{tag % 250}"
        port = 5301
        prefix = f"tide-dts-hf{os.getpid()}"
        peer_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linux_peer.py")
        srv = None

        def in_ns(*cmd, timeout=60):
            return self.sh("ip", "netns", "exec", ns, *cmd, check=False, timeout=timeout)

        try:
            for c in [["ip", "netns", "add", ns],
                      ["ip", "link", "add", veth, "type", "veth", "peer", "name", peer_if],
                      ["ip", "link", "set", peer_if, "netns", ns],
                      ["ip", "-n", ns, "addr", "add", f"{subnet}.2/24", "dev", peer_if],
                      ["ip", "-n", ns, "link", "set", "lo", "up"],
                      ["ip", "-n", ns, "link", "set", peer_if, "up"],
                      ["ip", "link", "set", veth, "up"],
                      ["sysctl", "-qw", f"net.ipv6.conf.{veth}.disable_ipv6=1"],
                      # veth checksums are filled lazily; af_packet would hand them over unfilled.
                      ["ip", "netns", "exec", ns, "ethtool", "-K", peer_if, "tx", "off", "gro",
                       "off"]]:
                self.sh(*c)
            srv = self.start_tool("net/tide-net", "serve", "--port", str(port), env={
                "TIDE_HUGEPAGES": "off",
                # A 4096-frame ring: the PMD's default 512 overflowed (silently: 22.11's
                # af_packet counts no kernel drops) under the flood, 1 run in 2 on this VM.
                "TIDE_DPDK_DEVICE": f"net_af_packet0,iface={veth},framecnt=4096",
                "TIDE_DATA_IP": f"{subnet}.1",
                "TIDE_FILE_PREFIX": prefix,
                "TIDE_TCP_RTO_MIN_US": "200000"})
            flood = f"""
import random, time
from scapy.all import ARP, Ether, IP, TCP, conf, get_if_hwaddr, sendp, srp1
conf.verb = 0
iface, dst = {peer_if!r}, {subnet + '.1'!r}
arp = srp1(Ether(dst="ff:ff:ff:ff:ff:ff")/ARP(pdst=dst, psrc={subnet + '.2'!r}), iface=iface,
           timeout=2)
e = Ether(dst=arp.hwsrc, src=get_if_hwaddr(iface))
rnd = random.Random(5)
opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("WScale", 7)]
pkts = [e/IP(src={subnet!r} + "." + str(100 + i % 20), dst=dst)/
        TCP(sport=10000 + i, dport={port}, flags="S", seq=rnd.getrandbits(32), options=opts)
        for i in range(1000)]
t0 = time.monotonic()
sendp(pkts, iface=iface, inter=0.0008)
print(f"flood: 1000 SYNs in {{time.monotonic() - t0:.2f}} s")
"""
            r = in_ns("/usr/bin/python3", "-c", flood, timeout=60)
            self.verify(r.returncode == 0 and "flood:" in r.stdout, r.stdout + r.stderr)
            client = f"""
import socket, sys, time
sys.path.insert(0, {os.path.dirname(peer_py)!r})
import linux_peer
t0 = time.monotonic()
s = socket.create_connection(({subnet + '.1'!r}, {port}), timeout=30)
dt = time.monotonic() - t0
for c in linux_peer.chunks(1 << 20):
    s.sendall(c)
s.shutdown(socket.SHUT_WR)
s.settimeout(30)
s.recv(1)
print(f"connected in {{dt:.3f}} s")
"""
            c = in_ns("/usr/bin/python3", "-c", client, timeout=90)
            self.verify(c.returncode == 0, c.stdout + c.stderr + self.output_so_far(srv))
            secs = float(re.search(r"connected in ([0-9.]+) s", c.stdout).group(1))
            live = self.sh("/usr/bin/python3", os.path.join(self.source_root, "tools",
                                                            "tide-stats.py"),
                           "--file-prefix", prefix, check=False)
            stats = dict(ln.split() for ln in live.stdout.splitlines() if ln.count(" ") == 1)
            rc, out = self.finish(srv, signal_first=signal.SIGTERM)
            srv = None
            print(f"\n    {r.stdout.strip()}; client connected in {secs * 1000:.0f} ms; cookies "
                  f"sent {stats.get('tcp_syncookies_sent')}, ok "
                  f"{stats.get('tcp_syncookies_ok')}", end="", flush=True)
            self.verify(secs < 0.9, f"the client took {secs:.3f} s to connect")
            self.verify(live.returncode == 0, live.stdout + live.stderr)
            self.verify(int(stats.get("tcp_listen_overflow", 0)) >= 800, live.stdout)
            self.verify(int(stats.get("tcp_syncookies_sent", 0)) >= 800, live.stdout)
            self.verify(int(stats.get("tcp_syncookies_ok", 0)) >= 1, live.stdout)
            self.verify(re.search(r"accepted [0-9.]+:\d+ \(mss \d+, wscale yes, timestamps yes\)",
                                  out) is not None, out)
            self.verify(f"{1 << 20} bytes in, 0 out, 0 mismatched" in out, out)
            self.verify(rc == 0 and "packet buffers leaked: 0" in out, out)
        finally:
            if srv is not None:
                srv.kill()
                srv.communicate()
            self.sh("ip", "link", "del", veth, check=False)
            self.sh("ip", "netns", "del", ns, check=False)

    # -- 6 -----------------------------------------------------------------------------------

    def test_6_who_may_connect(self):
        """Steps: a second mooncake_master with --allow_networks=127.0.0.1/32, and a second
        tide-node mounted there whose node file sets TIDE_ALLOW_NETS=127.0.0.1/32 and
        TIDE_AGENT_SOCKET_GROUP (a group of ours, by gid); from 127.0.0.2 (local on Linux, as
        all of 127/8) connect to the master's RPC and admin ports and to the node's handshake
        and data ports, each time sending a valid request (ServiceReady, GET /health, a
        Metadata request, a READ of the node's registered segment); then send the same
        requests from 127.0.0.1; then connect to the node's ports at 127.0.0.2.
        Verify: from 127.0.0.2 every connection is closed within 2 s without a byte of answer;
        the master's /metrics counts both refusals and both processes log them; from 127.0.0.1
        every request is answered (the READ with status OK and its bytes); nothing of the node
        listens on 127.0.0.2 (its host is 127.0.0.1); the agent socket is mode 0660 and owned
        by the configured group; both processes exit 0 on SIGTERM."""
        import json

        def closed_without_answer(port, payload):
            """Seconds until a connection from 127.0.0.2 is closed unanswered; None if answered
            or still open after 5 s."""
            with socket.socket() as s:
                s.settimeout(5)
                s.bind(("127.0.0.2", 0))
                s.connect(("127.0.0.1", port))
                t0 = time.monotonic()
                try:
                    s.sendall(payload)
                    data = s.recv(1)
                except (BrokenPipeError, ConnectionResetError):
                    data = b""
                except socket.timeout:
                    return None
                return time.monotonic() - t0 if data == b"" else None

        def handshake(port, src):
            """The node's descriptor, by a Metadata request (u64 length, type 1) from src."""
            with socket.socket() as s:
                s.settimeout(5)
                s.bind((src, 0))
                s.connect(("127.0.0.1", port))
                s.sendall(struct.pack("<QB", 1, 1))
                length, _type = struct.unpack("<QB", recv_exact(s, 9))
                return json.loads(recv_exact(s, length - 1))

        def native_read(addr, size):
            """A native-framing READ request (te_frame.h): header only."""
            return struct.pack("<QQBBBBI", size, addr, 0x40, 0, 0, 0, 7)

        # A group other than our own when we can: root may give the socket any gid, others
        # one of their supplementary groups.
        groups = [g for g in os.getgroups() if g != os.getegid()] or [os.getegid()]
        gid = 4242 if os.geteuid() == 0 else groups[0]
        rpc_port = free_port()
        master = node = None
        try:
            master = self.start_tool(
                "master/mooncake_master", "--rpc_port", str(rpc_port), "--rpc_address",
                "127.0.0.1", "--metrics_port", "0", "--metrics_host", "127.0.0.1",
                "--allow_networks=127.0.0.1/32", ready="metrics HTTP on")
            admin_port = int(re.search(r"metrics HTTP on [0-9.]+:(\d+)",
                                       self.output_so_far(master)).group(1))
            sock = os.path.join(self.tmp, "agent6.sock")
            node_env = self.write("node6.env", "\n".join([
                f"MOONCAKE_MASTER=127.0.0.1:{rpc_port}",
                "MOONCAKE_LOCAL_HOSTNAME=127.0.0.1",
                "MOONCAKE_PROTOCOL=tcp",
                "MOONCAKE_TE_META_DATA_SERVER=P2PHANDSHAKE",
                "MOONCAKE_GLOBAL_SEGMENT_SIZE=16mb",
                f"TIDE_AGENT_SOCKET={sock}",
                f"TIDE_AGENT_SOCKET_GROUP={gid}",
                "TIDE_ALLOW_NETS=127.0.0.1/32",
                "TIDE_LOG_LEVEL=warn",
                "MC_FORCE_TCP=1",
            ]) + "\n")
            node = self.start_tool("node/tide-node", "--env", node_env, "--foreground",
                                   ready="tide-node: ready", timeout=60)
            hs_port = int(re.search(r"ready: segment 127\.0\.0\.1:(\d+)",
                                    self.output_so_far(node)).group(1))

            # From 127.0.0.1: every port answers, and the segment can be read.
            desc = handshake(hs_port, "127.0.0.1")
            data_port = int(desc["tcp_data_port"])
            seg = max(desc["buffers"], key=lambda b: int(b["length"]))
            addr = int(seg["addr"])
            rpc = MasterRpc(rpc_port)
            try:
                self.verify(rpc.service_ready(), "ServiceReady from 127.0.0.1")
            finally:
                rpc.close()
            status, body = http_request(admin_port, "GET", "/health")
            self.verify(status == 200, f"/health from 127.0.0.1: {status} {body!r}")
            with socket.create_connection(("127.0.0.1", data_port), timeout=5) as s:
                s.sendall(native_read(addr, 64))
                st, req_id, _ = struct.unpack("<QII", recv_exact(s, 16))
                self.verify(st == 0x4D43545600000000 and req_id == 7,
                            f"READ from 127.0.0.1: status {st:#x}, id {req_id}")
                recv_exact(s, 64)

            # From 127.0.0.2: closed at accept, whatever the request.
            rpc_req = struct.pack("<BBBBIIII", 0x15, 0, 0, 0, 1, FN_SERVICE_READY, 0, 0)
            cases = [("master RPC", rpc_port, rpc_req),
                     ("master admin HTTP", admin_port,
                      b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
                     ("node handshake", hs_port, struct.pack("<QB", 1, 1)),
                     ("node data", data_port, native_read(addr, 64))]
            for what, port, payload in cases:
                secs = closed_without_answer(port, payload)
                self.verify(secs is not None and secs < 2,
                            f"{what} port answered 127.0.0.2 or kept it open ({secs})")
            status, body = http_request(admin_port, "GET", "/metrics")
            self.verify(status == 200 and b"\ntide_master_refused_connections_total 2\n" in body,
                        f"/metrics: {body[-600:]!r}")

            # The node listens on its host only.
            for port in (hs_port, data_port):
                try:
                    socket.create_connection(("127.0.0.2", port), timeout=5).close()
                    self.verify(False, f"port {port} answers on 127.0.0.2")
                except ConnectionRefusedError:
                    pass

            st = os.stat(sock)
            self.verify(st.st_mode & 0o777 == 0o660 and st.st_gid == gid,
                        f"agent socket mode {st.st_mode & 0o777:o} gid {st.st_gid}, "
                        f"wanted 660 gid {gid}")
            print(f"\n    refused from 127.0.0.2: {', '.join(c[0] for c in cases)}", end="",
                  flush=True)
        finally:
            outs = {}
            for name, p in (("tide-node", node), ("mooncake_master", master)):
                if p is not None:
                    outs[name] = self.finish(p, signal_first=signal.SIGTERM)
        for name, (rc, out) in outs.items():
            self.verify(rc == 0, f"{name} exited {rc}:\n{out[-3000:]}")
        out = outs["tide-node"][1]
        self.verify("handshake: connection from 127.0.0.2:" in out and
                    "data port: connection from 127.0.0.2 refused (not in TIDE_ALLOW_NETS)"
                    in out, out[-3000:])
        self.verify("RPC port: connection from 127.0.0.2 refused (not in --allow_networks)"
                    in outs["mooncake_master"][1], outs["mooncake_master"][1][-3000:])
