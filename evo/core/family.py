"""The kernel-family interface, and where families are found.

A family is one folder: ``kernel.cu`` (the kernel; its knobs are preprocessor macros ``EVO_<KNOB>`` or template
parameters of its entry point, see :attr:`Family.entry`), ``family.py`` (a subclass of :class:`Family` assigned
to a module-level ``FAMILY``), and optionally ``recorded/`` (measured sweeps), ``ideas/`` and headers the kernel
includes. Nothing outside that folder has to change to add one: a config names it by path, or by name when it
lies in a folder of ``EVO_FAMILY_PATH``, comes from an installed package's ``evo.families`` entry point, or ships
with evo (``candidates/``).
"""

from __future__ import annotations

import abc
import copy
import hashlib
import importlib.util
import os
import re
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from evo.core.errors import FamilyError as FamilyError  # its home was here: importers keep this path
from evo.core.genome import Genome

_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")  # {knob} in a template entry


@dataclass(frozen=True)
class Knob:
    """One searchable knob: ordered values, a default, and whether it keeps output bits.

    ``exact`` is False when some non-default value may change the order of a
    floating-point reduction; a family can refine that per geometry in
    :meth:`Family.inexact_knobs`.
    """

    name: str
    values: tuple[Any, ...]
    default: Any
    exact: bool = True
    doc: str = ""
    # Read by launch() only (a block size the engine picks at launch): no EVO_<KNOB> macro, so every value shares
    # one build; evo measures each value all the same (a variant is its code and its launch, evo/core/variant.py).
    launch_only: bool = False

    def __post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"knob {self.name}: default {self.default!r} not in {self.values!r}")


@dataclass(frozen=True)
class GeometryParam:
    """One parameter of a geometry (e.g. T or H), with its allowed values or range."""

    name: str
    type: type
    default: Any = None  # None: required
    choices: tuple[Any, ...] | None = None
    min: int | None = None
    max: int | None = None
    doc: str = ""


@dataclass(frozen=True)
class Geometry:
    """A named problem shape with its weight in the campaign objective.

    Weight 0 means "watched": it must not regress, but it need not improve.
    """

    name: str
    params: Mapping[str, Any]
    weight: float = 1.0

    def __getitem__(self, k: str) -> Any:
        return self.params[k]


@dataclass(frozen=True)
class OutputSpec:
    """One buffer the kernel writes. ``init_from`` names an input of :meth:`Family.make_inputs` when the kernel
    works in place (an engine's in-out pointer, e.g. a residual it overwrites with the sum): before every launch
    the harness checks, the buffer starts as a copy of that input (same dtype and number of elements; ``shape``
    may view it otherwise), and ``kernel_args`` passes this output where the kernel takes its in-out pointer, so
    the input itself is never written. Without it the buffer starts poisoned (docs/measurement.md)."""

    name: str
    dtype: str  # torch dtype name: float32, bfloat16, ... (a torch.dtype is taken as its name)
    shape: tuple[int, ...]
    init_from: str | None = None  # the input this in-out output starts as a copy of

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, str) and str(self.dtype).startswith("torch."):
            object.__setattr__(self, "dtype", str(self.dtype)[len("torch.") :])
        if self.init_from is not None and (not isinstance(self.init_from, str) or not self.init_from):
            raise ValueError(f"output {self.name}: init_from is {self.init_from!r}, the name of an input or None")


def inout_problem(outputs: Sequence[OutputSpec], inputs: Mapping[str, Any]) -> str | None:
    """Why an in-out output cannot start as a copy of its input, or None: ``init_from`` must name a tensor of
    ``inputs`` (what make_inputs gave) of the output's dtype and number of elements, and no two outputs may start
    from one input (each is its own buffer: the engine's kernel has one pointer to it). Asked by `evo check` on the
    CPU and by the GPU backend as it first makes a geometry's inputs."""
    taken: dict[str, str] = {}
    for o in outputs:
        src = o.init_from
        if src is None:
            continue
        t = inputs.get(src)
        where = f"output {o.name}: init_from={src!r}"
        if t is None or not hasattr(t, "numel"):
            tensors = sorted(k for k, v in inputs.items() if hasattr(v, "numel"))
            return f"{where} is not a tensor of make_inputs (its tensors: {', '.join(tensors) or 'none'})"
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype != o.dtype:
            return f"{where} is {dtype}, the output {o.dtype} (an in-out buffer keeps its input's dtype)"
        n = 1
        for d in o.shape:
            n *= d
        if int(t.numel()) != n:
            return f"{where} has {int(t.numel())} elements, the output's shape {tuple(o.shape)} {n}"
        if src in taken:
            return f"outputs {taken[src]} and {o.name} both start from {src!r} (one in-out buffer per input)"
        taken[src] = o.name
    return None


SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


@dataclass(frozen=True)
class SanitizerSuppression:
    """A compute-sanitizer finding the family declares known, and the argument a reviewer must read to accept it.

    A finding line (one top-level report of ``tool``, e.g. "Error: Race reported between Write access at
    fp4_matvec+0x7500") is suppressed when it names ``kernel`` and ``pattern`` (a regular expression) is found in
    it, for genomes whose knobs have the values in ``when`` (empty: every genome). The sanitizer gate
    (gates/sanitizer.py) lets such a step through; the log's step table and the exported commit message print the
    suppression's name, the finding and ``argument``, so the reviewer sees where to push back.
    """

    name: str
    tool: str  # memcheck | racecheck | synccheck | initcheck
    kernel: str  # the kernel's name as the report writes it ("fp4_matvec" in "at fp4_matvec+0x7500")
    pattern: str  # a regular expression searched in the finding line
    argument: str  # why the finding is not a bug in the kernel (for the reviewer; printed beside the step)
    when: Mapping[str, Any] = field(default_factory=dict, hash=False)  # knob -> value it applies to

    def applies(self, genome: Mapping[str, Any]) -> bool:
        return all(genome.get(k) == v for k, v in self.when.items())

    def matches(self, tool: str, line: str) -> bool:
        return tool == self.tool and self.kernel in line and re.search(self.pattern, line) is not None

    def problem(self, knobs: Sequence[str]) -> str | None:
        """What is wrong with the declaration (checked as the family is loaded), or None."""
        if not self.name.strip():
            return "a sanitizer suppression has no name"
        if self.tool not in SANITIZER_TOOLS:
            return f"sanitizer suppression {self.name}: tool {self.tool!r} (allowed: {', '.join(SANITIZER_TOOLS)})"
        if not self.kernel.strip():
            return f"sanitizer suppression {self.name}: kernel is empty"
        try:
            re.compile(self.pattern)
        except re.error as e:
            return f"sanitizer suppression {self.name}: pattern {self.pattern!r} is not a regular expression ({e})"
        if not self.pattern:
            return f"sanitizer suppression {self.name}: pattern is empty (it would hide every finding)"
        if not self.argument.strip():
            return f"sanitizer suppression {self.name}: no argument (the reviewer must read why it is not a bug)"
        unknown = [k for k in self.when if k not in knobs]
        if unknown:
            return f"sanitizer suppression {self.name}: when names {unknown[0]!r}, not a knob"
        return None


@dataclass
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0


@dataclass
class Family(abc.ABC):
    """Base class of a kernel family.

    The campaign calls, in this order: :meth:`check_geometry` when the config
    is loaded; :meth:`check` on every genome the proposer makes (invalid ones
    are never built); :meth:`defines` (and, for a template entry,
    :meth:`entry_expression`) when the builder resolves a genome into
    source for one geometry's :meth:`specialization`; :meth:`make_inputs`,
    :meth:`outputs`, :meth:`launch` and :meth:`kernel_args` on the GPU;
    :meth:`reference` once per geometry and seed for the float64 check;
    :meth:`bytes_moved` for the roofline figure.
    """

    name: str = ""
    description: str = ""
    # The __global__ function: a plain name is an extern "C" function; a template-id with {name}
    # placeholders (knobs or specialization keys), e.g. "rmsnorm<{block}, {vec}, {two_pass}>", is
    # instantiated per genome through NVRTC name expressions (entry_expression).
    entry: str = "kernel"
    knobs: tuple[Knob, ...] = ()
    geometry_params: tuple[GeometryParam, ...] = ()
    # Deliberately broken source edits: title -> (old text, new text[, expected verdict label]).
    # The harness's own fault-injection checks (`evo selfcheck`); the expected label defaults to
    # "rejected: correctness".
    faults: dict[str, tuple[str, ...]] = field(default_factory=dict)
    folder: Path = field(default_factory=Path)
    # Header folders NVRTC searches after the family's own (relative to the folder unless absolute),
    # and NVRTC options for every module (e.g. "-default-device", "-DUSE_X=1"). Headers found there
    # are part of the compile-cache key.
    include_dirs: tuple[str, ...] = ()
    nvrtc_options: tuple[str, ...] = ()
    # Which compiler builds the kernel: "nvrtc", "nvcc" (a CUDA toolkit's, or the nvidia-cuda-nvcc wheel's), or
    # "auto" (NVRTC, and nvcc where NVRTC cannot compile the kernel as written: host C++ in its headers, an nvcc-only
    # option); the engine's own build options passed as given to whichever compiles (e.g. "--expt-relaxed-constexpr",
    # "-use_fast_math", "-DFOO=1"; nvrtc_options go to NVRTC only); torch_headers: the installed torch's C++ include
    # folders on the include path (nvcc only), for a torch-extension .cu as engines write them.
    compiler: str = "auto"
    compile_options: tuple[str, ...] = ()
    torch_headers: bool = False
    # compute-sanitizer findings known not to be bugs of the kernel, each with its argument (gates/sanitizer.py)
    sanitizer_suppressions: tuple[SanitizerSuppression, ...] = ()

    def __post_init__(self) -> None:
        """Honour these fields set as class attributes of a subclass (``include_dirs = ("../include",)``), as
        docs/extending.md writes them: the dataclass's __init__ would otherwise set every field it was not given
        back to its default, silently. A value given to the constructor wins where it is not the field's default
        (the two cannot be told apart). A subclass's own ``__post_init__`` calls this one (``super()``)."""
        for f in fields(Family):
            if f.name == "folder":
                continue
            for klass in type(self).__mro__:
                if klass is Family:
                    break
                if f.name in vars(klass):
                    declared = vars(klass)[f.name]
                    default = f.default_factory() if f.default_factory is not MISSING else f.default
                    if getattr(self, f.name) == default and not isinstance(declared, (property, classmethod)):
                        # a mutable one (faults) copied: each instance its own, as a constructor's would be
                        setattr(self, f.name, copy.copy(declared) if isinstance(declared, (dict, list)) else declared)
                    break

    # --- knobs and genomes ---------------------------------------------
    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(name)

    def baseline(self) -> Genome:
        return Genome({k.name: k.default for k in self.knobs})

    def genome(self, values: Mapping[str, Any]) -> Genome:
        """Baseline with ``values`` applied; raises ValueError naming a bad knob or value."""
        names = {k.name for k in self.knobs}
        for n, v in values.items():
            if n not in names:
                raise ValueError(f"unknown knob {n!r} for family {self.name} (knobs: {', '.join(sorted(names))})")
            if v not in self.knob(n).values:
                raise ValueError(f"knob {n}={v!r} out of range (allowed: {list(self.knob(n).values)})")
        return self.baseline().replace(**values)

    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        """Return why ``genome`` is invalid for these geometries, or None when it is fine."""
        return None

    def inexact_knobs(self, genome: Mapping[str, Any], geometry: Geometry) -> list[str]:
        """Knobs of ``genome`` whose value may change output bits at ``geometry``."""
        return [k.name for k in self.knobs if not k.exact and genome[k.name] != k.default]

    # --- geometries -----------------------------------------------------
    def check_geometry(self, params: Mapping[str, Any]) -> str | None:
        """Return why this family cannot take a geometry, or None."""
        return None

    def small_geometry(self) -> Geometry | None:
        """A small geometry for `evo check`, which runs :meth:`make_inputs` and :meth:`reference` there on the
        CPU (seconds, not minutes). None: the campaign's geometry that moves the fewest bytes."""
        return None

    def specialization(self, geometry: Geometry) -> Mapping[str, Any]:
        """The compile-time part of a geometry (one module is built per distinct value)."""
        return {}

    # --- source ---------------------------------------------------------
    @property
    def kernel_path(self) -> Path:
        return self.folder / "kernel.cu"

    def source(self) -> str:
        return self.kernel_path.read_text()

    def faulty_source(self, title: str) -> str:
        """The kernel with one named fault applied (ValueError if the edit no longer applies)."""
        old, new = self.faults[title][:2]
        src = self.source()
        pairs = zip(old, new) if isinstance(old, (list, tuple)) else [(old, new)]  # one edit, or several
        for o, n in pairs:
            if o not in src:
                raise ValueError(f"fault {title!r} no longer applies to {self.kernel_path.name}")
            src = src.replace(o, n)
        return src

    def fault_expectation(self, title: str) -> str:
        """The verdict label a correct harness gives this fault."""
        f = self.faults[title]
        return f[2] if len(f) > 2 else "rejected: correctness"

    def defines(self, genome: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
        """Macros that select the genome's code paths: ``EVO_<KNOB>`` by default, for every knob that is not
        ``launch_only`` (one of those changes the launch, never the source: all its values share one compile)."""
        out: dict[str, Any] = {}
        for k in self.knobs:
            if k.launch_only:
                continue
            v = genome[k.name]
            if isinstance(v, bool):
                v = int(v)
            elif isinstance(v, str):
                v = f"EVO_{k.name.upper()}_{_ident(v)}"
            out[f"EVO_{k.name.upper()}"] = v
        for n, v in spec.items():
            out[f"EVO_{n.upper()}"] = int(v) if isinstance(v, bool) else v
        return out

    # --- template entries -------------------------------------------------
    @property
    def template_knobs(self) -> tuple[str, ...]:
        """The knobs named as ``{knob}`` in :attr:`entry`, in order (none for a plain entry)."""
        names = {k.name for k in self.knobs}
        return tuple(dict.fromkeys(n for n in _PLACEHOLDER_RE.findall(self.entry) if n in names))

    def check_entry(self, spec: Mapping[str, Any] | None = None) -> None:
        """Raise a one-line ValueError when a ``{name}`` in :attr:`entry` is neither a knob nor a geometry
        parameter (given ``spec``: a key of that specialization). Called when the family is loaded, and by
        the builder for each specialization it compiles."""
        knobs = {k.name for k in self.knobs}
        other = set(spec) if spec is not None else {p.name for p in self.geometry_params}
        bad = [n for n in dict.fromkeys(_PLACEHOLDER_RE.findall(self.entry)) if n not in knobs | other]
        if bad:
            what = "specialization keys" if spec is not None else "geometry params"
            raise ValueError(
                f"family {self.name}: entry {self.entry!r} names {', '.join(map(repr, bad))}, not a knob "
                f"or one of the {what} (knobs: {', '.join(sorted(knobs)) or 'none'}; "
                f"{what}: {', '.join(sorted(other)) or 'none'})"
            )

    def entry_expression(self, genome: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
        """:attr:`entry` with its placeholders filled from the genome (else ``spec``): bools as true/false,
        strings verbatim (a type name or an enum constant). Called by the builder for every module."""

        def value(m: re.Match[str]) -> str:
            n = m.group(1)
            v = genome[n] if n in genome else spec[n]
            return ("true" if v else "false") if isinstance(v, bool) else str(v)

        return _PLACEHOLDER_RE.sub(value, self.entry)

    def value_macros(self) -> dict[str, int]:
        """Numeric values for string-valued knobs, so ``#if EVO_META == EVO_META_SLICE`` works."""
        out: dict[str, int] = {}
        for k in self.knobs:
            if not k.launch_only and any(isinstance(v, str) for v in k.values):
                for i, v in enumerate(k.values):
                    out[f"EVO_{k.name.upper()}_{_ident(str(v))}"] = i
        return out

    # --- running (GPU only) ---------------------------------------------
    @abc.abstractmethod
    def outputs(self, geometry: Geometry) -> list[OutputSpec]: ...

    @abc.abstractmethod
    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        """Random inputs (never zeros), fresh per seed, as torch tensors on ``device``."""

    @abc.abstractmethod
    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        """The math in ``dtype`` (float64 by default), as torch tensors keyed like :meth:`outputs`."""

    @abc.abstractmethod
    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch: ...

    def pdl_safe(self, genome: Mapping[str, Any]) -> bool:
        """Whether this genome's kernel may be launched with programmatic dependent launch (harness/driver_launch.py):
        it reads and writes nothing another kernel may touch before its griddepcontrol.wait (built with EVO_PDL=1).
        Asked when a campaign under gates.perf.launch: pdl launches or describes a launch; only such kernels ever
        get the attribute. Default: none."""
        return False

    @abc.abstractmethod
    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        """Arguments in the kernel's order: tensors (passed as pointers) and Python ints/floats."""

    def arg_types(self) -> str:
        """One letter per kernel argument: p pointer, i int32, l int64, f float32, d float64, s a trivially copyable
        value passed by value (its kernel_args value: bytes, a numpy scalar or array, a ctypes Structure). `evo check`
        and the GPU backend hold it on the compiled kernel's parameter layout (harness/cubin.py)."""
        raise NotImplementedError

    def written_view(self, outputs: Mapping[str, Any], genome: Mapping[str, Any], geometry: Geometry) -> dict[str, Any]:
        """The parts of the output buffers this genome must write (poison, NaN, race and hash checks look here).

        Default: the whole buffers. A family whose outputs are sized for the largest knob value (e.g.
        split partials) returns the slices this genome writes.
        """
        return dict(outputs)

    def compare_view(self, outputs: Mapping[str, Any], genome: Mapping[str, Any], geometry: Geometry) -> dict[str, Any]:
        """What is compared with :meth:`reference` (same keys and shapes). Default: the written view."""
        return self.written_view(outputs, genome, geometry)

    def bytes_moved(self, geometry: Geometry) -> int:
        """Fewest bytes one call must move through device memory."""
        return 0

    def flops(self, geometry: Geometry) -> int:
        return 0

    def error_bound(self, output: str) -> float:
        """Largest relative-norm error vs float64 that the *baseline* may show (sanity check)."""
        return 1e-2


# ---------------------------------------------------------------------------
# Where families come from: a path, EVO_FAMILY_PATH, the evo.families entry points, the shipped ones.


def _shipped(folder: str) -> Path:
    """A folder shipped with evo: inside the package in a wheel (pyproject's package-dir puts candidates/ and
    configs/ there), beside it in a source checkout or an editable install."""
    pkg = Path(__file__).resolve().parents[1]  # evo/, above evo/core/
    return pkg / folder if (pkg / folder).is_dir() else pkg.parent / folder


CANDIDATES_DIR = _shipped("candidates")  # the ready-made families
CONFIGS_DIR = _shipped("configs")  # their campaign configs
PATH_ENV = "EVO_FAMILY_PATH"  # os.pathsep-separated folders of family folders, searched before the shipped ones
ENTRY_POINT_GROUP = "evo.families"  # installed packages: name = "module" or "module:attribute" giving a Family
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class FamilySource:
    """Where one family was found: ``origin`` is "path", "EVO_FAMILY_PATH", "entry point <dist>" or "shipped"."""

    name: str
    origin: str
    folder: Path | None = None  # the family folder (None for an entry point until loaded)
    entry_point: Any = None  # an importlib.metadata.EntryPoint

    @property
    def where(self) -> str:
        return str(self.folder) if self.folder is not None else str(getattr(self.entry_point, "value", "?"))


def is_family_path(ref: str) -> bool:
    """``family:`` names a folder when it looks like a path (``./x``, ``../x``, ``a/b``, ``/abs``, ``~/x``)."""
    return "/" in ref or os.sep in ref or ref.startswith((".", "~"))


def check_family_name(name: str) -> None:
    if not _NAME_RE.fullmatch(name):
        raise FamilyError(
            f"{name!r} is not a family name (letters, digits, _ and -; a folder is written as a path, e.g. ./{name})"
        )


def _folders_of(root: Path, origin: str) -> list[FamilySource]:
    if not root.is_dir():
        return []
    return [
        FamilySource(p.parent.name, origin, p.parent)
        for p in sorted(root.glob("*/family.py"))
        if _NAME_RE.fullmatch(p.parent.name)
    ]


def _entry_points() -> list[FamilySource]:
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
        out.append(FamilySource(ep.name, f"entry point {dist}", None, ep))
    return out


def find_families(root: Path | None = None) -> list[FamilySource]:
    """Every family that can be found by name, first match first: the folders of EVO_FAMILY_PATH in order, the
    evo.families entry points, then the shipped ones. Later ones of the same name are shadowed (still listed).
    ``root``: only that folder (tests, another candidates/ folder)."""
    if root is not None:
        return _folders_of(Path(root), "folder")
    out: list[FamilySource] = []
    for d in filter(None, os.environ.get(PATH_ENV, "").split(os.pathsep)):
        out += _folders_of(Path(d).expanduser(), PATH_ENV)
    out += _entry_points()
    out += _folders_of(CANDIDATES_DIR, "shipped")
    return out


def family_names(root: Path | None = None) -> list[str]:
    return sorted({s.name for s in find_families(root)})


def resolve_family(ref: str, root: Path | None = None, base: Path | None = None) -> FamilySource:
    """A family named ``ref`` (searched as :func:`find_families` says) or the folder ``ref`` is a path to
    (relative to ``base``, e.g. the config's folder; else the working directory). Raises FamilyError."""
    if is_family_path(ref):
        folder = Path(ref).expanduser()
        if not folder.is_absolute():
            folder = (base or Path.cwd()) / folder
        folder = folder.resolve()
        if not folder.exists():
            raise FamilyError(f"{ref!r} is a path, and {folder} does not exist")
        if not (folder / "family.py").is_file():
            raise FamilyError(f"{ref!r} is a path, and {folder} holds no family.py")
        return FamilySource(folder.name, "path", folder)
    check_family_name(ref)
    found = find_families(root)
    for s in found:
        if s.name == ref:
            return s
    known = ", ".join(sorted({s.name for s in found})) or "none"
    raise FamilyError(f"unknown family {ref!r} (known: {known}; a folder is written as a path, e.g. ./{ref})")


def _one_line(e: BaseException) -> str:
    if isinstance(e, SyntaxError):
        return f"{Path(e.filename or '?').name} line {e.lineno}: {e.msg}"
    msg = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {msg}"[:300]


def _ident(value: str) -> str:
    """A string knob value as part of a macro name: upper case, with anything but [A-Za-z0-9_] (as in
    ``Mode::kFast`` or ``unsigned int``) as ``_``."""
    return re.sub(r"\W", "_", value).upper()


def _load_module(path: Path, modname: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise FamilyError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:
        sys.modules.pop(modname, None)
        raise
    return mod


def load_source(src: FamilySource) -> Family:
    """Import one found family and check it; any failure is a FamilyError of one line naming the family."""
    from evo.core.hooks import no_exit, running, trace

    label = f"family {src.name} ({src.where})"
    trace(src.name, "import of family.py")
    try:
        if src.entry_point is not None:
            obj = src.entry_point.load()
            fam = getattr(obj, "FAMILY", obj)
            if isinstance(fam, Family) and fam.folder == Path():  # its folder: the module's own
                modname = obj.__name__ if isinstance(obj, types.ModuleType) else type(fam).__module__
                mod = sys.modules.get(modname)
                mfile = getattr(mod, "__file__", None)
                if mfile:
                    fam.folder = Path(mfile).resolve().parent
        else:
            assert src.folder is not None
            path = src.folder / "family.py"
            tag = hashlib.sha1(str(path).encode()).hexdigest()[:8]  # two folders may hold families of one name
            with no_exit(src.name, "importing family.py"), running(src.name, "importing family.py"):
                mod = _load_module(path, f"evo_family_{src.name.replace('-', '_')}_{tag}")
            fam = getattr(mod, "FAMILY", None)
            if not isinstance(fam, Family):
                raise FamilyError(f"{label}: family.py does not define FAMILY = <a Family instance>")
            fam.folder = src.folder
    except FamilyError:
        raise
    except SystemExit as e:  # sys.exit() at import: the family's code, not evo's command, must not end it
        raise FamilyError(f"{label}: importing family.py called sys.exit({e.code!r})") from None
    except Exception as e:  # a broken family is one line, whatever it raised
        raise FamilyError(f"{label}: {_one_line(e)}") from None
    if not isinstance(fam, Family):
        raise FamilyError(f"{label}: the entry point gives {type(fam).__name__}, not a Family")
    if not fam.name:
        fam.name = src.name
    problem = family_problem(fam)
    if problem:
        raise FamilyError(f"{label}: {problem}")
    try:
        fam.check_entry()
    except ValueError as e:
        raise FamilyError(f"{label}: {e}") from None
    return fam


def _launch_only_problem(fam: Family) -> str | None:
    """A knob marked launch_only that the kernel's text reads after all (its macro would be undefined: the build
    fails, or an #ifdef quietly takes one path for every value), or that names a template argument."""
    text = fam.kernel_path.read_text()
    for k in fam.knobs:
        if k.launch_only and f"EVO_{k.name.upper()}" in text:
            return f"knob {k.name} is launch_only but {fam.kernel_path.name} reads EVO_{k.name.upper()}"
        if k.launch_only and k.name in _PLACEHOLDER_RE.findall(fam.entry):
            return f"knob {k.name} is launch_only but names a template argument of entry {fam.entry!r}"
    return None


def family_problem(fam: Family) -> str | None:
    """What is wrong with a loaded family that would fail later, or None (checked as it is loaded)."""
    names = [k.name for k in fam.knobs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        return f"knob {dup[0]} is declared twice"
    bad = [n for n in names if not re.fullmatch(r"[a-z_][a-z0-9_]*", n)]
    if bad:
        return f"knob name {bad[0]!r}: lower-case letters, digits and _ only (it becomes EVO_{bad[0].upper()})"
    if not fam.entry:
        return "entry (the kernel's name) is empty"
    if not fam.kernel_path.is_file():
        return f"no kernel source at {fam.kernel_path}"
    launch_only = _launch_only_problem(fam)
    if launch_only:
        return launch_only
    if fam.compiler not in ("auto", "nvrtc", "nvcc"):
        return f"compiler is {fam.compiler!r}: one of auto, nvrtc, nvcc"
    if not isinstance(fam.torch_headers, bool):
        return f"torch_headers is {fam.torch_headers!r}: True or False"
    for field_name in ("include_dirs", "nvrtc_options", "compile_options"):
        value = getattr(fam, field_name)
        if not isinstance(value, (tuple, list)) or not all(isinstance(x, str) for x in value):
            return f"{field_name} is {value!r}: a tuple of strings, e.g. {field_name}=({value!r},)"
    for d in fam.include_dirs:
        where = Path(d).expanduser()
        where = where if where.is_absolute() else fam.folder / where
        if not where.is_dir():
            return f"include_dirs: {d!r} is not a folder ({where.resolve()}; a relative one starts at the family's)"
    sup = [s.name for s in fam.sanitizer_suppressions]
    for s in fam.sanitizer_suppressions:
        why = s.problem(names) if isinstance(s, SanitizerSuppression) else f"{s!r} is not a SanitizerSuppression"
        if why:
            return why
        if sup.count(s.name) > 1:
            return f"sanitizer suppression {s.name} is declared twice"
    return None


def load_family(ref: str, root: Path | None = None, base: Path | None = None) -> Family:
    """The family ``ref`` names (a name, or a path to its folder; see :func:`resolve_family`)."""
    return load_source(resolve_family(ref, root, base))
