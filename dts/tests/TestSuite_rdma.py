"""Functional suite: the transfer engine over RDMA on real devices (tide-bench pairs).

Needs at least one RDMA device with an active port, as `ibv_devices` (Debian
ibverbs-utils) lists them; without one every case is skipped and the suite says
why. Soft-RoCE (rdma_rxe) counts as a device. Topology: both processes on this
host, handshake on loopback, data through the device (RoCE/IB loopback):

    tide-bench target  --protocol=rdma   MOONCAKE_DEVICE=<dev0>[,<dev1>]
    tide-bench initiator --protocol=rdma MOONCAKE_DEVICE=<dev0>[,<dev1>]

Metric: every case runs --verify (write a pattern, read it back, compare), so a
pass means the bytes really moved through the NIC both ways; the MiB/s line is
printed for the record. Set TIDE_DTS_RDMA_DEVICES to choose devices (comma list).
"""
import os
import re
import resource
import shutil
import signal
import subprocess

from framework.test_suite import TestSuite


def rdma_devices():
    """Names `ibv_devices` lists (falls back to /sys/class/infiniband when the tool is
    not installed); [] when there is none."""
    names = []
    tool = shutil.which("ibv_devices")
    if tool:
        try:
            out = subprocess.run([tool], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] not in ("device", "------"):
                names.append(parts[0])
    elif os.path.isdir("/sys/class/infiniband"):
        names = sorted(os.listdir("/sys/class/infiniband"))
    return names


def port_active(dev):
    try:
        with open(f"/sys/class/infiniband/{dev}/ports/1/state") as f:
            return "ACTIVE" in f.read()
    except OSError:
        return True  # no sysfs view: let the engine decide


class TestRdma(TestSuite):
    @classmethod
    def set_up_all(cls):
        wanted = os.environ.get("TIDE_DTS_RDMA_DEVICES", "")
        found = rdma_devices()
        devs = [d for d in (wanted.split(",") if wanted else found) if d and port_active(d)]
        cls.devices = devs
        cls.reason = None
        if not found:
            cls.reason = ("no RDMA device: `ibv_devices` lists none (or ibverbs-utils is not "
                          "installed and /sys/class/infiniband is empty)")
        elif not devs:
            cls.reason = f"RDMA devices {found} have no active port 1"

    def set_up_test_case(self):
        if self.reason:
            self.skip(self.reason)
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft != resource.RLIM_INFINITY and soft < (256 << 20):
            self.skip(f"memlock limit {soft} bytes is too small to register 64 MiB buffers "
                      "on both ends (ulimit -l unlimited; see README RDMA set-up)")

    def env(self, devices):
        return {"MOONCAKE_DEVICE": ",".join(devices), "MOONCAKE_PROTOCOL": "rdma"}

    def target(self, proto, devices):
        p = self.start_tool("te_bench/tide-bench", "--mode=target", "--buffer_size=64M",
                            f"--protocol={proto}", "--host=127.0.0.1",
                            env=self.env(devices), ready="ready", timeout=60)
        m = re.search(r"target '([^']+)' ready", "".join(p.lines))
        self.verify(m is not None, "".join(p.lines))
        return p, m.group(1)

    def initiator(self, name, proto, devices, *args):
        cmd = [self.tool("te_bench/tide-bench"), "--mode=initiator", f"--segment_id={name}",
               "--buffer_size=64M", f"--protocol={proto}", "--host=127.0.0.1", "--verify",
               *args]
        return subprocess.run(cmd, capture_output=True, text=True,
                              env=self.tool_env(self.env(devices)), timeout=120)

    def stop(self, p):
        rc, out = self.finish(p, timeout=30, signal_first=signal.SIGTERM)
        self.verify(rc == 0, f"target exited {rc}: {out}")
        return out

    def test_rdma_verify_one_device(self):
        """Steps: target and initiator with --protocol=rdma on the first device; initiator
        --verify, 64 KiB blocks, batch 32, 3 s. Verify: exit 0, 'verified',
        transport=rdma."""
        dev = self.devices[:1]
        t, name = self.target("rdma", dev)
        r = self.initiator(name, "rdma", dev, "--block_size=64K", "--batch_size=32",
                           "--duration=3")
        self.stop(t)
        self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr)
        self.verify("transport=rdma" in r.stdout, r.stdout)
        print(r.stdout.strip().splitlines()[-1])

    def test_rdma_verify_large_blocks_all_devices(self):
        """Steps: every listed device on both ends (MOONCAKE_DEVICE=a,b,...), 4 MiB blocks
        (split into slices over devices and QPs), batch 8, 3 s. Verify: 'verified'."""
        t, name = self.target("rdma", self.devices)
        r = self.initiator(name, "rdma", self.devices, "--block_size=4M", "--batch_size=8",
                           "--duration=3")
        self.stop(t)
        self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr)

    def test_rdma_initiator_to_tcp_only_target(self):
        """Steps: target with --protocol=tcp, initiator with --protocol=rdma. Verify: the
        pair agrees on TCP (the only transport both have) and 'verified'."""
        dev = self.devices[:1]
        t, name = self.target("tcp", dev)
        r = self.initiator(name, "rdma", dev, "--block_size=64K", "--batch_size=16",
                           "--duration=2")
        self.stop(t)
        self.verify(r.returncode == 0 and "verified" in r.stdout, r.stdout + r.stderr)

    def test_rdma_unknown_device_fails_clearly(self):
        """Steps: initiator-side engine with MOONCAKE_DEVICE naming a device this node lacks.
        Verify: exit non-zero, the message names the device and MOONCAKE_PROTOCOL=tcp."""
        t, name = self.target("rdma", self.devices[:1])
        r = self.initiator(name, "rdma", ["tide_no_such_dev"], "--duration=1")
        self.stop(t)
        out = r.stdout + r.stderr
        self.verify(r.returncode != 0, out)
        self.verify("tide_no_such_dev" in out and "MOONCAKE_PROTOCOL=tcp" in out, out)
