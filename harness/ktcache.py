"""Kernel Tuner cache files as recorded landscapes: read one, replay it on the CPU as evo's recorded backend.

Kernel Tuner (``tune_kernel(..., cache=PATH)``) records every configuration it benchmarked in one JSON file,
the layout ``kernel_tuner/util.py`` ``process_cache`` writes and ``read_cache`` reads::

    {"device_name": "NVIDIA A100-PCIE-40GB", "kernel_name": "matmul_kernel", "problem_size": [4096, 4096],
     "tune_params_keys": ["block_size_x", "tile_size_y"], "tune_params": {"block_size_x": [16, 32], ...},
     "objective": "time",
     "cache": {"16,1": {"block_size_x": 16, "tile_size_y": 1, "time": 3.87, "times": [3.97, 3.87, ...],
                        "compile_time": 918.6, ...},
               "16,2": {"block_size_x": 16, "tile_size_y": 2, "time": "InvalidConfig", ...}}}

Times are milliseconds. A configuration that could not be measured carries the name of Kernel Tuner's error class
as a string (``InvalidConfig``: not launchable as asked, e.g. a block too large; ``CompilationFailedConfig``;
``RuntimeFailedConfig``: the launch failed) in its objective field (Kernel Tuner 0.4 to 1.0) or in ``__error__``
(1.x); Kernel Tuner 0.x wrote a time of 1e20 instead. A file left open by a killed run (no closing brackets, a
trailing comma) is read as Kernel Tuner reads it. ``.json.gz`` (a compressed cache) is read through gzip.

As evo sees one (:func:`read_kt_cache`, then :func:`kt_family`): the cache is the family. Its ``tune_params`` are
the knobs (values in the cache's order), its one problem size is the one geometry (parameter ``problem_size``),
its ``kernel_name`` the entry, and the baseline is the valid configuration whose values come first in that order.
``InvalidConfig`` and configurations the cache does not hold are ruled out by ``family.check`` (never proposed,
as Kernel Tuner's restrictions would); ``CompilationFailedConfig`` is a compile error and ``RuntimeFailedConfig``
a launch error when proposed (an evaluation each, as in Kernel Tuner's simulation mode). The recorded backend
(:class:`KTCacheBackend`) serves each configuration's recorded ``times`` (scaled so that their median is the
cache's ``time``; sorted, as a cache holds no pairing of rounds across configurations), and every line of such a
run says "simulated from a Kernel Tuner cache recorded on <its device_name>". Correctness is what Kernel Tuner
recorded: a configuration with a time passed (or was not asked) its verification.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from evo.core.family import Family, FamilyError, Geometry, GeometryParam, Knob, Launch, OutputSpec
from evo.core.genome import Genome
from harness.build import Builder, BuildError
from harness.errors import HarnessError
from harness.recorded import RecordedBackend, Sweep

SUFFIXES = (".json", ".json.gz")
ERRORS = ("InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig", "ErrorConfig")  # util.py's classes
OLD_INVALID = 1e20  # Kernel Tuner 0.x's time of a configuration that failed (KTdashboard still filters it)
REQUIRED = ("device_name", "kernel_name", "tune_params_keys", "tune_params", "cache")
GEOMETRY_PARAM = "problem_size"
OUTPUT = "out"  # the one output the replayed correctness evidence names
REPEAT = 5  # rounds served for a configuration recorded with one time only


class KTCacheError(ValueError):
    """A file that is not a readable Kernel Tuner cache (one line, naming the file)."""


class LaunchFailed(HarnessError):
    """Kernel Tuner recorded RuntimeFailedConfig: the launch failed (e.g. too many resources requested)."""

    kind, gate = "launch", "static"


@dataclass
class KTEntry:
    """One configuration of a cache: its knob values, its time (ms) and per-iteration times, or its error."""

    key: str  # Kernel Tuner's key: the values in tune_params_keys order, joined by commas
    params: dict[str, Any]
    time_ms: float | None  # None: an error
    times_ms: list[float] = field(default_factory=list)
    error: str | None = None  # a Kernel Tuner error class name (ERRORS)
    compile_ms: float | None = None


@dataclass
class KTCache:
    """A Kernel Tuner cache file as read (:func:`read_kt_cache`)."""

    path: Path
    device_name: str
    kernel_name: str
    problem_size: Any  # a list of ints as Kernel Tuner writes it; None where the file has none
    tune_params: dict[str, list[Any]]  # in tune_params_keys order
    objective: str
    entries: dict[str, KTEntry]  # genome key -> entry

    @property
    def problem_text(self) -> str:
        """The problem size as the geometry parameter's value ("4096x4096")."""
        ps = self.problem_size
        if isinstance(ps, (list, tuple)):
            return "x".join(str(v) for v in ps) or "none"
        return "none" if ps is None else str(ps)

    @property
    def label(self) -> str:
        """What every line of a replay of this cache says of where its numbers come from."""
        return f"simulated from a Kernel Tuner cache recorded on {self.device_name}"

    def valid(self) -> dict[str, KTEntry]:
        return {k: e for k, e in self.entries.items() if e.error is None}

    def baseline(self) -> KTEntry:
        """The valid configuration whose values come first in the cache's order of each knob's values."""
        index = {n: {json.dumps(v): i for i, v in enumerate(vals)} for n, vals in self.tune_params.items()}

        def rank(e: KTEntry) -> tuple[int, ...]:
            return tuple(index[n].get(json.dumps(e.params[n]), len(index[n])) for n in self.tune_params)

        valid = self.valid().values()
        if not valid:
            raise KTCacheError(f"{self.path}: no configuration of the cache has a time (nothing to replay)")
        return min(valid, key=rank)

    def objectives(self) -> dict[str, float | None]:
        """Genome key -> the baseline's time / its time (higher is faster; None: an error), for the search
        benchmark: the landscape as Kernel Tuner's objective ranks it."""
        base = self.baseline().time_ms
        assert base is not None
        return {k: (None if e.time_ms is None else base / e.time_ms) for k, e in self.entries.items()}


def is_kt_cache_path(ref: str | Path) -> bool:
    """Whether a ``family:`` (or `evo run` argument) names a Kernel Tuner cache file, by its suffix."""
    name = str(ref).lower()
    return any(name.endswith(s) for s in SUFFIXES)


def _text(path: Path) -> str:
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KTCacheError(f"{path}: no such Kernel Tuner cache file") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise KTCacheError(f"{path}: not a readable Kernel Tuner cache ({type(e).__name__}: {e})") from None


def _parse(text: str) -> Any:
    """The JSON of a cache; one a killed run left open (no closing brackets, maybe a trailing comma) is closed as
    Kernel Tuner's ``correct_open_cache`` does. Raises json.JSONDecodeError (the file's own error)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        s = text.strip()
        if not s.startswith("{"):
            raise
        try:
            return json.loads((s[:-1] if s.endswith(",") else s) + "}\n}")
        except json.JSONDecodeError:
            raise first from None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _entry(key: str, raw: Any, names: Sequence[str], tune_params: Mapping[str, list[Any]], objective: str) -> KTEntry:
    """One cache entry; its knob values from the entry itself, else from its key (matched by str(), as Kernel
    Tuner builds keys)."""
    if not isinstance(raw, dict):
        raise ValueError(f"entry {key!r} is a JSON {type(raw).__name__}, not an object")
    params: dict[str, Any] = {}
    parts = key.split(",")
    for i, n in enumerate(names):
        if n in raw:
            params[n] = raw[n]
            continue
        match = [v for v in tune_params[n] if i < len(parts) and str(v) == parts[i]]
        if not match:
            raise ValueError(f"entry {key!r} has no value of {n}")
        params[n] = match[0]
    error = next((v for v in raw.values() if isinstance(v, str) and v in ERRORS), None)
    t = _number(raw.get("time", raw.get(objective)))
    if error is None and (t is None or t <= 0 or t >= OLD_INVALID):
        error = "RuntimeFailedConfig" if t is not None and t >= OLD_INVALID else "InvalidConfig"
    times = [float(x) for x in raw.get("times") or [] if _number(x) is not None and x > 0]
    return KTEntry(key, params, None if error else t, [] if error else times, error, _number(raw.get("compile_time")))


def read_kt_cache(path: str | Path) -> KTCache:
    """The Kernel Tuner cache at ``path`` (``.json`` or ``.json.gz``); raises KTCacheError (one line)."""
    p = Path(path).expanduser()
    try:
        doc = _parse(_text(p))
    except json.JSONDecodeError as e:
        raise KTCacheError(f"{p}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict):
        raise KTCacheError(f"{p}: not a Kernel Tuner cache (a JSON {type(doc).__name__}, not an object)")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise KTCacheError(f"{p}: not a Kernel Tuner cache (missing {', '.join(missing)})")
    names = doc["tune_params_keys"]
    tp = doc["tune_params"]
    if not isinstance(names, list) or not isinstance(tp, dict) or any(n not in tp for n in names):
        raise KTCacheError(f"{p}: tune_params_keys and tune_params do not name the same parameters")
    if not isinstance(doc["cache"], dict):
        raise KTCacheError(f"{p}: its cache is not a JSON object")
    tune_params = {n: list(tp[n]) for n in names}
    objective = str(doc.get("objective") or "time")
    entries: dict[str, KTEntry] = {}
    for key, raw in doc["cache"].items():
        try:
            one = _entry(str(key), raw, names, tune_params, objective)
        except ValueError as err:
            raise KTCacheError(f"{p}: {err}") from None
        entries[Genome(one.params).key] = one
    return KTCache(
        p, str(doc["device_name"]), str(doc["kernel_name"]), doc.get("problem_size"), tune_params, objective, entries
    )


# --- the cache as a family ------------------------------------------------------------------------------------------
def _ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "kt_cache"


@dataclass
class KTCacheFamily(Family):
    """A Kernel Tuner cache as a family: knobs, one geometry and validity, no kernel (replayed only)."""

    recorded_only: ClassVar[bool] = True  # no source: built by :class:`CacheBuilder`, measured by the cache
    cache: KTCache | None = None

    @property
    def kt(self) -> KTCache:
        assert self.cache is not None
        return self.cache

    @property
    def kernel_path(self) -> Path:
        return self.kt.path

    def own_builder(self, geometries: Sequence[Geometry]) -> Builder:
        """The builder harness.build.Builder.for_config gives this family: :class:`CacheBuilder`."""
        return CacheBuilder(self, geometries)

    def source(self) -> str:
        raise FamilyError(f"family {self.name} is a Kernel Tuner cache: it holds measurements, no kernel source")

    def check(self, genome: Mapping[str, Any], geometries: Sequence[Geometry]) -> str | None:
        e = self.kt.entries.get(Genome(genome).key)
        if e is None:
            return "not in the Kernel Tuner cache (never measured)"
        if e.error == "InvalidConfig":
            return "Kernel Tuner recorded InvalidConfig (not launchable as asked)"
        return None

    def launch(self, genome: Mapping[str, Any], geometry: Geometry) -> Launch:
        """Kernel Tuner's block_size_x/y/z where the cache has them (its names for the thread block)."""
        b = tuple(int(genome.get(f"block_size_{a}", 1)) for a in "xyz")
        return Launch((1, 1, 1), (b[0], b[1], b[2]))

    def outputs(self, geometry: Geometry) -> list[OutputSpec]:
        return [OutputSpec(OUTPUT, "float32", (1,))]

    def make_inputs(self, geometry: Geometry, seed: int, device: Any) -> dict[str, Any]:
        raise FamilyError(f"family {self.name} is a Kernel Tuner cache: it has no inputs to make (replay only)")

    def reference(self, inputs: Mapping[str, Any], geometry: Geometry, dtype: Any = None) -> dict[str, Any]:
        raise FamilyError(f"family {self.name} is a Kernel Tuner cache: it has no reference (replay only)")

    def kernel_args(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], geometry: Geometry) -> list[Any]:
        raise FamilyError(f"family {self.name} is a Kernel Tuner cache: it has no kernel arguments (replay only)")


def kt_family(cache: KTCache) -> KTCacheFamily:
    """The family a cache is (see the module's docstring)."""
    base = cache.baseline()
    knobs = tuple(Knob(n, tuple(v), base.params[n], doc=f"Kernel Tuner's {n}") for n, v in cache.tune_params.items())
    valid = len(cache.valid())
    return KTCacheFamily(
        name=_ident(re.sub(r"\.json(\.gz)?$", "", cache.path.name, flags=re.I)),
        description=(
            f"Kernel Tuner cache {cache.path.name}: {cache.kernel_name} on {cache.device_name}, problem size "
            f"{cache.problem_text}, {len(cache.entries)} configurations ({valid} with a time)"
        ),
        entry=cache.kernel_name,
        knobs=knobs,
        geometry_params=(
            GeometryParam(
                GEOMETRY_PARAM,
                str,
                cache.problem_text,
                (cache.problem_text,),
                doc="the cache's problem_size (its only geometry)",
            ),
        ),
        folder=cache.path.parent,
        cache=cache,
    )


def load_kt_family(ref: str, base: Path | None = None) -> KTCacheFamily:
    """The family of the cache file ``ref`` (relative to ``base``, e.g. the config's folder); raises FamilyError."""
    p = Path(ref).expanduser()
    if not p.is_absolute():
        p = (base or Path.cwd()) / p
    try:
        return kt_family(read_kt_cache(p.resolve()))
    except KTCacheError as e:
        raise FamilyError(str(e)) from None


ATTEMPTS = 150  # `evo run CACHE.json`'s budget (the shipped configs'), or the cache's valid configurations if fewer


def kt_config(path: Path) -> dict[str, Any]:
    """The campaign config `evo run CACHE.json` runs (evo/config.py reads it as it reads a YAML file's): named after
    the cache's family, its one geometry, the recorded backend, no torch.compile peer (there is no reference to
    compile); the ledger goes to logs/<campaign>/ under the working directory, as for any config without a
    storage."""
    fam = kt_family(read_kt_cache(path))
    return {
        "campaign": fam.name,
        "family": str(path.resolve()),
        "geometries": [{"weight": 1}],
        "budget": {"attempts": min(ATTEMPTS, len(fam.kt.valid()))},
        "backend": "recorded",
        "peer": {"torch_compile": "off"},
    }


def geometry_name(cache: KTCache) -> str:
    """The geometry's name where a config gives none (evo/config.py names it from its parameters)."""
    return f"{GEOMETRY_PARAM}{cache.problem_text}"


# --- the cache as a recorded sweep ----------------------------------------------------------------------------------
def _rounds(e: KTEntry) -> list[float]:
    """µs per round: the recorded iterations scaled to the cache's time as their median, sorted (see the module)."""
    assert e.time_ms is not None
    if len(e.times_ms) < 2:
        return [e.time_ms * 1000.0] * REPEAT
    med = statistics.median(e.times_ms)
    return sorted(x * e.time_ms / med * 1000.0 for x in e.times_ms)


def kt_sweep(cache: KTCache) -> dict[str, Any]:
    """The cache as an evo sweep document (harness/sweepfile.py's format 1, in memory), for the recorded backend
    and the search benchmark (tools/search_bench.py reads its objectives as it does a sweep's)."""
    g = geometry_name(cache)
    base = cache.baseline()
    base_t = _rounds(base)
    bmed = statistics.median(base_t)
    check = [g, 0, OUTPUT, ["="], 0, 0, 0.0, 0.0, ""]  # Kernel Tuner kept it: it passed (or skipped) verification
    genomes: dict[str, Any] = {}
    for key, e in cache.entries.items():
        if e.error is not None:
            genomes[key] = {"status": e.error, "reason": f"Kernel Tuner recorded {e.error}"}
            continue
        t = _rounds(e)
        genomes[key] = {"checks": [check], "t": {g: t}, "b": {g: [bmed] * len(t)}}
    created = dt.datetime.fromtimestamp(cache.path.stat().st_mtime, dt.UTC).isoformat(timespec="seconds")
    return {
        "format": 1,
        "family": kt_family(cache).name,
        "created": created,
        "device": {"name": cache.device_name, "source": "Kernel Tuner cache"},
        "geometries": [{"name": g, "params": {GEOMETRY_PARAM: cache.problem_text}, "weight": 1.0}],
        "seeds": 1,
        "runs": 1,
        "launches": {g: 1},
        "baseline_key": Genome(base.params).key,
        "baseline_hashes": {f"{g}/0/{OUTPUT}": "kernel-tuner"},
        "baseline_errors": {f"{g}/0/{OUTPUT}": 0.0},
        "aa": {g: {"a": base_t, "b": list(base_t)}},  # no A/A in a cache: the floor is 0, min_gain decides
        "copy_ceiling": {},
        "genomes": genomes,
        "space": {"knobs": cache.tune_params},
    }


def kt_landscape(path: str | Path) -> tuple[KTCacheFamily, list[Geometry], dict[str, Any]]:
    """A cache as the search benchmark takes a recorded landscape: its family, its one geometry and the sweep
    document (:func:`kt_sweep`). Raises KTCacheError."""
    cache = read_kt_cache(path)
    fam = kt_family(cache)
    geo = Geometry(geometry_name(cache), {GEOMETRY_PARAM: cache.problem_text}, 1.0)
    return fam, [geo], kt_sweep(cache)


class KTCacheBackend(RecordedBackend):
    """The recorded backend replaying a Kernel Tuner cache; labelled with the device the cache names."""

    def __init__(self, family: KTCacheFamily, geometries: Sequence[Geometry], **kwargs: Any):
        cache = family.kt
        data = kt_sweep(cache)
        recorded = data["geometries"][0]["name"]
        for g in geometries:
            if g.params.get(GEOMETRY_PARAM) != cache.problem_text:
                raise KTCacheError(f"geometry {g.name}: the cache {cache.path.name} holds {cache.problem_text} only")
        self.cache = cache
        self.label = cache.label
        sweep = Sweep(cache.path, data, {g.name: recorded for g in geometries})
        super().__init__(family, geometries, sweep=sweep, **kwargs)

    def facts(self) -> dict[str, Any]:
        return {
            "name": self.cache.device_name,
            "recorded": f"{self.cache.path.name} (Kernel Tuner cache, {self.sweep.data['created']})",
            "note": self.label,
        }

    def _entry(self, key: str) -> dict[str, Any]:
        e = super()._entry(key)
        if e.get("status") == "CompilationFailedConfig":
            raise BuildError("Kernel Tuner recorded CompilationFailedConfig for this configuration")
        if e.get("status") == "RuntimeFailedConfig":
            raise LaunchFailed("Kernel Tuner recorded RuntimeFailedConfig for this configuration (the launch failed)")
        return e


@dataclass
class CacheBuilt:
    """What the builder tells the loop of a cached configuration: nothing compiled, so no machine code to compare
    and no resources for the static gate."""

    genome_key: str
    modules: dict[str, Any] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)
    source_sha256: str = ""
    cubin_sha256: str = ""
    sass_sha256: str = ""
    compile_s: float = 0.0


class CacheBuilder(Builder):
    """The builder of a Kernel Tuner cache family: compiles nothing (there is no source); a configuration the cache
    recorded as CompilationFailedConfig fails to build, as it did for Kernel Tuner."""

    def __init__(self, family: Family, geometries: Sequence[Geometry] = (), arch: str = "recorded", **_: Any):
        self.family = family
        self.geometries = list(geometries)
        self.arch = "recorded"
        self.source_hook = None
        self.route_note = ""

    def build(self, genome: Mapping[str, Any], source: str | None = None) -> Any:
        key = Genome(genome).key
        cache = getattr(self.family, "cache", None)
        e = cache.entries.get(key) if cache is not None else None
        if e is not None and e.error == "CompilationFailedConfig":
            raise BuildError("Kernel Tuner recorded CompilationFailedConfig for this configuration")
        return CacheBuilt(key)

    def source_for(self, genome: Mapping[str, Any], base_source: str | None = None) -> str:
        raise BuildError("a Kernel Tuner cache holds measurements, no kernel source")
