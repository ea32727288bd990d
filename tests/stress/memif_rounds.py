#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Stress: the memif steps of tools/local_cluster.sh, many rounds, beside two busy processes.

Each round runs step 3 (tide-net send, the memif server, to tide-net serve, the memif client)
and then step 4 (a tide-bench initiator, the memif server, writing, reading back and comparing
blocks in a tide-bench target, the memif client, which is then stopped with SIGTERM), as the
main job does, with smaller transfers so that 100 rounds fit the test budget. Two processes
spin on both CPUs meanwhile: the crash this test was written for (a peer's memif disconnect,
run on the EAL interrupt thread, unmapping rings under a receive burst of a poller that the
load had descheduled) showed only under such load. Even rounds run the node file as it is
(TIDE_IDLE=adaptive: an idle poller sleeps, so a peer's disconnect seldom meets a burst; about
one main job in 76 crashed); odd rounds set TIDE_IDLE=busy, pollers that never sleep, where
the same crash came about once in 20 rounds.

A round fails when a process dies by a signal, exits non-zero, misses its deadline, or its
log lacks its end line (tide-net "done:", tide-bench "done:" / "stopped by SIGTERM"), its
verification ("0 mismatched", "verified") or shows a leak ("packet buffers leaked: N" with
N > 0, "still held at port close", a sanitizer report). Prints rounds, failures and, for each
failure, every process's exit status or signal and its log tail; exits 1 on any failure.

Every wait is a deadline on the monotonic clock, never a count of tries.

Usage: memif_rounds.py TIDE_NET TIDE_BENCH NODE_ENV [--rounds N] [--bytes SIZE]
                       [--duration S] [--keep DIR]
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PROC_DEADLINE_S = 60  # any one process, start to exit (ASan, --no-huge, loaded CPUs)
SOCKET_DEADLINE_S = 60  # a memif server's socket file appears once its port started
STOP_DEADLINE_S = 30  # a target, from SIGTERM to exit
TAIL_LINES = 12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_socket(path, proc, deadline):
    """True once the UNIX socket exists; False if proc exits or the deadline passes first."""
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


class Proc:
    """One tool run: its command, log file and exit status (None until it ended)."""

    def __init__(self, name, argv, env, log_path):
        self.name, self.log_path, self.status, self.late = name, log_path, None, False
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        self.deadline = time.monotonic() + PROC_DEADLINE_S

    def wait(self):
        """Wait until it exits or its deadline passes (then SIGKILL: a hang is a failure)."""
        try:
            self.status = self.p.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.late = True
            self.p.kill()
            self.status = self.p.wait()
        self.log.close()
        return self.status

    def text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def how(self):
        if self.late:
            return "still running at its deadline (killed)"
        if self.status is None:
            return "not waited for"
        if self.status < 0:
            return f"killed by {signal.Signals(-self.status).name}"
        return f"exit status {self.status}"


def log_problems(text):
    """Leaks and sanitizer reports a log shows."""
    found = []
    for m in re.finditer(r"packet buffers leaked: (\d+)", text):
        if int(m.group(1)) != 0:
            found.append(m.group(0))
    for pat in ("still held at port close", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                "runtime error:"):
        if pat in text:
            found.append(pat)
    return found


def check(proc, want_status, must):
    """Why proc's run is a failure ([] if it is not)."""
    why = []
    if proc.status != want_status or proc.late:
        why.append(proc.how())
    text = proc.text()
    for pat in must:
        if not re.search(pat, text):
            why.append(f"no line matching {pat!r}")
    why += log_problems(text)
    return why


def tool_env(base, **kv):
    e = dict(base)
    e.update({k: str(v) for k, v in kv.items()})
    return e


def step3(args, env, d, nbytes):
    """tide-net send (memif server) -> tide-net serve (memif client), as local_cluster.sh."""
    sock = os.path.join(d, "memif.sock")
    memif = f"net_memif0,socket={sock},socket-abstract=no"
    send = Proc("tide-net send", [args.tide_net, "--node-env", args.node_env, "send", "--peer",
                                  "10.77.0.2", "--port", "7000", "--bytes", str(nbytes)],
                tool_env(env, TIDE_DPDK_DEVICE=memif + ",role=server", TIDE_DATA_IP="10.77.0.1",
                         TIDE_FILE_PREFIX=f"tide-stress-a-{os.getpid()}", TIDE_CSUM="elide"),
                os.path.join(d, "send.log"))
    procs = [send]
    if wait_socket(sock, send.p, time.monotonic() + SOCKET_DEADLINE_S):
        procs.append(Proc("tide-net serve", [args.tide_net, "--node-env", args.node_env,
                                             "serve", "--port", "7000", "--connections", "1"],
                          tool_env(env, TIDE_DPDK_DEVICE=memif + ",role=client",
                                   TIDE_DATA_IP="10.77.0.2",
                                   TIDE_FILE_PREFIX=f"tide-stress-b-{os.getpid()}",
                                   TIDE_CSUM="elide"),
                          os.path.join(d, "serve.log")))
    for p in procs:
        p.wait()
    why = [f"tide-net send: {w}" for w in
           check(send, 0, [r"tide-net: done: sent %d bytes" % nbytes])]
    if len(procs) == 1:
        return procs, ["tide-net send: its memif socket never appeared"] + why
    why += [f"tide-net serve: {w}" for w in
            check(procs[1], 0, [r"%d bytes in, 0 out, 0 mismatched" % nbytes,
                                r"tide-net: done: \d+ bytes received on 1 connection"])]
    return procs, why


def step4(args, env, d, buf, duration):
    """tide-bench initiator (memif server) against a tide-bench target (memif client), the
    target stopped with SIGTERM once the initiator ended, as local_cluster.sh."""
    sock = os.path.join(d, "te-memif.sock")
    memif = f"net_memif0,socket={sock},socket-abstract=no"
    port = free_port()
    common = dict(TIDE_CSUM="elide", TIDE_NODE_ENV=args.node_env)
    ini = Proc("tide-bench initiator",
               [args.tide_bench, "--mode=initiator", f"--segment_id=127.0.0.1:{port}",
                "--host=127.0.0.1", "--open_retry_s=30", "--verify", "--block_size=64K",
                "--batch_size=32", f"--duration={duration}", f"--buffer_size={buf}"],
               tool_env(env, TIDE_DPDK_DEVICE=memif + ",role=server", TIDE_DATA_IP="10.78.0.1",
                        TIDE_FILE_PREFIX=f"tide-stress-tea-{os.getpid()}", **common),
               os.path.join(d, "te-ini.log"))
    procs = [ini]
    if wait_socket(sock, ini.p, time.monotonic() + SOCKET_DEADLINE_S):
        procs.append(Proc("tide-bench target",
                          [args.tide_bench, "--mode=target", f"--rpc_port={port}",
                           "--host=127.0.0.1", f"--buffer_size={buf}"],
                          tool_env(env, TIDE_DPDK_DEVICE=memif + ",role=client",
                                   TIDE_DATA_IP="10.78.0.2",
                                   TIDE_FILE_PREFIX=f"tide-stress-teb-{os.getpid()}",
                                   **common),
                          os.path.join(d, "te-tgt.log")))
    ini.wait()
    why = [f"tide-bench initiator: {w}" for w in
           check(ini, 0, [r"transport=tcp-dpdk.*verified", r"tide-bench: done: .*verified"])]
    if len(procs) == 1:
        return procs, ["tide-bench initiator: its memif socket never appeared"] + why
    tgt = procs[1]
    if tgt.p.poll() is None:
        tgt.p.send_signal(signal.SIGTERM)
        tgt.deadline = time.monotonic() + STOP_DEADLINE_S
    tgt.wait()
    why += [f"tide-bench target: {w}" for w in
            check(tgt, 0, [r"target served [1-9]\d* reads",
                           r"tide-bench: stopped by SIGTERM after serving"])]
    return procs, why


def tail(proc):
    try:
        lines = proc.text().splitlines()
    except OSError as e:
        return [f"(no log: {e})"]
    return lines[-TAIL_LINES:]


def idle_note(r):
    return " (TIDE_IDLE=busy)" if r % 2 else ""


def parse_size(s):
    m = re.fullmatch(r"(\d+)([kKmMgG]?)[bB]?", s)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {s}")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tide_net")
    ap.add_argument("tide_bench")
    ap.add_argument("node_env")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--bytes", type=parse_size, default=parse_size("16m"),
                    help="step 3: bytes tide-net sends per round")
    ap.add_argument("--duration", type=float, default=0.5,
                    help="step 4: seconds the initiator writes and reads back per round")
    ap.add_argument("--buffer", default="16M", help="step 4: each side's registered buffer")
    ap.add_argument("--keep", help="keep every round's logs under this directory")
    args = ap.parse_args()

    env = dict(os.environ)
    # Four EALs per round, one or two at a time: small enough that every process gets
    # hugepages when the test command reserved them (tools/hugepages.sh), so none falls back
    # to --no-huge for lack of pages a concurrent one just took.
    env.setdefault("TIDE_HUGEPAGE_MEM", "64mb")
    top = args.keep or tempfile.mkdtemp(prefix="tide-stress-")
    os.makedirs(top, exist_ok=True)
    # Two busy processes, one per CPU's worth: the load under which the crash showed.
    busy = [subprocess.Popen(["/usr/bin/sha256sum", "/dev/zero"], stdout=subprocess.DEVNULL)
            for _ in range(2)]
    failures = []
    t0 = time.monotonic()
    try:
        for r in range(1, args.rounds + 1):
            d = os.path.join(top, f"round-{r:03d}")
            os.makedirs(d, exist_ok=True)
            renv = tool_env(env, TIDE_IDLE="busy") if r % 2 else env
            procs3, why3 = step3(args, renv, d, args.bytes)
            procs4, why4 = step4(args, renv, d, args.buffer, args.duration)
            if why3 or why4:
                failures.append((r, why3 + why4, procs3 + procs4))
                print(f"round {r}{idle_note(r)}: FAILED: {'; '.join(why3 + why4)}", flush=True)
            elif not args.keep:
                shutil.rmtree(d, ignore_errors=True)
            if r % 10 == 0:
                print(f"{r} rounds in {time.monotonic() - t0:.0f} s, {len(failures)} failed",
                      flush=True)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    secs = time.monotonic() - t0
    print(f"\nmemif rounds: {args.rounds} rounds, {len(failures)} failures, {secs:.0f} s "
          f"({secs / max(args.rounds, 1):.1f} s a round; step 3 {args.bytes} bytes, step 4 "
          f"{args.duration} s) beside 2 busy processes")
    for r, why, procs in failures:
        print(f"\n--- round {r}{idle_note(r)}: {'; '.join(why)}")
        for p in procs:
            print(f"  {p.name}: {p.how()}; last lines of {p.log_path}:")
            for line in tail(p):
                print(f"    {line}")
    if not args.keep and not failures:
        shutil.rmtree(top, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
