"""The nvcc route: kernels written for nvcc compiled to a cubin by the CUDA toolkit's nvcc, beside NVRTC.

An engine's kernel file often cannot go through NVRTC as it is: its headers hold host C++ (``<iostream>``,
``<vector>``, exceptions, a host launcher), torch's headers, or it is built with options NVRTC refuses
(``--expt-relaxed-constexpr``). nvcc compiles it unchanged: ``nvcc -cubin -arch=sm_XX -Xptxas -v``, which needs no
GPU. The cubin is loaded by ``cupy.RawModule(path=...)`` as NVRTC's are (harness/gpu.py).

nvcc runs as a subprocess here, not through CuPy's ``cupy.cuda.compiler.compile_using_nvcc``: that one has no
timeout (a hung nvcc would hang the campaign instead of failing one build), returns the ptxas report only on success,
writes the source under a name of its own in a folder of its own, and cannot keep nvcc's dependency file, which is
what the cache key is made of here.

nvcc is found in a CUDA toolkit (CUDA_PATH, CUDA_HOME, the PATH, /usr/local/cuda), else in the ``nvidia-cuda-nvcc``
wheel (through cuda-pathfinder, else the wheel's ``nvidia/cu*/bin``).

The cache (ccache's direct mode): the key of source, arch, options, include folders, entry and nvcc's version finds a
manifest of earlier results; a result counts only while every file nvcc read for it (``-MD``: headers, pre-included
files, torch's, the system's) still has the sha256 it had, else the kernel is compiled again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

from evo.core.records import Resources
from harness.errors import BuildError

# A torch-extension .cu takes ~30 s on a 2-core machine; a compile past this is a failed build, not a hang.
DEFAULT_TIMEOUT_S = 900.0
ENTRY_REF = "__evo_entry_ref"
ENTRY_FILE = "evo_entry"  # the #line name of the appended reference, so an error in it is told apart
# What nvcc's messages call the lines evo puts before kernel.cu's ``#line 1`` (the knob macros), instead of the
# temporary file nvcc compiled, which is gone by the time anyone reads the message.
PRELUDE_FILE = "evo_prelude"

GET_NVCC = "install a CUDA toolkit, or `pip install nvidia-cuda-nvcc` (its nvcc is found through cuda-pathfinder)"


def _error(message: str, log: str = "") -> BuildError:
    return BuildError(message, log)


# ---------------------------------------------------------------------------
# Finding nvcc


@functools.cache
def find_nvcc() -> str | None:
    """nvcc's path: a CUDA toolkit's (CUDA_PATH, CUDA_HOME, the PATH, /usr/local/cuda), else the nvidia-cuda-nvcc
    wheel's; None when there is none. Looked up once per process."""
    found = [Path(os.environ[v]) / "bin" / "nvcc" for v in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]
    on_path = shutil.which("nvcc")
    found += [Path(on_path)] if on_path else []
    found.append(Path("/usr/local/cuda/bin/nvcc"))
    for p in found:
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return _wheel_nvcc()


def _wheel_nvcc() -> str | None:
    """The nvidia-cuda-nvcc wheel's nvcc: cuda-pathfinder knows it; without cuda-pathfinder, nvidia/cu*/bin/nvcc."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        p = find_nvidia_binary_utility("nvcc")
        if p:
            return str(p)
    except Exception:  # no cuda-pathfinder, or one that does not know nvcc
        pass
    import importlib.util

    spec = importlib.util.find_spec("nvidia")  # the NVIDIA wheels' namespace package
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        for p in sorted(Path(base).glob("cu*/bin/nvcc"), reverse=True):
            if os.access(p, os.X_OK):
                return str(p)
    return None


def nvcc_or_error() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise _error(
            f"no nvcc found (CUDA_PATH, CUDA_HOME, PATH, /usr/local/cuda, the nvidia-cuda-nvcc wheel): {GET_NVCC}"
        )
    return nvcc


@functools.cache
def nvcc_version(nvcc: str) -> str:
    """nvcc's full version (e.g. "13.0.88"), part of the cache key."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _error(f"{nvcc} --version failed: {e}") from None
    m = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else out.strip()[-80:]


# ---------------------------------------------------------------------------
# Include folders

TORCH_SHIM = Path(__file__).resolve().with_name("torch_shim")


@functools.cache
def torch_include_dirs() -> tuple[str, ...]:
    """The installed torch's C++ include folders (what ``torch.utils.cpp_extension.include_paths()`` gives for the
    CPU), found without importing torch. Raises BuildError when torch is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise _error("build.torch_headers is on but torch is not installed here (pip install torch)")
    inc = Path(next(iter(spec.submodule_search_locations))) / "include"
    dirs = [inc, inc / "torch" / "csrc" / "api" / "include"]
    if not (inc / "torch").is_dir():
        raise _error(f"build.torch_headers is on but the installed torch has no C++ headers ({inc})")
    return tuple(str(d) for d in dirs if d.is_dir())


def _nvidia_locations() -> list[Path]:
    """The folders of the NVIDIA wheels' ``nvidia`` namespace package in this Python environment."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []


@functools.cache
def wheel_library_include_dirs(major: str) -> tuple[str, ...]:
    """The include folders of the NVIDIA library wheels installed here (nvidia-cublas, nvidia-curand, ...) for
    CUDA ``major``: ``nvidia/cu13/include`` (CUDA 13's wheels share one), ``nvidia/<lib>/include`` for CUDA 12's.

    Called when nvcc's include options are made. An engine's header may include a CUDA library's header
    (FlashInfer's norm.cuh reaches cublasLt.h and curand_kernel.h) that a toolkit installed without that
    library lacks; ``pip install nvidia-cublas`` then provides it, as it does for torch, and nvcc finds it
    without the user naming the wheel's folder. Searched after the toolkit's own folders, so a toolkit's
    header always wins.
    """
    dirs: list[str] = []
    for loc in _nvidia_locations():
        if major.isdigit() and int(major) >= 13:
            found = [loc / f"cu{major}" / "include"]
        else:
            found = sorted(d / "include" for d in loc.glob("*") if not re.fullmatch(r"cu\d+", d.name))
        dirs += [str(d) for d in found if d.is_dir() and str(d) not in dirs]
    return tuple(dirs)


@dataclass(frozen=True)
class NvccIncludes:
    """Where nvcc finds headers: ``local`` (the family's folder, its include_dirs, the campaign's), torch's when
    asked, then nvcc's own CUDA headers and the host's (nvcc adds them), then the NVIDIA library wheels' installed
    here (wheel_library_include_dirs), then evo's torch stand-ins last."""

    local: tuple[str, ...] = ()
    origin: str = ""
    torch: bool = False

    def options(self) -> list[str]:
        dirs = list(self.local) + (list(torch_include_dirs()) if self.torch else [])
        opts = [f"-I{d}" for d in dirs]
        # after the toolkit's and the system's: a library the toolkit lacks (cuBLAS, cuRAND) from its wheel
        nvcc = find_nvcc()
        major = nvcc_version(nvcc).split(".")[0] if nvcc else ""
        opts += [f"-Xcompiler=-idirafter,{d}" for d in wheel_library_include_dirs(major)]
        if self.torch and TORCH_SHIM.is_dir():
            # after the system's folders: a real header (a CUDA torch's, a toolkit's cuBLAS) always wins
            opts.append(f"-Xcompiler=-idirafter,{TORCH_SHIM}")
        return opts


# ---------------------------------------------------------------------------
# Options


_REJECTED = (
    (
        ("--gpu-architecture", "-arch", "-gencode", "--generate-code", "-code", "--gpu-code"),
        "evo sets the target (the campaign's arch)",
    ),
    (("-I", "--include-path", "-isystem", "--system-include"), "name include folders in include_dirs"),
    (
        (
            "-c",
            "--compile",
            "-cubin",
            "--cubin",
            "-ptx",
            "--ptx",
            "-fatbin",
            "--fatbin",
            "-o",
            "--output-file",
            "-E",
            "--preprocess",
            "-lib",
            "--lib",
            "-link",
            "--link",
            "-run",
            "--run",
            "-dryrun",
            "--dryrun",
        ),
        "evo compiles to a cubin of its own",
    ),
    (
        (
            "-rdc",
            "--relocatable-device-code",
            "-dc",
            "--device-c",
            "-dw",
            "--device-w",
            "-dlto",
            "--dlink-time-opt",
            "-gen-lto",
        ),
        "evo needs a whole-program cubin it can load as it is",
    ),
    (
        (
            "-M",
            "-MD",
            "-MM",
            "-MMD",
            "-MF",
            "-MT",
            "-MP",
            "--generate-dependencies",
            "--dependency-output",
            "--generate-nonsystem-dependencies",
            "--generate-dependencies-with-compile",
        ),
        "evo reads nvcc's dependency list for its cache",
    ),
)


def check_nvcc_options(options: Sequence[str]) -> tuple[str, ...]:
    """``options`` (the engine's compile options) as given; BuildError naming the first that takes away what evo
    needs (the target, the cubin, the dependency list) or hides include folders."""
    for o in options:
        if not isinstance(o, str) or not o.strip():
            raise _error(f"compile option {o!r} is not a non-empty string")
        name = o.split("=", 1)[0]
        if o in ("-rdc=false", "--relocatable-device-code=false"):
            continue
        for names, why in _REJECTED:
            if name in names or (o.startswith("-I") and "-I" in names):
                raise _error(f"compile option {o!r} is not allowed: {why}")
    return tuple(options)


def _has_std(options: Sequence[str]) -> bool:
    return any(o.startswith(("-std=", "--std=")) or o in ("-std", "--std") for o in options)


# ---------------------------------------------------------------------------
# Compiling


class NvccCompiled(NamedTuple):
    cubin: bytes
    log: str
    seconds: float
    function: str  # the entry's symbol in the cubin
    deps: tuple[str, ...]  # every file nvcc read, absolute, the source itself left out


def entry_reference(entry: str) -> str:
    """Text appended to the source so nvcc instantiates the entry (a template-id, a qualified or C++ name) and the
    cubin says its symbol: a device variable holding the kernel's address, whose relocation names the symbol."""
    return f'\n#line 1 "{ENTRY_FILE}"\n__device__ decltype(&{entry}) {ENTRY_REF} = &{entry};\n'


_EDG_ERROR = re.compile(r"\(\d+\): (?:catastrophic )?error\b")
_GCC_ERROR = re.compile(r"^\S.*?:\d+(?::\d+)?: (?:fatal )?error: ")


def nvcc_first_error(log: str) -> str:
    """The first error line of nvcc's output: the front end's "file(line): error: ...", the preprocessor's
    "file:line:col: fatal error: ...", else the first line saying error or fatal (an option nvcc refuses, ptxas)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return (
        next((ln for ln in lines if _EDG_ERROR.search(ln) or _GCC_ERROR.search(ln)), None)
        or next((ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()), None)
        or (lines[0][:200] if lines else "unknown")
    )


def compile_nvcc(
    source: str,
    entry: str,
    arch: str,
    options: Sequence[str],
    includes: NvccIncludes,
    debug: Sequence[str] = (),
    timeout: float | None = None,
) -> NvccCompiled:
    """nvcc: source -> cubin, its ptxas report, seconds, the entry's symbol and the files read. Raises BuildError
    with the first error line; a compile past ``timeout`` (EVO_NVCC_TIMEOUT, default 900 s) is killed and is one."""
    nvcc = nvcc_or_error()
    timeout = timeout or float(os.environ.get("EVO_NVCC_TIMEOUT", DEFAULT_TIMEOUT_S))
    std = [] if _has_std(options) else ["-std=c++17"]
    with tempfile.TemporaryDirectory(prefix="evo-nvcc-") as td:
        src, out, dep = Path(td) / "kernel.cu", Path(td) / "kernel.cubin", Path(td) / "kernel.d"
        src.write_text(source + entry_reference(entry))
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *std, *debug, *includes.options(), *options]
        cmd += ["-MD", "-MF", str(dep), "-o", str(out), str(src)]
        cwd = includes.origin or td  # a relative -include names a file of the family's folder
        t0 = time.perf_counter()
        code, log = _run(cmd, cwd, timeout)
        secs = time.perf_counter() - t0
        log = _without_scratch(log, Path(td))
        if code is None:
            raise _error(f"compile error: nvcc did not finish in {timeout:.0f} s (EVO_NVCC_TIMEOUT)", log)
        if code != 0 or not out.is_file():
            first = nvcc_first_error(log)
            if ENTRY_FILE in first:
                first += f" (the entry {entry!r}: not a __global__ function of the source)"
            elif PRELUDE_FILE in first:
                first += " (in the lines evo puts before kernel.cu: a knob value or define that is not C++ there)"
            elif not includes.torch and re.search(r"fatal error: (torch|c10|ATen)/\S+: No such file", first):
                first += " (torch's headers: `build: {torch_headers: true}`)"
            raise _error(f"compile error: {first}", log)
        cubin = out.read_bytes()
        deps = read_deps(dep.read_text(), cwd, exclude=src)
    function = entry_symbol(cubin)
    if function is None:
        raise _error(f"compile error: nvcc's cubin does not say which function the entry {entry!r} is", log)
    return NvccCompiled(cubin, log, secs, function, deps)


def _without_scratch(log: str, td: Path) -> str:
    """nvcc's log with the scratch folder's files named as a reader can find them: the compiled file (its lines
    before ``#line 1 "kernel.cu"``) as :data:`PRELUDE_FILE`, the others by their bare names. Called right after
    nvcc ran, before the folder is deleted."""
    for folder in {str(td), os.path.realpath(td)}:
        log = log.replace(f"{folder}/kernel.cu", PRELUDE_FILE).replace(f"{folder}/", "")
    return log


def _run(cmd: list[str], cwd: str, timeout: float) -> tuple[int | None, str]:
    """(exit code, stdout and stderr); None for the code when ``timeout`` passed (nvcc and the tools it started
    are killed: it runs in a session of its own)."""
    try:
        p = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
    except OSError as e:
        raise _error(f"nvcc could not run: {e}") from None
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out or ""


def read_deps(text: str, cwd: str, exclude: Path | None = None) -> tuple[str, ...]:
    """The files of a make-style dependency file (``target : a b \\`` lines), absolute and in order."""
    body = text.replace("\\\n", " ")
    m = re.search(r":(?:\s|$)", body)
    rest = body[m.end() :] if m else ""
    out: list[str] = []
    skip = str(exclude.resolve()) if exclude is not None else None
    for tok in re.findall(r"(?:\\ |\S)+", rest):
        p = os.path.normpath(os.path.join(cwd, tok.replace("\\ ", " ").replace("$$", "$")))
        if p != skip and os.path.realpath(p) != skip and p not in out:
            out.append(p)
    return tuple(out)


def entry_symbol(cubin: bytes) -> str | None:
    """The symbol :data:`ENTRY_REF`'s relocation names: the entry's function in the cubin (no demangling: the
    linker's own record of which function the appended reference took the address of)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return None
    (e_shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    e_shentsize, e_shnum, _ = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    symtab = next((s for s in secs if s[1] == 2), None)  # SHT_SYMTAB
    if symtab is None:
        return None
    strtab = secs[symtab[6]]  # sh_link

    def name(i: int) -> str:
        off = strtab[4] + struct.unpack_from("<I", cubin, symtab[4] + i * 24)[0]
        return cubin[off : cubin.index(b"\0", off)].decode()

    nsyms = symtab[5] // 24
    ref = next((i for i in range(nsyms) if name(i) == ENTRY_REF), None)
    if ref is None:
        return None
    _n, _info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", cubin, symtab[4] + ref * 24)
    for s in secs:
        if s[1] == 4 and s[7] == shndx:  # SHT_RELA applying to the reference's section
            for j in range(s[5] // 24):
                r_offset, r_info, _addend = struct.unpack_from("<QQq", cubin, s[4] + j * 24)
                if r_offset == value:
                    return name(r_info >> 32)
    return None


# ---------------------------------------------------------------------------
# The cache: a manifest per key, results valid while every file nvcc read is unchanged

_HASHES: dict[tuple[str, int, int, int], str] = {}


def file_sha256(path: str) -> str | None:
    """sha256 of a file (remembered per path, size and modification time in this process); None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    k = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    if k not in _HASHES:
        try:
            _HASHES[k] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            return None
    return _HASHES[k]


def deps_valid(deps: dict[str, str]) -> bool:
    return all(file_sha256(p) == h for p, h in deps.items())


def lookup(cache: Path, key: str) -> tuple[Path, dict] | None:
    """(cubin path, meta) of a result of ``key`` whose every dependency still has its recorded hash, or None."""
    try:
        results = json.loads((cache / f"{key}.manifest.json").read_text())["results"]
    except (OSError, ValueError, KeyError):
        return None
    for rk in results:
        cubin, meta_path = cache / f"{rk}.cubin", cache / f"{rk}.json"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if cubin.is_file() and deps_valid(meta.get("deps", {})):
            return cubin, meta
    return None


def store(cache: Path, key: str, cubin: bytes, meta: dict) -> Path:
    """Write a result (its key: ``key`` and its dependencies' hashes) and put it first in ``key``'s manifest."""
    deps = meta["deps"]
    rk = hashlib.sha256((key + "".join(f"\0{p}\0{h}" for p, h in sorted(deps.items()))).encode()).hexdigest()[:32]
    _write(cache / f"{rk}.cubin", cubin)
    _write(cache / f"{rk}.json", json.dumps(meta).encode())
    man = cache / f"{key}.manifest.json"
    try:
        results = json.loads(man.read_text())["results"]
    except (OSError, ValueError, KeyError):
        results = []
    results = [rk] + [r for r in results if r != rk][:7]
    _write(man, json.dumps({"results": results}).encode())
    return cache / f"{rk}.cubin"


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@dataclass
class NvccResult:
    """What :func:`harness.build.build_module` makes a Module of on the nvcc route."""

    cubin_path: str
    cubin_sha256: str
    sass_sha256: str
    resources: Resources
    log: str
    function: str
    cached: bool
    compile_s: float = 0.0


# (cubin, ptxas log, the entry's symbol) -> (resources, SASS digest): harness.build's reading of a cubin
Analyse = Callable[[bytes, str, str], tuple[Resources, str]]


def build_nvcc(
    source: str,
    entry: str,
    arch: str,
    options: Sequence[str],
    includes: NvccIncludes,
    debug: Sequence[str],
    cache: Path,
    analyse: Analyse,
) -> NvccResult:
    """Compile (or fetch from ``cache``) one resolved source with nvcc; see the module's docstring for the key."""
    nvcc = nvcc_or_error()
    parts = [hashlib.sha256(source.encode()).hexdigest(), arch, f"nvcc {nvcc_version(nvcc)}", entry]
    parts += [f"o:{o}" for o in list(debug) + list(options)] + [f"i:{o}" for o in includes.options()]
    key = "nvcc-" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
    hit = lookup(cache, key)
    if hit is not None:
        path, meta = hit
        return NvccResult(
            str(path),
            meta["cubin_sha256"],
            meta["sass_sha256"],
            Resources(**meta["resources"]),
            meta.get("log", ""),
            meta["function"],
            cached=True,
        )
    c = compile_nvcc(source, entry, arch, options, includes, debug)
    res, sass = analyse(c.cubin, c.log, c.function)
    meta = {
        "compiler": "nvcc",
        "cubin_sha256": hashlib.sha256(c.cubin).hexdigest(),
        "sass_sha256": sass,
        "resources": asdict(res),
        "log": c.log,
        "function": c.function,
        "deps": {p: h for p in c.deps if (h := file_sha256(p)) is not None},
    }
    path = store(cache, key, c.cubin, meta)
    return NvccResult(str(path), meta["cubin_sha256"], sass, res, c.log, c.function, False, c.seconds)
