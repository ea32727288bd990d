"""Importable as Mooncake's `mooncake.buffer_pool`; Tide does not provide a
registered BufferPool yet, so the store has no `BufferPool` and no
`_get_pyclient_capsule` and Mooncake's helper takes its plain path."""

BufferPool = None
RegisteredBufferPool = None
