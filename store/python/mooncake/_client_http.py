"""The store client's HTTP endpoints: stock Mooncake's opt-in client HTTP server.

setup() keys, as stock's RealClient reads them (values may be any type: stock turns each
into a string first):
  enable_client_http_server  stock's boolean words (1/0, true/false, yes/no, on/off,
                             enable/disable; any case); default False; a value it cannot
                             read is False, with a warning.
  client_http_port           an integer, default 9300 (DEFAULT_PORT); a value that is not
                             one fails setup() with -600; when the server is enabled it
                             must be 1-65535 (else -600).

When enabled, one daemon thread serves, on 0.0.0.0:<port> as stock's coro_http_server:
  GET /metrics          the C library's Prometheus text (tide_store_metrics_text), content
                        type "text/plain; version=0.0.4"; 503 "metrics not available" when
                        MC_STORE_CLIENT_METRIC turned metrics off;
  GET /metrics/summary  a human summary of the same counters (stock's RPC summary lines);
  GET /health           {"status": "healthy"|"not_initialized"|"master_unreachable",
                        "code": 0|1|2}, 200 when healthy, else 503.
A port that cannot be bound leaves the store set up without the server (a warning on
stderr), as stock's. close() stops the thread and releases the port.
"""
import ctypes
import errno
import http.server
import json
import re
import sys
import threading
import weakref

from mooncake._native import lib as _lib

DEFAULT_PORT = 9300  # stock's DEFAULT_CLIENT_HTTP_PORT
PROM_CONTENT_TYPE = "text/plain; version=0.0.4"
# Stock's kLatencyBucket (client_metric.h), microseconds: the bounds the summary quotes.
LATENCY_BOUNDS_US = (50, 75, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000,
                     5000, 7000, 15000, 20000, 50000, 100000, 200000, 500000, 1000000,
                     2000000, 5000000, 10000000, 20000000)

_TRUE = ("1", "true", "yes", "on", "enable")
_FALSE = ("0", "false", "no", "off", "disable")
_HEALTH = {0: "healthy", 1: "not_initialized", 2: "master_unreachable"}


def parse_bool(value, default=False):
    """Stock's get_config_bool: str(value), trimmed, one of its words; else default."""
    word = str(value).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    print(f"mooncake.store: setup: invalid boolean value {value!r} for "
          f"enable_client_http_server, using default: {default}", file=sys.stderr)
    return default


def parse_port(value):
    """Stock's get_config_int: str(value) trimmed, decimal digits with an optional '-';
    None when it is not one."""
    text = str(value).strip()
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else None


def metrics_text(store):
    """(0, text) or (negative errno, None): the C library's Prometheus text of store."""
    h = store._enter()
    if h is None:
        return -errno.EINVAL, None
    try:
        need = ctypes.c_size_t(0)
        size = 64 << 10
        for _ in range(8):  # counters move between calls: grow and ask again
            buf = ctypes.create_string_buffer(size)
            rc = _lib.tide_store_metrics_text(h, buf, size, ctypes.byref(need))
            if rc != -errno.ENOBUFS:
                return (rc, buf.value.decode()) if rc == 0 else (rc, None)
            size = need.value + (16 << 10)
        return -errno.ENOBUFS, None
    finally:
        store._leave()


def _samples(text):
    """{rpc_name: [(le, cumulative count)]} of mooncake_client_rpc_latency's buckets."""
    out = {}
    pat = re.compile(r'^mooncake_client_rpc_latency_bucket\{(.*)\} (\d+)$')
    for line in text.splitlines():
        m = pat.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
        le = labels.get("le")
        out.setdefault(labels.get("rpc_name", ""), []).append(
            (float("inf") if le == "+Inf" else float(le), int(m.group(2))))
    return out


def summary(text, attached=False):
    """Stock's RPC summary lines: per RPC its answered count, the bound of the bucket that
    reaches 95 % of them, and of the highest bucket with data."""
    lines = ["Client Metrics Summary", "=== RPC Metrics Summary ==="]
    found = False
    for name, buckets in _samples(text).items():
        buckets.sort()
        total = buckets[-1][1] if buckets else 0
        if total == 0:
            continue
        found = True
        line = f"{name}: count={total}"
        target, prev, top = total * 95 // 100, 0, None
        p95 = None
        for le, cum in buckets:
            if p95 is None and cum >= target and le != float("inf"):
                p95 = le
            if cum > prev and le != float("inf"):
                top = le
            prev = cum
        if p95 is not None:
            line += f", p95<{p95:g}μs"
        if top is not None:
            line += f", max<{top:g}μs"
        lines.append(line)
    if not found:
        lines.append("No RPC calls recorded")
    if attached:
        lines.append("(attached to the node's agent: the agent makes the master RPCs; "
                     "this client counts none)")
    return "\n".join(lines) + "\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "tide-client"

    def log_message(self, *_args):  # no access log on stderr
        pass

    def _send(self, code, ctype, body):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        store = self.server.store_ref()
        path = self.path.split("?", 1)[0]
        if store is None:  # the store object is gone; close() stops this server first
            self._send(503, "text/plain", "client not initialized")
        elif path == "/health":
            code = store.health_check()
            body = json.dumps({"status": _HEALTH.get(code, "unknown"), "code": code},
                              separators=(",", ":"))
            self._send(200 if code == 0 else 503, "application/json", body)
        elif path in ("/metrics", "/metrics/summary"):
            rc, text = metrics_text(store)
            if rc == -errno.EINVAL:
                self._send(503, "text/plain", "client not initialized")
            elif rc != 0:
                self._send(503, "text/plain", "metrics not available")
            elif path == "/metrics":
                self._send(200, PROM_CONTENT_TYPE, text)
            else:
                h = store._enter()
                attached = False
                if h is not None:
                    try:
                        attached = bool(_lib.tide_store_attached(h))
                    finally:
                        store._leave()
                self._send(200, "text/plain", summary(text, attached))
        else:
            self._send(404, "text/plain", "not found")


class _Server(http.server.HTTPServer):
    allow_reuse_address = True  # a restarted client takes its port back at once, as stock's


def start(store, port):
    """Serve store on port from a daemon thread; the server, or None (warned) when the
    port cannot be bound."""
    try:
        srv = _Server(("0.0.0.0", port), _Handler)
    except OSError as e:
        print(f"mooncake.store: failed to start the client HTTP server on port {port} "
              f"({e.strerror or e}); continuing without HTTP endpoints", file=sys.stderr)
        return None
    srv.store_ref = weakref.ref(store)  # the server does not keep the store alive
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2},
                         name=f"mooncake-client-http-{port}", daemon=True)
    srv.thread = t
    t.start()
    return srv


def stop(srv):
    """Stop serving and release the port (None: nothing to stop)."""
    if srv is None:
        return
    if threading.current_thread() is srv.thread:
        # close() from the server's own thread (the store's last reference dropped in a
        # handler): shutdown() would wait for this very thread, so another one does it.
        threading.Thread(target=stop, args=(srv,), daemon=True).start()
        return
    srv.shutdown()
    srv.server_close()
    srv.thread.join(timeout=5)
