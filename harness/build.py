"""Resolve a genome into CUDA source and compile it with NVRTC (through CuPy).

Compiling needs no GPU: CuPy's low-level ``cupy.cuda.nvrtc`` emits a cubin
for a named real architecture, and ptxas's ``-v`` report (registers, stack
frame, spills) comes back in the program log. Cubins are cached on disk by
the sha256 of source + options + NVRTC version, and of every header the
kernel includes from the family's folders (CUDA's own headers count by their
folder and version).

NVRTC searches, in order: the family's folder, its ``include_dirs``, the
campaign's, then CUDA's headers (CCCL's folder first): a CUDA toolkit's where
one of NVRTC's major version is installed, else the NVIDIA wheels' (found by
cuda-pathfinder).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import struct
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from evo.core.family import Family, Geometry
from evo.core.records import Resources
from harness.cubin import EIFMT_SVAL, nv_info_records
from harness.cubin import elf_sections as _elf_sections
from harness.errors import BuildError
from harness.hints import nvrtc_hint

DEFAULT_ARCH = "sm_90"


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
            r = subprocess.run(
                ["git", "apply", "--recount", "--whitespace=nowarn", "-v", "change.patch"],
                cwd=d,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
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
            for nxt in lines[i + 1 :]:
                if nxt.startswith("error:") or (not nxt.strip() and searched):
                    break
                if nxt.strip():
                    searched.append(nxt.strip())
            break
    for ln in lines:
        m = re.match(r"error: patch failed: (.+):(\d+)", ln)
        if m:
            ctx = " | ".join(searched[:3])
            return f"hunk at {m.group(1)}:{m.group(2)} does not apply" + (
                f" (its context is not in the source: {ctx[:200]})" if ctx else ""
            )
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
    # The kernel's symbol in the cubin, what get_function takes: the entry itself for an extern "C"
    # entry, the lowered (mangled) name NVRTC gave a template entry's instantiation.
    function: str = ""
    compiler: str = "nvrtc"  # which compiled it: "nvrtc", or "nvcc" (harness/nvcc.py)


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


def resolve_source(
    family: Family,
    genome: Mapping[str, Any],
    spec: Mapping[str, Any],
    base_source: str | None = None,
    extra_defines: Mapping[str, Any] | None = None,
) -> str:
    """The exact text NVRTC compiles: knob macros, the campaign's own (``extra_defines``), then the kernel."""
    # a launch_only knob is no part of the text: every value of it is one compile (and one cache entry)
    launch = {k.name for k in family.knobs if k.launch_only}
    code = {n: v for n, v in sorted(genome.items()) if n not in launch}
    lines = [f"// evo: family {family.name}, genome {json.dumps(code, separators=(',', ':'))}"]
    for name, val in family.value_macros().items():
        lines.append(f"#define {name} {val}")
    for name, val in family.defines(genome, spec).items():
        lines.append(f"#define {name} {val}")
    for name, val in (extra_defines or {}).items():
        lines.append(f"#define {name} {val}")
    body = base_source if base_source is not None else family.source()
    return "\n".join(lines) + '\n#line 1 "kernel.cu"\n' + body


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


def sass_digest(cubin: bytes, rename: Mapping[str, str] | None = None) -> str:
    """sha256 over the cubin's code sections (.text.*), names included.

    Two genomes whose machine code is the same share this digest even when
    their source text differs, so the second is never measured. ``rename``
    maps a section's function name to the one hashed: a template entry's
    instantiation is hashed under the template's name, so genomes whose
    template arguments give the same machine code share a digest as macro
    genomes do (an extern "C" entry's digest is unchanged).
    """
    renamed = {f".text.{a}".encode(): f".text.{b}".encode() for a, b in (rename or {}).items()}
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
        sname = cubin[str_off + name : end]
        if sname.startswith(b".text."):
            h.update(renamed.get(sname, sname) + b"\0" + cubin[sh_off : sh_off + size])
    return h.hexdigest()


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
            for fmt, attr, payload in nv_info_records(cubin[off : off + size]):
                if fmt == EIFMT_SVAL and len(payload) == 8:
                    s_idx, val = struct.unpack_from("<II", payload)
                    if s_idx == sym and attr == EIATTR_REGCOUNT:
                        res.registers = val
                    elif s_idx == sym and attr == EIATTR_FRAME_SIZE:
                        res.stack_frame = val
        elif name == f".nv.shared.{entry}":
            res.shared_static = max(0, size - 1024) if size >= 1024 else size  # sm_90 reserves 1 KiB
    return res


# ---------------------------------------------------------------------------
# Compiling


def cache_dir() -> Path:
    """EVO_CACHE_DIR, else $XDG_CACHE_HOME/evo/cubins (the XDG base-directory rule), else ~/.cache/evo/cubins."""
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    d = Path(os.environ.get("EVO_CACHE_DIR") or Path(xdg) / "evo" / "cubins")
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


# Options a family or a campaign may not give: evo's own target and cubin (ptxas's report in it is what the
# static gate reads), and include folders, which must come as include_dirs so their headers are keyed.
_REJECTED_OPTIONS = (
    (("--gpu-architecture", "-arch"), "evo sets the target architecture (the campaign's arch)"),
    (("-I", "--include-path"), "name include folders in include_dirs (their headers are part of the cache key)"),
    (("-dlto", "--dlink-time-opt", "-gen-lto"), "evo needs a cubin, not LTO IR"),
    (("--fdevice-syntax-only", "-fdevice-syntax-only"), "evo needs a cubin"),
)


def check_nvrtc_options(options: Sequence[str]) -> tuple[str, ...]:
    """``options`` (a family's or a campaign's) as given; BuildError naming the first that would take an option
    evo needs away (arch, the ptxas report, the cubin) or hide headers from the cache key."""
    for o in options:
        if not isinstance(o, str) or not o.strip():
            raise BuildError(f"nvrtc option {o!r} is not a non-empty string")
        for names, why in _REJECTED_OPTIONS:
            if any(o == n or o.startswith(n + "=") or (n == "-I" and o.startswith("-I")) for n in names):
                raise BuildError(f"nvrtc option {o!r} is not allowed: {why}")
    return tuple(options)


def _cuda_version(include: Path) -> str | None:
    """CUDART_VERSION of a folder of CUDA headers (e.g. "13000"), None when it holds none."""
    try:
        m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", (include / "cuda_runtime_api.h").read_text(errors="replace"))
    except OSError:
        return None
    return m.group(1) if m else None


def _with_cccl(include: Path) -> tuple[str, ...]:
    """CCCL's folder before the CUDA headers: CUDA 13 keeps cub/, thrust/ and cuda/std in include/cccl."""
    cccl = include / "cccl"
    return ((str(cccl),) if (cccl / "cuda" / "std" / "version").is_file() else ()) + (str(include),)


def _toolkit_roots() -> list[Path]:
    roots = [Path(os.environ[v]) for v in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]
    import shutil

    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(Path(os.path.realpath(nvcc)).parent.parent)
    roots.append(Path("/usr/local/cuda"))
    return roots


def _wheel_include_dirs() -> tuple[str, ...]:
    """CUDA's headers from the NVIDIA wheels (nvidia-cuda-runtime, -crt, -cccl), through cuda-pathfinder."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return ()
    dirs: list[str] = []
    for lib in ("cccl", "cudart"):
        try:
            d = find_nvidia_header_directory(lib)
        except Exception:  # an older cuda-pathfinder may not know the name
            d = None
        if d and d not in dirs:
            dirs.append(d)
    return tuple(dirs)


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """The folders of CUDA's own headers NVRTC gets, CCCL's first (cub, cuda/std and cuda/barrier need it there).

    A CUDA toolkit (CUDA_PATH, CUDA_HOME, nvcc on the PATH, /usr/local/cuda) whose major version is NVRTC's;
    else the NVIDIA wheels' (cuda-pathfinder); else a toolkit of another version; else none (then only
    kernels that include no CUDA header compile).
    """
    major = nvrtc_version().split(".")[0]
    other: tuple[str, ...] = ()
    for root in _toolkit_roots():
        ver = _cuda_version(root / "include")
        if ver is None:
            continue
        if str(int(ver) // 1000) == major:
            return _with_cccl(root / "include")
        other = other or _with_cccl(root / "include")
    return _wheel_include_dirs() or other


# <cstdint>, <stdint.h>, <cstddef>, <stddef.h> for NVRTC, which has no host C++ library: CCCL's, under the names
# engine kernels include. Searched after every other folder (only where CUDA's headers are found), so a real one wins.
STD_SHIM = Path(__file__).resolve().with_name("nvrtc_std")


def std_shim_dirs() -> tuple[str, ...]:
    return (str(STD_SHIM),) if STD_SHIM.is_dir() else ()


@functools.cache
def _std_shim_key() -> str:
    h = hashlib.sha256()
    for f in sorted(STD_SHIM.glob("*")) if STD_SHIM.is_dir() else []:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def cuda_headers_key() -> str:
    """What the cache key says of CUDA's headers: their folders and versions (a kernel that includes one), and
    evo's own std shim after them."""
    parts = [f"std-shim@{_std_shim_key()}"] if cuda_include_dirs() else []
    for d in cuda_include_dirs():
        ver = _cuda_version(Path(d))
        if ver is None:
            try:
                m = re.search(
                    r"#define\s+CCCL_VERSION\s+(\d+)",
                    (Path(d) / "cuda" / "std" / "__cccl" / "version.h").read_text(errors="replace"),
                )
                ver = f"cccl{m.group(1)}" if m else "?"
            except OSError:
                ver = "?"
        parts.append(f"{d}@{ver}")
    return ";".join(parts) or "none"


_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)


@dataclass(frozen=True)
class Includes:
    """Where NVRTC finds headers for one builder's modules.

    ``local``: the family's folder, its include_dirs and the campaign's, in search order (their headers are
    scanned into the cache key); ``origin``: the folder kernel.cu's quoted includes look in first (NVRTC
    looks beside the program's name, so the program is named in the family's folder); ``cuda``: CUDA's.
    """

    local: tuple[str, ...] = ()
    origin: str = ""
    cuda: tuple[str, ...] = ()

    def options(self) -> list[str]:
        return [f"-I{d}" for d in self.local + self.cuda + (std_shim_dirs() if self.cuda else ())]

    def program_name(self) -> str:
        return str(Path(self.origin) / "kernel.cu") if self.origin else "kernel.cu"

    def scan(self, source: str, pre_includes: Sequence[str] = ()) -> tuple[dict[str, str], bool]:
        """(header -> sha256 of its text, for every header ``source`` and the ``pre_includes`` (files named by
        ``-include``/``--pre-include`` options) include from the local folders, transitively; whether it includes
        anything else, i.e. CUDA's headers). Conditionals are not evaluated: a header under ``#if 0`` counts too,
        which only costs a rebuild."""
        found: dict[str, str] = {}
        cuda = False
        seen: set[Path] = set()
        origin = Path(self.origin) if self.origin else None
        todo: list[tuple[str, Path | None]] = [(source, origin)]
        # a pre-included file is read as if the source's first line included it
        todo += [(f'#include "{name}"', origin) for name in pre_includes]
        while todo:
            text, here = todo.pop()
            for quoted, angled in _INCLUDE_RE.findall(text):
                name = quoted or angled
                dirs = ([here] if quoted and here is not None else []) + [Path(d) for d in self.local]
                path = next((d / name for d in dirs if (d / name).is_file()), None)
                if path is None and Path(name).is_absolute() and Path(name).is_file():
                    path = Path(name)
                if path is None:
                    cuda = True
                    continue
                path = path.resolve()
                if path in seen:
                    continue
                seen.add(path)
                data = path.read_bytes()
                base = Path(self.origin or (self.local[0] if self.local else path.parent))
                found[os.path.relpath(path, base)] = hashlib.sha256(data).hexdigest()
                todo.append((data.decode(errors="replace"), path.parent))
        return found, cuda


def pre_includes(options: Sequence[str]) -> list[str]:
    """The files ``-include``/``--pre-include`` options name (``-include x.h``, ``--pre-include=x.h``)."""
    names: list[str] = []
    opts = list(options)
    for i, o in enumerate(opts):
        for flag in ("-include", "--pre-include"):
            if o == flag and i + 1 < len(opts):
                names.append(opts[i + 1])
            elif o.startswith(flag + "="):
                names.append(o.split("=", 1)[1])
    return names


def source_identity(source: str, headers: Mapping[str, str]) -> str:
    """The compiled source's identity: the text, and the text of every header of the family's it includes."""
    if not headers:
        return hashlib.sha256(source.encode()).hexdigest()
    return hashlib.sha256((source + "".join(f"\0{n}\0{h}" for n, h in sorted(headers.items()))).encode()).hexdigest()


class Compiled(NamedTuple):
    cubin: bytes
    log: str
    seconds: float
    function: str  # the entry's symbol: itself, or a template entry's lowered name


_ERROR_LINE_RE = re.compile(r"\(\d+\): (?:catastrophic )?error\b")


def first_error(log: str) -> str:
    """The first error line of an NVRTC log: "file(line): error: ..." (or "catastrophic error"), else the first
    line that says error (e.g. "nvrtc: error: unrecognized option")."""
    lines = [ln.strip() for ln in log.replace("\x00", "").splitlines() if ln.strip()]
    return (
        next((ln for ln in lines if _ERROR_LINE_RE.search(ln)), None)
        or next((ln for ln in lines if "error" in ln), None)
        or (lines[0][:200] if lines else "unknown")
    )


def by_name_expression(entry: str) -> bool:
    """Whether the entry is looked up through an NVRTC name expression (its lowered name comes back from NVRTC):
    a template-id, or a qualified name (``myengine::rms_norm``, a C++ function in a namespace). Otherwise it is an
    ``extern "C"`` function found by its plain name."""
    return "<" in entry or "::" in entry


def compile_program(
    source: str, entry: str, arch: str, options: Sequence[str] | None = None, name: str = "kernel.cu"
) -> Compiled:
    """NVRTC: source -> cubin, log, seconds and the entry's symbol. Raises BuildError with the first error line.

    ``entry`` with ``<`` is a template-id: NVRTC instantiates it as a name expression and says its lowered
    name. ``options`` come after evo's own (None: CUDA's include folders); a ``-std=`` among them replaces
    the default c++17.
    """
    import time

    from cupy.cuda import nvrtc

    extra = list(cuda_include_options() if options is None else options)
    std = [] if any(o.startswith(("-std=", "--std=")) for o in extra) else ["-std=c++17"]
    opts = [f"--gpu-architecture={arch}", "--ptxas-options=-v"] + std + _debug_opts() + extra
    template = by_name_expression(entry)
    t0 = time.perf_counter()
    prog = nvrtc.createProgram(source, name, [], [])
    try:
        if template:
            nvrtc.addNameExpression(prog, entry)
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog).replace("\x00", "")
            first = first_error(log) + nvrtc_hint(first_error(log), cuda_include_dirs())
            if first.startswith("__nv_name_map"):  # NVRTC's own file for name expressions: say which one
                first += f" (the entry {entry!r})"
            raise BuildError(f"compile error: {first}", log) from None
        function = nvrtc.getLoweredName(prog, entry) if template else entry
        # Some NVRTC versions run ptxas lazily: ask for the cubin before the log.
        cubin = nvrtc.getCUBIN(prog)
        log = nvrtc.getProgramLog(prog).replace("\x00", "")
    finally:
        nvrtc.destroyProgram(prog)
    return Compiled(cubin, log, time.perf_counter() - t0, function)


def cuda_include_options() -> list[str]:
    dirs = cuda_include_dirs()
    return [f"-I{d}" for d in dirs + (std_shim_dirs() if dirs else ())]


def compile_source(
    source: str, entry: str, arch: str, name: str = "kernel.cu", options: Sequence[str] | None = None
) -> tuple[bytes, str, float]:
    """NVRTC: source -> (cubin, log, seconds); :func:`compile_program` without the entry's symbol."""
    c = compile_program(source, entry, arch, options, name)
    return c.cubin, c.log, c.seconds


def build_module(
    source: str, entry: str, arch: str, key: str, options: Sequence[str] = (), includes: Includes | None = None
) -> Module:
    """Compile (or fetch from the cache) one resolved source.

    ``entry``: a function name, or a template-id (:meth:`evo.core.family.Family.entry_expression`); ``options``: the
    family's and the campaign's NVRTC options (checked by :func:`check_nvrtc_options`). A kernel that includes
    nothing and takes no options has the cache key and identity it always had.
    """
    includes = includes if includes is not None else Includes(cuda=cuda_include_dirs())
    src_sha = hashlib.sha256(source.encode()).hexdigest()
    headers, uses_cuda = includes.scan(source, pre_includes(options))
    ident = source_identity(source, headers)
    opts = "".join(f"|{o}" for o in _debug_opts() + list(options))
    opts += "".join(f"|h:{n}={h}" for n, h in sorted(headers.items()))
    opts += f"|cuda:{cuda_headers_key()}" if uses_cuda else ""
    cache_key = hashlib.sha256(f"{src_sha}|{arch}|{nvrtc_version()}|{entry}{opts}".encode()).hexdigest()[:32]
    template = by_name_expression(entry)
    d = cache_dir()
    cubin_path, meta_path = d / f"{cache_key}.cubin", d / f"{cache_key}.json"
    if cubin_path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        function = meta.get("function", "" if template else entry)
        if function:
            return Module(
                key,
                ident,
                meta["cubin_sha256"],
                meta["sass_sha256"],
                Resources(**meta["resources"]),
                str(cubin_path),
                meta.get("log", ""),
                cached=True,
                function=function,
            )
    nv_opts = includes.options() + list(options)
    name = includes.program_name()
    cubin, log, secs, function = compile_program(source, entry, arch, nv_opts, name)
    try:
        res = parse_ptxas_report(log, function)
    except BuildError:
        # Seen on the H200 machine (its NVRTC, 2026-11-30): ~2% of compiles return an empty log.
        # Try once more, then read what the cubin itself records.
        cubin, log, secs2, function = compile_program(source, entry, arch, nv_opts, name)
        secs += secs2
        try:
            res = parse_ptxas_report(log, function)
        except BuildError:
            res = resources_from_cubin(cubin, function)
    rename = {function: entry.split("<", 1)[0].strip()} if template else None
    mod = Module(
        key,
        ident,
        hashlib.sha256(cubin).hexdigest(),
        sass_digest(cubin, rename),
        res,
        str(cubin_path),
        log,
        compile_s=secs,
        function=function,
    )
    tmp = cubin_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(cubin)
    os.replace(tmp, cubin_path)
    meta = {
        "cubin_sha256": mod.cubin_sha256,
        "sass_sha256": mod.sass_sha256,
        "resources": asdict(res),
        "log": log,
        "function": function,
    }
    tmp = meta_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, meta_path)
    return mod


SourceHook = Callable[[str, Mapping[str, Any]], str]


class Builder:
    """Turns genomes into compiled modules, one per specialization of the campaign's geometries."""

    def __init__(
        self,
        family: Family,
        geometries: list[Geometry],
        arch: str = "auto",
        source_hook: SourceHook | None = None,
        defines: Mapping[str, Any] | None = None,
        include_dirs: Sequence[str] = (),
        nvrtc_options: Sequence[str] = (),
        compiler: str | None = None,
        compile_options: Sequence[str] = (),
        torch_headers: bool | None = None,
    ):
        """``include_dirs``, ``nvrtc_options`` and ``compile_options``: the campaign's (absolute folders), after the
        family's own. ``compiler`` ("auto", "nvrtc", "nvcc") and ``torch_headers``: the campaign's where not None,
        else the family's (harness/route.py says how ``auto`` decides; ``route_note`` then says it once).
        ``source_hook(body, genome)``: the kernel text a genome with genes beyond the family's knobs builds from
        (the campaign's source-level ideas, evo/search/ideas.py ``idea_hook``); the builder knows nothing of them.

        Raises BuildError for an include folder that is not there or an option evo cannot take, and
        ValueError when the family's template entry names something no specialization has.
        """
        self.family = family
        self.defines = dict(defines or {})  # the campaign's macros for every module (CampaignConfig.build_defines)
        self.geometries = geometries
        self.arch = detect_arch() if arch == "auto" else arch
        self.specs: dict[str, Mapping[str, Any]] = {}
        for g in geometries:
            s = family.specialization(g)
            self.specs.setdefault(spec_key(s), s)
        for s in self.specs.values():
            family.check_entry(s)
        self.source_hook = source_hook
        # A family made in code has no folder (Path()): then its kernel has no headers of its own.
        folder = Path(family.folder).resolve() if str(family.folder) not in ("", ".") else None
        local = [folder] if folder is not None else []
        for d, whose in [(d, "the family's") for d in family.include_dirs] + [
            (d, "the campaign's") for d in include_dirs
        ]:
            p = Path(d).expanduser()
            p = p if folder is None else folder / p  # an absolute d stays itself
            if not p.is_dir():
                raise BuildError(f"include folder {d} ({whose} include_dirs) is not a folder: {p}")
            if p.resolve() not in local:
                local.append(p.resolve())
        self._local, self._origin = tuple(map(str, local)), str(folder) if folder is not None else ""
        self._includes: Includes | None = None
        self.nvrtc_options = check_nvrtc_options(tuple(family.nvrtc_options) + tuple(nvrtc_options))
        self._route_setup(compiler, compile_options, torch_headers)

    def _route_setup(self, compiler: str | None, compile_options: Sequence[str], torch_headers: bool | None) -> None:
        """The compiler asked for, the engine's options (passed to whichever compiles) and torch's headers."""
        from harness.nvcc import check_nvcc_options
        from harness.route import COMPILERS

        self.requested = compiler if compiler is not None else self.family.compiler
        if self.requested not in COMPILERS:
            raise BuildError(f"compiler {self.requested!r}: one of {', '.join(COMPILERS)}")
        opts = tuple(self.family.compile_options) + tuple(compile_options)
        self.compile_options = check_nvrtc_options(check_nvcc_options(opts))
        self.torch_headers = bool(self.family.torch_headers if torch_headers is None else torch_headers)
        if self.torch_headers and self.requested == "nvrtc":
            raise BuildError("torch_headers needs nvcc (NVRTC cannot read torch's headers): compiler nvcc or auto")
        self._route: str | None = None if self.requested == "auto" else self.requested
        self.route_note = ""  # auto's decision, one line, once it is made

    @property
    def compiler(self) -> str | None:
        """The compiler this builder's modules are built by: the one asked for, or auto's (None until its first
        module decides it, harness/route.py)."""
        return self._route

    @property
    def includes(self) -> Includes:
        """Where this builder's modules find headers (CUDA's are looked up at the first build: that needs NVRTC)."""
        if self._includes is None:
            self._includes = Includes(self._local, self._origin, cuda_include_dirs())
        return self._includes

    @classmethod
    def for_config(
        cls,
        cfg: Any,
        arch: str | None = None,
        source_hook: SourceHook | None = None,
        geometries: Sequence[Geometry] | None = None,
    ) -> Builder:
        """The builder a campaign config asks for: its family, geometries, arch, build macros and its ``build``
        section (include folders, options, compiler, torch's headers). A family with no source (a Kernel Tuner
        cache, harness/ktcache.py) brings its own builder (``own_builder``), which compiles nothing."""
        b = cfg.build
        geos = list(cfg.geometries if geometries is None else geometries)
        own = getattr(cfg.family, "own_builder", None)
        if callable(own):
            return own(geos)
        return cls(
            cfg.family,
            geos,
            arch or cfg.arch,
            source_hook=source_hook,
            defines=cfg.build_defines,
            include_dirs=[str(d) for d in b.include_dirs],
            nvrtc_options=list(b.nvrtc_options),
            compiler=getattr(b, "compiler", None),
            compile_options=list(getattr(b, "compile_options", ())),
            torch_headers=getattr(b, "torch_headers", None),
        )

    def spec_of(self, geometry: Geometry) -> str:
        return spec_key(self.family.specialization(geometry))

    def source_for(self, genome: Mapping[str, Any], base_source: str | None = None) -> str:
        """The kernel text before the knob macros: ``base_source`` (else kernel.cu), through the source hook when
        the genome has genes beyond the family's knobs (the hook raises a BuildError when one cannot apply)."""
        body = base_source if base_source is not None else self.family.source()
        knobs = {k.name for k in self.family.knobs}
        extra = sorted(k for k in genome if k not in knobs)
        if extra:
            if self.source_hook is None:
                raise BuildError(
                    f"genes {', '.join(extra)} are no knobs of {self.family.name}, and this builder "
                    "was given no source hook to build them"
                )
            body = self.source_hook(body, genome)
        return body

    def build(self, genome: Mapping[str, Any], base_source: str | None = None) -> Built:
        from evo.core.genome import Genome

        built = Built(Genome(genome).key)
        body = self.source_for(genome, base_source)
        for key, spec in self.specs.items():
            src = resolve_source(self.family, genome, spec, body, self.defines)
            built.source[key] = src
            entry = self.family.entry_expression(genome, spec)
            built.modules[key] = self.module(src, entry, key)
        return built

    def module(self, source: str, entry: str, key: str) -> Module:
        """One resolved source compiled (or fetched from the cache) by this builder's compiler."""
        if self._route is None:
            from harness.route import decide

            self._route, self.route_note, built, error = decide(self, source, entry, key)
            if error is not None:
                raise error
            if built is not None:
                return built
        if self._route == "nvcc":
            return self.nvcc_module(source, entry, key)
        return self.nvrtc_module(source, entry, key)

    def nvrtc_module(self, source: str, entry: str, key: str) -> Module:
        return build_module(source, entry, self.arch, key, self.nvrtc_options + self.compile_options, self.includes)

    def nvcc_module(self, source: str, entry: str, key: str) -> Module:
        """One resolved source compiled (or fetched from the cache) by nvcc (harness/nvcc.py), as NVRTC's are:
        the same identity (the text and the family's headers it includes), the template entry's instantiation
        hashed under the template's name."""
        from harness.nvcc import NvccIncludes, build_nvcc

        def analyse(cubin: bytes, log: str, function: str) -> tuple[Resources, str]:
            try:
                res = parse_ptxas_report(log, function)
            except BuildError:
                res = resources_from_cubin(cubin, function)
            rename = {function: entry.split("<", 1)[0].strip()} if function != entry else None
            return res, sass_digest(cubin, rename)

        inc = NvccIncludes(self._local, self._origin, self.torch_headers)
        r = build_nvcc(source, entry, self.arch, self.compile_options, inc, _debug_opts(), cache_dir(), analyse)
        headers, _ = Includes(self._local, self._origin).scan(source, pre_includes(self.compile_options))
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
