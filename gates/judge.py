"""The judge: one proposal through the registered gates (gates/registry.py), in order, over a read-only context.

``judge`` is what every path that judges a genome calls: the campaign loop for every attempt (``Campaign.evaluate``;
``evo run``, ``evo worker``, ``evo replay`` and ``evo selfcheck``'s faults), and, over a named part of the pipeline
(``only=``), ``evo export --check``, ``evo ablate``, selfcheck's A/A, ``evo check``, the probes and the search
benchmark. A gate receives the ``Evidence`` of the attempt being judged: the ``JudgeContext`` (what the campaign
knows, read-only), the proposal, the attempt it fills in, and what the gates before it left there (the build, the
loaded module, the exact-mode knobs). It never sees the campaign. No module outside gates/ calls a gate function or
orders the gates (tests/test_one_judge.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo.core.records import ACCEPTED, PASS, Attempt, Verdict
from evo.core.sanitizer_record import SanitizerRun
from gates.correctness import baseline_problem
from gates.registry import GateError, RegisteredGate, builtin_gates, gate_order

Check = Callable[["Evidence"], Verdict | None]  # what a gate runs

# The gates that judge a variant's outputs, as `evo ablate`, `evo export --check` and the probes ask for them: the
# exact-mode rule (it names the knobs that change the summation order) and the correctness gate it feeds.
OUTPUTS = ("exact_rule", "correctness")


@dataclass(frozen=True)
class References:
    """The frozen outputs a candidate is held against, where they are not the backend's own (a recorded sweep read
    without a backend: the search benchmark)."""

    baseline_hashes: Mapping[str, str]
    baseline_errors: Mapping[str, float]


@dataclass(frozen=True)
class JudgeContext:
    """What the gates may read of the campaign, made by the loop once per attempt (the champion and the recorded
    attempts change between attempts). Read-only: a gate that needs to keep something keeps it in ``Evidence``.

    The callables are the campaign's capabilities the gates use, each a narrow function (the campaign itself is not
    reachable from here).
    """

    family: Any  # evo.core.family.Family
    builder: Any  # harness.build.Builder (or a test's): build(genome, source) -> Built
    backend: Any  # evo.core.protocols.Backend
    config: Any  # evo.config.CampaignConfig: .gates (static, correctness, perf), .geometries, .bound, .e2e
    ideas: Mapping[str, Any]  # the campaign's source-level ideas by slug (evo/search/ideas.py)
    simulated: bool  # the backend replays recorded measurements (said in every timing's method)
    baseline: Attempt | None
    champion: Attempt | None  # None until the first accepted step: the baseline stands for it
    base_resources: Mapping[str, Any]  # the baseline's ptxas resources by module (the static gate)
    floor: float  # the campaign's noise floor (the perf gate's threshold)
    floors: Mapping[str, float]  # per geometry
    ceiling: Mapping[str, float]  # the copy ceiling ("ceiling_tbps"), empty when not measured
    # --- the campaign's capabilities -------------------------------------------------------------------------------
    load: Callable[[Any, Mapping[str, Any]], Any]  # (built, genome) -> the loaded module, cached by genome
    load_genome: Callable[[Mapping[str, Any]], Any]  # genome -> its loaded module (built when not cached)
    launch_sha256: Callable[[Any], str]  # genome -> its launch digest (evo/core/variant.py); raises LaunchError
    part_launches: Callable[[Sequence[tuple[str, Any]], Sequence[str], Any], dict[str, int]]
    launches_note: Callable[[Sequence[tuple[str, Any]], Any], str]  # the timing method's words on graph sizes
    inexact_ideas: Callable[[Mapping[str, Any]], list[str]]  # genome -> its ideas that change summation order
    uses_ideas: Callable[[Mapping[str, Any]], bool]  # genome -> whether it applies any source-level idea
    sanitize: Callable[[Attempt, bool], SanitizerRun]  # (attempt, source variant) -> the tools' run over it
    e2e: Callable[[Attempt], None]  # observe an accepted step end to end (fills attempt.bound, may reject)
    load_profile: Callable[[Any], Any]  # path -> the decode profile (evo/measure/profile.py) of the bound gate
    references: References | None = None  # None: the backend's frozen baseline_hashes / baseline_errors

    @property
    def reference(self) -> Any:
        """What the correctness gate holds outputs against: ``references`` if given, else the backend."""
        return self.references if self.references is not None else self.backend

    @classmethod
    def standalone(
        cls,
        config: Any,
        backend: Any = None,
        builder: Any = None,
        *,
        ideas: Mapping[str, Any] | None = None,
        inexact_ideas: Callable[[Mapping[str, Any]], list[str]] | None = None,
        uses_ideas: Callable[[Mapping[str, Any]], bool] | None = None,
        base_resources: Mapping[str, Any] | None = None,
        references: References | None = None,
        simulated: bool | None = None,
    ) -> JudgeContext:
        """A context for a caller that judges outside a campaign (``evo export --check``, ``evo check``, the probes,
        the search benchmark): no champion, no floors; modules loaded by the backend, uncached; ideas judged by the
        callables given (without them, a genome is taken to apply none). The campaign's other capabilities (timing,
        the sanitizer, e2e) are not there: a gate that asks for one raises GateError, naming it."""
        sim = bool(getattr(backend, "simulated", False)) if simulated is None else simulated

        def load_genome(genome: Mapping[str, Any]) -> Any:
            return backend.load(None if sim else builder.build(genome), genome)

        return cls(
            family=config.family,
            builder=builder,
            backend=backend,
            config=config,
            ideas=dict(ideas or {}),
            simulated=sim,
            baseline=None,
            champion=None,
            base_resources=dict(base_resources or {}),
            floor=0.0,
            floors={},
            ceiling={},
            load=lambda built, genome: backend.load(built, genome),
            load_genome=load_genome,
            launch_sha256=_missing("the launch digest"),
            part_launches=_missing("timing"),
            launches_note=_missing("timing"),
            inexact_ideas=inexact_ideas or (lambda genome: []),
            uses_ideas=uses_ideas or (lambda genome: False),
            sanitize=_missing("the sanitizer"),
            e2e=_missing("the end-to-end check"),
            load_profile=_missing("the decode profile"),
            references=references,
        )


def _missing(what: str) -> Callable[..., Any]:
    """A capability a standalone context lacks: asking for it is a caller's bug, named."""

    def missing(*_: Any) -> Any:
        raise GateError(f"{what} is the campaign's: a standalone judge context has none (judge with only=...)")

    return missing


@dataclass
class Evidence:
    """One attempt as the gates see it: what the judge hands each gate in turn, and what each leaves for the next (the
    build, the loaded module, the exact-mode knobs). Returned by ``judge`` with the verdict."""

    context: JudgeContext
    proposal: Any  # evo.search.Proposal: .genome (a Genome), .origin
    attempt: Attempt
    source: str | None = None  # a source variant (a fault, a replayed patch) instead of the genome's own
    remeasure: bool = False  # a replay measures identical machine code again on purpose
    recorded: list[Attempt] = field(default_factory=list)  # the attempts before this one (identical SASS)
    built: Any = None
    loaded: Any = None
    outputs: Any = None  # the correctness evidence (gates/correctness.py): the backend's check, or the caller's
    inexact: dict[str, list[str]] = field(default_factory=dict)
    t0: float = 0.0  # when measuring began (the attempt's measure_s)

    @property
    def accepted(self) -> bool:
        return self.attempt.verdict.status == ACCEPTED


def judge(
    proposal: Any,
    context: JudgeContext,
    attempt: Attempt | None = None,
    *,
    source: str | None = None,
    remeasure: bool = False,
    recorded: Sequence[Attempt] = (),
    gates: Sequence[Check] | None = None,
    only: Sequence[str] | None = None,
    built: Any = None,
    loaded: Any = None,
    outputs: Any = None,
) -> tuple[Verdict, Evidence]:
    """Judge ``proposal`` into ``attempt`` with ``gates`` (default: the registry's, ``pipeline()``), cheapest first;
    called once per attempt by the loop. A gate's Verdict becomes the attempt's; a failing one ends the judgement
    (``accepted`` passes on to the gates that only look at accepted attempts). An exception from a gate propagates
    with the attempt as far as it got (the loop records a harness error as its kind).

    ``only``: the registered gates of these names alone, in the judge's order; an attempt none of them rejects
    passes (PASS). What the gates left out would have left for the ones that run, the caller hands in: ``built``
    (the build's facts go onto the attempt), ``loaded`` (the module the correctness gate checks), ``outputs`` (the
    correctness evidence, checked without a module). ``attempt``: None makes a scratch one of the proposal's genome.
    """
    if attempt is None:
        genome = proposal.genome
        name = getattr(context.family, "name", "")
        attempt = Attempt(0, "", name, dict(genome), getattr(genome, "key", ""), getattr(proposal, "origin", ""))
    if only is not None:
        gates = [g for g in (pipeline() if gates is None else gates) if getattr(g, "name", None) in only]
        _named(only, gates)
        attempt.verdict = PASS
    ev = Evidence(context, proposal, attempt, source, remeasure, list(recorded), outputs=outputs)
    if built is not None:
        ev.built = built
        record_build(attempt, built)
    ev.loaded = loaded
    for gate in pipeline() if gates is None else gates:
        v = gate(ev)
        if v is not None:
            attempt.verdict = v
            if not v.ok:
                break
    return attempt.verdict, ev


def _named(only: Sequence[str], gates: Sequence[Any]) -> None:
    """Every name ``only`` asks for is a gate of the pipeline (a typo must not judge with fewer gates)."""
    missing = set(only) - {g.name for g in gates}
    if missing:
        raise GateError(f"no gate named {', '.join(sorted(missing))}; registered: {', '.join(gate_names())}")


def record_build(attempt: Attempt, built: Any) -> None:
    """A build's facts onto the attempt it is judged for: digests, ptxas's resources, compile time. Called by the
    build gate, and by ``judge`` for a build the caller made."""
    attempt.source_sha256, attempt.cubin_sha256 = built.source_sha256, built.cubin_sha256
    attempt.sass_sha256 = built.sass_sha256
    attempt.resources = {k: m.resources for k, m in built.modules.items()}
    attempt.compile_s = round(built.compile_s, 3)


def pipeline(
    only: Sequence[str] | None = None, *, replace: Mapping[str, Check] | None = None, builtin: bool = False
) -> list[RegisteredGate]:
    """The judge's gates, cheapest first: every registered gate (``builtin``: those of gates/pipeline/ alone), or
    the ``only`` named; ``replace`` swaps a named gate's check for this list only, keeping its place (the search
    benchmark's perf). Called once per campaign (``Campaign`` takes it when no ``gates=`` are given)."""
    gates = builtin_gates() if builtin else gate_order()
    if only is not None:
        gates = [g for g in gates if g.name in only]
        _named(only, gates)
    swap = dict(replace or {})
    unknown = set(swap) - {g.name for g in gates}
    if unknown:
        raise GateError(f"cannot replace gate(s) {', '.join(sorted(unknown))}: not in the pipeline")
    return [RegisteredGate(g.name, swap[g.name], g.order) if g.name in swap else g for g in gates]


def gate_names() -> list[str]:
    """The names of the registered gates, in the judge's order (what `evo replay --gate` takes beside the codes)."""
    return [g.name for g in gate_order()]


def reference_problem(evidence: Any, error_bound: Any) -> str | None:
    """Why the baseline's own outputs cannot be the reference (nonfinite, unwritten, beyond the family's error bound
    against float64), or None. Asked by the campaign's set-up and ``evo check`` before anything is held against it."""
    return baseline_problem(evidence, error_bound)


def recorded_outputs_pass(
    evidence: Any,
    baseline_hashes: Mapping[str, str],
    baseline_errors: Mapping[str, Any],
    mode: str,
    tolerance_factor: float,
    genome: Mapping[str, Any] | None = None,
) -> bool:
    """Whether recorded outputs (a sweep entry's evidence, harness.recorded.recorded_evidence) pass the campaign's
    correctness gate, judged outside a campaign: the registered gate through :func:`judge`, the mode and tolerance
    factor given, the sweep's frozen outputs as references. For readers of recorded sweeps (the search benchmark,
    the Kernel Tuner cache writer) that have no config."""
    from types import SimpleNamespace

    correctness = SimpleNamespace(mode=mode, tolerance_factor=tolerance_factor)
    config = SimpleNamespace(family=None, gates=SimpleNamespace(correctness=correctness))
    refs = References(dict(baseline_hashes), dict(baseline_errors))
    ctx = JudgeContext.standalone(config, references=refs, simulated=True)
    proposal = SimpleNamespace(genome=dict(genome or {}), note="recorded sweep entry", ideas=())
    return judge(proposal, ctx, only=("correctness",), outputs=evidence)[0].ok
