#!/usr/bin/python3
"""Write the list of metrics stock Mooncake's master serves on /metrics, read from its source.

Usage: stock_metrics_extract.py GIT_DIR [COMMIT] > tests/python/data/stock_master_metrics.txt

GIT_DIR is a (bare) clone of kvcache-ai/Mooncake; COMMIT defaults to HEAD. Three sources
make up stock's /metrics text (master_admin_service.cpp, BuildMetricsText):
  - MasterMetricManager: ylt metric members declared in master_metric_manager.h (the
    member's ylt type gives the Prometheus type, a dynamic_*_Nt its labels), named in the
    constructor's initializer list of master_metric_manager.cpp (first string literal;
    a trailing brace list of string literals is the label set), kept only if
    serialize_metrics() serializes the member;
  - HAMetricManager (ha_metric_manager.h/.cpp), the same way;
  - the tenant-quota text written by hand in master_admin_service.cpp: every
    "# TYPE name type" line, labels from the "name{label=" samples that follow.
Output: one "name type labels source" line per metric (labels comma-separated, "-" for
none; a histogram's le label and _bucket/_sum/_count samples are implied by its type).
Standard library only.
"""
import re
import subprocess
import sys

YLT_TYPES = {"counter_t": "counter", "gauge_t": "gauge", "histogram_t": "histogram"}


def show(git_dir, commit, path):
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def prom_type(ylt):
    if ylt in YLT_TYPES:
        return YLT_TYPES[ylt]
    m = re.fullmatch(r"dynamic_(counter|gauge)_\d+t", ylt)
    if not m:
        raise SystemExit(f"unknown ylt metric type {ylt}")
    return m.group(1)


def manager(git_dir, commit, header, source, cls, tag):
    """(name, type, labels, tag) of every metric member cls serializes."""
    members = dict((m, t) for t, m in re.findall(r"ylt::metric::(\w+)\s+(\w+)\s*;",
                                                 strip_comments(show(git_dir, commit, header))))
    cpp = strip_comments(show(git_dir, commit, source))
    ctor = cpp[cpp.index(f"{cls}::{cls}()"):]
    ctor = ctor[:ctor.index("{\n")]  # the initializer list ends where the body starts
    body = cpp[cpp.index(f"std::string {cls}::serialize_metrics()"):]
    body = body[:body.index("\n}\n")]
    serialized = set(re.findall(r"serialize_metric\((\w+)\)", body))
    out = []
    for member, args in re.findall(r"(\w+)\(\s*(\"(?:[^()]|\([^()]*\))*?)\)\s*(?:,|$)", ctor):
        if member not in members or member not in serialized:
            continue
        name = re.match(r'"([^"]+)"', args).group(1)
        labels = "-"
        brace = re.search(r"\{([^}]*)\}\s*$", args)
        if brace and '"' in brace.group(1):
            labels = ",".join(re.findall(r'"([^"]+)"', brace.group(1)))
        out.append((name, prom_type(members[member]), labels, tag))
    missing = serialized - {m for m, _ in re.findall(r"(\w+)\(\s*(\")", ctor)}
    if missing:
        raise SystemExit(f"{cls}: serialized but not found in the constructor: {sorted(missing)}")
    return out


def tenant_text(git_dir, commit):
    cpp = show(git_dir, commit, "mooncake-store/src/master_admin_service.cpp")
    fn = cpp[cpp.index("MasterAdminServer::BuildTenantQuotaMetricsText() const {"):]
    fn = fn[:fn.index("\n}\n")]
    # Adjacent literals split over lines form one string: join them first.
    text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', fn))
    out = []
    for name, typ in re.findall(r"# TYPE (\S+) (\w+)", text):
        labels = sorted(set(re.findall(re.escape(name) + r"\{(\w+)=", text)))
        out.append((name, typ, ",".join(labels) or "-", "tenant"))
    return out


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    git_dir, commit = argv[1], argv[2] if len(argv) == 3 else "HEAD"
    full = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", commit], check=True,
                          capture_output=True, text=True).stdout.strip()
    rows = manager(git_dir, full, "mooncake-store/include/master_metric_manager.h",
                   "mooncake-store/src/master_metric_manager.cpp", "MasterMetricManager",
                   "master")
    rows += manager(git_dir, full, "mooncake-store/include/ha_metric_manager.h",
                    "mooncake-store/src/ha_metric_manager.cpp", "HAMetricManager", "ha")
    rows += tenant_text(git_dir, full)
    names = [r[0] for r in rows]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"names defined twice: {sorted(dup)}")
    print(f"# Metrics stock Mooncake's master serves on /metrics, commit {full}.")
    print("# Sources: mooncake-store/{include,src}/master_metric_manager.{h,cpp},")
    print("# mooncake-store/{include,src}/ha_metric_manager.{h,cpp} and the tenant-quota text of")
    print("# mooncake-store/src/master_admin_service.cpp (BuildTenantQuotaMetricsText).")
    print("# Generated by tests/python/stock_metrics_extract.py "
          "/work/.mirror/kvcache-ai+Mooncake/repo " + full[:8] + "; do not edit by hand.")
    print("# Columns: name, Prometheus type, labels (comma-separated; - none; a histogram's le")
    print("# is implied), source (master = MasterMetricManager, ha = HAMetricManager, tenant).")
    for r in rows:
        print(" ".join(r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
