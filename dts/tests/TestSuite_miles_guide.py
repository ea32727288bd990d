"""Functional suite: Miles' Mooncake rollout guide, followed unchanged on Tide.

The guide: start `mooncake_master --rpc_port P --metrics_port ...`, export
MOONCAKE_PROTOCOL and MOONCAKE_MASTER, pass --object-store-backend mooncake
--mooncake-store-init-kwargs '{"protocol":...,"master_server_address":...}'.
Nothing else runs on the node: no Tide agent, no node file.

Set-up (once): a fresh virtual environment (--system-site-packages for Debian's
meson-python, numpy and msgpack) and `pip install --no-build-isolation .` of
this repository, offline, exactly as the README says. Every process below runs
that venv's python from / with no PYTHONPATH, and the master is the venv's
`mooncake_master` on PATH.

Processes per flow (dts/tests/miles_guide_roles.py): a trainer with LOCAL_RANK=0
holding the segment, the rollout manager (no segment) putting shards, a second
trainer reading them, the driver removing them; every value compared; the
master must hold no key afterwards.
"""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

from framework.test_suite import TestSuite

ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "miles_guide_roles.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestMilesGuide(TestSuite):
    @classmethod
    def set_up_all(cls):
        venv = os.path.join(cls.tmp, "venv")
        cls.sh("/usr/bin/python3", "-m", "venv", "--system-site-packages", venv)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LIBTIDESTORE")}
        env["PIP_NO_INDEX"] = "1"  # offline: anything pip would fetch fails at once
        r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet",
                            "--no-build-isolation", cls.source_root], capture_output=True,
                           text=True, env=env, timeout=900)
        if r.returncode != 0:
            raise AssertionError(f"pip install --no-build-isolation . failed:\n{r.stdout}"
                                 f"{r.stderr}")
        cls.venv = venv
        cls.py = os.path.join(venv, "bin", "python")
        cls.master_bin = os.path.join(venv, "bin", "mooncake_master")

    def set_up_test_case(self):
        self.procs = []
        self.work = os.path.join(self.tmp, self.id().rsplit(".", 1)[-1])
        os.makedirs(self.work, exist_ok=True)

    def tear_down_test_case(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    # ---- helpers ------------------------------------------------------------

    def guide_env(self, protocol="tcp", **extra):
        """The guide's exports and Miles' init kwargs; no Tide variable at all, and an
        agent socket path where nothing listens (this suite's node has no agent)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TIDE_", "MOONCAKE_", "MC_", "PYTHON", "LIBTIDESTORE"))}
        env.update({"PATH": os.path.join(self.venv, "bin") + ":" + os.environ["PATH"],
                    "MOONCAKE_PROTOCOL": protocol,
                    "MOONCAKE_MASTER": self.master_addr,
                    "MILES_INIT_KWARGS": json.dumps({
                        "protocol": protocol, "master_server_address": self.master_addr,
                        "local_hostname": "127.0.0.1", "global_segment_size": "256mb",
                        "local_buffer_size": "64mb"}),
                    "TIDE_AGENT_SOCKET": os.path.join(self.work, "no-agent.sock")})
        env.update(extra)
        return env

    def start_master(self):
        """As the guide and Miles' launcher: setsid mooncake_master --rpc_port P
        --metrics_port 0, found on PATH (the venv's); ready when the RPC port accepts."""
        port = free_port()
        self.master_addr = f"127.0.0.1:{port}"
        self.master_log = os.path.join(self.work, "master.log")
        with open(self.master_log, "w") as log:
            m = subprocess.Popen(["setsid", self.master_bin, "--rpc_port", str(port),
                                  "--metrics_port", "0", "--metrics_host", "127.0.0.1"],
                                 stdout=log, stderr=subprocess.STDOUT, cwd="/")
        self.procs.append(m)
        self.wait_until(lambda: self._accepts(port) or
                        self.alive_or_fail(m, "mooncake_master", self.master_log), 30,
                        f"mooncake_master to accept on {port}")
        return m

    @staticmethod
    def _accepts(port):
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            return False

    @staticmethod
    def read(path):
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return ""

    def master_keys(self):
        m = re.search(r"metrics HTTP on [^ ]*:(\d+)", self.read(self.master_log))
        self.verify(m is not None, f"no metrics port in the master log: "
                                   f"{self.read(self.master_log)}")
        body = urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/metrics",
                                      timeout=5).read().decode()
        m = re.search(r"^master_key_count (\S+)$", body, re.M)
        self.verify(m is not None, body)
        return float(m.group(1))

    def role(self, name, env, *args, stdin=None):
        p = subprocess.Popen([self.py, ROLES, name, *args], stdin=stdin,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, cwd="/")
        self.procs.append(p)
        return p

    def run_role(self, name, env, *args, timeout=180):
        p = self.role(name, env, *args)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            self.fail(f"{name} did not finish in {timeout} s: {out}")
        return p.returncode, out

    def alive_or_fail(self, p, what, log):
        """For wait_until: fail at once (with the log) when p has exited."""
        if p.poll() is not None:
            self.fail(f"{what} exited with {p.returncode}: {self.read(log)}")
        return False

    def wait_re(self, p, text, pattern, timeout, what):
        line = self.wait_for_line(p, text, timeout, what)
        return re.search(pattern, line)

    def miles_flow(self, env, moe_rows=300):
        """Holder, rollout, reader, driver; returns the holder's endpoint and output."""
        refs = os.path.join(self.work, "refs.json")
        holder = self.role("holder", env, "--refs", refs, "--moe-rows", str(moe_rows),
                           stdin=subprocess.PIPE)
        endpoint = self.wait_re(holder, "holder ready", r"holder ready (\S+)", 60,
                                "the trainer holding the segment to set up").group(1)
        rc, rout = self.run_role("rollout", env, "--refs", refs, "--moe-rows", str(moe_rows))
        self.verify(rc == 0 and "rollout put 4" in rout, f"rollout: {rout}")
        m = self.wait_re(holder, "holder verified", r"holder verified (\d+)", 120,
                         "the holder to read every shard")
        self.verify(m.group(1) == "4", "".join(holder.lines))
        rc, dout = self.run_role("reader", env, "--refs", refs, "--moe-rows", str(moe_rows))
        self.verify(rc == 0 and "reader verified 4" in dout, f"reader: {dout}")
        self.verify(self.master_keys() > 0, "the master holds no key before the driver ran")
        rc, dout = self.run_role("driver", env, "--refs", refs)
        self.verify(rc == 0 and "driver removed 4" in dout, f"driver: {dout}")
        self.verify(self.master_keys() == 0, "keys left at the master after the driver")
        return holder, endpoint, "".join(holder.lines) + rout

    def end(self, holder):
        """Close the holder's stdin (it leaves), wait for it within a deadline."""
        holder.stdin.close()
        holder.stdin = None
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
        rest = holder.stdout.read()
        self.verify(holder.returncode == 0,
                    f"holder exited {holder.returncode}: {''.join(holder.lines)}{rest}")

    # ---- cases --------------------------------------------------------------

    def test_installed_package_is_the_one_used(self):
        """Steps: import mooncake.store and mooncake.structured_object_store with the venv's
        python from /, no PYTHONPATH. Verify: both come from the venv, libtidestore.so too,
        and mooncake_master on the venv's PATH is the installed one."""
        r = subprocess.run([self.py, "-c",
                            "import mooncake.store as s, mooncake.structured_object_store as o;"
                            "print(s.__file__); print(o.__file__); print(s._lib._name)"],
                           capture_output=True, text=True, cwd="/",
                           env={"PATH": os.path.join(self.venv, "bin") + ":/usr/bin:/bin"})
        self.verify(r.returncode == 0, r.stdout + r.stderr)
        for line in r.stdout.split():
            self.verify(line.startswith(self.venv), f"{line} is outside the venv {self.venv}")
        self.verify(os.access(self.master_bin, os.X_OK), "no mooncake_master in the venv")

    def test_master_only_cluster_tcp(self):
        """Steps: only mooncake_master runs (no agent, no node file); Miles' processes with
        protocol tcp from the guide's exports and init kwargs. Verify: every process sets up
        (logging once that it runs the transfer engine itself because no agent answers), the
        4 shards (one with a 300 x 24 x 8 int32 MoE array) read back equal in two trainers,
        and the driver leaves no key at the master."""
        self.start_master()
        env = self.guide_env("tcp")
        holder, _, out = self.miles_flow(env)
        self.end(holder)
        self.verify("no node agent answers at" in out and "tcp-kernel" in out, out)

    def test_rdma_without_device_refused_cleanly(self):
        """Steps: protocol rdma (Miles' default) on this machine, which has no RDMA device.
        Verify: setup fails and Miles' MooncakeObjectStore raises RuntimeError; the log names
        the missing device and the tcp alternative in one line; nothing falls back to tcp."""
        self.start_master()
        env = self.guide_env("rdma")
        rc, out = self.run_role("setup", env)
        self.verify(rc == 1 and "setup error: Mooncake store setup failed" in out, out)
        lines = [ln for ln in out.splitlines() if "rdma" in ln.lower() and "tcp" in ln]
        self.verify(len(lines) >= 1 and "device" in lines[0].lower(), out)
        self.verify("tcp-kernel" not in out, f"fell back to tcp: {out}")
        self.verify(self.master_keys() == 0, "a failed setup left keys at the master")

    def test_rdma_over_verbs_double_in_process(self):
        """Steps: protocol rdma with pmd/verbs' test seam pointing at the in-memory RC verbs
        double (two RoCE devices); a holder and a rollout manager in one process (the double
        joins queue pairs within a process), each on its own device as MOONCAKE_DEVICE /
        device_name would name it; 4 shards put, read back through the holder, removed.
        Verify: every value equal, the engine said rdma, no key left at the master."""
        so = os.path.join(self.build_dir, "tests", "lib", "verbs_double", "libtide_vdbl.so")
        if not os.path.exists(so):
            self.skip("this build has no verbs path (-Drdma=disabled)")
        self.start_master()
        env = self.guide_env("rdma", TIDETEST_VERBS_GLUE=so,
                             VDBL_DEVICES="dbl_a0:10.0.0.1,dbl_b0:10.0.0.2",
                             MOONCAKE_DEVICE="dbl_a0")
        rc, out = self.run_role("inprocess", env, "--device", "dbl_a0", "--device", "dbl_b0",
                                "--moe-rows", "300")
        self.verify(rc == 0 and "inprocess verified 4" in out, out)
        self.verify("over rdma" in out and "tcp-kernel" not in out, out)
        self.verify(self.master_keys() == 0, "keys left at the master")

    def test_with_agent(self):
        """Steps: the same flow with a tide-node agent running on the node (kernel TCP), the
        clients' default TIDE_AGENT (auto). Verify: the clients attach to the agent (its
        segment holds the data), every value compares equal, no key is left."""
        self.start_master()
        sock = os.path.join(self.work, "agent.sock")
        node_env = os.path.join(self.work, "node.env")
        with open(node_env, "w") as f:
            f.write(f"MOONCAKE_MASTER={self.master_addr}\nMOONCAKE_LOCAL_HOSTNAME=127.0.0.1\n"
                    f"MOONCAKE_GLOBAL_SEGMENT_SIZE=256mb\nTIDE_AGENT_SOCKET={sock}\n"
                    "MC_FORCE_TCP=1\n")
        log = os.path.join(self.work, "agent.log")
        with open(log, "w") as lf:
            agent = subprocess.Popen([self.tool("node/tide-node"), "--env", node_env,
                                      "--foreground"], stdout=lf, stderr=subprocess.STDOUT,
                                     env=self.tool_env(), start_new_session=True)
        self.procs.append(agent)
        self.wait_until(lambda: "tide-node: ready" in self.read(log) or
                        self.alive_or_fail(agent, "tide-node", log), 60, "tide-node to be ready")
        segment = re.search(r"tide-node: ready: segment (\S+)", self.read(log)).group(1)
        env = self.guide_env("tcp", TIDE_AGENT_SOCKET=sock)
        holder, endpoint, out = self.miles_flow(env)
        self.end(holder)
        # attached: no process ran an engine of its own, and the holder's segment is the agent's
        self.verify("no node agent" not in out and endpoint == segment, f"{segment}: {out}")
        agent.send_signal(signal.SIGTERM)
        self.verify(agent.wait(timeout=30) == 0, self.read(log))

    def test_stock_protocol_peer_reads_a_miles_process(self):
        """Steps: master-only flow; while the trainer holding the segment is up, a peer that
        speaks only stock Mooncake's TCP transport (tide-stock-peer: connection per slice,
        v2 framing; then v1) reads its segment through the published descriptor.
        Verify: both reads complete without a refused request."""
        self.start_master()
        env = self.guide_env("tcp")
        holder, endpoint, _ = self.miles_flow(env, moe_rows=0)
        try:
            for proto in ("0", "1"):
                r = subprocess.run([self.tool("te_bench/tide-stock-peer"), "--mode=initiator",
                                    f"--segment_id={endpoint}", "--operation=read",
                                    "--block_size=4K", "--batch_size=8", "--duration=0.5",
                                    f"--proto={proto}"], capture_output=True, text=True,
                                   env=self.tool_env(), timeout=60)
                self.verify(r.returncode == 0 and "slices/s" in r.stdout,
                            f"proto {proto}: {r.stdout}{r.stderr}")
        finally:
            self.end(holder)
