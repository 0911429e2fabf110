"""Search efficiency on a recorded sweep: evaluations to come within 1%, 2%, 3% and 5% of the sweep's best.

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

* evo's row (:data:`EVO`: the campaign config's proposer, options included) and the other proposers
  (``evolutionary``, ``random``, ``tpe``, ``nsga2``, the bench's Optuna peers) are made by ``evo run``'s own
  factory (``Campaign.make_proposer``: the correctness mode, the idea layer, the per-session seed) and driven by
  the campaign loop itself (``evo.loop.campaign.Campaign``, the loop of ``evo run`` and ``evo worker``; see
  ``bench_campaign`` and tools/bench_loop.py, which also gives the compile-ahead lag of a GPU run, ``lag=1``)
  on the recorded backend replaying the sweep, with a ledger
  in memory and the campaign's gates in their order: identical SASS (the
  sweep's digest of the genome equals that of a genome already measured in the
  run: rejected, no score), the exact-mode rule, the correctness gate on the
  recorded evidence, then, in place of the paired-interval perf gate, the
  recorded objective: accepted when it beats the current champion's by more
  than ``min_gain``, rejected (perf) otherwise. Attempt 0 is the baseline
  (score 1.0, counted as evaluation 1, for Kernel Tuner's runs too: every strategy is charged it).
  The loop gives the proposer the campaign's tabu (knob values the exact-mode
  correctness gate ruled out) at every step. A
  proposer with a ``static_key`` attribute (the surrogate) gets the sweep's SASS
  digests through it, each with the genome's launch digest (the variant): what
  compiling a genome on the CPU tells before any GPU time (``--no-static-key``
  withholds it).
* Kernel Tuner's ``genetic_algorithm`` and ``bayes_opt`` (``pip install
  kernel_tuner``; skipped with the reason when it is not importable) run in
  Kernel Tuner's own simulation mode on a cache file written from the same
  sweep: time = 1 / objective, invalid genomes stored as RuntimeFailedConfig,
  tune_params = the knob values (their order drawn per seed: ``kt_tune_params``; its Latin-hypercube starts seeded:
  ``_seeded_lhs``), restrictions = ``family.check``,
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

**Evaluations** are GPU measurements. A proposal the campaign rejects before any GPU time (identical SASS to an
attempt with timings; in exact mode, a knob that changes the summation order) is an attempt, not an evaluation; it
is counted apart ("rejected before the GPU"), by one rule for every strategy (:func:`before_gpu`), Kernel Tuner's
included. Attempt 0, the baseline, is evaluation 1 of evo's runs.

**Targets**: evaluations to within 1%, 2%, 3% and 5% of the sweep's best (:data:`TARGETS`; 2% is the bar's,
:data:`HEADLINE`), each ratio to the best peer with a seeded percentile-bootstrap 95% interval; ``--curves`` writes
the mean best-so-far curve (best objective so far / the sweep's best, against evaluations) per strategy as CSV.
The tables also say how many distinct runs the seeds made per strategy.

**What the surrogate knows** is what it knows in ``evo run``: the sweep's SASS digests (``static_key``) are not
given unless ``--static-key`` says so (``evo.loop.campaign`` does not wire them).

A run that never reaches the target is a failure and counts as the space size
(or, stopped by ``--cap``, as one evaluation more than it made) in the statistics; the success column says how
many runs got there.
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

from evo.config import PerfGateConfig, narrow_family  # noqa: E402
from evo.core.family import Family, Geometry, load_family  # noqa: E402
from evo.core.genome import Genome  # noqa: E402
from evo.core.records import Attempt, Code, Verdict  # noqa: E402
from evo.core.variant import launch_digest, variant_key  # noqa: E402
from gates.judge import JudgeContext, References, judge, pipeline  # noqa: E402
from harness import sweepfile  # noqa: E402
from harness.recorded import SAME, SIMULATED_LABEL, recorded_evidence  # noqa: E402
from harness.sweepfile import sweep_files  # noqa: E402

TOLERANCE = 0.01  # "within 1% of the best": the tightest target; a run stops when it reaches it
TARGETS = (0.01, 0.02, 0.03, 0.05)  # evaluations to within each of these of the sweep's best are reported
HEADLINE = 0.02  # the target of the bar: median evaluations to within 2% of the best
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
    ruled: frozenset[str] = frozenset()  # exact mode: genomes with a knob that changes the summation order
    config_path: Path | None = None  # the campaign config evo run would read (None: the bench's own, defaults)
    replay_backend: Any = field(default=None, repr=False, compare=False)  # made on first use, or given (a cache's)
    _variants: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def variant(self, key: str) -> str | None:
        """The genome's variant as the campaign's identity gate holds it (evo/core/variant.py): the sweep's SASS
        digest and the family's launches at the sweep's geometries (computed here, cached: a sweep from before
        launch digests records none), or None where the sweep has no digest."""
        d = self.sass.get(key)
        if not d:
            return None
        if key not in self._variants:
            pdl = (self.data or {}).get("launch") == "pdl"
            launch = launch_digest(self.family, Genome.from_key(key), self.geometries, pdl)
            self._variants[key] = variant_key(d, launch)
        return self._variants[key]

    def recorded_backend(self) -> Any:
        """The recorded backend replaying this sweep (made once per space: a sweep file takes seconds to read)."""
        if self.replay_backend is None:
            from harness.recorded import RecordedBackend, Sweep

            assert self.data is not None, "a space made without its sweep data has no backend"
            sweep = Sweep(self.sweep_path, self.data, {g.name: g.name for g in self.geometries})
            self.replay_backend = RecordedBackend(
                self.family, self.geometries, seeds=self.seeds or 10**9, runs=self.runs or 10**9, sweep=sweep
            )
        return self.replay_backend

    @property
    def size(self) -> int:
        return len(self.genomes)

    @property
    def best(self) -> float:
        return max(v for v in self.scores.values() if v is not None)

    @property
    def target(self) -> float:
        return (1.0 - TOLERANCE) * self.best

    def goal(self, tol: float) -> float:
        """The objective a genome needs to be within ``tol`` of the sweep's best."""
        return (1.0 - tol) * self.best

    def objective(self, genome: Mapping[str, Any]) -> float | None:
        return self.scores.get(Genome(genome).key)

    def hits(self) -> list[str]:
        return [k for k, v in self.scores.items() if v is not None and v >= self.target]


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def entry(genomes: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """A sweep entry with ``same_as`` links followed as the recorded backend follows them (one rule, one limit:
    harness.sweepfile.linked_entry)."""
    return sweepfile.linked_entry(genomes, key)


@dataclass(frozen=True)
class _Judged:
    """The campaign's correctness gate over a recorded sweep read without a backend: the judge's own gate
    (gates/pipeline/correctness.py), with the mode and tolerance factor given and the sweep's frozen outputs as its
    references (made once per sweep_objectives)."""

    context: Any
    gates: list[Any]

    @classmethod
    def of(cls, data: Mapping[str, Any], baseline_hashes: Mapping[str, str], mode: str, tolerance_factor: float):
        from evo.config import CorrectnessGateConfig, GateConfig

        gates = GateConfig(correctness=CorrectnessGateConfig(mode=mode, tolerance_factor=tolerance_factor))
        refs = References(baseline_hashes, data.get("baseline_errors", {}))
        ctx = JudgeContext.standalone(SimpleNamespace(family=None, gates=gates), references=refs, simulated=True)
        return cls(ctx, pipeline(("correctness",)))

    def valid(self, key: str, e: Mapping[str, Any], seeds: int | None, runs: int | None) -> bool:
        """Whether the evidence the recorded backend serves for a sweep entry (harness.recorded.recorded_evidence)
        passes; an entry with no checks was not measured."""
        ev = recorded_evidence(e, self.context.references.baseline_hashes, seeds or 10**9, runs or 10**9)
        if not ev.checks:
            return False
        from evo.search import Proposal

        try:
            genome = Genome.from_key(key)
        except ValueError:  # (a hand-written sweep's key: the gate reads the outputs, not the genome)
            genome = Genome({})
        prop = Proposal(genome, f"recorded sweep entry {key}")
        return judge(prop, self.context, gates=self.gates, only=("correctness",), outputs=ev)[0].ok


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
    judged = _Judged.of(data, bh, mode, tolerance_factor)
    for key in genomes:
        e = entry(genomes, key)
        if e is None or e.get("status", "ok") != "ok" or not e.get("checks"):
            out[key] = None
            continue
        if not judged.valid(key, e, seeds, runs) or e.get("recheck"):
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
    from harness.ktcache import is_kt_cache_path

    if sweep is None and config is None and is_kt_cache_path(family_name):  # a Kernel Tuner cache is its own space
        from tools.heldout import kt_space

        return kt_space(family_name)
    family = load_family(family_name)
    own = family.folder / "evo.yaml"  # a family kept outside candidates/ (examples/, a user's repo): its config
    if (
        config is None
        and own.is_file()
        and (Path(family_name).is_dir() or not (ROOT / "configs" / f"{family.name}.yaml").is_file())
    ):
        config = own
    settings = campaign_settings(family.name, config)
    paths = [Path(sweep)] if sweep else sweep_files(family.folder / "recorded")
    if not paths:
        raise SystemExit(f"family {family_name} has no recorded sweep under {family.folder / 'recorded'}")
    path = paths[0]
    data = sweepfile.load(path)
    # a sweep of a sub-space (tools/sweep.py --knobs): every strategy searches what it holds, as evo run does
    family, _ = narrow_family(family, (data.get("space") or {}).get("knobs"))
    geometries = [Geometry(g["name"], dict(g["params"]), float(g["weight"])) for g in data["geometries"]]
    names = [k.name for k in family.knobs]
    genomes = [Genome(dict(zip(names, vals))) for vals in itertools.product(*(k.values for k in family.knobs))]
    genomes = [g for g in genomes if family.check(g, geometries) is None]
    mode = settings["mode"]
    scores = sweep_objectives(data, mode, settings["tolerance_factor"], settings["seeds"], settings["runs"])
    ruled = set()
    for g in genomes:  # a valid genome the sweep does not hold cannot be measured here
        scores.setdefault(g.key, None)
        if mode == "exact" and any(family.inexact_knobs(g, geo) for geo in geometries):
            scores[g.key] = None  # rejected before the GPU, whatever the sweep measured
            ruled.add(g.key)
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
        frozenset(ruled),
        settings["config"],
    )


# --- one simulated search ----------------------------------------------------------------
@dataclass
class Run:
    strategy: str
    seed: int
    evals: int | None  # evaluations (GPU measurements) up to and including the first within 1% of the best; None: never
    keys: list[str] = field(default_factory=list)  # genome keys in proposal order (unique), pre-GPU rejections too
    notes: dict[str, Any] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)  # per key: why it was rejected before the GPU ("": measured)
    to: dict[float, int | None] = field(default_factory=dict)  # target -> evaluations to reach it (None: never)

    @property
    def ok(self) -> bool:
        return self.evals is not None

    def evals_to(self, tol: float = TOLERANCE) -> int | None:
        return self.to.get(tol, self.evals) if self.to else self.evals

    @property
    def pre_gpu(self) -> int:
        """Attempts rejected before any GPU time (identical SASS, the exact-mode rule)."""
        return sum(1 for why in self.rejected if why)


def before_gpu(space: Space, keys: Sequence[str]) -> list[str]:
    """Why each proposal of a run is rejected before it reaches the GPU, as the campaign's gates rule it ("": it is
    measured). The same rule for every strategy, whatever tool proposed the genomes:

    * identical SASS: its machine code (the sweep's digest from a CPU compile) and its launch equal those of an
      earlier attempt with timings (one that passed correctness) -- the campaign's ``identical_sass`` gate;
    * exact rule: exact mode and a knob that changes the summation order -- the ``exact_rule`` gate.

    The static gate (registers, spills) is not replayed: the sweeps record no resources, and every genome in them
    compiled and ran.
    """
    timed: set[str] = set()
    out: list[str] = []
    for k in keys:
        d = space.variant(k)
        if d and d in timed:
            out.append("identical SASS")
            continue
        if k in space.ruled:
            out.append("exact rule")
            continue
        out.append("")
        if d and space.scores.get(k) is not None:
            timed.add(d)
    return out


def finish(space: Space, run: Run) -> Run:
    """Set a run's pre-GPU rejections and its evaluations to each target (counting GPU measurements only)."""
    run.rejected = before_gpu(space, run.keys)
    run.to = {}
    n = 0
    for k, why in zip(run.keys, run.rejected):
        if why:
            continue
        n += 1
        score = space.scores.get(k)
        for tol in TARGETS:
            if tol not in run.to and score is not None and score >= space.goal(tol):
                run.to[tol] = n
    for tol in TARGETS:
        run.to.setdefault(tol, None)
    run.evals = run.to[TOLERANCE]
    return run


def best_so_far(space: Space, run: Run, n: int) -> list[float]:
    """Relative performance (best objective so far / the sweep's best) after each of the first n evaluations; 0
    before the first valid one; a run that stopped (at the 1% target) keeps its last value."""
    out: list[float] = []
    best = 0.0
    rejected = run.rejected or before_gpu(space, run.keys)
    for k, why in zip(run.keys, rejected):
        if why:
            continue
        best = max(best, space.scores.get(k) or 0.0)
        out.append(best / space.best)
        if len(out) >= n:
            break
    return out + [best / space.best] * (n - len(out))


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

    gain = f"{100 * space.min_gain:g}%"

    def check(s: Any) -> Verdict:
        ctx, a = s.context, s.attempt
        score = space.objective(s.proposal.genome)
        if score is None:
            return Verdict.error("not_recorded", "the sweep holds no objective for this genome", gate="perf")
        for g in ctx.config.geometries:
            if g.weight > 0:
                t = ctx.backend.measure([("cand", s.loaded)], g, ctx.config.gates.perf.rounds).times_us["cand"]
                a.timings[g.name] = Timing(_median(t), 0.0, len(t), 0, f"recorded median ({SIMULATED_LABEL})")
        a.score = score
        champ = ctx.champion
        a.parent_id = champ.id
        if score > (champ.score or 0.0) * (1.0 + space.min_gain):
            return Verdict.accepted(f"{score:.4f}x beats the champion #{champ.id} ({champ.score:.4f}x) by > {gain}")
        return Verdict.rejected(
            "perf",
            f"{score:.4f}x does not beat the champion #{champ.id} ({champ.score:.4f}x) by > {gain}",
            Code.PERF_NOT_FASTER,
        )

    return check


def bench_campaign(
    space: Space,
    name: str | Any,
    cap: int,
    seed: int = 0,
    tabu: bool = True,
    until_target: bool = True,
    options: Mapping[str, Any] | None = None,
    tol: float = TOLERANCE,
    lag: int = 0,
    static_key: Callable[..., Any] | None = None,
) -> Any:
    """The campaign loop as ``evo run`` deploys it (tools/bench_loop.py ``BenchCampaign``) on the space's recorded
    sweep: the family's campaign config (``space.config_path``) with a ledger in memory, a budget of ``cap`` attempts
    (the baseline included), the campaign's gates with the perf gate replaced by :func:`objective_gate`, the
    proposer made by the campaign's own factory, the compile-ahead ``lag`` (0 or 1 result) and, ``until_target``,
    a stop at the first attempt within ``tol`` of the best. ``name``: the config's proposer for evo's row
    (:data:`EVO`, options: the config's unless ``options`` replaces them), else a peer's proposer with ``options``;
    a proposer object instead of a name is driven as it is (a test's or an ablation's, not the factory's).
    Returned unrun (``.run()``)."""
    from evo.config import Budget
    from tools.bench_loop import BenchCampaign, deployed_config

    budget = Budget(attempts=cap)
    given = None if isinstance(name, str) else name
    if given is not None:
        name = type(given).__name__
    if space.config_path is not None:
        own = name == "config"  # evo's row: the config's proposer as it stands
        cfg = deployed_config(
            space.config_path,
            family=space.family,
            geometries=space.geometries,
            budget=budget,
            seed=seed,
            proposer=None if own else (name, dict(options or {})),
            options=options if own else None,
        )
    else:
        cfg = _default_config(space, name, options, budget, seed)
    gates = pipeline(builtin=True, replace={"perf": objective_gate(space)})  # the judge's, the perf gate swapped

    goal = space.goal(tol)  # (a property over the whole space: read once)

    def target(attempts: list[Attempt]) -> str | None:
        last = attempts[-1] if attempts else None
        return "target reached" if last is not None and (last.score or 0.0) >= goal else None

    return BenchCampaign(
        cfg,
        lag=lag,
        static_key=static_key,
        out=lambda _: None,
        command="tools/search_bench.py",
        backend=space.recorded_backend(),
        builder=SweepBuilder(space),
        gates=gates,
        stop_when=target if until_target else None,
        tabu=tabu,
        proposer=given,
    )


def _default_config(space: Space, name: str, options: Mapping[str, Any] | None, budget: Any, seed: int) -> Any:
    """The campaign config of a space with no config file: the defaults, the space's correctness settings."""
    from evo.config import (
        CampaignConfig,
        CorrectnessGateConfig,
        FinishConfig,
        GateConfig,
        PeerConfig,
        ProposerConfig,
        SearchConfig,
    )
    from evo.config import WorkerConfig as WorkerCfg
    from evo.ledger.storage_url import MEMORY

    perf = dataclasses.replace(space.perf, ceiling_check=0)  # (no end-of-run ceiling check: nothing to quote)
    return CampaignConfig(
        path=None,  # type: ignore[arg-type]  # (no config file)
        campaign="bench",
        family=space.family,
        geometries=space.geometries,
        budget=budget,
        proposer=ProposerConfig("surrogate" if name == "config" else name, dict(options or {})),
        gates=GateConfig(
            correctness=CorrectnessGateConfig(
                mode=space.mode,
                seeds=space.seeds or 10**9,
                runs=space.runs or 10**9,
                tolerance_factor=space.tolerance_factor,
            ),
            perf=perf,
        ),
        storage=MEMORY,  # a MemoryLedger (evo/ledger/storage.py): nothing kept
        seed=seed,
        backend="recorded",
        peer=PeerConfig(torch_compile="off"),
        worker=WorkerCfg(isolation="none", prefetch=0),
        # no finish (evo/loop/finish.py): it re-judges near misses with the perf gate's statistics, which the
        # noiseless objective gate below stands in for; the benchmark counts the proposer's evaluations
        search=SearchConfig(finish=FinishConfig(enabled=False)),
    )


def run_proposer(
    space: Space,
    name: str | Any,
    seed: int,
    options: Mapping[str, Any] | None = None,
    cap: int | None = None,
    tabu: bool = True,
    until_target: bool = True,
    static_key: bool = False,
    tol: float = TOLERANCE,
    lag: int = 0,
) -> Run:
    """Drive one proposer through the campaign loop as deployed (:func:`bench_campaign`) on the recorded sweep.

    ``name`` ``"config"``: the campaign config's own proposer (evo's row: what ``evo run`` runs), ``options``
    replacing the config's when given; any other name: that proposer (an evo one or a bench peer) with ``options``.
    Either way the campaign's factory makes it (the correctness mode, the idea layer, the per-session seed); a
    proposer object instead of a name is driven as it is (a test of one proposer's option on one seed).
    A proposal whose recorded SASS equals that of a genome measured earlier in the run is rejected as the campaign
    rejects it (identical SASS: same machine code, not measured again; no score): an attempt, not an evaluation
    (:func:`before_gpu`). ``static_key``: a proposer with that attribute gets the sweep's SASS digests (what a CPU
    compile tells); off by default, because ``evo run`` does not give it. ``cap``: attempts, the baseline and
    pre-GPU rejections included. ``lag``: the compile-ahead lag (1: as ``evo run`` on a GPU).
    """
    cap = cap or space.size
    key = (lambda g: space.variant(Genome(g).key)) if static_key and space.sass else None
    camp = bench_campaign(space, name, cap, seed, tabu, until_target, options, tol, lag, key)
    camp.run()
    attempts = camp.ledger.attempts()
    name = name if isinstance(name, str) else type(name).__name__
    run = finish(space, Run(name, seed, None, [a.genome_key for a in attempts]))
    if cap < space.size:  # stopped by the cap: a target not reached needs more than the evaluations made
        run.notes["censored"] = len(run.keys) - run.pre_gpu + 1
    assert len(set(run.keys)) == len(run.keys), f"{name} proposed a genome twice"
    same = sum(a.verdict.code is Code.STATIC_IDENTICAL_SASS for a in attempts)
    if same:
        run.notes["identical_sass"] = same
    inner = getattr(camp.made, "inner", camp.made) if camp.made is not None else camp.proposer
    run.notes["fallbacks"] = getattr(inner, "fallbacks", 0)
    run.notes["random_origin"] = sum(1 for a in attempts[1:] if a.origin.startswith("random"))
    run.notes["proposer"] = f"{type(inner).__name__} {dict(getattr(inner, 'options', {}))}"
    return run


def proposer_class(name: str) -> Any:
    """An evo proposer by name, or one of the bench's own peers (tools/bench_peers.py)."""
    from evo.search import PROPOSERS
    from tools.bench_peers import BENCH_PROPOSERS

    return BENCH_PROPOSERS.get(name) or PROPOSERS[name]


# --- Kernel Tuner's simulation mode -------------------------------------------------------
KT_STRATEGIES = (
    "genetic_algorithm",
    "bayes_opt",
    "simulated_annealing",
    "dual_annealing",
    "basinhopping",
    "pso",
    "diff_evo",
    "greedy_ils",
    "mls",
)
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


def kt_tune_params(space: Space, seed: int | None = None) -> dict[str, list[Any]]:
    """The knobs as Kernel Tuner's tune_params: numeric knobs' values sorted (its strategies move along the value
    index: neighbours should be neighbouring values); other knobs in the family's order.

    ``seed``: the order a user might have written is drawn per seed (issue 42: Kernel Tuner's results depend on
    it), so no one order's luck is the peer's: each numeric knob ascending or descending, each other knob's values
    shuffled; the knob order (the cache's key) stays. None: every numeric knob ascending (the order of the cache
    file, written once)."""
    from tools.bench_peers import ordered_values

    rng = random.Random(None if seed is None else 0x4B54 + seed)
    out: dict[str, list[Any]] = {}
    for k in space.family.knobs:
        vals = ordered_values(k.values)
        if vals is None:
            vals = list(k.values)
            if seed is not None:
                rng.shuffle(vals)
        elif seed is not None and rng.random() < 0.5:
            vals.reverse()
        out[k.name] = vals
    return out


def kt_key(space: Space, genome: Mapping[str, Any]) -> str:
    """Kernel Tuner's cache key: the values in tune_params order joined by commas (runners/simulation.py)."""
    return ",".join(str(genome[k.name]) for k in space.family.knobs)


# A strategy that keeps asking for configurations it was served before (free: no new evaluation) is stopped after
# this many servings per genome of the space, as if its budget were spent (Kernel Tuner 1.5's greedy_ils can loop so).
SERVED_MAX = 20
PENALTY = 2.0  # a Bayesian optimizer's invalid genome: this many times the slowest valid genome's time


def kt_penalty(space: Space) -> float:
    """The finite time a Bayesian optimizer is told for an invalid genome: PENALTY x the slowest valid one's."""
    return PENALTY / min(v for v in space.scores.values() if v is not None)


def write_kt_cache(space: Space, path: Path, problem_size: Sequence[int], penalty: float | None = None) -> Path:
    """A Kernel Tuner cache file (the JSON that util.process_cache / read_cache take) holding the whole sweep.

    Valid genomes get time = 1 / objective (relative to the baseline's 1.0); invalid ones are stored as
    RuntimeFailedConfig, the error Kernel Tuner records for a configuration that ran but gave no usable time, or,
    with ``penalty``, as a finite time of that value (what a Bayesian optimizer needs: Kernel Tuner 1.5's bayes_opt
    takes the 1.8e308 its cost function returns for a failure as a valid observation).
    Every entry costs ``EVAL_MS`` of benchmark_time (what a simulated run adds to its simulated time).
    """
    tp = kt_tune_params(space)
    stamp = dt.datetime.now(dt.UTC).isoformat()
    cache: dict[str, Any] = {}
    for g in space.genomes:
        e: dict[str, Any] = {k: g[k] for k in tp}
        score = space.objective(g)
        if score is None and penalty is not None:
            e["time"] = penalty
            e["times"] = [penalty]
        elif score is None:  # the error's name in time too: KTdashboard reads time on every entry
            e["time"] = e["__error__"] = "RuntimeFailedConfig"
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
    from harness.ktcache_write import kt_cache_text

    path.write_text(kt_cache_text(doc))  # laid out as Kernel Tuner writes one (closed by "}\n}")
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
            if (score is not None and score >= space.target) or len(served) > SERVED_MAX * space.size:
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
def _seeded_lhs(seed: int, np: Any):
    """Kernel Tuner draws Latin-hypercube samples with scipy's LatinHypercube and no seed, i.e. from fresh OS
    entropy, so its runs cannot be repeated: bayes_opt's initial sample, and ``Searchspace.get_LHS_sample`` (the
    start population of diff_evo and the other constraint-aware strategies, which imports the class at each call).
    Both are given one generator seeded with the run's seed."""
    import scipy.stats.qmc as qmc

    try:
        from kernel_tuner.strategies import bayes_opt
    except Exception:
        bayes_opt = None
    orig = qmc.LatinHypercube
    seeded = functools.partial(orig, rng=np.random.default_rng(seed))
    qmc.LatinHypercube = seeded
    if bayes_opt is not None:
        bayes_opt.LatinHypercube = seeded
    try:
        yield
    finally:
        qmc.LatinHypercube = orig
        if bayes_opt is not None:
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
    from kernel_tuner.util import StopCriterionReached

    fam, geos = space.family, space.geometries
    tp = kt_tune_params(space, seed)  # the value order of this seed (the cache file's keys do not depend on it)

    opts = {"max_fevals": space.size, **dict(options or {})}
    exact_rule = bool(opts.pop("exact_rule", False))
    opts.pop("penalty", None)  # (the cache file's business)

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
        _seeded_lhs(seed, np),
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        # Kernel Tuner 1.5 takes a seed argument but never uses it: its strategies draw from the global
        # random and numpy generators, so those are seeded, last thing before the run.
        random.seed(seed)
        np.random.seed(seed)
        try:
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
        except StopCriterionReached:
            # Some strategies (simulated_annealing) evaluate their start outside their own budget check: where
            # that start already reached the target, the spent budget (above) surfaces here. The run is complete.
            pass
    run = Run(f"kt {strategy}", seed, None)
    # The baseline is charged to every strategy (issue 42): evo's and Optuna's runs measure it first, as evo run
    # does (the reference of every gate), so a Kernel Tuner run's evaluation 1 is the baseline too; serving it
    # later (genetic_algorithm starts from it) is no new evaluation.
    run.keys.append(space.baseline_key)
    uniq: set[str] = {space.baseline_key}
    for key in served:
        if key in uniq:
            continue
        uniq.add(key)
        run.keys.append(key)
        score = space.scores.get(key)
        if score is not None and score >= space.target:
            break
    run.notes["served"] = len(served)
    return finish(space, run)


# --- the benchmark ----------------------------------------------------------------------
@dataclass
class Strategy:
    label: str
    kind: str  # evo | kt
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    peer: bool = True  # False: one of evo's own proposers (not a peer for the "at most half" bar)
    told: str = ""  # what the strategy is told of the space beyond the knob lists (docs/search-efficiency.md)


_TPE_MV = {"multivariate": True, "group": True}
STRATEGIES = [
    Strategy(
        EVO,
        "evo",
        "config",  # the campaign config's proposer, made by evo run's factory (tools/bench_loop.py)
        peer=False,
        told="knob values (numeric ones ordered), family.check, tabu, the correctness mode",
    ),
    Strategy("evo evolutionary", "evo", "evolutionary", peer=False, told="knob values, family.check, tabu"),
    Strategy("evo random", "evo", "random", told="family.check, tabu"),
    Strategy("optuna TPE", "evo", "tpe", told="every knob categorical; family.check, tabu (as FAIL asks)"),
    Strategy(
        "optuna TPE ordered",
        "evo",
        "optuna-ordered",
        {"sampler": "TPESampler"},
        told="numeric knobs ordered (value index), others categorical; family.check, tabu (as FAIL asks)",
    ),
    Strategy(
        "optuna TPE multivariate+group ordered",
        "evo",
        "optuna-ordered",
        {"sampler": "TPESampler", "sampler_options": _TPE_MV},
        told="as TPE ordered; multivariate=True, group=True",
    ),
    Strategy(
        "optuna GP ordered",
        "evo",
        "optuna-ordered",
        {"sampler": "GPSampler"},
        told="numeric knobs ordered (value index), others categorical; family.check, tabu (as FAIL asks)",
    ),
    Strategy("optuna NSGA-II", "evo", "nsga2", told="every knob categorical; family.check, tabu (as FAIL asks)"),
    *[
        Strategy(
            f"kt {name}",
            "kt",
            name,
            {"penalty": True} if name == "bayes_opt" else {},
            told="numeric knobs ordered; restrictions = family.check; invalid genomes "
            + ("a finite penalty time" if name == "bayes_opt" else "failed (RuntimeFailedConfig)"),
        )
        for name in KT_STRATEGIES
    ],
    Strategy(
        "kt genetic_algorithm + exact rule",
        "kt",
        "genetic_algorithm",
        {"exact_rule": True},
        told="as kt genetic_algorithm, and the exact rule as a restriction",
    ),
    Strategy(
        "kt bayes_opt + exact rule",
        "kt",
        "bayes_opt",
        {"exact_rule": True, "penalty": True},
        told="as kt bayes_opt, and the exact rule as a restriction",
    ),
]


def optuna_options(s: Strategy, retries: int | None) -> dict[str, Any]:
    """The strategy's proposer options, with ``retries`` set when it is given and the proposer is an Optuna one."""
    from evo.search import OptunaSampler

    if retries is None or s.kind != "evo" or s.name == "config":
        return dict(s.options)
    if not issubclass(proposer_class(s.name), OptunaSampler):
        return dict(s.options)
    return {**s.options, "retries": retries}


_POOL_SPACE: Space | None = None  # the space of a --jobs pool's workers (inherited through fork)


def _pool_run(args: tuple[str, int, dict[str, Any] | None, bool, bool, int | None, int]) -> Run:
    name, seed, options, tabu, static_key, cap, lag = args
    assert _POOL_SPACE is not None
    return run_proposer(_POOL_SPACE, name, seed, options, cap=cap, tabu=tabu, static_key=static_key, lag=lag)


def _evo_runs(
    space: Space,
    name: str,
    seeds: Sequence[int],
    options: dict[str, Any] | None,
    tabu: bool,
    static_key: bool,
    jobs: int,
    cap: int | None = None,
    lag: int = 0,
) -> list[Run]:
    """One evo strategy over the seeds, in ``jobs`` forked processes (every run is seeded: the same runs)."""
    if jobs <= 1 or len(seeds) <= 1:
        return [
            run_proposer(space, name, seed, options, cap=cap, tabu=tabu, static_key=static_key, lag=lag)
            for seed in seeds
        ]
    import concurrent.futures as cf
    import multiprocessing as mp

    global _POOL_SPACE
    _POOL_SPACE = space
    try:
        with cf.ProcessPoolExecutor(min(jobs, len(seeds)), mp_context=mp.get_context("fork")) as ex:
            return list(ex.map(_pool_run, [(name, seed, options, tabu, static_key, cap, lag) for seed in seeds]))
    finally:
        _POOL_SPACE = None


def bench(
    space: Space,
    seeds: int = 20,
    strategies: Sequence[Strategy] = tuple(STRATEGIES),
    tabu: bool = True,
    out: Callable[[str], None] = print,
    first_seed: int = 0,
    static_key: bool = False,
    retries: int | None = None,
    jobs: int = 1,
    evo_options: Mapping[str, Any] | None = None,
    cap: int | None = None,
    lag: int = 0,
) -> tuple[dict[str, list[Run]], dict[str, str]]:
    """Every strategy x seed (first_seed, first_seed + 1, ...); returns the runs per strategy label and the skip
    reasons. ``retries``: the Optuna proposers' retries option (None: their default). ``jobs``: processes for the
    seeds of evo's proposers (Optuna's included); Kernel Tuner's runs stay in this one. ``evo_options``: options
    for the surrogate row (None: its defaults, as a config with ``options: {}`` runs it). ``cap``: attempts per
    run of evo's and Optuna's strategies (None: the space size); a run stopped there before the target counts as
    one evaluation more than it made (a lower bound, marked in the tables). ``lag``: the compile-ahead lag of evo's
    and Optuna's runs (0: none; 1: as evo run on a GPU, tools/bench_loop.py)."""
    runs: dict[str, list[Run]] = {}
    skipped: dict[str, str] = {}
    missing = kernel_tuner_missing()
    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        caches: dict[bool, Path] = {}
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
            penalty = bool(s.options.get("penalty"))
            if s.kind == "kt" and penalty not in caches:
                caches[penalty] = write_kt_cache(
                    space,
                    Path(tmp) / f"{space.family.name}{'-penalty' if penalty else ''}.json",
                    problem_size,
                    kt_penalty(space) if penalty else None,
                )
            t0 = time.perf_counter()
            if s.kind == "evo":
                options: dict[str, Any] | None = optuna_options(s, retries)
                if s.name == "config":  # the config's own options, evo_options over them where given
                    options = None if evo_options is None else {**(options or {}), **evo_options}
                elif s.label == EVO and evo_options is not None:
                    options = {**(options or {}), **evo_options}
                seeds_ = range(first_seed, first_seed + seeds)
                rs = _evo_runs(space, s.name, seeds_, options, tabu, static_key, jobs, cap, lag)
            else:
                rs = [
                    run_kernel_tuner(space, s.name, seed, caches[penalty], problem_size, s.options)
                    for seed in range(first_seed, first_seed + seeds)
                ]
            for r in rs:
                r.strategy = s.label
            runs[s.label] = rs
            st = stats(rs, space.size, HEADLINE)
            out(
                f"{s.label}: median {st['median']:g} evaluations to within {100 * HEADLINE:g}%, "
                f"{st['success']}/{len(rs)} reached it ({time.perf_counter() - t0:.1f} s)"
            )
    return runs, skipped


def _quantile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def values(rs: Sequence[Run], cap: int, tol: float = TOLERANCE) -> list[int]:
    """Evaluations to within ``tol`` per run; a run that never got there counts as ``cap`` (the space size)."""
    out: list[int] = []
    for r in rs:
        e = r.evals_to(tol)
        out.append(e if e is not None else int(r.notes.get("censored", cap)))
    return out


def stats(rs: Sequence[Run], cap: int, tol: float = TOLERANCE) -> dict[str, Any]:
    xs = values(rs, cap, tol)
    return {
        "median": _quantile(xs, 0.5),
        "q1": _quantile(xs, 0.25),
        "q3": _quantile(xs, 0.75),
        "min": min(xs),
        "max": max(xs),
        "success": sum(r.evals_to(tol) is not None for r in rs),
        "n": len(rs),
    }


def trajectories(rs: Sequence[Run]) -> int:
    """How many distinct runs (sequences of proposed genomes) the seeds made."""
    return len({tuple(r.keys) for r in rs})


def _fmt(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def table(runs: Mapping[str, list[Run]], cap: int, tol: float = TOLERANCE) -> list[str]:
    lines = ["| strategy | median evals | IQR | min–max | success rate |", "|---|---:|---:|---:|---:|"]
    for label, rs in runs.items():
        st = stats(rs, cap, tol)
        lines.append(
            f"| {label} | {_fmt(st['median'])} | {_fmt(st['q1'])}–{_fmt(st['q3'])} "
            f"(width {_fmt(st['q3'] - st['q1'])}) | {st['min']}–{st['max']} | "
            f"{st['success']}/{st['n']} ({100.0 * st['success'] / st['n']:.0f}%) |"
        )
    return lines


def targets_table(runs: Mapping[str, list[Run]], cap: int) -> list[str]:
    """Median evaluations to within each target (IQR for the headline one), distinct trajectories and the attempts
    rejected before the GPU (identical SASS, exact rule: not evaluations), per strategy."""
    pct = [f"{100 * t:g}%" for t in TARGETS]
    head = " | ".join(f"to {p}" + (" (IQR)" if t == HEADLINE else "") for p, t in zip(pct, TARGETS))
    lines = [
        f"| strategy | {head} | reached {100 * HEADLINE:g}% | distinct runs | rejected before the GPU (median) |",
        "|---|" + "---:|" * (len(TARGETS) + 3),
    ]
    for label, rs in runs.items():
        cells = []
        for t in TARGETS:
            st = stats(rs, cap, t)
            cells.append(
                f"{_fmt(st['median'])} ({_fmt(st['q1'])}–{_fmt(st['q3'])})" if t == HEADLINE else _fmt(st["median"])
            )
        if any("censored" in r.notes and r.evals_to(HEADLINE) is None for r in rs):
            cells[TARGETS.index(HEADLINE)] += " (capped: >=)"
        ok = sum(r.evals_to(HEADLINE) is not None for r in rs)
        pre = _fmt(_quantile([r.pre_gpu for r in rs], 0.5))
        lines.append(f"| {label} | {' | '.join(cells)} | {ok}/{len(rs)} | {trajectories(rs)}/{len(rs)} | {pre} |")
    return lines


def bootstrap_ratio(a: Sequence[float], b: Sequence[float], n: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """median(a) / median(b) and its percentile bootstrap 95% interval (seeds resampled with replacement, each
    group on its own, ``n`` resamples, a seeded generator: the same numbers every time)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma = np.median(xa[rng.integers(0, len(xa), (n, len(xa)))], axis=1)
    mb = np.median(xb[rng.integers(0, len(xb), (n, len(xb)))], axis=1)
    r = ma / mb
    return float(np.median(xa) / np.median(xb)), float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975))


def peer_labels(runs: Mapping[str, list[Run]]) -> list[str]:
    own = {s.label for s in STRATEGIES if not s.peer} | {EVO}
    return [k for k in runs if k not in own]


def ratios(runs: Mapping[str, list[Run]], cap: int) -> dict[float, dict[str, Any]]:
    """Per target: the best peer (lowest median), evo's median / its median, and the bootstrap 95% interval."""
    out: dict[float, dict[str, Any]] = {}
    peers = peer_labels(runs)
    if EVO not in runs or not peers:
        return out
    for t in TARGETS:
        meds = {k: stats(runs[k], cap, t)["median"] for k in peers}
        best = min(peers, key=lambda k: meds[k])
        r, lo, hi = bootstrap_ratio(values(runs[EVO], cap, t), values(runs[best], cap, t))
        out[t] = {
            "peer": best,
            "evo": stats(runs[EVO], cap, t)["median"],
            "peer_median": meds[best],
            "ratio": r,
            "lo": lo,
            "hi": hi,
            "peers": len(peers),
        }
    return out


def verdict(runs: Mapping[str, list[Run]], cap: int) -> list[str]:
    meds = {k: stats(v, cap)["median"] for k, v in runs.items()}
    best = min(meds, key=lambda k: meds[k])
    out = [f"best strategy: {best} (median {_fmt(meds[best])} evaluations)"]
    peers = {k: meds[k] for k in peer_labels(runs)}
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
                "(rejected without a measurement, not counted as evaluations)"
            )
    return out


def ratio_lines(runs: Mapping[str, list[Run]], cap: int) -> list[str]:
    """One line per target: evo / best peer with its bootstrap interval, and the bar at the headline target."""
    out = []
    for t, r in ratios(runs, cap).items():
        bar = ""
        if t == HEADLINE:
            met = r["ratio"] <= 0.5 and r["hi"] < 1.0 and r["peers"] >= 8
            bar = f"; bar (<= 0.5, 95% CI below 1, >= 8 peers; {r['peers']} here): {'met' if met else '**not met**'}"
        out.append(
            f"to within {100 * t:g}%: evo {_fmt(r['evo'])} / {_fmt(r['peer_median'])} ({r['peer']}) = "
            f"{r['ratio']:.2f} (bootstrap 95% CI {r['lo']:.2f}–{r['hi']:.2f}){bar}"
        )
    return out


def curves(space: Space, runs: Mapping[str, list[Run]], n: int | None = None) -> tuple[int, dict[str, list[float]]]:
    """The mean best-so-far curve per strategy (relative performance vs evaluations 1..n; n: the longest run's
    evaluations, at most the space size)."""
    if n is None:
        n = max((len(r.keys) - r.pre_gpu for rs in runs.values() for r in rs), default=1)
    out = {}
    for label, rs in runs.items():
        rows = [best_so_far(space, r, n) for r in rs]
        out[label] = [sum(col) / len(col) for col in zip(*rows)]
    return n, out


def write_curves(path: Path, space: Space, runs: Mapping[str, list[Run]], n: int | None = None) -> None:
    """The mean best-so-far curves as CSV: one row per evaluation count, one column per strategy."""
    n, cs = curves(space, runs, n)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.write(",".join(["evaluations", *cs]) + "\n")
        for i in range(n):
            f.write(",".join([str(i + 1), *(f"{c[i]:.5f}" for c in cs.values())]) + "\n")


def _mann_whitney(a: Sequence[Run], b: Sequence[Run], cap: int) -> float | None:
    try:
        from scipy.stats import mannwhitneyu
    except Exception:  # scipy is optional (it comes with kernel_tuner)
        return None
    xa, xb = values(a, cap), values(b, cap)
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
        "--static-key",
        action="store_true",
        help="give the surrogate the sweep's SASS digests (what a CPU compile tells); evo run does not, so the "
        "default does not either",
    )
    ap.add_argument(
        "--surrogate-options",
        default=None,
        help="options for the surrogate row, as JSON (default: its shipped defaults), e.g. '{\"sample\": 0.3}'",
    )
    ap.add_argument(
        "--curves",
        default=None,
        help="write the mean best-so-far curves (relative performance vs evaluations) to this CSV file",
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
    ap.add_argument(
        "--cap",
        type=int,
        default=None,
        help="attempts per run of evo's and Optuna's strategies (default: the space size); a capped run that "
        "missed a target counts as one evaluation more than it made",
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
        static_key=args.static_key,
        retries=args.retries,
        jobs=args.jobs,
        evo_options=json.loads(args.surrogate_options) if args.surrogate_options else None,
        cap=args.cap,
    )
    lines = targets_table(runs, space.size)
    summary = (ratio_lines(runs, space.size) + verdict(runs, space.size)) if runs else []
    if args.curves:
        write_curves(Path(args.curves), space, runs)
        print(f"wrote {args.curves}")
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
        f"the surrogate: {'on' if getattr(args, 'static_key', False) else 'off (as in evo run)'}; surrogate "
        f"options: {getattr(args, 'surrogate_options', None) or 'its defaults'}; retries of the Optuna proposers: "
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
