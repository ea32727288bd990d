#!/usr/bin/python3
"""The Miles pattern on a local store cluster, end to end, every byte verified.

Starts mooncake_master (RL mode: unread objects are never evicted) and two
tide-node agents (tools/storecluster.py), then runs Python clients of the
`mooncake.store` drop-in as Miles' processes would:
  - node A: the rollout manager (writer): ~40 objects per DP shard, most
    <= 256 B, a few large, each through BufferPool + batch_put_from with
    group_ids; with --big, 64 MiB chunks as in MoE routing replay;
  - node B: several trainers (readers) at once, each reading every shard
    with get_into_ranges into BufferPool leases and comparing every byte;
  - node A: the driver, removing everything with batch_remove(force=True).
Afterwards the master must hold no object and no allocated byte outside the
clients' allocation leases (space leased for their next puts, and the reserve
an expired lease keeps for a minute), and both
agents must stop cleanly. The clients attach to their node's agent (the
node files say TIDE_AGENT=required), so the bytes move between the agents
over the chosen transport.

usage: tools/store_cluster.py BUILD_DIR [--transport kernel|memif|both]
                              [--shards N] [--readers N] [--big]
Exit 0 only if every step verified its work.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import storecluster  # noqa: E402

PATTERN = os.path.join(HERE, "miles_pattern.py")


def role(node, name, args, timeout=600):
    """Start one client process of node; returns the Popen."""
    return subprocess.Popen([storecluster.PY, PATTERN, name, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=node.client_env())


def finish(p, what, timeout=600):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        print(f"{what}: timed out after {timeout} s\n{out}")
        return False
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if p.returncode != 0:
        print(f"{what}: FAILED (exit {p.returncode})\n" + "\n".join(lines[-30:]))
        return False
    print(f"{what}: {lines[-1] if lines else '(no output)'}")
    return True


def run(build, transport, shards, readers, big):
    print(f"--- {transport}: mooncake_master + 2 tide-node agents "
          f"({'user-space TCP on DPDK net_memif' if transport == 'memif' else 'kernel TCP'})")
    c = storecluster.LocalStoreCluster(build, transport, segment="1gb" if big else "384mb")
    ok = True
    try:
        t0 = time.monotonic()
        c.start()
        a, b = c.nodes
        print(f"agents up in {time.monotonic() - t0:.1f} s: node A segment {a.segment}, "
              f"node B segment {b.segment}, master {c.master_addr}")
        handle = os.path.join(c.tmp, "handle.json")
        wargs = ["--handle", handle, "--shards", str(shards)]
        if big:
            wargs += ["--big-chunks", "2"]
        ok = finish(role(a, "writer", wargs), "writer  (node A)")
        if ok:
            m = c.metrics()
            print(f"master after the writer: {m.get('master_key_count', 0):.0f} objects, "
                  f"{m.get('master_allocated_bytes', 0) / 2**20:.1f} MiB allocated in "
                  f"{m.get('tide_master_segment_count', 0):.0f} segments")
            procs = [role(b, "reader", ["--handle", handle]) for _ in range(readers)]
            for i, p in enumerate(procs):
                ok = finish(p, f"reader{i} (node B)") and ok
        if ok:
            ok = finish(role(a, "driver", ["--handle", handle]), "driver  (node A)")
        if ok:
            m = c.metrics()
            keys, alloc = m.get("master_key_count", -1), m.get("master_allocated_bytes", -1)
            # Space the agents hold leased for their next puts, and the reserve of a lease
            # that expired meanwhile (freed a minute later), are allocated but no object's.
            leased = m.get("tide_master_leased_bytes", 0) + m.get("tide_master_discarded_bytes", 0)
            print(f"master after the driver: {keys:.0f} objects, {alloc - leased:.0f} bytes "
                  f"allocated to objects ({leased:.0f} leased to clients or reserved after "
                  f"an expired lease), {m.get('master_evicted_key_count', 0):.0f} evicted")
            if keys != 0 or alloc != leased:
                print("FAILED: the store is not empty after the driver")
                ok = False
    except Exception as e:  # a start-up failure: say what and where
        print(f"FAILED: {e}")
        ok = False
    finally:
        codes = c.stop()
        if any(code != 0 for code in codes):
            print(f"FAILED: agents exited with {codes}")
            for n in c.nodes:
                print(open(n.log).read()[-3000:])
            ok = False
        else:
            print("agents stopped cleanly")
        if not ok:
            print(c.read_log("master.log")[-3000:])
        c.cleanup()
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--transport", default="both", choices=["kernel", "memif", "both"])
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--big", action="store_true", help="add 2 x 64 MiB chunks per shard")
    a = ap.parse_args()
    lib = os.environ.get("LIBTIDESTORE",
                         os.path.join(a.build_dir, "store", "client", "libtidestore.so"))
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    if "libasan" in ldd or "libubsan" in ldd:
        # python3 cannot load a sanitizer-instrumented library (the runtime must
        # come first); the agent itself runs under the sanitizers in agent_it.
        print(f"store cluster: SKIPPED: {lib} is a sanitizer build")
        return 0
    ts = ["memif", "kernel"] if a.transport == "both" else [a.transport]
    ok = True
    for t in ts:
        ok = run(a.build_dir, t, a.shards, a.readers, a.big) and ok
    print("store cluster: " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
