"""`evo new NAME [--kernel FILE]`: a family folder to start from.

Without ``--kernel`` the folder holds a working starter family (a bf16 kernel with template-parameter knobs) that
`evo check` passes as it is: a shape to replace with your own. With ``--kernel FILE`` the kernel is copied in, its
entry point and template parameters are read from it, and family.py's methods are stubs that say, as `evo check`
does, which TODO comes next. Nothing that exists is overwritten.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from evo.include_roots import IncludeRoots, find_include_roots, listed
from evo.kernel_source import Entry, includes, knob_name, read_entries, split_params

__all__ = ["Entry", "ScaffoldError", "knob_name", "new_family", "read_entries", "split_params"]

TEMPLATES = Path(__file__).resolve().parent / "templates" / "family"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ScaffoldError(Exception):
    """One line for the user."""


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
    return includes(source, quoted=True)


def kernel_names(entries: list[Entry]) -> list[str]:
    """The kernels' names, in order, once each (a kernel's overloads and declarations are one kernel)."""
    return list(dict.fromkeys(e.name for e in entries))


def choose_entry(entries: list[Entry], kernel: Path, family: str, wanted: str | None) -> Entry:
    """The kernel `evo new` scaffolds: the one ``--entry`` names (plain, ``ns::name`` or a template-id); else the
    file's only kernel, or the one named like the family; else a one-line error listing the kernels."""
    names = kernel_names(entries)
    if not names:
        raise ScaffoldError(f"{kernel} has no __global__ function")
    if wanted is not None:
        want = "".join(wanted.split("<", 1)[0].split()).removeprefix("::")
        hits = [n for n in names if n == want or n.endswith("::" + want)]
        if not hits:
            raise ScaffoldError(f"--entry {wanted}: no such __global__ in {kernel}; its kernels: {', '.join(names)}")
        if len(hits) > 1:
            raise ScaffoldError(
                f"--entry {wanted} names {len(hits)} kernels of {kernel}: {', '.join(hits)}; qualify it"
            )
        pick = hits[0]
    elif len(names) == 1:
        pick = names[0]
    else:
        same = [n for n in names if n.split("::")[-1] == family]
        if len(same) != 1:
            raise ScaffoldError(
                f"{kernel} has {len(names)} kernels: {', '.join(names)}; pass --entry NAME to choose one"
            )
        pick = same[0]
    return next(e for e in entries if e.name == pick)


def _include_dirs(roots: IncludeRoots, kernel: Path, dest_abs: Path) -> str:
    """family.py's include_dirs line(s): each include root, relative to the family folder, and what it holds."""
    rows = []
    for root, found in roots.folders.items():
        why = "the kernel's folder" if root == kernel.resolve().parent else "an include root"
        rows.append((os.path.relpath(root, dest_abs), f"{why}: {listed(found)}"))
    if not rows:
        return ""
    if len(rows) == 1:
        return f'    include_dirs=("{rows[0][0]}",),  # {rows[0][1]} (relative to this folder)\n'
    lines = "".join(f'        "{path}",  # {why}\n' for path, why in rows)
    return f"    include_dirs=(  # relative to this folder\n{lines}    ),\n"


ENGINE_KNOB = """\
        # The kernel reads blockDim: its block size is chosen at launch, as engines choose it. To search it, a
        # knob whose value "engine" stands for the engine's own launch heuristic, computed per geometry in
        # launch(): every campaign then also measures what the engine does today, and its log names the best
        # against it (docs/extending.md, "The engine's own choice as a knob value"):
        # Knob("block", ("engine", 128, 256, 512, 1024), "engine", doc="threads per block; engine: its heuristic"),
"""
ENGINE_LAUNCH = """\
        # With the "block" knob above:
        #     block = self.engine_block(geometry) if genome["block"] == "engine" else genome["block"]
        # where engine_block(geometry) is the rule the engine's launcher applies (say min(hidden, 1024) rounded
        # to whole warps), written as a method of this class.
"""


def _torch_headers(roots: IncludeRoots) -> str:
    """family.py's torch_headers line where the kernel or its headers include torch's (a torch extension's .cu)."""
    if not roots.torch:
        return ""
    return f"    torch_headers=True,  # it includes {listed(roots.torch, 2)}: nvcc with the installed torch's headers\n"


def _stub_values(name: str, cls: str, kernel: Path, entry: Entry, include_dirs: str) -> dict[str, str]:
    """The fields of family_stub.py for ``entry``."""
    knobs = "".join(_knob_line(*t) for t in entry.knob_params())
    knobs = knobs or "        # TODO(evo): knobs (template parameters or EVO_<KNOB> macros)\n"
    return {
        "name": name,
        "cls": cls,
        "kernel": kernel.name,
        "entry": entry.expression(),
        "arg_types": _arg_types(entry.params),
        "signature": entry.params.replace('"', "'"),
        "knobs": knobs + (ENGINE_KNOB if entry.reads_block_dim else ""),
        "engine_launch": ENGINE_LAUNCH if entry.reads_block_dim else "",
        "include_dirs": include_dirs,
    }


def _read_kernel(kernel: Path) -> str:
    """The user's kernel file as text: a regular file (not /dev/zero, a FIFO, a folder) of at most KERNEL_LIMIT
    bytes, UTF-8; ScaffoldError (one line) otherwise. Called by :func:`new_family` before anything is written."""
    import stat

    from evo.inputs import KERNEL_LIMIT, InputError, read_text

    try:
        st = kernel.stat()
    except OSError as e:
        raise ScaffoldError(f"cannot read the kernel {kernel}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ScaffoldError(f"the kernel {kernel} is not a regular file (a device, a FIFO, a folder): give a .cu file")
    try:
        return read_text(kernel, KERNEL_LIMIT)
    except InputError as e:
        raise ScaffoldError(f"the kernel {e}") from None
    except OSError as e:
        raise ScaffoldError(f"cannot read the kernel {kernel}: {e.strerror or e}") from None


def new_family(
    name: str, folder: Path, kernel: Path | None = None, link: bool = False, entry: str | None = None
) -> Path:
    """Write the family folder ``folder/name``; returns it. Raises ScaffoldError (nothing is written then).

    ``entry``: the kernel's name among the file's (choose_entry). ``link``: kernel.cu is a relative symbolic
    link to ``kernel`` (one source: evo builds the file your engine builds, and ``evo export --tree`` patches
    that file), else a copy. Either way, the folders the kernel's includes resolve from (its own folder, an
    include root above it: find_include_roots) go into the family's ``include_dirs``."""
    if not _NAME.fullmatch(name):
        raise ScaffoldError(f"{name!r} cannot name a family (letters, digits and _; it is also the kernel's name)")
    dest = folder / name
    if dest.exists():
        raise ScaffoldError(f"{dest} exists; evo new never writes into an existing folder")
    cls = "".join(p.capitalize() for p in name.split("_") if p) or "Family"
    files: dict[str, str] = {}
    if kernel is None:
        if entry is not None:
            raise ScaffoldError("--entry names a kernel of --kernel FILE: give the file too")
        values = {"name": name, "cls": cls, "description": "starter: out = x * scale + y in bf16 (replace me)"}
        for f in ("kernel.cu", "family.py", "evo.yaml", "test_family.py"):
            files[f] = (TEMPLATES / f).read_text().format(**values)
    else:
        src = _read_kernel(kernel)
        chosen = choose_entry(read_entries(src), kernel, name, entry)
        dest_abs = (folder / name).resolve()
        roots = find_include_roots(kernel, src)
        include_dirs = _include_dirs(roots, kernel, dest_abs) + _torch_headers(roots)
        if not link:
            files["kernel.cu"] = src
        values = _stub_values(name, cls, kernel, chosen, include_dirs)
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
