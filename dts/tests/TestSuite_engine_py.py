"""Functional suite: Tide's Python mooncake.engine (TransferEngine over ctypes) on Tide's
user-space TCP, one engine per network namespace, joined by a veth pair that each side
drives with DPDK net_af_packet. A second veth pair with kernel addresses carries the
P2PHANDSHAKE handshake (the management network); the descriptor advertises each side's
TIDE_DATA_IP, so the bytes move over the user-space stacks:

      netns A (Miles trainer)                          netns B (rollout rank)
      engine_peer.py  tcp-dpdk -- af_packet -- vA ==== vB -- af_packet -- tcp-dpdk
      data 10.88.x.1 (Tide's, not the kernel's)          data 10.88.x.2
      mgmt 10.89.x.1 (kernel, handshake) -- mA ======== mB -- 10.89.x.2

Each side is tests/python/engine_peer.py driven over stdin/stdout, configured by a node
file (TIDE_NODE_ENV) naming the DPDK device and TIDE_RDMA_AS_TCP=1, and initialized as
Miles initializes: initialize(ip, "P2PHANDSHAKE", "rdma", ""). Needs root (namespaces).
"""
import json
import os
import select
import subprocess
import time

from framework.test_suite import TestSuite

PEER = os.path.join(TestSuite.source_root, "tests", "python", "engine_peer.py")
MiB, KiB = 1 << 20, 1 << 10


class Engine:
    """engine_peer.py in a namespace; call() sends one JSON request and returns the answer
    within a deadline, or fails naming the request and showing the process's stderr."""

    def __init__(self, case, ns, env, tag):
        self.case, self.tag = case, tag
        self.errpath = os.path.join(case.tmp, f"{tag}.stderr")
        self.err = open(self.errpath, "wb")
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", PEER],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, env=env)
        self.pending = b""

    def stderr(self):
        with open(self.errpath, "rb") as f:
            return f.read().decode(errors="replace")[-6000:]

    def call(self, op, timeout=120, **kw):
        try:
            self.p.stdin.write((json.dumps({"op": op, **kw}) + "\n").encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            self.case.fail(f"{self.tag} exited ({self.p.wait()}) before {op}:\n{self.stderr()}")
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.case.fail(f"{self.tag}: no answer to {op} within {timeout} s:\n"
                               f"{self.stderr()}")
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.case.fail(f"{self.tag} exited ({self.p.wait()}) during {op}:\n"
                               f"{self.stderr()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        ans = json.loads(line)
        if not ans.pop("ok", False):
            self.case.fail(f"{self.tag} {op}: {ans.get('error')}\n{self.stderr()}")
        return ans

    def stop(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write(b'{"op": "exit"}\n')
                self.p.stdin.flush()
                self.p.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()
        self.err.close()


def miles_sizes_small():
    """200 parameters, ~45 MiB: 16 MiB, 4 x 4 MiB, 20 x 512 KiB, 175 of 4-32 KiB, in a
    fixed interleaved order (small next to large in one bucket)."""
    sizes = [16 * MiB] + [4 * MiB] * 4 + [512 * KiB] * 20
    sizes += [4 * KiB * (1 + (i * 5) % 8) for i in range(175)]
    order = sorted(range(len(sizes)), key=lambda i: (i * 37) % len(sizes))
    return [sizes[i] for i in order]


class TestEnginePy(TestSuite):
    def topology(self):
        if os.geteuid() != 0:
            self.skip("needs root for network namespaces")
        tag = os.getpid() % 100000
        x = tag % 250
        self.nsa, self.nsb = f"tide-epa{tag}", f"tide-epb{tag}"
        self.data = (f"10.88.{x}.1", f"10.88.{x}.2")
        self.mgmt = (f"10.89.{x}.1", f"10.89.{x}.2")
        self.va, self.vb, ma, mb = f"epa{tag}", f"epb{tag}", f"ema{tag}", f"emb{tag}"
        cmds = [
            ["ip", "netns", "add", self.nsa], ["ip", "netns", "add", self.nsb],
            ["ip", "link", "add", self.va, "netns", self.nsa, "type", "veth", "peer", "name",
             self.vb, "netns", self.nsb],
            ["ip", "link", "add", ma, "netns", self.nsa, "type", "veth", "peer", "name", mb,
             "netns", self.nsb],
            ["ip", "netns", "exec", self.nsa, "sysctl", "-qw",
             f"net.ipv6.conf.{self.va}.disable_ipv6=1"],
            ["ip", "netns", "exec", self.nsb, "sysctl", "-qw",
             f"net.ipv6.conf.{self.vb}.disable_ipv6=1"],
        ] + [["ip", "-n", ns, "link", "set", dev, "up"]
             for ns, dev in ((self.nsa, "lo"), (self.nsb, "lo"), (self.nsa, self.va),
                             (self.nsb, self.vb), (self.nsa, ma), (self.nsb, mb))] + [
            ["ip", "-n", self.nsa, "addr", "add", f"{self.mgmt[0]}/24", "dev", ma],
            ["ip", "-n", self.nsb, "addr", "add", f"{self.mgmt[1]}/24", "dev", mb],
        ]
        self.addCleanup(self.sh, "ip", "netns", "del", self.nsa, check=False)
        self.addCleanup(self.sh, "ip", "netns", "del", self.nsb, check=False)
        for c in cmds:
            try:
                self.sh(*c)
            except (subprocess.CalledProcessError, FileNotFoundError) as e:
                self.fail(f"could not build the topology: {' '.join(c)}: "
                          f"{getattr(e, 'stderr', e)}")

    def node_file(self, side):
        """The node file of side 0 (A) or 1 (B): the DPDK device and the data address,
        and TIDE_RDMA_AS_TCP=1 so Miles' protocol "rdma" runs over user-space TCP."""
        iface = (self.va, self.vb)[side]
        return self.write(f"node-{'ab'[side]}.env", "\n".join([
            f"TIDE_DPDK_DEVICE=net_af_packet0,iface={iface}",
            f"TIDE_DATA_IP={self.data[side]}",
            "TIDE_HUGEPAGES=off",
            f"TIDE_FILE_PREFIX=tide-dts-ep{'ab'[side]}-{os.getpid()}",
            "TIDE_TCP_RTO_MIN_US=200000",
            "TIDE_RDMA_AS_TCP=1",
            ""]))

    def engine(self, side, tag, proto):
        env = self.tool_env({
            "TIDE_NODE_ENV": self.node_file(side),
            "LIBTIDESTORE": os.path.join(self.build_dir, "store", "client",
                                         "libtidestore.so"),
            "PYTHONPATH": os.path.join(self.source_root, "store", "python")})
        env.pop("MALLOC_PERTURB_", None)  # meson's; it would fill every numpy arena
        e = Engine(self, (self.nsa, self.nsb)[side], env, tag)
        self.addCleanup(e.stop)
        ans = e.call("init", host=self.mgmt[side], meta="P2PHANDSHAKE", proto=proto, dev="",
                     timeout=90)
        self.verify(ans["rc"] == 0, f"{tag}: initialize = {ans['rc']}\n{e.stderr()}")
        e.name, e.transport = ans["name"], ans["transport"]
        return e

    def veth_bytes(self, ns, dev, what):
        r = self.sh("ip", "netns", "exec", ns, "cat", f"/sys/class/net/{dev}/statistics/{what}")
        return int(r.stdout)

    def push_and_verify(self, proto, workers, bucket_bytes):
        """The trainer in A registers the ~45 MiB of parameters one register_memory call
        each and pushes two weight updates to the rank in B (one batch_transfer_sync_write
        per bucket, on `workers` threads); both engines initialized with `proto`."""
        self.topology()
        sizes = miles_sizes_small()
        align, offs, pos = 64, [], 0
        for n in sizes:  # miles_layout() of engine_peer.py with one rank
            offs.append(pos)
            pos += (n + 2 * align - 1) // align * align
        region = pos
        rollout = self.engine(1, "rollout", proto)
        base = rollout.call("alloc", id="w", size=region)["addr"]
        split = next(o for o in offs if o >= region // 2)
        rcs = rollout.call("register", addrs=[base, base + split],
                           lens=[split, region - split])["rcs"]
        self.verify(rcs == [0, 0], f"rollout register_memory: {rcs}")
        trainer = self.engine(0, "trainer", proto)
        for e in (rollout, trainer):
            self.verify(e.transport == "tcp-dpdk",
                        f"{e.tag} runs {e.transport!r}, not tcp-dpdk:\n{e.stderr()}")
        rx0 = self.veth_bytes(self.nsb, self.vb, "rx_bytes")
        total = sum(sizes)
        for step, seed0 in ((1, 10000), (2, 20000)):
            seeds = [seed0 + i for i in range(len(sizes))]
            ans = trainer.call("miles", sizes=sizes, seeds=seeds, peers=[rollout.name],
                               bases=[base], workers=workers, bucket_bytes=bucket_bytes,
                               timeout=240)
            self.verify("rcs" in ans, f"register_memory of the parameters: "
                                      f"{ans.get('reg_rcs')}\n{trainer.stderr()}")
            rcs = ans["rcs"]
            self.verify(len(rcs) > workers and all(rc == 0 for rc in rcs),
                        f"update {step}: batch_transfer_sync_write returned {rcs}\n"
                        f"{trainer.stderr()}\n{rollout.stderr()}")
            items = [{"off": o, "len": n, "seed": s} for o, n, s in zip(offs, sizes, seeds)]
            bad = rollout.call("verify", id="w", items=items, timeout=120)["bad"]
            self.verify(bad == [], f"update {step}: " + "; ".join(bad))
            print(f"\n    {proto} update {step}: {total / MiB:.0f} MiB in {len(rcs)} calls, "
                  f"{ans['secs']:.2f} s ({total / MiB / max(ans['secs'], 1e-6):.0f} MiB/s)"
                  + (f", {len(sizes)} register_memory in {ans['reg_secs']:.2f} s"
                     if step == 1 else ""), end="")
        rx = self.veth_bytes(self.nsb, self.vb, "rx_bytes") - rx0
        self.verify(rx >= 2 * total, f"{self.vb} received {rx} B for 2 x {total} B of weights")

    def test_miles_p2p_rdma_as_tcp_over_dpdk(self):
        """Steps: a rollout rank in netns B (one weight region, registered as two runs) and
        Miles' trainer in netns A, both initialize(mgmt ip, "P2PHANDSHAKE", "rdma", "") on
        a node file with a net_af_packet device and TIDE_RDMA_AS_TCP=1; the trainer
        registers each of 200 parameters (4 KiB-16 MiB, ~45 MiB) with register_memory and
        pushes two weight updates (different contents), each as one
        batch_transfer_sync_write per 2 MiB bucket on 4 threads.
        Verify: both engines run tcp-dpdk; every call returns 0; after each update the rank
        holds every byte of every parameter at its place and zero between them; the data
        veth carried at least the bytes of both updates."""
        self.push_and_verify("rdma", 4, 2 * MiB)

    def test_tcp_ten_threads_over_dpdk(self):
        """Steps: as above with protocol "tcp" (vLLM's connector with mooncake_protocol
        tcp) and the calls on 10 threads (its sender pool).
        Verify: as above."""
        self.push_and_verify("tcp", 10, 1 * MiB)
