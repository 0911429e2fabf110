"""Campaign configuration: YAML -> validated dataclasses.

Each key is declared once, in the dataclasses below (type, default, range or choices, doc); the loader, `evo config`
and docs/config.md read those declarations. Every problem is reported as one :class:`ConfigError` line that names
the key, what was given and what is allowed; the CLI prints it and exits with code 2.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evo.backends import BACKENDS
from evo.core.family import CONFIGS_DIR, Family, FamilyError, Geometry, load_family
from evo.core.genome import Genome
from evo.core.suggest import did_you_mean
from evo.inputs import NAME_LIMIT, InputError, finite, load_yaml, read_text, yaml_problem
from evo.ledger.storage_url import StorageURLError, is_rdb_url, sqlite_path, sqlite_url
from evo.measure.peer_kernels import PeerError, PeerKernel, parse_peer_kernels
from evo.measure.sanitize import DEFAULT_TOOLS, TOOLS


class ConfigError(Exception):
    """A configuration problem, phrased as one line for the user."""


# ---------------------------------------------------------------------------
# The schema: each config key is declared once, as a dataclass field whose metadata holds its doc and the range or
# choices it is held to. Validation (_fill, _get), `evo config` and docs/config.md all read these declarations.


@dataclass(frozen=True)
class Key:
    """A config key's declaration beside its dataclass field (whose type and default are the key's).

    ``custom``: the loader parses it with code of its own (a path, an argv list, a family's name...) and the
    declaration is its documentation; ``shown``: the default as people read it where the loader computes it."""

    doc: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    choices: Sequence[str] | None = None  # (the backends' names: read when used, evo/core/plugins.py)
    kind: str | None = None  # the YAML type as people read it, where the field's type does not say it
    allowed: str | None = None  # what is allowed, in words, where neither range nor choices say it
    shown: str | None = None
    required: bool = False
    custom: bool = False


def key(default: Any = MISSING, doc: str = "", *, factory: Any = MISSING, **kw: Any) -> Any:
    """A dataclass field declared as a config key (see Key)."""
    return field(default=default, default_factory=factory, metadata={"key": Key(doc, **kw)})


MAX_ATTEMPTS = 10_000_000
MAX_MINUTES = 1_000_000.0


@dataclass(frozen=True)
class Budget:
    attempts: int | None = key(None, "attempts to make, counted across resumes", lo=1, hi=MAX_ATTEMPTS)
    minutes: float | None = key(None, "minutes of search, counted across resumes", lo=0, hi=MAX_MINUTES, lo_open=True)


@dataclass(frozen=True)
class ProposerConfig:
    name: str = key(
        "surrogate",  # the default proposer (docs/search-efficiency.md: fewest evaluations on every recorded sweep)
        "search strategy, one module each in evo/search/",
        custom=True,
        allowed="a proposer's name (below)",
    )
    options: dict[str, Any] = key(
        factory=dict, doc="the strategy's options (its table below)", custom=True, kind="mapping"
    )


@dataclass(frozen=True)
class StaticGateConfig:
    max_registers: int = key(255, "registers per thread a candidate may use (ptxas's report)", lo=16, hi=255)
    allow_new_spills: bool = key(False, "accept a candidate that spills where the baseline does not")


@dataclass(frozen=True)
class CorrectnessGateConfig:
    mode: str = key(
        "exact",
        "exact: output bytes hash equal to the baseline's; tolerance: error against float64 within a factor of "
        "the baseline's",
        choices=("exact", "tolerance"),
    )
    seeds: int = key(3, "seeded random input sets", lo=3, hi=64)
    runs: int = key(2, "runs per input set (each must give the same bytes)", lo=2, hi=16)
    tolerance_factor: float = key(
        2.0, "tolerance mode: how many times the baseline's error is allowed", lo=1.0, hi=100.0
    )


@dataclass(frozen=True)
class PerfGateConfig:
    rounds: int = key(12, "interleaved candidate / champion / baseline rounds per geometry", lo=6, hi=1000)
    aa_rounds: int = key(30, "rounds of the A/A noise-floor measurement at the start", lo=6, hi=1000)
    min_gain: float = key(0.01, "smallest speedup a win needs (beside 3 x the noise floor)", lo=0.0, hi=1.0)
    confidence: float = key(0.95, "confidence of the lower bound of the speedup", lo=0.5, hi=0.999)
    batch_ms: float = key(1.0, "milliseconds of launches in each part's timed CUDA graph", lo=0.01, hi=1000.0)
    rule: str = key(
        "every",
        "every: a win on every weighted geometry; weighted: on the weighted geometric mean",
        choices=("every", "weighted"),
    )
    max_floor: float = key(0.002, "largest A/A noise floor a campaign starts with", lo=0.0, hi=0.5)
    early_rounds: int = key(
        6,
        "stop a candidate after this many rounds when it was slower in every pair (gates.perf.EarlyStop)",
        lo=0,
        hi=999,
        allowed="0 (off), or 4 to rounds - 1",
    )
    # pdl: programmatic dependent launch wherever the family says the kernel is safe for it (Family.pdl_safe;
    # built with EVO_PDL=1), so each launch may overlap the one before, as in an engine that launches with PDL.
    launch: str = key(
        "plain",
        "how every timed launch is made: plain, or pdl (programmatic dependent launch where the kernel allows it)",
        choices=("plain", "pdl"),
    )
    ceiling_check: int = key(
        6, "as a run ends, the champion and the copy ceiling measured alternately this many times; 0: off", lo=0, hi=100
    )
    watched_slack: float = key(
        0.0,
        "how much slower than the champion a watched geometry (weight 0) may get, a fraction, with watched: "
        "champion; never slower than the baseline",
        lo=0.0,
        hi=0.5,
    )
    watched: str = key(
        "baseline",
        "what a watched geometry (weight 0) is guarded against: baseline (never slower than the baseline beyond "
        "noise) or champion (never slower than the champion beyond noise or watched_slack); not given: champion "
        "where watched_slack is above 0 (its meaning before this key), else baseline",
        choices=("baseline", "champion"),
    )


@dataclass(frozen=True)
class GateConfig:
    static: StaticGateConfig = key(factory=StaticGateConfig, doc="the static gate (ptxas's report)")
    correctness: CorrectnessGateConfig = key(factory=CorrectnessGateConfig, doc="the correctness gate")
    perf: PerfGateConfig = key(factory=PerfGateConfig, doc="the perf gate")


@dataclass(frozen=True)
class PeerConfig:
    torch_compile: str = key(
        "default",
        "torch.compile of the reference, timed beside the champion",
        choices=("default", "max-autotune", "off"),
    )
    nvbench: Path | None = key(
        None,
        "an nvbench --json result of the baseline kernel (relative to the config): the time of the state matching "
        "each geometry, shown beside the champion (evo/report/nvbench_peer.py)",
        custom=True,
        kind="path",
        shown="none",
    )
    nvbench_benchmark: str | None = key(
        None,
        "which benchmark of that file",
        custom=True,
        shown="the file's only one, or the one named as the family's entry or name",
    )
    kernels: tuple[PeerKernel, ...] = key(
        (),
        "other kernels of the same problem (a family folder, name or config each, or {family, name, genome}), "
        "timed interleaved with the champion at every geometry at the end of a run (docs/measurement.md, Peers)",
        custom=True,
        kind="list",
        shown="none",
    )


@dataclass(frozen=True)
class BoundConfig:
    profile: Path = key(
        doc="a YAML decode profile or a torch.profiler / nsys CSV export (relative to the config)",
        custom=True,
        required=True,
        kind="path",
    )
    kernel: str = key(doc="the profile's name of this kernel", custom=True, shown="the family's name")
    geometry: str = key(
        doc="the campaign's geometry the bound is taken at", custom=True, shown="the first weighted one"
    )
    noise_floor: float | None = key(
        None, "decode noise floor", lo=0.0, hi=0.5, shown="the profile's decode_noise_floor"
    )


@dataclass(frozen=True)
class E2EConfig:
    command: tuple[str, ...] = key(
        doc="the decode command, printing tokens/s and a sha256", custom=True, required=True, kind="argv list"
    )
    runs: int = key(2, "runs of the command per side", lo=2, hi=50)
    timeout_s: float = key(600.0, "seconds a run may take", lo=1.0, hi=86400.0)
    env: dict[str, str] = key(factory=dict, doc="environment variables for the command", custom=True)


@dataclass(frozen=True)
class WorkerConfig:
    isolation: str = key(
        "auto",
        "where candidates run: auto (a worker process on the GPU, in-process on recorded data), worker, none",
        choices=("auto", "worker", "none"),
    )
    timeout_s: float = key(
        120.0, "seconds a backend call may take; a hang past it kills the worker", lo=1.0, hi=86400.0
    )
    prefetch: int = key(
        -1,
        "NVRTC processes compiling the next proposals while the GPU measures (evo/loop/prefetch.py)",
        lo=0,
        hi=16,
        custom=True,
        shown="auto (1 on a GPU, 0 else)",
        allowed="auto or an integer 0..16",
    )


@dataclass(frozen=True)
class OutsideProposerConfig:
    """A command that answers the champion's source and the attempt history with a patch (evo.search.outside)."""

    command: tuple[str, ...] = key(
        doc="the proposer command (e.g. [python, -m, evo.search.rules])",
        custom=True,
        required=True,
        kind="argv list",
    )
    every: int = key(1, "ask it for one attempt in every `every`", lo=1, hi=1000)
    timeout_s: float = key(
        120.0, "seconds an answer may take; a hang is killed, recorded as error: proposer", lo=0.1, hi=86400.0
    )
    max_failures: int = key(
        3, "consecutive failed answers after which it is not asked again this session", lo=1, hi=1000000
    )
    env: dict[str, str] = key(factory=dict, doc="environment variables for the command", custom=True)


@dataclass(frozen=True)
class IdeasConfig:
    """Source-level ideas (evo/search/ideas.py): genes switched on and off, and an optional outside proposer."""

    toggle: float = key(0.2, "chance per attempt of switching one idea on or off on the champion", lo=0.0, hi=1.0)
    folder: bool = key(True, "use the family's ideas/ folder")
    proposer: OutsideProposerConfig | None = key(
        None, "an outside command that proposes patches", custom=True, kind="mapping", shown="none"
    )


@dataclass(frozen=True)
class SanitizerConfig:
    """compute-sanitizer over each step before it becomes the champion (gates/sanitizer.py), over the champion
    after a GPU run if the gate did not check it, and on demand (`evo sanitize`); evo/measure/sanitize.py runs it."""

    enabled: str = key("auto", "auto: where a GPU and compute-sanitizer exist", choices=("auto", "on", "off"))
    tools: tuple[str, ...] = key(
        DEFAULT_TOOLS, "compute-sanitizer tools, each once", custom=True, kind="list", choices=TOOLS
    )
    timeout_s: float = key(300.0, "seconds per tool", lo=1.0, hi=86400.0)
    all_kernels: bool = key(
        False, "instrument every kernel the target launches (false: only the family's kernel, --kernel-name)"
    )
    parallel: bool = key(True, "run the tools at the same time (each step waits for the slowest, not their sum)")


@dataclass(frozen=True)
class BuildConfig:
    """What the compiler gets beyond the family's own: header folders (absolute, resolved against the config's
    folder) searched after the family's, extra options for every module, and which compiler (None: the family's)."""

    include_dirs: tuple[Path, ...] = key(
        (), "header folders searched after the family's (relative to the config)", custom=True, kind="list of paths"
    )
    nvrtc_options: tuple[str, ...] = key(
        (), "extra NVRTC options for every module (NVRTC only)", custom=True, kind="list of strings"
    )
    compiler: str | None = key(
        None,
        "auto: NVRTC, and nvcc where NVRTC cannot compile the kernel as written (said once); nvrtc; nvcc (a CUDA "
        "toolkit's or the nvidia-cuda-nvcc wheel's)",
        choices=("auto", "nvrtc", "nvcc"),
        custom=True,
        shown="the family's (auto unless it says)",
    )
    compile_options: tuple[str, ...] = key(
        (),
        "the engine's own build options, passed as given to whichever compiler builds (after the family's), e.g. "
        "--expt-relaxed-constexpr, -use_fast_math, -DFOO=1",
        custom=True,
        kind="list of strings",
    )
    torch_headers: bool | None = key(
        None,
        "the installed torch's C++ include folders on the include path (nvcc), for a torch-extension .cu",
        custom=True,
        kind="bool",
        shown="the family's (false unless it says)",
    )


@dataclass(frozen=True)
class FinishConfig:
    """The finish (evo/loop/finish.py): when the search stalls or its budget nears its end, the champion's near misses
    are measured head to head with more rounds, and a step needs the lower bound of its speedup to clear
    `1 + max(min_gain, 3 x the A/A floor)` with this section's min_gain (docs/measurement.md, "The finish")."""

    enabled: bool = key(True, "run the finish (false: the campaign ends where the search leaves it, as before)")
    top_k: int = key(
        5, "near-champions measured again: the best attempts turned down for too small a gain", lo=0, hi=100
    )
    within_pct: float = key(
        2.0, "how far below the champion (percent, weighted mean) a near-champion may have measured", lo=0.0, hi=50.0
    )
    pairs: int = key(3, "pairwise combinations of the champion's unmerged single-knob gains measured", lo=0, hi=100)
    rounds: int | None = key(
        None, "interleaved rounds of each finish measurement", lo=6, hi=1000, shown="3 x gates.perf.rounds"
    )
    min_gain: float = key(
        0.0,
        "smallest speedup a finish step needs beside 3 x the A/A floor (gates.perf.min_gain is the search's)",
        lo=0.0,
        hi=1.0,
    )
    stall: int = key(30, "attempts since the champion was accepted that make a stall", lo=1, hi=MAX_ATTEMPTS)
    budget_share: float = key(
        0.15,
        "the finish runs once the budget left (attempts or minutes) falls under this share, or under the attempts "
        "the finish would measure",
        lo=0.0,
        hi=1.0,
    )


@dataclass(frozen=True)
class SearchConfig:
    finish: FinishConfig = key(factory=FinishConfig, doc="near-champions head to head as the search ends")


@dataclass(frozen=True)
class GeometryEntry:
    """The keys of a geometries[] entry beside the family's geometry parameters (`evo families` lists those)."""

    weight: float = key(1.0, "weight in the score; 0: watched (must not regress, not optimized)", lo=0)
    name: str | None = key(None, "the geometry's name", custom=True, shown="its values joined, e.g. T4096_H4096")


@dataclass
class CampaignConfig:
    path: Path  # the config file (not a key)
    campaign: str = key(
        doc="name of the campaign (letters, digits, _ . -): names logs/<campaign>/ and the Optuna study",
        custom=True,
        required=True,
    )
    family: Family = key(
        doc="a family's name, or a path to its folder or to a Kernel Tuner cache file (.json, .json.gz: "
        "docs/kernel-tuner.md), relative to this file",
        custom=True,
        required=True,
        kind="string",
    )
    geometries: list[Geometry] = key(
        doc="list of shapes with weights", custom=True, required=True, kind="list of mappings (geometries[] below)"
    )
    budget: Budget = key(doc="attempts and/or minutes", required=True, custom=True)
    proposer: ProposerConfig = key(doc="search strategy", custom=True)
    gates: GateConfig = key(doc="gate settings", custom=True)
    storage: str = key(
        doc="Optuna storage URL (sqlite:///path/ledger.db, postgresql://user@host/db)",
        custom=True,
        shown="sqlite:///logs/<campaign>/ledger.db under the working directory",
    )
    seed: int = key(0, "random seed", lo=0, hi=2**31 - 1)
    backend: str = key(
        "auto",
        "gpu, recorded (the family's recorded H200 sweep, or its Kernel Tuner cache), auto, or a plug-in's backend",
        choices=BACKENDS,
    )
    clocks: str = key(
        "record", "record: read the SM clock; lock: lock it (only on a GPU you own)", choices=("record", "lock")
    )
    lock_sm_mhz: int | None = key(None, "SM clock for clocks: lock", lo=100, hi=5000)
    arch: str = key("auto", "compile target", custom=True, allowed="auto or sm_XX, e.g. sm_90")
    start: Genome | None = key(
        None,
        "knob values of the starting genome (the rest: the baseline's)",
        custom=True,
        kind="mapping",
        shown="the baseline",
    )
    knobs: dict[str, tuple[Any, ...]] = key(
        factory=dict,
        doc="restrict knobs to some of their values (knob: [values]); the baseline's value must stay",
        custom=True,
        kind="mapping",
        shown="every value",
    )
    peer: PeerConfig = key(factory=PeerConfig, doc="peer timings")
    bound: BoundConfig | None = key(None, "decode profile for the share-derived bound", custom=True, shown="none")
    worker: WorkerConfig = key(factory=WorkerConfig, doc="isolation of candidates in a worker process")
    e2e: E2EConfig | None = key(
        None,
        "end-to-end decode command (argv list) printing tokens/s and sha256; needs bound",
        custom=True,
        shown="none",
    )
    ideas: IdeasConfig | None = key(
        None,
        "source-level ideas: toggle chance, folder, outside proposer command",
        custom=True,
        shown="none: no idea genes are proposed (ideas in the ledger still build)",
    )
    sanitizer: SanitizerConfig = key(factory=SanitizerConfig, doc="compute-sanitizer on the champion after a GPU run")
    search: SearchConfig = key(factory=SearchConfig, doc="search settings beside the proposer: the finish")
    build: BuildConfig = key(
        factory=BuildConfig, doc="include folders, options and the compiler (NVRTC or nvcc)", custom=True
    )

    @property
    def build_defines(self) -> dict[str, int]:
        """Macros every module of this campaign is built with (beside the genome's): EVO_PDL=1 under launch pdl."""
        return {"EVO_PDL": 1} if self.gates.perf.launch == "pdl" else {}

    @property
    def log_dir(self) -> Path:
        """Beside a SQLite ledger; for a server storage, logs/<campaign> under the working directory."""
        path = sqlite_path(self.storage)  # (load_config refused a URL whose path cannot be told)
        return path.absolute().parent if path is not None else Path.cwd() / "logs" / self.campaign


# ---------------------------------------------------------------------------
# Reading the schema


@dataclass(frozen=True)
class SchemaKey:
    """One key of the schema, resolved: where it is, its declaration, and what people read about it."""

    name: str
    key: Key
    type: Any  # the field's type, None stripped
    default: Any  # MISSING: required or computed
    section: type | None  # the section's dataclass, for a key that is a section

    @property
    def type_text(self) -> str:
        if self.key.kind:
            return self.key.kind
        if self.section is not None:
            return "mapping"
        return _type_name(self.type).removeprefix("an ").removeprefix("a ")

    @property
    def allowed_text(self) -> str:
        k = self.key
        if k.allowed:
            return k.allowed
        if k.choices:
            return ", ".join(k.choices)
        return _range_text(k.lo, k.hi, k.lo_open) if self.type in (int, float) else ""

    @property
    def default_text(self) -> str:
        if self.key.shown:
            return self.key.shown
        if self.key.required:
            return "required"
        if self.section is not None:
            return "(section)"
        d = self.default
        if d is MISSING:
            return ""
        if d is None:
            return "none"
        if isinstance(d, bool):
            return "true" if d else "false"
        if isinstance(d, (tuple, list)):
            return "[" + ", ".join(map(str, d)) + "]"
        if isinstance(d, dict):
            return "{}"
        return str(d)


_SCHEMAS: dict[type, dict[str, SchemaKey]] = {}


def schema(cls: type) -> dict[str, SchemaKey]:
    """The keys of section ``cls`` (a dataclass above), in declaration order, by name."""
    if cls in _SCHEMAS:
        return _SCHEMAS[cls]
    hints = typing.get_type_hints(cls)
    out: dict[str, SchemaKey] = {}
    for f in dataclasses.fields(cls):
        k = f.metadata.get("key")
        if k is None:
            continue
        t = _strip_none(hints[f.name])
        default = f.default if f.default is not MISSING else MISSING
        if f.default_factory is not MISSING:
            default = f.default_factory()
        section = t if isinstance(t, type) and _is_section(t) else None
        out[f.name] = SchemaKey(f.name, k, t, default, section)
    _SCHEMAS[cls] = out
    return out


def _is_section(t: type) -> bool:
    return dataclasses.is_dataclass(t) and any("key" in f.metadata for f in dataclasses.fields(t))


def _strip_none(t: Any) -> Any:
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if type(t) is types.UnionType and len(args) == 1:
        return _strip_none(args[0])
    return typing.get_origin(t) or t


def _keys(cls: type) -> dict[str, str]:
    """Key -> doc of section ``cls``: what _section allows there."""
    return {name: sk.key.doc for name, sk in schema(cls).items()}


def _get(cls: type, name: str, raw: dict, prefix: str) -> Any:
    """Key ``name`` of section ``cls`` from ``raw``, checked against its declaration; its default where absent."""
    sk = schema(cls)[name]
    k, t, default = sk.key, sk.type, sk.default
    if k.choices and t is str:
        return _choice(raw, name, prefix, k.choices, default)
    if t in (int, float):
        return _num(raw, name, prefix, t, default, lo=k.lo, hi=k.hi, lo_open=k.lo_open)
    if t in (bool, str):
        return _expect(raw.get(name, default), t, f"{prefix}.{name}" if prefix else name)
    raise TypeError(f"{prefix}.{name}: a key of type {t} needs code of its own (custom=True)")


def _fill(cls: type, raw: dict, prefix: str) -> dict[str, Any]:
    """Every key of section ``cls`` that is not parsed by code of its own, from ``raw``."""
    return {
        name: _get(cls, name, raw, prefix)
        for name, sk in schema(cls).items()
        if not sk.key.custom and sk.section is None  # a section is read by its own _section call
    }


# ---------------------------------------------------------------------------
# Checks behind the schema: key -> (type, check, allowed text).


def _where(path: str) -> str:
    return path or "(top level)"


def _type_name(t: Any) -> str:
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    return {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "true/false",
        dict: "a mapping",
        list: "a list",
        tuple: "a list",
    }.get(t, getattr(t, "__name__", str(t)))


def _range_text(lo: float | None, hi: float | None, lo_open: bool = False) -> str:
    rng = (f"> {lo}" if lo_open else f">= {lo}") if lo is not None else ""
    if hi is not None:
        rng += f" and <= {hi}" if rng else f"<= {hi}"
    return rng


def _expect(value: Any, types: Any, key: str, allowed: str = "allowed: finite numbers") -> Any:
    ok_types = types if isinstance(types, tuple) else (types,)
    if float in ok_types and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > 1e300:
            raise ConfigError(f"{key}: {value!r} is not a finite number ({allowed})")
        return float(value)
    if isinstance(value, bool) and bool not in ok_types:
        raise ConfigError(f"{key}: expected {_type_name(types)}, got {value!r}")
    if not isinstance(value, ok_types):
        raise ConfigError(f"{key}: expected {_type_name(types)}, got {type(value).__name__} {value!r}")
    if not finite(value):  # .inf / .nan: a non-finite weight made every score non-finite
        raise ConfigError(f"{key}: {value!r} is not a finite number ({allowed})")
    return value


def _section(raw: Any, key: str, allowed: dict[str, Any]) -> dict[str, Any]:
    """Check a mapping has only known keys; return it with defaults filled in."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{_where(key)}: expected a mapping, got {type(raw).__name__}")
    for k in raw:
        if k not in allowed:
            if not (isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,40}", k)):
                # not a key anyone meant (a line of some other file: `evo status /etc/shadow`): never echoed
                where = f"under {key}" if key else "at the top level"
                raise ConfigError(
                    f"a key of {len(str(k))} characters {where} that is no setting (is this a campaign config? "
                    f"allowed here: {', '.join(sorted(allowed))})"
                )
            raise ConfigError(
                f"{key + '.' if key else ''}{k}: unknown key (allowed here: {', '.join(sorted(allowed))})"
                f"{did_you_mean(str(k), allowed)}"
            )
    return raw


def _num(
    raw: dict,
    key: str,
    prefix: str,
    types: Any,
    default: Any,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
) -> Any:
    full = f"{prefix}.{key}" if prefix else key
    if key not in raw or raw[key] is None:
        return default
    rng = _range_text(lo, hi, lo_open)
    v = _expect(raw[key], types, full, f"allowed: {rng or 'finite numbers'}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ConfigError(f"{full}: {v!r} is out of range (allowed: {rng})")
    if hi is not None and v > hi:
        raise ConfigError(f"{full}: {v!r} is out of range (allowed: {rng if lo is None else f'<= {hi}'})")
    return v


def _choice(raw: dict, key: str, prefix: str, choices: Sequence[str], default: str) -> str:
    full = f"{prefix}.{key}" if prefix else key
    if key not in raw or raw[key] is None:
        return default
    v = raw[key]
    if v not in choices:
        raise ConfigError(
            f"{full}: {v!r} is not allowed (allowed: {', '.join(choices)}){did_you_mean(str(v), choices)}"
        )
    return v


TOP_KEYS = _keys(CampaignConfig)


def shipped_config_names() -> list[str]:
    return sorted(q.stem for q in CONFIGS_DIR.glob("*.yaml"))


def shipped_config(name: str) -> Path | None:
    """A config shipped with evo, by name (``fp4_matvec`` or ``fp4_matvec.yaml``), or None."""
    stem = name[:-5] if name.endswith(".yaml") else name
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", stem) or stem.startswith("."):
        return None
    q = CONFIGS_DIR / f"{stem}.yaml"
    return q if q.is_file() else None


def _family_call(family: Family, method: str, *args: Any) -> Any:
    """A method of the user's family, whatever it raises as one ConfigError line naming it."""
    from evo.core.hooks import trace

    trace(family.name, f"{method}()")
    try:
        return getattr(family, method)(*args)
    except Exception as e:  # noqa: BLE001 - the family's own code: one line, not a traceback
        raise ConfigError(
            f"family {family.name}: {method}() raised {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        ) from None


def load_config(
    path: str | Path, *, backend_override: str | None = None, storage_override: str | None = None
) -> CampaignConfig:
    """Read and validate a campaign config; raise ConfigError with one line on any problem."""
    from evo.search import PROPOSERS  # local import: proposers import config types

    p = Path(path)
    if not p.is_file():
        p = shipped_config(str(path)) or p
    if p.suffix == ".py" and p.is_file():
        cfg = p.with_name("evo.yaml")
        hint = f", e.g. {cfg}" if cfg.is_file() else ""
        raise ConfigError(f"{p} is Python (a family?): give its campaign YAML{hint}")
    if p.is_dir():
        inside = sorted(q.name for q in p.glob("*.yaml"))
        hint = f" (it holds {', '.join(inside[:3])})" if inside else ""
        raise ConfigError(
            f"{p} is a folder: give its campaign YAML, e.g. {p / (inside[0] if inside else 'evo.yaml')}{hint}"
        )
    if not p.is_file():
        names = ", ".join(shipped_config_names()) or "none"
        raise ConfigError(
            f"{p}: no such config file (give the path of a campaign YAML, or the name of a shipped one: {names})"
        )
    try:
        raw = _kt_cache_config(p) or load_yaml(read_text(p))
    except InputError as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot be read ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML{yaml_problem(e)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping of settings at the top level, got {type(raw).__name__}")
    raw = _section(raw, "", TOP_KEYS)

    for req in ("campaign", "family", "geometries"):
        if req not in raw:
            raise ConfigError(f"{req}: missing (required: {TOP_KEYS[req]})")
    name = _expect(raw["campaign"], str, "campaign")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or set(name) == {"."}:
        raise ConfigError(
            f"campaign: {name[:60]!r} cannot name a folder (allowed: letters, digits, _ . -; not . or ..)"
        )
    if len(name) > NAME_LIMIT:
        raise ConfigError(f"campaign: {len(name)} characters, more than the {NAME_LIMIT} a campaign name may have")

    fam_name = _expect(raw["family"], str, "family")
    try:
        family = _load_family(fam_name, p.resolve().parent)  # a path is relative to the config's folder
    except FamilyError as e:
        raise ConfigError(f"family: {e}") from None

    knobs: dict[str, tuple[Any, ...]] = {}
    if raw.get("knobs") is not None:
        family = _restrict_knobs(raw["knobs"], family)
        knobs = {k: family.knob(k).values for k in raw["knobs"]}
    geometries = _geometries(raw["geometries"], family)

    budget = Budget(**_fill(Budget, _section(raw.get("budget"), "budget", _keys(Budget)), "budget"))
    if budget.attempts is None and budget.minutes is None:
        raise ConfigError("budget: give attempts and/or minutes (e.g. budget: {attempts: 150, minutes: 8})")

    pr = _section(raw.get("proposer"), "proposer", _keys(ProposerConfig))
    pname = pr.get("name", ProposerConfig.name)
    if not isinstance(pname, str) or pname not in PROPOSERS:
        raise ConfigError(
            f"proposer.name: {pname!r} is not a proposer (allowed: {', '.join(sorted(PROPOSERS))})"
            f"{did_you_mean(str(pname), PROPOSERS)}"
        )
    popts = _section(pr.get("options"), "proposer.options", PROPOSERS[pname].OPTIONS)
    try:
        PROPOSERS[pname].validate_options(popts)
    except ValueError as e:
        raise ConfigError(f"proposer.options.{e}") from None
    proposer = ProposerConfig(pname, dict(popts))

    gates = _gates(raw.get("gates"))

    storage = raw.get("storage")
    if storage_override:
        storage = storage_override
    if storage is None:  # logs/<campaign>/ under the directory evo runs in
        storage = sqlite_url(Path.cwd() / "logs" / name / "ledger.db")  # quoted: a folder may hold ? # % spaces
    storage = _expect(storage, str, "storage")
    if not is_rdb_url(storage):
        raise ConfigError(
            f"storage: {storage[:80]!r} is not a storage URL (allowed: sqlite:///path/ledger.db or "
            "postgresql://user@host/db)"
        )
    try:
        ledger_file = sqlite_path(storage)
    except StorageURLError as e:
        raise ConfigError(str(e)) from None
    if ledger_file is not None:
        parts = ledger_file.parts
        if any(len(part.encode()) > 255 for part in parts) or len(storage.encode()) > 4000:
            raise ConfigError(
                "storage: the ledger's path has a name longer than a file system takes (255 bytes a name, 4000 in all)"
            )

    top = _fill(CampaignConfig, raw, "")  # the top level's plain keys: seed, backend, clocks, lock_sm_mhz
    if backend_override:
        top["backend"] = backend_override
    arch = _expect(raw.get("arch", CampaignConfig.arch), str, "arch")
    if arch != "auto" and not re.fullmatch(r"sm_\d{2,3}a?", arch):
        raise ConfigError(f"arch: {arch!r} is not a target (allowed: {schema(CampaignConfig)['arch'].allowed_text})")

    start = None
    if raw.get("start") is not None:
        st = _expect(raw["start"], dict, "start")
        try:
            start = family.genome(st)
        except ValueError as e:
            raise ConfigError(f"start: {e}") from None
        for n, v in st.items():  # family.genome takes 256.0 for 256 and 1 for true (they compare equal)
            allowed = family.knob(n).values
            if not any(type(v) is type(x) and v == x for x in allowed):
                raise ConfigError(f"start.{n}: {v!r} has the wrong type (allowed: {list(allowed)})")
        why = _family_call(family, "check", start, geometries)
        if why:
            raise ConfigError(f"start: genome is invalid: {why}")

    pe = _section(raw.get("peer"), "peer", _keys(PeerConfig))
    if pe.get("torch_compile") is False:  # YAML 1.1 reads a bare `off` as false
        pe = {**pe, "torch_compile": "off"}
    peer = _peer(pe, p, family, geometries)

    bound = _bound(raw.get("bound"), p, family, geometries)
    w = _section(raw.get("worker"), "worker", _keys(WorkerConfig))
    if isinstance(w.get("prefetch"), str) and w["prefetch"] != "auto":
        takes = schema(WorkerConfig)["prefetch"].allowed_text
        raise ConfigError(f"worker.prefetch: {w['prefetch']!r} is not allowed (allowed: {takes})")
    prefetch = WorkerConfig.prefetch if w.get("prefetch") == "auto" else _get(WorkerConfig, "prefetch", w, "worker")
    worker = WorkerConfig(**_fill(WorkerConfig, w, "worker"), prefetch=prefetch)

    return CampaignConfig(
        build=_build(raw.get("build"), p),
        bound=bound,
        worker=worker,
        e2e=_e2e(raw.get("e2e"), bound),
        ideas=_ideas(raw["ideas"]) if "ideas" in raw else None,
        sanitizer=_sanitizer(raw.get("sanitizer")),
        search=_search(raw.get("search")),
        path=p,
        campaign=name,
        family=family,
        geometries=geometries,
        budget=budget,
        proposer=proposer,
        gates=gates,
        storage=storage,
        arch=arch,
        start=start,
        peer=peer,
        knobs=knobs,
        **top,
    )


def _build(raw: Any, cfg_path: Path) -> BuildConfig:
    b = _section(raw, "build", _keys(BuildConfig))
    dirs, opts = b.get("include_dirs") or [], b.get("nvrtc_options") or []
    copts, compiler, torch = b.get("compile_options") or [], b.get("compiler"), b.get("torch_headers")
    if compiler is not None and compiler not in ("auto", "nvrtc", "nvcc"):
        raise ConfigError(f"build.compiler: {compiler!r} is not one of auto, nvrtc, nvcc")
    if torch is not None and not isinstance(torch, bool):
        raise ConfigError(f"build.torch_headers: expected true or false, got {torch!r}")
    if torch and compiler == "nvrtc":
        raise ConfigError("build.torch_headers needs nvcc (NVRTC cannot read torch's headers): compiler nvcc or auto")
    for key, v in (("include_dirs", dirs), ("nvrtc_options", opts), ("compile_options", copts)):
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise ConfigError(f"build.{key}: expected a list of strings, got {v!r}")
    resolved = []
    for d in dirs:
        q = Path(d).expanduser()
        q = q if q.is_absolute() else (cfg_path.resolve().parent / q)
        if not q.is_dir():
            raise ConfigError(f"build.include_dirs: {d!r} is not a folder ({q})")
        resolved.append(q.resolve())
    return BuildConfig(tuple(resolved), tuple(opts), compiler, tuple(copts), torch)


def apply_budget_overrides(cfg: CampaignConfig, attempts: int | None, minutes: float | None) -> None:
    """--attempts / --minutes, held to the limits budget: has in the config (a NaN from the command line too)."""
    import math

    if attempts is None and minutes is None:
        return
    if (attempts is not None and not 1 <= attempts <= MAX_ATTEMPTS) or (
        minutes is not None and not (math.isfinite(minutes) and 0 < minutes <= MAX_MINUTES)
    ):
        raise ConfigError(
            f"--attempts must be >= 1 and --minutes > 0 (finite numbers; at most {MAX_ATTEMPTS} "
            f"attempts, {MAX_MINUTES:g} minutes)"
        )
    cfg.budget = Budget(
        attempts if attempts is not None else cfg.budget.attempts,
        minutes if minutes is not None else cfg.budget.minutes,
    )


def _kt_cache_config(p: Path) -> dict[str, Any] | None:
    """`evo run CACHE.json`: a Kernel Tuner cache given where a config goes is the config of a campaign replaying
    it (harness/ktcache.py ``kt_config``); None for any other file."""
    from harness.ktcache import KTCacheError, is_kt_cache_path, kt_config

    if not is_kt_cache_path(p):
        return None
    try:
        return kt_config(p)
    except KTCacheError as e:
        raise ConfigError(str(e)) from None


def _load_family(ref: str, base: Path) -> Family:
    """The family ``family:`` names: a family's name or folder, or a Kernel Tuner cache file (harness/ktcache.py)."""
    from harness.ktcache import is_kt_cache_path, load_kt_family

    return load_kt_family(ref, base) if is_kt_cache_path(ref) else load_family(ref, base=base)


def _geometries(raw: Any, family: Family) -> list[Geometry]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError("geometries: expected a non-empty list of shapes, e.g. [{T: 4096, H: 4096, weight: 1}]")
    params = {gp.name: gp for gp in family.geometry_params}
    out: list[Geometry] = []
    names: set[str] = set()
    for i, g in enumerate(raw):
        key = f"geometries[{i}]"
        if not isinstance(g, dict):
            raise ConfigError(f"{key}: expected a mapping of {', '.join(params)} and weight, got {g!r}")
        _section(g, key, {**params, **_keys(GeometryEntry)})
        vals: dict[str, Any] = {}
        for gp in family.geometry_params:
            if gp.name not in g:
                if gp.default is None:
                    raise ConfigError(f"{key}.{gp.name}: missing ({gp.doc or 'required by family ' + family.name})")
                vals[gp.name] = gp.default
                continue
            v = _expect(g[gp.name], gp.type, f"{key}.{gp.name}")
            if gp.choices is not None and v not in gp.choices:
                raise ConfigError(f"{key}.{gp.name}: {v!r} is not allowed (allowed: {', '.join(map(str, gp.choices))})")
            if (gp.min is not None and v < gp.min) or (gp.max is not None and v > gp.max):
                allowed = (
                    f"{gp.min}..{gp.max}"
                    if gp.min is not None and gp.max is not None
                    else f">= {gp.min}"
                    if gp.min is not None
                    else f"<= {gp.max}"
                )
                raise ConfigError(f"{key}.{gp.name}: {v!r} is out of range (allowed: {allowed})")
            vals[gp.name] = v
        why = _family_call(family, "check_geometry", vals)
        if why:
            raise ConfigError(f"{key}: family {family.name} cannot take this geometry: {why}")
        weight = _get(GeometryEntry, "weight", g, key)
        gname = g.get("name") or "_".join(f"{k}{int(v) if isinstance(v, bool) else v}" for k, v in vals.items())
        gname = _expect(gname, str, f"{key}.name")
        if len(gname) > NAME_LIMIT or not gname.isprintable():
            raise ConfigError(f"{key}.name: {gname[:40]!r}... must be printable and at most {NAME_LIMIT} characters")
        if gname in names:
            raise ConfigError(f"{key}: geometry {gname!r} is listed twice")
        names.add(gname)
        out.append(Geometry(gname, vals, weight))
    if not any(g.weight > 0 for g in out):
        raise ConfigError(
            "geometries: at least one geometry needs a weight > 0 (weight 0 only guards against regressions)"
        )
    return out


def _gates(raw: Any) -> GateConfig:
    g = _section(raw, "gates", _keys(GateConfig))
    parts: dict[str, Any] = {}
    for name, sk in schema(GateConfig).items():
        assert sk.section is not None
        where = f"gates.{name}"
        parts[name] = sk.section(**_fill(sk.section, _section(g.get(name), where, _keys(sk.section)), where))
    perf = parts["perf"]
    if "watched" not in (g.get("perf") or {}) and perf.watched_slack:  # a slack alone keeps its old meaning
        perf = parts["perf"] = dataclasses.replace(perf, watched="champion")
    if perf.watched == "baseline" and perf.watched_slack:
        raise ConfigError(
            f"gates.perf.watched_slack: {perf.watched_slack:g} is a slack against the champion, and "
            "gates.perf.watched is baseline (set watched: champion, or drop watched_slack)"
        )
    if perf.early_rounds and not 4 <= perf.early_rounds < perf.rounds:
        raise ConfigError(
            f"gates.perf.early_rounds: {perf.early_rounds} must be 0 (off) or from 4 to rounds - 1 ({perf.rounds - 1})"
        )
    return GateConfig(**parts)


def _peer(pe: dict, cfg_path: Path, family: Family, geometries: list[Geometry]) -> PeerConfig:
    """peer: torch.compile, an nvbench result's figure (evo/report/nvbench_peer.py) and kernel peers of the
    campaign's problem (evo/measure/peer_kernels.py), each refused in one line."""
    from evo.report.nvbench_peer import NvbenchError, config_keys

    try:
        nvbench, bench = config_keys(pe, cfg_path.parent, geometries, [n for n in (family.entry, family.name) if n])
        kernels = parse_peer_kernels(pe.get("kernels"), cfg_path.resolve().parent, family, geometries, _load_family)
    except (NvbenchError, PeerError) as e:
        raise ConfigError(str(e)) from None
    return PeerConfig(**_fill(PeerConfig, pe, "peer"), nvbench=nvbench, nvbench_benchmark=bench, kernels=kernels)


def _bound(raw: Any, cfg_path: Path, family: Family, geometries: list[Geometry]) -> BoundConfig | None:
    from evo.measure.profile import ProfileError, load_profile

    if raw is None:
        return None
    b = _section(raw, "bound", _keys(BoundConfig))
    if "profile" not in b:
        raise ConfigError("bound.profile: missing (a YAML profile or a torch.profiler / nsys CSV export)")
    path = Path(_expect(b["profile"], str, "bound.profile"))
    if not path.is_absolute():
        path = (cfg_path.parent / path).resolve()
    kernel = _expect(b.get("kernel", family.name), str, "bound.kernel")
    names = [g.name for g in geometries]
    geometry = _expect(b.get("geometry", next(g.name for g in geometries if g.weight > 0)), str, "bound.geometry")
    if geometry not in names:
        raise ConfigError(
            f"bound.geometry: {geometry!r} is not a geometry of this campaign (allowed: {', '.join(names)})"
        )
    try:
        prof = load_profile(path)
        prof.share(kernel)
    except ProfileError as e:
        raise ConfigError(f"bound.profile: {e}") from None
    return BoundConfig(path, kernel, geometry, **_fill(BoundConfig, b, "bound"))


def _e2e(raw: Any, bound: BoundConfig | None) -> E2EConfig | None:
    from evo.measure.e2e import E2EError, normalize_command

    if raw is None:
        return None
    e = _section(raw, "e2e", _keys(E2EConfig))
    if "command" not in e:
        raise ConfigError("e2e.command: missing (an argv list, e.g. [python, -m, evo.proxy, --tokens, 64])")
    try:
        argv = normalize_command(e["command"], "e2e.command")
    except E2EError as err:
        raise ConfigError(str(err)) from None
    if bound is None:
        raise ConfigError("e2e: needs bound: {profile: ...} too (an observed decode gain is judged against its bound)")
    env = _env(e.get("env", {}) or {}, "e2e.env")
    return E2EConfig(tuple(argv), env={str(k): str(v) for k, v in env.items()}, **_fill(E2EConfig, e, "e2e"))


def _env(raw: Any, key: str) -> dict[str, Any]:
    """Environment variables for a command: names and values a process environment can hold."""
    env = _expect(raw, dict, key)
    for k, v in env.items():
        if isinstance(v, (dict, list)) or v is None:
            raise ConfigError(f"{key}.{k}: expected a string or number, got {type(v).__name__}")
        _expect(v, (str, int, float, bool), f"{key}.{k}")
        name, value = str(k), str(v)
        if not name or "=" in name or "\x00" in name + value:
            raise ConfigError(f"{key}.{name[:40]}: an environment variable needs a name without = and no NUL")
        if len(name) + len(value) > 65536:
            raise ConfigError(f"{key}.{name[:40]}: more than 64 KiB")
    return env


def _ideas(raw: Any) -> IdeasConfig:
    from evo.measure.e2e import E2EError, normalize_command

    i = _section(raw, "ideas", _keys(IdeasConfig))
    outside = None
    if i.get("proposer") is not None:
        p = _section(i["proposer"], "ideas.proposer", _keys(OutsideProposerConfig))
        if "command" not in p:
            raise ConfigError("ideas.proposer.command: missing (an argv list, e.g. [python, -m, evo.search.rules])")
        try:
            argv = normalize_command(p["command"], "ideas.proposer.command")
        except E2EError as err:
            raise ConfigError(str(err)) from None
        env = _env(p.get("env", {}) or {}, "ideas.proposer.env")
        outside = OutsideProposerConfig(
            tuple(argv),
            env={str(k): str(v) for k, v in env.items()},
            **_fill(OutsideProposerConfig, p, "ideas.proposer"),
        )
    return IdeasConfig(proposer=outside, **_fill(IdeasConfig, i, "ideas"))


def _restrict_knobs(raw: Any, family: Family) -> Family:
    """A campaign may search a sub-space: each named knob keeps only the listed values (in the family's order)."""
    return restrict_knobs(family, _section(raw, "knobs", {k.name: 0 for k in family.knobs}))


def restrict_knobs(family: Family, wanted: Mapping[str, Any], where: str = "knobs") -> Family:
    """``family`` with each knob named in ``wanted`` (knob: value or list of values) keeping only those values, in the
    family's order; raises ConfigError (naming ``where``) for an unknown knob or value, or a dropped baseline value.
    The config's ``knobs:`` and tools/sweep.py's ``--knobs`` both go through it."""
    unknown = sorted(set(wanted) - {k.name for k in family.knobs})
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: no such knob in {family.name} (knobs: {', '.join(k.name for k in family.knobs)})"
        )
    knobs = []
    for k in family.knobs:
        if k.name not in wanted:
            knobs.append(k)
            continue
        vals = wanted[k.name] if isinstance(wanted[k.name], list) else [wanted[k.name]]
        for v in vals:
            if v not in k.values or isinstance(v, bool) != isinstance(k.default, bool):
                raise ConfigError(
                    f"{where}.{k.name}: {v!r} is not a value of the knob (allowed: {', '.join(map(repr, k.values))})"
                )
        if k.default not in vals:
            raise ConfigError(
                f"{where}.{k.name}: must keep the baseline's value {k.default!r} (the campaign starts "
                "from the baseline and measures every step against it)"
            )
        knobs.append(dataclasses.replace(k, values=tuple(v for v in k.values if v in vals)))
    return dataclasses.replace(family, knobs=tuple(knobs))


def narrow_to_recorded(cfg: CampaignConfig, space: Mapping[str, Any] | None) -> tuple[CampaignConfig, list[str]]:
    """The campaign ``cfg`` searching only the knob values a backend can measure (the recorded backend: the values
    its sweep covers, ``space`` = knob -> values), and one line per knob it narrowed ("block: 128, 256 of 64, 128,
    256"); ``cfg`` itself where nothing narrows (:func:`narrow_family`)."""
    family, lines = narrow_family(cfg.family, space)
    if not lines:
        return cfg, []
    knobs = {**cfg.knobs, **{k.name: k.values for k in family.knobs if k.values != cfg.family.knob(k.name).values}}
    return dataclasses.replace(cfg, family=family, knobs=knobs), lines


def narrow_family(family: Family, space: Mapping[str, Any] | None) -> tuple[Family, list[str]]:
    """``family`` with each knob keeping only the values ``space`` (knob -> values, as a sweep's ``space.knobs``)
    holds, and one line per knob narrowed; ``family`` itself where nothing narrows. A knob the space lacks, or whose
    baseline value it lacks, is left alone: the backend then says which genome it cannot serve."""
    if not space:
        return family, []
    wanted: dict[str, list[Any]] = {}
    lines = []
    for k in family.knobs:
        have = space.get(k.name)
        if not isinstance(have, list):
            continue
        # JSON keeps bools apart from ints, but 1 == True in Python: compare type and value
        keep = [v for v in k.values if any(type(v) is type(h) and v == h for h in have)]
        if k.default in keep and len(keep) < len(k.values):
            wanted[k.name] = keep
            lines.append(f"{k.name}: {', '.join(map(str, keep))} of {', '.join(map(str, k.values))}")
    if not wanted:
        return family, []
    return restrict_knobs(family, wanted, "recorded space"), lines


def _search(raw: Any) -> SearchConfig:
    se = _section(raw, "search", _keys(SearchConfig))
    fin = _section(se.get("finish"), "search.finish", _keys(FinishConfig))
    return SearchConfig(finish=FinishConfig(**_fill(FinishConfig, fin, "search.finish")))


def _sanitizer(raw: Any) -> SanitizerConfig:
    sz = _section(raw, "sanitizer", _keys(SanitizerConfig))
    if isinstance(sz.get("enabled"), bool):  # YAML 1.1 reads bare on/off as true/false
        sz = {**sz, "enabled": "on" if sz["enabled"] else "off"}
    tools = SanitizerConfig.tools
    if sz.get("tools") is not None:
        raw_tools = sz["tools"]
        if not isinstance(raw_tools, list) or not raw_tools:
            raise ConfigError(
                f"sanitizer.tools: expected a non-empty list of tools, got {raw_tools!r} (allowed: {', '.join(TOOLS)})"
            )
        for i, t in enumerate(raw_tools):
            if t not in TOOLS:
                raise ConfigError(f"sanitizer.tools[{i}]: {t!r} is not a tool (allowed: {', '.join(TOOLS)})")
        if len(set(raw_tools)) != len(raw_tools):
            raise ConfigError(f"sanitizer.tools: a tool is listed twice in {raw_tools!r}")
        tools = tuple(raw_tools)
    return SanitizerConfig(tools=tools, **_fill(SanitizerConfig, sz, "sanitizer"))


# ---------------------------------------------------------------------------
# The schema for people: `evo config` and docs/config.md


def sections() -> list[tuple[str, type]]:
    """Every section of the schema, (path, dataclass), top level first, in declaration order."""
    out: list[tuple[str, type]] = []

    def walk(path: str, cls: type) -> None:
        out.append((path, cls))
        for name, sk in schema(cls).items():
            if sk.section is not None:
                walk(f"{path}.{name}" if path else name, sk.section)
            if cls is CampaignConfig and name == "geometries":
                walk("geometries[]", GeometryEntry)

    walk("", CampaignConfig)
    return out


def _proposer_rows() -> list[tuple[str, str, list[tuple[str, str, str, str, str]]]]:
    """(name, what it is, option rows) per proposer, the default first."""
    from evo.search import PROPOSERS

    names = sorted(PROPOSERS, key=lambda n: (n != ProposerConfig.name, n))
    out = []
    for n in names:
        cls = PROPOSERS[n]
        what = (sys.modules[cls.__module__].__doc__ or cls.__doc__ or "").strip().splitlines()[0]
        if (cls.__doc__ or "").strip() and cls.__module__ == "evo.search.optuna_samplers":
            what = (cls.__doc__ or "").strip().splitlines()[0]  # one module, three proposers: each class says which
        rows = [(o, opt.type_text, opt.allowed_text, opt.default_text, opt.doc) for o, opt in cls.OPTIONS.items()]
        out.append((n, what, rows))
    return out


def schema_text(only: str | None = None) -> str:
    """The schema as `evo config` prints it: one block per section (``only``: the sections under that path)."""
    lines = []
    for path, cls in sections():
        if only and not (path == only or path.startswith(only + ".") or path.startswith(only + "[")):
            continue
        lines.append(f"{path or '(top level)'}:")
        for name, sk in schema(cls).items():
            if sk.section is not None:
                lines.append(f"  {name:<18} a section: {sk.key.doc} (below)")
                continue
            facts = ", ".join(x for x in (sk.type_text, sk.allowed_text and f"allowed: {sk.allowed_text}") if x)
            dflt = sk.default_text
            lines.append(f"  {name:<18} {sk.key.doc} [{facts}{'; default: ' + dflt if dflt else ''}]")
        lines.append("")
    if not only or only.startswith("proposer"):
        for n, what, rows in _proposer_rows():
            tag = " (the default)" if n == ProposerConfig.name else ""
            lines.append(f"proposer.options of {n}{tag}: {what}")
            for o, t, allowed, dflt, doc in rows:
                facts = ", ".join(x for x in (t, allowed and f"allowed: {allowed}") if x)
                lines.append(f"  {o:<18} {doc} [{facts}; default: {dflt}]")
            if not rows:
                lines.append("  (no options)")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _cell(text: str) -> str:
    """Table-cell text: a | would end the cell, a <word> would be read as an HTML tag."""
    return text.replace("|", "\\|").replace("<", "\\<") if text else ""


def schema_markdown() -> str:
    """docs/config.md: every key with its type, what is allowed, its default and what it does."""
    out = [
        "# Campaign config reference",
        "",
        "<!-- generated by `evo config --markdown > docs/config.md` from the declarations in evo/config.py and the",
        "     proposers' OPTIONS tables; tests/test_config_schema.py fails when this file is not current -->",
        "",
        'Every key of a campaign YAML (README.md, "The campaign config", shows one), section by section. A key left',
        "out takes its default; a wrong value is refused with one line naming the key, the value and what is",
        "allowed. `evo config` prints the same in the terminal (`evo config gates.perf`: one section).",
        "",
    ]
    for path, cls in sections():
        out += [f"## `{path}`" if path else "## Top level", ""]
        if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
            out += [" ".join(cls.__doc__.split()), ""]
        out += ["| key | type | allowed | default | what it does |", "|---|---|---|---|---|"]
        for name, sk in schema(cls).items():
            if sk.section is not None:
                sub = f"{path}.{name}" if path else name
                out.append(f"| `{name}` | section | | | {_cell(sk.key.doc)}: `{sub}` below |")
                continue
            out.append(
                f"| `{name}` | {_cell(sk.type_text)} | {_cell(sk.allowed_text)} | {_cell(sk.default_text)} "
                f"| {_cell(sk.key.doc)} |"
            )
        out.append("")
    out += [
        "## Proposers and their options",
        "",
        f"`proposer.name` picks the search strategy (default `{ProposerConfig.name}`; docs/search-efficiency.md",
        "compares them); `proposer.options` takes the keys of that strategy's table. Each table is the strategy",
        "module's `OPTIONS`, the only place its defaults are stated.",
        "",
    ]
    for n, what, rows in _proposer_rows():
        tag = " (the default)" if n == ProposerConfig.name else ""
        out += [f"### `{n}`{tag}", "", _cell(what), ""]
        if not rows:
            out += ["No options.", ""]
            continue
        out += ["| option | type | allowed | default | what it does |", "|---|---|---|---|---|"]
        out += [f"| `{o}` | {t} | {_cell(a)} | {_cell(d)} | {_cell(doc)} |" for o, t, a, d, doc in rows]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
