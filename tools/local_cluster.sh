#!/usr/bin/env bash
# Tide's main job on one machine: every component that exists, doing real
# work, each checked. Called by tools/run.sh after the build.
#   1. tide-cluster: two nodes in two processes, each a node runtime (own EAL,
#      user-space TCP/IP stack) with a segment and the segment allocator,
#      joined by net_memif; a rollout-like workload is written over TCP into
#      each other's segments, read back and verified byte for byte.
#   2. mooncake_master started the way Miles starts it, driven over the wire
#      by a Mooncake-protocol client (mount, put, get, exist, remove, batches),
#      health-checked over HTTP, stopped with SIGTERM.
#   3. Two Tide processes, each with its own DPDK EAL and user-space TCP/IP
#      stack, joined by net_memif: a TCP transfer verified byte for byte.
#   4. The transfer engine between two processes (tide-bench target and
#      initiator, P2PHANDSHAKE, user-space TCP over net_memif): blocks written
#      into the target's registered buffer, read back and compared.
#   5. The store as Miles uses it (tools/store_cluster.py): mooncake_master in
#      RL mode + two tide-node agents joined by user-space TCP on net_memif (then
#      again over kernel TCP); Python `mooncake.store` clients attached to the
#      agents: a writer (~40 objects per shard, 64 MiB chunks, BufferPool +
#      batch_put_from with group_ids), two readers on the other node
#      (get_into_ranges, every byte verified), a driver (batch_remove); the
#      store must be empty afterwards.
# Prints RESULT: OK only if every step succeeded. Usage: local_cluster.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
env_file=tools/node.env.sample
tmp=$(mktemp -d /tmp/tide-local-XXXXXX)
master_pid=
cleanup() {
	[ -n "$master_pid" ] && kill "$master_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
failed=()
step() { echo; echo "=== $*"; }

# Readiness waits are deadlines on the monotonic clock (/proc/uptime, centiseconds),
# never a number of tries, so a slow or loaded machine only takes longer.
uptime_cs() {
	local u
	read -r u _ </proc/uptime
	echo $((10#${u/./}))
}
# wait_for SECONDS WHAT COMMAND...: run COMMAND until it exits 0 (ready) or 2 (will never
# be: gave up), at most SECONDS; on expiry say what was awaited and how long. 0 when ready.
wait_for() {
	local secs=$1 what=$2 end rc
	shift 2
	end=$(($(uptime_cs) + secs * 100))
	while :; do
		"$@"
		rc=$?
		[ "$rc" -eq 0 ] && return 0
		if [ "$rc" -eq 2 ]; then
			echo "gave up waiting for $what" >&2
			return 1
		fi
		if [ "$(uptime_cs)" -ge "$end" ]; then
			echo "timed out after $secs s waiting for $what" >&2
			return 1
		fi
		sleep 0.05
	done
}
# accepting PORT PID: 0 when 127.0.0.1:PORT accepts, 2 when PID has exited.
accepting() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
	kill -0 "$2" 2>/dev/null || { echo "process $2 exited" >&2; return 2; }
	return 1
}
# socket_made PATH PID: 0 when the UNIX socket PATH exists, 2 when PID has exited.
socket_made() {
	[ -S "$1" ] && return 0
	kill -0 "$2" 2>/dev/null || { echo "process $2 exited" >&2; return 2; }
	return 1
}

step "1/5 two nodes, user-space TCP over DPDK net_memif: segments, allocator, verified writes"
if ! "$build/tools/cluster/tide-cluster" --node-env "$env_file"; then
	failed+=("tide-cluster")
fi

step "2/5 mooncake_master (Tide's) driven over the Mooncake protocol"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
setsid "$build/tools/master/mooncake_master" --rpc_port "$port" --metrics_port 0 \
	>"$tmp/master.log" 2>&1 &
master_pid=$!
ready=0
wait_for 30 "mooncake_master to accept on 127.0.0.1:$port" accepting "$port" "$master_pid" &&
	ready=1
metrics_port=$(grep -o 'metrics HTTP on [^ ]*' "$tmp/master.log" | sed 's/.*://' | head -1)
if [ "$ready" = 1 ] &&
	"$build/tools/master/tide-master-bench" --master "127.0.0.1:$port" --master-pid "$master_pid" \
		--clients 2 --ops 2000 --batch 64 --mem-objects 0; then
	if [ -n "$metrics_port" ] && /usr/bin/python3 - "$metrics_port" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=5).read()
print("master /health:", body.decode().strip())
sys.exit(0 if body.strip() == b"OK" else 1)
PY
	then :; else failed+=("master /health"); fi
else
	failed+=("mooncake_master")
	cat "$tmp/master.log"
fi
kill -TERM "$master_pid" 2>/dev/null
if wait "$master_pid"; then
	echo "mooncake_master stopped cleanly on SIGTERM"
else
	failed+=("mooncake_master shutdown")
fi
master_pid=

step "3/5 two processes, user-space TCP over DPDK net_memif"
memif="net_memif0,socket=$tmp/memif.sock,socket-abstract=no"
sender_log=$tmp/send.log
TIDE_DPDK_DEVICE="$memif,role=server" TIDE_DATA_IP=10.77.0.1 TIDE_FILE_PREFIX=tide-local-a TIDE_CSUM=elide \
	"$build/tools/net/tide-net" --node-env "$env_file" send --peer 10.77.0.2 --port 7000 \
	--bytes 256mb >"$sender_log" 2>&1 &
sender=$!
if wait_for 60 "tide-net send (memif server) to create $tmp/memif.sock" \
	socket_made "$tmp/memif.sock" "$sender" &&
	TIDE_DPDK_DEVICE="$memif,role=client" TIDE_DATA_IP=10.77.0.2 TIDE_FILE_PREFIX=tide-local-b TIDE_CSUM=elide \
	"$build/tools/net/tide-net" --node-env "$env_file" serve --port 7000 --connections 1 \
	>"$tmp/serve.log" 2>&1 && wait "$sender"; then
	grep -h -E "sent|closed by peer" "$sender_log" "$tmp/serve.log"
	grep -q "268435456 bytes in, 0 out, 0 mismatched" "$tmp/serve.log" || failed+=("memif TCP data")
else
	kill "$sender" 2>/dev/null
	wait "$sender" 2>/dev/null
	cat "$sender_log" "$tmp/serve.log" 2>/dev/null
	failed+=("memif TCP")
fi

step "4/5 transfer engine: two processes, Mooncake segments and handshake, user-space TCP over memif"
te_port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
te_memif="net_memif0,socket=$tmp/te-memif.sock,socket-abstract=no"
# The memif server (initiator) starts first and exits first (DPDK 22.11 memif).
TIDE_DPDK_DEVICE="$te_memif,role=server" TIDE_DATA_IP=10.78.0.1 TIDE_FILE_PREFIX=tide-local-tea TIDE_CSUM=elide \
	TIDE_NODE_ENV="$env_file" "$build/tools/te_bench/tide-bench" --mode=initiator \
	--segment_id="127.0.0.1:$te_port" --host=127.0.0.1 --open_retry_s=30 --verify \
	--block_size=64K --batch_size=32 --duration=3 --buffer_size=128M >"$tmp/te-ini.log" 2>&1 &
te_ini=$!
if wait_for 60 "tide-bench initiator (memif server) to create $tmp/te-memif.sock" \
	socket_made "$tmp/te-memif.sock" "$te_ini"; then
	TIDE_DPDK_DEVICE="$te_memif,role=client" TIDE_DATA_IP=10.78.0.2 \
		TIDE_FILE_PREFIX=tide-local-teb TIDE_CSUM=elide TIDE_NODE_ENV="$env_file" \
		"$build/tools/te_bench/tide-bench" --mode=target --rpc_port="$te_port" \
		--host=127.0.0.1 --buffer_size=128M >"$tmp/te-tgt.log" 2>&1 &
	te_tgt=$!
else
	kill "$te_ini" 2>/dev/null
	te_tgt=
fi
if wait "$te_ini" && grep -q "transport=tcp-dpdk.*verified" "$tmp/te-ini.log"; then
	grep -h "tide-bench: transport=" "$tmp/te-ini.log"
else
	cat "$tmp/te-ini.log"
	failed+=("transfer engine over memif")
fi
if [ -n "$te_tgt" ]; then
	kill -TERM "$te_tgt" 2>/dev/null
	if wait "$te_tgt"; then
		grep -h "target served" "$tmp/te-tgt.log"
	else
		cat "$tmp/te-tgt.log"
		failed+=("transfer engine target shutdown")
	fi
fi

step "5/5 the store as Miles uses it: master + two tide-node agents, Python clients, Miles' pattern"
if ! /usr/bin/python3 tools/store_cluster.py "$build" --transport both --shards 8 --readers 2 --big; then
	failed+=("store cluster")
fi

echo
if [ "${#failed[@]}" -eq 0 ]; then
	echo "RESULT: OK: local cluster ran all 5 steps (verified writes, master RPCs, user-space TCP, transfer engine, store with agents)"
	exit 0
fi
echo "RESULT: FAILED: ${failed[*]}"
exit 1
