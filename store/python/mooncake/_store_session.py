"""Stock MooncakeDistributedStore's put and get sessions, on libtidestore's session calls
(tide_store.h: tide_store_batch_put_session_start / _put_ranges / _put_session_end /
_revoke, tide_store_batch_get_session_start / _get_ranges / _get_session_end).

A put session reserves objects at the master without moving a byte
(batch_put_session_start), takes ranged writes of any number of buffers into every
reserved replica (batch_put_from_multi_buffer_ranges), and ends (objects readable) or is
revoked. A get session looks replicas up once (batch_get_session_start); ranged reads
(batch_get_into_multi_buffer_ranges) then ask the master nothing.

Return values are stock's: lists of per-key codes (ranged calls: the bytes moved, or a
negative code), INVALID_PARAMS (-600) for a key without a session, a range past the
object, a second start of a key, a per-key list of another length; [] (-1 for
batch_get_session_end) when the store is not set up, as stock's binding answers. Sessions
live in this store (through a node agent: in the agent, owned by this client's
connection, revoked when it goes)."""
import ctypes
import operator

from mooncake._native import abi as _abi, lib as _lib
from mooncake._store_base import (_BadArg, _E, _INVALID_PARAMS, _SENTINEL_I64, _SENTINEL_INT,
                                  _UNTOUCHED, _keys, _mc_code, _rc, _sz)

__all__ = []

_INVALID_REPLICA = -702
# Stock answers INVALID_PARAMS where the C calls name the reason.
_SESSION_CODES = {_E.ESRCH: _INVALID_PARAMS, _E.EBUSY: _INVALID_PARAMS,
                  _E.ERANGE: _INVALID_PARAMS, _E.EMFILE: _INVALID_PARAMS,
                  _E.EREMOTEIO: _INVALID_REPLICA}
_Part = _abi.tide_store_part


def _code(v):
    return _mc_code(v, _SESSION_CODES)


def _bytes_or_code(v):
    return v if v >= 0 else _mc_code(v, _SESSION_CODES)


def _ranges(keys, all_ptrs, all_sizes, all_offsets):
    """Per key a list of (address, length, offset), or None for a key whose lists are
    unusable (lengths differ, a negative number, a NULL address with a length); None
    as a whole when the outer lists do not have one entry per key."""
    try:
        outer = [list(x) for x in (all_ptrs, all_sizes, all_offsets)]
    except TypeError:
        return None
    if any(len(x) != len(keys) for x in outer):
        return None
    out = []
    for p, s, o in zip(*outer):
        try:
            p, s, o = list(p), list(s), list(o)
            g = [(operator.index(a), operator.index(b), operator.index(c))
                 for a, b, c in zip(p, s, o)]
        except TypeError:
            out.append(None)
            continue
        if len(p) != len(s) or len(p) != len(o) or \
                any(a < 0 or b < 0 or c < 0 or (b and not a) for a, b, c in g):
            out.append(None)
            continue
        out.append(g)
    return out


class _SessionCalls:
    """The methods above, on MooncakeDistributedStore (see the module's docstring)."""

    def _sess(self, keys, what, call, mapper):
        """Run call(h, n, karr) -> (rc, per-key list) on a set-up store: [] when it is
        not set up or keys is empty; -600 for every key when one cannot be a C string."""
        n, karr = _keys(keys, what)
        h = self._enter()
        if h is None:
            return []
        try:
            if n == 0:
                return []
            if karr is None:
                return [_INVALID_PARAMS] * n
            r, out = call(h, n, karr)
            return [mapper(r if v is _UNTOUCHED else v) for v in out]
        except _BadArg:
            return [_INVALID_PARAMS] * n
        finally:
            self._leave()

    # ------------------------------------------------------------------------- puts
    def batch_put_session_start(self, keys, sizes, config=None):
        """Reserve len(keys) objects of sizes[i] bytes at the master (one BatchPutStart),
        no bytes moved. Per key 0, or -600 (a put session of the key is open, size 0,
        sizes of another length), -705 the object exists, -200 no space, ..."""
        def call(h, n, karr):
            try:
                sz = [operator.index(s) for s in sizes]
            except TypeError:
                raise _BadArg("sizes") from None
            if len(sz) != n or any(s < 0 for s in sz):
                raise _BadArg("sizes")
            rc, keep = _rc(config, n)
            out = (ctypes.c_int * n)(*([_SENTINEL_INT] * n))
            r = _lib.tide_store_batch_put_session_start(
                h, karr, (_sz * n)(*sz), n, None if rc is None else ctypes.byref(rc), out)
            del keep
            return r, [_UNTOUCHED if v == _SENTINEL_INT else v for v in out]
        return self._sess(keys, "batch_put_session_start", call, _code)

    def _ranged(self, what, put, keys, all_buffer_ptrs, all_sizes, all_offsets):
        def call(h, n, karr):
            groups = _ranges(keys, all_buffer_ptrs, all_sizes, all_offsets)
            if groups is None:
                raise _BadArg("lists of another length")
            ok = [i for i in range(n) if groups[i] is not None]
            if not ok:
                return 0, [-_E.EINVAL] * n
            sub = karr if len(ok) == n else (_cp_arr(karr, ok))
            flat = [t for i in ok for t in groups[i]]
            parts = (_Part * max(1, len(flat)))()
            offs = (ctypes.c_uint64 * max(1, len(flat)))()
            for j, (p, ln, off) in enumerate(flat):
                parts[j].buf, parts[j].len, offs[j] = p or None, ln, off
            nparts = (_sz * len(ok))(*[len(groups[i]) for i in ok])
            out = (ctypes.c_int64 * len(ok))(*([_SENTINEL_I64] * len(ok)))
            fn = _lib.tide_store_batch_put_ranges if put else _lib.tide_store_batch_get_ranges
            r = fn(h, sub, parts, offs, nparts, len(ok), out)
            res = [-_E.EINVAL] * n
            for j, i in enumerate(ok):
                res[i] = _UNTOUCHED if out[j] == _SENTINEL_I64 else out[j]
            return r, res
        return self._sess(keys, what, call, _bytes_or_code)

    def batch_put_from_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_dst_offsets):
        """Write buffer j of key i (all_buffer_ptrs[i][j], all_sizes[i][j] bytes) at
        all_dst_offsets[i][j] of every replica its open put session reserved. Per key the
        bytes written, or -600 (no put session, a range past the reserved size, lists of
        another length), a transfer error."""
        return self._ranged("batch_put_from_multi_buffer_ranges", True, keys,
                            all_buffer_ptrs, all_sizes, all_dst_offsets)

    def _put_end(self, what, keys, revoke):
        def call(h, n, karr):
            out = (ctypes.c_int * n)(*([_SENTINEL_INT] * n))
            fn = (_lib.tide_store_batch_put_session_revoke if revoke
                  else _lib.tide_store_batch_put_session_end)
            r = fn(h, karr, n, out)
            return r, [_UNTOUCHED if v == _SENTINEL_INT else v for v in out]
        return self._sess(keys, what, call, _code)

    def batch_put_session_end(self, keys):
        """End the put sessions (one BatchPutEnd): the objects become readable. Per key 0,
        -600 (no put session), or the master's error (the object is then revoked)."""
        return self._put_end("batch_put_session_end", keys, False)

    def batch_put_session_revoke(self, keys):
        """Revoke the put sessions (one BatchPutRevoke): nothing of the objects stays. Per
        key 0 or -600 (no put session)."""
        return self._put_end("batch_put_session_revoke", keys, True)

    # ------------------------------------------------------------------------- gets
    def batch_get_session_start(self, keys):
        """Look the keys' replicas up once (one BatchGetReplicaList) and keep each key's
        COMPLETE memory replica for ranged reads. Per key 0, -704 missing, ..."""
        def call(h, n, karr):
            out = (ctypes.c_int * n)(*([_SENTINEL_INT] * n))
            r = _lib.tide_store_batch_get_session_start(h, karr, n, out)
            return r, [_UNTOUCHED if v == _SENTINEL_INT else v for v in out]
        return self._sess(keys, "batch_get_session_start", call, _code)

    def batch_get_into_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_src_offsets):
        """Read all_sizes[i][j] bytes at all_src_offsets[i][j] of key i into
        all_buffer_ptrs[i][j], from the replica its get session keeps (no master call).
        Per key the bytes read, or -600 (no get session, a range past the object, lists
        of another length), -707 the read lease ended (start the session again)."""
        return self._ranged("batch_get_into_multi_buffer_ranges", False, keys,
                            all_buffer_ptrs, all_sizes, all_src_offsets)

    def batch_get_session_end(self, keys):
        """Forget the keys' get sessions. 0 (-1 when the store is not set up, as stock)."""
        n, karr = _keys(keys, "batch_get_session_end")
        h = self._enter()
        if h is None:
            return -1
        try:
            if n > 0 and karr is not None:
                _lib.tide_store_batch_get_session_end(h, karr, n)
            return 0
        finally:
            self._leave()


def _cp_arr(karr, idx):
    return (ctypes.c_char_p * len(idx))(*[karr[i] for i in idx])
