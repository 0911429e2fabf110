"""Search efficiency on a recorded sweep: evaluations to come within 1% of the sweep's best.

    python tools/search_bench.py [--family mhc_pre_big_fuse] [--seeds 20] [--out docs/search-efficiency.md]

CPU only. The objective of a genome is looked up in the family's recorded H200
sweep (``candidates/<family>/recorded/*.json.xz``): the weighted geometric mean,
over the weighted geometries, of median(baseline time) / median(genome time).
A genome whose recorded checks fail the campaign's correctness gate, or whose
recorded status is not ok, is invalid (objective None). "Best" is the largest
objective in the sweep; a run succeeds at the first evaluation whose objective
is within 1% of it (>= 0.99 x best).

The correctness mode (exact or tolerance, with its tolerance factor, seeds and
runs) and ``min_gain`` come from the family's campaign config
(``configs/<family>.yaml``, or ``--config``); validity is the correctness gate
of that mode on the recorded evidence, and in exact mode a genome with a knob
that changes the summation order (``family.inexact_knobs``) is invalid whatever
its hashes, as the campaign rejects it before the GPU.

Strategies, each run with ``--seeds`` seeds (``--first-seed``, +1, ...):

* evo's proposers (``surrogate``, the configs' default, ``evolutionary``,
  ``random``, ``tpe``, ``nsga2``) are driven by the campaign loop itself
  (``evo.loop.campaign.Campaign``, the loop of ``evo run`` and ``evo worker``; see
  ``bench_campaign``) on the recorded backend replaying the sweep, with a ledger
  in memory and the campaign's gates in their order: identical SASS (the
  sweep's digest of the genome equals that of a genome already measured in the
  run: rejected, no score), the exact-mode rule, the correctness gate on the
  recorded evidence, then, in place of the paired-interval perf gate, the
  recorded objective: accepted when it beats the current champion's by more
  than ``min_gain``, rejected (perf) otherwise. Attempt 0 is the baseline
  (score 1.0, counted as evaluation 1); every attempt counts as an evaluation.
  The loop gives the proposer the campaign's tabu (knob values the exact-mode
  correctness gate ruled out) at every step. A
  proposer with a ``static_key`` attribute (the surrogate) gets the sweep's SASS
  digests through it: what compiling a genome on the CPU tells before any GPU
  time (``--no-static-key`` withholds it).
* Kernel Tuner's ``genetic_algorithm`` and ``bayes_opt`` (``pip install
  kernel_tuner``; skipped with the reason when it is not importable) run in
  Kernel Tuner's own simulation mode on a cache file written from the same
  sweep: time = 1 / objective, invalid genomes stored as RuntimeFailedConfig,
  tune_params = the knob values, restrictions = ``family.check``,
  ``max_fevals`` = the space size. Unique evaluations are counted in the order
  the runner served them from the cache. The "+ exact rule" variants also
  restrict away the knob values that change the summation order (what evo's
  tabu learns from its first correctness rejection); they are skipped, with the
  reason, for a family whose campaign runs in tolerance mode. Where the simulation
  differs from a real Kernel Tuner run, and why: docs/search-efficiency.md.

``--retries N`` sets the ``retries`` option of the Optuna proposers (asks per proposal before the random
fallback; default: theirs, 100). It is a different configuration of those peers, not a faster way to run the
same one: on a space where the sampler keeps proposing genomes ``family.check`` rules out or that were tried
(mhc_prenorm_gemm: 56% of the knob product is invalid), nearly every ask of a proposal is spent that way, the
study fills with FAIL trials and every strategy x seed costs about ``retries`` asks per evaluation. The table
block of such a run is its own (``-retries-N`` in its markers) and its "Seeds:" line says the value.

A run that never reaches the target is a failure and counts as the space size
(the cap) in the statistics; the success column says how many runs got there.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import functools
import io
import itertools
import json
import math
import random
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evo.config import PerfGateConfig  # noqa: E402
from evo.core.family import Family, Geometry, load_family  # noqa: E402
from evo.core.genome import Genome  # noqa: E402
from evo.core.records import Attempt, Code, Verdict  # noqa: E402
from gates.correctness import correctness_gate  # noqa: E402
from harness import sweepfile  # noqa: E402
from harness.recorded import SAME, SIMULATED_LABEL, recorded_evidence  # noqa: E402
from harness.sweepfile import sweep_files  # noqa: E402

TOLERANCE = 0.01  # "within 1% of the best"
MIN_GAIN = 0.01  # the campaign's perf.min_gain by default: a champion must be beaten by more than this
EVO = "evo surrogate"  # evo's proposer in the configs; the row the "at most half" bar is about


# --- the recorded objective -----------------------------------------------------------
@dataclass
class Space:
    """A family's knob space with every genome's recorded objective."""

    family: Family
    geometries: list[Geometry]
    sweep_path: Path
    created: str
    scores: dict[str, float | None]  # genome key -> objective (None: invalid)
    genomes: list[Genome]  # every genome that family.check accepts, in knob-product order
    baseline_key: str
    mode: str = "exact"  # the campaign's correctness mode
    min_gain: float = MIN_GAIN
    sass: dict[str, str] = field(default_factory=dict)  # genome key -> the sweep's SASS digest (CPU compile)
    seeds: int | None = None  # the campaign's correctness seeds and runs (None: all the sweep holds)
    runs: int | None = None
    tolerance_factor: float = 2.0
    perf: Any = None  # the campaign's gates.perf (evo.config.PerfGateConfig): A/A rounds, rounds
    data: dict[str, Any] | None = field(default=None, repr=False)  # the sweep itself
    _backend: Any = field(default=None, repr=False, compare=False)

    def recorded_backend(self) -> Any:
        """The recorded backend replaying this sweep (made once per space: a sweep file takes seconds to read)."""
        if self._backend is None:
            from harness.recorded import RecordedBackend, Sweep

            assert self.data is not None, "a space made without its sweep data has no backend"
            sweep = Sweep(self.sweep_path, self.data, {g.name: g.name for g in self.geometries})
            self._backend = RecordedBackend(
                self.family, self.geometries, seeds=self.seeds or 10**9, runs=self.runs or 10**9, sweep=sweep
            )
        return self._backend

    @property
    def size(self) -> int:
        return len(self.genomes)

    @property
    def best(self) -> float:
        return max(v for v in self.scores.values() if v is not None)

    @property
    def target(self) -> float:
        return (1.0 - TOLERANCE) * self.best

    def objective(self, genome: Mapping[str, Any]) -> float | None:
        return self.scores.get(Genome(genome).key)

    def hits(self) -> list[str]:
        return [k for k, v in self.scores.items() if v is not None and v >= self.target]


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def entry(genomes: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """A sweep entry with ``same_as`` links followed (as harness/recorded.py does)."""
    e = genomes.get(key)
    hops = 0
    while e is not None and "same_as" in e and hops < 8:
        e = genomes.get(e["same_as"])
        hops += 1
    return None if e is None or "same_as" in e else e


def _valid(
    e: Mapping[str, Any],
    data: Mapping[str, Any],
    baseline_hashes: Mapping[str, str],
    mode: str,
    tolerance_factor: float,
    seeds: int | None,
    runs: int | None,
) -> bool:
    """The campaign's correctness gate (gates.correctness_gate) on the evidence the recorded backend serves for a
    sweep entry (harness.recorded.recorded_evidence); an entry with no checks was not measured."""
    ev = recorded_evidence(e, baseline_hashes, seeds or 10**9, runs or 10**9)
    if not ev.checks:
        return False
    return correctness_gate(ev, baseline_hashes, mode, {}, data.get("baseline_errors", {}), tolerance_factor).ok


def sweep_objectives(
    data: Mapping[str, Any],
    mode: str = "exact",
    tolerance_factor: float = 2.0,
    seeds: int | None = None,
    runs: int | None = None,
) -> dict[str, float | None]:
    """Genome key -> weighted geometric mean of median(baseline t) / median(genome t), None when invalid.

    Invalid: the recorded run did not end ok, its checks fail the correctness gate of ``mode`` (exact: every
    hash equal to the baseline's; tolerance: error vs float64 within ``tolerance_factor`` x the baseline's), the
    backend's recheck after timing failed, or a weighted geometry has no times. ``seeds``/``runs`` limit the checks
    to those the campaign would look at.
    """
    genomes = data["genomes"]
    weighted = [(g["name"], float(g["weight"])) for g in data["geometries"] if g["weight"] > 0]
    base = entry(genomes, data["baseline_key"])
    assert base is not None, "the sweep has no baseline entry"
    bmed = {n: _median(base["t"][n]) for n, _ in weighted}
    # the baseline's hash per check ("=" stands for it where a sweep does not store the hash itself)
    bh = {f"{g}/{seed}/{out}": SAME for g, seed, out, *_ in base.get("checks", [])}
    bh.update(data.get("baseline_hashes", {}))
    total_w = sum(w for _, w in weighted)
    out: dict[str, float | None] = {}
    for key in genomes:
        e = entry(genomes, key)
        if e is None or e.get("status", "ok") != "ok" or not e.get("checks"):
            out[key] = None
            continue
        if not _valid(e, data, bh, mode, tolerance_factor, seeds, runs) or e.get("recheck"):
            out[key] = None
            continue
        if not all(n in e.get("t", {}) and e["t"][n] for n, _ in weighted):
            out[key] = None
            continue
        out[key] = math.exp(sum(w * math.log(bmed[n] / _median(e["t"][n])) for n, w in weighted) / total_w)
    return out


def campaign_settings(family_name: str, config: str | Path | None = None) -> dict[str, Any]:
    """Correctness mode, tolerance factor, seeds, runs and min_gain of the family's campaign config.

    ``configs/<family>.yaml`` unless ``config`` names one; the defaults (exact mode, min_gain 0.01) when there is
    none.
    """
    path = Path(config) if config else ROOT / "configs" / f"{family_name}.yaml"
    out: dict[str, Any] = {
        "mode": "exact",
        "tolerance_factor": 2.0,
        "seeds": None,
        "runs": None,
        "min_gain": MIN_GAIN,
        "perf": PerfGateConfig(),
        "config": None,
    }
    if not path.is_file():
        return out
    from evo.config import load_config

    cfg = load_config(path)
    if cfg.family.name != family_name:
        raise SystemExit(f"{path} is a config for family {cfg.family.name}, not {family_name}")
    c = cfg.gates.correctness
    out.update(
        mode=c.mode,
        tolerance_factor=c.tolerance_factor,
        seeds=c.seeds,
        runs=c.runs,
        min_gain=cfg.gates.perf.min_gain,
        perf=cfg.gates.perf,
        config=path,
    )
    return out


def load_space(
    family_name: str = "mhc_pre_big_fuse", sweep: str | Path | None = None, config: str | Path | None = None
) -> Space:
    family = load_family(family_name)
    settings = campaign_settings(family_name, config)
    paths = [Path(sweep)] if sweep else sweep_files(family.folder / "recorded")
    if not paths:
        raise SystemExit(f"family {family_name} has no recorded sweep under {family.folder / 'recorded'}")
    path = paths[0]
    data = sweepfile.load(path)
    geometries = [Geometry(g["name"], dict(g["params"]), float(g["weight"])) for g in data["geometries"]]
    names = [k.name for k in family.knobs]
    genomes = [Genome(dict(zip(names, vals))) for vals in itertools.product(*(k.values for k in family.knobs))]
    genomes = [g for g in genomes if family.check(g, geometries) is None]
    mode = settings["mode"]
    scores = sweep_objectives(data, mode, settings["tolerance_factor"], settings["seeds"], settings["runs"])
    for g in genomes:  # a valid genome the sweep does not hold cannot be measured here
        scores.setdefault(g.key, None)
        if mode == "exact" and any(family.inexact_knobs(g, geo) for geo in geometries):
            scores[g.key] = None  # rejected before the GPU, whatever the sweep measured
    sass = {k: e["sass"] for k, e in data["genomes"].items() if e.get("sass")}
    return Space(
        family,
        geometries,
        path,
        data.get("created", "?"),
        scores,
        genomes,
        data["baseline_key"],
        mode,
        settings["min_gain"],
        sass,
        settings["seeds"],
        settings["runs"],
        settings["tolerance_factor"],
        settings["perf"],
        data,
    )


# --- one simulated search ----------------------------------------------------------------
@dataclass
class Run:
    strategy: str
    seed: int
    evals: int | None  # evaluations up to and including the first within 1% of the best; None: never
    keys: list[str] = field(default_factory=list)  # genome keys in evaluation order (unique)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.evals is not None


@dataclass
class SweepBuilt:
    """What the builder tells the loop of a genome, from the sweep: its SASS digest (a CPU compile's, recorded by
    tools/sweep.py), no modules (so no resources for the static gate to hold against the baseline's)."""

    genome_key: str
    sass_sha256: str = ""
    source_sha256: str = ""
    cubin_sha256: str = ""
    compile_s: float = 0.0
    modules: dict[str, Any] = field(default_factory=dict)


class SweepBuilder:
    """The campaign's builder on a recorded sweep: nothing is compiled (a benchmark run has thousands of attempts)."""

    arch = "recorded"

    def __init__(self, space: Space):
        self.space = space
        self.source_hook: Any = None  # (set by the campaign; the sweep holds knob genomes only)

    def build(self, genome: Mapping[str, Any], source: str | None = None) -> SweepBuilt:
        key = Genome(genome).key
        return SweepBuilt(key, self.space.sass.get(key, ""))

    def source_for(self, genome: Mapping[str, Any]) -> str:
        raise NotImplementedError("a recorded sweep holds no sources")


def objective_gate(space: Space) -> Any:
    """The benchmark's perf gate: a genome's recorded objective against the champion's.

    Accepted when it beats the champion's by more than ``min_gain``, rejected (perf) otherwise; the attempt's
    score is the objective, its timings the recorded medians (so identical SASS holds later twins against it).
    It stands in for the campaign's paired-interval perf gate: the benchmark counts evaluations to the sweep's best,
    and a recorded objective has no noise to test.
    """
    from evo.core.records import Timing
    from evo.loop.campaign import CampaignGate

    gain = f"{100 * space.min_gain:g}%"

    def check(s: Any) -> Verdict:
        camp, a = s.campaign, s.attempt
        score = space.objective(s.proposal.genome)
        if score is None:
            return Verdict.error("not_recorded", "the sweep holds no objective for this genome", gate="perf")
        for g in camp.cfg.geometries:
            if g.weight > 0:
                t = camp.backend.measure([("cand", s.loaded)], g, camp.cfg.gates.perf.rounds).times_us["cand"]
                a.timings[g.name] = Timing(_median(t), 0.0, len(t), 0, f"recorded median ({SIMULATED_LABEL})")
        a.score = score
        champ = camp.champion
        a.parent_id = champ.id
        if score > (champ.score or 0.0) * (1.0 + space.min_gain):
            return Verdict.accepted(f"{score:.4f}x beats the champion #{champ.id} ({champ.score:.4f}x) by > {gain}")
        return Verdict.rejected(
            "perf",
            f"{score:.4f}x does not beat the champion #{champ.id} ({champ.score:.4f}x) by > {gain}",
            Code.PERF_NOT_FASTER,
        )

    return CampaignGate("perf", check)


def bench_campaign(
    space: Space,
    proposer: Any,
    cap: int,
    seed: int = 0,
    tabu: bool = True,
    until_target: bool = True,
    name: str = "",
    options: Mapping[str, Any] | None = None,
) -> Any:
    """The campaign loop (evo.loop.campaign.Campaign) on the space's recorded sweep, driving ``proposer``: the recorded
    backend, the campaign's gates with the perf gate replaced by :func:`objective_gate`, a ledger in memory, a
    budget of ``cap`` attempts (the baseline included) and, ``until_target``, a stop at the first attempt within
    1% of the best. Returned unrun (``.run()``)."""
    from evo.config import Budget, CampaignConfig, CorrectnessGateConfig, GateConfig, PeerConfig, ProposerConfig
    from evo.config import WorkerConfig as WorkerCfg
    from evo.ledger.memory_ledger import MemoryLedger
    from evo.loop.campaign import GATES, Campaign

    perf = dataclasses.replace(space.perf, ceiling_check=0)  # (no end-of-run ceiling check: nothing to quote)
    cfg = CampaignConfig(
        path=None,  # type: ignore[arg-type]  # (no config file: no compile-ahead processes)
        campaign="bench",
        family=space.family,
        geometries=space.geometries,
        budget=Budget(attempts=cap),
        proposer=ProposerConfig(name or type(proposer).__name__, dict(options or {})),
        gates=GateConfig(
            correctness=CorrectnessGateConfig(
                mode=space.mode,
                seeds=space.seeds or 10**9,
                runs=space.runs or 10**9,
                tolerance_factor=space.tolerance_factor,
            ),
            perf=perf,
        ),
        storage="memory:",
        seed=seed,
        backend="recorded",
        peer=PeerConfig(torch_compile="off"),
        worker=WorkerCfg(isolation="none", prefetch=0),
    )
    gates = [objective_gate(space) if g.name == "perf" else g for g in GATES]

    goal = space.target  # (a property over the whole space: read once)

    def target(attempts: list[Attempt]) -> str | None:
        last = attempts[-1] if attempts else None
        return "target reached" if last is not None and (last.score or 0.0) >= goal else None

    return Campaign(
        cfg,
        out=lambda _: None,
        command="tools/search_bench.py",
        backend=space.recorded_backend(),
        builder=SweepBuilder(space),
        storage=MemoryLedger(),
        gates=gates,
        proposer=proposer,
        stop_when=target if until_target else None,
        tabu=tabu,
    )


def run_proposer(
    space: Space,
    name: str,
    seed: int,
    options: Mapping[str, Any] | None = None,
    cap: int | None = None,
    tabu: bool = True,
    until_target: bool = True,
    static_key: bool = True,
) -> Run:
    """Drive one of evo's proposers through the campaign loop (:func:`bench_campaign`) on the recorded sweep.

    A proposal whose recorded SASS equals that of a genome measured earlier in the run is rejected as the campaign
    rejects it (identical SASS: same machine code, not measured again; no score) and counts as an attempt.
    ``static_key``: a proposer with that attribute gets the sweep's SASS digests (what a CPU compile tells).
    """
    from evo.search import PROPOSERS

    cap = cap or space.size
    prop = PROPOSERS[name](space.family, space.geometries, dict(options or {}), seed)
    if static_key and space.sass and hasattr(prop, "static_key"):
        prop.static_key = lambda g: space.sass.get(Genome(g).key)
    camp = bench_campaign(space, prop, cap, seed, tabu, until_target, name, options)
    camp.run()
    attempts = camp.ledger.attempts()
    run = Run(name, seed, None, [a.genome_key for a in attempts])
    assert len(set(run.keys)) == len(run.keys), f"{name} proposed a genome twice"
    goal = space.target
    run.evals = next((i + 1 for i, a in enumerate(attempts) if (a.score or 0.0) >= goal), None)
    same = sum(a.verdict.code is Code.STATIC_IDENTICAL_SASS for a in attempts)
    if same:
        run.notes["identical_sass"] = same
    run.notes["fallbacks"] = getattr(prop, "fallbacks", 0)
    run.notes["random_origin"] = sum(1 for a in attempts[1:] if a.origin.startswith("random"))
    return run


# --- Kernel Tuner's simulation mode -------------------------------------------------------
KT_STRATEGIES = ("genetic_algorithm", "bayes_opt")
# What one evaluation costs on the H200, for the cache's timing fields: the first campaign made 213 attempts
# in 5 min 01 s (benchmarks/results/2026-11-30-mhc-pre-big-fuse-campaign/status.txt). Compile, check and measurement
# are not separated, so it is all stored as benchmark_time.
EVAL_MS = 1410.0


def kernel_tuner_missing() -> str | None:
    try:
        import kernel_tuner  # noqa: F401
    except Exception as e:  # not installed, or broken
        return f"kernel_tuner is not importable ({type(e).__name__}: {e}); pip install kernel_tuner"
    return None


def kt_tune_params(space: Space) -> dict[str, list[Any]]:
    return {k.name: list(k.values) for k in space.family.knobs}


def kt_key(space: Space, genome: Mapping[str, Any]) -> str:
    """Kernel Tuner's cache key: the values in tune_params order joined by commas (runners/simulation.py)."""
    return ",".join(str(genome[k.name]) for k in space.family.knobs)


def write_kt_cache(space: Space, path: Path, problem_size: Sequence[int]) -> Path:
    """A Kernel Tuner cache file (the JSON that util.process_cache / read_cache take) holding the whole sweep.

    Valid genomes get time = 1 / objective (relative to the baseline's 1.0); invalid ones are stored as
    RuntimeFailedConfig, the error Kernel Tuner records for a configuration that ran but gave no usable time.
    Every entry costs ``EVAL_MS`` of benchmark_time (what a simulated run adds to its simulated time).
    """
    tp = kt_tune_params(space)
    stamp = dt.datetime.now(dt.UTC).isoformat()
    cache: dict[str, Any] = {}
    for g in space.genomes:
        e: dict[str, Any] = {k: g[k] for k in tp}
        score = space.objective(g)
        if score is None:
            e["__error__"] = "RuntimeFailedConfig"
        else:
            e["time"] = 1.0 / score
            e["times"] = [1.0 / score]
        e.update(
            compile_time=0.0,
            verification_time=0.0,
            benchmark_time=EVAL_MS,
            strategy_time=0.0,
            framework_time=0.0,
            timestamp=stamp,
        )
        cache[kt_key(space, g)] = e
    doc = {
        "device_name": str(space.sweep_path.name),
        "kernel_name": space.family.entry,
        "problem_size": list(problem_size),
        "tune_params_keys": list(tp),
        "tune_params": tp,
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(doc))
    return path


@contextlib.contextmanager
def _simulation_hooks(space: Space, served: list[str]):
    """Two hooks around Kernel Tuner's simulation mode; neither changes what a strategy sees before the target.

    1. ``SimulationRunner.run`` runs unchanged, then every configuration it served is logged in order; once
       one within 1% of the best was served, the budget is marked spent, so the strategy stops at its next
       budget check (what it did up to the target is all the benchmark counts).
    2. bayes_opt's default method (multi-ultrafast) decides whether to refit its model by comparing the
       wall-clock time of its predictions with that of its evaluations. Served from a cache, an evaluation
       takes microseconds, so the model would be refit far less often than on a GPU (and the result would
       depend on machine load). Its clock is made to include the runner's simulated evaluation time (the
       cache's compile + verification + benchmark time, which Kernel Tuner itself adds up in
       ``total_simulated_time``), as a real run's clock would.
    """
    from kernel_tuner.runners.simulation import SimulationRunner

    orig = SimulationRunner.run
    names = [k.name for k in space.family.knobs]
    runners: list[Any] = []

    def run(self, parameter_space, tuning_options):
        if not runners:
            runners.append(self)
        results = orig(self, parameter_space, tuning_options)
        for r in results:
            if not r:
                continue
            g = Genome({n: r[n] for n in names})
            served.append(g.key)
            score = space.objective(g)
            if score is not None and score >= space.target:
                b = tuning_options.budget
                b.max_fevals = b.num_fevals
        return results

    def virtual() -> float:
        return time.perf_counter() + (runners[0].total_simulated_time / 1000.0 if runners else 0.0)

    clock = SimpleNamespace(perf_counter=virtual, perf_counter_ns=lambda: int(virtual() * 1e9))
    bo = None
    with contextlib.suppress(Exception):
        from kernel_tuner.strategies import bayes_opt as bo
    SimulationRunner.run = run
    if bo is not None:
        bo.time = clock
    try:
        yield
    finally:
        SimulationRunner.run = orig
        if bo is not None:
            bo.time = time


@contextlib.contextmanager
def _seeded_lhs(seed: int):
    """bayes_opt draws its initial Latin-hypercube sample with scipy's LatinHypercube and no seed, i.e. from
    fresh OS entropy, so its runs cannot be repeated; give that one generator the run's seed."""
    try:
        from kernel_tuner.strategies import bayes_opt
    except Exception:
        yield
        return
    orig = bayes_opt.LatinHypercube
    bayes_opt.LatinHypercube = functools.partial(orig, rng=seed)
    try:
        yield
    finally:
        bayes_opt.LatinHypercube = orig


def run_kernel_tuner(
    space: Space,
    strategy: str,
    seed: int,
    cache_file: Path,
    problem_size: Sequence[int],
    options: Mapping[str, Any] | None = None,
) -> Run:
    import numpy as np
    from kernel_tuner import tune_kernel

    fam, geos = space.family, space.geometries
    tp = kt_tune_params(space)

    opts = {"max_fevals": space.size, **dict(options or {})}
    exact_rule = bool(opts.pop("exact_rule", False))

    def restriction(p: Mapping[str, Any]) -> bool:  # Kernel Tuner's monolithic form: one dict argument
        if fam.check(p, geos) is not None:
            return False
        # exact_rule: the knob values that change the summation order are ruled out up front, the way a
        # Kernel Tuner user would after the first failed verification (which is fatal in Kernel Tuner).
        return not (exact_rule and any(fam.inexact_knobs(p, g) for g in geos))

    if strategy == "genetic_algorithm":
        opts.setdefault("x0", [fam.baseline()[k] for k in tp])  # GA starts from the baseline, as evo does
    served: list[str] = []
    with (
        _simulation_hooks(space, served),
        _seeded_lhs(seed),
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        # Kernel Tuner 1.5 takes a seed argument but never uses it: its strategies draw from the global
        # random and numpy generators, so those are seeded, last thing before the run.
        random.seed(seed)
        np.random.seed(seed)
        tune_kernel(
            fam.entry,
            "",
            tuple(problem_size),
            [],
            tp,
            restrictions=[restriction],
            strategy=strategy,
            strategy_options=opts,
            cache=str(cache_file),
            simulation_mode=True,
            quiet=True,
            objective="time",
            objective_higher_is_better=False,
        )
    run = Run(f"kt {strategy}", seed, None)
    uniq: set[str] = set()
    for key in served:
        if key in uniq:
            continue
        uniq.add(key)
        run.keys.append(key)
        score = space.scores.get(key)
        if score is not None and score >= space.target:
            run.evals = len(run.keys)
            break
    run.notes["served"] = len(served)
    return run


# --- the benchmark ----------------------------------------------------------------------
@dataclass
class Strategy:
    label: str
    kind: str  # evo | kt
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    peer: bool = True  # False: one of evo's own proposers (not a peer for the "at most half" bar)


STRATEGIES = [
    Strategy(EVO, "evo", "surrogate", peer=False),
    Strategy("evo evolutionary", "evo", "evolutionary", peer=False),
    Strategy("evo random", "evo", "random"),
    Strategy("optuna TPE", "evo", "tpe"),
    Strategy("optuna NSGA-II", "evo", "nsga2"),
    Strategy("kt genetic_algorithm", "kt", "genetic_algorithm"),
    Strategy("kt bayes_opt", "kt", "bayes_opt"),
    Strategy("kt genetic_algorithm + exact rule", "kt", "genetic_algorithm", {"exact_rule": True}),
    Strategy("kt bayes_opt + exact rule", "kt", "bayes_opt", {"exact_rule": True}),
]


def optuna_options(s: Strategy, retries: int | None) -> dict[str, Any]:
    """The strategy's proposer options, with ``retries`` set when it is given and the proposer is an Optuna one."""
    from evo.search import PROPOSERS, OptunaSampler

    if retries is None or s.kind != "evo" or not issubclass(PROPOSERS[s.name], OptunaSampler):
        return dict(s.options)
    return {**s.options, "retries": retries}


_POOL_SPACE: Space | None = None  # the space of a --jobs pool's workers (inherited through fork)


def _pool_run(args: tuple[str, int, dict[str, Any], bool, bool]) -> Run:
    name, seed, options, tabu, static_key = args
    assert _POOL_SPACE is not None
    return run_proposer(_POOL_SPACE, name, seed, options, tabu=tabu, static_key=static_key)


def _evo_runs(
    space: Space, name: str, seeds: range, options: dict[str, Any], tabu: bool, static_key: bool, jobs: int
) -> list[Run]:
    """One evo strategy over the seeds, in ``jobs`` forked processes (every run is seeded: the same runs)."""
    if jobs <= 1 or len(seeds) <= 1:
        return [run_proposer(space, name, seed, options, tabu=tabu, static_key=static_key) for seed in seeds]
    import concurrent.futures as cf
    import multiprocessing as mp

    global _POOL_SPACE
    _POOL_SPACE = space
    try:
        with cf.ProcessPoolExecutor(min(jobs, len(seeds)), mp_context=mp.get_context("fork")) as ex:
            return list(ex.map(_pool_run, [(name, seed, options, tabu, static_key) for seed in seeds]))
    finally:
        _POOL_SPACE = None


def bench(
    space: Space,
    seeds: int = 20,
    strategies: Sequence[Strategy] = tuple(STRATEGIES),
    tabu: bool = True,
    out: Callable[[str], None] = print,
    first_seed: int = 0,
    static_key: bool = True,
    retries: int | None = None,
    jobs: int = 1,
) -> tuple[dict[str, list[Run]], dict[str, str]]:
    """Every strategy x seed (first_seed, first_seed + 1, ...); returns the runs per strategy label and the skip
    reasons. ``retries``: the Optuna proposers' retries option (None: their default). ``jobs``: processes for the
    seeds of evo's proposers (Optuna's included); Kernel Tuner's runs stay in this one."""
    runs: dict[str, list[Run]] = {}
    skipped: dict[str, str] = {}
    missing = kernel_tuner_missing()
    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        cache_file = None
        g0 = next(g for g in space.geometries if g.weight > 0)
        problem_size = (int(g0["T"]), int(g0["H"])) if "T" in g0.params and "H" in g0.params else (1,)
        for s in strategies:
            if s.kind == "kt" and missing:
                skipped[s.label] = missing
                out(f"{s.label}: skipped: {missing}")
                continue
            if s.options.get("exact_rule") and space.mode != "exact":
                skipped[s.label] = f"the campaign runs in {space.mode} mode: there is no exact rule to give"
                out(f"{s.label}: skipped: {skipped[s.label]}")
                continue
            if s.kind == "kt" and cache_file is None:
                cache_file = write_kt_cache(space, Path(tmp) / f"{space.family.name}.json", problem_size)
            t0 = time.perf_counter()
            if s.kind == "evo":
                rs = _evo_runs(
                    space,
                    s.name,
                    range(first_seed, first_seed + seeds),
                    optuna_options(s, retries),
                    tabu,
                    static_key,
                    jobs,
                )
            else:
                rs = [
                    run_kernel_tuner(space, s.name, seed, cache_file, problem_size, s.options)
                    for seed in range(first_seed, first_seed + seeds)
                ]
            for r in rs:
                r.strategy = s.label
            runs[s.label] = rs
            st = stats(rs, space.size)
            out(
                f"{s.label}: median {st['median']:g} evaluations, {st['success']}/{len(rs)} reached the target "
                f"({time.perf_counter() - t0:.1f} s)"
            )
    return runs, skipped


def _quantile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def stats(rs: Sequence[Run], cap: int) -> dict[str, Any]:
    xs = [r.evals if r.evals is not None else cap for r in rs]
    return {
        "median": _quantile(xs, 0.5),
        "q1": _quantile(xs, 0.25),
        "q3": _quantile(xs, 0.75),
        "min": min(xs),
        "max": max(xs),
        "success": sum(r.ok for r in rs),
        "n": len(rs),
    }


def _fmt(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def table(runs: Mapping[str, list[Run]], cap: int) -> list[str]:
    lines = ["| strategy | median evals | IQR | min–max | success rate |", "|---|---:|---:|---:|---:|"]
    for label, rs in runs.items():
        st = stats(rs, cap)
        lines.append(
            f"| {label} | {_fmt(st['median'])} | {_fmt(st['q1'])}–{_fmt(st['q3'])} "
            f"(width {_fmt(st['q3'] - st['q1'])}) | {st['min']}–{st['max']} | "
            f"{st['success']}/{st['n']} ({100.0 * st['success'] / st['n']:.0f}%) |"
        )
    return lines


def verdict(runs: Mapping[str, list[Run]], cap: int) -> list[str]:
    meds = {k: stats(v, cap)["median"] for k, v in runs.items()}
    best = min(meds, key=lambda k: meds[k])
    out = [f"best strategy: {best} (median {_fmt(meds[best])} evaluations)"]
    own = {s.label for s in STRATEGIES if not s.peer}
    peers = {k: v for k, v in meds.items() if k not in own}
    if EVO in meds and peers:
        peer = min(peers, key=lambda k: peers[k])
        ratio = meds[EVO] / peers[peer]
        out.append(
            f"evo/best-peer: {_fmt(meds[EVO])} / {_fmt(peers[peer])} ({peer}) = {ratio:.2f} "
            f"({'meets' if ratio <= 0.5 else 'does not meet'} the 'at most half the evaluations' bar)"
        )
        p = _mann_whitney(runs[EVO], runs[peer], cap)
        if p is not None:
            out.append(
                f"evo vs {peer}: two-sided Mann-Whitney U p = {p:.3g} over {len(runs[EVO])} vs {len(runs[peer])} seeds"
            )
    for label, rs in runs.items():
        fb = sum(r.notes.get("fallbacks", 0) for r in rs)
        if fb:
            out.append(
                f"{label}: {fb} proposal(s) over all seeds fell back to a random unseen genome "
                "(the sampler kept proposing tried or invalid genomes)"
            )
        same = sum(r.notes.get("identical_sass", 0) for r in rs)
        if same:
            out.append(
                f"{label}: {same} attempt(s) over all seeds had the SASS of a genome measured before "
                "(rejected without a measurement, counted as evaluations)"
            )
    return out


def _mann_whitney(a: Sequence[Run], b: Sequence[Run], cap: int) -> float | None:
    try:
        from scipy.stats import mannwhitneyu
    except Exception:  # scipy is optional (it comes with kernel_tuner)
        return None
    xa = [r.evals if r.evals is not None else cap for r in a]
    xb = [r.evals if r.evals is not None else cap for r in b]
    return float(mannwhitneyu(xa, xb, alternative="two-sided").pvalue)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="mhc_pre_big_fuse")
    ap.add_argument("--sweep", default=None, help="a sweep file (default: the family's first recorded sweep)")
    ap.add_argument(
        "--config",
        default=None,
        help="the campaign config that sets the correctness mode and min_gain (default: configs/<family>.yaml)",
    )
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds are first-seed .. first-seed + seeds - 1 (report on 0.., tune on others)",
    )
    ap.add_argument(
        "--strategies",
        default=None,
        help="comma-separated labels or names to run (default: all): " + ", ".join(s.name for s in STRATEGIES),
    )
    ap.add_argument("--no-tabu", action="store_true", help="do not give evo's proposers the campaign's tabu")
    ap.add_argument(
        "--no-static-key",
        action="store_true",
        help="do not give the surrogate the sweep's SASS digests (what a CPU compile tells)",
    )
    ap.add_argument(
        "--retries",
        type=int,
        default=None,
        help="asks per proposal of the Optuna proposers before their random fallback (default: theirs, "
        "100); another configuration of those peers, reported as such",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes for the seeds of evo's and Optuna's strategies (the same runs, sooner)",
    )
    ap.add_argument("--out", default=None, help="write the table into this markdown file (between markers)")
    args = ap.parse_args(argv)
    if args.retries is not None and not 1 <= args.retries <= 10000:
        ap.error("--retries: 1..10000")

    space = load_space(args.family, args.sweep, args.config)
    chosen = STRATEGIES
    if args.strategies:
        want = {w.strip() for w in args.strategies.split(",")}
        chosen = [s for s in STRATEGIES if s.name in want or s.label in want]
    hits = space.hits()
    print(
        f"sweep: {space.sweep_path.relative_to(ROOT) if space.sweep_path.is_relative_to(ROOT) else space.sweep_path}"
        f" ({space.created}); space: {space.size} genomes, "
        f"{sum(1 for g in space.genomes if space.objective(g) is not None)} valid; best {space.best:.4f}x; "
        f"target >= {space.target:.4f}x ({len(hits)} genome(s)); correctness mode {space.mode}"
    )
    if not 1 <= args.jobs <= 256:
        ap.error("--jobs: 1..256")
    runs, skipped = bench(
        space,
        args.seeds,
        chosen,
        tabu=not args.no_tabu,
        first_seed=args.first_seed,
        static_key=not args.no_static_key,
        retries=args.retries,
        jobs=args.jobs,
    )
    lines = table(runs, space.size)
    summary = verdict(runs, space.size) if runs else []
    print()
    print("\n".join(lines))
    for s in summary:
        print(s)
    for k, why in skipped.items():
        print(f"skipped {k}: {why}")
    if args.out:
        write_doc(Path(args.out), space, runs, skipped, lines, summary, args)
        print(f"wrote {args.out}")
    return 0


def doc_tag(family: str, no_tabu: bool = False, first_seed: int = 0, retries: int | None = None) -> str:
    """The name of a run's block in the markdown file: one per family, tabu setting, first seed and Optuna retries."""
    return (
        f"search-bench-{family}"
        + ("-no-tabu" if no_tabu else "")
        + (f"-from-{first_seed}" if first_seed else "")
        + (f"-retries-{retries}" if retries is not None else "")
    )


def _markers(tag: str) -> tuple[str, str]:
    return f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"


def write_doc(
    path: Path,
    space: Space,
    runs: Mapping[str, list[Run]],
    skipped: Mapping[str, str],
    lines: list[str],
    summary: list[str],
    args: argparse.Namespace,
) -> None:
    """Put the table, the command, the date and the sweep between this run's markers in ``path`` (or append them).

    The markers are ``<!-- search-bench-<family>:begin/end -->``, with ``-no-tabu`` appended for a ``--no-tabu``
    run, ``-from-<N>`` for ``--first-seed N`` (N > 0) and ``-retries-<N>`` for ``--retries N``, so every family's
    tables can live in one document; text outside the markers is left alone.
    """
    cmd = (
        "python tools/search_bench.py " + shlex.join(sys.argv[1:])
        if sys.argv[0].endswith("search_bench.py")
        else f"tools/search_bench.py main({shlex.join(sys.argv[1:])})"
    )
    try:
        sweep = space.sweep_path.relative_to(ROOT)
    except ValueError:
        sweep = space.sweep_path
    import optuna

    kt = _dist_version("kernel_tuner")
    valid = sum(1 for g in space.genomes if space.objective(g) is not None)
    tag = doc_tag(space.family.name, args.no_tabu, args.first_seed, getattr(args, "retries", None))
    begin, end = _markers(tag)
    block = [
        begin,
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}  ",
        f"Sweep: `{sweep}` (recorded {space.created}; {space.size} genomes, {valid} valid; "
        f"best {space.best:.4f}x; target >= {space.target:.4f}x, met by {len(space.hits())} genome(s))  ",
        f"Seeds: {args.seeds} ({args.first_seed}..{args.first_seed + args.seeds - 1}); correctness mode "
        f"{space.mode}; campaign tabu for evo's proposers: {'off' if args.no_tabu else 'on'}; SASS digests for "
        f"the surrogate: {'off' if args.no_static_key else 'on'}; retries of the Optuna proposers: "
        f"{_retries_text(getattr(args, 'retries', None))}; optuna {optuna.__version__}; "
        f"kernel_tuner {kt or 'not installed'}; Python {sys.version.split()[0]}",
        "",
        *lines,
        "",
        *[f"- {s}" for s in summary],
        *[f"- skipped {k}: {why}" for k, why in skipped.items()],
        "",
        end,
    ]
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + "\n".join(block) + rest.split(end, 1)[1]
    else:
        text = (text.rstrip() + "\n\n" if text else "") + "\n".join(block) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _retries_text(retries: int | None) -> str:
    from evo.search import OptunaSampler

    return (
        f"{OptunaSampler.RETRIES} (their default)"
        if retries is None
        else f"{retries} (--retries; default {OptunaSampler.RETRIES})"
    )


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
