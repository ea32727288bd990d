#!/usr/bin/python3
"""Write the ctypes declarations of libtidestore's public headers (tide_store.h, tide_te.h).

Run by the build (store/client/meson.build): its output, tide_abi.py, sits beside
libtidestore.so wherever that goes (the build tree, the wheel's package directory,
<datadir>/tide after `meson install`), and mooncake._native binds the library it loads
with the declarations built from the same headers. Nothing in the package declares a C
prototype or mirrors a struct by hand.

    gen_abi.py -o tide_abi.py [-m libtidestore.map] tide_te.h tide_store.h

With -m it also writes the library's linker version script: exactly the functions the
headers declare are exported, every other symbol of the library stays local.

The headers are Tide's own, so this reads the C they are written in, not all of C:
comments, preprocessor lines, `struct`/`enum` definitions and forward declarations,
`typedef` of a scalar, an enum or a function pointer, and prototypes. A type or
declaration it cannot map stops the build with the header's name and the declaration
(widen this script, do not hand-write the binding).
"""
import argparse
import os
import re
import sys

SCALARS = {
    "void": "None", "bool": "ctypes.c_bool", "_Bool": "ctypes.c_bool", "char": "ctypes.c_char",
    "int": "ctypes.c_int", "unsigned": "ctypes.c_uint", "unsigned int": "ctypes.c_uint",
    "long": "ctypes.c_long", "unsigned long": "ctypes.c_ulong",
    "size_t": "ctypes.c_size_t", "ssize_t": "ctypes.c_ssize_t",
    "int8_t": "ctypes.c_int8", "uint8_t": "ctypes.c_uint8",
    "int16_t": "ctypes.c_int16", "uint16_t": "ctypes.c_uint16",
    "int32_t": "ctypes.c_int32", "uint32_t": "ctypes.c_uint32",
    "int64_t": "ctypes.c_int64", "uint64_t": "ctypes.c_uint64",
}


class GenError(Exception):
    pass


class Abi:
    def __init__(self):
        self.structs = {}  # name -> [(field, ctype expr)], in definition order
        self.opaque = set()  # struct names only declared
        self.enums = {}  # enum name -> [(constant, value)]
        self.typedefs = {}  # name -> ctype expr
        self.funcs = {}  # name -> (restype expr, [argtype exprs])
        self.defines = {}  # ABI-relevant integer macros
        self.where = ""

    # -- declarators -------------------------------------------------------------------
    def base(self, spec):
        """The ctypes expression for a declaration's base type (no pointers)."""
        words = [w for w in spec.split() if w not in ("const", "volatile", "restrict")]
        text = " ".join(words)
        if text.startswith("struct "):
            name = text[len("struct "):]
            if name in self.structs:
                return name
            if name in self.opaque:
                return "opaque"
            raise GenError(f"struct {name} used before it is defined or declared")
        if text.startswith("enum "):
            return "ctypes.c_int"  # C enums of these headers are int-sized
        if text in SCALARS:
            return SCALARS[text]
        if text in self.typedefs:
            return self.typedefs[text]
        raise GenError(f"no ctypes mapping for type '{text}'")

    def pointer(self, base, spec, depth):
        """The ctypes expression for depth levels of pointer to base."""
        if base.startswith("_fn_"):
            expr = base  # a function pointer typedef is a pointer already
        elif depth == 0:
            if base == "opaque":
                raise GenError(f"opaque '{spec.strip()}' used by value")
            return base
        elif base == "ctypes.c_char":
            expr = "ctypes.c_char_p"  # one level of pointer to char: a string
        elif base in ("None", "opaque"):
            expr = "ctypes.c_void_p"  # to void or an opaque struct: an address
        else:
            expr = f"ctypes.POINTER({base})"
        for _ in range(depth - (0 if base.startswith("_fn_") else 1)):
            expr = f"ctypes.POINTER({expr})"
        return expr

    def declarator(self, decl, named=True):
        """(name, ctype expr) of one declaration such as 'const char *const *keys'."""
        decl = decl.strip()
        arr = re.search(r"\[(\w*)\]\s*$", decl)
        count = None
        if arr:
            count = arr.group(1)
            decl = decl[:arr.start()].rstrip()
        m = re.match(r"^(.*?)([A-Za-z_]\w*)$", decl) if named else None
        if named and not m:
            raise GenError(f"cannot read declaration '{decl}'")
        if named:
            typ, name = m.group(1), m.group(2)
            # 'unsigned' alone names a type, not a field called 'unsigned'
            if not typ.replace("*", "").replace("const", "").strip():
                raise GenError(f"declaration '{decl}' has no type")
        else:
            typ, name = decl, None
        depth = typ.count("*")
        spec = typ.replace("*", " ")
        expr = self.pointer(self.base(spec), spec, depth)
        if count is not None:
            if not count.isdigit():
                raise GenError(f"array bound '{count}' is not a number")
            expr = f"({expr} * {count})"
        return name, expr

    # -- top-level declarations -------------------------------------------------------
    def add(self, decl):
        decl = " ".join(decl.split())
        if not decl or decl.startswith("extern \"C\""):
            return
        self.where = decl
        m = re.match(r"^struct (\w+) \{(.*)\}$", decl)
        if m:
            name, body = m.groups()
            fields = []
            self.structs[name] = fields  # self-reference through a pointer is allowed
            for member in filter(None, (x.strip() for x in body.split(";"))):
                first = re.match(r"^((?:const |unsigned |struct |enum )*\w+)\s*(.*)$", member)
                if not first:
                    raise GenError(f"cannot read member '{member}'")
                spec, rest = first.groups()
                for d in rest.split(","):
                    fields.append(self.declarator(f"{spec} {d.strip()}"))
            return
        m = re.match(r"^enum (\w+) \{(.*)\}$", decl)
        if m:
            name, body = m.groups()
            consts, nxt = [], 0
            for item in filter(None, (x.strip() for x in body.split(","))):
                cm = re.match(r"^(\w+)(?: = (.+))?$", item)
                if not cm:
                    raise GenError(f"cannot read enumerator '{item}'")
                if cm.group(2) is not None:
                    nxt = int(cm.group(2), 0)
                consts.append((cm.group(1), nxt))
                nxt += 1
            self.enums[name] = consts
            return
        m = re.match(r"^struct (\w+)$", decl)
        if m:
            if m.group(1) not in self.structs:
                self.opaque.add(m.group(1))
            return
        m = re.match(r"^typedef (.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", decl)
        if m:
            ret, name, args = m.groups()
            _, rexpr = self.declarator(ret, named=False)
            aexprs = self.args(args)
            self.typedefs[name] = f"_fn_{name}"
            self.fn_types = getattr(self, "fn_types", {})
            self.fn_types[name] = (rexpr, aexprs)
            return
        m = re.match(r"^typedef (.+?) (\w+)$", decl)
        if m:
            _, expr = self.declarator(f"{m.group(1)} {m.group(2)}")
            self.typedefs[m.group(2)] = expr
            return
        m = re.match(r"^(.+?)\b(tide_\w+)\s*\((.*)\)$", decl)
        if m:
            ret, name, args = m.groups()
            _, rexpr = self.declarator(ret, named=False)
            self.funcs[name] = (rexpr, self.args(args))
            return
        raise GenError("not a declaration this generator reads")

    def args(self, text):
        text = text.strip()
        if text in ("void", ""):
            return []
        out = []
        for a in text.split(","):
            _, expr = self.declarator(a)
            out.append(expr)
        return out


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    lines = []
    for ln in text.splitlines():
        if ln.lstrip().startswith("#"):
            lines.append("")
        else:
            lines.append(ln)
    return "\n".join(lines)


def declarations(text):
    """Top-level declarations, each up to its ';' at brace depth 0 (or a lone '}' of an
    extern "C" block)."""
    depth, cur = 0, []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == ";" and depth == 0:
            yield "".join(cur)
            cur = []
            continue
        cur.append(ch)
        if depth == 0 and ch == "}" and "extern" in "".join(cur):
            cur = []


def read(abi, path):
    with open(path) as f:
        raw = f.read()
    # Integer constants of the interface (versions, flags): "#define TIDE_X 12" or "0x1u".
    for m in re.finditer(r"^#define (TIDE_\w+)\s+\(?(0x[0-9a-fA-F]+|\d+)[uUlL]*\)?\s*(?:/[*/].*)?$",
                         raw, flags=re.M):
        abi.defines[m.group(1)] = int(m.group(2), 0)
    body = strip(raw)
    # extern "C" { ... } wraps the whole header: drop its braces
    body = re.sub(r'extern "C" \{', " ", body)
    body = re.sub(r"^\}\s*$", " ", body, flags=re.M)
    for decl in declarations(body):
        try:
            abi.add(decl)
        except GenError as e:
            raise GenError(f"{path}: {e}: in '{' '.join(decl.split())[:160]}'") from None


def emit(abi, sources):
    out = [
        '"""libtidestore\'s declarations for ctypes, generated by store/python/gen_abi.py from',
        f"{', '.join(sources)} at build time. Do not edit: rebuild.",
        '"""',
        "import ctypes",
        "",
    ]
    for k, v in sorted(abi.defines.items()):
        out.append(f"{k} = {v}")
    out.append("")
    for ename, consts in abi.enums.items():
        out.append(f"# enum {ename}")
        for c, v in consts:
            out.append(f"{c} = {v}")
    out.append("")
    for name, (r, a) in getattr(abi, "fn_types", {}).items():
        out.append(f"_fn_{name} = ctypes.CFUNCTYPE({', '.join([r] + a)})")
        out.append(f"{name} = _fn_{name}")
    out.append("")
    for name in abi.structs:
        out.append(f"class {name}(ctypes.Structure):")
        out.append(f'    """struct {name}."""')
        out.append("")
    for name, fields in abi.structs.items():
        lines = ",\n    ".join(f'("{f}", {e})' for f, e in fields)
        out.append(f"{name}._fields_ = [\n    {lines},\n]")
    out.append("")
    out.append("STRUCTS = {")
    for name in abi.structs:
        out.append(f'    "{name}": {name},')
    out.append("}")
    out.append("")
    out.append("FUNCTIONS = {")
    for name, (r, a) in sorted(abi.funcs.items()):
        out.append(f'    "{name}": ({r}, [{", ".join(a)}]),')
    out.append("}")
    out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("-m", "--map", help="also write a linker version script")
    ap.add_argument("headers", nargs="+")
    opts = ap.parse_args()
    abi = Abi()
    try:
        for h in opts.headers:
            read(abi, h)
    except GenError as e:
        print(f"gen_abi: {e}", file=sys.stderr)
        return 1
    text = emit(abi, [os.path.basename(h) for h in opts.headers])
    with open(opts.output, "w") as f:
        f.write(text)
    if opts.map:
        with open(opts.map, "w") as f:
            f.write("/* Generated by store/python/gen_abi.py: the public headers' functions. */\n")
            f.write("{\n  global:\n")
            for name in sorted(abi.funcs):
                f.write(f"    {name};\n")
            f.write("  local:\n    *;\n};\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
