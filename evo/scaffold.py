"""`evo new NAME [--kernel FILE]`: a family folder to start from.

Without ``--kernel`` the folder holds a working starter family (a bf16 kernel with template-parameter knobs) that
`evo check` passes as it is: a shape to replace with your own. With ``--kernel FILE`` the kernel is copied in, its
entry point and template parameters are read from it, and family.py's methods are stubs that say, as `evo check`
does, which TODO comes next. Nothing that exists is overwritten.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates" / "family"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ScaffoldError(Exception):
    """One line for the user."""


@dataclass(frozen=True)
class Entry:
    """A kernel's entry point as read from its source."""

    name: str
    template: tuple[tuple[str, str, str | None], ...]  # (type, name, default) of each template parameter
    params: str  # the parameter list as written
    extern_c: bool = False

    def expression(self) -> str:
        if not self.template:
            # a C++ function (mangled) is found through a name expression: qualified, "::name" at global scope
            return self.name if self.extern_c or "::" in self.name else f"::{self.name}"
        return f"{self.name}<" + ", ".join("{" + knob_name(n) + "}" for _, n, _ in self.template) + ">"


def knob_name(param: str) -> str:
    """BLOCK_SIZE -> block_size, NumSplits -> num_splits."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", param)
    return s.lower()


_NEST = r"(?:[^()]|\((?:[^()]|\([^()]*\))*\))*"  # a parenthesised list's inside, two levels of (...) in it
_GLOBAL = re.compile(
    r"(?P<tmpl>template\s*<(?P<targs>(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*)>\s*)?"
    r"(?P<externc>extern\s+\"C\"\s+)?(?:static\s+)?__global__\s+(?:void\s+)?"
    rf"(?:__launch_bounds__\s*\({_NEST}\)\s*)?"
    rf"(?:void\s+)?(?P<name>[A-Za-z_]\w*)\s*\((?P<params>{_NEST})\)",
    re.S,
)
# comments, and string and character literals (a "}" in a printf would end a namespace) but extern "C"'s
_NOISE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])+'", re.S)


def _quiet(source: str) -> str:
    return _NOISE.sub(lambda m: m.group(0) if m.group(0) == '"C"' else (" " if m.group(0)[0] == "/" else '""'), source)


_SCOPE = re.compile(r"\bnamespace\s+(?P<ns>[A-Za-z_][\w:]*)?\s*\{|\{|\}")


def _namespace_at(text: str, pos: int) -> str:
    """The named namespaces enclosing ``pos`` ("a::b::"; an anonymous one adds nothing), read by brace depth."""
    stack: list[str | None] = []
    for m in _SCOPE.finditer(text, 0, pos):
        if m.group(0) == "}":
            if stack:
                stack.pop()
        elif m.group(0).startswith("namespace"):
            stack.append(m.group("ns") or "")
        else:
            stack.append(None)
    return "".join(f"{n}::" for n in stack if n)


def read_entries(source: str) -> list[Entry]:
    """The ``__global__`` functions of a CUDA source, with their template parameters (comments ignored). A
    function inside a namespace is named with it (``myengine::rms_norm``): the name NVRTC looks it up by."""
    text = _quiet(source)
    out = []
    for m in _GLOBAL.finditer(text):
        tparams = []
        for part in split_params(m.group("targs") or ""):
            default = None
            if "=" in part:
                part, default = (x.strip() for x in part.split("=", 1))
            bits = part.split()
            tparams.append((" ".join(bits[:-1]) or "int", bits[-1], default))
        name = _namespace_at(text, m.start()) + m.group("name")
        out.append(Entry(name, tuple(tparams), " ".join(m.group("params").split()), bool(m.group("externc"))))
    return out


def split_params(params: str) -> list[str]:
    """A parameter list split at its top-level commas (``Pack<int, 4> p`` stays one)."""
    out, depth, cur = [], 0, ""
    for ch in params:
        depth += ch in "<([" and 1 or 0
        depth -= ch in ">)]" and 1 or 0
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [p for p in out if p and p != "void"]


_INT64 = re.compile(r"\b(int64_t|uint64_t|long|size_t|ptrdiff_t|intptr_t|uintptr_t)\b")
_SMALL = re.compile(r"\b(bool|char|short|int16_t|int8_t|uint8_t|uint16_t)\b")  # 1 or 2 bytes: passed as s
_INT32 = re.compile(r"\b(int|int32_t|uint32_t|unsigned)\b")


def param_letter(param: str) -> str:
    """The arg_types letter a parameter needs: p pointer, l 64-bit integer, i 32-bit integer, f float, d double, s a
    1- or 2-byte integer (its bytes, e.g. ``np.int8(v)``); ``?`` where the source cannot say (a template type such as
    ``index_t``, a struct or a half by value: the cubin's size decides)."""
    if "*" in param or "[" in param:
        return "p"
    if re.search(r"\bfloat\b", param):
        return "f"
    if re.search(r"\bdouble\b", param):
        return "d"
    if _INT64.search(param):
        return "l"
    if _SMALL.search(param):  # "short int" too
        return "s"
    if _INT32.search(param):
        return "i"
    return "?"


def _arg_types(params: str) -> str:
    return "".join(param_letter(p).replace("?", "i") for p in split_params(params))


def opaque_params(params: str) -> bool:
    """Whether a parameter list as read holds what a reader cannot count: a preprocessor line (``#ifdef``), or a
    macro call or function-pointer type (``RMS_ARGS(T)``)."""
    return "#" in params or re.search(r"[A-Za-z_]\w*\s*\(", params) is not None


def _knob_line(ttype: str, name: str, default: str | None) -> str:
    k = knob_name(name)
    if ttype == "bool":
        d = "True" if default in ("true", "1") else "False"
        return f'        Knob("{k}", (False, True), {d}, doc="{name}"),\n'
    if default is not None and re.fullmatch(r"-?\d+", default):
        return (
            f'        Knob("{k}", ({default},), {default}, doc="TODO(evo): the values of {name} to search '
            f'(default {default})"),\n'
        )
    if ttype in ("typename", "class"):  # a type: its values are type names, written into the entry verbatim
        t = default or "float"
        return (
            f'        Knob("{k}", ("{t}",), "{t}", doc="TODO(evo): the types of {name} to search (a type the '
            f'geometry fixes belongs in specialization(), not in a knob)"),\n'
        )
    return (
        f'        Knob("{k}", (0,), 0, doc="TODO(evo): the values of template parameter {ttype} {name} and its '
        'default"),\n'
    )


def quoted_includes(source: str) -> list[str]:
    """The ``#include "..."`` headers of a kernel, in order, once each (comments ignored)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    return list(dict.fromkeys(re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, flags=re.M)))


def local_includes(source: str, folder: Path) -> list[str]:
    """The ``#include "..."`` headers of a kernel that lie beside it in ``folder`` (its own headers)."""
    return [n for n in quoted_includes(source) if (folder / n).is_file()]


def new_family(name: str, folder: Path, kernel: Path | None = None, link: bool = False) -> Path:
    """Write the family folder ``folder/name``; returns it. Raises ScaffoldError (nothing is written then).

    ``link``: kernel.cu is a relative symbolic link to ``kernel`` (one source: evo builds the file your engine
    builds, and ``evo export --tree`` patches that file), else a copy. Either way, when the kernel includes
    headers of its own folder (``#include "utils.cuh"``), that folder goes into the family's ``include_dirs``."""
    if not _NAME.fullmatch(name):
        raise ScaffoldError(f"{name!r} cannot name a family (letters, digits and _; it is also the kernel's name)")
    dest = folder / name
    if dest.exists():
        raise ScaffoldError(f"{dest} exists; evo new never writes into an existing folder")
    cls = "".join(p.capitalize() for p in name.split("_") if p) or "Family"
    files: dict[str, str] = {}
    if kernel is None:
        values = {"name": name, "cls": cls, "description": "starter: out = x * scale + y in bf16 (replace me)"}
        for f in ("kernel.cu", "family.py", "evo.yaml", "test_family.py"):
            files[f] = (TEMPLATES / f).read_text().format(**values)
    else:
        try:
            src = kernel.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ScaffoldError(f"cannot read the kernel {kernel}: {e}") from None
        entries = read_entries(src)
        if not entries:
            raise ScaffoldError(f"{kernel} has no __global__ function")
        entry = next((x for x in entries if x.name.split("::")[-1] == name), entries[0])
        own = local_includes(src, kernel.parent)
        dest_abs = (folder / name).resolve()
        kernel_dir = os.path.relpath(kernel.parent.resolve(), dest_abs)
        include_dirs = (
            f'    include_dirs=("{kernel_dir}",),  # the kernel\'s folder: {", ".join(own)} (relative to this one)\n'
            if own
            else ""
        )
        knobs = (
            "".join(_knob_line(*t) for t in entry.template)
            or "        # TODO(evo): knobs (template parameters or EVO_<KNOB> macros)\n"
        )
        values = {
            "name": name,
            "cls": cls,
            "kernel": kernel.name,
            "entry": entry.expression(),
            "arg_types": _arg_types(entry.params),
            "signature": entry.params.replace('"', "'"),
            "knobs": knobs,
            "include_dirs": include_dirs,
        }
        if not link:
            files["kernel.cu"] = src
        files["family.py"] = (TEMPLATES / "family_stub.py").read_text().format(**values)
        files["evo.yaml"] = (
            (TEMPLATES / "evo.yaml")
            .read_text()
            .format(name=name)
            .replace(
                "  - {name: n16M, n: 16777216, weight: 1}\n"
                "  - {name: n64K, n: 65536, weight: 0}     # watched: must not regress\n",
                "  - {name: small, weight: 1}   # TODO(evo): every geometry param of family.py, and a weight "
                "(0: watched)\n",
            )
        )
        files["test_family.py"] = (TEMPLATES / "test_family.py").read_text().format(name=name)
    dest.mkdir(parents=True)
    for f, text in files.items():
        (dest / f).write_text(text)
    if kernel is not None and link:
        (dest / "kernel.cu").symlink_to(os.path.relpath(kernel.resolve(), dest.resolve()))
    return dest
