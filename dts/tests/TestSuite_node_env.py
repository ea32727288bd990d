"""Functional suite: the per-node environment file through the `tide-env` tool.

Topology: none (one host, no traffic). Checks what an operator sees.
"""
import os
import subprocess

from framework.test_suite import TestSuite


class TestNodeEnv(TestSuite):
    def check(self, path, env=None):
        return self.run_tool("env/tide-env", "check", path, env=env)

    def test_sample_is_valid_and_sources_are_shown(self):
        """Steps: tide-env check tools/node.env.sample.
        Verify: exit 0; each effective value is followed by file:line or default."""
        sample = os.path.join(self.source_root, "tools", "node.env.sample")
        p = self.check(sample)
        self.verify(p.returncode == 0, p.stderr)
        self.verify("MOONCAKE_GLOBAL_SEGMENT_SIZE=268435456" in p.stdout, p.stdout)
        self.verify(f"# {sample}:" in p.stdout, p.stdout)
        self.verify("# default" in p.stdout, p.stdout)

    def test_every_error_is_reported_with_location(self):
        """Steps: a file with three bad lines.
        Verify: exit 1, three messages naming file:line: KEY and what is valid."""
        path = self.write("three.env", "MOONCAKE_GLOBAL_SEGMENT_SIZE=8gq\n"
                                       "TIDE_MTUU=1500\n"
                                       "MOONCAKE_PROTOCOL=udp\n")
        p = self.check(path)
        self.verify(p.returncode == 1, f"exit {p.returncode}")
        self.verify(f"{path}:1: MOONCAKE_GLOBAL_SEGMENT_SIZE: '8gq' is not a size "
                    "(examples: 8gb, 512mb, 1073741824)" in p.stderr, p.stderr)
        self.verify(f"{path}:2: TIDE_MTUU: unknown key" in p.stderr, p.stderr)
        self.verify(f"{path}:3: MOONCAKE_PROTOCOL:" in p.stderr and "tcp" in p.stderr,
                    p.stderr)

    def test_environment_beats_file(self):
        """Steps: file sets MOONCAKE_PROTOCOL=tcp, environment sets rdma.
        Verify: tide-env get prints rdma; check names the environment as source."""
        path = self.write("proto.env", "MOONCAKE_PROTOCOL=tcp\n")
        p = self.run_tool("env/tide-env", "get", "MOONCAKE_PROTOCOL", path,
                          env={"MOONCAKE_PROTOCOL": "rdma"})
        self.verify(p.returncode == 0 and p.stdout.strip() == "rdma", p.stdout + p.stderr)
        p = self.check(path, env={"MOONCAKE_PROTOCOL": "rdma"})
        self.verify("MOONCAKE_PROTOCOL=rdma" in p.stdout and "# environment" in p.stdout,
                    p.stdout)

    def test_node_env_variable_selects_file(self):
        """Steps: TIDE_NODE_ENV points at a file; no FILE argument.
        Verify: that file's value is used; a missing TIDE_NODE_ENV file is an error."""
        path = self.write("sel.env", "MOONCAKE_LOCAL_HOSTNAME=node7\n")
        p = self.run_tool("env/tide-env", "get", "MOONCAKE_LOCAL_HOSTNAME",
                          env={"TIDE_NODE_ENV": path})
        self.verify(p.returncode == 0 and p.stdout.strip() == "node7", p.stdout + p.stderr)
        p = self.run_tool("env/tide-env", "check",
                          env={"TIDE_NODE_ENV": os.path.join(self.tmp, "absent.env")})
        self.verify(p.returncode == 1 and "absent.env" in p.stderr, p.stderr)

    def test_same_meaning_under_sh(self):
        """Steps: source the file with sh (set -a) and compare with tide-env get.
        Verify: every key the shell exports has the value Tide parsed."""
        path = self.write("sh.env", "export MOONCAKE_MASTER='10.0.0.1:50051'\n"
                                    "MOONCAKE_LOCAL_BUFFER_SIZE=\"2gb\"  # staging\n"
                                    "TIDE_LCORES=1-3,5\n")
        out = subprocess.run(["env", "-i", "sh", "-c", f"set -a; . {path}; env"],
                             capture_output=True, text=True, check=True).stdout
        shell = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        self.verify(shell.get("MOONCAKE_MASTER") == "10.0.0.1:50051", str(shell))
        for key, want in (("MOONCAKE_MASTER", "10.0.0.1:50051"), ("TIDE_LCORES", "1-3,5")):
            p = self.run_tool("env/tide-env", "get", key, path)
            self.verify(p.stdout.strip() == want == shell[key], f"{key}: {p.stdout}")
        p = self.run_tool("env/tide-env", "get", "MOONCAKE_LOCAL_BUFFER_SIZE", path)
        self.verify(p.stdout.strip() == str(2 << 30) and shell["MOONCAKE_LOCAL_BUFFER_SIZE"] == "2gb",
                    p.stdout)

    def test_command_substitution_is_refused(self):
        """Steps: a value with $(...).
        Verify: exit 1 and an error on that line; nothing executed."""
        marker = os.path.join(self.tmp, "executed")
        path = self.write("cmd.env", f"MOONCAKE_LOCAL_HOSTNAME=$(touch {marker})\n")
        p = self.check(path)
        self.verify(p.returncode == 1 and f"{path}:1:" in p.stderr, p.stderr)
        self.verify(not os.path.exists(marker), "command was executed")
