"""A switch that loses and queues packets, for Tide's and Linux's TCP side by side (issue 35).

Topology (namespaces named <tag><host>, <tag> starting with "l35"; all removed by close()):

    ns <tag>ta  e0 (Tide, af_packet, no kernel IP)  --- p-ta --+
    ns <tag>tb  e0 (Tide, af_packet, no kernel IP)  --- p-tb --+-- br0 in ns <tag>m
    ns <tag>la  e0 (Linux sockets, kernel IP)       --- p-la --+   (nft bridge forward: drops;
    ns <tag>lb  e0 (Linux sockets, kernel IP)       --- p-lb --+    tbf + pfifo on a port: queue)

The loss model lives in the middle namespace only, so it treats every pair alike (Tide <-> Tide,
Tide <-> Linux, Linux <-> Linux): `nft` rules of the bridge family on the forward hook drop a
random share of the TCP frames that enter from a given port (`numgen random`). A rule in an
endpoint's own namespace would miss what af_packet reads. TSO, GSO, GRO and TX checksum
offload are off on every veth end, so one verdict is one wire segment and af_packet never reads
a frame whose checksum the kernel left for a NIC.

The bottleneck is a `tbf` with a shallow `pfifo` under it on a port's egress (this kernel has
no netem, fq or fq_codel): flows into that host share the rate and the queue, and drops come
from a full queue, as in incast.

Also runnable as a script: the Linux-socket peer of the transfers, with its own clock.

  lossnet.py send HOST PORT NBYTES [--gate]
                                     connect, send the pattern, half-close, wait for the close;
                                     prints "sent N bytes in S s"; --gate: print "ready" and
                                     connect only once a line arrives on stdin
  lossnet.py recv PORT NCONN         accept NCONN connections, verify each stream (the pattern
                                     of dts/tests/linux_peer.py and tide-net); prints one line
                                     per connection, exit 0 only if every byte matched
Only the Python standard library is used.
"""
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import linux_peer  # noqa: E402  (the shared pattern and its checker)

#: hosts of the topology: name -> (last octet, Tide or Linux)
HOSTS = {"ta": (1, "tide"), "tb": (2, "tide"), "la": (3, "linux"), "lb": (4, "linux")}


def sh(*cmd, check=True, timeout=60):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check,
                          timeout=timeout)


def linux_env(cc=None):
    """The Linux side is not under test: no MALLOC_PERTURB_ (meson sets it for every test).
    cc: the congestion control the peer sets on its sockets (L35_LINUX_CC)."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
    if cc:
        env["L35_LINUX_CC"] = cc
    return env


def counters(out):
    """The name=value counters tide-net prints at exit."""
    line = [ln for ln in out.splitlines() if "tide-net: counters:" in ln]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line[-1])} if line else {}


class LossNet:
    """The topology above. `tag` names everything (namespaces <tag>m, <tag>ta, ...); build()
    creates it, close() removes it and is safe to call at any point, more than once."""

    def __init__(self, tag, subnet_octet, linux_cc=None, tide_cc=None, tide_hystart=None,
                 tide_pacing=None, tide_sack_compress=None):
        assert tag.startswith("l35") and len(tag) <= 10
        self.tag = tag
        self.subnet = f"10.135.{subnet_octet}"
        self.mid = f"{tag}m"
        self.linux_cc = linux_cc  # None: the host's default (a new namespace inherits it)
        self.tide_cc = tide_cc  # TIDE_TCP_CC of the Tide endpoints; None: the node default
        self.tide_hystart = tide_hystart  # TIDE_TCP_HYSTART ("on"/"off"); None: the default
        self.tide_pacing = tide_pacing  # TIDE_TCP_PACING ("on"/"off"); None: the default
        # TIDE_TCP_SACK_COMPRESS ("on"/"off"); None: the default
        self.tide_sack_compress = tide_sack_compress
        self.built = []
        self.procs = []

    def ns(self, host):
        return f"{self.tag}{host}"

    def ip(self, host):
        return f"{self.subnet}.{HOSTS[host][0]}"

    def build(self):
        self.close()
        m = self.mid
        sh("ip", "netns", "add", m)
        self.built.append(m)
        sh("ip", "-n", m, "link", "set", "lo", "up")
        sh("ip", "-n", m, "link", "add", "br0", "type", "bridge", "stp_state", "0",
           "forward_delay", "0")
        sh("ip", "-n", m, "link", "set", "br0", "up")
        for h, (octet, kind) in HOSTS.items():
            n = self.ns(h)
            sh("ip", "netns", "add", n)
            self.built.append(n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
            # Both ends created inside their namespaces: no name in the root namespace.
            sh("ip", "link", "add", "e0", "netns", n, "type", "veth", "peer", "name", f"p-{h}",
               "netns", m)
            sh("ip", "-n", m, "link", "set", f"p-{h}", "master", "br0")
            for ns_, dev in ((n, "e0"), (m, f"p-{h}")):
                sh("ip", "netns", "exec", ns_, "ethtool", "-K", dev, "tso", "off", "gso", "off",
                   "gro", "off", "tx", "off")
                sh("ip", "-n", ns_, "link", "set", dev, "up")
            sh("ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            if kind == "linux":
                sh("ip", "-n", n, "addr", "add", f"{self.ip(h)}/24", "dev", "e0")

        sh("ip", "netns", "exec", m, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        self.set_loss({})

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.procs = []
        names = [self.mid] + [self.ns(h) for h in HOSTS]
        listed = sh("ip", "netns", "list", check=False).stdout.split()
        for n in names:
            if n in listed:
                sh("ip", "netns", "del", n, check=False)
        self.built = []

    # --- the switch ------------------------------------------------------------------------

    def set_loss(self, rates):
        """Drop a random share of the TCP frames entering the bridge from a host's port:
        rates = {host: percent}; {} drops nothing. Replaces the previous rules."""
        rules = []
        for h, pct in sorted(rates.items()):
            if pct <= 0:
                continue
            per_million = int(round(pct * 10000))
            rules.append(f'iifname "p-{h}" ip protocol tcp numgen random mod 1000000 < '
                         f'{per_million} counter drop')
        self.set_rules("l35loss", rules)

    def set_rules(self, table, rules):
        """Replace the bridge table `table` of the middle namespace with one forward-hook
        chain of `rules` (nft rule texts, in order); [] leaves it empty."""
        text = (f"table bridge {table}\ndelete table bridge {table}\n"
                f"table bridge {table} {{\n chain drops {{\n"
                "  type filter hook forward priority 0; policy accept;\n"
                + "".join(f"  {r}\n" for r in rules) + " }\n}\n")
        subprocess.run(["ip", "netns", "exec", self.mid, "nft", "-f", "-"], input=text,
                       text=True, check=True, capture_output=True)

    def rule_packets(self, table):
        """The packet counts of the `counter` rules of bridge table `table`, in order."""
        out = sh("ip", "netns", "exec", self.mid, "nft", "list", "table", "bridge",
                 table).stdout
        return [int(n) for n in re.findall(r"packets (\d+)", out)]

    def dropped(self):
        """Frames the loss rules dropped so far, per host port."""
        out = sh("ip", "netns", "exec", self.mid, "nft", "list", "table", "bridge",
                 "l35loss").stdout
        return {m.group(1): int(m.group(2)) for m in
                re.finditer(r'iifname "p-(\w+)".*?packets (\d+)', out)}

    def set_bottleneck(self, host, rate_mbit, pfifo_pkts=20):
        """Everything the bridge sends to `host` goes through tbf at rate_mbit and a pfifo of
        pfifo_pkts frames; rate_mbit None removes it."""
        dev = f"p-{host}"
        sh("tc", "-n", self.mid, "qdisc", "del", "dev", dev, "root", check=False)
        if rate_mbit is None:
            return
        sh("tc", "-n", self.mid, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
           "rate", f"{rate_mbit}mbit", "burst", "16kb", "limit", "64kb")
        sh("tc", "-n", self.mid, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
           "pfifo", "limit", str(pfifo_pkts))

    def queue_drops(self, host):
        out = sh("tc", "-n", self.mid, "-s", "qdisc", "show", "dev", f"p-{host}").stdout
        m = re.search(r"pfifo.*?dropped (\d+)", out, re.S)
        return int(m.group(1)) if m else 0

    # --- endpoints -------------------------------------------------------------------------

    def tide_env(self, host, rto_min_us, lcore, extra=None):
        env = {"TIDE_HUGEPAGES": "off",
               "TIDE_DPDK_DEVICE": "net_af_packet0,iface=e0",
               "TIDE_DATA_IP": self.ip(host),
               "TIDE_FILE_PREFIX": f"{self.tag}-{host}-{os.getpid()}",
               "TIDE_LCORES": str(lcore),
               "TIDE_TCP_RTO_MIN_US": str(rto_min_us)}
        if self.tide_cc:
            env["TIDE_TCP_CC"] = self.tide_cc
        if self.tide_hystart:
            env["TIDE_TCP_HYSTART"] = self.tide_hystart
        if self.tide_pacing:
            env["TIDE_TCP_PACING"] = self.tide_pacing
        if self.tide_sack_compress:
            env["TIDE_TCP_SACK_COMPRESS"] = self.tide_sack_compress
        env.update(extra or {})
        return env

    def linux_cc_in_use(self):
        """The congestion control the Linux peers use: linux_cc (set per socket with
        TCP_CONGESTION; a namespace's default may not be writable, and only what
        tcp_allowed_congestion_control lists is allowed), else the namespace's default."""
        return self.linux_cc or sh("ip", "netns", "exec", self.ns("la"), "sysctl", "-n",
                                   "net.ipv4.tcp_congestion_control").stdout.strip()

    def linux_timeouts(self, host):
        """TcpExt TCPTimeouts of a Linux host's namespace (RTOs fired there)."""
        out = sh("ip", "netns", "exec", self.ns(host), "cat", "/proc/net/netstat").stdout
        lines = [ln.split() for ln in out.splitlines() if ln.startswith("TcpExt:")]
        return int(dict(zip(lines[0], lines[1]))["TCPTimeouts"])


# --- transfers ----------------------------------------------------------------------------
#
# Each returns a dict: ok, mib_s (goodput of the whole transfer, the receiver's bytes over the
# sender's time from connect to the last byte acknowledged), rtos (the sender's RTOs), log
# (everything printed, for a failure message). Every byte is verified by the receiver.
#
# A Linux sender of N flows is N processes of this file (one connection each); a Tide sender of
# N flows is one tide-net send --flows N (N connections on one poller, opened in one iteration),
# which prints one "flow I: sent B bytes in S s" line per flow (S: from the end of its
# handshake to its last byte acknowledged; the line also says when the flow connected and when
# it was opened) and, once, the stack's counters. Linux's processes print the same times.

def _tide_net(build_dir):
    return os.path.join(build_dir, "tools", "net", "tide-net")


def _popen(ns, cmd, env, stdin=None):
    return subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=stdin, text=True, env=env)


def _wait_line(p, text, timeout):
    """Read p's stdout until a line with `text` (bounded); returns the lines read."""
    import select
    lines, buf, deadline = [], b"", time.monotonic() + timeout
    fd = p.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no '{text}' within {timeout} s: {''.join(lines)}")
        if not select.select([fd], [], [], left)[0]:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            raise RuntimeError(f"ended before '{text}': {''.join(lines)}")
        buf += chunk
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            lines.append(raw.decode(errors="replace") + "\n")
            if text in lines[-1]:
                p.early = "".join(lines)
                return


def _finish(p, timeout):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        out = (out or "") + f"\n[killed after {timeout} s]"
    return p.returncode, getattr(p, "early", "") + (out or "")


def _tide_base_env(env):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("TIDE_", "MOONCAKE_", "MC_"))}
    base.update(env)
    return base


def transfer(net, build_dir, snd, rcv, nbytes, port, rto_min_us=200000, flows=1, timeout=300):
    """nbytes from host snd to host rcv on each of `flows` connections at once. Returns the
    dict above, also per-flow seconds (fct) and goodputs (flow_mib_s), one per flow; with
    several flows each one's handshake end in seconds after the first's (flow_start, in
    fct's order), and mib_s is then all bytes over the span from the first flow's handshake
    to the last flow's end (span_s). fct_open: each flow's seconds from its connect call (its
    SYN) to its end, the completion time of a flow that meets a full queue at its handshake.
    N Linux senders are N processes: each starts up, then all connect at once (a gate on
    stdin), as tide-net opens its flows within one poller iteration."""
    skind, rkind = HOSTS[snd][1], HOSTS[rcv][1]
    lenv = linux_env(net.linux_cc)
    res = {"ok": False, "mib_s": 0.0, "rtos": None, "log": ""}
    t_lx = net.linux_timeouts(snd) if skind == "linux" else 0
    # receiver
    if rkind == "tide":
        r = _popen(net.ns(rcv), [_tide_net(build_dir), "serve", "--port", str(port),
                                 "--connections", str(flows)],
                   _tide_base_env(net.tide_env(rcv, rto_min_us, 1)))
        ready = "tide-net: ready"
    else:
        r = _popen(net.ns(rcv), ["/usr/bin/python3", os.path.abspath(__file__), "recv",
                                 str(port), str(flows)], lenv)
        ready = "listening"
    net.procs.append(r)
    try:
        _wait_line(r, ready, 60)
    except (TimeoutError, RuntimeError) as e:
        r.kill()
        res["log"] = str(e) + _finish(r, 10)[1]
        return res
    # sender(s)
    senders = []
    if skind == "tide":
        cmd = [_tide_net(build_dir), "send", "--peer", net.ip(rcv), "--port", str(port),
               "--bytes", str(nbytes)]
        if flows > 1:
            cmd += ["--flows", str(flows)]
        senders.append(_popen(net.ns(snd), cmd,
                              _tide_base_env(net.tide_env(snd, rto_min_us, 0))))
    else:
        for _ in range(flows):
            senders.append(_popen(net.ns(snd), ["/usr/bin/python3", os.path.abspath(__file__),
                                                "send", net.ip(rcv), str(port), str(nbytes),
                                                "--gate"], lenv, stdin=subprocess.PIPE))
    net.procs.extend(senders)
    try:
        # Linux senders connect together once all have started: Python's start-up is
        # 10-30 ms a process here, and ungated the last of 16 flows connected a quarter
        # second after the first, into a lighter queue.
        gated = senders if skind == "linux" else []
        for s in gated:
            _wait_line(s, "ready", 60)
        for s in gated:
            s.stdin.write("go\n")
            s.stdin.flush()
    except (TimeoutError, RuntimeError, OSError) as e:
        for p in senders + [r]:
            p.kill()
        res["log"] = str(e) + "".join(_finish(p, 10)[1] for p in senders + [r])
        return res
    souts = [_finish(s, timeout) for s in senders]
    rrc, rout = _finish(r, 60)
    log = "".join(o for _, o in souts) + rout
    res["log"] = log
    secs, starts, opens = [], [], []
    for rc, out in souts:
        # one line per flow: "sent N bytes in S s" (tide-net --flows N: "flow I: sent ...");
        # "connected at T s, opened at O s": this peer's CLOCK_MONOTONIC, tide-net's "+T s"
        # after its start; O is the connect call
        got = re.findall(r"sent (\d+) bytes in ([\d.]+) s(?:.*connected at \+?([\d.]+) s)?"
                         r"(?:, opened at \+?([\d.]+) s)?", out)
        if rc != 0 or not got or any(int(b) != nbytes for b, _, _, _ in got):
            return res
        secs += [float(t) for _, t, _, _ in got]
        starts += [float(c) for _, _, c, _ in got if c]
        opens += [float(o) for _, _, _, o in got if o]
    if len(secs) != flows:
        return res
    if rkind == "tide":
        # every connection ended by its sender's FIN with all nbytes, none broke the pattern
        ok = rrc == 0 and len(re.findall(rf"closed by peer: {nbytes} bytes in, 0 out, "
                                         r"0 mismatched", rout)) == flows and \
            "packet buffers leaked: 0" in rout
    else:
        ok = rrc == 0 and len(re.findall(rf"received {nbytes} bad 0 .* match", rout)) == flows
    if skind == "tide":
        cn = counters(souts[0][1])
        res["rtos"] = cn.get("tcp_rto_fired")
        # Slow starts HyStart++ made conservative, of all the sender's connections.
        res["hystart_css"] = cn.get("tcp_hystart_css")
        res["tx_cwr"] = cn.get("tcp_tx_cwr")  # window cuts for a full device (local)
        res["paced"] = cn.get("tcp_paced")  # sends the pacer held back (TIDE_TCP_PACING)
        ok = ok and "packet buffers leaked: 0" in souts[0][1]
    else:
        res["rtos"] = net.linux_timeouts(snd) - t_lx
    if rkind == "tide":
        cn = counters(rout)
        res["rx_acks"] = cn.get("tcp_tx_segs")  # the Tide receiver's segments: its ACKs
        res["sack_held"] = cn.get("tcp_sack_held")  # ACKs SACK compression held back
    res["ok"] = ok
    res["fct"] = secs
    res["flow_mib_s"] = [nbytes / 1048576.0 / s for s in secs]
    # Aggregate goodput: all bytes over the span from the first flow's handshake to the last
    # flow's end (N Linux senders are N processes, which do not start together); the slowest
    # flow's time when the starts are unknown (one flow).
    span = max(secs)
    if flows > 1 and len(starts) == flows:
        res["flow_start"] = [t - min(starts) for t in starts]
        span = max(t + s for t, s in zip(res["flow_start"], secs))
    if len(opens) == len(starts) == flows:
        res["fct_open"] = [t + s - o for t, s, o in zip(starts, secs, opens)]
    res["span_s"] = span
    res["mib_s_by_slowest"] = flows * nbytes / 1048576.0 / max(secs)  # the formula before span
    res["mib_s"] = flows * nbytes / 1048576.0 / span
    return res


def jain(xs):
    """Jain's fairness index of the throughputs xs (1 = equal shares)."""
    return (sum(xs) ** 2) / (len(xs) * sum(x * x for x in xs)) if xs else 0.0


# --- the Linux-socket peer ------------------------------------------------------------------

def _peer_cc(s):
    import socket
    cc = os.environ.get("L35_LINUX_CC")
    if cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())


def _peer_send(host, port, n, gate):
    import socket
    s = socket.socket()
    _peer_cc(s)
    if gate:
        print("ready", flush=True)
        if not sys.stdin.readline():
            return 1  # the harness gave up on the others
    s.settimeout(30)
    t_open = time.monotonic()
    s.connect((host, port))
    s.settimeout(600)
    t0 = time.monotonic()  # CLOCK_MONOTONIC, shared by every process on the host
    for c in linux_peer.chunks(n):
        s.sendall(c)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # the receiver closes once it has every byte
    secs = time.monotonic() - t0
    print(f"sent {n} bytes in {secs:.3f} s ({n / 1048576.0 / secs:.1f} MiB/s), connected at "
          f"{t0:.6f} s, opened at {t_open:.6f} s", flush=True)
    return 0


def _peer_recv(port, nconn):
    import socket
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    _peer_cc(ls)
    ls.bind(("0.0.0.0", port))
    ls.listen(nconn)
    ls.settimeout(60)
    print("listening", flush=True)
    results, threads = [], []
    lock = threading.Lock()

    def serve(c):
        c.settimeout(600)
        chk = linux_peer.Checker()
        while True:
            d = c.recv(1 << 20)
            if not d:
                break
            chk.feed(d)
        c.close()
        with lock:
            results.append(chk)

    for _ in range(nconn):
        c, _ = ls.accept()
        t = threading.Thread(target=serve, args=(c,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    ok = True
    for chk in results:
        good = chk.bad == 0 and chk.sha.hexdigest() == linux_peer.expected_sha(chk.n)
        ok = ok and good
        print(f"received {chk.n} bad {chk.bad} sha256 {chk.sha.hexdigest()}"
              f" {'match' if good else 'MISMATCH'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "send" and sys.argv[5:] in ([], ["--gate"]):
        sys.exit(_peer_send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                            sys.argv[5:] == ["--gate"]))
    if len(sys.argv) == 4 and sys.argv[1] == "recv":
        sys.exit(_peer_recv(int(sys.argv[2]), int(sys.argv[3])))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
