#!/usr/bin/python3
"""Run DTS-style functional suites against a meson build directory.

Usage: run.py BUILD_DIR SUITE [SUITE ...]   (SUITE = node_env for tests/TestSuite_node_env.py)
Exit 0 when every case passed (some may be skipped), 1 on a failure, 77 when every case
was skipped (meson shows SKIP).
"""
import importlib
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from framework.test_suite import TestSuite  # noqa: E402


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    TestSuite.build_dir = os.path.abspath(argv[1])
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in argv[2:]:
        mod = importlib.import_module(f"tests.TestSuite_{name}")
        suite.addTests(loader.loadTestsFromModule(mod))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    # Every case skipped (e.g. no RDMA device): 77, which meson reports as SKIP.
    if result.testsRun > 0 and len(result.skipped) == result.testsRun:
        print("every case was skipped", file=sys.stderr)
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
