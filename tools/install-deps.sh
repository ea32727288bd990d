#!/usr/bin/env bash
# Install, from Debian 12's archive, every package Tide builds and tests with:
# every program and Python module a suite or the main job calls (tools/check-prereqs.sh
# checks them, by name, before anything is built). Idempotent: apt runs only when
# something is missing. Needs root.
set -euo pipefail

PKGS=(
	build-essential pkg-config meson ninja-build
	libdpdk-dev dpdk            # DPDK 22.11 (ethdev, PMD plugins incl. net_ring/net_memif)
	libcjson-dev libnuma-dev libbsd-dev libssl-dev
	libpcre2-dev                # master regexes (ECMAScript syntax, bounded)
	etcd-server etcd-client     # etcd 3.4 for the HA and etcd-metadata tests (tests start their own)
	libcunit1-dev
	libibverbs-dev ibverbs-utils # RDMA: verbs headers (libibverbs.so.1 is dlopen()ed at run time), ibv_devices for dts/rdma
	clang libclang-rt-14-dev    # libFuzzer target over the master codec
	clang-format git
	curl                        # the README's HTTP examples (/health, /metrics of mooncake_master)
	python3 python3-numpy python3-msgpack python3-pytest   # mooncake.store tests
	python3-matplotlib                     # benchmark scripts draw their PNGs (docs/benchmarks.md)
	python3-torch                          # mooncake.store's tensor calls (test_store_calls.py, CPU)
	python3-mesonpy python3-venv           # pip install . (tools/check-pip-install.sh)
	iproute2 procps iputils-ping ethtool   # DTS topologies (netns, veth); pgrep/pkill for dts_master
	nftables                               # dts_loss, tools/loss-bench.py: random drops on a bridge
	tcpdump tshark wireshark-common python3-scapy # dts_linux_interop: capture, checksum audit (tshark,
	                                       # capinfos), crafted frames
	util-linux libc-bin                    # setsid, mountpoint, ldd (Essential; listed so every
	                                       # package tools/check-prereqs.sh names is here)
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages (${missing[*]}); run as root" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
