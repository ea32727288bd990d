#!/usr/bin/python3
"""Linux-side peer for the interop suites (kernel sockets, standard library).

  linux_peer.py send HOST PORT NBYTES       connect, send the pattern, half-close
  linux_peer.py echo HOST PORT NBYTES       connect, send the pattern, read it back, compare
  linux_peer.py recv PORT                   accept one connection, verify the pattern

The pattern matches tools/net/tide_net_tool.c: byte i = (7*i + (i >> 8)) & 0xff.
Prints one result line; exit 0 only when every byte matched.
"""
import socket
import sys
import threading


def pattern(start, n):
    return bytes(((i * 7 + (i >> 8)) & 0xFF) for i in range(start, start + n))


def verify(data, start):
    want = pattern(start, len(data))
    return sum(1 for a, b in zip(data, want) if a != b)


def main(argv):
    mode = argv[1]
    if mode in ("send", "echo"):
        host, port, n = argv[2], int(argv[3]), int(argv[4])
        s = socket.create_connection((host, port), timeout=30)
        s.settimeout(60)
        payload = pattern(0, n)
        if mode == "send":
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            s.recv(1)  # wait for the peer's close
            print(f"sent {n}")
            return 0
        t = threading.Thread(target=lambda: (s.sendall(payload), s.shutdown(socket.SHUT_WR)))
        t.start()
        got = bytearray()
        while len(got) < n:
            d = s.recv(1 << 16)
            if not d:
                break
            got += d
        t.join()
        bad = verify(bytes(got), 0)
        print(f"echoed {len(got)} of {n} bad {bad}")
        return 0 if len(got) == n and bad == 0 else 1
    if mode == "recv":
        port = int(argv[2])
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", port))
        ls.listen(1)
        ls.settimeout(60)
        print("listening", flush=True)
        c, _ = ls.accept()
        c.settimeout(60)
        n = bad = 0
        while True:
            d = c.recv(1 << 16)
            if not d:
                break
            bad += verify(d, n)
            n += len(d)
        print(f"received {n} bad {bad}", flush=True)
        return 0 if bad == 0 else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
