#!/usr/bin/env bash
# Check, before anything is built, that every program and Python module a
# suite or the main job calls is present, and say which Debian 12 package
# provides what is missing. A missing prerequisite stops tools/test.sh here;
# no suite skips for it later. (dts_rdma skipping on a host without an RDMA
# device is not a missing prerequisite: ibv_devices itself is checked.)
# Every package named here must be in tools/install-deps.sh.
# Usage: check-prereqs.sh   exit 0 all present, 1 something missing
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# program  Debian package  who calls it
PROGRAMS=(
	"cc             build-essential  meson (C compiler)"
	"pkg-config     pkg-config       meson (dependencies)"
	"meson          meson            tools/test.sh, tools/run.sh"
	"ninja          ninja-build      tools/test.sh, tools/run.sh"
	"git            git              tools/test.sh (format check)"
	"clang-format   clang-format     tools/test.sh (format check)"
	"clang          clang            tools/test.sh (libFuzzer build)"
	"ip             iproute2         dts_linux_interop, dts_transfer_engine (netns, veth)"
	"ss             iproute2         dts_transfer_engine (TIME_WAIT count)"
	"sysctl         procps           dts_linux_interop, dts_transfer_engine"
	"pgrep          procps           dts_master"
	"pkill          procps           dts_master"
	"ethtool        ethtool          dts_linux_interop, dts_transfer_engine (offloads off)"
	"nft            nftables         dts_loss, tools/loss-bench.py (random drops on a bridge)"
	"ping           iputils-ping     dts_linux_interop"
	"tcpdump        tcpdump          dts_linux_interop (capture)"
	"tshark         tshark           dts_linux_interop (checksum audit)"
	"capinfos       wireshark-common dts_linux_interop (capture size)"
	"ibv_devices    ibverbs-utils    dts_rdma (device list)"
	"setsid         util-linux       dts_master, tools/local_cluster.sh"
	"mountpoint     util-linux       tools/hugepages.sh"
	"ldd            libc-bin         tools/store_cluster.py"
	"etcd           etcd-server      etcd_it (a real etcd on loopback ports)"
	"etcdctl        etcd-client      etcd_it (reads what Tide wrote, as another client)"
)
# module  Debian package  who imports it (with /usr/bin/python3, as the suites do)
MODULES=(
	"pytest     python3-pytest  python_store (tests/python)"
	"numpy      python3-numpy   python_store, mooncake.store"
	"msgpack    python3-msgpack python_store (test_structured.py), mooncake.structured_object_store"
	"torch      python3-torch   python_store (test_store_calls.py: the tensor calls)"
	"matplotlib python3-matplotlib the benchmark scripts (tools/*bench*.py draw PNGs), bench_plot"
	"scapy.all  python3-scapy   dts_linux_interop (crafted frames)"
	"mesonpy    python3-mesonpy pip_install (tools/check-pip-install.sh), dts_miles_guide"
	"ensurepip  python3-venv    pip_install (python3 -m venv), dts_miles_guide"
)
PY=/usr/bin/python3

missing=0 pkgs=()
miss() {
	echo "missing: $1 (Debian package $2) for $3" >&2
	missing=1
	pkgs+=("$2")
}
listed() {
	grep -Eq "(^|[[:space:]])$1([[:space:]]|$)" tools/install-deps.sh ||
		{ echo "check-prereqs: package $1 is not in tools/install-deps.sh" >&2; missing=1; }
}

if [ ! -x "$PY" ]; then
	miss "$PY" python3 "every Python suite and tool"
fi
for row in "${PROGRAMS[@]}"; do
	read -r prog pkg who <<<"$row"
	listed "$pkg"
	command -v "$prog" >/dev/null 2>&1 || miss "$prog" "$pkg" "$who"
done
for row in "${MODULES[@]}"; do
	read -r mod pkg who <<<"$row"
	listed "$pkg"
	if ! "$PY" -c "import $mod" >/dev/null 2>&1; then
		miss "python3 module $mod" "$pkg" "$who"
	fi
done
# Network namespaces (dts_linux_interop, dts_transfer_engine) and hugepages need root;
# the suites skip without it, so a run that is meant to cover them must stop here.
if [ "$(id -u)" -ne 0 ]; then
	echo "missing: root (dts_linux_interop and dts_transfer_engine build network namespaces;" \
		"run as root, as the README says)" >&2
	missing=1
fi

if [ "${#pkgs[@]}" -ne 0 ]; then
	echo "check-prereqs: install $(printf '%s\n' "${pkgs[@]}" | sort -u | xargs)" \
		"(as root: bash tools/install-deps.sh)" >&2
fi
[ "$missing" -eq 0 ] || exit 1
echo "check-prereqs: all ${#PROGRAMS[@]} programs and ${#MODULES[@]} Python modules present"
exit 0
