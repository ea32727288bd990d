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
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TIDE_", "MOONCAKE_", "MC_"))}
        full_env.update(env or {})
        return subprocess.run([cls.tool(name), *args], capture_output=True, text=True,
                              env=full_env, timeout=timeout)

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path
