#!/usr/bin/python3
"""docs/benchmarks.md's generated parts, from the results files in docs/data.

Between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` the document holds what this script
writes from docs/data/NAME.json (a tools/benchplot.py results file): the picture
docs/img/NAME.png, the command, commit, date, machine and load of the run, and the
document's tables, every number printed from its medians. Everything outside the markers is
prose and stays as it is.

  tools/bench-doc.py              rewrite the generated parts
  tools/bench-doc.py --check      exit 1 (naming the parts) if any is not what the JSON gives
  tools/bench-doc.py --replot     also draw docs/img/NAME.png again from docs/data/NAME.json

To publish a new run: run the benchmark with --json docs/data/NAME.json --png
docs/img/NAME.png, then this script.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchplot  # noqa: E402

REPO = benchplot.REPO
BLOCK = re.compile(r"(<!-- bench:([\w.-]+) -->\n)(.*?)(<!-- /bench:\2 -->)", re.S)


def describe(doc, img_rel):
    """The generated part for one results file, as markdown text."""
    m = doc.get("machine") or {}
    ld = doc.get("load") or {}
    commit = doc.get("commit") or "unknown"
    dirty = doc.get("dirty_files") or []
    lines = [f"![{doc['title']}]({img_rel})", "",
             f"- Command: `{doc['command']}`",
             f"- Commit: `{commit[:12]}`" + (
                 f" with uncommitted changes in the shared checkout ({len(dirty)} tracked "
                 f"file{'s' if len(dirty) != 1 else ''}: {', '.join(dirty[:6])}"
                 f"{', ...' if len(dirty) > 6 else ''})" if dirty else ""),
             f"- Date: {doc['date'].replace('T', ' ').replace('+00:00', ' UTC')}, "
             f"{doc.get('duration_s', 0):.0f} s",
             f"- Machine: {m.get('cpus')} CPUs ({m.get('cpu_model')}), {m.get('mem_gib')} GiB, "
             f"Linux {m.get('kernel')}",
             "- Load (/proc/loadavg, 1/5/15 min): before "
             f"{' / '.join(f'{x:.2f}' for x in ld.get('before') or [])}, after "
             f"{' / '.join(f'{x:.2f}' for x in ld.get('after') or [])}"
             + (f"; 1-min samples during the run {min(s[1] for s in ld['samples']):.2f}-"
                f"{max(s[1] for s in ld['samples']):.2f}" if ld.get("samples") else "")]
    for note in doc.get("notes") or []:
        lines.append(f"- {note}")
    for t in doc.get("tables") or []:
        lines.append("")
        lines += benchplot.markdown_table(doc, t)
    return "\n".join(lines) + "\n"


def render(text, data_dir, img_dir, doc_dir, replot=False):
    """text with every generated part rewritten; returns (new text, names seen)."""
    names = []

    def one(m):
        name = m.group(2)
        names.append(name)
        doc = benchplot.load_json(os.path.join(data_dir, name + ".json"))
        png = os.path.join(img_dir, name + ".png")
        if replot:
            benchplot.plot(doc, png)
        return m.group(1) + describe(doc, os.path.relpath(png, doc_dir)) + m.group(4)

    return BLOCK.sub(one, text), names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--doc", default=os.path.join(REPO, "docs", "benchmarks.md"))
    ap.add_argument("--data", default=os.path.join(REPO, "docs", "data"))
    ap.add_argument("--img", default=os.path.join(REPO, "docs", "img"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--replot", action="store_true")
    a = ap.parse_args()
    with open(a.doc) as f:
        old = f.read()
    new, names = render(old, a.data, a.img, os.path.dirname(os.path.abspath(a.doc)), a.replot)
    if a.check:
        stale = [n for n in names
                 if render_one(old, n) != render_one(new, n)]
        if stale:
            print(f"{a.doc}: generated parts differ from the results files: "
                  f"{', '.join(stale)} (run tools/bench-doc.py)", file=sys.stderr)
            return 1
        print(f"{a.doc}: {len(names)} generated parts match their results files")
        return 0
    if new != old:
        with open(a.doc, "w") as f:
            f.write(new)
    print(f"{a.doc}: {len(names)} generated parts written ({', '.join(names)})")
    return 0


def render_one(text, name):
    """The generated part named name, as it stands in text."""
    m = next((m for m in BLOCK.finditer(text) if m.group(2) == name), None)
    return m.group(3) if m else None


if __name__ == "__main__":
    sys.exit(main())
