"""Helpers shared by the Python tests here: a free loopback port, a mooncake_master
on one, and putting environment variables back. Standard library only (pytest is
imported when a master fails to start), so test_master_metrics.py, which runs
without pytest, can use it too. Not a test module (no test_ prefix)."""
import os
import socket
import subprocess
import time

HOST = "127.0.0.1"


def free_port():
    """A TCP port nothing listens on right now on 127.0.0.1."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_master(timeout=20, extra=()):
    """mooncake_master (STORE_TEST_MASTER_BIN) on a free port (extra: more flags); returns
    (Popen, address) once it accepts, or fails the test saying how long it waited."""
    port = free_port()
    p = subprocess.Popen([os.environ["STORE_TEST_MASTER_BIN"], f"--rpc_port={port}",
                          "--metrics_port=0", *extra], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((HOST, port), 1).close()
            return p, f"{HOST}:{port}"
        except OSError:
            pass
        if p.poll() is not None or time.monotonic() >= deadline:
            import pytest
            p.kill()
            p.wait()
            pytest.fail(f"mooncake_master not accepting on {HOST}:{port} after {timeout} s "
                        f"(exit {p.returncode})")
        time.sleep(0.05)


def restore_env(saved):
    """Put back the variables saved as {name: value, or None where it was unset}."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
