"""What to do about an NVRTC error a kernel written for nvcc meets, in the words of its remedy.

NVRTC has no host C/C++ library, no host headers (torch's, cuBLAS's...) and refuses some of nvcc's options: the
first remedy is always to compile with nvcc (harness/nvcc.py); an engine's own headers are never to be edited, and a
``<cuda/std/X>`` is offered only for kernel.cu's own include, and only where the CCCL headers evo picked have it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

_STD_INT = re.compile(r'identifier "(u?int(8|16|32|64)_t|u?intptr_t|size_t|ptrdiff_t)" is undefined')
_NO_FILE = re.compile(r'cannot open source file "([^"]+)"')
# The C and C++ standard library's headers (NVRTC has none: evo's std shim gives <cstdint>, <stdint.h>, <cstddef>,
# <stddef.h> only), and the prefixes of host libraries' headers an engine's kernel file reaches.
_STD_HEADERS = frozenset(
    "algorithm any array atomic bit bitset cassert cctype cerrno cfloat charconv chrono cinttypes climits clocale "
    "cmath codecvt complex concepts condition_variable cstdarg cstdio cstdlib cstring ctime cwchar deque exception "
    "execution filesystem forward_list fstream functional future initializer_list iomanip ios iosfwd iostream "
    "istream iterator limits list locale map memory mutex new numbers numeric optional ostream queue random ranges "
    "ratio regex scoped_allocator set shared_mutex source_location span sstream stack stdexcept streambuf string "
    "string_view system_error thread tuple type_traits typeindex typeinfo unordered_map unordered_set utility "
    "valarray variant vector version assert.h ctype.h errno.h float.h inttypes.h limits.h locale.h math.h "
    "signal.h stdarg.h stdbool.h stdio.h stdlib.h string.h time.h wchar.h unistd.h".split()
)
_HOST_PREFIXES = (
    "torch/",
    "c10/",
    "ATen/",
    "pybind11/",
    "tvm/",
    "dlpack/",
    "cublas",
    "cusparse",
    "cusolver",
    "cufft",
    "nccl",
    "cudnn",
    "cuda.h",
    "cuda_runtime.h",
    "nvml",
    "Python.h",
)
TO_NVCC = "compile with nvcc: `build: {compiler: nvcc}`"


def _cccl_std(name: str, dirs: Sequence[str]) -> str | None:
    """``<cuda/std/X>`` for a standard header, where the CCCL headers evo picked (``dirs``) hold it (else None)."""
    std = "c" + name[:-2] if name.endswith(".h") else name
    return std if any((Path(d) / "cuda" / "std" / std).is_file() for d in dirs) else None


def nvrtc_hint(error: str, cuda_dirs: Sequence[str] = ()) -> str:
    """What to do about an NVRTC error a kernel written for nvcc meets: first, compile it with nvcc (NVRTC has no
    host C/C++ library, no host headers, and refuses some of nvcc's options); never an edit of an engine's header.
    A ``<cuda/std/X>`` is offered only for kernel.cu's own include, and only where CCCL's folders among ``cuda_dirs``
    (those evo gives NVRTC) have it."""
    if "unrecognized option" in error:
        return f" (an nvcc option NVRTC does not take: {TO_NVCC}; NVRTC-only options go in nvrtc_options)"
    if _STD_INT.search(error):
        return " (NVRTC has no <cstdint>: #include <cuda/std/cstdint>, CCCL's, which evo puts on the include path)"
    m = _NO_FILE.search(error)
    if m and m.group(1).startswith(("torch/", "c10/", "ATen/")):
        return (
            " (torch's headers: compile with nvcc and torch's includes: `build: {compiler: nvcc, torch_headers: true}`)"
        )
    if m and (m.group(1) in _STD_HEADERS or m.group(1).startswith(_HOST_PREFIXES)):
        std = _cccl_std(m.group(1), cuda_dirs) if m.group(1) in _STD_HEADERS else None
        mine = re.match(r"\s*(?:\S*/)?kernel\.cu\(\d+\)", error) is not None  # included by kernel.cu itself
        alt = f"; or, in kernel.cu, #include <cuda/std/{std}> (CCCL's)" if std and mine else ""
        return f" (a host header, which NVRTC does not have: {TO_NVCC}{alt})"
    if m:
        return (
            " (searched: the family's folder, its include_dirs, the config's build.include_dirs, CUDA's headers;"
            " a header of your engine goes in one of those include_dirs)"
        )
    return ""
