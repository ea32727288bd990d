"""A local Tide store cluster on one machine: mooncake_master + two node agents.

Used by tools/store_cluster.py (the README's main job, step 5, and the
cluster test) and tools/store-bench-table.py. Each "node" is a tide-node
agent with its own node environment file, socket and segment; clients of a
node are processes started with TIDE_NODE_ENV pointing at that node's file
(they attach to its agent, as Miles workers would).

Transports between the two agents:
  kernel  kernel TCP sockets on loopback (MC_FORCE_TCP=1),
  memif   Tide's user-space TCP/IP on DPDK net_memif (node A is the memif
          server: it starts first and stops first, as DPDK 22.11 memif needs);
          --no-huge, MTU 9000, each agent polling its own CPU.
"""
import os
import re
import select
import socket
import subprocess
import tempfile
import time

PY = "/usr/bin/python3"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(extra=None):
    """The caller's environment without Tide/Mooncake settings, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TIDE_", "MOONCAKE_", "MC_"))}
    env.update(extra or {})
    return env


def spawn_role(script, args, env, **kw):
    """script run again as a child role (/usr/bin/python3 script args), its stdout a text
    pipe: the benchmark scripts' orchestrators talk to their roles line by line."""
    return subprocess.Popen([PY, os.path.abspath(script)] + list(args), env=env, text=True,
                            stdout=subprocess.PIPE, **kw)


def expect_line(p, what, deadline_s=60):
    """The child's next stdout line (the orchestrator's only way to hear from it); kills
    the child and exits naming `what` when none comes within deadline_s."""
    ready, _, _ = select.select([p.stdout], [], [], deadline_s)
    line = p.stdout.readline() if ready else ""
    if not line:
        p.kill()
        raise SystemExit(f"{what}: no answer within {deadline_s} s (exit {p.wait()})")
    return line.strip()


def end_role(p, deadline_s=30):
    """Let a child role finish: close its stdin (the roles read it until EOF), wait up to
    deadline_s, kill it past that. Returns its exit status (a killed child's negative)."""
    if p.stdin and not p.stdin.closed:
        p.stdin.close()
    try:
        return p.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def stop(p, deadline_s=10):
    """SIGTERM a server (the master), SIGKILL past deadline_s; its exit status."""
    p.terminate()
    try:
        return p.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def start_master(binary, env, out, *args, deadline_s=20):
    """mooncake_master on a free loopback port, stdout and stderr to out; returns
    (process, "127.0.0.1:port") once it accepts connections, or raises RuntimeError when
    it exits or does not listen within deadline_s."""
    port = free_port()
    proc = subprocess.Popen([binary, "--rpc_port", str(port), "--rpc_address", "127.0.0.1",
                             *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"mooncake_master did not listen on 127.0.0.1:{port}")


class Node:
    def __init__(self, name, env_file, sock, base_env=None):
        self.base_env = base_env or {}
        self.name = name
        self.env_file = env_file
        self.sock = sock
        self.proc = None
        self.segment = None
        self.log = env_file + ".log"

    def client_env(self, extra=None):
        """Environment for a client process of this node: the node file exported (as
        `set -a; . node.env` before `ray start` does) plus TIDE_NODE_ENV naming it."""
        env = clean_env({"TIDE_NODE_ENV": self.env_file, **self.base_env})
        with open(self.env_file) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    env[k] = v
        env.update(extra or {})
        return env


class LocalStoreCluster:
    def __init__(self, build, transport="kernel", segment="512mb", pin_unread=True,
                 log_level="warn", node_extra=None, agent_env=None):
        if transport not in ("kernel", "memif"):
            raise ValueError(f"transport {transport!r}: expected kernel or memif")
        self.build = os.path.abspath(build)
        self.transport = transport
        self.segment = segment
        self.pin_unread = pin_unread
        self.log_level = log_level
        self.node_extra = dict(node_extra or {})  # more KEY=value lines for both node files
        self.agent_env = dict(agent_env or {})  # more environment for the agents (MC_* knobs)
        self.tmp = tempfile.mkdtemp(prefix="tide-store-cluster-")
        self.master = None
        self.master_addr = None
        self.nodes = []

    def _bin(self, *parts):
        return os.path.join(self.build, *parts)

    def _write_env(self, name, idx):
        sock = os.path.join(self.tmp, f"{name}.sock")
        lines = [
            f"MOONCAKE_MASTER={self.master_addr}",
            "MOONCAKE_LOCAL_HOSTNAME=127.0.0.1",
            "MOONCAKE_PROTOCOL=tcp",
            "MOONCAKE_TE_META_DATA_SERVER=P2PHANDSHAKE",
            f"MOONCAKE_GLOBAL_SEGMENT_SIZE={self.segment}",
            "MOONCAKE_LOCAL_BUFFER_SIZE=256mb",
            "TIDE_AGENT=required",
            f"TIDE_AGENT_SOCKET={sock}",
            f"TIDE_PIN_UNREAD={1 if self.pin_unread else 0}",
            f"TIDE_LOG_LEVEL={self.log_level}",
        ]
        if self.transport == "memif":
            role = "server" if idx == 0 else "client"
            memif = os.path.join(self.tmp, "memif.sock")
            lines += [
                f"TIDE_DPDK_DEVICE=net_memif0,role={role},socket={memif},"
                "socket-abstract=no,bsize=9216",
                f"TIDE_DATA_IP=10.93.0.{idx + 1}",
                "TIDE_MTU=9000",
                "TIDE_CSUM=elide",  # memif between processes of one host
                "TIDE_TCP_RTO_MIN_US=5000",
                "TIDE_HUGEPAGES=off",
                f"TIDE_LCORES={idx % (os.cpu_count() or 1)}",
                f"TIDE_FILE_PREFIX=tide-sc-{name}-{os.getpid()}",
            ]
        else:
            lines.append("MC_FORCE_TCP=1")
        lines += [f"{k}={v}" for k, v in self.node_extra.items()]
        path = os.path.join(self.tmp, f"{name}.env")
        with open(path, "w") as f:
            f.write("# written by tools/storecluster.py\n" + "\n".join(lines) + "\n")
        # Clients load this build's libtidestore.so and the package from the tree
        # unless the caller's environment says otherwise.
        src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        base = {"LIBTIDESTORE": os.environ.get(
                    "LIBTIDESTORE", self._bin("store", "client", "libtidestore.so")),
                "PYTHONPATH": os.environ.get("PYTHONPATH", os.path.join(src, "store", "python"))}
        return Node(name, path, sock, base)

    def _start_master(self):
        log = open(os.path.join(self.tmp, "master.log"), "w")
        env = clean_env({"TIDE_PIN_UNREAD": "1" if self.pin_unread else "0"})
        try:
            self.master, self.master_addr = start_master(
                self._bin("tools", "master", "mooncake_master"), env, log,
                "--metrics_port", "0", "--metrics_host", "127.0.0.1")
        except RuntimeError:
            raise RuntimeError("mooncake_master did not start:\n" +
                               self.read_log("master.log")) from None

    def _start_agent(self, node):
        out = open(node.log, "w")
        node.proc = subprocess.Popen(
            [self._bin("tools", "node", "tide-node"), "--env", node.env_file, "--foreground"],
            stdout=out, stderr=subprocess.STDOUT, env=clean_env(self.agent_env),
            start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(node.log) as f:
                m = re.search(r"tide-node: ready: segment (\S+)", f.read())
            if m:
                node.segment = m.group(1)
                return
            if node.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"agent {node.name} did not start:\n" + open(node.log).read())

    def start(self):
        self._start_master()
        for i, name in enumerate(("node-a", "node-b")):
            self.nodes.append(self._write_env(name, i))
        for node in self.nodes:
            self._start_agent(node)
        return self

    def metrics(self):
        """The master's Prometheus metrics as {name: value} (unlabelled series only)."""
        m = re.search(r"metrics HTTP on [^ ]*:(\d+)", self.read_log("master.log"))
        if not m:
            raise RuntimeError("master metrics port not found in its log")
        import urllib.request
        body = urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/metrics",
                                      timeout=5).read().decode()
        out = {}
        for line in body.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                k, v = line.split()[:2]
                out[k] = float(v)
        return out

    def read_log(self, name):
        try:
            with open(os.path.join(self.tmp, name)) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        """Stop the agents (node A first: the memif server exits first) and the master.
        Returns the agents' exit codes."""
        codes = []
        for node in self.nodes:
            if node.proc and node.proc.poll() is None:
                stop(node.proc, deadline_s=30)
            codes.append(node.proc.returncode if node.proc else None)
        if self.master and self.master.poll() is None:
            stop(self.master, deadline_s=15)
        return codes

    def cleanup(self):
        subprocess.run(["rm", "-rf", self.tmp], check=False)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        self.cleanup()
