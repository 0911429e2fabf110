"""Resolve a genome into CUDA source and compile it with NVRTC (through CuPy).

Compiling needs no GPU: CuPy's low-level ``cupy.cuda.nvrtc`` emits a cubin
for a named real architecture, and ptxas's ``-v`` report (registers, stack
frame, spills) comes back in the program log. Cubins are cached on disk by
the sha256 of source + options + NVRTC version.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from evo.family import Family, Geometry
from evo.records import Resources

DEFAULT_ARCH = "sm_90"


class BuildError(Exception):
    """NVRTC rejected the source; the message is the first error line of its log."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class PatchError(BuildError):
    """A unified diff does not apply to the source (the message names the failing hunk)."""


def apply_patch(source: str, patch: str, name: str = "kernel.cu") -> str:
    """``source`` with ``patch`` (a unified diff against ``name``) applied by ``git apply``; raises PatchError.

    The patch is applied in a scratch folder outside any repository (``--recount``: hunk line counts
    written by hand or by a language model need not be right; offsets are allowed, fuzz is not).
    """
    with tempfile.TemporaryDirectory(prefix="evo-patch-") as td:
        d = Path(td)
        (d / name).write_text(source)
        (d / "change.patch").write_text(patch if patch.endswith("\n") else patch + "\n")
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(d.parent), "LC_ALL": "C"}
        try:
            r = subprocess.run(["git", "apply", "--recount", "--whitespace=nowarn", "-v", "change.patch"], cwd=d,
                               env=env, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PatchError(f"git apply could not run: {e}") from None
        if r.returncode != 0:
            raise PatchError(patch_failure(r.stderr, name), r.stderr)
        extra = sorted(p.name for p in d.iterdir() if p.name not in (name, "change.patch"))
        if not (d / name).is_file():
            raise PatchError(f"the patch deletes {name}")
        if extra:
            raise PatchError(f"the patch creates {', '.join(extra)}; it may change {name} only")
        return (d / name).read_text()


def patch_failure(log: str, name: str = "kernel.cu") -> str:
    """One line from ``git apply -v``'s complaint: where it failed and the context it looked for."""
    lines = log.splitlines()
    searched: list[str] = []
    for i, ln in enumerate(lines):
        if ln.startswith("error: while searching for:"):
            for nxt in lines[i + 1:]:
                if nxt.startswith("error:") or (not nxt.strip() and searched):
                    break
                if nxt.strip():
                    searched.append(nxt.strip())
            break
    for ln in lines:
        m = re.match(r"error: patch failed: (.+):(\d+)", ln)
        if m:
            ctx = " | ".join(searched[:3])
            return (f"hunk at {m.group(1)}:{m.group(2)} does not apply"
                    + (f" (its context is not in the source: {ctx[:200]})" if ctx else ""))
    for ln in lines:
        m = re.match(r"error: (?:corrupt patch|patch fragment without header) at line (\d+)", ln)
        if m:
            return f"corrupt patch at line {m.group(1)}: {ln.split(': ', 1)[1][:160]}"
        if "No valid patches in input" in ln:
            return "not a unified diff: no hunks found"
        m = re.match(r"error: (.+): (No such file or directory|does not exist in index)", ln)
        if m:
            return f"the patch changes {m.group(1)}, not {name}"
    first = next((ln for ln in lines if ln.startswith(("error:", "fatal:"))), log.strip()[:200] or "unknown error")
    return first.split(": ", 1)[-1][:240]


@dataclass
class Module:
    """One compiled specialization of a genome."""

    spec_key: str
    source_sha256: str
    cubin_sha256: str
    sass_sha256: str
    resources: Resources
    cubin_path: str
    log: str = ""
    cached: bool = False
    compile_s: float = 0.0


@dataclass
class Built:
    """A genome compiled for every specialization its geometries need."""

    genome_key: str
    modules: dict[str, Module] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)  # spec_key -> resolved source

    @property
    def source_sha256(self) -> str:
        return _combine(m.source_sha256 for m in self.modules.values())

    @property
    def cubin_sha256(self) -> str:
        return _combine(m.cubin_sha256 for m in self.modules.values())

    @property
    def sass_sha256(self) -> str:
        return _combine(m.sass_sha256 for m in self.modules.values())

    @property
    def compile_s(self) -> float:
        return sum(m.compile_s for m in self.modules.values())


def _combine(parts) -> str:
    h = hashlib.sha256()
    for p in sorted(parts):
        h.update(p.encode())
    return h.hexdigest()


def spec_key(spec: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in sorted(spec.items())) or "default"


def resolve_source(family: Family, genome: Mapping[str, Any], spec: Mapping[str, Any],
                   base_source: str | None = None, extra_defines: Mapping[str, Any] | None = None) -> str:
    """The exact text NVRTC compiles: knob macros, the campaign's own (``extra_defines``), then the kernel."""
    lines = [f"// evo: family {family.name}, genome {json.dumps(dict(sorted(genome.items())), separators=(',', ':'))}"]
    for name, val in family.value_macros().items():
        lines.append(f"#define {name} {val}")
    for name, val in family.defines(genome, spec).items():
        lines.append(f"#define {name} {val}")
    for name, val in (extra_defines or {}).items():
        lines.append(f"#define {name} {val}")
    body = base_source if base_source is not None else family.source()
    return "\n".join(lines) + "\n#line 1 \"kernel.cu\"\n" + body


# ---------------------------------------------------------------------------
# ptxas report and SASS identity

_PROPS_RE = re.compile(r"Function properties for (\S+)")
_STACK_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


def parse_ptxas_report(log: str, entry: str) -> Resources:
    """Read the resource lines ptxas printed for ``entry``."""
    res = Resources()
    current = None
    found = False
    for line in log.splitlines():
        m = _PROPS_RE.search(line)
        if m:
            current = m.group(1)
            continue
        if "Compiling entry function" in line:
            current = line.split("'")[1] if "'" in line else current
            continue
        if current != entry:
            continue
        m = _STACK_RE.search(line)
        if m:
            res.stack_frame, res.spill_stores, res.spill_loads = map(int, m.groups())
            found = True
        m = _USED_RE.search(line)
        if m:
            res.registers = int(m.group(1))
            res.barriers = int(m.group(2) or 0)
            sm = _SMEM_RE.search(line)
            res.shared_static = int(sm.group(1)) if sm else 0
            found = True
    if not found:
        tail = " | ".join(ln.strip() for ln in log.splitlines() if ln.strip())[-400:]
        raise BuildError(f"no ptxas resource report for {entry} in the compile log: {tail or '(empty log)'}", log)
    return res


def sass_digest(cubin: bytes) -> str:
    """sha256 over the cubin's code sections (.text.*), names included.

    Two genomes whose machine code is the same share this digest even when
    their source text differs, so the second is never measured.
    """
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return hashlib.sha256(cubin).hexdigest()
    (e_shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        name, _type, _flags, _addr, sh_off, size = struct.unpack_from("<IIQQQQ", cubin, off)
        sections.append((name, sh_off, size))
    _, str_off, _ = sections[e_shstrndx]
    h = hashlib.sha256()
    for name, sh_off, size in sections:
        end = cubin.index(b"\0", str_off + name)
        sname = cubin[str_off + name:end]
        if sname.startswith(b".text."):
            h.update(sname + b"\0" + cubin[sh_off:sh_off + size])
    return h.hexdigest()


def _elf_sections(cubin: bytes) -> list[tuple[str, int, int, int]]:
    """(name, offset, size, sh_info) of every section of an ELF64 cubin."""
    (e_shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    raw = []
    for i in range(e_shnum):
        name, _t, _f, _a, off, size, _link, info = struct.unpack_from("<IIQQQQII", cubin, e_shoff + i * e_shentsize)
        raw.append((name, off, size, info))
    str_off = raw[e_shstrndx][1]
    return [(cubin[str_off + n:cubin.index(b"\0", str_off + n)].decode(), o, sz, inf) for n, o, sz, inf in raw]


EIATTR_FRAME_SIZE, EIATTR_REGCOUNT = 0x11, 0x2F


def resources_from_cubin(cubin: bytes, entry: str) -> Resources:
    """Registers and stack frame from the cubin's .nv.info attributes, for when no ptxas report came back.

    Spill bytes are not recorded in the cubin; a spill shows up as a larger stack frame, which the
    static gate compares too.
    """
    secs = _elf_sections(cubin)
    sym = next((inf for n, _o, _s, inf in secs if n == f".text.{entry}"), None)
    if sym is None:
        raise BuildError(f"no code section for {entry} in the cubin")
    res = Resources(report="cubin")
    for name, off, size, _inf in secs:
        if name == ".nv.info":
            data, i = cubin[off:off + size], 0
            while i + 4 <= len(data):
                fmt, attr = data[i], data[i + 1]
                if fmt == 0x04:  # EIFMT_SVAL: u16 size, payload
                    (n,) = struct.unpack_from("<H", data, i + 2)
                    payload, i = data[i + 4:i + 4 + n], i + 4 + n
                    if n == 8:
                        s_idx, val = struct.unpack_from("<II", payload)
                        if s_idx == sym and attr == EIATTR_REGCOUNT:
                            res.registers = val
                        elif s_idx == sym and attr == EIATTR_FRAME_SIZE:
                            res.stack_frame = val
                else:
                    i += 4
        elif name == f".nv.shared.{entry}":
            res.shared_static = max(0, size - 1024) if size >= 1024 else size  # sm_90 reserves 1 KiB
    return res


# ---------------------------------------------------------------------------
# Compiling


def cache_dir() -> Path:
    d = Path(os.environ.get("EVO_CACHE_DIR", Path.home() / ".cache" / "evo" / "cubins"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def nvrtc_version() -> str:
    from cupy.cuda import nvrtc

    major, minor = nvrtc.getVersion()
    return f"{major}.{minor}"


def detect_arch() -> str:
    """The running GPU's target (sm_XY), or sm_90 where no GPU is present."""
    try:
        import cupy

        major, minor = cupy.cuda.Device().compute_capability[0], cupy.cuda.Device().compute_capability[1:]
        return f"sm_{major}{minor}"
    except Exception:
        return DEFAULT_ARCH


def _debug_opts() -> list[str]:
    """EVO_LINEINFO=1: source lines in the cubin, so compute-sanitizer reports name kernel.cu's lines (a debugging
    aid; the SASS is unchanged, and the cache keeps such cubins apart)."""
    return ["--generate-line-info"] if os.environ.get("EVO_LINEINFO") == "1" else []


def compile_source(source: str, entry: str, arch: str, name: str = "kernel.cu") -> tuple[bytes, str, float]:
    """NVRTC: source -> (cubin, log, seconds). Raises BuildError with the first error line."""
    import time

    from cupy.cuda import nvrtc

    opts = [f"--gpu-architecture={arch}", "--ptxas-options=-v", "-std=c++17"] + _debug_opts()
    t0 = time.perf_counter()
    prog = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog).replace("\x00", "")
            first = next((ln.strip() for ln in log.splitlines() if "error" in ln), log.strip()[:200] or "unknown")
            raise BuildError(f"compile error: {first}", log) from None
        # Some NVRTC versions run ptxas lazily: ask for the cubin before the log.
        cubin = nvrtc.getCUBIN(prog)
        log = nvrtc.getProgramLog(prog).replace("\x00", "")
    finally:
        nvrtc.destroyProgram(prog)
    return cubin, log, time.perf_counter() - t0


def build_module(source: str, entry: str, arch: str, key: str) -> Module:
    """Compile (or fetch from the cache) one resolved source."""
    src_sha = hashlib.sha256(source.encode()).hexdigest()
    opts = "".join(f"|{o}" for o in _debug_opts())
    cache_key = hashlib.sha256(f"{src_sha}|{arch}|{nvrtc_version()}|{entry}{opts}".encode()).hexdigest()[:32]
    d = cache_dir()
    cubin_path, meta_path = d / f"{cache_key}.cubin", d / f"{cache_key}.json"
    if cubin_path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        return Module(key, src_sha, meta["cubin_sha256"], meta["sass_sha256"], Resources(**meta["resources"]),
                      str(cubin_path), meta.get("log", ""), cached=True)
    cubin, log, secs = compile_source(source, entry, arch)
    try:
        res = parse_ptxas_report(log, entry)
    except BuildError:
        # Seen on the H200 machine (its NVRTC, 2026-11-30): ~2% of compiles return an empty log.
        # Try once more, then read what the cubin itself records.
        cubin, log, secs2 = compile_source(source, entry, arch)
        secs += secs2
        try:
            res = parse_ptxas_report(log, entry)
        except BuildError:
            res = resources_from_cubin(cubin, entry)
    mod = Module(key, src_sha, hashlib.sha256(cubin).hexdigest(), sass_digest(cubin), res, str(cubin_path), log,
                 compile_s=secs)
    tmp = cubin_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(cubin)
    os.replace(tmp, cubin_path)
    meta = {"cubin_sha256": mod.cubin_sha256, "sass_sha256": mod.sass_sha256, "resources": asdict(res), "log": log}
    tmp = meta_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, meta_path)
    return mod


class Builder:
    """Turns genomes into compiled modules, one per specialization of the campaign's geometries."""

    def __init__(self, family: Family, geometries: list[Geometry], arch: str = "auto",
                 ideas: Mapping[str, Any] | None = None, defines: Mapping[str, Any] | None = None):
        self.family = family
        self.defines = dict(defines or {})  # the campaign's macros for every module (CampaignConfig.build_defines)
        self.geometries = geometries
        self.arch = detect_arch() if arch == "auto" else arch
        self.specs: dict[str, Mapping[str, Any]] = {}
        for g in geometries:
            s = family.specialization(g)
            self.specs.setdefault(spec_key(s), s)
        self._ideas = ideas

    @classmethod
    def for_config(cls, cfg: Any, arch: str | None = None, ideas: Mapping[str, Any] | None = None) -> "Builder":
        """The builder a campaign config asks for: its family, geometries, arch and build macros."""
        return cls(cfg.family, list(cfg.geometries), arch or cfg.arch, ideas=ideas, defines=cfg.build_defines)

    @property
    def ideas(self) -> Mapping[str, Any]:
        """slug -> :class:`evo.ideas.Idea` (a campaign sets its own; default: the family's ``ideas/`` folder)."""
        if self._ideas is None:
            from evo.ideas import load_folder_ideas

            self._ideas = load_folder_ideas(self.family)[0]
        return self._ideas

    @ideas.setter
    def ideas(self, book: Mapping[str, Any]) -> None:
        self._ideas = book

    def spec_of(self, geometry: Geometry) -> str:
        return spec_key(self.family.specialization(geometry))

    def source_for(self, genome: Mapping[str, Any], base_source: str | None = None) -> str:
        """The kernel text before the knob macros: ``base_source`` (else kernel.cu) with the genome's ideas applied.

        Raises :class:`evo.ideas.IdeaError` (a BuildError) when an idea is unknown, no longer applies, or
        does not apply together with another idea of the genome.
        """
        from evo.ideas import apply_ideas, idea_slugs

        body = base_source if base_source is not None else self.family.source()
        if idea_slugs(genome):
            body = apply_ideas(body, genome, self.ideas)
        return body

    def build(self, genome: Mapping[str, Any], base_source: str | None = None) -> Built:
        from evo.genome import Genome

        built = Built(Genome(genome).key)
        body = self.source_for(genome, base_source)
        for key, spec in self.specs.items():
            src = resolve_source(self.family, genome, spec, body, self.defines)
            built.source[key] = src
            built.modules[key] = build_module(src, self.family.entry, self.arch, key)
        return built
