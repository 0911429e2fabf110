"""Kernel launches through the driver's ``cuLaunchKernelEx``, for the launch attributes a CuPy RawKernel call
cannot pass: programmatic dependent launch (PDL); and for kernels that take a value by value (arg_types ``s``: the
driver copies each parameter's bytes, as many as the cubin says it takes, from the pointer it is given).

With PDL (``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``) a launch may begin while the launch before it
on the stream is still running: its blocks are scheduled once every block of the previous grid has executed
``griddepcontrol.launch_dependents`` or exited, and ``griddepcontrol.wait`` in the kernel holds a thread until the
previous grid has completed and its memory is visible. A kernel launched so must wait before it reads anything the
previous kernel may write, and before its own writes; what it does before the wait (set-up, reading weights that
no kernel writes) overlaps the previous kernel's tail and the time between launches. Stream capture records the
attribute as a programmatic edge of the graph (CUDA 12.3 and later).

ctypes, not a new dependency: the driver library is already loaded by CuPy and torch, and one entry point with two
structures does not justify cuda-python. The structures follow cuda.h (CUDA 12.0 and later); their sizes are
checked on import.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from harness.kernel_params import struct_bytes

CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _AttrValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("i", ctypes.c_int)]


class _Attr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttrValue)]


class _Config(ctypes.Structure):
    _fields_ = [
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_Attr)),
        ("numAttrs", ctypes.c_uint),
    ]


# cuda.h: CUlaunchAttribute is 8 + 64 bytes, CUlaunchConfig 7 uints, a stream, a pointer and a uint (56 bytes)
assert ctypes.sizeof(_Attr) == 72 and ctypes.sizeof(_Config) == 56

_ARG_TYPES: dict[str, Any] = {
    "p": ctypes.c_uint64,
    "i": ctypes.c_int32,
    "l": ctypes.c_int64,
    "f": ctypes.c_float,
    "d": ctypes.c_double,
}
_lib = None


def _driver():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuLaunchKernelEx.restype = ctypes.c_int
        lib.cuLaunchKernelEx.argtypes = [
            ctypes.POINTER(_Config),
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_void_p),
        ]
        lib.cuGetErrorString.restype = ctypes.c_int
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _lib = lib
    return _lib


def pack_args(types: str, values: Sequence[Any]):
    """The kernel's parameters as cuLaunchKernelEx takes them: an array of pointers to each value.

    Returns (array, holders); the holders must outlive every launch that uses the array."""
    if len(types) != len(values):
        raise ValueError(f"{len(values)} kernel arguments for types {types!r}")
    holders: list[Any] = []  # ctypes scalars of the types in _ARG_TYPES, byte arrays for s
    for t, v in zip(types, values):
        if t == "s":  # a value passed by value: the driver copies as many bytes as the parameter takes
            b = struct_bytes(v)
            if b is None:
                raise ValueError(f"a {type(v).__name__} is no value to pass by value (bytes, numpy, ctypes)")
            holders.append((ctypes.c_char * max(1, len(b))).from_buffer_copy(b or b"\0"))
        elif t in _ARG_TYPES:
            holders.append(_ARG_TYPES[t](float(v) if t in "fd" else int(v)))
        else:
            raise ValueError(f"unknown kernel argument type {t!r}")
    arr = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
    return arr, holders


def launch_config(grid, block, shared_bytes: int, stream_ptr: int, *, pdl: bool):
    """A CUlaunchConfig (and its attribute array, to keep alive beside it)."""
    attrs = (_Attr * 1)()
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attrs[0].value.i = 1
    cfg = _Config(*grid, *block, shared_bytes, ctypes.c_void_p(stream_ptr or None), attrs, 1 if pdl else 0)
    return cfg, attrs


def launcher(function_ptr: int, grid, block, shared_bytes: int, types: str, values: Sequence[Any], *, pdl: bool):
    """A callable ``launch(stream_ptr)`` that launches the CUfunction ``function_ptr`` with these arguments."""
    lib = _driver()
    arr, holders = pack_args(types, values)

    def launch(stream_ptr: int) -> None:
        cfg, attrs = launch_config(grid, block, shared_bytes, stream_ptr, pdl=pdl)
        rc = lib.cuLaunchKernelEx(ctypes.byref(cfg), ctypes.c_void_p(function_ptr), arr, None)
        if rc:
            msg = ctypes.c_char_p()
            lib.cuGetErrorString(rc, ctypes.byref(msg))
            raise RuntimeError(f"cuLaunchKernelEx: error {rc} ({(msg.value or b'?').decode()})")

    launch.holders = (arr, holders)  # type: ignore[attr-defined]
    return launch
