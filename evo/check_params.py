"""`evo check`'s hold of a family's arguments on the compiled kernel: arg_types and kernel_args against the
parameter layout of each built module's cubin (harness/cubin.py), for any compiler and any signature.

The cubin decides count and sizes. The kernel's signature read as text (evo/scaffold.py) is only an extra: where it
can be read it names the parameter in a failure, and it tells letters of one size apart (an int given as f, a pointer
as l). Where the text cannot be read nothing is skipped: the cubin still holds every letter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evo.core.family import Family
from harness.cubin import CubinError, ParamLayout, read_param_layout
from harness.kernel_params import LETTERS, LETTERS_TEXT, layout_problem


def arg_types_problem(types: Any) -> str | None:
    """Why what arg_types() gave is no string of known letters, or None."""
    if not isinstance(types, str) or set(types) - set(LETTERS):
        return f"arg_types gives {types!r}: one letter per argument, {LETTERS_TEXT}"
    return None


def read_layout(mod: Any) -> tuple[ParamLayout | None, str | None]:
    """(the layout of a built module's kernel, None) or (None, why it could not be read)."""
    try:
        return read_param_layout(mod.cubin_path, mod.function), None
    except CubinError as e:
        return None, f"could not read the parameter layout of {mod.function} from its cubin ({e})"


def signature(fam: Family) -> list[str] | None:
    """The entry's parameters as written in kernel.cu, where the text reader can read them without doubt (one
    signature, no macros or #if in it), else None."""
    from evo.scaffold import opaque_params, read_entries, split_params

    name = entry_name(fam)
    try:
        found = [e for e in read_entries(fam.source()) if e.name == name or e.name.split("::")[-1] == name]
    except OSError:
        return None
    signatures = {tuple(split_params(e.params)) for e in found}
    if len(signatures) != 1 or any(opaque_params(e.params) for e in found):
        return None
    return list(signatures.pop())


def entry_name(fam: Family) -> str:
    return fam.entry.split("<", 1)[0].strip().lstrip(":")


def hold(
    fam: Family, types: str, layout: ParamLayout, values: Sequence[Any] | None = None, params: list[str] | None = None
) -> str | None:
    """Why ``types`` (and ``values``, kernel_args, where given) do not fit ``layout``, in one line, or None.
    ``params``: :func:`signature`'s reading, used where it has as many parameters as the cubin."""
    from evo.scaffold import param_letter

    text = params if params is not None and len(params) == len(layout.params) else None
    where = f"{entry_name(fam)} in {fam.kernel_path.name}"
    problem = layout_problem(
        types, layout, values, name=where, describe=lambda i: f" ({text[i]})" if text is not None else ""
    )
    if problem or text is None:
        return problem
    for i, (param, t) in enumerate(zip(text, types)):
        want = param_letter(param)
        if t != "s" and want in LETTERS and want != "s" and want != t:  # the same size, another kind
            return f"arg_types {types!r}: parameter {i} of {entry_name(fam)} ({param}) needs {want!r}, not {t!r}"
    return None
