"""Which compiler builds a Builder's modules: NVRTC, nvcc, or ``auto`` (NVRTC, and nvcc where NVRTC cannot compile
the kernel as written).

``auto`` decides once per Builder, at its first build, from the family's baseline genome (so every process of a
campaign, compile-ahead workers included, decides alike and every genome of a campaign is built by one compiler):
NVRTC when it compiles the baseline; else nvcc when there is one and it compiles it, or when NVRTC's failure is one
nvcc does not have (a host header, an nvcc-only option); else NVRTC, whose error the build reports. The decision is
said once in ``Builder.route_note``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.nvcc import GET_NVCC, NvccIncludes, build_nvcc, find_nvcc, nvcc_or_error

if TYPE_CHECKING:
    from harness.build import Builder, Module

COMPILERS = ("auto", "nvrtc", "nvcc")


def nvcc_module(b: Builder, source: str, entry: str, key: str) -> Module:
    """One resolved source compiled (or fetched from the cache) by nvcc, as a Module like NVRTC's."""
    from harness.build import Includes, Module, _debug_opts, pre_includes, source_identity

    r = build_nvcc(
        source, entry, b.arch, b.compile_options, NvccIncludes(b._local, b._origin, b.torch_headers), _debug_opts()
    )
    # the same identity as on NVRTC's route: the text and the family's headers it includes
    headers, _ = Includes(b._local, b._origin).scan(source, pre_includes(b.compile_options))
    return Module(
        key,
        source_identity(source, headers),
        r.cubin_sha256,
        r.sass_sha256,
        r.resources,
        r.cubin_path,
        r.log,
        cached=r.cached,
        compile_s=r.compile_s,
        function=r.function,
        compiler="nvcc",
    )


def _nvcc_can_help(error: str) -> bool:
    """An NVRTC failure that is NVRTC's, not the kernel's: a header it lacks, an option it does not take."""
    return "cannot open source file" in error or "unrecognized option" in error


def decide(b: Builder) -> tuple[str, str]:
    """(compiler, the one line that says it) for a Builder whose requested compiler is ``auto``."""
    from harness.build import BuildError, build_module, resolve_source

    if b.torch_headers:
        nvcc_or_error()
        return "nvcc", "compiler: nvcc (auto: torch_headers is on, and NVRTC cannot read torch's headers)"
    base = b.family.baseline()
    key, spec = next(iter(b.specs.items()), ("default", {}))
    source = resolve_source(b.family, base, spec, b.source_for(base), b.defines)
    entry = b.family.entry_expression(base, spec)
    try:
        build_module(source, entry, b.arch, key, b.nvrtc_options + b.compile_options, b.includes)
        return "nvrtc", "compiler: nvrtc (auto: NVRTC compiles the baseline)"
    except BuildError as e:
        why = str(e).removeprefix("compile error: ").split(" (", 1)[0][:160]
    if find_nvcc() is None:
        return "nvrtc", f"compiler: nvrtc (auto: NVRTC cannot compile the baseline, and no nvcc is here: {GET_NVCC})"
    note = f"compiler: nvcc (auto: NVRTC cannot compile the kernel as written: {why})"
    try:
        nvcc_module(b, source, entry, key)
    except BuildError:
        return ("nvcc", note) if _nvcc_can_help(why) else ("nvrtc", "compiler: nvrtc (auto: nvcc fails on it too)")
    return "nvcc", note
