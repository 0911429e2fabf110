"""A family's kernel.cu resolved for one genome: its knob values written as ``#define`` lines at the top and every
preprocessor conditional that depends only on knobs decided and removed (:func:`resolved_kernel`).

A source transform beside the ideas: `evo export` (evo/report/export.py, which re-exports these names) writes each
step's kernel with it, and the outside proposer (outside.py) shows the model the champion's resolved kernel.
Conditionals on a geometry's compile-time parameters (its specialization) stay decided by the build.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evo.core.family import Family

_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")


class _Unknown(Exception):
    pass


def knob_macros(family: Family, genome: Mapping[str, Any], specs: Sequence[Mapping[str, Any]] = ()) -> dict[str, int]:
    """Knob macros of ``genome`` as numbers (string values through the family's value constants; a string that
    names no constant is left out, so the #if that reads it stays undecided rather than guessed).

    ``specs``: the specializations the campaign built (its geometries'). A macro the family derives from the
    genome *and* a geometry (fp4_matvec's EVO_MINB) is resolved only where every specialization gives it the same
    value; one that differs, or that needs a geometry when none is given, is left out, so the exported kernel keeps
    kernel.cu's conditional and default for it. The specialization's own parameters are never resolved."""
    values = family.value_macros()
    out: dict[str, int] = dict(values)
    for name, val in geometry_free_defines(family, genome, specs).items():
        if not isinstance(val, str):
            out[name] = int(val)
        elif val in values:
            out[name] = values[val]
    return out


def geometry_free_defines(
    family: Family, genome: Mapping[str, Any], specs: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The family's defines for ``genome`` that are one value for all of ``specs`` (see :func:`knob_macros`)."""
    found: list[dict[str, Any]] = []
    params: set[str] = set()
    for spec in specs or ({},):
        params |= {f"EVO_{n.upper()}" for n in spec}
        try:
            found.append(dict(family.defines(genome, spec)))
        except (KeyError, TypeError, ValueError, IndexError):  # derived from a geometry it was not given
            found.append(dict(Family.defines(family, genome, {})))
    first = found[0]
    return {k: v for k, v in first.items() if k not in params and all(d.get(k, object()) == v for d in found[1:])}


def geometry_defines(
    family: Family, genome: Mapping[str, Any], specs: Sequence[Mapping[str, Any]]
) -> dict[str, list[tuple[str, Any]]]:
    """Derived macros whose value differs between ``specs``: name -> [(specialization, value)], for the reader."""
    free = geometry_free_defines(family, genome, specs)
    out: dict[str, list[tuple[str, Any]]] = {}
    for spec in specs:
        label = ", ".join(f"{k}={v}" for k, v in spec.items()) or "(no parameters)"
        try:
            d = family.defines(genome, spec)
        except (KeyError, TypeError, ValueError, IndexError):
            continue
        params = {f"EVO_{n.upper()}" for n in spec}
        for k, v in d.items():
            if k not in free and k not in params:
                out.setdefault(k, []).append((label, v))
    return out


def _eval(expr: str, macros: Mapping[str, int]) -> bool:
    """Evaluate a #if expression; raise _Unknown when it depends on a macro that is not a knob."""
    expr = re.sub(r"//.*$", "", expr).strip()
    expr = re.sub(
        r"defined\s*\(?\s*(\w+)\s*\)?", lambda m: "1" if m.group(1) in macros else f"__undef_{m.group(1)}", expr
    )
    py = expr.replace("&&", " and ").replace("||", " or ")
    py = re.sub(r"!(?!=)", " not ", py)

    class Env(dict):
        def __missing__(self, key: str) -> Any:
            raise _Unknown(key)

    try:
        return bool(eval(py, {"__builtins__": {}}, Env(macros)))  # noqa: S307 - preprocessor arithmetic only
    except _Unknown:
        raise
    except Exception as e:  # syntax the resolver does not know: keep the directive
        raise _Unknown(str(e)) from None


def _substitute(line: str, macros: Mapping[str, int]) -> str:
    """A kept directive: write the knob macros it names as numbers, so it no longer needs their #defines."""
    return re.sub(r"\b(EVO_\w+)\b", lambda m: str(macros[m.group(1)]) if m.group(1) in macros else m.group(1), line)


def resolve_conditionals(source: str, macros: Mapping[str, int]) -> str:
    """Drop every #if/#ifdef/#ifndef block whose condition is decided by ``macros``; keep the others."""
    out: list[str] = []
    # Stack entries: (resolved, branch_taken_already, emitting_now, parent_emitting)
    stack: list[list[Any]] = []

    def emitting() -> bool:
        return all(e[2] for e in stack)

    for line in source.splitlines(keepends=True):
        m = _DIRECTIVE.match(line)
        if not m:
            if emitting():
                out.append(line)
            continue
        kind, rest = m.group(1), m.group(2)
        if kind in ("if", "ifdef", "ifndef"):
            try:
                if kind == "if":
                    val = _eval(rest, macros)
                else:
                    name = rest.strip().split()[0]
                    if name not in macros:
                        raise _Unknown(name)
                    val = kind == "ifdef"
                stack.append([True, val, val])
            except _Unknown:
                stack.append([False, False, True])
                if emitting():
                    out.append(_substitute(line, macros))
        elif kind == "elif":
            top = stack[-1]
            if not top[0]:
                if all(e[2] for e in stack[:-1]):
                    out.append(_substitute(line, macros))
                continue
            try:
                val = (not top[1]) and _eval(rest, macros)
            except _Unknown:
                # A knob-decided chain turns into an undecided one: keep the rest as a plain #if.
                top[0], top[2] = False, True
                if all(e[2] for e in stack[:-1]) and not top[1]:
                    out.append(_substitute(line, macros).replace("#elif", "#if", 1))
                    top.append("opened")
                continue
            top[1] = top[1] or val
            top[2] = val
        elif kind == "else":
            top = stack[-1]
            if not top[0]:
                top[2] = True
                if all(e[2] for e in stack[:-1]):
                    out.append(line)
                continue
            top[2] = not top[1]
            top[1] = True
        else:  # endif
            top = stack.pop()
            if (not top[0]) and all(e[2] for e in stack):
                out.append(line)
    return "".join(out)


def resolved_kernel(
    family: Family, genome: Mapping[str, Any], source: str | None = None, specs: Sequence[Mapping[str, Any]] = ()
) -> str:
    macros = knob_macros(family, genome, specs)
    src = source if source is not None else family.source()
    body = resolve_conditionals(src, macros)
    body = re.sub(r"\n{3,}", "\n\n", body)
    # only the macros the kernel reads (a template-parameter knob has none: its instantiation names it)
    knob_names = {f"EVO_{k.name.upper()}" for k in family.knobs}
    knob_lines = [
        f"#define EVO_{k.name.upper()} {macros[f'EVO_{k.name.upper()}']}  // {k.name} = {genome[k.name]}"
        for k in family.knobs
        if isinstance(macros.get(f"EVO_{k.name.upper()}"), int) and f"EVO_{k.name.upper()}" in src
    ]
    consts = family.value_macros()
    knob_lines += [
        f"#define {name} {val}  // derived by the family from this step's knobs (one value at every geometry)"
        for name, val in macros.items()
        if name not in knob_names and name not in consts and re.search(rf"\b{name}\b", src)
    ]
    knob_lines += [
        f"// {name}: set per geometry by the family ({'; '.join(f'{lb}: {v}' for lb, v in per)}); "
        "kernel.cu's conditional for it stays"
        for name, per in geometry_defines(family, genome, specs).items()
        if re.search(rf"\b{name}\b", src)
    ]
    if not knob_lines:
        return body
    head = f"// {family.name}: knob values of this step (evo export)\n" + "\n".join(knob_lines) + "\n\n"
    return head + body
