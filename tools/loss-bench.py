#!/usr/bin/python3
"""TCP under loss and congestion: Tide and Linux through the same switch, same run (issue 35).

The switch is dts/framework/lossnet.py: a Linux bridge in its own network namespace, `nft`
bridge rules dropping a random share of the TCP frames in both directions, and for the
bottleneck rows a `tbf` over a shallow `pfifo` on the port toward the receiver. Tide runs
`tide-net` on net_af_packet over a veth; Linux runs lossnet.py's socket peer. Every transfer is
verified byte for byte by its receiver.

Random-loss rows: for each loss rate and each of Tide's RTO floors (TIDE_TCP_RTO_MIN_US;
Linux keeps its own 200 ms floor), each pair (Tide -> Linux, Linux -> Tide, Linux -> Linux,
Tide -> Tide) moves --mib MiB, --runs times, pairs interleaved within a run; goodput and the
sender's RTOs per transfer (tide-net's tcp_rto_fired, TcpExt TCPTimeouts of the Linux
sender's namespace) are kept per run, and the medians printed side by side.

Bottleneck rows: --bn-mbit Mbit/s over a --bn-queue-packet pfifo toward the receiver, shared
by N flows of --bn-mib MiB each, for each of --bn-pairs: Linux -> Linux, Linux -> Tide (N
Linux flows; tide-net serve takes them all), Tide -> Linux and Tide -> Tide (one tide-net
send --flows N: N connections on one poller). Per row: aggregate goodput (all bytes over the
span from the first flow's handshake to the last flow's end), Jain's fairness index of the
flows' goodputs, and the p99 (and median) completion time of N flows of 1 MiB, each from its
connect call (its SYN); N Linux senders connect together once all have started (lossnet's gate),
as tide-net's flows do. Medians over runs, and a side-by-side table per N of each
pair against Linux -> Linux (issue 35: Tide's aggregate >= Linux's, Jain >= Linux's, p99 <=
Linux's).

usage: tools/loss-bench.py BUILD_DIR [--mib 256] [--runs 5] [--losses 0,0.1,1,2,5]
           [--floors-us 1000,200000] [--pairs tl,lt,ll,tt] [--bn-flows 1,4,16]
           [--bn-pairs ll,lt,tl,tt] [--bn-mbit 200] [--bn-queue 20] [--bn-mib 16]
           [--tide-cc newreno] [--tide-hystart on|off] [--tide-pacing on|off]
           [--tide-sack-compress on|off]
           [--json FILE] [--png FILE]
--losses '' runs no random-loss rows, --bn-flows '' no bottleneck rows.
Needs root (network namespaces). Writes BUILD_DIR/bench/loss-bench.json and .png by default.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "dts"))
import benchplot  # noqa: E402
from framework import lossnet  # noqa: E402

PAIRS = {"tl": ("ta", "lb", "Tide -> Linux"), "lt": ("la", "tb", "Linux -> Tide"),
         "ll": ("la", "lb", "Linux -> Linux"), "tt": ("ta", "tb", "Tide -> Tide")}


CC_NAMES = {"newreno": "NewReno", "cubic": "CUBIC", "westwood": "Westwood+"}


def floats(text):
    return [float(x) for x in text.split(",") if x]


def ints(text):
    return [int(x) for x in text.split(",") if x]


def random_loss(net, a, raw, port):
    for run in range(a.runs):
        for loss in a.losses:
            net.set_loss({h: loss for h in lossnet.HOSTS})
            for floor in a.floors_us:
                for p in a.pairs:
                    snd, rcv, label = PAIRS[p]
                    port += 1
                    t0 = time.monotonic()
                    r = lossnet.transfer(net, a.build_dir, snd, rcv, a.mib << 20, port,
                                         rto_min_us=floor, timeout=a.timeout)
                    row = {"kind": "loss", "run": run, "loss_pct": loss,
                           "rto_floor_ms": floor / 1000, "pair": p, "pair_label": label,
                           "ok": r["ok"], "mib_s": r["mib_s"] if r["ok"] else None,
                           "rtos": r["rtos"] if r["ok"] else None}
                    if r["ok"] and r.get("rx_acks") is not None:
                        # a Tide receiver's ACKs, and those SACK compression held back
                        row.update(rx_acks=r["rx_acks"], sack_held=r.get("sack_held"))
                    raw.append(row)
                    print(f"run {run} loss {loss:g} % floor {floor / 1000:g} ms {label}: "
                          + (f"{r['mib_s']:.1f} MiB/s, RTOs {r['rtos']}" if r["ok"] else
                             "FAILED") + f" ({time.monotonic() - t0:.1f} s)", flush=True)
                    if not r["ok"]:
                        print(r["log"][-3000:], file=sys.stderr)
    return port


def bottleneck(net, a, raw, port):
    net.set_loss({})
    for run in range(a.runs):
        for n in a.bn_flows:
            for p in a.bn_pairs:
                snd, rcv, label = PAIRS[p]
                net.set_bottleneck(rcv, a.bn_mbit, a.bn_queue)
                row = {"kind": "bottleneck", "run": run, "flows": n, "pair": p,
                       "pair_label": label}
                q0 = net.queue_drops(rcv)
                port += 1
                r = lossnet.transfer(net, a.build_dir, snd, rcv, a.bn_mib << 20, port,
                                     flows=n, timeout=a.timeout)
                row["ok"] = r["ok"]
                if r["ok"]:
                    row.update(mib_s=r["mib_s"], jain=lossnet.jain(r["flow_mib_s"]),
                               rtos=r["rtos"], queue_drops=net.queue_drops(rcv) - q0,
                               hystart_css=r.get("hystart_css"), tx_cwr=r.get("tx_cwr"),
                               paced=r.get("paced"), rx_acks=r.get("rx_acks"),
                               sack_held=r.get("sack_held"),
                               mib_s_by_slowest=r["mib_s_by_slowest"], span_s=r["span_s"])
                port += 1
                f = lossnet.transfer(net, a.build_dir, snd, rcv, 1 << 20, port, flows=n,
                                     timeout=a.timeout)
                if f["ok"]:
                    # from each flow's SYN: a flow whose SYN met the full queue waits out
                    # the 1 s SYN timeout, and then runs into a queue the others have left
                    fct = sorted(f["fct_open"])
                    row["fct_p99_ms"] = 1000 * fct[min(len(fct) - 1,
                                                       int(0.99 * len(fct)))]
                    row["fct_p50_ms"] = 1000 * statistics.median(fct)
                row["ok"] = row["ok"] and f["ok"]
                net.set_bottleneck(rcv, None)
                raw.append(row)
                print(f"run {run} bottleneck {n} flow(s) {label}: " +
                      (f"{row['mib_s']:.1f} MiB/s, Jain {row['jain']:.3f}, "
                       f"FCT p99 {row.get('fct_p99_ms', float('nan')):.1f} ms, "
                       f"RTOs {row['rtos']}, queue drops {row['queue_drops']}" +
                       (f", HyStart++ CSS {row['hystart_css']}, device-full cuts "
                        f"{row['tx_cwr']}" if row.get("hystart_css") is not None else "") +
                       (f", paced {row['paced']}" if row.get("paced") is not None else "")
                       if r["ok"] else "FAILED"), flush=True)
                if not row["ok"]:
                    print((r["log"] + f["log"])[-3000:], file=sys.stderr)
    return port


def wide_rows(med, a):
    """One row per (loss, floor) with every pair's median goodput and RTOs side by side."""
    out = []
    for loss in a.losses:
        for floor in a.floors_us:
            w = {"kind": "loss-wide", "loss_pct": loss, "rto_floor_ms": floor / 1000,
                 "n": a.runs, "min": {}, "max": {}}
            for p in a.pairs:
                m = benchplot.select(med, {"kind": "loss", "loss_pct": loss,
                                           "rto_floor_ms": floor / 1000, "pair": p})
                if m:
                    w[f"{p}_mib_s"] = m[0].get("mib_s")
                    w[f"{p}_rtos"] = m[0].get("rtos")
            ll = w.get("ll_mib_s")
            for p in ("tl", "lt", "tt"):
                if ll and w.get(f"{p}_mib_s") is not None:
                    w[f"{p}_vs_ll"] = w[f"{p}_mib_s"] / ll
            out.append(w)
    return out


def bottleneck_wide_rows(med, a):
    """One row per flow count with every bottleneck pair's medians side by side, and each
    pair's over Linux -> Linux's (goodput and Jain: higher is better; p99: lower is)."""
    out = []
    for n in a.bn_flows:
        w = {"kind": "bottleneck-wide", "flows": n, "n": a.runs, "min": {}, "max": {}}
        for p in a.bn_pairs:
            m = benchplot.select(med, {"kind": "bottleneck", "flows": n, "pair": p})
            if m:
                for k in ("mib_s", "jain", "fct_p99_ms"):
                    w[f"{p}_{k}"] = m[0].get(k)
        for p in a.bn_pairs:
            if p == "ll":
                continue
            for k in ("mib_s", "jain", "fct_p99_ms"):
                if w.get(f"ll_{k}") and w.get(f"{p}_{k}") is not None:
                    w[f"{p}_{k}_vs_ll"] = w[f"{p}_{k}"] / w[f"ll_{k}"]
        out.append(w)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--losses", type=floats, default=[0, 0.1, 1, 2, 5])
    ap.add_argument("--floors-us", type=ints, default=[1000, 200000])
    ap.add_argument("--pairs", default="tl,lt,ll,tt")
    ap.add_argument("--bn-flows", type=ints, default=[1, 4, 16])
    ap.add_argument("--bn-pairs", default="ll,lt,tl,tt", help="bottleneck pairs (of "
                    f"{','.join(PAIRS)}), each with every --bn-flows count")
    ap.add_argument("--bn-mbit", type=int, default=200)
    ap.add_argument("--bn-queue", type=int, default=20)
    ap.add_argument("--bn-mib", type=int, default=16)
    ap.add_argument("--timeout", type=int, default=900, help="per transfer, seconds")
    ap.add_argument("--linux-cc", help="Linux endpoints' congestion control (default: the "
                    "host's net.ipv4.tcp_congestion_control)")
    ap.add_argument("--tide-cc", default="newreno", choices=("newreno", "cubic", "westwood"),
                    help="Tide endpoints' congestion control (TIDE_TCP_CC)")
    ap.add_argument("--tide-hystart", default="on", choices=("on", "off"),
                    help="HyStart++ in the Tide endpoints' first slow start (TIDE_TCP_HYSTART)")
    ap.add_argument("--tide-pacing", default="off", choices=("on", "off"),
                    help="pacing of the Tide endpoints' senders (TIDE_TCP_PACING)")
    ap.add_argument("--tide-sack-compress", default="on", choices=("on", "off"),
                    help="SACK compression of the Tide endpoints' receivers "
                    "(TIDE_TCP_SACK_COMPRESS)")
    ap.add_argument("--name", default="loss-bench", help="results name (JSON, PNG, doc block)")
    benchplot.add_output_args(ap)
    a = ap.parse_args()
    a.pairs = [p for p in a.pairs.split(",") if p]
    a.bn_pairs = [p for p in a.bn_pairs.split(",") if p]
    for p in a.pairs + a.bn_pairs:
        if p not in PAIRS:
            ap.error(f"pair {p!r}: not one of {', '.join(PAIRS)}")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces)")
    if not os.access(os.path.join(a.build_dir, "tools", "net", "tide-net"), os.X_OK):
        ap.error(f"{a.build_dir}/tools/net/tide-net: not built")
    json_path, png_path = benchplot.default_paths(a.build_dir, a.name, a.json, a.png)
    params = {k: getattr(a, k) for k in ("mib", "runs", "losses", "floors_us", "pairs",
                                         "bn_flows", "bn_pairs", "bn_mbit", "bn_queue",
                                         "bn_mib", "tide_cc", "tide_hystart",
                                         "tide_pacing", "tide_sack_compress")}
    net = lossnet.LossNet(f"l35b{os.getpid() % 1000}", 250, linux_cc=a.linux_cc,
                          tide_cc=a.tide_cc, tide_hystart=a.tide_hystart,
                          tide_pacing=a.tide_pacing,
                          tide_sack_compress=a.tide_sack_compress)
    raw = []
    try:
        net.build()
        params["linux_cc"] = net.linux_cc_in_use()
        rec = benchplot.Recorder(a.name, "TCP under random loss and at a bottleneck: Tide "
                                 f"(net_af_packet, {CC_NAMES[a.tide_cc]}) and Linux "
                                 f"({params['linux_cc']}) through one bridge, same run",
                                 params=params)
        port = random_loss(net, a, raw, 7000)
        if a.bn_flows:
            bottleneck(net, a, raw, port)
    finally:
        net.close()
    med = benchplot.medians([r for r in raw if r["kind"] == "loss"],
                            ["kind", "loss_pct", "rto_floor_ms", "pair"])
    med += benchplot.medians([r for r in raw if r["kind"] == "bottleneck"],
                             ["kind", "flows", "pair"])
    med += wide_rows(med, a)
    med += bottleneck_wide_rows(med, a)
    series = []
    for i, p in enumerate(a.pairs):
        for floor, style in zip(a.floors_us, ("-", "--")):
            series.append({"label": f"{PAIRS[p][2]}, Tide's RTO floor {floor / 1000:g} ms",
                           "where": {"kind": "loss", "pair": p, "rto_floor_ms": floor / 1000},
                           "color": i, "style": style})
    panels = [{"kind": "xy", "title": "Goodput against random loss (both directions), median "
               "and range of runs", "x": "loss_pct", "y": "mib_s", "xlabel": "loss (%)",
               "ylabel": "goodput (MiB/s)", "series": series},
              {"kind": "xy", "title": "Sender's RTOs per transfer", "x": "loss_pct",
               "y": "rtos", "xlabel": "loss (%)", "ylabel": "RTOs per transfer",
               "series": [dict(s, y="rtos") for s in series]}] if a.losses and a.pairs else []
    if a.bn_flows:
        bn_series = [{"label": PAIRS[p][2], "color": i,
                      "where": {"kind": "bottleneck", "pair": p}}
                     for i, p in enumerate(a.bn_pairs)]
        for y, title, ylabel in (("mib_s", "aggregate goodput", "goodput (MiB/s)"),
                                 ("jain", "Jain's fairness index", "Jain's index"),
                                 ("fct_p99_ms", "p99 completion of 1 MiB flows",
                                  "p99 FCT (ms)")):
            panels.append({"kind": "xy", "title": f"Bottleneck {a.bn_mbit} Mbit/s, pfifo "
                           f"{a.bn_queue}: {title}", "x": "flows", "y": y, "xint": True,
                           "xlabel": "flows", "ylabel": ylabel,
                           "series": [dict(s, y=y) for s in bn_series]})
    cols = [{"key": "loss_pct", "head": "loss %", "fmt": "g"},
            {"key": "rto_floor_ms", "head": "Tide's RTO floor ms", "fmt": "g"}]
    for p in a.pairs:
        cols += [{"key": f"{p}_mib_s", "head": f"{PAIRS[p][2]} MiB/s", "fmt": ".1f"},
                 {"key": f"{p}_rtos", "head": "RTOs", "fmt": "g"}]
    tables = [{"title": f"Random loss, both directions ({a.mib} MiB per transfer, median of "
               f"{a.runs}; RTOs are the sender's, per transfer):",
               "where": {"kind": "loss-wide"}, "columns": cols}] if a.losses and a.pairs else []
    if a.bn_flows:
        tables.append({"title": f"Bottleneck: tbf {a.bn_mbit} Mbit/s over a {a.bn_queue}-packet "
                       f"pfifo toward the receiver; {a.bn_mib} MiB per flow (goodput, Jain), "
                       "1 MiB per flow (completion time, from the SYN):",
                       "where": {"kind": "bottleneck"}, "columns": [
                           {"key": "flows", "head": "flows", "fmt": "d"},
                           {"key": "pair_label", "head": "pair"},
                           {"key": "mib_s", "head": "aggregate MiB/s", "fmt": ".1f"},
                           {"key": "jain", "head": "Jain", "fmt": ".3f"},
                           {"key": "fct_p99_ms", "head": "1 MiB FCT p99 ms", "fmt": ".1f"},
                           {"key": "rtos", "head": "RTOs", "fmt": "g"},
                           {"key": "queue_drops", "head": "queue drops", "fmt": "g"},
                           {"key": "n", "head": "runs", "fmt": "d"}]})
        wcols = [{"key": "flows", "head": "flows", "fmt": "d"}]
        for p in a.bn_pairs:
            short = PAIRS[p][2].replace("Linux", "L").replace("Tide", "T").replace(" ", "")
            wcols += [{"key": f"{p}_mib_s", "head": f"{short} MiB/s", "fmt": ".1f"},
                      {"key": f"{p}_jain", "head": "Jain", "fmt": ".3f"},
                      {"key": f"{p}_fct_p99_ms", "head": "p99 ms", "fmt": ".1f"}]
        for p in ("tl", "tt"):
            if p in a.bn_pairs and "ll" in a.bn_pairs:
                wcols += [{"key": f"{p}_mib_s_vs_ll", "head": f"{p}/ll goodput", "fmt": "x"},
                          {"key": f"{p}_jain_vs_ll", "head": f"{p}/ll Jain", "fmt": "x"},
                          {"key": f"{p}_fct_p99_ms_vs_ll", "head": f"{p}/ll p99", "fmt": "x"}]
        tables.append({"title": "Bottleneck, pairs side by side (medians of the rows above; "
                       "tl = Tide -> Linux, tt = Tide -> Tide, ll = Linux -> Linux; issue 35 "
                       "asks goodput and Jain >= 1.00x, p99 <= 1.00x):",
                       "where": {"kind": "bottleneck-wide"}, "columns": wcols})
    failed = sum(1 for r in raw if not r["ok"])
    rec.finish(raw, med, panels, tables, json_path=json_path, png_path=png_path,
               notes=["Goodput: bytes verified by the receiver over the sender's time from "
                      "connect to the last byte acknowledged (Linux: to the receiver's close).",
                      "Bottleneck aggregate: all flows' bytes over the span from the first "
                      "flow's handshake to the last flow's end (N Linux senders are N "
                      "processes that connect together once all have started; one tide-net "
                      "send --flows N opens its flows in one poller iteration); "
                      "mib_s_by_slowest keeps bytes over the slowest flow's own time, the "
                      "formula before. A 1 MiB flow's completion time counts from its "
                      "connect call (its SYN).",
                      "Loss: nft numgen random on the bridge's forward hook, the same share "
                      "of TCP frames from each end; Linux's own RTO floor is 200 ms.",
                      f"Linux's congestion control: {params['linux_cc']} (Tide's: "
                      f"{CC_NAMES[params.get('tide_cc', 'newreno')]}, HyStart++ "
                      f"{params.get('tide_hystart', 'off')}, pacing "
                      f"{params.get('tide_pacing', 'off')}, SACK compression "
                      f"{params.get('tide_sack_compress', 'off')}); "
                      "BBR does not take random loss for congestion, a loss-based control "
                      "(NewReno, CUBIC) does.",
                      f"{failed} transfer(s) failed." if failed else
                      "Every transfer completed and was verified byte for byte."])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
