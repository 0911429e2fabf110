"""`evo new NAME [--kernel FILE]`: a family folder to start from.

Without ``--kernel`` the folder holds a working starter family (a bf16 kernel with template-parameter knobs) that
`evo check` passes as it is: a shape to replace with your own. With ``--kernel FILE`` the kernel is copied in, its
entry point and template parameters are read from it, and family.py's methods are stubs that say, as `evo check`
does, which TODO comes next. Nothing that exists is overwritten.
"""

from __future__ import annotations

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

    def expression(self) -> str:
        if not self.template:
            return self.name
        return f"{self.name}<" + ", ".join("{" + knob_name(n) + "}" for _, n, _ in self.template) + ">"


def knob_name(param: str) -> str:
    """BLOCK_SIZE -> block_size, NumSplits -> num_splits."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", param)
    return s.lower()


_GLOBAL = re.compile(
    r"(?P<tmpl>template\s*<(?P<targs>[^<>]*(?:<[^<>]*>[^<>]*)*)>\s*)?"
    r"(?:extern\s+\"C\"\s+)?(?:static\s+)?__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    r"(?:void\s+)?(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^)]*)\)",
    re.S,
)


def read_entries(source: str) -> list[Entry]:
    """The ``__global__`` functions of a CUDA source, with their template parameters (comments ignored)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    out = []
    for m in _GLOBAL.finditer(text):
        tparams = []
        for part in filter(None, (p.strip() for p in (m.group("targs") or "").split(","))):
            default = None
            if "=" in part:
                part, default = (x.strip() for x in part.split("=", 1))
            bits = part.split()
            tparams.append((" ".join(bits[:-1]) or "int", bits[-1], default))
        out.append(Entry(m.group("name"), tuple(tparams), " ".join(m.group("params").split())))
    return out


def _arg_types(params: str) -> str:
    letters = []
    for p in filter(None, (x.strip() for x in params.split(","))):
        if "*" in p:
            letters.append("p")
        elif re.search(r"\b(float)\b", p):
            letters.append("f")
        else:
            letters.append("i")
    return "".join(letters)


def _knob_line(ttype: str, name: str, default: str | None) -> str:
    k = knob_name(name)
    if ttype == "bool":
        d = "True" if default in ("true", "1") else "False"
        return f'        Knob("{k}", (False, True), {d}, doc="{name}"),\n'
    if default is not None and re.fullmatch(r"-?\d+", default):
        return (
            f'        Knob("{k}", ({default},), {default}, doc="TODO: the values of {name} to search '
            f'(default {default})"),\n'
        )
    return (
        f'        Knob("{k}", (0,), 0, doc="TODO: the values of template parameter {ttype} {name} and its default"),\n'
    )


def new_family(name: str, folder: Path, kernel: Path | None = None) -> Path:
    """Write the family folder ``folder/name``; returns it. Raises ScaffoldError (nothing is written then)."""
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
        entry = next((x for x in entries if x.name == name), entries[0])
        knobs = (
            "".join(_knob_line(*t) for t in entry.template)
            or "        # TODO: knobs (template parameters or EVO_<KNOB> macros)\n"
        )
        values = {
            "name": name,
            "cls": cls,
            "kernel": kernel.name,
            "entry": entry.expression(),
            "arg_types": _arg_types(entry.params),
            "signature": entry.params.replace('"', "'"),
            "knobs": knobs,
        }
        files["kernel.cu"] = src
        files["family.py"] = (TEMPLATES / "family_stub.py").read_text().format(**values)
        files["evo.yaml"] = (
            (TEMPLATES / "evo.yaml")
            .read_text()
            .format(name=name)
            .replace(
                "  - {name: n16M, n: 16777216, weight: 1}\n"
                "  - {name: n64K, n: 65536, weight: 0}     # watched: must not regress\n",
                "  - {name: small, weight: 1}   # TODO: every geometry param of family.py, and a weight (0: watched)\n",
            )
        )
        files["test_family.py"] = (TEMPLATES / "test_family.py").read_text().format(name=name)
    dest.mkdir(parents=True)
    for f, text in files.items():
        (dest / f).write_text(text)
    return dest
