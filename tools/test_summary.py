#!/usr/bin/python3
"""Print one line per test, with CUnit's counts, from meson's testlog.json.

Usage: test_summary.py TESTLOG_JSON LABEL [TESTLOG_JSON LABEL ...]
Exit status 1 if any test in any given log did not pass.
"""
import json
import os
import re
import sys

ROW = re.compile(r"^\s*(suites|tests|asserts)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)", re.M)
FUZZ = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
# libFuzzer status lines: "#N  DONE   cov: X ft: Y corp: ..." at the end, "#N  pulse/NEW/REDUCE
# cov: X ft: Y ..." while running (the last one stands in when a run ends without DONE).
FUZZ_COV = re.compile(r"^#\d+\s+(\w+)\s+cov: (\d+) ft: (\d+)", re.M)


def summarise(path, label):
    if not os.path.exists(path):
        print(f"[{label}] no test log at {path}")
        return 1, 0, 0
    bad = 0
    totals = {"tests": [0, 0], "asserts": [0, 0]}
    with open(path) as f:
        for line in f:
            t = json.loads(line)
            counts = {m.group(1): (int(m.group(3)), int(m.group(5)))
                      for m in ROW.finditer(t.get("stdout") or "")}
            detail = ", ".join(f"{k} {ran} ran/{failed} failed"
                               for k, (ran, failed) in counts.items() if k != "suites")
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            fuzz = FUZZ.search(out)
            cov = FUZZ_COV.findall(out)
            if fuzz or cov:
                parts = [f"{int(fuzz.group(1)):,} inputs executed"] if fuzz else []
                if cov:
                    done = [c for c in cov if c[0] == "DONE"]
                    _, edges, ft = (done or cov)[-1]
                    parts.append(f"cov {int(edges):,} edges, ft {int(ft):,}")
                detail = ", ".join(parts)
            for k in totals:
                if k in counts:
                    totals[k][0] += counts[k][0]
                    totals[k][1] += counts[k][1]
            ok = t["result"] in ("OK", "EXPECTEDFAIL", "SKIP")
            bad += 0 if ok else 1
            print(f"[{label}] {t['result']:<8} {t['duration']:7.1f}s  {t['name']}"
                  + (f"  ({detail})" if detail else ""))
    return bad, totals["tests"], totals["asserts"]


def main(argv):
    if len(argv) < 3 or len(argv) % 2 == 0:
        print(__doc__, file=sys.stderr)
        return 2
    failed = 0
    for i in range(1, len(argv), 2):
        bad, tests, asserts = summarise(argv[i], argv[i + 1])
        failed += bad
        if tests[0]:
            print(f"[{argv[i + 1]}] CUnit total: {tests[0]} tests ({tests[1]} failed), "
                  f"{asserts[0]} asserts ({asserts[1]} failed)")
    print("ALL TEST SUITES PASSED" if failed == 0 else f"{failed} TEST(S) FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
