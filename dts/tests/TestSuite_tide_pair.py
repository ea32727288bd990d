"""Functional suite: two Tide processes talking TCP over DPDK net_memif.

Topology: one host, two processes, each with its own EAL and user-space
stack, joined by a memif link (UNIX socket + shared memory, --no-huge).
The sender is the memif server and the sink the client: memif's server side
must not be polling when its client vanishes (a known 22.11 crash), and the
sender is the side that finishes first.
"""
import os
import re

from framework.test_suite import TestSuite


class TestTidePair(TestSuite):
    def env(self, role, ip, **extra):
        sock = os.path.join(self.tmp, "memif.sock")
        e = {"TIDE_HUGEPAGES": "off",
             "TIDE_DPDK_DEVICE": f"net_memif0,role={role},socket={sock},socket-abstract=no",
             "TIDE_DATA_IP": ip,
             "TIDE_FILE_PREFIX": f"tide-dts-pair-{role}-{os.getpid()}",
             # memif-memif: both ends elide checksums (shared memory on one host).
             "TIDE_CSUM": "elide"}
        e.update(extra)
        return e

    def transfer(self, nbytes, sink_extra=None, send_extra=None):
        # The memif server (sender) must exist before its client (sink) starts;
        # the sender's SYN retransmission covers the moment the link is down.
        sender = self.start_tool("net/tide-net", "send", "--peer", "10.97.0.2", "--port", "6001",
                                 "--bytes", str(nbytes),
                                 env=self.env("server", "10.97.0.1", **(send_extra or {})))
        sink = self.start_tool("net/tide-net", "serve", "--port", "6001", "--connections", "1",
                               env=self.env("client", "10.97.0.2", **(sink_extra or {})))
        src_rc, src_out = self.finish(sender, timeout=120)
        rc, out = self.finish(sink, timeout=60)
        return src_rc, src_out, rc, out

    def test_bulk_transfer_over_memif(self):
        """Steps: tide-net serve (memif client) and tide-net send 64 MiB (memif server).
        Verify: both exit 0, every byte arrives in order, no retransmissions needed."""
        src_rc, src_out, rc, out = self.transfer(64 << 20)
        self.verify(src_rc == 0, src_out)
        self.verify(rc == 0, out)
        self.verify(f"{64 << 20} bytes in, 0 out, 0 mismatched" in out, out)

    def test_transfer_survives_injected_faults(self):
        """Steps: both sides drop 1%, duplicate 0.5%, reorder 1%, corrupt 0.5% (TIDE_FAULT).
        Verify: 8 MiB still arrive intact; retransmissions and checksum drops are counted."""
        spec = "drop=0.01,dup=0.005,reorder=0.01,corrupt=0.005,seed=11"
        # Corruption is only caught by checksums: this case keeps them (TIDE_CSUM=auto).
        faults = {"TIDE_FAULT": spec, "TIDE_CSUM": "auto"}
        src_rc, src_out, rc, out = self.transfer(8 << 20, faults, dict(faults))
        self.verify(src_rc == 0, src_out)
        self.verify(rc == 0 and f"{8 << 20} bytes in, 0 out, 0 mismatched" in out, out)
        self.verify(" tcp_retrans_segs=0 " not in src_out, src_out)

    def test_elision_logged_and_bulk_counts_no_checksum_drops(self):
        """Steps: 16 MiB over memif with TIDE_CSUM=elide on both ends.
        Verify: both log 'checksums elided (TIDE_CSUM=elide)', every byte arrives, and
        neither side counted a checksum drop."""
        src_rc, src_out, rc, out = self.transfer(16 << 20)
        self.verify(src_rc == 0 and rc == 0, src_out + out)
        self.verify("checksums elided (TIDE_CSUM=elide)" in src_out, src_out)
        self.verify("checksums elided (TIDE_CSUM=elide)" in out, out)
        self.verify(f"{16 << 20} bytes in, 0 out, 0 mismatched" in out, out)
        for o in (src_out, out):
            self.verify(" ip_rx_bad_csum=0 " in o and " tcp_rx_bad_csum=0 " in o, o)

    def test_elision_on_one_end_only_fails(self):
        """Steps: the sender elides, the sink verifies (TIDE_CSUM=auto).
        Verify: the sink drops the sender's frames as bad IPv4 checksums and says the peer
        probably elides; the sender gives up; no byte arrives."""
        sender = self.start_tool("net/tide-net", "send", "--peer", "10.97.0.2", "--port", "6001",
                                 "--bytes", str(1 << 20), env=self.env("server", "10.97.0.1"))
        sink = self.start_tool("net/tide-net", "serve", "--port", "6001", "--connections", "1",
                               "--duration", "15",
                               env=self.env("client", "10.97.0.2", TIDE_CSUM="auto"))
        src_rc, src_out = self.finish(sender, timeout=60)
        rc, out = self.finish(sink, timeout=60)
        self.verify(src_rc != 0, src_out)
        m = re.search(r" ip_rx_bad_csum=(\d+) ", out)
        self.verify(m is not None and int(m.group(1)) > 0, out)
        self.verify("the peer probably elides checksums" in out, out)

    def test_elision_with_corrupting_faults_refused(self):
        """Steps: TIDE_CSUM=elide with TIDE_FAULT corrupt=0.01.
        Verify: tide-net refuses to start, naming TIDE_CSUM and TIDE_FAULT."""
        r = self.run_tool("net/tide-net", "serve", "--port", "6001", "--connections", "1",
                          env=self.env("client", "10.97.0.2", TIDE_FAULT="corrupt=0.01"))
        self.verify(r.returncode != 0, r.stdout + r.stderr)
        self.verify("TIDE_CSUM: 'elide' cannot be combined with TIDE_FAULT" in r.stderr + r.stdout,
                    r.stdout + r.stderr)
