"""A small DTS-style test-suite base (after DPDK's dts/framework/test_suite.py).

A suite subclasses TestSuite, may override set_up_all/tear_down_all and
set_up_test_case/tear_down_test_case, and defines test_* methods whose
docstrings say Steps: and Verify:. `verify(cond, msg)` fails the case with
`msg`. Suites that need something the host lacks call `self.skip(reason)`.
Only the Python standard library is used (Debian python3, no PyPI).
"""
import os
import subprocess
import tempfile
import time
import unittest


class TestSuite(unittest.TestCase):
    #: set by the runner: the meson build directory holding the binaries
    build_dir = None
    #: the repository root
    source_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tide-dts-")
        cls.set_up_all()

    @classmethod
    def tearDownClass(cls):
        cls.tear_down_all()
        subprocess.run(["rm", "-rf", cls.tmp], check=False)

    def setUp(self):
        self.set_up_test_case()

    def tearDown(self):
        self.tear_down_test_case()

    @classmethod
    def set_up_all(cls):
        pass

    @classmethod
    def tear_down_all(cls):
        pass

    def set_up_test_case(self):
        pass

    def tear_down_test_case(self):
        pass

    def verify(self, condition, failure_description):
        if not condition:
            self.fail(failure_description)

    def skip(self, reason):
        raise unittest.SkipTest(reason)

    @classmethod
    def tool(cls, name):
        """Path of a built tool, e.g. tool('env/tide-env')."""
        return os.path.join(cls.build_dir, "tools", name)

    @classmethod
    def run_tool(cls, name, *args, env=None, timeout=120):
        """Run a built tool; returns CompletedProcess with text stdout/stderr."""
        return subprocess.run([cls.tool(name), *args], capture_output=True, text=True,
                              env=cls.tool_env(env), timeout=timeout)

    @classmethod
    def tool_env(cls, env=None):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDE_", "MOONCAKE_", "MC_"))}
        full_env.update(env or {})
        return full_env

    @classmethod
    def start_tool(cls, name, *args, env=None, ready="ready", timeout=30, prefix=None):
        """Start a built tool in the background (optionally under `prefix`, e.g.
        ["ip", "netns", "exec", ns]) and wait until it prints a line containing
        `ready`. Returns the Popen; its stdout lines read so far are in .lines."""
        p = subprocess.Popen([*(prefix or []), cls.tool(name), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=cls.tool_env(env))
        p.lines = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            p.lines.append(line)
            if ready in line:
                return p
        p.kill()
        rest, _ = p.communicate()
        raise AssertionError(f"{name} did not become ready: {''.join(p.lines)}{rest}")

    @staticmethod
    def finish(p, timeout=60, signal_first=None):
        """Wait for a started tool (after sending `signal_first` if given);
        returns (exit code, all output)."""
        if signal_first is not None:
            p.send_signal(signal_first)
        try:
            rest, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rest, _ = p.communicate()
        return p.returncode, "".join(p.lines) + (rest or "")

    @staticmethod
    def sh(*cmd, check=True, timeout=60):
        """Run a host command; returns CompletedProcess (text)."""
        return subprocess.run(list(cmd), capture_output=True, text=True, check=check,
                              timeout=timeout)

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path
