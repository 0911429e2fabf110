"""What a cubin (NVIDIA's ELF64 file of machine code) says about its kernels, read on the CPU.

A cubin holds, per kernel, a ``.nv.info.<function>`` section of attribute records (EIATTR_*). The parameter records
are what the CUDA driver itself uses to copy a launch's arguments into the kernel's parameter bank: one per
parameter, with its ordinal, its byte offset and its size. So the layout read here is the kernel's signature as the
compiler lowered it, whatever the source looked like (macros, ``enable_if_t`` return types, default arguments,
structs by value), for NVRTC and nvcc cubins alike.

Record encoding (checked against ``cuobjdump -elf`` of NVRTC and nvcc cubins, CUDA 13.0, sm_90):

- a record is ``u8 format, u8 attribute``, then for EIFMT_SVAL (0x04) ``u16 size`` and that many bytes; every
  other format (EIFMT_NVAL 0x01, EIFMT_BVAL 0x02, EIFMT_HVAL 0x03) holds its value in the next 2 bytes;
- EIATTR_KPARAM_INFO (0x17): ``u32 index, u16 ordinal, u16 offset, u32 flags``, the size in bytes being
  ``flags >> 18`` (bits 12-16 the constant bank, 0x1f);
- EIATTR_KPARAM_INFO_V2 (0x45), what ptxas writes when the parameters pass 4 KiB (CUDA 12.1's large kernel
  parameters): ``u32 index, u16 ordinal, u16 offset, u16 size, u16 flags``;
- EIATTR_CBANK_PARAM_SIZE (0x19, EIFMT_HVAL): the parameters' total bytes; EIATTR_PARAM_CBANK (0x0a):
  ``u32 symbol, u16 offset in the bank, u16 size``.

A kernel without parameters has no parameter records at all (and no EIATTR_CBANK_PARAM_SIZE).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

EIFMT_SVAL = 0x04
EIATTR_PARAM_CBANK, EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE, EIATTR_KPARAM_INFO_V2 = 0x0A, 0x17, 0x19, 0x45


class CubinError(Exception):
    """The cubin cannot say what was asked (one line)."""


class Section(NamedTuple):
    name: str
    offset: int
    size: int
    info: int  # sh_info: for a .nv.info.<function> section, the index of the function's code section


@dataclass(frozen=True)
class Param:
    """One kernel parameter as the driver copies it: its position, its byte offset in the parameter bank, its size."""

    ordinal: int
    offset: int
    size: int


@dataclass(frozen=True)
class ParamLayout:
    """A kernel's parameters in order, and their total bytes (alignment padding included)."""

    function: str
    params: tuple[Param, ...]
    total: int


def elf_sections(cubin: bytes) -> list[Section]:
    """Every section of an ELF64 cubin; CubinError for anything else."""
    if cubin[:4] != b"\x7fELF" or len(cubin) < 0x40 or cubin[4] != 2:
        raise CubinError("not an ELF64 cubin")
    try:
        (e_shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        raw = []
        for i in range(e_shnum):
            name, _t, _f, _a, off, size, _link, info = struct.unpack_from("<IIQQQQII", cubin, e_shoff + i * e_shentsize)
            raw.append((name, off, size, info))
        str_off = raw[e_shstrndx][1]
        return [
            Section(cubin[str_off + n : cubin.index(b"\0", str_off + n)].decode(), o, sz, inf) for n, o, sz, inf in raw
        ]
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
        raise CubinError(f"a damaged cubin ({e})") from None


def nv_info_records(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(format, attribute, value) of each record of an .nv.info section: an EIFMT_SVAL's payload, else the 2 bytes
    the record holds."""
    i = 0
    while i + 4 <= len(data):
        fmt, attr = data[i], data[i + 1]
        if fmt == EIFMT_SVAL:
            (n,) = struct.unpack_from("<H", data, i + 2)
            yield fmt, attr, data[i + 4 : i + 4 + n]
            i += 4 + n
        else:
            yield fmt, attr, data[i + 2 : i + 4]
            i += 4


def _param(attr: int, value: bytes) -> Param:
    if attr == EIATTR_KPARAM_INFO:
        _index, ordinal, offset, flags = struct.unpack_from("<IHHI", value)
        return Param(ordinal, offset, flags >> 18)
    _index, ordinal, offset, size = struct.unpack_from("<IHHH", value)
    return Param(ordinal, offset, size)


def param_layout(cubin: bytes, function: str) -> ParamLayout:
    """The parameter layout of ``function`` (its symbol: a template's lowered name) in ``cubin``; CubinError where
    the cubin has no attributes for it or they do not add up (the layout must never be guessed)."""
    sec = next((s for s in elf_sections(cubin) if s.name == f".nv.info.{function}"), None)
    if sec is None:
        raise CubinError(f"no .nv.info.{function} section in the cubin")
    params: dict[int, Param] = {}
    total = None
    for fmt, attr, value in nv_info_records(cubin[sec.offset : sec.offset + sec.size]):
        if attr in (EIATTR_KPARAM_INFO, EIATTR_KPARAM_INFO_V2) and fmt == EIFMT_SVAL and len(value) >= 12:
            p = _param(attr, value)
            params[p.ordinal] = p
        elif attr == EIATTR_CBANK_PARAM_SIZE and fmt != EIFMT_SVAL:
            (total,) = struct.unpack("<H", value)
        elif attr == EIATTR_PARAM_CBANK and fmt == EIFMT_SVAL and len(value) >= 8 and total is None:
            total = struct.unpack_from("<IHH", value)[2]
    ordered = tuple(params[k] for k in sorted(params))
    if [p.ordinal for p in ordered] != list(range(len(ordered))):
        raise CubinError(f"{function}'s parameter records skip an ordinal ({[p.ordinal for p in ordered]})")
    end = max((p.offset + p.size for p in ordered), default=0)
    if total is None:
        total = end
    if total < end or (total and not ordered):
        raise CubinError(f"{function}'s {len(ordered)} parameter records (ending at {end} B) and size {total} B differ")
    return ParamLayout(function, ordered, total)


def read_param_layout(path: str | Path, function: str) -> ParamLayout:
    """:func:`param_layout` of the cubin file at ``path``."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise CubinError(f"cannot read the cubin {path}: {e}") from None
    return param_layout(data, function)
