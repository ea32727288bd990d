"""tools/benchplot.py and tools/bench-doc.py: the benchmark pictures and docs/benchmarks.md's
tables are drawn and printed from the results files, and from nothing else.

Fed real results files: tests/python/data/*.json are short runs of tools/master-ha-bench.py
and tools/net-bench-table.py (bar and log2 panels). Needs Debian's python3-pytest and
python3-matplotlib (tools/install-deps.sh); nothing built.
"""
import copy
import glob
import importlib.util
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools"))
import benchplot  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_doc",
                                               os.path.join(REPO, "tools", "bench-doc.py"))
bench_doc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_doc)

RESULTS = sorted(glob.glob(os.path.join(HERE, "data", "*.json")))
SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def cell_value(text):
    """A table cell back to (number, tolerance of its rounding), or (text, None)."""
    t = text.strip()
    m = re.fullmatch(r"([\d.]+) (B|KiB|MiB|GiB)", t)
    if m:
        return float(m.group(1)) * SIZE_UNITS[m.group(2)], 0.0
    m = re.fullmatch(r"-?[\d,]+(\.(\d+))?x?", t)
    if m:
        decimals = len(m.group(2) or "")
        return float(t.rstrip("x").replace(",", "")), 0.5 * 10 ** -decimals + 1e-9
    return t, None


def table_rows(lines):
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines
            if ln.startswith("|") and not ln.startswith("|---")]


@pytest.fixture(params=RESULTS, ids=[os.path.basename(p) for p in RESULTS])
def doc(request):
    return benchplot.load_json(request.param)


def test_results_files_present():
    assert len(RESULTS) >= 2, "tests/python/data should hold short real results files"


def test_results_file_records_the_run(doc):
    assert doc["command"].startswith("tools/")
    assert re.fullmatch(r"[0-9a-f]{40}", doc["commit"])
    assert len(doc["load"]["before"]) == 3 and len(doc["load"]["after"]) == 3
    assert doc["runs"] and doc["medians"] and doc["panels"] and doc["tables"]
    # Every median is the median of the raw rows it stands for.
    for m in doc["medians"]:
        assert m["n"] >= 1
        for field, lo in m["min"].items():
            assert lo <= m[field] <= m["max"][field]


def test_png_drawn_at_the_expected_size(doc, tmp_path):
    out = tmp_path / "bench.png"
    benchplot.plot(doc, str(out))
    assert out.stat().st_size > 20000  # axes, labels and lines, not a blank canvas
    assert benchplot.png_size(str(out)) == benchplot.figure_size(len(doc["panels"]))


@pytest.mark.parametrize("npanels", [1, 2, 3])
def test_png_size_follows_the_panel_count(doc, tmp_path, npanels):
    d = copy.deepcopy(doc)
    d["panels"] = (d["panels"] * 3)[:npanels]
    out = tmp_path / f"bench{npanels}.png"
    benchplot.plot(d, str(out))
    w, h = benchplot.png_size(str(out))
    assert (w, h) == benchplot.figure_size(npanels)
    assert w == round(benchplot.PANEL_W * min(npanels, benchplot.MAX_COLS) * benchplot.DPI)


def test_every_panel_draws_a_measured_series(doc):
    for p in doc["panels"]:
        assert p.get("xlabel") and p.get("ylabel") and "(" in p["ylabel"], \
            f"panel {p['title']!r}: axes need labels with units"
        measured = [s for s in p["series"] if "points" not in s]
        assert measured
        assert any(benchplot._series_points(doc, p, s) for s in measured)


def test_table_numbers_are_the_json_medians(doc):
    for t in doc["tables"]:
        rows = benchplot.select(doc["medians"], t.get("where"))
        cells = table_rows(benchplot.markdown_table(doc, t))
        assert cells[0] == [c["head"] for c in t["columns"]]
        assert len(cells) == 1 + len(rows)
        for line, r in zip(cells[1:], rows):
            for text, col in zip(line, t["columns"]):
                want = r.get(col["key"])
                got, tol = cell_value(text)
                if want is None:
                    assert text == "-"
                elif tol is None:
                    assert got == str(want)
                else:
                    assert abs(got - want) <= max(tol, abs(want) * 1e-12), (col, text, want)


def test_a_changed_median_changes_the_document(doc):
    t = doc["tables"][0]
    col = next(c for c in t["columns"] if c.get("fmt") == "int" or c.get("fmt", "").endswith("f"))
    d = copy.deepcopy(doc)
    row = benchplot.select(d["medians"], t.get("where"))[0]
    row[col["key"]] = 987654321.0
    before = bench_doc.describe(doc, "img/x.png")
    after = bench_doc.describe(d, "img/x.png")
    assert benchplot.fmt(987654321.0, col.get("fmt")) in after
    assert benchplot.fmt(987654321.0, col.get("fmt")) not in before


def test_description_names_command_commit_and_load(doc):
    text = bench_doc.describe(doc, "img/x.png")
    assert f"`{doc['command']}`" in text
    assert doc["commit"][:12] in text
    assert f"{doc['load']['before'][0]:.2f}" in text and f"{doc['load']['after'][0]:.2f}" in text
    assert "![" in text and "(img/x.png)" in text


def test_medians_min_max_and_text():
    rows = [{"path": "a", "bs": 4096, "run": 0, "mib_s": 10.0, "label": "x"},
            {"path": "a", "bs": 4096, "run": 1, "mib_s": 30.0, "label": "x"},
            {"path": "a", "bs": 4096, "run": 2, "mib_s": 20.0, "label": "x"},
            {"path": "b", "bs": 4096, "run": 0, "mib_s": 5.0, "label": "y"}]
    m = benchplot.medians(rows, ["path", "bs"])
    assert [r["path"] for r in m] == ["a", "b"]
    assert m[0]["mib_s"] == 20.0 and m[0]["n"] == 3 and m[0]["label"] == "x"
    assert m[0]["min"]["mib_s"] == 10.0 and m[0]["max"]["mib_s"] == 30.0
    assert "run" not in m[0]


def test_docs_benchmarks_md_is_generated_from_docs_data():
    path = os.path.join(REPO, "docs", "benchmarks.md")
    if not os.path.exists(path):
        pytest.skip("no docs/benchmarks.md")
    with open(path) as f:
        text = f.read()
    new, names = bench_doc.render(text, os.path.join(REPO, "docs", "data"),
                                  os.path.join(REPO, "docs", "img"), os.path.dirname(path))
    assert names, "docs/benchmarks.md has no generated parts"
    assert new == text, "docs/benchmarks.md differs from docs/data: run tools/bench-doc.py"
    for name in names:
        d = benchplot.load_json(os.path.join(REPO, "docs", "data", name + ".json"))
        png = os.path.join(REPO, "docs", "img", name + ".png")
        assert benchplot.png_size(png) == benchplot.figure_size(len(d["panels"]))
