#!/usr/bin/python3
"""Kernel TCP sends with and without MSG_ZEROCOPY, on the links this machine has.

Issue 33 asks whether the in-process engine's kernel-socket path should send with
MSG_ZEROCOPY (or splice). This measures the question the engine would face, in one run:
a sender process writes --gib GiB in messages of each size to a receiver process over
loopback TCP (TCP_NODELAY), plainly (send copies into socket buffers) and with
MSG_ZEROCOPY (the pages are pinned and sent from; the sender reaps completions from the
socket's error queue before it may reuse them, at most 64 outstanding). Prints the median
and min-max of --runs runs per row, MiB/s, and the CPU of both processes per GiB.

What it cannot show: a NIC. On loopback and veth the kernel copies zero-copy pages when
it delivers them to the local receiver (skb_orphan_frags_rx), so the copy saved at send
comes back at delivery, plus pinning and completions. splice is not measured: vmsplice
without SPLICE_F_GIFT copies into the pipe (what send does), and with it the caller may
never touch the pages again, with no completion to say when the socket is done.

  /usr/bin/python3 tools/zerocopy-bench.py [--runs 5] [--gib 1] [--sizes 64k,1m,4m]
"""
import argparse
import os
import resource
import select
import socket
import statistics
import time

MSG_ZEROCOPY = 0x4000000  # linux/socket.h (Python 3.11's socket module lacks the names)
SO_ZEROCOPY = 60
MAX_OUTSTANDING = 64


def parse_size(s):
    s = s.strip().lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(s[-1:], 1)
    return int(s.rstrip("kmg")) * mult


def receive(conn, total):
    buf = memoryview(bytearray(1 << 20))
    got = 0
    while got < total:
        n = conn.recv_into(buf)
        if n == 0:
            break
        got += n
    return got


def reap(s, outstanding, block):
    """Drain zero-copy completions; returns how many sends are still outstanding (a
    completion notice covers a range of sends: after one, count none pending)."""
    while True:
        try:
            s.recvmsg(0, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            outstanding = 0
        except BlockingIOError:
            if not block or outstanding <= MAX_OUTSTANDING:
                return outstanding
            select.select([], [], [s], 0.001)


def one(size, total, zc):
    """(MiB/s, CPU seconds of both processes) of one transfer of total bytes."""
    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(1)
    pid = os.fork()
    if pid == 0:
        try:
            conn, _ = lsn.accept()
            receive(conn, total)
            conn.sendall(b"k")
        finally:
            os._exit(0)
    s = socket.create_connection(lsn.getsockname())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if zc:
        s.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
    mv = memoryview(bytearray(os.urandom(size)))
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    sent = outstanding = 0
    while sent < total:
        off = 0
        while off < size:
            off += s.sendmsg([mv[off:]], [], MSG_ZEROCOPY if zc else 0)
            if zc:
                outstanding = reap(s, outstanding + 1, True)
        sent += size
    if s.recv(1) != b"k":
        raise SystemExit("the receiver did not confirm")
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.waitpid(pid, 0)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s.close()
    lsn.close()
    cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime +
           c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
    return total / dt / (1 << 20), cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gib", type=float, default=1.0, help="GiB per transfer (default 1)")
    ap.add_argument("--sizes", default="64k,1m,4m")
    a = ap.parse_args()
    total = int(a.gib * (1 << 30))
    print(f"loopback TCP, {a.gib:g} GiB per transfer, median (min-max) of {a.runs} runs")
    print(f"{'message':>8} {'send':>12} {'MiB/s':>7} {'(min-max)':>12} {'CPU ms/GiB':>11}"
          f" {'zc / plain':>10}")
    for size in (parse_size(x) for x in a.sizes.split(",")):
        med = {}
        for zc in (False, True):
            rs = [one(size, total, zc) for _ in range(a.runs)]
            mib = statistics.median(r[0] for r in rs)
            cpu = statistics.median(r[1] for r in rs) / (total / (1 << 30)) * 1e3
            med[zc] = mib
            lo, hi = min(r[0] for r in rs), max(r[0] for r in rs)
            ratio = f"{mib / med[False]:.2f}x" if zc else ""
            print(f"{size >> 10:>5} KiB {'MSG_ZEROCOPY' if zc else 'plain':>12} {mib:7.0f} "
                  f"{f'{lo:.0f}-{hi:.0f}':>12} {cpu:11.0f} {ratio:>10}", flush=True)


if __name__ == "__main__":
    main()
