"""Functional suite: the `mooncake_master` binary as launchers (Miles) run it.

Topology: one host, loopback. The master is started the way Miles starts the
stock one (`setsid mooncake_master --rpc_port N --metrics_port 0`), readiness
is a TCP connect to the RPC port, and it is stopped with SIGTERM or
`pkill -x mooncake_master` (scoped here to the master's own session so other
masters on the host are left alone).
"""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from framework.test_suite import TestSuite

# ServiceReady (seq 0) as a stock client sends it, and a stock master's answer
# (release build: type literal in the body), from the reference capture.
SERVICE_READY_REQ = bytes.fromhex("1500000000000000" "56bb817b" "00000000" "00000000")
SERVICE_READY_RESP = bytes.fromhex("15000000000000001100000000000000"
                                   "35ccb31c0487800c010001" "05" "322e302e30")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestMaster(TestSuite):
    @classmethod
    def set_up_all(cls):
        cls.exe = cls.tool("master/mooncake_master")
        if not os.access(cls.exe, os.X_OK):
            raise AssertionError(f"{cls.exe} not built")

    def set_up_test_case(self):
        self.procs = []

    def tear_down_test_case(self):
        for p, log in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
            log.close()

    # -- helpers ---------------------------------------------------------------------------

    def start(self, *args, extra_env=None):
        """setsid mooncake_master ARGS, stderr to a file; returns (Popen, log path).
        The caller's TIDE_*/MC_* variables are dropped; extra_env is added."""
        path = os.path.join(self.tmp, f"master-{len(self.procs)}-{time.monotonic_ns()}.log")
        log = open(path, "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDE_", "MC_"))}
        env.update(extra_env or {})
        p = subprocess.Popen(["setsid", self.exe, *args], stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL, env=env)
        self.procs.append((p, log))
        return p, path

    @staticmethod
    def read(path):
        with open(path) as f:
            return f.read()

    def wait_ready(self, p, port, log, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if p.poll() is not None:
                self.fail(f"master exited {p.returncode}: {self.read(log)}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.fail(f"master not accepting on {port} after {timeout}s: {self.read(log)}")

    def logged_port(self, log, what):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = re.search(what + r" on [0-9.]+:(\d+)", self.read(log))
            if m:
                return int(m.group(1))
            time.sleep(0.05)
        self.fail(f"timed out after 10 s waiting for a '{what}' line in the log: "
                  f"{self.read(log)}")

    @staticmethod
    def http_get(port, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()

    def stop(self, p, sig=signal.SIGTERM):
        p.send_signal(sig)
        return p.wait(timeout=15)

    # -- tests -----------------------------------------------------------------------------

    def test_start_like_miles_and_serve(self):
        """Steps: setsid mooncake_master --rpc_port P --metrics_port 0; connect; ServiceReady.
        Verify: accepting on P; the answer is byte-identical to the stock master's;
        the logged metrics port serves /health = OK and /metrics."""
        port = free_port()
        p, log = self.start("--rpc_port", str(port), "--metrics_port", "0")
        self.wait_ready(p, port, log)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(SERVICE_READY_REQ)
            got = b""
            while len(got) < len(SERVICE_READY_RESP):
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        self.verify(got == SERVICE_READY_RESP, f"ServiceReady answer {got.hex()}")
        mport = self.logged_port(log, "metrics HTTP")
        self.verify(mport not in (0, 9003), f"metrics port {mport} is not ephemeral")
        status, body = self.http_get(mport, "/health")
        self.verify(status == 200 and body == "OK", f"/health: {status} {body!r}")
        status, body = self.http_get(mport, "/metrics")
        self.verify(status == 200 and "master_key_count 0" in body, body[:400])
        self.verify(self.stop(p) == 0, self.read(log))

    def test_sigterm_clean_exit(self):
        """Steps: start, connect a client and leave it open, SIGTERM.
        Verify: exit status 0 within the timeout, shutdown logged, port released."""
        port = free_port()
        p, log = self.start("--rpc_port", str(port), "--metrics_port", "0")
        self.wait_ready(p, port, log)
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        rc = self.stop(p)
        idle.close()
        self.verify(rc == 0, f"exit {rc}: {self.read(log)}")
        self.verify("SIGTERM received" in self.read(log), self.read(log))
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        # SIGINT too.
        p, log = self.start("--rpc_port", str(port), "--metrics_port", "0")
        self.wait_ready(p, port, log)
        self.verify(self.stop(p, signal.SIGINT) == 0, self.read(log))

    def test_pkill_exact_process_name(self):
        """Steps: start as Miles does; pgrep/pkill -x mooncake_master within its session.
        Verify: /proc/PID/comm is exactly mooncake_master; pkill -x stops it with exit 0."""
        port = free_port()
        p, log = self.start("--rpc_port", str(port), "--metrics_port", "0")
        self.wait_ready(p, port, log)
        with open(f"/proc/{p.pid}/comm") as f:
            self.verify(f.read().strip() == "mooncake_master", "process name")
        sid = os.getsid(p.pid)
        self.verify(sid == p.pid, "setsid made the master a session leader")
        r = subprocess.run(["pgrep", "-x", "-s", str(sid), "mooncake_master"],
                           capture_output=True, text=True)
        self.verify(r.stdout.split() == [str(p.pid)], f"pgrep: {r.stdout!r}")
        r = subprocess.run(["pkill", "-x", "-s", str(sid), "mooncake_master"])
        self.verify(r.returncode == 0, "pkill matched")
        self.verify(p.wait(timeout=15) == 0, self.read(log))

    def test_unknown_and_unimplemented_flags_warn(self):
        """Steps: start with the flags Miles passes, an unknown flag (with a value) and an
        unimplemented stock one.
        Verify: it starts; each ignored flag is named in a warning; the metadata server runs."""
        port = free_port()
        p, log = self.start("--rpc_port", str(port), "--metrics_port", "0",
                            "--eviction_high_watermark_ratio", "0.9",
                            "--default_kv_lease_ttl=5000", "--client_ttl", "20",
                            "--enable_http_metadata_server", "--http_metadata_server_port", "0",
                            "--some_future_flag", "42", "--enable_offload",
                            "--memory_allocator=offset", "--norpc_enable_tcp_no_delay")
        self.wait_ready(p, port, log)
        text = self.read(log)
        self.verify("unknown flag --some_future_flag=42 ignored" in text, text)
        self.verify("--enable_offload=true: this Mooncake feature is not implemented" in text, text)
        self.verify("--memory_allocator=offset" in text, text)
        mport = self.logged_port(log, "HTTP metadata server")
        req = urllib.request.Request(f"http://127.0.0.1:{mport}/metadata?key=mooncake%2Fram%2Fx",
                                     data=b'{"k":1}', method="PUT")
        with urllib.request.urlopen(req, timeout=5) as r:
            self.verify(r.status == 200, "PUT")
        status, body = self.http_get(mport, "/metadata?key=mooncake%2Fram%2Fx")
        self.verify(status == 200 and body == '{"k":1}', body)
        with self.assertRaises(urllib.error.HTTPError) as cm:
            self.http_get(mport, "/metadata?key=mooncake/ram/x")
        self.verify(cm.exception.code == 404, "decoded key is another key")
        self.verify(self.stop(p) == 0, self.read(log))

    def test_bad_values_refused(self):
        """Steps: known flags with bad values.
        Verify: exit 1 at once, stderr names the flag, the value and what is expected."""
        cases = [
            (["--rpc_port", "abc"], "rpc_port", "abc"),
            (["--rpc_port=70000"], "rpc_port", "70000"),
            (["--eviction_ratio", "1.5"], "eviction_ratio", "1.5"),
            (["--default_kv_lease_ttl", "10x"], "default_kv_lease_ttl", "10x"),
            (["--enable_http_metadata_server=maybe"], "enable_http_metadata_server", "maybe"),
            (["--client_ttl=0"], "client_ttl", "0"),
            (["--rpc_thread_num", "-1"], "rpc_thread_num", "-1"),
        ]
        for args, flag, value in cases:
            r = subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=20)
            self.verify(r.returncode == 1, f"{args}: exit {r.returncode}")
            self.verify(flag in r.stderr and f"'{value}'" in r.stderr and "expected" in r.stderr,
                        f"{args}: {r.stderr}")
        # HA needs etcd endpoints and an address clients can dial (it is published).
        for args, said in ((["--enable_ha"], "needs --etcd_endpoints"),
                           (["--enable_ha", "--etcd_endpoints=127.0.0.1:2379"], "not 0.0.0.0"),
                           (["--enable_ha", "--ha_backend_type=redis"], "only etcd")):
            r = subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=20)
            self.verify(r.returncode == 1 and said in r.stderr, f"{args}: {r.stderr}")

    def test_port_in_use_refused(self):
        """Steps: a second master on a busy RPC port.
        Verify: it exits 1 with a message naming the port; the first one keeps serving."""
        port = free_port()
        p, log = self.start("--rpc_port", str(port), "--metrics_port", "0")
        self.wait_ready(p, port, log)
        r = subprocess.run([self.exe, "--rpc_port", str(port), "--metrics_port", "0"],
                           capture_output=True, text=True, timeout=20)
        self.verify(r.returncode == 1 and str(port) in r.stderr, r.stderr)
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        self.verify(self.stop(p) == 0, self.read(log))

    def test_deprecated_port_and_config_file(self):
        """Steps: --port P alone; then --config_path with rpc_port, metrics_port and a lease,
        and a command-line flag that overrides the file.
        Verify: served on P; then on the file's port, with the command line's lease logged."""
        port = free_port()
        p, log = self.start("--port", str(port), "--metrics_port", "0")
        self.wait_ready(p, port, log)
        self.verify(self.stop(p) == 0, self.read(log))

        port = free_port()
        cfg = self.write("master.json", json.dumps({
            "rpc_port": port, "metrics_port": 0, "default_kv_lease_ttl": 3000,
            "client_live_ttl_sec": 30, "eviction_ratio": 0.1}))
        p, log = self.start("--config_path", cfg, "--default_kv_lease_ttl=7s")
        self.wait_ready(p, port, log)
        # Logged just after the port opens: wait for the line, not just the port.
        want = "lease 7000 ms, client ttl 30 s, eviction ratio 0.1"
        self.wait_until(lambda: want in self.read(log), 10, f"'{want}' in the log")
        self.verify(self.stop(p) == 0, self.read(log))

        bad = self.write("bad.json", '{"eviction_ratio": 3}')
        r = subprocess.run([self.exe, "--config_path", bad], capture_output=True, text=True,
                           timeout=20)
        self.verify(r.returncode == 1 and "eviction_ratio" in r.stderr and bad in r.stderr,
                    r.stderr)

    def test_pin_unread_flag_and_environment(self):
        """Steps: start with TIDE_PIN_UNREAD=1 exported (as from the node file); then the same
        with --nopin_unread; then with neither; then TIDE_PIN_UNREAD=maybe.
        Verify: RL mode is logged on from the environment, off when the command line says so,
        off by default; a value the node file would refuse exits 1 naming the variable."""
        for args, env, want in (
                ([], {"TIDE_PIN_UNREAD": "1"}, "pin_unread on (environment TIDE_PIN_UNREAD)"),
                (["--nopin_unread"], {"TIDE_PIN_UNREAD": "1"}, "pin_unread off (command line)"),
                (["--pin_unread"], {}, "pin_unread on (command line)"),
                ([], {}, "pin_unread off (default)")):
            port = free_port()
            p, log = self.start("--rpc_port", str(port), "--metrics_port", "0", *args,
                                extra_env=env)
            self.wait_ready(p, port, log)
            try:
                self.wait_until(lambda: want in self.read(log), 10, f"'{want}' in the log")
            except AssertionError as e:
                self.fail(f"{args} {env}: {e}: {self.read(log)}")
            self.verify(self.stop(p) == 0, self.read(log))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDE_", "MC_"))}
        env["TIDE_PIN_UNREAD"] = "maybe"
        r = subprocess.run([self.exe, "--rpc_port", "0"], capture_output=True, text=True,
                           timeout=20, env=env)
        self.verify(r.returncode == 1 and "TIDE_PIN_UNREAD" in r.stderr and "'maybe'" in r.stderr,
                    r.stderr)
