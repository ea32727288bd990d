"""Functional suite: TCP conformance of Tide's stack, side by side with Linux (issue 20).

Topology (built in set_up_all, removed in tear_down_all):

    root netns                       netns tcc-t<N>: the tester         netns tcc-l<N>
    tide-net -- af_packet -- veth ==== veth  T.2/24
    (TIDE_DATA_IP T.1)                 veth  L.2/24 ==================== veth  L.1/24
                                                                        Linux (Python sockets)

The tester is this process: it opens AF_PACKET sockets inside tcc-t<N> (setns for the
socket's creation only) and crafts and reads every segment itself with scapy. The tester
namespace's kernel owns T.2 and L.2 so that it answers the targets' ARP requests, but it
has blackhole routes to both targets (and rp_filter off), so it never sends the RST a
kernel sends for a segment of a connection it does not know: the crafted connections are
the tester's alone. Offloads are off on every veth so the frames read are the segments
sent.

Every case runs against both targets in the same run: Linux first (one server process in
tcc-l<N>, ports for sink, echo, send and send-then-close connections and a separate
listener for the flood), then Tide (one tide-net per case, so its counters are the
case's; TIDE_TCP_RTO_MIN_US=200000, Linux's floor). A case asserts what the RFCs require
of Tide, with Linux's behaviour recorded beside it (and checked only where it proves the
harness works); the suite prints a table at the end: case | Linux | Tide | same?.
A Tide deviation reported but not yet fixed is listed in KNOWN_TIDE: a problem it matches
shows as "KNOWN: ..." in the table instead of failing the case (any other problem of the
case still fails it). The "same?" column says yes (identical), values (the same behaviour,
other numbers: timings, counts, window scale) or no.

Cases:
  1. handshake options: MSS, window scale, SACK-permitted, timestamps (echoed), and none
     of the last three when the SYN offered none (RFC 7323 1.3/3.2, RFC 2018);
  2. ISNs (RFC 6528) and TSval offsets (RFC 7323 7.1) from 20 SYN-ACKs to consecutive
     source ports, and from 5 SYN-ACKs to one 4-tuple;
  3. RST: in the window but not at RCV.NXT gets a challenge ACK, out of the window is
     dropped, at RCV.NXT tears down (RFC 5961 3.2);
  4. SYN on an established connection gets a challenge ACK (RFC 5961 4.2);
  5. ACK of data never sent, and ACK older than SND.UNA - MAX.SND.WND (RFC 5961 5.2);
  6. data out of the window (old; far beyond the right edge): duplicate ACK, not delivered;
  7. malformed segments (bad checksum, data offset < 5, data offset > length, SYN+FIN,
     no flags) dropped without killing the connection; SYN+FIN to a listener noted;
  8. no stray pure ACK after a reply already acknowledged the request (delayed ACK);
  9. zero-window probing with backoff, and the transfer resumes when the window opens;
 10. tail loss probe (RFC 8985): SACK negotiated, the peer silent: one probe at most,
     then RTO backoff alone (RFC 6298 5.5);
 11. TIME_WAIT after the target's active close: a retransmitted FIN is ACKed again; a new
     SYN on the same 4-tuple noted;
 12. SYN flood past the listen backlog (1000 SYNs from 20 silent addresses), then a
     legitimate client connects (SYN cookies, RFC 4987). Last: Linux keeps retrying the
     flood's half-open connections for a minute, which would show in its counters.
"""
import ctypes
import logging
import math
import os
import random
import re
import select
import signal
import socket
import subprocess
import textwrap
import time

from framework.test_suite import TestSuite

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import ARP, IP, TCP, Ether, Raw  # noqa: E402

M32 = 0xFFFFFFFF
PATTERN = bytes(((i * 7 + (i >> 8)) & 0xFF) for i in range(65536)) * 2  # tide_net_tool.c's
SEND_BYTES = 1000          # what send/sendclose targets send on each connection: one segment
RTO_MIN_S = 0.2            # TIDE_TCP_RTO_MIN_US below, and Linux's TCP_RTO_MIN
TLP_WATCH_S = 6.5          # how long case 10 keeps silent
ZWP_WATCH_S = 4.5          # how long case 9 keeps the window closed
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003

#: Tide deviations reported and not yet fixed: case number -> (regex over the case's
#: problems, what). Matching problems show as "KNOWN: what"; the others still fail.
KNOWN_TIDE = {}

# The Linux target: one listener per behaviour, a thread per connection.
LINUX_TARGET = r'''
import socket, sys, threading
PAT = bytes(((i * 7 + (i >> 8)) & 0xFF) for i in range(65536)) * 2
SEND = int(sys.argv[1])
def conn(mode, c, peer):
    n = bad = 0
    how = "closed by peer"
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if mode in ("send", "sendclose"):
            c.sendall(PAT[:SEND])
            if mode == "sendclose":
                c.close()
                print(f"{mode} {peer[1]} sent {SEND}, closed first", flush=True)
                return
        while True:
            d = c.recv(65536)
            if not d:
                break
            if mode == "echo":
                c.sendall(d)
            elif d != PAT[n % 65536:n % 65536 + len(d)]:
                bad += 1
            n += len(d)
    except OSError as e:
        how = e.strerror
    print(f"{mode} {peer[1]} {n} bytes in, bad {bad}, {how}", flush=True)
    c.close()
def serve(mode, port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(128)
    while True:
        c, peer = ls.accept()
        threading.Thread(target=conn, args=(mode, c, peer), daemon=True).start()
for a in sys.argv[2:]:
    mode, port = a.split("=")
    threading.Thread(target=serve, args=(mode, int(port)), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
'''

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


def packet_socket(ns, iface):
    """An AF_PACKET socket on `iface` of namespace `ns`; only its creation happens there
    (a socket stays in the namespace it was made in), this thread returns to its own."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.bind((iface, 0))
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    s.setblocking(False)
    return s


def sdiff(a, b):
    """a - b in sequence space, as a signed 32-bit number."""
    d = (a - b) & M32
    return d - (1 << 32) if d >= 1 << 31 else d


def topts(p):
    """A segment's TCP options as a dict (NOPs dropped)."""
    return {k: v for k, v in p[TCP].options if k not in ("NOP", "EOL")}


def plen(p):
    return len(bytes(p[TCP].payload))


def fl(p):
    return str(p[TCP].flags)


class Peer:
    """The tester's side of one target: an AF_PACKET socket on the link to it."""

    def __init__(self, name, sock, my_ip, ip):
        self.name, self.sock, self.my_ip, self.ip = name, sock, my_ip, ip
        self.my_mac = ":".join(f"{b:02x}" for b in sock.getsockname()[4])
        self.mac = None
        self.used_ports = set()

    def port(self):
        while True:
            p = random.randrange(20000, 60000)
            if p not in self.used_ports:
                self.used_ports.add(p)
                return p

    def frames(self, deadline):
        """Incoming frames until the deadline (monotonic): yields (time, raw bytes)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if not select.select([self.sock], [], [], left)[0]:
                continue
            while True:
                try:
                    data, addr = self.sock.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] != socket.PACKET_OUTGOING:
                    yield time.monotonic(), data

    def drain(self):
        for _ in self.frames(time.monotonic() + 0.001):
            pass

    def resolve(self, timeout=5):
        """The target's MAC, by ARP."""
        req = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=self.my_mac) /
                    ARP(op=1, hwsrc=self.my_mac, psrc=self.my_ip, pdst=self.ip))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.send(req)
            for _, data in self.frames(min(deadline, time.monotonic() + 0.5)):
                e = Ether(data)
                if e.haslayer(ARP) and e[ARP].op == 2 and e[ARP].psrc == self.ip:
                    self.mac = e[ARP].hwsrc
                    return self.mac
        raise AssertionError(f"{self.name} ({self.ip}) did not answer ARP in {timeout} s")

    def send(self, l3):
        self.sock.send(bytes(Ether(src=self.my_mac, dst=self.mac) / l3))

    def segments(self, deadline):
        """TCP segments from the target until the deadline: yields (time, IP packet)."""
        for t, data in self.frames(deadline):
            e = Ether(data)
            if e.haslayer(TCP) and e[IP].src == self.ip and e[IP].dst == self.my_ip:
                yield t, e[IP]


class Conn:
    """One crafted TCP connection from the tester to a target port. Sequence numbers are
    tracked here; payload follows tide-net's pattern at the stream offset, so a sink
    target's checks hold."""

    def __init__(self, peer, dport, sport=None, iss=None):
        self.peer, self.dport = peer, dport
        self.sport = sport if sport is not None else peer.port()
        self.iss = random.getrandbits(32) if iss is None else iss
        self.snd_nxt = self.iss
        self.irs = self.rcv_nxt = None
        self.ts_ok = self.sack_ok = False
        self.ts_base, self.t0 = random.getrandbits(30), time.monotonic()
        self.ts_recent = 0

    def tsval(self):
        return (self.ts_base + int((time.monotonic() - self.t0) * 1000)) & M32

    def syn_opts(self, ws=0):
        return [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (self.tsval(), 0)),
                ("NOP", None), ("WScale", ws)]

    def seg(self, flags="A", seq=None, ack=None, data=b"", win=65535, opts=None, **kw):
        if opts is None:
            opts = ([("NOP", None), ("NOP", None), ("Timestamp", (self.tsval(), self.ts_recent))]
                    if self.ts_ok else [])
        seq = self.snd_nxt if seq is None else seq
        if ack is None:
            ack = self.rcv_nxt if "A" in flags and self.rcv_nxt is not None else 0
        p = IP(src=self.peer.my_ip, dst=self.peer.ip) / TCP(
            sport=self.sport, dport=self.dport, flags=flags, seq=seq & M32, ack=ack & M32,
            window=win, options=opts, **kw)
        return p / Raw(data) if data else p

    def send(self, *a, **kw):
        self.peer.send(self.seg(*a, **kw))

    def payload(self, n, seq=None):
        off = ((self.snd_nxt if seq is None else seq) - self.iss - 1) & M32
        return PATTERN[off % 65536:off % 65536 + n]

    def _mine(self, p):
        return p[TCP].sport == self.dport and p[TCP].dport == self.sport

    def _note(self, p):
        o = topts(p)
        if "Timestamp" in o:
            self.ts_recent = o["Timestamp"][0]

    def each(self, duration):
        """This connection's segments as they arrive, for `duration` s: (time, packet)."""
        for t, p in self.peer.segments(time.monotonic() + duration):
            if self._mine(p):
                self._note(p)
                yield t, p

    def collect(self, duration, until=None):
        """This connection's segments for `duration` s (stops early once until(p) holds):
        a list of (time, packet)."""
        out = []
        for t, p in self.each(duration):
            out.append((t, p))
            if until is not None and until(p):
                break
        return out

    def wait(self, cond, timeout):
        """The first segment of this connection with cond(p) within timeout s, or None."""
        got = self.collect(timeout, until=cond)
        return got[-1][1] if got and cond(got[-1][1]) else None

    def open(self, opts=None, win=65535, ack_win=None, timeout=3.0):
        """Three-way handshake (the SYN resent once after 1 s, as a client would).
        Returns the SYN-ACK, or None."""
        t0 = time.monotonic()
        sa = None
        while sa is None and time.monotonic() - t0 < timeout:
            self.send("S", seq=self.iss, win=win,
                      opts=self.syn_opts() if opts is None else opts)
            sa = self.wait(lambda p: fl(p) == "SA" and p[TCP].ack == (self.iss + 1) & M32,
                           min(1.0, timeout - (time.monotonic() - t0)))
        if sa is None:
            return None
        self.connect_s = time.monotonic() - t0
        o, offered = topts(sa), dict(self.syn_opts() if opts is None else opts)
        self.irs = sa[TCP].seq
        self.rcv_nxt = (self.irs + 1) & M32
        self.snd_nxt = (self.iss + 1) & M32
        self.ts_ok = "Timestamp" in o and "Timestamp" in offered
        self.sack_ok = "SAckOK" in o and "SAckOK" in offered
        self.send("A", win=win if ack_win is None else ack_win)
        return sa

    def acked(self, upto):
        return lambda p: "A" in fl(p) and sdiff(p[TCP].ack, upto) >= 0

    def push(self, n=100, timeout=2.0):
        """Send the next n bytes; returns the segment that ACKs them, or None."""
        data = self.payload(n)
        self.send("PA", data=data)
        self.snd_nxt = (self.snd_nxt + n) & M32
        return self.wait(self.acked(self.snd_nxt), timeout)

    def abort(self):
        self.send("R", ack=0)


class Target:
    """One side under test, as a case sees it."""

    def __init__(self, suite, name, peer, ports):
        self.suite, self.name, self.peer, self.ports = suite, name, peer, ports
        self.proc = None

    def conn(self, mode="sink", **kw):
        return Conn(self.peer, self.ports[mode], **kw)

    def counters(self):
        if self.name == "Linux":
            return self.suite.linux_netstat()
        r = self.suite.sh("/usr/bin/python3",
                          os.path.join(self.suite.source_root, "tools", "tide-stats.py"),
                          "--file-prefix", self.suite.tide_prefix, "--all", check=False)
        if r.returncode != 0:
            raise AssertionError(f"tools/tide-stats.py failed: {r.stdout}{r.stderr}")
        return {k: int(v) for k, v in re.findall(r"^(\w+) (\d+)$", r.stdout, re.M)}


class TestTcpConformance(TestSuite):
    ns_t = ns_l = None
    rows = []

    @classmethod
    def set_up_all(cls):
        cls.rows = []
        if os.geteuid() != 0:
            return
        tag = os.getpid() % 100000
        cls.ns_t, cls.ns_l = f"tcc-t{tag}", f"tcc-l{tag}"
        cls.veth_tide, cls.veth_tt = f"tcc{tag}a", f"tcc{tag}b"
        cls.veth_lt, cls.veth_l = f"tcc{tag}c", f"tcc{tag}d"
        cls.tsub, cls.lsub = f"10.95.{tag % 250}", f"10.94.{tag % 250}"
        cls.tide_prefix = f"tide-dts-tcc{os.getpid()}"
        cls.linux_ports = {m: 20000 + random.randrange(8000) * 5 + i for i, m in
                           enumerate(("sink", "echo", "send", "sendclose", "flood"))}
        cls.tide_port = 5401
        cls.linux = None
        t, lx = cls.ns_t, cls.ns_l
        cmds = [
            ["ip", "netns", "add", t],
            ["ip", "netns", "add", lx],
            ["ip", "link", "add", cls.veth_tide, "type", "veth", "peer", "name", cls.veth_tt],
            ["ip", "link", "set", cls.veth_tt, "netns", t],
            ["ip", "link", "add", cls.veth_lt, "type", "veth", "peer", "name", cls.veth_l],
            ["ip", "link", "set", cls.veth_lt, "netns", t],
            ["ip", "link", "set", cls.veth_l, "netns", lx],
            ["sysctl", "-qw", f"net.ipv6.conf.{cls.veth_tide}.disable_ipv6=1"],
            ["ip", "netns", "exec", t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
             "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"],
            ["ip", "netns", "exec", lx, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
            ["ip", "-n", t, "addr", "add", f"{cls.tsub}.2/24", "dev", cls.veth_tt],
            ["ip", "-n", t, "addr", "add", f"{cls.lsub}.2/24", "dev", cls.veth_lt],
            ["ip", "-n", lx, "addr", "add", f"{cls.lsub}.1/24", "dev", cls.veth_l],
            ["ip", "-n", t, "link", "set", "lo", "up"],
            ["ip", "-n", lx, "link", "set", "lo", "up"],
            ["ip", "-n", t, "link", "set", cls.veth_tt, "up"],
            ["ip", "-n", t, "link", "set", cls.veth_lt, "up"],
            ["ip", "-n", lx, "link", "set", cls.veth_l, "up"],
            ["ip", "link", "set", cls.veth_tide, "up"],
            # The tester's kernel must never answer the targets (its RSTs would end the
            # crafted connections): no route back to them.
            ["ip", "-n", t, "route", "add", "blackhole", f"{cls.tsub}.1/32"],
            ["ip", "-n", t, "route", "add", "blackhole", f"{cls.lsub}.1/32"],
            ["ip", "netns", "exec", t, "sysctl", "-qw",
             f"net.ipv4.conf.{cls.veth_tt}.rp_filter=0",
             f"net.ipv4.conf.{cls.veth_lt}.rp_filter=0"],
            # Frames as sent: filled checksums, no TSO/GSO super-frames, no GRO merging.
            ["ip", "netns", "exec", t, "ethtool", "-K", cls.veth_tt, "tx", "off", "gro", "off"],
            ["ip", "netns", "exec", t, "ethtool", "-K", cls.veth_lt, "tx", "off", "gro", "off"],
            ["ip", "netns", "exec", lx, "ethtool", "-K", cls.veth_l, "tx", "off", "tso", "off",
             "gso", "off", "gro", "off"],
        ]
        try:
            for c in cmds:
                cls.sh(*c)
            cls.linux_log = os.path.join(cls.tmp, "linux-target.log")
            with open(cls.linux_log, "w") as log:
                cls.linux = subprocess.Popen(
                    ["ip", "netns", "exec", lx, "/usr/bin/python3", "-c", LINUX_TARGET,
                     str(SEND_BYTES), *[f"{m}={p}" for m, p in cls.linux_ports.items()]],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            cls.wait_until(lambda: cls.linux_ready(), 30, "the Linux target to listen")
            lpeer = Peer("Linux", packet_socket(t, cls.veth_lt), f"{cls.lsub}.2", f"{cls.lsub}.1")
            lpeer.resolve()
            tpeer = Peer("Tide", packet_socket(t, cls.veth_tt), f"{cls.tsub}.2", f"{cls.tsub}.1")
            cls.targets = [Target(cls, "Linux", lpeer, cls.linux_ports),
                           Target(cls, "Tide", tpeer, {m: cls.tide_port for m in
                                                       cls.linux_ports})]
        except (subprocess.CalledProcessError, FileNotFoundError, OSError,
                AssertionError) as e:
            cls.setup_error = f"{getattr(e, 'cmd', '')}: {getattr(e, 'stderr', '') or e}"
            cls.tear_down_all()
            cls.ns_t = None

    @classmethod
    def tear_down_all(cls):
        if cls.rows:
            cls.print_table()
        if getattr(cls, "linux", None) is not None:
            cls.linux.kill()
            cls.linux.communicate()
            cls.linux = None
        for tg in getattr(cls, "targets", []):
            tg.peer.sock.close()
        cls.targets = []
        if cls.ns_t:
            cls.sh("ip", "link", "del", cls.veth_tide, check=False)
            cls.sh("ip", "netns", "del", cls.ns_t, check=False)
            cls.sh("ip", "netns", "del", cls.ns_l, check=False)

    def set_up_test_case(self):
        if os.geteuid() != 0:
            self.skip("needs root for network namespaces")
        if self.ns_t is None:
            self.fail(f"could not build the topology: {getattr(self, 'setup_error', '?')}")

    # --- harness ---------------------------------------------------------------------------

    @classmethod
    def linux_ready(cls):
        with open(cls.linux_log) as f:
            text = f.read()
        if cls.linux.poll() is not None:
            raise AssertionError(f"the Linux target exited {cls.linux.returncode}: {text}")
        return "ready" in text

    @classmethod
    def linux_netstat(cls):
        """TcpExt counters of the Linux target's namespace."""
        with open(f"/proc/{cls.linux.pid}/net/netstat") as f:
            lines = [ln.split() for ln in f if ln.startswith("TcpExt:")]
        return dict(zip(lines[0][1:], map(int, lines[1][1:])))

    def run_both(self, fn, *tide_args):
        """Run fn(target) against Linux, then against a tide-net serve started with
        tide_args for this case alone. Returns {"Linux": result, "Tide": result}; the
        Tide result has the tide-net output under "tide_out"."""
        out = {}
        lx, td = self.targets
        lx.peer.drain()
        out["Linux"] = fn(lx)
        td.proc = self.start_tool("net/tide-net", "serve", "--port", str(self.tide_port),
                                  *tide_args, env={
                                      "TIDE_HUGEPAGES": "off",
                                      # A 4096-frame ring: the PMD's default 512 overflowed
                                      # (silently: 22.11's af_packet counts no kernel drops)
                                      # under the SYN flood on this VM.
                                      "TIDE_DPDK_DEVICE": f"net_af_packet0,iface={self.veth_tide},"
                                                          "framecnt=4096",
                                      "TIDE_DATA_IP": f"{self.tsub}.1",
                                      "TIDE_FILE_PREFIX": self.tide_prefix,
                                      "TIDE_TCP_RTO_MIN_US": str(int(RTO_MIN_S * 1e6))})
        try:
            td.peer.resolve()
            td.peer.drain()
            res = fn(td)
        finally:
            rc, tide_out = self.finish(td.proc, timeout=30, signal_first=signal.SIGTERM)
            td.proc = None
        self.verify(rc == 0 and "packet buffers leaked: 0" in tide_out,
                    f"tide-net did not end cleanly (exit {rc}):\n{tide_out[-3000:]}")
        res["tide_out"] = tide_out
        out["Tide"] = res
        return out

    def record(self, case, r, problems, alike=False):
        """Add the case's row (r[target]["s"] are the cells; alike: the same behaviour
        when the cells differ) and fail on Tide's problems but those KNOWN_TIDE matches."""
        lx, td = r["Linux"]["s"], r["Tide"]["s"]
        same = "yes" if lx == td else "values" if alike else "no"
        pattern, what = KNOWN_TIDE.get(int(re.match(r"\d+", case).group()), (None, None))
        known = [p for p in problems if pattern and re.search(pattern, p)]
        failed = [p for p in problems if p not in known]
        if failed:
            td = f"FAIL: {'; '.join(failed)}; {td}"
        if known:
            td = f"KNOWN: {what} ({'; '.join(known)}); {td}"
        self.rows.append((case, lx, td, same))
        print(f"\n    Linux: {lx}\n    Tide:  {td}", end=" ", flush=True)
        self.verify(not failed, f"Tide: {'; '.join(failed)}")

    @classmethod
    def print_table(cls):
        widths = (22, 46, 50, 6)
        rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        lines = ["", "TCP conformance, Linux vs Tide:", rule]
        for i, row in enumerate([("case", "Linux", "Tide", "same?")] + cls.rows):
            cells = [textwrap.wrap(str(c), w) or [""] for c, w in zip(row, widths)]
            for k in range(max(len(c) for c in cells)):
                lines.append("| " + " | ".join((c[k] if k < len(c) else "").ljust(w)
                                               for c, w in zip(cells, widths)) + " |")
            if i == 0 or i == len(cls.rows):
                lines.append(rule)
        print("\n".join(lines), flush=True)

    # --- 1 ---------------------------------------------------------------------------------

    def test_01_handshake_options(self):
        """Steps: a SYN offering MSS 1460, SACK-permitted, timestamps and window scale 7;
        then a SYN with no options at all; each SYN-ACK is read, then the half-open
        connection reset.
        Verify (Tide): the first SYN-ACK carries MSS, window scale (shift <= 14, RFC 7323
        2.3), SACK-permitted and a timestamp echoing our TSval (RFC 7323 3.2); the second
        carries no window scale, no SACK-permitted and no timestamp (RFC 7323 1.3 and 3.2,
        RFC 2018 2)."""
        def fn(tg):
            c = tg.conn()
            tsv = c.tsval()
            opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (tsv, 0)), ("NOP", None),
                    ("WScale", 7)]
            sa = c.open(opts=opts)
            self.verify(sa is not None, f"{tg.name}: no SYN-ACK")
            c.abort()
            o = topts(sa)
            c2 = tg.conn()
            sa2 = c2.open(opts=[])
            self.verify(sa2 is not None, f"{tg.name}: no SYN-ACK to a SYN without options")
            c2.abort()
            o2 = topts(sa2)
            full = " ".join(
                [f"MSS {o['MSS']}" if "MSS" in o else "no MSS",
                 f"WS {o['WScale']}" if "WScale" in o else "no WS",
                 "SACK" if "SAckOK" in o else "no SACK",
                 ("TS echo ok" if o["Timestamp"][1] == tsv else "TS echo WRONG")
                 if "Timestamp" in o else "no TS"])
            bare = " ".join(k if k != "MSS" else f"MSS {v}" for k, v in o2.items()) or "none"
            return {"o": o, "o2": o2, "tsv": tsv,
                    "s": f"full SYN -> {full}; bare SYN -> {bare}"}

        r = self.run_both(fn)
        t = r["Tide"]
        o, o2 = t["o"], t["o2"]
        problems = []
        if "MSS" not in o:
            problems.append("no MSS option in the SYN-ACK")
        if "WScale" not in o or o["WScale"] > 14:
            problems.append(f"window scale {o.get('WScale')} (RFC 7323 2.3: present, <= 14)")
        if "SAckOK" not in o:
            problems.append("no SACK-permitted though offered")
        if "Timestamp" not in o or o["Timestamp"][1] != t["tsv"]:
            problems.append(f"timestamp {o.get('Timestamp')} does not echo TSval {t['tsv']}")
        for k in ("WScale", "SAckOK", "Timestamp"):
            if k in o2:
                problems.append(f"{k} in the SYN-ACK of a SYN that did not offer it")
        self.record("1. handshake options", r, problems,
                    alike=set(o) == set(r["Linux"]["o"]) and set(o2) == set(r["Linux"]["o2"]))

    # --- 2 ---------------------------------------------------------------------------------

    def test_02_isn_and_tsval(self):
        """Steps: 20 SYNs from consecutive source ports (one 4-tuple pattern), each
        SYN-ACK's ISN and TSval read and the half-open connection reset; then 5 SYNs from
        one and the same 4-tuple.
        Verify (Tide): the ISNs are not linear: no second difference (ISN[i+1] - 2 ISN[i] +
        ISN[i-1]) within 2^20 of 0 but at most 2 of 18 (RFC 6528: an attacker's own
        connections must not reveal the next one's ISN); the TSvals do not follow one clock:
        at most 2 of 19 consecutive pairs differ by less than a 1 MHz clock could advance in
        the time between them (RFC 7323 7.1: a random offset per connection).
        The same-4-tuple ISNs are noted (RFC 6528 keeps them moving with the clock)."""
        def fn(tg):
            base = random.randrange(20000, 59000)
            isn, tsv, at = [], [], []
            for i in range(20):
                c = tg.conn(sport=base + i)
                sa = c.open(timeout=2.0)
                self.verify(sa is not None, f"{tg.name}: no SYN-ACK for connection {i}")
                c.abort()
                isn.append(sa[TCP].seq)
                tsv.append(topts(sa).get("Timestamp", (0, 0))[0])
                at.append(c.t0 + c.connect_s)
            same = []
            sport = base + 30
            for i in range(5):
                c = tg.conn(sport=sport)
                sa = c.open(timeout=2.0)
                self.verify(sa is not None, f"{tg.name}: no SYN-ACK on the same 4-tuple")
                c.abort()
                same.append((sa[TCP].seq, c.t0 + c.connect_s))
                time.sleep(0.02)
            d2 = [sdiff((isn[i + 1] - 2 * isn[i] + isn[i - 1]) & M32, 0) for i in range(1, 19)]
            linear = sum(1 for d in d2 if abs(d) < 1 << 20)
            tsd = [abs(sdiff(tsv[i + 1], tsv[i])) for i in range(19)]
            one_clock = sum(1 for i in range(19) if tsd[i] <= 1000 + 2e6 * (at[i + 1] - at[i]))
            rates = [sdiff(same[i + 1][0], same[i][0]) / ((same[i + 1][1] - same[i][1]) * 1e3)
                     for i in range(4)]
            mono = all(0 < sdiff(same[i + 1][0], same[i][0]) < 1 << 24 for i in range(4))
            same_s = (f"same 4-tuple: +{min(rates):.0f}..{max(rates):.0f}/ms (clock)" if mono
                      else "same 4-tuple: not monotonic")
            isn_s = ("random" if linear <= 2 else "LINEAR") + \
                f" ({linear}/18 second differences < 2^20, min |d2| 2^" \
                f"{math.log2(max(1, min(abs(d) for d in d2))):.0f}); {same_s}"
            ts_s = ("one clock (offset per host pair)" if one_clock > 2 else
                    "random offset per connection") + f" ({one_clock}/19 pairs on one clock)"
            return {"linear": linear, "one_clock": one_clock, "isn_s": isn_s, "ts_s": ts_s,
                    "s": isn_s}

        r = self.run_both(fn)
        t = r["Tide"]
        problems = []
        if t["linear"] > 2:
            problems.append(f"ISNs of consecutive ports linearly related ({t['linear']}/18)")
        self.record("2a. ISN (RFC 6528)", r, problems,
                    alike=(t["linear"] <= 2) == (r["Linux"]["linear"] <= 2))
        ts_problems = []
        if t["one_clock"] > 2:
            ts_problems.append(f"TSvals of {t['one_clock']}/19 consecutive connections on one "
                               "clock: no per-connection offset")
        for k in ("Linux", "Tide"):
            r[k]["s"] = r[k]["ts_s"]
        self.record("2b. TSval offset (RFC 7323 7.1)", r, ts_problems,
                    alike=(t["one_clock"] > 2) == (r["Linux"]["one_clock"] > 2))

    # --- 3 ---------------------------------------------------------------------------------

    def test_03_rfc5961_rst(self):
        """Steps: on an established connection (100 bytes delivered): a RST at RCV.NXT+1
        (in the window); a RST 2^30 beyond RCV.NXT; 100 more bytes; then a RST at
        RCV.NXT exactly, and 100 more bytes.
        Verify (Tide): the in-window RST gets a challenge ACK (ACK of RCV.NXT) and the
        connection lives on; the out-of-window RST gets nothing and changes nothing; the
        exact RST tears the connection down: the next data gets a RST (RFC 5961 3.2)."""
        def fn(tg):
            c = tg.conn()
            self.verify(c.open() is not None and c.push() is not None,
                        f"{tg.name}: connection with 100 bytes")
            nxt = c.snd_nxt
            c.send("R", seq=nxt + 1, ack=0)
            got = c.collect(0.5)
            chal = [p for _, p in got if fl(p) == "A" and p[TCP].ack == nxt and plen(p) == 0]
            a = "challenge ACK" if chal and len(got) == len(chal) else \
                ("nothing" if not got else "other: " + ",".join(fl(p) for _, p in got))
            c.send("R", seq=nxt + (1 << 30), ack=0)
            got = c.collect(0.3)
            b = "dropped" if not got else "answered: " + ",".join(fl(p) for _, p in got)
            alive = c.push() is not None
            c.send("R", seq=c.snd_nxt, ack=0)
            time.sleep(0.05)
            data = c.payload(100)
            c.send("PA", data=data)
            rst = c.wait(lambda p: "R" in fl(p), 1.0)
            cs = "torn down (RST to the next data)" if rst is not None else "NOT torn down"
            if rst is None:
                c.abort()
            return {"a": a, "b": b, "alive": alive, "down": rst is not None,
                    "s": f"RST in window -> {a}; beyond -> {b}; "
                         f"{'alive' if alive else 'DEAD'}; RST at RCV.NXT -> {cs}"}

        r = self.run_both(fn)
        t = r["Tide"]
        problems = []
        if t["a"] != "challenge ACK":
            problems.append(f"in-window RST not at RCV.NXT: {t['a']} (needs a challenge ACK)")
        if t["b"] != "dropped":
            problems.append(f"out-of-window RST {t['b']}")
        if not t["alive"]:
            problems.append("connection died on a RST not at RCV.NXT")
        if not t["down"]:
            problems.append("RST at RCV.NXT did not tear down")
        self.record("3. RST (RFC 5961 3.2)", r, problems)

    # --- 4 ---------------------------------------------------------------------------------

    def test_04_rfc5961_syn(self):
        """Steps: on an established connection (100 bytes delivered) a SYN at RCV.NXT with
        a new ISN's options; then 100 more bytes.
        Verify (Tide): a challenge ACK (ACK of RCV.NXT), no SYN-ACK, no RST; the connection
        lives on (RFC 5961 4.2)."""
        def fn(tg):
            c = tg.conn()
            self.verify(c.open() is not None and c.push() is not None,
                        f"{tg.name}: connection with 100 bytes")
            nxt = c.snd_nxt
            c.send("S", seq=nxt, ack=0, opts=c.syn_opts())
            got = c.collect(0.5)
            chal = [p for _, p in got if fl(p) == "A" and p[TCP].ack == nxt and plen(p) == 0]
            a = "challenge ACK" if chal and len(got) == len(chal) else \
                ("nothing" if not got else "other: " + ",".join(fl(p) for _, p in got))
            alive = c.push() is not None
            c.abort()
            return {"a": a, "alive": alive,
                    "s": f"SYN when established -> {a}; {'alive' if alive else 'DEAD'}"}

        r = self.run_both(fn)
        t = r["Tide"]
        problems = []
        if t["a"] != "challenge ACK":
            problems.append(f"SYN on an established connection: {t['a']}")
        if not t["alive"]:
            problems.append("connection died on a SYN")
        self.record("4. SYN (RFC 5961 4.2)", r, problems)

    # --- 5 ---------------------------------------------------------------------------------

    def test_05_rfc5961_ack(self):
        """Steps: on an established connection (100 bytes delivered), 100 bytes whose ACK
        is 100000 beyond anything the target sent; on another, 100 bytes whose ACK is
        200000 below SND.UNA (more than the 65535 the tester ever offered); then the same
        100 bytes with a valid ACK on each.
        Verify (Tide): neither segment's data is taken (the ACK stays at RCV.NXT), both are
        answered with an ACK of RCV.NXT, and the connection lives on (RFC 5961 5.2:
        discard and send an ACK; RFC 9293 3.10.7.4 for SEG.ACK > SND.NXT)."""
        def probe(tg, delta):
            c = tg.conn()
            self.verify(c.open() is not None and c.push() is not None,
                        f"{tg.name}: connection with 100 bytes")
            nxt = c.snd_nxt
            c.send("PA", ack=c.rcv_nxt + delta, data=c.payload(100))
            got = c.collect(0.5)
            taken = any(sdiff(p[TCP].ack, nxt) > 0 for _, p in got)
            acks = [p for _, p in got if "A" in fl(p) and p[TCP].ack == nxt]
            how = ("TAKEN" if taken else "discarded") + \
                (" + ACK" if acks else " silently")
            alive = c.push() is not None  # the same bytes, now with a valid ACK
            c.abort()
            return taken, bool(acks), alive, how

        def fn(tg):
            t1, a1, al1, h1 = probe(tg, 100000)
            t2, a2, al2, h2 = probe(tg, -200000)
            return {"taken": t1 or t2, "ack_unsent": a1, "ack_old": a2, "alive": al1 and al2,
                    "s": f"ACK > SND.NXT -> {h1}; ACK < SND.UNA-MAX.SND.WND -> {h2}; "
                         f"{'alive' if al1 and al2 else 'DEAD'}"}

        r = self.run_both(fn)
        t = r["Tide"]
        problems = []
        if t["taken"]:
            problems.append("data of a segment with an unacceptable ACK was taken")
        if not t["ack_unsent"]:
            problems.append("no ACK for an ACK of data never sent")
        if not t["ack_old"]:
            problems.append("no challenge ACK for an ACK below SND.UNA - MAX.SND.WND")
        if not t["alive"]:
            problems.append("connection died")
        self.record("5. bad ACK (RFC 5961 5.2)", r, problems)

    # --- 6 ---------------------------------------------------------------------------------

    def test_06_out_of_window_data(self):
        """Steps: on an established connection (100 bytes delivered), the same 100 bytes
        again (left of the window); on another, 100 bytes 2^30 beyond RCV.NXT; then 100
        in-order bytes on each.
        Verify (Tide): both get an ACK of RCV.NXT (a duplicate ACK; RFC 9293 3.10.7.4) and
        no SACK block for the far bytes; the in-order bytes are ACKed exactly, so nothing
        out of the window was delivered."""
        def fn(tg):
            res = {}
            for kind, off in (("old", -100), ("beyond", 1 << 30)):
                c = tg.conn()
                self.verify(c.open() is not None and c.push() is not None,
                            f"{tg.name}: connection with 100 bytes")
                nxt = c.snd_nxt
                seq = (nxt + off) & M32
                c.send("PA", seq=seq, data=c.payload(100, seq=seq))
                got = c.collect(0.5)
                dup = [p for _, p in got if "A" in fl(p) and p[TCP].ack == nxt]
                far_sack = any(sdiff(b, seq) >= 0 for _, p in got
                               for b in (topts(p).get("SAck") or ())[::2]) if kind == "beyond" \
                    else False
                dsack = any(topts(p).get("SAck") for p in dup)
                ack = c.push()
                exact = ack is not None and ack[TCP].ack == c.snd_nxt
                far_sack = far_sack or (ack is not None and kind == "beyond" and any(
                    sdiff(b, seq) >= 0 for b in (topts(ack).get("SAck") or ())[::2]))
                c.abort()
                res[kind] = (bool(dup), far_sack, exact, dsack)
            o, b = res["old"], res["beyond"]
            s = (f"old -> {'dup ACK' if o[0] else 'no ACK'}{' (D-SACK)' if o[3] else ''}; "
                 f"beyond -> {'dup ACK' if b[0] else 'no ACK'}"
                 f"{', SACKed!' if b[1] else ''}; "
                 f"{'not delivered' if o[2] and b[2] else 'DELIVERED or lost'}")
            return {"res": res, "s": s}

        r = self.run_both(fn)
        res = r["Tide"]["res"]
        problems = []
        for kind in ("old", "beyond"):
            dup, far_sack, exact, _ = res[kind]
            if not dup:
                problems.append(f"no duplicate ACK for {kind} data")
            if far_sack:
                problems.append("data beyond the window was SACKed (queued)")
            if not exact:
                problems.append(f"in-order data after {kind} data not ACKed exactly")
        self.record("6. out-of-window data", r, problems)

    # --- 7 ---------------------------------------------------------------------------------

    def test_07_malformed(self):
        """Steps: on an established connection (100 bytes delivered), segments carrying the
        next bytes at RCV.NXT: with a bad TCP checksum; data offset 4 (< 5); data offset 15
        with 10 bytes (> the segment); SYN+FIN; no flags at all; 0.3 s between them; then
        the next 100 bytes properly. Also a SYN+FIN to the listener.
        Verify (Tide): no answer to any, except a challenge ACK to SYN+FIN (RFC 5961 4.2);
        the proper bytes are ACKed exactly (none of the malformed ones was taken, the
        connection lives). The SYN+FIN to the listener is noted."""
        def fn(tg):
            c = tg.conn()
            self.verify(c.open() is not None and c.push() is not None,
                        f"{tg.name}: connection with 100 bytes")
            nxt = c.snd_nxt
            data = c.payload(100)
            good = c.seg("PA", data=data)
            bad_sum = IP(bytes(good))
            bad_sum[TCP].chksum ^= 0x5555
            kinds = [("bad checksum", bad_sum),
                     ("doff 4", c.seg("PA", data=data, opts=[], dataofs=4)),
                     ("doff 15 > len", c.seg("PA", data=data[:10], opts=[], dataofs=15)),
                     ("SYN+FIN", c.seg("SF", data=data, ack=0)),
                     ("no flags", c.seg("", data=data, ack=0))]
            answers, taken = {}, False
            for name, p in kinds:
                c.peer.send(p)
                got = c.collect(0.3)
                taken = taken or any(sdiff(q[TCP].ack, nxt) > 0 for _, q in got)
                answers[name] = ",".join(
                    "challenge ACK" if fl(q) == "A" and q[TCP].ack == nxt and plen(q) == 0
                    else fl(q) for _, q in got) or "none"
            ack = c.push()
            alive = ack is not None and ack[TCP].ack == c.snd_nxt
            c.abort()
            lc = tg.conn()
            lc.send("SF", seq=lc.iss, ack=0, opts=lc.syn_opts())
            got = lc.collect(0.5)
            lis = ",".join(fl(q) for _, q in got) or "dropped"
            if got:
                lc.send("R", seq=lc.iss + 1, ack=0)
            s = "; ".join(f"{k} -> {v}" for k, v in answers.items()) + \
                f"; {'alive, nothing taken' if alive and not taken else 'BROKEN'}" \
                f"; SYN+FIN to listener -> {lis}"
            return {"answers": answers, "alive": alive, "taken": taken, "lis": lis, "s": s}

        r = self.run_both(fn)
        t = r["Tide"]
        problems = []
        for k, v in t["answers"].items():
            if v != "none" and not (k == "SYN+FIN" and v == "challenge ACK"):
                problems.append(f"{k} answered: {v}")
        if t["taken"] or not t["alive"]:
            problems.append("a malformed segment was taken or killed the connection")
        self.record("7. malformed segments", r, problems)

    # --- 8 ---------------------------------------------------------------------------------

    def test_08_no_stray_ack(self):
        """Steps: an echo target; three rounds of: 100 bytes, the echo read and ACKed at
        once, then 0.4 s of listening.
        Verify (Tide): no pure ACK arrives after an echo: the echo carried the ACK of the
        request, so a delayed ACK still armed for it would be a stray, duplicate ACK."""
        def fn(tg):
            c = tg.conn("echo")
            self.verify(c.open() is not None, f"{tg.name}: echo connection")
            stray = early = 0
            echoed = True
            for _ in range(3):
                data = c.payload(100)
                c.send("PA", data=data)
                c.snd_nxt = (c.snd_nxt + 100) & M32
                got_bytes = 0
                deadline = time.monotonic() + 2.0
                while got_bytes < 100 and time.monotonic() < deadline:
                    p = c.wait(lambda q: True, deadline - time.monotonic())
                    if p is None:
                        break
                    n = plen(p)
                    if n == 0:
                        early += 1
                        continue
                    if p[TCP].seq == c.rcv_nxt:
                        got_bytes += n
                        c.rcv_nxt = (c.rcv_nxt + n) & M32
                        c.send("A")
                if got_bytes < 100:
                    echoed = False
                    break
                for _, q in c.collect(0.4):
                    if plen(q) == 0 and fl(q) == "A":
                        stray += 1
            c.abort()
            return {"stray": stray, "echoed": echoed,
                    "s": f"{stray} pure ACKs after a reply"
                         f"{'' if echoed else ' (echo MISSING)'}; {early} before it"}

        r = self.run_both(fn, "--echo")
        t = r["Tide"]
        problems = []
        if not t["echoed"]:
            problems.append("the echo did not come back")
        if t["stray"]:
            problems.append(f"{t['stray']} stray pure ACKs after replies")
        self.record("8. no stray ACK after reply", r, problems,
                    alike=r["Linux"]["stray"] == t["stray"])

    # --- 9 ---------------------------------------------------------------------------------

    def test_09_zero_window(self):
        """Steps: a send target (it sends 1000 bytes on accepting); the tester's handshake
        ACK advertises a zero window; every probe is answered with an ACK of RCV.NXT and a
        zero window for 4.5 s; then an ACK opening the window to 65535.
        Verify (Tide): at least 3 probes, their intervals growing (each >= 0.8x the one
        before, the last >= 2x the first: backoff, RFC 9293 3.8.6.1), none before the RTO
        floor; after the window opens all 1000 bytes arrive within 1 s."""
        def fn(tg):
            c = tg.conn("send")
            self.verify(c.open(ack_win=0) is not None, f"{tg.name}: connection")
            t0 = time.monotonic()
            probes = []
            for t, p in c.each(ZWP_WATCH_S):
                probes.append((t - t0, sdiff(p[TCP].seq, c.rcv_nxt), plen(p)))
                c.send("A", win=0)  # as a receiver whose window is still closed
            c.send("A", win=65535)
            t1 = time.monotonic()
            got, resume = 0, None
            deadline = t1 + 3.0
            while got < SEND_BYTES and time.monotonic() < deadline:
                p = c.wait(lambda q: plen(q) > 0 and q[TCP].seq == c.rcv_nxt,
                           deadline - time.monotonic())
                if p is None:
                    break
                got += plen(p)
                c.rcv_nxt = (c.rcv_nxt + plen(p)) & M32
                c.send("A")
                resume = time.monotonic() - t1
            c.abort()
            gaps = [b[0] - a[0] for a, b in zip(probes, probes[1:])]
            forms = sorted({f"{n}-byte at {'RCV.NXT' if o == 0 else f'RCV.NXT{o:+d}'}"
                            for _, o, n in probes})
            s = (f"{len(probes)} probes ({', '.join(forms) or '-'}) at "
                 + " ".join(f"{t:.2f}" for t, _, _ in probes) + " s; "
                 + (f"resumed in {resume * 1000:.0f} ms" if got >= SEND_BYTES
                    else f"NOT resumed ({got} bytes)"))
            return {"probes": probes, "gaps": gaps, "got": got, "resume": resume, "s": s}

        r = self.run_both(fn, "--send", str(SEND_BYTES))
        t = r["Tide"]
        problems = []
        g = t["gaps"]
        if len(t["probes"]) < 3:
            problems.append(f"{len(t['probes'])} probes in {ZWP_WATCH_S} s")
        elif not (all(b >= 0.8 * a for a, b in zip(g, g[1:])) and g[-1] >= 2 * g[0]):
            problems.append("probe intervals do not back off: "
                            + " ".join(f"{x:.2f}" for x in g))
        if t["probes"] and t["probes"][0][0] < 0.8 * RTO_MIN_S:
            problems.append(f"first probe after {t['probes'][0][0]:.3f} s, below the RTO")
        if t["got"] < SEND_BYTES or t["resume"] is None or t["resume"] > 1.0:
            problems.append("the transfer did not resume within 1 s of the window opening")
        lx = r["Linux"]
        self.record("9. zero-window probing", r, problems,
                    alike=len(lx["probes"]) == len(t["probes"]) and
                    {n for _, _, n in lx["probes"]} == {n for _, _, n in t["probes"]} and
                    (lx["got"] >= SEND_BYTES) == (t["got"] >= SEND_BYTES))

    # --- 10 --------------------------------------------------------------------------------

    def test_10_tail_loss_probe(self):
        """Steps: a send target (1000 bytes, one segment, on accepting), SACK and
        timestamps negotiated; the tester never ACKs it and listens for 6.5 s, then resets.
        Counters: Linux TcpExt TCPLossProbes/TCPTimeouts, Tide tcp_tlp_probes/tcp_rto_fired.
        Verify (Tide): at most one loss probe (RFC 8985 7.3: none while one is in flight;
        one per episode); from the RTO floor on, every retransmission waits at least 1.6x
        the gap before it (RTO backoff, RFC 6298 5.5); at most 1 + log2(6.5 s / 0.2 s + 1)
        retransmissions in all."""
        def fn(tg):
            c = tg.conn("send")
            before = tg.counters()
            self.verify(c.open() is not None and c.sack_ok, f"{tg.name}: connection with SACK")
            first = c.wait(lambda q: plen(q) > 0, 2.0)
            self.verify(first is not None, f"{tg.name}: no data")
            t0 = time.monotonic()
            tx = [(0.0, plen(first))]
            for t, p in c.collect(TLP_WATCH_S):
                if plen(p) > 0:
                    tx.append((t - t0, plen(p)))
            c.abort()
            time.sleep(0.05)
            after = tg.counters()
            names = (("TCPLossProbes", "TCPTimeouts") if tg.name == "Linux"
                     else ("tcp_tlp_probes", "tcp_rto_fired"))
            tlp, rto = (after.get(n, 0) - before.get(n, 0) for n in names)
            s = (f"{len(tx) - 1} retransmissions at " + " ".join(f"{x:.2f}" for x, _ in tx[1:])
                 + f" s; TLP {tlp}, RTO {rto}")
            return {"n": len(tx) - 1, "at": [x for x, _ in tx[1:]], "tlp": tlp, "rto": rto,
                    "s": s}

        r = self.run_both(fn, "--send", str(SEND_BYTES))
        t = r["Tide"]
        problems = []
        bound = 1 + int(math.log2(TLP_WATCH_S / RTO_MIN_S + 1))
        late = [x for x in t["at"] if x >= 0.9 * RTO_MIN_S]
        g = [b - a for a, b in zip(late, late[1:])]
        if t["tlp"] > 1:
            problems.append(f"{t['tlp']} loss probes in one episode")
        if t["n"] < 1:
            problems.append("never retransmitted")
        if t["n"] > bound:
            problems.append(f"{t['n']} retransmissions in {TLP_WATCH_S} s (bound {bound})")
        if len(late) < 3 or not all(b >= 1.6 * a for a, b in zip(g, g[1:])):
            problems.append("no RTO backoff from the RTO floor on: "
                            + " ".join(f"{x:.2f}" for x in late))
        self.record("10. tail loss probe", r, problems,
                    alike=r["Linux"]["n"] == t["n"] and r["Linux"]["tlp"] == t["tlp"])

    # --- 11 --------------------------------------------------------------------------------

    def test_11_time_wait(self):
        """Steps: a sendclose target (1000 bytes, then close: the target's FIN comes first);
        the tester ACKs data and FIN with its own FIN; 0.3 s later it sends that FIN again;
        then a SYN on the same 4-tuple with a higher ISN and newer timestamp.
        Verify (Tide): its FIN follows the data; the tester's FIN is ACKed, and so is its
        retransmission (TIME-WAIT: acknowledge it, restart 2 MSL, RFC 9293 3.10.7.4). The
        answer to the new SYN is noted (RFC 6191 lets it reopen; silence or an ACK is
        also allowed)."""
        def fn(tg):
            c = tg.conn("sendclose")
            self.verify(c.open() is not None, f"{tg.name}: connection")
            nbytes, fin = 0, False
            deadline = time.monotonic() + 3.0
            while not fin and time.monotonic() < deadline:
                p = c.wait(lambda q: q[TCP].seq == c.rcv_nxt and
                           (plen(q) > 0 or "F" in fl(q)), deadline - time.monotonic())
                if p is None:
                    break
                nbytes += plen(p)
                c.rcv_nxt = (c.rcv_nxt + plen(p)) & M32
                if "F" in fl(p):
                    fin = True
                    c.rcv_nxt = (c.rcv_nxt + 1) & M32
                else:
                    c.send("A")
            out = {"fin": fin and nbytes == SEND_BYTES, "ack1": False, "ack2": False}
            if not fin:
                c.abort()
                out["s"] = f"no FIN after {nbytes} bytes"
                return out
            c.send("FA")
            c.snd_nxt = (c.snd_nxt + 1) & M32
            out["ack1"] = c.wait(lambda q: fl(q) == "A" and q[TCP].ack == c.snd_nxt, 1.0) \
                is not None
            time.sleep(0.3)
            c.send("FA", seq=c.snd_nxt - 1)
            out["ack2"] = c.wait(lambda q: fl(q) == "A" and q[TCP].ack == c.snd_nxt, 1.0) \
                is not None
            time.sleep(0.05)
            n = Conn(c.peer, c.dport, sport=c.sport, iss=(c.snd_nxt + (1 << 20)) & M32)
            n.ts_base = c.tsval() + 1000
            n.send("S", seq=n.iss, ack=0, opts=n.syn_opts())
            got = n.collect(0.5)
            syn = ",".join("SYN-ACK" if fl(q) == "SA" else
                           ("ACK" if fl(q) == "A" else fl(q)) for _, q in got) or "nothing"
            if any("S" in fl(q) for _, q in got):
                n.send("R", seq=n.iss + 1, ack=0)
            out["syn"] = syn
            out["s"] = (f"FIN after {nbytes} bytes; "
                        f"FIN ACKed: {'yes' if out['ack1'] else 'NO'}; retransmitted FIN "
                        f"re-ACKed: {'yes' if out['ack2'] else 'NO'}; new SYN (same 4-tuple) -> "
                        f"{syn}")
            return out

        r = self.run_both(fn, "--send", str(SEND_BYTES), "--close")
        t = r["Tide"]
        problems = []
        if not t["fin"]:
            problems.append("no FIN after the data")
        if not t["ack1"]:
            problems.append("our FIN was not ACKed")
        if not t["ack2"]:
            problems.append("the retransmitted FIN in TIME-WAIT was not re-ACKed")
        self.record("11. TIME_WAIT", r, problems)

    # --- 12 --------------------------------------------------------------------------------

    def test_12_syn_flood(self):
        """Steps: 1000 SYNs in about 0.6 s from 20 addresses of the target's subnet that
        nobody answers ARP for (each half-open connection keeps its backlog slot; the
        backlog is 128 on both); then a legitimate handshake (SYN resent after 1 s if
        unanswered), 100 bytes, and a reset.
        Verify (Tide): the backlog overflowed and SYN cookies were sent (counters); the
        legitimate client connects and its bytes are ACKed (RFC 4987 3.6)."""
        def fn(tg):
            p = tg.peer
            sub = p.ip.rsplit(".", 1)[0]
            rnd = random.Random(8)
            opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None),
                    ("WScale", 7)]
            frames = [bytes(Ether(src=p.my_mac, dst=p.mac) /
                            IP(src=f"{sub}.{100 + i % 20}", dst=p.ip) /
                            TCP(sport=10000 + i, dport=tg.ports["flood"], flags="S",
                                seq=rnd.getrandbits(32), options=opts))
                      for i in range(1000)]
            before = tg.counters()
            t0 = time.monotonic()
            for i, f in enumerate(frames):
                p.sock.send(f)
                if i % 8 == 7:
                    time.sleep(0.004)
            flood_s = time.monotonic() - t0
            c = tg.conn("flood")
            sa = c.open(timeout=4.0)
            ok = sa is not None and c.push() is not None
            if sa is not None:
                c.abort()
            time.sleep(0.1)
            after = tg.counters()
            if tg.name == "Linux":
                names = ("ListenOverflows", "SyncookiesSent", "SyncookiesRecv")
            else:
                names = ("tcp_listen_overflow", "tcp_syncookies_sent", "tcp_syncookies_ok")
            ov, sent, okc = (after.get(n, 0) - before.get(n, 0) for n in names)
            conn_s = f"connected in {c.connect_s * 1000:.0f} ms" if sa is not None \
                else "NOT connected"
            return {"ok": ok, "sent": sent, "okc": okc, "flood_s": flood_s,
                    "s": f"{conn_s}, data ACKed: {'yes' if ok else 'NO'}; cookies sent "
                         f"{sent}, connections from cookies {okc}"}

        r = self.run_both(fn)
        t = r["Tide"]
        problems = []
        if not t["ok"]:
            problems.append("the legitimate client did not get through")
        if t["sent"] < 500:
            problems.append(f"only {t['sent']} SYN cookies sent for 1000 SYNs past a "
                            "backlog of 128")
        self.record("12. SYN flood past backlog", r, problems,
                    alike=r["Linux"]["ok"] == t["ok"] and
                    (r["Linux"]["sent"] > 0) == (t["sent"] > 0))
