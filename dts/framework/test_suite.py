"""A small DTS-style test-suite base (after DPDK's dts/framework/test_suite.py).

A suite subclasses TestSuite, may override set_up_all/tear_down_all and
set_up_test_case/tear_down_test_case, and defines test_* methods whose
docstrings say Steps: and Verify:. `verify(cond, msg)` fails the case with
`msg`. A suite may call `self.skip(reason)` only for what the host legitimately
lacks (no RDMA device, not root); a missing program or module is a failure
(tools/check-prereqs.sh catches it before the run). Every wait for readiness is
bounded by a deadline on the monotonic clock and says what it waited for, and
how long, when the deadline passes (`wait_for_line`, `wait_until`).
Only the Python standard library is used (Debian python3, no PyPI).
"""
import os
import select
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
        ["ip", "netns", "exec", ns]) and wait, at most `timeout` s, until it prints a
        line containing `ready`. Returns the Popen; its stdout lines read so far are
        in .lines. On failure the tool is killed and the error shows its output."""
        p = subprocess.Popen([*(prefix or []), cls.tool(name), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=cls.tool_env(env))
        try:
            cls.wait_for_line(p, ready, timeout, f"{name} to print '{ready}'")
        except AssertionError as e:
            p.kill()
            rest, _ = p.communicate()
            raise AssertionError(f"{e}\n{cls.output_so_far(p)}{rest or ''}") from None
        return p

    @staticmethod
    def wait_for_line(p, text, timeout, what):
        """Read the (merged) stdout of Popen `p` until a line containing `text`
        arrives, for at most `timeout` s on the monotonic clock; never blocks past
        the deadline even when `p` prints nothing. Lines read are kept in p.lines
        (finish() and output_so_far() return them first). Returns the line; raises
        AssertionError naming `what` and the time waited when the deadline passes
        or `p`'s output ends first."""
        if not hasattr(p, "lines"):
            p.lines = []
        pending = getattr(p, "pending", b"")
        fd = p.stdout.fileno()
        start = time.monotonic()
        deadline = start + timeout
        try:
            while True:
                while b"\n" in pending:
                    raw, pending = pending.split(b"\n", 1)
                    line = raw.decode(errors="replace") + "\n"
                    p.lines.append(line)
                    if text in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
                if not select.select([fd], [], [], left)[0]:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    try:
                        code = p.wait(timeout=2)
                    except subprocess.TimeoutExpired:
                        code = "none yet"
                    raise AssertionError(
                        f"waiting for {what}: output ended after "
                        f"{time.monotonic() - start:.1f} s (exit {code})")
                pending += chunk
        finally:
            p.pending = pending

    @staticmethod
    def wait_until(cond, timeout, what, interval=0.05):
        """Poll `cond()` until it returns a true value, for at most `timeout` s on the
        monotonic clock. Returns that value; raises AssertionError naming `what` and
        the time waited when the deadline passes."""
        deadline = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(interval)

    @staticmethod
    def output_so_far(p):
        """What wait_for_line() has read from `p` (lines and an unfinished one)."""
        return "".join(getattr(p, "lines", [])) + getattr(p, "pending", b"").decode(
            errors="replace")

    @classmethod
    def finish(cls, p, timeout=60, signal_first=None):
        """Wait for a started tool (after sending `signal_first` if given);
        returns (exit code, all output)."""
        if signal_first is not None:
            p.send_signal(signal_first)
        try:
            rest, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rest, _ = p.communicate()
        return p.returncode, cls.output_so_far(p) + (rest or "")

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
