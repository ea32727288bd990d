"""Results files and pictures for Tide's benchmark scripts.

Every benchmark script (te-bench-table.py, store-bench-table.py, net-bench-table.py,
miles-bench.py, master-ha-bench.py) records one JSON document and draws one PNG from it
through this module, so the scripts only say what they measured and how to show it:

  rec = benchplot.Recorder("te-bench", "Transfer engine: tide-bench pairs")
  ... run, collecting raw rows (each a dict, one per measurement, with a "run" index) ...
  doc = rec.finish(raw_rows, medians(raw_rows, keys), panels=[...], tables=[...],
                   json_path=..., png_path=...)

The document (schema 1):
  bench, title, command (the command line, script path relative to the repository),
  commit, dirty_files (tracked files modified in the checkout when the run started),
  date (UTC, ISO 8601), machine (host, CPUs, CPU model, memory, kernel),
  load: {before, after: /proc/loadavg's first three fields, samples: [[s, 1-min], ...]},
  params (the script's settings), notes (lines of text),
  runs (every raw row), medians (one row per key: the median of each number over the
  runs, with "n" and the runs' "min" and "max" of each number),
  panels (what the PNG draws: views of the medians, see plot()), tables (what
  tools/bench-doc.py prints: views of the medians, see markdown_table()).

Panels and tables hold no numbers of their own besides reference figures (the stock
Mooncake figures of ../shared/spec/reference-figures.md, named as such in their labels):
every measured number drawn or printed is read from "medians".

matplotlib (Debian python3-matplotlib, tools/install-deps.sh) is imported only to draw,
with the Agg backend.
"""
import datetime
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import textwrap
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = 1
# Figure geometry: every panel PANEL_W x PANEL_H inches at DPI, at most MAX_COLS across.
PANEL_W, PANEL_H, DPI, MAX_COLS = 6.4, 5.6, 100, 2
HEAD_H = 0.6  # inches above the panels for the title
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#17becf", "#7f7f7f", "#bcbd22"]


# ---------------------------------------------------------------- what a run records

def loadavg():
    """/proc/loadavg's 1, 5 and 15-minute load averages, as numbers."""
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def git_commit(repo=REPO):
    """(HEAD's hash, tracked files modified in the work tree) or (None, [])."""
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip() or None
        st = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None, []
    return head, sorted(line[3:] for line in st.splitlines() if len(line) > 3)


def machine():
    model, mem = None, None
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         None)
        with open("/proc/meminfo") as f:
            kb = next(int(ln.split()[1]) for ln in f if ln.startswith("MemTotal:"))
            mem = round(kb / (1 << 20), 1)
    except (OSError, StopIteration, ValueError):
        pass
    return {"host": platform.node(), "cpus": os.cpu_count(), "cpu_model": model,
            "mem_gib": mem, "kernel": platform.release()}


def command_line(argv=None):
    """The command as typed, the script named relative to the repository."""
    argv = list(sys.argv if argv is None else argv)
    if argv:
        script = os.path.abspath(argv[0])
        if script.startswith(REPO + os.sep):
            argv[0] = os.path.relpath(script, REPO)
    return shlex.join(argv)


class Recorder:
    """Opens a results document when a benchmark starts (command, commit, date, machine,
    load before) and samples the 1-minute load average every `every_s` seconds until
    finish() closes it."""

    def __init__(self, bench, title, params=None, argv=None, every_s=10.0):
        commit, dirty = git_commit()
        self.t0 = time.monotonic()
        self.doc = {"schema": SCHEMA, "bench": bench, "title": title,
                    "command": command_line(argv), "commit": commit, "dirty_files": dirty,
                    "date": datetime.datetime.now(datetime.timezone.utc)
                    .replace(microsecond=0).isoformat(),
                    "machine": machine(),
                    "load": {"before": loadavg(), "after": None, "samples": []},
                    "params": dict(params or {}), "notes": []}
        self._stop = threading.Event()
        self._every = every_s
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.wait(self._every):
            la = loadavg()
            if la:
                self.doc["load"]["samples"].append([round(time.monotonic() - self.t0, 1),
                                                    la[0]])

    def finish(self, runs, medians_rows, panels=(), tables=(), notes=(), json_path=None,
               png_path=None, params=None):
        """Closes the document (load after, duration), writes the JSON, then the PNG.
        Returns the document."""
        self._stop.set()
        self._thread.join(timeout=1)
        d = self.doc
        d["load"]["after"] = loadavg()
        d["duration_s"] = round(time.monotonic() - self.t0, 1)
        d["params"].update(params or {})
        d["notes"] += list(notes)
        d["runs"] = list(runs)
        d["medians"] = list(medians_rows)
        d["panels"] = list(panels)
        d["tables"] = list(tables)
        if json_path:
            write_json(d, json_path)
            print(f"results: {json_path}")
        if png_path:
            plot(d, png_path)
            print(f"picture: {png_path}")
        return d


def write_json(doc, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def load_json(path):
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a benchplot results file (schema {doc.get('schema')})")
    return doc


def default_paths(build_dir, bench, json_path=None, png_path=None):
    """--json/--png as given, else BUILD_DIR/bench/<bench>.json and .png."""
    base = os.path.join(build_dir, "bench", bench)
    return json_path or base + ".json", png_path or (
        os.path.splitext(json_path)[0] + ".png" if json_path else base + ".png")


def add_output_args(ap):
    ap.add_argument("--json", help="results file (default BUILD_DIR/bench/<name>.json)")
    ap.add_argument("--png", help="picture (default: the results file's name, .png)")


# ------------------------------------------------------------------------ medians

def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def medians(rows, keys):
    """One row per distinct value of `keys` (first-seen order): those keys, every other
    number's median over the rows sharing them, "n" (how many), and "min"/"max" dicts of
    each number. Text fields keep the first row's value; "run" is dropped."""
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    out = []
    for kv, rs in groups.items():
        m = {k: v for k, v in zip(keys, kv)}
        lo, hi = {}, {}
        for field in rs[0]:
            if field in m or field == "run":
                continue
            vals = [r[field] for r in rs if _is_num(r.get(field))]
            if vals and all(_is_num(r.get(field)) or r.get(field) is None for r in rs):
                med = statistics.median(vals)
                m[field] = med
                lo[field], hi[field] = min(vals), max(vals)
            elif not _is_num(rs[0][field]):
                m[field] = rs[0][field]
        m["n"] = len(rs)
        m["min"], m["max"] = lo, hi
        out.append(m)
    return out


def select(rows, where=None):
    """The rows whose fields equal every item of `where`."""
    where = where or {}
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


# ------------------------------------------------------------------------ formatting

def size_label(n):
    """4096 -> '4 KiB', 256 -> '256 B', 1.5 MiB -> '1.5 MiB'."""
    n = float(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            v = n / div
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


def fmt(v, how):
    """One table cell: how is 'size', 'text', 'int' (thousands separated), 'x' (a ratio,
    '1.23x'), or a format spec ('.1f')."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if how == "size":
        return size_label(v)
    if how == "text":
        return str(v)
    if how == "int":
        return f"{v:,.0f}"
    if how == "x":
        return f"{v:.2f}x"
    return format(v, how)


def markdown_table(doc, table):
    """A table spec {"title", "where", "columns": [{"key", "head", "fmt"}]} over the
    document's medians, as markdown lines (title line first, when there is one)."""
    cols = table["columns"]
    rows = select(doc["medians"], table.get("where"))
    out = []
    if table.get("title"):
        out += [table["title"], ""]
    out.append("| " + " | ".join(c["head"] for c in cols) + " |")
    out.append("|" + "|".join("---" if c.get("fmt", "text") in ("text", "size") and
                              not c.get("right") else "---:" for c in cols) + "|")
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(c["key"]), c.get("fmt", "text"))
                                     for c in cols) + " |")
    return out


def load_text(doc):
    """'1.93 / 2.41' style: the 1-minute load before and after, with the highest sample."""
    ld = doc.get("load") or {}
    b, a = ld.get("before"), ld.get("after")
    peak = max([s[1] for s in ld.get("samples") or []] + [x[0] for x in (b, a) if x] or [0])
    bt = f"{b[0]:.2f}" if b else "?"
    at = f"{a[0]:.2f}" if a else "?"
    return f"1-min load {bt} before, {at} after, peak {peak:.2f}"


# ------------------------------------------------------------------------ pictures

def figure_size(npanels):
    """(width, height) of plot()'s PNG in pixels for npanels panels."""
    cols = min(MAX_COLS, max(1, npanels))
    nrows = max(1, math.ceil(npanels / cols))
    return int(round(PANEL_W * cols * DPI)), int(round((PANEL_H * nrows + HEAD_H) * DPI))


def _series_points(doc, panel, s):
    if "points" in s:  # a reference figure, not a measurement
        return [(p[0], p[1], None, None) for p in s["points"]]
    y = s.get("y", panel["y"])
    pts = []
    for r in select(doc["medians"], s.get("where")):
        if r.get(panel["x"]) is None or not _is_num(r.get(y)):
            continue
        lo = (r.get("min") or {}).get(y)
        hi = (r.get("max") or {}).get(y)
        pts.append((r[panel["x"]], r[y], lo, hi))
    return pts


def _color(s, i):
    c = s.get("color", i)
    return COLORS[c % len(COLORS)] if isinstance(c, int) else c


def _dodge(x, k, n, log2):
    """Series k of n measured ones, moved a little sideways so their range bars do not
    overlap: up to a fifth of an octave on a log2 axis, of a unit on a linear one."""
    off = (k - (n - 1) / 2) * min(0.05, 0.2 / max(n - 1, 1))
    return x * 2 ** off if log2 else x + off


def _draw_xy(ax, doc, panel):
    xs_all = set()
    measured = [s for s in panel["series"] if "points" not in s]
    for i, s in enumerate(panel["series"]):
        pts = sorted(_series_points(doc, panel, s), key=lambda p: p[0])
        if not pts:  # named in the legend all the same, so a failed path is not silent
            ax.plot([], [], linestyle=s.get("style", "-"), color=_color(s, i),
                    label=s["label"] + " (no data: failed)")
            continue
        xs_all.update(p[0] for p in pts)
        if "points" not in s:
            k = next(j for j, m in enumerate(measured) if m is s)
            pts = [(_dodge(p[0], k, len(measured), panel.get("xlog2")),) + tuple(p[1:])
                   for p in pts]
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        ref = "points" in s
        style = s.get("style", ":" if ref else "-")
        marker = s.get("marker", "x" if ref else "o")
        ax.plot(xs, ys, linestyle=style, marker=marker, color=_color(s, i), label=s["label"],
                linewidth=1.4 if not ref else 1.2, markersize=5)
        if not ref and all(p[2] is not None for p in pts) and any(p[2] != p[3] for p in pts):
            ax.vlines(xs, [p[2] for p in pts], [p[3] for p in pts], color=_color(s, i),
                      linewidth=0.8, alpha=0.6)
    if panel.get("xint"):
        from matplotlib import ticker
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    if panel.get("xlog2"):
        ax.set_xscale("log", base=2)
        ticks = sorted(xs_all)
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(t) for t in ticks])
        ax.minorticks_off()


def _draw_bar(ax, doc, panel):
    cats = []
    per = []
    for s in panel["series"]:
        pts = _series_points(doc, panel, s)
        per.append(pts)
        for p in pts:
            if p[0] not in cats:
                cats.append(p[0])
    n = max(1, len(panel["series"]))
    width = 0.8 / n
    for i, (s, pts) in enumerate(zip(panel["series"], per)):
        if not pts:
            ax.bar([], [], color=_color(s, i), label=s["label"] + " (no data: failed)")
            continue
        xs = [cats.index(p[0]) - 0.4 + width * (i + 0.5) for p in pts]
        ys = [p[1] for p in pts]
        err = None
        if all(p[2] is not None for p in pts) and any(p[2] != p[3] for p in pts):
            err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
        ax.bar(xs, ys, width=width * 0.95, color=_color(s, i), label=s["label"], yerr=err,
               capsize=2, error_kw={"linewidth": 0.8}, hatch=s.get("hatch"),
               edgecolor="white" if s.get("hatch") else None)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([size_label(c) if panel.get("xsize") else
                        str(c) if panel.get("xrotate") else textwrap.fill(str(c), 22)
                        for c in cats],
                       rotation=panel.get("xrotate", 0),
                       ha="right" if panel.get("xrotate") else "center", fontsize=8)


def _place_legends(fig, axes):
    """Each legend just under its axes' x label (tick labels turned or not)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        bottom = ax.xaxis.label.get_window_extent(renderer).y0
        y = ax.transAxes.inverted().transform((0, bottom))[1]
        leg.set_bbox_to_anchor((0.5, y - 0.01), transform=ax.transAxes)


def _tick_text(v, _pos=None):
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def plot(doc, path):
    """Draws the document's panels into one PNG (figure_size(len(panels)) pixels).

    A panel: {"kind": "xy" | "bar", "title", "x": key, "y": key, "xlabel", "ylabel",
    "xlog2": bytes on a log2 axis, "xint": whole numbers on x, "ylog": log y axis,
    "xsize": bar categories are bytes, "xrotate": degrees to turn bar labels,
    "series": [{"label", "where": {key: value}, "y": key, "style", "color", "hatch"}
               | {"label", "points": [[x, y], ...]} (a reference figure, dotted)],
    "hlines": [{"label", "y", "color"}] (reference levels)}.
    The title names the commit, the date and the machine's load."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    panels = doc.get("panels") or []
    if not panels:
        raise ValueError("no panels to draw")
    w, h = figure_size(len(panels))
    cols = min(MAX_COLS, len(panels))
    nrows = math.ceil(len(panels) / cols)
    # A quarter pixel over, so that truncating or rounding the inches back gives w x h.
    fig, axes = plt.subplots(nrows, cols, figsize=((w + 0.25) / DPI, (h + 0.25) / DPI), dpi=DPI,
                             squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        (_draw_bar if panel.get("kind") == "bar" else _draw_xy)(ax, doc, panel)
        for j, hl in enumerate(panel.get("hlines") or []):
            ax.axhline(hl["y"], linestyle=":", color=hl.get("color", "#555555"),
                       linewidth=1.2, label=hl["label"])
        if panel.get("ylog"):
            ax.set_yscale("log")
            lo, hi = ax.get_ylim()
            subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-12) < 1e3 else (1.0,)
            ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(_tick_text))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(panel.get("title", ""), fontsize=10)
        ax.set_xlabel(panel.get("xlabel", ""))
        ax.set_ylabel(panel.get("ylabel", ""))
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            # Below the axes (never over a point); moved under the x label by _place_legends.
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1,
                      frameon=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    commit = (doc.get("commit") or "unknown")[:10]
    fig.suptitle(f"{doc.get('title', doc.get('bench', ''))}\ncommit {commit}"
                 f"{' (+ uncommitted changes)' if doc.get('dirty_files') else ''}, "
                 f"{doc.get('date', '')[:16].replace('T', ' ')} UTC, {load_text(doc)} "
                 f"on {doc.get('machine', {}).get('cpus', '?')} CPUs", fontsize=10)
    for _ in range(2):
        _place_legends(fig, axes.flat)
        fig.tight_layout(rect=(0, 0, 1, 1 - HEAD_H / (h / DPI)))
    _place_legends(fig, axes.flat)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path}: not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def main(argv):
    """benchplot.py RESULTS.json OUT.png: draw a results file again."""
    if len(argv) != 3:
        print("usage: benchplot.py RESULTS.json OUT.png", file=sys.stderr)
        return 2
    plot(load_json(argv[1]), argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
