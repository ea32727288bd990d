#!/usr/bin/env bash
# The README's run command: install what is missing, build, and run Tide's
# main job with embedded defaults (a local two-node cluster doing real
# transfers over DPDK, verified byte for byte). Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
[ -d build/meson-private ] || meson setup build --buildtype=release
ninja -C build
bash tools/hugepages.sh 512
exec bash tools/local_cluster.sh build
