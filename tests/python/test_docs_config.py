"""docs/configuration.md checked against the code, so the page cannot drift.

What the code reads, found in the source tree (no build needed):
  * the node-file keys: the declarative key table in engine/lib/nodeenv/nodeenv.c (name and
    default of each), and every key tools/node.env.sample sets or shows;
  * every other environment variable: getenv()/secure_getenv() in the C code that ships
    (engine/, store/, pmd/, tools/; tests/ excluded), whether its name is a literal, a
    macro (`#define X_ENV "NAME"`, `#define X_VAR "NAME"`) or the parameter of a small
    wrapper such as env_u32("MC_SLICE_SIZE", ...); and os.environ / os.getenv in the
    Python package store/python/mooncake;
  * the flags of mooncake_master: the flags[] table of tools/master/master_main.c.

What the page documents: the first cell of its table rows, `KEY` for variables and
`--flag` for master flags. A key the code reads and the page lacks fails, naming it; a
key the page lists and the code does not know fails too; a node-file key whose default
cell disagrees with the parser's default fails. Flags the master accepts and ignores must
be named somewhere on the page (a list, not table rows).

Run: /usr/bin/python3 -m pytest tests/python/test_docs_config.py (meson: `docs_config`).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "configuration.md")
NODEENV_C = os.path.join(ROOT, "engine", "lib", "nodeenv", "nodeenv.c")
SAMPLE = os.path.join(ROOT, "tools", "node.env.sample")
MASTER_MAIN = os.path.join(ROOT, "tools", "master", "master_main.c")
C_DIRS = ("engine", "store", "pmd", "tools")
PY_PKG = os.path.join(ROOT, "store", "python", "mooncake")

NAME = r"[A-Z][A-Z0-9_]*"


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _c_files():
    for d in C_DIRS:
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, d)):
            for fn in sorted(files):
                if fn.endswith((".c", ".h")):
                    yield os.path.join(dirpath, fn)


# ---- what the code knows -----------------------------------------------------------------


def nodeenv_keys():
    """{name: default} from the key table of engine/lib/nodeenv/nodeenv.c."""
    src = _read(NODEENV_C)
    start = src.index("static const struct key_def keys[]")
    table = src[start:src.index("\n};", start)]
    keys = {}
    for chunk in table.split('{.name = "')[1:]:
        name = chunk[:chunk.index('"')]
        m = re.search(r'\.def\s*=\s*"((?:[^"\\]|\\.)*)"', chunk)
        keys[name] = m.group(1) if m else None
    return keys


def sample_keys():
    """Every key the sample node file sets, or shows commented out (`#KEY=value`)."""
    keys = set()
    for line in _read(SAMPLE).splitlines():
        m = re.match(r"^#?(?:export\s+)?((?:MOONCAKE|MC|TIDE)_[A-Z0-9_]+)=", line)
        if m:
            keys.add(m.group(1))
    return keys


def c_env_reads():
    """{name: first file} of every environment variable the shipped C code reads."""
    files = {p: _read(p) for p in _c_files()}
    macros = {}
    for text in files.values():
        for m in re.finditer(r'^#define\s+(\w+)\s+"(' + NAME + r')"', text, re.M):
            macros[m.group(1)] = m.group(2)
    found = {}

    def add(name, path):
        found.setdefault(name, os.path.relpath(path, ROOT))

    for path, text in files.items():
        # Names of environment variables given to the code as macros.
        for m in re.finditer(r'^#define\s+\w+_(?:ENV|VAR)\s+"(' + NAME + r')"', text, re.M):
            add(m.group(1), path)
        for m in re.finditer(r"\b(?:secure_)?getenv\(\s*([^)]*?)\s*\)", text):
            arg = m.group(1)
            lit = re.fullmatch(r'"(' + NAME + r')"', arg)
            if lit:
                add(lit.group(1), path)
            elif arg in macros:
                add(macros[arg], path)
            elif re.fullmatch(r"[a-z_]\w*", arg):
                # A wrapper's parameter: the function it is in (defined at column 0 in
                # this tree's style) is called with the names as literals.
                defs = list(re.finditer(r"^([a-z_]\w*)\(", text[:m.start()], re.M))
                if not defs:
                    continue
                fn = defs[-1].group(1)
                for call in re.finditer(r"\b" + fn + r'\(\s*"(' + NAME + r')"', text):
                    add(call.group(1), path)
    return found


def python_env_reads():
    found = {}
    pats = [r'\b(?:os\.environ|env)\.get\(\s*"(' + NAME + r')"',
            r'\bos\.environ\[\s*"(' + NAME + r')"\s*\]',
            r'\bos\.getenv\(\s*"(' + NAME + r')"']
    for fn in sorted(os.listdir(PY_PKG)):
        if fn.endswith(".py"):
            text = _read(os.path.join(PY_PKG, fn))
            for p in pats:
                for m in re.finditer(p, text):
                    found.setdefault(m.group(1), "store/python/mooncake/" + fn)
    return found


def code_keys():
    """{name: where the code reads it}."""
    keys = {k: "engine/lib/nodeenv/nodeenv.c (node file)" for k in nodeenv_keys()}
    for k in sample_keys():
        keys.setdefault(k, "tools/node.env.sample")
    for src in (c_env_reads(), python_env_reads()):
        for k, where in src.items():
            keys.setdefault(k, where)
    return keys


def master_flags():
    """(implemented, accepted-and-ignored) flag names of mooncake_master."""
    src = _read(MASTER_MAIN)
    start = src.index("static struct flag flags[]")
    table = src[start:src.index("\n};", start)]
    impl, ignored = set(), set()
    for m in re.finditer(r'\{\s*"([a-z0-9_]+)"\s*,\s*(F_\w+)', table):
        (ignored if m.group(2).startswith("F_IGNORED") else impl).add(m.group(1))
    return impl, ignored


# ---- what the page documents ---------------------------------------------------------------


def doc_rows():
    """{`KEY` or `--flag`: [cells]} from every table row of the page."""
    rows = {}
    for line in _read(DOC).splitlines():
        s = line.strip()
        if not s.startswith("|"):
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        m = re.fullmatch(r"`(" + NAME + r"|--[a-z0-9_]+)`", cells[0])
        if m:
            rows.setdefault(m.group(1), cells)
    return rows


def doc_env_rows():
    return {k: v for k, v in doc_rows().items() if not k.startswith("--")}


def doc_flag_rows():
    return {k[2:]: v for k, v in doc_rows().items() if k.startswith("--")}


# ---- the checks ----------------------------------------------------------------------------


def test_extraction_finds_the_code():
    ne = nodeenv_keys()
    assert len(ne) >= 40 and "MOONCAKE_MASTER" in ne and "TIDE_DPDK_DEVICE" in ne, ne
    c = c_env_reads()
    # One of each kind of read: a literal, a wrapper's literal, a macro.
    for k in ("MC_STORE_CLUSTER_ID", "MC_SLICE_SIZE", "MC_IB_PORT", "TIDE_NODE_ENV"):
        assert k in c, f"the extractor lost {k}: {sorted(c)}"
    assert "LIBTIDESTORE" in python_env_reads()
    impl, ignored = master_flags()
    assert {"rpc_port", "metrics_port", "enable_ha"} <= impl and "enable_oplog" in ignored


def test_sample_keys_are_parser_keys():
    unknown = sorted(sample_keys() - set(nodeenv_keys()))
    assert not unknown, f"tools/node.env.sample shows keys the parser does not know: {unknown}"


def test_every_key_is_documented():
    doc = doc_env_rows()
    missing = {k: w for k, w in code_keys().items() if k not in doc}
    assert not missing, ("docs/configuration.md lacks a table row for: " +
                         ", ".join(f"{k} (read in {w})" for k, w in sorted(missing.items())))


def test_no_documented_key_is_unknown():
    known = code_keys()
    unknown = sorted(k for k in doc_env_rows() if k not in known)
    assert not unknown, ("docs/configuration.md documents keys no code reads: " +
                         ", ".join(unknown))


def test_node_file_defaults_match_the_parser():
    doc = doc_env_rows()
    wrong = []
    for k, default in nodeenv_keys().items():
        if k not in doc:
            continue  # reported by test_every_key_is_documented
        cells = doc[k]
        cell = cells[1] if len(cells) > 1 else ""
        if default in (None, ""):
            ok = cell.lower().startswith("empty")
        else:
            m = re.search(r"`([^`]*)`", cell)
            ok = m is not None and m.group(1) == default
        if not ok:
            shown = "empty" if default in (None, "") else f"`{default}`"
            wrong.append(f"{k}: the page says {cell!r}, the parser's default is {shown}")
    assert not wrong, "docs/configuration.md defaults differ:\n  " + "\n  ".join(wrong)


def test_master_flags_are_documented():
    impl, ignored = master_flags()
    doc = doc_flag_rows()
    missing = sorted(impl - set(doc))
    assert not missing, ("docs/configuration.md lacks a row for mooncake_master flags: " +
                         ", ".join("--" + f for f in missing))
    unknown = sorted(set(doc) - impl)
    assert not unknown, ("docs/configuration.md has rows for flags mooncake_master does not "
                         "implement: " + ", ".join("--" + f for f in unknown))
    text = _read(DOC)
    unnamed = sorted(f for f in ignored if not re.search(r"--" + f + r"\b", text))
    assert not unnamed, ("docs/configuration.md does not name these accepted-and-ignored "
                         "flags: " + ", ".join("--" + f for f in unnamed))


if __name__ == "__main__":
    try:
        import pytest
    except ImportError:  # no pytest: run the checks directly
        failed = 0
        for name, fn in sorted(globals().items()):
            if name.startswith("test_") and callable(fn):
                try:
                    fn()
                    print(f"ok   {name}")
                except AssertionError as e:
                    failed += 1
                    print(f"FAIL {name}: {e}")
        sys.exit(1 if failed else 0)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.abspath(__file__)]))
