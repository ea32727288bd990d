"""Functional suite: Tide's user-space TCP/IP stack against the Linux kernel.

Topology: the root namespace runs tide-net on DPDK net_af_packet bound to one
end of a veth pair (no kernel IP on it); the other end lives in a private
network namespace with a kernel IPv4 address. Only that namespace is ever a
traffic target. Linux's side computes TCP checksums lazily on veth
(CHECKSUM_PARTIAL), which af_packet would hand to DPDK unfilled, so TX
checksum offload is turned off on the namespace's end, as on any
af_packet/veth DPDK setup.
"""
import os
import signal
import subprocess

from framework.test_suite import TestSuite

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linux_peer.py")


class TestLinuxInterop(TestSuite):
    ns = veth = peer_if = None

    @classmethod
    def set_up_all(cls):
        if os.geteuid() != 0:
            return
        tag = os.getpid() % 100000
        cls.ns = f"tide-lx{tag}"
        cls.veth, cls.peer_if = f"tdl{tag}a", f"tdl{tag}b"
        cls.subnet = f"10.98.{tag % 250}"
        cmds = [
            ["ip", "netns", "add", cls.ns],
            ["ip", "link", "add", cls.veth, "type", "veth", "peer", "name", cls.peer_if],
            ["ip", "link", "set", cls.peer_if, "netns", cls.ns],
            ["ip", "-n", cls.ns, "addr", "add", f"{cls.subnet}.2/24", "dev", cls.peer_if],
            ["ip", "-n", cls.ns, "link", "set", "lo", "up"],
            ["ip", "-n", cls.ns, "link", "set", cls.peer_if, "up"],
            ["ip", "link", "set", cls.veth, "up"],
            ["sysctl", "-qw", f"net.ipv6.conf.{cls.veth}.disable_ipv6=1"],
            ["ip", "netns", "exec", cls.ns, "ethtool", "-K", cls.peer_if, "tx", "off"],
        ]
        try:
            for c in cmds:
                cls.sh(*c)
        except (subprocess.CalledProcessError, FileNotFoundError) as e:
            cls.tear_down_all()
            cls.ns = None
            cls.setup_error = f"{' '.join(c)}: {getattr(e, 'stderr', e)}"

    @classmethod
    def tear_down_all(cls):
        if cls.veth:
            cls.sh("ip", "link", "del", cls.veth, check=False)
        if cls.ns:
            cls.sh("ip", "netns", "del", cls.ns, check=False)

    def set_up_test_case(self):
        if os.geteuid() != 0:
            self.skip("needs root for network namespaces")
        if self.ns is None:
            self.skip(f"could not build the topology: {getattr(self, 'setup_error', '?')}")

    def tide_env(self, **extra):
        env = {"TIDE_HUGEPAGES": "off",
               "TIDE_DPDK_DEVICE": f"net_af_packet0,iface={self.veth}",
               "TIDE_DATA_IP": f"{self.subnet}.1",
               "TIDE_FILE_PREFIX": f"tide-dts-lx{os.getpid()}",
               # Linux delays ACKs: a 1 ms RTO floor would retransmit spuriously.
               "TIDE_TCP_RTO_MIN_US": "200000"}
        env.update(extra)
        return env

    def in_ns(self, *cmd, timeout=120):
        return self.sh("ip", "netns", "exec", self.ns, *cmd, check=False, timeout=timeout)

    def test_linux_ping_gets_replies(self):
        """Steps: tide-net serves; Linux pings its data IP 5 times.
        Verify: 0% loss; tide-net counts 5 echo requests and exits 0 on SIGTERM."""
        srv = self.start_tool("net/tide-net", "serve", env=self.tide_env())
        r = self.in_ns("ping", "-c", "5", "-i", "0.2", "-W", "2", f"{self.subnet}.1")
        rc, out = self.finish(srv, signal_first=signal.SIGTERM)
        self.verify(r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr)
        self.verify(rc == 0, out)
        self.verify("icmp echo 5;" in out, out)

    def test_linux_client_sends_to_tide(self):
        """Steps: tide-net sinks one connection; a Linux socket sends 4 MiB.
        Verify: every byte arrives in order; both sides exit 0."""
        srv = self.start_tool("net/tide-net", "serve", "--port", "5101", "--connections", "1",
                              env=self.tide_env())
        r = self.in_ns("/usr/bin/python3", PEER, "send", f"{self.subnet}.1", "5101",
                       str(4 << 20))
        rc, out = self.finish(srv)
        self.verify(r.returncode == 0, r.stdout + r.stderr)
        self.verify(rc == 0, out)
        self.verify(f"{4 << 20} bytes in, 0 out, 0 mismatched" in out, out)

    def test_linux_client_echo(self):
        """Steps: tide-net echoes; a Linux socket sends 1 MiB and reads it back.
        Verify: the echo equals what was sent."""
        srv = self.start_tool("net/tide-net", "serve", "--port", "5102", "--echo",
                              "--connections", "1", env=self.tide_env())
        r = self.in_ns("/usr/bin/python3", PEER, "echo", f"{self.subnet}.1", "5102",
                       str(1 << 20))
        rc, out = self.finish(srv)
        self.verify(r.returncode == 0 and "bad 0" in r.stdout, r.stdout + r.stderr + out)
        self.verify(rc == 0, out)

    def test_tide_client_sends_to_linux(self):
        """Steps: a Linux socket listens; tide-net connects and sends 4 MiB.
        Verify: Linux receives every byte intact; tide-net exits 0."""
        lx = subprocess.Popen(["ip", "netns", "exec", self.ns, "/usr/bin/python3", PEER, "recv",
                               "5103"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        self.verify("listening" in lx.stdout.readline(), "Linux listener did not start")
        p = self.run_tool("net/tide-net", "send", "--peer", f"{self.subnet}.2", "--port", "5103",
                          "--bytes", "4mb", env=self.tide_env())
        out, _ = lx.communicate(timeout=60)
        self.verify(p.returncode == 0, p.stdout + p.stderr)
        self.verify(f"received {4 << 20} bad 0" in out, out)

    def test_lossy_tide_side_still_delivers(self):
        """Steps: tide-net drops and reorders 2% of its frames (TIDE_FAULT); Linux sends 1 MiB.
        Verify: every byte arrives intact; the injector reports what it did."""
        srv = self.start_tool("net/tide-net", "serve", "--port", "5104", "--connections", "1",
                              env=self.tide_env(TIDE_FAULT="drop=0.02,reorder=0.02,seed=5"))
        r = self.in_ns("/usr/bin/python3", PEER, "send", f"{self.subnet}.1", "5104",
                       str(1 << 20))
        rc, out = self.finish(srv)
        self.verify(r.returncode == 0, r.stdout + r.stderr)
        self.verify(rc == 0 and f"{1 << 20} bytes in, 0 out, 0 mismatched" in out, out)
        self.verify("injected faults: dropped" in out, out)

    def test_connect_to_closed_port_fails_fast(self):
        """Steps: tide-net sends to a Linux port nobody listens on.
        Verify: exit 1 with 'Connection refused', well before any timeout."""
        p = self.run_tool("net/tide-net", "send", "--peer", f"{self.subnet}.2", "--port", "5199",
                          "--bytes", "1k", env=self.tide_env(), timeout=30)
        self.verify(p.returncode == 1, p.stdout + p.stderr)
        self.verify("Connection refused" in p.stderr, p.stderr)
