"""`mooncake.buffer_pool`: Mooncake's public entry point for local-buffer pools.

BufferPool (alias RegisteredBufferPool) is `mooncake.store.BufferPool`: leases of
registered memory carved from the store's local buffer. None when the loaded
libtidestore.so lacks the local/mapped-buffer functions (then the store has no
`_get_pyclient_capsule` either, and Mooncake's helper takes its plain path).
"""
try:
    from mooncake.store import BufferPool
except (ImportError, AttributeError):
    BufferPool = None

RegisteredBufferPool = BufferPool

__all__ = ["BufferPool", "RegisteredBufferPool"]
