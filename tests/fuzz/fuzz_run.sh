#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Runs one libFuzzer target for a fixed number of inputs and judges what
# libFuzzer printed, so the verdict is the same on a fast and a slow machine:
#   fuzz_run.sh RUNS LOG TARGET [libFuzzer args...]
# Fails (and says why) when the target failed, when fewer than RUNS inputs
# ran (the -max_total_time cap cut the run short: the machine or the target
# is too slow for the count), or when libFuzzer turned its per-input leak
# check off. libFuzzer does that silently after 1000 inputs that each end
# with more mallocs than frees and no leak LeakSanitizer can see: the target
# keeps what an input allocated somewhere reachable, so its memory grows
# with the number of inputs (mc_http_fuzz kept every connection, ~100 KB an
# input, until -rss_limit_mb stopped it on fast machines only).
set -u

if [ $# -lt 3 ]; then
	echo "usage: $0 RUNS LOG TARGET [libFuzzer args...]" >&2
	exit 2
fi
runs=$1
log=$2
shift 2

# -runs from RUNS, so the count asked for and the count checked are one number.
"$@" -runs="$runs" >"$log" 2>&1
rc=$?
cat "$log" >&2

name=$(basename "$1")
fail=0
if [ "$rc" -ne 0 ]; then
	echo "fuzz_run: $name exited with status $rc (libFuzzer's report above)" >&2
	fail=1
fi
case "${ASAN_OPTIONS-}" in
*detect_leaks=0* | *detect_leaks=false*)
	echo "fuzz_run: ASAN_OPTIONS turns LeakSanitizer off; run with --setup asan" >&2
	fail=1
	;;
esac
if grep -q 'libFuzzer disabled leak detection' "$log"; then
	echo "fuzz_run: $name keeps memory across inputs (more mallocs than frees in" \
		"1000 inputs, none of it unreachable), so libFuzzer stopped checking leaks." \
		"Free per-input state before returning; -trace_malloc=1 shows what stays." >&2
	fail=1
fi
done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
if [ "$rc" -eq 0 ] && { [ -z "$done_runs" ] || [ "$done_runs" -lt "$runs" ]; }; then
	echo "fuzz_run: $name ran ${done_runs:-no} inputs of $runs before" \
		"-max_total_time: too slow for the count" >&2
	fail=1
fi
if [ "$fail" -eq 0 ]; then
	echo "fuzz_run: $name passed $done_runs inputs" >&2
fi
exit "$fail"
