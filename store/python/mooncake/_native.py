"""The one native library behind Tide's `mooncake` package: libtidestore.so, which holds
the store client (tide_store_*) and the transfer engine (tide_te_*). mooncake.store and
mooncake.engine load it through here, so one process has one copy of each.

Found, in this order: $LIBTIDESTORE; libtidestore.so next to this package (what
`pip install .` installs); the newest build*/store/client/libtidestore.so of the
repository this package sits in that is not a sanitizer build; the dynamic loader
(ldconfig, e.g. after `meson install`).
"""
import ctypes
import ctypes.util
import glob
import os

__all__ = ["lib", "path", "check_struct"]

# The interface this package is written for: TIDE_STORE_ABI_VERSION of tide_store.h.
# A library that does not export its version predates the check and is not used.
ABI_VERSION = 2
ABI_MARKER = "tide_store_abi_version"


def _usable(p):
    """A build with the current ABI that loads into python3 (no sanitizer runtime)."""
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return (ABI_MARKER.encode() + b"\0" in data and b"libasan.so" not in data
            and b"libubsan.so" not in data and b"libtsan.so" not in data)


def _find():
    env = os.environ.get("LIBTIDESTORE")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.path.join(here, "libtidestore.so")]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    built = glob.glob(os.path.join(repo, "build*", "store", "client", "libtidestore.so"))
    cands += sorted(built, key=os.path.getmtime, reverse=True)  # the newest build first
    for c in cands:
        if os.path.exists(c) and _usable(c):
            return c
    found = ctypes.util.find_library("tidestore")
    if found:
        return found
    raise ImportError("mooncake: no usable libtidestore.so (current ABI, not a sanitizer "
                      "build) next to the package or in build*/store/client; set LIBTIDESTORE, "
                      "build Tide (meson setup build && ninja -C build), or install it "
                      "(meson install -C build && ldconfig)")


path = _find()
lib = ctypes.CDLL(path)
if not hasattr(lib, "tide_store_abi_version"):
    raise ImportError(f"mooncake: {path} predates the binary interface check (no "
                      "tide_store_abi_version): rebuild or reinstall Tide")
lib.tide_store_abi_version.restype = ctypes.c_uint
lib.tide_store_abi_version.argtypes = []
lib.tide_store_abi_sizeof.restype = ctypes.c_size_t
lib.tide_store_abi_sizeof.argtypes = [ctypes.c_char_p]
if lib.tide_store_abi_version() != ABI_VERSION:
    raise ImportError(f"mooncake: {path} has binary interface version "
                      f"{lib.tide_store_abi_version()}, this package needs {ABI_VERSION}: "
                      "rebuild or reinstall Tide so the library and the package match")


def check_struct(mirror, c_name):
    """ImportError unless the ctypes mirror has the C struct's size (a layout drift
    would otherwise pass wrong arguments silently)."""
    want = lib.tide_store_abi_sizeof(c_name.encode())
    if ctypes.sizeof(mirror) != want:
        raise ImportError(f"mooncake: struct {c_name} is {want} bytes in {path} but "
                          f"{ctypes.sizeof(mirror)} in this package: they were built from "
                          "different versions of tide_store.h")
