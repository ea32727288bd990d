#!/usr/bin/python3
"""Read a running Tide process's counters through DPDK telemetry.

Usage: tide-stats.py --file-prefix PREFIX [--index N] [--watch SECONDS] [--runtime-dir DIR]

PREFIX is the process's TIDE_FILE_PREFIX (EAL --file-prefix). Prints the
"/tide/net/stats" dictionary as "name value" lines (non-zero ones unless
--all), once or every SECONDS. Standard library only.
"""
import argparse
import json
import os
import socket
import sys
import time


def query(path, cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.recv(4096)  # greeting: version, pid, max_output_len
    s.send(cmd.encode())
    out = s.recv(1 << 20)
    s.close()
    return json.loads(out.decode())


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file-prefix", required=True)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--watch", type=float, default=0)
    ap.add_argument("--all", action="store_true", help="print zero counters too")
    ap.add_argument("--json", action="store_true", help="print the raw JSON")
    ap.add_argument("--runtime-dir", default="/var/run/dpdk")
    a = ap.parse_args(argv[1:])
    path = os.path.join(a.runtime_dir, a.file_prefix, "dpdk_telemetry.v2")
    while True:
        try:
            reply = query(path, f"/tide/net/stats,{a.index}")
        except OSError as e:
            print(f"tide-stats: cannot reach {path}: {e.strerror or e}", file=sys.stderr)
            return 1
        stats = reply.get("/tide/net/stats")
        if not isinstance(stats, dict):
            print(f"tide-stats: no stack {a.index} published by that process: {reply}",
                  file=sys.stderr)
            return 1
        if a.json:
            print(json.dumps(stats))
        else:
            for k, v in stats.items():
                if v or a.all:
                    print(f"{k} {v}")
        if a.watch <= 0:
            return 0
        sys.stdout.flush()
        time.sleep(a.watch)
        print()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
