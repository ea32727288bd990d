"""Functional suite: the main job (tide-cluster) as a user runs it.

Topology: one host, two in-process Tide nodes joined by a DPDK net_ring link.
"""
import os

from framework.test_suite import TestSuite


class TestCluster(TestSuite):
    sample = None

    @classmethod
    def set_up_all(cls):
        cls.sample = os.path.join(cls.source_root, "tools", "node.env.sample")

    def run_cluster(self, *args, env=None):
        e = {"TIDE_FILE_PREFIX": "tide-dts-cluster"}
        e.update(env or {})
        return self.run_tool("cluster/tide-cluster", "--node-env", self.sample, *args, env=e)

    def test_no_hugepages_transfer_verified(self):
        """Steps: run tide-cluster with TIDE_HUGEPAGES=off.
        Verify: exit 0, both nodes' EALs ran without hugepages, every object verified,
        allocator stats printed."""
        p = self.run_cluster("--shards", "8", env={"TIDE_HUGEPAGES": "off"})
        self.verify(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        self.verify("hugepages off" in p.stdout, p.stdout)
        for node in ("node-a", "node-b"):
            line = [ln for ln in p.stdout.splitlines() if ln.strip().startswith(node + ":")]
            self.verify(line and "no hugepages" in line[0], p.stdout)
        self.verify("0 incomplete, 0 mismatched" in p.stdout, p.stdout)
        self.verify("RESULT: OK: 296 objects" in p.stdout, p.stdout)
        self.verify("fragmentation" in p.stdout, p.stdout)

    def test_env_overrides_file(self):
        """Steps: set MOONCAKE_GLOBAL_SEGMENT_SIZE in the environment.
        Verify: the effective segment size and its source are the environment's."""
        p = self.run_cluster("--shards", "4", env={"TIDE_HUGEPAGES": "off",
                                                   "MOONCAKE_GLOBAL_SEGMENT_SIZE": "64mb"})
        self.verify(p.returncode == 0, p.stderr)
        self.verify("segment size per node 64 MiB (from environment)" in p.stdout, p.stdout)

    def test_full_segment_is_an_error_not_a_success(self):
        """Steps: give each node a 1 MiB segment, far less than the workload.
        Verify: exit 1, the error names the full segment and the key that sizes it, no
        success line."""
        p = self.run_cluster("--shards", "8", env={"TIDE_HUGEPAGES": "off",
                                                   "MOONCAKE_GLOBAL_SEGMENT_SIZE": "1mb"})
        self.verify(p.returncode == 1, f"exit {p.returncode}")
        self.verify("segment full, raise MOONCAKE_GLOBAL_SEGMENT_SIZE" in p.stderr, p.stderr)
        self.verify("RESULT: OK" not in p.stdout, p.stdout)

    def test_bad_node_file_is_refused_with_location(self):
        """Steps: point tide-cluster at a node file with a malformed size.
        Verify: exit 1 and the message names file, line, key and valid examples."""
        bad = self.write("bad.env", "# node\nMOONCAKE_PROTOCOL=tcp\nMOONCAKE_GLOBAL_SEGMENT_SIZE=8gq\n")
        p = self.run_tool("cluster/tide-cluster", "--node-env", bad)
        self.verify(p.returncode == 1, f"exit {p.returncode}")
        self.verify(f"{bad}:3: MOONCAKE_GLOBAL_SEGMENT_SIZE: '8gq' is not a size" in p.stderr,
                    p.stderr)
        self.verify("RESULT" not in p.stdout, p.stdout)
