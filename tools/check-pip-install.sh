#!/usr/bin/env bash
# Checks the README's Python install command the way a user runs it: in a fresh
# virtual environment (python3 -m venv --system-site-packages, so Debian's
# meson-python, numpy and msgpack are seen), `pip install --no-build-isolation .`
# builds libtidestore and installs the mooncake package and mooncake_master.
# Then, from / with no PYTHONPATH: mooncake.store and
# mooncake.structured_object_store import from the venv, every module of
# store/python/mooncake is installed unchanged, libtidestore.so loads from
# inside the installed package with every library it links found, and the
# installed mooncake_master (first on the venv's PATH) and package do one real
# put/get and one structured put/get (embedded store: TIDE_AGENT=off, kernel TCP).
#
# Needs python3-mesonpy python3-venv python3-numpy python3-msgpack (Debian).
# Exits non-zero with the reason on any failure; each step has a deadline;
# the venv and the master are removed/stopped on exit.
# Env: PYTHON (default /usr/bin/python3, Debian's), PIP_DEADLINE (seconds, 900).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
PIP_DEADLINE=${PIP_DEADLINE:-900}

say() { echo "check-pip-install: $*"; }
die() {
	echo "check-pip-install: FAIL: $*" >&2
	exit 1
}

tmp=$(mktemp -d /tmp/tide-pip-check.XXXXXX)
master_pid=
cleanup() {
	if [ -n "$master_pid" ]; then
		kill "$master_pid" 2>/dev/null || true
		wait "$master_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
venv=$tmp/venv

# Prerequisites, named by their Debian package.
"$PYTHON" -c 'import mesonpy' 2>/dev/null ||
	die "$PYTHON has no meson-python (apt-get install python3-mesonpy)"
"$PYTHON" -c 'import numpy, msgpack' 2>/dev/null ||
	die "$PYTHON lacks numpy or msgpack (apt-get install python3-numpy python3-msgpack)"
timeout 120 "$PYTHON" -m venv --system-site-packages "$venv" >"$tmp/venv.log" 2>&1 || {
	cat "$tmp/venv.log" >&2
	die "python3 -m venv failed (apt-get install python3-venv)"
}

# The README's command. PIP_NO_INDEX: anything it would fetch fails at once
# instead of waiting on the network (there is none here; the command needs none).
say "pip install --no-build-isolation . (fresh venv $venv)"
shopt -s nullglob
before=("$repo"/.mesonpy-*/)
t0=$(date +%s)
if ! (cd "$repo" && PIP_NO_INDEX=1 timeout "$PIP_DEADLINE" \
	"$venv/bin/pip" install --no-build-isolation . >"$tmp/pip.log" 2>&1); then
	tail -40 "$tmp/pip.log" >&2
	# meson-python builds in a .mesonpy-* directory of the tree and removes it,
	# unless it was killed: remove the ones this run left.
	for d in "$repo"/.mesonpy-*/; do
		[[ " ${before[*]} " == *" $d "* ]] || rm -rf "$d"
	done
	die "pip install --no-build-isolation . failed or passed its ${PIP_DEADLINE}s deadline (log above)"
fi
say "pip install: $(($(date +%s) - t0)) s"

# Tide's mooncake_master from the wheel, first on the venv's PATH.
found=$(PATH="$venv/bin:$PATH" command -v mooncake_master || true)
[ "$found" = "$venv/bin/mooncake_master" ] ||
	die "mooncake_master on the venv's PATH is '${found:-nothing}', not $venv/bin/mooncake_master"
pkg=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/mooncake
[ -f "$pkg/libtidestore.so" ] || die "no libtidestore.so in the installed package ($pkg)"
if ldd "$pkg/libtidestore.so" | grep -q 'not found'; then
	ldd "$pkg/libtidestore.so" | grep 'not found' >&2
	die "installed libtidestore.so links libraries the loader cannot find"
fi

port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/mooncake_master" --rpc_port="$port" --metrics_port=0 >"$tmp/master.log" 2>&1 &
master_pid=$!
up=0
for _ in $(seq 100); do # 10 s
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		up=1
		break
	fi
	kill -0 "$master_pid" 2>/dev/null || break
	sleep 0.1
done
[ "$up" = 1 ] || {
	cat "$tmp/master.log" >&2
	die "installed mooncake_master did not listen on 127.0.0.1:$port within 10 s"
}

# From /, with no PYTHONPATH or library override: only the venv provides mooncake.
cat >"$tmp/check.py" <<'EOF'
import filecmp
import glob
import os
import sys

venv, repo, master = sys.argv[1:4]
for k in [k for k in os.environ if k.startswith(("TIDE_", "MOONCAKE_"))]:
    del os.environ[k]
os.environ["TIDE_AGENT"] = "off"  # embedded: this process runs its own transfer engine
os.environ["MC_FORCE_TCP"] = "1"  # kernel TCP, no DPDK device

import mooncake  # noqa: E402
import mooncake.store as st  # noqa: E402
import mooncake.structured_object_store as sos  # noqa: E402


def fail(msg):
    print(f"check-pip-install: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


root = os.path.realpath(venv) + os.sep
for m in (mooncake, st, sos):
    if not os.path.realpath(m.__file__).startswith(root):
        fail(f"{m.__name__} imported from {m.__file__}, not from the venv {venv}")
pkg = os.path.dirname(os.path.realpath(st.__file__))
if os.path.realpath(st._lib._name) != os.path.join(pkg, "libtidestore.so"):
    fail(f"mooncake.store loaded {st._lib._name}, not the package's {pkg}/libtidestore.so")
mapped = {ln.split()[-1] for ln in open("/proc/self/maps") if "libtidestore" in ln}
if mapped != {os.path.join(pkg, "libtidestore.so")}:
    fail(f"libtidestore mapped from {sorted(mapped)}, expected only {pkg}/libtidestore.so")
for src in sorted(glob.glob(os.path.join(repo, "store", "python", "mooncake", "*.py"))):
    dst = os.path.join(pkg, os.path.basename(src))
    if not os.path.exists(dst):
        fail(f"{os.path.basename(src)} is not installed: add it to store/python/meson.build")
    if not filecmp.cmp(src, dst, shallow=False):
        fail(f"installed {dst} differs from {src}")

s = st.MooncakeDistributedStore()
rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master)
if rc != 0:
    fail(f"setup with master {master}: {rc}")
data = os.urandom(1 << 20)
if s.put("pip-check", data) != 0 or s.get("pip-check") != data:
    fail("put/get of 1 MiB through the installed package did not round-trip")
t = sos.MooncakeBundleTransfer(s, key_prefix="pip-check")
value = {"tokens": [[1, 2, 3], [4, 5]], "prompt": ["a", "bc"], "step": 7}
ref = t.put(value, field_schemas={"step": sos.FieldSchema("auto")})
got = t.get(sos.import_ref(sos.export_ref(ref)))
if [list(map(int, r)) for r in got["tokens"]] != value["tokens"] or \
        list(got["prompt"]) != value["prompt"] or got["step"] != 7:
    fail(f"structured put/get did not round-trip: {got!r}")
t.cleanup_dataproto(ref)
t.close()
s.remove("pip-check")
s.close()

# mooncake.engine from the same install: two engines, a write and a read back.
import ctypes  # noqa: E402
import mooncake.engine as me  # noqa: E402
if not os.path.realpath(me.__file__).startswith(root):
    fail(f"mooncake.engine imported from {me.__file__}, not from the venv {venv}")
a, b = me.TransferEngine(), me.TransferEngine()
if a.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0 or \
        b.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0:
    fail("mooncake.engine: initialize failed")
src = ctypes.create_string_buffer(os.urandom(1 << 20), 1 << 20)
dst = ctypes.create_string_buffer(1 << 20)
back = ctypes.create_string_buffer(1 << 20)
if b.register_memory(ctypes.addressof(dst), 1 << 20) != 0:
    fail("mooncake.engine: register_memory failed")
peer = f"127.0.0.1:{b.get_rpc_port()}"
if a.transfer_sync_write(peer, ctypes.addressof(src), ctypes.addressof(dst), 1 << 20) != 0 or \
        a.transfer_sync_read(peer, ctypes.addressof(back), ctypes.addressof(dst), 1 << 20) != 0 \
        or back.raw != src.raw:
    fail("mooncake.engine: a 1 MiB write and read back did not round-trip")
print(f"check-pip-install: mooncake {pkg}, libtidestore {st._lib._name}: imports, store put/get "
      "and engine write/read OK")
EOF
(cd / && env -u PYTHONPATH -u LIBTIDESTORE timeout 120 \
	"$venv/bin/python" "$tmp/check.py" "$venv" "$repo" "127.0.0.1:$port") || {
	tail -20 "$tmp/master.log" >&2
	die "the installed package failed its checks (above; master log tail too)"
}
say "OK: pip install --no-build-isolation . gives a working mooncake package and mooncake_master"
