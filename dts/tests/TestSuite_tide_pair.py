"""Functional suite: two Tide processes talking TCP over DPDK net_memif.

Topology: one host, two processes, each with its own EAL and user-space
stack, joined by a memif link (UNIX socket + shared memory, --no-huge).
The sender is the memif server and the sink the client: memif's server side
must not be polling when its client vanishes (a known 22.11 crash), and the
sender is the side that finishes first.
"""
import os

from framework.test_suite import TestSuite


class TestTidePair(TestSuite):
    def env(self, role, ip, **extra):
        sock = os.path.join(self.tmp, "memif.sock")
        e = {"TIDE_HUGEPAGES": "off",
             "TIDE_DPDK_DEVICE": f"net_memif0,role={role},socket={sock},socket-abstract=no",
             "TIDE_DATA_IP": ip,
             "TIDE_FILE_PREFIX": f"tide-dts-pair-{role}-{os.getpid()}"}
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
        src_rc, src_out, rc, out = self.transfer(8 << 20, {"TIDE_FAULT": spec},
                                                 {"TIDE_FAULT": spec})
        self.verify(src_rc == 0, src_out)
        self.verify(rc == 0 and f"{8 << 20} bytes in, 0 out, 0 mismatched" in out, out)
        self.verify(" tcp_retrans_segs=0 " not in src_out, src_out)
