#!/usr/bin/env bash
# The README's test command (and what CI runs): install what is missing,
# check that every program and Python module the suites call is there
# (tools/check-prereqs.sh; no suite skips for a missing one), build, and run
# every suite: unit + integration (hugepages when they can be
# reserved), the same under ASan+UBSan with --no-huge, and the libFuzzer
# targets, each over a fixed number of inputs. Prints CUnit counts per test.
# Budget: well under 30 minutes on 2 cores (each test has its own timeout).
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh || exit 1
# Every program and Python module a suite calls, checked before building: a missing one
# stops here with its package's name instead of failing (or skipping) a suite later.
bash tools/check-prereqs.sh || exit 1
bash tools/hugepages.sh 512

status=0
step() { echo; echo "=== $*"; }

step "format (.clang-format)"
if git rev-parse --git-dir >/dev/null 2>&1; then
	unformatted=$(git ls-files '*.c' '*.h' | xargs clang-format --dry-run 2>&1 | grep -c warning)
	if [ "$unformatted" -ne 0 ]; then
		git ls-files '*.c' '*.h' | xargs clang-format --dry-run 2>&1 | grep warning | head
		echo "format: $unformatted lines differ from .clang-format (run clang-format -i)"
		status=1
	else
		echo "format: every C file matches .clang-format"
	fi
fi

step "build (debugoptimized)"
[ -d build-test/meson-private ] || meson setup build-test || exit 1
ninja -C build-test || exit 1
step "unit + integration tests, hugepages if available"
TIDE_HUGEPAGES=auto meson test -C build-test --print-errorlogs --no-suite fuzz || status=1

step "build (ASan + UBSan)"
[ -d build-asan/meson-private ] ||
	meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false || exit 1
ninja -C build-asan || exit 1
step "unit + integration tests under ASan + UBSan, --no-huge"
TIDE_HUGEPAGES=off meson test -C build-asan --setup asan --print-errorlogs --no-suite fuzz ||
	status=1

logs=(build-test/meson-logs/testlog.json default
      build-asan/meson-logs/testlog-asan.json asan
      build-fuzz/meson-logs/testlog-asan.json fuzz)
step "build (clang, libFuzzer) and bounded fuzz run"
[ -d build-fuzz/meson-private ] ||
	CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false || exit 1
ninja -C build-fuzz fuzz-targets || exit 1
meson test -C build-fuzz --no-rebuild --setup asan --suite fuzz --print-errorlogs || status=1

step "summary"
/usr/bin/python3 tools/test_summary.py "${logs[@]}" || status=1
exit $status
