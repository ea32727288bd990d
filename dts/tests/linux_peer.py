#!/usr/bin/python3
"""Linux-side peer for the interop suites (kernel sockets, standard library).

  linux_peer.py send HOST PORT NBYTES       connect, send the pattern, half-close, wait for close
  linux_peer.py echo HOST PORT NBYTES       connect, send the pattern, read it back, compare
  linux_peer.py recv PORT                   accept one connection, verify the pattern
  linux_peer.py hold HOST PORT              connect, send 64 KiB, then block (to be killed)

The pattern matches tools/net/tide_net_tool.c: byte i = (7*i + (i >> 8)) & 0xff. It repeats
every 65536 bytes, so both generation and checking run at memcmp speed. Prints one result line
with a SHA-256 of the stream; exit 0 only when every byte matched.
"""
import hashlib
import socket
import sys
import threading

PERIOD = 65536
BLOCK = bytes(((i * 7 + (i >> 8)) & 0xFF) for i in range(PERIOD)) * 2


def chunks(n, size=1 << 20):
    """The pattern's first n bytes, as memoryviews of at most `size` bytes."""
    big = BLOCK[:PERIOD] * (size // PERIOD)
    sent = 0
    while sent < n:
        k = min(size, n - sent)
        yield memoryview(big)[:k]
        sent += k


class Checker:
    def __init__(self):
        self.n = self.bad = 0
        self.sha = hashlib.sha256()

    def feed(self, d):
        self.sha.update(d)
        off = 0
        while off < len(d):
            start = (self.n + off) % PERIOD
            k = min(len(d) - off, PERIOD)
            if d[off:off + k] != BLOCK[start:start + k]:
                want = BLOCK[start:start + k]
                self.bad += sum(1 for a, b in zip(d[off:off + k], want) if a != b)
            off += k
        self.n += len(d)


def expected_sha(n):
    h = hashlib.sha256()
    for c in chunks(n):
        h.update(c)
    return h.hexdigest()


def main(argv):
    mode = argv[1]
    if mode in ("send", "echo", "hold"):
        host, port = argv[2], int(argv[3])
        s = socket.create_connection((host, port), timeout=30)
        s.settimeout(300)
        if mode == "hold":
            s.sendall(BLOCK[:PERIOD])
            print("holding", flush=True)
            threading.Event().wait()
        n = int(argv[4])
        if mode == "send":
            for c in chunks(n):
                s.sendall(c)
            s.shutdown(socket.SHUT_WR)
            s.recv(1)  # wait for the peer's close
            print(f"sent {n} sha256 {expected_sha(n)}")
            return 0

        def writer():
            for c in chunks(n):
                s.sendall(c)
            s.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=writer)
        t.start()
        chk = Checker()
        while chk.n < n:
            d = s.recv(1 << 20)
            if not d:
                break
            chk.feed(d)
        t.join()
        print(f"echoed {chk.n} of {n} bad {chk.bad} sha256 {chk.sha.hexdigest()}")
        return 0 if chk.n == n and chk.bad == 0 else 1
    if mode == "recv":
        port = int(argv[2])
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", port))
        ls.listen(1)
        ls.settimeout(60)
        print("listening", flush=True)
        c, _ = ls.accept()
        c.settimeout(300)
        chk = Checker()
        while True:
            d = c.recv(1 << 20)
            if not d:
                break
            chk.feed(d)
        ok = chk.bad == 0 and chk.sha.hexdigest() == expected_sha(chk.n)
        print(f"received {chk.n} bad {chk.bad} sha256 {chk.sha.hexdigest()}"
              f" {'match' if ok else 'MISMATCH'}", flush=True)
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
