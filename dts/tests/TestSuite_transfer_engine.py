"""Functional suite: the transfer engine between two processes (tide-bench).

Topologies:
  kernel:  two processes on loopback, kernel sockets, P2PHANDSHAKE metadata.
  memif:   two processes joined by DPDK net_memif, user-space TCP on each
           (handshake on loopback kernel sockets, data over memif to
           TIDE_DATA_IP, which the descriptor advertises as tide_data_ip).
  mixed:   (root) a DPDK node in netns D on net_af_packet over a veth pair,
           a kernel-socket node in netns K on the other end; a second veth
           pair carries the handshake (management network):

      netns D                                   netns K
      tide-bench (tcp-dpdk) -- af_packet -- vethD ==== vethK  10.96.x.2 (data)
      mgmt 10.95.x.1 -------------------------- ==== --------  10.95.x.2 (mgmt)

Every transfer runs with --verify: a pattern is written, read back and
compared, so a pass means the bytes really moved both ways.
"""
import os
import re
import signal
import socket
import subprocess
import time

from framework.test_suite import TestSuite


def free_port():
    """A TCP port free on loopback right now (the target binds it moments later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def result_line(out):
    lines = [ln for ln in out.splitlines() if "MiB/s" in ln and "tide-bench: transport=" in ln]
    return lines[-1] if lines else ""


class TestTransferEngine(TestSuite):
    def target(self, *args, env=None, prefix=None):
        p = self.start_tool("te_bench/tide-bench", "--mode=target", "--buffer_size=64M", *args,
                            env=env, prefix=prefix, ready="ready", timeout=60)
        m = re.search(r"target '([^']+)' ready", "".join(p.lines))
        self.verify(m is not None, "".join(p.lines))
        return p, m.group(1)

    def initiator(self, name, *args, env=None, prefix=None, timeout=120):
        cmd = [*(prefix or []), self.tool("te_bench/tide-bench"), "--mode=initiator",
               f"--segment_id={name}", "--buffer_size=64M", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.tool_env(env),
                              timeout=timeout)

    def stop(self, p):
        rc, out = self.finish(p, timeout=30, signal_first=signal.SIGTERM)
        self.verify(rc == 0, f"target exited {rc}: {out}")
        return out

    # ---- kernel sockets --------------------------------------------------

    def test_kernel_verify_write_read(self):
        """Steps: target and initiator on loopback kernel sockets; initiator --verify with
        64 KiB blocks, batch 32, 2 s. Verify: exit 0, 'verified', target served both ways."""
        t, name = self.target("--host=127.0.0.1")
        r = self.initiator(name, "--verify", "--block_size=64K", "--batch_size=32",
                           "--duration=2", "--host=127.0.0.1")
        out = self.stop(t)
        self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr)
        self.verify("transport=tcp-kernel" in r.stdout, r.stdout)
        m = re.search(r"served (\d+) reads, (\d+) writes", out)
        self.verify(m and int(m.group(1)) > 0 and int(m.group(2)) > 0, out)

    def test_kernel_mooncake_framing_v1_v2(self):
        """Steps: the initiator forced to Mooncake's framing (MC_TCP_PROTO=1, then 2), as a
        stock Mooncake TE would speak it. Verify: both verify their data."""
        t, name = self.target("--host=127.0.0.1")
        for v in ("1", "2"):
            r = self.initiator(name, "--verify", "--block_size=16K", "--batch_size=8",
                               "--duration=1", "--host=127.0.0.1", env={"MC_TCP_PROTO": v})
            self.verify(r.returncode == 0 and "verified" in r.stdout,
                        f"MC_TCP_PROTO={v}: {r.stdout}{r.stderr}")
        self.stop(t)

    def stock_peer(self, name, *args, timeout=120):
        return subprocess.run([self.tool("te_bench/tide-stock-peer"), "--mode=initiator",
                               f"--segment_id={name}", *args], capture_output=True, text=True,
                              env=self.tool_env(), timeout=timeout)

    @staticmethod
    def time_wait_to(port):
        """Sockets in TIME_WAIT whose remote end is our data port (the client side)."""
        out = subprocess.run(["ss", "-Htan", "state", "time-wait", f"( dport = :{port} )"],
                             capture_output=True, text=True, check=True).stdout
        return len([ln for ln in out.splitlines() if ln.strip()])

    def test_kernel_stock_initiator_connection_per_slice(self):
        """Steps: a Tide target over kernel sockets named by a non-loopback address (as peers on
        other hosts reach it); tide-stock-peer, which behaves as stock Mooncake's TCP transport
        (a new connection per slice, v2 framing), writes a pattern, reads it back and compares
        for 2 s, then the same with four fixed lanes (MC_TCP_ENABLE_CONNECTION_POOL=1), then v1
        reads and writes. Verify: every run exits 0 and verifies its data; after thousands of
        one-shot connections the client side holds (almost) no TIME_WAIT socket toward the
        target, because the target resets a connection the client closed once every byte is
        acknowledged (without that, Linux keeps each client port for 60 s and connect() slows
        10-40x once the ports run out)."""
        addr = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                              capture_output=True, text=True).stdout
        m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", addr)
        host = m.group(1) if m else "127.0.0.1"
        t, name = self.target(f"--host={host}")
        port = int(re.search(r"data port (\d+)", "".join(t.lines)).group(1))
        try:
            r = self.stock_peer(name, "--verify", "--block_size=16K", "--duration=2")
            self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr)
            conns = int(re.search(r"(\d+) connections", r.stdout).group(1))
            tw = self.time_wait_to(port)
            self.verify(conns > 500 and tw < conns // 20,
                        f"{conns} one-shot connections left {tw} client sockets in TIME_WAIT: "
                        f"{r.stdout}")
            r = self.stock_peer(name, "--verify", "--pool", "--block_size=16K", "--duration=1")
            self.verify(r.returncode == 0 and "verified" in r.stdout and " 4 connections" in
                        r.stdout, r.stdout + r.stderr)
            for op in ("write", "read"):
                r = self.stock_peer(name, "--proto=1", f"--operation={op}", "--block_size=4K",
                                    "--duration=0.5")
                self.verify(r.returncode == 0 and "framing=v1" in r.stdout,
                            f"v1 {op}: {r.stdout}{r.stderr}")
        finally:
            out = self.stop(t)
        self.verify("refused 0" in out, out)

    def test_kernel_target_killed_mid_batch(self):
        """Steps: initiator writing 1 MiB blocks for 30 s; the target is killed (SIGKILL) once
        the initiator reports its first second of traffic. Verify: the initiator reports a
        failure and exits 1 within 15 s of the kill."""
        t, name = self.target("--host=127.0.0.1")
        ini = subprocess.Popen([self.tool("te_bench/tide-bench"), "--mode=initiator",
                                f"--segment_id={name}", "--buffer_size=64M",
                                "--operation=write", "--block_size=1M", "--batch_size=16",
                                "--duration=30", "--host=127.0.0.1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=self.tool_env({"MC_TCP_PROTO": ""}))
        try:
            # Mid-batch: once the initiator reports its first second of traffic.
            self.wait_for_line(ini, "MiB/s", 60, "the initiator's first progress line")
        except AssertionError as e:
            ini.kill()
            self.fail(f"{e}: {self.finish(ini)[1]}")
        t.kill()
        t.communicate()
        killed = time.monotonic()
        try:
            rest, _ = ini.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            ini.kill()
            rest, _ = ini.communicate()
            self.fail(f"initiator still running 20 s after the target died: "
                      f"{self.output_so_far(ini)}{rest}")
        out = self.output_so_far(ini) + rest
        self.verify(time.monotonic() - killed < 15, out)
        self.verify(ini.returncode == 1 and "first failure" in out, out)

    def test_kernel_http_metadata_via_master(self):
        """Steps: Tide's mooncake_master with --enable_http_metadata_server; target and initiator
        named explicitly and using --metadata_server=http://.../metadata (no handshake lookup).
        Verify: the initiator finds the target's descriptor through the master and --verify
        passes; after the target stops, its keys are gone (the name no longer resolves)."""
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        mport = s.getsockname()[1]
        s.close()
        master = subprocess.Popen([self.tool("master/mooncake_master"), "--rpc_port=0",
                                   "--metrics_port=0", "--enable_http_metadata_server",
                                   f"--http_metadata_server_port={mport}",
                                   "--http_metadata_server_host=127.0.0.1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=self.tool_env())
        self.addCleanup(master.kill)
        url = f"http://127.0.0.1:{mport}/metadata"

        def accepting():
            self.verify(master.poll() is None, f"mooncake_master exited {master.returncode}")
            try:
                socket.create_connection(("127.0.0.1", mport), 1).close()
                return True
            except OSError:
                return False
        self.wait_until(accepting, 20, f"mooncake_master's HTTP metadata server on port {mport}")
        t, name = self.target("--host=127.0.0.1", f"--metadata_server={url}",
                              "--local_server_name=dts-target")
        self.verify(name == "dts-target", name)
        r = self.initiator(name, "--verify", "--block_size=64K", "--batch_size=16",
                           "--duration=1", "--host=127.0.0.1", f"--metadata_server={url}",
                           "--local_server_name=dts-initiator")
        self.stop(t)
        self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr)
        r = self.initiator(name, "--duration=1", "--host=127.0.0.1", f"--metadata_server={url}",
                           "--local_server_name=dts-initiator2")
        self.verify(r.returncode == 1 and "open segment" in r.stderr, r.stdout + r.stderr)
        master.terminate()
        master.wait(timeout=10)

    def test_bad_flags_are_refused(self):
        """Steps: bad --block_size, unknown flag, rdma without a device.
        Verify: exit codes 2/2/1 with a message naming the problem."""
        r = self.run_tool("te_bench/tide-bench", "--block_size=12X")
        self.verify(r.returncode == 2 and "--block_size" in r.stderr, r.stderr)
        r = self.run_tool("te_bench/tide-bench", "--no_such_flag=1")
        self.verify(r.returncode == 2 and "no_such_flag" in r.stderr, r.stderr)
        r = self.run_tool("te_bench/tide-bench", "--protocol=rdma", "--mode=target")
        self.verify(r.returncode == 1 and "rdma" in (r.stderr + r.stdout), r.stderr)

    # ---- memif -----------------------------------------------------------

    def memif_env(self, role, ip, **extra):
        sock = os.path.join(self.tmp, "te-memif.sock")
        return {**extra, "TIDE_HUGEPAGES": "off",
                "TIDE_DPDK_DEVICE": f"net_memif0,role={role},socket={sock},socket-abstract=no",
                "TIDE_DATA_IP": ip, "TIDE_TCP_RTO_MIN_US": "5000",
                # memif-memif: both ends elide checksums (shared memory on one host).
                "TIDE_CSUM": "elide",
                "TIDE_FILE_PREFIX": f"tide-dts-te-{role}-{os.getpid()}"}

    @staticmethod
    def initiator_output(ini, timeout=120):
        """The initiator's output once it exits (killed after timeout s)."""
        try:
            out, _ = ini.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            ini.kill()
            out, _ = ini.communicate()
        return out

    def memif_pair(self, port, **extra):
        """The initiator is the memif server: started first, it creates the socket the
        target (memif client) connects to; the target starts once the socket exists."""
        name = f"127.0.0.1:{port}"
        sock = os.path.join(self.tmp, "te-memif.sock")
        if os.path.exists(sock):
            os.unlink(sock)  # a previous case's, so the wait below sees this initiator's
        ini = subprocess.Popen([self.tool("te_bench/tide-bench"), "--mode=initiator",
                                f"--segment_id={name}", "--buffer_size=64M", "--verify",
                                "--block_size=64K", "--batch_size=32", "--duration=3",
                                "--host=127.0.0.1", "--open_retry_s=30", "--log_level=info"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=self.tool_env(self.memif_env("server", "10.93.0.1",
                                                                **extra)))
        try:
            self.wait_until(lambda: os.path.exists(sock) or ini.poll() is not None, 60,
                            f"the initiator's memif socket {sock}")
        except AssertionError as e:
            ini.kill()
            self.fail(f"{e}: {ini.communicate()[0]}")
        if not os.path.exists(sock):
            out, _ = ini.communicate()
            self.fail(f"initiator exited {ini.returncode} before creating {sock}: {out}")
        t, tname = self.target("--host=127.0.0.1", f"--rpc_port={port}",
                               env=self.memif_env("client", "10.93.0.2", **extra))
        return ini, t, tname, name

    def test_memif_duplex_target_first(self):
        """Steps: two one-way memif links (TIDE_DPDK_RX_DEVICE): each process transmits on
        the link it serves and receives, as the zero-copy client, on the other's. The target
        starts first, 1 s before the initiator, so its client must wait for a server that
        does not exist yet (one memif link cannot start in that order); --verify with 64 KiB
        blocks, batch 32, 3 s.
        Verify: data verified over tcp-dpdk; both processes opened a duplex port; each
        client waited rather than failing; the target stops cleanly and no socket file is
        left behind."""
        port = free_port()
        name = f"127.0.0.1:{port}"
        ab, ba = (os.path.join(self.tmp, f"te-duplex-{x}.sock") for x in ("ab", "ba"))

        def env(tx, rx, ip, role):
            return {"TIDE_HUGEPAGES": "off",
                    "TIDE_DPDK_DEVICE": f"net_memif0,role=server,socket={tx},socket-abstract=no",
                    "TIDE_DPDK_RX_DEVICE": f"net_memif1,role=client,socket={rx},"
                                           "socket-abstract=no,zero-copy=yes",
                    # memif zero-copy shares the client's pool memory: one file per list.
                    "TIDE_EAL_ARGS": "--single-file-segments",
                    "TIDE_DATA_IP": ip, "TIDE_TCP_RTO_MIN_US": "5000", "TIDE_CSUM": "elide",
                    "TIDE_FILE_PREFIX": f"tide-dts-dx-{role[:3]}-{os.getpid()}"}
        t = subprocess.Popen([self.tool("te_bench/tide-bench"), "--mode=target",
                              "--buffer_size=64M", "--host=127.0.0.1", f"--rpc_port={port}",
                              "--log_level=info"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=self.tool_env(env(ba, ab, "10.93.0.2", "target")))
        time.sleep(1.0)
        ini = subprocess.Popen([self.tool("te_bench/tide-bench"), "--mode=initiator",
                                f"--segment_id={name}", "--buffer_size=64M", "--verify",
                                "--block_size=64K", "--batch_size=32", "--duration=3",
                                "--host=127.0.0.1", "--open_retry_s=30", "--log_level=info"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=self.tool_env(env(ab, ba, "10.93.0.1", "initiator")))
        try:
            self.wait_for_line(t, "ready", 60, "the duplex target to print 'ready'")
        except AssertionError as e:
            t.kill()
            ini.kill()
            self.fail(f"{e}\n{self.output_so_far(t)}{ini.communicate()[0]}")
        out = self.initiator_output(ini)
        tout = self.stop(t)
        self.verify(ini.returncode == 0 and "verified" in out, out + tout)
        self.verify("transport=tcp-dpdk" in out, out)
        for who, text in (("initiator", out), ("target", tout)):
            self.verify("duplex port, transmits on net_memif0" in text and
                        "receives on net_memif1" in text, f"{who}: {text}")
        self.verify("net_memif1: waiting up to 30 s for the memif server" in tout, tout)
        left = [f for f in os.listdir(self.tmp) if f.startswith("te-duplex-")]
        self.verify(left == [], f"socket files left: {left}")

    def test_memif_verify_write_read(self):
        """Steps: initiator (memif server, started first, retrying the handshake) and target
        (memif client) with user-space TCP; --verify with 64 KiB blocks, batch 32, 3 s.
        Verify: exit 0, transport tcp-dpdk, data verified; the target then stops cleanly."""
        ini, t, tname, name = self.memif_pair(free_port())
        self.verify(tname == name, tname)
        out = self.initiator_output(ini)
        tout = self.stop(t)
        self.verify(ini.returncode == 0 and "verified" in out, out + tout)
        self.verify("transport=tcp-dpdk" in out, out)
        self.verify("checksums elided (TIDE_CSUM=elide)" in out, out)

    def test_memif_two_lcores_each(self):
        """Steps: as above with TIDE_LCORES=0,1 on both sides: two queue pairs per port,
        software steering, a stack per lcore, slices dealt over both lcores.
        Verify: data verified, and both of the initiator's lcores carried traffic."""
        ini, t, tname, name = self.memif_pair(free_port(),
                                              TIDE_LCORES="0,1")
        out = self.initiator_output(ini)
        tout = self.stop(t)
        self.verify(ini.returncode == 0 and "verified" in out, out + tout)
        frames = re.findall(r"lcore (\d) user-space TCP: rx_frames (\d+)", out)
        self.verify(len(frames) == 2 and all(int(n) > 0 for _, n in frames), out)

    def test_memif_allow_nets(self):
        """Steps: the memif pair with TIDE_ALLOW_NETS=127.0.0.1/32 on both sides: the
        handshake (loopback) is allowed, the data connections (10.93.0.1 to 10.93.0.2 over
        memif) are not; the initiator writes for 3 s with --verify.
        Verify: the initiator fails (no byte of the target's segment moves) and the target
        logs that its user-space data port refused 10.93.0.1; the target stops cleanly."""
        ini, t, tname, name = self.memif_pair(free_port(), TIDE_ALLOW_NETS="127.0.0.1/32")
        out = self.initiator_output(ini)
        tout = self.stop(t)
        self.verify(ini.returncode == 1 and result_line(out).endswith(", FAILED"),
                    f"initiator exit {ini.returncode}:\n{out}{tout}")
        self.verify("data port: connection from 10.93.0.1 refused (not in TIDE_ALLOW_NETS)"
                    in tout and "target served 0 reads, 0 writes, 0 bytes" in tout, tout)

    # ---- DPDK node <-> kernel node through namespaces -----------------------

    def netns_topology(self):
        if os.geteuid() != 0:
            self.skip("needs root for network namespaces")
        tag = os.getpid() % 100000
        self.nsd, self.nsk = f"tide-ted{tag}", f"tide-tek{tag}"
        x = tag % 250
        self.data_d, self.data_k = f"10.96.{x}.1", f"10.96.{x}.2"
        self.mgmt_d, self.mgmt_k = f"10.95.{x}.1", f"10.95.{x}.2"
        vd, vk, md, mk = f"ted{tag}", f"tek{tag}", f"tmd{tag}", f"tmk{tag}"
        ups = [["ip", "-n", ns, "link", "set", dev, "up"]
               for ns, dev in ((self.nsd, "lo"), (self.nsk, "lo"), (self.nsd, vd),
                               (self.nsk, vk), (self.nsd, md), (self.nsk, mk))]
        cmds = [
            ["ip", "netns", "add", self.nsd], ["ip", "netns", "add", self.nsk],
            ["ip", "link", "add", vd, "netns", self.nsd, "type", "veth", "peer", "name", vk,
             "netns", self.nsk],
            ["ip", "link", "add", md, "netns", self.nsd, "type", "veth", "peer", "name", mk,
             "netns", self.nsk],
            ["ip", "netns", "exec", self.nsd, "sysctl", "-qw",
             f"net.ipv6.conf.{vd}.disable_ipv6=1"],
        ] + ups + [
            ["ip", "-n", self.nsk, "addr", "add", f"{self.data_k}/24", "dev", vk],
            ["ip", "-n", self.nsd, "addr", "add", f"{self.mgmt_d}/24", "dev", md],
            ["ip", "-n", self.nsk, "addr", "add", f"{self.mgmt_k}/24", "dev", mk],
            # netns D reaches K's data address for the handshake over the management link.
            ["ip", "-n", self.nsd, "route", "add", f"{self.data_k}/32", "via", self.mgmt_k],
            ["ip", "netns", "exec", self.nsk, "ethtool", "-K", vk, "tx", "off", "gro", "off"],
        ]
        self.addCleanup(self.sh, "ip", "netns", "del", self.nsd, check=False)
        self.addCleanup(self.sh, "ip", "netns", "del", self.nsk, check=False)
        for c in cmds:
            try:
                self.sh(*c)
            except (subprocess.CalledProcessError, FileNotFoundError) as e:
                # As root this is a broken host or a missing program (tools/check-prereqs.sh
                # names its package): a failure, not a skip.
                self.fail(f"could not build the topology: {' '.join(c)}: "
                          f"{getattr(e, 'stderr', e)}")
        self.dpdk_env = {"TIDE_HUGEPAGES": "off",
                         "TIDE_DPDK_DEVICE": f"net_af_packet0,iface={vd}",
                         "TIDE_DATA_IP": self.data_d, "TIDE_TCP_RTO_MIN_US": "200000",
                         "TIDE_FILE_PREFIX": f"tide-dts-ted-{tag}"}

    def test_kernel_initiator_to_dpdk_target(self):
        """Steps: DPDK target in netns D, kernel-socket initiator in netns K; the initiator
        fetches the descriptor over the management link and moves data to tide_data_ip
        over the veth pair. Verify: --verify passes (write + read back) with Linux TCP on one
        end and Tide's user-space TCP on the other."""
        self.netns_topology()
        t, name = self.target(f"--host={self.mgmt_d}", env=self.dpdk_env,
                              prefix=["ip", "netns", "exec", self.nsd])
        r = self.initiator(name, "--verify", "--block_size=64K", "--batch_size=16",
                           "--duration=2", f"--host={self.mgmt_k}",
                           prefix=["ip", "netns", "exec", self.nsk])
        tout = self.stop(t)
        self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr + tout)
        self.verify("transport=tcp-kernel" in r.stdout, r.stdout)

    def test_dpdk_initiator_to_kernel_target(self):
        """Steps: kernel-socket target in netns K (named by its data address), DPDK initiator
        in netns D. Verify: --verify passes over Tide TCP -> Linux TCP."""
        self.netns_topology()
        t, name = self.target(f"--host={self.data_k}", prefix=["ip", "netns", "exec", self.nsk])
        r = self.initiator(name, "--verify", "--block_size=64K", "--batch_size=16",
                           "--duration=2", f"--host={self.mgmt_d}", env=self.dpdk_env,
                           prefix=["ip", "netns", "exec", self.nsd])
        tout = self.stop(t)
        self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr + tout)
        self.verify("transport=tcp-dpdk" in r.stdout, r.stdout)
