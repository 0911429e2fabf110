"""Campaign configuration: YAML -> validated dataclasses.

Every problem is reported as one :class:`ConfigError` line that names the key,
what was given and what is allowed; the CLI prints it and exits with code 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evo.backends import BACKENDS
from evo.family import CONFIGS_DIR, Family, FamilyError, Geometry, load_family
from evo.genome import Genome
from evo.inputs import NAME_LIMIT, InputError, finite, load_yaml, read_text, yaml_problem


class ConfigError(Exception):
    """A configuration problem, phrased as one line for the user."""


@dataclass(frozen=True)
class Budget:
    attempts: int | None = None
    minutes: float | None = None


@dataclass(frozen=True)
class ProposerConfig:
    name: str = "evolutionary"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StaticGateConfig:
    max_registers: int = 255
    allow_new_spills: bool = False


@dataclass(frozen=True)
class CorrectnessGateConfig:
    mode: str = "exact"  # exact | tolerance
    seeds: int = 3
    runs: int = 2
    tolerance_factor: float = 2.0


@dataclass(frozen=True)
class PerfGateConfig:
    rounds: int = 12
    aa_rounds: int = 30
    min_gain: float = 0.01
    confidence: float = 0.95
    batch_ms: float = 1.0
    rule: str = "every"  # every | weighted
    max_floor: float = 0.002
    early_rounds: int = 6  # 0: always the full rounds (gates.perf.EarlyStop)
    # plain | pdl: how every timed launch is made. pdl: programmatic dependent launch wherever the family says the
    # kernel is safe for it (Family.pdl_safe; built with EVO_PDL=1), so each launch may overlap the one before,
    # as in an engine that launches with PDL. Printed beside every timing.
    launch: str = "plain"
    # At the end of each run the champion's time and the copy ceiling are measured alternately this many times
    # (evo/ceiling.py): "% of the copy ceiling" from figures taken side by side. 0: off.
    ceiling_check: int = 6
    # A watched geometry (weight 0) may be this fraction slower than the champion in a step that wins where the
    # weights are, never slower than the baseline. 0: no slower beyond noise (gates/perf.py). Needs watched: champion.
    watched_slack: float = 0.0
    # What a watched geometry is guarded against: baseline (never slower than the baseline beyond noise) or champion
    # (never slower than the champion beyond noise, or watched_slack). Not given: champion where watched_slack is
    # given above 0 (its meaning since it exists), else baseline.
    watched: str = "baseline"


@dataclass(frozen=True)
class GateConfig:
    static: StaticGateConfig = field(default_factory=StaticGateConfig)
    correctness: CorrectnessGateConfig = field(default_factory=CorrectnessGateConfig)
    perf: PerfGateConfig = field(default_factory=PerfGateConfig)


@dataclass(frozen=True)
class PeerConfig:
    torch_compile: str = "default"  # default | max-autotune | off


@dataclass(frozen=True)
class BoundConfig:
    profile: Path
    kernel: str
    geometry: str
    noise_floor: float | None = None  # None: the profile's decode_noise_floor


@dataclass(frozen=True)
class E2EConfig:
    command: tuple[str, ...]  # an argv list, never a shell string
    runs: int = 2
    timeout_s: float = 600.0
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerConfig:
    isolation: str = "auto"  # auto (a worker on the GPU, in-process on recorded data) | worker | none
    timeout_s: float = 120.0  # per backend call; a hang past it kills the worker
    prefetch: int = -1  # compile processes ahead of the GPU (evo/prefetch.py); -1 auto: 1 on the GPU, 0 else


@dataclass(frozen=True)
class OutsideProposerConfig:
    """A command that answers the champion's source and the attempt history with a patch (evo.proposers.outside)."""

    command: tuple[str, ...]  # an argv list, never a shell string
    every: int = 1  # ask it for one attempt in every `every`
    timeout_s: float = 120.0  # a hang past it is killed and recorded as error: proposer
    max_failures: int = 3  # consecutive failed answers after which it is not asked again this session
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IdeasConfig:
    """Source-level ideas (evo/ideas.py): genes switched on and off, and an optional outside proposer."""

    toggle: float = 0.2  # chance per attempt of switching one idea on or off on the champion
    folder: bool = True  # use the family's candidates/<family>/ideas/
    proposer: OutsideProposerConfig | None = None


@dataclass(frozen=True)
class SanitizerConfig:
    """compute-sanitizer over the champion after a GPU run (evo/sanitize.py)."""

    enabled: str = "auto"  # auto (where a GPU and compute-sanitizer exist) | on | off
    tools: tuple[str, ...] = ("memcheck", "racecheck")
    timeout_s: float = 300.0  # per tool


@dataclass(frozen=True)
class BuildConfig:
    """What NVRTC gets beyond the family's own: header folders (absolute, resolved against the config's folder)
    searched after the family's, and extra options for every module."""

    include_dirs: tuple[Path, ...] = ()
    nvrtc_options: tuple[str, ...] = ()


@dataclass
class CampaignConfig:
    path: Path
    campaign: str
    family: Family
    geometries: list[Geometry]
    budget: Budget
    proposer: ProposerConfig
    gates: GateConfig
    storage: str
    seed: int = 0
    backend: str = "auto"  # auto | gpu | recorded
    clocks: str = "record"  # record | lock
    lock_sm_mhz: int | None = None
    arch: str = "auto"  # auto | sm_90 | ...
    start: Genome | None = None
    peer: PeerConfig = field(default_factory=PeerConfig)
    bound: BoundConfig | None = None
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    e2e: E2EConfig | None = None
    ideas: IdeasConfig | None = None  # None: no idea genes are proposed (ideas in the ledger still build)
    sanitizer: SanitizerConfig = field(default_factory=SanitizerConfig)
    build: BuildConfig = field(default_factory=lambda: BuildConfig())

    @property
    def build_defines(self) -> dict[str, int]:
        """Macros every module of this campaign is built with (beside the genome's): EVO_PDL=1 under launch pdl."""
        return {"EVO_PDL": 1} if self.gates.perf.launch == "pdl" else {}

    @property
    def log_dir(self) -> Path:
        """Beside a SQLite ledger; for a server storage, logs/<campaign> under the working directory."""
        if self.storage.startswith("sqlite:///"):
            return Path(self.storage[len("sqlite:///") :]).parent
        return Path.cwd() / "logs" / self.campaign


# ---------------------------------------------------------------------------
# A small declarative schema: key -> (type, check, allowed text).


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
    }.get(t, str(t))


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
            raise ConfigError(
                f"{key + '.' if key else ''}{k}: unknown key (allowed here: {', '.join(sorted(allowed))})"
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
    rng = (f"> {lo}" if lo_open else f">= {lo}") if lo is not None else ""
    if hi is not None:
        rng += f" and <= {hi}" if rng else f"<= {hi}"
    v = _expect(raw[key], types, full, f"allowed: {rng or 'finite numbers'}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ConfigError(f"{full}: {v!r} is out of range (allowed: {rng})")
    if hi is not None and v > hi:
        raise ConfigError(f"{full}: {v!r} is out of range (allowed: {rng if lo is None else f'<= {hi}'})")
    return v


def _choice(raw: dict, key: str, prefix: str, choices: tuple[str, ...], default: str) -> str:
    full = f"{prefix}.{key}" if prefix else key
    if key not in raw or raw[key] is None:
        return default
    v = raw[key]
    if v not in choices:
        raise ConfigError(f"{full}: {v!r} is not allowed (allowed: {', '.join(choices)})")
    return v


TOP_KEYS = {
    "build": "include_dirs and nvrtc_options for NVRTC",
    "campaign": "name of the campaign (letters, digits, _ . -)",
    "family": "a family's name, or a path to its folder (relative to this file)",
    "geometries": "list of shapes with weights",
    "budget": "attempts and/or minutes",
    "proposer": "search strategy",
    "gates": "gate settings",
    "storage": "Optuna storage URL",
    "seed": "random seed",
    "backend": "auto, gpu or recorded",
    "clocks": "record or lock",
    "lock_sm_mhz": "SM clock for clocks: lock",
    "arch": "compile target",
    "start": "knob values of the starting genome",
    "knobs": "restrict knobs to some of their values (knob: [values]); the baseline's value must stay",
    "peer": "peer timings",
    "bound": "decode profile for the share-derived bound",
    "worker": "isolation of candidates in a worker process",
    "e2e": "end-to-end decode command (argv list) printing tokens/s and sha256",
    "ideas": "source-level ideas: toggle chance, folder, outside proposer command",
    "sanitizer": "compute-sanitizer on the champion: enabled (auto, on, off), tools, timeout_s",
}

STORAGE_RE = re.compile(r"^(sqlite:///.+|postgresql(\+\w+)?://.+|mysql(\+\w+)?://.+)$")


def shipped_config_names() -> list[str]:
    return sorted(q.stem for q in CONFIGS_DIR.glob("*.yaml"))


def shipped_config(name: str) -> Path | None:
    """A config shipped with evo, by name (``fp4_matvec`` or ``fp4_matvec.yaml``), or None."""
    stem = name[:-5] if name.endswith(".yaml") else name
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", stem) or stem.startswith("."):
        return None
    q = CONFIGS_DIR / f"{stem}.yaml"
    return q if q.is_file() else None


def load_config(
    path: str | Path, *, backend_override: str | None = None, storage_override: str | None = None
) -> CampaignConfig:
    """Read and validate a campaign config; raise ConfigError with one line on any problem."""
    from evo.proposers import PROPOSERS  # local import: proposers import config types

    p = Path(path)
    if not p.is_file():
        p = shipped_config(str(path)) or p
    if not p.is_file():
        names = ", ".join(shipped_config_names()) or "none"
        raise ConfigError(
            f"{p}: no such config file (give the path of a campaign YAML, or the name of a shipped one: {names})"
        )
    try:
        raw = load_yaml(read_text(p))
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
        family = load_family(fam_name, base=p.resolve().parent)  # a path is relative to the config's folder
    except FamilyError as e:
        raise ConfigError(f"family: {e}") from None

    if raw.get("knobs") is not None:
        family = _restrict_knobs(raw["knobs"], family)
    geometries = _geometries(raw["geometries"], family)

    b = _section(raw.get("budget"), "budget", {"attempts": 0, "minutes": 0})
    budget = Budget(
        attempts=_num(b, "attempts", "budget", int, None, lo=1, hi=MAX_ATTEMPTS),
        minutes=_num(b, "minutes", "budget", float, None, lo=0, hi=MAX_MINUTES, lo_open=True),
    )
    if budget.attempts is None and budget.minutes is None:
        raise ConfigError("budget: give attempts and/or minutes (e.g. budget: {attempts: 150, minutes: 8})")

    pr = _section(raw.get("proposer"), "proposer", {"name": 0, "options": 0})
    pname = pr.get("name", "evolutionary")
    if not isinstance(pname, str) or pname not in PROPOSERS:
        raise ConfigError(f"proposer.name: {pname!r} is not a proposer (allowed: {', '.join(sorted(PROPOSERS))})")
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
        storage = f"sqlite:///{Path.cwd() / 'logs' / name / 'ledger.db'}"
    storage = _expect(storage, str, "storage")
    if not STORAGE_RE.fullmatch(storage):
        raise ConfigError(
            f"storage: {storage[:80]!r} is not a storage URL (allowed: sqlite:///path/ledger.db or "
            "postgresql://user@host/db)"
        )
    if storage.startswith("sqlite:///"):
        parts = Path(storage[len("sqlite:///") :]).parts
        if any(len(part.encode()) > 255 for part in parts) or len(storage.encode()) > 4000:
            raise ConfigError(
                "storage: the ledger's path has a name longer than a file system takes (255 bytes a name, 4000 in all)"
            )

    backend = backend_override or _choice(raw, "backend", "", BACKENDS, "auto")
    clocks = _choice(raw, "clocks", "", ("record", "lock"), "record")
    lock_mhz = _num(raw, "lock_sm_mhz", "", int, None, lo=100, hi=5000)
    arch = _expect(raw.get("arch", "auto"), str, "arch")
    if arch != "auto" and not re.fullmatch(r"sm_\d{2,3}a?", arch):
        raise ConfigError(f"arch: {arch!r} is not a target (allowed: auto or sm_XX, e.g. sm_90)")

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
        why = family.check(start, geometries)
        if why:
            raise ConfigError(f"start: genome is invalid: {why}")

    pe = _section(raw.get("peer"), "peer", {"torch_compile": 0})
    if pe.get("torch_compile") is False:  # YAML 1.1 reads a bare `off` as false
        pe = {**pe, "torch_compile": "off"}
    peer = PeerConfig(_choice(pe, "torch_compile", "peer", ("default", "max-autotune", "off"), "default"))

    bound = _bound(raw.get("bound"), p, family, geometries)
    w = _section(raw.get("worker"), "worker", {"isolation": 0, "timeout_s": 0, "prefetch": 0})
    if isinstance(w.get("prefetch"), str) and w["prefetch"] != "auto":
        raise ConfigError(f"worker.prefetch: {w['prefetch']!r} is not allowed (allowed: auto or an integer 0..16)")
    prefetch = -1 if w.get("prefetch") == "auto" else _num(w, "prefetch", "worker", int, -1, lo=0, hi=16)
    worker = WorkerConfig(
        _choice(w, "isolation", "worker", ("auto", "worker", "none"), "auto"),
        _num(w, "timeout_s", "worker", float, 120.0, lo=1.0, hi=86400.0),
        prefetch,
    )

    return CampaignConfig(
        build=_build(raw.get("build"), p),
        bound=bound,
        worker=worker,
        e2e=_e2e(raw.get("e2e"), bound),
        ideas=_ideas(raw["ideas"]) if "ideas" in raw else None,
        sanitizer=_sanitizer(raw.get("sanitizer")),
        path=p,
        campaign=name,
        family=family,
        geometries=geometries,
        budget=budget,
        proposer=proposer,
        gates=gates,
        storage=storage,
        seed=_num(raw, "seed", "", int, 0, lo=0, hi=2**31 - 1),
        backend=backend,
        clocks=clocks,
        lock_sm_mhz=lock_mhz,
        arch=arch,
        start=start,
        peer=peer,
    )


def _build(raw: Any, cfg_path: Path) -> BuildConfig:
    b = _section(raw, "build", {"include_dirs": 0, "nvrtc_options": 0})
    dirs, opts = b.get("include_dirs") or [], b.get("nvrtc_options") or []
    for key, v in (("include_dirs", dirs), ("nvrtc_options", opts)):
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise ConfigError(f"build.{key}: expected a list of strings, got {v!r}")
    resolved = []
    for d in dirs:
        q = Path(d).expanduser()
        q = q if q.is_absolute() else (cfg_path.resolve().parent / q)
        if not q.is_dir():
            raise ConfigError(f"build.include_dirs: {d!r} is not a folder ({q})")
        resolved.append(q.resolve())
    return BuildConfig(tuple(resolved), tuple(opts))


MAX_ATTEMPTS = 10_000_000
MAX_MINUTES = 1_000_000.0


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
        _section(g, key, {**params, "weight": 0, "name": 0})
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
                raise ConfigError(f"{key}.{gp.name}: {v!r} is out of range (allowed: {gp.min}..{gp.max})")
            vals[gp.name] = v
        why = family.check_geometry(vals)
        if why:
            raise ConfigError(f"{key}: family {family.name} cannot take this geometry: {why}")
        weight = _num(g, "weight", key, float, 1.0, lo=0)
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
    g = _section(raw, "gates", {"static": 0, "correctness": 0, "perf": 0})
    s = _section(g.get("static"), "gates.static", {"max_registers": 0, "allow_new_spills": 0})
    static = StaticGateConfig(
        max_registers=_num(s, "max_registers", "gates.static", int, 255, lo=16, hi=255),
        allow_new_spills=_expect(s.get("allow_new_spills", False), bool, "gates.static.allow_new_spills"),
    )
    c = _section(g.get("correctness"), "gates.correctness", {"mode": 0, "seeds": 0, "runs": 0, "tolerance_factor": 0})
    corr = CorrectnessGateConfig(
        mode=_choice(c, "mode", "gates.correctness", ("exact", "tolerance"), "exact"),
        seeds=_num(c, "seeds", "gates.correctness", int, 3, lo=3, hi=64),
        runs=_num(c, "runs", "gates.correctness", int, 2, lo=2, hi=16),
        tolerance_factor=_num(c, "tolerance_factor", "gates.correctness", float, 2.0, lo=1.0, hi=100.0),
    )
    pf = _section(
        g.get("perf"),
        "gates.perf",
        {
            "rounds": 0,
            "aa_rounds": 0,
            "min_gain": 0,
            "confidence": 0,
            "batch_ms": 0,
            "rule": 0,
            "max_floor": 0,
            "early_rounds": 0,
            "launch": 0,
            "ceiling_check": 0,
            "watched_slack": 0,
            "watched": 0,
        },
    )
    slack = _num(pf, "watched_slack", "gates.perf", float, 0.0, lo=0.0, hi=0.5)
    perf = PerfGateConfig(
        rounds=_num(pf, "rounds", "gates.perf", int, 12, lo=6, hi=1000),
        aa_rounds=_num(pf, "aa_rounds", "gates.perf", int, 30, lo=6, hi=1000),
        min_gain=_num(pf, "min_gain", "gates.perf", float, 0.01, lo=0.0, hi=1.0),
        confidence=_num(pf, "confidence", "gates.perf", float, 0.95, lo=0.5, hi=0.999),
        batch_ms=_num(pf, "batch_ms", "gates.perf", float, 1.0, lo=0.01, hi=1000.0),
        rule=_choice(pf, "rule", "gates.perf", ("every", "weighted"), "every"),
        max_floor=_num(pf, "max_floor", "gates.perf", float, 0.002, lo=0.0, hi=0.5),
        early_rounds=_num(pf, "early_rounds", "gates.perf", int, 6, lo=0, hi=999),
        launch=_choice(pf, "launch", "gates.perf", ("plain", "pdl"), "plain"),
        ceiling_check=_num(pf, "ceiling_check", "gates.perf", int, 6, lo=0, hi=100),
        watched_slack=slack,
        watched=_choice(pf, "watched", "gates.perf", ("baseline", "champion"), "champion" if slack else "baseline"),
    )
    if perf.watched == "baseline" and perf.watched_slack:
        raise ConfigError(
            f"gates.perf.watched_slack: {perf.watched_slack:g} is a slack against the champion, and "
            "gates.perf.watched is baseline (set watched: champion, or drop watched_slack)"
        )
    if perf.early_rounds and not 4 <= perf.early_rounds < perf.rounds:
        raise ConfigError(
            f"gates.perf.early_rounds: {perf.early_rounds} must be 0 (off) or from 4 to rounds - 1 ({perf.rounds - 1})"
        )
    return GateConfig(static, corr, perf)


def _bound(raw: Any, cfg_path: Path, family: Family, geometries: list[Geometry]) -> BoundConfig | None:
    from evo.profile import ProfileError, load_profile

    if raw is None:
        return None
    b = _section(raw, "bound", {"profile": 0, "kernel": 0, "geometry": 0, "noise_floor": 0})
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
    floor = _num(b, "noise_floor", "bound", float, None, lo=0.0, hi=0.5)
    return BoundConfig(path, kernel, geometry, floor)


def _e2e(raw: Any, bound: BoundConfig | None) -> E2EConfig | None:
    from evo.e2e import E2EError, normalize_command

    if raw is None:
        return None
    e = _section(raw, "e2e", {"command": 0, "runs": 0, "timeout_s": 0, "env": 0})
    if "command" not in e:
        raise ConfigError("e2e.command: missing (an argv list, e.g. [python, -m, evo.proxy, --tokens, 64])")
    try:
        argv = normalize_command(e["command"], "e2e.command")
    except E2EError as err:
        raise ConfigError(str(err)) from None
    if bound is None:
        raise ConfigError("e2e: needs bound: {profile: ...} too (an observed decode gain is judged against its bound)")
    env = _env(e.get("env", {}) or {}, "e2e.env")
    return E2EConfig(
        tuple(argv),
        _num(e, "runs", "e2e", int, 2, lo=2, hi=50),
        _num(e, "timeout_s", "e2e", float, 600.0, lo=1.0, hi=86400.0),
        {str(k): str(v) for k, v in env.items()},
    )


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
    from evo.e2e import E2EError, normalize_command

    i = _section(raw, "ideas", {"toggle": 0, "folder": 0, "proposer": 0})
    outside = None
    if i.get("proposer") is not None:
        p = _section(
            i["proposer"], "ideas.proposer", {"command": 0, "every": 0, "timeout_s": 0, "max_failures": 0, "env": 0}
        )
        if "command" not in p:
            raise ConfigError("ideas.proposer.command: missing (an argv list, e.g. [python, -m, evo.proposers.rules])")
        try:
            argv = normalize_command(p["command"], "ideas.proposer.command")
        except E2EError as err:
            raise ConfigError(str(err)) from None
        env = _env(p.get("env", {}) or {}, "ideas.proposer.env")
        outside = OutsideProposerConfig(
            tuple(argv),
            _num(p, "every", "ideas.proposer", int, 1, lo=1, hi=1000),
            _num(p, "timeout_s", "ideas.proposer", float, 120.0, lo=0.1, hi=86400.0),
            _num(p, "max_failures", "ideas.proposer", int, 3, lo=1, hi=1000000),
            {str(k): str(v) for k, v in env.items()},
        )
    return IdeasConfig(
        _num(i, "toggle", "ideas", float, 0.2, lo=0.0, hi=1.0),
        _expect(i.get("folder", True), bool, "ideas.folder"),
        outside,
    )


def _restrict_knobs(raw: Any, family: Family) -> Family:
    """A campaign may search a sub-space: each named knob keeps only the listed values (in the family's order)."""
    import dataclasses

    kn = _section(raw, "knobs", {k.name: 0 for k in family.knobs})
    knobs = []
    for k in family.knobs:
        if k.name not in kn:
            knobs.append(k)
            continue
        vals = kn[k.name] if isinstance(kn[k.name], list) else [kn[k.name]]
        for v in vals:
            if v not in k.values or isinstance(v, bool) != isinstance(k.default, bool):
                raise ConfigError(
                    f"knobs.{k.name}: {v!r} is not a value of the knob (allowed: {', '.join(map(repr, k.values))})"
                )
        if k.default not in vals:
            raise ConfigError(
                f"knobs.{k.name}: must keep the baseline's value {k.default!r} (the campaign starts "
                "from the baseline and measures every step against it)"
            )
        knobs.append(dataclasses.replace(k, values=tuple(v for v in k.values if v in vals)))
    return dataclasses.replace(family, knobs=tuple(knobs))


def _sanitizer(raw: Any) -> SanitizerConfig:
    from evo.sanitize import TOOLS

    sz = _section(raw, "sanitizer", {"enabled": 0, "tools": 0, "timeout_s": 0})
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
    return SanitizerConfig(
        _choice(sz, "enabled", "sanitizer", ("auto", "on", "off"), "auto"),
        tools,
        _num(sz, "timeout_s", "sanitizer", float, 300.0, lo=1.0, hi=86400.0),
    )
