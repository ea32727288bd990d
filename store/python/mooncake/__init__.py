"""Tide's drop-in for Mooncake's Python package (`import mooncake.store`).

The store API is backed by Tide's C store client (libtidestore.so, loaded with
ctypes), which talks to a Mooncake-protocol master and moves bytes with Tide's
transfer engine.
"""
