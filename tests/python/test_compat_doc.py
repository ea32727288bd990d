"""docs/compatibility.md's MooncakeDistributedStore table against the class itself, so the
table cannot drift: every method a "yes" or "partly" row names exists on the class, none
that a "no" row names does, every public method of the class has a row, and the count in
the sentence above the table is the number of stock methods Tide has.

Environment (set by meson): LIBTIDESTORE, PYTHONPATH = store/python.
"""
import os
import re

from mooncake.store import MooncakeDistributedStore

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "compatibility.md")
# Tide's own public methods, not stock's (none today); listed here if one is added.
TIDE_ONLY = set()


def table():
    """[(names, verdict)] of the MooncakeDistributedStore section's rows."""
    text = open(DOC).read()
    sec = text.split("### `MooncakeDistributedStore`", 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in sec.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        # Method names: a backticked identifier, alone or before "(", and "/_x" suffix
        # shorthands ("batch_get_session_start`/`_end").
        names, last = [], None
        for tok in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\(|`)", cells[0]):
            if tok.startswith("_") and last and not tok.startswith("__") and \
                    tok != "_get_pyclient_capsule":
                tok = last.rsplit("_", 1)[0] + tok
            names.append(tok)
            last = tok
        rows.append((names, cells[1]))
    return sec, rows


def test_rows_match_the_class():
    sec, rows = table()
    assert rows, "no MooncakeDistributedStore table in docs/compatibility.md"
    named_yes, named_no = set(), set()
    for names, verdict in rows:
        assert verdict in ("yes", "partly", "no"), (names, verdict)
        for n in names:
            present = callable(getattr(MooncakeDistributedStore, n, None))
            if verdict == "no":
                assert not present, f"docs say {n} is missing, but the class has it"
                named_no.add(n)
            else:
                assert present, f"docs say {n} exists ({verdict}), but the class lacks it"
                named_yes.add(n)
    public = {n for n in dir(MooncakeDistributedStore)
              if callable(getattr(MooncakeDistributedStore, n)) and
              (not n.startswith("_") or n == "_get_pyclient_capsule")}
    undocumented = public - named_yes - TIDE_ONLY
    assert not undocumented, f"methods without a row in docs/compatibility.md: " \
                             f"{sorted(undocumented)}"
    m = re.search(r"Tide has (\d+) of stock's (\d+) methods", sec)
    assert m, "the count sentence is gone"
    assert int(m.group(1)) == len(named_yes), \
        f"docs say Tide has {m.group(1)} of stock's methods; the table's yes/partly rows " \
        f"name {len(named_yes)}"
