"""A family's kernel arguments against the compiled kernel's parameters (harness/cubin.py's layout).

``arg_types()`` gives one letter per parameter: p pointer, i int32, l int64, f float32, d float64, and s: a trivially
copyable value passed by value (a ``Params`` struct, llama.cpp's ``uint3`` fast-division constants, a ``__half``),
whose ``kernel_args`` value is its bytes: ``bytes``/``bytearray``/``memoryview``, a numpy scalar (a structured
``np.void`` too) or array, or a ctypes object (Structure, Array, Union). Called by `evo check` on the CPU and by the
GPU backend once per loaded module, so that a letter short or an argument of the wrong size is one line, never a
launch that reads garbage.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from harness.cubin import ParamLayout

LETTERS = "pilfds"
SIZES = {"p": 8, "i": 4, "l": 8, "f": 4, "d": 8}  # s: the size of its value
LETTERS_TEXT = "p pointer, i int32, l int64, f float32, d float64, s a value passed by value (its bytes)"


def struct_bytes(v: Any) -> bytes | None:
    """The bytes of an ``s`` argument, None when ``v`` is none of the kinds an ``s`` takes (a tensor, a Python int:
    no size of their own)."""
    import numpy as np

    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    if isinstance(v, np.generic):  # np.void of a structured dtype, np.float16 for a __half, ...
        return v.tobytes()
    if isinstance(v, np.ndarray):
        return np.ascontiguousarray(v).tobytes()
    if isinstance(v, ctypes.Structure | ctypes.Union | ctypes.Array):
        return ctypes.string_at(ctypes.addressof(v), ctypes.sizeof(v))
    return None


def value_size(t: str, v: Any) -> int:
    """Bytes the launcher copies for argument ``v`` of letter ``t`` (an ``s`` that is no value: -1)."""
    if t == "s":
        b = struct_bytes(v)
        return -1 if b is None else len(b)
    return SIZES[t]


def layout_problem(
    types: str,
    layout: ParamLayout,
    values: Sequence[Any] | None = None,
    *,
    name: str = "",
    describe: Callable[[int], str] = lambda i: "",
) -> str | None:
    """Why ``types`` (and, given, ``values``: kernel_args) do not fit ``layout``, in one line, or None.

    ``name``: how to name the kernel ("rms_norm in kernel.cu"); ``describe(i)``: words about parameter i to add
    (" (int n)", from the source where it can be read). Sizes decide: i for a 4-byte float or p for an 8-byte
    integer fit and are left to the caller. An ``s`` letter is held to its value's size only when values are given.
    """
    params = layout.params
    who = name or layout.function
    if len(types) != len(params):
        sizes = ", ".join(str(p.size) for p in params) or "none"
        return f"arg_types {types!r} has {len(types)} letters; {who} takes {len(params)} parameters (cubin: {sizes} B)"
    for i, (t, p) in enumerate(zip(types, params)):
        if t == "s" and values is None:
            continue
        n = value_size(t, values[i]) if values is not None else SIZES[t]
        if n != p.size:
            what = f"kernel_args[{i}] gives {n} B" if t == "s" else f"{t!r} passes {n} B"
            if t in "il" and p.size < 4:
                what += " (a bool, char or short takes 's' with a numpy scalar of its size: np.int8(v), np.int16(v))"
            return (
                f"arg_types {types!r}: parameter {i} of {who}{describe(i)} is {p.size} B at offset {p.offset} in the "
                f"cubin; {what}"
            )
    return None
