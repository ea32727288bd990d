"""Tide's drop-in for Mooncake's Python package (`import mooncake.store`).

The store API is backed by Tide's C store client (libtidestore.so, loaded with
ctypes), which talks to a Mooncake-protocol master and moves bytes with Tide's
transfer engine (or through the node's agent, tide-node).

Modules, as in Mooncake's wheel: mooncake.store (MooncakeDistributedStore,
ReplicateConfig, BufferPool), mooncake.mooncake_config (MooncakeConfig: from_file,
load_from_env, MOONCAKE_CONFIG_PATH), mooncake.structured_object_store and
mooncake.buffer_pool. Importing the package alone loads none of them (its BufferPool
and RegisteredBufferPool resolve lazily, from mooncake.buffer_pool).
"""

__all__ = ["BufferPool", "RegisteredBufferPool"]


def __getattr__(name):
    if name in __all__:
        from mooncake import buffer_pool
        return getattr(buffer_pool, name)
    raise AttributeError(name)
