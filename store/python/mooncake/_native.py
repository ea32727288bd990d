"""The one native library behind Tide's `mooncake` package: libtidestore.so, which holds
the store client (tide_store_*) and the transfer engine (tide_te_*). mooncake.store and
mooncake.engine load it through here, so one process has one copy of each.

The library is taken from where an install put it, in this order: $LIBTIDESTORE (what
the test suites and the tools set to a build tree's library); libtidestore.so next to
this package (what `pip install .` installs); the dynamic loader's search (after
`meson install` and ldconfig). Its functions and structs are bound with the
declarations the build generated from the same headers (tide_abi.py, beside the library
or, after `meson install`, in <datadir>/tide): this package declares no prototype by
hand. At import the library's interface version must be the one this package is written
for, and every struct must have the library's size.
"""
import ctypes
import ctypes.util
import importlib.util
import os

__all__ = ["lib", "path", "abi"]

# The interface this package is written for: TIDE_STORE_ABI_VERSION of tide_store.h.
ABI_VERSION = 5


def _find():
    env = os.environ.get("LIBTIDESTORE")
    if env:
        if not os.path.exists(env):
            raise ImportError(f"mooncake: LIBTIDESTORE={env} does not exist")
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libtidestore.so")
    if os.path.exists(here):
        return here
    found = ctypes.util.find_library("tidestore")
    if found:
        return found
    raise ImportError("mooncake: no libtidestore.so: install the package (pip install . in "
                      "the Tide tree), install the library (meson install -C build && "
                      "ldconfig), or point LIBTIDESTORE at a build's "
                      "store/client/libtidestore.so")


def _mapped_path(handle_name):
    """The file the loader mapped for handle_name (a bare name when ldconfig found it)."""
    if os.path.isabs(handle_name):
        return os.path.realpath(handle_name)
    with open("/proc/self/maps") as maps:
        for ln in maps:
            f = ln.split()
            if len(f) >= 6 and os.path.basename(f[-1]).startswith("libtidestore.so"):
                return f[-1]
    return handle_name


def _load_abi(libfile):
    d = os.path.dirname(libfile)
    cands = [os.path.join(d, "tide_abi.py"),
             os.path.join(d, "..", "share", "tide", "tide_abi.py"),  # <prefix>/lib
             os.path.join(d, "..", "..", "share", "tide", "tide_abi.py")]  # lib/<triplet>
    for c in cands:
        if os.path.exists(c):
            spec = importlib.util.spec_from_file_location("mooncake._tide_abi", c)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod, c
    raise ImportError(f"mooncake: no tide_abi.py beside {libfile} or in its <datadir>/tide: "
                      "the build writes it next to libtidestore.so; rebuild or reinstall Tide")


path = _find()
lib = ctypes.CDLL(path)
_file = _mapped_path(lib._name)
if not hasattr(lib, "tide_store_abi_version"):
    raise ImportError(f"mooncake: {_file} predates the binary interface check (no "
                      "tide_store_abi_version): rebuild or reinstall Tide")
abi, abi_path = _load_abi(_file)
lib.tide_store_abi_version.restype = ctypes.c_uint
lib.tide_store_abi_version.argtypes = []
_have = lib.tide_store_abi_version()
if _have != ABI_VERSION or abi.TIDE_STORE_ABI_VERSION != ABI_VERSION:
    raise ImportError(f"mooncake: {_file} has binary interface version {_have} and "
                      f"{abi_path} version {abi.TIDE_STORE_ABI_VERSION}; this package needs "
                      f"{ABI_VERSION}: rebuild or reinstall Tide so the library, its "
                      "declarations and the package match")

_missing = [n for n in abi.FUNCTIONS if getattr(lib, n, None) is None]
if _missing:
    raise ImportError(f"mooncake: {_file} lacks {', '.join(sorted(_missing))}, which "
                      f"{abi_path} declares: they were built from different trees")
for _name, (_res, _args) in abi.FUNCTIONS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args

for _cname, _cls in abi.STRUCTS.items():
    _want = lib.tide_store_abi_sizeof(_cname.encode())
    if ctypes.sizeof(_cls) != _want:
        raise ImportError(f"mooncake: struct {_cname} is {_want} bytes in {_file} but "
                          f"{ctypes.sizeof(_cls)} as {abi_path} declares it: they were built "
                          "from different versions of the headers")
