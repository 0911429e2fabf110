"""Which compiler builds a Builder's modules: NVRTC, nvcc, or ``auto`` (NVRTC, and nvcc where NVRTC cannot compile
the kernel as written).

``auto`` decides once per Builder, from the first module it builds (a campaign's and `evo check`'s is the baseline's),
and keeps it, so every genome of a campaign is built by one compiler: NVRTC when it compiles that module; else nvcc
when there is one and it compiles it, or when NVRTC's failure is one nvcc does not have (a host header, an engine's
nvcc-only option); else NVRTC, whose error the build reports. What cannot be compiled by NVRTC as written is so for
every genome of a kernel (its headers and options are the same), so compile-ahead processes decide alike. The
decision is said once in ``Builder.route_note``.
"""

from __future__ import annotations

import re
from typing import Any

from harness.errors import BuildError
from harness.hints import nvrtc_hint
from harness.nvcc import GET_NVCC, find_nvcc, nvcc_or_error

COMPILERS = ("auto", "nvrtc", "nvcc")


def _nvcc_can_help(error: str, compile_options: tuple[str, ...]) -> bool:
    """An NVRTC failure that is NVRTC's, not the kernel's: a host header it lacks, an engine's option it does not
    take (the ones whose hint says to compile with nvcc; a header of the engine's not found, or an nvrtc_option NVRTC
    refuses, is the user's to fix)."""
    m = re.search(r"unrecognized option (\S+)", error)
    if m:
        return m.group(1) in compile_options or m.group(1).split("=", 1)[0] in compile_options
    return "compile with nvcc" in nvrtc_hint(error)


# (compiler or None, the line that says it, the module built on the way, the error to report)
Decision = tuple[str | None, str, Any, BuildError | None]


def decide(b: Any, source: str, entry: str, key: str) -> Decision:
    """(compiler, the one line that says it, the module built on the way, or the error to report) for a Builder whose
    requested compiler is ``auto`` (a harness.build.Builder: it builds with its ``nvrtc_module`` and ``nvcc_module``),
    deciding on its first module (``source``, ``entry``, ``key``). The compiler is None (undecided: the next module
    decides) when both compilers fail on it and NVRTC's error is the kernel's."""
    if b.torch_headers:
        nvcc_or_error()
        return "nvcc", "compiler: nvcc (auto: torch_headers is on, and NVRTC cannot read torch's headers)", None, None
    try:
        m = b.nvrtc_module(source, entry, key)
        return "nvrtc", "compiler: nvrtc (auto: NVRTC compiles it)", m, None
    except BuildError as e:
        nvrtc_error = e
    error = str(nvrtc_error)
    limit = _nvcc_can_help(error, b.compile_options)
    if "unrecognized option" in error and not limit:  # an nvrtc_option of the user's: theirs to fix
        return "nvrtc", "compiler: nvrtc (auto: NVRTC refuses one of nvrtc_options)", None, nvrtc_error
    if find_nvcc() is None:
        return (
            "nvrtc",
            f"compiler: nvrtc (auto: NVRTC cannot compile it, and no nvcc is here: {GET_NVCC})",
            None,
            nvrtc_error,
        )
    why = error.removeprefix("compile error: ").split(" (", 1)[0][:160]
    note = f"compiler: nvcc (auto: NVRTC cannot compile the kernel as written: {why})"
    try:
        return "nvcc", note, b.nvcc_module(source, entry, key), None
    except BuildError as e:
        # NVRTC lacks what the kernel needs: nvcc's error is the one to fix; else both fail on the kernel itself
        return ("nvcc", note, None, e) if limit else (None, "", None, nvrtc_error)
